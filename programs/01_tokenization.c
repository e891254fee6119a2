/*
 * 01_tokenization.c - the chapter 01 program.
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
 * char_encode, word_encode, bpe_train_encode, taylor_source, taylor_target
 * and batch (see cases/tokenization_case.h for their tensors).
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
#include "tokenization_case.h"
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
        printf("\nTaylor source (the notebook's example), %d ids, longest match: %s\n",
               tk.vocab.size, source);
        rc = demo_encode(&tk, source, err);
    }
    int64_t ids[64], n = 0, row[22];
    if (rc == 0) rc = taylor_encode(&tk.vocab, (const uint8_t *)source, strlen(source), ids, &n,
                                    err);
    if (rc == 0) rc = seq_bracket(row, ids, n, 22, err);
    if (rc == 0) {
        print_ids("  bracketed, length 22:", row, 22);
        print_ids("  the notebook (<eos> last):", seed_array, 22);
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
            printf("  a batch of three sources, (N, T) = (3, %lld):\n", (long long)T);
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
        printf("\nTaylor target (the notebook's example), %d ids: %s\n", tk.vocab.size, target);
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
    const char *name = strcmp(o->input, "-") ? o->input : "stdin";
    /* The char tokenizer decodes UTF-8: a bad byte is reported here with
     * its file and line (the tokenizer knows neither). */
    int utf8 = o->kind == TOKENIZER_CHAR;
    if (!taylor && text_read_file(o->corpus, &corpus, err) != 0) rc = -1;
    if (rc == 0 && utf8 && text_check_utf8(strcmp(o->corpus, "-") ? o->corpus : "stdin",
                                           corpus.data, corpus.len, err) != 0)
        rc = -1;
    if (rc == 0 && tokenizer_build(&tk, o->kind, &corpus, o->vocab_size, (int)o->min_freq,
                                   err) != 0)
        rc = error_prefix(err, o->corpus);
    if (rc == 0 && text_read_file(o->input, &input, err) != 0) rc = -1;
    if (rc == 0 && utf8 && !o->decode && text_check_utf8(name, input.data, input.len, err) != 0)
        rc = -1;
    if (rc == 0) {
        ids = malloc((input.len + 1) * sizeof *ids);
        if (!ids) rc = error_set(err, "out of memory for %zu ids", input.len + 1);
    }
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

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--demo") || !strcmp(argv[1], "--case") ||
        !strcmp(argv[1], "--out") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))
        return case_main(argc, argv, USAGE, demo, tokenization_case_eval);
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
