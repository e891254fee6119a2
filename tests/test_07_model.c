/*
 * test_07_model.c - chapter 07: the whole models (seq2seq, labeller,
 * classifier) forward and backward, greedy decoding, beam search and top-k,
 * and checkpoints, against goldens made by reference/ch07_model.py; plus
 * properties that need no golden (a C checkpoint round trip, beam width 1
 * being greedy, independence from the thread count) and the checks of bad
 * input: configs model_config_check refuses, sequences longer than
 * max_len, ids outside a vocabulary, broken checkpoints and broken cases,
 * each refused with one line naming the file.
 *
 * Every call's return code is checked before its outputs are read, so the
 * exercise stubs fail these tests cleanly.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <math.h>
#include "threads.h"  /* OpenMP, or its one-thread stand-ins */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "casefile.h"
#include "decode.h"
#include "helpers.h"
#include "model.h"
#include "model_case.h"
#include "rng.h"
#include "model_file.h"

#define CHAPTER "07_model"

/* ------------------------------------------------------------------------ */
/* Goldens: every output the case lists, through the chapter's evaluator     */
/* ------------------------------------------------------------------------ */

/* Token ids are compared exactly; everything else within the case's
 * tolerance (a checkpoint's: 0, bit for bit). */
static void test_model_case(void **state)
{
    TensorFile f, out = {0};
    load_golden(&f, CHAPTER, *state);
    int listed = assert_case_outputs(model_case_eval, &f, &out);
    assert_int_equal(out.n_tensors, listed);       /* nothing more than the case asks for */
    tensorfile_free(&out);
    tensorfile_free(&f);
}

/* ------------------------------------------------------------------------ */
/* Checkpoints                                                               */
/* ------------------------------------------------------------------------ */

/* A temporary file under build/, unique to this process. */
static void tmp_path(char *buf, size_t size, const char *tag)
{
    snprintf(buf, size, "build/tmp_test07_%s_%d.safetensors", tag, (int)getpid());
}

/* The golden checkpoint_seq2seq is a file reference.ch07_model's
 * save_checkpoint wrote. model_load (strict) reads it; its parameters are
 * those of the companion case model_checkpoint_seq2seq, bit for bit, and
 * the forward gives that case's logits. */
static void test_checkpoint_from_pytorch(void **state)
{
    Model m;
    Error err;
    if (model_load(&m, "golden/" CHAPTER "/checkpoint_seq2seq.safetensors", &err) != 0) {
        print_error("%s (run make golden)\n", err.msg);
        fail();
    }
    TensorFile f;
    load_golden(&f, CHAPTER, "model_checkpoint_seq2seq");
    for (int i = 0; i < m.n_tensors; i++) {
        const ModelTensor *t = &m.tensors[i];
        const Tensor *want = golden_tensor(&f, t->name, DTYPE_F32);
        assert_int_equal(tensor_numel(want), (int64_t)t->numel);
        assert_memory_equal(m.params + t->offset, want->data, t->numel * sizeof(float));
    }
    const Tensor *src = golden_tensor(&f, "src", DTYPE_I64), *tgt = golden_tensor(&f, "tgt",
                                                                                   DTYPE_I64);
    ModelWork w;
    assert_ok(model_work_alloc(&w, &m, (int)src->shape[0], (int)src->shape[1],
                               (int)tgt->shape[1], 0, &err));
    assert_ok(model_forward(&m, &w, src->data, tgt->data, NULL));
    double atol, rtol;
    golden_tolerance(&f, &atol, &rtol);
    print_message("  %d tensors identical to the case's\n", m.n_tensors);
    assert_close_to_golden(&f, "logits", w.logits, w.rows * m.cfg.tgt_vocab, atol, rtol);
    model_work_free(&w);
    model_free(&m);
    tensorfile_free(&f);
}

static const ModelConfig SEQ2SEQ = {
    .kind = MODEL_SEQ2SEQ, .src_vocab = 9, .tgt_vocab = 9, .d_model = 8, .nhead = 2,
    .dim_feedforward = 12, .num_encoder_layers = 2, .num_decoder_layers = 1, .max_len = 7,
    .learned_pos = 1, .scale_embedding = 2, .share_embeddings = 1, .final_norm = 1,
    .norm_first = 1, .pad_id = 0, .eps = 1e-6f, .dropout = 0.1f};
static const ModelConfig LABELLER = {
    .kind = MODEL_LABELLER, .src_vocab = 10, .tgt_vocab = 10, .d_model = 8, .nhead = 1,
    .dim_feedforward = 16, .num_encoder_layers = 1, .max_len = 6, .pad_id = -1, .eps = 1e-5f};
static const ModelConfig CLASSIFIER = {
    .kind = MODEL_CLASSIFIER, .src_vocab = 7, .tgt_vocab = 3, .d_model = 6, .nhead = 3,
    .dim_feedforward = 5, .num_encoder_layers = 2, .max_len = 5, .scale_embedding = 1,
    .final_norm = 1, .pad_id = 2, .eps = 1e-5f};
static const ModelConfig LM_PRE = {
    .kind = MODEL_LM, .src_vocab = 11, .tgt_vocab = 11, .d_model = 12, .nhead = 3,
    .dim_feedforward = 20, .num_encoder_layers = 2, .max_len = 9, .learned_pos = 1,
    .final_norm = 1, .norm_first = 1, .pad_id = -1, .eps = 1e-5f};
static const ModelConfig LM_POST = {
    .kind = MODEL_LM, .src_vocab = 7, .tgt_vocab = 7, .d_model = 8, .nhead = 2,
    .dim_feedforward = 16, .num_encoder_layers = 1, .max_len = 8, .scale_embedding = 1,
    .pad_id = -1, .eps = 1e-5f};

/* model_save then model_load gives the same config and the same parameters,
 * bit for bit, for each kind. */
