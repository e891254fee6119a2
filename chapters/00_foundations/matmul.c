/*
 * matmul.c - see matmul.h for the three forms and when each is used.
 *
 * One kernel does the work: C (M, N) = A (M, K) @ B (K, N) with A read
 * through strides, so that matmul_nn (A stored (M, K)) and matmul_tn (A^T
 * stored (K, M)) share it. matmul_nt copies B^T into a scratch array (K * N
 * values, little next to the M * N * K multiply-adds) and calls it too.
 *
 * The kernel computes C one tile of TILE_ROWS x TILE_COLS at a time and
 * keeps the whole tile in registers while k runs from 0 to K - 1:
 *
 *     for k:  acc[r][c] += A[i0 + r, k] * B[k, j0 + c]     r < 6, c < 16
 *
 * Each step loads 16 values of B (two 8-wide vector registers) and 6 of A,
 * and does 96 multiply-adds with them: the tile's 12 accumulator registers
 * never travel to memory until the end. The plain loop `C[i, :] += a *
 * B[k, :]` instead loads and stores a row of C for every k, and runs at a
 * fifth of the speed. Tiles at the right and bottom edges, and matrices
 * narrower than a tile (attention's heads are often 8 wide), take a plain
 * loop over the same order of summation.
 *
 * Every C[i, j] is summed by one thread over k = 0, 1, ..., K - 1, then
 * added to C (accumulate) or stored, whatever the number of threads: tiles
 * are shared out among OpenMP threads, never split. A product below
 * PARALLEL_MIN multiply-adds runs on the calling thread (starting a team of
 * threads would cost more than it saves).
 *
 * Letters: C is (M, N); K is the summed dimension.
 */
#include "matmul.h"

#include "error.h"   /* not_implemented(), used by the exercise stubs */

#include <stdlib.h>
#include <string.h>

#define TILE_ROWS 6
#define TILE_COLS 16
#define PARALLEL_MIN (1L << 15)   /* multiply-adds below which one thread is faster */

/* Whether a product of M * N * K multiply-adds is worth a team of threads. */
static int worth_threads(int M, int N, int K)
{
    return (long)M * N * K >= PARALLEL_MIN;
}

/* The tile of C at (i0, j0), rows x cols of it (at most a full tile):
 * C[i0 + r, j0 + c] (+)= sum over k of A[i0 + r, k] * B[k, j0 + c], where
 * A[i, k] is A[i * row_stride + k * k_stride] and B is stored (K, N). */
static int matmul_tile(float *C, const float *A, size_t row_stride, size_t k_stride,
                       const float *B, int N, int K, int i0, int j0, int rows, int cols,
                       int accumulate)
{
    /* BEGIN SOLUTION */
    float acc[TILE_ROWS][TILE_COLS] = {{0}};
    if (rows == TILE_ROWS && cols == TILE_COLS) {
        for (int k = 0; k < K; k++) {
            const float *b = B + (size_t)k * N + j0;         /* B[k, j0:j0+16] */
            for (int r = 0; r < TILE_ROWS; r++) {
                float a = A[(i0 + r) * row_stride + k * k_stride];
                #pragma omp simd
                for (int c = 0; c < TILE_COLS; c++) acc[r][c] += a * b[c];
            }
        }
    } else {
        for (int k = 0; k < K; k++) {
            const float *b = B + (size_t)k * N + j0;
            for (int r = 0; r < rows; r++) {
                float a = A[(i0 + r) * row_stride + k * k_stride];
                for (int c = 0; c < cols; c++) acc[r][c] += a * b[c];
            }
        }
    }
    for (int r = 0; r < rows; r++) {
        float *c = C + (size_t)(i0 + r) * N + j0;
        for (int q = 0; q < cols; q++) c[q] = accumulate ? c[q] + acc[r][q] : acc[r][q];
    }
    return 0;
    /* END SOLUTION */
}

/* x (rows, cols) -> a new array x^T (cols, rows), or NULL. Copied in
 * blocks of 32 x 32 so that reads and writes both stay within a few cache
 * lines at a time. */
static float *transposed(const float *x, int rows, int cols)
{
    float *t = malloc(((size_t)rows * cols + 1) * sizeof *t);   /* + 1: never malloc(0) */
    if (!t) return NULL;
    for (int i0 = 0; i0 < rows; i0 += 32)
        for (int j0 = 0; j0 < cols; j0 += 32)
            for (int i = i0; i < i0 + 32 && i < rows; i++)
                for (int j = j0; j < j0 + 32 && j < cols; j++)
                    t[(size_t)j * rows + i] = x[(size_t)i * cols + j];
    return t;
}

/* C (M, N) (+)= A @ B, B stored (K, N), A[i, k] at A[i * row_stride + k *
 * k_stride]: every tile of C. After a failed tile (an exercise stub) the
 * rest are skipped, so the failure is reported once per thread. */
static int tiled_product(float *C, const float *A, size_t row_stride, size_t k_stride,
                         const float *B, int M, int N, int K, int accumulate)
{
    int row_tiles = (M + TILE_ROWS - 1) / TILE_ROWS, failed = 0;
    #pragma omp parallel for schedule(static) reduction(|:failed) if (worth_threads(M, N, K))
    for (int t = 0; t < row_tiles; t++) {
        int i0 = t * TILE_ROWS, rows = M - i0 < TILE_ROWS ? M - i0 : TILE_ROWS;
        for (int j0 = 0; j0 < N && !failed; j0 += TILE_COLS)
            failed |= matmul_tile(C, A, row_stride, k_stride, B, N, K, i0, j0, rows,
                                  N - j0 < TILE_COLS ? N - j0 : TILE_COLS, accumulate) != 0;
    }
    return failed ? -1 : 0;
}

int matmul_nn(float *C, const float *A, const float *B, int M, int N, int K, int accumulate)
{
    return tiled_product(C, A, (size_t)K, 1, B, M, N, K, accumulate);     /* A (M, K) */
}

int matmul_tn(float *C, const float *A, const float *B, int M, int N, int K, int accumulate)
{
    return tiled_product(C, A, 1, (size_t)M, B, M, N, K, accumulate);     /* A stored (K, M) */
}

int matmul_nt(float *C, const float *A, const float *B, int M, int N, int K, int accumulate)
{
    float *bt = transposed(B, N, K);                                      /* B^T (K, N) */
    if (!bt) return -1;
    int rc = tiled_product(C, A, (size_t)K, 1, bt, M, N, K, accumulate);
    free(bt);
    return rc;
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
