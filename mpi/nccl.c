/*
 * nccl.c - see dist.h: the "nccl" StepDevice, data-parallel training on
 * one GPU per MPI rank.
 *
 * MPI starts the ranks and carries the small things: which GPU of its
 * machine each rank takes, NCCL's id of the run (rank 0 makes it, every
 * rank receives it), and the three numbers of every step (dist_sum_counts,
 * in rank order). NCCL carries the big one: the gradient, summed from GPU
 * memory to GPU memory with ncclAllReduce. The step itself is
 * cuda/train.cu's, on the rank's share of the batch (GpuPeers in gpu.h).
 *
 * Every rank keeps the whole model and all of Adam's moments (no ZeRO
 * here): after the all-reduce every rank holds the same gradient and takes
 * the same step, so the copies never drift apart.
 */
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>
#include <stdlib.h>

#include "dist.h"
#include "gpu.h"

typedef struct {
    ncclComm_t comm;
    int ranks;
} Nccl;

/* Sums every rank's gradient into every rank's, in place, on the default
 * stream: the kernels of the step before and after it wait their turn. */
static int all_reduce(void *ctx, float *grads, size_t n, Error *err)
{
    Nccl *c = ctx;
    ncclResult_t r = ncclAllReduce(grads, grads, n, ncclFloat, ncclSum, c->comm, 0);
    if (r != ncclSuccess)
        return error_set(err, "--device nccl: the all-reduce of the gradients failed: %s",
                         ncclGetErrorString(r));
    return 0;
}

static void sum(void *ctx, const double mine[3], double total[3])
{
    dist_sum_counts(mine, total, ((Nccl *)ctx)->ranks);
}

static void nccl_close(void *ctx)
{
    Nccl *c = ctx;
    if (c->comm) ncclCommDestroy(c->comm);
    free(c);
}

int nccl_step_device_open(StepDevice *d, const Model *m, const OptimState *opt, int N, int S,
                          int T, Error *err)
{
    int rank, R = dist_ranks(&rank), local_rank, local_ranks, gpus = 0;

    /* The ranks of this machine, numbered from 0: rank i takes GPU i. */
    MPI_Comm local;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local);
    MPI_Comm_rank(local, &local_rank);
    MPI_Comm_size(local, &local_ranks);
    MPI_Comm_free(&local);
    if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0)
        return error_set(err, "--device nccl: the CUDA runtime finds no GPU on this machine");
    if (local_ranks > gpus)
        return error_set(err, "--device nccl: %d ranks on this machine, which has %d GPU(s): "
                         "one rank per GPU", local_ranks, gpus);
    if (cudaSetDevice(local_rank) != cudaSuccess)
        return error_set(err, "--device nccl: rank %d cannot take GPU %d", rank, local_rank);

    /* The order of the sum. Ring and Tree, NCCL's own algorithms, add in an
     * order fixed by the message's size and the ranks' places on the GPUs,
     * the same in every step (the gradient's size never changes) and every
     * run. NVLS, the NVSwitch's reduction in hardware, may not (NVIDIA/nccl
     * issue 1497; PyTorch's deterministic mode leaves it out the same way).
     * A NCCL_ALGO of the user's own stays. */
    setenv("NCCL_ALGO", "^NVLS", 0);

    ncclUniqueId id;
    ncclResult_t r = rank == 0 ? ncclGetUniqueId(&id) : ncclSuccess;
    if (r != ncclSuccess)
        return error_set(err, "--device nccl: no NCCL id: %s", ncclGetErrorString(r));
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    Nccl *c = calloc(1, sizeof *c);
    if (!c) return error_set(err, "out of memory for the NCCL device");
    c->ranks = R;
    r = ncclCommInitRank(&c->comm, R, id, rank);
    if (r != ncclSuccess) {
        c->comm = NULL;
        nccl_close(c);
        return error_set(err, "--device nccl: rank %d of %d cannot join NCCL's communicator: "
                         "%s", rank, R, ncclGetErrorString(r));
    }
    GpuPeers peers = {rank, R, c, all_reduce, sum, nccl_close};
    return gpu_step_device_open_peers(d, m, opt, N, S, T, &peers, err);
}
