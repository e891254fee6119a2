/*
 * test_03_mha.c - chapter 03: multi-head attention, forward and backward,
 * against goldens made by reference/ch03_mha.py from nn.MultiheadAttention
 * and autograd.
 *
 * The golden tests read each case with mha_case_read() (the chapter
 * program's own reader, which also applies PyTorch's is_causal rules), then
 * call the documented functions, mha_cache_alloc, mha_mask_bias (through
 * mha_case_bias), mha_forward, mha_average_heads and mha_backward, and
 * compare every output and gradient with the case's tolerance. The unit
 * tests check the rules the README states (mask conventions, head split and
 * merge, fully-masked rows, the self-attention gradient, packed and separate
 * projections agreeing, accumulation, thread count), and that every kind of
 * bad case is refused with a clear one-line message.
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
#include <sys/wait.h>
#include <unistd.h>

#include "helpers.h"
#include "mha.h"
#include "mha_case.h"
#include "sdpa.h"

#define CHAPTER "03_mha"

/* The parameters in MhaParams order, under their state_dict names. */
static const char *const PARAM_NAMES[7] = {"in_proj_weight", "q_proj_weight", "k_proj_weight",
                                           "v_proj_weight",  "in_proj_bias",  "out_proj.weight",
                                           "out_proj.bias"};

/* ------------------------------------------------------------------------ */
/* Running a case through the documented functions                          */
/* ------------------------------------------------------------------------ */

/* Everything one forward (and backward) pass produces. */
typedef struct {
    MhaCase c;
    MhaCache cache;
    float *bias;                  /* (N, H, L, S), or NULL without a mask in use */
    float *out;                   /* (N, L, D) */
    float *avg;                   /* (N, L, S) the heads' average */
    float *dq, *dk, *dv;          /* like query, key, value; backward only. In
                                     self-attention dk and dv are dq. */
    float *g[7];                  /* parameter gradients, MhaParams order, or NULL */
} Run;

static int64_t n_att(const MhaCase *c) { return (int64_t)c->N * c->H * c->L * c->S; }

/* The number of values of the parameter i of a case (0 when absent). */
static int64_t param_numel(const TensorFile *f, int i)
{
    const Tensor *t = tensorfile_find(f, PARAM_NAMES[i]);
    return t ? tensor_numel(t) : 0;
}

/* Runs the forward (and, with `backward`, the backward) of an already read
 * case r->c; fails the test on any error. */
static void run_layer(Run *r, const TensorFile *f, int backward)
{
    const MhaCase *c = &r->c;
    int N = c->N, L = c->L, S = c->S, D = c->D, H = c->H;
    Error err;
    if (mha_cache_alloc(&r->cache, &(MhaDims){N, L, S, D, H, c->Ek, c->Ev}, backward,
                        &err) != 0) {
        print_error("%s\n", err.msg);
        fail();
    }
    if (mha_case_has_bias(c)) {
        r->bias = test_floats(n_att(c));
        assert_ok(mha_case_bias(c, r->bias));
    }
    r->out = test_floats((int64_t)N * L * D);
    assert_ok(mha_forward(r->out, &r->cache, c->query, c->key, c->value, &c->params,
                          r->bias, c->causal));
    r->avg = test_floats((int64_t)N * L * S);
    assert_ok(mha_average_heads(r->avg, r->cache.att, N, H, L, S));
    if (!backward) return;
    r->dq = test_floats((int64_t)N * L * D);
    r->dk = c->self_attention ? r->dq : test_floats((int64_t)N * S * c->Ek);
    r->dv = c->self_attention ? r->dq : test_floats((int64_t)N * S * c->Ev);
    for (int i = 0; i < 7; i++)
        r->g[i] = param_numel(f, i) ? test_floats(param_numel(f, i)) : NULL;
    MhaParams grads = {r->g[0], r->g[1], r->g[2], r->g[3], r->g[4], r->g[5], r->g[6]};
    assert_ok(mha_backward(r->dq, r->dk, r->dv, &grads, c->dout, c->query, c->key,
                           c->value, &c->params, &r->cache));
}

/* Reads the case and runs it (the backward for mha_backward cases). */
static void run_case(Run *r, const TensorFile *f)
{
    memset(r, 0, sizeof *r);
    Error err;
    if (mha_case_read(f, &r->c, &err) != 0) {
        print_error("%s\n", err.msg);
        fail();
    }
    run_layer(r, f, r->c.backward);
}

static void run_free(Run *r)
{
    mha_cache_free(&r->cache);
    free(r->bias);
    free(r->out);
    free(r->avg);
    if (!r->c.self_attention) {
        free(r->dk);
        free(r->dv);
    }
    free(r->dq);
    for (int i = 0; i < 7; i++) free(r->g[i]);
}

/* Compares every gradient of a run with the golden. */
static void check_grads(const TensorFile *f, const Run *r, double atol, double rtol)
{
    const MhaCase *c = &r->c;
    assert_close_to_golden(f, "grad_query", r->dq, (int64_t)c->N * c->L * c->D, atol, rtol);
    if (!c->self_attention) {
        assert_close_to_golden(f, "grad_key", r->dk, (int64_t)c->N * c->S * c->Ek, atol, rtol);
        assert_close_to_golden(f, "grad_value", r->dv, (int64_t)c->N * c->S * c->Ev, atol,
                               rtol);
    }
    for (int i = 0; i < 7; i++) {
        if (!r->g[i]) continue;
        char name[40];
        snprintf(name, sizeof name, "grad_%s", PARAM_NAMES[i]);
        assert_close_to_golden(f, name, r->g[i], param_numel(f, i), atol, rtol);
    }
}

/* ------------------------------------------------------------------------ */
/* Golden cases                                                              */
/* ------------------------------------------------------------------------ */

