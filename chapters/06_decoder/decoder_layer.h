/*
 * decoder_layer.h - one Transformer decoder layer and a stack of them,
 * forward and backward, with the semantics of PyTorch's
 * nn.TransformerDecoderLayer(d_model, nhead, dim_feedforward, dropout,
 * activation="relu", batch_first=True, norm_first=...) and
 * nn.TransformerDecoder(layer, num_layers, norm=...). The layer's formula
 * (post-norm and pre-norm), its masks and its backward are in the chapter's
 * README; DecoderLayerCache names its buffers after that formula.
 *
 * Letters: N batch, T target length (the decoder's own positions), S source
 * length (the encoder's positions, the memory's), D d_model, H nhead,
 * F dim_feedforward, K num_layers.
 *
 * Masks (DecoderMasks) are chapter 03's additive biases (mha_mask_bias):
 * sa_bias (N, H, T, T) from tgt_mask and tgt_key_padding_mask, ca_bias
 * (N, H, T, S) from memory_key_padding_mask; NULL for none. sa_causal = 1
 * masks the future without a bias (query i sees keys j <= i).
 *
 * Parameters (DecoderLayerParams) under the layer's state_dict names:
 * self_attn.* and multihead_attn.* (MhaParams), linear1.*, linear2.*,
 * norm1..3.*; the stack's are "layers.<k>." + the name, and norm.* of the
 * final norm. The gradients are the same types; every backward ADDS (+=),
 * into dtgt, into dmemory (the memory's gradient, summed over the layers
 * of a stack: where the encoder's backward starts) and into the gradients.
 *
 * Results do not depend on the number of OpenMP threads. Every int
 * function returns 0, or -1 on failure (the exercise stubs -1).
 *
 * Read next: decoder_layer.c; chapter 07 joins the encoder and the decoder.
 */
#ifndef DECODER_LAYER_H
#define DECODER_LAYER_H

#include <stdint.h>

#include "encoder_layer.h"   /* LayerDims */
#include "error.h"
#include "mha.h"
#include "rng.h"

/* The layer's parameters, or their gradients: one type for both. */
typedef struct {
    MhaParams self_attn, multihead_attn;
    float *linear1_weight, *linear1_bias;         /* (F, D), (F,) */
    float *linear2_weight, *linear2_bias;         /* (D, F), (D,) */
    float *norm_weight[3], *norm_bias[3];         /* norm1..3: (D,) each */
} DecoderLayerParams;

/* The attention masks of one forward (chapter 03's additive biases). */
typedef struct {
    const float *sa_bias;           /* (N, H, T, T) self-attention bias, or NULL */
    int sa_causal;                  /* 1: the causal pattern, without a bias */
    const float *ca_bias;           /* (N, H, T, S) cross-attention bias, or NULL */
} DecoderMasks;

/* Sizes, options and the activations one forward saves for the backward. */
typedef struct {
    int N, T, S, D, H, F;
    int norm_first;                 /* 0: post-norm, 1: pre-norm */
    float eps;                      /* the three LayerNorms' eps */
    float dropout;                  /* p of dropout1..3 and the FFN's dropout */
    MhaCache sa, ca;                /* the two attentions' caches */
    /* norm k's input and output, (N, T, D) each. Post-norm: norm_in[k] is
     * the residual sum, norm_out[k] the stream after sub-layer k. Pre-norm:
     * norm_in[k] is the stream before sub-layer k, norm_out[k] its input. */
    float *norm_in[3], *norm_out[3];
    float *mean[3], *rstd[3];       /* (N, T) each */
    float *pre, *hidden;            /* (N, T, F) the FFN's activations */
    float *tmp;                     /* (N, T, D) a sub-layer's output */
    uint8_t *mask[3];               /* (N, T, D) dropout1..3 masks, when dropout > 0 */
    uint8_t *ffn_mask;              /* (N, T, F) the FFN's mask, when dropout > 0 */
    uint8_t *sa_mask, *ca_mask;     /* (N, H, T, T), (N, H, T, S) the attention weights'
                                       masks, when dropout > 0 */
    int masks_drawn;                /* 1 after a forward drew the masks */
    /* backward scratch, NULL unless allocated */
    float *dx, *dsub, *dnorm;       /* (N, T, D) */
    float *dhidden;                 /* (N, T, F) */
} DecoderLayerCache;

