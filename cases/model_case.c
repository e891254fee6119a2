/*
 * model_case.c - see model_case.h for the ops, their tensors and options.
 *
 * Each evaluator loads the model and checks every input first, then adds
 * its outputs and runs the model. Nothing here is an exercise: the model
 * and the decoders are.
 */
#include "model_case.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "casefile.h"
#include "decode.h"
#include "model.h"
#include "model_file.h"

/* ------------------------------------------------------------------------ */
/* Reading and checking inputs                                               */
/* ------------------------------------------------------------------------ */

/* The id tensor `name`, "src" or "tgt", (N, len): I64, rank 2, every size
 * at least 1, len at most max_len, N equal to *N when *N > 0 (else it sets
 * *N), each id in [0, vocab) of its side's vocabulary. */
static int get_ids(const TensorFile *in, const char *name, const Model *m, int *N, int *len,
                   const Tensor **t, Error *err)
{
    int source = strcmp(name, "src") == 0;
    int vocab = source ? m->cfg.src_vocab : m->cfg.tgt_vocab;
    const char *vocab_name = source ? "the source vocabulary" : "the target vocabulary";
    if (tensorfile_get(in, name, DTYPE_I64, 2, t, err) != 0) return -1;
    int64_t n = (*t)->shape[0], l = (*t)->shape[1];
    if (n < 1 || l < 1)
        return error_set(err, "%s: tensor '%s' has shape (%lld, %lld); a batch and a length "
                         "of at least 1 are needed", case_name(in), name, (long long)n,
                         (long long)l);
    if (*N > 0 && n != *N)
        return error_set(err, "%s: tensor '%s' holds %lld sequences, 'src' %d; they must "
                         "match", case_name(in), name, (long long)n, *N);
    if (n > INT_MAX / 2)
        return error_set(err, "%s: tensor '%s' holds %lld sequences, more than this program "
                         "handles", case_name(in), name, (long long)n);
    if (l > m->cfg.max_len)
        return error_set(err, "%s: tensor '%s' has sequences of %lld positions, longer than "
                         "model.max_len %d", case_name(in), name, (long long)l, m->cfg.max_len);
    char where[600];
    snprintf(where, sizeof where, "%s: tensor '%s' (%s)", case_name(in), name, vocab_name);
    if (model_check_ids((*t)->data, n * l, vocab, where, err) != 0) return -1;
    *N = (int)n, *len = (int)l;
    return 0;
}

/* A set model's input: features F32 (N, S, input_dim), N and S at least 1,
 * S at most max_len; a set case holds no ids. */
static int get_features(const TensorFile *in, const Model *m, int *N, int *S,
                        const Tensor **features, Error *err)
{
    if (tensorfile_find(in, "src") || tensorfile_find(in, "tgt"))
        return error_set(err, "%s: the case holds ids ('src' or 'tgt'), but a set model reads "
                         "only 'features'", case_name(in));
    if (tensorfile_get(in, "features", DTYPE_F32, 3, features, err) != 0) return -1;
    const int64_t *shape = (*features)->shape;
    if (shape[0] < 1 || shape[1] < 1 || shape[0] > INT_MAX / 2 || shape[1] > m->cfg.max_len ||
        shape[2] != m->cfg.input_dim)
        return error_set(err, "%s: tensor 'features' has shape (%lld, %lld, %lld); a set model "
                         "of input_dim %d and max_len %d needs (N >= 1, 1 <= S <= %d, %d)",
                         case_name(in), (long long)shape[0], (long long)shape[1],
                         (long long)shape[2], m->cfg.input_dim, m->cfg.max_len,
                         m->cfg.max_len, m->cfg.input_dim);
    *N = (int)shape[0], *S = (int)shape[1];
    return 0;
}

/* src (N, S), and tgt (N, T) exactly when the model is seq2seq; for a set
 * model, features (N, S, input_dim) in *src instead. */
