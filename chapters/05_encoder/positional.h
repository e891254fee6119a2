/*
 * positional.h - telling the model where each token is: the sinusoidal
 * encoding of "Attention Is All You Need" and learned position embeddings.
 *
 * Letters: B batch (the top README's N), T sequence length, D d_model,
 * max_len the number of positions a table holds (T <= max_len), which
 * positional_sinusoidal_table takes as its argument L.
 *
 * Attention treats its input as a set: permute the tokens and the outputs are
 * permuted the same way. Order has to be written into the vectors themselves,
 * by adding a position vector to each token's embedding:
 *
 *     out[b, t, :] = x[b, t, :] + table[t, :]          x, out (B, T, D)
 *
 * Two kinds of table (max_len, D) are in use, both added the same way:
 *
 * 1. Sinusoidal (section 3.5 of the paper), fixed, nothing to learn. For the
 *    pair of dimensions (2i, 2i+1), with the frequency w_i = 10000^(-2i/D),
 *
 *        table[pos, 2i]   = sin(pos * w_i)
 *        table[pos, 2i+1] = cos(pos * w_i)
 *
 *    The wavelengths 2 pi / w_i grow geometrically from 2 pi (i = 0) towards
 *    10000 * 2 pi. For an odd D the last dimension, D - 1 = 2i, is a sine with
 *    no cosine partner (PyTorch tutorials' code fails on odd D; this formula
 *    simply stops). positional_sinusoidal_table() fills it, in float32.
 *
 * 2. Learned: nn.Embedding(max_len, D) looked up at positions 0..T-1,
 *    whose weight is a parameter. Its backward sends each position's gradient, summed over
 *    the batch, to that position's row.
 *
 * The backward of the addition: the gradient reaches x unchanged, and, for a
 * learned table, also the rows 0..T-1 of the table:
 *
 *     dx[b, t, :]     += dout[b, t, :]
 *     dtable[t, :]    += sum over b of dout[b, t, :]
 *
 * Both are ADDED (+=), like every backward here. Pass dtable = NULL for the
 * fixed sinusoidal table and dx = NULL when the input needs no gradient.
 *
 * A sequence longer than the table (T > max_len) has no positions to add; the
 * caller must refuse it before calling (see cases/encoder_case.c).
 *
 * Read next: dropout.h, which is applied to this sum in the Transformer.
 *
 * Returns 0 (the exercise stubs return -1).
 */
#ifndef POSITIONAL_H
#define POSITIONAL_H

#define POSITIONAL_BASE 10000.0f   /* the paper's base of the wavelengths */

/* Fills table (L, D) with the sinusoidal encoding of positions 0..L-1 (L = max_len). */
int positional_sinusoidal_table(float *table,        /* (L, D) */
                                int L, int D);

/* out = x + table[:T], the table broadcast over the batch. out may be x. */
int positional_forward(float *out,                   /* (B, T, D) */
                       const float *x,               /* (B, T, D) */
                       const float *table,           /* (max_len, D), only rows 0..T-1 are read */
                       int B, int T, int D);

int positional_backward(float *dx,                   /* (B, T, D), accumulated, or NULL */
                        float *dtable,               /* (max_len, D), rows 0..T-1 accumulated, or NULL */
                        const float *dout,           /* (B, T, D) */
                        int B, int T, int D);

#endif
