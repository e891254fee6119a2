/*
 * model.cu - the whole model on the GPU, forward and backward: chapters 03,
 * 05, 06 and 07 composed from the kernels of this folder.
 *
 * Mirrors, function for function (the C name without gpu_):
 *
 *   gpu_mha_forward / _backward            mha_forward / _backward       03_mha/mha.c
 *   gpu_encoder_layer_forward / _backward  encoder_layer_*               05_encoder/encoder_layer.c
 *   gpu_encoder_forward / _backward        encoder_forward / _backward   (the stack)
 *   gpu_decoder_layer_forward / _backward  decoder_layer_*               06_decoder/decoder_layer.c
 *   gpu_decoder_forward / _backward        decoder_forward / _backward   (the stack)
 *   front_forward, padding_bias, mean_pool the same static functions     07_model/model.c
 *   gpu_model_forward / _backward          model_forward / _backward
 *
 * The structs are the C ones (gpu.h): MhaCache, EncoderLayerCache, ...,
 * ModelWork hold device pointers here, so each function below is its C twin
 * with cuda_* calls in place of the C layer functions and cudaMemset /
 * cudaMemcpy in place of memset / memcpy. Read them side by side.
 *
 * What differs from the C code, and why:
 *   - Memory. All buffers of one batch shape are pieces of one cudaMalloc
 *     (layout_work runs twice: once to add up the sizes, once to hand out
 *     the pieces), so a work is one allocation and one free.
 *   - Dropout masks are drawn on the GPU (draw_masks), each from a key
 *     the host takes from the same Rng in the order the C model draws its
 *     masks: Philox makes element i from the key and i alone, so the same
 *     seed drops the same units on both sides, and a GPU run can be checked
 *     against a CPU run.
 *   - Matmuls run on cuBLAS (cuda_matmul_set_engine): the tiled kernel of
 *     matmul.cu is the one to read, cuBLAS the one to train with.
 *   - Sums over a batch (bias, LayerNorm and position gradients, the
 *     embedding's scatter-add) are one thread per column walking the rows in
 *     order: deterministic, no atomics, same bits on every run.
 *
 * Read next: train.cu (the training step around this).
 */
#include <cuda_runtime.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.cuh"
#include "gpu.h"
#include "kernels.h"

extern "C" {
#include "dropout.h"
#include "embedding.h"
#include "sdpa.h"
}

/* ------------------------------------------------------------------------ */
/* Small helpers: memset, memcpy, and the kernels the layers need besides     */
/* those of the other files                                                  */
/* ------------------------------------------------------------------------ */

static int cuda_ok(cudaError_t e, const char *what)
{
    if (e == cudaSuccess) return 0;
    fprintf(stderr, "cuda: %s: %s\n", what, cudaGetErrorString(e));
    return -1;
}

static int zero(float *x, size_t n)
{
    return cuda_ok(cudaMemsetAsync(x, 0, n * sizeof *x), "cudaMemsetAsync");
}

static int copy(float *dst, const float *src, size_t n)
{
    return cuda_ok(cudaMemcpyAsync(dst, src, n * sizeof *dst, cudaMemcpyDeviceToDevice),
                   "cudaMemcpyAsync");
}

/* Dropout is linear: its backward is itself with the same mask (NULL: the
 * identity). Writes dx. */
static int gpu_dropout_backward(float *dx, const float *dy, const uint8_t *mask, int n, float p)
{
    return cuda_dropout_forward(dx, dy, mask, n, p);
}

/* (N, T, H * Dh) <-> (N, H, T, Dh): one thread per value. split: xh from x;
 * merge: x from xh. */
template <bool SPLIT>
__global__ void heads_kernel(float *x, float *xh, int N, int T, int H, int Dh)
{
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    int D = H * Dh;
    if (idx >= (long long)N * T * D) return;
    long long n = idx / ((long long)T * D);
    int t = (int)((idx / D) % T), e = (int)(idx % D), h = e / Dh, d = e % Dh;
    long long hidx = ((n * H + h) * T + t) * Dh + d;
    if (SPLIT) xh[hidx] = x[idx];
    else x[idx] = xh[hidx];
}

static int gpu_split_heads(float *xh, const float *x, int N, int T, int H, int Dh)
{
    long long n = (long long)N * T * H * Dh;
    if (n == 0) return 0;
    heads_kernel<true><<<blocks_for(n, 256), 256>>>((float *)x, xh, N, T, H, Dh);
    return LAUNCH_CHECK(heads_kernel);
}

static int gpu_merge_heads(float *x, const float *xh, int N, int T, int H, int Dh)
{
    long long n = (long long)N * T * H * Dh;
    if (n == 0) return 0;
    heads_kernel<false><<<blocks_for(n, 256), 256>>>(x, (float *)xh, N, T, H, Dh);
    return LAUNCH_CHECK(heads_kernel);
}

/* ------------------------------------------------------------------------ */
/* Multi-head attention (chapter 03)                                         */
/* ------------------------------------------------------------------------ */

static int gpu_mha_forward(float *out, MhaCache *c, const float *query, const float *key,
                           const float *value, const MhaParams *params, const float *bias,
                           int is_causal)
{
    int N = c->N, L = c->L, S = c->S, D = c->D, H = c->H, Dh = c->Dh;
    float *w[3], *b[3];
    mha_in_proj_params(params, D, w, b);           /* pointer arithmetic only: fine on device */
    /* 1. the three projections */
    if (cuda_linear_forward(c->q, query, w[0], b[0], N * L, D, D) != 0 ||
        cuda_linear_forward(c->k, key, w[1], b[1], N * S, c->Ek, D) != 0 ||
        cuda_linear_forward(c->v, value, w[2], b[2], N * S, c->Ev, D) != 0)
        return -1;
    /* 2. split into heads */
    if (gpu_split_heads(c->qh, c->q, N, L, H, Dh) != 0 ||
        gpu_split_heads(c->kh, c->k, N, S, H, Dh) != 0 ||
        gpu_split_heads(c->vh, c->v, N, S, H, Dh) != 0)
        return -1;
    /* 3. attention in every head at once, with the dropout mask the layer
     *    set in c->drop (NULL: none) */
    if (cuda_sdpa_forward(c->oh, c->scores, c->att, c->qh, c->kh, c->vh, bias, c->drop,
                          c->dropout_p, N * H, L, S, Dh, Dh, sdpa_default_scale(Dh),
                          is_causal) != 0)
        return -1;
    /* 4. merge the heads, 5. the output projection */
    if (gpu_merge_heads(c->o, c->oh, N, L, H, Dh) != 0) return -1;
    return cuda_linear_forward(out, c->o, params->out_proj_weight, params->out_proj_bias, N * L,
                               D, D);
}

