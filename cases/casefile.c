/* casefile.c - see casefile.h. */
#include "casefile.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

const char *case_name(const TensorFile *in)
{
    return in->path ? in->path : "(case)";
}

/* The keys every case carries, whatever its op. */
static const char *const COMMON_KEYS[] = {"op", "outputs", "atol", "rtol", "seed",
                                          "torch_version", NULL};

/* The options' names, "nhead eps dropout", for a message. */
static const char *option_names(const CaseOp *op, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (const CaseOption *o = op->options; o && o->name && used < size; o++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s", used ? " " : "", o->name);
    if (op->model && used < size)
        used += (size_t)snprintf(buf + used, size - used, "%smodel.*", used ? " " : "");
    if (!buf[0]) snprintf(buf, size, "none");
    return buf;
}

/* Is x inside the interval "[lo, hi]", "(lo, hi)", "[lo, hi)", ...? */
static int in_range(double x, const char *range)
{
    char *end;
    double lo = strtod(range + 1, &end);
    double hi = strtod(end + 1, &end);
    int lo_ok = range[0] == '[' ? x >= lo : x > lo;
    int hi_ok = *end == ']' ? x <= hi : x < hi;
    return lo_ok && hi_ok;
}

/* Is the text one of the words of "a|b|c"? */
static int in_words(const char *text, const char *words)
{
    size_t n = strlen(text);
    for (const char *w = words; *w;) {
        size_t len = strcspn(w, "|");
        if (len == n && strncmp(w, text, n) == 0) return 1;
        w += len + (w[len] == '|');
    }
    return 0;
}

/* Reads option o from `text` (the metadata's value or the fallback) into
 * slot i of a. */
static int read_option(const TensorFile *in, const CaseOption *o, const char *text,
                       CaseArgs *a, int i, Error *err)
{
    static const char *const expected[] = {"true or false", "an integer", "a number", ""};
    char *end = NULL;
    errno = 0;
    int ok;
    switch (o->type) {
    case CASE_BOOL:
        ok = !strcmp(text, "true") || !strcmp(text, "false");
        a->number[i] = !strcmp(text, "true");
        break;
    case CASE_INT:
        a->integer[i] = strtoll(text, &end, 10);
        a->number[i] = (double)a->integer[i];
        ok = end != text && *end == '\0' && errno != ERANGE;
        break;
    case CASE_FLOAT:
        a->number[i] = strtod(text, &end);
        ok = end != text && *end == '\0' && !isnan(a->number[i]);
        break;
    default:
        a->text[i] = text;
        if (!in_words(text, o->range))
            return error_set(err, "%s: metadata %s is '%s', not one of %s (%s)", case_name(in),
                             o->name, text, o->range, o->what);
        return 0;
    }
    if (!ok)
        return error_set(err, "%s: metadata %s is %s, expected %s (%s)", case_name(in), o->name,
                         text, expected[o->type], o->what);
    if (o->range && !in_range(a->number[i], o->range))
        return error_set(err, "%s: metadata %s is %s, outside %s (%s)", case_name(in), o->name,
                         text, o->range, o->what);
    return 0;
}

int case_read_args(const CaseOption *options, const TensorFile *in, CaseArgs *a, Error *err)
{
    memset(a, 0, sizeof *a);
    a->options = options;
    for (const CaseOption *o = options; o && o->name; o++) {
        if (a->n == CASE_MAX_OPTIONS) {
            fprintf(stderr, "an op declares more than %d options\n", CASE_MAX_OPTIONS);
            abort();
        }
        int i = a->n++;
        const char *value = tensorfile_meta(in, o->name);
        a->given[i] = value != NULL;
        if (!value && !o->fallback)
            return error_set(err, "%s: metadata '%s' is missing (%s)", case_name(in), o->name,
                             o->what);
        if (!value && !o->fallback[0]) continue;      /* the op decides */
        if (read_option(in, o, value ? value : o->fallback, a, i, err) != 0) return -1;
    }
    return 0;
}

/* Refuses a key that is neither an option of op, a common key, info.* nor
 * (for a model) model.*. */
static int check_keys(const CaseOp *op, const TensorFile *in, Error *err)
{
    char names[256];
    for (int k = 0; k < in->n_meta; k++) {
        const char *key = in->meta_keys[k];
        int known = strncmp(key, "info.", 5) == 0 ||
                    (op->model && strncmp(key, "model.", 6) == 0);
        for (int c = 0; !known && COMMON_KEYS[c]; c++) known = !strcmp(key, COMMON_KEYS[c]);
        for (const CaseOption *o = op->options; !known && o && o->name; o++)
            known = !strcmp(key, o->name);
        if (!known)
            return error_set(err, "%s: metadata '%s' is not an option of op '%s' (its "
                             "options: %s)", case_name(in), key, op->name,
                             option_names(op, names, sizeof names));
    }
    return 0;
}

/* Every input the op requires ("[name]" is optional) is in the case. */
static int check_inputs(const CaseOp *op, const TensorFile *in, Error *err)
{
    char name[128];
    for (const char *w = op->inputs ? op->inputs : ""; *w;) {
        size_t len = strcspn(w, " ");
        if (w[0] != '[' && len < sizeof name) {
            memcpy(name, w, len);
            name[len] = '\0';
            if (!tensorfile_find(in, name))
                return error_set(err, "%s: tensor '%s' is missing", case_name(in), name);
        }
        w += len;
        w += strspn(w, " ");
    }
    return 0;
}

/* The slot of option `name`; asking for an undeclared one is a bug. */
static int slot(const CaseArgs *a, const char *name)
{
    for (int i = 0; i < a->n; i++)
        if (!strcmp(a->options[i].name, name)) return i;
    fprintf(stderr, "case option '%s' is not declared in the op's table\n", name);
    abort();
}

long long case_int(const CaseArgs *a, const char *name)
{
    return a->integer[slot(a, name)];
}

double case_float(const CaseArgs *a, const char *name)
{
    return a->number[slot(a, name)];
}

int case_bool(const CaseArgs *a, const char *name)
{
    return a->number[slot(a, name)] != 0;
}

const char *case_text(const CaseArgs *a, const char *name)
{
    return a->text[slot(a, name)];
}

int case_given(const CaseArgs *a, const char *name)
{
    return a->given[slot(a, name)];
}

int case_dispatch(const CaseOp *ops, const char *chapter, const TensorFile *in,
                  TensorFile *out, Error *err)
{
    if (err) err->msg[0] = '\0';    /* an exercise stub returns -1 without a message */
    const char *name = tensorfile_meta(in, "op");
    if (!name) return error_set(err, "%s: metadata 'op' is missing", case_name(in));
    for (const CaseOp *op = ops; op->name; op++) {
        if (strcmp(op->name, name) != 0) continue;
        CaseArgs args;
        if (check_keys(op, in, err) != 0 || case_read_args(op->options, in, &args, err) != 0 ||
            check_inputs(op, in, err) != 0)
            return -1;
        return op->eval(in, &args, out, err);
    }
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

/* Under AddressSanitizer the heap's red zones catch a stray access on
 * either side of a tensor, which a guard page after it cannot: there the
 * tensors stay on the heap. */
#if defined(__SANITIZE_ADDRESS__)
#define GUARD_PAGES 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GUARD_PAGES 0
#endif
#endif
#ifndef GUARD_PAGES
#define GUARD_PAGES 1
#endif

/* The guarded blocks in use, and whether case_file_run is evaluating. */
typedef struct Guarded {
    void *map;              /* the mapping: the pages of data, then the guard page */
    size_t map_bytes;
    const void *data;       /* where the tensor's data begins */
    struct Guarded *next;
} Guarded;

static Guarded *guarded;
static int guarding;

/* Moves t's data into a mapping whose last page is PROT_NONE, placed so
 * that the data ends where that page begins. */
static int guard_tensor(Tensor *t, Error *err)
{
    size_t bytes = (size_t)tensor_numel(t) * dtype_size(t->dtype);
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t body = (bytes + page - 1) / page * page;
    Guarded *g = malloc(sizeof *g);
    void *map = mmap(NULL, body + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                     -1, 0);
    if (!g || map == MAP_FAILED || mprotect((char *)map + body, page, PROT_NONE) != 0) {
        if (map != MAP_FAILED) munmap(map, body + page);
        free(g);
        return error_set(err, "out of memory mapping %zu bytes", bytes);
    }
    /* bytes is a multiple of the element size and the page of the size of
     * every element, so the data stays aligned to its element. */
    char *data = (char *)map + body - bytes;
    if (bytes) memcpy(data, t->data, bytes);
    free(t->data);
    t->data = data;
    *g = (Guarded){map, body + page, data, guarded};
    guarded = g;
    return 0;
}

int case_tensor_alloc(Tensor *t, DType dtype, int ndim, const int64_t *shape, Error *err)
{
    if (tensor_alloc(t, dtype, ndim, shape, err) != 0) return -1;
    if (guarding && guard_tensor(t, err) != 0) {
        tensor_free(t);
        return -1;
    }
    return 0;
}

void case_tensor_free(Tensor *t)
{
    for (Guarded **g = &guarded; *g; g = &(*g)->next) {
        if ((*g)->data != t->data) continue;
        Guarded *found = *g;
        *g = found->next;
        munmap(found->map, found->map_bytes);
        free(found);
        memset(t, 0, sizeof *t);
        return;
    }
    tensor_free(t);
}

/* Frees the tensors' data of a file, guarded or not. */
static void case_release(TensorFile *file)
{
    for (int i = 0; i < file->n_tensors; i++) case_tensor_free(&file->tensors[i].tensor);
}

void *case_output(TensorFile *out, const char *name, DType dtype, int ndim,
                  const int64_t *shape, Error *err)
{
    Tensor t;
    if (case_tensor_alloc(&t, dtype, ndim, shape, err) != 0) return NULL;
    if (tensorfile_add(out, name, &t, err) != 0) {
        case_tensor_free(&t);
        return NULL;
    }
    return tensorfile_find(out, name)->data;
}

float *case_output_f32(TensorFile *out, const char *name, int ndim, const int64_t *shape,
                       Error *err)
{
    return case_output(out, name, DTYPE_F32, ndim, shape, err);
}

int case_call_failed(const TensorFile *in, const char *function, const Error *inner,
                     Error *err)
{
    if (inner->msg[0]) return error_set(err, "%s: %s", case_name(in), inner->msg);
    return error_set(err, "%s: %s failed", case_name(in), function);
}

int case_file_run(const char *in_path, const char *out_path, CaseEval eval, Error *err)
{
    TensorFile in, out = {0};
    err->msg[0] = '\0';   /* a stub may fail without a message */
    if (safetensors_read(in_path, &in, err) != 0) return -1;
    guarding = GUARD_PAGES;
    int rc = 0;
    for (int i = 0; guarding && rc == 0 && i < in.n_tensors; i++)
        rc = guard_tensor(&in.tensors[i].tensor, err);
    if (rc == 0) rc = eval(&in, &out, err);
    if (rc == 0) {
        const char *op = tensorfile_meta(&in, "op");
        if (op) rc = tensorfile_set_meta(&out, "op", op, err);
    }
    if (rc == 0) rc = safetensors_write(out_path, &out, err);
    if (rc != 0 && !err->msg[0]) error_set(err, "%s: failed", in_path);
    case_release(&in);
    case_release(&out);
    guarding = 0;
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
    flush_subnormals();                           /* tensor.h */
    if (argc == 2 && strcmp(argv[1], "--demo") == 0) return demo() == 0 ? 0 : 1;
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        printf("%s", usage);
        return 0;
    }
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
