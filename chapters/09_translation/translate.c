/*
 * translate.c - see translate.h.
 */
#include "translate.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "threads.h"   /* time_now() */

TaskData task_defaults(void)
{
    TaskData d = {0};
    d.data = "reference/data/taylor/seq2seq_series_2terms.txt";
    d.tokenizer = "taylor";
    d.vocab_size = 500;
    d.max_src = 20;             /* seed 002: 22 and 85 with <sos> and <eos> */
    d.max_tgt = 83;
    d.train_size = 11000;
    d.val_size = 100;           /* the test: the last 750 of the 11,850 pairs */
    return d;
}

static int build_side(Tokenizer *tk, const TaskData *d, const Text *text, int side, Error *err)
{
    TokenizerKind kind;
    Text corpus = {0};
    if (strcmp(d->tokenizer, "taylor") == 0)
        return tokenizer_build(tk, side ? TOKENIZER_TAYLOR_TARGET : TOKENIZER_TAYLOR_SOURCE,
                               NULL, 0, 0, err);
    if (strncmp(d->tokenizer, "taylor", 6) == 0 ||
        tokenizer_kind_parse(d->tokenizer, &kind, err) != 0)
        return error_set(err, "--tokenizer: '%s' is not taylor, char, word or bpe", d->tokenizer);
    /* The char tokenizer decodes UTF-8, and learns from one side of every
     * line glued together: its own error would give a byte offset in that
     * corpus. The file's line is what the user can find. */
    if (kind == TOKENIZER_CHAR && text_check_utf8(d->data, text->data, text->len, err) != 0)
        return -1;
    if (pairs_side(d->data, text, side, kind == TOKENIZER_CHAR ? "" : "\n", &corpus, err) != 0)
        return -1;
    int rc = tokenizer_build(tk, kind, &corpus, d->vocab_size, 1, err);
    text_free(&corpus);
    return rc;
}

int task_load(Translation *t, const TaskData *d, Error *err)
{
    PairDataset all = {0};
    Text text = {0};
    memset(t, 0, sizeof *t);
    if (d->train_size < 1 || d->val_size < 1)
        return error_set(err, "--train-size and --val-size need at least 1 pair each");
    /* The file is read once (a pipe works): the tokenizers learn from it and
     * the pairs come from it. */
    if (text_read_file(d->data, &text, err) != 0) return -1;
    PairFormat f = {&t->src_tok, &t->tgt_tok, d->max_src, d->max_tgt};
    if (build_side(&t->src_tok, d, &text, 0, err) != 0 ||
        build_side(&t->tgt_tok, d, &text, 1, err) != 0 ||
        pairs_parse(&all, d->data, &text, &f, &t->skipped, err) != 0)
        goto fail;
    int64_t rest = all.n - d->train_size - d->val_size;
    if (rest < 1) {
        error_set(err, "%s: %lld pairs within the limits leave none for the test after %d "
                  "training and %d validation pairs", d->data, (long long)all.n, d->train_size,
                  d->val_size);
        goto fail;
    }
    if (pairs_slice(&all, 0, d->train_size, &t->train, err) != 0 ||
        pairs_slice(&all, d->train_size, d->val_size, &t->val, err) != 0 ||
        pairs_slice(&all, d->train_size + d->val_size, rest, &t->test, err) != 0)
        goto fail;
    pairs_free(&all);
    text_free(&text);
    return 0;
fail:
    pairs_free(&all);
    text_free(&text);
    task_free(t);
    return -1;
}

void task_free(Translation *t)
{
    tokenizer_free(&t->src_tok);
    tokenizer_free(&t->tgt_tok);
    pairs_free(&t->train);
    pairs_free(&t->val);
    pairs_free(&t->test);
}

DecodeOptions task_decoding(const PairDataset *ds, int beam_width, float length_penalty)
{
    DecodeOptions d = {0};
    d.sos_id = TOKEN_SOS;
    d.eos_id = TOKEN_EOS;
    d.max_new = ds->T;
    d.beam_width = beam_width;
    d.length_penalty = length_penalty;
    return d;
}

int is_exact(const int64_t *out, int max_new, const int64_t *tgt)
{
    for (int t = 0; t < max_new; t++) {
        if (out[t] != tgt[t + 1]) return 0;
        if (tgt[t + 1] == TOKEN_EOS) return 1;
    }
    return 0;
}

