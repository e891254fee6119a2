/*
 * training_case.c - see training_case.h for the ops, their tensors and options.
 *
 * Each evaluator reads and checks all of its inputs first, then adds its
 * outputs to the output file and computes them; run_case_file writes the
 * file only if everything worked.
 */
#include "training_case.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "casefile.h"
#include "data.h"
#include "loss.h"
#include "optim.h"
#include "rng.h"
#include "schedule.h"
#include "trainer.h"

/* Limits on what a case may ask this program to allocate. */
#define MAX_CASE_VALUES (1LL << 24)

/* ------------------------------------------------------------------------ */
/* Reading and checking inputs                                               */
/* ------------------------------------------------------------------------ */

/* The tensor `name` of the given dtype and rank whose dimensions equal the
 * entries of `expect` that are >= 0; `letters` names them for the message.
 * Every dimension must be at least 1. */
static int get_tensor(const TensorFile *in, const char *name, DType dtype, int ndim,
                      const int64_t *expect, const char *letters, const Tensor **t, Error *err)
{
    if (tensorfile_get(in, name, dtype, ndim, t, err) != 0) return -1;
    if (expect && case_check_shape(in, name, *t, expect, letters, err) != 0) return -1;
    char got[128];
    for (int i = 0; i < ndim; i++) {
        if ((*t)->shape[i] < 1)
            return error_set(err, "%s: tensor '%s' has shape %s; %s must all be at least 1",
                             case_name(in), name, tensor_shape_str(*t, got, sizeof got), letters);
    }
    if (tensor_numel(*t) > MAX_CASE_VALUES)
        return error_set(err, "%s: tensor '%s' has %lld values, more than this program handles "
                         "(%lld)", case_name(in), name, (long long)tensor_numel(*t),
                         (long long)MAX_CASE_VALUES);
    return 0;
}

/* Fails unless metadata `key` is present; `what` says what it is. */
static int require(const TensorFile *in, const char *key, const char *what, Error *err)
{
    if (!tensorfile_meta(in, key))
        return error_set(err, "%s: metadata '%s' (%s) is missing", case_name(in), key, what);
    return 0;
}

/* An integer option in [lo, hi]; required unless a fallback is allowed. */
static int get_int(const TensorFile *in, const char *key, const char *what, int required,
                   long long fallback, long long lo, long long hi, long long *v, Error *err)
{
    if (required && require(in, key, what, err) != 0) return -1;
    if (tensorfile_meta_int(in, key, fallback, v, err) != 0) return -1;
    if (*v < lo || *v > hi) {
        if (hi == LLONG_MAX)
            return error_set(err, "%s: metadata %s is %lld; %s must be at least %lld",
                             case_name(in), key, *v, what, lo);
        return error_set(err, "%s: metadata %s is %lld; %s must lie in %lld..%lld", case_name(in),
                         key, *v, what, lo, hi);
    }
    return 0;
}

/* A float32 option: finite, >= lo (> lo with open_lo), and < hi when
 * hi_open is set. */
static int get_float(const TensorFile *in, const char *key, const char *rule, double fallback,
                     double lo, int open_lo, double hi, int open_hi, float *v, Error *err)
{
    double d;
    if (tensorfile_meta_double(in, key, fallback, &d, err) != 0) return -1;
    float f = (float)d;
    int ok = isfinite(d) && isfinite(f) && (open_lo ? f > lo : f >= lo) &&
             (open_hi ? f < hi : f <= hi);
    if (!ok)
        return error_set(err, "%s: metadata %s is %s; it must be %s", case_name(in), key,
                         tensorfile_meta(in, key), rule);
    *v = f;
    return 0;
}

/* Adds a zeroed output tensor of any dtype; returns its data or NULL. */
static void *output_tensor(TensorFile *out, const char *name, DType dtype, int ndim,
                           const int64_t *shape, Error *err)
{
    Tensor t;
    if (tensor_alloc(&t, dtype, ndim, shape, err) != 0) return NULL;
    if (tensorfile_add(out, name, &t, err) != 0) {
        tensor_free(&t);
        return NULL;
    }
    return tensorfile_find(out, name)->data;
}

/* A library function failed after the checks: its own message if it set
 * one, else its name (an exercise stub sets none). */
