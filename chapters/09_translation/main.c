/*
 * main.c - the chapter 09 program: seed 002's Taylor-series translation,
 * or any file of source|target pairs.
 *
 *     build/09_translation --train [options]        train (--train --help lists the options)
 *     build/09_translation --eval MODEL [options]   exact match on the test split
 *     build/09_translation --translate MODEL TEXT   translate one source
 *     build/09_translation --demo                   the shipped model on a few test pairs
 *     build/09_translation --bench-decode MODEL [N] greedy decoding of N sources to the full
 *                                                   target length, with and without the cache
 *     build/09_translation --plot-data DIR          the shipped model's training logs and a
 *                                                   cross-attention map, for make plots
 *
 * The defaults are the Taylor task: reference/data/taylor's pairs, the
 * Taylor tokenizers of chapter 01, the seed's limits and split, and the
 * seed's model (d_model 64, 2 + 2 layers, 8 heads, FFN 128, dropout 0.1,
 * learned positions, a learned embedding scale).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "decode.h"
#include "model.h"
#include "optim.h"
#include "pairs.h"
#include "rng.h"
#include "safetensors.h"   /* file_write_atomic, TextOut */
#include "sequence.h"
#include "text.h"
#include "train_util.h"
#include "trainer.h"
#include "translate.h"

#define SHIPPED_MODEL "models/taylor.safetensors"

static const char USAGE[] =
    "usage: 09_translation --train [options]        (--train --help lists the options)\n"
    "       09_translation --eval MODEL [options]   (--eval --help lists the options)\n"
    "       09_translation --translate MODEL TEXT [--beam K]\n"
    "       09_translation --bench-decode MODEL [N]\n"
    "       09_translation --plot-data DIR\n"
    "       09_translation --demo\n";

/* Everything the commands read; the defaults are seed 002 with this
 * chapter's training recipe (see the README for what differs). */
typedef struct {
    TaskData data;
    int epochs, batch_size, warmup, seed, eval_every, beam, bucket;
    int d_model, heads, layers, ffn;
    double lr, clip, label_smoothing, dropout, length_penalty, target_loss, min_exact;
    const char *schedule, *checkpoint, *resume, *out, *log, *device;
    int help;
} Args;

static Args defaults(void)
{
    Args a = {0};
    a.data = task_defaults();
    a.epochs = 1164;
    a.batch_size = 32;
    a.lr = 1e-3;
    a.schedule = "cosine";
    a.warmup = 1000;
    a.eval_every = 5;
    a.bucket = 50;
    a.beam = 1;
    a.length_penalty = 1.0;
    a.d_model = 64;
    a.heads = 8;
    a.layers = 2;
    a.ffn = 128;
    a.dropout = 0.1;
    a.device = "cpu";
    return a;
}

#define DATA_OPTIONS(a)                                                                   \
    {"--data", OPT_STRING, &(a).data.data, "the file of source|target lines (default: "   \
     "the Taylor pairs)"},                                                                \
    {"--tokenizer", OPT_STRING, &(a).data.tokenizer,                                      \
     "taylor, char, word or bpe (default taylor)"},                                       \
    {"--vocab-size", OPT_INT, &(a).data.vocab_size, "bpe: ids per side (default 500)"},   \
    {"--max-src", OPT_INT, &(a).data.max_src, "skip pairs with more source tokens (default 20)"}, \
    {"--max-tgt", OPT_INT, &(a).data.max_tgt, "skip pairs with more target tokens (default 83)"}, \
    {"--train-size", OPT_INT, &(a).data.train_size, "the first pairs train (default 11000)"}, \
    {"--val-size", OPT_INT, &(a).data.val_size,                                           \
     "the next ones validate (default 100); the rest is the test"}

