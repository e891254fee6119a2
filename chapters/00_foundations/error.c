/* error.c - see error.h. */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>

int error_set(Error *err, const char *fmt, ...)
{
    if (err) {
        char raw[ERROR_MSG_MAX];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(raw, sizeof raw, fmt, ap);
        va_end(ap);
        /* Messages quote names and values read from files: a control
         * character among them (a newline, an escape sequence a terminal
         * would obey) is written as \xNN, so the message stays one line of
         * plain text. */
        size_t out = 0;
        for (const unsigned char *p = (const unsigned char *)raw; *p; p++) {
            int control = *p < 0x20 || *p == 0x7f;
            if (out + (control ? 4 : 1) >= sizeof err->msg) break;
            if (control) out += (size_t)snprintf(err->msg + out, 5, "\\x%02x", *p);
            else err->msg[out++] = (char)*p;
        }
        err->msg[out] = '\0';
    }
    return -1;
}

int error_prefix(Error *err, const char *what)
{
    if (!err) return -1;
    char msg[ERROR_MSG_MAX];
    /* An exercise stub fails without a message (it prints its own line). */
    snprintf(msg, sizeof msg, "%s", err->msg[0] ? err->msg : "failed (see above)");
    return error_set(err, "%s: %s", what, msg);
}

static const char *first_func, *first_file;

const char *not_implemented_first_func(void)
{
    return first_func;
}

const char *not_implemented_first_file(void)
{
    return first_file;
}

void not_implemented_clear(void)
{
    first_func = first_file = NULL;
}

int not_implemented_in(const char *func, const char *file)
{
    /* The functions that have reported (__func__ of each stub is one string
     * for the whole program, so its address identifies it); past the table's
     * size a stub reports every time. */
    static const char *said[256];
    static int n_said;
    int first = 1;
#pragma omp critical(not_implemented)
    {
        for (int i = 0; i < n_said && first; i++) first = said[i] != func;
        if (first && n_said < (int)(sizeof said / sizeof said[0])) said[n_said++] = func;
        if (!first_func) first_func = func, first_file = file;
    }
    if (first) fprintf(stderr, "not implemented: %s (%s)\n", func, file);
    return -1;
}