static int call_failed(const TensorFile *in, const char *function, const Error *inner,
                       Error *err)
{
    if (inner->msg[0]) return error_set(err, "%s: %s", case_name(in), inner->msg);
    return error_set(err, "%s: %s failed", case_name(in), function);
}

/* ------------------------------------------------------------------------ */
/* Cross-entropy                                                             */
/* ------------------------------------------------------------------------ */

static int eval_cross_entropy(const TensorFile *in, TensorFile *out, Error *err)
{
    int backward = case_is_backward(in);
    const Tensor *logits, *target;
    if (get_tensor(in, "logits", DTYPE_F32, 2, NULL, "(R, V)", &logits, err) != 0) return -1;
    int64_t R = logits->shape[0], V = logits->shape[1];
    if (get_tensor(in, "target", DTYPE_I64, 1, (int64_t[]){R}, "(R,)", &target, err) != 0)
        return -1;
    if (V > INT_MAX)
        return error_set(err, "%s: tensor 'logits' has %lld classes, more than this program "
                         "handles (%d)", case_name(in), (long long)V, INT_MAX);
    long long ignore_index;
    float smoothing = 0.0f;
    if (tensorfile_meta_int(in, "ignore_index", CROSS_ENTROPY_IGNORE_INDEX, &ignore_index,
                            err) != 0 ||
        get_float(in, "label_smoothing", "a number in [0, 1]", 0.0, 0.0, 0, 1.0, 0, &smoothing,
                  err) != 0)
        return -1;
    const int64_t *t = target->data;
    for (int64_t r = 0; r < R; r++)
        if (t[r] != ignore_index && (t[r] < 0 || t[r] >= V))
            return error_set(err, "%s: tensor 'target': row %lld holds %lld, outside the classes "
                             "0..%lld (and not ignore_index %lld)", case_name(in), (long long)r,
                             (long long)t[r], (long long)V - 1, ignore_index);

    float *loss = case_output_f32(out, "loss", 0, NULL, err);
    int64_t *count = output_tensor(out, "count", DTYPE_I64, 0, NULL, err);
    int64_t *correct = output_tensor(out, "correct", DTYPE_I64, 0, NULL, err);
    float *dlogits = NULL;
    if (!loss || !count || !correct ||
        (backward && !(dlogits = case_output_f32(out, "grad_logits", 2, logits->shape, err))))
        return -1;
    Error inner = {{0}};
    if (cross_entropy(loss, dlogits, logits->data, t, R, (int)V, ignore_index, smoothing, count,
                      correct, &inner) != 0)
        return call_failed(in, "cross_entropy", &inner, err);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Adam and AdamW                                                            */
/* ------------------------------------------------------------------------ */

static int eval_adam(const TensorFile *in, TensorFile *out, Error *err)
{
    const Tensor *params, *grads, *lrs = NULL;
    if (get_tensor(in, "params", DTYPE_F32, 1, NULL, "(n,)", &params, err) != 0) return -1;
    int64_t n = params->shape[0];
    if (get_tensor(in, "grads", DTYPE_F32, 2, (int64_t[]){-1, n}, "(K, n)", &grads, err) != 0)
        return -1;
    int64_t K = grads->shape[0];
    long long steps;
    if (tensorfile_meta_int(in, "steps", K, &steps, err) != 0) return -1;
    if (steps != K)
        return error_set(err, "%s: metadata steps is %lld but tensor 'grads' has %lld rows, one "
                         "per step", case_name(in), steps, (long long)K);

    int decoupled;
    if (tensorfile_meta_bool(in, "decoupled", 0, &decoupled, err) != 0) return -1;
    AdamConfig c = adam_default_config(decoupled);
    if (get_float(in, "lr", "a finite number >= 0", c.lr, 0.0, 0, INFINITY, 0, &c.lr, err) ||
        get_float(in, "beta1", "a number in [0, 1)", c.beta1, 0.0, 0, 1.0, 1, &c.beta1, err) ||
        get_float(in, "beta2", "a number in [0, 1)", c.beta2, 0.0, 0, 1.0, 1, &c.beta2, err) ||
        get_float(in, "eps", "a finite number > 0", c.eps, 0.0, 1, INFINITY, 0, &c.eps, err) ||
        get_float(in, "weight_decay", "a finite number >= 0", c.weight_decay, 0.0, 0, INFINITY,
                  0, &c.weight_decay, err))
        return -1;
    if (tensorfile_find(in, "lrs")) {
        if (get_tensor(in, "lrs", DTYPE_F32, 1, (int64_t[]){K}, "(K,)", &lrs, err) != 0)
            return -1;
        const float *l = lrs->data;
        for (int64_t k = 0; k < K; k++)
            if (!(l[k] >= 0.0f && isfinite(l[k])))
                return error_set(err, "%s: tensor 'lrs': step %lld has the learning rate %g; it "
                                 "must be a finite number >= 0", case_name(in), (long long)k, l[k]);
    }

    float *p = case_output_f32(out, "params_after", 1, &n, err);
    float *m = case_output_f32(out, "exp_avg", 1, &n, err);
    float *v = case_output_f32(out, "exp_avg_sq", 1, &n, err);
    if (!p || !m || !v) return -1;
    AdamState s;
    Error inner = {{0}};
    if (adam_state_alloc(&s, (size_t)n, &inner) != 0)
        return call_failed(in, "adam_state_alloc", &inner, err);
    memcpy(p, params->data, (size_t)n * sizeof *p);
    int rc = 0;
    for (int64_t k = 0; k < K && rc == 0; k++) {
        float lr = lrs ? ((const float *)lrs->data)[k] : c.lr;
        if (adam_step(p, (const float *)grads->data + k * n, &s, &c, lr) != 0)
            rc = call_failed(in, "adam_step", &inner, err);
    }
    if (rc == 0) {
        memcpy(m, s.m, (size_t)n * sizeof *m);
        memcpy(v, s.v, (size_t)n * sizeof *v);
    }
    adam_state_free(&s);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Gradient clipping                                                         */
/* ------------------------------------------------------------------------ */

static int eval_clip(const TensorFile *in, TensorFile *out, Error *err)
{
    const Tensor *grads;
    float max_norm = 0.0f;
    if (get_tensor(in, "grads", DTYPE_F32, 1, NULL, "(n,)", &grads, err) != 0 ||
        require(in, "max_norm", "the largest norm allowed", err) != 0 ||
        get_float(in, "max_norm", "a finite number > 0", 1.0, 0.0, 1, INFINITY, 0, &max_norm,
                  err) != 0)
        return -1;
    int64_t n = grads->shape[0];
    float *g = case_output_f32(out, "grads_clipped", 1, &n, err);
    float *total = case_output_f32(out, "total_norm", 0, NULL, err);
    if (!g || !total) return -1;
    memcpy(g, grads->data, (size_t)n * sizeof *g);
    double norm = clip_grad_norm(g, (size_t)n, max_norm);
    if (norm < 0) return error_set(err, "%s: clip_grad_norm failed", case_name(in));
    *total = (float)norm;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Learning-rate schedules                                                   */
/* ------------------------------------------------------------------------ */

static int eval_schedule(const TensorFile *in, TensorFile *out, Error *err)
{
    int noam = strcmp(tensorfile_meta(in, "op"), "lr_noam") == 0;
    const Tensor *steps;
    if (get_tensor(in, "steps", DTYPE_I64, 1, NULL, "(n,)", &steps, err) != 0) return -1;
    int64_t n = steps->shape[0];
    const int64_t *s = steps->data;
    for (int64_t i = 0; i < n; i++)
        if (s[i] < 0)
            return error_set(err, "%s: tensor 'steps' holds %lld at index %lld; a step counter "
                             "is never negative", case_name(in), (long long)s[i], (long long)i);
    long long warmup, max_iters = 1, d_model = 1;
    if (noam) {
        if (get_int(in, "d_model", "d_model", 1, 0, 1, INT_MAX, &d_model, err) != 0 ||
            get_int(in, "warmup", "the number of warm-up steps", 1, 0, 1, LLONG_MAX, &warmup,
                    err) != 0)
            return -1;
    } else {
        if (get_int(in, "warmup", "the number of warm-up steps", 1, 0, 0, LLONG_MAX, &warmup,
                    err) != 0 ||
            get_int(in, "max_iters", "the length of the cosine", 1, 0, 1, LLONG_MAX, &max_iters,
                    err) != 0)
            return -1;
    }
    double *factor = output_tensor(out, "factor", DTYPE_F64, 1, &n, err);
    if (!factor) return -1;
    for (int64_t i = 0; i < n; i++)
        factor[i] = noam ? lr_noam(s[i], (int)d_model, warmup)
                         : lr_cosine_warmup(s[i], warmup, max_iters);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Data: the task's sequences and the batcher's permutations                */
/* ------------------------------------------------------------------------ */

/* rng_seed and rng_stream (both default 0) into a seeded Rng. */
static int get_rng(const TensorFile *in, Rng *rng, Error *err)
{
    long long seed, stream;
    if (get_int(in, "rng_seed", "the seed", 0, 0, 0, LLONG_MAX, &seed, err) != 0 ||
        get_int(in, "rng_stream", "the stream", 0, 0, 0, LLONG_MAX, &stream, err) != 0)
        return -1;
    rng_seed(rng, (uint64_t)seed, (uint64_t)stream);
    return 0;
}

static int eval_seq_dataset(const TensorFile *in, TensorFile *out, Error *err)
{
    long long n, S, C;
    SeqTask task;
    Rng rng;
    Error inner = {{0}};
    if (require(in, "task", "reverse or copy", err) != 0) return -1;
    if (seq_task_parse(tensorfile_meta(in, "task"), &task, &inner) != 0)
        return error_set(err, "%s: metadata task: %s", case_name(in), inner.msg);
    if (get_int(in, "n", "the number of sequences", 1, 0, 1, MAX_CASE_VALUES, &n, err) != 0 ||
        get_int(in, "seq_len", "the sequence length", 1, 0, 1, INT_MAX, &S, err) != 0 ||
        get_int(in, "num_categories", "the number of ids", 1, 0, 1, INT32_MAX - SEQ2SEQ_FIRST,
                &C, err) != 0 ||
        get_rng(in, &rng, err) != 0)
        return -1;
    if (n * S > MAX_CASE_VALUES)
        return error_set(err, "%s: %lld sequences of length %lld are more than this program "
                         "handles (%lld ids)", case_name(in), n, S, (long long)MAX_CASE_VALUES);
    int64_t shape[2] = {n, S};
    int64_t *x = output_tensor(out, "x", DTYPE_I64, 2, shape, err);
    int64_t *y = output_tensor(out, "y", DTYPE_I64, 2, shape, err);
    if (!x || !y) return -1;
    SeqDataset ds;
    if (seq_dataset_make(&ds, task, n, (int)S, (int)C, &rng, &inner) != 0)
        return call_failed(in, "seq_dataset_make", &inner, err);
    memcpy(x, ds.x, (size_t)(n * S) * sizeof *x);
    memcpy(y, ds.y, (size_t)(n * S) * sizeof *y);
    seq_dataset_free(&ds);
    return 0;
}

static int eval_batcher(const TensorFile *in, TensorFile *out, Error *err)
{
    long long n, epochs;
    Rng rng;
    if (get_int(in, "n", "the dataset size", 1, 0, 1, MAX_CASE_VALUES, &n, err) != 0 ||
        get_int(in, "epochs", "the number of epochs", 1, 0, 1, 1000, &epochs, err) != 0 ||
        get_rng(in, &rng, err) != 0)
        return -1;
    if (n * epochs > MAX_CASE_VALUES)
        return error_set(err, "%s: %lld epochs of %lld indices are more than this program "
                         "handles", case_name(in), epochs, n);
    int64_t *order = output_tensor(out, "order", DTYPE_I64, 2, (int64_t[]){epochs, n}, err);
    if (!order) return -1;
    Batcher b;
    Error inner = {{0}};
    if (batcher_init(&b, n, 1, 0, &inner) != 0)
        return call_failed(in, "batcher_init", &inner, err);
    for (long long e = 0; e < epochs; e++) {
        batcher_shuffle(&b, &rng);
        memcpy(order + e * n, b.order, (size_t)n * sizeof *order);
    }
    batcher_free(&b);
    return 0;
}

/* ------------------------------------------------------------------------ */

/* ------------------------------------------------------------------------ */
/* Parity: a whole training run against PyTorch's                           */
/* ------------------------------------------------------------------------ */

/* The batches of a parity case: (steps, N, len) each, but a classifier's
 * target (steps, N); tgt_in only for a seq2seq model. */
static int get_batches(const TensorFile *in, const Model *m, int64_t steps, const Tensor **src,
                       const Tensor **tgt_in, const Tensor **target, Error *err)
{
    int seq2seq = m->cfg.kind == MODEL_SEQ2SEQ, classifier = m->cfg.kind == MODEL_CLASSIFIER;
    int64_t shape[3] = {steps, -1, -1};
    *tgt_in = NULL;
    if (get_tensor(in, "src", DTYPE_I64, 3, shape, "(steps, N, S)", src, err) != 0) return -1;
    int64_t N = (*src)->shape[1], S = (*src)->shape[2];
    int64_t out_shape[3] = {steps, N, seq2seq ? -1 : S};
    if (seq2seq && get_tensor(in, "tgt_in", DTYPE_I64, 3, out_shape, "(steps, N, T)", tgt_in,
                              err) != 0)
        return -1;
    if (seq2seq) out_shape[2] = (*tgt_in)->shape[2];
    if (get_tensor(in, "target", DTYPE_I64, classifier ? 2 : 3, out_shape,
                   seq2seq ? "(steps, N, T)" : classifier ? "(steps, N)" : "(steps, N, S)",
                   target, err) != 0)
        return -1;
    int64_t T = seq2seq ? (*tgt_in)->shape[2] : 0;
    if (S > m->cfg.max_len || T > m->cfg.max_len || N > INT_MAX / 2)
        return error_set(err, "%s: batches of %lld x %lld are too long for max_len %d",
                         case_name(in), (long long)N, (long long)(S > T ? S : T), m->cfg.max_len);
    Error ids;
    if (model_check_ids((*src)->data, tensor_numel(*src), m->cfg.src_vocab, "tensor 'src'",
                        &ids) != 0 ||
        (seq2seq && model_check_ids((*tgt_in)->data, tensor_numel(*tgt_in), m->cfg.tgt_vocab,
                                    "tensor 'tgt_in'", &ids) != 0))
        return error_set(err, "%s: %s", case_name(in), ids.msg);
    /* targets: a class, or the padding id the loss ignores (not a
     * classifier's: its targets are all classes) */
    const int64_t *y = (*target)->data;
    for (int64_t i = 0; i < tensor_numel(*target); i++)
        if ((y[i] < 0 || y[i] >= m->cfg.tgt_vocab) && (classifier || y[i] != m->cfg.pad_id))
            return error_set(err, "%s: tensor 'target' holds %lld at flat index %lld, outside "
                             "[0, %d)", case_name(in), (long long)y[i], (long long)i,
                             m->cfg.tgt_vocab);
    return 0;
}

/* The schedule and optimizer options of a parity case, as a TrainOptions. */
static int get_train_options(const TensorFile *in, TrainOptions *o, Error *err)
{
    const char *schedule = tensorfile_meta(in, "schedule");
    long long warmup, max_iters;
    int adamw;
    float lr = 0, wd = 0, clip = 0, smoothing = 0;
    memset(o, 0, sizeof *o);
    if (require(in, "schedule", "constant, cosine or noam", err) != 0) return -1;
    if (!strcmp(schedule, "constant")) o->schedule = SCHEDULE_CONSTANT;
    else if (!strcmp(schedule, "cosine")) o->schedule = SCHEDULE_COSINE;
    else if (!strcmp(schedule, "noam")) o->schedule = SCHEDULE_NOAM;
    else return error_set(err, "%s: metadata schedule is '%s', not constant, cosine or noam",
                          case_name(in), schedule);
    if (get_int(in, "warmup", "the warm-up", 1, 0, 0, INT_MAX, &warmup, err) != 0 ||
        get_int(in, "max_iters", "the schedule's length", 1, 0, 1, INT_MAX, &max_iters,
                err) != 0 ||
        tensorfile_meta_bool(in, "adamw", 0, &adamw, err) != 0 ||
        get_float(in, "lr", "a learning rate >= 0", 0, 0, 0, INFINITY, 0, &lr, err) != 0 ||
        get_float(in, "weight_decay", ">= 0", 0, 0, 0, INFINITY, 0, &wd, err) != 0 ||
        get_float(in, "clip", ">= 0 (0: no clipping)", 0, 0, 0, INFINITY, 0, &clip, err) != 0 ||
        get_float(in, "label_smoothing", "in [0, 1]", 0, 0, 0, 1, 0, &smoothing, err) != 0)
        return -1;
    o->adam = adam_default_config(adamw);
    o->adam.lr = lr;
    o->adam.weight_decay = wd;
    o->warmup = warmup;
    o->max_norm = clip;
    o->label_smoothing = smoothing;
    /* train_lr's cosine schedule spans steps_per_epoch * epochs steps */
    o->epochs = (int)max_iters;
    return 0;
}

/* train_parity: the losses of `steps` training steps from the case's
 * initial weights on the case's batches (training_case.h). */
int training_case_parity(const TensorFile *in, TensorFile *out, StepDeviceOpen open, Error *err)
{
    Model m = {0};
    AdamState opt = {0};
    StepWork s = {0};
    StepDevice device = {0};
    TrainOptions o;
    const Tensor *src, *tgt_in, *target;
    long long steps;
    int rc = -1;
    Error inner = {{0}};
    if (get_int(in, "steps", "the number of steps", 1, 0, 1, 100000, &steps, err) != 0 ||
        get_train_options(in, &o, err) != 0)
        return -1;
    if (model_load_file(&m, in, 0, err) != 0) return -1;
    if (m.cfg.dropout != 0.0f) {
        error_set(err, "%s: model.dropout must be 0 for a parity run (C cannot replay "
                  "PyTorch's masks)", case_name(in));
        goto done;
    }
    if (get_batches(in, &m, steps, &src, &tgt_in, &target, err) != 0) goto done;
    int N = (int)src->shape[1], S = (int)src->shape[2], T = tgt_in ? (int)tgt_in->shape[2] : 0;
    int out_len = T ? T : m.cfg.kind == MODEL_CLASSIFIER ? 1 : S;
    int64_t shape[1] = {steps};
    float *losses = output_tensor(out, "losses", DTYPE_F32, 1, shape, err);
    if (!losses) goto done;
    if (adam_config_check(&o.adam, err) != 0 || adam_state_alloc(&opt, m.num_params, err) != 0)
        goto done;
    if (open ? open(&device, &m, &opt, N, S, T, err) != 0
             : step_work_alloc(&s, &m, N, S, T, 1, err) != 0)
        goto done;
    for (long long k = 0; k < steps; k++) {
        StepResult r;
        const int64_t *x = (const int64_t *)src->data + (size_t)k * N * S;
        const int64_t *t_in = tgt_in ? (const int64_t *)tgt_in->data + (size_t)k * N * T : NULL;
        const int64_t *y = (const int64_t *)target->data + (size_t)k * N * out_len;
        double lr = train_lr(&o, &m, k, 0, 1);
        if (step_on(open ? &device : NULL, &m, &s, &opt, &o.adam, (float)lr, o.max_norm,
                    o.label_smoothing, x, t_in, y, NULL, &r, &inner) != 0) {
            call_failed(in, open ? "the device's step" : "train_step", &inner, err);
            goto done;
        }
        losses[k] = (float)r.loss;
    }
    rc = 0;
done:
    if (device.close) device.close(device.ctx);
    step_work_free(&s);
    adam_state_free(&opt);
    model_free(&m);
    return rc;
}

static int eval_parity(const TensorFile *in, TensorFile *out, Error *err)
{
    return training_case_parity(in, out, NULL, err);
}

/* The chapter's ops and the options each reads from the metadata. */
static const CaseOp OPS[] = {
    {"cross_entropy", "ignore_index label_smoothing", eval_cross_entropy},
    {"cross_entropy_backward", "ignore_index label_smoothing", eval_cross_entropy},
    {"adam", "steps lr beta1 beta2 eps weight_decay decoupled", eval_adam},
    {"clip_grad_norm", "max_norm", eval_clip},
    {"lr_cosine", "warmup max_iters", eval_schedule},
    {"lr_noam", "d_model warmup", eval_schedule},
    {"seq_dataset", "task n seq_len num_categories rng_seed rng_stream", eval_seq_dataset},
    {"batcher_shuffle", "n epochs rng_seed rng_stream", eval_batcher},
    {"train_parity", "model.* steps lr schedule warmup max_iters adamw weight_decay clip "
                     "label_smoothing", eval_parity},
    {NULL, NULL, NULL},
};

int training_case_eval(const TensorFile *in, TensorFile *out, Error *err)
{
    return case_dispatch(OPS, "08", in, out, err);
}
