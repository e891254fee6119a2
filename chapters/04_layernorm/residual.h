/*
 * residual.h - the residual connection, out = x + f(x), and its backward,
 * dx += dout and dfx += dout: the gradient reaches both branches unchanged
 * (the chapter's README says why that lets deep stacks train). The block
 * computes f(x) itself; this is only the addition, on n elements of any
 * shape.
 *
 * out may be the same buffer as x or fx (adding in place). The backward
 * ADDS (+=) into dx and dfx like every backward here: dx then also collects
 * what flows back through f.
 *
 * Returns 0 (the exercise stubs return -1).
 *
 * Read next: chapter 05, where LayerNorm and this addition wrap each sub-layer.
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
