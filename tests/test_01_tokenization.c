/*
 * test_01_tokenization.c - chapter 01: the character, word, BPE and
 * Taylor-series tokenizers, and bracketing, padding and batching, against
 * goldens made by reference/ch01_tokenization.py (and reference/bpe.py).
 *
 * Every output of this chapter is integers or bytes, so every comparison is
 * exact. The golden cases carry their corpus and texts, so these tests need
 * nothing but golden/01_tokenization/. The unit tests below them pin down the
 * rules the README states: the UTF-8 errors, the word split rule, the BPE
 * pre-tokenizer, merge order and tie-break, longest match, the seed's
 * vocabularies, and what happens when a sequence does not fit.
 *
 * Each test checks a function's return code before it reads the function's
 * outputs, so an unfinished exercise (a stub returning -1) fails cleanly.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bpe.h"
#include "char_tokenizer.h"
#include "helpers.h"
#include "rng.h"
#include "sequence.h"
#include "taylor.h"
#include "text.h"
#include "vocab.h"
#include "word_tokenizer.h"

#define CHAPTER "01_tokenization"

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

/* The bytes of the golden U8 tensor `name`. */
static const uint8_t *golden_bytes(const TensorFile *f, const char *name, size_t *len)
{
    const Tensor *t = golden_tensor(f, name, DTYPE_U8);
    assert_int_equal(t->ndim, 1);
    *len = (size_t)t->shape[0];
    return t->data;
}

/* The golden label "case/tensor", the case being the file name's stem. */
static void label_of(char *buf, size_t size, const TensorFile *f, const char *name)
{
    const char *base = strrchr(f->path, '/');
    base = base ? base + 1 : f->path;
    snprintf(buf, size, "%.*s/%s", (int)strcspn(base, "."), base, name);
}

/* Fails unless actual (n,) equals the golden I64 tensor `name` exactly;
 * prints a one-line summary and the first few differences. */
static void assert_ids_equal(const TensorFile *f, const char *name, const int64_t *actual,
                             int64_t n)
{
    const Tensor *t = golden_tensor(f, name, DTYPE_I64);
    const int64_t *expected = t->data;
    char label[160];
    label_of(label, sizeof label, f, name);
    int64_t want = tensor_numel(t), bad = 0;
    for (int64_t i = 0; i < n && i < want; i++) {
        if (actual[i] == expected[i]) continue;
        if (bad < 5)
            print_message("    %s[%lld]: got %lld, expected %lld\n", label, (long long)i,
                          (long long)actual[i], (long long)expected[i]);
        bad++;
    }
    print_message("  %-44s %7lld ids      %s\n", label, (long long)n,
                  bad || n != want ? "DIFFER" : "exact");
    if (n != want) {
        print_error("%s: the code produced %lld ids, the golden has %lld\n", label, (long long)n,
                    (long long)want);
        fail();
    }
    if (bad) {
        print_error("%s: %lld of %lld ids differ\n", label, (long long)bad, (long long)n);
        fail();
    }
}

/* Fails unless the bytes equal the golden U8 tensor `name` exactly. */
static void assert_bytes_equal(const TensorFile *f, const char *name, const uint8_t *actual,
                               size_t len)
{
    size_t want;
    const uint8_t *expected = golden_bytes(f, name, &want);
    char label[160];
    label_of(label, sizeof label, f, name);
    size_t first = 0;
    while (first < len && first < want && actual[first] == expected[first]) first++;
    int same = len == want && first == len;
    print_message("  %-44s %7zu bytes    %s\n", label, len, same ? "exact" : "DIFFER");
    if (!same) {
        print_error("%s: %zu bytes, expected %zu; first difference at byte %zu\n", label, len,
                    want, first);
        fail();
    }
}

/* Fails with the error's message unless rc == 0. */
/* Fails unless `call` returns 0, saying what failed: the stub it ran into,
 * or its message. */
#define check_ok(call, err, what)                                          \
    do {                                                                   \
        not_implemented_clear();                                           \
        int check_ok_rc_ = (call);                                         \
        check_ok_at(check_ok_rc_, err, what);                              \
    } while (0)

static void check_ok_at(int rc, const Error *err, const char *what)
{
    if (rc == 0) return;
    if (not_implemented_first_func())
        print_error("%s: %s is not written yet (%s)\n", what, not_implemented_first_func(),
                    not_implemented_first_file());
    else
        print_error("%s failed: %s\n", what, err->msg);
    fail();
}

/* Fails unless rc is -1 and the message contains every given phrase. */
static void check_error(int rc, const Error *err, const char *phrase1, const char *phrase2)
{
    print_message("  error: %s\n", err->msg);
    assert_int_equal(rc, -1);
    const char *phrases[2] = {phrase1, phrase2};
    for (int i = 0; i < 2; i++) {
        if (phrases[i] && !strstr(err->msg, phrases[i])) {
            print_error("expected the error to mention '%s'\n", phrases[i]);
            fail();
        }
    }
}

static int64_t *test_ids(size_t n)
{
    int64_t *p = calloc(n + 1, sizeof *p);
    assert_non_null(p);
    return p;
}

/* Encodes text with the given encoder and returns the ids' count; ids must
 * hold len entries. */
typedef int (*Encoder)(const Vocab *, const uint8_t *, size_t, int64_t *, int64_t *, Error *);

static int64_t encode_ok(Encoder encode, const Vocab *v, const char *text, int64_t *ids)
{
    Error err = {{0}};
    int64_t n = -1;
    check_ok(encode(v, (const uint8_t *)text, strlen(text), ids, &n, &err), &err, text);
    return n;
}

