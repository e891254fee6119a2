/*
 * dist.c - see dist.h.
 *
 * Letters: R ranks, r this rank; P parameters; N rows of the global batch,
 * N_r = rows of rank r's share; L_r = parameters of rank r's slice.
 *
 * Every MPI call runs under MPI's default error handler, which stops the
 * whole job on a failure (a rank that died included): none returns an
 * error to check.
 */
#include "dist.h"

#include <inttypes.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "loss.h"
#include "model_work.h"
#include "threads.h"

typedef struct {
    Model *m;               /* the host model: the ranks compute on this CPU */
    int rank, ranks;
    int S, T;               /* the training batch's lengths */
    StepWork train;         /* for this rank's share of a training batch */
    StepWork eval;          /* for a share of another size (the last eval batch) */
    int *counts, *displs;   /* (R,): every rank's slice of the parameters */
    int *recv_counts, *recv_displs;   /* (R,): L_r from every rank, rank after rank */
    float *recv;            /* (R, L_r): every rank's gradient of this rank's slice */
    OptimState opt;         /* the optimizer's slots of this rank's slice (L_r,) each */
    double timeout;         /* seconds a rank waits for the others (--mpi-timeout) */
    double longest;         /* the longest step so far, seconds */
} Dist;

int dist_ranks(int *rank)
{
    int started, size;
    MPI_Initialized(&started);
    if (!started) {
        int provided;       /* OpenMP threads run inside a step, MPI calls outside */
        MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    return size;
}

/* A collective that does not complete. MPI's blocking collectives wait for
 * ever: a rank stopped (SIGSTOP, a debugger) or lost leaves the others
 * waiting, saying nothing. So every collective here is started without
 * blocking (MPI_Iallgather, ...) and waited for by wait_done, which tests
 * it, spinning for the first 10 ms as a blocking one would, then every
 * millisecond, and answers other ranks' pings meanwhile. After `limit`
 * seconds it pings every rank, and ends the job with a line naming those
 * that do not answer within 2 s (or, if all answer, saying so). */
enum { PING = 4242, PONG = 4243 };

static void answer_pings(void)
{
    for (;;) {
        int flag, x;
        MPI_Status st;
        MPI_Iprobe(MPI_ANY_SOURCE, PING, MPI_COMM_WORLD, &flag, &st);
        if (!flag) return;
        MPI_Recv(&x, 1, MPI_INT, st.MPI_SOURCE, PING, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(&x, 1, MPI_INT, st.MPI_SOURCE, PONG, MPI_COMM_WORLD);
    }
}

static void sleep_ms(void)
{
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
}

static _Noreturn void end_job(int rank, int R, double limit, const char *what)
{
    MPI_Request *req = malloc((size_t)2 * R * sizeof *req);
    int *got = calloc((size_t)R, sizeof *got), ping = 1;
    char missing[256] = "";
    size_t at = 0;
    if (req && got) {
        for (int q = 0; q < R; q++) {
            req[q] = req[R + q] = MPI_REQUEST_NULL;
            if (q == rank) continue;
            MPI_Irecv(&got[q], 1, MPI_INT, q, PONG, MPI_COMM_WORLD, &req[q]);
            MPI_Isend(&ping, 1, MPI_INT, q, PING, MPI_COMM_WORLD, &req[R + q]);
        }
        for (double start = time_now(); time_now() - start < 2.0; sleep_ms()) {
            int all;
            MPI_Testall(R, req, &all, MPI_STATUSES_IGNORE);
            if (all) break;
            answer_pings();
        }
        for (int q = 0; q < R && at < sizeof missing - 16; q++) {
            int done;
            MPI_Test(&req[q], &done, MPI_STATUS_IGNORE);
            if (!done)
                at += (size_t)snprintf(missing + at, sizeof missing - at, "%s%d", at ? ", " : "", q);
        }
    }
    if (at)
        fprintf(stderr, "\nrank %d: waited %.0f s for the other ranks at %s; rank(s) %s do not "
                "answer (stopped, or gone?): ending the job (--mpi-timeout)\n", rank, limit,
                what, missing);
    else
        fprintf(stderr, "\nrank %d: waited %.0f s for the other ranks at %s, though every rank "
                "answers: ending the job (--mpi-timeout)\n", rank, limit, what);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);                                     /* MPI_Abort does not return */
}

static void wait_done(MPI_Request *req, int n, int rank, int R, double limit, const char *what)
{
    double start = time_now();
    for (;;) {
        int done;
        MPI_Testall(n, req, &done, MPI_STATUSES_IGNORE);
        if (done) return;
        answer_pings();
        double waited = time_now() - start;
        if (waited > limit) end_job(rank, R, limit, what);
        if (waited > 0.01) sleep_ms();
    }
}

/* The limit of wait_done in training: --mpi-timeout, or 50 times the
 * longest step so far if that is longer (a slow machine is not a stopped one). */
static double step_limit(const Dist *d)
{
    return d->timeout > 50.0 * d->longest ? d->timeout : 50.0 * d->longest;
}

static void wait_in_step(const Dist *d, MPI_Request *req, int n, const char *what)
{
    wait_done(req, n, d->rank, d->ranks, step_limit(d), what);
}

int dist_agree(uint64_t hash, double timeout, Error *err)
{
    int rank, ranks = dist_ranks(&rank);
    uint64_t first = hash;
    if (ranks == 1) return 0;
    MPI_Request req;
    MPI_Ibcast(&first, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD, &req);
    wait_done(&req, 1, rank, ranks, timeout, "the start (the check of options and data)");
    if (first != hash)
        return error_set(err, "rank %d of %d was started with other options or data than "
                         "rank 0 (hash %016" PRIx64 ", rank 0 has %016" PRIx64 "): every "
                         "rank needs the same command line and the same files",
                         rank, ranks, hash, first);
    return 0;
}

void dist_finish(int failed)
{
    int started, finished, ranks;
    MPI_Initialized(&started);
    MPI_Finalized(&finished);
    if (!started || finished) return;
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    if (failed && ranks > 1) MPI_Abort(MPI_COMM_WORLD, 1);
    MPI_Finalize();
}

/* The work for a share of n rows: the training work, or the eval work
 * made (again) for n. */
static StepWork *work_for(Dist *d, int n, Error *err)
{
    if (n == d->train.work.N) return &d->train;
    if (d->eval.work.N != n) {
        step_work_free(&d->eval);
        if (step_work_alloc(&d->eval, d->m, n, d->S, d->T, 0, err) != 0) return NULL;
    }
    return &d->eval;
}

/* This rank's share of b, in s's work, cut to its longest sequences. */
static int prepare_share(Dist *d, const Batch *b, Batch *share, StepWork **s, Error *err)
{
    *share = batch_share(b, &d->m->cfg, d->rank, d->ranks);
    if (share->N == 0) return 0;
    if (b->S > d->S || b->T > d->T)
        return error_set(err, "--device mpi: a batch of lengths %d, %d is longer than the "
                         "training batch's %d, %d", b->S, b->T, d->S, d->T);
    if (!(*s = work_for(d, share->N, err))) return -1;
    (*s)->work.features = share->features;
    return batch_trim(share, *s, d->m, err);
}

/* Sums (R, n) rows of x in rank order into out (n,). */
static void sum_in_rank_order(float *out, const float *x, int R, int64_t n)
{
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        float sum = x[i];
        for (int r = 1; r < R; r++) sum += x[(int64_t)r * n + i];
        out[i] = sum;
    }
}

