/*
 * fuzz.c - the libFuzzer harness of `make fuzz`: one source, built once per
 * target into build/fuzz/<target> with -DFUZZ_TARGET='"<target>"', the
 * target being a name in the table TARGETS below:
 *
 *     safetensors        safetensors_read alone
 *     model_load         model_load (chapter 07): a model file
 *     checkpoint_load    checkpoint_load (runtime/checkpoint.h): model, optimizer, run state
 *     digits             digits_read (chapter 11): the exported digit images
 *     00_foundations ... 08_training, 12_generation
 *                        the chapter's case evaluator (its CaseEval) on the
 *                        file safetensors_read made of the input
 *
 * Every input is the bytes of a file. The readers take a path, so the bytes
 * are written into an anonymous in-memory file (memfd_create) and the path
 * handed over is /proc/self/fd/N: nothing on disk, nothing to clean up after
 * a crash, and the real reader reads it (no second reader for fuzzing).
 *
 * Besides what the sanitizers catch (a crash, an overflow, a leak, undefined
 * behaviour), each call must keep the error contract of error.h: a failure
 * returns -1 with a non-empty message of one line; anything else aborts,
 * which libFuzzer records as a crash. A failed load must free what it
 * allocated, so the harness frees only after a success: LeakSanitizer finds
 * the rest.
 *
 * fuzz/run.sh drives the targets (seed corpora, limits, crash files);
 * CONTRIBUTING.md, "Fuzzing and sanitizers", says how to replay a crash.
 */
#define _GNU_SOURCE   /* memfd_create */
#include "threads.h"  /* OpenMP, or its one-thread stand-ins */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "casefile.h"
#include "checkpoint.h"
#include "decoder_case.h"
#include "digits.h"
#include "encoder_case.h"
#include "foundations_case.h"
#include "generation_case.h"
#include "layernorm_case.h"
#include "mha_case.h"
#include "model.h"
#include "model_case.h"
#include "sdpa_case.h"
#include "tokenization_case.h"
#include "trainer.h"
#include "training_case.h"

#ifndef FUZZ_TARGET
#error "build with -DFUZZ_TARGET='\"name\"' (see the table in fuzz.c, or make fuzz)"
#endif

/* Aborts unless a call that returned rc left err as error.h promises. */
static void check_error(const char *what, int rc, const Error *err)
{
    if (rc == 0) return;
    int plain = err->msg[0] != '\0';
    for (const unsigned char *p = (const unsigned char *)err->msg; *p; p++)
        if (*p < 0x20 || *p == 0x7f) plain = 0;
    if (rc != -1 || !plain) {
        fprintf(stderr, "fuzz: %s returned %d with the message \"%s\" (expected -1 and one "
                        "line)\n", what, rc, err->msg);
        abort();
    }
}

static void read_file(const char *path)
{
    TensorFile f;
    Error err = {{0}};
    int rc = safetensors_read(path, &f, &err);
    check_error("safetensors_read", rc, &err);
    if (rc == 0) tensorfile_free(&f);
}

static void load_model(const char *path)
{
    Model m;
    Error err = {{0}};
    int rc = model_load(&m, path, &err);
    check_error("model_load", rc, &err);
    if (rc == 0) model_free(&m);
}

static void load_checkpoint(const char *path)
{
    Model m = {0};
    OptimState opt;
    TrainState state;
    Error err = {{0}};
    int rc = checkpoint_load(path, &m, &opt, &state, &err);
    check_error("checkpoint_load", rc, &err);
    if (rc == 0) {
        optim_state_free(&opt);
        model_free(&m);
    }
}

static void read_digits(const char *path)
{
    Digits d;
    Error err = {{0}};
    int rc = digits_read(&d, path, &err);
    check_error("digits_read", rc, &err);
    if (rc == 0) digits_free(&d);
}

/* A case evaluator, on a file the reader accepted (run_case_file's path). */
static void eval_case(const char *path, CaseEval eval)
{
    TensorFile in, out = {0};
    Error err = {{0}};
    if (safetensors_read(path, &in, &err) != 0) return;
    int rc = eval(&in, &out, &err);
    check_error("the case evaluator", rc, &err);
    tensorfile_free(&out);
    tensorfile_free(&in);
}

static const struct {
    const char *name;
    void (*load)(const char *path);  /* a reader; or NULL and: */
    CaseEval eval;                   /* a case evaluator */
} TARGETS[] = {
    {"safetensors", read_file, NULL},
    {"model_load", load_model, NULL},
    {"checkpoint_load", load_checkpoint, NULL},
    {"digits", read_digits, NULL},
    {"00_foundations", NULL, foundations_case_eval},
    {"01_tokenization", NULL, tokenization_case_eval},
    {"02_sdpa", NULL, sdpa_case_eval},
    {"03_mha", NULL, mha_case_eval},
    {"04_layernorm", NULL, layernorm_case_eval},
    {"05_encoder", NULL, encoder_case_eval},
    {"06_decoder", NULL, decoder_case_eval},
    {"07_model", NULL, model_case_eval},
    {"08_training", NULL, training_case_eval},
    {"12_generation", NULL, generation_case_eval},
};

/* Allocations above 256 MB fail (malloc returns NULL) as they would on a
 * machine without the memory: a size a file declares is either refused by a
 * check or takes the "out of memory" path, which must be as clean as any
 * other refusal. (Without this, libFuzzer reports any allocation above its
 * -rss_limit_mb as a crash, a legitimately large case included.) Built in,
 * so a replay by hand runs the same way. */
const char *__asan_default_options(void)
{
    return "allocator_may_return_null=1:max_allocation_size_mb=256";
}

/* Undefined behaviour is reported with the stack that led to it. */
const char *__ubsan_default_options(void)
{
    return "print_stacktrace=1";
}

static int target = -1;       /* index into TARGETS */
static int fd = -1;           /* the in-memory file */
static char input_path[64];   /* /proc/self/fd/<fd> */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    for (size_t i = 0; i < sizeof TARGETS / sizeof *TARGETS; i++)
        if (strcmp(TARGETS[i].name, FUZZ_TARGET) == 0) target = (int)i;
    if (target < 0) {
        fprintf(stderr, "fuzz: no target named '%s' (see fuzz/fuzz.c)\n", FUZZ_TARGET);
        exit(2);
    }
    fd = memfd_create("fuzz-input", 0);
    if (fd < 0) {
        perror("fuzz: memfd_create");
        exit(2);
    }
    snprintf(input_path, sizeof input_path, "/proc/self/fd/%d", fd);
    /* One thread: the same input always runs the same way. */
    omp_set_num_threads(1);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (ftruncate(fd, 0) != 0 || (size && pwrite(fd, data, size, 0) != (ssize_t)size)) {
        perror("fuzz: writing the input to the in-memory file");
        abort();
    }
    if (TARGETS[target].load) TARGETS[target].load(input_path);
    else eval_case(input_path, TARGETS[target].eval);
    return 0;
}
