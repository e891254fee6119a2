/*
 * 00_foundations.c - the chapter 00 program.
 *
 *     build/00_foundations --demo
 *     build/00_foundations --case in.safetensors --out out.safetensors
 *     build/00_foundations --bench FORM:MxNxK ...
 *
 * The demo multiplies two small matrices in all three forms, shows softmax
 * surviving huge and -inf inputs, and draws a few random numbers. The case
 * mode evaluates the ops of this chapter: matmul_nt, matmul_nn, matmul_tn,
 * linear, linear_backward, softmax, softmax_backward and rng_stream (see
 * cases/foundations_case.h for their tensors, reference/ch00_foundations.py for
 * the cases).
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
#include "foundations_case.h"
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
    return case_main(argc, argv, USAGE, demo, foundations_case_eval);
}
