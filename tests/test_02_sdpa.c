/*
 * test_02_sdpa.c - chapter 02: scaled dot-product attention, forward and
 * backward, against goldens made by reference/ch02_sdpa.py from
 * F.scaled_dot_product_attention and autograd.
 *
 * The golden tests read each case with sdpa_case_read() (the chapter
 * program's own reader), then call the three documented functions,
 * sdpa_mask_bias, sdpa_forward and sdpa_backward, and compare every output
 * with the case's tolerance. The unit tests check the rules the README states
 * (fully-masked rows, causal alignment, broadcasting, accumulation, thread
 * count) and that every kind of bad case is refused with a clear message.
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
#include "rng.h"
#include "sdpa.h"
#include "sdpa_case.h"

#define CHAPTER "02_sdpa"

/* ------------------------------------------------------------------------ */
/* Running a case through the documented functions                          */
/* ------------------------------------------------------------------------ */

/* Everything one forward (and backward) pass produces. */
typedef struct {
    SdpaCase c;
    float *bias;                  /* (N, L, S), or NULL without attn_mask */
    float *out;                   /* (N, L, Ev) */
    float *att;                   /* (N, L, S) */
    float *dq, *dk, *dv;          /* (N, L, E), (N, S, E), (N, S, Ev); backward only */
} Run;

static int64_t n_att(const SdpaCase *c) { return (int64_t)c->N * c->L * c->S; }

/* Reads the case and runs sdpa_mask_bias, sdpa_forward and, for
 * sdpa_backward cases, sdpa_backward; fails the test on any error. */
static void run_case(Run *r, const TensorFile *f)
{
    memset(r, 0, sizeof *r);
    Error err;
    if (sdpa_case_read(f, &r->c, &err) != 0) {
        print_error("%s\n", err.msg);
        fail();
    }
    const SdpaCase *c = &r->c;
    int N = c->N, L = c->L, S = c->S, E = c->E, Ev = c->Ev;
    if (c->mask) {
        r->bias = test_floats(n_att(c));
        int64_t att_shape[TENSOR_MAX_DIMS];
        memcpy(att_shape, c->batch_shape, sizeof att_shape[0] * (c->ndim - 2));
        att_shape[c->ndim - 2] = L;
        att_shape[c->ndim - 1] = S;
        assert_ok(sdpa_mask_bias(r->bias, c->mask->data, c->mask->dtype == DTYPE_BOOL,
                                 c->mask->shape, c->mask->ndim, att_shape, c->ndim));
    }
    r->out = test_floats((int64_t)N * L * Ev);
    r->att = test_floats(n_att(c));
    SdpaArgs args = sdpa_case_args(c, r->bias);
    assert_ok(sdpa_forward(r->out, r->att, c->q, c->k, c->v, &args));
    if (c->backward) {
        r->dq = test_floats((int64_t)N * L * E);
        r->dk = test_floats((int64_t)N * S * E);
        r->dv = test_floats((int64_t)N * S * Ev);
        assert_ok(sdpa_backward(r->dq, r->dk, r->dv, c->dout, c->q, c->k, c->v, r->att,
                                &args));
    }
}

static void run_free(Run *r)
{
    free(r->bias);
    free(r->out);
    free(r->att);
    free(r->dq);
    free(r->dk);
    free(r->dv);
}

/* ------------------------------------------------------------------------ */
/* Golden cases                                                              */
/* ------------------------------------------------------------------------ */

static void test_sdpa_case(void **state)
{
    const char *name = *state;
    TensorFile f;
    load_golden(&f, CHAPTER, name);
    double atol, rtol;
    golden_tolerance(&f, &atol, &rtol);
    Run r;
    run_case(&r, &f);
    const SdpaCase *c = &r.c;
    print_message("  N %d, L %d, S %d, E %d, Ev %d, scale %.4g%s%s; out[0] = %.6f\n", c->N,
                  c->L, c->S, c->E, c->Ev, c->scale, c->is_causal ? ", causal" : "",
                  c->mask ? (c->mask->dtype == DTYPE_BOOL ? ", bool mask" : ", float mask")
                          : "",
                  r.out[0]);
    assert_close_to_golden(&f, "output", r.out, (int64_t)c->N * c->L * c->Ev, atol, rtol);
    assert_close_to_golden(&f, "attn_weights", r.att, n_att(c), atol, rtol);
    if (c->backward) {
        assert_close_to_golden(&f, "grad_query", r.dq, (int64_t)c->N * c->L * c->E, atol, rtol);
        assert_close_to_golden(&f, "grad_key", r.dk, (int64_t)c->N * c->S * c->E, atol, rtol);
        assert_close_to_golden(&f, "grad_value", r.dv, (int64_t)c->N * c->S * c->Ev, atol,
                               rtol);
    }
    run_free(&r);
    tensorfile_free(&f);
}

