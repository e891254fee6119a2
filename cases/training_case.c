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
#include "model_file.h"

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

/* Option `key` as a float32 (the table checks its range), or the fallback
 * when the case leaves it out and the table lets the op decide. */
static float option_f32(const CaseArgs *args, const char *key, float fallback)
{
    return case_given(args, key) ? (float)case_float(args, key) : fallback;
}

/* ------------------------------------------------------------------------ */
/* Cross-entropy                                                             */
/* ------------------------------------------------------------------------ */

static int eval_cross_entropy(const TensorFile *in, const CaseArgs *args, TensorFile *out,
                              Error *err)
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
    long long ignore_index = case_int(args, "ignore_index");
    float smoothing = (float)case_float(args, "label_smoothing");
    const int64_t *t = target->data;
    for (int64_t r = 0; r < R; r++)
        if (t[r] != ignore_index && (t[r] < 0 || t[r] >= V))
            return error_set(err, "%s: tensor 'target': row %lld holds %lld, outside the classes "
                             "0..%lld (and not ignore_index %lld)", case_name(in), (long long)r,
                             (long long)t[r], (long long)V - 1, ignore_index);

    float *loss = case_output_f32(out, "loss", 0, NULL, err);
    int64_t *count = case_output(out, "count", DTYPE_I64, 0, NULL, err);
    int64_t *correct = case_output(out, "correct", DTYPE_I64, 0, NULL, err);
    float *dlogits = NULL;
    if (!loss || !count || !correct ||
        (backward && !(dlogits = case_output_f32(out, "grad_logits", 2, logits->shape, err))))
        return -1;
    Error inner = {{0}};
    if (cross_entropy(loss, dlogits, logits->data, t, R, (int)V, ignore_index, smoothing, count,
                      correct, &inner) != 0)
        return case_call_failed(in, "cross_entropy", &inner, err);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Adam and AdamW                                                            */
/* ------------------------------------------------------------------------ */

