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

/* ------------------------------------------------------------------------ */
/* Caches (given, not part of the exercise)                                  */
/* ------------------------------------------------------------------------ */

static float *floats(int64_t n)
{
    return calloc((size_t)n, sizeof(float));
}

int encoder_layer_cache_alloc(EncoderLayerCache *c, int N, int S, int D, int H, int F,
                              int norm_first, float eps, float dropout, int backward,
                              Error *err)
{
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
    if (mha_cache_alloc(&c->attn, N, S, S, D, H, D, D, backward, err) != 0) return -1;
    c->N = N, c->S = S, c->D = D, c->H = H, c->F = F;
    c->norm_first = norm_first != 0, c->eps = eps, c->dropout = dropout;
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

/* ------------------------------------------------------------------------ */
/* The layer                                                                 */
/* ------------------------------------------------------------------------ */

int encoder_layer_forward(float *out, EncoderLayerCache *c, const float *src,
                          const EncoderLayerParams *p, const float *bias, Rng *rng)
{
    /* BEGIN SOLUTION */
    int rows = c->N * c->S, n = rows * c->D;
    float drop = c->dropout;
    /* Training with p > 0 draws the four masks, in a fixed order (the
     * attention weights' last); otherwise every dropout is the identity
     * (mask NULL). */
    const uint8_t *m1 = NULL, *mf = NULL, *m2 = NULL;
    c->masks_drawn = 0;
    c->attn.drop = NULL;
    c->attn.dropout_p = 0.0f;
    if (rng && drop > 0.0f) {
        if (dropout_mask(c->mask1, n, drop, rng) != 0 ||
            dropout_mask(c->mask_ffn, rows * c->F, drop, rng) != 0 ||
            dropout_mask(c->mask2, n, drop, rng) != 0 ||
            dropout_mask(c->mask_attn, c->N * c->H * c->S * c->S, drop, rng) != 0)
            return -1;
        m1 = c->mask1, mf = c->mask_ffn, m2 = c->mask2;
        c->attn.drop = c->mask_attn;
        c->attn.dropout_p = drop;
        c->masks_drawn = 1;
    }

    /* Sub-layer 1: self-attention. Post-norm attends over src itself,
     * pre-norm over norm1(src). */
    const float *attn_in = src;
    if (c->norm_first) {
        if (layernorm_forward(c->ln1, c->mean1, c->rstd1, src, p->norm1_weight, p->norm1_bias,
                              1, rows, c->D, c->eps) != 0)
            return -1;
        attn_in = c->ln1;
    }
    if (mha_forward(c->attn_out, &c->attn, attn_in, attn_in, attn_in, &p->self_attn, bias,
                    0) != 0)
        return -1;
    /* res1 = src + dropout1(attn_out); res1 holds the dropped output first. */
    if (dropout_forward(c->res1, c->attn_out, m1, n, drop) != 0 ||
        residual_forward(c->res1, src, c->res1, n) != 0)
        return -1;

    /* Sub-layer 2: the FFN, on norm1(res1) (post) or norm2(res1) (pre). */
    const float *ffn_in;
    if (c->norm_first) {
        if (layernorm_forward(c->ln2, c->mean2, c->rstd2, c->res1, p->norm2_weight,
                              p->norm2_bias, 1, rows, c->D, c->eps) != 0)
            return -1;
        ffn_in = c->ln2;
    } else {
        if (layernorm_forward(c->ln1, c->mean1, c->rstd1, c->res1, p->norm1_weight,
                              p->norm1_bias, 1, rows, c->D, c->eps) != 0)
            return -1;
        ffn_in = c->ln1;
    }
    if (ffn_forward(c->ffn_out, c->ffn_pre, c->ffn_hidden, ffn_in, p->linear1_weight,
                    p->linear1_bias, p->linear2_weight, p->linear2_bias, mf, drop, c->N, c->S,
                    c->D, c->F) != 0)
        return -1;
    /* The second residual: out = ffn_in' + dropout2(ffn_out), where the skip
     * path starts at h (post-norm: h = ln1) or at res1 (pre-norm). */
    const float *skip = c->norm_first ? c->res1 : c->ln1;
    float *sum = c->norm_first ? out : c->res2;
    if (dropout_forward(sum, c->ffn_out, m2, n, drop) != 0 ||
        residual_forward(sum, skip, sum, n) != 0)
        return -1;
    if (!c->norm_first &&
        layernorm_forward(out, c->mean2, c->rstd2, c->res2, p->norm2_weight, p->norm2_bias, 1,
                          rows, c->D, c->eps) != 0)
        return -1;
    return 0;
    /* END SOLUTION */
}

int encoder_layer_backward(float *dsrc, const EncoderLayerGrads *g, const float *dout,
                           const float *src, const EncoderLayerParams *p,
                           EncoderLayerCache *c)
{
    /* BEGIN SOLUTION */
    int rows = c->N * c->S, n = rows * c->D;
    size_t bytes = (size_t)n * sizeof(float);
    float drop = c->dropout;
    const uint8_t *m1 = c->masks_drawn ? c->mask1 : NULL;
    const uint8_t *mf = c->masks_drawn ? c->mask_ffn : NULL;
    const uint8_t *m2 = c->masks_drawn ? c->mask2 : NULL;
    /* Three (N, S, D) scratch buffers; every backward below ADDS, so each is
     * zeroed before it collects a new gradient. */
    float *da = c->d_a, *db = c->d_b, *dc = c->d_c;

    if (!c->norm_first) {
        /* out = norm2(r2): da = dL/dr2. */
        memset(da, 0, bytes);
        if (layernorm_backward(da, g->norm2_weight, g->norm2_bias, dout, c->res2,
                               p->norm2_weight, c->mean2, c->rstd2, 1, rows, c->D) != 0)
            return -1;
        /* r2 = h + dropout2(ffn(h)): h gets da by the skip path (db) and the
         * FFN's input gradient on top. */
        memcpy(db, da, bytes);
        memset(dc, 0, bytes);
        if (dropout_backward(dc, da, m2, n, drop) != 0 ||
            ffn_backward(db, g->linear1_weight, g->linear1_bias, g->linear2_weight,
                         g->linear2_bias, c->d_hidden, dc, c->ln1, c->ffn_pre, c->ffn_hidden,
                         p->linear1_weight, p->linear2_weight, mf, drop, c->N, c->S, c->D,
                         c->F) != 0)
            return -1;
        /* h = norm1(r1): da = dL/dr1. */
        memset(da, 0, bytes);
        if (layernorm_backward(da, g->norm1_weight, g->norm1_bias, db, c->res1,
                               p->norm1_weight, c->mean1, c->rstd1, 1, rows, c->D) != 0)
            return -1;
        /* r1 = src + dropout1(attn(src)): src gets da by the skip path, and
         * three times more through query, key and value. */
        memset(dc, 0, bytes);
        if (residual_backward(dsrc, dc, da, n) != 0) return -1;
        memset(db, 0, bytes);
        if (dropout_backward(db, dc, m1, n, drop) != 0) return -1;
        return mha_backward(dsrc, dsrc, dsrc, &g->self_attn, db, src, src, src, &p->self_attn,
                            &c->attn);
    }

    /* Pre-norm. out = h + dropout2(ffn(n2)): h gets dout by the skip path
     * (db), dc = dL/dffn_out. */
    memcpy(db, dout, bytes);
    memset(dc, 0, bytes);
    if (dropout_backward(dc, dout, m2, n, drop) != 0) return -1;
    /* da = dL/dn2, then n2 = norm2(h) adds its input gradient into db. */
    memset(da, 0, bytes);
    if (ffn_backward(da, g->linear1_weight, g->linear1_bias, g->linear2_weight,
                     g->linear2_bias, c->d_hidden, dc, c->ln2, c->ffn_pre, c->ffn_hidden,
                     p->linear1_weight, p->linear2_weight, mf, drop, c->N, c->S, c->D,
                     c->F) != 0 ||
        layernorm_backward(db, g->norm2_weight, g->norm2_bias, da, c->res1, p->norm2_weight,
                           c->mean2, c->rstd2, 1, rows, c->D) != 0)
        return -1;
    /* h = src + dropout1(attn(n1)): src gets db by the skip path ... */
    memset(dc, 0, bytes);
    if (residual_backward(dsrc, dc, db, n) != 0) return -1;
    memset(db, 0, bytes);
    if (dropout_backward(db, dc, m1, n, drop) != 0) return -1;
    /* ... and through attention (da = dL/dn1, the three inputs added) and
     * norm1. */
    memset(da, 0, bytes);
    if (mha_backward(da, da, da, &g->self_attn, db, c->ln1, c->ln1, c->ln1, &p->self_attn,
                     &c->attn) != 0)
        return -1;
    return layernorm_backward(dsrc, g->norm1_weight, g->norm1_bias, da, src, p->norm1_weight,
                              c->mean1, c->rstd1, 1, rows, c->D);
    /* END SOLUTION */
}

/* ------------------------------------------------------------------------ */
/* The stack                                                                 */
/* ------------------------------------------------------------------------ */

int encoder_cache_alloc(EncoderCache *c, int num_layers, int N, int S, int D, int H, int F,
                        int norm_first, float eps, float dropout, int backward, Error *err)
{
    memset(c, 0, sizeof *c);
    if (num_layers < 1)
        return error_set(err, "encoder: num_layers %d must be at least 1", num_layers);
    c->layers = calloc((size_t)num_layers, sizeof *c->layers);
    if (!c->layers) return error_set(err, "encoder: out of memory for %d layers", num_layers);
    for (int k = 0; k < num_layers; k++) {
        if (encoder_layer_cache_alloc(&c->layers[k], N, S, D, H, F, norm_first, eps, dropout,
                                      backward, err) != 0) {
            c->num_layers = k;
            encoder_cache_free(c);
            return -1;
        }
    }
    c->num_layers = num_layers, c->N = N, c->S = S, c->D = D, c->eps = eps;
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
    memcpy(out, x, (size_t)n * sizeof *out);
    return 0;
    /* END SOLUTION */
}

int encoder_backward(float *dsrc, const EncoderGrads *g, const float *dout, const float *src,
                     const EncoderParams *p, EncoderCache *c)
{
    /* BEGIN SOLUTION */
    int rows = c->N * c->S, n = rows * c->D, K = c->num_layers;
    size_t bytes = (size_t)n * sizeof(float);
    /* dx = dL/dx_K, through the final norm if there is one. */
    float *dx = c->d_a, *dprev = c->d_b;
    memset(dx, 0, bytes);
    if (p->norm_weight) {
        if (layernorm_backward(dx, g->norm_weight, g->norm_bias, dout, c->xs + (size_t)(K - 1) * n,
                               p->norm_weight, c->mean, c->rstd, 1, rows, c->D) != 0)
            return -1;
    } else {
        memcpy(dx, dout, bytes);
    }
    /* Back through the layers, last first; each turns dL/dx_k into dL/dx_{k-1}. */
    for (int k = K - 1; k >= 1; k--) {
        memset(dprev, 0, bytes);
        if (encoder_layer_backward(dprev, &g->layers[k], dx, c->xs + (size_t)(k - 1) * n,
                                   &p->layers[k], &c->layers[k]) != 0)
            return -1;
        float *t = dx;
        dx = dprev, dprev = t;
    }
    return encoder_layer_backward(dsrc, &g->layers[0], dx, src, &p->layers[0], &c->layers[0]);
    /* END SOLUTION */
}
