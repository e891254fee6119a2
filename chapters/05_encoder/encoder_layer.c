/*
 * encoder_layer.c - see encoder_layer.h: the encoder layer is glue. Every
 * piece of arithmetic is a function of an earlier chapter: mha_forward
 * (03), layernorm_forward and residual_forward (04), ffn_forward and
 * dropout_forward (this chapter). What this file decides is the order, which
 * activations the backward needs, and how the gradients of a tensor used
 * twice (once by a sub-layer, once by the skip path) are added up.
 *
 * Letters: N batch, S source length, D d_model, H nhead, F dim_feedforward.
 */
#include "encoder_layer.h"

#include "error.h"   /* not_implemented(), used by the exercise stubs */

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "dropout.h"
#include "ffn.h"
#include "layernorm.h"
#include "residual.h"
#include "tensor.h"

/* Given at the end of the file: the glue that keeps the layer's code short. */
static const uint8_t *drawn(const EncoderLayerCache *c, const uint8_t *mask);
static FfnParams ffn_params(const EncoderLayerParams *p);
static FfnCache ffn_cache(const EncoderLayerCache *c);
static int norm_forward(const EncoderLayerCache *c, float *out, float *mean, float *rstd,
                        const float *x, const float *weight, const float *bias);
static int norm_backward(const EncoderLayerCache *c, int which, float *dx, const float *dout,
                         const float *x, const EncoderLayerParams *g,
                         const EncoderLayerParams *p);

/* ------------------------------------------------------------------------ */
/* The layer                                                                 */
/* ------------------------------------------------------------------------ */

/* In training with p > 0, the four dropout masks, drawn in a fixed order (the
 * attention weights' last); otherwise every dropout is the identity. */
static int draw_masks(EncoderLayerCache *c, Rng *rng)
{
    /* BEGIN SOLUTION */
    int rows = c->N * c->S;
    float p = c->dropout;
    c->masks_drawn = 0;
    c->attn.drop = NULL;
    c->attn.dropout_p = 0.0f;
    if (!rng || p <= 0.0f) return 0;
    if (dropout_mask(c->mask1, rows * c->D, p, rng) != 0 ||
        dropout_mask(c->mask_ffn, rows * c->F, p, rng) != 0 ||
        dropout_mask(c->mask2, rows * c->D, p, rng) != 0 ||
        dropout_mask(c->mask_attn, c->N * c->H * c->S * c->S, p, rng) != 0)
        return -1;
    c->attn.drop = c->mask_attn;
    c->attn.dropout_p = p;
    c->masks_drawn = 1;
    return 0;
    /* END SOLUTION */
}

/* Post-norm (norm_first = 0), the paper's layer: the README's formula, one
 * line at a time, each tensor into the cache field of its name. */
static int post_norm_forward(float *out, EncoderLayerCache *c, const float *src,
                             const EncoderLayerParams *p, const float *bias)
{
    /* BEGIN SOLUTION */
    int rows = c->N * c->S, n = rows * c->D;
    FfnParams ffn = ffn_params(p);
    FfnCache ffn_c = ffn_cache(c);
    if (mha_forward(c->attn_out, &c->attn, src, src, src, &p->self_attn, bias, c->causal) != 0 ||
        dropout_forward(c->res1, c->attn_out, drawn(c, c->mask1), n, c->dropout) != 0 ||
        residual_forward(c->res1, src, c->res1, n) != 0 ||
        norm_forward(c, c->ln1, c->mean1, c->rstd1, c->res1, p->norm1_weight,
                     p->norm1_bias) != 0 ||
        ffn_forward(c->ffn_out, &ffn_c, c->ln1, &ffn, rows) != 0 ||
        dropout_forward(c->res2, c->ffn_out, drawn(c, c->mask2), n, c->dropout) != 0 ||
        residual_forward(c->res2, c->ln1, c->res2, n) != 0)
        return -1;
    return norm_forward(c, out, c->mean2, c->rstd2, c->res2, p->norm2_weight, p->norm2_bias);
    /* END SOLUTION */
}

/* Pre-norm (norm_first = 1): the README's second formula; the second
 * residual sum goes straight into out. */