/* (loss * count, count, correct) of every rank, summed in rank order;
 * limit and what as wait_done's (limit 0: wait as long as it takes). */
static void sum_counts(const double mine[3], double total[3], int rank, int R, double limit,
                       const char *what)
{
    double *all = malloc((size_t)R * 3 * sizeof *all);          /* (R, 3) */
    if (!all) MPI_Abort(MPI_COMM_WORLD, 1);     /* a rank alone cannot leave the collective */
    MPI_Request req;
    MPI_Iallgather(mine, 3, MPI_DOUBLE, all, 3, MPI_DOUBLE, MPI_COMM_WORLD, &req);
    if (limit > 0)
        wait_done(&req, 1, rank, R, limit, what);
    else
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    total[0] = total[1] = total[2] = 0.0;
    for (int r = 0; r < R; r++)
        for (int k = 0; k < 3; k++) total[k] += all[3 * r + k];
    free(all);
}

void dist_sum_counts(const double mine[3], double total[3], int R)
{
    sum_counts(mine, total, 0, R, 0.0, NULL);
}

static int dist_step(void *ctx, const StepConfig *c, const Batch *b, StepResult *res, Error *err)
{
    Dist *d = ctx;
    Model *m = d->m;
    const int R = d->ranks, r = d->rank;
    const int64_t lo = d->displs[r], len = d->counts[r];
    StepWork *s = NULL;
    Batch share;
    float loss = 0.0f;
    int64_t count = 0, correct = 0;
    memset(res, 0, sizeof *res);
    threads_adapt();
    double started = time_now();
    char what[64];
    snprintf(what, sizeof what, "step %" PRId64, d->opt.step + 1);

    /* Dropout: each rank draws its masks from a stream of its own. */
    Rng drop, *dropout = rank_dropout(&drop, c->dropout_rng, r, R);
    model_zero_grad(m);
    if (prepare_share(d, b, &share, &s, err) != 0) return -1;
    if (share.N > 0) {
        if (model_forward(m, &s->work, share.src, share.tgt_in, dropout) != 0)
            return error_set(err, "model_forward failed");
        if (cross_entropy(&loss, s->dlogits, s->work.logits, share.target, s->rows,
                          step_logit_width(m, s->work.S), step_ignore_index(m),
                          c->label_smoothing, &count, &correct, err) != 0)
            return -1;
        if (count > 0 && model_backward(m, &s->work, s->dlogits) != 0)
            return error_set(err, "model_backward failed");
    }

    /* The loss is the mean over all counted targets: rank r's gradient
     * (of its own mean) counts count_r / count of the whole. */
    double mine[3] = {count > 0 ? (double)loss * count : 0.0, (double)count, (double)correct};
    double total[3];
    sum_counts(mine, total, r, R, step_limit(d), what);
    const float weight = total[1] > 0 ? (float)(count / total[1]) : 0.0f;
    if (count > 0) {
        #pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < (int64_t)m->num_params; i++) m->grads[i] *= weight;
    }

    /* Reduce-scatter in a fixed order: rank q receives every rank's slice q
     * of the gradient, (R, L_q), and sums them rank after rank. */
    MPI_Request req;
    MPI_Ialltoallv(m->grads, d->counts, d->displs, MPI_FLOAT, d->recv, d->recv_counts,
                   d->recv_displs, MPI_FLOAT, MPI_COMM_WORLD, &req);
    wait_in_step(d, &req, 1, what);
    float *g = m->grads + lo;                                        /* (L_r,) */
    sum_in_rank_order(g, d->recv, R, len);

    /* The global norm: the slices' squared sums, summed in rank order. */
    double sq = 0.0, *all_sq = malloc((size_t)R * sizeof *all_sq);
    if (!all_sq) return error_set(err, "out of memory for %d norms", R);
    for (int64_t i = 0; i < len; i++) sq += (double)g[i] * g[i];
    MPI_Iallgather(&sq, 1, MPI_DOUBLE, all_sq, 1, MPI_DOUBLE, MPI_COMM_WORLD, &req);
    wait_in_step(d, &req, 1, what);
    sq = 0.0;
    for (int q = 0; q < R; q++) sq += all_sq[q];
    free(all_sq);
    double norm = sqrt(sq);
    if (c->max_norm > 0) {
        double coef = (double)c->max_norm / (norm + 1e-6);   /* as clip_grad_norm */
        if (coef < 1.0)
            for (int64_t i = 0; i < len; i++) g[i] *= (float)coef;
    }

    /* Adam on this rank's slice, then every slice to every rank. */
    if (len > 0 && adam_step(m->params + lo, g, &d->opt, &c->adam, c->lr) != 0)
        return error_set(err, "adam_step failed");
    if (len == 0) d->opt.step++;
    MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, m->params, d->counts, d->displs,
                    MPI_FLOAT, MPI_COMM_WORLD, &req);
    wait_in_step(d, &req, 1, what);

    res->loss = total[1] > 0 ? total[0] / total[1] : NAN;
    res->count = (int64_t)total[1];
    res->correct = (int64_t)total[2];
    res->grad_norm = c->max_norm > 0 ? norm : NAN;
    double took = time_now() - started;
    if (took > d->longest) d->longest = took;
    return 0;
}

