/*
 * 07_model.c - the chapter 07 program.
 *
 *     build/07_model --demo
 *     build/07_model --case in.safetensors --out out.safetensors
 *
 * The demo builds a tiny encoder-decoder with PyTorch's initialisation,
 * lists its tensors under their state_dict names, runs it on a padded batch,
 * prints the shapes, the masks as the attention weights show them, the top-3
 * tokens at each target position and a greedy and a beam decode; then the
 * shapes of the labeller and the classifier. The model is untrained, so what
 * it writes is noise: chapter 08 trains one. The case mode evaluates this
 * chapter's ops (cases/model_case.h has the list, reference/ch07_model.py makes
 * the cases).
 */
#include <stdio.h>
#include <string.h>

#include "casefile.h"
#include "decode.h"
#include "model.h"
#include "model_case.h"
#include "rng.h"

static const char USAGE[] =
    "usage: 07_model --demo\n"
    "       07_model --case IN.safetensors --out OUT.safetensors\n";

/* The seq2seq id layout of chapter 01: specials first, then the tokens. */
enum { PAD = 0, SOS = 1, EOS = 2 };
enum { N = 2, S = 5, T = 4, V = 11, MAX_NEW = 6 };

static void print_ids(const char *title, const int64_t *ids, int n)
{
    printf("%s", title);
    for (int i = 0; i < n; i++) printf(" %2lld", (long long)ids[i]);
    printf("\n");
}

static void print_attention(const char *title, const float *att, int rows, int cols)
{
    printf("%s\n", title);
    for (int i = 0; i < rows; i++) {
        printf("    query %d:", i);
        for (int j = 0; j < cols; j++) printf(" %5.3f", (double)att[i * cols + j]);
        printf("\n");
    }
}

/* The logits' shape and the classes the other two kinds of model predict. */
static int demo_encoder_only(ModelKind kind, const int64_t *src, Rng *rng)
{
    ModelConfig cfg = {.kind = kind, .src_vocab = V, .tgt_vocab = 3, .d_model = 16,
                       .nhead = 2, .dim_feedforward = 32, .num_encoder_layers = 1,
                       .max_len = 8, .final_norm = 1, .pad_id = PAD, .eps = 1e-5f};
    Model m;
    ModelWork w;
    Error err;
    if (model_init(&m, &cfg, rng, &err) != 0 || model_work_alloc(&w, &m, N, S, 0, 0, &err)) {
        fprintf(stderr, "07_model: %s\n", err.msg);
        return -1;
    }
    int rc = model_forward(&m, &w, src, NULL, NULL);
    if (rc == 0) {
        int64_t ids[N * S];
        float probs[N * S];
        rc = model_topk(w.logits, w.rows, 3, 1, ids, probs);
        if (kind == MODEL_LABELLER) {
            printf("Labeller (3 classes): logits (N, S, 3) = (%d, %d, 3), one class per "
                   "source position\n", N, S);
            for (int n = 0; rc == 0 && n < N; n++) print_ids("  argmax", ids + n * S, S);
        } else {
            printf("Classifier (3 classes): logits (N, 3) = (%d, 3), the encoder's output "
                   "averaged over the non-padding positions\n", N);
            if (rc == 0) print_ids("  argmax", ids, N);
        }
    }
    model_work_free(&w);
    model_free(&m);
    return rc;
}

