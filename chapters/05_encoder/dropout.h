/*
 * dropout.h - dropout as nn.Dropout(p) computes it in training mode, with a
 * mask you can keep, replay and test.
 *
 * During training each value is zeroed with probability p, and the survivors
 * are multiplied by 1 / (1 - p) ("inverted" dropout):
 *
 *     out[i] = x[i] * mask[i] / (1 - p)         mask[i] = 1 (kept) or 0 (dropped)
 *
 * so the expected value of out[i] is x[i] and nothing needs rescaling at
 * evaluation time, where dropout is the identity. The backward multiplies by
 * the same factor, which is why the forward's mask must be kept:
 *
 *     dx[i] += dout[i] * mask[i] / (1 - p)
 *
 * Three functions, so that the random part is separate from the arithmetic:
 *
 *   dropout_mask      draws the mask from the project's RNG: one rng_uniform()
 *                     per element, in index order, element i kept iff
 *                     u_i >= p. It always draws n numbers, whatever p, so the
 *                     stream position after it does not depend on p.
 *                     p = 0 keeps everything, p = 1 drops everything.
 *   dropout_forward   applies a mask, drawn or given (the golden cases carry
 *                     PyTorch's own masks). mask = NULL is evaluation mode:
 *                     out = x. p = 1 gives zeros, as torch does, without
 *                     dividing by zero. out may be x.
 *   dropout_backward  ADDS the gradient into dx (+=), like every backward here;
 *                     mask = NULL passes dout through.
 *
 * Masks are bytes (uint8_t, 0 or 1), the layout of a BOOL tensor in a
 * safetensors file. p must lie in [0, 1]; the caller checks it.
 *
 * PyTorch draws its masks from its own generator, which C cannot reproduce;
 * that is why parity tests run with p = 0 or an explicit mask, and the mask
 * of dropout_mask is tested by its statistics and by reference/rng.py, the
 * Python twin of the RNG.
 *
 * Read next: ffn.h, whose hidden layer is followed by dropout.
 *
 * Returns 0 (the exercise stubs return -1).
 */
#ifndef DROPOUT_H
#define DROPOUT_H

#include <stdint.h>

#include "rng.h"

int dropout_mask(uint8_t *mask,            /* (n,) 1 = kept, 0 = dropped */
                 int n, float p, Rng *rng);

int dropout_forward(float *out,            /* (n,) */
                    const float *x,        /* (n,) */
                    const uint8_t *mask,   /* (n,), or NULL: evaluation mode */
                    int n, float p);

int dropout_backward(float *dx,            /* (n,), accumulated */
                     const float *dout,    /* (n,) */
                     const uint8_t *mask,  /* (n,), the forward's mask, or NULL */
                     int n, float p);

#endif
