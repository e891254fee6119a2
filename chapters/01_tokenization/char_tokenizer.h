/*
 * char_tokenizer.h - character-level tokenization: one token per Unicode
 * character.
 *
 * The vocabulary is small (the distinct characters of a corpus: 76 for the
 * GPL), every word can be spelt, and there are no word boundaries to decide.
 * The price is length: a text becomes as many tokens as it has characters,
 * and attention costs grow with the square of that length.
 *
 * A "character" here is a Unicode code point decoded from UTF-8, so "é"
 * (two bytes, 0xC3 0xA9) is one token, not two. The vocabulary is
 *
 *     <pad> <sos> <eos> <unk>, then every distinct code point of the corpus
 *     in increasing code-point order
 *
 * A character the corpus never showed becomes <unk>. Decoding concatenates
 * the characters: vocab_decode(vocab, ids, n, "", &text, err).
 *
 * Deliberately left out: Unicode normalisation. "é" written as one code point
 * (U+00E9) and as "e" plus a combining accent (U+0065 U+0301) are different
 * token sequences here, as they are to any tokenizer that skips NFC.
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
