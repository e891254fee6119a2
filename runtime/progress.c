/*
 * progress.c - see progress.h.
 */
#include "progress.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "safetensors.h"   /* file_write_atomic */

/* ------------------------------------------------------------------------ */
/* The progress line                                                         */
/* ------------------------------------------------------------------------ */

#define PROGRESS_BAR 20          /* characters between the brackets */
#define PROGRESS_REDRAW 0.1      /* seconds between redraws on a terminal */

void progress_init(Progress *p, FILE *out, int64_t start_step, int64_t total_steps,
                   int64_t every)
{
    memset(p, 0, sizeof *p);
    p->out = out;
    p->tty = isatty(fileno(out));
    p->start_step = start_step;
    p->total_steps = total_steps;
    p->every = every;
    p->t_start = time_now();
    p->t_drawn = p->t_start - 2 * PROGRESS_REDRAW;   /* the first update draws */
    p->step = start_step;
}

/* "1h02m", "1m12s", "45s". */
static void format_duration(char *buf, size_t size, double seconds)
{
    if (!(seconds >= 0) || seconds > 1e8) {
        snprintf(buf, size, "?");
        return;
    }
    long s = (long)(seconds + 0.5);
    if (s >= 3600) snprintf(buf, size, "%ldh%02ldm", s / 3600, s / 60 % 60);
    else if (s >= 60) snprintf(buf, size, "%ldm%02lds", s / 60, s % 60);
    else snprintf(buf, size, "%lds", s);
}

/* "950", "41k", "2.3M". */
static void format_rate(char *buf, size_t size, double rate)
{
    if (rate < 1e3) snprintf(buf, size, "%.0f", rate);
    else if (rate < 1e6) snprintf(buf, size, "%.0fk", rate / 1e3);
    else snprintf(buf, size, "%.1fM", rate / 1e6);
}

/* The line for the last update, without '\r' or '\n'; returns its length. */
static int progress_line(const Progress *p, char *buf, size_t size)
{
    double elapsed = time_now() - p->t_start;
    int64_t done = p->step - p->start_step;
    char bar[PROGRESS_BAR + 1], rate[32], eta[32];
    int filled = p->total_steps > 0 ? (int)(PROGRESS_BAR * p->step / p->total_steps) : 0;
    filled = filled < 0 ? 0 : filled > PROGRESS_BAR ? PROGRESS_BAR : filled;
    memset(bar, '#', (size_t)filled);
    memset(bar + filled, ' ', (size_t)(PROGRESS_BAR - filled));
    bar[PROGRESS_BAR] = '\0';
    format_rate(rate, sizeof rate, elapsed > 0 ? (double)p->tokens / elapsed : 0.0);
    format_duration(eta, sizeof eta,
                    done > 0 ? (double)(p->total_steps - p->step) * elapsed / (double)done : -1);
    int len = p->unit
            ? snprintf(buf, size, "[%s] %lld/%lld %s  %s %s/s  ETA %s", bar, (long long)p->step,
                       (long long)p->total_steps, p->unit, rate, p->unit, eta)
            : snprintf(buf, size, "[%s] step %lld/%lld  epoch %lld  loss %.4f  lr %.1e  "
                       "%s tok/s  ETA %s", bar, (long long)p->step, (long long)p->total_steps,
                       (long long)p->epoch + 1, p->loss, p->lr, rate, eta);
    return len < (int)size ? len : (int)size - 1;
}

/* Shows the last update: in place on a terminal, else as a line of its own. */
static void progress_draw(Progress *p)
{
    char line[256];
    int len = progress_line(p, line, sizeof line);
    if (p->tty) {
        /* Blank what is left of a longer previous line. */
        fprintf(p->out, "\r%s%*s", line, p->width > len ? p->width - len : 0, "");
        p->width = len;
    } else {
        fprintf(p->out, "%s\n", line);
    }
    fflush(p->out);
    p->t_drawn = time_now();
    p->pending = 0;
}

