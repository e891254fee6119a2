/*
 * test_hostdev.c - the CPU test of cuda/hostdev.h, the math the kernels
 * share with the C side. Plain C, gcc, cmocka: it runs on any machine, with
 * or without a GPU (make test-cuda runs it first).
 *
 * Each helper is checked against the chapter function it follows (linked
 * from build/libtransformer.a) or against values worked out by hand, so a
 * kernel that calls the helper inherits the check.
 *
 * Letters: the chapters'; R counts rows, of C values in the softmax tests
 * (chapter 00's local letters) and of width D in the LayerNorm ones.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "hostdev.h"
#include "layernorm.h"
#include "positional.h"
#include "rng.h"
#include "softmax.h"

/* Fails unless |a - b| <= atol + rtol |b| everywhere; prints the max error. */
static void assert_near(const char *what, const float *a, const float *b, int n, double atol,
                        double rtol)
{
    double worst = 0.0;
    int bad = -1;
    for (int i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (isnan(a[i]) || isnan(b[i]) || d > atol + rtol * fabs(b[i])) {
            if (bad < 0) bad = i;
        }
        if (d > worst) worst = d;
    }
    printf("    %-44s max abs err %.3g\n", what, worst);
    if (bad >= 0) fail_msg("%s: [%d] is %.9g, expected %.9g", what, bad, a[bad], b[bad]);
}

static void fill(Rng *rng, float *x, int n, float lo, float hi)
{
    for (int i = 0; i < n; i++) x[i] = lo + (hi - lo) * rng_uniform(rng);
}

/* ---- softmax ------------------------------------------------------------ */

static void test_softmax_row_matches_chapter(void **state)
{
    (void)state;
    enum { R = 4, C = 37 };
    float x[R * C], want[R * C], got[R * C];
    Rng rng;
    rng_seed(&rng, 1, 0);
    fill(&rng, x, R * C, -5.0f, 5.0f);
    for (int c = 0; c < C; c += 3) x[1 * C + c] = -INFINITY;      /* some entries masked */
    for (int c = 0; c < C; c++) x[2 * C + c] = -INFINITY;         /* a fully masked row */
    for (int c = 0; c < C; c++) x[3 * C + c] = 1e4f + x[3 * C + c]; /* exp() would overflow */
    softmax_forward(want, x, R, C);
    for (int r = 0; r < R; r++) hd_softmax_row(got + r * C, x + r * C, C);
    assert_near("hd_softmax_row vs softmax_forward", got, want, R * C, 1e-7, 0.0);
    for (int c = 0; c < C; c++) assert_true(got[2 * C + c] == 0.0f);   /* zeros, not NaN */
}

static void test_softmax_prob_rules(void **state)
{
    (void)state;
    assert_true(hd_softmax_prob(-INFINITY, 2.0f, 0.5f) == 0.0f);     /* masked entry */
    assert_true(hd_softmax_prob(-INFINITY, -INFINITY, 0.0f) == 0.0f); /* masked row */
    assert_true(hd_softmax_prob(3.0f, 3.0f, 0.25f) == 0.25f);         /* the max: exp(0) */
}

/* Folding the scores in one at a time gives the max exactly and the sum of
 * a two-pass softmax; a masked prefix does not poison it with NaN. */
static void test_online_softmax_matches_two_pass(void **state)
{
    (void)state;
    enum { C = 100 };
    float x[C];
    Rng rng;
    rng_seed(&rng, 2, 0);
    fill(&rng, x, C, -20.0f, 20.0f);
    for (int c = 0; c < 10; c++) x[c] = -INFINITY;                   /* masked prefix */
    float m = -INFINITY, l = 0.0f, row_max = -INFINITY;
    for (int c = 0; c < C; c++) {
        hd_online_softmax_add(&m, &l, x[c]);
        row_max = fmaxf(row_max, x[c]);
        assert_false(isnan(m) || isnan(l));
    }
    double sum = 0.0;
    for (int c = 0; c < C; c++) sum += exp((double)x[c] - row_max);
    float want = (float)sum;
    assert_true(m == row_max);
    assert_near("online sum vs two-pass sum", &l, &want, 1, 0.0, 1e-5);
    float lse = hd_online_lse(m, l), want_lse = (float)(row_max + log(sum));
    assert_near("online lse", &lse, &want_lse, 1, 1e-5, 1e-6);

    float m2 = -INFINITY, l2 = 0.0f;                                  /* all masked */
    for (int c = 0; c < 5; c++) hd_online_softmax_add(&m2, &l2, -INFINITY);
    assert_true(m2 == -INFINITY && l2 == 0.0f);
    assert_true(hd_online_lse(m2, l2) == -INFINITY);
    assert_true(hd_online_rescale(-INFINITY, -INFINITY) == 0.0f);
}

