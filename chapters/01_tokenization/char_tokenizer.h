/*
 * char_tokenizer.h - character-level tokenization: one token per Unicode
 * character, a code point decoded from UTF-8 (so "é", two bytes, is one
 * token). What it is good for and what it costs: the chapter's README.
 *
 * The vocabulary is <pad> <sos> <eos> <unk>, then every distinct code point
 * of the corpus in increasing order; a character the corpus never showed
 * becomes <unk>. Decoding concatenates the characters:
 *     vocab_decode(vocab, ids, n, "", &text, err)
 *
 * Read next: word_tokenizer.h.
 */
#ifndef CHAR_TOKENIZER_H
#define CHAR_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "vocab.h"

/* Builds the vocabulary of a UTF-8 corpus (invalid UTF-8 is an error naming
 * the byte offset). On failure vocab is left empty. */
int char_vocab_build(Vocab *vocab, const uint8_t *corpus, size_t len, Error *err);

/* One id per character of text (len bytes of UTF-8): the character's id, or
 * TOKEN_UNK. ids needs room for len entries (a character is at least one
 * byte); the number written goes to n_ids. */
int char_encode(const Vocab *vocab, const uint8_t *text, size_t len, int64_t *ids,
                int64_t *n_ids, Error *err);

#endif
