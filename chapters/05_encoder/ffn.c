/*
 * ffn.c - see ffn.h: two linear layers from chapter 00 with ReLU and dropout
 * (dropout.h) between them. Rows are N * T positions.
 */
#include "ffn.h"

#include "error.h"   /* not_implemented(), used by the exercise stubs */


#include "dropout.h"
#include "matmul.h"
#include "tensor.h"

int ffn_forward(float *out, FfnCache *c, const float *x, const FfnParams *p, int rows)
{
    /* BEGIN SOLUTION */
    int D = c->D, F = c->F;
    if (linear_forward(c->pre, x, p->w1, p->b1, rows, D, F) != 0) return -1;
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < rows * F; i++) c->hidden[i] = c->pre[i] > 0.0f ? c->pre[i] : 0.0f;
    if (dropout_forward(c->hidden, c->hidden, c->mask, rows * F, c->p) != 0) return -1;
    return linear_forward(out, c->hidden, p->w2, p->b2, rows, F, D);
    /* END SOLUTION */
}

int ffn_backward(float *dx, const FfnParams *g, float *dhidden, const float *dout,
                 const float *x, const FfnParams *p, const FfnCache *c, int rows)
{
    /* BEGIN SOLUTION */
    int D = c->D, F = c->F;
    /* linear2: dhidden = dout W2 (overwritten: linear_backward adds, so zero
     * it first), and the gradients of W2 and b2. */
    floats_zero(dhidden, (size_t)rows * F);
    if (linear_backward(dhidden, g->w2, g->b2, dout, c->hidden, p->w2, rows, F, D) != 0)
        return -1;
    /* Back through dropout and ReLU, in place: the factor mask / (1 - p) of
     * the forward, times ReLU's slope, 1 where pre > 0 and 0 elsewhere
     * (at pre == 0 too, as in PyTorch). */
    const uint8_t *mask = c->mask;
    float scale = !mask ? 1.0f : c->p < 1.0f ? 1.0f / (1.0f - c->p) : 0.0f;
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < rows * F; i++) {
        int keep = c->pre[i] > 0.0f && (!mask || mask[i]);
        dhidden[i] = keep ? dhidden[i] * scale : 0.0f;
    }
    /* linear1: dx += dpre W1, and the gradients of W1 and b1. */
    return linear_backward(dx, g->w1, g->b1, dhidden, x, p->w1, rows, D, F);
    /* END SOLUTION */
}
