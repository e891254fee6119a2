/*
 * bpe.h - byte-level byte-pair encoding (BPE), the subword tokenizer of GPT-2
 * and its successors, trained here on a corpus.
 *
 * Characters make long sequences, words make a huge vocabulary that is still
 * closed. BPE sits between: it starts from the 256 byte values, which can
 * spell anything, and learns merges, each gluing the most frequent adjacent
 * pair of tokens of the corpus into one new token. Frequent words end up as
 * one token (" the", " Program"), rarer ones as a few pieces (" copyleft" is
 * " copy" "le" "f" "t" after 241 merges on the GPL), and any byte string at
 * all can still be encoded, so there is no <unk> and decode(encode(text))
 * == text, byte for byte.
 *
 * Ids (V the vocabulary size):
 *     0, 1, 2            <pad> <sos> <eos>
 *     3 .. 258           the bytes 0x00 .. 0xFF (byte b is id 3 + b)
 *     259 + k            merge k (k = 0 .. V - 260)
 *
 * Pre-tokenization cuts the text into pieces, and merges never cross a piece
 * boundary. Scanning left to right, the next piece is the first that applies:
 *     1. a space followed by a letter run or a digit run: the space and the run
 *     2. a run of letters (ASCII A-Z, a-z, and every byte >= 0x80, so that the
 *        bytes of a non-ASCII character stay together)
 *     3. a run of digits 0-9
 *     4. a run of whitespace; when it is longer than one byte and ends in a
 *        space just before a letter or digit, that space is left for rule 1
 *     5. any other single byte
 * "Hello,  world 42" -> "Hello" "," " " " world" " 42"
 *
 * Training on a corpus:
 *     count the distinct pieces
 *     repeat until the vocabulary has V ids:
 *         count every adjacent pair of ids inside every piece, weighted by the
 *         piece's count (overlapping pairs count: "aaa" holds (a, a) twice)
 *         best = the most frequent pair; TIE-BREAK: among equal counts the
 *                smallest (left id, right id), comparing left ids first
 *         stop if best occurs fewer than 2 times
 *         record the merge best -> new id; replace best in every piece, left
 *         to right, without overlap ("aaa" -> "aa" "a")
 *
 * Encoding a text: pre-tokenize it the same way; in each piece, repeatedly
 * merge the pair present with the lowest merge rank (every occurrence, left
 * to right) until no pair of the piece is a merge. Decoding concatenates the
 * bytes of the ids, skipping the specials:
 *     vocab_decode(&bpe->vocab, ids, n, "", &text, err)
 *
 * reference/bpe.py is the same algorithm in Python; the golden cases hold its
 * merges and ids, which this code reproduces exactly.
 *
 * Deliberately simpler than GPT-2: the pre-tokenizer is a byte scanner, not a
 * regular expression over Unicode classes (no special cases for "'s", "'ll"),
 * and training recounts pairs instead of updating them (see bpe.c).
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

/* Cuts text into pieces by rules 1-5. pieces needs room for len entries;
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
