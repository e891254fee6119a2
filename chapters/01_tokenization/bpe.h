/*
 * bpe.h - byte-level byte-pair encoding (BPE), the subword tokenizer of GPT-2
 * and its successors, trained here on a corpus. The pre-tokenization rules
 * 1-5, the training loop with its tie-break, and encoding are in the
 * chapter's README ("Byte-level BPE"); reference/bpe.py is the same
 * algorithm in Python, and this code reproduces its merges and ids exactly.
 *
 * Ids (V the vocabulary size):
 *     0, 1, 2            <pad> <sos> <eos>
 *     3 .. 258           the bytes 0x00 .. 0xFF (byte b is id 3 + b)
 *     259 + k            merge k (k = 0 .. V - 260)
 *
 * Decoding concatenates the bytes of the ids, skipping the specials, so
 * decode(encode(text)) == text for any bytes at all:
 *     vocab_decode(&bpe->vocab, ids, n, "", &text, err)
 *
 * Read next: taylor.h.
 */
#ifndef BPE_H
#define BPE_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "text.h"
#include "vocab.h"

#define BPE_BYTE_BASE 3        /* id of byte 0x00 */
#define BPE_BASE_SIZE 259      /* 3 specials + 256 bytes: the vocabulary before any merge */
#define BPE_MAX_VOCAB (1 << 24)

/* A hash map from a pair of ids (left, right) to a number: pair counts while
 * training, merge ranks while encoding. Start from `PairTable t = {0};`.
 * Slot s is in use when left[s] >= 0; a program may walk the slots. */
typedef struct {
    int64_t n_slots;      /* a power of two (0 before the first add) */
    int64_t n_used;
    int64_t *left;        /* (n_slots,) -1 = empty */
    int64_t *right;       /* (n_slots,) */
    int64_t *value;       /* (n_slots,) */
} PairTable;

/* Adds amount to the value of (left, right), inserting it at 0 first. */
int pair_table_add(PairTable *t, int64_t left, int64_t right, int64_t amount, Error *err);
/* 1 and the value if (left, right) is present, else 0. */
int pair_table_get(const PairTable *t, int64_t left, int64_t right, int64_t *value);
/* Empties the table, keeping its memory. */
void pair_table_clear(PairTable *t);
void pair_table_free(PairTable *t);

typedef struct {
    Vocab vocab;          /* id -> bytes: the specials, the 256 bytes, one token per merge */
    int64_t n_merges;
    int64_t *merges;      /* (n_merges, 2): merge k joins (merges[2k], merges[2k+1]) */
    int64_t cap_merges;
    PairTable ranks;      /* (left, right) -> k */
} Bpe;

/* The 259 base tokens and no merges. */
int bpe_init(Bpe *bpe, Error *err);
void bpe_free(Bpe *bpe);

/* Records the next merge (left, right) -> id 259 + n_merges. Both ids must
 * exist and not be specials, and the pair must not be a merge already. */
int bpe_add_merge(Bpe *bpe, int64_t left, int64_t right, Error *err);

/* The class of a byte for pre-tokenization. */
enum { BPE_LETTER, BPE_DIGIT, BPE_SPACE, BPE_OTHER };
int bpe_byte_class(uint8_t b);

/* Cuts text into pieces by the README's rules 1-5. pieces needs room for len entries;
 * the number found goes to n_pieces. */
int bpe_pretokenize(const uint8_t *text, size_t len, Span *pieces, size_t *n_pieces,
                    Error *err);

/* Replaces every occurrence of (left, right) in ids (*n,), left to right and
 * without overlap, by new_id, in place; *n becomes the new length. */
int bpe_merge(int64_t *ids, int64_t *n, int64_t left, int64_t right, int64_t new_id);

/* Learns merges on corpus until the vocabulary has vocab_size ids (259 ..
 * 2^24) or no pair occurs twice. bpe must come fresh from bpe_init. */
int bpe_train(Bpe *bpe, const uint8_t *corpus, size_t len, int64_t vocab_size, Error *err);

/* The ids of text. ids needs room for len entries (a token is at least one
 * byte); the number written goes to n_ids. */
int bpe_encode(const Bpe *bpe, const uint8_t *text, size_t len, int64_t *ids, int64_t *n_ids,
               Error *err);

#endif