static void test_mha_case(void **state)
{
    const char *name = *state;
    TensorFile f;
    load_golden(&f, CHAPTER, name);
    double atol, rtol;
    golden_tolerance(&f, &atol, &rtol);
    Run r;
    run_case(&r, &f);
    const MhaCase *c = &r.c;
    print_message("  N %d, L %d, S %d, D %d, H %d, kdim %d, vdim %d, %s%s%s%s%s%s; "
                  "out[0] = %.6f\n", c->N, c->L, c->S, c->D, c->H, c->Ek, c->Ev,
                  c->params.in_proj_weight ? "packed" : "separate",
                  c->params.in_proj_bias ? ", bias" : ", no bias",
                  c->self_attention ? ", self" : "", c->key_padding_mask ? ", kpm" : "",
                  c->use_attn_mask ? ", attn_mask" : "", c->causal ? ", causal" : "", r.out[0]);
    assert_close_to_golden(&f, "output", r.out, (int64_t)c->N * c->L * c->D, atol, rtol);
    if (c->need_weights) {
        if (c->average_attn_weights)
            assert_close_to_golden(&f, "attn_weights", r.avg, (int64_t)c->N * c->L * c->S,
                                   atol, rtol);
        else
            assert_close_to_golden(&f, "attn_weights", r.cache.att, n_att(c), atol, rtol);
    }
    if (c->backward) check_grads(&f, &r, atol, rtol);
    run_free(&r);
    tensorfile_free(&f);
}

/* ------------------------------------------------------------------------ */
/* Heads and masks                                                          */
/* ------------------------------------------------------------------------ */

/* Split puts feature h * Dh + d of row t into head h, row t, column d; merge
 * undoes it exactly. */
static void test_split_merge_round_trip(void **state)
{
    enum { N = 2, T = 3, H = 4, Dh = 5, D = H * Dh };
    float x[N * T * D], xh[N * H * T * Dh], back[N * T * D];
    for (int i = 0; i < N * T * D; i++) x[i] = (float)i;
    assert_ok(mha_split_heads(xh, x, N, T, H, Dh));
    for (int n = 0; n < N; n++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++)
                for (int d = 0; d < Dh; d++)
                    assert_true(xh[((n * H + h) * T + t) * Dh + d] ==
                                x[(n * T + t) * D + h * Dh + d]);
    assert_ok(mha_merge_heads(back, xh, N, T, H, Dh));
    assert_memory_equal(back, x, sizeof x);
    /* One head: the layout does not change at all. */
    assert_ok(mha_split_heads(xh, x, N, T * H, 1, Dh));
    assert_memory_equal(xh, x, sizeof x);
    print_message("  (2, 3, 20) -> (2, 4, 3, 5) -> (2, 3, 20): every value in place\n");
}

/* nn.MultiheadAttention's boolean masks: true = masked (-inf), false = 0.
 * key_padding_mask repeats over heads and queries; a 2-D attn_mask over
 * sequences and heads; a 3-D one has a matrix per (n, h); floats add. */
static void test_mask_bias_conventions(void **state)
{
    enum { N = 2, H = 2, L = 2, S = 3 };
    const uint8_t kpm[N * S] = {0, 0, 1, 1, 0, 0};
    const uint8_t am[L * S] = {0, 1, 0, 0, 0, 0};
    float bias[N * H * L * S];
    assert_ok(mha_mask_bias(bias, kpm, 1, NULL, 0, 0, N, H, L, S));
    for (int n = 0; n < N; n++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < L; i++)
                for (int j = 0; j < S; j++)
                    assert_true(bias[((n * H + h) * L + i) * S + j] ==
                                (kpm[n * S + j] ? -INFINITY : 0.0f));
    assert_ok(mha_mask_bias(bias, NULL, 0, am, 1, 0, N, H, L, S));
    for (int b = 0; b < N * H; b++)
        for (int i = 0; i < L * S; i++)
            assert_same(bias[b * L * S + i], (am[i] ? -INFINITY : 0.0f));

    /* Floats add, both masks together add, and 3-D masks index (n, h). */
    float kf[N * S] = {0.5f, -1, 2, 0, 0.25f, -INFINITY};
    float af[N * H * L * S];
    for (int i = 0; i < N * H * L * S; i++) af[i] = (float)i / 8;
    assert_ok(mha_mask_bias(bias, kf, 0, af, 0, 1, N, H, L, S));
    for (int n = 0; n < N; n++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < L; i++)
                for (int j = 0; j < S; j++) {
                    int at = ((n * H + h) * L + i) * S + j;
                    assert_same(bias[at], af[at] + kf[n * S + j]);
                }
    /* A bool key_padding_mask with a float attn_mask (PyTorch warns but
     * allows it): -inf where the key is padding, the float elsewhere. */
    assert_ok(mha_mask_bias(bias, kpm, 1, af, 0, 0, N, H, L, S));
    for (int n = 0; n < N; n++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < L; i++)
                for (int j = 0; j < S; j++)
                    assert_true(bias[((n * H + h) * L + i) * S + j] ==
                                (kpm[n * S + j] ? -INFINITY : af[i * S + j]));
    print_message("  bool true -> -inf, false -> 0; floats added; 2-D and 3-D attn_mask\n");
}

/* The same boolean pattern means opposite things to the two APIs: an MHA
 * mask M gives the bias an SDPA mask gives for NOT M. */
static void test_mha_bool_is_sdpa_not(void **state)
{
    enum { L = 3, S = 4 };
    const uint8_t masked[L * S] = {0, 1, 1, 0, 1, 0, 0, 0, 1, 1, 1, 1};
    uint8_t allowed[L * S];
    for (int i = 0; i < L * S; i++) allowed[i] = !masked[i];
    float from_mha[L * S], from_sdpa[L * S];
    assert_ok(mha_mask_bias(from_mha, NULL, 0, masked, 1, 0, 1, 1, L, S));
    int64_t shape[2] = {L, S};
    assert_ok(sdpa_mask_bias(from_sdpa, allowed, 1, shape, 2, shape, 2));
    assert_memory_equal(from_mha, from_sdpa, sizeof from_mha);
    print_message("  MHA mask M == SDPA mask (not M), bit for bit\n");
}

/* The average over heads, in numbers. */
static void test_average_heads(void **state)
{
    enum { N = 2, H = 3, L = 1, S = 2 };
    const float att[N * H * L * S] = {0.1f, 0.9f, 0.5f, 0.5f, 0.3f, 0.7f,
                                      1.0f, 0.0f, 0.0f, 1.0f, 0.5f, 0.5f};
    float avg[N * L * S];
    assert_ok(mha_average_heads(avg, att, N, H, L, S));
    const float want[N * L * S] = {0.3f, 0.7f, 0.5f, 0.5f};
    assert_close("mean over 3 heads", avg, want, N * L * S, 1e-7, 1e-7);
}

/* ------------------------------------------------------------------------ */
/* Rules of the layer                                                        */
/* ------------------------------------------------------------------------ */

/* The worked example of the README and the demo, against the numbers
 * worked out there by hand (4 decimals). */
