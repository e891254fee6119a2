/*
 * pairs.c - see pairs.h.
 */
#include "pairs.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sequence.h"
#include "text.h"
#include "vocab.h"

/* Calls fn(src, src_len, tgt, tgt_len, line) for every line of the text of
 * path, after checking its form. */
typedef int (*PairFn)(void *ctx, const uint8_t *src, size_t src_len, const uint8_t *tgt,
                      size_t tgt_len, int64_t line, Error *err);

static int for_each_pair(const char *path, const Text *text, PairFn fn, void *ctx, Error *err)
{
    size_t pos = 0;
    int64_t line = 0;
    if (text->len == 0) return error_set(err, "%s: the file is empty", path);
    while (pos < text->len) {
        const uint8_t *start = text->data + pos;
        const uint8_t *nl = memchr(start, '\n', text->len - pos);
        size_t len = nl ? (size_t)(nl - start) : text->len - pos;
        pos += len + (nl ? 1 : 0);
        line++;
        if (len > 0 && start[len - 1] == '\r') len--;       /* a file written on Windows */
        if (len == 0) return error_set(err, "%s:%" PRId64 ": empty line", path, line);
        const uint8_t *bar = memchr(start, '|', len);
        if (!bar)
            return error_set(err, "%s:%" PRId64 ": no '|' between source and target", path, line);
        size_t src_len = (size_t)(bar - start), tgt_len = len - src_len - 1;
        if (memchr(bar + 1, '|', tgt_len))
            return error_set(err, "%s:%" PRId64 ": more than one '|'", path, line);
        if (fn(ctx, start, src_len, bar + 1, tgt_len, line, err) != 0) return -1;
    }
    return 0;
}

static int alloc_pairs(PairDataset *ds, int64_t n, int S, int T, Error *err)
{
    ds->n = n;
    ds->S = S;
    ds->T = T;
    ds->src = malloc((size_t)(n ? n : 1) * S * sizeof *ds->src);
    ds->tgt = malloc((size_t)(n ? n : 1) * (T + 1) * sizeof *ds->tgt);
    ds->line = malloc((size_t)(n ? n : 1) * sizeof *ds->line);
    if (!ds->src || !ds->tgt || !ds->line) {
        pairs_free(ds);
        return error_set(err, "out of memory for %" PRId64 " pairs", n);
    }
    return 0;
}

typedef struct {
    const char *path;
    const Tokenizer *src_tok, *tgt_tok;
    int max_src, max_tgt;
    PairDataset *ds;            /* rows are written here; NULL: only count */
    int64_t kept, skipped;
    int64_t *ids[2];            /* scratch: the ids of each side */
    size_t cap[2];
} ReadCtx;

/* Tokenizes one side (0 source, 1 target) into c->ids[side]; *n its number
 * of tokens. */
static int encode_side(ReadCtx *c, int side, const uint8_t *text, size_t len, int64_t line,
                       int64_t *n, Error *err)
{
    if (len + 1 > c->cap[side]) {
        int64_t *grown = realloc(c->ids[side], (len + 1) * sizeof *grown);
        if (!grown) return error_set(err, "out of memory for a line of %zu bytes", len);
        c->ids[side] = grown;
        c->cap[side] = len + 1;
    }
    if (tokenizer_encode(side ? c->tgt_tok : c->src_tok, text, len, c->ids[side], n, err) != 0) {
        char msg[ERROR_MSG_MAX];
        snprintf(msg, sizeof msg, "%s", err->msg);
        return error_set(err, "%s:%" PRId64 ": %s: %s", c->path, line,
                         side ? "target" : "source", msg);
    }
    return 0;
}

static int read_pair(void *ctx, const uint8_t *src, size_t src_len, const uint8_t *tgt,
                     size_t tgt_len, int64_t line, Error *err)
{
    ReadCtx *c = ctx;
    int64_t ns, nt;
    if (encode_side(c, 0, src, src_len, line, &ns, err) != 0 ||
        encode_side(c, 1, tgt, tgt_len, line, &nt, err) != 0)
        return -1;
    if (ns > c->max_src || nt > c->max_tgt) {
        c->skipped++;
        return 0;
    }
    PairDataset *ds = c->ds;
    if (ds) {
        if (seq_bracket(ds->src + c->kept * ds->S, c->ids[0], ns, ds->S, err) != 0 ||
            seq_bracket(ds->tgt + c->kept * (ds->T + 1), c->ids[1], nt, ds->T + 1, err) != 0)
            return -1;
        ds->line[c->kept] = line;
    }
    c->kept++;
    return 0;
}

