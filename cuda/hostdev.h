/*
 * hostdev.h - the math the CPU and the GPU share, written once.
 *
 * Every function here is a small inline formula that compiles three ways:
 * as plain C with gcc (the CPU test cuda/test_hostdev.c runs it), as host
 * C++ and as device code with nvcc (the kernel files of this folder call it). So a
 * kernel and its CPU check cannot drift apart in the formula; they can only
 * differ in the order of their float32 sums, which is what the tolerances
 * cover.
 *
 * HD marks a function for both sides: __host__ __device__ under nvcc,
 * nothing under a plain C compiler.
 *
 * What is here, by topic (each names the chapter function it follows):
 *   softmax        the probability of one entry, a whole row, and the
 *                  online (running max / running sum) recurrence of the
 *                  flash-style attention kernel          softmax_forward()
 *   LayerNorm      the row statistics and the three-term input gradient
 *                                                layernorm_forward/backward()
 *   positions      one entry of the sinusoidal table
 *                                             positional_sinusoidal_table()
 *   cross-entropy  one row's loss and gradient, torch F.cross_entropy with
 *                  ignore_index and label_smoothing     cross_entropy()
 *   Adam / AdamW   the update of one parameter, torch.optim semantics
 *                                                             adam_step()
 *
 * What is not here: anything with a loop over threads or a reduction tree;
 * those live in the kernels.
 */
#ifndef CUDA_HOSTDEV_H
#define CUDA_HOSTDEV_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define HD __host__ __device__
#else
#define HD
#endif

/* ------------------------------------------------------------------------ */
/* Softmax                                                                   */
/* ------------------------------------------------------------------------ */

/* exp(x - max) / sum for one entry, given the row's max and 1 / sum.
 * A row whose max is -inf is fully masked: by the project's rule (softmax.h)
 * every probability is 0, never NaN. An entry of -inf gets exp(-inf) = 0. */
static inline HD float hd_softmax_prob(float x, float row_max, float inv_sum)
{
    if (row_max == -INFINITY) return 0.0f;
    return expf(x - row_max) * inv_sum;
}

/* A whole row, serially, in the order of chapter 00's softmax_forward(): the
 * CPU twin the test compares with the chapter and the kernels are checked by. */
static inline HD void hd_softmax_row(float *y, const float *x, int n)
{
    float row_max = -INFINITY;
    for (int c = 0; c < n; c++) row_max = fmaxf(row_max, x[c]);
    if (row_max == -INFINITY) {
        for (int c = 0; c < n; c++) y[c] = 0.0f;
        return;
    }
    float sum = 0.0f;
    for (int c = 0; c < n; c++) {
        y[c] = expf(x[c] - row_max);
        sum += y[c];
    }
    float inv = 1.0f / sum;
    for (int c = 0; c < n; c++) y[c] *= inv;
}

/*
 * The online softmax. A flash-style kernel sees a row of scores one tile at
 * a time and never holds the whole row. It keeps two numbers per row:
 *
 *     m  the largest score seen so far
 *     l  sum over the scores s seen so far of exp(s - m)
 *
 * When a new tile raises the max from m to m', every term already in l was
 * computed against the old max and is too large by exp(m' - m); so
 *
 *     l' = l * exp(m - m') + sum over the new scores of exp(s - m')
 *
 * and the same factor exp(m - m') rescales any sum that was weighted by
 * those terms (the output accumulator sum_j exp(s_j - m) v_j). At the end
 * the softmax is exp(s - m) / l, exactly as if the row had been seen at once.
 *
 * hd_online_rescale() is that factor. While every score seen is -inf (a
 * fully masked row so far) m is -inf, nothing has been summed, and the
 * factor is 0 rather than exp(-inf - -inf) = NaN.
 */
static inline HD float hd_online_rescale(float m_old, float m_new)
{
    if (m_old == -INFINITY) return 0.0f;
    return expf(m_old - m_new);
}

/* One score added to the running (m, l). Kept simple (one score at a time)
 * for the CPU test; the kernel adds a tile at a time with the same two steps. */
static inline HD void hd_online_softmax_add(float *m, float *l, float s)
{
    float m_new = fmaxf(*m, s);
    if (m_new == -INFINITY) return;            /* still nothing to attend to */
    *l = *l * hd_online_rescale(*m, m_new) + expf(s - m_new);
    *m = m_new;
}

/* log(sum_j exp(s_j)) = m + log(l): what the flash forward saves per row so
 * the weights can be rebuilt later as exp(s - lse). -inf for a masked row. */
