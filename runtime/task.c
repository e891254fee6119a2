/*
 * task.c - see task.h: the commands, the common options, the checks and
 * the training run that every task shares.
 */
#include "task.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "device.h"
#include "optim.h"
#include "progress.h"
#include "rng.h"
#include "train_report.h"
#include "safetensors.h"
#include "text.h"
#include "model_file.h"

/* ------------------------------------------------------------------------ */
/* Options                                                                   */
/* ------------------------------------------------------------------------ */

/* The room for a command's options: the task's own, then the common ones
 * (fewer than 32). task_main refuses a task with more than fits. */
enum { MAX_OPTIONS = 64, COMMON_OPTIONS = 32 };

/* The options of --train: the task's data options, its training options,
 * then the common ones. Returns how many. */
static int train_options(Option *opts, TaskRun *r, int *help)
{
    const Task *t = r->task;
    RunOptions *o = &r->o;
    int n = 0;
    for (int i = 0; i < t->n_data_options; i++) opts[n++] = t->data_options[i];
    for (int i = 0; i < t->n_train_options; i++) opts[n++] = t->train_options[i];
    const Option common[] = {
        {"--epochs", OPT_INT, &o->train.epochs, "epochs"},
        {"--stop-after", OPT_INT, &o->train.stop_after, "stop after this epoch (its checkpoint "
         "written), as an interrupted run would; the schedule still spans --epochs (0: off)"},
        {"--batch-size", OPT_INT, &o->train.batch_size, "examples per step"},
        {"--bucket", OPT_INT, &o->train.bucket, "sort runs of this many batches by length "
         "(0: plain shuffling; tasks whose examples have lengths)"},
        {"--optimizer", OPT_STRING, &o->optimizer, "adam, or adamw (decoupled weight decay)"},
        {"--lr", OPT_FLOAT, &o->train.adam.lr, "peak learning rate"},
        {"--weight-decay", OPT_FLOAT, &o->train.adam.weight_decay, "weight decay"},
        {"--schedule", OPT_STRING, &o->schedule, "cosine, noam or constant"},
        {"--warmup", OPT_INT, &o->train.warmup, "warm-up steps"},
        {"--per-epoch-schedule", OPT_FLAG, &o->train.per_epoch,
         "step the schedule once per epoch (warm-up in epochs), as seed 000's loop did"},
        {"--clip", OPT_FLOAT, &o->train.max_norm, "clip the gradient norm to this (0: off)"},
        {"--label-smoothing", OPT_FLOAT, &o->train.label_smoothing,
         "label smoothing of the loss"},
        {"--d-model", OPT_INT, &o->d_model, "the model's width"},
        {"--heads", OPT_INT, &o->heads, "attention heads"},
        {"--layers", OPT_INT, &o->layers, "layers of each stack"},
        {"--ffn", OPT_INT, &o->ffn, "feed-forward width"},
        {"--norm-first", OPT_FLAG, &o->norm_first, "pre-norm layers"},
        {"--dropout", OPT_DOUBLE, &o->dropout, "every dropout, attention weights too"},
        {"--seed", OPT_INT, &o->seed, "seed of weights, shuffling and dropout"},
        {"--eval-every", OPT_INT, &o->eval_every,
         "the task's validation round every this many epochs (0: none)"},
        {"--validate-every", OPT_INT, &o->train.validate_every,
         "the validation loss every this many steps too, besides each epoch's end (0: "
         "only there)"},
        {"--checkpoint", OPT_STRING, &o->checkpoint, "write a checkpoint here after every epoch"},
        {"--resume", OPT_STRING, &o->resume, "continue the run saved in this checkpoint"},
        {"--out", OPT_STRING, &o->out, "save the trained model here (no optimizer state)"},
        {"--log", OPT_STRING, &o->log, "the CSV loss log"},
        {"--device", OPT_STRING, &o->device, "cpu, cuda (the programs in build/cuda/), mpi "
         "(build/mpi/; chosen by itself under mpirun -np N > 1) or nccl (build/mpi-cuda/, "
         "one GPU per rank)"},
        {"--mpi-timeout", OPT_DOUBLE, &o->mpi_timeout, "--device mpi: seconds a rank waits "
         "for the others at a step (and at least 50 steps' time) before it ends the job, "
         "naming the ranks that did not come"},
        {"--target-loss", OPT_DOUBLE, &o->target_loss,
         "exit 1 if the last validation loss is above this (0: off)"},
        {"--min-accuracy", OPT_DOUBLE, &o->min_accuracy,
         "exit 1 if the test accuracy (a fraction) is below this"},
        {"--no-test", OPT_FLAG, &o->no_test, "measure nothing on the test sets at the end (a run "
         "that chooses a recipe on the validation split; --eval measures the chosen model once)"},
        {"--help", OPT_FLAG, help, "this list"},
    };
    for (size_t i = 0; i < sizeof common / sizeof common[0]; i++) {
        if (strcmp(common[i].name, "--eval-every") == 0 && !r->task->round) continue;
        opts[n++] = common[i];
    }
    return n;
}

