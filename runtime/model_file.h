/*
 * model_file.h - a model as a safetensors file: every parameter under its
 * state_dict name (chapter 07's table) and the config under "model.<field>"
 * metadata keys, so a model saved here loads into PyTorch with
 * load_state_dict and back.
 *
 * Read next: model_file.c; chapter 08's checkpoints add the optimizer's
 * state to the same file ("optimizer." tensors).
 */
#ifndef MODEL_FILE_H
#define MODEL_FILE_H

#include "error.h"
#include "model.h"
#include "safetensors.h"

/* Adds every parameter (under its state_dict name) and the config (under
 * "model.<field>" metadata keys) to f. */
int model_to_file(const Model *m, TensorFile *f, Error *err);

/* Builds a model from f: the config from its metadata, every parameter from
 * its tensors, each checked for presence, dtype and shape; with strict,
 * a tensor the model does not have is an error too (tensors whose names
 * start with "optimizer." are always allowed). */
int model_load_file(Model *m, const TensorFile *f, int strict, Error *err);

/* model_to_file / model_load_file on a path; the save is atomic. */
int model_save(const Model *m, const char *path, Error *err);
int model_load(Model *m, const char *path, Error *err);

#endif
