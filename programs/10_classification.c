/*
 * 10_classification.c - the chapter 10 program: seed 003's sentiment classifier trained
 * in C on the IMDb reviews, tested on held-out IMDb reviews and on Rotten
 * Tomatoes sentences.
 *
 *     build/10_classification --train [options]          train (--train --help lists them)
 *     build/10_classification --eval MODEL [options]     accuracy on both test sets
 *     build/10_classification --classify MODEL TEXT      the class of one text
 *     build/10_classification --demo                     the shipped model on a few reviews
 *
 * The training command is the one every task program shares (runtime/
 * task.h). The reviews are read from .data/imdb (make imdb fetches them);
 * imdb.h has the data and the tokenizer, chapter 01's byte-level BPE
 * trained here on the training reviews.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "imdb_commands.h"
#include "imdb.h"
#include "task.h"

/* The task's own options and its data. */
static const char *data_dir = ".data/imdb";
static int vocab_size = 8192, max_len = 512, bpe_reviews = 0;
static Imdb imdb;
static char paths[2][4096];

static void defaults(RunOptions *o)
{
    o->train.epochs = 5;
    o->optimizer = "adamw";
    o->train.warmup = 300;
    o->train.max_norm = 1.0f;
    o->train.adam.weight_decay = 0.01f;
    o->train.bucket = 50;
    o->dropout = 0.1;
}

static void config(const TaskRun *r, ModelConfig *c, ConfigOptions *names)
{
    c->kind = MODEL_CLASSIFIER;
    c->src_vocab = vocab_size;
    c->tgt_vocab = 2;
    c->max_len = max_len;
    c->learned_pos = 1;         /* the notebook: token and learned position embeddings */
    c->pad_id = TOKEN_PAD;
    *names = (ConfigOptions){NULL, {{"src_vocab", "--vocab-size"}, {"max_len", "--max-len"}}};
}

/* The sizes before the data: training the tokenizer alone takes a minute. */
static int check(TaskRun *r, Error *err)
{
    ModelConfig c;
    ConfigOptions names;
    if (max_len < 1 || max_len > MODEL_MAX_LEN)
        return error_set(err, "--max-len %d is not in 1..%d", max_len, MODEL_MAX_LEN);
    if (bpe_reviews < 0) return error_set(err, "--bpe-reviews: %d is negative", bpe_reviews);
    if (vocab_size < 1 || vocab_size > 1 << 20)
        return error_set(err, "--vocab-size %d is not in 1..%d", vocab_size, 1 << 20);
    if (!r->training) return 0;
    task_config(r, &c, &names);
    return options_check_config(&c, &names, err);
}

static int inputs(const TaskRun *r, RunPath *out, int max)
{
    snprintf(paths[0], sizeof paths[0], "%s/imdb.tsv", data_dir);
    snprintf(paths[1], sizeof paths[1], "%s/rotten_tomatoes.tsv", data_dir);
    out[0] = (RunPath){"--data", paths[0], NULL};
    out[1] = (RunPath){"--data", paths[1], NULL};
    return 2;
}

/* Training: the reviews, the tokenizer (learned, or the one --resume
 * carries) and the rows. --eval: the test sets and MODEL's tokenizer. */
static int open_data(TaskRun *r, Error *err)
{
    Model m;
    int S;
    if (!r->training) {
        if (imdb_open_eval(&imdb, &m, r->model_path, data_dir, err) != 0) return -1;
        model_free(&m);         /* task_load_model reads it again */
        return 0;
    }
    if (imdb_read(&imdb, data_dir, 1, err) != 0) return -1;
    printf("%s: %" PRId64 " IMDb reviews train, %" PRId64 " validate, %" PRId64 " test; %"
           PRId64 " Rotten Tomatoes sentences\n", data_dir, imdb.train.n, imdb.val.n,
           imdb.test.n, imdb.rt.n);
    if (r->o.resume) {
        if (imdb_load_classifier(&m, &imdb.bpe, &S, r->o.resume, err) != 0) return -1;
        imdb.have_bpe = 1;
        model_free(&m);
        printf("the tokenizer of %s: %d ids\n", r->o.resume, imdb.bpe.vocab.size);
    } else {
        if (imdb_train_bpe(&imdb, bpe_reviews, vocab_size, err) != 0) return -1;
        if (imdb.bpe.vocab.size != vocab_size)
            return error_set(err, "--vocab-size %d: the reviews give only %d ids (no pair left "
                             "occurs twice)", vocab_size, imdb.bpe.vocab.size);
    }
    if (imdb_encode(&imdb, max_len, err) != 0 || imdb_tokenizer_meta(&imdb, max_len, err) != 0)
        return -1;
    r->meta = imdb.meta;
    r->train = review_examples(&imdb.train_rows, imdb.bpe.vocab.size);
    /* validation: 2,000 of the training reviews; the test reviews are
     * measured once, by report() at the end */
    r->val = review_examples(&imdb.val_rows, imdb.bpe.vocab.size);
    return 0;
}

static void close_data(TaskRun *r)
{
    imdb_free(&imdb);
}

static int check_model(const TaskRun *r, const Model *m, const char *path, Error *err)
{
    if (m->cfg.kind != MODEL_CLASSIFIER || m->cfg.tgt_vocab != 2 ||
        m->cfg.src_vocab != imdb.bpe.vocab.size || m->cfg.max_len < imdb.test_rows.S)
        return error_set(err, "%s: not a two-class classifier over its %d BPE ids with max_len "
                         ">= %d", path, imdb.bpe.vocab.size, imdb.test_rows.S);
    return 0;
}

/* IMDb test accuracy (--eval: by class and length too), and Rotten Tomatoes. */
static int report(TaskRun *r, Model *m, double *acc, Error *err)
{
    double rt;
    if (imdb_report(m, &imdb.test_rows, "IMDb test", acc, err) != 0) return -1;
    if (!r->training && imdb_report_parts(m, &imdb.test_rows, err) != 0) return -1;
    return imdb_report(m, &imdb.rt_rows, "Rotten Tomatoes", &rt, err);
}

static const Option data_options[] = {
    {"--data", OPT_STRING, &data_dir, "the folder of imdb.tsv and rotten_tomatoes.tsv "
     "(make imdb)"},
};
static const Option train_options[] = {
    {"--vocab-size", OPT_INT, &vocab_size, "BPE ids, specials and bytes included"},
    {"--bpe-reviews", OPT_INT, &bpe_reviews,
     "train the BPE on the first N training reviews (0: all 18,000)"},
    {"--max-len", OPT_INT, &max_len, "tokens kept of each review"},
};
static const TaskCommand commands[] = {
    {"--classify", "MODEL TEXT", classify_command},
    {"--demo", "", imdb_demo_command},
};

static const Task imdb_task = {
    .program = "10_classification",
    .about = "The IMDb classifier: is a movie review positive or negative?",
    .defaults = defaults,
    .data_options = data_options, .n_data_options = 1,
    .train_options = train_options, .n_train_options = 3,
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
    return task_main(&imdb_task, argc, argv);
}
