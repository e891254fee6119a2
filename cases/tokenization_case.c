/*
 * tokenization_case.c - see tokenization_case.h: each op's tensors and
 * options checked, the tokenizer built, and its outputs added to the file.
 */
#include "tokenization_case.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bpe.h"
#include "casefile.h"
#include "sequence.h"
#include "taylor.h"
#include "text.h"
#include "tokenizer.h"
#include "vocab.h"

/* The bytes of the 1-D U8 tensor `name`. */
static int get_bytes(const TensorFile *in, const char *name, const uint8_t **data, size_t *len,
                     Error *err)
{
    const Tensor *t;
    if (tensorfile_get(in, name, DTYPE_U8, 1, &t, err) != 0) return -1;
    *data = t->data;
    *len = (size_t)t->shape[0];
    return 0;
}

static int add_i64(TensorFile *out, const char *name, const int64_t *data, int ndim,
                   const int64_t *shape, Error *err)
{
    Tensor t;
    if (case_tensor_alloc(&t, DTYPE_I64, ndim, shape, err) != 0) return -1;
    size_t bytes = (size_t)tensor_numel(&t) * sizeof(int64_t);
    if (bytes) memcpy(t.data, data, bytes);
    if (tensorfile_add(out, name, &t, err) != 0) {
        case_tensor_free(&t);
        return -1;
    }
    return 0;
}

static int add_bytes(TensorFile *out, const char *name, const uint8_t *data, size_t len,
                     Error *err)
{
    Tensor t;
    if (case_tensor_alloc(&t, DTYPE_U8, 1, (int64_t[]){(int64_t)len}, err) != 0) return -1;
    if (len) memcpy(t.data, data, len);
    if (tensorfile_add(out, name, &t, err) != 0) {
        case_tensor_free(&t);
        return -1;
    }
    return 0;
}

/* char_encode, word_encode and bpe_train_encode: a tokenizer learnt from
 * the tensor "corpus", applied to the tensor "text". */
static int eval_learnt(const TensorFile *in, const CaseArgs *args, TensorFile *out, Error *err)
{
    const char *op = tensorfile_meta(in, "op");
    const uint8_t *corpus_data, *text;
    size_t corpus_len, len;
    if (get_bytes(in, "corpus", &corpus_data, &corpus_len, err) != 0 ||
        get_bytes(in, "text", &text, &len, err) != 0)
        return -1;
    Text corpus = {(uint8_t *)corpus_data, corpus_len, 0};   /* borrowed, not freed */
    TokenizerKind kind = !strcmp(op, "char_encode") ? TOKENIZER_CHAR
                : !strcmp(op, "word_encode") ? TOKENIZER_WORD : TOKENIZER_BPE;
    long long vocab_size = kind == TOKENIZER_BPE ? case_int(args, "vocab_size") : 0;
    long long min_freq = kind == TOKENIZER_WORD ? case_int(args, "min_freq") : 1;

    Tokenizer tk;
    Text decoded = {0}, words = {0};
    int64_t *ids = malloc((len + 1) * sizeof *ids), n = 0;
    int64_t *extra = NULL;
    int rc = ids ? 0 : error_set(err, "out of memory for %zu ids", len + 1);
    if (rc == 0 && tokenizer_build(&tk, kind, &corpus, vocab_size, (int)min_freq, err) != 0) {
        tokenizer_free(&tk);
        rc = error_prefix(err, "corpus");
    }
    if (rc != 0) {
        free(ids);
        return error_prefix(err, in->path);
    }
    if (tokenizer_encode(&tk, text, len, ids, &n, err) != 0)
        rc = error_prefix(err, "text");
    if (rc == 0) rc = tokenizer_decode(&tk, ids, n, &decoded, err);
    if (rc == 0) rc = add_i64(out, "ids", ids, 1, (int64_t[]){n}, err);
    if (rc == 0) rc = add_bytes(out, "decoded", decoded.data, decoded.len, err);

    const Vocab *v = tokenizer_vocab(&tk);
    if (rc == 0 && kind == TOKENIZER_CHAR) {
        /* The vocabulary's characters as code points. */
        int64_t m = v->size - v->n_special;
        extra = malloc(((size_t)m + 1) * sizeof *extra);
        if (!extra) rc = error_set(err, "out of memory");
        for (int64_t k = 0; rc == 0 && k < m; k++) {
            uint32_t cp;
            size_t nb;
            const Vocab *cv = &tk.vocab;
            rc = utf8_decode(cv->bytes[cv->n_special + k], cv->lengths[cv->n_special + k], 0, &cp,
                             &nb, err);
            if (rc == 0) extra[k] = cp;
        }
        if (rc == 0) rc = add_i64(out, "codepoints", extra, 1, (int64_t[]){m}, err);
    } else if (rc == 0 && kind == TOKENIZER_WORD) {
        /* The words, newline-joined, and the count of every id. */
        for (int id = v->n_special; rc == 0 && id < v->size; id++) {
            if (id > v->n_special) rc = text_append(&words, "\n", 1, err);
            if (rc == 0) rc = text_append(&words, v->bytes[id], v->lengths[id], err);
        }
        if (rc == 0) rc = add_bytes(out, "vocab", words.data, words.len, err);
        if (rc == 0) rc = add_i64(out, "counts", tk.counts, 1, (int64_t[]){v->size}, err);
    } else if (rc == 0) {
        rc = add_i64(out, "merges", tk.bpe.merges, 2, (int64_t[]){tk.bpe.n_merges, 2}, err);
    }
    free(ids);
    free(extra);
    text_free(&decoded);
    text_free(&words);
    tokenizer_free(&tk);
    return rc == 0 ? 0 : error_prefix(err, in->path);
}

