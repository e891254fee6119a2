/*
 * test_05_encoder.c - chapter 05: the token embedding, positional encodings,
 * dropout, the feed-forward block, the encoder layer and the encoder stack,
 * against goldens made by
 * reference/ch05_encoder.py, plus properties that hold exactly (PE[0], the
 * rotation between positions, dropout's statistics and determinism), gradient
 * accumulation, and the checks of encoder_case.c on broken cases.
 *
 * The golden tests call the layer functions directly, with the signatures
 * the chapter README documents; test_case_eval_* runs the same goldens through
 * the case evaluator of the chapter program.
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
#include "dropout.h"
#include "embedding.h"
#include "encoder_case.h"
#include "encoder_layer.h"
#include "ffn.h"
#include "helpers.h"
#include "positional.h"
#include "rng.h"

#define CHAPTER "05_encoder"

/* ------------------------------------------------------------------------ */
/* Golden cases                                                              */
/* ------------------------------------------------------------------------ */

static void test_embedding_case(void **state)
{
    TensorFile f;
    load_golden(&f, CHAPTER, *state);
    double atol, rtol;
    golden_tolerance(&f, &atol, &rtol);
    const Tensor *ids = golden_tensor(&f, "input", DTYPE_I64);
    const Tensor *w = golden_tensor(&f, "embedding.weight", DTYPE_F32);
    int N = ids->shape[0], T = ids->shape[1], V = w->shape[0], D = w->shape[1];
    float scale = (float)golden_meta_double(&f, "scale", 1.0);
    long long pad = golden_meta_long(&f, "padding_idx", EMBEDDING_NO_PADDING);
    if (tensorfile_meta(&f, "padding_idx") && pad < 0) pad += V;

    float *y = test_floats((int64_t)N * T * D);
    assert_ok(embedding_forward(y, ids->data, w->data, N, T, D, scale));
    assert_close_to_golden(&f, "output", y, (int64_t)N * T * D, atol, rtol);
    if (golden_op_is(&f, "embedding_backward")) {
        float *dw = test_floats((int64_t)V * D);
        assert_ok(embedding_backward(dw, golden_f32(&f, "grad_output"), ids->data, N, T, D,
                                     scale, pad));
        assert_close_to_golden(&f, "grad_embedding.weight", dw, (int64_t)V * D, atol, rtol);
        free(dw);
    }
    free(y);
    tensorfile_free(&f);
}

static void test_positional_case(void **state)
{
    TensorFile f;
    load_golden(&f, CHAPTER, *state);
    double atol, rtol;
    golden_tolerance(&f, &atol, &rtol);
    const Tensor *x = golden_tensor(&f, "input", DTYPE_F32);
    int N = x->shape[0], T = x->shape[1], D = x->shape[2];
    int64_t n = (int64_t)N * T * D;
    int learned = golden_op_is(&f, "positional_learned") ||
                  golden_op_is(&f, "positional_learned_backward");
    int backward = golden_op_is(&f, "positional_learned_backward") ||
                   golden_op_is(&f, "positional_sinusoidal_backward");

    const Tensor *w = learned ? golden_tensor(&f, "pos_embedding.weight", DTYPE_F32) : NULL;
    float *pe = NULL;
    if (!learned) {
        pe = test_floats((int64_t)T * D);
        assert_ok(positional_sinusoidal_table(pe, T, D));
        assert_close_to_golden(&f, "pe", pe, (int64_t)T * D, atol, rtol);
    }
    float *y = test_floats(n);
    assert_ok(positional_forward(y, x->data, learned ? w->data : pe, N, T, D));
    assert_close_to_golden(&f, "output", y, n, atol, rtol);
    if (backward) {
        float *dx = test_floats(n);
        float *dw = learned ? test_floats(tensor_numel(w)) : NULL;
        assert_ok(positional_backward(dx, dw, golden_f32(&f, "grad_output"), N, T, D));
        assert_close_to_golden(&f, "grad_input", dx, n, atol, rtol);
        if (learned)
            assert_close_to_golden(&f, "grad_pos_embedding.weight", dw, tensor_numel(w), atol,
                                   rtol);
        free(dx);
        free(dw);
    }
    free(y);
    free(pe);
    tensorfile_free(&f);
}

/* PyTorch's own mask from the case, or evaluation mode (no mask). */
static void test_dropout_mask_case(void **state)
{
    TensorFile f;
    load_golden(&f, CHAPTER, *state);
    double atol, rtol;
    golden_tolerance(&f, &atol, &rtol);
    const Tensor *x = golden_tensor(&f, "input", DTYPE_F32);
    int n = tensor_numel(x);
    float p = (float)golden_meta_double(&f, "dropout", -1);
    const uint8_t *mask = golden_meta_bool(&f, "training", 1)
                              ? golden_tensor(&f, "mask", DTYPE_BOOL)->data : NULL;
    float *y = test_floats(n);
    assert_ok(dropout_forward(y, x->data, mask, n, p));
    assert_close_to_golden(&f, "output", y, n, atol, rtol);
    if (golden_op_is(&f, "dropout_mask_backward")) {
        float *dx = test_floats(n);
        assert_ok(dropout_backward(dx, golden_f32(&f, "grad_output"), mask, n, p));
        assert_close_to_golden(&f, "grad_input", dx, n, atol, rtol);
        free(dx);
    }
    free(y);
    tensorfile_free(&f);
}

/* A mask large enough to be drawn by several threads is the same with one
 * thread or two, and every mask takes exactly two numbers from the stream
 * (its key), whatever its length. */
static void test_dropout_mask_thread_count_independent(void **state)
{
    (void)state;
    enum { n = 300007 };
    uint8_t *one = malloc(n), *mask = malloc(n);
    assert_non_null(one), assert_non_null(mask);
    int saved = omp_get_max_threads();
    for (int threads = 1; threads <= 2; threads++) {
        Rng rng, ref;
        omp_set_num_threads(threads);
        rng_seed(&rng, 11, 4), rng_seed(&ref, 11, 4);
        assert_ok(dropout_mask(threads == 1 ? one : mask, n, 0.3f, &rng));
        rng_u32(&ref), rng_u32(&ref);
        assert_memory_equal(&rng, &ref, sizeof rng);
    }
    omp_set_num_threads(saved);
    assert_memory_equal(mask, one, n);
    free(one), free(mask);
}

static void test_dropout_rng_case(void **state)
{
    TensorFile f;
    load_golden(&f, CHAPTER, *state);
    double atol, rtol;
    golden_tolerance(&f, &atol, &rtol);
    const Tensor *x = golden_tensor(&f, "input", DTYPE_F32);
    const uint8_t *expected = golden_tensor(&f, "mask", DTYPE_BOOL)->data;
    int n = tensor_numel(x);
    float p = (float)golden_meta_double(&f, "dropout", -1);
    Rng rng;
    rng_seed(&rng, golden_meta_long(&f, "rng_seed", 0), golden_meta_long(&f, "rng_stream", 0));
    uint8_t *mask = calloc(n, 1);
    float *y = test_floats(n);
    assert_non_null(mask);
    assert_ok(dropout_mask(mask, n, p, &rng));
    int kept = 0;
    for (int i = 0; i < n; i++) kept += mask[i];
    print_message("  %s: %d of %d kept (p = %g)\n", (const char *)*state, kept, n, p);
    assert_memory_equal(mask, expected, n);
    assert_ok(dropout_forward(y, x->data, mask, n, p));
    assert_close_to_golden(&f, "output", y, n, atol, rtol);
    free(mask);
    free(y);
    tensorfile_free(&f);
}

