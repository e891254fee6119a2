/*
 * embedding.h - the token embedding, nn.Embedding(V, D), forward and backward.
 *
 * Letters (the same in every file of this chapter): B batch, T sequence
 * length, D d_model (the embedding size), V vocabulary size.
 *
 * A token embedding is a table weight (V, D), one learned row per token id.
 * Embedding a batch of ids (B, T) gathers one row per id:
 *
 *     out[b, t, :] = scale * weight[ids[b, t], :]                 (B, T, D)
 *
 * scale is 1 for plain nn.Embedding; "Attention Is All You Need" multiplies
 * by sqrt(D) (section 3.4) so the embeddings are not drowned by the positional
 * encoding that is added next. The backward is the transpose of a gather, a
 * scatter-add: every position sends its gradient to the row it read,
 *
 *     dweight[ids[b, t], :] += scale * dout[b, t, :]
 *
 * so an id that occurs n times collects n contributions. Like every backward
 * in this project it ADDS into dweight; zero it once per step.
 *
 * padding_idx mirrors nn.Embedding(V, D, padding_idx=p): the row of the
 * padding token gets no gradient, so it never moves from its initial value
 * (nn.Embedding initialises it to zeros). The forward still returns whatever
 * that row holds, as PyTorch does. Pass EMBEDDING_NO_PADDING for none; a
 * negative padding_idx of PyTorch (counted from the end) must be turned into
 * V + padding_idx by the caller.
 *
 * The ids are not checked here: a kernel has no good way to report an id
 * outside [0, V). Call embedding_check_ids() on untrusted ids first.
 *
 * Read next: positional.h (where the positions come in), then dropout.h.
 *
 * Returns 0 (the exercise stubs return -1).
 */
#ifndef EMBEDDING_H
#define EMBEDDING_H

#include <stdint.h>

#include "error.h"

#define EMBEDDING_NO_PADDING (-1)

int embedding_forward(float *out,              /* (B, T, D) */
                      const int64_t *ids,      /* (B, T), each in [0, V) */
                      const float *weight,     /* (V, D) */
                      int B, int T, int D, float scale);

int embedding_backward(float *dweight,         /* (V, D), accumulated */
                       const float *dout,      /* (B, T, D) */
                       const int64_t *ids,     /* (B, T) */
                       int B, int T, int D, float scale,
                       int64_t padding_idx);   /* in [0, V), or EMBEDDING_NO_PADDING */

/* Fails unless every one of the n ids lies in [0, V). The message names
 * `where` (e.g. "case.safetensors: tensor 'input'"), the first bad id and its
 * flat index. Not an exercise: validation is given. */
int embedding_check_ids(const int64_t *ids, int64_t n, int64_t V, const char *where,
                        Error *err);

#endif
