/*
 * ffn.c - see ffn.h: two linear layers from chapter 00 with ReLU and dropout
 * (dropout.h) between them. Rows are B * T positions.
 */
#include "ffn.h"

#include "error.h"   /* not_implemented(), used by the exercise stubs */

#include <string.h>

#include "dropout.h"
#include "matmul.h"

int ffn_forward(float *out, float *pre, float *hidden, const float *x, const float *w1,
                const float *b1, const float *w2, const float *b2, const uint8_t *mask,
                float p, int B, int T, int D, int F)
{
    /* BEGIN SOLUTION */
    int rows = B * T;
    if (linear_forward(pre, x, w1, b1, rows, D, F) != 0) return -1;
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < rows * F; i++) hidden[i] = pre[i] > 0.0f ? pre[i] : 0.0f;
    if (dropout_forward(hidden, hidden, mask, rows * F, p) != 0) return -1;
    return linear_forward(out, hidden, w2, b2, rows, F, D);
    /* END SOLUTION */
}

int ffn_backward(float *dx, float *dw1, float *db1, float *dw2, float *db2, float *dhidden,
                 const float *dout, const float *x, const float *pre, const float *hidden,
                 const float *w1, const float *w2, const uint8_t *mask, float p, int B, int T,
                 int D, int F)
{
    /* BEGIN SOLUTION */
    int rows = B * T;
    /* linear2: dhidden = dout W2 (overwritten: linear_backward adds, so zero
     * it first), and the gradients of W2 and b2. */
    memset(dhidden, 0, (size_t)rows * F * sizeof *dhidden);
    if (linear_backward(dhidden, dw2, db2, dout, hidden, w2, rows, F, D) != 0) return -1;
    /* Back through dropout and ReLU, in place: the factor mask / (1 - p) of
     * the forward, times ReLU's slope, 1 where pre > 0 and 0 elsewhere
     * (at pre == 0 too, as in PyTorch). */
    float scale = !mask ? 1.0f : p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < rows * F; i++) {
        int keep = pre[i] > 0.0f && (!mask || mask[i]);
        dhidden[i] = keep ? dhidden[i] * scale : 0.0f;
    }
    /* linear1: dx += dpre W1, and the gradients of W1 and b1. */
    return linear_backward(dx, dw1, db1, dhidden, x, w1, rows, D, F);
    /* END SOLUTION */
}