static void test_ffn_case(void **state)
{
    TensorFile f;
    load_golden(&f, CHAPTER, *state);
    double atol, rtol;
    golden_tolerance(&f, &atol, &rtol);
    const Tensor *x = golden_tensor(&f, "input", DTYPE_F32);
    const Tensor *w1 = golden_tensor(&f, "linear1.weight", DTYPE_F32);
    int N = x->shape[0], T = x->shape[1], D = x->shape[2], F = w1->shape[0];
    float *w2 = golden_param(&f, "linear2.weight");
    int bias = golden_meta_bool(&f, "bias", 1);
    float *b1 = bias ? golden_param(&f, "linear1.bias") : NULL;
    float *b2 = bias ? golden_param(&f, "linear2.bias") : NULL;
    float p = (float)golden_meta_double(&f, "dropout", 0);
    const uint8_t *mask = NULL;
    if (golden_meta_bool(&f, "training", 1) && p > 0)
        mask = golden_tensor(&f, "dropout_mask", DTYPE_BOOL)->data;

    int64_t nx = (int64_t)N * T * D, nh = (int64_t)N * T * F;
    float *y = test_floats(nx), *pre = test_floats(nh), *hidden = test_floats(nh);
    FfnParams params = {w1->data, b1, w2, b2};
    FfnCache cache = {D, F, pre, hidden, mask, p};
    assert_ok(ffn_forward(y, &cache, x->data, &params, N * T));
    assert_close_to_golden(&f, "output", y, nx, atol, rtol);
    if (golden_op_is(&f, "ffn_backward")) {
        float *dx = test_floats(nx), *dw1 = test_floats((int64_t)F * D);
        float *dw2 = test_floats((int64_t)D * F), *db1 = test_floats(F), *db2 = test_floats(D);
        float *scratch = test_floats(nh);
        FfnParams grads = {dw1, bias ? db1 : NULL, dw2, bias ? db2 : NULL};
        assert_ok(ffn_backward(dx, &grads, scratch, golden_f32(&f, "grad_output"),
                               x->data, &params, &cache, N * T));
        assert_close_to_golden(&f, "grad_input", dx, nx, atol, rtol);
        assert_close_to_golden(&f, "grad_linear1.weight", dw1, (int64_t)F * D, atol, rtol);
        assert_close_to_golden(&f, "grad_linear2.weight", dw2, (int64_t)D * F, atol, rtol);
        if (bias) {
            assert_close_to_golden(&f, "grad_linear1.bias", db1, F, atol, rtol);
            assert_close_to_golden(&f, "grad_linear2.bias", db2, D, atol, rtol);
        }
        free(dx), free(dw1), free(dw2), free(db1), free(db2), free(scratch);
    }
    free(y), free(pre), free(hidden);
    tensorfile_free(&f);
}

/* The chapter program's evaluator on a golden: every tensor the case lists
 * in "outputs" comes back, within tolerance (masks exactly). */
static void test_case_eval(void **state)
{
    TensorFile f, out = {0};
    load_golden(&f, CHAPTER, *state);
    assert_case_outputs(encoder_case_eval, &f, &out);
    tensorfile_free(&out);
    tensorfile_free(&f);
}

/* ------------------------------------------------------------------------ */
/* Sinusoidal encoding: exact properties                                     */
/* ------------------------------------------------------------------------ */

/* Position 0 has every angle 0: sin 0 = 0, cos 0 = 1, exactly, for even and
 * odd D (the odd one ends with a sine). */
static void test_pe_position_zero(void **state)
{
    for (int D = 1; D <= 9; D++) {
        float pe[3 * 9];
        assert_ok(positional_sinusoidal_table(pe, 3, D));
        for (int d = 0; d < D; d++) assert_same(pe[d], (d % 2 ? 1.0f : 0.0f));
    }
}

/* w_0 = 10000^0 = 1, so dimensions 0 and 1 are sin(pos) and cos(pos): a
 * wavelength of 2 pi positions. For D = 2 there is no other pair. */
static void test_pe_first_pair(void **state)
{
    enum { max_len = 50, D = 2 };
    float pe[max_len * D], expected[max_len * D];
    assert_ok(positional_sinusoidal_table(pe, max_len, D));
    for (int pos = 0; pos < max_len; pos++) {
        expected[pos * D] = (float)sin(pos);
        expected[pos * D + 1] = (float)cos(pos);
    }
    assert_close("sin(pos), cos(pos)", pe, expected, max_len * D, 1e-6, 0);
}

/* The pair i has frequency 10000^(-2i/D): for D = 4 the second pair is
 * sin(0.01 pos), cos(0.01 pos), worked out in the README. An odd D ends
 * with the sine of its last frequency. */
static void test_pe_frequencies(void **state)
{
    float pe4[3 * 4], pe5[3 * 5];
    assert_ok(positional_sinusoidal_table(pe4, 3, 4));
    float row1[4] = {(float)sin(1.0), (float)cos(1.0), (float)sin(0.01), (float)cos(0.01)};
    assert_close("D = 4, position 1", pe4 + 4, row1, 4, 1e-7, 0);
    assert_ok(positional_sinusoidal_table(pe5, 3, 5));
    double w2 = pow(10000.0, -4.0 / 5.0);
    float last[2] = {(float)sin(1 * w2), (float)sin(2 * w2)};
    float got[2] = {pe5[1 * 5 + 4], pe5[2 * 5 + 4]};
    assert_close("D = 5, dimension 4 = sin(pos 10000^(-4/5))", got, last, 2, 1e-7, 0);
}

/* Each pair is a point on the unit circle, and moving k positions on is a
 * rotation by the angle k w_i, the same matrix for every pos: a linear map,
 * which is why the paper chose this encoding. */
static void test_pe_offset_is_rotation(void **state)
{
    enum { max_len = 64, D = 16, K = 5 };
    float pe[max_len * D];
    assert_ok(positional_sinusoidal_table(pe, max_len, D));
    double worst_norm = 0, worst_rot = 0;
    for (int i = 0; i < D / 2; i++) {
        double w = pow(10000.0, -2.0 * i / D), c = cos(K * w), s = sin(K * w);
        for (int pos = 0; pos + K < max_len; pos++) {
            double sn = pe[pos * D + 2 * i], cs = pe[pos * D + 2 * i + 1];
            worst_norm = fmax(worst_norm, fabs(sn * sn + cs * cs - 1));
            /* sin(a + b) = sin a cos b + cos a sin b;  cos(a + b) = cos a cos b - sin a sin b */
            double sn_k = sn * c + cs * s, cs_k = cs * c - sn * s;
            worst_rot = fmax(worst_rot, fabs(sn_k - pe[(pos + K) * D + 2 * i]));
            worst_rot = fmax(worst_rot, fabs(cs_k - pe[(pos + K) * D + 2 * i + 1]));
        }
    }
    print_message("  |sin^2 + cos^2 - 1| <= %.3g, rotation by %d positions off by <= %.3g\n",
                  worst_norm, K, worst_rot);
    assert_true(worst_norm < 1e-6);
    assert_true(worst_rot < 1e-5);
}

/* Adding the table and its backward: the gradient passes through unchanged
 * and is added; a fixed table (dtable NULL) gets nothing; a learned table
 * gets rows 0..T-1 summed over the batch, and rows from T on stay as they
 * were. */
static void test_positional_backward_accumulates(void **state)
{
    enum { N = 2, T = 3, D = 2, max_len = 5 };
    float dout[N * T * D], dx[N * T * D], dtable[max_len * D];
    for (int i = 0; i < N * T * D; i++) dout[i] = (float)(i + 1), dx[i] = 100.0f;
    for (int i = 0; i < max_len * D; i++) dtable[i] = -1.0f;
    assert_ok(positional_backward(dx, NULL, dout, N, T, D));
    for (int i = 0; i < N * T * D; i++) assert_same(dx[i], 100.0f + dout[i]);
    assert_ok(positional_backward(NULL, dtable, dout, N, T, D));
    for (int t = 0; t < T; t++)
        for (int d = 0; d < D; d++)
            assert_same(dtable[t * D + d], -1.0f + dout[t * D + d] + dout[(T + t) * D + d]);
    for (int i = T * D; i < max_len * D; i++) assert_same(dtable[i], -1.0f);
}

/* ------------------------------------------------------------------------ */
/* Token embedding                                                           */
/* ------------------------------------------------------------------------ */

/* A repeated id collects every one of its gradients, times the scale; the
 * backward adds to what dweight held; the padding row is never touched. */
static void test_embedding_backward_accumulates(void **state)
{
    enum { V = 4, D = 2, N = 1, T = 5 };
    int64_t ids[T] = {2, 0, 2, 3, 2};
    float dout[T * D] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    float dw[V * D] = {0, 0, 0, 0, 0, 0, 0.5f, 0.5f};   /* row 3 (padding) holds 0.5 */
    assert_ok(embedding_backward(dw, dout, ids, N, T, D, 2.0f, 3));
    /* Row 2: positions 0, 2 and 4, times 2: (1 + 5 + 9) * 2, (2 + 6 + 10) * 2. */
    float expected[V * D] = {3 * 2, 4 * 2, 0, 0, 30, 36, 0.5f, 0.5f};
    assert_close("after one backward", dw, expected, V * D, 0, 0);
    assert_ok(embedding_backward(dw, dout, ids, N, T, D, 2.0f, 3));
    for (int i = 0; i < 6; i++) expected[i] *= 2;
    assert_close("after two (added)", dw, expected, V * D, 0, 0);
    /* Without padding the last row collects position 3. */
    float dw2[V * D] = {0};
    assert_ok(embedding_backward(dw2, dout, ids, N, T, D, 1.0f, EMBEDDING_NO_PADDING));
    assert_true(dw2[3 * D] == 7 && dw2[3 * D + 1] == 8);
}