static int get_inputs(const TensorFile *in, const Model *m, int *N, int *S, int *T,
                      const Tensor **src, const Tensor **tgt, Error *err)
{
    *N = 0, *T = 0, *tgt = NULL;
    if (m->cfg.kind == MODEL_SET) return get_features(in, m, N, S, src, err);
    if (get_ids(in, "src", m, N, S, src, err) != 0) return -1;
    if (m->cfg.kind == MODEL_SEQ2SEQ) return get_ids(in, "tgt", m, N, T, tgt, err);
    if (tensorfile_find(in, "tgt"))
        return error_set(err, "%s: the case holds 'tgt', but a %s model has no target input",
                         case_name(in), model_kind_name(m->cfg.kind));
    return 0;
}

/* The shape of the logits for N, S, T: (N, T, Vt), (N, S, Vt), (N, Vt) or,
 * for a set's scores, (N, S). Returns the rank. */
static int logits_shape(const Model *m, int N, int S, int T, int64_t shape[3])
{
    int V = m->cfg.tgt_vocab;
    switch (m->cfg.kind) {
    case MODEL_SEQ2SEQ: shape[0] = N, shape[1] = T, shape[2] = V; return 3;
    case MODEL_LABELLER:
    case MODEL_LM: shape[0] = N, shape[1] = S, shape[2] = V; return 3;
    case MODEL_SET: shape[0] = N, shape[1] = S; return 2;
    default: shape[0] = N, shape[1] = V; return 2;
    }
}

/* A required integer metadata key in [lo, hi]. */
/* The int option `key` in lo..hi, bounds the case's model sets. */
static int model_bounded(const TensorFile *in, const CaseArgs *args, const char *key,
                         long long lo, long long hi, const char *what, long long *v, Error *err)
{
    *v = case_int(args, key);
    if (*v < lo || *v > hi)
        return error_set(err, "%s: metadata %s is %lld; %s must lie in %lld..%lld", case_name(in),
                         key, *v, what, lo, hi);
    return 0;
}

/* Adds a zeroed I64 output; returns its data, or NULL. */
static int64_t *output_i64(TensorFile *out, const char *name, int ndim, const int64_t *shape,
                           Error *err)
{
    Tensor t;
    if (case_tensor_alloc(&t, DTYPE_I64, ndim, shape, err) != 0) return NULL;
    if (tensorfile_add(out, name, &t, err) != 0) {
        case_tensor_free(&t);
        return NULL;
    }
    return (int64_t *)tensorfile_find(out, name)->data;
}

/* ------------------------------------------------------------------------ */
/* The ops                                                                   */
/* ------------------------------------------------------------------------ */

static int eval_model(const TensorFile *in, TensorFile *out, Model *m, int backward,
                      Error *err)
{
    int N, S, T;
    const Tensor *src, *tgt, *dlogits = NULL;
    int64_t shape[3];
    if (get_inputs(in, m, &N, &S, &T, &src, &tgt, err) != 0) return -1;
    int ndim = logits_shape(m, N, S, T, shape);
    if (backward) {
        Tensor like = {.dtype = DTYPE_F32, .ndim = ndim};
        memcpy(like.shape, shape, sizeof shape);
        if (tensorfile_get(in, "grad_logits", DTYPE_F32, ndim, &dlogits, err) != 0) return -1;
        if (memcmp(dlogits->shape, shape, (size_t)ndim * sizeof shape[0]) != 0) {
            char got[128], want[128];
            return error_set(err, "%s: tensor 'grad_logits' has shape %s, expected %s like "
                             "the logits", case_name(in), tensor_shape_str(dlogits, got, sizeof got),
                             tensor_shape_str(&like, want, sizeof want));
        }
    }

    ModelWork w;
    Error alloc_err;
    if (model_work_alloc(&w, m, N, S, T, backward, &alloc_err) != 0)
        return error_set(err, "%s: %s", case_name(in), alloc_err.msg);
    int rc = 0;
    int set = m->cfg.kind == MODEL_SET;
    w.features = set ? src->data : NULL;
    float *logits = case_output_f32(out, "logits", ndim, shape, err);
    if (!logits) rc = -1;
    else if (model_forward(m, &w, set ? NULL : src->data, tgt ? tgt->data : NULL, NULL) != 0)
        rc = error_set(err, "%s: model_forward failed", case_name(in));
    if (rc == 0) memcpy(logits, w.logits, (size_t)w.rows * m->cfg.tgt_vocab * sizeof *logits);
    if (rc == 0 && backward) {
        model_zero_grad(m);
        if (model_backward(m, &w, dlogits->data) != 0)
            rc = error_set(err, "%s: model_backward failed", case_name(in));
        for (int i = 0; rc == 0 && i < m->n_tensors; i++) {
            const ModelTensor *t = &m->tensors[i];
            char name[80];
            snprintf(name, sizeof name, "grad_%s", t->name);
            float *g = case_output_f32(out, name, t->ndim, t->shape, err);
            if (!g) rc = -1;
            else memcpy(g, m->grads + t->offset, t->numel * sizeof *g);
        }
    }
    model_work_free(&w);
    return rc;
}