/* An update is in p: draws it when it is time to (the last step always). */
static void progress_tick(Progress *p)
{
    p->pending = 1;
    int last = p->step >= p->total_steps;
    if (p->tty ? (last || time_now() - p->t_drawn >= PROGRESS_REDRAW)
               : (last || (p->every >= 1 && p->step % p->every == 0)))
        progress_draw(p);
}

void progress_update(Progress *p, int64_t step, int64_t epoch, double loss, double lr,
                     int64_t tokens_per_step)
{
    p->step = step;
    p->epoch = epoch;
    p->loss = loss;
    p->lr = lr;
    p->tokens += tokens_per_step;
    progress_tick(p);
}

void progress_init_count(Progress *p, FILE *out, int64_t total, const char *unit)
{
    progress_init(p, out, 0, total, 0);
    p->unit = unit;
}

void progress_count(Progress *p, int64_t done)
{
    /* the count is both the bar's position and what the rate counts */
    p->step = p->tokens = done;
    progress_tick(p);
}

void progress_finish(Progress *p)
{
    if (p->pending) progress_draw(p);
    if (p->tty && p->width > 0) {
        fputc('\n', p->out);
        fflush(p->out);
    }
    p->width = 0;
}

/* ------------------------------------------------------------------------ */
/* The loss log                                                              */
/* ------------------------------------------------------------------------ */

/* Opens the log, as it now is on disk, for appending rows. */
static int csv_log_append(CsvLog *log, Error *err)
{
    log->f = fopen(log->path, "a");
    if (!log->f)
        return error_set(err, "cannot open the loss log %s for appending: %s", log->path,
                         strerror(errno));
    return 0;
}

/* A new log: the header alone (written like every file the project
 * rewrites, see file_write_atomic), then rows are appended. */
static int csv_log_create(CsvLog *log, Error *err)
{
    const char *header = CSV_LOG_HEADER "\n";
    if (file_write_atomic(log->path, &(FilePart){header, strlen(header)}, 1, err) != 0) {
        char msg[ERROR_MSG_MAX];
        snprintf(msg, sizeof msg, "%s", err->msg);
        return error_set(err, "the loss log: %s", msg);
    }
    return csv_log_append(log, err);
}

/* The whole file, NUL-terminated, in *text (*size bytes); *text is NULL
 * (and 0 returned) if the file does not exist. */
static int read_file(const char *path, char **text, size_t *size, Error *err)
{
    *text = NULL;
    *size = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (errno == ENOENT) return 0;
        return error_set(err, "cannot open the loss log %s: %s", path, strerror(errno));
    }
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    while (buf) {
        len += fread(buf + len, 1, cap - 1 - len, f);
        if (len < cap - 1) break;
        char *bigger = realloc(buf, cap * 2);
        if (!bigger) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = bigger;
        cap *= 2;
    }
    const char *why = !buf ? "out of memory" : ferror(f) ? strerror(errno) : NULL;
    fclose(f);
    if (why) {
        free(buf);
        return error_set(err, "cannot read the loss log %s: %s", path, why);
    }
    buf[len] = '\0';
    *text = buf;
    *size = len;
    return 0;
}


/* Resuming: keeps the rows with step <= keep, rewrites the file if any row
 * goes, and opens it for appending. */
