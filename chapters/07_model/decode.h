/*
 * decode.h - turning a trained seq2seq model into a translator: greedy
 * decoding, beam search, and the top-k probabilities of any model's logits.
 *
 * Letters (the top README's table): N batch, S source length, Vt target
 * vocabulary, M max_new (the most tokens a decoder writes per sequence),
 * beam_width the hypotheses beam search keeps.
 *
 * A seq2seq model is trained with teacher forcing: it reads <sos> t1 .. tn
 * and predicts t1 .. tn <eos> at once. To translate a new source there is no
 * target to read, so the model writes one: start from <sos>, predict the
 * next token, append it, predict again, until <eos>.
 *
 * The key/value cache. Because the decoder's self-attention is causal, what
 * every layer computes at positions 0..t-1 does not change when token t is
 * appended. So the decoder need not run over the whole prefix again: each
 * step takes only the new position through the layers, and its
 * self-attention reads the keys and values of the earlier positions from a
 * cache (DecodeCache) that every step appends to. The cross-attention's
 * keys and values are the encoder's output projected once per layer: they
 * are computed before the first step. A sequence of M tokens then costs M
 * one-position steps instead of M runs over up to M positions. Both
 * decoders use the cache; with no_cache they run the whole model on a
 * target of M positions at every step and read position t (the filler
 * after it is never seen), which is the plain definition the cache is
 * tested against.
 *
 * Output rows: the tokens written, <eos> included, then pad_id to the end
 * (eos_id when the model has no padding, pad_id < 0).
 *
 * Greedy (decode_greedy): every step takes the most probable token, the
 * first of equal maxima (lowest id), as torch.argmax does. A row stops at
 * <eos> or after M tokens. scores[n] is the sum of the log-probabilities
 * of the tokens it wrote.
 *
 * Beam search (decode_beam), per source sequence, exactly as
 * reference/ch07_model.py's beam_decode_one:
 *
 *     beams = [([], 0.0)]          (tokens, sum of log-probabilities)
 *     finished = []
 *     repeat M times, while beams is not empty:
 *         expand every beam b by every token v:
 *             candidate (score = lp_b + log_softmax(logits_b)[v], b, v)
 *         sort the candidates by score descending, then b, then v ascending
 *         take the first beam_width of them; for each, in that order:
 *             tokens = tokens_b + [v]
 *             v == <eos>:  finished += (tokens, score / len(tokens) ** alpha)
 *             otherwise:   it is one of the new beams
 *     every beam still alive is finished too, normalised the same way
 *     answer: the finished hypothesis with the highest normalised score
 *             (the earliest one on ties)
 *
 * alpha is length_penalty. Every token adds a negative log-probability, so
 * without normalisation (alpha = 0) short hypotheses win; dividing by
 * len ** alpha compares the average log-probability per token instead
 * (alpha = 1), or something in between (Wu et al. 2016 use a similar
 * penalty with alpha 0.6). A finished hypothesis leaves the beam, so the
 * beam narrows as hypotheses end. With beam_width 1 and alpha = 0 this is greedy
 * decoding. scores[n] is the chosen hypothesis's normalised score.
 *
 * Top-k (model_topk): softmax over each row of logits, then the k most
 * probable classes in descending order (the lower id first on ties), as a
 * stable descending sort of torch.softmax(logits, -1). The classes are
 * ranked by their logits, which is the same order (softmax is increasing)
 * without its underflow: a float32 probability below about 1e-45 is 0, and
 * zeros cannot be ranked.
 *
 * float32 and float64 pick the same tokens only where the compared scores
 * are further apart than float32's rounding; the golden cases check that
 * every decision they make has a margin of at least 1e-3.
 *
 * Read next: main.c (the demo decodes with an untrained model), then
 * chapter 08, which trains one worth decoding.
 * The int functions return 0, or -1 on failure.
 */
#ifndef DECODE_H
#define DECODE_H

#include <stdint.h>

#include "error.h"
#include "model.h"

typedef struct {
    int64_t sos_id, eos_id;         /* target ids that start and end a sequence */
    int max_new;                    /* M: tokens to write at most, 1..max_len */
    int beam_width;                 /* >= 1 (beam search only) */
    float length_penalty;           /* alpha (beam search only): 0 none, 1 per-token average */
    int no_cache;                   /* 1: re-run the decoder over the whole prefix each step */
} DecodeOptions;

/* The decoder's state between steps. Letters as above, plus D d_model, H
 * heads, Dh = D / H, Kd decoder layers. */
typedef struct {
    int N, S, M, t;                 /* t: positions done */
    int D, H, Dh, F, layers;
    float *self_k, *self_v;         /* (Kd, N, H, M, Dh) every position's keys and values */
    float *cross_k, *cross_v;       /* (Kd, N, H, S, Dh) the encoder output's, projected */
    float *self_bias;               /* (N, M) 0, or -inf where the token was pad_id */
    float *cross_bias;              /* (N, S) 0, or -inf at source padding */
    /* one position's activations, (N, ...) */
    float *x, *y, *sub, *q, *k, *v, *o, *pre, *hidden, *att;
} DecodeCache;

/* Encodes src (N, S) and prepares the cache for up to M decoder positions.
 * A language model (chapter 12) has no source: src NULL and S 0; its
 * encoder layers are causal, so the same cache runs them one position at a
 * time. Fails (err) for another kind of model, ids outside the vocabulary,
 * or lengths past max_len. */
int decode_cache_init(DecodeCache *c, Model *m, const int64_t *src, int N, int S, int M,
                      Error *err);

/* Appends position t = c->t: tokens (N,) are the decoder's inputs there (<sos>
 * at t = 0, then the tokens written; a language model's ids); logits (N, Vt) receive the next-token
 * logits, the same (to float32 rounding) as model_forward's at position t
 * on the whole prefix. Fails once M positions are done. */
int decode_cache_step(DecodeCache *c, Model *m, const int64_t *tokens, float *logits);

/* Beam search: row i of the cache becomes a copy of row parents[i] (i < n),
 * positions 0..t-1. The rows must share their source (the cross-attention's
 * part of the cache is not moved). */
int decode_cache_reorder(DecodeCache *c, const int *parents, int n);

void decode_cache_free(DecodeCache *c);

/* Greedy decoding of the N source sequences src (N, S) with a seq2seq model.
 * out (N, M) gets the tokens, scores (N,) the sum of their log-probabilities
 * (scores may be NULL). Errors (one line in err): another kind of model,
 * ids outside the vocabularies, S or M longer than max_len, sos_id equal to
 * pad_id (the first query would see no key). */
int decode_greedy(Model *m, const int64_t *src, int N, int S, const DecodeOptions *d,
                  int64_t *out /* (N, max_new) */, float *scores /* (N,) or NULL */,
                  Error *err);

/* Beam search as above: out (N, M) the best hypothesis of each sequence,
 * scores (N,) its normalised score (or NULL). */
int decode_beam(Model *m, const int64_t *src, int N, int S, const DecodeOptions *d,
                int64_t *out /* (N, max_new) */, float *scores /* (N,) or NULL */, Error *err);

/* The k most probable classes of each of the rows of logits (rows, V):
 * ids (rows, k) and their probabilities probs (rows, k), descending.
 * Fails (-1) unless 1 <= k <= V. */
int model_topk(const float *logits, int64_t rows, int V, int k, int64_t *ids, float *probs);

#endif
