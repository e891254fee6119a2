/*
 * test_12_generation.c - chapter 12: the next-token loss and the sampling
 * step, against goldens made by reference/ch12_generation.py, plus what
 * holds for any input (the loss of a text is the sum of the losses of its
 * windows, each gradient row sums to 0, probabilities sum to 1, top-k 1 is
 * greedy, the draws follow the probabilities), the refusals of bad settings
 * and targets, and the case-file checks (each broken case is refused with one
 * line naming the file, and no output file appears). Then the task around
 * them: the byte streams, the training windows, bits per byte, writing with
 * and without the key/value cache.
 *
 * Every call's return code is checked before its outputs are read, so the
 * exercise stubs fail these tests cleanly.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include "threads.h"  /* OpenMP, or its one-thread stand-ins */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "casefile.h"
#include "generate.h"
#include "generation_case.h"
#include "helpers.h"
#include "lm_text.h"
#include "model.h"
#include "model_file.h"
#include "next_token.h"
#include "progress.h"
#include "rng.h"
#include "sampling.h"
#include "terminal.h"

#define CHAPTER "12_generation"

/* Every golden of the chapter: a test each through the functions, and a test
 * each through the case evaluator. test_goldens_all_listed fails when the
 * folder and these lists differ. */
static const char *const LOSS_GOLDENS[] = {
    "next_token_loss_example",
    "next_token_loss_N1_T1_V2",
    "next_token_loss_N1_T1_V256",
    "next_token_loss_N3_T1_V10",
    "next_token_loss_N1_T12_V7",
    "next_token_loss_N2_T8_V5",
    "next_token_loss_N1_T5_V1",
    "next_token_loss_N2_T3_V16_large",
    "next_token_loss_N2_T16_V256_confident",
    "next_token_loss_N4_T32_V256",
};
static const char *const SAMPLING_GOLDENS[] = {
    "sampling_example_t1",
    "sampling_example_t0",
    "sampling_example_t2",
    "sampling_example_t0.5",
    "sampling_example_topk2",
    "sampling_example_topp0.8",
    "sampling_example_topp0.7",
    "sampling_t0_V10",
    "sampling_t0_ties_V6",
    "sampling_t0.5_V10",
    "sampling_t1_V10",
    "sampling_t2_V10",
    "sampling_topk1_V10",
    "sampling_topk5_V10",
    "sampling_topkV_V10",
    "sampling_topk3_ties_V8",
    "sampling_topp0.5_V10",
    "sampling_topp0.9_V10",
    "sampling_topp1_V10",
    "sampling_topp0.9_ties_V8",
    "sampling_t0.7_topk5_topp0.9_V10",
    "sampling_t2_topk3_topp0.5_V10",
    "sampling_t0_topk5_topp0.5_V10",
    "sampling_banned_t1_topk4_V12",
    "sampling_V1",
    "sampling_t1_V256",
    "sampling_t0.5_V256",
    "sampling_topk40_V256",
    "sampling_topp0.9_V256",
    "sampling_t0.8_topk40_topp0.95_V256",
};
#define N_LOSS (int)(sizeof LOSS_GOLDENS / sizeof *LOSS_GOLDENS)
#define N_SAMPLING (int)(sizeof SAMPLING_GOLDENS / sizeof *SAMPLING_GOLDENS)

/* ------------------------------------------------------------------------ */
/* Goldens                                                                   */
/* ------------------------------------------------------------------------ */

/* A next-token loss golden: the loss (float64) and its gradient, and the
 * same loss without the gradient (dlogits NULL), bit for bit. */
static void test_loss_case(void **state)
{
    TensorFile f;
    load_golden(&f, CHAPTER, *state);
    double atol, rtol;
    golden_tolerance(&f, &atol, &rtol);
    const Tensor *logits = golden_tensor(&f, "logits", DTYPE_F32);
    const Tensor *ids = golden_tensor(&f, "ids", DTYPE_I64);
    int N = (int)logits->shape[0], T = (int)logits->shape[1], V = (int)logits->shape[2];
    float *dlogits = test_floats((int64_t)N * T * V);
    double loss = NAN, loss_alone = NAN;
    Error err;
    assert_ok(next_token_loss(&loss, dlogits, logits->data, ids->data, N, T, V, &err));
    print_message("  loss %.9f nats = %.6f bits a token\n", loss, loss / log(2.0));
    assert_close_f64_to_golden(&f, "loss", &loss, 1, atol, rtol);
    assert_close_to_golden(&f, "grad_logits", dlogits, (int64_t)N * T * V, atol, rtol);
    assert_ok(next_token_loss(&loss_alone, NULL, logits->data, ids->data, N, T, V, &err));
    assert_memory_equal(&loss, &loss_alone, sizeof loss);
    free(dlogits);
    tensorfile_free(&f);
}

/* A sampling golden: every row's distribution within tolerance, and the id
 * its u draws exactly. */
static void test_sampling_case(void **state)
{
    TensorFile f;
    load_golden(&f, CHAPTER, *state);
    double atol, rtol;
    golden_tolerance(&f, &atol, &rtol);
    const Tensor *logits = golden_tensor(&f, "logits", DTYPE_F32);
    const double *u = golden_tensor(&f, "u", DTYPE_F64)->data;
    int R = (int)logits->shape[0], V = (int)logits->shape[1];
    Sampling s = {(float)golden_meta_double(&f, "temperature", -1),
                  (int)golden_meta_long(&f, "top_k", -1),
                  (float)golden_meta_double(&f, "top_p", -1)};
    print_message("  temperature %g, top_k %d, top_p %g, %d rows of %d\n", s.temperature,
                  s.top_k, s.top_p, R, V);
    float *probs = test_floats((int64_t)R * V);
    int *order = calloc((size_t)V, sizeof *order);
    int64_t *picked = calloc((size_t)R, sizeof *picked);
    assert_non_null(order);
    assert_non_null(picked);
    Error err;
    for (int r = 0; r < R; r++) {
        assert_ok(sampling_probs(probs + (size_t)r * V, order, (const float *)logits->data +
                                 (size_t)r * V, V, &s, &err));
        picked[r] = sampling_pick(probs + (size_t)r * V, V, u[r]);
    }
    assert_close_to_golden(&f, "probs", probs, (int64_t)R * V, atol, rtol);
    assert_i64_equal_to_golden(&f, "ids", picked, R);
    free(probs);
    free(order);
    free(picked);
    tensorfile_free(&f);
}

/* The chapter program's evaluator on a golden: every output the case lists
 * comes back, within tolerance (the ids exactly). */
static void test_case_eval(void **state)
{
    TensorFile f, out = {0};
    load_golden(&f, CHAPTER, *state);
    assert_int_equal(assert_case_outputs(generation_case_eval, &f, &out), 2);
    tensorfile_free(&out);
    tensorfile_free(&f);
}

/* The folder holds exactly the goldens listed above: one missing fails its
 * own tests and this one, one not listed here fails this one. */
