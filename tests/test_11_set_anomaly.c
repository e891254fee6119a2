/*
 * test_11_set_anomaly.c - chapter 11: the digits, the split and the sets
 * against the reference (golden/11_set_anomaly/digits_sets, made by
 * reference/ch11_set_anomaly.py from the same file), what makes a set, the
 * reader's refusals, a set model that ignores the order of its elements,
 * and chapter 08's trainer on sets.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "digits.h"
#include "helpers.h"
#include "loss.h"
#include "model.h"
#include "rng.h"
#include "safetensors.h"
#include "trainer.h"
#include "model_file.h"

#define CHAPTER "11_set_anomaly"

typedef struct {
    Digits digits;
    DigitPool train, test;
} Fixture;

static int fixture_open(void **state)
{
    Fixture *f = calloc(1, sizeof *f);
    Error err;
    if (!f) return -1;
    if (digits_read(&f->digits, DIGITS_PATH, &err) != 0 ||
        digits_split(&f->digits, &f->train, &f->test, &err) != 0) {
        print_error("%s\n", err.msg);
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

static int fixture_close(void **state)
{
    Fixture *f = *state;
    digit_pool_free(&f->train);
    digit_pool_free(&f->test);
    digits_free(&f->digits);
    free(f);
    return 0;
}

/* The pools, one after the other: digit 0's images, then digit 1's, ... */
static int64_t *pool_images(const DigitPool *p, int64_t *n)
{
    int64_t total = 0;
    for (int c = 0; c < DIGIT_CLASSES; c++) total += p->count[c];
    int64_t *all = malloc((size_t)(total ? total : 1) * sizeof *all);
    assert_non_null(all);
    *n = 0;
    for (int c = 0; c < DIGIT_CLASSES; c++)
        for (int64_t i = 0; i < p->count[c]; i++) all[(*n)++] = p->images[c][i];
    return all;
}

/* The split and the first sets of each side, exactly as the reference
 * draws them. */
static void test_digit_sets_match_reference(void **state)
{
    Fixture *fx = *state;
    TensorFile f;
    DigitSets train, test;
    Error err;
    load_golden(&f, CHAPTER, "digits_sets");
    const Tensor *counts = golden_tensor(&f, "class_counts", DTYPE_I64);
    int64_t n_train, n_test;
    for (int c = 0; c < DIGIT_CLASSES; c++) {
        assert_int_equal(fx->train.count[c], ((int64_t *)counts->data)[c]);
        assert_int_equal(fx->test.count[c], ((int64_t *)counts->data)[DIGIT_CLASSES + c]);
    }
    int64_t *tr = pool_images(&fx->train, &n_train), *te = pool_images(&fx->test, &n_test);
    assert_int_equal(n_train, golden_tensor(&f, "train_images", DTYPE_I64)->shape[0]);
    assert_int_equal(n_test, golden_tensor(&f, "test_images", DTYPE_I64)->shape[0]);
    assert_i64_equal_to_golden(&f, "train_images", tr, n_train);
    assert_i64_equal_to_golden(&f, "test_images", te, n_test);
    free(tr);
    free(te);
    if (digit_sets_draw(&train, &fx->digits, &fx->train, 8, SETS_SEED, SETS_TRAIN_STREAM,
                        &err) != 0 ||
        digit_sets_draw(&test, &fx->digits, &fx->test, 8, SETS_SEED, SETS_TEST_STREAM, &err) != 0)
        fail_msg("%s", err.msg);
    assert_i64_equal_to_golden(&f, "train_sets", train.images, 8 * SET_SIZE);
    assert_i64_equal_to_golden(&f, "train_odd", train.odd, 8);
    assert_i64_equal_to_golden(&f, "test_sets", test.images, 8 * SET_SIZE);
    assert_i64_equal_to_golden(&f, "test_odd", test.odd, 8);
    print_message("  %" PRId64 " training and %" PRId64 " test images, 8 + 8 sets as the "
                  "reference draws them\n", n_train, n_test);
    digit_sets_free(&train);
    digit_sets_free(&test);
    tensorfile_free(&f);
}

