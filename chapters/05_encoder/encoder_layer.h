/*
 * encoder_layer.h - one Transformer encoder layer and the encoder stack,
 * forward and backward, with the semantics of PyTorch's
 *
 *     nn.TransformerEncoderLayer(D, H, F, dropout, activation="relu",
 *                                batch_first=True, norm_first=False | True)
 *     nn.TransformerEncoder(layer, num_layers, norm=None | nn.LayerNorm(D),
 *                           enable_nested_tensor=False)
 *
 * The layer's formulas (post-norm and pre-norm), its dropout, masks and
 * backward are in the chapter's README, "The encoder layer" and after;
 * EncoderLayerCache names its buffers after the tensors of those formulas.
 *
 * Letters: N batch, S source length, D d_model, H nhead, Dh = D / H,
 * F dim_feedforward, K num_layers.
 *
 * Masks: self-attention takes one additive bias (N, H, S, S), or NULL for
 * none, which chapter 03's mha_mask_bias() builds from src_key_padding_mask
 * (N, S) and src_mask (S, S) (True = masked, as in nn.MultiheadAttention).
 * Padded positions still get an output row. Every query must keep at least
 * one key (chapter 03's rule for fully masked rows applies otherwise). A
 * causal layer (LayerDims.causal) also lets query i see only keys j <= i.
 *
 * Parameters: EncoderLayerParams has one field per state_dict name of
 * nn.TransformerEncoderLayer (the stack's are "layers.<k>." + the name, and
 * norm.weight, norm.bias of the final norm). Biases may be NULL (the
 * layer's bias=False). The same types hold the gradients, which every
 * backward ADDS to (+=).
 *
 * The layer and stack functions return 0, or -1 on failure (the exercise
 * stubs return -1).
 *
 * Read next: encoder_layer.c; chapter 07 stacks these layers into models.
 */
#ifndef ENCODER_LAYER_H
#define ENCODER_LAYER_H

#include <stdint.h>

#include "error.h"
#include "mha.h"
#include "rng.h"

/* The layer's parameters, or their gradients: one type for both. */
typedef struct {
    MhaParams self_attn;              /* packed: in_proj_weight (3D, D), in_proj_bias, out_proj */
    float *linear1_weight;            /* (F, D) */
    float *linear1_bias;              /* (F,) or NULL */
    float *linear2_weight;            /* (D, F) */
    float *linear2_bias;              /* (D,) or NULL */
    float *norm1_weight;              /* (D,) */
    float *norm1_bias;                /* (D,) or NULL */
    float *norm2_weight;              /* (D,) */
    float *norm2_bias;                /* (D,) or NULL */
} EncoderLayerParams;

/* The sizes and options a layer (or a stack of layers) is allocated for; the
 * decoder of chapter 06 takes the same. */
typedef struct {
    int N;                            /* batch */
    int S;                            /* source length: the encoder's positions, the
                                         decoder's memory */
    int T;                            /* target length: the decoder's positions (the
                                         encoder does not read it) */
    int D, H, F;                      /* d_model, nhead, dim_feedforward */
    int norm_first;                   /* 0: post-norm, 1: pre-norm */
    int causal;                       /* the encoder's self-attention: 1 lets query i
                                         see keys j <= i only (the decoder's always is) */
    float eps;                        /* layer_norm_eps, inside the square root */
    float dropout;                    /* p of every dropout */
} LayerDims;

/* The sizes and options of one layer and the buffers its forward fills for
 * the backward, named after the tensors of the README's formulas (ln2 is
 * unused in post-norm, res2 in pre-norm). */
