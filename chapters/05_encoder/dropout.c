/*
 * dropout.c - see dropout.h for the mask rule and the inverted scaling.
 */
#include "dropout.h"

#include "error.h"   /* not_implemented(), used by the exercise stubs */

int dropout_mask(uint8_t *mask, int n, float p, Rng *rng)
{
    /* BEGIN SOLUTION */
    /* Serial on purpose: element i takes the i-th number of the stream, so
     * the mask depends on the seed only, not on the thread count. */
    for (int i = 0; i < n; i++) mask[i] = rng_uniform(rng) >= p;
    return 0;
    /* END SOLUTION */
}

int dropout_forward(float *out, const float *x, const uint8_t *mask, int n, float p)
{
    /* BEGIN SOLUTION */
    if (!mask) {                                  /* evaluation mode: the identity */
        if (out != x)
            for (int i = 0; i < n; i++) out[i] = x[i];
        return 0;
    }
    /* 1 / (1 - p) for the survivors; with p = 1 there are none, and 1 / 0
     * must not be computed. */
    float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) out[i] = mask[i] ? x[i] * scale : 0.0f;
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
