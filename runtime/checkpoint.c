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

/* Metadata keys and tensor names a checkpoint adds to the model's own. */
#define OPT_M "optimizer.exp_avg"
#define OPT_V "optimizer.exp_avg_sq"

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

int checkpoint_save(const char *path, const Model *m, const AdamState *opt,
                    const TrainState *state, const char *const *meta, Error *err)
{
    TensorFile f = {0};
    int64_t n = (int64_t)m->num_params;
    int rc = -1;
    if (model_to_file(m, &f, err) != 0) goto done;
    for (int i = 0; meta && meta[i]; i += 2)
        if (tensorfile_set_meta(&f, meta[i], meta[i + 1], err) != 0) goto done;
    if (tensorfile_add_f32(&f, OPT_M, opt->m, 1, &n, err) != 0) goto done;
    if (tensorfile_add_f32(&f, OPT_V, opt->v, 1, &n, err) != 0) goto done;
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

int checkpoint_load(const char *path, Model *m, AdamState *opt, TrainState *state, Error *err)
{
    TensorFile f = {0};
    uint64_t step = 0, epoch = 0;
    memset(opt, 0, sizeof *opt);
    if (safetensors_read(path, &f, err) != 0) return -1;
    if (model_load_file(m, &f, 1, err) != 0) goto fail_file;
    if (adam_state_alloc(opt, m->num_params, err) != 0) goto fail_model;
    if (read_flat(&f, OPT_M, opt->m, m->num_params, err) != 0 ||
        read_flat(&f, OPT_V, opt->v, m->num_params, err) != 0 ||
        get_meta_u64(&f, "optimizer.step", INT64_MAX, &step, err) != 0 ||
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
    adam_state_free(opt);
fail_model:
    model_free(m);
fail_file:
    tensorfile_free(&f);
    return -1;
}

int options_check_config(const ModelConfig *wanted, const ConfigOptions *options, Error *err)
{
    if (model_config_check(wanted, err) == 0) return 0;
    const struct {
        const char *option;
        int value;
    } sizes[] = {
        {options->d_model, wanted->d_model},
        {options->nhead, wanted->nhead},
        {options->ffn, wanted->dim_feedforward},
        {options->layers, wanted->num_encoder_layers},
    };
    char msg[ERROR_MSG_MAX], set[160] = "";
    snprintf(msg, sizeof msg, "%s", err->msg);
    size_t n = 0;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        if (!sizes[i].option || n >= sizeof set) continue;
        int k = snprintf(set + n, sizeof set - n, "%s%s %d", n ? ", " : "", sizes[i].option,
                         sizes[i].value);
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
    const ConfigOptions *o = options;
    const struct {
        const char *field, *option;
        double saved, wanted;
    } fields[] = {
        {"src_vocab", o->vocab, saved->src_vocab, wanted->src_vocab},
        {"input_dim", NULL, saved->input_dim, wanted->input_dim},
        {"tgt_vocab", o->vocab, saved->tgt_vocab, wanted->tgt_vocab},
        {"d_model", o->d_model, saved->d_model, wanted->d_model},
        {"nhead", o->nhead, saved->nhead, wanted->nhead},
        {"dim_feedforward", o->ffn, saved->dim_feedforward, wanted->dim_feedforward},
        {"num_encoder_layers", o->layers, saved->num_encoder_layers, wanted->num_encoder_layers},
        {"num_decoder_layers", o->layers, saved->num_decoder_layers, wanted->num_decoder_layers},
        {"max_len", o->max_len, saved->max_len, wanted->max_len},
        {"learned_pos", NULL, saved->learned_pos, wanted->learned_pos},
        {"scale_embedding", NULL, saved->scale_embedding, wanted->scale_embedding},
        {"share_embeddings", NULL, saved->share_embeddings, wanted->share_embeddings},
        {"final_norm", NULL, saved->final_norm, wanted->final_norm},
        {"norm_first", o->norm_first, saved->norm_first, wanted->norm_first},
        {"pad_id", NULL, saved->pad_id, wanted->pad_id},
        {"eps", NULL, saved->eps, wanted->eps},
        {"dropout", o->dropout, saved->dropout, wanted->dropout},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        if (fields[i].saved == fields[i].wanted) continue;
        return error_set(err, "--resume: %s holds a model with %s %g, the options ask for %g "
                         "(%s; resume with the options of the run that wrote it)", path,
                         fields[i].field, fields[i].saved, fields[i].wanted,
                         fields[i].option ? fields[i].option : "no option sets it");
    }
    return 0;
}

