/* residual.c - see residual.h: out = x + f(x), and the gradient copied to both branches. */
#include "residual.h"

#include "error.h"   /* not_implemented(), used by the exercise stubs */

int residual_forward(float *out, const float *x, const float *fx, int n)
{
    /* BEGIN SOLUTION */
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) out[i] = x[i] + fx[i];
    return 0;
    /* END SOLUTION */
}

int residual_backward(float *dx, float *dfx, const float *dout, int n)
{
    /* BEGIN SOLUTION */
    /* d(x + fx)/dx = d(x + fx)/dfx = 1: both branches receive dout as it is. */
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < n; i++) {
        dx[i] += dout[i];
        dfx[i] += dout[i];
    }
    return 0;
    /* END SOLUTION */
}