/* The forward is a gather, and the padding row is returned like any other. */
static void test_embedding_forward_gathers(void **state)
{
    enum { V = 3, D = 2, N = 2, T = 2 };
    float w[V * D] = {1, 2, 3, 4, 5, 6};
    int64_t ids[N * T] = {2, 0, 0, 1};
    float out[N * T * D];
    assert_ok(embedding_forward(out, ids, w, N, T, D, 1.0f));
    float expected[N * T * D] = {5, 6, 1, 2, 1, 2, 3, 4};
    assert_close("gathered rows", out, expected, N * T * D, 0, 0);
    assert_ok(embedding_forward(out, ids, w, N, T, D, 4.0f));
    for (int i = 0; i < N * T * D; i++) expected[i] *= 4;
    assert_close("scaled by 4", out, expected, N * T * D, 0, 0);
}

static void test_embedding_check_ids(void **state)
{
    int64_t ids[4] = {0, 3, 4, -1};
    Error err;
    assert_ok(embedding_check_ids(ids, 2, 4, "here", &err));
    assert_int_equal(embedding_check_ids(ids, 4, 4, "ids.safetensors: tensor 'input'", &err), -1);
    print_message("  %s\n", err.msg);
    assert_non_null(strstr(err.msg, "ids.safetensors: tensor 'input'"));
    assert_non_null(strstr(err.msg, "id 4 at flat index 2"));
    assert_int_equal(embedding_check_ids(ids + 3, 1, 4, "x", &err), -1);
    assert_non_null(strstr(err.msg, "id -1"));
}

/* ------------------------------------------------------------------------ */
/* Dropout                                                                   */
/* ------------------------------------------------------------------------ */

/* Over 200 000 ones the fraction dropped is within 5 standard errors of p,
 * and so is the mean of the output of 1 (inverted scaling keeps it at 1). */
static void test_dropout_statistics(void **state)
{
    enum { n = 200000 };
    float *ones = test_floats(n), *out = test_floats(n);
    uint8_t *mask = malloc(n);
    assert_non_null(mask);
    for (int i = 0; i < n; i++) ones[i] = 1.0f;
    const float ps[] = {0.1f, 0.3f, 0.5f, 0.9f};
    Rng rng;
    rng_seed(&rng, 2024, 0);
    for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) {
        float p = ps[k];
        assert_ok(dropout_mask(mask, n, p, &rng));
        assert_ok(dropout_forward(out, ones, mask, n, p));
        double dropped = 0, sum = 0;
        for (int i = 0; i < n; i++) dropped += !mask[i], sum += out[i];
        double frac = dropped / n, mean = sum / n;
        double se_frac = sqrt(p * (1 - p) / n), se_mean = sqrt(p / (1 - p) / n);
        print_message("  p = %.1f: dropped %.5f (5 SE = %.5f), mean %.5f (5 SE = %.5f)\n", p,
                      frac, 5 * se_frac, mean, 5 * se_mean);
        assert_true(fabs(frac - p) < 5 * se_frac);
        assert_true(fabs(mean - 1.0) < 5 * se_mean);
        for (int i = 0; i < n; i++)   /* each value is 0 or 1 / (1 - p) */
            assert_same(out[i], (mask[i] ? 1.0f / (1.0f - p) : 0.0f));
    }
    free(ones), free(out), free(mask);
}

/* The same seed draws the same mask; another seed or stream another, and
 * so does the next mask of the same stream (its own key). A mask takes
 * exactly two numbers from the stream, whatever p. */
static void test_dropout_deterministic(void **state)
{
    enum { n = 1000 };
    uint8_t a[n], b[n], c[n];
    Rng r1, r2, r3, ref;
    rng_seed(&r1, 7, 0), rng_seed(&r2, 7, 0), rng_seed(&r3, 8, 0);
    assert_ok(dropout_mask(a, n, 0.4f, &r1));
    assert_ok(dropout_mask(b, n, 0.4f, &r2));
    assert_ok(dropout_mask(c, n, 0.4f, &r3));
    assert_memory_equal(a, b, n);
    assert_memory_not_equal(a, c, n);
    assert_ok(dropout_mask(b, n, 0.4f, &r2));
    assert_memory_not_equal(a, b, n);
    const float ps[] = {0.0f, 0.4f, 1.0f};
    for (size_t k = 0; k < 3; k++) {
        rng_seed(&r1, 9, 1), rng_seed(&ref, 9, 1);
        assert_ok(dropout_mask(a, n, ps[k], &r1));
        rng_u32(&ref), rng_u32(&ref);
        assert_memory_equal(&r1, &ref, sizeof r1);
    }
}

/* p = 0 keeps everything and is exactly the identity; p = 1 drops
 * everything, forward and backward, without dividing by zero. */
static void test_dropout_p0_and_p1(void **state)
{
    enum { n = 64 };
    float x[n], y[n], dy[n], dx[n];
    uint8_t mask[n];
    for (int i = 0; i < n; i++) x[i] = (float)i - 20.5f, dy[i] = 1.0f, dx[i] = 0.0f;
    Rng rng;
    rng_seed(&rng, 1, 0);
    assert_ok(dropout_mask(mask, n, 0.0f, &rng));
    for (int i = 0; i < n; i++) assert_int_equal(mask[i], 1);
    assert_ok(dropout_forward(y, x, mask, n, 0.0f));
    assert_memory_equal(y, x, sizeof x);
    assert_ok(dropout_mask(mask, n, 1.0f, &rng));
    for (int i = 0; i < n; i++) assert_int_equal(mask[i], 0);
    assert_ok(dropout_forward(y, x, mask, n, 1.0f));
    assert_ok(dropout_backward(dx, dy, mask, n, 1.0f));
    for (int i = 0; i < n; i++) assert_true(y[i] == 0.0f && dx[i] == 0.0f);
}

/* Evaluation mode (mask NULL) is the identity, in place too, and its
 * backward adds dout unchanged. */
static void test_dropout_eval_identity(void **state)
{
    float x[5] = {1, -2, 3, 0, 5}, y[5], dx[5] = {1, 1, 1, 1, 1}, dy[5] = {1, 2, 3, 4, 5};
    assert_ok(dropout_forward(y, x, NULL, 5, 0.5f));
    assert_memory_equal(y, x, sizeof x);
    assert_ok(dropout_forward(y, y, NULL, 5, 0.5f));
    assert_memory_equal(y, x, sizeof x);
    assert_ok(dropout_backward(dx, dy, NULL, 5, 0.5f));
    float expected[5] = {2, 3, 4, 5, 6};
    assert_close("dx + dout", dx, expected, 5, 0, 0);
}

/* The backward scales by the forward's factor and adds. */
static void test_dropout_backward_accumulates(void **state)
{
    float dy[4] = {1, 2, 3, 4}, dx[4] = {10, 10, 10, 10};
    uint8_t mask[4] = {1, 0, 1, 0};
    assert_ok(dropout_backward(dx, dy, mask, 4, 0.5f));
    float expected[4] = {12, 10, 16, 10};
    assert_close("dx += dout * mask * 2", dx, expected, 4, 0, 0);
    float x[4] = {1, 2, 3, 4}, y[4];
    assert_ok(dropout_forward(y, x, mask, 4, 0.75f));
    float expected_y[4] = {4, 0, 12, 0};
    assert_close("x * mask * 4 (p = 0.75)", y, expected_y, 4, 0, 0);
}

/* ------------------------------------------------------------------------ */
/* The feed-forward block                                                    */
/* ------------------------------------------------------------------------ */

/* D = 1, F = 2: hidden unit 0 has pre-activation exactly 0, where ReLU's
 * gradient is taken as 0 (as in PyTorch); unit 1 has pre = x = 2. */
static void test_ffn_relu_gradient_at_zero(void **state)
{
    float x[1] = {2}, w1[2] = {0, 1}, b1[2] = {0, 0}, w2[2] = {3, 5}, b2[1] = {1};
    float y[1], pre[2], hidden[2], scratch[2];
    FfnParams params = {w1, b1, w2, b2};
    FfnCache cache = {1, 2, pre, hidden, NULL, 0};
    assert_ok(ffn_forward(y, &cache, x, &params, 1));
    assert_true(pre[0] == 0 && pre[1] == 2 && y[0] == 11);   /* 5 * 2 + 1 */
    float dy[1] = {1}, dx[1] = {0}, dw1[2] = {0}, db1[2] = {0}, dw2[2] = {0}, db2[1] = {0};
    FfnParams grads = {dw1, db1, dw2, db2};
    assert_ok(ffn_backward(dx, &grads, scratch, dy, x, &params, &cache, 1));
    float expected[8] = {5, 0, 10, 0, 5, 0, 2, 1};   /* dx, dw1, dw2, db1, db2 */
    float got[8] = {dx[0], dw1[0], dw1[1], db1[0], db1[1], dw2[0], dw2[1], db2[0]};
    assert_close("dx, dW1, dW2 (first), db1, dW2 (second), db2", got, expected, 8, 0, 0);
}

