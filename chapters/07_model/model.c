/*
 * model.c - see model.h. The models are glue around chapters 05 and 06: an
 * embedding front end, the stacks, and a linear generator. What this file
 * decides is the parameter layout (one flat array in state_dict order), the
 * masks made from the ids, and which gradient flows where.
 *
 * Letters: N batch, S source length, T target length, D d_model, H nhead,
 * F dim_feedforward, V a vocabulary, L max_len.
 */
#include "model.h"

#include "error.h"   /* not_implemented(), used by the exercise stubs */

#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "casefile.h"
#include "dropout.h"
#include "embedding.h"
#include "matmul.h"
#include "positional.h"

/* ------------------------------------------------------------------------ */
/* Forward                                                                   */
/* ------------------------------------------------------------------------ */

/* One side's parameters: embedding table, scale, position table. */
typedef struct {
    const float *embed, *scale, *pos;
    float *d_embed, *d_scale, *d_pos;   /* gradients; d_pos NULL for a fixed table */
} Side;

/* Given helpers, defined at the end of the file. */
static float *find(const Model *m, const char *name, int grad);
static Side side_of(const Model *m, int target);
static float scale_of(const Model *m, const Side *s);

/* x = dropout(embed(ids) * scale + pos): the front end of one side.
 * emb (N, len, D) keeps embed(ids) for the learned scale's gradient. */
static int front_forward(const Model *m, const Side *s, float *x, float *emb, uint8_t *drop,
                         const int64_t *ids, int N, int len, Rng *rng)
{
    /* BEGIN SOLUTION */
    int D = m->cfg.d_model, n = N * len * D;
    float scale = scale_of(m, s);
    if (embedding_forward(emb, ids, s->embed, N, len, D, 1.0f) != 0) return -1;
    for (int i = 0; i < n; i++) x[i] = emb[i] * scale;
    if (positional_forward(x, x, s->pos, N, len, D) != 0) return -1;
    if (rng && m->cfg.dropout > 0) {
        if (dropout_mask(drop, n, m->cfg.dropout, rng) != 0) return -1;
        return dropout_forward(x, x, drop, n, m->cfg.dropout);
    }
    return 0;
    /* END SOLUTION */
}

/* x = dropout(input_net(features)): a set model's front end, features
 * (N, S, I) -> x (N, S, D). No position is added: the encoder then treats
 * the elements as a set (permuting them permutes its output, chapter 03). */
static int set_front_forward(const Model *m, float *x, uint8_t *drop, const float *features,
                             int N, int S, Rng *rng)
{
    /* BEGIN SOLUTION */
    int D = m->cfg.d_model, n = N * S * D;
    if (!features) return -1;
    if (linear_forward(x, features, find(m, "input_net.weight", 0), find(m, "input_net.bias", 0),
                       N * S, m->cfg.input_dim, D) != 0)
        return -1;
    if (rng && m->cfg.dropout > 0) {
        if (dropout_mask(drop, n, m->cfg.dropout, rng) != 0) return -1;
        return dropout_forward(x, x, drop, n, m->cfg.dropout);
    }
    return 0;
    /* END SOLUTION */
}

/* The additive bias (N, H, L, S) that ignores the padding keys of key_ids
 * (N, S), the query side having L rows: *out = bias, filled with -inf at
 * every padding key and 0 elsewhere, or *out = NULL when no key of the
 * batch is padding (the attention then needs no bias at all). */
static int padding_bias(const float **out, float *bias, const int64_t *key_ids, int pad_id,
                        int N, int H, int L, int S)
{
    /* BEGIN SOLUTION */
    int any = 0;
    *out = NULL;
    if (!bias || pad_id < 0) return 0;
    for (int64_t i = 0; i < (int64_t)N * S; i++) any |= key_ids[i] == pad_id;
    if (!any) return 0;
    for (int n = 0; n < N; n++) {
        const int64_t *ids = key_ids + (size_t)n * S;
        for (int r = 0; r < H * L; r++) {
            float *row = bias + ((size_t)n * H * L + r) * S;
            for (int s = 0; s < S; s++) row[s] = ids[s] == pad_id ? -INFINITY : 0.0f;
        }
    }
    *out = bias;
    return 0;
    /* END SOLUTION */
}

/* The encoder's parameters as chapter 05's stack struct. */
static EncoderParams encoder_params(const Model *m)
{
    EncoderParams p = {m->cfg.num_encoder_layers, m->enc, find(m, "encoder.norm.weight", 0),
                       find(m, "encoder.norm.bias", 0)};
    return p;
}

/* mean over the non-padding positions of memory (N, S, D) -> pooled (N, D) */
static int mean_pool(float *pooled, float *count, const float *memory, const int64_t *ids,
                     int pad_id, int N, int S, int D)
{
    /* BEGIN SOLUTION */
    for (int n = 0; n < N; n++) {
        float *p = pooled + (size_t)n * D;
        int c = 0;
        memset(p, 0, (size_t)D * sizeof *p);
        for (int s = 0; s < S; s++) {
            if (pad_id >= 0 && ids[(size_t)n * S + s] == pad_id) continue;
            const float *x = memory + ((size_t)n * S + s) * D;
            for (int d = 0; d < D; d++) p[d] += x[d];
            c++;
        }
        count[n] = (float)c;
        for (int d = 0; d < D && c > 0; d++) p[d] /= (float)c;
    }
    return 0;
    /* END SOLUTION */
}

