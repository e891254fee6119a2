/*
 * digits.c - see digits.h.
 */
#include "digits.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"
#include "safetensors.h"

int digits_read(Digits *d, const char *path, Error *err)
{
    TensorFile f = {0};
    const Tensor *pixels, *labels;
    memset(d, 0, sizeof *d);
    if (safetensors_read(path, &f, err) != 0) return -1;
    int rc = -1;
    if (tensorfile_get(&f, "pixels", DTYPE_F32, 2, &pixels, err) != 0 ||
        tensorfile_get(&f, "labels", DTYPE_I64, 1, &labels, err) != 0)
        goto done;
    int64_t n = pixels->shape[0];
    if (n < 1 || pixels->shape[1] != DIGIT_PIXELS || labels->shape[0] != n) {
        error_set(err, "%s: pixels (%" PRId64 ", %" PRId64 ") and labels (%" PRId64 ") do not "
                  "describe n >= 1 images of %d pixels", path, pixels->shape[0],
                  pixels->shape[1], labels->shape[0], DIGIT_PIXELS);
        goto done;
    }
    const float *p = pixels->data;
    const int64_t *y = labels->data;
    for (int64_t i = 0; i < n * DIGIT_PIXELS; i++) {
        if (!(p[i] >= 0.0f && p[i] <= 16.0f)) {
            error_set(err, "%s: pixel %" PRId64 " of image %" PRId64 " is %g, not in 0..16", path,
                      i % DIGIT_PIXELS, i / DIGIT_PIXELS, (double)p[i]);
            goto done;
        }
    }
    for (int64_t i = 0; i < n; i++) {
        if (y[i] < 0 || y[i] >= DIGIT_CLASSES) {
            error_set(err, "%s: label %" PRId64 " of image %" PRId64 " is not a digit 0..9",
                      path, y[i], i);
            goto done;
        }
    }
    d->pixels = malloc((size_t)n * DIGIT_PIXELS * sizeof *d->pixels);
    d->label = malloc((size_t)n * sizeof *d->label);
    if (!d->pixels || !d->label) {
        digits_free(d);
        error_set(err, "out of memory for %" PRId64 " images", n);
        goto done;
    }
    memcpy(d->pixels, p, (size_t)n * DIGIT_PIXELS * sizeof *p);
    memcpy(d->label, y, (size_t)n * sizeof *y);
    d->n = n;
    rc = 0;
done:
    tensorfile_free(&f);
    return rc;
}

void digits_free(Digits *d)
{
    free(d->pixels);
    free(d->label);
    memset(d, 0, sizeof *d);
}

void digit_pool_free(DigitPool *p)
{
    for (int c = 0; c < DIGIT_CLASSES; c++) free(p->images[c]);
    memset(p, 0, sizeof *p);
}

int digits_split(const Digits *d, DigitPool *train, DigitPool *test, Error *err)
{
    int64_t seen[DIGIT_CLASSES] = {0};
    memset(train, 0, sizeof *train);
    memset(test, 0, sizeof *test);
    for (int c = 0; c < DIGIT_CLASSES; c++) {
        train->images[c] = malloc((size_t)d->n * sizeof *train->images[c]);
        test->images[c] = malloc((size_t)d->n * sizeof *test->images[c]);
        if (!train->images[c] || !test->images[c]) {
            digit_pool_free(train);
            digit_pool_free(test);
            return error_set(err, "out of memory for the split");
        }
    }
    for (int64_t i = 0; i < d->n; i++) {
        int c = (int)d->label[i];
        DigitPool *side = seen[c]++ % 5 == 4 ? test : train;
        side->images[c][side->count[c]++] = i;
    }
    for (int c = 0; c < DIGIT_CLASSES; c++) {
        if (train->count[c] < SET_SIZE - 1 || test->count[c] < SET_SIZE - 1) {
            int64_t tr = train->count[c], te = test->count[c];
            digit_pool_free(train);
            digit_pool_free(test);
            return error_set(err, "digit %d has %" PRId64 " training and %" PRId64 " test "
                             "images; a set needs %d of one digit", c, tr, te, SET_SIZE - 1);
        }
    }
    return 0;
}

