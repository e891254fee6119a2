/*
 * embedding.h - the token embedding, nn.Embedding(V, D), with the paper's
 * optional scale and nn.Embedding's padding_idx: a gather forward and a
 * scatter-add backward. Why: the chapter's README, "Token embeddings"; a
 * worked example in its appendix, "Worked examples".
 *
 * Letters: N batch, T sequence length, D d_model, V vocabulary size.
 *
 * The kernels do not check the ids (they have no good way to report one):
 * call embedding_check_ids() on untrusted ids first. The backward ADDS into
 * dweight (+=), like every backward here; zero it once per step.
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

/* out[b, t] = scale * weight[ids[b, t]]; scale is 1 for a plain nn.Embedding,
 * sqrt(D) in the paper. The padding row is returned as it is. */
int embedding_forward(float *out,              /* (N, T, D) */
                      const int64_t *ids,      /* (N, T), each in [0, V) */
                      const float *weight,     /* (V, D) */
                      int N, int T, int D, float scale);

/* dweight[ids[b, t]] += scale * dout[b, t] for every position whose id is not
 * padding_idx (that row gets no gradient, as in PyTorch). PyTorch's negative
 * padding_idx p is the row V + p here: the caller converts it. */
int embedding_backward(float *dweight,         /* (V, D), accumulated */
                       const float *dout,      /* (N, T, D) */
                       const int64_t *ids,     /* (N, T) */
                       int N, int T, int D, float scale,
                       int64_t padding_idx);   /* in [0, V), or EMBEDDING_NO_PADDING */

/* Fails unless every one of the n ids lies in [0, V). The message names
 * `where` (e.g. "case.safetensors: tensor 'input'"), the first bad id and its
 * flat index. Not an exercise: validation is given. */
int embedding_check_ids(const int64_t *ids, int64_t n, int64_t V, const char *where,
                        Error *err);

#endif
