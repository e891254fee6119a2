/*
 * commands.h - the training commands of the chapter program (main.c
 * dispatches to them):
 *
 *     08_training --train [options]   train a model on the reverse or copy task
 *     08_training --train-demo        the reverse task with the seed's model
 *                                     (what `make demo` runs)
 *     08_training --bench CKPT ...    time training steps (`make bench`)
 *
 * `08_training --train --help` lists the options.
 */
#ifndef COMMANDS_H
#define COMMANDS_H

#include "error.h"
#include "model.h"
#include "optim.h"
#include "trainer.h"

int command_train(int argc, char **argv);
int command_train_demo(const char *plot_dir);
int command_bench(int argc, char **argv);

/* Fails unless --device names "cpu" or "cuda" (checked before any work). */
int command_check_device(const char *name, Error *err);

/* --device NAME for a training run: "cpu" leaves d zeroed (train_run then
 * uses the CPU); "cuda" opens the GPU, which only the CUDA build of the
 * programs has (this file compiled with WITH_CUDA); any other name is an
 * error. N, S, T: the training batch's shape. */
int command_open_device(const char *name, StepDevice *d, const Model *m, const AdamState *opt,
                        int N, int S, int T, Error *err);

#endif
