/*
 * 09_translation.c - the chapter 09 program: seed 002's Taylor-series translation,
 * or any file of source|target pairs.
 *
 *     build/09_translation --train [options]        train (--train --help lists the options)
 *     build/09_translation --eval MODEL [options]   exact match on the test split
 *     build/09_translation --translate MODEL TEXT   translate one source
 *     build/09_translation --demo                   the shipped model on a few test pairs
 *     build/09_translation --bench-decode MODEL [N] greedy decoding of N sources to the full
 *                                                   target length, with and without the cache
 *     build/09_translation --plot-data DIR          the shipped model's training logs and a
 *                                                   cross-attention map, for make plots
 *
 * The training command is the one every task program shares (runtime/
 * task.h). The defaults are the Taylor task: reference/data/taylor's
 * pairs, the Taylor tokenizers of chapter 01, the seed's limits and split,
 * the seed's model (d_model 64, 2 + 2 layers, 8 heads, FFN 128, learned
 * positions, a learned embedding scale), and the recipe of the shipped
 * model, under an hour on two cores: 320 epochs, peak learning rate 4e-3,
 * no dropout (the seed's is --dropout 0.1). taylor_commands.c has the
 * commands around the shipped model.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "taylor_commands.h"
#include "task.h"
#include "translate.h"

/* The task's own options and its data. */
static TaskData data;
static int beam = 1;
static double length_penalty = 1.0;
static Translation pairs;

static void defaults(RunOptions *o)
{
    o->train.epochs = 320;
    o->train.adam.lr = 4e-3f;
    o->train.warmup = 1000;
    o->eval_every = 5;
    o->train.bucket = 50;
    o->heads = 8;
    o->dropout = 0.0;
}

static int inputs(const TaskRun *r, RunPath *paths, int max)
{
    paths[0] = (RunPath){"--data", data.data, NULL};
    return 1;
}

static int open_data(TaskRun *r, Error *err)
{
    if (task_load(&pairs, &data, err) != 0) return -1;
    printf("%s: %" PRId64 " pairs within %d source and %d target tokens (%" PRId64
           " skipped): %" PRId64 " train, %" PRId64 " validate, %" PRId64 " test\n",
           data.data, pairs.train.n + pairs.val.n + pairs.test.n, data.max_src, data.max_tgt,
           pairs.skipped, pairs.train.n, pairs.val.n, pairs.test.n);
    int vs = tokenizer_vocab(&pairs.src_tok)->size, vt = tokenizer_vocab(&pairs.tgt_tok)->size;
    r->train = pairs_examples(&pairs.train, vs, vt);
    r->val = pairs_examples(&pairs.val, vs, vt);
    return 0;
}

static void close_data(TaskRun *r)
{
    task_free(&pairs);
}

static void config(const TaskRun *r, ModelConfig *c, ConfigOptions *names)
{
    c->kind = MODEL_SEQ2SEQ;
    c->src_vocab = tokenizer_vocab(&pairs.src_tok)->size;
    c->tgt_vocab = tokenizer_vocab(&pairs.tgt_tok)->size;
    c->num_decoder_layers = r->o.layers;
    c->max_len = pairs.train.S > pairs.train.T ? pairs.train.S : pairs.train.T;
    c->learned_pos = 1;         /* the notebook: nn.Embedding(max_len, emb_dim) */
    c->scale_embedding = 2;     /* and a learned scale that starts at sqrt(d_model) */
    c->pad_id = TOKEN_PAD;
    *names = (ConfigOptions){NULL, {{"src_vocab", "--tokenizer, --vocab-size"},
                                    {"tgt_vocab", "--tokenizer, --vocab-size"},
                                    {"max_len", "--max-src, --max-tgt"}}};
}

static int check_model(const TaskRun *r, const Model *m, const char *path, Error *err)
{
    return translation_check_model(&pairs, m, path, err);
}

/* Greedy exact match on the validation pairs. */
static int validation_round(TaskRun *r, Model *m, double *exact, Error *err)
{
    DecodeOptions d = task_decoding(&pairs.val, 1, 1.0f);
    return report_exact(m, &pairs, &pairs.val, "validation", &d, 0, exact, err);
}

/* Greedy exact match on the test pairs, with the kinds of miss; --eval
 * --beam K (or 0: greedy and then beam 4) decodes by beam search too. */
static int report(TaskRun *r, Model *m, double *exact, Error *err)
{
    if (beam < 0) return error_set(err, "--beam: %d is negative", beam);
    int greedy = r->training || beam <= 1, rc = 0;
    DecodeOptions d = task_decoding(&pairs.test, 1, (float)length_penalty);
    if (greedy) rc = report_exact(m, &pairs, &pairs.test, "test", &d, 1, exact, err);
    if (rc == 0 && !r->training && beam != 1) {
        double beamed;
        d.beam_width = beam ? beam : 4;
        rc = report_exact(m, &pairs, &pairs.test, "test", &d, 1, &beamed, err);
        if (!greedy) *exact = beamed;
    }
    return rc;
}

static const Option data_options[] = {
    {"--data", OPT_STRING, &data.data, "the file of source|target lines ('-': stdin)"},
    {"--tokenizer", OPT_STRING, &data.tokenizer, "taylor, char, word or bpe"},
    {"--vocab-size", OPT_INT, &data.vocab_size, "bpe: ids per side"},
    {"--max-src", OPT_INT, &data.max_src, "skip pairs with more source tokens"},
    {"--max-tgt", OPT_INT, &data.max_tgt, "skip pairs with more target tokens"},
    {"--train-size", OPT_INT, &data.train_size, "the first pairs train"},
    {"--val-size", OPT_INT, &data.val_size, "the next ones validate; the rest is the test"},
};
static const Option eval_options[] = {
    {"--beam", OPT_INT, &beam, "beam width (1: greedy; 0: greedy and beam 4)"},
    {"--length-penalty", OPT_DOUBLE, &length_penalty, "beam search's alpha"},
};
static const TaskCommand commands[] = {
    {"--translate", "MODEL TEXT [--beam K]", translate_command},
    {"--demo", "", taylor_demo_command},
    {"--bench-decode", "MODEL [N]", bench_decode_command},
    {"--plot-data", "DIR", taylor_plot_data_command},
};

static const Task taylor_task = {
    .program = "09_translation",
    .about = "The Taylor-series task: the series of a function to O(x**6), token by token.",
    .defaults = defaults,
    .data_options = data_options, .n_data_options = 7,
    .eval_options = eval_options, .n_eval_options = 2,
    .inputs = inputs,
    .open = open_data,
    .close = close_data,
    .config = config,
    .check_model = check_model,
    .round = validation_round, .round_column = "val_exact", .round_log_suffix = ".exact.csv",
    .report = report,
    .commands = commands, .n_commands = 4,
};

int main(int argc, char **argv)
{
    data = task_defaults();
    return task_main(&taylor_task, argc, argv);
}