/* The options of --eval: the data options, the task's eval options, and
 * the bound on the metric. */
static int eval_options(Option *opts, TaskRun *r, int *help)
{
    const Task *t = r->task;
    int n = 0;
    for (int i = 0; i < t->n_data_options; i++) opts[n++] = t->data_options[i];
    for (int i = 0; i < t->n_eval_options; i++) opts[n++] = t->eval_options[i];
    opts[n++] = (Option){"--min-accuracy", OPT_DOUBLE, &r->o.min_accuracy,
                         "exit 1 if the test accuracy (a fraction) is below this"};
    opts[n++] = (Option){"--help", OPT_FLAG, help, "this list"};
    return n;
}

TaskRun task_run_defaults(const Task *task)
{
    TaskRun r;
    memset(&r, 0, sizeof r);
    r.task = task;
    RunOptions *o = &r.o;
    o->train.epochs = 10;
    o->train.batch_size = 32;
    o->train.adam = adam_default_config(0);     /* lr 1e-3 */
    o->train.schedule = SCHEDULE_COSINE;
    o->optimizer = "adam";
    o->schedule = "cosine";
    o->d_model = 64;
    o->heads = 4;
    o->layers = 2;
    o->ffn = 128;
    o->device = "cpu";
    o->mpi_timeout = 300;
    task->defaults(o);
    return r;
}

/* The recipe of the options, o->train with the optimizer and the schedule
 * read from their names; fails on the first option out of its range. */
