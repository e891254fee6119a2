/*
 * run_cases.cu - every golden case of the ops cuda/ covers, run on the GPU.
 *
 *     build/cuda/run_cases [GOLDEN_DIR]       default: golden
 *     build/cuda/run_cases --probe            exit 0 if a CUDA device is usable
 *
 * For each case file golden/NN_name/NAME.safetensors whose op has a kernel here, reads
 * the inputs with chapter 00's safetensors reader, copies them to the
 * device, runs the kernels, copies the results back and compares every
 * tensor the case lists in its "outputs" metadata with the expected one,
 * within the case's own atol and rtol (|gpu - torch| <= atol + rtol |torch|,
 * torch.allclose's rule; NaN never passes). Then a few checks on sizes the
 * goldens do not reach (long rows, big matrices, the kernels of chapter 08
 * that have no goldens yet), against the C chapters or the CPU twins in
 * hostdev.h, with the tolerance each one states.
 *
 * Prints one line per op and kernel variant, as `make verify` does: cases,
 * max abs error, max rel error (max|gpu - torch| / max(max|torch|, atol)),
 * pass or FAIL; then the case options it skipped and why, and the ops in
 * golden/ that have no kernel yet. Exits 1 if anything failed.
 *
 * Outputs are filled with NaN before a kernel writes them (0 for the
 * gradients a backward accumulates into), so a value a kernel forgets to
 * write fails the comparison.
 */
#include <cuda_runtime.h>
#include <glob.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "dropout.h"
#include "embedding.h"
#include "layernorm.h"
#include "matmul.h"
#include "rng.h"
#include "safetensors.h"
#include "sdpa.h"
#include "sdpa_case.h"
#include "softmax.h"
#include "training_case.h"
#include "model_file.h"
}
#include "gpu.h"
#include "kernels.h"

/* ------------------------------------------------------------------------ */
/* The report: one row per op and variant                                   */
/* ------------------------------------------------------------------------ */

#define MAX_ROWS 64
#define MAX_NOTES 64
#define NOTE_LEN 640

typedef struct {
    char label[64];
    int cases, failed;
    double max_abs, max_rel;
} Row;

typedef struct {
    char op[64];
    int cases;
} Uncovered;

typedef struct {
    CudaBlas *blas;
    Row rows[MAX_ROWS];
    int n_rows;
    Uncovered uncovered[MAX_ROWS];
    int n_uncovered;
    char skipped[MAX_NOTES][NOTE_LEN];
    int n_skipped;
    char failures[MAX_NOTES][NOTE_LEN];
    int n_failures;
} Report;

static Row *report_row(Report *rep, const char *label)
{
    for (int i = 0; i < rep->n_rows; i++)
        if (strcmp(rep->rows[i].label, label) == 0) return &rep->rows[i];
    if (rep->n_rows == MAX_ROWS) {
        fprintf(stderr, "run_cases: more than %d report rows\n", MAX_ROWS);
        exit(1);
    }
    Row *r = &rep->rows[rep->n_rows++];
    memset(r, 0, sizeof *r);
    snprintf(r->label, sizeof r->label, "%s", label);
    return r;
}

/* Adds one line to a list of notes (failures, skipped cases). */
static void note(char notes[][NOTE_LEN], int *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void note(char notes[][NOTE_LEN], int *n, const char *fmt, ...)
{
    if (*n == MAX_NOTES) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(notes[(*n)++], NOTE_LEN, fmt, ap);
    va_end(ap);
}

static void record_failure(Report *rep, const char *label, const char *where, const char *what)
{
    Row *row = report_row(rep, label);
    row->cases++;
    row->failed++;
    note(rep->failures, &rep->n_failures, "%s: %s: %s", label, where, what);
}

/* ------------------------------------------------------------------------ */
/* Comparing                                                                 */
/* ------------------------------------------------------------------------ */

/* Compares got with want (n values) under atol/rtol. Returns 1 if close;
 * sets *max_abs and *max_rel; on failure writes the first bad index to why. */
static int compare(const float *got, const float *want, int64_t n, double atol, double rtol,
                   double *max_abs, double *max_rel, char *why, size_t why_size)
{
    double worst = 0.0, scale = atol;
    int ok = 1;
    for (int64_t i = 0; i < n; i++) {
        double a = got[i], e = want[i];
        if (isfinite(e) && fabs(e) > scale) scale = fabs(e);
        int close;
        if (isnan(a) || isnan(e))
            close = 0;
        else if (isinf(a) || isinf(e))
            close = a == e;
        else {
            double diff = fabs(a - e);
            if (diff > worst) worst = diff;
            close = diff <= atol + rtol * fabs(e);
        }
        if (!close) {
            if (ok)
                snprintf(why, why_size, "[%lld] is %.9g, expected %.9g (atol %g, rtol %g)",
                         (long long)i, a, e, atol, rtol);
            ok = 0;
            if (isnan(a) || isinf(a)) worst = INFINITY;
        }
    }
    *max_abs = worst;
    *max_rel = scale > 0 ? worst / scale : worst;
    return ok;
}

static void row_add(Row *row, int ok, double max_abs, double max_rel)
{
    row->cases++;
    if (!ok) row->failed++;
    if (max_abs > row->max_abs) row->max_abs = max_abs;
    if (max_rel > row->max_rel) row->max_rel = max_rel;
}

/* One array compared as one case of `label` (the checks beyond the goldens). */
static void check_array(Report *rep, const char *label, const char *what, const float *got,
                        const float *want, int64_t n, double atol, double rtol)
{
    double a, r;
    char why[256] = "";
    int ok = compare(got, want, n, atol, rtol, &a, &r, why, sizeof why);
    row_add(report_row(rep, label), ok, a, r);
    if (!ok) note(rep->failures, &rep->n_failures, "%s: %s %s", label, what, why);
}

/* ------------------------------------------------------------------------ */
/* Device buffers of one case, freed together                                */
/* ------------------------------------------------------------------------ */

#define MAX_BUFFERS 32

typedef struct {
    void *ptr[MAX_BUFFERS];
    int n;
    char error[NOTE_LEN]; /* the first failure, empty if none */
} Dev;

static int dev_failed(Dev *d, const char *what, cudaError_t e)
{
    if (!d->error[0]) snprintf(d->error, sizeof d->error, "%s: %s", what, cudaGetErrorString(e));
    return -1;
}

/* `bytes` of device memory filled with the byte `fill` (0: zeros, 0xff: NaN). */
static void *dev_alloc(Dev *d, size_t bytes, int fill)
{
    if (d->error[0]) return NULL;
    if (d->n == MAX_BUFFERS) {
        snprintf(d->error, sizeof d->error, "more than %d device buffers", MAX_BUFFERS);
        return NULL;
    }
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 4);
    if (e != cudaSuccess) {
        dev_failed(d, "cudaMalloc", e);
        return NULL;
    }
    d->ptr[d->n++] = p;
    e = cudaMemset(p, fill, bytes ? bytes : 4);
    if (e != cudaSuccess) {
        dev_failed(d, "cudaMemset", e);
        return NULL;
    }
    return p;
}

static float *dev_nan(Dev *d, int64_t n)
{
    return (float *)dev_alloc(d, n * sizeof(float), 0xff);
}
static float *dev_zeros(Dev *d, int64_t n)
{
    return (float *)dev_alloc(d, n * sizeof(float), 0);
}

static void *dev_upload(Dev *d, const void *host, size_t bytes)
{
    void *p = dev_alloc(d, bytes, 0);
    if (!p) return NULL;
    cudaError_t e = cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice);
    if (e != cudaSuccess) {
        dev_failed(d, "cudaMemcpy to the device", e);
        return NULL;
    }
    return p;
}

static float *dev_tensor(Dev *d, const Tensor *t)
{
    return t ? (float *)dev_upload(d, t->data, tensor_numel(t) * dtype_size(t->dtype)) : NULL;
}

static void dev_free(Dev *d)
{
    for (int i = 0; i < d->n; i++) cudaFree(d->ptr[i]);
    d->n = 0;
}

/* The results of one run of the kernels, copied back to the host. */
#define MAX_RESULTS (MODEL_MAX_TENSORS + 1)   /* model_backward: logits and every gradient */

typedef struct {
    const char *name[MAX_RESULTS];
    float *data[MAX_RESULTS];
    int64_t n[MAX_RESULTS];
    int count;
} Results;

static void results_free(Results *r)
{
    for (int i = 0; i < r->count; i++) free(r->data[i]);
    r->count = 0;
}

/* Copies n floats from the device into a result called `name`. A NULL
 * source (a buffer that failed to allocate) is skipped: d->error says why. */
static void download(Dev *d, Results *r, const char *name, const float *src, int64_t n)
{
    if (d->error[0] || !src || r->count == MAX_RESULTS) return;
    /* A kernel that failed while running reports it here, at the first sync. */
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) {
        dev_failed(d, "running the kernels", e);
        return;
    }
    float *h = (float *)malloc((n ? n : 1) * sizeof *h);
    if (!h) {
        snprintf(d->error, sizeof d->error, "out of host memory");
        return;
    }
    e = cudaMemcpy(h, src, n * sizeof *h, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) {
        free(h);
        dev_failed(d, "cudaMemcpy from the device", e);
        return;
    }
    r->name[r->count] = name;
    r->data[r->count] = h;
    r->n[r->count++] = n;
}

/* ------------------------------------------------------------------------ */
/* One golden case: run, then compare every output the case lists           */
/* ------------------------------------------------------------------------ */

/* Compares the results with the case's outputs and adds the case to `label`.
 * `launch_failed` is set when a kernel launcher returned -1. */
