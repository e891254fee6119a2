/*
 * pairs.h - a translation dataset read from a text file of "source|target"
 * lines, each side tokenized by a chapter 01 tokenizer of its own and framed
 * as chapter 01 frames a sequence:
 *
 *     src row  <sos> s1 .. sn <eos> <pad> ..         S = max_src + 2 ids
 *     tgt row  <sos> t1 .. tm <eos> <pad> ..         T + 1 = max_tgt + 2 ids
 *
 * A pair with more than max_src source or max_tgt target tokens is skipped,
 * in file order. The examples (pairs_examples) give the decoder the target
 * row shifted by one, teacher forcing (the seed's trg[:, :-1] and trg[:, 1:]):
 * tgt_in is the row without its last id, target without its first, T ids
 * each. Why, and the Taylor task's numbers: chapters/09_translation/README.md.
 *
 * Read next: translate.h (the task's split and exact match), then programs/09_translation.c.
 */
#ifndef PAIRS_H
#define PAIRS_H

#include <stdint.h>

#include "error.h"
#include "text.h"
#include "tokenizer.h"
#include "trainer.h"

typedef struct {
    int64_t n;              /* pairs */
    int S;                  /* ids per source row: max_src + 2 */
    int T;                  /* decoder positions: max_tgt + 1 (a tgt row has T + 1 ids) */
    int64_t *src;           /* (n, S) */
    int64_t *tgt;           /* (n, T + 1) */
    int64_t *line;          /* (n,) the line of the file each pair came from (1-based) */
} PairDataset;

/* How the lines become rows: each side's tokenizer and token limit. */
typedef struct {
    const Tokenizer *src_tok, *tgt_tok;
    int max_src, max_tgt;
} PairFormat;

/* Parses every line of text (a last line without a newline counts; an
 * empty line is an error, as is a line with no '|' or more than one),
 * tokenizes and frames each side, and keeps the pairs within the limits.
 * *skipped (may be NULL) receives the number left out. Errors name the
 * file (name) and the line. */
int pairs_parse(PairDataset *ds, const char *name, const Text *text, const PairFormat *f,
                int64_t *skipped, Error *err);

/* pairs_parse on the file at path. */
int pairs_read(PairDataset *ds, const char *path, const PairFormat *f, int64_t *skipped,
               Error *err);

/* The pairs [first, first + count) of all, copied. */
int pairs_slice(const PairDataset *all, int64_t first, int64_t count, PairDataset *part,
                Error *err);

/* Frees what pairs_read or pairs_slice allocated; safe on a zeroed dataset. */
void pairs_free(PairDataset *ds);

/* The seq2seq examples of ds (trainer.h) for vocabularies of src_vocab and
 * tgt_vocab ids; ds must outlive them. */
Examples pairs_examples(const PairDataset *ds, int src_vocab, int tgt_vocab);

/* The text of one side of the pairs in text (the file name), each line's
 * side followed by sep: the corpus a char, word or bpe tokenizer learns
 * from (sep "\n" keeps words apart; a character tokenizer takes "" so that
 * it learns no newline). side 0 is the source, 1 the target. */
int pairs_side(const char *name, const Text *text, int side, const char *sep, Text *out,
               Error *err);

#endif