static void test_save_load_round_trip(void **state)
{
    const ModelConfig *cfgs[] = {&SEQ2SEQ, &LABELLER, &CLASSIFIER, &LM_PRE};
    for (int i = 0; i < 4; i++) {
        Model a, b;
        Rng rng;
        Error err;
        char path[256];
        rng_seed(&rng, 70 + i, 0);
        tmp_path(path, sizeof path, "round_trip");
        assert_ok(model_init(&a, cfgs[i], &rng, &err));
        if (model_save(&a, path, &err) != 0 || model_load(&b, path, &err) != 0) {
            print_error("%s\n", err.msg);
            fail();
        }
        unlink(path);
        assert_memory_equal(&a.cfg, &b.cfg, sizeof a.cfg);
        assert_int_equal(a.num_params, b.num_params);
        assert_int_equal(a.n_tensors, b.n_tensors);
        assert_memory_equal(a.params, b.params, a.num_params * sizeof(float));
        for (int t = 0; t < a.n_tensors; t++) assert_string_equal(a.tensors[t].name,
                                                                   b.tensors[t].name);
        print_message("  kind %d: %zu parameters in %d tensors, bit-identical after save and "
                      "load\n", cfgs[i]->kind, a.num_params, a.n_tensors);
        model_free(&a);
        model_free(&b);
    }
}

/* Writes a copy of the golden checkpoint changed by `change`, and checks
 * model_load refuses it with one line naming the file and `expect`. */
typedef enum { CK_TRUNCATE, CK_RESHAPE, CK_DROP, CK_EXTRA, CK_META, CK_DTYPE } CkChange;

static void check_bad_checkpoint(CkChange change, const char *key, const char *value,
                                 const char *expect)
{
    char path[256];
    Error err;
    tmp_path(path, sizeof path, "bad_checkpoint");
    TensorFile f, g = {0};
    load_golden(&f, CHAPTER, "checkpoint_seq2seq");
    g.path = NULL;
    for (int i = 0; i < f.n_tensors; i++) {
        const Tensor *t = &f.tensors[i].tensor;
        if (change == CK_DROP && !strcmp(f.tensors[i].name, key)) continue;
        Tensor c;
        int64_t shape[TENSOR_MAX_DIMS];
        memcpy(shape, t->shape, sizeof shape);
        DType dtype = t->dtype;
        if (!strcmp(f.tensors[i].name, key) && change == CK_RESHAPE) shape[0] += 1;
        if (!strcmp(f.tensors[i].name, key) && change == CK_DTYPE) dtype = DTYPE_F64;
        assert_ok(tensor_alloc(&c, dtype, t->ndim, shape, &err));
        assert_ok(tensorfile_add(&g, f.tensors[i].name, &c, &err));
    }
    if (change == CK_EXTRA) {
        Tensor c;
        assert_ok(tensor_alloc(&c, DTYPE_F32, 1, (int64_t[]){3}, &err));
        assert_ok(tensorfile_add(&g, key, &c, &err));
    }
    for (int i = 0; i < f.n_meta; i++) {
        const char *v = f.meta_values[i];
        if (change == CK_META && !strcmp(f.meta_keys[i], key)) {
            if (!value) continue;
            v = value;
        }
        assert_ok(tensorfile_set_meta(&g, f.meta_keys[i], v, &err));
    }
    assert_ok(safetensors_write(path, &g, &err));
    if (change == CK_TRUNCATE) {
        FILE *fp = fopen(path, "rb+");
        assert_non_null(fp);
        fseek(fp, 0, SEEK_END);
        long size = ftell(fp);
        fclose(fp);
        assert_ok(truncate(path, size / 2));
    }
    Model m;
    memset(&err, 0, sizeof err);
    int rc = model_load(&m, path, &err);
    print_message("  %s\n", err.msg);
    unlink(path);
    tensorfile_free(&f);
    tensorfile_free(&g);
    assert_int_equal(rc, -1);
    assert_non_null(strstr(err.msg, path));
    assert_null(strchr(err.msg, '\n'));
    if (!strstr(err.msg, expect)) {
        print_error("expected the error to mention '%s'\n", expect);
        fail();
    }
}

static void test_checkpoint_truncated(void **state)
{
    check_bad_checkpoint(CK_TRUNCATE, "", NULL, "");
}
static void test_checkpoint_wrong_shape(void **state)
{
    check_bad_checkpoint(CK_RESHAPE, "generator.weight", NULL, "generator.weight");
}
static void test_checkpoint_wrong_dtype(void **state)
{
    check_bad_checkpoint(CK_DTYPE, "src_scale", NULL, "'src_scale' has dtype F64");
}
static void test_checkpoint_missing_tensor(void **state)
{
    check_bad_checkpoint(CK_DROP, "decoder.layers.0.norm3.bias", NULL,
                         "'decoder.layers.0.norm3.bias' is missing");
}
static void test_checkpoint_extra_tensor(void **state)
{
    check_bad_checkpoint(CK_EXTRA, "decoder.layers.1.norm1.bias", NULL,
                         "'decoder.layers.1.norm1.bias' is not a parameter");
}
static void test_checkpoint_missing_config(void **state)
{
    check_bad_checkpoint(CK_META, "model.nhead", NULL, "model.nhead");
}
static void test_checkpoint_bad_config(void **state)
{
    check_bad_checkpoint(CK_META, "model.nhead", "3", "not divisible by nhead 3");
}
static void test_checkpoint_bad_kind(void **state)
{
    check_bad_checkpoint(CK_META, "model.kind", "translator", "translator");
}
/* A file with tensors but no model config at all. */
static void test_checkpoint_not_a_model(void **state)
{
    Model m;
    Error err;
    const char *path = "golden/06_decoder/decoder_layer_post_N2_T5_S7_D8_H2.safetensors";
    assert_int_equal(model_load(&m, path, &err), -1);
    print_message("  %s\n", err.msg);
    assert_non_null(strstr(err.msg, path));
    assert_non_null(strstr(err.msg, "model.kind"));
}

