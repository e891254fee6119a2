/*
 * casefile.h - the case-file contract every chapter program follows.
 *
 *     build/NN_name --case in.safetensors --out out.safetensors
 *
 * reads the inputs and options (metadata "op" and the op's own keys) from the
 * case, runs the op, and writes the outputs and gradients under the names the
 * case's "outputs" metadata lists. `make verify` drives the programs this way,
 * and so can any PyTorch script.
 *
 * The metadata of a case holds three kinds of key:
 *   - the keys every case carries: op, outputs, atol, rtol, seed and
 *     torch_version;
 *   - the op's options, the arguments of the PyTorch call it matches, one
 *     spelling across all chapters: nhead (never num_heads), eps (never
 *     layer_norm_eps), dropout (never p or dropout_p), booleans "true" and
 *     "false". A model's configuration is its checkpoint metadata, "model.*";
 *   - "info.*": what the reference notes about the case (its sizes, the
 *     condition number of its inputs, the loss PyTorch reported). The
 *     programs never read these; they are for people and the tests.
 * Any other key is refused, naming the options the op knows: a misspelt
 * option would otherwise leave its default in force without a word.
 *
 * Each chapter lists its ops in a table (CaseOp): for each op its options
 * with their type, range and default (CaseOption), the tensors it reads and
 * writes, and the function that evaluates it. case_dispatch() finds the op,
 * reads and checks every option against the table (one wording for every
 * bad value in every chapter) and hands the function the values (CaseArgs);
 * the function checks the tensors and what ties options to shapes (nhead
 * divides d_model, max_len covers the sequence). run_case_file() does the
 * reading, the writing and the error reporting.
 */
#ifndef CASEFILE_H
#define CASEFILE_H

#include "safetensors.h"

/* Evaluates the case `in`, adding its outputs to `out`. */
typedef int (*CaseEval)(const TensorFile *in, TensorFile *out, Error *err);

/* The type of an option's value. */
typedef enum { CASE_BOOL, CASE_INT, CASE_FLOAT, CASE_TEXT } CaseType;

/* One option of an op, the PyTorch argument it stands for. */
typedef struct {
    const char *name;       /* the metadata key */
    CaseType type;
    const char *range;      /* an int's or a float's interval, "[0, 1)", "(0, inf)";
                               a text's words, "source|target"; NULL for a bool */
    const char *fallback;   /* the value when the case leaves it out, spelt as in the
                               metadata; NULL: required; "": the op decides
                               (case_given() says whether the case set it) */
    const char *what;       /* what it is, for messages: "the number of heads" */
} CaseOption;

#define CASE_MAX_OPTIONS 16

/* An op's option values in one case, read and checked by case_dispatch. */
typedef struct {
    const CaseOption *options;
    int n;
    double number[CASE_MAX_OPTIONS];       /* bools (0, 1), ints and floats */
    long long integer[CASE_MAX_OPTIONS];   /* ints, exactly */
    const char *text[CASE_MAX_OPTIONS];    /* texts */
    int given[CASE_MAX_OPTIONS];           /* 1: the case set it */
} CaseArgs;

/* Evaluates the case `in` with its checked options `args`. */
typedef int (*CaseOpEval)(const TensorFile *in, const CaseArgs *args, TensorFile *out,
                          Error *err);

/* One op of a chapter. A chapter's table ends with an entry whose name is
 * NULL; so does an op's list of options. An op that runs a whole model
 * also takes the model.* keys, which the model's loader checks. */
typedef struct {
    const char *name;
    const CaseOption *options;
    int model;              /* 1: the case holds a model (model.* keys) */
    const char *inputs;     /* the tensors it reads; [name]: optional */
    const char *outputs;    /* the tensors it writes */
    CaseOpEval eval;
} CaseOp;

/* Reads and checks the options `options` (ending with {0}) of the case into
 * a: each one of its type, inside its range, or its fallback; a required
 * one present. case_dispatch() calls it; so does a reader a test calls
 * without the dispatcher (sdpa_case_read). */
int case_read_args(const CaseOption *options, const TensorFile *in, CaseArgs *a, Error *err);

/* An option's value (its fallback when the case left it out). Asking for a
 * name the op does not declare is a programming error and aborts. */
long long case_int(const CaseArgs *a, const char *name);
double case_float(const CaseArgs *a, const char *name);
int case_bool(const CaseArgs *a, const char *name);
const char *case_text(const CaseArgs *a, const char *name);
/* Whether the case set the option itself. */
int case_given(const CaseArgs *a, const char *name);

