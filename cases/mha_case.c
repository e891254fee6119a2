/*
 * mha_case.c - see mha_case.h: the checks a case passes before mha.c sees
 * it, PyTorch's rules for is_causal, and the evaluation of ops mha and
 * mha_backward.
 */
#include "mha_case.h"

#include "casefile.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A parameter that must not be in the case (the other layout's, say). */
static int refuse(const TensorFile *in, const char *name, const char *why, Error *err)
{
    if (tensorfile_find(in, name))
        return error_set(err, "%s: tensor '%s' is present, but %s", case_name(in), name, why);
    return 0;
}

/* A mask: BOOL (bytes 0 or 1) or F32, of one of the allowed shapes. */
static int check_mask(const TensorFile *in, const char *name, const Tensor *m,
                      const int64_t shapes[2][3], const int ndims[2], int n_shapes,
                      const char *letters, Error *err)
{
    if (m->dtype != DTYPE_BOOL && m->dtype != DTYPE_F32)
        return error_set(err, "%s: tensor '%s' has dtype %s, expected BOOL (true = masked, "
                         "nn.MultiheadAttention's convention) or F32 (added to the scores)",
                         case_name(in), name, dtype_name(m->dtype));
    int ok = 0;
    for (int s = 0; s < n_shapes && !ok; s++) {
        ok = m->ndim == ndims[s];
        for (int d = 0; ok && d < ndims[s]; d++) ok = m->shape[d] == shapes[s][d];
    }
    if (!ok) {
        char got[128], a[128], b[128];
        tensor_shape_str(m, got, sizeof got);
        case_shape_str(shapes[0], ndims[0], a, sizeof a);
        if (n_shapes > 1)
            return error_set(err, "%s: tensor '%s' has shape %s, expected %s = %s or %s",
                             case_name(in), name, got, letters, a,
                             case_shape_str(shapes[1], ndims[1], b, sizeof b));
        return error_set(err, "%s: tensor '%s' has shape %s, expected %s = %s", case_name(in), name,
                         got, letters, a);
    }
    if (m->dtype == DTYPE_BOOL) {
        const uint8_t *bytes = m->data;
        for (int64_t i = 0; i < tensor_numel(m); i++)
            if (bytes[i] > 1)
                return error_set(err, "%s: tensor '%s' holds the byte %d at flat index %lld; "
                                 "a BOOL mask holds only 0 and 1", case_name(in), name, bytes[i],
                                 (long long)i);
    }
    return 0;
}

/* The options of ops mha and mha_backward: nn.MultiheadAttention's
 * arguments and those of its forward (num_heads spelt nhead, as the encoder
 * and decoder layers spell it). */
static const CaseOption MHA_OPTIONS[] = {
    {"nhead", CASE_INT, "[1, 2147483647]", NULL, "the number of heads"},
    {"embed_dim", CASE_INT, "[1, 2147483647]", "", "the model width, the query's last dimension"},
    {"kdim", CASE_INT, "[1, 2147483647]", "", "the key's last dimension"},
    {"vdim", CASE_INT, "[1, 2147483647]", "", "the value's last dimension"},
    {"bias", CASE_BOOL, NULL, "", "in_proj_bias and out_proj.bias present"},
    {"dropout", CASE_FLOAT, "[0, 1)", "0", "dropout on the weights"},
    {"batch_first", CASE_BOOL, NULL, "true", "(N, L, D) inputs"},
    {"add_bias_kv", CASE_BOOL, NULL, "false", "a learnt key and value appended"},
    {"add_zero_attn", CASE_BOOL, NULL, "false", "a zero key and value appended"},
    {"need_weights", CASE_BOOL, NULL, "true", "the attention weights returned"},
    {"average_attn_weights", CASE_BOOL, NULL, "true", "the weights averaged over the heads"},
    {"is_causal", CASE_BOOL, NULL, "false", "the hint that attn_mask is causal"},
    {"self_attention", CASE_BOOL, NULL, "false", "key = value = query, held once"},
    {0},
};