/* Two backward passes into the same buffers give twice the gradients. */
static void test_ffn_backward_accumulates(void **state)
{
    TensorFile f;
    load_golden(&f, CHAPTER, "ffn_backward_2x5_D8_F32");
    enum { N = 2, T = 5, D = 8, F = 32 };
    const float *x = golden_f32(&f, "input"), *dy = golden_f32(&f, "grad_output");
    float *w1 = golden_param(&f, "linear1.weight"), *w2 = golden_param(&f, "linear2.weight");
    float y[N * T * D], pre[N * T * F], hidden[N * T * F], scratch[N * T * F];
    float dx[N * T * D] = {0}, dw1[F * D] = {0}, db1[F] = {0}, dw2[D * F] = {0}, db2[D] = {0};
    FfnParams params = {w1, golden_param(&f, "linear1.bias"), w2,
                        golden_param(&f, "linear2.bias")};
    FfnCache cache = {D, F, pre, hidden, NULL, 0};
    FfnParams grads = {dw1, db1, dw2, db2};
    assert_ok(ffn_forward(y, &cache, x, &params, N * T));
    for (int rep = 0; rep < 2; rep++)
        assert_ok(ffn_backward(dx, &grads, scratch, dy, x, &params, &cache, N * T));
    const char *names[5] = {"grad_input", "grad_linear1.weight", "grad_linear1.bias",
                            "grad_linear2.weight", "grad_linear2.bias"};
    float *got[5] = {dx, dw1, db1, dw2, db2};
    int sizes[5] = {N * T * D, F * D, F, D * F, D};
    for (int k = 0; k < 5; k++) {
        const float *once = golden_f32(&f, names[k]);
        float *twice = test_floats(sizes[k]);
        for (int i = 0; i < sizes[k]; i++) twice[i] = 2 * once[i];
        assert_close(names[k], got[k], twice, sizes[k], 4e-5, 1e-5);
        free(twice);
    }
    tensorfile_free(&f);
}

/* With 1 and 2 threads the forward and backward are bit-identical. */
static void test_ffn_thread_count_independent(void **state)
{
    TensorFile f;
    load_golden(&f, CHAPTER, "ffn_backward_4x16_D32_F128_p30");
    enum { N = 4, T = 16, D = 32, F = 128, NX = N * T * D, NH = N * T * F };
    const float *x = golden_f32(&f, "input"), *dy = golden_f32(&f, "grad_output");
    float *w1 = golden_param(&f, "linear1.weight"), *b1 = golden_param(&f, "linear1.bias");
    float *w2 = golden_param(&f, "linear2.weight"), *b2 = golden_param(&f, "linear2.bias");
    const uint8_t *mask = golden_tensor(&f, "dropout_mask", DTYPE_BOOL)->data;
    float p = (float)golden_meta_double(&f, "dropout", 0);
    float *res[2][4];
    int saved = omp_get_max_threads();
    for (int run = 0; run < 2; run++) {
        omp_set_num_threads(run + 1);
        float *y = test_floats(NX), *pre = test_floats(NH), *hidden = test_floats(NH);
        float *scratch = test_floats(NH), *dx = test_floats(NX), *dw1 = test_floats(F * D);
        float *db1 = test_floats(F), *dw2 = test_floats(D * F), *db2 = test_floats(D);
        FfnParams params = {w1, b1, w2, b2};
        FfnCache cache = {D, F, pre, hidden, mask, p};
        FfnParams grads = {dw1, db1, dw2, db2};
        assert_ok(ffn_forward(y, &cache, x, &params, N * T));
        assert_ok(ffn_backward(dx, &grads, scratch, dy, x, &params, &cache, N * T));
        res[run][0] = y, res[run][1] = dx, res[run][2] = dw1, res[run][3] = dw2;
        free(pre), free(hidden), free(scratch), free(db1), free(db2);
    }
    omp_set_num_threads(saved);
    int sizes[4] = {NX, NX, F * D, D * F};
    for (int k = 0; k < 4; k++) {
        assert_memory_equal(res[0][k], res[1][k], sizes[k] * sizeof(float));
        free(res[0][k]), free(res[1][k]);
    }
    tensorfile_free(&f);
}

/* ------------------------------------------------------------------------ */
/* The encoder layer and the stack                                           */
/* ------------------------------------------------------------------------ */

static const char *const LAYER_NAMES[12] = {
    "self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
    "self_attn.out_proj.bias",  "linear1.weight",         "linear1.bias",
    "linear2.weight",           "linear2.bias",           "norm1.weight",
    "norm1.bias",               "norm2.weight",           "norm2.bias"};

/* A golden encoder case, loaded: its sizes, options, parameters, zeroed
 * gradient buffers and the attention bias of its masks. */
typedef struct {
    TensorFile f;
    int N, S, D, H, F, K, norm_first, stack, backward;
    float eps;
    const float *src;
    EncoderLayerParams lp[4];
    EncoderLayerParams lg[4];                /* their gradients */
    float *grads[4][12];
    float *norm_grads[2];
    EncoderParams ep;
    EncoderParams eg;
    float *bias;                      /* (N, H, S, S), or NULL without masks */
} EncCase;

static const char *layer_name(char *buf, size_t size, const EncCase *c, int k, int i,
                              const char *prefix)
{
    if (c->stack) snprintf(buf, size, "%slayers.%d.%s", prefix, k, LAYER_NAMES[i]);
    else snprintf(buf, size, "%s%s", prefix, LAYER_NAMES[i]);
    return buf;
}

static void enc_case_load(EncCase *c, const char *name)
{
    memset(c, 0, sizeof *c);
    load_golden(&c->f, CHAPTER, name);
    const Tensor *src = golden_tensor(&c->f, "src", DTYPE_F32);
    c->N = src->shape[0], c->S = src->shape[1], c->D = src->shape[2];
    c->src = src->data;
    c->H = golden_meta_long(&c->f, "nhead", 1);
    c->norm_first = golden_meta_bool(&c->f, "norm_first", 0);
    c->eps = (float)golden_meta_double(&c->f, "eps", 1e-5);
    c->stack = golden_op_is(&c->f, "encoder") || golden_op_is(&c->f, "encoder_backward");
    c->backward = golden_op_is(&c->f, "encoder_layer_backward") ||
                  golden_op_is(&c->f, "encoder_backward");
    c->K = c->stack ? golden_meta_long(&c->f, "num_layers", 1) : 1;
    assert_in_range(c->K, 1, 4);
    char buf[64];
    for (int k = 0; k < c->K; k++) {
        float *v[12];
        for (int i = 0; i < 12; i++) {
            const Tensor *t = golden_tensor(&c->f, layer_name(buf, sizeof buf, c, k, i, ""),
                                            DTYPE_F32);
            v[i] = t->data;
            c->grads[k][i] = test_floats(tensor_numel(t));
            if (i == 4) c->F = t->shape[0];
        }
        float **g = c->grads[k];
        c->lp[k] = (EncoderLayerParams){
            .self_attn = {.in_proj_weight = v[0], .in_proj_bias = v[1],
                          .out_proj_weight = v[2], .out_proj_bias = v[3]},
            .linear1_weight = v[4], .linear1_bias = v[5], .linear2_weight = v[6],
            .linear2_bias = v[7], .norm1_weight = v[8], .norm1_bias = v[9],
            .norm2_weight = v[10], .norm2_bias = v[11]};
        c->lg[k] = (EncoderLayerParams){
            .self_attn = {.in_proj_weight = g[0], .in_proj_bias = g[1],
                          .out_proj_weight = g[2], .out_proj_bias = g[3]},
            .linear1_weight = g[4], .linear1_bias = g[5], .linear2_weight = g[6],
            .linear2_bias = g[7], .norm1_weight = g[8], .norm1_bias = g[9],
            .norm2_weight = g[10], .norm2_bias = g[11]};
    }
    c->ep = (EncoderParams){.num_layers = c->K, .layers = c->lp};
    c->eg = (EncoderParams){.num_layers = c->K, .layers = c->lg};
    if (c->stack && golden_meta_bool(&c->f, "final_norm", 0)) {
        c->ep.norm_weight = golden_param(&c->f, "norm.weight");
        c->ep.norm_bias = golden_param(&c->f, "norm.bias");
        c->eg.norm_weight = c->norm_grads[0] = test_floats(c->D);
        c->eg.norm_bias = c->norm_grads[1] = test_floats(c->D);
    }
    const Tensor *kpm = tensorfile_find(&c->f, "src_key_padding_mask");
    const Tensor *mask = tensorfile_find(&c->f, "src_mask");
    if (kpm || mask) {
        c->bias = test_floats((int64_t)c->N * c->H * c->S * c->S);
        assert_ok(mha_mask_bias(c->bias, kpm ? kpm->data : NULL, 1,
                                mask ? mask->data : NULL,
                                mask && mask->dtype == DTYPE_BOOL, 0, c->N, c->H, c->S,
                                c->S));
    }
}

