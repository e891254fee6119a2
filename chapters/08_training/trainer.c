/*
 * trainer.c - see trainer.h.
 */
#include "trainer.h"

#include "error.h"   /* not_implemented(), used by the exercise stubs */

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loss.h"
#include "schedule.h"
#include "safetensors.h"
#include "threads.h"

/* Given helpers, defined at the end of the file. */
static int logit_width(const Model *m, int S);
static int64_t ignore_index(const Model *m);

int train_step(Model *m, StepWork *s, OptimState *opt, const StepConfig *c, const Batch *b,
               StepResult *res, Error *err)
{
    /* BEGIN SOLUTION */
    float loss;
    memset(res, 0, sizeof *res);
    model_zero_grad(m);
    if (model_forward(m, &s->work, b->src, b->tgt_in, c->dropout_rng) != 0)
        return error_set(err, "model_forward failed");
    if (cross_entropy(&loss, s->dlogits, s->work.logits, b->target, s->rows,
                      logit_width(m, s->work.S), ignore_index(m), c->label_smoothing,
                      &res->count, &res->correct, err) != 0)
        return -1;
    if (model_backward(m, &s->work, s->dlogits) != 0)
        return error_set(err, "model_backward failed");
    res->loss = loss;
    res->grad_norm = c->max_norm > 0 ? clip_grad_norm(m->grads, m->num_params, c->max_norm) : NAN;
    if (adam_step(m->params, m->grads, opt, &c->adam, c->lr) != 0)
        return error_set(err, "adam_step failed");
    return 0;
    /* END SOLUTION */
}

int step_on(StepDevice *d, Model *m, StepWork *s, OptimState *opt, const StepConfig *c,
            const Batch *b, StepResult *res, Error *err)
{
    if (!d) {
        threads_adapt();   /* as many threads as the machine has free cores (chapter 00) */
        return train_step(m, s, opt, c, b, res, err);
    }
    if (d->step(d->ctx, c, b, res, err) != 0) return -1;
    opt->step++;
    return 0;
}

