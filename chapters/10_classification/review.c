/*
 * review.c - see review.h.
 */
#include "review.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vocab.h"

void reviews_free(ReviewSet *rs)
{
    for (int64_t i = 0; rs->text && i < rs->n; i++) text_free(&rs->text[i]);
    free(rs->label);
    free(rs->text);
    free(rs->line);
    memset(rs, 0, sizeof *rs);
}

static int reviews_alloc(ReviewSet *rs, int64_t n, Error *err)
{
    memset(rs, 0, sizeof *rs);
    rs->label = malloc((size_t)(n ? n : 1) * sizeof *rs->label);
    rs->text = calloc((size_t)(n ? n : 1), sizeof *rs->text);
    rs->line = malloc((size_t)(n ? n : 1) * sizeof *rs->line);
    if (!rs->label || !rs->text || !rs->line) {
        reviews_free(rs);
        return error_set(err, "out of memory for %" PRId64 " reviews", n);
    }
    rs->n = n;
    return 0;
}

int reviews_read(ReviewSet *rs, const char *path, Error *err)
{
    Text file = {0};
    memset(rs, 0, sizeof *rs);
    FILE *probe = fopen(path, "rb");
    if (!probe)
        return error_set(err, "cannot open %s: %s (run make imdb to fetch the reviews)", path,
                         strerror(errno));
    fclose(probe);
    if (text_read_file(path, &file, err) != 0) return -1;
    if (file.len == 0) {
        text_free(&file);
        return error_set(err, "%s: the file is empty", path);
    }
    int64_t n = 0;
    for (size_t i = 0; i < file.len; i++) n += file.data[i] == '\n';
    if (file.data[file.len - 1] != '\n') n++;       /* a last line without a newline */
    if (reviews_alloc(rs, n, err) != 0) {
        text_free(&file);
        return -1;
    }
    size_t pos = 0;
    for (int64_t line = 1; line <= n; line++) {
        const uint8_t *start = file.data + pos;
        const uint8_t *nl = memchr(start, '\n', file.len - pos);
        size_t len = nl ? (size_t)(nl - start) : file.len - pos;
        pos += len + (nl ? 1 : 0);
        if (len > 0 && start[len - 1] == '\r') len--;
        const char *problem = len == 0 ? "empty line"
                            : len < 2 || start[1] != '\t' ? "no '<label><TAB>' at the start"
                            : start[0] != '0' && start[0] != '1' ? "the label is not 0 or 1"
                            : len == 2 ? "the text is empty" : NULL;
        if (problem) {
            error_set(err, "%s:%" PRId64 ": %s", path, line, problem);
            goto fail;
        }
        rs->label[line - 1] = (uint8_t)(start[0] - '0');
        rs->line[line - 1] = line;
        if (text_append(&rs->text[line - 1], start + 2, len - 2, err) != 0) goto fail;
    }
    text_free(&file);
    return 0;
fail:
    text_free(&file);
    reviews_free(rs);
    return -1;
}

void review_unbreak(Text *t)
{
    static const char br[] = "<br />";
    size_t out = 0;                             /* out <= i: in place */
    for (size_t i = 0; i < t->len; i++) {
        if (t->len - i >= sizeof br - 1 && memcmp(t->data + i, br, sizeof br - 1) == 0) {
            t->data[out++] = ' ';
            i += sizeof br - 2;
            continue;
        }
        t->data[out++] = t->data[i];
    }
    t->len = out;
    if (t->data) t->data[out] = 0;
}

int review_clean(Text *t, Error *err)
{
    review_unbreak(t);
    for (size_t i = 0; i < t->len; i++) {
        uint8_t b = t->data[i];
        if (b >= 'A' && b <= 'Z') t->data[i] = (uint8_t)(b - 'A' + 'a');
    }
    /* The leading space: text_append makes room for one more byte (and
     * keeps the NUL after it); the text moves one byte up into it. */
    if (text_append(t, " ", 1, err) != 0) return -1;
    memmove(t->data + 1, t->data, t->len - 1);
    t->data[0] = ' ';
    return 0;
}

