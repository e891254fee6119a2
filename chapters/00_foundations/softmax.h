/*
 * softmax.h - numerically stable softmax over the last dimension, and its
 * backward pass.
 *
 *     y[r, c] = exp(x[r, c] - m_r) / sum_c' exp(x[r, c'] - m_r),   m_r = max_c x[r, c]
 *
 * Subtracting the row maximum m_r changes nothing mathematically (it cancels)
 * but keeps every exponent <= 0, so exp() never overflows even for inputs
 * like 1e4. An entry of -inf gets probability exactly 0. A row whose entries
 * are all -inf has no maximum to subtract; by this project's rule it gives a
 * row of zeros (not NaN), which is what F.scaled_dot_product_attention returns
 * for a query that may attend to nothing.
 *
 * Backward, for one row with upstream gradient dy:
 *     dx[c] = y[c] * (dy[c] - sum_c' dy[c'] * y[c'])
 *
 * Shapes: x, y, dy, dx are (R, C), rows independent.
 * Returns 0 (the exercise stubs return -1).
 */
#ifndef SOFTMAX_H
#define SOFTMAX_H

int softmax_forward(float *y, const float *x, int rows, int cols);
int softmax_backward(float *dx, const float *y, const float *dy, int rows, int cols);

#endif