static int eval_adam(const TensorFile *in, const CaseArgs *args, TensorFile *out, Error *err)
{
    const Tensor *params, *grads, *lrs = NULL;
    if (get_tensor(in, "params", DTYPE_F32, 1, NULL, "(n,)", &params, err) != 0) return -1;
    int64_t n = params->shape[0];
    if (get_tensor(in, "grads", DTYPE_F32, 2, (int64_t[]){-1, n}, "(steps, n)", &grads, err) != 0)
        return -1;
    int64_t n_steps = grads->shape[0];
    if (case_given(args, "steps") && case_int(args, "steps") != n_steps)
        return error_set(err, "%s: metadata steps is %lld but tensor 'grads' has %lld rows, one "
                         "per step", case_name(in), case_int(args, "steps"), (long long)n_steps);

    AdamConfig c = adam_default_config(case_bool(args, "decoupled"));
    c.lr = option_f32(args, "lr", c.lr);
    c.beta1 = option_f32(args, "beta1", c.beta1);
    c.beta2 = option_f32(args, "beta2", c.beta2);
    c.eps = option_f32(args, "eps", c.eps);
    c.weight_decay = option_f32(args, "weight_decay", c.weight_decay);
    if (tensorfile_find(in, "lrs")) {
        if (get_tensor(in, "lrs", DTYPE_F32, 1, (int64_t[]){n_steps}, "(steps,)", &lrs, err) != 0)
            return -1;
        const float *l = lrs->data;
        for (int64_t k = 0; k < n_steps; k++)
            if (!(l[k] >= 0.0f && isfinite(l[k])))
                return error_set(err, "%s: tensor 'lrs': step %lld has the learning rate %g; it "
                                 "must be a finite number >= 0", case_name(in), (long long)k, l[k]);
    }

    float *p = case_output_f32(out, "params_after", 1, &n, err);
    float *m = case_output_f32(out, "exp_avg", 1, &n, err);
    float *v = case_output_f32(out, "exp_avg_sq", 1, &n, err);
    if (!p || !m || !v) return -1;
    OptimState s;
    Error inner = {{0}};
    if (adam_state_alloc(&s, (size_t)n, &inner) != 0)
        return case_call_failed(in, "adam_state_alloc", &inner, err);
    memcpy(p, params->data, (size_t)n * sizeof *p);
    int rc = 0;
    for (int64_t k = 0; k < n_steps && rc == 0; k++) {
        float lr = lrs ? ((const float *)lrs->data)[k] : c.lr;
        if (adam_step(p, (const float *)grads->data + k * n, &s, &c, lr) != 0)
            rc = case_call_failed(in, "adam_step", &inner, err);
    }
    if (rc == 0) {
        memcpy(m, s.slots[ADAM_M], (size_t)n * sizeof *m);
        memcpy(v, s.slots[ADAM_V], (size_t)n * sizeof *v);
    }
    optim_state_free(&s);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Gradient clipping                                                         */
/* ------------------------------------------------------------------------ */

static int eval_clip(const TensorFile *in, const CaseArgs *args, TensorFile *out, Error *err)
{
    const Tensor *grads;
    float max_norm = (float)case_float(args, "max_norm");
    if (get_tensor(in, "grads", DTYPE_F32, 1, NULL, "(n,)", &grads, err) != 0) return -1;
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

static int eval_schedule(const TensorFile *in, const CaseArgs *args, TensorFile *out,
                         Error *err)
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
    long long warmup = case_int(args, "warmup");
    long long max_iters = noam ? 1 : case_int(args, "max_iters");
    long long d_model = noam ? case_int(args, "d_model") : 1;
    double *factor = case_output(out, "factor", DTYPE_F64, 1, &n, err);
    if (!factor) return -1;
    for (int64_t i = 0; i < n; i++)
        factor[i] = noam ? lr_noam(s[i], (int)d_model, warmup)
                         : lr_cosine_warmup(s[i], warmup, max_iters);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Data: the task's sequences and the batcher's permutations                */
/* ------------------------------------------------------------------------ */

/* The case's rng_seed and rng_stream as a seeded Rng. */
static void case_rng(const CaseArgs *args, Rng *rng)
{
    rng_seed(rng, (uint64_t)case_int(args, "rng_seed"), (uint64_t)case_int(args, "rng_stream"));
}

static int eval_seq_dataset(const TensorFile *in, const CaseArgs *args, TensorFile *out,
                            Error *err)
{
    long long n = case_int(args, "n"), S = case_int(args, "seq_len");
    long long C = case_int(args, "num_categories");
    SeqTask task;
    Rng rng;
    Error inner = {{0}};
    if (seq_task_parse(case_text(args, "task"), &task, &inner) != 0)
        return error_set(err, "%s: metadata task: %s", case_name(in), inner.msg);
    case_rng(args, &rng);
    if (n * S > MAX_CASE_VALUES)
        return error_set(err, "%s: %lld sequences of length %lld are more than this program "
                         "handles (%lld ids)", case_name(in), n, S, (long long)MAX_CASE_VALUES);
    int64_t shape[2] = {n, S};
    int64_t *x = case_output(out, "x", DTYPE_I64, 2, shape, err);
    int64_t *y = case_output(out, "y", DTYPE_I64, 2, shape, err);
    if (!x || !y) return -1;
    SeqDataset ds;
    if (seq_dataset_make(&ds, task, n, (int)S, (int)C, &rng, &inner) != 0)
        return case_call_failed(in, "seq_dataset_make", &inner, err);
    memcpy(x, ds.x, (size_t)(n * S) * sizeof *x);
    memcpy(y, ds.y, (size_t)(n * S) * sizeof *y);
    seq_dataset_free(&ds);
    return 0;
}

/* The (n, S) tensor `name` of a SeqDataset's ids, each 0 <= id < 2^31 - 4
 * (seq_dataset_make's num_categories). */
static int get_dataset_ids(const TensorFile *in, const char *name, const int64_t *expect,
                           const Tensor **t, Error *err)
{
    if (get_tensor(in, name, DTYPE_I64, 2, expect, "(n, S)", t, err) != 0) return -1;
    const int64_t *v = (*t)->data;
    for (int64_t i = 0; i < tensor_numel(*t); i++)
        if (v[i] < 0 || v[i] > 2147483643)
            return error_set(err, "%s: tensor '%s' holds the id %lld at %lld, outside [0, "
                             "2147483644)", case_name(in), name, (long long)v[i], (long long)i);
    return 0;
}

/* batch: the rows idx of the dataset (x, y) in the labeller's layout
 * (batch_encoder) or the encoder-decoder's (batch_seq2seq). */
static int eval_batches(const TensorFile *in, const CaseArgs *args, TensorFile *out,
                        Error *err)
{
    const Tensor *x, *y, *idx;
    if (get_dataset_ids(in, "x", NULL, &x, err) != 0 ||
        get_dataset_ids(in, "y", x->shape, &y, err) != 0 ||
        get_tensor(in, "idx", DTYPE_I64, 1, NULL, "(N,)", &idx, err) != 0)
        return -1;
    int64_t n = x->shape[0], S = x->shape[1], N = idx->shape[0];
    if (N * (S + 1) > MAX_CASE_VALUES)
        return error_set(err, "%s: %lld rows of length %lld are more than this program handles "
                         "(%lld ids)", case_name(in), (long long)N, (long long)S,
                         (long long)MAX_CASE_VALUES);
    SeqDataset ds = {n, (int)S, 0, x->data, y->data};
    Error inner = {{0}};
    /* The batch is made in tensors of its own and added to the outputs only
     * when it succeeds: a refused index leaves no output behind. */
    int seq2seq = strcmp(case_text(args, "layout"), "seq2seq") == 0;
    const char *names[3] = {"src", "target", "tgt_in"};
    int64_t shapes[3][2] = {{N, S}, {N, S + seq2seq}, {N, S + 1}};
    Tensor t[3] = {{0}};
    int n_out = seq2seq ? 3 : 2, rc = 0;
    for (int i = 0; rc == 0 && i < n_out; i++)
        rc = case_tensor_alloc(&t[i], DTYPE_I64, 2, shapes[i], err);
    if (rc == 0 && (seq2seq ? batch_seq2seq(t[0].data, t[2].data, t[1].data, &ds, idx->data,
                                            (int)N, &inner)
                            : batch_encoder(t[0].data, t[1].data, &ds, idx->data, (int)N, &inner)))
        rc = case_call_failed(in, seq2seq ? "batch_seq2seq" : "batch_encoder", &inner, err);
    for (int i = 0; rc == 0 && i < n_out; i++) rc = tensorfile_add(out, names[i], &t[i], err);
    for (int i = 0; i < n_out; i++) case_tensor_free(&t[i]);   /* no-op once added */
    return rc;
}

static int eval_batcher(const TensorFile *in, const CaseArgs *args, TensorFile *out, Error *err)
{
    long long n = case_int(args, "n"), epochs = case_int(args, "epochs");
    Rng rng;
    case_rng(args, &rng);
    if (n * epochs > MAX_CASE_VALUES)
        return error_set(err, "%s: %lld epochs of %lld indices are more than this program "
                         "handles", case_name(in), epochs, n);
    int64_t *order = case_output(out, "order", DTYPE_I64, 2, (int64_t[]){epochs, n}, err);
    if (!order) return -1;
    Batcher b;
    Error inner = {{0}};
    if (batcher_init(&b, n, 1, 0, &inner) != 0)
        return case_call_failed(in, "batcher_init", &inner, err);
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

/* The options of a parity run: the model's configuration (model.*), and
 * the optimizer and schedule of the training loop. */
static const CaseOption PARITY_OPTIONS[] = {
    {"steps", CASE_INT, "[1, 100000]", NULL, "the number of steps"},
    {"schedule", CASE_TEXT, "constant|cosine|noam", NULL, "the learning-rate schedule"},
    {"warmup", CASE_INT, "[0, 2147483647]", NULL, "the warm-up steps"},
    {"max_iters", CASE_INT, "[1, 2147483647]", NULL, "the schedule's length"},
    {"adamw", CASE_BOOL, NULL, "false", "AdamW (true) or Adam"},
    {"lr", CASE_FLOAT, "[0, 3.4e38]", "0", "the learning rate"},
    {"weight_decay", CASE_FLOAT, "[0, 3.4e38]", "0", "the weight decay"},
    {"clip", CASE_FLOAT, "[0, 3.4e38]", "0", "the gradient norm's bound (0: none)"},
    {"label_smoothing", CASE_FLOAT, "[0, 1]", "0", "the label smoothing"},
    {0},
};

/* The schedule and optimizer options of a parity case, as a TrainOptions. */
static void get_train_options(const CaseArgs *args, TrainOptions *o)
{
    const char *schedule = case_text(args, "schedule");
    memset(o, 0, sizeof *o);
    o->schedule = !strcmp(schedule, "constant") ? SCHEDULE_CONSTANT
                  : !strcmp(schedule, "cosine") ? SCHEDULE_COSINE : SCHEDULE_NOAM;
    o->adam = adam_default_config(case_bool(args, "adamw"));
    o->adam.lr = (float)case_float(args, "lr");
    o->adam.weight_decay = (float)case_float(args, "weight_decay");
    o->warmup = (int)case_int(args, "warmup");
    o->max_norm = (float)case_float(args, "clip");
    o->label_smoothing = (float)case_float(args, "label_smoothing");
    /* train_lr's cosine schedule spans steps_per_epoch * epochs steps */
    o->epochs = (int)case_int(args, "max_iters");
}

/* train_parity: the losses of `steps` training steps from the case's
 * initial weights on the case's batches (training_case.h). */
int training_case_parity(const TensorFile *in, TensorFile *out, StepDeviceOpen open, Error *err)
{
    Model m = {0};
    OptimState opt = {0};
    StepWork s = {0};
    StepDevice device = {0};
    TrainOptions o;
    const Tensor *src, *tgt_in, *target;
    CaseArgs args;
    int rc = -1;
    Error inner = {{0}};
    if (case_read_args(PARITY_OPTIONS, in, &args, err) != 0) return -1;
    long long steps = case_int(&args, "steps");
    get_train_options(&args, &o);
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
    float *losses = case_output(out, "losses", DTYPE_F32, 1, shape, err);
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
        StepConfig step = {o.adam, (float)train_lr(&o, &m, k, 0, 1), o.max_norm,
                           o.label_smoothing, NULL};
        /* (the step only reads the batch) */
        Batch b = {N, S, T, (int64_t *)x, (int64_t *)t_in, (int64_t *)y, NULL};
        if (step_on(open ? &device : NULL, &m, &s, &opt, &step, &b, &r, &inner) != 0) {
            case_call_failed(in, open ? "the device's step" : "train_step", &inner, err);
            goto done;
        }
        losses[k] = (float)r.loss;
    }
    rc = 0;
done:
    if (device.close) device.close(device.ctx);
    step_work_free(&s);
    optim_state_free(&opt);
    model_free(&m);
    return rc;
}

static int eval_parity(const TensorFile *in, const CaseArgs *args, TensorFile *out,
                       Error *err)
{
    return training_case_parity(in, out, NULL, err);
}

/* The chapter's ops and their options (F.cross_entropy's, torch.optim.Adam's
 * and AdamW's, clip_grad_norm_'s, the schedules' and the data's). */
static const CaseOption CROSS_ENTROPY[] = {
    {"ignore_index", CASE_INT, "[-9.2e18, 9.2e18]", "-100", "the target that counts for nothing"},
    {"label_smoothing", CASE_FLOAT, "[0, 1]", "0", "the label smoothing"},
    {0},
};
static const CaseOption ADAM[] = {
    {"steps", CASE_INT, "[1, 9.2e18]", "", "the number of steps, the rows of 'grads'"},
    {"decoupled", CASE_BOOL, NULL, "false", "AdamW's decoupled weight decay"},
    {"lr", CASE_FLOAT, "[0, 3.4e38]", "", "the learning rate, 1e-3 by default"},
    {"beta1", CASE_FLOAT, "[0, 1)", "", "the first moment's decay, 0.9 by default"},
    {"beta2", CASE_FLOAT, "[0, 1)", "", "the second moment's decay, 0.999 by default"},
    {"eps", CASE_FLOAT, "(0, 3.4e38]", "", "the denominator's epsilon, 1e-8 by default"},
    {"weight_decay", CASE_FLOAT, "[0, 3.4e38]", "", "the weight decay, 0 by default, 0.01 for AdamW"},
    {0},
};
static const CaseOption CLIP[] = {
    {"max_norm", CASE_FLOAT, "(0, 3.4e38]", NULL, "the largest norm allowed"},
    {0},
};
static const CaseOption COSINE[] = {
    {"warmup", CASE_INT, "[0, 9.2e18]", NULL, "the number of warm-up steps"},
    {"max_iters", CASE_INT, "[1, 9.2e18]", NULL, "the length of the cosine"},
    {0},
};
static const CaseOption NOAM[] = {
    {"d_model", CASE_INT, "[1, 2147483647]", NULL, "d_model"},
    {"warmup", CASE_INT, "[1, 9.2e18]", NULL, "the number of warm-up steps"},
    {0},
};
#define RNG_OPTIONS                                                                           \
    {"rng_seed", CASE_INT, "[0, 9.2e18]", "0", "the seed"},                                   \
    {"rng_stream", CASE_INT, "[0, 9.2e18]", "0", "the stream"}
static const CaseOption SEQ_DATASET[] = {
    {"task", CASE_TEXT, "reverse|copy", NULL, "the task"},
    {"n", CASE_INT, "[1, 16777216]", NULL, "the number of sequences"},
    {"seq_len", CASE_INT, "[1, 2147483647]", NULL, "the sequence length"},
    {"num_categories", CASE_INT, "[1, 2147483644]", NULL, "the number of ids"},
    RNG_OPTIONS,
    {0},
};
static const CaseOption BATCHER[] = {
    {"n", CASE_INT, "[1, 16777216]", NULL, "the dataset size"},
    {"epochs", CASE_INT, "[1, 1000]", NULL, "the number of epochs"},
    RNG_OPTIONS,
    {0},
};

static const CaseOption BATCH[] = {
    {"layout", CASE_TEXT, "encoder|seq2seq", NULL, "the batch layout"},
    {0},
};

static const CaseOp OPS[] = {
    {"cross_entropy", CROSS_ENTROPY, 0, "logits target", "loss count correct",
     eval_cross_entropy},
    {"cross_entropy_backward", CROSS_ENTROPY, 0, "logits target",
     "loss count correct grad_logits", eval_cross_entropy},
    {"adam", ADAM, 0, "params grads [lrs]", "params_after exp_avg exp_avg_sq", eval_adam},
    {"clip_grad_norm", CLIP, 0, "grads", "grads_clipped total_norm", eval_clip},
    {"lr_cosine", COSINE, 0, "steps", "factor", eval_schedule},
    {"lr_noam", NOAM, 0, "steps", "factor", eval_schedule},
    {"seq_dataset", SEQ_DATASET, 0, "", "x y", eval_seq_dataset},
    {"batcher_shuffle", BATCHER, 0, "", "order", eval_batcher},
    {"batch", BATCH, 0, "x y idx", "src target [tgt_in]", eval_batches},
    {"train_parity", PARITY_OPTIONS, 1, "src target [tgt_in]", "losses", eval_parity},
    {0},
};

int training_case_eval(const TensorFile *in, TensorFile *out, Error *err)
{
    return case_dispatch(OPS, "08", in, out, err);
}
