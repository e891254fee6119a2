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
#include "error.h"
#include "safetensors.h"

/* One cmocka test per golden case: the case name travels as the test's state.
 * Use in a CMUnitTest array: GOLDEN_TEST(test_sdpa_case, "causal"). */
#define GOLDEN_TEST(func, case_name) \
    { case_name, func, NULL, NULL, (void *)(case_name) }
/* The same golden through another test function, named "<what>/<case>" so
 * that no two tests of a program share a name. */
#define GOLDEN_TEST_AS(func, what, case_name) \
    { what "/" case_name, func, NULL, NULL, (void *)(case_name) }

/* Reads golden/<chapter>/<name>.safetensors into `file`, or fails the test. */
void load_golden(TensorFile *file, const char *chapter, const char *name);

/* The tensor `name` with the given dtype, or fails the test. */
const Tensor *golden_tensor(const TensorFile *file, const char *name, DType dtype);

/* Whether the case's metadata "op" is `op`. */
int golden_op_is(const TensorFile *file, const char *op);

/* The data of the F32 tensor `name` of the case, or fails the test. */
const float *golden_f32(const TensorFile *file, const char *name);

/* The same for a parameter: the layers' parameter structs (MhaParams, ...)
 * hold float *, one type for parameters and gradients. */
float *golden_param(const TensorFile *file, const char *name);

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

/* The case's name for messages: its file name without folder and suffix. */
const char *golden_case_name(const TensorFile *file, char *buf, size_t size);

/* Fails the test unless `call` (an int function of the project) returns 0,
 * saying which function failed and, when it ran into an exercise stub, which
 * one: "sdpa_forward returned -1: softmax_row is not written yet
 * (chapters/00_foundations/softmax.c)". */
