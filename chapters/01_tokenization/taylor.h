/*
 * taylor.h - the tokenizer of the Taylor-series task (seed 002): a function
 * such as  cosh(a*x)**3 + tanh(b*x)  (the source) and its series
 * 1 + b*x + 3*a**2*x**2/2 - ... + O(x**6)  (the target). The two
 * vocabularies and the longest-match rule are in the chapter's README.
 *
 * The vocabularies are closed, with no <unk>: a character that starts no
 * token is an error naming the character and its byte offset. Decoding
 * concatenates the tokens and drops the spaces:
 *     vocab_decode(vocab, ids, n, "", &text, err)
 *
 * Read next: sequence.h.
 */
#ifndef TAYLOR_H
#define TAYLOR_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "vocab.h"

typedef enum { TAYLOR_SOURCE, TAYLOR_TARGET } TaylorSide;

/* Builds the source or target vocabulary. */
int taylor_vocab(Vocab *vocab, TaylorSide side, Error *err);

/* Longest-match tokenization of text. ids needs room for len entries; the
 * number written goes to n_ids. */
int taylor_encode(const Vocab *vocab, const uint8_t *text, size_t len, int64_t *ids,
                  int64_t *n_ids, Error *err);

#endif
