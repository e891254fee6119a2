/*
 * trainer.h - one training step, evaluation, and the training loop with its
 * resumable checkpoints: the pieces of this chapter (loss.h, optim.h,
 * schedule.h, data.h) joined with chapter 07's model. The step's five lines
 * and PyTorch's, the loop, the checkpoints and the devices are taught in the
 * chapter's README, "One training step, and the loop around it" and after.
 *
 * Letters: N batch, S source and T target length, R rows of logits.
 *
 * The functions that take an Error return 0, or -1 with err set.
 *
 * Read next: runtime/checkpoint.h (what a checkpoint holds), runtime/
 * progress.h (the progress line and the loss log).
 */
#ifndef TRAINER_H
#define TRAINER_H

#include <stdint.h>

#include "data.h"
#include "error.h"
#include "model.h"
#include "optim.h"
#include "rng.h"

/* What one step or one evaluation measured. */
typedef struct {
    double loss;            /* mean cross-entropy over the counted targets */
    int64_t count;          /* targets that are not padding */
    int64_t correct;        /* of those, how many the argmax got right */
    double grad_norm;       /* the total gradient norm before clipping (steps only) */
} StepResult;

/* The work of one step: the model's activations for one batch shape and the
 * gradient of the logits. */
typedef struct {
    ModelWork work;
    float *dlogits;
    int64_t rows;           /* logits rows: N*S (labeller), N*T (seq2seq), N (classifier) */
} StepWork;

int step_work_alloc(StepWork *s, const Model *m, int N, int S, int T, int backward, Error *err);
void step_work_free(StepWork *s);

/* One batch: src (N, S) ids; tgt_in (N, T) the decoder's input (seq2seq,
 * else NULL and T 0); target, the ids to predict: (N, T) seq2seq, (N, S)
 * labeller, (N,) classifier and set model; positions equal to the model's
 * pad_id are ignored. A set model reads features (N, S, input_dim) instead
 * of src (else NULL). */
typedef struct {
    int N, S, T;
    int64_t *src, *tgt_in, *target;
    float *features;
} Batch;

/* How one step changes the weights. */
typedef struct {
    AdamConfig adam;
    float lr;               /* this step's learning rate */
    float max_norm;         /* > 0: clip the gradient norm to it */
    float label_smoothing;
    Rng *dropout_rng;       /* training mode: dropout masks drawn from it (NULL: no dropout) */
} StepConfig;

/* One optimizer step on one batch: zero the gradients, forward, cross_entropy,
 * backward, clip_grad_norm when c->max_norm > 0, adam_step with c->lr. res
 * receives the batch's loss, count, correct and the gradient norm before
 * clipping (NaN without clipping). The exercise stub returns -1. */
int train_step(Model *m, StepWork *s, OptimState *opt, const StepConfig *c, const Batch *b,
               StepResult *res, Error *err);

/* Loss and token accuracy of one batch in evaluation mode (no dropout, no
 * gradients); the counts ADD into res so batches can be summed (res->loss
 * accumulates loss * count). */
int eval_batch(Model *m, StepWork *s, const Batch *b, StepResult *res, Error *err);

/* Given helpers for the data-parallel devices (the MPI build's mpi/dist.c
 * on CPUs, and the GPU step of cuda/train.cu under NCCL):
 *   share_first        the first of rank r's rows of a batch of N split
 *                      among R ranks, N r / R; its rows are [share_first(N,
 *                      r, R), share_first(N, r + 1, R))
 *   batch_share        rank r's rows of b, as a batch of its own that
 *                      points into b's buffers
 *   batch_counted      how many of b's targets the loss counts (all but the
 *                      ignore index)
 *   rank_dropout       rank r's dropout stream, of R: the shared stream itself
 *                      when R is 1 (NULL stays NULL); else drop, seeded by
 *                      two draws of the shared stream, so that it moves on by
 *                      two draws a step on every rank (a checkpoint resumes
 *                      it anywhere) while each rank drops units of its own */
int share_first(int N, int r, int R);
Batch batch_share(const Batch *b, const ModelConfig *c, int r, int R);
int64_t batch_counted(const Batch *b, const Model *m);
Rng *rank_dropout(Rng *drop, Rng *shared, int r, int R);

