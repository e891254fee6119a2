/*
 * checkpoint.c - see checkpoint.h.
 */
#include "checkpoint.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"
#include "model_file.h"

/* A checkpoint adds to the model's tensors the optimizer's slots, as
 * "optimizer.<slot name>" (torch's state names: optimizer.exp_avg), and
 * its metadata. */

static int set_meta_u64(TensorFile *f, const char *key, uint64_t value, Error *err)
{
    char text[32];
    snprintf(text, sizeof text, "%" PRIu64, value);
    return tensorfile_set_meta(f, key, text, err);
}

/* A counter of the metadata: decimal digits only (strtoull would take "-5"
 * as 2^64 - 5) and at most max. */
static int get_meta_u64(const TensorFile *f, const char *key, uint64_t max, uint64_t *value,
                        Error *err)
{
    const char *text = tensorfile_meta(f, key);
    char *end;
    if (!text) return error_set(err, "%s: not a checkpoint: no metadata '%s'", f->path, key);
    errno = 0;
    *value = strtoull(text, &end, 10);
    if (text[0] < '0' || text[0] > '9' || *end || errno || *value > max)
        return error_set(err, "%s: metadata '%s' is not a whole number in 0..%llu",
                         f->path, key, (unsigned long long)max);
    return 0;
}

int checkpoint_save(const char *path, const Model *m, const OptimState *opt,
                    const TrainState *state, const char *const *meta, Error *err)
{
    TensorFile f = {0};
    int64_t n = (int64_t)m->num_params;
    int rc = -1;
    if (model_to_file(m, &f, err) != 0) goto done;
    for (int i = 0; meta && meta[i]; i += 2)
        if (tensorfile_set_meta(&f, meta[i], meta[i + 1], err) != 0) goto done;
    for (int i = 0; i < opt->n_slots; i++) {
        char name[96];
        snprintf(name, sizeof name, "optimizer.%s", opt->slot_names[i]);
        if (tensorfile_add_f32(&f, name, opt->slots[i], 1, &n, err) != 0) goto done;
    }
    if (set_meta_u64(&f, "optimizer.step", (uint64_t)opt->step, err) != 0 ||
        set_meta_u64(&f, "train.epoch", (uint64_t)state->epoch, err) != 0 ||
        set_meta_u64(&f, "train.data_rng.state", state->data_rng.state, err) != 0 ||
        set_meta_u64(&f, "train.data_rng.inc", state->data_rng.inc, err) != 0 ||
        set_meta_u64(&f, "train.dropout_rng.state", state->dropout_rng.state, err) != 0 ||
        set_meta_u64(&f, "train.dropout_rng.inc", state->dropout_rng.inc, err) != 0)
        goto done;
    rc = safetensors_write(path, &f, err);
done:
    tensorfile_free(&f);
    return rc;
}

/* Copies the float32 tensor `name` of n values into dst. */
static int read_flat(const TensorFile *f, const char *name, float *dst, size_t n, Error *err)
{
    const Tensor *t;
    if (tensorfile_get(f, name, DTYPE_F32, 1, &t, err) != 0) return -1;
    if ((size_t)t->shape[0] != n)
        return error_set(err, "%s: %s has %" PRId64 " values, the model has %zu parameters",
                         f->path, name, t->shape[0], n);
    memcpy(dst, t->data, n * sizeof *dst);
    return 0;
}

int checkpoint_load(const char *path, Model *m, OptimState *opt, TrainState *state, Error *err)
{
    TensorFile f = {0};
    uint64_t step = 0, epoch = 0;
    memset(opt, 0, sizeof *opt);
    if (safetensors_read(path, &f, err) != 0) return -1;
    if (model_load_file(m, &f, 1, err) != 0) goto fail_file;
    if (adam_state_alloc(opt, m->num_params, err) != 0) goto fail_model;
    for (int i = 0; i < opt->n_slots; i++) {
        char name[96];
        snprintf(name, sizeof name, "optimizer.%s", opt->slot_names[i]);
        if (read_flat(&f, name, opt->slots[i], m->num_params, err) != 0) goto fail_opt;
    }
    if (get_meta_u64(&f, "optimizer.step", INT64_MAX, &step, err) != 0 ||
        get_meta_u64(&f, "train.epoch", INT32_MAX, &epoch, err) != 0 ||
        get_meta_u64(&f, "train.data_rng.state", UINT64_MAX, &state->data_rng.state, err) != 0 ||
        get_meta_u64(&f, "train.data_rng.inc", UINT64_MAX, &state->data_rng.inc, err) != 0 ||
        get_meta_u64(&f, "train.dropout_rng.state", UINT64_MAX, &state->dropout_rng.state,
                     err) != 0 ||
        get_meta_u64(&f, "train.dropout_rng.inc", UINT64_MAX, &state->dropout_rng.inc,
                     err) != 0)
        goto fail_opt;
    opt->step = (int64_t)step;
    state->epoch = (int64_t)epoch;
    tensorfile_free(&f);
    return 0;
fail_opt:
    optim_state_free(opt);
fail_model:
    model_free(m);
fail_file:
    tensorfile_free(&f);
    return -1;
}

const char *config_option(const ConfigOptions *options, const ModelField *f)
{
    for (size_t i = 0; i < sizeof options->own / sizeof options->own[0]; i++) {
        if (!options->own[i].field) break;
        if (strcmp(options->own[i].field, f->name) == 0) return options->own[i].option;
    }
    return f->option;
}

int options_check_config(const ModelConfig *wanted, const ConfigOptions *options, Error *err)
{
    if (model_config_check(wanted, err) == 0) return 0;
    char msg[ERROR_MSG_MAX], set[160] = "";
    snprintf(msg, sizeof msg, "%s", err->msg);
    size_t n = 0;
    for (int i = 0; i < model_field_count; i++) {
        const ModelField *f = &model_fields[i];
        const char *option = config_option(options, f);
        /* the sizes: the int options every program shares, once each */
        if (f->is_float || !f->option || option != f->option || f->most <= 1 ||
            strstr(set, option) || n >= sizeof set)
            continue;
        int k = snprintf(set + n, sizeof set - n, "%s%s %.0f", n ? ", " : "", option,
                         model_field_get(wanted, f));
        if (k > 0) n += (size_t)k;
    }
    return error_set(err, "%s (the options: %s)", msg, set);
}

int checkpoint_check_config(const char *path, const ModelConfig *saved,
                            const ModelConfig *wanted, const ConfigOptions *options,
                            Error *err)
{
    if (saved->kind != wanted->kind)
        return error_set(err, "--resume: %s holds a %s model, the options ask for a %s one "
                         "(%s; resume with the options of the run that wrote it)", path,
                         model_kind_name(saved->kind), model_kind_name(wanted->kind),
                         options->kind ? options->kind : "model.kind");
    for (int i = 0; i < model_field_count; i++) {
        const ModelField *f = &model_fields[i];
        double s = model_field_get(saved, f), w = model_field_get(wanted, f);
        if (s == w) continue;
        const char *option = config_option(options, f);
        return error_set(err, "--resume: %s holds a model with %s %g, the options ask for %g "
                         "(%s; resume with the options of the run that wrote it)", path,
                         f->name, s, w, option ? option : "no option sets it");
    }
    return 0;
}
