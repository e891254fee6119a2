/*
 * model_work.c - see model_work.h: every buffer of model_forward and
 * model_backward for one batch shape, and the caches of chapters 05 and 06
 * inside it.
 *
 * Letters: N batch, S source length, T target length, D d_model, H nhead,
 * V the target vocabulary (the logits' width).
 */
#include "model_work.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

void model_work_free(ModelWork *w)
{
    free(w->logits);
    free(w->src_emb), free(w->tgt_emb);
    free(w->src_x), free(w->tgt_x);
    free(w->src_drop), free(w->tgt_drop);
    free(w->enc_bias), free(w->dec_bias), free(w->cross_bias);
    free(w->pool_count);
    encoder_cache_free(&w->enc);
    free(w->memory);
    decoder_cache_free(&w->dec);
    free(w->dec_out);
    free(w->pooled);
    free(w->d_top), free(w->d_memory), free(w->d_src), free(w->d_tgt);
    memset(w, 0, sizeof *w);
}

/* *p = n zeroed values; returns 1, or 0 when out of memory. */
static int alloc_floats(float **p, size_t n)
{
    return (*p = calloc(n, sizeof **p)) != NULL;
}

static int alloc_bytes(uint8_t **p, size_t n)
{
    return (*p = calloc(n, sizeof **p)) != NULL;
}

int model_work_alloc(ModelWork *w, const Model *m, int N, int S, int T, int backward,
                     Error *err)
{
    const ModelConfig *c = &m->cfg;
    int seq2seq = c->kind == MODEL_SEQ2SEQ;
    int D = c->d_model, H = c->nhead, V = c->tgt_vocab;
    memset(w, 0, sizeof *w);
    if (N < 1 || S < 1 || (seq2seq ? T < 1 : T != 0))
        return error_set(err, "model: batch %d, source length %d, target length %d: need N, S "
                         ">= 1 and T >= 1 exactly for seq2seq", N, S, T);
    if (S > c->max_len || T > c->max_len)
        return error_set(err, "model: a sequence of %d positions is longer than max_len %d",
                         S > T ? S : T, c->max_len);
    if ((int64_t)N * H * S * (S > T ? S : T) > INT_MAX / 2 ||
        (int64_t)N * (S > T ? S : T) * (D > V ? D : V) > INT_MAX / 2)
        return error_set(err, "model: batch %d of %d positions is too large", N, S > T ? S : T);
    w->N = N, w->S = S, w->T = T, w->backward = backward;
    w->S_cap = S, w->T_cap = T;
    w->rows = seq2seq ? (int64_t)N * T : c->kind == MODEL_CLASSIFIER ? N : (int64_t)N * S;
    size_t nsd = (size_t)N * S * D, ntd = (size_t)N * T * D;
    int ok = 1;
    ok &= alloc_floats(&w->logits, (size_t)w->rows * V);
    ok &= alloc_floats(&w->src_emb, nsd);
    ok &= alloc_floats(&w->src_x, nsd);
    ok &= alloc_floats(&w->memory, nsd);
    if (c->dropout > 0) ok &= alloc_bytes(&w->src_drop, nsd);
    if (c->pad_id >= 0) ok &= alloc_floats(&w->enc_bias, (size_t)N * H * S * S);
    if (c->kind == MODEL_CLASSIFIER) {
        ok &= alloc_floats(&w->pooled, (size_t)N * D);
        ok &= alloc_floats(&w->pool_count, (size_t)N);
    }
    if (seq2seq) {
        ok &= alloc_floats(&w->tgt_emb, ntd);
        ok &= alloc_floats(&w->tgt_x, ntd);
        ok &= alloc_floats(&w->dec_out, ntd);
        if (c->dropout > 0) ok &= alloc_bytes(&w->tgt_drop, ntd);
        if (c->pad_id >= 0) {
            ok &= alloc_floats(&w->dec_bias, (size_t)N * H * T * T);
            ok &= alloc_floats(&w->cross_bias, (size_t)N * H * T * S);
        }
    }
    if (backward) {
        ok &= alloc_floats(&w->d_top, (size_t)w->rows * D);
        ok &= alloc_floats(&w->d_memory, nsd);
        ok &= alloc_floats(&w->d_src, nsd);
        if (seq2seq) ok &= alloc_floats(&w->d_tgt, ntd);
    }
    if (!ok) {
        model_work_free(w);
        return error_set(err, "model: out of memory for a batch of %d x %d", N, S);
    }
    LayerDims dims = {.N = N, .S = S, .T = T, .D = D, .H = H, .F = c->dim_feedforward,
                      .norm_first = c->norm_first, .causal = c->kind == MODEL_LM,
                      .eps = c->eps, .dropout = c->dropout};
    if (encoder_cache_alloc(&w->enc, c->num_encoder_layers, &dims, backward, err) != 0 ||
        (seq2seq && decoder_cache_alloc(&w->dec, c->num_decoder_layers, &dims, backward,
                                        err) != 0)) {
        model_work_free(w);
        return -1;
    }
    return 0;
}

static void mha_cache_reshape(MhaCache *c, int L, int S)
{
    c->L = L;
    c->S = S;
}

int model_work_reshape(ModelWork *w, const Model *m, int S, int T, Error *err)
{
    int seq2seq = m->cfg.kind == MODEL_SEQ2SEQ;
    if (S < 1 || S > w->S_cap || (seq2seq ? T < 1 || T > w->T_cap : T != 0))
        return error_set(err, "model: lengths %d and %d do not fit a work made for %d and %d",
                         S, T, w->S_cap, w->T_cap);
    w->S = S, w->T = T;
    w->rows = seq2seq ? (int64_t)w->N * T
            : m->cfg.kind == MODEL_CLASSIFIER ? w->N : (int64_t)w->N * S;
    w->enc.S = S;
    for (int k = 0; k < w->enc.num_layers; k++) {
        w->enc.layers[k].S = S;
        mha_cache_reshape(&w->enc.layers[k].attn, S, S);
    }
    w->dec.T = T;
    for (int l = 0; seq2seq && l < w->dec.num_layers; l++) {
        DecoderLayerCache *c = &w->dec.layers[l];
        c->T = T, c->S = S;
        mha_cache_reshape(&c->sa, T, T);
        mha_cache_reshape(&c->ca, T, S);
    }
    return 0;
}
