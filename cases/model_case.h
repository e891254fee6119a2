/*
 * model_case.h - evaluating a chapter 07 case file: the work behind
 * `build/07_model --case IN --out OUT`, kept in the library so the tests
 * can hand it broken cases directly.
 *
 * Every case holds a whole model in the checkpoint format: its parameters
 * under their state_dict names and its config as metadata "model.<field>"
 * (model.h). The evaluator loads it with model_load_file, not strictly,
 * since a case holds its inputs and expected outputs too. The model runs in
 * evaluation mode (no dropout).
 *
 * Letters: N batch, S source length, T target length, Vt target vocabulary
 * (classes for a labeller or classifier), M max_new, k the top-k count.
 *
 *   model            src I64 (N, S), tgt I64 (N, T) for seq2seq (only then);
 *                    a set model reads features F32 (N, S, input_dim) instead
 *                    -> logits (N, T, Vt) seq2seq, (N, S, Vt) labeller,
 *                    (N, Vt) classifier, (N, S) set (one score per element)
 *   model_backward   + grad_logits (the shape of logits) -> logits and
 *                    grad_<name> for every parameter <name>: the gradient of
 *                    sum(logits * grad_logits)
 *   greedy           src (seq2seq only); metadata sos_id, eos_id, max_new
 *                    -> output I64 (N, M), score (N,)
 *   beam             the same and metadata beam_width, length_penalty
 *                    (default 0) -> output I64 (N, M), score (N,)
 *   topk             src, tgt (seq2seq); metadata k (1..Vt) -> topk_ids I64
 *                    (not for a set model)
 *                    and topk_probs, the shape of logits with k for Vt
 *   checkpoint       the parameters alone, loaded strictly (no other
 *                    tensor allowed) -> every parameter under its name, as
 *                    model_to_file writes it back
 *
 * Everything is checked before any arithmetic: the model's config and every
 * parameter's presence, dtype and shape (model_load_file), each input
 * tensor's dtype and shape, ids inside the vocabularies, sequences no longer
 * than max_len, the decoding options. A problem is one line in err naming
 * the file and the problem, and -1; run_case_file then writes no output.
 */
#ifndef MODEL_CASE_H
#define MODEL_CASE_H

#include "safetensors.h"

/* The CaseEval of the chapter program. */
int model_case_eval(const TensorFile *in, TensorFile *out, Error *err);

#endif
