/*
 * main.c - the chapter 08 program.
 *
 *     build/08_training --demo                 train the reverse task (make demo)
 *     build/08_training --train [options]      any training run; --train --help lists them
 *     build/08_training --bench CKPT [options] time training steps (make bench)
 *     build/08_training --case in.safetensors --out out.safetensors
 *
 * The demo trains the seeds' reverse-task model from scratch on the CPU,
 * with a progress bar, prints the held-out accuracy and a few examples, and
 * writes the loss log and an attention map into build/plots for `make
 * plots`. The case mode evaluates this chapter's ops (cases/training_case.h has
 * the list, reference/ch08_training.py makes the cases).
 */
#include <stdio.h>
#include <string.h>

#include "casefile.h"
#include "commands.h"
#include "training_case.h"

static const char USAGE[] =
    "usage: 08_training --demo\n"
    "       08_training --train [options]       (--train --help lists the options)\n"
    "       08_training --bench CHECKPOINT [options]\n"
    "       08_training --case IN.safetensors --out OUT.safetensors\n";

static int demo(void)
{
    return command_train_demo("build/plots");
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "--train") == 0) return command_train(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "--bench") == 0) return command_bench(argc, argv);
    return case_main(argc, argv, USAGE, demo, training_case_eval);
}
