/*
 * generation_case.h - evaluating a chapter 12 case file (the work behind
 * `build/12_generation --case IN --out OUT`), kept in the library so the
 * tests can call it on broken cases directly.
 *
 * Ops and their tensors (letters: N batch, T positions, V vocabulary, R
 * sampling steps, one a row):
 *
 *     next_token_loss   logits F32 (N, T, V), ids I64 (N, T+1)
 *                       -> loss F64 (), grad_logits F32 (N, T, V)
 *     sampling          logits F32 (R, V), u F64 (R,) in [0, 1)
 *                       -> probs F32 (R, V), ids I64 (R,)
 *                       metadata temperature (default 1), top_k (default 0,
 *                       off), top_p (default 1, off)
 *
 * Every problem (missing tensor, wrong dtype or shape, bad option, a target
 * id outside the vocabulary, a u outside [0, 1), a logit that is NaN or
 * +inf, a row of -inf) is found before anything is computed, and is one line
 * in err naming the file, and -1; run_case_file then writes no output file.
 */
#ifndef GENERATION_CASE_H
#define GENERATION_CASE_H

#include "safetensors.h"

int generation_case_eval(const TensorFile *in, TensorFile *out, Error *err);

#endif