static int pre_norm_forward(float *out, EncoderLayerCache *c, const float *src,
                            const EncoderLayerParams *p, const float *bias)
{
    /* BEGIN SOLUTION */
    int rows = c->N * c->S, n = rows * c->D;
    FfnParams ffn = ffn_params(p);
    FfnCache ffn_c = ffn_cache(c);
    if (norm_forward(c, c->ln1, c->mean1, c->rstd1, src, p->norm1_weight, p->norm1_bias) != 0 ||
        mha_forward(c->attn_out, &c->attn, c->ln1, c->ln1, c->ln1, &p->self_attn, bias,
                    c->causal) != 0 ||
        dropout_forward(c->res1, c->attn_out, drawn(c, c->mask1), n, c->dropout) != 0 ||
        residual_forward(c->res1, src, c->res1, n) != 0 ||
        norm_forward(c, c->ln2, c->mean2, c->rstd2, c->res1, p->norm2_weight,
                     p->norm2_bias) != 0 ||
        ffn_forward(c->ffn_out, &ffn_c, c->ln2, &ffn, rows) != 0 ||
        dropout_forward(out, c->ffn_out, drawn(c, c->mask2), n, c->dropout) != 0)
        return -1;
    return residual_forward(out, c->res1, out, n);
    /* END SOLUTION */
}

int encoder_layer_forward(float *out, EncoderLayerCache *c, const float *src,
                          const EncoderLayerParams *p, const float *bias, Rng *rng)
{
    /* BEGIN SOLUTION */
    if (draw_masks(c, rng) != 0) return -1;
    return c->norm_first ? pre_norm_forward(out, c, src, p, bias)
                         : post_norm_forward(out, c, src, p, bias);
    /* END SOLUTION */
}

/* The backward passes are the README's backward formulas, top to bottom.
 * Every backward they call ADDS into its gradients, so a buffer is zeroed
 * before it collects a new one; the three (N, S, D) scratch buffers d_a,
 * d_b, d_c are named below for the gradient each holds at the time. */
static int post_norm_backward(float *dsrc, const EncoderLayerParams *g, const float *dout,
                              const float *src, const EncoderLayerParams *p,
                              EncoderLayerCache *c)
{
    /* BEGIN SOLUTION */
    int rows = c->N * c->S, n = rows * c->D;
    FfnParams ffn = ffn_params(p);
    FfnParams ffn_g = ffn_params(g);
    FfnCache ffn_c = ffn_cache(c);

    /* out = norm2(res2) */
    float *d_res2 = c->d_a;
    floats_zero(d_res2, n);
    if (norm_backward(c, 2, d_res2, dout, c->res2, g, p) != 0)
        return -1;
    /* res2 = ln1 + dropout2(ffn(ln1)): ln1 gets d_res2 by the skip path and
     * the FFN's input gradient on top. */
    float *d_ln1 = c->d_b, *d_ffn_out = c->d_c;
    floats_copy(d_ln1, d_res2, n);
    floats_zero(d_ffn_out, n);
    if (dropout_backward(d_ffn_out, d_res2, drawn(c, c->mask2), n, c->dropout) != 0 ||
        ffn_backward(d_ln1, &ffn_g, c->d_hidden, d_ffn_out, c->ln1, &ffn, &ffn_c, rows) != 0)
        return -1;
    /* ln1 = norm1(res1) */
    float *d_res1 = c->d_a;
    floats_zero(d_res1, n);
    if (norm_backward(c, 1, d_res1, d_ln1, c->res1, g, p) != 0)
        return -1;
    /* res1 = src + dropout1(attn(src)): src gets d_res1 by the skip path,
     * and three times more through query, key and value. */
    float *d_dropped = c->d_c, *d_attn_out = c->d_b;
    floats_zero(d_dropped, n);
    if (residual_backward(dsrc, d_dropped, d_res1, n) != 0) return -1;
    floats_zero(d_attn_out, n);
    if (dropout_backward(d_attn_out, d_dropped, drawn(c, c->mask1), n, c->dropout) != 0)
        return -1;
    return mha_backward(dsrc, dsrc, dsrc, &g->self_attn, d_attn_out, src, src, src,
                        &p->self_attn, &c->attn);
    /* END SOLUTION */
}

