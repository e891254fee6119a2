/*
 * tokenizer.h - one tokenizer of any kind of this chapter behind one set of
 * calls, for the programs that let the user choose (chapter 01's command
 * line, chapter 09's pair files).
 *
 *     char           one id per character (char_tokenizer.h), learned from a corpus
 *     word           one id per word (word_tokenizer.h), learned from a corpus
 *     bpe            byte-level BPE (bpe.h), merges learned from a corpus
 *     taylor-source  the closed vocabularies of seed 002 (taylor.h);
 *     taylor-target  they need no corpus
 *
 * Read next: programs/01_tokenization.c (the chapter program), then chapter 02.
 */
#ifndef TOKENIZER_H
#define TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "bpe.h"
#include "error.h"
#include "text.h"
#include "vocab.h"

typedef enum {
    TOKENIZER_CHAR, TOKENIZER_WORD, TOKENIZER_BPE, TOKENIZER_TAYLOR_SOURCE,
    TOKENIZER_TAYLOR_TARGET
} TokenizerKind;

#define TOKENIZER_KINDS 5
/* "char", "word", "bpe", "taylor-source", "taylor-target", by kind. */
extern const char *const TOKENIZER_NAMES[TOKENIZER_KINDS];

typedef struct {
    TokenizerKind kind;
    Vocab vocab;          /* char, word, taylor */
    int64_t *counts;      /* word: corpus count per id */
    Bpe bpe;              /* bpe */
} Tokenizer;

/* The kind called name; anything else is an error listing the names. */
int tokenizer_kind_parse(const char *name, TokenizerKind *kind, Error *err);

/* Builds a tokenizer of this kind: char, word and bpe learn from corpus
 * (bpe up to vocab_size ids, word keeps words seen min_freq times); the
 * Taylor tokenizers ignore corpus, vocab_size and min_freq. */
int tokenizer_build(Tokenizer *tk, TokenizerKind kind, const Text *corpus, int64_t vocab_size,
                    int min_freq, Error *err);
void tokenizer_free(Tokenizer *tk);

const Vocab *tokenizer_vocab(const Tokenizer *tk);

/* The ids of text; ids needs room for len entries (no token is shorter than
 * a byte), *n receives their number. */
int tokenizer_encode(const Tokenizer *tk, const uint8_t *text, size_t len, int64_t *ids,
                     int64_t *n, Error *err);

/* Appends the text of ids to out (specials skipped; words joined by spaces). */
int tokenizer_decode(const Tokenizer *tk, const int64_t *ids, int64_t n, Text *out, Error *err);

#endif
