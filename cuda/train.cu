/*
 * train.cu - chapter 08's training step on the GPU.
 *
 * Mirrors trainer.c's train_step and eval_batch:
 *
 *     grads = 0                                   gpu_model_zero_grad
 *     logits = model(batch)                       gpu_model_forward (model.cu)
 *     loss, dlogits = cross_entropy(logits, y)    cuda_cross_entropy_* (loss.cu)
 *     grads += d loss / d params                  gpu_model_backward
 *     clip grads to max_norm (optional)           clip_grad_norm below
 *     params = adam(params, grads, lr)            cuda_adam_step (adam.cu)
 *
 * packaged as a StepDevice (trainer.h), so train_run drives the GPU exactly
 * as it drives the CPU: the same batches, the same schedule, the same logs
 * and checkpoints. The parameters, gradients and Adam moments stay on the
 * GPU; each step copies the batch's ids up and three numbers down (loss,
 * counted targets, correct argmaxes), which is also the one
 * synchronisation per step (PyTorch's loss.item()). sync copies the
 * parameters and moments back for a checkpoint.
 *
 * In a data-parallel run (GpuPeers, mpi/nccl.c) each rank does the same on
 * its share of the batch's rows, and one line more: after the backward
 * pass, the ranks' gradients are summed (NCCL's all-reduce) into every
 * rank's, which then all take the same clipped Adam step. The loss's
 * gradient divides by the targets counted in the whole batch, not in the
 * share, so the sum is the gradient of the whole batch's mean loss.
 *
 * Read next: run_cases.cu, which checks this against the parity goldens.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.cuh"
#include "gpu.h"
#include "kernels.h"

extern "C" {
#include "loss.h"
}

#define NORM_BLOCKS 256
#define NORM_THREADS 256

typedef struct {
    const Model *host;
    GpuModel g;
    GpuWork train;              /* the training batch's activations */
    GpuWork eval;               /* evaluation's, for a batch of another N (allocated on use) */
    int N, S, T;                /* the training batch's shape (of this rank's share) */
    int64_t rows;               /* its logits rows */
    GpuPeers peers;             /* the other GPUs; one GPU alone: rank 0 of 1 */
    float *m, *v;               /* Adam's moments, (num_params,) each */
    int64_t step;               /* Adam's step counter */
    float *dlogits;             /* (rows, Vt) */
    int64_t *targets;           /* (rows,) */
    float *lse, *row_loss;      /* (rows,) */
    float *scalars;             /* [0] loss, [1] counted targets, [2] correct (of the
                                   rows at hand), [3] the whole batch's counted targets */
    double *norm;               /* [0..NORM_BLOCKS) partial sums of squares, [NORM_BLOCKS] total */
} GpuTrainer;

static int cuda_ok(cudaError_t e, const char *what)
{
    if (e == cudaSuccess) return 0;
    fprintf(stderr, "cuda: %s: %s\n", what, cudaGetErrorString(e));
    return -1;
}

/* ------------------------------------------------------------------------ */
/* Kernels: correct argmaxes, and clip_grad_norm                             */
/* ------------------------------------------------------------------------ */

/* One warp per row: the first maximum of the row (torch.argmax's tie rule,
 * and cross_entropy's in loss.c), compared with the target; the count of
 * correct rows goes to *correct (an integer count is exact in any order). */
__global__ void correct_kernel(float *correct, const float *logits, const int64_t *targets,
                               int64_t rows, int V, int64_t ignore_index)
{
    __shared__ int count;
    if (threadIdx.x == 0) count = 0;
    __syncthreads();
    int lane = threadIdx.x % 32;
    int64_t r = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    if (r < rows && targets[r] != ignore_index) {
        const float *x = logits + r * V;
        float best = -INFINITY;
        int at = V;
        for (int j = lane; j < V; j += 32)     /* this lane's first maximum; V: none */
            if (at == V || x[j] > best) best = x[j], at = j;
        for (int offset = 16; offset > 0; offset /= 2) {
            float other = __shfl_xor_sync(0xffffffffu, best, offset);
            int other_at = __shfl_xor_sync(0xffffffffu, at, offset);
            if (other > best || (other == best && other_at < at)) best = other, at = other_at;
        }
        if (lane == 0 && at == targets[r]) atomicAdd(&count, 1);
    }
    __syncthreads();
    if (threadIdx.x == 0 && count > 0) atomicAdd(correct, (float)count);
}

/* clip_grad_norm's sum of squares, in double: each block a strided share,
 * then one block adds the partials in order. */
