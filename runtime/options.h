/*
 * options.h - the command-line options of the programs: a table of
 * options, each with where its value goes and a line of help.
 *
 *     int epochs = 10;
 *     const char *log = NULL;
 *     Option opts[] = {
 *         {"--epochs", OPT_INT, &epochs, "epochs"},
 *         {"--log", OPT_STRING, &log, "the CSV loss log"},
 *     };
 *     parse_options(opts, 2, argc, argv, 2, &err);
 *
 * The defaults are the values the variables hold before parsing, and the
 * help prints them from there ("--epochs N   epochs (default 10)"), so the
 * help and the defaults cannot disagree.
 */
#ifndef OPTIONS_H
#define OPTIONS_H

#include <stdio.h>

#include "error.h"

typedef enum { OPT_INT, OPT_DOUBLE, OPT_FLOAT, OPT_STRING, OPT_FLAG } OptType;

typedef struct {
    const char *name;       /* "--epochs" */
    OptType type;
    void *value;            /* int *, double *, float *, const char **, int * (a flag: 1) */
    const char *help;       /* without the default: print_options adds it */
} Option;

/* Reads argv[first..argc) against the n options: an unknown option, a
 * missing value or a value of the wrong type is an error naming the
 * option. An option given twice keeps the last value. */
int parse_options(const Option *opts, int n, int argc, char **argv, int first, Error *err);

/* One line per option: its name, N (a number) or S (a string) for its
 * value, its help, and its default when it has one (the value it holds
 * now: call before parsing). */
void print_options(FILE *out, const Option *opts, int n);

#endif