static void finish_case(Report *rep, const char *label, const TensorFile *in, Dev *d, Results *res,
                        int launch_failed)
{
    const char *path = in->path;
    if (launch_failed && !d->error[0])
        snprintf(d->error, sizeof d->error, "a kernel launch failed");
    if (d->error[0]) {
        record_failure(rep, label, path, d->error);
        return;
    }
    double atol, rtol;
    Error err;
    if (tensorfile_meta_double(in, "atol", NAN, &atol, &err) != 0 ||
        tensorfile_meta_double(in, "rtol", NAN, &rtol, &err) != 0 || isnan(atol) || isnan(rtol)) {
        record_failure(rep, label, path, "metadata atol/rtol missing or not a number");
        return;
    }
    const char *outputs = tensorfile_meta(in, "outputs");
    if (!outputs || !outputs[0]) {
        record_failure(rep, label, path, "metadata 'outputs' is missing");
        return;
    }
    char *list = strdup(outputs);   /* a model's gradients make a long list */
    if (!list) {
        record_failure(rep, label, path, "out of host memory");
        return;
    }
    double worst_abs = 0, worst_rel = 0;
    int ok = 1;
    char msg[NOTE_LEN] = "";
    for (char *name = strtok(list, ","); name; name = strtok(NULL, ",")) {
        const Tensor *want = NULL;
        int found = -1;
        for (int i = 0; i < res->count; i++)
            if (strcmp(res->name[i], name) == 0) found = i;
        if (tensorfile_get(in, name, DTYPE_F32, -1, &want, &err) != 0) {
            snprintf(msg, sizeof msg, "%s", err.msg);
            ok = 0;
            break;
        }
        if (found < 0 || res->n[found] != tensor_numel(want)) {
            snprintf(msg, sizeof msg, "output '%s' %s", name,
                     found < 0 ? "is not produced by this kernel" : "has the wrong size");
            ok = 0;
            break;
        }
        double a, r;
        char why[256] = "";
        if (!compare(res->data[found], (const float *)want->data, res->n[found], atol, rtol, &a, &r,
                     why, sizeof why)) {
            if (ok) snprintf(msg, sizeof msg, "%s%s", name, why);
            ok = 0;
        }
        if (a > worst_abs) worst_abs = a;
        if (r > worst_rel) worst_rel = r;
    }
    free(list);
    Row *row = report_row(rep, label);
    row_add(row, ok, worst_abs, worst_rel);
    if (!ok) note(rep->failures, &rep->n_failures, "%s: %s: %s", label, path, msg);
}

static void skip_case(Report *rep, const char *label, const TensorFile *in, const char *reason)
{
    note(rep->skipped, &rep->n_skipped, "%s: %s (%s)", label, in->path, reason);
}

/* The F32 (or other dtype) input `name`, or NULL with the reason in d->error. */
static const Tensor *input(Dev *d, const TensorFile *in, const char *name, DType dtype, int ndim)
{
    const Tensor *t = NULL;
    Error err;
    if (d->error[0]) return NULL;
    if (tensorfile_get(in, name, dtype, ndim, &t, &err) != 0) {
        snprintf(d->error, sizeof d->error, "%s", err.msg);
        return NULL;
    }
    return t;
}

/* An element count known to the case reader, as an int for the launchers. */
static int as_int(int64_t v)
{
    return (int)v;
}

/* ---- chapter 00: matmul, linear, softmax -------------------------------- */

static void eval_matmul(Report *rep, const TensorFile *in, const char *op)
{
    int tn = strcmp(op, "matmul_tn") == 0, nt = strcmp(op, "matmul_nt") == 0;
    for (int variant = 0; variant < 2; variant++) {
        char label[64];
        snprintf(label, sizeof label, "%s [%s]", op, variant == 0 ? "tiled" : "cuBLAS");
        Dev d = {};
        Results res = {};
        const Tensor *a = input(&d, in, "a", DTYPE_F32, 2), *b = input(&d, in, "b", DTYPE_F32, 2);
        int fail = 0;
        if (a && b) {
            /* nt: a (M, K), b (N, K); nn: a (M, K), b (K, N); tn: a (K, M), b (K, N) */
            int M = as_int(tn ? a->shape[1] : a->shape[0]),
                K = as_int(tn ? a->shape[0] : a->shape[1]);
            int N = as_int(nt ? b->shape[0] : b->shape[1]);
            if ((nt ? b->shape[1] : b->shape[0]) != K) {
                snprintf(d.error, sizeof d.error, "a and b do not agree on K");
            } else {
                float *da = dev_tensor(&d, a), *db = dev_tensor(&d, b),
                      *dc = dev_nan(&d, (int64_t)M * N);
                if (!d.error[0]) {
                    if (variant == 0)
                        fail = (nt   ? cuda_matmul_nt
                                : tn ? cuda_matmul_tn
                                     : cuda_matmul_nn)(dc, da, db, M, N, K, 0);
                    else
                        fail = (nt   ? cuda_matmul_nt_cublas
                                : tn ? cuda_matmul_tn_cublas
                                     : cuda_matmul_nn_cublas)(rep->blas, dc, da, db, M, N, K, 0);
                }
                download(&d, &res, "c", dc, (int64_t)M * N);
            }
        }
        finish_case(rep, label, in, &d, &res, fail != 0);
        results_free(&res);
        dev_free(&d);
    }
}

static void eval_linear(Report *rep, const TensorFile *in, const char *op)
{
    int backward = strcmp(op, "linear_backward") == 0;
    Dev d = {};
    Results res = {};
    int fail = 0;
    const Tensor *x = input(&d, in, "input", DTYPE_F32, 2),
                 *w = input(&d, in, "weight", DTYPE_F32, 2);
    const Tensor *b = tensorfile_find(in, "bias");
    const Tensor *dy = backward ? input(&d, in, "grad_output", DTYPE_F32, 2) : NULL;
    if (x && w && (!backward || dy)) {
        int M = as_int(x->shape[0]), K = as_int(x->shape[1]), N = as_int(w->shape[0]);
        if (w->shape[1] != K || (b && tensor_numel(b) != N)) {
            snprintf(d.error, sizeof d.error, "input, weight and bias shapes do not agree");
        } else {
            float *dx_in = dev_tensor(&d, x), *dw_in = dev_tensor(&d, w),
                  *db_in = dev_tensor(&d, b);
            float *out = dev_nan(&d, (int64_t)M * N);
            if (!d.error[0]) fail |= cuda_linear_forward(out, dx_in, dw_in, db_in, M, K, N);
            download(&d, &res, "output", out, (int64_t)M * N);
            if (backward) {
                float *g = dev_tensor(&d, dy);
                float *gx = dev_zeros(&d, (int64_t)M * K), *gw = dev_zeros(&d, (int64_t)N * K);
                float *gb = b ? dev_zeros(&d, N) : NULL;
                if (!d.error[0]) fail |= cuda_linear_backward(gx, gw, gb, g, dx_in, dw_in, M, K, N);
                download(&d, &res, "grad_input", gx, (int64_t)M * K);
                download(&d, &res, "grad_weight", gw, (int64_t)N * K);
                if (b) download(&d, &res, "grad_bias", gb, N);
            }
        }
    }
    finish_case(rep, op, in, &d, &res, fail != 0);
    results_free(&res);
    dev_free(&d);
}

static void eval_softmax(Report *rep, const TensorFile *in, const char *op)
{
    int backward = strcmp(op, "softmax_backward") == 0;
    Dev d = {};
    Results res = {};
    int fail = 0;
    const Tensor *x = input(&d, in, backward ? "output" : "input", DTYPE_F32, -1);
    const Tensor *dy = backward ? input(&d, in, "grad_output", DTYPE_F32, -1) : NULL;
    if (x && (!backward || dy)) {
        int64_t n = tensor_numel(x);
        int cols = x->ndim ? as_int(x->shape[x->ndim - 1]) : 1, rows = cols ? as_int(n / cols) : 0;
        float *dx = dev_tensor(&d, x), *out = dev_nan(&d, n);
        if (backward) {
            float *g = dev_tensor(&d, dy);
            if (!d.error[0]) fail |= cuda_softmax_backward(out, dx, g, rows, cols);
            download(&d, &res, "grad_input", out, n);
        } else {
            if (!d.error[0]) fail |= cuda_softmax_forward(out, dx, rows, cols);
            download(&d, &res, "output", out, n);
        }
    }
    finish_case(rep, op, in, &d, &res, fail != 0);
    results_free(&res);
    dev_free(&d);
}

/* ---- chapter 02: scaled dot-product attention --------------------------- */

