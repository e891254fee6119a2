/* tensor.c - see tensor.h. */
#include "tensor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(_M_X64)
#include <xmmintrin.h>
#endif

static const struct {
    DType dtype;
    const char *name;
    size_t size;
} DTYPES[] = {
    {DTYPE_F32, "F32", 4}, {DTYPE_F64, "F64", 8}, {DTYPE_I64, "I64", 8},
    {DTYPE_I32, "I32", 4}, {DTYPE_U8, "U8", 1},   {DTYPE_BOOL, "BOOL", 1},
};
#define N_DTYPES (sizeof DTYPES / sizeof DTYPES[0])

size_t dtype_size(DType dtype)
{
    for (size_t i = 0; i < N_DTYPES; i++)
        if (DTYPES[i].dtype == dtype) return DTYPES[i].size;
    return 0;
}

const char *dtype_name(DType dtype)
{
    for (size_t i = 0; i < N_DTYPES; i++)
        if (DTYPES[i].dtype == dtype) return DTYPES[i].name;
    return "?";
}

int dtype_from_name(const char *name, DType *dtype)
{
    for (size_t i = 0; i < N_DTYPES; i++) {
        if (strcmp(DTYPES[i].name, name) == 0) {
            *dtype = DTYPES[i].dtype;
            return 0;
        }
    }
    return -1;
}

int64_t tensor_numel(const Tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

int size_mul(int64_t *out, int64_t a, int64_t b)
{
    if (a < 0 || b < 0 || a > SIZE_LIMIT || b > SIZE_LIMIT) return -1;
    if (a != 0 && b > SIZE_LIMIT / a) return -1;
    *out = a * b;
    return 0;
}

int size_product(int64_t *out, int n, const int64_t *factors)
{
    int64_t p = 1;
    for (int i = 0; i < n; i++)
        if (size_mul(&p, p, factors[i]) != 0) return -1;
    *out = p;
    return 0;
}

int tensor_alloc(Tensor *t, DType dtype, int ndim, const int64_t *shape, Error *err)
{
    memset(t, 0, sizeof *t);
    if (ndim < 0 || ndim > TENSOR_MAX_DIMS)
        return error_set(err, "tensor rank %d is outside 0..%d", ndim, TENSOR_MAX_DIMS);
    int64_t numel, bytes;
    if (size_product(&numel, ndim, shape) != 0 ||
        size_mul(&bytes, numel, (int64_t)dtype_size(dtype)) != 0) {
        char buf[160];
        t->ndim = ndim;
        memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
        return error_set(err, "tensor shape %s is negative or too large",
                         tensor_shape_str(t, buf, sizeof buf));
    }
    t->dtype = dtype;
    t->ndim = ndim;
    /* A scalar's shape may be NULL; memcpy from NULL is undefined even for
     * 0 bytes. */
    if (ndim > 0) memcpy(t->shape, shape, (size_t)ndim * sizeof *shape);
    t->data = calloc(bytes ? (size_t)bytes : 1, 1);   /* never NULL, even when empty */
    if (!t->data) {
        t->ndim = 0;
        return error_set(err, "out of memory allocating %lld bytes", (long long)bytes);
    }
    return 0;
}

void tensor_free(Tensor *t)
{
    free(t->data);
    memset(t, 0, sizeof *t);
}

const char *tensor_shape_str(const Tensor *t, char *buf, size_t size)
{
    size_t used = (size_t)snprintf(buf, size, "(");
    for (int i = 0; i < t->ndim && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, i ? ", %lld" : "%lld",
                                 (long long)t->shape[i]);
    if (used < size) snprintf(buf + used, size - used, ")");
    return buf;
}

void floats_zero(float *x, size_t n)
{
    #pragma omp parallel for schedule(static) if (n >= FLOATS_PARALLEL_MIN)
    for (size_t i = 0; i < n; i++) x[i] = 0.0f;
}

void floats_copy(float *dst, const float *src, size_t n)
{
    #pragma omp parallel for schedule(static) if (n >= FLOATS_PARALLEL_MIN)
    for (size_t i = 0; i < n; i++) dst[i] = src[i];
}

int sum_blocks(int rows)
{
    return (rows + SUM_ROWS - 1) / SUM_ROWS;
}

void partial_sums_add(float *out, const float *partial, int blocks, int n)
{
    for (int j = 0; j < n; j++) {
        float total = partial[j];
        for (int b = 1; b < blocks; b++) total += partial[(size_t)b * n + j];
        out[j] += total;
    }
}

void matrix_print(const char *title, const float *m, int rows, int cols)
{
    printf("%s (%d, %d):\n", title, rows, cols);
    for (int r = 0; r < rows; r++) {
        printf("  ");
        for (int c = 0; c < cols; c++) printf(" %8.4f", m[(size_t)r * cols + c]);
        printf("\n");
    }
}

void flush_subnormals(void)
{
#if defined(__x86_64__) || defined(_M_X64)
    _mm_setcsr(_mm_getcsr() | 0x8040);            /* FTZ (bit 15) and DAZ (bit 6) */
#elif defined(__aarch64__)
    uint64_t fpcr;
    __asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
    __asm__ volatile("msr fpcr, %0" : : "r"(fpcr | (UINT64_C(1) << 24)));   /* FZ */
#endif
}
