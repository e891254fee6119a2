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

/* ------------------------------------------------------------------------ */
/* Allocation (not part of the exercise)                                     */
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

int decoder_layer_cache_alloc(DecoderLayerCache *c, int N, int T, int S, int D, int H, int F,
                              int norm_first, float eps, float dropout, int backward,
                              Error *err)
{
    memset(c, 0, sizeof *c);
    if (N < 1 || T < 1 || S < 1 || D < 1 || H < 1 || F < 1)
        return error_set(err, "decoder layer: every size must be at least 1 (N %d, T %d, S %d, "
                         "D %d, H %d, F %d)", N, T, S, D, H, F);
    if (D % H != 0)
        return error_set(err, "decoder layer: d_model %d is not divisible by nhead %d", D, H);
    if (!(dropout >= 0.0f && dropout < 1.0f))
        return error_set(err, "decoder layer: dropout %g must lie in [0, 1)", (double)dropout);
    c->N = N, c->T = T, c->S = S, c->D = D, c->H = H, c->F = F;
    c->norm_first = norm_first != 0;
    c->eps = eps;
    c->dropout = dropout;
    if (mha_cache_alloc(&c->sa, N, T, T, D, H, D, D, backward, err) != 0) return -1;
    if (mha_cache_alloc(&c->ca, N, T, S, D, H, D, D, backward, err) != 0) {
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
/* The layer                                                                 */
/* ------------------------------------------------------------------------ */

/* The residual stream before sub-layer k: the target for k = 0, then the
 * result of sub-layer k - 1 (a norm's output in post-norm, a residual sum in
 * pre-norm). */
static const float *stream_before(const DecoderLayerCache *c, int k, const float *tgt)
{
    if (k == 0) return tgt;
    return c->norm_first ? c->norm_in[k] : c->norm_out[k - 1];
}

/* What sub-layer k reads: the stream itself (post-norm) or its norm (pre-norm). */
static const float *sublayer_input(const DecoderLayerCache *c, int k, const float *tgt)
{
    return c->norm_first ? c->norm_out[k] : stream_before(c, k, tgt);
}

int decoder_layer_forward(float *out, DecoderLayerCache *c, const float *tgt,
                          const float *memory, const DecoderLayerParams *p,
                          const float *sa_bias, int sa_causal, const float *ca_bias, Rng *rng)
{
    /* BEGIN SOLUTION */
    int N = c->N, T = c->T, D = c->D, F = c->F, R = N * T, n = N * T * D;
    float pdrop = c->dropout;
    /* Training with dropout: the masks of dropout1, 2, the FFN's hidden
     * layer and dropout3, then those of the two attentions' weights.
     * Otherwise every mask is NULL: identity. */
    c->masks_drawn = rng != NULL && pdrop > 0.0f;
    if (c->masks_drawn &&
        (dropout_mask(c->mask[0], n, pdrop, rng) != 0 ||
         dropout_mask(c->mask[1], n, pdrop, rng) != 0 ||
         dropout_mask(c->ffn_mask, R * F, pdrop, rng) != 0 ||
         dropout_mask(c->mask[2], n, pdrop, rng) != 0 ||
         dropout_mask(c->sa_mask, N * c->H * T * T, pdrop, rng) != 0 ||
         dropout_mask(c->ca_mask, N * c->H * T * c->S, pdrop, rng) != 0))
        return -1;
    c->sa.drop = c->masks_drawn ? c->sa_mask : NULL;
    c->ca.drop = c->masks_drawn ? c->ca_mask : NULL;
    c->sa.dropout_p = c->ca.dropout_p = c->masks_drawn ? pdrop : 0.0f;
    FfnParams ffn = {p->linear1_weight, p->linear1_bias, p->linear2_weight, p->linear2_bias, D, F};
    FfnCache ffn_c = {c->pre, c->hidden, c->masks_drawn ? c->ffn_mask : NULL, pdrop};

    for (int k = 0; k < 3; k++) {
        const float *x = stream_before(c, k, tgt);
        /* Pre-norm normalises the sub-layer's input; the stream stays as it is. */
        if (c->norm_first) {
            memcpy(c->norm_in[k], x, (size_t)n * sizeof *x);
            if (layernorm_forward(c->norm_out[k], c->mean[k], c->rstd[k], x, p->norm_weight[k],
                                  p->norm_bias[k], 1, R, D, c->eps) != 0)
                return -1;
        }
        const float *in = sublayer_input(c, k, tgt);
        int rc;
        if (k == 0)         /* masked self-attention: queries, keys, values all from in */
            rc = mha_forward(c->tmp, &c->sa, in, in, in, &p->self_attn, sa_bias, sa_causal);
        else if (k == 1)    /* cross-attention: keys and values from the encoder */
            rc = mha_forward(c->tmp, &c->ca, in, memory, memory, &p->multihead_attn, ca_bias, 0);
        else
            rc = ffn_forward(c->tmp, &ffn_c, in, &ffn, R);
        if (rc != 0) return -1;
        if (dropout_forward(c->tmp, c->tmp, c->masks_drawn ? c->mask[k] : NULL, n, pdrop) != 0)
            return -1;
        if (c->norm_first) {
            /* x + f(norm(x)) is the next stream: the next norm's input, or out. */
            float *next = k < 2 ? c->norm_in[k + 1] : out;
            if (residual_forward(next, x, c->tmp, n) != 0) return -1;
        } else {
            /* norm(x + f(x)) is the next stream. */
            if (residual_forward(c->norm_in[k], x, c->tmp, n) != 0) return -1;
            if (layernorm_forward(k < 2 ? c->norm_out[k] : out, c->mean[k], c->rstd[k],
                                  c->norm_in[k], p->norm_weight[k], p->norm_bias[k], 1, R, D,
                                  c->eps) != 0)
                return -1;
        }
    }
    return 0;
    /* END SOLUTION */
}

int decoder_layer_backward(float *dtgt, float *dmemory, const DecoderLayerGrads *g,
                           const float *dout, const float *tgt, const float *memory,
                           const DecoderLayerParams *p, DecoderLayerCache *c)
{
    /* BEGIN SOLUTION */
    int N = c->N, T = c->T, D = c->D, F = c->F, R = N * T, n = N * T * D;
    size_t bytes = (size_t)n * sizeof(float);
    float pdrop = c->dropout;
    FfnParams ffn = {p->linear1_weight, p->linear1_bias, p->linear2_weight, p->linear2_bias, D, F};
    FfnGrads ffn_g = {g->linear1_weight, g->linear1_bias, g->linear2_weight, g->linear2_bias};
    FfnCache ffn_c = {c->pre, c->hidden, c->masks_drawn ? c->ffn_mask : NULL, pdrop};
    /* dx: the gradient of the stream after sub-layer k, walking backwards. */
    memcpy(c->dx, dout, bytes);
    for (int k = 2; k >= 0; k--) {
        const uint8_t *mask = c->masks_drawn ? c->mask[k] : NULL;
        if (!c->norm_first) {
            /* stream = norm(r), r = x + drop(f(x)): first through the norm. */
            memset(c->dnorm, 0, bytes);
            if (layernorm_backward(c->dnorm, g->norm_weight[k], g->norm_bias[k], c->dx,
                                   c->norm_in[k], p->norm_weight[k], c->mean[k], c->rstd[k], 1,
                                   R, D) != 0)
                return -1;
            /* dr reaches x directly (the residual) and through f. */
            memcpy(c->dx, c->dnorm, bytes);
            memset(c->dsub, 0, bytes);
            if (dropout_backward(c->dsub, c->dnorm, mask, n, pdrop) != 0) return -1;
        } else {
            /* stream = x + drop(f(norm(x))): dx keeps the residual's share. */
            memset(c->dsub, 0, bytes);
            if (dropout_backward(c->dsub, c->dx, mask, n, pdrop) != 0) return -1;
        }
        /* The sub-layer's backward adds the gradient of its input into din:
         * straight into dx in post-norm, into dnorm (the norm's output) in
         * pre-norm. */
        const float *in = sublayer_input(c, k, tgt);
        float *din = c->norm_first ? c->dnorm : c->dx;
        if (c->norm_first) memset(c->dnorm, 0, bytes);
        int rc;
        if (k == 0)         /* one input used three times: one buffer takes all three paths */
            rc = mha_backward(din, din, din, &g->self_attn, c->dsub, in, in, in, &p->self_attn,
                              &c->sa);
        else if (k == 1)    /* the keys and values are the memory: its gradient */
            rc = mha_backward(din, dmemory, dmemory, &g->multihead_attn, c->dsub, in, memory,
                              memory, &p->multihead_attn, &c->ca);
        else
            rc = ffn_backward(din, &ffn_g, c->dhidden, c->dsub, in, &ffn, &ffn_c, R);
        if (rc != 0) return -1;
        if (c->norm_first &&
            layernorm_backward(c->dx, g->norm_weight[k], g->norm_bias[k], c->dnorm,
                               c->norm_in[k], p->norm_weight[k], c->mean[k], c->rstd[k], 1, R,
                               D) != 0)
            return -1;
    }
    if (dtgt)
        for (int i = 0; i < n; i++) dtgt[i] += c->dx[i];
    return 0;
    /* END SOLUTION */
}

/* ------------------------------------------------------------------------ */
/* The stack                                                                 */
/* ------------------------------------------------------------------------ */

void decoder_stack_free(DecoderStack *s)
{
    for (int l = 0; s->layers && l < s->L; l++) decoder_layer_cache_free(&s->layers[l]);
    free(s->layers);
    free(s->xs);
    free(s->final_mean);
    free(s->final_rstd);
    free(s->dbuf[0]);
    free(s->dbuf[1]);
    memset(s, 0, sizeof *s);
}

int decoder_stack_alloc(DecoderStack *s, int L, int N, int T, int S, int D, int H, int F,
                        int norm_first, float eps, float dropout, int backward, Error *err)
{
    memset(s, 0, sizeof *s);
    if (L < 1) return error_set(err, "decoder stack: num_layers %d must be at least 1", L);
    s->layers = calloc((size_t)L, sizeof *s->layers);
    if (!s->layers) return error_set(err, "decoder stack: out of memory");
    for (int l = 0; l < L; l++) {
        if (decoder_layer_cache_alloc(&s->layers[l], N, T, S, D, H, F, norm_first, eps,
                                      dropout, backward, err) != 0) {
            decoder_stack_free(s);
            return -1;
        }
        s->L = l + 1;
    }
    size_t nd = (size_t)N * T * D;
    int ok = 1;
    alloc_floats(&s->xs, (size_t)(L + 1) * nd, &ok);
    alloc_floats(&s->final_mean, (size_t)N * T, &ok);
    alloc_floats(&s->final_rstd, (size_t)N * T, &ok);
    if (backward) {
        alloc_floats(&s->dbuf[0], nd, &ok);
        alloc_floats(&s->dbuf[1], nd, &ok);
    }
    if (!ok) {
        decoder_stack_free(s);
        return error_set(err, "decoder stack: out of memory");
    }
    return 0;
}

int decoder_stack_forward(float *out, DecoderStack *s, const float *tgt, const float *memory,
                          const DecoderLayerParams *params, const float *norm_weight,
                          const float *norm_bias, const float *sa_bias, int sa_causal,
                          const float *ca_bias, Rng *rng)
{
    /* BEGIN SOLUTION */
    const DecoderLayerCache *c0 = &s->layers[0];
    int R = c0->N * c0->T, D = c0->D;
    size_t nd = (size_t)R * D;
    memcpy(s->xs, tgt, nd * sizeof *tgt);
    /* Every layer reads the previous layer's output and the same memory. */
    for (int l = 0; l < s->L; l++)
        if (decoder_layer_forward(s->xs + (l + 1) * nd, &s->layers[l], s->xs + l * nd, memory,
                                  &params[l], sa_bias, sa_causal, ca_bias, rng) != 0)
            return -1;
    const float *last = s->xs + s->L * nd;
    if (!norm_weight) {
        memcpy(out, last, nd * sizeof *out);
        return 0;
    }
    return layernorm_forward(out, s->final_mean, s->final_rstd, last, norm_weight, norm_bias,
                             1, R, D, c0->eps);
    /* END SOLUTION */
}

int decoder_stack_backward(float *dtgt, float *dmemory, const DecoderLayerGrads *grads,
                           float *dnorm_weight, float *dnorm_bias, const float *dout,
                           const float *tgt, const float *memory,
                           const DecoderLayerParams *params, const float *norm_weight,
                           DecoderStack *s)
{
    /* BEGIN SOLUTION */
    const DecoderLayerCache *c0 = &s->layers[0];
    int R = c0->N * c0->T, D = c0->D;
    size_t nd = (size_t)R * D;
    float *d = s->dbuf[0], *dprev = s->dbuf[1];
    if (norm_weight) {
        memset(d, 0, nd * sizeof *d);
        if (layernorm_backward(d, dnorm_weight, dnorm_bias, dout, s->xs + s->L * nd,
                               norm_weight, s->final_mean, s->final_rstd, 1, R, D) != 0)
            return -1;
    } else {
        memcpy(d, dout, nd * sizeof *d);
    }
    /* Back through the layers; each adds its share into dmemory. */
    for (int l = s->L - 1; l >= 0; l--) {
        memset(dprev, 0, nd * sizeof *dprev);
        if (decoder_layer_backward(dprev, dmemory, &grads[l], d, s->xs + l * nd, memory,
                                   &params[l], &s->layers[l]) != 0)
            return -1;
        float *t = d;
        d = dprev, dprev = t;
    }
    if (dtgt)
        for (size_t i = 0; i < nd; i++) dtgt[i] += d[i];
    return 0;
    /* END SOLUTION */
}
