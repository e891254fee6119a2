/*
 * mha.c - multi-head attention: chapter 00's linear layer four times and
 * chapter 02's attention once, with the N * H (sequence, head) pairs as
 * sdpa's flattened batch, glued together by two copies (split and merge of the
 * heads). The contract is mha.h's; the formulas, their names and the
 * numbered steps 1-5 are the README's.
 */
#include "mha.h"

#include "error.h"   /* not_implemented(), used by the exercise stubs */

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "matmul.h"
#include "sdpa.h"
#include "tensor.h"

/* ------------------------------------------------------------------------ */
/* Heads and masks                                                          */
/* ------------------------------------------------------------------------ */

int mha_split_heads(float *xh, const float *x, int N, int T, int H, int Dh)
{
    /* BEGIN SOLUTION */
    /* Row t of sequence n holds the H heads side by side, H blocks of Dh
     * features; head h's block moves to row t of the (T, Dh) matrix of head
     * h. A pure copy: every value lands in exactly one place. */
    #pragma omp parallel for collapse(2) schedule(static)
    for (int n = 0; n < N; n++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                const float *src = x + ((size_t)n * T + t) * H * Dh + (size_t)h * Dh;
                float *dst = xh + (((size_t)n * H + h) * T + t) * Dh;
                memcpy(dst, src, (size_t)Dh * sizeof *dst);
            }
    return 0;
    /* END SOLUTION */
}

int mha_merge_heads(float *x, const float *xh, int N, int T, int H, int Dh)
{
    /* BEGIN SOLUTION */
    /* The same copy the other way: head h's row t goes back to the h-th
     * block of row t. Concatenating the heads is exactly this. */
    #pragma omp parallel for collapse(2) schedule(static)
    for (int n = 0; n < N; n++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                const float *src = xh + (((size_t)n * H + h) * T + t) * Dh;
                float *dst = x + ((size_t)n * T + t) * H * Dh + (size_t)h * Dh;
                memcpy(dst, src, (size_t)Dh * sizeof *dst);
            }
    return 0;
    /* END SOLUTION */
}

int mha_mask_bias(float *bias, const void *key_padding_mask, int kpm_is_bool,
                  const void *attn_mask, int attn_is_bool, int attn_mask_3d,
                  int N, int H, int L, int S)
{
    /* BEGIN SOLUTION */
    #pragma omp parallel for collapse(2) schedule(static)
    for (int n = 0; n < N; n++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < L; i++)
                for (int j = 0; j < S; j++) {
                    float value = 0.0f;
                    if (attn_mask) {
                        /* (L, S) is shared by every sequence and head;
                         * (N * H, L, S) has a matrix for each (n, h). */
                        size_t at = (attn_mask_3d ? ((size_t)n * H + h) * L * S : 0) +
                                    (size_t)i * S + j;
                        /* nn.MultiheadAttention: true = NOT allowed to attend */
                        value += attn_is_bool ? (((const uint8_t *)attn_mask)[at] ? -INFINITY
                                                                                  : 0.0f)
                                              : ((const float *)attn_mask)[at];
                    }
                    if (key_padding_mask) {
                        /* One entry per (sequence, key), the same for every
                         * head and query: true = this key is padding. */
                        size_t at = (size_t)n * S + j;
                        value += kpm_is_bool ? (((const uint8_t *)key_padding_mask)[at]
                                                    ? -INFINITY : 0.0f)
                                             : ((const float *)key_padding_mask)[at];
                    }
                    bias[(((size_t)n * H + h) * L + i) * S + j] = value;
                }
    return 0;
    /* END SOLUTION */
}

/* ------------------------------------------------------------------------ */
/* Forward and backward                                                     */
/* ------------------------------------------------------------------------ */

/* Given at the end of the file: the cache's buffers in the heads' layout. */
typedef struct {
    float *q, *k, *v, *o, *d_o, *dq, *dk, *dv;
} HeadBuffers;
static HeadBuffers head_buffers(const MhaCache *c);

