/* train_report.c - see train_report.h. */
#include "train_report.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "checkpoint.h"

static int report_begin(void *ctx, int64_t done, int64_t total, int64_t per_epoch, Error *err)
{
    TrainReport *r = ctx;
    r->saved_epoch = 0;
    /* A resumed run keeps the log's rows up to its checkpoint. */
    if (r->log_path && csv_log_open(&r->log, r->log_path, done > 0 ? done : -1, err) != 0)
        return -1;
    progress_init(&r->progress, stdout, done, total > done ? total : done + 1,
                  per_epoch / 4 > 0 ? per_epoch / 4 : 1);
    return 0;
}

static int report_step(void *ctx, const StepReport *s, Error *err)
{
    TrainReport *r = ctx;
    if (!r->quiet) progress_update(&r->progress, s->step, s->epoch, s->loss, s->lr, s->tokens);
    if (!r->log_path) return 0;
    double acc = s->val && s->val->count ? (double)s->val->correct / s->val->count : NAN;
    return csv_log_row(&r->log, s->step, s->epoch + 1, s->lr, s->loss,
                       s->val ? s->val->loss : NAN, acc, err);
}

static int report_epoch(void *ctx, const Model *m, const OptimState *opt, const TrainState *state,
                        double train_loss, const StepResult *val, Error *err)
{
    TrainReport *r = ctx;
    if (!r->quiet) {
        progress_finish(&r->progress);
        printf("epoch %" PRId64 "/%d: train loss %.4f, validation loss %.4f, "
               "validation %saccuracy %.2f %%\n", state->epoch, r->epochs, train_loss, val->loss,
               r->one_target ? "" : "token ",
               100.0 * val->correct / (val->count ? val->count : 1));
    }
    if (!r->checkpoint) return 0;
    if (checkpoint_save(r->checkpoint, m, opt, state, r->checkpoint_meta, err) != 0) return -1;
    r->saved_epoch = state->epoch;
    return 0;
}

static int report_end(void *ctx, int ok, Error *err)
{
    TrainReport *r = ctx;
    if (!r->quiet) progress_finish(&r->progress);
    if (!ok && r->checkpoint) {
        size_t used = strlen(err->msg);
        if (r->saved_epoch > 0)
            snprintf(err->msg + used, sizeof err->msg - used,
                     "; %s keeps epoch %" PRId64 ", the last finished", r->checkpoint,
                     r->saved_epoch);
        else
            snprintf(err->msg + used, sizeof err->msg - used, "; this run wrote nothing to %s",
                     r->checkpoint);
    }
    Error close_err;
    if (r->log_path && csv_log_close(&r->log, &close_err) != 0 && ok) {
        *err = close_err;           /* the log's last rows did not reach the disk */
        return -1;
    }
    return 0;
}

const TrainHooks *train_report_hooks(TrainReport *r)
{
    r->hooks = (TrainHooks){r, report_begin, report_step, report_epoch, report_end};
    return &r->hooks;
}
