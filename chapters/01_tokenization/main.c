/*
 * main.c - the chapter 01 program.
 *
 *     build/01_tokenization --demo
 *     build/01_tokenization [--tokenizer KIND] [--corpus FILE] [--vocab-size N]
 *                           [--min-freq N] [--decode] FILE | -
 *     build/01_tokenization --case in.safetensors --out out.safetensors
 *
 * The demo runs every tokenizer of the chapter on a short example, ending
 * with seed 002's Taylor-series example. The second form tokenizes a file
 * (or stdin, "-") and prints one line per token, "id<TAB>token"; with
 * --decode it reads whitespace-separated ids instead and prints their text.
 * The case mode evaluates the ops of reference/ch01_tokenization.py:
 *
 *     char_encode        corpus, text -> codepoints, ids, decoded
 *     word_encode        corpus, text (min_freq) -> vocab, counts, ids, decoded
 *     bpe_train_encode   corpus, text (vocab_size) -> merges, ids, decoded
 *     taylor_source      text (length) -> ids, sequence, decoded
 *     taylor_target      text (length) -> ids, sequence, decoded
 *     batch              texts (side, length) -> batch, lengths, decoded
 *
 * Texts travel as U8 tensors; lists of words or lines as one U8 tensor
 * joined by newlines.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bpe.h"
#include "casefile.h"
#include "char_tokenizer.h"
#include "sequence.h"
#include "taylor.h"
#include "text.h"
#include "tokenizer.h"
#include "vocab.h"
#include "word_tokenizer.h"

#define DEFAULT_CORPUS "reference/data/gpl-3.0.txt"

static const char USAGE[] =
    "usage: 01_tokenization --demo\n"
    "       01_tokenization [--tokenizer KIND] [--corpus FILE] [--vocab-size N] [--min-freq N]\n"
    "                       [--decode] FILE|-\n"
    "       01_tokenization --case IN.safetensors --out OUT.safetensors\n"
    "  Tokenizes FILE (- for stdin) and prints one line per token: id, tab, token.\n"
    "  --decode reads whitespace-separated ids instead and prints their text.\n"
    "  KIND is char, word, bpe (the default), taylor-source or taylor-target.\n"
    "  char, word and bpe learn their vocabulary from --corpus (default " DEFAULT_CORPUS ");\n"
    "  --vocab-size (bpe, default 500, at least 259) and --min-freq (word, default 1).\n";

/* Prepends "what: " to the message already in err; returns -1. */
static int error_prefix(Error *err, const char *what)
{
    char msg[ERROR_MSG_MAX];
    snprintf(msg, sizeof msg, "%s", err->msg[0] ? err->msg : "failed (see above)");
    return error_set(err, "%s: %s", what, msg);
}

/* A token as a person should see it: specials bare (<eos>), other tokens in
 * quotes with \n, \t, \r, \", \\ and bytes that are not whole UTF-8
 * characters escaped. */
static void print_token(FILE *f, const Vocab *v, int64_t id)
{
    const uint8_t *p = v->bytes[id];
    size_t len = v->lengths[id];
    if (id < v->n_special) {
        fprintf(f, "%s", (const char *)p);
        return;
    }
    fputc('"', f);
    for (size_t i = 0; i < len;) {
        uint8_t c = p[i];
        uint32_t cp;
        size_t n;
        if (c == '\n') fputs("\\n", f);
        else if (c == '\t') fputs("\\t", f);
        else if (c == '\r') fputs("\\r", f);
        else if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c >= 0x20 && c < 0x7F) fputc(c, f);
        else if (c >= 0x80 && utf8_decode(p, len, i, &cp, &n, NULL) == 0) {
            fwrite(p + i, 1, n, f);
            i += n;
            continue;
        } else fprintf(f, "\\x%02x", c);
        i++;
    }
    fputc('"', f);
}

/* ------------------------------------------------------------------------ */
/* The demo                                                                  */
/* ------------------------------------------------------------------------ */

static void print_ids(const char *label, const int64_t *ids, int64_t n)
{
    printf("%s", label);
    for (int64_t i = 0; i < n; i++)
        printf(i > 0 && i % 24 == 0 ? "\n        %lld" : " %lld", (long long)ids[i]);
    printf("\n");
}

static void print_tokens(const Vocab *v, const int64_t *ids, int64_t n)
{
    printf("  tokens:");
    for (int64_t i = 0; i < n; i++) {
        printf(i > 0 && i % 12 == 0 ? "\n         " : " ");
        print_token(stdout, v, ids[i]);
    }
    printf("\n");
}

