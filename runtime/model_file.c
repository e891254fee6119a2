/*
 * model_file.c - see model_file.h. The tensors come from chapter 07's table
 * (m->tensors: name, shape, place in params); the config travels as text
 * metadata, one key per field.
 */
#include "model_file.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_config.h"

/* The file's name for messages; "(case)" for a TensorFile built in memory. */
static const char *file_label(const TensorFile *f)
{
    return f->path ? f->path : "(case)";
}

/* The metadata key of a config field: "model.<name>". */
static void field_key(const ModelField *f, char *key, size_t size)
{
    snprintf(key, size, "model.%s", f->name);
}

/* The fields a model of this kind keeps in its file (only a set model has
 * input_dim: the other kinds' files stay as they were). */
static int field_kept(const ModelField *f, ModelKind kind)
{
    return (f->kinds >> kind) & 1u;
}

int model_to_file(const Model *m, TensorFile *f, Error *err)
{
    const ModelConfig *c = &m->cfg;
    char key[64], text[64];
    for (int i = 0; i < m->n_tensors; i++) {
        const ModelTensor *t = &m->tensors[i];
        if (tensorfile_add_f32(f, t->name, m->params + t->offset, t->ndim, t->shape, err) != 0)
            return -1;
    }
    if (tensorfile_set_meta(f, "model.kind", model_kind_name(c->kind), err) != 0) return -1;
    for (int i = 0; i < model_field_count; i++) {
        const ModelField *field = &model_fields[i];
        if (!field_kept(field, c->kind)) continue;
        field_key(field, key, sizeof key);
        snprintf(text, sizeof text, field->is_float ? "%.9g" : "%.0f",
                 model_field_get(c, field));
        if (tensorfile_set_meta(f, key, text, err) != 0) return -1;
    }
    return 0;
}

/* Reads the config from f's metadata: every key its kind keeps is
 * required, and a key of a field its kind does not keep is refused. */
static int config_from_file(const TensorFile *f, ModelConfig *c, Error *err)
{
    char key[64];
    const char *kind = tensorfile_meta(f, "model.kind");
    memset(c, 0, sizeof *c);
    if (!kind)
        return error_set(err, "%s: not a model checkpoint: no metadata 'model.kind'",
                         file_label(f));
    if (model_kind_parse(kind, &c->kind) != 0)
        return error_set(err, "%s: model.kind '%s' is not seq2seq, labeller, classifier, "
                         "set or lm", file_label(f), kind);
    for (int i = 0; i < model_field_count; i++) {
        const ModelField *field = &model_fields[i];
        field_key(field, key, sizeof key);
        if (!field_kept(field, c->kind)) {
            if (tensorfile_meta(f, key))
                return error_set(err, "%s: metadata '%s': a %s model has no %s", file_label(f),
                                 key, kind, field->name);
            continue;
        }
        const char *text = tensorfile_meta(f, key);
        if (!text && !field->absent)
            return error_set(err, "%s: not a model checkpoint: no metadata '%s'", file_label(f),
                             key);
        if (!text) {                /* a file from before the field */
            model_field_set(c, field, atof(field->absent));
        } else if (field->is_float) {
            double v;
            if (tensorfile_meta_double(f, key, 0, &v, err) != 0) return -1;
            model_field_set(c, field, v);
        } else {
            long long v;
            if (tensorfile_meta_int(f, key, 0, &v, err) != 0) return -1;
            if (v < INT_MIN || v > INT_MAX)
                return error_set(err, "%s: metadata '%s' = %lld is out of range", file_label(f),
                                 key, v);
            model_field_set(c, field, (double)v);
        }
    }
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