static int gpu_mha_backward(float *dquery, float *dkey, float *dvalue, const MhaParams *grads,
                            const float *dout, const float *query, const float *key,
                            const float *value, const MhaParams *params, MhaCache *c)
{
    int N = c->N, L = c->L, S = c->S, D = c->D, H = c->H, Dh = c->Dh;
    size_t nl = (size_t)N * L * D, ns = (size_t)N * S * D;
    float *w[3], *b[3], *dw[3], *db[3];
    mha_in_proj_params(params, D, w, b);
    mha_in_proj_params(grads, D, dw, db);
    /* 5. the output projection */
    if (zero(c->d_o, nl) != 0 ||
        cuda_linear_backward(c->d_o, grads->out_proj_weight, grads->out_proj_bias, dout, c->o,
                             params->out_proj_weight, N * L, D, D) != 0)
        return -1;
    /* 4. merging moved values: split the gradient back into heads */
    if (gpu_split_heads(c->doh, c->d_o, N, L, H, Dh) != 0) return -1;
    /* 3. attention; the backward adds, so zero first */
    if (zero(c->dqh, nl) != 0 || zero(c->dkh, ns) != 0 || zero(c->dvh, ns) != 0 ||
        cuda_sdpa_backward(c->dqh, c->dkh, c->dvh, c->datt, c->dscores, c->doh, c->qh, c->kh,
                           c->vh, c->att, c->drop, c->dropout_p, N * H, L, S, Dh, Dh,
                           sdpa_default_scale(Dh)) != 0)
        return -1;
    /* 2. merge the heads' gradients */
    if (gpu_merge_heads(c->dq, c->dqh, N, L, H, Dh) != 0 ||
        gpu_merge_heads(c->dk, c->dkh, N, S, H, Dh) != 0 ||
        gpu_merge_heads(c->dv, c->dvh, N, S, H, Dh) != 0)
        return -1;
    /* 1. the three projections add into the inputs' gradients */
    if (cuda_linear_backward(dquery, dw[0], db[0], c->dq, query, w[0], N * L, D, D) != 0 ||
        cuda_linear_backward(dkey, dw[1], db[1], c->dk, key, w[1], N * S, c->Ek, D) != 0 ||
        cuda_linear_backward(dvalue, dw[2], db[2], c->dv, value, w[2], N * S, c->Ev, D) != 0)
        return -1;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The encoder layer and stack (chapter 05)                                  */
/* ------------------------------------------------------------------------ */

/* The masks were drawn (draw_masks) when c->masks_drawn is set. */
static int gpu_encoder_layer_forward(float *out, EncoderLayerCache *c, const float *src,
                                     const EncoderLayerParams *p, const float *bias)
{
    int rows = c->N * c->S, n = rows * c->D;
    float drop = c->dropout;
    const uint8_t *m1 = c->masks_drawn ? c->mask1 : NULL;
    const uint8_t *mf = c->masks_drawn ? c->mask_ffn : NULL;
    const uint8_t *m2 = c->masks_drawn ? c->mask2 : NULL;
    c->attn.drop = c->masks_drawn ? c->mask_attn : NULL;
    c->attn.dropout_p = c->masks_drawn ? drop : 0.0f;

    /* Sub-layer 1: self-attention over src (post-norm) or norm1(src) (pre-norm). */
    const float *attn_in = src;
    if (c->norm_first) {
        if (cuda_layernorm_forward(c->ln1, c->mean1, c->rstd1, src, p->norm1_weight,
                                   p->norm1_bias, 1, rows, c->D, c->eps) != 0)
            return -1;
        attn_in = c->ln1;
    }
    if (gpu_mha_forward(c->attn_out, &c->attn, attn_in, attn_in, attn_in, &p->self_attn, bias,
                        c->causal) != 0)
        return -1;
    if (cuda_dropout_forward(c->res1, c->attn_out, m1, n, drop) != 0 ||
        cuda_residual_forward(c->res1, src, c->res1, n) != 0)
        return -1;

    /* Sub-layer 2: the FFN on norm1(res1) (post) or norm2(res1) (pre). */
    const float *ffn_in;
    if (c->norm_first) {
        if (cuda_layernorm_forward(c->ln2, c->mean2, c->rstd2, c->res1, p->norm2_weight,
                                   p->norm2_bias, 1, rows, c->D, c->eps) != 0)
            return -1;
        ffn_in = c->ln2;
    } else {
        if (cuda_layernorm_forward(c->ln1, c->mean1, c->rstd1, c->res1, p->norm1_weight,
                                   p->norm1_bias, 1, rows, c->D, c->eps) != 0)
            return -1;
        ffn_in = c->ln1;
    }
    if (cuda_ffn_forward(c->ffn_out, c->ffn_pre, c->ffn_hidden, ffn_in, p->linear1_weight,
                         p->linear1_bias, p->linear2_weight, p->linear2_bias, mf, drop, c->N,
                         c->S, c->D, c->F) != 0)
        return -1;
    const float *skip = c->norm_first ? c->res1 : c->ln1;
    float *sum = c->norm_first ? out : c->res2;
    if (cuda_dropout_forward(sum, c->ffn_out, m2, n, drop) != 0 ||
        cuda_residual_forward(sum, skip, sum, n) != 0)
        return -1;
    if (!c->norm_first &&
        cuda_layernorm_forward(out, c->mean2, c->rstd2, c->res2, p->norm2_weight, p->norm2_bias,
                               1, rows, c->D, c->eps) != 0)
        return -1;
    return 0;
}

static int gpu_encoder_layer_backward(float *dsrc, const EncoderLayerParams *g, const float *dout,
                                      const float *src, const EncoderLayerParams *p,
                                      EncoderLayerCache *c)
{
    int rows = c->N * c->S, n = rows * c->D;
    float drop = c->dropout;
    const uint8_t *m1 = c->masks_drawn ? c->mask1 : NULL;
    const uint8_t *mf = c->masks_drawn ? c->mask_ffn : NULL;
    const uint8_t *m2 = c->masks_drawn ? c->mask2 : NULL;
    float *da = c->d_a, *db = c->d_b, *dc = c->d_c;

    if (!c->norm_first) {
        /* out = norm2(r2) */
        if (zero(da, n) != 0 ||
            cuda_layernorm_backward(da, g->norm2_weight, g->norm2_bias, dout, c->res2,
                                    p->norm2_weight, c->mean2, c->rstd2, 1, rows, c->D) != 0)
            return -1;
        /* r2 = h + dropout2(ffn(h)) */
        if (copy(db, da, n) != 0 || gpu_dropout_backward(dc, da, m2, n, drop) != 0 ||
            cuda_ffn_backward(db, g->linear1_weight, g->linear1_bias, g->linear2_weight,
                              g->linear2_bias, c->d_hidden, dc, c->ln1, c->ffn_pre,
                              c->ffn_hidden, p->linear1_weight, p->linear2_weight, mf, drop,
                              c->N, c->S, c->D, c->F) != 0)
            return -1;
        /* h = norm1(r1) */
        if (zero(da, n) != 0 ||
            cuda_layernorm_backward(da, g->norm1_weight, g->norm1_bias, db, c->res1,
                                    p->norm1_weight, c->mean1, c->rstd1, 1, rows, c->D) != 0)
            return -1;
        /* r1 = src + dropout1(attn(src)) */
        if (cuda_add_into(dsrc, da, n) != 0 || gpu_dropout_backward(db, da, m1, n, drop) != 0)
            return -1;
        return gpu_mha_backward(dsrc, dsrc, dsrc, &g->self_attn, db, src, src, src,
                                &p->self_attn, &c->attn);
    }

    /* Pre-norm. out = h + dropout2(ffn(n2)) */
    if (copy(db, dout, n) != 0 || gpu_dropout_backward(dc, dout, m2, n, drop) != 0) return -1;
    if (zero(da, n) != 0 ||
        cuda_ffn_backward(da, g->linear1_weight, g->linear1_bias, g->linear2_weight,
                          g->linear2_bias, c->d_hidden, dc, c->ln2, c->ffn_pre, c->ffn_hidden,
                          p->linear1_weight, p->linear2_weight, mf, drop, c->N, c->S, c->D,
                          c->F) != 0 ||
        cuda_layernorm_backward(db, g->norm2_weight, g->norm2_bias, da, c->res1, p->norm2_weight,
                                c->mean2, c->rstd2, 1, rows, c->D) != 0)
        return -1;
    /* h = src + dropout1(attn(n1)) */
    if (cuda_add_into(dsrc, db, n) != 0 || gpu_dropout_backward(dc, db, m1, n, drop) != 0)
        return -1;
    if (zero(da, n) != 0 ||
        gpu_mha_backward(da, da, da, &g->self_attn, dc, c->ln1, c->ln1, c->ln1, &p->self_attn,
                         &c->attn) != 0)
        return -1;
    return cuda_layernorm_backward(dsrc, g->norm1_weight, g->norm1_bias, da, src,
                                   p->norm1_weight, c->mean1, c->rstd1, 1, rows, c->D);
}

static int gpu_encoder_forward(float *out, EncoderCache *c, const float *src,
                               const EncoderParams *p, const float *bias)
{
    int rows = c->N * c->S, n = rows * c->D;
    const float *x = src;
    for (int k = 0; k < c->num_layers; k++) {
        float *y = c->xs + (size_t)k * n;
        if (gpu_encoder_layer_forward(y, &c->layers[k], x, &p->layers[k], bias) != 0) return -1;
        x = y;
    }
    if (p->norm_weight)
        return cuda_layernorm_forward(out, c->mean, c->rstd, x, p->norm_weight, p->norm_bias, 1,
                                      rows, c->D, c->eps);
    return copy(out, x, n);
}

static int gpu_encoder_backward(float *dsrc, const EncoderParams *g, const float *dout,
                                const float *src, const EncoderParams *p, EncoderCache *c)
{
    int rows = c->N * c->S, n = rows * c->D, K = c->num_layers;
    float *dx = c->d_a, *dprev = c->d_b;
    if (p->norm_weight) {
        if (zero(dx, n) != 0 ||
            cuda_layernorm_backward(dx, g->norm_weight, g->norm_bias, dout,
                                    c->xs + (size_t)(K - 1) * n, p->norm_weight, c->mean,
                                    c->rstd, 1, rows, c->D) != 0)
            return -1;
    } else if (copy(dx, dout, n) != 0) {
        return -1;
    }
    for (int k = K - 1; k >= 1; k--) {
        if (zero(dprev, n) != 0 ||
            gpu_encoder_layer_backward(dprev, &g->layers[k], dx, c->xs + (size_t)(k - 1) * n,
                                       &p->layers[k], &c->layers[k]) != 0)
            return -1;
        float *t = dx;
        dx = dprev, dprev = t;
    }
    return gpu_encoder_layer_backward(dsrc, &g->layers[0], dx, src, &p->layers[0],
                                      &c->layers[0]);
}

/* ------------------------------------------------------------------------ */
/* The decoder layer and stack (chapter 06)                                  */
/* ------------------------------------------------------------------------ */

/* The stream before sub-layer k, and what sub-layer k reads (decoder_layer.c). */
static const float *stream_before(const DecoderLayerCache *c, int k, const float *tgt)
{
    if (k == 0) return tgt;
    return c->norm_first ? c->norm_in[k] : c->norm_out[k - 1];
}

static const float *sublayer_input(const DecoderLayerCache *c, int k, const float *tgt)
{
    return c->norm_first ? c->norm_out[k] : stream_before(c, k, tgt);
}

static int gpu_decoder_layer_forward(float *out, DecoderLayerCache *c, const float *tgt,
                                     const float *memory, const DecoderLayerParams *p,
                                     const DecoderMasks *m)
{
    int N = c->N, T = c->T, D = c->D, F = c->F, R = N * T, n = N * T * D;
    float pdrop = c->dropout;
    c->sa.drop = c->masks_drawn ? c->sa_mask : NULL;
    c->ca.drop = c->masks_drawn ? c->ca_mask : NULL;
    c->sa.dropout_p = c->ca.dropout_p = c->masks_drawn ? pdrop : 0.0f;
    for (int k = 0; k < 3; k++) {
        const float *x = stream_before(c, k, tgt);
        if (c->norm_first) {
            if (copy(c->norm_in[k], x, n) != 0 ||
                cuda_layernorm_forward(c->norm_out[k], c->mean[k], c->rstd[k], x,
                                       p->norm_weight[k], p->norm_bias[k], 1, R, D,
                                       c->eps) != 0)
                return -1;
        }
        const float *in = sublayer_input(c, k, tgt);
        int rc;
        if (k == 0)
            rc = gpu_mha_forward(c->tmp, &c->sa, in, in, in, &p->self_attn, m->sa_bias,
                                 m->sa_causal);
        else if (k == 1)
            rc = gpu_mha_forward(c->tmp, &c->ca, in, memory, memory, &p->multihead_attn,
                                 m->ca_bias, 0);
        else
            rc = cuda_ffn_forward(c->tmp, c->pre, c->hidden, in, p->linear1_weight,
                                  p->linear1_bias, p->linear2_weight, p->linear2_bias,
                                  c->masks_drawn ? c->ffn_mask : NULL, pdrop, N, T, D, F);
        if (rc != 0) return -1;
        if (cuda_dropout_forward(c->tmp, c->tmp, c->masks_drawn ? c->mask[k] : NULL, n,
                                 pdrop) != 0)
            return -1;
        if (c->norm_first) {
            float *next = k < 2 ? c->norm_in[k + 1] : out;
            if (cuda_residual_forward(next, x, c->tmp, n) != 0) return -1;
        } else {
            if (cuda_residual_forward(c->norm_in[k], x, c->tmp, n) != 0 ||
                cuda_layernorm_forward(k < 2 ? c->norm_out[k] : out, c->mean[k], c->rstd[k],
                                       c->norm_in[k], p->norm_weight[k], p->norm_bias[k], 1, R,
                                       D, c->eps) != 0)
                return -1;
        }
    }
    return 0;
}

static int gpu_decoder_layer_backward(float *dtgt, float *dmemory, const DecoderLayerParams *g,
                                      const float *dout, const float *tgt, const float *memory,
                                      const DecoderLayerParams *p, DecoderLayerCache *c)
{
    int N = c->N, T = c->T, D = c->D, F = c->F, R = N * T, n = N * T * D;
    float pdrop = c->dropout;
    if (copy(c->dx, dout, n) != 0) return -1;
    for (int k = 2; k >= 0; k--) {
        const uint8_t *mask = c->masks_drawn ? c->mask[k] : NULL;
        if (!c->norm_first) {
            if (zero(c->dnorm, n) != 0 ||
                cuda_layernorm_backward(c->dnorm, g->norm_weight[k], g->norm_bias[k], c->dx,
                                        c->norm_in[k], p->norm_weight[k], c->mean[k],
                                        c->rstd[k], 1, R, D) != 0 ||
                copy(c->dx, c->dnorm, n) != 0 ||
                gpu_dropout_backward(c->dsub, c->dnorm, mask, n, pdrop) != 0)
                return -1;
        } else if (gpu_dropout_backward(c->dsub, c->dx, mask, n, pdrop) != 0) {
            return -1;
        }
        const float *in = sublayer_input(c, k, tgt);
        float *din = c->norm_first ? c->dnorm : c->dx;
        if (c->norm_first && zero(c->dnorm, n) != 0) return -1;
        int rc;
        if (k == 0)
            rc = gpu_mha_backward(din, din, din, &g->self_attn, c->dsub, in, in, in,
                                  &p->self_attn, &c->sa);
        else if (k == 1)
            rc = gpu_mha_backward(din, dmemory, dmemory, &g->multihead_attn, c->dsub, in, memory,
                                  memory, &p->multihead_attn, &c->ca);
        else
            rc = cuda_ffn_backward(din, g->linear1_weight, g->linear1_bias, g->linear2_weight,
                                   g->linear2_bias, c->dhidden, c->dsub, in, c->pre, c->hidden,
                                   p->linear1_weight, p->linear2_weight,
                                   c->masks_drawn ? c->ffn_mask : NULL, pdrop, N, T, D, F);
        if (rc != 0) return -1;
        if (c->norm_first &&
            cuda_layernorm_backward(c->dx, g->norm_weight[k], g->norm_bias[k], c->dnorm,
                                    c->norm_in[k], p->norm_weight[k], c->mean[k], c->rstd[k], 1,
                                    R, D) != 0)
            return -1;
    }
    return dtgt ? cuda_add_into(dtgt, c->dx, n) : 0;
}

static int gpu_decoder_forward(float *out, DecoderCache *c, const float *tgt,
                               const float *memory, const DecoderParams *p,
                               const DecoderMasks *masks)
{
    int R = c->N * c->T, D = c->D;
    size_t nd = (size_t)R * D;
    if (copy(c->xs, tgt, nd) != 0) return -1;
    for (int l = 0; l < c->num_layers; l++)
        if (gpu_decoder_layer_forward(c->xs + (l + 1) * nd, &c->layers[l], c->xs + l * nd, memory,
                                      &p->layers[l], masks) != 0)
            return -1;
    const float *last = c->xs + c->num_layers * nd;
    if (!p->norm_weight) return copy(out, last, nd);
    return cuda_layernorm_forward(out, c->mean, c->rstd, last, p->norm_weight, p->norm_bias, 1,
                                  R, D, c->eps);
}

static int gpu_decoder_backward(float *dtgt, float *dmemory, const DecoderParams *g,
                                const float *dout, const float *tgt, const float *memory,
                                const DecoderParams *p, DecoderCache *c)
{
    int R = c->N * c->T, D = c->D;
    size_t nd = (size_t)R * D;
    float *d = c->d_a, *dprev = c->d_b;
    if (p->norm_weight) {
        if (zero(d, nd) != 0 ||
            cuda_layernorm_backward(d, g->norm_weight, g->norm_bias, dout,
                                    c->xs + c->num_layers * nd, p->norm_weight, c->mean, c->rstd,
                                    1, R, D) != 0)
            return -1;
    } else if (copy(d, dout, nd) != 0) {
        return -1;
    }
    for (int l = c->num_layers - 1; l >= 0; l--) {
        if (zero(dprev, nd) != 0 ||
            gpu_decoder_layer_backward(dprev, dmemory, &g->layers[l], d, c->xs + l * nd, memory,
                                       &p->layers[l], &c->layers[l]) != 0)
            return -1;
        float *t = d;
        d = dprev, dprev = t;
    }
    return dtgt ? cuda_add_into(dtgt, d, nd) : 0;
}

/* ------------------------------------------------------------------------ */
/* The model's own pieces (chapter 07)                                       */
/* ------------------------------------------------------------------------ */

/* x = emb * scale + pos[t], rounded after the product and after the sum as
 * the C code rounds (no fused multiply-add). */
__global__ void front_kernel(float *x, const float *emb, const float *pos, float scale,
                             long long n, int len, int D)
{
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n) return;
    long long t = (idx / D) % len;
    x[idx] = __fadd_rn(__fmul_rn(emb[idx], scale), pos[t * D + idx % D]);
}

