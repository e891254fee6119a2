/*
 * test_00_foundations.c - chapter 00: matmul, softmax, the RNG, and the
 * safetensors reader and writer, against goldens made by reference/ch00_foundations.py.
 *
 * The malformed-file tests write small broken files themselves (they are
 * inputs, not expected values) and check that the reader refuses each one
 * with a message naming the file and the problem. CI also runs this program
 * under valgrind, so a leak on any error path fails the build.
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
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "foundations_case.h"
#include "helpers.h"
#include "matmul.h"
#include "philox.h"
#include "rng.h"
#include "softmax.h"
#include "tensor.h"

#define CHAPTER "00_foundations"

/* ------------------------------------------------------------------------ */
/* matmul                                                                    */
/* ------------------------------------------------------------------------ */

/* The product the case's op names: matmul_nt, matmul_nn or matmul_tn. */
static int matmul_op(const char *op, float *c, const float *a, const float *b, int M, int N,
                     int K, int accumulate)
{
    return !strcmp(op, "matmul_nt")   ? matmul_nt(c, a, b, M, N, K, accumulate)
           : !strcmp(op, "matmul_nn") ? matmul_nn(c, a, b, M, N, K, accumulate)
                                      : matmul_tn(c, a, b, M, N, K, accumulate);
}

static void test_matmul_case(void **state)
{
    const char *name = *state;
    TensorFile f;
    load_golden(&f, CHAPTER, name);
    double atol, rtol;
    golden_tolerance(&f, &atol, &rtol);
    int M = golden_meta_int(&f, "info.M"), N = golden_meta_int(&f, "info.N");
    int K = golden_meta_int(&f, "info.K");
    const char *op = tensorfile_meta(&f, "op");
    const float *a = golden_tensor(&f, "a", DTYPE_F32)->data;
    const float *b = golden_tensor(&f, "b", DTYPE_F32)->data;

    float *c = test_floats((int64_t)M * N);
    assert_ok(matmul_op(op, c, a, b, M, N, K, 0));
    assert_close_to_golden(&f, "c", c, (int64_t)M * N, atol, rtol);
    free(c);
    tensorfile_free(&f);
}

/* nn.Linear forward and backward; gradients start from zero buffers. */
static void test_linear_case(void **state)
{
    const char *name = *state;
    TensorFile f;
    load_golden(&f, CHAPTER, name);
    double atol, rtol;
    golden_tolerance(&f, &atol, &rtol);
    const Tensor *x = golden_tensor(&f, "input", DTYPE_F32);
    const Tensor *w = golden_tensor(&f, "weight", DTYPE_F32);
    const Tensor *b = tensorfile_find(&f, "bias");
    int M = x->shape[0], K = x->shape[1], N = w->shape[0];
    float *y = test_floats((int64_t)M * N);
    assert_ok(linear_forward(y, x->data, w->data, b ? b->data : NULL, M, K, N));
    assert_close_to_golden(&f, "output", y, (int64_t)M * N, atol, rtol);
    if (!strcmp(tensorfile_meta(&f, "op"), "linear_backward")) {
        const float *dy = golden_tensor(&f, "grad_output", DTYPE_F32)->data;
        float *dx = test_floats((int64_t)M * K), *dw = test_floats((int64_t)N * K);
        float *db = test_floats(N);
        assert_ok(linear_backward(dx, dw, b ? db : NULL, dy, x->data, w->data, M, K, N));
        assert_close_to_golden(&f, "grad_input", dx, (int64_t)M * K, atol, rtol);
        assert_close_to_golden(&f, "grad_weight", dw, (int64_t)N * K, atol, rtol);
        if (b) assert_close_to_golden(&f, "grad_bias", db, N, atol, rtol);
        free(dx);
        free(dw);
        free(db);
    }
    free(y);
    tensorfile_free(&f);
}

/* With accumulate set, the product is added: doing it twice into a zeroed
 * buffer gives twice the golden. */
static void test_matmul_accumulates(void **state)
{
    const char *names[] = {"matmul_nt_7x2x9", "matmul_nn_7x2x9", "matmul_tn_7x2x9"};
    for (int i = 0; i < 3; i++) {
        TensorFile f;
        load_golden(&f, CHAPTER, names[i]);
        const float *a = golden_tensor(&f, "a", DTYPE_F32)->data;
        const float *b = golden_tensor(&f, "b", DTYPE_F32)->data;
        const float *expected = golden_tensor(&f, "c", DTYPE_F32)->data;
        float c[7 * 2] = {0}, twice[7 * 2];
        for (int rep = 0; rep < 2; rep++) {
            assert_ok(matmul_op(tensorfile_meta(&f, "op"), c, a, b, 7, 2, 9, 1));
        }
        for (int j = 0; j < 14; j++) twice[j] = 2 * expected[j];
        assert_close(names[i], c, twice, 14, 4e-5, 1e-5);
        tensorfile_free(&f);
    }
}

/* The same product with 1 and 2 threads is bit-identical, in each form, on
 * a shape that takes every path of the blocked product (packed B, packed
 * slivers of A^T, two blocks of k, short edge tiles). */
static void test_matmul_thread_count_independent(void **state)
{
    const char *names[3] = {"matmul_nt_301x260x270", "matmul_nn_301x260x270",
                            "matmul_tn_301x260x270"};
    int M = 301, N = 260, K = 270;
    for (int i = 0; i < 3; i++) {
        TensorFile f;
        load_golden(&f, CHAPTER, names[i]);
        const float *a = golden_tensor(&f, "a", DTYPE_F32)->data;
        const float *b = golden_tensor(&f, "b", DTYPE_F32)->data;
        float *c[2] = {test_floats(M * N), test_floats(M * N)};
        int saved = omp_get_max_threads();
        for (int t = 0; t < 2; t++) {
            omp_set_num_threads(t + 1);
            assert_ok(matmul_op(tensorfile_meta(&f, "op"), c[t], a, b, M, N, K, 0));
        }
        omp_set_num_threads(saved);
        assert_memory_equal(c[0], c[1], (size_t)M * N * sizeof(float));
        free(c[0]);
        free(c[1]);
        tensorfile_free(&f);
    }
}

/* Products with few tiles of C and many blocks of k (a weight gradient over
 * thousands of rows), where several threads take whole blocks of k, one
 * wide product where they share the tiles, and narrow ones that one thread
 * computes its own way: with 1, 2 and 3 threads,
 * overwriting and accumulating into a C that is not zero, the results are
 * bit-identical, and within float32 rounding of the product in double. */
