/*
 * device.h - where a run trains: "cpu"; "cuda", the GPU, which only the
 * CUDA build of the programs has (build/cuda/, make cuda: this file
 * compiled again with WITH_CUDA); "mpi", the processes of an mpirun,
 * which only the MPI build has (build/mpi/, make mpi: this file compiled
 * again with WITH_MPI; mpi/dist.h); or "nccl", one GPU per process of an
 * mpirun, which only the MPI and CUDA build has (build/mpi-cuda/, make
 * mpi-cuda: WITH_CUDA, WITH_MPI and WITH_NCCL). trainer.h has the
 * StepDevice they fill in.
 */
#ifndef DEVICE_H
#define DEVICE_H

#include <stdint.h>

#include "error.h"
#include "model.h"
#include "optim.h"
#include "trainer.h"

/* Fails unless this program can train on the device called name (checked
 * before any work: "cuda" in a build without CUDA fails here). */
int device_check(const char *name, Error *err);

/* The largest training batch a device is opened for: N sequences of S
 * source (and T target) tokens. */
typedef struct {
    int N, S, T;
} BatchSize;

/* Opens the device for model m and optimizer state opt, for training
 * batches of at most `size`: "cpu" leaves d zeroed (train_run then uses the
 * CPU); "cuda" copies both to the GPU; "mpi" shares every batch among the
 * ranks, and a rank that waits longer than timeout seconds for the others
 * ends the job (mpi/dist.h); "nccl" shares it among the ranks' GPUs. */
int device_open(const char *name, StepDevice *d, const Model *m, const OptimState *opt,
                BatchSize size, double timeout, Error *err);

/* The processes of this run: how many, and in *rank which one this is (0 to
 * ranks - 1). 1 and 0 outside mpirun. The MPI build starts MPI here on the
 * first call; the plain build returns mpirun's count too (from OpenMPI's
 * environment), so that a run of the wrong build under mpirun is refused
 * rather than trained N times over. */
int device_ranks(int *rank);

/* Fails on every rank whose hash differs from rank 0's: ranks started with
 * other options or data. 0 in a run of one process. A rank that waits more
 * than timeout seconds for the others ends the job (mpi/dist.h). */
int device_agree(uint64_t hash, double timeout, Error *err);

/* The end of the program: after a failure on any rank (failed != 0) the
 * whole job stops (MPI_Abort; the others may wait in a collective for
 * ever otherwise), else MPI ends normally. Nothing without MPI. */
void device_finish(int failed);

#endif
