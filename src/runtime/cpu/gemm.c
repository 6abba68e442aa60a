/*
 * gemm.c — the cpu backend's library GEMM: a plain (batched) f32 product with its bias and
 * relu or tanh GELU (what codegen/library.c matches), run by a register-blocked micro-kernel
 * over B packed in panels of 16 columns. Packing is done once when B is a constant of the
 * program (weights), else before each run. The micro-kernel keeps a 6-row tile of D, two
 * vectors wide, in registers: per step of k one pair of panel loads and six broadcasts of A
 * feed twelve vector multiply-adds, where the generated dot-product tiles reload their operands
 * (bench/results/2026-11-30-cpu-vs-ort-2.md). It is compiled for AVX-512, AVX2 and the
 * baseline, chosen from the host CPU at run time.
 *
 * Swapped: where A's rows fill the panels' columns better than B's columns do, the tile runs on
 * the transposed product, D^T = B^T A^T: A packed in panels of its rows (once, when A is the
 * program's constant: a 1 x 1 convolution's weights), B's columns broadcast, the tile stored
 * transposed. A convolution at 7 x 7 has 49 columns, 64 lanes in two panels of 32 (77 %); its
 * 512 channels fill 16 panels, and the 49 columns 9 tiles of 6 rows (91 %).
 */
#include "cpu.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../../base/scalar.h"
#include "../../base/vmath.inc"

enum { MR = 6, NR_MAX = 32 };

typedef struct CpuGemm {
  CgLibGemm g;
  const RtBuf *buf;    /* the schedule's stage buffers, read at each run: host-memory backends rebind
                          inputs and outputs to the caller's arrays every run */
  bool swapped;        /* the panels hold A's rows, the tile's rows are B's columns (D^T = B^T A^T) */
  float *packed;       /* B as [batch_b][Np / NR][K][NR], Np = N rounded up to NR_MAX, zero padded;
                          swapped, A as [batch_a][Mp / NR][K][NR] */
  int64_t np;          /* Np (swapped: Mp) */
  int64_t packed_batches;
  bool packed_once;    /* the packed operand is a constant of the program: packed at prepare */
  bool full_in_place;  /* full panels read B where it is (reads_in_place), only a last partial one packed */
  void *dev;           /* the cpu device whose team runs it */
  void (*tile)(const float *const *, int64_t, int64_t, const float *, int64_t, float *);
  int nr;              /* the tile's columns (two vectors of the CPU's width) */
} CpuGemm;

typedef float v16 __attribute__((vector_size(64), aligned(4)));
typedef float v8 __attribute__((vector_size(32), aligned(4)));

/* One MR x (2 W) tile in W-wide vectors: acc = sum over k of a(r, k) * P[k][0..2W), the six
 * rows' twelve accumulators written out so that they stay in registers (AVX2 has 16, AVX-512
 * 32). Rows past the last read its last row again (their results are not stored). */
#define TILE_KERNEL(NAME, V, W, ATTR)                                                                        \
  ATTR static void NAME(const float *const *rows, int64_t a_step, int64_t K, const float *P, int64_t np,        \
                        float *out) {                                                                         \
    V c00 = { 0 }, c01 = { 0 }, c10 = { 0 }, c11 = { 0 }, c20 = { 0 }, c21 = { 0 };                        \
    V c30 = { 0 }, c31 = { 0 }, c40 = { 0 }, c41 = { 0 }, c50 = { 0 }, c51 = { 0 };                        \
    const float *r0 = rows[0], *r1 = rows[1], *r2 = rows[2], *r3 = rows[3], *r4 = rows[4], *r5 = rows[5];  \
    for (int64_t k = 0; k < K; k++, P += np) {                                                             \
      V b0 = *(const V *)P, b1 = *(const V *)(P + W); /* the types allow unaligned loads */                \
      int64_t at = k * a_step;                                                                              \
      c00 += r0[at] * b0, c01 += r0[at] * b1;                                                               \
      c10 += r1[at] * b0, c11 += r1[at] * b1;                                                               \
      c20 += r2[at] * b0, c21 += r2[at] * b1;                                                               \
      c30 += r3[at] * b0, c31 += r3[at] * b1;                                                               \
      c40 += r4[at] * b0, c41 += r4[at] * b1;                                                               \
      c50 += r5[at] * b0, c51 += r5[at] * b1;                                                               \
    }                                                                                                       \
    V all[2 * MR] = { c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51 };                         \
    memcpy(out, all, sizeof all);                                                                           \
  }

