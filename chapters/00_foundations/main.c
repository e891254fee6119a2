/*
 * main.c - the chapter 00 program.
 *
 *     build/00_foundations --demo
 *     build/00_foundations --case in.safetensors --out out.safetensors
 *     build/00_foundations --bench FORM:MxNxK ...
 *
 * The demo multiplies two small matrices in all three forms, shows softmax
 * surviving huge and -inf inputs, and draws a few random numbers. The case
 * mode evaluates the ops of this chapter (see reference/ch00_foundations.py):
 *
 *     matmul_nt, matmul_nn, matmul_tn   a, b -> c
 *     linear                            input, weight, bias (optional) -> output
 *     linear_backward                   + grad_output -> grad_input, grad_weight, grad_bias
 *     softmax                           input -> output
 *     softmax_backward                  output, grad_output -> grad_input
 *     rng_stream                        (metadata rng_seed, rng_stream, count)
 *                                       -> u32, uniform, normal, below10
 *
 * The bench mode times matmul_nn, matmul_nt or matmul_tn (FORM nn, nt, tn)
 * on each shape given, with the threads OpenMP is given, and prints one
 * JSON line per shape with the best of several runs in GFLOP/s (2 M N K
 * floating-point operations per product): the C half of the matrix-product
 * table of `make bench` (reference/bench.py).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "casefile.h"
#include "matmul.h"
#include "rng.h"
#include "softmax.h"
#include "threads.h"

static const char USAGE[] =
    "usage: 00_foundations --demo\n"
    "       00_foundations --case IN.safetensors --out OUT.safetensors\n"
    "       00_foundations --bench FORM:MxNxK ...   (FORM nn, nt or tn; e.g. nt:2720x128x64)\n";

static int demo(void)
{
    /* x (2, 3) times a weight W (4, 3) stored [out, in] as nn.Linear does. */
    float x[2 * 3] = {1, 2, 3, 4, 5, 6};
    float W[4 * 3] = {1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1};
    float y[2 * 4], dx[2 * 3], dW[4 * 3];
    matrix_print("x", x, 2, 3);
    matrix_print("W", W, 4, 3);
    if (matmul_nt(y, x, W, 2, 4, 3, 0) != 0) return -1;
    matrix_print("y = x W^T (matmul_nt)", y, 2, 4);
    /* Pretend the upstream gradient is y itself. */
    if (matmul_nn(dx, y, W, 2, 3, 4, 0) != 0) return -1;
    matrix_print("dx = dy W (matmul_nn)", dx, 2, 3);
    if (matmul_tn(dW, y, x, 4, 3, 2, 0) != 0) return -1;
    matrix_print("dW = dy^T x (matmul_tn)", dW, 4, 3);

    float logits[3 * 4] = {1, 2, 3, 4, 1000, 1001, 1002, 1003, 0, -INFINITY, 0, -INFINITY};
    float probs[3 * 4];
    if (softmax_forward(probs, logits, 3, 4) != 0) return -1;
    matrix_print("softmax rows: [1 2 3 4], [1000 .. 1003] (no overflow), [0 -inf 0 -inf]",
                 probs, 3, 4);

    Rng rng;
    rng_seed(&rng, 42, 0);
    printf("PCG32, seed 42: u32 %u, uniform %.6f, normal %.6f, below(10) %u\n",
           rng_u32(&rng), rng_uniform(&rng), rng_normal(&rng), rng_below(&rng, 10));
    return 0;
}

/* Reads the F32 tensor `name` and checks it has the given shape. */
static int get_matrix(const TensorFile *in, const char *name, int64_t rows, int64_t cols,
                      const float **out, Error *err)
{
    const Tensor *t;
    if (tensorfile_get(in, name, DTYPE_F32, 2, &t, err) != 0) return -1;
    if (t->shape[0] != rows || t->shape[1] != cols)
        return error_set(err, "%s: tensor '%s' has shape (%lld, %lld), expected (%lld, %lld)",
                         in->path, name, (long long)t->shape[0], (long long)t->shape[1],
                         (long long)rows, (long long)cols);
    *out = t->data;
    return 0;
}