int model_forward(Model *m, ModelWork *w, const int64_t *src, const int64_t *tgt, Rng *rng)
{
    /* BEGIN SOLUTION */
    const ModelConfig *c = &m->cfg;
    int N = w->N, S = w->S, T = w->T, D = c->d_model, H = c->nhead;
    Side src_side = side_of(m, 0), tgt_side = side_of(m, 1);
    EncoderParams enc = encoder_params(m);
    w->src_ids = src, w->tgt_ids = tgt;
    w->dropped = rng != NULL && c->dropout > 0;

    if (c->kind == MODEL_SET
            ? set_front_forward(m, w->src_x, w->src_drop, w->features, N, S, rng) != 0
            : front_forward(m, &src_side, w->src_x, w->src_emb, w->src_drop, src, N, S, rng) != 0)
        return -1;
    const float *enc_bias, *dec_bias, *cross_bias;
    if (padding_bias(&enc_bias, w->enc_bias, src, c->pad_id, N, H, S, S) != 0) return -1;
    if (encoder_forward(w->memory, &w->enc, w->src_x, &enc, enc_bias, rng) != 0) return -1;

    const float *top = w->memory;                  /* the generator's input */
    if (c->kind == MODEL_CLASSIFIER) {
        if (mean_pool(w->pooled, w->pool_count, w->memory, src, c->pad_id, N, S, D) != 0)
            return -1;
        top = w->pooled;
    } else if (c->kind == MODEL_SEQ2SEQ) {
        if (front_forward(m, &tgt_side, w->tgt_x, w->tgt_emb, w->tgt_drop, tgt, N, T, rng) != 0)
            return -1;
        /* target padding and the subsequent mask in the self-attention,
         * source padding in the cross-attention */
        if (padding_bias(&dec_bias, w->dec_bias, tgt, c->pad_id, N, H, T, T) != 0 ||
            padding_bias(&cross_bias, w->cross_bias, src, c->pad_id, N, H, T, S) != 0)
            return -1;
        if (decoder_stack_forward(w->dec_out, &w->dec, w->tgt_x, w->memory, m->dec,
                                  find(m, "decoder.norm.weight", 0),
                                  find(m, "decoder.norm.bias", 0), dec_bias, 1, cross_bias,
                                  rng) != 0)
            return -1;
        top = w->dec_out;
    }
    return linear_forward(w->logits, top, find(m, "generator.weight", 0),
                          find(m, "generator.bias", 0), (int)w->rows, D, c->tgt_vocab);
    /* END SOLUTION */
}

/* ------------------------------------------------------------------------ */
/* Backward                                                                  */
/* ------------------------------------------------------------------------ */

/* The backward of front_forward: dx (N, len, D), the gradient of x, is
 * overwritten on the way. */
static int front_backward(const Model *m, const Side *s, float *dx, const float *emb,
                          const uint8_t *drop, const int64_t *ids, int N, int len)
{
    /* BEGIN SOLUTION */
    int D = m->cfg.d_model, n = N * len * D;
    float scale = scale_of(m, s);
    /* dropout: the kept values were scaled by 1 / (1 - p), so are their gradients */
    if (drop) {
        float keep = 1.0f / (1.0f - m->cfg.dropout);
        for (int i = 0; i < n; i++) dx[i] = drop[i] ? dx[i] * keep : 0.0f;
    }
    /* the position table receives the gradient of x, summed over the batch */
    if (s->d_pos && positional_backward(NULL, s->d_pos, dx, N, len, D) != 0) return -1;
    /* x = e * scale: a learned scale collects sum(dx * e) */
    if (m->cfg.scale_embedding == 2) {
        double sum = 0.0;
        for (int i = 0; i < n; i++) sum += (double)dx[i] * emb[i];
        s->d_scale[0] += (float)sum;
    }
    int64_t pad = m->cfg.pad_id >= 0 ? m->cfg.pad_id : EMBEDDING_NO_PADDING;
    return embedding_backward(s->d_embed, dx, ids, N, len, D, scale, pad);
    /* END SOLUTION */
}

/* The backward of set_front_forward: dx (N, S, D) is overwritten on the way;
 * input_net's weight and bias collect their gradients (the features are
 * data: they need none). */
static int set_front_backward(const Model *m, float *dx, const uint8_t *drop,
                              const float *features, int N, int S)
{
    /* BEGIN SOLUTION */
    int D = m->cfg.d_model, n = N * S * D;
    if (drop) {
        float keep = 1.0f / (1.0f - m->cfg.dropout);
        for (int i = 0; i < n; i++) dx[i] = drop[i] ? dx[i] * keep : 0.0f;
    }
    return linear_backward(NULL, find(m, "input_net.weight", 1), find(m, "input_net.bias", 1),
                           dx, features, find(m, "input_net.weight", 0), N * S,
                           m->cfg.input_dim, D);
    /* END SOLUTION */
}

