/*
 * loss.h - the cross-entropy loss of classification and sequence models, and
 * its gradient, with the semantics of PyTorch's
 *
 *     F.cross_entropy(logits, target, ignore_index=ii, label_smoothing=e)
 *
 * (reduction 'mean', no class weights). Letters: R rows (one per predicted
 * token: N*S for the labeller, N*T for the seq2seq model), V classes.
 *
 * For one row of logits x (V,) with target t, the log-softmax is
 *
 *     log p_j = x_j - lse,        lse = log sum_k exp(x_k)
 *             = x_j - m - log sum_k exp(x_k - m),   m = max_k x_k
 *
 * (subtracting m keeps every exponent <= 0: no overflow for logits like
 * 1e4). Label smoothing mixes the one-hot target with the uniform
 * distribution, q_j = (1 - e) [j == t] + e / V, and the row's loss is
 *
 *     loss_r = -sum_j q_j log p_j = (1 - e) (lse - x_t) + (e / V) sum_j (lse - x_j)
 *
 * The loss is the mean over the rows whose target is not ignore_index
 * (padding); an ignored row adds nothing to the sum or to the count. Its
 * gradient, for a counted row, is
 *
 *     d loss / d x_j = (p_j - q_j) / count
 *
 * and 0 for an ignored row. When every row is ignored (count 0) the mean is
 * 0 / 0: the loss is NaN, as torch returns, and the gradient is all zeros
 * (torch's too). A caller that sums losses over batches should skip such a
 * batch, or weigh it by its count of 0 before adding.
 *
 * The code keeps the shifted form, lse - x_j = log sum_k exp(x_k - m) -
 * (x_j - m), so that with logits of 1e30 the small log-sum is not rounded
 * away against m. The row sums and the loss are computed in double from the
 * float32 logits and rounded to float32 once, so the results are the float32
 * nearest the exact ones. Rows run in parallel (OpenMP); each row's loss is
 * stored and the rows are summed in order afterwards, so the result does not
 * depend on the number of threads.
 *
 * Read next: optim.h (what the gradient is used for).
 */
#ifndef LOSS_H
#define LOSS_H

#include <stdint.h>

#include "error.h"

/* torch's default ignore_index. */
#define CROSS_ENTROPY_IGNORE_INDEX (-100)

/*
 * loss      the mean loss over the counted rows (NaN when count is 0)
 * dlogits   (R, V) d(mean loss) / d logits, overwritten; NULL: no gradient
 * logits    (R, V)
 * target    (R,) class ids in [0, V), or ignore_index
 * count     rows counted (target != ignore_index); may be NULL
 * correct   counted rows whose argmax (the first maximum) equals the target;
 *           may be NULL
 *
 * label_smoothing must lie in [0, 1]. A target outside [0, V) that is not
 * ignore_index is an error naming the row. Returns 0, or -1 with err set.
 */
int cross_entropy(float *loss, float *dlogits, const float *logits, const int64_t *target,
                  int64_t rows, int V, int64_t ignore_index, float label_smoothing,
                  int64_t *count, int64_t *correct, Error *err);

#endif
