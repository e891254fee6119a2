/*
 * model.h - whole models built from the layers of chapters 03-06: the
 * encoder-decoder Transformer, the encoder-only sequence labeller of the
 * reverse task, and the mean-pooled classifier; forward and backward,
 * initialisation, and loading and saving under PyTorch's state_dict names.
 *
 * Letters: N batch, S source length, T target length, D d_model, H nhead,
 * F dim_feedforward, Ke / Kd encoder / decoder layers, Vs / Vt source /
 * target vocabulary (for the labeller and the classifier Vt is the number
 * of classes), L max_len.
 *
 * The three kinds share the front end, which turns ids into vectors:
 *
 *     x = dropout(embed(ids) * scale + pos[0..len))                 (N, len, D)
 *
 * with scale 1 (scale_embedding 0), sqrt(D) (1: the paper, section 3.4) or
 * a learned scalar that starts at sqrt(D) (2: seed 002's tutorial), and pos
 * the sinusoidal table of chapter 05 or a learned nn.Embedding(L, D).
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
 *     src_pos.weight (L, D)  tgt_pos.weight (L, D)   learned positions
 *     encoder.layers.<k>.<chapter 05 names>, encoder.norm.weight/.bias (final_norm)
 *     decoder.layers.<k>.<chapter 06 names>, decoder.norm.weight/.bias (final_norm)
 *     generator.weight (Vt, D)  generator.bias (Vt,)
 * All of them live in one array, params, in that order, and their gradients
 * in grads with the same layout, so the optimizer and gradient clipping of
 * chapter 08 see one flat vector. share_embeddings (seq2seq with Vs == Vt)
 * makes the target side read src_embed.weight, as weight tying does; its
 * gradient then collects both uses.
 *
 * A checkpoint is a safetensors file of these tensors with the config in the
 * metadata (model.kind, model.d_model, ...; see model_to_file), so a model
 * saved here loads into PyTorch with load_state_dict and back.
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
#include "safetensors.h"

typedef enum { MODEL_SEQ2SEQ, MODEL_LABELLER, MODEL_CLASSIFIER, MODEL_SET } ModelKind;

typedef struct {
    ModelKind kind;
    int src_vocab, tgt_vocab;       /* Vs, Vt (classes for labeller and classifier; a set
                                       model has Vs 0 and Vt 1: one score per element) */
    int input_dim;                  /* I: a set model's features per element, else 0 */
    int d_model, nhead, dim_feedforward;
    int num_encoder_layers;         /* Ke >= 1 */
    int num_decoder_layers;         /* Kd >= 1 for seq2seq, 0 otherwise */
    int max_len;                    /* L: the longest sequence either side takes (the
                                       largest set) */
    int learned_pos;                /* 0: sinusoidal table, 1: learned nn.Embedding(L, D) */
    int scale_embedding;            /* 0: none, 1: sqrt(D), 2: learned, from sqrt(D) */
    int share_embeddings;           /* seq2seq, Vs == Vt: one embedding table */
    int final_norm;                 /* a LayerNorm after each stack (nn.Transformer) */
    int norm_first;                 /* pre-norm layers */
    int pad_id;                     /* the padding id of both sides, or -1: none */
    float eps;                      /* every LayerNorm's eps */
    float dropout;                  /* p of every dropout (front ends and layers) */
} ModelConfig;

/* One named tensor of the model: where it sits in params / grads. */
typedef struct {
    char name[64];                  /* its state_dict name */
    int ndim;                       /* 1 or 2 */
    int64_t shape[2];
    size_t offset, numel;           /* in floats */
} ModelTensor;

#define MODEL_MAX_TENSORS 512

typedef struct {
    ModelConfig cfg;
    size_t num_params;
    float *params;                  /* (num_params,) every parameter, flat */
    float *grads;                   /* (num_params,) their gradients, same layout */
    int n_tensors;
    ModelTensor tensors[MODEL_MAX_TENSORS];
    float *pos_table;               /* (L, D) the sinusoidal table (not a parameter), or NULL */
    /* Views into params and grads in the layers' own structs. */
    EncoderLayerParams *enc;        /* (Ke,) */
    EncoderLayerGrads *enc_grad;
    DecoderLayerParams *dec;        /* (Kd,) */
    DecoderLayerGrads *dec_grad;
} Model;

