/*
 * main.c - the chapter 11 program: seed 004's set anomaly detection. A set
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
 * digits.h has the data, the split and how a set is drawn; the model is
 * chapter 07's MODEL_SET and the training chapter 08's.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "digits.h"
#include "model.h"
#include "optim.h"
#include "rng.h"
#include "safetensors.h"   /* TextOut */
#include "train_util.h"
#include "trainer.h"

#define SHIPPED_MODEL "models/set_anomaly.safetensors"

static const char USAGE[] =
    "usage: 11_set_anomaly --train [options]         (--train --help lists the options)\n"
    "       11_set_anomaly --eval MODEL [options]    (--eval --help lists the options)\n"
    "       11_set_anomaly --demo\n"
    "       11_set_anomaly --plot-data DIR\n";

typedef struct {
    const char *data;
    int train_sets, test_sets;
    int epochs, stop_after, batch_size, warmup, seed;
    int d_model, heads, layers, ffn;
    double lr, clip, dropout, target_loss, min_accuracy;
    const char *schedule, *checkpoint, *resume, *out, *log;
    int help;
} Args;

static Args defaults(void)
{
    Args a = {0};
    a.data = DIGITS_PATH;
    a.train_sets = 20000;
    a.test_sets = 1000;
    a.epochs = 20;
    a.batch_size = 32;
    a.lr = 5e-4;
    a.schedule = "cosine";
    a.warmup = 100;
    a.clip = 1.0;
    a.d_model = 64;
    a.heads = 4;
    a.layers = 2;
    a.ffn = 128;
    a.dropout = 0.1;
    return a;
}

#define DATA_OPTIONS(a)                                                                   \
    {"--data", OPT_STRING, &(a).data, "the exported digits (default " DIGITS_PATH ")"},   \
    {"--test-sets", OPT_INT, &(a).test_sets, "sets drawn from the test images (default 1000)"}

#define TRAIN_OPTIONS(a) {                                                                \
    DATA_OPTIONS(a),                                                                      \
    {"--train-sets", OPT_INT, &(a).train_sets, "sets drawn from the training images "     \
     "(default 20000)"},                                                                  \
    {"--epochs", OPT_INT, &(a).epochs, "epochs (default 20)"},                            \
    {"--stop-after", OPT_INT, &(a).stop_after, "stop after this epoch (its checkpoint "      \
     "written), as an interrupted run would; the schedule still spans --epochs"},          \
    {"--batch-size", OPT_INT, &(a).batch_size, "sets per step (default 32)"},             \
    {"--lr", OPT_DOUBLE, &(a).lr, "peak learning rate of AdamW (default 5e-4)"},          \
    {"--schedule", OPT_STRING, &(a).schedule, "cosine, noam or constant (default cosine)"}, \
    {"--warmup", OPT_INT, &(a).warmup, "warm-up steps (default 100)"},                    \
    {"--clip", OPT_DOUBLE, &(a).clip, "clip the gradient norm to this (default 1; 0: off)"}, \
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
    {"--target-loss", OPT_DOUBLE, &(a).target_loss,                                       \
     "exit 1 if the last epoch's test loss ends above this"},                             \
    {"--help", OPT_FLAG, &(a).help, "this list"},                                         \
}

#define EVAL_OPTIONS(a) {                                                                 \
    DATA_OPTIONS(a),                                                                      \
    {"--min-accuracy", OPT_DOUBLE, &(a).min_accuracy,                                     \
     "exit 1 if the test accuracy is below this"},                                        \
    {"--help", OPT_FLAG, &(a).help, "this list"},                                         \
}

/* ------------------------------------------------------------------------ */
/* The data                                                                  */
/* ------------------------------------------------------------------------ */

typedef struct {
    Digits digits;
    DigitPool train_pool, test_pool;
    DigitSets train, test;
} Data;

static void data_free(Data *d)
{
    digit_sets_free(&d->train);
    digit_sets_free(&d->test);
    digit_pool_free(&d->train_pool);
    digit_pool_free(&d->test_pool);
    digits_free(&d->digits);
}

/* Reads and splits the images and draws the sets (training sets only when
 * n_train > 0). */
