/*
 * layernorm_case.h - evaluating a chapter 04 case file (the work behind
 * `build/04_layernorm --case IN --out OUT`), kept in the library so the
 * tests can call it on broken cases directly.
 *
 * Ops and their tensors (every tensor F32; names as in the README):
 *
 *     layernorm            input (..., D), weight (D,), bias (D,)
 *                          -> output (..., D)
 *     layernorm_backward   input, weight, bias, grad_output (..., D)
 *                          -> output, grad_input, grad_weight, grad_bias
 *     residual             input, sublayer_output (same shape) -> output
 *     residual_backward    grad_output -> grad_input, grad_sublayer_output
 *
 * LayerNorm metadata: eps (default 1e-5; must be a positive finite number),
 * normalized_shape (if given, must equal D), elementwise_affine (default: a
 * weight is present) and bias (default: a bias is present). weight and bias
 * are nn.LayerNorm's state_dict names; without elementwise_affine both are
 * absent, and so are their gradients in the output.
 *
 * Every problem (missing tensor, wrong dtype or shape, bad option) is one line
 * in err naming the file, and -1; run_case_file then writes no output file.
 */
#ifndef LAYERNORM_CASE_H
#define LAYERNORM_CASE_H

#include "safetensors.h"

int layernorm_case_eval(const TensorFile *in, TensorFile *out, Error *err);

#endif
