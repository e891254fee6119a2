/*
 * loss.c - cross-entropy and its gradient (the contract in loss.h; the
 * formulas in the chapter's README, "The loss: cross-entropy").
 */
#include "loss.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"   /* not_implemented(), used by the exercise stubs */

int cross_entropy(float *loss, float *dlogits, const float *logits, const int64_t *target,
                  int64_t rows, int V, int64_t ignore_index, float label_smoothing,
                  int64_t *count, int64_t *correct, Error *err)
{
    if (V < 1)
        return error_set(err, "cross_entropy: V is %d; there must be at least one class", V);
    if (rows < 0)
        return error_set(err, "cross_entropy: rows is %lld; it cannot be negative",
                         (long long)rows);
    if (!(label_smoothing >= 0.0f && label_smoothing <= 1.0f))   /* also refuses NaN */
        return error_set(err, "cross_entropy: label_smoothing is %g; it must lie in [0, 1]",
                         label_smoothing);
    int64_t n = 0;   /* rows that count towards the mean */
    for (int64_t r = 0; r < rows; r++) {
        if (target[r] == ignore_index) continue;
        if (target[r] < 0 || target[r] >= V)
            return error_set(err, "cross_entropy: row %lld has target %lld, outside the classes "
                             "0..%d (and not ignore_index %lld)", (long long)r,
                             (long long)target[r], V - 1, (long long)ignore_index);
        n++;
    }
    /* BEGIN SOLUTION */
    double *row_loss = malloc((size_t)(rows > 0 ? rows : 1) * sizeof *row_loss);
    if (!row_loss)
        return error_set(err, "cross_entropy: out of memory for %lld row losses",
                         (long long)rows);
    const double e = label_smoothing;
    const double uniform = e / V;          /* q_j for j != t */
    const double scale = 1.0 / (double)n;  /* d mean / d row loss; unused when n = 0 */
    int64_t hits = 0;
    int failed = 0;

    #pragma omp parallel reduction(+ : hits) reduction(| : failed)
    {
        /* This thread's exp(x_j - m) of the row at hand: the sum needs them,
         * and so does the gradient, which would otherwise compute each one
         * again (exp is most of this function's time). */
        double *ex = malloc((size_t)V * sizeof *ex);
        failed |= !ex;
        #pragma omp for schedule(static)
        for (int64_t r = 0; r < rows; r++) {
            if (!ex) continue;
            const float *x = logits + r * V;
            float *dx = dlogits ? dlogits + r * V : NULL;
            int64_t t = target[r];
            if (t == ignore_index) {           /* padding: no loss, no gradient */
                row_loss[r] = 0.0;
                if (dx) memset(dx, 0, (size_t)V * sizeof *dx);
                continue;
            }
            /* The maximum, which is also the prediction (the first maximum,
             * as torch.argmax picks). */
            int argmax = 0;
            double m = x[0];
            for (int j = 1; j < V; j++)
                if (x[j] > m) m = x[j], argmax = j;
            double sum_exp = 0.0;
            for (int j = 0; j < V; j++) sum_exp += ex[j] = exp(x[j] - m);
            /* log p_j = (x_j - m) - log_sum, kept in this form: with logits
             * of 1e30, lse = m + log_sum would round log_sum away. */
            double log_sum = log(sum_exp);
            /* -log p_t, and with smoothing the mean of -log p_j over all
             * classes. torch skips the second term when e = 0 (it would be
             * 0 * inf for a logit of -inf). */
            double nll = log_sum - (x[t] - m);
            double smooth = 0.0;
            if (e > 0.0)
                for (int j = 0; j < V; j++) smooth += log_sum - (x[j] - m);
            row_loss[r] = (1.0 - e) * nll + uniform * smooth;
            hits += argmax == t;
            if (dx)
                for (int j = 0; j < V; j++) {
                    double q = (j == t ? 1.0 - e : 0.0) + uniform;   /* the smoothed target */
                    dx[j] = (float)((ex[j] / sum_exp - q) * scale);    /* (p_j - q_j) / n */
                }
        }
        free(ex);
    }
    if (failed) {
        free(row_loss);
        return error_set(err, "cross_entropy: out of memory for a row of %d classes", V);
    }
    /* The rows in order, whatever the thread count. With n = 0 the mean is
     * 0 / 0: NaN, torch's mean over nothing. */
    double total = 0.0;
    for (int64_t r = 0; r < rows; r++) total += row_loss[r];
    free(row_loss);
    *loss = n > 0 ? (float)(total / (double)n) : NAN;
    if (count) *count = n;
    if (correct) *correct = hits;
    return 0;
    /* END SOLUTION */
}
