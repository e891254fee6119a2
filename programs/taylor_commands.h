/*
 * taylor_commands.h - the chapter 09 program's commands besides training and
 * evaluation (task.h has those): each reads the Taylor pairs with the
 * defaults and a model file. argv holds the arguments after the command.
 *
 *     --translate MODEL TEXT [--beam K]   translate one source
 *     --demo                              the shipped model on a few test pairs
 *     --bench-decode MODEL [N]            greedy decoding of N sources to the full
 *                                         target length, with and without the cache
 *     --plot-data DIR                     the shipped model's logs and a
 *                                         cross-attention map, for make plots
 */
#ifndef TAYLOR_COMMANDS_H
#define TAYLOR_COMMANDS_H

#include "error.h"

#define SHIPPED_MODEL "models/taylor.safetensors"

int translate_command(int argc, char **argv, Error *err);
int taylor_demo_command(int argc, char **argv, Error *err);
int bench_decode_command(int argc, char **argv, Error *err);
int taylor_plot_data_command(int argc, char **argv, Error *err);

#endif