static void test_worked_example_values(void **state)
{
    TensorFile f;
    load_golden(&f, CHAPTER, "worked_example");
    Run r;
    run_case(&r, &f);
    const float head0[9] = {0.4011f, 0.1978f, 0.4011f, 0.1978f, 0.4011f,
                            0.4011f, 0.2483f, 0.2483f, 0.5035f};
    const float head1_row0[3] = {0.5035f, 0.2483f, 0.2483f};
    const float avg_row0[3] = {0.4523f, 0.2230f, 0.3247f};
    const float out_row0[4] = {0.8022f, 0.5989f, 0.2483f, 0.5035f};
    assert_close("head 0 weights", r.cache.att, head0, 9, 5e-5, 0);
    assert_close("head 1 weights, row 0", r.cache.att + 9, head1_row0, 3, 5e-5, 0);
    assert_close("averaged weights, row 0", r.avg, avg_row0, 3, 5e-5, 0);
    assert_close("output, row 0", r.out, out_row0, 4, 5e-5, 0);
    run_free(&r);
    tensorfile_free(&f);
}

/* Every row of every head's weights sums to 1 (no row is fully masked). */
static void test_weights_rows_sum_to_one(void **state)
{
    TensorFile f;
    load_golden(&f, CHAPTER, "both_masks_bool");
    Run r;
    run_case(&r, &f);
    double worst = 0;
    int rows = 0;
    for (int64_t row = 0; row < n_att(&r.c) / r.c.S; row++) {
        double sum = 0;
        for (int j = 0; j < r.c.S; j++) sum += r.cache.att[row * r.c.S + j];
        if (sum == 0) continue;                     /* a fully-masked row */
        worst = fmax(worst, fabs(sum - 1));
        rows++;
    }
    print_message("  %d rows sum to 1 within %.2g\n", rows, worst);
    assert_true(rows > 0 && worst < 1e-6);
    run_free(&r);
    tensorfile_free(&f);
}

/* A query that may attend to nothing: weights exactly 0, output exactly
 * out_proj.bias, and exactly no gradient to its query row; the golden (from
 * PyTorch's need_weights=False path) agrees. */
static void check_fully_masked_rows(const char *name)
{
    TensorFile f;
    load_golden(&f, CHAPTER, name);
    Run r;
    run_case(&r, &f);
    const MhaCase *c = &r.c;
    const float *want = golden_tensor(&f, "output", DTYPE_F32)->data;
    const float *bo = c->params.out_proj_bias;
    int dead = 0;
    for (int n = 0; n < c->N; n++)
        for (int i = 0; i < c->L; i++) {
            /* fully masked: no head has any key to attend to */
            int all_dead = 1;
            for (int h = 0; h < c->H; h++)
                for (int j = 0; j < c->S; j++)
                    if (r.cache.att[(((size_t)n * c->H + h) * c->L + i) * c->S + j] != 0)
                        all_dead = 0;
            if (!all_dead) continue;
            dead++;
            for (int e = 0; e < c->D; e++) {
                size_t at = ((size_t)n * c->L + i) * c->D + e;
                assert_same(r.out[at], bo[e]);
                assert_same(want[at], bo[e]);
                if (r.dq) assert_same(r.dq[at], 0.0f);
            }
        }
    print_message("  %s: %d fully-masked query rows: weights 0, output = out_proj.bias, "
                  "grad_query 0, as PyTorch's need_weights=False path gives\n", name, dead);
    assert_true(dead > 0);
    for (int64_t i = 0; i < (int64_t)c->N * c->L * c->D; i++) assert_false(isnan(r.out[i]));
    run_free(&r);
    tensorfile_free(&f);
}

static void test_fully_masked_rows(void **state)
{
    check_fully_masked_rows("fully_masked_rows_backward");
}

static void test_fully_masked_kpm(void **state)
{
    check_fully_masked_rows("fully_masked_kpm_backward");
    /* A sequence whose keys are all padding passes nothing back to them. */
    TensorFile f;
    load_golden(&f, CHAPTER, "fully_masked_kpm_backward");
    Run r;
    run_case(&r, &f);
    const MhaCase *c = &r.c;
    for (int64_t i = 0; i < (int64_t)c->S * c->Ek; i++)
        assert_same(r.dk[(int64_t)1 * c->S * c->Ek + i], 0.0f);
    for (int64_t i = 0; i < (int64_t)c->S * c->Ev; i++)
        assert_same(r.dv[(int64_t)1 * c->S * c->Ev + i], 0.0f);
    print_message("  sequence 1: grad_key and grad_value exactly 0\n");
    run_free(&r);
    tensorfile_free(&f);
}

/* PyTorch's is_causal hint: SDPA's own causal pattern without
 * key_padding_mask and weights, attn_mask otherwise. */
static void test_causal_hint_rules(void **state)
{
    const struct { const char *name; int causal, use_attn_mask; } cases[] = {
        {"causal_sdpa", 1, 0},      {"causal_weights", 0, 1}, {"causal_kpm", 0, 1},
        {"causal_cross", 1, 0},     {"causal_hint_wins", 1, 0}, {"causal_mask_only", 0, 1},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        TensorFile f;
        load_golden(&f, CHAPTER, cases[k].name);
        MhaCase c;
        Error err;
        assert_ok(mha_case_read(&f, &c, &err));
        print_message("  %-18s is_causal %d, key_padding_mask %s, need_weights %d -> %s\n",
                      cases[k].name, c.is_causal, c.key_padding_mask ? "yes" : "no",
                      c.need_weights, c.causal ? "causal pattern" : "attn_mask");
        assert_int_equal(c.causal, cases[k].causal);
        assert_int_equal(c.use_attn_mask, cases[k].use_attn_mask);
        tensorfile_free(&f);
    }
}

/* is_causal and the equivalent boolean attn_mask give the same bits. */
static void test_causal_equals_mask(void **state)
{
    TensorFile f;
    load_golden(&f, CHAPTER, "causal_cross");
    Run hint, mask;
    run_case(&hint, &f);
    assert_int_equal(hint.c.causal, 1);
    memset(&mask, 0, sizeof mask);
    mask.c = hint.c;
    mask.c.causal = 0;
    mask.c.use_attn_mask = 1;                      /* the (L, S) causal mask of the case */
    mask.c.backward = 0;
    run_layer(&mask, &f, 0);
    const MhaCase *c = &hint.c;
    assert_memory_equal(hint.cache.att, mask.cache.att, n_att(c) * sizeof(float));
    assert_memory_equal(hint.out, mask.out, (size_t)c->N * c->L * c->D * sizeof(float));
    print_message("  L %d, S %d: is_causal and attn_mask = triu(ones, 1) agree bit for bit\n",
                  c->L, c->S);
    run_free(&hint);
    run_free(&mask);
    tensorfile_free(&f);
}

