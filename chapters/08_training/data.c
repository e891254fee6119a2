/*
 * data.c - the synthetic tasks, the two batch layouts and the Batcher
 * (data.h; the chapter's README, "The data: synthetic tasks and the batcher").
 *
 * Letters: data.h's; C = num_categories is this chapter's own letter.
 */
#include "data.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"   /* not_implemented(), used by the exercise stubs */

/* Given helpers, defined at the end of the file. */
static int dataset_alloc(SeqDataset *ds, int64_t n, int S, int C, Error *err);

int seq_dataset_make(SeqDataset *ds, SeqTask task, int64_t n, int seq_len, int num_categories,
                     Rng *rng, Error *err)
{
    memset(ds, 0, sizeof *ds);
    if (task != SEQ_TASK_REVERSE && task != SEQ_TASK_COPY)
        return error_set(err, "seq_dataset_make: unknown task %d", (int)task);
    if (n < 1 || seq_len < 1)
        return error_set(err, "a dataset needs at least one sequence of at least one id (got "
                         "%lld sequences of length %d)", (long long)n, seq_len);
    if (num_categories < 1 || num_categories > INT32_MAX - SEQ2SEQ_FIRST)
        return error_set(err, "num_categories is %d; it must lie in 1..%d", num_categories,
                         INT32_MAX - SEQ2SEQ_FIRST);
    if (n > INT64_MAX / 8 / seq_len)
        return error_set(err, "a dataset of %lld sequences of length %d is too large",
                         (long long)n, seq_len);
    /* BEGIN SOLUTION */
    if (dataset_alloc(ds, n, seq_len, num_categories, err) != 0) return -1;
    const int S = seq_len;
    /* Serial: id k of the dataset is the k-th draw of the stream. */
    for (int64_t i = 0; i < n * S; i++) ds->x[i] = rng_below(rng, (uint32_t)num_categories);
    for (int64_t i = 0; i < n; i++) {
        const int64_t *x = ds->x + i * S;
        int64_t *y = ds->y + i * S;
        for (int s = 0; s < S; s++) y[s] = task == SEQ_TASK_REVERSE ? x[S - 1 - s] : x[s];
    }
    return 0;
    /* END SOLUTION */
}

int seq_dataset_split(const SeqDataset *all, int64_t n_first, SeqDataset *first,
                      SeqDataset *rest, Error *err)
{
    memset(first, 0, sizeof *first);
    memset(rest, 0, sizeof *rest);
    if (n_first < 1 || n_first >= all->n)
        return error_set(err, "cannot split %lld sequences after %lld: both parts must hold at "
                         "least one", (long long)all->n, (long long)n_first);
    const int S = all->seq_len, C = all->num_categories;
    if (dataset_alloc(first, n_first, S, C, err) != 0) return -1;
    if (dataset_alloc(rest, all->n - n_first, S, C, err) != 0) {
        seq_dataset_free(first);
        return -1;
    }
    size_t head = (size_t)(n_first * S) * sizeof *all->x;
    size_t tail = (size_t)((all->n - n_first) * S) * sizeof *all->x;
    memcpy(first->x, all->x, head);
    memcpy(first->y, all->y, head);
    memcpy(rest->x, all->x + n_first * S, tail);
    memcpy(rest->y, all->y + n_first * S, tail);
    return 0;
}

void seq_dataset_free(SeqDataset *ds)
{
    free(ds->x);
    free(ds->y);
    ds->x = ds->y = NULL;
    ds->n = 0;
}

/* Every index of a batch must name a sequence of the dataset. */
static int check_indices(const SeqDataset *ds, const int64_t *idx, int N, Error *err)
{
    if (N < 1) return error_set(err, "a batch needs at least one sequence (got %d)", N);
    for (int b = 0; b < N; b++)
        if (idx[b] < 0 || idx[b] >= ds->n)
            return error_set(err, "batch row %d: sequence %lld is outside the dataset 0..%lld", b,
                             (long long)idx[b], (long long)ds->n - 1);
    return 0;
}

int batch_encoder(int64_t *src, int64_t *target, const SeqDataset *ds, const int64_t *idx,
                  int N, Error *err)
{
    if (check_indices(ds, idx, N, err) != 0) return -1;
    /* BEGIN SOLUTION */
    const int S = ds->seq_len;
    for (int b = 0; b < N; b++) {
        memcpy(src + (int64_t)b * S, ds->x + idx[b] * S, (size_t)S * sizeof *src);
        memcpy(target + (int64_t)b * S, ds->y + idx[b] * S, (size_t)S * sizeof *target);
    }
    return 0;
    /* END SOLUTION */
}

