/*
 * decoder_layer.c - see decoder_layer.h. The layer is chapter 03's attention
 * twice and chapter 05's feed-forward block, glued with chapter 04's
 * LayerNorm and residual additions; the only new thing is the bookkeeping of
 * which buffer holds which activation.
 */
#include "decoder_layer.h"

#include <stdlib.h>
#include <string.h>

#include "dropout.h"
#include "error.h"
#include "ffn.h"
#include "layernorm.h"
#include "residual.h"
#include "tensor.h"

/* Given at the end of the file: the glue that keeps the layer's code short. */
static const uint8_t *drawn(const DecoderLayerCache *c, const uint8_t *mask);
static FfnParams ffn_params(const DecoderLayerParams *p);
static FfnCache ffn_cache(const DecoderLayerCache *c);
static int norm_forward(const DecoderLayerCache *c, int k, float *out, const float *x,
                        const DecoderLayerParams *p);
static int norm_backward(const DecoderLayerCache *c, int k, float *dx,
                         const DecoderLayerParams *g, const float *dout, const float *x,
                         const DecoderLayerParams *p);
static int alloc_floats(float **p, size_t n, int *ok);

/* ------------------------------------------------------------------------ */
/* The layer                                                                 */
/* ------------------------------------------------------------------------ */

/* In training with p > 0, the masks of dropout1, dropout2, the FFN's hidden
 * layer and dropout3, then those of the two attentions' weights, in that
 * order; otherwise every dropout is the identity. */
static int draw_masks(DecoderLayerCache *c, Rng *rng)
{
    /* BEGIN SOLUTION */
    int N = c->N, T = c->T, n = N * T * c->D;
    float p = c->dropout;
    c->masks_drawn = rng != NULL && p > 0.0f;
    if (c->masks_drawn &&
        (dropout_mask(c->mask[0], n, p, rng) != 0 ||
         dropout_mask(c->mask[1], n, p, rng) != 0 ||
         dropout_mask(c->ffn_mask, N * T * c->F, p, rng) != 0 ||
         dropout_mask(c->mask[2], n, p, rng) != 0 ||
         dropout_mask(c->sa_mask, N * c->H * T * T, p, rng) != 0 ||
         dropout_mask(c->ca_mask, N * c->H * T * c->S, p, rng) != 0))
        return -1;
    c->sa.drop = c->masks_drawn ? c->sa_mask : NULL;
    c->ca.drop = c->masks_drawn ? c->ca_mask : NULL;
    c->sa.dropout_p = c->ca.dropout_p = c->masks_drawn ? p : 0.0f;
    return 0;
    /* END SOLUTION */
}

/* Sub-layer k on its input x, dropout included, into c->tmp: masked
 * self-attention (k = 0), cross-attention over the memory (1), the FFN (2). */
static int sublayer_forward(DecoderLayerCache *c, int k, const float *x, const float *memory,
                            const DecoderLayerParams *p, const DecoderMasks *m)
{
    /* BEGIN SOLUTION */
    int rows = c->N * c->T, rc;
    if (k == 0) {
        rc = mha_forward(c->tmp, &c->sa, x, x, x, &p->self_attn, m->sa_bias, m->sa_causal);
    } else if (k == 1) {
        rc = mha_forward(c->tmp, &c->ca, x, memory, memory, &p->multihead_attn, m->ca_bias, 0);
    } else {
        FfnParams ffn = ffn_params(p);
        FfnCache ffn_c = ffn_cache(c);
        rc = ffn_forward(c->tmp, &ffn_c, x, &ffn, rows);
    }
    if (rc != 0) return -1;
    return dropout_forward(c->tmp, c->tmp, drawn(c, c->mask[k]), rows * c->D, c->dropout);
    /* END SOLUTION */
}

/* Post-norm, the paper's layer: x_{k+1} = norm_k(x_k + f_k(x_k)), with x_0
 * = tgt and x_3 = out. norm_in[k] keeps the sum, norm_out[k] is x_{k+1}. */