#define assert_ok(call)                                                    \
    do {                                                                   \
        not_implemented_clear();                                           \
        int assert_ok_rc_ = (call);                                        \
        assert_ok_at(assert_ok_rc_, #call, __FILE__, __LINE__);           \
    } while (0)
void assert_ok_at(int rc, const char *call, const char *file, int line);

/* Fails unless actual == expected (numbers: floats exactly, -inf equal to
 * -inf, NaN never), printing both values beside the two expressions, where
 * assert_true would print only "actual == expected". */
#define assert_same(actual, expected) \
    assert_same_at((actual), (expected), #actual, #expected, __FILE__, __LINE__)
void assert_same_at(double actual, double expected, const char *actual_text,
                    const char *expected_text, const char *file, int line);

/* Compares `actual` with the F32 tensor `name` of the case, sizes included. */
void assert_close_to_golden(const TensorFile *file, const char *name, const float *actual,
                            int64_t n, double atol, double rtol);

/* The same for an F64 tensor of the case. */
void assert_close_f64_to_golden(const TensorFile *file, const char *name, const double *actual,
                                int64_t n, double atol, double rtol);

/* Fails unless `actual` equals the I64 tensor `name` of the case exactly;
 * prints the first differences. */
void assert_i64_equal_to_golden(const TensorFile *file, const char *name,
                                const int64_t *actual, int64_t n);

/* Evaluates the golden case `file` with `eval` and compares every tensor its
 * "outputs" metadata lists, dtype and shape included: F32 and F64 within
 * the case's tolerance, I64 and BOOL exactly. The outputs stay in `out`
 * (which must start empty) for further checks; returns how many the case
 * lists. */
int assert_case_outputs(CaseEval eval, const TensorFile *file, TensorFile *out);

/* Fails the test unless `eval` refuses the case `in` (whose path must be
 * set) the way PRODUCT.md asks of bad input: return -1 with one line that
 * names the file and contains `expect`, and no outputs. */
void assert_case_refused(CaseEval eval, const TensorFile *in, const char *expect);

/* A broken case for the bad-input tests: a golden with one change. */
typedef enum {
    BREAK_SET_META,     /* metadata key = value ("" renames the key: nothing reads it) */
    BREAK_DROP,         /* remove tensor `key` */
    BREAK_RESHAPE,      /* replace (or add) tensor `key`: F32 of `shape`, every value
                           atof(value), or 0 when value is NULL */
    BREAK_RESHAPE_I64,  /* the same, I64 (atoll(value)) */
    BREAK_RESHAPE_BOOL, /* the same, BOOL, zeros */
    BREAK_RETYPE_I64,   /* replace tensor `key` by I64 zeros of its own shape */
    BREAK_RETYPE_F32,   /* the same, F32 */
    BREAK_POKE_I64,     /* element 0 of the I64 tensor `key` = atoll(value) */
    BREAK_POKE_F32,     /* element 0 of the F32 tensor `key` = atof(value) */
    BREAK_POKE_BYTE,    /* byte 0 of the BOOL tensor `key` = atoi(value) */
} Breakage;

typedef struct {
    const char *name;       /* the test's name */
    const char *golden;     /* a valid case of the chapter to start from */
    Breakage change;
    const char *key;        /* the metadata key or tensor changed */
    const char *value;
    int64_t shape[3];       /* BREAK_RESHAPE*: the new shape, `ndim` entries used */
    int ndim;
    const char *expect;     /* a phrase the error must contain */
} BrokenCase;

/* f = golden/<chapter>/<bad->golden> with bad's change made; free it with
 * tensorfile_free. */
void broken_case_make(TensorFile *f, const char *chapter, const BrokenCase *bad);

/* Writes the bad case to a file and runs it as the chapter program would
 * (run_case_file): fails unless that exits with 1 and writes no output. */
void assert_broken_case_writes_no_file(const char *chapter, const BrokenCase *bad, CaseEval eval);

/* One reader of the malformed-input corpus: reads path (writing out_path,
 * if it writes anything) and returns 0, or -1 with err set. */
typedef int (*CorpusReader)(const char *path, const char *out_path, Error *err);

/* The chapter's malformed-input corpus, tests/malformed/<chapter>/ (made by
 * tests/malformed/make_corpus.py): runs `read` on every file its
 * expected.txt lists and fails unless each gets -1 and a one-line error
 * that names the file and contains the listed phrase, and no output file
 * appears. Fewer than min_files listed files fail too. */
void check_malformed_corpus(const char *chapter, CorpusReader read, int min_files);

/* case_file_run of the chapter's evaluator, as a CorpusReader: the
 * program's --case mode, without the printing. */
#define CASE_CORPUS_READER(name, eval)                                        \
    static int name(const char *path, const char *out_path, Error *err)     \
    {                                                                         \
        return case_file_run(path, out_path, eval, err);                      \
    }

/* A zeroed buffer of n floats for a test's outputs; free() it. */
float *test_floats(int64_t n);

/* Runs the shell command line cmd (a chapter program, say), its standard
 * output and error together into out (at most size - 1 bytes, NUL-ended),
 * and prints both indented; returns its exit status (-1: it did not exit). */
int run_command(const char *cmd, char *out, size_t size);

/* A uniform draw in [-1, 1) from a 32-bit xorshift state (not zero): the
 * tests' own numbers, independent of chapter 00's Rng (which a student
 * writes). */
float test_uniform(uint32_t *state);

/* Every test program's main ends with this: runs the CMUnitTest array `tests`
 * (cmocka_run_group_tests_name without group fixtures) and returns its
 * status. Two environment variables pick the tests, for tools/grade.sh and
 * for running one test by hand:
 *   TEST_LIST=1       prints the names of the tests, one a line, runs none
 *   TEST_ONLY=<name>  runs the test of that name alone (exact match); a name
 *                     the program does not have is an error (exit 2)
 * Standard output is line-buffered, so when a test crashes or is stopped the
 * lines of the tests before it are not lost in a buffer. */
#define run_chapter_tests(group_name, tests) \
    run_tests_selected((group_name), (tests), sizeof(tests) / sizeof((tests)[0]))
int run_tests_selected(const char *group_name, const struct CMUnitTest *tests, size_t count);

#endif