int model_backward(Model *m, ModelWork *w, const float *dlogits)
{
    /* BEGIN SOLUTION */
    const ModelConfig *c = &m->cfg;
    int N = w->N, S = w->S, T = w->T, D = c->d_model;
    size_t nsd = (size_t)N * S * D;
    if (!w->backward) return -1;
    const float *top = c->kind == MODEL_SEQ2SEQ ? w->dec_out
                     : c->kind == MODEL_CLASSIFIER ? w->pooled : w->memory;
    memset(w->d_top, 0, (size_t)w->rows * D * sizeof *w->d_top);
    if (linear_backward(w->d_top, find(m, "generator.weight", 1), find(m, "generator.bias", 1),
                        dlogits, top, find(m, "generator.weight", 0), (int)w->rows, D,
                        c->tgt_vocab) != 0)
        return -1;

    /* The gradient reaching the encoder's output. */
    memset(w->d_memory, 0, nsd * sizeof *w->d_memory);
    if (c->kind == MODEL_LABELLER || c->kind == MODEL_SET) {
        memcpy(w->d_memory, w->d_top, nsd * sizeof *w->d_memory);
    } else if (c->kind == MODEL_CLASSIFIER) {
        /* the mean spreads its gradient evenly over the positions it averaged */
        for (int n = 0; n < N; n++) {
            if (w->pool_count[n] == 0) continue;
            for (int s = 0; s < S; s++) {
                if (c->pad_id >= 0 && w->src_ids[(size_t)n * S + s] == c->pad_id) continue;
                float *d = w->d_memory + ((size_t)n * S + s) * D;
                const float *g = w->d_top + (size_t)n * D;
                for (int k = 0; k < D; k++) d[k] = g[k] / w->pool_count[n];
            }
        }
    } else {
        Side tgt_side = side_of(m, 1);
        memset(w->d_tgt, 0, (size_t)N * T * D * sizeof *w->d_tgt);
        if (decoder_stack_backward(w->d_tgt, w->d_memory, m->dec_grad,
                                   find(m, "decoder.norm.weight", 1),
                                   find(m, "decoder.norm.bias", 1), w->d_top, w->tgt_x,
                                   w->memory, m->dec, find(m, "decoder.norm.weight", 0),
                                   &w->dec) != 0)
            return -1;
        if (front_backward(m, &tgt_side, w->d_tgt, w->tgt_emb, w->dropped ? w->tgt_drop : NULL,
                           w->tgt_ids, N, T) != 0)
            return -1;
    }

    EncoderParams enc = encoder_params(m);
    EncoderGrads enc_grad = {m->enc_grad, find(m, "encoder.norm.weight", 1),
                             find(m, "encoder.norm.bias", 1)};
    Side src_side = side_of(m, 0);
    memset(w->d_src, 0, nsd * sizeof *w->d_src);
    if (encoder_backward(w->d_src, &enc_grad, w->d_memory, w->src_x, &enc, &w->enc) != 0)
        return -1;
    if (c->kind == MODEL_SET)
        return set_front_backward(m, w->d_src, w->dropped ? w->src_drop : NULL, w->features, N,
                                  S);
    return front_backward(m, &src_side, w->d_src, w->src_emb, w->dropped ? w->src_drop : NULL,
                          w->src_ids, N, S);
    /* END SOLUTION */
}

/* ------------------------------------------------------------------------ */
/* Attention maps (given)                                                    */
/* ------------------------------------------------------------------------ */

