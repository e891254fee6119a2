/*
 * model_config.h - the checks a model's config passes before anything is
 * allocated (chapter 07's ModelConfig), and the names of the model kinds.
 *
 * Not the model: chapter 07 (model.h) is. These are the limits and the
 * error messages around it, shared by model_init, the checkpoint reader and
 * the training programs' options.
 *
 * Read next: model_file.h (the config in a checkpoint's metadata).
 */
#ifndef MODEL_CONFIG_H
#define MODEL_CONFIG_H

#include "error.h"
#include "model.h"

/* The largest models and sequences the checks allow: 2^30 parameters
 * (4 GiB of float32) and 65,536 positions. */
#define MODEL_MAX_PARAMS (1 << 30)
#define MODEL_MAX_LEN (1 << 16)

/* "seq2seq", "labeller", "classifier", "set" or "lm" (the metadata "model.kind"). */
const char *model_kind_name(ModelKind kind);

/* Checks a config: sizes >= 1, D divisible by H, the kind's layer counts,
 * eps > 0, dropout in [0, 1), pad_id inside the source vocabulary (and the
 * target's, for seq2seq; a labeller's or classifier's tgt_vocab counts
 * classes) or -1, shared embeddings only with equal vocabularies, a set
 * model with input_dim >= 1, Vs 0, Vt 1, no padding, no learned positions or
 * scale (and input_dim 0 for every other kind), max_len and the parameter
 * count within the limits above (computed in double, so that no size wraps,
 * before anything is allocated). err names the field. */
int model_config_check(const ModelConfig *cfg, Error *err);

#endif
