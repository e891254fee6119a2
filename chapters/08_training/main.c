/*
 * main.c - the chapter 08 program: the reverse task of seeds 000 and 004
 * (a sequence of digits in, the same digits reversed out), trained from
 * scratch in C, as an encoder-only labeller or as an encoder-decoder.
 *
 *     build/08_training --demo                 train the reverse task (make demo)
 *     build/08_training --train [options]      any training run; --train --help lists them
 *     build/08_training --bench CKPT [options] time training steps (make bench)
 *     build/08_training --case in.safetensors --out out.safetensors
 *
 * The training command is the one every task program shares (runtime/
 * task.h); this file describes the task: its data (data.h), its model and
 * how it reports. The demo writes the loss log and an attention map into
 * build/plots for `make plots`. The case mode evaluates this chapter's ops
 * (cases/training_case.h has the list, reference/ch08_training.py makes
 * the cases).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "casefile.h"
#include "data.h"
#include "decode.h"
#include "paths.h"
#include "rng.h"
#include "safetensors.h"   /* TextOut */
#include "task.h"
#include "training_case.h"

static const char CASE_USAGE[] =
    "usage: 08_training --case IN.safetensors --out OUT.safetensors\n"
    "       08_training --help   (the training commands)\n";

/* The task's own options and its data. */
static struct {
    const char *task, *model, *plot_data;
    int seq_len, categories, train_size, test_size;
    ModelKind kind;
    SeqDataset all, train, test;
    char log[4096];
} rt;

static void set_task_defaults(void)
{
    rt.task = "reverse";
    rt.model = "labeller";          /* encoder-only, one class per position */
    rt.plot_data = NULL;
    rt.seq_len = 16;
    rt.categories = 10;
    rt.train_size = 50000;          /* seed 000: 60 000 sequences, 50 000 / 10 000 */
    rt.test_size = 10000;
}

static void defaults(RunOptions *o)
{
    o->epochs = 10;
    o->batch_size = 128;
    o->warmup = 50;                 /* seed 004's CosineWarmupScheduler */
    o->d_model = 32;
    o->heads = 1;
    o->layers = 1;
    o->ffn = 64;
}

static int check(TaskRun *r, Error *err)
{
    SeqTask task;
    if (seq_task_parse(rt.task, &task, err) != 0) return -1;
    if (strcmp(rt.model, "labeller") == 0) rt.kind = MODEL_LABELLER;
    else if (strcmp(rt.model, "seq2seq") == 0) rt.kind = MODEL_SEQ2SEQ;
    else return error_set(err, "--model: '%s' is not labeller or seq2seq", rt.model);
    if (rt.train_size < 1 || rt.test_size < 1)
        return error_set(err, "--train-size and --test-size need at least 1 sequence each");
    if (rt.seq_len < 1 || rt.seq_len > 255)
        return error_set(err, "--seq-len: %d is not in [1, 255]", rt.seq_len);
    if (rt.categories < 1 || rt.categories > 1 << 20)
        return error_set(err, "--categories: %d is not in [1, %d]", rt.categories, 1 << 20);
    if (rt.plot_data && r->training) {
        if (make_dir(rt.plot_data, err) != 0) return -1;
        if (!r->o.log) {
            snprintf(rt.log, sizeof rt.log, "%s/train_log.csv", rt.plot_data);
            r->o.log = rt.log;
        }
    }
    return 0;
}

/* One draw of train + test sequences, split (seed 000), from Rng stream 1. */
static int open_data(TaskRun *r, Error *err)
{
    SeqTask task;
    Rng rng;
    rng_seed(&rng, (uint64_t)r->o.seed, 1);
    if (seq_task_parse(rt.task, &task, err) != 0 ||
        seq_dataset_make(&rt.all, task, (int64_t)rt.train_size + rt.test_size, rt.seq_len,
                         rt.categories, &rng, err) != 0 ||
        seq_dataset_split(&rt.all, rt.train_size, &rt.train, &rt.test, err) != 0)
        return -1;
    printf("task %s: %d training and %d held-out sequences of %d tokens, %d categories\n",
           seq_task_name(task), rt.train_size, rt.test_size, rt.seq_len, rt.categories);
    r->train = examples_of_task(&rt.train, rt.kind);
    r->val = examples_of_task(&rt.test, rt.kind);
    return 0;
}

static void close_data(TaskRun *r)
{
    seq_dataset_free(&rt.all);
    seq_dataset_free(&rt.train);
    seq_dataset_free(&rt.test);
}

static void config(const TaskRun *r, ModelConfig *c, ConfigOptions *names)
{
    int seq2seq = rt.kind == MODEL_SEQ2SEQ;
    c->kind = rt.kind;
    c->src_vocab = c->tgt_vocab = rt.categories + (seq2seq ? SEQ2SEQ_FIRST : 0);
    c->num_decoder_layers = seq2seq ? r->o.layers : 0;
    c->max_len = rt.seq_len + (seq2seq ? 1 : 0);
    c->pad_id = seq2seq ? SEQ2SEQ_PAD : -1;
    names->kind = "--model";
    names->vocab = "--categories";
    names->max_len = "--seq-len";
}

