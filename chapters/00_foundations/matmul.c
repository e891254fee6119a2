/*
 * matmul.c - see matmul.h for the three forms and when each is used.
 *
 * All three are one product, C (M, N) (+)= A (M, K) @ B (K, N), with A and B
 * read through strides:
 *
 *     A[i, k] = A[i * a_row + k * a_k]       B[k, j] = B[k * b_k + j * b_col]
 *
 *     matmul_nn   A (M, K): a_row K, a_k 1   B (K, N): b_k N, b_col 1
 *     matmul_tn   A (K, M): a_row 1, a_k M   B (K, N): b_k N, b_col 1
 *     matmul_nt   A (M, K): a_row K, a_k 1   B (N, K): b_k 1, b_col K
 *
 * The arithmetic is in one small function, matmul_tile (the exercise): one
 * tile of C, TILE_ROWS x TILE_COLS (6 x 16), summed over a run of k in
 * registers:
 *
 *     for k:  acc[r][c] += A[i0 + r, k] * b[k][c]     r < 6, c < 16
 *
 * Each step loads one row of 16 values of b (two 8-wide vector registers)
 * and 6 values of A, and does 96 multiply-adds with them; the tile's 12
 * accumulator registers never travel to memory until the end. The plain
 * loop `C[i, :] += a * B[k, :]` instead loads and stores a row of C for
 * every k, and runs at a fifth of the speed.
 *
 * The rest of this file (given code, in the style of GotoBLAS and BLIS) feeds
 * the tile so that it runs near the machine's peak:
 *
 *   - Blocks of k. K is cut into blocks of at most K_BLOCK (256) values, so
 *     that the 16 columns of B a tile reads (K_BLOCK * 16 floats, 16 KB)
 *     stay in the first-level cache while every row tile of C uses them.
 *     N is cut into blocks of N_BLOCK (256) columns, so that a block of B
 *     (256 x 256 floats, 256 KB) stays in the second-level cache of each
 *     core that works on it (with 2048 columns, two threads streamed 2 MB
 *     blocks from the shared cache and ran at 0.7 of PyTorch's speed).
 *   - Packed panels of B. The tile wants each row of its 16 columns of B as
 *     16 consecutive floats. matmul_nn and matmul_tn have them in place
 *     (b_col 1); matmul_nt's B^T has them K apart. There, and whenever B is
 *     reused by many row tiles (M >= PACK_B_MIN_ROWS; M >= PACK_B_MIN_ROWS_AT
 *     for matmul_tn, whose A^T takes a new cache line at every k and so
 *     pushes an unpacked B out of the first-level cache sooner), a block of
 *     B is first copied into panels: panel p holds columns 16p .. 16p + 15,
 *     row after row, kc * 16 floats, zero beyond the last column of B. That
 *     copy is all matmul_nt costs over the others; B^T is never built whole.
 *   - Packed slivers of A. The tile reads 6 rows of A at once. In place they
 *     are 6 streams through memory; that is fine for A (M, K) (each row is
 *     contiguous in k) and for A^T (K, M) while few tiles use each row, but
 *     for A^T (K, M) with many columns of B (N >= PACK_A_MIN_COLS) each
 *     sliver of 6 rows is copied once into 6 * kc consecutive floats. The
 *     last sliver of C, when M is not a multiple of 6, is always copied and
 *     padded with zero rows, so that the tile can always compute 6 rows.
 *   - Threads. The tiles of one block of k (row tile by panel, row tile
 *     major, so a thread reuses its sliver of A across the panels) are
 *     shared out among OpenMP threads in equal, contiguous ranges, in one
 *     parallel region for the whole product. A product below PARALLEL_MIN
 *     multiply-adds, or one called inside a parallel loop, runs on the
 *     calling thread.
 *
 * Every element of C is computed by one tile call per block of k, summed
 * over k in order, and added to C block after block in order, whatever the
 * number of threads: the result does not depend on it (a test checks it
 * bit for bit). Packing only moves values; it changes no sum.
 *
 * Letters: C is (M, N); K is the summed dimension; kc the k values of one
 * block, nc the columns of one block.
 */
#include "matmul.h"