/* ------------------------------------------------------------------------ */
/* Configs, lengths and ids                                                  */
/* ------------------------------------------------------------------------ */

static void expect_config_refused(ModelConfig cfg, const char *expect)
{
    Error err = {{0}};
    assert_int_equal(model_config_check(&cfg, &err), -1);
    print_message("  %s\n", err.msg);
    assert_null(strchr(err.msg, '\n'));
    if (!strstr(err.msg, expect)) {
        print_error("expected the error to mention '%s'\n", expect);
        fail();
    }
    Model m;
    Rng rng;
    rng_seed(&rng, 1, 0);
    assert_int_equal(model_init(&m, &cfg, &rng, &err), -1);   /* and nothing allocated */
}

static void test_config_check(void **state)
{
    Error err;
    assert_ok(model_config_check(&SEQ2SEQ, &err));
    assert_ok(model_config_check(&LABELLER, &err));
    assert_ok(model_config_check(&CLASSIFIER, &err));
    ModelConfig c = SEQ2SEQ;
    c.nhead = 3;
    expect_config_refused(c, "d_model 8 is not divisible by nhead 3");
    c = SEQ2SEQ, c.pad_id = 9;
    expect_config_refused(c, "pad_id 9");
    c = CLASSIFIER, c.pad_id = 7;
    expect_config_refused(c, "pad_id 7");
    c = SEQ2SEQ, c.pad_id = -2;
    expect_config_refused(c, "pad_id -2");
    c = SEQ2SEQ, c.tgt_vocab = 10;
    expect_config_refused(c, "share_embeddings");
    c = SEQ2SEQ, c.num_decoder_layers = 0;
    expect_config_refused(c, "num_decoder_layers 0");
    c = LABELLER, c.num_decoder_layers = 1;
    expect_config_refused(c, "num_decoder_layers 1");
    c = LABELLER, c.dropout = 1.0f;
    expect_config_refused(c, "dropout");
    c = LABELLER, c.eps = 0.0f;
    expect_config_refused(c, "eps");
    c = LABELLER, c.scale_embedding = 3;
    expect_config_refused(c, "scale_embedding 3");
    c = LABELLER, c.d_model = 0;
    expect_config_refused(c, "d_model 0");
    /* sizes whose products wrap a size_t (issue 14's crash), and a position
     * table of 16 million rows that used to be built before any refusal */
    c = LABELLER, c.d_model = 123456789, c.nhead = 1, c.dim_feedforward = 1531879606;
    c.num_encoder_layers = 42;
    expect_config_refused(c, "this project allows at most");
    c = LABELLER, c.max_len = 16777215;
    expect_config_refused(c, "max_len 16777215 is not in [1, 65536]");
    /* two vocabularies whose int sum overflows (--vocab-size 2147483647,
     * which UBSan caught): counted without wrapping, refused by size */
    c = CLASSIFIER, c.src_vocab = INT_MAX, c.tgt_vocab = 2;
    expect_config_refused(c, "this project allows at most");
    c = SEQ2SEQ, c.src_vocab = c.tgt_vocab = INT_MAX;
    expect_config_refused(c, "this project allows at most");
}

/* A sequence longer than the position table is refused by
 * model_work_alloc, on either side. */
static void test_longer_than_max_len(void **state)
{
    Model m;
    ModelWork w;
    Rng rng;
    Error err;
    rng_seed(&rng, 3, 0);
    assert_ok(model_init(&m, &SEQ2SEQ, &rng, &err));
    assert_int_equal(model_work_alloc(&w, &m, 2, 8, 3, 0, &err), -1);
    print_message("  %s\n", err.msg);
    assert_non_null(strstr(err.msg, "longer than max_len 7"));
    assert_int_equal(model_work_alloc(&w, &m, 2, 3, 8, 1, &err), -1);
    assert_non_null(strstr(err.msg, "longer than max_len 7"));
    assert_ok(model_work_alloc(&w, &m, 2, 7, 7, 1, &err));   /* exactly max_len */
    model_work_free(&w);
    DecodeOptions d = {.sos_id = 1, .eos_id = 2, .max_new = 8, .beam_width = 2};
    int64_t src[3] = {3, 4, 5}, out[8];
    assert_int_equal(decode_greedy(&m, src, 1, 3, &d, out, NULL, &err), -1);
    print_message("  %s\n", err.msg);
    assert_non_null(strstr(err.msg, "max_new 8"));
    model_free(&m);
}

/* A work allocated for long sequences and reshaped to shorter ones gives
 * bit for bit the logits and gradients of a work allocated for the short
 * ones, in training mode (dropout drawn from the same stream) and after a
 * reshape back to the long lengths. */
static void test_work_reshape(void **state)
{
    enum { N = 3, S = 5, T = 4 };
    Model m;
    ModelWork big, exact;
    Rng init, drop_a, drop_b;
    Error err;
    rng_seed(&init, 8, 0);
    assert_ok(model_init(&m, &SEQ2SEQ, &init, &err));
    int64_t src[N * S] = {3, 4, 5, 0, 0, 6, 7, 8, 4, 0, 5, 5, 6, 7, 8};
    int64_t tgt[N * T] = {1, 3, 4, 0, 1, 5, 6, 7, 1, 8, 0, 0};
    float *dlogits = malloc(N * T * 9 * sizeof *dlogits);
    float *grads = malloc(m.num_params * sizeof *grads);
    for (int i = 0; i < N * T * 9; i++) dlogits[i] = (float)((i * 7) % 11) / 11.0f - 0.5f;
    assert_ok(model_work_alloc(&big, &m, N, 7, 7, 1, &err));
    assert_ok(model_work_alloc(&exact, &m, N, S, T, 1, &err));
    assert_int_equal(model_work_reshape(&big, &m, 8, T, &err), -1);   /* longer: refused */
    assert_ok(model_work_reshape(&big, &m, S, T, &err));
    rng_seed(&drop_a, 9, 1);
    rng_seed(&drop_b, 9, 1);
    model_zero_grad(&m);
    assert_ok(model_forward(&m, &exact, src, tgt, &drop_a));
    assert_ok(model_backward(&m, &exact, dlogits));
    memcpy(grads, m.grads, m.num_params * sizeof *grads);
    model_zero_grad(&m);
    assert_ok(model_forward(&m, &big, src, tgt, &drop_b));
    assert_ok(model_backward(&m, &big, dlogits));
    assert_int_equal(big.rows, N * T);
    assert_memory_equal(big.logits, exact.logits, N * T * 9 * sizeof(float));
    assert_memory_equal(m.grads, grads, m.num_params * sizeof *grads);
    assert_ok(model_work_reshape(&big, &m, 7, 7, &err));
    assert_int_equal(big.rows, N * 7);
    model_work_free(&big);
    model_work_free(&exact);
    free(dlogits), free(grads);
    model_free(&m);
}