static void assert_ids(const int64_t *actual, int64_t n, const int64_t *expected, int64_t m)
{
    if (n != m) {
        print_error("got %lld ids, expected %lld\n", (long long)n, (long long)m);
        fail();
    }
    for (int64_t i = 0; i < n; i++) {
        if (actual[i] != expected[i]) {
            print_error("id %lld: got %lld, expected %lld\n", (long long)i,
                        (long long)actual[i], (long long)expected[i]);
            fail();
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Golden cases                                                              */
/* ------------------------------------------------------------------------ */

static void test_char_case(void **state)
{
    TensorFile f;
    load_golden(&f, CHAPTER, *state);
    Error err = {{0}};
    size_t corpus_len, len;
    const uint8_t *corpus = golden_bytes(&f, "corpus", &corpus_len);
    const uint8_t *text = golden_bytes(&f, "text", &len);

    Vocab v;
    check_ok(char_vocab_build(&v, corpus, corpus_len, &err), &err, "char_vocab_build");
    int64_t m = v.size - v.n_special;
    int64_t *codepoints = test_ids((size_t)m);
    for (int64_t k = 0; k < m; k++) {
        uint32_t cp;
        size_t nb;
        const uint8_t *token = v.bytes[v.n_special + k];
        check_ok(utf8_decode(token, v.lengths[v.n_special + k], 0, &cp, &nb, &err), &err,
                 "utf8_decode");
        codepoints[k] = cp;
    }
    assert_ids_equal(&f, "codepoints", codepoints, m);

    int64_t *ids = test_ids(len), n = -1;
    check_ok(char_encode(&v, text, len, ids, &n, &err), &err, "char_encode");
    assert_ids_equal(&f, "ids", ids, n);
    Text back = {0};
    check_ok(vocab_decode(&v, ids, n, "", &back, &err), &err, "vocab_decode");
    assert_bytes_equal(&f, "decoded", back.data, back.len);

    text_free(&back);
    free(ids);
    free(codepoints);
    vocab_free(&v);
    tensorfile_free(&f);
}

static void test_word_case(void **state)
{
    TensorFile f;
    load_golden(&f, CHAPTER, *state);
    Error err = {{0}};
    size_t corpus_len, len;
    const uint8_t *corpus = golden_bytes(&f, "corpus", &corpus_len);
    const uint8_t *text = golden_bytes(&f, "text", &len);

    Vocab v;
    int64_t *counts = NULL;
    check_ok(word_vocab_build(&v, &counts, corpus, corpus_len, (int)golden_meta_int(&f, "min_freq"),
                              &err), &err, "word_vocab_build");
    Text words = {0};
    for (int id = v.n_special; id < v.size; id++) {
        if (id > v.n_special) check_ok(text_append(&words, "\n", 1, &err), &err, "append");
        check_ok(text_append(&words, v.bytes[id], v.lengths[id], &err), &err, "append");
    }
    assert_bytes_equal(&f, "vocab", words.data, words.len);
    assert_ids_equal(&f, "counts", counts, v.size);

    int64_t *ids = test_ids(len), n = -1;
    check_ok(word_encode(&v, text, len, ids, &n, &err), &err, "word_encode");
    assert_ids_equal(&f, "ids", ids, n);
    Text back = {0};
    check_ok(vocab_decode(&v, ids, n, " ", &back, &err), &err, "vocab_decode");
    assert_bytes_equal(&f, "decoded", back.data, back.len);

    text_free(&back);
    text_free(&words);
    free(ids);
    free(counts);
    vocab_free(&v);
    tensorfile_free(&f);
}

/* First encodes with the golden merges (so an encoding bug shows on its
 * own), then trains on the corpus and compares the merges and the ids. */
static void test_bpe_case(void **state)
{
    TensorFile f;
    load_golden(&f, CHAPTER, *state);
    Error err = {{0}};
    size_t corpus_len, len;
    const uint8_t *corpus = golden_bytes(&f, "corpus", &corpus_len);
    const uint8_t *text = golden_bytes(&f, "text", &len);
    const Tensor *merges = golden_tensor(&f, "merges", DTYPE_I64);
    assert_int_equal(merges->ndim, 2);
    const int64_t *golden_merges = merges->data;
    int64_t *ids = test_ids(len), n = -1;

    Bpe given;
    check_ok(bpe_init(&given, &err), &err, "bpe_init");
    for (int64_t k = 0; k < merges->shape[0]; k++)
        check_ok(bpe_add_merge(&given, golden_merges[2 * k], golden_merges[2 * k + 1], &err),
                 &err, "bpe_add_merge");
    check_ok(bpe_encode(&given, text, len, ids, &n, &err), &err, "bpe_encode (golden merges)");
    assert_ids_equal(&f, "ids", ids, n);
    bpe_free(&given);

    Bpe bpe;
    check_ok(bpe_init(&bpe, &err), &err, "bpe_init");
    check_ok(bpe_train(&bpe, corpus, corpus_len, golden_meta_int(&f, "vocab_size"), &err), &err,
             "bpe_train");
    assert_ids_equal(&f, "merges", bpe.merges, 2 * bpe.n_merges);
    n = -1;
    check_ok(bpe_encode(&bpe, text, len, ids, &n, &err), &err, "bpe_encode");
    assert_ids_equal(&f, "ids", ids, n);
    Text back = {0};
    check_ok(vocab_decode(&bpe.vocab, ids, n, "", &back, &err), &err, "vocab_decode");
    assert_bytes_equal(&f, "decoded", back.data, back.len);
    assert_bytes_equal(&f, "text", back.data, back.len);      /* the round trip is exact */

    text_free(&back);
    free(ids);
    bpe_free(&bpe);
    tensorfile_free(&f);
}

static void test_taylor_case(void **state)
{
    TensorFile f;
    load_golden(&f, CHAPTER, *state);
    Error err = {{0}};
    size_t len;
    const uint8_t *text = golden_bytes(&f, "text", &len);
    TaylorSide side = strcmp(tensorfile_meta(&f, "op"), "taylor_source") == 0 ? TAYLOR_SOURCE
                                                                             : TAYLOR_TARGET;
    Vocab v;
    check_ok(taylor_vocab(&v, side, &err), &err, "taylor_vocab");
    int64_t *ids = test_ids(len), n = -1;
    check_ok(taylor_encode(&v, text, len, ids, &n, &err), &err, "taylor_encode");
    assert_ids_equal(&f, "ids", ids, n);

    int64_t T = golden_meta_int(&f, "length");
    int64_t *seq = test_ids((size_t)T);
    check_ok(seq_bracket(seq, ids, n, T, &err), &err, "seq_bracket");
    assert_ids_equal(&f, "sequence", seq, T);
    Text back = {0};
    check_ok(vocab_decode(&v, seq, T, "", &back, &err), &err, "vocab_decode");
    assert_bytes_equal(&f, "decoded", back.data, back.len);

    text_free(&back);
    free(seq);
    free(ids);
    vocab_free(&v);
    tensorfile_free(&f);
}

static void test_batch_case(void **state)
{
    TensorFile f;
    load_golden(&f, CHAPTER, *state);
    Error err = {{0}};
    size_t len;
    const uint8_t *texts = golden_bytes(&f, "texts", &len);
    TaylorSide side = strcmp(tensorfile_meta(&f, "side"), "source") == 0 ? TAYLOR_SOURCE
                                                                          : TAYLOR_TARGET;
    Vocab v;
    check_ok(taylor_vocab(&v, side, &err), &err, "taylor_vocab");
    const Tensor *golden = golden_tensor(&f, "batch", DTYPE_I64);
    assert_int_equal(golden->ndim, 2);
    int64_t N = golden->shape[0];

    /* One line per sequence, tokenized end to end into ids. */
    int64_t *ids = test_ids(len), *counts = test_ids((size_t)N), total = 0, b = 0;
    for (size_t start = 0; start <= len; b++) {
        size_t end = start;
        while (end < len && texts[end] != '\n') end++;
        assert_true(b < N);
        check_ok(taylor_encode(&v, texts + start, end - start, ids + total, &counts[b], &err),
                 &err, "taylor_encode");
        total += counts[b];
        start = end + 1;
    }
    assert_int_equal(b, N);
    int64_t T = golden_meta_int(&f, "length");
    if (T == 0) T = seq_batch_length(counts, N);
    int64_t *rows = test_ids((size_t)(N * T)), *lengths = test_ids((size_t)N);
    check_ok(seq_batch(rows, lengths, ids, counts, N, T, &err), &err, "seq_batch");
    assert_ids_equal(&f, "batch", rows, N * T);
    assert_ids_equal(&f, "lengths", lengths, N);
    Text back = {0};
    for (int64_t r = 0; r < N; r++) {
        if (r) check_ok(text_append(&back, "\n", 1, &err), &err, "append");
        check_ok(vocab_decode(&v, rows + r * T, T, "", &back, &err), &err, "vocab_decode");
    }
    assert_bytes_equal(&f, "decoded", back.data, back.len);

    text_free(&back);
    free(rows);
    free(lengths);
    free(ids);
    free(counts);
    vocab_free(&v);
    tensorfile_free(&f);
}

/* ------------------------------------------------------------------------ */
/* Vocabulary and UTF-8                                                      */
/* ------------------------------------------------------------------------ */

static void test_vocab_specials_and_lookup(void **state)
{
    Vocab v;
    Error err = {{0}};
    vocab_init(&v);
    check_ok(vocab_add_specials(&v, 1, &err), &err, "vocab_add_specials");
    assert_int_equal(v.size, 4);
    assert_int_equal(v.n_special, 4);
    assert_int_equal(vocab_find(&v, "<pad>", 5), TOKEN_PAD);
    assert_int_equal(vocab_find(&v, "<eos>", 5), TOKEN_EOS);
    assert_int_equal(vocab_find(&v, "<unk>", 5), TOKEN_UNK);
    /* Enough tokens to make the hash table grow several times. */
    char tok[32];
    for (int i = 0; i < 3000; i++) {
        snprintf(tok, sizeof tok, "tok%d", i);
        assert_int_equal(vocab_add(&v, tok, strlen(tok), &err), 4 + i);
    }
    for (int i = 0; i < 3000; i += 7) {
        snprintf(tok, sizeof tok, "tok%d", i);
        assert_int_equal(vocab_find(&v, tok, strlen(tok)), 4 + i);
    }
    assert_int_equal(vocab_find(&v, "tok3000", 7), -1);
    /* A duplicate gets its own id; lookup keeps the first. */
    assert_int_equal(vocab_add(&v, "tok7", 4, &err), 3004);
    assert_int_equal(vocab_find(&v, "tok7", 4), 11);
    /* Tokens are bytes: a zero byte is part of the token. */
    int id = vocab_add(&v, "a\0b", 3, &err);
    assert_int_equal(vocab_find(&v, "a\0b", 3), id);
    assert_int_equal(vocab_find(&v, "a", 1), -1);
    check_error(vocab_add_specials(&v, 0, &err), &err, "must come first", NULL);
    vocab_free(&v);
}

static void test_vocab_decode_skips_specials(void **state)
{
    Vocab v;
    Error err = {{0}};
    vocab_init(&v);
    check_ok(vocab_add_specials(&v, 1, &err), &err, "vocab_add_specials");
    assert_int_equal(vocab_add(&v, "ab", 2, &err), 4);
    assert_int_equal(vocab_add(&v, "c", 1, &err), 5);
    int64_t ids[] = {TOKEN_SOS, 4, TOKEN_UNK, TOKEN_PAD, 5, TOKEN_EOS, TOKEN_PAD};
    Text out = {0};
    check_ok(vocab_decode(&v, ids, 7, "", &out, &err), &err, "vocab_decode");
    assert_string_equal((char *)out.data, "ab<unk>c");
    text_free(&out);
    check_ok(vocab_decode(&v, ids, 7, " ", &out, &err), &err, "vocab_decode");
    assert_string_equal((char *)out.data, "ab <unk> c");    /* no space for skipped ids */
    text_free(&out);
    int64_t bad[] = {4, 6};
    check_error(vocab_decode(&v, bad, 2, "", &out, &err), &err, "token id 6", "position 1");
    text_free(&out);
    vocab_free(&v);
}

static void test_utf8_decode_and_encode(void **state)
{
    const struct { const char *bytes; uint32_t cp; size_t n; } cases[] = {
        {"A", 0x41, 1}, {"\x7f", 0x7F, 1}, {"\xc2\x80", 0x80, 2}, {"\xc3\xa9", 0xE9, 2},
        {"\xdf\xbf", 0x7FF, 2}, {"\xe0\xa0\x80", 0x800, 3}, {"\xe2\x82\xac", 0x20AC, 3},
        {"\xef\xbf\xbf", 0xFFFF, 3}, {"\xf0\x90\x80\x80", 0x10000, 4},
        {"\xf0\x9f\x98\x80", 0x1F600, 4}, {"\xf4\x8f\xbf\xbf", 0x10FFFF, 4},
    };
    Error err = {{0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const uint8_t *s = (const uint8_t *)cases[i].bytes;
        uint32_t cp = 0;
        size_t n = 0;
        check_ok(utf8_decode(s, strlen(cases[i].bytes), 0, &cp, &n, &err), &err, "utf8_decode");
        assert_int_equal(cp, cases[i].cp);
        assert_int_equal(n, cases[i].n);
        uint8_t back[4];
        check_ok(utf8_encode(cp, back, &n, &err), &err, "utf8_encode");
        assert_int_equal(n, cases[i].n);
        assert_memory_equal(back, s, n);
    }
    uint8_t out[4];
    size_t n;
    check_error(utf8_encode(0xD800, out, &n, &err), &err, "U+D800", NULL);
}

/* Each bad sequence sits after some valid text; the error names its offset. */
static void test_char_encode_invalid_utf8(void **state)
{
    const struct { const char *bytes; const char *offset; const char *problem; } cases[] = {
        {"ab\x80", "byte offset 2", "cannot start"},
        {"x\xc3", "byte offset 1", "ends inside"},
        {"\xc3\xa9\xe2\x82", "byte offset 2", "ends inside"},
        {"\xc3\x28", "byte offset 0", "not a continuation"},
        {"ok \xc0\xaf", "byte offset 3", "overlong"},
        {"\xe0\x80\xaf", "byte offset 0", "overlong"},
        {"\xf0\x80\x80\xaf", "byte offset 0", "overlong"},
        {"caf\xed\xa0\x80", "byte offset 3", "surrogate"},
        {"\xf4\x90\x80\x80", "byte offset 0", "above U+10FFFF"},
        {"\xc3\xa9\xff", "byte offset 2", "0xff cannot start"},
    };
    Vocab v;
    Error err = {{0}};
    check_ok(char_vocab_build(&v, (const uint8_t *)"abc", 3, &err), &err, "char_vocab_build");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len = strlen(cases[i].bytes);
        int64_t ids[8], n;
        err.msg[0] = 0;
        int rc = char_encode(&v, (const uint8_t *)cases[i].bytes, len, ids, &n, &err);
        check_error(rc, &err, cases[i].offset, cases[i].problem);
    }
    vocab_free(&v);
    /* A corpus with invalid UTF-8 builds no vocabulary. */
    check_error(char_vocab_build(&v, (const uint8_t *)"abc\xff", 4, &err), &err, "byte offset 3",
                NULL);
    assert_int_equal(v.size, 0);
    vocab_free(&v);
}

/* ------------------------------------------------------------------------ */
/* Character and word level                                                  */
/* ------------------------------------------------------------------------ */

static void test_char_vocab_sorted_by_codepoint(void **state)
{
    const char *corpus = "b\xc3\xa9 a\xf0\x9f\x98\x80" "bb";      /* "bé a😀bb" */
    const char *expected[] = {" ", "a", "b", "\xc3\xa9", "\xf0\x9f\x98\x80"};
    Vocab v;
    Error err = {{0}};
    check_ok(char_vocab_build(&v, (const uint8_t *)corpus, strlen(corpus), &err), &err,
             "char_vocab_build");
    assert_int_equal(v.size, 4 + 5);
    for (int k = 0; k < 5; k++) {
        assert_int_equal(v.lengths[4 + k], strlen(expected[k]));
        assert_memory_equal(v.bytes[4 + k], expected[k], strlen(expected[k]));
    }
    vocab_free(&v);
}

static void test_char_unknown_and_round_trip(void **state)
{
    Vocab v;
    Error err = {{0}};
    check_ok(char_vocab_build(&v, (const uint8_t *)"hello w\xc3\xb6rld", 12, &err), &err,
             "char_vocab_build");
    int64_t ids[32];
    int64_t n = encode_ok(char_encode, &v, "w\xc3\xb6rld hello", ids);
    assert_int_equal(n, 11);                       /* ö is one token, not two */
    Text back = {0};
    check_ok(vocab_decode(&v, ids, n, "", &back, &err), &err, "vocab_decode");
    assert_string_equal((char *)back.data, "w\xc3\xb6rld hello");
    text_free(&back);
    n = encode_ok(char_encode, &v, "h\xc3\xa9!", ids);     /* "hé!": é and ! are unknown */
    int64_t h = vocab_find(&v, "h", 1);
    assert_ids(ids, n, (int64_t[]){h, TOKEN_UNK, TOKEN_UNK}, 3);
    check_ok(vocab_decode(&v, ids, n, "", &back, &err), &err, "vocab_decode");
    assert_string_equal((char *)back.data, "h<unk><unk>");
    text_free(&back);
    vocab_free(&v);
}

static void test_word_split_rule(void **state)
{
    const char *text = "Don't stop--now!  x2\t\303\234ber.\n";     /* ... "Über." (octal) */
    const char *expected[] = {"Don't", "stop", "-", "-", "now", "!", "x2", "\303\234ber", "."};
    Span words[64];
    size_t n = 0;
    Error err = {{0}};
    check_ok(word_split((const uint8_t *)text, strlen(text), words, &n, &err), &err,
             "word_split");
    assert_int_equal(n, 9);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(words[i].len, strlen(expected[i]));
        assert_memory_equal(text + words[i].start, expected[i], words[i].len);
    }
    check_ok(word_split((const uint8_t *)" \t\n ", 4, words, &n, &err), &err, "word_split");
    assert_int_equal(n, 0);
}

static void test_word_vocab_order_and_min_freq(void **state)
{
    const char *corpus = "b a b c a b y x";
    Vocab v;
    int64_t *counts = NULL;
    Error err = {{0}};
    check_ok(word_vocab_build(&v, &counts, (const uint8_t *)corpus, strlen(corpus), 1, &err),
             &err, "word_vocab_build");
    /* b (3), a (2), then the words seen once in bytewise order: c, x, y. */
    const char *order[] = {"b", "a", "c", "x", "y"};
    const int64_t want_counts[] = {0, 0, 0, 0, 3, 2, 1, 1, 1};
    assert_int_equal(v.size, 9);
    for (int k = 0; k < 5; k++) assert_int_equal(vocab_find(&v, order[k], 1), 4 + k);
    assert_ids(counts, v.size, want_counts, 9);
    free(counts);
    vocab_free(&v);

    check_ok(word_vocab_build(&v, &counts, (const uint8_t *)corpus, strlen(corpus), 2, &err),
             &err, "word_vocab_build");
    assert_int_equal(v.size, 6);                   /* only b and a are seen twice */
    int64_t ids[16];
    int64_t n = encode_ok(word_encode, &v, "a c b", ids);
    assert_ids(ids, n, (int64_t[]){5, TOKEN_UNK, 4}, 3);
    free(counts);
    vocab_free(&v);

    check_error(word_vocab_build(&v, &counts, (const uint8_t *)corpus, 3, 0, &err), &err,
                "min_freq 0", NULL);
    assert_null(counts);
}

static void test_word_decode_loses_spacing(void **state)
{
    const char *text = "stop--now!\n\n  Go";
    Vocab v;
    int64_t *counts = NULL;
    Error err = {{0}};
    check_ok(word_vocab_build(&v, &counts, (const uint8_t *)text, strlen(text), 1, &err), &err,
             "word_vocab_build");
    int64_t ids[32];
    int64_t n = encode_ok(word_encode, &v, text, ids);
    Text back = {0};
    check_ok(vocab_decode(&v, ids, n, " ", &back, &err), &err, "vocab_decode");
    assert_string_equal((char *)back.data, "stop - - now ! Go");
    text_free(&back);
    free(counts);
    vocab_free(&v);
}

/* ------------------------------------------------------------------------ */
/* BPE                                                                       */
/* ------------------------------------------------------------------------ */

static void test_bpe_pretokenize_rules(void **state)
{
    const char *text = "Hello,  world 42x  \n  the end.\xc3\xa9t\xc3\xa9 x";
    const char *expected[] = {"Hello", ",", " ", " world", " 42", "x", "  \n ", " the", " end",
                              ".", "\xc3\xa9t\xc3\xa9", " x"};
    Span pieces[64];
    size_t n = 0;
    Error err = {{0}};
    check_ok(bpe_pretokenize((const uint8_t *)text, strlen(text), pieces, &n, &err), &err,
             "bpe_pretokenize");
    assert_int_equal(n, 12);
    for (size_t i = 0; i < n; i++) {
        if (pieces[i].len != strlen(expected[i]) ||
            memcmp(text + pieces[i].start, expected[i], pieces[i].len) != 0) {
            print_error("piece %zu: got '%.*s', expected '%s'\n", i, (int)pieces[i].len,
                        text + pieces[i].start, expected[i]);
            fail();
        }
    }
    /* The pieces tile the text: nothing is dropped. */
    assert_int_equal(pieces[n - 1].start + pieces[n - 1].len, strlen(text));
}

static void test_bpe_merge_left_to_right(void **state)
{
    int64_t a[] = {5, 5, 5}, n = 3;
    assert_ok(bpe_merge(a, &n, 5, 5, 9));
    assert_ids(a, n, (int64_t[]){9, 5}, 2);        /* "aaa" -> "aa" "a", not "a" "aa" */
    int64_t b[] = {5, 5, 5, 5};
    n = 4;
    assert_ok(bpe_merge(b, &n, 5, 5, 9));
    assert_ids(b, n, (int64_t[]){9, 9}, 2);
    int64_t c[] = {1, 5, 6, 5, 6, 6};
    n = 6;
    assert_ok(bpe_merge(c, &n, 5, 6, 7));
    assert_ids(c, n, (int64_t[]){1, 7, 7, 6}, 4);
    n = 0;
    assert_ok(bpe_merge(c, &n, 5, 6, 7));
    assert_int_equal(n, 0);
}

/* "ba ba ab ab" has pieces "ba", " ba", " ab" x2. The first round has three
 * pairs of count 2: (" ", a) = (35, 100), (a, b) = (100, 101) and (b, a) =
 * (101, 100); the smallest wins. The second round ties (b, a) = (101, 100)
 * with (" a", b) = (259, 101); the smaller left id wins. */
static void test_bpe_tie_break(void **state)
{
    const char *corpus = "ba ba ab ab";
    Bpe bpe;
    Error err = {{0}};
    check_ok(bpe_init(&bpe, &err), &err, "bpe_init");
    check_ok(bpe_train(&bpe, (const uint8_t *)corpus, strlen(corpus), 270, &err), &err,
             "bpe_train");
    assert_ids(bpe.merges, 2 * bpe.n_merges, (int64_t[]){35, 100, 101, 100, 259, 101}, 6);
    assert_int_equal(bpe.vocab.size, 262);
    assert_string_equal((char *)bpe.vocab.bytes[261], " ab");
    bpe_free(&bpe);
}

/* Overlapping pairs count: "aaaa" holds (a, a) three times. After the first
 * merge "aaaa" is "aa" "aa"; training stops when no pair occurs twice. */
static void test_bpe_overlaps_and_stop(void **state)
{
    const char *corpus = "aaaa aaaa";
    Bpe bpe;
    Error err = {{0}};
    check_ok(bpe_init(&bpe, &err), &err, "bpe_init");
    check_ok(bpe_train(&bpe, (const uint8_t *)corpus, strlen(corpus), 10000, &err), &err,
             "bpe_train");
    assert_ids(bpe.merges, 2 * bpe.n_merges, (int64_t[]){100, 100, 259, 259}, 4);
    int64_t ids[8], n;
    check_ok(bpe_encode(&bpe, (const uint8_t *)"aaaaa", 5, ids, &n, &err), &err, "bpe_encode");
    assert_ids(ids, n, (int64_t[]){260, 100}, 2);
    bpe_free(&bpe);

    /* Every pair of "abcd" occurs once: no merge at all. */
    check_ok(bpe_init(&bpe, &err), &err, "bpe_init");
    check_ok(bpe_train(&bpe, (const uint8_t *)"abcd", 4, 300, &err), &err, "bpe_train");
    assert_int_equal(bpe.n_merges, 0);
    bpe_free(&bpe);
}

/* decode(encode(x)) == x for the corpus itself, every byte value, random
 * bytes (invalid UTF-8 included) and non-ASCII text. */
static void test_bpe_round_trip(void **state)
{
    TensorFile f;
    load_golden(&f, CHAPTER, "bpe_gpl_500");
    size_t corpus_len;
    const uint8_t *corpus = golden_bytes(&f, "corpus", &corpus_len);
    Bpe bpe;
    Error err = {{0}};
    check_ok(bpe_init(&bpe, &err), &err, "bpe_init");
    check_ok(bpe_train(&bpe, corpus, corpus_len, 400, &err), &err, "bpe_train");

    uint8_t all_bytes[256], random_bytes[2000];
    for (int i = 0; i < 256; i++) all_bytes[i] = (uint8_t)i;
    Rng rng;
    rng_seed(&rng, 11, 0);
    for (int i = 0; i < 2000; i++) random_bytes[i] = (uint8_t)rng_below(&rng, 256);
    const char *unicode = "na\xc3\xafve caf\xc3\xa9 \xe2\x80\x94 \xe6\x97\xa5\xe6\x9c\xac "
                          "\xf0\x9f\x98\x80 the  Program\r\n\t 2007";
    const struct { const uint8_t *data; size_t len; const char *name; } texts[] = {
        {corpus, corpus_len, "the corpus"},
        {all_bytes, 256, "bytes 0..255"},
        {random_bytes, 2000, "2000 random bytes"},
        {(const uint8_t *)unicode, strlen(unicode), "non-ASCII text"},
        {(const uint8_t *)"", 0, "empty text"},
    };
    for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++) {
        int64_t *ids = test_ids(texts[k].len), n = -1;
        check_ok(bpe_encode(&bpe, texts[k].data, texts[k].len, ids, &n, &err), &err,
                 "bpe_encode");
        Text back = {0};
        check_ok(vocab_decode(&bpe.vocab, ids, n, "", &back, &err), &err, "vocab_decode");
        print_message("  %-20s %6zu bytes -> %6lld tokens -> %6zu bytes\n", texts[k].name,
                      texts[k].len, (long long)n, back.len);
        assert_int_equal(back.len, texts[k].len);
        if (back.len) assert_memory_equal(back.data, texts[k].data, back.len);
        text_free(&back);
        free(ids);
    }
    bpe_free(&bpe);
    tensorfile_free(&f);
}

static void test_bpe_bad_input(void **state)
{
    Bpe bpe;
    Error err = {{0}};
    check_ok(bpe_init(&bpe, &err), &err, "bpe_init");
    check_error(bpe_train(&bpe, (const uint8_t *)"abab", 4, 258, &err), &err, "258", "259");
    check_error(bpe_add_merge(&bpe, 0, 100, &err), &err, "outside", NULL);   /* <pad> */
    check_error(bpe_add_merge(&bpe, 100, 259, &err), &err, "outside", NULL); /* not yet made */
    check_ok(bpe_add_merge(&bpe, 100, 101, &err), &err, "bpe_add_merge");
    check_error(bpe_add_merge(&bpe, 100, 101, &err), &err, "already merge 0", NULL);
    check_error(bpe_train(&bpe, (const uint8_t *)"abab", 4, 300, &err), &err, "fresh", NULL);
    bpe_free(&bpe);
}

/* ------------------------------------------------------------------------ */
/* Taylor series                                                             */
/* ------------------------------------------------------------------------ */

/* The vocabularies as seed 002 prints them, in id order. */
static const char *const SEED_SOURCE[] = {
    "<pad>", "<sos>", "<eos>", "(", ")", "*", "**", "+", "-", "/", "0", "1", "2", "3", "4", "5",
    "6", "7", "8", "9", "a", "b", "c", "cos", "cosh", "d", "exp", "f", "g", "h", "m", "n", "sin",
    "sinh", "tan", "tanh", "x"};
static const char *const SEED_TARGET[] = {
    "<pad>", "<sos>", "<eos>", "(", ")", "*", "**", "+", "-", "/", "0", "1", "2", "3", "4", "5",
    "6", "7", "8", "9", "O(x**6)", "a", "b", "c", "d", "f", "g", "h", "m", "x"};

static void test_taylor_vocab_equals_seed(void **state)
{
    Vocab v;
    Error err = {{0}};
    for (int side = 0; side < 2; side++) {
        const char *const *seed = side == 0 ? SEED_SOURCE : SEED_TARGET;
        int n = side == 0 ? 37 : 30;
        check_ok(taylor_vocab(&v, side == 0 ? TAYLOR_SOURCE : TAYLOR_TARGET, &err), &err,
                 "taylor_vocab");
        assert_int_equal(v.size, n);
        assert_int_equal(v.n_special, 3);
        for (int id = 0; id < n; id++) assert_string_equal((char *)v.bytes[id], seed[id]);
        vocab_free(&v);
    }
}

static void test_taylor_longest_match(void **state)
{
    Vocab source, target;
    Error err = {{0}};
    check_ok(taylor_vocab(&source, TAYLOR_SOURCE, &err), &err, "taylor_vocab");
    check_ok(taylor_vocab(&target, TAYLOR_TARGET, &err), &err, "taylor_vocab");
    int64_t ids[32], n;
    n = encode_ok(taylor_encode, &source, "cosh", ids);
    assert_ids(ids, n, (int64_t[]){24}, 1);                  /* not cos, h */
    n = encode_ok(taylor_encode, &source, "cos h", ids);
    assert_ids(ids, n, (int64_t[]){23, 29}, 2);              /* a space ends the match */
    n = encode_ok(taylor_encode, &source, "sinh(x)**2", ids);
    assert_ids(ids, n, (int64_t[]){33, 3, 36, 4, 6, 12}, 6);
    n = encode_ok(taylor_encode, &source, "***", ids);
    assert_ids(ids, n, (int64_t[]){6, 5}, 2);                /* ** then * */
    n = encode_ok(taylor_encode, &source, "* *", ids);
    assert_ids(ids, n, (int64_t[]){5, 5}, 2);
    n = encode_ok(taylor_encode, &source, " a\t*\nexp ", ids);
    assert_ids(ids, n, (int64_t[]){20, 5, 26}, 3);           /* whitespace skipped */
    n = encode_ok(taylor_encode, &target, "x**6 + O(x**6)", ids);
    assert_ids(ids, n, (int64_t[]){29, 6, 16, 7, 20}, 5);    /* O(x**6) is one token */
    n = encode_ok(taylor_encode, &target, "", ids);
    assert_int_equal(n, 0);
    vocab_free(&source);
    vocab_free(&target);
}

static void test_taylor_untokenizable(void **state)
{
    Vocab source, target;
    Error err = {{0}};
    check_ok(taylor_vocab(&source, TAYLOR_SOURCE, &err), &err, "taylor_vocab");
    check_ok(taylor_vocab(&target, TAYLOR_TARGET, &err), &err, "taylor_vocab");
    int64_t ids[32], n;
    const struct { const Vocab *v; const char *text; const char *what, *where; } cases[] = {
        {&source, "sin(y*x)", "'y'", "byte offset 4"},
        {&source, "O(x**6)", "'O'", "byte offset 0"},       /* a target token only */
        {&source, "e", "'e'", "byte offset 0"},             /* exp, but not e alone */
        {&target, "1 + sin(x)", "'s'", "byte offset 4"},     /* functions are source only */
        {&target, "O(x**5)", "'O'", "byte offset 0"},
        {&source, "a*\x01", "byte 0x01", "byte offset 2"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = taylor_encode(cases[i].v, (const uint8_t *)cases[i].text, strlen(cases[i].text),
                               ids, &n, &err);
        check_error(rc, &err, cases[i].what, cases[i].where);
    }
    vocab_free(&source);
    vocab_free(&target);
}

/* Seed 002's printed example: the same ids, and the same row apart from
 * where <eos> goes. */
static void test_taylor_seed_example(void **state)
{
    static const int64_t seed_array[22] = {1, 24, 3, 20, 5, 36, 4, 6, 13, 7, 35,
                                           3, 21, 5, 36, 4, 0, 0, 0, 0, 0, 2};
    static const int64_t ours[22] = {1, 24, 3, 20, 5, 36, 4, 6, 13, 7, 35,
                                     3, 21, 5, 36, 4, 2, 0, 0, 0, 0, 0};
    Vocab v;
    Error err = {{0}};
    check_ok(taylor_vocab(&v, TAYLOR_SOURCE, &err), &err, "taylor_vocab");
    int64_t ids[32], row[22];
    int64_t n = encode_ok(taylor_encode, &v, "cosh(a*x)**3 + tanh(b*x)", ids);
    assert_ids(ids, n, seed_array + 1, 15);
    check_ok(seq_bracket(row, ids, n, 22, &err), &err, "seq_bracket");
    assert_ids(row, 22, ours, 22);
    vocab_free(&v);
}

/* ------------------------------------------------------------------------ */
/* Bracketing, padding, batching                                             */
/* ------------------------------------------------------------------------ */

static void test_seq_bracket_and_pad(void **state)
{
    const int64_t ids[3] = {7, 8, 9};
    int64_t out[8];
    Error err = {{0}};
    check_ok(seq_bracket(out, ids, 3, 5, &err), &err, "seq_bracket");
    assert_ids(out, 5, (int64_t[]){TOKEN_SOS, 7, 8, 9, TOKEN_EOS}, 5);
    check_ok(seq_bracket(out, ids, 3, 8, &err), &err, "seq_bracket");
    assert_ids(out, 8, (int64_t[]){TOKEN_SOS, 7, 8, 9, TOKEN_EOS, TOKEN_PAD, TOKEN_PAD,
                                   TOKEN_PAD}, 8);
    check_ok(seq_bracket(out, ids, 0, 2, &err), &err, "seq_bracket");
    assert_ids(out, 2, (int64_t[]){TOKEN_SOS, TOKEN_EOS}, 2);
    /* Too long: an error, never a silent truncation. */
    check_error(seq_bracket(out, ids, 3, 4, &err), &err, "needs length 5", "length is 4");
}

static void test_seq_batch(void **state)
{
    const int64_t ids[5] = {11, 12, 21, 22, 23}, counts[3] = {2, 0, 3};
    int64_t T = seq_batch_length(counts, 3);
    assert_int_equal(T, 5);
    int64_t batch[3 * 6], lengths[3];
    Error err = {{0}};
    check_ok(seq_batch(batch, lengths, ids, counts, 3, T, &err), &err, "seq_batch");
    const int64_t expected[3 * 5] = {1, 11, 12, 2, 0,
                                     1, 2, 0, 0, 0,
                                     1, 21, 22, 23, 2};
    assert_ids(batch, 3 * 5, expected, 3 * 5);
    assert_ids(lengths, 3, (int64_t[]){4, 2, 5}, 3);
    check_error(seq_batch(batch, lengths, ids, counts, 3, 4, &err), &err, "batch row 2",
                "needs 5");
}

static void test_read_file_errors(void **state)
{
    Text t = {0};
    Error err = {{0}};
    check_error(text_read_file("build/no_such_corpus.txt", &t, &err), &err,
                "build/no_such_corpus.txt", "No such file");
    text_free(&t);
    check_ok(text_read_file("golden/01_tokenization/bpe_tiny.safetensors", &t, &err), &err,
             "text_read_file");
    assert_true(t.len > 8);
    text_free(&t);
}

/* A folder opens (fopen succeeds on Linux) and fails at the read: the error
 * names it, and t is left as it was, so a caller that returns without
 * text_free leaks nothing (it leaked the 64 bytes of the first append; the
 * CI's valgrind run of this program sees any leak). A text that already
 * held something keeps it. */
static void test_read_file_folder(void **state)
{
    Text t = {0};
    Error err = {{0}};
    check_error(text_read_file("golden/01_tokenization", &t, &err), &err,
                "golden/01_tokenization", "Is a directory");
    assert_null(t.data);
    assert_int_equal(t.len, 0);
    check_ok(text_append(&t, "abc", 3, &err), &err, "text_append");
    check_error(text_read_file("golden/01_tokenization", &t, &err), &err,
                "golden/01_tokenization", "Is a directory");
    assert_int_equal(t.len, 3);
    assert_string_equal((const char *)t.data, "abc");
    text_free(&t);
}

/* A file larger than TEXT_FILE_MAX is refused before it is read, in one
 * line naming it, and t is left as it was (issue 43: it was read whole, and
 * /dev/zero until memory ran out). The file is sparse: it takes no disk.
 * An endless stream (/dev/zero) is refused by the programs below. */
static void test_read_file_size_cap(void **state)
{
    const char *path = "build/too_big.txt";
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(ftruncate(fileno(f), (off_t)TEXT_FILE_MAX + 1), 0);
    assert_int_equal(fclose(f), 0);
    Text t = {0};
    Error err = {{0}};
    check_error(text_read_file(path, &t, &err), &err, "build/too_big.txt: 268435457 bytes",
                "more than the 256 MiB");
    assert_null(t.data);
    assert_int_equal(t.len, 0);
    unlink(path);
}

/* text_check_utf8 names the file and the line of a bad byte, besides its
 * offset (the char tokenizer's own error has only the offset); valid text,
 * multi-byte characters and an empty text pass. */
static void test_check_utf8_names_the_line(void **state)
{
    Error err = {{0}};
    const char *good = "caf\xc3\xa9\n\xf0\x9f\x98\x80 ok\n";
    check_ok(text_check_utf8("good.txt", (const uint8_t *)good, strlen(good), &err), &err,
             "text_check_utf8");
    check_ok(text_check_utf8("empty.txt", (const uint8_t *)"", 0, &err), &err,
             "text_check_utf8");
    const char *bad = "abc\nd\xc3\xa9\n\nxy\xffz\n";
    check_error(text_check_utf8("corpus.txt", (const uint8_t *)bad, strlen(bad), &err), &err,
                "corpus.txt:4: invalid UTF-8 at byte offset 11", "0xff cannot start");
    const char *cut = "abc\n\xe2\x82";          /* the text ends inside a character */
    check_error(text_check_utf8("cut.txt", (const uint8_t *)cut, strlen(cut), &err), &err,
                "cut.txt:2: invalid UTF-8 at byte offset 4", "ends inside");
}

/* What the chapter program says about a bad file: the char tokenizer's bad
 * UTF-8 with the file's name and line (it said "FILE: invalid UTF-8 at byte
 * offset 7"), in the corpus, the input or stdin, and an endless stdin by
 * name; exit 1 each time. */
static void test_program_names_the_file_and_line(void **state)
{
    char out[4096];
    FILE *f = fopen("build/utf8_bad.txt", "wb");
    assert_non_null(f);
    fputs("abc\ndef\xff\nxyz\n", f);
    assert_int_equal(fclose(f), 0);
    f = fopen("build/utf8_good.txt", "wb");
    assert_non_null(f);
    fputs("ab\n", f);
    assert_int_equal(fclose(f), 0);
    const struct { const char *cmd, *expect; } runs[] = {
        {"build/01_tokenization --tokenizer char --corpus build/utf8_bad.txt build/utf8_good.txt",
         "build/utf8_bad.txt:2: invalid UTF-8 at byte offset 7"},
        {"build/01_tokenization --tokenizer char --corpus build/utf8_good.txt build/utf8_bad.txt",
         "build/utf8_bad.txt:2: invalid UTF-8 at byte offset 7"},
        {"build/01_tokenization --tokenizer char --corpus build/utf8_good.txt - "
         "<build/utf8_bad.txt", "stdin:2: invalid UTF-8 at byte offset 7"},
        {"build/01_tokenization --tokenizer char --corpus build/utf8_good.txt - </dev/zero",
         "stdin: more than the 256 MiB"},
    };
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        assert_int_equal(run_command(runs[i].cmd, out, sizeof out), 1);
        assert_non_null(strstr(out, runs[i].expect));
        const char *nl = strchr(out, '\n');       /* one line */
        assert_true(nl && nl[1] == '\0');
    }
    unlink("build/utf8_bad.txt");
    unlink("build/utf8_good.txt");
}

/* ------------------------------------------------------------------------ */

int main(void)
{
    static const struct CMUnitTest tests[] = {
        GOLDEN_TEST(test_char_case, "char_gpl_ascii"),
        GOLDEN_TEST(test_char_case, "char_gpl_unknown"),
        GOLDEN_TEST(test_char_case, "char_unicode"),
        GOLDEN_TEST(test_char_case, "char_empty_text"),
        GOLDEN_TEST(test_word_case, "word_gpl_min1"),
        GOLDEN_TEST(test_word_case, "word_gpl_min3"),
        GOLDEN_TEST(test_word_case, "word_small"),
        GOLDEN_TEST(test_bpe_case, "bpe_gpl_500"),
        GOLDEN_TEST(test_bpe_case, "bpe_gpl_1000"),
        GOLDEN_TEST(test_bpe_case, "bpe_gpl_259"),
        GOLDEN_TEST(test_bpe_case, "bpe_tiny"),
        GOLDEN_TEST(test_bpe_case, "bpe_tiny_exhausted"),
        GOLDEN_TEST(test_bpe_case, "bpe_unicode"),
        GOLDEN_TEST(test_taylor_case, "taylor_source_cosh_tanh"),
        GOLDEN_TEST(test_taylor_case, "taylor_source_exp_cosh"),
        GOLDEN_TEST(test_taylor_case, "taylor_source_tan_tanh"),
        GOLDEN_TEST(test_taylor_case, "taylor_source_sinh_cosh"),
        GOLDEN_TEST(test_taylor_case, "taylor_source_spaces"),
        GOLDEN_TEST(test_taylor_case, "taylor_target_cosh_tanh"),
        GOLDEN_TEST(test_taylor_case, "taylor_target_exp_cosh"),
        GOLDEN_TEST(test_taylor_case, "taylor_target_tan_tanh"),
        GOLDEN_TEST(test_taylor_case, "taylor_target_sinh_cosh"),
        GOLDEN_TEST(test_taylor_case, "taylor_target_seed_array"),
        GOLDEN_TEST(test_batch_case, "batch_source_auto"),
        GOLDEN_TEST(test_batch_case, "batch_source_22"),
        GOLDEN_TEST(test_batch_case, "batch_target_120"),

        cmocka_unit_test(test_vocab_specials_and_lookup),
        cmocka_unit_test(test_vocab_decode_skips_specials),
        cmocka_unit_test(test_utf8_decode_and_encode),
        cmocka_unit_test(test_char_encode_invalid_utf8),
        cmocka_unit_test(test_char_vocab_sorted_by_codepoint),
        cmocka_unit_test(test_char_unknown_and_round_trip),
        cmocka_unit_test(test_word_split_rule),
        cmocka_unit_test(test_word_vocab_order_and_min_freq),
        cmocka_unit_test(test_word_decode_loses_spacing),
        cmocka_unit_test(test_bpe_pretokenize_rules),
        cmocka_unit_test(test_bpe_merge_left_to_right),
        cmocka_unit_test(test_bpe_tie_break),
        cmocka_unit_test(test_bpe_overlaps_and_stop),
        cmocka_unit_test(test_bpe_round_trip),
        cmocka_unit_test(test_bpe_bad_input),
        cmocka_unit_test(test_taylor_vocab_equals_seed),
        cmocka_unit_test(test_taylor_longest_match),
        cmocka_unit_test(test_taylor_untokenizable),
        cmocka_unit_test(test_taylor_seed_example),
        cmocka_unit_test(test_seq_bracket_and_pad),
        cmocka_unit_test(test_seq_batch),
        cmocka_unit_test(test_read_file_errors),
        cmocka_unit_test(test_read_file_folder),
        cmocka_unit_test(test_read_file_size_cap),
        cmocka_unit_test(test_check_utf8_names_the_line),
        cmocka_unit_test(test_program_names_the_file_and_line),
    };
    return run_chapter_tests("chapter 01: tokenization", tests);
}
