/*
 * matmul.h - the three matrix products a linear layer needs, and the linear
 * layer (nn.Linear) built from them. Why three, and how the tile and the
 * blocking driver compute them: the chapter's README.
 *
 * Letters local to this file: C (M, N) is the result and K the summed
 * index. All arrays are row-major floats.
 *     matmul_nt: C = A (M, K) @ B^T, B stored (N, K)             forward x W^T
 *     matmul_nn: C = A (M, K) @ B,   B stored (K, N)             input gradient dy W
 *     matmul_tn: C = A^T @ B,        A stored (K, M), B (K, N)   weight gradient dy^T x
 *
 * With accumulate != 0 the product is added to C (backward passes add into
 * gradient buffers); otherwise C is overwritten. Each element of C is summed
 * in one fixed order (block of k after block of k), however the OpenMP
 * threads share the work, so the result does not depend on their number.
 *
 * Returns 0 (the exercise stubs return -1).
 *
 * Read next: softmax.h.
 */
#ifndef MATMUL_H
#define MATMUL_H

int matmul_nt(float *C, const float *A, const float *B, int M, int N, int K, int accumulate);
int matmul_nn(float *C, const float *A, const float *B, int M, int N, int K, int accumulate);
int matmul_tn(float *C, const float *A, const float *B, int M, int N, int K, int accumulate);

/*
 * The linear layer itself, nn.Linear(K, N) applied to M rows:
 *     out (M, N) = x (M, K) @ weight^T + bias      weight (N, K), bias (N,) or NULL
 *
 * Backward ADDS into the gradient buffers, which the caller zeroes once per
 * step (a weight used twice collects both contributions):
 *     dx      (M, K) += dout @ weight              skipped when dx is NULL
 *     dweight (N, K) += dout^T @ x
 *     dbias   (N,)   += sum over rows of dout      skipped when dbias is NULL
 */
int linear_forward(float *out, const float *x, const float *weight, const float *bias,
                   int M, int K, int N);
int linear_backward(float *dx, float *dweight, float *dbias, const float *dout,
                    const float *x, const float *weight, int M, int K, int N);

#endif
