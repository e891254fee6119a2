/*
 * decode.h - turning a trained seq2seq model into a translator (and a
 * language model into a writer): greedy decoding, beam search, the
 * key/value cache they run on, and the top-k probabilities of any model's
 * logits.
 *
 * The algorithms are taught in the chapter's README, "Decoding" (and its
 * appendix, "Decoding in detail", for the pseudocode): why a
 * decoder writes one token at a time, the key/value cache, greedy decoding,
 * beam search (its pseudocode, that of reference/ch07_model.py's
 * beam_decode_one) and its length penalty, top-k. This file states each
 * function's contract.
 *
 * Letters (the top README's table): N batch, S source length, D d_model,
 * H heads, Dh = D / H, Kd decoder layers, Vt target vocabulary, M max_new
 * (the most tokens a decoder writes per sequence), beam_width.
 *
 * Output rows, out (N, M): the tokens written, <eos> included, then pad_id
 * to the end (eos_id when the model has no padding, pad_id -1).
 *
 * Read next: decode.c; programs/07_model.c (the demo decodes with an untrained model),
 * then chapter 08, which trains one worth decoding.
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

/* The decoder's state between steps. */
typedef struct {
    int N, S, M, t;                 /* t: positions done */
    int D, H, Dh, F, layers;        /* layers: Kd (a language model's: Ke) */
    float *self_k, *self_v;         /* (layers, N, H, M, Dh) every position's keys and values */
    float *cross_k, *cross_v;       /* (layers, N, H, S, Dh) the encoder output's, projected */
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

/* Appends position t = c->t: tokens (N,) are the decoder's inputs there
 * (<sos> at t = 0, then the tokens written; a language model's ids); logits
 * (N, Vt) receive the next-token logits, the same (to float32 rounding) as
 * model_forward's at position t on the whole prefix. Fails once M positions
 * are done. */
int decode_cache_step(DecodeCache *c, Model *m, const int64_t *tokens, float *logits);

/* Beam search: row i of the cache becomes a copy of row parents[i] (i < n),
 * positions 0..t-1. The rows must share their source (the cross-attention's
 * part of the cache is not moved). */
int decode_cache_reorder(DecodeCache *c, const int *parents, int n);

void decode_cache_free(DecodeCache *c);

/* Greedy decoding of the N source sequences src (N, S) with a seq2seq model:
 * every step takes the most probable token, the lowest id of equal maxima
 * (torch.argmax); a row stops after <eos> or M tokens. out (N, M) gets the
 * tokens, scores (N,) the sum of their log-probabilities (scores may be
 * NULL). d->no_cache runs the whole model at every step instead of the
 * cache. Errors (one line in err): another kind of model, ids outside the
 * vocabularies, S or M longer than max_len, sos_id or eos_id outside the
 * target vocabulary, sos_id equal to pad_id (the first query would see no
 * key). */
int decode_greedy(Model *m, const int64_t *src, int N, int S, const DecodeOptions *d,
                  int64_t *out /* (N, max_new) */, float *scores /* (N,) or NULL */,
                  Error *err);

/* Beam search, per source sequence, as the README's pseudocode: out (N, M)
 * the best hypothesis of each sequence, scores (N,) its normalised score,
 * sum of log-probabilities / len ** length_penalty (or NULL). With
 * beam_width 1 and length_penalty 0 it is decode_greedy. Errors: those of
 * decode_greedy, beam_width < 1, a length_penalty that is not finite. */
int decode_beam(Model *m, const int64_t *src, int N, int S, const DecodeOptions *d,
                int64_t *out /* (N, max_new) */, float *scores /* (N,) or NULL */, Error *err);

/* The k most probable classes of each of the rows of logits (rows, V):
 * ids (rows, k) and their softmax probabilities probs (rows, k), in
 * descending order, the lower id first on equal logits (a stable
 * descending sort of torch.softmax(logits, -1), ranked by the logits, which
 * do not underflow). V is the class count (a model's Vt). Fails (-1)
 * unless 1 <= k <= V. */
int model_topk(const float *logits, int64_t rows, int V, int k, int64_t *ids, float *probs);

#endif
