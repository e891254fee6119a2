"""PCG32 and Philox 4x32-10 in Python, bit for bit the generators of
chapters/00_foundations/rng.c and philox.h, and the dropout mask rule of
chapters/05_encoder/dropout.c that joins them.

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


PHILOX_M = (0xD2511F53, 0xCD9E8D57)
PHILOX_W = (0x9E3779B9, 0xBB67AE85)

# Random123's published known answers (its tests/kat_vectors): counter, key, out.
PHILOX_KNOWN_ANSWERS = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((MASK32,) * 4, (MASK32,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


def philox4x32_10(counter, key):
    """Ten Philox rounds on a 4-word counter under a 2-word key."""
    c0, c1, c2, c3 = counter
    k0, k1 = key
    for _ in range(10):
        p0, p1 = PHILOX_M[0] * c0, PHILOX_M[1] * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0, p1 & MASK32, (p0 >> 32) ^ c3 ^ k1, p0 & MASK32)
        k0, k1 = (k0 + PHILOX_W[0]) & MASK32, (k1 + PHILOX_W[1]) & MASK32
    return c0, c1, c2, c3


def check_philox():
    """Raises unless philox4x32_10 gives Random123's known answers."""
    for counter, key, out in PHILOX_KNOWN_ANSWERS:
        got = philox4x32_10(counter, key)
        if got != out:
            raise AssertionError(f"philox4x32_10({counter}, {key}) = {got}, expected {out}")


def dropout_mask(n, p, rng):
    """C's dropout_mask(): a key of two rng.u32() (the first is word 0), then
    element i is kept iff u_i >= p, u_i the top 24 bits of word i % 4 of
    Philox on the counter (i // 4, 0, 0, 0), divided by 2^24. A list of n
    bools; p is a float32 value, compared in float64 (both sides exact)."""
    key = (rng.u32(), rng.u32())
    mask = []
    for b in range((n + 3) // 4):
        words = philox4x32_10((b, 0, 0, 0), key)
        mask.extend((w >> 8) / 16777216.0 >= p for w in words)
    return mask[:n]
