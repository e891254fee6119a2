/*
 * options.c - see options.h.
 */
#include "options.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int parse_int(const char *name, const char *text, int *out, Error *err)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (end == text || *end || errno || v < -2147483647L || v > 2147483647L)
        return error_set(err, "%s: '%s' is not an integer", name, text);
    *out = (int)v;
    return 0;
}

static int parse_double(const char *name, const char *text, double *out, Error *err)
{
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (end == text || *end || errno || !isfinite(v))
        return error_set(err, "%s: '%s' is not a finite number", name, text);
    *out = v;
    return 0;
}

/* A number that is finite in float32 too (the recipe's rates). */
static int parse_float(const char *name, const char *text, float *out, Error *err)
{
    double v = 0;
    if (parse_double(name, text, &v, err) != 0) return -1;
    if (!isfinite((float)v))
        return error_set(err, "%s: '%s' is beyond float32's range", name, text);
    *out = (float)v;
    return 0;
}

int parse_options(const Option *opts, int n, int argc, char **argv, int first, Error *err)
{
    for (int i = first; i < argc; i++) {
        const Option *o = NULL;
        for (int k = 0; k < n; k++)
            if (strcmp(argv[i], opts[k].name) == 0) o = &opts[k];
        if (!o) return error_set(err, "unknown option '%s' (--help lists them)", argv[i]);
        if (o->type == OPT_FLAG) {
            *(int *)o->value = 1;
            continue;
        }
        if (i + 1 >= argc) return error_set(err, "%s needs a value", o->name);
        const char *text = argv[++i];
        switch (o->type) {
        case OPT_INT:    if (parse_int(o->name, text, o->value, err) != 0) return -1; break;
        case OPT_DOUBLE: if (parse_double(o->name, text, o->value, err) != 0) return -1; break;
        case OPT_FLOAT:  if (parse_float(o->name, text, o->value, err) != 0) return -1; break;
        case OPT_STRING: *(const char **)o->value = text; break;
        case OPT_FLAG:   break;
        }
    }
    return 0;
}

void print_options(FILE *out, const Option *opts, int n)
{
    for (int k = 0; k < n; k++) {
        const Option *o = &opts[k];
        char left[48], def[64] = "";
        snprintf(left, sizeof left, "%s%s", o->name,
                 o->type == OPT_FLAG ? "" : o->type == OPT_STRING ? " S" : " N");
        if (o->type == OPT_INT)
            snprintf(def, sizeof def, " (default %d)", *(const int *)o->value);
        else if (o->type == OPT_DOUBLE)
            snprintf(def, sizeof def, " (default %g)", *(const double *)o->value);
        else if (o->type == OPT_FLOAT)
            snprintf(def, sizeof def, " (default %g)", (double)*(const float *)o->value);
        else if (o->type == OPT_STRING && *(const char *const *)o->value)
            snprintf(def, sizeof def, " (default %.48s)", *(const char *const *)o->value);
        fprintf(out, "  %-22s %s%s\n", left, o->help, def);
    }
}