int mha_forward(float *out, MhaCache *cache, const float *query, const float *key,
                const float *value, const MhaParams *params, const float *bias,
                int is_causal)
{
    /* BEGIN SOLUTION */
    MhaCache *c = cache;
    int N = c->N, L = c->L, S = c->S, D = c->D, H = c->H, Dh = c->Dh;
    float *w[3], *b[3];
    mha_in_proj_params(params, D, w, b);

    /* 1. Three linear layers project queries, keys and values to D features:
     *    q (N, L, D) = query (N, L, D) w[0]^T + b[0], and likewise k and v
     *    from key (N, S, Ek) and value (N, S, Ev). */
    if (linear_forward(c->q, query, w[0], b[0], N * L, D, D) != 0 ||
        linear_forward(c->k, key, w[1], b[1], N * S, c->Ek, D) != 0 ||
        linear_forward(c->v, value, w[2], b[2], N * S, c->Ev, D) != 0)
        return -1;

    /* 2. Each head takes its own Dh features: (N, T, D) -> (N, H, T, Dh).
     *    With one head the two layouts are the same and nothing moves: hb
     *    names the buffers the heads use (head_buffers). */
    HeadBuffers hb = head_buffers(c);
    if (H > 1 && (mha_split_heads(hb.q, c->q, N, L, H, Dh) != 0 ||
                  mha_split_heads(hb.k, c->k, N, S, H, Dh) != 0 ||
                  mha_split_heads(hb.v, c->v, N, S, H, Dh) != 0))
        return -1;

    /* 3. Attention in every head at once: N * H independent problems, each
     *    scaled by 1/sqrt(Dh), the head's own feature size. */
    SdpaArgs heads = {N * H, L, S, Dh, Dh, sdpa_default_scale(Dh), is_causal, bias, c->drop,
                      c->dropout_p};
    if (sdpa_forward(hb.o, c->att, hb.q, hb.k, hb.v, &heads) != 0) return -1;

    /* 4. Concatenate the heads' outputs: (N, H, L, Dh) -> (N, L, D). */
    if (H > 1 && mha_merge_heads(c->o, hb.o, N, L, H, Dh) != 0) return -1;

    /* 5. The output projection mixes the heads:
     *    out = o out_proj_weight^T + out_proj_bias. */
    return linear_forward(out, c->o, params->out_proj_weight, params->out_proj_bias, N * L, D,
                          D);
    /* END SOLUTION */
}

int mha_backward(float *dquery, float *dkey, float *dvalue, const MhaParams *grads,
                 const float *dout, const float *query, const float *key, const float *value,
                 const MhaParams *params, MhaCache *cache)
{
    if (!cache->d_o) return -1;   /* the cache was allocated without backward scratch */
    /* BEGIN SOLUTION */
    MhaCache *c = cache;
    int N = c->N, L = c->L, S = c->S, D = c->D, H = c->H, Dh = c->Dh;
    size_t nl = (size_t)N * L * D, ns = (size_t)N * S * D;
    float *w[3], *b[3], *dw[3], *db[3];
    mha_in_proj_params(params, D, w, b);
    mha_in_proj_params(grads, D, dw, db);
    HeadBuffers hb = head_buffers(c);   /* with one head, the row buffers */

    /* 5. d_o (N, L, D) = dout out_proj_weight, and the gradients of
     *    out_proj_weight and out_proj_bias. linear_backward adds, so d_o
     *    starts at zero. */
    floats_zero(c->d_o, nl);
    if (linear_backward(c->d_o, grads->out_proj_weight, grads->out_proj_bias, dout, c->o,
                        params->out_proj_weight, N * L, D, D) != 0)
        return -1;

    /* 4. Merging the heads only moved values around, so its backward moves
     *    the gradient back: split d_o into the heads, (N, H, L, Dh). */
    if (H > 1 && mha_split_heads(hb.d_o, c->d_o, N, L, H, Dh) != 0) return -1;

    /* 3. Attention, every head at once. sdpa_backward adds into dqh, dkh,
     *    dvh: zero them first. */
    floats_zero(hb.dq, nl);
    floats_zero(hb.dk, ns);
    floats_zero(hb.dv, ns);
    SdpaArgs heads = {N * H, L, S, Dh, Dh, sdpa_default_scale(Dh), 0, NULL, c->drop,
                      c->dropout_p};
    if (sdpa_backward(hb.dq, hb.dk, hb.dv, hb.d_o, hb.q, hb.k, hb.v, c->att, &heads) != 0)
        return -1;

    /* 2. The split was a copy too: merge the heads' gradients back into
     *    (N, T, D) rows. */
    if (H > 1 && (mha_merge_heads(c->dq, hb.dq, N, L, H, Dh) != 0 ||
                  mha_merge_heads(c->dk, hb.dk, N, S, H, Dh) != 0 ||
                  mha_merge_heads(c->dv, hb.dv, N, S, H, Dh) != 0))
        return -1;

    /* 1. The three input projections: each adds its share into the input's
     *    gradient (in self-attention the three are one buffer, which so
     *    collects the sum of the three paths) and into its weight and bias
     *    gradients (three row blocks of the packed in_proj gradients). */
    if (linear_backward(dquery, dw[0], db[0], c->dq, query, w[0], N * L, D, D) != 0 ||
        linear_backward(dkey, dw[1], db[1], c->dk, key, w[1], N * S, c->Ek, D) != 0 ||
        linear_backward(dvalue, dw[2], db[2], c->dv, value, w[2], N * S, c->Ev, D) != 0)
        return -1;
    return 0;
    /* END SOLUTION */
}

int mha_average_heads(float *avg, const float *att, int N, int H, int L, int S)
{
    /* BEGIN SOLUTION */
    /* A sum over the heads in a fixed order, then one division, as
     * torch.mean does; each output value is made by one thread. */
    #pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++)
        for (int ij = 0; ij < L * S; ij++) {
            float sum = 0.0f;
            for (int h = 0; h < H; h++) sum += att[((size_t)n * H + h) * L * S + ij];
            avg[(size_t)n * L * S + ij] = sum / (float)H;
        }
    return 0;
    /* END SOLUTION */
}