/* d_scale[0] += sum_i dx[i] * emb[i], in double: one block of 1024 threads,
 * each adding a strided share, then the block's tree. */
__global__ void scale_grad_kernel(float *d_scale, const float *dx, const float *emb, long long n)
{
    __shared__ double partial[1024];
    double sum = 0.0;
    for (long long i = threadIdx.x; i < n; i += blockDim.x) sum += (double)dx[i] * emb[i];
    partial[threadIdx.x] = sum;
    __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
        if ((int)threadIdx.x < half) partial[threadIdx.x] += partial[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) d_scale[0] += (float)partial[0];
}

/* bias[n, h, i, s] = -inf where key s of sequence n is padding, else 0. */
__global__ void padding_bias_kernel(float *bias, const int64_t *key_ids, int64_t pad_id, int N,
                                    int HL, int S)
{
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long long)N * HL * S) return;
    long long n = idx / ((long long)HL * S);
    int s = (int)(idx % S);
    bias[idx] = key_ids[n * S + s] == pad_id ? -INFINITY : 0.0f;
}

/* One thread per (n, d): the mean over the non-padding positions, in the C
 * loop's order. */
__global__ void mean_pool_kernel(float *pooled, float *count, const float *memory,
                                 const int64_t *ids, int64_t pad_id, int N, int S, int D)
{
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= N * D) return;
    int n = idx / D, d = idx % D, c = 0;
    float p = 0.0f;
    for (int s = 0; s < S; s++) {
        if (pad_id >= 0 && ids[(size_t)n * S + s] == pad_id) continue;
        p += memory[((size_t)n * S + s) * D + d];
        c++;
    }
    pooled[idx] = c > 0 ? p / (float)c : 0.0f;
    if (d == 0) count[n] = (float)c;
}

