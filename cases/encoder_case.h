/*
 * encoder_case.h - evaluating a chapter 05 case file: the work behind
 * `build/05_encoder --case IN --out OUT`, kept in the library so the tests
 * can hand it broken cases directly.
 *
 * Ops, their tensors and metadata (the README has the same table). Letters:
 * N batch, T sequence length, D d_model, V vocabulary, F dim_feedforward,
 * max_len the rows of a position table; every float tensor is F32.
 *
 *   embedding                  input I64 (N, T), embedding.weight (V, D) -> output (N, T, D)
 *   embedding_backward         + grad_output (N, T, D) -> output, grad_embedding.weight (V, D)
 *                              metadata: scale (default 1), padding_idx (optional, -V..V-1)
 *   positional_sinusoidal      input (N, T, D) -> output (N, T, D), pe (T, D)
 *   positional_sinusoidal_backward  + grad_output -> output, pe, grad_input
 *                              metadata: max_len (optional; T <= max_len)
 *   positional_learned         input (N, T, D), pos_embedding.weight (max_len, D) -> output
 *   positional_learned_backward  + grad_output -> output, grad_input,
 *                              grad_pos_embedding.weight (max_len, D)
 *                              metadata: max_len (optional: the table's rows); T <= max_len
 *   dropout_mask               input (any shape), mask BOOL (same shape) -> output
 *   dropout_mask_backward      + grad_output -> output, grad_input
 *                              metadata: dropout (required, in [0, 1]), training (default
 *                              true; false: the identity, mask not needed)
 *   dropout_rng                input (any shape) -> mask BOOL, output, the mask drawn
 *                              by dropout_mask(); metadata dropout, rng_seed, rng_stream
 *   ffn                        input (N, T, D), linear1.weight (F, D), linear1.bias (F,),
 *                              linear2.weight (D, F), linear2.bias (D,),
 *                              dropout_mask BOOL (N, T, F) -> output (N, T, D)
 *   ffn_backward               + grad_output -> output, grad_input, grad_linear1.weight,
 *                              grad_linear1.bias, grad_linear2.weight, grad_linear2.bias
 *                              metadata: dropout (default 0, in [0, 1]), training
 *                              (default true), bias (default: linear1.bias is present);
 *                              dropout_mask is required when training with dropout > 0
 *
 * The encoder layer and stack (N batch, S source length, H nhead, K num_layers):
 *   encoder_layer              src (N, S, D); self_attn.in_proj_weight (3D, D),
 *                              self_attn.in_proj_bias (3D,), self_attn.out_proj.weight
 *                              (D, D), self_attn.out_proj.bias, linear1.weight (F, D),
 *                              linear1.bias, linear2.weight (D, F), linear2.bias,
 *                              norm1.weight, norm1.bias, norm2.weight, norm2.bias (D,);
 *                              optional src_key_padding_mask BOOL (N, S) (1 = padding)
 *                              and src_mask (S, S), BOOL (1 = not allowed) or F32 (added)
 *                              -> output (N, S, D)
 *   encoder_layer_backward     + grad_output -> output, grad_src, grad_<parameter> for
 *                              each of the 12 parameters
 *   encoder                    the same with every parameter as layers.<k>.<name>,
 *                              k < K, and norm.weight, norm.bias (D,) for a final norm
 *   encoder_backward           + grad_output -> output, grad_src,
 *                              grad_layers.<k>.<name>, grad_norm.weight, grad_norm.bias
 *                              metadata: nhead (required, divides D), norm_first
 *                              (default false), eps (default 1e-5), dropout (must be 0
 *                              in training: C cannot replay PyTorch's masks), training;
 *                              for the stack num_layers (required, 1..4) and final_norm
 *                              (default: norm.weight is present)
 *
 * Everything is checked before any arithmetic: each tensor's presence, dtype
 * and shape, ids inside the vocabulary, T against the position table, dropout in
 * [0, 1], mask bytes 0 or 1, sizes that fit an int. A problem is one line in
 * err naming the file (or "(case)" for a TensorFile built in memory) and the
 * problem, and -1; run_case_file then writes no output file.
 */
#ifndef ENCODER_CASE_H
#define ENCODER_CASE_H

#include "safetensors.h"

/* The CaseEval of the chapter program. */
int encoder_case_eval(const TensorFile *in, TensorFile *out, Error *err);

#endif