/* ---- LayerNorm ---------------------------------------------------------- */

/* The statistics, and the deviations made from them, bit for bit those of
 * the chapter: a row of values in [-2, 2], a constant row, large means (the
 * mean must be kept as the pair x[0] + delta), a near-constant row. */
static void test_layernorm_stats_match_chapter(void **state)
{
    (void)state;
    enum { R = 5, D = 48 };
    float x[R * D], y[R * D], mean[R], rstd[R], got_mean[R], got_rstd[R], got_y[R * D];
    Rng rng;
    rng_seed(&rng, 3, 0);
    fill(&rng, x, R * D, -2.0f, 2.0f);
    for (int c = 0; c < D; c++) x[1 * D + c] = 0.375f;                /* constant row */
    for (int c = 0; c < D; c++) x[2 * D + c] += 1e4f;                 /* large mean */
    for (int c = 0; c < D; c++) x[3 * D + c] = 1.0f + 1e-3f * x[3 * D + c]; /* near constant */
    for (int c = 0; c < D; c++) x[4 * D + c] += 1e6f;                 /* values 1/16 apart */
    layernorm_forward(y, mean, rstd, x, NULL, NULL, 1, R, D, 1e-5f);  /* y = n */
    for (int r = 0; r < R; r++) {
        const float *row = x + r * D;
        float delta;
        hd_layernorm_row_stats(row, D, 1e-5f, &delta, &got_rstd[r]);
        got_mean[r] = row[0] + delta;
        for (int c = 0; c < D; c++)
            got_y[r * D + c] = hd_layernorm_dev(row[c], row[0], delta) * got_rstd[r];
    }
    assert_near("hd_layernorm_row_stats mean vs chapter", got_mean, mean, R, 0.0, 1e-7);
    assert_near("hd_layernorm_row_stats rstd vs chapter", got_rstd, rstd, R, 0.0, 1e-6);
    assert_near("hd_layernorm_dev * rstd vs chapter's n", got_y, y, R * D, 0.0, 0.0);
    assert_true(got_mean[1] == 0.375f);                              /* exactly the value */
    assert_true(got_rstd[1] == 1.0f / sqrtf(1e-5f));                 /* var 0: 1/sqrt(eps) */
}

static void test_layernorm_dx_matches_chapter(void **state)
{
    (void)state;
    enum { R = 3, D = 20 };
    float x[R * D], dy[R * D], w[D], y[R * D], mean[R], rstd[R], want[R * D] = {0}, got[R * D];
    float dw[D] = {0};
    Rng rng;
    rng_seed(&rng, 4, 0);
    fill(&rng, x, R * D, -3.0f, 3.0f);
    fill(&rng, dy, R * D, -1.0f, 1.0f);
    fill(&rng, w, D, 0.5f, 1.5f);
    layernorm_forward(y, mean, rstd, x, w, NULL, 1, R, D, 1e-5f);
    layernorm_backward(want, dw, NULL, dy, x, w, mean, rstd, 1, R, D);
    for (int r = 0; r < R; r++) {
        float mg = 0.0f, mgn = 0.0f;
        for (int c = 0; c < D; c++) {
            float n = (x[r * D + c] - mean[r]) * rstd[r], g = dy[r * D + c] * w[c];
            mg += g;
            mgn += g * n;
        }
        mg /= D;
        mgn /= D;
        for (int c = 0; c < D; c++) {
            float n = (x[r * D + c] - mean[r]) * rstd[r], g = dy[r * D + c] * w[c];
            got[r * D + c] = hd_layernorm_dx(g, n, mg, mgn, rstd[r]);
        }
    }
    assert_near("hd_layernorm_dx vs layernorm_backward", got, want, R * D, 1e-6, 1e-6);
}

