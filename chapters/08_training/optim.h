/*
 * optim.h - Adam and AdamW with torch.optim's semantics, and gradient
 * clipping by the global norm (torch.nn.utils.clip_grad_norm_).
 *
 * The optimizer sees the model's parameters as one flat float array of n
 * values, and their gradients as another of the same layout (chapter 07).
 * The update, the two ways of weight decay, and clipping are taught in the
 * chapter's README, "The optimizer: Adam and AdamW" and "Gradient clipping";
 * its appendix says how adam_step follows torch's single-tensor code.
 *
 * Read next: schedule.h (the lr handed to each step).
 */
#ifndef OPTIM_H
#define OPTIM_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

typedef struct {
    float lr;            /* the base learning rate (the schedule multiplies it) */
    float beta1, beta2;  /* decay rates of the two moments */
    float eps;           /* added to the denominator */
    float weight_decay;
    int decoupled;       /* 1: AdamW (decay on the weight), 0: Adam (decay in the gradient) */
} AdamConfig;

/* torch's defaults: lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight_decay 0
 * (Adam) or 0.01 (AdamW). */
AdamConfig adam_default_config(int adamw);

/* Checks the ranges torch checks: lr >= 0, 0 <= beta1, beta2 < 1, eps > 0,
 * weight_decay >= 0, all finite. The one-line error names the training
 * programs' option for lr and weight_decay (--lr, --weight-decay), and the
 * field for beta1, beta2 and eps, which the programs leave at torch's
 * defaults (a case file sets them in its metadata). */
int adam_config_check(const AdamConfig *c, Error *err);

/* An optimizer's state: the steps taken, and the arrays it keeps beside
 * the parameters ("slots", (n,) each, under torch's state names). Adam and
 * AdamW keep two, the moments exp_avg and exp_avg_sq; another optimizer
 * fills in its own (SGD with momentum would keep one, momentum_buffer).
 * The checkpoint, the devices and the ranks move the slots by name and
 * number, whichever optimizer made them. */
#define OPTIM_MAX_SLOTS 2

typedef struct {
    int n_slots;
    const char *slot_names[OPTIM_MAX_SLOTS];
    float *slots[OPTIM_MAX_SLOTS];
    size_t n;
    int64_t step;
} OptimState;

/* Adam's slots: the moments m (exp_avg) and v (exp_avg_sq). */
enum { ADAM_M, ADAM_V };

/* n_slots zeroed slots of n floats under the given names, step 0. */
int optim_state_alloc(OptimState *s, size_t n, int n_slots, const char *const *names,
                      Error *err);
/* Adam's state for n parameters: both moments zero, step 0. */
int adam_state_alloc(OptimState *s, size_t n, Error *err);
void optim_state_free(OptimState *s);

/* One Adam step (AdamW's with c->decoupled) over the s->n parameters:
 * increments s->step first (the first step is t = 1), then updates params
 * (n,), m and v in place from grads (n,). lr is
 * this step's learning rate (the schedule's); c->lr is only the base.
 * Returns 0 (the exercise stub returns -1). */
int adam_step(float *params, const float *grads, OptimState *s, const AdamConfig *c, float lr);

/* Scales grads (n,) in place by max_norm / (total + 1e-6), at most 1, as
 * torch.nn.utils.clip_grad_norm_ does: their global L2 norm ends at most
 * max_norm, and a gradient is never scaled up. Returns total, the norm
 * before clipping, the same on any number of threads. A non-finite total
 * (a NaN or inf gradient) leaves the gradients as they are, where torch
 * would make them all NaN. */
double clip_grad_norm(float *grads, size_t n, float max_norm);

#endif
