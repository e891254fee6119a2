/*
 * sdpa_case.c - see sdpa_case.h: the checks a case passes before sdpa.c
 * sees it, and the evaluation of ops sdpa and sdpa_backward.
 */
#include "sdpa_case.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "casefile.h"
#include "sdpa.h"

/* The attention weights are (N, L, S) floats, and so are three more buffers;
 * past 2^31 values per buffer a case is refused rather than left to fail
 * half-way through an allocation. */
#define SDPA_MAX_ATT_VALUES (1LL << 31)

/* The mask must broadcast to the attention shape att_shape (att_ndim dims):
 * aligned to the right, each mask dimension 1 or the full size. */
static int check_mask(const TensorFile *in, const Tensor *mask, const int64_t *att_shape,
                      int att_ndim, Error *err)
{
    char mbuf[128], abuf[128];
    tensor_shape_str(mask, mbuf, sizeof mbuf);
    case_shape_str(att_shape, att_ndim, abuf, sizeof abuf);
    if (mask->dtype != DTYPE_BOOL && mask->dtype != DTYPE_F32)
        return error_set(err, "%s: tensor 'attn_mask' has dtype %s, expected BOOL (true = may "
                         "attend) or F32 (added to the scores)", case_name(in),
                         dtype_name(mask->dtype));
    if (mask->ndim > att_ndim)
        return error_set(err, "%s: attn_mask of shape %s cannot broadcast to the attention "
                         "shape %s: it has more dimensions", case_name(in), mbuf, abuf);
    for (int md = 0; md < mask->ndim; md++) {
        int d = md + (att_ndim - mask->ndim);     /* aligned to the right */
        if (mask->shape[md] != 1 && mask->shape[md] != att_shape[d])
            return error_set(err, "%s: attn_mask of shape %s cannot broadcast to the "
                             "attention shape %s: dimension %d is %lld, expected 1 or %lld",
                             case_name(in), mbuf, abuf, md, (long long)mask->shape[md],
                             (long long)att_shape[d]);
    }
    return 0;
}

/* The options of ops sdpa and sdpa_backward: F.scaled_dot_product_attention's
 * arguments (its dropout_p spelt dropout, as in every chapter). */
static const CaseOption SDPA_OPTIONS[] = {
    {"is_causal", CASE_BOOL, NULL, "false", "the causal mask, top-left aligned"},
    {"scale", CASE_FLOAT, "[-3.4e38, 3.4e38]", "",
     "the scores' scale; 1/sqrt(E) when absent"},
    {"dropout", CASE_FLOAT, "[0, 1)", "0", "the dropout probability of the weights"},
    {"enable_gqa", CASE_BOOL, NULL, "false", "grouped-query attention"},
    {0},
};

static int read_options(const TensorFile *in, SdpaCase *c, Error *err)
{
    CaseArgs args;
    if (case_read_args(SDPA_OPTIONS, in, &args, err) != 0) return -1;
    c->is_causal = case_bool(&args, "is_causal");
    c->scale = case_given(&args, "scale") ? (float)case_float(&args, "scale")
                                          : sdpa_default_scale(c->E);
    c->dropout_p = (float)case_float(&args, "dropout");
    if (case_bool(&args, "enable_gqa"))
        return error_set(err, "%s: metadata 'enable_gqa' is true; grouped-query attention is "
                         "not supported (key and value need as many heads as query)",
                         case_name(in));
    return 0;
}

