/*
 * test_06_decoder.c - chapter 06: the decoder layer and the decoder stack,
 * forward and backward, against goldens made by reference/ch06_decoder.py,
 * plus properties that hold for any input: causality (a later target
 * position never changes an earlier output, bit for bit, and passes it no
 * gradient), padding (a padded memory position changes nothing and gets no
 * gradient), accumulation, independence from the thread count, and the
 * case-file checks (a broken case is refused with one line naming the file,
 * and no output file appears).
 *
 * Every call's return code is checked before its outputs are read, so the
 * exercise stubs fail these tests cleanly.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include "threads.h"  /* OpenMP, or its one-thread stand-ins */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "casefile.h"
#include "decoder_case.h"
#include "decoder_layer.h"
#include "helpers.h"
#include "rng.h"

#define CHAPTER "06_decoder"

/* ------------------------------------------------------------------------ */
/* Goldens: every output the case lists, through the chapter's evaluator     */
/* ------------------------------------------------------------------------ */

static void test_decoder_case(void **state)
{
    TensorFile f, out = {0};
    load_golden(&f, CHAPTER, *state);
    int listed = assert_case_outputs(decoder_case_eval, &f, &out);
    assert_int_equal(out.n_tensors, listed);       /* nothing more than the case asks for */
    tensorfile_free(&out);
    tensorfile_free(&f);
}

/* ------------------------------------------------------------------------ */
/* A random layer for the property tests                                     */
/* ------------------------------------------------------------------------ */

enum { N = 2, T = 6, S = 5, D = 8, H = 2, F = 12 };

typedef struct {
    float *store;                   /* every parameter, one block */
    float *gstore;                  /* every gradient */
    DecoderLayerParams p;
    DecoderLayerParams g;           /* the gradients, in gstore */
} TestLayer;

/* The sizes above with these options, in d. */
static const LayerDims *layer_dims(LayerDims *d, int norm_first, float dropout)
{
    *d = (LayerDims){.N = N, .S = S, .T = T, .D = D, .H = H, .F = F, .norm_first = norm_first,
                     .eps = 1e-5f, .dropout = dropout};
    return d;
}

#define NPARAM (2 * (3 * D * D + 3 * D + D * D + D) + F * D + F + D * F + D + 6 * D)

static void test_layer_init(TestLayer *l, uint64_t seed)
{
    Rng rng;
    rng_seed(&rng, seed, 6);
    l->store = test_floats(NPARAM);
    l->gstore = test_floats(NPARAM);
    float *w = l->store, *gw = l->gstore;
    /* Hands out the next n floats of both blocks. */
#define TAKE(field, n, scale, offset)                                          \
    do {                                                                       \
        for (int i_ = 0; i_ < (n); i_++) w[i_] = (offset) + (scale) * rng_normal(&rng); \
        l->p.field = w, l->g.field = gw, w += (n), gw += (n);                  \
    } while (0)
    float s = 1.0f / sqrtf((float)D);
    TAKE(self_attn.in_proj_weight, 3 * D * D, s, 0);
    TAKE(self_attn.in_proj_bias, 3 * D, 0.2f, 0);
    TAKE(self_attn.out_proj_weight, D * D, s, 0);
    TAKE(self_attn.out_proj_bias, D, 0.2f, 0);
    TAKE(multihead_attn.in_proj_weight, 3 * D * D, s, 0);
    TAKE(multihead_attn.in_proj_bias, 3 * D, 0.2f, 0);
    TAKE(multihead_attn.out_proj_weight, D * D, s, 0);
    TAKE(multihead_attn.out_proj_bias, D, 0.2f, 0);
    TAKE(linear1_weight, F * D, s, 0);
    TAKE(linear1_bias, F, 0.2f, 0);
    TAKE(linear2_weight, D * F, 1.0f / sqrtf((float)F), 0);
    TAKE(linear2_bias, D, 0.2f, 0);
    for (int k = 0; k < 3; k++) {
        TAKE(norm_weight[k], D, 0.2f, 1);
        TAKE(norm_bias[k], D, 0.2f, 0);
    }
#undef TAKE
    assert_true(w == l->store + NPARAM);
}