/* ------------------------------------------------------------------------ */
/* The rules the README states                                               */
/* ------------------------------------------------------------------------ */

/* A query whose row of the mask is all false (or all -inf) gets zero weights,
 * a zero output row and a zero gradient, exactly; torch's golden agrees. */
static void check_fully_masked(const char *name, const int *rows, int n_rows)
{
    TensorFile f;
    load_golden(&f, CHAPTER, name);
    Run r;
    run_case(&r, &f);
    const SdpaCase *c = &r.c;
    const float *want_out = golden_tensor(&f, "output", DTYPE_F32)->data;
    const float *want_dq = golden_tensor(&f, "grad_query", DTYPE_F32)->data;
    int checked = 0;
    for (int b = 0; b < c->N; b++) {
        for (int k = 0; k < n_rows; k++) {
            int i = rows[k];
            for (int j = 0; j < c->S; j++)
                assert_same(r.att[((size_t)b * c->L + i) * c->S + j], 0.0f);
            for (int e = 0; e < c->Ev; e++) {
                size_t at = ((size_t)b * c->L + i) * c->Ev + e;
                assert_true(r.out[at] == 0.0f && want_out[at] == 0.0f);
            }
            for (int e = 0; e < c->E; e++) {
                size_t at = ((size_t)b * c->L + i) * c->E + e;
                assert_true(r.dq[at] == 0.0f && want_dq[at] == 0.0f);
            }
            checked++;
        }
    }
    print_message("  %s: %d fully-masked query rows: weights, output and grad_query all 0, "
                  "as in torch\n", name, checked);
    for (int64_t i = 0; i < n_att(c); i++) assert_false(isnan(r.att[i]));
    run_free(&r);
    tensorfile_free(&f);
}

static void test_fully_masked_bool_rows_are_zero(void **state)
{
    check_fully_masked("fully_masked_bool_backward", (int[]){1, 4}, 2);
}

static void test_fully_masked_additive_rows_are_zero(void **state)
{
    check_fully_masked("fully_masked_additive_backward", (int[]){0, 3}, 2);
}

/* An infinite score makes its row of weights NaN (inf - inf, as in torch)
 * and leaves the other rows alone. make sanitize runs this too: the fuzzer
 * found softmax_exp converting that NaN to an int, which C leaves
 * undefined. */
static void test_infinite_score(void **state)
{
    enum { L = 2, S = 2, E = 2 };
    const float q[L * E] = {INFINITY, 1, 1, 2};          /* scores (inf, -inf), finite */
    const float k[S * E] = {1, 0, -1, 0};
    const float v[S * E] = {1, 2, 3, 4};
    float out[L * E], att[L * S];
    SdpaArgs a = {.N = 1, .L = L, .S = S, .E = E, .Ev = E, .scale = 1.0f};
    assert_ok(sdpa_forward(out, att, q, k, v, &a));
    for (int j = 0; j < S; j++) assert_true(isnan(att[j]) && isnan(out[j]));
    assert_float_equal(att[S] + att[S + 1], 1.0f, 1e-6f);
    assert_false(isnan(out[E]) || isnan(out[E + 1]));
    print_message("  weights of the row with an infinite score: %g %g; of the finite row: "
                  "%.4f %.4f\n", att[0], att[1], att[2], att[3]);
}

/* Dropout on the attention weights keeps every weight's expectation: with
 * all values 1, a row's output is sum_j att[j] keep[j] / (1 - p), whose mean
 * is sum_j att[j] = 1. Over 2048 rows of 32 keys with p = 0.3 the mean is
 * within 0.015 of 1 (the standard error is about 0.003), about p of the
 * weights are dropped, and with every weight kept the output is exactly
 * the one without dropout, times 1 / (1 - p). */