/* Given helpers for a StepDevice that runs chapter 07's model on this CPU
 * (the MPI build's mpi/dist.c):
 *   batch_trim         cuts b to its longest source and target when the model
 *                      has a pad id (compacting the rows in place: b->S and
 *                      b->T become the new lengths), and reshapes s's work to
 *                      b's lengths (at most those s was allocated for)
 *   step_logit_width   the width of one row of the logits: tgt_vocab, or the
 *                      set size S of a set model
 *   step_ignore_index  the target the loss ignores (the pad id, or none) */
int batch_trim(Batch *b, StepWork *s, const Model *m, Error *err);
int step_logit_width(const Model *m, int S);
int64_t step_ignore_index(const Model *m);

/* A device the steps can run on instead of this CPU alone: the CUDA build's
 * GPU (cuda/gpu.h, gpu_step_device_open), or the MPI build's ranks
 * (mpi/dist.h, dist_step_device_open). It holds its own copy of the
 * parameters and the optimizer state between steps; sync copies them back
 * into the host model and optimizer (before a checkpoint, and at the end).
 * step and eval do what train_step and eval_batch do; eval takes batches of
 * at most the training batch's N sequences. */
typedef struct StepDevice {
    const char *name;       /* for messages: "cuda" */
    size_t bytes;           /* the device memory it holds (make bench prints it) */
    void *ctx;
    int (*step)(void *ctx, const StepConfig *c, const Batch *b, StepResult *res, Error *err);
    int (*eval)(void *ctx, const Batch *b, StepResult *res, Error *err);
    int (*sync)(void *ctx, Model *m, OptimState *opt, Error *err);
    void (*close)(void *ctx);
} StepDevice;

/* One optimizer step on device d, or with train_step on this CPU (d NULL,
 * s the CPU work). A device keeps its own step count; opt->step is counted
 * here too, so the schedule and the logs read the same on both. */
int step_on(StepDevice *d, Model *m, StepWork *s, OptimState *opt, const StepConfig *c,
            const Batch *b, StepResult *res, Error *err);

/* What opens a StepDevice for model m and optimizer state opt (copying both
 * to the device), for training batches of N sequences of S source (and T
 * target) tokens: gpu_step_device_open in the CUDA build. */
typedef int (*StepDeviceOpen)(StepDevice *d, const Model *m, const OptimState *opt, int N,
                              int S, int T, Error *err);

/* Where a run stands: what a checkpoint holds besides the model. */
typedef struct {
    int64_t epoch;          /* epochs finished */
    Rng data_rng;           /* shuffling */
    Rng dropout_rng;        /* dropout masks */
} TrainState;

/* ------------------------------------------------------------------------ */
/* The training loop                                                         */
/* ------------------------------------------------------------------------ */

typedef enum { SCHEDULE_CONSTANT, SCHEDULE_COSINE, SCHEDULE_NOAM } Schedule;

/* "cosine", "noam" or "constant" (--schedule); anything else is an error
 * naming the three. */
int schedule_parse(const char *name, Schedule *schedule, Error *err);

/* How to train. */
typedef struct {
    int epochs, batch_size;
    AdamConfig adam;            /* adam.lr is the base learning rate */
    Schedule schedule;
    int warmup;                 /* warm-up steps (or epochs, with per_epoch) */
    int per_epoch;              /* 1: the schedule counts epochs, not steps (seed 000 did) */
    float max_norm;             /* > 0: clip the gradient norm to it */
    float label_smoothing;
    const struct TrainHooks *hooks;  /* NULL, or what reports and saves the run */
    int stop_after;             /* > 0: return after this epoch, as an interrupted run
                                   would (its checkpoint written); the schedule still
                                   spans all `epochs` */
    StepDevice *device;         /* NULL: train on this CPU; else on this device (the
                                   model and opt are synced back before each checkpoint
                                   and at the end) */
    int validate_every;         /* > 0: also validate (and log it) every this many steps,
                                   besides at the end of each epoch */
    int bucket;                 /* > 0 (and Examples.length): every epoch's shuffled order
                                   is cut into runs of `bucket` batches, each run sorted by
                                   length and its batches visited in random order */
} TrainOptions;

/* One step as train_run reports it. */
typedef struct {
    int64_t step;               /* optimizer steps done, this one included */
    int64_t epoch;              /* 0-based */
    double loss, lr;
    int64_t tokens;             /* positions of the batch, both sides */
    const StepResult *val;      /* a validation made right after this step, or NULL */
} StepReport;

