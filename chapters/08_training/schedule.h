/*
 * schedule.h - learning-rate schedules: the factor the base learning rate is
 * multiplied by at each optimizer step. Why a warm-up, the two formulas and
 * their values at a few steps are in the chapter's README, "Learning-rate
 * schedules".
 *
 * Both take the 0-based optimizer step (the counter of torch's schedulers:
 * 0 for the first step) and compute in double.
 *
 * Read next: data.h.
 */
#ifndef SCHEDULE_H
#define SCHEDULE_H

#include <stdint.h>

/* The factor of seeds 000 and 004's CosineWarmupScheduler at counter step:
 * 0.5 (1 + cos(pi step / max_iters)), times step / warmup while step <=
 * warmup. 0 at step 0; past max_iters it rises again, as the seeds' formula
 * does. warmup <= 0: no warm-up. */
double lr_cosine_warmup(int64_t step, int64_t warmup, int64_t max_iters);

/* The Noam schedule of "Attention Is All You Need" (section 5.3) with the
 * paper's step s = step + 1, counted from 1: d_model^-0.5 * min(s^-0.5,
 * s * warmup^-1.5). */
double lr_noam(int64_t step, int d_model, int64_t warmup);

#endif
