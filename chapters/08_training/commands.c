/*
 * commands.c - see commands.h. Reading options, making the data and the
 * model, running train_run (trainer.h), and reporting: the code around the
 * training loop, not the loop itself.
 */
#include "commands.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data.h"
#include "decode.h"
#include "error.h"
#include "model.h"
#include "optim.h"
#include "rng.h"
#include "safetensors.h"   /* TextOut */
#include "train_util.h"
#include "trainer.h"

#ifdef WITH_CUDA            /* the CUDA build of this file: build/cuda/08_training */
#include "gpu.h"
#endif

/* ------------------------------------------------------------------------ */
/* Options                                                                   */
/* ------------------------------------------------------------------------ */

/* ------------------------------------------------------------------------ */
/* A training run                                                            */
/* ------------------------------------------------------------------------ */

/* Everything --train reads; the defaults are the seeds' reverse task. */
typedef struct {
    const char *task, *model, *schedule;
    int epochs, batch_size, warmup, per_epoch, adamw, threads_unused;
    int seq_len, categories, train_size, test_size, seed;
    int d_model, heads, layers, ffn, norm_first;
    double lr, clip, label_smoothing, weight_decay, dropout, target_accuracy;
    const char *checkpoint, *resume, *log, *plot_data;
    const char *device;
    int help;
} TrainArgs;

static TrainArgs seed_reverse_task(void)
{
    TrainArgs a = {0};
    a.task = "reverse";             /* seeds 000 and 004 */
    a.model = "labeller";           /* encoder-only, one class per position */
    a.schedule = "cosine";          /* seed 004's CosineWarmupScheduler */
    a.epochs = 10;
    a.batch_size = 128;
    a.warmup = 50;
    a.seq_len = 16;
    a.categories = 10;
    a.train_size = 50000;           /* seed 000: 60 000 sequences, 50 000 / 10 000 */
    a.test_size = 10000;
    a.d_model = 32;
    a.heads = 1;
    a.layers = 1;
    a.ffn = 64;
    a.lr = 1e-3;                    /* Adam */
    a.device = "cpu";
    return a;
}

#define TRAIN_OPTIONS(a) {                                                                \
    {"--task", OPT_STRING, &(a).task, "reverse or copy (default reverse)"},               \
    {"--model", OPT_STRING, &(a).model, "labeller (encoder-only) or seq2seq (default labeller)"}, \
    {"--epochs", OPT_INT, &(a).epochs, "epochs (default 10)"},                            \
    {"--batch-size", OPT_INT, &(a).batch_size, "sequences per step (default 128)"},       \
    {"--lr", OPT_DOUBLE, &(a).lr, "base learning rate (default 1e-3)"},                   \
    {"--schedule", OPT_STRING, &(a).schedule, "cosine, noam or constant (default cosine)"}, \
    {"--warmup", OPT_INT, &(a).warmup, "warm-up steps (default 50)"},                     \
    {"--per-epoch-schedule", OPT_FLAG, &(a).per_epoch,                                    \
     "step the schedule once per epoch, as seed 000's loop did"},                         \
    {"--adamw", OPT_FLAG, &(a).adamw, "AdamW (decoupled weight decay) instead of Adam"},  \
    {"--weight-decay", OPT_DOUBLE, &(a).weight_decay, "weight decay (default 0)"},        \
    {"--clip", OPT_DOUBLE, &(a).clip, "clip the gradient norm to this (default 0: off)"}, \
    {"--label-smoothing", OPT_DOUBLE, &(a).label_smoothing, "default 0"},                 \
    {"--seq-len", OPT_INT, &(a).seq_len, "sequence length (default 16)"},                 \
    {"--categories", OPT_INT, &(a).categories, "token categories (default 10)"},          \
    {"--train-size", OPT_INT, &(a).train_size, "training sequences (default 50000)"},     \
    {"--test-size", OPT_INT, &(a).test_size, "held-out sequences (default 10000)"},       \
    {"--seed", OPT_INT, &(a).seed, "seed of data, weights and shuffling (default 0)"},    \
    {"--d-model", OPT_INT, &(a).d_model, "default 32"},                                   \
    {"--heads", OPT_INT, &(a).heads, "default 1"},                                        \
    {"--layers", OPT_INT, &(a).layers, "encoder (and decoder) layers (default 1)"},       \
    {"--ffn", OPT_INT, &(a).ffn, "feed-forward width (default 64)"},                      \
    {"--norm-first", OPT_FLAG, &(a).norm_first, "pre-norm layers"},                       \
    {"--dropout", OPT_DOUBLE, &(a).dropout, "default 0"},                                 \
    {"--checkpoint", OPT_STRING, &(a).checkpoint, "write a checkpoint here after every epoch"}, \
    {"--resume", OPT_STRING, &(a).resume, "continue the run saved in this checkpoint"},   \
    {"--log", OPT_STRING, &(a).log, "the CSV loss log"},                                  \
    {"--plot-data", OPT_STRING, &(a).plot_data, "folder for train_log.csv and attention_map.dat"}, \
    {"--device", OPT_STRING, &(a).device,                                                 \
     "cpu, or cuda: train on the GPU (build/cuda/08_training; default cpu)"},             \
    {"--target-accuracy", OPT_DOUBLE, &(a).target_accuracy,                               \
     "exit 1 if the held-out accuracy (percent) ends below this"},                        \
    {"--help", OPT_FLAG, &(a).help, "this list"},                                         \
}

