/*
 * positional.c - see positional.h for the two tables and the addition.
 *
 * The sinusoidal table is computed in float32, and its error grows with the
 * position (the rounded angle pos * w_i; the README's "Accuracy in
 * float32"), so each case's tolerance grows with its length.
 */
#include "positional.h"

#include "error.h"   /* not_implemented(), used by the exercise stubs */

#include <math.h>
#include <stddef.h>

int positional_sinusoidal_table(float *table, int max_len, int D)
{
    /* BEGIN SOLUTION */
    const float log_base = logf(POSITIONAL_BASE);
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < (D + 1) / 2; i++) {        /* the pair (2i, 2i+1) */
        /* w_i = 10000^(-2i/D) = exp(-(2i/D) ln 10000) */
        float freq = expf(-(float)(2 * i) / (float)D * log_base);
        for (int pos = 0; pos < max_len; pos++) {
            float angle = (float)pos * freq;
            float *row = table + (size_t)pos * D;     /* (D,) */
            row[2 * i] = sinf(angle);
            if (2 * i + 1 < D) row[2 * i + 1] = cosf(angle);   /* odd D: no partner */
        }
    }
    return 0;
    /* END SOLUTION */
}

int positional_forward(float *out, const float *x, const float *table, int N, int T, int D)
{
    /* BEGIN SOLUTION */
    #pragma omp parallel for schedule(static)
    for (int bt = 0; bt < N * T; bt++) {
        const float *p = table + (size_t)(bt % T) * D;   /* (D,) the row of position t */
        const float *xi = x + (size_t)bt * D;
        float *o = out + (size_t)bt * D;
        for (int d = 0; d < D; d++) o[d] = xi[d] + p[d];
    }
    return 0;
    /* END SOLUTION */
}

int positional_backward(float *dx, float *dtable, const float *dout, int N, int T, int D)
{
    /* BEGIN SOLUTION */
    if (dx) {
        #pragma omp parallel for schedule(static)
        for (int i = 0; i < N * T * D; i++) dx[i] += dout[i];
    }
    if (dtable) {
        /* One thread per position row, summing the batch in order. */
        #pragma omp parallel for schedule(static)
        for (int t = 0; t < T; t++) {
            float *drow = dtable + (size_t)t * D;   /* (D,) */
            for (int b = 0; b < N; b++) {
                const float *g = dout + ((size_t)b * T + t) * D;
                for (int d = 0; d < D; d++) drow[d] += g[d];
            }
        }
    }
    return 0;
    /* END SOLUTION */
}