int sdpa_case_read(const TensorFile *in, SdpaCase *c, Error *err)
{
    memset(c, 0, sizeof *c);
    const char *op = tensorfile_meta(in, "op");
    if (!op) return error_set(err, "%s: metadata 'op' is missing", case_name(in));
    if (strcmp(op, "sdpa") != 0 && strcmp(op, "sdpa_backward") != 0)
        return error_set(err, "%s: op '%s' is not a chapter 02 op (sdpa, sdpa_backward)",
                         case_name(in), op);
    c->backward = strcmp(op, "sdpa_backward") == 0;

    /* query, key, value: F32, rank >= 2, the same leading dimensions. */
    const Tensor *q, *k, *v;
    if (tensorfile_get(in, "query", DTYPE_F32, -1, &q, err) != 0 ||
        tensorfile_get(in, "key", DTYPE_F32, -1, &k, err) != 0 ||
        tensorfile_get(in, "value", DTYPE_F32, -1, &v, err) != 0)
        return -1;
    if (q->ndim < 2)
        return error_set(err, "%s: tensor 'query' has rank %d; it needs at least (L, E)",
                         case_name(in), q->ndim);
    if (k->ndim != q->ndim || v->ndim != q->ndim)
        return error_set(err, "%s: query, key and value have ranks %d, %d and %d; they must "
                         "be equal (broadcasting over batch dimensions is not supported)",
                         case_name(in), q->ndim, k->ndim, v->ndim);
    if (case_check_dims(in, "query", q, err) != 0 || case_check_dims(in, "key", k, err) != 0 ||
        case_check_dims(in, "value", v, err) != 0)
        return -1;
    int n = q->ndim;
    char qbuf[128], kbuf[128], vbuf[128];
    tensor_shape_str(q, qbuf, sizeof qbuf);
    tensor_shape_str(k, kbuf, sizeof kbuf);
    tensor_shape_str(v, vbuf, sizeof vbuf);
    int64_t N = 1;
    for (int d = 0; d < n - 2; d++) {
        if (k->shape[d] != q->shape[d] || v->shape[d] != q->shape[d])
            return error_set(err, "%s: query %s, key %s and value %s differ in batch "
                             "dimension %d; the leading dimensions must be equal",
                             case_name(in), qbuf, kbuf, vbuf, d);
        c->batch_shape[d] = q->shape[d];
        N *= q->shape[d];
    }
    if (k->shape[n - 1] != q->shape[n - 1])
        return error_set(err, "%s: query %s and key %s must have the same last dimension E",
                         case_name(in), qbuf, kbuf);
    if (v->shape[n - 2] != k->shape[n - 2])
        return error_set(err, "%s: key %s and value %s must have the same number of "
                         "positions S", case_name(in), kbuf, vbuf);
    c->ndim = n;
    c->L = q->shape[n - 2];
    c->E = q->shape[n - 1];
    c->S = k->shape[n - 2];
    c->Ev = v->shape[n - 1];
    if (N > INT_MAX || (double)N * c->L * c->S > (double)SDPA_MAX_ATT_VALUES)
        return error_set(err, "%s: the attention weights would hold %lld values (N %lld, L %d, "
                         "S %d), more than this implementation allows (%lld)", case_name(in),
                         (long long)(N * c->L * c->S), (long long)N, c->L, c->S,
                         SDPA_MAX_ATT_VALUES);
    c->N = (int)N;
    c->q = q->data;
    c->k = k->data;
    c->v = v->data;

    if (read_options(in, c, err) != 0) return -1;

    /* attn_mask: optional, broadcast to (..., L, S); not together with is_causal. */
    c->mask = tensorfile_find(in, "attn_mask");
    if (c->mask) {
        int64_t att_shape[TENSOR_MAX_DIMS];
        memcpy(att_shape, c->batch_shape, (size_t)(n - 2) * sizeof *att_shape);
        att_shape[n - 2] = c->L;
        att_shape[n - 1] = c->S;
        if (check_mask(in, c->mask, att_shape, n, err) != 0) return -1;
        if (c->is_causal)
            return error_set(err, "%s: attn_mask is given and is_causal is true; "
                             "F.scaled_dot_product_attention refuses both at once (put the "
                             "causal pattern into attn_mask instead)", case_name(in));
    }

    /* dropout_mask: BOOL (true = kept), exactly the attention shape, given
     * exactly when dropout_p > 0 (the mask PyTorch's dropout drew). */
    const Tensor *drop = tensorfile_find(in, "dropout_mask");
    if (c->dropout_p > 0.0f && !drop)
        return error_set(err, "%s: dropout is %g but the case has no 'dropout_mask' (the "
                         "dropout is not random here: the case gives its mask)", case_name(in),
                         (double)c->dropout_p);
    if (drop && c->dropout_p == 0.0f)
        return error_set(err, "%s: a 'dropout_mask' is given but dropout is 0",
                         case_name(in));
    if (drop) {
        const Tensor *t;
        int same;
        if (tensorfile_get(in, "dropout_mask", DTYPE_BOOL, n, &t, err) != 0) return -1;
        same = t->shape[n - 2] == c->L && t->shape[n - 1] == c->S;
        for (int d = 0; d < n - 2; d++) same = same && t->shape[d] == c->batch_shape[d];
        if (!same) {
            char dbuf[128];
            return error_set(err, "%s: tensor 'dropout_mask' has shape %s; it must be the "
                             "attention shape (..., L %d, S %d)", case_name(in),
                             tensor_shape_str(t, dbuf, sizeof dbuf), c->L, c->S);
        }
        c->drop = t->data;
    }

    /* grad_output: exactly the shape of the output. */
    if (c->backward) {
        const Tensor *dout;
        if (tensorfile_get(in, "grad_output", DTYPE_F32, n, &dout, err) != 0) return -1;
        int same = dout->shape[n - 2] == c->L && dout->shape[n - 1] == c->Ev;
        for (int d = 0; d < n - 2; d++) same = same && dout->shape[d] == c->batch_shape[d];
        if (!same) {
            int64_t want[TENSOR_MAX_DIMS];
            memcpy(want, c->batch_shape, (size_t)(n - 2) * sizeof *want);
            want[n - 2] = c->L;
            want[n - 1] = c->Ev;
            char gbuf[128], wbuf[128];
            return error_set(err, "%s: tensor 'grad_output' has shape %s, expected %s (the "
                             "output's shape)", case_name(in),
                             tensor_shape_str(dout, gbuf, sizeof gbuf),
                             case_shape_str(want, n, wbuf, sizeof wbuf));
        }
        c->dout = dout->data;
    }
    return 0;
}