static int eval_matmul(const char *op, const TensorFile *in, TensorFile *out, Error *err)
{
    const Tensor *a, *b;
    if (tensorfile_get(in, "a", DTYPE_F32, 2, &a, err) != 0 ||
        tensorfile_get(in, "b", DTYPE_F32, 2, &b, err) != 0)
        return -1;
    int transpose_a = strcmp(op, "matmul_tn") == 0, transpose_b = strcmp(op, "matmul_nt") == 0;
    int64_t M = a->shape[transpose_a ? 1 : 0], K = a->shape[transpose_a ? 0 : 1];
    int64_t N = b->shape[transpose_b ? 0 : 1], Kb = b->shape[transpose_b ? 1 : 0];
    if (K != Kb)
        return error_set(err, "%s: %s needs matching inner dimensions, got %lld and %lld",
                         in->path, op, (long long)K, (long long)Kb);
    float *c = case_output_f32(out, "c", 2, (int64_t[]){M, N}, err);
    if (!c) return -1;
    int rc = transpose_a   ? matmul_tn(c, a->data, b->data, M, N, K, 0)
             : transpose_b ? matmul_nt(c, a->data, b->data, M, N, K, 0)
                           : matmul_nn(c, a->data, b->data, M, N, K, 0);
    return rc == 0 ? 0 : error_set(err, "%s failed", op);
}

static int eval_linear(const char *op, const TensorFile *in, TensorFile *out, Error *err)
{
    int backward = strcmp(op, "linear_backward") == 0;
    const Tensor *x, *w;
    if (tensorfile_get(in, "input", DTYPE_F32, 2, &x, err) != 0 ||
        tensorfile_get(in, "weight", DTYPE_F32, 2, &w, err) != 0)
        return -1;
    int64_t M = x->shape[0], K = x->shape[1], N = w->shape[0];
    if (w->shape[1] != K)
        return error_set(err, "%s: weight has %lld input features, input has %lld", in->path,
                         (long long)w->shape[1], (long long)K);
    const float *bias = NULL, *dy = NULL;
    const Tensor *b = tensorfile_find(in, "bias");
    if (b) {
        if (b->dtype != DTYPE_F32 || b->ndim != 1 || b->shape[0] != N)
            return error_set(err, "%s: bias must be F32 of shape (%lld)", in->path, (long long)N);
        bias = b->data;
    }
    if (backward && get_matrix(in, "grad_output", M, N, &dy, err) != 0) return -1;

    float *y = case_output_f32(out, "output", 2, (int64_t[]){M, N}, err);
    if (!y) return -1;
    if (linear_forward(y, x->data, w->data, bias, M, K, N) != 0)
        return error_set(err, "linear_forward failed");
    if (!backward) return 0;
    float *dx = case_output_f32(out, "grad_input", 2, x->shape, err);
    float *dw = case_output_f32(out, "grad_weight", 2, w->shape, err);
    float *db = bias ? case_output_f32(out, "grad_bias", 1, b->shape, err) : NULL;
    if (!dx || !dw || (bias && !db)) return -1;
    if (linear_backward(dx, dw, db, dy, x->data, w->data, M, K, N) != 0)
        return error_set(err, "linear_backward failed");
    return 0;
}

static int eval_softmax(const char *op, const TensorFile *in, TensorFile *out, Error *err)
{
    int backward = strcmp(op, "softmax_backward") == 0;
    const Tensor *x;
    if (tensorfile_get(in, backward ? "output" : "input", DTYPE_F32, 2, &x, err) != 0) return -1;
    int64_t rows = x->shape[0], cols = x->shape[1];
    const float *dy = NULL;
    if (backward && get_matrix(in, "grad_output", rows, cols, &dy, err) != 0) return -1;

    float *result = case_output_f32(out, backward ? "grad_input" : "output", 2, x->shape, err);
    if (!result) return -1;
    int rc = backward ? softmax_backward(result, x->data, dy, rows, cols)
                      : softmax_forward(result, x->data, rows, cols);
    return rc == 0 ? 0 : error_set(err, "%s failed", op);
}

static int eval_rng(const TensorFile *in, TensorFile *out, Error *err)
{
    long long seed, stream, count;
    if (tensorfile_meta_int(in, "rng_seed", 0, &seed, err) != 0 ||
        tensorfile_meta_int(in, "rng_stream", 0, &stream, err) != 0 ||
        tensorfile_meta_int(in, "count", 16, &count, err) != 0)
        return -1;
    if (count < 0 || count > 1 << 24)
        return error_set(err, "%s: metadata count %lld is outside 0..2^24", in->path, count);
    Tensor t[4];
    const char *names[4] = {"u32", "uniform", "normal", "below10"};
    DType dtypes[4] = {DTYPE_I64, DTYPE_F32, DTYPE_F32, DTYPE_I64};
    for (int i = 0; i < 4; i++) {
        if (tensor_alloc(&t[i], dtypes[i], 1, (int64_t[]){count}, err) != 0) {
            while (i-- > 0) tensor_free(&t[i]);
            return -1;
        }
    }
    /* The draws come in the same order as reference/rng.py makes them. */
    Rng rng;
    rng_seed(&rng, (uint64_t)seed, (uint64_t)stream);
    for (long long i = 0; i < count; i++) ((int64_t *)t[0].data)[i] = rng_u32(&rng);
    for (long long i = 0; i < count; i++) ((float *)t[1].data)[i] = rng_uniform(&rng);
    for (long long i = 0; i < count; i++) ((float *)t[2].data)[i] = rng_normal(&rng);
    for (long long i = 0; i < count; i++) ((int64_t *)t[3].data)[i] = rng_below(&rng, 10);
    int rc = 0;
    for (int i = 0; i < 4; i++) {
        if (rc == 0) rc = tensorfile_add(out, names[i], &t[i], err);
        tensor_free(&t[i]);   /* no-op once added: the file owns the data */
    }
    return rc;
}