#define TRAIN_OPTIONS(a) {                                                                \
    DATA_OPTIONS(a),                                                                      \
    {"--epochs", OPT_INT, &(a).epochs, "epochs (default 1164)"},                          \
    {"--batch-size", OPT_INT, &(a).batch_size, "pairs per step (default 32)"},            \
    {"--bucket", OPT_INT, &(a).bucket,                                                    \
     "sort runs of this many batches by length (default 50; 0: plain shuffling)"},        \
    {"--lr", OPT_DOUBLE, &(a).lr, "peak learning rate of Adam (default 1e-3)"},           \
    {"--schedule", OPT_STRING, &(a).schedule, "cosine, noam or constant (default cosine)"}, \
    {"--warmup", OPT_INT, &(a).warmup, "warm-up steps (default 1000)"},                   \
    {"--clip", OPT_DOUBLE, &(a).clip, "clip the gradient norm to this (default 0: off)"}, \
    {"--label-smoothing", OPT_DOUBLE, &(a).label_smoothing, "default 0"},                 \
    {"--d-model", OPT_INT, &(a).d_model, "default 64"},                                   \
    {"--heads", OPT_INT, &(a).heads, "default 8"},                                        \
    {"--layers", OPT_INT, &(a).layers, "encoder and decoder layers (default 2)"},         \
    {"--ffn", OPT_INT, &(a).ffn, "feed-forward width (default 128)"},                     \
    {"--dropout", OPT_DOUBLE, &(a).dropout, "every dropout, attention weights too (default 0.1)"}, \
    {"--seed", OPT_INT, &(a).seed, "seed of weights, shuffling and dropout (default 0)"}, \
    {"--eval-every", OPT_INT, &(a).eval_every,                                            \
     "greedy exact match on the validation pairs every this many epochs (default 5)"},    \
    {"--checkpoint", OPT_STRING, &(a).checkpoint, "write a checkpoint here after every epoch"}, \
    {"--resume", OPT_STRING, &(a).resume, "continue the run saved in this checkpoint"},   \
    {"--out", OPT_STRING, &(a).out, "save the trained model here (no optimizer state)"},  \
    {"--log", OPT_STRING, &(a).log, "the CSV loss log; FILE.exact.csv gets the exact match"}, \
    {"--device", OPT_STRING, &(a).device,                                                 \
     "cpu, or cuda: train on the GPU (build/cuda/09_translation; default cpu)"},          \
    {"--target-loss", OPT_DOUBLE, &(a).target_loss,                                       \
     "exit 1 if the validation loss ends above this"},                                    \
    {"--help", OPT_FLAG, &(a).help, "this list"},                                         \
}

#define EVAL_OPTIONS(a) {                                                                 \
    DATA_OPTIONS(a),                                                                      \
    {"--beam", OPT_INT, &(a).beam, "beam width (default 1: greedy; 0: greedy and beam 4)"}, \
    {"--length-penalty", OPT_DOUBLE, &(a).length_penalty, "beam search's alpha (default 1)"}, \
    {"--min-exact", OPT_DOUBLE, &(a).min_exact, "exit 1 if greedy exact match is below this"}, \
    {"--help", OPT_FLAG, &(a).help, "this list"},                                         \
}

/* ------------------------------------------------------------------------ */
/* Reports                                                                   */
/* ------------------------------------------------------------------------ */

