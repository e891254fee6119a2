/*
 * mha_case.h - reading, checking and evaluating a chapter 03 case file: the
 * work behind `build/03_mha --case IN --out OUT`, kept in the library so the
 * tests can hand it broken cases directly.
 *
 * Letters as in mha.h: N batch, L queries, S keys, D embed_dim, H nhead,
 * Ek kdim, Ev vdim. Every float tensor is F32.
 *
 * Inputs (ops mha and mha_backward):
 *     query (N, L, D)   key (N, S, Ek)   value (N, S, Ev)
 *         or, unbatched, (L, D), (S, Ek), (S, Ev)
 *         With metadata self_attention = true the case holds query alone and
 *         key = value = query (so Ek = Ev = D and S = L).
 *     parameters under nn.MultiheadAttention's state_dict names:
 *         in_proj_weight (3D, D)                          when Ek == Ev == D
 *         q_proj_weight (D, D), k_proj_weight (D, Ek), v_proj_weight (D, Ev)
 *                                                         otherwise
 *         in_proj_bias (3D,), out_proj.bias (D,)          both, or neither (bias=False)
 *         out_proj.weight (D, D)
 *     key_padding_mask  optional, (N, S) or unbatched (S,): BOOL (true = ignore
 *                       the key) or F32 (added)
 *     attn_mask         optional, (L, S) or (N * H, L, S): BOOL (true = not
 *                       allowed) or F32 (added)
 *     grad_output (N, L, D) or (L, D)                     op mha_backward only
 * Metadata: op; nhead (required; PyTorch's num_heads); embed_dim, kdim,
 * vdim, bias (optional, checked against the tensors); need_weights and
 * average_attn_weights (default true); is_causal and self_attention
 * (default false); batch_first (default true; false is refused), dropout
 * (0 only), add_bias_kv and add_zero_attn (false only).
 *
 * Outputs: output (N, L, D); with need_weights attn_weights, (N, L, S)
 * averaged over the heads or (N, H, L, S) per head (unbatched: without N);
 * for mha_backward grad_query, grad_key, grad_value (self-attention:
 * grad_query alone, the sum of the three paths) and "grad_" + the name of
 * every parameter the case holds (grad_in_proj_weight, grad_out_proj.weight,
 * ...), each shaped like what it is the gradient of.
 *
 * is_causal, as PyTorch 2.15 treats it: a hint that attn_mask IS the causal
 * mask, so attn_mask must be given (PyTorch raises "Need attn_mask if
 * specifying the is_causal hint" otherwise, and so does this reader). When
 * there is no key_padding_mask and need_weights is false, PyTorch then drops
 * attn_mask and lets SDPA apply its own top-left causal pattern; in every
 * other case it uses attn_mask and ignores the hint. The reader does the same
 * (fields causal and use_attn_mask below), so a case whose attn_mask is not
 * causal gives what PyTorch gives.
 *
 * Everything is checked before any arithmetic: each tensor's presence, dtype
 * and shape, masks of the right shape with bytes 0 or 1, embed_dim divisible
 * by nhead, the parameters of the right form for kdim and vdim, options
 * that parse. A problem is one line in err naming the file (or "(case)") and
 * the problem, and -1; run_case_file then writes no output file.
 */
#ifndef MHA_CASE_H
#define MHA_CASE_H

#include "mha.h"
#include "safetensors.h"

/* A checked case: borrowed pointers into the TensorFile, sizes in mha.h's
 * letters (N = 1 for unbatched inputs). */
typedef struct {
    int backward;                      /* op is mha_backward */
    int batched;                       /* 0: unbatched (L, D) inputs */
    int self_attention;                /* key and value are query */
    int N, L, S, D, H, Ek, Ev;
    const float *query, *key, *value;  /* (N, L, D), (N, S, Ek), (N, S, Ev) */
    const float *dout;                 /* (N, L, D), or NULL for op mha */
    MhaParams params;
    const Tensor *key_padding_mask;    /* BOOL or F32, or NULL */
    const Tensor *attn_mask;           /* BOOL or F32, (L, S) or (N * H, L, S), or NULL */
    int need_weights, average_attn_weights;
    int is_causal;                     /* the metadata, as given */
    int causal;                        /* what to pass mha_forward as is_causal */
    int use_attn_mask;                 /* attn_mask goes into the bias */
} MhaCase;

/* Reads and checks the inputs and options of `in` (see above). */
int mha_case_read(const TensorFile *in, MhaCase *c, Error *err);

/* Whether the case needs a bias buffer (a mask is in use), and filling it:
 * bias (N, H, L, S) from the case's masks by mha_mask_bias(). */
int mha_case_has_bias(const MhaCase *c);
int mha_case_bias(const MhaCase *c, float *bias);

/* Evaluates ops mha and mha_backward: the CaseEval of the chapter program. */
int mha_case_eval(const TensorFile *in, TensorFile *out, Error *err);

#endif