static void test_goldens_all_listed(void **state)
{
    DIR *dir = opendir("golden/" CHAPTER);
    if (!dir) {
        print_error("cannot open golden/" CHAPTER " (run make golden)\n");
        fail();
    }
    int found = 0, unknown = 0;
    for (struct dirent *e; (e = readdir(dir));) {
        size_t n = strlen(e->d_name);
        if (n < 12 || strcmp(e->d_name + n - 12, ".safetensors") != 0) continue;
        found++;
        int listed = 0;
        for (int i = 0; i < N_LOSS + N_SAMPLING; i++) {
            const char *name = i < N_LOSS ? LOSS_GOLDENS[i] : SAMPLING_GOLDENS[i - N_LOSS];
            listed |= strlen(name) == n - 12 && strncmp(name, e->d_name, n - 12) == 0;
        }
        if (!listed) print_message("  golden/" CHAPTER "/%s is tested by nothing\n", e->d_name);
        unknown += !listed;
    }
    closedir(dir);
    print_message("  %d goldens in golden/" CHAPTER ", %d listed\n", found, N_LOSS + N_SAMPLING);
    assert_int_equal(unknown, 0);
    assert_int_equal(found, N_LOSS + N_SAMPLING);
}

/* ------------------------------------------------------------------------ */
/* The loss: by hand, windows, gradient, errors                              */
/* ------------------------------------------------------------------------ */

/* The README's example: ids [0, 2, 1], the logits the logs of (0.2, 0.3,
 * 0.5) and (0.5, 0.25, 0.25). The targets 2 and 1 get 0.5 and 0.25: 1 bit
 * and 2 bits, a mean of 1.5 bits = 1.5 ln 2 nats; the gradient is
 * (p - onehot) / 2. */
static void test_loss_example_by_hand(void **state)
{
    const double p[2][3] = {{0.2, 0.3, 0.5}, {0.5, 0.25, 0.25}};
    float logits[6];
    for (int i = 0; i < 6; i++) logits[i] = (float)log(p[i / 3][i % 3]);
    const int64_t ids[3] = {0, 2, 1};
    float dlogits[6];
    double loss;
    Error err;
    assert_ok(next_token_loss(&loss, dlogits, logits, ids, 1, 2, 3, &err));
    print_message("  loss %.9f nats, %.9f bits a token (1.5 expected)\n", loss, loss / log(2.0));
    assert_true(fabs(loss / log(2.0) - 1.5) < 1e-6);   /* the logits are float32 logs */
    const float want[6] = {0.1f, 0.15f, -0.25f, 0.25f, -0.375f, 0.125f};
    assert_close("dlogits = (p - onehot) / 2", dlogits, want, 6, 1e-7, 1e-6);
}

/* The bits-per-byte evaluation scores a long text window by window (N = 1,
 * pointers into the text): the loss of the whole, times its T, is the sum of
 * each window's loss times its length. */
static void test_loss_of_windows_adds_up(void **state)
{
    TensorFile f;
    load_golden(&f, CHAPTER, "next_token_loss_N1_T12_V7");
    const float *logits = golden_f32(&f, "logits");
    const int64_t *ids = golden_tensor(&f, "ids", DTYPE_I64)->data;
    enum { T = 12, V = 7 };
    double whole, part, sum = 0;
    Error err;
    assert_ok(next_token_loss(&whole, NULL, logits, ids, 1, T, V, &err));
    const int starts[] = {0, 1, 4, 9, T};   /* windows of 1, 3, 5 and 3 positions */
    for (int w = 0; w + 1 < (int)(sizeof starts / sizeof *starts); w++) {
        int t0 = starts[w], len = starts[w + 1] - starts[w];
        assert_ok(next_token_loss(&part, NULL, logits + (size_t)t0 * V, ids + t0, 1, len, V,
                                  &err));
        sum += part * len;
    }
    print_message("  whole: %.15f nats x 12; windows: %.15f\n", whole * T, sum);
    assert_true(fabs(whole * T - sum) <= 1e-12 * fabs(sum));
    tensorfile_free(&f);
}

/* The loss is summed in double: on 128 positions of 256 classes it agrees
 * with PyTorch's float64 to 1e-10 relative (float32 sums would be off by
 * about 1e-7), more than the case's float32 tolerance asks. */
static void test_loss_is_summed_in_double(void **state)
{
    TensorFile f;
    load_golden(&f, CHAPTER, "next_token_loss_N4_T32_V256");
    const Tensor *logits = golden_tensor(&f, "logits", DTYPE_F32);
    double loss;
    Error err;
    assert_ok(next_token_loss(&loss, NULL, logits->data, golden_tensor(&f, "ids", DTYPE_I64)->data,
                              4, 32, 256, &err));
    assert_close_f64_to_golden(&f, "loss", &loss, 1, 0, 1e-10);
    tensorfile_free(&f);
}

/* Each position's gradient is (p - onehot) / (N T): its entries sum to 0,
 * the target's is the only negative one. */
static void test_loss_gradient_rows(void **state)
{
    TensorFile f;
    load_golden(&f, CHAPTER, "next_token_loss_N2_T8_V5");
    const float *logits = golden_f32(&f, "logits");
    const int64_t *ids = golden_tensor(&f, "ids", DTYPE_I64)->data;
    enum { N = 2, T = 8, V = 5 };
    float dlogits[N * T * V];
    double loss, worst = 0;
    Error err;
    assert_ok(next_token_loss(&loss, dlogits, logits, ids, N, T, V, &err));
    for (int n = 0; n < N; n++)
        for (int t = 0; t < T; t++) {
            const float *d = dlogits + (n * T + t) * V;
            double sum = 0;
            for (int j = 0; j < V; j++) {
                sum += d[j];
                assert_true(j == ids[n * (T + 1) + t + 1] ? d[j] < 0 : d[j] >= 0);
            }
            worst = fmax(worst, fabs(sum));
        }
    print_message("  worst |sum of a gradient row|: %.3g (the rows' scale 1/16)\n", worst);
    assert_true(worst < 1e-8);
    tensorfile_free(&f);
}

/* 1 and 2 threads give the same bits, loss and gradient. */
static void test_loss_thread_count_independent(void **state)
{
    TensorFile f;
    load_golden(&f, CHAPTER, "next_token_loss_N4_T32_V256");
    const float *logits = golden_f32(&f, "logits");
    const int64_t *ids = golden_tensor(&f, "ids", DTYPE_I64)->data;
    enum { N = 4, T = 32, V = 256 };
    double loss[2];
    float *d[2] = {test_floats(N * T * V), test_floats(N * T * V)};
    int saved = omp_get_max_threads();
    for (int k = 0; k < 2; k++) {
        Error err;
        omp_set_num_threads(k + 1);
        not_implemented_clear();
        int rc = next_token_loss(&loss[k], d[k], logits, ids, N, T, V, &err);
        omp_set_num_threads(saved);
        assert_ok_at(rc, "next_token_loss", __FILE__, __LINE__);
    }
    assert_memory_equal(&loss[0], &loss[1], sizeof loss[0]);
    assert_memory_equal(d[0], d[1], sizeof(float) * N * T * V);
    free(d[0]);
    free(d[1]);
    tensorfile_free(&f);
}

/* A target outside the vocabulary is refused with its sequence and
 * position, and nothing is written; ids[:, 0] is no target and is not read.
 * Sizes below 1 are refused. */
