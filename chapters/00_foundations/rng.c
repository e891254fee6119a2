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

void rng_advance(Rng *rng, uint64_t delta)
{
    /* n steps of state -> a state + c compose to one affine map
     * A state + C; square-and-multiply builds it in O(log n) steps (Brown,
     * "Random number generation with arbitrary strides", 1994; the PCG
     * reference implementation's pcg_advance_lcg_64). */
    uint64_t acc_mult = 1, acc_plus = 0;
    uint64_t cur_mult = PCG_MULTIPLIER, cur_plus = rng->inc;
    while (delta > 0) {
        if (delta & 1) {
            acc_mult *= cur_mult;
            acc_plus = acc_plus * cur_mult + cur_plus;
        }
        cur_plus = (cur_mult + 1) * cur_plus;
        cur_mult *= cur_mult;
        delta >>= 1;
    }
    rng->state = acc_mult * rng->state + acc_plus;
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