static int post_norm_forward(float *out, DecoderLayerCache *c, const float *tgt,
                             const float *memory, const DecoderLayerParams *p,
                             const DecoderMasks *m)
{
    /* BEGIN SOLUTION */
    int n = c->N * c->T * c->D;
    const float *x = tgt;
    for (int k = 0; k < 3; k++) {
        float *next = k < 2 ? c->norm_out[k] : out;
        if (sublayer_forward(c, k, x, memory, p, m) != 0 ||
            residual_forward(c->norm_in[k], x, c->tmp, n) != 0 ||
            norm_forward(c, k, next, c->norm_in[k], p) != 0)
            return -1;
        x = next;
    }
    return 0;
    /* END SOLUTION */
}

/* Pre-norm (norm_first=True): x_{k+1} = x_k + f_k(norm_k(x_k)). norm_in[k]
 * keeps x_k, norm_out[k] is norm_k(x_k). */
static int pre_norm_forward(float *out, DecoderLayerCache *c, const float *tgt,
                            const float *memory, const DecoderLayerParams *p,
                            const DecoderMasks *m)
{
    /* BEGIN SOLUTION */
    int n = c->N * c->T * c->D;
    floats_copy(c->norm_in[0], tgt, n);
    for (int k = 0; k < 3; k++) {
        float *next = k < 2 ? c->norm_in[k + 1] : out;
        if (norm_forward(c, k, c->norm_out[k], c->norm_in[k], p) != 0 ||
            sublayer_forward(c, k, c->norm_out[k], memory, p, m) != 0 ||
            residual_forward(next, c->norm_in[k], c->tmp, n) != 0)
            return -1;
    }
    return 0;
    /* END SOLUTION */
}

int decoder_layer_forward(float *out, DecoderLayerCache *c, const float *tgt,
                          const float *memory, const DecoderLayerParams *p,
                          const DecoderMasks *masks, Rng *rng)
{
    /* BEGIN SOLUTION */
    if (draw_masks(c, rng) != 0) return -1;
    return c->norm_first ? pre_norm_forward(out, c, tgt, memory, p, masks)
                         : post_norm_forward(out, c, tgt, memory, p, masks);
    /* END SOLUTION */
}

/* The backward of sub-layer k, dropout included: from d_out, the gradient
 * of c->tmp, it ADDS the gradient of its input x into dx (and of the memory
 * into dmemory, for k = 1) and of its parameters into g. c->dsub is scratch. */
static int sublayer_backward(DecoderLayerCache *c, int k, float *dx, float *dmemory,
                             const DecoderLayerParams *g, const float *d_out, const float *x,
                             const float *memory, const DecoderLayerParams *p)
{
    /* BEGIN SOLUTION */
    int rows = c->N * c->T, n = rows * c->D;
    float *d_f = c->dsub;                       /* the gradient of f_k's output */
    floats_zero(d_f, n);
    if (dropout_backward(d_f, d_out, drawn(c, c->mask[k]), n, c->dropout) != 0) return -1;
    if (k == 0)         /* one input used three times: one buffer takes all three paths */
        return mha_backward(dx, dx, dx, &g->self_attn, d_f, x, x, x, &p->self_attn, &c->sa);
    if (k == 1)         /* the keys and values are the memory: its gradient */
        return mha_backward(dx, dmemory, dmemory, &g->multihead_attn, d_f, x, memory, memory,
                            &p->multihead_attn, &c->ca);
    FfnParams ffn = ffn_params(p);
    FfnParams ffn_g = ffn_params(g);
    FfnCache ffn_c = ffn_cache(c);
    return ffn_backward(dx, &ffn_g, c->dhidden, d_f, x, &ffn, &ffn_c, rows);
    /* END SOLUTION */
}

/* Post-norm backward, k = 2, 1, 0: d_x (c->dx) holds dL/dx_{k+1}; through
 * norm_k into d_sum, which reaches x_k both directly and through f_k. */
