/*
 * test_08_training.c - chapter 08's training pieces: cross-entropy and its
 * gradient, Adam and AdamW, gradient clipping, the learning-rate schedules,
 * the synthetic tasks' data and the batcher, against goldens made by
 * reference/ch08_training.py; plus hand-checked values, thread-count
 * independence, the loss log and the progress line, and the checks of
 * training_case.c on broken cases.
 *
 * The golden tests call the library functions directly, with the signatures
 * of the chapter's headers; test_case_eval runs the same goldens through the
 * case evaluator of the chapter program.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include "threads.h"  /* OpenMP, or its one-thread stand-ins */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "casefile.h"
#include "checkpoint.h"
#include "data.h"
#include "helpers.h"
#include "loss.h"
#include "optim.h"
#include "rng.h"
#include "schedule.h"
#include "paths.h"
#include "progress.h"
#include "task.h"
#include "train_report.h"
#include "trainer.h"
#include "training_case.h"
#include "model_file.h"

#define CHAPTER "08_training"

/* ------------------------------------------------------------------------ */
/* Small helpers                                                             */
/* ------------------------------------------------------------------------ */

/* The loss of a cross-entropy case: the golden's, or NaN where the case's
 * metadata says loss = nan (every row ignored: torch's mean over no rows; a
 * stored NaN would not compare equal to itself in golden --check). */
static void assert_loss(const TensorFile *f, float loss, double atol, double rtol)
{
    const char *expected = tensorfile_meta(f, "info.loss");
    if (!expected) {
        assert_close_to_golden(f, "loss", &loss, 1, atol, rtol);
        return;
    }
    char stem[128];
    print_message("  %s/loss: %g, expected NaN (a mean over no rows)\n",
                  golden_case_name(f, stem, sizeof stem), loss);
    assert_string_equal(expected, "nan");
    assert_null(tensorfile_find(f, "loss"));
    assert_true(isnan(loss));
}

/* ------------------------------------------------------------------------ */
/* Golden cases                                                              */
/* ------------------------------------------------------------------------ */

static void test_cross_entropy_case(void **state)
{
    TensorFile f;
    load_golden(&f, CHAPTER, *state);
    double atol, rtol;
    golden_tolerance(&f, &atol, &rtol);
    const Tensor *logits = golden_tensor(&f, "logits", DTYPE_F32);
    const Tensor *target = golden_tensor(&f, "target", DTYPE_I64);
    int64_t R = logits->shape[0];
    int V = (int)logits->shape[1];
    long long ignore_index = golden_meta_long(&f, "ignore_index", CROSS_ENTROPY_IGNORE_INDEX);
    float smoothing = (float)golden_meta_double(&f, "label_smoothing", 0.0);
    int backward = golden_op_is(&f, "cross_entropy_backward");

    float loss = 0;
    float *dlogits = backward ? test_floats(R * V) : NULL;
    int64_t count = -1, correct = -1;
    Error err = {{0}};
    if (cross_entropy(&loss, dlogits, logits->data, target->data, R, V, ignore_index, smoothing,
                      &count, &correct, &err) != 0) {
        print_error("cross_entropy: %s\n", err.msg);
        fail();
    }
    assert_loss(&f, loss, atol, rtol);
    assert_i64_equal_to_golden(&f, "count", &count, 1);
    assert_i64_equal_to_golden(&f, "correct", &correct, 1);
    if (backward) assert_close_to_golden(&f, "grad_logits", dlogits, R * V, atol, rtol);
    free(dlogits);
    tensorfile_free(&f);
}

static void test_adam_case(void **state)
{
    TensorFile f;
    load_golden(&f, CHAPTER, *state);
    double atol, rtol;
    golden_tolerance(&f, &atol, &rtol);
    const Tensor *params = golden_tensor(&f, "params", DTYPE_F32);
    const Tensor *grads = golden_tensor(&f, "grads", DTYPE_F32);
    const float *lrs = tensorfile_find(&f, "lrs") ? golden_f32(&f, "lrs") : NULL;
    int64_t n = params->shape[0], K = grads->shape[0];
    AdamConfig c = adam_default_config(golden_meta_bool(&f, "decoupled", 0));
    c.lr = (float)golden_meta_double(&f, "lr", c.lr);
    c.beta1 = (float)golden_meta_double(&f, "beta1", c.beta1);
    c.beta2 = (float)golden_meta_double(&f, "beta2", c.beta2);
    c.eps = (float)golden_meta_double(&f, "eps", c.eps);
    c.weight_decay = (float)golden_meta_double(&f, "weight_decay", c.weight_decay);
    Error err;
    assert_ok(adam_config_check(&c, &err));

    OptimState s;
    assert_ok(adam_state_alloc(&s, (size_t)n, &err));
    float *p = test_floats(n);
    memcpy(p, params->data, (size_t)n * sizeof *p);
    for (int64_t k = 0; k < K; k++)
        assert_ok(adam_step(p, golden_f32(&f, "grads") + k * n, &s, &c, lrs ? lrs[k] : c.lr));
    assert_int_equal(s.step, K);
    assert_close_to_golden(&f, "params_after", p, n, atol, rtol);
    assert_close_to_golden(&f, "exp_avg", s.slots[ADAM_M], n, atol, rtol);
    assert_close_to_golden(&f, "exp_avg_sq", s.slots[ADAM_V], n, atol, rtol);
    optim_state_free(&s);
    free(p);
    tensorfile_free(&f);
}

static void test_clip_case(void **state)
{
    TensorFile f;
    load_golden(&f, CHAPTER, *state);
    double atol, rtol;
    golden_tolerance(&f, &atol, &rtol);
    const Tensor *grads = golden_tensor(&f, "grads", DTYPE_F32);
    int64_t n = grads->shape[0];
    float max_norm = (float)golden_meta_double(&f, "max_norm", -1);
    float *g = test_floats(n);
    memcpy(g, grads->data, (size_t)n * sizeof *g);
    float total = (float)clip_grad_norm(g, (size_t)n, max_norm);
    assert_close_to_golden(&f, "total_norm", &total, 1, atol, rtol);
    assert_close_to_golden(&f, "grads_clipped", g, n, atol, rtol);
    free(g);
    tensorfile_free(&f);
}

static void test_schedule_case(void **state)
{
    TensorFile f;
    load_golden(&f, CHAPTER, *state);
    double atol, rtol;
    golden_tolerance(&f, &atol, &rtol);
    const Tensor *steps = golden_tensor(&f, "steps", DTYPE_I64);
    int64_t n = steps->shape[0];
    const int64_t *s = steps->data;
    int noam = golden_op_is(&f, "lr_noam");
    long long warmup = golden_meta_long(&f, "warmup", -1);
    double *factor = calloc((size_t)n, sizeof *factor);
    assert_non_null(factor);
    for (int64_t i = 0; i < n; i++)
        factor[i] = noam ? lr_noam(s[i], (int)golden_meta_long(&f, "d_model", -1), warmup)
                         : lr_cosine_warmup(s[i], warmup, golden_meta_long(&f, "max_iters", -1));
    assert_close_f64_to_golden(&f, "factor", factor, n, atol, rtol);
    free(factor);
    tensorfile_free(&f);
}

/* The task's data drawn by seq_dataset_make equals the sequences drawn by
 * reference/rng.py. */
static void test_seq_dataset_case(void **state)
{
    TensorFile f;
    load_golden(&f, CHAPTER, *state);
    SeqTask task;
    Error err;
    assert_ok(seq_task_parse(tensorfile_meta(&f, "task"), &task, &err));
    Rng rng;
    rng_seed(&rng, golden_meta_int(&f, "rng_seed"), golden_meta_int(&f, "rng_stream"));
    SeqDataset ds;
    int64_t n = golden_meta_int(&f, "n");
    int S = (int)golden_meta_int(&f, "seq_len"), C = (int)golden_meta_int(&f, "num_categories");
    assert_ok(seq_dataset_make(&ds, task, n, S, C, &rng, &err));
    assert_i64_equal_to_golden(&f, "x", ds.x, n * S);
    assert_i64_equal_to_golden(&f, "y", ds.y, n * S);
    seq_dataset_free(&ds);
    tensorfile_free(&f);
}

/* batcher_shuffle, once per epoch on one Rng, gives the Python twin's orders. */
static void test_batcher_case(void **state)
{
    TensorFile f;
    load_golden(&f, CHAPTER, *state);
    int64_t n = golden_meta_int(&f, "n"), epochs = golden_meta_int(&f, "epochs");
    Rng rng;
    rng_seed(&rng, golden_meta_int(&f, "rng_seed"), golden_meta_int(&f, "rng_stream"));
    Batcher b;
    Error err;
    assert_ok(batcher_init(&b, n, 4, 0, &err));
    int64_t *order = calloc((size_t)(n * epochs), sizeof *order);
    assert_non_null(order);
    for (int64_t e = 0; e < epochs; e++) {
        batcher_shuffle(&b, &rng);
        memcpy(order + e * n, b.order, (size_t)n * sizeof *order);
    }
    assert_i64_equal_to_golden(&f, "order", order, n * epochs);
    free(order);
    batcher_free(&b);
    tensorfile_free(&f);
}

/* The chapter program's evaluator on a golden: every tensor the case lists
 * in "outputs" comes back, within tolerance (integers exactly). */
static void test_case_eval(void **state)
{
    TensorFile f, out = {0};
    load_golden(&f, CHAPTER, *state);
    assert_case_outputs(training_case_eval, &f, &out);
    if (tensorfile_meta(&f, "info.loss")) {          /* a loss the case states, not stores */
        const Tensor *loss = tensorfile_find(&out, "loss");
        double atol, rtol;
        golden_tolerance(&f, &atol, &rtol);
        assert_non_null(loss);
        assert_loss(&f, *(const float *)loss->data, atol, rtol);
    }
    tensorfile_free(&out);
    tensorfile_free(&f);
}

/* ------------------------------------------------------------------------ */
/* Cross-entropy: values by hand, ignored rows, errors, threads              */
/* ------------------------------------------------------------------------ */

/* Logits 0 and ln 3: p = (1/4, 3/4). Target 1: loss -ln(3/4); target 0:
 * -ln(1/4). Mean of the two rows, gradient (p - onehot) / 2. With label
 * smoothing e = 0.2 the target is q = (1 - e) onehot + e / 2. */
static void test_ce_hand_values(void **state)
{
    const float L3 = (float)log(3.0);
    float logits[4] = {0, L3, 0, L3}, loss, grad[4];
    int64_t target[2] = {1, 0}, count, correct;
    Error err;
    assert_ok(cross_entropy(&loss, grad, logits, target, 2, 2, -100, 0.0f, &count,
                            &correct, &err));
    float expected_loss = (float)((-log(0.75) - log(0.25)) / 2);
    float expected_grad[4] = {0.125f, -0.125f, -0.375f, 0.375f};
    assert_close("loss of p = (1/4, 3/4)", &loss, &expected_loss, 1, 0, 2.5e-7);
    assert_close("gradient (p - onehot) / 2", grad, expected_grad, 4, 1e-8, 2.5e-7);
    assert_int_equal(count, 2);
    assert_int_equal(correct, 1);                         /* row 0 predicts class 1 */

    assert_ok(cross_entropy(&loss, grad, logits, target, 2, 2, -100, 0.2f, &count,
                            &correct, &err));
    double q1 = 0.8 + 0.1, q0 = 0.1;   /* the smoothed target of row 0 (target 1) */
    double row0 = -(q0 * log(0.25) + q1 * log(0.75)), row1 = -(q1 * log(0.25) + q0 * log(0.75));
    float smoothed = (float)((row0 + row1) / 2);
    float smoothed_grad[4] = {(float)((0.25 - q0) / 2), (float)((0.75 - q1) / 2),
                              (float)((0.25 - q1) / 2), (float)((0.75 - q0) / 2)};
    assert_close("loss with label smoothing 0.2", &loss, &smoothed, 1, 0, 2.5e-7);
    assert_close("gradient (p - q) / 2", grad, smoothed_grad, 4, 1e-8, 2.5e-7);
}

/* Equal logits: p = 1/V, the loss is ln V whatever the target. */
static void test_ce_uniform_logits(void **state)
{
    enum { R = 3, V = 7 };
    float logits[R * V] = {0}, loss;
    int64_t target[R] = {0, 3, 6};
    Error err;
    assert_ok(cross_entropy(&loss, NULL, logits, target, R, V, -100, 0.0f, NULL, NULL,
                            &err));
    float expected = (float)log(7.0);
    assert_close("ln V for equal logits", &loss, &expected, 1, 0, 2.5e-7);
}