__global__ void sum_squares_kernel(double *partial, const float *g, long long n)
{
    __shared__ double shared[NORM_THREADS];
    double sum = 0.0;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        sum += (double)g[i] * g[i];
    shared[threadIdx.x] = sum;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
        if ((int)threadIdx.x < half) shared[threadIdx.x] += shared[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = shared[0];
}

__global__ void norm_total_kernel(double *norm)
{
    double sum = 0.0;
    for (int b = 0; b < NORM_BLOCKS; b++) sum += norm[b];
    norm[NORM_BLOCKS] = sqrt(sum);
}

/* g *= max_norm / (total + 1e-6) when that is below 1 (a NaN total leaves
 * g as it is), as clip_grad_norm in optim.c. */
__global__ void clip_kernel(float *g, long long n, const double *norm, float max_norm)
{
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    double coef = (double)max_norm / (norm[NORM_BLOCKS] + 1e-6);
    if (i < n && coef < 1.0) g[i] *= (float)coef;
}

/* Returns -1 after a failed launch; the total norm stays on the device
 * (t->norm[NORM_BLOCKS]) until the step copies it down. */
static int clip_grad_norm(GpuTrainer *t, float max_norm)
{
    long long n = (long long)t->host->num_params;
    sum_squares_kernel<<<NORM_BLOCKS, NORM_THREADS>>>(t->norm, t->g.grads, n);
    if (LAUNCH_CHECK(sum_squares_kernel) != 0) return -1;
    norm_total_kernel<<<1, 1>>>(t->norm);
    if (LAUNCH_CHECK(norm_total_kernel) != 0) return -1;
    clip_kernel<<<blocks_for(n, 256), 256>>>(t->g.grads, n, t->norm, max_norm);
    return LAUNCH_CHECK(clip_kernel);
}

/* ------------------------------------------------------------------------ */
/* The step and the evaluation                                               */
/* ------------------------------------------------------------------------ */

/* As trainer.c's: a classifier's targets are classes, none is padding. */
static int64_t ignore_index(const Model *m)
{
    return m->cfg.pad_id >= 0 && m->cfg.kind != MODEL_CLASSIFIER ? m->cfg.pad_id
                                                                  : CROSS_ENTROPY_IGNORE_INDEX;
}

/* Loss, count and correct of the logits of w against target (host ids):
 * into t->scalars; with counted > 0, dlogits is the gradient (zeroed first)
 * of a mean over that many targets. */
static int loss_on_device(GpuTrainer *t, GpuWork *w, const int64_t *target, float smoothing,
                          float counted)
{
    int64_t rows = w->w.rows;
    int V = t->host->cfg.tgt_vocab;
    int64_t ignore = ignore_index(t->host);
    for (int64_t i = 0; i < rows; i++)
        if ((target[i] < 0 || target[i] >= V) && target[i] != ignore) {
            fprintf(stderr, "GPU step: target %lld at row %lld is outside [0, %d)\n",
                    (long long)target[i], (long long)i, V);
            return -1;
        }
    if (cuda_ok(cudaMemcpy(t->targets, target, (size_t)rows * sizeof *target,
                           cudaMemcpyHostToDevice), "copying the targets") != 0 ||
        cuda_ok(cudaMemset(t->scalars, 0, 3 * sizeof *t->scalars), "cudaMemset") != 0 ||
        cuda_cross_entropy_forward(&t->scalars[0], &t->scalars[1], t->lse, t->row_loss,
                                   w->w.logits, t->targets, (int)rows, V, ignore,
                                   smoothing) != 0)
        return -1;
    correct_kernel<<<blocks_for(rows, 8), 256>>>(&t->scalars[2], w->w.logits, t->targets, rows,
                                                 V, ignore);
    if (LAUNCH_CHECK(correct_kernel) != 0) return -1;
    if (counted <= 0) return 0;
    return cuda_ok(cudaMemcpy(&t->scalars[3], &counted, sizeof counted, cudaMemcpyHostToDevice),
                   "copying the count") ||
           cuda_ok(cudaMemset(t->dlogits, 0, (size_t)rows * V * sizeof(float)), "cudaMemset") ||
           cuda_cross_entropy_backward(t->dlogits, w->w.logits, t->lse, t->targets,
                                       &t->scalars[3], 1.0f, (int)rows, V, ignore, smoothing);
}

/* (loss * count, count, correct) of the rows at hand, from t->scalars,
 * summed over the ranks into total. */
static int sum_over_ranks(GpuTrainer *t, double total[3])
{
    float x[3];
    if (cuda_ok(cudaMemcpy(x, t->scalars, sizeof x, cudaMemcpyDeviceToHost), "copying the loss"))
        return -1;
    double mine[3] = {x[1] > 0 ? (double)x[0] * x[1] : 0.0, x[1], x[2]};
    if (t->peers.sum) t->peers.sum(t->peers.ctx, mine, total);
    else memcpy(total, mine, sizeof mine);
    return 0;
}

static int gpu_step(void *ctx, const StepConfig *c, const Batch *b, StepResult *res,
                    Error *err)
{
    GpuTrainer *t = (GpuTrainer *)ctx;
    const GpuPeers *p = &t->peers;
    const AdamConfig *cfg = &c->adam;
    float max_norm = c->max_norm;
    double norm = NAN, total[3];
    Batch share = batch_share(b, &t->host->cfg, p->rank, p->ranks);
    Rng drop, *dropout = rank_dropout(&drop, c->dropout_rng, p->rank, p->ranks);
    memset(res, 0, sizeof *res);
    if (share.N != t->N)
        return error_set(err, "GPU step: a batch of %d rows, not the %d it holds", share.N, t->N);
    if (gpu_model_zero_grad(&t->g, err) != 0 ||
        gpu_model_forward(&t->g, &t->train, share.src, share.tgt_in, dropout, err) != 0)
        return -1;
    float counted = (float)batch_counted(b, t->host);
    if (loss_on_device(t, &t->train, share.target, c->label_smoothing, counted) != 0)
        return error_set(err, "GPU step: the cross-entropy failed");
    if (counted > 0 && gpu_model_backward(&t->g, &t->train, t->dlogits, err) != 0) return -1;
    if (p->all_reduce && p->all_reduce(p->ctx, t->g.grads, t->host->num_params, err) != 0)
        return -1;
    if (max_norm > 0 && clip_grad_norm(t, max_norm) != 0)
        return error_set(err, "GPU step: clipping the gradients failed");
    t->step++;
    AdamStep h = hd_adam_hyper(c->lr, cfg->beta1, cfg->beta2, cfg->eps, cfg->weight_decay,
                               cfg->decoupled, t->step);
    if (cuda_adam_step(t->g.params, t->g.grads, t->m, t->v, (long long)t->host->num_params,
                       h) != 0)
        return error_set(err, "GPU step: the Adam update failed");
    if (sum_over_ranks(t, total) != 0 ||
        (max_norm > 0 && cuda_ok(cudaMemcpy(&norm, &t->norm[NORM_BLOCKS], sizeof norm,
                                            cudaMemcpyDeviceToHost), "copying the norm") != 0))
        return error_set(err, "GPU step failed (the line above says where)");
    res->loss = total[1] > 0 ? total[0] / total[1] : NAN;
    res->count = (int64_t)total[1];
    res->correct = (int64_t)total[2];
    res->grad_norm = norm;
    return 0;
}

static int gpu_eval(void *ctx, const Batch *b, StepResult *res, Error *err)
{
    GpuTrainer *t = (GpuTrainer *)ctx;
    Batch share = batch_share(b, &t->host->cfg, t->peers.rank, t->peers.ranks);
    int N = share.N;
    double total[3] = {0.0, 0.0, 0.0};
    GpuWork *w = &t->train;
    if (N > t->N)
        return error_set(err, "GPU evaluation: batches of %d, more than the %d it holds", N, t->N);
    if (N > 0 && N != t->N) {
        if (t->eval.w.N != N) {
            gpu_work_free(&t->eval);
            if (gpu_work_alloc(&t->eval, &t->g, N, t->S, t->T, 0, err) != 0) return -1;
        }
        w = &t->eval;
    }
    if (N > 0 && gpu_model_forward(&t->g, w, share.src, share.tgt_in, NULL, err) != 0) return -1;
    if (N > 0 && loss_on_device(t, w, share.target, 0.0f, 0.0f) != 0)
        return error_set(err, "GPU evaluation: the cross-entropy failed");
    if (N == 0 && cuda_ok(cudaMemset(t->scalars, 0, 3 * sizeof *t->scalars), "cudaMemset") != 0)
        return error_set(err, "GPU evaluation failed");
    if (sum_over_ranks(t, total) != 0)
        return error_set(err, "GPU evaluation: copying the loss failed");
    res->loss += total[0];
    res->count += (int64_t)total[1];
    res->correct += (int64_t)total[2];
    return 0;
}

static int gpu_sync(void *ctx, Model *m, OptimState *opt, Error *err)
{
    GpuTrainer *t = (GpuTrainer *)ctx;
    size_t bytes = m->num_params * sizeof(float);
    if (gpu_model_download(&t->g, m, 0, err) != 0) return -1;
    if (cuda_ok(cudaMemcpy(opt->slots[ADAM_M], t->m, bytes, cudaMemcpyDeviceToHost),
                "cudaMemcpy") != 0 ||
        cuda_ok(cudaMemcpy(opt->slots[ADAM_V], t->v, bytes, cudaMemcpyDeviceToHost),
                "cudaMemcpy") != 0)
        return error_set(err, "GPU: copying the optimizer state back failed");
    opt->step = t->step;
    return 0;
}

static void gpu_close(void *ctx)
{
    GpuTrainer *t = (GpuTrainer *)ctx;
    if (!t) return;
    gpu_work_free(&t->train);
    gpu_work_free(&t->eval);
    gpu_model_free(&t->g);
    cudaFree(t->m), cudaFree(t->v), cudaFree(t->dlogits), cudaFree(t->targets);
    cudaFree(t->lse), cudaFree(t->row_loss), cudaFree(t->scalars), cudaFree(t->norm);
    if (t->peers.close) t->peers.close(t->peers.ctx);
    free(t);
}

extern "C" int gpu_step_device_open(StepDevice *d, const Model *m, const OptimState *opt, int N,
                                    int S, int T, Error *err)
{
    GpuPeers alone = {0, 1, NULL, NULL, NULL, NULL};
    return gpu_step_device_open_peers(d, m, opt, N, S, T, &alone, err);
}

extern "C" int gpu_step_device_open_peers(StepDevice *d, const Model *m, const OptimState *opt,
                                          int N, int S, int T, const GpuPeers *peers, Error *err)
{
    GpuTrainer *t = (GpuTrainer *)calloc(1, sizeof *t);
    size_t bytes = m->num_params * sizeof(float);
    const char *name = peers->all_reduce ? "nccl" : "cuda";
    memset(d, 0, sizeof *d);
    if (!t) {
        if (peers->close) peers->close(peers->ctx);
        return error_set(err, "GPU: out of host memory");
    }
    t->peers = *peers;          /* gpu_close closes them from here on */
    if (m->cfg.kind == MODEL_SET) {
        gpu_close(t);
        return error_set(err, "--device %s: a set model (chapter 11) trains on the CPU only",
                         name);
    }
    if (N < peers->ranks) {
        gpu_close(t);
        return error_set(err, "--batch-size %d is smaller than the %d MPI ranks: every rank "
                         "needs at least one sequence of each batch", N, peers->ranks);
    }
    int device_count = 0;
    if (cudaGetDeviceCount(&device_count) != cudaSuccess || device_count == 0) {
        gpu_close(t);
        return error_set(err, "--device %s: the CUDA runtime finds no GPU on this machine",
                         name);
    }
    t->host = m, t->S = S, t->T = T, t->step = opt->step;
    t->N = share_first(N, peers->rank + 1, peers->ranks) -
           share_first(N, peers->rank, peers->ranks);
    N = t->N;
    if (gpu_model_create(&t->g, m, err) != 0 ||
        gpu_work_alloc(&t->train, &t->g, N, S, T, 1, err) != 0) {
        gpu_close(t);
        return -1;
    }
    t->rows = t->train.w.rows;
    size_t rows = (size_t)t->rows;
    int ok = cuda_ok(cudaMalloc(&t->m, bytes), "cudaMalloc") == 0 &&
             cuda_ok(cudaMalloc(&t->v, bytes), "cudaMalloc") == 0 &&
             cuda_ok(cudaMalloc(&t->dlogits, rows * m->cfg.tgt_vocab * sizeof(float)),
                     "cudaMalloc") == 0 &&
             cuda_ok(cudaMalloc(&t->targets, rows * sizeof(int64_t)), "cudaMalloc") == 0 &&
             cuda_ok(cudaMalloc(&t->lse, rows * sizeof(float)), "cudaMalloc") == 0 &&
             cuda_ok(cudaMalloc(&t->row_loss, rows * sizeof(float)), "cudaMalloc") == 0 &&
             cuda_ok(cudaMalloc(&t->scalars, 4 * sizeof(float)), "cudaMalloc") == 0 &&
             cuda_ok(cudaMalloc(&t->norm, (NORM_BLOCKS + 1) * sizeof(double)),
                     "cudaMalloc") == 0 &&
             cuda_ok(cudaMemcpy(t->m, opt->slots[ADAM_M], bytes, cudaMemcpyHostToDevice),
                     "cudaMemcpy") == 0 &&
             cuda_ok(cudaMemcpy(t->v, opt->slots[ADAM_V], bytes, cudaMemcpyHostToDevice),
                     "cudaMemcpy") == 0;
    if (!ok) {
        gpu_close(t);
        return error_set(err, "GPU: cannot hold the optimizer state of %zu parameters",
                         m->num_params);
    }
    d->name = name;
    d->bytes = 2 * bytes + t->g.bytes + t->train.bytes +
               rows * (m->cfg.tgt_vocab * sizeof(float) + sizeof(int64_t) + 2 * sizeof(float));
    d->ctx = t;
    d->step = gpu_step;
    d->eval = gpu_eval;
    d->sync = gpu_sync;
    d->close = gpu_close;
    return 0;
}
