/*
 * model_config.h - ModelConfig's fields in one table, the checks a config
 * passes before anything is allocated, and the names of the model kinds.
 *
 * Not the model: model.h is. The table is what everything around the
 * model reads a config through: the checks here, the model file's metadata
 * (runtime/model_file.c), a resumed run's comparison and the options'
 * messages (runtime/checkpoint.c), the ranks' hash (runtime/task.c). A new
 * field of ModelConfig is one row of model_fields plus its use.
 *
 * Read next: model_config.c.
 */
#ifndef MODEL_CONFIG_H
#define MODEL_CONFIG_H

#include <stddef.h>

#include "error.h"
#include "model.h"

/* The largest models and sequences the checks allow: 2^30 parameters
 * (4 GiB of float32) and 65,536 positions. */
#define MODEL_MAX_PARAMS (1 << 30)
#define MODEL_MAX_LEN (1 << 16)

/* One field of ModelConfig (all but kind, which is named by
 * model_kind_name). */
typedef struct {
    const char *name;           /* the field's name; its metadata key is "model.<name>" */
    size_t offset;              /* offsetof(ModelConfig, field) */
    int is_float;               /* 1: a float, 0: an int */
    double least, most;         /* its range, both ends included; HUGE_VAL: no upper end */
    int least_open;             /* 1: least itself is outside (eps > 0) */
    int most_open;              /* 1: most itself is outside (dropout < 1) */
    unsigned kinds;             /* the kinds whose model files have it: bit 1 << ModelKind */
    const char *option;         /* the training programs' option that sets it, or NULL: the
                                   task sets it (and names its own option, if any) */
    const char *absent;         /* NULL: a model file must have the key; else the value a
                                   file written before the field existed means ("0") */
} ModelField;

#define MODEL_ALL_KINDS 0x1fu

extern const ModelField model_fields[];
extern const int model_field_count;

/* A field's value as a double (every int and float of the config is exact
 * in one), and the other way. */
double model_field_get(const ModelConfig *c, const ModelField *f);
void model_field_set(ModelConfig *c, const ModelField *f, double value);

/* "seq2seq", "labeller", "classifier", "set" or "lm" (the metadata "model.kind"). */
const char *model_kind_name(ModelKind kind);

/* The kind called name ("lm"), or -1. */
int model_kind_parse(const char *name, ModelKind *kind);

/* Checks a config: every field in its row's range, then the rules between
 * fields: D divisible by H, the kind's layer counts, pad_id inside the
 * source vocabulary (and the target's, for seq2seq; a labeller's or
 * classifier's tgt_vocab counts classes) or -1, shared embeddings only with
 * equal vocabularies, a set model with input_dim >= 1, Vs 0, Vt 1, no
 * padding, no learned positions or scale (and input_dim 0 for every other
 * kind), and the parameter count within the limit above (computed in
 * double, so that no size wraps, before anything is allocated). err names
 * the field. */
int model_config_check(const ModelConfig *cfg, Error *err);

#endif
