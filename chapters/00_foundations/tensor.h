/*
 * tensor.h - the one tensor type of the project.
 *
 * A Tensor is a dtype, a shape and a pointer to contiguous row-major data:
 * element (i0, i1, ..., i{n-1}) sits at offset
 *     ((i0 * shape[1] + i1) * shape[2] + i2) ... 
 * There are no strides and no views: every layer takes raw `float *`
 * pointers plus the sizes it needs ((N, T, D), ...), the way llm.c does, and a
 * Tensor is only how data travels in and out of files.
 *
 * Compute is float32 throughout. The integer and boolean dtypes exist because
 * case files carry token ids (I64) and attention masks (BOOL).
 *
 * Read next: matmul.h, softmax.h, rng.h, philox.h, threads.h, error.h, safetensors.h
 * (the order of the chapter's README).
 */
#ifndef TENSOR_H
#define TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

#define TENSOR_MAX_DIMS 8

typedef enum {
    DTYPE_F32,
    DTYPE_F64,
    DTYPE_I64,
    DTYPE_I32,
    DTYPE_U8,
    DTYPE_BOOL,   /* one byte per element, 0 or 1 */
} DType;

typedef struct {
    DType dtype;
    int ndim;                          /* 0 (a scalar) .. TENSOR_MAX_DIMS */
    int64_t shape[TENSOR_MAX_DIMS];
    void *data;                        /* owned, contiguous row-major */
} Tensor;

/* Bytes per element of a dtype. */
size_t dtype_size(DType dtype);

/* The safetensors spelling of a dtype ("F32", "BOOL", ...). */
const char *dtype_name(DType dtype);

/* Parses a safetensors dtype name; returns -1 for one this project does not read. */
int dtype_from_name(const char *name, DType *dtype);

/* Number of elements: the product of the shape (1 for a scalar). */
int64_t tensor_numel(const Tensor *t);

/* Checked size arithmetic. A size computed from input (a shape read from a
 * file, an option, a config) is formed with these, so that none wraps: each
 * fails, returning -1, when a factor is negative or a factor or the result
 * passes SIZE_LIMIT, and otherwise stores the result in *out and returns 0. The
 * limit, 2^48, is far above any memory and far below where an int64_t
 * product of two sizes under it could wrap. */
#define SIZE_LIMIT ((int64_t)1 << 48)
int size_mul(int64_t *out, int64_t a, int64_t b);
int size_product(int64_t *out, int n, const int64_t *factors);

/* Allocates zeroed data for the given dtype and shape (NULL for a scalar,
 * ndim 0). */
int tensor_alloc(Tensor *t, DType dtype, int ndim, const int64_t *shape, Error *err);

/* Frees the data and leaves an empty tensor; safe on an empty tensor. */
void tensor_free(Tensor *t);

/* x[0..n) = 0, and dst[0..n) = src[0..n) (the two may not overlap), with
 * the threads sharing the buffer. The backward passes zero or copy a
 * gradient buffer of a whole batch before every layer adds into it; a
 * memset of one thread would leave the other cores waiting. Small buffers
 * (FLOATS_PARALLEL_MIN) are done by the calling thread alone. */
#define FLOATS_PARALLEL_MIN (1 << 14)
void floats_zero(float *x, size_t n);
void floats_copy(float *dst, const float *src, size_t n);

/* Sums over the rows of a batch (a bias gradient: the column sums of dy),
 * the same for any thread count and made where the rows are. The rows are
 * cut into blocks of SUM_ROWS; the threads share out the blocks, and each
 * block is summed, row after row, into partial sums of its own (one float
 * per column). Then partial_sums_add adds the blocks' partial sums, in block
 * order, and adds the total into out once:
 *
 *     out[j] += ((partial[0][j] + partial[1][j]) + partial[2][j]) + ...
 *
 * partial is (blocks, n), blocks = sum_blocks(rows). Summing each column
 * over all rows on one thread gives the same independence of the thread
 * count, but then every thread reads every row, most of them from another
 * core's cache, and a layer with fewer columns than threads leaves threads
 * idle. */
#define SUM_ROWS 256
int sum_blocks(int rows);
void partial_sums_add(float *out, const float *partial, int blocks, int n);

/* Subnormal floats (nonzero, below 2^-126 = 1.2e-38 in size) become 0, as
 * inputs and as results, in this thread and in every thread it starts
 * later: MXCSR's flush-to-zero and denormals-are-zero bits on x86-64, FPCR's
 * FZ bit on 64-bit ARM; elsewhere nothing changes. Every program calls it
 * first thing (case_main, task_main, the tests' main), before OpenMP starts
 * its threads, which inherit the setting. Why: a product that makes or takes
 * a subnormal costs a microcode assist, about a hundred cycles on x86,
 * and training makes many (a tiny attention weight times a small gradient);
 * the chapter's README measures it. A result moves by under 1.2e-38, far
 * inside every tolerance. PyTorch does the same after
 * torch.set_flush_denormal(True). FLUSHES_SUBNORMALS says whether this CPU
 * is one it acts on. */
#if defined(__x86_64__) || defined(_M_X64) || defined(__aarch64__)
#define FLUSHES_SUBNORMALS 1
#else
#define FLUSHES_SUBNORMALS 0
#endif
void flush_subnormals(void);

/* Prints a (rows, cols) float matrix under a title, 4 decimals: for demos. */
void matrix_print(const char *title, const float *m, int rows, int cols);

/* Writes "(2, 3, 4)" into buf. */
const char *tensor_shape_str(const Tensor *t, char *buf, size_t size);

#endif
