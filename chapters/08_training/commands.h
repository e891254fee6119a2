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

int command_train(int argc, char **argv);
int command_train_demo(const char *plot_dir);
int command_bench(int argc, char **argv);

#endif
