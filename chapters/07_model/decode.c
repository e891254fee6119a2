/*
 * decode.c - see decode.h for the contracts and the chapter's README,
 * "Decoding", for the algorithms (beam search's pseudocode in its appendix,
 * "Decoding in detail").
 * Both decoders take one position per step through the key/value cache
 * (decode_cache_step). With no_cache they run the whole model instead, on
 * a target of M = max_new positions, and read the position of the step;
 * the causal mask makes the positions after it irrelevant, so they hold
 * filler (pad_id, or eos_id without padding).
 *
 * Letters as in the top README, but in the beam search K is beam_width and
 * F = (M + 1) K the most finished hypotheses (the top README's K, layers,
 * is the cache's layers; its F, dim_feedforward, the cache's F).
 */
#include "decode.h"

#include "error.h"   /* not_implemented(), used by the exercise stubs */

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ffn.h"
#include "layernorm.h"
#include "matmul.h"
#include "mha.h"
#include "residual.h"
#include "sdpa.h"
#include "softmax.h"
#include "threads.h"

/* Given helpers, defined at the end of the file. */
static int check_source(const Model *m, const int64_t *src, int N, int S, int M, Error *err);
static int check_decode(const Model *m, const int64_t *src, int N, int S,
                        const DecodeOptions *d, int beam, Error *err);
static inline int argmax_first(const float *x, int n);
static inline double log_sum_exp(const float *x, int n);

int decode_cache_init(DecodeCache *c, Model *m, const int64_t *src, int N, int S, int M,
                      Error *err)
{
    memset(c, 0, sizeof *c);
    if (check_source(m, src, N, S, M, err) != 0) return -1;
    /* BEGIN SOLUTION */
    const ModelConfig *cfg = &m->cfg;
    int lm = cfg->kind == MODEL_LM;
    int D = cfg->d_model, H = cfg->nhead, Dh = D / H;
    int K = lm ? cfg->num_encoder_layers : cfg->num_decoder_layers;
    c->N = N, c->S = S, c->M = M, c->t = 0;
    c->D = D, c->H = H, c->Dh = Dh, c->F = cfg->dim_feedforward, c->layers = K;
    size_t self = (size_t)K * N * M * D, cross = (size_t)K * N * S * D, nd = (size_t)N * D;
    c->self_k = malloc(self * sizeof(float));
    c->self_v = malloc(self * sizeof(float));
    c->self_bias = calloc((size_t)N * M, sizeof(float));
    float **one[] = {&c->x, &c->y, &c->sub, &c->q, &c->k, &c->v, &c->o};
    int ok = c->self_k && c->self_v && c->self_bias;
    for (size_t i = 0; i < sizeof one / sizeof one[0]; i++)
        ok &= !!(*one[i] = malloc(nd * sizeof(float)));
    ok &= !!(c->pre = malloc((size_t)N * c->F * sizeof(float)));
    ok &= !!(c->hidden = malloc((size_t)N * c->F * sizeof(float)));
    ok &= !!(c->att = malloc(((size_t)N * H * (M > S ? M : S)) * sizeof(float)));
    if (!ok) {
        decode_cache_free(c);
        return error_set(err, "decode: out of memory for the cache of %d x %d positions", N, M);
    }
    if (lm) return 0;               /* no source, no cross-attention */
    c->cross_k = malloc(cross * sizeof(float));
    c->cross_v = malloc(cross * sizeof(float));
    c->cross_bias = calloc((size_t)N * S, sizeof(float));
    if (!c->cross_k || !c->cross_v || !c->cross_bias) {
        decode_cache_free(c);
        return error_set(err, "decode: out of memory for the cache of %d x %d positions", N, S);
    }
    for (int64_t i = 0; i < (int64_t)N * S; i++)
        c->cross_bias[i] = cfg->pad_id >= 0 && src[i] == cfg->pad_id ? -INFINITY : 0.0f;

    /* The encoder's output, from a forward with a one-position target. */
    ModelWork w;
    int64_t *first = malloc((size_t)N * sizeof *first);
    float *kv = malloc((size_t)N * S * D * sizeof *kv);
    int rc = first && kv ? 0 : error_set(err, "decode: out of memory");
    if (rc == 0) rc = model_work_alloc(&w, m, N, S, 1, 0, err);
    else memset(&w, 0, sizeof w);
    /* any id that is not padding: the decoder's output is not used */
    for (int n = 0; rc == 0 && n < N; n++) first[n] = cfg->pad_id == 0 ? 1 % cfg->tgt_vocab : 0;
    if (rc == 0 && model_forward(m, &w, src, first, NULL) != 0)
        rc = error_set(err, "decode: model_forward failed");
    /* Each layer's cross-attention keys and values, once: memory W_k^T + b_k
     * and memory W_v^T + b_v, heads split, (N, H, S, Dh). */
    for (int l = 0; rc == 0 && l < K; l++) {
        float *wt[3], *b[3];
        mha_in_proj_params(&m->views.decoder.layers[l].multihead_attn, D, wt, b);
        size_t at = (size_t)l * N * S * D;
        if (linear_forward(kv, w.memory, wt[1], b[1], N * S, D, D) != 0 ||
            mha_split_heads(c->cross_k + at, kv, N, S, H, Dh) != 0 ||
            linear_forward(kv, w.memory, wt[2], b[2], N * S, D, D) != 0 ||
            mha_split_heads(c->cross_v + at, kv, N, S, H, Dh) != 0)
            rc = error_set(err, "decode: the cross-attention projections failed");
    }
    model_work_free(&w);
    free(first), free(kv);
    if (rc != 0) decode_cache_free(c);
    return rc;
    /* END SOLUTION */
}