static void eval_sdpa(Report *rep, const TensorFile *in, const char *op)
{
    SdpaCase c;
    Error err;
    int backward = strcmp(op, "sdpa_backward") == 0;
    if (sdpa_case_read(in, &c, &err) != 0) {
        record_failure(rep, backward ? "sdpa_backward [plain]" : "sdpa [plain]", in->path, err.msg);
        return;
    }
    int N = c.N, L = c.L, S = c.S, E = c.E, Ev = c.Ev;
    int64_t nLS = (int64_t)N * L * S;

    /* The additive bias (N, L, S), made on the CPU by chapter 02. */
    float *bias = NULL;
    if (c.mask) {
        int64_t att_shape[TENSOR_MAX_DIMS];
        memcpy(att_shape, c.batch_shape, sizeof att_shape[0] * (c.ndim - 2));
        att_shape[c.ndim - 2] = L;
        att_shape[c.ndim - 1] = S;
        bias = (float *)malloc(nLS * sizeof *bias);
        if (!bias || sdpa_mask_bias(bias, c.mask->data, c.mask->dtype == DTYPE_BOOL, c.mask->shape,
                                    c.mask->ndim, att_shape, c.ndim) != 0) {
            free(bias);
            record_failure(rep, "sdpa [plain]", in->path, "sdpa_mask_bias failed");
            return;
        }
    }

    for (int variant = 0; variant < 2; variant++) { /* 0 plain, 1 flash forward */
        char label[64];
        snprintf(label, sizeof label, "%s [%s]", op, variant == 0 ? "plain" : "flash fwd");
        if (variant == 1 && (E > CUDA_FLASH_MAX_D || Ev > CUDA_FLASH_MAX_D)) {
            skip_case(rep, label, in, "E or Ev above CUDA_FLASH_MAX_D");
            continue;
        }
        if (variant == 1 && c.drop) {
            skip_case(rep, label, in, "dropout: the flash forward has none");
            continue;
        }
        Dev d = {};
        Results res = {};
        int fail = 0;
        float *q = (float *)dev_upload(&d, c.q, (size_t)N * L * E * sizeof(float));
        float *k = (float *)dev_upload(&d, c.k, (size_t)N * S * E * sizeof(float));
        float *v = (float *)dev_upload(&d, c.v, (size_t)N * S * Ev * sizeof(float));
        float *dbias = bias ? (float *)dev_upload(&d, bias, nLS * sizeof(float)) : NULL;
        /* the case's dropout mask (N, L, S), bool bytes as the kernels take them */
        uint8_t *drop = c.drop ? (uint8_t *)dev_upload(&d, c.drop, nLS) : NULL;
        float *out = dev_nan(&d, (int64_t)N * L * Ev), *att = dev_nan(&d, nLS);
        if (variant == 0) {
            float *scores = dev_nan(&d, nLS);
            if (!d.error[0])
                fail |= cuda_sdpa_forward(out, scores, att, q, k, v, dbias, drop, c.dropout_p, N,
                                          L, S, E, Ev, c.scale, c.is_causal);
        } else {
            float *lse = dev_nan(&d, (int64_t)N * L);
            if (!d.error[0]) {
                fail |= cuda_sdpa_flash_forward(out, lse, q, k, v, dbias, N, L, S, E, Ev, c.scale,
                                                c.is_causal);
                /* the weights rebuilt from lse: the attn_weights output, and what
                 * the backward below starts from */
                fail |= cuda_sdpa_weights_from_lse(att, q, k, dbias, lse, N, L, S, E, c.scale,
                                                   c.is_causal);
            }
        }
        download(&d, &res, "output", out, (int64_t)N * L * Ev);
        download(&d, &res, "attn_weights", att, nLS);
        if (backward) {
            float *dout = (float *)dev_upload(&d, c.dout, (size_t)N * L * Ev * sizeof(float));
            float *dq = dev_zeros(&d, (int64_t)N * L * E), *dk = dev_zeros(&d, (int64_t)N * S * E);
            float *dv = dev_zeros(&d, (int64_t)N * S * Ev);
            float *datt = dev_nan(&d, nLS), *dscores = dev_nan(&d, nLS);
            if (!d.error[0])
                fail |= cuda_sdpa_backward(dq, dk, dv, datt, dscores, dout, q, k, v, att, drop,
                                           c.dropout_p, N, L, S, E, Ev, c.scale);
            download(&d, &res, "grad_query", dq, (int64_t)N * L * E);
            download(&d, &res, "grad_key", dk, (int64_t)N * S * E);
            download(&d, &res, "grad_value", dv, (int64_t)N * S * Ev);
        }
        finish_case(rep, label, in, &d, &res, fail != 0);
        results_free(&res);
        dev_free(&d);
    }
    free(bias);
}

/* ---- chapter 04: LayerNorm and the residual ----------------------------- */

static void eval_layernorm(Report *rep, const TensorFile *in, const char *op)
{
    int backward = strcmp(op, "layernorm_backward") == 0;
    Dev d = {};
    Results res = {};
    int fail = 0;
    Error err;
    const Tensor *x = input(&d, in, "input", DTYPE_F32, -1);
    const Tensor *w = tensorfile_find(in, "weight"), *b = tensorfile_find(in, "bias");
    const Tensor *dy = backward ? input(&d, in, "grad_output", DTYPE_F32, -1) : NULL;
    double eps = 1e-5;
    if (tensorfile_meta_double(in, "eps", 1e-5, &eps, &err) != 0)
        snprintf(d.error, sizeof d.error, "%s", err.msg);
    if (x && (!backward || dy) && !d.error[0]) {
        int64_t n = tensor_numel(x);
        int D = as_int(x->shape[x->ndim - 1]), rows = as_int(n / D);
        if ((w && tensor_numel(w) != D) || (b && tensor_numel(b) != D) ||
            (dy && tensor_numel(dy) != n)) {
            snprintf(d.error, sizeof d.error, "weight, bias or grad_output has the wrong size");
        } else {
            float *dx_in = dev_tensor(&d, x), *dw = dev_tensor(&d, w), *db = dev_tensor(&d, b);
            float *out = dev_nan(&d, n), *mean = dev_nan(&d, rows), *rstd = dev_nan(&d, rows);
            if (!d.error[0])
                fail |= cuda_layernorm_forward(out, mean, rstd, dx_in, dw, db, 1, rows, D,
                                               (float)eps);
            download(&d, &res, "output", out, n);
            if (backward) {
                float *g = dev_tensor(&d, dy), *gx = dev_zeros(&d, n);
                float *gw = w ? dev_zeros(&d, D) : NULL, *gb = b ? dev_zeros(&d, D) : NULL;
                if (!d.error[0])
                    fail |= cuda_layernorm_backward(gx, gw, gb, g, dx_in, dw, mean, rstd, 1,
                                                    rows, D);
                download(&d, &res, "grad_input", gx, n);
                if (w) download(&d, &res, "grad_weight", gw, D);
                if (b) download(&d, &res, "grad_bias", gb, D);
            }
        }
    }
    finish_case(rep, op, in, &d, &res, fail != 0);
    results_free(&res);
    dev_free(&d);
}

static void eval_residual(Report *rep, const TensorFile *in, const char *op)
{
    int backward = strcmp(op, "residual_backward") == 0;
    Dev d = {};
    Results res = {};
    int fail = 0;
    if (!backward) {
        const Tensor *x = input(&d, in, "input", DTYPE_F32, -1);
        const Tensor *fx = input(&d, in, "sublayer_output", DTYPE_F32, -1);
        if (x && fx && tensor_numel(x) == tensor_numel(fx)) {
            int n = as_int(tensor_numel(x));
            float *dx = dev_tensor(&d, x), *dfx = dev_tensor(&d, fx), *out = dev_nan(&d, n);
            if (!d.error[0]) fail |= cuda_residual_forward(out, dx, dfx, n);
            download(&d, &res, "output", out, n);
        }
    } else {
        const Tensor *dy = input(&d, in, "grad_output", DTYPE_F32, -1);
        if (dy) {
            int n = as_int(tensor_numel(dy));
            float *g = dev_tensor(&d, dy), *gx = dev_zeros(&d, n), *gfx = dev_zeros(&d, n);
            if (!d.error[0]) fail |= cuda_residual_backward(gx, gfx, g, n);
            download(&d, &res, "grad_input", gx, n);
            download(&d, &res, "grad_sublayer_output", gfx, n);
        }
    }
    finish_case(rep, op, in, &d, &res, fail != 0);
    results_free(&res);
    dev_free(&d);
}

/* ---- chapter 05: embedding, positions, FFN ------------------------------ */

static void eval_embedding(Report *rep, const TensorFile *in, const char *op)
{
    int backward = strcmp(op, "embedding_backward") == 0;
    Dev d = {};
    Results res = {};
    int fail = 0;
    Error err;
    const Tensor *ids = input(&d, in, "input", DTYPE_I64, 2);
    const Tensor *w = input(&d, in, "embedding.weight", DTYPE_F32, 2);
    const Tensor *dy = backward ? input(&d, in, "grad_output", DTYPE_F32, 3) : NULL;
    double scale = 1.0;
    long long pad = EMBEDDING_NO_PADDING;
    int has_pad = tensorfile_meta(in, "padding_idx") != NULL;
    if (!d.error[0] && (tensorfile_meta_double(in, "scale", 1.0, &scale, &err) != 0 ||
                        (has_pad && tensorfile_meta_int(in, "padding_idx", 0, &pad, &err) != 0) ||
                        embedding_check_ids((const int64_t *)ids->data, tensor_numel(ids),
                                            w->shape[0], in->path, &err) != 0))
        snprintf(d.error, sizeof d.error, "%s", err.msg);
    if (!d.error[0] && has_pad && pad < 0) pad += w->shape[0]; /* counted from the end */
    if (!d.error[0]) {
        int N = as_int(ids->shape[0]), T = as_int(ids->shape[1]), V = as_int(w->shape[0]);
        int D = as_int(w->shape[1]);
        int64_t n = (int64_t)N * T * D;
        int64_t *dids = (int64_t *)dev_upload(&d, ids->data, tensor_numel(ids) * sizeof(int64_t));
        float *dw = dev_tensor(&d, w), *out = dev_nan(&d, n);
        if (!d.error[0]) fail |= cuda_embedding_forward(out, dids, dw, N, T, D, (float)scale);
        download(&d, &res, "output", out, n);
        if (backward) {
            float *g = dev_tensor(&d, dy), *gw = dev_zeros(&d, (int64_t)V * D);
            if (!d.error[0])
                fail |= cuda_embedding_backward(gw, g, dids, N, T, D, (float)scale, pad);
            download(&d, &res, "grad_embedding.weight", gw, (int64_t)V * D);
        }
    }
    finish_case(rep, op, in, &d, &res, fail != 0);
    results_free(&res);
    dev_free(&d);
}

