/*
 * model_file.c - see model_file.h. The tensors come from chapter 07's table
 * (m->tensors: name, shape, place in params); the config travels as text
 * metadata, one key per field.
 */
#include "model_file.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "model_config.h"

/* The file's name for messages; "(case)" for a TensorFile built in memory. */
static const char *file_label(const TensorFile *f)
{
    return f->path ? f->path : "(case)";
}

/* The config fields as metadata keys "model.<field>". */
typedef struct {
    const char *key;
    int *value;
} IntField;

static int int_fields(ModelConfig *c, IntField *f)
{
    IntField all[] = {
        {"model.src_vocab", &c->src_vocab}, {"model.tgt_vocab", &c->tgt_vocab},
        {"model.d_model", &c->d_model}, {"model.nhead", &c->nhead},
        {"model.dim_feedforward", &c->dim_feedforward},
        {"model.num_encoder_layers", &c->num_encoder_layers},
        {"model.num_decoder_layers", &c->num_decoder_layers},
        {"model.max_len", &c->max_len}, {"model.learned_pos", &c->learned_pos},
        {"model.scale_embedding", &c->scale_embedding},
        {"model.share_embeddings", &c->share_embeddings},
        {"model.final_norm", &c->final_norm}, {"model.norm_first", &c->norm_first},
        {"model.pad_id", &c->pad_id},
    };
    int n = (int)(sizeof all / sizeof all[0]);
    memcpy(f, all, sizeof all);
    return n;
}

int model_to_file(const Model *m, TensorFile *f, Error *err)
{
    ModelConfig c = m->cfg;
    IntField fields[32];
    char text[64];
    int n = int_fields(&c, fields);
    for (int i = 0; i < m->n_tensors; i++) {
        const ModelTensor *t = &m->tensors[i];
        if (tensorfile_add_f32(f, t->name, m->params + t->offset, t->ndim, t->shape, err) != 0)
            return -1;
    }
    if (tensorfile_set_meta(f, "model.kind", model_kind_name(c.kind), err) != 0) return -1;
    /* Only a set model has input_dim: the other kinds' files stay as they were. */
    if (c.kind == MODEL_SET) {
        snprintf(text, sizeof text, "%d", c.input_dim);
        if (tensorfile_set_meta(f, "model.input_dim", text, err) != 0) return -1;
    }
    for (int i = 0; i < n; i++) {
        snprintf(text, sizeof text, "%d", *fields[i].value);
        if (tensorfile_set_meta(f, fields[i].key, text, err) != 0) return -1;
    }
    snprintf(text, sizeof text, "%.9g", c.eps);
    if (tensorfile_set_meta(f, "model.eps", text, err) != 0) return -1;
    snprintf(text, sizeof text, "%.9g", c.dropout);
    return tensorfile_set_meta(f, "model.dropout", text, err);
}

