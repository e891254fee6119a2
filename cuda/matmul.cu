/*
 * matmul.cu - the three matrix products of a linear layer on the GPU.
 *
 * Mirrors chapters/00_foundations/matmul.c: matmul_nt, matmul_nn, matmul_tn
 * (same shapes, same `accumulate` rule) and linear_forward/linear_backward.
 * Its letters are chapter 00's, local to the matrix product (C the result,
 * N its columns, K summed), not the book's batch and width.
 *
 *     matmul_nt: C (M, N) = A (M, K) @ B^T,  B stored (N, K)      forward
 *     matmul_nn: C (M, N) = A (M, K) @ B,    B stored (K, N)      input gradient
 *     matmul_tn: C (M, N) = A^T @ B,         A stored (K, M)      weight gradient
 *
 * Two implementations:
 *
 * 1. A tiled kernel, written to be read. Each block of 16 x 16 threads
 *    computes a 16 x 16 tile of C, one element per thread. The naive kernel
 *    (each thread reads its row of A and column of B from global memory)
 *    reads every input value 16 times per block from slow memory. Here the
 *    block walks along K in steps of 16: it copies a 16 x 16 tile of A and
 *    one of B into shared memory (fast, on-chip, shared by the block), waits
 *    for every thread (__syncthreads), and then each thread does 16
 *    multiply-adds from shared memory. Each input value is read from global
 *    memory once per block instead of 16 times.
 *
 *    Transposed operands are loaded so that neighbouring threads read
 *    neighbouring addresses (coalesced: one memory transaction serves the
 *    warp) and stored transposed into shared memory; the tile has one
 *    extra column so the transposed stores do not all hit the same bank.
 *
 *    Each thread sums its K products in order, k = 0, 1, ..., K - 1, as the
 *    C loops do; nvcc fuses each multiply-add into one FMA (one rounding
 *    instead of two), so the result differs from the CPU in the last bits.
 *
 * 2. cuBLAS, the yardstick for speed and for the answer. cuBLAS is
 *    column-major; a row-major (M, N) matrix is the column-major (N, M)
 *    matrix of its transpose, so C = A op B becomes C^T = op(B)^T op(A)^T:
 *    the operands swap places and keep their transpose flags (see each call).
 *    CUBLAS_DEFAULT_MATH keeps full float32 (no TF32 tensor cores, which
 *    would round the inputs to 10 bits and fail every case tolerance).
 *
 * Every entry point (cuda_matmul_*, and so the linear layer, the FFN and
 * attention built on them) runs the tiled kernel unless
 * cuda_matmul_set_engine() names a cuBLAS handle; the whole model on the
 * GPU (model.cu) runs on cuBLAS, run_cases checks both.
 *
 * Not here: register tiling (each thread computing a 4 x 4 or 8 x 8 block
 * of C), vector loads, tensor cores. Those are what makes cuBLAS 5-20 times
 * faster than this kernel.
 *
 * Read next: softmax.cu.
 */
#include <cublas_v2.h>
#include <stdlib.h>

#include "common.cuh"
#include "kernels.h"

#define TILE 16

/*
 * C[z] (M, N) (+)= op(A[z]) @ op(B[z]) for the batch entry z = blockIdx.z.
 * A_STORED_KM: A is stored (K, M) (the tn form), else (M, K).
 * B_STORED_NK: B is stored (N, K) (the nt form), else (K, N).
 */
