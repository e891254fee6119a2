/*
 * encoder_case.c - see encoder_case.h for the ops, their tensors and options.
 *
 * Each evaluator reads and checks all of its inputs first, then allocates its
 * results, then calls the layer functions. Results are collected in an
 * Outputs list and handed to the output file only when all of them are
 * computed, so a failure leaves `out` untouched.
 */
#include "encoder_case.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "casefile.h"
#include "dropout.h"
#include "embedding.h"
#include "encoder_layer.h"
#include "ffn.h"
#include "positional.h"
#include "rng.h"

/* ------------------------------------------------------------------------ */
/* Outputs, added to the file together at the end                           */
/* ------------------------------------------------------------------------ */

/* Enough for an encoder stack of MAX_CASE_LAYERS layers: the output, the
 * input's gradient, 12 parameter gradients per layer and the final norm's 2. */
#define MAX_CASE_LAYERS 4
#define MAX_OUTPUTS (4 + 12 * MAX_CASE_LAYERS)
#define MAX_NAME 64

typedef struct {
    int n;
    char names[MAX_OUTPUTS][MAX_NAME];
    Tensor tensors[MAX_OUTPUTS];
} Outputs;

/* A zeroed tensor called `name`; returns its data, or NULL on failure. */
static void *output_new(Outputs *o, const char *name, DType dtype, int ndim,
                        const int64_t *shape, Error *err)
{
    if (o->n == MAX_OUTPUTS || strlen(name) >= MAX_NAME) {
        error_set(err, "too many outputs, or the output name '%s' is too long", name);
        return NULL;
    }
    Tensor *t = &o->tensors[o->n];
    if (case_tensor_alloc(t, dtype, ndim, shape, err) != 0) return NULL;
    snprintf(o->names[o->n++], MAX_NAME, "%s", name);
    return t->data;
}

static float *output_f32(Outputs *o, const char *name, int ndim, const int64_t *shape,
                         Error *err)
{
    return output_new(o, name, DTYPE_F32, ndim, shape, err);
}

static void outputs_free(Outputs *o)
{
    for (int i = 0; i < o->n; i++) case_tensor_free(&o->tensors[i]);
    o->n = 0;
}

/* Moves every output into `out`, or frees them all. */
static int outputs_move(Outputs *o, TensorFile *out, Error *err)
{
    for (int i = 0; i < o->n; i++) {
        if (tensorfile_add(out, o->names[i], &o->tensors[i], err) != 0) {
            outputs_free(o);
            return -1;
        }
    }
    o->n = 0;
    return 0;
}

/* Frees the outputs and reports that a layer function failed (an exercise
 * stub returns -1 and has printed "not implemented: ..."). */
static int layer_failed(Outputs *o, const TensorFile *in, const char *function, Error *err)
{
    outputs_free(o);
    return error_set(err, "%s: %s failed", case_name(in), function);
}

/* ------------------------------------------------------------------------ */
/* Reading and checking inputs                                               */
/* ------------------------------------------------------------------------ */

/* Fails unless n elements fit the int sizes of the layer functions. */
static int check_size(const TensorFile *in, const char *what, int64_t n, Error *err)
{
    if (n > INT_MAX)
        return error_set(err, "%s: %s has %lld elements, more than this program handles (%d)",
                         case_name(in), what, (long long)n, INT_MAX);
    return 0;
}

/* The tensor `name` of the given dtype and rank. Each entry of `expect` that
 * is >= 0 must match the shape; `letters` names the dimensions for the
 * message, e.g. "(D, F)". */
static int get_tensor(const TensorFile *in, const char *name, DType dtype, int ndim,
                      const int64_t *expect, const char *letters, const Tensor **t, Error *err)
{
    if (tensorfile_get(in, name, dtype, ndim, t, err) != 0) return -1;
    if (expect && case_check_shape(in, name, *t, expect, letters, err) != 0) return -1;
    return check_size(in, name, tensor_numel(*t), err);
}

/* A tensor of the given dtype with exactly the shape of `like`; like_what
 * describes `like` for the message ("'input'"). */
static int get_like(const TensorFile *in, const char *name, const Tensor *like,
                    const char *like_what, DType dtype, const Tensor **t, Error *err)
{
    if (tensorfile_get(in, name, dtype, -1, t, err) != 0) return -1;
    if ((*t)->ndim != like->ndim ||
        memcmp((*t)->shape, like->shape, sizeof like->shape[0] * like->ndim) != 0) {
        char got[128], want[128];
        return error_set(err, "%s: tensor '%s' has shape %s, expected %s like %s", case_name(in),
                         name, tensor_shape_str(*t, got, sizeof got),
                         tensor_shape_str(like, want, sizeof want), like_what);
    }
    return 0;
}