static void test_loss_refusals(void **state)
{
    const float logits[2 * 2 * 3] = {0};
    int64_t ids[2 * 3] = {0, 1, 2, 1, 0, 2};
    float dlogits[12];
    for (int i = 0; i < 12; i++) dlogits[i] = 7.0f;
    double loss = 7.0;
    Error err = {{0}};

    ids[5] = 3;   /* sequence 1, position 2: outside 0..2 */
    assert_int_equal(next_token_loss(&loss, dlogits, logits, ids, 2, 2, 3, &err), -1);
    print_message("  %s\n", err.msg);
    assert_non_null(strstr(err.msg, "sequence 1, position 2 holds id 3, outside the vocabulary 0..2"));
    ids[5] = 2;
    ids[1] = -1;
    assert_int_equal(next_token_loss(&loss, dlogits, logits, ids, 2, 2, 3, &err), -1);
    assert_non_null(strstr(err.msg, "sequence 0, position 1 holds id -1"));
    assert_true(loss == 7.0);
    for (int i = 0; i < 12; i++) assert_true(dlogits[i] == 7.0f);
    ids[1] = 1;
    assert_int_equal(next_token_loss(&loss, dlogits, logits, ids, 2, 0, 3, &err), -1);
    assert_non_null(strstr(err.msg, "must each be at least 1"));
    assert_int_equal(next_token_loss(&loss, dlogits, logits, ids, 2, 2, 0, &err), -1);

    ids[0] = ids[3] = 99;   /* not targets */
    assert_ok(next_token_loss(&loss, dlogits, logits, ids, 2, 2, 3, &err));
    assert_true(fabs(loss - log(3.0)) < 1e-12);   /* uniform logits: ln V */
}

/* ------------------------------------------------------------------------ */
/* Sampling: by hand, invariants, statistics, errors                         */
/* ------------------------------------------------------------------------ */

/* The README's example: ids 0..3 with probabilities (0.15, 0.5, 0.1, 0.25),
 * most probable first 1, 3, 0, 2. */
static void test_sampling_example_by_hand(void **state)
{
    const double p[4] = {0.15, 0.5, 0.1, 0.25};
    float logits[4], probs[4];
    int order[4];
    for (int v = 0; v < 4; v++) logits[v] = (float)log(p[v]);
    struct {
        Sampling s;
        float want[4];
        const char *what;
    } rows[] = {
        {{1, 0, 1}, {0.15f, 0.5f, 0.1f, 0.25f}, "temperature 1: p itself"},
        {{0.5f, 0, 1}, {0.0225f / 0.345f, 0.25f / 0.345f, 0.01f / 0.345f, 0.0625f / 0.345f},
         "temperature 0.5: p^2, renormalised"},
        {{0, 0, 1}, {0, 1, 0, 0}, "temperature 0: the argmax"},
        {{1, 2, 1}, {0, 2.0f / 3, 0, 1.0f / 3}, "top_k 2: ids 1 and 3"},
        {{1, 0, 0.7f}, {0, 2.0f / 3, 0, 1.0f / 3}, "top_p 0.7: 0.5 < 0.7, 0.75 >= 0.7"},
        {{1, 0, 0.8f}, {0.15f / 0.9f, 0.5f / 0.9f, 0, 0.25f / 0.9f}, "top_p 0.8: ids 1, 3, 0"},
        {{1, 3, 0.5f}, {0, 1, 0, 0}, "top_k 3, then top_p 0.5: id 1 alone"},
    };
    Error err;
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        assert_ok(sampling_probs(probs, order, logits, 4, &rows[i].s, &err));
        assert_close(rows[i].what, probs, rows[i].want, 4, 1e-7, 1e-6);
    }
    /* top_p 0.8's distribution drawn with u = 0.1, 0.5, 0.9: the cumulative
     * sums in id order are 0.167, 0.722, 0.722, 1; id 2 has no share. */
    Sampling s = {1, 0, 0.8f};
    assert_ok(sampling_probs(probs, order, logits, 4, &s, &err));
    assert_int_equal(sampling_pick(probs, 4, 0.1), 0);
    assert_int_equal(sampling_pick(probs, 4, 0.5), 1);
    assert_int_equal(sampling_pick(probs, 4, 0.72), 1);
    assert_int_equal(sampling_pick(probs, 4, 0.9), 3);
}

/* Random logits (ties among them) under many settings: every distribution
 * sums to 1, is never negative, and keeps at most top_k ids; what top_p
 * keeps is a run of the most probable; a kept id is never less probable
 * than a dropped one. */
static void test_sampling_probs_sum_to_one(void **state)
{
    enum { V = 50 };
    const float temperatures[] = {0, 0.3f, 1, 2.5f};
    const int top_ks[] = {0, 1, 7, 49, 50, 80};
    const float top_ps[] = {1, 0.9f, 0.5f, 0.05f};
    float logits[V], probs[V];
    int order[V];
    Rng rng;
    rng_seed(&rng, 12, 0);
    double worst = 0;
    int rows = 0;
    for (int rep = 0; rep < 4; rep++) {
        for (int v = 0; v < V; v++)
            logits[v] = rep % 2 ? (float)rng_below(&rng, 5) : 3 * rng_normal(&rng);
        for (int a = 0; a < 4; a++)
            for (int b = 0; b < 6; b++)
                for (int c = 0; c < 4; c++) {
                    Sampling s = {temperatures[a], top_ks[b], top_ps[c]};
                    Error err;
                    assert_ok(sampling_probs(probs, order, logits, V, &s, &err));
                    double sum = 0, least_kept = INFINITY;
                    int kept = 0;
                    for (int v = 0; v < V; v++) {
                        assert_true(probs[v] >= 0);
                        sum += probs[v];
                        kept += probs[v] > 0;
                        if (probs[v] > 0) least_kept = fmin(least_kept, logits[v]);
                    }
                    for (int v = 0; v < V; v++)   /* a dropped id ranks below every kept one */
                        if (probs[v] == 0 && s.temperature > 0) assert_true(logits[v] <= least_kept);
                    if (s.top_k > 0) assert_true(kept <= s.top_k);
                    worst = fmax(worst, fabs(sum - 1));
                    rows++;
                }
    }
    print_message("  %d distributions, worst |sum - 1| %.3g\n", rows, worst);
    assert_true(worst < 1e-6);
}

/* top_k 1 is greedy decoding whatever the temperature: the one-hot of the
 * first maximum, as temperature 0 gives it, ties included. */
static void test_top_k_1_is_greedy(void **state)
{
    enum { V = 12 };
    float logits[V], greedy[V], probs[V];
    int order[V];
    Rng rng;
    rng_seed(&rng, 3, 1);
    Error err;
    for (int rep = 0; rep < 20; rep++) {
        for (int v = 0; v < V; v++)
            logits[v] = rep % 2 ? (float)rng_below(&rng, 3) : rng_normal(&rng);
        assert_ok(sampling_probs(greedy, order, logits, V, &(Sampling){0, 0, 1}, &err));
        for (int t = 0; t < 3; t++) {
            Sampling s = {(float[]){0.5f, 1, 4}[t], 1, (float[]){1, 0.3f, 0.99f}[t]};
            assert_ok(sampling_probs(probs, order, logits, V, &s, &err));
            assert_memory_equal(probs, greedy, sizeof probs);
        }
    }
    /* The first maximum: ids 2, 4 and 5 tie. */
    const float tied[6] = {0, 1, 3, -2, 3, 3};
    assert_ok(sampling_probs(probs, order, tied, 6, &(Sampling){1, 1, 1}, &err));
    assert_close("top_k 1 on a tie: the lower id", probs, (float[]){0, 0, 1, 0, 0, 0}, 6, 0, 0);
}

/* The draw: u just below 1 takes the last id with a share, u = 0 the first
 * one; an id without probability is never drawn, and nothing is drawn from
 * all zeros. */
