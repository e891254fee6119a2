/*
 * 12_generation.c - the chapter 12 program: the decoder-only Transformer that seed
 * 003 announces, a byte-level language model trained in C on the IMDb
 * training reviews and measured in bits per byte on the test reviews.
 *
 *     build/12_generation --train [options]          train (--train --help lists them)
 *     build/12_generation --eval MODEL [options]     bits per byte of the test reviews
 *     build/12_generation --generate MODEL PROMPT [options]   write a review
 *     build/12_generation --bench-generate MODEL [N] N bytes with and without the cache
 *     build/12_generation --demo                     the shipped model writes a few reviews
 *     build/12_generation --plot-data DIR            its training log, for make plots
 *     build/12_generation --case in.safetensors --out out.safetensors
 *
 * The training command is the one every task program shares (runtime/
 * task.h). lm_text.h has the data and the measure, generate.h the writing;
 * the model is chapter 07's MODEL_LM. The case mode evaluates this
 * chapter's exercises (cases/generation_case.h).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>   /* isatty */

#include "casefile.h"
#include "generate.h"
#include "generation_case.h"
#include "lm_text.h"
#include "progress.h"
#include "task.h"
#include "terminal.h"
#include "threads.h"   /* time_now() */
#include "model_file.h"

static const char CASE_USAGE[] =
    "usage: 12_generation --case IN.safetensors --out OUT.safetensors\n"
    "       12_generation --help   (the task's commands)\n";

#define SHIPPED_MODEL "models/imdb_lm.safetensors"
#define SHIPPED_LOG "models/imdb_lm_train_log.csv"

/* The task's own options and its data. */
static const char *data_dir = ".data/imdb";
static int context = 256, stride = 0, train_reviews = 0, test_reviews = 0, windows_per_pass = 32;
static double max_bpb = 0.0;
static LmText text;
static LmWindows train_windows, val_windows;
static char data_path[4096];

/* The recipe of the shipped model: two passes over the training bytes in
 * 57 minutes on two cores (the chapter's README has the run). */
static void defaults(RunOptions *o)
{
    o->train.epochs = 2;
    o->train.batch_size = 16;             /* 16 windows of 256 bytes: 4,096 predictions a step */
    o->train.validate_every = 1500;       /* the held-out curve: 8 points, the epochs' ends too */
    o->optimizer = "adamw";
    o->train.adam.weight_decay = 0.01f;
    o->train.adam.lr = 2e-3f;
    o->train.warmup = 200;
    o->train.max_norm = 1.0f;
    o->dropout = 0.0;
    o->d_model = 128;
    o->heads = 4;
    o->layers = 4;
    o->ffn = 512;
    o->norm_first = 1;          /* GPT-2's pre-norm, with a final norm */
}

static void config(const TaskRun *r, ModelConfig *c, ConfigOptions *names)
{
    c->kind = MODEL_LM;
    c->src_vocab = c->tgt_vocab = LM_VOCAB;
    c->max_len = context;
    c->learned_pos = 1;         /* Bloem's and GPT's learned positions */
    c->final_norm = 1;
    c->pad_id = -1;             /* windows of text: nothing is padding */
    *names = (ConfigOptions){NULL, {{"max_len", "--context"}}};
}

/* The stride of the measure: --stride, or half the context. */
static int measure_stride(int max_len)
{
    return stride ? stride : (max_len + 1) / 2;
}

