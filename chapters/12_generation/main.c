/*
 * main.c - the chapter 12 program.
 *
 *     build/12_generation --case in.safetensors --out out.safetensors
 *
 * The case mode evaluates the ops of this chapter's exercises (see
 * cases/generation_case.h and reference/ch12_generation.py):
 *
 *     next_token_loss   logits, ids -> loss, grad_logits
 *     sampling          logits, u -> probs, ids
 */
#include <stdio.h>
#include <string.h>

#include "casefile.h"
#include "generation_case.h"

static const char CASE_USAGE[] =
    "usage: 12_generation --case IN.safetensors --out OUT.safetensors\n";

static int no_demo(void) { return -1; }

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "--case") == 0)
        return case_main(argc, argv, CASE_USAGE, no_demo, generation_case_eval);
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        printf("%s", CASE_USAGE);
        return 0;
    }
    fprintf(stderr, "%s", CASE_USAGE);
    return 2;
}
