/*
 * dist.h - data-parallel training on MPI: the "mpi" StepDevice of the MPI
 * build (make mpi: build/mpi/NN_name, runtime/device.c compiled again with
 * WITH_MPI, which calls what is here). Chapter 08's README, section "Data
 * parallelism", teaches it.
 *
 * Every rank holds the whole model, builds the same global batch (the same
 * data Rng), and in each step:
 *   1. runs forward and backward on its own contiguous share of the batch's
 *      rows, on this CPU (chapter 07's model, chapter 08's loss);
 *   2. weights its gradient by its share of the counted targets (the loss is
 *      a mean over all of them);
 *   3. reduce-scatter: sends each rank that rank's slice of the parameters'
 *      gradient (MPI_Alltoallv), and sums the slices it receives in rank
 *      order, so that the sum, and every bit of the run, never depends on
 *      MPI's choice of reduction order;
 *   4. clips by the global norm (the slices' squared sums, gathered and
 *      summed in rank order) and applies Adam to its slice alone: each rank
 *      keeps Adam's moments for its slice only (ZeRO stage 1);
 *   5. all-gather: every rank receives every slice of the new parameters.
 * Evaluation shares the rows too and sums (loss * count, count, correct) in
 * rank order.
 *
 * It does not: overlap communication with the backward pass, or survive a
 * rank that dies (MPI's default error handler stops the job, and a rank
 * that stops answering is waited for --mpi-timeout seconds, then the job is
 * ended; the last checkpoint, written atomically, is whole).
 */
#ifndef DIST_H
#define DIST_H

#include <stdint.h>

#include "error.h"
#include "model.h"
#include "optim.h"
#include "trainer.h"

/* See device.h: device_ranks, device_agree, device_finish. */
int dist_ranks(int *rank);
int dist_agree(uint64_t hash, double timeout, Error *err);
void dist_finish(int failed);

/* Gathers (loss * count, count, correct) of every rank and sums them in
 * rank order: the same three numbers in every rank's total. */
void dist_sum_counts(const double mine[3], double total[3], int R);

/* The "mpi" device for model m (the host model itself: the ranks compute on
 * this CPU, and every rank's m holds the same parameters after each step)
 * and opt (each rank copies its slice of the moments): training batches of
 * N >= ranks sequences of S (and T) tokens. sync gathers the moments into
 * rank 0's opt (a collective: every rank calls it). A rank that waits more
 * than timeout seconds (and 50 steps' time) for the others at a step, an
 * evaluation batch or a checkpoint ends the job, naming the ranks that did
 * not come. */
int dist_step_device_open(StepDevice *d, const Model *m, const OptimState *opt, int N, int S,
                          int T, double timeout, Error *err);

/* The "nccl" device of the MPI and CUDA build (make mpi-cuda, mpi/nccl.c):
 * one GPU per rank (the rank's number on its machine picks it), the ranks'
 * gradients summed with NCCL's all-reduce, every rank keeping the whole of
 * Adam's state (cuda/gpu.h, GpuPeers). */
int nccl_step_device_open(StepDevice *d, const Model *m, const OptimState *opt, int N, int S,
                          int T, Error *err);

#endif
