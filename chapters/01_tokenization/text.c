/* text.c - see text.h. */
#include "text.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "error.h"

int utf8_decode(const uint8_t *text, size_t len, size_t pos, uint32_t *codepoint,
                size_t *n_bytes, Error *err)
{
    /* BEGIN SOLUTION */
    uint8_t b = text[pos];
    size_t n;
    uint32_t cp;
    if (b < 0x80) {
        n = 1, cp = b;
    } else if ((b & 0xE0) == 0xC0) {
        n = 2, cp = b & 0x1F;
    } else if ((b & 0xF0) == 0xE0) {
        n = 3, cp = b & 0x0F;
    } else if ((b & 0xF8) == 0xF0) {
        n = 4, cp = b & 0x07;
    } else {
        return error_set(err, "invalid UTF-8 at byte offset %zu: byte 0x%02x cannot start a "
                         "character", pos, b);
    }
    for (size_t k = 1; k < n; k++) {
        if (pos + k >= len)
            return error_set(err, "invalid UTF-8 at byte offset %zu: the text ends inside a "
                             "%zu-byte character", pos, n);
        uint8_t c = text[pos + k];
        if ((c & 0xC0) != 0x80)
            return error_set(err, "invalid UTF-8 at byte offset %zu: byte 0x%02x is not a "
                             "continuation byte (10xxxxxx)", pos, c);
        cp = (cp << 6) | (c & 0x3F);
    }
    /* The shortest form only: each length has a smallest code point. */
    static const uint32_t smallest[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < smallest[n])
        return error_set(err, "invalid UTF-8 at byte offset %zu: overlong %zu-byte encoding of "
                         "U+%04X", pos, n, (unsigned)cp);
    if (cp >= 0xD800 && cp <= 0xDFFF)
        return error_set(err, "invalid UTF-8 at byte offset %zu: U+%04X is a surrogate", pos,
                         (unsigned)cp);
    if (cp > 0x10FFFF)
        return error_set(err, "invalid UTF-8 at byte offset %zu: U+%X is above U+10FFFF", pos,
                         (unsigned)cp);
    *codepoint = cp;
    *n_bytes = n;
    return 0;
    /* END SOLUTION */
}

int utf8_encode(uint32_t cp, uint8_t out[4], size_t *n_bytes, Error *err)
{
    if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF)
        return error_set(err, "U+%04X is not a Unicode scalar value", (unsigned)cp);
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        *n_bytes = 1;
    } else if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | (cp >> 6));
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        *n_bytes = 2;
    } else if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        *n_bytes = 3;
    } else {
        out[0] = (uint8_t)(0xF0 | (cp >> 18));
        out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
        out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[3] = (uint8_t)(0x80 | (cp & 0x3F));
        *n_bytes = 4;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Given: not part of the exercise                                           */
/* ------------------------------------------------------------------------ */

int text_append(Text *t, const void *bytes, size_t n, Error *err)
{
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 64;
        while (cap < t->len + n + 1) cap *= 2;
        uint8_t *data = realloc(t->data, cap);
        if (!data) return error_set(err, "out of memory growing a text to %zu bytes", cap);
        t->data = data;
        t->cap = cap;
    }
    if (n) memcpy(t->data + t->len, bytes, n);
    t->len += n;
    t->data[t->len] = 0;
    return 0;
}

void text_free(Text *t)
{
    free(t->data);
    memset(t, 0, sizeof *t);
}

int text_read_file(const char *path, Text *t, Error *err)
{
    int is_stdin = strcmp(path, "-") == 0;
    const char *name = is_stdin ? "stdin" : path;
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (!f) return error_set(err, "cannot open %s: %s", path, strerror(errno));
    uint8_t buf[65536];
    size_t n, old_len = t->len;
    int had_data = t->data != NULL;
    int rc = 0;
    struct stat st;
    /* A regular file says its size: one too big is refused before any of
     * it is read. A stream (a pipe, /dev/zero) is counted as it comes. */
    if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) &&
        (uint64_t)st.st_size > TEXT_FILE_MAX)
        rc = error_set(err, "%s: %lld bytes, more than the %zu MiB a text file may have "
                       "here (is it the right file?)", name, (long long)st.st_size,
                       TEXT_FILE_MAX >> 20);
    /* a readable empty text, even for an empty file */
    if (rc == 0) rc = text_append(t, "", 0, err);
    while (rc == 0 && (n = fread(buf, 1, sizeof buf, f)) > 0) {
        if (n > TEXT_FILE_MAX - (t->len - old_len))
            rc = error_set(err, "%s: more than the %zu MiB a text file may have here (is it "
                           "the right file?)", name, TEXT_FILE_MAX >> 20);
        else if (text_append(t, buf, n, err) != 0)
            rc = error_prefix(err, name);      /* out of memory: say while reading what */
    }
    if (rc == 0 && ferror(f)) rc = error_set(err, "cannot read %s: %s", name, strerror(errno));
    if (!is_stdin) fclose(f);
    /* On an error t is as it was: callers return without text_free, and a
     * folder opens (fopen succeeds on Linux) and fails only at the read. */
    if (rc != 0 && !had_data) {
        text_free(t);
    } else if (rc != 0) {
        t->len = old_len;
        t->data[old_len] = 0;
    }
    return rc;
}

int text_check_utf8(const char *name, const uint8_t *text, size_t len, Error *err)
{
    int64_t line = 1;
    for (size_t pos = 0, n; pos < len; pos += n) {
        uint32_t cp;
        if (text[pos] < 0x80) {          /* ASCII: one byte, and the line count */
            line += text[pos] == '\n';
            n = 1;
        } else if (utf8_decode(text, len, pos, &cp, &n, err) != 0) {
            char where[ERROR_MSG_MAX];
            snprintf(where, sizeof where, "%s:%" PRId64, name, line);
            return error_prefix(err, where);
        }
    }
    return 0;
}

int byte_is_space(uint8_t b)
{
    return b == ' ' || b == '\t' || b == '\n' || b == '\v' || b == '\f' || b == '\r';
}