/* Reads the config from f's metadata; every key is required. */
static int config_from_file(const TensorFile *f, ModelConfig *c, Error *err)
{
    IntField fields[32];
    const char *kind = tensorfile_meta(f, "model.kind");
    memset(c, 0, sizeof *c);
    if (!kind)
        return error_set(err, "%s: not a model checkpoint: no metadata 'model.kind'",
                         file_label(f));
    if (strcmp(kind, "seq2seq") == 0) c->kind = MODEL_SEQ2SEQ;
    else if (strcmp(kind, "labeller") == 0) c->kind = MODEL_LABELLER;
    else if (strcmp(kind, "classifier") == 0) c->kind = MODEL_CLASSIFIER;
    else if (strcmp(kind, "set") == 0) c->kind = MODEL_SET;
    else if (strcmp(kind, "lm") == 0) c->kind = MODEL_LM;
    else return error_set(err, "%s: model.kind '%s' is not seq2seq, labeller, classifier, "
                          "set or lm", file_label(f), kind);
    int n = int_fields(c, fields);
    for (int i = 0; i < n; i++) {
        long long v;
        if (!tensorfile_meta(f, fields[i].key))
            return error_set(err, "%s: not a model checkpoint: no metadata '%s'", file_label(f),
                             fields[i].key);
        if (tensorfile_meta_int(f, fields[i].key, 0, &v, err) != 0) return -1;
        if (v < INT_MIN || v > INT_MAX)
            return error_set(err, "%s: metadata '%s' = %lld is out of range", file_label(f),
                             fields[i].key, v);
        *fields[i].value = (int)v;
    }
    if (c->kind == MODEL_SET) {   /* only a set model has it (and must) */
        long long v;
        if (!tensorfile_meta(f, "model.input_dim"))
            return error_set(err, "%s: a set model needs metadata 'model.input_dim'",
                             file_label(f));
        if (tensorfile_meta_int(f, "model.input_dim", 0, &v, err) != 0) return -1;
        if (v < 1 || v > INT_MAX)
            return error_set(err, "%s: metadata 'model.input_dim' = %lld is out of range",
                             file_label(f), v);
        c->input_dim = (int)v;
    } else if (tensorfile_meta(f, "model.input_dim")) {
        return error_set(err, "%s: metadata 'model.input_dim': only a set model reads "
                         "features", file_label(f));
    }
    double eps, dropout;
    if (!tensorfile_meta(f, "model.eps") || !tensorfile_meta(f, "model.dropout"))
        return error_set(err, "%s: not a model checkpoint: no metadata 'model.eps' or "
                         "'model.dropout'", file_label(f));
    if (tensorfile_meta_double(f, "model.eps", 0, &eps, err) != 0 ||
        tensorfile_meta_double(f, "model.dropout", 0, &dropout, err) != 0)
        return -1;
    c->eps = (float)eps;
    c->dropout = (float)dropout;
    return 0;
}

int model_load_file(Model *m, const TensorFile *f, int strict, Error *err)
{
    ModelConfig cfg;
    Error cfg_err;
    memset(m, 0, sizeof *m);
    if (config_from_file(f, &cfg, err) != 0) return -1;
    if (model_alloc(m, &cfg, &cfg_err) != 0)
        return error_set(err, "%s: %s", file_label(f), cfg_err.msg);
    for (int i = 0; i < m->n_tensors; i++) {
        const ModelTensor *t = &m->tensors[i];
        const Tensor *x;
        if (tensorfile_get(f, t->name, DTYPE_F32, t->ndim, &x, err) != 0) goto fail;
        for (int d = 0; d < t->ndim; d++) {
            if (x->shape[d] != t->shape[d]) {
                error_set(err, "%s: %s has shape (%" PRId64 "%s%" PRId64 "), the config needs "
                          "(%" PRId64 "%s%" PRId64 ")", file_label(f), t->name, x->shape[0],
                          x->ndim > 1 ? ", " : "", x->ndim > 1 ? x->shape[1] : 0, t->shape[0],
                          t->ndim > 1 ? ", " : "", t->ndim > 1 ? t->shape[1] : 0);
                goto fail;
            }
        }
        memcpy(m->params + t->offset, x->data, t->numel * sizeof(float));
    }
    if (strict) {
        for (int i = 0; i < f->n_tensors; i++) {
            const char *name = f->tensors[i].name;
            if (strncmp(name, "optimizer.", 10) != 0 && !model_tensor(m, name)) {
                error_set(err, "%s: tensor '%s' is not a parameter of this %s model", file_label(f),
                          name, model_kind_name(cfg.kind));
                goto fail;
            }
        }
    }
    return 0;
fail:
    model_free(m);
    return -1;
}

int model_save(const Model *m, const char *path, Error *err)
{
    TensorFile f = {0};
    int rc = model_to_file(m, &f, err);
    if (rc == 0) rc = safetensors_write(path, &f, err);
    tensorfile_free(&f);
    return rc;
}

int model_load(Model *m, const char *path, Error *err)
{
    TensorFile f = {0};
    memset(m, 0, sizeof *m);
    if (safetensors_read(path, &f, err) != 0) return -1;
    int rc = model_load_file(m, &f, 1, err);
    tensorfile_free(&f);
    return rc;
}
