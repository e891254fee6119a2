/*
 * model_config.c - see model_config.h: the table of ModelConfig's fields,
 * the names of the model kinds and the checks of a config, every size
 * computed without wrapping before chapter 07 lays out a single tensor.
 */
#include "model_config.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* Every field that existed when the first model files were written is
 * required in a file (absent NULL); a field added since gives the value
 * that those files mean, as the text of INT_FIELD's last argument ("0"). */
#define INT_FIELD(field, least, most, kinds, option, absent) \
    {#field, offsetof(ModelConfig, field), 0, least, most, 0, 0, kinds, option, absent}
#define FLOAT_FIELD(field, least, most, least_open, most_open, option) \
    {#field, offsetof(ModelConfig, field), 1, least, most, least_open, most_open, \
     MODEL_ALL_KINDS, option, NULL}

/* In the order of a model file's metadata (after model.kind). The layer
 * options: --layers sets both stacks (a seq2seq model's decoder too). */
const ModelField model_fields[] = {
    INT_FIELD(input_dim, 0, INT_MAX, 1u << MODEL_SET, NULL, NULL),
    INT_FIELD(src_vocab, 0, INT_MAX, MODEL_ALL_KINDS, NULL, NULL),
    INT_FIELD(tgt_vocab, 1, INT_MAX, MODEL_ALL_KINDS, NULL, NULL),
    INT_FIELD(d_model, 1, INT_MAX, MODEL_ALL_KINDS, "--d-model", NULL),
    INT_FIELD(nhead, 1, INT_MAX, MODEL_ALL_KINDS, "--heads", NULL),
    INT_FIELD(dim_feedforward, 1, INT_MAX, MODEL_ALL_KINDS, "--ffn", NULL),
    INT_FIELD(num_encoder_layers, 1, 64, MODEL_ALL_KINDS, "--layers", NULL),
    INT_FIELD(num_decoder_layers, 0, 64, MODEL_ALL_KINDS, "--layers", NULL),
    INT_FIELD(max_len, 1, MODEL_MAX_LEN, MODEL_ALL_KINDS, NULL, NULL),
    INT_FIELD(learned_pos, 0, 1, MODEL_ALL_KINDS, NULL, NULL),
    INT_FIELD(scale_embedding, 0, 2, MODEL_ALL_KINDS, NULL, NULL),
    INT_FIELD(share_embeddings, 0, 1, MODEL_ALL_KINDS, NULL, NULL),
    INT_FIELD(final_norm, 0, 1, MODEL_ALL_KINDS, NULL, NULL),
    INT_FIELD(norm_first, 0, 1, MODEL_ALL_KINDS, "--norm-first", NULL),
    INT_FIELD(pad_id, -1, INT_MAX, MODEL_ALL_KINDS, NULL, NULL),
    FLOAT_FIELD(eps, 0, HUGE_VAL, 1, 0, NULL),
    FLOAT_FIELD(dropout, 0, 1, 0, 1, "--dropout"),
};

/* Every field but kind has a row (each an int or a float, 4 bytes): a field
 * added to ModelConfig without one fails to compile here. */
#define MODEL_FIELD_ROWS (sizeof model_fields / sizeof model_fields[0])
_Static_assert(sizeof(int) == sizeof(float) &&
                   sizeof(ModelConfig) == sizeof(ModelKind) + MODEL_FIELD_ROWS * sizeof(int),
               "ModelConfig changed: give its new field a row of model_fields");
const int model_field_count = (int)MODEL_FIELD_ROWS;

double model_field_get(const ModelConfig *c, const ModelField *f)
{
    const char *p = (const char *)c + f->offset;
    if (f->is_float) {
        float v;
        memcpy(&v, p, sizeof v);
        return v;
    }
    int v;
    memcpy(&v, p, sizeof v);
    return v;
}

void model_field_set(ModelConfig *c, const ModelField *f, double value)
{
    char *p = (char *)c + f->offset;
    if (f->is_float) {
        float v = (float)value;
        memcpy(p, &v, sizeof v);
    } else {
        int v = (int)value;
        memcpy(p, &v, sizeof v);
    }
}

/* 0 if the field is in its row's range; else the error, naming the field,
 * its value and the range ("model: nhead 0 must be at least 1"). */
static int field_check(const ModelConfig *c, const ModelField *f, Error *err)
{
    double v = model_field_get(c, f);
    int low = f->least_open ? !(v > f->least) : !(v >= f->least);
    int high = f->most_open ? !(v < f->most) : !(v <= f->most);
    if (!low && !high) return 0;
    char value[32], least[32], most[32];
    const char *format = f->is_float ? "%g" : "%.0f";
    snprintf(value, sizeof value, format, v);
    snprintf(least, sizeof least, format, f->least);
    snprintf(most, sizeof most, format, f->most);
    if (f->most == HUGE_VAL || (!f->is_float && f->most == INT_MAX))
        return error_set(err, "model: %s %s must be %s %s", f->name, value,
                         f->least_open ? "above" : "at least", least);
    return error_set(err, "model: %s %s is not in %c%s, %s%c", f->name, value,
                     f->least_open ? '(' : '[', least, most, f->most_open ? ')' : ']');
}

const char *model_kind_name(ModelKind kind)
{
    switch (kind) {
    case MODEL_SEQ2SEQ:    return "seq2seq";
    case MODEL_LABELLER:   return "labeller";
    case MODEL_CLASSIFIER: return "classifier";
    case MODEL_SET:        return "set";
    case MODEL_LM:         return "lm";
    }
    return "?";
}

int model_kind_parse(const char *name, ModelKind *kind)
{
    const ModelKind all[] = {MODEL_SEQ2SEQ, MODEL_LABELLER, MODEL_CLASSIFIER, MODEL_SET,
                             MODEL_LM};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        if (strcmp(name, model_kind_name(all[i])) == 0) {
            *kind = all[i];
            return 0;
        }
    }
    return -1;
}