/* A dimension that must be at least 1 (d_model, the vocabulary, ...). */
static int check_positive(const TensorFile *in, const char *name, int dim, const Tensor *t,
                          const char *what, Error *err)
{
    if (t->shape[dim] < 1)
        return error_set(err, "%s: tensor '%s' has %s = 0; it must be at least 1", case_name(in),
                         name, what);
    return 0;
}

/* A mask tensor: BOOL of the given shape, each byte 0 or 1. */
static int get_mask(const TensorFile *in, const char *name, const Tensor *like,
                    const char *like_what, const Tensor **t, Error *err)
{
    if (get_like(in, name, like, like_what, DTYPE_BOOL, t, err) != 0) return -1;
    const uint8_t *m = (*t)->data;
    for (int64_t i = 0; i < tensor_numel(*t); i++)
        if (m[i] > 1)
            return error_set(err, "%s: tensor '%s' holds the byte %d at flat index %lld; a "
                             "BOOL mask holds only 0 and 1", case_name(in), name, m[i],
                             (long long)i);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Token embedding                                                           */
/* ------------------------------------------------------------------------ */

static int eval_embedding(const TensorFile *in, const CaseArgs *args, TensorFile *out,
                          Error *err)
{
    int backward = case_is_backward(in);
    const Tensor *ids, *w, *dy = NULL;
    if (tensorfile_get(in, "input", DTYPE_I64, 2, &ids, err) != 0 ||
        check_size(in, "tensor 'input'", tensor_numel(ids), err) != 0 ||
        get_tensor(in, "embedding.weight", DTYPE_F32, 2, NULL, "(V, D)", &w, err) != 0 ||
        check_positive(in, "embedding.weight", 0, w, "V (rows, the vocabulary)", err) != 0 ||
        check_positive(in, "embedding.weight", 1, w, "D (columns, d_model)", err) != 0)
        return -1;
    int64_t N = ids->shape[0], T = ids->shape[1], V = w->shape[0], D = w->shape[1];
    if (check_size(in, "the output (N, T, D)", N * T * D, err) != 0) return -1;

    double scale = case_float(args, "scale");
    long long padding_idx = EMBEDDING_NO_PADDING;
    if (case_given(args, "padding_idx")) {
        padding_idx = case_int(args, "padding_idx");
        if (padding_idx < -V || padding_idx >= V)
            return error_set(err, "%s: metadata padding_idx is %lld, outside -%lld..%lld for "
                             "'embedding.weight' with %lld rows", case_name(in), padding_idx,
                             (long long)V, (long long)(V - 1), (long long)V);
        if (padding_idx < 0) padding_idx += V;   /* nn.Embedding counts from the end */
    }

    char where[600];
    snprintf(where, sizeof where, "%s: tensor 'input'", case_name(in));
    if (embedding_check_ids(ids->data, N * T, V, where, err) != 0) return -1;
    if (backward &&
        get_tensor(in, "grad_output", DTYPE_F32, 3, (int64_t[]){N, T, D}, "(N, T, D)", &dy,
                   err) != 0)
        return -1;

    Outputs o = {0};
    float *y = output_f32(&o, "output", 3, (int64_t[]){N, T, D}, err);
    float *dw = NULL;
    if (!y || (backward && !(dw = output_f32(&o, "grad_embedding.weight", 2, w->shape, err)))) {
        outputs_free(&o);
        return -1;
    }
    if (embedding_forward(y, ids->data, w->data, N, T, D, (float)scale) != 0)
        return layer_failed(&o, in, "embedding_forward", err);
    if (backward && embedding_backward(dw, dy->data, ids->data, N, T, D, (float)scale,
                                       padding_idx) != 0)
        return layer_failed(&o, in, "embedding_backward", err);
    return outputs_move(&o, out, err);
}

/* ------------------------------------------------------------------------ */
/* Positions                                                                 */
/* ------------------------------------------------------------------------ */

static int eval_positional(const TensorFile *in, const CaseArgs *args, TensorFile *out,
                           Error *err)
{
    int learned = strncmp(tensorfile_meta(in, "op"), "positional_learned", 18) == 0;
    int backward = case_is_backward(in);
    const Tensor *x, *w = NULL, *dy = NULL;
    if (get_tensor(in, "input", DTYPE_F32, 3, NULL, "(N, T, D)", &x, err) != 0 ||
        check_positive(in, "input", 2, x, "D (d_model)", err) != 0)
        return -1;
    int64_t N = x->shape[0], T = x->shape[1], D = x->shape[2];

    /* The table's length: the rows of a learned table, or the metadata
     * max_len (optional for the sinusoidal table, which has no fixed size). */
    long long max_len;
    if (learned) {
        if (get_tensor(in, "pos_embedding.weight", DTYPE_F32, 2, (int64_t[]){-1, D},
                       "(max_len, D)", &w, err) != 0)
            return -1;
        max_len = w->shape[0];
    } else {
        max_len = case_given(args, "max_len") ? case_int(args, "max_len") : T;
    }
    if (T > max_len)
        return error_set(err, "%s: the sequence is longer than the position table: tensor "
                         "'input' has T = %lld positions, max_len is %lld%s", case_name(in),
                         (long long)T, max_len,
                         learned ? " (the rows of 'pos_embedding.weight')" : "");
    if (learned && case_given(args, "max_len") && case_int(args, "max_len") != max_len)
        return error_set(err, "%s: metadata max_len is %lld but 'pos_embedding.weight' has "
                         "%lld rows", case_name(in), case_int(args, "max_len"), max_len);
    if (backward && get_like(in, "grad_output", x, "'input'", DTYPE_F32, &dy, err) != 0)
        return -1;

    Outputs o = {0};
    float *y = output_f32(&o, "output", 3, x->shape, err);
    float *pe = NULL, *dx = NULL, *dw = NULL;
    int ok = y != NULL;
    if (ok && !learned) ok = (pe = output_f32(&o, "pe", 2, (int64_t[]){T, D}, err)) != NULL;
    if (ok && backward) ok = (dx = output_f32(&o, "grad_input", 3, x->shape, err)) != NULL;
    if (ok && backward && learned)
        ok = (dw = output_f32(&o, "grad_pos_embedding.weight", 2, w->shape, err)) != NULL;
    if (!ok) {
        outputs_free(&o);
        return -1;
    }
    if (!learned && positional_sinusoidal_table(pe, T, D) != 0)
        return layer_failed(&o, in, "positional_sinusoidal_table", err);
    if (positional_forward(y, x->data, learned ? w->data : pe, N, T, D) != 0)
        return layer_failed(&o, in, "positional_forward", err);
    if (backward && positional_backward(dx, dw, dy->data, N, T, D) != 0)
        return layer_failed(&o, in, "positional_backward", err);
    return outputs_move(&o, out, err);
}

/* ------------------------------------------------------------------------ */
/* Dropout                                                                   */
/* ------------------------------------------------------------------------ */

/* dropout_mask, dropout_mask_backward: PyTorch's mask, given by the case. */
static int eval_dropout_mask(const TensorFile *in, const CaseArgs *args, TensorFile *out,
                             Error *err)
{
    int backward = case_is_backward(in);
    const Tensor *x, *mask = NULL, *dy = NULL;
    float p = (float)case_float(args, "dropout");
    int training = case_bool(args, "training");
    if (tensorfile_get(in, "input", DTYPE_F32, -1, &x, err) != 0 ||
        check_size(in, "tensor 'input'", tensor_numel(x), err) != 0)
        return -1;
    if (training && get_mask(in, "mask", x, "'input'", &mask, err) != 0) return -1;
    if (backward && get_like(in, "grad_output", x, "'input'", DTYPE_F32, &dy, err) != 0)
        return -1;

    int n = (int)tensor_numel(x);
    const uint8_t *m = mask ? mask->data : NULL;   /* NULL: evaluation mode */
    Outputs o = {0};
    float *y = output_f32(&o, "output", x->ndim, x->shape, err);
    float *dx = NULL;
    if (!y || (backward && !(dx = output_f32(&o, "grad_input", x->ndim, x->shape, err)))) {
        outputs_free(&o);
        return -1;
    }
    if (dropout_forward(y, x->data, m, n, p) != 0)
        return layer_failed(&o, in, "dropout_forward", err);
    if (backward && dropout_backward(dx, dy->data, m, n, p) != 0)
        return layer_failed(&o, in, "dropout_backward", err);
    return outputs_move(&o, out, err);
}

/* dropout_rng: the mask drawn by this project's RNG from a seed. */
static int eval_dropout_rng(const TensorFile *in, const CaseArgs *args, TensorFile *out,
                            Error *err)
{
    const Tensor *x;
    float p = (float)case_float(args, "dropout");
    long long seed = case_int(args, "rng_seed"), stream = case_int(args, "rng_stream");
    if (tensorfile_get(in, "input", DTYPE_F32, -1, &x, err) != 0 ||
        check_size(in, "tensor 'input'", tensor_numel(x), err) != 0)
        return -1;

    int n = (int)tensor_numel(x);
    Outputs o = {0};
    uint8_t *mask = output_new(&o, "mask", DTYPE_BOOL, x->ndim, x->shape, err);
    float *y = mask ? output_f32(&o, "output", x->ndim, x->shape, err) : NULL;
    if (!y) {
        outputs_free(&o);
        return -1;
    }
    Rng rng;
    rng_seed(&rng, (uint64_t)seed, (uint64_t)stream);
    if (dropout_mask(mask, n, p, &rng) != 0) return layer_failed(&o, in, "dropout_mask", err);
    if (dropout_forward(y, x->data, mask, n, p) != 0)
        return layer_failed(&o, in, "dropout_forward", err);
    return outputs_move(&o, out, err);
}

/* ------------------------------------------------------------------------ */
/* The feed-forward block                                                    */
/* ------------------------------------------------------------------------ */

static int eval_ffn(const TensorFile *in, const CaseArgs *args, TensorFile *out, Error *err)
{
    int backward = case_is_backward(in);
    const Tensor *x, *w1, *w2, *b1 = NULL, *b2 = NULL, *mask = NULL, *dy = NULL;
    if (get_tensor(in, "input", DTYPE_F32, 3, NULL, "(N, T, D)", &x, err) != 0 ||
        check_positive(in, "input", 2, x, "D (d_model)", err) != 0)
        return -1;
    int64_t N = x->shape[0], T = x->shape[1], D = x->shape[2];
    if (get_tensor(in, "linear1.weight", DTYPE_F32, 2, (int64_t[]){-1, D}, "(F, D)", &w1,
                   err) != 0 ||
        check_positive(in, "linear1.weight", 0, w1, "F (dim_feedforward)", err) != 0)
        return -1;
    int64_t F = w1->shape[0];
    if (get_tensor(in, "linear2.weight", DTYPE_F32, 2, (int64_t[]){D, F}, "(D, F)", &w2,
                   err) != 0 ||
        check_size(in, "the hidden layer (N, T, F)", N * T * F, err) != 0)
        return -1;

    int bias = case_given(args, "bias") ? case_bool(args, "bias")
                                        : tensorfile_find(in, "linear1.bias") != NULL;
    if (bias) {
        if (get_tensor(in, "linear1.bias", DTYPE_F32, 1, (int64_t[]){F}, "(F,)", &b1, err) ||
            get_tensor(in, "linear2.bias", DTYPE_F32, 1, (int64_t[]){D}, "(D,)", &b2, err))
            return -1;
    } else if (tensorfile_find(in, "linear1.bias") || tensorfile_find(in, "linear2.bias")) {
        return error_set(err, "%s: metadata bias is false but the case holds a bias tensor",
                         case_name(in));
    }

    float p = (float)case_float(args, "dropout");
    int training = case_bool(args, "training");
    /* The shape the mask must have: that of the hidden layer. */
    Tensor hidden_shape = {.dtype = DTYPE_F32, .ndim = 3, .shape = {N, T, F}};
    if (training && (p > 0.0f || tensorfile_find(in, "dropout_mask"))) {
        if (!tensorfile_find(in, "dropout_mask"))
            return error_set(err, "%s: dropout is %g in training mode, so the case must hold "
                             "the BOOL tensor 'dropout_mask' (N, T, F) (C cannot draw "
                             "PyTorch's mask)", case_name(in), p);
        if (get_mask(in, "dropout_mask", &hidden_shape, "the hidden layer (N, T, F)", &mask,
                     err) != 0)
            return -1;
    }
    if (backward && get_like(in, "grad_output", x, "'input'", DTYPE_F32, &dy, err) != 0)
        return -1;

    /* pre, hidden and dhidden are working space, not outputs. */
    Tensor work[3] = {{0}};
    Outputs o = {0};
    int ok = 1;
    for (int i = 0; ok && i < (backward ? 3 : 2); i++)
        ok = case_tensor_alloc(&work[i], DTYPE_F32, 3, hidden_shape.shape, err) == 0;
    float *y = NULL, *dx = NULL, *dw1 = NULL, *db1 = NULL, *dw2 = NULL, *db2 = NULL;
    if (ok) ok = (y = output_f32(&o, "output", 3, x->shape, err)) != NULL;
    if (ok && backward) {
        ok = (dx = output_f32(&o, "grad_input", 3, x->shape, err)) &&
             (dw1 = output_f32(&o, "grad_linear1.weight", 2, w1->shape, err)) &&
             (!bias || (db1 = output_f32(&o, "grad_linear1.bias", 1, b1->shape, err))) &&
             (dw2 = output_f32(&o, "grad_linear2.weight", 2, w2->shape, err)) &&
             (!bias || (db2 = output_f32(&o, "grad_linear2.bias", 1, b2->shape, err)));
    }
    const uint8_t *m = mask ? mask->data : NULL;
    float *pb1 = b1 ? b1->data : NULL, *pb2 = b2 ? b2->data : NULL;
    int rc = ok ? 0 : -1;
    FfnParams params = {w1->data, pb1, w2->data, pb2};
    FfnCache cache = {(int)D, (int)F, work[0].data, work[1].data, m, p};
    FfnParams grads = {dw1, db1, dw2, db2};
    if (rc == 0 && ffn_forward(y, &cache, x->data, &params, (int)(N * T)) != 0)
        rc = layer_failed(&o, in, "ffn_forward", err);
    if (rc == 0 && backward &&
        ffn_backward(dx, &grads, work[2].data, dy->data, x->data, &params, &cache,
                     (int)(N * T)) != 0)
        rc = layer_failed(&o, in, "ffn_backward", err);
    for (int i = 0; i < 3; i++) case_tensor_free(&work[i]);
    if (rc != 0) {
        outputs_free(&o);
        return -1;
    }
    return outputs_move(&o, out, err);
}

/* ------------------------------------------------------------------------ */
/* The encoder layer and the encoder stack                                  */
/* ------------------------------------------------------------------------ */

/* The parameters of one layer under nn.TransformerEncoderLayer's
 * state_dict names, in EncoderLayerParams order, and the letters of their
 * shapes. */
enum { LAYER_PARAMS = 12 };
static const char *const LAYER_PARAM_NAMES[LAYER_PARAMS] = {
    "self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
    "self_attn.out_proj.bias",  "linear1.weight",         "linear1.bias",
    "linear2.weight",           "linear2.bias",           "norm1.weight",
    "norm1.bias",               "norm2.weight",           "norm2.bias"};
static const char *const LAYER_PARAM_LETTERS[LAYER_PARAMS] = {
    "(3D, D)", "(3D,)", "(D, D)", "(D,)", "(F, D)", "(F,)",
    "(D, F)",  "(D,)",  "(D,)",   "(D,)", "(D,)",   "(D,)"};

/* The expected shape of parameter i of a layer with these sizes; F < 0
 * accepts any number of rows of linear1.weight (it defines F). */
static int layer_param_shape(int i, int64_t D, int64_t F, int64_t shape[2])
{
    switch (i) {
    case 0: shape[0] = 3 * D, shape[1] = D; return 2;
    case 1: shape[0] = 3 * D; return 1;
    case 2: shape[0] = D, shape[1] = D; return 2;
    case 4: shape[0] = F, shape[1] = D; return 2;
    case 5: shape[0] = F; return 1;
    case 6: shape[0] = D, shape[1] = F; return 2;
    default: shape[0] = D; return 1;
    }
}

static int eval_encoder(const TensorFile *in, const CaseArgs *args, TensorFile *out,
                        Error *err)
{
    int stack = strncmp(tensorfile_meta(in, "op"), "encoder_layer", 13) != 0;
    int backward = case_is_backward(in);
    const Tensor *src, *kpm = NULL, *mask = NULL, *dy = NULL;
    if (get_tensor(in, "src", DTYPE_F32, 3, NULL, "(N, S, D)", &src, err) != 0 ||
        check_positive(in, "src", 0, src, "N (the batch)", err) != 0 ||
        check_positive(in, "src", 1, src, "S (the sequence length)", err) != 0 ||
        check_positive(in, "src", 2, src, "D (d_model)", err) != 0)
        return -1;
    int64_t N = src->shape[0], S = src->shape[1], D = src->shape[2];

    /* Options. */
    long long H = case_int(args, "nhead"), K = 1;
    int norm_first = case_bool(args, "norm_first"), training = case_bool(args, "training");
    int final_norm = 0;
    double eps = case_float(args, "eps");
    float p = (float)case_float(args, "dropout");
    if (H > D || D % H != 0)
        return error_set(err, "%s: d_model %lld (the last dimension of 'src') is not divisible "
                         "by metadata nhead %lld", case_name(in), (long long)D, H);
    if (training && p > 0.0f)
        return error_set(err, "%s: metadata dropout is %g in training mode; C cannot replay "
                         "PyTorch's dropout masks, so encoder cases run with dropout 0 (or "
                         "training false)", case_name(in), p);
    if (stack) {
        K = case_int(args, "num_layers");
        final_norm = case_given(args, "final_norm") ? case_bool(args, "final_norm")
                                                    : tensorfile_find(in, "norm.weight") != NULL;
    }
    if (check_size(in, "the attention scores (N, nhead, S, S)", N * H * S * S, err) != 0)
        return -1;

    /* Parameters: F is the number of rows of the first linear1.weight. */
    const Tensor *params[MAX_CASE_LAYERS][LAYER_PARAMS];
    const Tensor *norm_w = NULL, *norm_b = NULL;
    int64_t F = -1;
    char name[MAX_NAME];
    for (int k = 0; k < K; k++) {
        for (int i = 0; i < LAYER_PARAMS; i++) {
            int64_t shape[2];
            int ndim = layer_param_shape(i, D, F, shape);
            if (stack) snprintf(name, sizeof name, "layers.%d.%s", k, LAYER_PARAM_NAMES[i]);
            else snprintf(name, sizeof name, "%s", LAYER_PARAM_NAMES[i]);
            if (get_tensor(in, name, DTYPE_F32, ndim, shape, LAYER_PARAM_LETTERS[i],
                           &params[k][i], err) != 0)
                return -1;
            if (i == 4) {
                if (check_positive(in, name, 0, params[k][i], "F (dim_feedforward)", err) != 0)
                    return -1;
                F = params[k][i]->shape[0];
            }
        }
    }
    if (check_size(in, "the hidden layer (N, S, F)", N * S * F, err) != 0) return -1;
    if (final_norm) {
        if (get_tensor(in, "norm.weight", DTYPE_F32, 1, (int64_t[]){D}, "(D,)", &norm_w, err) ||
            get_tensor(in, "norm.bias", DTYPE_F32, 1, (int64_t[]){D}, "(D,)", &norm_b, err))
            return -1;
    } else if (tensorfile_find(in, "norm.weight") || tensorfile_find(in, "norm.bias")) {
        return error_set(err, "%s: metadata final_norm is false but the case holds "
                         "'norm.weight' or 'norm.bias'", case_name(in));
    }

    /* Masks: src_key_padding_mask BOOL (N, S), src_mask BOOL or F32 (S, S). */
    Tensor kpm_shape = {.dtype = DTYPE_BOOL, .ndim = 2, .shape = {N, S}};
    Tensor mask_shape = {.dtype = DTYPE_BOOL, .ndim = 2, .shape = {S, S}};
    if (tensorfile_find(in, "src_key_padding_mask") &&
        get_mask(in, "src_key_padding_mask", &kpm_shape, "(N, S)", &kpm, err) != 0)
        return -1;
    const Tensor *m = tensorfile_find(in, "src_mask");
    if (m && m->dtype == DTYPE_BOOL) {
        if (get_mask(in, "src_mask", &mask_shape, "(S, S)", &mask, err) != 0) return -1;
    } else if (m && get_like(in, "src_mask", &mask_shape, "(S, S)", DTYPE_F32, &mask, err)) {
        return -1;
    }
    if (backward && get_like(in, "grad_output", src, "'src'", DTYPE_F32, &dy, err) != 0)
        return -1;

    /* Outputs: the gradients are zeroed by tensor_alloc, and the backward
     * adds into them. */
    Outputs o = {0};
    EncoderLayerParams lp[MAX_CASE_LAYERS];
    EncoderLayerParams lg[MAX_CASE_LAYERS];
    memset(lg, 0, sizeof lg);
    float *y = output_f32(&o, "output", 3, src->shape, err), *dsrc = NULL;
    float *dnorm_w = NULL, *dnorm_b = NULL;
    int ok = y != NULL;
    if (ok && backward) ok = (dsrc = output_f32(&o, "grad_src", 3, src->shape, err)) != NULL;
    for (int k = 0; k < K; k++) {
        float *v[LAYER_PARAMS];
        float *g[LAYER_PARAMS] = {0};
        for (int i = 0; i < LAYER_PARAMS; i++) {
            v[i] = params[k][i]->data;
            if (!ok || !backward) continue;
            if (stack) snprintf(name, sizeof name, "grad_layers.%d.%s", k, LAYER_PARAM_NAMES[i]);
            else snprintf(name, sizeof name, "grad_%s", LAYER_PARAM_NAMES[i]);
            ok = (g[i] = output_f32(&o, name, params[k][i]->ndim, params[k][i]->shape, err)) !=
                 NULL;
        }
        lp[k] = (EncoderLayerParams){
            .self_attn = {.in_proj_weight = v[0], .in_proj_bias = v[1],
                          .out_proj_weight = v[2], .out_proj_bias = v[3]},
            .linear1_weight = v[4], .linear1_bias = v[5], .linear2_weight = v[6],
            .linear2_bias = v[7], .norm1_weight = v[8], .norm1_bias = v[9],
            .norm2_weight = v[10], .norm2_bias = v[11]};
        lg[k] = (EncoderLayerParams){
            .self_attn = {.in_proj_weight = g[0], .in_proj_bias = g[1],
                          .out_proj_weight = g[2], .out_proj_bias = g[3]},
            .linear1_weight = g[4], .linear1_bias = g[5], .linear2_weight = g[6],
            .linear2_bias = g[7], .norm1_weight = g[8], .norm1_bias = g[9],
            .norm2_weight = g[10], .norm2_bias = g[11]};
    }
    if (ok && backward && final_norm)
        ok = (dnorm_w = output_f32(&o, "grad_norm.weight", 1, norm_w->shape, err)) &&
             (dnorm_b = output_f32(&o, "grad_norm.bias", 1, norm_b->shape, err));
    if (!ok) {
        outputs_free(&o);
        return -1;
    }

    /* The additive attention bias (N, H, S, S) of the two masks. */
    float *bias = NULL;
    EncoderCache cache = {0};
    Error alloc_err;
    int rc = 0;
    if (kpm || mask) {
        bias = calloc((size_t)(N * H * S * S), sizeof *bias);
        if (!bias) rc = error_set(err, "%s: out of memory for the attention mask", case_name(in));
        else if (mha_mask_bias(bias, kpm ? kpm->data : NULL, 1, mask ? mask->data : NULL,
                               mask && mask->dtype == DTYPE_BOOL, 0, (int)N, (int)H, (int)S,
                               (int)S) != 0)
            rc = error_set(err, "%s: mha_mask_bias failed", case_name(in));
    }
    LayerDims dims = {.N = (int)N, .S = (int)S, .D = (int)D, .H = (int)H, .F = (int)F,
                      .norm_first = norm_first, .eps = (float)eps, .dropout = p};
    if (rc == 0 && encoder_cache_alloc(&cache, (int)K, &dims, backward, &alloc_err) != 0)
        rc = error_set(err, "%s: %s", case_name(in), alloc_err.msg);
    EncoderParams ep = {.num_layers = (int)K, .layers = lp,
                        .norm_weight = norm_w ? norm_w->data : NULL,
                        .norm_bias = norm_b ? norm_b->data : NULL};
    EncoderParams eg = {.num_layers = (int)K, .layers = lg, .norm_weight = dnorm_w,
                        .norm_bias = dnorm_b};
    if (rc == 0) {
        if (stack) {
            if (encoder_forward(y, &cache, src->data, &ep, bias, NULL) != 0)
                rc = error_set(err, "%s: encoder_forward failed", case_name(in));
            else if (backward &&
                     encoder_backward(dsrc, &eg, dy->data, src->data, &ep, &cache) != 0)
                rc = error_set(err, "%s: encoder_backward failed", case_name(in));
        } else {
            if (encoder_layer_forward(y, &cache.layers[0], src->data, &lp[0], bias, NULL) != 0)
                rc = error_set(err, "%s: encoder_layer_forward failed", case_name(in));
            else if (backward && encoder_layer_backward(dsrc, &lg[0], dy->data, src->data,
                                                        &lp[0], &cache.layers[0]) != 0)
                rc = error_set(err, "%s: encoder_layer_backward failed", case_name(in));
        }
    }
    encoder_cache_free(&cache);
    free(bias);
    if (rc != 0) {
        outputs_free(&o);
        return -1;
    }
    return outputs_move(&o, out, err);
}

/* ------------------------------------------------------------------------ */

/* The chapter's ops and their options (nn.Embedding's, nn.Dropout's,
 * nn.TransformerEncoderLayer's and nn.TransformerEncoder's arguments). */
static const CaseOption EMBEDDING_OPTIONS[] = {
    {"padding_idx", CASE_INT, "[-9.2e18, 9.2e18]", "", "the id whose row gets no gradient"},
    {"scale", CASE_FLOAT, "[-3.4e38, 3.4e38]", "1", "the embedding's factor, sqrt(d_model) "
     "in the paper"},
    {0},
};
static const CaseOption POSITIONAL_OPTIONS[] = {
    {"max_len", CASE_INT, "[1, 9.2e18]", "", "the position table's length"},
    {0},
};
static const CaseOption DROPOUT_OPTIONS[] = {
    {"dropout", CASE_FLOAT, "[0, 1]", NULL, "the dropout probability"},
    {"training", CASE_BOOL, NULL, "true", "training mode (false: dropout is the identity)"},
    {0},
};
static const CaseOption DROPOUT_RNG_OPTIONS[] = {
    {"dropout", CASE_FLOAT, "[0, 1]", NULL, "the dropout probability"},
    {"rng_seed", CASE_INT, "[0, 9.2e18]", NULL, "the generator's seed"},
    {"rng_stream", CASE_INT, "[0, 9.2e18]", "0", "the generator's stream"},
    {0},
};
static const CaseOption FFN_OPTIONS[] = {
    {"dropout", CASE_FLOAT, "[0, 1]", "0", "the dropout probability of the hidden layer"},
    {"training", CASE_BOOL, NULL, "true", "training mode"},
    {"bias", CASE_BOOL, NULL, "", "linear1.bias and linear2.bias present"},
    {0},
};
#define ENCODER_LAYER_OPTIONS                                                                \
    {"nhead", CASE_INT, "[1, 2147483647]", NULL, "the number of heads"},                     \
    {"eps", CASE_FLOAT, "[1e-38, 3.4e38]", "1e-05", "the LayerNorms' epsilon"},              \
    {"dropout", CASE_FLOAT, "[0, 1]", "0", "the dropout probability"},                       \
    {"norm_first", CASE_BOOL, NULL, "false", "pre-norm (true) or post-norm"},                 \
    {"training", CASE_BOOL, NULL, "true", "training mode"}
static const CaseOption ENCODER_LAYER[] = {ENCODER_LAYER_OPTIONS, {0}};
static const CaseOption ENCODER[] = {
    ENCODER_LAYER_OPTIONS,
    {"num_layers", CASE_INT, "[1, 4]", NULL, "the number of layers this program evaluates"},
    {"final_norm", CASE_BOOL, NULL, "", "a final LayerNorm (norm.weight present)"},
    {0},
};
_Static_assert(MAX_CASE_LAYERS == 4, "num_layers' range above");

static const CaseOp OPS[] = {
    {"embedding", EMBEDDING_OPTIONS, 0, "input embedding.weight", "output", eval_embedding},
    {"embedding_backward", EMBEDDING_OPTIONS, 0, "input embedding.weight grad_output",
     "output grad_embedding.weight", eval_embedding},
    {"positional_sinusoidal", POSITIONAL_OPTIONS, 0, "input", "output pe", eval_positional},
    {"positional_sinusoidal_backward", POSITIONAL_OPTIONS, 0, "input grad_output",
     "output pe grad_input", eval_positional},
    {"positional_learned", POSITIONAL_OPTIONS, 0, "input pos_embedding.weight", "output",
     eval_positional},
    {"positional_learned_backward", POSITIONAL_OPTIONS, 0,
     "input pos_embedding.weight grad_output", "output grad_input grad_pos_embedding.weight",
     eval_positional},
    {"dropout_mask", DROPOUT_OPTIONS, 0, "input [mask]", "output", eval_dropout_mask},
    {"dropout_mask_backward", DROPOUT_OPTIONS, 0, "input [mask] grad_output",
     "output grad_input", eval_dropout_mask},
    {"dropout_rng", DROPOUT_RNG_OPTIONS, 0, "input", "mask output", eval_dropout_rng},
    {"ffn", FFN_OPTIONS, 0, "input linear1.weight linear2.weight [linear1.bias] "
     "[linear2.bias] [dropout_mask]", "output", eval_ffn},
    {"ffn_backward", FFN_OPTIONS, 0, "input linear1.weight linear2.weight [linear1.bias] "
     "[linear2.bias] [dropout_mask] grad_output", "output grad_input grad_linear1.weight "
     "[grad_linear1.bias] grad_linear2.weight [grad_linear2.bias]", eval_ffn},
    {"encoder_layer", ENCODER_LAYER, 0, "src [src_key_padding_mask] [src_mask]", "output",
     eval_encoder},
    {"encoder_layer_backward", ENCODER_LAYER, 0,
     "src [src_key_padding_mask] [src_mask] grad_output", "output grad_src grad_<parameter>",
     eval_encoder},
    {"encoder", ENCODER, 0, "src [src_key_padding_mask] [src_mask]", "output", eval_encoder},
    {"encoder_backward", ENCODER, 0, "src [src_key_padding_mask] [src_mask] grad_output",
     "output grad_src grad_<parameter>", eval_encoder},
    {0},
};

int encoder_case_eval(const TensorFile *in, TensorFile *out, Error *err)
{
    return case_dispatch(OPS, "05", in, out, err);
}
