/*
 * model.h - whole models built from the layers of chapters 03-06: the
 * encoder-decoder Transformer, the encoder-only sequence labeller of the
 * reverse task, the mean-pooled classifier and the set scorer of chapter
 * 11; forward and backward, initialisation, and loading and saving under
 * PyTorch's state_dict names.
 *
 * Letters (the top README's table): N batch, S source length, T target
 * length, D d_model, H nhead, F dim_feedforward, Ke / Kd encoder / decoder
 * layers, Vs / Vt source / target vocabulary (for the labeller and the
 * classifier Vt is the number of classes), I input_dim, max_len.
 *
 * Every kind but the set model shares the front end, which turns ids into vectors:
 *
 *     x = dropout(embed(ids) * scale + pos[0..len))                 (N, len, D)
 *
 * with scale 1 (scale_embedding 0), sqrt(D) (1: the paper, section 3.4) or
 * a learned scalar that starts at sqrt(D) (2: seed 002's tutorial), and pos
 * the sinusoidal table of chapter 05 or a learned nn.Embedding(max_len, D).
 *
 *   MODEL_SEQ2SEQ      the paper's model:
 *                        memory = encoder(x_src, src padding mask)   (N, S, D)
 *                        y      = decoder(x_tgt, memory, causal + tgt padding,
 *                                         memory padding)             (N, T, D)
 *                        logits = generator(y)                        (N, T, Vt)
 *   MODEL_LABELLER     one class per source position (seeds 000 and 004):
 *                        logits = generator(encoder(x_src))           (N, S, Vt)
 *   MODEL_CLASSIFIER   one class per sequence (seed 003): the encoder's
 *                      output averaged over the non-padding positions, then
 *                        logits = generator(mean)                     (N, Vt)
 *   MODEL_SET          one score per element of a set (seed 004's set anomaly
 *                      detection): the elements are vectors of input_dim
 *                      features, not ids, and a set has no order, so the
 *                      front end is a linear layer and no position is added:
 *                        x      = dropout(input_net(features))        (N, S, D)
 *                        scores = generator(encoder(x))               (N, S)
 *                      (Vt = 1). A softmax over the S scores of a set says
 *                      which element is the odd one (chapter 11).
 *   MODEL_LM           the decoder-only language model of chapter 12 (GPT,
 *                      Bloem's generative Transformer): the labeller with a
 *                      causal self-attention, so that position t sees ids
 *                      0..t only and its logits predict id t+1:
 *                        logits = generator(encoder(x_src, causal))   (N, S, V)
 *                      (Vs = Vt = V). It is the encoder stack with a causal
 *                      mask, as PyTorch's own word-language-model example
 *                      builds it, so it keeps the encoder's names.
 *
 * Masks are built here from the ids, as seed 002 builds them: a position
 * whose id is pad_id is padding, ignored as a KEY by every attention (source
 * padding in the encoder and the cross-attention, target padding in the
 * decoder's self-attention), and the decoder's self-attention is also
 * causal (query t sees keys 0..t). With pad_id < 0 nothing is padding.
 *
 * Parameters, under the state_dict names of reference/ch07_model.py (the
 * PyTorch twin), in this order:
 *     src_embed.weight (Vs, D)        tgt_embed.weight (Vt, D)  seq2seq, unless shared
 *     input_net.weight (D, I)  input_net.bias (D,)   a set model instead of src_embed
 *     src_scale (1,)  tgt_scale (1,)  scale_embedding 2 (tgt_scale: seq2seq)
 *     src_pos.weight (max_len, D)  tgt_pos.weight (max_len, D)   learned positions
 *     encoder.layers.<k>.<chapter 05 names>, encoder.norm.weight/.bias (final_norm)
 *     decoder.layers.<k>.<chapter 06 names>, decoder.norm.weight/.bias (final_norm)
 *     generator.weight (Vt, D)  generator.bias (Vt,)
 * One table in model.c describes them: each layer kind's tensors, with
 * their names, shapes in the letters above, and initialisation. From it come
 * the layout (one array, params, in that order, and their gradients in
 * grads with the same layout, so the optimizer and gradient clipping of
 * chapter 08 see one flat vector), the checkpoint names, and the views: a
 * ModelParams of pointers into params and another, of the same type, into
 * grads, which the forward and backward use. share_embeddings (seq2seq with
 * Vs == Vt) makes the target side read src_embed.weight, as weight tying
 * does; its gradient then collects both uses.
 *
 * A checkpoint is a safetensors file of these tensors with the config in the
 * metadata (model.kind, model.d_model, ...), so a model saved here loads into
 * PyTorch with load_state_dict and back; runtime/model_file.h reads and
 * writes them, runtime/model_config.h checks a config, runtime/model_work.h
 * allocates the work buffers of a batch shape.
 *
 * Read next: model.c; decode.h turns a seq2seq model into a translator.
 * The int functions return 0, or -1 on failure.
 */