static int check_model(const TaskRun *r, const Model *m, const char *path, Error *err)
{
    int seq2seq = m->cfg.kind == MODEL_SEQ2SEQ;
    if ((m->cfg.kind != MODEL_LABELLER && !seq2seq) ||
        m->cfg.tgt_vocab != rt.categories + (seq2seq ? SEQ2SEQ_FIRST : 0) ||
        m->cfg.max_len < rt.seq_len + seq2seq)
        return error_set(err, "%s: not a labeller or seq2seq model of %d categories for "
                         "sequences of %d (--categories, --seq-len)", path, rt.categories,
                         rt.seq_len);
    return 0;
}

/* The decoding options of the seq2seq layout (data.h): <sos>, <eos>, and
 * room for the sequence and its <eos>. */
static DecodeOptions task_decoding(int seq_len)
{
    DecodeOptions d = {0};
    d.sos_id = SEQ2SEQ_SOS;
    d.eos_id = SEQ2SEQ_EOS;
    d.max_new = seq_len + 1;
    d.beam_width = 1;
    return d;
}

/* Greedy decoding of n sources x (digits, shifted past the specials here)
 * into out (n, seq_len + 1). */
static int decode(Model *m, const int64_t *x, int n, int S, int64_t *out, Error *err)
{
    DecodeOptions d = task_decoding(S);
    int64_t *src = malloc((size_t)n * S * sizeof *src);
    if (!src) return error_set(err, "out of memory for greedy decoding");
    for (int64_t i = 0; i < (int64_t)n * S; i++) src[i] = x[i] + SEQ2SEQ_FIRST;
    int rc = decode_greedy(m, src, n, S, &d, out, NULL, err);
    free(src);
    return rc;
}

/* The share of ds whose greedy decoding is exactly the target and <eos>. */
static int greedy_exact_match(Model *m, const SeqDataset *ds, double *exact, Error *err)
{
    enum { CHUNK = 500 };
    int S = ds->seq_len;
    int64_t *out = malloc((size_t)CHUNK * (S + 1) * sizeof *out), right = 0;
    if (!out) return error_set(err, "out of memory for greedy decoding");
    for (int64_t first = 0; first < ds->n; first += CHUNK) {
        int n = (int)(ds->n - first < CHUNK ? ds->n - first : CHUNK);
        if (decode(m, ds->x + first * S, n, S, out, err) != 0) {
            free(out);
            return -1;
        }
        for (int e = 0; e < n; e++) {
            const int64_t *y = ds->y + (first + e) * S, *o = out + (size_t)e * (S + 1);
            int same = o[S] == SEQ2SEQ_EOS;
            for (int t = 0; t < S && same; t++) same = o[t] == y[t] + SEQ2SEQ_FIRST;
            right += same;
        }
    }
    free(out);
    *exact = ds->n ? (double)right / ds->n : 0.0;
    return 0;
}

/* ids as a line; a seq2seq output in its own ids (past the specials), up to
 * and with the <eos> that ends it, a special elsewhere by its name. */
static void print_ids(const char *label, const int64_t *ids, int n, int decoded)
{
    static const char *const specials[] = {"<pad>", "<sos>", "<eos>"};
    printf("  %-11s", label);
    for (int i = 0; i < n; i++) {
        if (!decoded) printf(" %" PRId64, ids[i]);
        else if (ids[i] >= SEQ2SEQ_FIRST) printf(" %" PRId64, ids[i] - SEQ2SEQ_FIRST);
        else printf(" %s", ids[i] >= 0 ? specials[ids[i]] : "?");
        if (decoded && ids[i] == SEQ2SEQ_EOS) break;
    }
    printf("\n");
}

/* The first head of encoder layer 0's self-attention for the last forward
 * on w, as "query key weight" blocks in dir/attention_map.dat. */
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
        for (int k = 0; k < S; k++) fprintf(out.f, "%d %d %.6f\n", q, k, att[(size_t)q * S + k]);
        fprintf(out.f, "\n");
    }
    snprintf(path, sizeof path, "%s/attention_map.dat", dir);
    return text_out_commit(&out, path, err);
}

/* A few held-out examples and, for the labeller, the attention map of the
 * first one (with --plot-data). */