const float *model_attention(const ModelWork *w, const Model *m, ModelAttention which,
                             int layer, int n, int head)
{
    int H = m->cfg.nhead, S = w->S, T = w->T;
    if (n < 0 || n >= w->N || head < 0 || head >= H || layer < 0) return NULL;
    switch (which) {
    case ATTN_ENCODER:
        if (layer >= m->cfg.num_encoder_layers) return NULL;
        return w->enc.layers[layer].attn.att + ((size_t)n * H + head) * S * S;
    case ATTN_DECODER_SELF:
        if (m->cfg.kind != MODEL_SEQ2SEQ || layer >= m->cfg.num_decoder_layers) return NULL;
        return w->dec.layers[layer].sa.att + ((size_t)n * H + head) * T * T;
    case ATTN_DECODER_CROSS:
        if (m->cfg.kind != MODEL_SEQ2SEQ || layer >= m->cfg.num_decoder_layers) return NULL;
        return w->dec.layers[layer].ca.att + ((size_t)n * H + head) * T * S;
    }
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* The config (given)                                                        */
/* ------------------------------------------------------------------------ */

const char *model_kind_name(ModelKind kind)
{
    switch (kind) {
    case MODEL_SEQ2SEQ:    return "seq2seq";
    case MODEL_LABELLER:   return "labeller";
    case MODEL_CLASSIFIER: return "classifier";
    case MODEL_SET:        return "set";
    }
    return "?";
}

int model_config_check(const ModelConfig *c, Error *err)
{
    int seq2seq = c->kind == MODEL_SEQ2SEQ;
    if (c->kind != MODEL_SEQ2SEQ && c->kind != MODEL_LABELLER && c->kind != MODEL_CLASSIFIER &&
        c->kind != MODEL_SET)
        return error_set(err, "model: kind %d is not seq2seq, labeller, classifier or set",
                         c->kind);
    if (c->kind == MODEL_SET) {
        /* features in, one score per element out, and nothing that needs ids
         * or an order */
        if (c->input_dim < 1 || c->src_vocab != 0 || c->tgt_vocab != 1)
            return error_set(err, "model: a set model needs input_dim >= 1, src_vocab 0 and "
                             "tgt_vocab 1 (input_dim %d, src_vocab %d, tgt_vocab %d)",
                             c->input_dim, c->src_vocab, c->tgt_vocab);
        if (c->pad_id != -1 || c->learned_pos || c->scale_embedding || c->share_embeddings)
            return error_set(err, "model: a set model has no padding, positions, embedding "
                             "scale or shared embeddings (pad_id %d, learned_pos %d, "
                             "scale_embedding %d, share_embeddings %d)", c->pad_id,
                             c->learned_pos, c->scale_embedding, c->share_embeddings);
    } else if (c->input_dim != 0) {
        return error_set(err, "model: input_dim %d: only a set model reads features",
                         c->input_dim);
    } else if (c->src_vocab < 1 || c->tgt_vocab < 1) {
        return error_set(err, "model: src_vocab %d and tgt_vocab %d must be at least 1",
                         c->src_vocab, c->tgt_vocab);
    }
    if (c->d_model < 1 || c->nhead < 1 || c->dim_feedforward < 1 || c->max_len < 1)
        return error_set(err, "model: d_model %d, nhead %d, dim_feedforward %d and max_len %d "
                         "must be at least 1", c->d_model, c->nhead, c->dim_feedforward,
                         c->max_len);
    if (c->d_model % c->nhead != 0)
        return error_set(err, "model: d_model %d is not divisible by nhead %d", c->d_model,
                         c->nhead);
    if (c->num_encoder_layers < 1 || c->num_encoder_layers > 64)
        return error_set(err, "model: num_encoder_layers %d is not in [1, 64]",
                         c->num_encoder_layers);
    if (seq2seq ? (c->num_decoder_layers < 1 || c->num_decoder_layers > 64)
                : c->num_decoder_layers != 0)
        return error_set(err, "model: num_decoder_layers %d: a %s model needs %s",
                         c->num_decoder_layers, model_kind_name(c->kind),
                         seq2seq ? "1 to 64" : "0");
    if (c->scale_embedding < 0 || c->scale_embedding > 2)
        return error_set(err, "model: scale_embedding %d is not 0 (none), 1 (sqrt(d_model)) "
                         "or 2 (learned)", c->scale_embedding);
    if (c->share_embeddings && (!seq2seq || c->src_vocab != c->tgt_vocab))
        return error_set(err, "model: share_embeddings needs a seq2seq model with equal "
                         "vocabularies (src_vocab %d, tgt_vocab %d)", c->src_vocab, c->tgt_vocab);
    if (c->pad_id < -1 || (c->pad_id >= 0 &&
                           (c->pad_id >= c->src_vocab || (seq2seq && c->pad_id >= c->tgt_vocab))))
        return error_set(err, "model: pad_id %d is outside the vocabularies (or -1 for none)",
                         c->pad_id);
    if (!(c->eps > 0.0f)) return error_set(err, "model: eps %g must be positive", c->eps);
    if (!(c->dropout >= 0.0f && c->dropout < 1.0f))
        return error_set(err, "model: dropout %g is not in [0, 1)", c->dropout);
    if (c->max_len > MODEL_MAX_LEN)
        return error_set(err, "model: max_len %d is above %d positions", c->max_len,
                         MODEL_MAX_LEN);
    /* The parameter count, in double so that no size wraps: it is checked
     * before anything is allocated or any table built. */
    double D = c->d_model, F = c->dim_feedforward;
    double enc = 4 * D * D + 2 * D * F + 9 * D + F;          /* attention, FFN, two norms */
    double dec = 8 * D * D + 2 * D * F + 15 * D + F;         /* two attentions, three norms */
    double total = c->num_encoder_layers * enc + c->num_decoder_layers * dec
                 + (c->src_vocab + c->tgt_vocab + 2.0 * c->max_len + 4) * D
                 + (c->tgt_vocab + 1.0) * (D + 1) + (c->input_dim + 1.0) * D;
    if (total > MODEL_MAX_PARAMS || D * F > MODEL_MAX_PARAMS || D * D > MODEL_MAX_PARAMS ||
        (double)c->max_len * D > MODEL_MAX_PARAMS)
        return error_set(err, "model: about %.3g parameters (d_model %d, dim_feedforward %d, "
                         "%d + %d layers); this project allows at most %d", total, c->d_model,
                         c->dim_feedforward, c->num_encoder_layers, c->num_decoder_layers,
                         MODEL_MAX_PARAMS);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The parameter layout (given)                                              */
/* ------------------------------------------------------------------------ */

/* Appends a tensor to the table; its offset is the running total. */
static int add_tensor(Model *m, const char *name, int64_t d0, int64_t d1, Error *err)
{
    if (m->n_tensors == MODEL_MAX_TENSORS)
        return error_set(err, "model: more than %d tensors", MODEL_MAX_TENSORS);
    ModelTensor *t = &m->tensors[m->n_tensors++];
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = d1 > 0 ? 2 : 1;
    t->shape[0] = d0;
    t->shape[1] = d1 > 0 ? d1 : 0;
    t->numel = (size_t)d0 * (size_t)(d1 > 0 ? d1 : 1);
    t->offset = m->num_params;
    m->num_params += t->numel;
    return 0;
}

/* The tensors of one attention block, under prefix ("...self_attn."). */
static int add_attention(Model *m, const char *prefix, int D, Error *err)
{
    char name[64];
    const char *parts[] = {"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"};
    const int64_t rows[] = {3 * D, 3 * D, D, D}, cols[] = {D, 0, D, 0};
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "%s%s", prefix, parts[i]);
        if (add_tensor(m, name, rows[i], cols[i], err) != 0) return -1;
    }
    return 0;
}

/* linear1, linear2 and `norms` LayerNorms under prefix ("encoder.layers.0."). */
static int add_ffn_norms(Model *m, const char *prefix, int D, int F, int norms, Error *err)
{
    char name[64];
    const char *parts[] = {"linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias"};
    const int64_t rows[] = {F, F, D, D}, cols[] = {D, 0, F, 0};
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "%s%s", prefix, parts[i]);
        if (add_tensor(m, name, rows[i], cols[i], err) != 0) return -1;
    }
    for (int k = 1; k <= norms; k++) {
        snprintf(name, sizeof name, "%snorm%d.weight", prefix, k);
        if (add_tensor(m, name, D, 0, err) != 0) return -1;
        snprintf(name, sizeof name, "%snorm%d.bias", prefix, k);
        if (add_tensor(m, name, D, 0, err) != 0) return -1;
    }
    return 0;
}

