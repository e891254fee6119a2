/*
 * device.c - see device.h.
 */
#include "device.h"

#include <stdlib.h>
#include <string.h>

#ifdef WITH_CUDA            /* the CUDA build of this file: build/cuda/device.o */
#include "gpu.h"
#endif
#ifdef WITH_MPI             /* the MPI build of this file: build/mpi/device.o */
#include "dist.h"
#endif

int device_check(const char *name, Error *err)
{
    if (strcmp(name, "cpu") == 0) return 0;
    if (strcmp(name, "cuda") == 0) {
#ifdef WITH_CUDA
        return 0;
#else
        return error_set(err, "--device cuda: this program is built without CUDA; build/cuda/ "
                              "has the CUDA build (make cuda)");
#endif
    }
    if (strcmp(name, "mpi") == 0) {
#ifdef WITH_MPI
        return 0;
#else
        return error_set(err, "--device mpi: this program is built without MPI; build/mpi/ "
                              "has the MPI build (make mpi), run as mpirun -np N build/mpi/...");
#endif
    }
    if (strcmp(name, "nccl") == 0) {
#ifdef WITH_NCCL
        return 0;
#else
        return error_set(err, "--device nccl: this program is built without NCCL; "
                              "build/mpi-cuda/ has the build (make mpi-cuda), run as "
                              "mpirun -np N build/mpi-cuda/... with one GPU per rank");
#endif
    }
    return error_set(err, "--device: '%s' is not cpu, cuda, mpi or nccl", name);
}

int device_open(const char *name, StepDevice *d, const Model *m, const OptimState *opt,
                BatchSize size, double timeout, Error *err)
{
    memset(d, 0, sizeof *d);
    if (device_check(name, err) != 0) return -1;
    int N = size.N, S = size.S, T = size.T;
    (void)m, (void)opt, (void)N, (void)S, (void)T, (void)timeout;
#ifdef WITH_CUDA
    if (strcmp(name, "cuda") == 0) return gpu_step_device_open(d, m, opt, N, S, T, err);
#endif
#ifdef WITH_MPI
    if (strcmp(name, "mpi") == 0) return dist_step_device_open(d, m, opt, N, S, T, timeout, err);
#endif
#ifdef WITH_NCCL
    if (strcmp(name, "nccl") == 0) return nccl_step_device_open(d, m, opt, N, S, T, err);
#endif
    return 0;
}

#ifdef WITH_MPI
int device_ranks(int *rank) { return dist_ranks(rank); }
int device_agree(uint64_t hash, double timeout, Error *err)
{
    return dist_agree(hash, timeout, err);
}
void device_finish(int failed) { dist_finish(failed); }
#else
int device_ranks(int *rank)
{
    const char *size = getenv("OMPI_COMM_WORLD_SIZE"), *me = getenv("OMPI_COMM_WORLD_RANK");
    *rank = me ? atoi(me) : 0;
    return size && atoi(size) > 1 ? atoi(size) : 1;
}

int device_agree(uint64_t hash, double timeout, Error *err)
{
    (void)hash, (void)timeout, (void)err;
    return 0;
}

void device_finish(int failed) { (void)failed; }
#endif
