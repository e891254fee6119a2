/*
 * schedule.h - learning-rate schedules: the factor the base learning rate is
 * multiplied by at each optimizer step.
 *
 * Transformers are trained with a warm-up: the learning rate starts near 0
 * and grows over the first steps. Early on, Adam's second moment v is
 * estimated from very few gradients, and post-norm layers produce large
 * gradients, so full-size steps then can throw the model somewhere it does
 * not recover from. Two schedules:
 *
 * The cosine schedule with linear warm-up of seeds 000 and 004 (their
 * CosineWarmupScheduler, from the UvA deep learning tutorials), as a
 * function of the scheduler's step counter s (its last_epoch: 0 for the
 * first optimizer step, one more after every scheduler.step()):
 *
 *     factor(s) = 0.5 (1 + cos(pi s / max_iters))        (1 at s = 0, 0 at max_iters)
 *     factor(s) = factor(s) * s / warmup                  while s <= warmup
 *
 * so the first step has factor 0 (no update at all) and the peak is just
 * after the warm-up. Past max_iters the cosine rises again, as the seeds'
 * formula does; train for at most max_iters steps. warmup <= 0 means no
 * warm-up (the seeds' code would divide by zero at s = 0).
 *
 * The Noam schedule of "Attention Is All You Need", section 5.3:
 *
 *     lrate = d_model^-0.5 * min(s^-0.5, s * warmup^-1.5)
 *
 * a linear rise for warmup steps, then a decay as 1/sqrt(s). The paper counts
 * steps from 1, so the optimizer step `step` (from 0, the LambdaLR counter)
 * uses s = step + 1: step 0 is not a division by zero, and every step gets
 * its own rate. (The Annotated Transformer's rate() instead treats step 0 as
 * step 1, so its first two steps share one rate.) The paper uses it as the
 * learning rate itself, with base lr 1 (and Adam betas (0.9, 0.98), eps 1e-9);
 * the peak, at s = warmup, is (d_model * warmup)^-0.5, 7e-4 for the base
 * model (d_model 512, warmup 4000).
 *
 * Read next: data.h.
 */
#ifndef SCHEDULE_H
#define SCHEDULE_H

#include <stdint.h>

double lr_cosine_warmup(int64_t step, int64_t warmup, int64_t max_iters);
double lr_noam(int64_t step, int d_model, int64_t warmup);

#endif