static void test_layer_free(TestLayer *l)
{
    free(l->store);
    free(l->gstore);
}

static float *random_floats(int n, uint64_t seed)
{
    Rng rng;
    rng_seed(&rng, seed, 7);
    float *x = test_floats(n);
    for (int i = 0; i < n; i++) x[i] = rng_normal(&rng);
    return x;
}

/* ------------------------------------------------------------------------ */
/* Causality                                                                 */
/* ------------------------------------------------------------------------ */

/* Changing target position j leaves every output at positions < j
 * bit-identical, for the causal flag and for an explicit subsequent mask,
 * post- and pre-norm. */
static void check_causal_forward(int norm_first, int use_bias)
{
    TestLayer l;
    test_layer_init(&l, 11 + norm_first);
    float *tgt = random_floats(N * T * D, 1), *mem = random_floats(N * S * D, 2);
    float *y0 = test_floats(N * T * D), *y1 = test_floats(N * T * D);
    float *bias = NULL;
    if (use_bias) {
        uint8_t sub[T * T];
        for (int i = 0; i < T; i++)
            for (int j = 0; j < T; j++) sub[i * T + j] = j > i;   /* true = not allowed */
        bias = test_floats(N * H * T * T);
        assert_ok(mha_mask_bias(bias, NULL, 1, sub, 1, 0, N, H, T, T));
    }
    DecoderLayerCache c;
    Error err;
    LayerDims d;
    assert_ok(decoder_layer_cache_alloc(&c, layer_dims(&d, norm_first, 0.0f), 0, &err));
    DecoderMasks masks = {bias, !use_bias, NULL};
    assert_ok(decoder_layer_forward(y0, &c, tgt, mem, &l.p, &masks, NULL));
    for (int j = T - 1; j >= 1; j--) {
        for (int n = 0; n < N; n++)
            for (int d = 0; d < D; d++) tgt[(n * T + j) * D + d] += 0.5f;
        assert_ok(decoder_layer_forward(y1, &c, tgt, mem, &l.p, &masks, NULL));
        for (int n = 0; n < N; n++) {
            assert_memory_equal(y0 + n * T * D, y1 + n * T * D, (size_t)j * D * sizeof(float));
            /* ... while position j itself does change */
            assert_memory_not_equal(y0 + (n * T + j) * D, y1 + (n * T + j) * D,
                                    D * sizeof(float));
        }
    }
    decoder_layer_cache_free(&c);
    free(tgt), free(mem), free(y0), free(y1), free(bias);
    test_layer_free(&l);
}

static void test_causal_post_flag(void **state) { check_causal_forward(0, 0); }
static void test_causal_pre_flag(void **state) { check_causal_forward(1, 0); }
static void test_causal_post_mask(void **state) { check_causal_forward(0, 1); }
static void test_causal_pre_mask(void **state) { check_causal_forward(1, 1); }

/* The backward view of causality, through a 2-layer stack: a loss on the
 * outputs before position j sends exactly zero gradient to tgt at j and after. */
