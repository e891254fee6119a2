/*
 * imdb_commands.h - the chapter 10 program's commands besides training and
 * evaluation (task.h has those). argv holds the arguments after the
 * command.
 *
 *     --classify MODEL TEXT   the class of one text
 *     --demo                  the shipped model on a few reviews
 */
#ifndef IMDB_COMMANDS_H
#define IMDB_COMMANDS_H

#include "error.h"
#include "imdb.h"
#include "model.h"
#include "review.h"

#define SHIPPED_MODEL "models/imdb.safetensors"

/* A two-class classifier and its tokenizer from a model or checkpoint file. */
int imdb_load_classifier(Model *m, Bpe *bpe, int *max_len, const char *path, Error *err);

/* The test sets of dir and the classifier at path, with the reviews encoded
 * by its tokenizer. */
int imdb_open_eval(Imdb *d, Model *m, const char *path, const char *dir, Error *err);

/* The test accuracy by class and by length: where the errors are. */
int imdb_report_parts(Model *m, const ReviewRows *r, Error *err);

/* p(positive) of one text, cleaned and framed as the training reviews were
 * (review.h) in S ids of bpe; *length the tokens kept. */
int imdb_classify(Model *m, const Bpe *bpe, int S, const char *text, double *p, int *length,
                  Error *err);

int classify_command(int argc, char **argv, Error *err);
int imdb_demo_command(int argc, char **argv, Error *err);

#endif
