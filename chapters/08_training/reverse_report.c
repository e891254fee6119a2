/*
 * reverse_report.c - see reverse_report.h.
 */
#include "reverse_report.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "decode.h"
#include "safetensors.h"   /* TextOut */
#include "trainer.h"

/* The decoding options of the seq2seq layout (data.h): <sos>, <eos>, and
 * room for the sequence and its <eos>. */
static DecodeOptions task_decoding(int seq_len)
{
    DecodeOptions d = {0};
    d.sos_id = SEQ2SEQ_SOS;
    d.eos_id = SEQ2SEQ_EOS;
    d.max_new = seq_len + 1;
    d.beam_width = 1;
    return d;
}

/* Greedy decoding of n sources x (digits, shifted past the specials here)
 * into out (n, seq_len + 1). */
static int decode(Model *m, const int64_t *x, int n, int S, int64_t *out, Error *err)
{
    DecodeOptions d = task_decoding(S);
    int64_t *src = malloc((size_t)n * S * sizeof *src);
    if (!src) return error_set(err, "out of memory for greedy decoding");
    for (int64_t i = 0; i < (int64_t)n * S; i++) src[i] = x[i] + SEQ2SEQ_FIRST;
    int rc = decode_greedy(m, src, n, S, &d, out, NULL, err);
    free(src);
    return rc;
}

/* The share of ds whose greedy decoding is exactly the target and <eos>. */
static int greedy_exact_match(Model *m, const SeqDataset *ds, double *exact, Error *err)
{
    enum { CHUNK = 500 };
    int S = ds->seq_len;
    int64_t *out = malloc((size_t)CHUNK * (S + 1) * sizeof *out), right = 0;
    if (!out) return error_set(err, "out of memory for greedy decoding");
    for (int64_t first = 0; first < ds->n; first += CHUNK) {
        int n = (int)(ds->n - first < CHUNK ? ds->n - first : CHUNK);
        if (decode(m, ds->x + first * S, n, S, out, err) != 0) {
            free(out);
            return -1;
        }
        for (int e = 0; e < n; e++) {
            const int64_t *y = ds->y + (first + e) * S, *o = out + (size_t)e * (S + 1);
            int same = o[S] == SEQ2SEQ_EOS;
            for (int t = 0; t < S && same; t++) same = o[t] == y[t] + SEQ2SEQ_FIRST;
            right += same;
        }
    }
    free(out);
    *exact = ds->n ? (double)right / ds->n : 0.0;
    return 0;
}

/* ids as a line; a seq2seq output in its own ids (past the specials), up to
 * and with the <eos> that ends it, a special elsewhere by its name. */
static void print_ids(const char *label, const int64_t *ids, int n, int decoded)
{
    static const char *const specials[] = {"<pad>", "<sos>", "<eos>"};
    printf("  %-11s", label);
    for (int i = 0; i < n; i++) {
        if (!decoded) printf(" %" PRId64, ids[i]);
        else if (ids[i] >= SEQ2SEQ_FIRST) printf(" %" PRId64, ids[i] - SEQ2SEQ_FIRST);
        else printf(" %s", ids[i] >= 0 ? specials[ids[i]] : "?");
        if (decoded && ids[i] == SEQ2SEQ_EOS) break;
    }
    printf("\n");
}

/* The first head of encoder layer 0's self-attention for the last forward
 * on w, as "query key weight" blocks in dir/attention_map.dat. */
static int write_attention(const char *dir, const ModelWork *w, const Model *m,
                           const int64_t *src, Error *err)
{
    char path[4096];
    const float *att = model_attention(w, m, ATTN_ENCODER, 0, 0, 0);
    int S = w->S;
    TextOut out;
    if (text_out_open(&out, err) != 0) return -1;
    fprintf(out.f, "# input:");
    for (int i = 0; i < S; i++) fprintf(out.f, " %" PRId64, src[i]);
    fprintf(out.f, "\n# query key weight (encoder layer 1, head 1 of %d)\n", m->cfg.nhead);
    for (int q = 0; q < S; q++) {
        for (int k = 0; k < S; k++) fprintf(out.f, "%d %d %.6f\n", q, k, att[(size_t)q * S + k]);
        fprintf(out.f, "\n");
    }
    snprintf(path, sizeof path, "%s/attention_map.dat", dir);
    return text_out_commit(&out, path, err);
}

/* A few held-out examples and, for the labeller, the attention map of the
 * first one (in plot_dir, unless NULL). */
static int show_examples(Model *m, const SeqDataset *test, const char *plot_dir, Error *err)
{
    int seq2seq = m->cfg.kind == MODEL_SEQ2SEQ, S = test->seq_len;
    ModelWork w;
    if (model_work_alloc(&w, m, 1, S, seq2seq ? S + 1 : 0, 0, err) != 0) return -1;
    int rc = 0;
    printf("\nheld-out examples:\n");
    for (int e = 0; rc == 0 && e < 3 && e < test->n; e++) {
        const int64_t *x = test->x + (size_t)e * S;
        int64_t pred[256];
        print_ids("input", x, S, 0);
        print_ids("target", test->y + (size_t)e * S, S, 0);
        if (seq2seq) {
            rc = decode(m, x, 1, S, pred, err);
        } else if (model_forward(m, &w, x, NULL, NULL) != 0) {
            rc = error_set(err, "model_forward failed");
        } else {
            for (int t = 0; t < S; t++) {
                const float *row = w.logits + (size_t)t * m->cfg.tgt_vocab;
                int best = 0;
                for (int c = 1; c < m->cfg.tgt_vocab; c++) if (row[c] > row[best]) best = c;
                pred[t] = best;
            }
            if (e == 0 && plot_dir) rc = write_attention(plot_dir, &w, m, x, err);
        }
        if (rc == 0) print_ids("prediction", pred, seq2seq ? S + 1 : S, seq2seq);
        printf("\n");
    }
    model_work_free(&w);
    return rc;
}

int reverse_report(Model *m, const SeqDataset *test, int batch_size, const char *plot_dir,
                   double *accuracy, Error *err)
{
    StepResult res;
    Examples ex = examples_of_task(test, m->cfg.kind);
    if (evaluate(m, NULL, &ex, batch_size, &res, err) != 0) return -1;
    *accuracy = (double)res.correct / (res.count ? res.count : 1);
    printf("\nheld-out: %" PRId64 " sequences, loss %.4f, token accuracy %.2f %%\n", test->n,
           res.loss, 100.0 * *accuracy);
    if (m->cfg.kind == MODEL_SEQ2SEQ) {
        double exact = 0.0;
        if (greedy_exact_match(m, test, &exact, err) != 0) return -1;
        printf("greedy decoding: exact match %.2f %% of %" PRId64 " held-out sequences\n",
               100.0 * exact, test->n);
    }
    return show_examples(m, test, plot_dir, err);
}