/* One query per (row, head) against keys (N, H, stride, Dh) 0..len-1, with
 * an additive bias (N, stride) over the keys: o (N, D), heads merged. */
static int attend_one(DecodeCache *c, float *o, const float *q, const float *keys,
                      const float *values, const float *bias, int stride, int len)
{
    const int N = c->N, H = c->H, Dh = c->Dh;
    const float scale = sdpa_default_scale(Dh);
    int rc = 0;
    #pragma omp parallel for schedule(static) reduction(|:rc)
    for (int nh = 0; nh < N * H; nh++) {
        int n = nh / H, h = nh % H;
        const float *k = keys + (size_t)nh * stride * Dh, *v = values + (size_t)nh * stride * Dh;
        /* the row's bias over keys 0..len-1 is the first len entries of its row */
        SdpaArgs one = {1, 1, len, Dh, Dh, scale, 0, bias + (size_t)n * stride, NULL, 0.0f};
        rc |= sdpa_forward(o + (size_t)n * c->D + h * Dh, c->att + (size_t)nh * stride,
                           q + (size_t)n * c->D + h * Dh, k, v, &one);
    }
    return rc ? -1 : 0;
}

/* out (N, D) = attention of x (N, D) as queries: self-attention (keys and
 * values appended to the cache at position t) or cross-attention. */
static int attention_step(DecodeCache *c, const MhaParams *p, float *out, const float *x, int l,
                          int cross)
{
    const int N = c->N, D = c->D, H = c->H, Dh = c->Dh, t = c->t;
    float *w[3], *b[3];
    mha_in_proj_params(p, D, w, b);
    if (linear_forward(c->q, x, w[0], b[0], N, D, D) != 0) return -1;
    if (cross) {
        size_t at = (size_t)l * N * c->S * D;
        if (attend_one(c, c->o, c->q, c->cross_k + at, c->cross_v + at, c->cross_bias, c->S,
                       c->S) != 0)
            return -1;
    } else {
        size_t at = (size_t)l * N * c->M * D;
        float *keys = c->self_k + at, *values = c->self_v + at;
        if (linear_forward(c->k, x, w[1], b[1], N, D, D) != 0 ||
            linear_forward(c->v, x, w[2], b[2], N, D, D) != 0)
            return -1;
        for (int n = 0; n < N; n++)
            for (int h = 0; h < H; h++) {
                size_t row = (((size_t)n * H + h) * c->M + t) * Dh;
                memcpy(keys + row, c->k + (size_t)n * D + h * Dh, (size_t)Dh * sizeof(float));
                memcpy(values + row, c->v + (size_t)n * D + h * Dh, (size_t)Dh * sizeof(float));
            }
        if (attend_one(c, c->o, c->q, keys, values, c->self_bias, c->M, t + 1) != 0) return -1;
    }
    return linear_forward(out, c->o, p->out_proj_weight, p->out_proj_bias, N, D, D);
}

