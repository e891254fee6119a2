/*
 * optim.h - Adam and AdamW with torch.optim's semantics, and gradient
 * clipping by the global norm (torch.nn.utils.clip_grad_norm_).
 *
 * The optimizer sees the model's parameters as one flat float array of n
 * values, and their gradients as another of the same layout (chapter 07 keeps
 * every parameter in one array for exactly this reason).
 *
 * Adam (Kingma & Ba 2015) keeps two moving averages per parameter, the
 * gradient's mean m and its uncentred variance v, and steps each parameter
 * by roughly lr in the direction of m / sqrt(v): a step size that does not
 * depend on the gradient's scale. At step t = 1, 2, ... with gradient g:
 *
 *     Adam:   g = g + wd * p              (L2 regularisation, in the gradient)
 *     AdamW:  p = p * (1 - lr * wd)       (decoupled weight decay, on the weight)
 *     m = beta1 m + (1 - beta1) g
 *     v = beta2 v + (1 - beta2) g^2
 *     p = p - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
 *
 * The bias corrections 1 - beta^t undo the pull towards 0 of averages that
 * start at 0. In Adam the weight decay passes through the moments and is
 * divided by sqrt(v) like the gradient, so parameters with large gradients
 * are hardly decayed; AdamW (Loshchilov & Hutter 2019) decays every weight by
 * the same factor, which is why it is the usual choice for Transformers.
 *
 * adam_step follows torch.optim.Adam/AdamW's single-tensor code (foreach=False)
 * line by line: the order of the operations above, m updated as
 * m.lerp_(g, 1 - beta1), eps added after the division by sqrt(1 - beta2^t).
 * The per-step constants are computed in double from the step counter, as
 * torch does in Python, and the per-element arithmetic in float32.
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
 * weight_decay >= 0, all finite. The one-line error names the command-line
 * option (--lr, --beta1, --beta2, --eps, --weight-decay). */
int adam_config_check(const AdamConfig *c, Error *err);

/* The optimizer's state: the two moments, (n,) each, and the number of
 * steps taken. */
typedef struct {
    float *m, *v;        /* torch's exp_avg and exp_avg_sq */
    size_t n;
    int64_t step;
} AdamState;

/* Zeroed moments for n parameters, step 0. */
int adam_state_alloc(AdamState *s, size_t n, Error *err);
void adam_state_free(AdamState *s);

/* One step over the s->n parameters: increments s->step first (the first
 * step is t = 1), then updates params (n,) in place from grads (n,). lr is
 * this step's learning rate (the schedule's); c->lr is only the base.
 * Returns 0 (the exercise stub returns -1). */
int adam_step(float *params, const float *grads, AdamState *s, const AdamConfig *c, float lr);

/* Scales grads (n,) in place so that their global L2 norm is at most
 * max_norm, as torch.nn.utils.clip_grad_norm_ does:
 *
 *     total = sqrt(sum_i g_i^2)
 *     coef  = max_norm / (total + 1e-6), clamped to at most 1
 *     g_i   = g_i * coef
 *
 * (the 1e-6 keeps a zero gradient from dividing by zero; with coef clamped
 * to 1 gradients are never scaled up). Returns total, the norm before
 * clipping: training logs it, and a growing norm is the first sign of an
 * unstable run. The sum of squares is taken in double, in fixed chunks
 * whose partial sums are added in order, so the result does not depend on
 * the number of threads. A non-finite total (a NaN or inf gradient) leaves
 * the gradients as they are, where torch would make them all NaN, so the
 * caller can see it in the return value and skip the step. */
double clip_grad_norm(float *grads, size_t n, float max_norm);

#endif