static void enc_case_free(EncCase *c)
{
    for (int k = 0; k < c->K; k++)
        for (int i = 0; i < 12; i++) free(c->grads[k][i]);
    free(c->norm_grads[0]), free(c->norm_grads[1]);
    free(c->bias);
    tensorfile_free(&c->f);
}

/* Runs the case's forward (and backward) through the layer or stack
 * functions; out and dsrc (N, S, D) receive the results. */
static void enc_case_run(EncCase *c, float *out, float *dsrc)
{
    EncoderCache cache;
    Error err;
    LayerDims dims = {.N = c->N, .S = c->S, .D = c->D, .H = c->H, .F = c->F,
                      .norm_first = c->norm_first, .eps = c->eps};
    if (encoder_cache_alloc(&cache, c->K, &dims, c->backward, &err) != 0) {
        print_error("%s\n", err.msg);
        fail();
    }
    if (c->stack) {
        assert_ok(encoder_forward(out, &cache, c->src, &c->ep, c->bias, NULL));
        if (c->backward)
            assert_ok(encoder_backward(dsrc, &c->eg, golden_f32(&c->f, "grad_output"),
                                       c->src, &c->ep, &cache));
    } else {
        assert_ok(encoder_layer_forward(out, &cache.layers[0], c->src, &c->lp[0], c->bias,
                                        NULL));
        if (c->backward)
            assert_ok(encoder_layer_backward(dsrc, &c->lg[0],
                                             golden_f32(&c->f, "grad_output"), c->src,
                                             &c->lp[0], &cache.layers[0]));
    }
    encoder_cache_free(&cache);
}

static void test_encoder_case(void **state)
{
    EncCase c;
    enc_case_load(&c, *state);
    double atol, rtol;
    golden_tolerance(&c.f, &atol, &rtol);
    int64_t n = (int64_t)c.N * c.S * c.D;
    float *out = test_floats(n), *dsrc = test_floats(n);
    enc_case_run(&c, out, dsrc);
    assert_close_to_golden(&c.f, "output", out, n, atol, rtol);
    if (c.backward) {
        assert_close_to_golden(&c.f, "grad_src", dsrc, n, atol, rtol);
        char buf[80];
        for (int k = 0; k < c.K; k++)
            for (int i = 0; i < 12; i++) {
                const Tensor *t = golden_tensor(&c.f, layer_name(buf, sizeof buf, &c, k, i, ""),
                                                DTYPE_F32);
                assert_close_to_golden(&c.f, layer_name(buf, sizeof buf, &c, k, i, "grad_"),
                                       c.grads[k][i], tensor_numel(t), atol, rtol);
            }
        if (c.norm_grads[0]) {
            assert_close_to_golden(&c.f, "grad_norm.weight", c.norm_grads[0], c.D, atol, rtol);
            assert_close_to_golden(&c.f, "grad_norm.bias", c.norm_grads[1], c.D, atol, rtol);
        }
    }
    free(out), free(dsrc);
    enc_case_free(&c);
}

/* A padded key is invisible: changing src at a padded position changes no
 * output row of a real (unpadded) position, in post- and pre-norm. The padded
 * positions' own rows do change: they still attend to the real tokens. */
static void test_encoder_padding_ignored(void **state)
{
    const char *names[2] = {"encoder_layer_post_3x6_D12_H1_F24_padding",
                            "encoder_pre_K2_3x6_D12_H3_padding"};
    for (int which = 0; which < 2; which++) {
        EncCase c;
        enc_case_load(&c, names[which]);
        const uint8_t *kpm = golden_tensor(&c.f, "src_key_padding_mask", DTYPE_BOOL)->data;
        int64_t n = (int64_t)c.N * c.S * c.D;
        float *a = test_floats(n), *b = test_floats(n), *src2 = test_floats(n);
        enc_case_run(&c, a, NULL);
        memcpy(src2, c.src, n * sizeof(float));
        int padded = 0;
        for (int i = 0; i < c.N * c.S; i++)
            if (kpm[i]) {
                padded++;
                for (int d = 0; d < c.D; d++) src2[(int64_t)i * c.D + d] += 5.0f * (d + 1);
            }
        assert_true(padded > 0);
        const float *orig = c.src;
        c.src = src2;
        enc_case_run(&c, b, NULL);
        c.src = orig;
        int changed = 0;
        for (int i = 0; i < c.N * c.S; i++) {
            const float *ra = a + (int64_t)i * c.D, *rb = b + (int64_t)i * c.D;
            if (kpm[i]) changed += memcmp(ra, rb, c.D * sizeof(float)) != 0;
            else assert_memory_equal(ra, rb, c.D * sizeof(float));
        }
        assert_int_equal(changed, padded);
        print_message("  %s: %d padded positions changed, every real row identical\n",
                      names[which], padded);
        free(a), free(b), free(src2);
        enc_case_free(&c);
    }
}

/* With 1 and 3 threads the stack's forward and backward are bit-identical. */
static void test_encoder_thread_count_independent(void **state)
{
    float *res[2][3];
    int saved = omp_get_max_threads();
    for (int run = 0; run < 2; run++) {
        omp_set_num_threads(run == 0 ? 1 : 3);
        EncCase c;
        enc_case_load(&c, "encoder_backward_post_K2_3x6_D12_H3_norm_padding_mask_bool");
        int64_t n = (int64_t)c.N * c.S * c.D;
        res[run][0] = test_floats(n), res[run][1] = test_floats(n);
        enc_case_run(&c, res[run][0], res[run][1]);
        res[run][2] = test_floats(3 * c.D * c.D);
        memcpy(res[run][2], c.grads[0][0], 3 * c.D * c.D * sizeof(float));
        enc_case_free(&c);
    }
    omp_set_num_threads(saved);
    int64_t sizes[3] = {3 * 6 * 12, 3 * 6 * 12, 3 * 12 * 12};
    for (int k = 0; k < 3; k++) {
        assert_memory_equal(res[0][k], res[1][k], sizes[k] * sizeof(float));
        free(res[0][k]), free(res[1][k]);
    }
}

/* The backward adds: two backward calls after one forward give twice the
 * gradients of one. */
static void test_encoder_layer_backward_accumulates(void **state)
{
    float *once[2] = {NULL, NULL};
    for (int calls = 1; calls <= 2; calls++) {
        EncCase c;
        enc_case_load(&c, "encoder_layer_backward_pre_3x6_D12_H3_F24_padding");
        EncoderLayerCache cache;
        Error err;
        LayerDims dims = {.N = c.N, .S = c.S, .D = c.D, .H = c.H, .F = c.F, .norm_first = 1,
                          .eps = c.eps};
        assert_ok(encoder_layer_cache_alloc(&cache, &dims, 1, &err));
        int64_t n = (int64_t)c.N * c.S * c.D;
        float *out = test_floats(n), *dsrc = test_floats(n);
        assert_ok(encoder_layer_forward(out, &cache, c.src, &c.lp[0], c.bias, NULL));
        for (int i = 0; i < calls; i++)
            assert_ok(encoder_layer_backward(dsrc, &c.lg[0],
                                             golden_f32(&c.f, "grad_output"), c.src,
                                             &c.lp[0], &cache));
        if (calls == 1) {
            once[0] = dsrc;
            once[1] = test_floats(c.D);
            memcpy(once[1], c.grads[0][8], c.D * sizeof(float));   /* norm1.weight */
        } else {
            for (int64_t i = 0; i < n; i++) assert_float_equal(dsrc[i], 2 * once[0][i], 1e-5);
            for (int d = 0; d < c.D; d++)
                assert_float_equal(c.grads[0][8][d], 2 * once[1][d], 1e-5);
            free(dsrc), free(once[0]), free(once[1]);
        }
        free(out);
        encoder_layer_cache_free(&cache);
        enc_case_free(&c);
    }
}

/* Training with p > 0 draws three masks from the RNG: the same seed gives
 * the same output, and dropout changes it; with p = 0 training equals
 * evaluation. The gradient through the drawn masks is checked against a
 * finite difference of the loss sum(out * dout) along one input direction. */
