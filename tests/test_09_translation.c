/*
 * test_09_translation.c - chapter 09: the pair reader and the Taylor task's
 * split against the reference (golden/09_translation/taylor_split, made by
 * reference/ch09_translation.py from the same file), the reader's refusals,
 * a learned tokenizer, exact match and the kinds of miss. Decoding with a
 * cache against decoding without one is tested in test_07_model.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "decode.h"
#include "helpers.h"
#include "model.h"
#include "model_file.h"
#include "pairs.h"
#include "rng.h"
#include "taylor.h"
#include "translate.h"

#define CHAPTER "09_translation"

/* The seed's split, read by task_load with the defaults: the counts, and the
 * ids and file lines of the first and last pair of each split, exactly as
 * the reference reads them. */
static void test_taylor_split(void **state)
{
    TensorFile f;
    Translation t;
    Error err;
    load_golden(&f, CHAPTER, "taylor_split");
    TaskData d = task_defaults();
    if (task_load(&t, &d, &err) != 0) fail_msg("%s", err.msg);
    const int64_t *counts = golden_tensor(&f, "counts", DTYPE_I64)->data;
    const PairDataset *parts[3] = {&t.train, &t.val, &t.test};
    const char *names[3] = {"train", "val", "test"};
    for (int p = 0; p < 3; p++) {
        assert_int_equal(parts[p]->n, counts[p]);
        assert_int_equal(parts[p]->S, 22);
        assert_int_equal(parts[p]->T, 84);
        for (int last = 0; last < 2; last++) {
            char key[64];
            int64_t i = last ? parts[p]->n - 1 : 0;
            const char *which = last ? "last" : "first";
            snprintf(key, sizeof key, "%s_%s_src", names[p], which);
            assert_memory_equal(parts[p]->src + i * 22, golden_tensor(&f, key, DTYPE_I64)->data,
                                22 * sizeof(int64_t));
            snprintf(key, sizeof key, "%s_%s_tgt", names[p], which);
            assert_memory_equal(parts[p]->tgt + i * 85, golden_tensor(&f, key, DTYPE_I64)->data,
                                85 * sizeof(int64_t));
            snprintf(key, sizeof key, "%s_%s_line", names[p], which);
            assert_int_equal(parts[p]->line[i],
                             *(const int64_t *)golden_tensor(&f, key, DTYPE_I64)->data);
        }
    }
    assert_int_equal(t.skipped, counts[3]);
    assert_int_equal(tokenizer_vocab(&t.src_tok)->size, 37);
    assert_int_equal(tokenizer_vocab(&t.tgt_tok)->size, 30);
    print_message("  %lld train, %lld validate, %lld test, %lld skipped: as the reference\n",
                  (long long)t.train.n, (long long)t.val.n, (long long)t.test.n,
                  (long long)t.skipped);
    task_free(&t);
    tensorfile_free(&f);
}