/* Encodes text, prints its ids, tokens and decoding. */
static int demo_encode(const Tokenizer *tk, const char *text, Error *err)
{
    size_t len = strlen(text);
    int64_t *ids = malloc((len + 1) * sizeof *ids), n;
    Text back = {0};
    if (!ids) return error_set(err, "out of memory");
    int rc = tokenizer_encode(tk, (const uint8_t *)text, len, ids, &n, err);
    if (rc == 0) rc = tokenizer_decode(tk, ids, n, &back, err);
    if (rc == 0) {
        printf("  %lld tokens for %zu bytes\n", (long long)n, len);
        print_ids("  ids:", ids, n);
        print_tokens(tokenizer_vocab(tk), ids, n);
        printf("  decoded: \"%.*s\"%s\n", (int)back.len, back.data ? (char *)back.data : "",
               back.len == len && memcmp(back.data, text, len) == 0 ? "  (exact round trip)" : "");
    }
    free(ids);
    text_free(&back);
    return rc;
}

static int demo_run(Error *err)
{
    const char *sentence = "The licensee's program isn't free -- naïve café, 2007!";
    Text corpus = {0};
    Tokenizer tk = {0};
    if (text_read_file(DEFAULT_CORPUS, &corpus, err) != 0)
        return error_prefix(err, "the demo trains on the GPL text (run it from the repository "
                                 "root)");
    printf("corpus: %s (%zu bytes)\ntext:   \"%s\"\n\n", DEFAULT_CORPUS, corpus.len, sentence);

    int rc = tokenizer_build(&tk, TOKENIZER_CHAR, &corpus, 0, 0, err);
    if (rc == 0) {
        printf("character level: %d ids (4 specials + the corpus's %d characters)\n",
               tk.vocab.size, tk.vocab.size - 4);
        rc = demo_encode(&tk, sentence, err);
    }
    tokenizer_free(&tk);

    if (rc == 0) rc = tokenizer_build(&tk, TOKENIZER_WORD, &corpus, 0, 1, err);
    if (rc == 0) {
        printf("\nword level, min_freq 1: %d ids; the decoding has single spaces\n",
               tk.vocab.size);
        rc = demo_encode(&tk, sentence, err);
    }
    tokenizer_free(&tk);

    if (rc == 0) rc = tokenizer_build(&tk, TOKENIZER_BPE, &corpus, 500, 0, err);
    if (rc == 0) {
        printf("\nbyte-level BPE, vocab size 500: %lld merges learnt; the first ten:\n ",
               (long long)tk.bpe.n_merges);
        for (int64_t k = 0; k < 10 && k < tk.bpe.n_merges; k++) {
            printf(" ");
            print_token(stdout, &tk.bpe.vocab, BPE_BASE_SIZE + k);
        }
        printf("\n");
        rc = demo_encode(&tk, sentence, err);
    }
    tokenizer_free(&tk);
    text_free(&corpus);
    if (rc != 0) return rc;

    /* Seed 002's first example, and its bracketed form beside the seed's. */
    const char *source = "cosh(a*x)**3 + tanh(b*x)";
    static const int64_t seed_array[22] = {1, 24, 3, 20, 5, 36, 4, 6, 13, 7, 35,
                                           3, 21, 5, 36, 4, 0, 0, 0, 0, 0, 2};
    rc = tokenizer_build(&tk, TOKENIZER_TAYLOR_SOURCE, NULL, 0, 0, err);
    if (rc == 0) {
        printf("\nTaylor source (seed 002), %d ids, longest match: %s\n", tk.vocab.size, source);
        rc = demo_encode(&tk, source, err);
    }
    int64_t ids[64], n = 0, row[22];
    if (rc == 0) rc = taylor_encode(&tk.vocab, (const uint8_t *)source, strlen(source), ids, &n,
                                    err);
    if (rc == 0) rc = seq_bracket(row, ids, n, 22, err);
    if (rc == 0) {
        print_ids("  bracketed, length 22:", row, 22);
        print_ids("  seed 002 (<eos> last):", seed_array, 22);
    }

    /* A batch of three sources. */
    const char *sources[3] = {"exp(a*x)*cosh(h*x)**2", "tan(d*x)/tanh(c*x)", "sin(n*x)"};
    int64_t all[64], counts[3], total = 0;
    for (int b = 0; rc == 0 && b < 3; b++) {
        rc = taylor_encode(&tk.vocab, (const uint8_t *)sources[b], strlen(sources[b]),
                           all + total, &counts[b], err);
        if (rc == 0) total += counts[b];
    }
    if (rc == 0) {
        int64_t T = seq_batch_length(counts, 3), batch[3 * 64], lengths[3];
        rc = seq_batch(batch, lengths, all, counts, 3, T, err);
        if (rc == 0) {
            printf("  a batch of three sources, (B, T) = (3, %lld):\n", (long long)T);
            for (int b = 0; b < 3; b++) {
                char label[96];
                snprintf(label, sizeof label, "    %-22s length %2lld:", sources[b],
                         (long long)lengths[b]);
                print_ids(label, batch + b * T, T);
            }
        }
    }
    tokenizer_free(&tk);

    /* The target side: the error term is one token. */
    const char *target = "1 + b*x - b**3*x**3/3 + O(x**6)";
    if (rc == 0) rc = tokenizer_build(&tk, TOKENIZER_TAYLOR_TARGET, NULL, 0, 0, err);
    if (rc == 0) {
        printf("\nTaylor target (seed 002), %d ids: %s\n", tk.vocab.size, target);
        rc = demo_encode(&tk, target, err);
    }
    tokenizer_free(&tk);
    return rc;
}

