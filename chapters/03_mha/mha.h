/*
 * mha.h - multi-head attention, forward and backward, as PyTorch's
 * nn.MultiheadAttention(embed_dim, num_heads, batch_first=True) computes
 * it. What it computes and why: chapters/03_mha/README.md.
 *
 * Sizes: N batch, L queries, S keys and values, H heads, D the width
 * (embed_dim), Dh = D / H, and Ek, Ev the features of the key and value
 * inputs (kdim, vdim). Buffers are float32, row-major, batch first.
 *
 * Masks reach mha_forward as one additive bias (N, H, L, S) made by
 * mha_mask_bias; in nn.MultiheadAttention's masks a boolean true means
 * MASKED, the opposite of chapter 02's. A query whose every key is masked
 * gets weights 0 and an output row equal to out_proj_bias (0 without it),
 * and passes no gradient back.
 *
 * The int functions return 0, or -1 on failure (the exercise stubs return
 * -1). Read next: mha.c, then cases/mha_case.h (how a case file becomes
 * these calls, with PyTorch's is_causal rules).
 */
#ifndef MHA_H
#define MHA_H

#include <stdint.h>

#include "error.h"

/* The layer's parameters under nn.MultiheadAttention's state_dict names, or
 * their gradients: one type for both (llm.c's ParameterTensors), NULL where
 * the layer has none (bias=False removes both biases). A backward reads the
 * parameters from one and ADDS into the other. */
typedef struct {
    float *in_proj_weight;          /* (3D, D) when Ek == Ev == D, else NULL */
    float *q_proj_weight;           /* (D, D)  when in_proj_weight is NULL */
    float *k_proj_weight;           /* (D, Ek) when in_proj_weight is NULL */
    float *v_proj_weight;           /* (D, Ev) when in_proj_weight is NULL */
    float *in_proj_bias;            /* (3D,), or NULL (bias=False) */
    float *out_proj_weight;         /* (D, D) */
    float *out_proj_bias;           /* (D,), or NULL (bias=False) */
} MhaParams;

/* The sizes of one call: N sequences of L queries attending to S keys, D
 * features, H heads, keys of Ek and values of Ev features. */
typedef struct {
    int N, L, S, D, H, Ek, Ev;
} MhaDims;

/* The sizes of one call, and the buffers the forward fills for the backward
 * (the activations) plus the backward's own scratch space. */
typedef struct {
    int N, L, S, D, H, Dh, Ek, Ev;
    /* forward activations, written by mha_forward, read by mha_backward */
    float *q, *k, *v;               /* (N, L, D), (N, S, D), (N, S, D) projected */
    float *qh, *kh, *vh;            /* (N, H, L, Dh), (N, H, S, Dh), (N, H, S, Dh) */
    float *att;                     /* (N, H, L, S) attention weights of every head */
    float *oh;                      /* (N, H, L, Dh) attention output of every head */
    float *o;                       /* (N, L, D) heads merged: out_proj's input */
    /* backward scratch, overwritten by mha_backward; NULL unless allocated */
    float *d_o;                     /* (N, L, D) */
    float *doh, *dqh;               /* (N, H, L, Dh) */
    float *dkh, *dvh;               /* (N, H, S, Dh) */
    float *dq;                      /* (N, L, D) */
    float *dk, *dv;                 /* (N, S, D) */
    /* The GPU's attention (cuda/model.cu) keeps each head's scores and their
     * gradients, (N, H, L, S) each; the CPU's needs none of them (chapter
     * 02 makes the scores in att and the gradients one head at a time), and
     * mha_cache_alloc leaves them NULL. */
    float *scores, *datt, *dscores;
    /* Dropout on the attention weights (chapter 02): the keep mask of the
     * next forward, (N, H, L, S), or NULL for none, and its p. The caller
     * owns the mask and sets both (an encoder or decoder layer in training
     * mode); the backward uses the same. */
    const uint8_t *drop;
    float dropout_p;
} MhaCache;

/* Allocates every buffer of the cache for these sizes (the backward scratch
 * only when `backward` is non-zero). D must be a multiple of H; every size at
 * least 1. On failure nothing stays allocated. */
int mha_cache_alloc(MhaCache *cache, const MhaDims *dims, int backward, Error *err);

/* Frees what mha_cache_alloc allocated; safe on a zeroed or freed cache. */
void mha_cache_free(MhaCache *cache);

/* The three input projections, whichever way p stores them (parameters or
 * gradients alike): w[0] (D, D), w[1] (D, Ek), w[2] (D, Ev), and b[0..2]
 * (D,) each, or NULL without in_proj_bias. Packed: the three row blocks of
 * in_proj_weight. */
void mha_in_proj_params(const MhaParams *p, int D, float *w[3], float *b[3]);

/* (N, T, H * Dh) -> (N, H, T, Dh): xh[n, h, t, d] = x[n, t, h * Dh + d]. */
int mha_split_heads(float *xh, const float *x, int N, int T, int H, int Dh);

/* (N, H, T, Dh) -> (N, T, H * Dh), the inverse of mha_split_heads. */
int mha_merge_heads(float *x, const float *xh, int N, int T, int H, int Dh);

/* Fills bias (N, H, L, S) with the additive form of the two masks (either
 * may be NULL; with both NULL the bias is all 0):
 *   key_padding_mask   (N, S): uint8 0/1 when kpm_is_bool (1 = ignore the
 *                      key -> -inf), float otherwise (added)
 *   attn_mask          (L, S), or (N * H, L, S) when attn_mask_3d: uint8 0/1
 *                      when attn_is_bool (1 = not allowed -> -inf), float
 *                      otherwise (added)
 * Entry [n, h, i, j] is the attn_mask term plus the key_padding_mask term. */
int mha_mask_bias(float *bias, const void *key_padding_mask, int kpm_is_bool,
                  const void *attn_mask, int attn_is_bool, int attn_mask_3d,
                  int N, int H, int L, int S);

/* Forward pass; the sizes are the cache's.
 *   out      (N, L, D)
 *   cache    its activations are written (see MhaCache)
 *   query (N, L, D), key (N, S, Ek), value (N, S, Ev); in self-attention
 *            the same pointer three times
 *   bias     (N, H, L, S) from mha_mask_bias, or NULL for no mask
 *   is_causal  1: query i attends only to keys j <= i (top-left aligned),
 *            on top of bias
 * The attention weights of every head are cache->att afterwards.
 * Results do not depend on the number of OpenMP threads. */
int mha_forward(float *out, MhaCache *cache, const float *query, const float *key,
                const float *value, const MhaParams *params, const float *bias,
                int is_causal);

/* Backward pass, after mha_forward on the same cache and inputs. ADDS the
 * gradients into dquery (N, L, D), dkey (N, S, Ek), dvalue (N, S, Ev) (each
 * may be NULL: not wanted; in self-attention one buffer for all three, which
 * collects the sum of the three paths) and into every parameter gradient of
 * `grads`.
 *   dout   (N, L, D) gradient of the loss with respect to out
 * The cache must have been allocated with backward = 1; its scratch buffers
 * are overwritten, its activations only read, so calling the backward twice
 * adds the gradients twice. */
int mha_backward(float *dquery, float *dkey, float *dvalue, const MhaParams *grads,
                 const float *dout, const float *query, const float *key, const float *value,
                 const MhaParams *params, MhaCache *cache);

/* need_weights with average_attn_weights: avg (N, L, S) is the mean over the
 * H heads of att (N, H, L, S). */
int mha_average_heads(float *avg, const float *att, int N, int H, int L, int S);

#endif
