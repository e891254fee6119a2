/*
 * error.h - how every function in this project reports a failure.
 *
 * A function that can fail takes an `Error *err` as its last argument, fills
 * it with one line that names the file or option and the problem, and returns
 * -1. Control characters in the message (from a name or value read out of a
 * file) are written as \xNN, so it is always one line of plain text. The caller decides what to do: main() prints the line and exits 1, a
 * test asserts on it. Nothing here calls exit() or keeps global state.
 *
 * Exercise stubs call not_implemented(__func__), which prints
 * "not implemented: <function>" and returns -1 so the tests fail cleanly.
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

/* Prints "not implemented: <func>" to stderr and returns -1. */
int not_implemented(const char *func);

#endif