static void test_pick_ends(void **state)
{
    const float probs[6] = {0, 0.25f, 0, 0.5f, 0.25f, 0};
    double below_one = nextafter(1.0, 0.0);
    assert_int_equal(sampling_pick(probs, 6, below_one), 4);
    assert_int_equal(sampling_pick(probs, 6, 0.0), 1);
    assert_int_equal(sampling_pick(probs, 6, 0.25), 3);    /* the sum must exceed u */
    assert_int_equal(sampling_pick(probs, 6, 0.2499), 1);
    assert_int_equal(sampling_pick(probs, 6, 0.75), 4);
    /* Sums that rounding leaves below 1: u above them takes the last kept id. */
    const float short_sum[3] = {0.3f, 0.3f, 0.3f};
    assert_int_equal(sampling_pick(short_sum, 3, 0.95), 2);
    const float zeros[3] = {0, 0, 0};
    assert_int_equal(sampling_pick(zeros, 3, 0.5), -1);

    /* After filtering, u just below 1 takes the last kept id in id order. */
    const float logits[5] = {2, 0, 3, 1, -1};
    float p[5];
    int order[5];
    Error err;
    assert_ok(sampling_probs(p, order, logits, 5, &(Sampling){1, 3, 1}, &err));   /* ids 0, 2, 3 */
    assert_int_equal(sampling_pick(p, 5, below_one), 3);
}

/* Draws with u from the project's RNG follow the distribution: 200,000 draws
 * from a top-k, top-p filtered distribution, each id's count within 5
 * standard deviations of its expected count, and none of a dropped id. */
static void test_pick_frequencies(void **state)
{
    enum { V = 8, DRAWS = 200000 };
    const float logits[V] = {1.5f, 0.2f, -1, 2.5f, 0.9f, 0.9f, -3, 0};
    float probs[V];
    int order[V], counts[V] = {0};
    Error err;
    assert_ok(sampling_probs(probs, order, logits, V, &(Sampling){0.8f, 6, 0.95f}, &err));
    Rng rng;
    rng_seed(&rng, 2024, 0);
    for (int i = 0; i < DRAWS; i++) {
        int id = sampling_pick(probs, V, rng_uniform(&rng));
        assert_true(id >= 0 && id < V);
        counts[id]++;
    }
    double worst = 0;
    for (int v = 0; v < V; v++) {
        double want = (double)DRAWS * probs[v], sd = sqrt(want * (1 - probs[v]));
        print_message("  id %d: p %.4f, drawn %6d times (expected %.0f)\n", v, probs[v],
                      counts[v], want);
        if (probs[v] == 0) assert_int_equal(counts[v], 0);
        else worst = fmax(worst, fabs(counts[v] - want) / sd);
    }
    print_message("  worst deviation: %.2f standard deviations\n", worst);
    assert_true(worst < 5);
}

/* Bad settings and logits are refused with one line naming them, and probs
 * is left alone. */