/* One set into images[0..SET_SIZE), in the order of digits.h; returns p. */
static int64_t draw_set(int64_t *images, const DigitPool *pool, Rng *rng)
{
    int c = (int)rng_below(rng, DIGIT_CLASSES);
    int o = (int)rng_below(rng, DIGIT_CLASSES - 1);
    int64_t members[SET_SIZE - 1];
    o += o >= c;
    for (int k = 0; k < SET_SIZE - 1;) {
        int64_t j = rng_below(rng, (uint32_t)pool->count[c]);
        int taken = 0;
        for (int i = 0; i < k; i++) taken |= members[i] == j;
        if (!taken) members[k++] = j;
    }
    int64_t odd = pool->images[o][rng_below(rng, (uint32_t)pool->count[o])];
    int64_t p = rng_below(rng, SET_SIZE);
    for (int i = 0, k = 0; i < SET_SIZE; i++)
        images[i] = i == p ? odd : pool->images[c][members[k++]];
    return p;
}

int digit_sets_draw(DigitSets *s, const Digits *d, const DigitPool *pool, int64_t n,
                    uint64_t seed, uint64_t stream, Error *err)
{
    Rng rng;
    memset(s, 0, sizeof *s);
    if (n < 1 || n > INT32_MAX)
        return error_set(err, "%" PRId64 " sets: the number of sets must lie in 1..%d", n,
                         INT32_MAX);
    s->images = malloc((size_t)n * SET_SIZE * sizeof *s->images);
    s->odd = malloc((size_t)n * sizeof *s->odd);
    if (!s->images || !s->odd) {
        digit_sets_free(s);
        return error_set(err, "out of memory for %" PRId64 " sets", n);
    }
    rng_seed(&rng, seed, stream);
    for (int64_t i = 0; i < n; i++) s->odd[i] = draw_set(s->images + i * SET_SIZE, pool, &rng);
    s->digits = d;
    s->n = n;
    return 0;
}

void digit_sets_free(DigitSets *s)
{
    free(s->images);
    free(s->odd);
    memset(s, 0, sizeof *s);
}

void digit_features(const Digits *d, int64_t image, float *out)
{
    const float *p = d->pixels + image * DIGIT_PIXELS;
    for (int k = 0; k < DIGIT_PIXELS; k++) out[k] = p[k] / 16.0f;
}

/* Examples.fill: the image indices as src, the odd position as the target. */
static int fill_sets(const void *data, const int64_t *idx, int N, int64_t *src,
                     int64_t *tgt_in, int64_t *target, Error *err)
{
    const DigitSets *s = data;
    (void)tgt_in;
    for (int r = 0; r < N; r++) {
        if (idx[r] < 0 || idx[r] >= s->n)
            return error_set(err, "set %" PRId64 " is outside the %" PRId64 " sets", idx[r], s->n);
        memcpy(src + (size_t)r * SET_SIZE, s->images + idx[r] * SET_SIZE,
               SET_SIZE * sizeof *src);
        target[r] = s->odd[idx[r]];
    }
    return 0;
}

/* Examples.fill_features: (N, 10, 64), each image's pixels / 16. */
static int fill_set_features(const void *data, const int64_t *idx, int N, float *features,
                             Error *err)
{
    const DigitSets *s = data;
    for (int r = 0; r < N; r++) {
        if (idx[r] < 0 || idx[r] >= s->n)
            return error_set(err, "set %" PRId64 " is outside the %" PRId64 " sets", idx[r], s->n);
        for (int i = 0; i < SET_SIZE; i++)
            digit_features(s->digits, s->images[idx[r] * SET_SIZE + i],
                           features + ((size_t)r * SET_SIZE + i) * DIGIT_PIXELS);
    }
    return 0;
}

Examples digit_set_examples(const DigitSets *s)
{
    Examples e = {0};
    e.n = s->n;
    e.S = SET_SIZE;
    e.T = 0;
    e.one_target = 1;
    e.src_vocab = 0;
    e.tgt_vocab = 1;
    e.longest = SET_SIZE;
    e.data = s;
    e.fill = fill_sets;
    e.input_dim = DIGIT_PIXELS;
    e.fill_features = fill_set_features;
    return e;
}