/* taylor_source, taylor_target: one text; batch: newline-separated texts. */
static int eval_taylor(const TensorFile *in, const CaseArgs *args, TensorFile *out, Error *err)
{
    const char *op = tensorfile_meta(in, "op");
    int is_batch = !strcmp(op, "batch");
    const char *side = is_batch ? case_text(args, "side") : op + strlen("taylor_");
    TokenizerKind kind = !strcmp(side, "source") ? TOKENIZER_TAYLOR_SOURCE
                                                 : TOKENIZER_TAYLOR_TARGET;
    const uint8_t *text;
    size_t len;
    long long length = case_int(args, "length");
    if (get_bytes(in, is_batch ? "texts" : "text", &text, &len, err) != 0) return -1;

    /* Lines (one for taylor_*): [line_start[b], line_start[b] + line_len[b]). */
    int64_t N = 1;
    for (size_t i = 0; is_batch && i < len; i++) N += text[i] == '\n';
    Tokenizer tk;
    Text decoded = {0};
    int64_t *ids = malloc((len + 1) * sizeof *ids), *counts = malloc(N * sizeof *counts);
    int64_t *rows = NULL, *lengths = malloc(N * sizeof *lengths), total = 0;
    int rc = ids && counts && lengths ? 0 : error_set(err, "out of memory");
    if (rc == 0 && tokenizer_build(&tk, kind, NULL, 0, 0, err) != 0) {
        tokenizer_free(&tk);
        rc = -1;
    }
    if (rc != 0) {
        free(ids), free(counts), free(lengths);
        return error_prefix(err, in->path);
    }
    size_t start = 0;
    for (int64_t b = 0; rc == 0 && b < N; b++) {
        size_t end = start;
        while (is_batch && end < len && text[end] != '\n') end++;
        if (!is_batch) end = len;
        if (taylor_encode(&tk.vocab, text + start, end - start, ids + total, &counts[b], err)) {
            char what[64];
            snprintf(what, sizeof what, is_batch ? "texts line %lld" : "text", (long long)b + 1);
            rc = error_prefix(err, what);
        }
        total += rc == 0 ? counts[b] : 0;
        start = end + 1;
    }
    int64_t T = length ? length : seq_batch_length(counts, N);
    if (rc == 0) {
        rows = malloc((size_t)(N * T + 1) * sizeof *rows);
        if (!rows) rc = error_set(err, "out of memory for a (%lld, %lld) batch", (long long)N,
                                  (long long)T);
    }
    if (rc == 0) rc = seq_batch(rows, lengths, ids, counts, N, T, err);
    for (int64_t b = 0; rc == 0 && b < N; b++) {
        if (b > 0) rc = text_append(&decoded, "\n", 1, err);
        if (rc == 0) rc = tokenizer_decode(&tk, rows + b * T, T, &decoded, err);
    }
    if (rc == 0 && is_batch) {
        rc = add_i64(out, "batch", rows, 2, (int64_t[]){N, T}, err);
        if (rc == 0) rc = add_i64(out, "lengths", lengths, 1, (int64_t[]){N}, err);
    } else if (rc == 0) {
        rc = add_i64(out, "ids", ids, 1, (int64_t[]){total}, err);
        if (rc == 0) rc = add_i64(out, "sequence", rows, 1, (int64_t[]){T}, err);
    }
    if (rc == 0) rc = add_bytes(out, "decoded", decoded.data, decoded.len, err);
    free(ids), free(counts), free(rows), free(lengths);
    text_free(&decoded);
    tokenizer_free(&tk);
    return rc == 0 ? 0 : error_prefix(err, in->path);
}

/* The chapter's ops and the options each reads from the metadata. */
_Static_assert(BPE_BASE_SIZE == 259 && BPE_MAX_VOCAB == 1 << 24, "vocab_size's range below");
static const CaseOption WORD_OPTIONS[] = {
    {"min_freq", CASE_INT, "[1, 1073741824]", "1", "the fewest times a kept word occurs"},
    {0},
};
static const CaseOption BPE_OPTIONS[] = {
    {"vocab_size", CASE_INT, "[259, 16777216]", NULL,
     "the vocabulary's size: 3 specials, 256 bytes, then the merges"},
    {0},
};
static const CaseOption LENGTH[] = {
    {"length", CASE_INT, "[0, 16777216]", "0", "the padded length, 0: each text's own"},
    {0},
};
static const CaseOption BATCH_OPTIONS[] = {
    {"side", CASE_TEXT, "source|target", NULL, "the Taylor tokenizer's side"},
    {"length", CASE_INT, "[0, 16777216]", "0", "the padded length, 0: the longest row's"},
    {0},
};

static const CaseOp OPS[] = {
    {"char_encode", NULL, 0, "corpus text", "codepoints ids decoded", eval_learnt},
    {"word_encode", WORD_OPTIONS, 0, "corpus text", "vocab counts ids decoded", eval_learnt},
    {"bpe_train_encode", BPE_OPTIONS, 0, "corpus text", "merges ids decoded", eval_learnt},
    {"taylor_source", LENGTH, 0, "text", "ids sequence decoded", eval_taylor},
    {"taylor_target", LENGTH, 0, "text", "ids sequence decoded", eval_taylor},
    {"batch", BATCH_OPTIONS, 0, "texts", "batch lengths decoded", eval_taylor},
    {0},
};

int tokenization_case_eval(const TensorFile *in, TensorFile *out, Error *err)
{
    return case_dispatch(OPS, "01", in, out, err);
}