static int demo(void)
{
    Error err = {{0}};
    if (demo_run(&err) != 0) {
        fprintf(stderr, "01_tokenization --demo: %s\n", err.msg[0] ? err.msg : "failed");
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The command line                                                          */
/* ------------------------------------------------------------------------ */

/* Parses a whole decimal integer in lo..hi, or fails naming the option. */
static int parse_int(const char *option, const char *s, long long lo, long long hi,
                     long long *out, Error *err)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end != 0)
        return error_set(err, "%s: '%s' is not a whole number", option, s);
    if (v < lo || v > hi)
        return error_set(err, "%s: %lld is outside %lld..%lld", option, v, lo, hi);
    *out = v;
    return 0;
}

/* Reads whitespace-separated ids from text. ids needs room for len / 2 + 1. */
static int parse_ids(const Text *text, int64_t *ids, int64_t *n, Error *err)
{
    *n = 0;
    for (size_t i = 0; i < text->len;) {
        if (byte_is_space(text->data[i])) {
            i++;
            continue;
        }
        size_t j = i;
        while (j < text->len && !byte_is_space(text->data[j])) j++;
        char word[32];
        long long v = -1;
        int ok = j - i < sizeof word;
        if (ok) {
            memcpy(word, text->data + i, j - i);
            word[j - i] = 0;
            char *end;
            errno = 0;
            v = strtoll(word, &end, 10);
            ok = !errno && *end == 0 && word[0] != '+' && v >= 0;
        }
        if (!ok)
            return error_set(err, "'%.*s' at byte offset %zu is not a token id",
                             (int)(j - i < 40 ? j - i : 40), (const char *)text->data + i, i);
        ids[(*n)++] = v;
        i = j;
    }
    return 0;
}

typedef struct {
    TokenizerKind kind;
    const char *corpus;
    long long vocab_size, min_freq;
    int decode;
    const char *input;
    int corpus_given, vocab_size_given, min_freq_given;
} Options;

static int parse_options(int argc, char **argv, Options *o, Error *err)
{
    *o = (Options){TOKENIZER_BPE, DEFAULT_CORPUS, 500, 1, 0, NULL, 0, 0, 0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_value = i + 1 < argc;
        if (!strcmp(a, "--tokenizer") && has_value) {
            if (tokenizer_kind_parse(argv[++i], &o->kind, err) != 0)
                return error_prefix(err, "--tokenizer");
        } else if (!strcmp(a, "--corpus") && has_value) {
            o->corpus = argv[++i];
            o->corpus_given = 1;
        } else if (!strcmp(a, "--vocab-size") && has_value) {
            if (parse_int(a, argv[++i], BPE_BASE_SIZE, BPE_MAX_VOCAB, &o->vocab_size, err) != 0)
                return error_set(err, "--vocab-size: '%s' is not a whole number from %d (3 "
                                 "specials + 256 bytes) to %d", argv[i], BPE_BASE_SIZE,
                                 BPE_MAX_VOCAB);
            o->vocab_size_given = 1;
        } else if (!strcmp(a, "--min-freq") && has_value) {
            if (parse_int(a, argv[++i], 1, 1 << 30, &o->min_freq, err) != 0) return -1;
            o->min_freq_given = 1;
        } else if (!strcmp(a, "--decode")) {
            o->decode = 1;
        } else if ((a[0] != '-' || !strcmp(a, "-")) && !o->input) {
            o->input = a;
        } else {
            return error_set(err, "unknown or incomplete option '%s'", a);
        }
    }
    if (!o->input) return error_set(err, "no input: give a FILE, or - for stdin");
    int taylor = o->kind == TOKENIZER_TAYLOR_SOURCE || o->kind == TOKENIZER_TAYLOR_TARGET;
    if (o->corpus_given && taylor)
        return error_set(err, "--corpus: the Taylor tokenizers have a fixed vocabulary");
    if (o->vocab_size_given && o->kind != TOKENIZER_BPE)
        return error_set(err, "--vocab-size applies to --tokenizer bpe only");
    if (o->min_freq_given && o->kind != TOKENIZER_WORD)
        return error_set(err, "--min-freq applies to --tokenizer word only");
    return 0;
}