/* In self-attention the input's gradient is the sum of its three uses: the
 * gradients through the query, key and value paths, taken separately, add
 * up to what one shared buffer collects (and to PyTorch's gradient). */
static void test_self_attention_grad_is_sum_of_paths(void **state)
{
    TensorFile f;
    load_golden(&f, CHAPTER, "packed_self_backward");
    double atol, rtol;
    golden_tolerance(&f, &atol, &rtol);
    Run r;
    run_case(&r, &f);
    const MhaCase *c = &r.c;
    int64_t n = (int64_t)c->N * c->L * c->D;
    float *path[3] = {test_floats(n), test_floats(n), test_floats(n)};
    float *g[7];
    for (int i = 0; i < 7; i++) g[i] = param_numel(&f, i) ? test_floats(param_numel(&f, i)) : NULL;
    MhaParams grads = {g[0], g[1], g[2], g[3], g[4], g[5], g[6]};
    assert_ok(mha_backward(path[0], path[1], path[2], &grads, c->dout, c->query, c->key,
                           c->value, &c->params, &r.cache));
    float *sum = test_floats(n);
    double norm[3] = {0, 0, 0};
    for (int64_t i = 0; i < n; i++) {
        sum[i] = path[0][i] + path[1][i] + path[2][i];
        for (int p = 0; p < 3; p++) norm[p] += (double)path[p][i] * path[p][i];
    }
    print_message("  |d query path| %.3g, |d key path| %.3g, |d value path| %.3g\n",
                  sqrt(norm[0]), sqrt(norm[1]), sqrt(norm[2]));
    for (int p = 0; p < 3; p++) assert_true(norm[p] > 0);
    assert_close("sum of the three paths vs one shared buffer", sum, r.dq, n, 1e-6, 1e-6);
    assert_close_to_golden(&f, "grad_query", sum, n, atol, rtol);
    for (int i = 0; i < 7; i++) free(g[i]);
    for (int p = 0; p < 3; p++) free(path[p]);
    free(sum);
    run_free(&r);
    tensorfile_free(&f);
}

/* The packed in_proj_weight and the same three blocks passed as separate
 * q/k/v_proj_weight give the same bits, forward and backward. */
static void test_packed_equals_separate(void **state)
{
    TensorFile f;
    load_golden(&f, CHAPTER, "packed_cross_backward");
    Run packed, separate;
    run_case(&packed, &f);
    const MhaCase *c = &packed.c;
    int D = c->D;
    memset(&separate, 0, sizeof separate);
    separate.c = packed.c;
    float *w = c->params.in_proj_weight;
    separate.c.params.in_proj_weight = NULL;
    separate.c.params.q_proj_weight = w;
    separate.c.params.k_proj_weight = w + (size_t)D * D;
    separate.c.params.v_proj_weight = w + (size_t)2 * D * D;
    /* The same forward and backward by hand, with the gradients of the
     * three blocks in three (D, D) slices of one buffer. */
    Error err;
    assert_ok(mha_cache_alloc(&separate.cache, &(MhaDims){c->N, c->L, c->S, D, c->H, D, D}, 1,
                              &err));
    separate.out = test_floats((int64_t)c->N * c->L * D);
    assert_ok(mha_forward(separate.out, &separate.cache, c->query, c->key, c->value,
                          &separate.c.params, NULL, 0));
    assert_memory_equal(separate.out, packed.out, (size_t)c->N * c->L * D * sizeof(float));
    float *dq = test_floats((int64_t)c->N * c->L * D), *dk = test_floats((int64_t)c->N * c->S * D);
    float *dv = test_floats((int64_t)c->N * c->S * D), *dw = test_floats((int64_t)3 * D * D);
    float *db = test_floats(3 * D), *dwo = test_floats((int64_t)D * D), *dbo = test_floats(D);
    MhaParams grads = {.q_proj_weight = dw, .k_proj_weight = dw + (size_t)D * D,
                       .v_proj_weight = dw + (size_t)2 * D * D, .in_proj_bias = db,
                       .out_proj_weight = dwo, .out_proj_bias = dbo};
    assert_ok(mha_backward(dq, dk, dv, &grads, c->dout, c->query, c->key, c->value,
                           &separate.c.params, &separate.cache));
    assert_memory_equal(dq, packed.dq, (size_t)c->N * c->L * D * sizeof(float));
    assert_memory_equal(dk, packed.dk, (size_t)c->N * c->S * D * sizeof(float));
    assert_memory_equal(dv, packed.dv, (size_t)c->N * c->S * D * sizeof(float));
    assert_memory_equal(dw, packed.g[0], (size_t)3 * D * D * sizeof(float));
    print_message("  in_proj_weight (3D, D) and its three (D, D) blocks agree bit for bit\n");
    free(dq);
    free(dk);
    free(dv);
    free(dw);
    free(db);
    free(dwo);
    free(dbo);
    free(separate.out);
    mha_cache_free(&separate.cache);
    run_free(&packed);
    tensorfile_free(&f);
}

/* mha_backward adds into every gradient: two calls give twice the gradient
 * (the activations in the cache are only read). */
static void test_backward_accumulates(void **state)
{
    TensorFile f;
    load_golden(&f, CHAPTER, "separate_kdim_vdim_backward");
    double atol, rtol;
    golden_tolerance(&f, &atol, &rtol);
    Run r;
    run_case(&r, &f);
    const MhaCase *c = &r.c;
    MhaParams grads = {r.g[0], r.g[1], r.g[2], r.g[3], r.g[4], r.g[5], r.g[6]};
    assert_ok(mha_backward(r.dq, r.dk, r.dv, &grads, c->dout, c->query, c->key, c->value,
                           &c->params, &r.cache));
    const char *names[10] = {"grad_query", "grad_key", "grad_value", "grad_q_proj_weight",
                             "grad_k_proj_weight", "grad_v_proj_weight", "grad_in_proj_bias",
                             "grad_out_proj.weight", "grad_out_proj.bias"};
    const float *got[10] = {r.dq, r.dk, r.dv, r.g[1], r.g[2], r.g[3], r.g[4], r.g[5], r.g[6]};
    for (int t = 0; t < 9; t++) {
        const Tensor *want = golden_tensor(&f, names[t], DTYPE_F32);
        int64_t n = tensor_numel(want);
        float *twice = test_floats(n);
        for (int64_t i = 0; i < n; i++) twice[i] = 2 * ((const float *)want->data)[i];
        assert_close(names[t], got[t], twice, n, 2 * atol, rtol);
        free(twice);
    }
    run_free(&r);
    tensorfile_free(&f);
}

