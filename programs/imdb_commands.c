/*
 * imdb_commands.c - see imdb_commands.h.
 */
#include "imdb_commands.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "imdb.h"
#include "model.h"
#include "model_file.h"

/* A classifier and its tokenizer from a model or checkpoint file. */
int imdb_load_classifier(Model *m, Bpe *bpe, int *max_len, const char *path, Error *err)
{
    TensorFile f = {0};
    if (safetensors_read(path, &f, err) != 0) return -1;
    int rc = imdb_read_tokenizer(&f, bpe, max_len, err);
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

/* Reads the test sets and the model at path, and encodes the reviews. */
int imdb_open_eval(Imdb *d, Model *m, const char *path, const char *dir, Error *err)
{
    int S;
    if (imdb_read(d, dir, 0, err) != 0) return -1;
    if (imdb_load_classifier(m, &d->bpe, &S, path, err) != 0) {
        imdb_free(d);
        return -1;
    }
    d->have_bpe = 1;
    if (imdb_encode(d, S, err) != 0) {
        model_free(m);
        imdb_free(d);
        return -1;
    }
    return 0;
}

/* The rows of r for which pick(r, i) holds, copied into part. */
static int rows_where(ReviewRows *part, const ReviewRows *r,
                      int (*pick)(const ReviewRows *, int64_t), Error *err)
{
    memset(part, 0, sizeof *part);
    part->S = r->S;
    part->ids = malloc((size_t)(r->n ? r->n : 1) * r->S * sizeof *part->ids);
    part->label = malloc((size_t)(r->n ? r->n : 1) * sizeof *part->label);
    part->length = malloc((size_t)(r->n ? r->n : 1) * sizeof *part->length);
    if (!part->ids || !part->label || !part->length) {
        review_rows_free(part);
        return error_set(err, "out of memory");
    }
    for (int64_t i = 0; i < r->n; i++) {
        if (!pick(r, i)) continue;
        memcpy(part->ids + part->n * r->S, r->ids + i * r->S, (size_t)r->S * sizeof *r->ids);
        part->label[part->n] = r->label[i];
        part->length[part->n++] = r->length[i];
    }
    return 0;
}

static int is_negative(const ReviewRows *r, int64_t i) { return r->label[i] == 0; }
static int is_positive(const ReviewRows *r, int64_t i) { return r->label[i] == 1; }
static int is_whole(const ReviewRows *r, int64_t i) { return r->length[i] < r->S; }
static int is_long(const ReviewRows *r, int64_t i) { return r->length[i] == r->S; }

/* The test accuracy by class and by length: where the errors are. */
int imdb_report_parts(Model *m, const ReviewRows *r, Error *err)
{
    int (*const picks[4])(const ReviewRows *, int64_t) = {is_negative, is_positive, is_whole,
                                                          is_long};
    char names[4][64];
    snprintf(names[0], sizeof names[0], "  negative reviews");
    snprintf(names[1], sizeof names[1], "  positive reviews");
    snprintf(names[2], sizeof names[2], "  shorter than %d tokens", r->S);
    snprintf(names[3], sizeof names[3], "  %d tokens kept (cut)", r->S);
    for (int k = 0; k < 4; k++) {
        ReviewRows part;
        double acc;
        if (rows_where(&part, r, picks[k], err) != 0) return -1;
        int rc = part.n ? imdb_report(m, &part, names[k], &acc, err) : 0;
        review_rows_free(&part);
        if (rc != 0) return -1;
    }
    return 0;
}

/* The probability of "positive" for rows (N, S) of ids. */
static int positive(Model *m, const int64_t *ids, int N, int S, double *p, Error *err)
{
    ModelWork w;
    if (model_work_alloc(&w, m, N, S, 0, 0, err) != 0) return -1;
    if (model_forward(m, &w, ids, NULL, NULL) != 0) {
        model_work_free(&w);
        return error_set(err, "model_forward failed");
    }
    for (int i = 0; i < N; i++)   /* softmax over two logits */
        p[i] = 1.0 / (1.0 + exp((double)w.logits[2 * i] - w.logits[2 * i + 1]));
    model_work_free(&w);
    return 0;
}

int imdb_classify(Model *m, const Bpe *bpe, int S, const char *text, double *p, int *length,
                  Error *err)
{
    int64_t *ids = malloc((size_t)S * sizeof *ids);
    int rc = ids ? review_encode(bpe, text, S, ids, length, err)
                 : error_set(err, "out of memory");
    if (rc == 0) rc = positive(m, ids, 1, S, p, err);
    free(ids);
    return rc;
}

static int run_classify(const char *path, const char *text, Error *err)
{
    Model m;
    Bpe bpe;
    int S, length = 0;
    double p = 0.0;
    if (imdb_load_classifier(&m, &bpe, &S, path, err) != 0) return -1;
    int rc = imdb_classify(&m, &bpe, S, text, &p, &length, err);
    if (rc == 0)
        printf("%s (p(positive) = %.3f, %d tokens)\n", p >= 0.5 ? "positive" : "negative", p,
               length);
    bpe_free(&bpe);
    model_free(&m);
    return rc;
}

static int run_demo(Error *err)
{
    Imdb d;
    Model m;
    double acc, p[6];
    static const char *const names[] = {"negative", "positive"};
    if (imdb_open_eval(&d, &m, SHIPPED_MODEL, ".data/imdb", err) != 0) return -1;
    printf("The IMDb classifier: is a movie review positive or negative? %s, a %d-layer\n"
           "encoder with mean pooling, trained in C on 18,000 IMDb reviews.\n\n", SHIPPED_MODEL,
           m.cfg.num_encoder_layers);
    const ReviewRows *r = &d.test_rows;
    int pick[6] = {0, 1, 2, 2500, 2501, 2502};   /* the test half keeps the file's order */
    int64_t rows[6 * r->S];
    for (int i = 0; i < 6; i++)
        memcpy(rows + (size_t)i * r->S, r->ids + (size_t)pick[i] * r->S, r->S * sizeof *rows);
    int rc = positive(&m, rows, 6, r->S, p, err);
    for (int i = 0; rc == 0 && i < 6; i++) {
        const Text *t = &d.test.text[pick[i]];     /* cleaned: a space, then the text */
        printf("%.100s%s\n  label %s, model %s (p(positive) = %.3f)\n\n",
               (const char *)t->data + 1, t->len > 101 ? "..." : "", names[r->label[pick[i]]],
               names[p[i] >= 0.5], p[i]);
    }
    if (rc == 0) rc = imdb_report(&m, &d.test_rows, "IMDb test", &acc, err);
    if (rc == 0) rc = imdb_report(&m, &d.rt_rows, "Rotten Tomatoes", &acc, err);
    model_free(&m);
    imdb_free(&d);
    return rc;
}


int classify_command(int argc, char **argv, Error *err)
{
    if (argc != 2) return error_set(err, "give the model and the text: --classify MODEL TEXT");
    return run_classify(argv[0], argv[1], err);
}

int imdb_demo_command(int argc, char **argv, Error *err)
{
    if (argc != 0) return error_set(err, "--demo takes no arguments");
    return run_demo(err);
}