int decode_cache_step(DecodeCache *c, Model *m, const int64_t *tokens, float *logits)
{
    if (c->t >= c->M) return -1;
    /* BEGIN SOLUTION */
    const ModelConfig *cfg = &m->cfg;
    const ModelParams *mp = &m->views;
    const int N = c->N, D = c->D, t = c->t, lm = cfg->kind == MODEL_LM;
    const float eps = cfg->eps;
    /* The front end at position t: embed(token) * scale + pos[t]; a language
     * model has only the source side. */
    const float *embed = cfg->share_embeddings || lm ? mp->src_embed : mp->tgt_embed;
    const float *pos = !cfg->learned_pos ? m->pos_table : lm ? mp->src_pos : mp->tgt_pos;
    float scale = cfg->scale_embedding == 1 ? sqrtf((float)D)
                : cfg->scale_embedding == 2 ? (lm ? mp->src_scale : mp->tgt_scale)[0] : 1.0f;
    for (int n = 0; n < N; n++) {
        if (tokens[n] < 0 || tokens[n] >= cfg->tgt_vocab) return -1;
        const float *e = embed + tokens[n] * D, *p = pos + (size_t)t * D;
        for (int d = 0; d < D; d++) c->x[(size_t)n * D + d] = e[d] * scale + p[d];
        c->self_bias[(size_t)n * c->M + t] = tokens[n] == cfg->pad_id ? -INFINITY : 0.0f;
    }
    /* The layers, one position each: nn.TransformerDecoderLayer's three
     * sub-layers (self-attention, cross-attention, FFN), or a language
     * model's nn.TransformerEncoderLayer's two (no cross-attention); post-norm
     * x = norm(x + f(x)) or pre-norm x = x + f(norm(x)). */
    for (int l = 0; l < c->layers; l++) {
        const MhaParams *attn[2];
        const float *norm_w[3], *norm_b[3];
        FfnParams ffn;
        if (lm) {
            const EncoderLayerParams *p = &mp->encoder.layers[l];
            attn[0] = &p->self_attn, attn[1] = NULL;
            norm_w[0] = p->norm1_weight, norm_b[0] = p->norm1_bias;
            norm_w[2] = p->norm2_weight, norm_b[2] = p->norm2_bias;
            ffn = (FfnParams){p->linear1_weight, p->linear1_bias, p->linear2_weight,
                              p->linear2_bias};
        } else {
            const DecoderLayerParams *p = &mp->decoder.layers[l];
            attn[0] = &p->self_attn, attn[1] = &p->multihead_attn;
            for (int k = 0; k < 3; k++) norm_w[k] = p->norm_weight[k], norm_b[k] = p->norm_bias[k];
            ffn = (FfnParams){p->linear1_weight, p->linear1_bias, p->linear2_weight,
                              p->linear2_bias};
        }
        FfnCache ffn_c = {D, c->F, c->pre, c->hidden, NULL, 0.0f};
        for (int k = 0; k < 3; k++) {
            if (k == 1 && lm) continue;
            const float *in = c->x;
            if (cfg->norm_first) {
                if (layernorm_forward(c->y, NULL, NULL, c->x, norm_w[k], norm_b[k], 1, N, D,
                                      eps) != 0)
                    return -1;
                in = c->y;
            }
            int rc = k < 2 ? attention_step(c, attn[k], c->sub, in, l, k == 1)
                           : ffn_forward(c->sub, &ffn_c, in, &ffn, N);
            if (rc != 0) return -1;
            if (residual_forward(c->x, c->x, c->sub, N * D) != 0) return -1;
            if (!cfg->norm_first &&
                layernorm_forward(c->x, NULL, NULL, c->x, norm_w[k], norm_b[k], 1, N, D,
                                  eps) != 0)
                return -1;
        }
    }
    const float *top = c->x;
    if (cfg->final_norm) {
        const float *w = lm ? mp->encoder.norm_weight : mp->decoder.norm_weight;
        const float *b = lm ? mp->encoder.norm_bias : mp->decoder.norm_bias;
        if (layernorm_forward(c->y, NULL, NULL, c->x, w, b, 1, N, D, eps) != 0) return -1;
        top = c->y;
    }
    if (linear_forward(logits, top, mp->generator_weight, mp->generator_bias, N, D,
                       cfg->tgt_vocab) != 0)
        return -1;
    c->t++;
    return 0;
    /* END SOLUTION */
}

