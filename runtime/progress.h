/*
 * progress.h - what a run shows and keeps besides the model: a clock, the
 * progress line, and the loss log.
 *
 * The progress line, on a terminal, redrawn in place with '\r' (at most
 * about ten times a second, so printing never slows training down):
 *
 *     [#####               ] step 120/3900  epoch 1  loss 2.1234  lr 3.2e-04  41k tok/s  ETA 1m12s
 *
 * When the output is not a terminal (a log file, CI) a redraw would leave
 * '\r' garbage, so a plain line is printed every `every` steps instead.
 *
 * The same line counts other work (12_generation's bytes written) with
 * progress_init_count and progress_count:
 *
 *     [####                ] 41200/200000 bytes  650 bytes/s  ETA 4m04s
 *
 * The loss log is a CSV file, one row per optimizer step, which the plots
 * (plots/training_loss.gp, plots/learning_rate.gp) and any spreadsheet read:
 *
 *     step,epoch,lr,train_loss,val_loss,val_accuracy,seconds
 *     1,0,0,2.3125,,,0.1
 *     ...
 *     500,0,0.000998,0.4121,0.3977,0.912,61.4
 *
 * A value that is NaN (no validation at this step) is an empty field, which
 * gnuplot skips. seconds is the wall time of the training so far, its
 * validations included. A run resumed from a checkpoint keeps the rows up
 * to the checkpoint's step and drops the later ones: they were written by
 * the run that crashed after its last checkpoint, and the resumed run
 * writes those steps again, its seconds going on from the last kept row's.
 * (A log of the six columns before seconds existed is resumed too; its
 * header gains the column.)
 *
 * The training loop of chapter 08 (trainer.h) draws the line and writes the
 * log; 12_generation --generate draws a count line of the bytes it writes.
 */
#ifndef PROGRESS_H
#define PROGRESS_H

#include <stdint.h>
#include <stdio.h>

#include "error.h"
#include "threads.h"   /* time_now() */

typedef struct {
    FILE *out;
    int tty;                    /* out is a terminal: redraw in place */
    int64_t start_step;         /* where this run started (a resumed run: > 0) */
    int64_t total_steps;
    int64_t every;              /* not a terminal: one line every `every` steps */
    double t_start, t_drawn;    /* time_now() at init and at the last redraw */
    int64_t tokens;             /* tokens since init, for tok/s */
    int width;                  /* length of the last line drawn, to blank it */
    int pending;                /* the last update is not on screen yet */
    const char *unit;           /* a count line of these (progress_init_count); NULL: steps */
    /* The last update, for progress_finish. */
    int64_t step, epoch;
    double loss, lr;
} Progress;

/* A progress line on `out` for steps start_step+1 .. total_steps; every < 1
 * means no intermediate lines when out is not a terminal (only the last). */
void progress_init(Progress *p, FILE *out, int64_t start_step, int64_t total_steps,
                   int64_t every);

/* Call once after every optimizer step: step is the number of steps done
 * (start_step + 1 for the first call), epoch the current epoch (from 0; shown from 1),
 * loss and lr the step's, tokens_per_step the tokens the step processed
 * (for tok/s). Redraws when it is time to. */
void progress_update(Progress *p, int64_t step, int64_t epoch, double loss, double lr,
                     int64_t tokens_per_step);

/* A progress line on `out` for a count of `unit` (a plural noun: "bytes")
 * from 0 to total: the bar, the count, its rate and the time left. A
 * program that shows it only on a terminal checks isatty itself; on a
 * file only the last count is printed. */
void progress_init_count(Progress *p, FILE *out, int64_t total, const char *unit);

/* Call as the work goes: done of the total so far. Redraws when it is time
 * to, like progress_update. */
void progress_count(Progress *p, int64_t done);

/* Shows the last update if it is not on screen, and ends the line. */
void progress_finish(Progress *p);

typedef struct {
    FILE *f;
    char *path;
    double seconds_base;        /* the kept rows' last seconds (a resumed run) */
    double t_open;              /* time_now() when this run opened the log */
} CsvLog;

/* The log's header line, without the newline. */
#define CSV_LOG_HEADER "step,epoch,lr,train_loss,val_loss,val_accuracy,seconds"

/* Opens the loss log at path. keep_through_step < 0 starts a new log (an
 * existing file is replaced). keep_through_step >= 0 resumes: the existing
 * rows with step <= keep_through_step are kept and the later ones dropped
 * (the file is then rewritten atomically, through a temporary file and a
 * rename); a missing file starts a new log. A file whose first line is not
 * the header, or with a row that does not start with a step number, is an
 * error naming the file and the line. A last line without its newline (a
 * crash in mid-write) is dropped. */
int csv_log_open(CsvLog *log, const char *path, int64_t keep_through_step, Error *err);

/* Appends one row and flushes it, so a crash loses nothing already logged.
 * NaN values are written as empty fields. */
int csv_log_row(CsvLog *log, int64_t step, int64_t epoch, double lr, double train_loss,
                double val_loss, double val_accuracy, Error *err);

/* Closes the file; a write error that surfaces only now is reported. */
int csv_log_close(CsvLog *log, Error *err);

#endif