static void eval_positional(Report *rep, const TensorFile *in, const char *op)
{
    int learned = strstr(op, "learned") != NULL, backward = strstr(op, "_backward") != NULL;
    Dev d = {};
    Results res = {};
    int fail = 0;
    const Tensor *x = input(&d, in, "input", DTYPE_F32, 3);
    const Tensor *w = learned ? input(&d, in, "pos_embedding.weight", DTYPE_F32, 2) : NULL;
    const Tensor *dy = backward ? input(&d, in, "grad_output", DTYPE_F32, 3) : NULL;
    if (!d.error[0]) {
        int N = as_int(x->shape[0]), T = as_int(x->shape[1]), D = as_int(x->shape[2]);
        int64_t n = (int64_t)N * T * D;
        if (learned && (w->shape[0] < T || w->shape[1] != D))
            snprintf(d.error, sizeof d.error, "pos_embedding.weight is not (max_len >= T, D)");
        float *dx_in = dev_tensor(&d, x), *table;
        if (learned) {
            table = dev_tensor(&d, w);
        } else {
            table = dev_nan(&d, (int64_t)T * D);
            if (!d.error[0]) fail |= cuda_positional_sinusoidal_table(table, T, D);
            download(&d, &res, "pe", table, (int64_t)T * D);
        }
        float *out = dev_nan(&d, n);
        if (!d.error[0]) fail |= cuda_positional_forward(out, dx_in, table, N, T, D);
        download(&d, &res, "output", out, n);
        if (backward) {
            float *g = dev_tensor(&d, dy), *gx = dev_zeros(&d, n);
            float *gt = learned ? dev_zeros(&d, tensor_numel(w)) : NULL;
            if (!d.error[0]) fail |= cuda_positional_backward(gx, gt, g, N, T, D);
            download(&d, &res, "grad_input", gx, n);
            if (learned) download(&d, &res, "grad_pos_embedding.weight", gt, tensor_numel(w));
        }
    }
    finish_case(rep, op, in, &d, &res, fail != 0);
    results_free(&res);
    dev_free(&d);
}

static void eval_ffn(Report *rep, const TensorFile *in, const char *op)
{
    int backward = strcmp(op, "ffn_backward") == 0;
    Dev d = {};
    Results res = {};
    int fail = 0;
    Error err;
    const Tensor *x = input(&d, in, "input", DTYPE_F32, 3);
    const Tensor *w1 = input(&d, in, "linear1.weight", DTYPE_F32, 2);
    const Tensor *w2 = input(&d, in, "linear2.weight", DTYPE_F32, 2);
    const Tensor *b1 = tensorfile_find(in, "linear1.bias"),
                 *b2 = tensorfile_find(in, "linear2.bias");
    const Tensor *mask = tensorfile_find(in, "dropout_mask");
    const Tensor *dy = backward ? input(&d, in, "grad_output", DTYPE_F32, 3) : NULL;
    double p = 0.0;
    int training = 1;
    if (!d.error[0] && (tensorfile_meta_double(in, "dropout", 0.0, &p, &err) != 0 ||
                        tensorfile_meta_bool(in, "training", 1, &training, &err) != 0))
        snprintf(d.error, sizeof d.error, "%s", err.msg);
    if (!training) mask = NULL; /* evaluation mode: dropout is the identity */
    if (!d.error[0] && training && p > 0 && !mask) {
        skip_case(rep, op, in, "dropout in training mode without the case's mask");
        return;
    }
    if (!d.error[0]) {
        int N = as_int(x->shape[0]), T = as_int(x->shape[1]), D = as_int(x->shape[2]);
        int F = as_int(w1->shape[0]);
        int64_t nd = (int64_t)N * T * D, nf = (int64_t)N * T * F;
        if (w1->shape[1] != D || w2->shape[0] != D || w2->shape[1] != F ||
            (mask && (mask->dtype != DTYPE_BOOL || tensor_numel(mask) != nf)))
            snprintf(d.error, sizeof d.error,
                     "linear1, linear2 or dropout_mask has the wrong shape");
        float *dx_in = dev_tensor(&d, x), *dw1 = dev_tensor(&d, w1), *dw2 = dev_tensor(&d, w2);
        float *db1 = dev_tensor(&d, b1), *db2 = dev_tensor(&d, b2);
        uint8_t *dmask = mask ? (uint8_t *)dev_upload(&d, mask->data, nf) : NULL;
        float *pre = dev_nan(&d, nf), *hidden = dev_nan(&d, nf), *out = dev_nan(&d, nd);
        if (!d.error[0])
            fail |= cuda_ffn_forward(out, pre, hidden, dx_in, dw1, db1, dw2, db2, dmask, (float)p,
                                     N, T, D, F);
        download(&d, &res, "output", out, nd);
        if (backward) {
            float *g = dev_tensor(&d, dy), *gx = dev_zeros(&d, nd), *dh = dev_nan(&d, nf);
            float *gw1 = dev_zeros(&d, (int64_t)F * D), *gw2 = dev_zeros(&d, (int64_t)D * F);
            float *gb1 = b1 ? dev_zeros(&d, F) : NULL, *gb2 = b2 ? dev_zeros(&d, D) : NULL;
            if (!d.error[0])
                fail |= cuda_ffn_backward(gx, gw1, gb1, gw2, gb2, dh, g, dx_in, pre, hidden, dw1,
                                          dw2, dmask, (float)p, N, T, D, F);
            download(&d, &res, "grad_input", gx, nd);
            download(&d, &res, "grad_linear1.weight", gw1, (int64_t)F * D);
            download(&d, &res, "grad_linear2.weight", gw2, (int64_t)D * F);
            if (b1) download(&d, &res, "grad_linear1.bias", gb1, F);
            if (b2) download(&d, &res, "grad_linear2.bias", gb2, D);
        }
    }
    finish_case(rep, op, in, &d, &res, fail != 0);
    results_free(&res);
    dev_free(&d);
}

/* ------------------------------------------------------------------------ */
/* Checks beyond the goldens                                                 */
/* ------------------------------------------------------------------------ */

/* n values from the project's RNG: uniform in [lo, hi). */
/* ---- chapters 07 and 08: the whole model and training (model.cu, train.cu) */

/* model and model_backward: the case's model on the GPU, evaluation mode. */
static void eval_model(Report *rep, const TensorFile *in, const char *op)
{
    static char names[MODEL_MAX_TENSORS][80];
    int backward = strcmp(op, "model_backward") == 0;
    const char *label = backward ? "model_backward [cuBLAS]" : "model [cuBLAS]";
    Model m = {};
    GpuModel g = {};
    GpuWork w = {};
    Dev d = {};
    Results res = {};
    Error err;
    int failed = 0;
    if (model_load_file(&m, in, 0, &err) != 0) {
        record_failure(rep, label, in->path, err.msg);
        return;
    }
    if (m.cfg.kind == MODEL_SET) {      /* chapter 11's set model runs on the CPU only */
        skip_case(rep, label, in, "a set model: the GPU code has no features front end");
        model_free(&m);
        return;
    }
    int seq2seq = m.cfg.kind == MODEL_SEQ2SEQ;
    const Tensor *src = input(&d, in, "src", DTYPE_I64, 2);
    const Tensor *tgt = seq2seq ? input(&d, in, "tgt", DTYPE_I64, 2) : NULL;
    const Tensor *dlogits = backward ? input(&d, in, "grad_logits", DTYPE_F32, -1) : NULL;
    if (!d.error[0]) {
        int N = as_int(src->shape[0]), S = as_int(src->shape[1]);
        int T = tgt ? as_int(tgt->shape[1]) : 0;
        failed = gpu_model_create(&g, &m, &err) != 0 ||
                 gpu_work_alloc(&w, &g, N, S, T, backward, &err) != 0 ||
                 gpu_model_forward(&g, &w, (const int64_t *)src->data,
                                   tgt ? (const int64_t *)tgt->data : NULL, NULL, &err) != 0;
        if (!failed) download(&d, &res, "logits", w.w.logits, w.w.rows * m.cfg.tgt_vocab);
        if (!failed && backward) {
            float *dl = dev_tensor(&d, dlogits);
            failed = !dl || gpu_model_backward(&g, &w, dl, &err) != 0;
            for (int i = 0; !failed && i < m.n_tensors; i++) {
                const ModelTensor *t = &m.tensors[i];
                snprintf(names[i], sizeof names[i], "grad_%s", t->name);
                download(&d, &res, names[i], g.grads + t->offset, (int64_t)t->numel);
            }
        }
        if (failed && !d.error[0]) snprintf(d.error, sizeof d.error, "%s", err.msg);
    }
    finish_case(rep, label, in, &d, &res, failed);
    results_free(&res);
    dev_free(&d);
    gpu_work_free(&w);
    gpu_model_free(&g);
    model_free(&m);
    cuda_matmul_set_engine(NULL);   /* the kernel checks after this one test the tiled kernel */
}

/* train_parity: the case's steps through train.cu, losses against PyTorch's. */
static void eval_parity(Report *rep, const TensorFile *in, const char *op)
{
    const char *label = "train_parity [cuBLAS]";
    TensorFile out = {};
    Dev d = {};
    Results res = {};
    Error err;
    int failed = training_case_parity(in, &out, gpu_step_device_open, &err) != 0;
    const Tensor *losses = NULL;
    if (failed)
        snprintf(d.error, sizeof d.error, "%s", err.msg);
    else if (tensorfile_get(&out, "losses", DTYPE_F32, 1, &losses, &err) == 0) {
        int64_t n = tensor_numel(losses);
        float *copy = (float *)malloc(n * sizeof *copy);
        if (copy) {
            memcpy(copy, losses->data, n * sizeof *copy);
            res.name[0] = "losses", res.data[0] = copy, res.n[0] = n, res.count = 1;
        }
    }
    finish_case(rep, label, in, &d, &res, failed);
    results_free(&res);
    tensorfile_free(&out);
    cuda_matmul_set_engine(NULL);
}