/* d_memory[n, s, :] = d_pooled[n, :] / count[n] at the positions averaged,
 * 0 elsewhere. */
__global__ void mean_pool_backward_kernel(float *d_memory, const float *d_pooled,
                                          const float *count, const int64_t *ids, int64_t pad_id,
                                          int N, int S, int D)
{
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long long)N * S * D) return;
    long long ns = idx / D;
    int n = (int)(ns / S), d = (int)(idx % D);
    int skip = count[n] == 0.0f || (pad_id >= 0 && ids[ns] == pad_id);
    d_memory[idx] = skip ? 0.0f : d_pooled[(size_t)n * D + d] / count[n];
}

typedef struct {
    const float *embed, *pos;
    float *d_embed, *d_pos;
    const float *scale;             /* the learned scale (device), or NULL */
    float *d_scale;
} Side;

static Side side_of(const GpuModel *g, int target)
{
    const ModelParams *p = &g->views, *dp = &g->grad_views;
    int tied = target && g->host->cfg.share_embeddings;   /* the target reads src_embed */
    int learned = g->host->cfg.learned_pos;
    Side s;
    s.embed = target && !tied ? p->tgt_embed : p->src_embed;
    s.d_embed = target && !tied ? dp->tgt_embed : dp->src_embed;
    s.scale = target ? p->tgt_scale : p->src_scale;
    s.d_scale = target ? dp->tgt_scale : dp->src_scale;
    s.pos = !learned ? g->pos_table : target ? p->tgt_pos : p->src_pos;
    s.d_pos = !learned ? NULL : target ? dp->tgt_pos : dp->src_pos;
    return s;
}

