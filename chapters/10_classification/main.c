/*
 * main.c - the chapter 10 program: seed 003's sentiment classifier trained
 * in C on the IMDb reviews, tested on held-out IMDb reviews and on Rotten
 * Tomatoes sentences.
 *
 *     build/10_classification --train [options]          train (--train --help lists them)
 *     build/10_classification --eval MODEL [options]     accuracy on both test sets
 *     build/10_classification --classify MODEL TEXT      the class of one text
 *     build/10_classification --demo                     the shipped model on a few reviews
 *
 * The reviews are read from .data/imdb (make imdb fetches them); review.h
 * has the split, the clean-up and the framing. The tokenizer is chapter
 * 01's byte-level BPE, trained here on the training reviews; its merges
 * travel in the metadata of every checkpoint and model file (bpe.merges,
 * with review.max_len), so a model file is all --eval and --classify need
 * besides the reviews.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bpe.h"
#include "commands.h"
#include "model.h"
#include "optim.h"
#include "review.h"
#include "rng.h"
#include "safetensors.h"
#include "train_util.h"
#include "trainer.h"
#include "vocab.h"

#define SHIPPED_MODEL "models/imdb.safetensors"
#define META_MERGES "bpe.merges"
#define META_MAX_LEN "review.max_len"

static const char USAGE[] =
    "usage: 10_classification --train [options]         (--train --help lists the options)\n"
    "       10_classification --eval MODEL [options]    (--eval --help lists the options)\n"
    "       10_classification --classify MODEL TEXT\n"
    "       10_classification --demo\n";

typedef struct {
    const char *data;
    int vocab_size, max_len, bpe_reviews;
    int epochs, stop_after, batch_size, warmup, seed, bucket;
    int d_model, heads, layers, ffn;
    double lr, clip, label_smoothing, dropout, target_loss, min_accuracy;
    const char *schedule, *checkpoint, *resume, *out, *log, *device;
    int help;
} Args;

static Args defaults(void)
{
    Args a = {0};
    a.data = ".data/imdb";
    a.vocab_size = 8192;
    a.max_len = 512;
    a.bpe_reviews = 0;
    a.epochs = 5;
    a.batch_size = 32;
    a.lr = 1e-3;
    a.schedule = "cosine";
    a.warmup = 300;
    a.clip = 1.0;
    a.bucket = 50;
    a.d_model = 64;
    a.heads = 4;
    a.layers = 2;
    a.ffn = 128;
    a.dropout = 0.1;
    a.device = "cpu";
    return a;
}

#define DATA_OPTION(a)                                                                    \
    {"--data", OPT_STRING, &(a).data,                                                     \
     "the folder of imdb.tsv and rotten_tomatoes.tsv (default .data/imdb: make imdb)"}

#define TRAIN_OPTIONS(a) {                                                                \
    DATA_OPTION(a),                                                                       \
    {"--vocab-size", OPT_INT, &(a).vocab_size, "BPE ids, specials and bytes included "    \
     "(default 8192)"},                                                                   \
    {"--bpe-reviews", OPT_INT, &(a).bpe_reviews,                                          \
     "train the BPE on the first N training reviews (default 0: all 20,000)"},            \
    {"--max-len", OPT_INT, &(a).max_len, "tokens kept of each review (default 512)"},     \
    {"--epochs", OPT_INT, &(a).epochs, "epochs (default 5)"},                             \
    {"--stop-after", OPT_INT, &(a).stop_after, "stop after this epoch (its checkpoint "      \
     "written), as an interrupted run would; the schedule still spans --epochs"},          \
    {"--batch-size", OPT_INT, &(a).batch_size, "reviews per step (default 32)"},          \
    {"--bucket", OPT_INT, &(a).bucket,                                                    \
     "sort runs of this many batches by length (default 50; 0: plain shuffling)"},        \
    {"--lr", OPT_DOUBLE, &(a).lr, "peak learning rate of AdamW (default 1e-3)"},          \
    {"--schedule", OPT_STRING, &(a).schedule, "cosine, noam or constant (default cosine)"}, \
    {"--warmup", OPT_INT, &(a).warmup, "warm-up steps (default 300)"},                    \
    {"--clip", OPT_DOUBLE, &(a).clip, "clip the gradient norm to this (default 1; 0: off)"}, \
    {"--label-smoothing", OPT_DOUBLE, &(a).label_smoothing, "default 0"},                 \
    {"--d-model", OPT_INT, &(a).d_model, "default 64"},                                   \
    {"--heads", OPT_INT, &(a).heads, "default 4"},                                        \
    {"--layers", OPT_INT, &(a).layers, "encoder layers (default 2)"},                     \
    {"--ffn", OPT_INT, &(a).ffn, "feed-forward width (default 128)"},                     \
    {"--dropout", OPT_DOUBLE, &(a).dropout, "every dropout, attention weights too (default 0.1)"}, \
    {"--seed", OPT_INT, &(a).seed, "seed of weights, shuffling and dropout (default 0)"}, \
    {"--checkpoint", OPT_STRING, &(a).checkpoint, "write a checkpoint here after every epoch"}, \
    {"--resume", OPT_STRING, &(a).resume, "continue the run saved in this checkpoint"},   \
    {"--out", OPT_STRING, &(a).out, "save the trained model here (no optimizer state)"},  \
    {"--log", OPT_STRING, &(a).log, "the CSV loss log"},                                  \
    {"--device", OPT_STRING, &(a).device,                                                 \
     "cpu, or cuda: train on the GPU (build/cuda/10_classification; default cpu)"},       \
    {"--target-loss", OPT_DOUBLE, &(a).target_loss,                                       \
     "exit 1 if the last epoch's test loss ends above this"},                             \
    {"--help", OPT_FLAG, &(a).help, "this list"},                                         \
}

#define EVAL_OPTIONS(a) {                                                                 \
    DATA_OPTION(a),                                                                       \
    {"--min-accuracy", OPT_DOUBLE, &(a).min_accuracy,                                     \
     "exit 1 if the IMDb test accuracy is below this"},                                   \
    {"--help", OPT_FLAG, &(a).help, "this list"},                                         \
}

/* ------------------------------------------------------------------------ */
/* The data                                                                  */
/* ------------------------------------------------------------------------ */