int batch_seq2seq(int64_t *src, int64_t *tgt_in, int64_t *target, const SeqDataset *ds,
                  const int64_t *idx, int N, Error *err)
{
    if (check_indices(ds, idx, N, err) != 0) return -1;
    /* BEGIN SOLUTION */
    const int S = ds->seq_len, T = S + 1;
    for (int b = 0; b < N; b++) {
        const int64_t *x = ds->x + idx[b] * S, *y = ds->y + idx[b] * S;
        int64_t *s_row = src + (int64_t)b * S, *in_row = tgt_in + (int64_t)b * T;
        int64_t *out_row = target + (int64_t)b * T;
        for (int s = 0; s < S; s++) s_row[s] = x[s] + SEQ2SEQ_FIRST;
        /* Teacher forcing: at position t the decoder has read y_0..y_{t-1}
         * (after <sos>) and must predict y_t; after the last id, <eos>. */
        in_row[0] = SEQ2SEQ_SOS;
        for (int s = 0; s < S; s++) in_row[s + 1] = y[s] + SEQ2SEQ_FIRST;
        for (int s = 0; s < S; s++) out_row[s] = y[s] + SEQ2SEQ_FIRST;
        out_row[S] = SEQ2SEQ_EOS;
    }
    return 0;
    /* END SOLUTION */
}

/* ------------------------------------------------------------------------ */
/* The Batcher                                                               */
/* ------------------------------------------------------------------------ */

int batcher_init(Batcher *b, int64_t n, int batch_size, int drop_last, Error *err)
{
    memset(b, 0, sizeof *b);
    if (n < 1 || n > (int64_t)UINT32_MAX)
        return error_set(err, "cannot batch %lld sequences: the dataset must hold 1..%lld",
                         (long long)n, (long long)UINT32_MAX);
    if (batch_size < 1)
        return error_set(err, "--batch-size %d: the batch size must be at least 1", batch_size);
    if (drop_last && batch_size > n)
        return error_set(err, "--batch-size %d is larger than the dataset (%lld sequences): "
                         "with drop_last there would be no batch at all", batch_size,
                         (long long)n);
    b->order = malloc((size_t)n * sizeof *b->order);
    if (!b->order)
        return error_set(err, "out of memory for the order of %lld sequences", (long long)n);
    b->n = n;
    b->batch_size = batch_size;
    b->drop_last = drop_last ? 1 : 0;
    for (int64_t i = 0; i < n; i++) b->order[i] = i;
    return 0;
}

int64_t batcher_num_batches(const Batcher *b)
{
    return b->drop_last ? b->n / b->batch_size : (b->n + b->batch_size - 1) / b->batch_size;
}

/* Fisher-Yates on order (n,): position i takes a uniform pick among the
 * entries 0..i not yet placed. */
static int fisher_yates(int64_t *order, int64_t n, Rng *rng)
{
    /* BEGIN SOLUTION */
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = rng_below(rng, (uint32_t)(i + 1));
        int64_t tmp = order[i];
        order[i] = order[j];
        order[j] = tmp;
    }
    return 0;
    /* END SOLUTION */
}

void batcher_shuffle(Batcher *b, Rng *rng)
{
    /* From the identity every epoch: the order depends on the RNG alone. */
    for (int64_t i = 0; i < b->n; i++) b->order[i] = i;
    fisher_yates(b->order, b->n, rng);
}

void batcher_batch(const Batcher *b, int64_t k, const int64_t **idx, int *count)
{
    int64_t begin = k * b->batch_size;
    int64_t end = begin + b->batch_size < b->n ? begin + b->batch_size : b->n;
    *idx = b->order + begin;
    *count = (int)(end - begin);
}

void batcher_free(Batcher *b)
{
    free(b->order);
    memset(b, 0, sizeof *b);
}

/* ------------------------------------------------------------------------ */
/* Given: not part of the exercise                                           */
/* ------------------------------------------------------------------------ */

int seq_task_parse(const char *name, SeqTask *task, Error *err)
{
    if (name && strcmp(name, "reverse") == 0) {
        *task = SEQ_TASK_REVERSE;
        return 0;
    }
    if (name && strcmp(name, "copy") == 0) {
        *task = SEQ_TASK_COPY;
        return 0;
    }
    return error_set(err, "unknown task '%s' (the tasks are reverse and copy)",
                     name ? name : "(none)");
}

const char *seq_task_name(SeqTask task)
{
    return task == SEQ_TASK_REVERSE ? "reverse" : task == SEQ_TASK_COPY ? "copy" : "unknown";
}

/* Zeroed x and y for n rows of S ids. */
static int dataset_alloc(SeqDataset *ds, int64_t n, int S, int C, Error *err)
{
    ds->n = n;
    ds->seq_len = S;
    ds->num_categories = C;
    ds->x = calloc((size_t)(n * S), sizeof *ds->x);
    ds->y = calloc((size_t)(n * S), sizeof *ds->y);
    if (!ds->x || !ds->y) {
        seq_dataset_free(ds);
        return error_set(err, "out of memory for a dataset of %lld sequences of length %d",
                         (long long)n, S);
    }
    return 0;
}
