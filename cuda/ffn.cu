/*
 * ffn.cu - the elementwise pieces of a Transformer block on the GPU: the
 * bias of a linear layer, ReLU, dropout with a given mask, the residual
 * connection; and the position-wise feed-forward block built from them.
 *
 * Mirrors:
 *   cuda_bias_forward / cuda_bias_backward   the bias steps of linear_forward
 *                                            and linear_backward (chapter 00)
 *   cuda_dropout_mask                        dropout_mask (chapter 05 dropout.c)
 *   cuda_relu_forward, cuda_dropout_forward,
 *   cuda_relu_dropout_backward               the steps of ffn_forward and
 *                                            ffn_backward (chapter 05 ffn.c,
 *                                            dropout.c)
 *   cuda_ffn_forward / cuda_ffn_backward     ffn_forward / ffn_backward
 *   cuda_residual_forward / _backward        residual_forward / residual_backward
 *                                            (chapter 04 residual.c)
 *
 * Letters: the FFN's are the book's (N batch, T positions, D width, F the
 * hidden width); the bias kernels keep the matrix product's (M, N) of
 * chapter 00, M rows of N values, local to them.
 *
 * Elementwise kernels are one thread per value; the bias gradient (a sum
 * over rows) is one thread per column with the rows in order, as in C.
 * Dropout's mask is drawn on the GPU (cuda_dropout_mask): Philox gives
 * element i from the mask's key and i alone (chapter 00's philox.h, the
 * same inline code on both sides), so the GPU's mask is the CPU's.
 *
 * Read next: loss.cu.
 */
#include "common.cuh"
#include "kernels.h"

extern "C" {
#include "dropout.h"
}

/* out (M, N) += bias (N,) on every row. */
__global__ void bias_forward_kernel(float *out, const float *bias, long long n, int N)
{
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < n) out[idx] += bias[idx % N];
}

/* dbias[j] += sum over rows of dout[i, j]; the sum is made first and added once. */
__global__ void bias_backward_kernel(float *dbias, const float *dout, int M, int N)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= N) return;
    float sum = 0.0f;
    for (int i = 0; i < M; i++) sum += dout[(size_t)i * N + j];
    dbias[j] += sum;
}

__global__ void relu_forward_kernel(float *hidden, const float *pre, int n)
{
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < n) hidden[idx] = pre[idx] > 0.0f ? pre[idx] : 0.0f;
}

/* chapter 05's dropout_mask on the GPU: one thread per block of four
 * elements, each the same Philox call as the CPU's (philox.h). */
__global__ void dropout_mask_kernel(uint8_t *mask, int n, float p, PhiloxKey key)
{
    int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= n / 4 + (n % 4 != 0)) return;
    float u[4];
    philox_uniform4(u, key, (uint32_t)b);
    for (int j = 0; j < 4 && 4 * b + j < n; j++) mask[4 * b + j] = u[j] >= p;
}

/* out = x * mask / (1 - p); scale is 1 / (1 - p), or 0 when p = 1. */
__global__ void dropout_forward_kernel(float *out, const float *x, const uint8_t *mask, int n,
                                       float scale)
{
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < n) out[idx] = mask[idx] ? x[idx] * scale : 0.0f;
}

/* dpre = dhidden * scale where pre > 0 and the mask keeps the unit, else 0
 * (ReLU's slope is 0 at pre == 0 exactly, as in PyTorch). */
__global__ void relu_dropout_backward_kernel(float *dpre, const float *dhidden, const float *pre,
                                             const uint8_t *mask, int n, float scale)
{
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n) return;
    bool keep = pre[idx] > 0.0f && (!mask || mask[idx]);
    dpre[idx] = keep ? dhidden[idx] * scale : 0.0f;
}

__global__ void residual_forward_kernel(float *out, const float *x, const float *fx, int n)
{
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < n) out[idx] = x[idx] + fx[idx];
}

/* d(x + fx)/dx = d(x + fx)/dfx = 1: both branches receive dout as it is. */
__global__ void residual_backward_kernel(float *dx, float *dfx, const float *dout, int n)
{
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n) return;
    dx[idx] += dout[idx];
    dfx[idx] += dout[idx];
}

extern "C" int cuda_bias_forward(float *out, const float *bias, int M, int N)
{
    long long n = (long long)M * N;
    if (n == 0) return 0;
    bias_forward_kernel<<<blocks_for(n, 256), 256>>>(out, bias, n, N);
    return LAUNCH_CHECK(bias_forward_kernel);
}

extern "C" int cuda_bias_backward(float *dbias, const float *dout, int M, int N)
{
    if (N == 0) return 0;
    bias_backward_kernel<<<blocks_for(N, 128), 128>>>(dbias, dout, M, N);
    return LAUNCH_CHECK(bias_backward_kernel);
}

