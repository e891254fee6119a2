/*
 * next_token.c - see next_token.h for the shapes and the rules.
 *
 * The loss of one position is chapter 08's cross-entropy (loss.c) with the
 * target read from the next id; it is written again here in its plain form
 * (no padding, no label smoothing) because the loss of a language model is
 * also its measure: summed over a text in bits, it is the size the model
 * would compress the text to (README.md).
 */
#include "next_token.h"

#include <math.h>
#include <stdlib.h>

#include "error.h"   /* not_implemented(), used by the exercise stubs */

int next_token_loss(double *loss, float *dlogits, const float *logits, const int64_t *ids,
                    int N, int T, int V, Error *err)
{
    if (N < 1 || T < 1 || V < 1)
        return error_set(err, "next_token_loss: N %d, T %d and V %d must each be at least 1", N,
                         T, V);
    for (int n = 0; n < N; n++)
        for (int t = 1; t <= T; t++) {
            int64_t id = ids[(size_t)n * (T + 1) + t];
            if (id < 0 || id >= V)
                return error_set(err, "next_token_loss: sequence %d, position %d holds id %lld, "
                                 "outside the vocabulary 0..%d", n, t, (long long)id, V - 1);
        }
    /* BEGIN SOLUTION */
    int64_t rows = (int64_t)N * T;
    double *row_loss = malloc((size_t)rows * sizeof *row_loss);   /* (N * T) */
    if (!row_loss)
        return error_set(err, "next_token_loss: out of memory for %lld row losses",
                         (long long)rows);
    const double scale = 1.0 / (double)rows;   /* d mean / d row loss */

    #pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        int64_t n = r / T, t = r % T;
        const float *x = logits + r * V;                     /* (V,) position t of sequence n */
        int64_t target = ids[n * (T + 1) + t + 1];           /* the id after position t */
        double m = x[0];
        for (int j = 1; j < V; j++)
            if (x[j] > m) m = x[j];
        double sum_exp = 0.0;
        for (int j = 0; j < V; j++) sum_exp += exp(x[j] - m);   /* every exponent <= 0 */
        /* -log p_target = lse - x_target with lse = m + log_sum, kept in the
         * shifted form: with logits of 1e30 the small log_sum would be
         * rounded away against m. */
        double log_sum = log(sum_exp);
        row_loss[r] = log_sum - (x[target] - m);
        if (dlogits) {
            float *dx = dlogits + r * V;
            for (int j = 0; j < V; j++) {
                double p = exp((x[j] - m) - log_sum);
                dx[j] = (float)((p - (j == target)) * scale);
            }
        }
    }
    /* The rows in order, whatever the thread count. */
    double total = 0.0;
    for (int64_t r = 0; r < rows; r++) total += row_loss[r];
    free(row_loss);
    *loss = total / (double)rows;
    return 0;
    /* END SOLUTION */
}
