/*
 * dropout.c - see dropout.h for the mask rule and the inverted scaling.
 */
#include "dropout.h"

#include "threads.h"  /* OpenMP, or its one-thread stand-ins */
#include <stdint.h>

#include "error.h"   /* not_implemented(), used by the exercise stubs */

int dropout_mask(uint8_t *mask, int n, float p, Rng *rng)
{
    /* BEGIN SOLUTION */
    /* Element i takes the i-th number of the stream, so the mask depends on
     * the seed only, not on the thread count: the mask is cut into blocks,
     * and each block's generator jumps ahead to its first element
     * (rng_advance). Each thread draws four blocks in step: one PCG step
     * waits for the previous one's multiply, four chains keep the core busy. */
    enum { LANES = 4 };
    const Rng start = *rng;
    #pragma omp parallel if (n >= 1 << 16)
    {
        int lanes = omp_get_num_threads() * LANES, first = omp_get_thread_num() * LANES;
        Rng r[LANES];
        int64_t lo[LANES], hi[LANES], longest = 0;
        for (int l = 0; l < LANES; l++) {
            lo[l] = (int64_t)n * (first + l) / lanes;
            hi[l] = (int64_t)n * (first + l + 1) / lanes;
            r[l] = start;
            rng_advance(&r[l], (uint64_t)lo[l]);
            if (hi[l] - lo[l] > longest) longest = hi[l] - lo[l];
        }
        for (int64_t j = 0; j < longest; j++)
            for (int l = 0; l < LANES; l++)
                if (lo[l] + j < hi[l]) mask[lo[l] + j] = rng_uniform(&r[l]) >= p;
    }
    rng_advance(rng, (uint64_t)n);
    return 0;
    /* END SOLUTION */
}

int dropout_forward(float *out, const float *x, const uint8_t *mask, int n, float p)
{
    /* BEGIN SOLUTION */
    if (!mask && out == x) return 0;              /* evaluation mode, in place */
    /* 1 / (1 - p) for the survivors; with p = 1 there are none, and 1 / 0
     * must not be computed. Without a mask (evaluation mode) dropout is the
     * identity, a copy. */
    float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) out[i] = !mask ? x[i] : mask[i] ? x[i] * scale : 0.0f;
    return 0;
    /* END SOLUTION */
}

int dropout_backward(float *dx, const float *dout, const uint8_t *mask, int n, float p)
{
    /* BEGIN SOLUTION */
    /* The forward's factor: 1 without a mask, else 1 / (1 - p), 0 when p = 1. */
    float scale = !mask ? 1.0f : p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++)
        if (!mask || mask[i]) dx[i] += dout[i] * scale;
    return 0;
    /* END SOLUTION */
}
