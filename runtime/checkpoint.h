/*
 * checkpoint.h - a training run saved to go on later: one safetensors file
 * with the model's tensors under their state_dict names (so PyTorch loads
 * it; chapter 07), the optimizer's two moment arrays, and in the metadata
 * the model config, the optimizer step, the epoch and both random streams.
 * Resuming from it reproduces the run that did not stop, bit for bit.
 */
#ifndef CHECKPOINT_H
#define CHECKPOINT_H

#include "error.h"
#include "model.h"
#include "model_config.h"
#include "optim.h"
#include "trainer.h"

/* Writes model + optimizer + state to path, atomically (temp file + rename:
 * an interrupted save leaves the previous checkpoint intact), with the key,
 * value pairs of meta (NULL-terminated, or NULL) added to the metadata. */
int checkpoint_save(const char *path, const Model *m, const OptimState *opt,
                    const TrainState *state, const char *const *meta, Error *err);
/* Reads a checkpoint written by checkpoint_save into a model (allocated
 * here), an optimizer state (allocated here) and the run state. */
int checkpoint_load(const char *path, Model *m, OptimState *opt, TrainState *state,
                    Error *err);

/* The options of one program that set the fields its task owns, for the
 * messages: model_fields' option column names the options every training
 * program shares (--d-model), these the task's own ({"max_len",
 * "--context"}; a field named twice takes the first). */
typedef struct {
    const char *field, *option;
} FieldOption;

typedef struct {
    const char *kind;           /* the option that chooses the kind, or NULL */
    FieldOption own[4];         /* a NULL field ends the list */
} ConfigOptions;

/* The option that sets field f in the program of options, or NULL. */
const char *config_option(const ConfigOptions *options, const ModelField *f);

/* model_config_check on the model that options describe; its error adds the
 * options that set the sizes and their values ("--d-model 4, --heads 1,
 * --ffn 2000000000, --layers 1": every int field an option sets). A
 * training command calls it before any data is read or made. */
int options_check_config(const ModelConfig *wanted, const ConfigOptions *options, Error *err);

/* A resumed run goes on with the model of its checkpoint, so the options must
 * describe that model: the first field of `saved` (from the checkpoint at
 * path) that differs from `wanted` (from the options) is an error naming the
 * checkpoint, the field, both values and the option. */
int checkpoint_check_config(const char *path, const ModelConfig *saved,
                            const ModelConfig *wanted, const ConfigOptions *options,
                            Error *err);

#endif