static int check(TaskRun *r, Error *err)
{
    ModelConfig c;
    ConfigOptions names;
    if (context < 2 || context > MODEL_MAX_LEN)
        return error_set(err, "--context %d is not in 2..%d", context, MODEL_MAX_LEN);
    if (stride < 0) return error_set(err, "--stride %d is negative (0: half the context)", stride);
    /* The report's measure (lm_bits) refuses a stride longer than the
     * context; a training run learns that here, not after its last epoch. */
    if (r->training && stride > context)
        return error_set(err, "--stride %d is longer than --context %d (at most the context; "
                         "0: half of it)", stride, context);
    if (train_reviews < 0 || train_reviews > 20000)
        return error_set(err, "--train-reviews %d is not in 0..20000 (0: all)", train_reviews);
    if (test_reviews < 0 || test_reviews > 5000)
        return error_set(err, "--test-reviews %d is not in 0..5000 (0: all)", test_reviews);
    if (windows_per_pass < 1 || windows_per_pass > 4096)
        return error_set(err, "--eval-batch %d is not in 1..4096", windows_per_pass);
    if (!(max_bpb >= 0.0 && max_bpb <= 8.0))
        return error_set(err, "--max-bpb %g is not in 0..8 (0: no bound)", max_bpb);
    if (r->o.min_accuracy > 0)
        return error_set(err, "--min-accuracy: a language model has no accuracy; bound its "
                         "bits per byte with --max-bpb");
    if (!r->training) return 0;
    if (r->o.no_test && max_bpb > 0)
        return error_set(err, "--max-bpb bounds the test bits per byte, which --no-test does not "
                         "measure");
    task_config(r, &c, &names);
    return options_check_config(&c, &names, err);
}

static int inputs(const TaskRun *r, RunPath *paths, int max)
{
    snprintf(data_path, sizeof data_path, "%s/imdb.tsv", data_dir);
    paths[0] = (RunPath){"--data", data_path, NULL};
    return 1;
}

static int open_data(TaskRun *r, Error *err)
{
    if (lm_text_read(&text, data_dir, r->training ? train_reviews : -1, test_reviews, err) != 0)
        return -1;
    if (!r->training) return 0;
    /* The measure's other bound: a window's bytes must be there (few short
     * test reviews can hold fewer than the stride). */
    int R = measure_stride(context);
    if ((int64_t)text.test.len - 1 < R)
        return error_set(err, "%s: the %" PRId64 " test review(s) hold %zu bytes to predict, "
                         "fewer than the stride of %d (--stride, --context, --test-reviews)",
                         data_path, text.n_test, text.test.len - 1, R);
    printf("%s: %" PRId64 " training reviews (%.1f MB), %" PRId64 " validation (%.1f MB), %"
           PRId64 " test (%.1f MB)\n", data_dir, text.n_train, text.train.len / 1e6,
           text.n_val, text.val.len / 1e6, text.n_test, text.test.len / 1e6);
    r->train = lm_examples(&train_windows, &text.train, context);
    r->val = lm_examples(&val_windows, &text.val, context);
    return 0;
}

static void close_data(TaskRun *r)
{
    lm_text_free(&text);
}

static int check_model(const TaskRun *r, const Model *m, const char *path, Error *err)
{
    if (m->cfg.kind != MODEL_LM || m->cfg.tgt_vocab != LM_VOCAB)
        return error_set(err, "%s: not a byte-level language model (model.kind %s, %d ids)",
                         path, model_kind_name(m->cfg.kind), m->cfg.tgt_vocab);
    return 0;
}

/* Bits per byte of the test reviews, bounded by --max-bpb (a language
 * model has no accuracy for --min-accuracy). */
