/*
 * 08_training.c - the chapter 08 program: the reverse task of seeds 000 and 004
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
 * how it reports (reverse_report.h). The demo writes the loss log and an attention map into
 * build/plots for `make plots`. The case mode evaluates this chapter's ops
 * (cases/training_case.h has the list, reference/ch08_training.py makes
 * the cases).
 */
#include <stdio.h>
#include <string.h>

#include "casefile.h"
#include "data.h"
#include "paths.h"
#include "reverse_report.h"
#include "rng.h"
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
    o->train.epochs = 10;
    o->train.batch_size = 128;
    o->train.warmup = 50;                 /* seed 004's CosineWarmupScheduler */
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
    *names = (ConfigOptions){"--model", {{"src_vocab", "--categories"},
                                         {"tgt_vocab", "--categories"},
                                         {"max_len", "--seq-len"}}};
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

static int report(TaskRun *r, Model *m, double *accuracy, Error *err)
{
    return reverse_report(m, &rt.test, r->o.train.batch_size, rt.plot_data, accuracy, err);
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
    .about = "The reverse task: digits in, the same digits reversed out.",
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
    printf("The reverse task, trained from scratch in C.\n"
           "The notebooks' model and settings, with the learning-rate schedule stepped once\n"
           "per optimizer step (the UvA tutorial) instead of once per epoch (the course\n"
           "notebook's loop).\n\n");
    if (task_train(&r, err) != 0) return -1;

    /* The same task as translation: the encoder-decoder reads the digits and
     * writes them reversed, one token at a time, decoded greedily. */
    r = task_run_defaults(&reverse_task);
    rt.plot_data = NULL;
    rt.model = "seq2seq";
    r.o.heads = 2;
    r.o.train.epochs = 3;
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