static int eval_decode(const TensorFile *in, const CaseArgs *args, TensorFile *out, Model *m,
                       int beam, Error *err)
{
    if (m->cfg.kind != MODEL_SEQ2SEQ)
        return error_set(err, "%s: op '%s' decodes with a seq2seq model; model.kind is %s",
                         case_name(in), beam ? "beam" : "greedy", model_kind_name(m->cfg.kind));
    int N = 0, S;
    const Tensor *src;
    if (get_ids(in, "src", m, &N, &S, &src, err)) return -1;
    long long sos, eos, max_new, width = beam ? case_int(args, "beam_width") : 1;
    double penalty = beam ? case_float(args, "length_penalty") : 0.0;
    int V = m->cfg.tgt_vocab;
    if (model_bounded(in, args, "sos_id", 0, V - 1, "the <sos> id", &sos, err) != 0 ||
        model_bounded(in, args, "eos_id", 0, V - 1, "the <eos> id", &eos, err) != 0 ||
        model_bounded(in, args, "max_new", 1, m->cfg.max_len,
                      "the number of tokens to write (at most model.max_len)", &max_new,
                      err) != 0)
        return -1;
    if (sos == m->cfg.pad_id)
        return error_set(err, "%s: metadata sos_id %lld is model.pad_id: the first position "
                         "would attend to nothing", case_name(in), sos);
    DecodeOptions d = {.sos_id = sos, .eos_id = eos, .max_new = (int)max_new,
                       .beam_width = (int)width, .length_penalty = (float)penalty};

    int64_t *tokens = output_i64(out, "output", 2, (int64_t[]){N, max_new}, err);
    float *score = tokens ? case_output_f32(out, "score", 1, (int64_t[]){N}, err) : NULL;
    if (!score) return -1;
    Error e = {{0}};   /* a stub fails without a message */
    int rc = beam ? decode_beam(m, src->data, N, S, &d, tokens, score, &e)
                  : decode_greedy(m, src->data, N, S, &d, tokens, score, &e);
    if (rc != 0)
        return error_set(err, "%s: %s", case_name(in),
                         e.msg[0] ? e.msg : beam ? "decode_beam failed" : "decode_greedy failed");
    return 0;
}

static int eval_topk(const TensorFile *in, const CaseArgs *args, TensorFile *out, Model *m,
                     Error *err)
{
    int N, S, T;
    const Tensor *src, *tgt;
    long long k;
    int64_t shape[3];
    if (m->cfg.kind == MODEL_SET)
        return error_set(err, "%s: op 'topk' lists classes; a set model scores the elements of "
                         "a set", case_name(in));
    if (get_inputs(in, m, &N, &S, &T, &src, &tgt, err) != 0 ||
        model_bounded(in, args, "k", 1, m->cfg.tgt_vocab, "the number of classes to list", &k,
                      err) != 0)
        return -1;
    int ndim = logits_shape(m, N, S, T, shape);
    ModelWork w;
    Error alloc_err;
    if (model_work_alloc(&w, m, N, S, T, 0, &alloc_err) != 0)
        return error_set(err, "%s: %s", case_name(in), alloc_err.msg);
    shape[ndim - 1] = k;
    int64_t *ids = output_i64(out, "topk_ids", ndim, shape, err);
    float *probs = ids ? case_output_f32(out, "topk_probs", ndim, shape, err) : NULL;
    int rc = probs ? 0 : -1;
    if (rc == 0 && model_forward(m, &w, src->data, tgt ? tgt->data : NULL, NULL) != 0)
        rc = error_set(err, "%s: model_forward failed", case_name(in));
    if (rc == 0 && model_topk(w.logits, w.rows, m->cfg.tgt_vocab, (int)k, ids, probs) != 0)
        rc = error_set(err, "%s: model_topk failed", case_name(in));
    model_work_free(&w);
    return rc;
}

