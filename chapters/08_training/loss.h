/*
 * loss.h - the cross-entropy loss of classification and sequence models, and
 * its gradient, with the semantics of PyTorch's
 *
 *     F.cross_entropy(logits, target, ignore_index=ii, label_smoothing=e)
 *
 * (reduction 'mean', no class weights). The formulas (log-softmax, label
 * smoothing, the gradient p - q) and why the code keeps the shifted form
 * are in the chapter's README, "The loss: cross-entropy".
 *
 * Letters: R rows (one per predicted token: N*S for the labeller, N*T for
 * the seq2seq model, N for a classifier), V classes.
 *
 * The results are the float32 nearest the exact ones (computed in double,
 * rounded once) and do not depend on the number of threads.
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
 * loss      the mean loss over the counted rows (NaN when count is 0, as
 *           torch returns)
 * dlogits   (R, V) d(mean loss) / d logits, overwritten: (p - q) / count for
 *           a counted row (p its softmax, q its smoothed one-hot target), 0
 *           for an ignored one, all zeros when count is 0; NULL: no gradient
 * logits    (R, V)
 * target    (R,) class ids in [0, V), or ignore_index (padding: adds
 *           nothing to the loss or to the count)
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
