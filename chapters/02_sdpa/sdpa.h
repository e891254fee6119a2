/*
 * sdpa.h - scaled dot-product attention, forward and backward, with the
 * semantics of PyTorch's F.scaled_dot_product_attention.
 *
 *     scores = Q K^T * scale + mask        (N, L, S)   what the softmax sees
 *     att    = softmax(scores)             (N, L, S)   over the keys, row by row
 *     out    = att V                       (N, L, Ev)
 *
 * Letters, PyTorch's for F.scaled_dot_product_attention, whose inputs are
 * (N, ..., L, E) (the top README's table; chapter 02's README teaches the rest):
 *     N   every leading dimension flattened into one: the batch times the
 *         heads when chapter 03 calls it, 1 for a plain (L, E) input
 *     L   queries                          S   keys and values
 *     E   query/key features               Ev  value features
 *
 * Masks. The softmax only ever sees one additive float bias (N, L, S): 0 where
 * a query may look at a key, -inf where it may not, or any float the caller
 * chose. sdpa_mask_bias() turns the case's attn_mask into that bias:
 *   - a boolean mask means, as in F.scaled_dot_product_attention,
 *     true = "may attend" -> 0, false = "masked" -> -inf
 *     (nn.MultiheadAttention uses the opposite convention; see chapter 03);
 *   - a float mask is added as it is;
 *   - either is broadcast: its shape is aligned to the right of the attention
 *     shape, and each of its dimensions is 1 or the full size.
 * is_causal needs no buffer: sdpa_forward() itself masks key j for query i
 * when j > i (top-left aligned, also when L != S).
 *
 * Fully-masked rows. A query that may attend to no key gets attention weights
 * of zero and an output row of zero, and passes no gradient back: the rule of
 * softmax_forward() in chapter 00, and what torch 2.15 returns.
 *
 * Dropout on the attention weights (training only): with a keep mask
 * (N, L, S), drawn by the caller (chapter 05's dropout_mask) or read from a
 * case file, out = (att * keep / (1 - p)) V, and the backward uses the same
 * mask. att is always the softmax before dropout.
 *
 * Not here: grouped-query attention (enable_gqa; K and V have as many heads
 * as Q), and broadcasting of Q, K, V over batch dimensions (their leading
 * dimensions must be equal). The case-file reader and its checks are in
 * cases/sdpa_case.h.
 *
 * Read next: sdpa.c, then cases/sdpa_case.c (how a case file becomes these calls).
 */
#ifndef SDPA_H
#define SDPA_H

#include <stdint.h>

/* 1 / sqrt(E), the scale F.scaled_dot_product_attention uses when none is given. */
float sdpa_default_scale(int E);

/* Fills bias (N, L, S) with the additive form of attn_mask.
 *   mask        mask_ndim dims of mask_shape; uint8 0/1 values when is_bool
 *               (1 = may attend), float otherwise
 *   att_shape   the attention shape, att_ndim (<= TENSOR_MAX_DIMS) dims
 *               ending in (L, S); their product is N * L * S
 * The shapes must already be broadcast-compatible (cases/sdpa_case.c checks): the
 * mask's last dimension lines up with S, the one before it with L, and so on
 * to the left; a mask dimension of 1, or a missing one, repeats.
 * Returns 0 (the exercise stub returns -1). */
int sdpa_mask_bias(float *bias, const void *mask, int is_bool, const int64_t *mask_shape,
                   int mask_ndim, const int64_t *att_shape, int att_ndim);

/* One attention: its sizes, its scale and its masks. */
typedef struct {
    int N, L, S, E, Ev;      /* the letters above */
    float scale;             /* multiplies Q K^T: sdpa_default_scale(E) unless chosen */
    int is_causal;           /* 1: query i may only attend to keys j <= i */
    const float *bias;       /* (N, L, S) additive mask, or NULL for none */
    const uint8_t *drop;     /* (N, L, S) dropout's keep mask (1 kept), or NULL: none */
    float dropout_p;         /* the probability it was drawn with, in [0, 1) */
} SdpaArgs;

/* Forward pass.
 *   out     (N, L, Ev)  the attention output
 *   att     (N, L, S)   softmax(scores): the attention weights, saved for
 *                       backward; the scores Q K^T * scale + bias (-inf
 *                       above the diagonal if causal) are made in it first
 *   q (N, L, E), k (N, S, E), v (N, S, Ev)
 * Results do not depend on the number of OpenMP threads.
 * Returns 0 (the exercise stub returns -1). */
int sdpa_forward(float *out, float *att, const float *q, const float *k, const float *v,
                 const SdpaArgs *a);

/* Backward pass. ADDS the gradients into dq (N, L, E), dk (N, S, E) and
 * dv (N, S, Ev), as every backward in this project does (zero them first for
 * a plain gradient).
 *   dout    (N, L, Ev)  gradient of the loss with respect to out
 *   att     (N, L, S)   the weights sdpa_forward() saved
 *   a                   the forward's arguments (its bias and is_causal are
 *                       not needed: att already holds their effect)
 * The gradients with respect to att and to the scores live one batch entry
 * at a time, (L, S), in a scratch buffer of each thread: they never make a
 * (N, L, S) pass through memory. The mask needs no gradient and no
 * argument: a masked entry has att = 0, and that alone stops its gradient.
 * Returns 0 (the exercise stub returns -1). */
int sdpa_backward(float *dq, float *dk, float *dv, const float *dout, const float *q,
                  const float *k, const float *v, const float *att, const SdpaArgs *a);

#endif
