/*
 * softmax.h - numerically stable softmax over the last dimension, and its
 * backward pass. The formulas, and why the row maximum is subtracted first:
 * the chapter's README. Letters local to this file: (R, C) is R rows of C
 * columns (the arguments rows and cols).
 *
 * An entry of -inf gets probability exactly 0. A row whose entries are all
 * -inf gives a row of zeros (not NaN), what F.scaled_dot_product_attention
 * returns for a query that may attend to nothing. The backward needs only
 * the forward's output y.
 *
 * softmax_row and softmax_row_backward do one row (the exercise); attention
 * (chapter 02) calls them row by row. softmax_forward and softmax_backward
 * do every row, rows shared out among threads.
 * Returns 0 (the exercise stubs return -1).
 *
 * Read next: rng.h.
 */
#ifndef SOFTMAX_H
#define SOFTMAX_H

#include <stdint.h>
#include <string.h>

/*
 * e^x in float32 for x <= 0 (all softmax asks for), within about 1 ulp of
 * the exact value; 0 below -87 (where e^x is no longer a normal float) and
 * for -inf; NaN for NaN. libm's expf is a function call, one value at a
 * time; this one is a few multiply-adds the compiler can run 8 at a time,
 * which makes the softmax of attention several times faster. The method
 * (Cephes' expf):
 *
 *     x = n ln 2 + r,  n an integer, |r| <= ln(2) / 2
 *     e^x = 2^n e^r:   e^r by a degree-7 polynomial, 2^n by writing n + 127
 *                      into the float's exponent bits
 *
 * ln 2 is split into 0.693359375 (exact in a few bits, so n * it is exact)
 * plus a small correction, so that r loses no bits.
 */
static inline float softmax_exp(float x)
{
    /* Both tests are false for NaN (what a NaN or infinite score gives): it
     * is clamped like -inf, as converting NaN to an int is undefined in C,
     * and returned as it came. */
    float xc = x >= -87.0f ? x : -87.0f;                           /* keeps 2^n normal */
    float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  /* round(x / ln 2) */
    float r = (xc - n * 0.693359375f) - n * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;                                      /* e^r */
    int32_t bits = ((int32_t)n + 127) << 23;                       /* 2^n */
    float two_n;
    memcpy(&two_n, &bits, sizeof two_n);
    return x >= -87.0f ? p * two_n : x < -87.0f ? 0.0f : x;
}

/* The partial sums of a row's reductions (its max, its sum of exponentials,
 * the backward's dot product): 16, a vector of AVX-512 (two of AVX2, four of
 * NEON), and the same number on every CPU, so the same result. */
#define SOFTMAX_LANES 16

/* One row: y (C,) = softmax(x (C,)); y may be x. */
int softmax_row(float *y, const float *x, int cols);
/* One row: dx (C,) = the gradient through y = softmax(x); dx may be dy. */
int softmax_row_backward(float *dx, const float *y, const float *dy, int cols);

/* Every row of x, y, dy, dx (R, C). */
int softmax_forward(float *y, const float *x, int rows, int cols);
int softmax_backward(float *dx, const float *y, const float *dy, int rows, int cols);

#endif
