/*
 * task.h - the one program every task runs on. A task (the reverse task of
 * chapter 08, Taylor series, IMDb, set anomaly, ...) is a description: its
 * data, its model's defaults, its metric, its demo. task_main turns it
 * into a program with the same commands and options as every other task:
 *
 *     PROGRAM --train [options]          train (PROGRAM --train --help lists the options)
 *     PROGRAM --eval MODEL [options]     the task's metric on its test data
 *     PROGRAM --bench CHECKPOINT [opts]  time training steps (make bench)
 *     PROGRAM --demo                     and the task's own commands
 *     PROGRAM --help                     the commands
 *
 * A training run, whatever the task:
 *   1. checks every option, and every file it will write (paths.h), before
 *      any work; takes the lock of --checkpoint for the whole run;
 *   2. reads the data once (Task.open);
 *   3. builds the model the options describe, or resumes the run saved in
 *      --resume (its options must describe the same model); a checkpoint
 *      that finished its epochs is not trained again: --out is written
 *      from it, and the report runs;
 *   4. trains (chapter 08's train_run), every --eval-every epochs also
 *      running the task's round (chapter 09: greedy decoding of the
 *      validation pairs), a checkpoint after every epoch;
 *   5. writes --out, and reports the task's metric on its test data.
 *
 * Under mpirun with more than one rank (the MPI build, build/mpi/), every
 * rank runs the same training on its share of each batch (--device mpi,
 * mpi/dist.h); rank 0 alone takes the lock, writes the checkpoint, --out
 * and the logs, prints, runs the rounds and the report.
 */
#ifndef TASK_H
#define TASK_H

#include "checkpoint.h"
#include "error.h"
#include "model.h"
#include "options.h"
#include "paths.h"
#include "trainer.h"

/* The options every task shares: the recipe, the model's sizes, the files
 * of a run. A task's defaults() sets them before the command line does. */
typedef struct {
    TrainOptions train;         /* the recipe, in chapter 08's own struct: --epochs,
                                   --lr, --clip, ... write into it (train.adam.lr) */
    const char *optimizer, *schedule;   /* read into train.adam.decoupled, train.schedule */
    int seed, eval_every;
    int no_test;                /* --no-test: the run measures nothing on the test sets */
    int d_model, heads, layers, ffn, norm_first;
    double dropout, target_loss, min_accuracy;
    double mpi_timeout;         /* seconds a rank waits for the others (--device mpi) */
    const char *checkpoint, *resume, *out, *log, *device;
} RunOptions;

typedef struct Task Task;

/* One run of a task: its options, and what the task's open() put here. */
typedef struct {
    const Task *task;
    RunOptions o;
    int training;               /* 1: a training run; 0: --eval and the task's commands */
    const char *model_path;     /* --eval MODEL */
    Examples train, val;        /* training: what the model trains and validates on */
    const char *const *meta;    /* NULL, or key, value, ..., NULL: metadata that every
                                   checkpoint and --out carries (chapter 10's tokenizer) */
    StepResult last_val;        /* the last validation of the training run */
    int rank, ranks;            /* this process among the run's MPI ranks (0 of 1
                                   without mpirun); only rank 0 writes and prints */
} TaskRun;

/* A command of the task's own: PROGRAM name ARGS. run gets the arguments
 * after the name. */
typedef struct {
    const char *name;           /* "--translate" */
    const char *usage;          /* "MODEL TEXT [--beam K]" */
    int (*run)(int argc, char **argv, Error *err);
} TaskCommand;

struct Task {
    const char *program;        /* "09_translation" */
    const char *about;          /* what the task is, for --help */
    void (*defaults)(RunOptions *o);
    /* The task's own options: its data's (--train and --eval), and those of
     * --train or --eval alone. */
    const Option *data_options, *train_options, *eval_options;
    int n_data_options, n_train_options, n_eval_options;
    /* The task's own option checks, before any work (NULL: none). */
    int (*check)(TaskRun *run, Error *err);
    /* The files the task reads, into paths (at most max); returns how many. */
    int (*inputs)(const TaskRun *run, RunPath *paths, int max);
    /* Reads or makes the data: for training, run->train, run->val (and
     * run->meta); for --eval, the test data of the report. */
    int (*open)(TaskRun *run, Error *err);
    /* Frees what open() made, also after it failed part of the way. */
    void (*close)(TaskRun *run);
    /* The model of the options: the task sets what is its own (kind,
     * vocabularies, max_len, ...) in c and the options that set them in
     * names; the sizes from RunOptions are already there. */
    void (*config)(const TaskRun *run, ModelConfig *c, ConfigOptions *names);
    /* Fails unless m (read from path) is a model of this task. */
    int (*check_model)(const TaskRun *run, const Model *m, const char *path, Error *err);
    /* Every --eval-every epochs (NULL: no rounds): a metric of the model on
     * the validation data, printed; logged as round_column in the file
     * --log + round_log_suffix. */
    int (*round)(TaskRun *run, Model *m, double *metric, Error *err);
    const char *round_column, *round_log_suffix;
    /* The task's metric on its test data, printed: after training, and as
     * --eval (run->training 0). *accuracy is what --min-accuracy bounds. */
    int (*report)(TaskRun *run, Model *m, double *accuracy, Error *err);
    const TaskCommand *commands;        /* --demo and the rest */
    int n_commands;
};

/* The program: reads argv, runs the command, prints what failed as one
 * line naming the program and the command; returns the exit status (0, 1
 * for a failed run, 2 for a bad command line). */
int task_main(const Task *task, int argc, char **argv);

/* A run with the task's defaults and nothing else set. */
TaskRun task_run_defaults(const Task *task);

/* The training run of run->o (what --train does once the options are
 * read; a demo calls it with options of its own). */
int task_train(TaskRun *run, Error *err);

/* The model the options describe: the sizes of RunOptions, and the rest
 * from the task's config(). */
void task_config(const TaskRun *run, ModelConfig *c, ConfigOptions *names);

/* The hash the ranks of an MPI run compare before training (FNV-1a, 64
 * bits): every field of the model's configuration (m->cfg) and of the
 * recipe run->o resolves to, every option of RunOptions but the output
 * files, the starting weights, optimizer step, epoch and random streams,
 * and every training and validation example. Ranks started with any
 * difference in these would train a wrong model together. */
int task_run_hash(const TaskRun *run, const Model *m, const OptimState *opt,
                  const TrainState *state, uint64_t *hash, Error *err);

/* A model of the task from a model file or a checkpoint. */
int task_load_model(const TaskRun *run, Model *m, const char *path, Error *err);

#endif
