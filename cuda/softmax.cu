/*
 * softmax.cu - numerically stable softmax over the last dimension, and its
 * backward, on the GPU.
 *
 * Mirrors chapters/00_foundations/softmax.c: softmax_forward() and
 * softmax_backward(), same shapes (R, C): R rows of C values, chapter 00's
 * letters, local to the softmax. Same rule for a row that is all -inf
 * (zeros, not NaN).
 *
 * One block per row. The C loop over a row becomes: every thread takes the
 * columns c = threadIdx.x, threadIdx.x + blockDim.x, ... (a block-stride
 * loop), and the row's max and sum come from block reductions
 * (common.cuh). Three passes over the row, as on the CPU: the max, the sum
 * of exp(x - max), the normalised values. The formula for one entry is
 * hd_softmax_prob() in hostdev.h, shared with the CPU test.
 *
 * Not here: several blocks per row for very long rows (any length works,
 * but a 50 000-token vocabulary row keeps one block busy for long), and the
 * single-pass online variant, which is in sdpa.cu's flash kernel.
 *
 * Read next: sdpa.cu.
 */
#include "common.cuh"
#include "kernels.h"

#define SOFTMAX_THREADS 256

/* y (R, C) = softmax(x) row by row; block r does row r. */
__global__ void softmax_forward_kernel(float *y, const float *x, int cols)
{
    __shared__ float shared[32];
    const float *xr = x + (size_t)blockIdx.x * cols;   /* (C,) */
    float *yr = y + (size_t)blockIdx.x * cols;         /* (C,) */

    float m = -INFINITY;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, xr[c]);
    m = block_max(m, shared);

    float sum = 0.0f;                     /* stays 0 for a fully masked row */
    if (m != -INFINITY)
        for (int c = threadIdx.x; c < cols; c += blockDim.x) sum += expf(xr[c] - m);
    sum = block_sum(sum, shared);

    float inv = m == -INFINITY ? 0.0f : 1.0f / sum;   /* sum >= 1: the max gives exp(0) */
    for (int c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = hd_softmax_prob(xr[c], m, inv);
}

/* dx = y * (dy - sum_c dy[c] y[c]), row by row. */
__global__ void softmax_backward_kernel(float *dx, const float *y, const float *dy, int cols)
{
    __shared__ float shared[32];
    size_t offset = (size_t)blockIdx.x * cols;
    float dot = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) dot += dy[offset + c] * y[offset + c];
    dot = block_sum(dot, shared);
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
        dx[offset + c] = y[offset + c] * (dy[offset + c] - dot);
}

extern "C" int cuda_softmax_forward(float *y, const float *x, int rows, int cols)
{
    if (rows == 0 || cols == 0) return 0;
    softmax_forward_kernel<<<rows, SOFTMAX_THREADS>>>(y, x, cols);
    return LAUNCH_CHECK(softmax_forward_kernel);
}

extern "C" int cuda_softmax_backward(float *dx, const float *y, const float *dy, int rows,
                                     int cols)
{
    if (rows == 0 || cols == 0) return 0;
    softmax_backward_kernel<<<rows, SOFTMAX_THREADS>>>(dx, y, dy, cols);
    return LAUNCH_CHECK(softmax_backward_kernel);
}
