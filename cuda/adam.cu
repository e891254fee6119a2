/*
 * adam.cu - one Adam or AdamW step over a flat array of parameters.
 *
 * Mirrors torch.optim.Adam and torch.optim.AdamW (amsgrad=False,
 * maximize=False), the update torch's single-tensor implementation makes.
 * The C function it mirrors is adam_step (chapters/08_training/optim.c);
 * the per-element update is hd_adam_update() in hostdev.h, which this
 * kernel and build/cuda/run_cases's check both call, and the parity
 * goldens of chapter 08 check it end to end through train.cu.
 *
 * Every parameter is updated on its own, so this is one thread per value
 * calling hd_adam_update(); all a kernel adds is the indexing. The step
 * counter t lives on the host: hd_adam_hyper() turns it into the bias
 * corrections (in double, as torch computes them in Python) before the
 * launch, so the kernel never computes beta^t.
 *
 * The parameters of a model are many tensors; a training step lays them out
 * in one flat buffer (and their gradients and moments in three more of the
 * same layout), so one launch updates all of them.
 *
 * Read next: run_cases.cu, which checks every kernel of this folder.
 */
#include "common.cuh"
#include "kernels.h"

__global__ void adam_kernel(float *param, const float *grad, float *m, float *v, long long n,
                            AdamStep h)
{
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < n) hd_adam_update(&param[idx], grad[idx], &m[idx], &v[idx], h);
}

extern "C" int cuda_adam_step(float *param, const float *grad, float *m, float *v, long long n,
                              AdamStep h)
{
    if (n == 0) return 0;
    adam_kernel<<<blocks_for(n, 256), 256>>>(param, grad, m, v, n, h);
    return LAUNCH_CHECK(adam_kernel);
}
