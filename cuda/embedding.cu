/*
 * embedding.cu - token embeddings and positional encodings on the GPU.
 *
 * Mirrors chapters/05_encoder/embedding.c (embedding_forward,
 * embedding_backward) and chapters/05_encoder/positional.c
 * (positional_sinusoidal_table, positional_forward, positional_backward):
 * same shapes, same padding_idx rule, backwards ADD.
 *
 *     out[b, t, :]  = scale * weight[ids[b, t], :]           a gather
 *     dweight[id]  += scale * dout[b, t, :]  for each (b, t) with that id
 *     out[b, t, :]  = x[b, t, :] + table[t, :]
 *     dtable[t, :] += sum over b of dout[b, t, :]
 *
 * The forwards are one thread per output value. The embedding backward is a
 * scatter-add: two positions with the same id write the same row. The usual
 * GPU answer is atomicAdd, which is fast but adds in whatever order the
 * threads arrive, so the bits change from run to run. Here one thread takes
 * one column d and walks the positions in order, exactly the C loop with its
 * inner loop parallel: deterministic, and as fast as needed for the
 * vocabularies of this project (D threads, N * T steps each).
 *
 * The sinusoidal table uses hd_sinusoidal() (hostdev.h), the formula of
 * positional.c; the GPU's expf/sinf/cosf differ from glibc's in the last
 * bit or two, far below the case tolerance, which grows with the position
 * for a reason both share (the float32 rounding of the angle).
 *
 * Read next: ffn.cu.
 */
#include "common.cuh"
#include "kernels.h"

__global__ void embedding_forward_kernel(float *out, const int64_t *ids, const float *weight,
                                         long long n, int D, float scale)
{
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n) return;
    long long bt = idx / D;
    int d = (int)(idx % D);
    out[idx] = scale * weight[ids[bt] * D + d];
}

/* Thread d adds column d of every position into the row of its id, in order. */
__global__ void embedding_backward_kernel(float *dweight, const float *dout, const int64_t *ids,
                                          int BT, int D, float scale, int64_t padding_idx)
{
    int d = blockIdx.x * blockDim.x + threadIdx.x;
    if (d >= D) return;
    for (int bt = 0; bt < BT; bt++) {
        int64_t id = ids[bt];
        if (id == padding_idx) continue;          /* the padding row gets no gradient */
        dweight[id * D + d] += scale * dout[(size_t)bt * D + d];
    }
}

extern "C" int cuda_embedding_forward(float *out, const int64_t *ids, const float *weight, int N,
                                      int T, int D, float scale)
{
    long long n = (long long)N * T * D;
    if (n == 0) return 0;
    embedding_forward_kernel<<<blocks_for(n, 256), 256>>>(out, ids, weight, n, D, scale);
    return LAUNCH_CHECK(embedding_forward_kernel);
}

extern "C" int cuda_embedding_backward(float *dweight, const float *dout, const int64_t *ids,
                                       int N, int T, int D, float scale, int64_t padding_idx)
{
    if (N * T == 0 || D == 0) return 0;
    embedding_backward_kernel<<<blocks_for(D, 128), 128>>>(dweight, dout, ids, N * T, D, scale,
                                                          padding_idx);
    return LAUNCH_CHECK(embedding_backward_kernel);
}

/* ------------------------------------------------------------------------ */
/* Positions                                                                 */
/* ------------------------------------------------------------------------ */

__global__ void positional_table_kernel(float *table, long long n, int D)
{
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n) return;
    table[idx] = hd_sinusoidal((int)(idx / D), (int)(idx % D), D);
}

__global__ void positional_forward_kernel(float *out, const float *x, const float *table,
                                          long long n, int T, int D)
{
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n) return;
    long long t = (idx / D) % T;                  /* the position of this value */
    out[idx] = x[idx] + table[t * D + idx % D];
}

/* dtable[t, d] += sum over b of dout[b, t, d]; one thread per (t, d), b in order. */
__global__ void positional_backward_table_kernel(float *dtable, const float *dout, int N, int T,
                                                 int D)
{
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (long long)T * D) return;
    float sum = dtable[idx];
    for (int b = 0; b < N; b++) sum += dout[(size_t)b * T * D + idx];
    dtable[idx] = sum;
}

extern "C" int cuda_positional_sinusoidal_table(float *table, int max_len, int D)
{
    long long n = (long long)max_len * D;
    if (n == 0) return 0;
    positional_table_kernel<<<blocks_for(n, 256), 256>>>(table, n, D);
    return LAUNCH_CHECK(positional_table_kernel);
}

extern "C" int cuda_positional_forward(float *out, const float *x, const float *table, int N,
                                       int T, int D)
{
    long long n = (long long)N * T * D;
    if (n == 0) return 0;
    positional_forward_kernel<<<blocks_for(n, 256), 256>>>(out, x, table, n, T, D);
    return LAUNCH_CHECK(positional_forward_kernel);
}

extern "C" int cuda_positional_backward(float *dx, float *dtable, const float *dout, int N, int T,
                                        int D)
{
    long long n = (long long)N * T * D;
    if (n == 0) return 0;
    if (dx) {
        if (cuda_add_into(dx, dout, n) != 0) return -1;
    }
    if (dtable) {
        positional_backward_table_kernel<<<blocks_for((long long)T * D, 256), 256>>>(
            dtable, dout, N, T, D);
        if (LAUNCH_CHECK(positional_backward_table_kernel) != 0) return -1;
    }
    return 0;
}
