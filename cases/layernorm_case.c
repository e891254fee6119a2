/*
 * layernorm_case.c - see layernorm_case.h for the ops and their tensors.
 *
 * Each evaluator checks everything it reads before it computes: the dtype and
 * shape of every tensor, the options in the metadata, and that sizes fit the
 * int arguments of the layer functions. Outputs go straight into the output
 * file (case_output_f32); run_case_file writes it only if everything worked.
 */
#include "layernorm_case.h"

#include "casefile.h"
#include "layernorm.h"
#include "residual.h"

#include <limits.h>
#include <math.h>
#include <string.h>

/* The F32 tensor `name` with at least one dimension and at most INT_MAX
 * elements (the layer functions take int sizes). */
static int get_input(const TensorFile *in, const char *name, const Tensor **t, Error *err)
{
    if (tensorfile_get(in, name, DTYPE_F32, -1, t, err) != 0) return -1;
    if ((*t)->ndim < 1)
        return error_set(err, "%s: tensor '%s' is a scalar; expected at least one dimension",
                         case_name(in), name);
    if (tensor_numel(*t) > INT_MAX)
        return error_set(err, "%s: tensor '%s' has %lld elements, more than this program "
                         "handles (%d)", case_name(in), name, (long long)tensor_numel(*t), INT_MAX);
    return 0;
}

/* The F32 tensor `name` with exactly the shape of `like`. */
static int get_same_shape(const TensorFile *in, const char *name, const Tensor *like,
                          const char *like_name, const Tensor **t, Error *err)
{
    if (tensorfile_get(in, name, DTYPE_F32, -1, t, err) != 0) return -1;
    if ((*t)->ndim != like->ndim ||
        memcmp((*t)->shape, like->shape, sizeof like->shape[0] * like->ndim) != 0) {
        char got[128], want[128];
        return error_set(err, "%s: tensor '%s' has shape %s, expected %s like '%s'", case_name(in),
                         name, tensor_shape_str(*t, got, sizeof got),
                         tensor_shape_str(like, want, sizeof want), like_name);
    }
    return 0;
}

/* weight or bias: an F32 tensor of shape (D,). */
static int get_param(const TensorFile *in, const char *name, int64_t D, const Tensor **t,
                     Error *err)
{
    if (tensorfile_get(in, name, DTYPE_F32, -1, t, err) != 0) return -1;
    if ((*t)->ndim != 1 || (*t)->shape[0] != D) {
        char got[128];
        return error_set(err, "%s: tensor '%s' has shape %s, expected (%lld): one value per "
                         "entry of the normalised last dimension", case_name(in), name,
                         tensor_shape_str(*t, got, sizeof got), (long long)D);
    }
    return 0;
}

/* The options of ops layernorm and layernorm_backward: nn.LayerNorm's. */
static const CaseOption LAYERNORM_OPTIONS[] = {
    {"normalized_shape", CASE_INT, "[1, 9.2e18]", "", "the normalised last dimension"},
    {"eps", CASE_FLOAT, "[1e-38, 3.4e38]", "1e-05", "the epsilon inside the square root"},
    {"elementwise_affine", CASE_BOOL, NULL, "", "a weight (and bias) present"},
    {"bias", CASE_BOOL, NULL, "", "a bias present"},
    {0},
};

/* The options of a LayerNorm case: eps, and which parameters it has. */
static int layernorm_options(const TensorFile *in, const CaseArgs *a, int64_t D, float *eps,
                             int *affine, int *has_bias, Error *err)
{
    if (case_given(a, "normalized_shape") && case_int(a, "normalized_shape") != D)
        return error_set(err, "%s: metadata normalized_shape is %lld but tensor 'input' has "
                         "last dimension %lld", case_name(in), case_int(a, "normalized_shape"),
                         (long long)D);
    *eps = (float)case_float(a, "eps");

    int has_weight_tensor = tensorfile_find(in, "weight") != NULL;
    int has_bias_tensor = tensorfile_find(in, "bias") != NULL;
    *affine = case_given(a, "elementwise_affine") ? case_bool(a, "elementwise_affine")
                                                   : has_weight_tensor;
    *has_bias = case_given(a, "bias") ? case_bool(a, "bias") : *affine && has_bias_tensor;
    if (!*affine) *has_bias = 0;   /* nn.LayerNorm ignores bias=True without affine */
    if (!*affine && (has_weight_tensor || has_bias_tensor))
        return error_set(err, "%s: elementwise_affine is false but the case holds a '%s' "
                         "tensor", case_name(in), has_weight_tensor ? "weight" : "bias");
    if (*affine && !*has_bias && has_bias_tensor)
        return error_set(err, "%s: metadata bias is false but the case holds a 'bias' tensor",
                         case_name(in));
    return 0;
}