typedef struct {
    ReviewSet train, test, rt;      /* cleaned */
    Bpe bpe;
    int have_bpe;
    ReviewRows train_rows, test_rows, rt_rows;
} Data;

static void data_free(Data *d)
{
    reviews_free(&d->train);
    reviews_free(&d->test);
    reviews_free(&d->rt);
    if (d->have_bpe) bpe_free(&d->bpe);
    review_rows_free(&d->train_rows);
    review_rows_free(&d->test_rows);
    review_rows_free(&d->rt_rows);
    memset(d, 0, sizeof *d);
}

/* Reads, cleans and splits the reviews of dir; the training reviews only
 * when with_train. */
static int data_read(Data *d, const char *dir, int with_train, Error *err)
{
    ReviewSet all = {0};
    char path[4096];
    memset(d, 0, sizeof *d);
    snprintf(path, sizeof path, "%s/imdb.tsv", dir);
    if (reviews_read(&all, path, err) != 0) return -1;
    if (all.n != 25000) {
        reviews_free(&all);
        return error_set(err, "%s: %" PRId64 " reviews, the IMDb set has 25000 (run make imdb "
                         "again)", path, all.n);
    }
    reviews_clean(&all);
    int rc = reviews_split(&all, &d->train, &d->test, err);
    reviews_free(&all);
    if (rc != 0) return -1;
    if (!with_train) reviews_free(&d->train);
    snprintf(path, sizeof path, "%s/rotten_tomatoes.tsv", dir);
    if (reviews_read(&d->rt, path, err) != 0) {
        data_free(d);
        return -1;
    }
    reviews_clean(&d->rt);
    return 0;
}