static void test_causal_gradient_stack(void **state)
{
    TestLayer l[2];
    test_layer_init(&l[0], 21), test_layer_init(&l[1], 22);
    DecoderLayerParams p[2] = {l[0].p, l[1].p}, g[2] = {l[0].g, l[1].g};
    float *tgt = random_floats(N * T * D, 3), *mem = random_floats(N * S * D, 4);
    float *nw = random_floats(D, 5), *nb = random_floats(D, 6);
    float *y = test_floats(N * T * D), *dy = random_floats(N * T * D, 7);
    float *dtgt = test_floats(N * T * D), *dmem = test_floats(N * S * D);
    float *dnw = test_floats(D), *dnb = test_floats(D);
    int j = 3;
    for (int n = 0; n < N; n++)
        for (int t = j; t < T; t++)
            for (int d = 0; d < D; d++) dy[(n * T + t) * D + d] = 0.0f;
    DecoderParams params = {2, p, nw, nb}, grads = {2, g, dnw, dnb};
    DecoderMasks causal = {NULL, 1, NULL};
    DecoderCache s;
    Error err;
    LayerDims d;
    assert_ok(decoder_cache_alloc(&s, 2, layer_dims(&d, 0, 0.0f), 1, &err));
    assert_ok(decoder_forward(y, &s, tgt, mem, &params, &causal, NULL));
    assert_ok(decoder_backward(dtgt, dmem, &grads, dy, tgt, mem, &params, &s));
    int nonzero_before = 0;
    for (int n = 0; n < N; n++)
        for (int t = 0; t < T; t++)
            for (int d = 0; d < D; d++) {
                float v = dtgt[(n * T + t) * D + d];
                if (t >= j) assert_same(v, 0.0f);
                else nonzero_before += v != 0.0f;
            }
    assert_true(nonzero_before > 0);
    decoder_cache_free(&s);
    free(tgt), free(mem), free(nw), free(nb), free(y), free(dy), free(dtgt), free(dmem);
    free(dnw), free(dnb);
    test_layer_free(&l[0]), test_layer_free(&l[1]);
}

/* ------------------------------------------------------------------------ */
/* Padding                                                                   */
/* ------------------------------------------------------------------------ */

/* A padded memory position is invisible: changing it changes no output, and
 * its gradient is exactly 0. */
static void test_memory_padding(void **state)
{
    TestLayer l;
    test_layer_init(&l, 31);
    float *tgt = random_floats(N * T * D, 8), *mem = random_floats(N * S * D, 9);
    float *y0 = test_floats(N * T * D), *y1 = test_floats(N * T * D);
    float *dy = random_floats(N * T * D, 10), *dmem = test_floats(N * S * D);
    uint8_t kpm[N * S] = {0};
    kpm[0 * S + S - 1] = 1;                     /* sequence 0: the last key is padding */
    kpm[1 * S + S - 2] = kpm[1 * S + S - 1] = 1;   /* sequence 1: the last two */
    float *bias = test_floats(N * H * T * S);
    assert_ok(mha_mask_bias(bias, kpm, 1, NULL, 1, 0, N, H, T, S));
    DecoderLayerCache c;
    Error err;
    LayerDims d;
    assert_ok(decoder_layer_cache_alloc(&c, layer_dims(&d, 1, 0.0f), 1, &err));
    DecoderMasks masks = {NULL, 1, bias};
    assert_ok(decoder_layer_forward(y0, &c, tgt, mem, &l.p, &masks, NULL));
    assert_ok(decoder_layer_backward(NULL, dmem, &l.g, dy, tgt, mem, &l.p, &c));
    for (int i = 0; i < N * S; i++)
        for (int d = 0; d < D; d++) {
            if (kpm[i]) {
                assert_same(dmem[i * D + d], 0.0f);
                mem[i * D + d] += 3.0f;
            }
        }
    assert_ok(decoder_layer_forward(y1, &c, tgt, mem, &l.p, &masks, NULL));
    assert_memory_equal(y0, y1, N * T * D * sizeof(float));
    decoder_layer_cache_free(&c);
    free(tgt), free(mem), free(y0), free(y1), free(dy), free(dmem), free(bias);
    test_layer_free(&l);
}

/* ------------------------------------------------------------------------ */
/* Accumulation and thread count                                             */
/* ------------------------------------------------------------------------ */

/* Runs forward and backward of one layer with `threads` OpenMP threads;
 * returns output, dtgt, dmem and the parameter gradients in one block. */