/* ------------------------------------------------------------------------ */

/* Every op of the chapter: loads the model the case holds, then evaluates. */
static int eval_with_model(const TensorFile *in, const CaseArgs *args, TensorFile *out,
                           Error *err)
{
    const char *op = tensorfile_meta(in, "op");
    int which;
    const char *ops[] = {"model", "model_backward", "greedy", "beam", "topk", "checkpoint"};
    for (which = 0; which < 5 && strcmp(op, ops[which]) != 0; which++) {}

    /* A case holds inputs and outputs beside the parameters; only a
     * checkpoint case must hold nothing else. */
    Model m;
    Error load_err;
    if (model_load_file(&m, in, which == 5, &load_err) != 0) {
        /* model_load_file names the file itself, except in its own header */
        if (in->path && strstr(load_err.msg, in->path)) return error_set(err, "%s", load_err.msg);
        return error_set(err, "%s: %s", case_name(in), load_err.msg);
    }
    int rc;
    switch (which) {
    case 0: rc = eval_model(in, out, &m, 0, err); break;
    case 1: rc = eval_model(in, out, &m, 1, err); break;
    case 2: rc = eval_decode(in, args, out, &m, 0, err); break;
    case 3: rc = eval_decode(in, args, out, &m, 1, err); break;
    case 4: rc = eval_topk(in, args, out, &m, err); break;
    default: rc = model_to_file(&m, out, err); break;
    }
    model_free(&m);
    return rc;
}

/* The chapter's ops and their options; the model.* keys are the model's
 * configuration, which model_load_file checks. The ids and lengths are
 * bounded here and, by the model, in eval_decode and eval_topk. */
#define DECODE_OPTIONS                                                                       \
    {"sos_id", CASE_INT, "[0, 2147483647]", NULL, "the <sos> id"},                           \
    {"eos_id", CASE_INT, "[0, 2147483647]", NULL, "the <eos> id"},                           \
    {"max_new", CASE_INT, "[1, 2147483647]", NULL, "the number of tokens to write"}
static const CaseOption GREEDY[] = {DECODE_OPTIONS, {0}};
static const CaseOption BEAM[] = {
    DECODE_OPTIONS,
    {"beam_width", CASE_INT, "[1, 1024]", NULL, "the beam width"},
    {"length_penalty", CASE_FLOAT, "[-3.4e38, 3.4e38]", "0", "the length normalisation's alpha"},
    {0},
};
static const CaseOption TOPK[] = {
    {"k", CASE_INT, "[1, 2147483647]", NULL, "the number of classes to list"},
    {0},
};

static const CaseOp OPS[] = {
    {"model", NULL, 1, "[src] [tgt] [features]", "logits", eval_with_model},
    {"model_backward", NULL, 1, "[src] [tgt] [features] grad_logits", "logits grad_<parameter>",
     eval_with_model},
    {"greedy", GREEDY, 1, "src", "output score", eval_with_model},
    {"beam", BEAM, 1, "src", "output score", eval_with_model},
    {"topk", TOPK, 1, "[src] [tgt] [features]", "topk_ids topk_probs", eval_with_model},
    {"checkpoint", NULL, 1, "", "<parameter>", eval_with_model},
    {0},
};

int model_case_eval(const TensorFile *in, TensorFile *out, Error *err)
{
    return case_dispatch(OPS, "07", in, out, err);
}
