/*
 * layernorm.cu - LayerNorm over the last dimension, forward and backward,
 * on the GPU.
 *
 * Mirrors chapters/04_layernorm/layernorm.c: layernorm_forward() and
 * layernorm_backward(), same arguments, same NULL rules (no weight, no
 * bias, no saved statistics), and the backward ADDS into its gradients.
 *
 * One block per row of D values, as the C code has one loop iteration per
 * row; the sums over the row become block reductions (warp shuffles, then
 * one partial per warp, common.cuh). The statistics follow layernorm.c
 * step by step, with the formulas of hostdev.h:
 *
 *     delta = sum_c (x[c] - x[0]) / D                   hd_layernorm_delta
 *     d[c]  = (x[c] - x[0]) - delta    (x[c] - mean)    hd_layernorm_dev
 *     rstd  = 1 / sqrt(sum_c d[c]^2 / D + eps)          hd_layernorm_rstd
 *
 * The mean is kept as the pair (x[0], delta) and never rounded to one float
 * before the deviations are made; the saved mean is x[0] + delta. (The
 * pair, the shifted sum and the two passes keep the digits of large-mean and
 * near-constant rows; layernorm.c explains why. Its sums go in blocks of 16
 * values; here each thread's strided partial and the reduction tree keep the
 * running totals small in the same way.)
 *
 * The backward's input gradient is the three-term formula hd_layernorm_dx,
 * again one block per row. The parameter gradients sum over rows, so there
 * one thread takes one column and walks down the rows in order: the same
 * order as the C code, and no atomics (the result is the same on every run).
 *
 * Not here: a fused kernel that computes the parameter gradients in the
 * same pass as the input gradient (llm.c's layernorm_backward does, with a
 * second reduction over blocks).
 *
 * Read next: embedding.cu.
 */
#include "common.cuh"
#include "kernels.h"

#define LN_THREADS 128

__global__ void layernorm_forward_kernel(float *out, float *mean, float *rstd, const float *inp,
                                         const float *weight, const float *bias, int D,
                                         float eps)
{
    __shared__ float shared[32];
    size_t r = blockIdx.x;
    const float *x = inp + r * D;                      /* (D,) */
    float *y = out + r * D;                            /* (D,) */

    /* Pass 1: the mean as the pair (shift, delta), from the distances to the
     * row's first value. */
    float shift = x[0], sum = 0.0f;
    for (int c = threadIdx.x; c < D; c += blockDim.x) sum += x[c] - shift;
    float delta = hd_layernorm_delta(block_sum(sum, shared), D);

    /* Pass 2: the variance of the deviations from the pair. */
    float ss = 0.0f;
    for (int c = threadIdx.x; c < D; c += blockDim.x) {
        float d = hd_layernorm_dev(x[c], shift, delta);
        ss += d * d;
    }
    float s = hd_layernorm_rstd(block_sum(ss, shared), D, eps);

    for (int c = threadIdx.x; c < D; c += blockDim.x) {
        float n = hd_layernorm_dev(x[c], shift, delta) * s;
        float scaled = weight ? n * weight[c] : n;
        y[c] = bias ? scaled + bias[c] : scaled;
    }
    if (threadIdx.x == 0) {
        if (mean) mean[r] = shift + delta;     /* one float, for the backward */
        if (rstd) rstd[r] = s;
    }
}

/* dinp += rstd * (g - mean(g) - n * mean(g n)), g = dout * weight. */
__global__ void layernorm_backward_input_kernel(float *dinp, const float *dout, const float *inp,
                                                const float *weight, const float *mean,
                                                const float *rstd, int D)
{
    __shared__ float shared[32];
    size_t r = blockIdx.x;
    const float *x = inp + r * D, *dy = dout + r * D;
    float *dx = dinp + r * D;
    float m = mean[r], s = rstd[r];

    float sum_g = 0.0f, sum_gn = 0.0f;
    for (int c = threadIdx.x; c < D; c += blockDim.x) {
        float n = (x[c] - m) * s;
        float g = weight ? dy[c] * weight[c] : dy[c];
        sum_g += g;
        sum_gn += g * n;
    }
    float mean_g = block_sum(sum_g, shared) / D;
    float mean_gn = block_sum(sum_gn, shared) / D;

    for (int c = threadIdx.x; c < D; c += blockDim.x) {
        float n = (x[c] - m) * s;
        float g = weight ? dy[c] * weight[c] : dy[c];
        dx[c] += hd_layernorm_dx(g, n, mean_g, mean_gn, s);
    }
}

/* dweight[c] += sum_r dout * n, dbias[c] += sum_r dout; one thread per column. */
__global__ void layernorm_backward_params_kernel(float *dweight, float *dbias, const float *dout,
                                                 const float *inp, const float *mean,
                                                 const float *rstd, int rows, int D)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= D) return;
    float dw = 0.0f, db = 0.0f;
    for (int r = 0; r < rows; r++) {       /* neighbouring threads read neighbouring columns */
        size_t i = (size_t)r * D + c;
        dw += dout[i] * ((inp[i] - mean[r]) * rstd[r]);
        db += dout[i];
    }
    if (dweight) dweight[c] += dw;
    if (dbias) dbias[c] += db;
}

extern "C" int cuda_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                                      const float *weight, const float *bias, int N, int T,
                                      int D, float eps)
{
    int rows = N * T;
    if (rows == 0 || D == 0) return 0;
    layernorm_forward_kernel<<<rows, LN_THREADS>>>(out, mean, rstd, inp, weight, bias, D, eps);
    return LAUNCH_CHECK(layernorm_forward_kernel);
}

extern "C" int cuda_layernorm_backward(float *dinp, float *dweight, float *dbias,
                                       const float *dout, const float *inp, const float *weight,
                                       const float *mean, const float *rstd, int N, int T, int D)
{
    int rows = N * T;
    if (rows == 0 || D == 0) return 0;
    layernorm_backward_input_kernel<<<rows, LN_THREADS>>>(dinp, dout, inp, weight, mean, rstd, D);
    if (LAUNCH_CHECK(layernorm_backward_input_kernel) != 0) return -1;
    float *dw = weight ? dweight : NULL;   /* dweight is not touched without a weight */
    if (!dw && !dbias) return 0;
    layernorm_backward_params_kernel<<<blocks_for(D, 128), 128>>>(dw, dbias, dout, inp, mean,
                                                                  rstd, rows, D);
    return LAUNCH_CHECK(layernorm_backward_params_kernel);
}