static int check_args(const TrainArgs *a, SeqTask *task, ModelKind *kind, Schedule *schedule,
                      Error *err)
{
    if (seq_task_parse(a->task, task, err) != 0) return -1;   /* the message names the task */
    if (strcmp(a->model, "labeller") == 0) *kind = MODEL_LABELLER;
    else if (strcmp(a->model, "seq2seq") == 0) *kind = MODEL_SEQ2SEQ;
    else return error_set(err, "--model: '%s' is not labeller or seq2seq", a->model);
    if (schedule_parse(a->schedule, schedule, err) != 0) return -1;
    if (a->epochs < 1) return error_set(err, "--epochs: %d, need at least 1", a->epochs);
    if (a->batch_size < 1) return error_set(err, "--batch-size: %d, need at least 1", a->batch_size);
    if (a->train_size < 1 || a->test_size < 1)
        return error_set(err, "--train-size and --test-size need at least 1 sequence each");
    if (a->seq_len < 1 || a->seq_len > 255)
        return error_set(err, "--seq-len: %d is not in [1, 255]", a->seq_len);
    if (a->categories < 1) return error_set(err, "--categories: %d, need at least 1", a->categories);
    if (a->warmup < 0) return error_set(err, "--warmup: %d is negative", a->warmup);
    if (a->seed < 0) return error_set(err, "--seed: %d is negative", a->seed);
    if (a->lr < 0) return error_set(err, "--lr: %g is negative", a->lr);
    if (a->clip < 0) return error_set(err, "--clip: %g is negative", a->clip);
    if (a->label_smoothing < 0 || a->label_smoothing > 1)
        return error_set(err, "--label-smoothing: %g is not in [0, 1]", a->label_smoothing);
    return command_check_device(a->device, err);
}

int command_check_device(const char *name, Error *err)
{
    if (strcmp(name, "cpu") != 0 && strcmp(name, "cuda") != 0)
        return error_set(err, "--device: '%s' is not cpu or cuda", name);
    return 0;
}

/* --device: "cpu" leaves d zeroed (train_run then uses the CPU); "cuda"
 * opens the GPU, which only the CUDA build of this program has. N, S, T:
 * the training batch's shape. */
int command_open_device(const char *name, StepDevice *d, const Model *m, const AdamState *opt,
                         int N, int S, int T, Error *err)
{
    memset(d, 0, sizeof *d);
    if (command_check_device(name, err) != 0) return -1;
    if (strcmp(name, "cpu") == 0) return 0;
#ifdef WITH_CUDA
    return gpu_step_device_open(d, m, opt, N, S, T, err);
#else
    (void)m, (void)opt, (void)N, (void)S, (void)T;
    return error_set(err, "--device cuda: this program is built without CUDA; "
                          "build/cuda/ has the CUDA build (make cuda)");
#endif
}