/* NULL input gradients are allowed (an embedding layer below may not need
 * one); the parameter gradients do not change. */
static void test_null_input_grads(void **state)
{
    TensorFile f;
    load_golden(&f, CHAPTER, "no_bias_separate_backward");
    double atol, rtol;
    golden_tolerance(&f, &atol, &rtol);
    Run r;
    run_case(&r, &f);
    const MhaCase *c = &r.c;
    float *g[7];
    for (int i = 0; i < 7; i++) g[i] = param_numel(&f, i) ? test_floats(param_numel(&f, i)) : NULL;
    MhaParams grads = {g[0], g[1], g[2], g[3], g[4], g[5], g[6]};
    assert_null(grads.in_proj_bias);
    assert_null(grads.out_proj_bias);
    assert_ok(mha_backward(NULL, NULL, NULL, &grads, c->dout, c->query, c->key, c->value,
                           &c->params, &r.cache));
    for (int i = 0; i < 7; i++)
        if (g[i]) assert_memory_equal(g[i], r.g[i], param_numel(&f, i) * sizeof(float));
    print_message("  dquery = dkey = dvalue = NULL, bias=False: parameter gradients unchanged\n");
    for (int i = 0; i < 7; i++) free(g[i]);
    run_free(&r);
    tensorfile_free(&f);
}

/* Forward and backward with 1 and 2 threads give identical bits. */
static void test_thread_count_independent(void **state)
{
    const char *names[2] = {"larger_backward", "unbatched_masks_backward"};
    for (int k = 0; k < 2; k++) {
        TensorFile f;
        load_golden(&f, CHAPTER, names[k]);
        int saved = omp_get_max_threads();
        Run one, two;
        omp_set_num_threads(1);
        run_case(&one, &f);
        omp_set_num_threads(2);
        run_case(&two, &f);
        omp_set_num_threads(saved);
        const MhaCase *c = &one.c;
        assert_memory_equal(one.out, two.out, (size_t)c->N * c->L * c->D * sizeof(float));
        assert_memory_equal(one.cache.att, two.cache.att, n_att(c) * sizeof(float));
        assert_memory_equal(one.avg, two.avg, (size_t)c->N * c->L * c->S * sizeof(float));
        assert_memory_equal(one.dq, two.dq, (size_t)c->N * c->L * c->D * sizeof(float));
        for (int i = 0; i < 7; i++)
            if (one.g[i])
                assert_memory_equal(one.g[i], two.g[i], param_numel(&f, i) * sizeof(float));
        print_message("  %s: 1 and 2 threads give identical bits\n", names[k]);
        run_free(&one);
        run_free(&two);
        tensorfile_free(&f);
    }
}

/* The cache refuses impossible sizes, and the backward refuses a cache
 * without scratch space instead of writing through NULL. */
static void test_cache_checks(void **state)
{
    MhaCache cache;
    Error err = {{0}};
    assert_int_equal(mha_cache_alloc(&cache, &(MhaDims){2, 3, 3, 10, 4, 10, 10}, 0, &err), -1);
    print_message("  %s\n", err.msg);
    assert_non_null(strstr(err.msg, "not divisible by num_heads 4"));
    assert_int_equal(mha_cache_alloc(&cache, &(MhaDims){2, 0, 3, 8, 2, 8, 8}, 0, &err), -1);
    assert_non_null(strstr(err.msg, "at least 1"));
    assert_ok(mha_cache_alloc(&cache, &(MhaDims){2, 3, 3, 8, 2, 8, 8}, 0, &err));
    assert_null(cache.d_o);
    float w[3 * 8 * 8] = {0}, wo[8 * 8] = {0}, x[2 * 3 * 8] = {0}, out[2 * 3 * 8];
    float gw[3 * 8 * 8], gwo[8 * 8];
    MhaParams p = {.in_proj_weight = w, .out_proj_weight = wo};
    MhaParams g = {.in_proj_weight = gw, .out_proj_weight = gwo};
    assert_ok(mha_forward(out, &cache, x, x, x, &p, NULL, 0));
    assert_int_equal(mha_backward(NULL, NULL, NULL, &g, out, x, x, x, &p, &cache), -1);
    mha_cache_free(&cache);
    mha_cache_free(&cache);                        /* safe twice */
}

/* ------------------------------------------------------------------------ */
/* Bad cases: refused with one line naming the file and the problem         */
/* ------------------------------------------------------------------------ */

/* A valid mha_backward case: query (2, 4, 8), key and value (2, 6, 8),
 * nhead 2, packed in_proj_weight (24, 8), in_proj_bias (24,),
 * out_proj.weight (8, 8), out_proj.bias (8,), grad_output (2, 4, 8). Each bad
 * case changes one tensor (ndim -1: removes it; poke: writes that byte at
 * the start of the new tensor) and/or sets one metadata key (nhead
 * without a value: leaves nhead out). */
typedef struct {
    const char *name;
    const char *tensor;
    DType dtype;
    int ndim;
    int64_t shape[4];
    int poke;
    const char *key, *value;
    const char *expect;          /* a phrase the error must contain */
} BadCase;

