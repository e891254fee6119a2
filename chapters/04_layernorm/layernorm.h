/*
 * layernorm.h - layer normalisation over the last dimension, forward and
 * backward, with the semantics of PyTorch's nn.LayerNorm(C, eps,
 * elementwise_affine).
 *
 * Letters: B batch, T sequence length, C channels (the normalised dimension).
 * Any tensor whose last dimension is C works: pass its other dimensions
 * flattened as B * T (a rank-1 input is B = T = 1).
 *
 * For each row x (C,) of the input:
 *
 *     mean = sum_c x[c] / C
 *     var  = sum_c (x[c] - mean)^2 / C          biased: divide by C, not C - 1
 *     rstd = 1 / sqrt(var + eps)                eps inside the square root
 *     n[c] = (x[c] - mean) * rstd               the normalised row
 *     y[c] = n[c] * weight[c] + bias[c]         the affine step (optional)
 *
 * weight and bias are nn.LayerNorm's parameters, shape (C,). Pass weight =
 * bias = NULL for elementwise_affine=False (y = n), or bias = NULL alone for
 * nn.LayerNorm(C, bias=False).
 *
 * A row of equal values has var = 0 and rstd = 1/sqrt(eps); its x - mean is
 * exactly 0, so its output is exactly bias (0 without one), never NaN.
 *
 * The forward saves mean and rstd, (B, T) each, so the backward can rebuild n
 * without recomputing the statistics. Either pointer may be NULL when no
 * backward will follow.
 *
 * The backward ADDS its gradients into dinp, dweight and dbias (+=), like
 * every backward in this project: a tensor used in two places (the input of a
 * pre-norm sub-layer feeds both the norm and the residual) collects the sum
 * of both gradients. Zero the buffers before the first backward. dweight
 * and dbias may each be NULL: that gradient is then not computed (a frozen
 * weight, or no bias); dweight is also left alone when weight is NULL.
 *
 * Rows are shared out among OpenMP threads; every sum is made by one thread
 * in a fixed order, so results do not depend on the thread count.
 *
 * What this does not do: normalise over several trailing dimensions at once
 * (normalized_shape with more than one entry), or store anything in other
 * than float32. Read next: residual.h, then chapter 05, which puts the norm
 * and the residual around attention and the feed-forward network.
 *
 * Returns 0 (the exercise stubs return -1).
 */
#ifndef LAYERNORM_H
#define LAYERNORM_H

#define LAYERNORM_DEFAULT_EPS 1e-5f   /* nn.LayerNorm's default */

int layernorm_forward(float *out,              /* (B, T, C) */
                      float *mean,             /* (B, T) or NULL */
                      float *rstd,             /* (B, T) or NULL */
                      const float *inp,        /* (B, T, C) */
                      const float *weight,     /* (C,) or NULL */
                      const float *bias,       /* (C,) or NULL */
                      int B, int T, int C, float eps);

int layernorm_backward(float *dinp,            /* (B, T, C), accumulated */
                       float *dweight,         /* (C,), accumulated, or NULL; unused if weight is NULL */
                       float *dbias,           /* (C,), accumulated, or NULL (no bias) */
                       const float *dout,      /* (B, T, C) */
                       const float *inp,       /* (B, T, C) */
                       const float *weight,    /* (C,) or NULL */
                       const float *mean,      /* (B, T), from the forward */
                       const float *rstd,      /* (B, T), from the forward */
                       int B, int T, int C);

#endif
