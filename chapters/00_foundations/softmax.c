/* softmax.c - see softmax.h for the formulas and the all -inf rule. */
#include "softmax.h"

#include "error.h"   /* not_implemented(), used by the exercise stubs */

#include <math.h>
#include <stddef.h>

int softmax_forward(float *y, const float *x, int rows, int cols)
{
    /* BEGIN SOLUTION */
    #pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)r * cols;   /* (C,) */
        float *yr = y + (size_t)r * cols;         /* (C,) */
        float max = -INFINITY;
        for (int c = 0; c < cols; c++) max = xr[c] > max ? xr[c] : max;   /* NaN: skipped */
        if (max == -INFINITY) {                   /* every entry masked: zeros, not NaN */
            for (int c = 0; c < cols; c++) yr[c] = 0.0f;
            continue;
        }
        float sum = 0.0f;
        for (int c = 0; c < cols; c++) {
            yr[c] = expf(xr[c] - max);            /* exp(-inf) = 0 for masked entries */
            sum += yr[c];
        }
        float inv = 1.0f / sum;                   /* sum >= 1: the max entry gives exp(0) */
        for (int c = 0; c < cols; c++) yr[c] *= inv;
    }
    return 0;
    /* END SOLUTION */
}

int softmax_backward(float *dx, const float *y, const float *dy, int rows, int cols)
{
    /* BEGIN SOLUTION */
    #pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++) {
        const float *yr = y + (size_t)r * cols;
        const float *dyr = dy + (size_t)r * cols;
        float *dxr = dx + (size_t)r * cols;
        float dot = 0.0f;                         /* sum_c dy[c] * y[c] */
        for (int c = 0; c < cols; c++) dot += dyr[c] * yr[c];
        for (int c = 0; c < cols; c++) dxr[c] = yr[c] * (dyr[c] - dot);
    }
    return 0;
    /* END SOLUTION */
}