/* Lays out every tensor in model.h's order. */
static int build_layout(Model *m, Error *err)
{
    const ModelConfig *c = &m->cfg;
    int D = c->d_model, F = c->dim_feedforward, seq2seq = c->kind == MODEL_SEQ2SEQ;
    int tgt_side = seq2seq;
    char prefix[64];
    if (c->kind == MODEL_SET) {
        if (add_tensor(m, "input_net.weight", D, c->input_dim, err) != 0 ||
            add_tensor(m, "input_net.bias", D, 0, err) != 0)
            return -1;
    } else if (add_tensor(m, "src_embed.weight", c->src_vocab, D, err) != 0) {
        return -1;
    }
    if (tgt_side && !c->share_embeddings &&
        add_tensor(m, "tgt_embed.weight", c->tgt_vocab, D, err) != 0) return -1;
    if (c->scale_embedding == 2) {
        if (add_tensor(m, "src_scale", 1, 0, err) != 0) return -1;
        if (tgt_side && add_tensor(m, "tgt_scale", 1, 0, err) != 0) return -1;
    }
    if (c->learned_pos) {
        if (add_tensor(m, "src_pos.weight", c->max_len, D, err) != 0) return -1;
        if (tgt_side && add_tensor(m, "tgt_pos.weight", c->max_len, D, err) != 0) return -1;
    }
    for (int k = 0; k < c->num_encoder_layers; k++) {
        snprintf(prefix, sizeof prefix, "encoder.layers.%d.self_attn.", k);
        if (add_attention(m, prefix, D, err) != 0) return -1;
        snprintf(prefix, sizeof prefix, "encoder.layers.%d.", k);
        if (add_ffn_norms(m, prefix, D, F, 2, err) != 0) return -1;
    }
    if (c->final_norm && (add_tensor(m, "encoder.norm.weight", D, 0, err) != 0 ||
                          add_tensor(m, "encoder.norm.bias", D, 0, err) != 0))
        return -1;
    for (int k = 0; k < c->num_decoder_layers; k++) {
        snprintf(prefix, sizeof prefix, "decoder.layers.%d.self_attn.", k);
        if (add_attention(m, prefix, D, err) != 0) return -1;
        snprintf(prefix, sizeof prefix, "decoder.layers.%d.multihead_attn.", k);
        if (add_attention(m, prefix, D, err) != 0) return -1;
        snprintf(prefix, sizeof prefix, "decoder.layers.%d.", k);
        if (add_ffn_norms(m, prefix, D, F, 3, err) != 0) return -1;
    }
    if (seq2seq && c->final_norm && (add_tensor(m, "decoder.norm.weight", D, 0, err) != 0 ||
                                     add_tensor(m, "decoder.norm.bias", D, 0, err) != 0))
        return -1;
    if (add_tensor(m, "generator.weight", c->tgt_vocab, D, err) != 0 ||
        add_tensor(m, "generator.bias", c->tgt_vocab, 0, err) != 0)
        return -1;
    return 0;
}

const ModelTensor *model_tensor(const Model *m, const char *name)
{
    for (int i = 0; i < m->n_tensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0) return &m->tensors[i];
    return NULL;
}

/* The parameter (or, with grad, its gradient) called name, or NULL. */
static float *find(const Model *m, const char *name, int grad)
{
    const ModelTensor *t = model_tensor(m, name);
    if (!t) return NULL;
    return (grad ? m->grads : m->params) + t->offset;
}

static float *findf(const Model *m, int grad, const char *fmt, int k)
{
    char name[64];
    snprintf(name, sizeof name, fmt, k);
    return find(m, name, grad);
}

static void attention_views(const Model *m, const char *prefix, int k, MhaParams *p, MhaGrads *g)
{
    char fmt[96];
    float **grads[] = {&g->in_proj_weight, &g->in_proj_bias, &g->out_proj_weight,
                       &g->out_proj_bias};
    const float **params[] = {&p->in_proj_weight, &p->in_proj_bias, &p->out_proj_weight,
                              &p->out_proj_bias};
    const char *parts[] = {"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"};
    memset(p, 0, sizeof *p);
    memset(g, 0, sizeof *g);
    for (int i = 0; i < 4; i++) {
        snprintf(fmt, sizeof fmt, "%s%s", prefix, parts[i]);
        *params[i] = findf(m, 0, fmt, k);
        *grads[i] = findf(m, 1, fmt, k);
    }
}

