"""PCG32 in Python, bit for bit the generator of chapters/00_foundations/rng.c.

Python integers do not wrap, so every 64-bit and 32-bit operation is masked.
The golden case rng_stream proves that both sides draw the same numbers, which
lets later chapters (the reverse-task data, for example) be made identically by
C and by PyTorch.
"""

import math

MASK64 = (1 << 64) - 1
MASK32 = (1 << 32) - 1
MULTIPLIER = 6364136223846793005


class Pcg32:
    def __init__(self, seed, stream=0):
        self.state = 0
        self.inc = ((stream << 1) | 1) & MASK64
        self.u32()
        self.state = (self.state + seed) & MASK64
        self.u32()

    def u32(self):
        old = self.state
        self.state = (old * MULTIPLIER + self.inc) & MASK64
        xorshifted = (((old >> 18) ^ old) >> 27) & MASK32
        rot = old >> 59
        return ((xorshifted >> rot) | (xorshifted << ((-rot) & 31))) & MASK32

    def uniform(self):
        """Uniform in [0, 1) with 24 random bits: exactly a float32."""
        return (self.u32() >> 8) / 16777216.0

    def normal(self):
        """Box-Muller, in float64 (C computes it in float32)."""
        u1 = 1.0 - self.uniform()
        u2 = self.uniform()
        return math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)

    def below(self, n):
        """Uniform integer in [0, n) without modulo bias."""
        threshold = ((1 << 32) - n) % n
        while True:
            r = self.u32()
            if r >= threshold:
                return r % n
