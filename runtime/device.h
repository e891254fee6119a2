/*
 * device.h - where a run trains: "cpu", or "cuda", the GPU, which only
 * the CUDA build of the programs has (build/cuda/, make cuda: this file
 * compiled again with WITH_CUDA). trainer.h has the StepDevice the GPU
 * side fills in.
 */
#ifndef DEVICE_H
#define DEVICE_H

#include "error.h"
#include "model.h"
#include "optim.h"
#include "trainer.h"

/* Fails unless this program can train on the device called name (checked
 * before any work: "cuda" in a build without CUDA fails here). */
int device_check(const char *name, Error *err);

/* Opens the device for model m and optimizer state opt, for training
 * batches of N sequences of S source (and T target) tokens: "cpu" leaves d
 * zeroed (train_run then uses the CPU); "cuda" copies both to the GPU. */
int device_open(const char *name, StepDevice *d, const Model *m, const AdamState *opt, int N,
                int S, int T, Error *err);

#endif