static inline HD float hd_online_lse(float m, float l)
{
    if (m == -INFINITY || l == 0.0f) return -INFINITY;
    return m + logf(l);
}

/* ------------------------------------------------------------------------ */
/* LayerNorm (chapter 04)                                                    */
/* ------------------------------------------------------------------------ */

/* The mean is kept as a pair, mean = shift + delta (layernorm.c explains
 * why): shift is the row's first value and delta = sum_dev / D the mean
 * distance from it, sum_dev = sum_c (x[c] - shift). A constant row gets
 * delta = 0 exactly. */
static inline HD float hd_layernorm_delta(float sum_dev, int D)
{
    return sum_dev / D;
}

/* The deviation x - mean, made from the pair: x - shift is exact when the two
 * are within a factor 2 of each other, and delta is small, so nothing is
 * lost to the rounding of a large mean to one float. */
static inline HD float hd_layernorm_dev(float x, float shift, float delta)
{
    return (x - shift) - delta;
}

/* 1 / sqrt(var + eps) with the biased variance ss / D, ss = sum (x - mean)^2. */
static inline HD float hd_layernorm_rstd(float ss, int D, float eps)
{
    return 1.0f / sqrtf(ss / D + eps);
}

/* dL/dx for one entry (layernorm.c derives the three terms), with
 * g = dout * weight, n the normalised value, mean_g = mean_c g[c] and
 * mean_gn = mean_c g[c] n[c]. */
static inline HD float hd_layernorm_dx(float g, float n, float mean_g, float mean_gn, float rstd)
{
    return rstd * (g - mean_g - n * mean_gn);
}

/* The statistics of one row, serially, in layernorm_forward()'s order: each
 * sum in blocks of 16 values, the block totals added into the row's. The
 * mean is the pair (x[0], *delta); the forward saves x[0] + *delta. */
static inline HD void hd_layernorm_row_stats(const float *x, int D, float eps, float *delta,
                                             float *rstd)
{
    float shift = x[0], sum = 0.0f;
    for (int c0 = 0; c0 < D; c0 += 16) {
        float block = 0.0f;
        for (int c = c0; c < c0 + 16 && c < D; c++) block += x[c] - shift;
        sum += block;
    }
    *delta = hd_layernorm_delta(sum, D);
    float ss = 0.0f;
    for (int c0 = 0; c0 < D; c0 += 16) {
        float block = 0.0f;
        for (int c = c0; c < c0 + 16 && c < D; c++) {
            float d = hd_layernorm_dev(x[c], shift, *delta);
            block += d * d;
        }
        ss += block;
    }
    *rstd = hd_layernorm_rstd(ss, D, eps);
}

/* ------------------------------------------------------------------------ */
/* Sinusoidal positions (chapter 05)                                         */
/* ------------------------------------------------------------------------ */

/* table[pos, d] of positional_sinusoidal_table(): for the pair (2i, 2i+1),
 * w_i = exp(-(2i / D) ln 10000); sin(pos w_i) at 2i, cos(pos w_i) at 2i + 1.
 * The operations and their order are those of positional.c, so the two
 * differ only by the last bit of the device's expf/sinf/cosf. */
static inline HD float hd_sinusoidal(int pos, int d, int D)
{
    int i = d / 2;
    float log_base = logf(10000.0f);             /* POSITIONAL_BASE */
    float freq = expf(-(float)(2 * i) / (float)D * log_base);
    float angle = (float)pos * freq;
    return d % 2 == 0 ? sinf(angle) : cosf(angle);
}

/* ------------------------------------------------------------------------ */
/* Cross-entropy (chapter 08): torch F.cross_entropy, reduction 'mean'       */
/* ------------------------------------------------------------------------ */

/*
 * For one row of logits x (V,) with target t, label smoothing e and
 * lse = log sum_j exp(x_j), torch's loss is
 *
 *     (1 - e) * (lse - x_t)  +  e * (1/V) * sum_j (lse - x_j)
 *   = lse - (1 - e) x_t - (e / V) sum_j x_j
 *
 * (the smoothed target puts 1 - e + e/V on t and e/V everywhere else). The
 * mean over the batch divides the sum of row losses by the number of rows
 * whose target is not ignore_index; an ignored row contributes nothing, to
 * the loss or to the count. All rows ignored: 0 / 0 = NaN, as in torch.
 *
 * The gradient of the row loss with respect to x_j is
 *
 *     softmax_j - (1 - e) [j == t] - e / V
 *
 * and the mean multiplies it by dloss / count.
 */
