/*
 * layernorm.c - see layernorm.h for the formula, the shapes and the rules
 * (NULL parameters, accumulated gradients).
 *
 * One row of C values at a time, rows shared among OpenMP threads. The
 * forward makes two passes over a row before writing it: the mean first,
 * then the variance of the deviations from that mean. The backward rebuilds
 * the normalised row n from the saved mean and rstd instead of storing it.
 *
 * Letters: B batch, T sequence, C channels; N = B * T rows.
 */
#include "layernorm.h"

#include "error.h"   /* not_implemented(), used by the exercise stubs */

#include <math.h>
#include <stddef.h>

int layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                      const float *weight, const float *bias, int B, int T, int C, float eps)
{
    /* BEGIN SOLUTION */
    int N = B * T;
    #pragma omp parallel for schedule(static)
    for (int r = 0; r < N; r++) {
        const float *x = inp + (size_t)r * C;     /* (C,) */
        float *y = out + (size_t)r * C;           /* (C,) */

        /* Pass 1, the mean. We add up the distances from the row's first
         * value and put that value back at the end. For a row like
         * 1e4 + N(0, 1) the plain sum grows to C * 1e4 (2.56e6 for C = 256),
         * where float32 numbers lie a quarter apart, and each addition rounds
         * away the digits that say how the values differ; the distances are
         * small and add up almost exactly.
         * A row of equal values sums to exactly 0 and gets exactly its value
         * as the mean, so x - mean below is exactly 0 however large rstd is. */
        float shift = x[0];
        float sum = 0.0f;
        for (int c = 0; c < C; c++) sum += x[c] - shift;
        float m = shift + sum / C;

        /* Pass 2, the variance of the deviations from the mean. The one-pass
         * formula var = mean(x^2) - mean^2 subtracts two numbers of size 1e8
         * for the row above to get one of size 1; float32 spaces numbers near
         * 1e8 eight apart, so that difference is noise (even negative, and
         * sqrt of it NaN). Squared deviations are never negative and carry
         * their full precision. Dividing by C (not C - 1) is the biased
         * variance that nn.LayerNorm uses. */
        float ss = 0.0f;
        for (int c = 0; c < C; c++) {
            float d = x[c] - m;
            ss += d * d;
        }
        float s = 1.0f / sqrtf(ss / C + eps);     /* eps inside the root: finite for var = 0 */

        for (int c = 0; c < C; c++) {
            float n = (x[c] - m) * s;                 /* normalised */
            float scaled = weight ? n * weight[c] : n;
            y[c] = bias ? scaled + bias[c] : scaled;
        }
        if (mean) mean[r] = m;
        if (rstd) rstd[r] = s;
    }
    return 0;
    /* END SOLUTION */
}

/*
 * The backward for one row. With g[c] = dL/dn[c] = dout[c] * weight[c]
 * (just dout[c] without weight), the chain rule through n = (x - mean) * rstd,
 * where mean and rstd depend on every x[c], gives
 *
 *     dL/dx[i] = rstd * ( g[i]  -  mean_c g[c]  -  n[i] * mean_c g[c] n[c] )
 *
 * term 1: x[i] moves n[i] directly, by rstd per unit;
 * term 2: x[i] moves the mean by 1/C, which shifts every n[c] down by rstd / C;
 * term 3: x[i] moves the variance by 2 (x[i] - mean) / C, which rescales every
 *         n[c]; that costs n[i] times how much the loss cares about scale.
 * README.md derives it. The parameters see only the last step y = n w + b:
 *     dL/dweight[c] = sum over rows of dout[c] * n[c],  dL/dbias[c] = sum of dout[c].
 */
int layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                       const float *inp, const float *weight, const float *mean,
                       const float *rstd, int B, int T, int C)
{
    /* BEGIN SOLUTION */
    int N = B * T;

    /* The input gradient: rows are independent. */
    #pragma omp parallel for schedule(static)
    for (int r = 0; r < N; r++) {
        const float *x = inp + (size_t)r * C;     /* (C,) */
        const float *dy = dout + (size_t)r * C;   /* (C,) */
        float *dx = dinp + (size_t)r * C;         /* (C,) */
        float m = mean[r], s = rstd[r];

        float mean_g = 0.0f, mean_gn = 0.0f;      /* mean_c g[c] and mean_c g[c] n[c] */
        for (int c = 0; c < C; c++) {
            float n = (x[c] - m) * s;
            float g = weight ? dy[c] * weight[c] : dy[c];
            mean_g += g;
            mean_gn += g * n;
        }
        mean_g /= C;
        mean_gn /= C;

        for (int c = 0; c < C; c++) {
            float n = (x[c] - m) * s;
            float g = weight ? dy[c] * weight[c] : dy[c];
            dx[c] += s * (g - mean_g - n * mean_gn);   /* the three terms above */
        }
    }

    /* The parameter gradients are sums over rows, so here the threads share
     * out the columns instead: each column is summed by one thread, row after
     * row, and the result is the same for any thread count. The sum is made
     * first and added to the buffer once, as autograd adds a new gradient to
     * an existing .grad. */
    if ((weight && dweight) || dbias) {
        /* Blocks of 16 columns, each walked row after row, so that the
         * loads are 16 consecutive floats (a column alone would jump C
         * floats from one row to the next). */
        #pragma omp parallel for schedule(static)
        for (int c0 = 0; c0 < C; c0 += 16) {
            int width = C - c0 < 16 ? C - c0 : 16;
            float dw[16] = {0}, db[16] = {0};
            for (int r = 0; r < N; r++) {
                const float *x = inp + (size_t)r * C + c0, *dy = dout + (size_t)r * C + c0;
                #pragma omp simd
                for (int c = 0; c < width; c++) {
                    dw[c] += dy[c] * ((x[c] - mean[r]) * rstd[r]);   /* dout * n */
                    db[c] += dy[c];
                }
            }
            for (int c = 0; c < width; c++) {
                if (weight && dweight) dweight[c0 + c] += dw[c];
                if (dbias) dbias[c0 + c] += db[c];
            }
        }
    }
    return 0;
    /* END SOLUTION */
}
