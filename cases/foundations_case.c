/*
 * foundations_case.c - see foundations_case.h: each op's tensors checked,
 * then the op run straight into the output file (case_output_f32).
 */
#include "foundations_case.h"

#include <string.h>

#include "casefile.h"
#include "matmul.h"
#include "rng.h"
#include "softmax.h"

/* Reads the F32 tensor `name` and checks it has the given shape. */
static int get_matrix(const TensorFile *in, const char *name, int64_t rows, int64_t cols,
                      const float **out, Error *err)
{
    const Tensor *t;
    if (tensorfile_get(in, name, DTYPE_F32, 2, &t, err) != 0) return -1;
    if (t->shape[0] != rows || t->shape[1] != cols)
        return error_set(err, "%s: tensor '%s' has shape (%lld, %lld), expected (%lld, %lld)",
                         in->path, name, (long long)t->shape[0], (long long)t->shape[1],
                         (long long)rows, (long long)cols);
    *out = t->data;
    return 0;
}

static int eval_matmul(const TensorFile *in, const CaseArgs *args, TensorFile *out, Error *err)
{
    const char *op = tensorfile_meta(in, "op");
    const Tensor *a, *b;
    if (tensorfile_get(in, "a", DTYPE_F32, 2, &a, err) != 0 ||
        tensorfile_get(in, "b", DTYPE_F32, 2, &b, err) != 0)
        return -1;
    int transpose_a = strcmp(op, "matmul_tn") == 0, transpose_b = strcmp(op, "matmul_nt") == 0;
    int64_t M = a->shape[transpose_a ? 1 : 0], K = a->shape[transpose_a ? 0 : 1];
    int64_t N = b->shape[transpose_b ? 0 : 1], Kb = b->shape[transpose_b ? 1 : 0];
    if (K != Kb)
        return error_set(err, "%s: %s needs matching inner dimensions, got %lld and %lld",
                         in->path, op, (long long)K, (long long)Kb);
    float *c = case_output_f32(out, "c", 2, (int64_t[]){M, N}, err);
    if (!c) return -1;
    int rc = transpose_a   ? matmul_tn(c, a->data, b->data, M, N, K, 0)
             : transpose_b ? matmul_nt(c, a->data, b->data, M, N, K, 0)
                           : matmul_nn(c, a->data, b->data, M, N, K, 0);
    return rc == 0 ? 0 : error_set(err, "%s failed", op);
}

static int eval_linear(const TensorFile *in, const CaseArgs *args, TensorFile *out, Error *err)
{
    const char *op = tensorfile_meta(in, "op");
    int backward = strcmp(op, "linear_backward") == 0;
    const Tensor *x, *w;
    if (tensorfile_get(in, "input", DTYPE_F32, 2, &x, err) != 0 ||
        tensorfile_get(in, "weight", DTYPE_F32, 2, &w, err) != 0)
        return -1;
    int64_t M = x->shape[0], K = x->shape[1], N = w->shape[0];
    if (w->shape[1] != K)
        return error_set(err, "%s: weight has %lld input features, input has %lld", in->path,
                         (long long)w->shape[1], (long long)K);
    const float *bias = NULL, *dy = NULL;
    const Tensor *b = tensorfile_find(in, "bias");
    if (b) {
        if (b->dtype != DTYPE_F32 || b->ndim != 1 || b->shape[0] != N)
            return error_set(err, "%s: bias must be F32 of shape (%lld)", in->path, (long long)N);
        bias = b->data;
    }
    if (backward && get_matrix(in, "grad_output", M, N, &dy, err) != 0) return -1;

    float *y = case_output_f32(out, "output", 2, (int64_t[]){M, N}, err);
    if (!y) return -1;
    if (linear_forward(y, x->data, w->data, bias, M, K, N) != 0)
        return error_set(err, "linear_forward failed");
    if (!backward) return 0;
    float *dx = case_output_f32(out, "grad_input", 2, x->shape, err);
    float *dw = case_output_f32(out, "grad_weight", 2, w->shape, err);
    float *db = bias ? case_output_f32(out, "grad_bias", 1, b->shape, err) : NULL;
    if (!dx || !dw || (bias && !db)) return -1;
    if (linear_backward(dx, dw, db, dy, x->data, w->data, M, K, N) != 0)
        return error_set(err, "linear_backward failed");
    return 0;
}