static void test_sampling_refusals(void **state)
{
    const float logits[4] = {1, 2, 3, 4};
    float probs[4] = {7, 7, 7, 7};
    int order[4];
    struct {
        Sampling s;
        const char *expect;
    } bad[] = {
        {{-1, 0, 1}, "temperature is -1"},
        {{NAN, 0, 1}, "temperature is nan"},
        {{INFINITY, 0, 1}, "temperature is inf"},
        {{1, -2, 1}, "top_k is -2"},
        {{1, 0, 0}, "top_p is 0"},
        {{1, 0, 1.5f}, "top_p is 1.5"},
        {{1, 0, NAN}, "top_p is nan"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        Error err = {{0}};
        assert_int_equal(sampling_check(&bad[i].s, &err), -1);
        err.msg[0] = '\0';
        assert_int_equal(sampling_probs(probs, order, logits, 4, &bad[i].s, &err), -1);
        print_message("  %s\n", err.msg);
        assert_non_null(strstr(err.msg, bad[i].expect));
        assert_null(strchr(err.msg, '\n'));
    }
    const float nan_logit[3] = {0, NAN, 1}, inf_logit[3] = {0, INFINITY, 1};
    const float all_banned[3] = {-INFINITY, -INFINITY, -INFINITY};
    Sampling ok = {1, 0, 1};
    Error err;
    assert_int_equal(sampling_probs(probs, order, nan_logit, 3, &ok, &err), -1);
    assert_non_null(strstr(err.msg, "logit 1 is nan"));
    assert_int_equal(sampling_probs(probs, order, inf_logit, 3, &ok, &err), -1);
    assert_non_null(strstr(err.msg, "logit 1 is inf"));
    assert_int_equal(sampling_probs(probs, order, all_banned, 3, &ok, &err), -1);
    assert_non_null(strstr(err.msg, "all 3 logits are -inf"));
    assert_int_equal(sampling_probs(probs, order, logits, 0, &ok, &err), -1);
    for (int v = 0; v < 4; v++) assert_true(probs[v] == 7);
    assert_ok(sampling_check(&(Sampling){0, 0, 1}, &err));
    assert_ok(sampling_check(&(Sampling){1e-30f, 1000000, 1e-30f}, &err));
}

/* ------------------------------------------------------------------------ */
/* Case files: bad input                                                     */
/* ------------------------------------------------------------------------ */

static const BrokenCase BAD[] = {
    {"bad_missing_op", "next_token_loss_N2_T8_V5", BREAK_SET_META, "op", "", {0}, 0,
     "metadata 'op' is missing"},
    {"bad_unknown_op", "next_token_loss_N2_T8_V5", BREAK_SET_META, "op", "beam", {0}, 0,
     "op 'beam' is not a chapter 12 op (next_token_loss, sampling)"},
    {"bad_loss_missing_logits", "next_token_loss_N2_T8_V5", BREAK_DROP, "logits", NULL, {0}, 0,
     "tensor 'logits' is missing"},
    {"bad_loss_logits_dtype", "next_token_loss_N2_T8_V5", BREAK_RETYPE_I64, "logits", NULL, {0},
     0, "'logits' has dtype I64, expected F32"},
    {"bad_loss_logits_rank", "next_token_loss_N2_T8_V5", BREAK_RESHAPE, "logits", NULL, {16, 5},
     2, "tensor 'logits' has rank 2, expected 3"},
    {"bad_loss_empty_vocabulary", "next_token_loss_N2_T8_V5", BREAK_RESHAPE, "logits", NULL,
     {2, 8, 0}, 3, "every dimension must be between 1"},
    {"bad_loss_ids_shape", "next_token_loss_N2_T8_V5", BREAK_RESHAPE_I64, "ids", NULL, {2, 8}, 2,
     "'ids' has shape (2, 8), expected (N, T+1) = (2, 9)"},
    {"bad_loss_ids_dtype", "next_token_loss_N2_T8_V5", BREAK_RETYPE_F32, "ids", NULL, {0}, 0,
     "'ids' has dtype F32, expected I64"},
    {"bad_loss_target_range", "next_token_loss_N2_T8_V5", BREAK_RESHAPE_I64, "ids", "5", {2, 9},
     2, "tensor 'ids': sequence 0, position 1 holds id 5, outside the vocabulary 0..4"},
    {"bad_loss_option", "next_token_loss_N2_T8_V5", BREAK_SET_META, "ignore_index", "-100", {0},
     0, "metadata 'ignore_index' is not an option of op 'next_token_loss' (its options: none)"},
    {"bad_sampling_missing_u", "sampling_topk5_V10", BREAK_DROP, "u", NULL, {0}, 0,
     "tensor 'u' is missing"},
    {"bad_sampling_u_dtype", "sampling_topk5_V10", BREAK_RETYPE_F32, "u", NULL, {0}, 0,
     "'u' has dtype F32, expected F64"},
    {"bad_sampling_logits_rank", "sampling_topk5_V10", BREAK_RESHAPE, "logits", NULL, {2, 4, 10},
     3, "tensor 'logits' has rank 3, expected 2"},
    {"bad_sampling_nan_logit", "sampling_topk5_V10", BREAK_POKE_F32, "logits", "nan", {0}, 0,
     "tensor 'logits': row 0, id 0 is nan"},
    {"bad_sampling_inf_logit", "sampling_topk5_V10", BREAK_POKE_F32, "logits", "inf", {0}, 0,
     "tensor 'logits': row 0, id 0 is inf"},
    {"bad_sampling_all_banned", "sampling_topk5_V10", BREAK_RESHAPE, "logits", "-inf", {8, 10}, 2,
     "every logit of row 0 is -inf"},
    {"bad_sampling_temperature", "sampling_topk5_V10", BREAK_SET_META, "temperature", "-0.5",
     {0}, 0, "metadata temperature is -0.5, outside [0, 3.4e38]"},
    {"bad_sampling_temperature_nan", "sampling_topk5_V10", BREAK_SET_META, "temperature", "nan",
     {0}, 0, "metadata temperature is nan, expected a number"},
    {"bad_sampling_temperature_inf", "sampling_topk5_V10", BREAK_SET_META, "temperature", "inf",
     {0}, 0, "metadata temperature is inf, outside"},
    {"bad_sampling_top_k", "sampling_topk5_V10", BREAK_SET_META, "top_k", "-1", {0}, 0,
     "metadata top_k is -1, outside [0, 2147483647]"},
    {"bad_sampling_top_k_text", "sampling_topk5_V10", BREAK_SET_META, "top_k", "five", {0}, 0,
     "metadata top_k is five, expected an integer"},
    {"bad_sampling_top_p_zero", "sampling_topk5_V10", BREAK_SET_META, "top_p", "0", {0}, 0,
     "metadata top_p is 0, outside (0, 1]"},
    {"bad_sampling_top_p_above_one", "sampling_topk5_V10", BREAK_SET_META, "top_p", "1.5", {0}, 0,
     "metadata top_p is 1.5, outside (0, 1]"},
    {"bad_sampling_option", "sampling_topk5_V10", BREAK_SET_META, "top_a", "0.1", {0}, 0,
     "metadata 'top_a' is not an option of op 'sampling' (its options: temperature top_k "
     "top_p)"},
};

static void test_bad_case(void **state)
{
    const BrokenCase *bad = *state;
    TensorFile f;
    broken_case_make(&f, CHAPTER, bad);
    assert_case_refused(generation_case_eval, &f, bad->expect);
    tensorfile_free(&f);
}

/* u outside [0, 1) (a draw of 1 would fall past every id), and its shape. */
static void test_bad_u(void **state)
{
    const double values[] = {1.0, -0.25, NAN};
    const char *expect[] = {"tensor 'u': row 3 holds 1, outside [0, 1)",
                            "tensor 'u': row 3 holds -0.25, outside [0, 1)",
                            "tensor 'u': row 3 holds nan, outside [0, 1)"};
    for (int i = 0; i < 3; i++) {
        TensorFile f;
        BrokenCase copy = {"u", "sampling_topk5_V10", BREAK_SET_META, "info.note", "x", {0}, 0,
                           ""};
        broken_case_make(&f, CHAPTER, &copy);
        ((double *)tensorfile_find(&f, "u")->data)[3] = values[i];
        assert_case_refused(generation_case_eval, &f, expect[i]);
        tensorfile_free(&f);
    }
    TensorFile f;
    BrokenCase wrong = {"u", "sampling_topk5_V10", BREAK_SET_META, "info.note", "x", {0}, 0, ""};
    broken_case_make(&f, CHAPTER, &wrong);
    Tensor *u = (Tensor *)tensorfile_find(&f, "u");
    u->shape[0] = 7;   /* a shorter view of the same data */
    assert_case_refused(generation_case_eval, &f, "'u' has shape (7), expected (R,) = (8)");
    tensorfile_free(&f);
}

/* Through run_case_file, as the chapter program runs it: exit status 1 and
 * no output file. */
static void test_bad_case_writes_no_file(void **state)
{
    assert_broken_case_writes_no_file(CHAPTER, &BAD[8], generation_case_eval);   /* a target */
    assert_broken_case_writes_no_file(CHAPTER, &BAD[13], generation_case_eval);  /* a NaN logit */
}


/* ------------------------------------------------------------------------ */
/* The task: streams, windows, bits per byte, writing                        */
/* ------------------------------------------------------------------------ */

/* A small byte-level language model, pre-norm with a final norm. */
static void small_lm(Model *m, int max_len, uint64_t seed)
{
    ModelConfig c = {.kind = MODEL_LM, .src_vocab = LM_VOCAB, .tgt_vocab = LM_VOCAB,
                     .d_model = 16, .nhead = 2, .dim_feedforward = 24, .num_encoder_layers = 2,
                     .max_len = max_len, .learned_pos = 1, .final_norm = 1, .norm_first = 1,
                     .pad_id = -1, .eps = 1e-5f};
    Rng rng;
    Error err;
    rng_seed(&rng, seed, 0);
    assert_ok(model_init(m, &c, &rng, &err));
}

static Text random_stream(int len, uint64_t seed)
{
    Text t = {0};
    Error err;
    Rng rng;
    rng_seed(&rng, seed, 1);
    char byte = '\n';
    assert_ok(text_append(&t, &byte, 1, &err));
    for (int i = 1; i < len; i++) {
        byte = (char)(' ' + rng_below(&rng, 90));
        assert_ok(text_append(&t, &byte, 1, &err));
    }
    return t;
}

/* Windows of S + 1 bytes at 0, S, 2S, ...: the target is the input shifted
 * by one, and a stream of L + 1 bytes holds L / S of them. */
static void test_lm_windows(void **state)
{
    Text t = random_stream(42, 3);
    LmWindows ws;
    Examples ex = lm_examples(&ws, &t, 8);
    assert_int_equal(ex.n, 41 / 8);
    assert_int_equal(ex.src_vocab, LM_VOCAB);
    int64_t idx[2] = {4, 0}, src[16], tgt[16];
    Error err;
    assert_ok(ex.fill(ex.data, idx, 2, src, NULL, tgt, &err));
    for (int j = 0; j < 8; j++) {
        assert_int_equal(src[j], (uint8_t)t.data[32 + j]);
        assert_int_equal(tgt[j], (uint8_t)t.data[33 + j]);
        assert_int_equal(src[8 + j], (uint8_t)t.data[j]);
        assert_int_equal(tgt[8 + j], (uint8_t)t.data[j + 1]);
    }
    text_free(&t);
}

/* A model whose context covers the whole stream predicts every byte from
 * all the bytes before it, whatever the stride: the bits are those of one
 * forward pass over the stream, computed here from its logits. */
static void test_lm_bits_whole_context(void **state)
{
    enum { L = 20 };
    Model m;
    ModelWork w;
    Error err;
    small_lm(&m, 32, 5);
    Text t = random_stream(L + 1, 6);
    int64_t ids[L];
    for (int i = 0; i < L; i++) ids[i] = (uint8_t)t.data[i];
    assert_ok(model_work_alloc(&w, &m, 1, L, 0, 0, &err));
    assert_int_equal(model_forward(&m, &w, ids, NULL, NULL), 0);
    double expect = 0.0;
    for (int i = 0; i < L; i++) {
        const float *row = w.logits + (size_t)i * LM_VOCAB;
        double mx = row[0], sum = 0.0;
        for (int v = 1; v < LM_VOCAB; v++) mx = row[v] > mx ? row[v] : mx;
        for (int v = 0; v < LM_VOCAB; v++) sum += exp(row[v] - mx);
        expect += (mx + log(sum) - row[(uint8_t)t.data[i + 1]]) / log(2.0);
    }
    const int strides[] = {1, 3, L};
    for (int k = 0; k < 3; k++) {
        double bits;
        int64_t bytes;
        assert_ok(lm_bits(&m, &t, strides[k], 4, &bits, &bytes, &err));
        print_message("  stride %2d: %.6f bits, one forward pass: %.6f\n", strides[k], bits,
                      expect);
        assert_int_equal(bytes, L);
        assert_true(fabs(bits - expect) <= 1e-5 * expect);
    }
    model_work_free(&w);
    model_free(&m);
    text_free(&t);
}

/* A model that ignores its input (every weight 0 but the generator's bias)
 * gives every byte the same distribution: its bits count each predicted
 * byte exactly once, whatever the windows, so a byte counted twice or
 * skipped changes the total. */
static void test_lm_bits_counts_each_byte_once(void **state)
{
    Model m;
    Error err;
    small_lm(&m, 8, 7);
    memset(m.params, 0, m.num_params * sizeof *m.params);
    Rng rng;
    rng_seed(&rng, 8, 0);
    for (int v = 0; v < LM_VOCAB; v++) m.views.generator_bias[v] = rng_normal(&rng);
    double mx = m.views.generator_bias[0], sum = 0.0;
    for (int v = 1; v < LM_VOCAB; v++)       /* not fmax: gcc 12 for aarch64 (test_04) */
        if (m.views.generator_bias[v] > mx) mx = m.views.generator_bias[v];
    for (int v = 0; v < LM_VOCAB; v++) sum += exp(m.views.generator_bias[v] - mx);
    const int lengths[] = {5, 8, 9, 30, 61};
    const int strides[] = {1, 3, 4, 8};
    for (int i = 0; i < 5; i++) {
        Text t = random_stream(lengths[i] + 1, 10 + i);
        double expect = 0.0;
        for (int j = 1; j <= lengths[i]; j++)
            expect += (mx + log(sum) - m.views.generator_bias[(uint8_t)t.data[j]]) / log(2.0);
        for (int k = 0; k < 4; k++) {
            double bits;
            int64_t bytes;
            int S = lengths[i] < 8 ? lengths[i] : 8;
            if (strides[k] > S) continue;
            assert_ok(lm_bits(&m, &t, strides[k], 3, &bits, &bytes, &err));
            assert_int_equal(bytes, lengths[i]);
            assert_true(fabs(bits - expect) <= 1e-5 * expect);
        }
        text_free(&t);
    }
    double bits;
    int64_t bytes;
    Text t = random_stream(30, 1);
    assert_int_equal(lm_bits(&m, &t, 9, 3, &bits, &bytes, &err), -1);   /* above S */
    print_message("  %s\n", err.msg);
    assert_non_null(strstr(err.msg, "--stride 9"));
    text_free(&t);
    model_free(&m);
}

/* The key/value cache writes the bytes that running the whole context
 * writes, also past max_len (where the context is cut to its second half);
 * temperature 0 writes the same bytes for any seed. */
static void test_generate_cache_and_no_cache(void **state)
{
    Model m;
    Error err;
    small_lm(&m, 16, 9);
    const struct { Sampling s; int length; uint64_t seed; } runs[] = {
        {{1.0f, 0, 1.0f}, 40, 1}, {{0.7f, 20, 0.9f}, 12, 2}, {{0.0f, 0, 1.0f}, 37, 3}};
    for (int i = 0; i < 3; i++) {
        Text out[2] = {{0}, {0}};
        for (int no_cache = 0; no_cache < 2; no_cache++) {
            GenerateOptions g = {runs[i].s, runs[i].length, runs[i].seed, no_cache, NULL, NULL};
            assert_ok(lm_generate(&m, "A film", &g, &out[no_cache], &err));
            assert_int_equal(out[no_cache].len, runs[i].length);
        }
        assert_memory_equal(out[0].data, out[1].data, out[0].len);
        text_free(&out[0]), text_free(&out[1]);
    }
    Text a = {0}, b = {0};
    GenerateOptions g = {{0.0f, 0, 1.0f}, 20, 1, 0, NULL, NULL};
    assert_ok(lm_generate(&m, "", &g, &a, &err));
    g.seed = 99;
    assert_ok(lm_generate(&m, "", &g, &b, &err));
    assert_memory_equal(a.data, b.data, 20);
    g.length = 0;
    assert_int_equal(lm_generate(&m, "x", &g, &a, &err), -1);
    print_message("  %s\n", err.msg);
    g.length = 5, g.sampling.top_p = 0.0f;
    assert_int_equal(lm_generate(&m, "x", &g, &a, &err), -1);
    print_message("  %s\n", err.msg);
    text_free(&a), text_free(&b);
    model_free(&m);
}

/* The streams of the IMDb split: 19,000 training and 1,000 validation
 * reviews, 5,000 test reviews whose stream predicts the 6,488,202 bytes the
 * compressors read (reference/ch12_generation.py compressors). Needs
 * .data/imdb (make imdb). */
static void test_lm_text_split(void **state)
{
    if (access(".data/imdb/imdb.tsv", R_OK) != 0) {
        print_message("  .data/imdb/imdb.tsv is missing (make imdb fetches it): skipped\n");
        skip();
    }
    LmText t;
    Error err;
    assert_ok(lm_text_read(&t, ".data/imdb", 0, 0, &err));
    print_message("  train %lld reviews (%zu bytes), validation %lld (%zu), test %lld (%zu)\n",
                  (long long)t.n_train, t.train.len, (long long)t.n_val, t.val.len,
                  (long long)t.n_test, t.test.len);
    assert_int_equal(t.n_train, 19000);
    assert_int_equal(t.n_val, 1000);
    assert_int_equal(t.n_test, 5000);
    assert_int_equal(t.test.len, 6488202 + 1);
    assert_int_equal(t.test.data[0], '\n');
    assert_null(strstr((const char *)t.test.data, "<br />"));
    lm_text_free(&t);
    assert_ok(lm_text_read(&t, ".data/imdb", -1, 10, &err));
    assert_int_equal(t.n_train + t.n_val, 0);
    assert_int_equal(t.n_test, 10);
    lm_text_free(&t);
}

/* A stand-in for .data/imdb/imdb.tsv: the 25,000 lines the reader wants,
 * each a short review, so a run trains in a moment. */
static void write_tiny_imdb(const char *dir)
{
    char path[256];
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/imdb.tsv", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    for (int i = 0; i < 25000; i++)
        fprintf(f, "%d\t%s film number %d, %s.\n", i % 2, i % 2 ? "A fine" : "A dull", i,
                i % 2 ? "well acted" : "badly written");
    assert_int_equal(fclose(f), 0);
}

/* The measure after training (lm_bits) refuses a stride longer than the
 * context or than the test text: a training run is refused so before its
 * first step, in one line naming the options, and writes nothing (it
 * trained to the end, wrote the model and the log, then exited 1). */
static void test_train_checks_the_stride_first(void **state)
{
    (void)state;
    char out[8192], cmd[1024];
    const char *outputs[] = {"build/lm_stride.safetensors", "build/lm_stride_ckpt.safetensors",
                             "build/lm_stride_log.csv"};
    write_tiny_imdb("build/lm_tiny");
    for (int i = 0; i < 3; i++) unlink(outputs[i]);
    const char *run = "build/12_generation --train --data build/lm_tiny --train-reviews 40 "
                      "--epochs 1 --batch-size 4 --d-model 16 --heads 2 --layers 1 --ffn 32 "
                      "--out build/lm_stride.safetensors --checkpoint "
                      "build/lm_stride_ckpt.safetensors --log build/lm_stride_log.csv";
    snprintf(cmd, sizeof cmd, "%s --test-reviews 50 --stride 1000 --context 32", run);
    assert_int_equal(run_command(cmd, out, sizeof out), 1);
    assert_non_null(strstr(out, "--stride 1000 is longer than --context 32"));
    for (int i = 0; i < 3; i++) assert_int_equal(access(outputs[i], F_OK), -1);
    /* one test review of about 40 bytes, and half a context of 128 */
    snprintf(cmd, sizeof cmd, "%s --test-reviews 1 --context 128", run);
    assert_int_equal(run_command(cmd, out, sizeof out), 1);
    assert_non_null(strstr(out, "fewer than the stride of 64 (--stride, --context, --test-reviews)"));
    for (int i = 0; i < 3; i++) assert_int_equal(access(outputs[i], F_OK), -1);
    /* the same run with a stride that fits trains and reports */
    snprintf(cmd, sizeof cmd, "%s --test-reviews 1 --context 32 --stride 32", run);
    assert_int_equal(run_command(cmd, out, sizeof out), 0);
    assert_non_null(strstr(out, "bits per byte"));
    for (int i = 0; i < 3; i++) assert_int_equal(access(outputs[i], F_OK), 0);
    for (int i = 0; i < 3; i++) unlink(outputs[i]);
    /* --no-test trains and saves, and measures nothing on the test reviews;
     * a bound on that measure is refused before any work */
    snprintf(cmd, sizeof cmd, "%s --test-reviews 1 --context 32 --stride 32 --no-test", run);
    assert_int_equal(run_command(cmd, out, sizeof out), 0);
    assert_null(strstr(out, "bits per byte"));
    for (int i = 0; i < 3; i++) assert_int_equal(access(outputs[i], F_OK), 0);
    for (int i = 0; i < 3; i++) unlink(outputs[i]);
    snprintf(cmd, sizeof cmd, "%s --context 32 --no-test --max-bpb 2", run);
    assert_int_equal(run_command(cmd, out, sizeof out), 1);
    assert_non_null(strstr(out, "--max-bpb bounds the test bits per byte, which --no-test"));
    for (int i = 0; i < 3; i++) assert_int_equal(access(outputs[i], F_OK), -1);
    unlink("build/lm_tiny/imdb.tsv");
    rmdir("build/lm_tiny");
}

/* ------------------------------------------------------------------------ */
/* What --generate shows: on a terminal and elsewhere                        */
/* ------------------------------------------------------------------------ */

/* A prompt with ESC and BEL in it (a colour change and the bell), and the
 * shell's way to write it on a command line. */
#define RAW_PROMPT "A\x1b[31mB\x07"
#define SH_PROMPT "\"$(printf 'A\\033[31mB\\007')\""
#define GEN_MODEL "build/gen_tiny.safetensors"
/* Temperature 1e30 makes every byte as likely as any: control bytes among
 * them. */
#define GEN_RUN "build/12_generation --generate " GEN_MODEL " " SH_PROMPT \
                " --temperature 1e30 --length 300 --seed 5"

/* The small model, saved where the program reads it. */
static void save_gen_model(void)
{
    Model m;
    Error err;
    small_lm(&m, 16, 9);
    assert_ok(model_save(&m, GEN_MODEL, &err));
    model_free(&m);
}

/* What GEN_RUN writes on standard output: the prompt, the model's 300
 * bytes (lm_generate here, from the same file and seed), a newline. */
static Text gen_run_bytes(void)
{
    Model m;
    Error err;
    Text t = {0};
    assert_ok(model_load(&m, GEN_MODEL, &err));
    GenerateOptions g = {{1e30f, 0, 1.0f}, 300, 5, 0, NULL, NULL};
    assert_ok(text_append(&t, RAW_PROMPT, strlen(RAW_PROMPT), &err));
    assert_ok(lm_generate(&m, RAW_PROMPT, &g, &t, &err));
    assert_ok(text_append(&t, "\n", 1, &err));
    model_free(&m);
    return t;
}

/* Fails unless the file at path holds exactly the bytes of want. */
static void assert_file_bytes(const char *path, const Text *want)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    uint8_t *got = malloc(want->len + 1);
    assert_non_null(got);
    size_t n = fread(got, 1, want->len + 1, f);
    fclose(f);
    print_message("  %s: %zu bytes, expected %zu\n", path, n, want->len);
    assert_int_equal(n, want->len);
    assert_memory_equal(got, want->data, n);
    free(got);
}

