/*
 * decode.c - see decode.h for the algorithms. Both decoders run the whole
 * model on a target of M = max_new positions and read one position per
 * step; the causal mask makes the positions after it irrelevant, so they
 * hold filler (pad_id, or eos_id without padding).
 *
 * Letters: N batch, S source length, Vt target vocabulary, K beam_width,
 * M max_new.
 */
#include "decode.h"

#include "error.h"   /* not_implemented(), used by the exercise stubs */

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "softmax.h"
#include "threads.h"

/* ------------------------------------------------------------------------ */
/* Checks (given)                                                            */
/* ------------------------------------------------------------------------ */

static int check_decode(const Model *m, const int64_t *src, int N, int S,
                        const DecodeOptions *d, int beam, Error *err)
{
    const ModelConfig *c = &m->cfg;
    if (c->kind != MODEL_SEQ2SEQ)
        return error_set(err, "decode: the model is a %s; only a seq2seq model writes "
                         "sequences", c->kind == MODEL_LABELLER ? "labeller" : "classifier");
    if (N < 1 || S < 1)
        return error_set(err, "decode: batch %d and source length %d must be at least 1", N, S);
    if (S > c->max_len)
        return error_set(err, "decode: a source of %d positions is longer than max_len %d", S,
                         c->max_len);
    if (d->max_new < 1 || d->max_new > c->max_len)
        return error_set(err, "decode: max_new %d must lie in 1..max_len (%d): the decoder "
                         "reads <sos> and up to max_new - 1 tokens", d->max_new, c->max_len);
    if (d->sos_id < 0 || d->sos_id >= c->tgt_vocab || d->eos_id < 0 ||
        d->eos_id >= c->tgt_vocab)
        return error_set(err, "decode: sos_id %lld and eos_id %lld must lie in the target "
                         "vocabulary 0..%d", (long long)d->sos_id, (long long)d->eos_id,
                         c->tgt_vocab - 1);
    if (d->sos_id == c->pad_id)
        return error_set(err, "decode: sos_id %lld is the padding id: the first position "
                         "would attend to nothing", (long long)d->sos_id);
    if (beam && d->beam_width < 1)
        return error_set(err, "decode: beam_width %d must be at least 1", d->beam_width);
    if (beam && !isfinite(d->length_penalty))
        return error_set(err, "decode: length_penalty must be a finite number");
    return model_check_ids(src, (int64_t)N * S, c->src_vocab, "decode: src", err);
}

