/*
 * kernels.h - the CUDA side's public API, callable from C and C++.
 *
 * Every function here launches kernels on the default stream and returns
 * 0, or -1 after printing one line when a launch is refused. All pointers
 * are DEVICE pointers (cudaMalloc'd); shapes and the rules (what is
 * accumulated, what may be NULL) are those of the chapter function each one
 * mirrors, named in the comment. Errors that happen while a kernel runs
 * surface at the next synchronisation (cudaDeviceSynchronize, cudaMemcpy).
 *
 * Letters as in the chapters (the top README's table): N batch (for
 * attention, every leading dimension flattened), L queries, S keys, E and Ev
 * the query/key and value features of one attention call, T sequence, D
 * width, F the FFN's hidden width, V vocabulary, max_len the rows of a
 * position table, R rows of the loss. The matrix products keep chapter 00's
 * local letters: C (M, N) = A (M, K) B, K summed; so do the bias kernels
 * (M, N) and the softmax (rows, cols).
 *
 * Files: matmul.cu, softmax.cu, sdpa.cu, layernorm.cu, embedding.cu,
 * ffn.cu, loss.cu, adam.cu; the math they share with the CPU is in hostdev.h.
 *
 * Long argument lists, on purpose: several functions here (and their
 * kernels in sdpa.cu, ffn.cu, layernorm.cu, loss.cu) take more than eight
 * arguments, where the CPU side packs them into a struct. Each keeps the
 * argument list of the chapter function it mirrors (layernorm_backward's
 * eleven, PyTorch's order), plus the device buffers it works in, so that a
 * GPU call reads side by side with its CPU twin; and a kernel receives its
 * arguments by value at launch, where a struct of device pointers would be
 * one more thing built on the host and copied with every launch.
 */
#ifndef CUDA_KERNELS_H
#define CUDA_KERNELS_H

#include <stdint.h>

#include "hostdev.h"

#ifdef __cplusplus
extern "C" {
#endif

#include "rng.h"   /* C declarations: inside the extern "C" block for nvcc */

/* ---- matmul.cu: chapter 00's matmul.h ----------------------------------- */

/* The readable tiled kernel. Same three forms and `accumulate` rule as
 * matmul_nt / matmul_nn / matmul_tn. */
int cuda_matmul_nt(float *C, const float *A, const float *B, int M, int N, int K, int accumulate);
int cuda_matmul_nn(float *C, const float *A, const float *B, int M, int N, int K, int accumulate);
int cuda_matmul_tn(float *C, const float *A, const float *B, int M, int N, int K, int accumulate);

/* The same on `batch` independent problems stored one after the other
 * (A is batch x its matrix, and so on): the heads of attention. */
int cuda_matmul_nt_batched(float *C, const float *A, const float *B, int batch, int M, int N,
                           int K, int accumulate);
int cuda_matmul_nn_batched(float *C, const float *A, const float *B, int batch, int M, int N,
                           int K, int accumulate);
int cuda_matmul_tn_batched(float *C, const float *A, const float *B, int batch, int M, int N,
                           int K, int accumulate);

/* cuBLAS, the yardstick: the same three forms on a handle the caller owns. */
typedef struct CudaBlas CudaBlas;
CudaBlas *cuda_blas_create(void);                /* NULL (one line printed) on failure */
void cuda_blas_destroy(CudaBlas *blas);
int cuda_matmul_nt_cublas(CudaBlas *blas, float *C, const float *A, const float *B, int M, int N,
                          int K, int accumulate);
int cuda_matmul_nn_cublas(CudaBlas *blas, float *C, const float *A, const float *B, int M, int N,
                          int K, int accumulate);
int cuda_matmul_tn_cublas(CudaBlas *blas, float *C, const float *A, const float *B, int M, int N,
                          int K, int accumulate);

/* Makes every cuda_matmul_* above (and so everything built on them: linear,
 * FFN, attention) run on cuBLAS with this handle; NULL: the tiled kernel
 * again (the default). */
void cuda_matmul_set_engine(CudaBlas *blas);

/* linear_forward / linear_backward: out (M, N) = x (M, K) W^T + b; the
 * backward ADDS into dx (skipped if NULL), dweight and dbias (skipped if NULL). */
int cuda_linear_forward(float *out, const float *x, const float *weight, const float *bias,
                        int M, int K, int N);
int cuda_linear_backward(float *dx, float *dweight, float *dbias, const float *dout,
                         const float *x, const float *weight, int M, int K, int N);

/* ---- softmax.cu: chapter 00's softmax.h --------------------------------- */

int cuda_softmax_forward(float *y, const float *x, int rows, int cols);
int cuda_softmax_backward(float *dx, const float *y, const float *dy, int rows, int cols);

/* ---- sdpa.cu: chapter 02's sdpa.h --------------------------------------- */

/* sdpa_forward / sdpa_backward, step by step (scores, softmax, att V as
 * separate kernels). bias (N, L, S) is the additive mask sdpa_mask_bias()
 * makes on the CPU, or NULL. drop (N, L, S) is dropout's keep mask on the
 * device (1 kept), drawn with probability dropout_p, or NULL for none; att
 * stays the softmax before dropout. The backward ADDS into dq, dk, dv. */
int cuda_sdpa_forward(float *out, float *scores, float *att, const float *q, const float *k,
                      const float *v, const float *bias, const uint8_t *drop, float dropout_p,
                      int N, int L, int S, int E, int Ev, float scale, int is_causal);
int cuda_sdpa_backward(float *dq, float *dk, float *dv, float *datt, float *dscores,
                       const float *dout, const float *q, const float *k, const float *v,
                       const float *att, const uint8_t *drop, float dropout_p, int N, int L,
                       int S, int E, int Ev, float scale);

/* The fused forward in the flash-attention style: one pass over the keys
 * with the online softmax, never storing the (N, L, S) weights. Writes out
 * (N, L, Ev) and lse (N, L), log sum_j exp(score_ij) per query row (-inf for
 * a fully masked row, whose output is 0). E and Ev at most CUDA_FLASH_MAX_D. */
#define CUDA_FLASH_MAX_D 128
int cuda_sdpa_flash_forward(float *out, float *lse, const float *q, const float *k,
                            const float *v, const float *bias, int N, int L, int S, int E,
                            int Ev, float scale, int is_causal);

/* The weights rebuilt from the saved lse: att = exp(score - lse), what a
 * backward pass after the flash forward needs. */
int cuda_sdpa_weights_from_lse(float *att, const float *q, const float *k, const float *bias,
                               const float *lse, int N, int L, int S, int E, float scale,
                               int is_causal);

/* ---- layernorm.cu: chapter 04's layernorm.h ----------------------------- */

int cuda_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                           const float *weight, const float *bias, int N, int T, int D,
                           float eps);