static void test_dropout_keeps_expectation(void **state)
{
    enum { N = 64, L = 32, S = 32, E = 8 };
    const float p = 0.3f;
    float *q = test_floats(N * L * E), *k = test_floats(N * S * E), *v = test_floats(N * S);
    float *out = test_floats(N * L), *plain = test_floats(N * L), *att = test_floats(N * L * S);
    uint8_t *keep = malloc(N * L * S), *all = malloc(N * L * S);
    Rng rng;
    rng_seed(&rng, 7, 0);
    for (int i = 0; i < N * L * E; i++) q[i] = rng_uniform(&rng) - 0.5f;
    for (int i = 0; i < N * S * E; i++) k[i] = rng_uniform(&rng) - 0.5f;
    for (int i = 0; i < N * S; i++) v[i] = 1.0f;
    int64_t dropped = 0;
    for (int i = 0; i < N * L * S; i++) {
        keep[i] = rng_uniform(&rng) >= p;
        all[i] = 1;
        dropped += !keep[i];
    }
    SdpaArgs with_dropout = {N, L, S, E, 1, sdpa_default_scale(E), 0, NULL, keep, p};
    SdpaArgs plain_args = {N, L, S, E, 1, sdpa_default_scale(E), 0, NULL, NULL, 0.0f};
    SdpaArgs kept_all = {N, L, S, E, 1, sdpa_default_scale(E), 0, NULL, all, p};
    assert_ok(sdpa_forward(out, att, q, k, v, &with_dropout));
    double mean = 0;
    for (int i = 0; i < N * L; i++) mean += out[i] / (N * L);
    assert_ok(sdpa_forward(plain, att, q, k, v, &plain_args));
    assert_ok(sdpa_forward(out, att, q, k, v, &kept_all));
    double worst = 0;
    for (int i = 0; i < N * L; i++) {        /* not fmax: it passes over NaN (and see test_04) */
        double d = fabs(out[i] - plain[i] / (1.0 - p));
        if (!(d <= worst)) worst = d;
    }
    print_message("  p %.1f: %.4f of the weights dropped, mean output %.4f (1 expected); all "
                  "kept: within %.2g of the plain output / (1 - p)\n", (double)p,
                  (double)dropped / (N * L * S), mean, worst);
    assert_true(fabs(mean - 1.0) < 0.015);
    assert_true(fabs((double)dropped / (N * L * S) - p) < 0.01);
    assert_true(worst < 1e-5);
    free(q), free(k), free(v), free(out), free(plain), free(att), free(keep), free(all);
}

/* is_causal is top-left aligned: query i sees keys 0..i, whether L < S or
 * L > S; every row still sums to 1 (row 0 always sees key 0). */
static void test_causal_alignment(void **state)
{
    const char *names[] = {"causal_keys_outnumber_queries", "causal_queries_outnumber_keys",
                           "causal_square"};
    for (int n = 0; n < 3; n++) {
        TensorFile f;
        load_golden(&f, CHAPTER, names[n]);
        Run r;
        run_case(&r, &f);
        const SdpaCase *c = &r.c;
        double worst = 0;
        for (int b = 0; b < c->N; b++) {
            for (int i = 0; i < c->L; i++) {
                const float *row = r.att + ((size_t)b * c->L + i) * c->S;
                double sum = 0;
                for (int j = 0; j < c->S; j++) {
                    if (j > i) assert_same(row[j], 0.0f);
                    else assert_true(row[j] > 0.0f);
                    sum += row[j];
                }
                worst = fmax(worst, fabs(sum - 1.0));
            }
        }
        print_message("  %s (L %d, S %d): zero exactly above the diagonal, rows sum to 1 "
                      "within %.2g\n", names[n], c->L, c->S, worst);
        assert_true(worst < 1e-6);
        run_free(&r);
        tensorfile_free(&f);
    }
}

/* is_causal gives bit for bit what the boolean mask tril(ones(L, S)) gives
 * on the golden case `name` (the causal path leaves the keys a query cannot
 * see out of its softmax; the mask makes them -inf). */
static void causal_equals_tril_mask(const char *name)
{
    TensorFile f;
    load_golden(&f, CHAPTER, name);
    Run r;
    run_case(&r, &f);
    const SdpaCase *c = &r.c;
    int L = c->L, S = c->S;
    unsigned char *tril = calloc((size_t)L * S, 1);              /* (L, S) */
    assert_non_null(tril);
    for (int i = 0; i < L; i++)
        for (int j = 0; j <= i && j < S; j++) tril[(size_t)i * S + j] = 1;
    float *bias = test_floats(n_att(c)), *out = test_floats((int64_t)c->N * L * c->Ev);
    float *att = test_floats(n_att(c));
    int64_t att_shape[4] = {c->batch_shape[0], c->batch_shape[1], L, S};
    assert_ok(sdpa_mask_bias(bias, tril, 1, (int64_t[]){L, S}, 2, att_shape, 4));
    SdpaArgs a = {c->N, L, S, c->E, c->Ev, c->scale, 0, bias, NULL, 0.0f};
    assert_ok(sdpa_forward(out, att, c->q, c->k, c->v, &a));
    assert_memory_equal(att, r.att, n_att(c) * sizeof(float));
    assert_memory_equal(out, r.out, (size_t)c->N * L * c->Ev * sizeof(float));
    print_message("  is_causal and a tril boolean mask agree bit for bit (L %d, S %d)\n", L, S);
    free(tril);
    free(bias);
    free(out);
    free(att);
    run_free(&r);
    tensorfile_free(&f);
}