int eval_batch(Model *m, StepWork *s, const Batch *b, StepResult *res, Error *err)
{
    float loss;
    int64_t count, correct;
    threads_adapt();
    if (model_forward(m, &s->work, b->src, b->tgt_in, NULL) != 0)
        return error_set(err, "model_forward failed");
    if (cross_entropy(&loss, NULL, s->work.logits, b->target, s->rows, logit_width(m, s->work.S),
                      ignore_index(m), 0.0f, &count, &correct, err) != 0)
        return -1;
    if (count > 0) res->loss += (double)loss * count;
    res->count += count;
    res->correct += correct;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The training loop                                                         */
/* ------------------------------------------------------------------------ */

int schedule_parse(const char *name, Schedule *schedule, Error *err)
{
    if (strcmp(name, "cosine") == 0) *schedule = SCHEDULE_COSINE;
    else if (strcmp(name, "noam") == 0) *schedule = SCHEDULE_NOAM;
    else if (strcmp(name, "constant") == 0) *schedule = SCHEDULE_CONSTANT;
    else return error_set(err, "--schedule: '%s' is not cosine, noam or constant", name);
    return 0;
}

double train_lr(const TrainOptions *o, const Model *m, int64_t step, int64_t epoch,
                int64_t steps_per_epoch)
{
    int64_t i = o->per_epoch ? epoch : step;
    switch (o->schedule) {
    case SCHEDULE_CONSTANT: return o->adam.lr;
    case SCHEDULE_COSINE:
        return o->adam.lr * lr_cosine_warmup(i, o->warmup, steps_per_epoch * o->epochs);
    case SCHEDULE_NOAM:     return o->adam.lr * lr_noam(i, m->cfg.d_model, o->warmup);
    }
    return 0.0;
}

static int fill_task(const void *data, const int64_t *idx, int N, int64_t *src,
                     int64_t *tgt_in, int64_t *target, Error *err)
{
    return batch_seq2seq(src, tgt_in, target, data, idx, N, err);
}

static int fill_task_labeller(const void *data, const int64_t *idx, int N, int64_t *src,
                              int64_t *tgt_in, int64_t *target, Error *err)
{
    (void)tgt_in;
    return batch_encoder(src, target, data, idx, N, err);
}

Examples examples_of_task(const SeqDataset *ds, ModelKind kind)
{
    Examples e = {0};
    int seq2seq = kind == MODEL_SEQ2SEQ;
    e.n = ds->n;
    e.S = ds->seq_len;
    e.T = seq2seq ? ds->seq_len + 1 : 0;
    e.src_vocab = e.tgt_vocab = ds->num_categories + (seq2seq ? SEQ2SEQ_FIRST : 0);
    e.longest = e.T > e.S ? e.T : e.S;
    e.data = ds;
    e.fill = seq2seq ? fill_task : fill_task_labeller;
    return e;
}

static int batch_alloc(Batch *b, const Examples *ex, int N, Error *err)
{
    memset(b, 0, sizeof *b);
    b->N = N;
    b->S = ex->S;
    b->T = ex->T;
    int out_len = b->T ? b->T : ex->one_target ? 1 : b->S;
    b->src = malloc((size_t)N * b->S * sizeof *b->src);
    b->target = malloc((size_t)N * out_len * sizeof *b->target);
    b->tgt_in = b->T ? malloc((size_t)N * b->T * sizeof *b->tgt_in) : NULL;
    if (ex->input_dim > 0)
        b->features = malloc((size_t)N * b->S * ex->input_dim * sizeof *b->features);
    if (!b->src || !b->target || (b->T && !b->tgt_in) || (ex->input_dim > 0 && !b->features)) {
        free(b->src), free(b->target), free(b->tgt_in), free(b->features);
        memset(b, 0, sizeof *b);
        return error_set(err, "out of memory for a batch of %d sequences", N);
    }
    return 0;
}

static void batch_free(Batch *b)
{
    free(b->src), free(b->target), free(b->tgt_in), free(b->features);
    memset(b, 0, sizeof *b);
}

/* Fills b with the examples idx[0..b->N) of ex, and points the work of a
 * set model at the batch's features. */
static int batch_fill(Batch *b, StepWork *s, const Examples *ex, const int64_t *idx, Error *err)
{
    s->work.features = b->features;
    if (b->features && ex->fill_features(ex->data, idx, b->N, b->features, err) != 0) return -1;
    return ex->fill(ex->data, idx, b->N, b->src, b->tgt_in, b->target, err);
}

/* The positions a row of n ids needs: up to its last id that is not pad. */
static int used_length(const int64_t *row, int n, int64_t pad)
{
    while (n > 0 && row[n - 1] == pad) n--;
    return n;
}

/* Cuts the batch to its longest source and its longest target (the padding
 * beyond them changes nothing: pad keys are masked, pad targets ignored),
 * compacting the rows in place, and makes the work fit: *S and *T receive
 * the new lengths. */
static int trim_batch(Batch *b, StepWork *s, const Model *m, int *S, int *T, Error *err)
{
    const int64_t pad = m->cfg.pad_id;
    int S2 = 1, T2 = b->T ? 1 : 0;
    for (int r = 0; r < b->N; r++) {
        int ls = used_length(b->src + (int64_t)r * b->S, b->S, pad);
        if (ls > S2) S2 = ls;
        if (b->T) {
            int lt = used_length(b->target + (int64_t)r * b->T, b->T, pad);
            int li = used_length(b->tgt_in + (int64_t)r * b->T, b->T, pad);
            if (lt > T2) T2 = lt;
            if (li > T2) T2 = li;
        }
    }
    /* Row r moves from r * S to r * S2 <= r * S: front to back is safe. */
    for (int r = 0; r < b->N; r++) {
        memmove(b->src + (int64_t)r * S2, b->src + (int64_t)r * b->S, (size_t)S2 * sizeof *b->src);
        if (b->T) {
            memmove(b->tgt_in + (int64_t)r * T2, b->tgt_in + (int64_t)r * b->T,
                    (size_t)T2 * sizeof *b->tgt_in);
            memmove(b->target + (int64_t)r * T2, b->target + (int64_t)r * b->T,
                    (size_t)T2 * sizeof *b->target);
        }
    }
    if (!b->T && (m->cfg.kind == MODEL_LABELLER || m->cfg.kind == MODEL_LM))   /* (N, S) */
        for (int r = 0; r < b->N; r++)
            memmove(b->target + (int64_t)r * S2, b->target + (int64_t)r * b->S,
                    (size_t)S2 * sizeof *b->target);
    *S = S2;
    *T = T2;
    if (model_work_reshape(&s->work, m, S2, T2, err) != 0) return -1;
    s->rows = s->work.rows;
    return 0;
}

int batch_trim(Batch *b, StepWork *s, const Model *m, Error *err)
{
    int S = b->S, T = b->T;
    if (m->cfg.pad_id >= 0 && trim_batch(b, s, m, &S, &T, err) != 0) return -1;
    if (m->cfg.pad_id < 0 && model_work_reshape(&s->work, m, S, T, err) != 0) return -1;
    b->S = S, b->T = T;
    return 0;
}

/* Length bucketing: the shuffled order is cut into runs of `run` batches;
 * each run is sorted by length (ties keep their shuffled order), cut into
 * batches, and its batches are visited in a random order. Batches then hold
 * examples of similar length and carry little padding, and every example
 * is still visited once per epoch. */
typedef struct {
    int64_t index;
    int length;
    int64_t rank;
} ByLength;

static int by_length(const void *a, const void *b)
{
    const ByLength *x = a, *y = b;
    if (x->length != y->length) return x->length < y->length ? -1 : 1;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

static int bucket_order(Batcher *bt, const Examples *ex, int run, Rng *rng, Error *err)
{
    int64_t per_run = (int64_t)run * bt->batch_size;
    int64_t full = batcher_num_batches(bt) * bt->batch_size;   /* drop_last: the rest unused */
    /* A run longer than the epoch is the epoch (sorted whole): the room is
     * the epoch's, not what a huge --bucket asks for. */
    if (per_run > full) per_run = full;
    ByLength *tmp = malloc((size_t)per_run * sizeof *tmp);
    int64_t *order = malloc((size_t)per_run * sizeof *order);
    if (!tmp || !order) {
        free(tmp), free(order);
        return error_set(err, "out of memory for length bucketing (--bucket %d)", run);
    }
    for (int64_t start = 0; start < full; start += per_run) {
        int64_t n = full - start < per_run ? full - start : per_run;
        int64_t batches = n / bt->batch_size;
        for (int64_t i = 0; i < n; i++) {
            tmp[i].index = bt->order[start + i];
            tmp[i].length = ex->length(ex->data, tmp[i].index);
            tmp[i].rank = i;
        }
        qsort(tmp, (size_t)n, sizeof *tmp, by_length);
        /* The batches of the run in a random order (Fisher-Yates on them). */
        for (int64_t k = 0; k < batches; k++) order[k] = k;
        for (int64_t k = batches - 1; k > 0; k--) {
            int64_t j = rng_below(rng, (uint32_t)(k + 1)), t = order[k];
            order[k] = order[j];
            order[j] = t;
        }
        for (int64_t k = 0; k < batches; k++)
            for (int i = 0; i < bt->batch_size; i++)
                bt->order[start + k * bt->batch_size + i] =
                    tmp[order[k] * bt->batch_size + i].index;
    }
    free(tmp);
    free(order);
    return 0;
}

static int check_task_fits(const Model *m, const Examples *ex, Error *err)
{
    ModelKind wanted = ex->input_dim > 0 ? MODEL_SET : ex->T > 0 ? MODEL_SEQ2SEQ
                     : ex->one_target ? MODEL_CLASSIFIER : MODEL_LABELLER;
    static const char *const examples[] = {"source-target", "per-position labelled",
                                           "per-sequence labelled", "set",
                                           "per-position labelled"};
    if (m->cfg.kind != wanted && !(m->cfg.kind == MODEL_LM && wanted == MODEL_LABELLER))
        return error_set(err, "a %s model needs %s examples, these are %s",
                         model_kind_name(m->cfg.kind), examples[m->cfg.kind], examples[wanted]);
    if (m->cfg.input_dim != ex->input_dim)
        return error_set(err, "the model reads %d features per element, the task has %d",
                         m->cfg.input_dim, ex->input_dim);
    if (m->cfg.src_vocab != ex->src_vocab || m->cfg.tgt_vocab != ex->tgt_vocab)
        return error_set(err, "the model's vocabularies (%d, %d) do not fit the task's (%d, %d)",
                         m->cfg.src_vocab, m->cfg.tgt_vocab, ex->src_vocab, ex->tgt_vocab);
    if (m->cfg.max_len < ex->longest)
        return error_set(err, "the model's max_len %d is shorter than the task's sequences (%d)",
                         m->cfg.max_len, ex->longest);
    return 0;
}

int evaluate(Model *m, StepDevice *device, const Examples *ds, int batch_size,
             StepResult *res, Error *err)
{
    int64_t full = ds->n / batch_size, rest = ds->n % batch_size;
    int64_t *idx = malloc((size_t)(ds->n ? ds->n : 1) * sizeof *idx);
    int rc = -1;
    memset(res, 0, sizeof *res);
    if (!idx) return error_set(err, "out of memory for %" PRId64 " indices", ds->n);
    if (check_task_fits(m, ds, err) != 0) goto done;
    for (int64_t i = 0; i < ds->n; i++) idx[i] = i;
    /* The full batches, then the rest with work of its own size. */
    for (int pass = 0; pass < 2; pass++) {
        int N = pass == 0 ? batch_size : (int)rest;
        int64_t first = pass == 0 ? 0 : full, count = pass == 0 ? full : (rest > 0);
        StepWork s = {0};
        Batch b;
        if (count == 0) continue;
        if (batch_alloc(&b, ds, N, err) != 0) goto done;
        if (!device && step_work_alloc(&s, m, N, b.S, b.T, 0, err) != 0) {
            batch_free(&b);
            goto done;
        }
        for (int64_t k = first; k < first + count; k++) {
            int S2, T2;
            if (batch_fill(&b, &s, ds, idx + k * batch_size, err) != 0 ||
                (!device && m->cfg.pad_id >= 0 && trim_batch(&b, &s, m, &S2, &T2, err) != 0) ||
                (device ? device->eval(device->ctx, &b, res, err)
                        : eval_batch(m, &s, &b, res, err)) != 0) {
                step_work_free(&s);
                batch_free(&b);
                goto done;
            }
        }
        step_work_free(&s);
        batch_free(&b);
    }
    res->loss = res->count ? res->loss / res->count : NAN;
    rc = 0;
done:
    free(idx);
    return rc;
}

/* The error of a run whose loss (at `where`: "step 12", "epoch 3") is no
 * longer finite. (The program's end hook adds what the checkpoint on disk
 * holds.) */
static int diverged(const char *where, const char *what, double loss, Error *err)
{
    return error_set(err, "%s: the %s is %s; stopping (the weights diverged)", where, what,
                     isnan(loss) ? "not a number" : "infinite");
}

int train_check(const Model *m, const TrainOptions *o, const Examples *train,
                const Examples *val, Error *err)
{
    if (check_task_fits(m, train, err) != 0 || check_task_fits(m, val, err) != 0) return -1;
    if (o->batch_size < 1) return error_set(err, "--batch-size %d is below 1", o->batch_size);
    if (o->batch_size > train->n)
        return error_set(err, "--batch-size %d is larger than the %" PRId64 " training examples",
                         o->batch_size, train->n);
    if (o->bucket < 0) return error_set(err, "--bucket %d is negative (0: off)", o->bucket);
    return 0;
}

int train_run(Model *m, OptimState *opt, TrainState *state, const TrainOptions *o,
              const Examples *train, const Examples *val, StepResult *res_val, Error *err)
{
    Batcher batcher = {0};
    StepWork s = {0};
    Batch b = {0};
    const TrainHooks *h = o->hooks;
    int rc = -1, begun = 0;
    memset(res_val, 0, sizeof *res_val);
    res_val->loss = NAN;

    if (train_check(m, o, train, val, err) != 0) return -1;
    if (batcher_init(&batcher, train->n, o->batch_size, 1, err) != 0) return -1;
    int64_t per_epoch = batcher_num_batches(&batcher);
    if (batch_alloc(&b, train, o->batch_size, err) != 0) goto done;
    if (!o->device && step_work_alloc(&s, m, b.N, b.S, b.T, 1, err) != 0) goto done;
    int trim = !o->device && m->cfg.pad_id >= 0;
    begun = 1;
    if (h && h->begin && h->begin(h->ctx, opt->step, per_epoch * o->epochs, per_epoch, err) != 0)
        goto done;

    const int64_t first_epoch = state->epoch;
    for (int64_t epoch = first_epoch; epoch < o->epochs; epoch++) {
        double loss_sum = 0.0;
        batcher_shuffle(&batcher, &state->data_rng);
        if (o->bucket > 0 && train->length &&
            bucket_order(&batcher, train, o->bucket, &state->data_rng, err) != 0)
            goto done;
        for (int64_t k = 0; k < per_epoch; k++) {
            const int64_t *idx;
            int count;
            StepResult r;
            double lr = train_lr(o, m, opt->step, epoch, per_epoch);
            batcher_batch(&batcher, k, &idx, &count);
            int S = b.S, T = b.T;
            if (batch_fill(&b, &s, train, idx, err) != 0) goto done;
            if (trim && trim_batch(&b, &s, m, &S, &T, err) != 0) goto done;
            StepConfig step = {o->adam, (float)lr, o->max_norm, o->label_smoothing,
                               m->cfg.dropout > 0 ? &state->dropout_rng : NULL};
            Batch trimmed = b;
            trimmed.S = S, trimmed.T = T;
            if (step_on(o->device, m, &s, opt, &step, &trimmed, &r, err) != 0) goto done;
            /* A loss that is no longer a number poisons every weight at the
             * next step: stop, and keep the last checkpoint as it is. */
            if (r.count > 0 && !isfinite(r.loss)) {
                char where[64];
                snprintf(where, sizeof where, "step %" PRId64, opt->step);
                diverged(where, "loss", r.loss, err);
                goto done;
            }
            loss_sum += r.loss;
            /* The last step of an epoch is validated (and every
             * validate_every steps, when asked). */
            int last = k == per_epoch - 1;
            int validated = last || (o->validate_every > 0 && opt->step % o->validate_every == 0);
            if (validated && evaluate(m, o->device, val, o->batch_size, res_val, err) != 0)
                goto done;
            StepReport report = {opt->step, epoch, r.loss, lr, (int64_t)b.N * (S + T),
                                 validated ? res_val : NULL};
            if (h && h->step && h->step(h->ctx, &report, err) != 0) goto done;
        }
        /* Weights whose held-out loss is not a number are not worth a
         * checkpoint (a huge step can leave them finite but useless). */
        if (res_val->count > 0 && !isfinite(res_val->loss)) {
            char where[64];
            snprintf(where, sizeof where, "epoch %" PRId64, epoch + 1);
            diverged(where, "validation loss", res_val->loss, err);
            goto done;
        }
        state->epoch = epoch + 1;
        if (o->device && o->device->sync(o->device->ctx, m, opt, err) != 0) goto done;
        if (h && h->epoch && h->epoch(h->ctx, m, opt, state, loss_sum / per_epoch, res_val, err) != 0)
            goto done;
        if (o->stop_after > 0 && state->epoch >= o->stop_after) break;
    }
    rc = 0;
done:
    if (begun && h && h->end && h->end(h->ctx, rc == 0, err) != 0) rc = -1;
    step_work_free(&s);
    batch_free(&b);
    batcher_free(&batcher);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Given: not part of the exercise                                           */
/* ------------------------------------------------------------------------ */

/* The rows the loss sees in the logits of one forward, and their width:
 * one row of Vt classes per target, except for a set model, whose S scores
 * (one per element) are one row: the softmax runs over the set. */
static int64_t logit_rows(const Model *m, int N, int S, int T)
{
    switch (m->cfg.kind) {
    case MODEL_SEQ2SEQ:    return (int64_t)N * T;
    case MODEL_LABELLER:   return (int64_t)N * S;
    case MODEL_LM:         return (int64_t)N * S;
    case MODEL_CLASSIFIER: return N;
    case MODEL_SET:        return N;
    }
    return 0;
}

static int logit_width(const Model *m, int S)
{
    return m->cfg.kind == MODEL_SET ? S : m->cfg.tgt_vocab;
}

int step_logit_width(const Model *m, int S) { return logit_width(m, S); }

int64_t step_ignore_index(const Model *m) { return ignore_index(m); }

/* The targets of one row: T (seq2seq), S (labeller, lm) or 1 (classifier,
 * set model). */
static int64_t row_targets(const Batch *b, const ModelConfig *c)
{
    return c->kind == MODEL_SEQ2SEQ ? b->T
         : c->kind == MODEL_LABELLER || c->kind == MODEL_LM ? b->S : 1;
}

int share_first(int N, int r, int R)
{
    return (int)((int64_t)N * r / R);
}

Batch batch_share(const Batch *b, const ModelConfig *c, int r, int R)
{
    Batch s = *b;
    int64_t lo = share_first(b->N, r, R);
    s.N = share_first(b->N, r + 1, R) - (int)lo;
    s.src += lo * b->S;
    s.target += lo * row_targets(b, c);
    if (s.tgt_in) s.tgt_in += lo * b->T;
    if (s.features) s.features += lo * b->S * c->input_dim;
    return s;
}

int64_t batch_counted(const Batch *b, const Model *m)
{
    int64_t n = b->N * row_targets(b, &m->cfg), ignore = ignore_index(m), count = 0;
    for (int64_t i = 0; i < n; i++) count += b->target[i] != ignore;
    return count;
}

Rng *rank_dropout(Rng *drop, Rng *shared, int r, int R)
{
    if (!shared || R == 1) return shared;
    uint64_t seed = (uint64_t)rng_u32(shared) << 32;
    seed |= rng_u32(shared);
    rng_seed(drop, seed, 16 + (uint64_t)r);
    return drop;
}

int step_work_alloc(StepWork *s, const Model *m, int N, int S, int T, int backward, Error *err)
{
    memset(s, 0, sizeof *s);
    s->rows = logit_rows(m, N, S, T);
    if (model_work_alloc(&s->work, m, N, S, T, backward, err) != 0) return -1;
    s->dlogits = malloc((size_t)s->rows * logit_width(m, S) * sizeof *s->dlogits);
    if (!s->dlogits) {
        model_work_free(&s->work);
        return error_set(err, "out of memory for the logits' gradient (%" PRId64 " x %d)",
                         s->rows, logit_width(m, S));
    }
    return 0;
}

void step_work_free(StepWork *s)
{
    model_work_free(&s->work);
    free(s->dlogits);
    memset(s, 0, sizeof *s);
}

/* The ignore_index of the loss: the padding id, or one no target can have.
 * A classifier's targets are classes, never padding (its pad_id is a source
 * id, and class 0 is a class): none is ignored. A set model has no padding
 * (its targets are positions in the set). */
static int64_t ignore_index(const Model *m)
{
    return m->cfg.pad_id >= 0 && m->cfg.kind != MODEL_CLASSIFIER ? m->cfg.pad_id
                                                                  : CROSS_ENTROPY_IGNORE_INDEX;
}