static const BadCase BAD[] = {
    {"missing_query", "query", DTYPE_F32, -1, {0}, 0, NULL, NULL, "'query' is missing"},
    {"missing_key", "key", DTYPE_F32, -1, {0}, 0, NULL, NULL, "'key' is missing"},
    {"missing_in_proj_weight", "in_proj_weight", DTYPE_F32, -1, {0}, 0, NULL, NULL,
     "'in_proj_weight' is missing"},
    {"missing_out_proj_weight", "out_proj.weight", DTYPE_F32, -1, {0}, 0, NULL, NULL,
     "'out_proj.weight' is missing"},
    {"missing_grad_output", "grad_output", DTYPE_F32, -1, {0}, 0, NULL, NULL,
     "'grad_output' is missing"},
    {"missing_nhead", NULL, DTYPE_F32, 0, {0}, 0, "nhead", NULL,
     "'nhead' is missing"},
    {"heads_not_dividing", NULL, DTYPE_F32, 0, {0}, 0, "nhead", "3",
     "embed_dim 8 (the last dimension of 'query') is not divisible by nhead 3"},
    {"heads_zero", NULL, DTYPE_F32, 0, {0}, 0, "nhead", "0",
     "nhead is 0, outside [1, 2147483647] (the number of heads)"},
    {"heads_not_a_number", NULL, DTYPE_F32, 0, {0}, 0, "nhead", "two",
     "expected an integer"},
    {"query_f64", "query", DTYPE_F64, 3, {2, 4, 8}, 0, NULL, NULL, "dtype F64, expected F32"},
    {"query_rank4", "query", DTYPE_F32, 4, {2, 1, 4, 8}, 0, NULL, NULL,
     "expected (N, L, D) or, unbatched, (L, D)"},
    {"key_rank2", "key", DTYPE_F32, 2, {6, 8}, 0, NULL, NULL, "all be batched"},
    {"batch_mismatch", "key", DTYPE_F32, 3, {3, 6, 8}, 0, NULL, NULL, "same batch size N"},
    {"s_mismatch", "value", DTYPE_F32, 3, {2, 5, 8}, 0, NULL, NULL,
     "same number of positions S"},
    {"empty_dimension", "query", DTYPE_F32, 3, {2, 0, 8}, 0, NULL, NULL, "between 1 and"},
    {"in_proj_weight_shape", "in_proj_weight", DTYPE_F32, 2, {24, 7}, 0, NULL, NULL,
     "expected (3D, D) = (24, 8)"},
    {"out_proj_weight_shape", "out_proj.weight", DTYPE_F32, 2, {8, 4}, 0, NULL, NULL,
     "expected (D, D) = (8, 8)"},
    {"in_proj_bias_shape", "in_proj_bias", DTYPE_F32, 1, {8}, 0, NULL, NULL,
     "expected (3D,) = (24)"},
    {"separate_with_packed", "q_proj_weight", DTYPE_F32, 2, {8, 8}, 0, NULL, NULL,
     "'q_proj_weight' is present, but kdim == vdim == embed_dim"},
    {"packed_with_kdim", "key", DTYPE_F32, 3, {2, 6, 5}, 0, NULL, NULL,
     "'in_proj_weight' is present, but kdim 5"},
    {"one_bias_only", "out_proj.bias", DTYPE_F32, -1, {0}, 0, NULL, NULL,
     "has both biases (bias=True) or neither"},
    {"bias_meta_disagrees", NULL, DTYPE_F32, 0, {0}, 0, "bias", "false",
     "metadata 'bias' is false"},
    {"embed_dim_disagrees", NULL, DTYPE_F32, 0, {0}, 0, "embed_dim", "16",
     "metadata 'embed_dim' is 16"},
    {"kdim_disagrees", NULL, DTYPE_F32, 0, {0}, 0, "kdim", "5", "metadata 'kdim' is 5"},
    {"kpm_shape", "key_padding_mask", DTYPE_BOOL, 2, {2, 5}, 0, NULL, NULL,
     "expected (N, S) = (2, 6)"},
    {"kpm_dtype", "key_padding_mask", DTYPE_I64, 2, {2, 6}, 0, NULL, NULL, "expected BOOL"},
    {"kpm_bad_byte", "key_padding_mask", DTYPE_BOOL, 2, {2, 6}, 2, NULL, NULL,
     "holds only 0 and 1"},
    {"attn_mask_shape", "attn_mask", DTYPE_BOOL, 2, {4, 5}, 0, NULL, NULL,
     "expected (L, S) or (N * nhead, L, S) = (4, 6) or (4, 4, 6)"},
    {"attn_mask_3d_per_sequence", "attn_mask", DTYPE_F32, 3, {2, 4, 6}, 0, NULL, NULL,
     "= (4, 6) or (4, 4, 6)"},
    {"attn_mask_4d", "attn_mask", DTYPE_BOOL, 4, {2, 2, 4, 6}, 0, NULL, NULL,
     "= (4, 6) or (4, 4, 6)"},
    {"is_causal_without_mask", NULL, DTYPE_F32, 0, {0}, 0, "is_causal", "true",
     "Need attn_mask if specifying the is_causal hint"},
    {"self_attention_with_key", NULL, DTYPE_F32, 0, {0}, 0, "self_attention", "true",
     "'key' is present, but a self_attention case holds query alone"},
    {"batch_first_false", NULL, DTYPE_F32, 0, {0}, 0, "batch_first", "false",
     "batch-first (N, L, D) inputs only"},
    {"dropout", NULL, DTYPE_F32, 0, {0}, 0, "dropout", "0.1", "only 0 is supported"},
    {"add_bias_kv", NULL, DTYPE_F32, 0, {0}, 0, "add_bias_kv", "true", "not supported"},
    {"need_weights_not_bool", NULL, DTYPE_F32, 0, {0}, 0, "need_weights", "yes",
     "expected true or false"},
    {"grad_output_shape", "grad_output", DTYPE_F32, 3, {2, 4, 6}, 0, NULL, NULL,
     "expected (N, L, D), the output's shape = (2, 4, 8)"},
    {"unknown_op", NULL, DTYPE_F32, 0, {0}, 0, "op", "attention", "not a chapter 03 op"},
};

_Static_assert(sizeof BAD / sizeof BAD[0] == 38, "list every bad case in main()");

#define BAD_PATH "bad_case.safetensors"

static void add_tensor(TensorFile *f, const char *name, DType dtype, int ndim,
                       const int64_t *shape, int poke)
{
    Tensor t;
    Error err;
    assert_ok(tensor_alloc(&t, dtype, ndim, shape, &err));
    if (dtype == DTYPE_F32)   /* small values, so a valid case computes sensibly */
        for (int64_t i = 0; i < tensor_numel(&t); i++)
            ((float *)t.data)[i] = (float)((i * 37 % 17) - 8) / 16;
    if (poke && tensor_numel(&t) > 0) ((uint8_t *)t.data)[0] = (uint8_t)poke;
    assert_ok(tensorfile_add(f, name, &t, &err));
}