/* The cache's step t gives the logits model_forward gives at position t of
 * the whole prefix (teacher forcing on a fixed target, padding included),
 * within float32 rounding, for pre- and post-norm layers, learned and
 * sinusoidal positions; and greedy and beam decoding with and without the
 * cache write the same tokens with the same scores. */
static void check_cache(const ModelConfig *cfg, const char *label)
{
    enum { N = 3, S = 5, T = 6, V = 9 };
    Model m;
    ModelWork w;
    DecodeCache c;
    Rng rng;
    Error err;
    rng_seed(&rng, 21, 0);
    assert_ok(model_init(&m, cfg, &rng, &err));
    int64_t src[N * S] = {3, 4, 5, 0, 0, 6, 7, 8, 4, 5, 5, 5, 6, 0, 0};
    int64_t tgt[N * T] = {1, 3, 4, 5, 6, 7, 1, 8, 0, 4, 4, 4, 1, 2, 3, 3, 8, 8};
    float logits[N * V];
    assert_ok(model_work_alloc(&w, &m, N, S, T, 0, &err));
    assert_ok(model_forward(&m, &w, src, tgt, NULL));
    assert_ok(decode_cache_init(&c, &m, src, N, S, T, &err));
    double worst = 0;
    for (int t = 0; t < T; t++) {
        int64_t tokens[N];
        for (int n = 0; n < N; n++) tokens[n] = tgt[n * T + t];
        assert_ok(decode_cache_step(&c, &m, tokens, logits));
        for (int n = 0; n < N; n++)
            for (int v = 0; v < V; v++) {
                double want = w.logits[((size_t)n * T + t) * V + v], got = logits[n * V + v];
                double gap = fabs(got - want);
                if (gap > worst) worst = gap;
                assert_true(gap <= 1e-5 + 1e-5 * fabs(want));
            }
    }
    assert_int_equal(decode_cache_step(&c, &m, tgt, logits), -1);   /* M steps done */
    print_message("  %s: cached logits within %.2g of the whole-prefix forward\n", label, worst);
    decode_cache_free(&c);
    model_work_free(&w);

    DecodeOptions d = {.sos_id = 1, .eos_id = 2, .max_new = 7, .beam_width = 3,
                       .length_penalty = 0.6f};
    int64_t a[N * 7], b[N * 7];
    float sa[N], sb[N];
    for (int beam = 0; beam < 2; beam++) {
        d.no_cache = 0;
        assert_int_equal((beam ? decode_beam : decode_greedy)(&m, src, N, S, &d, a, sa, &err), 0);
        d.no_cache = 1;
        assert_int_equal((beam ? decode_beam : decode_greedy)(&m, src, N, S, &d, b, sb, &err), 0);
        assert_memory_equal(a, b, sizeof a);
        for (int n = 0; n < N; n++) assert_true(fabs(sa[n] - sb[n]) <= 1e-5 * (1 + fabs(sb[n])));
    }
    model_free(&m);
}

static void test_cache_matches_full_decoder(void **state)
{
    check_cache(&SEQ2SEQ, "pre-norm, learned positions, shared embeddings, final norm");
    ModelConfig post = SEQ2SEQ;
    post.norm_first = 0, post.final_norm = 0, post.learned_pos = 0, post.scale_embedding = 1;
    post.share_embeddings = 0, post.num_decoder_layers = 2;
    check_cache(&post, "post-norm, sinusoidal positions, two decoder layers");
}

static void test_ids_out_of_range(void **state)
{
    Error err;
    int64_t ids[4] = {0, 3, 9, 2};
    assert_ok(model_check_ids(ids, 4, 10, "ids", &err));
    assert_int_equal(model_check_ids(ids, 4, 9, "ids", &err), -1);
    print_message("  %s\n", err.msg);
    assert_non_null(strstr(err.msg, "ids"));
    assert_non_null(strstr(err.msg, "9"));
    ids[0] = -1;
    assert_int_equal(model_check_ids(ids, 4, 10, "ids", &err), -1);
    /* the decoders check their source too */
    Model m;
    Rng rng;
    rng_seed(&rng, 4, 0);
    assert_ok(model_init(&m, &SEQ2SEQ, &rng, &err));
    DecodeOptions d = {.sos_id = 1, .eos_id = 2, .max_new = 3, .beam_width = 2};
    int64_t src[3] = {3, 9, 5}, out[3];
    assert_int_equal(decode_beam(&m, src, 1, 3, &d, out, NULL, &err), -1);
    print_message("  %s\n", err.msg);
    assert_non_null(strstr(err.msg, "src"));
    model_free(&m);
}

/* ------------------------------------------------------------------------ */
/* Decoding properties                                                       */
/* ------------------------------------------------------------------------ */

/* Loads the model of a golden decoding case (not strictly: the case holds
 * its inputs too) and its src. */
