/*
 * sampling.c - see sampling.h for the settings and the rules.
 *
 * The probabilities come from chapter 00's softmax_row. The filters need the
 * ids in rank order, which sort_by_rank (given) makes: a heap sort of the ids
 * by logit, in place in the caller's scratch, O(V log V) and nothing
 * allocated, so that a step of a large vocabulary costs no more than the
 * softmax before it.
 */
#include "sampling.h"

#include <math.h>

#include "error.h"   /* not_implemented(), used by the exercise stubs */
#include "softmax.h"

int sampling_check(const Sampling *s, Error *err)
{
    if (!(s->temperature >= 0.0f && isfinite(s->temperature)))   /* also refuses NaN */
        return error_set(err, "sampling: temperature is %g; it must be 0 (greedy) or a positive "
                         "finite number", s->temperature);
    if (s->top_k < 0)
        return error_set(err, "sampling: top_k is %d; it must be 0 (off) or the number of ids "
                         "to keep", s->top_k);
    if (!(s->top_p > 0.0f && s->top_p <= 1.0f))
        return error_set(err, "sampling: top_p is %g; it must lie in (0, 1] (1: off)", s->top_p);
    return 0;
}

/* Whether id a ranks before id b: the larger logit first, the lower id of
 * equal logits. No two ids tie, so this is a strict order. */
static int ranks_before(const float *logits, int a, int b)
{
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
}

/* Restores the heap below position i of order[0..n): every parent ranks
 * after its children, so the root is the id that ranks last. */
static void sift_down(int *order, const float *logits, int i, int n)
{
    for (;;) {
        int child = 2 * i + 1;
        if (child >= n) return;
        if (child + 1 < n && ranks_before(logits, order[child], order[child + 1])) child++;
        if (!ranks_before(logits, order[i], order[child])) return;
        int swap = order[i];
        order[i] = order[child];
        order[child] = swap;
        i = child;
    }
}

/* order (V,) = the ids 0..V-1 by rank, the most probable first. */
static void sort_by_rank(int *order, const float *logits, int V)
{
    for (int v = 0; v < V; v++) order[v] = v;
    for (int i = V / 2 - 1; i >= 0; i--) sift_down(order, logits, i, V);
    for (int end = V - 1; end > 0; end--) {   /* the last-ranked left goes to the end */
        int swap = order[0];
        order[0] = order[end];
        order[end] = swap;
        sift_down(order, logits, 0, end);
    }
}

int sampling_probs(float *probs, int *order, const float *logits, int V, const Sampling *s,
                   Error *err)
{
    if (sampling_check(s, err) != 0) return -1;
    if (V < 1) return error_set(err, "sampling_probs: V is %d; there must be at least one id", V);
    int finite = 0;
    for (int v = 0; v < V; v++) {
        if (isnan(logits[v]) || logits[v] == INFINITY)
            return error_set(err, "sampling_probs: logit %d is %g; a logit must be finite, or "
                             "-inf for an id never to draw", v, logits[v]);
        finite += isfinite(logits[v]) != 0;
    }
    if (!finite)
        return error_set(err, "sampling_probs: all %d logits are -inf; there is no id to draw", V);
    /* BEGIN SOLUTION */
    if (s->temperature == 0.0f) {                 /* greedy: the first maximum */
        int best = 0;
        for (int v = 1; v < V; v++)
            if (logits[v] > logits[best]) best = v;
        for (int v = 0; v < V; v++) probs[v] = v == best ? 1.0f : 0.0f;
        return 0;
    }
    /* softmax(x / temperature) = softmax((x - m) / temperature) for the
     * largest logit m: the shift comes first, so the division rounds a
     * value no larger than the logits' spread (and a -inf logit stays -inf). */
    float m = -INFINITY;
    for (int v = 0; v < V; v++) m = logits[v] > m ? logits[v] : m;
    for (int v = 0; v < V; v++) probs[v] = (logits[v] - m) / s->temperature;
    if (softmax_row(probs, probs, V) != 0) return -1;

    int kept = s->top_k > 0 && s->top_k < V ? s->top_k : V;   /* the ids top-k keeps */
    if (kept == V && s->top_p >= 1.0f) return 0;              /* nothing to filter */
    sort_by_rank(order, logits, V);
    for (int i = kept; i < V; i++) probs[order[i]] = 0.0f;
    if (s->top_p < 1.0f) {
        /* top_p of what top-k left, without renormalising first: an id is
         * kept while the mass before it is below top_p * mass. */
        double mass = 0.0;
        for (int i = 0; i < kept; i++) mass += probs[order[i]];
        double reach = (double)s->top_p * mass, before = 0.0;
        int i = 0;
        while (i < kept && before < reach) before += probs[order[i++]];
        for (int j = i; j < kept; j++) probs[order[j]] = 0.0f;
        kept = i;
    }
    double sum = 0.0;                             /* > 0: the most probable id is kept */
    for (int i = 0; i < kept; i++) sum += probs[order[i]];
    for (int i = 0; i < kept; i++) probs[order[i]] = (float)(probs[order[i]] / sum);
    return 0;
    /* END SOLUTION */
}

int sampling_pick(const float *probs, int V, double u)
{
    /* BEGIN SOLUTION */
    double sum = 0.0;
    int last = -1;                                /* the last id with probs > 0 */
    for (int v = 0; v < V; v++) {
        if (!(probs[v] > 0.0f)) continue;         /* never drawn */
        last = v;
        sum += probs[v];
        if (sum > u) return v;
    }
    return last;
    /* END SOLUTION */
}
