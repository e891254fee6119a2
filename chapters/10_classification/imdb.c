/*
 * imdb.c - see imdb.h.
 */
#include "imdb.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "threads.h"   /* time_now() */

void imdb_free(Imdb *d)
{
    reviews_free(&d->train);
    reviews_free(&d->val);
    reviews_free(&d->test);
    reviews_free(&d->rt);
    if (d->have_bpe) bpe_free(&d->bpe);
    review_rows_free(&d->train_rows);
    review_rows_free(&d->val_rows);
    review_rows_free(&d->test_rows);
    review_rows_free(&d->rt_rows);
    text_free(&d->merges);
    memset(d, 0, sizeof *d);
}

/* Reads, cleans and splits the reviews of dir; the training and validation
 * reviews only when with_train. */
int imdb_read(Imdb *d, const char *dir, int with_train, Error *err)
{
    ReviewSet all = {0}, train = {0};
    char path[4096];
    memset(d, 0, sizeof *d);
    snprintf(path, sizeof path, "%s/imdb.tsv", dir);
    if (reviews_read(&all, path, err) != 0) return -1;
    if (all.n != 25000) {
        error_set(err, "%s: %" PRId64 " reviews, the IMDb set has 25000 (run make imdb again)",
                  path, all.n);
        reviews_free(&all);
        return -1;
    }
    int rc = reviews_clean(&all, err);
    if (rc == 0) rc = reviews_split(&all, 5, &train, &d->test, err);
    reviews_free(&all);
    if (rc == 0 && with_train) rc = reviews_split(&train, 10, &d->train, &d->val, err);
    reviews_free(&train);
    snprintf(path, sizeof path, "%s/rotten_tomatoes.tsv", dir);
    if (rc == 0) rc = reviews_read(&d->rt, path, err);
    if (rc == 0) rc = reviews_clean(&d->rt, err);
    if (rc != 0) imdb_free(d);
    return rc;
}

/* Trains the tokenizer on the first n training reviews (0: all). */
int imdb_train_bpe(Imdb *d, int n, int vocab_size, Error *err)
{
    ReviewSet part = d->train;
    Text corpus = {0};
    if (n > 0 && n < part.n) part.n = n;
    if (reviews_corpus(&part, &corpus, err) != 0) return -1;
    double started = time_now();
    int rc = bpe_init(&d->bpe, err);
    if (rc == 0) {
        d->have_bpe = 1;
        rc = bpe_train(&d->bpe, corpus.data, corpus.len, vocab_size, err);
    }
    if (rc == 0)
        printf("BPE: %" PRId64 " merges learned on %" PRId64 " training reviews (%.1f MB) in "
               "%.1f s\n", d->bpe.n_merges, part.n, corpus.len / 1e6, time_now() - started);
    text_free(&corpus);
    return rc;
}

/* The rows of the test sets (and of the training set when it was read). */
int imdb_encode(Imdb *d, int S, Error *err)
{
    double started = time_now();
    if ((d->train.n && review_rows(&d->train_rows, &d->train, &d->bpe, S, err) != 0) ||
        (d->val.n && review_rows(&d->val_rows, &d->val, &d->bpe, S, err) != 0) ||
        review_rows(&d->test_rows, &d->test, &d->bpe, S, err) != 0 ||
        review_rows(&d->rt_rows, &d->rt, &d->bpe, S, err) != 0)
        return -1;
    const ReviewRows *r = d->train.n ? &d->train_rows : &d->test_rows;
    printf("encoded in %.1f s: %.1f tokens a %s review on average; %d kept at most: %" PRId64
           " of %" PRId64 " %s reviews truncated\n", time_now() - started,
           (double)r->tokens / r->n, d->train.n ? "training" : "test", S, r->truncated, r->n,
           d->train.n ? "training" : "test");
    return 0;
}

/* The tokenizer and review length a model or checkpoint file carries. */
int imdb_read_tokenizer(const TensorFile *f, Bpe *bpe, int *max_len, Error *err)
{
    const char *merges = tensorfile_meta(f, META_MERGES);
    long long S;
    if (!merges)
        return error_set(err, "%s: no metadata '%s' (not a model written by 10_classification)",
                         f->path, META_MERGES);
    if (tensorfile_meta_int(f, META_MAX_LEN, -1, &S, err) != 0) return -1;
    if (S < 1 || S > MODEL_MAX_LEN)
        return error_set(err, "%s: metadata '%s' is missing or not in 1..%d", f->path,
                         META_MAX_LEN, MODEL_MAX_LEN);
    *max_len = (int)S;
    return bpe_from_merges(bpe, merges, f->path, err);
}

/* The metadata pairs that carry the tokenizer: keys and values, NULL-ended.
 * merges and len_text are the caller's buffers. */
int imdb_tokenizer_meta(Imdb *d, int S, Error *err)
{
    text_free(&d->merges);
    if (bpe_merges_text(&d->bpe, &d->merges, err) != 0) return -1;
    snprintf(d->len_text, sizeof d->len_text, "%d", S);
    d->meta[0] = META_MERGES;
    d->meta[1] = (const char *)d->merges.data;
    d->meta[2] = META_MAX_LEN;
    d->meta[3] = d->len_text;
    d->meta[4] = NULL;
    return 0;
}

/* Accuracy of m on rows, printed with its name; *acc receives it. */
int imdb_report(Model *m, const ReviewRows *rows, const char *name, double *acc, Error *err)
{
    StepResult r;
    Examples ex = review_examples(rows, m->cfg.src_vocab);
    double started = time_now();
    if (evaluate(m, NULL, &ex, 64, &r, err) != 0) return -1;
    *acc = (double)r.correct / r.count;
    printf("%s: accuracy %.4f (%" PRId64 " of %" PRId64 "), loss %.4f, %.1f s\n", name, *acc,
           r.correct, r.count, r.loss, time_now() - started);
    return 0;
}