/* The embedding scale: 1, sqrt(D), or the learned one, copied down (one
 * float: the kernels take it by value). */
static int scale_of(const GpuModel *g, const Side *s, float *scale)
{
    switch (g->host->cfg.scale_embedding) {
    case 1: *scale = sqrtf((float)g->host->cfg.d_model); return 0;
    case 2: return cuda_ok(cudaMemcpy(scale, s->scale, sizeof *scale, cudaMemcpyDeviceToHost),
                           "copying the embedding scale");
    }
    *scale = 1.0f;
    return 0;
}

static int front_forward(const GpuModel *g, const Side *s, float *x, float *emb,
                         const uint8_t *drop, const int64_t *ids, int N, int len)
{
    int D = g->host->cfg.d_model;
    long long n = (long long)N * len * D;
    float scale;
    if (n == 0) return 0;
    if (scale_of(g, s, &scale) != 0 ||
        cuda_embedding_forward(emb, ids, s->embed, N, len, D, 1.0f) != 0)
        return -1;
    front_kernel<<<blocks_for(n, 256), 256>>>(x, emb, s->pos, scale, n, len, D);
    if (LAUNCH_CHECK(front_kernel) != 0) return -1;
    return cuda_dropout_forward(x, x, drop, (int)n, g->host->cfg.dropout);
}

static int front_backward(const GpuModel *g, const Side *s, float *dx, const float *emb,
                          const uint8_t *drop, const int64_t *ids, int N, int len)
{
    const ModelConfig *c = &g->host->cfg;
    int D = c->d_model;
    long long n = (long long)N * len * D;
    float scale;
    if (n == 0) return 0;
    if (drop && gpu_dropout_backward(dx, dx, drop, (int)n, c->dropout) != 0) return -1;
    if (s->d_pos && cuda_positional_backward(NULL, s->d_pos, dx, N, len, D) != 0) return -1;
    if (c->scale_embedding == 2) {
        scale_grad_kernel<<<1, 1024>>>(s->d_scale, dx, emb, n);
        if (LAUNCH_CHECK(scale_grad_kernel) != 0) return -1;
    }
    if (scale_of(g, s, &scale) != 0) return -1;
    int64_t pad = c->pad_id >= 0 ? c->pad_id : EMBEDDING_NO_PADDING;
    return cuda_embedding_backward(s->d_embed, dx, ids, N, len, D, scale, pad);
}

/* *out = bias filled from the padding keys, or NULL when no key of the
 * batch is padding; any_padding is decided on the host ids. */
static int padding_bias(const float **out, float *bias, const int64_t *key_ids_dev,
                        const int64_t *key_ids_host, int pad_id, int N, int H, int L, int S)
{
    int any = 0;
    *out = NULL;
    if (!bias || pad_id < 0) return 0;
    for (int64_t i = 0; i < (int64_t)N * S; i++) any |= key_ids_host[i] == pad_id;
    if (!any) return 0;
    long long n = (long long)N * H * L * S;
    padding_bias_kernel<<<blocks_for(n, 256), 256>>>(bias, key_ids_dev, pad_id, N, H * L, S);
    if (LAUNCH_CHECK(padding_bias_kernel) != 0) return -1;
    *out = bias;
    return 0;
}

/* One mask of n values, drawn into its device buffer. */
static int draw_mask(uint8_t *mask, size_t n, float p, Rng *rng)
{
    return cuda_dropout_mask(mask, (int)n, p, rng);
}

/* Every dropout mask of one training forward, in the order model_forward
 * draws them on the CPU: the source front end, each encoder layer's four
 * (dropout1, the FFN's, dropout2, the attention weights'), the target front
 * end, each decoder layer's six (dropout1, dropout2, the FFN's, dropout3,
 * the self-attention weights', the cross-attention weights'). */