template <bool A_STORED_KM, bool B_STORED_NK>
__global__ void matmul_tiled_kernel(float *C, const float *A, const float *B, int M, int N,
                                    int K, int accumulate)
{
    __shared__ float As[TILE][TILE + 1];     /* As[r][k]: A(row0 + r, k0 + k) */
    __shared__ float Bs[TILE][TILE + 1];     /* Bs[k][c]: B(k0 + k, col0 + c) */

    size_t z = blockIdx.z;
    A += z * M * K;
    B += z * K * N;
    C += z * M * N;

    int tx = threadIdx.x, ty = threadIdx.y;
    int row0 = blockIdx.y * TILE, col0 = blockIdx.x * TILE;
    int row = row0 + ty, col = col0 + tx;    /* the element of C this thread computes */
    float sum = 0.0f;

    for (int k0 = 0; k0 < K; k0 += TILE) {
        /* Load one tile of A: element (row0 + r, k0 + k) into As[r][k].
         * Neighbouring threads (tx) must read neighbouring addresses. */
        if (!A_STORED_KM) {                  /* A (M, K): tx walks along k */
            int r = row0 + ty, k = k0 + tx;
            As[ty][tx] = (r < M && k < K) ? A[(size_t)r * K + k] : 0.0f;
        } else {                             /* A (K, M): tx walks along m; store transposed */
            int k = k0 + ty, r = row0 + tx;
            As[tx][ty] = (r < M && k < K) ? A[(size_t)k * M + r] : 0.0f;
        }
        /* One tile of B: element (k0 + k, col0 + c) into Bs[k][c]. */
        if (!B_STORED_NK) {                  /* B (K, N): tx walks along n */
            int k = k0 + ty, c = col0 + tx;
            Bs[ty][tx] = (k < K && c < N) ? B[(size_t)k * N + c] : 0.0f;
        } else {                             /* B (N, K): tx walks along k; store transposed */
            int c = col0 + ty, k = k0 + tx;
            Bs[tx][ty] = (k < K && c < N) ? B[(size_t)c * K + k] : 0.0f;
        }
        __syncthreads();                     /* the tiles are complete */

        /* Out-of-range entries were loaded as 0 and add nothing. */
        for (int k = 0; k < TILE; k++) sum += As[ty][k] * Bs[k][tx];
        __syncthreads();                     /* everyone is done before the next load */
    }
    if (row < M && col < N) {
        float *c = &C[(size_t)row * N + col];
        *c = accumulate ? *c + sum : sum;
    }
}

template <bool A_STORED_KM, bool B_STORED_NK>
static int matmul_tiled(float *C, const float *A, const float *B, int batch, int M, int N, int K,
                        int accumulate)
{
    if (batch == 0 || M == 0 || N == 0) return 0;
    if (batch > 65535 || (M + TILE - 1) / TILE > 65535) {
        fprintf(stderr, "cuda matmul: batch %d or M %d too large for one launch\n", batch, M);
        return -1;
    }
    dim3 threads(TILE, TILE);
    dim3 blocks((N + TILE - 1) / TILE, (M + TILE - 1) / TILE, batch);
    matmul_tiled_kernel<A_STORED_KM, B_STORED_NK>
        <<<blocks, threads>>>(C, A, B, M, N, K, accumulate);
    return LAUNCH_CHECK(matmul_tiled_kernel);
}

/* ------------------------------------------------------------------------ */
/* cuBLAS                                                                    */
/* ------------------------------------------------------------------------ */

struct CudaBlas {
    cublasHandle_t handle;
};

static int blas_check(cublasStatus_t s, const char *what)
{
    if (s == CUBLAS_STATUS_SUCCESS) return 0;
    fprintf(stderr, "cuBLAS: %s failed: %s\n", what, cublasGetStatusString(s));
    return -1;
}

extern "C" CudaBlas *cuda_blas_create(void)
{
    CudaBlas *blas = (CudaBlas *)malloc(sizeof *blas);
    if (!blas) {
        fprintf(stderr, "cuda_blas_create: out of memory\n");
        return NULL;
    }
    if (blas_check(cublasCreate(&blas->handle), "cublasCreate")) {
        free(blas);
        return NULL;
    }
    if (blas_check(cublasSetMathMode(blas->handle, CUBLAS_DEFAULT_MATH), "cublasSetMathMode")) {
        cublasDestroy(blas->handle);
        free(blas);
        return NULL;
    }
    return blas;
}

extern "C" void cuda_blas_destroy(CudaBlas *blas)
{
    if (!blas) return;
    cublasDestroy(blas->handle);
    free(blas);
}

/*
 * The three forms on `batch` problems stored one after the other. cuBLAS
 * computes the column-major (N, M) matrix C^T, leading dimension N, which is
 * our row-major (M, N) matrix C:
 *   nt: C^T = B A^T. Row-major B (N, K) is column-major B^T (K, N), so it
 *       goes in transposed; row-major A (M, K) is column-major A^T (K, M).
 *   nn: C^T = B^T A^T: both are already what column-major sees.
 *   tn: C^T = B^T A, A stored (K, M) row-major = column-major (M, K):
 *       transposed.
 */
typedef enum { FORM_NT, FORM_NN, FORM_TN } Form;