static void load_case_model(const char *name, TensorFile *f, Model *m, const Tensor **src)
{
    Error err;
    load_golden(f, CHAPTER, name);
    if (model_load_file(m, f, 0, &err) != 0) {
        print_error("%s\n", err.msg);
        fail();
    }
    *src = golden_tensor(f, "src", DTYPE_I64);
}

/* With beam width 1 and no length penalty, beam search is greedy decoding:
 * the same tokens and the same score, on the trained model and on the
 * untrained one (where hypotheses end early). */
static void test_beam_width_one_is_greedy(void **state)
{
    const char *cases[] = {"greedy_reverse", "greedy_untrained"};
    for (int c = 0; c < 2; c++) {
        TensorFile f;
        Model m;
        const Tensor *src;
        Error err;
        load_case_model(cases[c], &f, &m, &src);
        int N = (int)src->shape[0], S = (int)src->shape[1];
        DecodeOptions d = {.sos_id = 1, .eos_id = 2, .max_new = m.cfg.max_len,
                           .beam_width = 1, .length_penalty = 0.0f};
        int64_t *g = calloc((size_t)N * d.max_new, sizeof *g);
        int64_t *b = calloc((size_t)N * d.max_new, sizeof *b);
        float *gs = test_floats(N), *bs = test_floats(N);
        assert_ok(decode_greedy(&m, src->data, N, S, &d, g, gs, &err));
        assert_ok(decode_beam(&m, src->data, N, S, &d, b, bs, &err));
        assert_memory_equal(g, b, (size_t)N * d.max_new * sizeof *g);
        assert_close("beam width 1: scores equal greedy's", bs, gs, N, 1e-6, 1e-6);
        free(g), free(b), free(gs), free(bs);
        model_free(&m);
        tensorfile_free(&f);
    }
}

/* The greedy score is the sum of the log-probabilities that a teacher-forced
 * forward pass over <sos> + the decoded tokens gives those tokens. */
static void test_greedy_score_is_teacher_forced(void **state)
{
    TensorFile f;
    Model m;
    const Tensor *src;
    Error err;
    load_case_model("greedy_reverse", &f, &m, &src);
    int N = (int)src->shape[0], S = (int)src->shape[1], M = m.cfg.max_len;
    int V = m.cfg.tgt_vocab;
    DecodeOptions d = {.sos_id = 1, .eos_id = 2, .max_new = M};
    int64_t *out = calloc((size_t)N * M, sizeof *out), *tgt = calloc((size_t)N * M, sizeof *tgt);
    float *score = test_floats(N), *again = test_floats(N);
    assert_ok(decode_greedy(&m, src->data, N, S, &d, out, score, &err));
    for (int n = 0; n < N; n++) {
        tgt[(size_t)n * M] = d.sos_id;
        for (int t = 1; t < M; t++) tgt[(size_t)n * M + t] = out[(size_t)n * M + t - 1];
    }
    ModelWork w;
    assert_ok(model_work_alloc(&w, &m, N, S, M, 0, &err));
    assert_ok(model_forward(&m, &w, src->data, tgt, NULL));
    for (int n = 0; n < N; n++) {
        double sum = 0;
        for (int t = 0; t < M; t++) {
            const float *row = w.logits + ((size_t)n * M + t) * V;
            double mx = row[0], z = 0;
            for (int v = 1; v < V; v++) mx = row[v] > mx ? row[v] : mx;
            for (int v = 0; v < V; v++) z += exp(row[v] - mx);
            int64_t tok = out[(size_t)n * M + t];
            sum += row[tok] - mx - log(z);
            if (tok == d.eos_id) break;
        }
        again[n] = (float)sum;
    }
    assert_close("greedy scores, teacher-forced again", again, score, N, 1e-5, 1e-5);
    model_work_free(&w);
    free(out), free(tgt), free(score), free(again);
    model_free(&m);
    tensorfile_free(&f);
}

/* A language model run one position at a time through the key/value cache
 * gives, at every position, the logits of model_forward over the whole
 * sequence: the causal mask is what makes the cache exact. Pre-norm with
 * learned positions and a final norm, and post-norm with the sinusoidal
 * table. */
static void test_lm_cache_matches_forward(void **state)
{
    const ModelConfig *cfgs[] = {&LM_PRE, &LM_POST};
    for (int i = 0; i < 2; i++) {
        enum { N = 2 };
        Model m;
        ModelWork w;
        DecodeCache c;
        Rng rng;
        Error err;
        int S = cfgs[i]->max_len, V = cfgs[i]->tgt_vocab;
        int64_t ids[N * 9], tokens[N];
        float step[N * 11], expect[N * 11];
        rng_seed(&rng, 90 + i, 0);
        assert_ok(model_init(&m, cfgs[i], &rng, &err));
        for (int k = 0; k < N * S; k++) ids[k] = rng_below(&rng, (uint32_t)V);
        assert_ok(model_work_alloc(&w, &m, N, S, 0, 0, &err));
        assert_int_equal(model_forward(&m, &w, ids, NULL, NULL), 0);
        assert_ok(decode_cache_init(&c, &m, NULL, N, 0, S, &err));
        for (int t = 0; t < S; t++) {
            for (int n = 0; n < N; n++) {
                tokens[n] = ids[n * S + t];
                memcpy(expect + n * V, w.logits + ((size_t)n * S + t) * V, V * sizeof(float));
            }
            assert_int_equal(decode_cache_step(&c, &m, tokens, step), 0);
            char label[64];
            snprintf(label, sizeof label, "lm %d: cached step = forward at t = %d", i, t);
            assert_close(label, step, expect, N * V, 1e-5, 1e-5);
        }
        assert_int_equal(decode_cache_step(&c, &m, tokens, step), -1);   /* past M */
        decode_cache_free(&c);
        model_work_free(&w);
        model_free(&m);
    }
}

