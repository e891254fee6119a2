/*
 * 04_layernorm.c - the chapter 04 program.
 *
 *     build/04_layernorm --demo
 *     build/04_layernorm --case in.safetensors --out out.safetensors
 *
 * The demo normalises the row [1, 2, 3, 4] (numbers you can check by hand,
 * README.md works them out), shows that a row shifted by 10000 gives the same
 * result while the one-pass variance formula does not, normalises a constant
 * row, runs the backward, and adds a residual. The case mode evaluates the
 * ops of this chapter (see cases/layernorm_case.h and reference/ch04_layernorm.py):
 *
 *     layernorm            input, weight, bias -> output
 *     layernorm_backward   input, weight, bias, grad_output
 *                          -> output, grad_input, grad_weight, grad_bias
 *     residual             input, sublayer_output -> output
 *     residual_backward    grad_output -> grad_input, grad_sublayer_output
 */
#include <stdio.h>

#include "casefile.h"
#include "layernorm.h"
#include "layernorm_case.h"
#include "residual.h"

static const char USAGE[] =
    "usage: 04_layernorm --demo\n"
    "       04_layernorm --case IN.safetensors --out OUT.safetensors\n";

static void print_row(const char *name, const float *v, int n)
{
    printf("  %-34s [", name);
    for (int i = 0; i < n; i++) printf(i ? ", %9.4f" : "%9.4f", v[i]);
    printf("]\n");
}

static int demo(void)
{
    enum { D = 4 };
    const float eps = LAYERNORM_DEFAULT_EPS;
    float x[D] = {1, 2, 3, 4};
    float gamma[D] = {2, 2, 2, 2}, beta[D] = {1, 1, 1, 1};
    float n[D], y[D], mean, rstd;

    printf("LayerNorm of one row, D = 4, eps = 1e-5\n");
    print_row("x", x, D);
    if (layernorm_forward(n, &mean, &rstd, x, NULL, NULL, 1, 1, D, eps) != 0) return -1;
    printf("  mean = %.4f, biased variance = %.4f, rstd = 1/sqrt(var + eps) = %.6f\n", mean,
           1.0f / (rstd * rstd) - eps, rstd);
    print_row("n = (x - mean) * rstd", n, D);
    if (layernorm_forward(y, NULL, NULL, x, gamma, beta, 1, 1, D, eps) != 0) return -1;
    print_row("y = n * weight + bias (2 and 1)", y, D);

    /* The same row shifted by 10000: the same n. The one-pass variance
     * mean(x^2) - mean^2, computed here in float32 for contrast, is ruined. */
    float big[D] = {10001, 10002, 10003, 10004}, nbig[D];
    if (layernorm_forward(nbig, &mean, &rstd, big, NULL, NULL, 1, 1, D, eps) != 0) return -1;
    float sum = 0.0f, sum_sq = 0.0f;
    for (int c = 0; c < D; c++) sum += big[c], sum_sq += big[c] * big[c];
    float one_pass = sum_sq / D - (sum / D) * (sum / D);
    printf("\nThe row shifted by 10000: mean %.1f, two-pass variance %.4f "
           "(one-pass formula in float32: %.4f)\n", mean, 1.0f / (rstd * rstd) - eps, one_pass);
    print_row("n", nbig, D);

    float flat[D] = {5, 5, 5, 5}, yflat[D];
    if (layernorm_forward(yflat, &mean, &rstd, flat, gamma, beta, 1, 1, D, eps) != 0) return -1;
    printf("\nA constant row: variance 0, rstd = 1/sqrt(eps) = %.2f, x - mean = 0 exactly\n",
           rstd);
    print_row("y = bias", yflat, D);

    /* Backward of y = LayerNorm(x) * 2 + 1 for the loss L = y[0]: dL/dy = [1, 0, 0, 0]. */
    float dy[D] = {1, 0, 0, 0}, dx[D] = {0}, dgamma[D] = {0}, dbeta[D] = {0};
    if (layernorm_forward(y, &mean, &rstd, x, gamma, beta, 1, 1, D, eps) != 0) return -1;
    if (layernorm_backward(dx, dgamma, dbeta, dy, x, gamma, &mean, &rstd, 1, 1, D) != 0)
        return -1;
    printf("\nBackward with dL/dy = [1, 0, 0, 0] (the loss is y[0])\n");
    print_row("dL/dx (sums to 0)", dx, D);
    print_row("dL/dweight = dy * n", dgamma, D);
    print_row("dL/dbias = dy", dbeta, D);

    /* A residual around a made-up sub-layer output f(x). */
    float fx[D] = {0.5f, -0.5f, 0.5f, -0.5f}, sum_out[D];
    float dout[D] = {1, 1, 1, 1}, dxr[D] = {0}, dfx[D] = {0};
    if (residual_forward(sum_out, x, fx, D) != 0) return -1;
    if (residual_backward(dxr, dfx, dout, D) != 0) return -1;
    printf("\nResidual: out = x + f(x); the gradient reaches both branches unchanged\n");
    print_row("f(x)", fx, D);
    print_row("x + f(x)", sum_out, D);
    print_row("dL/dx from dL/dout = 1", dxr, D);
    print_row("dL/df(x)", dfx, D);
    return 0;
}

int main(int argc, char **argv)
{
    return case_main(argc, argv, USAGE, demo, layernorm_case_eval);
}
