/*
 * training_case.h - evaluating a chapter 08 case file: the work behind
 * `build/08_training --case IN --out OUT`, kept in the library so the tests
 * can hand it broken cases directly.
 *
 * Ops, their tensors and metadata (the README has the same table). Letters:
 * R rows of logits, V classes, n values, steps optimizer steps; float tensors
 * are F32 unless said otherwise. Scalars (loss, count, correct, total_norm)
 * have shape (), what torch returns for a reduced loss and what
 * safetensors stores as a 0-dimensional tensor.
 *
 *   cross_entropy           logits (R, V), target I64 (R,)
 *                           -> loss (), count I64 (), correct I64 ()
 *   cross_entropy_backward  the same -> loss, count, correct,
 *                           grad_logits (R, V) = d(mean loss) / d logits
 *                           metadata: ignore_index (default -100), label_smoothing
 *                           (default 0, in [0, 1]); every target is ignore_index or
 *                           in 0..V-1. All rows ignored: loss NaN, gradient 0.
 *   adam                    params (n,), grads (steps, n): the gradient of step k in row k;
 *                           optional lrs (steps,): step k's learning rate (else lr for all)
 *                           -> params_after (n,), exp_avg (n,), exp_avg_sq (n,)
 *                           metadata: steps (optional: the rows of grads), lr, beta1, beta2, eps,
 *                           weight_decay, decoupled (default false: Adam; true: AdamW);
 *                           missing ones take torch's defaults
 *   clip_grad_norm          grads (n,) -> grads_clipped (n,), total_norm ()
 *                           metadata: max_norm (required, > 0)
 *   lr_cosine               steps I64 (n,) -> factor F64 (n,)
 *                           metadata: warmup (required, >= 0), max_iters (required, >= 1)
 *   lr_noam                 steps I64 (n,) -> factor F64 (n,)
 *                           metadata: d_model (required, >= 1), warmup (required, >= 1)
 *   seq_dataset             (no tensors) -> x I64 (n, S), y I64 (n, S)
 *                           metadata: task (reverse or copy), n, seq_len, num_categories,
 *                           rng_seed, rng_stream (default 0)
 *   batcher_shuffle         (no tensors) -> order I64 (epochs, n): the permutation of
 *                           each epoch, batcher_shuffle called once per epoch on one Rng
 *                           metadata: n, epochs, rng_seed, rng_stream (default 0)
 *
 * The schedules' factors are F64: C computes them in double with the same
 * formula as the reference, so they are compared to double precision.
 *
 * Everything is checked before any arithmetic: each tensor's presence, dtype
 * and shape, targets inside the classes, options in range. A problem is one
 * line in err naming the file (or "(case)" for a TensorFile built in memory)
 * and the problem, and -1; run_case_file then writes no output file.
 */
#ifndef TRAINING_CASE_H
#define TRAINING_CASE_H

#include "safetensors.h"
#include "trainer.h"

/* The CaseEval of the chapter program. */
int training_case_eval(const TensorFile *in, TensorFile *out, Error *err);

/* A train_parity case run on the device `open` opens (the GPU case runner
 * passes gpu_step_device_open; NULL: the CPU, as training_case_eval). */
int training_case_parity(const TensorFile *in, TensorFile *out, StepDeviceOpen open,
                         Error *err);

#endif