static int run_command(const Options *o, Error *err)
{
    Text corpus = {0}, input = {0}, out = {0};
    Tokenizer tk = {0};
    int64_t *ids = NULL, n = 0;
    int taylor = o->kind == TOKENIZER_TAYLOR_SOURCE || o->kind == TOKENIZER_TAYLOR_TARGET;
    int rc = 0;
    if (!taylor && text_read_file(o->corpus, &corpus, err) != 0) rc = -1;
    if (rc == 0 && tokenizer_build(&tk, o->kind, &corpus, o->vocab_size, (int)o->min_freq,
                                   err) != 0)
        rc = error_prefix(err, o->corpus);
    if (rc == 0 && text_read_file(o->input, &input, err) != 0) rc = -1;
    if (rc == 0) {
        ids = malloc((input.len + 1) * sizeof *ids);
        if (!ids) rc = error_set(err, "out of memory for %zu ids", input.len + 1);
    }
    const char *name = strcmp(o->input, "-") ? o->input : "stdin";
    if (rc == 0 && o->decode) {
        if (parse_ids(&input, ids, &n, err) != 0 || tokenizer_decode(&tk, ids, n, &out,
                                                                           err) != 0)
            rc = error_prefix(err, name);
        if (rc == 0 && out.len) fwrite(out.data, 1, out.len, stdout);
    } else if (rc == 0) {
        if (tokenizer_encode(&tk, input.data, input.len, ids, &n, err) != 0)
            rc = error_prefix(err, name);
        for (int64_t i = 0; rc == 0 && i < n; i++) {
            printf("%lld\t", (long long)ids[i]);
            print_token(stdout, tokenizer_vocab(&tk), ids[i]);
            printf("\n");
        }
    }
    free(ids);
    tokenizer_free(&tk);
    text_free(&corpus);
    text_free(&input);
    text_free(&out);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Case files                                                                */
/* ------------------------------------------------------------------------ */

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
    if (tensor_alloc(&t, DTYPE_I64, ndim, shape, err) != 0) return -1;
    size_t bytes = (size_t)tensor_numel(&t) * sizeof(int64_t);
    if (bytes) memcpy(t.data, data, bytes);
    if (tensorfile_add(out, name, &t, err) != 0) {
        tensor_free(&t);
        return -1;
    }
    return 0;
}

static int add_bytes(TensorFile *out, const char *name, const uint8_t *data, size_t len,
                     Error *err)
{
    Tensor t;
    if (tensor_alloc(&t, DTYPE_U8, 1, (int64_t[]){(int64_t)len}, err) != 0) return -1;
    if (len) memcpy(t.data, data, len);
    if (tensorfile_add(out, name, &t, err) != 0) {
        tensor_free(&t);
        return -1;
    }
    return 0;
}

/* char_encode, word_encode and bpe_train_encode: a tokenizer learnt from
 * the tensor "corpus", applied to the tensor "text". */