static float *run_layer(int threads, int norm_first, int twice)
{
    int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    TestLayer l;
    test_layer_init(&l, 41);
    float *tgt = random_floats(N * T * D, 11), *mem = random_floats(N * S * D, 12);
    float *dy = random_floats(N * T * D, 13);
    float *res = test_floats(2 * N * T * D + N * S * D + NPARAM);
    float *y = res, *dtgt = res + N * T * D, *dmem = dtgt + N * T * D;
    DecoderLayerCache c;
    Error err;
    LayerDims d;
    assert_ok(decoder_layer_cache_alloc(&c, layer_dims(&d, norm_first, 0.0f), 1, &err));
    DecoderMasks causal = {NULL, 1, NULL};
    assert_ok(decoder_layer_forward(y, &c, tgt, mem, &l.p, &causal, NULL));
    for (int r = 0; r < 1 + twice; r++)
        assert_ok(decoder_layer_backward(dtgt, dmem, &l.g, dy, tgt, mem, &l.p, &c));
    memcpy(dmem + N * S * D, l.gstore, NPARAM * sizeof(float));
    decoder_layer_cache_free(&c);
    free(tgt), free(mem), free(dy);
    test_layer_free(&l);
    omp_set_num_threads(saved);
    return res;
}

static void test_thread_count_independent(void **state)
{
    int n = 2 * N * T * D + N * S * D + NPARAM;
    for (int norm_first = 0; norm_first < 2; norm_first++) {
        float *a = run_layer(1, norm_first, 0), *b = run_layer(4, norm_first, 0);
        assert_memory_equal(a, b, n * sizeof(float));
        free(a), free(b);
    }
}

/* Two backward calls add the gradients twice. */
static void test_backward_accumulates(void **state)
{
    int n = 2 * N * T * D + N * S * D + NPARAM;
    float *once = run_layer(1, 0, 0), *twice = run_layer(1, 0, 1);
    for (int i = N * T * D; i < n; i++) once[i] *= 2.0f;
    assert_close("gradients after two backward calls", twice + N * T * D, once + N * T * D,
                 n - N * T * D, 1e-6, 1e-6);
    free(once), free(twice);
}

/* The stack with one layer and no final norm is the layer itself. */
static void test_stack_of_one_is_the_layer(void **state)
{
    TestLayer l;
    test_layer_init(&l, 51);
    float *tgt = random_floats(N * T * D, 14), *mem = random_floats(N * S * D, 15);
    float *y0 = test_floats(N * T * D), *y1 = test_floats(N * T * D);
    DecoderLayerCache c;
    DecoderCache s;
    DecoderParams one = {1, &l.p, NULL, NULL};
    DecoderMasks causal = {NULL, 1, NULL};
    Error err;
    LayerDims d;
    assert_ok(decoder_layer_cache_alloc(&c, layer_dims(&d, 0, 0.0f), 0, &err));
    assert_ok(decoder_cache_alloc(&s, 1, &d, 0, &err));
    assert_ok(decoder_layer_forward(y0, &c, tgt, mem, &l.p, &causal, NULL));
    assert_ok(decoder_forward(y1, &s, tgt, mem, &one, &causal, NULL));
    assert_memory_equal(y0, y1, N * T * D * sizeof(float));
    decoder_layer_cache_free(&c);
    decoder_cache_free(&s);
    free(tgt), free(mem), free(y0), free(y1);
    test_layer_free(&l);
}

/* Training-mode dropout: the same seed gives the same output, and with p > 0
 * the output differs from evaluation mode. */
static void test_dropout_training(void **state)
{
    TestLayer l;
    test_layer_init(&l, 61);
    float *tgt = random_floats(N * T * D, 16), *mem = random_floats(N * S * D, 17);
    float *ye = test_floats(N * T * D), *y1 = test_floats(N * T * D),
          *y2 = test_floats(N * T * D);
    DecoderLayerCache c;
    Error err;
    LayerDims d;
    assert_ok(decoder_layer_cache_alloc(&c, layer_dims(&d, 0, 0.3f), 1, &err));
    Rng r1, r2;
    rng_seed(&r1, 5, 0), rng_seed(&r2, 5, 0);
    DecoderMasks causal = {NULL, 1, NULL};
    assert_ok(decoder_layer_forward(ye, &c, tgt, mem, &l.p, &causal, NULL));
    assert_ok(decoder_layer_forward(y1, &c, tgt, mem, &l.p, &causal, &r1));
    assert_ok(decoder_layer_forward(y2, &c, tgt, mem, &l.p, &causal, &r2));
    assert_memory_equal(y1, y2, N * T * D * sizeof(float));
    assert_memory_not_equal(ye, y1, N * T * D * sizeof(float));
    float *dy = random_floats(N * T * D, 18), *dtgt = test_floats(N * T * D);
    assert_ok(decoder_layer_backward(dtgt, NULL, &l.g, dy, tgt, mem, &l.p, &c));
    for (int i = 0; i < N * T * D; i++) assert_true(isfinite(dtgt[i]));
    decoder_layer_cache_free(&c);
    free(tgt), free(mem), free(ye), free(y1), free(y2), free(dy), free(dtgt);
    test_layer_free(&l);
}