int model_config_check(const ModelConfig *c, Error *err)
{
    int seq2seq = c->kind == MODEL_SEQ2SEQ;
    if (c->kind != MODEL_SEQ2SEQ && c->kind != MODEL_LABELLER && c->kind != MODEL_CLASSIFIER &&
        c->kind != MODEL_SET && c->kind != MODEL_LM)
        return error_set(err, "model: kind %d is not seq2seq, labeller, classifier, set or lm",
                         c->kind);
    for (int i = 0; i < model_field_count; i++)
        if (field_check(c, &model_fields[i], err) != 0) return -1;
    if (c->kind == MODEL_SET) {
        /* features in, one score per element out, and nothing that needs ids
         * or an order */
        if (c->input_dim < 1 || c->src_vocab != 0 || c->tgt_vocab != 1)
            return error_set(err, "model: a set model needs input_dim >= 1, src_vocab 0 and "
                             "tgt_vocab 1 (input_dim %d, src_vocab %d, tgt_vocab %d)",
                             c->input_dim, c->src_vocab, c->tgt_vocab);
        if (c->pad_id != -1 || c->learned_pos || c->scale_embedding || c->share_embeddings)
            return error_set(err, "model: a set model has no padding, positions, embedding "
                             "scale or shared embeddings (pad_id %d, learned_pos %d, "
                             "scale_embedding %d, share_embeddings %d)", c->pad_id,
                             c->learned_pos, c->scale_embedding, c->share_embeddings);
    } else if (c->input_dim != 0) {
        return error_set(err, "model: input_dim %d: only a set model reads features",
                         c->input_dim);
    } else if (c->src_vocab < 1 || c->tgt_vocab < 1) {
        return error_set(err, "model: src_vocab %d and tgt_vocab %d must be at least 1",
                         c->src_vocab, c->tgt_vocab);
    }
    if (c->d_model % c->nhead != 0)
        return error_set(err, "model: d_model %d is not divisible by nhead %d", c->d_model,
                         c->nhead);
    if (seq2seq ? c->num_decoder_layers < 1 : c->num_decoder_layers != 0)
        return error_set(err, "model: num_decoder_layers %d: a %s model needs %s",
                         c->num_decoder_layers, model_kind_name(c->kind),
                         seq2seq ? "1 to 64" : "0");
    if (c->kind == MODEL_LM && c->src_vocab != c->tgt_vocab)
        return error_set(err, "model: a language model predicts its own ids: src_vocab %d and "
                         "tgt_vocab %d must be equal", c->src_vocab, c->tgt_vocab);
    if (c->share_embeddings && (!seq2seq || c->src_vocab != c->tgt_vocab))
        return error_set(err, "model: share_embeddings needs a seq2seq model with equal "
                         "vocabularies (src_vocab %d, tgt_vocab %d)", c->src_vocab, c->tgt_vocab);
    if (c->pad_id < -1 || (c->pad_id >= 0 &&
                           (c->pad_id >= c->src_vocab || (seq2seq && c->pad_id >= c->tgt_vocab))))
        return error_set(err, "model: pad_id %d is outside the vocabularies (or -1 for none)",
                         c->pad_id);
    /* The parameter count, every term in double so that no size wraps (two
     * vocabularies near INT_MAX would overflow an int sum): it is checked
     * before anything is allocated or any table built. */
    double D = c->d_model, F = c->dim_feedforward;
    double Vs = c->src_vocab, Vt = c->tgt_vocab, max_len = c->max_len, I = c->input_dim;
    double enc = 4 * D * D + 2 * D * F + 9 * D + F;            /* attention, FFN, two norms */
    double dec = 8 * D * D + 2 * D * F + 15 * D + F;           /* two attentions, three norms */
    double total = c->num_encoder_layers * enc + c->num_decoder_layers * dec
                 + (Vs + Vt + 2 * max_len + 4) * D             /* embeddings, positions, norms */
                 + (Vt + 1) * (D + 1) + (I + 1) * D;           /* generator, input_net */
    if (total > MODEL_MAX_PARAMS || D * F > MODEL_MAX_PARAMS || D * D > MODEL_MAX_PARAMS ||
        max_len * D > MODEL_MAX_PARAMS)
        return error_set(err, "model: about %.3g parameters (d_model %d, dim_feedforward %d, "
                         "%d + %d layers); this project allows at most %d", total, c->d_model,
                         c->dim_feedforward, c->num_encoder_layers, c->num_decoder_layers,
                         MODEL_MAX_PARAMS);
    return 0;
}
