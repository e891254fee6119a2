/*
 * positional.h - the position table added to the embeddings: the sinusoidal
 * table of "Attention Is All You Need" (section 3.5) or a learned one,
 * nn.Embedding(max_len, D) looked up at positions 0..T-1. Why, the
 * formula, the figures and float32's error: the chapter's README,
 * "Positions".
 *
 * Letters: N batch, T sequence length, D d_model, max_len the positions a
 * table holds (T <= max_len).
 *
 * A sequence longer than the table (T > max_len) has no rows to add: the
 * caller refuses it before calling (see cases/encoder_case.c). The backward
 * ADDS (+=), like every backward here.
 *
 * Read next: dropout.h, which is applied to this sum in the Transformer.
 *
 * Returns 0 (the exercise stubs return -1).
 */
#ifndef POSITIONAL_H
#define POSITIONAL_H

#define POSITIONAL_BASE 10000.0f   /* the paper's base of the wavelengths */

/* Fills table (max_len, D) with the sinusoidal encoding of positions
 * 0..max_len-1, in float32; for an odd D the last dimension is a sine with
 * no cosine partner. */
int positional_sinusoidal_table(float *table,        /* (max_len, D) */
                                int max_len, int D);

/* out = x + table[:T], the table broadcast over the batch. out may be x. */
int positional_forward(float *out,                   /* (N, T, D) */
                       const float *x,               /* (N, T, D) */
                       const float *table,           /* (max_len, D), only rows 0..T-1 are read */
                       int N, int T, int D);

/* dx[b, t] += dout[b, t] (dx NULL: the input needs no gradient), and
 * dtable[t] += the sum over b of dout[b, t] for t < T (dtable NULL: the
 * fixed sinusoidal table). */
int positional_backward(float *dx,                   /* (N, T, D), accumulated, or NULL */
                        float *dtable,               /* (max_len, D), rows 0..T-1 accumulated, or NULL */
                        const float *dout,           /* (N, T, D) */
                        int N, int T, int D);

#endif
