/*
 * vocab.h - a vocabulary: the list of tokens a model knows, id = position.
 *
 * Every vocabulary of this project starts with the special tokens
 *     id 0 <pad>, id 1 <sos>, id 2 <eos>, and id 3 <unk> in a closed
 *     vocabulary (character and word level)
 * (the chapter's README says what each is for).
 *
 * A token is a byte string (it may contain a zero byte). Lookup from bytes to
 * id uses a hash table; where two ids hold the same bytes (byte-level BPE
 * can build one string by two different merges), it returns the smaller id.
 *
 * Read next: char_tokenizer.h.
 */
#ifndef VOCAB_H
#define VOCAB_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "text.h"

enum { TOKEN_PAD = 0, TOKEN_SOS = 1, TOKEN_EOS = 2, TOKEN_UNK = 3 };

typedef struct {
    int size;             /* number of tokens: the ids are 0 .. size-1 */
    int n_special;        /* ids below n_special are special tokens (3 or 4) */
    int capacity;         /* entries allocated in bytes and lengths */
    uint8_t **bytes;      /* (size,) id -> its bytes, NUL-terminated for printing */
    size_t *lengths;      /* (size,) id -> number of bytes */
    int *slots;           /* (n_slots,) hash table of ids, -1 = empty */
    int n_slots;          /* a power of two, at least twice size */
} Vocab;

/* An empty vocabulary (no tokens, not even the specials). */
void vocab_init(Vocab *v);
void vocab_free(Vocab *v);

/* Appends a token; returns its id, or -1 with err set. */
int vocab_add(Vocab *v, const void *bytes, size_t len, Error *err);

/* Appends <pad> <sos> <eos>, and <unk> when with_unk, to an empty vocabulary
 * and sets n_special. */
int vocab_add_specials(Vocab *v, int with_unk, Error *err);

/* The id of a token, or -1 if the vocabulary lacks it. */
int vocab_find(const Vocab *v, const void *bytes, size_t len);

/* Every id in 0 .. size-1, else an error naming the first bad id. */
int vocab_check_ids(const Vocab *v, const int64_t *ids, int64_t n, Error *err);

/* Appends the text of ids (n,) to out, with sep between consecutive tokens.
 * <pad>, <sos> and <eos> are skipped; <unk> is written as "<unk>" so a
 * reader sees where something was lost. The character, BPE and Taylor
 * tokenizers decode with sep "" (their tokens carry their own spacing), the
 * word tokenizer with " ". Ids outside the vocabulary are an error. */
int vocab_decode(const Vocab *v, const int64_t *ids, int64_t n, const char *sep, Text *out,
                 Error *err);

#endif