int cuda_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                            const float *inp, const float *weight, const float *mean,
                            const float *rstd, int N, int T, int D);

/* ---- embedding.cu: chapter 05's embedding.h and positional.h ------------ */

int cuda_embedding_forward(float *out, const int64_t *ids, const float *weight, int N, int T,
                           int D, float scale);
int cuda_embedding_backward(float *dweight, const float *dout, const int64_t *ids, int N, int T,
                            int D, float scale, int64_t padding_idx);
int cuda_positional_sinusoidal_table(float *table, int max_len, int D);
int cuda_positional_forward(float *out, const float *x, const float *table, int N, int T, int D);
int cuda_positional_backward(float *dx, float *dtable, const float *dout, int N, int T, int D);

/* ---- ffn.cu: the pieces of chapter 05's ffn.h, and chapter 04's residual.h */

int cuda_bias_forward(float *out, const float *bias, int M, int N);      /* out (M, N) += bias */
int cuda_bias_backward(float *dbias, const float *dout, int M, int N);   /* dbias += column sums */
int cuda_relu_forward(float *hidden, const float *pre, int n);
/* dropout_mask on the GPU: the key from rng on the host (dropout_key),
 * the mask drawn on the device, byte for byte the CPU's. */
int cuda_dropout_mask(uint8_t *mask, int n, float p, Rng *rng);
int cuda_dropout_forward(float *out, const float *x, const uint8_t *mask, int n, float p);
/* dpre = dhidden * mask / (1 - p) * [pre > 0]; dpre may be dhidden. */
int cuda_relu_dropout_backward(float *dpre, const float *dhidden, const float *pre,
                               const uint8_t *mask, float p, int n);
int cuda_ffn_forward(float *out, float *pre, float *hidden, const float *x, const float *w1,
                     const float *b1, const float *w2, const float *b2, const uint8_t *mask,
                     float p, int N, int T, int D, int F);
int cuda_ffn_backward(float *dx, float *dw1, float *db1, float *dw2, float *db2, float *dhidden,
                      const float *dout, const float *x, const float *pre, const float *hidden,
                      const float *w1, const float *w2, const uint8_t *mask, float p, int N,
                      int T, int D, int F);
int cuda_residual_forward(float *out, const float *x, const float *fx, int n);
int cuda_residual_backward(float *dx, float *dfx, const float *dout, int n);
int cuda_add_into(float *dst, const float *src, long long n);           /* dst += src */

/* ---- loss.cu: chapter 08's cross_entropy, torch F.cross_entropy ---------- */

/* logits (R, V), targets (R,) int64. Writes loss (1,), the mean over the rows
 * whose target is not ignore_index; n_valid (1,), their count, as a float;
 * lse (R,), each row's log-sum-exp, saved for the backward; and row_loss
 * (R,), each row's loss (0 when ignored). Targets must lie in [0, V) or be
 * ignore_index (check them on the CPU first; a kernel cannot report one). */
int cuda_cross_entropy_forward(float *loss, float *n_valid, float *lse, float *row_loss,
                               const float *logits, const int64_t *targets, int R, int V,
                               int64_t ignore_index, float label_smoothing);
/* ADDS dloss * d(loss)/d(logits) into dlogits (R, V); dloss is a host value,
 * 1 for a plain gradient. Ignored rows get nothing. */
int cuda_cross_entropy_backward(float *dlogits, const float *logits, const float *lse,
                                const int64_t *targets, const float *n_valid, float dloss,
                                int R, int V, int64_t ignore_index, float label_smoothing);

/* ---- adam.cu: chapter 08's adam_step, torch.optim Adam / AdamW ---------- */

/* One step over n parameters stored flat; m and v start at zero and persist
 * between steps. h comes from hd_adam_hyper(lr, beta1, beta2, eps, wd,
 * decoupled, t) with the step counter t = 1, 2, ... */
int cuda_adam_step(float *param, const float *grad, float *m, float *v, long long n,
                   AdamStep h);

#ifdef __cplusplus
}
#endif

#endif
