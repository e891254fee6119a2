/*
 * rng.h - a small deterministic random number generator (PCG32).
 *
 * Everything random in the project (weight initialisation, dropout masks'
 * keys, shuffling, the reverse-task data) draws from an Rng that main() seeds, so a
 * run is reproducible from its seed, on any machine and with any number of
 * threads. C cannot reproduce PyTorch's generator, which is why golden cases
 * carry their inputs; reference/rng.py is a line-by-line Python twin of this
 * generator, and a golden checks that both produce the same stream.
 *
 * PCG32 (O'Neill 2014, "PCG: A Family of Simple Fast Space-Efficient
 * Statistically Good Algorithms"): a 64-bit linear congruential state and a
 * permuted 32-bit output (xorshift, then a rotation chosen by the top bits).
 *
 * Read next: philox.h, the generator a dropout mask's key drives.
 */
#ifndef RNG_H
#define RNG_H

#include <stdint.h>

typedef struct {
    uint64_t state;
    uint64_t inc;     /* odd: selects one of 2^63 independent streams */
} Rng;

void rng_seed(Rng *rng, uint64_t seed, uint64_t stream);
uint32_t rng_u32(Rng *rng);
/* Uniform in [0, 1), 24 random bits (every float32 of the form k / 2^24). */
float rng_uniform(Rng *rng);
/* Standard normal by the Box-Muller transform (uses two uniforms per call). */
float rng_normal(Rng *rng);
/* Uniform integer in [0, n), without modulo bias; n >= 1. */
uint32_t rng_below(Rng *rng, uint32_t n);

#endif