/* Allocates the cache for these sizes (backward scratch when `backward`, the
 * dropout masks when dropout > 0): dims->T positions attending to themselves
 * and to dims->S positions of memory. D must be a multiple of H, every size
 * at least 1, dropout in [0, 1). On failure nothing stays allocated. */
int decoder_layer_cache_alloc(DecoderLayerCache *c, const LayerDims *dims, int backward,
                              Error *err);
void decoder_layer_cache_free(DecoderLayerCache *c);

/* Forward: out (N, T, D) from tgt (N, T, D) and memory (N, S, D).
 * rng: NULL is evaluation mode (no dropout); with dropout > 0 and an rng the
 * masks are drawn from it (dropout1, 2, the FFN's, dropout3, in that order).
 * out must not alias tgt. */
int decoder_layer_forward(float *out, DecoderLayerCache *c, const float *tgt,
                          const float *memory, const DecoderLayerParams *p,
                          const DecoderMasks *masks, Rng *rng);

/* Backward after decoder_layer_forward on the same cache and inputs. ADDS
 * into dtgt (N, T, D), dmemory (N, S, D) (either may be NULL) and every
 * gradient of grads. dout (N, T, D) is the gradient of the output. */
int decoder_layer_backward(float *dtgt, float *dmemory, const DecoderLayerParams *grads,
                           const float *dout, const float *tgt, const float *memory,
                           const DecoderLayerParams *p, DecoderLayerCache *c);

/* ------------------------------------------------------------------------ */
/* The stack: nn.TransformerDecoder                                          */
/* ------------------------------------------------------------------------ */

/*     x_0 = tgt,  x_k = layer_k(x_{k-1}, memory) for k = 1..K,  out = norm(x_K)
 * with the same masks for every layer, and norm the optional final
 * LayerNorm (norm_weight NULL: none, out = x_K). The parameters, or their
 * gradients: */
typedef struct {
    int num_layers;                 /* K */
    DecoderLayerParams *layers;     /* K layers */
    float *norm_weight;             /* (D,), or NULL: no final norm */
    float *norm_bias;               /* (D,) or NULL */
} DecoderParams;

typedef struct {
    int num_layers, N, T, D;
    float eps;                      /* the final norm's eps */
    DecoderLayerCache *layers;      /* K caches */
    float *xs;                      /* (K + 1, N, T, D): the input of every layer, then the
                                       last layer's output */
    float *mean, *rstd;             /* (N, T) the final norm's statistics */
    float *d_a, *d_b;               /* (N, T, D) backward scratch, or NULL */
} DecoderCache;

/* K layer caches with the options of decoder_layer_cache_alloc, plus the
 * stack's own buffers. */
int decoder_cache_alloc(DecoderCache *c, int num_layers, const LayerDims *dims, int backward,
                        Error *err);
void decoder_cache_free(DecoderCache *c);

/* Forward pass of the stack: out (N, T, D), the other arguments as for one
 * layer. */
int decoder_forward(float *out, DecoderCache *cache, const float *tgt, const float *memory,
                    const DecoderParams *params, const DecoderMasks *masks, Rng *rng);

/* Backward pass of the stack: ADDS into dtgt, dmemory (summed over the
 * layers; either may be NULL) and every gradient of grads. */
int decoder_backward(float *dtgt, float *dmemory, const DecoderParams *grads, const float *dout,
                     const float *tgt, const float *memory, const DecoderParams *params,
                     DecoderCache *cache);

#endif