/* The valid case with the changes of `bad` applied. */
static void build_bad_case(TensorFile *f, const BadCase *bad)
{
    static const struct { const char *name; int ndim; int64_t shape[3]; } BASE[] = {
        {"query", 3, {2, 4, 8}},        {"key", 3, {2, 6, 8}},
        {"value", 3, {2, 6, 8}},        {"in_proj_weight", 2, {24, 8}},
        {"in_proj_bias", 1, {24}},      {"out_proj.weight", 2, {8, 8}},
        {"out_proj.bias", 1, {8}},      {"grad_output", 3, {2, 4, 8}},
    };
    Error err;
    memset(f, 0, sizeof *f);
    f->path = strdup(BAD_PATH);
    assert_non_null(f->path);
    assert_ok(tensorfile_set_meta(f, "op", "mha_backward", &err));
    if (!bad->key || strcmp(bad->key, "nhead") != 0 || bad->value)
        assert_ok(tensorfile_set_meta(f, "nhead", "2", &err));
    for (size_t i = 0; i < sizeof BASE / sizeof BASE[0]; i++)
        if (!bad->tensor || strcmp(bad->tensor, BASE[i].name) != 0)
            add_tensor(f, BASE[i].name, DTYPE_F32, BASE[i].ndim, BASE[i].shape, 0);
    if (bad->tensor && bad->ndim >= 0)
        add_tensor(f, bad->tensor, bad->dtype, bad->ndim, bad->shape, bad->poke);
    if (bad->key && bad->value)   /* a key without a value: nhead left out */
        assert_ok(tensorfile_set_meta(f, bad->key, bad->value, &err));
}

static void test_bad_case(void **state)
{
    const BadCase *bad = *state;
    TensorFile in;
    build_bad_case(&in, bad);
    assert_case_refused(mha_case_eval, &in, bad->expect);
    tensorfile_free(&in);
}

/* The base of the bad cases is itself fine (so each bad case fails for its
 * own reason), and so are its variants with masks, is_causal, per-head
 * weights and separate projections. */
static void test_valid_base_case(void **state)
{
    const struct { BadCase change; int n_outputs; } ok[] = {
        {{"base", NULL, DTYPE_F32, 0, {0}, 0, NULL, NULL, NULL}, 9},
        {{"kpm_float", "key_padding_mask", DTYPE_F32, 2, {2, 6}, 0, NULL, NULL, NULL}, 9},
        {{"attn_mask_3d", "attn_mask", DTYPE_BOOL, 3, {4, 4, 6}, 1, NULL, NULL, NULL}, 9},
        {{"no_weights", NULL, DTYPE_F32, 0, {0}, 0, "need_weights", "false", NULL}, 8},
        {{"per_head", NULL, DTYPE_F32, 0, {0}, 0, "average_attn_weights", "false", NULL}, 9},
        {{"causal_hint", "attn_mask", DTYPE_BOOL, 2, {4, 6}, 0, "is_causal", "true", NULL}, 9},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        TensorFile in, out = {0};
        build_bad_case(&in, &ok[i].change);
        Error err = {{0}};
        if (mha_case_eval(&in, &out, &err) != 0) {
            print_error("%s: %s\n", ok[i].change.name, err.msg);
            fail();
        }
        print_message("  %s: accepted, %d outputs written\n", ok[i].change.name, out.n_tensors);
        assert_int_equal(out.n_tensors, ok[i].n_outputs);
        assert_non_null(tensorfile_find(&out, "grad_out_proj.weight"));
        tensorfile_free(&in);
        tensorfile_free(&out);
    }
}

/* The chapter program on a bad case: exit status 1, a one-line message
 * naming the file, and no output file. */
static void test_program_refuses_bad_case(void **state)
{
    char in_path[128], out_path[128], err_path[128], cmd[512];
    snprintf(in_path, sizeof in_path, "build/tmp_mha_bad_%d.safetensors", (int)getpid());
    snprintf(out_path, sizeof out_path, "build/tmp_mha_out_%d.safetensors", (int)getpid());
    snprintf(err_path, sizeof err_path, "build/tmp_mha_err_%d.txt", (int)getpid());
    TensorFile in;
    build_bad_case(&in, &BAD[6]);                        /* nhead 3 with D = 8 */
    Error err;
    assert_ok(safetensors_write(in_path, &in, &err));
    tensorfile_free(&in);
    snprintf(cmd, sizeof cmd, "build/03_mha --case %s --out %s 2> %s", in_path, out_path,
             err_path);
    int status = system(cmd);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 1);
    assert_int_equal(access(out_path, F_OK), -1);
    FILE *ef = fopen(err_path, "r");
    assert_non_null(ef);
    char line[1024] = {0}, extra[16];
    assert_non_null(fgets(line, sizeof line, ef));
    assert_null(fgets(extra, sizeof extra, ef));         /* exactly one line */
    fclose(ef);
    print_message("  %s", line);
    assert_non_null(strstr(line, in_path));
    assert_non_null(strstr(line, "not divisible by nhead 3"));
    unlink(in_path);
    unlink(err_path);
}

/* ------------------------------------------------------------------------ */

#define BAD_TEST(i) { BAD[i].name, test_bad_case, NULL, NULL, (void *)&BAD[i] }

/* The malformed-input corpus of this chapter (tests/malformed/03_mha/): each
 * file gets a one-line error naming it, and no output appears. */
CASE_CORPUS_READER(read_corpus_case, mha_case_eval)

static void test_malformed_corpus(void **state)
{
    (void)state;
    check_malformed_corpus("03_mha", read_corpus_case, 5);
}

