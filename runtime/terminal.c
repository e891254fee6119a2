/*
 * terminal.c - see terminal.h.
 */
#include "terminal.h"

#include <stdint.h>
#include <unistd.h>

/* Whether byte i of b (n bytes) starts what a terminal would obey, and how
 * many bytes that is (0: none, it is shown as it is). */
static size_t obeyed(const uint8_t *b, size_t n, size_t i)
{
    if ((b[i] < 0x20 && b[i] != '\n' && b[i] != '\t') || b[i] == 0x7f) return 1;
    if (b[i] == 0xc2 && i + 1 < n && b[i + 1] >= 0x80 && b[i + 1] <= 0x9f) return 2;
    return 0;
}

void terminal_escape(FILE *f, const void *bytes, size_t n)
{
    const uint8_t *b = bytes;
    size_t shown = 0;                   /* b[shown..i) is plain text not written yet */
    for (size_t i = 0; i < n;) {
        size_t k = obeyed(b, n, i);
        if (!k) {
            i++;
            continue;
        }
        fwrite(b + shown, 1, i - shown, f);
        for (size_t j = 0; j < k; j++) fprintf(f, "\\x%02x", b[i + j]);
        i += k;
        shown = i;
    }
    fwrite(b + shown, 1, n - shown, f);
}

void terminal_write(FILE *f, const void *bytes, size_t n)
{
    if (isatty(fileno(f))) terminal_escape(f, bytes, n);
    else fwrite(bytes, 1, n, f);
}