static int demo(void)
{
    ModelConfig cfg = {.kind = MODEL_SEQ2SEQ, .src_vocab = V, .tgt_vocab = V, .d_model = 16,
                       .nhead = 2, .dim_feedforward = 32, .num_encoder_layers = 1,
                       .num_decoder_layers = 1, .max_len = 8, .scale_embedding = 1,
                       .final_norm = 1, .pad_id = PAD, .eps = 1e-5f};
    /* two sources, the second padded; targets <sos> + tokens, the second padded */
    const int64_t src[N * S] = {5, 7, 3, 9, 4, 8, 6, 10, PAD, PAD};
    const int64_t tgt[N * T] = {SOS, 4, 9, 3, SOS, 10, PAD, PAD};
    Rng rng;
    rng_seed(&rng, 7, 0);
    Model m;
    ModelWork w;
    Error err;
    if (model_init(&m, &cfg, &rng, &err) != 0) {
        fprintf(stderr, "07_model: %s\n", err.msg);
        return -1;
    }
    printf("A seq2seq Transformer: vocabularies %d (PAD 0, SOS 1, EOS 2, tokens 3..10), "
           "d_model %d, %d heads, FFN %d, %d + %d layers, %zu parameters in %d tensors:\n",
           V, cfg.d_model, cfg.nhead, cfg.dim_feedforward, cfg.num_encoder_layers,
           cfg.num_decoder_layers, m.num_params, m.n_tensors);
    for (int i = 0; i < m.n_tensors; i++) {
        const ModelTensor *t = &m.tensors[i];
        char shape[48];
        if (t->ndim == 2) snprintf(shape, sizeof shape, "(%lld, %lld)", (long long)t->shape[0],
                                   (long long)t->shape[1]);
        else snprintf(shape, sizeof shape, "(%lld,)", (long long)t->shape[0]);
        printf("  %-48s %-9s%s", t->name, shape, i % 2 ? "\n" : "");
    }
    printf("%s\n", m.n_tensors % 2 ? "\n" : "");

    int rc = model_work_alloc(&w, &m, N, S, T, 0, &err);
    if (rc != 0) {
        fprintf(stderr, "07_model: %s\n", err.msg);
        model_free(&m);
        return -1;
    }
    rc = model_forward(&m, &w, src, tgt, NULL);
    if (rc == 0) {
        printf("src (N, S) = (%d, %d), tgt (N, T) = (%d, %d) -> memory (N, S, D) = (%d, %d, "
               "%d) -> logits (N, T, Vt) = (%d, %d, %d)\n", N, S, N, T, N, S, cfg.d_model, N,
               T, V);
        print_ids("  src[1]", src + S, S);
        print_ids("  tgt[1]", tgt + T, T);
        print_attention("Sequence 1, decoder self-attention (layer 0, head 0): causal, and the "
                        "padded target keys 2, 3 get 0",
                        model_attention(&w, &m, ATTN_DECODER_SELF, 0, 1, 0), T, T);
        print_attention("Sequence 1, cross-attention (layer 0, head 0): the padded source "
                        "keys 3, 4 get 0",
                        model_attention(&w, &m, ATTN_DECODER_CROSS, 0, 1, 0), T, S);
        int64_t ids[N * T * 3];
        float probs[N * T * 3];
        rc = model_topk(w.logits, w.rows, V, 3, ids, probs);
        printf("Top-3 next tokens of sequence 0 (softmax of the logits):\n");
        for (int t = 0; rc == 0 && t < T; t++) {
            printf("  after tgt[0][%d] = %2lld:", t, (long long)tgt[t]);
            for (int j = 0; j < 3; j++)
                printf("  %2lld (%.3f)", (long long)ids[t * 3 + j], (double)probs[t * 3 + j]);
            printf("\n");
        }
    }
    model_work_free(&w);

    DecodeOptions d = {.sos_id = SOS, .eos_id = EOS, .max_new = MAX_NEW, .beam_width = 3,
                       .length_penalty = 0.6f};
    int64_t out[N * MAX_NEW];
    float scores[N];
    if (rc == 0 && (rc = decode_greedy(&m, src, N, S, &d, out, scores, &err)) == 0) {
        printf("Greedy decoding (at most %d tokens, <eos> = 2, then padding):\n", MAX_NEW);
        for (int n = 0; n < N; n++) {
            print_ids("  ", out + n * MAX_NEW, MAX_NEW);
            printf("    sum of log-probabilities %.4f\n", (double)scores[n]);
        }
    }
    if (rc == 0 && (rc = decode_beam(&m, src, N, S, &d, out, scores, &err)) == 0) {
        printf("Beam search (width 3, length penalty 0.6):\n");
        for (int n = 0; n < N; n++) {
            print_ids("  ", out + n * MAX_NEW, MAX_NEW);
            printf("    normalised score %.4f\n", (double)scores[n]);
        }
    }
    if (rc != 0 && err.msg[0]) fprintf(stderr, "07_model: %s\n", err.msg);
    model_free(&m);
    if (rc == 0) rc = demo_encoder_only(MODEL_LABELLER, src, &rng);
    if (rc == 0) rc = demo_encoder_only(MODEL_CLASSIFIER, src, &rng);
    if (rc == 0)
        printf("\nThese models are untrained: what they write is noise. Chapter 08 trains "
               "them\n(build/08_training --demo); reference/ch07_model.py loads their "
               "checkpoints into PyTorch.\n");
    return rc;
}

int main(int argc, char **argv)
{
    return case_main(argc, argv, USAGE, demo, model_case_eval);
}