/* Options PyTorch has and this chapter leaves out. */
static int check_unsupported(const TensorFile *in, const CaseArgs *a, Error *err)
{
    if (!case_bool(a, "batch_first"))
        return error_set(err, "%s: metadata 'batch_first' is false; this chapter reads "
                         "batch-first (N, L, D) inputs only (transpose (L, N, D) ones first)",
                         case_name(in));
    if (case_float(a, "dropout") != 0.0)
        return error_set(err, "%s: metadata 'dropout' is '%s'; this chapter has no dropout on "
                         "the attention weights, only 0 is supported", case_name(in),
                         tensorfile_meta(in, "dropout"));
    const char *keys[2] = {"add_bias_kv", "add_zero_attn"};
    for (int i = 0; i < 2; i++) {
        if (case_bool(a, keys[i]))
            return error_set(err, "%s: metadata '%s' is true; not supported by this chapter",
                             case_name(in), keys[i]);
    }
    return 0;
}

/* query, key, value: F32, rank 3 (batched) or 2 (unbatched), sizes that agree. */
static int read_inputs(const TensorFile *in, MhaCase *c, Error *err)
{
    const Tensor *q, *k, *v;
    if (tensorfile_get(in, "query", DTYPE_F32, -1, &q, err) != 0) return -1;
    if (q->ndim != 2 && q->ndim != 3)
        return error_set(err, "%s: tensor 'query' has rank %d; expected (N, L, D) or, "
                         "unbatched, (L, D)", case_name(in), q->ndim);
    if (case_check_dims(in, "query", q, err) != 0) return -1;
    if (c->self_attention) {
        if (refuse(in, "key", "a self_attention case holds query alone (key = value = "
                   "query)", err) != 0 ||
            refuse(in, "value", "a self_attention case holds query alone (key = value = "
                   "query)", err) != 0)
            return -1;
        k = v = q;
    } else if (tensorfile_get(in, "key", DTYPE_F32, -1, &k, err) != 0 ||
               tensorfile_get(in, "value", DTYPE_F32, -1, &v, err) != 0 ||
               case_check_dims(in, "key", k, err) != 0 ||
               case_check_dims(in, "value", v, err) != 0) {
        return -1;
    }
    char qb[128], kb[128], vb[128];
    tensor_shape_str(q, qb, sizeof qb);
    tensor_shape_str(k, kb, sizeof kb);
    tensor_shape_str(v, vb, sizeof vb);
    if (k->ndim != q->ndim || v->ndim != q->ndim)
        return error_set(err, "%s: query %s, key %s and value %s must all be batched (3 "
                         "dimensions) or all unbatched (2)", case_name(in), qb, kb, vb);
    c->batched = q->ndim == 3;
    int b = c->batched;                       /* index of the sequence dimension */
    if (b && (k->shape[0] != q->shape[0] || v->shape[0] != q->shape[0]))
        return error_set(err, "%s: query %s, key %s and value %s must have the same batch "
                         "size N", case_name(in), qb, kb, vb);
    if (v->shape[b] != k->shape[b])
        return error_set(err, "%s: key %s and value %s must have the same number of "
                         "positions S", case_name(in), kb, vb);
    c->N = b ? (int)q->shape[0] : 1;
    c->L = (int)q->shape[b];
    c->D = (int)q->shape[b + 1];
    c->S = (int)k->shape[b];
    c->Ek = (int)k->shape[b + 1];
    c->Ev = (int)v->shape[b + 1];
    c->query = q->data;
    c->key = k->data;
    c->value = v->data;
    return 0;
}

/* The parameters, packed or separate as kdim and vdim decide, with or
 * without biases. */
