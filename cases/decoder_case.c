/*
 * decoder_case.c - see decoder_case.h for the ops, their tensors and options.
 *
 * The evaluator reads and checks every input first, then allocates the
 * results, then calls decoder_layer.c. The outputs are handed to `out` only
 * when all of them are computed, so a failure leaves it untouched.
 */
#include "decoder_case.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "casefile.h"
#include "decoder_layer.h"
#include "layernorm.h"

#define MAX_LAYERS 64
#define NAME_LEN 80
/* Parameters of one layer: 4 per attention, 4 of the FFN, 6 of the norms. */
#define LAYER_PARAMS 18

/* The suffixes of a layer's parameters, in the order of ParamSlots below. */
static const char *const SUFFIX[LAYER_PARAMS] = {
    "self_attn.in_proj_weight",      "self_attn.in_proj_bias",
    "self_attn.out_proj.weight",     "self_attn.out_proj.bias",
    "multihead_attn.in_proj_weight", "multihead_attn.in_proj_bias",
    "multihead_attn.out_proj.weight", "multihead_attn.out_proj.bias",
    "linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias",
    "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias", "norm3.weight", "norm3.bias"};

/* Their shapes in D and F: rows, cols (cols 0: a vector). */
static void param_shape(int i, int64_t D, int64_t F, int64_t shape[2], int *ndim,
                        const char **letters)
{
    static const char *const L[] = {"(3D, D)", "(3D,)", "(D, D)", "(D,)"};
    if (i < 8) {
        int j = i % 4;
        int64_t s[4][2] = {{3 * D, D}, {3 * D, 0}, {D, D}, {D, 0}};
        shape[0] = s[j][0], shape[1] = s[j][1];
        *ndim = s[j][1] ? 2 : 1;
        *letters = L[j];
        return;
    }
    switch (i) {
    case 8: shape[0] = F, shape[1] = D, *ndim = 2, *letters = "(F, D)"; return;
    case 9: shape[0] = F, *ndim = 1, *letters = "(F,)"; return;
    case 10: shape[0] = D, shape[1] = F, *ndim = 2, *letters = "(D, F)"; return;
    default: shape[0] = D, *ndim = 1, *letters = "(D,)"; return;
    }
}

/* Pointers into a DecoderLayerParams (parameters or gradients), in SUFFIX
 * order. */
static void param_slots(DecoderLayerParams *p, float **slot[LAYER_PARAMS])
{
    float **s[LAYER_PARAMS] = {
        &p->self_attn.in_proj_weight, &p->self_attn.in_proj_bias,
        &p->self_attn.out_proj_weight, &p->self_attn.out_proj_bias,
        &p->multihead_attn.in_proj_weight, &p->multihead_attn.in_proj_bias,
        &p->multihead_attn.out_proj_weight, &p->multihead_attn.out_proj_bias,
        &p->linear1_weight, &p->linear1_bias, &p->linear2_weight, &p->linear2_bias,
        &p->norm_weight[0], &p->norm_bias[0], &p->norm_weight[1], &p->norm_bias[1],
        &p->norm_weight[2], &p->norm_bias[2]};
    memcpy(slot, s, sizeof s);
}

/* An optional mask of shape (a, b): BOOL with bytes 0/1, or F32 when
 * allow_float. */
static int get_mask(const TensorFile *in, const char *name, int64_t a, int64_t b,
                    const char *letters, int allow_float, const Tensor **t, Error *err)
{
    *t = tensorfile_find(in, name);
    if (!*t) return 0;
    const Tensor *m = *t;
    if (m->dtype != DTYPE_BOOL && !(allow_float && m->dtype == DTYPE_F32))
        return error_set(err, "%s: tensor '%s' has dtype %s, expected BOOL (true = masked)%s",
                         case_name(in), name, dtype_name(m->dtype),
                         allow_float ? " or F32 (added to the scores)" : "");
    if (m->ndim != 2 || m->shape[0] != a || m->shape[1] != b) {
        char got[128];
        return error_set(err, "%s: tensor '%s' has shape %s, expected %s = (%lld, %lld)",
                         case_name(in), name, tensor_shape_str(m, got, sizeof got), letters,
                         (long long)a, (long long)b);
    }
    if (m->dtype == DTYPE_BOOL) {
        const uint8_t *bytes = m->data;
        for (int64_t i = 0; i < a * b; i++)
            if (bytes[i] > 1)
                return error_set(err, "%s: tensor '%s' holds the byte %d at flat index %lld; "
                                 "a BOOL mask holds only 0 and 1", case_name(in), name, bytes[i],
                                 (long long)i);
    }
    return 0;
}

