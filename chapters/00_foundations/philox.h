/*
 * philox.h - Philox 4x32-10, a counter-based generator (Salmon, Moraes,
 * Dror and Shaw 2011, "Parallel random numbers: as easy as 1, 2, 3"; the
 * generator behind PyTorch's CUDA dropout).
 *
 * PCG32 (rng.h) is a stream: the i-th number needs the i-1 before it.
 * Philox is a function: number i under a key is computed from i and the key
 * alone, by ten rounds of a keyed bijection on a 128-bit counter. So any
 * thread, or any GPU thread, can draw element i of a dropout mask without
 * knowing the others, and the CPU and the GPU draw the same masks from the
 * same key (chapter 05's dropout_mask, cuda/ffn.cu's mask kernel).
 *
 * Everything here is inline and compiles as C and as CUDA (PHILOX_HD is
 * __host__ __device__ under nvcc): the GPU runs this code, not a copy of it.
 * reference/rng.py is its Python twin; the test of chapter 00 checks it
 * against Random123's published known answers.
 *
 * Read next: threads.h.
 */
#ifndef PHILOX_H
#define PHILOX_H

#include <stdint.h>

#ifdef __CUDACC__
#define PHILOX_HD __host__ __device__
#else
#define PHILOX_HD
#endif

typedef struct {
    uint32_t k[2];
} PhiloxKey;

/* out = Philox4x32-10(counter, key): four 32-bit numbers. One round
 * multiplies two words of the counter by fixed odd constants, and mixes the
 * high halves of the products with the other two words and the key; the
 * key is then bumped by two constants from the golden ratio and sqrt(3). */
static inline PHILOX_HD void philox4x32_10(uint32_t out[4], const uint32_t counter[4],
                                            PhiloxKey key)
{
    uint32_t c0 = counter[0], c1 = counter[1], c2 = counter[2], c3 = counter[3];
    uint32_t k0 = key.k[0], k1 = key.k[1];
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
        uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
        c0 = hi1 ^ c1 ^ k0, c1 = lo1, c2 = hi0 ^ c3 ^ k1, c3 = lo0;
        k0 += 0x9E3779B9u, k1 += 0xBB67AE85u;
    }
    out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
}

/* The four uniforms of block b under key: numbers 4b .. 4b + 3 of the keyed
 * sequence, each in [0, 1) with 24 random bits (every value exactly a
 * float32, as rng_uniform). Number i is element i % 4 of block i / 4; the
 * counter is (b, 0, 0, 0). */
static inline PHILOX_HD void philox_uniform4(float u[4], PhiloxKey key, uint32_t b)
{
    const uint32_t counter[4] = {b, 0, 0, 0};
    uint32_t r[4];
    philox4x32_10(r, counter, key);
    for (int j = 0; j < 4; j++) u[j] = (float)(r[j] >> 8) * (1.0f / 16777216.0f);
}

#endif
