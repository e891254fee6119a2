/*
 * 05_encoder.c - the chapter 05 program.
 *
 *     build/05_encoder --demo
 *     build/05_encoder --case in.safetensors --out out.safetensors
 *     build/05_encoder --plot-data DIR
 *
 * The demo embeds a short id sequence with the sqrt(D) scale, prints
 * sinusoidal encodings small enough to check by hand and adds them, runs
 * one position through the feed-forward block, measures dropout's
 * statistics, and runs a post-norm and a pre-norm encoder layer on the same
 * input to show where their outputs differ. The case mode evaluates this
 * chapter's ops (cases/encoder_case.h has the list, reference/ch05_encoder.py
 * makes the cases). --plot-data writes
 * the data that plots/positional_encoding.gp and plots/positional_curves.gp
 * draw (make plots runs both).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "casefile.h"
#include "dropout.h"
#include "embedding.h"
#include "encoder_case.h"
#include "encoder_layer.h"
#include "ffn.h"
#include "positional.h"
#include "rng.h"
#include "safetensors.h"   /* TextOut */

static const char USAGE[] =
    "usage: 05_encoder --demo\n"
    "       05_encoder --case IN.safetensors --out OUT.safetensors\n"
    "       05_encoder --plot-data DIR\n";

static void print_rows(const char *title, const float *m, int rows, int cols, int first_row)
{
    printf("%s\n", title);
    for (int r = 0; r < rows; r++) {
        printf("  %2d [", first_row + r);
        for (int c = 0; c < cols; c++) printf(c ? ", %8.4f" : "%8.4f", m[r * cols + c]);
        printf("]\n");
    }
}

/* The mean and the standard deviation of one row of D values. */
static void row_stats(const float *x, int D, double *mean, double *std)
{
    double s = 0, ss = 0;
    for (int d = 0; d < D; d++) s += x[d];
    *mean = s / D;
    if (fabs(*mean) < 1e-6) *mean = 0.0;   /* print 0.0000, not -0.0000 */
    for (int d = 0; d < D; d++) ss += (x[d] - *mean) * (x[d] - *mean);
    *std = sqrt(ss / D);
}

/* One encoder layer, D = 8, H = 2, F = 16, on 4 positions whose scale grows
 * (row t is (t + 1) * a random row), with weights from the project's RNG
 * and LayerNorms at their initial weight 1, bias 0. Post-norm ends in
 * norm2, so every output row has mean 0 and spread 1; pre-norm adds its
 * sub-layers to the input, which keeps its scale. The last position is
 * padding: its key is masked, yet its own row is computed like the others. */
static int demo_encoder_layer(void)
{
    enum { N = 1, S = 4, D = 8, H = 2, F = 16 };
    static float w_in[3 * D * D], b_in[3 * D], w_out[D * D], b_out[D], w1[F * D], b1[F],
        w2[D * F], b2[D], ones[D], zeros[D], src[S * D], out[S * D], bias[N * H * S * S];
    Rng rng;
    rng_seed(&rng, 2017, 0);
    float *all[] = {w_in, b_in, w_out, b_out, w1, b1, w2, b2};
    int sizes[] = {3 * D * D, 3 * D, D * D, D, F * D, F, D * F, D};
    for (int k = 0; k < 8; k++)
        for (int i = 0; i < sizes[k]; i++)
            all[k][i] = (rng_uniform(&rng) * 2.0f - 1.0f) * (k % 2 ? 0.1f : 0.5f);
    for (int d = 0; d < D; d++) ones[d] = 1.0f, zeros[d] = 0.0f;
    for (int t = 0; t < S; t++)
        for (int d = 0; d < D; d++) src[t * D + d] = (t + 1) * (rng_uniform(&rng) * 2.0f - 1.0f);
    uint8_t padding[N * S] = {0, 0, 0, 1};
    if (mha_mask_bias(bias, padding, 1, NULL, 0, 0, N, H, S, S) != 0) return -1;
    EncoderLayerParams p = {
        .self_attn = {.in_proj_weight = w_in, .in_proj_bias = b_in, .out_proj_weight = w_out,
                      .out_proj_bias = b_out},
        .linear1_weight = w1, .linear1_bias = b1, .linear2_weight = w2, .linear2_bias = b2,
        .norm1_weight = ones, .norm1_bias = zeros, .norm2_weight = ones, .norm2_bias = zeros};

    printf("\nEncoder layer, D = %d, H = %d, F = %d, one sequence of %d positions (the last "
           "is padding); row t of src is (t + 1) times a random row\n", D, H, F, S);
    printf("  position           src mean / std      post-norm out       pre-norm out\n");
    double stats[2][S][2];
    for (int norm_first = 0; norm_first < 2; norm_first++) {
        EncoderLayerCache cache;
        Error err;
        LayerDims dims = {.N = N, .S = S, .D = D, .H = H, .F = F, .norm_first = norm_first,
                          .eps = 1e-5f, .dropout = 0.0f};
        if (encoder_layer_cache_alloc(&cache, &dims, 0, &err) != 0) {
            fprintf(stderr, "05_encoder: %s\n", err.msg);
            return -1;
        }
        int rc = encoder_layer_forward(out, &cache, src, &p, bias, NULL);
        encoder_layer_cache_free(&cache);
        if (rc != 0) return -1;
        for (int t = 0; t < S; t++)
            row_stats(out + t * D, D, &stats[norm_first][t][0], &stats[norm_first][t][1]);
    }
    for (int t = 0; t < S; t++) {
        double m, sd;
        row_stats(src + t * D, D, &m, &sd);
        printf("  %d%-9s  %8.4f / %6.4f   %8.4f / %6.4f   %8.4f / %6.4f\n", t,
               t == S - 1 ? " (pad)" : "", m, sd, stats[0][t][0], stats[0][t][1],
               stats[1][t][0], stats[1][t][1]);
    }
    return 0;
}