static int read_params(const TensorFile *in, MhaCase *c, const CaseArgs *a, Error *err)
{
    int64_t D = c->D, Ek = c->Ek, Ev = c->Ev;
    const Tensor *t;
    MhaParams *p = &c->params;
    if (Ek == D && Ev == D) {
        const char *why = "kdim == vdim == embed_dim, where nn.MultiheadAttention packs the "
                          "three projections into in_proj_weight";
        if (refuse(in, "q_proj_weight", why, err) != 0 ||
            refuse(in, "k_proj_weight", why, err) != 0 ||
            refuse(in, "v_proj_weight", why, err) != 0 ||
            case_get_shaped(in, "in_proj_weight", (int64_t[]){3 * D, D}, 2, "(3D, D)", &t,
                            err) != 0)
            return -1;
        p->in_proj_weight = t->data;
    } else {
        char why[160];
        snprintf(why, sizeof why, "kdim %lld or vdim %lld differs from embed_dim %lld, where "
                 "nn.MultiheadAttention has separate q/k/v_proj_weight", (long long)Ek,
                 (long long)Ev, (long long)D);
        if (refuse(in, "in_proj_weight", why, err) != 0) return -1;
        if (case_get_shaped(in, "q_proj_weight", (int64_t[]){D, D}, 2, "(D, D)", &t, err) != 0)
            return -1;
        p->q_proj_weight = t->data;
        if (case_get_shaped(in, "k_proj_weight", (int64_t[]){D, Ek}, 2, "(D, kdim)", &t, err) != 0)
            return -1;
        p->k_proj_weight = t->data;
        if (case_get_shaped(in, "v_proj_weight", (int64_t[]){D, Ev}, 2, "(D, vdim)", &t, err) != 0)
            return -1;
        p->v_proj_weight = t->data;
    }
    if (case_get_shaped(in, "out_proj.weight", (int64_t[]){D, D}, 2, "(D, D)", &t, err) != 0)
        return -1;
    p->out_proj_weight = t->data;

    /* bias=True gives both biases, bias=False neither. */
    int has_in = tensorfile_find(in, "in_proj_bias") != NULL;
    int has_out = tensorfile_find(in, "out_proj.bias") != NULL;
    if (has_in != has_out)
        return error_set(err, "%s: tensor '%s' is present but '%s' is missing; "
                         "nn.MultiheadAttention has both biases (bias=True) or neither",
                         case_name(in), has_in ? "in_proj_bias" : "out_proj.bias",
                         has_in ? "out_proj.bias" : "in_proj_bias");
    int bias = case_given(a, "bias") ? case_bool(a, "bias") : has_in;
    if (bias != has_in)
        return error_set(err, "%s: metadata 'bias' is %s but in_proj_bias and out_proj.bias "
                         "are %s", case_name(in), bias ? "true" : "false",
                         has_in ? "present" : "missing");
    if (has_in) {
        if (case_get_shaped(in, "in_proj_bias", (int64_t[]){3 * D}, 1, "(3D,)", &t, err) != 0)
            return -1;
        p->in_proj_bias = t->data;
        if (case_get_shaped(in, "out_proj.bias", (int64_t[]){D}, 1, "(D,)", &t, err) != 0)
            return -1;
        p->out_proj_bias = t->data;
    }
    return 0;
}

static int read_masks(const TensorFile *in, MhaCase *c, Error *err)
{
    int64_t N = c->N, L = c->L, S = c->S, H = c->H;
    c->key_padding_mask = tensorfile_find(in, "key_padding_mask");
    if (c->key_padding_mask) {
        const int64_t shapes[2][3] = {{N, S}, {S}};
        const int ndims[2] = {2, 1};
        int s = c->batched ? 0 : 1;
        if (check_mask(in, "key_padding_mask", c->key_padding_mask, shapes + s, ndims + s, 1,
                       c->batched ? "(N, S)" : "(S,) for unbatched inputs", err) != 0)
            return -1;
    }
    c->attn_mask = tensorfile_find(in, "attn_mask");
    if (c->attn_mask) {
        const int64_t shapes[2][3] = {{L, S}, {N * H, L, S}};
        const int ndims[2] = {2, 3};
        if (check_mask(in, "attn_mask", c->attn_mask, shapes, ndims, 2,
                       c->batched ? "(L, S) or (N * nhead, L, S)"
                                  : "(L, S) or (nhead, L, S)", err) != 0)
            return -1;
    }
    /* PyTorch's is_causal hint (mha_case.h). */
    if (c->is_causal && !c->attn_mask)
        return error_set(err, "%s: metadata 'is_causal' is true but there is no attn_mask; "
                         "nn.MultiheadAttention needs attn_mask with the is_causal hint (it "
                         "raises 'Need attn_mask if specifying the is_causal hint')", case_name(in));
    c->causal = c->is_causal && !c->key_padding_mask && !c->need_weights;
    c->use_attn_mask = c->attn_mask && !c->causal;
    return 0;
}