static int eval_learnt(const char *op, const TensorFile *in, TensorFile *out, Error *err)
{
    const uint8_t *corpus_data, *text;
    size_t corpus_len, len;
    if (get_bytes(in, "corpus", &corpus_data, &corpus_len, err) != 0 ||
        get_bytes(in, "text", &text, &len, err) != 0)
        return -1;
    Text corpus = {(uint8_t *)corpus_data, corpus_len, 0};   /* borrowed, not freed */
    TokenizerKind kind = !strcmp(op, "char_encode") ? TOKENIZER_CHAR
                : !strcmp(op, "word_encode") ? TOKENIZER_WORD : TOKENIZER_BPE;
    long long vocab_size = 0, min_freq = 1;
    if (kind == TOKENIZER_BPE && tensorfile_meta_int(in, "vocab_size", -1, &vocab_size, err) != 0)
        return -1;
    if (kind == TOKENIZER_WORD && tensorfile_meta_int(in, "min_freq", 1, &min_freq, err) != 0)
        return -1;
    if (kind == TOKENIZER_WORD && (min_freq < 1 || min_freq > 1 << 30))
        return error_set(err, "%s: metadata min_freq %lld is outside 1..2^30", in->path, min_freq);
    if (kind == TOKENIZER_BPE && (vocab_size < BPE_BASE_SIZE || vocab_size > BPE_MAX_VOCAB))
        return error_set(err, "%s: metadata vocab_size %lld is outside %d..%d", in->path,
                         vocab_size, BPE_BASE_SIZE, BPE_MAX_VOCAB);

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

static int get_side(const TensorFile *in, TokenizerKind *kind, Error *err)
{
    const char *side = tensorfile_meta(in, "side");
    if (side && !strcmp(side, "source")) *kind = TOKENIZER_TAYLOR_SOURCE;
    else if (side && !strcmp(side, "target")) *kind = TOKENIZER_TAYLOR_TARGET;
    else return error_set(err, "%s: metadata side must be 'source' or 'target'", in->path);
    return 0;
}

/* taylor_source, taylor_target: one text; batch: newline-separated texts. */
static int eval_taylor(const char *op, const TensorFile *in, TensorFile *out, Error *err)
{
    int is_batch = !strcmp(op, "batch");
    TokenizerKind kind = !strcmp(op, "taylor_source") ? TOKENIZER_TAYLOR_SOURCE
                                                      : TOKENIZER_TAYLOR_TARGET;
    if (is_batch && get_side(in, &kind, err) != 0) return -1;
    const uint8_t *text;
    size_t len;
    long long length;
    if (get_bytes(in, is_batch ? "texts" : "text", &text, &len, err) != 0 ||
        tensorfile_meta_int(in, "length", 0, &length, err) != 0)
        return -1;
    if (length < 0 || length > 1 << 24)
        return error_set(err, "%s: metadata length %lld is outside 0..2^24", in->path, length);

    /* Lines (one for taylor_*): [line_start[b], line_start[b] + line_len[b]). */
    int64_t B = 1;
    for (size_t i = 0; is_batch && i < len; i++) B += text[i] == '\n';
    Tokenizer tk;
    Text decoded = {0};
    int64_t *ids = malloc((len + 1) * sizeof *ids), *counts = malloc(B * sizeof *counts);
    int64_t *rows = NULL, *lengths = malloc(B * sizeof *lengths), total = 0;
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
    for (int64_t b = 0; rc == 0 && b < B; b++) {
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
    int64_t T = length ? length : seq_batch_length(counts, B);
    if (rc == 0) {
        rows = malloc((size_t)(B * T + 1) * sizeof *rows);
        if (!rows) rc = error_set(err, "out of memory for a (%lld, %lld) batch", (long long)B,
                                  (long long)T);
    }
    if (rc == 0) rc = seq_batch(rows, lengths, ids, counts, B, T, err);
    for (int64_t b = 0; rc == 0 && b < B; b++) {
        if (b > 0) rc = text_append(&decoded, "\n", 1, err);
        if (rc == 0) rc = tokenizer_decode(&tk, rows + b * T, T, &decoded, err);
    }
    if (rc == 0 && is_batch) {
        rc = add_i64(out, "batch", rows, 2, (int64_t[]){B, T}, err);
        if (rc == 0) rc = add_i64(out, "lengths", lengths, 1, (int64_t[]){B}, err);
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

static int eval_case(const TensorFile *in, TensorFile *out, Error *err)
{
    const char *op = tensorfile_meta(in, "op");
    err->msg[0] = 0;          /* an exercise stub returns -1 without a message */
    if (!op) return error_set(err, "%s: metadata 'op' is missing", in->path);
    if (!strcmp(op, "char_encode") || !strcmp(op, "word_encode") ||
        !strcmp(op, "bpe_train_encode"))
        return eval_learnt(op, in, out, err);
    if (!strcmp(op, "taylor_source") || !strcmp(op, "taylor_target") || !strcmp(op, "batch"))
        return eval_taylor(op, in, out, err);
    return error_set(err, "%s: op '%s' is not a chapter 01 op (char_encode, word_encode, "
                     "bpe_train_encode, taylor_source, taylor_target, batch)", in->path, op);
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--demo") || !strcmp(argv[1], "--case") ||
        !strcmp(argv[1], "--out"))
        return case_main(argc, argv, USAGE, demo, eval_case);
    Options o;
    Error err = {{0}};
    if (parse_options(argc, argv, &o, &err) != 0) {
        fprintf(stderr, "%s: %s\n%s", argv[0], err.msg, USAGE);
        return 2;
    }
    if (run_command(&o, &err) != 0) {
        fprintf(stderr, "%s: %s\n", argv[0], err.msg[0] ? err.msg : "failed");
        return 1;
    }
    return 0;
}