static void test_matmul_blocks_of_k_thread_count_independent(void **state)
{
    static const struct { const char *op; int M, N, K; } shapes[] = {
        {"matmul_tn", 64, 64, 2000}, {"matmul_nt", 40, 48, 1300}, {"matmul_nn", 30, 50, 777},
        {"matmul_tn", 24, 40, 5000},   /* 20 blocks: several rounds, the last one short */
        /* Not by blocks of k: tiles shared, two blocks of columns (512 and 88),
         * A^T's slivers packed for each thread's row tiles. */
        {"matmul_tn", 100, 600, 300},
        /* Packed slivers taken ROW_GROUP row tiles at a time: 34 row tiles,
         * so more than a group for every thread count, a short last panel,
         * a block of k of 4. */
        {"matmul_tn", 400, 300, 260},
        /* Narrow products (N <= 16): one thread computes them a row of C per
         * vector (narrow_rows), two and three threads with the tiles; the
         * last rows short, N below a vector (padded), three blocks of k. */
        {"matmul_tn", 37, 8, 700}, {"matmul_nn", 37, 13, 600}, {"matmul_nn", 85, 3, 1000},
        {"matmul_tn", 50, 16, 300},
    };
    uint32_t seed = 12345;
    for (size_t s = 0; s < 2 * sizeof shapes / sizeof *shapes; s++) {
        const char *op = shapes[s / 2].op;
        int M = shapes[s / 2].M, N = shapes[s / 2].N, K = shapes[s / 2].K, accumulate = s % 2;
        size_t mn = (size_t)M * N;
        float *a = test_floats((int64_t)M * K), *b = test_floats((int64_t)K * N);
        float *c0 = test_floats((int64_t)mn), *c[3];
        for (int64_t i = 0; i < (int64_t)M * K; i++) a[i] = test_uniform(&seed);
        for (int64_t i = 0; i < (int64_t)K * N; i++) b[i] = test_uniform(&seed);
        for (size_t i = 0; i < mn; i++) c0[i] = test_uniform(&seed);
        int saved = omp_get_max_threads();
        for (int t = 0; t < 3; t++) {
            c[t] = test_floats((int64_t)mn);
            memcpy(c[t], c0, mn * sizeof *c0);
            omp_set_num_threads(t + 1);
            assert_ok(matmul_op(op, c[t], a, b, M, N, K, accumulate));
        }
        omp_set_num_threads(saved);
        assert_memory_equal(c[0], c[1], mn * sizeof(float));
        assert_memory_equal(c[0], c[2], mn * sizeof(float));
        /* The same sums in double: A[i, k] and B[k, j] through each form's
         * layout (tn: A stored (K, M); nt: B stored (N, K)). */
        float *expected = test_floats((int64_t)mn);
        int tn = !strcmp(op, "matmul_tn"), nt = !strcmp(op, "matmul_nt");
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double sum = accumulate ? c0[(size_t)i * N + j] : 0.0;
                for (int k = 0; k < K; k++)
                    sum += (double)(tn ? a[(size_t)k * M + i] : a[(size_t)i * K + k]) *
                           (nt ? b[(size_t)j * K + k] : b[(size_t)k * N + j]);
                expected[(size_t)i * N + j] = (float)sum;
            }
        /* Sums of K products of size <= 1: float32's rounding over K terms
         * stays well under 1e-3 (2e-5 measured); a block of k lost or added
         * twice, or C's old value kept, is off by far more. */
        assert_close(op, c[0], expected, (int64_t)mn, 1e-3, 1e-5);
        for (int t = 0; t < 3; t++) free(c[t]);
        free(a);
        free(b);
        free(c0);
        free(expected);
    }
}

/* linear_backward over several blocks of SUM_ROWS rows, the last one short,
 * with more and fewer columns than a vector holds: with 1, 2 and 3 threads
 * dx, dW and db are bit-identical, and db, added to buffers that are not
 * zero, is their old values plus the column sums of dy within float32
 * rounding of the sums in double. */
static void test_linear_backward_thread_count_independent(void **state)
{
    static const struct { int M, K, N; } shapes[] = {{700, 24, 10}, {3 * SUM_ROWS, 8, 37}};
    uint32_t seed = 777;
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        int M = shapes[s].M, K = shapes[s].K, N = shapes[s].N;
        float *x = test_floats((int64_t)M * K), *w = test_floats((int64_t)N * K);
        float *dy = test_floats((int64_t)M * N), *db0 = test_floats(N);
        for (int64_t i = 0; i < (int64_t)M * K; i++) x[i] = test_uniform(&seed);
        for (int64_t i = 0; i < (int64_t)N * K; i++) w[i] = test_uniform(&seed);
        for (int64_t i = 0; i < (int64_t)M * N; i++) dy[i] = test_uniform(&seed);
        for (int j = 0; j < N; j++) db0[j] = test_uniform(&seed);
        float *dx[3], *dw[3], *db[3];
        int saved = omp_get_max_threads();
        for (int t = 0; t < 3; t++) {
            dx[t] = test_floats((int64_t)M * K), dw[t] = test_floats((int64_t)N * K);
            db[t] = test_floats(N);
            memcpy(db[t], db0, (size_t)N * sizeof *db0);
            omp_set_num_threads(t + 1);
            int rc = linear_backward(dx[t], dw[t], db[t], dy, x, w, M, K, N);
            omp_set_num_threads(saved);
            assert_ok(rc);
        }
        for (int t = 1; t < 3; t++) {
            assert_memory_equal(dx[0], dx[t], (size_t)M * K * sizeof(float));
            assert_memory_equal(dw[0], dw[t], (size_t)N * K * sizeof(float));
            assert_memory_equal(db[0], db[t], (size_t)N * sizeof(float));
        }
        float expected[64];
        for (int j = 0; j < N; j++) {
            double sum = db0[j];
            for (int i = 0; i < M; i++) sum += dy[(size_t)i * N + j];
            expected[j] = (float)sum;
        }
        /* Sums of M values of size <= 1 (about sqrt(M) = 26 in size):
         * float32 rounding stays under 1e-4; a block of rows lost or added
         * twice, or the old db dropped, is off by far more. */
        assert_close("linear_backward db", db[0], expected, N, 1e-4, 1e-5);
        for (int t = 0; t < 3; t++) free(dx[t]), free(dw[t]), free(db[t]);
        free(x), free(w), free(dy), free(db0);
    }
}

/* softmax_exp against exp in double: within 2 units in the last place of
 * float32 over [-87, 0] (a million points, and the ends), 0 below -87 and
 * for -inf, exactly 1 at 0. */
static void test_softmax_exp_accuracy(void **state)
{
    double worst = 0.0;
    float worst_x = 0.0f;
    for (int i = 0; i <= 1000000; i++) {
        float x = -87.0f * (float)i / 1000000.0f;
        double exact = exp((double)x);
        /* the unit in the last place of the float nearest exact, in double:
         * every e^x here is a normal float, but its ulp may be a subnormal
         * one, which float arithmetic would flush to 0 (tensor.h) */
        double ulp = ldexp(1.0, ilogbf((float)exact) - 23);
        double err = fabs((double)softmax_exp(x) - exact) / ulp;
        if (err > worst) worst = err, worst_x = x;
    }
    printf("  softmax_exp: largest error %.3f ulp, at x = %.6g\n", worst, (double)worst_x);
    assert_true(worst <= 2.0);
    assert_true(softmax_exp(0.0f) == 1.0f);
    assert_true(softmax_exp(-87.5f) == 0.0f);
    assert_true(softmax_exp(-1e30f) == 0.0f);
    assert_true(softmax_exp(-INFINITY) == 0.0f);
}

/* flush_subnormals (run_tests_selected called it, as every program's main
 * does): half the smallest normal float is 0, as a result and as an input,
 * on the calling thread and on every thread of a parallel region started
 * after it. volatile keeps the compiler from doing the arithmetic itself. */
