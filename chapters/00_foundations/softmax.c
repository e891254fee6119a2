/* softmax.c - see softmax.h for the formulas and the all -inf rule. */
#include "softmax.h"

#include "error.h"   /* not_implemented(), used by the exercise stubs */

#include <math.h>
#include <stddef.h>

int softmax_row(float *y, const float *x, int cols)
{
    /* BEGIN SOLUTION */
    float max = -INFINITY;
    for (int c = 0; c < cols; c++) max = x[c] > max ? x[c] : max;   /* NaN: skipped */
    if (max == -INFINITY) {                       /* every entry masked: zeros, not NaN */
        for (int c = 0; c < cols; c++) y[c] = 0.0f;
        return 0;
    }
    float sum = 0.0f;
    for (int c = 0; c < cols; c++) {
        y[c] = softmax_exp(x[c] - max);           /* exp(-inf) = 0 for masked entries */
        sum += y[c];
    }
    float inv = 1.0f / sum;                       /* sum >= 1: the max entry gives exp(0) */
    for (int c = 0; c < cols; c++) y[c] *= inv;
    return 0;
    /* END SOLUTION */
}

int softmax_row_backward(float *dx, const float *y, const float *dy, int cols)
{
    /* BEGIN SOLUTION */
    float dot = 0.0f;                             /* sum_c dy[c] * y[c] */
    for (int c = 0; c < cols; c++) dot += dy[c] * y[c];
    for (int c = 0; c < cols; c++) dx[c] = y[c] * (dy[c] - dot);
    return 0;
    /* END SOLUTION */
}

/* Rows are shared out among threads; after a failed row (an exercise stub)
 * a thread skips the rest, so the failure is reported once per thread. */
int softmax_forward(float *y, const float *x, int rows, int cols)
{
    int failed = 0;
    #pragma omp parallel for schedule(static) reduction(|:failed)
    for (int r = 0; r < rows; r++)
        if (!failed)
            failed |= softmax_row(y + (size_t)r * cols, x + (size_t)r * cols, cols) != 0;
    return failed ? -1 : 0;
}

int softmax_backward(float *dx, const float *y, const float *dy, int rows, int cols)
{
    int failed = 0;
    #pragma omp parallel for schedule(static) reduction(|:failed)
    for (int r = 0; r < rows; r++)
        if (!failed)
            failed |= softmax_row_backward(dx + (size_t)r * cols, y + (size_t)r * cols,
                                           dy + (size_t)r * cols, cols) != 0;
    return failed ? -1 : 0;
}