/* The per-set softmax head against PyTorch: a small set model scores four
 * training sets, the loss is the cross-entropy of the softmax over each
 * set's ten scores (chapter 08's cross_entropy with the set as the row), and
 * the loss, its gradient with respect to the scores and every parameter's
 * gradient match the reference's float64 values. */
static void test_set_head_matches_reference(void **state)
{
    (void)state;
    TensorFile f;
    Model m;
    ModelWork w;
    Error err;
    double atol, rtol;
    load_golden(&f, CHAPTER, "set_head");
    golden_tolerance(&f, &atol, &rtol);
    if (model_load_file(&m, &f, 0, &err) != 0) fail_msg("%s", err.msg);
    const Tensor *x = golden_tensor(&f, "features", DTYPE_F32);
    const Tensor *odd = golden_tensor(&f, "odd", DTYPE_I64);
    int N = (int)x->shape[0], S = (int)x->shape[1];
    assert_int_equal(x->shape[2], m.cfg.input_dim);
    assert_ok(model_work_alloc(&w, &m, N, S, 0, 1, &err));
    w.features = x->data;
    assert_ok(model_forward(&m, &w, NULL, NULL, NULL));
    float loss, dscores[N * S];
    int64_t count, correct;
    if (cross_entropy(&loss, dscores, w.logits, odd->data, N, S, CROSS_ENTROPY_IGNORE_INDEX,
                      0.0f, &count, &correct, &err) != 0)
        fail_msg("%s", err.msg);
    assert_int_equal(count, N);
    model_zero_grad(&m);
    assert_ok(model_backward(&m, &w, dscores));
    assert_close_to_golden(&f, "loss", &loss, 1, atol, rtol);
    assert_close_to_golden(&f, "grad_scores", dscores, N * S, atol, rtol);
    for (int i = 0; i < m.n_tensors; i++) {
        char name[80];
        snprintf(name, sizeof name, "grad_%s", m.tensors[i].name);
        assert_close_to_golden(&f, name, m.grads + m.tensors[i].offset,
                               (int64_t)m.tensors[i].numel, atol, rtol);
    }
    model_work_free(&w);
    model_free(&m);
    tensorfile_free(&f);
}

/* Every set: nine distinct images of one digit and one of another, the odd
 * one where the answer says, all from its own side of the split; the odd
 * one lands on every position about equally often. */
static void test_sets_are_well_formed(void **state)
{
    Fixture *fx = *state;
    enum { N = 3000 };
    int64_t at[SET_SIZE] = {0};
    uint8_t *is_test = calloc((size_t)fx->digits.n, 1);
    for (int c = 0; c < DIGIT_CLASSES; c++)
        for (int64_t i = 0; i < fx->test.count[c]; i++) is_test[fx->test.images[c][i]] = 1;
    for (int side = 0; side < 2; side++) {
        DigitSets s;
        Error err;
        if (digit_sets_draw(&s, &fx->digits, side ? &fx->test : &fx->train, N, SETS_SEED,
                            side ? SETS_TEST_STREAM : SETS_TRAIN_STREAM, &err) != 0)
            fail_msg("%s", err.msg);
        for (int64_t k = 0; k < N; k++) {
            const int64_t *im = s.images + k * SET_SIZE;
            int64_t odd = s.odd[k], common = fx->digits.label[im[odd == 0 ? 1 : 0]];
            assert_true(odd >= 0 && odd < SET_SIZE);
            assert_int_not_equal(fx->digits.label[im[odd]], common);
            for (int i = 0; i < SET_SIZE; i++) {
                assert_int_equal(is_test[im[i]], side);
                if (i != odd) assert_int_equal(fx->digits.label[im[i]], common);
                for (int j = 0; j < i; j++) assert_int_not_equal(im[i], im[j]);
            }
            if (side == 0) at[odd]++;
        }
        digit_sets_free(&s);
    }
    /* 300 expected per position; a binomial's standard deviation is 16 */
    for (int i = 0; i < SET_SIZE; i++) assert_true(at[i] > 230 && at[i] < 370);
    free(is_test);
}