/* Writes text to a temporary file; path receives its name. */
static void write_temp(char *path, size_t size, const char *text)
{
    snprintf(path, size, "/tmp/test09XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *out = fdopen(fd, "w");
    fputs(text, out);
    fclose(out);
}

static int read_text(const char *text, int max_src, int max_tgt, PairDataset *ds,
                     int64_t *skipped, Error *err)
{
    char path[64];
    Tokenizer src, tgt;
    write_temp(path, sizeof path, text);
    assert_ok(tokenizer_build(&src, TOKENIZER_TAYLOR_SOURCE, NULL, 0, 0, err));
    assert_ok(tokenizer_build(&tgt, TOKENIZER_TAYLOR_TARGET, NULL, 0, 0, err));
    PairFormat f = {&src, &tgt, max_src, max_tgt};
    int rc = pairs_read(ds, path, &f, skipped, err);
    tokenizer_free(&src);
    tokenizer_free(&tgt);
    remove(path);
    return rc;
}

/* Limits skip pairs in file order; the last line needs no newline; a CRLF
 * line reads as the same pair. */
static void test_pairs_limits_and_layout(void **state)
{
    PairDataset ds;
    int64_t skipped;
    Error err;
    assert_ok(read_text("sin(x)|x-x**3/6+O(x**6)\r\nexp(a*x)|1+a*x+O(x**6)\n"
                        "cos(x)**2|1-x**2+x**4/3+O(x**6)", 6, 9, &ds, &skipped, &err));
    /* sin(x): 4 tokens, 9 target tokens; exp(a*x): 6 and 7; cos(x)**2: 6 and 13 */
    assert_int_equal(ds.n, 2);
    assert_int_equal(skipped, 1);
    assert_int_equal(ds.S, 8);
    assert_int_equal(ds.T, 10);
    assert_int_equal(ds.line[0], 1);
    assert_int_equal(ds.line[1], 2);
    /* <sos> sin ( x ) <eos> <pad> <pad> <pad> */
    const int64_t row0[8] = {1, 32, 3, 36, 4, 2, 0, 0};     /* sin 32, ( 3, x 36, ) 4 */
    assert_memory_equal(ds.src, row0, sizeof row0);
    assert_int_equal(ds.tgt[0], 1);
    assert_int_equal(ds.tgt[10], 2);                  /* <eos> after 9 tokens, then <pad> */
    /* teacher forcing: tgt_in is the row without its last id, target without its first */
    Examples ex = pairs_examples(&ds, 37, 30);
    int64_t idx[1] = {1}, src[8], tgt_in[10], target[10];
    assert_int_equal(ex.fill(ex.data, idx, 1, src, tgt_in, target, &err), 0);
    assert_memory_equal(tgt_in, ds.tgt + 11, 10 * sizeof(int64_t));
    assert_memory_equal(target, ds.tgt + 12, 10 * sizeof(int64_t));
    pairs_free(&ds);
}

/* Bad files: one line naming the file and the line, and nothing allocated. */
static void test_pairs_refusals(void **state)
{
    const struct {
        const char *text, *message;
    } bad[] = {
        {"sin(x)|x+O(x**6)\nsin(x)\n", ":2: no '|'"},
        {"sin(x)|x|x\n", ":1: more than one '|'"},
        {"sin(x)|x+O(x**6)\n\nsin(x)|x\n", ":2: empty line"},
        {"sin(y)|x\n", ":1: source:"},
        {"sin(x)|y\n", ":1: target:"},
        {"", "the file is empty"},
        {"sinh(x)**3*cosh(x)**3+sin(x)|x\n", "none of its 1 pairs"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        PairDataset ds;
        Error err;
        assert_int_equal(read_text(bad[i].text, 6, 20, &ds, NULL, &err), -1);
        print_message("  %s\n", err.msg);
        assert_non_null(strstr(err.msg, bad[i].message));
        assert_null(ds.src);
    }
}

/* Any file of pairs trains with a learned tokenizer: char learns one
 * vocabulary per side from that side's lines (3 specials, <unk>, then each
 * character), and the split takes the pairs in file order. */
static void test_pairs_with_char_tokenizer(void **state)
{
    char path[64];
    Translation t;
    Error err;
    write_temp(path, sizeof path, "ab|xyz\nba|zyx\naab|x\nb|yy\n");
    TaskData d = task_defaults();
    d.data = path;
    d.tokenizer = "char";
    d.max_src = 2, d.max_tgt = 3;
    d.train_size = 1, d.val_size = 1;
    if (task_load(&t, &d, &err) != 0) fail_msg("%s", err.msg);
    assert_int_equal(tokenizer_vocab(&t.src_tok)->size, 4 + 2);   /* a b */
    assert_int_equal(tokenizer_vocab(&t.tgt_tok)->size, 4 + 3);   /* x y z */
    assert_int_equal(t.skipped, 1);                                /* aab: 3 source tokens */
    assert_int_equal(t.train.n, 1);
    assert_int_equal(t.val.n, 1);
    assert_int_equal(t.test.n, 1);
    assert_int_equal(t.test.line[0], 4);
    task_free(&t);
    d.tokenizer = "taylor-source";                                 /* a side, not a task */
    assert_int_equal(task_load(&t, &d, &err), -1);
    print_message("  %s\n", err.msg);
    assert_non_null(strstr(err.msg, "--tokenizer"));
    remove(path);
}

/* Bad UTF-8 under the char tokenizer is reported with the file and its
 * line (issue 43: the tokenizer, learning from one side of every line glued
 * together, gave an offset in that corpus and no file). */
static void test_char_tokenizer_bad_utf8_names_the_line(void **state)
{
    char path[64], expect[128];
    Translation t;
    Error err;
    write_temp(path, sizeof path, "ab|xyz\nba|zyx\naab|x\xffy\nb|yy\n");
    TaskData d = task_defaults();
    d.data = path;
    d.tokenizer = "char";
    d.train_size = 1, d.val_size = 1;
    assert_int_equal(task_load(&t, &d, &err), -1);
    print_message("  %s\n", err.msg);
    snprintf(expect, sizeof expect, "%s:3: invalid UTF-8 at byte offset 19", path);
    assert_non_null(strstr(err.msg, expect));
    remove(path);
}

/* Exact means every token and then <eos>; a miss is named by the first
 * token where the translation departs. */
static void test_exact_and_misses(void **state)
{
    Vocab v;
    Error err;
    assert_ok(taylor_vocab(&v, TAYLOR_TARGET, &err));
    /* target row: <sos> 1 + x <eos> <pad>; ids of "1" 11, "+" 7, "x" 29, "-" 8 */
    const int64_t tgt[6] = {1, 11, 7, 29, 2, 0};
    const int64_t right[5] = {11, 7, 29, 2, 0}, digit[5] = {12, 7, 29, 2, 0};
    const int64_t op[5] = {11, 8, 29, 2, 0}, shorter[5] = {11, 7, 2, 0, 0};
    const int64_t longer[5] = {11, 7, 29, 7, 29}, var[5] = {11, 7, 21, 2, 0};
    assert_true(is_exact(right, 5, tgt));
    assert_false(is_exact(digit, 5, tgt));
    assert_false(is_exact(longer, 5, tgt));
    assert_int_equal(miss_kind(digit, 5, tgt, &v), MISS_DIGIT);
    assert_int_equal(miss_kind(op, 5, tgt, &v), MISS_OPERATOR);
    assert_int_equal(miss_kind(shorter, 5, tgt, &v), MISS_TOO_SHORT);
    assert_int_equal(miss_kind(longer, 5, tgt, &v), MISS_TOO_LONG);
    assert_int_equal(miss_kind(var, 5, tgt, &v), MISS_VARIABLE);
    vocab_free(&v);
}

/* The whole of a small file, for comparing before and after a run. */
static void read_whole(const char *path, char *buf, size_t size)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    size_t n = fread(buf, 1, size - 1, f);
    buf[n] = '\0';
    fclose(f);
}

static void write_whole(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

/* A run of 09_translation on the first 300 lines of the Taylor pairs: 200
 * pairs train (6 batches of 32), 20 validate, 34 test, and a model small
 * enough to train in a moment. */
#define SMALL_RUN "build/09_translation --train --data build/pairs300.txt --train-size 200 " \
                  "--val-size 20 --epochs 1 --d-model 16 --heads 2 --ffn 32 --layers 1"

static void write_pairs300(void)
{
    FILE *in = fopen("reference/data/taylor/seq2seq_series_2terms.txt", "rb");
    FILE *out = fopen("build/pairs300.txt", "wb");
    assert_non_null(in);
    assert_non_null(out);
    char line[4096];
    for (int i = 0; i < 300 && fgets(line, sizeof line, in); i++) fputs(line, out);
    fclose(in);
    assert_int_equal(fclose(out), 0);
}

/* Issue 43: a run refused for its options leaves an earlier run's files as
 * they were. --batch-size larger than the training set is refused before
 * the round log (LOG.exact.csv) is opened: it was cut to its header first. */
static void test_refused_run_keeps_earlier_logs(void **state)
{
    (void)state;
    const char *log = "build/kept_log.csv", *exact = "build/kept_log.csv.exact.csv";
    const char *log_rows = "step,epoch,lr,train_loss,val_loss,val_accuracy,seconds\n"
                           "1,1,0.001,2.5,2.4,0.1,0.5\n";
    const char *exact_rows = "step,epoch,val_exact\n5,1,0.500000\n";
    char out[8192], cmd[1024], after[256];
    write_pairs300();
    write_whole(log, log_rows);
    write_whole(exact, exact_rows);
    snprintf(cmd, sizeof cmd, "%s --log %s --batch-size 201", SMALL_RUN, log);
    assert_int_equal(run_command(cmd, out, sizeof out), 1);
    assert_non_null(strstr(out, "--batch-size 201 is larger than the 200 training examples"));
    read_whole(log, after, sizeof after);
    assert_string_equal(after, log_rows);
    read_whole(exact, after, sizeof after);
    assert_string_equal(after, exact_rows);
    unlink(log);
    unlink(exact);
    unlink("build/pairs300.txt");
}

/* A --bucket longer than the epoch sorts the whole epoch, as a bucket of
 * exactly the epoch's 6 batches does (the same model, bit for bit), within
 * the epoch's memory: --bucket 2147483647 asked for room for that many
 * batches, ran out of memory after the loss log was cut, and named no
 * option. */
static void test_bucket_longer_than_the_epoch(void **state)
{
    (void)state;
    char out[8192], cmd[1024];
    const char *models[2] = {"build/bucket_6.safetensors", "build/bucket_max.safetensors"};
    const char *buckets[2] = {"6", "2147483647"};
    write_pairs300();
    for (int i = 0; i < 2; i++) {
        snprintf(cmd, sizeof cmd, "%s --bucket %s --out %s", SMALL_RUN, buckets[i], models[i]);
        assert_int_equal(run_command(cmd, out, sizeof out), 0);
    }
    Model m[2];
    Error err;
    for (int i = 0; i < 2; i++) assert_ok(model_load(&m[i], models[i], &err));
    assert_int_equal(m[0].num_params, m[1].num_params);
    assert_memory_equal(m[0].params, m[1].params, m[0].num_params * sizeof *m[0].params);
    for (int i = 0; i < 2; i++) {
        model_free(&m[i]);
        unlink(models[i]);
    }
    unlink("build/pairs300.txt");
}

/* An endless file as the data (/dev/zero) is refused by name once 256 MiB
 * have come, and the run writes nothing (issue 43: it was read until
 * memory ran out, and the message named no file). */
static void test_endless_data_refused(void **state)
{
    (void)state;
    char out[8192];
    const char *model = "build/zero_data.safetensors";
    unlink(model);
    assert_int_equal(run_command("build/09_translation --train --data /dev/zero --epochs 1 "
                                 "--out build/zero_data.safetensors", out, sizeof out), 1);
    assert_non_null(strstr(out, "/dev/zero: more than the 256 MiB a text file may have"));
    assert_int_equal(access(model, F_OK), -1);
}

/* --translate of a source too long for the model quotes its first 40
 * bytes, so the reason follows in the line (issue 43: a 128 KB source was
 * quoted up to the message's 512 bytes, and the reason never came). */
static void test_translate_long_source_gives_the_reason(void **state)
{
    (void)state;
    char out[8192];
    /* 18,000 times "sin(x)+": 126,000 bytes, about what one argument may hold */
    assert_int_equal(run_command("build/09_translation --translate models/taylor.safetensors "
                                 "\"$(awk 'BEGIN { for (i = 0; i < 18000; i++) "
                                 "printf \"sin(x)+\" }')\"", out, sizeof out), 1);
    assert_non_null(strstr(out, "'sin(x)+sin(x)+sin(x)+sin(x)+sin(x)+sin(x...' (126000 bytes) "
                                "has 90000 tokens; the model reads at most 20"));
    assert_true(strlen(out) < 200);
    /* a short source is quoted whole */
    assert_int_equal(run_command("build/09_translation --translate models/taylor.safetensors "
                                 "'sin(x)+sin(x)+sin(x)+sin(x)+sin(x)'", out, sizeof out), 1);
    assert_non_null(strstr(out, "'sin(x)+sin(x)+sin(x)+sin(x)+sin(x)' has 24 tokens"));
}

/* The malformed-input corpus of this chapter (tests/malformed/09_translation/): each
 * pairs file gets a one-line error naming it, and no output appears. */
static int read_pairs(const char *path, const char *out_path, Error *err)
{
    Tokenizer src, tgt;
    PairDataset ds;
    (void)out_path;
    assert_ok(tokenizer_build(&src, TOKENIZER_TAYLOR_SOURCE, NULL, 0, 0, err));
    assert_ok(tokenizer_build(&tgt, TOKENIZER_TAYLOR_TARGET, NULL, 0, 0, err));
    PairFormat f = {&src, &tgt, 20, 83};
    int rc = pairs_read(&ds, path, &f, NULL, err);
    if (rc == 0) pairs_free(&ds);
    tokenizer_free(&src);
    tokenizer_free(&tgt);
    return rc;
}

static void test_malformed_corpus(void **state)
{
    (void)state;
    check_malformed_corpus("09_translation", read_pairs, 7);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_taylor_split),
        cmocka_unit_test(test_pairs_limits_and_layout),
        cmocka_unit_test(test_pairs_refusals),
        cmocka_unit_test(test_pairs_with_char_tokenizer),
        cmocka_unit_test(test_char_tokenizer_bad_utf8_names_the_line),
        cmocka_unit_test(test_exact_and_misses),
        cmocka_unit_test(test_refused_run_keeps_earlier_logs),
        cmocka_unit_test(test_bucket_longer_than_the_epoch),
        cmocka_unit_test(test_endless_data_refused),
        cmocka_unit_test(test_translate_long_source_gives_the_reason),
        cmocka_unit_test(test_malformed_corpus),
    };
    return run_chapter_tests("09_translation", tests);
}
