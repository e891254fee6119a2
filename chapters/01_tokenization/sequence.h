/*
 * sequence.h - from token ids to the (B, T) batches a model reads.
 *
 * A model sees sequences framed by two specials:
 *
 *     <sos> t1 t2 ... tn <eos> <pad> ... <pad>        (T ids in all)
 *
 * <sos> gives the decoder a first input before any token is known; <eos> is
 * the token the decoder learns to emit when the output is complete, and
 * greedy decoding stops there; <pad> fills the row up to the batch's common
 * length T and is masked out of attention and of the loss (chapters 03, 08).
 *
 * <eos> comes right after the last token and the padding after it. Seed 002
 * pads first and puts <eos> last (<sos> t1..tn <pad>... <eos>): then a model
 * must learn to emit <pad>s before it may stop, and where the text ends is
 * no longer the first <eos>. We use the standard layout.
 *
 * Nothing here truncates: a sequence that does not fit is an error, so a
 * dataset with overlong examples is noticed, not silently cut.
 *
 * Letters: B sequences in a batch, T ids per row, n tokens in one sequence.
 *
 * Read next: main.c (the chapter program), then chapter 02.
 */
#ifndef SEQUENCE_H
#define SEQUENCE_H

#include <stdint.h>

#include "error.h"

/* Writes <sos> ids <eos> <pad>... into out (T,). n + 2 > T is an error
 * naming both lengths; nothing is truncated silently. */
int seq_bracket(int64_t *out, const int64_t *ids, int64_t n, int64_t T, Error *err);

/* Brackets and pads B sequences into batch (B, T). The sequences lie end to
 * end in ids; sequence b has counts[b] tokens. lengths (B,) receives each
 * row's ids before the padding (counts[b] + 2). */
int seq_batch(int64_t *batch, int64_t *lengths, const int64_t *ids, const int64_t *counts,
              int64_t B, int64_t T, Error *err);

/* The T that fits the longest of B sequences exactly: max counts + 2. */
int64_t seq_batch_length(const int64_t *counts, int64_t B);

#endif