static void test_flush_subnormals(void **state)
{
    (void)state;
#if FLUSHES_SUBNORMALS
    /* valgrind runs the program on a simulated CPU that keeps subnormals
     * whatever MXCSR says (CI's valgrind step); it is known by the library
     * it preloads. */
    const char *preload = getenv("LD_PRELOAD");
    if (preload && strstr(preload, "vgpreload")) {
        printf("  under valgrind, which does not flush subnormals: skipped\n");
        skip();
    }
    int flushed = 0, threads = 0;
    #pragma omp parallel reduction(+:flushed, threads)
    {
        volatile float smallest = 1.17549435e-38f, half = 0.5f;   /* 2^-126, 2^-1 */
        volatile float subnormal = 5.87747175e-39f;               /* 2^-127 */
        float made = smallest * half;               /* a subnormal result */
        float taken = subnormal * 4.0f;             /* a subnormal input: 2^-125 if kept */
        flushed += made == 0.0f && taken == 0.0f;
        threads += 1;
    }
    assert_int_equal(flushed, threads);
#else
    skip();                                          /* no flush on this CPU */
#endif
}

/* ------------------------------------------------------------------------ */
/* softmax                                                                   */
/* ------------------------------------------------------------------------ */

static void test_softmax_case(void **state)
{
    const char *name = *state;
    TensorFile f;
    load_golden(&f, CHAPTER, name);
    double atol, rtol;
    golden_tolerance(&f, &atol, &rtol);
    int backward = !strcmp(tensorfile_meta(&f, "op"), "softmax_backward");
    const Tensor *x = golden_tensor(&f, backward ? "output" : "input", DTYPE_F32);
    int rows = x->shape[0], cols = x->shape[1];
    float *result = test_floats((int64_t)rows * cols);
    if (backward) {
        const float *dy = golden_tensor(&f, "grad_output", DTYPE_F32)->data;
        assert_ok(softmax_backward(result, x->data, dy, rows, cols));
        assert_close_to_golden(&f, "grad_input", result, (int64_t)rows * cols, atol, rtol);
    } else {
        assert_ok(softmax_forward(result, x->data, rows, cols));
        assert_close_to_golden(&f, "output", result, (int64_t)rows * cols, atol, rtol);
    }
    free(result);
    tensorfile_free(&f);
}

/* The documented rule: a row of all -inf gives zeros, never NaN, and its
 * gradient is zero too. Other rows are unaffected. */
static void test_softmax_all_masked_row_is_zero(void **state)
{
    float x[2 * 3] = {-INFINITY, -INFINITY, -INFINITY, 0.0f, 0.0f, -INFINITY};
    float y[6], dy[6] = {1, 2, 3, 1, 2, 3}, dx[6];
    assert_ok(softmax_forward(y, x, 2, 3));
    float expected_y[6] = {0, 0, 0, 0.5f, 0.5f, 0};
    assert_close("all -inf row", y, expected_y, 6, 0, 0);
    assert_ok(softmax_backward(dx, y, dy, 2, 3));
    /* Row 2: dx = y * (dy - (0.5*1 + 0.5*2)) = 0.5 * (1 - 1.5), 0.5 * (2 - 1.5), 0 */
    float expected_dx[6] = {0, 0, 0, -0.25f, 0.25f, 0};
    assert_close("its gradient", dx, expected_dx, 6, 1e-7, 0);
}

/* ------------------------------------------------------------------------ */
/* RNG                                                                       */
/* ------------------------------------------------------------------------ */

/* C draws the same stream as reference/rng.py. */
static void test_rng_case(void **state)
{
    const char *name = *state;
    TensorFile f;
    load_golden(&f, CHAPTER, name);
    double atol, rtol;
    golden_tolerance(&f, &atol, &rtol);
    int64_t n = golden_meta_int(&f, "count");
    Rng rng;
    rng_seed(&rng, golden_meta_int(&f, "rng_seed"), golden_meta_int(&f, "rng_stream"));
    const int64_t *u32 = golden_tensor(&f, "u32", DTYPE_I64)->data;
    for (int64_t i = 0; i < n; i++) assert_int_equal(rng_u32(&rng), u32[i]);
    float *got = test_floats(n);
    for (int64_t i = 0; i < n; i++) got[i] = rng_uniform(&rng);
    assert_close_to_golden(&f, "uniform", got, n, 0, 0);    /* exact: 24-bit fractions */
    for (int64_t i = 0; i < n; i++) got[i] = rng_normal(&rng);
    assert_close_to_golden(&f, "normal", got, n, atol, rtol);
    const int64_t *below = golden_tensor(&f, "below10", DTYPE_I64)->data;
    for (int64_t i = 0; i < n; i++) assert_int_equal(rng_below(&rng, 10), below[i]);
    free(got);
    tensorfile_free(&f);
}

/* Philox 4x32-10 gives Random123's published known answers (its
 * tests/kat_vectors: zeros, all ones, and the digits of pi); the uniforms
 * are the top 24 bits of each word. */
static void test_philox_known_answers(void **state)
{
    (void)state;
    static const struct {
        uint32_t counter[4], key[2], out[4];
    } kat[] = {
        {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
        {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff},
         {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
        {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0},
         {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
    };
    for (size_t t = 0; t < sizeof kat / sizeof kat[0]; t++) {
        uint32_t out[4];
        PhiloxKey key = {{kat[t].key[0], kat[t].key[1]}};
        philox4x32_10(out, kat[t].counter, key);
        for (int j = 0; j < 4; j++) assert_same(out[j], kat[t].out[j]);
    }
    float u[4];
    philox_uniform4(u, (PhiloxKey){{0, 0}}, 0);
    for (int j = 0; j < 4; j++) assert_same(u[j], (float)(kat[0].out[j] >> 8) / 16777216.0f);
}

/* 100 000 draws: the moments of uniform and normal are where they belong
 * (bounds are about 5 standard errors wide). */
static void test_rng_statistics(void **state)
{
    Rng rng;
    rng_seed(&rng, 1234, 0);
    const int n = 100000;
    double su = 0, su2 = 0, sn = 0, sn2 = 0;
    int counts[10] = {0};
    for (int i = 0; i < n; i++) {
        double u = rng_uniform(&rng), z = rng_normal(&rng);
        assert_true(u >= 0 && u < 1);
        su += u, su2 += u * u, sn += z, sn2 += z * z;
        counts[rng_below(&rng, 10)]++;
    }
    double mean_u = su / n, var_u = su2 / n - mean_u * mean_u;
    double mean_n = sn / n, var_n = sn2 / n - mean_n * mean_n;
    print_message("  uniform mean %.4f var %.4f, normal mean %.4f var %.4f\n", mean_u, var_u,
                  mean_n, var_n);
    assert_true(fabs(mean_u - 0.5) < 0.005 && fabs(var_u - 1.0 / 12) < 0.002);
    assert_true(fabs(mean_n) < 0.016 && fabs(var_n - 1.0) < 0.025);
    for (int d = 0; d < 10; d++) assert_true(abs(counts[d] - n / 10) < 500);
}

/* ------------------------------------------------------------------------ */
/* safetensors: files written by PyTorch, and round trips                    */
/* ------------------------------------------------------------------------ */

/* golden/00_foundations/dtypes.safetensors was written by PyTorch's
 * safetensors; element i of every tensor holds i (i % 2 for BOOL). */
static void test_read_pytorch_file(void **state)
{
    TensorFile f;
    load_golden(&f, CHAPTER, "dtypes");
    const struct { const char *name; DType dtype; } want[] = {
        {"f32", DTYPE_F32}, {"f64", DTYPE_F64}, {"i64", DTYPE_I64},
        {"i32", DTYPE_I32}, {"u8", DTYPE_U8},   {"bool", DTYPE_BOOL},
    };
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        const Tensor *t = golden_tensor(&f, want[k].name, want[k].dtype);
        assert_int_equal(t->ndim, 3);
        assert_int_equal(t->shape[0], 2);
        assert_int_equal(t->shape[1], 3);
        assert_int_equal(t->shape[2], 4);
        for (int i = 0; i < 24; i++) {
            double v = 0;
            switch (t->dtype) {
            case DTYPE_F32: v = ((float *)t->data)[i]; break;
            case DTYPE_F64: v = ((double *)t->data)[i]; break;
            case DTYPE_I64: v = (double)((int64_t *)t->data)[i]; break;
            case DTYPE_I32: v = ((int32_t *)t->data)[i]; break;
            case DTYPE_U8: v = ((uint8_t *)t->data)[i]; break;
            case DTYPE_BOOL: v = ((uint8_t *)t->data)[i]; break;
            }
            assert_true(v == (t->dtype == DTYPE_BOOL ? i % 2 : i));
        }
    }
    const Tensor *scalar = golden_tensor(&f, "scalar", DTYPE_F32);
    assert_int_equal(scalar->ndim, 0);
    assert_true(((float *)scalar->data)[0] == 3.5f);
    const Tensor *empty = golden_tensor(&f, "empty", DTYPE_F32);
    assert_ok(tensor_numel(empty));
    assert_string_equal(tensorfile_meta(&f, "note"), "element i holds i");
    tensorfile_free(&f);
}

/* A temporary path for one test; the file is removed by the caller. */
static void temp_path(char *buf, size_t size, const char *tag)
{
    snprintf(buf, size, "build/tmp_%s_%d.safetensors", tag, (int)getpid());
}

/* Writing what PyTorch wrote and reading it back loses nothing. */
static void test_round_trip(void **state)
{
    TensorFile f, back;
    Error err;
    load_golden(&f, CHAPTER, "dtypes");
    char path[256];
    temp_path(path, sizeof path, "roundtrip");
    assert_ok(tensorfile_set_meta(&f, "written_by", "C", &err));
    assert_ok(safetensors_write(path, &f, &err));
    assert_ok(safetensors_read(path, &back, &err));
    assert_int_equal(back.n_tensors, f.n_tensors);
    for (int i = 0; i < f.n_tensors; i++) {
        const Tensor *a = &f.tensors[i].tensor;
        const Tensor *b = tensorfile_find(&back, f.tensors[i].name);
        assert_non_null(b);
        assert_int_equal(a->dtype, b->dtype);
        assert_int_equal(a->ndim, b->ndim);
        assert_memory_equal(a->shape, b->shape, sizeof a->shape[0] * a->ndim);
        assert_memory_equal(a->data, b->data, tensor_numel(a) * dtype_size(a->dtype));
    }
    assert_string_equal(tensorfile_meta(&back, "written_by"), "C");
    assert_string_equal(tensorfile_meta(&back, "note"), "element i holds i");
    tensorfile_free(&f);
    tensorfile_free(&back);
    unlink(path);
}

/* Reads a whole file into memory (the tests below damage copies of it). */
static unsigned char *slurp(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *size = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*size);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, *size, f), *size);
    fclose(f);
    return b;
}

