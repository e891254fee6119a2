/*
 * text.h - bytes in and bytes out: a growable byte buffer, reading a whole
 * file (or stdin), byte ranges, and UTF-8.
 *
 * Text is raw bytes (uint8_t) with an explicit length, never a NUL-terminated
 * string: a text may hold a zero byte. utf8_decode accepts what Python's
 * bytes.decode("utf-8") accepts: the shortest form only (no overlong
 * encodings), no surrogate (U+D800..U+DFFF), nothing above U+10FFFF. The
 * chapter's README has the byte layout of UTF-8.
 *
 * Read next: vocab.h.
 */
#ifndef TEXT_H
#define TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* A growable byte buffer. Start from `Text t = {0};`, free with text_free. */
typedef struct {
    uint8_t *data;
    size_t len;
    size_t cap;
} Text;

/* A byte range [start, start + len) of some text: a word, a BPE piece. */
typedef struct {
    size_t start;
    size_t len;
} Span;

/* Appends n bytes. data stays NUL-terminated (not counted in len), so a
 * Text that holds no zero byte can be printed with %s. */
int text_append(Text *t, const void *bytes, size_t n, Error *err);
void text_free(Text *t);

/* The most text_read_file reads: 256 MiB, over six times the largest data
 * the project reads (the 25,000 IMDb reviews, under 40 MB). A text is held
 * whole in memory and its readers multiply it (tokenizing makes 8 bytes of
 * id per byte), so a bigger file is not data for these programs: /dev/zero
 * or a device named by mistake would otherwise be read until memory runs
 * out, where now a message names the file. */
#define TEXT_FILE_MAX ((size_t)256 << 20)

/* Reads a whole file into t (appending); path "-" reads stdin. A file of
 * more than TEXT_FILE_MAX bytes is refused (a regular file before it is
 * read, a stream once that much has come). Errors name the file and leave
 * t as it was (nothing to free if it was empty). */
int text_read_file(const char *path, Text *t, Error *err);

/* ASCII whitespace: space, \t, \n, \v, \f, \r. */
int byte_is_space(uint8_t b);

/* Decodes the character that starts at text[pos] (pos < len): its code point
 * and its length in bytes (1..4). Invalid UTF-8 is an error that names the
 * byte offset pos and the problem. */
int utf8_decode(const uint8_t *text, size_t len, size_t pos, uint32_t *codepoint,
                size_t *n_bytes, Error *err);

/* Checks that the len bytes of text, read from the file `name`, are UTF-8
 * (utf8_decode's rules). The error names the file and the line as well as
 * the byte offset: "corpus.txt:3: invalid UTF-8 at byte offset 57: byte
 * 0xff cannot start a character". A reader that hands a file to the char
 * tokenizer checks it first: the tokenizer sees bytes without a name (a
 * corpus of one side of many lines, even), so its own error can say
 * neither. */
int text_check_utf8(const char *name, const uint8_t *text, size_t len, Error *err);

/* Writes the UTF-8 bytes of a code point (not a surrogate, at most
 * U+10FFFF) into out and their number into n_bytes. */
int utf8_encode(uint32_t codepoint, uint8_t out[4], size_t *n_bytes, Error *err);

#endif