static int report(TaskRun *r, Model *m, double *acc, Error *err)
{
    double bits, started = time_now();
    int64_t bytes;
    int R = measure_stride(m->cfg.max_len);
    if (lm_bits(m, &text.test, R, windows_per_pass, &bits, &bytes, err) != 0) return -1;
    printf("test reviews: %" PRId64 " reviews, %" PRId64 " bytes, %.4f bits per byte "
           "(context %d, stride %d, %.0f s)\n", text.n_test, bytes, bits / bytes,
           m->cfg.max_len, R, time_now() - started);
    printf("{\"reviews\": %" PRId64 ", \"bytes\": %" PRId64 ", \"bits_per_byte\": %.6f}\n",
           text.n_test, bytes, bits / bytes);
    *acc = 1.0;
    if (max_bpb > 0 && !(bits / bytes <= max_bpb))
        return error_set(err, "%.4f bits per byte is above --max-bpb %.4f", bits / bytes,
                         max_bpb);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Writing                                                                   */
/* ------------------------------------------------------------------------ */

static int load_lm(Model *m, const char *path, Error *err)
{
    if (model_load(m, path, err) != 0) return -1;
    if (check_model(NULL, m, path, err) != 0) {
        model_free(m);
        return -1;
    }
    return 0;
}

/* The prompt and what the model wrote after it, and a newline. The bytes
 * are the model's (random ones at a high temperature): on a terminal those
 * it would obey are shown escaped (terminal.h), elsewhere they go out as
 * they are. */
static void print_text(const char *prompt, const Text *out)
{
    terminal_write(stdout, prompt, strlen(prompt));
    terminal_write(stdout, out->data, out->len);
    putchar('\n');
}

/* lm_generate's count of the bytes written, to the progress line. */
static void show_count(void *ctx, int64_t bytes)
{
    progress_count(ctx, bytes);
}

static int generate_command(int argc, char **argv, Error *err)
{
    double temperature = 0.8, top_p = 1.0;
    int top_k = 0, length = 400, seed = 1, no_cache = 0;
    const Option opts[] = {
        {"--temperature", OPT_DOUBLE, &temperature, "divides the logits (0: the likeliest byte)"},
        {"--top-k", OPT_INT, &top_k, "draw among the K likeliest bytes (0: all)"},
        {"--top-p", OPT_DOUBLE, &top_p, "draw among the fewest bytes holding this much "
         "probability (1: all)"},
        {"--length", OPT_INT, &length, "bytes to write"},
        {"--seed", OPT_INT, &seed, "the draws' seed"},
        {"--no-cache", OPT_FLAG, &no_cache, "run the whole context every step"},
    };
    int n = sizeof opts / sizeof opts[0];
    if (argc >= 1 && strcmp(argv[0], "--help") == 0) {
        printf("usage: 12_generation --generate MODEL PROMPT [options]\n");
        print_options(stdout, opts, n);
        return 0;
    }
    if (argc < 2) return error_set(err, "give the model and a prompt: --generate MODEL PROMPT");
    if (parse_options(opts, n, argc, argv, 2, err) != 0) return -1;
    if (length < 1 || length > 1000000)
        return error_set(err, "--length %d is not in 1..1000000", length);
    Model m;
    if (load_lm(&m, argv[0], err) != 0) return -1;
    /* A long text takes minutes: on a terminal a line on stderr shows how
     * far it is. Not elsewhere: stderr in a file or a pipe keeps only what
     * went wrong. */
    Progress shown;
    int show = isatty(fileno(stderr));
    if (show) progress_init_count(&shown, stderr, length, "bytes");
    GenerateOptions g = {{(float)temperature, top_k, (float)top_p}, length, (uint64_t)seed,
                         no_cache, show ? show_count : NULL, &shown};
    Text out = {0};
    int rc = lm_generate(&m, argv[1], &g, &out, err);
    if (show) progress_finish(&shown);
    if (rc == 0) print_text(argv[1], &out);
    text_free(&out);
    model_free(&m);
    return rc;
}

/* The key/value cache against the whole context every step: the same
 * bytes, and the time of each. */
static int bench_generate_command(int argc, char **argv, Error *err)
{
    char *end = NULL;
    long n = argc == 2 ? strtol(argv[1], &end, 10) : 0;
    if (argc < 1 || argc > 2) return error_set(err, "give the model: --bench-generate MODEL [N]");
    if (argc == 2 && (*end || end == argv[1] || n < 1 || n > 100000))
        return error_set(err, "N '%s' is not in 1..100000", argv[1]);
    Model m;
    if (load_lm(&m, argv[0], err) != 0) return -1;
    if (argc < 2) n = m.cfg.max_len - 1 - (int)strlen("This movie");
    Text out[2] = {{0}, {0}};
    double ms[2];
    int rc = 0;
    for (int cached = 0; rc == 0 && cached < 2; cached++) {
        GenerateOptions g = {{1.0f, 0, 1.0f}, (int)n, 7, !cached, NULL, NULL};
        double started = time_now();
        rc = lm_generate(&m, "This movie", &g, &out[cached], err);
        ms[cached] = (time_now() - started) * 1e3;
    }
    if (rc == 0)
        printf("{\"bytes\": %ld, \"ms_no_cache\": %.1f, \"ms_cache\": %.1f, \"speedup\": %.2f, "
               "\"same_bytes\": %s}\n", n, ms[0], ms[1], ms[0] / ms[1],
               out[0].len == out[1].len && memcmp(out[0].data, out[1].data, out[0].len) == 0
                   ? "true" : "false");
    text_free(&out[0]), text_free(&out[1]);
    model_free(&m);
    return rc;
}

/* The shipped model starts a few reviews, at two temperatures. */
static int demo_command(int argc, char **argv, Error *err)
{
    static const char *const prompts[] = {"This movie was great", "This movie was awful",
                                          "I watched this film"};
    static const float temperatures[] = {0.5f, 1.0f};
    if (argc != 0) return error_set(err, "--demo takes no arguments");
    Model m;
    if (load_lm(&m, SHIPPED_MODEL, err) != 0) return -1;
    printf("%s, a byte-level Transformer (%zu parameters) trained on IMDb reviews, writes\n"
           "after three prompts at two temperatures (top-p 0.95, 300 bytes each):\n",
           SHIPPED_MODEL, m.num_params);
    int rc = 0;
    for (int t = 0; rc == 0 && t < 2; t++)
        for (int p = 0; rc == 0 && p < 3; p++) {
            GenerateOptions g = {{temperatures[t], 0, 0.95f}, 300, (uint64_t)(p + 1), 0, NULL, NULL};
            Text out = {0};
            rc = lm_generate(&m, prompts[p], &g, &out, err);
            if (rc == 0) {
                printf("\n[temperature %.1f] ", temperatures[t]);
                print_text(prompts[p], &out);
            }
            text_free(&out);
        }
    model_free(&m);
    return rc;
}

/* What the report after --train and --eval reads. */
/* The shipped model's training log, which plots/generation_bpb.gp draws
 * (with the compressors of plots/generation_compressors.dat). */
static int plot_data_command(int argc, char **argv, Error *err)
{
    char path[4096];
    if (argc != 1) return error_set(err, "give the folder: --plot-data DIR");
    if (make_dir(argv[0], err) != 0) return -1;
    snprintf(path, sizeof path, "%s/imdb_lm_train_log.csv", argv[0]);
    return file_copy(SHIPPED_LOG, path, err);
}

static const Option data_options[] = {
    {"--data", OPT_STRING, &data_dir, "the folder of imdb.tsv (make imdb)"},
    {"--test-reviews", OPT_INT, &test_reviews, "measure the first N test reviews (0: all 5,000)"},
    {"--stride", OPT_INT, &stride, "bytes between measuring windows (0: half the context)"},
    {"--eval-batch", OPT_INT, &windows_per_pass, "windows per forward pass of the measure"},
    {"--max-bpb", OPT_DOUBLE, &max_bpb, "exit 1 if the test bits per byte are above this "
     "(0: no bound)"},
};
static const Option train_options[] = {
    {"--context", OPT_INT, &context, "bytes the model sees (max_len)"},
    {"--train-reviews", OPT_INT, &train_reviews, "learn from the first N of the 20,000 training "
     "reviews, every 20th of them validating (0: all)"},
};
static const TaskCommand commands[] = {
    {"--generate", "MODEL PROMPT [--generate --help]", generate_command},
    {"--bench-generate", "MODEL [N]", bench_generate_command},
    {"--demo", "", demo_command},
    {"--plot-data", "DIR", plot_data_command},
};

static const Task lm_task = {
    .program = "12_generation",
    .about = "The language model: a decoder-only Transformer, a byte-level language "
             "model of IMDb reviews, measured in bits per byte.",
    .defaults = defaults,
    .data_options = data_options, .n_data_options = 5,
    .train_options = train_options, .n_train_options = 2,
    .check = check,
    .inputs = inputs,
    .open = open_data,
    .close = close_data,
    .config = config,
    .check_model = check_model,
    .report = report,
    .commands = commands, .n_commands = 4,
};

static int no_demo(void) { return -1; }

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "--case") == 0)
        return case_main(argc, argv, CASE_USAGE, no_demo, generation_case_eval);
    return task_main(&lm_task, argc, argv);
}
