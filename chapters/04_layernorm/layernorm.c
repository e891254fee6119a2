/*
 * layernorm.c - the formula is in the chapter's README; the shapes and the
 * rules (NULL parameters, accumulated gradients) are in layernorm.h.
 *
 * One row of D values at a time, rows shared among OpenMP threads. The
 * forward makes two passes over a row before writing it: the mean first,
 * kept as a pair (the row's first value and the mean distance from it), then
 * the variance of the deviations from that mean. The backward rebuilds the
 * normalised row n from the saved mean and rstd instead of storing it.
 *
 * Letters: N batch, T positions, D width, the top README's; rows = N * T
 * counts the rows.
 */
#include "layernorm.h"

#include "error.h"   /* not_implemented(), used by the exercise stubs */
#include "tensor.h"  /* sum_blocks, partial_sums_add */

#include <math.h>
#include <stddef.h>
#include <stdlib.h>

int layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                      const float *weight, const float *bias, int N, int T, int D, float eps)
{
    /* BEGIN SOLUTION */
    int rows = N * T;
    #pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++) {
        const float *x = inp + (size_t)r * D;     /* (D,) */
        float *y = out + (size_t)r * D;           /* (D,) */

        /* Pass 1, the mean, kept as a pair: mean = shift + delta, where
         * shift is the row's first value and delta the mean distance from
         * it. For a row like 1e4 + N(0, 1) the plain sum of the values grows
         * to D * 1e4, where float32 numbers lie a quarter apart or more, and
         * each addition rounds away the digits that say how the values
         * differ; the distances are small and add up almost exactly. The
         * pair is never added up into one float: near 1e4 float32 numbers
         * lie 1e-3 apart, so that float would be off by up to 5e-4, and
         * every deviation with it (README, "Keeping the mean as a pair").
         *
         * Each sum is made in blocks of 16 values: a block's own total first,
         * then the block totals into the row's. A running total that has grown
         * large rounds away the low bits of every small number added to it,
         * and when many numbers share those bits (rows of values on a coarse
         * float32 grid, like 1e6 + N(0, 1)) the losses pile up on one side;
         * a block total stays small. */
        float shift = x[0];
        float sum = 0.0f;
        for (int c0 = 0; c0 < D; c0 += 16) {
            float block = 0.0f;
            for (int c = c0; c < c0 + 16 && c < D; c++) block += x[c] - shift;
            sum += block;
        }
        float delta = sum / D;

        /* Pass 2, the variance of the deviations from the mean, each made as
         * (x[c] - shift) - delta: x[c] - shift is exact when the two are
         * within a factor 2 of each other (Sterbenz's lemma), and delta is a
         * small number known to float32 precision. A row of equal values gets
         * delta = 0 and deviations of exactly 0, so its output is exactly the
         * bias however large rstd is. The one-pass formula var = mean(x^2) -
         * mean^2 would subtract two numbers of size 1e8 for the row above to
         * get one of size 1; float32 spaces numbers near 1e8 eight apart, so
         * that difference is noise (even negative, and sqrt of it NaN).
         * Squared deviations are never negative and carry their full
         * precision. Dividing by D (not D - 1) is the biased variance that
         * nn.LayerNorm uses. */
        float ss = 0.0f;
        for (int c0 = 0; c0 < D; c0 += 16) {
            float block = 0.0f;
            for (int c = c0; c < c0 + 16 && c < D; c++) {
                float d = (x[c] - shift) - delta;
                block += d * d;
            }
            ss += block;
        }
        float s = 1.0f / sqrtf(ss / D + eps);     /* eps inside the root: finite for var = 0 */

        for (int c = 0; c < D; c++) {
            float n = ((x[c] - shift) - delta) * s;   /* normalised */
            float scaled = weight ? n * weight[c] : n;
            y[c] = bias ? scaled + bias[c] : scaled;
        }
        if (mean) mean[r] = shift + delta;        /* one float for the backward (see there) */
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
 * term 2: x[i] moves the mean by 1/D, which shifts every n[c] down by rstd / D;
 * term 3: x[i] moves the variance by 2 (x[i] - mean) / D, which rescales every
 *         n[c]; that costs n[i] times how much the loss cares about scale.
 * README.md derives it. The parameters see only the last step y = n w + b:
 *     dL/dweight[c] = sum over rows of dout[c] * n[c],  dL/dbias[c] = sum of dout[c].
 *
 * n is rebuilt as (x - mean) * rstd from the saved mean, one float, not from
 * the forward's pair (shift, delta). On a row whose mean dwarfs its spread
 * that float is off by up to half its spacing (5e-4 near 1e4), so the
 * gradients carry the relative error the forward had before it kept the
 * pair: the error of torch's float32 backward, which also saves a float
 * mean, and what the backward tolerances (cond) allow for. We leave it so:
 * the pair could only come back by summing each row again (delta, in both
 * loops below), for rows that a Transformer's residual stream rarely has.
 */
int layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                       const float *inp, const float *weight, const float *mean,
                       const float *rstd, int N, int T, int D)
{
    /* BEGIN SOLUTION */
    int rows = N * T;

    /* The parameter gradients are sums over rows (tensor.h): each block of
     * SUM_ROWS rows sums dout * n and dout into partial sums of its own,
     * (blocks, D) for weight and then (blocks, D) for bias, added up in
     * block order at the end, so the result is the same for any thread
     * count. The total is added to the buffers once, as autograd adds a new
     * gradient to an existing .grad. */
    int blocks = sum_blocks(rows), params = (weight && dweight) || dbias;
    float *partial = params ? malloc((size_t)blocks * 2 * D * sizeof *partial) : NULL;
    float *g_rows = malloc((size_t)blocks * D * sizeof *g_rows);   /* (blocks, D) */
    if ((params && !partial) || !g_rows) {
        free(partial);
        free(g_rows);
        return -1;
    }

    /* Rows are independent: the threads share out the blocks of rows. */
    #pragma omp parallel for schedule(static) if (blocks > 1)
    for (int b = 0; b < blocks; b++) {
        float *dw = params ? partial + (size_t)b * D : NULL;              /* (D,) */
        float *db = params ? partial + (size_t)(blocks + b) * D : NULL;   /* (D,) */
        for (int c = 0; params && c < D; c++) dw[c] = db[c] = 0.0f;
        int end = rows - b * SUM_ROWS < SUM_ROWS ? rows : (b + 1) * SUM_ROWS;
        for (int r = b * SUM_ROWS; r < end; r++) {
            const float *x = inp + (size_t)r * D;     /* (D,) */
            const float *dy = dout + (size_t)r * D;   /* (D,) */
            float *dx = dinp + (size_t)r * D;         /* (D,) */
            float *g = g_rows + (size_t)b * D;        /* (D,) */
            float m = mean[r], s = rstd[r];

            /* Each g[c] is formed once and kept, and both the mean and the
             * element's own term read that one float. Formed twice, one copy
             * could be fused into a multiply-add (-ffp-contract=fast) and the
             * other rounded: on a constant row (any row when D = 1) n = 0 and
             * the exact gradient is 0, but rstd = 1/sqrt(eps) = 316 would
             * turn that one rounding into 2.5e-5. */
            float mean_g = 0.0f, mean_gn = 0.0f;      /* mean_c g[c] and mean_c g[c] n[c] */
            for (int c = 0; c < D; c++) {
                float n = (x[c] - m) * s;
                g[c] = weight ? dy[c] * weight[c] : dy[c];
                mean_g += g[c];
                mean_gn += g[c] * n;
            }
            mean_g /= D;
            mean_gn /= D;

            for (int c = 0; c < D; c++) {
                float n = (x[c] - m) * s;
                dx[c] += s * (g[c] - mean_g - n * mean_gn);   /* the three terms above */
            }
            if (params) {
                #pragma omp simd
                for (int c = 0; c < D; c++) {
                    dw[c] += dy[c] * ((x[c] - m) * s);     /* dout * n */
                    db[c] += dy[c];
                }
            }
        }
    }
    if (weight && dweight) partial_sums_add(dweight, partial, blocks, D);
    if (dbias) partial_sums_add(dbias, partial + (size_t)blocks * D, blocks, D);
    free(partial);
    free(g_rows);
    return 0;
    /* END SOLUTION */
}