/* The model the options describe, for the task's id layout. */
static ModelConfig model_config(const TrainArgs *a, ModelKind kind)
{
    ModelConfig c = {0};
    int seq2seq = kind == MODEL_SEQ2SEQ;
    c.kind = kind;
    c.src_vocab = c.tgt_vocab = a->categories + (seq2seq ? SEQ2SEQ_FIRST : 0);
    c.d_model = a->d_model;
    c.nhead = a->heads;
    c.dim_feedforward = a->ffn;
    c.num_encoder_layers = a->layers;
    c.num_decoder_layers = seq2seq ? a->layers : 0;
    c.max_len = a->seq_len + (seq2seq ? 1 : 0);
    c.norm_first = a->norm_first;
    c.pad_id = seq2seq ? SEQ2SEQ_PAD : -1;
    c.eps = 1e-5f;
    c.dropout = (float)a->dropout;
    return c;
}

/* The decoding options of the seq2seq task layout (data.h): <sos>, <eos>,
 * and room for the sequence and its <eos>. */
static DecodeOptions task_decoding(int seq_len)
{
    DecodeOptions d = {0};
    d.sos_id = SEQ2SEQ_SOS;
    d.eos_id = SEQ2SEQ_EOS;
    d.max_new = seq_len + 1;
    d.beam_width = 1;
    return d;
}

/* The share of ds whose greedy decoding is exactly the target followed by
 * <eos>. */
static int greedy_exact_match(Model *m, const SeqDataset *ds, double *exact, Error *err)
{
    enum { CHUNK = 500 };
    int S = ds->seq_len;
    DecodeOptions d = task_decoding(S);
    int64_t *src = malloc((size_t)CHUNK * S * sizeof *src);
    int64_t *out = malloc((size_t)CHUNK * d.max_new * sizeof *out);
    int64_t right = 0;
    int rc = -1;
    if (!src || !out) {
        error_set(err, "out of memory for greedy decoding");
        goto done;
    }
    for (int64_t first = 0; first < ds->n; first += CHUNK) {
        int n = (int)(ds->n - first < CHUNK ? ds->n - first : CHUNK);
        for (int64_t i = 0; i < (int64_t)n * S; i++)
            src[i] = ds->x[first * S + i] + SEQ2SEQ_FIRST;
        if (decode_greedy(m, src, n, S, &d, out, NULL, err) != 0) goto done;
        for (int e = 0; e < n; e++) {
            const int64_t *y = ds->y + (first + e) * S, *o = out + (size_t)e * d.max_new;
            int same = o[S] == SEQ2SEQ_EOS;
            for (int t = 0; t < S && same; t++) same = o[t] == y[t] + SEQ2SEQ_FIRST;
            right += same;
        }
    }
    *exact = ds->n ? (double)right / ds->n : 0.0;
    rc = 0;
done:
    free(src);
    free(out);
    return rc;
}

static void print_ids(const char *label, const int64_t *ids, int n)
{
    printf("  %-11s", label);
    for (int i = 0; i < n; i++) printf(" %" PRId64, ids[i]);
    printf("\n");
}

/* A seq2seq model's output, in its own ids (past the specials): the digits,
 * up to and with the <eos> that ends it; a special elsewhere by its name. */
static void print_decoded(const char *label, const int64_t *ids, int n)
{
    static const char *const specials[] = {"<pad>", "<sos>", "<eos>"};
    printf("  %-11s", label);
    for (int i = 0; i < n; i++) {
        if (ids[i] >= SEQ2SEQ_FIRST) printf(" %" PRId64, ids[i] - SEQ2SEQ_FIRST);
        else printf(" %s", ids[i] >= 0 ? specials[ids[i]] : "?");
        if (ids[i] == SEQ2SEQ_EOS) break;
    }
    printf("\n");
}

/* Writes the first head of encoder layer 0's self-attention for example 0
 * of the last forward on w as "query key weight" blocks. */