static int data_open(Data *d, const char *path, int n_train, int n_test, Error *err)
{
    memset(d, 0, sizeof *d);
    if (digits_read(&d->digits, path, err) != 0) return -1;
    if (digits_split(&d->digits, &d->train_pool, &d->test_pool, err) != 0 ||
        (n_train > 0 && digit_sets_draw(&d->train, &d->digits, &d->train_pool, n_train,
                                        SETS_SEED, SETS_TRAIN_STREAM, err) != 0) ||
        digit_sets_draw(&d->test, &d->digits, &d->test_pool, n_test, SETS_SEED,
                        SETS_TEST_STREAM, err) != 0) {
        data_free(d);
        return -1;
    }
    int64_t train_images = 0, test_images = 0;
    for (int c = 0; c < DIGIT_CLASSES; c++) {
        train_images += d->train_pool.count[c];
        test_images += d->test_pool.count[c];
    }
    printf("%s: %" PRId64 " images, %" PRId64 " train, %" PRId64 " test; %d training sets, "
           "%d test sets of %d\n", path, d->digits.n, train_images, test_images, n_train, n_test,
           SET_SIZE);
    return 0;
}

/* A set model over the digits from a model or checkpoint file. */
static int load_set_model(Model *m, const char *path, Error *err)
{
    if (model_load(m, path, err) != 0) return -1;
    if (m->cfg.kind != MODEL_SET || m->cfg.input_dim != DIGIT_PIXELS ||
        m->cfg.max_len < SET_SIZE) {
        model_free(m);
        return error_set(err, "%s: not a set model of %d features per element and max_len >= "
                         "%d", path, DIGIT_PIXELS, SET_SIZE);
    }
    return 0;
}

/* The scores of n sets (one per element), in evaluation mode; scores is
 * (n, SET_SIZE). With attention != NULL, the mean over the heads of the
 * last layer's attention of set 0 goes there (SET_SIZE x SET_SIZE). */
static int score_sets(Model *m, const DigitSets *s, int64_t first, int n, float *scores,
                      float *attention, Error *err)
{
    ModelWork w;
    float *features = malloc((size_t)n * SET_SIZE * DIGIT_PIXELS * sizeof *features);
    if (!features) return error_set(err, "out of memory");
    for (int64_t i = 0; i < (int64_t)n * SET_SIZE; i++)
        digit_features(s->digits, s->images[first * SET_SIZE + i], features + i * DIGIT_PIXELS);
    if (model_work_alloc(&w, m, n, SET_SIZE, 0, 0, err) != 0) {
        free(features);
        return -1;
    }
    w.features = features;
    int rc = model_forward(m, &w, NULL, NULL, NULL) != 0 ? error_set(err, "model_forward failed")
                                                         : 0;
    if (rc == 0) memcpy(scores, w.logits, (size_t)n * SET_SIZE * sizeof *scores);
    if (rc == 0 && attention) {
        int H = m->cfg.nhead, layer = m->cfg.num_encoder_layers - 1;
        for (int i = 0; i < SET_SIZE * SET_SIZE; i++) {
            double sum = 0.0;
            for (int h = 0; h < H; h++) sum += model_attention(&w, m, ATTN_ENCODER, layer, 0, h)[i];
            attention[i] = (float)(sum / H);
        }
    }
    model_work_free(&w);
    free(features);
    return rc;
}

static int argmax(const float *x, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++) if (x[i] > x[best]) best = i;
    return best;
}

/* Test accuracy, printed, and where the misses are: by the common digit
 * and by the odd one. */
static int report(Model *m, const DigitSets *s, double *acc, Error *err)
{
    enum { CHUNK = 250 };
    int64_t correct = 0, miss_common[DIGIT_CLASSES] = {0}, miss_odd[DIGIT_CLASSES] = {0};
    float scores[CHUNK * SET_SIZE];
    double started = time_now();
    for (int64_t first = 0; first < s->n; first += CHUNK) {
        int n = (int)(s->n - first < CHUNK ? s->n - first : CHUNK);
        if (score_sets(m, s, first, n, scores, NULL, err) != 0) return -1;
        for (int i = 0; i < n; i++) {
            const int64_t *images = s->images + (first + i) * SET_SIZE;
            int64_t odd = s->odd[first + i];
            if (argmax(scores + i * SET_SIZE, SET_SIZE) == odd) {
                correct++;
                continue;
            }
            miss_odd[s->digits->label[images[odd]]]++;
            miss_common[s->digits->label[images[odd == 0 ? 1 : 0]]]++;
        }
    }
    *acc = (double)correct / s->n;
    printf("test sets: accuracy %.4f (%" PRId64 " of %" PRId64 "), %.1f s\n", *acc, correct,
           s->n, time_now() - started);
    printf("  misses by digit     ");
    for (int c = 0; c < DIGIT_CLASSES; c++) printf("%5d", c);
    printf("\n  as the nine         ");
    for (int c = 0; c < DIGIT_CLASSES; c++) printf("%5" PRId64, miss_common[c]);
    printf("\n  as the odd one      ");
    for (int c = 0; c < DIGIT_CLASSES; c++) printf("%5" PRId64, miss_odd[c]);
    printf("\n");
    return 0;
}