#include "error.h"   /* not_implemented(), used by the exercise stubs */

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define TILE_ROWS 6
#define TILE_COLS 16
#define K_BLOCK 256               /* k values per block: a panel of B is 16 KB */
#define N_BLOCK 256               /* columns per block: packed B is at most 256 KB */
#define PACK_B_MIN_ROWS 256       /* pack B in place of reading it when M is this large, */
#define PACK_B_MIN_ROWS_AT 96     /* or this large when A is read as A^T (matmul_tn) */
#define PACK_A_MIN_COLS 256       /* pack the slivers of A^T when N is this large */
#define PARALLEL_MIN (1L << 15)   /* multiply-adds below which one thread is faster */
#define SMALL_PACK 4096           /* floats of packing buffer kept on the stack (16 KB) */

/* One tile of C: C[r, c] (+)= sum over k < kc of A[r, k] * b[k, c], for
 * r < rows (<= 6) and c < cols (<= 16); C's rows are ldc floats apart.
 *   a   6 rows of A: A[r, k] = a[r * a_row + k * a_k]; all 6 are readable
 *       (rows beyond `rows` are zeros)
 *   b   kc rows of 16 consecutive floats, b_k floats apart: b[k, c] =
 *       b[k * b_k + c]; all 16 are readable
 * The whole 6 x 16 tile is computed; only rows x cols of it is written. */
static int matmul_tile(float *C, size_t ldc, const float *a, size_t a_row, size_t a_k,
                       const float *b, size_t b_k, int kc, int rows, int cols,
                       int accumulate)
{
    /* BEGIN SOLUTION */
    float acc[TILE_ROWS][TILE_COLS];          /* lives in 12 vector registers */
    for (int r = 0; r < TILE_ROWS; r++)
        for (int c = 0; c < TILE_COLS; c++) acc[r][c] = 0.0f;
    for (int k = 0; k < kc; k++) {
        const float *bk = b + k * b_k;                       /* b[k, 0:16] */
        for (int r = 0; r < TILE_ROWS; r++) {
            float ark = a[r * a_row + k * a_k];              /* A[r, k] */
            #pragma omp simd
            for (int c = 0; c < TILE_COLS; c++) acc[r][c] += ark * bk[c];
        }
    }
    if (rows == TILE_ROWS && cols == TILE_COLS) {
        /* Fixed bounds: the compiler stores the registers straight to C. */
        for (int r = 0; r < TILE_ROWS; r++) {
            float *c = C + r * ldc;
            #pragma omp simd
            for (int q = 0; q < TILE_COLS; q++) c[q] = accumulate ? c[q] + acc[r][q] : acc[r][q];
        }
    } else {
        for (int r = 0; r < rows; r++) {
            float *c = C + r * ldc;
            for (int q = 0; q < cols; q++) c[q] = accumulate ? c[q] + acc[r][q] : acc[r][q];
        }
    }
    return 0;
    /* END SOLUTION */
}

/* rows (<= 6) rows of A over kc values of k -> dst (kc, 6): dst[k * 6 + r] =
 * A[r, k], zero for r >= rows. */
static void pack_a_sliver(float *dst, const float *a, size_t a_row, size_t a_k, int rows, int kc)
{
    for (int k = 0; k < kc; k++) {
        for (int r = 0; r < rows; r++) dst[k * TILE_ROWS + r] = a[r * a_row + k * a_k];
        for (int r = rows; r < TILE_ROWS; r++) dst[k * TILE_ROWS + r] = 0.0f;
    }
}

/* cols (<= 16) columns of B over kc values of k -> dst (kc, 16): dst[k * 16 +
 * c] = B[k, c], zero for c >= cols. Walks B in the order it is stored. */
static void pack_b_panel(float *dst, const float *b, size_t b_k, size_t b_col, int kc, int cols)
{
    if (b_col == 1) {                                        /* rows of B are contiguous */
        for (int k = 0; k < kc; k++) {
            memcpy(dst + k * TILE_COLS, b + k * b_k, (size_t)cols * sizeof *dst);
            memset(dst + k * TILE_COLS + cols, 0, (size_t)(TILE_COLS - cols) * sizeof *dst);
        }
    } else {                                                 /* columns are (B^T's rows) */
        for (int c = 0; c < cols; c++)
            for (int k = 0; k < kc; k++) dst[k * TILE_COLS + c] = b[c * b_col + k * b_k];
        for (int k = 0; k < kc; k++)
            for (int c = cols; c < TILE_COLS; c++) dst[k * TILE_COLS + c] = 0.0f;
    }
}

