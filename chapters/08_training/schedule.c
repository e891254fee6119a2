/*
 * schedule.c - the two schedules (schedule.h; the chapter's README,
 * "Learning-rate schedules", says why and how steps are counted).
 */
#include "schedule.h"

#include <math.h>

#include "error.h"   /* not_implemented(), used by the exercise stubs */

double lr_cosine_warmup(int64_t step, int64_t warmup, int64_t max_iters)
{
    /* BEGIN SOLUTION */
    double s = (double)step;
    double factor = 0.5 * (1.0 + cos(M_PI * s / (double)max_iters));
    if (warmup > 0 && step <= warmup) factor *= s * 1.0 / (double)warmup;
    return factor;
    /* END SOLUTION */
}

double lr_noam(int64_t step, int d_model, int64_t warmup)
{
    /* BEGIN SOLUTION */
    double s = (double)(step + 1);     /* the paper counts steps from 1 */
    return pow((double)d_model, -0.5) * fmin(pow(s, -0.5), s * pow((double)warmup, -1.5));
    /* END SOLUTION */
}