/* ------------------------------------------------------------------------ */
/* --train                                                                   */
/* ------------------------------------------------------------------------ */

static ModelConfig model_config(const Args *a)
{
    ModelConfig c = {0};
    c.kind = MODEL_SET;
    c.src_vocab = 0;
    c.tgt_vocab = 1;
    c.input_dim = DIGIT_PIXELS;
    c.d_model = a->d_model;
    c.nhead = a->heads;
    c.dim_feedforward = a->ffn;
    c.num_encoder_layers = a->layers;
    c.max_len = SET_SIZE;
    c.pad_id = -1;
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
    StepResult val;
    Rng rng;
    int rc = -1;

    TrainOptions o = {0};
    o.batch_size = a->batch_size;
    o.adam = adam_default_config(1);
    o.adam.lr = (float)a->lr;
    if (schedule_parse(a->schedule, &o.schedule, err) != 0) return -1;
    if (a->epochs < 1 || a->batch_size < 1 || a->train_sets < 1 || a->test_sets < 1 ||
        a->warmup < 0 || a->seed < 0 || a->stop_after < 0)
        return error_set(err, "--epochs, --batch-size, --train-sets and --test-sets need at "
                              "least 1, --warmup, --stop-after and --seed at least 0");
    if (!(a->lr >= 0) || !(a->clip >= 0))
        return error_set(err, "--lr and --clip must not be negative");
    o.warmup = a->warmup;
    o.max_norm = (float)a->clip;
    o.checkpoint = a->checkpoint;
    o.log_path = a->log;
    if (adam_config_check(&o.adam, err) != 0) return -1;
    if ((a->checkpoint && check_output_path("--checkpoint", a->checkpoint, err) != 0) ||
        (a->out && check_output_path("--out", a->out, err) != 0) ||
        (a->log && check_output_path("--log", a->log, err) != 0))
        return -1;
    static const ConfigOptions names = {NULL, NULL, "--d-model", "--heads", "--ffn",
                                        "--layers", NULL, NULL, "--dropout"};
    ModelConfig cfg = model_config(a);
    if (options_check_config(&cfg, &names, err) != 0) return -1;
    if (data_open(&d, a->data, a->train_sets, a->test_sets, err) != 0) return -1;

    if (a->resume) {
        if (checkpoint_load(a->resume, &m, &opt, &state, err) != 0 ||
            checkpoint_check_config(a->resume, &m.cfg, &cfg, &names, err) != 0)
            goto done;
        if (state.epoch >= a->epochs) {
            error_set(err, "--resume: %s is at epoch %" PRId64 "; --epochs %d leaves nothing "
                      "to train (a longer run needs more epochs)", a->resume, state.epoch,
                      a->epochs);
            goto done;
        }
        printf("resuming %s after epoch %" PRId64 " (step %" PRId64 ")\n", a->resume,
               state.epoch, opt.step);
    } else {
        rng_seed(&rng, (uint64_t)a->seed, 2);
        if (model_init(&m, &cfg, &rng, err) != 0) goto done;
        if (adam_state_alloc(&opt, m.num_params, err) != 0) goto done;
        rng_seed(&state.data_rng, (uint64_t)a->seed, 3);
        rng_seed(&state.dropout_rng, (uint64_t)a->seed, 4);
    }
    Examples train = digit_set_examples(&d.train), test = digit_set_examples(&d.test);
    printf("set model: %d features in, d_model %d, %d heads, %d layers, FFN %d, dropout %g, no "
           "positions, %zu parameters\n", m.cfg.input_dim, m.cfg.d_model, m.cfg.nhead,
           m.cfg.num_encoder_layers, m.cfg.dim_feedforward, (double)m.cfg.dropout,
           m.num_params);
    printf("batch %d, %d epochs of %d steps, AdamW lr %g (%s, warm-up %d steps), validation: "
           "the test sets (shown, not used to choose anything)\n", a->batch_size, a->epochs,
           a->train_sets / a->batch_size, a->lr, a->schedule, a->warmup);
    o.epochs = a->epochs;
    o.stop_after = a->stop_after;
    double started = time_now();
    if (train_run(&m, &opt, &state, &o, &train, &test, &val, err) != 0) goto done;
    printf("at epoch %" PRId64 " of %d (step %" PRId64 "), %.0f s in this run\n", state.epoch,
           a->epochs, opt.step, time_now() - started);
    if (a->out && model_save(&m, a->out, err) != 0) goto done;
    double acc;
    if (report(&m, &d.test, &acc, err) != 0) goto done;
    rc = 0;
    if (a->target_loss > 0 && !(val.loss <= a->target_loss)) {
        error_set(err, "the test loss %.4f is above the target %.4f", val.loss, a->target_loss);
        rc = -1;
    }
done:
    adam_state_free(&opt);
    model_free(&m);
    data_free(&d);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* --eval, --demo, --plot-data                                               */
/* ------------------------------------------------------------------------ */

static int run_eval(const char *path, const Args *a, Error *err)
{
    Data d;
    Model m;
    double acc;
    if (a->test_sets < 1) return error_set(err, "--test-sets %d: need at least 1", a->test_sets);
    if (load_set_model(&m, path, err) != 0) return -1;
    if (data_open(&d, a->data, 0, a->test_sets, err) != 0) {
        model_free(&m);
        return -1;
    }
    int rc = report(&m, &d.test, &acc, err);
    if (rc == 0 && acc < a->min_accuracy)
        rc = error_set(err, "%s: test accuracy %.4f is below --min-accuracy %.4f", path, acc,
                       a->min_accuracy);
    model_free(&m);
    data_free(&d);
    return rc;
}

/* The softmax of a set's scores: the probability that each is the odd one. */
static void set_softmax(const float *scores, double *p)
{
    double max = scores[argmax(scores, SET_SIZE)], sum = 0.0;
    for (int i = 0; i < SET_SIZE; i++) sum += p[i] = exp(scores[i] - max);
    for (int i = 0; i < SET_SIZE; i++) p[i] /= sum;
}

/* One set as text: the ten digits side by side in shades, then each
 * element's probability of being the odd one. */
static void print_set(const DigitSets *s, int64_t k, const float *scores)
{
    static const char shades[] = " .:-=+*#%@";
    const int64_t *images = s->images + k * SET_SIZE;
    double p[SET_SIZE];
    set_softmax(scores, p);
    for (int row = 0; row < 8; row++) {
        for (int i = 0; i < SET_SIZE; i++) {
            const float *px = s->digits->pixels + images[i] * DIGIT_PIXELS + row * 8;
            for (int col = 0; col < 8; col++) putchar(shades[(int)(px[col] * 9.0f / 16.0f + 0.5f)]);
            printf("  ");
        }
        putchar('\n');
    }
    for (int i = 0; i < SET_SIZE; i++) printf("  %d%c     ", (int)s->digits->label[images[i]],
                                              i == s->odd[k] ? '*' : ' ');
    printf("   the digit (* the odd one)\n");
    for (int i = 0; i < SET_SIZE; i++) printf("%6.3f    ", p[i]);
    printf("  p(odd one)\n");
    int guess = argmax(scores, SET_SIZE);
    printf("the model picks element %d: %s\n\n", guess,
           guess == s->odd[k] ? "right" : "wrong");
}

static int run_demo(Error *err)
{
    Data d;
    Model m;
    double acc;
    float scores[3 * SET_SIZE];
    if (load_set_model(&m, SHIPPED_MODEL, err) != 0) return -1;
    if (data_open(&d, DIGITS_PATH, 0, 1000, err) != 0) {
        model_free(&m);
        return -1;
    }
    printf("Seed 004's task: which digit of the set does not belong? %s, a %d-layer encoder\n"
           "without positions, trained in C on sets of training images; these are test sets.\n\n",
           SHIPPED_MODEL, m.cfg.num_encoder_layers);
    int rc = score_sets(&m, &d.test, 0, 3, scores, NULL, err);
    for (int k = 0; rc == 0 && k < 3; k++) print_set(&d.test, k, scores + k * SET_SIZE);
    if (rc == 0) rc = report(&m, &d.test, &acc, err);
    model_free(&m);
    data_free(&d);
    return rc;
}

/* The first line of both plot files: gnuplot tic labels, each element's
 * digit (* the odd one) and p(odd one), element i at x = first + step * i. */
static void write_tic_labels(FILE *f, const DigitSets *s, const double *p, int first, int step)
{
    fprintf(f, "# labels:");
    for (int i = 0; i < SET_SIZE; i++)
        fprintf(f, " %s\"%d%s %.2f\" %d", i ? ", " : "", (int)s->digits->label[s->images[i]],
                i == s->odd[0] ? "*" : "", p[i], first + step * i);
    fprintf(f, "\n");
}

/* set_anomaly_set.dat: the ten images of test set 0 as 8x8 tiles side by
 * side ("x y pixel" lines, element i in columns 9i..9i+7);
 * set_anomaly_attention.dat: the last layer's attention of that set
 * ("query key weight"). Both start with the tic labels above. */
static int run_plot_data(const char *dir, Error *err)
{
    Data d;
    Model m;
    float scores[SET_SIZE], att[SET_SIZE * SET_SIZE];
    double p[SET_SIZE];
    char path[4096];
    TextOut out;
    if (make_dir(dir, err) != 0) return -1;
    if (load_set_model(&m, SHIPPED_MODEL, err) != 0) return -1;
    if (data_open(&d, DIGITS_PATH, 0, 1, err) != 0) {
        model_free(&m);
        return -1;
    }
    const DigitSets *s = &d.test;
    int rc = score_sets(&m, s, 0, 1, scores, att, err);
    set_softmax(scores, p);

    if (rc == 0) rc = text_out_open(&out, err);
    if (rc == 0) {
        FILE *f = out.f;
        write_tic_labels(f, s, p, 4, 9);        /* the middle of each tile */
        fprintf(f, "# x y pixel (0..16): element i in columns 9i..9i+7, row 0 on top\n");
        for (int y = 0; y < 8; y++) {
            for (int i = 0; i < SET_SIZE; i++)
                for (int x = 0; x < 8; x++)
                    fprintf(f, "%d %d %g\n", 9 * i + x, y,
                            (double)d.digits.pixels[s->images[i] * DIGIT_PIXELS + y * 8 + x]);
            fprintf(f, "\n");
        }
        snprintf(path, sizeof path, "%s/set_anomaly_set.dat", dir);
        rc = text_out_commit(&out, path, err);
    }

    if (rc == 0) rc = text_out_open(&out, err);
    if (rc == 0) {
        FILE *f = out.f;
        write_tic_labels(f, s, p, 0, 1);
        fprintf(f, "# query key weight (encoder layer %d, mean of %d heads)\n",
                m.cfg.num_encoder_layers, m.cfg.nhead);
        for (int q = 0; q < SET_SIZE; q++) {
            for (int k = 0; k < SET_SIZE; k++)
                fprintf(f, "%d %d %.6f\n", q, k, (double)att[q * SET_SIZE + k]);
            fprintf(f, "\n");
        }
        snprintf(path, sizeof path, "%s/set_anomaly_attention.dat", dir);
        rc = text_out_commit(&out, path, err);
    }
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
        int status = train ? task_command_options("11_set_anomaly", argc, argv, topts,
                                                  (int)(sizeof topts / sizeof topts[0]), &a.help)
                           : task_command_options("11_set_anomaly", argc, argv, eopts,
                                                  (int)(sizeof eopts / sizeof eopts[0]), &a.help);
        if (status >= 0) return status;
        rc = train ? run_train(&a, &err) : run_eval(argv[2], &a, &err);
    } else if (strcmp(cmd, "--demo") == 0 && argc == 2) {
        rc = run_demo(&err);
    } else if (strcmp(cmd, "--plot-data") == 0 && argc == 3) {
        rc = run_plot_data(argv[2], &err);
    } else {
        fputs(USAGE, stderr);
        return 2;
    }
    if (rc != 0) {
        fprintf(stderr, "11_set_anomaly %s: %s\n", cmd, err.msg);
        return 1;
    }
    return 0;
}
