/*
 * set_commands.c - see set_commands.h.
 */
#include "set_commands.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paths.h"
#include "safetensors.h"   /* TextOut */
#include "threads.h"       /* time_now() */
#include "model_file.h"

void set_data_free(SetData *d)
{
    digit_sets_free(&d->train);
    digit_sets_free(&d->test);
    digit_pool_free(&d->train_pool);
    digit_pool_free(&d->test_pool);
    digits_free(&d->digits);
}

/* Reads and splits the images and draws the sets (training sets only when
 * n_train > 0). */
int set_data_open(SetData *d, const char *path, int n_train, int n_test, Error *err)
{
    memset(d, 0, sizeof *d);
    if (digits_read(&d->digits, path, err) != 0) return -1;
    if (digits_split(&d->digits, &d->train_pool, &d->test_pool, err) != 0 ||
        (n_train > 0 && digit_sets_draw(&d->train, &d->digits, &d->train_pool, n_train,
                                        SETS_SEED, SETS_TRAIN_STREAM, err) != 0) ||
        digit_sets_draw(&d->test, &d->digits, &d->test_pool, n_test, SETS_SEED,
                        SETS_TEST_STREAM, err) != 0) {
        set_data_free(d);
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

int set_check_model(const Model *m, const char *path, Error *err)
{
    if (m->cfg.kind != MODEL_SET || m->cfg.input_dim != DIGIT_PIXELS || m->cfg.max_len < SET_SIZE)
        return error_set(err, "%s: not a set model of %d features per element and max_len >= "
                         "%d", path, DIGIT_PIXELS, SET_SIZE);
    return 0;
}

/* A set model over the digits from a model or checkpoint file. */
static int load_set_model(Model *m, const char *path, Error *err)
{
    if (model_load(m, path, err) != 0) return -1;
    if (set_check_model(m, path, err) != 0) {
        model_free(m);
        return -1;
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
int set_report(Model *m, const DigitSets *s, double *acc, Error *err)
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
    SetData d;
    Model m;
    double acc;
    float scores[3 * SET_SIZE];
    if (load_set_model(&m, SHIPPED_MODEL, err) != 0) return -1;
    if (set_data_open(&d, DIGITS_PATH, 0, 1000, err) != 0) {
        model_free(&m);
        return -1;
    }
    printf("The set-anomaly task: which digit of the set does not belong? %s, a %d-layer\n"
           "encoder without positions, trained in C on sets of training images; these are test\n"
           "sets.\n\n",
           SHIPPED_MODEL, m.cfg.num_encoder_layers);
    int rc = score_sets(&m, &d.test, 0, 3, scores, NULL, err);
    for (int k = 0; rc == 0 && k < 3; k++) print_set(&d.test, k, scores + k * SET_SIZE);
    if (rc == 0) rc = set_report(&m, &d.test, &acc, err);
    model_free(&m);
    set_data_free(&d);
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
    SetData d;
    Model m;
    float scores[SET_SIZE], att[SET_SIZE * SET_SIZE];
    double p[SET_SIZE];
    char path[4096];
    TextOut out;
    if (make_dir(dir, err) != 0) return -1;
    if (load_set_model(&m, SHIPPED_MODEL, err) != 0) return -1;
    if (set_data_open(&d, DIGITS_PATH, 0, 1, err) != 0) {
        model_free(&m);
        return -1;
    }
    const DigitSets *s = &d.test;
    int rc = score_sets(&m, s, 0, 1, scores, att, err);
    if (rc == 0) set_softmax(scores, p);

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
    set_data_free(&d);
    return rc;
}


int set_demo_command(int argc, char **argv, Error *err)
{
    if (argc != 0) return error_set(err, "--demo takes no arguments");
    return run_demo(err);
}

int set_plot_data_command(int argc, char **argv, Error *err)
{
    if (argc != 1) return error_set(err, "give the folder: --plot-data DIR");
    return run_plot_data(argv[0], err);
}
