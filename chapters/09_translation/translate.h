/*
 * translate.h - a trained seq2seq model as a translator of pairs: the data
 * of a task (its tokenizers and its split), exact match under greedy or
 * beam decoding, and what the wrong answers get wrong. A translation is
 * exact when it is the target row's tokens and then <eos>, nothing else.
 *
 * Read next: programs/09_translation.c, the chapter program.
 */
#ifndef TRANSLATE_H
#define TRANSLATE_H

#include <stdint.h>

#include "decode.h"
#include "error.h"
#include "model.h"
#include "pairs.h"
#include "tokenizer.h"

/* Where a task's pairs come from and how they are cut. The defaults
 * (task_defaults) are seed 002's Taylor task. */
typedef struct {
    const char *data;           /* the file of source|target lines */
    const char *tokenizer;      /* taylor, char, word or bpe */
    int vocab_size;             /* bpe: ids per side */
    int max_src, max_tgt;       /* tokens: longer pairs are skipped */
    int train_size, val_size;   /* in file order: train, validation, then the test: the rest */
} TaskData;

TaskData task_defaults(void);

/* A task's tokenizers and its three splits. */
typedef struct {
    Tokenizer src_tok, tgt_tok;
    PairDataset train, val, test;
    int64_t skipped;            /* pairs over the limits */
} Translation;

/* Builds the tokenizers (taylor: the two closed Taylor vocabularies; char,
 * word, bpe: learned from each side of the whole file), reads the pairs and
 * splits them. */
int task_load(Translation *t, const TaskData *d, Error *err);
void task_free(Translation *t);

/* The decoding options of a task: <sos> and <eos> of chapter 01, at most T
 * tokens (a target and its <eos>), beam_width 1: greedy. */
DecodeOptions task_decoding(const PairDataset *ds, int beam_width, float length_penalty);

/* Decodes every source of ds (greedy when d->beam_width is 1, else beam
 * search) and counts the exact matches. out (ds->n, d->max_new) receives
 * the decoded ids (may be NULL). */
int exact_match(Model *m, const PairDataset *ds, const DecodeOptions *d, int64_t *right,
                int64_t *out, Error *err);

/* Was the decoded row out (max_new ids) exactly the target row tgt (T + 1
 * ids: <sos> t1 .. tm <eos> <pad>..)? */
int is_exact(const int64_t *out, int max_new, const int64_t *tgt);

/* What a wrong translation gets wrong: the kind of the first target token
 * where it departs (a digit, an operator, a variable, ...), or that it ends
 * too early or runs on. */
typedef enum {
    MISS_DIGIT, MISS_OPERATOR, MISS_VARIABLE, MISS_PARENTHESIS, MISS_TOO_SHORT,
    MISS_TOO_LONG, MISS_OTHER, MISS_KINDS
} MissKind;

extern const char *const MISS_NAMES[MISS_KINDS];

/* The kind of miss of a wrong row (vocab: the target side's). */
MissKind miss_kind(const int64_t *out, int max_new, const int64_t *tgt, const Vocab *vocab);

/* Fails unless m (read from path) is a seq2seq model over t's vocabularies. */
int translation_check_model(const Translation *t, const Model *m, const char *path, Error *err);

/* Exact match on ds decoded with d (task_decoding: greedy, or beam search),
 * printed under name; with `table`, also the kinds of miss. */
int report_exact(Model *m, const Translation *t, const PairDataset *ds, const char *name,
                 const DecodeOptions *d, int table, double *exact, Error *err);

#endif