static int write_attention(const char *dir, const ModelWork *w, const Model *m,
                           const int64_t *src, Error *err)
{
    char path[4096];
    const float *att = model_attention(w, m, ATTN_ENCODER, 0, 0, 0);
    int S = w->S;
    TextOut out;
    if (text_out_open(&out, err) != 0) return -1;
    fprintf(out.f, "# input:");
    for (int i = 0; i < S; i++) fprintf(out.f, " %" PRId64, src[i]);
    fprintf(out.f, "\n# query key weight (encoder layer 1, head 1 of %d)\n", m->cfg.nhead);
    for (int q = 0; q < S; q++) {
        for (int k = 0; k < S; k++)
            fprintf(out.f, "%d %d %.6f\n", q, k, att[(size_t)q * S + k]);
        fprintf(out.f, "\n");
    }
    snprintf(path, sizeof path, "%s/attention_map.dat", dir);
    return text_out_commit(&out, path, err);
}

/* Prints a few held-out examples and, for the labeller, writes the
 * attention map of the first one. */
static int show_examples(Model *m, const SeqDataset *test, const char *plot_dir, Error *err)
{
    enum { SHOW = 3 };
    int seq2seq = m->cfg.kind == MODEL_SEQ2SEQ;
    int S = test->seq_len;
    ModelWork w;
    if (model_work_alloc(&w, m, 1, S, seq2seq ? S + 1 : 0, 0, err) != 0) return -1;
    int rc = -1;
    printf("\nheld-out examples:\n");
    for (int e = 0; e < SHOW && e < test->n; e++) {
        const int64_t *x = test->x + (size_t)e * S, *y = test->y + (size_t)e * S;
        int64_t pred[256];
        print_ids("input", x, S);
        print_ids("target", y, S);
        if (seq2seq) {
            /* The model reads and writes ids shifted past the specials. */
            DecodeOptions d = task_decoding(S);
            int64_t shifted[256];
            for (int t = 0; t < S; t++) shifted[t] = x[t] + SEQ2SEQ_FIRST;
            if (decode_greedy(m, shifted, 1, S, &d, pred, NULL, err) != 0) goto done;
            print_decoded("prediction", pred, d.max_new);
        } else {
            if (model_forward(m, &w, x, NULL, NULL) != 0) {
                error_set(err, "model_forward failed");
                goto done;
            }
            for (int t = 0; t < S; t++) {
                const float *row = w.logits + (size_t)t * m->cfg.tgt_vocab;
                int best = 0;
                for (int c = 1; c < m->cfg.tgt_vocab; c++) if (row[c] > row[best]) best = c;
                pred[t] = best;
            }
            if (e == 0 && plot_dir && write_attention(plot_dir, &w, m, x, err) != 0) goto done;
            print_ids("prediction", pred, S);
        }
        printf("\n");
    }
    rc = 0;
done:
    model_work_free(&w);
    return rc;
}