int pairs_parse(PairDataset *ds, const char *name, const Text *text, const PairFormat *f,
                int64_t *skipped, Error *err)
{
    ReadCtx c = {name, f->src_tok, f->tgt_tok, f->max_src, f->max_tgt, NULL, 0, 0, {NULL, NULL},
                 {0, 0}};
    int rc = -1;
    memset(ds, 0, sizeof *ds);
    if (f->max_src < 1 || f->max_tgt < 1 || f->max_src > 1 << 20 || f->max_tgt > 1 << 20)
        return error_set(err, "%s: the token limits %d and %d must lie in 1..%d", name,
                         f->max_src, f->max_tgt, 1 << 20);
    /* Two passes: count the pairs that stay, then fill exactly that many rows. */
    if (for_each_pair(name, text, read_pair, &c, err) != 0) goto done;
    if (c.kept == 0) {
        error_set(err, "%s: none of its %" PRId64 " pairs has at most %d source and %d target "
                  "tokens", name, c.skipped, f->max_src, f->max_tgt);
        goto done;
    }
    if (alloc_pairs(ds, c.kept, f->max_src + 2, f->max_tgt + 1, err) != 0) goto done;
    c.ds = ds;
    c.kept = c.skipped = 0;
    if (for_each_pair(name, text, read_pair, &c, err) != 0) {
        pairs_free(ds);
        goto done;
    }
    if (skipped) *skipped = c.skipped;
    rc = 0;
done:
    free(c.ids[0]);
    free(c.ids[1]);
    return rc;
}

int pairs_read(PairDataset *ds, const char *path, const PairFormat *f, int64_t *skipped,
               Error *err)
{
    Text text = {0};
    memset(ds, 0, sizeof *ds);
    if (text_read_file(path, &text, err) != 0) return -1;
    int rc = pairs_parse(ds, path, &text, f, skipped, err);
    text_free(&text);
    return rc;
}

int pairs_slice(const PairDataset *all, int64_t first, int64_t count, PairDataset *part,
                Error *err)
{
    memset(part, 0, sizeof *part);
    if (first < 0 || count < 1 || first > all->n - count)
        return error_set(err, "pairs %" PRId64 "..%" PRId64 " are not all among the %" PRId64
                         " pairs", first, first + count - 1, all->n);
    if (alloc_pairs(part, count, all->S, all->T, err) != 0) return -1;
    memcpy(part->src, all->src + first * all->S, (size_t)count * all->S * sizeof *part->src);
    memcpy(part->tgt, all->tgt + first * (all->T + 1),
           (size_t)count * (all->T + 1) * sizeof *part->tgt);
    memcpy(part->line, all->line + first, (size_t)count * sizeof *part->line);
    return 0;
}

void pairs_free(PairDataset *ds)
{
    free(ds->src);
    free(ds->tgt);
    free(ds->line);
    memset(ds, 0, sizeof *ds);
}

/* Teacher forcing: tgt_in and target are the target row without its last
 * and without its first id. */
static int fill_pairs(const void *data, const int64_t *idx, int N, int64_t *src,
                      int64_t *tgt_in, int64_t *target, Error *err)
{
    const PairDataset *ds = data;
    const int S = ds->S, T = ds->T;
    for (int b = 0; b < N; b++) {
        if (idx[b] < 0 || idx[b] >= ds->n)
            return error_set(err, "batch row %d: pair %" PRId64 " is outside the dataset", b,
                             idx[b]);
        const int64_t *row = ds->tgt + idx[b] * (T + 1);
        memcpy(src + (int64_t)b * S, ds->src + idx[b] * S, (size_t)S * sizeof *src);
        memcpy(tgt_in + (int64_t)b * T, row, (size_t)T * sizeof *tgt_in);
        memcpy(target + (int64_t)b * T, row + 1, (size_t)T * sizeof *target);
    }
    return 0;
}

/* The ids of pair i before the padding, both sides. */
static int pair_length(const void *data, int64_t i)
{
    const PairDataset *ds = data;
    const int64_t *src = ds->src + i * ds->S, *tgt = ds->tgt + i * (ds->T + 1);
    int n = 0;
    for (int s = 0; s < ds->S; s++) n += src[s] != TOKEN_PAD;
    for (int t = 0; t <= ds->T; t++) n += tgt[t] != TOKEN_PAD;
    return n;
}

Examples pairs_examples(const PairDataset *ds, int src_vocab, int tgt_vocab)
{
    Examples e = {0};
    e.n = ds->n;
    e.S = ds->S;
    e.T = ds->T;
    e.src_vocab = src_vocab;
    e.tgt_vocab = tgt_vocab;
    e.longest = ds->S > ds->T ? ds->S : ds->T;
    e.data = ds;
    e.fill = fill_pairs;
    e.length = pair_length;
    return e;
}

typedef struct {
    int side;
    const char *sep;
    Text *out;
} SideCtx;

static int append_side(void *ctx, const uint8_t *src, size_t src_len, const uint8_t *tgt,
                       size_t tgt_len, int64_t line, Error *err)
{
    SideCtx *c = ctx;
    (void)line;
    if (text_append(c->out, c->side ? tgt : src, c->side ? tgt_len : src_len, err) != 0)
        return -1;
    return text_append(c->out, c->sep, strlen(c->sep), err);
}

int pairs_side(const char *name, const Text *text, int side, const char *sep, Text *out,
               Error *err)
{
    SideCtx c = {side, sep, out};
    return for_each_pair(name, text, append_side, &c, err);
}