/* ---- positions ---------------------------------------------------------- */

static void test_sinusoidal_matches_chapter(void **state)
{
    (void)state;
    enum { max_len = 60, D = 7 };
    float want[max_len * D], got[max_len * D];
    positional_sinusoidal_table(want, max_len, D);
    for (int pos = 0; pos < max_len; pos++)
        for (int d = 0; d < D; d++) got[pos * D + d] = hd_sinusoidal(pos, d, D);
    assert_near("hd_sinusoidal vs positional_sinusoidal_table", got, want, max_len * D, 1e-7, 0.0);
    assert_true(hd_sinusoidal(0, 0, D) == 0.0f && hd_sinusoidal(0, 1, D) == 1.0f);
}

/* ---- cross-entropy ------------------------------------------------------ */

static void test_cross_entropy_hand_values(void **state)
{
    (void)state;
    const float x[3] = {1.0f, 2.0f, 3.0f};
    float loss, lse;
    /* lse = 3 + log(e^-2 + e^-1 + 1) = 3.40760596; loss = lse - 3 */
    assert_int_equal(hd_ce_row(x, 3, 2, -100, 0.0f, &loss, &lse), 1);
    float want = 0.40760596f, want_lse = 3.40760596f;
    assert_near("loss, no smoothing", &loss, &want, 1, 1e-6, 0.0);
    assert_near("lse", &lse, &want_lse, 1, 1e-6, 0.0);
    /* smoothing 0.1: 0.9 * 0.40760596 + 0.1 * (3 lse - 6) / 3 = 0.50760596 */
    hd_ce_row(x, 3, 2, -100, 0.1f, &loss, &lse);
    want = 0.50760596f;
    assert_near("loss, smoothing 0.1", &loss, &want, 1, 1e-6, 0.0);
    /* an ignored row: no loss, does not count */
    assert_int_equal(hd_ce_row(x, 3, -100, -100, 0.1f, &loss, &lse), 0);
    assert_true(loss == 0.0f);
}

/* The gradient against central differences of the row loss, and its sum
 * over the row is 0 (both the softmax and the smoothed target sum to 1). */
static void test_cross_entropy_gradient(void **state)
{
    (void)state;
    enum { V = 6 };
    float x[V];
    Rng rng;
    rng_seed(&rng, 5, 0);
    fill(&rng, x, V, -2.0f, 2.0f);
    const float e = 0.2f;
    const int t = 4;
    float loss, lse, got[V], want[V], sum = 0.0f;
    hd_ce_row(x, V, t, -100, e, &loss, &lse);
    for (int j = 0; j < V; j++) {
        got[j] = hd_ce_grad(x[j], lse, j == t, V, e);
        sum += got[j];
        float h = 1e-2f, keep = x[j], up, down, l2;
        x[j] = keep + h;
        hd_ce_row(x, V, t, -100, e, &up, &l2);
        x[j] = keep - h;
        hd_ce_row(x, V, t, -100, e, &down, &l2);
        x[j] = keep;
        want[j] = (up - down) / (2 * h);
    }
    assert_near("hd_ce_grad vs central differences", got, want, V, 2e-4, 1e-3);
    assert_true(fabsf(sum) < 1e-6f);
}

/* ---- Adam / AdamW ------------------------------------------------------- */

static void test_lerp(void **state)
{
    (void)state;
    assert_true(hd_lerp(1.0f, 3.0f, 0.25f) == 1.5f);   /* start + w (end - start) */
    assert_true(hd_lerp(1.0f, 3.0f, 0.75f) == 2.5f);   /* end - (end - start)(1 - w) */
}

