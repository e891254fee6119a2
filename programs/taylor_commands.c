/*
 * taylor_commands.c - see taylor_commands.h.
 */
#include "taylor_commands.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode.h"
#include "model.h"
#include "options.h"
#include "paths.h"
#include "safetensors.h"   /* file_write_atomic, TextOut */
#include "sequence.h"
#include "text.h"
#include "threads.h"       /* time_now() */
#include "translate.h"
#include "model_file.h"

/* A model for the task's vocabularies, from a model file or a checkpoint. */
static int load_model(Model *m, const char *path, const Translation *t, Error *err)
{
    if (model_load(m, path, err) != 0) return -1;
    if (translation_check_model(t, m, path, err) != 0) {
        model_free(m);
        return -1;
    }
    return 0;
}

/* At most this many bytes of a source are quoted in a message: enough to
 * recognize it, short enough that the reason after it is always in the line
 * (a message holds ERROR_MSG_MAX bytes). */
#define QUOTE_MAX 40

/* The length of the part of text (len bytes) a message quotes: all of it, or
 * QUOTE_MAX bytes cut back to the start of a UTF-8 character. */
static int quoted_len(const char *text, size_t len)
{
    if (len <= QUOTE_MAX) return (int)len;
    size_t cut = QUOTE_MAX;
    while (cut > 0 && ((unsigned char)text[cut] & 0xC0) == 0x80) cut--;
    return (int)cut;
}

/* Translates text and prints the result. */
static int translate_text(Model *m, const Translation *t, const char *text, int beam, Error *err)
{
    size_t len = strlen(text);
    int S = t->test.S;
    int64_t *ids = malloc((len + 1) * sizeof *ids), n, src[S], out[t->test.T];
    Text decoded = {0};
    int rc = -1;
    if (!ids) return error_set(err, "out of memory");
    if (tokenizer_encode(&t->src_tok, (const uint8_t *)text, len, ids, &n, err) != 0) goto done;
    if (n + 2 > S) {
        int q = quoted_len(text, len);
        char size[48] = "";
        if ((size_t)q < len) snprintf(size, sizeof size, "...' (%zu bytes)", len);
        error_set(err, "'%.*s%s has %" PRId64 " tokens; the model reads at most %d", q, text,
                  (size_t)q < len ? size : "'", n, S - 2);
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
    Translation t;
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
    Translation t;
    Model m;
    TaskData d = task_defaults();
    if (task_load(&t, &d, err) != 0) return -1;
    int rc = load_model(&m, SHIPPED_MODEL, &t, err);
    if (rc != 0) {
        task_free(&t);
        return -1;
    }
    printf("The Taylor-series task: the series of a function to O(x**6), written token by\n"
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
    if (rc == 0) rc = report_exact(&m, &t, &t.test, "test", &dec, 1, &exact, err);
    model_free(&m);
    task_free(&t);
    return rc;
}

/* Times greedy decoding of the first N test sources with and without the
 * key/value cache, each to the full target length (84 tokens: <eos> is set
 * to <pad>, which the model never writes), and prints one JSON line. */
static int run_bench_decode(const char *path, int N, Error *err)
{
    Translation t;
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
    Translation t;
    Model m;
    ModelWork w;
    TaskData d = task_defaults();
    char path[4096];
    if (make_dir(dir, err) != 0) return -1;
    snprintf(path, sizeof path, "%s/taylor_train_log.csv", dir);
    if (file_copy("models/taylor_train_log.csv", path, err) != 0) return -1;
    snprintf(path, sizeof path, "%s/taylor_exact.csv", dir);
    if (file_copy("models/taylor_exact.csv", path, err) != 0) return -1;
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


int translate_command(int argc, char **argv, Error *err)
{
    int beam = 1;
    Option opts[] = {{"--beam", OPT_INT, &beam, "beam width"}};
    if (argc < 2) return error_set(err, "give the model and the text: --translate MODEL TEXT");
    if (parse_options(opts, 1, argc, argv, 2, err) != 0) return -1;
    if (beam < 1) return error_set(err, "--beam needs at least 1");
    return run_translate(argv[0], argv[1], beam, err);
}

int taylor_demo_command(int argc, char **argv, Error *err)
{
    if (argc != 0) return error_set(err, "--demo takes no arguments");
    return run_demo(err);
}

int bench_decode_command(int argc, char **argv, Error *err)
{
    char *end = NULL;
    long n = argc == 2 ? strtol(argv[1], &end, 10) : 32;
    if (argc < 1 || argc > 2) return error_set(err, "give the model: --bench-decode MODEL [N]");
    if (argc == 2 && (*end || end == argv[1] || n < 1 || n > 100000))
        return error_set(err, "N '%s' is not in 1..100000", argv[1]);
    return run_bench_decode(argv[0], (int)n, err);
}

int taylor_plot_data_command(int argc, char **argv, Error *err)
{
    if (argc != 1) return error_set(err, "give the folder: --plot-data DIR");
    return run_plot_data(argv[0], err);
}
