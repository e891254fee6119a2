/*
 * matmul.c - see matmul.h for the three forms and when each is used.
 *
 * Plain loops, ordered so that the innermost loop walks memory contiguously:
 * the dot product of two rows for matmul_nt, a row of B scaled into a row of
 * C for matmul_nn and matmul_tn. The compiler vectorises the latter two.
 * Letters: C is (M, N); K is the summed dimension.
 */
#include "matmul.h"

#include "error.h"   /* not_implemented(), used by the exercise stubs */

#include <string.h>

int matmul_nt(float *C, const float *A, const float *B, int M, int N, int K, int accumulate)
{
    /* BEGIN SOLUTION */
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < M; i++) {
        const float *a = A + (size_t)i * K;          /* row i of A, (K,) */
        for (int j = 0; j < N; j++) {
            const float *b = B + (size_t)j * K;      /* row j of B, (K,) */
            float sum = 0.0f;
            for (int k = 0; k < K; k++) sum += a[k] * b[k];
            float *c = &C[(size_t)i * N + j];
            *c = accumulate ? *c + sum : sum;
        }
    }
    return 0;
    /* END SOLUTION */
}

int matmul_nn(float *C, const float *A, const float *B, int M, int N, int K, int accumulate)
{
    /* BEGIN SOLUTION */
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < M; i++) {
        float *c = C + (size_t)i * N;                /* row i of C, (N,) */
        if (!accumulate) memset(c, 0, (size_t)N * sizeof *c);
        for (int k = 0; k < K; k++) {
            float a = A[(size_t)i * K + k];
            const float *b = B + (size_t)k * N;      /* row k of B, (N,) */
            for (int j = 0; j < N; j++) c[j] += a * b[j];
        }
    }
    return 0;
    /* END SOLUTION */
}

int matmul_tn(float *C, const float *A, const float *B, int M, int N, int K, int accumulate)
{
    /* BEGIN SOLUTION */
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < M; i++) {
        float *c = C + (size_t)i * N;                /* row i of C, (N,) */
        if (!accumulate) memset(c, 0, (size_t)N * sizeof *c);
        for (int k = 0; k < K; k++) {
            float a = A[(size_t)k * M + i];          /* A^T[i, k] */
            const float *b = B + (size_t)k * N;      /* row k of B, (N,) */
            for (int j = 0; j < N; j++) c[j] += a * b[j];
        }
    }
    return 0;
    /* END SOLUTION */
}

int linear_forward(float *out, const float *x, const float *weight, const float *bias,
                   int M, int K, int N)
{
    /* BEGIN SOLUTION */
    if (matmul_nt(out, x, weight, M, N, K, 0) != 0) return -1;
    if (bias) {
        #pragma omp parallel for schedule(static)
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) out[(size_t)i * N + j] += bias[j];
    }
    return 0;
    /* END SOLUTION */
}

int linear_backward(float *dx, float *dweight, float *dbias, const float *dout,
                    const float *x, const float *weight, int M, int K, int N)
{
    /* BEGIN SOLUTION */
    if (dx && matmul_nn(dx, dout, weight, M, K, N, 1) != 0) return -1;
    if (matmul_tn(dweight, dout, x, N, K, M, 1) != 0) return -1;
    if (dbias) {
        /* Column sums of dout: one thread per column keeps the order fixed. */
        #pragma omp parallel for schedule(static)
        for (int j = 0; j < N; j++) {
            float sum = 0.0f;
            for (int i = 0; i < M; i++) sum += dout[(size_t)i * N + j];
            dbias[j] += sum;
        }
    }
    return 0;
    /* END SOLUTION */
}