/* One product C (M, N) (+)= A @ B through the strides above, and its
 * packing buffer: the packed block of B, then one sliver of A per thread. */
typedef struct {
    float *C;
    const float *A, *B;
    size_t a_row, a_k, b_k, b_col;
    int M, N, K, accumulate;
    int pack_a;             /* copy every sliver of A (else only the last, short one) */
    float *packed;
    size_t b_floats, a_floats;
} Product;

/* Thread `me` of `threads`: its share of every block of the product, block
 * by block of columns and of k. Within a block the panels of B are packed by
 * all threads, panel p by thread p % threads; the tiles (row tile by panel,
 * row tile major) are cut into `threads` equal, contiguous ranges. Between
 * the packing and its use, and before the next block is packed over it, the
 * threads wait for each other (only when there are several: called
 * outside a parallel region, it runs alone). A failed tile (an exercise
 * stub) skips the rest of the tiles, so the failure is reported once. */
static int product_share(const Product *p, int me, int threads)
{
    float *sliver = p->packed + p->b_floats + me * p->a_floats;
    int row_tiles = (p->M + TILE_ROWS - 1) / TILE_ROWS, failed = 0;
    for (int j0 = 0; j0 < p->N; j0 += N_BLOCK) {
        int nc = p->N - j0 < N_BLOCK ? p->N - j0 : N_BLOCK;
        int panels = (nc + TILE_COLS - 1) / TILE_COLS;
        /* The last panel always needs its zero columns when nc is not a
         * multiple of 16: the tile reads 16. */
        int pack_b = p->b_col != 1 || nc % TILE_COLS != 0 ||
                     p->M >= (p->a_k == 1 ? PACK_B_MIN_ROWS : PACK_B_MIN_ROWS_AT);
        for (int k0 = 0; k0 < p->K; k0 += K_BLOCK) {
            int kc = p->K - k0 < K_BLOCK ? p->K - k0 : K_BLOCK;
            /* The first block of k stores into C (unless accumulating), the
             * later ones add to it. */
            int add = p->accumulate || k0 > 0;
            if (pack_b) {
                for (int q = me; q < panels; q += threads) {
                    int j = j0 + q * TILE_COLS;
                    pack_b_panel(p->packed + (size_t)q * kc * TILE_COLS,
                                 p->B + k0 * p->b_k + j * p->b_col, p->b_k, p->b_col, kc,
                                 p->N - j < TILE_COLS ? p->N - j : TILE_COLS);
                }
                if (threads > 1) {
                    #pragma omp barrier
                }
            }
            /* This thread's tiles: numbers first .. last - 1 of row tile t,
             * panel q, counted row tile major. */
            long tiles = (long)row_tiles * panels;
            long first = tiles * me / threads, last = tiles * (me + 1) / threads;
            int t = (int)(first / panels), q = (int)(first % panels);
            int sliver_tile = -1;                            /* the row tile in sliver */
            for (long n = first; n < last && !failed; n++) {
                int i = t * TILE_ROWS, rows = p->M - i < TILE_ROWS ? p->M - i : TILE_ROWS;
                int j = j0 + q * TILE_COLS, cols = p->N - j < TILE_COLS ? p->N - j : TILE_COLS;
                const float *a = p->A + i * p->a_row + k0 * p->a_k;
                size_t row_step = p->a_row, k_step = p->a_k;
                if (p->pack_a || rows < TILE_ROWS) {
                    if (sliver_tile != t) pack_a_sliver(sliver, a, p->a_row, p->a_k, rows, kc);
                    sliver_tile = t;
                    a = sliver, row_step = 1, k_step = TILE_ROWS;
                }
                const float *b = pack_b ? p->packed + (size_t)q * kc * TILE_COLS
                                        : p->B + k0 * p->b_k + j;
                failed = matmul_tile(p->C + (size_t)i * p->N + j, p->N, a, row_step, k_step, b,
                                     pack_b ? TILE_COLS : p->b_k, kc, rows, cols, add) != 0;
                if (++q == panels) q = 0, t++;                  /* the next tile */
            }
            if (threads > 1) {
                #pragma omp barrier
            }
        }
    }
    return failed;
}

/* p: the operands, their strides, the sizes and accumulate; the rest of
 * p is filled here. */