/* libkiln is ISO C (no contraction by default): the tiles ask for multiply-adds themselves */
TILE_KERNEL(tile_avx512, v16, 16, __attribute__((target("avx512f,fma"), optimize("fp-contract=fast"))))
TILE_KERNEL(tile_avx2, v8, 8, __attribute__((target("avx2,fma"), optimize("fp-contract=fast"))))
TILE_KERNEL(tile_base, v8, 8, __attribute__((optimize("fp-contract=fast"))))

typedef void (*TileFn)(const float *const *, int64_t, int64_t, const float *, int64_t, float *);

/* The widest tile this CPU runs, and its width in columns (two vectors). */
static TileFn tile_fn(int *nr) {
  __builtin_cpu_init();
  *nr = 16;
  if (__builtin_cpu_supports("avx512f")) return *nr = 32, tile_avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return tile_avx2;
  return tile_base;
}

static const float *stage_at(const CpuGemm *c, int stage, int64_t off) {
  return (const float *)(uintptr_t)c->buf[stage] + off;
}

/* Panel pi of B of batch b into panel (the packed operand's place for it: packed_at): NR columns, K rows of NR contiguous floats (a tile streams its
 * panel front to back): P[n / NR][k][n % NR] = B(k, n), zero past N. Swapped, A's rows the
 * same way: P[m / NR][k][m % NR] = A(m, k), zero past M; A along m is B along n's layout, A
 * along k B along k's. */
static void pack_panel(const CpuGemm *c, int64_t b, int64_t pi, float *panel) {
  const CgLibGemm *g = &c->g;
  const float *B = c->swapped ? stage_at(c, g->a_stage, g->a_off + b * g->a_sb) : stage_at(c, g->b_stage, g->b_off + b * g->b_sb);
  int64_t N = c->swapped ? g->M : g->N, ldb = c->swapped ? g->lda : g->ldb;
  bool along_k = c->swapped ? !g->a_t : g->b_t;
  int NR = c->nr;
  int64_t n0 = pi * NR;
  int cols = n0 + NR <= N ? NR : N > n0 ? (int)(N - n0) : 0;
  if (!along_k)  /* B[k][n]: each point's row of the panel is a copy, the tail zeroed */
    for (int64_t k = 0; k < g->K; k++) {
      const float *src = B + k * ldb + n0;
      float *dst = panel + k * NR;
      for (int j = 0; j < cols; j++) dst[j] = src[j];
      for (int j = cols; j < NR; j++) dst[j] = 0;
    }
  else  /* B[n][k]: each column read along k (a branch per element kept it scalar) */
    for (int j = 0; j < NR; j++) {
      const float *src = j < cols ? B + (n0 + j) * ldb : NULL;
      for (int64_t k = 0; k < g->K; k++) panel[k * NR + j] = src ? src[k] : 0.0f;
    }
}

/* A thread's share of 0 .. n - 1: [*lo, *hi) */
static void share(int64_t n, int tid, int nt, int64_t *lo, int64_t *hi) {
  *lo = n * tid / nt, *hi = n * (tid + 1) / nt;
}

static float *packed_at(const CpuGemm *c, int64_t b, int64_t pi) {
  return c->packed + (c->packed_batches > 1 ? b * c->g.K * c->np : 0) + pi * c->nr * c->g.K;
}

/* Is panel pi of nr columns inside the n columns? */
static bool panel_full(int64_t pi, int nr, int64_t n) { return (pi + 1) * nr <= n; }

/* Every panel of every packed batch, the panels shared among the threads (a full one read in
 * place is not packed). */
static void pack_part(void *ctx, int tid, int nt) {
  CpuGemm *c = ctx;
  int64_t panels = c->np / c->nr, lo, hi;
  share(c->packed_batches * panels, tid, nt, &lo, &hi);
  for (int64_t i = lo; i < hi; i++)
    if (!c->full_in_place || !panel_full(i % panels, c->nr, c->g.N))
      pack_panel(c, i / panels, i % panels, packed_at(c, i / panels, i % panels));
}

static void pack_all(CpuGemm *c) { cpu_run(c->dev, pack_part, c); }

/* kiln's tanh GELU (te_gelu_tanh): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), through the
 * generated kernels' own tanh (vmath.inc), branch-free so that the loop over a row vectorises:
 * with glibc's tanhf, a scalar call, a 256x1024x256 product with this epilogue took 9.6 ms on
 * one thread against 3.2 ms with relu. */
static float gelu_tanh(float x) { return 0.5f * x * (1.0f + k_tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x))); }

enum { ACT_NONE, ACT_RELU, ACT_GELU };

