/*
 * lm_text.h - the text chapter 12's language model learns from and is
 * measured on: the IMDb reviews of chapter 10, as bytes.
 *
 * The split is chapter 10's (review.h): 20,000 training reviews and 5,000
 * test reviews. Of the training reviews every 20th (the 20th, 40th, ...)
 * is held out for validation, which decides the recipe; the test reviews
 * are read once, at the end. A review is cleaned by turning each "<br />"
 * into a space and nothing else (a generative model should write capitals
 * too; chapter 10 also lower-cases).
 *
 * Each part is one stream of bytes: '\n', then its reviews joined by '\n'
 *
 *     \n review_1 \n review_2 \n ... \n review_n
 *
 * The model reads byte t and predicts byte t+1, so every byte after the
 * first is predicted, the newlines between reviews too (one review per
 * line, as the compressors see the same text). The leading '\n' is context
 * only: it says "a review starts here". The vocabulary is the 256 byte
 * values, nothing more: no <sos>, <eos> or <pad> (LM_VOCAB).
 *
 * Letters: S context (the positions one window holds), R stride.
 *
 * Training examples are windows of S + 1 bytes at the starts 0, S, 2S, ...:
 * the first S are the input, the last S the targets (the input shifted by
 * one).
 *
 * Bits per byte (lm_bits) of a stream, every byte after the first
 * predicted: a window of S positions is placed every R bytes; the first
 * window scores all its S predictions, each later one only its last R,
 * which have at least S - R bytes of context (the last window is moved
 * back to end at the stream's end and scores only what is left). Smaller R
 * gives more context and costs S / R forward passes per byte; R = S scores
 * every byte once, with the context restarting at each window.
 */
#ifndef LM_TEXT_H
#define LM_TEXT_H

#include <stdint.h>

#include "error.h"
#include "model.h"
#include "text.h"
#include "trainer.h"

#define LM_VOCAB 256

typedef struct {
    Text train, val, test;          /* the three streams above */
    int64_t n_train, n_val, n_test; /* reviews in each */
} LmText;

/* Reads dir/imdb.tsv (make imdb): the three streams from the first
 * train_reviews training reviews (0: all 20,000; < 0: none, the training and
 * validation streams stay empty) and the first test_reviews test reviews
 * (0: all 5,000). */
int lm_text_read(LmText *t, const char *dir, int64_t train_reviews, int64_t test_reviews,
                 Error *err);
void lm_text_free(LmText *t);

/* The training examples of a stream (trainer.h): windows of S + 1 bytes at
 * 0, S, 2S, ... (none when the stream is shorter). ws, which they point to,
 * and the stream must outlive them. */
typedef struct {
    const Text *stream;
    int S;
} LmWindows;
Examples lm_examples(LmWindows *ws, const Text *stream, int S);

/* The bits per byte of m on stream (its first byte is context only): the
 * windows above, S = m's max_len capped at the stream, N windows per
 * forward pass. *bits receives the total -log2 p over the predicted
 * bytes, *bytes their count (stream->len - 1). */
int lm_bits(Model *m, const Text *stream, int R, int N, double *bits, int64_t *bytes,
            Error *err);

#endif
