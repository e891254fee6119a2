/*
 * 06_decoder.c - the chapter 06 program.
 *
 *     build/06_decoder --demo
 *     build/06_decoder --case in.safetensors --out out.safetensors
 *
 * The demo runs one small decoder layer with random parameters, prints the
 * shapes of everything that goes in and out, and then changes the last
 * target token to show causality: the outputs at the earlier positions do
 * not change by a single bit, while the changed position's output does. The
 * case mode evaluates this chapter's ops (cases/decoder_case.h has the list,
 * reference/ch06_decoder.py makes the cases).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "casefile.h"
#include "decoder_case.h"
#include "decoder_layer.h"
#include "rng.h"

static const char USAGE[] =
    "usage: 06_decoder --demo\n"
    "       06_decoder --case IN.safetensors --out OUT.safetensors\n";

enum { N = 1, T = 5, S = 3, D = 8, H = 2, F = 16 };

/* Parameter storage for one layer, filled with small random numbers. */
static float w_sa_in[3 * D * D], b_sa_in[3 * D], w_sa_out[D * D], b_sa_out[D];
static float w_ca_in[3 * D * D], b_ca_in[3 * D], w_ca_out[D * D], b_ca_out[D];
static float w1[F * D], b1[F], w2[D * F], b2[D], nw[3][D], nb[3][D];

static void fill(float *x, int n, float scale, float offset, Rng *rng)
{
    for (int i = 0; i < n; i++) x[i] = offset + scale * rng_normal(rng);
}

static void print_row(const char *title, const float *x, int n)
{
    printf("%s [", title);
    for (int i = 0; i < n; i++) printf(i ? ", %7.4f" : "%7.4f", x[i]);
    printf("]\n");
}

static int demo(void)
{
    Rng rng;
    rng_seed(&rng, 6, 0);
    float s = 1.0f / sqrtf((float)D);
    fill(w_sa_in, 3 * D * D, s, 0, &rng), fill(b_sa_in, 3 * D, 0.1f, 0, &rng);
    fill(w_sa_out, D * D, s, 0, &rng), fill(b_sa_out, D, 0.1f, 0, &rng);
    fill(w_ca_in, 3 * D * D, s, 0, &rng), fill(b_ca_in, 3 * D, 0.1f, 0, &rng);
    fill(w_ca_out, D * D, s, 0, &rng), fill(b_ca_out, D, 0.1f, 0, &rng);
    fill(w1, F * D, s, 0, &rng), fill(b1, F, 0.1f, 0, &rng);
    fill(w2, D * F, 1.0f / sqrtf((float)F), 0, &rng), fill(b2, D, 0.1f, 0, &rng);
    for (int k = 0; k < 3; k++) fill(nw[k], D, 0.1f, 1, &rng), fill(nb[k], D, 0.1f, 0, &rng);
    DecoderLayerParams p = {
        .self_attn = {.in_proj_weight = w_sa_in, .in_proj_bias = b_sa_in,
                      .out_proj_weight = w_sa_out, .out_proj_bias = b_sa_out},
        .multihead_attn = {.in_proj_weight = w_ca_in, .in_proj_bias = b_ca_in,
                           .out_proj_weight = w_ca_out, .out_proj_bias = b_ca_out},
        .linear1_weight = w1, .linear1_bias = b1, .linear2_weight = w2, .linear2_bias = b2,
        .norm_weight = {nw[0], nw[1], nw[2]}, .norm_bias = {nb[0], nb[1], nb[2]}};

    float tgt[N * T * D], memory[N * S * D], out[N * T * D], out2[N * T * D];
    fill(tgt, N * T * D, 1, 0, &rng);
    fill(memory, N * S * D, 1, 0, &rng);

    DecoderLayerCache c;
    Error err;
    LayerDims dims = {.N = N, .S = S, .T = T, .D = D, .H = H, .F = F, .eps = 1e-5f};
    if (decoder_layer_cache_alloc(&c, &dims, 0, &err) != 0) {
        fprintf(stderr, "06_decoder: %s\n", err.msg);
        return -1;
    }
    printf("One post-norm decoder layer: d_model D = %d, nhead H = %d, dim_feedforward F = %d\n"
           "  tgt    (N, T, D) = (%d, %d, %d)   the decoder's own positions\n"
           "  memory (N, S, D) = (%d, %d, %d)   the encoder's output\n"
           "  output (N, T, D) = (%d, %d, %d)   one vector per target position\n"
           "  self-attention weights (N, H, T, T), cross-attention weights (N, H, T, S)\n\n",
           D, H, F, N, T, D, N, S, D, N, T, D);
    DecoderMasks causal = {NULL, 1, NULL};   /* the future masked, without a bias */
    int rc = decoder_layer_forward(out, &c, tgt, memory, &p, &causal, NULL);
    float att_row[T];
    if (rc == 0) {
        printf("Causal self-attention, head 0: row i has weights only for keys j <= i\n");
        for (int i = 0; i < T; i++) {
            memcpy(att_row, c.sa.att + (size_t)i * T, sizeof att_row);
            char title[32];
            snprintf(title, sizeof title, "  query %d", i);
            print_row(title, att_row, T);
        }
        /* Change the last target token and run again. */
        for (int d = 0; d < D; d++) tgt[(T - 1) * D + d] += 1.0f;
        rc = decoder_layer_forward(out2, &c, tgt, memory, &p, &causal, NULL);
    }
    if (rc == 0) {
        printf("\nAdd 1 to every feature of target position %d and run the layer again:\n", T - 1);
        for (int i = 0; i < T; i++) {
            int same = memcmp(out + i * D, out2 + i * D, D * sizeof(float)) == 0;
            float diff = 0;
            for (int d = 0; d < D; d++) diff = fmaxf(diff, fabsf(out[i * D + d] - out2[i * D + d]));
            printf("  position %d: %s (largest change %.3g)\n", i,
                   same ? "bit-identical" : "changed      ", (double)diff);
        }
        printf("Earlier positions cannot see a later token: the decoder can be trained on a\n"
               "whole target sentence at once (teacher forcing) without peeking ahead.\n");
    }
    decoder_layer_cache_free(&c);
    return rc;
}

int main(int argc, char **argv)
{
    return case_main(argc, argv, USAGE, demo, decoder_case_eval);
}