/* Where the bytes of s first appear in b (size bytes); fails the test if nowhere. */
static size_t find_bytes(const unsigned char *b, size_t size, const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i + n <= size; i++)
        if (memcmp(b + i, s, n) == 0) return i;
    fail_msg("'%s' is not in the file", s);
    return 0;
}

static void spit(const char *path, const unsigned char *b, size_t size)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, size, f), size);
    fclose(f);
}

/* The writer keeps each tensor's CRC-32 in the metadata ("crc32.NAME", zlib's
 * CRC: "123456789" gives cbf43926); the reader checks it and hides it. A bit
 * flipped in the data is refused naming the tensor; so are a checksum of a
 * tensor the file lacks and one that is not 8 hex digits. */
static void test_checksums(void **state)
{
    TensorFile f = {0}, back;
    Error err;
    Tensor digits = {.dtype = DTYPE_U8, .ndim = 1, .shape = {9}, .data = (void *)"123456789"};
    assert_int_equal(safetensors_crc32(&digits), 0xCBF43926u);
    float x[6] = {1, 2, 3, 4, 5, 6}, y[3] = {-1, 0.5f, 8};
    assert_ok(tensorfile_add_f32(&f, "x", x, 2, (int64_t[]){2, 3}, &err));
    assert_ok(tensorfile_add_f32(&f, "layer.y", y, 1, (int64_t[]){3}, &err));
    assert_ok(tensorfile_set_meta(&f, "crc32.x", "00000000", &err));   /* stale: rewritten */
    char path[256];
    temp_path(path, sizeof path, "checksums");
    assert_ok(safetensors_write(path, &f, &err));
    assert_ok(safetensors_read(path, &back, &err));
    assert_null(tensorfile_meta(&back, "crc32.x"));
    assert_int_equal(back.n_meta, 0);
    tensorfile_free(&back);
    size_t size;
    unsigned char *good = slurp(path, &size), *bad = malloc(size);
    assert_non_null(bad);
    find_bytes(good, size, "\"crc32.layer.y\":\"");
    /* every bit of the data section, flipped alone */
    uint64_t header = 0;
    for (int i = 7; i >= 0; i--) header = (header << 8) | good[i];
    for (size_t at = 8 + header; at < size; at++)
        for (int bit = 0; bit < 8; bit++) {
            memcpy(bad, good, size);
            bad[at] ^= (unsigned char)(1u << bit);
            spit(path, bad, size);
            assert_int_equal(safetensors_read(path, &back, &err), -1);
            const char *name = at < 8 + header + sizeof x ? "'x'" : "'layer.y'";
            if (!strstr(err.msg, name) || !strstr(err.msg, "does not match its checksum"))
                fail_msg("byte %zu bit %d: %s", at, bit, err.msg);
        }
    print_message("  %zu one-bit flips refused, e.g. %s\n", 8 * (size - 8 - header), err.msg);
    /* a checksum that names no tensor, or is not 8 hex digits */
    const char *broken[][2] = {{"\"crc32.layer.y\"", "\"crc32.layer.z\""},
                               {"\"crc32.x\":\"", "\"crc32.x\":\"z"}};
    const char *says[] = {"the file does not have", "not 8 hex digits"};
    for (int i = 0; i < 2; i++) {
        size_t at = find_bytes(good, size, broken[i][0]);
        memcpy(bad, good, size);
        memcpy(bad + at, broken[i][1], strlen(broken[i][1]));
        spit(path, bad, size);
        assert_int_equal(safetensors_read(path, &back, &err), -1);
        print_message("  %s\n", err.msg);
        assert_non_null(strstr(err.msg, says[i]));
    }
    free(good), free(bad);
    tensorfile_free(&f);
    unlink(path);
}

/* Each shipped model carries its checksums: a bit flipped anywhere in its
 * data (here at 64 places from the first byte of the data to the last) is
 * refused. */
static void test_shipped_models_refuse_flips(void **state)
{
    const char *models[] = {"models/taylor.safetensors", "models/taylor_ckpt.safetensors",
                            "models/imdb.safetensors", "models/imdb_lm.safetensors",
                            "models/set_anomaly.safetensors"};
    char path[256];
    temp_path(path, sizeof path, "flipped");
    for (size_t m = 0; m < sizeof models / sizeof *models; m++) {
        size_t size;
        unsigned char *b = slurp(models[m], &size);
        uint64_t header = 0;
        for (int i = 7; i >= 0; i--) header = (header << 8) | b[i];
        size_t data = size - 8 - header;
        Error err;
        TensorFile f;
        for (int k = 0; k < 64; k++) {
            size_t at = 8 + header + (data - 1) * k / 63;
            b[at] ^= (unsigned char)(1u << (k % 8));
            spit(path, b, size);
            b[at] ^= (unsigned char)(1u << (k % 8));
            assert_int_equal(safetensors_read(path, &f, &err), -1);
            assert_non_null(strstr(err.msg, "does not match its checksum"));
        }
        print_message("  %s: 64 flips refused, e.g. %s\n", models[m], err.msg);
        spit(path, b, size);
        assert_ok(safetensors_read(path, &f, &err));          /* and the file as shipped reads */
        tensorfile_free(&f);
        free(b);
    }
    unlink(path);
}