/* Points the layers' parameter and gradient structs into params / grads. */
static void make_views(Model *m)
{
    for (int k = 0; k < m->cfg.num_encoder_layers; k++) {
        EncoderLayerParams *p = &m->enc[k];
        EncoderLayerGrads *g = &m->enc_grad[k];
        attention_views(m, "encoder.layers.%d.self_attn.", k, &p->self_attn, &g->self_attn);
        for (int grad = 0; grad < 2; grad++) {
            float *v[8];
            const char *names[8] = {"linear1.weight", "linear1.bias", "linear2.weight",
                                    "linear2.bias", "norm1.weight", "norm1.bias",
                                    "norm2.weight", "norm2.bias"};
            for (int i = 0; i < 8; i++) {
                char fmt[96];
                snprintf(fmt, sizeof fmt, "encoder.layers.%%d.%s", names[i]);
                v[i] = findf(m, grad, fmt, k);
            }
            if (grad) {
                g->linear1_weight = v[0], g->linear1_bias = v[1];
                g->linear2_weight = v[2], g->linear2_bias = v[3];
                g->norm1_weight = v[4], g->norm1_bias = v[5];
                g->norm2_weight = v[6], g->norm2_bias = v[7];
            } else {
                p->linear1_weight = v[0], p->linear1_bias = v[1];
                p->linear2_weight = v[2], p->linear2_bias = v[3];
                p->norm1_weight = v[4], p->norm1_bias = v[5];
                p->norm2_weight = v[6], p->norm2_bias = v[7];
            }
        }
    }
    for (int k = 0; k < m->cfg.num_decoder_layers; k++) {
        DecoderLayerParams *p = &m->dec[k];
        DecoderLayerGrads *g = &m->dec_grad[k];
        attention_views(m, "decoder.layers.%d.self_attn.", k, &p->self_attn, &g->self_attn);
        attention_views(m, "decoder.layers.%d.multihead_attn.", k, &p->multihead_attn,
                        &g->multihead_attn);
        p->linear1_weight = findf(m, 0, "decoder.layers.%d.linear1.weight", k);
        p->linear1_bias = findf(m, 0, "decoder.layers.%d.linear1.bias", k);
        p->linear2_weight = findf(m, 0, "decoder.layers.%d.linear2.weight", k);
        p->linear2_bias = findf(m, 0, "decoder.layers.%d.linear2.bias", k);
        g->linear1_weight = findf(m, 1, "decoder.layers.%d.linear1.weight", k);
        g->linear1_bias = findf(m, 1, "decoder.layers.%d.linear1.bias", k);
        g->linear2_weight = findf(m, 1, "decoder.layers.%d.linear2.weight", k);
        g->linear2_bias = findf(m, 1, "decoder.layers.%d.linear2.bias", k);
        for (int j = 0; j < 3; j++) {
            char fmt[96];
            snprintf(fmt, sizeof fmt, "decoder.layers.%%d.norm%d.weight", j + 1);
            p->norm_weight[j] = findf(m, 0, fmt, k);
            g->norm_weight[j] = findf(m, 1, fmt, k);
            snprintf(fmt, sizeof fmt, "decoder.layers.%%d.norm%d.bias", j + 1);
            p->norm_bias[j] = findf(m, 0, fmt, k);
            g->norm_bias[j] = findf(m, 1, fmt, k);
        }
    }
}

void model_free(Model *m)
{
    free(m->params);
    free(m->grads);
    free(m->pos_table);
    free(m->enc);
    free(m->enc_grad);
    free(m->dec);
    free(m->dec_grad);
    memset(m, 0, sizeof *m);
}

/* Allocates a zeroed model for cfg: layout, arrays, views, position table. */
static int model_alloc(Model *m, const ModelConfig *cfg, Error *err)
{
    memset(m, 0, sizeof *m);
    if (model_config_check(cfg, err) != 0) return -1;
    m->cfg = *cfg;
    if (build_layout(m, err) != 0) {
        model_free(m);
        return -1;
    }
    int Ke = cfg->num_encoder_layers, Kd = cfg->num_decoder_layers;
    m->params = calloc(m->num_params, sizeof *m->params);
    m->grads = calloc(m->num_params, sizeof *m->grads);
    m->enc = calloc((size_t)Ke, sizeof *m->enc);
    m->enc_grad = calloc((size_t)Ke, sizeof *m->enc_grad);
    m->dec = calloc((size_t)(Kd ? Kd : 1), sizeof *m->dec);
    m->dec_grad = calloc((size_t)(Kd ? Kd : 1), sizeof *m->dec_grad);
    int table = !cfg->learned_pos && cfg->kind != MODEL_SET;   /* a set has no positions */
    if (table)
        m->pos_table = malloc((size_t)cfg->max_len * cfg->d_model * sizeof *m->pos_table);
    if (!m->params || !m->grads || !m->enc || !m->enc_grad || !m->dec || !m->dec_grad ||
        (table && !m->pos_table)) {
        model_free(m);
        return error_set(err, "model: out of memory for %zu parameters", m->num_params);
    }
    if (m->pos_table && positional_sinusoidal_table(m->pos_table, cfg->max_len, cfg->d_model)) {
        model_free(m);
        return error_set(err, "model: positional_sinusoidal_table failed");
    }
    make_views(m);
    return 0;
}

void model_zero_grad(Model *m)
{
    memset(m->grads, 0, m->num_params * sizeof *m->grads);
}

/* ------------------------------------------------------------------------ */
/* Initialisation (given): PyTorch's defaults for each module                */
/* ------------------------------------------------------------------------ */

