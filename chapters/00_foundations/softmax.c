/* softmax.c - see softmax.h for the formulas and the all -inf rule. */
#include "softmax.h"

#include "error.h"   /* not_implemented(), used by the exercise stubs */

#include <math.h>
#include <stddef.h>

/* The SOFTMAX_LANES partial results of a reduction, combined pairwise: lane
 * l takes lane l + 8, then l + 4, l + 2, l + 1 (fixed bounds, so a few
 * vector instructions). a is overwritten. */
_Static_assert(SOFTMAX_LANES == 16, "lanes_sum and lanes_max combine 16 lanes");

static inline float lanes_sum(float *a)
{
    for (int l = 0; l < 8; l++) a[l] += a[l + 8];
    for (int l = 0; l < 4; l++) a[l] += a[l + 4];
    for (int l = 0; l < 2; l++) a[l] += a[l + 2];
    return a[0] + a[1];
}

static inline float lanes_max(float *a)
{
    for (int l = 0; l < 8; l++) a[l] = a[l + 8] > a[l] ? a[l + 8] : a[l];
    for (int l = 0; l < 4; l++) a[l] = a[l + 4] > a[l] ? a[l + 4] : a[l];
    for (int l = 0; l < 2; l++) a[l] = a[l + 2] > a[l] ? a[l + 2] : a[l];
    return a[1] > a[0] ? a[1] : a[0];
}

int softmax_row(float *y, const float *x, int cols)
{
    /* BEGIN SOLUTION */
    /* Both reductions keep SOFTMAX_LANES partial results, element c going to
     * lane c % SOFTMAX_LANES, and combine the lanes pairwise (lanes_sum,
     * lanes_max): an order fixed in the code, the same on every CPU, that
     * the compiler runs as vector instructions (one running sum waits for
     * the previous add at every element). `full` is where the last, shorter
     * run of lanes starts. */
    enum { LANES = SOFTMAX_LANES };
    const int full = cols - cols % LANES, rest = cols - full;
    /* The last, shorter run of lanes, padded with -inf: it changes no
     * maximum, and its exponentials are 0, which add nothing. */
    float tail[LANES];
    for (int l = 0; l < LANES; l++) tail[l] = l < rest ? x[full + l] : -INFINITY;
    float lane_max[LANES], lane_sum[LANES];
    for (int l = 0; l < LANES; l++) lane_max[l] = -INFINITY, lane_sum[l] = 0.0f;
    for (int c0 = 0; c0 < full; c0 += LANES)
        for (int l = 0; l < LANES; l++)                               /* NaN: skipped */
            lane_max[l] = x[c0 + l] > lane_max[l] ? x[c0 + l] : lane_max[l];
    for (int l = 0; l < LANES; l++)   /* NaN skipped here too: a NaN lane would hide others */
        lane_max[l] = tail[l] > lane_max[l] ? tail[l] : lane_max[l];
    float max = lanes_max(lane_max);
    if (max == -INFINITY) {                       /* every entry masked: zeros, not NaN */
        for (int c = 0; c < cols; c++) y[c] = 0.0f;
        return 0;
    }
    for (int c0 = 0; c0 < full; c0 += LANES) {
        #pragma omp simd            /* y may be x: each lane reads its element, then writes it */
        for (int l = 0; l < LANES; l++) {
            float e = softmax_exp(x[c0 + l] - max);       /* exp(-inf) = 0 when masked */
            y[c0 + l] = e;
            lane_sum[l] += e;
        }
    }
    for (int l = 0; l < LANES; l++) {
        tail[l] = softmax_exp(tail[l] - max);
        lane_sum[l] += tail[l];
    }
    for (int l = 0; l < rest; l++) y[full + l] = tail[l];
    float sum = lanes_sum(lane_sum);
    float inv = 1.0f / sum;                       /* sum >= 1: the max entry gives exp(0) */
    #pragma omp simd
    for (int c = 0; c < cols; c++) y[c] *= inv;
    return 0;
    /* END SOLUTION */
}

int softmax_row_backward(float *dx, const float *y, const float *dy, int cols)
{
    /* BEGIN SOLUTION */
    enum { LANES = SOFTMAX_LANES };               /* as in softmax_row */
    const int full = cols - cols % LANES, rest = cols - full;
    float lane_dot[LANES] = {0};                  /* sum_c dy[c] * y[c], in lanes */
    for (int c0 = 0; c0 < full; c0 += LANES)
        for (int l = 0; l < LANES; l++) lane_dot[l] += dy[c0 + l] * y[c0 + l];
    for (int l = 0; l < LANES; l++)               /* the short run last, 0 past it */
        lane_dot[l] += l < rest ? dy[full + l] * y[full + l] : 0.0f;
    float dot = lanes_sum(lane_dot);
    #pragma omp simd                              /* dx may be dy */
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