int reviews_clean(ReviewSet *rs, Error *err)
{
    for (int64_t i = 0; i < rs->n; i++)
        if (review_clean(&rs->text[i], err) != 0) return -1;
    return 0;
}

/* Copies review i of from into slot j of to. */
static int copy_review(ReviewSet *to, int64_t j, const ReviewSet *from, int64_t i, Error *err)
{
    to->label[j] = from->label[i];
    to->line[j] = from->line[i];
    return text_append(&to->text[j], from->text[i].data, from->text[i].len, err);
}

int reviews_split(const ReviewSet *all, int every, ReviewSet *keep, ReviewSet *out, Error *err)
{
    int64_t seen[2] = {0, 0}, n_out = 0;
    if (every < 2) return error_set(err, "a split needs every >= 2, not %d", every);
    for (int64_t i = 0; i < all->n; i++) n_out += seen[all->label[i]]++ % every == every - 1;
    if (reviews_alloc(keep, all->n - n_out, err) != 0) return -1;
    if (reviews_alloc(out, n_out, err) != 0) {
        reviews_free(keep);
        return -1;
    }
    int64_t a = 0, b = 0;
    seen[0] = seen[1] = 0;
    for (int64_t i = 0; i < all->n; i++) {
        int goes_out = seen[all->label[i]]++ % every == every - 1;
        if (copy_review(goes_out ? out : keep, goes_out ? b++ : a++, all, i, err) != 0) {
            reviews_free(keep);
            reviews_free(out);
            return -1;
        }
    }
    return 0;
}

int reviews_corpus(const ReviewSet *rs, Text *out, Error *err)
{
    for (int64_t i = 0; i < rs->n; i++)
        if (text_append(out, rs->text[i].data, rs->text[i].len, err) != 0 ||
            text_append(out, "\n", 1, err) != 0)
            return -1;
    return 0;
}

void review_rows_free(ReviewRows *rows)
{
    free(rows->ids);
    free(rows->label);
    free(rows->length);
    memset(rows, 0, sizeof *rows);
}

/* Frames the ids of one text in S ids; *length the tokens kept. */
static int frame(const Bpe *bpe, const Text *text, int S, int64_t *scratch, int64_t *row,
                 int *length, int64_t *tokens, Error *err)
{
    int64_t n;
    if (bpe_encode(bpe, text->data, text->len, scratch, &n, err) != 0) return -1;
    if (n == 0) return error_set(err, "no token (the text is empty)");
    *tokens = n;
    if (n > S) n = S;
    memcpy(row, scratch, (size_t)n * sizeof *row);
    for (int64_t k = n; k < S; k++) row[k] = TOKEN_PAD;
    *length = (int)n;
    return 0;
}

int review_rows(ReviewRows *rows, const ReviewSet *rs, const Bpe *bpe, int S, Error *err)
{
    memset(rows, 0, sizeof *rows);
    if (S < 1) return error_set(err, "--max-len %d: a review needs at least 1 id", S);
    size_t longest = 1;
    for (int64_t i = 0; i < rs->n; i++)
        if (rs->text[i].len > longest) longest = rs->text[i].len;
    rows->n = rs->n;
    rows->S = S;
    rows->ids = malloc((size_t)(rs->n ? rs->n : 1) * S * sizeof *rows->ids);
    rows->label = malloc((size_t)(rs->n ? rs->n : 1) * sizeof *rows->label);
    rows->length = malloc((size_t)(rs->n ? rs->n : 1) * sizeof *rows->length);
    int64_t *scratch = malloc(longest * sizeof *scratch);
    int rc = 0;
    if (!rows->ids || !rows->label || !rows->length || !scratch)
        rc = error_set(err, "out of memory for %" PRId64 " reviews of %d ids", rs->n, S);
    for (int64_t i = 0; rc == 0 && i < rs->n; i++) {
        int64_t tokens = 0;
        rows->label[i] = rs->label[i];
        if (frame(bpe, &rs->text[i], S, scratch, rows->ids + i * S, &rows->length[i], &tokens,
                  err) != 0) {
            char why[sizeof err->msg];
            snprintf(why, sizeof why, "%s", err->msg);
            rc = error_set(err, "review of line %" PRId64 ": %s", rs->line[i], why);
        }
        rows->truncated += tokens > S;
        rows->tokens += tokens;
    }
    free(scratch);
    if (rc != 0) review_rows_free(rows);
    return rc;
}