static int eval_softmax(const TensorFile *in, const CaseArgs *args, TensorFile *out, Error *err)
{
    const char *op = tensorfile_meta(in, "op");
    int backward = strcmp(op, "softmax_backward") == 0;
    const Tensor *x;
    if (tensorfile_get(in, backward ? "output" : "input", DTYPE_F32, 2, &x, err) != 0) return -1;
    int64_t rows = x->shape[0], cols = x->shape[1];
    const float *dy = NULL;
    if (backward && get_matrix(in, "grad_output", rows, cols, &dy, err) != 0) return -1;

    float *result = case_output_f32(out, backward ? "grad_input" : "output", 2, x->shape, err);
    if (!result) return -1;
    int rc = backward ? softmax_backward(result, x->data, dy, rows, cols)
                      : softmax_forward(result, x->data, rows, cols);
    return rc == 0 ? 0 : error_set(err, "%s failed", op);
}

static int eval_rng(const TensorFile *in, const CaseArgs *args, TensorFile *out, Error *err)
{
    long long seed = case_int(args, "rng_seed"), stream = case_int(args, "rng_stream");
    long long count = case_int(args, "count");
    Tensor t[4];
    const char *names[4] = {"u32", "uniform", "normal", "below10"};
    DType dtypes[4] = {DTYPE_I64, DTYPE_F32, DTYPE_F32, DTYPE_I64};
    for (int i = 0; i < 4; i++) {
        if (case_tensor_alloc(&t[i], dtypes[i], 1, (int64_t[]){count}, err) != 0) {
            while (i-- > 0) case_tensor_free(&t[i]);
            return -1;
        }
    }
    /* The draws come in the same order as reference/rng.py makes them. */
    Rng rng;
    rng_seed(&rng, (uint64_t)seed, (uint64_t)stream);
    for (long long i = 0; i < count; i++) ((int64_t *)t[0].data)[i] = rng_u32(&rng);
    for (long long i = 0; i < count; i++) ((float *)t[1].data)[i] = rng_uniform(&rng);
    for (long long i = 0; i < count; i++) ((float *)t[2].data)[i] = rng_normal(&rng);
    for (long long i = 0; i < count; i++) ((int64_t *)t[3].data)[i] = rng_below(&rng, 10);
    int rc = 0;
    for (int i = 0; i < 4; i++) {
        if (rc == 0) rc = tensorfile_add(out, names[i], &t[i], err);
        case_tensor_free(&t[i]);   /* no-op once added: the file owns the data */
    }
    return rc;
}

/* The chapter's ops and the options each reads from the metadata. */
static const CaseOption RNG_OPTIONS[] = {
    {"rng_seed", CASE_INT, NULL, "0", "the generator's seed"},
    {"rng_stream", CASE_INT, NULL, "0", "the generator's stream"},
    {"count", CASE_INT, "[0, 16777216]", "16", "the number of draws of each kind"},
    {0},
};

static const CaseOp OPS[] = {
    {"matmul_nt", NULL, 0, "a b", "c", eval_matmul},
    {"matmul_nn", NULL, 0, "a b", "c", eval_matmul},
    {"matmul_tn", NULL, 0, "a b", "c", eval_matmul},
    {"linear", NULL, 0, "input weight [bias]", "output", eval_linear},
    {"linear_backward", NULL, 0, "input weight [bias] grad_output",
     "output grad_input grad_weight [grad_bias]", eval_linear},
    {"softmax", NULL, 0, "input", "output", eval_softmax},
    {"softmax_backward", NULL, 0, "output grad_output", "grad_input", eval_softmax},
    {"rng_stream", RNG_OPTIONS, 0, "", "u32 uniform normal below10", eval_rng},
    {0},
};

int foundations_case_eval(const TensorFile *in, TensorFile *out, Error *err)
{
    return case_dispatch(OPS, "00", in, out, err);
}