static float *random_floats(Rng *rng, int64_t n, float lo, float hi)
{
    float *x = (float *)malloc((n ? n : 1) * sizeof *x);
    if (!x) {
        fprintf(stderr, "run_cases: out of host memory\n");
        exit(1);
    }
    for (int64_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * rng_uniform(rng);
    return x;
}

/* Copies n floats back to a new host array; NULL (d->error set) on failure. */
static float *fetch(Dev *d, const float *src, int64_t n)
{
    Results r = {};
    download(d, &r, "x", src, n);
    return r.count ? r.data[0] : NULL;
}

/*
 * The tiled kernel and cuBLAS on matrices larger than any golden, against a
 * float64 product on the CPU, with accumulate on as well as off. Inputs are
 * uniform in [-1, 1) / sqrt(K), so |C| is about 1/sqrt(3); a float32 sum of K
 * such products carries an error of about sqrt(K) * 6e-8 (K * 6e-8 at worst).
 * Tolerance atol = 1e-6 * sqrt(K) + 1e-6, rtol = 1e-5.
 */
static void check_matmul_large(Report *rep, Rng *rng)
{
    const int shapes[][3] = {{256, 384, 512}, {130, 70, 1000}, {1, 513, 77}, {300, 1, 2048}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        float sc = 1.0f / sqrtf((float)K);
        float *A = random_floats(rng, (int64_t)M * K, -sc, sc);
        float *Bm = random_floats(rng, (int64_t)K * N, -sc, sc);
        float *C0 = random_floats(rng, (int64_t)M * N, -1.0f, 1.0f); /* accumulated into */
        double atol = 1e-6 * sqrt((double)K) + 1e-6, rtol = 1e-5;
        for (int form = 0; form < 3; form++) { /* nt, nn, tn */
            /* The same logical A (M, K) and B (K, N), stored as each form wants. */
            float *As = (float *)malloc((size_t)M * K * sizeof *As);
            float *Bs = (float *)malloc((size_t)K * N * sizeof *Bs);
            float *want = (float *)malloc((size_t)M * N * sizeof *want);
            float *want_acc = (float *)malloc((size_t)M * N * sizeof *want_acc);
            if (!As || !Bs || !want || !want_acc) exit(1);
            for (int i = 0; i < M; i++)
                for (int k = 0; k < K; k++)
                    As[form == 2 ? (size_t)k * M + i : (size_t)i * K + k] = A[(size_t)i * K + k];
            for (int k = 0; k < K; k++)
                for (int j = 0; j < N; j++)
                    Bs[form == 0 ? (size_t)j * K + k : (size_t)k * N + j] = Bm[(size_t)k * N + j];
            for (int i = 0; i < M; i++)
                for (int j = 0; j < N; j++) {
                    double sum = 0.0;
                    for (int k = 0; k < K; k++)
                        sum += (double)A[(size_t)i * K + k] * Bm[(size_t)k * N + j];
                    want[(size_t)i * N + j] = (float)sum;
                    want_acc[(size_t)i * N + j] = (float)(sum + C0[(size_t)i * N + j]);
                }
            const char *name = form == 0 ? "nt" : form == 1 ? "nn" : "tn";
            for (int variant = 0; variant < 2; variant++) {
                for (int acc = 0; acc < 2; acc++) {
                    char label[64], what[128];
                    snprintf(label, sizeof label, "matmul large [%s] vs float64",
                             variant ? "cuBLAS" : "tiled");
                    snprintf(what, sizeof what, "matmul_%s %dx%dx%d%s", name, M, N, K,
                             acc ? " accumulate" : "");
                    Dev d = {};
                    float *da = (float *)dev_upload(&d, As, (size_t)M * K * 4);
                    float *db = (float *)dev_upload(&d, Bs, (size_t)K * N * 4);
                    float *dc = acc ? (float *)dev_upload(&d, C0, (size_t)M * N * 4)
                                    : dev_nan(&d, (int64_t)M * N);
                    int fail = 0;
                    if (!d.error[0]) {
                        if (variant == 0)
                            fail = (form == 0   ? cuda_matmul_nt
                                    : form == 1 ? cuda_matmul_nn
                                                : cuda_matmul_tn)(dc, da, db, M, N, K, acc);
                        else
                            fail = (form == 0   ? cuda_matmul_nt_cublas
                                    : form == 1 ? cuda_matmul_nn_cublas
                                                : cuda_matmul_tn_cublas)(rep->blas, dc, da, db, M,
                                                                         N, K, acc);
                    }
                    float *got = fail ? NULL : fetch(&d, dc, (int64_t)M * N);
                    if (!got)
                        record_failure(rep, label, what, d.error[0] ? d.error : "launch failed");
                    else
                        check_array(rep, label, what, got, acc ? want_acc : want, (int64_t)M * N,
                                    atol, rtol);
                    free(got);
                    dev_free(&d);
                }
            }
            free(As);
            free(Bs);
            free(want);
            free(want_acc);
        }
        free(A);
        free(Bm);
        free(C0);
    }
}

/*
 * Softmax on rows wider than a block (5000 > 256 threads) and LayerNorm on
 * rows wider than a block (D = 1000 > 128), against the C chapters. Both
 * sides are float32 with different summation orders; the tolerances are the
 * chapters' own (softmax atol 1e-6, rtol 1e-5; LayerNorm with cond about 5:
 * forward atol 8e-6 + 1e-6 cond, backward 2e-5 + 5e-6 cond, rtol 1e-5), with
 * the backward's atol doubled because the C result is itself float32 and
 * grad_weight sums 64 rows.
 */
static void check_wide_rows(Report *rep, Rng *rng)
{
    int rows = 64, cols = 5000, D = 1000;
    /* softmax forward and backward */
    float *x = random_floats(rng, (int64_t)rows * cols, -8.0f, 8.0f);
    float *dy = random_floats(rng, (int64_t)rows * cols, -1.0f, 1.0f);
    float *y = (float *)calloc((size_t)rows * cols, sizeof *y);
    float *dx = (float *)calloc((size_t)rows * cols, sizeof *dx);
    softmax_forward(y, x, rows, cols);
    softmax_backward(dx, y, dy, rows, cols);
    {
        Dev d = {};
        float *gx = (float *)dev_upload(&d, x, (size_t)rows * cols * 4);
        float *gdy = (float *)dev_upload(&d, dy, (size_t)rows * cols * 4);
        float *gy = dev_nan(&d, (int64_t)rows * cols), *gdx = dev_nan(&d, (int64_t)rows * cols);
        int fail = d.error[0] || cuda_softmax_forward(gy, gx, rows, cols) ||
                   cuda_softmax_backward(gdx, gy, gdy, rows, cols);
        float *hy = fail ? NULL : fetch(&d, gy, (int64_t)rows * cols);
        float *hdx = fail ? NULL : fetch(&d, gdx, (int64_t)rows * cols);
        if (!hy || !hdx) {
            record_failure(rep, "softmax wide rows vs C", "64x5000",
                           d.error[0] ? d.error : "launch failed");
        } else {
            check_array(rep, "softmax wide rows vs C", "forward 64x5000", hy, y,
                        (int64_t)rows * cols, 1e-6, 1e-5);
            check_array(rep, "softmax wide rows vs C", "backward 64x5000", hdx, dx,
                        (int64_t)rows * cols, 1e-6, 1e-5);
        }
        free(hy);
        free(hdx);
        dev_free(&d);
    }
    free(x), free(dy), free(y), free(dx);

    /* LayerNorm forward and backward, rows 2 + 3 N(0,1)-ish (uniform) */
    int64_t n = (int64_t)rows * D;
    float *in = random_floats(rng, n, -3.0f, 7.0f), *w = random_floats(rng, D, 0.5f, 1.5f);
    float *b = random_floats(rng, D, -0.5f, 0.5f), *g = random_floats(rng, n, -1.0f, 1.0f);
    float *out = (float *)calloc(n, 4), *mean = (float *)calloc(rows, 4),
          *rstd = (float *)calloc(rows, 4);
    float *gin = (float *)calloc(n, 4), *gw = (float *)calloc(D, 4), *gb = (float *)calloc(D, 4);
    layernorm_forward(out, mean, rstd, in, w, b, 1, rows, D, 1e-5f);
    layernorm_backward(gin, gw, gb, g, in, w, mean, rstd, 1, rows, D);
    double cond = 7.0 * 0.6; /* max|x| * rstd: |x| < 7, std of U(-3, 7) is 2.9 */
    {
        Dev d = {};
        float *din = (float *)dev_upload(&d, in, n * 4), *dw = (float *)dev_upload(&d, w, D * 4);
        float *db = (float *)dev_upload(&d, b, D * 4), *dg = (float *)dev_upload(&d, g, n * 4);
        float *dout = dev_nan(&d, n), *dmean = dev_nan(&d, rows), *drstd = dev_nan(&d, rows);
        float *dgin = dev_zeros(&d, n), *dgw = dev_zeros(&d, D), *dgb = dev_zeros(&d, D);
        int fail = d.error[0] ||
                   cuda_layernorm_forward(dout, dmean, drstd, din, dw, db, 1, rows, D, 1e-5f) ||
                   cuda_layernorm_backward(dgin, dgw, dgb, dg, din, dw, dmean, drstd, 1, rows, D);
        float *h[4] = {NULL, NULL, NULL, NULL};
        if (!fail) {
            h[0] = fetch(&d, dout, n), h[1] = fetch(&d, dgin, n);
            h[2] = fetch(&d, dgw, D), h[3] = fetch(&d, dgb, D);
        }
        if (!h[0] || !h[1] || !h[2] || !h[3]) {
            record_failure(rep, "layernorm wide rows vs C", "64x1000",
                           d.error[0] ? d.error : "launch failed");
        } else {
            double fa = 8e-6 + 1e-6 * cond, ba = 2 * (2e-5 + 5e-6 * cond);
            check_array(rep, "layernorm wide rows vs C", "output", h[0], out, n, fa, 1e-5);
            check_array(rep, "layernorm wide rows vs C", "grad_input", h[1], gin, n, ba, 1e-5);
            check_array(rep, "layernorm wide rows vs C", "grad_weight", h[2], gw, D, ba, 1e-5);
            check_array(rep, "layernorm wide rows vs C", "grad_bias", h[3], gb, D, ba, 1e-5);
        }
        for (int i = 0; i < 4; i++) free(h[i]);
        dev_free(&d);
    }
    free(in), free(w), free(b), free(g), free(out), free(mean), free(rstd), free(gin), free(gw),
        free(gb);
}

/*
 * Attention on sequences longer than the flash kernel's tiles (several key
 * tiles, L not a multiple of the 8 rows of a block), plain and flash, against
 * chapter 02's sdpa_forward/sdpa_backward, with chapter 02's tolerance rule:
 * atol = rtol = 2.5e-6 * growth forward, 1e-5 * growth backward, growth =
 * max(1, max|score| / 4), doubled because the C result is float32 too.
 */
static void check_long_attention(Report *rep, Rng *rng)
{
    struct {
        int N, L, S, E, Ev, causal, masked;
    } cfg[] = {
        {4, 257, 257, 64, 64, 1, 0}, {2, 100, 300, 32, 48, 0, 1}, {3, 61, 33, 128, 128, 0, 0}};
    for (size_t s = 0; s < sizeof cfg / sizeof cfg[0]; s++) {
        int N = cfg[s].N, L = cfg[s].L, S = cfg[s].S, E = cfg[s].E, Ev = cfg[s].Ev;
        int64_t nq = (int64_t)N * L * E, nk = (int64_t)N * S * E, nv = (int64_t)N * S * Ev;
        int64_t no = (int64_t)N * L * Ev, nls = (int64_t)N * L * S;
        float *q = random_floats(rng, nq, -2, 2), *k = random_floats(rng, nk, -2, 2);
        float *v = random_floats(rng, nv, -1, 1), *dout = random_floats(rng, no, -1, 1);
        float *bias = NULL;
        if (cfg[s].masked) { /* an additive mask with -inf entries and one fully masked row */
            bias = random_floats(rng, nls, -2, 2);
            for (int64_t i = 0; i < nls; i++)
                if (rng_uniform(rng) < 0.3f || (i / S) % L == 5) bias[i] = -INFINITY;
        }
        float scale = sdpa_default_scale(E);
        float *out = (float *)calloc(no, 4), *scores = (float *)calloc(nls, 4),
              *att = (float *)calloc(nls, 4);
        float *dq = (float *)calloc(nq, 4), *dk = (float *)calloc(nk, 4),
              *dv = (float *)calloc(nv, 4);
        SdpaArgs args = {N, L, S, E, Ev, scale, cfg[s].causal, bias, NULL, 0.0f};
        sdpa_forward(out, att, q, k, v, &args);
        sdpa_backward(dq, dk, dv, dout, q, k, v, att, &args);
        /* The scores the softmax saw (the C attention keeps none), for the
         * tolerances' growth: largest finite |score| / 4, at least 1. */
        for (int b = 0; b < N; b++)
            matmul_nt(scores + (size_t)b * L * S, q + (size_t)b * L * E, k + (size_t)b * S * E,
                      L, S, E, 0);
        double growth = 1.0;
        for (int64_t i = 0; i < nls; i++) {
            int64_t row = (i / S) % L, col = i % S;
            double sc = scores[i] * scale + (bias ? bias[i] : 0.0f);
            if (cfg[s].causal && col > row) continue;          /* -inf: masked */
            if (isfinite(sc) && fabs(sc) / 4 > growth) growth = fabs(sc) / 4;
        }
        double ftol = 2 * 2.5e-6 * growth, btol = 2 * 1e-5 * growth;
        char what[128];
        snprintf(what, sizeof what, "N %d L %d S %d E %d Ev %d%s%s", N, L, S, E, Ev,
                 cfg[s].causal ? " causal" : "", bias ? " masked" : "");
        for (int variant = 0; variant < 2; variant++) {
            const char *label = variant ? "sdpa long [flash fwd] vs C" : "sdpa long [plain] vs C";
            Dev d = {};
            float *gq = (float *)dev_upload(&d, q, nq * 4),
                  *gk = (float *)dev_upload(&d, k, nk * 4);
            float *gv = (float *)dev_upload(&d, v, nv * 4),
                  *gdo = (float *)dev_upload(&d, dout, no * 4);
            float *gb = bias ? (float *)dev_upload(&d, bias, nls * 4) : NULL;
            float *gout = dev_nan(&d, no), *gatt = dev_nan(&d, nls), *gsc = dev_nan(&d, nls);
            float *glse = dev_nan(&d, (int64_t)N * L);
            float *gdq = dev_zeros(&d, nq), *gdk = dev_zeros(&d, nk), *gdv = dev_zeros(&d, nv);
            float *gdatt = dev_nan(&d, nls), *gdsc = dev_nan(&d, nls);
            int fail = d.error[0] != 0;
            if (!fail && variant == 0)
                fail = cuda_sdpa_forward(gout, gsc, gatt, gq, gk, gv, gb, NULL, 0.0f, N, L, S, E,
                                         Ev, scale, cfg[s].causal);
            if (!fail && variant == 1)
                fail = cuda_sdpa_flash_forward(gout, glse, gq, gk, gv, gb, N, L, S, E, Ev, scale,
                                               cfg[s].causal) ||
                       cuda_sdpa_weights_from_lse(gatt, gq, gk, gb, glse, N, L, S, E, scale,
                                                  cfg[s].causal);
            if (!fail)
                fail = cuda_sdpa_backward(gdq, gdk, gdv, gdatt, gdsc, gdo, gq, gk, gv, gatt, NULL,
                                          0.0f, N, L, S, E, Ev, scale);
            float *h[5] = {NULL, NULL, NULL, NULL, NULL};
            if (!fail) {
                h[0] = fetch(&d, gout, no), h[1] = fetch(&d, gatt, nls);
                h[2] = fetch(&d, gdq, nq), h[3] = fetch(&d, gdk, nk), h[4] = fetch(&d, gdv, nv);
            }
            if (!h[0] || !h[1] || !h[2] || !h[3] || !h[4]) {
                record_failure(rep, label, what, d.error[0] ? d.error : "launch failed");
            } else {
                char w2[160];
                const char *names[5] = {"output", "attn_weights", "grad_query", "grad_key",
                                        "grad_value"};
                const float *want[5] = {out, att, dq, dk, dv};
                int64_t ns[5] = {no, nls, nq, nk, nv};
                for (int i = 0; i < 5; i++) {
                    snprintf(w2, sizeof w2, "%s %s", what, names[i]);
                    double t = i < 2 ? ftol : btol;
                    check_array(rep, label, w2, h[i], want[i], ns[i], t, t);
                }
            }
            for (int i = 0; i < 5; i++) free(h[i]);
            dev_free(&d);
        }
        free(q), free(k), free(v), free(dout), free(bias), free(out), free(scores), free(att);
        free(dq), free(dk), free(dv);
    }
}

/*
 * Cross-entropy (no goldens until chapter 08) against its CPU twin in
 * hostdev.h: the loss, and the gradient dloss / count * hd_ce_grad. Both are
 * float32 sums over V = 1000 logits in different orders: atol 1e-5 on the
 * loss (about 7, from lse ~ 7.5), 1e-7 + rtol 1e-5 on the gradient (each
 * value is a probability / count, about 1e-5).
 */
static void check_cross_entropy(Report *rep, Rng *rng)
{
    const int N = 37, V = 1000;
    const int64_t ignore = -100;
    const float smoothings[] = {0.0f, 0.1f};
    float *logits = random_floats(rng, (int64_t)N * V, -4.0f, 4.0f);
    int64_t targets[N];
    for (int r = 0; r < N; r++) targets[r] = r % 5 == 3 ? ignore : (int64_t)rng_below(rng, V);
    for (int si = 0; si < 2; si++) {
        float e = smoothings[si];
        /* CPU twin */
        double sum = 0.0;
        int count = 0;
        float lse[N];
        float *want = (float *)calloc((size_t)N * V, sizeof *want);
        for (int r = 0; r < N; r++) {
            float row_loss;
            if (hd_ce_row(logits + (size_t)r * V, V, targets[r], ignore, e, &row_loss, &lse[r])) {
                sum += row_loss;
                count++;
            }
        }
        for (int r = 0; r < N; r++)
            for (int j = 0; j < V && targets[r] != ignore; j++)
                want[(size_t)r * V + j] =
                    hd_ce_grad(logits[(size_t)r * V + j], lse[r], j == targets[r], V, e) *
                    (1.0f / count);
        float want_loss = (float)(sum / count);

        Dev d = {};
        float *gl = (float *)dev_upload(&d, logits, (size_t)N * V * 4);
        int64_t *gt = (int64_t *)dev_upload(&d, targets, sizeof targets);
        float *loss = dev_nan(&d, 1), *nv = dev_nan(&d, 1), *glse = dev_nan(&d, N);
        float *rl = dev_nan(&d, N), *dl = dev_zeros(&d, (int64_t)N * V);
        int fail = d.error[0] ||
                   cuda_cross_entropy_forward(loss, nv, glse, rl, gl, gt, N, V, ignore, e) ||
                   cuda_cross_entropy_backward(dl, gl, glse, gt, nv, 1.0f, N, V, ignore, e);
        float *hl = fail ? NULL : fetch(&d, loss, 1);
        float *hd = fail ? NULL : fetch(&d, dl, (int64_t)N * V);
        char what[64];
        snprintf(what, sizeof what, "N %d V %d smoothing %g", N, V, e);
        if (!hl || !hd) {
            record_failure(rep, "cross_entropy vs CPU twin", what,
                           d.error[0] ? d.error : "launch failed");
        } else {
            check_array(rep, "cross_entropy vs CPU twin", what, hl, &want_loss, 1, 1e-5, 1e-6);
            check_array(rep, "cross_entropy vs CPU twin", what, hd, want, (int64_t)N * V, 1e-7,
                        1e-5);
        }
        free(hl), free(hd), free(want);
        dev_free(&d);
    }
    free(logits);
}

/* How many of n mask bytes differ; *first is the first such index, or -1. */
static int64_t mask_differences(const uint8_t *got, const uint8_t *want, int64_t n,
                                int64_t *first)
{
    int64_t differ = 0;
    *first = -1;
    for (int64_t i = 0; i < n; i++)
        if (got[i] != want[i]) differ++, *first = *first < 0 ? i : *first;
    return differ;
}

/* Masks drawn on the GPU against dropout_mask on the CPU, byte for byte,
 * from the same seed: lengths that are and are not multiples of four, one
 * too long for one CUDA block, and p at 0, 1 and between. Both generators
 * must also stand in the same place afterwards (two numbers taken). */
static void check_dropout_masks(Report *rep)
{
    const char *label = "dropout_mask [philox] vs CPU";
    const int lengths[] = {1, 3, 4, 5, 1023, 33000, (1 << 22) + 3};
    const float ps[] = {0.0f, 0.1f, 0.5f, 1.0f};
    for (size_t li = 0; li < sizeof lengths / sizeof lengths[0]; li++)
        for (size_t pi = 0; pi < sizeof ps / sizeof ps[0]; pi++) {
            int n = lengths[li];
            float p = ps[pi];
            Rng cpu, gpu;
            rng_seed(&cpu, 1000 + li, 4), rng_seed(&gpu, 1000 + li, 4);
            uint8_t *want = (uint8_t *)malloc(n), *got = (uint8_t *)malloc(n);
            Dev d = {};
            uint8_t *mask = (uint8_t *)dev_alloc(&d, n, 0xff);
            int fail = !want || !got || !mask || dropout_mask(want, n, p, &cpu) != 0 ||
                       cuda_dropout_mask(mask, n, p, &gpu) != 0 ||
                       cudaMemcpy(got, mask, n, cudaMemcpyDeviceToHost) != cudaSuccess;
            char what[64];
            snprintf(what, sizeof what, "n %d p %g", n, p);
            if (fail) {
                record_failure(rep, label, what, d.error[0] ? d.error : "launch failed");
            } else {
                int64_t first, differ = mask_differences(got, want, n, &first);
                int ok = differ == 0 && memcmp(&cpu, &gpu, sizeof cpu) == 0;
                row_add(report_row(rep, label), ok, (double)differ, 0.0);
                if (!ok)
                    note(rep->failures, &rep->n_failures, "%s: %s: %lld bytes differ (first %lld)%s",
                         label, what, (long long)differ, (long long)first,
                         differ ? "" : ", the generators stand apart");
            }
            free(want), free(got);
            dev_free(&d);
        }
}

/* dropout_rng cases: the mask reference/rng.py draws, drawn on the GPU. */
static void eval_dropout_rng(Report *rep, const TensorFile *in, const char *op)
{
    Dev d = {};
    Error err;
    long long seed, stream;
    double p;
    const Tensor *want = input(&d, in, "mask", DTYPE_BOOL, -1);
    if (!want || tensorfile_meta_int(in, "rng_seed", -1, &seed, &err) != 0 ||
        tensorfile_meta_int(in, "rng_stream", -1, &stream, &err) != 0 ||
        tensorfile_meta_double(in, "dropout", NAN, &p, &err) != 0) {
        record_failure(rep, op, in->path, d.error[0] ? d.error : err.msg);
        return;
    }
    int n = as_int(tensor_numel(want));
    Rng rng;
    rng_seed(&rng, (uint64_t)seed, (uint64_t)stream);
    uint8_t *mask = (uint8_t *)dev_alloc(&d, n, 0xff), *got = (uint8_t *)malloc(n ? n : 1);
    if (!mask || !got || cuda_dropout_mask(mask, n, (float)p, &rng) != 0 ||
        cudaMemcpy(got, mask, n, cudaMemcpyDeviceToHost) != cudaSuccess) {
        record_failure(rep, op, in->path, d.error[0] ? d.error : "launch failed");
    } else {
        int64_t first, differ = mask_differences(got, (const uint8_t *)want->data, n, &first);
        row_add(report_row(rep, op), differ == 0, (double)differ, 0.0);
        if (differ)
            note(rep->failures, &rep->n_failures, "%s: %s: %lld of %d mask bytes differ (first %lld)",
                 op, in->path, (long long)differ, n, (long long)first);
    }
    free(got);
    dev_free(&d);
}

/*
 * Adam and AdamW (no goldens until chapter 08) against hd_adam_update run
 * on the CPU: three steps on 10 000 parameters. The same formula in the same
 * order on both sides; only fused multiply-adds differ, so rtol 1e-6. But
 * exp_avg = m + (g - m) (1 - beta1) can cancel to near 0 while m and g are
 * of order 1 (gradients are uniform in [-1, 1]): its rounding error, with
 * or without a fused multiply-add, is relative to them, not to the result.
 * Hence atol 1e-7 (about one float32 ulp of 1) for exp_avg; measured on an
 * H100: 1.0e-8 where exp_avg is 0.0027.
 */
static void check_adam(Report *rep, Rng *rng)
{
    const int64_t n = 10000;
    for (int decoupled = 0; decoupled < 2; decoupled++) {
        const char *label = decoupled ? "adamw vs CPU twin" : "adam vs CPU twin";
        float *p = random_floats(rng, n, -1, 1), *m = (float *)calloc(n, 4),
              *v = (float *)calloc(n, 4);
        Dev d = {};
        float *gp = (float *)dev_upload(&d, p, n * 4), *gm = dev_zeros(&d, n),
              *gv = dev_zeros(&d, n);
        float *gg = dev_zeros(&d, n);
        int fail = d.error[0] != 0;
        for (int t = 1; t <= 3 && !fail; t++) {
            float *g = random_floats(rng, n, -1, 1);
            AdamStep h =
                hd_adam_hyper(1e-3, 0.9, 0.999, 1e-8, decoupled ? 0.01 : 0.1, decoupled, t);
            for (int64_t i = 0; i < n; i++) hd_adam_update(&p[i], g[i], &m[i], &v[i], h);
            fail = cudaMemcpy(gg, g, n * 4, cudaMemcpyHostToDevice) != cudaSuccess ||
                   cuda_adam_step(gp, gg, gm, gv, n, h) != 0;
            free(g);
        }
        float *hp = fail ? NULL : fetch(&d, gp, n);
        float *hm = fail ? NULL : fetch(&d, gm, n);
        float *hv = fail ? NULL : fetch(&d, gv, n);
        if (!hp || !hm || !hv) {
            record_failure(rep, label, "3 steps", d.error[0] ? d.error : "a launch or copy failed");
        } else {
            check_array(rep, label, "param after 3 steps", hp, p, n, 1e-7, 1e-6);
            check_array(rep, label, "exp_avg after 3 steps", hm, m, n, 1e-7, 1e-6);
            check_array(rep, label, "exp_avg_sq after 3 steps", hv, v, n, 1e-12, 1e-6);
        }
        free(hp), free(hm), free(hv), free(p), free(m), free(v);
        dev_free(&d);
    }
}

/* Training with dropout, which no golden has (PyTorch's masks cannot be
 * replayed): 20 steps of the same model from the same weights, with the same
 * batches and the same dropout Rng, once with train_step on the CPU and once
 * with train.cu on the GPU. model.cu draws the masks on the GPU from keys
 * taken in the C model's order, so both runs drop the same units (given
 * check_dropout_masks) and must agree up to the
 * order of float32 sums: losses to rtol 1e-5, the final weights to atol
 * 1e-5 + rtol 1e-4 (20 Adam steps of lr 1e-3 each move a weight by at most
 * 2e-2; a relative difference of 1e-5 in a gradient moves the update by
 * much less). Except one slice: the key part of every in_proj_bias, whose
 * gradient is 0 in exact arithmetic (softmax ignores a constant added to
 * all scores of a row). Both sides compute it as rounding noise of about
 * 1e-9, and Adam divides by sqrt(v), so noise of either sign moves those
 * weights by up to lr per step, differently on each side; they are set
 * equal before the comparison. Both kinds with a decoder and an encoder are
 * covered, with padding, learned positions and a learned embedding scale. */
static void check_training_vs_cpu(Report *rep, Rng *rng)
{
    for (int kind = 0; kind < 2; kind++) {
        int seq2seq = kind == 0;
        const char *label = seq2seq ? "training seq2seq, dropout 0.1 vs CPU"
                                    : "training labeller, dropout 0.1 vs CPU";
        ModelConfig cfg = {};
        cfg.kind = seq2seq ? MODEL_SEQ2SEQ : MODEL_LABELLER;
        cfg.src_vocab = cfg.tgt_vocab = 13;
        cfg.d_model = 16, cfg.nhead = 2, cfg.dim_feedforward = 32;
        cfg.num_encoder_layers = 2, cfg.num_decoder_layers = seq2seq ? 2 : 0;
        cfg.max_len = 10, cfg.learned_pos = seq2seq, cfg.scale_embedding = seq2seq ? 2 : 1;
        cfg.final_norm = 1, cfg.norm_first = seq2seq, cfg.pad_id = seq2seq ? 0 : -1;
        cfg.eps = 1e-5f, cfg.dropout = 0.1f;
        const int N = 8, S = 9, T = seq2seq ? 10 : 0, steps = 20;
        int out_len = seq2seq ? T : S;
        Model cpu = {}, gpu = {};
        OptimState opt_cpu = {}, opt_gpu = {};
        StepWork work = {};
        StepDevice dev = {};
        Error err;
        Rng init, drop_cpu, drop_gpu;
        float losses_cpu[20], losses_gpu[20];
        int64_t *src = (int64_t *)malloc(sizeof(int64_t) * steps * N * S);
        int64_t *tgt = (int64_t *)malloc(sizeof(int64_t) * steps * N * (T ? T : 1));
        int64_t *target = (int64_t *)malloc(sizeof(int64_t) * steps * N * out_len);
        /* ids from 3 up (0 is padding in seq2seq), the last ones of some rows padding */
        for (int64_t i = 0; i < (int64_t)steps * N * S; i++) src[i] = 3 + rng_below(rng, 10);
        for (int64_t i = 0; i < (int64_t)steps * N * T; i++) tgt[i] = 3 + rng_below(rng, 10);
        for (int64_t i = 0; i < (int64_t)steps * N * out_len; i++)
            target[i] = 3 + rng_below(rng, 10);
        for (int r = 0; seq2seq && r < steps * N; r += 3) {
            src[(int64_t)r * S + S - 1] = 0;
            tgt[(int64_t)r * T + T - 1] = 0, target[(int64_t)r * T + T - 1] = 0;
        }
        AdamConfig adam = adam_default_config(1);
        int fail = 0;
        rng_seed(&init, 7, 0);
        fail |= model_init(&cpu, &cfg, &init, &err) != 0;
        rng_seed(&init, 7, 0);
        fail |= !fail && model_init(&gpu, &cfg, &init, &err) != 0;
        fail |= !fail && (adam_state_alloc(&opt_cpu, cpu.num_params, &err) != 0 ||
                          adam_state_alloc(&opt_gpu, gpu.num_params, &err) != 0 ||
                          step_work_alloc(&work, &cpu, N, S, T, 1, &err) != 0 ||
                          gpu_step_device_open(&dev, &gpu, &opt_gpu, N, S, T, &err) != 0);
        rng_seed(&drop_cpu, 11, 4);
        rng_seed(&drop_gpu, 11, 4);
        for (int k = 0; k < steps && !fail; k++) {
            StepResult r;
            const int64_t *x = src + (int64_t)k * N * S;
            const int64_t *t_in = seq2seq ? tgt + (int64_t)k * N * T : NULL;
            const int64_t *y = target + (int64_t)k * N * out_len;
            StepConfig step = {adam, 1e-3f, 1.0f, 0.1f, &drop_cpu};
            Batch b = {N, S, T, (int64_t *)x, (int64_t *)t_in, (int64_t *)y, NULL};
            fail |= train_step(&cpu, &work, &opt_cpu, &step, &b, &r, &err) != 0;
            losses_cpu[k] = (float)r.loss;
            step.dropout_rng = &drop_gpu;
            fail |= !fail && dev.step(dev.ctx, &step, &b, &r, &err) != 0;
            losses_gpu[k] = (float)r.loss;
        }
        fail |= !fail && dev.sync(dev.ctx, &gpu, &opt_gpu, &err) != 0;
        if (fail) {
            record_failure(rep, label, "20 steps", err.msg);
        } else {
            for (int i = 0; i < cpu.n_tensors; i++) {
                const ModelTensor *t = &cpu.tensors[i];
                size_t len = strlen(t->name), suffix = strlen("in_proj_bias");
                if (len < suffix || strcmp(t->name + len - suffix, "in_proj_bias") != 0) continue;
                size_t D = (size_t)cfg.d_model;   /* [b_q; b_k; b_v]: the middle D values */
                memcpy(gpu.params + t->offset + D, cpu.params + t->offset + D, D * sizeof(float));
            }
            check_array(rep, label, "losses", losses_gpu, losses_cpu, steps, 1e-6, 1e-5);
            check_array(rep, label, "weights after 20 steps", gpu.params, cpu.params,
                        (int64_t)cpu.num_params, 1e-5, 1e-4);
        }
        if (dev.close) dev.close(dev.ctx);
        step_work_free(&work);
        optim_state_free(&opt_cpu), optim_state_free(&opt_gpu);
        model_free(&cpu), model_free(&gpu);
        free(src), free(tgt), free(target);
        cuda_matmul_set_engine(NULL);
    }
}

/* ------------------------------------------------------------------------ */
/* main                                                                      */
/* ------------------------------------------------------------------------ */

typedef void (*EvalFn)(Report *, const TensorFile *, const char *);

static EvalFn eval_for(const char *op)
{
    static const struct {
        const char *op;
        EvalFn fn;
    } table[] = {
        {"matmul_nt", eval_matmul},
        {"matmul_nn", eval_matmul},
        {"matmul_tn", eval_matmul},
        {"linear", eval_linear},
        {"linear_backward", eval_linear},
        {"softmax", eval_softmax},
        {"softmax_backward", eval_softmax},
        {"sdpa", eval_sdpa},
        {"sdpa_backward", eval_sdpa},
        {"layernorm", eval_layernorm},
        {"layernorm_backward", eval_layernorm},
        {"residual", eval_residual},
        {"residual_backward", eval_residual},
        {"embedding", eval_embedding},
        {"embedding_backward", eval_embedding},
        {"positional_sinusoidal", eval_positional},
        {"positional_sinusoidal_backward", eval_positional},
        {"positional_learned", eval_positional},
        {"positional_learned_backward", eval_positional},
        {"ffn", eval_ffn},
        {"ffn_backward", eval_ffn},
        {"model", eval_model},
        {"model_backward", eval_model},
        {"train_parity", eval_parity},
        {"dropout_rng", eval_dropout_rng},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(table[i].op, op) == 0) return table[i].fn;
    return NULL;
}

static void count_uncovered(Report *rep, const char *op)
{
    for (int i = 0; i < rep->n_uncovered; i++)
        if (strcmp(rep->uncovered[i].op, op) == 0) {
            rep->uncovered[i].cases++;
            return;
        }
    if (rep->n_uncovered == MAX_ROWS) return;
    Uncovered *u = &rep->uncovered[rep->n_uncovered++];
    snprintf(u->op, sizeof u->op, "%s", op);
    u->cases = 1;
}

static int probe(void)
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        fprintf(stderr, "run_cases: cudaGetDeviceCount: %s\n", cudaGetErrorString(e));
        return 1;
    }
    if (count == 0) {
        fprintf(stderr, "run_cases: cudaGetDeviceCount found no device\n");
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--probe") == 0) return probe();
    if (argc > 2 || (argc == 2 && argv[1][0] == '-')) {
        fprintf(stderr, "usage: %s [GOLDEN_DIR]   (default golden)\n       %s --probe\n", argv[0],
                argv[0]);
        return 2;
    }
    const char *root = argc == 2 ? argv[1] : "golden";
    if (probe() != 0) return 1;

    cudaDeviceProp prop;
    cudaError_t e = cudaGetDeviceProperties(&prop, 0);
    if (e != cudaSuccess) {
        fprintf(stderr, "run_cases: cudaGetDeviceProperties: %s\n", cudaGetErrorString(e));
        return 1;
    }
    static Report rep; /* large; zeroed */
    rep.blas = cuda_blas_create();
    if (!rep.blas) return 1;

    char pattern[1024];
    snprintf(pattern, sizeof pattern, "%s/*/*.safetensors", root);
    glob_t files;
    int g = glob(pattern, 0, NULL, &files);
    if (g != 0 || files.gl_pathc == 0) {
        fprintf(stderr, "run_cases: no case files match %s (run make golden)\n", pattern);
        cuda_blas_destroy(rep.blas);
        if (g == 0) globfree(&files);
        return 1;
    }
    printf("run_cases: %s (sm_%d%d), %zu case files under %s/\n", prop.name, prop.major, prop.minor,
           (size_t)files.gl_pathc, root);

    for (size_t i = 0; i < files.gl_pathc; i++) {
        TensorFile in;
        Error err;
        if (safetensors_read(files.gl_pathv[i], &in, &err) != 0) {
            record_failure(&rep, "(unreadable case file)", files.gl_pathv[i], err.msg);
            continue;
        }
        const char *op = tensorfile_meta(&in, "op");
        EvalFn fn = op ? eval_for(op) : NULL;
        if (fn)
            fn(&rep, &in, op);
        else
            count_uncovered(&rep, op ? op : "(no op)");
        tensorfile_free(&in);
    }
    globfree(&files);

    Rng rng;
    rng_seed(&rng, 2024, 0);
    check_matmul_large(&rep, &rng);
    check_wide_rows(&rep, &rng);
    check_long_attention(&rep, &rng);
    check_cross_entropy(&rep, &rng);
    check_adam(&rep, &rng);
    check_dropout_masks(&rep);
    check_training_vs_cpu(&rep, &rng);
    cuda_blas_destroy(rep.blas);

    int failed = 0;
    printf("%-38s %6s %12s %12s  result\n", "op [kernel]", "cases", "max abs err", "max rel err");
    printf("---------------------------------------------------------------------------------\n");
    for (int i = 0; i < rep.n_rows; i++) {
        Row *r = &rep.rows[i];
        char result[32];
        if (r->failed)
            snprintf(result, sizeof result, "FAIL (%d)", r->failed);
        else
            snprintf(result, sizeof result, "pass");
        printf("%-38s %6d %12.3g %12.3g  %s\n", r->label, r->cases, r->max_abs, r->max_rel, result);
        failed += r->failed;
    }
    for (int i = 0; i < rep.n_failures; i++) printf("  FAIL %s\n", rep.failures[i]);
    if (rep.n_skipped) printf("skipped (case options these kernels do not support):\n");
    for (int i = 0; i < rep.n_skipped; i++) printf("  %s\n", rep.skipped[i]);
    if (rep.n_uncovered) printf("not run (ops with no CUDA kernel yet):");
    for (int i = 0; i < rep.n_uncovered; i++)
        printf("%s %s (%d)", i ? "," : "", rep.uncovered[i].op, rep.uncovered[i].cases);
    if (rep.n_uncovered) printf("\n");
    printf("%s\n", failed ? "run_cases: FAILURES" : "run_cases: all pass");
    return failed ? 1 : 0;
}
