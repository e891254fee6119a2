/*
 * residual.h - the residual connection: out = x + f(x).
 *
 * Every sub-layer of the Transformer (attention, the feed-forward network)
 * is wrapped so that its output is added to its input. The block computes
 * f(x) itself; this is only the addition and its backward, written out so the
 * gradient's path is explicit:
 *
 *     forward    out = x + fx                    elementwise, n values
 *     backward   dx  += dout,  dfx += dout       the gradient reaches both
 *                                                branches unchanged
 *
 * Because d(out)/dx = 1, the gradient that arrives at x through the skip path
 * is never scaled down, however many blocks are stacked; that is why deep
 * Transformers train. The backward adds (+=) into dx and dfx like every
 * backward here: dx then also collects what flows back through f.
 *
 * out may be the same buffer as x or fx (adding in place).
 * Read next: chapter 05, where LayerNorm and this addition wrap each sub-layer.
 *
 * Returns 0 (the exercise stubs return -1).
 */
#ifndef RESIDUAL_H
#define RESIDUAL_H

int residual_forward(float *out,          /* (n,) */
                     const float *x,      /* (n,) the sub-layer's input */
                     const float *fx,     /* (n,) the sub-layer's output f(x) */
                     int n);

int residual_backward(float *dx,          /* (n,), accumulated */
                      float *dfx,         /* (n,), accumulated */
                      const float *dout,  /* (n,) */
                      int n);

#endif