static int pre_norm_backward(float *dsrc, const EncoderLayerParams *g, const float *dout,
                             const float *src, const EncoderLayerParams *p,
                             EncoderLayerCache *c)
{
    /* BEGIN SOLUTION */
    int rows = c->N * c->S, n = rows * c->D;
    FfnParams ffn = ffn_params(p);
    FfnParams ffn_g = ffn_params(g);
    FfnCache ffn_c = ffn_cache(c);

    /* out = res1 + dropout2(ffn(ln2)): res1 gets dout by the skip path. */
    float *d_res1 = c->d_b, *d_ffn_out = c->d_c, *d_ln2 = c->d_a;
    floats_copy(d_res1, dout, n);
    floats_zero(d_ffn_out, n);
    if (dropout_backward(d_ffn_out, dout, drawn(c, c->mask2), n, c->dropout) != 0) return -1;
    /* ln2 = norm2(res1) adds its input gradient into d_res1. */
    floats_zero(d_ln2, n);
    if (ffn_backward(d_ln2, &ffn_g, c->d_hidden, d_ffn_out, c->ln2, &ffn, &ffn_c, rows) != 0 ||
        norm_backward(c, 2, d_res1, d_ln2, c->res1, g, p) != 0)
        return -1;
    /* res1 = src + dropout1(attn(ln1)): src gets d_res1 by the skip path ... */
    float *d_dropped = c->d_c, *d_attn_out = c->d_b, *d_ln1 = c->d_a;
    floats_zero(d_dropped, n);
    if (residual_backward(dsrc, d_dropped, d_res1, n) != 0) return -1;
    floats_zero(d_attn_out, n);
    if (dropout_backward(d_attn_out, d_dropped, drawn(c, c->mask1), n, c->dropout) != 0)
        return -1;
    /* ... and through attention (query, key and value all ln1) and norm1. */
    floats_zero(d_ln1, n);
    if (mha_backward(d_ln1, d_ln1, d_ln1, &g->self_attn, d_attn_out, c->ln1, c->ln1, c->ln1,
                     &p->self_attn, &c->attn) != 0)
        return -1;
    return norm_backward(c, 1, dsrc, d_ln1, src, g, p);
    /* END SOLUTION */
}

int encoder_layer_backward(float *dsrc, const EncoderLayerParams *g, const float *dout,
                           const float *src, const EncoderLayerParams *p,
                           EncoderLayerCache *c)
{
    /* BEGIN SOLUTION */
    return c->norm_first ? pre_norm_backward(dsrc, g, dout, src, p, c)
                         : post_norm_backward(dsrc, g, dout, src, p, c);
    /* END SOLUTION */
}

/* ------------------------------------------------------------------------ */
/* The stack                                                                 */
/* ------------------------------------------------------------------------ */

int encoder_forward(float *out, EncoderCache *c, const float *src, const EncoderParams *p,
                    const float *bias, Rng *rng)
{
    /* BEGIN SOLUTION */
    int rows = c->N * c->S, n = rows * c->D;
    /* Layer k reads x_{k-1} (src for the first) and writes x_k into xs. */
    const float *x = src;
    for (int k = 0; k < c->num_layers; k++) {
        float *y = c->xs + (size_t)k * n;
        if (encoder_layer_forward(y, &c->layers[k], x, &p->layers[k], bias, rng) != 0)
            return -1;
        x = y;
    }
    if (p->norm_weight)
        return layernorm_forward(out, c->mean, c->rstd, x, p->norm_weight, p->norm_bias, 1,
                                 rows, c->D, c->eps);
    floats_copy(out, x, n);
    return 0;
    /* END SOLUTION */
}

int encoder_backward(float *dsrc, const EncoderParams *g, const float *dout, const float *src,
                     const EncoderParams *p, EncoderCache *c)
{
    /* BEGIN SOLUTION */
    int rows = c->N * c->S, n = rows * c->D, K = c->num_layers;
    /* dx = dL/dx_K, through the final norm if there is one. */
    float *dx = c->d_a, *dprev = c->d_b;
    if (p->norm_weight) {
        floats_zero(dx, n);
        if (layernorm_backward(dx, g->norm_weight, g->norm_bias, dout, c->xs + (size_t)(K - 1) * n,
                               p->norm_weight, c->mean, c->rstd, 1, rows, c->D) != 0)
            return -1;
    } else {
        floats_copy(dx, dout, n);
    }
    /* Back through the layers, last first; each turns dL/dx_k into dL/dx_{k-1}. */
    for (int k = K - 1; k >= 1; k--) {
        floats_zero(dprev, n);
        if (encoder_layer_backward(dprev, &g->layers[k], dx, c->xs + (size_t)(k - 1) * n,
                                   &p->layers[k], &c->layers[k]) != 0)
            return -1;
        float *t = dx;
        dx = dprev, dprev = t;
    }
    return encoder_layer_backward(dsrc, &g->layers[0], dx, src, &p->layers[0], &c->layers[0]);
    /* END SOLUTION */
}

