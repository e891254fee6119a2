/*
 * terminal.h - bytes a program did not choose (a prompt from the command
 * line, the text a model wrote) written for a person at a terminal.
 *
 * A terminal obeys some bytes instead of showing them: ESC starts the
 * sequences that move the cursor, recolour or retitle the window (and on
 * some terminals make it type a reply), BEL rings, '\r' and '\b' overwrite
 * what is there. On a terminal such bytes are written as \xNN, so the text
 * is seen as it is and cannot drive the screen. In a file or a pipe the
 * bytes are the data (12_generation's output is a model's text, byte for
 * byte) and go out unchanged.
 *
 * Error messages have their own rule (error.h: every control character,
 * newlines too, since a message is one line).
 */
#ifndef TERMINAL_H
#define TERMINAL_H

#include <stddef.h>
#include <stdio.h>

/* Writes the n bytes to f with what a terminal would obey written as \xNN:
 * a control byte other than '\n' and '\t' (0x00..0x1f), DEL (0x7f), and a
 * C1 control in UTF-8 (0xc2 0x80..0x9f: U+0080..U+009F, which includes the
 * one-character ESC [ of terminals that honour C1). A backslash stays
 * itself: the escapes are for a person's eye, not to be decoded back. */
void terminal_escape(FILE *f, const void *bytes, size_t n);

/* The n bytes to f: through terminal_escape when f is a terminal
 * (isatty), else unchanged. */
void terminal_write(FILE *f, const void *bytes, size_t n);

#endif