/* The writer never leaves a partial file: a path in a missing folder fails
 * cleanly and creates nothing. */
static void test_write_failure_leaves_nothing(void **state)
{
    TensorFile f = {0};
    Error err;
    float x[2] = {1, 2};
    assert_ok(tensorfile_add_f32(&f, "x", x, 1, (int64_t[]){2}, &err));
    const char *path = "build/no_such_folder/out.safetensors";
    assert_int_equal(safetensors_write(path, &f, &err), -1);
    print_message("  error: %s\n", err.msg);
    assert_non_null(strstr(err.msg, path));
    assert_int_equal(access(path, F_OK), -1);
    tensorfile_free(&f);
}

/* A message that quotes text from a file stays one line of plain text: a
 * newline or an escape sequence in it is written as \xNN. A file's dtype
 * string with both goes through the reader the same way. */
static void test_error_escapes_control_characters(void **state)
{
    Error err;
    assert_int_equal(error_set(&err, "dtype '%s' is unknown", "F3\x1b[2J\n2"), -1);
    assert_string_equal(err.msg, "dtype 'F3\\x1b[2J\\x0a2' is unknown");
    char path[256];
    TensorFile f;
    temp_path(path, sizeof path, "escape");
    FILE *out = fopen(path, "wb");
    const char *json = "{\"x\":{\"dtype\":\"F\\u001b[31m\\n\",\"shape\":[1],"
                       "\"data_offsets\":[0,4]}}";
    unsigned long long n = strlen(json);
    fwrite(&n, 8, 1, out);
    fwrite(json, 1, n, out);
    fwrite("abcd", 1, 4, out);
    fclose(out);
    assert_int_equal(safetensors_read(path, &f, &err), -1);
    print_message("  %s\n", err.msg);
    for (const char *p = err.msg; *p; p++) assert_true((unsigned char)*p >= 0x20);
    assert_non_null(strstr(err.msg, "\\x1b"));
    unlink(path);
}

/* Writing never replaces what is not a regular file: a FIFO at the path is
 * refused and stays a FIFO. A symbolic link is followed: the file it names
 * gets the data, and the link stays a link. */
static void test_write_keeps_fifos_and_links(void **state)
{
    TensorFile f = {0}, back;
    Error err;
    struct stat st;
    float x[2] = {1, 2};
    char fifo[256], target[256], link[256];
    temp_path(fifo, sizeof fifo, "fifo");
    temp_path(target, sizeof target, "target");
    temp_path(link, sizeof link, "link");
    assert_ok(tensorfile_add_f32(&f, "x", x, 1, (int64_t[]){2}, &err));
    unlink(fifo);
    assert_ok(mkfifo(fifo, 0600));
    assert_int_equal(safetensors_write(fifo, &f, &err), -1);
    print_message("  %s\n", err.msg);
    assert_non_null(strstr(err.msg, "not a regular file"));
    assert_ok(lstat(fifo, &st));
    assert_true(S_ISFIFO(st.st_mode));
    unlink(fifo);

    unlink(target), unlink(link);
    assert_ok(safetensors_write(target, &f, &err));
    assert_ok(symlink(strrchr(target, '/') + 1, link));
    TensorFile g = {0};
    x[1] = 3;
    assert_ok(tensorfile_add_f32(&g, "x", x, 1, (int64_t[]){2}, &err));
    assert_ok(safetensors_write(link, &g, &err));
    tensorfile_free(&g);
    assert_ok(lstat(link, &st));
    assert_true(S_ISLNK(st.st_mode));
    assert_ok(safetensors_read(target, &back, &err));
    assert_true(((const float *)tensorfile_find(&back, "x")->data)[1] == 3.0f);
    tensorfile_free(&back);
    unlink(link), unlink(target);
    tensorfile_free(&f);
}

/* The temporary file of an interrupted write (killed between mkstemp and
 * rename) is removed by the next write to the same path; the new file's
 * permissions follow the umask, not mkstemp's 0600. */
static void test_write_cleans_up_and_follows_umask(void **state)
{
    TensorFile f = {0};
    Error err;
    struct stat st;
    float x[1] = {1};
    char path[256], stale[300];
    temp_path(path, sizeof path, "stale");
    snprintf(stale, sizeof stale, "%s.tmp.Ab12Cd", path);
    FILE *s = fopen(stale, "w");
    assert_non_null(s);
    fclose(s);
    assert_ok(tensorfile_add_f32(&f, "x", x, 1, (int64_t[]){1}, &err));
    mode_t old = umask(022);
    assert_ok(safetensors_write(path, &f, &err));
    assert_int_equal(access(stale, F_OK), -1);
    assert_ok(stat(path, &st));
    assert_int_equal(st.st_mode & 0777, 0644);
    umask(077);
    assert_ok(safetensors_write(path, &f, &err));
    assert_ok(stat(path, &st));
    assert_int_equal(st.st_mode & 0777, 0600);
    umask(old);
    unlink(path);
    tensorfile_free(&f);
}

/* A temporary file whose write is still under way (its writer holds a lock
 * on it, here this test) is not taken for a stale one: only the unlocked
 * one goes. */
static void test_write_keeps_a_live_writers_temp(void **state)
{
    TensorFile f = {0};
    Error err;
    float x[1] = {1};
    char path[256], live[300], stale[300];
    temp_path(path, sizeof path, "live");
    snprintf(live, sizeof live, "%s.tmp.Li12ve", path);
    snprintf(stale, sizeof stale, "%s.tmp.St12le", path);
    int held = open(live, O_CREAT | O_WRONLY, 0600);
    assert_true(held >= 0);
    assert_ok(flock(held, LOCK_EX));
    FILE *s = fopen(stale, "w");
    assert_non_null(s);
    fclose(s);
    assert_ok(tensorfile_add_f32(&f, "x", x, 1, (int64_t[]){1}, &err));
    assert_ok(safetensors_write(path, &f, &err));
    assert_int_equal(access(stale, F_OK), -1);
    assert_ok(access(live, F_OK));
    close(held);
    unlink(live);
    unlink(path);
    tensorfile_free(&f);
}

/* Two processes writing the same path at once both succeed (the last
 * rename wins), and neither removes the other's temporary file mid-write. */