/* ------------------------------------------------------------------------ */
/* Given: the caches and small helpers (not part of the exercise)            */
/* ------------------------------------------------------------------------ */

static float *floats(int64_t n)
{
    return calloc((size_t)n, sizeof(float));
}

int encoder_layer_cache_alloc(EncoderLayerCache *c, const LayerDims *dims, int backward,
                              Error *err)
{
    int N = dims->N, S = dims->S, D = dims->D, H = dims->H, F = dims->F;
    float eps = dims->eps, dropout = dims->dropout;
    memset(c, 0, sizeof *c);
    if (N < 1 || S < 1 || D < 1 || H < 1 || F < 1)
        return error_set(err, "encoder layer: sizes must be at least 1 (N %d, S %d, d_model %d, "
                         "nhead %d, dim_feedforward %d)", N, S, D, H, F);
    if (D % H != 0)
        return error_set(err, "encoder layer: d_model %d is not divisible by nhead %d", D, H);
    if (!(eps > 0.0f))
        return error_set(err, "encoder layer: layer_norm_eps %g must be positive", eps);
    if (!(dropout >= 0.0f && dropout <= 1.0f))
        return error_set(err, "encoder layer: dropout %g must lie in [0, 1]", dropout);
    int64_t nsd = (int64_t)N * S * D, nsf = (int64_t)N * S * F;
    if (nsd > INT_MAX || nsf > INT_MAX)
        return error_set(err, "encoder layer: N %d, S %d, d_model %d, dim_feedforward %d need "
                         "buffers larger than this implementation allows (%d floats)", N, S, D,
                         F, INT_MAX);
    if (mha_cache_alloc(&c->attn, &(MhaDims){N, S, S, D, H, D, D}, backward, err) != 0)
        return -1;
    c->N = N, c->S = S, c->D = D, c->H = H, c->F = F;
    c->norm_first = dims->norm_first != 0, c->causal = dims->causal != 0;
    c->eps = eps, c->dropout = dropout;
    c->ln1 = floats(nsd);
    c->mean1 = floats((int64_t)N * S);
    c->rstd1 = floats((int64_t)N * S);
    c->attn_out = floats(nsd);
    c->res1 = floats(nsd);
    c->ln2 = floats(nsd);
    c->mean2 = floats((int64_t)N * S);
    c->rstd2 = floats((int64_t)N * S);
    c->ffn_pre = floats(nsf);
    c->ffn_hidden = floats(nsf);
    c->ffn_out = floats(nsd);
    c->res2 = floats(nsd);
    int ok = c->ln1 && c->mean1 && c->rstd1 && c->attn_out && c->res1 && c->ln2 && c->mean2 &&
             c->rstd2 && c->ffn_pre && c->ffn_hidden && c->ffn_out && c->res2;
    if (ok && dropout > 0.0f) {
        c->mask1 = calloc((size_t)nsd, 1);
        c->mask_ffn = calloc((size_t)nsf, 1);
        c->mask2 = calloc((size_t)nsd, 1);
        c->mask_attn = calloc((size_t)N * H * S * S, 1);
        ok = c->mask1 && c->mask_ffn && c->mask2 && c->mask_attn;
    }
    if (ok && backward) {
        c->d_a = floats(nsd);
        c->d_b = floats(nsd);
        c->d_c = floats(nsd);
        c->d_hidden = floats(nsf);
        ok = c->d_a && c->d_b && c->d_c && c->d_hidden;
    }
    if (!ok) {
        encoder_layer_cache_free(c);
        return error_set(err, "encoder layer: out of memory for N %d, S %d, d_model %d, "
                         "dim_feedforward %d", N, S, D, F);
    }
    return 0;
}

