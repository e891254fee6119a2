/*
 * bpe.c - the algorithm, its rules and its tie-break are in the chapter's
 * README; bpe.h has the ids and the contracts.
 *
 * Training keeps each distinct piece of the corpus once, as an array of ids
 * with the number of times the piece occurs, and recounts every pair after
 * each merge: O(merges x bytes of distinct pieces), well under a
 * millisecond per merge on the GPL. Production tokenizers update the counts incrementally
 * instead; the result is the same.
 */
#include "bpe.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"

/* ------------------------------------------------------------------------ */
/* The algorithms                                                            */
/* ------------------------------------------------------------------------ */

int bpe_pretokenize(const uint8_t *text, size_t len, Span *pieces, size_t *n_pieces,
                    Error *err)
{
    /* BEGIN SOLUTION */
    size_t n = 0, i = 0;
    while (i < len) {
        int cls = bpe_byte_class(text[i]);
        int next = i + 1 < len ? bpe_byte_class(text[i + 1]) : BPE_OTHER;
        size_t j = i + 1;
        if (text[i] == ' ' && (next == BPE_LETTER || next == BPE_DIGIT)) {
            while (j < len && bpe_byte_class(text[j]) == next) j++;       /* rule 1 */
        } else if (cls == BPE_LETTER || cls == BPE_DIGIT || cls == BPE_SPACE) {
            while (j < len && bpe_byte_class(text[j]) == cls) j++;        /* rules 2-4 */
            if (cls == BPE_SPACE && j - i >= 2 && j < len && text[j - 1] == ' ' &&
                (bpe_byte_class(text[j]) == BPE_LETTER || bpe_byte_class(text[j]) == BPE_DIGIT))
                j--;                              /* leave the space to the next word */
        }                                         /* else rule 5: one byte */
        pieces[n++] = (Span){i, j - i};
        i = j;
    }
    *n_pieces = n;
    return 0;
    /* END SOLUTION */
}

int bpe_merge(int64_t *ids, int64_t *n, int64_t left, int64_t right, int64_t new_id)
{
    /* BEGIN SOLUTION */
    int64_t out = 0;                              /* out <= i: safe to write in place */
    for (int64_t i = 0; i < *n; i++) {
        if (i + 1 < *n && ids[i] == left && ids[i + 1] == right) {
            ids[out++] = new_id;
            i++;                                  /* skip the right half */
        } else {
            ids[out++] = ids[i];
        }
    }
    *n = out;
    return 0;
    /* END SOLUTION */
}

int bpe_train(Bpe *bpe, const uint8_t *corpus, size_t len, int64_t vocab_size, Error *err)
{
    if (vocab_size < BPE_BASE_SIZE || vocab_size > BPE_MAX_VOCAB)
        return error_set(err, "BPE vocab size %lld is outside %d..%d (3 specials + 256 bytes "
                         "come first)", (long long)vocab_size, BPE_BASE_SIZE, BPE_MAX_VOCAB);
    if (bpe->vocab.size != BPE_BASE_SIZE || bpe->n_merges != 0)
        return error_set(err, "bpe_train needs a tokenizer fresh from bpe_init");
    /* BEGIN SOLUTION */
    /* The distinct pieces (a Vocab used as a set) and how often each occurs. */
    Vocab distinct;
    vocab_init(&distinct);
    Span *spans = malloc((len ? len : 1) * sizeof *spans);
    int64_t *count = calloc(len ? len : 1, sizeof *count);       /* (P,) */
    int64_t *start = malloc((len ? len : 1) * sizeof *start);    /* (P,) where piece p's ids begin */
    int64_t *length = malloc((len ? len : 1) * sizeof *length);  /* (P,) its current length */
    int64_t *ids = malloc((len ? len : 1) * sizeof *ids);        /* all pieces' ids, end to end */
    PairTable pairs = {0};
    size_t n_spans = 0;
    int rc = (!spans || !count || !start || !length || !ids)
                 ? error_set(err, "out of memory training BPE on %zu bytes", len) : 0;
    if (rc == 0) rc = bpe_pretokenize(corpus, len, spans, &n_spans, err);
    for (size_t i = 0; rc == 0 && i < n_spans; i++) {
        const uint8_t *piece = corpus + spans[i].start;
        int p = vocab_find(&distinct, piece, spans[i].len);
        if (p < 0) p = vocab_add(&distinct, piece, spans[i].len, err);
        if (p < 0) rc = -1;
        else count[p]++;
    }
    /* Each distinct piece starts as its bytes' ids. */
    int64_t total = 0;
    for (int p = 0; rc == 0 && p < distinct.size; p++) {
        start[p] = total;
        length[p] = (int64_t)distinct.lengths[p];
        for (size_t k = 0; k < distinct.lengths[p]; k++)
            ids[total++] = BPE_BYTE_BASE + distinct.bytes[p][k];
    }

    while (rc == 0 && bpe->vocab.size < vocab_size) {
        pair_table_clear(&pairs);
        for (int p = 0; rc == 0 && p < distinct.size; p++) {
            const int64_t *w = ids + start[p];
            for (int64_t k = 0; rc == 0 && k + 1 < length[p]; k++)
                rc = pair_table_add(&pairs, w[k], w[k + 1], count[p], err);
        }
        if (rc != 0) break;
        /* The most frequent pair; among equal counts the smallest (left, right). */
        int64_t best_left = -1, best_right = -1, best_count = 0;
        for (int64_t s = 0; s < pairs.n_slots; s++) {
            int64_t l = pairs.left[s], r = pairs.right[s], c = pairs.value[s];
            if (l < 0) continue;
            if (c > best_count ||
                (c == best_count && (l < best_left || (l == best_left && r < best_right)))) {
                best_left = l, best_right = r, best_count = c;
            }
        }
        if (best_count < 2) break;                /* nothing repeats: more merges are noise */
        int64_t new_id = bpe->vocab.size;
        rc = bpe_add_merge(bpe, best_left, best_right, err);
        for (int p = 0; rc == 0 && p < distinct.size; p++)
            bpe_merge(ids + start[p], &length[p], best_left, best_right, new_id);
    }
    pair_table_free(&pairs);
    vocab_free(&distinct);
    free(spans);
    free(count);
    free(start);
    free(length);
    free(ids);
    return rc;
    /* END SOLUTION */
}

