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
 * tile of C, TILE_ROWS x TILE_COLS, summed over a run of k in registers:
 *
 *     for k:  acc[r][c] += A[i0 + r, k] * b[k][c]     r < TILE_ROWS, c < TILE_COLS
 *
 * The tile's size is the machine's. With AVX2 (16 vector registers of 8
 * floats) it is 6 x 16: each step loads one row of 16 values of b (two
 * registers) and 6 values of A, and does 96 multiply-adds with them in 12
 * accumulator registers. With AVX-512 (32 registers of 16 floats) it is
 * 12 x 32: 384 multiply-adds a step in 24 registers of 16, twice the work
 * of each instruction and twice the sums for each load of b. On 64-bit ARM
 * (NEON: 32 registers of 4 floats) it is 8 x 12, the tile of BLIS's ARMv8
 * kernel: 24 accumulator registers, 3 for the row of b and 2 for the 8
 * values of A, 96 multiply-adds a step. Every way the
 * accumulators never travel to memory until the end. The plain loop
 * `C[i, :] += a * B[k, :]` instead loads and stores a row of C for every k,
 * and runs at a fifth of the speed.
 *
 * The rest of this file (given code, in the style of GotoBLAS and BLIS) feeds
 * the tile so that it runs near the machine's peak:
 *
 *   - Blocks of k. K is cut into blocks of at most K_BLOCK (256) values, so
 *     that the columns of B a tile reads (K_BLOCK * TILE_COLS floats, 16 KB
 *     with AVX2, 32 KB with AVX-512) stay in the first-level cache while
 *     every row tile of C uses them. N is cut into blocks of N_BLOCK (512)
 *     columns, so that a block of B (256 x 512 floats, 512 KB) stays in the
 *     second-level cache of each core that works on it (1 MB on AMD's Zen 4,
 *     2 MB on Intel's Sapphire Rapids; with 2048 columns, two threads
 *     streamed 2 MB blocks from the shared cache and ran at 0.7 of
 *     PyTorch's speed). Blocks of 256 columns would fit too, but every block
 *     of columns reloads its rows of C.
 *   - Packed panels of B. The tile wants each row of its TILE_COLS columns
 *     of B as TILE_COLS consecutive floats. matmul_nn and matmul_tn have
 *     them in place (b_col 1); matmul_nt's B^T has them K apart. There, and whenever B is
 *     reused by many row tiles (M >= PACK_B_MIN_ROWS; M >= PACK_B_MIN_ROWS_AT
 *     for matmul_tn, whose A^T takes a new cache line at every k and so
 *     pushes an unpacked B out of the first-level cache sooner), a block of
 *     B is first copied into panels: panel p holds TILE_COLS columns from
 *     TILE_COLS * p, row after row, zero beyond the last column of B. That
 *     copy is all matmul_nt costs over the others; B^T is never built whole.
 *   - Packed slivers of A. The tile reads TILE_ROWS rows of A at once. In
 *     place they are as many streams through memory; that is fine for A
 *     (M, K) (each row is contiguous in k) and for A^T (K, M) while few
 *     tiles use each row, but
 *     for A^T (K, M) with many columns of B (N >= PACK_A_MIN_COLS) each
 *     sliver of TILE_ROWS rows is copied once into TILE_ROWS * kc
 *     consecutive floats. The last sliver, when M is not a multiple of
 *     TILE_ROWS, is always copied and padded with zero rows, so that the tile
 *     can always compute all its rows.
 *   - The order of the tiles. In place, a sliver of A is best read once
 *     and kept in the first-level cache while the tile moves along its
 *     row tile, panel after panel, reading the block of B from the second.
 *     Packed slivers are one stream each, so there the roles swap, as in
 *     BLIS: ROW_GROUP row tiles (their slivers, 192 KB with AVX-512, in the
 *     second-level cache) take each panel of B in turn, and the panel (32
 *     KB) stays in the first-level cache while every tile of the group uses
 *     it. For the squares of 256 and 512 in matmul_tn that was 10 %
 *     faster on two threads; for the in-place slivers of matmul_nn, slower.
 *   - Threads, two ways, in one parallel region for the whole product. Most
 *     products share out the tiles of C (numbered row tile by panel, row
 *     tile major) in equal, contiguous ranges, the same for every block of
 *     k; each thread packs the blocks of B for itself, so that no thread
 *     ever waits for another.
 *     A product with few tiles and many blocks of k (a weight gradient:
 *     dy^T x over thousands of rows, C only 64 x 64) would give each thread
 *     a handful of tiles, so there the threads take whole blocks of k
 *     instead, a run of consecutive blocks each per round: the round's
 *     first block is added to C, the others written to buffers of their
 *     own, and then every thread adds those buffers, in block order, to its
 *     share of C's rows. A product
 *     below PARALLEL_MIN multiply-adds, or one called inside a parallel
 *     loop, runs on the calling thread.
 *   - Narrow products. On one thread, a product of at most 16 columns (a
 *     head's features in attention) is computed row by row, a vector of
 *     accumulators per row of C (narrow_rows), where the tile would waste
 *     most of its columns; the sums are the tile's, to the bit.
 *
 * Every element of C is computed by one tile call per block of k, summed
 * over k in order, and added to C block after block in order, whatever the
 * number of threads and whichever way they share the work: the result does
 * not depend on it (a test checks it bit for bit). Packing only moves
 * values; it changes no sum.
 *
 * Letters: C is (M, N); K is the summed dimension; kc the k values of one
 * block, nc the columns of one block.
 */
#include "matmul.h"

#include "error.h"   /* not_implemented(), used by the exercise stubs */
#include "tensor.h"  /* sum_blocks, partial_sums_add */

#include "threads.h"  /* OpenMP, or its one-thread stand-ins */
#include <stdlib.h>
#include <string.h>

#if defined(__AVX512F__)          /* 32 vector registers of 16 floats */
#define TILE_ROWS 12
#define TILE_COLS 32
#elif defined(__aarch64__)        /* NEON: 32 registers of 4 floats */
#define TILE_ROWS 8
#define TILE_COLS 12
#else                             /* AVX2: 16 registers of 8 floats */
#define TILE_ROWS 6
#define TILE_COLS 16
#endif
#define K_BLOCK 256               /* k values per block: a panel of B is 16 or 32 KB */
#define N_BLOCK 512               /* columns per block: packed B is at most 512 KB */
#define PACK_B_MIN_ROWS 256       /* pack B in place of reading it when M is this large, */
#define PACK_B_MIN_ROWS_AT 96     /* or this large when A is read as A^T (matmul_tn) */
#define PACK_A_MIN_COLS 256       /* pack the slivers of A^T when N is this large */
#define PARALLEL_MIN (1L << 15)   /* multiply-adds below which one thread is faster */
#define SPLIT_K_TILES 64          /* tiles per thread below which threads take blocks of k */
#define K_ROUND 4                 /* ... up to K_ROUND blocks each between two barriers */
#define ROW_GROUP 16              /* packed slivers of A that take each panel of B in turn */
#define PACK_RUN 16               /* rows of A^T or B packed at a time, kept in the L1 cache */
#define SMALL_PACK 8192           /* floats of packing buffer kept on the stack (32 KB) */
#define NARROW_ROWS 12            /* rows of C a narrow product keeps in registers at once */

/* One tile of C: C[r, c] (+)= sum over k < kc of A[r, k] * b[k, c], for
 * r < rows (<= TILE_ROWS) and c < cols (<= TILE_COLS); C's rows are ldc
 * floats apart.
 *   a   TILE_ROWS rows of A: A[r, k] = a[r * a_row + k * a_k]; all are
 *       readable (rows beyond `rows` are zeros)
 *   b   kc rows of TILE_COLS consecutive floats, b_k floats apart: b[k, c] =
 *       b[k * b_k + c]; all TILE_COLS are readable
 * The whole tile is computed; only rows x cols of it is written. */
static int matmul_tile(float *C, size_t ldc, const float *a, size_t a_row, size_t a_k,
                       const float *b, size_t b_k, int kc, int rows, int cols,
                       int accumulate)
{
    /* BEGIN SOLUTION */
    float acc[TILE_ROWS][TILE_COLS];          /* lives in 12 or 24 vector registers */
    for (int r = 0; r < TILE_ROWS; r++)
        for (int c = 0; c < TILE_COLS; c++) acc[r][c] = 0.0f;
    for (int k = 0; k < kc; k++) {
        const float *bk = b + k * b_k;                       /* b[k, :] */
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

/* rows (<= TILE_ROWS) rows of A over kc values of k -> dst (kc, TILE_ROWS):
 * dst[k * TILE_ROWS + r] = A[r, k], zero for r >= rows. */
static void pack_a_sliver(float *dst, const float *a, size_t a_row, size_t a_k, int rows, int kc)
{
    for (int k = 0; k < kc; k++) {
        for (int r = 0; r < rows; r++) dst[k * TILE_ROWS + r] = a[r * a_row + k * a_k];
        for (int r = rows; r < TILE_ROWS; r++) dst[k * TILE_ROWS + r] = 0.0f;
    }
}

/* cols (<= TILE_COLS) columns of B over kc values of k -> dst (kc,
 * TILE_COLS): dst[k * TILE_COLS + c] = B[k, c], zero for c >= cols. Walks B
 * in the order it is stored, but for a whole panel of B^T (matmul_nt),
 * which is written row after row of the panel: each row takes one float
 * from each of TILE_COLS rows of B^T, whose cache lines then serve the next
 * 15 rows too, and the stores are consecutive (10 % faster for nt 256 on
 * two threads than one column at a time, whose stores are TILE_COLS floats
 * apart). */
static void pack_b_panel(float *dst, const float *b, size_t b_k, size_t b_col, int kc, int cols)
{
    if (b_col == 1 && cols == TILE_COLS) {                   /* a whole panel: fixed bounds */
        for (int k = 0; k < kc; k++)
            for (int c = 0; c < TILE_COLS; c++) dst[k * TILE_COLS + c] = b[k * b_k + c];
    } else if (b_col == 1) {                                 /* rows of B are contiguous */
        for (int k = 0; k < kc; k++) {
            memcpy(dst + k * TILE_COLS, b + k * b_k, (size_t)cols * sizeof *dst);
            memset(dst + k * TILE_COLS + cols, 0, (size_t)(TILE_COLS - cols) * sizeof *dst);
        }
    } else if (cols == TILE_COLS) {   /* B^T's rows: a row of the panel gathers a column */
        for (int k = 0; k < kc; k++)
            for (int c = 0; c < TILE_COLS; c++) dst[k * TILE_COLS + c] = b[c * b_col + k * b_k];
    } else {                                                 /* columns are (B^T's rows) */
        for (int c = 0; c < cols; c++)
            for (int k = 0; k < kc; k++) dst[k * TILE_COLS + c] = b[c * b_col + k * b_k];
        for (int k = 0; k < kc; k++)
            for (int c = cols; c < TILE_COLS; c++) dst[k * TILE_COLS + c] = 0.0f;
    }
}

/* One product C (M, N) (+)= A @ B through the strides above, and its
 * buffers. */
typedef struct {
    float *C;
    const float *A, *B;
    size_t a_row, a_k, b_k, b_col;
    int M, N, K, accumulate;
    int pack_a;             /* copy every sliver of A (else only the last, short one) */
    float *work;            /* each thread's packed block of B and sliver of A; when
                               threads take blocks of k, then a block of C for every
                               block of a round but the first */
    size_t b_floats, a_floats;
} Product;

/* The slivers of row tiles t0 .. t1 - 1 over k0 .. k0 + kc - 1, one after
 * another (sliver t - t0 at (t - t0) * TILE_ROWS * kc), zero rows past M.
 * PACK_RUN (16) values of k at a time: 16 rows of A^T (K, M), read once and
 * kept in the first-level cache, give each sliver 16 x TILE_ROWS
 * consecutive floats. Packing one sliver after another would read TILE_ROWS floats
 * from each of kc rows (kc pages apart for a wide A) and start again; one
 * k at a time would write TILE_ROWS floats to each sliver, a sliver apart. */
static void pack_a_block(float *dst, const Product *p, int t0, int t1, int k0, int kc)
{
    const float *A = p->A;
    size_t a_row = p->a_row, a_k = p->a_k;
    int M = p->M;
    for (int kb = 0; kb < kc; kb += PACK_RUN)
        for (int t = t0; t < t1; t++)
            for (int k = kb; k < kb + PACK_RUN && k < kc; k++) {
                int i = t * TILE_ROWS, rows = M - i < TILE_ROWS ? M - i : TILE_ROWS;
                float *d = dst + (size_t)(t - t0) * TILE_ROWS * kc + (size_t)k * TILE_ROWS;
                const float *a = A + (size_t)i * a_row + (size_t)(k0 + k) * a_k;
                if (rows == TILE_ROWS && a_row == 1) {      /* A^T's row: fixed bounds */
                    memcpy(d, a, TILE_ROWS * sizeof *d);
                    continue;
                }
                for (int r = 0; r < rows; r++) d[r] = a[r * a_row];
                for (int r = rows; r < TILE_ROWS; r++) d[r] = 0.0f;
            }
}

/* Whether the columns j0 .. j0 + nc - 1 of B are packed into panels. The
 * last panel always needs its zero columns when nc is not a multiple of
 * TILE_COLS: the tile reads TILE_COLS. */
static int packs_b(const Product *p, int nc)
{
    return p->b_col != 1 || nc % TILE_COLS != 0 ||
           p->M >= (p->a_k == 1 ? PACK_B_MIN_ROWS : PACK_B_MIN_ROWS_AT);
}

/* The block of B at columns j0 .. j0 + nc - 1 and k0 .. k0 + kc - 1, into
 * panels in packed: with B's rows contiguous (b_col 1), PACK_RUN rows at a
 * time across all the panels, so that B is read along its rows rather than a
 * panel's width (TILE_COLS floats) from each of kc rows in turn. */
static void pack_b_block(const Product *p, float *packed, int j0, int nc, int k0, int kc)
{
    int panels = (nc + TILE_COLS - 1) / TILE_COLS;
    int chunk = p->b_col == 1 ? PACK_RUN : kc;
    for (int kb = 0; kb < kc; kb += chunk)
        for (int q = 0; q < panels; q++) {
            int j = j0 + q * TILE_COLS, n = kc - kb < chunk ? kc - kb : chunk;
            pack_b_panel(packed + ((size_t)q * kc + kb) * TILE_COLS,
                         p->B + (k0 + kb) * p->b_k + j * p->b_col, p->b_k, p->b_col, n,
                         j0 + nc - j < TILE_COLS ? j0 + nc - j : TILE_COLS);
        }
}

/* Where block_tiles is in a block: the block's columns and k values, what
 * it writes to and from which packed buffers, and the row tile whose short
 * sliver is in `sliver` (without pack_a). */
typedef struct {
    float *C;               /* the product's C or a block buffer shaped like it */
    int j0, nc, k0, kc, add;
    const float *packed;    /* the block of B in panels, when pack_b */
    int pack_b;
    float *sliver;          /* with pack_a the slivers of row tiles from first_tile
                               on (pack_a_block), else room for one */
    int first_tile, sliver_tile;
} BlockPass;

/* Tile (t, q) of the block: row tile t, panel q. */
static inline int block_tile(const Product *p, BlockPass *w, int t, int q)
{
    int i = t * TILE_ROWS, rows = p->M - i < TILE_ROWS ? p->M - i : TILE_ROWS;
    /* The block's columns only: where N_BLOCK is not a multiple of
     * TILE_COLS (the 8 x 12 tile of ARM), the last panel of a block stops
     * short, and the next block's columns belong to that block's tiles,
     * perhaps another thread's. */
    int j = w->j0 + q * TILE_COLS, end = w->j0 + w->nc;
    int cols = end - j < TILE_COLS ? end - j : TILE_COLS;
    const float *a = p->A + i * p->a_row + w->k0 * p->a_k;
    size_t row_step = p->a_row, k_step = p->a_k;
    if (p->pack_a) {                      /* the thread packed its row tiles' slivers */
        a = w->sliver + (size_t)(t - w->first_tile) * TILE_ROWS * w->kc;
        row_step = 1, k_step = TILE_ROWS;
    } else if (rows < TILE_ROWS) {
        if (w->sliver_tile != t) pack_a_sliver(w->sliver, a, p->a_row, p->a_k, rows, w->kc);
        w->sliver_tile = t;
        a = w->sliver, row_step = 1, k_step = TILE_ROWS;
    }
    const float *b = w->pack_b ? w->packed + (size_t)q * w->kc * TILE_COLS
                               : p->B + w->k0 * p->b_k + j;
    return matmul_tile(w->C + (size_t)i * p->N + j, p->N, a, row_step, k_step, b,
                       w->pack_b ? TILE_COLS : p->b_k, w->kc, rows, cols, w->add);
}

/* The tiles first .. last - 1 of the block (numbered row tile by panel, row
 * tile major), stored or added into w->C. With slivers of A in place, in
 * that order. With packed slivers (pack_a), the whole row tiles among them
 * go ROW_GROUP row tiles at a time, panel by panel (the order of the tiles,
 * above); a range that starts or ends inside a row tile does those few
 * tiles in order. Returns -1 at the first failed tile (an exercise stub),
 * else 0. */
static int block_tiles(const Product *p, BlockPass *w, long first, long last)
{
    int panels = (w->nc + TILE_COLS - 1) / TILE_COLS;
    if (!p->pack_a) {                                   /* in order (see above) */
        for (long n = first; n < last; n++)
            if (block_tile(p, w, (int)(n / panels), (int)(n % panels)) != 0) return -1;
        return 0;
    }
    long n = first;
    for (; n < last && n % panels != 0; n++)            /* the end of a row tile */
        if (block_tile(p, w, (int)(n / panels), (int)(n % panels)) != 0) return -1;
    int t0 = (int)(n / panels), t1 = (int)(last / panels);
    for (int g = t0; g < t1; g += ROW_GROUP)
        for (int q = 0; q < panels; q++)
            for (int t = g; t < t1 && t < g + ROW_GROUP; t++)
                if (block_tile(p, w, t, q) != 0) return -1;
    for (n = n > (long)t1 * panels ? n : (long)t1 * panels; n < last; n++)   /* a row tile begun */
        if (block_tile(p, w, (int)(n / panels), (int)(n % panels)) != 0) return -1;
    return 0;
}

/* Thread `me` of `threads`, sharing the tiles: its share of every block of
 * the product, block by block of k and, within one, of columns. The tiles
 * of a block are cut into `threads` equal, contiguous ranges, the same in
 * every block of k, so each tile of C is computed by one thread, block
 * after block, in order. Each thread packs the block of B for itself: the
 * copy is done `threads` times, but no thread ever waits for another. With
 * pack_a the slivers of the thread's row tiles are packed once a block of
 * k, for every block of columns (with 1024 columns, two of them: matmul_tn
 * 1024 was 4 % faster than packing them again for each). After a failed
 * tile the thread skips the rest, so the failure is reported once. */
static int share_tiles(const Product *p, int me, int threads)
{
    float *packed = p->work + me * (p->b_floats + p->a_floats), *sliver = packed + p->b_floats;
    int row_tiles = (p->M + TILE_ROWS - 1) / TILE_ROWS, failed = 0;
    /* The row tiles this thread's tiles touch in any block of columns:
     * with pack_a their slivers are packed once per block of k. */
    int t_lo = row_tiles, t_hi = 0;
    for (int j0 = 0; j0 < p->N; j0 += N_BLOCK) {
        int panels = ((p->N - j0 < N_BLOCK ? p->N - j0 : N_BLOCK) + TILE_COLS - 1) / TILE_COLS;
        long tiles = (long)row_tiles * panels;
        long first = tiles * me / threads, last = tiles * (me + 1) / threads;
        if (last > first && first / panels < t_lo) t_lo = (int)(first / panels);
        if (last > first && (last - 1) / panels + 1 > t_hi) t_hi = (int)((last - 1) / panels) + 1;
    }
    for (int k0 = 0; k0 < p->K && !failed; k0 += K_BLOCK) {
        int kc = p->K - k0 < K_BLOCK ? p->K - k0 : K_BLOCK;
        /* The first block of k stores into C (unless accumulating), the
         * later ones add to it. */
        int add = p->accumulate || k0 > 0;
        if (p->pack_a && t_hi > t_lo)
            pack_a_block(sliver, p, t_lo, t_hi, k0, kc);
        for (int j0 = 0; j0 < p->N && !failed; j0 += N_BLOCK) {
            int nc = p->N - j0 < N_BLOCK ? p->N - j0 : N_BLOCK;
            int panels = (nc + TILE_COLS - 1) / TILE_COLS;
            long tiles = (long)row_tiles * panels;
            long first = tiles * me / threads, last = tiles * (me + 1) / threads;
            int pack_b = packs_b(p, nc);
            if (pack_b) pack_b_block(p, packed, j0, nc, k0, kc);
            BlockPass w = {p->C, j0, nc, k0, kc, add, packed, pack_b, sliver,
                           p->pack_a ? t_lo : (int)(first / panels), -1};
            failed = block_tiles(p, &w, first, last) != 0;
        }
    }
    return failed;
}

/* Thread `me` of `threads`, sharing the blocks of k (N <= N_BLOCK: one block
 * of columns). A round takes up to threads * K_ROUND blocks and cuts them
 * into `threads` equal runs of consecutive blocks, one run per thread, with
 * its own packed B and sliver: the round's first block is added to C as
 * share_tiles would, every other one stored in a block buffer of its own.
 * Then, all blocks of the round done, each thread adds the buffers in block
 * order to its share of C's rows, so every element of C is C + block 0 +
 * block 1 + ..., in that order, as with one thread. Two barriers a round:
 * a weight gradient over 2,048 rows (8 blocks) on two threads is one round. */
static int share_k(const Product *p, int me, int threads)
{
    float *packed = p->work + me * (p->b_floats + p->a_floats), *sliver = packed + p->b_floats;
    float *blocks = p->work + threads * (p->b_floats + p->a_floats);   /* buffers 1, 2, ... */
    size_t mn = (size_t)p->M * p->N;
    long tiles = (long)((p->M + TILE_ROWS - 1) / TILE_ROWS) * ((p->N + TILE_COLS - 1) / TILE_COLS);
    int pack_b = packs_b(p, p->N), failed = 0;
    int i0 = (int)((long)p->M * me / threads), i1 = (int)((long)p->M * (me + 1) / threads);
    for (int first = 0; first < p->K; first += threads * K_ROUND * K_BLOCK) {
        int left = (p->K - first + K_BLOCK - 1) / K_BLOCK;           /* blocks from first on */
        int round = left < threads * K_ROUND ? left : threads * K_ROUND;
        for (int b = round * me / threads; b < round * (me + 1) / threads && !failed; b++) {
            int k0 = first + b * K_BLOCK, kc = p->K - k0 < K_BLOCK ? p->K - k0 : K_BLOCK;
            if (pack_b) pack_b_block(p, packed, 0, p->N, k0, kc);
            if (p->pack_a)
                pack_a_block(sliver, p, 0, (p->M + TILE_ROWS - 1) / TILE_ROWS, k0, kc);
            /* The round's first block goes into C, the others into their buffers. */
            BlockPass w = {b == 0 ? p->C : blocks + (b - 1) * mn, 0, p->N, k0, kc,
                           b == 0 && (p->accumulate || k0 > 0), packed, pack_b, sliver, 0, -1};
            failed = block_tiles(p, &w, 0, tiles) != 0;
        }
        #pragma omp barrier
        for (int b = 1; b < round; b++) {
            const float *block = blocks + (b - 1) * mn;
            for (int i = i0; i < i1; i++) {
                float *c = p->C + (size_t)i * p->N;
                const float *w = block + (size_t)i * p->N;
                #pragma omp simd
                for (int j = 0; j < p->N; j++) c[j] += w[j];
            }
        }
        #pragma omp barrier
    }
    return failed;
}

/* A narrow product, C (M, N <= W) with B's rows in place (b_col 1), on the
 * calling thread: NARROW_ROWS rows of C at a time, each row one vector of W
 * accumulators, over each block of k. Attention's products with a head's
 * few features (out = att V, dV, dQ, dK: N = Dh, 8 in the Taylor model)
 * use N of the tile's TILE_COLS columns; here no column is wasted. Every
 * element is the same sum as the tile's, k in order within a block and the
 * blocks added in order, so the result is the same to the bit. W is 8 or
 * 16 (narrow_product's two calls), so the compiler knows it; when N < W the
 * block of B is first copied into `padded`, W columns wide, zeros after N,
 * and the last rows of C, fewer than NARROW_ROWS, read theirs of A from a
 * copy in `sliver` with zero rows after them, as the tile's do. */
static inline void narrow_rows(const Product *p, const int W, float *padded, float *sliver)
{
    for (int k0 = 0; k0 < p->K; k0 += K_BLOCK) {
        int kc = p->K - k0 < K_BLOCK ? p->K - k0 : K_BLOCK;
        const float *block = p->B + (size_t)k0 * p->b_k;
        size_t b_k = p->b_k;
        if (p->N < W) {
            for (int k = 0; k < kc; k++)
                for (int c = 0; c < W; c++)
                    padded[k * W + c] = c < p->N ? block[(size_t)k * b_k + c] : 0.0f;
            block = padded, b_k = (size_t)W;
        }
        int add = p->accumulate || k0 > 0;
        const size_t a_row = p->a_row, a_k = p->a_k;
        for (int i0 = 0; i0 < p->M; i0 += NARROW_ROWS) {
            int rows = p->M - i0 < NARROW_ROWS ? p->M - i0 : NARROW_ROWS;
            const float *a = p->A + (size_t)i0 * a_row + (size_t)k0 * a_k;  /* A[i0, k0] */
            size_t r_step = a_row, k_step = a_k;
            if (rows < NARROW_ROWS) {     /* the last rows: a sliver with zero rows after */
                for (int k = 0; k < kc; k++)
                    for (int r = 0; r < NARROW_ROWS; r++)
                        sliver[k * NARROW_ROWS + r] = r < rows ? a[r * a_row + k * a_k] : 0.0f;
                a = sliver, r_step = 1, k_step = NARROW_ROWS;
            }
            float acc[NARROW_ROWS][16] = {{0}};   /* fixed bounds: it stays in registers */
            for (int k = 0; k < kc; k++) {
                const float *b = block + (size_t)k * b_k;
                for (int r = 0; r < NARROW_ROWS; r++) {
                    float ark = a[r * r_step + k * k_step];
                    #pragma omp simd
                    for (int c = 0; c < W; c++) acc[r][c] += ark * b[c];
                }
            }
            for (int r = 0; r < rows; r++) {
                float *c = p->C + (size_t)(i0 + r) * p->N;
                for (int q = 0; q < p->N; q++) c[q] = add ? c[q] + acc[r][q] : acc[r][q];
            }
        }
    }
}

/* Whether p is narrow (above): at most 16 columns with B's rows in place,
 * on one thread anyway (small, or called inside a parallel loop); if so,
 * computes it. */
static int narrow_product(const Product *p, int threads)
{
    if (threads != 1 || p->b_col != 1 || p->N > 16 || p->K == 0) return 0;
    float padded[K_BLOCK * 16], sliver[K_BLOCK * NARROW_ROWS];
    if (p->N <= 8) narrow_rows(p, 8, padded, sliver);
    else narrow_rows(p, 16, padded, sliver);
    return 1;
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
    if (narrow_product(&p, threads)) return 0;
    int max_kc = K < K_BLOCK ? K : K_BLOCK;
    int max_panels = ((N < N_BLOCK ? N : N_BLOCK) + TILE_COLS - 1) / TILE_COLS;
    long tiles = (long)((M + TILE_ROWS - 1) / TILE_ROWS) * max_panels;
    /* Few tiles, blocks of k enough for every thread: threads take blocks. */
    int by_k = threads > 1 && N <= N_BLOCK && K >= threads * K_BLOCK &&
               tiles < (long)SPLIT_K_TILES * threads;
    p.pack_a = p.a_k != 1 && N >= PACK_A_MIN_COLS;
    p.b_floats = (size_t)max_panels * max_kc * TILE_COLS;
    /* Room for one sliver of A, or with pack_a for the slivers of every row
     * tile a thread's tiles touch in any block of columns: its share of
     * them, and one more at each end where its range of tiles starts or ends
     * inside a row tile (all of them when the threads take blocks of k). */
    int row_tiles = (M + TILE_ROWS - 1) / TILE_ROWS;
    int a_tiles = !p.pack_a ? 1 : by_k ? row_tiles : row_tiles / threads + 2;
    p.a_floats = (size_t)a_tiles * TILE_ROWS * max_kc;
    /* The work buffer: on the stack for a small product (attention makes
     * thousands per step, one per head, and a malloc each would cost more
     * than packing), from the heap for a large one. */
    float small[SMALL_PACK];
    size_t need = threads * (p.b_floats + p.a_floats) +
                  (by_k ? ((size_t)threads * K_ROUND - 1) * M * N : 0);
    p.work = need <= SMALL_PACK ? small : malloc(need * sizeof *p.work);
    if (!p.work) return -1;
    int failed = 0;
    if (threads == 1) {
        failed = share_tiles(&p, 0, 1);
    } else {
        #pragma omp parallel num_threads(threads) reduction(|:failed)
        {
            int me = omp_get_thread_num(), n = omp_get_num_threads();
            failed |= by_k ? share_k(&p, me, n) : share_tiles(&p, me, n);
        }
    }
    if (p.work != small) free(p.work);
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
        /* Column sums of dout, by blocks of SUM_ROWS rows (tensor.h): each
         * block is summed by the thread that has it, row after row, then
         * the blocks' sums are added in order, whatever the thread count. */
        int blocks = sum_blocks(M);
        float *partial = malloc((size_t)blocks * N * sizeof *partial);
        if (!partial) return -1;
        #pragma omp parallel for schedule(static) if (blocks > 1)
        for (int b = 0; b < blocks; b++) {
            float *sum = partial + (size_t)b * N;
            int end = M - b * SUM_ROWS < SUM_ROWS ? M : (b + 1) * SUM_ROWS;
            for (int j = 0; j < N; j++) sum[j] = 0.0f;
            for (int i = b * SUM_ROWS; i < end; i++) {
                const float *row = dout + (size_t)i * N;
                #pragma omp simd
                for (int j = 0; j < N; j++) sum[j] += row[j];
            }
        }
        partial_sums_add(dbias, partial, blocks, N);
        free(partial);
    }
    return 0;
    /* END SOLUTION */
}