static int post_norm_backward(float *dmemory, const DecoderLayerParams *g, const float *dout,
                              const float *tgt, const float *memory,
                              const DecoderLayerParams *p, DecoderLayerCache *c)
{
    /* BEGIN SOLUTION */
    size_t n = (size_t)c->N * c->T * c->D;
    float *d_x = c->dx, *d_sum = c->dnorm;
    floats_copy(d_x, dout, n);
    for (int k = 2; k >= 0; k--) {
        const float *x = k > 0 ? c->norm_out[k - 1] : tgt;
        floats_zero(d_sum, n);
        if (norm_backward(c, k, d_sum, g, d_x, c->norm_in[k], p) != 0) return -1;
        floats_copy(d_x, d_sum, n);              /* the skip path; f_k adds its share */
        if (sublayer_backward(c, k, d_x, dmemory, g, d_sum, x, memory, p) != 0) return -1;
    }
    return 0;
    /* END SOLUTION */
}

/* Pre-norm backward, k = 2, 1, 0: d_x (c->dx) holds dL/dx_{k+1}, which
 * reaches x_k directly; f_k gives d_normed, which norm_k adds into d_x. */
static int pre_norm_backward(float *dmemory, const DecoderLayerParams *g, const float *dout,
                             const float *memory, const DecoderLayerParams *p,
                             DecoderLayerCache *c)
{
    /* BEGIN SOLUTION */
    size_t n = (size_t)c->N * c->T * c->D;
    float *d_x = c->dx, *d_normed = c->dnorm;
    floats_copy(d_x, dout, n);
    for (int k = 2; k >= 0; k--) {
        floats_zero(d_normed, n);
        if (sublayer_backward(c, k, d_normed, dmemory, g, d_x, c->norm_out[k], memory, p) != 0 ||
            norm_backward(c, k, d_x, g, d_normed, c->norm_in[k], p) != 0)
            return -1;
    }
    return 0;
    /* END SOLUTION */
}

int decoder_layer_backward(float *dtgt, float *dmemory, const DecoderLayerParams *g,
                           const float *dout, const float *tgt, const float *memory,
                           const DecoderLayerParams *p, DecoderLayerCache *c)
{
    /* BEGIN SOLUTION */
    int rc = c->norm_first ? pre_norm_backward(dmemory, g, dout, memory, p, c)
                           : post_norm_backward(dmemory, g, dout, tgt, memory, p, c);
    if (rc != 0) return -1;
    if (dtgt) {
        #pragma omp parallel for schedule(static)
        for (int i = 0; i < c->N * c->T * c->D; i++) dtgt[i] += c->dx[i];
    }
    return 0;
    /* END SOLUTION */
}

/* ------------------------------------------------------------------------ */
/* The stack                                                                 */
/* ------------------------------------------------------------------------ */

int decoder_forward(float *out, DecoderCache *c, const float *tgt, const float *memory,
                    const DecoderParams *p, const DecoderMasks *masks, Rng *rng)
{
    /* BEGIN SOLUTION */
    int R = c->N * c->T, D = c->D;
    size_t nd = (size_t)R * D;
    floats_copy(c->xs, tgt, nd);
    /* Every layer reads the previous layer's output and the same memory. */
    for (int l = 0; l < c->num_layers; l++)
        if (decoder_layer_forward(c->xs + (l + 1) * nd, &c->layers[l], c->xs + l * nd, memory,
                                  &p->layers[l], masks, rng) != 0)
            return -1;
    const float *last = c->xs + c->num_layers * nd;
    if (!p->norm_weight) {
        floats_copy(out, last, nd);
        return 0;
    }
    return layernorm_forward(out, c->mean, c->rstd, last, p->norm_weight, p->norm_bias, 1, R, D,
                             c->eps);
    /* END SOLUTION */
}