/* Writes a digits file with the given tensors for the refusal tests. */
static void write_digits(const char *path, const float *pixels, int64_t n, int64_t cols,
                         const int64_t *labels)
{
    TensorFile f = {0};
    Error err;
    Tensor y;
    assert_ok(tensorfile_add_f32(&f, "pixels", pixels, 2, (int64_t[]){n, cols}, &err));
    assert_ok(tensor_alloc(&y, DTYPE_I64, 1, (int64_t[]){n}, &err));
    memcpy(y.data, labels, (size_t)n * sizeof *labels);
    assert_ok(tensorfile_add(&f, "labels", &y, &err));
    assert_ok(safetensors_write(path, &f, &err));
    tensorfile_free(&f);
}

static void test_digits_refusals(void **state)
{
    (void)state;
    char path[64];
    float pixels[3 * DIGIT_PIXELS] = {0};
    int64_t labels[3] = {1, 2, 3};
    Digits d;
    Error err;
    snprintf(path, sizeof path, "build/tmp_digits_%d.safetensors", (int)getpid());
    const struct {
        int64_t cols;
        int pixel, label;           /* which value to spoil, or -1 */
        float pixel_value;
        int64_t label_value;
        const char *expect;
    } cases[] = {
        {63, -1, -1, 0, 0, "do not describe n >= 1 images of 64 pixels"},
        {64, 70, -1, 17.0f, 0, "pixel 6 of image 1 is 17, not in 0..16"},
        {64, 5, -1, NAN, 0, "pixel 5 of image 0 is nan, not in 0..16"},
        {64, -1, 2, 0, 10, "label 10 of image 2 is not a digit 0..9"},
        {64, -1, 0, 0, -1, "label -1 of image 0 is not a digit 0..9"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        float p[3 * DIGIT_PIXELS];
        int64_t y[3];
        memcpy(p, pixels, sizeof p);
        memcpy(y, labels, sizeof y);
        if (cases[k].pixel >= 0) p[cases[k].pixel] = cases[k].pixel_value;
        if (cases[k].label >= 0) y[cases[k].label] = cases[k].label_value;
        write_digits(path, p, 3, cases[k].cols, y);
        assert_int_equal(digits_read(&d, path, &err), -1);
        print_message("  %s\n", err.msg);
        assert_non_null(strstr(err.msg, path));
        assert_non_null(strstr(err.msg, cases[k].expect));
    }
    /* Too few images of a digit for a set: refused by the split. */
    write_digits(path, pixels, 3, 64, labels);
    DigitPool train, test;
    assert_ok(digits_read(&d, path, &err));
    assert_int_equal(digits_split(&d, &train, &test, &err), -1);
    print_message("  %s\n", err.msg);
    assert_non_null(strstr(err.msg, "a set needs 9 of one digit"));
    digits_free(&d);
    unlink(path);
}

static ModelConfig set_config(int D, int H, int layers, float dropout)
{
    ModelConfig c = {0};
    c.kind = MODEL_SET;
    c.src_vocab = 0;
    c.tgt_vocab = 1;
    c.input_dim = DIGIT_PIXELS;
    c.d_model = D;
    c.nhead = H;
    c.dim_feedforward = 2 * D;
    c.num_encoder_layers = layers;
    c.max_len = SET_SIZE;
    c.pad_id = -1;
    c.eps = 1e-5f;
    c.dropout = dropout;
    return c;
}

/* With no positional encoding the encoder sees a set: permuting the
 * elements of a set permutes their scores and changes nothing else (up to
 * the order of float32 sums inside the attention). */
static void test_set_scores_permute(void **state)
{
    (void)state;
    enum { N = 4, S = SET_SIZE, I = DIGIT_PIXELS };
    ModelConfig c = set_config(32, 4, 2, 0.0f);
    Model m;
    ModelWork w;
    Rng rng;
    Error err;
    rng_seed(&rng, 11, 0);
    assert_ok(model_init(&m, &c, &rng, &err));
    assert_ok(model_work_alloc(&w, &m, N, S, 0, 0, &err));
    float x[N * S * I], xp[N * S * I], scores[N * S];
    int perm[N][S];
    for (int i = 0; i < N * S * I; i++) x[i] = rng_uniform(&rng);
    for (int n = 0; n < N; n++) {
        for (int s = 0; s < S; s++) perm[n][s] = s;
        for (int s = S - 1; s > 0; s--) {
            int j = (int)rng_below(&rng, (uint32_t)s + 1), t = perm[n][s];
            perm[n][s] = perm[n][j];
            perm[n][j] = t;
        }
        for (int s = 0; s < S; s++)     /* element s of the permuted set is perm[n][s] */
            memcpy(xp + ((size_t)n * S + s) * I, x + ((size_t)n * S + perm[n][s]) * I,
                   I * sizeof *x);
    }
    w.features = x;
    assert_ok(model_forward(&m, &w, NULL, NULL, NULL));
    memcpy(scores, w.logits, sizeof scores);
    w.features = xp;
    assert_ok(model_forward(&m, &w, NULL, NULL, NULL));
    double worst = 0.0, largest = 0.0;
    for (int n = 0; n < N; n++) {
        for (int s = 0; s < S; s++) {
            double want = scores[n * S + perm[n][s]], got = w.logits[n * S + s];
            worst = fmax(worst, fabs(got - want));
            largest = fmax(largest, fabs(want));
        }
    }
    print_message("  largest score %.3f, largest change under permutation %.2e\n", largest,
                  worst);
    assert_true(worst <= 1e-5 * fmax(largest, 1.0));
    /* and the scores do depend on the elements: not all the same */
    assert_true(fabs(scores[0] - scores[1]) > 1e-3);
    model_work_free(&w);
    model_free(&m);
}

/* The set model's config rules, and its checkpoint round trip. */
static void test_set_model_config_and_file(void **state)
{
    (void)state;
    Model m, back;
    Rng rng;
    Error err;
    ModelConfig c = set_config(16, 2, 1, 0.1f), bad;
    bad = c, bad.input_dim = 0;
    assert_int_equal(model_config_check(&bad, &err), -1);
    assert_non_null(strstr(err.msg, "a set model needs input_dim >= 1"));
    bad = c, bad.src_vocab = 5;
    assert_int_equal(model_config_check(&bad, &err), -1);
    bad = c, bad.learned_pos = 1;
    assert_int_equal(model_config_check(&bad, &err), -1);
    assert_non_null(strstr(err.msg, "no padding, positions"));
    bad = c, bad.kind = MODEL_LABELLER, bad.src_vocab = 5, bad.tgt_vocab = 3;
    assert_int_equal(model_config_check(&bad, &err), -1);
    assert_non_null(strstr(err.msg, "only a set model reads features"));

    rng_seed(&rng, 5, 0);
    assert_ok(model_init(&m, &c, &rng, &err));
    assert_null(m.pos_table);                       /* a set has no positions */
    assert_non_null(model_tensor(&m, "input_net.weight"));
    assert_null(model_tensor(&m, "src_embed.weight"));
    char path[64];
    snprintf(path, sizeof path, "build/tmp_set_model_%d.safetensors", (int)getpid());
    assert_ok(model_save(&m, path, &err));
    if (model_load(&back, path, &err) != 0) fail_msg("%s", err.msg);
    assert_int_equal(back.cfg.kind, MODEL_SET);
    assert_int_equal(back.cfg.input_dim, DIGIT_PIXELS);
    assert_int_equal(back.num_params, m.num_params);
    assert_memory_equal(back.params, m.params, m.num_params * sizeof *m.params);
    model_free(&back);

    /* a set model's file with a bad input_dim, and another kind's file
     * with one, are refused by name */
    TensorFile f = {0};
    Model other;
    assert_ok(model_to_file(&m, &f, &err));
    assert_ok(tensorfile_set_meta(&f, "model.input_dim", "0", &err));
    assert_int_equal(model_load_file(&back, &f, 1, &err), -1);
    print_message("  %s\n", err.msg);
    assert_non_null(strstr(err.msg, "a set model needs input_dim >= 1"));
    tensorfile_free(&f);
    bad = c, bad.kind = MODEL_LABELLER, bad.src_vocab = 5, bad.tgt_vocab = 3, bad.input_dim = 0;
    assert_ok(model_init(&other, &bad, &rng, &err));
    assert_ok(model_to_file(&other, &f, &err));
    assert_null(tensorfile_meta(&f, "model.input_dim"));   /* the other kinds' files are as before */
    assert_ok(tensorfile_set_meta(&f, "model.input_dim", "64", &err));
    assert_int_equal(model_load_file(&back, &f, 1, &err), -1);
    print_message("  %s\n", err.msg);
    assert_non_null(strstr(err.msg, "'model.input_dim': a labeller model has no input_dim"));
    tensorfile_free(&f);
    model_free(&other);
    unlink(path);
    model_free(&m);
}

/* Chapter 08's trainer on real sets: a small model learns to find the odd
 * digit, and a set model refuses examples that are not sets. */
static void test_set_model_trains(void **state)
{
    Fixture *fx = *state;
    DigitSets train, test;
    Model m;
    OptimState opt;
    TrainState st = {0};
    Rng rng;
    Error err;
    if (digit_sets_draw(&train, &fx->digits, &fx->train, 2000, SETS_SEED, SETS_TRAIN_STREAM,
                        &err) != 0 ||
        digit_sets_draw(&test, &fx->digits, &fx->test, 500, SETS_SEED, SETS_TEST_STREAM,
                        &err) != 0)
        fail_msg("%s", err.msg);
    Examples tr = digit_set_examples(&train), te = digit_set_examples(&test);
    ModelConfig c = set_config(32, 4, 1, 0.0f);
    rng_seed(&rng, 3, 2);
    assert_ok(model_init(&m, &c, &rng, &err));
    assert_ok(adam_state_alloc(&opt, m.num_params, &err));
    rng_seed(&st.data_rng, 3, 3);
    rng_seed(&st.dropout_rng, 3, 4);
    StepResult before, after;
    assert_ok(evaluate(&m, NULL, &te, 64, &before, &err));
    assert_int_equal(before.count, 500);             /* one answer per set */
    TrainOptions o = {0};
    o.epochs = 4;
    o.batch_size = 32;
    o.adam = adam_default_config(1);
    o.adam.lr = 2e-3f;
    o.schedule = SCHEDULE_CONSTANT;
    if (train_run(&m, &opt, &st, &o, &tr, &te, &after, &err) != 0) fail_msg("%s", err.msg);
    print_message("  test sets: loss %.4f -> %.4f, accuracy %.3f -> %.3f\n", before.loss,
                  after.loss, (double)before.correct / 500, (double)after.correct / 500);
    /* chance is ln(10) = 2.30 and 0.1 */
    assert_true(before.loss > 2.0);
    assert_true(after.loss < 1.0);
    assert_true(after.correct >= 0.6 * 500);

    Examples wrong = te;
    wrong.input_dim = 0;
    assert_int_equal(evaluate(&m, NULL, &wrong, 50, &after, &err), -1);
    print_message("  %s\n", err.msg);
    assert_non_null(strstr(err.msg, "a set model needs set examples"));
    optim_state_free(&opt);
    model_free(&m);
    digit_sets_free(&train);
    digit_sets_free(&test);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_digit_sets_match_reference, fixture_open,
                                        fixture_close),
        cmocka_unit_test_setup_teardown(test_sets_are_well_formed, fixture_open, fixture_close),
        cmocka_unit_test(test_set_head_matches_reference),
        cmocka_unit_test(test_digits_refusals),
        cmocka_unit_test(test_set_scores_permute),
        cmocka_unit_test(test_set_model_config_and_file),
        cmocka_unit_test_setup_teardown(test_set_model_trains, fixture_open, fixture_close),
    };
    return run_chapter_tests("11_set_anomaly", tests);
}