static void test_concurrent_writes_to_one_path(void **state)
{
    char path[256];
    temp_path(path, sizeof path, "concurrent");
    pid_t kids[2];
    for (int k = 0; k < 2; k++) {
        kids[k] = fork();
        assert_true(kids[k] >= 0);
        if (kids[k] == 0) {
            TensorFile f = {0};
            Error err;
            float x[256];
            for (int i = 0; i < 256; i++) x[i] = (float)k;
            int failed = tensorfile_add_f32(&f, "x", x, 1, (int64_t[]){256}, &err) != 0;
            for (int i = 0; i < 40 && !failed; i++)
                if (safetensors_write(path, &f, &err) != 0) {
                    fprintf(stderr, "writer %d, write %d: %s\n", k, i, err.msg);
                    failed = 1;
                }
            tensorfile_free(&f);
            _exit(failed);
        }
    }
    for (int k = 0; k < 2; k++) {
        int status;
        assert_int_equal(waitpid(kids[k], &status, 0), kids[k]);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
    TensorFile back;
    Error err;
    assert_ok(safetensors_read(path, &back, &err));
    const Tensor *t = tensorfile_find(&back, "x");
    assert_non_null(t);
    assert_int_equal(tensor_numel(t), 256);
    const float *x = (const float *)t->data;
    for (int i = 0; i < 256; i++) assert_true(x[i] == x[0]);
    tensorfile_free(&back);
    unlink(path);
}

/* TextOut: the text reaches the file only at commit, whole; a discarded one
 * and one whose folder is missing write nothing. */
static void test_text_out(void **state)
{
    TextOut out;
    Error err;
    char path[256];
    temp_path(path, sizeof path, "textout");
    assert_ok(text_out_open(&out, &err));
    fprintf(out.f, "# header\n");
    for (int i = 0; i < 3; i++) fprintf(out.f, "%d %.1f\n", i, i / 2.0);
    assert_int_equal(access(path, F_OK), -1);
    assert_ok(text_out_commit(&out, path, &err));
    char back[64] = {0};
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t n = fread(back, 1, sizeof back - 1, f);
    fclose(f);
    assert_int_equal(n, strlen("# header\n0 0.0\n1 0.5\n2 1.0\n"));
    assert_string_equal(back, "# header\n0 0.0\n1 0.5\n2 1.0\n");
    unlink(path);

    assert_ok(text_out_open(&out, &err));
    fprintf(out.f, "never written\n");
    text_out_discard(&out);
    assert_int_equal(access(path, F_OK), -1);

    assert_ok(text_out_open(&out, &err));
    fprintf(out.f, "x\n");
    assert_int_equal(text_out_commit(&out, "build/no_such_folder/x.dat", &err), -1);
    print_message("  %s\n", err.msg);
    assert_non_null(strstr(err.msg, "build/no_such_folder/x.dat: No such file or directory"));
}

/* ------------------------------------------------------------------------ */
/* safetensors: malformed files                                              */
/* ------------------------------------------------------------------------ */

/* Writes an 8-byte length (taken from `declared`, or the JSON's real length
 * when declared < 0), the JSON, then `data_bytes` bytes of data. */
static void write_raw(const char *path, long long declared, const char *json, size_t data_bytes)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    uint64_t len = declared < 0 ? strlen(json) : (uint64_t)declared;
    unsigned char bytes[8];
    for (int i = 0; i < 8; i++) bytes[i] = (unsigned char)(len >> (8 * i));
    fwrite(bytes, 1, 8, f);
    fwrite(json, 1, strlen(json), f);
    for (size_t i = 0; i < data_bytes; i++) fputc(0, f);
    fclose(f);
}

typedef struct {
    const char *name;
    long long declared;     /* header length to declare; -1: the true one */
    const char *json;
    size_t data_bytes;
    const char *expect;     /* a phrase the error must contain */
} Malformed;

