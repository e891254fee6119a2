/*
 * dropout.h - dropout as nn.Dropout(p) computes it in training mode
 * ("inverted": the kept values are divided by 1 - p), with a mask you can
 * keep, replay and test: drawing the mask is separate from applying it.
 * Why, and where the Transformer applies it: the chapter's README,
 * "Dropout".
 *
 * Masks are bytes (uint8_t), 1 = kept, 0 = dropped: the layout of a BOOL
 * tensor in a safetensors file. p must lie in [0, 1]; the caller checks it.
 * The golden cases carry PyTorch's own masks, which dropout_forward applies
 * like a drawn one.
 *
 * Read next: ffn.h, whose hidden layer is followed by dropout.
 *
 * Returns 0 (the exercise stubs return -1).
 */
#ifndef DROPOUT_H
#define DROPOUT_H

#include <stdint.h>

#include "philox.h"
#include "rng.h"

/* A mask's key: two rng_u32() of the stream, the first in k[0]. Every mask
 * takes one key, so its bits depend on the seed, on the mask's place in the
 * run (which step, which tensor) and on the element index only. The GPU
 * draws its keys with this same function. */
PhiloxKey dropout_key(Rng *rng);

/* Draws the mask: one key from rng (dropout_key), then element i is kept
 * iff u_i >= p, where u_i is number i of the key's Philox sequence
 * (philox_uniform4 of block i / 4, element i % 4). Always takes exactly two
 * numbers from rng, whatever p and n; element i is the same whatever the
 * thread count, and the same on the GPU. */
int dropout_mask(uint8_t *mask,            /* (n,) 1 = kept, 0 = dropped */
                 int n, float p, Rng *rng);

/* out = x * mask / (1 - p); mask NULL (evaluation mode): out = x. p = 1 gives
 * zeros, without dividing by zero. out may be x. */
int dropout_forward(float *out,            /* (n,) */
                    const float *x,        /* (n,) */
                    const uint8_t *mask,   /* (n,), or NULL: evaluation mode */
                    int n, float p);

/* dx += dout * mask / (1 - p); mask NULL passes dout through. */
int dropout_backward(float *dx,            /* (n,), accumulated */
                     const float *dout,    /* (n,) */
                     const uint8_t *mask,  /* (n,), the forward's mask, or NULL */
                     int n, float p);

#endif