#ifndef MODEL_H
#define MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "decoder_layer.h"
#include "encoder_layer.h"
#include "error.h"
#include "rng.h"

typedef enum { MODEL_SEQ2SEQ, MODEL_LABELLER, MODEL_CLASSIFIER, MODEL_SET, MODEL_LM } ModelKind;

typedef struct {
    ModelKind kind;
    int src_vocab, tgt_vocab;       /* Vs, Vt (classes for labeller and classifier; a set
                                       model has Vs 0 and Vt 1: one score per element;
                                       a language model Vs = Vt) */
    int input_dim;                  /* I: a set model's features per element, else 0 */
    int d_model, nhead, dim_feedforward;
    int num_encoder_layers;         /* Ke >= 1 */
    int num_decoder_layers;         /* Kd >= 1 for seq2seq, 0 otherwise */
    int max_len;                    /* the longest sequence either side takes (the
                                       largest set) */
    int learned_pos;                /* 0: sinusoidal table, 1: learned nn.Embedding(max_len, D) */
    int scale_embedding;            /* 0: none, 1: sqrt(D), 2: learned, from sqrt(D) */
    int share_embeddings;           /* seq2seq, Vs == Vt: one embedding table */
    int final_norm;                 /* a LayerNorm after each stack (nn.Transformer) */
    int norm_first;                 /* pre-norm layers */
    int pad_id;                     /* the padding id of both sides, or -1: none */
    float eps;                      /* every LayerNorm's eps */
    float dropout;                  /* p of every dropout (front ends and layers) */
} ModelConfig;

/* The model's parameters by role, or their gradients: one type for both
 * (llm.c's ParameterTensors), pointing into one flat array. NULL where the
 * config has no such tensor. */
typedef struct {
    float *src_embed;               /* (Vs, D) src_embed.weight; NULL for a set model */
    float *tgt_embed;               /* (Vt, D) seq2seq, unless shared */
    float *input_net_weight;        /* (D, I) a set model's front end */
    float *input_net_bias;          /* (D,) */
    float *src_scale, *tgt_scale;   /* (1,) each: scale_embedding 2 */
    float *src_pos, *tgt_pos;       /* (max_len, D) each: learned positions */
    EncoderParams encoder;          /* Ke layers, the final norm (final_norm) */
    DecoderParams decoder;          /* Kd layers (seq2seq), the final norm */
    float *generator_weight;        /* (Vt, D) */
    float *generator_bias;          /* (Vt,) */
} ModelParams;

/* How a tensor starts: PyTorch's default for its module. */
typedef enum {
    INIT_EMBEDDING,                 /* N(0, 1), the padding row 0 (nn.Embedding) */
    INIT_NORMAL,                    /* N(0, 1) (a learned position table) */
    INIT_LINEAR,                    /* uniform(+-1/sqrt(fan_in)) (nn.Linear) */
    INIT_XAVIER,                    /* uniform(+-sqrt(6 / (rows + cols))) (in_proj_weight) */
    INIT_ONES,                      /* a LayerNorm's weight */
    INIT_ZEROS,                     /* a LayerNorm's bias, the attention's biases */
    INIT_SQRT_D                     /* sqrt(D): a learned embedding scale */
} ModelInit;

/* One named tensor of the model: where it sits in params / grads. */
typedef struct {
    char name[64];                  /* its state_dict name */
    int ndim;                       /* 1 or 2 */
    int64_t shape[2];
    size_t offset, numel;           /* in floats */
    ModelInit init;
    int64_t fan_in;                 /* INIT_LINEAR: the layer's in_features */
} ModelTensor;

#define MODEL_MAX_TENSORS 512

typedef struct {
    ModelConfig cfg;
    size_t num_params;
    float *params;                  /* (num_params,) every parameter, flat */
    float *grads;                   /* (num_params,) their gradients, same layout */
    ModelParams views;              /* the parameters by role: pointers into params */
    ModelParams grad_views;         /* the same pointers into grads */
    int n_tensors;
    ModelTensor tensors[MODEL_MAX_TENSORS];   /* the table, in state_dict order */
    float *pos_table;               /* (max_len, D) the sinusoidal table (not a parameter), or NULL */
} Model;

/* Allocates a model and initialises it as PyTorch initialises the reference
 * (uniform(+-1/sqrt(in)) for linear layers, Xavier-uniform for the packed
 * attention projections with zero biases, N(0, 1) for embeddings, ones and
 * zeros for LayerNorm, sqrt(D) for learned scales), drawing from rng. The
 * padding row of an embedding starts at 0, as nn.Embedding(padding_idx)
 * does, and receives no gradient. The config must pass model_config_check. */