static void test_decode_refuses(void **state)
{
    Model m;
    Rng rng;
    Error err;
    int64_t src[4] = {1, 2, 3, 4}, out[4];
    DecodeOptions d = {.sos_id = 1, .eos_id = 2, .max_new = 4, .beam_width = 2};
    rng_seed(&rng, 5, 0);
    assert_ok(model_init(&m, &LABELLER, &rng, &err));
    assert_int_equal(decode_greedy(&m, src, 1, 4, &d, out, NULL, &err), -1);
    print_message("  %s\n", err.msg);
    assert_non_null(strstr(err.msg, "only a seq2seq or language model"));
    model_free(&m);
    assert_ok(model_init(&m, &SEQ2SEQ, &rng, &err));
    d.sos_id = 0;                                   /* the padding id */
    assert_int_equal(decode_greedy(&m, src, 1, 4, &d, out, NULL, &err), -1);
    print_message("  %s\n", err.msg);
    assert_non_null(strstr(err.msg, "padding id"));
    d.sos_id = 1, d.eos_id = 9;
    assert_int_equal(decode_beam(&m, src, 1, 4, &d, out, NULL, &err), -1);
    assert_non_null(strstr(err.msg, "eos_id 9"));
    d.eos_id = 2, d.beam_width = 0;
    assert_int_equal(decode_beam(&m, src, 1, 4, &d, out, NULL, &err), -1);
    print_message("  %s\n", err.msg);
    assert_non_null(strstr(err.msg, "beam_width 0"));
    model_free(&m);
}

static void test_topk_order_and_ties(void **state)
{
    /* row 0: two equal maxima, the lower id first; row 1: a huge spread whose
     * small probabilities underflow in float32 but still rank by logit */
    const float logits[2 * 5] = {1.0f, 3.0f, 0.5f, 3.0f, -2.0f,
                                 0.0f, -200.0f, 100.0f, -150.0f, 50.0f};
    int64_t ids[2 * 5];
    float probs[2 * 5];
    assert_ok(model_topk(logits, 2, 5, 5, ids, probs));
    const int64_t want[2 * 5] = {1, 3, 0, 2, 4, 2, 4, 0, 3, 1};
    assert_memory_equal(ids, want, sizeof want);
    assert_true(probs[0] == probs[1]);
    double z = 2 * exp(3.0) + exp(1.0) + exp(0.5) + exp(-2.0);
    float expect[3] = {(float)(exp(3.0) / z), (float)(exp(3.0) / z), (float)(exp(1.0) / z)};
    assert_close("top-3 probabilities", probs, expect, 3, 1e-7, 1e-6);
    assert_int_equal(model_topk(logits, 2, 5, 6, ids, probs), -1);
    assert_int_equal(model_topk(logits, 2, 5, 0, ids, probs), -1);
}

/* ------------------------------------------------------------------------ */
/* Threads                                                                   */
/* ------------------------------------------------------------------------ */

/* Forward, backward and a beam search with 1 and with 4 threads. */
static void run_with_threads(int threads, float *logits, float *grads, int64_t *beam)
{
    int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    TensorFile f;
    Model m;
    const Tensor *src;
    Error err;
    load_case_model("model_backward_seq2seq_pre_learned_2x2", &f, &m, &src);
    const Tensor *tgt = golden_tensor(&f, "tgt", DTYPE_I64);
    const Tensor *dl = golden_tensor(&f, "grad_logits", DTYPE_F32);
    int N = (int)src->shape[0], S = (int)src->shape[1], T = (int)tgt->shape[1];
    ModelWork w;
    assert_ok(model_work_alloc(&w, &m, N, S, T, 1, &err));
    assert_ok(model_forward(&m, &w, src->data, tgt->data, NULL));
    model_zero_grad(&m);
    assert_ok(model_backward(&m, &w, dl->data));
    memcpy(logits, w.logits, (size_t)w.rows * m.cfg.tgt_vocab * sizeof *logits);
    memcpy(grads, m.grads, m.num_params * sizeof *grads);
    DecodeOptions d = {.sos_id = 1, .eos_id = 2, .max_new = 5, .beam_width = 3,
                       .length_penalty = 0.6f};
    assert_ok(decode_beam(&m, src->data, N, S, &d, beam, NULL, &err));
    model_work_free(&w);
    model_free(&m);
    tensorfile_free(&f);
    omp_set_num_threads(saved);
}

static void test_thread_count_independent(void **state)
{
    enum { LOGITS = 3 * 5 * 10, PARAMS = 100000, BEAM = 3 * 5 };
    float *l1 = test_floats(LOGITS), *l4 = test_floats(LOGITS);
    float *g1 = test_floats(PARAMS), *g4 = test_floats(PARAMS);
    int64_t b1[BEAM], b4[BEAM];
    run_with_threads(1, l1, g1, b1);
    run_with_threads(4, l4, g4, b4);
    assert_memory_equal(l1, l4, LOGITS * sizeof(float));
    assert_memory_equal(g1, g4, PARAMS * sizeof(float));
    assert_memory_equal(b1, b4, sizeof b1);
    free(l1), free(l4), free(g1), free(g4);
}

/* ------------------------------------------------------------------------ */
/* Bad cases                                                                 */
/* ------------------------------------------------------------------------ */


#define S2S "model_seq2seq_post_pad_sqrt"            /* N 3, S 7, T 6, Vs 11, Vt 9, L 10 */
#define S2S_B "model_backward_seq2seq_post_pad_sqrt"
#define LAB "model_labeller_reverse"                 /* N 4, S 16, V 10, L 16 */
#define GREEDY "greedy_reverse"                      /* max_len 8, V 11 */
#define BEAM "beam_reverse_w3_lp6"