int bpe_encode(const Bpe *bpe, const uint8_t *text, size_t len, int64_t *ids, int64_t *n_ids,
               Error *err)
{
    /* BEGIN SOLUTION */
    Span *pieces = malloc((len ? len : 1) * sizeof *pieces);
    if (!pieces) return error_set(err, "out of memory encoding %zu bytes", len);
    size_t n_pieces;
    if (bpe_pretokenize(text, len, pieces, &n_pieces, err) != 0) {
        free(pieces);
        return -1;
    }
    int64_t n = 0;
    for (size_t i = 0; i < n_pieces; i++) {
        int64_t *w = ids + n;                     /* this piece's ids, merged in place */
        int64_t m = (int64_t)pieces[i].len;
        for (int64_t k = 0; k < m; k++) w[k] = BPE_BYTE_BASE + text[pieces[i].start + k];
        for (;;) {
            /* The pair of the piece that was merged earliest in training. */
            int64_t best_rank = -1, rank;
            int64_t left = 0, right = 0;
            for (int64_t k = 0; k + 1 < m; k++) {
                if (pair_table_get(&bpe->ranks, w[k], w[k + 1], &rank) &&
                    (best_rank < 0 || rank < best_rank)) {
                    best_rank = rank, left = w[k], right = w[k + 1];
                }
            }
            if (best_rank < 0) break;
            bpe_merge(w, &m, left, right, BPE_BASE_SIZE + best_rank);
        }
        n += m;
    }
    *n_ids = n;
    free(pieces);
    return 0;
    /* END SOLUTION */
}

/* ------------------------------------------------------------------------ */
/* PairTable                                                                 */
/* ------------------------------------------------------------------------ */

static int64_t pair_slot(const PairTable *t, int64_t left, int64_t right)
{
    uint64_t h = (uint64_t)left * 0x9E3779B97F4A7C15ULL ^ (uint64_t)right * 0xC2B2AE3D27D4EB4FULL;
    int64_t mask = t->n_slots - 1;
    int64_t s = (int64_t)((h ^ (h >> 29)) & (uint64_t)mask);
    while (t->left[s] >= 0 && (t->left[s] != left || t->right[s] != right))
        s = (s + 1) & mask;                       /* linear probing */
    return s;
}

static int pair_table_grow(PairTable *t, Error *err)
{
    PairTable bigger = {0};
    bigger.n_slots = t->n_slots ? 2 * t->n_slots : 1024;
    bigger.left = malloc((size_t)bigger.n_slots * sizeof *bigger.left);
    bigger.right = malloc((size_t)bigger.n_slots * sizeof *bigger.right);
    bigger.value = malloc((size_t)bigger.n_slots * sizeof *bigger.value);
    if (!bigger.left || !bigger.right || !bigger.value) {
        pair_table_free(&bigger);
        return error_set(err, "out of memory growing a pair table");
    }
    for (int64_t s = 0; s < bigger.n_slots; s++) bigger.left[s] = -1;
    for (int64_t s = 0; s < t->n_slots; s++) {
        if (t->left[s] < 0) continue;
        int64_t d = pair_slot(&bigger, t->left[s], t->right[s]);
        bigger.left[d] = t->left[s];
        bigger.right[d] = t->right[s];
        bigger.value[d] = t->value[s];
    }
    bigger.n_used = t->n_used;
    pair_table_free(t);
    *t = bigger;
    return 0;
}

