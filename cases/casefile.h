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
 * Each chapter lists its ops in a table (CaseOp); case_dispatch() finds the
 * op, checks the keys and calls the op's function. run_case_file() does the
 * reading, the writing and the error reporting.
 */
#ifndef CASEFILE_H
#define CASEFILE_H

#include "safetensors.h"

/* Evaluates the case `in`, adding its outputs to `out`. */
typedef int (*CaseEval)(const TensorFile *in, TensorFile *out, Error *err);

/* One op of a chapter: its name, its options (space-separated; "model.*"
 * admits a model configuration) and the function that evaluates it. A
 * chapter's table ends with an entry whose name is NULL. */
typedef struct {
    const char *name;
    const char *options;
    CaseEval eval;
} CaseOp;

/* Evaluates the case `in` with the op of `ops` that its metadata names,
 * after checking that every metadata key is one the op knows. `chapter`
 * ("02") is for the message when the op is not in the table. */
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
 * naming the dimensions: "tensor 'key' has shape (2, 5), expected (N, S, E)
 * = (2, 6, *)". */
int case_check_shape(const TensorFile *in, const char *name, const Tensor *t,
                     const int64_t *expect, const char *letters, Error *err);

/* "(2, 3, 4)" for a shape given as an array of ndim sizes, in buf. */
const char *case_shape_str(const int64_t *shape, int ndim, char *buf, size_t size);

/* Fails unless every dimension of the tensor `name`, t, is between 1 and
 * INT_MAX (the sizes the kernels take as int). */
int case_check_dims(const TensorFile *in, const char *name, const Tensor *t, Error *err);

/* The F32 tensor `name` of the case with exactly the shape `want` (ndim
 * dims), in *t; `letters` spells the shape for the message, e.g. "(E, kdim)". */
int case_get_shaped(const TensorFile *in, const char *name, const int64_t *want, int ndim,
                    const char *letters, const Tensor **t, Error *err);

/* Adds a zeroed F32 tensor `name` of the given shape to the outputs `out` and
 * returns its data, or NULL (with err set). Since run_case_file writes the
 * output file only when the whole evaluation succeeds, an evaluator adds its
 * outputs as it goes and simply returns -1 on any failure. */
float *case_output_f32(TensorFile *out, const char *name, int ndim, const int64_t *shape,
                       Error *err);

/* Reads in_path, evaluates it, writes out_path (atomically: on failure no
 * output file appears). Returns 0, or -1 with err set. */
int case_file_run(const char *in_path, const char *out_path, CaseEval eval, Error *err);

/* case_file_run for a program: on failure prints "prog: <error>" to stderr.
 * Returns the exit status: 0 or 1. */
int run_case_file(const char *prog, const char *in_path, const char *out_path, CaseEval eval);

/* The common command line: `--demo`, or `--case IN --out OUT`. Anything else
 * prints `usage` and returns 2. A chapter with more options of its own parses
 * them first and calls this for the rest. */
int case_main(int argc, char **argv, const char *usage, int (*demo)(void), CaseEval eval);

#endif
