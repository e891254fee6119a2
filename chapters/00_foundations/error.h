/*
 * error.h - how every function in this project reports a failure (the
 * chapter's README, "Errors", says why this way).
 *
 * A function that can fail takes an `Error *err` as its last argument, fills
 * it with one line that names the file or option and the problem, and returns
 * -1. Control characters in the message (from a name or value read out of a
 * file) are written as \xNN, so it is always one line of plain text. The
 * caller decides what to do: main() prints the line and exits 1, a test
 * asserts on it. Nothing here calls exit(), and only the stubs' report below
 * keeps any state.
 *
 * Exercise stubs call not_implemented(__func__), which prints
 * "not implemented: <function> (<its source file>)" once per function in a
 * program and returns -1.
 *
 * Read next: safetensors.h.
 */
#ifndef ERROR_H
#define ERROR_H

#define ERROR_MSG_MAX 512

typedef struct {
    char msg[ERROR_MSG_MAX];
} Error;

/* printf-style; always returns -1 so a caller can write `return error_set(...)`.
 * err may be NULL (the message is then dropped). */
int error_set(Error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Prepends "what: " to the message already in err (a callee's), so the line
 * says where the failure happened; returns -1. */
int error_prefix(Error *err, const char *what);

/* Prints "not implemented: <func> (<file>)" to stderr the first time func
 * reports itself, and returns -1. */
int not_implemented_in(const char *func, const char *file);
#define not_implemented(func) not_implemented_in(func, __FILE__)

/* The first stub that reported itself since the last not_implemented_clear()
 * (its function and file), or NULL: how a test names the stub a call ran
 * into, however deep. */
const char *not_implemented_first_func(void);
const char *not_implemented_first_file(void);
void not_implemented_clear(void);

#endif
