/*
 * word_tokenizer.c - see word_tokenizer.h.
 *
 * Building the vocabulary: split the corpus, count each distinct word (a
 * Vocab serves as the word -> index table), sort by (count descending,
 * bytes ascending), keep those with count >= min_freq.
 */
#include "word_tokenizer.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"

int word_is_word_byte(uint8_t b)
{
    return b >= 0x80 || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') ||
           (b >= '0' && b <= '9') || b == '\'';
}

int word_split(const uint8_t *text, size_t len, Span *words, size_t *n_words, Error *err)
{
    /* BEGIN SOLUTION */
    size_t n = 0;
    size_t i = 0;
    while (i < len) {
        if (byte_is_space(text[i])) {
            i++;
        } else if (word_is_word_byte(text[i])) {
            size_t j = i;
            while (j < len && word_is_word_byte(text[j])) j++;
            words[n++] = (Span){i, j - i};
            i = j;
        } else {
            words[n++] = (Span){i, 1};                /* punctuation: one byte */
            i++;
        }
    }
    *n_words = n;
    return 0;
    /* END SOLUTION */
}

typedef struct {
    const uint8_t *bytes;
    size_t len;
    int64_t count;
} WordCount;

/* Most frequent first; equal counts in memcmp order (a prefix first). */
static int compare_word_counts(const void *pa, const void *pb)
{
    const WordCount *a = pa, *b = pb;
    if (a->count != b->count) return a->count > b->count ? -1 : 1;
    size_t n = a->len < b->len ? a->len : b->len;
    int c = n ? memcmp(a->bytes, b->bytes, n) : 0;
    if (c != 0) return c;
    return (a->len > b->len) - (a->len < b->len);
}

int word_vocab_build(Vocab *vocab, int64_t **counts, const uint8_t *corpus, size_t len,
                     int min_freq, Error *err)
{
    vocab_init(vocab);
    *counts = NULL;
    if (min_freq < 1) return error_set(err, "min_freq %d must be at least 1", min_freq);

    Vocab distinct;                               /* each different word once */
    vocab_init(&distinct);
    Span *words = malloc((len ? len : 1) * sizeof *words);
    int64_t *seen = calloc(len ? len : 1, sizeof *seen);   /* count per distinct word */
    WordCount *order = NULL;
    size_t n_words = 0;
    int rc = (!words || !seen) ? error_set(err, "out of memory splitting a corpus of %zu "
                                           "bytes", len) : 0;
    if (rc == 0) rc = word_split(corpus, len, words, &n_words, err);
    for (size_t i = 0; rc == 0 && i < n_words; i++) {
        const uint8_t *w = corpus + words[i].start;
        int id = vocab_find(&distinct, w, words[i].len);
        if (id < 0) id = vocab_add(&distinct, w, words[i].len, err);
        if (id < 0) rc = -1;
        else seen[id]++;
    }
    if (rc == 0) {
        order = malloc(((size_t)distinct.size + 1) * sizeof *order);
        if (!order) rc = error_set(err, "out of memory sorting %d words", distinct.size);
    }
    if (rc == 0) {
        for (int id = 0; id < distinct.size; id++)
            order[id] = (WordCount){distinct.bytes[id], distinct.lengths[id], seen[id]};
        qsort(order, (size_t)distinct.size, sizeof *order, compare_word_counts);
        rc = vocab_add_specials(vocab, 1, err);
    }
    for (int k = 0; rc == 0 && k < distinct.size && order[k].count >= min_freq; k++)
        if (vocab_add(vocab, order[k].bytes, order[k].len, err) < 0) rc = -1;
    if (rc == 0) {
        *counts = calloc((size_t)vocab->size, sizeof **counts);
        if (!*counts) rc = error_set(err, "out of memory for %d word counts", vocab->size);
    }
    if (rc == 0)
        for (int id = vocab->n_special; id < vocab->size; id++)
            (*counts)[id] = order[id - vocab->n_special].count;
    free(words);
    free(seen);
    free(order);
    vocab_free(&distinct);
    if (rc != 0) vocab_free(vocab);
    return rc;
}

int word_encode(const Vocab *vocab, const uint8_t *text, size_t len, int64_t *ids,
                int64_t *n_ids, Error *err)
{
    /* BEGIN SOLUTION */
    Span *words = malloc((len ? len : 1) * sizeof *words);
    if (!words) return error_set(err, "out of memory splitting a text of %zu bytes", len);
    size_t n_words;
    if (word_split(text, len, words, &n_words, err) != 0) {
        free(words);
        return -1;
    }
    for (size_t i = 0; i < n_words; i++) {
        int id = vocab_find(vocab, text + words[i].start, words[i].len);
        /* A special's spelling ("<pad>") can never be a word: '<' splits off. */
        ids[i] = id >= 0 ? id : TOKEN_UNK;
    }
    *n_ids = (int64_t)n_words;
    free(words);
    return 0;
    /* END SOLUTION */
}