/* run_command for a command whose output holds random bytes: the output
 * (stdout and stderr) into out, NUL-ended, and printed with every byte
 * that is not ASCII as '?' and a control byte as '^' (the test's log stays
 * plain text); returns the exit status. */
static int run_random_output(const char *cmd, char *out, size_t size)
{
    char line[1024];
    snprintf(line, sizeof line, "%s >build/gen_cmd.out 2>&1", cmd);
    int status = system(line);
    FILE *f = fopen("build/gen_cmd.out", "rb");
    size_t n = f ? fread(out, 1, size - 1, f) : 0;
    out[n] = '\0';
    if (f) fclose(f);
    unlink("build/gen_cmd.out");
    print_message("  $ %s\n  | ", cmd);
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)out[i];
        print_message("%c", c == '\n' ? '\n' : c >= 0x80 ? '?' : c < 0x20 || c == 0x7f ? '^' : c);
        if (c == '\n' && i + 1 < n) print_message("  | ");
    }
    print_message("\n");
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Written to a pipe, the prompt and the generated bytes go out unchanged,
 * control bytes and all (they are the data), and nothing goes to stderr:
 * off a terminal there is no progress line. */
static void test_generate_into_a_pipe(void **state)
{
    (void)state;
    char out[4096];
    save_gen_model();
    Text want = gen_run_bytes();
    int controls = 0;
    for (size_t i = strlen(RAW_PROMPT); i + 1 < want.len; i++)
        controls += (want.data[i] < 0x20 && want.data[i] != '\n' && want.data[i] != '\t') ||
                    want.data[i] == 0x7f;
    print_message("  %d control bytes among the 300 written\n", controls);
    assert_true(controls > 0);
    assert_int_equal(run_command("(" GEN_RUN " | cat >build/gen_pipe.bin)", out, sizeof out), 0);
    assert_string_equal(out, "");
    assert_file_bytes("build/gen_pipe.bin", &want);
    text_free(&want);
    unlink("build/gen_pipe.bin");
    unlink(GEN_MODEL);
}

