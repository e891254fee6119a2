/*
 * imdb.h - the data of chapter 10's task: the IMDb reviews (training,
 * validation and test, review.h's split) and the Rotten Tomatoes sentences,
 * cleaned, the BPE tokenizer learned on the training reviews, and the rows
 * the model reads (S ids each). The tokenizer travels in the
 * metadata of every checkpoint and model file (bpe.merges, with
 * review.max_len), so a model file is all --eval and --classify need
 * besides the reviews.
 *
 * Read next: programs/imdb_commands.h, then programs/10_classification.c, the chapter program.
 */
#ifndef IMDB_H
#define IMDB_H

#include "bpe.h"
#include "error.h"
#include "model.h"
#include "review.h"
#include "safetensors.h"
#include "text.h"

#define META_MERGES "bpe.merges"
#define META_MAX_LEN "review.max_len"

typedef struct {
    ReviewSet train, val, test, rt; /* cleaned */
    Bpe bpe;
    int have_bpe;
    ReviewRows train_rows, val_rows, test_rows, rt_rows;
    /* the tokenizer as metadata: key, value, key, value, NULL */
    Text merges;
    char len_text[32];
    const char *meta[5];
} Imdb;

void imdb_free(Imdb *d);

/* Reads, cleans and splits the reviews of dir (imdb.tsv, rotten_tomatoes.tsv):
 * 18,000 training, 2,000 validation and 5,000 test reviews (review.h); the
 * training and validation reviews only when with_train. */
int imdb_read(Imdb *d, const char *dir, int with_train, Error *err);

/* Trains the tokenizer on the first n training reviews (0: all). */
int imdb_train_bpe(Imdb *d, int n, int vocab_size, Error *err);

/* The rows (S ids each) of the test sets, and of the training and validation
 * sets when they were read. */
int imdb_encode(Imdb *d, int S, Error *err);

/* The tokenizer and review length a model or checkpoint file carries. */
int imdb_read_tokenizer(const TensorFile *f, Bpe *bpe, int *max_len, Error *err);

/* d->meta: the tokenizer and S as metadata pairs. */
int imdb_tokenizer_meta(Imdb *d, int S, Error *err);

/* Accuracy of m on rows, printed with its name; *acc receives it. */
int imdb_report(Model *m, const ReviewRows *rows, const char *name, double *acc, Error *err);

#endif