static int run_training(const TrainArgs *a, Error *err)
{
    SeqTask task;
    ModelKind kind = MODEL_LABELLER;
    Schedule schedule = SCHEDULE_COSINE;
    SeqDataset all = {0}, train = {0}, test = {0};
    Model m = {0};
    AdamState opt = {0};
    TrainState state = {0};
    StepDevice device = {0};
    StepResult val;
    char log_path[4096];
    Rng rng;
    int rc = -1;

    if (check_args(a, &task, &kind, &schedule, err) != 0) return -1;
    TrainOptions o = {0};
    o.epochs = a->epochs;
    o.batch_size = a->batch_size;
    o.adam = adam_default_config(a->adamw);
    o.adam.lr = (float)a->lr;
    o.adam.weight_decay = (float)a->weight_decay;
    o.schedule = schedule;
    o.warmup = a->warmup;
    o.per_epoch = a->per_epoch;
    o.max_norm = (float)a->clip;
    o.label_smoothing = (float)a->label_smoothing;
    o.checkpoint = a->checkpoint;
    o.log_path = a->log;
    if (adam_config_check(&o.adam, err) != 0) return -1;
    if ((a->checkpoint && check_output_path("--checkpoint", a->checkpoint, err) != 0) ||
        (a->log && check_output_path("--log", a->log, err) != 0))
        return -1;
    if (a->plot_data) {
        if (make_dir(a->plot_data, err) != 0) return -1;
        if (!o.log_path) {
            snprintf(log_path, sizeof log_path, "%s/train_log.csv", a->plot_data);
            o.log_path = log_path;
        }
    }

    static const ConfigOptions names = {"--model", "--categories", "--d-model", "--heads",
                                        "--ffn", "--layers", "--seq-len", "--norm-first",
                                        "--dropout"};
    ModelConfig cfg = model_config(a, kind);
    if (options_check_config(&cfg, &names, err) != 0) return -1;

    /* The data: one draw of train + test sequences, split (seed 000). Each
     * random stream has its own Rng stream id, so changing one use (say,
     * more epochs) leaves the others as they were. */
    rng_seed(&rng, (uint64_t)a->seed, 1);
    if (seq_dataset_make(&all, task, (int64_t)a->train_size + a->test_size, a->seq_len,
                         a->categories, &rng, err) != 0 ||
        seq_dataset_split(&all, a->train_size, &train, &test, err) != 0)
        goto done;

    if (a->resume) {
        if (checkpoint_load(a->resume, &m, &opt, &state, err) != 0 ||
            checkpoint_check_config(a->resume, &m.cfg, &cfg, &names, err) != 0)
            goto done;
        printf("resuming %s after epoch %" PRId64 " (step %" PRId64 ")\n", a->resume,
               state.epoch, opt.step);
    } else {
        rng_seed(&rng, (uint64_t)a->seed, 2);
        if (model_init(&m, &cfg, &rng, err) != 0) goto done;
        if (adam_state_alloc(&opt, m.num_params, err) != 0) goto done;
        rng_seed(&state.data_rng, (uint64_t)a->seed, 3);
        rng_seed(&state.dropout_rng, (uint64_t)a->seed, 4);
    }
    printf("task %s, %s model: d_model %d, %d head(s), %d layer(s), FFN %d, %zu parameters\n"
           "training on %d sequences of %d tokens, batch %d, %d epochs, %s lr %g "
           "(%s schedule, warm-up %d %s)\n",
           seq_task_name(task), a->model, m.cfg.d_model, m.cfg.nhead, m.cfg.num_encoder_layers,
           m.cfg.dim_feedforward, m.num_params, a->train_size, a->seq_len, a->batch_size,
           a->epochs, a->adamw ? "AdamW" : "Adam", a->lr, a->schedule, a->warmup,
           a->per_epoch ? "epochs, stepped per epoch" : "steps");

    int seq2seq = kind == MODEL_SEQ2SEQ;
    if (command_open_device(a->device, &device, &m, &opt, a->batch_size, a->seq_len,
                    seq2seq ? a->seq_len + 1 : 0, err) != 0)
        goto done;
    o.device = device.ctx ? &device : NULL;
    if (o.device) printf("training on the GPU (--device cuda)\n");

    double started = time_now();
    Examples train_ex = examples_of_task(&train, kind), test_ex = examples_of_task(&test, kind);
    if (train_run(&m, &opt, &state, &o, &train_ex, &test_ex, &val, err) != 0) goto done;
    double seconds = time_now() - started;
    if (evaluate(&m, NULL, &test_ex, a->batch_size, &val, err) != 0) goto done;
    double accuracy = 100.0 * val.correct / (val.count ? val.count : 1);
    printf("\nheld-out: %" PRId64 " sequences, loss %.4f, token accuracy %.2f %% "
           "(training took %.1f s)\n", test.n, val.loss, accuracy, seconds);
    if (seq2seq) {
        double exact;
        if (greedy_exact_match(&m, &test, &exact, err) != 0) goto done;
        printf("greedy decoding: exact match %.2f %% of %" PRId64 " held-out sequences\n",
               100.0 * exact, test.n);
    }
    if (show_examples(&m, &test, a->plot_data, err) != 0) goto done;
    rc = 0;
    if (a->target_accuracy > 0 && accuracy < a->target_accuracy) {
        error_set(err, "held-out token accuracy %.2f %% is below the target %.2f %%", accuracy,
                  a->target_accuracy);
        rc = -1;
    }
done:
    if (device.close) device.close(device.ctx);
    adam_state_free(&opt);
    model_free(&m);
    seq_dataset_free(&all);
    seq_dataset_free(&train);
    seq_dataset_free(&test);
    return rc;
}