extern "C" int cuda_relu_forward(float *hidden, const float *pre, int n)
{
    if (n == 0) return 0;
    relu_forward_kernel<<<blocks_for(n, 256), 256>>>(hidden, pre, n);
    return LAUNCH_CHECK(relu_forward_kernel);
}

extern "C" int cuda_dropout_mask(uint8_t *mask, int n, float p, Rng *rng)
{
    PhiloxKey key = dropout_key(rng);
    int blocks = n / 4 + (n % 4 != 0);
    if (blocks == 0) return 0;
    dropout_mask_kernel<<<blocks_for(blocks, 256), 256>>>(mask, n, p, key);
    return LAUNCH_CHECK(dropout_mask_kernel);
}

extern "C" int cuda_dropout_forward(float *out, const float *x, const uint8_t *mask, int n,
                                    float p)
{
    if (n == 0) return 0;
    if (!mask) {                                  /* evaluation mode: the identity */
        if (out == x) return 0;
        cudaError_t e = cudaMemcpyAsync(out, x, (size_t)n * sizeof *out,
                                        cudaMemcpyDeviceToDevice);
        if (e != cudaSuccess) {
            fprintf(stderr, "cuda_dropout_forward: cudaMemcpyAsync: %s\n", cudaGetErrorString(e));
            return -1;
        }
        return 0;
    }
    float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;   /* p = 1: no survivors, no 1/0 */
    dropout_forward_kernel<<<blocks_for(n, 256), 256>>>(out, x, mask, n, scale);
    return LAUNCH_CHECK(dropout_forward_kernel);
}

extern "C" int cuda_relu_dropout_backward(float *dpre, const float *dhidden, const float *pre,
                                          const uint8_t *mask, float p, int n)
{
    if (n == 0) return 0;
    float scale = !mask ? 1.0f : p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
    relu_dropout_backward_kernel<<<blocks_for(n, 256), 256>>>(dpre, dhidden, pre, mask, n, scale);
    return LAUNCH_CHECK(relu_dropout_backward_kernel);
}

extern "C" int cuda_residual_forward(float *out, const float *x, const float *fx, int n)
{
    if (n == 0) return 0;
    residual_forward_kernel<<<blocks_for(n, 256), 256>>>(out, x, fx, n);
    return LAUNCH_CHECK(residual_forward_kernel);
}

extern "C" int cuda_residual_backward(float *dx, float *dfx, const float *dout, int n)
{
    if (n == 0) return 0;
    residual_backward_kernel<<<blocks_for(n, 256), 256>>>(dx, dfx, dout, n);
    return LAUNCH_CHECK(residual_backward_kernel);
}

__global__ void add_into_kernel(float *dst, const float *src, long long n)
{
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < n) dst[idx] += src[idx];
}

extern "C" int cuda_add_into(float *dst, const float *src, long long n)
{
    if (n == 0) return 0;
    add_into_kernel<<<blocks_for(n, 256), 256>>>(dst, src, n);
    return LAUNCH_CHECK(add_into_kernel);
}

/* ------------------------------------------------------------------------ */
/* The feed-forward block: linear2(dropout(relu(linear1(x))))                */
/* ------------------------------------------------------------------------ */

extern "C" int cuda_ffn_forward(float *out, float *pre, float *hidden, const float *x,
                                const float *w1, const float *b1, const float *w2,
                                const float *b2, const uint8_t *mask, float p, int N, int T,
                                int D, int F)
{
    int rows = N * T;
    if (cuda_linear_forward(pre, x, w1, b1, rows, D, F) != 0) return -1;
    if (cuda_relu_forward(hidden, pre, rows * F) != 0) return -1;
    if (cuda_dropout_forward(hidden, hidden, mask, rows * F, p) != 0) return -1;
    return cuda_linear_forward(out, hidden, w2, b2, rows, F, D);
}

extern "C" int cuda_ffn_backward(float *dx, float *dw1, float *db1, float *dw2, float *db2,
                                 float *dhidden, const float *dout, const float *x,
                                 const float *pre, const float *hidden, const float *w1,
                                 const float *w2, const uint8_t *mask, float p, int N, int T,
                                 int D, int F)
{
    int rows = N * T;
    /* linear2: dhidden = dout W2 (linear_backward adds, so zero it first). */
    cudaError_t e = cudaMemsetAsync(dhidden, 0, (size_t)rows * F * sizeof *dhidden);
    if (e != cudaSuccess) {
        fprintf(stderr, "cuda_ffn_backward: cudaMemsetAsync: %s\n", cudaGetErrorString(e));
        return -1;
    }
    if (cuda_linear_backward(dhidden, dw2, db2, dout, hidden, w2, rows, F, D) != 0) return -1;
    /* back through dropout and ReLU, in place */
    if (cuda_relu_dropout_backward(dhidden, dhidden, pre, mask, p, rows * F) != 0) return -1;
    /* linear1: dx += dpre W1, and the gradients of W1 and b1 */
    return cuda_linear_backward(dx, dw1, db1, dhidden, x, w1, rows, D, F);
}
