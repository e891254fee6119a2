/*
 * sdpa_case.h - reading, checking and evaluating an sdpa case file.
 *
 * A case (see reference/ch02_sdpa.py and the chapter README) holds
 *     query (..., L, E)   key (..., S, E)   value (..., S, Ev)   all F32
 *     attn_mask           optional: BOOL (true = may attend) or F32 (added),
 *                         broadcastable to the attention shape (..., L, S)
 *     dropout_mask (..., L, S)  BOOL, true = kept: the mask of dropout on the
 *                         attention weights, exactly when dropout_p > 0
 *     grad_output (..., L, Ev)               op sdpa_backward only
 * and in its metadata the op ("sdpa" or "sdpa_backward"), is_causal ("true" or
 * "false", default false), scale (a number; absent means 1/sqrt(E)) and
 * dropout_p (in [0, 1), default 0).
 * The leading "..." are batch dimensions, none or several, the same for
 * query, key and value (usually (N, H)).
 *
 * It writes output (..., L, Ev) and attn_weights (..., L, S) (the softmax,
 * before dropout), and for
 * sdpa_backward also grad_query, grad_key and grad_value, shaped like the
 * inputs.
 *
 * All checking happens here, before any arithmetic, so a bad case is one line
 * naming the file and the problem, never a crash: a missing tensor, another
 * dtype, ranks or sizes that disagree, a mask that does not broadcast,
 * attn_mask together with is_causal (which F.scaled_dot_product_attention
 * refuses as well), a scale that is not a finite number, dropout_p outside
 * [0, 1) or without its mask, enable_gqa, or an empty dimension.
 */
#ifndef SDPA_CASE_H
#define SDPA_CASE_H

#include "safetensors.h"
#include "sdpa.h"

/* A checked case: borrowed pointers into the TensorFile, and the sizes in
 * sdpa.h's letters. */
typedef struct {
    int backward;                          /* op is sdpa_backward */
    const float *q, *k, *v;                /* (N, L, E), (N, S, E), (N, S, Ev) */
    const float *dout;                     /* (N, L, Ev), or NULL for op sdpa */
    const Tensor *mask;                    /* attn_mask (BOOL or F32), or NULL */
    int ndim;                              /* rank of query, key and value, >= 2 */
    int64_t batch_shape[TENSOR_MAX_DIMS];  /* the ndim - 2 leading dimensions */
    int N, L, S, E, Ev;                    /* N: product of batch_shape */
    float scale;                           /* from the case, or 1/sqrt(E) */
    int is_causal;
    const uint8_t *drop;                   /* dropout_mask (N, L, S), or NULL */
    float dropout_p;
} SdpaCase;

/* Reads and checks the inputs and options of `in` (see above). */
int sdpa_case_read(const TensorFile *in, SdpaCase *c, Error *err);

/* The case's sizes, scale, causality and dropout as sdpa_forward takes them,
 * with `bias` (N, L, S) (sdpa_mask_bias of the case's mask) or NULL. */
SdpaArgs sdpa_case_args(const SdpaCase *c, const float *bias);

/* Evaluates ops sdpa and sdpa_backward: the CaseEval of the chapter program. */
int sdpa_case_eval(const TensorFile *in, TensorFile *out, Error *err);

#endif