/* Ignored rows get a zero gradient (even over garbage in the buffer) and do
 * not count; the loss is the mean over the others. */
static void test_ce_ignored_rows(void **state)
{
    enum { R = 4, V = 3 };
    float logits[R * V] = {1, 2, 3, 9, 9, 9, 0, 0, 5, -1, 4, 2}, grad[R * V], loss, one;
    int64_t target[R] = {2, -100, 7 - 7, -100}, count, correct;
    for (int i = 0; i < R * V; i++) grad[i] = 123.0f;
    Error err;
    assert_ok(cross_entropy(&loss, grad, logits, target, R, V, -100, 0.0f, &count,
                            &correct, &err));
    assert_int_equal(count, 2);
    assert_int_equal(correct, 1);                       /* row 0: argmax 2 = target */
    for (int j = 0; j < V; j++) assert_true(grad[V + j] == 0.0f && grad[3 * V + j] == 0.0f);
    /* The same two rows alone give the same loss. */
    float two[2 * V] = {1, 2, 3, 0, 0, 5};
    int64_t two_target[2] = {2, 0};
    assert_ok(cross_entropy(&one, NULL, two, two_target, 2, V, -100, 0.0f, NULL, NULL,
                            &err));
    assert_close("loss without the ignored rows", &loss, &one, 1, 0, 0);
    /* ignore_index may be a class id (the <pad> id 0): rows with target 0 go. */
    assert_int_equal(cross_entropy(&loss, grad, logits, target, R, V, 0, 0.0f, &count, &correct,
                                   &err), -1);                /* -100 is now out of range */
    print_message("  %s\n", err.msg);
    int64_t pad_target[R] = {2, 0, 0, 1};
    assert_ok(cross_entropy(&loss, grad, logits, pad_target, R, V, 0, 0.1f, &count,
                            &correct, &err));
    assert_int_equal(count, 2);
}

/* Every row ignored: torch's mean over nothing, NaN, and a zero gradient. */
static void test_ce_all_ignored(void **state)
{
    float logits[6] = {1, 2, 3, 4, 5, 6}, grad[6], loss;
    int64_t target[2] = {-100, -100}, count = -1, correct = -1;
    for (int i = 0; i < 6; i++) grad[i] = 1.0f;
    Error err;
    assert_ok(cross_entropy(&loss, grad, logits, target, 2, 3, -100, 0.1f, &count,
                            &correct, &err));
    print_message("  all rows ignored: loss %g, count %lld\n", loss, (long long)count);
    assert_true(isnan(loss));
    assert_int_equal(count, 0);
    assert_int_equal(correct, 0);
    for (int i = 0; i < 6; i++) assert_true(grad[i] == 0.0f);
}

/* A target outside the classes that is not ignore_index names its row. */
static void test_ce_bad_target(void **state)
{
    float logits[6] = {0}, loss;
    int64_t target[3] = {0, 1, 3};
    Error err;
    assert_int_equal(cross_entropy(&loss, NULL, logits, target, 3, 2, -100, 0.0f, NULL, NULL,
                                   &err), -1);
    print_message("  %s\n", err.msg);
    assert_non_null(strstr(err.msg, "row 2 has target 3, outside the classes 0..1"));
    target[2] = -1;
    assert_int_equal(cross_entropy(&loss, NULL, logits, target, 3, 2, -100, 0.0f, NULL, NULL,
                                   &err), -1);
    assert_non_null(strstr(err.msg, "row 2 has target -1"));
    target[2] = 0;
    assert_int_equal(cross_entropy(&loss, NULL, logits, target, 3, 2, -100, 1.5f, NULL, NULL,
                                   &err), -1);
    print_message("  %s\n", err.msg);
    assert_non_null(strstr(err.msg, "label_smoothing is 1.5"));
    assert_int_equal(cross_entropy(&loss, NULL, logits, target, 3, 0, -100, 0.0f, NULL, NULL,
                                   &err), -1);
    assert_non_null(strstr(err.msg, "V is 0"));
}

/* Logits of +-1e30: the max is subtracted before exp, so everything is finite. */
static void test_ce_huge_logits(void **state)
{
    float logits[6] = {1e30f, -1e30f, 0, -1e30f, 1e30f, 1e30f}, grad[6], loss;
    int64_t target[2] = {0, 1};
    Error err;
    assert_ok(cross_entropy(&loss, grad, logits, target, 2, 3, -100, 0.0f, NULL, NULL,
                            &err));
    print_message("  logits 1e30: loss %g (row 1 splits p between two classes: ln 2 / 2 = "
                  "%g)\n", loss, log(2.0) / 2);
    assert_true(fabs(loss - log(2.0) / 2) < 1e-7);
    for (int i = 0; i < 6; i++) assert_true(isfinite(grad[i]));
}

/* The gradient against central differences of the loss (in double around
 * float32 logits; the step is large enough that the loss's float32 rounding
 * does not matter). */
static void test_ce_finite_differences(void **state)
{
    enum { R = 5, V = 6 };
    Rng rng;
    rng_seed(&rng, 11, 0);
    float logits[R * V], grad[R * V], lp, lm, loss;
    int64_t target[R] = {0, 5, -100, 2, 3};
    for (int i = 0; i < R * V; i++) logits[i] = 2.0f * rng_normal(&rng);
    Error err;
    assert_ok(cross_entropy(&loss, grad, logits, target, R, V, -100, 0.1f, NULL, NULL,
                            &err));
    float numeric[R * V];
    const float h = 1e-2f;
    for (int i = 0; i < R * V; i++) {
        float saved = logits[i];
        logits[i] = saved + h;
        cross_entropy(&lp, NULL, logits, target, R, V, -100, 0.1f, NULL, NULL, &err);
        logits[i] = saved - h;
        cross_entropy(&lm, NULL, logits, target, R, V, -100, 0.1f, NULL, NULL, &err);
        logits[i] = saved;
        numeric[i] = (float)(((double)lp - lm) / (2.0 * h));
    }
    assert_close("gradient vs central differences", grad, numeric, R * V, 5e-5, 1e-3);
}

/* The same loss and gradient, bit for bit, on 1 and 4 threads. */
static void test_ce_thread_count_independent(void **state)
{
    enum { R = 777, V = 37 };
    Rng rng;
    rng_seed(&rng, 3, 1);
    float *logits = test_floats(R * V), *grad[2] = {test_floats(R * V), test_floats(R * V)};
    int64_t target[R];
    for (int i = 0; i < R * V; i++) logits[i] = 4.0f * rng_normal(&rng);
    for (int r = 0; r < R; r++) target[r] = r % 5 == 0 ? -100 : (int64_t)rng_below(&rng, V);
    float loss[2];
    int64_t correct[2];
    Error err;
    int saved = omp_get_max_threads();
    for (int run = 0; run < 2; run++) {
        omp_set_num_threads(run ? 4 : 1);
        assert_ok(cross_entropy(&loss[run], grad[run], logits, target, R, V, -100, 0.1f,
                                NULL, &correct[run], &err));
    }
    omp_set_num_threads(saved);
    print_message("  1 thread: loss %.9g, 4 threads: %.9g\n", loss[0], loss[1]);
    assert_memory_equal(&loss[0], &loss[1], sizeof loss[0]);
    assert_int_equal(correct[0], correct[1]);
    assert_memory_equal(grad[0], grad[1], R * V * sizeof(float));
    free(logits), free(grad[0]), free(grad[1]);
}

/* ------------------------------------------------------------------------ */
/* Adam, AdamW and clipping                                                  */
/* ------------------------------------------------------------------------ */

static void test_adam_defaults(void **state)
{
    AdamConfig a = adam_default_config(0), w = adam_default_config(1);
    assert_true(a.lr == 1e-3f && a.beta1 == 0.9f && a.beta2 == 0.999f && a.eps == 1e-8f);
    assert_true(a.weight_decay == 0.0f && a.decoupled == 0);
    assert_true(w.lr == 1e-3f && w.weight_decay == 0.01f && w.decoupled == 1);
    Error err;
    assert_ok(adam_config_check(&a, &err));
    assert_ok(adam_config_check(&w, &err));
}

/* Each impossible option is refused with the name of its command-line flag. */
static void test_adam_config_check(void **state)
{
    struct { const char *flag; AdamConfig c; } bad[] = {
        {"--lr", {.lr = -1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f}},
        {"--lr", {.lr = NAN, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f}},
        {"beta1", {.lr = 1e-3f, .beta1 = 1.0f, .beta2 = 0.999f, .eps = 1e-8f}},
        {"beta2", {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = -0.1f, .eps = 1e-8f}},
        {"eps", {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 0.0f}},
        {"--weight-decay", {.lr = 1e-3f, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f,
                            .weight_decay = -0.01f}},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        Error err = {{0}};
        assert_int_equal(adam_config_check(&bad[i].c, &err), -1);
        print_message("  %s\n", err.msg);
        assert_true(strncmp(err.msg, bad[i].flag, strlen(bad[i].flag)) == 0);
    }
}

/* The first step: m = (1 - beta1) g and v = (1 - beta2) g^2 are exactly
 * undone by the bias corrections, so each parameter moves by lr * g / (|g| +
 * eps): lr against the sign of its gradient, whatever the gradient's size. */
static void test_adam_first_step(void **state)
{
    float p[4] = {1, -2, 0.5f, 3}, g[4] = {1e-3f, -50, 2, 1e-6f}, before[4];
    memcpy(before, p, sizeof p);
    AdamConfig c = adam_default_config(0);
    OptimState s;
    Error err;
    assert_ok(adam_state_alloc(&s, 4, &err));
    assert_int_equal(s.step, 0);
    for (int i = 0; i < 4; i++) assert_true(s.slots[ADAM_M][i] == 0 && s.slots[ADAM_V][i] == 0);
    assert_ok(adam_step(p, g, &s, &c, 0.01f));
    assert_int_equal(s.step, 1);
    float moved[4], expected[4];
    for (int i = 0; i < 4; i++) {
        moved[i] = p[i] - before[i];
        expected[i] = (float)(-0.01 * g[i] / (fabs(g[i]) + 1e-8));
    }
    assert_close("first step = -lr * sign(g)", moved, expected, 4, 2e-7, 1e-4);
    optim_state_free(&s);
    optim_state_free(&s);                      /* safe twice */
}

/* AdamW with zero gradients: the moments stay 0, the update is 0 / eps = 0,
 * and only the decay acts, p * (1 - lr wd) exactly. Adam's L2 decay instead
 * goes through the moments: the parameter moves by about lr, like any
 * gradient, however small wd is. */
static void test_adamw_decay_only(void **state)
{
    float p[3] = {1, -2, 0.25f}, q[3], zero[3] = {0};
    memcpy(q, p, sizeof p);
    AdamConfig w = adam_default_config(1), a = adam_default_config(0);
    w.weight_decay = a.weight_decay = 0.1f;
    OptimState sw, sa;
    Error err;
    assert_ok(adam_state_alloc(&sw, 3, &err));
    assert_ok(adam_state_alloc(&sa, 3, &err));
    assert_ok(adam_step(p, zero, &sw, &w, 0.5f));
    assert_ok(adam_step(q, zero, &sa, &a, 0.5f));
    float decay = (float)(1.0 - 0.5 * (double)0.1f);
    float expected[3] = {1 * decay, -2 * decay, 0.25f * decay};
    assert_close("AdamW, zero gradient: p (1 - lr wd)", p, expected, 3, 0, 0);
    float adam_moved[3] = {q[0] - 1, q[1] + 2, q[2] - 0.25f}, lr_step[3] = {-0.5f, 0.5f, -0.5f};
    assert_close("Adam, zero gradient: L2 term moves p by lr", adam_moved, lr_step, 3, 1e-6, 1e-5);
    optim_state_free(&sw);
    optim_state_free(&sa);
}