static int show_examples(Model *m, const SeqDataset *test, Error *err)
{
    int seq2seq = m->cfg.kind == MODEL_SEQ2SEQ, S = test->seq_len;
    ModelWork w;
    if (model_work_alloc(&w, m, 1, S, seq2seq ? S + 1 : 0, 0, err) != 0) return -1;
    int rc = 0;
    printf("\nheld-out examples:\n");
    for (int e = 0; rc == 0 && e < 3 && e < test->n; e++) {
        const int64_t *x = test->x + (size_t)e * S;
        int64_t pred[256];
        print_ids("input", x, S, 0);
        print_ids("target", test->y + (size_t)e * S, S, 0);
        if (seq2seq) {
            rc = decode(m, x, 1, S, pred, err);
        } else if (model_forward(m, &w, x, NULL, NULL) != 0) {
            rc = error_set(err, "model_forward failed");
        } else {
            for (int t = 0; t < S; t++) {
                const float *row = w.logits + (size_t)t * m->cfg.tgt_vocab;
                int best = 0;
                for (int c = 1; c < m->cfg.tgt_vocab; c++) if (row[c] > row[best]) best = c;
                pred[t] = best;
            }
            if (e == 0 && rt.plot_data) rc = write_attention(rt.plot_data, &w, m, x, err);
        }
        if (rc == 0) print_ids("prediction", pred, seq2seq ? S + 1 : S, seq2seq);
        printf("\n");
    }
    model_work_free(&w);
    return rc;
}

static int report(TaskRun *r, Model *m, double *accuracy, Error *err)
{
    StepResult res;
    Examples test = examples_of_task(&rt.test, m->cfg.kind);
    if (evaluate(m, NULL, &test, r->o.batch_size, &res, err) != 0) return -1;
    *accuracy = (double)res.correct / (res.count ? res.count : 1);
    printf("\nheld-out: %" PRId64 " sequences, loss %.4f, token accuracy %.2f %%\n", rt.test.n,
           res.loss, 100.0 * *accuracy);
    if (m->cfg.kind == MODEL_SEQ2SEQ) {
        double exact = 0.0;
        if (greedy_exact_match(m, &rt.test, &exact, err) != 0) return -1;
        printf("greedy decoding: exact match %.2f %% of %" PRId64 " held-out sequences\n",
               100.0 * exact, rt.test.n);
    }
    return show_examples(m, &rt.test, err);
}

static int demo(int argc, char **argv, Error *err);

static const Option data_options[] = {
    {"--task", OPT_STRING, &rt.task, "reverse or copy"},
    {"--seq-len", OPT_INT, &rt.seq_len, "sequence length"},
    {"--categories", OPT_INT, &rt.categories, "token categories"},
    {"--train-size", OPT_INT, &rt.train_size, "training sequences"},
    {"--test-size", OPT_INT, &rt.test_size, "held-out sequences"},
};
static const Option train_options[] = {
    {"--model", OPT_STRING, &rt.model, "labeller (encoder-only) or seq2seq"},
    {"--plot-data", OPT_STRING, &rt.plot_data,
     "folder for train_log.csv (unless --log) and attention_map.dat"},
};
static const TaskCommand commands[] = {{"--demo", "", demo}};

static const Task reverse_task = {
    .program = "08_training",
    .about = "The reverse task of seeds 000 and 004: digits in, the same digits reversed out.",
    .defaults = defaults,
    .data_options = data_options, .n_data_options = 5,
    .train_options = train_options, .n_train_options = 2,
    .check = check,
    .open = open_data,
    .close = close_data,
    .config = config,
    .check_model = check_model,
    .report = report,
    .commands = commands, .n_commands = 1,
};

/* Two trainings: the seed's labeller, then the encoder-decoder. */
static int demo(int argc, char **argv, Error *err)
{
    if (argc != 0) return error_set(err, "--demo takes no arguments");
    TaskRun r = task_run_defaults(&reverse_task);
    rt.plot_data = "build/plots";
    r.o.checkpoint = "build/demo_reverse.safetensors";
    r.o.min_accuracy = 0.995;
    printf("The reverse task (seeds 000 and 004), trained from scratch in C.\n"
           "The seed's model and settings, with the learning-rate schedule stepped once per\n"
           "optimizer step (seed 004) instead of once per epoch (seed 000's loop).\n\n");
    if (task_train(&r, err) != 0) return -1;

    /* The same task as translation: the encoder-decoder reads the digits and
     * writes them reversed, one token at a time, decoded greedily. */
    r = task_run_defaults(&reverse_task);
    rt.plot_data = NULL;
    rt.model = "seq2seq";
    r.o.heads = 2;
    r.o.epochs = 3;
    r.o.checkpoint = "build/demo_seq2seq.safetensors";
    r.o.min_accuracy = 0.995;
    printf("\n\nThe same task with the encoder-decoder of chapter 07: <sos> + the reversed\n"
           "digits + <eos>, generated by greedy decoding (2 heads, 3 epochs).\n\n");
    return task_train(&r, err);
}

static int no_demo(void) { return -1; }

int main(int argc, char **argv)
{
    set_task_defaults();
    if (argc >= 2 && strcmp(argv[1], "--case") == 0)
        return case_main(argc, argv, CASE_USAGE, no_demo, training_case_eval);
    return task_main(&reverse_task, argc, argv);
}