/* What the product adds around the loop, filled in by the program that
 * trains (runtime/train_report.c: a progress line, the CSV loss log,
 * checkpoints); the loop itself only calls them. Any hook may be NULL; one
 * that fails stops the run with its error.
 *   begin  before the first step: the steps done so far (a resumed run's),
 *          the run's total and one epoch's
 *   step   after every step
 *   epoch  after every epoch, the model and optimizer synced from the
 *          device: the epoch's mean training loss and its validation
 *   end    once, last: ok 1, the run succeeded (the hook sets err if it
 *          fails itself); ok 0, err says why the run stopped, and the hook
 *          may add to it */
typedef struct TrainHooks {
    void *ctx;
    int (*begin)(void *ctx, int64_t done, int64_t total, int64_t per_epoch, Error *err);
    int (*step)(void *ctx, const StepReport *r, Error *err);
    int (*epoch)(void *ctx, const Model *m, const OptimState *opt, const TrainState *state,
                 double train_loss, const StepResult *val, Error *err);
    int (*end)(void *ctx, int ok, Error *err);
} TrainHooks;

/* What train_run and evaluate read: n examples of fixed shape, cut into
 * batches by fill. One interface for every dataset: the synthetic tasks of
 * data.h (examples_of_task), chapter 09's pairs read from a file and
 * chapter 10's labelled reviews.
 *   S          source ids per example
 *   T          decoder positions per example (seq2seq), 0 for the labeller and
 *              the classifier
 *   one_target 1: one target per example (the classifier's class), 0: one per
 *              position
 *   src_vocab, tgt_vocab   the ids the examples use: a model must have these
 *   longest    the most positions either side takes (a model's max_len must reach it)
 *   fill       writes examples idx[0..N) as src (N, S), tgt_in (N, T) and
 *              target (N, T) seq2seq, (N, S) labeller or (N,) classifier
 *              (tgt_in unused but by seq2seq)
 *   length     the tokens of example i (both sides), for length bucketing
 *              (TrainOptions.bucket); NULL where every example is as long
 *   input_dim  > 0 for sets (chapter 11): every example is S elements of
 *              input_dim features, which fill_features writes as (N, S,
 *              input_dim) floats for a set model; fill then writes the
 *              target (N,), the position of the element to find, and in src
 *              whatever ids name the elements (src_vocab 0: none are checked);
 *              tgt_vocab is 1, one score per element */
typedef struct {
    int64_t n;
    int S, T;
    int one_target;
    int src_vocab, tgt_vocab, longest;
    const void *data;
    int (*fill)(const void *data, const int64_t *idx, int N, int64_t *src, int64_t *tgt_in,
                int64_t *target, Error *err);
    int (*length)(const void *data, int64_t i);
    int input_dim;
    int (*fill_features)(const void *data, const int64_t *idx, int N, float *features,
                         Error *err);
} Examples;

/* The examples of a synthetic task for a model of this kind: batch_seq2seq
 * (seq2seq) or batch_encoder (labeller) on ds, which must outlive them. */
Examples examples_of_task(const SeqDataset *ds, ModelKind kind);

/* The learning rate of optimizer step `step` (0-based) in epoch `epoch`
 * (0-based): o->adam.lr times o->schedule's factor at step, or at epoch with
 * o->per_epoch; the cosine schedule ends at steps_per_epoch * o->epochs. */
double train_lr(const TrainOptions *o, const Model *m, int64_t step, int64_t epoch,
                int64_t steps_per_epoch);

/* What train_run refuses before it writes anything, for a caller to ask
 * before it opens files of its own: a model that does not fit the
 * examples, a batch larger than the training set, a negative bucket. */
int train_check(const Model *m, const TrainOptions *o, const Examples *train,
                const Examples *val, Error *err);

/* Trains m on `train` from where state and opt stand (epoch 0 and a fresh
 * optimizer, or what checkpoint_load read) to o->epochs, validating on
 * `val` after every epoch (res_val: the last validation). Full batches only
 * (the last partial one is dropped); with a pad_id, each batch on the CPU is
 * cut to its longest sequence on either side. A loss or validation loss
 * that is not finite stops the run (-1) before the next checkpoint. */
int train_run(Model *m, OptimState *opt, TrainState *state, const TrainOptions *o,
              const Examples *train, const Examples *val, StepResult *res_val, Error *err);

/* Loss and token accuracy of m over a whole dataset (evaluation mode), on
 * the CPU, or on device (NULL: the CPU) with its copy of the parameters. */
int evaluate(Model *m, StepDevice *device, const Examples *ds, int batch_size,
             StepResult *res, Error *err);

#endif