static int eval_case(const TensorFile *in, TensorFile *out, Error *err)
{
    const char *op = tensorfile_meta(in, "op");
    if (!op) return error_set(err, "%s: metadata 'op' is missing", in->path);
    if (!strcmp(op, "matmul_nt") || !strcmp(op, "matmul_nn") || !strcmp(op, "matmul_tn"))
        return eval_matmul(op, in, out, err);
    if (!strcmp(op, "linear") || !strcmp(op, "linear_backward"))
        return eval_linear(op, in, out, err);
    if (!strcmp(op, "softmax") || !strcmp(op, "softmax_backward"))
        return eval_softmax(op, in, out, err);
    if (!strcmp(op, "rng_stream")) return eval_rng(in, out, err);
    return error_set(err, "%s: op '%s' is not a chapter 00 op (matmul_nt, matmul_nn, "
                     "matmul_tn, linear, linear_backward, softmax, softmax_backward, rng_stream)", in->path, op);
}

/* Times one product `spec` (FORM:MxNxK); prints its JSON line. */
static int bench_matmul(const char *spec)
{
    char form[3] = {0};
    int M, N, K, used = 0;
    if (sscanf(spec, "%2[a-z]:%dx%dx%d%n", form, &M, &N, &K, &used) != 4 ||
        spec[used] != '\0' || (strcmp(form, "nn") && strcmp(form, "nt") && strcmp(form, "tn")) ||
        M < 1 || N < 1 || K < 1 || (double)M * K > 1e8 || (double)K * N > 1e8 ||
        (double)M * N > 1e8) {
        fprintf(stderr, "00_foundations --bench: '%s' is not FORM:MxNxK with FORM nn, nt or tn "
                        "and each matrix at most 1e8 values\n", spec);
        return -1;
    }
    int (*product)(float *, const float *, const float *, int, int, int, int) =
        !strcmp(form, "nn") ? matmul_nn : !strcmp(form, "nt") ? matmul_nt : matmul_tn;
    float *a = malloc((size_t)M * K * sizeof *a), *b = malloc((size_t)K * N * sizeof *b);
    float *c = malloc((size_t)M * N * sizeof *c);
    if (!a || !b || !c) {
        free(a), free(b), free(c);
        fprintf(stderr, "00_foundations --bench: out of memory for %s\n", spec);
        return -1;
    }
    Rng rng;
    rng_seed(&rng, 0, 0);
    for (size_t i = 0; i < (size_t)M * K; i++) a[i] = rng_uniform(&rng) - 0.5f;
    for (size_t i = 0; i < (size_t)K * N; i++) b[i] = rng_uniform(&rng) - 0.5f;
    /* Runs of about 20 ms; the best of 15 (a busy neighbour only slows a run). */
    double flop = 2.0 * M * N * K, best = INFINITY;
    int reps = (int)(4e8 / flop) + 1, rc = 0;
    for (int run = -1; run < 15 && rc == 0; run++) {
        double started = time_now();
        for (int r = 0; r < reps && rc == 0; r++) rc = product(c, a, b, M, N, K, 0);
        double t = (time_now() - started) / reps;
        if (run >= 0 && t < best) best = t;               /* run -1 warms up */
    }
    if (rc == 0)
        printf("{\"form\": \"%s\", \"M\": %d, \"N\": %d, \"K\": %d, \"gflops\": %.2f}\n",
               form, M, N, K, flop / best * 1e-9);
    free(a), free(b), free(c);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "--bench") == 0) {
        if (argc == 2) {
            fprintf(stderr, "%s", USAGE);
            return 2;
        }
        for (int i = 2; i < argc; i++)
            if (bench_matmul(argv[i]) != 0) return 1;
        return 0;
    }
    return case_main(argc, argv, USAGE, demo, eval_case);
}
