/*
 * decoder_case.h - evaluating a chapter 06 case file: the work behind
 * `build/06_decoder --case IN --out OUT`, in the library so the tests can
 * hand it broken cases directly.
 *
 * Letters: N batch, T target length, S memory length, D d_model, F
 * dim_feedforward, H nhead. Every float tensor is F32.
 *
 *   decoder_layer            tgt (N, T, D), memory (N, S, D), the layer's
 *                            parameters under nn.TransformerDecoderLayer's
 *                            state_dict names (self_attn.in_proj_weight,
 *                            ..., norm3.bias) -> output (N, T, D)
 *   decoder_layer_backward   + grad_output (N, T, D) -> output, grad_tgt,
 *                            grad_memory (N, S, D), and grad_<name> for
 *                            every parameter <name>
 *   decoder                  the same with num_layers layers, each under
 *                            "layers.<l>.", and with final_norm the
 *                            tensors norm.weight, norm.bias
 *   decoder_backward         + grad_output -> output, grad_tgt, grad_memory,
 *                            grad_<name> for every parameter
 *
 * Optional masks: tgt_mask (T, T), BOOL (true = not allowed) or F32 (added);
 * tgt_key_padding_mask BOOL (N, T) and memory_key_padding_mask BOOL (N, S),
 * true = padding, a key nobody attends to.
 *
 * Metadata: nhead (required), norm_first (default false), layer_norm_eps
 * (default 1e-5), tgt_is_causal (default false), num_layers (decoder ops,
 * required), final_norm (default: whether norm.weight is present), dropout
 * (must be 0: a case holds no masks of PyTorch's dropout).
 *
 * tgt_is_causal follows PyTorch: it needs tgt_mask (PyTorch raises "Need
 * attn_mask if specifying the is_causal hint"); without a key padding mask
 * PyTorch then ignores tgt_mask and applies the causal pattern, with one it
 * uses tgt_mask. This reader does the same. memory_mask and
 * memory_is_causal are not supported (refused).
 *
 * Every problem is reported before any arithmetic as one line naming the
 * file and the problem, with -1; nothing is added to `out` then.
 */
#ifndef DECODER_CASE_H
#define DECODER_CASE_H

#include "safetensors.h"

/* The CaseEval of the chapter program. */
int decoder_case_eval(const TensorFile *in, TensorFile *out, Error *err);

#endif
