/*
 * data.h - the synthetic sequence tasks of seeds 000 and 004 (reverse and
 * copy), their two batch layouts, and cutting a dataset into shuffled
 * batches. The tasks, teacher forcing and the shuffle are taught in the
 * chapter's README, "The data: synthetic tasks and the batcher".
 *
 * Letters: n sequences, S = seq_len ids per sequence, C = num_categories
 * (the ids of the task are 0..C-1; a letter of this chapter alone), N
 * sequences in a batch.
 *
 * The data is drawn from the project's RNG, so a seed gives the same
 * dataset, and the same shuffles, in C and in reference/ch08_training.py.
 *
 * Read next: trainer.h, the training loop that reads these batches.
 */
#ifndef DATA_H
#define DATA_H

#include <stdint.h>

#include "error.h"
#include "rng.h"

typedef enum { SEQ_TASK_REVERSE, SEQ_TASK_COPY } SeqTask;

/* "reverse" or "copy"; anything else is an error listing both. */
int seq_task_parse(const char *name, SeqTask *task, Error *err);
const char *seq_task_name(SeqTask task);

typedef struct {
    int64_t n;              /* sequences */
    int seq_len;            /* S */
    int num_categories;     /* C: ids 0..C-1 */
    int64_t *x, *y;         /* (n, S) each: the input and the answer */
} SeqDataset;

/* n sequences of S ids, x[i, s] = rng_below(rng, C) in row-major order, and
 * y from x by the task (reverse: y[s] = x[S-1-s]; copy: y = x). n >= 1,
 * S >= 1, 1 <= C <= 2^31 - 4 (the seq2seq ids go up to C + 2). */
int seq_dataset_make(SeqDataset *ds, SeqTask task, int64_t n, int seq_len, int num_categories,
                     Rng *rng, Error *err);

/* Copies the first n_first sequences into `first` and the others into
 * `rest` (0 < n_first < n): train and validation sets from one draw. */
int seq_dataset_split(const SeqDataset *all, int64_t n_first, SeqDataset *first,
                      SeqDataset *rest, Error *err);

/* Frees x and y; safe on a zeroed or freed dataset. */
void seq_dataset_free(SeqDataset *ds);

/* The seq2seq ids: the task's ids shifted past chapter 01's three specials,
 * so the vocabulary is C + 3. */
#define SEQ2SEQ_PAD 0
#define SEQ2SEQ_SOS 1
#define SEQ2SEQ_EOS 2
#define SEQ2SEQ_FIRST 3

/* The encoder-only labeller's layout: src (N, S) = x and target (N, S) = y
 * at rows idx[0..N). An index outside [0, n) is an error. */
int batch_encoder(int64_t *src, int64_t *target, const SeqDataset *ds, const int64_t *idx,
                  int N, Error *err);

/* The encoder-decoder's layout (teacher forcing) at rows idx[0..N), the
 * task's ids shifted by SEQ2SEQ_FIRST:
 *     src    (N, S)     = x
 *     tgt_in (N, S + 1) = <sos>  y_0 ... y_{S-1}
 *     target (N, S + 1) = y_0 ... y_{S-1}  <eos>
 * An index outside [0, n) is an error. */
int batch_seq2seq(int64_t *src, int64_t *tgt_in, int64_t *target, const SeqDataset *ds,
                  const int64_t *idx, int N, Error *err);

/* A permutation of [0, n) cut into consecutive batches of batch_size (the
 * last one shorter, or dropped with drop_last). */
typedef struct {
    int64_t n;              /* dataset size */
    int batch_size;
    int drop_last;          /* 1: the last, shorter batch is skipped */
    int64_t *order;         /* (n,) the permutation of this epoch */
} Batcher;

/* order = 0, 1, ..., n-1. n >= 1 (at most 2^32, what rng_below draws),
 * batch_size >= 1; with drop_last, batch_size <= n (else no batch at all). */
int batcher_init(Batcher *b, int64_t n, int batch_size, int drop_last, Error *err);

/* ceil(n / batch_size), or floor with drop_last. */
int64_t batcher_num_batches(const Batcher *b);

/* A fresh permutation, as DataLoader(shuffle=True) draws one each epoch:
 * order = identity, then Fisher-Yates,
 *     for i = n-1 down to 1:  j = rng_below(rng, i + 1);  swap order[i], order[j]
 * (n - 1 draws). Starting from the identity, an epoch's order depends only
 * on the RNG's state, which a checkpoint stores. */
void batcher_shuffle(Batcher *b, Rng *rng);

/* Batch k (0 <= k < batcher_num_batches): *idx points at its *count indices
 * inside b->order. */
void batcher_batch(const Batcher *b, int64_t k, const int64_t **idx, int *count);

void batcher_free(Batcher *b);

#endif
