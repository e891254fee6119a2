/*
 * generate.c - see generate.h.
 */
#include "generate.h"

#include <stdlib.h>
#include <string.h>

#include "decode.h"
#include "lm_text.h"
#include "rng.h"

/* The model's state between bytes: the cache, or the work of a whole
 * context. */
typedef struct {
    Model *m;
    int M, no_cache;
    DecodeCache cache;
    ModelWork work;
    int64_t *ids;                   /* (M,) the context (no_cache) */
    int len;                        /* its bytes */
} Writer;

/* Feeds bytes ctx[0..n) into a fresh state; logits (V,) the next byte's. */
static int writer_restart(Writer *w, const uint8_t *ctx, int n, float *logits, Error *err)
{
    if (w->no_cache) {
        for (int i = 0; i < n; i++) w->ids[i] = ctx[i];
        w->len = n;
        model_work_free(&w->work);
        if (model_work_alloc(&w->work, w->m, 1, n, 0, 0, err) != 0 ||
            model_forward(w->m, &w->work, w->ids, NULL, NULL) != 0)
            return error_set(err, "generate: the model's forward failed");
        memcpy(logits, w->work.logits + (size_t)(n - 1) * LM_VOCAB, LM_VOCAB * sizeof *logits);
        return 0;
    }
    decode_cache_free(&w->cache);
    if (decode_cache_init(&w->cache, w->m, NULL, 1, 0, w->M, err) != 0) return -1;
    for (int i = 0; i < n; i++) {
        int64_t id = ctx[i];
        if (decode_cache_step(&w->cache, w->m, &id, logits) != 0)
            return error_set(err, "generate: a cached step failed");
    }
    return 0;
}

/* Appends one byte; logits (V,) the next byte's. Full: 1, nothing done. */
static int writer_push(Writer *w, uint8_t byte, float *logits, Error *err)
{
    int64_t id = byte;
    if (w->no_cache) {
        if (w->len == w->M) return 1;
        w->ids[w->len++] = id;
        model_work_free(&w->work);
        if (model_work_alloc(&w->work, w->m, 1, w->len, 0, 0, err) != 0 ||
            model_forward(w->m, &w->work, w->ids, NULL, NULL) != 0)
            return error_set(err, "generate: the model's forward failed");
        memcpy(logits, w->work.logits + (size_t)(w->len - 1) * LM_VOCAB,
               LM_VOCAB * sizeof *logits);
        return 0;
    }
    if (w->cache.t == w->M) return 1;
    return decode_cache_step(&w->cache, w->m, &id, logits) != 0
               ? error_set(err, "generate: a cached step failed") : 0;
}

int lm_generate(Model *m, const char *prompt, const GenerateOptions *g, Text *out, Error *err)
{
    const int V = LM_VOCAB, M = m->cfg.max_len;
    if (m->cfg.kind != MODEL_LM || m->cfg.tgt_vocab != V)
        return error_set(err, "generate: not a byte-level language model (%s, %d ids)",
                         model_kind_name(m->cfg.kind), m->cfg.tgt_vocab);
    if (g->length < 1) return error_set(err, "--length %d must be at least 1", g->length);
    if (M < 2) return error_set(err, "generate: max_len %d leaves no room to write", M);

    /* the history: '\n', the prompt, then what is written */
    size_t plen = strlen(prompt), cap = 1 + plen + (size_t)g->length;
    uint8_t *hist = malloc(cap);
    float *logits = malloc(V * sizeof *logits), *probs = malloc(V * sizeof *probs);
    int *order = malloc(V * sizeof *order);
    Writer w = {.m = m, .M = M, .no_cache = g->no_cache};
    w.ids = malloc((size_t)M * sizeof *w.ids);
    int rc = hist && logits && probs && order && w.ids
                 ? 0 : error_set(err, "generate: out of memory");
    size_t n = 0;
    if (rc == 0) {
        hist[n++] = '\n';
        memcpy(hist + n, prompt, plen);
        n += plen;
        /* a prompt longer than the context: its last M bytes */
        int keep = n > (size_t)M ? M : (int)n;
        rc = writer_restart(&w, hist + n - keep, keep, logits, err);
    }
    Rng rng;
    rng_seed(&rng, g->seed, 12);
    for (int i = 0; rc == 0 && i < g->length; i++) {
        if (sampling_probs(probs, order, logits, V, &g->sampling, err) != 0) {
            rc = -1;
            break;
        }
        uint8_t byte = (uint8_t)sampling_pick(probs, V, rng_uniform(&rng));
        hist[n++] = byte;
        rc = text_append(out, (const char *)&byte, 1, err);
        if (g->written) g->written(g->ctx, i + 1);
        if (rc != 0 || i + 1 == g->length) break;
        rc = writer_push(&w, byte, logits, err);
        if (rc == 1) {   /* the context is full: go on from its second half */
            int keep = M / 2;
            rc = writer_restart(&w, hist + n - keep, keep, logits, err);
        }
    }
    decode_cache_free(&w.cache);
    model_work_free(&w.work);
    free(w.ids), free(hist), free(logits), free(probs), free(order);
    return rc == 0 ? 0 : -1;
}
