/*
 * model_work.h - the buffers of one batch shape for chapter 07's forward
 * and backward (ModelWork, defined in model.h next to the functions that
 * read it): allocation, freeing, and reuse for shorter batches.
 *
 * Read next: model_work.c; chapter 08's trainer allocates one work per
 * batch shape and reshapes it for each batch.
 */
#ifndef MODEL_WORK_H
#define MODEL_WORK_H

#include "error.h"
#include "model.h"

/* Allocates the work for batches of N sequences of source length S (and
 * target length T for seq2seq, else 0); backward != 0 adds the backward's
 * buffers. S and T must not exceed max_len. */
int model_work_alloc(ModelWork *w, const Model *m, int N, int S, int T, int backward,
                     Error *err);
void model_work_free(ModelWork *w);

/* Makes w serve batches of N sequences of a shorter source length S (and
 * target length T) inside the same buffers: 1 <= S <= the allocated S, and
 * likewise T for seq2seq (0 otherwise). Every cache's sizes follow; the
 * buffers keep their place, each now used for fewer positions. A batch of
 * short sequences then costs what its longest sequence needs, not what the
 * longest sequence of the dataset needs. */
int model_work_reshape(ModelWork *w, const Model *m, int S, int T, Error *err);

#endif
