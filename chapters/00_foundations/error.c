/* error.c - see error.h. */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>

int error_set(Error *err, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return -1;
}

int not_implemented(const char *func)
{
    fprintf(stderr, "not implemented: %s\n", func);
    return -1;
}
