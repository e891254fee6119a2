/*
 * foundations_case.h - evaluating a chapter 00 case file (the work behind
 * `build/00_foundations --case IN --out OUT`), kept in the library so the
 * fuzzer (fuzz/) can call it as the tests call the other chapters' ones.
 *
 * Ops and their tensors (F32 unless said; see reference/ch00_foundations.py):
 *
 *     matmul_nt, matmul_nn, matmul_tn   a, b -> c
 *     linear                            input, weight, bias (optional) -> output
 *     linear_backward                   + grad_output -> grad_input, grad_weight, grad_bias
 *     softmax                           input -> output
 *     softmax_backward                  output, grad_output -> grad_input
 *     rng_stream                        (metadata rng_seed, rng_stream, count)
 *                                       -> u32 (I64), uniform, normal, below10 (I64)
 *
 * Every problem (missing tensor, wrong dtype or shape, bad option) is one line
 * in err naming the file, and -1; run_case_file then writes no output file.
 */
#ifndef FOUNDATIONS_CASE_H
#define FOUNDATIONS_CASE_H

#include "safetensors.h"

int foundations_case_eval(const TensorFile *in, TensorFile *out, Error *err);

#endif