static int dist_eval(void *ctx, const Batch *b, StepResult *res, Error *err)
{
    Dist *d = ctx;
    StepWork *s = NULL;
    Batch share;
    StepResult mine = {0};
    threads_adapt();
    if (prepare_share(d, b, &share, &s, err) != 0) return -1;
    if (share.N > 0 && eval_batch(d->m, s, &share, &mine, err) != 0) return -1;
    double x[3] = {mine.loss, (double)mine.count, (double)mine.correct}, total[3];
    sum_counts(x, total, d->rank, d->ranks, step_limit(d), "an evaluation batch");
    res->loss += total[0];
    res->count += (int64_t)total[1];
    res->correct += (int64_t)total[2];
    return 0;
}

/* The parameters are the host model's already; the moments come together
 * in rank 0's opt (the rank that writes checkpoints). */
static int dist_sync(void *ctx, Model *m, OptimState *opt, Error *err)
{
    Dist *d = ctx;
    (void)m, (void)err;
    MPI_Request req[OPTIM_MAX_SLOTS];
    for (int i = 0; i < d->opt.n_slots; i++)
        MPI_Igatherv(d->opt.slots[i], d->counts[d->rank], MPI_FLOAT, opt->slots[i], d->counts,
                     d->displs, MPI_FLOAT, 0, MPI_COMM_WORLD, &req[i]);
    wait_in_step(d, req, d->opt.n_slots, "a checkpoint");
    return 0;
}