static inline HD float hd_ce_row_loss(float lse, float x_target, float sum_x, int V,
                                      float smoothing)
{
    return lse - (1.0f - smoothing) * x_target - smoothing / (float)V * sum_x;
}

static inline HD float hd_ce_grad(float x, float lse, int is_target, int V, float smoothing)
{
    float p = expf(x - lse);                     /* softmax_j */
    return p - (is_target ? 1.0f - smoothing : 0.0f) - smoothing / (float)V;
}

/* One row, serially: lse, then the row loss (0 for an ignored row). Returns
 * 1 if the row counts towards the mean, 0 if its target is ignore_index. */
static inline HD int hd_ce_row(const float *x, int V, int64_t target, int64_t ignore_index,
                               float smoothing, float *row_loss, float *lse_out)
{
    float m = -INFINITY;
    for (int j = 0; j < V; j++) m = fmaxf(m, x[j]);
    float sum_exp = 0.0f, sum_x = 0.0f;
    for (int j = 0; j < V; j++) {
        sum_exp += expf(x[j] - m);
        sum_x += x[j];
    }
    float lse = m + logf(sum_exp);
    *lse_out = lse;
    if (target == ignore_index) {
        *row_loss = 0.0f;
        return 0;
    }
    *row_loss = hd_ce_row_loss(lse, x[target], sum_x, V, smoothing);
    return 1;
}

/* ------------------------------------------------------------------------ */
/* Adam and AdamW (chapter 08): torch.optim semantics                        */
/* ------------------------------------------------------------------------ */

/*
 * The hyperparameters of one step. The host computes the bias corrections in
 * double from the step counter t (1 for the first step), as torch does in
 * Python, and hands them over as floats:
 *
 *     step_size     = lr / (1 - beta1^t)
 *     bc2_sqrt      = sqrt(1 - beta2^t)
 *     decay         = 1 - lr * weight_decay       (AdamW only)
 *
 * hd_adam_hyper() fills the struct; every element then does the same thing.
 */
typedef struct {
    float one_minus_beta1;   /* the lerp weight of the first moment */
    float beta2;
    float one_minus_beta2;
    float eps;
    float weight_decay;      /* Adam: added to the gradient (L2) */
    int decoupled;           /* 1: AdamW, the decay multiplies the parameter */
    float decay;             /* AdamW: 1 - lr * weight_decay */
    float step_size;         /* lr / (1 - beta1^t) */
    float bc2_sqrt;          /* sqrt(1 - beta2^t) */
} AdamStep;

static inline HD AdamStep hd_adam_hyper(double lr, double beta1, double beta2, double eps,
                                        double weight_decay, int decoupled, long long t)
{
    AdamStep h;
    h.one_minus_beta1 = (float)(1.0 - beta1);
    h.beta2 = (float)beta2;
    h.one_minus_beta2 = (float)(1.0 - beta2);
    h.eps = (float)eps;
    h.weight_decay = (float)weight_decay;
    h.decoupled = decoupled;
    h.decay = (float)(1.0 - lr * weight_decay);
    h.step_size = (float)(lr / (1.0 - pow(beta1, (double)t)));
    h.bc2_sqrt = (float)sqrt(1.0 - pow(beta2, (double)t));
    return h;
}

/* torch.lerp(start, end, w): start + w (end - start), computed from the end
 * that is nearer for w >= 0.5 (torch's formula, kept for bit-faithfulness). */
static inline HD float hd_lerp(float start, float end, float w)
{
    return fabsf(w) < 0.5f ? start + w * (end - start) : end - (end - start) * (1.0f - w);
}

/* One parameter p with gradient g and moments m, v, in the order of
 * torch.optim's single-tensor Adam/AdamW:
 *     AdamW:  p *= 1 - lr wd               Adam:  g += wd p
 *     m = lerp(m, g, 1 - beta1)
 *     v = v beta2 + (1 - beta2) g g
 *     p -= step_size * m / (sqrt(v) / bc2_sqrt + eps)                      */
static inline HD void hd_adam_update(float *p, float g, float *m, float *v, AdamStep h)
{
    float param = *p;
    if (h.decoupled)
        param *= h.decay;
    else if (h.weight_decay != 0.0f)
        g = g + h.weight_decay * param;
    float mm = hd_lerp(*m, g, h.one_minus_beta1);
    float vv = *v * h.beta2 + h.one_minus_beta2 * g * g;
    float denom = sqrtf(vv) / h.bc2_sqrt + h.eps;
    *p = param + (-h.step_size) * (mm / denom);
    *m = mm;
    *v = vv;
}

#endif