int mha_case_read(const TensorFile *in, MhaCase *c, Error *err)
{
    memset(c, 0, sizeof *c);
    const char *op = tensorfile_meta(in, "op");
    if (!op) return error_set(err, "%s: metadata 'op' is missing", case_name(in));
    if (strcmp(op, "mha") != 0 && strcmp(op, "mha_backward") != 0)
        return error_set(err, "%s: op '%s' is not a chapter 03 op (mha, mha_backward)",
                         case_name(in), op);
    c->backward = strcmp(op, "mha_backward") == 0;

    CaseArgs a;
    if (case_read_args(MHA_OPTIONS, in, &a, err) != 0 || check_unsupported(in, &a, err) != 0)
        return -1;
    c->self_attention = case_bool(&a, "self_attention");
    c->need_weights = case_bool(&a, "need_weights");
    c->average_attn_weights = case_bool(&a, "average_attn_weights");
    c->is_causal = case_bool(&a, "is_causal");

    if (read_inputs(in, c, err) != 0) return -1;

    long long H = case_int(&a, "nhead");
    if (c->D % H != 0)
        return error_set(err, "%s: embed_dim %d (the last dimension of 'query') is not "
                         "divisible by nhead %lld", case_name(in), c->D, H);
    c->H = (int)H;
    const char *dims[3] = {"embed_dim", "kdim", "vdim"};
    const char *of[3] = {"query", "key", "value"};
    const int size[3] = {c->D, c->Ek, c->Ev};
    for (int i = 0; i < 3; i++)
        if (case_given(&a, dims[i]) && case_int(&a, dims[i]) != size[i])
            return error_set(err, "%s: metadata '%s' is %lld but the last dimension of '%s' "
                             "is %d", case_name(in), dims[i], case_int(&a, dims[i]), of[i],
                             size[i]);
    /* Every buffer of the layer must fit the int sizes of the layer functions. */
    int64_t att = (int64_t)c->N * c->H * c->L * c->S;
    int64_t widest = c->D > c->Ek ? c->D : c->Ek;
    if (c->Ev > widest) widest = c->Ev;
    int64_t rows = (int64_t)c->N * (c->L > c->S ? c->L : c->S) * widest;
    if (att > INT_MAX || rows > INT_MAX)
        return error_set(err, "%s: the case needs buffers of %lld floats (N %d, L %d, S %d, "
                         "D %d, nhead %d), more than this implementation allows (%d)",
                         case_name(in), (long long)(att > rows ? att : rows), c->N, c->L, c->S,
                         c->D, c->H, INT_MAX);

    if (read_params(in, c, &a, err) != 0 || read_masks(in, c, err) != 0) return -1;

    if (c->backward) {
        const Tensor *dout;
        int64_t want[3] = {c->N, c->L, c->D};
        int b = c->batched;
        if (case_get_shaped(in, "grad_output", want + (1 - b), 2 + b,
                            b ? "(N, L, D), the output's shape" : "(L, D), the output's shape",
                            &dout, err) != 0)
            return -1;
        c->dout = dout->data;
    }
    return 0;
}

int mha_case_has_bias(const MhaCase *c)
{
    return c->use_attn_mask || c->key_padding_mask;
}

int mha_case_bias(const MhaCase *c, float *bias)
{
    const Tensor *kpm = c->key_padding_mask, *am = c->use_attn_mask ? c->attn_mask : NULL;
    return mha_mask_bias(bias, kpm ? kpm->data : NULL, kpm && kpm->dtype == DTYPE_BOOL,
                         am ? am->data : NULL, am && am->dtype == DTYPE_BOOL,
                         am && am->ndim == 3, c->N, c->H, c->L, c->S);
}

/* ------------------------------------------------------------------------ */
/* Evaluation                                                               */
/* ------------------------------------------------------------------------ */

/* A zeroed F32 output `name` of the given shape, added to `out`, or NULL.
 * With `batched` false the leading dimension (N = 1) is dropped. The output
 * file is written only if the whole evaluation succeeds (run_case_file). */
static float *output_new(TensorFile *out, const char *name, int batched, int ndim,
                         const int64_t *shape, Error *err)
{
    int skip = batched ? 0 : 1;
    return case_output_f32(out, name, ndim - skip, shape + skip, err);
}

/* An output shaped like the input tensor `like` of the case. */
static float *output_like(TensorFile *out, const char *name, const TensorFile *in,
                          const char *like, Error *err)
{
    const Tensor *t = tensorfile_find(in, like);
    return case_output_f32(out, name, t->ndim, t->shape, err);
}

/* The parameter names of nn.MultiheadAttention's state_dict, in MhaParams
 * order; the gradient of each is "grad_" + its name. */