/* Allocates an F32 tensor of shape (batch_shape..., rows, cols). */
static int alloc_batched(Tensor *t, const SdpaCase *c, int64_t rows, int64_t cols, Error *err)
{
    int64_t shape[TENSOR_MAX_DIMS];
    memcpy(shape, c->batch_shape, (size_t)(c->ndim - 2) * sizeof *shape);
    shape[c->ndim - 2] = rows;
    shape[c->ndim - 1] = cols;
    return case_tensor_alloc(t, DTYPE_F32, c->ndim, shape, err);
}

SdpaArgs sdpa_case_args(const SdpaCase *c, const float *bias)
{
    return (SdpaArgs){c->N, c->L, c->S, c->E, c->Ev, c->scale, c->is_causal, bias, c->drop,
                      c->dropout_p};
}

static int eval_sdpa(const TensorFile *in, const CaseArgs *args, TensorFile *out, Error *err)
{
    SdpaCase c;
    if (sdpa_case_read(in, &c, err) != 0) return -1;
    int L = c.L, S = c.S, E = c.E, Ev = c.Ev;

    /* Every buffer, so that one loop frees whatever was not handed to `out`. */
    enum { OUTPUT, ATT, BIAS, DQ, DK, DV, N_BUFFERS };
    Tensor t[N_BUFFERS];
    memset(t, 0, sizeof t);
    int rc = -1;

    if (alloc_batched(&t[OUTPUT], &c, L, Ev, err) != 0 ||      /* (N, L, Ev) */
        alloc_batched(&t[ATT], &c, L, S, err) != 0)            /* (N, L, S) */
        goto done;
    const float *bias = NULL;                                  /* (N, L, S) or NULL */
    if (c.mask) {
        if (alloc_batched(&t[BIAS], &c, L, S, err) != 0) goto done;
        if (sdpa_mask_bias(t[BIAS].data, c.mask->data, c.mask->dtype == DTYPE_BOOL,
                           c.mask->shape, c.mask->ndim, t[BIAS].shape, c.ndim) != 0) {
            error_set(err, "%s: sdpa_mask_bias failed", case_name(in));
            goto done;
        }
        bias = t[BIAS].data;
    }
    SdpaArgs attention = sdpa_case_args(&c, bias);
    if (sdpa_forward(t[OUTPUT].data, t[ATT].data, c.q, c.k, c.v, &attention) != 0) {
        error_set(err, "%s: sdpa_forward failed", case_name(in));
        goto done;
    }
    if (c.backward) {
        /* sdpa_backward adds into the gradients: tensor_alloc zeroed them. */
        if (alloc_batched(&t[DQ], &c, L, E, err) != 0 ||       /* (N, L, E) */
            alloc_batched(&t[DK], &c, S, E, err) != 0 ||       /* (N, S, E) */
            alloc_batched(&t[DV], &c, S, Ev, err) != 0)        /* (N, S, Ev) */
            goto done;
        if (sdpa_backward(t[DQ].data, t[DK].data, t[DV].data, c.dout, c.q, c.k, c.v,
                          t[ATT].data, &attention) != 0) {
            error_set(err, "%s: sdpa_backward failed", case_name(in));
            goto done;
        }
    }
    if (tensorfile_add(out, "output", &t[OUTPUT], err) != 0 ||
        tensorfile_add(out, "attn_weights", &t[ATT], err) != 0)
        goto done;
    if (c.backward && (tensorfile_add(out, "grad_query", &t[DQ], err) != 0 ||
                       tensorfile_add(out, "grad_key", &t[DK], err) != 0 ||
                       tensorfile_add(out, "grad_value", &t[DV], err) != 0))
        goto done;
    rc = 0;
done:
    for (int i = 0; i < N_BUFFERS; i++) case_tensor_free(&t[i]);   /* no-op once added */
    return rc;
}

/* The chapter's ops. sdpa_case_read() checks the tensors' shapes and dtypes. */
static const CaseOp OPS[] = {
    {"sdpa", SDPA_OPTIONS, 0, "query key value [attn_mask] [dropout_mask]",
     "output attn_weights", eval_sdpa},
    {"sdpa_backward", SDPA_OPTIONS, 0, "query key value [attn_mask] [dropout_mask] grad_output",
     "output attn_weights grad_query grad_key grad_value", eval_sdpa},
    {0},
};

int sdpa_case_eval(const TensorFile *in, TensorFile *out, Error *err)
{
    return case_dispatch(OPS, "02", in, out, err);
}