static void test_adam_thread_count_independent(void **state)
{
    enum { N = 100003, K = 3 };
    float *p[2] = {test_floats(N), test_floats(N)}, *g = test_floats(N);
    OptimState s[2];
    Error err;
    AdamConfig c = adam_default_config(1);
    int saved = omp_get_max_threads();
    for (int run = 0; run < 2; run++) {
        omp_set_num_threads(run ? 4 : 1);
        Rng rng;
        rng_seed(&rng, 8, 0);
        for (int i = 0; i < N; i++) p[run][i] = rng_normal(&rng);
        assert_ok(adam_state_alloc(&s[run], N, &err));
        for (int k = 0; k < K; k++) {
            for (int i = 0; i < N; i++) g[i] = rng_normal(&rng);
            assert_ok(adam_step(p[run], g, &s[run], &c, 1e-2f));
        }
    }
    omp_set_num_threads(saved);
    assert_memory_equal(p[0], p[1], N * sizeof(float));
    assert_memory_equal(s[0].slots[ADAM_M], s[1].slots[ADAM_M], N * sizeof(float));
    assert_memory_equal(s[0].slots[ADAM_V], s[1].slots[ADAM_V], N * sizeof(float));
    for (int run = 0; run < 2; run++) optim_state_free(&s[run]), free(p[run]);
    free(g);
}

/* Below max_norm nothing changes (bit for bit); above it the norm becomes
 * max_norm; a zero gradient stays zero (the 1e-6 keeps it from 0 / 0). */
static void test_clip_grad_norm_values(void **state)
{
    float g[4] = {3, 0, -4, 0}, copy[4];
    memcpy(copy, g, sizeof g);
    double total = clip_grad_norm(g, 4, 10.0f);
    print_message("  norm of (3, 0, -4, 0) = %g\n", total);
    assert_true(total == 5.0);
    assert_memory_equal(g, copy, sizeof g);
    total = clip_grad_norm(g, 4, 1.0f);
    float expected[4] = {(float)(3 / (5 + 1e-6)), 0, (float)(-4 / (5 + 1e-6)), 0};
    assert_close("clipped to norm 1", g, expected, 4, 0, 2.5e-7);
    assert_true(total == 5.0);
    float after = (float)clip_grad_norm(g, 4, 100.0f), one = 1.0f;
    assert_close("norm after clipping", &after, &one, 1, 0, 5e-7);
    float z[3] = {0};
    assert_true(clip_grad_norm(z, 3, 1.0f) == 0.0);
    assert_true(z[0] == 0 && z[1] == 0 && z[2] == 0);
    float bad[2] = {NAN, 1};
    assert_true(isnan(clip_grad_norm(bad, 2, 1.0f)));
    assert_true(bad[1] == 1.0f);                          /* left for the caller to see */
}

static void test_clip_thread_count_independent(void **state)
{
    enum { N = 200001 };
    float *g[2] = {test_floats(N), test_floats(N)};
    double total[2];
    int saved = omp_get_max_threads();
    for (int run = 0; run < 2; run++) {
        Rng rng;
        rng_seed(&rng, 21, 0);
        for (int i = 0; i < N; i++) g[run][i] = rng_normal(&rng);
        omp_set_num_threads(run ? 4 : 1);
        total[run] = clip_grad_norm(g[run], N, 1.0f);
    }
    omp_set_num_threads(saved);
    print_message("  norm %.17g (1 thread), %.17g (4 threads)\n", total[0], total[1]);
    assert_true(total[0] == total[1]);
    assert_memory_equal(g[0], g[1], N * sizeof(float));
    free(g[0]), free(g[1]);
}

/* ------------------------------------------------------------------------ */
/* Schedules                                                                 */
/* ------------------------------------------------------------------------ */

static void test_cosine_values(void **state)
{
    assert_true(lr_cosine_warmup(0, 10, 100) == 0.0);           /* the first step: 0 */
    double at_warmup = 0.5 * (1 + cos(M_PI * 10 / 100));
    assert_true(lr_cosine_warmup(10, 10, 100) == at_warmup);    /* warm-up factor 1 */
    assert_true(fabs(lr_cosine_warmup(5, 10, 100) - 0.5 * 0.5 * (1 + cos(M_PI * 5 / 100))) <
                1e-15);
    assert_true(fabs(lr_cosine_warmup(50, 10, 100) - 0.5) < 1e-15);
    assert_true(lr_cosine_warmup(100, 10, 100) == 0.0);         /* cos(pi) = -1 */
    assert_true(lr_cosine_warmup(0, 0, 100) == 1.0);            /* no warm-up */
    for (int64_t s = 11; s < 100; s++)                          /* decreasing after warm-up */
        assert_true(lr_cosine_warmup(s, 10, 100) < lr_cosine_warmup(s - 1, 10, 100));
    print_message("  factor at steps 0, 5, 10, 50, 100 of (warm-up 10, max_iters 100): %g %g "
                  "%g %g %g\n", lr_cosine_warmup(0, 10, 100), lr_cosine_warmup(5, 10, 100),
                  lr_cosine_warmup(10, 10, 100), lr_cosine_warmup(50, 10, 100),
                  lr_cosine_warmup(100, 10, 100));
}

/* The peak is at step warmup - 1 (the paper's step warmup), where both
 * branches meet: (d_model * warmup)^-0.5. */
static void test_noam_values(void **state)
{
    double peak = lr_noam(3999, 512, 4000);
    print_message("  base model peak %.6g at step 3999 (the paper's 4000)\n", peak);
    assert_true(fabs(peak - 1.0 / sqrt(512.0 * 4000.0)) < 1e-18);
    assert_true(fabs(lr_noam(0, 512, 4000) - pow(512, -0.5) * pow(4000, -1.5)) < 1e-20);
    for (int64_t s = 1; s < 4000; s++)
        assert_true(lr_noam(s, 512, 4000) > lr_noam(s - 1, 512, 4000));
    for (int64_t s = 4000; s < 8000; s++)
        assert_true(lr_noam(s, 512, 4000) < lr_noam(s - 1, 512, 4000));
    assert_true(fabs(lr_noam(99, 1, 1) - 0.1) < 1e-16);         /* 1 / sqrt(100) */
}

/* ------------------------------------------------------------------------ */
/* Data: the tasks, the batch layouts, the batcher                           */
/* ------------------------------------------------------------------------ */

static void test_task_parse(void **state)
{
    SeqTask t;
    Error err;
    assert_ok(seq_task_parse("reverse", &t, &err));
    assert_int_equal(t, SEQ_TASK_REVERSE);
    assert_string_equal(seq_task_name(t), "reverse");
    assert_ok(seq_task_parse("copy", &t, &err));
    assert_int_equal(t, SEQ_TASK_COPY);
    assert_string_equal(seq_task_name(t), "copy");
    assert_int_equal(seq_task_parse("sort", &t, &err), -1);
    print_message("  %s\n", err.msg);
    assert_non_null(strstr(err.msg, "unknown task 'sort' (the tasks are reverse and copy)"));
}

static void test_dataset_tasks(void **state)
{
    enum { N = 200, S = 16, C = 10 };
    for (int task = 0; task < 2; task++) {
        Rng rng;
        rng_seed(&rng, 4, 0);
        SeqDataset ds;
        Error err;
        assert_ok(seq_dataset_make(&ds, task, N, S, C, &rng, &err));
        assert_int_equal(ds.n, N);
        int counts[C] = {0};
        for (int i = 0; i < N; i++)
            for (int s = 0; s < S; s++) {
                int64_t x = ds.x[i * S + s];
                assert_true(x >= 0 && x < C);
                counts[x]++;
                int64_t want = task == SEQ_TASK_REVERSE ? ds.x[i * S + S - 1 - s] : x;
                assert_true(ds.y[i * S + s] == want);
            }
        for (int c = 0; c < C; c++) assert_true(counts[c] > N * S / C / 2);   /* every id used */
        print_message("  %s: x[0] = %lld %lld %lld ..., y[0] = %lld %lld %lld ...\n",
                      seq_task_name(task), (long long)ds.x[0], (long long)ds.x[1],
                      (long long)ds.x[2], (long long)ds.y[0], (long long)ds.y[1],
                      (long long)ds.y[2]);
        seq_dataset_free(&ds);
        seq_dataset_free(&ds);                       /* safe twice */
    }
}

static void test_dataset_deterministic(void **state)
{
    SeqDataset a, b, c;
    Rng r1, r2, r3;
    Error err;
    rng_seed(&r1, 99, 0), rng_seed(&r2, 99, 0), rng_seed(&r3, 100, 0);
    assert_ok(seq_dataset_make(&a, SEQ_TASK_REVERSE, 50, 8, 10, &r1, &err));
    assert_ok(seq_dataset_make(&b, SEQ_TASK_REVERSE, 50, 8, 10, &r2, &err));
    assert_ok(seq_dataset_make(&c, SEQ_TASK_REVERSE, 50, 8, 10, &r3, &err));
    assert_memory_equal(a.x, b.x, 50 * 8 * sizeof(int64_t));
    assert_memory_not_equal(a.x, c.x, 50 * 8 * sizeof(int64_t));
    seq_dataset_free(&a), seq_dataset_free(&b), seq_dataset_free(&c);

    Rng rng;
    rng_seed(&rng, 1, 0);
    assert_int_equal(seq_dataset_make(&a, SEQ_TASK_COPY, 0, 8, 10, &rng, &err), -1);
    print_message("  %s\n", err.msg);
    assert_int_equal(seq_dataset_make(&a, SEQ_TASK_COPY, 4, 8, 0, &rng, &err), -1);
    print_message("  %s\n", err.msg);
    assert_non_null(strstr(err.msg, "num_categories is 0"));
}

static void test_dataset_split(void **state)
{
    SeqDataset all, first, rest;
    Rng rng;
    Error err;
    rng_seed(&rng, 5, 0);
    assert_ok(seq_dataset_make(&all, SEQ_TASK_REVERSE, 10, 4, 10, &rng, &err));
    assert_ok(seq_dataset_split(&all, 7, &first, &rest, &err));
    assert_int_equal(first.n, 7);
    assert_int_equal(rest.n, 3);
    assert_int_equal(rest.seq_len, 4);
    assert_memory_equal(first.x, all.x, 7 * 4 * sizeof(int64_t));
    assert_memory_equal(first.y, all.y, 7 * 4 * sizeof(int64_t));
    assert_memory_equal(rest.x, all.x + 28, 3 * 4 * sizeof(int64_t));
    assert_memory_equal(rest.y, all.y + 28, 3 * 4 * sizeof(int64_t));
    seq_dataset_free(&first), seq_dataset_free(&rest);
    assert_int_equal(seq_dataset_split(&all, 10, &first, &rest, &err), -1);
    print_message("  %s\n", err.msg);
    assert_int_equal(seq_dataset_split(&all, 0, &first, &rest, &err), -1);
    seq_dataset_free(&all);
}

/* A hand-made dataset of two sequences, batched both ways. */
static void test_batch_layouts(void **state)
{
    int64_t x[6] = {4, 0, 9, 1, 1, 2}, y[6] = {9, 0, 4, 2, 1, 1};
    SeqDataset ds = {.n = 2, .seq_len = 3, .num_categories = 10, .x = x, .y = y};
    int64_t idx[3] = {1, 0, 1};
    int64_t src[9], target[9];
    Error err;
    assert_ok(batch_encoder(src, target, &ds, idx, 3, &err));
    int64_t want_src[9] = {1, 1, 2, 4, 0, 9, 1, 1, 2}, want_target[9] = {2, 1, 1, 9, 0, 4, 2, 1, 1};
    assert_memory_equal(src, want_src, sizeof src);
    assert_memory_equal(target, want_target, sizeof target);

    int64_t s2[6], tin[8], tout[8];
    assert_ok(batch_seq2seq(s2, tin, tout, &ds, idx, 2, &err));
    /* Row 0 is sequence 1: x = 1 1 2 -> 4 4 5; y = 2 1 1 -> 5 4 4. */
    int64_t want_s2[6] = {4, 4, 5, 7, 3, 12};
    int64_t want_in[8] = {SEQ2SEQ_SOS, 5, 4, 4, SEQ2SEQ_SOS, 12, 3, 7};
    int64_t want_out[8] = {5, 4, 4, SEQ2SEQ_EOS, 12, 3, 7, SEQ2SEQ_EOS};
    assert_memory_equal(s2, want_s2, sizeof s2);
    assert_memory_equal(tin, want_in, sizeof tin);
    assert_memory_equal(tout, want_out, sizeof tout);
    /* Teacher forcing: the input is the target shifted right by one. */
    for (int b = 0; b < 2; b++)
        for (int t = 1; t < 4; t++) assert_true(tin[b * 4 + t] == tout[b * 4 + t - 1]);

    idx[1] = 2;
    assert_int_equal(batch_encoder(src, target, &ds, idx, 2, &err), -1);
    print_message("  %s\n", err.msg);
    assert_non_null(strstr(err.msg, "batch row 1: sequence 2 is outside the dataset 0..1"));
    idx[1] = -1;
    assert_int_equal(batch_seq2seq(s2, tin, tout, &ds, idx, 2, &err), -1);
}

