/*
 * sdpa.cu - scaled dot-product attention on the GPU, two ways.
 *
 * Mirrors chapters/02_sdpa/sdpa.c: sdpa_forward() and sdpa_backward(), same
 * shapes and rules (the additive bias from sdpa_mask_bias(), is_causal top-
 * left aligned, fully masked rows give zeros, the backward adds) and
 * letters (N every leading dimension flattened, L queries, S keys, E and Ev
 * the query/key and value features).
 *
 *     scores = Q K^T * scale + mask        (N, L, S)
 *     att    = softmax(scores)             (N, L, S)
 *     out    = att V                       (N, L, Ev)
 *
 * and in training, dropout on the weights with a given keep mask (N, L, S):
 * out = (att * keep / (1 - p)) V, att still the softmax before dropout.
 *
 * 1. The plain version does exactly what sdpa.c does, one step per kernel:
 *    a batched matmul for Q K^T (matmul.cu), a small kernel for the scale
 *    and the masks, the softmax (softmax.cu), a batched matmul for att V.
 *    It writes the (N, L, S) scores and weights to memory and reads them
 *    back: simple, and what the backward needs, but for long sequences that
 *    traffic is most of the time.
 *
 * 2. The flash-style forward fuses the three steps and never stores a
 *    (N, L, S) array. It walks over the keys in tiles of FLASH_KEYS, keeps
 *    the tile of K and V in shared memory for all the query rows of the
 *    block, and folds each tile into a running softmax (the online softmax
 *    of hostdev.h):
 *
 *        m   the largest score of the row so far
 *        l   sum of exp(s_j - m) over the keys so far
 *        o   sum of exp(s_j - m) v_j over the keys so far     (Ev,)
 *
 *    A new tile with scores s_j raises the max to m' = max(m, max_j s_j);
 *    the old sums were computed against m and are rescaled by exp(m - m'):
 *
 *        l' = l exp(m - m') + sum_j exp(s_j - m')
 *        o' = o exp(m - m') + sum_j exp(s_j - m') v_j
 *
 *    After the last tile, out = o / l: the same softmax-weighted average,
 *    computed in one pass. It also saves lse = m + log l per row, from
 *    which the weights can be rebuilt as exp(s - lse) (sdpa_weights_from_lse)
 *    for a backward pass.
 *
 *    Work split: a block of FLASH_ROWS warps takes FLASH_ROWS query rows,
 *    one warp per row. For the scores lane j of the warp takes key j of the
 *    tile (a dot product of length E); for the output lane e takes the
 *    features e, e + 32, ... of the row (so E, Ev <= CUDA_FLASH_MAX_D).
 *
 * The backward here is the plain one, from the stored weights; a fused
 * flash backward (recomputing the weights tile by tile from lse) is not
 * written yet. Nor is dropout in the flash forward: training uses the plain
 * version.
 *
 * Read next: layernorm.cu.
 */
#include "common.cuh"
#include "kernels.h"

/* ------------------------------------------------------------------------ */
/* The plain version                                                         */
/* ------------------------------------------------------------------------ */

/* scores (N, L, S) = scores * scale + bias, and -inf above the diagonal when
 * causal; one thread per entry. The order (scale, then bias) is sdpa.c's. */
__global__ void sdpa_scale_mask_kernel(float *scores, const float *bias, long long n, int L,
                                       int S, float scale, int is_causal)
{
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n) return;
    int j = (int)(idx % S), i = (int)((idx / S) % L);
    float s = scores[idx] * scale;
    if (bias) s += bias[idx];
    if (is_causal && j > i) s = -INFINITY;      /* query i sees keys 0..i */
    scores[idx] = s;
}

__global__ void scale_kernel(float *x, long long n, float scale)
{
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < n) x[idx] *= scale;
}

/* y = x * keep / (1 - p), n values (up = 1 / (1 - p)); y may be x. The
 * weights dropout keeps, and in the backward the gradient it passes. */
__global__ void sdpa_dropout_kernel(float *y, const float *x, const uint8_t *keep, long long n,
                                    float up)
{
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < n) y[idx] = keep[idx] ? x[idx] * up : 0.0f;
}