int exact_match(Model *m, const PairDataset *ds, const DecodeOptions *d, int64_t *right,
                int64_t *out, Error *err)
{
    enum { CHUNK = 125 };
    const int M = d->max_new;
    int64_t *chunk_out = malloc((size_t)CHUNK * M * sizeof *chunk_out);
    int rc = -1;
    *right = 0;
    if (!chunk_out) return error_set(err, "out of memory for decoding");
    for (int64_t first = 0; first < ds->n; first += CHUNK) {
        int n = (int)(ds->n - first < CHUNK ? ds->n - first : CHUNK);
        const int64_t *src = ds->src + first * ds->S;
        int fail = d->beam_width > 1
                 ? decode_beam(m, src, n, ds->S, d, chunk_out, NULL, err)
                 : decode_greedy(m, src, n, ds->S, d, chunk_out, NULL, err);
        if (fail) goto done;
        for (int e = 0; e < n; e++)
            *right += is_exact(chunk_out + (size_t)e * M, M, ds->tgt + (first + e) * (ds->T + 1));
        if (out) memcpy(out + first * M, chunk_out, (size_t)n * M * sizeof *out);
    }
    rc = 0;
done:
    free(chunk_out);
    return rc;
}

const char *const MISS_NAMES[MISS_KINDS] = {
    "a digit", "an operator (+ - * / **)", "a variable or function", "a parenthesis",
    "ends too early", "runs on past the end", "another token"};

MissKind miss_kind(const int64_t *out, int max_new, const int64_t *tgt, const Vocab *vocab)
{
    for (int t = 0; t < max_new; t++) {
        int64_t want = tgt[t + 1];
        if (out[t] == want) continue;
        if (out[t] == TOKEN_EOS) return MISS_TOO_SHORT;
        if (want == TOKEN_EOS) return MISS_TOO_LONG;
        const uint8_t *w = vocab->bytes[want];
        if (isdigit(w[0])) return MISS_DIGIT;
        if (strchr("+-*/", w[0])) return MISS_OPERATOR;
        if (w[0] == '(' || w[0] == ')') return MISS_PARENTHESIS;
        if (islower(w[0])) return MISS_VARIABLE;
        return MISS_OTHER;
    }
    return MISS_TOO_LONG;      /* no <eos> within max_new tokens */
}

int translation_check_model(const Translation *t, const Model *m, const char *path, Error *err)
{
    int vs = tokenizer_vocab(&t->src_tok)->size, vt = tokenizer_vocab(&t->tgt_tok)->size;
    if (m->cfg.kind != MODEL_SEQ2SEQ || m->cfg.src_vocab != vs || m->cfg.tgt_vocab != vt)
        return error_set(err, "%s: not a seq2seq model with vocabularies of %d and %d ids (the "
                         "task's tokenizers)", path, vs, vt);
    return 0;
}

int report_exact(Model *m, const Translation *t, const PairDataset *ds, const char *name,
                 const DecodeOptions *dec, int table, double *exact, Error *err)
{
    DecodeOptions d = *dec;
    int64_t right, miss[MISS_KINDS] = {0};
    int64_t *out = malloc((size_t)ds->n * d.max_new * sizeof *out);
    if (!out) return error_set(err, "out of memory for %" PRId64 " translations", ds->n);
    double started = time_now();
    if (exact_match(m, ds, &d, &right, out, err) != 0) {
        free(out);
        return -1;
    }
    *exact = (double)right / ds->n;
    printf("%s: exact match %.4f (%" PRId64 " of %" PRId64 "), %s, %.1f s\n", name, *exact,
           right, ds->n, d.beam_width > 1 ? "beam search" : "greedy", time_now() - started);
    if (table && right < ds->n) {
        for (int64_t e = 0; e < ds->n; e++) {
            const int64_t *o = out + e * d.max_new, *tgt = ds->tgt + e * (ds->T + 1);
            if (!is_exact(o, d.max_new, tgt))
                miss[miss_kind(o, d.max_new, tgt, tokenizer_vocab(&t->tgt_tok))]++;
        }
        printf("  where the %" PRId64 " wrong ones first depart from the target:\n",
               ds->n - right);
        for (int k = 0; k < MISS_KINDS; k++)
            if (miss[k]) printf("    %-28s %4" PRId64 "\n", MISS_NAMES[k], miss[k]);
    }
    free(out);
    return 0;
}
