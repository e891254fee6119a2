/*
 * taylor.h - the tokenizer of the Taylor-series task (seed 002): a function
 * such as  cosh(a*x)**3 + tanh(b*x)  goes in (the source), its series
 *   1 + b*x + 3*a**2*x**2/2 - ... + O(x**6)  comes out (the target).
 *
 * Both sides are written with a small fixed inventory of tokens: operators,
 * digits, variable letters, function names, and on the target side the whole
 * error term "O(x**6)" as one token. The vocabularies are exactly those the
 * seed prints:
 *
 *     source (37 ids): <pad> <sos> <eos> ( ) * ** + - / 0 .. 9
 *                      a b c cos cosh d exp f g h m n sin sinh tan tanh x
 *     target (30 ids): <pad> <sos> <eos> ( ) * ** + - / 0 .. 9
 *                      O(x**6) a b c d f g h m x
 *
 * that is, the specials, then the inventory in bytewise sorted order.
 *
 * Tokenizing is longest match: skip whitespace; at each position take the
 * longest token the text continues with. So "cosh(" gives cosh, not cos and
 * h; "**" gives the power operator, not two products; "O(x**6)" gives one
 * target token. A character that starts no token (a "y", or an "O" on the
 * source side) is an error naming the character and its byte offset: these
 * vocabularies are closed and have no <unk>.
 *
 * Decoding concatenates the tokens and drops the spaces:
 *     vocab_decode(vocab, ids, n, "", &text, err)
 * gives "cosh(a*x)**3+tanh(b*x)", which a parser reads the same way.
 *
 * The tokenizer does not parse: "x**(" tokenizes fine. Checking that an
 * expression is well formed is sympy's job when the dataset is made.
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