/* ------------------------------------------------------------------------ */
/* The cache and the parameter layouts (given, not part of the exercise)    */
/* ------------------------------------------------------------------------ */

/* One buffer of n floats, zeroed; NULL when out of memory. */
static float *floats(int64_t n)
{
    return calloc((size_t)n, sizeof(float));
}

int mha_cache_alloc(MhaCache *c, const MhaDims *dims, int backward, Error *err)
{
    int N = dims->N, L = dims->L, S = dims->S, D = dims->D, H = dims->H, Ek = dims->Ek,
        Ev = dims->Ev;
    memset(c, 0, sizeof *c);
    if (N < 1 || L < 1 || S < 1 || D < 1 || H < 1 || Ek < 1 || Ev < 1)
        return error_set(err, "mha: sizes must be at least 1 (N %d, L %d, S %d, D %d, H %d, "
                         "kdim %d, vdim %d)", N, L, S, D, H, Ek, Ev);
    if (D % H != 0)
        return error_set(err, "mha: embed_dim %d is not divisible by num_heads %d", D, H);
    /* The largest buffer is (N, H, L, S) or (N, max(L, S), D); every offset
     * inside one must fit the int loops of the layer functions. */
    int64_t att = (int64_t)N * H * L * S;
    int64_t rows = (int64_t)N * (L > S ? L : S) * D;
    if (att > INT_MAX || rows > INT_MAX)
        return error_set(err, "mha: N %d, L %d, S %d, D %d, H %d need buffers of %lld floats, "
                         "more than this implementation allows (%d)", N, L, S, D, H,
                         (long long)(att > rows ? att : rows), INT_MAX);
    *c = (MhaCache){.N = N, .L = L, .S = S, .D = D, .H = H, .Dh = D / H, .Ek = Ek, .Ev = Ev};
    int64_t nl = (int64_t)N * L * D, ns = (int64_t)N * S * D;   /* (N, L, D), (N, S, D) */
    c->q = floats(nl);
    c->k = floats(ns);
    c->v = floats(ns);
    c->qh = floats(nl);
    c->kh = floats(ns);
    c->vh = floats(ns);
    c->att = floats(att);
    c->oh = floats(nl);
    c->o = floats(nl);
    int ok = c->q && c->k && c->v && c->qh && c->kh && c->vh && c->att && c->oh && c->o;
    if (ok && backward) {
        c->d_o = floats(nl);
        c->doh = floats(nl);
        c->dqh = floats(nl);
        c->dkh = floats(ns);
        c->dvh = floats(ns);
        c->dq = floats(nl);
        c->dk = floats(ns);
        c->dv = floats(ns);
        ok = c->d_o && c->doh && c->dqh && c->dkh && c->dvh && c->dq && c->dk && c->dv;
    }
    if (!ok) {
        mha_cache_free(c);
        return error_set(err, "mha: out of memory for N %d, L %d, S %d, D %d, H %d", N, L, S, D,
                         H);
    }
    return 0;
}

void mha_cache_free(MhaCache *c)
{
    float **buffers[] = {&c->q,   &c->k,   &c->v,   &c->qh,  &c->kh,  &c->vh,
                         &c->att, &c->oh,  &c->o,   &c->d_o, &c->doh, &c->dqh,
                         &c->dkh, &c->dvh, &c->dq,  &c->dk,  &c->dv};
    for (size_t i = 0; i < sizeof buffers / sizeof buffers[0]; i++) {
        free(*buffers[i]);
        *buffers[i] = NULL;
    }
}

/* The buffers the heads are read from and written to, (N, H, T, Dh) each:
 * the cache's qh, kh, ... With one head, (N, T, D) is already (N, 1, T, Dh),
 * so there they are the row buffers q, k, ... themselves, and the layer
 * skips the split and merge copies. */
static HeadBuffers head_buffers(const MhaCache *c)
{
    if (c->H > 1)
        return (HeadBuffers){c->qh, c->kh, c->vh, c->oh, c->doh, c->dqh, c->dkh, c->dvh};
    return (HeadBuffers){c->q, c->k, c->v, c->o, c->d_o, c->dq, c->dk, c->dv};
}

void mha_in_proj_params(const MhaParams *p, int D, float *w[3], float *b[3])
{
    for (int i = 0; i < 3; i++) {
        /* Packed: rows i*D .. (i+1)*D - 1 of in_proj_weight (3D, D). */
        w[i] = p->in_proj_weight ? p->in_proj_weight + (size_t)i * D * D
             : i == 0            ? p->q_proj_weight
             : i == 1            ? p->k_proj_weight
                                 : p->v_proj_weight;
        b[i] = p->in_proj_bias ? p->in_proj_bias + (size_t)i * D : NULL;
    }
}