static int recipe(const RunOptions *o, TrainOptions *t, Error *err)
{
    *t = o->train;
    int adamw = strcmp(o->optimizer, "adamw") == 0;
    if (!adamw && strcmp(o->optimizer, "adam") != 0)
        return error_set(err, "--optimizer: '%s' is not adam or adamw", o->optimizer);
    t->adam.decoupled = adamw;
    if (schedule_parse(o->schedule, &t->schedule, err) != 0) return -1;
    const struct {
        const char *name;
        int value, least;
    } ints[] = {
        {"--epochs", t->epochs, 1}, {"--batch-size", t->batch_size, 1},
        {"--stop-after", t->stop_after, 0}, {"--bucket", t->bucket, 0},
        {"--warmup", t->warmup, 0}, {"--seed", o->seed, 0}, {"--eval-every", o->eval_every, 0},
        {"--validate-every", t->validate_every, 0},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (ints[i].value < ints[i].least)
            return error_set(err, "%s: %d, need at least %d", ints[i].name, ints[i].value,
                             ints[i].least);
    if (!(t->max_norm >= 0)) return error_set(err, "--clip: %g is negative", t->max_norm);
    if (o->no_test && o->min_accuracy > 0)
        return error_set(err, "--min-accuracy bounds the test accuracy, which --no-test does not "
                         "measure");
    if (!(o->mpi_timeout > 0 && o->mpi_timeout <= 1e6))
        return error_set(err, "--mpi-timeout: %g is not a number of seconds in (0, 1e6]",
                         o->mpi_timeout);
    if (!(t->adam.weight_decay >= 0))
        return error_set(err, "--weight-decay: %g is negative", t->adam.weight_decay);
    if (!(t->label_smoothing >= 0 && t->label_smoothing <= 1))
        return error_set(err, "--label-smoothing: %g is not in [0, 1]", t->label_smoothing);
    if (adam_config_check(&t->adam, err) != 0) return -1;
    return device_check(o->device, err);
}

/* The model the options describe: the sizes from the options, the rest
 * from the task. */
void task_config(const TaskRun *r, ModelConfig *c, ConfigOptions *names)
{
    memset(c, 0, sizeof *c);
    memset(names, 0, sizeof *names);
    c->d_model = r->o.d_model;
    c->nhead = r->o.heads;
    c->dim_feedforward = r->o.ffn;
    c->num_encoder_layers = r->o.layers;
    c->norm_first = r->o.norm_first;
    c->eps = 1e-5f;
    c->dropout = (float)r->o.dropout;
    c->pad_id = -1;
    r->task->config(r, c, names);
}

/* ------------------------------------------------------------------------ */
/* The round log: "step,epoch,<column>" rows                                 */
/* ------------------------------------------------------------------------ */

/* Opens the round log at path. A resumed run keeps the rows up to its
 * checkpoint's step (keep_through >= 0) and drops the rest; what is kept
 * (or the header of a new log) is written whole, then rows are appended. */
static FILE *round_log_open(const char *path, const char *column, int64_t keep_through,
                            Error *err)
{
    char line[256], header[128];
    Text kept = {0};
    snprintf(header, sizeof header, "step,epoch,%s\n", column);
    FILE *f = keep_through >= 0 ? fopen(path, "r") : NULL;
    int rc = 0;
    if (f) {
        while (rc == 0 && fgets(line, sizeof line, f))
            if (strcmp(line, header) == 0 || strtoll(line, NULL, 10) <= keep_through)
                rc = text_append(&kept, line, strlen(line), err);
        fclose(f);
    }
    FilePart part = kept.len ? (FilePart){kept.data, kept.len}
                             : (FilePart){header, strlen(header)};
    if (rc == 0) rc = file_write_atomic(path, &part, 1, err);
    text_free(&kept);
    if (rc != 0) return NULL;
    f = fopen(path, "a");
    if (!f) error_set(err, "cannot append to %s: %s", path, strerror(errno));
    return f;
}

/* ------------------------------------------------------------------------ */
/* --train                                                                   */
/* ------------------------------------------------------------------------ */

/* The model and optimizer of the run: from --resume, or new. *finished:
 * the checkpoint has all of --epochs already. */
static int start(TaskRun *r, const ModelConfig *cfg, const ConfigOptions *names, Model *m,
                 OptimState *opt, TrainState *state, int *finished, Error *err)
{
    const RunOptions *o = &r->o;
    *finished = 0;
    if (o->resume) {
        if (checkpoint_load(o->resume, m, opt, state, err) != 0) return -1;
        if (checkpoint_check_config(o->resume, &m->cfg, cfg, names, err) != 0) return -1;
        *finished = state->epoch >= o->train.epochs;
        if (*finished && !o->out)
            return error_set(err, "--resume: %s is at epoch %" PRId64 "; --epochs %d leaves "
                             "nothing to train (a longer run needs more epochs; --out writes "
                             "its model)", o->resume, state->epoch, o->train.epochs);
        printf("resuming %s after epoch %" PRId64 " (step %" PRId64 ")\n", o->resume,
               state->epoch, opt->step);
        return 0;
    }
    /* Each random stream has its own Rng stream id (the data's is 1), so
     * changing one use leaves the others as they were. */
    Rng rng;
    rng_seed(&rng, (uint64_t)o->seed, 2);
    if (model_init(m, cfg, &rng, err) != 0) return -1;
    if (adam_state_alloc(opt, m->num_params, err) != 0) return -1;
    rng_seed(&state->data_rng, (uint64_t)o->seed, 3);
    rng_seed(&state->dropout_rng, (uint64_t)o->seed, 4);
    return 0;
}

/* Writes the model (no optimizer state) with the run's metadata. */
static int save_model(const TaskRun *r, const Model *m, const char *path, Error *err)
{
    TensorFile f = {0};
    int rc = model_to_file(m, &f, err);
    for (int i = 0; rc == 0 && r->meta && r->meta[i]; i += 2)
        rc = tensorfile_set_meta(&f, r->meta[i], r->meta[i + 1], err);
    if (rc == 0) rc = safetensors_write(path, &f, err);
    tensorfile_free(&f);
    return rc;
}

static void print_run(const TaskRun *r, const Model *m, const TrainOptions *t)
{
    const ModelConfig *c = &m->cfg;
    const RunOptions *o = &r->o;
    printf("%s model: d_model %d, %d head(s), %d", model_kind_name(c->kind), c->d_model,
           c->nhead, c->num_encoder_layers);
    if (c->num_decoder_layers) printf(" + %d", c->num_decoder_layers);
    printf(" layer(s), FFN %d, dropout %g, %zu parameters\n", c->dim_feedforward,
           (double)c->dropout, m->num_params);
    printf("batch %d, %d epochs of %" PRId64 " steps, %s lr %g (%s schedule, warm-up %d %s)\n",
           t->batch_size, t->epochs, r->train.n / t->batch_size,
           t->adam.decoupled ? "AdamW" : "Adam", (double)t->adam.lr, o->schedule, t->warmup,
           t->per_epoch ? "epochs, stepped per epoch" : "steps");
}

/* Trains to --epochs (or --stop-after): in rounds of --eval-every epochs
 * when the task has a round, each ended by it (train_run stops after a
 * round as an interrupted run would, and the next call goes on from
 * there). */
static int train_rounds(TaskRun *r, Model *m, OptimState *opt, TrainState *state,
                        TrainOptions *t, FILE *round_log, Error *err)
{
    const RunOptions *o = &r->o;
    int64_t stop = t->stop_after > 0 && t->stop_after < t->epochs ? t->stop_after : t->epochs;
    int rounds = r->task->round && o->eval_every > 0;
    while (state->epoch < stop) {
        int64_t next = rounds ? (state->epoch / o->eval_every + 1) * o->eval_every : stop;
        t->stop_after = (int)(next < stop ? next : stop);
        if (train_run(m, opt, state, t, &r->train, &r->val, &r->last_val, err) != 0) return -1;
        if (!rounds) break;
        double metric;
        if (r->rank > 0) continue;              /* rank 0 runs the rounds */
        if (r->task->round(r, m, &metric, err) != 0) return -1;
        if (round_log) {
            fprintf(round_log, "%" PRId64 ",%" PRId64 ",%.6f\n", opt->step, state->epoch, metric);
            fflush(round_log);
        }
    }
    return 0;
}

/* FNV-1a, 64 bits: the hash the ranks compare at the start. */
static uint64_t hash_bytes(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

static uint64_t hash_string(uint64_t h, const char *s)
{
    return s ? hash_bytes(h, s, strlen(s) + 1) : hash_bytes(h, "", 1);
}

/* Hashes every example of ex into *h, in batches of up to 256. */
static int hash_examples(uint64_t *h, const Examples *ex, Error *err)
{
    enum { CHUNK = 256 };
    int64_t idx[CHUNK];
    size_t per_src = (size_t)CHUNK * ex->S, per_tgt = (size_t)CHUNK * (ex->T ? ex->T : ex->S);
    size_t per_feat = (size_t)CHUNK * ex->S * (ex->input_dim > 0 ? ex->input_dim : 1);
    int64_t *src = malloc(per_src * sizeof *src), *tgt_in = malloc(per_tgt * sizeof *tgt_in),
            *target = malloc(per_tgt * sizeof *target);
    float *features = ex->input_dim > 0 ? malloc(per_feat * sizeof *features) : NULL;
    int rc = 0;
    if (!src || !tgt_in || !target || (ex->input_dim > 0 && !features))
        rc = error_set(err, "out of memory to hash the data");
    for (int64_t first = 0; rc == 0 && first < ex->n; first += CHUNK) {
        int n = ex->n - first < CHUNK ? (int)(ex->n - first) : CHUNK;
        for (int i = 0; i < n; i++) idx[i] = first + i;
        memset(tgt_in, 0, per_tgt * sizeof *tgt_in);
        memset(target, 0, per_tgt * sizeof *target);
        rc = ex->fill(ex->data, idx, n, src, tgt_in, target, err);
        if (rc == 0 && features) rc = ex->fill_features(ex->data, idx, n, features, err);
        if (rc != 0) break;
        *h = hash_bytes(*h, src, (size_t)n * ex->S * sizeof *src);
        *h = hash_bytes(*h, tgt_in, per_tgt * sizeof *tgt_in);
        *h = hash_bytes(*h, target, per_tgt * sizeof *target);
        if (features) *h = hash_bytes(*h, features, (size_t)n * ex->S * ex->input_dim * sizeof *features);
    }
    free(src), free(tgt_in), free(target), free(features);
    return rc;
}

static uint64_t hash_ints(uint64_t h, const int64_t *v, size_t n)
{
    return hash_bytes(h, v, n * sizeof *v);
}

static uint64_t hash_reals(uint64_t h, const double *v, size_t n)
{
    return hash_bytes(h, v, n * sizeof *v);
}

#define COUNT(a) (sizeof (a) / sizeof (a)[0])

/* Every field of the model's configuration, one by one (a struct's padding
 * is not part of it). */
static uint64_t hash_config(uint64_t h, const ModelConfig *c)
{
    const int64_t kind = c->kind;
    h = hash_ints(h, &kind, 1);
    for (int i = 0; i < model_field_count; i++) {
        double v = model_field_get(c, &model_fields[i]);
        h = hash_reals(h, &v, 1);
    }
    return h;
}

/* The recipe as train_run reads it, and the options of the run around it
 * (every field of RunOptions but the files, which only rank 0 writes). */
static uint64_t hash_recipe(uint64_t h, const TrainOptions *t, const RunOptions *o)
{
    const int64_t ints[] = {t->epochs, t->batch_size, t->adam.decoupled, t->schedule, t->warmup,
                            t->per_epoch, t->validate_every, t->bucket, t->stop_after, o->seed,
                            o->eval_every, o->d_model, o->heads, o->layers, o->ffn,
                            o->norm_first, o->no_test};
    const double reals[] = {t->adam.lr, t->adam.beta1, t->adam.beta2, t->adam.eps,
                            t->adam.weight_decay, t->max_norm, t->label_smoothing, o->dropout,
                            o->target_loss, o->min_accuracy, o->mpi_timeout};
    const char *strings[] = {o->optimizer, o->schedule, o->resume, o->device};
    h = hash_reals(hash_ints(h, ints, COUNT(ints)), reals, COUNT(reals));
    for (size_t i = 0; i < COUNT(strings); i++) h = hash_string(h, strings[i]);
    return h;
}

int task_run_hash(const TaskRun *r, const Model *m, const OptimState *opt,
                  const TrainState *state, uint64_t *hash, Error *err)
{
    TrainOptions t;
    if (recipe(&r->o, &t, err) != 0) return -1;
    uint64_t h = 0xcbf29ce484222325ULL;
    h = hash_config(h, &m->cfg);
    h = hash_recipe(h, &t, &r->o);
    h = hash_bytes(h, m->params, m->num_params * sizeof *m->params);
    const int64_t where[] = {opt->step, state->epoch};
    const uint64_t rngs[] = {state->data_rng.state, state->data_rng.inc,
                             state->dropout_rng.state, state->dropout_rng.inc};
    h = hash_ints(h, where, COUNT(where));
    h = hash_bytes(h, rngs, sizeof rngs);
    if (hash_examples(&h, &r->train, err) != 0 || hash_examples(&h, &r->val, err) != 0)
        return -1;
    *hash = h;
    return 0;
}

/* The ranks of an MPI run must train the same thing: a rank whose hash
 * (task_run_hash) is not rank 0's is refused. */
static int ranks_agree(const TaskRun *r, const Model *m, const OptimState *opt,
                       const TrainState *state, Error *err)
{
    uint64_t h;
    if (task_run_hash(r, m, opt, state, &h, err) != 0) return -1;
    return device_agree(h, r->o.mpi_timeout, err);
}

/* Under mpirun with several ranks: trains on them (--device mpi unless
 * --device nccl asked for their GPUs; cuda is refused); ranks other than 0
 * write nothing and print nothing but their errors. */
static int share_out(TaskRun *r, Error *err)
{
    RunOptions *o = &r->o;
    r->ranks = device_ranks(&r->rank);
    if (r->ranks == 1) return 0;
    if (strcmp(o->device, "cpu") == 0) o->device = "mpi";
    if (strcmp(o->device, "mpi") != 0 && strcmp(o->device, "nccl") != 0)
        return error_set(err, "--device %s: the %d MPI ranks train on their CPUs (--device mpi) "
                         "or on one GPU each (--device nccl)", o->device, r->ranks);
    if (device_check(o->device, err) != 0) return -1;
    if (r->rank > 0) {
        o->checkpoint = o->out = o->log = NULL;
        if (!freopen("/dev/null", "w", stdout))
            return error_set(err, "rank %d: cannot silence stdout", r->rank);
    }
    return 0;
}

int task_train(TaskRun *r, Error *err)
{
    const Task *task = r->task;
    const RunOptions *o = &r->o;
    TrainOptions t;
    TrainReport report = {0};
    Model m = {0};
    OptimState opt = {0};
    TrainState state = {0};
    StepDevice device = {0};
    RunLocks locks = {.n = 0};
    FILE *round_log = NULL;
    char round_path[4096] = "";
    int opened = 0, rc = -1;

    r->training = 1;
    if (share_out(r, err) != 0) return -1;
    if (recipe(o, &t, err) != 0) return -1;
    if (task->check && task->check(r, err) != 0) return -1;
    report.log_path = o->log;   /* the check may name it: chapter 08's --plot-data DIR */
    report.checkpoint = o->checkpoint;
    report.quiet = r->rank > 0;
    report.epochs = o->train.epochs;
    t.hooks = train_report_hooks(&report);
    if (o->log && task->round && task->round_log_suffix)
        snprintf(round_path, sizeof round_path, "%s%s", o->log, task->round_log_suffix);
    /* Every file the run writes, checked before any work. */
    RunPath outputs[] = {{"--checkpoint", o->checkpoint, "--resume"}, {"--out", o->out, NULL},
                         {"--log", o->log, NULL},
                         {"--log's round log", round_path[0] ? round_path : NULL, NULL}};
    RunPath inputs[8] = {{"--resume", o->resume, NULL}};
    int n_in = 1 + (task->inputs ? task->inputs(r, inputs + 1, 7) : 0);
    if (check_run_paths(outputs, 4, inputs, n_in, err) != 0) return -1;
    if (o->resume && access(o->resume, R_OK) != 0)
        return error_set(err, "--resume: cannot read %s: %s", o->resume, strerror(errno));
    /* Each output locked for the run: no other run writes it, under any option. */
    if (run_paths_lock(&locks, outputs, 4, err) != 0) return -1;
    for (int i = 0; i < 4; i++)
        if (outputs[i].path) file_remove_stale_temps(outputs[i].path);

    opened = 1;                 /* close() frees what a failed open() left */
    if (task->open(r, err) != 0) goto done;
    ModelConfig cfg;
    ConfigOptions names;
    task_config(r, &cfg, &names);
    if (options_check_config(&cfg, &names, err) != 0) goto done;
    int finished;
    if (start(r, &cfg, &names, &m, &opt, &state, &finished, err) != 0) goto done;
    report.checkpoint_meta = r->meta;
    report.one_target = r->train.one_target;
    if (finished) {
        printf("%s finished its %d epochs: --out is written from it\n", o->resume, o->train.epochs);
    } else {
        /* What train_run would refuse, asked before any file is opened: a
         * refused run leaves an earlier run's logs as they were. */
        if (train_check(&m, &t, &r->train, &r->val, err) != 0) goto done;
        print_run(r, &m, &t);
        if (r->ranks > 1 && ranks_agree(r, &m, &opt, &state, err) != 0) goto done;
        BatchSize size = {o->train.batch_size, r->train.S, r->train.T};
        if (device_open(o->device, &device, &m, &opt, size, o->mpi_timeout, err) != 0) goto done;
        t.device = device.ctx ? &device : NULL;
        if (t.device && strcmp(device.name, "mpi") == 0 && r->rank > 0) {
            /* ZeRO-1: the device keeps this rank's slice of the moments;
             * the whole of them is gathered only into rank 0's opt, for its
             * checkpoints. (opt.step goes on counting the steps.) */
            for (int i = 0; i < opt.n_slots; i++) {
                free(opt.slots[i]);
                opt.slots[i] = NULL;
            }
        }
        if (t.device && strcmp(device.name, "mpi") == 0)
            printf("training on %d MPI rank(s), each on its share of every batch "
                   "(--device mpi)\n", r->ranks);
        else if (t.device && strcmp(device.name, "nccl") == 0)
            printf("training on %d GPU(s), one per MPI rank, each on its share of every batch "
                   "(--device nccl)\n", r->ranks);
        else if (t.device) printf("training on the GPU (--device %s)\n", o->device);
        if (round_path[0]) {
            round_log = round_log_open(round_path, task->round_column, o->resume ? opt.step : -1,
                                       err);
            if (!round_log) goto done;
        }
        double started = time_now();
        if (train_rounds(r, &m, &opt, &state, &t, round_log, err) != 0) goto done;
        printf("at epoch %" PRId64 " of %d (step %" PRId64 "), %.1f s in this run\n",
               state.epoch, o->train.epochs, opt.step, time_now() - started);
    }
    if (o->out && save_model(r, &m, o->out, err) != 0) goto done;
    double accuracy = 1.0;                      /* rank 0 reports */
    if (r->rank == 0 && !o->no_test && task->report(r, &m, &accuracy, err) != 0) goto done;
    rc = 0;
    if (o->target_loss > 0 && !finished && !(r->last_val.loss <= o->target_loss))
        rc = error_set(err, "the validation loss %.4f is above the target %.4f",
                       r->last_val.loss, o->target_loss);
    else if (accuracy < o->min_accuracy)
        rc = error_set(err, "the test accuracy %.4f is below --min-accuracy %.4f", accuracy,
                       o->min_accuracy);
done:
    if (round_log) fclose(round_log);
    if (device.close) device.close(device.ctx);
    optim_state_free(&opt);
    model_free(&m);
    if (opened && task->close) task->close(r);
    run_paths_unlock(&locks);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* --eval                                                                    */
/* ------------------------------------------------------------------------ */

int task_load_model(const TaskRun *r, Model *m, const char *path, Error *err)
{
    if (model_load(m, path, err) != 0) return -1;
    if (r->task->check_model(r, m, path, err) != 0) {
        model_free(m);
        return -1;
    }
    return 0;
}

static int task_eval(TaskRun *r, const char *path, Error *err)
{
    Model m;
    double accuracy;
    r->training = 0;
    r->model_path = path;
    if (r->task->check && r->task->check(r, err) != 0) return -1;
    int rc = r->task->open(r, err);
    if (rc == 0) rc = task_load_model(r, &m, path, err);
    if (rc == 0) {
        rc = r->task->report(r, &m, &accuracy, err);
        if (rc == 0 && accuracy < r->o.min_accuracy)
            rc = error_set(err, "%s: test accuracy %.4f is below --min-accuracy %.4f", path,
                           accuracy, r->o.min_accuracy);
        model_free(&m);
    }
    if (r->task->close) r->task->close(r);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* --bench: the C half of `make bench` (reference/bench.py is the driver)    */
/* ------------------------------------------------------------------------ */

/* This process's peak resident memory in MB: VmHWM in /proc/self/status
 * (NaN where there is no /proc). */
static double peak_resident_mb(void)
{
    char line[256];
    double kb = NAN;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return NAN;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, "VmHWM:", 6) == 0) kb = strtod(line + 6, NULL);
    fclose(f);
    return kb / 1024.0;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct {
    int N, S, T, steps, repeats, warmup;
    const char *device;
} BenchOptions;

/* Random ids for a batch of the model's: clear of <pad>, <sos> and <eos>
 * when the model has a pad id; a classifier's targets are its classes,
 * every one of them. */
static int bench_batch(const Model *m, const BenchOptions *b, int64_t *src, int64_t *tgt_in,
                       int64_t *target, int out_len, const char *path, Error *err)
{
    Rng rng;
    int low = m->cfg.pad_id >= 0 ? 3 : 0;
    int classes = m->cfg.kind == MODEL_CLASSIFIER;
    if (m->cfg.src_vocab <= low || (!classes && m->cfg.tgt_vocab <= low))
        return error_set(err, "%s: vocabularies of %d and %d ids leave none past <pad>, <sos>, "
                         "<eos>", path, m->cfg.src_vocab, m->cfg.tgt_vocab);
    rng_seed(&rng, 0, 5);
    for (int64_t i = 0; i < (int64_t)b->N * b->S; i++)
        src[i] = low + rng_below(&rng, (uint32_t)(m->cfg.src_vocab - low));
    for (int64_t i = 0; tgt_in && i < (int64_t)b->N * b->T; i++)
        tgt_in[i] = low + rng_below(&rng, (uint32_t)(m->cfg.tgt_vocab - low));
    int target_low = classes ? 0 : low;
    for (int64_t i = 0; i < (int64_t)b->N * out_len; i++)
        target[i] = target_low + rng_below(&rng, (uint32_t)(m->cfg.tgt_vocab - target_low));
    return 0;
}

/* Times train_step on random batches: `warmup` untimed steps, then `repeats`
 * runs of `steps` steps; prints the median ms per step as one JSON line. */
static int run_bench(const char *path, const BenchOptions *b, Error *err)
{
    Model m = {0};
    OptimState opt = {0};
    StepWork s = {0};
    StepDevice device = {0};
    int64_t *src = NULL, *tgt_in = NULL, *target = NULL;
    double runs[64];
    int rc = -1;

    if (b->N < 1 || b->S < 1 || b->T < 0 || b->steps < 1 || b->repeats < 1 || b->repeats > 64 ||
        b->warmup < 0)
        return error_set(err, "need --batch-size and --src-len >= 1 (and --tgt-len for a "
                              "seq2seq model), --steps >= 1, 1 <= --repeats <= 64");
    if (device_check(b->device, err) != 0) return -1;
    if (model_load(&m, path, err) != 0) return -1;
    int seq2seq = m.cfg.kind == MODEL_SEQ2SEQ;
    if (seq2seq != (b->T > 0)) {
        error_set(err, "--tgt-len: give it for a seq2seq model and only then");
        goto done;
    }
    int out_len = seq2seq ? b->T
                : m.cfg.kind == MODEL_LABELLER || m.cfg.kind == MODEL_LM ? b->S : 1;
    src = malloc((size_t)b->N * b->S * sizeof *src);
    target = malloc((size_t)b->N * out_len * sizeof *target);
    tgt_in = seq2seq ? malloc((size_t)b->N * b->T * sizeof *tgt_in) : NULL;
    if (!src || !target || (seq2seq && !tgt_in)) {
        error_set(err, "out of memory for the bench batch");
        goto done;
    }
    if (bench_batch(&m, b, src, tgt_in, target, out_len, path, err) != 0) goto done;
    if (adam_state_alloc(&opt, m.num_params, err) != 0) goto done;
    if (device_open(b->device, &device, &m, &opt, (BatchSize){b->N, b->S, b->T}, 300, err) != 0)
        goto done;
    if (!device.ctx && step_work_alloc(&s, &m, b->N, b->S, b->T, 1, err) != 0) goto done;
    Rng dropout_rng;    /* the model's dropout, as in training (none at p = 0) */
    rng_seed(&dropout_rng, 0, 4);
    StepConfig step = {adam_default_config(0), 1e-3f, 0.0f, 0.0f,
                       m.cfg.dropout > 0 ? &dropout_rng : NULL};
    step.lr = step.adam.lr;
    Batch batch = {b->N, b->S, b->T, src, tgt_in, target, NULL};
    for (int k = -1; k < b->repeats; k++) {
        int count = k < 0 ? b->warmup : b->steps;
        double started = time_now();
        for (int i = 0; i < count; i++) {
            StepResult res;
            if (step_on(device.ctx ? &device : NULL, &m, &s, &opt, &step, &batch, &res, err) != 0)
                goto done;
        }
        if (k >= 0) runs[k] = (time_now() - started) / b->steps * 1e3;
    }
    qsort(runs, (size_t)b->repeats, sizeof runs[0], compare_doubles);
    printf("{\"ms_per_step\": %.6f, \"peak_mb\": %.1f", runs[b->repeats / 2], peak_resident_mb());
    if (device.ctx) printf(", \"%s\": %.1f", strcmp(device.name, "mpi") == 0 ? "rank_state_mb"
                           : "gpu_mb", (double)device.bytes / (1 << 20));
    printf("}\n");
    rc = 0;
done:
    if (device.close) device.close(device.ctx);
    step_work_free(&s);
    optim_state_free(&opt);
    model_free(&m);
    free(src), free(tgt_in), free(target);
    return rc;
}

static int bench_command(const char *program, int argc, char **argv)
{
    BenchOptions b = {0, 0, 0, 10, 5, 3, "cpu"};
    int help = 0;
    Option opts[] = {
        {"--batch-size", OPT_INT, &b.N, "sequences per step"},
        {"--src-len", OPT_INT, &b.S, "source length"},
        {"--tgt-len", OPT_INT, &b.T, "target length (seq2seq; 0 otherwise)"},
        {"--steps", OPT_INT, &b.steps, "steps per timed run"},
        {"--repeats", OPT_INT, &b.repeats, "timed runs; the median is printed"},
        {"--warmup", OPT_INT, &b.warmup, "untimed steps first"},
        {"--device", OPT_STRING, &b.device, "cpu, cuda (build/cuda/), mpi (build/mpi/, "
         "under mpirun: each rank times its share of the batch) or nccl (build/mpi-cuda/, the "
         "same on one GPU per rank)"},
        {"--help", OPT_FLAG, &help, "this list"},
    };
    int n = (int)(sizeof opts / sizeof opts[0]);
    Error err;
    if (argc >= 3 && strcmp(argv[2], "--help") == 0) {
        printf("usage: %s --bench CHECKPOINT [options]\n", program);
        print_options(stdout, opts, n);
        return 0;
    }
    if (argc < 3 || parse_options(opts, n, argc, argv, 3, &err) != 0) {
        fprintf(stderr, "%s --bench: %s\n", program,
                argc < 3 ? "give the checkpoint: --bench CHECKPOINT [options]" : err.msg);
        return 2;
    }
    if (run_bench(argv[2], &b, &err) != 0) {
        fprintf(stderr, "%s --bench: %s\n", program, err.msg);
        return 1;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The program                                                               */
/* ------------------------------------------------------------------------ */

static void usage(FILE *out, const Task *t)
{
    fprintf(out, "usage: %s --train [options]          (--train --help lists the options)\n"
                 "       %s --eval MODEL [options]     (--eval --help lists the options)\n"
                 "       %s --bench CHECKPOINT [options]\n", t->program, t->program, t->program);
    for (int i = 0; i < t->n_commands; i++)
        fprintf(out, "       %s %s%s%s\n", t->program, t->commands[i].name,
                t->commands[i].usage[0] ? " " : "", t->commands[i].usage);
}

int task_main(const Task *task, int argc, char **argv)
{
    const char *cmd = argc >= 2 ? argv[1] : "";
    Error err;
    int help = 0, rc;
    flush_subnormals();                           /* tensor.h */
    if (task->n_data_options + task->n_train_options + task->n_eval_options >
        MAX_OPTIONS - COMMON_OPTIONS) {
        fprintf(stderr, "%s: the task has more options than task.c makes room for (%d)\n",
                task->program, MAX_OPTIONS - COMMON_OPTIONS);
        return 2;
    }
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        printf("%s\n\n", task->about);
        usage(stdout, task);
        return 0;
    }
    if (strcmp(cmd, "--bench") == 0) {
        rc = bench_command(task->program, argc, argv);
        device_finish(rc != 0);
        return rc;
    }
    if (strcmp(cmd, "--train") == 0 || strcmp(cmd, "--eval") == 0) {
        int train = cmd[2] == 't';
        TaskRun r = task_run_defaults(task);
        Option opts[MAX_OPTIONS];
        int n = train ? train_options(opts, &r, &help) : eval_options(opts, &r, &help);
        int first = train ? 2 : 3;
        /* --help anywhere: the defaults are shown before any option changes them */
        for (int i = 2; i < argc; i++) help |= strcmp(argv[i], "--help") == 0;
        if (!help && !train && argc < 3) {
            fprintf(stderr, "%s --eval: give the model: --eval MODEL [options]\n", task->program);
            return 2;
        }
        if (help) {
            printf("usage: %s %s\n", task->program, train ? "--train [options]"
                                                          : "--eval MODEL [options]");
            print_options(stdout, opts, n);
            return 0;
        }
        if (parse_options(opts, n, argc, argv, first, &err) != 0) {
            fprintf(stderr, "%s %s: %s\n", task->program, cmd, err.msg);
            return 2;
        }
        rc = train ? task_train(&r, &err) : task_eval(&r, argv[2], &err);
    } else {
        const TaskCommand *c = NULL;
        for (int i = 0; i < task->n_commands; i++)
            if (strcmp(cmd, task->commands[i].name) == 0) c = &task->commands[i];
        if (!c) {
            usage(stderr, task);
            return 2;
        }
        rc = c->run(argc - 2, argv + 2, &err);
    }
    if (rc != 0) fprintf(stderr, "%s %s: %s\n", task->program, cmd, err.msg);
    device_finish(rc != 0);             /* an MPI run: a failed rank stops them all */
    return rc != 0;
}