static int csv_log_resume(CsvLog *log, int64_t keep, Error *err)
{
    char *text;
    size_t size;
    if (read_file(log->path, &text, &size, err) != 0) return -1;
    if (!text || size == 0) {            /* no log yet, or not even a header */
        free(text);
        return csv_log_create(log, err);
    }
    /* the header, or the one before the seconds column */
    size_t header = strlen(CSV_LOG_HEADER), old = header - strlen(",seconds");
    int is_old = strncmp(text, CSV_LOG_HEADER, old) == 0 &&
                 (text[old] == '\n' || !text[old]);
    if (is_old) header = old;
    else if (strncmp(text, CSV_LOG_HEADER, header) != 0 ||
             (text[header] != '\n' && text[header]))
        goto not_a_log;

    /* Kept rows are moved down in place; `kept` is the length so far. */
    size_t kept = header + 1, pos = header + (text[header] == '\n');
    int dropped = text[header] != '\n' || is_old;   /* the header to write again */
    int line = 1;
    while (pos < size) {
        line++;
        char *start = text + pos, *newline = memchr(start, '\n', size - pos);
        size_t len = newline ? (size_t)(newline - start) + 1 : size - pos;
        pos += len;
        if (!newline) {                  /* half a row: the crash came mid-write */
            dropped++;
            break;
        }
        char *end;
        errno = 0;
        long long step = strtoll(start, &end, 10);
        if (end == start || *end != ',' || errno) {
            error_set(err, "%s line %d: '%.*s' is not a row of the loss log (a row starts "
                      "with the step number)", log->path, line,
                      (int)(len - 1 < 40 ? len - 1 : 40), start);
            free(text);
            return -1;
        }
        if (step <= keep) {
            /* the seconds of the last kept row: its seventh field */
            const char *field = start;
            for (int commas = 0; commas < 6 && field; commas++) {
                field = memchr(field, ',', (size_t)(start + len - field));
                if (field) field++;
            }
            if (field) log->seconds_base = strtod(field, NULL);
            memmove(text + kept, start, len);
            kept += len;
        } else {
            dropped++;
        }
    }
    text[header] = '\n';
    FilePart parts[2] = {{CSV_LOG_HEADER "\n", strlen(CSV_LOG_HEADER) + 1},
                         {text + header + 1, kept - header - 1}};
    int rc = dropped ? file_write_atomic(log->path, parts, 2, err) : 0;
    free(text);
    if (rc != 0) return -1;
    return csv_log_append(log, err);

not_a_log:
    error_set(err, "%s line 1: not a loss log (the first line must be '%s')", log->path,
              CSV_LOG_HEADER);
    free(text);
    return -1;
}

int csv_log_open(CsvLog *log, const char *path, int64_t keep_through_step, Error *err)
{
    memset(log, 0, sizeof *log);
    log->t_open = time_now();
    log->path = strdup(path);
    if (!log->path) return error_set(err, "out of memory opening the loss log %s", path);
    int rc = keep_through_step < 0 ? csv_log_create(log, err)
                                   : csv_log_resume(log, keep_through_step, err);
    if (rc != 0) {
        if (log->f) fclose(log->f);
        free(log->path);
        memset(log, 0, sizeof *log);
    }
    return rc;
}

/* A value, or nothing for NaN (gnuplot and spreadsheets skip an empty field). */
static void csv_value(char *buf, size_t size, double v)
{
    if (isnan(v)) buf[0] = '\0';
    else snprintf(buf, size, "%.9g", v);
}

int csv_log_row(CsvLog *log, int64_t step, int64_t epoch, double lr, double train_loss,
                double val_loss, double val_accuracy, Error *err)
{
    if (!log->f) return error_set(err, "the loss log is not open");
    char v[4][40];
    csv_value(v[0], sizeof v[0], lr);
    csv_value(v[1], sizeof v[1], train_loss);
    csv_value(v[2], sizeof v[2], val_loss);
    csv_value(v[3], sizeof v[3], val_accuracy);
    double seconds = log->seconds_base + (time_now() - log->t_open);
    if (fprintf(log->f, "%lld,%lld,%s,%s,%s,%s,%.1f\n", (long long)step, (long long)epoch, v[0],
                v[1], v[2], v[3], seconds) < 0 ||
        fflush(log->f) != 0)
        return error_set(err, "cannot write the loss log %s: %s", log->path, strerror(errno));
    return 0;
}

int csv_log_close(CsvLog *log, Error *err)
{
    int rc = 0;
    if (log->f && fclose(log->f) != 0)
        rc = error_set(err, "cannot close the loss log %s: %s", log->path, strerror(errno));
    free(log->path);
    memset(log, 0, sizeof *log);
    return rc;
}
