/*
 * text.h - bytes in and bytes out: a growable byte buffer, reading a whole
 * file (or stdin), byte ranges, and UTF-8.
 *
 * Every tokenizer of this chapter reads UTF-8 text as raw bytes (uint8_t)
 * with an explicit length, never as NUL-terminated strings: a text may hold
 * a zero byte, and the byte-level BPE tokenizer must round-trip any bytes.
 *
 * UTF-8 writes a Unicode code point in 1 to 4 bytes:
 *
 *     code points        bytes
 *     U+0000..U+007F     0xxxxxxx
 *     U+0080..U+07FF     110xxxxx 10xxxxxx
 *     U+0800..U+FFFF     1110xxxx 10xxxxxx 10xxxxxx
 *     U+10000..U+10FFFF  11110xxx 10xxxxxx 10xxxxxx 10xxxxxx
 *
 * A byte sequence is valid only if it uses the shortest form (no "overlong"
 * encodings), encodes no surrogate (U+D800..U+DFFF) and nothing above
 * U+10FFFF: the same rules as Python's bytes.decode("utf-8").
 *
 * Nothing here converts encodings or normalises Unicode: text is UTF-8 bytes.
 *
 * Read next: vocab.h, then char_tokenizer.h.
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

/* Reads a whole file into t (appending); path "-" reads stdin. Errors name
 * the file. */
int text_read_file(const char *path, Text *t, Error *err);

/* ASCII whitespace: space, \t, \n, \v, \f, \r. */
int byte_is_space(uint8_t b);

/* Decodes the character that starts at text[pos] (pos < len): its code point
 * and its length in bytes (1..4). Invalid UTF-8 is an error that names the
 * byte offset pos and the problem. */
int utf8_decode(const uint8_t *text, size_t len, size_t pos, uint32_t *codepoint,
                size_t *n_bytes, Error *err);

/* Writes the UTF-8 bytes of a code point (not a surrogate, at most
 * U+10FFFF) into out and their number into n_bytes. */
int utf8_encode(uint32_t codepoint, uint8_t out[4], size_t *n_bytes, Error *err);

#endif