static const char *const PARAM_NAMES[7] = {"in_proj_weight", "q_proj_weight", "k_proj_weight",
                                           "v_proj_weight",  "in_proj_bias",  "out_proj.weight",
                                           "out_proj.bias"};

static int eval_mha(const TensorFile *in, const CaseArgs *args, TensorFile *out, Error *err)
{
    MhaCase c;
    if (mha_case_read(in, &c, err) != 0) return -1;
    int N = c.N, L = c.L, S = c.S, D = c.D, H = c.H, b = c.batched;

    MhaCache cache = {0};
    float *bias = NULL;
    int rc = -1;

    float *y = output_new(out, "output", b, 3, (int64_t[]){N, L, D}, err);   /* (N, L, D) */
    if (!y) goto done;
    float *weights = NULL;
    if (c.need_weights) {
        weights = c.average_attn_weights
                      ? output_new(out, "attn_weights", b, 3, (int64_t[]){N, L, S}, err)
                      : output_new(out, "attn_weights", b, 4, (int64_t[]){N, H, L, S}, err);
        if (!weights) goto done;
    }
    Error alloc_err;
    if (mha_cache_alloc(&cache, &(MhaDims){N, L, S, D, H, c.Ek, c.Ev}, c.backward,
                        &alloc_err) != 0) {
        error_set(err, "%s: %s", case_name(in), alloc_err.msg);
        goto done;
    }
    if (mha_case_has_bias(&c)) {
        bias = calloc((size_t)N * H * L * S, sizeof *bias);                 /* (N, H, L, S) */
        if (!bias) {
            error_set(err, "%s: out of memory for the attention mask", case_name(in));
            goto done;
        }
        if (mha_case_bias(&c, bias) != 0) {
            error_set(err, "%s: mha_mask_bias failed", case_name(in));
            goto done;
        }
    }
    if (mha_forward(y, &cache, c.query, c.key, c.value, &c.params, bias, c.causal) != 0) {
        error_set(err, "%s: mha_forward failed", case_name(in));
        goto done;
    }
    if (weights) {
        if (!c.average_attn_weights) {
            memcpy(weights, cache.att, (size_t)N * H * L * S * sizeof *weights);
        } else if (mha_average_heads(weights, cache.att, N, H, L, S) != 0) {
            error_set(err, "%s: mha_average_heads failed", case_name(in));
            goto done;
        }
    }
    if (c.backward) {
        /* The gradients, zeroed by tensor_alloc: mha_backward adds into them.
         * Self-attention has one input, and one buffer takes all three paths. */
        float *dq = output_like(out, "grad_query", in, "query", err);
        float *dk = c.self_attention ? dq : output_like(out, "grad_key", in, "key", err);
        float *dv = c.self_attention ? dq : output_like(out, "grad_value", in, "value", err);
        if (!dq || !dk || !dv) goto done;
        float *g[7] = {0};
        for (int i = 0; i < 7; i++) {
            if (!tensorfile_find(in, PARAM_NAMES[i])) continue;
            char name[40];
            snprintf(name, sizeof name, "grad_%s", PARAM_NAMES[i]);
            if (!(g[i] = output_like(out, name, in, PARAM_NAMES[i], err))) goto done;
        }
        MhaParams grads = {g[0], g[1], g[2], g[3], g[4], g[5], g[6]};
        if (mha_backward(dq, dk, dv, &grads, c.dout, c.query, c.key, c.value, &c.params,
                         &cache) != 0) {
            error_set(err, "%s: mha_backward failed", case_name(in));
            goto done;
        }
    }
    rc = 0;
done:
    mha_cache_free(&cache);
    free(bias);
    return rc;
}

/* The chapter's ops. mha_case_read() checks the tensors' shapes and dtypes. */
static const CaseOp OPS[] = {
    {"mha", MHA_OPTIONS, 0, "query [key] [value] [key_padding_mask] [attn_mask]",
     "output [attn_weights]", eval_mha},
    {"mha_backward", MHA_OPTIONS, 0, "query [key] [value] [key_padding_mask] [attn_mask] "
     "grad_output", "output [attn_weights] grad_query [grad_key] [grad_value] grad_<parameter>",
     eval_mha},
    {0},
};

int mha_case_eval(const TensorFile *in, TensorFile *out, Error *err)
{
    return case_dispatch(OPS, "03", in, out, err);
}