static int sdpa_dropout(float *y, const float *x, const uint8_t *keep, long long n, float p)
{
    sdpa_dropout_kernel<<<blocks_for(n, 256), 256>>>(y, x, keep, n, 1.0f / (1.0f - p));
    return LAUNCH_CHECK(sdpa_dropout_kernel);
}

extern "C" int cuda_sdpa_forward(float *out, float *scores, float *att, const float *q,
                                 const float *k, const float *v, const float *bias,
                                 const uint8_t *drop, float dropout_p, int N, int L, int S,
                                 int E, int Ev, float scale, int is_causal)
{
    long long n = (long long)N * L * S;
    if (n == 0) return 0;
    /* scores[b, i, j] = q_i . k_j */
    if (cuda_matmul_nt_batched(scores, q, k, N, L, S, E, 0) != 0) return -1;
    sdpa_scale_mask_kernel<<<blocks_for(n, 256), 256>>>(scores, bias, n, L, S, scale, is_causal);
    if (LAUNCH_CHECK(sdpa_scale_mask_kernel) != 0) return -1;
    /* each row a distribution over the keys; all -inf gives zeros */
    if (cuda_softmax_forward(att, scores, N * L, S) != 0) return -1;
    /* out_i = sum_j att[i, j] v_j, or with dropout the same over the kept
     * weights, made in scores (the softmax is done with it) */
    const float *used = att;
    if (drop) {
        if (sdpa_dropout(scores, att, drop, n, dropout_p) != 0) return -1;
        used = scores;
    }
    return cuda_matmul_nn_batched(out, used, v, N, L, Ev, S, 0);
}

extern "C" int cuda_sdpa_backward(float *dq, float *dk, float *dv, float *datt, float *dscores,
                                  const float *dout, const float *q, const float *k,
                                  const float *v, const float *att, const uint8_t *drop,
                                  float dropout_p, int N, int L, int S, int E, int Ev,
                                  float scale)
{
    long long n = (long long)N * L * S;
    if (n == 0) return 0;
    /* out = w V (w = att, or the kept weights, made again in dscores, which
     * is free until the softmax backward): dV += w^T dout, dw = dout V^T
     * (in datt) */
    const float *w = att;
    if (drop) {
        if (sdpa_dropout(dscores, att, drop, n, dropout_p) != 0) return -1;
        w = dscores;
    }
    if (cuda_matmul_tn_batched(dv, w, dout, N, S, Ev, L, 1) != 0) return -1;
    if (cuda_matmul_nt_batched(datt, dout, v, N, L, S, Ev, 0) != 0) return -1;
    /* dropout passes the gradient of the kept weights, scaled the same way */
    if (drop && sdpa_dropout(datt, datt, drop, n, dropout_p) != 0) return -1;
    /* through the softmax, row by row; masked entries (att = 0) get nothing */
    if (cuda_softmax_backward(dscores, att, datt, N * L, S) != 0) return -1;
    /* scores = scale * Q K^T + bias: from here on d(loss)/d(Q K^T) */
    scale_kernel<<<blocks_for(n, 256), 256>>>(dscores, n, scale);
    if (LAUNCH_CHECK(scale_kernel) != 0) return -1;
    /* dQ += dscores K, dK += dscores^T Q */
    if (cuda_matmul_nn_batched(dq, dscores, k, N, L, E, S, 1) != 0) return -1;
    return cuda_matmul_tn_batched(dk, dscores, q, N, S, E, L, 1);
}

/* ------------------------------------------------------------------------ */
/* The flash-style forward                                                   */
/* ------------------------------------------------------------------------ */

#define FLASH_ROWS 8       /* query rows per block, one warp each */
#define FLASH_KEYS 32      /* keys per tile: one per lane */
#define FLASH_PER_LANE (CUDA_FLASH_MAX_D / 32)   /* output features per lane */

/* The score of query row i (in shared memory) against key j (row jj of the
 * K tile), as sdpa.c computes it: the dot product in order, times scale,
 * plus the bias, -inf above the diagonal when causal. */
