/* vocab.c - see vocab.h. */
#include "vocab.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"

static const char *const SPECIAL_NAMES[] = {"<pad>", "<sos>", "<eos>", "<unk>"};

int vocab_decode(const Vocab *v, const int64_t *ids, int64_t n, const char *sep, Text *out,
                 Error *err)
{
    if (vocab_check_ids(v, ids, n, err) != 0) return -1;
    /* BEGIN SOLUTION */
    int first = 1;
    for (int64_t i = 0; i < n; i++) {
        int64_t id = ids[i];
        /* Structural specials carry no text; <unk> is written as "<unk>". */
        if (id < v->n_special && id != TOKEN_UNK) continue;
        if (!first && text_append(out, sep, strlen(sep), err) != 0) return -1;
        if (text_append(out, v->bytes[id], v->lengths[id], err) != 0) return -1;
        first = 0;
    }
    return 0;
    /* END SOLUTION */
}

/* ------------------------------------------------------------------------ */
/* Given: not part of the exercise                                           */
/* ------------------------------------------------------------------------ */

void vocab_init(Vocab *v)
{
    memset(v, 0, sizeof *v);
}

void vocab_free(Vocab *v)
{
    for (int i = 0; i < v->size; i++) free(v->bytes[i]);
    free(v->bytes);
    free(v->lengths);
    free(v->slots);
    vocab_init(v);
}

/* FNV-1a, 64-bit: a simple hash that mixes every byte. */
static uint64_t hash_bytes(const uint8_t *p, size_t len)
{
    uint64_t h = 14695981039346656037ULL;
    for (size_t i = 0; i < len; i++) {
        h ^= p[i];
        h *= 1099511628211ULL;
    }
    return h;
}

/* The slot holding the first id with these bytes, or the empty slot where
 * they would go. n_slots is a power of two and the table is never full. */
static int find_slot(const Vocab *v, const uint8_t *p, size_t len)
{
    int mask = v->n_slots - 1;
    int s = (int)(hash_bytes(p, len) & (uint64_t)mask);
    for (;;) {
        int id = v->slots[s];
        if (id < 0) return s;
        if (v->lengths[id] == len && memcmp(v->bytes[id], p, len) == 0) return s;
        s = (s + 1) & mask;                       /* linear probing */
    }
}

/* Doubles the table (keeping it at most half full) and re-inserts every id. */
static int grow_slots(Vocab *v, Error *err)
{
    int n_slots = v->n_slots ? 2 * v->n_slots : 64;
    int *slots = malloc((size_t)n_slots * sizeof *slots);
    if (!slots) return error_set(err, "out of memory growing a vocabulary");
    free(v->slots);
    v->slots = slots;
    v->n_slots = n_slots;
    for (int s = 0; s < n_slots; s++) slots[s] = -1;
    for (int id = 0; id < v->size; id++) {
        int s = find_slot(v, v->bytes[id], v->lengths[id]);
        if (slots[s] < 0) slots[s] = id;          /* a duplicate keeps the earlier id */
    }
    return 0;
}

int vocab_add(Vocab *v, const void *bytes, size_t len, Error *err)
{
    if (v->size == 1 << 30) return error_set(err, "a vocabulary is limited to 2^30 tokens");
    if (v->size == v->capacity) {
        int cap = v->capacity ? 2 * v->capacity : 64;
        uint8_t **b = realloc(v->bytes, (size_t)cap * sizeof *b);
        if (b) v->bytes = b;
        size_t *l = realloc(v->lengths, (size_t)cap * sizeof *l);
        if (l) v->lengths = l;
        if (!b || !l) return error_set(err, "out of memory growing a vocabulary");
        v->capacity = cap;
    }
    if (2 * (v->size + 1) > v->n_slots && grow_slots(v, err) != 0) return -1;
    uint8_t *copy = malloc(len + 1);
    if (!copy) return error_set(err, "out of memory adding a token of %zu bytes", len);
    if (len) memcpy(copy, bytes, len);
    copy[len] = 0;
    int id = v->size++;
    v->bytes[id] = copy;
    v->lengths[id] = len;
    int s = find_slot(v, copy, len);
    if (v->slots[s] < 0) v->slots[s] = id;
    return id;
}

int vocab_add_specials(Vocab *v, int with_unk, Error *err)
{
    if (v->size != 0) return error_set(err, "special tokens must come first in a vocabulary");
    int n = with_unk ? 4 : 3;
    for (int i = 0; i < n; i++)
        if (vocab_add(v, SPECIAL_NAMES[i], strlen(SPECIAL_NAMES[i]), err) < 0) return -1;
    v->n_special = n;
    return 0;
}

int vocab_find(const Vocab *v, const void *bytes, size_t len)
{
    if (v->n_slots == 0) return -1;
    return v->slots[find_slot(v, bytes, len)];
}

int vocab_check_ids(const Vocab *v, const int64_t *ids, int64_t n, Error *err)
{
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= v->size)
            return error_set(err, "token id %lld (at position %lld) is outside the vocabulary "
                             "0..%d", (long long)ids[i], (long long)i, v->size - 1);
    return 0;
}
