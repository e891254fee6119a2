/*
 * sdpa.c - scaled dot-product attention; see sdpa.h for the shapes, the mask
 * conventions and the fully-masked rule.
 *
 * Each batch entry b (one head of one sequence) is an independent problem of
 * three small matrix products and a softmax, so the loop over b is the one
 * that runs in parallel. Every value is still summed by one thread in a
 * fixed order, so the results do not depend on the number of threads.
 *
 * Letters: N batch (every leading dimension flattened), L queries, S keys,
 * E query/key features, Ev value features.
 */
#include "sdpa.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "error.h"
#include "matmul.h"
#include "softmax.h"
#include "tensor.h"

float sdpa_default_scale(int E)
{
    return (float)(1.0 / sqrt((double)E));
}

int sdpa_mask_bias(float *bias, const void *mask, int is_bool, const int64_t *mask_shape,
                   int mask_ndim, const int64_t *att_shape, int att_ndim)
{
    /* BEGIN SOLUTION */
    /* Broadcasting by strides: stride[d] is how far the read position in the
     * mask moves when index d of the attention grows by one. A mask dimension
     * of size 1, or one the mask does not have (it is aligned to the right),
     * repeats: its stride is 0. */
    int64_t stride[TENSOR_MAX_DIMS];
    int64_t step = 1;                             /* contiguous stride in the mask */
    for (int d = att_ndim - 1; d >= 0; d--) {
        int md = d - (att_ndim - mask_ndim);      /* the mask's dimension, < 0: none */
        stride[d] = (md >= 0 && mask_shape[md] != 1) ? step : 0;
        if (md >= 0) step *= mask_shape[md];
    }
    int64_t n = 1;                                /* N * L * S */
    for (int d = 0; d < att_ndim; d++) n *= att_shape[d];

    for (int64_t i = 0; i < n; i++) {
        /* Split the flat index i into one index per dimension, last fastest. */
        int64_t rest = i, at = 0;
        for (int d = att_ndim - 1; d >= 0; d--) {
            at += (rest % att_shape[d]) * stride[d];
            rest /= att_shape[d];
        }
        if (is_bool)   /* F.scaled_dot_product_attention: true = may attend */
            bias[i] = ((const uint8_t *)mask)[at] ? 0.0f : -INFINITY;
        else
            bias[i] = ((const float *)mask)[at];
    }
    return 0;
    /* END SOLUTION */
}

/* w = att * keep / (1 - p), n values: the weights that dropout keeps,
 * scaled up so that their expectation is att. */
static void dropped_weights(float *w, const float *att, const uint8_t *keep, float p, size_t n)
{
    const float scale = 1.0f / (1.0f - p);
    for (size_t i = 0; i < n; i++) w[i] = keep[i] ? att[i] * scale : 0.0f;
}

int sdpa_forward(float *out, float *att, const float *q, const float *k, const float *v,
                 const SdpaArgs *a)
{
    /* BEGIN SOLUTION */
    const int N = a->N, L = a->L, S = a->S, E = a->E, Ev = a->Ev;
    const float *bias = a->bias;
    const uint8_t *drop = a->drop;
    int rc = 0;
    /* With one batch entry there is nothing to share out here; the threads
     * are left to the matmuls inside (an inner parallel loop only runs in
     * parallel when the outer one does not). */
    #pragma omp parallel reduction(|:rc) if (N > 1)
    {
        /* With dropout, this thread's (L, S) buffer of the kept weights. */
        float *w = drop ? malloc(((size_t)L * S + 1) * sizeof *w) : NULL;
        rc |= drop && !w;
        #pragma omp for schedule(static)
        for (int b = 0; b < N; b++) {
            if (rc) continue;
            const float *qb = q + (size_t)b * L * E;                 /* (L, E) */
            const float *kb = k + (size_t)b * S * E;                 /* (S, E) */
            const float *vb = v + (size_t)b * S * Ev;                /* (S, Ev) */
            const float *biasb = bias ? bias + (size_t)b * L * S : NULL; /* (L, S) */
            float *ab = att + (size_t)b * L * S;                     /* (L, S) */
            float *ob = out + (size_t)b * L * Ev;                    /* (L, Ev) */
            /* The scores, made in att: s[i, j] = q_i . k_j, how well query i
             * matches key j, scaled, plus the mask. */
            rc |= matmul_nt(ab, qb, kb, L, S, E, 0);
            for (int i = 0; i < L; i++) {
                float *row = ab + (size_t)i * S;
                /* causal, top-left aligned: query i sees keys 0..i, the
                 * first `seen` of the row; the others get weight 0 */
                int seen = a->is_causal && i + 1 < S ? i + 1 : S;
                for (int j = 0; j < seen; j++) {
                    row[j] *= a->scale;
                    if (biasb) row[j] += biasb[(size_t)i * S + j];
                }
                /* The row becomes a probability distribution over the keys,
                 * in place; a row that is -inf everywhere becomes zeros (the
                 * fully-masked rule). The keys a causal query cannot see
                 * would be -inf, exp 0: they are left out of the softmax,
                 * which makes the same sums without them. */
                rc |= softmax_row(row, row, seen);
                for (int j = seen; j < S; j++) row[j] = 0.0f;
            }
            /* out_i = sum_j att[i, j] v_j: a weighted average of the values,
             * or, in training with dropout, of the weights dropout keeps. */
            const float *used = ab;
            if (drop) {
                dropped_weights(w, ab, drop + (size_t)b * L * S, a->dropout_p, (size_t)L * S);
                used = w;
            }
            rc |= matmul_nn(ob, used, vb, L, Ev, S, 0);
        }
        free(w);
    }
    return rc ? -1 : 0;
    /* END SOLUTION */
}