/* One epoch visits every index exactly once; drop_last skips the short tail. */
static void test_batcher_covers_every_index(void **state)
{
    for (int drop_last = 0; drop_last < 2; drop_last++) {
        enum { N = 103, BS = 10 };
        Batcher b;
        Error err;
        Rng rng;
        rng_seed(&rng, 17, 0);
        assert_ok(batcher_init(&b, N, BS, drop_last, &err));
        assert_int_equal(batcher_num_batches(&b), drop_last ? 10 : 11);
        for (int epoch = 0; epoch < 3; epoch++) {
            batcher_shuffle(&b, &rng);
            int seen[N] = {0}, total = 0;
            for (int64_t k = 0; k < batcher_num_batches(&b); k++) {
                const int64_t *idx;
                int count;
                batcher_batch(&b, k, &idx, &count);
                assert_int_equal(count, k == 10 ? 3 : BS);
                for (int i = 0; i < count; i++) {
                    assert_true(idx[i] >= 0 && idx[i] < N);
                    seen[idx[i]]++;
                    total++;
                }
            }
            assert_int_equal(total, drop_last ? 100 : N);
            for (int i = 0; i < N; i++) assert_true(seen[i] <= 1);
        }
        batcher_free(&b);
    }
}

/* The order of an epoch depends on the RNG state alone: a batcher made
 * afresh from a saved state (a resumed run) repeats it, and the same seed
 * gives the same epochs. Consecutive epochs differ. */
static void test_batcher_shuffle_deterministic(void **state)
{
    enum { N = 50 };
    Batcher a, b;
    Error err;
    Rng r1, r2;
    rng_seed(&r1, 2024, 3), rng_seed(&r2, 2024, 3);
    assert_ok(batcher_init(&a, N, 8, 0, &err));
    assert_ok(batcher_init(&b, N, 8, 0, &err));
    int64_t first[N];
    batcher_shuffle(&a, &r1);
    memcpy(first, a.order, sizeof first);
    Rng saved = r1;                               /* what a checkpoint stores */
    batcher_shuffle(&a, &r1);
    assert_memory_not_equal(first, a.order, sizeof first);
    batcher_shuffle(&b, &r2);
    assert_memory_equal(first, b.order, sizeof first);
    Batcher resumed;
    assert_ok(batcher_init(&resumed, N, 8, 0, &err));
    batcher_shuffle(&resumed, &saved);
    assert_memory_equal(a.order, resumed.order, sizeof first);
    print_message("  epoch 2 starts %lld %lld %lld %lld, again after a resume\n",
                  (long long)a.order[0], (long long)a.order[1], (long long)a.order[2],
                  (long long)a.order[3]);
    batcher_free(&a), batcher_free(&b), batcher_free(&resumed);

    assert_int_equal(batcher_init(&a, 5, 0, 0, &err), -1);
    print_message("  %s\n", err.msg);
    assert_int_equal(batcher_init(&a, 5, 8, 1, &err), -1);
    print_message("  %s\n", err.msg);
    assert_int_equal(batcher_init(&a, 0, 8, 0, &err), -1);
}

/* ------------------------------------------------------------------------ */
/* The clock, the progress line and the loss log                             */
/* ------------------------------------------------------------------------ */

static void test_time_now(void **state)
{
    double a = time_now(), b = time_now();
    assert_true(b >= a);
    assert_true(a > 0);
}

