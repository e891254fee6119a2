/*
 * 11_set_anomaly.c - the chapter 11 program: seed 004's set anomaly detection. A set
 * of ten handwritten digits holds nine of one digit and one of another; an
 * encoder without positional encoding scores every element, and a softmax
 * over the set says which one does not belong.
 *
 *     build/11_set_anomaly --train [options]          train (--train --help lists them)
 *     build/11_set_anomaly --eval MODEL [options]     accuracy on the test sets
 *     build/11_set_anomaly --demo                     the shipped model on a few test sets
 *     build/11_set_anomaly --plot-data DIR            one test set's digits, scores and
 *                                                     attention, for make plots
 *
 * The training command is the one every task program shares (runtime/
 * task.h). digits.h has the data, the split and how a set is drawn; the
 * model is chapter 07's MODEL_SET and the training chapter 08's.
 */
#include <stdio.h>

#include "set_commands.h"
#include "task.h"

/* The task's own options and its data. */
static const char *data_path = DIGITS_PATH;
static int train_sets = 20000, test_sets = 1000;
static SetData sets;

static void defaults(RunOptions *o)
{
    o->train.epochs = 20;
    o->optimizer = "adamw";
    o->train.adam.weight_decay = 0.01f;
    o->train.adam.lr = 5e-4f;
    o->train.warmup = 100;
    o->train.max_norm = 1.0f;
    o->dropout = 0.1;
}

static int check(TaskRun *r, Error *err)
{
    if (test_sets < 1 || (r->training && train_sets < 1))
        return error_set(err, "--train-sets and --test-sets need at least 1");
    return 0;
}

static int inputs(const TaskRun *r, RunPath *paths, int max)
{
    paths[0] = (RunPath){"--data", data_path, NULL};
    return 1;
}

/* validation: the test sets (shown, not used to choose anything) */
static int open_data(TaskRun *r, Error *err)
{
    if (set_data_open(&sets, data_path, r->training ? train_sets : 0, test_sets, err) != 0)
        return -1;
    r->train = digit_set_examples(&sets.train);
    r->val = digit_set_examples(&sets.test);
    return 0;
}

static void close_data(TaskRun *r)
{
    set_data_free(&sets);
}

static void config(const TaskRun *r, ModelConfig *c, ConfigOptions *names)
{
    c->kind = MODEL_SET;
    c->src_vocab = 0;
    c->tgt_vocab = 1;
    c->input_dim = DIGIT_PIXELS;
    c->max_len = SET_SIZE;
}

static int check_model(const TaskRun *r, const Model *m, const char *path, Error *err)
{
    return set_check_model(m, path, err);
}

static int report(TaskRun *r, Model *m, double *acc, Error *err)
{
    return set_report(m, &sets.test, acc, err);
}

static const Option data_options[] = {
    {"--data", OPT_STRING, &data_path, "the exported digits"},
    {"--test-sets", OPT_INT, &test_sets, "sets drawn from the test images"},
};
static const Option train_options[] = {
    {"--train-sets", OPT_INT, &train_sets, "sets drawn from the training images"},
};
static const TaskCommand commands[] = {
    {"--demo", "", set_demo_command},
    {"--plot-data", "DIR", set_plot_data_command},
};

static const Task set_task = {
    .program = "11_set_anomaly",
    .about = "The set-anomaly task: which digit of a set of ten does not belong?",
    .defaults = defaults,
    .data_options = data_options, .n_data_options = 2,
    .train_options = train_options, .n_train_options = 1,
    .check = check,
    .inputs = inputs,
    .open = open_data,
    .close = close_data,
    .config = config,
    .check_model = check_model,
    .report = report,
    .commands = commands, .n_commands = 2,
};

int main(int argc, char **argv)
{
    return task_main(&set_task, argc, argv);
}