static void test_encoder_layer_dropout_training(void **state)
{
    EncCase c;
    enc_case_load(&c, "encoder_layer_backward_post_2x5_D8_H2_F16");
    int64_t n = (int64_t)c.N * c.S * c.D;
    Error err;
    EncoderLayerCache cache;
    LayerDims dims = {.N = c.N, .S = c.S, .D = c.D, .H = c.H, .F = c.F, .eps = c.eps,
                      .dropout = 0.2f};
    assert_ok(encoder_layer_cache_alloc(&cache, &dims, 1, &err));
    float *eval = test_floats(n), *a = test_floats(n), *b = test_floats(n);
    Rng rng;
    assert_ok(encoder_layer_forward(eval, &cache, c.src, &c.lp[0], NULL, NULL));
    rng_seed(&rng, 5, 0);
    assert_ok(encoder_layer_forward(a, &cache, c.src, &c.lp[0], NULL, &rng));
    rng_seed(&rng, 5, 0);
    assert_ok(encoder_layer_forward(b, &cache, c.src, &c.lp[0], NULL, &rng));
    assert_memory_equal(a, b, n * sizeof(float));
    assert_memory_not_equal(a, eval, n * sizeof(float));

    /* Directional derivative of L = sum(out * dout) along v, with the masks
     * held fixed (the same seed), against the backward's dsrc . v. */
    const float *dout = golden_f32(&c.f, "grad_output");
    float *dsrc = test_floats(n), *xp = test_floats(n), *xm = test_floats(n);
    rng_seed(&rng, 5, 0);
    assert_ok(encoder_layer_forward(a, &cache, c.src, &c.lp[0], NULL, &rng));
    assert_ok(encoder_layer_backward(dsrc, &c.lg[0], dout, c.src, &c.lp[0], &cache));
    const double h = 2e-3;   /* small enough that no ReLU changes side */
    double analytic = 0;
    for (int64_t i = 0; i < n; i++) {
        float v = (float)((i % 7) - 3) / 3.0f;
        xp[i] = c.src[i] + (float)h * v, xm[i] = c.src[i] - (float)h * v;
        analytic += (double)dsrc[i] * v;
    }
    double lp = 0, lm = 0;
    rng_seed(&rng, 5, 0);
    assert_ok(encoder_layer_forward(a, &cache, xp, &c.lp[0], NULL, &rng));
    for (int64_t i = 0; i < n; i++) lp += (double)a[i] * dout[i];
    rng_seed(&rng, 5, 0);
    assert_ok(encoder_layer_forward(a, &cache, xm, &c.lp[0], NULL, &rng));
    for (int64_t i = 0; i < n; i++) lm += (double)a[i] * dout[i];
    double numeric = (lp - lm) / (2 * h);
    print_message("  dropout 0.2: directional derivative %.5f (backward) vs %.5f (finite "
                  "difference)\n", analytic, numeric);
    assert_true(fabs(analytic - numeric) <= 2e-3 * (1 + fabs(numeric)));
    free(eval), free(a), free(b), free(dsrc), free(xp), free(xm);
    encoder_layer_cache_free(&cache);
    enc_case_free(&c);
}

/* ------------------------------------------------------------------------ */
/* Bad cases: encoder_case.c refuses them with a message naming the file     */
/* ------------------------------------------------------------------------ */


static const BrokenCase BAD[] = {
    {"bad_missing_op", "embedding_2x5_V10_D8", BREAK_SET_META, "op", "", {0}, 0,
     "metadata 'op' is missing"},
    {"bad_unknown_op", "embedding_2x5_V10_D8", BREAK_SET_META, "op", "decoder", {0}, 0,
     "op 'decoder' is not a chapter 05 op"},
    {"bad_missing_weight", "embedding_2x5_V10_D8", BREAK_DROP, "embedding.weight", NULL, {0}, 0,
     "'embedding.weight' is missing"},
    {"bad_ids_dtype", "embedding_2x5_V10_D8", BREAK_RESHAPE, "input", NULL, {2, 5}, 2,
     "has dtype F32, expected I64"},
    {"bad_id_too_large", "embedding_2x5_V10_D8", BREAK_POKE_I64, "input", "10", {0}, 0,
     "id 10 at flat index 0 is outside the vocabulary 0..9"},
    {"bad_id_negative", "embedding_backward_4x16_V5_D8", BREAK_POKE_I64, "input", "-3", {0}, 0,
     "id -3 at flat index 0"},
    {"bad_padding_idx", "embedding_4x9_V13_D7_pad0", BREAK_SET_META, "padding_idx", "13", {0}, 0,
     "padding_idx is 13, outside -13..12"},
    {"bad_scale", "embedding_3x7_V20_D16_scaled", BREAK_SET_META, "scale", "inf", {0}, 0,
     "scale is inf"},
    {"bad_grad_output_shape", "embedding_backward_4x16_V5_D8", BREAK_RESHAPE, "grad_output", NULL,
     {4, 16, 9}, 3, "'grad_output' has shape (4, 16, 9), expected (N, T, D) = (4, 16, 8)"},
    {"bad_sequence_longer_than_table", "positional_learned_2x7_L10_D8", BREAK_RESHAPE,
     "pos_embedding.weight", NULL, {6, 8}, 2, "has T = 7 positions, max_len is 6"},
    {"bad_max_len_disagrees", "positional_learned_2x7_L10_D8", BREAK_SET_META, "max_len", "12", {0},
     0, "max_len is 12 but 'pos_embedding.weight' has 10 rows"},
    {"bad_sinusoidal_max_len", "positional_sinusoidal_2x10_D16", BREAK_SET_META, "max_len", "8",
     {0}, 0, "longer than the position table"},
    {"bad_d_model_mismatch", "positional_learned_2x7_L10_D8", BREAK_RESHAPE,
     "pos_embedding.weight", NULL, {10, 7}, 2, "expected (max_len, D) = (*, 8)"},
    {"bad_dropout_p_above_1", "dropout_mask_p50_2x3x40", BREAK_SET_META, "dropout", "1.5", {0}, 0,
     "dropout is 1.5, outside [0, 1] (the dropout probability)"},
    {"bad_dropout_p_negative", "dropout_mask_p50_2x3x40", BREAK_SET_META, "dropout", "-0.1", {0}, 0,
     "dropout is -0.1, outside [0, 1]"},
    {"bad_dropout_p_missing", "dropout_mask_p50_2x3x40", BREAK_SET_META, "dropout", "", {0}, 0,
     "metadata 'dropout' is missing (the dropout probability)"},
    {"bad_mask_byte", "dropout_mask_p50_2x3x40", BREAK_POKE_BYTE, "mask", "2", {0}, 0,
     "holds the byte 2"},
    {"bad_mask_dtype", "dropout_mask_p50_2x3x40", BREAK_RETYPE_I64, "mask", NULL, {0}, 0,
     "'mask' has dtype I64, expected BOOL"},
    {"bad_ffn_weight_shape", "ffn_2x5_D8_F32", BREAK_RESHAPE, "linear2.weight", NULL, {8, 31}, 2,
     "'linear2.weight' has shape (8, 31), expected (D, F) = (8, 32)"},
    {"bad_ffn_missing_bias", "ffn_2x5_D8_F32", BREAK_DROP, "linear2.bias", NULL, {0}, 0,
     "'linear2.bias' is missing"},
    {"bad_ffn_mask_missing", "ffn_3x7_D16_F64_p10", BREAK_DROP, "dropout_mask", NULL, {0}, 0,
     "must hold the BOOL tensor 'dropout_mask'"},
    {"bad_ffn_dropout", "ffn_2x5_D8_F32", BREAK_SET_META, "dropout", "nan", {0}, 0,
     "dropout is nan, expected a number"},
    {"bad_ffn_mask_shape", "ffn_3x7_D16_F64_p10", BREAK_RESHAPE_BOOL, "dropout_mask", NULL, {3, 7,
     16}, 3, "'dropout_mask' has shape (3, 7, 16), expected (3, 7, 64) like the hidden layer"},
    {"bad_encoder_nhead", "encoder_layer_post_2x5_D8_H2_F16", BREAK_SET_META, "nhead", "3", {0}, 0,
     "d_model 8 (the last dimension of 'src') is not divisible by metadata nhead 3"},
    {"bad_encoder_nhead_missing", "encoder_layer_post_2x5_D8_H2_F16", BREAK_SET_META, "nhead", "",
     {0}, 0, "metadata 'nhead' is missing (the number of heads)"},
    {"bad_encoder_missing_param", "encoder_layer_pre_2x5_D8_H2_F16", BREAK_DROP, "norm2.bias",
     NULL, {0}, 0, "'norm2.bias' is missing"},
    {"bad_encoder_in_proj_shape", "encoder_layer_post_2x5_D8_H2_F16", BREAK_RESHAPE,
     "self_attn.in_proj_weight", NULL, {8, 8}, 2,
     "'self_attn.in_proj_weight' has shape (8, 8), expected (3D, D) = (24, 8)"},
    {"bad_encoder_padding_shape", "encoder_layer_post_3x6_D12_H1_F24_padding", BREAK_RESHAPE_BOOL,
     "src_key_padding_mask", NULL, {3, 5}, 2,
     "'src_key_padding_mask' has shape (3, 5), expected (3, 6) like (N, S)"},
    {"bad_encoder_src_mask_dtype", "encoder_layer_post_2x7_D16_H4_F32_mask_bool", BREAK_RETYPE_I64,
     "src_mask", NULL, {0}, 0, "'src_mask' has dtype I64, expected F32"},
    {"bad_encoder_stack_layer_missing", "encoder_post_K2_2x5_D8_H2", BREAK_DROP,
     "layers.1.linear2.weight", NULL, {0}, 0, "'layers.1.linear2.weight' is missing"},
    {"bad_encoder_num_layers", "encoder_post_K2_2x5_D8_H2", BREAK_SET_META, "num_layers", "0", {0},
     0,
     "num_layers is 0"},
    {"bad_encoder_final_norm", "encoder_pre_K2_2x5_D8_H2_norm", BREAK_DROP, "norm.bias", NULL, {0},
     0,
     "'norm.bias' is missing"},
    {"bad_encoder_dropout", "encoder_layer_post_2x5_D8_H2_F16", BREAK_SET_META, "dropout", "0.1",
     {0}, 0, "C cannot replay PyTorch's dropout masks"},
    /* The decoder layer's spelling of eps: refused, not ignored (the case
     * would otherwise run with eps 1e-5). */
    {"bad_encoder_misspelt_option", "encoder_layer_post_2x5_D8_H2_F16", BREAK_SET_META,
     "layer_norm_eps", "0.5", {0}, 0,
     "metadata 'layer_norm_eps' is not an option of op 'encoder_layer' (its options: nhead eps "
     "dropout norm_first training)"},
    {"bad_embedding_dropout_option", "embedding_2x5_V10_D8", BREAK_SET_META, "p", "0.5", {0}, 0,
     "metadata 'p' is not an option of op 'embedding' (its options: padding_idx scale)"},
};

