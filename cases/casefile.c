/* casefile.c - see casefile.h. */
#include "casefile.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

const char *case_name(const TensorFile *in)
{
    return in->path ? in->path : "(case)";
}

/* The keys every case carries, whatever its op. */
static const char *const COMMON_KEYS[] = {"op", "outputs", "atol", "rtol", "seed",
                                          "torch_version", NULL};

/* Is `key` one of the space-separated words of `list`? A word "model.*"
 * matches every key that starts with "model.". */
static int key_listed(const char *list, const char *key)
{
    size_t n = strlen(key);
    for (const char *w = list; *w;) {
        size_t len = strcspn(w, " ");
        if (len == n && strncmp(w, key, n) == 0) return 1;
        if (len == 7 && strncmp(w, "model.*", 7) == 0 && strncmp(key, "model.", 6) == 0)
            return 1;
        w += len;
        w += strspn(w, " ");
    }
    return 0;
}

static int check_keys(const CaseOp *op, const TensorFile *in, Error *err)
{
    for (int i = 0; i < in->n_meta; i++) {
        const char *key = in->meta_keys[i];
        int known = strncmp(key, "info.", 5) == 0 || key_listed(op->options, key);
        for (int c = 0; !known && COMMON_KEYS[c]; c++) known = strcmp(key, COMMON_KEYS[c]) == 0;
        if (!known)
            return error_set(err, "%s: metadata '%s' is not an option of op '%s' (its "
                             "options: %s)", case_name(in), key, op->name,
                             op->options[0] ? op->options : "none");
    }
    return 0;
}

int case_dispatch(const CaseOp *ops, const char *chapter, const TensorFile *in,
                  TensorFile *out, Error *err)
{
    if (err) err->msg[0] = '\0';    /* an exercise stub returns -1 without a message */
    const char *name = tensorfile_meta(in, "op");
    if (!name) return error_set(err, "%s: metadata 'op' is missing", case_name(in));
    for (const CaseOp *op = ops; op->name; op++)
        if (strcmp(op->name, name) == 0)
            return check_keys(op, in, err) != 0 ? -1 : op->eval(in, out, err);
    char known[ERROR_MSG_MAX / 2];
    size_t used = 0;
    known[0] = '\0';
    for (const CaseOp *op = ops; op->name && used < sizeof known; op++)
        used += (size_t)snprintf(known + used, sizeof known - used, "%s%s",
                                 op == ops ? "" : ", ", op->name);
    return error_set(err, "%s: op '%s' is not a chapter %s op (%s)", case_name(in), name,
                     chapter, known);
}

int case_is_backward(const TensorFile *in)
{
    const char *op = tensorfile_meta(in, "op");
    size_t n = op ? strlen(op) : 0;
    return n >= 9 && strcmp(op + n - 9, "_backward") == 0;
}

int case_check_shape(const TensorFile *in, const char *name, const Tensor *t,
                     const int64_t *expect, const char *letters, Error *err)
{
    for (int i = 0; i < t->ndim; i++) {
        if (expect[i] < 0 || t->shape[i] == expect[i]) continue;
        char got[128], want[128];
        size_t used = (size_t)snprintf(want, sizeof want, "(");
        for (int j = 0; j < t->ndim && used < sizeof want; j++)
            used += (size_t)snprintf(want + used, sizeof want - used,
                                     expect[j] >= 0 ? "%s%lld" : "%s*", j ? ", " : "",
                                     (long long)expect[j]);
        if (used < sizeof want) snprintf(want + used, sizeof want - used, ")");
        return error_set(err, "%s: tensor '%s' has shape %s, expected %s = %s", case_name(in),
                         name, tensor_shape_str(t, got, sizeof got), letters, want);
    }
    return 0;
}

const char *case_shape_str(const int64_t *shape, int ndim, char *buf, size_t size)
{
    Tensor t = {.ndim = ndim};
    memcpy(t.shape, shape, (size_t)ndim * sizeof *shape);
    return tensor_shape_str(&t, buf, size);
}

int case_check_dims(const TensorFile *in, const char *name, const Tensor *t, Error *err)
{
    char buf[128];
    for (int d = 0; d < t->ndim; d++)
        if (t->shape[d] < 1 || t->shape[d] > INT_MAX)
            return error_set(err, "%s: tensor '%s' has shape %s; every dimension must be "
                             "between 1 and %d", case_name(in), name,
                             tensor_shape_str(t, buf, sizeof buf), INT_MAX);
    return 0;
}

int case_get_shaped(const TensorFile *in, const char *name, const int64_t *want, int ndim,
                    const char *letters, const Tensor **t, Error *err)
{
    if (tensorfile_get(in, name, DTYPE_F32, -1, t, err) != 0) return -1;
    int same = (*t)->ndim == ndim;
    for (int d = 0; same && d < ndim; d++) same = (*t)->shape[d] == want[d];
    if (!same) {
        char got[128], exp[128];
        return error_set(err, "%s: tensor '%s' has shape %s, expected %s = %s", case_name(in),
                         name, tensor_shape_str(*t, got, sizeof got), letters,
                         case_shape_str(want, ndim, exp, sizeof exp));
    }
    return 0;
}

float *case_output_f32(TensorFile *out, const char *name, int ndim, const int64_t *shape,
                       Error *err)
{
    Tensor t;
    if (tensor_alloc(&t, DTYPE_F32, ndim, shape, err) != 0) return NULL;
    if (tensorfile_add(out, name, &t, err) != 0) {
        tensor_free(&t);
        return NULL;
    }
    return (float *)tensorfile_find(out, name)->data;
}

int case_file_run(const char *in_path, const char *out_path, CaseEval eval, Error *err)
{
    TensorFile in, out = {0};
    err->msg[0] = '\0';   /* a stub may fail without a message */
    if (safetensors_read(in_path, &in, err) != 0) return -1;
    int rc = eval(&in, &out, err);
    if (rc == 0) {
        const char *op = tensorfile_meta(&in, "op");
        if (op) rc = tensorfile_set_meta(&out, "op", op, err);
    }
    if (rc == 0) rc = safetensors_write(out_path, &out, err);
    if (rc != 0 && !err->msg[0]) error_set(err, "%s: failed", in_path);
    tensorfile_free(&in);
    tensorfile_free(&out);
    return rc == 0 ? 0 : -1;
}

int run_case_file(const char *prog, const char *in_path, const char *out_path, CaseEval eval)
{
    Error err;
    if (case_file_run(in_path, out_path, eval, &err) == 0) return 0;
    fprintf(stderr, "%s: %s\n", prog, err.msg);
    return 1;
}

int case_main(int argc, char **argv, const char *usage, int (*demo)(void), CaseEval eval)
{
    if (argc == 2 && strcmp(argv[1], "--demo") == 0) return demo() == 0 ? 0 : 1;
    const char *in = NULL, *out = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--case") == 0 && i + 1 < argc) {
            in = argv[++i];
        } else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
            out = argv[++i];
        } else {
            fprintf(stderr, "%s: unknown or incomplete option '%s'\n%s", argv[0], argv[i], usage);
            return 2;
        }
    }
    if (!in || !out) {
        fprintf(stderr, "%s", usage);
        return 2;
    }
    return run_case_file(argv[0], in, out, eval);
}