/* One row of a tile out: d[j] = act(a[j] + bias_n[j] + bias_m), each case its own loop so
 * that it vectorises (the per-element tests of one loop kept the mlp's epilogue scalar: a
 * third of its run), and d written once: a second pass that read back the row just stored
 * waited on the write's miss (d is cold: 86 % of the epilogue's time in a 128x784x512
 * product, 17 % of the whole call on two threads). Compiled for the baseline (four wide):
 * instances for each vector width, as the tiles have, called k_tanhf out of line, a call an
 * element, 7x slower. */
static void store_row(float *restrict d, const float *restrict a, int n, const float *restrict bias_n, float bias_m,
                      int act) {
#define STORE_LOOP(BIAS, F)              \
  for (int j = 0; j < n; j++) {          \
    float v = a[j] + (BIAS);             \
    d[j] = F;                            \
  }
  if (act == ACT_RELU) {
    if (bias_n) STORE_LOOP(bias_n[j], v > 0 ? v : 0)
    else STORE_LOOP(bias_m, v > 0 ? v : 0)
  } else if (act == ACT_GELU) {
    if (bias_n) STORE_LOOP(bias_n[j], gelu_tanh(v))
    else STORE_LOOP(bias_m, gelu_tanh(v))
  } else {
    if (bias_n) STORE_LOOP(bias_n[j], v)
    else STORE_LOOP(bias_m, v)
  }
#undef STORE_LOOP
}

/* One row of a swapped tile out, a column of D: d[j x ldd] = act(a[j] + bias_m[j] + bias_n) */
static void store_column(float *restrict d, int64_t ldd, const float *restrict a, int n, const float *restrict bias_m,
                         float bias_n, int act) {
  float v[NR_MAX];
  store_row(v, a, n, bias_m, bias_n, act);
  for (int j = 0; j < n; j++) d[j * ldd] = v[j];
}

/* The share of lanes and rows a tile computes that are the product's: n of np lanes, m of
 * MR-row tiles. */
static double tile_fill(int64_t lanes, int64_t rows, int nr) {
  return (double)lanes / (double)((lanes + nr - 1) / nr * nr) * (double)rows / (double)((rows + MR - 1) / MR * MR);
}

/* A product packed per run, each batch its own panels, of at least this many panels, packs each
 * panel where it is used, just before its row tiles, the threads taking whole panels: the panel
 * is read from cache, not memory, and no thread waits for another's packing. With fewer panels
 * whole panels would share the work too coarsely (on this 2-thread machine: 8 a thread at least),
 * so all are packed first, shared among the threads, and the row tiles shared after. */
enum { PANELS_PACKED_IN_TILES = 16 };

/* Reading B's panels where they are, rather than packing them, pays when few row tiles share
 * a panel: packing costs a copy of B each run, the tiles then run a little slower on rows of B
 * far apart (resnet50's 1x1 convolutions 256 -> 64 at 56x56, 11 row tiles a panel: 4-5 %
 * faster in place in the model; 512 -> 128 at 28x28, 22 row tiles: 5 % slower, alone). B must
 * run along n (its rows hold the panel's columns) in rows that keep a panel's 16-float vectors
 * aligned. */
enum { ROW_TILES_IN_PLACE = 16 };

static bool reads_in_place(const CpuGemm *c) {
  const CgLibGemm *g = &c->g;
  return !c->swapped && !c->packed_once && !g->b_t && g->ldb % 16 == 0 && g->b_off % 16 == 0 && g->b_sb % 16 == 0 &&
         (g->M + MR - 1) / MR <= ROW_TILES_IN_PLACE;
}

static bool packs_in_tiles(const CpuGemm *c) {
  return !c->packed_once && c->packed_batches == c->g.batch && c->g.batch * (c->np / c->nr) >= PANELS_PACKED_IN_TILES;
}

/* The tiles: panels of B's columns (the lanes) and row tiles of A's rows, or swapped, panels of
 * A's rows and row tiles of B's columns, each tile stored transposed. The row tiles of one panel
 * run in a row: the panel stays in cache while the rows stream by. */