static const BrokenCase BAD[] = {
    {"bad_missing_op", S2S, BREAK_SET_META, "op", "", {0}, 0, "metadata 'op' is missing"},
    {"bad_unknown_op", S2S, BREAK_SET_META, "op", "decoder", {0}, 0,
     "op 'decoder' is not a chapter 07 op"},
    {"bad_missing_kind", S2S, BREAK_SET_META, "model.kind", "", {0}, 0, "'model.kind'"},
    {"bad_kind", S2S, BREAK_SET_META, "model.kind", "encoder", {0}, 0, "'encoder'"},
    {"bad_nhead", S2S, BREAK_SET_META, "model.nhead", "3", {0}, 0, "not divisible by nhead 3"},
    {"bad_pad_id", S2S, BREAK_SET_META, "model.pad_id", "11", {0}, 0, "pad_id 11"},
    {"bad_d_model_text", S2S, BREAK_SET_META, "model.d_model", "sixteen", {0}, 0, "'sixteen'"},
    {"bad_missing_param", S2S, BREAK_DROP, "decoder.layers.0.multihead_attn.in_proj_bias", NULL,
     {0}, 0, "'decoder.layers.0.multihead_attn.in_proj_bias' is missing"},
    {"bad_param_shape", S2S, BREAK_RESHAPE, "tgt_embed.weight", NULL, {8, 16}, 2,
     "tgt_embed.weight"},
    {"bad_missing_src", S2S, BREAK_DROP, "src", NULL, {0}, 0, "'src' is missing"},
    {"bad_src_dtype", S2S, BREAK_RESHAPE, "src", NULL, {3, 7}, 2,
     "'src' has dtype F32, expected I64"},
    {"bad_src_rank", S2S, BREAK_RESHAPE_I64, "src", "3", {21}, 1, "'src' has rank 1, expected 2"},
    {"bad_src_empty", S2S, BREAK_RESHAPE_I64, "src", "3", {3, 0}, 2, "a length of at least 1"},
    {"bad_src_too_long", S2S, BREAK_RESHAPE_I64, "src", "3", {3, 11}, 2,
     "'src' has sequences of 11 positions, longer than model.max_len 10"},
    {"bad_src_id", S2S, BREAK_POKE_I64, "src", "11", {0}, 0, "'src'"},
    {"bad_src_negative_id", S2S, BREAK_POKE_I64, "src", "-1", {0}, 0, "'src'"},
    {"bad_missing_tgt", S2S, BREAK_DROP, "tgt", NULL, {0}, 0, "'tgt' is missing"},
    {"bad_tgt_batch", S2S, BREAK_RESHAPE_I64, "tgt", "3", {2, 6}, 2,
     "'tgt' holds 2 sequences, 'src' 3"},
    {"bad_tgt_id", S2S, BREAK_POKE_I64, "tgt", "9", {0}, 0, "'tgt'"},
    {"bad_tgt_for_labeller", LAB, BREAK_RESHAPE_I64, "tgt", "3", {4, 3}, 2,
     "a labeller model has no target input"},
    {"bad_grad_logits_shape", S2S_B, BREAK_RESHAPE, "grad_logits", NULL, {3, 6, 8}, 3,
     "'grad_logits' has shape (3, 6, 8), expected (3, 6, 9)"},
    {"bad_missing_grad_logits", S2S_B, BREAK_DROP, "grad_logits", NULL, {0}, 0,
     "'grad_logits' is missing"},
    {"bad_missing_sos", GREEDY, BREAK_SET_META, "sos_id", "", {0}, 0,
     "metadata 'sos_id' is missing (the <sos> id)"},
    {"bad_eos_range", GREEDY, BREAK_SET_META, "eos_id", "11", {0}, 0, "eos_id is 11"},
    {"bad_max_new", GREEDY, BREAK_SET_META, "max_new", "9", {0}, 0, "max_new is 9"},
    {"bad_sos_is_pad", GREEDY, BREAK_SET_META, "sos_id", "0", {0}, 0, "sos_id 0 is model.pad_id"},
    {"bad_beam_width", BEAM, BREAK_SET_META, "beam_width", "0", {0}, 0, "beam_width is 0"},
    {"bad_length_penalty", BEAM, BREAK_SET_META, "length_penalty", "nan", {0}, 0,
     "length_penalty is nan"},
    {"bad_topk_k", "topk_reverse_k3", BREAK_SET_META, "k", "12", {0}, 0, "k is 12"},
    {"bad_topk_missing_k", "topk_reverse_k3", BREAK_SET_META, "k", "", {0}, 0, "'k'"},
    {"bad_checkpoint_extra", "checkpoint_seq2seq", BREAK_RESHAPE, "src", NULL, {2}, 1,
     "'src' is not a parameter"},
};

static void test_bad_case(void **state)
{
    const BrokenCase *bad = *state;
    TensorFile f;
    broken_case_make(&f, CHAPTER, bad);
    assert_case_refused(model_case_eval, &f, bad->expect);
    tensorfile_free(&f);
}

/* Greedy decoding of a labeller, with every decoding option given: refused
 * for the model's kind. */
static void test_greedy_needs_seq2seq(void **state)
{
    TensorFile f;
    Error err;
    load_golden(&f, CHAPTER, LAB);
    const char *set[4][2] = {{"op", "greedy"}, {"sos_id", "1"}, {"eos_id", "2"}, {"max_new", "3"}};
    for (int i = 0; i < 4; i++) assert_ok(tensorfile_set_meta(&f, set[i][0], set[i][1], &err));
    assert_case_refused(model_case_eval, &f, "model.kind is labeller");
    tensorfile_free(&f);
}

/* Through run_case_file, as the program runs it: exit 1 and no output file. */
static void test_bad_case_writes_no_file(void **state)
{
    /* a source id outside the vocabulary */
    assert_broken_case_writes_no_file(CHAPTER, &BAD[14], model_case_eval);
}

/* ------------------------------------------------------------------------ */

#define BAD_TEST(i) {BAD[i].name, test_bad_case, NULL, NULL, (void *)&BAD[i]}

