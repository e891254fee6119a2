/*
 * sampling.h - one step of writing text with a language model: the
 * distribution the next token is drawn from, and the draw.
 *
 * Letters (the top README's table): V vocabulary.
 *
 * The settings, with the names Hugging Face's generate() gives them:
 *
 *     temperature   0: greedy, one-hot at the argmax (the lowest id on ties;
 *                   top_k and top_p then change nothing);
 *                   > 0: p = softmax(logits / temperature)
 *     top_k         0: off; k > 0: keep the k most probable ids (the lower
 *                   id first on ties), zero the rest; k >= V keeps all
 *     top_p         1: off; in (0, 1): then keep the shortest run of ids,
 *                   most probable first (the lower id first on ties), whose
 *                   probability reaches top_p of what top-k left: an id is
 *                   kept when the mass of the ids before it is below top_p,
 *                   so the most probable id always is (Hugging Face's
 *                   TopPLogitsWarper)
 *
 * and what is kept is renormalised to sum 1. Ids are ranked by their logits,
 * the same order as their probabilities without the underflow of a float32
 * probability to 0 (zeros cannot be ranked). README.md has a worked example.
 *
 * The draw is inverse-CDF sampling from a uniform number u in [0, 1): the
 * caller draws u (the project's RNG, rng.h), so a step is deterministic
 * given u and the cases can state the token it must give.
 *
 * Read next: README.md, then the generation program (programs/12_generation.c).
 */
#ifndef SAMPLING_H
#define SAMPLING_H

#include "error.h"

typedef struct {
    float temperature;   /* 0 (greedy) or a positive finite number */
    int top_k;           /* 0 (off) or the ids kept */
    float top_p;         /* in (0, 1]; 1: off */
} Sampling;

/* Fails, naming the setting and its value, unless temperature is 0 or a
 * positive finite number, top_k >= 0 and top_p lies in (0, 1]. Returns 0 or
 * -1 with err set. */
int sampling_check(const Sampling *s, Error *err);

/*
 * probs    (V,) the distribution one step draws from (zeros for what the
 *          settings drop; the rest sums to 1)
 * order    (V,) int scratch; its contents on return are unspecified
 * logits   (V,) finite, or -inf for an id that must never be drawn; at least
 *          one finite
 *
 * V >= 1. Returns 0, or -1 with err set: bad settings (sampling_check), a
 * logit that is NaN or +inf, every logit -inf. Nothing is written then.
 */
int sampling_probs(float *probs, int *order, const float *logits, int V, const Sampling *s,
                   Error *err);

/*
 * The id drawn by inverse CDF with u in [0, 1): the first id, in ascending
 * id order, at which the running sum of probs (V,) exceeds u; the last id
 * with probs > 0 when rounding leaves the sum at or below u. Ids with
 * probs 0 are never drawn. Returns the id, or -1 when no entry of probs is
 * positive.
 */
int sampling_pick(const float *probs, int V, double u);

#endif