int pair_table_add(PairTable *t, int64_t left, int64_t right, int64_t amount, Error *err)
{
    if (2 * (t->n_used + 1) > t->n_slots && pair_table_grow(t, err) != 0) return -1;
    int64_t s = pair_slot(t, left, right);
    if (t->left[s] < 0) {
        t->left[s] = left;
        t->right[s] = right;
        t->value[s] = 0;
        t->n_used++;
    }
    t->value[s] += amount;
    return 0;
}

int pair_table_get(const PairTable *t, int64_t left, int64_t right, int64_t *value)
{
    if (t->n_slots == 0) return 0;
    int64_t s = pair_slot(t, left, right);
    if (t->left[s] < 0) return 0;
    *value = t->value[s];
    return 1;
}

void pair_table_clear(PairTable *t)
{
    for (int64_t s = 0; s < t->n_slots; s++) t->left[s] = -1;
    t->n_used = 0;
}

void pair_table_free(PairTable *t)
{
    free(t->left);
    free(t->right);
    free(t->value);
    memset(t, 0, sizeof *t);
}

/* ------------------------------------------------------------------------ */
/* The tokenizer's storage                                                   */
/* ------------------------------------------------------------------------ */

int bpe_init(Bpe *bpe, Error *err)
{
    memset(bpe, 0, sizeof *bpe);
    vocab_init(&bpe->vocab);
    if (vocab_add_specials(&bpe->vocab, 0, err) != 0) return -1;
    for (int b = 0; b < 256; b++) {
        uint8_t byte = (uint8_t)b;
        if (vocab_add(&bpe->vocab, &byte, 1, err) < 0) {
            bpe_free(bpe);
            return -1;
        }
    }
    return 0;
}

void bpe_free(Bpe *bpe)
{
    vocab_free(&bpe->vocab);
    free(bpe->merges);
    pair_table_free(&bpe->ranks);
    memset(bpe, 0, sizeof *bpe);
}

int bpe_add_merge(Bpe *bpe, int64_t left, int64_t right, Error *err)
{
    Vocab *v = &bpe->vocab;
    if (v->size < BPE_BASE_SIZE)
        return error_set(err, "BPE merge: the tokenizer was not initialised with bpe_init");
    if (left < BPE_BYTE_BASE || left >= v->size || right < BPE_BYTE_BASE || right >= v->size)
        return error_set(err, "BPE merge %lld: pair (%lld, %lld) names an id outside %d..%d",
                         (long long)bpe->n_merges, (long long)left, (long long)right,
                         BPE_BYTE_BASE, v->size - 1);
    int64_t rank;
    if (pair_table_get(&bpe->ranks, left, right, &rank))
        return error_set(err, "BPE merge %lld: pair (%lld, %lld) is already merge %lld",
                         (long long)bpe->n_merges, (long long)left, (long long)right,
                         (long long)rank);
    if (bpe->n_merges == bpe->cap_merges) {
        int64_t cap = bpe->cap_merges ? 2 * bpe->cap_merges : 256;
        int64_t *m = realloc(bpe->merges, (size_t)cap * 2 * sizeof *m);
        if (!m) return error_set(err, "out of memory growing the BPE merges");
        bpe->merges = m;
        bpe->cap_merges = cap;
    }
    /* The new token's bytes: the left token's, then the right token's. */
    size_t ll = v->lengths[left], lr = v->lengths[right];
    uint8_t *joined = malloc(ll + lr);
    if (!joined) return error_set(err, "out of memory joining two tokens");
    memcpy(joined, v->bytes[left], ll);
    memcpy(joined + ll, v->bytes[right], lr);
    int id = vocab_add(v, joined, ll + lr, err);
    free(joined);
    if (id < 0) return -1;
    if (pair_table_add(&bpe->ranks, left, right, bpe->n_merges, err) != 0) return -1;
    bpe->merges[2 * bpe->n_merges] = left;
    bpe->merges[2 * bpe->n_merges + 1] = right;
    bpe->n_merges++;
    return 0;
}

int bpe_byte_class(uint8_t b)
{
    if (b >= 0x80 || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z')) return BPE_LETTER;
    if (b >= '0' && b <= '9') return BPE_DIGIT;
    if (byte_is_space(b)) return BPE_SPACE;
    return BPE_OTHER;
}