static int blocked_product(Product p)
{
    float *C = p.C;
    int M = p.M, N = p.N, K = p.K;
    if (K == 0 && !p.accumulate) {                             /* an empty sum: zeros */
        for (int i = 0; i < M; i++) memset(C + (size_t)i * N, 0, (size_t)N * sizeof *C);
        return 0;
    }
    /* A small product, or one called from inside a parallel loop (attention
     * runs one per head and thread), is done by the calling thread alone,
     * without entering a parallel region at all: even a region of one
     * thread costs a system call. */
    int threads = (long)M * N * K >= PARALLEL_MIN && !omp_in_parallel() ? omp_get_max_threads()
                                                                         : 1;
    int max_kc = K < K_BLOCK ? K : K_BLOCK;
    int max_panels = ((N < N_BLOCK ? N : N_BLOCK) + TILE_COLS - 1) / TILE_COLS;
    p.pack_a = p.a_k != 1 && N >= PACK_A_MIN_COLS;
    p.b_floats = (size_t)max_panels * max_kc * TILE_COLS;
    p.a_floats = (size_t)TILE_ROWS * max_kc;
    /* The packing buffer: on the stack for a small product (attention makes
     * thousands per step, one per head, and a malloc each would cost more
     * than packing), from the heap for a large one. */
    float small[SMALL_PACK];
    size_t need = p.b_floats + threads * p.a_floats;
    p.packed = need <= SMALL_PACK ? small : malloc(need * sizeof *p.packed);
    if (!p.packed) return -1;
    int failed = 0;
    if (threads == 1) {
        failed = product_share(&p, 0, 1);
    } else {
        #pragma omp parallel num_threads(threads) reduction(|:failed)
        failed |= product_share(&p, omp_get_thread_num(), omp_get_num_threads());
    }
    if (p.packed != small) free(p.packed);
    return failed ? -1 : 0;
}

int matmul_nn(float *C, const float *A, const float *B, int M, int N, int K, int accumulate)
{
    return blocked_product((Product){.C = C, .A = A, .a_row = (size_t)K, .a_k = 1, .B = B,
                                     .b_k = (size_t)N, .b_col = 1, .M = M, .N = N, .K = K,
                                     .accumulate = accumulate});
}

int matmul_tn(float *C, const float *A, const float *B, int M, int N, int K, int accumulate)
{
    return blocked_product((Product){.C = C, .A = A, .a_row = 1, .a_k = (size_t)M, .B = B,
                                     .b_k = (size_t)N, .b_col = 1, .M = M, .N = N, .K = K,
                                     .accumulate = accumulate});
}

int matmul_nt(float *C, const float *A, const float *B, int M, int N, int K, int accumulate)
{
    return blocked_product((Product){.C = C, .A = A, .a_row = (size_t)K, .a_k = 1, .B = B,
                                     .b_k = 1, .b_col = (size_t)K, .M = M, .N = N, .K = K,
                                     .accumulate = accumulate});
}

int linear_forward(float *out, const float *x, const float *weight, const float *bias,
                   int M, int K, int N)
{
    /* BEGIN SOLUTION */
    if (matmul_nt(out, x, weight, M, N, K, 0) != 0) return -1;
    if (bias) {
        #pragma omp parallel for schedule(static)
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) out[(size_t)i * N + j] += bias[j];
    }
    return 0;
    /* END SOLUTION */
}

int linear_backward(float *dx, float *dweight, float *dbias, const float *dout,
                    const float *x, const float *weight, int M, int K, int N)
{
    /* BEGIN SOLUTION */
    if (dx && matmul_nn(dx, dout, weight, M, K, N, 1) != 0) return -1;
    if (matmul_tn(dweight, dout, x, N, K, M, 1) != 0) return -1;
    if (dbias) {
        /* Column sums of dout. Each column is summed by one thread, over the
         * rows in order, so the result does not depend on the thread count;
         * the threads share out blocks of 16 columns, and a block walks the
         * rows so that its loads are 16 consecutive floats. */
        #pragma omp parallel for schedule(static)
        for (int j0 = 0; j0 < N; j0 += 16) {
            int width = N - j0 < 16 ? N - j0 : 16;
            float sum[16] = {0};
            for (int i = 0; i < M; i++) {
                const float *row = dout + (size_t)i * N + j0;
                #pragma omp simd
                for (int c = 0; c < width; c++) sum[c] += row[c];
            }
            for (int c = 0; c < width; c++) dbias[j0 + c] += sum[c];
        }
    }
    return 0;
    /* END SOLUTION */
}