int sdpa_backward(float *dq, float *dk, float *dv, const float *dout, const float *q,
                  const float *k, const float *v, const float *att, const SdpaArgs *a)
{
    /* BEGIN SOLUTION */
    const int N = a->N, L = a->L, S = a->S, E = a->E, Ev = a->Ev;
    const uint8_t *drop = a->drop;
    int rc = 0;
    #pragma omp parallel reduction(|:rc) if (N > 1)
    {
        /* This thread's gradient of one batch entry's weights, then of its
         * scores, in place: (L, S), reused for every entry it takes; with
         * dropout a second (L, S) for the kept weights. */
        size_t n = (size_t)L * S;
        float *ds = malloc(((drop ? 2 : 1) * n + 1) * sizeof *ds);
        float *w = ds + n;
        rc |= !ds;
        #pragma omp for schedule(static)
        for (int b = 0; b < N; b++) {
            if (rc) continue;
            const float *qb = q + (size_t)b * L * E;             /* (L, E) */
            const float *kb = k + (size_t)b * S * E;             /* (S, E) */
            const float *vb = v + (size_t)b * S * Ev;            /* (S, Ev) */
            const float *ab = att + (size_t)b * L * S;           /* (L, S) */
            const float *dob = dout + (size_t)b * L * Ev;        /* (L, Ev) */
            const uint8_t *keep = drop ? drop + (size_t)b * n : NULL;
            float *dqb = dq + (size_t)b * L * E;                 /* (L, E) */
            float *dkb = dk + (size_t)b * S * E;                 /* (S, E) */
            float *dvb = dv + (size_t)b * S * Ev;                /* (S, Ev) */
            /* out = w V, a plain matrix product (w = att, or the weights
             * dropout kept), gives both of its inputs a gradient:
             * dV += w^T dout and dw = dout V^T. */
            if (keep) dropped_weights(w, ab, keep, a->dropout_p, n);
            rc |= matmul_tn(dvb, keep ? w : ab, dob, S, Ev, L, 1);
            rc |= matmul_nt(ds, dob, vb, L, S, Ev, 0);
            /* Dropout passes the gradient of the weights it kept, scaled
             * the same way, and none of those it dropped. */
            if (keep) {
                const float up = 1.0f / (1.0f - a->dropout_p);
                for (size_t i = 0; i < n; i++) ds[i] = keep[i] ? ds[i] * up : 0.0f;
            }
            /* Through the softmax, row by row and in place (the Jacobian of
             * a softmax row is diag(p) - p p^T): dscores = att * (datt -
             * sum_j datt[j] * att[j]). Masked entries have att = 0 and so
             * get no gradient, and neither does a fully-masked row. */
            for (int i = 0; i < L; i++)
                rc |= softmax_row_backward(ds + (size_t)i * S, ab + (size_t)i * S,
                                           ds + (size_t)i * S, S);
            /* scores = scale * Q K^T + bias: the bias is a constant, and the
             * scale multiplies through. From here on ds is d(loss)/d(Q K^T). */
            for (size_t i = 0; i < n; i++) ds[i] *= a->scale;
            /* dQ += ds K and dK += ds^T Q, the two halves of Q K^T. */
            rc |= matmul_nn(dqb, ds, kb, L, E, S, 1);
            rc |= matmul_tn(dkb, ds, qb, S, E, L, 1);
        }
        free(ds);
    }
    return rc ? -1 : 0;
    /* END SOLUTION */
}