static int draw_masks(GpuWork *gw, const ModelConfig *c, Rng *rng)
{
    ModelWork *w = &gw->w;
    int N = w->N, S = w->S, T = w->T;
    size_t nsd = (size_t)N * S * c->d_model, nsf = (size_t)N * S * c->dim_feedforward;
    size_t ntd = (size_t)N * T * c->d_model, ntf = (size_t)N * T * c->dim_feedforward;
    size_t nss = (size_t)N * c->nhead * S * S, ntt = (size_t)N * c->nhead * T * T;
    size_t nts = (size_t)N * c->nhead * T * S;
    float p = c->dropout;
    int drawn = rng != NULL && p > 0.0f;
    w->dropped = drawn;
    for (int k = 0; k < w->enc.num_layers; k++) w->enc.layers[k].masks_drawn = drawn;
    for (int l = 0; l < w->dec.num_layers; l++) w->dec.layers[l].masks_drawn = drawn;
    if (!drawn) return 0;
    if (draw_mask(w->src_drop, nsd, p, rng) != 0) return -1;
    for (int k = 0; k < w->enc.num_layers; k++) {
        EncoderLayerCache *e = &w->enc.layers[k];
        if (draw_mask(e->mask1, nsd, p, rng) != 0 ||
            draw_mask(e->mask_ffn, nsf, p, rng) != 0 ||
            draw_mask(e->mask2, nsd, p, rng) != 0 ||
            draw_mask(e->mask_attn, nss, p, rng) != 0)
            return -1;
    }
    if (c->kind != MODEL_SEQ2SEQ) return 0;
    if (draw_mask(w->tgt_drop, ntd, p, rng) != 0) return -1;
    for (int l = 0; l < w->dec.num_layers; l++) {
        DecoderLayerCache *d = &w->dec.layers[l];
        if (draw_mask(d->mask[0], ntd, p, rng) != 0 ||
            draw_mask(d->mask[1], ntd, p, rng) != 0 ||
            draw_mask(d->ffn_mask, ntf, p, rng) != 0 ||
            draw_mask(d->mask[2], ntd, p, rng) != 0 ||
            draw_mask(d->sa_mask, ntt, p, rng) != 0 ||
            draw_mask(d->ca_mask, nts, p, rng) != 0)
            return -1;
    }
    return 0;
}

extern "C" int gpu_model_forward(GpuModel *g, GpuWork *gw, const int64_t *src,
                                 const int64_t *tgt, Rng *rng, Error *err)
{
    const ModelConfig *c = &g->host->cfg;
    ModelWork *w = &gw->w;
    const ModelParams *p = &g->views;
    int N = w->N, S = w->S, T = w->T, D = c->d_model, H = c->nhead;
    Side src_side = side_of(g, 0), tgt_side = side_of(g, 1);
    const float *enc_bias, *dec_bias = NULL, *cross_bias = NULL;

    if (cuda_ok(cudaMemcpy(gw->src_ids, src, (size_t)N * S * sizeof *src,
                           cudaMemcpyHostToDevice), "copying the source ids") != 0 ||
        (c->kind == MODEL_SEQ2SEQ &&
         cuda_ok(cudaMemcpy(gw->tgt_ids, tgt, (size_t)N * T * sizeof *tgt,
                            cudaMemcpyHostToDevice), "copying the target ids") != 0))
        return error_set(err, "model forward on the GPU: copying the ids failed");
    if (draw_masks(gw, c, rng) != 0)
        return error_set(err, "model forward on the GPU: drawing the dropout masks failed");
    const uint8_t *src_drop = w->dropped ? w->src_drop : NULL;
    const uint8_t *tgt_drop = w->dropped ? w->tgt_drop : NULL;

    if (front_forward(g, &src_side, w->src_x, w->src_emb, src_drop, gw->src_ids, N, S) != 0 ||
        padding_bias(&enc_bias, w->enc_bias, gw->src_ids, src, c->pad_id, N, H, S, S) != 0 ||
        gpu_encoder_forward(w->memory, &w->enc, w->src_x, &p->encoder, enc_bias) != 0)
        return error_set(err, "model forward on the GPU: the encoder failed");

    const float *top = w->memory;
    if (c->kind == MODEL_CLASSIFIER) {
        mean_pool_kernel<<<blocks_for((long long)N * D, 256), 256>>>(
            w->pooled, w->pool_count, w->memory, gw->src_ids, c->pad_id, N, S, D);
        if (LAUNCH_CHECK(mean_pool_kernel) != 0)
            return error_set(err, "model forward on the GPU: pooling failed");
        top = w->pooled;
    } else if (c->kind == MODEL_SEQ2SEQ) {
        if (front_forward(g, &tgt_side, w->tgt_x, w->tgt_emb, tgt_drop, gw->tgt_ids, N, T) != 0 ||
            padding_bias(&dec_bias, w->dec_bias, gw->tgt_ids, tgt, c->pad_id, N, H, T, T) != 0 ||
            padding_bias(&cross_bias, w->cross_bias, gw->src_ids, src, c->pad_id, N, H, T,
                         S) != 0)
            return error_set(err, "model forward on the GPU: the decoder failed");
        DecoderMasks masks = {dec_bias, 1, cross_bias};
        if (gpu_decoder_forward(w->dec_out, &w->dec, w->tgt_x, w->memory, &p->decoder,
                                &masks) != 0)
            return error_set(err, "model forward on the GPU: the decoder failed");
        top = w->dec_out;
    }
    if (cuda_linear_forward(w->logits, top, p->generator_weight, p->generator_bias,
                            (int)w->rows, D, c->tgt_vocab) != 0)
        return error_set(err, "model forward on the GPU: the generator failed");
    return 0;
}