static void test_cache_alloc_checks(void **state)
{
    DecoderLayerCache c;
    Error err;
    LayerDims d = {.N = 1, .S = 2, .T = 2, .D = 6, .H = 4, .F = 3, .eps = 1e-5f};
    assert_int_equal(decoder_layer_cache_alloc(&c, &d, 0, &err), -1);
    assert_non_null(strstr(err.msg, "not divisible by nhead 4"));
    d.D = 8, d.dropout = 1.0f;
    assert_int_equal(decoder_layer_cache_alloc(&c, &d, 0, &err), -1);
    assert_non_null(strstr(err.msg, "dropout"));
    DecoderCache s;
    d.H = 2, d.dropout = 0.0f;
    assert_int_equal(decoder_cache_alloc(&s, 0, &d, 0, &err), -1);
    assert_non_null(strstr(err.msg, "num_layers 0"));
}

/* ------------------------------------------------------------------------ */
/* Bad cases                                                                 */
/* ------------------------------------------------------------------------ */


#define LAYER_G "decoder_layer_post_pad_N3_T6_S4_D12_H3"
#define LAYER_BG "decoder_layer_backward_post_N2_T5_S7_D8_H2"

static const BrokenCase BAD[] = {
    {"bad_missing_op", LAYER_G, BREAK_SET_META, "op", "", {0}, 0, "metadata 'op' is missing"},
    {"bad_unknown_op", LAYER_G, BREAK_SET_META, "op", "encoder_layer", {0}, 0,
     "op 'encoder_layer' is not a chapter 06 op"},
    {"bad_missing_nhead", LAYER_G, BREAK_SET_META, "nhead", "", {0}, 0, "'nhead' is missing"},
    {"bad_nhead_divides", LAYER_G, BREAK_SET_META, "nhead", "5", {0}, 0,
     "d_model 12 (the last dimension of 'tgt') is not divisible by nhead 5"},
    {"bad_missing_memory", LAYER_G, BREAK_DROP, "memory", NULL, {0}, 0, "'memory' is missing"},
    {"bad_memory_batch", LAYER_G, BREAK_RESHAPE, "memory", NULL, {2, 4, 12}, 3,
     "memory (2, 4, 12) must have the batch size N and d_model D of tgt (3, 6, 12)"},
    {"bad_missing_param", LAYER_G, BREAK_DROP, "multihead_attn.in_proj_weight", NULL, {0}, 0,
     "'multihead_attn.in_proj_weight' is missing"},
    {"bad_param_shape", LAYER_G, BREAK_RESHAPE, "linear2.weight", NULL, {12, 23}, 2,
     "'linear2.weight' has shape (12, 23), expected (D, F) = (12, 24)"},
    {"bad_norm_shape", LAYER_G, BREAK_RESHAPE, "norm3.bias", NULL, {11}, 1,
     "'norm3.bias' has shape (11), expected (D,) = (12)"},
    {"bad_tgt_mask_shape", LAYER_G, BREAK_RESHAPE_BOOL, "tgt_mask", NULL, {6, 5}, 2,
     "'tgt_mask' has shape (6, 5), expected (T, T) = (6, 6)"},
    {"bad_kpm_shape", LAYER_G, BREAK_RESHAPE_BOOL, "memory_key_padding_mask", NULL, {3, 6}, 2,
     "expected (N, S) = (3, 4)"},
    {"bad_kpm_float", LAYER_G, BREAK_RESHAPE, "tgt_key_padding_mask", NULL, {3, 6}, 2,
     "'tgt_key_padding_mask' has dtype F32, expected BOOL"},
    {"bad_mask_byte", LAYER_G, BREAK_POKE_BYTE, "tgt_mask", "7", {0}, 0, "holds the byte 7"},
    {"bad_causal_without_mask", LAYER_G, BREAK_DROP, "tgt_mask", NULL, {0}, 0, ""},
    {"bad_dropout", LAYER_G, BREAK_SET_META, "dropout", "0.1", {0}, 0,
     "metadata 'dropout' is '0.1'"},
    {"bad_eps", LAYER_G, BREAK_SET_META, "eps", "0", {0}, 0,
     "eps is 0, outside [1e-38, 3.4e38]"},
    {"bad_memory_mask", LAYER_G, BREAK_RESHAPE_BOOL, "memory_mask", NULL, {6, 4}, 2,
     "'memory_mask' is present; not supported"},
    {"bad_grad_output_shape", LAYER_BG, BREAK_RESHAPE, "grad_output", NULL, {2, 5, 9}, 3,
     "'grad_output' has shape (2, 5, 9), expected (N, T, D)"},
    {"bad_missing_num_layers", "decoder_post_2layers_N2_T5_S6_D8_H2", BREAK_SET_META, "num_layers",
     "", {0}, 0, "'num_layers' is missing"},
    {"bad_too_many_layers", "decoder_post_2layers_N2_T5_S6_D8_H2", BREAK_SET_META, "num_layers",
     "3", {0}, 0, "'layers.2.self_attn.in_proj_weight' is missing"},
    {"bad_final_norm_false", "decoder_pre_2layers_norm_N2_T5_S6_D8_H2", BREAK_SET_META,
     "final_norm", "false", {0}, 0, "'final_norm' is false but the case holds norm.weight"},
    {"bad_final_norm_missing", "decoder_pre_2layers_norm_N2_T5_S6_D8_H2", BREAK_DROP, "norm.bias",
     NULL, {0}, 0, "'norm.bias' is missing"},
};

