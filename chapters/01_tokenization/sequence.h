/*
 * sequence.h - from token ids to the (N, T) batches a model reads:
 *
 *     <sos> t1 t2 ... tn <eos> <pad> ... <pad>        (T ids in all)
 *
 * <eos> comes right after the last token, then the padding (the chapter's
 * README says why, and how seed 002 differs). Nothing here truncates: a
 * sequence that does not fit is an error.
 *
 * Letters: N sequences in a batch, T ids per row, n tokens in one sequence.
 *
 * Read next: tokenizer.h, then programs/01_tokenization.c (the chapter program).
 */
#ifndef SEQUENCE_H
#define SEQUENCE_H

#include <stdint.h>

#include "error.h"

/* Writes <sos> ids <eos> <pad>... into out (T,). n + 2 > T is an error
 * naming both lengths; nothing is truncated silently. */
int seq_bracket(int64_t *out, const int64_t *ids, int64_t n, int64_t T, Error *err);

/* Brackets and pads N sequences into batch (N, T). The sequences lie end
 * to end in ids; sequence b has counts[b] tokens. lengths (N,) receives each
 * row's ids before the padding (counts[b] + 2). */
int seq_batch(int64_t *batch, int64_t *lengths, const int64_t *ids, const int64_t *counts,
              int64_t N, int64_t T, Error *err);

/* The T that fits the longest of N sequences exactly: max counts + 2. */
int64_t seq_batch_length(const int64_t *counts, int64_t N);

#endif