static void dist_close(void *ctx)
{
    Dist *d = ctx;
    if (!d) return;
    step_work_free(&d->train);
    step_work_free(&d->eval);
    free(d->counts), free(d->displs), free(d->recv_counts), free(d->recv_displs);
    free(d->recv);
    optim_state_free(&d->opt);
    free(d);
}

int dist_step_device_open(StepDevice *d, const Model *m, const OptimState *opt, int N, int S,
                          int T, double timeout, Error *err)
{
    int rank, R = dist_ranks(&rank);
    memset(d, 0, sizeof *d);
    if (N < R)
        return error_set(err, "--batch-size %d is smaller than the %d MPI ranks: every rank "
                         "needs at least one sequence of each batch", N, R);
    if (m->num_params > (size_t)INT32_MAX)
        return error_set(err, "--device mpi: %zu parameters are more than MPI's int counts "
                         "reach", m->num_params);
    Dist *t = calloc(1, sizeof *t);
    if (!t) return error_set(err, "out of memory for the MPI device");
    t->m = (Model *)m;      /* the ranks compute on the host model itself */
    t->rank = rank, t->ranks = R, t->S = S, t->T = T, t->timeout = timeout;
    t->counts = malloc((size_t)R * sizeof *t->counts);
    t->displs = malloc((size_t)R * sizeof *t->displs);
    t->recv_counts = malloc((size_t)R * sizeof *t->recv_counts);
    t->recv_displs = malloc((size_t)R * sizeof *t->recv_displs);
    if (!t->counts || !t->displs || !t->recv_counts || !t->recv_displs) {
        dist_close(t);
        return error_set(err, "out of memory for the MPI device");
    }
    for (int q = 0; q < R; q++) {
        int64_t begin = (int64_t)m->num_params * q / R;
        t->displs[q] = (int)begin;
        t->counts[q] = (int)((int64_t)m->num_params * (q + 1) / R - begin);
    }
    int64_t len = t->counts[rank];
    for (int q = 0; q < R; q++) {
        t->recv_counts[q] = (int)len;
        t->recv_displs[q] = (int)(q * len);
    }
    t->recv = malloc((size_t)(R * len > 0 ? R * len : 1) * sizeof *t->recv);
    int rows = share_first(N, rank + 1, R) - share_first(N, rank, R);
    if (!t->recv ||
        optim_state_alloc(&t->opt, (size_t)(len ? len : 1), opt->n_slots, opt->slot_names,
                          err) != 0 ||
        step_work_alloc(&t->train, m, rows, S, T, 1, err) != 0) {
        if (!t->recv) error_set(err, "out of memory for %d gradient slices", R);
        dist_close(t);
        return -1;
    }
    t->opt.n = (size_t)len;
    for (int i = 0; i < opt->n_slots; i++)
        memcpy(t->opt.slots[i], opt->slots[i] + t->displs[rank], (size_t)len * sizeof(float));
    t->opt.step = opt->step;
    d->name = "mpi";
    d->bytes = (size_t)(2 + R) * len * sizeof(float);
    d->ctx = t;
    d->step = dist_step;
    d->eval = dist_eval;
    d->sync = dist_sync;
    d->close = dist_close;
    return 0;
}