void encoder_layer_cache_free(EncoderLayerCache *c)
{
    mha_cache_free(&c->attn);
    float *bufs[] = {c->ln1, c->mean1, c->rstd1, c->attn_out, c->res1, c->ln2, c->mean2,
                     c->rstd2, c->ffn_pre, c->ffn_hidden, c->ffn_out, c->res2, c->d_a,
                     c->d_b, c->d_c, c->d_hidden};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    free(c->mask1);
    free(c->mask_ffn);
    free(c->mask2);
    free(c->mask_attn);
    memset(c, 0, sizeof *c);
}

static const uint8_t *drawn(const EncoderLayerCache *c, const uint8_t *mask)
{
    return c->masks_drawn ? mask : NULL;
}

/* The FFN's parameters (or gradients) of a layer's parameters (or gradients). */
static FfnParams ffn_params(const EncoderLayerParams *p)
{
    return (FfnParams){p->linear1_weight, p->linear1_bias, p->linear2_weight, p->linear2_bias};
}

static FfnCache ffn_cache(const EncoderLayerCache *c)
{
    return (FfnCache){c->D, c->F, c->ffn_pre, c->ffn_hidden, drawn(c, c->mask_ffn),
                      c->dropout};
}

/* LayerNorm over the layer's N * S rows of D. */
static int norm_forward(const EncoderLayerCache *c, float *out, float *mean, float *rstd,
                        const float *x, const float *weight, const float *bias)
{
    return layernorm_forward(out, mean, rstd, x, weight, bias, 1, c->N * c->S, c->D, c->eps);
}

/* The backward of the layer's norm1 or norm2 (which 1 or 2): dx from dout,
 * the norm's weight and bias gradients added into g. */
static int norm_backward(const EncoderLayerCache *c, int which, float *dx, const float *dout,
                         const float *x, const EncoderLayerParams *g,
                         const EncoderLayerParams *p)
{
    int first = which == 1;
    return layernorm_backward(dx, first ? g->norm1_weight : g->norm2_weight,
                              first ? g->norm1_bias : g->norm2_bias, dout, x,
                              first ? p->norm1_weight : p->norm2_weight,
                              first ? c->mean1 : c->mean2, first ? c->rstd1 : c->rstd2, 1,
                              c->N * c->S, c->D);
}

int encoder_cache_alloc(EncoderCache *c, int num_layers, const LayerDims *dims, int backward,
                        Error *err)
{
    int N = dims->N, S = dims->S, D = dims->D;
    memset(c, 0, sizeof *c);
    if (num_layers < 1)
        return error_set(err, "encoder: num_layers %d must be at least 1", num_layers);
    c->layers = calloc((size_t)num_layers, sizeof *c->layers);
    if (!c->layers) return error_set(err, "encoder: out of memory for %d layers", num_layers);
    for (int k = 0; k < num_layers; k++) {
        if (encoder_layer_cache_alloc(&c->layers[k], dims, backward, err) != 0) {
            c->num_layers = k;
            encoder_cache_free(c);
            return -1;
        }
    }
    c->num_layers = num_layers, c->N = N, c->S = S, c->D = D, c->eps = dims->eps;
    int64_t nsd = (int64_t)N * S * D;
    c->xs = floats(nsd * num_layers);
    c->mean = floats((int64_t)N * S);
    c->rstd = floats((int64_t)N * S);
    int ok = c->xs && c->mean && c->rstd;
    if (ok && backward) {
        c->d_a = floats(nsd);
        c->d_b = floats(nsd);
        ok = c->d_a && c->d_b;
    }
    if (!ok) {
        encoder_cache_free(c);
        return error_set(err, "encoder: out of memory for %d layers of N %d, S %d, d_model %d",
                         num_layers, N, S, D);
    }
    return 0;
}

void encoder_cache_free(EncoderCache *c)
{
    for (int k = 0; c->layers && k < c->num_layers; k++) encoder_layer_cache_free(&c->layers[k]);
    free(c->layers);
    free(c->xs);
    free(c->mean);
    free(c->rstd);
    free(c->d_a);
    free(c->d_b);
    memset(c, 0, sizeof *c);
}