static void test_bad_case(void **state)
{
    const BrokenCase *bad = *state;
    TensorFile f;
    broken_case_make(&f, CHAPTER, bad);
    const char *expect = bad->expect;
    if (!strcmp(bad->name, "bad_causal_without_mask")) {
        Error e;
        assert_ok(tensorfile_set_meta(&f, "tgt_is_causal", "true", &e));
        expect = "'tgt_is_causal' is true but there is no tgt_mask";
    }
    assert_case_refused(decoder_case_eval, &f, expect);
    tensorfile_free(&f);
}

/* Through run_case_file, as the program runs it: exit 1 and no output file. */
static void test_bad_case_writes_no_file(void **state)
{
    /* a parameter of the wrong shape */
    assert_broken_case_writes_no_file(CHAPTER, &BAD[7], decoder_case_eval);
}

/* ------------------------------------------------------------------------ */

#define BAD_TEST(i) {BAD[i].name, test_bad_case, NULL, NULL, (void *)&BAD[i]}

/* The malformed-input corpus of this chapter (tests/malformed/06_decoder/): each
 * file gets a one-line error naming it, and no output appears. */
CASE_CORPUS_READER(read_corpus_case, decoder_case_eval)

static void test_malformed_corpus(void **state)
{
    (void)state;
    check_malformed_corpus("06_decoder", read_corpus_case, 3);
}

