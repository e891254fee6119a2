/*
 * matmul.c - see matmul.h for the three forms and when each is used.
 *
 * Plain loops, ordered so that the innermost loop walks memory contiguously:
 * the dot product of two rows for matmul_nt, a row of B scaled into a row of
 * C for matmul_nn and matmul_tn. The compiler vectorises all three (the dot
 * product through `omp simd reduction`, which lets it keep one partial sum
 * per vector lane; the order is fixed at compile time, so results still do
 * not depend on the number of threads).
 *
 * Two things keep small products fast, as the per-head products of
 * attention are: a product below PARALLEL_MIN multiply-adds runs on the
 * calling thread (starting a team of threads costs more than it saves), and
 * matmul_tn walks A^T in blocks of TN_BLOCK rows so that a block of C stays
 * in cache while B streams past once per block instead of once per row.
 * Letters: C is (M, N); K is the summed dimension.
 */
#include "matmul.h"

#include "error.h"   /* not_implemented(), used by the exercise stubs */

#include <string.h>

#define PARALLEL_MIN (1L << 15)   /* multiply-adds below which one thread is faster */
#define TN_BLOCK 16                /* rows of C that matmul_tn updates together */

/* Whether a product of M * N * K multiply-adds is worth a team of threads. */
static int worth_threads(int M, int N, int K)
{
    return (long)M * N * K >= PARALLEL_MIN;
}

int matmul_nt(float *C, const float *A, const float *B, int M, int N, int K, int accumulate)
{
    /* BEGIN SOLUTION */
    #pragma omp parallel for schedule(static) if (worth_threads(M, N, K))
    for (int i = 0; i < M; i++) {
        const float *a = A + (size_t)i * K;          /* row i of A, (K,) */
        for (int j = 0; j < N; j++) {
            const float *b = B + (size_t)j * K;      /* row j of B, (K,) */
            float sum = 0.0f;
            #pragma omp simd reduction(+:sum)
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
    #pragma omp parallel for schedule(static) if (worth_threads(M, N, K))
    for (int i = 0; i < M; i++) {
        float *c = C + (size_t)i * N;                /* row i of C, (N,) */
        if (!accumulate) memset(c, 0, (size_t)N * sizeof *c);
        for (int k = 0; k < K; k++) {
            float a = A[(size_t)i * K + k];
            const float *b = B + (size_t)k * N;      /* row k of B, (N,) */
            #pragma omp simd
            for (int j = 0; j < N; j++) c[j] += a * b[j];
        }
    }
    return 0;
    /* END SOLUTION */
}

int matmul_tn(float *C, const float *A, const float *B, int M, int N, int K, int accumulate)
{
    /* BEGIN SOLUTION */
    int blocks = (M + TN_BLOCK - 1) / TN_BLOCK;
    #pragma omp parallel for schedule(static) if (worth_threads(M, N, K))
    for (int blk = 0; blk < blocks; blk++) {
        int i0 = blk * TN_BLOCK, i1 = i0 + TN_BLOCK < M ? i0 + TN_BLOCK : M;
        if (!accumulate) memset(C + (size_t)i0 * N, 0, (size_t)(i1 - i0) * N * sizeof *C);
        /* Each C[i, j] still sums over k in increasing order. */
        for (int k = 0; k < K; k++) {
            const float *b = B + (size_t)k * N;      /* row k of B, (N,) */
            for (int i = i0; i < i1; i++) {
                float a = A[(size_t)k * M + i];      /* A^T[i, k] */
                float *c = C + (size_t)i * N;        /* row i of C, (N,) */
                #pragma omp simd
                for (int j = 0; j < N; j++) c[j] += a * b[j];
            }
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