int command_train(int argc, char **argv)
{
    TrainArgs a = seed_reverse_task();
    Option opts[] = TRAIN_OPTIONS(a);
    int n = (int)(sizeof opts / sizeof opts[0]);
    Error err;
    if (parse_options(opts, n, argc, argv, 2, &err) != 0) {
        fprintf(stderr, "08_training --train: %s\n", err.msg);
        return 2;
    }
    if (a.help) {
        printf("usage: 08_training --train [options]\n");
        print_options(stdout, opts, n);
        return 0;
    }
    if (run_training(&a, &err) != 0) {
        fprintf(stderr, "08_training --train: %s\n", err.msg);
        return 1;
    }
    return 0;
}

int command_train_demo(const char *plot_dir)
{
    TrainArgs a = seed_reverse_task();
    Error err;
    a.plot_data = plot_dir;
    a.checkpoint = "build/demo_reverse.safetensors";
    a.target_accuracy = 99.5;
    printf("The reverse task (seeds 000 and 004), trained from scratch in C.\n"
           "The seed's model and settings, with the learning-rate schedule stepped once per\n"
           "optimizer step (seed 004) instead of once per epoch (seed 000's loop).\n\n");
    if (run_training(&a, &err) != 0) {
        fprintf(stderr, "08_training --demo: %s\n", err.msg);
        return 1;
    }

    /* The same task as translation: the encoder-decoder reads the digits and
     * writes them reversed, one token at a time, decoded greedily. */
    a = seed_reverse_task();
    a.model = "seq2seq";
    a.heads = 2;
    a.epochs = 3;
    a.checkpoint = "build/demo_seq2seq.safetensors";
    a.target_accuracy = 99.5;
    printf("\n\nThe same task with the encoder-decoder of chapter 07: <sos> + the reversed\n"
           "digits + <eos>, generated by greedy decoding (2 heads, 3 epochs).\n\n");
    if (run_training(&a, &err) != 0) {
        fprintf(stderr, "08_training --demo: %s\n", err.msg);
        return 1;
    }
    return 0;
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

/* Times train_step on random batches: `warmup` untimed steps, then `repeats`
 * runs of `steps` steps; prints the median ms per step as one JSON line. */
static int run_bench(const char *path, const char *device_name, int N, int S, int T, int steps,
                     int repeats, int warmup, Error *err)
{
    Model m = {0};
    AdamState opt = {0};
    StepWork s = {0};
    StepDevice device = {0};
    int64_t *src = NULL, *tgt_in = NULL, *target = NULL;
    double runs[64];
    int rc = -1;
    Rng rng;

    if (N < 1 || S < 1 || T < 0 || steps < 1 || repeats < 1 || repeats > 64 || warmup < 0)
        return error_set(err, "need --batch-size and --src-len >= 1 (and --tgt-len for a "
                              "seq2seq model), --steps >= 1, 1 <= --repeats <= 64");
    if (command_check_device(device_name, err) != 0) return -1;
    if (model_load(&m, path, err) != 0) return -1;
    int seq2seq = m.cfg.kind == MODEL_SEQ2SEQ;
    if (seq2seq != (T > 0)) {
        error_set(err, "--tgt-len: give it for a seq2seq model and only then");
        goto done;
    }
    int out_len = seq2seq ? T : m.cfg.kind == MODEL_LABELLER ? S : 1;
    src = malloc((size_t)N * S * sizeof *src);
    target = malloc((size_t)N * out_len * sizeof *target);
    tgt_in = seq2seq ? malloc((size_t)N * T * sizeof *tgt_in) : NULL;
    if (!src || !target || (seq2seq && !tgt_in)) {
        error_set(err, "out of memory for the bench batch");
        goto done;
    }
    /* Random ids, clear of pad/sos/eos when the model has a pad id. */
    int low = m.cfg.pad_id >= 0 ? 3 : 0;
    if (m.cfg.src_vocab <= low || m.cfg.tgt_vocab <= low) {
        error_set(err, "%s: vocabularies of %d and %d ids leave none past <pad>, <sos>, <eos>",
                  path, m.cfg.src_vocab, m.cfg.tgt_vocab);
        goto done;
    }
    rng_seed(&rng, 0, 5);
    for (int64_t i = 0; i < (int64_t)N * S; i++)
        src[i] = low + rng_below(&rng, (uint32_t)(m.cfg.src_vocab - low));
    for (int64_t i = 0; seq2seq && i < (int64_t)N * T; i++)
        tgt_in[i] = low + rng_below(&rng, (uint32_t)(m.cfg.tgt_vocab - low));
    for (int64_t i = 0; i < (int64_t)N * out_len; i++)
        target[i] = low + rng_below(&rng, (uint32_t)(m.cfg.tgt_vocab - low));
    if (adam_state_alloc(&opt, m.num_params, err) != 0) goto done;
    if (command_open_device(device_name, &device, &m, &opt, N, S, T, err) != 0) goto done;
    if (!device.ctx && step_work_alloc(&s, &m, N, S, T, 1, err) != 0) goto done;
    AdamConfig cfg = adam_default_config(0);
    for (int r = -1; r < repeats; r++) {
        int count = r < 0 ? warmup : steps;
        double started = time_now();
        for (int k = 0; k < count; k++) {
            StepResult res;
            if (step_on(device.ctx ? &device : NULL, &m, &s, &opt, &cfg, cfg.lr, 0.0f, 0.0f,
                        src, tgt_in, target, NULL, &res, err) != 0)
                goto done;
        }
        if (r >= 0) runs[r] = (time_now() - started) / steps * 1e3;
    }
    qsort(runs, (size_t)repeats, sizeof runs[0], compare_doubles);
    printf("{\"ms_per_step\": %.6f, \"peak_mb\": %.1f", runs[repeats / 2], peak_resident_mb());
    if (device.ctx) printf(", \"gpu_mb\": %.1f", (double)device.bytes / (1 << 20));
    printf("}\n");
    rc = 0;
done:
    if (device.close) device.close(device.ctx);
    step_work_free(&s);
    adam_state_free(&opt);
    model_free(&m);
    free(src), free(tgt_in), free(target);
    return rc;
}

int command_bench(int argc, char **argv)
{
    int N = 0, S = 0, T = 0, steps = 10, repeats = 5, warmup = 3, help = 0;
    const char *device = "cpu";
    Option opts[] = {
        {"--batch-size", OPT_INT, &N, "sequences per step"},
        {"--src-len", OPT_INT, &S, "source length"},
        {"--tgt-len", OPT_INT, &T, "target length (seq2seq; 0 otherwise)"},
        {"--steps", OPT_INT, &steps, "steps per timed run (default 10)"},
        {"--repeats", OPT_INT, &repeats, "timed runs; the median is printed (default 5)"},
        {"--warmup", OPT_INT, &warmup, "untimed steps first (default 3)"},
        {"--device", OPT_STRING, &device, "cpu, or cuda (build/cuda/08_training; default cpu)"},
        {"--help", OPT_FLAG, &help, "this list"},
    };
    int n = (int)(sizeof opts / sizeof opts[0]);
    Error err;
    if (argc >= 3 && strcmp(argv[2], "--help") == 0) help = 1;
    if (!help && (argc < 3 || parse_options(opts, n, argc, argv, 3, &err) != 0)) {
        fprintf(stderr, "08_training --bench: %s\n",
                argc < 3 ? "give the checkpoint: --bench CHECKPOINT [options]" : err.msg);
        return 2;
    }
    if (help) {
        printf("usage: 08_training --bench CHECKPOINT [options]\n");
        print_options(stdout, opts, n);
        return 0;
    }
    if (run_bench(argv[2], device, N, S, T, steps, repeats, warmup, &err) != 0) {
        fprintf(stderr, "08_training --bench: %s\n", err.msg);
        return 1;
    }
    return 0;
}