/* The same with more keys than queries, and fewer. */
static void test_causal_equals_tril_mask(void **state)
{
    causal_equals_tril_mask("causal_keys_outnumber_queries");
    causal_equals_tril_mask("causal_queries_outnumber_keys");
}

/* A broadcast mask gives the same bias as the mask written out in full, and
 * each entry comes from the right place. Mask (2, 1, 1, 5) on attention
 * (2, 3, 4, 5): bias[n, h, i, j] = mask[n, 0, 0, j]. */
static void test_mask_broadcast(void **state)
{
    enum { N = 2, H = 3, L = 4, S = 5 };
    float small[N * S];                                           /* (N, 1, 1, S) */
    for (int i = 0; i < N * S; i++) small[i] = (float)(i * 10 + 1);
    float full[N * H * L * S], bias_small[N * H * L * S], bias_full[N * H * L * S];
    for (int n = 0; n < N; n++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < L; i++)
                for (int j = 0; j < S; j++)
                    full[((n * H + h) * L + i) * S + j] = small[n * S + j];
    int64_t att_shape[4] = {N, H, L, S};
    assert_ok(sdpa_mask_bias(bias_small, small, 0, (int64_t[]){N, 1, 1, S}, 4, att_shape,
                             4));
    assert_ok(sdpa_mask_bias(bias_full, full, 0, att_shape, 4, att_shape, 4));
    assert_close("bias of (2,1,1,5) vs written out", bias_small, full, N * H * L * S, 0, 0);
    assert_close("bias of (2,3,4,5) vs the mask", bias_full, full, N * H * L * S, 0, 0);

    /* Fewer dimensions line up on the right: a (L, 1) mask repeats along the
     * keys and over every batch entry. */
    float col[L] = {1, 2, 3, 4};                                  /* (L, 1) */
    assert_ok(sdpa_mask_bias(bias_small, col, 0, (int64_t[]){L, 1}, 2, att_shape, 4));
    for (int b = 0; b < N * H; b++)
        for (int i = 0; i < L; i++)
            for (int j = 0; j < S; j++) assert_same(bias_small[(b * L + i) * S + j], col[i]);
    print_message("  (2, 1, 1, 5) and (4, 1) masks broadcast over (2, 3, 4, 5) as expected\n");
}

/* F.scaled_dot_product_attention's boolean convention: true = may attend
 * (bias 0), false = masked (bias -inf). A float mask is added as it is. */
static void test_mask_bias_conventions(void **state)
{
    unsigned char allow[2 * 3] = {1, 0, 1, 0, 0, 1};
    float bias[6];
    int64_t shape[2] = {2, 3};
    assert_ok(sdpa_mask_bias(bias, allow, 1, shape, 2, shape, 2));
    float want[6] = {0, -INFINITY, 0, -INFINITY, -INFINITY, 0};
    assert_close("bool mask: true -> 0, false -> -inf", bias, want, 6, 0, 0);
    float additive[6] = {0.5f, -1.0f, -INFINITY, 2.0f, 0.0f, -3.5f};
    assert_ok(sdpa_mask_bias(bias, additive, 0, shape, 2, shape, 2));
    assert_close("float mask: copied", bias, additive, 6, 0, 0);
}

/* The seed's worked example, against the values the notebook printed (to 4
 * decimals; its inputs were printed rounded, hence the 1.5e-4). */
static void test_seed_example_printed_values(void **state)
{
    const float q[6] = {0.3367f, 0.1288f, 0.2345f, 0.2303f, -1.1229f, -0.1863f};
    const float k[6] = {2.2082f, -0.6380f, 0.4617f, 0.2674f, 0.5349f, 0.8094f};
    const float v[6] = {1.1103f, -1.6898f, -0.9890f, 0.9580f, 1.3221f, 0.8172f};
    const float want_out[6] = {0.5698f, -0.1520f, 0.5379f, -0.0265f, 0.2246f, 0.5556f};
    const float want_att[9] = {0.4028f, 0.2886f, 0.3086f, 0.3538f, 0.3069f, 0.3393f,
                               0.1303f, 0.4630f, 0.4067f};
    float out[6], att[9];
    SdpaArgs a = {.N = 1, .L = 3, .S = 3, .E = 2, .Ev = 2, .scale = sdpa_default_scale(2)};
    assert_ok(sdpa_forward(out, att, q, k, v, &a));
    assert_close("seed example output", out, want_out, 6, 1.5e-4, 0);
    assert_close("seed example attention", att, want_att, 9, 1.5e-4, 0);
}