static int eval_layernorm(const TensorFile *in, const CaseArgs *args, TensorFile *out,
                          Error *err)
{
    const char *op = tensorfile_meta(in, "op");
    int backward = strcmp(op, "layernorm_backward") == 0;
    const Tensor *x, *weight = NULL, *bias = NULL, *dy = NULL;
    if (get_input(in, "input", &x, err) != 0) return -1;
    int64_t D = x->shape[x->ndim - 1];
    if (D < 1)
        return error_set(err, "%s: tensor 'input' has an empty last dimension; LayerNorm "
                         "needs at least one value to normalise", case_name(in));
    int64_t rows = tensor_numel(x) / D;   /* rows: every dimension but the last, flattened */

    float eps = LAYERNORM_DEFAULT_EPS;
    int affine = 0, has_bias = 0;
    if (layernorm_options(in, args, D, &eps, &affine, &has_bias, err) != 0) return -1;
    if (affine && get_param(in, "weight", D, &weight, err) != 0) return -1;
    if (has_bias && get_param(in, "bias", D, &bias, err) != 0) return -1;
    if (backward && get_same_shape(in, "grad_output", x, "input", &dy, err) != 0) return -1;

    /* mean and rstd, (rows,) each: what the forward saves for the backward. */
    Tensor stats[2] = {{0}};
    int rc = -1;
    if (case_tensor_alloc(&stats[0], DTYPE_F32, 1, &rows, err) != 0 ||
        case_tensor_alloc(&stats[1], DTYPE_F32, 1, &rows, err) != 0)
        goto done;
    float *mean = stats[0].data, *rstd = stats[1].data;

    float *y = case_output_f32(out, "output", x->ndim, x->shape, err);
    if (!y) goto done;
    const float *w = weight ? weight->data : NULL, *b = bias ? bias->data : NULL;
    if (layernorm_forward(y, mean, rstd, x->data, w, b, 1, (int)rows, (int)D, eps) != 0) {
        error_set(err, "%s: layernorm_forward failed", case_name(in));
        goto done;
    }
    if (backward) {
        float *dx = case_output_f32(out, "grad_input", x->ndim, x->shape, err);
        float *dw = affine ? case_output_f32(out, "grad_weight", 1, &D, err) : NULL;
        float *db = has_bias ? case_output_f32(out, "grad_bias", 1, &D, err) : NULL;
        if (!dx || (affine && !dw) || (has_bias && !db)) goto done;
        /* The buffers start at zero, so the accumulated gradient is the gradient. */
        if (layernorm_backward(dx, dw, db, dy->data, x->data, w, mean, rstd, 1, (int)rows,
                               (int)D) != 0) {
            error_set(err, "%s: layernorm_backward failed", case_name(in));
            goto done;
        }
    }
    rc = 0;
done:
    case_tensor_free(&stats[0]);
    case_tensor_free(&stats[1]);
    return rc;
}

static int eval_residual(const TensorFile *in, const CaseArgs *args, TensorFile *out,
                         Error *err)
{
    const char *op = tensorfile_meta(in, "op");
    if (strcmp(op, "residual") == 0) {
        const Tensor *x, *fx;
        if (get_input(in, "input", &x, err) != 0 ||
            get_same_shape(in, "sublayer_output", x, "input", &fx, err) != 0)
            return -1;
        float *y = case_output_f32(out, "output", x->ndim, x->shape, err);
        if (!y) return -1;
        if (residual_forward(y, x->data, fx->data, (int)tensor_numel(x)) != 0)
            return error_set(err, "%s: residual_forward failed", case_name(in));
        return 0;
    }
    const Tensor *dy;
    if (get_input(in, "grad_output", &dy, err) != 0) return -1;
    float *dx = case_output_f32(out, "grad_input", dy->ndim, dy->shape, err);
    float *dfx = case_output_f32(out, "grad_sublayer_output", dy->ndim, dy->shape, err);
    if (!dx || !dfx) return -1;
    if (residual_backward(dx, dfx, dy->data, (int)tensor_numel(dy)) != 0)
        return error_set(err, "%s: residual_backward failed", case_name(in));
    return 0;
}

/* The chapter's ops. */
static const CaseOp OPS[] = {
    {"layernorm", LAYERNORM_OPTIONS, 0, "input [weight] [bias]", "output", eval_layernorm},
    {"layernorm_backward", LAYERNORM_OPTIONS, 0, "input [weight] [bias] grad_output",
     "grad_input [grad_weight] [grad_bias]", eval_layernorm},
    {"residual", NULL, 0, "input sublayer_output", "output", eval_residual},
    {"residual_backward", NULL, 0, "grad_output", "grad_input grad_sublayer_output",
     eval_residual},
    {0},
};

int layernorm_case_eval(const TensorFile *in, TensorFile *out, Error *err)
{
    return case_dispatch(OPS, "04", in, out, err);
}