extern "C" int gpu_model_backward(GpuModel *g, GpuWork *gw, const float *dlogits, Error *err)
{
    const ModelConfig *c = &g->host->cfg;
    ModelWork *w = &gw->w;
    const ModelParams *p = &g->views, *dp = &g->grad_views;
    int N = w->N, S = w->S, T = w->T, D = c->d_model;
    size_t nsd = (size_t)N * S * D;
    if (!w->backward) return error_set(err, "model backward on the GPU: work without gradients");
    const float *top = c->kind == MODEL_SEQ2SEQ ? w->dec_out
                     : c->kind == MODEL_CLASSIFIER ? w->pooled : w->memory;
    if (zero(w->d_top, (size_t)w->rows * D) != 0 ||
        cuda_linear_backward(w->d_top, dp->generator_weight, dp->generator_bias, dlogits, top,
                             p->generator_weight, (int)w->rows, D, c->tgt_vocab) != 0)
        return error_set(err, "model backward on the GPU: the generator failed");

    if (c->kind == MODEL_LABELLER || c->kind == MODEL_LM) {
        if (copy(w->d_memory, w->d_top, nsd) != 0) return error_set(err, "model backward failed");
    } else if (c->kind == MODEL_CLASSIFIER) {
        mean_pool_backward_kernel<<<blocks_for((long long)nsd, 256), 256>>>(
            w->d_memory, w->d_top, w->pool_count, gw->src_ids, c->pad_id, N, S, D);
        if (LAUNCH_CHECK(mean_pool_backward_kernel) != 0)
            return error_set(err, "model backward on the GPU: pooling failed");
    } else {
        Side tgt_side = side_of(g, 1);
        if (zero(w->d_memory, nsd) != 0 || zero(w->d_tgt, (size_t)N * T * D) != 0 ||
            gpu_decoder_backward(w->d_tgt, w->d_memory, &dp->decoder, w->d_top, w->tgt_x,
                                 w->memory, &p->decoder, &w->dec) != 0 ||
            front_backward(g, &tgt_side, w->d_tgt, w->tgt_emb, w->dropped ? w->tgt_drop : NULL,
                           gw->tgt_ids, N, T) != 0)
            return error_set(err, "model backward on the GPU: the decoder failed");
    }

    Side src_side = side_of(g, 0);
    if (zero(w->d_src, nsd) != 0 ||
        gpu_encoder_backward(w->d_src, &dp->encoder, w->d_memory, w->src_x, &p->encoder,
                             &w->enc) != 0 ||
        front_backward(g, &src_side, w->d_src, w->src_emb, w->dropped ? w->src_drop : NULL,
                       gw->src_ids, N, S) != 0)
        return error_set(err, "model backward on the GPU: the encoder failed");
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The model on the device                                                   */
/* ------------------------------------------------------------------------ */

static CudaBlas *shared_blas = NULL;   /* one cuBLAS handle for the process */

extern "C" int gpu_model_create(GpuModel *g, const Model *m, Error *err)
{
    const ModelConfig *c = &m->cfg;
    size_t bytes = m->num_params * sizeof(float);
    memset(g, 0, sizeof *g);
    g->host = m;
    if (!shared_blas && !(shared_blas = cuda_blas_create()))
        return error_set(err, "GPU: cannot create a cuBLAS handle");
    cuda_matmul_set_engine(shared_blas);
    if (cuda_ok(cudaMalloc(&g->params, bytes), "cudaMalloc") != 0 ||
        cuda_ok(cudaMalloc(&g->grads, bytes), "cudaMalloc") != 0 ||
        cuda_ok(cudaMemcpy(g->params, m->params, bytes, cudaMemcpyHostToDevice), "cudaMemcpy") ||
        cuda_ok(cudaMemset(g->grads, 0, bytes), "cudaMemset") != 0)
        goto fail;
    g->bytes = 2 * bytes;
    if (m->pos_table) {
        size_t table = (size_t)c->max_len * c->d_model * sizeof(float);
        g->bytes += table;
        if (cuda_ok(cudaMalloc(&g->pos_table, table), "cudaMalloc") != 0 ||
            cuda_ok(cudaMemcpy(g->pos_table, m->pos_table, table, cudaMemcpyHostToDevice),
                    "cudaMemcpy") != 0)
            goto fail;
    }
    /* The model's table, pointed at the device arrays. */
    if (model_views(m, &g->views, &g->grad_views, g->params, g->grads, err) != 0) goto fail;
    return 0;
fail:
    gpu_model_free(g);
    return error_set(err, "GPU: cannot hold a model of %zu parameters", m->num_params);
}

extern "C" void gpu_model_free(GpuModel *g)
{
    cudaFree(g->params);
    cudaFree(g->grads);
    cudaFree(g->pos_table);
    model_views_free(&g->views);
    model_views_free(&g->grad_views);
    memset(g, 0, sizeof *g);
}

extern "C" int gpu_model_download(const GpuModel *g, Model *m, int grads, Error *err)
{
    size_t bytes = m->num_params * sizeof(float);
    if (cuda_ok(cudaMemcpy(m->params, g->params, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy") ||
        (grads &&
         cuda_ok(cudaMemcpy(m->grads, g->grads, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy")))
        return error_set(err, "GPU: copying the model back failed");
    return 0;
}

extern "C" int gpu_model_zero_grad(GpuModel *g, Error *err)
{
    if (zero(g->grads, g->host->num_params) != 0)
        return error_set(err, "GPU: zeroing the gradients failed");
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The work: every buffer of model_work_alloc, in one allocation             */
/* ------------------------------------------------------------------------ */

/* Hands out pieces of one block, 256-byte aligned. With base NULL it only
 * adds up the sizes (and hands out NULL). */
typedef struct {
    char *base;
    size_t used;
} Arena;

template <typename T>
static T *take(Arena *a, size_t n)
{
    size_t at = (a->used + 255) & ~(size_t)255;
    a->used = at + n * sizeof(T);
    return a->base ? (T *)(a->base + at) : NULL;
}

static void layout_mha(Arena *a, MhaCache *c, int N, int L, int S, int D, int H, int backward)
{
    size_t nl = (size_t)N * L * D, ns = (size_t)N * S * D, att = (size_t)N * H * L * S;
    memset(c, 0, sizeof *c);
    c->N = N, c->L = L, c->S = S, c->D = D, c->H = H, c->Dh = D / H, c->Ek = D, c->Ev = D;
    c->q = take<float>(a, nl), c->k = take<float>(a, ns), c->v = take<float>(a, ns);
    c->qh = take<float>(a, nl), c->kh = take<float>(a, ns), c->vh = take<float>(a, ns);
    c->scores = take<float>(a, att), c->att = take<float>(a, att);
    c->oh = take<float>(a, nl), c->o = take<float>(a, nl);
    if (!backward) return;
    c->d_o = take<float>(a, nl), c->doh = take<float>(a, nl), c->dqh = take<float>(a, nl);
    c->dkh = take<float>(a, ns), c->dvh = take<float>(a, ns);
    c->datt = take<float>(a, att), c->dscores = take<float>(a, att);
    c->dq = take<float>(a, nl), c->dk = take<float>(a, ns), c->dv = take<float>(a, ns);
}

static void layout_encoder_layer(Arena *a, EncoderLayerCache *c, const ModelConfig *m, int N,
                                 int S, int backward)
{
    int D = m->d_model, F = m->dim_feedforward;
    size_t nsd = (size_t)N * S * D, nsf = (size_t)N * S * F, ns = (size_t)N * S;
    memset(c, 0, sizeof *c);
    c->N = N, c->S = S, c->D = D, c->H = m->nhead, c->F = F, c->norm_first = m->norm_first;
    c->causal = m->kind == MODEL_LM;
    c->eps = m->eps, c->dropout = m->dropout;
    layout_mha(a, &c->attn, N, S, S, D, m->nhead, backward);
    c->ln1 = take<float>(a, nsd), c->mean1 = take<float>(a, ns), c->rstd1 = take<float>(a, ns);
    c->attn_out = take<float>(a, nsd), c->res1 = take<float>(a, nsd);
    c->ln2 = take<float>(a, nsd), c->mean2 = take<float>(a, ns), c->rstd2 = take<float>(a, ns);
    c->ffn_pre = take<float>(a, nsf), c->ffn_hidden = take<float>(a, nsf);
    c->ffn_out = take<float>(a, nsd), c->res2 = take<float>(a, nsd);
    if (m->dropout > 0) {
        c->mask1 = take<uint8_t>(a, nsd), c->mask_ffn = take<uint8_t>(a, nsf);
        c->mask2 = take<uint8_t>(a, nsd);
        c->mask_attn = take<uint8_t>(a, (size_t)N * c->H * S * S);
    }
    if (!backward) return;
    c->d_a = take<float>(a, nsd), c->d_b = take<float>(a, nsd), c->d_c = take<float>(a, nsd);
    c->d_hidden = take<float>(a, nsf);
}

static void layout_decoder_layer(Arena *a, DecoderLayerCache *c, const ModelConfig *m, int N,
                                 int T, int S, int backward)
{
    int D = m->d_model, F = m->dim_feedforward;
    size_t ntd = (size_t)N * T * D, ntf = (size_t)N * T * F, nt = (size_t)N * T;
    memset(c, 0, sizeof *c);
    c->N = N, c->T = T, c->S = S, c->D = D, c->H = m->nhead, c->F = F;
    c->norm_first = m->norm_first, c->eps = m->eps, c->dropout = m->dropout;
    layout_mha(a, &c->sa, N, T, T, D, m->nhead, backward);
    layout_mha(a, &c->ca, N, T, S, D, m->nhead, backward);
    for (int k = 0; k < 3; k++) {
        c->norm_in[k] = take<float>(a, ntd), c->norm_out[k] = take<float>(a, ntd);
        c->mean[k] = take<float>(a, nt), c->rstd[k] = take<float>(a, nt);
    }
    c->pre = take<float>(a, ntf), c->hidden = take<float>(a, ntf), c->tmp = take<float>(a, ntd);
    if (m->dropout > 0) {
        for (int k = 0; k < 3; k++) c->mask[k] = take<uint8_t>(a, ntd);
        c->ffn_mask = take<uint8_t>(a, ntf);
        c->sa_mask = take<uint8_t>(a, (size_t)N * c->H * T * T);
        c->ca_mask = take<uint8_t>(a, (size_t)N * c->H * T * S);
    }
    if (!backward) return;
    c->dx = take<float>(a, ntd), c->dsub = take<float>(a, ntd), c->dnorm = take<float>(a, ntd);
    c->dhidden = take<float>(a, ntf);
}

/* Assigns every pointer of gw (the layer arrays are already allocated). */
static void layout_work(Arena *a, GpuWork *gw, const ModelConfig *c, int N, int S, int T,
                        int backward)
{
    ModelWork *w = &gw->w;
    int D = c->d_model, H = c->nhead, seq2seq = c->kind == MODEL_SEQ2SEQ;
    int padding = c->pad_id >= 0;
    size_t nsd = (size_t)N * S * D, ntd = (size_t)N * T * D;
    w->logits = take<float>(a, (size_t)w->rows * c->tgt_vocab);
    w->src_emb = take<float>(a, nsd), w->src_x = take<float>(a, nsd);
    gw->src_ids = take<int64_t>(a, (size_t)N * S);
    if (c->dropout > 0) w->src_drop = take<uint8_t>(a, nsd);
    if (padding) w->enc_bias = take<float>(a, (size_t)N * H * S * S);
    w->memory = take<float>(a, nsd);
    EncoderCache *e = &w->enc;
    e->N = N, e->S = S, e->D = D, e->eps = c->eps;
    for (int k = 0; k < e->num_layers; k++)
        layout_encoder_layer(a, &e->layers[k], c, N, S, backward);
    e->xs = take<float>(a, nsd * e->num_layers);
    e->mean = take<float>(a, (size_t)N * S), e->rstd = take<float>(a, (size_t)N * S);
    if (backward) e->d_a = take<float>(a, nsd), e->d_b = take<float>(a, nsd);
    if (c->kind == MODEL_CLASSIFIER) {
        w->pooled = take<float>(a, (size_t)N * D);
        w->pool_count = take<float>(a, (size_t)N);
    }
    if (seq2seq) {
        DecoderCache *s = &w->dec;
        w->tgt_emb = take<float>(a, ntd), w->tgt_x = take<float>(a, ntd);
        gw->tgt_ids = take<int64_t>(a, (size_t)N * T);
        if (c->dropout > 0) w->tgt_drop = take<uint8_t>(a, ntd);
        if (padding) {
            w->dec_bias = take<float>(a, (size_t)N * H * T * T);
            w->cross_bias = take<float>(a, (size_t)N * H * T * S);
        }
        w->dec_out = take<float>(a, ntd);
        s->N = N, s->T = T, s->D = D, s->eps = c->eps;
        for (int l = 0; l < s->num_layers; l++)
            layout_decoder_layer(a, &s->layers[l], c, N, T, S, backward);
        s->xs = take<float>(a, ntd * (s->num_layers + 1));
        s->mean = take<float>(a, (size_t)N * T), s->rstd = take<float>(a, (size_t)N * T);
        if (backward) s->d_a = take<float>(a, ntd), s->d_b = take<float>(a, ntd);
    }
    if (backward) {
        w->d_top = take<float>(a, (size_t)w->rows * D);
        w->d_memory = take<float>(a, nsd), w->d_src = take<float>(a, nsd);
        if (seq2seq) w->d_tgt = take<float>(a, ntd);
    }
}

extern "C" int gpu_work_alloc(GpuWork *gw, const GpuModel *g, int N, int S, int T, int backward,
                              Error *err)
{
    const ModelConfig *c = &g->host->cfg;
    ModelWork *w = &gw->w;
    int seq2seq = c->kind == MODEL_SEQ2SEQ;
    memset(gw, 0, sizeof *gw);
    if (N < 1 || S < 1 || S > c->max_len || (seq2seq && (T < 1 || T > c->max_len)))
        return error_set(err, "GPU work: a batch of %d x %d (target %d) does not fit max_len %d",
                         N, S, T, c->max_len);
    w->N = N, w->S = S, w->T = seq2seq ? T : 0, w->backward = backward;
    w->rows = seq2seq ? (int64_t)N * T
            : c->kind == MODEL_LABELLER || c->kind == MODEL_LM ? (int64_t)N * S : N;
    w->enc.num_layers = c->num_encoder_layers;
    w->enc.layers = (EncoderLayerCache *)calloc((size_t)w->enc.num_layers,
                                                sizeof *w->enc.layers);
    w->dec.num_layers = seq2seq ? c->num_decoder_layers : 0;
    w->dec.layers = (DecoderLayerCache *)calloc(
        (size_t)(w->dec.num_layers > 0 ? w->dec.num_layers : 1), sizeof *w->dec.layers);
    if (!w->enc.layers || !w->dec.layers) {
        gpu_work_free(gw);
        return error_set(err, "GPU work: out of host memory");
    }
    Arena count = {NULL, 0};
    layout_work(&count, gw, c, N, S, w->T, backward);
    if (cuda_ok(cudaMalloc(&gw->block, count.used), "cudaMalloc") != 0) {
        size_t bytes = count.used;
        gpu_work_free(gw);
        return error_set(err, "GPU work: cannot allocate %zu MB for a batch of %d x %d",
                         bytes >> 20, N, S);
    }
    gw->bytes = count.used;
    Arena real = {(char *)gw->block, 0};
    layout_work(&real, gw, c, N, S, w->T, backward);
    return 0;
}

extern "C" void gpu_work_free(GpuWork *gw)
{
    cudaFree(gw->block);
    free(gw->w.enc.layers);
    free(gw->w.dec.layers);
    memset(gw, 0, sizeof *gw);
}