/* scale absent from the case means 1/sqrt(E), as in torch. */
static void test_default_scale(void **state)
{
    assert_same(sdpa_default_scale(4), 0.5f);
    assert_same(sdpa_default_scale(1), 1.0f);
    assert_true(fabsf(sdpa_default_scale(8) - 0.35355339f) < 1e-7f);
    TensorFile f;
    load_golden(&f, CHAPTER, "square_unmasked");
    SdpaCase c;
    Error err;
    assert_ok(sdpa_case_read(&f, &c, &err));
    assert_null(tensorfile_meta(&f, "scale"));
    assert_same(c.scale, sdpa_default_scale(c.E));
    tensorfile_free(&f);
    load_golden(&f, CHAPTER, "custom_scale");
    assert_ok(sdpa_case_read(&f, &c, &err));
    assert_same(c.scale, 0.37f);
    tensorfile_free(&f);
}

/* sdpa_backward adds into dq, dk, dv: two calls give twice the gradient. */
static void test_backward_accumulates(void **state)
{
    TensorFile f;
    load_golden(&f, CHAPTER, "bool_mask_backward");
    double atol, rtol;
    golden_tolerance(&f, &atol, &rtol);
    Run r;
    run_case(&r, &f);
    const SdpaCase *c = &r.c;
    SdpaArgs a = sdpa_case_args(c, NULL);
    assert_ok(sdpa_backward(r.dq, r.dk, r.dv, c->dout, c->q, c->k, c->v, r.att, &a));
    const char *names[3] = {"grad_query", "grad_key", "grad_value"};
    const float *got[3] = {r.dq, r.dk, r.dv};
    for (int t = 0; t < 3; t++) {
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

/* Forward and backward with 1 and 2 threads are bit-identical, both for many
 * batch entries (the batch loop is parallel) and for one (the matmuls are). */
static void test_thread_count_independent(void **state)
{
    const char *names[2] = {"batch_heads_backward", "rank2_backward"};
    for (int n = 0; n < 2; n++) {
        TensorFile f;
        load_golden(&f, CHAPTER, names[n]);
        int saved = omp_get_max_threads();
        Run one, two;
        omp_set_num_threads(1);
        run_case(&one, &f);
        omp_set_num_threads(2);
        run_case(&two, &f);
        omp_set_num_threads(saved);
        const SdpaCase *c = &one.c;
        assert_memory_equal(one.out, two.out, (size_t)c->N * c->L * c->Ev * sizeof(float));
        assert_memory_equal(one.att, two.att, n_att(c) * sizeof(float));
        assert_memory_equal(one.dq, two.dq, (size_t)c->N * c->L * c->E * sizeof(float));
        assert_memory_equal(one.dk, two.dk, (size_t)c->N * c->S * c->E * sizeof(float));
        assert_memory_equal(one.dv, two.dv, (size_t)c->N * c->S * c->Ev * sizeof(float));
        print_message("  %s: 1 and 2 threads give identical bits\n", names[n]);
        run_free(&one);
        run_free(&two);
        tensorfile_free(&f);
    }
}

/* ------------------------------------------------------------------------ */
/* Bad cases: refused with one line naming the file and the problem         */
/* ------------------------------------------------------------------------ */

/* A valid sdpa_backward case has query (2, 3, 4, 5), key (2, 3, 6, 5),
 * value (2, 3, 6, 7) and grad_output (2, 3, 4, 7). Each bad case changes one
 * tensor (or adds attn_mask, or removes a tensor with ndim -1) and/or sets one
 * metadata key. */
typedef struct {
    const char *name;
    const char *tensor;          /* NULL: no tensor changes */
    DType dtype;
    int ndim;                    /* -1: remove the tensor */
    int64_t shape[5];
    const char *key, *value;     /* metadata to set, or NULL */
    const char *expect;          /* a phrase the error must contain */
} BadCase;

static const BadCase BAD[] = {
    {"missing_query", "query", DTYPE_F32, -1, {0}, NULL, NULL, "'query' is missing"},
    {"missing_grad_output", "grad_output", DTYPE_F32, -1, {0}, NULL, NULL,
     "'grad_output' is missing"},
    {"query_f64", "query", DTYPE_F64, 4, {2, 3, 4, 5}, NULL, NULL, "dtype F64, expected F32"},
    {"query_rank1", "query", DTYPE_F32, 1, {5}, NULL, NULL, "needs at least (L, E)"},
    {"rank_mismatch", "key", DTYPE_F32, 3, {3, 6, 5}, NULL, NULL, "ranks 4, 3 and 4"},
    {"batch_mismatch", "value", DTYPE_F32, 4, {2, 2, 6, 7}, NULL, NULL, "batch dimension 1"},
    {"e_mismatch", "key", DTYPE_F32, 4, {2, 3, 6, 4}, NULL, NULL, "same last dimension E"},
    {"s_mismatch", "value", DTYPE_F32, 4, {2, 3, 5, 7}, NULL, NULL, "number of positions S"},
    {"empty_dimension", "query", DTYPE_F32, 4, {2, 3, 0, 5}, NULL, NULL, "between 1 and"},
    {"mask_not_broadcastable", "attn_mask", DTYPE_BOOL, 4, {2, 3, 4, 5}, NULL, NULL,
     "dimension 3 is 5, expected 1 or 6"},
    {"mask_wrong_batch", "attn_mask", DTYPE_F32, 4, {3, 1, 4, 6}, NULL, NULL,
     "dimension 0 is 3, expected 1 or 2"},
    {"mask_rank_too_high", "attn_mask", DTYPE_BOOL, 5, {1, 2, 3, 4, 6}, NULL, NULL,
     "more dimensions"},
    {"mask_dtype", "attn_mask", DTYPE_I64, 2, {4, 6}, NULL, NULL, "expected BOOL"},
    {"mask_and_causal", "attn_mask", DTYPE_BOOL, 2, {4, 6}, "is_causal", "true",
     "refuses both"},
    {"bad_is_causal", NULL, DTYPE_F32, 0, {0}, "is_causal", "yes", "expected true or false"},
    {"scale_not_a_number", NULL, DTYPE_F32, 0, {0}, "scale", "abc", "expected a number"},
    {"scale_inf", NULL, DTYPE_F32, 0, {0}, "scale", "inf",
     "scale is inf, outside [-3.4e38, 3.4e38]"},
    {"scale_nan", NULL, DTYPE_F32, 0, {0}, "scale", "nan", "scale is nan, expected a number"},
    {"dropout_without_mask", NULL, DTYPE_F32, 0, {0}, "dropout", "0.1",
     "has no 'dropout_mask'"},
    {"dropout_p_one", NULL, DTYPE_F32, 0, {0}, "dropout", "1", "dropout is 1, outside [0, 1)"},
    {"dropout_mask_shape", "dropout_mask", DTYPE_BOOL, 4, {2, 3, 4, 5}, "dropout", "0.1",
     "must be the attention shape"},
    {"dropout_mask_without_p", "dropout_mask", DTYPE_BOOL, 4, {2, 3, 4, 6}, NULL, NULL,
     "dropout is 0"},
    {"enable_gqa", NULL, DTYPE_F32, 0, {0}, "enable_gqa", "true", "grouped-query"},
    {"grad_output_shape", "grad_output", DTYPE_F32, 4, {2, 3, 4, 6}, NULL, NULL,
     "expected (2, 3, 4, 7)"},
    {"unknown_op", NULL, DTYPE_F32, 0, {0}, "op", "attention", "not a chapter 02 op"},
};

#define BAD_PATH "bad_case.safetensors"

static void add_zeros(TensorFile *f, const char *name, DType dtype, int ndim,
                      const int64_t *shape)
{
    Tensor t;
    Error err;
    assert_ok(tensor_alloc(&t, dtype, ndim, shape, &err));
    assert_ok(tensorfile_add(f, name, &t, &err));
}

/* The valid case with the changes of `bad` applied. */
static void build_bad_case(TensorFile *f, const BadCase *bad)
{
    static const struct { const char *name; int64_t shape[4]; } BASE[] = {
        {"query", {2, 3, 4, 5}}, {"key", {2, 3, 6, 5}}, {"value", {2, 3, 6, 7}},
        {"grad_output", {2, 3, 4, 7}},
    };
    Error err;
    memset(f, 0, sizeof *f);
    f->path = strdup(BAD_PATH);
    assert_non_null(f->path);
    assert_ok(tensorfile_set_meta(f, "op", "sdpa_backward", &err));
    for (int i = 0; i < 4; i++)
        if (!bad->tensor || strcmp(bad->tensor, BASE[i].name) != 0)
            add_zeros(f, BASE[i].name, DTYPE_F32, 4, BASE[i].shape);
    if (bad->tensor && bad->ndim >= 0) add_zeros(f, bad->tensor, bad->dtype, bad->ndim, bad->shape);
    if (bad->key) assert_ok(tensorfile_set_meta(f, bad->key, bad->value, &err));
}

static void test_bad_case(void **state)
{
    const BadCase *bad = *state;
    TensorFile in;
    build_bad_case(&in, bad);
    assert_case_refused(sdpa_case_eval, &in, bad->expect);
    tensorfile_free(&in);
}

/* The base of the bad cases is itself fine (so each bad case fails for its
 * own reason), and the 1-D mask torch 2.15 refuses with 4-D inputs is
 * accepted: broadcasting gives it a clear meaning. */
static void test_valid_base_case(void **state)
{
    const BadCase ok[] = {
        {"base", NULL, DTYPE_F32, 0, {0}, NULL, NULL, NULL},
        {"mask_1d", "attn_mask", DTYPE_BOOL, 1, {6}, NULL, NULL, NULL},
        {"mask_scalar_like", "attn_mask", DTYPE_F32, 4, {1, 1, 1, 1}, NULL, NULL, NULL},
        {"negative_scale", NULL, DTYPE_F32, 0, {0}, "scale", "-0.5", NULL},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        TensorFile in, out = {0};
        build_bad_case(&in, &ok[i]);
        Error err = {{0}};
        if (sdpa_case_eval(&in, &out, &err) != 0) {
            print_error("%s: %s\n", ok[i].name, err.msg);
            fail();
        }
        const char *names[5] = {"output", "attn_weights", "grad_query", "grad_key",
                                "grad_value"};
        for (int t = 0; t < 5; t++) assert_non_null(tensorfile_find(&out, names[t]));
        print_message("  %s: accepted, 5 outputs written\n", ok[i].name);
        tensorfile_free(&in);
        tensorfile_free(&out);
    }
}

/* The chapter program on a bad case: exit status 1, a one-line message
 * naming the file, and no output file. */
static void test_program_refuses_bad_case(void **state)
{
    char in_path[128], out_path[128], err_path[128], cmd[512];
    snprintf(in_path, sizeof in_path, "build/tmp_sdpa_bad_%d.safetensors", (int)getpid());
    snprintf(out_path, sizeof out_path, "build/tmp_sdpa_out_%d.safetensors", (int)getpid());
    snprintf(err_path, sizeof err_path, "build/tmp_sdpa_err_%d.txt", (int)getpid());
    TensorFile in;
    build_bad_case(&in, &BAD[13]);                       /* attn_mask with is_causal */
    Error err;
    assert_ok(safetensors_write(in_path, &in, &err));
    tensorfile_free(&in);
    snprintf(cmd, sizeof cmd, "build/02_sdpa --case %s --out %s 2> %s", in_path, out_path,
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
    assert_non_null(strstr(line, "is_causal"));
    unlink(in_path);
    unlink(err_path);
}

/* ------------------------------------------------------------------------ */

/* The malformed-input corpus of this chapter (tests/malformed/02_sdpa/): each
 * file gets a one-line error naming it, and no output appears. */
CASE_CORPUS_READER(read_corpus_case, sdpa_case_eval)

static void test_malformed_corpus(void **state)
{
    (void)state;
    check_malformed_corpus("02_sdpa", read_corpus_case, 8);
}

int main(void)
{
    /* Not static: BAD[i].name is read at run time (C has no constant
     * expression for it, and clang says so). */
    const struct CMUnitTest tests[] = {
        GOLDEN_TEST(test_sdpa_case, "seed_example"),
        GOLDEN_TEST(test_sdpa_case, "seed_example_backward"),
        GOLDEN_TEST(test_sdpa_case, "square_unmasked"),
        GOLDEN_TEST(test_sdpa_case, "square_unmasked_backward"),
        GOLDEN_TEST(test_sdpa_case, "keys_outnumber_queries"),
        GOLDEN_TEST(test_sdpa_case, "keys_outnumber_queries_backward"),
        GOLDEN_TEST(test_sdpa_case, "value_width_differs"),
        GOLDEN_TEST(test_sdpa_case, "value_width_differs_backward"),
        GOLDEN_TEST(test_sdpa_case, "bool_mask"),
        GOLDEN_TEST(test_sdpa_case, "bool_mask_backward"),
        GOLDEN_TEST(test_sdpa_case, "additive_mask"),
        GOLDEN_TEST(test_sdpa_case, "additive_mask_backward"),
        GOLDEN_TEST(test_sdpa_case, "causal_square"),
        GOLDEN_TEST(test_sdpa_case, "causal_square_backward"),
        GOLDEN_TEST(test_sdpa_case, "causal_keys_outnumber_queries"),
        GOLDEN_TEST(test_sdpa_case, "causal_keys_outnumber_queries_backward"),
        GOLDEN_TEST(test_sdpa_case, "causal_queries_outnumber_keys"),
        GOLDEN_TEST(test_sdpa_case, "causal_queries_outnumber_keys_backward"),
        GOLDEN_TEST(test_sdpa_case, "custom_scale"),
        GOLDEN_TEST(test_sdpa_case, "custom_scale_backward"),
        GOLDEN_TEST(test_sdpa_case, "batch_heads"),
        GOLDEN_TEST(test_sdpa_case, "batch_heads_backward"),
        GOLDEN_TEST(test_sdpa_case, "rank2"),
        GOLDEN_TEST(test_sdpa_case, "rank2_backward"),
        GOLDEN_TEST(test_sdpa_case, "rank3"),
        GOLDEN_TEST(test_sdpa_case, "rank3_backward"),
        GOLDEN_TEST(test_sdpa_case, "rank5"),
        GOLDEN_TEST(test_sdpa_case, "single_query"),
        GOLDEN_TEST(test_sdpa_case, "single_query_backward"),
        GOLDEN_TEST(test_sdpa_case, "single_key"),
        GOLDEN_TEST(test_sdpa_case, "fully_masked_bool"),
        GOLDEN_TEST(test_sdpa_case, "fully_masked_bool_backward"),
        GOLDEN_TEST(test_sdpa_case, "fully_masked_additive"),
        GOLDEN_TEST(test_sdpa_case, "fully_masked_additive_backward"),
        GOLDEN_TEST(test_sdpa_case, "mask_ls"),
        GOLDEN_TEST(test_sdpa_case, "mask_n1ls"),
        GOLDEN_TEST(test_sdpa_case, "mask_n11s"),
        GOLDEN_TEST(test_sdpa_case, "mask_n11s_backward"),
        GOLDEN_TEST(test_sdpa_case, "mask_11ls"),
        GOLDEN_TEST(test_sdpa_case, "mask_1hl1"),
        GOLDEN_TEST(test_sdpa_case, "mask_1hl1_backward"),
        GOLDEN_TEST(test_sdpa_case, "mask_s"),
        GOLDEN_TEST(test_sdpa_case, "large_logits"),
        GOLDEN_TEST(test_sdpa_case, "large_logits_backward"),
        GOLDEN_TEST(test_sdpa_case, "longer"),
        GOLDEN_TEST(test_sdpa_case, "longer_backward"),
        GOLDEN_TEST(test_sdpa_case, "dropout_p10"),
        GOLDEN_TEST(test_sdpa_case, "dropout_p10_backward"),
        GOLDEN_TEST(test_sdpa_case, "dropout_p50_causal"),
        GOLDEN_TEST(test_sdpa_case, "dropout_p50_causal_backward"),
        GOLDEN_TEST(test_sdpa_case, "dropout_p30_bool_mask"),
        GOLDEN_TEST(test_sdpa_case, "dropout_p30_bool_mask_backward"),

        cmocka_unit_test(test_fully_masked_bool_rows_are_zero),
        cmocka_unit_test(test_fully_masked_additive_rows_are_zero),
        cmocka_unit_test(test_infinite_score),
        cmocka_unit_test(test_dropout_keeps_expectation),
        cmocka_unit_test(test_causal_alignment),
        cmocka_unit_test(test_causal_equals_tril_mask),
        cmocka_unit_test(test_mask_broadcast),
        cmocka_unit_test(test_mask_bias_conventions),
        cmocka_unit_test(test_seed_example_printed_values),
        cmocka_unit_test(test_default_scale),
        cmocka_unit_test(test_backward_accumulates),
        cmocka_unit_test(test_thread_count_independent),

        cmocka_unit_test(test_valid_base_case),
#define BAD_TEST(i) {BAD[i].name, test_bad_case, NULL, NULL, (void *)&BAD[i]}
        BAD_TEST(0), BAD_TEST(1), BAD_TEST(2), BAD_TEST(3), BAD_TEST(4), BAD_TEST(5),
        BAD_TEST(6), BAD_TEST(7), BAD_TEST(8), BAD_TEST(9), BAD_TEST(10), BAD_TEST(11),
        BAD_TEST(12), BAD_TEST(13), BAD_TEST(14), BAD_TEST(15), BAD_TEST(16), BAD_TEST(17),
        BAD_TEST(18), BAD_TEST(19), BAD_TEST(20), BAD_TEST(21),
        cmocka_unit_test(test_program_refuses_bad_case),
        cmocka_unit_test(test_malformed_corpus),
    };
    return run_chapter_tests("chapter 02: scaled dot-product attention", tests);
}