__device__ inline float flash_score(const float *qrow, const float *krow, int E, float scale,
                                    const float *bias_row, int i, int j, int is_causal)
{
    float dot = 0.0f;
    for (int e = 0; e < E; e++) dot += qrow[e] * krow[e];
    float s = dot * scale;
    if (bias_row) s += bias_row[j];
    if (is_causal && j > i) s = -INFINITY;
    return s;
}

/* grid (ceil(L / FLASH_ROWS), N), FLASH_ROWS * 32 threads. Dynamic shared
 * memory: the K tile (FLASH_KEYS, E + 1; the extra column spreads the rows
 * over the memory banks), the V tile (FLASH_KEYS, Ev), the query rows
 * (FLASH_ROWS, E) and each warp's probabilities (FLASH_ROWS, FLASH_KEYS). */
__global__ void sdpa_flash_forward_kernel(float *out, float *lse, const float *q, const float *k,
                                          const float *v, const float *bias, int L, int S,
                                          int E, int Ev, float scale, int is_causal)
{
    extern __shared__ float smem[];
    float *Ks = smem;                                    /* (FLASH_KEYS, E + 1) */
    float *Vs = Ks + FLASH_KEYS * (E + 1);               /* (FLASH_KEYS, Ev) */
    float *Qs = Vs + FLASH_KEYS * Ev;                    /* (FLASH_ROWS, E) */
    float *Ps = Qs + FLASH_ROWS * E;                     /* (FLASH_ROWS, FLASH_KEYS) */

    int b = blockIdx.y;
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    int row0 = blockIdx.x * FLASH_ROWS;
    int i = row0 + warp;                                 /* this warp's query row */
    bool active = i < L;          /* idle warps still help load the tiles */

    const float *qb = q + (size_t)b * L * E;             /* (L, E) */
    const float *kb = k + (size_t)b * S * E;             /* (S, E) */
    const float *vb = v + (size_t)b * S * Ev;            /* (S, Ev) */
    const float *bias_row = (bias && active) ? bias + ((size_t)b * L + i) * S : NULL;
    float *qrow = Qs + warp * E;
    float *prow = Ps + warp * FLASH_KEYS;

    if (active)
        for (int e = lane; e < E; e += 32) qrow[e] = qb[(size_t)i * E + e];

    float m = -INFINITY, l = 0.0f;                       /* the running max and sum */
    float o[FLASH_PER_LANE];                             /* features lane, lane + 32, ... */
#pragma unroll
    for (int r = 0; r < FLASH_PER_LANE; r++) o[r] = 0.0f;

    /* With a causal mask no row of this block sees keys past its last row. */
    int last_row = min(row0 + FLASH_ROWS, L) - 1;
    int key_end = is_causal ? min(S, last_row + 1) : S;

    for (int j0 = 0; j0 < key_end; j0 += FLASH_KEYS) {
        /* All threads load the tile: keys j0 .. j0 + FLASH_KEYS - 1 (zeros past S). */
        __syncthreads();                  /* the previous tile is no longer read */
        for (int t = threadIdx.x; t < FLASH_KEYS * E; t += blockDim.x) {
            int jj = t / E, e = t % E, j = j0 + jj;
            Ks[jj * (E + 1) + e] = j < S ? kb[(size_t)j * E + e] : 0.0f;
        }
        for (int t = threadIdx.x; t < FLASH_KEYS * Ev; t += blockDim.x) {
            int jj = t / Ev, e = t % Ev, j = j0 + jj;
            Vs[jj * Ev + e] = j < S ? vb[(size_t)j * Ev + e] : 0.0f;
        }
        __syncthreads();                  /* the tile is complete */
        if (!active) continue;

        /* Lane jj scores key j0 + jj. */
        int j = j0 + lane;
        float s = j < S ? flash_score(qrow, Ks + lane * (E + 1), E, scale, bias_row, i, j,
                                      is_causal)
                        : -INFINITY;

        /* The online softmax step for this tile (see the top of the file). */
        float m_new = fmaxf(m, warp_max(s));
        float p = (s == -INFINITY) ? 0.0f : expf(s - m_new);   /* 0 if masked */
        float alpha = hd_online_rescale(m, m_new);             /* exp(m - m'), 0 at first */
        l = l * alpha + warp_sum(p);
        m = m_new;

        /* o = o * alpha + sum_jj p_jj v_jj: every lane needs every p. */
        prow[lane] = p;
        __syncwarp();
        int keys = min(FLASH_KEYS, S - j0);
#pragma unroll
        for (int r = 0; r < FLASH_PER_LANE; r++) {
            int e = lane + 32 * r;
            if (e < Ev) {
                float acc = o[r] * alpha;
                for (int jj = 0; jj < keys; jj++) acc += prow[jj] * Vs[jj * Ev + e];
                o[r] = acc;
            }
        }
        __syncwarp();                     /* prow is read before the next tile writes it */
    }

    if (!active) return;
    /* out = o / l; a fully masked row has l = 0 and gets zeros. */
    float inv = l > 0.0f ? 1.0f / l : 0.0f;
    float *orow = out + ((size_t)b * L + i) * Ev;
#pragma unroll
    for (int r = 0; r < FLASH_PER_LANE; r++) {
        int e = lane + 32 * r;
        if (e < Ev) orow[e] = o[r] * inv;
    }
    if (lane == 0) lse[(size_t)b * L + i] = hd_online_lse(m, l);
}