/* On a terminal (util-linux's script runs the program on a pseudo-terminal;
 * skipped where there is none of it): a progress line on stderr, ended by
 * a newline before the text; the prompt and the text with what a terminal
 * would obey written as \xNN (issue 43: ESC and BEL went out raw, and a
 * long text showed nothing for minutes). With stdout in a file and stderr
 * on the terminal, the file gets the bytes unchanged and the terminal the
 * progress line alone. */
static void test_generate_on_a_terminal(void **state)
{
    (void)state;
    if (system("script --version 2>/dev/null | grep -q util-linux") != 0) {
        print_message("  no util-linux script to run the program on a terminal: skipped\n");
        skip();
    }
    static char out[32768];
    save_gen_model();
    Text want = gen_run_bytes();
    /* the first run: all of it on the terminal */
    FILE *f = fopen("build/gen_tty1.sh", "w");
    assert_non_null(f);
    fprintf(f, "%s\n", GEN_RUN);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(run_random_output("script -qec 'sh build/gen_tty1.sh' /dev/null </dev/null",
                                       out, sizeof out), 0);
    const char *line = strstr(out, "] 300/300 bytes  ");
    const char *text = strstr(out, "A\\x1b[31mB\\x07");
    assert_non_null(line);
    assert_non_null(strstr(line, " bytes/s  ETA "));
    assert_non_null(text);
    assert_true(text > line);
    assert_non_null(memchr(line, '\n', (size_t)(text - line)));
    for (const char *c = out; *c; c++)                  /* '\r': the line's, and the tty's */
        assert_false(((unsigned char)*c < 0x20 && !strchr("\n\t\r", *c)) || *c == 0x7f);
    /* the second: stdout into a file */
    f = fopen("build/gen_tty2.sh", "w");
    assert_non_null(f);
    fprintf(f, "%s >build/gen_tty.bin\n", GEN_RUN);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(run_random_output("script -qec 'sh build/gen_tty2.sh' /dev/null </dev/null",
                                       out, sizeof out), 0);
    assert_non_null(strstr(out, "] 300/300 bytes  "));
    assert_null(strstr(out, "[31mB"));                 /* the text is not on the terminal */
    assert_file_bytes("build/gen_tty.bin", &want);
    text_free(&want);
    unlink("build/gen_tty.bin");
    unlink("build/gen_tty1.sh");
    unlink("build/gen_tty2.sh");
    unlink(GEN_MODEL);
}