/* The malformed-input corpus of this chapter (tests/malformed/07_model/): each
 * file gets a one-line error naming it, and no output appears. */
CASE_CORPUS_READER(read_corpus_case, model_case_eval)

static void test_malformed_corpus(void **state)
{
    (void)state;
    check_malformed_corpus("07_model", read_corpus_case, 6);
}

int main(void)
{
    /* Not static: the table reads entries of other arrays at run time (C has
     * no constant expression for them, and clang says so). */
    const struct CMUnitTest tests[] = {
        GOLDEN_TEST(test_model_case, "model_labeller_reverse"),
        GOLDEN_TEST(test_model_case, "model_seq2seq_post_pad_sqrt"),
        GOLDEN_TEST(test_model_case, "model_seq2seq_pre_learned_2x2"),
        GOLDEN_TEST(test_model_case, "model_seq2seq_shared"),
        GOLDEN_TEST(test_model_case, "model_classifier_pad"),
        GOLDEN_TEST(test_model_case, "model_classifier_nopad_pre"),
        GOLDEN_TEST(test_model_case, "model_labeller_pad_pre"),
        GOLDEN_TEST(test_model_case, "model_set_post"),
        GOLDEN_TEST(test_model_case, "model_set_pre_final"),
        GOLDEN_TEST(test_model_case, "model_lm_pre"),
        GOLDEN_TEST(test_model_case, "model_lm_pad_post"),
        GOLDEN_TEST(test_model_case, "model_backward_labeller_reverse"),
        GOLDEN_TEST(test_model_case, "model_backward_seq2seq_post_pad_sqrt"),
        GOLDEN_TEST(test_model_case, "model_backward_seq2seq_pre_learned_2x2"),
        GOLDEN_TEST(test_model_case, "model_backward_seq2seq_shared"),
        GOLDEN_TEST(test_model_case, "model_backward_classifier_pad"),
        GOLDEN_TEST(test_model_case, "model_backward_classifier_nopad_pre"),
        GOLDEN_TEST(test_model_case, "model_backward_labeller_pad_pre"),
        GOLDEN_TEST(test_model_case, "model_backward_set_post"),
        GOLDEN_TEST(test_model_case, "model_backward_set_pre_final"),
        GOLDEN_TEST(test_model_case, "model_backward_lm_pre"),
        GOLDEN_TEST(test_model_case, "model_backward_lm_pad_post"),
        GOLDEN_TEST(test_model_case, "checkpoint_seq2seq"),
        GOLDEN_TEST(test_model_case, "model_checkpoint_seq2seq"),
        GOLDEN_TEST(test_model_case, "greedy_reverse"),
        GOLDEN_TEST(test_model_case, "greedy_reverse_truncated"),
        GOLDEN_TEST(test_model_case, "greedy_untrained"),
        GOLDEN_TEST(test_model_case, "beam_reverse_w1_lp0"),
        GOLDEN_TEST(test_model_case, "beam_reverse_w3_lp6"),
        GOLDEN_TEST(test_model_case, "beam_reverse_w4_lp10"),
        GOLDEN_TEST(test_model_case, "beam_untrained_w3_lp0"),
        GOLDEN_TEST(test_model_case, "beam_untrained_w3_lp10"),
        GOLDEN_TEST(test_model_case, "beam_untrained_w4_lp6"),
        GOLDEN_TEST(test_model_case, "topk_reverse_k3"),
        GOLDEN_TEST(test_model_case, "topk_classifier_all"),
        cmocka_unit_test(test_checkpoint_from_pytorch),
        cmocka_unit_test(test_save_load_round_trip),
        cmocka_unit_test(test_checkpoint_truncated),
        cmocka_unit_test(test_checkpoint_wrong_shape),
        cmocka_unit_test(test_checkpoint_wrong_dtype),
        cmocka_unit_test(test_checkpoint_missing_tensor),
        cmocka_unit_test(test_checkpoint_extra_tensor),
        cmocka_unit_test(test_checkpoint_missing_config),
        cmocka_unit_test(test_checkpoint_bad_config),
        cmocka_unit_test(test_checkpoint_bad_kind),
        cmocka_unit_test(test_checkpoint_not_a_model),
        cmocka_unit_test(test_config_check),
        cmocka_unit_test(test_longer_than_max_len),
        cmocka_unit_test(test_work_reshape),
        cmocka_unit_test(test_cache_matches_full_decoder),
        cmocka_unit_test(test_ids_out_of_range),
        cmocka_unit_test(test_beam_width_one_is_greedy),
        cmocka_unit_test(test_greedy_score_is_teacher_forced),
        cmocka_unit_test(test_lm_cache_matches_forward),
        cmocka_unit_test(test_decode_refuses),
        cmocka_unit_test(test_topk_order_and_ties),
        cmocka_unit_test(test_thread_count_independent),
        BAD_TEST(0), BAD_TEST(1), BAD_TEST(2), BAD_TEST(3), BAD_TEST(4), BAD_TEST(5),
        BAD_TEST(6), BAD_TEST(7), BAD_TEST(8), BAD_TEST(9), BAD_TEST(10), BAD_TEST(11),
        BAD_TEST(12), BAD_TEST(13), BAD_TEST(14), BAD_TEST(15), BAD_TEST(16), BAD_TEST(17),
        BAD_TEST(18), BAD_TEST(19), BAD_TEST(20), BAD_TEST(21), BAD_TEST(22), BAD_TEST(23),
        BAD_TEST(24), BAD_TEST(25), BAD_TEST(26), BAD_TEST(27), BAD_TEST(28), BAD_TEST(29),
        BAD_TEST(30),
        cmocka_unit_test(test_greedy_needs_seq2seq),
        cmocka_unit_test(test_bad_case_writes_no_file),
        cmocka_unit_test(test_malformed_corpus),
    };
    return run_chapter_tests("07_model", tests);
}
