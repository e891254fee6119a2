/*
 * model.c - see model.h, and the chapter's README for the formulas. The
 * models are glue around chapters 05 and 06: an embedding front end, the
 * stacks, and a linear generator. What this file decides is the table of
 * the parameters (which tensors a config has, their shapes, their order in
 * the flat array, how each starts), the masks made from the ids, and which
 * gradient flows where.
 *
 * Letters: N batch, S source length, T target length, L queries of one
 * attention call, D d_model, H nhead, F dim_feedforward, V a vocabulary,
 * I input_dim, max_len (the top README's letters); the front end's len is
 * S or T, the side's length.
 *
 * Not here (runtime/): the config's checks, checkpoints, the work buffers.
 */
#include "model.h"

#include "error.h"   /* not_implemented(), used by the exercise stubs */

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dropout.h"
#include "embedding.h"
#include "matmul.h"
#include "positional.h"
#include "tensor.h"

/* ------------------------------------------------------------------------ */
/* The parameters: one table per layer kind                                  */
/* ------------------------------------------------------------------------ */

/* A size in the letters of the config; DIM_NONE as the second size makes a
 * vector. */
typedef enum {
    DIM_NONE, DIM_1, DIM_D, DIM_3D, DIM_F, DIM_VS, DIM_VT, DIM_MAX_LEN, DIM_I
} ModelDim;

/* Which configs have a tensor of the model's own (a layer has all of its). */
typedef enum {
    ALWAYS,
    IF_IDS,                 /* a front end that embeds ids (every kind but set) */
    IF_SET,                 /* a set model's linear front end */
    IF_TGT_EMBED,           /* seq2seq without shared embeddings */
    IF_SCALE, IF_TGT_SCALE, /* scale_embedding 2: the source's, and seq2seq's target's */
    IF_POS, IF_TGT_POS,     /* learned positions, likewise */
    IF_FINAL_NORM,          /* the encoder's final norm */
    IF_DECODER_NORM,        /* seq2seq with final_norm */
    EACH_ENCODER_LAYER,     /* not a tensor: the Ke encoder layers go here */
    EACH_DECODER_LAYER      /* the Kd decoder layers */
} ModelWhen;

/* One tensor of a layer kind: its name under the layer's prefix, its shape,
 * how it starts (fan_in: INIT_LINEAR's in_features), and the float * of the
 * layer's parameter struct that views it (its offsetof). */
typedef struct {
    const char *name;
    ModelDim rows, cols;
    ModelInit init;
    ModelDim fan_in;
    size_t view;
} TensorSpec;

#define ENC(field) offsetof(EncoderLayerParams, field)
#define DEC(field) offsetof(DecoderLayerParams, field)
#define TOP(field) offsetof(ModelParams, field)

/* nn.TransformerEncoderLayer, under "encoder.layers.<k>." */
static const TensorSpec ENCODER_LAYER[] = {
    {"self_attn.in_proj_weight", DIM_3D, DIM_D, INIT_XAVIER, 0, ENC(self_attn.in_proj_weight)},
    {"self_attn.in_proj_bias", DIM_3D, DIM_NONE, INIT_ZEROS, 0, ENC(self_attn.in_proj_bias)},
    {"self_attn.out_proj.weight", DIM_D, DIM_D, INIT_LINEAR, DIM_D, ENC(self_attn.out_proj_weight)},
    {"self_attn.out_proj.bias", DIM_D, DIM_NONE, INIT_ZEROS, 0, ENC(self_attn.out_proj_bias)},
    {"linear1.weight", DIM_F, DIM_D, INIT_LINEAR, DIM_D, ENC(linear1_weight)},
    {"linear1.bias", DIM_F, DIM_NONE, INIT_LINEAR, DIM_D, ENC(linear1_bias)},
    {"linear2.weight", DIM_D, DIM_F, INIT_LINEAR, DIM_F, ENC(linear2_weight)},
    {"linear2.bias", DIM_D, DIM_NONE, INIT_LINEAR, DIM_F, ENC(linear2_bias)},
    {"norm1.weight", DIM_D, DIM_NONE, INIT_ONES, 0, ENC(norm1_weight)},
    {"norm1.bias", DIM_D, DIM_NONE, INIT_ZEROS, 0, ENC(norm1_bias)},
    {"norm2.weight", DIM_D, DIM_NONE, INIT_ONES, 0, ENC(norm2_weight)},
    {"norm2.bias", DIM_D, DIM_NONE, INIT_ZEROS, 0, ENC(norm2_bias)},
};

