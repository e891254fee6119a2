/*
 * lm_text.c - see lm_text.h.
 */
#include "lm_text.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "next_token.h"
#include "review.h"

void lm_text_free(LmText *t)
{
    text_free(&t->train);
    text_free(&t->val);
    text_free(&t->test);
    memset(t, 0, sizeof *t);
}

/* stream += '\n' + review i of rs, cleaned (the first '\n' starts the stream) */
static int append_review(Text *stream, int64_t *count, ReviewSet *rs, int64_t i, Error *err)
{
    review_unbreak(&rs->text[i]);
    if (text_append(stream, "\n", 1, err) != 0 ||
        text_append(stream, rs->text[i].data, rs->text[i].len, err) != 0)
        return -1;
    (*count)++;
    return 0;
}

int lm_text_read(LmText *t, const char *dir, int64_t train_reviews, int64_t test_reviews,
                 Error *err)
{
    ReviewSet all = {0}, train = {0}, test = {0};
    char path[4096];
    memset(t, 0, sizeof *t);
    snprintf(path, sizeof path, "%s/imdb.tsv", dir);
    if (reviews_read(&all, path, err) != 0) return -1;
    int rc = 0;
    if (all.n != 25000)
        rc = error_set(err, "%s: %" PRId64 " reviews, the IMDb set has 25000 (run make imdb "
                       "again)", path, all.n);
    if (rc == 0) rc = reviews_split(&all, 5, &train, &test, err);
    reviews_free(&all);
    if (test_reviews <= 0 || test_reviews > test.n) test_reviews = test.n;
    for (int64_t i = 0; rc == 0 && i < test_reviews; i++)
        rc = append_review(&t->test, &t->n_test, &test, i, err);
    /* every 20th training review validates */
    if (train_reviews == 0 || train_reviews > train.n) train_reviews = train.n;
    for (int64_t i = 0; rc == 0 && i < train_reviews; i++)
        rc = append_review(i % 20 == 19 ? &t->val : &t->train,
                           i % 20 == 19 ? &t->n_val : &t->n_train, &train, i, err);
    reviews_free(&train);
    reviews_free(&test);
    if (rc != 0) lm_text_free(t);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Training windows                                                          */
/* ------------------------------------------------------------------------ */

/* Window idx[n]: src = bytes [w, w + S), target = bytes [w + 1, w + S], w = idx[n] * S. */
static int fill_window(const void *data, const int64_t *idx, int N, int64_t *src,
                       int64_t *tgt_in, int64_t *target, Error *err)
{
    const LmWindows *ws = data;
    const uint8_t *bytes = (const uint8_t *)ws->stream->data;
    int S = ws->S;
    for (int n = 0; n < N; n++) {
        const uint8_t *w = bytes + idx[n] * S;
        for (int j = 0; j < S; j++) {
            src[(size_t)n * S + j] = w[j];
            target[(size_t)n * S + j] = w[j + 1];
        }
    }
    return 0;
}

Examples lm_examples(LmWindows *ws, const Text *stream, int S)
{
    ws->stream = stream, ws->S = S;
    Examples ex = {0};
    ex.n = S > 0 && stream->len > (size_t)S ? (int64_t)(stream->len - 1) / S : 0;
    ex.S = S;
    ex.src_vocab = ex.tgt_vocab = LM_VOCAB;
    ex.longest = S;
    ex.data = ws;
    ex.fill = fill_window;
    return ex;
}

/* ------------------------------------------------------------------------ */
/* Bits per byte                                                             */
/* ------------------------------------------------------------------------ */

/* One window: inputs bytes [start, start + S), targets [start + 1, start + S];
 * the targets from index `from` on are scored. */
typedef struct {
    int64_t start;
    int from;
} Window;

int lm_bits(Model *m, const Text *stream, int R, int N, double *bits, int64_t *bytes,
            Error *err)
{
    const uint8_t *b = (const uint8_t *)stream->data;
    int64_t n_predicted = stream->len > 0 ? (int64_t)stream->len - 1 : 0;
    int V = m->cfg.tgt_vocab;
    if (m->cfg.kind != MODEL_LM || V != LM_VOCAB)
        return error_set(err, "bits per byte: not a byte-level language model (%s, %d ids)",
                         model_kind_name(m->cfg.kind), V);
    if (n_predicted < 1) return error_set(err, "bits per byte: the text has no byte to predict");
    int S = m->cfg.max_len < n_predicted ? m->cfg.max_len : (int)n_predicted;
    if (R < 1 || R > S) return error_set(err, "--stride %d is not in 1..%d (the context)", R, S);
    if (N < 1) return error_set(err, "bits per byte: batch %d", N);

    /* The windows: the first scores everything, the others their last R. */
    int64_t cap = 1 + (n_predicted - S + R - 1) / R, n_windows = 0, scored = S;
    Window *windows = malloc((size_t)cap * sizeof *windows);
    if (!windows) return error_set(err, "bits per byte: out of memory");
    windows[n_windows++] = (Window){0, 0};
    while (scored < n_predicted) {
        int64_t start = scored + R - S;
        if (start + S > n_predicted) start = n_predicted - S;
        windows[n_windows++] = (Window){start, (int)(scored - start)};
        scored = start + S;
    }

    ModelWork w;
    int64_t *ids = malloc((size_t)N * (S + 1) * sizeof *ids);
    int64_t *src = malloc((size_t)N * S * sizeof *src);
    int rc = ids && src ? model_work_alloc(&w, m, N, S, 0, 0, err)
                        : error_set(err, "bits per byte: out of memory");
    double total = 0.0;
    for (int64_t first = 0; rc == 0 && first < n_windows; first += N) {
        /* rows past the last window repeat it and are not scored */
        for (int n = 0; n < N; n++) {
            const Window *win = &windows[first + n < n_windows ? first + n : n_windows - 1];
            for (int j = 0; j <= S; j++) ids[(size_t)n * (S + 1) + j] = b[win->start + j];
            for (int j = 0; j < S; j++) src[(size_t)n * S + j] = b[win->start + j];
        }
        if (model_forward(m, &w, src, NULL, NULL) != 0) {
            rc = error_set(err, "bits per byte: model_forward failed");
            break;
        }
        for (int n = 0; rc == 0 && n < N && first + n < n_windows; n++) {
            int from = windows[first + n].from, count = S - from;
            double nats;
            rc = next_token_loss(&nats, NULL, w.logits + ((size_t)n * S + from) * V,
                                 ids + (size_t)n * (S + 1) + from, 1, count, V, err);
            total += nats * count / log(2.0);
        }
    }
    if (ids && src) model_work_free(&w);
    free(ids), free(src), free(windows);
    if (rc != 0) return -1;
    *bits = total;
    *bytes = n_predicted;
    return 0;
}
