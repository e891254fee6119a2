/*
 * word_tokenizer.h - word-level tokenization: one token per word. The split
 * rule and what a closed vocabulary of words costs: the chapter's README.
 *
 * Split, on bytes: a word is a maximal run of word bytes (ASCII letters,
 * digits, the apostrophe ', every byte >= 0x80); whitespace (space, \t, \n,
 * \v, \f, \r) separates and is dropped; every other byte is a token of its
 * own. Case is kept.
 *
 * The vocabulary is <pad> <sos> <eos> <unk>, then every word seen at least
 * min_freq times in the corpus, most frequent first, words of equal count in
 * bytewise (memcmp) order; any other word becomes <unk>. Decoding joins the
 * words with single spaces, so the original spacing is lost:
 *     vocab_decode(vocab, ids, n, " ", &text, err)
 *
 * Read next: bpe.h.
 */
#ifndef WORD_TOKENIZER_H
#define WORD_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "text.h"
#include "vocab.h"

/* 1 for the bytes words are made of (see above), else 0. */
int word_is_word_byte(uint8_t b);

/* The tokens of text by the split rule, as byte ranges. words needs room for
 * len entries; the number found goes to n_words. */
int word_split(const uint8_t *text, size_t len, Span *words, size_t *n_words, Error *err);

/* Builds the vocabulary from a corpus. counts receives a new (V,) array, the
 * number of times each token occurs in the corpus (0 for the specials); the
 * caller frees it. min_freq must be at least 1. On failure vocab is left
 * empty and *counts NULL. */
int word_vocab_build(Vocab *vocab, int64_t **counts, const uint8_t *corpus, size_t len,
                     int min_freq, Error *err);

/* One id per token of text: the word's id, or TOKEN_UNK. ids needs room for
 * len entries; the number written goes to n_ids. */
int word_encode(const Vocab *vocab, const uint8_t *text, size_t len, int64_t *ids,
                int64_t *n_ids, Error *err);

#endif