typedef struct {
    int backward, stack, L, N, T, S, D, H, F;
    int norm_first, tgt_is_causal, sa_causal, final_norm;
    float eps;
    const Tensor *tgt, *memory, *dout;
    const Tensor *tgt_mask, *tgt_kpm, *mem_kpm;
    DecoderLayerParams params[MAX_LAYERS];
    float *norm_weight, *norm_bias;
} DecoderCase;

static void param_name(char *buf, const DecoderCase *c, int l, int i)
{
    if (c->stack)
        snprintf(buf, NAME_LEN, "layers.%d.%s", l, SUFFIX[i]);
    else
        snprintf(buf, NAME_LEN, "%s", SUFFIX[i]);
}

static int read_case(const TensorFile *in, const CaseArgs *args, DecoderCase *c, Error *err)
{
    memset(c, 0, sizeof *c);
    c->stack = strncmp(tensorfile_meta(in, "op"), "decoder_layer", 13) != 0;
    c->backward = case_is_backward(in);

    /* Options. */
    c->norm_first = case_bool(args, "norm_first");
    c->tgt_is_causal = case_bool(args, "tgt_is_causal");
    c->eps = (float)case_float(args, "eps");
    if (case_float(args, "dropout") != 0.0)
        return error_set(err, "%s: metadata 'dropout' is '%s'; a case file holds no dropout "
                         "masks, so only 0 is supported", case_name(in),
                         tensorfile_meta(in, "dropout"));
    if (case_bool(args, "memory_is_causal"))
        return error_set(err, "%s: metadata 'memory_is_causal' is true; not supported by this "
                         "chapter", case_name(in));
    if (tensorfile_find(in, "memory_mask"))
        return error_set(err, "%s: tensor 'memory_mask' is present; not supported by this "
                         "chapter (use memory_key_padding_mask)", case_name(in));

    /* Inputs. */
    const Tensor *tgt, *mem;
    if (tensorfile_get(in, "tgt", DTYPE_F32, 3, &tgt, err) != 0 ||
        tensorfile_get(in, "memory", DTYPE_F32, 3, &mem, err) != 0)
        return -1;
    for (int d = 0; d < 3; d++)
        if (tgt->shape[d] < 1 || tgt->shape[d] > INT_MAX || mem->shape[d] < 1 ||
            mem->shape[d] > INT_MAX) {
            char a[128], b[128];
            return error_set(err, "%s: tgt %s and memory %s must have every dimension at "
                             "least 1", case_name(in), tensor_shape_str(tgt, a, sizeof a),
                             tensor_shape_str(mem, b, sizeof b));
        }
    if (mem->shape[0] != tgt->shape[0] || mem->shape[2] != tgt->shape[2]) {
        char a[128], b[128];
        return error_set(err, "%s: memory %s must have the batch size N and d_model D of tgt "
                         "%s", case_name(in), tensor_shape_str(mem, a, sizeof a),
                         tensor_shape_str(tgt, b, sizeof b));
    }
    c->tgt = tgt, c->memory = mem;
    c->N = (int)tgt->shape[0], c->T = (int)tgt->shape[1], c->D = (int)tgt->shape[2];
    c->S = (int)mem->shape[1];

    long long H = case_int(args, "nhead");
    if (c->D % H != 0)
        return error_set(err, "%s: d_model %d (the last dimension of 'tgt') is not divisible "
                         "by nhead %lld", case_name(in), c->D, H);
    c->H = (int)H;

    c->L = c->stack ? (int)case_int(args, "num_layers") : 1;

    /* F from the first layer's linear1.weight. */
    char name[NAME_LEN];
    param_name(name, c, 0, 8);
    const Tensor *w1;
    if (tensorfile_get(in, name, DTYPE_F32, 2, &w1, err) != 0) return -1;
    if (w1->shape[0] < 1 || w1->shape[0] > INT_MAX)
        return error_set(err, "%s: tensor '%s' has no rows (dim_feedforward)", case_name(in), name);
    c->F = (int)w1->shape[0];

    /* Sizes must fit the int arithmetic of the layer functions. */
    int64_t N = c->N, T = c->T, S = c->S, D = c->D, F = c->F;
    int64_t biggest = N * H * T * (T > S ? T : S);
    if (N * T * F > biggest) biggest = N * T * F;
    if (N * (T > S ? T : S) * 3 * D > biggest) biggest = N * (T > S ? T : S) * 3 * D;
    if (biggest > INT_MAX)
        return error_set(err, "%s: the case needs buffers of %lld floats, more than this "
                         "implementation allows (%d)", case_name(in), (long long)biggest, INT_MAX);

    /* Parameters: every one required (bias=False is not supported here). */
    for (int l = 0; l < c->L; l++) {
        float **slot[LAYER_PARAMS];
        param_slots(&c->params[l], slot);
        for (int i = 0; i < LAYER_PARAMS; i++) {
            int64_t shape[2];
            int ndim;
            const char *letters;
            const Tensor *t;
            param_shape(i, D, F, shape, &ndim, &letters);
            param_name(name, c, l, i);
            if (case_get_shaped(in, name, shape, ndim, letters, &t, err) != 0) return -1;
            *slot[i] = t->data;
        }
    }
    if (c->stack) {
        int has_norm = tensorfile_find(in, "norm.weight") != NULL;
        c->final_norm = case_given(args, "final_norm") ? case_bool(args, "final_norm") : has_norm;
        if (c->final_norm) {
            const Tensor *t;
            if (case_get_shaped(in, "norm.weight", (int64_t[]){D}, 1, "(D,)", &t, err) != 0)
                return -1;
            c->norm_weight = t->data;
            if (case_get_shaped(in, "norm.bias", (int64_t[]){D}, 1, "(D,)", &t, err) != 0)
                return -1;
            c->norm_bias = t->data;
        } else if (has_norm || tensorfile_find(in, "norm.bias")) {
            return error_set(err, "%s: metadata 'final_norm' is false but the case holds "
                             "norm.weight or norm.bias", case_name(in));
        }
    }

    /* Masks and PyTorch's is_causal rule. */
    if (get_mask(in, "tgt_mask", T, T, "(T, T)", 1, &c->tgt_mask, err) != 0 ||
        get_mask(in, "tgt_key_padding_mask", N, T, "(N, T)", 0, &c->tgt_kpm, err) != 0 ||
        get_mask(in, "memory_key_padding_mask", N, S, "(N, S)", 0, &c->mem_kpm, err) != 0)
        return -1;
    if (c->tgt_is_causal && !c->tgt_mask)
        return error_set(err, "%s: metadata 'tgt_is_causal' is true but there is no tgt_mask; "
                         "PyTorch needs the mask with the hint ('Need attn_mask if specifying "
                         "the is_causal hint')", case_name(in));
    c->sa_causal = c->tgt_is_causal && !c->tgt_kpm;

    if (c->backward) {
        const Tensor *t;
        if (case_get_shaped(in, "grad_output", (int64_t[]){N, T, D}, 3,
                            "(N, T, D), the output's shape", &t, err) != 0)
            return -1;
        c->dout = t;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */

#define MAX_OUTPUTS (3 + 2 + LAYER_PARAMS * MAX_LAYERS)

typedef struct {
    int n;
    char (*names)[NAME_LEN + 8];
    Tensor *tensors;
} Outputs;

static float *output_new(Outputs *o, const char *name, int ndim, const int64_t *shape,
                         Error *err)
{
    Tensor *t = &o->tensors[o->n];
    if (case_tensor_alloc(t, DTYPE_F32, ndim, shape, err) != 0) return NULL;
    snprintf(o->names[o->n], sizeof o->names[0], "%s", name);
    o->n++;
    return t->data;
}

static void outputs_free(Outputs *o)
{
    for (int i = 0; o->tensors && i < o->n; i++) case_tensor_free(&o->tensors[i]);
    free(o->names);
    free(o->tensors);
    memset(o, 0, sizeof *o);
}

static int outputs_move(Outputs *o, TensorFile *out, Error *err)
{
    for (int i = 0; i < o->n; i++)
        if (tensorfile_add(out, o->names[i], &o->tensors[i], err) != 0) {
            outputs_free(o);
            return -1;
        }
    outputs_free(o);
    return 0;
}

/* Fills `bias` (N, H, L, S) from the masks; NULL when there is nothing to add. */
static float *make_bias(const Tensor *kpm, const Tensor *attn, int N, int H, int L, int S,
                        Error *err, const TensorFile *in)
{
    if (!kpm && !attn) return NULL;
    float *bias = calloc((size_t)N * H * L * S, sizeof *bias);
    if (!bias) {
        error_set(err, "%s: out of memory for an attention mask", case_name(in));
        return NULL;
    }
    if (mha_mask_bias(bias, kpm ? kpm->data : NULL, 1, attn ? attn->data : NULL,
                      attn && attn->dtype == DTYPE_BOOL, 0, N, H, L, S) != 0) {
        free(bias);
        error_set(err, "%s: mha_mask_bias failed", case_name(in));
        return NULL;
    }
    return bias;
}

static int eval_decoder(const TensorFile *in, const CaseArgs *args, TensorFile *out,
                        Error *err)
{
    DecoderCase *c = calloc(1, sizeof *c);
    if (!c) return error_set(err, "%s: out of memory", case_name(in));
    if (read_case(in, args, c, err) != 0) {
        free(c);
        return -1;
    }
    int N = c->N, T = c->T, S = c->S, D = c->D, H = c->H, F = c->F, L = c->L;
    Outputs o = {0};
    DecoderCache stack = {0};
    DecoderLayerParams *grads = NULL;
    float *sa_bias = NULL, *ca_bias = NULL;
    int rc = -1;

    o.names = calloc(MAX_OUTPUTS, sizeof *o.names);
    o.tensors = calloc(MAX_OUTPUTS, sizeof *o.tensors);
    grads = calloc((size_t)L, sizeof *grads);
    if (!o.names || !o.tensors || !grads) {
        error_set(err, "%s: out of memory", case_name(in));
        goto done;
    }
    float *y = output_new(&o, "output", 3, (int64_t[]){N, T, D}, err);
    if (!y) goto done;
    Error alloc_err;
    LayerDims dims = {.N = N, .S = S, .T = T, .D = D, .H = H, .F = F,
                      .norm_first = c->norm_first, .eps = c->eps, .dropout = 0.0f};
    if (decoder_cache_alloc(&stack, L, &dims, c->backward, &alloc_err) != 0) {
        error_set(err, "%s: %s", case_name(in), alloc_err.msg);
        goto done;
    }
    /* The self-attention bias: tgt_mask unless the causal pattern replaces it. */
    if ((c->tgt_kpm || (c->tgt_mask && !c->sa_causal)) &&
        !(sa_bias = make_bias(c->tgt_kpm, c->sa_causal ? NULL : c->tgt_mask, N, H, T, T, err,
                              in)))
        goto done;
    if (c->mem_kpm && !(ca_bias = make_bias(c->mem_kpm, NULL, N, H, T, S, err, in))) goto done;

    DecoderMasks masks = {sa_bias, c->sa_causal, ca_bias};
    DecoderParams params = {L, c->params, c->norm_weight, c->norm_bias};
    int fwd;
    if (c->stack)
        fwd = decoder_forward(y, &stack, c->tgt->data, c->memory->data, &params, &masks, NULL);
    else
        fwd = decoder_layer_forward(y, &stack.layers[0], c->tgt->data, c->memory->data,
                                    &c->params[0], &masks, NULL);
    if (fwd != 0) {
        error_set(err, "%s: %s failed", case_name(in),
                  c->stack ? "decoder_forward" : "decoder_layer_forward");
        goto done;
    }
    if (c->backward) {
        float *dtgt = output_new(&o, "grad_tgt", 3, (int64_t[]){N, T, D}, err);
        float *dmem = dtgt ? output_new(&o, "grad_memory", 3, (int64_t[]){N, S, D}, err) : NULL;
        if (!dmem) goto done;
        char name[NAME_LEN], gname[NAME_LEN + 8];
        for (int l = 0; l < L; l++) {
            float **slot[LAYER_PARAMS];
            param_slots(&grads[l], slot);
            for (int i = 0; i < LAYER_PARAMS; i++) {
                param_name(name, c, l, i);
                const Tensor *p = tensorfile_find(in, name);
                snprintf(gname, sizeof gname, "grad_%s", name);
                if (!(*slot[i] = output_new(&o, gname, p->ndim, p->shape, err))) goto done;
            }
        }
        float *dnw = NULL, *dnb = NULL;
        if (c->final_norm &&
            (!(dnw = output_new(&o, "grad_norm.weight", 1, (int64_t[]){D}, err)) ||
             !(dnb = output_new(&o, "grad_norm.bias", 1, (int64_t[]){D}, err))))
            goto done;
        DecoderParams dparams = {L, grads, dnw, dnb};
        int bwd;
        if (c->stack)
            bwd = decoder_backward(dtgt, dmem, &dparams, c->dout->data, c->tgt->data,
                                   c->memory->data, &params, &stack);
        else
            bwd = decoder_layer_backward(dtgt, dmem, &grads[0], c->dout->data, c->tgt->data,
                                         c->memory->data, &c->params[0], &stack.layers[0]);
        if (bwd != 0) {
            error_set(err, "%s: %s failed", case_name(in),
                      c->stack ? "decoder_backward" : "decoder_layer_backward");
            goto done;
        }
    }
    rc = outputs_move(&o, out, err);
done:
    if (rc != 0) outputs_free(&o);
    decoder_cache_free(&stack);
    free(grads);
    free(sa_bias);
    free(ca_bias);
    free(c);
    return rc;
}

/* The chapter's ops and their options (nn.TransformerDecoderLayer's and
 * nn.TransformerDecoder's arguments, layer_norm_eps spelt eps). */
#define DECODER_LAYER_OPTIONS                                                                \
    {"nhead", CASE_INT, "[1, 2147483647]", NULL, "the number of heads"},                     \
    {"eps", CASE_FLOAT, "[1e-38, 3.4e38]", "1e-05", "the LayerNorms' epsilon"},              \
    {"dropout", CASE_FLOAT, "[0, 1)", "0", "the dropout probability"},                       \
    {"norm_first", CASE_BOOL, NULL, "false", "pre-norm (true) or post-norm"},                 \
    {"tgt_is_causal", CASE_BOOL, NULL, "false", "the causal self-attention mask"},            \
    {"memory_is_causal", CASE_BOOL, NULL, "false", "a causal cross-attention mask"}
static const CaseOption DECODER_LAYER[] = {DECODER_LAYER_OPTIONS, {0}};
static const CaseOption DECODER[] = {
    DECODER_LAYER_OPTIONS,
    {"num_layers", CASE_INT, "[1, 64]", NULL, "the number of layers this program evaluates"},
    {"final_norm", CASE_BOOL, NULL, "", "a final LayerNorm (norm.weight present)"},
    {0},
};
_Static_assert(MAX_LAYERS == 64, "num_layers' range above");

#define DECODER_INPUTS "tgt memory [tgt_mask] [tgt_key_padding_mask] [memory_key_padding_mask]"
static const CaseOp OPS[] = {
    {"decoder_layer", DECODER_LAYER, 0, DECODER_INPUTS, "output", eval_decoder},
    {"decoder_layer_backward", DECODER_LAYER, 0, DECODER_INPUTS " grad_output",
     "output grad_tgt grad_memory grad_<parameter>", eval_decoder},
    {"decoder", DECODER, 0, DECODER_INPUTS, "output", eval_decoder},
    {"decoder_backward", DECODER, 0, DECODER_INPUTS " grad_output",
     "output grad_tgt grad_memory grad_<parameter>", eval_decoder},
    {0},
};

int decoder_case_eval(const TensorFile *in, TensorFile *out, Error *err)
{
    return case_dispatch(OPS, "06", in, out, err);
}