int decoder_backward(float *dtgt, float *dmemory, const DecoderParams *g, const float *dout,
                     const float *tgt, const float *memory, const DecoderParams *p,
                     DecoderCache *c)
{
    /* BEGIN SOLUTION */
    int R = c->N * c->T, D = c->D;
    size_t nd = (size_t)R * D;
    float *d = c->d_a, *dprev = c->d_b;
    if (p->norm_weight) {
        floats_zero(d, nd);
        if (layernorm_backward(d, g->norm_weight, g->norm_bias, dout, c->xs + c->num_layers * nd,
                               p->norm_weight, c->mean, c->rstd, 1, R, D) != 0)
            return -1;
    } else {
        floats_copy(d, dout, nd);
    }
    /* Back through the layers; each adds its share into dmemory. */
    for (int l = c->num_layers - 1; l >= 0; l--) {
        floats_zero(dprev, nd);
        if (decoder_layer_backward(dprev, dmemory, &g->layers[l], d, c->xs + l * nd, memory,
                                   &p->layers[l], &c->layers[l]) != 0)
            return -1;
        float *t = d;
        d = dprev, dprev = t;
    }
    if (dtgt) {
        #pragma omp parallel for schedule(static)
        for (size_t i = 0; i < nd; i++) dtgt[i] += d[i];
    }
    return 0;
    /* END SOLUTION */
}

/* ------------------------------------------------------------------------ */
/* Given: small helpers of the layer                                         */
/* ------------------------------------------------------------------------ */

static const uint8_t *drawn(const DecoderLayerCache *c, const uint8_t *mask)
{
    return c->masks_drawn ? mask : NULL;
}

/* The FFN's parameters (or gradients) of a layer's parameters (or gradients). */
static FfnParams ffn_params(const DecoderLayerParams *p)
{
    return (FfnParams){p->linear1_weight, p->linear1_bias, p->linear2_weight, p->linear2_bias};
}

static FfnCache ffn_cache(const DecoderLayerCache *c)
{
    return (FfnCache){c->D, c->F, c->pre, c->hidden, drawn(c, c->ffn_mask), c->dropout};
}

/* norm_k (norm1, norm2, norm3) over the layer's N * T rows of D. */
static int norm_forward(const DecoderLayerCache *c, int k, float *out, const float *x,
                        const DecoderLayerParams *p)
{
    return layernorm_forward(out, c->mean[k], c->rstd[k], x, p->norm_weight[k], p->norm_bias[k],
                             1, c->N * c->T, c->D, c->eps);
}

static int norm_backward(const DecoderLayerCache *c, int k, float *dx,
                         const DecoderLayerParams *g, const float *dout, const float *x,
                         const DecoderLayerParams *p)
{
    return layernorm_backward(dx, g->norm_weight[k], g->norm_bias[k], dout, x, p->norm_weight[k],
                              c->mean[k], c->rstd[k], 1, c->N * c->T, c->D);
}

/* ------------------------------------------------------------------------ */
/* Given: the layer's cache                                                  */
/* ------------------------------------------------------------------------ */

void decoder_layer_cache_free(DecoderLayerCache *c)
{
    mha_cache_free(&c->sa);
    mha_cache_free(&c->ca);
    for (int k = 0; k < 3; k++) {
        free(c->norm_in[k]);
        free(c->norm_out[k]);
        free(c->mean[k]);
        free(c->rstd[k]);
        free(c->mask[k]);
    }
    free(c->pre);
    free(c->hidden);
    free(c->tmp);
    free(c->ffn_mask);
    free(c->sa_mask);
    free(c->ca_mask);
    free(c->dx);
    free(c->dsub);
    free(c->dnorm);
    free(c->dhidden);
    memset(c, 0, sizeof *c);
}

static int alloc_floats(float **p, size_t n, int *ok)
{
    *p = calloc(n, sizeof **p);
    if (!*p) *ok = 0;
    return *ok;
}