static const Malformed MALFORMED[] = {
    {"huge_header_length", 1LL << 60, "{}", 0, "above the 100 MB limit"},
    {"header_past_end", 4096, "{\"x\":{}}", 0, "runs past the end"},
    {"bad_json", -1, "{\"x\": {\"dtype\": \"F32\",", 0, "not valid JSON"},
    {"json_not_object", -1, "[1, 2, 3]", 0, "not a JSON object"},
    {"trailing_garbage", -1, "{}xyz", 0, "unexpected bytes after"},
    {"unknown_dtype", -1, "{\"x\":{\"dtype\":\"F8_E4M3\",\"shape\":[2],\"data_offsets\":[0,2]}}",
     2, "unsupported dtype 'F8_E4M3'"},
    {"shape_size_disagree", -1,
     "{\"x\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,20]}}", 20,
     "need 24 bytes but data_offsets give 20"},
    {"offsets_outside_file", -1,
     "{\"x\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 8, "lie outside"},
    {"offsets_reversed", -1,
     "{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,4]}}", 8, "begin <= end"},
    {"overlapping", -1,
     "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
     "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, "overlaps"},
    {"gap_between", -1,
     "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
     "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", 12, "gap of 4"},
    {"trailing_data", -1, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 9,
     "belong to no tensor"},
    {"negative_shape", -1, "{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,0]}}",
     0, "not a non-negative integer"},
    {"fractional_shape", -1,
     "{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4,
     "not a non-negative integer"},
    {"missing_offsets", -1, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, "data_offsets"},
    {"missing_dtype", -1, "{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "dtype"},
    {"entry_not_object", -1, "{\"a\":5}", 0, "not an object"},
    {"metadata_not_strings", -1, "{\"__metadata__\":{\"atol\":1e-5}}", 0, "not a string"},
    {"duplicate_name", -1,
     "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
     "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "appears twice"},
    {"rank_too_high", -1,
     "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
     "rank 9"},
    {"shape_overflows", -1,
     "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}",
     4, "too large"},
};

static void expect_read_error(const char *path, const char *phrase)
{
    TensorFile f;
    Error err = {{0}};
    int rc = safetensors_read(path, &f, &err);
    print_message("  %s\n", err.msg);
    assert_int_equal(rc, -1);
    assert_non_null(strstr(err.msg, path));   /* the message names the file */
    if (!strstr(err.msg, phrase)) {
        print_error("expected the error to mention '%s'\n", phrase);
        fail();
    }
    /* The reader leaves an empty TensorFile: freeing it again is harmless. */
    assert_int_equal(f.n_tensors, 0);
    tensorfile_free(&f);
}

/* case_dispatch: an info.* key is read by nobody and accepted; any other key
 * the op does not list is refused with the options it knows, and an op the
 * chapter does not have is refused with the chapter's ops. */
static void test_case_metadata_keys(void **state)
{
    TensorFile f, out = {0};
    Error err;
    load_golden(&f, CHAPTER, "matmul_nt_16x16x16");
    assert_ok(tensorfile_set_meta(&f, "info.where", "a note", &err));
    assert_ok(foundations_case_eval(&f, &out, &err));
    tensorfile_free(&out);
    assert_ok(tensorfile_set_meta(&f, "alpha", "2", &err));
    assert_case_refused(foundations_case_eval, &f,
                        "metadata 'alpha' is not an option of op 'matmul_nt' (its options: none)");
    assert_ok(tensorfile_set_meta(&f, "op", "matmul", &err));
    assert_case_refused(foundations_case_eval, &f,
                        "op 'matmul' is not a chapter 00 op (matmul_nt, matmul_nn, matmul_tn, "
                        "linear, linear_backward, softmax, softmax_backward, rng_stream)");
    tensorfile_free(&f);

    load_golden(&f, CHAPTER, "rng_seed7_stream3");
    assert_ok(tensorfile_set_meta(&f, "rng_sede", "7", &err));
    assert_case_refused(foundations_case_eval, &f,
                        "metadata 'rng_sede' is not an option of op 'rng_stream' (its options: "
                        "rng_seed rng_stream count)");
    tensorfile_free(&f);
}

/* case_dispatch reads each option against the op's table: its type, its
 * range, its default when the case leaves it out, one wording for all. */
static void test_case_option_table(void **state)
{
    TensorFile f, out = {0};
    Error err;
    load_golden(&f, CHAPTER, "rng_seed7_stream3");
    assert_ok(tensorfile_set_meta(&f, "count", "many", &err));
    assert_case_refused(foundations_case_eval, &f, "metadata count is many, expected an integer "
                        "(the number of draws of each kind)");
    assert_ok(tensorfile_set_meta(&f, "count", "-1", &err));
    assert_case_refused(foundations_case_eval, &f, "metadata count is -1, outside "
                        "[0, 16777216] (the number of draws of each kind)");
    assert_ok(tensorfile_set_meta(&f, "count", "16777217", &err));
    assert_case_refused(foundations_case_eval, &f, "outside [0, 16777216]");
    /* Left out (renamed to a note), count takes its default: 16 draws. */
    for (int i = 0; i < f.n_meta; i++) {
        if (strcmp(f.meta_keys[i], "count") != 0) continue;
        free(f.meta_keys[i]);
        f.meta_keys[i] = strdup("info.count");
    }
    assert_ok(foundations_case_eval(&f, &out, &err));
    assert_int_equal(tensorfile_find(&out, "u32")->shape[0], 16);
    tensorfile_free(&out);
    tensorfile_free(&f);
}

static void test_malformed(void **state)
{
    const Malformed *m = *state;
    char path[256];
    temp_path(path, sizeof path, m->name);
    write_raw(path, m->declared, m->json, m->data_bytes);
    expect_read_error(path, m->expect);
    unlink(path);
}

static void test_empty_file(void **state)
{
    char path[256];
    temp_path(path, sizeof path, "empty");
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fclose(f);
    expect_read_error(path, "too short for the 8-byte header length");
    unlink(path);
}

/* Every prefix of a valid file is refused without a crash. */
static void test_truncated_everywhere(void **state)
{
    FILE *src = fopen("golden/00_foundations/softmax_normal_4x7.safetensors", "rb");
    if (!src) {
        print_error("cannot open the softmax golden (run make golden)\n");
        fail();
    }
    unsigned char buf[4096];
    size_t n = fread(buf, 1, sizeof buf, src);
    fclose(src);
    assert_true(n > 100 && n < sizeof buf);
    char path[256];
    temp_path(path, sizeof path, "truncated");
    for (size_t cut = 0; cut < n; cut++) {
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        fwrite(buf, 1, cut, f);
        fclose(f);
        TensorFile tf;
        Error err;
        if (safetensors_read(path, &tf, &err) == 0) {
            print_error("a file cut to %zu of %zu bytes was accepted\n", cut, n);
            fail();
        }
    }
    unlink(path);
}

static void test_missing_file(void **state)
{
    expect_read_error("build/does_not_exist.safetensors", "No such file");
}

/* Reading a tensor of the wrong dtype or rank, or bad metadata, is an error
 * that names the file and the tensor or key. */
static void test_typed_access_errors(void **state)
{
    TensorFile f;
    Error err;
    const Tensor *t;
    load_golden(&f, CHAPTER, "dtypes");
    assert_int_equal(tensorfile_get(&f, "i64", DTYPE_F32, -1, &t, &err), -1);
    assert_non_null(strstr(err.msg, "'i64' has dtype I64, expected F32"));
    assert_int_equal(tensorfile_get(&f, "f32", DTYPE_F32, 2, &t, &err), -1);
    assert_non_null(strstr(err.msg, "rank 3, expected 2"));
    assert_int_equal(tensorfile_get(&f, "nope", DTYPE_F32, -1, &t, &err), -1);
    assert_non_null(strstr(err.msg, "'nope' is missing"));
    double d;
    assert_int_equal(tensorfile_meta_double(&f, "note", 0, &d, &err), -1);
    assert_non_null(strstr(err.msg, "expected a number"));
    assert_ok(tensorfile_meta_double(&f, "absent", 2.5, &d, &err));
    assert_true(d == 2.5);
    int b;
    assert_int_equal(tensorfile_meta_bool(&f, "note", 0, &b, &err), -1);
    assert_non_null(strstr(err.msg, "golden/00_foundations/dtypes.safetensors"));
    tensorfile_free(&f);
}

/* ------------------------------------------------------------------------ */

/* Sizes from input never wrap: products past SIZE_LIMIT (2^48) and negative
 * factors fail, and tensor_alloc refuses such a shape with one line. */
static void test_checked_sizes(void **state)
{
    (void)state;
    int64_t out = -7, big = (int64_t)1 << 24;
    assert_ok(size_mul(&out, big, big));
    assert_true(out == SIZE_LIMIT);
    assert_int_equal(size_mul(&out, big + 1, big), -1);
    assert_int_equal(size_mul(&out, -1, 3), -1);
    assert_int_equal(size_mul(&out, 0, INT64_MAX), -1);       /* a factor past the limit */
    assert_ok(size_mul(&out, 0, SIZE_LIMIT));
    assert_true(out == 0);
    const int64_t wraps[3] = {(int64_t)1 << 31, (int64_t)1 << 31, (int64_t)1 << 31};
    assert_int_equal(size_product(&out, 3, wraps), -1);
    const int64_t fine[3] = {2, 3, 4};
    assert_ok(size_product(&out, 3, fine));
    assert_true(out == 24);
    assert_ok(size_product(&out, 0, fine));          /* a scalar */
    assert_true(out == 1);
    Tensor t;
    Error err;
    const int64_t huge[2] = {(int64_t)1 << 40, (int64_t)1 << 8};   /* 2^48 floats: 2^50 bytes */
    assert_int_equal(tensor_alloc(&t, DTYPE_F32, 2, huge, &err), -1);
    assert_non_null(strstr(err.msg, "tensor shape (1099511627776, 256) is negative or too large"));
    assert_null(t.data);
}

/* cJSON 1.7.15-1.7.17 read one byte past the length they are given when the
 * text ends inside an object, as in {"1":1, (upstream issue 800; fixed in
 * 1.7.18 and in Debian's patched 1.7.15). The reader keeps a NUL after the
 * file's last byte against it; this test says whether the installed library
 * has the bug, by parsing the text at the very end of a readable page that
 * an unreadable one follows, in a child process that such a read kills. */
static void test_cjson_reads_within_its_length(void **state)
{
    (void)state;
    static const char text[] = "{\"1\":1,";
    size_t n = sizeof text - 1, page = (size_t)sysconf(_SC_PAGESIZE);
    char *pages = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                       -1, 0);
    assert_true(pages != MAP_FAILED);
    assert_ok(mprotect(pages + page, page, PROT_NONE));
    memcpy(pages + page - n, text, n);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        cJSON *json = cJSON_ParseWithLength(pages + page - n, n);
        _exit(json == NULL ? 0 : 1);          /* invalid JSON: NULL */
    }
    int status;
    assert_int_equal(waitpid(child, &status, 0), child);
    munmap(pages, 2 * page);
    if (WIFSIGNALED(status))
        fail_msg("the installed cJSON (%s) reads past the end of the text it is given "
                 "(upstream issue 800): install 1.7.18 or later, or a distribution build "
                 "with the fix", cJSON_Version());
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* The malformed-input corpus of this chapter (tests/malformed/00_foundations/): each
 * file gets a one-line error naming it, and no output appears. */
static int read_container(const char *path, const char *out_path, Error *err)
{
    TensorFile f;
    (void)out_path;
    if (safetensors_read(path, &f, err) != 0) return -1;
    tensorfile_free(&f);
    return 0;
}

static void test_malformed_corpus(void **state)
{
    (void)state;
    check_malformed_corpus("00_foundations", read_container, 30);
}

int main(void)
{
    /* Not static: MALFORMED[i].name is read at run time (C has no constant
     * expression for it, and clang says so). */
    const struct CMUnitTest tests[] = {
        GOLDEN_TEST(test_matmul_case, "matmul_nt_1x1x1"),
        GOLDEN_TEST(test_matmul_case, "matmul_nt_3x5x4"),
        GOLDEN_TEST(test_matmul_case, "matmul_nt_7x2x9"),
        GOLDEN_TEST(test_matmul_case, "matmul_nt_16x16x16"),
        GOLDEN_TEST(test_matmul_case, "matmul_nt_33x17x65"),
        GOLDEN_TEST(test_matmul_case, "matmul_nt_64x96x80"),
        GOLDEN_TEST(test_matmul_case, "matmul_nt_2x128x256"),
        GOLDEN_TEST(test_matmul_case, "matmul_nt_5x1x300"),
        GOLDEN_TEST(test_matmul_case, "matmul_nt_301x260x270"),
        GOLDEN_TEST(test_matmul_case, "matmul_nt_7x2100x9"),
        GOLDEN_TEST(test_matmul_case, "matmul_nn_1x1x1"),
        GOLDEN_TEST(test_matmul_case, "matmul_nn_3x5x4"),
        GOLDEN_TEST(test_matmul_case, "matmul_nn_7x2x9"),
        GOLDEN_TEST(test_matmul_case, "matmul_nn_16x16x16"),
        GOLDEN_TEST(test_matmul_case, "matmul_nn_33x17x65"),
        GOLDEN_TEST(test_matmul_case, "matmul_nn_64x96x80"),
        GOLDEN_TEST(test_matmul_case, "matmul_nn_2x128x256"),
        GOLDEN_TEST(test_matmul_case, "matmul_nn_5x1x300"),
        GOLDEN_TEST(test_matmul_case, "matmul_nn_301x260x270"),
        GOLDEN_TEST(test_matmul_case, "matmul_nn_7x2100x9"),
        GOLDEN_TEST(test_matmul_case, "matmul_tn_1x1x1"),
        GOLDEN_TEST(test_matmul_case, "matmul_tn_3x5x4"),
        GOLDEN_TEST(test_matmul_case, "matmul_tn_7x2x9"),
        GOLDEN_TEST(test_matmul_case, "matmul_tn_16x16x16"),
        GOLDEN_TEST(test_matmul_case, "matmul_tn_33x17x65"),
        GOLDEN_TEST(test_matmul_case, "matmul_tn_64x96x80"),
        GOLDEN_TEST(test_matmul_case, "matmul_tn_2x128x256"),
        GOLDEN_TEST(test_matmul_case, "matmul_tn_5x1x300"),
        GOLDEN_TEST(test_matmul_case, "matmul_tn_301x260x270"),
        GOLDEN_TEST(test_matmul_case, "matmul_tn_7x2100x9"),
        cmocka_unit_test(test_matmul_accumulates),
        GOLDEN_TEST(test_linear_case, "linear_1x1x1"),
        GOLDEN_TEST(test_linear_case, "linear_5x8x3"),
        GOLDEN_TEST(test_linear_case, "linear_32x64x48"),
        GOLDEN_TEST(test_linear_case, "linear_7x20x9_nobias"),
        GOLDEN_TEST(test_linear_case, "linear_128x32x64"),
        GOLDEN_TEST(test_linear_case, "linear_backward_1x1x1"),
        GOLDEN_TEST(test_linear_case, "linear_backward_5x8x3"),
        GOLDEN_TEST(test_linear_case, "linear_backward_32x64x48"),
        GOLDEN_TEST(test_linear_case, "linear_backward_7x20x9_nobias"),
        GOLDEN_TEST(test_linear_case, "linear_backward_128x32x64"),
        cmocka_unit_test(test_matmul_thread_count_independent),
        cmocka_unit_test(test_matmul_blocks_of_k_thread_count_independent),
        cmocka_unit_test(test_linear_backward_thread_count_independent),
        cmocka_unit_test(test_softmax_exp_accuracy),
        cmocka_unit_test(test_flush_subnormals),

        GOLDEN_TEST(test_softmax_case, "softmax_normal_4x7"),
        GOLDEN_TEST(test_softmax_case, "softmax_normal_1x1"),
        GOLDEN_TEST(test_softmax_case, "softmax_normal_16x513"),
        GOLDEN_TEST(test_softmax_case, "softmax_large_5x9"),
        GOLDEN_TEST(test_softmax_case, "softmax_masked_8x12"),
        GOLDEN_TEST(test_softmax_case, "softmax_peaked_6x10"),
        GOLDEN_TEST(test_softmax_case, "softmax_backward_normal_4x7"),
        GOLDEN_TEST(test_softmax_case, "softmax_backward_normal_1x1"),
        GOLDEN_TEST(test_softmax_case, "softmax_backward_normal_16x513"),
        GOLDEN_TEST(test_softmax_case, "softmax_backward_large_5x9"),
        GOLDEN_TEST(test_softmax_case, "softmax_backward_masked_8x12"),
        GOLDEN_TEST(test_softmax_case, "softmax_backward_peaked_6x10"),
        cmocka_unit_test(test_softmax_all_masked_row_is_zero),

        GOLDEN_TEST(test_rng_case, "rng_seed42"),
        GOLDEN_TEST(test_rng_case, "rng_seed7_stream3"),
        cmocka_unit_test(test_philox_known_answers),
        cmocka_unit_test(test_error_escapes_control_characters),
        cmocka_unit_test(test_rng_statistics),

        cmocka_unit_test(test_read_pytorch_file),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_checksums),
        cmocka_unit_test(test_shipped_models_refuse_flips),
        cmocka_unit_test(test_write_failure_leaves_nothing),
        cmocka_unit_test(test_write_keeps_fifos_and_links),
        cmocka_unit_test(test_write_cleans_up_and_follows_umask),
        cmocka_unit_test(test_write_keeps_a_live_writers_temp),
        cmocka_unit_test(test_concurrent_writes_to_one_path),
        cmocka_unit_test(test_text_out),
        cmocka_unit_test(test_empty_file),
        cmocka_unit_test(test_truncated_everywhere),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_typed_access_errors),
#define MALFORMED_TEST(i) {MALFORMED[i].name, test_malformed, NULL, NULL, (void *)&MALFORMED[i]}
        MALFORMED_TEST(0), MALFORMED_TEST(1), MALFORMED_TEST(2), MALFORMED_TEST(3),
        MALFORMED_TEST(4), MALFORMED_TEST(5), MALFORMED_TEST(6), MALFORMED_TEST(7),
        MALFORMED_TEST(8), MALFORMED_TEST(9), MALFORMED_TEST(10), MALFORMED_TEST(11),
        MALFORMED_TEST(12), MALFORMED_TEST(13), MALFORMED_TEST(14), MALFORMED_TEST(15),
        MALFORMED_TEST(16), MALFORMED_TEST(17), MALFORMED_TEST(18), MALFORMED_TEST(19),
        MALFORMED_TEST(20),
        cmocka_unit_test(test_checked_sizes),
        cmocka_unit_test(test_cjson_reads_within_its_length),
        cmocka_unit_test(test_malformed_corpus),
        cmocka_unit_test(test_case_metadata_keys),
        cmocka_unit_test(test_case_option_table),
    };
    return run_chapter_tests("chapter 00: foundations", tests);
}
