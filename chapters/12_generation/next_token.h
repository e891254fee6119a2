/*
 * next_token.h - the loss of a causal language model: every position
 * predicts the token that follows it.
 *
 * Letters (the top README's table): N batch, T positions, V vocabulary.
 *
 * ids (N, T+1) is a batch of token sequences, one row every T + 1 ids. The
 * model reads ids[:, 0..T-1] and writes logits (N, T, V); the logits at
 * position t are its guess at ids[t+1]. The loss is the mean over the N * T
 * positions of
 *
 *     -ln softmax(logits[n, t])[ids[n, t+1]]                    (nats)
 *
 * as F.cross_entropy(logits.reshape(-1, V), ids[:, 1:].reshape(-1)) has it,
 * and its gradient is (softmax(logits[n, t]) - onehot(ids[n, t+1])) / (N T).
 * Divide the loss by ln 2 for bits per token (README.md).
 *
 * ids[:, 0] is never a target and is not read. Any contiguous stretch of
 * a longer text works: logits of T positions and the T + 1 ids from the
 * first one (N = 1), so a long text can be scored window by window.
 *
 * The sums are made in double from the float32 logits and the loss is
 * returned in double; each gradient entry is rounded to float32 once. Rows
 * run in parallel (OpenMP) and are added in order afterwards: the result
 * does not depend on the thread count.
 *
 * Read next: sampling.h (what the same logits are for once the model is
 * trained).
 */
#ifndef NEXT_TOKEN_H
#define NEXT_TOKEN_H

#include <stdint.h>

#include "error.h"

/*
 * loss      the mean loss over the N * T positions, in nats
 * dlogits   (N, T, V) d loss / d logits, overwritten; NULL: no gradient
 * logits    (N, T, V)
 * ids       (N, T + 1) token ids; the targets ids[:, 1..T] must lie in [0, V)
 *
 * N, T and V must be at least 1. Returns 0, or -1 with err set (a size
 * below 1, a target outside [0, V) naming its sequence and position, no
 * memory) and nothing written.
 */
int next_token_loss(double *loss, float *dlogits, const float *logits, const int64_t *ids,
                    int N, int T, int V, Error *err);

#endif