/* The escaping itself: control bytes but '\n' and '\t', DEL and the C1
 * controls of UTF-8 (0xc2 0x80..0x9f) as \xNN, everything else (UTF-8, a
 * backslash) as it is; terminal_write to a file (not a terminal) changes
 * nothing. */
static void test_terminal_escape(void **state)
{
    (void)state;
    static const char in[] = "a\x1b[1mb\x07\tc\nd\x7f\r\x08\\x\xc2\x9b" "2J\xc3\xa9\xc2\xa0"
                             "\0end\xc2";
    static const char want[] = "a\\x1b[1mb\\x07\tc\nd\\x7f\\x0d\\x08\\x\\xc2\\x9b2J"
                               "\xc3\xa9\xc2\xa0\\x00end\xc2";
    char got[256];
    for (int raw = 0; raw < 2; raw++) {
        FILE *f = tmpfile();
        assert_non_null(f);
        if (raw) terminal_write(f, in, sizeof in - 1);
        else terminal_escape(f, in, sizeof in - 1);
        rewind(f);
        size_t n = fread(got, 1, sizeof got, f);
        fclose(f);
        print_message("  %s: %zu bytes in, %zu out\n", raw ? "terminal_write to a file"
                      : "terminal_escape", sizeof in - 1, n);
        if (raw) {
            assert_int_equal(n, sizeof in - 1);
            assert_memory_equal(got, in, n);
        } else {
            assert_int_equal(n, sizeof want - 1);
            assert_memory_equal(got, want, n);
        }
    }
}

/* The count line off a terminal: nothing until the end, then one line with
 * the count, the rate and the time left (12_generation shows it only on a
 * terminal, where it is redrawn in place). */
static void test_progress_count_line(void **state)
{
    (void)state;
    FILE *f = tmpfile();
    assert_non_null(f);
    Progress p;
    progress_init_count(&p, f, 50, "bytes");
    for (int i = 1; i <= 49; i++) progress_count(&p, i);
    assert_int_equal(ftell(f), 0);
    progress_count(&p, 50);
    progress_finish(&p);
    rewind(f);
    char line[256];
    assert_non_null(fgets(line, sizeof line, f));
    print_message("  | %s", line);
    assert_non_null(strstr(line, "[####################] 50/50 bytes  "));
    assert_non_null(strstr(line, " bytes/s  ETA 0s\n"));
    assert_null(fgets(line, sizeof line, f));
    fclose(f);
}

/* ------------------------------------------------------------------------ */

int main(void)
{
    enum { N_BAD = sizeof BAD / sizeof *BAD, N_GOLDEN = N_LOSS + N_SAMPLING };
    static const struct CMUnitTest fixed[] = {
        cmocka_unit_test(test_goldens_all_listed),
        cmocka_unit_test(test_loss_example_by_hand),
        cmocka_unit_test(test_loss_of_windows_adds_up),
        cmocka_unit_test(test_loss_is_summed_in_double),
        cmocka_unit_test(test_loss_gradient_rows),
        cmocka_unit_test(test_loss_thread_count_independent),
        cmocka_unit_test(test_loss_refusals),
        cmocka_unit_test(test_sampling_example_by_hand),
        cmocka_unit_test(test_sampling_probs_sum_to_one),
        cmocka_unit_test(test_top_k_1_is_greedy),
        cmocka_unit_test(test_pick_ends),
        cmocka_unit_test(test_pick_frequencies),
        cmocka_unit_test(test_sampling_refusals),
        cmocka_unit_test(test_bad_u),
        cmocka_unit_test(test_bad_case_writes_no_file),
        cmocka_unit_test(test_lm_windows),
        cmocka_unit_test(test_lm_bits_whole_context),
        cmocka_unit_test(test_lm_bits_counts_each_byte_once),
        cmocka_unit_test(test_generate_cache_and_no_cache),
        cmocka_unit_test(test_lm_text_split),
        cmocka_unit_test(test_train_checks_the_stride_first),
        cmocka_unit_test(test_generate_into_a_pipe),
        cmocka_unit_test(test_generate_on_a_terminal),
        cmocka_unit_test(test_terminal_escape),
        cmocka_unit_test(test_progress_count_line),
    };
    enum { N_FIXED = sizeof fixed / sizeof *fixed };
    /* A test per golden through the functions, one through the evaluator
     * ("case_eval/<golden>"), the fixed ones, one per broken case. */
    static struct CMUnitTest tests[2 * N_GOLDEN + N_FIXED + N_BAD];
    static char eval_names[N_GOLDEN][96];
    size_t n = 0;
    for (int i = 0; i < N_GOLDEN; i++) {
        const char *name = i < N_LOSS ? LOSS_GOLDENS[i] : SAMPLING_GOLDENS[i - N_LOSS];
        tests[n++] = (struct CMUnitTest){name, i < N_LOSS ? test_loss_case : test_sampling_case,
                                         NULL, NULL, (void *)name};
    }
    for (int i = 0; i < N_GOLDEN; i++) {
        const char *name = i < N_LOSS ? LOSS_GOLDENS[i] : SAMPLING_GOLDENS[i - N_LOSS];
        snprintf(eval_names[i], sizeof eval_names[i], "case_eval/%s", name);
        tests[n++] = (struct CMUnitTest){eval_names[i], test_case_eval, NULL, NULL, (void *)name};
    }
    for (int i = 0; i < N_FIXED; i++) tests[n++] = fixed[i];
    for (int i = 0; i < N_BAD; i++)
        tests[n++] = (struct CMUnitTest){BAD[i].name, test_bad_case, NULL, NULL, (void *)&BAD[i]};
    return run_tests_selected("chapter 12: next-token loss, sampling, the language model", tests,
                              n);
}