typedef struct {
    int N, S, D, H, F, norm_first;
    int causal;                       /* self-attention is causal (LayerDims.causal) */
    float eps;                        /* layer_norm_eps, inside the square root */
    float dropout;                    /* p of every dropout */
    MhaCache attn;                    /* self-attention's activations and scratch */
    float *ln1;                       /* (N, S, D) norm1's output */
    float *mean1, *rstd1;             /* (N, S) norm1's statistics */
    float *attn_out;                  /* (N, S, D) self_attn's output, before dropout1 */
    float *res1;                      /* (N, S, D) the first residual sum */
    float *ln2;                       /* (N, S, D) norm2's output (pre-norm only) */
    float *mean2, *rstd2;             /* (N, S) norm2's statistics */
    float *ffn_pre, *ffn_hidden;      /* (N, S, F) the FFN's activations */
    float *ffn_out;                   /* (N, S, D) the FFN's output, before dropout2 */
    float *res2;                      /* (N, S, D) the second residual sum (post-norm) */
    uint8_t *mask1, *mask_ffn, *mask2;/* (N, S, D), (N, S, F), (N, S, D) dropout masks,
                                         allocated when dropout > 0; valid after a
                                         training forward */
    uint8_t *mask_attn;               /* (N, H, S, S) dropout on the attention weights,
                                         the same p, allocated with the others */
    int masks_drawn;                  /* 1 after a forward that drew the masks */
    /* backward scratch (NULL unless allocated with backward = 1) */
    float *d_a, *d_b, *d_c;           /* (N, S, D) */
    float *d_hidden;                  /* (N, S, F) */
} EncoderLayerCache;

/* Allocates the cache for these sizes (dims->T unused); D must be a multiple
 * of H, every size at least 1, eps > 0, dropout in [0, 1]. On failure
 * nothing stays allocated and err says why. */
int encoder_layer_cache_alloc(EncoderLayerCache *c, const LayerDims *dims, int backward,
                              Error *err);
void encoder_layer_cache_free(EncoderLayerCache *c);

/* Forward pass.
 *   out    (N, S, D); must not be src
 *   src    (N, S, D)
 *   bias   (N, H, S, S) from mha_mask_bias, or NULL for no mask
 *   rng    training mode: the four dropout masks are drawn from it (in the
 *          order dropout1, the FFN's, dropout2, the attention weights';
 *          nothing is drawn when p = 0); NULL: evaluation mode, dropout is
 *          the identity
 * Results do not depend on the number of OpenMP threads. */
int encoder_layer_forward(float *out, EncoderLayerCache *cache, const float *src,
                          const EncoderLayerParams *params, const float *bias, Rng *rng);

/* Backward pass after encoder_layer_forward on the same cache and src:
 * ADDS the gradient of the loss with respect to src into dsrc (N, S, D) and
 * into every parameter gradient of `grads`.
 *   dout   (N, S, D) the gradient with respect to out */
int encoder_layer_backward(float *dsrc, const EncoderLayerParams *grads, const float *dout,
                           const float *src, const EncoderLayerParams *params,
                           EncoderLayerCache *cache);

/* ------------------------------------------------------------------------ */
/* The stack                                                                 */
/* ------------------------------------------------------------------------ */

/* K layers applied in turn, with the same masks for every layer, then the
 * optional final LayerNorm (norm_weight NULL: none; README, "The encoder
 * stack"). The parameters, or their gradients: */
typedef struct {
    int num_layers;                   /* K */
    EncoderLayerParams *layers;       /* K layers */
    float *norm_weight;               /* (D,), or NULL: no final norm */
    float *norm_bias;                 /* (D,) or NULL */
} EncoderParams;

typedef struct {
    int num_layers, N, S, D;
    float eps;                        /* the final norm's eps */
    EncoderLayerCache *layers;        /* K caches */
    float *xs;                        /* (K, N, S, D) the output of every layer */
    float *mean, *rstd;               /* (N, S) the final norm's statistics */
    float *d_a, *d_b;                 /* (N, S, D) backward scratch, or NULL */
} EncoderCache;

/* Allocates K layer caches with the options of encoder_layer_cache_alloc,
 * plus the stack's own buffers. */
int encoder_cache_alloc(EncoderCache *c, int num_layers, const LayerDims *dims, int backward,
                        Error *err);
void encoder_cache_free(EncoderCache *c);

/* Forward pass of the stack; out (N, S, D), the other arguments as for one
 * layer. */
int encoder_forward(float *out, EncoderCache *cache, const float *src,
                    const EncoderParams *params, const float *bias, Rng *rng);

/* Backward pass of the stack: ADDS into dsrc (N, S, D) and every gradient. */
int encoder_backward(float *dsrc, const EncoderParams *grads, const float *dout,
                     const float *src, const EncoderParams *params, EncoderCache *cache);

#endif