static int demo(void)
{
    /* A vocabulary of 5 tokens, D = 4: row v of the table is v + [0.1, 0.2, 0.3, 0.4]. */
    enum { V = 5, D = 4, T = 4, F = 3 };
    float weight[V * D];
    for (int v = 0; v < V; v++)
        for (int d = 0; d < D; d++) weight[v * D + d] = v + 0.1f * (d + 1);
    int64_t ids[T] = {3, 1, 4, 1};
    float emb[T * D], pe[T * D], x[T * D];
    float scale = sqrtf((float)D);
    printf("Token embedding: ids [3, 1, 4, 1], table row v = v + [0.1, 0.2, 0.3, 0.4], "
           "scale sqrt(D) = %.0f\n", scale);
    if (embedding_forward(emb, ids, weight, 1, T, D, scale) != 0) return -1;
    print_rows("  output (T, D); the two 1s get the same row:", emb, T, D, 0);

    if (positional_sinusoidal_table(pe, T, D) != 0) return -1;
    printf("\nSinusoidal encoding, D = 4: frequencies w_0 = 1, w_1 = 10000^(-2/4) = 0.01\n"
           "  PE[pos] = [sin(pos), cos(pos), sin(0.01 pos), cos(0.01 pos)]\n");
    print_rows("  PE (T, D); position 0 is [0, 1, 0, 1], position 1 has sin 1 = 0.8415, "
               "cos 1 = 0.5403:", pe, T, D, 0);
    if (positional_forward(x, emb, pe, 1, T, D) != 0) return -1;
    print_rows("  embedding + PE: the two 1s now differ", x, T, D, 0);

    /* The feed-forward block on one position, D = 4, F = 3: linear1 picks
     * out single inputs (the third with a minus sign, so ReLU zeroes it),
     * linear2 adds the hidden units up. */
    float w1[F * D] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, -1, 0}, b1[F] = {0, 0, 0};
    float w2[D * F] = {1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0}, b2[D] = {0, 0, 0, 0.5f};
    float pre[F], hidden[F], y[D];
    FfnParams params = {w1, b1, w2, b2};
    FfnCache cache = {D, F, pre, hidden, NULL, 0.0f};
    if (ffn_forward(y, &cache, x + 1 * D, &params, 1) != 0) return -1;
    printf("\nFeed-forward block on position 1 (D = 4, F = 3, no dropout)\n");
    print_rows("  pre = x W1^T + b1 (the third unit is negative):", pre, 1, F, 1);
    print_rows("  hidden = relu(pre):", hidden, 1, F, 1);
    print_rows("  out = hidden W2^T + b2 (sum of the hidden units, then 0, 0, 0.5):", y, 1, D,
               1);

    /* Dropout on a million ones: the fraction dropped is p and the mean stays 1. */
    enum { N = 1000000 };
    float *ones = malloc(N * sizeof *ones), *out = malloc(N * sizeof *out);
    uint8_t *mask = malloc(N);
    int rc = ones && out && mask ? 0 : -1;
    if (rc == 0) {
        for (int i = 0; i < N; i++) ones[i] = 1.0f;
        printf("\nDropout on %d ones (Philox masks, seed 42): fraction dropped and the mean of the "
               "output\n", N);
        const float ps[] = {0.0f, 0.1f, 0.5f, 0.9f, 1.0f};
        Rng rng;
        rng_seed(&rng, 42, 0);
        for (size_t k = 0; rc == 0 && k < sizeof ps / sizeof ps[0]; k++) {
            if (dropout_mask(mask, N, ps[k], &rng) != 0 ||
                dropout_forward(out, ones, mask, N, ps[k]) != 0) {
                rc = -1;
                break;
            }
            long dropped = 0;
            double sum = 0;
            for (int i = 0; i < N; i++) dropped += !mask[i], sum += out[i];
            char factor[32] = "none kept";
            if (ps[k] < 1.0f) snprintf(factor, sizeof factor, "kept x %.3f", 1.0 / (1.0 - ps[k]));
            printf("  p = %.1f: dropped %.4f, %-14s mean of the output %.4f\n", ps[k],
                   (double)dropped / N, factor, sum / N);
        }
    }
    free(ones);
    free(out);
    free(mask);
    if (rc == 0) rc = demo_encoder_layer();
    return rc;
}

