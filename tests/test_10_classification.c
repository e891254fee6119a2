/*
 * test_10_classification.c - chapter 10: the review reader, clean-up, split,
 * tokenizer and framing against the reference (golden/10_classification/
 * imdb_split, made by reference/ch10_classification.py from the same
 * reviews), the reader's refusals, the tokenizer carried as metadata,
 * chapter 08's trainer on a classifier, and the shipped model on short
 * texts whose sentiment is plain.
 *
 * The split test reads .data/imdb (make imdb); without it the test is
 * skipped with a line that says so.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bpe.h"
#include "helpers.h"
#include "imdb.h"
#include "imdb_commands.h"
#include "model.h"
#include "review.h"
#include "rng.h"
#include "trainer.h"

#define CHAPTER "10_classification"

/* label, line, cleaned length and byte sum of review i, against the golden
 * tensor key. */
static void check_review(const TensorFile *f, const char *key, const ReviewSet *rs, int64_t i)
{
    const int64_t *want = golden_tensor(f, key, DTYPE_I64)->data;
    int64_t sum = 0;
    for (size_t k = 0; k < rs->text[i].len; k++) sum += rs->text[i].data[k];
    assert_int_equal(rs->label[i], want[0]);
    assert_int_equal(rs->line[i], want[1]);
    assert_int_equal(rs->text[i].len, want[2]);
    assert_int_equal(sum, want[3]);
}

/* The split, the clean-up, a tokenizer trained on the first 100 training
 * reviews and three framed rows, exactly as the reference makes them. */
static void test_imdb_split(void **state)
{
    TensorFile f;
    ReviewSet all, learn, train, val, test, rt;
    Error err;
    if (access(".data/imdb/imdb.tsv", R_OK) != 0) {
        print_message("  .data/imdb/imdb.tsv is missing (make imdb fetches it): skipped\n");
        skip();
    }
    load_golden(&f, CHAPTER, "imdb_split");
    if (reviews_read(&all, ".data/imdb/imdb.tsv", &err) != 0 ||
        reviews_read(&rt, ".data/imdb/rotten_tomatoes.tsv", &err) != 0)
        fail_msg("%s", err.msg);
    assert_ok(reviews_clean(&all, &err));
    assert_ok(reviews_clean(&rt, &err));
    assert_ok(reviews_split(&all, 5, &learn, &test, &err));
    assert_ok(reviews_split(&learn, 10, &train, &val, &err));
    const int64_t *counts = golden_tensor(&f, "counts", DTYPE_I64)->data;
    const ReviewSet *parts[4] = {&train, &val, &test, &rt};
    const char *names[4] = {"train", "val", "test", "rt"};
    for (int p = 0; p < 4; p++) {
        int64_t positive = 0;
        for (int64_t i = 0; i < parts[p]->n; i++) positive += parts[p]->label[i];
        assert_int_equal(parts[p]->n, counts[p]);
        assert_int_equal(positive, counts[4 + p]);
        char key[32];
        snprintf(key, sizeof key, "%s_first", names[p]);
        check_review(&f, key, parts[p], 0);
        snprintf(key, sizeof key, "%s_last", names[p]);
        check_review(&f, key, parts[p], parts[p]->n - 1);
    }

    Bpe bpe;
    Text corpus = {0};
    ReviewSet first = train;
    first.n = golden_meta_int(&f, "bpe_reviews");
    assert_ok(reviews_corpus(&first, &corpus, &err));
    assert_ok(bpe_init(&bpe, &err));
    assert_ok(bpe_train(&bpe, corpus.data, corpus.len, golden_meta_int(&f, "vocab_size"),
                        &err));
    assert_i64_equal_to_golden(&f, "merges", bpe.merges, 2 * bpe.n_merges);
    int S = (int)golden_meta_int(&f, "max_len");
    ReviewSet three;
    ReviewRows rows;
    three = test;                                 /* rows of test[0], test[last], rt[0] */
    const Text *texts[3] = {&test.text[0], &test.text[test.n - 1], &rt.text[0]};
    const uint8_t labels[3] = {test.label[0], test.label[test.n - 1], rt.label[0]};
    Text picked[3];
    int64_t lines[3] = {1, 2, 3};
    for (int i = 0; i < 3; i++) picked[i] = *texts[i];
    three.n = 3;
    three.text = picked;
    three.label = (uint8_t *)labels;
    three.line = lines;
    assert_ok(review_rows(&rows, &three, &bpe, S, &err));
    assert_i64_equal_to_golden(&f, "rows", rows.ids, 3 * S);
    print_message("  %lld train (%lld positive), %lld validate, %lld test, %lld Rotten "
                  "Tomatoes; %lld merges and 3 rows of %d ids: as the reference\n",
                  (long long)train.n, (long long)counts[4], (long long)val.n,
                  (long long)test.n, (long long)rt.n, (long long)bpe.n_merges, S);
    review_rows_free(&rows);
    text_free(&corpus);
    bpe_free(&bpe);
    reviews_free(&all);
    reviews_free(&learn);
    reviews_free(&train);
    reviews_free(&val);
    reviews_free(&test);
    reviews_free(&rt);
    tensorfile_free(&f);
}