int main(void)
{
    /* Not static: the table reads entries of other arrays at run time (C has
     * no constant expression for them, and clang says so). */
    const struct CMUnitTest tests[] = {
        GOLDEN_TEST(test_decoder_case, "decoder_layer_post_N2_T5_S7_D8_H2"),
        GOLDEN_TEST(test_decoder_case, "decoder_layer_pre_N2_T5_S7_D8_H2"),
        GOLDEN_TEST(test_decoder_case, "decoder_layer_post_pad_N3_T6_S4_D12_H3"),
        GOLDEN_TEST(test_decoder_case, "decoder_layer_pre_pad_N3_T6_S4_D12_H3"),
        GOLDEN_TEST(test_decoder_case, "decoder_layer_post_H1_nomask_N1_T4_S4_D6"),
        GOLDEN_TEST(test_decoder_case, "decoder_layer_post_float_mask_causal_N2_T7_S3_D8_H4"),
        GOLDEN_TEST(test_decoder_case, "decoder_layer_pre_causal_pad_eps1e-6_N2_T4_S9_D16_H2"),
        GOLDEN_TEST(test_decoder_case, "decoder_layer_post_T1_S1_N2_D4_H2"),
        GOLDEN_TEST(test_decoder_case, "decoder_layer_backward_post_N2_T5_S7_D8_H2"),
        GOLDEN_TEST(test_decoder_case, "decoder_layer_backward_pre_N2_T5_S7_D8_H2"),
        GOLDEN_TEST(test_decoder_case, "decoder_layer_backward_post_pad_N3_T6_S4_D12_H3"),
        GOLDEN_TEST(test_decoder_case, "decoder_layer_backward_pre_pad_N3_T6_S4_D12_H3"),
        GOLDEN_TEST(test_decoder_case, "decoder_layer_backward_post_H1_nomask_N1_T4_S4_D6"),
        GOLDEN_TEST(test_decoder_case,
                    "decoder_layer_backward_post_float_mask_causal_N2_T7_S3_D8_H4"),
        GOLDEN_TEST(test_decoder_case,
                    "decoder_layer_backward_pre_causal_pad_eps1e-6_N2_T4_S9_D16_H2"),
        GOLDEN_TEST(test_decoder_case, "decoder_layer_backward_post_T1_S1_N2_D4_H2"),
        GOLDEN_TEST(test_decoder_case, "decoder_post_2layers_N2_T5_S6_D8_H2"),
        GOLDEN_TEST(test_decoder_case, "decoder_pre_2layers_norm_N2_T5_S6_D8_H2"),
        GOLDEN_TEST(test_decoder_case, "decoder_post_2layers_norm_pad_N3_T4_S5_D12_H3"),
        GOLDEN_TEST(test_decoder_case, "decoder_backward_post_2layers_N2_T5_S6_D8_H2"),
        GOLDEN_TEST(test_decoder_case, "decoder_backward_pre_2layers_norm_N2_T5_S6_D8_H2"),
        GOLDEN_TEST(test_decoder_case, "decoder_backward_post_2layers_norm_pad_N3_T4_S5_D12_H3"),
        cmocka_unit_test(test_causal_post_flag),
        cmocka_unit_test(test_causal_pre_flag),
        cmocka_unit_test(test_causal_post_mask),
        cmocka_unit_test(test_causal_pre_mask),
        cmocka_unit_test(test_causal_gradient_stack),
        cmocka_unit_test(test_memory_padding),
        cmocka_unit_test(test_thread_count_independent),
        cmocka_unit_test(test_backward_accumulates),
        cmocka_unit_test(test_stack_of_one_is_the_layer),
        cmocka_unit_test(test_dropout_training),
        cmocka_unit_test(test_cache_alloc_checks),
        BAD_TEST(0), BAD_TEST(1), BAD_TEST(2), BAD_TEST(3), BAD_TEST(4), BAD_TEST(5),
        BAD_TEST(6), BAD_TEST(7), BAD_TEST(8), BAD_TEST(9), BAD_TEST(10), BAD_TEST(11),
        BAD_TEST(12), BAD_TEST(13), BAD_TEST(14), BAD_TEST(15), BAD_TEST(16), BAD_TEST(17),
        BAD_TEST(18), BAD_TEST(19), BAD_TEST(20), BAD_TEST(21),
        cmocka_unit_test(test_bad_case_writes_no_file),
        cmocka_unit_test(test_malformed_corpus),
    };
    return run_chapter_tests("06_decoder", tests);
}