int model_init(Model *m, const ModelConfig *cfg, Rng *rng, Error *err);
/* The same allocation with every parameter 0 (a checkpoint fills them). */
int model_alloc(Model *m, const ModelConfig *cfg, Error *err);
void model_free(Model *m);

/* Points views and grad_views at the tensors of m's layout inside params and
 * grads, two arrays of m->num_params floats anywhere (the GPU's too; the
 * model's own views are these for m->params and m->grads). Allocates the
 * views' layer arrays: model_views_free frees them. */
int model_views(const Model *m, ModelParams *views, ModelParams *grad_views, float *params,
                float *grads, Error *err);
void model_views_free(ModelParams *views);

/* The tensor called name, or NULL: for files and tests (the forward and
 * backward use the views). */
const ModelTensor *model_tensor(const Model *m, const char *name);

/* Sets every gradient to 0; call before each backward (backwards add). */
void model_zero_grad(Model *m);

/* ------------------------------------------------------------------------ */
/* Forward and backward                                                      */
/* ------------------------------------------------------------------------ */

/* The activations of one batch shape, kept for the backward. */
typedef struct {
    int N, S, T;                    /* T = 0 unless seq2seq */
    int S_cap, T_cap;               /* the lengths it was allocated for */
    int backward;
    int64_t rows;                   /* logits rows: N * T, N * S (labeller, set, lm) or N */
    float *logits;                  /* (rows, Vt) the forward's result */
    /* front ends */
    float *src_emb, *tgt_emb;       /* (N, S, D), (N, T, D) embed(ids) before scaling */
    float *src_x, *tgt_x;           /* (N, S, D), (N, T, D) the stacks' inputs */
    uint8_t *src_drop, *tgt_drop;   /* dropout masks of the front ends, or NULL */
    int dropped;                    /* 1 when the last forward drew those masks (training) */
    /* masks as additive biases, or NULL when nothing is padding */
    float *enc_bias;                /* (N, H, S, S) */
    float *dec_bias;                /* (N, H, T, T) target padding (causal is a flag) */
    float *cross_bias;              /* (N, H, T, S) */
    float *pool_count;              /* (N,) non-padding positions (classifier) */
    /* stacks */
    EncoderCache enc;
    float *memory;                  /* (N, S, D) the encoder's output */
    DecoderCache dec;
    float *dec_out;                 /* (N, T, D) the decoder's output */
    float *pooled;                  /* (N, D) classifier: the mean of memory */
    /* the ids of the last forward (pointers to the caller's arrays) */
    const int64_t *src_ids, *tgt_ids;
    /* MODEL_SET: (N, S, I) the elements' features, which the caller points
     * at before model_forward (src is then unused) and keeps alive until
     * the backward */
    const float *features;
    /* backward scratch */
    float *d_top;                   /* (rows, D) the gradient at the generator's input */
    float *d_memory;                /* (N, S, D) */
    float *d_src, *d_tgt;           /* (N, S, D), (N, T, D) the stacks' input gradients */
} ModelWork;

/* Forward pass: w->logits from src (N, S) and, for seq2seq, tgt (N, T),
 * both id arrays that must stay alive until the backward. rng: training
 * mode, dropout masks are drawn from it (NULL: evaluation mode). Ids must
 * lie inside the vocabularies (model_check_ids). */
int model_forward(Model *m, ModelWork *w, const int64_t *src, const int64_t *tgt, Rng *rng);

/* Backward pass after model_forward on the same work: ADDS the gradient of
 * every parameter into m->grads, given dlogits (rows, Vt). */
int model_backward(Model *m, ModelWork *w, const float *dlogits);

/* Fails unless every one of the n ids lies in [0, vocab); `where` names the
 * tensor or file for the message. */
int model_check_ids(const int64_t *ids, int64_t n, int vocab, const char *where, Error *err);

/* The attention weights of the last forward, for plotting: which attention,
 * layer, batch element n and head; a (queries, keys) matrix, row-major:
 * encoder self-attention (S, S), decoder self-attention (T, T),
 * cross-attention (T, S). NULL when the model has no such attention. */
typedef enum { ATTN_ENCODER, ATTN_DECODER_SELF, ATTN_DECODER_CROSS } ModelAttention;
const float *model_attention(const ModelWork *w, const Model *m, ModelAttention which,
                             int layer, int n, int head);

/* The machinery around the model (runtime/): the config's checks, the work
 * buffers of a batch shape, checkpoints. */
#include "model_config.h"
#include "model_work.h"
#include "model_file.h"

#endif