/* Writes text to a temporary file; path receives its name. */
static void write_temp(char *path, size_t size, const char *text)
{
    snprintf(path, size, "/tmp/test10XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *out = fdopen(fd, "w");
    fputs(text, out);
    fclose(out);
}

/* <br /> becomes one space, ASCII letters lower case, other bytes stay;
 * "<BR />" is not a line break (the match comes before the lower-casing);
 * one space goes before the text. */
static void test_review_clean(void **state)
{
    Text t = {0};
    Error err;
    const char *in = "Great FILM!<br /><br />Caf\xc3\xa9 <BR />9/10<br /";
    assert_ok(text_append(&t, in, strlen(in), &err));
    assert_ok(review_clean(&t, &err));
    assert_string_equal((const char *)t.data, " great film!  caf\xc3\xa9 <br />9/10<br /");
    assert_int_equal(t.len, strlen(" great film!  caf\xc3\xa9 <br />9/10<br /"));
    text_free(&t);
}

/* A file of label<TAB>text lines: the last line needs no newline, CRLF reads
 * the same; the split sends the 5th, 10th, ... review of each label to test. */
static void test_reviews_read_and_split(void **state)
{
    char path[64], text[1024] = "";
    ReviewSet rs, train, test;
    Error err;
    for (int i = 0; i < 12; i++) {   /* labels 0 1 0 1 ..., then the last without newline */
        char line[32];
        snprintf(line, sizeof line, "%d\treview %d%s", i % 2, i, i == 11 ? "" : "\r\n");
        strcat(text, line);
    }
    write_temp(path, sizeof path, text);
    assert_ok(reviews_read(&rs, path, &err));
    remove(path);
    assert_int_equal(rs.n, 12);
    assert_string_equal((const char *)rs.text[11].data, "review 11");
    assert_int_equal(rs.label[3], 1);
    assert_ok(reviews_split(&rs, 5, &train, &test, &err));
    /* label 0: reviews 0 2 4 6 8 10, the 5th is review 8; label 1: review 9 */
    assert_int_equal(test.n, 2);
    assert_int_equal(train.n, 10);
    assert_int_equal(test.line[0], 9);
    assert_int_equal(test.line[1], 10);
    assert_int_equal(train.line[9], 12);
    ReviewSet a, b;
    assert_int_equal(reviews_split(&rs, 1, &a, &b, &err), -1);
    assert_non_null(strstr(err.msg, "every >= 2"));
    reviews_free(&rs);
    reviews_free(&train);
    reviews_free(&test);
}

/* Bad files: one line naming the file and the line, and nothing allocated. */
static void test_reviews_refusals(void **state)
{
    const struct {
        const char *text, *message;
    } bad[] = {
        {"1\tgood\n0 bad\n", ":2: no '<label><TAB>'"},
        {"2\tgood\n", ":1: the label is not 0 or 1"},
        {"1\tgood\n\n0\tbad\n", ":2: empty line"},
        {"1\t\n", ":1: the text is empty"},
        {"", "the file is empty"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char path[64];
        ReviewSet rs;
        Error err;
        write_temp(path, sizeof path, bad[i].text);
        assert_int_equal(reviews_read(&rs, path, &err), -1);
        remove(path);
        print_message("  %s\n", err.msg);
        assert_non_null(strstr(err.msg, path));
        assert_non_null(strstr(err.msg, bad[i].message));
        assert_null(rs.text);
    }
    ReviewSet rs;
    Error err;
    assert_int_equal(reviews_read(&rs, "/nonexistent/imdb.tsv", &err), -1);
    print_message("  %s\n", err.msg);
    assert_non_null(strstr(err.msg, "make imdb"));
    /* a folder whose imdb.tsv is not the whole set: the count is the file's */
    char dir[] = "/tmp/test10XXXXXX", path[64];
    Imdb d;
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/imdb.tsv", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("1\tgood\n0\tbad\n1\tfine\n", f);
    fclose(f);
    assert_int_equal(imdb_read(&d, dir, 1, &err), -1);
    print_message("  %s\n", err.msg);
    assert_non_null(strstr(err.msg, "imdb.tsv: 3 reviews, the IMDb set has 25000"));
    remove(path);
    rmdir(dir);
}

/* The merges as metadata text and back give the same tokenizer; broken
 * text is refused naming the file and the merge. */
static void test_merges_as_metadata(void **state)
{
    Bpe a, b;
    Text merges = {0};
    Error err;
    const char *corpus = "the film was the best film of the year, the best\n";
    assert_ok(bpe_init(&a, &err));
    assert_ok(bpe_train(&a, (const uint8_t *)corpus, strlen(corpus), 280, &err));
    assert_ok(bpe_merges_text(&a, &merges, &err));
    assert_ok(bpe_from_merges(&b, (const char *)merges.data, "m.safetensors", &err));
    assert_int_equal(b.n_merges, a.n_merges);
    assert_memory_equal(b.merges, a.merges, 2 * a.n_merges * sizeof(int64_t));
    int64_t ids[4];
    int length;
    assert_ok(review_encode(&b, "The BEST<br />film of all", 4, ids, &length, &err));
    assert_int_equal(length, 4);                  /* truncated to S */
    int64_t ids_a[4];
    assert_ok(review_encode(&a, "the best film of all", 4, ids_a, &length, &err));
    assert_memory_equal(ids, ids_a, sizeof ids);
    assert_ok(review_encode(&a, "<br />", 4, ids, &length, &err));
    assert_int_equal(length, 2);                  /* the leading space and the break's */
    assert_int_equal(ids[2], 0);                  /* then <pad> */
    assert_int_equal(review_encode(&a, "", 4, ids, &length, &err), -1);
    assert_non_null(strstr(err.msg, "the text is empty"));
    text_free(&merges);
    bpe_free(&a);
    bpe_free(&b);
    const char *broken[] = {"259 3", "3 4 5", "3 x", "3 4 3 4"};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(bpe_from_merges(&b, broken[i], "m.safetensors", &err), -1);
        print_message("  '%s': %s\n", broken[i], err.msg);
        assert_non_null(strstr(err.msg, "m.safetensors: metadata bpe.merges: merge"));
    }
}

/* Chapter 08's trainer on a classifier: rows of 6 ids over 12, the class is
 * whether id 7 occurs. Class 0 counts (it is no padding): every row is
 * scored; the loss falls and the classes are learnt. */
static void test_classifier_trains(void **state)
{
    enum { N = 256, S = 6, V = 12 };
    ReviewRows rows = {0};
    Rng rng;
    Error err;
    rng_seed(&rng, 7, 1);
    rows.n = N;
    rows.S = S;
    rows.ids = malloc(N * S * sizeof *rows.ids);
    rows.label = malloc(N * sizeof *rows.label);
    rows.length = malloc(N * sizeof *rows.length);
    for (int i = 0; i < N; i++) {
        int len = 2 + (int)rng_below(&rng, S - 1);  /* 2..S tokens, then <pad> */
        rows.label[i] = 0;
        for (int k = 0; k < S; k++) {
            int64_t id = k < len ? 3 + (int64_t)rng_below(&rng, V - 3) : 0;
            rows.ids[i * S + k] = id;
            if (id == 7) rows.label[i] = 1;
        }
        rows.length[i] = len;
    }
    Examples ex = review_examples(&rows, V);
    ModelConfig c = {0};
    c.kind = MODEL_CLASSIFIER;
    c.src_vocab = V;
    c.tgt_vocab = 2;
    c.d_model = 16;
    c.nhead = 2;
    c.dim_feedforward = 32;
    c.num_encoder_layers = 1;
    c.max_len = S;
    c.learned_pos = 1;
    c.pad_id = 0;
    c.eps = 1e-5f;
    Model m;
    OptimState opt;
    TrainState st = {0};
    assert_ok(model_init(&m, &c, &rng, &err));
    assert_ok(adam_state_alloc(&opt, m.num_params, &err));
    rng_seed(&st.data_rng, 7, 3);
    rng_seed(&st.dropout_rng, 7, 4);
    StepResult before, after;
    assert_ok(evaluate(&m, NULL, &ex, 50, &before, &err));
    assert_int_equal(before.count, N);               /* every row, label 0 too */
    TrainOptions o = {0};
    o.epochs = 30;
    o.batch_size = 16;
    o.adam = adam_default_config(1);
    o.adam.lr = 3e-3f;
    o.schedule = SCHEDULE_CONSTANT;
    o.bucket = 4;
    if (train_run(&m, &opt, &st, &o, &ex, &ex, &after, &err) != 0) fail_msg("%s", err.msg);
    print_message("  loss %.4f -> %.4f, accuracy %.3f -> %.3f\n", before.loss, after.loss,
                  (double)before.correct / N, (double)after.correct / N);
    assert_int_equal(after.count, N);
    assert_true(after.loss < 0.5 * before.loss);
    assert_true(after.correct >= 0.95 * N);

    /* A classifier refuses per-position examples, and a labeller these. */
    Examples wrong = ex;
    wrong.one_target = 0;
    assert_int_equal(evaluate(&m, NULL, &wrong, 50, &after, &err), -1);
    print_message("  %s\n", err.msg);
    assert_non_null(strstr(err.msg, "a classifier model needs per-sequence labelled examples"));
    optim_state_free(&opt);
    model_free(&m);
    review_rows_free(&rows);
}

/* The shipped model (models/imdb.safetensors) on texts of one to three
 * words. A text is cleaned as the training reviews were, a space before its
 * first word included; without that space the first word is cut into other
 * pieces than inside a review, and "terrible" came out positive (0.998). */
static void test_shipped_short_texts(void **state)
{
    static const struct {
        const char *text;
        int positive;
    } plain[] = {
        {"terrible", 0},      {"boring", 0},        {"terrible movie", 0}, {"awful", 0},
        {"a waste of time", 0}, {"a masterpiece", 1}, {"loved it", 1},     {"excellent", 1},
        {"wonderful film", 1},
    };
    Model m;
    Bpe bpe;
    int S, length;
    Error err;
    if (imdb_load_classifier(&m, &bpe, &S, SHIPPED_MODEL, &err) != 0) fail_msg("%s", err.msg);
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++) {
        double p;
        assert_ok(imdb_classify(&m, &bpe, S, plain[i].text, &p, &length, &err));
        print_message("  %-16s p(positive) = %.3f\n", plain[i].text, p);
        if ((p >= 0.5) != plain[i].positive)
            fail_msg("'%s': p(positive) = %.3f, but it is plainly %s", plain[i].text, p,
                     plain[i].positive ? "positive" : "negative");
    }
    bpe_free(&bpe);
    model_free(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_imdb_split),
        cmocka_unit_test(test_review_clean),
        cmocka_unit_test(test_reviews_read_and_split),
        cmocka_unit_test(test_reviews_refusals),
        cmocka_unit_test(test_merges_as_metadata),
        cmocka_unit_test(test_classifier_trains),
        cmocka_unit_test(test_shipped_short_texts),
    };
    return run_chapter_tests("10_classification", tests);
}
