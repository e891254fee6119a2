/*
 * generate.h - writing text with chapter 12's language model, one byte at
 * a time:
 *
 *     context = '\n' + prompt                 (a review starts after a newline)
 *     repeat length times:
 *         logits = model(context)[last]       the next byte's scores
 *         probs  = sampling_probs(logits)     temperature, top-k, top-p (sampling.h)
 *         byte   = sampling_pick(probs, u)      u uniform in [0, 1) from the seed's stream
 *         context += byte
 *
 * With the key/value cache (chapter 07's DecodeCache) each step runs only
 * the new position through the layers; without it (no_cache) every step
 * runs the model over the whole context, the plain definition the cache is
 * checked against. Both give the same bytes for the same seed (to float32
 * rounding of the logits; a draw that falls within rounding of a boundary
 * between two bytes could differ).
 *
 * The model sees at most max_len positions. When the context is full, it
 * keeps its last max_len / 2 bytes and goes on from there (the cache is
 * refilled from them), so a text may be longer than the context.
 */
#ifndef GENERATE_H
#define GENERATE_H

#include <stdint.h>

#include "error.h"
#include "model.h"
#include "sampling.h"
#include "text.h"

typedef struct {
    Sampling sampling;
    int length;                     /* bytes to write, >= 1 */
    uint64_t seed;                  /* the uniform draws' stream */
    int no_cache;                   /* 1: the whole context through the model every step */
    void (*written)(void *ctx, int64_t bytes);  /* NULL, or told the bytes written so far
                                                   after each (the program's progress line) */
    void *ctx;
} GenerateOptions;

/* Appends to out the bytes m writes after prompt (a C string, may be
 * empty). Fails for a model that is not a byte-level language model, or
 * bad sampling settings (sampling.h's errors). */
int lm_generate(Model *m, const char *prompt, const GenerateOptions *g, Text *out, Error *err);

#endif
