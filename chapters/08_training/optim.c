/*
 * optim.c - Adam, AdamW and the global-norm clipping (the contract in
 * optim.h; the formulas in the chapter's README).
 */
#include "optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"   /* not_implemented(), used by the exercise stubs */

/* Given helpers, defined at the end of the file. */
static inline float lerp(float start, float end, float w);

int adam_step(float *params, const float *grads, OptimState *s, const AdamConfig *c, float lr)
{
    /* BEGIN SOLUTION */
    s->step++;
    /* The step's constants, in double as torch computes them in Python. */
    double t = (double)s->step;
    double bias_correction1 = 1.0 - pow((double)c->beta1, t);
    double bias_correction2 = 1.0 - pow((double)c->beta2, t);
    const float step_size = (float)((double)lr / bias_correction1);
    const float bc2_sqrt = (float)sqrt(bias_correction2);
    const float one_minus_beta1 = (float)(1.0 - (double)c->beta1);
    const float one_minus_beta2 = (float)(1.0 - (double)c->beta2);
    const float beta2 = c->beta2, eps = c->eps, wd = c->weight_decay;
    const float decay = (float)(1.0 - (double)lr * (double)wd);   /* AdamW */
    const int decoupled = c->decoupled;
    float *m = s->slots[ADAM_M], *v = s->slots[ADAM_V];
    const int64_t n = (int64_t)s->n;

    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float p = params[i], g = grads[i];
        if (wd != 0.0f) {
            if (decoupled) p = p * decay;      /* AdamW: decay the weight itself */
            else g = g + wd * p;               /* Adam: L2 term in the gradient */
        }
        /* torch's operations in torch's order: m.lerp_(g, 1 - beta1);
         * v.mul_(beta2).addcmul_(g, g, value=1 - beta2);
         * denom = v.sqrt() / bc2_sqrt + eps; p.addcdiv_(m, denom, value=-step_size).
         * (Not bit for bit with torch's float32 run: its vector kernels fuse
         * some multiply-adds, which round once instead of twice.) */
        float mi = lerp(m[i], g, one_minus_beta1);
        float vi = v[i] * beta2;
        vi = vi + one_minus_beta2 * g * g;
        float denom = sqrtf(vi) / bc2_sqrt + eps;
        params[i] = p + -step_size * mi / denom;
        m[i] = mi;
        v[i] = vi;
    }
    return 0;
    /* END SOLUTION */
}

/* The sum of squares is split into this many chunks of equal size whatever
 * the thread count; each chunk is summed in order, then the chunks in order. */
#define CLIP_CHUNKS 64

double clip_grad_norm(float *grads, size_t n, float max_norm)
{
    /* BEGIN SOLUTION */
    double partial[CLIP_CHUNKS] = {0};
    const int64_t len = (int64_t)n, chunk = (len + CLIP_CHUNKS - 1) / CLIP_CHUNKS;
    #pragma omp parallel for schedule(static)
    for (int c = 0; c < CLIP_CHUNKS; c++) {
        int64_t begin = c * chunk, end = begin + chunk < len ? begin + chunk : len;
        double sum = 0.0;
        for (int64_t i = begin; i < end; i++) sum += (double)grads[i] * grads[i];
        partial[c] = sum;
    }
    double sum = 0.0;
    for (int c = 0; c < CLIP_CHUNKS; c++) sum += partial[c];
    double total = sqrt(sum);

    double coef = (double)max_norm / (total + 1e-6);
    if (coef < 1.0) {               /* false for coef >= 1 and for a NaN total */
        const float f = (float)coef;
        #pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < len; i++) grads[i] *= f;
    }
    return total;
    /* END SOLUTION */
}

/* ------------------------------------------------------------------------ */
/* Given: not part of the exercise                                           */
/* ------------------------------------------------------------------------ */

AdamConfig adam_default_config(int adamw)
{
    return (AdamConfig){.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
                        .weight_decay = adamw ? 0.01f : 0.0f, .decoupled = adamw ? 1 : 0};
}

int adam_config_check(const AdamConfig *c, Error *err)
{
    /* Each test is written so that NaN fails it. */
    if (!(c->lr >= 0.0f && isfinite(c->lr)))
        return error_set(err, "--lr %g: the learning rate must be a finite number >= 0", c->lr);
    if (!(c->beta1 >= 0.0f && c->beta1 < 1.0f))
        return error_set(err, "beta1 %g: Adam's beta1 must lie in [0, 1)", c->beta1);
    if (!(c->beta2 >= 0.0f && c->beta2 < 1.0f))
        return error_set(err, "beta2 %g: Adam's beta2 must lie in [0, 1)", c->beta2);
    if (!(c->eps > 0.0f && isfinite(c->eps)))
        return error_set(err, "eps %g: Adam's eps must be a finite number > 0", c->eps);
    if (!(c->weight_decay >= 0.0f && isfinite(c->weight_decay)))
        return error_set(err, "--weight-decay %g: the weight decay must be a finite number >= 0",
                         c->weight_decay);
    return 0;
}

int optim_state_alloc(OptimState *s, size_t n, int n_slots, const char *const *names,
                      Error *err)
{
    memset(s, 0, sizeof *s);
    if (n_slots < 0 || n_slots > OPTIM_MAX_SLOTS)
        return error_set(err, "an optimizer with %d slots: at most %d", n_slots,
                         OPTIM_MAX_SLOTS);
    s->n_slots = n_slots;
    s->n = n;
    for (int i = 0; i < n_slots; i++) {
        s->slot_names[i] = names[i];
        s->slots[i] = calloc(n ? n : 1, sizeof *s->slots[i]);
        if (!s->slots[i]) {
            optim_state_free(s);
            return error_set(err, "out of memory for the optimizer state of %zu parameters",
                             n);
        }
    }
    return 0;
}

int adam_state_alloc(OptimState *s, size_t n, Error *err)
{
    static const char *const names[] = {"exp_avg", "exp_avg_sq"};
    return optim_state_alloc(s, n, 2, names, err);
}

void optim_state_free(OptimState *s)
{
    for (int i = 0; i < OPTIM_MAX_SLOTS; i++) free(s->slots[i]);
    memset(s, 0, sizeof *s);
}

/* torch.lerp(start, end, w) = start + w (end - start), computed from the end
 * nearer to the result (torch's CPU formula, kept so the rounding matches). */
static inline float lerp(float start, float end, float w)
{
    float diff = end - start;
    return w < 0.5f ? start + w * diff : end - diff * (1.0f - w);
}