/* The index of the largest of x[0..n), the first one on ties (torch.argmax). */
static inline int argmax_first(const float *x, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* log(sum_i exp(x_i)) over a row of logits, in double: log_softmax(x)[v] is
 * x[v] minus this. */
static inline double log_sum_exp(const float *x, int n)
{
    double mx = x[argmax_first(x, n)], sum = 0.0;
    for (int i = 0; i < n; i++) sum += exp((double)x[i] - mx);
    return mx + log(sum);
}

/* ------------------------------------------------------------------------ */
/* Greedy                                                                    */
/* ------------------------------------------------------------------------ */

int decode_greedy(Model *m, const int64_t *src, int N, int S, const DecodeOptions *d,
                  int64_t *out, float *scores, Error *err)
{
    if (check_decode(m, src, N, S, d, 0, err) != 0) return -1;
    /* BEGIN SOLUTION */
    const ModelConfig *c = &m->cfg;
    int M = d->max_new, V = c->tgt_vocab;
    int64_t fill = c->pad_id >= 0 ? c->pad_id : d->eos_id;
    int64_t *tgt = malloc((size_t)N * M * sizeof *tgt);     /* (N, M) the decoder's input */
    double *sum = calloc((size_t)N, sizeof *sum);           /* (N,) */
    unsigned char *done = calloc((size_t)N, 1);             /* (N,) */
    ModelWork w;
    memset(&w, 0, sizeof w);
    int rc = 0;
    if (!tgt || !sum || !done) rc = error_set(err, "decode: out of memory");
    else rc = model_work_alloc(&w, m, N, S, M, 0, err);
    if (rc == 0) {
        for (int64_t i = 0; i < (int64_t)N * M; i++) tgt[i] = out[i] = fill;
        for (int n = 0; n < N; n++) tgt[(size_t)n * M] = d->sos_id;
        int live = N;
        for (int t = 0; t < M && live > 0 && rc == 0; t++) {
            threads_adapt();   /* as many threads as the machine has free cores (chapter 00) */
            if (model_forward(m, &w, src, tgt, NULL) != 0) {
                rc = error_set(err, "decode: model_forward failed");
                break;
            }
            for (int n = 0; n < N; n++) {
                if (done[n]) continue;
                /* the logits at position t: the prediction after token t */
                const float *row = w.logits + ((size_t)n * M + t) * V;
                int best = argmax_first(row, V);
                out[(size_t)n * M + t] = best;
                sum[n] += (double)row[best] - log_sum_exp(row, V);
                if (best == d->eos_id) done[n] = 1, live--;
                else if (t + 1 < M) tgt[(size_t)n * M + t + 1] = best;
            }
        }
        for (int n = 0; scores && rc == 0 && n < N; n++) scores[n] = (float)sum[n];
    }
    model_work_free(&w);
    free(tgt), free(sum), free(done);
    return rc;
    /* END SOLUTION */
}

/* ------------------------------------------------------------------------ */
/* Beam search                                                               */
/* ------------------------------------------------------------------------ */

typedef struct {
    double score;       /* the sum of log-probabilities with this token */
    int beam, token;
} Candidate;

/* Score descending, then beam, then token ascending: a total order, so the
 * result of qsort does not depend on its algorithm. */
static inline int candidate_order(const void *pa, const void *pb)
{
    const Candidate *a = pa, *b = pb;
    if (a->score != b->score) return a->score > b->score ? -1 : 1;
    if (a->beam != b->beam) return a->beam < b->beam ? -1 : 1;
    return (a->token > b->token) - (a->token < b->token);
}

/* Everything one source sequence's search needs, allocated once. */
typedef struct {
    int64_t *src;           /* (K, S) the source row repeated */
    int64_t *tgt;           /* (K, M) the live beams as decoder input */
    int64_t *live, *next;   /* (K, M) the live beams' tokens, and the next step's */
    double *live_score, *next_score;   /* (K,) */
    Candidate *cand;        /* (K * Vt,) */
    int64_t *fin;           /* (F, M) finished hypotheses' tokens, F = (M + 1) K */
    int *fin_len;           /* (F,) */
    double *fin_score;      /* (F,) normalised */
} BeamBuffers;

int decode_beam(Model *m, const int64_t *src, int N, int S, const DecodeOptions *d,
                int64_t *out, float *scores, Error *err)
{
    if (check_decode(m, src, N, S, d, 1, err) != 0) return -1;
    /* BEGIN SOLUTION */
    const ModelConfig *c = &m->cfg;
    int M = d->max_new, V = c->tgt_vocab, K = d->beam_width;
    size_t F = (size_t)(M + 1) * K;
    int64_t fill = c->pad_id >= 0 ? c->pad_id : d->eos_id;
    double alpha = d->length_penalty;
    BeamBuffers b;
    b.src = malloc((size_t)K * S * sizeof *b.src);
    b.tgt = malloc((size_t)K * M * sizeof *b.tgt);
    b.live = malloc((size_t)K * M * sizeof *b.live);
    b.next = malloc((size_t)K * M * sizeof *b.next);
    b.live_score = malloc((size_t)K * sizeof *b.live_score);
    b.next_score = malloc((size_t)K * sizeof *b.next_score);
    b.cand = malloc((size_t)K * V * sizeof *b.cand);
    b.fin = malloc(F * M * sizeof *b.fin);
    b.fin_len = malloc(F * sizeof *b.fin_len);
    b.fin_score = malloc(F * sizeof *b.fin_score);
    ModelWork w;
    memset(&w, 0, sizeof w);
    int rc = 0;
    if (!b.src || !b.tgt || !b.live || !b.next || !b.live_score || !b.next_score || !b.cand ||
        !b.fin || !b.fin_len || !b.fin_score)
        rc = error_set(err, "decode: out of memory for a beam of %d", K);
    else rc = model_work_alloc(&w, m, K, S, M, 0, err);

    for (int n = 0; n < N && rc == 0; n++) {
        for (int k = 0; k < K; k++)
            memcpy(b.src + (size_t)k * S, src + (size_t)n * S, (size_t)S * sizeof *src);
        int nlive = 1, nfin = 0, t = 0;
        b.live_score[0] = 0.0;
        for (; t < M && nlive > 0; t++) {
            threads_adapt();
            /* The decoder's input: <sos> and the t tokens of each live beam;
             * rows past the live beams repeat beam 0 (their logits are unused). */
            for (int k = 0; k < K; k++) {
                const int64_t *toks = b.live + (size_t)(k < nlive ? k : 0) * M;
                int64_t *row = b.tgt + (size_t)k * M;
                row[0] = d->sos_id;
                for (int j = 1; j < M; j++) row[j] = j <= t ? toks[j - 1] : fill;
            }
            if (model_forward(m, &w, b.src, b.tgt, NULL) != 0) {
                rc = error_set(err, "decode: model_forward failed");
                break;
            }
            /* Every live beam times every token. */
            int ncand = 0;
            for (int k = 0; k < nlive; k++) {
                const float *logits = w.logits + ((size_t)k * M + t) * V;
                double lse = log_sum_exp(logits, V);
                for (int v = 0; v < V; v++)
                    b.cand[ncand++] = (Candidate){b.live_score[k] + ((double)logits[v] - lse),
                                                  k, v};
            }
            qsort(b.cand, (size_t)ncand, sizeof *b.cand, candidate_order);
            /* The best K: finished at <eos>, the next beams otherwise. */
            int nnext = 0;
            for (int i = 0; i < K && i < ncand; i++) {
                const Candidate *cd = &b.cand[i];
                int64_t *toks = cd->token == d->eos_id ? b.fin + (size_t)nfin * M
                                                       : b.next + (size_t)nnext * M;
                memcpy(toks, b.live + (size_t)cd->beam * M, (size_t)t * sizeof *toks);
                toks[t] = cd->token;
                if (cd->token == d->eos_id) {
                    b.fin_len[nfin] = t + 1;
                    b.fin_score[nfin++] = cd->score / pow(t + 1, alpha);
                } else {
                    b.next_score[nnext++] = cd->score;
                }
            }
            int64_t *swap = b.live;
            b.live = b.next, b.next = swap;
            double *swap_score = b.live_score;
            b.live_score = b.next_score, b.next_score = swap_score;
            nlive = nnext;
        }
        if (rc != 0) break;
        /* Beams still alive after M steps end here, with M tokens. */
        for (int k = 0; k < nlive; k++) {
            memcpy(b.fin + (size_t)nfin * M, b.live + (size_t)k * M, (size_t)t * sizeof *b.fin);
            b.fin_len[nfin] = t;
            b.fin_score[nfin++] = b.live_score[k] / pow(t, alpha);
        }
        int best = 0;
        for (int i = 1; i < nfin; i++)
            if (b.fin_score[i] > b.fin_score[best]) best = i;
        for (int j = 0; j < M; j++)
            out[(size_t)n * M + j] = j < b.fin_len[best] ? b.fin[(size_t)best * M + j] : fill;
        if (scores) scores[n] = (float)b.fin_score[best];
    }
    model_work_free(&w);
    free(b.src), free(b.tgt), free(b.live), free(b.next), free(b.live_score);
    free(b.next_score), free(b.cand), free(b.fin), free(b.fin_len), free(b.fin_score);
    return rc;
    /* END SOLUTION */
}

/* ------------------------------------------------------------------------ */
/* Top-k                                                                     */
/* ------------------------------------------------------------------------ */

int model_topk(const float *logits, int64_t rows, int V, int k, int64_t *ids, float *probs)
{
    if (rows < 0 || V < 1 || k < 1 || k > V) return -1;
    /* BEGIN SOLUTION */
    float *p = malloc((size_t)V * sizeof *p);             /* (V,) one row's probabilities */
    unsigned char *taken = malloc((size_t)V);             /* (V,) */
    int rc = p && taken ? 0 : -1;
    for (int64_t r = 0; rc == 0 && r < rows; r++) {
        const float *x = logits + r * V;
        rc = softmax_forward(p, x, 1, V);
        memset(taken, 0, (size_t)V);
        /* k passes of "take the largest left", ranked by the logits: softmax
         * is increasing, so the order is the same, and a logit does not
         * underflow to 0 as a float32 probability below 1e-45 does. The scan
         * in id order with a strict > keeps the lower id of equal logits. */
        for (int j = 0; rc == 0 && j < k; j++) {
            int best = -1;
            for (int v = 0; v < V; v++)
                if (!taken[v] && (best < 0 || x[v] > x[best])) best = v;
            taken[best] = 1;
            ids[r * k + j] = best;
            probs[r * k + j] = p[best];
        }
    }
    free(p), free(taken);
    return rc;
    /* END SOLUTION */
}
