/* taylor.c - see taylor.h. */
#include "taylor.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "text.h"

/* The inventories in the order a person lists them; taylor_vocab sorts. */
static const char *const SOURCE_TOKENS[] = {
    "(", ")", "*", "**", "+", "-", "/", "0", "1", "2", "3", "4", "5", "6", "7", "8", "9",
    "a", "b", "c", "d", "f", "g", "h", "m", "n", "x",
    "exp", "sin", "cos", "tan", "sinh", "cosh", "tanh",
};
static const char *const TARGET_TOKENS[] = {
    "(", ")", "*", "**", "+", "-", "/", "0", "1", "2", "3", "4", "5", "6", "7", "8", "9",
    "a", "b", "c", "d", "f", "g", "h", "m", "x", "O(x**6)",
};
#define N_SOURCE (int)(sizeof SOURCE_TOKENS / sizeof SOURCE_TOKENS[0])
#define N_TARGET (int)(sizeof TARGET_TOKENS / sizeof TARGET_TOKENS[0])

int taylor_encode(const Vocab *vocab, const uint8_t *text, size_t len, int64_t *ids,
                  int64_t *n_ids, Error *err)
{
    /* BEGIN SOLUTION */
    int64_t n = 0;
    size_t i = 0;
    while (i < len) {
        if (byte_is_space(text[i])) {
            i++;
            continue;
        }
        /* Try every token; keep the longest that the text continues with. */
        int best = -1;
        size_t best_len = 0;
        for (int id = vocab->n_special; id < vocab->size; id++) {
            size_t tl = vocab->lengths[id];
            if (tl > best_len && tl <= len - i && memcmp(text + i, vocab->bytes[id], tl) == 0) {
                best = id;
                best_len = tl;
            }
        }
        if (best < 0) {
            uint8_t c = text[i];
            if (c >= 0x20 && c < 0x7F)
                return error_set(err, "no token matches '%c' at byte offset %zu", c, i);
            return error_set(err, "no token matches byte 0x%02x at byte offset %zu", c, i);
        }
        ids[n++] = best;
        i += best_len;
    }
    *n_ids = n;
    return 0;
    /* END SOLUTION */
}

/* ------------------------------------------------------------------------ */
/* Given: not part of the exercise                                           */
/* ------------------------------------------------------------------------ */

/* strcmp compares as unsigned bytes: bytewise order, like Python's sorted(). */
static int compare_strings(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int taylor_vocab(Vocab *vocab, TaylorSide side, Error *err)
{
    const char *sorted[N_SOURCE > N_TARGET ? N_SOURCE : N_TARGET];
    int n = side == TAYLOR_SOURCE ? N_SOURCE : N_TARGET;
    memcpy(sorted, side == TAYLOR_SOURCE ? SOURCE_TOKENS : TARGET_TOKENS, n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, compare_strings);
    vocab_init(vocab);
    int rc = vocab_add_specials(vocab, 0, err);
    for (int i = 0; rc == 0 && i < n; i++)
        if (vocab_add(vocab, sorted[i], strlen(sorted[i]), err) < 0) rc = -1;
    if (rc != 0) vocab_free(vocab);
    return rc;
}