/* Trains the tokenizer on the first n training reviews (0: all). */
static int data_train_bpe(Data *d, int n, int vocab_size, Error *err)
{
    ReviewSet part = d->train;
    Text corpus = {0};
    if (n > 0 && n < part.n) part.n = n;
    if (reviews_corpus(&part, &corpus, err) != 0) return -1;
    double started = time_now();
    int rc = bpe_init(&d->bpe, err);
    if (rc == 0) {
        d->have_bpe = 1;
        rc = bpe_train(&d->bpe, corpus.data, corpus.len, vocab_size, err);
    }
    if (rc == 0)
        printf("BPE: %" PRId64 " merges learned on %" PRId64 " training reviews (%.1f MB) in "
               "%.1f s\n", d->bpe.n_merges, part.n, corpus.len / 1e6, time_now() - started);
    text_free(&corpus);
    return rc;
}

/* The rows of the test sets (and of the training set when it was read). */
static int data_encode(Data *d, int L, Error *err)
{
    double started = time_now();
    if ((d->train.n && review_rows(&d->train_rows, &d->train, &d->bpe, L, err) != 0) ||
        review_rows(&d->test_rows, &d->test, &d->bpe, L, err) != 0 ||
        review_rows(&d->rt_rows, &d->rt, &d->bpe, L, err) != 0)
        return -1;
    const ReviewRows *r = d->train.n ? &d->train_rows : &d->test_rows;
    printf("encoded in %.1f s: %.1f tokens a %s review on average; %d kept at most: %" PRId64
           " of %" PRId64 " %s reviews truncated\n", time_now() - started,
           (double)r->tokens / r->n, d->train.n ? "training" : "test", L, r->truncated, r->n,
           d->train.n ? "training" : "test");
    return 0;
}

/* The tokenizer and review length a model or checkpoint file carries. */
static int read_tokenizer(const TensorFile *f, Bpe *bpe, int *max_len, Error *err)
{
    const char *merges = tensorfile_meta(f, META_MERGES);
    long long L;
    if (!merges)
        return error_set(err, "%s: no metadata '%s' (not a model written by 10_classification)",
                         f->path, META_MERGES);
    if (tensorfile_meta_int(f, META_MAX_LEN, -1, &L, err) != 0) return -1;
    if (L < 1 || L > MODEL_MAX_LEN)
        return error_set(err, "%s: metadata '%s' is missing or not in 1..%d", f->path,
                         META_MAX_LEN, MODEL_MAX_LEN);
    *max_len = (int)L;
    return bpe_from_merges(bpe, merges, f->path, err);
}

/* The metadata pairs that carry the tokenizer: keys and values, NULL-ended.
 * merges and len_text are the caller's buffers. */
static int tokenizer_meta(const Bpe *bpe, int L, Text *merges, char *len_text, size_t cap,
                          const char *meta[5], Error *err)
{
    if (bpe_merges_text(bpe, merges, err) != 0) return -1;
    snprintf(len_text, cap, "%d", L);
    meta[0] = META_MERGES;
    meta[1] = (const char *)merges->data;
    meta[2] = META_MAX_LEN;
    meta[3] = len_text;
    meta[4] = NULL;
    return 0;
}

/* Writes the model (no optimizer state) with the tokenizer in its metadata. */
static int save_model(const Model *m, const char *const *meta, const char *path, Error *err)
{
    TensorFile f = {0};
    int rc = model_to_file(m, &f, err);
    for (int i = 0; rc == 0 && meta[i]; i += 2)
        rc = tensorfile_set_meta(&f, meta[i], meta[i + 1], err);
    if (rc == 0) rc = safetensors_write(path, &f, err);
    tensorfile_free(&f);
    return rc;
}

/* A classifier and its tokenizer from a model or checkpoint file. */
static int load_classifier(Model *m, Bpe *bpe, int *max_len, const char *path, Error *err)
{
    TensorFile f = {0};
    if (safetensors_read(path, &f, err) != 0) return -1;
    int rc = read_tokenizer(&f, bpe, max_len, err);
    if (rc == 0 && model_load_file(m, &f, 1, err) != 0) {
        bpe_free(bpe);
        rc = -1;
    }
    tensorfile_free(&f);
    if (rc == 0 && (m->cfg.kind != MODEL_CLASSIFIER || m->cfg.tgt_vocab != 2 ||
                    m->cfg.src_vocab != bpe->vocab.size || m->cfg.max_len < *max_len)) {
        error_set(err, "%s: not a two-class classifier over its %d BPE ids with max_len >= %d",
                  path, bpe->vocab.size, *max_len);
        model_free(m);
        bpe_free(bpe);
        rc = -1;
    }
    return rc;
}

