/*
 * common.cuh - what every kernel file shares: checking a launch, and the
 * warp and block reductions.
 *
 * Reductions. A warp is 32 threads that run in lock step; __shfl_xor_sync
 * lets each thread read a register of another thread of its warp. Adding the
 * value of the thread 16 lanes away, then 8, 4, 2, 1, leaves every thread of
 * the warp holding the sum of all 32 (a butterfly). A block of up to 1024
 * threads is up to 32 warps: each warp reduces its own values, writes one
 * partial to shared memory, and the first warp reduces those partials.
 *
 * The order of these float additions is fixed by the block size, so a kernel
 * gives the same bits on every run; it is not the left-to-right order of the
 * C loops, so the results differ from the CPU in the last bits (the case
 * tolerances allow for that).
 */
#ifndef CUDA_COMMON_CUH
#define CUDA_COMMON_CUH

#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>

/* After a launch: a bad configuration (too many threads, too much shared
 * memory) shows up here at once; an error while the kernel runs shows up at
 * the next synchronisation. Prints one line and returns -1. */
static inline int cuda_launch_check(const char *kernel, const char *file, int line)
{
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) {
        fprintf(stderr, "%s:%d: launching %s failed: %s\n", file, line, kernel,
                cudaGetErrorString(e));
        return -1;
    }
    return 0;
}
#define LAUNCH_CHECK(kernel) cuda_launch_check(#kernel, __FILE__, __LINE__)

/* How many blocks of `threads` threads cover n items. */
static inline unsigned int blocks_for(long long n, int threads)
{
    return (unsigned int)((n + threads - 1) / threads);
}

__device__ inline float warp_sum(float v)
{
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
    return v;
}

__device__ inline float warp_max(float v)
{
    for (int offset = 16; offset > 0; offset /= 2)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
    return v;
}

/* The sum of v over the whole block, returned to every thread. blockDim.x
 * must be a multiple of 32. `shared` holds 32 floats; the leading
 * __syncthreads() makes it safe to call twice in a row. */
__device__ inline float block_sum(float v, float *shared)
{
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    v = warp_sum(v);
    __syncthreads();                      /* shared may still be read by a previous call */
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    v = lane < warps ? shared[lane] : 0.0f;
    return warp_sum(v);                   /* every warp reduces the partials itself */
}

__device__ inline float block_max(float v, float *shared)
{
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    v = lane < warps ? shared[lane] : -INFINITY;
    return warp_max(v);
}

#endif
