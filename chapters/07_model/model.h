/*
 * model.h - whole models built from the layers of chapters 03-06: the
 * encoder-decoder Transformer (MODEL_SEQ2SEQ), the encoder-only labeller,
 * the decoder-only language model of chapter 12 (MODEL_LM, an encoder stack
 * with a causal mask), the mean-pooled classifier and the set scorer of
 * chapter 11; their forward and backward, the table of their parameters
 * under PyTorch's state_dict names, and PyTorch's initialisation.
 *
 * The lesson is in the chapter's README: each kind's formula, the masks,
 * the parameter table, the initialisation, the backward's wiring. This file
 * states the contract.
 *
 * Letters (the top README's table): N batch, S source length, T target
 * length, D d_model, H nhead, F dim_feedforward, Ke / Kd encoder / decoder
 * layers, Vs / Vt source / target vocabulary (for the labeller and the
 * classifier Vt is the number of classes), I input_dim, max_len.
 *
 * Masks are made from the ids: a position whose id is pad_id is a padding
 * key to every attention (pad_id -1: none); the decoder's self-attention
 * and a language model's encoder are causal too.
 *
 * Parameters: one flat array, params, in state_dict order, and their
 * gradients in grads with the same layout; views and grad_views, one
 * ModelParams type for both, point into them. Every backward ADDS into
 * grads.
 *
 * Beside it in this chapter: model_config.h, the config's fields in one
 * table and its checks; model_work.h, the work buffers of a batch shape.
 * Not here: runtime/model_file.h reads and writes checkpoints
 * (safetensors, the config in the metadata).
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
    float *pos_table;               /* (max_len, D) the sinusoidal table (not a parameter),
                                       or NULL */
} Model;

/* Allocates a model and initialises it as PyTorch initialises the reference
 * (ModelInit per tensor; the README, "The parameters and their names"),
 * drawing from rng tensor by tensor in the table's order. The padding row
 * of an embedding starts at 0, as nn.Embedding(padding_idx) does, and
 * receives no gradient. The config must pass model_config_check. */
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

/* The config's checks and the work buffers of a batch shape, in files of
 * their own (model_config.h, model_work.h). Reading and writing a model
 * file is the programs' (runtime/model_file.h). */
#include "model_config.h"
#include "model_work.h"

#endif