int decoder_layer_cache_alloc(DecoderLayerCache *c, const LayerDims *dims, int backward,
                              Error *err)
{
    int N = dims->N, T = dims->T, S = dims->S, D = dims->D, H = dims->H, F = dims->F;
    float dropout = dims->dropout;
    memset(c, 0, sizeof *c);
    if (N < 1 || T < 1 || S < 1 || D < 1 || H < 1 || F < 1)
        return error_set(err, "decoder layer: every size must be at least 1 (N %d, T %d, S %d, "
                         "D %d, H %d, F %d)", N, T, S, D, H, F);
    if (D % H != 0)
        return error_set(err, "decoder layer: d_model %d is not divisible by nhead %d", D, H);
    if (!(dropout >= 0.0f && dropout < 1.0f))
        return error_set(err, "decoder layer: dropout %g must lie in [0, 1)", (double)dropout);
    c->N = N, c->T = T, c->S = S, c->D = D, c->H = H, c->F = F;
    c->norm_first = dims->norm_first != 0;
    c->eps = dims->eps;
    c->dropout = dropout;
    if (mha_cache_alloc(&c->sa, &(MhaDims){N, T, T, D, H, D, D}, backward, err) != 0) return -1;
    if (mha_cache_alloc(&c->ca, &(MhaDims){N, T, S, D, H, D, D}, backward, err) != 0) {
        mha_cache_free(&c->sa);
        return -1;
    }
    size_t nd = (size_t)N * T * D, nf = (size_t)N * T * F, nr = (size_t)N * T;
    int ok = 1;
    for (int k = 0; k < 3; k++) {
        alloc_floats(&c->norm_in[k], nd, &ok);
        alloc_floats(&c->norm_out[k], nd, &ok);
        alloc_floats(&c->mean[k], nr, &ok);
        alloc_floats(&c->rstd[k], nr, &ok);
        if (dropout > 0 && !(c->mask[k] = calloc(nd, 1))) ok = 0;
    }
    alloc_floats(&c->pre, nf, &ok);
    alloc_floats(&c->hidden, nf, &ok);
    alloc_floats(&c->tmp, nd, &ok);
    if (dropout > 0 && !(c->ffn_mask = calloc(nf, 1))) ok = 0;
    if (dropout > 0 && !(c->sa_mask = calloc((size_t)N * H * T * T, 1))) ok = 0;
    if (dropout > 0 && !(c->ca_mask = calloc((size_t)N * H * T * S, 1))) ok = 0;
    if (backward) {
        alloc_floats(&c->dx, nd, &ok);
        alloc_floats(&c->dsub, nd, &ok);
        alloc_floats(&c->dnorm, nd, &ok);
        alloc_floats(&c->dhidden, nf, &ok);
    }
    if (!ok) {
        decoder_layer_cache_free(c);
        return error_set(err, "decoder layer: out of memory for the activations (N %d, T %d, "
                         "D %d, F %d)", N, T, D, F);
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Given: the stack's cache                                                  */
/* ------------------------------------------------------------------------ */

void decoder_cache_free(DecoderCache *c)
{
    for (int l = 0; c->layers && l < c->num_layers; l++) decoder_layer_cache_free(&c->layers[l]);
    free(c->layers);
    free(c->xs);
    free(c->mean);
    free(c->rstd);
    free(c->d_a);
    free(c->d_b);
    memset(c, 0, sizeof *c);
}

int decoder_cache_alloc(DecoderCache *c, int num_layers, const LayerDims *dims, int backward,
                        Error *err)
{
    memset(c, 0, sizeof *c);
    if (num_layers < 1)
        return error_set(err, "decoder: num_layers %d must be at least 1", num_layers);
    c->layers = calloc((size_t)num_layers, sizeof *c->layers);
    if (!c->layers) return error_set(err, "decoder: out of memory for %d layers", num_layers);
    for (int l = 0; l < num_layers; l++) {
        if (decoder_layer_cache_alloc(&c->layers[l], dims, backward, err) != 0) {
            decoder_cache_free(c);
            return -1;
        }
        c->num_layers = l + 1;
    }
    c->N = dims->N, c->T = dims->T, c->D = dims->D, c->eps = dims->eps;
    size_t nd = (size_t)dims->N * dims->T * dims->D, nt = (size_t)dims->N * dims->T;
    int ok = 1;
    alloc_floats(&c->xs, (size_t)(num_layers + 1) * nd, &ok);
    alloc_floats(&c->mean, nt, &ok);
    alloc_floats(&c->rstd, nt, &ok);
    if (backward) {
        alloc_floats(&c->d_a, nd, &ok);
        alloc_floats(&c->d_b, nd, &ok);
    }
    if (!ok) {
        decoder_cache_free(c);
        return error_set(err, "decoder: out of memory for %d layers of N %d, T %d, d_model %d",
                         num_layers, dims->N, dims->T, dims->D);
    }
    return 0;
}