/* nn.TransformerDecoderLayer, under "decoder.layers.<k>." */
static const TensorSpec DECODER_LAYER[] = {
    {"self_attn.in_proj_weight", DIM_3D, DIM_D, INIT_XAVIER, 0, DEC(self_attn.in_proj_weight)},
    {"self_attn.in_proj_bias", DIM_3D, DIM_NONE, INIT_ZEROS, 0, DEC(self_attn.in_proj_bias)},
    {"self_attn.out_proj.weight", DIM_D, DIM_D, INIT_LINEAR, DIM_D, DEC(self_attn.out_proj_weight)},
    {"self_attn.out_proj.bias", DIM_D, DIM_NONE, INIT_ZEROS, 0, DEC(self_attn.out_proj_bias)},
    {"multihead_attn.in_proj_weight", DIM_3D, DIM_D, INIT_XAVIER, 0,
     DEC(multihead_attn.in_proj_weight)},
    {"multihead_attn.in_proj_bias", DIM_3D, DIM_NONE, INIT_ZEROS, 0,
     DEC(multihead_attn.in_proj_bias)},
    {"multihead_attn.out_proj.weight", DIM_D, DIM_D, INIT_LINEAR, DIM_D,
     DEC(multihead_attn.out_proj_weight)},
    {"multihead_attn.out_proj.bias", DIM_D, DIM_NONE, INIT_ZEROS, 0,
     DEC(multihead_attn.out_proj_bias)},
    {"linear1.weight", DIM_F, DIM_D, INIT_LINEAR, DIM_D, DEC(linear1_weight)},
    {"linear1.bias", DIM_F, DIM_NONE, INIT_LINEAR, DIM_D, DEC(linear1_bias)},
    {"linear2.weight", DIM_D, DIM_F, INIT_LINEAR, DIM_F, DEC(linear2_weight)},
    {"linear2.bias", DIM_D, DIM_NONE, INIT_LINEAR, DIM_F, DEC(linear2_bias)},
    {"norm1.weight", DIM_D, DIM_NONE, INIT_ONES, 0, DEC(norm_weight[0])},
    {"norm1.bias", DIM_D, DIM_NONE, INIT_ZEROS, 0, DEC(norm_bias[0])},
    {"norm2.weight", DIM_D, DIM_NONE, INIT_ONES, 0, DEC(norm_weight[1])},
    {"norm2.bias", DIM_D, DIM_NONE, INIT_ZEROS, 0, DEC(norm_bias[1])},
    {"norm3.weight", DIM_D, DIM_NONE, INIT_ONES, 0, DEC(norm_weight[2])},
    {"norm3.bias", DIM_D, DIM_NONE, INIT_ZEROS, 0, DEC(norm_bias[2])},
};

/* The model in state_dict order (model.h's list): its own tensors, each with
 * the configs that have it, and where the stacks' layers go. */
typedef struct {
    ModelWhen when;
    TensorSpec tensor;      /* views into ModelParams; a stack's: the layers' prefix */
} ModelRow;

