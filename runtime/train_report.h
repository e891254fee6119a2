/*
 * train_report.h - what the training programs add around chapter 08's loop
 * (its TrainHooks): the progress line and each epoch's summary on stdout,
 * the CSV loss log, and a checkpoint after every epoch. The loop calls the
 * hooks; it knows nothing of files or terminals.
 */
#ifndef TRAIN_REPORT_H
#define TRAIN_REPORT_H

#include "progress.h"
#include "trainer.h"

typedef struct {
    /* set by the caller */
    const char *log_path;       /* the CSV loss log, or NULL */
    const char *checkpoint;     /* written after every epoch, or NULL */
    const char *const *checkpoint_meta;  /* NULL, or key, value, ..., NULL: metadata
                                            every checkpoint carries besides its own
                                            (chapter 10: the tokenizer's merges) */
    int quiet;                  /* 1: no progress line and no epoch summaries (tests,
                                   MPI's other ranks) */
    int epochs;                 /* the run's, for "epoch 3/10" */
    int one_target;             /* 1: the summary says "accuracy", else "token accuracy" */
    /* the hooks' own */
    Progress progress;
    CsvLog log;
    int64_t saved_epoch;        /* the last epoch this run checkpointed; 0: none */
    TrainHooks hooks;
} TrainReport;

/* The hooks that report to r, which must outlive the run:
 *     o.hooks = train_report_hooks(&report);
 * A run that fails has its error end with what the checkpoint on disk
 * keeps ("build/run.safetensors keeps epoch 3, the last finished"). */
const TrainHooks *train_report_hooks(TrainReport *r);

#endif
