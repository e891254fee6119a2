/*
 * digits.h - seed 004's set anomaly task on handwritten digits: the images,
 * the fixed split, and sets of ten images of which one does not belong.
 *
 * The images are scikit-learn's 8x8 digits (reference/data/digits: 64
 * pixels each with values 0..16, labels 0..9), exported once by
 * reference/ch11_set_anomaly.py; an image becomes I = 64 features, pixel / 16.
 * Split: within each digit, counted in file order k = 0, 1, ..., an image is
 * a test image when k % 5 == 4, else a training image.
 *
 * A set (SET_SIZE = 10 elements, the book's S): nine distinct images of one
 * digit and one of another, the odd one at position p, the answer.
 * digit_sets_draw draws each set with the project's RNG in the order that
 * chapters/11_set_anomaly/README.md gives ("How a set is drawn"), which
 * reference/ch11_set_anomaly.py follows too. Training sets come from
 * (SETS_SEED, SETS_TRAIN_STREAM), test sets from (SETS_SEED, SETS_TEST_STREAM).
 *
 * Read next: programs/set_commands.h, then programs/11_set_anomaly.c, the chapter program.
 */
#ifndef DIGITS_H
#define DIGITS_H

#include <stdint.h>

#include "error.h"
#include "trainer.h"

#define DIGIT_PIXELS 64
#define DIGIT_CLASSES 10
#define SET_SIZE 10
#define DIGITS_PATH "reference/data/digits/digits.safetensors"
#define SETS_SEED 4
#define SETS_TRAIN_STREAM 1
#define SETS_TEST_STREAM 2

typedef struct {
    int64_t n;              /* images */
    float *pixels;          /* (n, 64) values 0..16 */
    int64_t *label;         /* (n,) 0..9 */
} Digits;

/* Reads the exported images: tensors pixels F32 (n, 64), every value in
 * [0, 16], and labels I64 (n,) in 0..9. Anything else is an error naming
 * the file. */
int digits_read(Digits *d, const char *path, Error *err);
void digits_free(Digits *d);

/* The images of each digit on one side of the split, ascending. */
typedef struct {
    int64_t count[DIGIT_CLASSES];
    int64_t *images[DIGIT_CLASSES];
} DigitPool;

/* The fixed split above. Every digit must keep at least SET_SIZE - 1 images
 * on each side (a set needs nine distinct ones). */
int digits_split(const Digits *d, DigitPool *train, DigitPool *test, Error *err);
void digit_pool_free(DigitPool *p);

/* n sets drawn from pool. */
typedef struct {
    const Digits *digits;
    int64_t n;
    int64_t *images;        /* (n, SET_SIZE) image indices */
    int64_t *odd;           /* (n,) the position of the odd one */
} DigitSets;

int digit_sets_draw(DigitSets *s, const Digits *d, const DigitPool *pool, int64_t n,
                    uint64_t seed, uint64_t stream, Error *err);
void digit_sets_free(DigitSets *s);

/* The features of one image: pixel / 16, 64 floats. */
void digit_features(const Digits *d, int64_t image, float *out);

/* The sets as the trainer's examples (trainer.h): features (N, 10, 64), the
 * image indices as src, the odd position as the target. s must outlive them. */
Examples digit_set_examples(const DigitSets *s);

#endif
