/*
 * compare.c - how far two safetensors files (checkpoints of the same model)
 * are apart: the largest absolute and relative difference over every float32
 * value of the tensors they share by name, the tensor it is in, and whether
 * the files' tensors are identical bit for bit. tests/mpi/run.sh uses it on
 * the checkpoints of one process and of two MPI ranks.
 *
 *     build/mpi/compare A.safetensors B.safetensors [--bits] [--each] [--except SUFFIX]
 *
 * --bits: exit 1 unless every tensor is identical bit for bit. --each: one
 * line per tensor as well. --except: tensors whose names end in SUFFIX count
 * for --bits but not for the maxima (the key bias of attention, whose
 * gradient is zero but for rounding: chapter 08's README, "Data
 * parallelism"). A tensor's relative difference is its largest absolute
 * difference over its largest magnitude (near 0, a ratio of two values
 * would say nothing).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "safetensors.h"

static int64_t elements(const Tensor *t)
{
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
    return n;
}

int main(int argc, char **argv)
{
    TensorFile a = {0}, b = {0};
    Error err;
    int bits = 0, each = 0, bad = argc < 3;
    const char *except = NULL;
    for (int i = 3; i < argc; i++) {
        if (strcmp(argv[i], "--bits") == 0) bits = 1;
        else if (strcmp(argv[i], "--each") == 0) each = 1;
        else if (strcmp(argv[i], "--except") == 0 && i + 1 < argc) except = argv[++i];
        else bad = 1;
    }
    if (bad) {
        fprintf(stderr, "usage: %s A.safetensors B.safetensors [--bits] [--each] "
                        "[--except SUFFIX]\n", argv[0]);
        return 2;
    }
    if (safetensors_read(argv[1], &a, &err) != 0 || safetensors_read(argv[2], &b, &err) != 0) {
        fprintf(stderr, "compare: %s\n", err.msg);
        tensorfile_free(&a);
        return 2;
    }
    double max_abs = 0.0, max_rel = 0.0;
    const char *abs_at = "-", *rel_at = "-";
    int64_t values = 0, differ = 0;
    int same = a.n_tensors == b.n_tensors, rc = 0;
    for (int i = 0; i < a.n_tensors; i++) {
        const Tensor *x = &a.tensors[i].tensor, *y = tensorfile_find(&b, a.tensors[i].name);
        int64_t n = elements(x);
        if (!y || y->dtype != x->dtype || elements(y) != n) {
            fprintf(stderr, "compare: %s: tensor %s is missing in %s or has another shape\n",
                    argv[1], a.tensors[i].name, argv[2]);
            rc = 2;
            continue;
        }
        if (memcmp(x->data, y->data, (size_t)n * dtype_size(x->dtype)) != 0) same = 0;
        if (x->dtype != DTYPE_F32) continue;
        const float *p = x->data, *q = y->data;
        const char *name = a.tensors[i].name;
        size_t len = strlen(name), skip = except ? strlen(except) : 0;
        int counted = !except || len < skip || strcmp(name + len - skip, except) != 0;
        double t_abs = 0.0, t_max = 0.0;
        for (int64_t k = 0; k < n; k++, values++) {
            double d = fabs((double)p[k] - q[k]), m = fmax(fabs(p[k]), fabs(q[k]));
            differ += p[k] != q[k];
            t_abs = fmax(t_abs, d), t_max = fmax(t_max, m);
        }
        double rel = t_max > 0 ? t_abs / t_max : 0.0;
        if (counted && t_abs > max_abs) max_abs = t_abs, abs_at = name;
        if (counted && rel > max_rel) max_rel = rel, rel_at = name;
        if (each)
            printf("  %-48s max abs diff %.3g, largest value %.3g%s\n", name, t_abs, t_max,
                   counted ? "" : " (left out of the maxima)");
    }
    printf("%lld float32 values, %lld differ; max abs diff %.3g (%s), max rel diff %.3g (%s); "
           "bit-identical: %s\n", (long long)values, (long long)differ, max_abs, abs_at,
           max_rel, rel_at, same ? "yes" : "no");
    tensorfile_free(&a);
    tensorfile_free(&b);
    if (rc == 0 && bits && !same) rc = 1;
    return rc;
}