int main(void)
{
    /* Not static: BAD[i].name is read at run time (C has no constant
     * expression for it, and clang says so). */
    const struct CMUnitTest tests[] = {
        GOLDEN_TEST(test_mha_case, "worked_example"),
        GOLDEN_TEST(test_mha_case, "worked_example_padding"),
        GOLDEN_TEST(test_mha_case, "worked_example_backward"),
        GOLDEN_TEST(test_mha_case, "packed_self"),
        GOLDEN_TEST(test_mha_case, "packed_self_backward"),
        GOLDEN_TEST(test_mha_case, "packed_cross"),
        GOLDEN_TEST(test_mha_case, "packed_cross_backward"),
        GOLDEN_TEST(test_mha_case, "separate_kdim_vdim"),
        GOLDEN_TEST(test_mha_case, "separate_kdim_vdim_backward"),
        GOLDEN_TEST(test_mha_case, "separate_kdim"),
        GOLDEN_TEST(test_mha_case, "separate_kdim_backward"),
        GOLDEN_TEST(test_mha_case, "separate_vdim"),
        GOLDEN_TEST(test_mha_case, "separate_vdim_backward"),
        GOLDEN_TEST(test_mha_case, "no_bias_packed"),
        GOLDEN_TEST(test_mha_case, "no_bias_packed_backward"),
        GOLDEN_TEST(test_mha_case, "no_bias_separate"),
        GOLDEN_TEST(test_mha_case, "no_bias_separate_backward"),
        GOLDEN_TEST(test_mha_case, "one_head"),
        GOLDEN_TEST(test_mha_case, "one_head_backward"),
        GOLDEN_TEST(test_mha_case, "eight_heads"),
        GOLDEN_TEST(test_mha_case, "eight_heads_backward"),
        GOLDEN_TEST(test_mha_case, "head_dim_1"),
        GOLDEN_TEST(test_mha_case, "one_query"),
        GOLDEN_TEST(test_mha_case, "one_query_backward"),
        GOLDEN_TEST(test_mha_case, "one_key"),
        GOLDEN_TEST(test_mha_case, "weights_per_head"),
        GOLDEN_TEST(test_mha_case, "weights_per_head_backward"),
        GOLDEN_TEST(test_mha_case, "no_weights"),
        GOLDEN_TEST(test_mha_case, "no_weights_backward"),
        GOLDEN_TEST(test_mha_case, "kpm_bool"),
        GOLDEN_TEST(test_mha_case, "kpm_bool_backward"),
        GOLDEN_TEST(test_mha_case, "kpm_float"),
        GOLDEN_TEST(test_mha_case, "kpm_float_backward"),
        GOLDEN_TEST(test_mha_case, "attn_bool_2d"),
        GOLDEN_TEST(test_mha_case, "attn_bool_2d_backward"),
        GOLDEN_TEST(test_mha_case, "attn_float_2d"),
        GOLDEN_TEST(test_mha_case, "attn_float_2d_backward"),
        GOLDEN_TEST(test_mha_case, "attn_bool_3d"),
        GOLDEN_TEST(test_mha_case, "attn_bool_3d_backward"),
        GOLDEN_TEST(test_mha_case, "attn_float_3d"),
        GOLDEN_TEST(test_mha_case, "attn_float_3d_backward"),
        GOLDEN_TEST(test_mha_case, "both_masks_bool"),
        GOLDEN_TEST(test_mha_case, "both_masks_bool_backward"),
        GOLDEN_TEST(test_mha_case, "both_masks_float"),
        GOLDEN_TEST(test_mha_case, "both_masks_mixed"),
        GOLDEN_TEST(test_mha_case, "both_masks_mixed_backward"),
        GOLDEN_TEST(test_mha_case, "self_kpm"),
        GOLDEN_TEST(test_mha_case, "self_kpm_backward"),
        GOLDEN_TEST(test_mha_case, "causal_sdpa"),
        GOLDEN_TEST(test_mha_case, "causal_sdpa_backward"),
        GOLDEN_TEST(test_mha_case, "causal_weights"),
        GOLDEN_TEST(test_mha_case, "causal_weights_backward"),
        GOLDEN_TEST(test_mha_case, "causal_kpm"),
        GOLDEN_TEST(test_mha_case, "causal_cross"),
        GOLDEN_TEST(test_mha_case, "causal_cross_backward"),
        GOLDEN_TEST(test_mha_case, "causal_mask_only"),
        GOLDEN_TEST(test_mha_case, "causal_hint_wins"),
        GOLDEN_TEST(test_mha_case, "causal_hint_wins_backward"),
        GOLDEN_TEST(test_mha_case, "unbatched"),
        GOLDEN_TEST(test_mha_case, "unbatched_backward"),
        GOLDEN_TEST(test_mha_case, "unbatched_masks"),
        GOLDEN_TEST(test_mha_case, "unbatched_masks_backward"),
        GOLDEN_TEST(test_mha_case, "fully_masked_kpm"),
        GOLDEN_TEST(test_mha_case, "fully_masked_kpm_backward"),
        GOLDEN_TEST(test_mha_case, "fully_masked_rows"),
        GOLDEN_TEST(test_mha_case, "fully_masked_rows_backward"),
        GOLDEN_TEST(test_mha_case, "fully_masked_float"),
        GOLDEN_TEST(test_mha_case, "fully_masked_float_backward"),
        GOLDEN_TEST(test_mha_case, "larger"),
        GOLDEN_TEST(test_mha_case, "larger_backward"),
        GOLDEN_TEST(test_mha_case, "large_logits"),
        GOLDEN_TEST(test_mha_case, "large_logits_backward"),

        cmocka_unit_test(test_split_merge_round_trip),
        cmocka_unit_test(test_mask_bias_conventions),
        cmocka_unit_test(test_mha_bool_is_sdpa_not),
        cmocka_unit_test(test_average_heads),
        cmocka_unit_test(test_worked_example_values),
        cmocka_unit_test(test_weights_rows_sum_to_one),
        cmocka_unit_test(test_fully_masked_rows),
        cmocka_unit_test(test_fully_masked_kpm),
        cmocka_unit_test(test_causal_hint_rules),
        cmocka_unit_test(test_causal_equals_mask),
        cmocka_unit_test(test_self_attention_grad_is_sum_of_paths),
        cmocka_unit_test(test_packed_equals_separate),
        cmocka_unit_test(test_backward_accumulates),
        cmocka_unit_test(test_null_input_grads),
        cmocka_unit_test(test_thread_count_independent),
        cmocka_unit_test(test_cache_checks),

        BAD_TEST(0),  BAD_TEST(1),  BAD_TEST(2),  BAD_TEST(3),  BAD_TEST(4),  BAD_TEST(5),
        BAD_TEST(6),  BAD_TEST(7),  BAD_TEST(8),  BAD_TEST(9),  BAD_TEST(10), BAD_TEST(11),
        BAD_TEST(12), BAD_TEST(13), BAD_TEST(14), BAD_TEST(15), BAD_TEST(16), BAD_TEST(17),
        BAD_TEST(18), BAD_TEST(19), BAD_TEST(20), BAD_TEST(21), BAD_TEST(22), BAD_TEST(23),
        BAD_TEST(24), BAD_TEST(25), BAD_TEST(26), BAD_TEST(27), BAD_TEST(28), BAD_TEST(29),
        BAD_TEST(30), BAD_TEST(31), BAD_TEST(32), BAD_TEST(33), BAD_TEST(34), BAD_TEST(35),
        BAD_TEST(36), BAD_TEST(37),
        cmocka_unit_test(test_valid_base_case),
        cmocka_unit_test(test_program_refuses_bad_case),
        cmocka_unit_test(test_malformed_corpus),
    };
    return run_chapter_tests("chapter 03: multi-head attention", tests);
}