/* Not a terminal: a plain line every `every` steps and one for the last. */
static void test_progress_plain_lines(void **state)
{
    FILE *f = tmpfile();
    assert_non_null(f);
    Progress p;
    progress_init(&p, f, 0, 12, 5);
    /* epochs 0..2, shown 1..3 */
    for (int s = 1; s <= 12; s++) progress_update(&p, s, s / 6, 2.0 / s, 1e-3, 256);
    progress_finish(&p);
    rewind(f);
    char line[512];
    int lines = 0;
    while (fgets(line, sizeof line, f)) {
        lines++;
        print_message("  | %s", line);
        assert_null(strchr(line, '\r'));
        assert_non_null(strstr(line, "tok/s"));
        assert_non_null(strstr(line, "ETA"));
        if (lines == 1) assert_non_null(strstr(line, "step 5/12  epoch 1  loss 0.4000"));
        if (lines == 3) {
            assert_non_null(strstr(line, "[####################] step 12/12  epoch 3"));
            assert_non_null(strstr(line, "lr 1.0e-03"));
        }
    }
    assert_int_equal(lines, 3);
    fclose(f);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void log_path(char *buf, size_t size, const char *what)
{
    snprintf(buf, size, "build/tmp_log08_%s_%d.csv", what, (int)getpid());
}

/* The seconds (the last field) of the row of text that starts with prefix;
 * fails the test unless there is one such row. */
static double row_seconds(const char *text, const char *prefix)
{
    char line_start[64];
    snprintf(line_start, sizeof line_start, "\n%s", prefix);
    const char *row = strstr(text, line_start);
    assert_non_null(row);
    assert_null(strstr(row + 1, line_start));
    char *end;
    double s = strtod(row + strlen(line_start), &end);
    assert_true(end > row + strlen(line_start) && *end == '\n');
    return s;
}

/* A new log: the header, then rows; NaN is an empty field; the last field
 * is the seconds since the log was opened. */
static void test_csv_log_new(void **state)
{
    char path[256];
    log_path(path, sizeof path, "new");
    write_text(path, "old content\n");               /* replaced */
    CsvLog log;
    Error err;
    assert_ok(csv_log_open(&log, path, -1, &err));
    assert_ok(csv_log_row(&log, 1, 0, 1e-3, 2.5, NAN, NAN, &err));
    assert_ok(csv_log_row(&log, 2, 0, 0.0, 2.25, 2.125, 0.5, &err));
    const char *text = slurp(path);             /* flushed: readable before close */
    print_message("%s", text);
    assert_int_equal(strncmp(text, "step,epoch,lr,train_loss,val_loss,val_accuracy,seconds\n",
                             55), 0);
    double s1 = row_seconds(text, "1,0,0.001,2.5,,,");
    double s2 = row_seconds(text, "2,0,0,2.25,2.125,0.5,");
    assert_true(s1 >= 0 && s1 <= s2 && s2 < 60);
    assert_ok(csv_log_close(&log, &err));
    assert_ok(csv_log_close(&log, &err));  /* safe twice */
    unlink(path);
}

/* Resuming at step 3 keeps rows 1..3, drops 4 and 5 (written after the
 * checkpoint by the run that crashed), and appends after them; nothing is
 * left behind beside the log, and the rewritten log's permissions follow
 * the umask as a new file's do. */
static void test_csv_log_resume_trims(void **state)
{
    char path[256];
    log_path(path, sizeof path, "resume");
    write_text(path, CSV_LOG_HEADER "\n1,0,0.1,3,,,1.5\n2,0,0.2,2,,,2.5\n"
                                    "3,0,0.3,1,0.9,0.25,3000.5\n4,1,0.4,0.5,,,4000\n"
                                    "5,1,0.5,0.25,,,5000\n");
    CsvLog log;
    Error err;
    assert_ok(csv_log_open(&log, path, 3, &err));
    assert_ok(csv_log_row(&log, 4, 1, 0.4, 0.75, NAN, NAN, &err));
    assert_ok(csv_log_close(&log, &err));
    const char *text = slurp(path);
    print_message("%s", text);
    const char *kept = CSV_LOG_HEADER "\n1,0,0.1,3,,,1.5\n2,0,0.2,2,,,2.5\n"
                                      "3,0,0.3,1,0.9,0.25,3000.5\n";
    assert_int_equal(strncmp(text, kept, strlen(kept)), 0);
    /* the resumed run's time goes on from the last kept row's */
    double s4 = row_seconds(text, "4,1,0.4,0.75,,,");
    assert_true(s4 >= 3000.5 && s4 < 3060);
    struct stat st;
    mode_t mask = umask(0);
    umask(mask);
    assert_ok(stat(path, &st));
    assert_int_equal(st.st_mode & 0777, 0666 & ~mask);
    char pattern[300];
    snprintf(pattern, sizeof pattern, "%s.tmp.", path);
    /* The temporary file was renamed into place: the folder holds no other. */
    FILE *ls = popen("ls build", "r");
    assert_non_null(ls);
    char name[512];
    while (fgets(name, sizeof name, ls)) assert_null(strstr(name, strrchr(pattern, '/') + 1));
    pclose(ls);

    /* Keeping everything leaves the file as it is and appends. */
    assert_ok(csv_log_open(&log, path, 100, &err));
    assert_ok(csv_log_row(&log, 5, 1, 0.5, 0.5, NAN, NAN, &err));
    assert_ok(csv_log_close(&log, &err));
    text = slurp(path);
    assert_non_null(strstr(text, "4,1,0.4,0.75,,,"));
    assert_true(row_seconds(text, "5,1,0.5,0.5,,,") >= s4);

    /* A last row cut off in mid-write goes; so does everything when resuming at 0. */
    write_text(path, CSV_LOG_HEADER "\n1,0,0.1,3,,,1\n2,0,0.2,2");
    assert_ok(csv_log_open(&log, path, 10, &err));
    assert_ok(csv_log_close(&log, &err));
    assert_string_equal(slurp(path), CSV_LOG_HEADER "\n1,0,0.1,3,,,1\n");
    assert_ok(csv_log_open(&log, path, 0, &err));
    assert_ok(csv_log_close(&log, &err));
    assert_string_equal(slurp(path), CSV_LOG_HEADER "\n");
    unlink(path);

    /* A log from before the seconds column: its rows are kept, its header
     * gains the column, and the new rows have it. */
    write_text(path, "step,epoch,lr,train_loss,val_loss,val_accuracy\n1,0,0.1,3,,\n"
                     "2,0,0.2,2,0.5,0.75\n3,0,0.3,1,,\n");
    assert_ok(csv_log_open(&log, path, 2, &err));
    assert_ok(csv_log_row(&log, 3, 0, 0.3, 1.5, NAN, NAN, &err));
    assert_ok(csv_log_close(&log, &err));
    text = slurp(path);
    print_message("%s", text);
    kept = CSV_LOG_HEADER "\n1,0,0.1,3,,\n2,0,0.2,2,0.5,0.75\n";
    assert_int_equal(strncmp(text, kept, strlen(kept)), 0);
    assert_true(row_seconds(text, "3,0,0.3,1.5,,,") < 60);
    unlink(path);

    /* No log yet: resuming starts one. */
    assert_ok(csv_log_open(&log, path, 7, &err));
    assert_ok(csv_log_close(&log, &err));
    assert_string_equal(slurp(path), CSV_LOG_HEADER "\n");
    unlink(path);
}

static void test_csv_log_bad_files(void **state)
{
    char path[256];
    log_path(path, sizeof path, "bad");
    CsvLog log;
    Error err;
    write_text(path, "epoch,loss\n1,2\n");
    assert_int_equal(csv_log_open(&log, path, 5, &err), -1);
    print_message("  %s\n", err.msg);
    assert_non_null(strstr(err.msg, path));
    assert_non_null(strstr(err.msg, "line 1: not a loss log"));
    write_text(path, CSV_LOG_HEADER "\n1,0,0.1,3,,\nnonsense,1\n");
    assert_int_equal(csv_log_open(&log, path, 5, &err), -1);
    print_message("  %s\n", err.msg);
    assert_non_null(strstr(err.msg, "line 3: 'nonsense,1' is not a row of the loss log"));
    /* The file is left as it was. */
    assert_string_equal(slurp(path), CSV_LOG_HEADER "\n1,0,0.1,3,,\nnonsense,1\n");
    unlink(path);
    assert_int_equal(csv_log_open(&log, "build/no_such_folder/log.csv", -1, &err), -1);
    print_message("  %s\n", err.msg);
    assert_non_null(strstr(err.msg, "the loss log: cannot create build/no_such_folder/log.csv: "
                                    "No such file or directory"));
}

/* ------------------------------------------------------------------------ */
/* Bad cases: training_case.c refuses them with a message naming the file    */
/* ------------------------------------------------------------------------ */


static const BrokenCase BAD[] = {
    {"bad_missing_op", "cross_entropy_6x10", BREAK_SET_META, "op", "", {0}, 0,
     "metadata 'op' is missing"},
    {"bad_unknown_op", "cross_entropy_6x10", BREAK_SET_META, "op", "sgd", {0}, 0,
     "op 'sgd' is not a chapter 08 op"},
    {"bad_ce_missing_logits", "cross_entropy_6x10", BREAK_DROP, "logits", NULL, {0}, 0,
     "'logits' is missing"},
    {"bad_ce_logits_dtype", "cross_entropy_6x10", BREAK_RETYPE_I64, "logits", NULL, {0}, 0,
     "has dtype I64, expected F32"},
    {"bad_ce_target_shape", "cross_entropy_6x10", BREAK_RESHAPE_I64, "target", NULL, {7}, 1,
     "'target' has shape (7), expected (R,) = (6)"},
    {"bad_ce_target_dtype", "cross_entropy_backward_8x7_ignore", BREAK_RETYPE_F32, "target", NULL,
     {0}, 0, "'target' has dtype F32, expected I64"},
    {"bad_ce_target_range", "cross_entropy_backward_6x10", BREAK_POKE_I64, "target", "10", {0}, 0,
     "row 0 holds 10, outside the classes 0..9 (and not ignore_index -100)"},
    {"bad_ce_target_negative", "cross_entropy_6x10", BREAK_POKE_I64, "target", "-1", {0}, 0,
     "row 0 holds -1"},
    {"bad_ce_smoothing", "cross_entropy_12x5_ignore_ls10", BREAK_SET_META, "label_smoothing",
     "1.5", {0}, 0, "label_smoothing is 1.5, outside [0, 1]"},
    {"bad_ce_smoothing_nan", "cross_entropy_12x5_ignore_ls10", BREAK_SET_META, "label_smoothing",
     "nan", {0}, 0, "label_smoothing is nan"},
    {"bad_ce_ignore_index", "cross_entropy_8x7_ignore", BREAK_SET_META, "ignore_index", "pad", {0},
     0,
     "ignore_index"},
    {"bad_ce_empty_classes", "cross_entropy_6x10", BREAK_RESHAPE, "logits", NULL, {6, 0}, 2,
     "must all be at least 1"},
    {"bad_adam_grads_shape", "adam_n10_K5", BREAK_RESHAPE, "grads", NULL, {5, 11}, 2,
     "'grads' has shape (5, 11), expected (steps, n) = (*, 10)"},
    {"bad_adam_steps", "adam_n10_K5", BREAK_SET_META, "steps", "4", {0}, 0,
     "metadata steps is 4 but tensor 'grads' has 5 rows"},
    {"bad_adam_beta1", "adam_n10_K5", BREAK_SET_META, "beta1", "1.0", {0}, 0,
     "beta1 is 1.0, outside [0, 1)"},
    {"bad_adam_beta2", "adamw_wd1_n16_K5", BREAK_SET_META, "beta2", "-0.5", {0}, 0,
     "beta2 is -0.5"},
    {"bad_adam_eps", "adam_n10_K5", BREAK_SET_META, "eps", "0", {0}, 0,
     "eps is 0, outside (0, 3.4e38]"},
    {"bad_adam_lr", "adam_n10_K5", BREAK_SET_META, "lr", "-0.001", {0}, 0, "lr is -0.001"},
    {"bad_adam_weight_decay", "adamw_wd1_n16_K5", BREAK_SET_META, "weight_decay", "inf", {0}, 0,
     "weight_decay is inf"},
    {"bad_adam_decoupled", "adamw_wd1_n16_K5", BREAK_SET_META, "decoupled", "yes", {0}, 0,
     "decoupled"},
    {"bad_adam_lrs_negative", "adam_paper_noam_n20_K6", BREAK_POKE_F32, "lrs", "-1", {0}, 0,
     "'lrs': step 0 has the learning rate -1"},
    {"bad_adam_lrs_shape", "adam_paper_noam_n20_K6", BREAK_RESHAPE, "lrs", NULL, {5}, 1,
     "'lrs' has shape (5), expected (steps,) = (6)"},
    {"bad_adam_missing_params", "adam_n10_K5", BREAK_DROP, "params", NULL, {0}, 0,
     "'params' is missing"},
    {"bad_clip_max_norm_missing", "clip_grad_norm_above_n50", BREAK_SET_META, "max_norm", "", {0},
     0,
     "metadata 'max_norm' is missing (the largest norm allowed)"},
    {"bad_clip_max_norm_zero", "clip_grad_norm_above_n50", BREAK_SET_META, "max_norm", "0", {0}, 0,
     "max_norm is 0, outside (0, 3.4e38]"},
    {"bad_clip_grads_rank", "clip_grad_norm_above_n50", BREAK_RESHAPE, "grads", NULL, {5, 10}, 2,
     "'grads' has rank 2, expected 1"},
    {"bad_cosine_max_iters", "lr_cosine_w1_m10", BREAK_SET_META, "max_iters", "0", {0}, 0,
     "max_iters is 0, outside [1, 9.2e18] (the length of the cosine)"},
    {"bad_cosine_warmup_missing", "lr_cosine_w1_m10", BREAK_SET_META, "warmup", "", {0}, 0,
     "metadata 'warmup' is missing (the number of warm-up steps)"},
    {"bad_cosine_negative_step", "lr_cosine_w8_m40", BREAK_POKE_I64, "steps", "-3", {0}, 0,
     "'steps' holds -3 at index 0"},
    {"bad_cosine_steps_dtype", "lr_cosine_w8_m40", BREAK_RETYPE_F32, "steps", NULL, {0}, 0,
     "'steps' has dtype F32, expected I64"},
    {"bad_noam_d_model", "lr_noam_d32_w10", BREAK_SET_META, "d_model", "0", {0}, 0, "d_model is 0"},
    {"bad_noam_warmup", "lr_noam_d32_w10", BREAK_SET_META, "warmup", "0", {0}, 0,
     "warmup is 0, outside [1, 9.2e18] (the number of warm-up steps)"},
    {"bad_dataset_task", "seq_dataset_copy_5x7_C3_seed1", BREAK_SET_META, "task", "sort", {0}, 0,
     "task is 'sort', not one of reverse|copy"},
    {"bad_dataset_n", "seq_dataset_copy_5x7_C3_seed1", BREAK_SET_META, "n", "0", {0}, 0,
     "n is 0, outside [1, 16777216] (the number of sequences)"},
    {"bad_dataset_categories", "seq_dataset_reverse_3x4_C1", BREAK_SET_META, "num_categories", "0",
     {0}, 0, "num_categories is 0"},
    {"bad_dataset_seed", "seq_dataset_reverse_3x4_C1", BREAK_SET_META, "rng_seed", "-1", {0}, 0,
     "rng_seed is -1"},
    {"bad_batcher_epochs", "batcher_shuffle_n10_E3_seed7", BREAK_SET_META, "epochs", "0", {0}, 0,
     "epochs is 0"},
    {"bad_batcher_n_missing", "batcher_shuffle_n10_E3_seed7", BREAK_SET_META, "n", "", {0}, 0,
     "metadata 'n' is missing (the dataset size)"},
    {"bad_batch_layout", "batch_seq2seq_copy_n10_S5_N6", BREAK_SET_META, "layout", "decoder",
     {0}, 0, "layout is 'decoder', not one of encoder|seq2seq"},
    {"bad_batch_row", "batch_encoder_reverse_n10_S6_N4", BREAK_POKE_I64, "idx", "10", {0}, 0,
     "batch row 0: sequence 10 is outside the dataset 0..9"},
    {"bad_batch_id", "batch_seq2seq_copy_n10_S5_N6", BREAK_POKE_I64, "x", "-1", {0}, 0,
     "'x' holds the id -1 at 0, outside [0, 2147483644)"},
    {"bad_batch_y_shape", "batch_encoder_reverse_n10_S6_N4", BREAK_RESHAPE_I64, "y", NULL, {6, 10},
     2, "'y' has shape (6, 10), expected (n, S) = (10, 6)"},
};

static void test_bad_case(void **state)
{
    const BrokenCase *bad = *state;
    TensorFile f;
    broken_case_make(&f, CHAPTER, bad);
    assert_case_refused(training_case_eval, &f, bad->expect);
    tensorfile_free(&f);
}

/* Through run_case_file, as the chapter program runs it: exit status 1 and
 * no output file. */
static void test_bad_case_writes_no_file(void **state)
{
    /* a target out of range */
    assert_broken_case_writes_no_file(CHAPTER, &BAD[6], training_case_eval);
}

/* ------------------------------------------------------------------------ */

/* ------------------------------------------------------------------------ */
/* The training loop: resuming, checkpoints                                  */
/* ------------------------------------------------------------------------ */

/* A tiny reverse-task run: 64 training and 32 held-out sequences of 6. */
typedef struct {
    SeqDataset all, train, val;
    TrainOptions o;
    TrainReport report;     /* the programs' hooks: its checkpoint and log, quiet */
    ModelConfig cfg;
} TinyRun;

static void tiny_run(TinyRun *r, float dropout)
{
    Rng rng;
    Error err;
    memset(r, 0, sizeof *r);
    rng_seed(&rng, 5, 1);
    assert_ok(seq_dataset_make(&r->all, SEQ_TASK_REVERSE, 96, 6, 5, &rng, &err));
    assert_ok(seq_dataset_split(&r->all, 64, &r->train, &r->val, &err));
    r->o.epochs = 3;
    r->o.batch_size = 16;
    r->o.adam = adam_default_config(0);
    r->o.adam.lr = 3e-3f;
    r->o.schedule = SCHEDULE_COSINE;
    r->o.warmup = 3;
    r->o.max_norm = 1.0f;
    r->report.quiet = 1;
    r->report.epochs = r->o.epochs;
    r->o.hooks = train_report_hooks(&r->report);
    ModelConfig c = {0};
    c.kind = MODEL_LABELLER;
    c.src_vocab = c.tgt_vocab = 5;
    c.d_model = 8, c.nhead = 2, c.dim_feedforward = 16, c.num_encoder_layers = 1;
    c.max_len = 6, c.pad_id = -1, c.eps = 1e-5f, c.dropout = dropout;
    r->cfg = c;
}

static void tiny_free(TinyRun *r)
{
    seq_dataset_free(&r->all), seq_dataset_free(&r->train), seq_dataset_free(&r->val);
}

static void fresh_start(const TinyRun *r, Model *m, OptimState *opt, TrainState *st)
{
    Rng init;
    Error err;
    rng_seed(&init, 5, 2);
    assert_ok(model_init(m, &r->cfg, &init, &err));
    assert_ok(adam_state_alloc(opt, m->num_params, &err));
    memset(st, 0, sizeof *st);
    rng_seed(&st->data_rng, 5, 3);
    rng_seed(&st->dropout_rng, 5, 4);
}

/* A run whose loss stops being a number ends with an error naming the
 * step, and leaves the last checkpoint as it was. */
static void test_diverged_run_stops(void **state)
{
    TinyRun r;
    Model m, saved;
    OptimState opt, saved_opt;
    TrainState st, saved_st;
    StepResult val;
    Error err;
    char dir[] = "/tmp/test08XXXXXX", ckpt[256];
    assert_non_null(mkdtemp(dir));
    snprintf(ckpt, sizeof ckpt, "%s/run.safetensors", dir);
    tiny_run(&r, 0.0f);
    Examples train = examples_of_task(&r.train, r.cfg.kind);
    Examples held = examples_of_task(&r.val, r.cfg.kind);
    fresh_start(&r, &m, &opt, &st);
    r.report.checkpoint = ckpt;
    r.o.stop_after = 1;
    assert_ok(train_run(&m, &opt, &st, &r.o, &train, &held, &val, &err));
    r.o.stop_after = 0;
    r.o.adam.lr = 1e30f;                 /* the next step sends the weights to infinity */
    r.o.max_norm = 0.0f;
    r.o.schedule = SCHEDULE_CONSTANT;
    assert_int_equal(train_run(&m, &opt, &st, &r.o, &train, &held, &val, &err), -1);
    print_message("  %s\n", err.msg);
    assert_non_null(strstr(err.msg, "the loss is"));
    assert_non_null(strstr(err.msg, ckpt));     /* names what is left on disk */
    assert_ok(checkpoint_load(ckpt, &saved, &saved_opt, &saved_st, &err));
    assert_int_equal(saved_st.epoch, 1);
    for (size_t i = 0; i < saved.num_params; i++) assert_true(isfinite(saved.params[i]));
    model_free(&m), model_free(&saved);
    optim_state_free(&opt), optim_state_free(&saved_opt);
    tiny_free(&r);
    unlink(ckpt);
    rmdir(dir);
}

/* One huge step can leave the weights finite but useless: a held-out loss
 * that is not a number stops the run before that epoch's checkpoint. */
static void test_diverged_validation_stops(void **state)
{
    TinyRun r;
    Model m;
    OptimState opt;
    TrainState st;
    StepResult val;
    Error err;
    char dir[] = "/tmp/test08XXXXXX", ckpt[256];
    assert_non_null(mkdtemp(dir));
    snprintf(ckpt, sizeof ckpt, "%s/run.safetensors", dir);
    tiny_run(&r, 0.0f);
    Examples train = examples_of_task(&r.train, r.cfg.kind);
    Examples held = examples_of_task(&r.val, r.cfg.kind);
    fresh_start(&r, &m, &opt, &st);
    r.report.checkpoint = ckpt;
    r.o.batch_size = 64;                 /* one step an epoch: its loss is still finite */
    r.o.adam.lr = 1e30f;
    r.o.max_norm = 0.0f;
    r.o.schedule = SCHEDULE_CONSTANT;
    assert_int_equal(train_run(&m, &opt, &st, &r.o, &train, &held, &val, &err), -1);
    print_message("  %s\n", err.msg);
    assert_non_null(strstr(err.msg, "epoch 1: the validation loss is"));
    assert_non_null(strstr(err.msg, ckpt));
    assert_int_equal(st.epoch, 0);
    assert_int_equal(access(ckpt, F_OK), -1);
    model_free(&m);
    optim_state_free(&opt);
    tiny_free(&r);
    rmdir(dir);
}

/* Output paths are checked before any work: a missing folder, a folder that
 * cannot be written in, and a path that is a folder are refused, naming the
 * option; a new file in a writable folder is fine and is not created. */
static void test_output_paths_checked(void **state)
{
    Error err;
    assert_int_equal(check_output_path("--checkpoint", "build/no_such_folder/x", &err), -1);
    print_message("  %s\n", err.msg);
    assert_non_null(strstr(err.msg, "--checkpoint"));
    assert_int_equal(check_output_path("--out", "/proc/x.safetensors", &err), -1);
    print_message("  %s\n", err.msg);
    assert_int_equal(check_output_path("--log", "build", &err), -1);
    print_message("  %s\n", err.msg);
    assert_non_null(strstr(err.msg, "not a regular file"));
    assert_ok(check_output_path("--log", "build/new_log_file.csv", &err));
    assert_int_equal(access("build/new_log_file.csv", F_OK), -1);
}

/* Checkpoint counters are whole numbers in range: "-5" (which strtoull
 * reads as 2^64 - 5) and an epoch past INT32_MAX are refused. */
static void test_checkpoint_counters_checked(void **state)
{
    TinyRun r;
    Model m, back;
    OptimState opt, back_opt;
    TrainState st, back_st;
    TensorFile f;
    Error err;
    char dir[] = "/tmp/test08XXXXXX", ckpt[256];
    assert_non_null(mkdtemp(dir));
    snprintf(ckpt, sizeof ckpt, "%s/run.safetensors", dir);
    tiny_run(&r, 0.0f);
    fresh_start(&r, &m, &opt, &st);
    assert_ok(checkpoint_save(ckpt, &m, &opt, &st, NULL, &err));
    const char *bad[][2] = {{"optimizer.step", "-5"}, {"train.epoch", "4294967295"},
                            {"optimizer.step", " 7"}, {"train.data_rng.inc", "1e3"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_ok(safetensors_read(ckpt, &f, &err));
        assert_ok(tensorfile_set_meta(&f, bad[i][0], bad[i][1], &err));
        char broken[300];
        snprintf(broken, sizeof broken, "%s/broken.safetensors", dir);
        assert_ok(safetensors_write(broken, &f, &err));
        tensorfile_free(&f);
        assert_int_equal(checkpoint_load(broken, &back, &back_opt, &back_st, &err), -1);
        print_message("  %s\n", err.msg);
        assert_non_null(strstr(err.msg, bad[i][0]));
        unlink(broken);
    }
    model_free(&m);
    optim_state_free(&opt);
    tiny_free(&r);
    unlink(ckpt);
    rmdir(dir);
}

/* The command line of issue 14 whose parameter count wrapped a size_t (and
 * crashed in model_init) is refused, with exit status 1, before anything
 * is allocated; so is a vocabulary whose size overflows an int. */
static void test_train_refuses_wrapping_sizes(void **state)
{
    (void)state;
    char out[4096];
    assert_int_equal(run_command("build/08_training --train --categories 1 --seq-len 1 "
                                 "--d-model 123456789 --ffn 1531879606 --layers 42 "
                                 "--train-size 64 --test-size 16 --epochs 1 --batch-size 16",
                                 out, sizeof out), 1);
    assert_non_null(strstr(out, "parameters"));
    assert_int_equal(run_command("build/08_training --train --categories 2147483647",
                                 out, sizeof out), 1);
    assert_non_null(strstr(out, "--categories"));
}

/* Every file a training run writes is checked before any work: outputs
 * that are one file, an output that is an input, a checkpoint another run
 * holds. Each is one line naming the options, exit 1, nothing written. */
static void test_run_paths_checked(void **state)
{
    (void)state;
    char out[4096];
    const char *small = "build/08_training --train --train-size 64 --test-size 16 "
                        "--epochs 1 --batch-size 16";
    char cmd[1024];
    unlink("build/paths.safetensors");
    snprintf(cmd, sizeof cmd, "%s --checkpoint build/paths.safetensors --out "
             "build/../build/paths.safetensors", small);
    assert_int_equal(run_command(cmd, out, sizeof out), 1);
    assert_non_null(strstr(out, "--checkpoint and --out name the same file"));
    assert_int_equal(access("build/paths.safetensors", F_OK), -1);
    snprintf(cmd, sizeof cmd, "%s --log build/paths.csv --out build/paths.csv", small);
    assert_int_equal(run_command(cmd, out, sizeof out), 1);
    assert_non_null(strstr(out, "--out and --log name the same file"));
    /* an output that is the file an input option reads */
    assert_int_equal(run_command("build/09_translation --train --log ./reference/data/taylor/"
                                 "seq2seq_series_2terms.txt", out, sizeof out), 1);
    assert_non_null(strstr(out, "--log ./reference/data/taylor/seq2seq_series_2terms.txt is "
                                "the file --data reads"));
    /* --resume may be --checkpoint (the run goes on where it was), not --out */
    assert_int_equal(run_command("build/09_translation --train --resume build/r.safetensors "
                                 "--out build/r.safetensors", out, sizeof out), 1);
    assert_non_null(strstr(out, "--out build/r.safetensors is the file --resume reads"));
    /* a checkpoint another run holds */
    PathLock lock;
    Error err;
    assert_ok(path_lock(&lock, "--checkpoint", "build/paths.safetensors", &err));
    snprintf(cmd, sizeof cmd, "%s --checkpoint build/paths.safetensors", small);
    assert_int_equal(run_command(cmd, out, sizeof out), 1);
    assert_non_null(strstr(out, "is in use by another run"));
    path_unlock(&lock);
    assert_int_equal(access("build/paths.safetensors.lock", F_OK), -1);
}

/* Issue 43's lost files: an --out that is a dangling link to the
 * checkpoint's name, an output named as a lock file, and a file that
 * another run writes under another option (--out or --log where a run holds
 * --checkpoint, or two runs' --out) are refused before any work, and
 * nothing is written. */
static void test_every_output_resolved_and_locked(void **state)
{
    (void)state;
    char out[4096], cmd[1024];
    const char *small = "build/08_training --train --train-size 64 --test-size 16 "
                        "--epochs 1 --batch-size 16";
    unlink("build/lost.safetensors");
    unlink("build/lost_link.safetensors");
    assert_ok(symlink("lost.safetensors", "build/lost_link.safetensors"));   /* dangling */
    snprintf(cmd, sizeof cmd, "%s --checkpoint build/lost.safetensors "
             "--out build/lost_link.safetensors", small);
    assert_int_equal(run_command(cmd, out, sizeof out), 1);
    assert_non_null(strstr(out, "--checkpoint and --out name the same file"));
    assert_int_equal(access("build/lost.safetensors", F_OK), -1);
    /* the lock file's own name, as --out or --log */
    snprintf(cmd, sizeof cmd, "%s --checkpoint build/lost.safetensors "
             "--out build/lost.safetensors.lock", small);
    assert_int_equal(run_command(cmd, out, sizeof out), 1);
    assert_non_null(strstr(out, "--out: build/lost.safetensors.lock: names ending in .lock"));
    snprintf(cmd, sizeof cmd, "%s --log build/x.csv.lock", small);
    assert_int_equal(run_command(cmd, out, sizeof out), 1);
    assert_non_null(strstr(out, "--log: build/x.csv.lock: names ending in .lock"));
    /* another run holds the file (as its --checkpoint, say): --out and --log
     * on it are refused too, and so is --out through the link */
    PathLock lock;
    Error err;
    assert_ok(path_lock(&lock, "--checkpoint", "build/lost.safetensors", &err));
    const char *options[] = {"--out build/lost.safetensors", "--log build/lost.safetensors",
                             "--out build/lost_link.safetensors"};
    for (int i = 0; i < 3; i++) {
        snprintf(cmd, sizeof cmd, "%s %s", small, options[i]);
        assert_int_equal(run_command(cmd, out, sizeof out), 1);
        assert_non_null(strstr(out, "is in use by another run"));
    }
    path_unlock(&lock);
    assert_int_equal(access("build/lost.safetensors", F_OK), -1);
    assert_int_equal(access("build/lost.safetensors.lock", F_OK), -1);
    unlink("build/lost_link.safetensors");
}

/* The hash the ranks of an MPI run compare at the start (task_run_hash)
 * covers the whole model configuration and recipe: --heads, --dropout and
 * --norm-first, which change no weight's shape, were left out, and ranks
 * started with different ones trained a wrong model together (issue 43).
 * Every option that shapes the training changes the hash; the output files,
 * which only rank 0 writes, do not. */
static void no_defaults(RunOptions *o)
{
    (void)o;
}

static void test_rank_hash_covers_the_run(void **state)
{
    (void)state;
    TinyRun tiny;
    tiny_run(&tiny, 0.0f);
    Model m;
    OptimState opt;
    TrainState st;
    fresh_start(&tiny, &m, &opt, &st);
    const Task task = {.program = "test", .defaults = no_defaults};
    TaskRun r = task_run_defaults(&task);
    r.o.train.epochs = 3, r.o.train.batch_size = 16, r.o.train.adam.lr = 3e-3f;
    r.o.d_model = 8, r.o.heads = 2, r.o.layers = 1, r.o.ffn = 16;
    r.train = examples_of_task(&tiny.train, MODEL_LABELLER);
    r.val = examples_of_task(&tiny.val, MODEL_LABELLER);
    Error err;
    uint64_t base, h;
    if (task_run_hash(&r, &m, &opt, &st, &base, &err) != 0) fail_msg("%s", err.msg);
    assert_ok(task_run_hash(&r, &m, &opt, &st, &h, &err));
    assert_true(h == base);
    /* the model as built: heads, dropout, pre-norm (the same weights) */
    const ModelConfig cfg = m.cfg;
    for (int change = 0; change < 3; change++) {
        if (change == 0) m.cfg.nhead = 1;
        if (change == 1) m.cfg.dropout = 0.1f;
        if (change == 2) m.cfg.norm_first = 1;
        assert_ok(task_run_hash(&r, &m, &opt, &st, &h, &err));
        print_message("  config change %d: %016llx against %016llx\n", change,
                      (unsigned long long)h, (unsigned long long)base);
        assert_true(h != base);
        m.cfg = cfg;
    }
    /* the options themselves, and what the recipe resolves them to */
    const RunOptions o = r.o;
    for (int change = 0; change < 6; change++) {
        if (change == 0) r.o.heads = 1;
        if (change == 1) r.o.dropout = 0.1;
        if (change == 2) r.o.norm_first = 1;
        if (change == 3) r.o.train.bucket = 2;
        if (change == 4) r.o.optimizer = "adamw";
        if (change == 5) r.o.eval_every = 2;
        assert_ok(task_run_hash(&r, &m, &opt, &st, &h, &err));
        assert_true(h != base);
        r.o = o;
    }
    /* the dropout stream a resumed run goes on with */
    TrainState other = st;
    rng_seed(&other.dropout_rng, 6, 4);
    assert_ok(task_run_hash(&r, &m, &opt, &other, &h, &err));
    assert_true(h != base);
    /* rank 0's files are its own */
    r.o.out = "build/x.safetensors", r.o.log = "build/x.csv", r.o.checkpoint = "build/c.st";
    assert_ok(task_run_hash(&r, &m, &opt, &st, &h, &err));
    assert_true(h == base);
    model_free(&m);
    optim_state_free(&opt);
    tiny_free(&tiny);
}

/* A run stopped after its last checkpoint but before --out: resuming it
 * trains nothing and writes --out from the checkpoint; without --out it
 * says there is nothing to train. */
static void test_finished_run_writes_out(void **state)
{
    (void)state;
    char out[4096], cmd[1024];
    const char *small = "build/08_training --train --train-size 64 --test-size 16 "
                        "--epochs 1 --batch-size 16 --checkpoint build/done.safetensors";
    unlink("build/done.safetensors");
    unlink("build/done_out.safetensors");
    assert_int_equal(run_command(small, out, sizeof out), 0);
    snprintf(cmd, sizeof cmd, "%s --resume build/done.safetensors", small);
    assert_int_equal(run_command(cmd, out, sizeof out), 1);
    assert_non_null(strstr(out, "leaves nothing to train"));
    snprintf(cmd, sizeof cmd, "%s --resume build/done.safetensors --out "
             "build/done_out.safetensors", small);
    assert_int_equal(run_command(cmd, out, sizeof out), 0);
    assert_non_null(strstr(out, "--out is written from it"));
    Model m;
    Error err;
    assert_ok(model_load(&m, "build/done_out.safetensors", &err));
    model_free(&m);
    unlink("build/done.safetensors");
    unlink("build/done_out.safetensors");
}

/* --train --plot-data DIR writes the loss log the figures read into DIR
 * (make demo's training_loss and learning_rate plots): one row per
 * optimizer step after the header; with --validate-every 2 steps 2 and 4
 * carry a validation loss, steps 1 and 3 none. */
static void test_plot_data_writes_the_loss_log(void **state)
{
    (void)state;
    char out[4096];
    unlink("build/plot_test/train_log.csv");
    unlink("build/plot_test/attention_map.dat");
    assert_int_equal(run_command("build/08_training --train --train-size 64 --test-size 16 "
                                 "--epochs 1 --batch-size 16 --plot-data build/plot_test "
                                 "--validate-every 2", out, sizeof out), 0);
    FILE *f = fopen("build/plot_test/train_log.csv", "r");
    assert_non_null(f);
    char line[256];
    int rows = 0;
    assert_non_null(fgets(line, sizeof line, f));
    assert_int_equal(strncmp(line, "step,epoch,lr,train_loss", 24), 0);
    while (fgets(line, sizeof line, f)) {
        rows++;
        const char *field = line;              /* the fifth: val_loss */
        for (int commas = 0; commas < 4; commas++) field = strchr(field, ',') + 1;
        assert_int_equal(*field != ',', rows % 2 == 0);
    }
    fclose(f);
    assert_int_equal(rows, 4);   /* 64 sequences in batches of 16, one epoch */
    unlink("build/plot_test/train_log.csv");
    unlink("build/plot_test/attention_map.dat");
    rmdir("build/plot_test");
}

/* Every chapter program answers --help with its usage and exit status 0. */
static void test_every_program_has_help(void **state)
{
    (void)state;
    static const char *const programs[] = {
        "00_foundations", "01_tokenization", "02_sdpa", "03_mha", "04_layernorm",
        "05_encoder", "06_decoder", "07_model", "08_training", "09_translation",
        "10_classification", "11_set_anomaly", "12_generation"};
    char out[4096], cmd[256];
    for (size_t i = 0; i < sizeof programs / sizeof programs[0]; i++) {
        snprintf(cmd, sizeof cmd, "build/%s --help", programs[i]);
        assert_int_equal(run_command(cmd, out, sizeof out), 0);
        assert_non_null(strstr(out, "usage: "));
    }
    assert_int_equal(run_command("build/10_classification --train --help", out, sizeof out), 0);
    assert_non_null(strstr(out, "--vocab-size N"));
    assert_non_null(strstr(out, "(default 8192)"));
}

/* A model the options describe that cannot be built is refused naming the
 * options that set its sizes, with their values. */
static void test_config_errors_name_the_options(void **state)
{
    TinyRun r;
    Error err;
    tiny_run(&r, 0.0f);
    static const ConfigOptions names = {NULL, {{NULL, NULL}}};   /* the table's options */
    assert_ok(options_check_config(&r.cfg, &names, &err));
    r.cfg.dim_feedforward = 2000000000;
    assert_int_equal(options_check_config(&r.cfg, &names, &err), -1);
    print_message("  %s\n", err.msg);
    assert_non_null(strstr(err.msg, "dim_feedforward 2000000000"));
    assert_non_null(strstr(err.msg, "(the options: --d-model 8, --heads 2, --ffn 2000000000, "
                                    "--layers 1)"));
    tiny_free(&r);
}

/* A resumed run must describe the checkpoint's model: the first field that
 * differs is named with both values, the checkpoint and the option. */
static void test_checkpoint_config_must_match(void **state)
{
    (void)state;
    ModelConfig saved = {0};
    saved.kind = MODEL_LABELLER;
    saved.src_vocab = saved.tgt_vocab = 10;
    saved.d_model = 32;
    saved.nhead = 1;
    saved.dim_feedforward = 64;
    saved.num_encoder_layers = 1;
    saved.max_len = 16;
    saved.pad_id = -1;
    saved.eps = 1e-5f;
    saved.dropout = 0.1f;
    const ConfigOptions names = {"--model", {{"src_vocab", "--categories"},
                                             {"tgt_vocab", "--categories"},
                                             {"max_len", "--seq-len"}}};
    Error err;
    ModelConfig wanted = saved;
    assert_ok(checkpoint_check_config("ck.safetensors", &saved, &wanted, &names, &err));
    wanted.dim_feedforward = 128;
    wanted.dropout = 0.2f;                        /* the first difference is named */
    assert_int_equal(checkpoint_check_config("ck.safetensors", &saved, &wanted, &names, &err),
                     -1);
    print_message("  %s\n", err.msg);
    assert_non_null(strstr(err.msg, "--resume: ck.safetensors holds a model with "
                                    "dim_feedforward 64, the options ask for 128 (--ffn"));
    wanted = saved;
    wanted.kind = MODEL_SEQ2SEQ;
    assert_int_equal(checkpoint_check_config("ck.safetensors", &saved, &wanted, &names, &err),
                     -1);
    assert_non_null(strstr(err.msg, "holds a labeller model, the options ask for a seq2seq "
                                    "one (--model"));
    wanted = saved;
    wanted.eps = 1e-6f;                           /* no option sets eps */
    assert_int_equal(checkpoint_check_config("ck.safetensors", &saved, &wanted, &names, &err),
                     -1);
    assert_non_null(strstr(err.msg, "eps 1e-05, the options ask for 1e-06 (no option sets it"));
}

/* Three epochs straight, and one epoch + checkpoint + two resumed epochs,
 * end with bit-identical weights, optimizer moments and loss logs; with
 * dropout on, so the dropout stream must be restored too. */
static void test_resume_bit_identical(void **state)
{
    TinyRun r;
    Model a, b, c;
    OptimState oa, ob, oc;
    TrainState sa, sb, sc;
    StepResult val;
    Error err;
    char dir[] = "/tmp/test08XXXXXX", ckpt[256], log_a[256], log_b[256];
    assert_non_null(mkdtemp(dir));
    snprintf(ckpt, sizeof ckpt, "%s/run.safetensors", dir);
    snprintf(log_a, sizeof log_a, "%s/a.csv", dir);
    snprintf(log_b, sizeof log_b, "%s/b.csv", dir);
    tiny_run(&r, 0.1f);
    Examples train = examples_of_task(&r.train, r.cfg.kind);
    Examples held = examples_of_task(&r.val, r.cfg.kind);

    fresh_start(&r, &a, &oa, &sa);
    r.report.log_path = log_a;
    assert_ok(train_run(&a, &oa, &sa, &r.o, &train, &held, &val, &err));

    fresh_start(&r, &b, &ob, &sb);
    r.report.log_path = log_b;
    r.report.checkpoint = ckpt;
    r.o.stop_after = 1;
    assert_ok(train_run(&b, &ob, &sb, &r.o, &train, &held, &val, &err));
    r.o.stop_after = 0;
    r.report.checkpoint = NULL;
    if (checkpoint_load(ckpt, &c, &oc, &sc, &err) != 0) {
        print_error("%s\n", err.msg);
        fail();
    }
    assert_int_equal(sc.epoch, 1);
    assert_ok(train_run(&c, &oc, &sc, &r.o, &train, &held, &val, &err));

    assert_int_equal(a.num_params, c.num_params);
    assert_int_equal(oa.step, oc.step);
    assert_memory_equal(a.params, c.params, a.num_params * sizeof(float));
    assert_memory_equal(oa.slots[ADAM_M], oc.slots[ADAM_M], a.num_params * sizeof(float));
    assert_memory_equal(oa.slots[ADAM_V], oc.slots[ADAM_V], a.num_params * sizeof(float));
    printf("resumed after epoch 1 of 3: %zu weights and both moments bit-identical, step %lld\n",
           a.num_params, (long long)oa.step);
    /* the resumed log, rows 1..step, is the straight run's (but the last
     * column, the wall time) */
    FILE *fa = fopen(log_a, "r"), *fb = fopen(log_b, "r");
    assert_non_null(fa);
    assert_non_null(fb);
    char la[512], lb[512];
    int rows = 0;
    while (fgets(la, sizeof la, fa)) {
        assert_non_null(fgets(lb, sizeof lb, fb));
        assert_non_null(strrchr(la, ','));
        assert_non_null(strrchr(lb, ','));
        *strrchr(la, ',') = '\0';
        *strrchr(lb, ',') = '\0';
        assert_string_equal(la, lb);
        rows++;
    }
    assert_null(fgets(lb, sizeof lb, fb));
    assert_int_equal(rows, 1 + oa.step);
    fclose(fa), fclose(fb);
    model_free(&a), model_free(&b), model_free(&c);
    optim_state_free(&oa), optim_state_free(&ob), optim_state_free(&oc);
    tiny_free(&r);
    unlink(ckpt), unlink(log_a), unlink(log_b), rmdir(dir);
}

/* A checkpoint that is truncated, or not a checkpoint, is refused with one
 * line naming the file; nothing is left allocated (valgrind checks). */
static void test_checkpoint_refused(void **state)
{
    TinyRun r;
    Model m, back;
    OptimState opt, opt_back;
    TrainState st, st_back;
    Error err;
    char dir[] = "/tmp/test08XXXXXX", path[256], cut[256];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/ok.safetensors", dir);
    snprintf(cut, sizeof cut, "%s/cut.safetensors", dir);
    tiny_run(&r, 0.0f);
    fresh_start(&r, &m, &opt, &st);
    assert_ok(checkpoint_save(path, &m, &opt, &st, NULL, &err));

    /* the same file, cut short */
    FILE *f = fopen(path, "rb"), *g = fopen(cut, "wb");
    assert_non_null(f);
    assert_non_null(g);
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf, f);
    fwrite(buf, 1, n / 2, g);
    fclose(f), fclose(g);
    assert_int_equal(checkpoint_load(cut, &back, &opt_back, &st_back, &err), -1);
    printf("truncated: %s\n", err.msg);
    assert_non_null(strstr(err.msg, cut));
    assert_null(strchr(err.msg, '\n'));

    /* a golden case file is safetensors but no checkpoint */
    char golden[256];
    snprintf(golden, sizeof golden, "golden/%s/adam_n10_K5.safetensors", CHAPTER);
    assert_int_equal(checkpoint_load(golden, &back, &opt_back, &st_back, &err), -1);
    printf("not a checkpoint: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "model.kind"));

    model_free(&m);
    optim_state_free(&opt);
    tiny_free(&r);
    unlink(path), unlink(cut), rmdir(dir);
}

/* The malformed-input corpus of this chapter (tests/malformed/08_training/): each
 * checkpoint gets a one-line error naming it, and no output appears. */
static int read_checkpoint(const char *path, const char *out_path, Error *err)
{
    Model m;
    OptimState opt;
    TrainState st;
    (void)out_path;
    if (checkpoint_load(path, &m, &opt, &st, err) != 0) return -1;
    optim_state_free(&opt);
    model_free(&m);
    return 0;
}

static void test_malformed_corpus(void **state)
{
    (void)state;
    check_malformed_corpus("08_training", read_checkpoint, 5);
}

int main(void)
{
    /* Not static: the table reads entries of other arrays at run time (C has
     * no constant expression for them, and clang says so). */
    const struct CMUnitTest tests[] = {
        GOLDEN_TEST(test_cross_entropy_case, "cross_entropy_6x10"),
        GOLDEN_TEST(test_cross_entropy_case, "cross_entropy_8x7_ignore"),
        GOLDEN_TEST(test_cross_entropy_case, "cross_entropy_12x5_ignore_ls10"),
        GOLDEN_TEST(test_cross_entropy_case, "cross_entropy_16x13_ignore0_ls10"),
        GOLDEN_TEST(test_cross_entropy_case, "cross_entropy_4x6_all_ignored"),
        GOLDEN_TEST(test_cross_entropy_case, "cross_entropy_4x6_all_ignored_ls10"),
        GOLDEN_TEST(test_cross_entropy_case, "cross_entropy_5x1_V1"),
        GOLDEN_TEST(test_cross_entropy_case, "cross_entropy_5x1_V1_ls10"),
        GOLDEN_TEST(test_cross_entropy_case, "cross_entropy_8x9_large_logits"),
        GOLDEN_TEST(test_cross_entropy_case, "cross_entropy_8x9_large_logits_ls10"),
        GOLDEN_TEST(test_cross_entropy_case, "cross_entropy_20x4_ties"),
        GOLDEN_TEST(test_cross_entropy_case, "cross_entropy_6x8_ls100"),
        GOLDEN_TEST(test_cross_entropy_case, "cross_entropy_256x10_reverse_task"),
        GOLDEN_TEST(test_cross_entropy_case, "cross_entropy_backward_6x10"),
        GOLDEN_TEST(test_cross_entropy_case, "cross_entropy_backward_8x7_ignore"),
        GOLDEN_TEST(test_cross_entropy_case, "cross_entropy_backward_12x5_ignore_ls10"),
        GOLDEN_TEST(test_cross_entropy_case, "cross_entropy_backward_16x13_ignore0_ls10"),
        GOLDEN_TEST(test_cross_entropy_case, "cross_entropy_backward_4x6_all_ignored"),
        GOLDEN_TEST(test_cross_entropy_case, "cross_entropy_backward_4x6_all_ignored_ls10"),
        GOLDEN_TEST(test_cross_entropy_case, "cross_entropy_backward_5x1_V1"),
        GOLDEN_TEST(test_cross_entropy_case, "cross_entropy_backward_5x1_V1_ls10"),
        GOLDEN_TEST(test_cross_entropy_case, "cross_entropy_backward_8x9_large_logits"),
        GOLDEN_TEST(test_cross_entropy_case, "cross_entropy_backward_8x9_large_logits_ls10"),
        GOLDEN_TEST(test_cross_entropy_case, "cross_entropy_backward_20x4_ties"),
        GOLDEN_TEST(test_cross_entropy_case, "cross_entropy_backward_6x8_ls100"),
        GOLDEN_TEST(test_cross_entropy_case, "cross_entropy_backward_256x10_reverse_task"),
        cmocka_unit_test(test_ce_hand_values),
        cmocka_unit_test(test_ce_uniform_logits),
        cmocka_unit_test(test_ce_ignored_rows),
        cmocka_unit_test(test_ce_all_ignored),
        cmocka_unit_test(test_ce_bad_target),
        cmocka_unit_test(test_ce_huge_logits),
        cmocka_unit_test(test_ce_finite_differences),
        cmocka_unit_test(test_ce_thread_count_independent),

        GOLDEN_TEST(test_adam_case, "adam_n10_K5"),
        GOLDEN_TEST(test_adam_case, "adam_wd10_n16_K5"),
        GOLDEN_TEST(test_adam_case, "adamw_wd1_n16_K5"),
        GOLDEN_TEST(test_adam_case, "adamw_wd10_n12_K5_small_grads"),
        GOLDEN_TEST(test_adam_case, "adam_paper_noam_n20_K6"),
        GOLDEN_TEST(test_adam_case, "adamw_cosine_n20_K5"),
        GOLDEN_TEST(test_adam_case, "adam_zero_grads_n24_K4"),
        GOLDEN_TEST(test_adam_case, "adamw_zero_grads_n24_K4"),
        GOLDEN_TEST(test_adam_case, "adam_first_step_n8_K1"),
        GOLDEN_TEST(test_adam_case, "adamw_n1000_K10"),
        cmocka_unit_test(test_adam_defaults),
        cmocka_unit_test(test_adam_config_check),
        cmocka_unit_test(test_adam_first_step),
        cmocka_unit_test(test_adamw_decay_only),
        cmocka_unit_test(test_adam_thread_count_independent),

        GOLDEN_TEST(test_clip_case, "clip_grad_norm_below_n50"),
        GOLDEN_TEST(test_clip_case, "clip_grad_norm_above_n50"),
        GOLDEN_TEST(test_clip_case, "clip_grad_norm_above_n10000"),
        GOLDEN_TEST(test_clip_case, "clip_grad_norm_zero_n20"),
        GOLDEN_TEST(test_clip_case, "clip_grad_norm_above_n1"),
        GOLDEN_TEST(test_clip_case, "clip_grad_norm_just_below_n30"),
        cmocka_unit_test(test_clip_grad_norm_values),
        cmocka_unit_test(test_clip_thread_count_independent),

        GOLDEN_TEST(test_schedule_case, "lr_cosine_w100_m2000"),
        GOLDEN_TEST(test_schedule_case, "lr_cosine_w50_m500_past_end"),
        GOLDEN_TEST(test_schedule_case, "lr_cosine_w1_m10"),
        GOLDEN_TEST(test_schedule_case, "lr_cosine_w20_m10"),
        GOLDEN_TEST(test_schedule_case, "lr_cosine_w8_m40"),
        GOLDEN_TEST(test_schedule_case, "lr_noam_d512_w4000"),
        GOLDEN_TEST(test_schedule_case, "lr_noam_d32_w10"),
        GOLDEN_TEST(test_schedule_case, "lr_noam_d1_w1"),
        cmocka_unit_test(test_cosine_values),
        cmocka_unit_test(test_noam_values),

        GOLDEN_TEST(test_seq_dataset_case, "seq_dataset_reverse_8x16_C10_seed42"),
        GOLDEN_TEST(test_seq_dataset_case, "seq_dataset_copy_5x7_C3_seed1"),
        GOLDEN_TEST(test_seq_dataset_case, "seq_dataset_reverse_3x4_C1"),
        GOLDEN_TEST(test_seq_dataset_case, "seq_dataset_reverse_4x5_C1000_seed9"),
        GOLDEN_TEST(test_batcher_case, "batcher_shuffle_n10_E3_seed7"),
        GOLDEN_TEST(test_batcher_case, "batcher_shuffle_n1_E2"),
        GOLDEN_TEST(test_batcher_case, "batcher_shuffle_n1000_E2_seed123"),
        GOLDEN_TEST(test_case_eval, "batch_encoder_reverse_n10_S6_N4"),
        GOLDEN_TEST(test_case_eval, "batch_seq2seq_copy_n10_S5_N6"),
        GOLDEN_TEST(test_case_eval, "batch_seq2seq_reverse_n1_S1_N3"),
        cmocka_unit_test(test_task_parse),
        cmocka_unit_test(test_dataset_tasks),
        cmocka_unit_test(test_dataset_deterministic),
        cmocka_unit_test(test_dataset_split),
        cmocka_unit_test(test_batch_layouts),
        cmocka_unit_test(test_batcher_covers_every_index),
        cmocka_unit_test(test_batcher_shuffle_deterministic),

        cmocka_unit_test(test_time_now),
        cmocka_unit_test(test_progress_plain_lines),
        cmocka_unit_test(test_csv_log_new),
        cmocka_unit_test(test_csv_log_resume_trims),
        cmocka_unit_test(test_csv_log_bad_files),

        /* The case evaluator of build/08_training, one golden per op and the NaN loss. */
        GOLDEN_TEST_AS(test_case_eval, "case_eval", "cross_entropy_16x13_ignore0_ls10"),
        GOLDEN_TEST_AS(test_case_eval, "case_eval", "cross_entropy_backward_12x5_ignore_ls10"),
        GOLDEN_TEST_AS(test_case_eval, "case_eval", "cross_entropy_backward_4x6_all_ignored_ls10"),
        GOLDEN_TEST_AS(test_case_eval, "case_eval", "adam_paper_noam_n20_K6"),
        GOLDEN_TEST_AS(test_case_eval, "case_eval", "adamw_wd1_n16_K5"),
        GOLDEN_TEST_AS(test_case_eval, "case_eval", "clip_grad_norm_above_n10000"),
        GOLDEN_TEST_AS(test_case_eval, "case_eval", "lr_cosine_w50_m500_past_end"),
        GOLDEN_TEST_AS(test_case_eval, "case_eval", "lr_noam_d512_w4000"),
        GOLDEN_TEST_AS(test_case_eval, "case_eval", "seq_dataset_reverse_8x16_C10_seed42"),
        GOLDEN_TEST_AS(test_case_eval, "case_eval", "batcher_shuffle_n10_E3_seed7"),

        /* The training loop: 100 steps against PyTorch's, resuming, checkpoints. */
        GOLDEN_TEST(test_case_eval, "parity_reverse"),
        GOLDEN_TEST(test_case_eval, "parity_copy_seq2seq"),
        GOLDEN_TEST(test_case_eval, "parity_classifier"),
        GOLDEN_TEST(test_case_eval, "parity_lm"),
        cmocka_unit_test(test_resume_bit_identical),
        cmocka_unit_test(test_diverged_run_stops),
        cmocka_unit_test(test_diverged_validation_stops),
        cmocka_unit_test(test_checkpoint_counters_checked),
        cmocka_unit_test(test_checkpoint_config_must_match),
        cmocka_unit_test(test_train_refuses_wrapping_sizes),
        cmocka_unit_test(test_run_paths_checked),
        cmocka_unit_test(test_every_output_resolved_and_locked),
        cmocka_unit_test(test_finished_run_writes_out),
        cmocka_unit_test(test_rank_hash_covers_the_run),
        cmocka_unit_test(test_plot_data_writes_the_loss_log),
        cmocka_unit_test(test_every_program_has_help),
        cmocka_unit_test(test_config_errors_name_the_options),
        cmocka_unit_test(test_output_paths_checked),
        cmocka_unit_test(test_checkpoint_refused),

#define BAD_TEST(i) {BAD[i].name, test_bad_case, NULL, NULL, (void *)&BAD[i]}
        BAD_TEST(0), BAD_TEST(1), BAD_TEST(2), BAD_TEST(3), BAD_TEST(4), BAD_TEST(5),
        BAD_TEST(6), BAD_TEST(7), BAD_TEST(8), BAD_TEST(9), BAD_TEST(10), BAD_TEST(11),
        BAD_TEST(12), BAD_TEST(13), BAD_TEST(14), BAD_TEST(15), BAD_TEST(16), BAD_TEST(17),
        BAD_TEST(18), BAD_TEST(19), BAD_TEST(20), BAD_TEST(21), BAD_TEST(22), BAD_TEST(23),
        BAD_TEST(24), BAD_TEST(25), BAD_TEST(26), BAD_TEST(27), BAD_TEST(28), BAD_TEST(29),
        BAD_TEST(30), BAD_TEST(31), BAD_TEST(32), BAD_TEST(33), BAD_TEST(34), BAD_TEST(35),
        BAD_TEST(36), BAD_TEST(37), BAD_TEST(38), BAD_TEST(39), BAD_TEST(40), BAD_TEST(41),
        cmocka_unit_test(test_bad_case_writes_no_file),
        cmocka_unit_test(test_malformed_corpus),
    };
    _Static_assert(sizeof BAD / sizeof BAD[0] == 42, "one BAD_TEST per bad case");
    return run_chapter_tests("chapter 08: training (cross-entropy, Adam, clipping, "
                             "schedules, data, loss log)", tests);
}