static void tiles_part(void *ctx, int tid, int threads) {
  const CpuGemm *c = ctx;
  const CgLibGemm *g = &c->g;
  bool sw = c->swapped;
  int NR = c->nr;
  /* the tile's rows: A's (its rows along m: a_t), or swapped, B's columns (along n: !b_t) */
  int64_t rows_n = sw ? g->N : g->M, lanes_n = sw ? g->M : g->N, ld = sw ? g->ldb : g->lda;
  int64_t off = sw ? g->b_off : g->a_off, sb = sw ? g->b_sb : g->a_sb;
  bool strided = sw ? !g->b_t : g->a_t, bias_lanes = sw ? g->bias_m : !g->bias_m;
  int64_t mt = (rows_n + MR - 1) / MR, nt = c->np / NR, step = strided ? ld : 1, lo, hi;
  int act = g->relu ? ACT_RELU : g->gelu ? ACT_GELU : ACT_NONE;
  /* whole panels a thread, each packed by the one thread that uses it into one place, its first
   * panel's, which stays in its cache (each panel in its own place: as many cold lines written) */
  bool pack_here = packs_in_tiles(c);
  if (pack_here) share(g->batch * nt, tid, threads, &lo, &hi), lo *= mt, hi *= mt;
  else share(g->batch * mt * nt, tid, threads, &lo, &hi);
  float *mine = pack_here && lo < hi ? packed_at(c, lo / (mt * nt), lo / mt % nt) : NULL;
  for (int64_t t = lo; t < hi; t++) {
    int64_t b = t / (mt * nt), pi = t / mt % nt, ri = t % mt;
    bool in_place = c->full_in_place && panel_full(pi, NR, g->N);
    if (pack_here && ri == 0 && !in_place) pack_panel(c, b, pi, mine);
    const float *X = stage_at(c, sw ? g->b_stage : g->a_stage, off + b * sb);
    const float *rows[MR];
    int64_t r0 = ri * MR, p0 = pi * NR;
    for (int r = 0; r < MR; r++) {
      int64_t m = r0 + r < rows_n ? r0 + r : rows_n - 1;
      rows[r] = strided ? X + m : X + m * ld;
    }
    const float *P = in_place ? stage_at(c, g->b_stage, g->b_off + b * g->b_sb + p0) : pack_here ? mine : packed_at(c, b, pi);
    float acc[MR * NR_MAX];
    c->tile(rows, step, g->K, P, in_place ? g->ldb : NR, acc);
    float *D = (float *)(uintptr_t)c->buf[g->d_stage] + g->d_off + b * g->d_sb;
    const float *bias = g->bias_stage >= 0 ? stage_at(c, g->bias_stage, g->bias_off) : NULL;
    int lanes = p0 + NR <= lanes_n ? NR : (int)(lanes_n - p0);
    for (int r = 0; r < MR && r0 + r < rows_n; r++) {
      const float *bl = bias && bias_lanes ? bias + p0 : NULL;
      float br = bias && !bias_lanes ? bias[r0 + r] : 0.0f;
      if (sw) store_column(D + p0 * g->ldd + r0 + r, g->ldd, acc + r * NR, lanes, bl, br, act);
      else store_row(D + (r0 + r) * g->ldd + p0, acc + r * NR, lanes, bl, br, act);
    }
  }
}

kiln_status cpu_gemm_prepare(const CgLibGemm *g, const RtBuf *buf, void *dev, void **call) {
  *call = NULL;
  if (g->M < 1 || g->N < 1 || g->K < 1 || g->batch < 1)
    return kiln_fail(KILN_ERR_UNSUPPORTED, "cpu gemm: an empty product");
  CpuGemm *c = kiln_calloc(1, sizeof *c);
  if (!c) return kiln_fail(KILN_ERR_NO_MEMORY, "cpu gemm: out of memory");
  c->g = *g, c->buf = buf, c->dev = dev, c->tile = tile_fn(&c->nr);
  /* swapped where its tiles are fuller by a twentieth, and A is packed no more often than B
   * would be: once, or per run where B is too and A is no larger */
  c->swapped = tile_fill(g->M, g->N, c->nr) > 1.05 * tile_fill(g->N, g->M, c->nr) &&
               (g->a_constant || (!g->b_constant && g->M <= g->N));
  c->np = ((c->swapped ? g->M : g->N) + NR_MAX - 1) / NR_MAX * NR_MAX;
  c->packed_batches = (c->swapped ? g->a_sb : g->b_sb) ? g->batch : 1;
  c->packed_once = c->swapped ? g->a_constant : g->b_constant;
  c->full_in_place = reads_in_place(c);
  int64_t n;
  if (!size_mul(g->K, c->np, &n) || !size_mul(n, c->packed_batches, &n) || !size_mul(n, (int64_t)sizeof(float), &n) ||
      !(c->packed = kiln_malloc((size_t)n))) {
    kiln_free(c);
    return kiln_fail(KILN_ERR_NO_MEMORY, "cpu gemm: no memory for the packed operand");
  }
  if (c->packed_once) pack_all(c);
  *call = c;
  return KILN_OK;
}

kiln_status cpu_gemm_run(void *call) {
  CpuGemm *c = call;
  if (!c->packed_once && !packs_in_tiles(c)) pack_all(c);
  cpu_run(c->dev, tiles_part, c);
  return KILN_OK;
}

void cpu_gemm_release(void *call) {
  CpuGemm *c = call;
  if (!c) return;
  kiln_free(c->packed);
  kiln_free(c);
}
