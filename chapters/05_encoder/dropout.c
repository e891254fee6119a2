/*
 * dropout.c - see dropout.h for the mask rule and the inverted scaling.
 */
#include "dropout.h"

#include "threads.h"  /* OpenMP, or its one-thread stand-ins */
#include <stdint.h>

#include "error.h"   /* not_implemented(), used by the exercise stubs */

PhiloxKey dropout_key(Rng *rng)
{
    PhiloxKey key;
    key.k[0] = rng_u32(rng);   /* two statements: the order of the draws is fixed */
    key.k[1] = rng_u32(rng);
    return key;
}

int dropout_mask(uint8_t *mask, int n, float p, Rng *rng)
{
    /* BEGIN SOLUTION */
    /* Element i depends on the key and i only, so the blocks of four can be
     * shared out among the threads in any way. */
    PhiloxKey key = dropout_key(rng);
    int blocks = n / 4 + (n % 4 != 0);
    #pragma omp parallel for schedule(static) if (n >= 1 << 15)
    for (int b = 0; b < blocks; b++) {
        float u[4];
        philox_uniform4(u, key, (uint32_t)b);
        for (int j = 0; j < 4 && 4 * b + j < n; j++) mask[4 * b + j] = u[j] >= p;
    }
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