static const ModelRow MODEL[] = {
    {IF_IDS, {"src_embed.weight", DIM_VS, DIM_D, INIT_EMBEDDING, 0, TOP(src_embed)}},
    {IF_SET, {"input_net.weight", DIM_D, DIM_I, INIT_LINEAR, DIM_I, TOP(input_net_weight)}},
    {IF_SET, {"input_net.bias", DIM_D, DIM_NONE, INIT_LINEAR, DIM_I, TOP(input_net_bias)}},
    {IF_TGT_EMBED, {"tgt_embed.weight", DIM_VT, DIM_D, INIT_EMBEDDING, 0, TOP(tgt_embed)}},
    {IF_SCALE, {"src_scale", DIM_1, DIM_NONE, INIT_SQRT_D, 0, TOP(src_scale)}},
    {IF_TGT_SCALE, {"tgt_scale", DIM_1, DIM_NONE, INIT_SQRT_D, 0, TOP(tgt_scale)}},
    {IF_POS, {"src_pos.weight", DIM_MAX_LEN, DIM_D, INIT_NORMAL, 0, TOP(src_pos)}},
    {IF_TGT_POS, {"tgt_pos.weight", DIM_MAX_LEN, DIM_D, INIT_NORMAL, 0, TOP(tgt_pos)}},
    {EACH_ENCODER_LAYER, {"encoder.layers.", DIM_NONE, DIM_NONE, INIT_ZEROS, DIM_NONE, 0}},
    {IF_FINAL_NORM,
     {"encoder.norm.weight", DIM_D, DIM_NONE, INIT_ONES, 0, TOP(encoder.norm_weight)}},
    {IF_FINAL_NORM, {"encoder.norm.bias", DIM_D, DIM_NONE, INIT_ZEROS, 0, TOP(encoder.norm_bias)}},
    {EACH_DECODER_LAYER, {"decoder.layers.", DIM_NONE, DIM_NONE, INIT_ZEROS, DIM_NONE, 0}},
    {IF_DECODER_NORM,
     {"decoder.norm.weight", DIM_D, DIM_NONE, INIT_ONES, 0, TOP(decoder.norm_weight)}},
    {IF_DECODER_NORM,
     {"decoder.norm.bias", DIM_D, DIM_NONE, INIT_ZEROS, 0, TOP(decoder.norm_bias)}},
    {ALWAYS, {"generator.weight", DIM_VT, DIM_D, INIT_LINEAR, DIM_D, TOP(generator_weight)}},
    {ALWAYS, {"generator.bias", DIM_VT, DIM_NONE, INIT_LINEAR, DIM_D, TOP(generator_bias)}},
};
#undef ENC
#undef DEC
#undef TOP

/* ------------------------------------------------------------------------ */
/* Forward                                                                   */
/* ------------------------------------------------------------------------ */

/* One side's parameters: embedding table, scale, position table. */
typedef struct {
    const float *embed, *scale, *pos;
    float *d_embed, *d_scale, *d_pos;   /* gradients; d_pos NULL for a fixed table */
} Side;

/* Given helpers, defined at the end of the file. */
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
    const float *scaled = emb;                    /* embed(ids) * scale */
    if (scale != 1.0f) {
        #pragma omp parallel for schedule(static) if (n >= FLOATS_PARALLEL_MIN)
        for (int i = 0; i < n; i++) x[i] = emb[i] * scale;
        scaled = x;
    }
    if (positional_forward(x, scaled, s->pos, N, len, D) != 0) return -1;
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
    const ModelParams *p = &m->views;
    if (!features) return -1;
    if (linear_forward(x, features, p->input_net_weight, p->input_net_bias, N * S,
                       m->cfg.input_dim, D) != 0)
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
    const ModelParams *p = &m->views;
    int N = w->N, S = w->S, T = w->T, D = c->d_model, H = c->nhead;
    Side src_side = side_of(m, 0), tgt_side = side_of(m, 1);
    w->src_ids = src, w->tgt_ids = tgt;
    w->dropped = rng != NULL && c->dropout > 0;

    if (c->kind == MODEL_SET
            ? set_front_forward(m, w->src_x, w->src_drop, w->features, N, S, rng) != 0
            : front_forward(m, &src_side, w->src_x, w->src_emb, w->src_drop, src, N, S, rng) != 0)
        return -1;
    const float *enc_bias, *dec_bias, *cross_bias;
    if (padding_bias(&enc_bias, w->enc_bias, src, c->pad_id, N, H, S, S) != 0) return -1;
    if (encoder_forward(w->memory, &w->enc, w->src_x, &p->encoder, enc_bias, rng) != 0)
        return -1;

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
        DecoderMasks masks = {dec_bias, 1, cross_bias};
        if (decoder_forward(w->dec_out, &w->dec, w->tgt_x, w->memory, &p->decoder, &masks,
                            rng) != 0)
            return -1;
        top = w->dec_out;
    }
    return linear_forward(w->logits, top, p->generator_weight, p->generator_bias, (int)w->rows,
                          D, c->tgt_vocab);
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
    return linear_backward(NULL, m->grad_views.input_net_weight, m->grad_views.input_net_bias,
                           dx, features, m->views.input_net_weight, N * S, m->cfg.input_dim, D);
    /* END SOLUTION */
}

