/*
 * layernorm.h - layer normalisation over the last dimension, forward and
 * backward, with the semantics of PyTorch's nn.LayerNorm(D, eps,
 * elementwise_affine, bias). The formula, how the forward keeps the mean's
 * digits, and the backward's three terms are in the chapter's README.
 *
 * Letters: N batch, T positions, D width (the normalised dimension), the
 * top README's. Any tensor whose last dimension is D works: pass its other
 * dimensions flattened as N * T (a rank-1 input is N = T = 1).
 *
 * weight and bias are nn.LayerNorm's parameters, (D,) each. weight = bias =
 * NULL is elementwise_affine=False (y = n); bias = NULL alone is
 * nn.LayerNorm(D, bias=False). A row of equal values gives exactly bias (0
 * without one), never NaN.
 *
 * The forward saves mean and rstd, (N, T) each, for the backward; either
 * may be NULL when no backward will follow. The backward ADDS (+=) into
 * dinp, dweight and dbias, like every backward in this project: zero them
 * before the first backward. dweight and dbias may each be NULL (that
 * gradient is not computed); dweight is also left alone when weight is NULL.
 *
 * Results do not depend on the number of OpenMP threads.
 * Not here: a normalized_shape of more than one dimension, dtypes other
 * than float32.
 *
 * Returns 0 (the exercise stubs return -1).
 *
 * Read next: residual.h, then chapter 05, which puts the norm and the
 * residual around attention and the feed-forward network.
 */
#ifndef LAYERNORM_H
#define LAYERNORM_H

#define LAYERNORM_DEFAULT_EPS 1e-5f   /* nn.LayerNorm's default */

int layernorm_forward(float *out,              /* (N, T, D) */
                      float *mean,             /* (N, T) or NULL */
                      float *rstd,             /* (N, T) or NULL */
                      const float *inp,        /* (N, T, D) */
                      const float *weight,     /* (D,) or NULL */
                      const float *bias,       /* (D,) or NULL */
                      int N, int T, int D, float eps);

int layernorm_backward(float *dinp,            /* (N, T, D), accumulated */
                       float *dweight,         /* (D,), accumulated, or NULL; unused if weight is NULL */
                       float *dbias,           /* (D,), accumulated, or NULL (no bias) */
                       const float *dout,      /* (N, T, D) */
                       const float *inp,       /* (N, T, D) */
                       const float *weight,    /* (D,) or NULL */
                       const float *mean,      /* (N, T), from the forward */
                       const float *rstd,      /* (N, T), from the forward */
                       int N, int T, int D);

#endif