static void test_bad_case(void **state)
{
    const BrokenCase *bad = *state;
    TensorFile f;
    broken_case_make(&f, CHAPTER, bad);
    assert_case_refused(encoder_case_eval, &f, bad->expect);
    tensorfile_free(&f);
}

/* Through run_case_file, as the chapter program runs it: exit status 1 and
 * no output file. */
static void test_bad_case_writes_no_file(void **state)
{
    /* an id out of range */
    assert_broken_case_writes_no_file(CHAPTER, &BAD[4], encoder_case_eval);
}

/* ------------------------------------------------------------------------ */

int main(void)
{
    /* Not static: the table reads entries of other arrays at run time (C has
     * no constant expression for them, and clang says so). */
    const struct CMUnitTest tests[] = {
        GOLDEN_TEST(test_embedding_case, "embedding_1x1_V1_D1"),
        GOLDEN_TEST(test_embedding_case, "embedding_2x5_V10_D8"),
        GOLDEN_TEST(test_embedding_case, "embedding_2x6_V30_D12_scaled"),
        GOLDEN_TEST(test_embedding_case, "embedding_2x8_V11_D5_scaled_pad-1"),
        GOLDEN_TEST(test_embedding_case, "embedding_3x7_V20_D16_scaled"),
        GOLDEN_TEST(test_embedding_case, "embedding_4x9_V13_D7_pad0"),
        GOLDEN_TEST(test_embedding_case, "embedding_backward_1x1_V1_D1"),
        GOLDEN_TEST(test_embedding_case, "embedding_backward_2x12_V3_D16_scaled"),
        GOLDEN_TEST(test_embedding_case, "embedding_backward_2x7_V50_D6"),
        GOLDEN_TEST(test_embedding_case, "embedding_backward_3x10_V6_D9_scaled_pad2"),
        GOLDEN_TEST(test_embedding_case, "embedding_backward_4x16_V5_D8"),
        GOLDEN_TEST(test_embedding_case, "embedding_backward_8x8_V4_D12_scaled_pad-4"),
        cmocka_unit_test(test_embedding_forward_gathers),
        cmocka_unit_test(test_embedding_backward_accumulates),
        cmocka_unit_test(test_embedding_check_ids),

        GOLDEN_TEST(test_positional_case, "positional_sinusoidal_1x1_D1"),
        GOLDEN_TEST(test_positional_case, "positional_sinusoidal_2x10_D16"),
        GOLDEN_TEST(test_positional_case, "positional_sinusoidal_3x6_D7"),
        GOLDEN_TEST(test_positional_case, "positional_sinusoidal_2x50_D2"),
        GOLDEN_TEST(test_positional_case, "positional_sinusoidal_1x96_D48"),
        GOLDEN_TEST(test_positional_case, "positional_sinusoidal_1x512_D32"),
        GOLDEN_TEST(test_positional_case, "positional_sinusoidal_1x1000_D17"),
        GOLDEN_TEST(test_positional_case, "positional_sinusoidal_backward_2x5_D9"),
        GOLDEN_TEST(test_positional_case, "positional_sinusoidal_backward_3x8_D12"),
        cmocka_unit_test(test_pe_position_zero),
        cmocka_unit_test(test_pe_first_pair),
        cmocka_unit_test(test_pe_frequencies),
        cmocka_unit_test(test_pe_offset_is_rotation),
        GOLDEN_TEST(test_positional_case, "positional_learned_1x1_L1_D1"),
        GOLDEN_TEST(test_positional_case, "positional_learned_2x4_L16_D5"),
        GOLDEN_TEST(test_positional_case, "positional_learned_2x7_L10_D8"),
        GOLDEN_TEST(test_positional_case, "positional_learned_3x10_L10_D6"),
        GOLDEN_TEST(test_positional_case, "positional_learned_backward_2x12_L12_D5"),
        GOLDEN_TEST(test_positional_case, "positional_learned_backward_4x5_L9_D8"),
        GOLDEN_TEST(test_positional_case, "positional_learned_backward_6x3_L20_D4"),
        cmocka_unit_test(test_positional_backward_accumulates),

        GOLDEN_TEST(test_dropout_mask_case, "dropout_mask_p0_4x25"),
        GOLDEN_TEST(test_dropout_mask_case, "dropout_mask_p10_4x25"),
        GOLDEN_TEST(test_dropout_mask_case, "dropout_mask_p30_7"),
        GOLDEN_TEST(test_dropout_mask_case, "dropout_mask_p50_2x3x40"),
        GOLDEN_TEST(test_dropout_mask_case, "dropout_mask_p90_5x30"),
        GOLDEN_TEST(test_dropout_mask_case, "dropout_mask_p100_3x10"),
        GOLDEN_TEST(test_dropout_mask_case, "dropout_mask_eval_p50_4x25"),
        GOLDEN_TEST(test_dropout_mask_case, "dropout_mask_backward_p0_4x25"),
        GOLDEN_TEST(test_dropout_mask_case, "dropout_mask_backward_p20_2x5x12"),
        GOLDEN_TEST(test_dropout_mask_case, "dropout_mask_backward_p50_6x20"),
        GOLDEN_TEST(test_dropout_mask_case, "dropout_mask_backward_p100_3x10"),
        GOLDEN_TEST(test_dropout_mask_case, "dropout_mask_backward_eval_p30_4x25"),
        GOLDEN_TEST(test_dropout_rng_case, "dropout_rng_p0_3x4x5_seed1"),
        GOLDEN_TEST(test_dropout_rng_case, "dropout_rng_p10_8x32_seed42"),
        GOLDEN_TEST(test_dropout_rng_case, "dropout_rng_p50_1000_seed7"),
        GOLDEN_TEST(test_dropout_rng_case, "dropout_rng_p100_3x4x5_seed1"),
        GOLDEN_TEST(test_dropout_rng_case, "dropout_rng_p30_33x1000_seed5"),
        cmocka_unit_test(test_dropout_mask_thread_count_independent),
        cmocka_unit_test(test_dropout_statistics),
        cmocka_unit_test(test_dropout_deterministic),
        cmocka_unit_test(test_dropout_p0_and_p1),
        cmocka_unit_test(test_dropout_eval_identity),
        cmocka_unit_test(test_dropout_backward_accumulates),

        GOLDEN_TEST(test_ffn_case, "ffn_1x1_D1_F1"),
        GOLDEN_TEST(test_ffn_case, "ffn_2x5_D8_F32"),
        GOLDEN_TEST(test_ffn_case, "ffn_2x4_D12_F20_nobias"),
        GOLDEN_TEST(test_ffn_case, "ffn_3x7_D16_F64_p10"),
        GOLDEN_TEST(test_ffn_case, "ffn_4x16_D32_F128_p50"),
        GOLDEN_TEST(test_ffn_case, "ffn_backward_1x1_D1_F1"),
        GOLDEN_TEST(test_ffn_case, "ffn_backward_2x5_D8_F32"),
        GOLDEN_TEST(test_ffn_case, "ffn_backward_2x4_D12_F20_nobias"),
        GOLDEN_TEST(test_ffn_case, "ffn_backward_2x6_D8_F16_relu_zero"),
        GOLDEN_TEST(test_ffn_case, "ffn_backward_3x7_D16_F64_p10"),
        GOLDEN_TEST(test_ffn_case, "ffn_backward_4x16_D32_F128_p30"),
        GOLDEN_TEST(test_ffn_case, "ffn_backward_eval_3x4_D8_F16_p50"),
        cmocka_unit_test(test_ffn_relu_gradient_at_zero),
        cmocka_unit_test(test_ffn_backward_accumulates),
        cmocka_unit_test(test_ffn_thread_count_independent),

        GOLDEN_TEST(test_encoder_case, "encoder_backward_post_K2_2x5_D8_H2"),
        GOLDEN_TEST(test_encoder_case, "encoder_backward_post_K2_3x6_D12_H3_norm_padding_mask_bool"),
        GOLDEN_TEST(test_encoder_case, "encoder_backward_pre_K2_2x5_D8_H2_norm"),
        GOLDEN_TEST(test_encoder_case, "encoder_backward_pre_K2_3x6_D12_H3_padding"),
        GOLDEN_TEST(test_encoder_case, "encoder_backward_pre_K3_2x4_D8_H1_norm_padding_mask_float"),
        GOLDEN_TEST(test_encoder_case, "encoder_layer_backward_post_1x1_D4_H1_F4"),
        GOLDEN_TEST(test_encoder_case, "encoder_layer_backward_post_2x5_D8_H2_F16"),
        GOLDEN_TEST(test_encoder_case, "encoder_layer_backward_post_2x7_D16_H4_F32_mask_bool"),
        GOLDEN_TEST(test_encoder_case, "encoder_layer_backward_post_3x6_D12_H1_F24_padding"),
        GOLDEN_TEST(test_encoder_case, "encoder_layer_backward_post_4x6_D8_H4_F20_padding_mask_bool_eps1e-03"),
        GOLDEN_TEST(test_encoder_case, "encoder_layer_backward_pre_2x5_D8_H2_F16"),
        GOLDEN_TEST(test_encoder_case, "encoder_layer_backward_pre_2x7_D16_H4_F32_mask_float_eps1e-06"),
        GOLDEN_TEST(test_encoder_case, "encoder_layer_backward_pre_3x6_D12_H3_F24_padding"),
        GOLDEN_TEST(test_encoder_case, "encoder_layer_backward_pre_4x6_D8_H2_F20_padding_mask_bool"),
        GOLDEN_TEST(test_encoder_case, "encoder_layer_post_1x1_D4_H1_F4"),
        GOLDEN_TEST(test_encoder_case, "encoder_layer_post_2x5_D8_H2_F16"),
        GOLDEN_TEST(test_encoder_case, "encoder_layer_post_2x7_D16_H4_F32_mask_bool"),
        GOLDEN_TEST(test_encoder_case, "encoder_layer_post_3x6_D12_H1_F24_padding"),
        GOLDEN_TEST(test_encoder_case, "encoder_layer_post_4x6_D8_H4_F20_padding_mask_bool_eps1e-03"),
        GOLDEN_TEST(test_encoder_case, "encoder_layer_pre_2x5_D8_H2_F16"),
        GOLDEN_TEST(test_encoder_case, "encoder_layer_pre_2x7_D16_H4_F32_mask_float_eps1e-06"),
        GOLDEN_TEST(test_encoder_case, "encoder_layer_pre_3x6_D12_H3_F24_padding"),
        GOLDEN_TEST(test_encoder_case, "encoder_layer_pre_4x6_D8_H2_F20_padding_mask_bool"),
        GOLDEN_TEST(test_encoder_case, "encoder_post_K2_2x5_D8_H2"),
        GOLDEN_TEST(test_encoder_case, "encoder_post_K2_3x6_D12_H3_norm_padding_mask_bool"),
        GOLDEN_TEST(test_encoder_case, "encoder_pre_K2_2x5_D8_H2_norm"),
        GOLDEN_TEST(test_encoder_case, "encoder_pre_K2_3x6_D12_H3_padding"),
        GOLDEN_TEST(test_encoder_case, "encoder_pre_K3_2x4_D8_H1_norm_padding_mask_float"),
        cmocka_unit_test(test_encoder_padding_ignored),
        cmocka_unit_test(test_encoder_thread_count_independent),
        cmocka_unit_test(test_encoder_layer_backward_accumulates),
        cmocka_unit_test(test_encoder_layer_dropout_training),

        /* The case evaluator of build/05_encoder, one golden per op. */
        GOLDEN_TEST_AS(test_case_eval, "case_eval", "embedding_2x8_V11_D5_scaled_pad-1"),
        GOLDEN_TEST_AS(test_case_eval, "case_eval", "embedding_backward_8x8_V4_D12_scaled_pad-4"),
        GOLDEN_TEST_AS(test_case_eval, "case_eval", "positional_sinusoidal_3x6_D7"),
        GOLDEN_TEST_AS(test_case_eval, "case_eval", "positional_sinusoidal_backward_2x5_D9"),
        GOLDEN_TEST_AS(test_case_eval, "case_eval", "positional_learned_2x7_L10_D8"),
        GOLDEN_TEST_AS(test_case_eval, "case_eval", "positional_learned_backward_2x12_L12_D5"),
        GOLDEN_TEST_AS(test_case_eval, "case_eval", "dropout_mask_p90_5x30"),
        GOLDEN_TEST_AS(test_case_eval, "case_eval", "dropout_mask_backward_eval_p30_4x25"),
        GOLDEN_TEST_AS(test_case_eval, "case_eval", "dropout_rng_p10_8x32_seed42"),
        GOLDEN_TEST_AS(test_case_eval, "case_eval", "ffn_4x16_D32_F128_p50"),
        GOLDEN_TEST_AS(test_case_eval, "case_eval", "ffn_backward_2x4_D12_F20_nobias"),
        GOLDEN_TEST_AS(test_case_eval, "case_eval", "encoder_layer_pre_4x6_D8_H2_F20_padding_mask_bool"),
        GOLDEN_TEST_AS(test_case_eval, "case_eval", "encoder_layer_backward_post_4x6_D8_H4_F20_padding_mask_bool_eps1e-03"),
        GOLDEN_TEST_AS(test_case_eval, "case_eval", "encoder_post_K2_3x6_D12_H3_norm_padding_mask_bool"),
        GOLDEN_TEST_AS(test_case_eval, "case_eval", "encoder_backward_pre_K3_2x4_D8_H1_norm_padding_mask_float"),

#define BAD_TEST(i) {BAD[i].name, test_bad_case, NULL, NULL, (void *)&BAD[i]}
        BAD_TEST(0), BAD_TEST(1), BAD_TEST(2), BAD_TEST(3), BAD_TEST(4), BAD_TEST(5),
        BAD_TEST(6), BAD_TEST(7), BAD_TEST(8), BAD_TEST(9), BAD_TEST(10), BAD_TEST(11),
        BAD_TEST(12), BAD_TEST(13), BAD_TEST(14), BAD_TEST(15), BAD_TEST(16), BAD_TEST(17),
        BAD_TEST(18), BAD_TEST(19), BAD_TEST(20), BAD_TEST(21), BAD_TEST(22), BAD_TEST(23),
        BAD_TEST(24), BAD_TEST(25), BAD_TEST(26), BAD_TEST(27), BAD_TEST(28), BAD_TEST(29),
        BAD_TEST(30), BAD_TEST(31), BAD_TEST(32),
        cmocka_unit_test(test_bad_case_writes_no_file),
    };
    return run_chapter_tests("chapter 05: encoder (embeddings, positions, dropout, "
                             "feed-forward, encoder layer, stack)", tests);
}