int decode_cache_reorder(DecodeCache *c, const int *parents, int n)
{
    const int H = c->H, Dh = c->Dh, M = c->M;
    size_t row = (size_t)H * M * Dh;              /* one batch row of one layer */
    float *tmp = malloc((size_t)n * row * sizeof *tmp);
    float *bias = malloc((size_t)n * M * sizeof *bias);
    if (!tmp || !bias) {
        free(tmp), free(bias);
        return -1;
    }
    for (int i = 0; i < n; i++)
        if (parents[i] < 0 || parents[i] >= c->N) {
            free(tmp), free(bias);
            return -1;
        }
    for (int l = 0; l < c->layers; l++)
        for (int which = 0; which < 2; which++) {
            float *base = (which ? c->self_v : c->self_k) + (size_t)l * c->N * row;
            for (int i = 0; i < n; i++) memcpy(tmp + i * row, base + parents[i] * row,
                                               row * sizeof *tmp);
            memcpy(base, tmp, (size_t)n * row * sizeof *tmp);
        }
    for (int i = 0; i < n; i++)
        memcpy(bias + (size_t)i * M, c->self_bias + (size_t)parents[i] * M,
               (size_t)M * sizeof *bias);
    memcpy(c->self_bias, bias, (size_t)n * M * sizeof *bias);
    free(tmp), free(bias);
    return 0;
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
    int M = d->max_new, V = c->tgt_vocab, cached = !d->no_cache;
    int64_t fill = c->pad_id >= 0 ? c->pad_id : d->eos_id;
    int64_t *tgt = malloc((size_t)N * M * sizeof *tgt);     /* (N, M) the decoder's input */
    float *logits = malloc((size_t)N * V * sizeof *logits); /* (N, V) the cache's step */
    double *sum = calloc((size_t)N, sizeof *sum);           /* (N,) */
    unsigned char *done = calloc((size_t)N, 1);             /* (N,) */
    int64_t *next = malloc((size_t)N * sizeof *next);       /* (N,) the tokens fed at step t */
    ModelWork w;
    DecodeCache cache;
    memset(&w, 0, sizeof w);
    memset(&cache, 0, sizeof cache);
    int rc = 0;
    if (!tgt || !logits || !sum || !done || !next) rc = error_set(err, "decode: out of memory");
    else if (cached) rc = decode_cache_init(&cache, m, src, N, S, M, err);
    else rc = model_work_alloc(&w, m, N, S, M, 0, err);
    if (rc == 0) {
        for (int64_t i = 0; i < (int64_t)N * M; i++) tgt[i] = out[i] = fill;
        for (int n = 0; n < N; n++) tgt[(size_t)n * M] = next[n] = d->sos_id;
        int live = N;
        for (int t = 0; t < M && live > 0 && rc == 0; t++) {
            threads_adapt();   /* as many threads as the machine has free cores (chapter 00) */
            /* The logits after token t: one cached step, or the whole model
             * on the prefix (and its filler), read at position t. */
            if (cached ? decode_cache_step(&cache, m, next, logits) != 0
                       : model_forward(m, &w, src, tgt, NULL) != 0) {
                rc = error_set(err, "decode: the decoder failed at position %d", t);
                break;
            }
            for (int n = 0; n < N; n++) {
                next[n] = fill;
                if (done[n]) continue;
                const float *row = cached ? logits + (size_t)n * V
                                          : w.logits + ((size_t)n * M + t) * V;
                int best = argmax_first(row, V);
                out[(size_t)n * M + t] = best;
                sum[n] += (double)row[best] - log_sum_exp(row, V);
                if (best == d->eos_id) done[n] = 1, live--;
                else if (t + 1 < M) tgt[(size_t)n * M + t + 1] = next[n] = best;
            }
        }
        for (int n = 0; scores && rc == 0 && n < N; n++) scores[n] = (float)sum[n];
    }
    model_work_free(&w);
    decode_cache_free(&cache);
    free(tgt), free(logits), free(sum), free(done), free(next);
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
    int cached = !d->no_cache;
    float *step_logits = malloc((size_t)K * V * sizeof *step_logits);   /* (K, V) */
    int64_t *feed = malloc((size_t)K * sizeof *feed);                   /* (K,) */
    int *parent = malloc((size_t)K * sizeof *parent);                   /* (K,) */
    ModelWork w;
    DecodeCache cache;
    memset(&w, 0, sizeof w);
    memset(&cache, 0, sizeof cache);
    int rc = 0;
    if (!b.src || !b.tgt || !b.live || !b.next || !b.live_score || !b.next_score || !b.cand ||
        !b.fin || !b.fin_len || !b.fin_score || !step_logits || !feed || !parent)
        rc = error_set(err, "decode: out of memory for a beam of %d", K);
    else if (!cached) rc = model_work_alloc(&w, m, K, S, M, 0, err);

    for (int n = 0; n < N && rc == 0; n++) {
        for (int k = 0; k < K; k++)
            memcpy(b.src + (size_t)k * S, src + (size_t)n * S, (size_t)S * sizeof *src);
        /* The cache holds K rows of this source, one per beam. */
        decode_cache_free(&cache);
        if (cached && decode_cache_init(&cache, m, b.src, K, S, M, err) != 0) {
            rc = -1;
            break;
        }
        int nlive = 1, nfin = 0, t = 0;
        b.live_score[0] = 0.0;
        for (; t < M && nlive > 0; t++) {
            threads_adapt();
            /* The decoder's input: <sos> and the t tokens of each live beam;
             * rows past the live beams repeat beam 0 (their logits are unused).
             * The cache reads only the newest of them. */
            for (int k = 0; k < K; k++) {
                const int64_t *toks = b.live + (size_t)(k < nlive ? k : 0) * M;
                int64_t *row = b.tgt + (size_t)k * M;
                row[0] = d->sos_id;
                for (int j = 1; j < M; j++) row[j] = j <= t ? toks[j - 1] : fill;
                feed[k] = row[t];
            }
            if (cached ? decode_cache_step(&cache, m, feed, step_logits) != 0
                       : model_forward(m, &w, b.src, b.tgt, NULL) != 0) {
                rc = error_set(err, "decode: the decoder failed at position %d", t);
                break;
            }
            /* Every live beam times every token. */
            int ncand = 0;
            for (int k = 0; k < nlive; k++) {
                const float *logits = cached ? step_logits + (size_t)k * V
                                             : w.logits + ((size_t)k * M + t) * V;
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
                    parent[nnext] = cd->beam;
                    b.next_score[nnext++] = cd->score;
                }
            }
            /* The cache's rows follow their beams. */
            if (cached && nnext > 0 && decode_cache_reorder(&cache, parent, nnext) != 0) {
                rc = error_set(err, "decode: out of memory for the cache");
                break;
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
    decode_cache_free(&cache);
    free(step_logits), free(feed), free(parent);
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

/* ------------------------------------------------------------------------ */
/* Checks (given)                                                            */
/* ------------------------------------------------------------------------ */

/* A seq2seq model, N sources of S ids inside its vocabulary, and M decoder
 * positions; or a language model (no source: S 0) and M positions. */
static int check_source(const Model *m, const int64_t *src, int N, int S, int M, Error *err)
{
    const ModelConfig *c = &m->cfg;
    if (c->kind == MODEL_LM) {
        if (N < 1 || S != 0 || M < 1 || M > c->max_len)
            return error_set(err, "decode: a language model takes no source and 1..max_len "
                             "(%d) positions (batch %d, source %d, positions %d)", c->max_len,
                             N, S, M);
        return 0;
    }
    if (c->kind != MODEL_SEQ2SEQ)
        return error_set(err, "decode: the model is a %s; only a seq2seq or language model "
                         "writes sequences", model_kind_name(c->kind));
    if (N < 1 || S < 1)
        return error_set(err, "decode: batch %d and source length %d must be at least 1", N, S);
    if (S > c->max_len)
        return error_set(err, "decode: a source of %d positions is longer than max_len %d", S,
                         c->max_len);
    if (M < 1 || M > c->max_len)
        return error_set(err, "decode: max_new %d must lie in 1..max_len (%d): the decoder "
                         "reads <sos> and up to max_new - 1 tokens", M, c->max_len);
    return model_check_ids(src, (int64_t)N * S, c->src_vocab, "decode: src", err);
}

static int check_decode(const Model *m, const int64_t *src, int N, int S,
                        const DecodeOptions *d, int beam, Error *err)
{
    const ModelConfig *c = &m->cfg;
    if (check_source(m, src, N, S, d->max_new, err) != 0) return -1;
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
    return 0;
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
/* The key/value cache                                                       */
/* ------------------------------------------------------------------------ */

void decode_cache_free(DecodeCache *c)
{
    float *bufs[] = {c->self_k, c->self_v, c->cross_k, c->cross_v, c->self_bias, c->cross_bias,
                     c->x, c->y, c->sub, c->q, c->k, c->v, c->o, c->pre, c->hidden, c->att};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    memset(c, 0, sizeof *c);
}