/* The first step moves every parameter by about lr against its gradient's
 * sign: m / sqrt(v) after bias correction is g / |g|. */
static void test_adam_first_step(void **state)
{
    (void)state;
    float p = 1.0f, m = 0.0f, v = 0.0f;
    hd_adam_update(&p, 0.5f, &m, &v, hd_adam_hyper(1e-3, 0.9, 0.999, 1e-8, 0.0, 0, 1));
    float want_p = 0.999f, want_m = 0.05f, want_v = 0.00025f;
    assert_near("Adam step 1: param", &p, &want_p, 1, 0.0, 1e-6);
    assert_near("Adam step 1: exp_avg", &m, &want_m, 1, 0.0, 1e-6);
    assert_near("Adam step 1: exp_avg_sq", &v, &want_v, 1, 0.0, 1e-6);

    /* AdamW: the decay multiplies the parameter first, 1 - lr wd = 0.99999 */
    p = 1.0f, m = 0.0f, v = 0.0f;
    hd_adam_update(&p, 0.5f, &m, &v, hd_adam_hyper(1e-3, 0.9, 0.999, 1e-8, 0.01, 1, 1));
    want_p = 0.99899f;
    assert_near("AdamW step 1: param", &p, &want_p, 1, 0.0, 1e-6);

    /* Adam with weight decay: L2, the gradient becomes 0.5 + 0.1 * 1 */
    p = 1.0f, m = 0.0f, v = 0.0f;
    hd_adam_update(&p, 0.5f, &m, &v, hd_adam_hyper(1e-3, 0.9, 0.999, 1e-8, 0.1, 0, 1));
    want_p = 0.999f, want_m = 0.06f;
    assert_near("Adam (L2) step 1: param", &p, &want_p, 1, 0.0, 1e-6);
    assert_near("Adam (L2) step 1: exp_avg", &m, &want_m, 1, 0.0, 1e-6);
}

/* Five steps against the torch.optim formulas evaluated in double. */
static void test_adam_steps_match_double(void **state)
{
    (void)state;
    for (int decoupled = 0; decoupled < 2; decoupled++) {
        const double lr = 3e-3, b1 = 0.9, b2 = 0.98, eps = 1e-9, wd = 0.05;
        float p = 0.7f, m = 0.0f, v = 0.0f;
        double pd = 0.7, md = 0.0, vd = 0.0;
        const float grads[5] = {0.3f, -0.1f, 0.25f, 0.0f, -0.4f};
        for (int t = 1; t <= 5; t++) {
            AdamStep h = hd_adam_hyper(lr, b1, b2, eps, wd, decoupled, t);
            hd_adam_update(&p, grads[t - 1], &m, &v, h);
            double g = grads[t - 1];
            if (decoupled) pd *= 1.0 - lr * wd;
            else g += wd * pd;
            md = b1 * md + (1 - b1) * g;
            vd = b2 * vd + (1 - b2) * g * g;
            double denom = sqrt(vd) / sqrt(1 - pow(b2, t)) + eps;
            pd -= lr / (1 - pow(b1, t)) * md / denom;
        }
        float want = (float)pd;
        assert_near(decoupled ? "AdamW 5 steps vs double" : "Adam 5 steps vs double", &p, &want,
                    1, 0.0, 1e-6);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_softmax_row_matches_chapter),
        cmocka_unit_test(test_softmax_prob_rules),
        cmocka_unit_test(test_online_softmax_matches_two_pass),
        cmocka_unit_test(test_layernorm_stats_match_chapter),
        cmocka_unit_test(test_layernorm_dx_matches_chapter),
        cmocka_unit_test(test_sinusoidal_matches_chapter),
        cmocka_unit_test(test_cross_entropy_hand_values),
        cmocka_unit_test(test_cross_entropy_gradient),
        cmocka_unit_test(test_lerp),
        cmocka_unit_test(test_adam_first_step),
        cmocka_unit_test(test_adam_steps_match_double),
    };
    return cmocka_run_group_tests_name("cuda/hostdev.h on the CPU", tests, NULL, NULL);
}