extern "C" int cuda_sdpa_flash_forward(float *out, float *lse, const float *q, const float *k,
                                       const float *v, const float *bias, int N, int L, int S,
                                       int E, int Ev, float scale, int is_causal)
{
    if (N == 0 || L == 0) return 0;
    if (E < 1 || Ev < 1 || E > CUDA_FLASH_MAX_D || Ev > CUDA_FLASH_MAX_D || N > 65535) {
        fprintf(stderr, "cuda_sdpa_flash_forward: E %d and Ev %d must lie in 1..%d, and N %d "
                "at most 65535\n", E, Ev, CUDA_FLASH_MAX_D, N);
        return -1;
    }
    size_t smem = sizeof(float) * ((size_t)FLASH_KEYS * (E + 1) + (size_t)FLASH_KEYS * Ev +
                                   (size_t)FLASH_ROWS * E + (size_t)FLASH_ROWS * FLASH_KEYS);
    dim3 blocks((L + FLASH_ROWS - 1) / FLASH_ROWS, N);
    sdpa_flash_forward_kernel<<<blocks, FLASH_ROWS * 32, smem>>>(out, lse, q, k, v, bias, L, S,
                                                                 E, Ev, scale, is_causal);
    return LAUNCH_CHECK(sdpa_flash_forward_kernel);
}

/* att[b, i, j] = exp(score - lse[b, i]); one thread per entry. */
__global__ void sdpa_weights_from_lse_kernel(float *att, const float *q, const float *k,
                                             const float *bias, const float *lse, long long n,
                                             int L, int S, int E, float scale, int is_causal)
{
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n) return;
    int j = (int)(idx % S);
    long long bi = idx / S;                          /* b * L + i */
    int i = (int)(bi % L);
    long long b = bi / L;
    const float *bias_row = bias ? bias + bi * S : NULL;
    float s = flash_score(q + bi * E, k + (b * S + j) * E, E, scale, bias_row, i, j, is_causal);
    float row_lse = lse[bi];
    att[idx] = (row_lse == -INFINITY || s == -INFINITY) ? 0.0f : expf(s - row_lse);
}

extern "C" int cuda_sdpa_weights_from_lse(float *att, const float *q, const float *k,
                                          const float *bias, const float *lse, int N, int L,
                                          int S, int E, float scale, int is_causal)
{
    long long n = (long long)N * L * S;
    if (n == 0) return 0;
    sdpa_weights_from_lse_kernel<<<blocks_for(n, 256), 256>>>(att, q, k, bias, lse, n, L, S, E,
                                                              scale, is_causal);
    return LAUNCH_CHECK(sdpa_weights_from_lse_kernel);
}