/* ------------------------------------------------------------------------ */
/* --plot-data DIR                                                           */
/* ------------------------------------------------------------------------ */

/* The heatmap: D = 48 dimensions over 96 positions, the size of the figure
 * in the UvA deep learning tutorial on Transformers. */
enum { PLOT_D = 48, PLOT_MAX_LEN = 96, CURVE_LEN = 64 };
/* The curves: four sin/cos pairs, i = 0, 1, 4, 12 (wavelengths 6.3, 9.2,
 * 29 and 628 positions). */
static const int CURVE_DIMS[] = {0, 1, 2, 3, 8, 9, 24, 25};

/* A data file is collected in memory (open_data) and then written whole or
 * not at all (commit_data); each returns 0, or 1 after the error line. */
static int open_data(TextOut *out)
{
    Error err;
    if (text_out_open(out, &err) == 0) return 0;
    fprintf(stderr, "05_encoder: --plot-data: %s\n", err.msg);
    return 1;
}

static int commit_data(TextOut *out, const char *dir, const char *name)
{
    char path[4096];
    Error err;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (text_out_commit(out, path, &err) != 0) {
        fprintf(stderr, "05_encoder: --plot-data: %s\n", err.msg);
        return 1;
    }
    printf("wrote %s\n", path);
    return 0;
}

static int write_plot_data(const char *dir)
{
    if (mkdir(dir, 0777) != 0 && errno != EEXIST) {
        fprintf(stderr, "05_encoder: --plot-data: cannot create the folder %s: %s\n", dir,
                strerror(errno));
        return 1;
    }
    static float table[PLOT_MAX_LEN * PLOT_D];
    if (positional_sinusoidal_table(table, PLOT_MAX_LEN, PLOT_D) != 0) {
        fprintf(stderr, "05_encoder: positional_sinusoidal_table failed\n");
        return 1;
    }
    TextOut out;
    if (open_data(&out) != 0) return 1;
    fprintf(out.f, "# sinusoidal positional encoding, d_model = %d, positions 0..%d\n"
                   "# position  dimension  value   (one block per position, for plot with image)\n",
            PLOT_D, PLOT_MAX_LEN - 1);
    for (int pos = 0; pos < PLOT_MAX_LEN; pos++) {
        for (int d = 0; d < PLOT_D; d++)
            fprintf(out.f, "%d %d %.6f\n", pos, d, table[pos * PLOT_D + d]);
        fprintf(out.f, "\n");
    }
    if (commit_data(&out, dir, "positional_encoding.dat") != 0) return 1;

    if (open_data(&out) != 0) return 1;
    fprintf(out.f, "# sinusoidal positional encoding, d_model = %d: value over position of "
                   "dimensions\n# position", PLOT_D);
    for (size_t k = 0; k < sizeof CURVE_DIMS / sizeof CURVE_DIMS[0]; k++)
        fprintf(out.f, "  dim%d", CURVE_DIMS[k]);
    fprintf(out.f, "\n");
    for (int pos = 0; pos < CURVE_LEN; pos++) {
        fprintf(out.f, "%d", pos);
        for (size_t k = 0; k < sizeof CURVE_DIMS / sizeof CURVE_DIMS[0]; k++)
            fprintf(out.f, " %.6f", table[pos * PLOT_D + CURVE_DIMS[k]]);
        fprintf(out.f, "\n");
    }
    return commit_data(&out, dir, "positional_curves.dat");
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "--plot-data") == 0) {
        if (argc != 3) {
            fprintf(stderr, "%s: --plot-data needs one folder\n%s", argv[0], USAGE);
            return 2;
        }
        return write_plot_data(argv[2]);
    }
    return case_main(argc, argv, USAGE, demo, encoder_case_eval);
}