int model_backward(Model *m, ModelWork *w, const float *dlogits)
{
    /* BEGIN SOLUTION */
    const ModelConfig *c = &m->cfg;
    const ModelParams *p = &m->views, *g = &m->grad_views;
    int N = w->N, S = w->S, T = w->T, D = c->d_model;
    size_t nsd = (size_t)N * S * D;
    if (!w->backward) return -1;
    const float *top = c->kind == MODEL_SEQ2SEQ ? w->dec_out
                     : c->kind == MODEL_CLASSIFIER ? w->pooled : w->memory;
    /* The generator's input gradient. Where the generator reads the
     * encoder's output (labeller, set, language model) that is the gradient
     * reaching the encoder, collected straight into d_memory. */
    float *d_top = top == w->memory ? w->d_memory : w->d_top;
    floats_zero(d_top, (size_t)w->rows * D);
    if (linear_backward(d_top, g->generator_weight, g->generator_bias, dlogits, top,
                        p->generator_weight, (int)w->rows, D, c->tgt_vocab) != 0)
        return -1;

    /* The gradient reaching the encoder's output, from the other heads. */
    if (c->kind == MODEL_CLASSIFIER) {
        floats_zero(w->d_memory, nsd);
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
    } else if (c->kind == MODEL_SEQ2SEQ) {
        Side tgt_side = side_of(m, 1);
        floats_zero(w->d_memory, nsd);
        floats_zero(w->d_tgt, (size_t)N * T * D);
        if (decoder_backward(w->d_tgt, w->d_memory, &g->decoder, w->d_top, w->tgt_x, w->memory,
                             &p->decoder, &w->dec) != 0)
            return -1;
        if (front_backward(m, &tgt_side, w->d_tgt, w->tgt_emb, w->dropped ? w->tgt_drop : NULL,
                           w->tgt_ids, N, T) != 0)
            return -1;
    }

    Side src_side = side_of(m, 0);
    floats_zero(w->d_src, nsd);
    if (encoder_backward(w->d_src, &g->encoder, w->d_memory, w->src_x, &p->encoder,
                         &w->enc) != 0)
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
/* The layout, from the tables (given)                                       */
/* ------------------------------------------------------------------------ */

static int64_t dim_size(const ModelConfig *c, ModelDim d)
{
    switch (d) {
    case DIM_NONE: return 0;
    case DIM_1:    return 1;
    case DIM_D:    return c->d_model;
    case DIM_3D:   return 3 * (int64_t)c->d_model;
    case DIM_F:    return c->dim_feedforward;
    case DIM_VS:   return c->src_vocab;
    case DIM_VT:   return c->tgt_vocab;
    case DIM_MAX_LEN: return c->max_len;
    case DIM_I:    return c->input_dim;
    }
    return 0;
}

static int has(const ModelConfig *c, ModelWhen when)
{
    int seq2seq = c->kind == MODEL_SEQ2SEQ;
    switch (when) {
    case ALWAYS:             return 1;
    case IF_IDS:             return c->kind != MODEL_SET;
    case IF_SET:             return c->kind == MODEL_SET;
    case IF_TGT_EMBED:       return seq2seq && !c->share_embeddings;
    case IF_SCALE:           return c->scale_embedding == 2;
    case IF_TGT_SCALE:       return seq2seq && c->scale_embedding == 2;
    case IF_POS:             return c->learned_pos;
    case IF_TGT_POS:         return seq2seq && c->learned_pos;
    case IF_FINAL_NORM:      return c->final_norm;
    case IF_DECODER_NORM:    return seq2seq && c->final_norm;
    case EACH_ENCODER_LAYER: return 1;
    case EACH_DECODER_LAYER: return 1;
    }
    return 0;
}

/* A walk over the tables, in state_dict order. Counting, it appends every
 * tensor to table->tensors; pointing, it points each tensor's field in views
 * (and grad_views) at its place in params (and grads). */
typedef struct {
    const ModelConfig *cfg;
    Model *table;                       /* counting: the table to fill, else NULL */
    size_t at;                          /* the running offset, in floats */
    ModelParams *views, *grad_views;    /* pointing: the views to set, else NULL */
    float *params, *grads;
} Walk;

/* The tensor of spec under prefix; view and grad_view are the structs (a
 * layer's, or the ModelParams) whose field at spec->view points at it. */
static int add_tensor(Walk *w, const char *prefix, const TensorSpec *spec, void *view,
                      void *grad_view, Error *err)
{
    const ModelConfig *c = w->cfg;
    int64_t rows = dim_size(c, spec->rows), cols = dim_size(c, spec->cols);
    size_t numel = (size_t)rows * (size_t)(spec->cols == DIM_NONE ? 1 : cols);
    if (w->table) {
        Model *m = w->table;
        if (m->n_tensors == MODEL_MAX_TENSORS)
            return error_set(err, "model: more than %d tensors", MODEL_MAX_TENSORS);
        ModelTensor *t = &m->tensors[m->n_tensors++];
        snprintf(t->name, sizeof t->name, "%s%s", prefix, spec->name);
        t->ndim = spec->cols == DIM_NONE ? 1 : 2;
        t->shape[0] = rows;
        t->shape[1] = cols;
        t->numel = numel;
        t->offset = w->at;
        t->init = spec->init;
        t->fan_in = dim_size(c, spec->fan_in);
    }
    if (w->views) {
        *(float **)((char *)view + spec->view) = w->params + w->at;
        *(float **)((char *)grad_view + spec->view) = w->grads + w->at;
    }
    w->at += numel;
    return 0;
}

/* Every tensor of a layer kind, under prefix ("encoder.layers.<k>."). */
static int add_layer(Walk *w, const char *prefix, const TensorSpec *specs, int n, void *view,
                     void *grad_view, Error *err)
{
    for (int i = 0; i < n; i++)
        if (add_tensor(w, prefix, &specs[i], view, grad_view, err) != 0) return -1;
    return 0;
}

/* Walks MODEL in order, through every tensor this config has. */
static int lay_out(Walk *w, Error *err)
{
    const ModelConfig *c = w->cfg;
    ModelParams *p = w->views, *g = w->grad_views;
    int n_enc = (int)(sizeof ENCODER_LAYER / sizeof ENCODER_LAYER[0]);
    int n_dec = (int)(sizeof DECODER_LAYER / sizeof DECODER_LAYER[0]);
    char prefix[64];
    for (size_t i = 0; i < sizeof MODEL / sizeof MODEL[0]; i++) {
        const TensorSpec *spec = &MODEL[i].tensor;
        ModelWhen when = MODEL[i].when;
        if (when == EACH_ENCODER_LAYER) {
            for (int k = 0; k < c->num_encoder_layers; k++) {
                snprintf(prefix, sizeof prefix, "%s%d.", spec->name, k);
                if (add_layer(w, prefix, ENCODER_LAYER, n_enc, p ? &p->encoder.layers[k] : NULL,
                              g ? &g->encoder.layers[k] : NULL, err) != 0)
                    return -1;
            }
        } else if (when == EACH_DECODER_LAYER) {
            for (int k = 0; k < c->num_decoder_layers; k++) {
                snprintf(prefix, sizeof prefix, "%s%d.", spec->name, k);
                if (add_layer(w, prefix, DECODER_LAYER, n_dec, p ? &p->decoder.layers[k] : NULL,
                              g ? &g->decoder.layers[k] : NULL, err) != 0)
                    return -1;
            }
        } else if (has(c, when) && add_tensor(w, "", spec, p, g, err) != 0) {
            return -1;
        }
    }
    return 0;
}

void model_views_free(ModelParams *v)
{
    free(v->encoder.layers);
    free(v->decoder.layers);
    memset(v, 0, sizeof *v);
}

/* One view struct per layer, every pointer NULL until the walk sets it. */
static int alloc_views(ModelParams *v, const ModelConfig *c)
{
    int Ke = c->num_encoder_layers, Kd = c->num_decoder_layers;
    memset(v, 0, sizeof *v);
    v->encoder.num_layers = Ke;
    v->decoder.num_layers = Kd;
    v->encoder.layers = calloc((size_t)Ke, sizeof *v->encoder.layers);
    v->decoder.layers = calloc((size_t)(Kd ? Kd : 1), sizeof *v->decoder.layers);
    return v->encoder.layers && v->decoder.layers ? 0 : -1;
}

int model_views(const Model *m, ModelParams *views, ModelParams *grad_views, float *params,
                float *grads, Error *err)
{
    if (alloc_views(views, &m->cfg) != 0 || alloc_views(grad_views, &m->cfg) != 0) {
        model_views_free(views);
        model_views_free(grad_views);
        return error_set(err, "model: out of memory for the views of %d + %d layers",
                         m->cfg.num_encoder_layers, m->cfg.num_decoder_layers);
    }
    Walk pointing = {&m->cfg, NULL, 0, views, grad_views, params, grads};
    return lay_out(&pointing, err);
}

const ModelTensor *model_tensor(const Model *m, const char *name)
{
    for (int i = 0; i < m->n_tensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0) return &m->tensors[i];
    return NULL;
}

void model_free(Model *m)
{
    free(m->params);
    free(m->grads);
    free(m->pos_table);
    model_views_free(&m->views);
    model_views_free(&m->grad_views);
    memset(m, 0, sizeof *m);
}

int model_alloc(Model *m, const ModelConfig *cfg, Error *err)
{
    memset(m, 0, sizeof *m);
    if (model_config_check(cfg, err) != 0) return -1;
    m->cfg = *cfg;
    Walk counting = {cfg, m, 0, NULL, NULL, NULL, NULL};
    if (lay_out(&counting, err) != 0) {
        model_free(m);
        return -1;
    }
    m->num_params = counting.at;
    m->params = calloc(m->num_params, sizeof *m->params);
    m->grads = calloc(m->num_params, sizeof *m->grads);
    int table = !cfg->learned_pos && cfg->kind != MODEL_SET;   /* a set has no positions */
    if (table)
        m->pos_table = malloc((size_t)cfg->max_len * cfg->d_model * sizeof *m->pos_table);
    if (!m->params || !m->grads || (table && !m->pos_table)) {
        size_t n = m->num_params;
        model_free(m);
        return error_set(err, "model: out of memory for %zu parameters", n);
    }
    if (m->pos_table && positional_sinusoidal_table(m->pos_table, cfg->max_len, cfg->d_model)) {
        model_free(m);
        return error_set(err, "model: positional_sinusoidal_table failed");
    }
    if (model_views(m, &m->views, &m->grad_views, m->params, m->grads, err) != 0) {
        model_free(m);
        return -1;
    }
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

int model_init(Model *m, const ModelConfig *cfg, Rng *rng, Error *err)
{
    if (model_alloc(m, cfg, err) != 0) return -1;
    int D = cfg->d_model;
    /* One tensor after another in the table's order: the order of the draws. */
    for (int i = 0; i < m->n_tensors; i++) {
        const ModelTensor *t = &m->tensors[i];
        float *x = m->params + t->offset;
        switch (t->init) {
        case INIT_EMBEDDING:
        case INIT_NORMAL:
            for (size_t j = 0; j < t->numel; j++) x[j] = rng_normal(rng);
            if (t->init == INIT_EMBEDDING && cfg->pad_id >= 0)
                memset(x + (size_t)cfg->pad_id * D, 0, (size_t)D * sizeof *x);
            break;
        case INIT_LINEAR:
            /* nn.Linear: kaiming_uniform(a = sqrt(5)) is uniform(+-1/sqrt(in)), and
             * its bias the same bound */
            fill_uniform(x, t->numel, 1.0f / sqrtf((float)t->fan_in), rng);
            break;
        case INIT_XAVIER:
            /* xavier_uniform_ over the packed (3D, D) matrix */
            fill_uniform(x, t->numel, sqrtf(6.0f / (float)(t->shape[0] + t->shape[1])), rng);
            break;
        case INIT_ONES:
            for (size_t j = 0; j < t->numel; j++) x[j] = 1.0f;
            break;
        case INIT_ZEROS:
            memset(x, 0, t->numel * sizeof *x);
            break;
        case INIT_SQRT_D:
            x[0] = sqrtf((float)D);
            break;
        }
    }
    return 0;
}

int model_check_ids(const int64_t *ids, int64_t n, int vocab, const char *where, Error *err)
{
    return embedding_check_ids(ids, n, vocab, where, err);
}

/* ------------------------------------------------------------------------ */
/* Small helpers of the forward and backward (given)                          */
/* ------------------------------------------------------------------------ */

static Side side_of(const Model *m, int target)
{
    const ModelParams *v = &m->views, *dv = &m->grad_views;
    int tied = target && m->cfg.share_embeddings;   /* the target reads src_embed */
    int learned = m->cfg.learned_pos;
    Side s;
    s.embed = target && !tied ? v->tgt_embed : v->src_embed;
    s.d_embed = target && !tied ? dv->tgt_embed : dv->src_embed;
    s.scale = target ? v->tgt_scale : v->src_scale;
    s.d_scale = target ? dv->tgt_scale : dv->src_scale;
    s.pos = !learned ? m->pos_table : target ? v->tgt_pos : v->src_pos;
    s.d_pos = !learned ? NULL : target ? dv->tgt_pos : dv->src_pos;
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