/* Exact match on ds (greedy or beam) and, with `table`, the kinds of miss. */
static int report_exact(Model *m, const Task *t, const PairDataset *ds, const char *name,
                        int beam, double length_penalty, int table, double *exact, Error *err)
{
    DecodeOptions d = task_decoding(ds, beam, (float)length_penalty);
    int64_t right, miss[MISS_KINDS] = {0};
    int64_t *out = malloc((size_t)ds->n * d.max_new * sizeof *out);
    if (!out) return error_set(err, "out of memory for %" PRId64 " translations", ds->n);
    double started = time_now();
    if (exact_match(m, ds, &d, &right, out, err) != 0) {
        free(out);
        return -1;
    }
    *exact = (double)right / ds->n;
    printf("%s: exact match %.4f (%" PRId64 " of %" PRId64 "), %s, %.1f s\n", name, *exact,
           right, ds->n, beam > 1 ? "beam search" : "greedy", time_now() - started);
    if (table && right < ds->n) {
        for (int64_t e = 0; e < ds->n; e++) {
            const int64_t *o = out + e * d.max_new, *tgt = ds->tgt + e * (ds->T + 1);
            if (!is_exact(o, d.max_new, tgt))
                miss[miss_kind(o, d.max_new, tgt, tokenizer_vocab(&t->tgt_tok))]++;
        }
        printf("  where the %" PRId64 " wrong ones first depart from the target:\n",
               ds->n - right);
        for (int k = 0; k < MISS_KINDS; k++)
            if (miss[k]) printf("    %-28s %4" PRId64 "\n", MISS_NAMES[k], miss[k]);
    }
    free(out);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* --train                                                                   */
/* ------------------------------------------------------------------------ */

static ModelConfig model_config(const Args *a, const Task *t)
{
    ModelConfig c = {0};
    c.kind = MODEL_SEQ2SEQ;
    c.src_vocab = tokenizer_vocab(&t->src_tok)->size;
    c.tgt_vocab = tokenizer_vocab(&t->tgt_tok)->size;
    c.d_model = a->d_model;
    c.nhead = a->heads;
    c.dim_feedforward = a->ffn;
    c.num_encoder_layers = a->layers;
    c.num_decoder_layers = a->layers;
    c.max_len = t->train.S > t->train.T ? t->train.S : t->train.T;
    c.learned_pos = 1;          /* seed 002: nn.Embedding(max_len, emb_dim) */
    c.scale_embedding = 2;      /* and a learned scale that starts at sqrt(d_model) */
    c.final_norm = 0;           /* no LayerNorm after either stack */
    c.pad_id = TOKEN_PAD;
    c.eps = 1e-5f;
    c.dropout = (float)a->dropout;
    return c;
}

/* The exact-match log: "step,epoch,val_exact" rows. A resumed run keeps the
 * rows up to its checkpoint's step and drops the rest; what is kept (or the
 * header of a new log) is written whole, then rows are appended. */
static FILE *exact_log_open(const char *path, int64_t keep_through, Error *err)
{
    char line[128];
    Text kept = {0};
    FILE *f = keep_through >= 0 ? fopen(path, "r") : NULL;
    if (f) {
        while (fgets(line, sizeof line, f))
            if (strncmp(line, "step", 4) == 0 || strtoll(line, NULL, 10) <= keep_through)
                text_append(&kept, line, strlen(line), err);
        fclose(f);
    }
    const char *header = "step,epoch,val_exact\n";
    FilePart part = kept.len ? (FilePart){kept.data, kept.len}
                             : (FilePart){header, strlen(header)};
    int rc = file_write_atomic(path, &part, 1, err);
    text_free(&kept);
    if (rc != 0) return NULL;
    f = fopen(path, "a");
    if (!f) error_set(err, "cannot append to the exact-match log %s: %s", path, strerror(errno));
    return f;
}

static int run_train(const Args *a, Error *err)
{
    Task t;
    Model m = {0};
    AdamState opt = {0};
    TrainState state = {0};
    StepDevice device = {0};
    StepResult val;
    FILE *exact_log = NULL;
    char exact_path[4096];
    Rng rng;
    int rc = -1;

    TrainOptions o = {0};
    o.batch_size = a->batch_size;
    o.adam = adam_default_config(0);
    o.adam.lr = (float)a->lr;
    if (schedule_parse(a->schedule, &o.schedule, err) != 0) return -1;
    if (a->epochs < 1 || a->batch_size < 1 || a->eval_every < 1 || a->warmup < 0 ||
        a->seed < 0 || a->bucket < 0)
        return error_set(err, "--epochs, --batch-size and --eval-every need at least 1, "
                              "--warmup, --bucket and --seed at least 0");
    if (!(a->lr >= 0) || !(a->clip >= 0) || !(a->label_smoothing >= 0 && a->label_smoothing <= 1))
        return error_set(err, "--lr and --clip must not be negative, --label-smoothing lies "
                              "in [0, 1]");
    o.warmup = a->warmup;
    o.bucket = a->bucket;
    o.max_norm = (float)a->clip;
    o.label_smoothing = (float)a->label_smoothing;
    o.checkpoint = a->checkpoint;
    o.log_path = a->log;
    if (adam_config_check(&o.adam, err) != 0 || command_check_device(a->device, err) != 0)
        return -1;
    if ((a->checkpoint && check_output_path("--checkpoint", a->checkpoint, err) != 0) ||
        (a->out && check_output_path("--out", a->out, err) != 0) ||
        (a->log && check_output_path("--log", a->log, err) != 0))
        return -1;
    if (task_load(&t, &a->data, err) != 0) return -1;
    printf("%s: %" PRId64 " pairs within %d source and %d target tokens (%" PRId64
           " skipped): %" PRId64 " train, %" PRId64 " validate, %" PRId64 " test\n",
           a->data.data, t.train.n + t.val.n + t.test.n, a->data.max_src, a->data.max_tgt,
           t.skipped, t.train.n, t.val.n, t.test.n);

    static const ConfigOptions names = {NULL, "--tokenizer, --vocab-size", "--d-model",
                                        "--heads", "--ffn", "--layers", "--max-src, --max-tgt",
                                        NULL, "--dropout"};
    ModelConfig cfg = model_config(a, &t);
    if (options_check_config(&cfg, &names, err) != 0) goto done;
    if (a->resume) {
        if (checkpoint_load(a->resume, &m, &opt, &state, err) != 0 ||
            checkpoint_check_config(a->resume, &m.cfg, &cfg, &names, err) != 0)
            goto done;
        if (state.epoch >= a->epochs) {
            error_set(err, "--resume: %s is at epoch %" PRId64 "; --epochs %d leaves nothing "
                      "to train (a longer run needs more epochs)", a->resume, state.epoch,
                      a->epochs);
            goto done;
        }
        printf("resuming %s after epoch %" PRId64 " (step %" PRId64 ")\n", a->resume,
               state.epoch, opt.step);
    } else {
        rng_seed(&rng, (uint64_t)a->seed, 2);
        if (model_init(&m, &cfg, &rng, err) != 0) goto done;
        if (adam_state_alloc(&opt, m.num_params, err) != 0) goto done;
        rng_seed(&state.data_rng, (uint64_t)a->seed, 3);
        rng_seed(&state.dropout_rng, (uint64_t)a->seed, 4);
    }
    Examples train = pairs_examples(&t.train, tokenizer_vocab(&t.src_tok)->size,
                                    tokenizer_vocab(&t.tgt_tok)->size);
    Examples held = pairs_examples(&t.val, train.src_vocab, train.tgt_vocab);
    printf("seq2seq model: d_model %d, %d heads, %d + %d layers, FFN %d, dropout %g, "
           "%zu parameters\n", m.cfg.d_model, m.cfg.nhead, m.cfg.num_encoder_layers,
           m.cfg.num_decoder_layers, m.cfg.dim_feedforward, (double)m.cfg.dropout, m.num_params);
    printf("batch %d, %d epochs of %" PRId64 " steps, Adam lr %g (%s, warm-up %d steps)\n",
           a->batch_size, a->epochs, t.train.n / a->batch_size, a->lr, a->schedule, a->warmup);
    if (a->log) {
        snprintf(exact_path, sizeof exact_path, "%s.exact.csv", a->log);
        exact_log = exact_log_open(exact_path, a->resume ? opt.step : -1, err);
        if (!exact_log) goto done;
    }
    if (command_open_device(a->device, &device, &m, &opt, a->batch_size, t.train.S, t.train.T,
                            err) != 0)
        goto done;
    o.device = device.ctx ? &device : NULL;

    /* Rounds of eval_every epochs, each ended by greedy decoding of the
     * validation pairs: train_run stops after a round as an interrupted run
     * would, and the next call goes on from there. */
    o.epochs = a->epochs;
    double started = time_now();
    while (state.epoch < a->epochs) {
        int64_t next = (state.epoch / a->eval_every + 1) * a->eval_every;
        o.stop_after = (int)(next < a->epochs ? next : a->epochs);
        if (train_run(&m, &opt, &state, &o, &train, &held, &val, err) != 0) goto done;
        double exact;
        if (report_exact(&m, &t, &t.val, "validation", 1, 1.0, 0, &exact, err) != 0) goto done;
        if (exact_log) {
            fprintf(exact_log, "%" PRId64 ",%" PRId64 ",%.6f\n", opt.step, state.epoch, exact);
            fflush(exact_log);
        }
    }
    printf("trained %d epochs (%" PRId64 " steps) in %.0f s\n", a->epochs, opt.step,
           time_now() - started);
    if (a->out && model_save(&m, a->out, err) != 0) goto done;
    double exact;
    if (report_exact(&m, &t, &t.test, "test", 1, 1.0, 1, &exact, err) != 0) goto done;
    rc = 0;
    if (a->target_loss > 0 && !(val.loss <= a->target_loss)) {
        error_set(err, "the validation loss %.4f is above the target %.4f", val.loss,
                  a->target_loss);
        rc = -1;
    }
done:
    if (exact_log) fclose(exact_log);
    if (device.close) device.close(device.ctx);
    adam_state_free(&opt);
    model_free(&m);
    task_free(&t);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* --eval, --translate, --demo                                               */
/* ------------------------------------------------------------------------ */

/* A model for the task's vocabularies, from a model file or a checkpoint. */
static int load_model(Model *m, const char *path, const Task *t, Error *err)
{
    if (model_load(m, path, err) != 0) return -1;
    if (m->cfg.kind != MODEL_SEQ2SEQ || m->cfg.src_vocab != tokenizer_vocab(&t->src_tok)->size ||
        m->cfg.tgt_vocab != tokenizer_vocab(&t->tgt_tok)->size) {
        error_set(err, "%s: not a seq2seq model with vocabularies of %d and %d ids (the task's "
                  "tokenizers)", path, tokenizer_vocab(&t->src_tok)->size,
                  tokenizer_vocab(&t->tgt_tok)->size);
        model_free(m);
        return -1;
    }
    return 0;
}

static int run_eval(const char *path, const Args *a, Error *err)
{
    Task t;
    Model m;
    double exact;
    if (a->beam < 0) return error_set(err, "--beam: %d is negative", a->beam);
    if (task_load(&t, &a->data, err) != 0) return -1;
    if (load_model(&m, path, &t, err) != 0) {
        task_free(&t);
        return -1;
    }
    int rc = 0;
    if (a->beam <= 1) {          /* greedy (--beam 0: then beam 4 as well) */
        rc = report_exact(&m, &t, &t.test, "test", 1, a->length_penalty, 1, &exact, err);
        if (rc == 0 && exact < a->min_exact)
            rc = error_set(err, "%s: greedy exact match %.4f is below --min-exact %.4f", path,
                           exact, a->min_exact);
    }
    if (rc == 0 && a->beam != 1)
        rc = report_exact(&m, &t, &t.test, "test", a->beam ? a->beam : 4, a->length_penalty, 1,
                          &exact, err);
    model_free(&m);
    task_free(&t);
    return rc;
}

/* Translates text and prints the result. */
static int translate_text(Model *m, const Task *t, const char *text, int beam, Error *err)
{
    size_t len = strlen(text);
    int S = t->test.S;
    int64_t *ids = malloc((len + 1) * sizeof *ids), n, src[S], out[t->test.T];
    Text decoded = {0};
    int rc = -1;
    if (!ids) return error_set(err, "out of memory");
    if (tokenizer_encode(&t->src_tok, (const uint8_t *)text, len, ids, &n, err) != 0) goto done;
    if (n + 2 > S) {
        error_set(err, "'%s' has %" PRId64 " tokens; the model reads at most %d", text, n, S - 2);
        goto done;
    }
    if (seq_bracket(src, ids, n, S, err) != 0) goto done;
    DecodeOptions d = task_decoding(&t->test, beam, 1.0f);
    if ((beam > 1 ? decode_beam(m, src, 1, S, &d, out, NULL, err)
                  : decode_greedy(m, src, 1, S, &d, out, NULL, err)) != 0)
        goto done;
    int64_t m_out = 0;
    while (m_out < d.max_new && out[m_out] != TOKEN_EOS) m_out++;
    if (tokenizer_decode(&t->tgt_tok, out, m_out, &decoded, err) != 0) goto done;
    printf("%s\n", decoded.len ? (const char *)decoded.data : "");
    rc = 0;
done:
    text_free(&decoded);
    free(ids);
    return rc;
}

static int run_translate(const char *path, const char *text, int beam, Error *err)
{
    Task t;
    Model m;
    TaskData d = task_defaults();
    if (task_load(&t, &d, err) != 0) return -1;
    int rc = load_model(&m, path, &t, err);
    if (rc == 0) {
        rc = translate_text(&m, &t, text, beam, err);
        model_free(&m);
    }
    task_free(&t);
    return rc;
}

static int run_demo(Error *err)
{
    Task t;
    Model m;
    TaskData d = task_defaults();
    if (task_load(&t, &d, err) != 0) return -1;
    int rc = load_model(&m, SHIPPED_MODEL, &t, err);
    if (rc != 0) {
        task_free(&t);
        return -1;
    }
    printf("Seed 002's task: the Taylor series of a function to O(x**6), written token by\n"
           "token by %s, a 2 + 2 layer Transformer trained in C.\n\n", SHIPPED_MODEL);
    DecodeOptions dec = task_decoding(&t.test, 1, 1.0f);
    int64_t out[dec.max_new];
    for (int e = 0; e < 4 && rc == 0; e++) {
        const int64_t *src = t.test.src + (size_t)e * t.test.S;
        const int64_t *tgt = t.test.tgt + (size_t)e * (t.test.T + 1);
        Text a = {0}, b = {0}, c = {0};
        rc = decode_greedy(&m, src, 1, t.test.S, &dec, out, NULL, err);
        int64_t n = 0;
        while (n < dec.max_new && out[n] != TOKEN_EOS) n++;
        if (rc == 0) rc = tokenizer_decode(&t.src_tok, src, t.test.S, &a, err);
        if (rc == 0) rc = tokenizer_decode(&t.tgt_tok, tgt, t.test.T + 1, &b, err);
        if (rc == 0) rc = tokenizer_decode(&t.tgt_tok, out, n, &c, err);
        if (rc == 0)
            printf("source     %s\ntarget     %s\ntranslated %s  (%s)\n\n", a.data, b.data, c.data,
                   is_exact(out, dec.max_new, tgt) ? "exact" : "wrong");
        text_free(&a), text_free(&b), text_free(&c);
    }
    double exact;
    if (rc == 0) rc = report_exact(&m, &t, &t.test, "test", 1, 1.0, 1, &exact, err);
    model_free(&m);
    task_free(&t);
    return rc;
}

/* Times greedy decoding of the first N test sources with and without the
 * key/value cache, each to the full target length (84 tokens: <eos> is set
 * to <pad>, which the model never writes), and prints one JSON line. */
static int run_bench_decode(const char *path, int N, Error *err)
{
    Task t;
    Model m;
    TaskData d = task_defaults();
    if (N < 1) return error_set(err, "--bench-decode: N %d must be at least 1", N);
    if (task_load(&t, &d, err) != 0) return -1;
    if (load_model(&m, path, &t, err) != 0) {
        task_free(&t);
        return -1;
    }
    int rc = 0;
    if (N > t.test.n) N = (int)t.test.n;
    DecodeOptions dec = task_decoding(&t.test, 1, 1.0f);
    dec.eos_id = TOKEN_PAD;
    int64_t *out = malloc((size_t)N * dec.max_new * sizeof *out);
    double ms[2];
    for (int cached = 0; rc == 0 && cached < 2; cached++) {
        dec.no_cache = !cached;
        double started = time_now();
        rc = out ? decode_greedy(&m, t.test.src, N, t.test.S, &dec, out, NULL, err)
                 : error_set(err, "out of memory");
        ms[cached] = (time_now() - started) * 1e3 / N;
    }
    if (rc == 0)
        printf("{\"sequences\": %d, \"tokens\": %d, \"ms_per_sequence_no_cache\": %.3f, "
               "\"ms_per_sequence_cache\": %.3f}\n", N, dec.max_new, ms[0], ms[1]);
    free(out);
    model_free(&m);
    task_free(&t);
    return rc;
}

/* Copies the file from to the file to (the training logs shipped beside
 * the model). */
static int copy_file(const char *from, const char *to, Error *err)
{
    Text t = {0};
    if (text_read_file(from, &t, err) != 0) return -1;
    int rc = file_write_atomic(to, &(FilePart){t.data, t.len}, 1, err);
    text_free(&t);
    return rc;
}

/* gnuplot tic labels for the tokens ids[0..n): "\"tok\" 0, \"tok\" 1, ..." */
static void write_tics(FILE *f, const char *label, const Vocab *v, const int64_t *ids, int n)
{
    fprintf(f, "# %s:", label);
    for (int i = 0; i < n; i++) {
        const char *tok = (const char *)v->bytes[ids[i]];
        int special = ids[i] < v->n_special;          /* "<eos>" is shown as "eos" */
        fprintf(f, "%s \"%.*s\" %d", i ? "," : "", special ? (int)strlen(tok) - 2 : 64,
                tok + special, i);
    }
    fprintf(f, "\n");
}

/* The shipped model's logs, and the cross-attention of its last decoder
 * layer (mean over the heads) on test pair 0, teacher-forced on the
 * model's own translation: "query key weight" lines, one block per target
 * position, and the tokens of both sides as tic labels. */
static int run_plot_data(const char *dir, Error *err)
{
    Task t;
    Model m;
    ModelWork w;
    TaskData d = task_defaults();
    char path[4096];
    if (make_dir(dir, err) != 0) return -1;
    snprintf(path, sizeof path, "%s/taylor_train_log.csv", dir);
    if (copy_file("models/taylor_train_log.csv", path, err) != 0) return -1;
    snprintf(path, sizeof path, "%s/taylor_exact.csv", dir);
    if (copy_file("models/taylor_exact.csv", path, err) != 0) return -1;
    if (task_load(&t, &d, err) != 0) return -1;
    if (load_model(&m, SHIPPED_MODEL, &t, err) != 0) {
        task_free(&t);
        return -1;
    }
    const PairDataset *ts = &t.test;
    const int64_t *src = ts->src;
    DecodeOptions dec = task_decoding(ts, 1, 1.0f);
    int64_t out[dec.max_new], tgt[dec.max_new + 1];
    int S = 0, T = 0, rc = decode_greedy(&m, src, 1, ts->S, &dec, out, NULL, err);
    while (S < ts->S && src[S] != TOKEN_PAD) S++;
    while (rc == 0 && T < dec.max_new && out[T] != TOKEN_EOS) T++;
    /* the decoder reads <sos> and the tokens; queries: those T + 1 positions */
    tgt[0] = TOKEN_SOS;
    memcpy(tgt + 1, out, (size_t)T * sizeof *tgt);
    memset(&w, 0, sizeof w);
    if (rc == 0) rc = model_work_alloc(&w, &m, 1, S, T + 1, 0, err);
    if (rc == 0 && model_forward(&m, &w, src, tgt, NULL) != 0)
        rc = error_set(err, "model_forward failed");
    TextOut att;
    if (rc == 0) rc = text_out_open(&att, err);
    if (rc == 0) {
        FILE *f = att.f;
        int layer = m.cfg.num_decoder_layers - 1, H = m.cfg.nhead;
        /* row q predicts the token after tgt[q]: label it with that token */
        write_tics(f, "xtics", tokenizer_vocab(&t.src_tok), src, S);
        int64_t next[T + 1];
        memcpy(next, out, (size_t)T * sizeof *next);
        next[T] = TOKEN_EOS;
        write_tics(f, "ytics", tokenizer_vocab(&t.tgt_tok), next, T + 1);
        fprintf(f, "# query key weight (cross-attention, decoder layer %d, mean of %d heads)\n",
                layer + 1, H);
        for (int q = 0; q <= T; q++) {
            for (int k = 0; k < S; k++) {
                double sum = 0;
                for (int h = 0; h < H; h++)
                    sum += model_attention(&w, &m, ATTN_DECODER_CROSS, layer, 0, h)
                               [(size_t)q * S + k];
                fprintf(f, "%d %d %.6f\n", q, k, sum / H);
            }
            fprintf(f, "\n");
        }
        snprintf(path, sizeof path, "%s/taylor_attention.dat", dir);
        rc = text_out_commit(&att, path, err);
    }
    model_work_free(&w);
    model_free(&m);
    task_free(&t);
    return rc;
}

int main(int argc, char **argv)
{
    Error err;
    Args a = defaults();
    const char *cmd = argc >= 2 ? argv[1] : "";
    int rc;
    if (strcmp(cmd, "--train") == 0 || strcmp(cmd, "--eval") == 0) {
        int train = cmd[2] == 't';
        Option topts[] = TRAIN_OPTIONS(a), eopts[] = EVAL_OPTIONS(a);
        int status = train ? task_command_options("09_translation", argc, argv, topts,
                                                  (int)(sizeof topts / sizeof topts[0]), &a.help)
                           : task_command_options("09_translation", argc, argv, eopts,
                                                  (int)(sizeof eopts / sizeof eopts[0]), &a.help);
        if (status >= 0) return status;
        rc = train ? run_train(&a, &err) : run_eval(argv[2], &a, &err);
    } else if (strcmp(cmd, "--translate") == 0) {
        Option opts[] = {{"--beam", OPT_INT, &a.beam, "beam width (default 1: greedy)"}};
        if (argc < 4 || parse_options(opts, 1, argc, argv, 4, &err) != 0 || a.beam < 1) {
            fprintf(stderr, "09_translation --translate: %s\n",
                    argc < 4 ? "give the model and the text: --translate MODEL TEXT" :
                    a.beam < 1 ? "--beam needs at least 1" : err.msg);
            return 2;
        }
        rc = run_translate(argv[2], argv[3], a.beam, &err);
    } else if (strcmp(cmd, "--bench-decode") == 0 && (argc == 3 || argc == 4)) {
        char *end = NULL;
        long n = argc == 4 ? strtol(argv[3], &end, 10) : 32;
        if (argc == 4 && (*end || end == argv[3] || n < 1 || n > 100000)) {
            fprintf(stderr, "09_translation --bench-decode: N '%s' is not in 1..100000\n",
                    argv[3]);
            return 2;
        }
        rc = run_bench_decode(argv[2], (int)n, &err);
    } else if (strcmp(cmd, "--plot-data") == 0 && argc == 3) {
        rc = run_plot_data(argv[2], &err);
    } else if (strcmp(cmd, "--demo") == 0 && argc == 2) {
        rc = run_demo(&err);
    } else {
        fputs(USAGE, stderr);
        return 2;
    }
    if (rc != 0) {
        fprintf(stderr, "09_translation %s: %s\n", cmd, err.msg);
        return 1;
    }
    return 0;
}
