/*
 * loss.cu - cross-entropy over a vocabulary, forward and backward, on the GPU.
 *
 * Mirrors torch.nn.functional.cross_entropy(logits, targets,
 * ignore_index=..., label_smoothing=..., reduction='mean') for logits (R, V)
 * and int64 targets (R,): R rows, one per predicted token (N * T for the
 * seq2seq model), V classes, as in loss.h. The C function it mirrors is cross_entropy
 * (chapters/08_training/loss.c); its per-row formulas are hd_ce_row_*() in
 * hostdev.h, which build/cuda/run_cases checks this file against, and the
 * parity goldens of chapter 08 check it end to end through train.cu.
 *
 * The formulas (hostdev.h derives them), with lse = log sum_j exp(x_j):
 *
 *     row loss   lse - (1 - e) x_t - (e / V) sum_j x_j       hd_ce_row_loss
 *     loss       sum of row losses / number of rows not ignored
 *     gradient   (softmax_j - (1 - e) [j == t] - e / V) * dloss / count
 *                                                            hd_ce_grad
 *
 * Three kernels: one block per row for lse and the row loss (the max, the
 * sum of exponentials and the sum of logits are block reductions); one
 * block for the mean (a fixed order, so the loss has the same bits on every
 * run); one thread per logit for the gradient, which rebuilds the softmax
 * from the saved lse instead of storing (R, V) probabilities.
 *
 * Not here: class weights, reduction 'sum' or 'none' (row_loss holds the
 * per-row losses, which is 'none'), probabilities as targets.
 *
 * Read next: adam.cu.
 */
#include "common.cuh"
#include "kernels.h"

#define CE_THREADS 256

__global__ void cross_entropy_rows_kernel(float *lse, float *row_loss, const float *logits,
                                          const int64_t *targets, int V, int64_t ignore_index,
                                          float smoothing)
{
    __shared__ float shared[32];
    size_t r = blockIdx.x;
    const float *x = logits + r * V;                   /* (V,) */

    float m = -INFINITY;
    for (int j = threadIdx.x; j < V; j += blockDim.x) m = fmaxf(m, x[j]);
    m = block_max(m, shared);
    float sum_exp = 0.0f, sum_x = 0.0f;
    for (int j = threadIdx.x; j < V; j += blockDim.x) {
        sum_exp += expf(x[j] - m);
        sum_x += x[j];
    }
    sum_exp = block_sum(sum_exp, shared);
    sum_x = block_sum(sum_x, shared);

    if (threadIdx.x == 0) {
        float row_lse = m + logf(sum_exp);
        int64_t t = targets[r];
        lse[r] = row_lse;
        row_loss[r] = t == ignore_index ? 0.0f
                                        : hd_ce_row_loss(row_lse, x[t], sum_x, V, smoothing);
    }
}

/* One block: loss = sum of row losses / count of rows not ignored. */
__global__ void cross_entropy_mean_kernel(float *loss, float *n_valid, const float *row_loss,
                                          const int64_t *targets, int R, int64_t ignore_index)
{
    __shared__ float shared[32];
    float sum = 0.0f, count = 0.0f;
    for (int r = threadIdx.x; r < R; r += blockDim.x) {
        if (targets[r] == ignore_index) continue;
        sum += row_loss[r];
        count += 1.0f;
    }
    sum = block_sum(sum, shared);
    count = block_sum(count, shared);
    if (threadIdx.x == 0) {
        loss[0] = sum / count;                /* 0 / 0 = NaN when all are ignored, as torch */
        n_valid[0] = count;
    }
}

__global__ void cross_entropy_backward_kernel(float *dlogits, const float *logits,
                                              const float *lse, const int64_t *targets,
                                              const float *n_valid, float dloss, long long n,
                                              int V, int64_t ignore_index, float smoothing)
{
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n) return;
    long long r = idx / V;
    int j = (int)(idx % V);
    int64_t t = targets[r];
    if (t == ignore_index) return;            /* an ignored row gets no gradient */
    float g = hd_ce_grad(logits[idx], lse[r], j == t, V, smoothing);
    dlogits[idx] += g * (dloss / n_valid[0]);
}

extern "C" int cuda_cross_entropy_forward(float *loss, float *n_valid, float *lse,
                                          float *row_loss, const float *logits,
                                          const int64_t *targets, int R, int V,
                                          int64_t ignore_index, float label_smoothing)
{
    if (V == 0) {
        fprintf(stderr, "cuda_cross_entropy_forward: the vocabulary is empty (V = 0)\n");
        return -1;
    }
    if (R > 0) {
        cross_entropy_rows_kernel<<<R, CE_THREADS>>>(lse, row_loss, logits, targets, V,
                                                     ignore_index, label_smoothing);
        if (LAUNCH_CHECK(cross_entropy_rows_kernel) != 0) return -1;
    }
    cross_entropy_mean_kernel<<<1, 1024>>>(loss, n_valid, row_loss, targets, R, ignore_index);
    return LAUNCH_CHECK(cross_entropy_mean_kernel);
}

extern "C" int cuda_cross_entropy_backward(float *dlogits, const float *logits, const float *lse,
                                           const int64_t *targets, const float *n_valid,
                                           float dloss, int R, int V, int64_t ignore_index,
                                           float label_smoothing)
{
    long long n = (long long)R * V;
    if (n == 0) return 0;
    cross_entropy_backward_kernel<<<blocks_for(n, 256), 256>>>(
        dlogits, logits, lse, targets, n_valid, dloss, n, V, ignore_index, label_smoothing);
    return LAUNCH_CHECK(cross_entropy_backward_kernel);
}