/* The largest models and sequences the checks below allow: 2^30 parameters
 * (4 GiB of float32) and 65,536 positions. */
#define MODEL_MAX_PARAMS (1 << 30)
#define MODEL_MAX_LEN (1 << 16)

/* "seq2seq", "labeller", "classifier" or "set" (the metadata "model.kind"). */
const char *model_kind_name(ModelKind kind);

/* Checks a config: sizes >= 1, D divisible by H, the kind's layer counts,
 * eps > 0, dropout in [0, 1), pad_id inside the source vocabulary (and the
 * target's, for seq2seq; a labeller's or classifier's tgt_vocab counts
 * classes) or -1, shared embeddings only with equal vocabularies, a set
 * model with input_dim >= 1, Vs 0, Vt 1, no padding, no learned positions or
 * scale (and input_dim 0 for every other kind), max_len
 * and the parameter count within the limits above (computed without any
 * size wrapping, before anything is allocated). err names the field. */
int model_config_check(const ModelConfig *cfg, Error *err);

/* Allocates a model and initialises it as PyTorch initialises the reference
 * (uniform(+-1/sqrt(in)) for linear layers, Xavier-uniform for the packed
 * attention projections with zero biases, N(0, 1) for embeddings, ones and
 * zeros for LayerNorm, sqrt(D) for learned scales), drawing from rng. The
 * padding row of an embedding starts at 0, as nn.Embedding(padding_idx)
 * does, and receives no gradient. */
int model_init(Model *m, const ModelConfig *cfg, Rng *rng, Error *err);
void model_free(Model *m);

/* The tensor called name, or NULL. */
const ModelTensor *model_tensor(const Model *m, const char *name);

/* Sets every gradient to 0; call before each backward (backwards add). */
void model_zero_grad(Model *m);

/* Adds every parameter (under its state_dict name) and the config (under
 * "model.<field>" metadata keys) to f. */
int model_to_file(const Model *m, TensorFile *f, Error *err);
/* Builds a model from f: the config from its metadata, every parameter from
 * its tensors, each checked for presence, dtype and shape; with strict,
 * a tensor the model does not have is an error too (tensors whose names
 * start with "optimizer." are always allowed). */
int model_load_file(Model *m, const TensorFile *f, int strict, Error *err);
/* model_to_file / model_load_file on a path; the save is atomic. */
int model_save(const Model *m, const char *path, Error *err);
int model_load(Model *m, const char *path, Error *err);

/* ------------------------------------------------------------------------ */
/* Forward and backward                                                      */
/* ------------------------------------------------------------------------ */

/* The activations of one batch shape, kept for the backward. */
typedef struct {
    int N, S, T;                    /* T = 0 unless seq2seq */
    int S_cap, T_cap;               /* the lengths it was allocated for */
    int backward;
    int64_t rows;                   /* logits rows: N * T, N * S (labeller, set) or N */
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
    DecoderStack dec;
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

/* Allocates the work for batches of N sequences of source length S (and
 * target length T for seq2seq, else 0); backward != 0 adds the backward's
 * buffers. S and T must not exceed max_len. */
int model_work_alloc(ModelWork *w, const Model *m, int N, int S, int T, int backward,
                     Error *err);
void model_work_free(ModelWork *w);

/* Makes w serve batches of N sequences of a shorter source length S (and
 * target length T) inside the same buffers: 1 <= S <= the allocated S, and
 * likewise T for seq2seq (0 otherwise). Every cache's sizes follow; the
 * buffers keep their place, each now used for fewer positions. A batch of
 * short sequences then costs what its longest sequence needs, not what the
 * longest sequence of the dataset needs. */
int model_work_reshape(ModelWork *w, const Model *m, int S, int T, Error *err);

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

#endif