static int cublas_matmul(CudaBlas *blas, Form form, float *C, const float *A, const float *B,
                         int batch, int M, int N, int K, int accumulate)
{
    if (batch == 0 || M == 0 || N == 0) return 0;
    const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    cublasOperation_t op_b = form == FORM_NT ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t op_a = form == FORM_TN ? CUBLAS_OP_T : CUBLAS_OP_N;
    int ldb = form == FORM_NT ? K : N, lda = form == FORM_TN ? M : K;
    return blas_check(cublasSgemmStridedBatched(blas->handle, op_b, op_a, N, M, K, &one,
                                                B, ldb, (long long)K * N, A, lda,
                                                (long long)M * K, &beta, C, N,
                                                (long long)M * N, batch),
                      "cublasSgemmStridedBatched");
}

extern "C" int cuda_matmul_nt_cublas(CudaBlas *blas, float *C, const float *A, const float *B,
                                     int M, int N, int K, int accumulate)
{
    return cublas_matmul(blas, FORM_NT, C, A, B, 1, M, N, K, accumulate);
}

extern "C" int cuda_matmul_nn_cublas(CudaBlas *blas, float *C, const float *A, const float *B,
                                     int M, int N, int K, int accumulate)
{
    return cublas_matmul(blas, FORM_NN, C, A, B, 1, M, N, K, accumulate);
}

extern "C" int cuda_matmul_tn_cublas(CudaBlas *blas, float *C, const float *A, const float *B,
                                     int M, int N, int K, int accumulate)
{
    return cublas_matmul(blas, FORM_TN, C, A, B, 1, M, N, K, accumulate);
}

/* ------------------------------------------------------------------------ */
/* The entry points: the tiled kernel, or cuBLAS when it is the engine        */
/* ------------------------------------------------------------------------ */

static CudaBlas *engine = NULL;   /* NULL: the tiled kernel */

extern "C" void cuda_matmul_set_engine(CudaBlas *blas)
{
    engine = blas;
}

extern "C" int cuda_matmul_nt_batched(float *C, const float *A, const float *B, int batch,
                                      int M, int N, int K, int accumulate)
{
    if (engine) return cublas_matmul(engine, FORM_NT, C, A, B, batch, M, N, K, accumulate);
    return matmul_tiled<false, true>(C, A, B, batch, M, N, K, accumulate);
}

extern "C" int cuda_matmul_nn_batched(float *C, const float *A, const float *B, int batch,
                                      int M, int N, int K, int accumulate)
{
    if (engine) return cublas_matmul(engine, FORM_NN, C, A, B, batch, M, N, K, accumulate);
    return matmul_tiled<false, false>(C, A, B, batch, M, N, K, accumulate);
}

extern "C" int cuda_matmul_tn_batched(float *C, const float *A, const float *B, int batch,
                                      int M, int N, int K, int accumulate)
{
    if (engine) return cublas_matmul(engine, FORM_TN, C, A, B, batch, M, N, K, accumulate);
    return matmul_tiled<true, false>(C, A, B, batch, M, N, K, accumulate);
}

extern "C" int cuda_matmul_nt(float *C, const float *A, const float *B, int M, int N, int K,
                              int accumulate)
{
    return cuda_matmul_nt_batched(C, A, B, 1, M, N, K, accumulate);
}

extern "C" int cuda_matmul_nn(float *C, const float *A, const float *B, int M, int N, int K,
                              int accumulate)
{
    return cuda_matmul_nn_batched(C, A, B, 1, M, N, K, accumulate);
}

extern "C" int cuda_matmul_tn(float *C, const float *A, const float *B, int M, int N, int K,
                              int accumulate)
{
    return cuda_matmul_tn_batched(C, A, B, 1, M, N, K, accumulate);
}

/* ------------------------------------------------------------------------ */
/* The linear layer                                                          */
/* ------------------------------------------------------------------------ */

extern "C" int cuda_linear_forward(float *out, const float *x, const float *weight,
                                   const float *bias, int M, int K, int N)
{
    if (cuda_matmul_nt(out, x, weight, M, N, K, 0) != 0) return -1;   /* x W^T */
    return bias ? cuda_bias_forward(out, bias, M, N) : 0;
}

extern "C" int cuda_linear_backward(float *dx, float *dweight, float *dbias, const float *dout,
                                    const float *x, const float *weight, int M, int K, int N)
{
    if (dx && cuda_matmul_nn(dx, dout, weight, M, K, N, 1) != 0) return -1;   /* dout W */
    if (cuda_matmul_tn(dweight, dout, x, N, K, M, 1) != 0) return -1;         /* dout^T x */
    return dbias ? cuda_bias_backward(dbias, dout, M, N) : 0;
}
