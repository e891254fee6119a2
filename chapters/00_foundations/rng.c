/* rng.c - PCG32, see rng.h. reference/rng.py must stay identical. */
#include "rng.h"

#include <math.h>

#define PCG_MULTIPLIER 6364136223846793005ULL

void rng_seed(Rng *rng, uint64_t seed, uint64_t stream)
{
    /* The seeding procedure of the PCG reference implementation. */
    rng->state = 0;
    rng->inc = (stream << 1) | 1u;
    rng_u32(rng);
    rng->state += seed;
    rng_u32(rng);
}

uint32_t rng_u32(Rng *rng)
{
    uint64_t old = rng->state;
    rng->state = old * PCG_MULTIPLIER + rng->inc;
    uint32_t xorshifted = (uint32_t)(((old >> 18) ^ old) >> 27);
    uint32_t rot = (uint32_t)(old >> 59);
    return (xorshifted >> rot) | (xorshifted << ((-rot) & 31));
}

float rng_uniform(Rng *rng)
{
    return (float)(rng_u32(rng) >> 8) * (1.0f / 16777216.0f);
}

float rng_normal(Rng *rng)
{
    /* 1 - u lies in (0, 1], so the logarithm is finite. */
    float u1 = 1.0f - rng_uniform(rng);
    float u2 = rng_uniform(rng);
    return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853071795864f * u2);
}

uint32_t rng_below(Rng *rng, uint32_t n)
{
    /* Reject the lowest (2^32 mod n) values so every residue is equally likely. */
    uint32_t threshold = (uint32_t)(-n) % n;
    for (;;) {
        uint32_t r = rng_u32(rng);
        if (r >= threshold) return r % n;
    }
}
