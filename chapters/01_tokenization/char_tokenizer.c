/*
 * char_tokenizer.c - see char_tokenizer.h.
 *
 * Building the vocabulary needs the distinct code points in order. Rather
 * than sort, it marks each code point seen in a table of all 0x110000 of
 * them and walks the table upwards.
 */
#include "char_tokenizer.h"

#include <stdlib.h>

#include "error.h"

#define N_CODEPOINTS 0x110000

int char_encode(const Vocab *vocab, const uint8_t *text, size_t len, int64_t *ids,
                int64_t *n_ids, Error *err)
{
    /* BEGIN SOLUTION */
    int64_t n = 0;
    for (size_t pos = 0; pos < len;) {
        uint32_t cp;
        size_t n_bytes;
        if (utf8_decode(text, len, pos, &cp, &n_bytes, err) != 0) return -1;
        /* The token is the character's own bytes. */
        int id = vocab_find(vocab, text + pos, n_bytes);
        ids[n++] = id >= 0 ? id : TOKEN_UNK;
        pos += n_bytes;
    }
    *n_ids = n;
    return 0;
    /* END SOLUTION */
}

/* ------------------------------------------------------------------------ */
/* Given: not part of the exercise                                           */
/* ------------------------------------------------------------------------ */

int char_vocab_build(Vocab *vocab, const uint8_t *corpus, size_t len, Error *err)
{
    vocab_init(vocab);
    uint8_t *seen = calloc(N_CODEPOINTS, 1);
    if (!seen) return error_set(err, "out of memory building a character vocabulary");
    int rc = vocab_add_specials(vocab, 1, err);
    for (size_t pos = 0; rc == 0 && pos < len;) {
        uint32_t cp;
        size_t n;
        rc = utf8_decode(corpus, len, pos, &cp, &n, err);
        if (rc == 0) {
            seen[cp] = 1;
            pos += n;
        }
    }
    for (uint32_t cp = 0; rc == 0 && cp < N_CODEPOINTS; cp++) {
        if (!seen[cp]) continue;
        uint8_t bytes[4];
        size_t n;
        rc = utf8_encode(cp, bytes, &n, err);
        if (rc == 0 && vocab_add(vocab, bytes, n, err) < 0) rc = -1;
    }
    free(seen);
    if (rc != 0) vocab_free(vocab);
    return rc;
}
