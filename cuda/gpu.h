/*
 * gpu.h - chapter 07's whole model and chapter 08's training step on the
 * GPU (model.cu, train.cu), callable from C.
 *
 * The model keeps chapter 07's layout: one flat array of parameters and one
 * of gradients, in state_dict order, now in device memory, and chapter 07's
 * views (ModelParams, with the layers' EncoderLayerParams, ...) pointing
 * into them. The caches are chapter 07's own structs too (ModelWork and the
 * caches inside it), every float pointer a device pointer. So model.cu reads
 * like model.c and the layer files: the same steps, the same names, with
 * the kernels of this folder in place of the C functions.
 *
 * The host Model stays the master copy of the layout and the config;
 * gpu_model_create copies its parameters up, gpu_model_download copies them
 * (and the gradients) back.
 *
 * Every int function returns 0, or -1 with err set (a failing kernel launch
 * prints its own line first).
 */
#ifndef CUDA_GPU_H
#define CUDA_GPU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "error.h"
#include "model.h"
#include "trainer.h"

typedef struct {
    const Model *host;              /* the layout and config; must outlive this */
    float *params, *grads;          /* (num_params,) each, device */
    float *pos_table;               /* (max_len, D) the sinusoidal table (device), or NULL */
    size_t bytes;                   /* the device memory of the three */
    /* chapter 07's views (model_views), pointing into params / grads on the
     * device: host structs of device pointers */
    ModelParams views, grad_views;
} GpuModel;

/* The activations of one batch shape: chapter 07's ModelWork with device
 * buffers, and the batch's ids on the device. */
typedef struct {
    ModelWork w;                    /* every float and mask pointer a device pointer */
    int64_t *src_ids, *tgt_ids;     /* (N, S), (N, T) device copies of the batch's ids */
    void *block;                    /* the one cudaMalloc all buffers live in */
    size_t bytes;                   /* its size */
} GpuWork;

/* Device memory of the model, its gradients and the table, and uploads the
 * parameters of m. The matmuls of everything built on it run on cuBLAS. */
int gpu_model_create(GpuModel *g, const Model *m, Error *err);
void gpu_model_free(GpuModel *g);
/* Copies the parameters (and, with grads, the gradients) back into m. */
int gpu_model_download(const GpuModel *g, Model *m, int grads, Error *err);
int gpu_model_zero_grad(GpuModel *g, Error *err);

/* model_work_alloc / model_work_free on the GPU. */
int gpu_work_alloc(GpuWork *w, const GpuModel *g, int N, int S, int T, int backward, Error *err);
void gpu_work_free(GpuWork *w);

/* model_forward on the GPU: src (N, S) and tgt (N, T) are HOST ids, copied
 * up here (check them first: model_check_ids). rng: training mode; each
 * dropout mask's key is drawn from it in the C model's order and the mask
 * on the GPU, so a GPU run drops the same units as a CPU run with the same
 * seed. The logits
 * are w->w.logits (device). */
int gpu_model_forward(GpuModel *g, GpuWork *w, const int64_t *src, const int64_t *tgt, Rng *rng,
                      Error *err);
/* model_backward on the GPU: ADDS into g->grads; dlogits (rows, Vt) is a
 * DEVICE array. */
int gpu_model_backward(GpuModel *g, GpuWork *w, const float *dlogits, Error *err);

/* The training step and evaluation of trainer.h on the GPU, as a
 * StepDevice: uploads m's parameters and opt's moments and step, and keeps
 * them on the device until sync copies them back. N, S, T: the training
 * batch's shape. */
int gpu_step_device_open(StepDevice *d, const Model *m, const OptimState *opt, int N, int S,
                         int T, Error *err);

/* The other GPUs of a data-parallel run (mpi/nccl.c, --device nccl): each
 * of the ranks runs the step on its share of every batch (batch_share) on
 * its own GPU, all_reduce sums the gradients of every rank into each one's
 * grads (device memory), and every rank applies the same update to its
 * whole copy of the model. sum adds three numbers of every rank in rank
 * order (the losses, counts and correct argmaxes). close ends the run's
 * communicator. */
typedef struct {
    int rank, ranks;
    void *ctx;
    int (*all_reduce)(void *ctx, float *grads, size_t n, Error *err);
    void (*sum)(void *ctx, const double mine[3], double total[3]);
    void (*close)(void *ctx);
} GpuPeers;

/* gpu_step_device_open for rank peers->rank of a data-parallel run, which
 * trains on its share of batches of N: the device is named "nccl" and
 * closes the peers when it closes (on a failure here too). */
int gpu_step_device_open_peers(StepDevice *d, const Model *m, const OptimState *opt, int N,
                               int S, int T, const GpuPeers *peers, Error *err);

#ifdef __cplusplus
}
#endif

#endif
