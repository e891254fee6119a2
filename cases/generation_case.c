/*
 * generation_case.c - see generation_case.h for the ops, their tensors and
 * options.
 *
 * Each evaluator reads and checks all of its inputs first, then adds its
 * outputs to the output file and computes them; run_case_file writes the
 * file only if everything worked.
 */
#include "generation_case.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "casefile.h"
#include "next_token.h"
#include "sampling.h"

/* The most values a case's logits may hold. */
#define MAX_CASE_VALUES (1LL << 24)

/* The tensor `name` of the given dtype and rank whose dimensions equal the
 * entries of `expect` that are >= 0 (`letters` names them for the message),
 * each between 1 and INT_MAX. */
static int get_tensor(const TensorFile *in, const char *name, DType dtype, int ndim,
                      const int64_t *expect, const char *letters, const Tensor **t, Error *err)
{
    if (tensorfile_get(in, name, dtype, ndim, t, err) != 0) return -1;
    if (expect && case_check_shape(in, name, *t, expect, letters, err) != 0) return -1;
    if (case_check_dims(in, name, *t, err) != 0) return -1;
    if (tensor_numel(*t) > MAX_CASE_VALUES)
        return error_set(err, "%s: tensor '%s' has %lld values, more than this program handles "
                         "(%lld)", case_name(in), name, (long long)tensor_numel(*t),
                         (long long)MAX_CASE_VALUES);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The next-token loss                                                       */
/* ------------------------------------------------------------------------ */

static int eval_next_token_loss(const TensorFile *in, const CaseArgs *args, TensorFile *out,
                                Error *err)
{
    const Tensor *logits, *ids;
    if (get_tensor(in, "logits", DTYPE_F32, 3, NULL, "(N, T, V)", &logits, err) != 0) return -1;
    int64_t N = logits->shape[0], T = logits->shape[1], V = logits->shape[2];
    if (T == INT_MAX)
        return error_set(err, "%s: tensor 'logits' has %lld positions, more than this program "
                         "handles", case_name(in), (long long)T);
    if (get_tensor(in, "ids", DTYPE_I64, 2, (int64_t[]){N, T + 1}, "(N, T+1)", &ids, err) != 0)
        return -1;
    const int64_t *id = ids->data;
    for (int64_t n = 0; n < N; n++)
        for (int64_t t = 1; t <= T; t++)   /* the targets; ids[:, 0] is none */
            if (id[n * (T + 1) + t] < 0 || id[n * (T + 1) + t] >= V)
                return error_set(err, "%s: tensor 'ids': sequence %lld, position %lld holds id "
                                 "%lld, outside the vocabulary 0..%lld", case_name(in),
                                 (long long)n, (long long)t, (long long)id[n * (T + 1) + t],
                                 (long long)V - 1);

    double *loss = case_output(out, "loss", DTYPE_F64, 0, NULL, err);
    float *dlogits = loss ? case_output_f32(out, "grad_logits", 3, logits->shape, err) : NULL;
    if (!dlogits) return -1;
    Error inner = {{0}};
    if (next_token_loss(loss, dlogits, logits->data, ids->data, (int)N, (int)T, (int)V,
                        &inner) != 0)
        return case_call_failed(in, "next_token_loss", &inner, err);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Sampling                                                                  */
/* ------------------------------------------------------------------------ */

/* The settings, as Hugging Face's generate() names them. */
static const CaseOption SAMPLING_OPTIONS[] = {
    {"temperature", CASE_FLOAT, "[0, 3.4e38]", "1", "the softmax temperature; 0: greedy"},
    {"top_k", CASE_INT, "[0, 2147483647]", "0", "the most probable ids kept; 0: all"},
    {"top_p", CASE_FLOAT, "(0, 1]", "1", "the probability mass kept; 1: all"},
    {0},
};

static int eval_sampling(const TensorFile *in, const CaseArgs *args, TensorFile *out,
                         Error *err)
{
    const Tensor *logits, *u;
    if (get_tensor(in, "logits", DTYPE_F32, 2, NULL, "(R, V)", &logits, err) != 0) return -1;
    int64_t R = logits->shape[0], V = logits->shape[1];
    if (get_tensor(in, "u", DTYPE_F64, 1, (int64_t[]){R}, "(R,)", &u, err) != 0) return -1;
    const double *uv = u->data;
    for (int64_t r = 0; r < R; r++)
        if (!(uv[r] >= 0.0 && uv[r] < 1.0))   /* also refuses NaN */
            return error_set(err, "%s: tensor 'u': row %lld holds %g, outside [0, 1)",
                             case_name(in), (long long)r, uv[r]);
    const float *x = logits->data;
    for (int64_t r = 0; r < R; r++) {
        int64_t finite = 0;
        for (int64_t v = 0; v < V; v++) {
            float value = x[r * V + v];
            if (isnan(value) || value == INFINITY)
                return error_set(err, "%s: tensor 'logits': row %lld, id %lld is %g; a logit "
                                 "must be finite, or -inf for an id never to draw",
                                 case_name(in), (long long)r, (long long)v, value);
            finite += isfinite(value) != 0;
        }
        if (!finite)
            return error_set(err, "%s: tensor 'logits': every logit of row %lld is -inf; there "
                             "is no id to draw", case_name(in), (long long)r);
    }
    Sampling s = {(float)case_float(args, "temperature"), (int)case_int(args, "top_k"),
                  (float)case_float(args, "top_p")};

    float *probs = case_output_f32(out, "probs", 2, logits->shape, err);
    int64_t *picked = probs ? case_output(out, "ids", DTYPE_I64, 1, &R, err) : NULL;
    if (!picked) return -1;
    int *order = malloc((size_t)V * sizeof *order);   /* (V,) scratch */
    if (!order)
        return error_set(err, "%s: out of memory for %lld ids", case_name(in), (long long)V);
    int rc = 0;
    for (int64_t r = 0; r < R && rc == 0; r++) {
        float *p = probs + r * V;
        Error inner = {{0}};
        if (sampling_probs(p, order, x + r * V, (int)V, &s, &inner) != 0) {
            rc = case_call_failed(in, "sampling_probs", &inner, err);
            break;
        }
        picked[r] = sampling_pick(p, (int)V, uv[r]);
        if (picked[r] < 0) rc = error_set(err, "%s: sampling_pick failed", case_name(in));
    }
    free(order);
    return rc;
}

/* The chapter's ops. */
static const CaseOp OPS[] = {
    {"next_token_loss", NULL, 0, "logits ids", "loss grad_logits", eval_next_token_loss},
    {"sampling", SAMPLING_OPTIONS, 0, "logits u", "probs ids", eval_sampling},
    {0},
};

int generation_case_eval(const TensorFile *in, TensorFile *out, Error *err)
{
    return case_dispatch(OPS, "12", in, out, err);
}
