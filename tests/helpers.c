/* helpers.c - see helpers.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "helpers.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void load_golden(TensorFile *file, const char *chapter, const char *name)
{
    char path[512];
    snprintf(path, sizeof path, "golden/%s/%s.safetensors", chapter, name);
    Error err;
    if (safetensors_read(path, file, &err) != 0) {
        print_error("%s (run make golden)\n", err.msg);
        fail();
    }
}

const Tensor *golden_tensor(const TensorFile *file, const char *name, DType dtype)
{
    const Tensor *t = NULL;
    Error err;
    if (tensorfile_get(file, name, dtype, -1, &t, &err) != 0) {
        print_error("%s\n", err.msg);
        fail();
    }
    return t;
}

int64_t golden_meta_int(const TensorFile *file, const char *key)
{
    long long v;
    Error err;
    if (tensorfile_meta_int(file, key, -1, &v, &err) != 0 || v < 0) {
        print_error("%s: metadata '%s' missing or not a non-negative integer\n", file->path, key);
        fail();
    }
    return v;
}

void golden_tolerance(const TensorFile *file, double *atol, double *rtol)
{
    Error err;
    if (!tensorfile_meta(file, "atol") || !tensorfile_meta(file, "rtol")) {
        print_error("%s: metadata atol and rtol are required\n", file->path);
        fail();
    }
    if (tensorfile_meta_double(file, "atol", 0, atol, &err) != 0 ||
        tensorfile_meta_double(file, "rtol", 0, rtol, &err) != 0) {
        print_error("%s\n", err.msg);
        fail();
    }
}

void assert_close(const char *label, const float *actual, const float *expected, int64_t n,
                  double atol, double rtol)
{
    double max_abs = 0, max_rel = 0;
    int64_t bad = 0;
    for (int64_t i = 0; i < n; i++) {
        double a = actual[i], e = expected[i];
        int ok;
        double diff;
        if (isinf(e) || isinf(a)) {
            ok = (a == e);
            diff = ok ? 0 : INFINITY;
        } else {
            diff = fabs(a - e);       /* NaN in either gives NaN: not ok below */
            ok = diff <= atol + rtol * fabs(e);
        }
        if (isnan(diff)) diff = INFINITY;
        if (diff > max_abs) max_abs = diff;
        if (e != 0 && diff / fabs(e) > max_rel) max_rel = diff / fabs(e);
        if (!ok) {
            if (bad < 5)
                print_message("    %s[%lld]: got %.9g, expected %.9g (diff %.3g)\n", label,
                              (long long)i, a, e, diff);
            bad++;
        }
    }
    print_message("  %-44s %7lld values  max abs err %.3g  max rel err %.3g  (atol %.0e, "
                  "rtol %.0e)%s\n", label, (long long)n, max_abs, max_rel, atol, rtol,
                  bad ? "  FAILED" : "");
    if (bad) {
        print_error("%s: %lld of %lld values outside tolerance; max abs err %.3g\n", label,
                    (long long)bad, (long long)n, max_abs);
        fail();
    }
}

void assert_close_to_golden(const TensorFile *file, const char *name, const float *actual,
                            int64_t n, double atol, double rtol)
{
    const Tensor *t = golden_tensor(file, name, DTYPE_F32);
    if (tensor_numel(t) != n) {
        print_error("%s: '%s' has %lld values, the code produced %lld\n", file->path, name,
                    (long long)tensor_numel(t), (long long)n);
        fail();
    }
    /* Label comparisons "case/tensor", the case being the file name's stem. */
    const char *base = strrchr(file->path, '/');
    base = base ? base + 1 : file->path;
    char label[160];
    snprintf(label, sizeof label, "%.*s/%s", (int)strcspn(base, "."), base, name);
    assert_close(label, actual, t->data, n, atol, rtol);
}

void assert_case_refused(CaseEval eval, const TensorFile *in, const char *expect)
{
    TensorFile out = {0};
    Error err = {{0}};
    assert_non_null(in->path);
    int rc = eval(in, &out, &err);
    print_message("  %s\n", err.msg);
    int outputs = out.n_tensors;
    tensorfile_free(&out);
    assert_int_equal(rc, -1);
    assert_non_null(strstr(err.msg, in->path));        /* names the file */
    if (!strstr(err.msg, expect)) {
        print_error("expected the error to mention '%s'\n", expect);
        fail();
    }
    assert_null(strchr(err.msg, '\n'));                 /* one line */
    assert_int_equal(outputs, 0);                       /* nothing half-written */
}

float *test_floats(int64_t n)
{
    float *p = calloc((size_t)(n > 0 ? n : 1), sizeof *p);
    assert_non_null(p);
    return p;
}

double golden_meta_double(const TensorFile *file, const char *key, double fallback)
{
    double v;
    Error err;
    if (tensorfile_meta_double(file, key, fallback, &v, &err) != 0) {
        print_error("%s\n", err.msg);
        fail();
    }
    return v;
}

long long golden_meta_long(const TensorFile *file, const char *key, long long fallback)
{
    long long v;
    Error err;
    if (tensorfile_meta_int(file, key, fallback, &v, &err) != 0) {
        print_error("%s\n", err.msg);
        fail();
    }
    return v;
}

int golden_meta_bool(const TensorFile *file, const char *key, int fallback)
{
    int v;
    Error err;
    if (tensorfile_meta_bool(file, key, fallback, &v, &err) != 0) {
        print_error("%s\n", err.msg);
        fail();
    }
    return v;
}

void golden_copy(const TensorFile *src, const char *skip, TensorFile *dst)
{
    Error err;
    memset(dst, 0, sizeof *dst);
    dst->path = strdup(src->path);
    for (int i = 0; i < src->n_tensors; i++) {
        const Tensor *t = &src->tensors[i].tensor;
        if (skip && !strcmp(src->tensors[i].name, skip)) continue;
        Tensor c;
        assert_int_equal(tensor_alloc(&c, t->dtype, t->ndim, t->shape, &err), 0);
        memcpy(c.data, t->data, tensor_numel(t) * dtype_size(t->dtype));
        assert_int_equal(tensorfile_add(dst, src->tensors[i].name, &c, &err), 0);
    }
    for (int i = 0; i < src->n_meta; i++)
        assert_int_equal(tensorfile_set_meta(dst, src->meta_keys[i], src->meta_values[i], &err),
                         0);
}