/* Evaluates the case `in` with the op of `ops` that its metadata names,
 * after reading and checking every metadata key against the op's table.
 * `chapter` ("02") is for the message when the op is not in the table. */
int case_dispatch(const CaseOp *ops, const char *chapter, const TensorFile *in,
                  TensorFile *out, Error *err);

/* Whether the case's op is a backward one (its name ends in "_backward"). */
int case_is_backward(const TensorFile *in);

/* The case's file name for messages; "(case)" for a TensorFile built in
 * memory (the tests build some). */
const char *case_name(const TensorFile *in);

/* Fails unless the tensor `name` of the case `in`, t, has the dimensions of
 * `expect` wherever expect[i] >= 0 (ndim entries; -1: any size). The message
 * names the file, the tensor, its shape and the expected one, with `letters`
 * naming the dimensions: "tensor 'key' has shape (2, 5), expected (N, S, D)
 * = (2, 6, *)". */
int case_check_shape(const TensorFile *in, const char *name, const Tensor *t,
                     const int64_t *expect, const char *letters, Error *err);

/* "(2, 3, 4)" for a shape given as an array of ndim sizes, in buf. */
const char *case_shape_str(const int64_t *shape, int ndim, char *buf, size_t size);

/* Fails unless every dimension of the tensor `name`, t, is between 1 and
 * INT_MAX (the sizes the kernels take as int). */
int case_check_dims(const TensorFile *in, const char *name, const Tensor *t, Error *err);

/* The F32 tensor `name` of the case with exactly the shape `want` (ndim
 * dims), in *t; `letters` spells the shape for the message, e.g. "(D, kdim)". */
int case_get_shaped(const TensorFile *in, const char *name, const int64_t *want, int ndim,
                    const char *letters, const Tensor **t, Error *err);

/* Adds a zeroed F32 tensor `name` of the given shape to the outputs `out` and
 * returns its data, or NULL (with err set). Since run_case_file writes the
 * output file only when the whole evaluation succeeds, an evaluator adds its
 * outputs as it goes and simply returns -1 on any failure. */
float *case_output_f32(TensorFile *out, const char *name, int ndim, const int64_t *shape,
                       Error *err);
/* The same for any dtype (an I64 id, an F64 loss). */
void *case_output(TensorFile *out, const char *name, DType dtype, int ndim,
                  const int64_t *shape, Error *err);

/* Guard pages. While case_file_run evaluates a case, every tensor the case
 * brings and every tensor an evaluator makes with case_tensor_alloc (the
 * outputs, through case_output, and the buffers it hands a chapter's
 * function) ends exactly where a page the process may not touch
 * (PROT_NONE) begins. A read or a write one element past the end then
 * faults in the plain build, not only under the sanitizers, and the
 * grader scores the case as a crash. Outside case_file_run (a test calling
 * an evaluator itself), and under AddressSanitizer (whose heap red zones
 * catch a stray access on either side), these are plain tensor_alloc
 * allocations.
 * case_tensor_free frees either kind; use it for whatever
 * case_tensor_alloc made. */
int case_tensor_alloc(Tensor *t, DType dtype, int ndim, const int64_t *shape, Error *err);
void case_tensor_free(Tensor *t);

/* A library function failed after the case's checks: err becomes its own
 * message if it set one (inner), else "<case>: <function> failed" (an
 * exercise stub sets none). Returns -1. */
int case_call_failed(const TensorFile *in, const char *function, const Error *inner,
                     Error *err);

/* Reads in_path, evaluates it, writes out_path (atomically: on failure no
 * output file appears). Returns 0, or -1 with err set. */
int case_file_run(const char *in_path, const char *out_path, CaseEval eval, Error *err);

/* case_file_run for a program: on failure prints "prog: <error>" to stderr.
 * Returns the exit status: 0 or 1. */
int run_case_file(const char *prog, const char *in_path, const char *out_path, CaseEval eval);

/* The common command line: `--demo`, `--help` (prints `usage`, returns 0),
 * or `--case IN --out OUT`. Anything else prints `usage` and returns 2. A
 * chapter with more options of its own parses them first and calls this
 * for the rest. */
int case_main(int argc, char **argv, const char *usage, int (*demo)(void), CaseEval eval);

#endif
