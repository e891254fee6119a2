/* sequence.c - see sequence.h. */
#include "sequence.h"

#include "error.h"
#include "vocab.h"

int seq_bracket(int64_t *out, const int64_t *ids, int64_t n, int64_t T, Error *err)
{
    if (n < 0 || n + 2 > T)
        return error_set(err, "a sequence of %lld tokens needs length %lld with <sos> and <eos>, "
                         "but the length is %lld", (long long)n, (long long)n + 2, (long long)T);
    /* BEGIN SOLUTION */
    out[0] = TOKEN_SOS;
    for (int64_t t = 0; t < n; t++) out[1 + t] = ids[t];
    out[n + 1] = TOKEN_EOS;
    for (int64_t t = n + 2; t < T; t++) out[t] = TOKEN_PAD;
    return 0;
    /* END SOLUTION */
}

int seq_batch(int64_t *batch, int64_t *lengths, const int64_t *ids, const int64_t *counts,
              int64_t N, int64_t T, Error *err)
{
    /* BEGIN SOLUTION */
    int64_t offset = 0;                           /* where sequence b starts in ids */
    for (int64_t b = 0; b < N; b++) {
        if (seq_bracket(batch + b * T, ids + offset, counts[b], T, err) != 0)
            return error_set(err, "batch row %lld: a sequence of %lld tokens does not fit in "
                             "length %lld (it needs %lld)", (long long)b, (long long)counts[b],
                             (long long)T, (long long)counts[b] + 2);
        lengths[b] = counts[b] + 2;
        offset += counts[b];
    }
    return 0;
    /* END SOLUTION */
}

int64_t seq_batch_length(const int64_t *counts, int64_t N)
{
    int64_t longest = 0;
    for (int64_t b = 0; b < N; b++)
        if (counts[b] > longest) longest = counts[b];
    return longest + 2;
}
