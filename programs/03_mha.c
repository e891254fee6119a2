/*
 * 03_mha.c - the chapter 03 program.
 *
 *     build/03_mha --demo
 *     build/03_mha --case in.safetensors --out out.safetensors
 *
 * The demo runs the README's worked example: self-attention over three
 * tokens of D = 4 features with two heads, every projection the identity, so
 * head 0 looks only at features 0-1 and head 1 only at features 2-3. It
 * prints each head's weights, their average (what nn.MultiheadAttention
 * returns by default) and the output, then does it again with a
 * key_padding_mask that hides the last token. The case mode evaluates ops
 * mha and mha_backward (tensor names and options in cases/mha_case.h, the cases in
 * reference/ch03_mha.py).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "casefile.h"
#include "mha.h"
#include "mha_case.h"

static const char USAGE[] =
    "usage: 03_mha --demo\n"
    "       03_mha --case IN.safetensors --out OUT.safetensors\n";

enum { N = 1, L = 3, D = 4, H = 2 };   /* self-attention: S = L */

static void print_matrix(const char *title, const float *m, int rows, int cols)
{
    printf("  %s\n", title);
    for (int r = 0; r < rows; r++) {
        printf("    ");
        for (int c = 0; c < cols; c++) printf(" %8.4f", m[r * cols + c]);
        printf("\n");
    }
}

/* One forward pass of the example, with or without a key_padding_mask, and
 * its weights and output printed. */
static int run(const MhaParams *p, const float *x, const uint8_t *key_padding_mask)
{
    MhaCache cache;
    Error err;
    if (mha_cache_alloc(&cache, &(MhaDims){N, L, L, D, H, D, D}, 0, &err) != 0) {
        fprintf(stderr, "03_mha: %s\n", err.msg);
        return -1;
    }
    float out[N * L * D], avg[N * L * L], bias[N * H * L * L];
    int rc = 0;
    if (key_padding_mask)
        rc = mha_mask_bias(bias, key_padding_mask, 1, NULL, 0, 0, N, H, L, L);
    if (rc == 0)
        rc = mha_forward(out, &cache, x, x, x, p, key_padding_mask ? bias : NULL, 0);
    if (rc == 0) rc = mha_average_heads(avg, cache.att, N, H, L, L);
    if (rc == 0) {
        print_matrix("head 0 weights (features 0-1), rows = queries, columns = keys:",
                     cache.att, L, L);
        print_matrix("head 1 weights (features 2-3):", cache.att + L * L, L, L);
        print_matrix("averaged over the heads (need_weights, average_attn_weights):", avg, L,
                     L);
        print_matrix("output (L, D) = heads concatenated, then out_proj:", out, L, D);
    }
    mha_cache_free(&cache);
    return rc;
}

static int demo(void)
{
    /* Identity projections: w[0] = w[1] = w[2] = out_proj_weight = I (4, 4), no biases. */
    float in_proj_weight[3 * D * D] = {0}, out_proj_weight[D * D] = {0};
    for (int i = 0; i < 3 * D; i++) in_proj_weight[i * D + i % D] = 1.0f;
    for (int i = 0; i < D; i++) out_proj_weight[i * D + i] = 1.0f;
    MhaParams p = {.in_proj_weight = in_proj_weight, .out_proj_weight = out_proj_weight};

    const float x[N * L * D] = {
        1, 0, 0, 1,    /* token 0 */
        0, 1, 1, 0,    /* token 1 */
        1, 1, 0, 0,    /* token 2 */
    };
    printf("Multi-head self-attention, nn.MultiheadAttention(4, 2, bias=False,\n"
           "batch_first=True) with every projection the identity: L = S = 3 tokens,\n"
           "D = 4 features, 2 heads of Dh = 2 features, scale 1/sqrt(2).\n\n");
    print_matrix("x (L, D):", x, L, D);
    printf("\n-- no mask\n");
    if (run(&p, x, NULL) != 0) return -1;

    /* nn.MultiheadAttention's convention: true = IGNORE this key. */
    const uint8_t pad[N * L] = {0, 0, 1};
    printf("\n-- key_padding_mask = [False, False, True]: token 2 is padding, no query\n"
           "   may look at it (column 2 is 0 in every head)\n");
    return run(&p, x, pad);
}

int main(int argc, char **argv)
{
    return case_main(argc, argv, USAGE, demo, mha_case_eval);
}