int review_encode(const Bpe *bpe, const char *text, int S, int64_t *ids, int *length,
                  Error *err)
{
    if (!*text) return error_set(err, "no token (the text is empty)");
    Text t = {0};
    int64_t tokens;
    int rc = text_append(&t, text, strlen(text), err);
    if (rc == 0) rc = review_clean(&t, err);
    int64_t *scratch = rc == 0 ? malloc((t.len ? t.len : 1) * sizeof *scratch) : NULL;
    if (rc == 0 && !scratch) rc = error_set(err, "out of memory");
    if (rc == 0) rc = frame(bpe, &t, S, scratch, ids, length, &tokens, err);
    free(scratch);
    text_free(&t);
    return rc;
}

static int fill_rows(const void *data, const int64_t *idx, int N, int64_t *src,
                     int64_t *tgt_in, int64_t *target, Error *err)
{
    const ReviewRows *r = data;
    (void)tgt_in;
    for (int i = 0; i < N; i++) {
        if (idx[i] < 0 || idx[i] >= r->n)
            return error_set(err, "review index %" PRId64 " is outside 0..%" PRId64, idx[i],
                             r->n - 1);
        memcpy(src + (int64_t)i * r->S, r->ids + idx[i] * r->S, (size_t)r->S * sizeof *src);
        target[i] = r->label[idx[i]];
    }
    return 0;
}

static int row_length(const void *data, int64_t i)
{
    return ((const ReviewRows *)data)->length[i];
}

Examples review_examples(const ReviewRows *rows, int vocab)
{
    Examples e = {0};
    e.n = rows->n;
    e.S = rows->S;
    e.T = 0;
    e.one_target = 1;
    e.src_vocab = vocab;
    e.tgt_vocab = 2;
    e.longest = rows->S;
    e.data = rows;
    e.fill = fill_rows;
    e.length = row_length;
    return e;
}

int bpe_merges_text(const Bpe *bpe, Text *out, Error *err)
{
    char pair[48];
    for (int64_t k = 0; k < bpe->n_merges; k++) {
        int len = snprintf(pair, sizeof pair, "%s%" PRId64 " %" PRId64, k ? " " : "",
                           bpe->merges[2 * k], bpe->merges[2 * k + 1]);
        if (text_append(out, pair, (size_t)len, err) != 0) return -1;
    }
    if (!out->data && text_append(out, "", 0, err) != 0) return -1;
    return 0;
}

int bpe_from_merges(Bpe *bpe, const char *merges, const char *where, Error *err)
{
    if (bpe_init(bpe, err) != 0) return -1;
    const char *p = merges;
    while (*p) {
        char *end;
        long long id[2];
        for (int side = 0; side < 2; side++) {
            errno = 0;
            id[side] = strtoll(p, &end, 10);
            if (end == p || errno || (*end != ' ' && *end != 0) || (side == 0 && *end != ' ')) {
                error_set(err, "%s: metadata bpe.merges: merge %" PRId64 " is not two ids "
                          "separated by spaces", where, bpe->n_merges);
                bpe_free(bpe);
                return -1;
            }
            p = *end ? end + 1 : end;
        }
        Error why;
        if (bpe_add_merge(bpe, id[0], id[1], &why) != 0) {
            error_set(err, "%s: metadata bpe.merges: merge %" PRId64 ": %s", where,
                      bpe->n_merges, why.msg);
            bpe_free(bpe);
            return -1;
        }
    }
    return 0;
}