static void fill_uniform(float *x, size_t n, float bound, Rng *rng)
{
    for (size_t i = 0; i < n; i++) x[i] = bound * (2.0f * rng_uniform(rng) - 1.0f);
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

int model_init(Model *m, const ModelConfig *cfg, Rng *rng, Error *err)
{
    if (model_alloc(m, cfg, err) != 0) return -1;
    int D = cfg->d_model;
    for (int i = 0; i < m->n_tensors; i++) {
        const ModelTensor *t = &m->tensors[i];
        float *x = m->params + t->offset;
        const char *name = t->name;
        if (ends_with(name, "_embed.weight") || ends_with(name, "_pos.weight")) {
            for (size_t j = 0; j < t->numel; j++) x[j] = rng_normal(rng);   /* nn.Embedding */
            if (cfg->pad_id >= 0 && ends_with(name, "_embed.weight"))
                memset(x + (size_t)cfg->pad_id * D, 0, (size_t)D * sizeof *x);
        } else if (ends_with(name, "_scale")) {
            x[0] = sqrtf((float)D);
        } else if (ends_with(name, "in_proj_weight")) {
            /* xavier_uniform_ over the packed (3D, D) matrix */
            fill_uniform(x, t->numel, sqrtf(6.0f / (float)(t->shape[0] + t->shape[1])), rng);
        } else if (ends_with(name, "in_proj_bias") || ends_with(name, "out_proj.bias")) {
            memset(x, 0, t->numel * sizeof *x);
        } else if (strstr(name, "norm") && ends_with(name, ".weight")) {
            for (size_t j = 0; j < t->numel; j++) x[j] = 1.0f;
        } else if (strstr(name, "norm") && ends_with(name, ".bias")) {
            memset(x, 0, t->numel * sizeof *x);
        } else if (ends_with(name, ".weight")) {
            /* nn.Linear: kaiming_uniform(a = sqrt(5)) is uniform(+-1/sqrt(in)) */
            fill_uniform(x, t->numel, 1.0f / sqrtf((float)t->shape[1]), rng);
        } else {
            /* a linear layer's bias: uniform(+-1/sqrt(in)), in = the weight's columns */
            const ModelTensor *w = &m->tensors[i - 1];
            fill_uniform(x, t->numel, 1.0f / sqrtf((float)w->shape[1]), rng);
        }
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Checkpoints (given)                                                       */
/* ------------------------------------------------------------------------ */

/* The config fields as metadata keys "model.<field>". */
typedef struct {
    const char *key;
    int *value;
} IntField;

static int int_fields(ModelConfig *c, IntField *f)
{
    IntField all[] = {
        {"model.src_vocab", &c->src_vocab}, {"model.tgt_vocab", &c->tgt_vocab},
        {"model.d_model", &c->d_model}, {"model.nhead", &c->nhead},
        {"model.dim_feedforward", &c->dim_feedforward},
        {"model.num_encoder_layers", &c->num_encoder_layers},
        {"model.num_decoder_layers", &c->num_decoder_layers},
        {"model.max_len", &c->max_len}, {"model.learned_pos", &c->learned_pos},
        {"model.scale_embedding", &c->scale_embedding},
        {"model.share_embeddings", &c->share_embeddings},
        {"model.final_norm", &c->final_norm}, {"model.norm_first", &c->norm_first},
        {"model.pad_id", &c->pad_id},
    };
    int n = (int)(sizeof all / sizeof all[0]);
    memcpy(f, all, sizeof all);
    return n;
}

int model_to_file(const Model *m, TensorFile *f, Error *err)
{
    ModelConfig c = m->cfg;
    IntField fields[32];
    char text[64];
    int n = int_fields(&c, fields);
    for (int i = 0; i < m->n_tensors; i++) {
        const ModelTensor *t = &m->tensors[i];
        if (tensorfile_add_f32(f, t->name, m->params + t->offset, t->ndim, t->shape, err) != 0)
            return -1;
    }
    if (tensorfile_set_meta(f, "model.kind", model_kind_name(c.kind), err) != 0) return -1;
    if (c.kind == MODEL_SET) {   /* the other kinds have no input_dim: their files stay as they were */
        snprintf(text, sizeof text, "%d", c.input_dim);
        if (tensorfile_set_meta(f, "model.input_dim", text, err) != 0) return -1;
    }
    for (int i = 0; i < n; i++) {
        snprintf(text, sizeof text, "%d", *fields[i].value);
        if (tensorfile_set_meta(f, fields[i].key, text, err) != 0) return -1;
    }
    snprintf(text, sizeof text, "%.9g", c.eps);
    if (tensorfile_set_meta(f, "model.eps", text, err) != 0) return -1;
    snprintf(text, sizeof text, "%.9g", c.dropout);
    return tensorfile_set_meta(f, "model.dropout", text, err);
}

/* Reads the config from f's metadata; every key is required. */
static int config_from_file(const TensorFile *f, ModelConfig *c, Error *err)
{
    IntField fields[32];
    const char *kind = tensorfile_meta(f, "model.kind");
    memset(c, 0, sizeof *c);
    if (!kind)
        return error_set(err, "%s: not a model checkpoint: no metadata 'model.kind'", case_name(f));
    if (strcmp(kind, "seq2seq") == 0) c->kind = MODEL_SEQ2SEQ;
    else if (strcmp(kind, "labeller") == 0) c->kind = MODEL_LABELLER;
    else if (strcmp(kind, "classifier") == 0) c->kind = MODEL_CLASSIFIER;
    else if (strcmp(kind, "set") == 0) c->kind = MODEL_SET;
    else return error_set(err, "%s: model.kind '%s' is not seq2seq, labeller, classifier or "
                          "set", case_name(f), kind);
    int n = int_fields(c, fields);
    for (int i = 0; i < n; i++) {
        long long v;
        if (!tensorfile_meta(f, fields[i].key))
            return error_set(err, "%s: not a model checkpoint: no metadata '%s'", case_name(f),
                             fields[i].key);
        if (tensorfile_meta_int(f, fields[i].key, 0, &v, err) != 0) return -1;
        if (v < INT_MIN || v > INT_MAX)
            return error_set(err, "%s: metadata '%s' = %lld is out of range", case_name(f),
                             fields[i].key, v);
        *fields[i].value = (int)v;
    }
    if (c->kind == MODEL_SET) {   /* only a set model has it (and must) */
        long long v;
        if (!tensorfile_meta(f, "model.input_dim"))
            return error_set(err, "%s: a set model needs metadata 'model.input_dim'",
                             case_name(f));
        if (tensorfile_meta_int(f, "model.input_dim", 0, &v, err) != 0) return -1;
        if (v < 1 || v > INT_MAX)
            return error_set(err, "%s: metadata 'model.input_dim' = %lld is out of range",
                             case_name(f), v);
        c->input_dim = (int)v;
    } else if (tensorfile_meta(f, "model.input_dim")) {
        return error_set(err, "%s: metadata 'model.input_dim': only a set model reads "
                         "features", case_name(f));
    }
    double eps, dropout;
    if (!tensorfile_meta(f, "model.eps") || !tensorfile_meta(f, "model.dropout"))
        return error_set(err, "%s: not a model checkpoint: no metadata 'model.eps' or "
                         "'model.dropout'", case_name(f));
    if (tensorfile_meta_double(f, "model.eps", 0, &eps, err) != 0 ||
        tensorfile_meta_double(f, "model.dropout", 0, &dropout, err) != 0)
        return -1;
    c->eps = (float)eps;
    c->dropout = (float)dropout;
    return 0;
}

int model_load_file(Model *m, const TensorFile *f, int strict, Error *err)
{
    ModelConfig cfg;
    Error cfg_err;
    memset(m, 0, sizeof *m);
    if (config_from_file(f, &cfg, err) != 0) return -1;
    if (model_alloc(m, &cfg, &cfg_err) != 0)
        return error_set(err, "%s: %s", case_name(f), cfg_err.msg);
    for (int i = 0; i < m->n_tensors; i++) {
        const ModelTensor *t = &m->tensors[i];
        const Tensor *x;
        if (tensorfile_get(f, t->name, DTYPE_F32, t->ndim, &x, err) != 0) goto fail;
        for (int d = 0; d < t->ndim; d++) {
            if (x->shape[d] != t->shape[d]) {
                error_set(err, "%s: %s has shape (%" PRId64 "%s%" PRId64 "), the config needs "
                          "(%" PRId64 "%s%" PRId64 ")", case_name(f), t->name, x->shape[0],
                          x->ndim > 1 ? ", " : "", x->ndim > 1 ? x->shape[1] : 0, t->shape[0],
                          t->ndim > 1 ? ", " : "", t->ndim > 1 ? t->shape[1] : 0);
                goto fail;
            }
        }
        memcpy(m->params + t->offset, x->data, t->numel * sizeof(float));
    }
    if (strict) {
        for (int i = 0; i < f->n_tensors; i++) {
            const char *name = f->tensors[i].name;
            if (strncmp(name, "optimizer.", 10) != 0 && !model_tensor(m, name)) {
                error_set(err, "%s: tensor '%s' is not a parameter of this %s model", case_name(f),
                          name, model_kind_name(cfg.kind));
                goto fail;
            }
        }
    }
    return 0;
fail:
    model_free(m);
    return -1;
}

int model_save(const Model *m, const char *path, Error *err)
{
    TensorFile f = {0};
    int rc = model_to_file(m, &f, err);
    if (rc == 0) rc = safetensors_write(path, &f, err);
    tensorfile_free(&f);
    return rc;
}

int model_load(Model *m, const char *path, Error *err)
{
    TensorFile f = {0};
    memset(m, 0, sizeof *m);
    if (safetensors_read(path, &f, err) != 0) return -1;
    int rc = model_load_file(m, &f, 1, err);
    tensorfile_free(&f);
    return rc;
}

int model_check_ids(const int64_t *ids, int64_t n, int vocab, const char *where, Error *err)
{
    return embedding_check_ids(ids, n, vocab, where, err);
}

/* ------------------------------------------------------------------------ */
/* Work buffers (given)                                                      */
/* ------------------------------------------------------------------------ */

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
    decoder_stack_free(&w->dec);
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
    if (encoder_cache_alloc(&w->enc, c->num_encoder_layers, N, S, D, H, c->dim_feedforward,
                            c->norm_first, c->eps, c->dropout, backward, err) != 0 ||
        (seq2seq && decoder_stack_alloc(&w->dec, c->num_decoder_layers, N, T, S, D, H,
                                        c->dim_feedforward, c->norm_first, c->eps, c->dropout,
                                        backward, err) != 0)) {
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
    for (int l = 0; seq2seq && l < w->dec.L; l++) {
        DecoderLayerCache *c = &w->dec.layers[l];
        c->T = T, c->S = S;
        mha_cache_reshape(&c->sa, T, T);
        mha_cache_reshape(&c->ca, T, S);
    }
    return 0;
}

static Side side_of(const Model *m, int target)
{
    Side s;
    int shared = target && m->cfg.share_embeddings;
    const char *embed = target && !shared ? "tgt_embed.weight" : "src_embed.weight";
    const char *scale = target ? "tgt_scale" : "src_scale";
    const char *pos = target ? "tgt_pos.weight" : "src_pos.weight";
    s.embed = find(m, embed, 0), s.d_embed = find(m, embed, 1);
    s.scale = find(m, scale, 0), s.d_scale = find(m, scale, 1);
    s.pos = m->cfg.learned_pos ? find(m, pos, 0) : m->pos_table;
    s.d_pos = m->cfg.learned_pos ? find(m, pos, 1) : NULL;
    return s;
}

static float scale_of(const Model *m, const Side *s)
{
    switch (m->cfg.scale_embedding) {
    case 1: return sqrtf((float)m->cfg.d_model);
    case 2: return s->scale[0];
    }
    return 1.0f;
}