/* Accuracy of m on rows, printed with its name; *acc receives it. */
static int report(Model *m, const ReviewRows *rows, const char *name, double *acc, Error *err)
{
    StepResult r;
    Examples ex = review_examples(rows, m->cfg.src_vocab);
    double started = time_now();
    if (evaluate(m, NULL, &ex, 64, &r, err) != 0) return -1;
    *acc = (double)r.correct / r.count;
    printf("%s: accuracy %.4f (%" PRId64 " of %" PRId64 "), loss %.4f, %.1f s\n", name, *acc,
           r.correct, r.count, r.loss, time_now() - started);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* --train                                                                   */
/* ------------------------------------------------------------------------ */

static ModelConfig model_config(const Args *a, int vocab)
{
    ModelConfig c = {0};
    c.kind = MODEL_CLASSIFIER;
    c.src_vocab = vocab;
    c.tgt_vocab = 2;
    c.d_model = a->d_model;
    c.nhead = a->heads;
    c.dim_feedforward = a->ffn;
    c.num_encoder_layers = a->layers;
    c.num_decoder_layers = 0;
    c.max_len = a->max_len;
    c.learned_pos = 1;          /* seed 003: token and learned position embeddings */
    c.scale_embedding = 0;
    c.final_norm = 0;
    c.norm_first = 0;
    c.pad_id = TOKEN_PAD;
    c.eps = 1e-5f;
    c.dropout = (float)a->dropout;
    return c;
}

static int run_train(Args *a, Error *err)
{
    Data d;
    Model m = {0};
    AdamState opt = {0};
    TrainState state = {0};
    StepDevice device = {0};
    StepResult val;
    Text merges = {0};
    char len_text[32];
    const char *meta[5];
    Rng rng;
    int rc = -1;

    TrainOptions o = {0};
    o.batch_size = a->batch_size;
    o.adam = adam_default_config(1);
    o.adam.lr = (float)a->lr;
    if (schedule_parse(a->schedule, &o.schedule, err) != 0) return -1;
    if (a->epochs < 1 || a->batch_size < 1 || a->warmup < 0 || a->seed < 0 || a->bucket < 0 ||
        a->bpe_reviews < 0 || a->stop_after < 0)
        return error_set(err, "--epochs and --batch-size need at least 1, --warmup, --bucket, "
                              "--bpe-reviews, --stop-after and --seed at least 0");
    if (!(a->lr >= 0) || !(a->clip >= 0) || !(a->label_smoothing >= 0 && a->label_smoothing <= 1))
        return error_set(err, "--lr and --clip must not be negative, --label-smoothing lies "
                              "in [0, 1]");
    if (a->max_len < 1 || a->max_len > MODEL_MAX_LEN)
        return error_set(err, "--max-len %d is not in 1..%d", a->max_len, MODEL_MAX_LEN);
    o.warmup = a->warmup;
    o.bucket = a->bucket;
    o.max_norm = (float)a->clip;
    o.label_smoothing = (float)a->label_smoothing;
    o.checkpoint = a->checkpoint;
    o.log_path = a->log;
    if (adam_config_check(&o.adam, err) != 0 || command_check_device(a->device, err) != 0)
        return -1;
    if ((a->checkpoint && check_output_path("--checkpoint", a->checkpoint, err) != 0) ||
        (a->out && check_output_path("--out", a->out, err) != 0) ||
        (a->log && check_output_path("--log", a->log, err) != 0))
        return -1;
    /* The sizes before the data: training the tokenizer alone takes a minute.
     * (The vocabulary is --vocab-size, or the run stops below.) */
    static const ConfigOptions names = {NULL, "--vocab-size", "--d-model", "--heads", "--ffn",
                                        "--layers", "--max-len", NULL, "--dropout"};
    ModelConfig cfg = model_config(a, a->vocab_size);
    if (options_check_config(&cfg, &names, err) != 0) return -1;
    if (data_read(&d, a->data, 1, err) != 0) return -1;
    printf("%s: %" PRId64 " IMDb reviews train, %" PRId64 " test; %" PRId64
           " Rotten Tomatoes sentences\n", a->data, d.train.n, d.test.n, d.rt.n);

    if (a->resume) {
        int L;
        if (load_classifier(&m, &d.bpe, &L, a->resume, err) != 0) goto done;
        d.have_bpe = 1;
        model_free(&m);
        if (checkpoint_load(a->resume, &m, &opt, &state, err) != 0 ||
            checkpoint_check_config(a->resume, &m.cfg, &cfg, &names, err) != 0)
            goto done;
        if (state.epoch >= a->epochs) {
            error_set(err, "--resume: %s is at epoch %" PRId64 "; --epochs %d leaves nothing "
                      "to train (a longer run needs more epochs)", a->resume, state.epoch,
                      a->epochs);
            goto done;
        }
        printf("resuming %s after epoch %" PRId64 " (step %" PRId64 "), its tokenizer of %d "
               "ids\n", a->resume, state.epoch, opt.step, d.bpe.vocab.size);
    } else {
        if (data_train_bpe(&d, a->bpe_reviews, a->vocab_size, err) != 0) goto done;
        if (d.bpe.vocab.size != a->vocab_size) {
            error_set(err, "--vocab-size %d: the reviews give only %d ids (no pair left "
                      "occurs twice)", a->vocab_size, d.bpe.vocab.size);
            goto done;
        }
        rng_seed(&rng, (uint64_t)a->seed, 2);
        if (model_init(&m, &cfg, &rng, err) != 0) goto done;
        if (adam_state_alloc(&opt, m.num_params, err) != 0) goto done;
        rng_seed(&state.data_rng, (uint64_t)a->seed, 3);
        rng_seed(&state.dropout_rng, (uint64_t)a->seed, 4);
    }
    if (data_encode(&d, a->max_len, err) != 0) goto done;
    if (tokenizer_meta(&d.bpe, a->max_len, &merges, len_text, sizeof len_text, meta, err) != 0)
        goto done;
    o.checkpoint_meta = meta;
    Examples train = review_examples(&d.train_rows, d.bpe.vocab.size);
    Examples test = review_examples(&d.test_rows, d.bpe.vocab.size);
    printf("classifier: d_model %d, %d heads, %d layers, FFN %d, dropout %g, %d positions, "
           "%zu parameters\n", m.cfg.d_model, m.cfg.nhead, m.cfg.num_encoder_layers,
           m.cfg.dim_feedforward, (double)m.cfg.dropout, m.cfg.max_len, m.num_params);
    printf("batch %d, %d epochs of %" PRId64 " steps, AdamW lr %g (%s, warm-up %d steps), "
           "validation: the test reviews (shown, not used to choose anything)\n",
           a->batch_size, a->epochs, d.train.n / a->batch_size, a->lr, a->schedule, a->warmup);
    o.epochs = a->epochs;
    o.stop_after = a->stop_after;
    if (command_open_device(a->device, &device, &m, &opt, a->batch_size, a->max_len, 0,
                            err) != 0)
        goto done;
    o.device = device.ctx ? &device : NULL;
    if (o.device) printf("training on the GPU (--device cuda)\n");
    double started = time_now();
    if (train_run(&m, &opt, &state, &o, &train, &test, &val, err) != 0) goto done;
    printf("at epoch %" PRId64 " of %d (step %" PRId64 "), %.0f s in this run\n", state.epoch,
           a->epochs, opt.step, time_now() - started);
    if (a->out && save_model(&m, meta, a->out, err) != 0) goto done;
    double acc;
    if (report(&m, &d.test_rows, "IMDb test", &acc, err) != 0 ||
        report(&m, &d.rt_rows, "Rotten Tomatoes", &acc, err) != 0)
        goto done;
    rc = 0;
    if (a->target_loss > 0 && !(val.loss <= a->target_loss)) {
        error_set(err, "the test loss %.4f is above the target %.4f", val.loss, a->target_loss);
        rc = -1;
    }
done:
    if (device.close) device.close(device.ctx);
    text_free(&merges);
    adam_state_free(&opt);
    model_free(&m);
    data_free(&d);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* --eval, --classify, --demo                                                */
/* ------------------------------------------------------------------------ */

/* Reads the test sets and the model at path, and encodes the reviews. */
static int open_eval(Data *d, Model *m, const char *path, const char *dir, Error *err)
{
    int L;
    if (data_read(d, dir, 0, err) != 0) return -1;
    if (load_classifier(m, &d->bpe, &L, path, err) != 0) {
        data_free(d);
        return -1;
    }
    d->have_bpe = 1;
    if (data_encode(d, L, err) != 0) {
        model_free(m);
        data_free(d);
        return -1;
    }
    return 0;
}

/* The rows of r for which pick(r, i) holds, copied into part. */
static int rows_where(ReviewRows *part, const ReviewRows *r,
                      int (*pick)(const ReviewRows *, int64_t), Error *err)
{
    memset(part, 0, sizeof *part);
    part->L = r->L;
    part->ids = malloc((size_t)(r->n ? r->n : 1) * r->L * sizeof *part->ids);
    part->label = malloc((size_t)(r->n ? r->n : 1) * sizeof *part->label);
    part->length = malloc((size_t)(r->n ? r->n : 1) * sizeof *part->length);
    if (!part->ids || !part->label || !part->length) {
        review_rows_free(part);
        return error_set(err, "out of memory");
    }
    for (int64_t i = 0; i < r->n; i++) {
        if (!pick(r, i)) continue;
        memcpy(part->ids + part->n * r->L, r->ids + i * r->L, (size_t)r->L * sizeof *r->ids);
        part->label[part->n] = r->label[i];
        part->length[part->n++] = r->length[i];
    }
    return 0;
}

static int is_negative(const ReviewRows *r, int64_t i) { return r->label[i] == 0; }
static int is_positive(const ReviewRows *r, int64_t i) { return r->label[i] == 1; }
static int is_whole(const ReviewRows *r, int64_t i) { return r->length[i] < r->L; }
static int is_long(const ReviewRows *r, int64_t i) { return r->length[i] == r->L; }

/* The test accuracy by class and by length: where the errors are. */
static int report_parts(Model *m, const ReviewRows *r, Error *err)
{
    int (*const picks[4])(const ReviewRows *, int64_t) = {is_negative, is_positive, is_whole,
                                                          is_long};
    char names[4][64];
    snprintf(names[0], sizeof names[0], "  negative reviews");
    snprintf(names[1], sizeof names[1], "  positive reviews");
    snprintf(names[2], sizeof names[2], "  shorter than %d tokens", r->L);
    snprintf(names[3], sizeof names[3], "  %d tokens kept (cut)", r->L);
    for (int k = 0; k < 4; k++) {
        ReviewRows part;
        double acc;
        if (rows_where(&part, r, picks[k], err) != 0) return -1;
        int rc = part.n ? report(m, &part, names[k], &acc, err) : 0;
        review_rows_free(&part);
        if (rc != 0) return -1;
    }
    return 0;
}

static int run_eval(const char *path, const Args *a, Error *err)
{
    Data d;
    Model m;
    double acc, rt;
    if (open_eval(&d, &m, path, a->data, err) != 0) return -1;
    int rc = report(&m, &d.test_rows, "IMDb test", &acc, err);
    if (rc == 0) rc = report_parts(&m, &d.test_rows, err);
    if (rc == 0) rc = report(&m, &d.rt_rows, "Rotten Tomatoes", &rt, err);
    if (rc == 0 && acc < a->min_accuracy)
        rc = error_set(err, "%s: IMDb test accuracy %.4f is below --min-accuracy %.4f", path,
                       acc, a->min_accuracy);
    model_free(&m);
    data_free(&d);
    return rc;
}

/* The probability of "positive" for rows (N, L) of ids. */
static int positive(Model *m, const int64_t *ids, int N, int L, double *p, Error *err)
{
    ModelWork w;
    if (model_work_alloc(&w, m, N, L, 0, 0, err) != 0) return -1;
    if (model_forward(m, &w, ids, NULL, NULL) != 0) {
        model_work_free(&w);
        return error_set(err, "model_forward failed");
    }
    for (int i = 0; i < N; i++)   /* softmax over two logits */
        p[i] = 1.0 / (1.0 + exp((double)w.logits[2 * i] - w.logits[2 * i + 1]));
    model_work_free(&w);
    return 0;
}

static int run_classify(const char *path, const char *text, Error *err)
{
    Model m;
    Bpe bpe;
    int L, length;
    double p;
    if (load_classifier(&m, &bpe, &L, path, err) != 0) return -1;
    int64_t *ids = malloc((size_t)L * sizeof *ids);
    int rc = ids ? review_encode(&bpe, text, L, ids, &length, err)
                 : error_set(err, "out of memory");
    if (rc == 0) rc = positive(&m, ids, 1, L, &p, err);
    if (rc == 0)
        printf("%s (p(positive) = %.3f, %d tokens)\n", p >= 0.5 ? "positive" : "negative", p,
               length);
    free(ids);
    bpe_free(&bpe);
    model_free(&m);
    return rc;
}

static int run_demo(Error *err)
{
    Data d;
    Model m;
    double acc, p[6];
    static const char *const names[] = {"negative", "positive"};
    if (open_eval(&d, &m, SHIPPED_MODEL, ".data/imdb", err) != 0) return -1;
    printf("Seed 003's task: is a movie review positive or negative? %s, a %d-layer encoder\n"
           "with mean pooling, trained in C on 20,000 IMDb reviews.\n\n", SHIPPED_MODEL,
           m.cfg.num_encoder_layers);
    const ReviewRows *r = &d.test_rows;
    int pick[6] = {0, 1, 2, 2500, 2501, 2502};   /* the test half keeps the file's order */
    int64_t rows[6 * r->L];
    for (int i = 0; i < 6; i++)
        memcpy(rows + (size_t)i * r->L, r->ids + (size_t)pick[i] * r->L, r->L * sizeof *rows);
    int rc = positive(&m, rows, 6, r->L, p, err);
    for (int i = 0; rc == 0 && i < 6; i++) {
        const Text *t = &d.test.text[pick[i]];
        printf("%.100s%s\n  label %s, model %s (p(positive) = %.3f)\n\n", (const char *)t->data,
               t->len > 100 ? "..." : "", names[r->label[pick[i]]], names[p[i] >= 0.5], p[i]);
    }
    if (rc == 0) rc = report(&m, &d.test_rows, "IMDb test", &acc, err);
    if (rc == 0) rc = report(&m, &d.rt_rows, "Rotten Tomatoes", &acc, err);
    model_free(&m);
    data_free(&d);
    return rc;
}

int main(int argc, char **argv)
{
    Error err;
    Args a = defaults();
    const char *cmd = argc >= 2 ? argv[1] : "";
    int rc;
    if (strcmp(cmd, "--train") == 0 || strcmp(cmd, "--eval") == 0) {
        int train = cmd[2] == 't';
        Option topts[] = TRAIN_OPTIONS(a), eopts[] = EVAL_OPTIONS(a);
        int status = train ? task_command_options("10_classification", argc, argv, topts,
                                                  (int)(sizeof topts / sizeof topts[0]), &a.help)
                           : task_command_options("10_classification", argc, argv, eopts,
                                                  (int)(sizeof eopts / sizeof eopts[0]), &a.help);
        if (status >= 0) return status;
        rc = train ? run_train(&a, &err) : run_eval(argv[2], &a, &err);
    } else if (strcmp(cmd, "--classify") == 0) {
        if (argc != 4) {
            fprintf(stderr, "10_classification --classify: give the model and the text: "
                            "--classify MODEL TEXT\n");
            return 2;
        }
        rc = run_classify(argv[2], argv[3], &err);
    } else if (strcmp(cmd, "--demo") == 0 && argc == 2) {
        rc = run_demo(&err);
    } else {
        fputs(USAGE, stderr);
        return 2;
    }
    if (rc != 0) {
        fprintf(stderr, "10_classification %s: %s\n", cmd, err.msg);
        return 1;
    }
    return 0;
}
