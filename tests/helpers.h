/*
 * helpers.h - what every chapter's cmocka tests share: loading a golden case
 * and comparing float arrays within the case's tolerance.
 *
 * A golden case is golden/<chapter>/<name>.safetensors, written by
 * reference/ (make golden). A missing or unreadable golden fails the test with
 * the reader's one-line error; it never passes silently.
 *
 * Include order in a test file: the cmocka prerequisites, then cmocka.h, then
 * this header.
 */
#ifndef TEST_HELPERS_H
#define TEST_HELPERS_H

#include <stddef.h>
#include <stdint.h>

#include "casefile.h"
#include "safetensors.h"

/* One cmocka test per golden case: the case name travels as the test's state.
 * Use in a CMUnitTest array: GOLDEN_TEST(test_sdpa_case, "causal"). */
#define GOLDEN_TEST(func, case_name) \
    { case_name, func, NULL, NULL, (void *)(case_name) }

/* Reads golden/<chapter>/<name>.safetensors into `file`, or fails the test. */
void load_golden(TensorFile *file, const char *chapter, const char *name);

/* The tensor `name` with the given dtype, or fails the test. */
const Tensor *golden_tensor(const TensorFile *file, const char *name, DType dtype);

/* The non-negative integer metadata `key` of the case, or fails the test. */
int64_t golden_meta_int(const TensorFile *file, const char *key);

/* Optional metadata of the case: `fallback` when the key is missing; a value
 * that does not parse fails the test. */
double golden_meta_double(const TensorFile *file, const char *key, double fallback);
long long golden_meta_long(const TensorFile *file, const char *key, long long fallback);
int golden_meta_bool(const TensorFile *file, const char *key, int fallback);

/* dst = a deep copy of the case src, path and metadata included, without the
 * tensor `skip` (NULL: keep all); the bad-input tests break the copy. */
void golden_copy(const TensorFile *src, const char *skip, TensorFile *dst);

/* The case's tolerances, from its metadata "atol" and "rtol" (both required). */
void golden_tolerance(const TensorFile *file, double *atol, double *rtol);

/* Fails the test unless |actual - expected| <= atol + rtol * |expected|
 * everywhere (torch.allclose's rule; NaN never passes, matching infinities
 * do). Prints one line with the max absolute and relative error, and on
 * failure the first few mismatches. */
void assert_close(const char *label, const float *actual, const float *expected,
                  int64_t n, double atol, double rtol);

/* Compares `actual` with the F32 tensor `name` of the case, sizes included. */
void assert_close_to_golden(const TensorFile *file, const char *name, const float *actual,
                            int64_t n, double atol, double rtol);

/* Fails the test unless `eval` refuses the case `in` (whose path must be
 * set) the way PRODUCT.md asks of bad input: return -1 with one line that
 * names the file and contains `expect`, and no outputs. */
void assert_case_refused(CaseEval eval, const TensorFile *in, const char *expect);

/* A zeroed buffer of n floats for a test's outputs; free() it. */
float *test_floats(int64_t n);

#endif
