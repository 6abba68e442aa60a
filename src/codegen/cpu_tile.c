/*
 * cpu_tile.c — register tiles for the contractions of loop dialects (the C of the cpu
 * backend). Takes a plan kernel cg_gemm_match reads as a (batched) product, rows x cols
 * over K, and renders it as the packed-panel scheme of the library GEMM (runtime/cpu/gemm.c),
 * but with each operand being whatever expression the plan left in it: a convolution's
 * input window with its padding select (implicit GEMM), a transpose, a broadcast. So a
 * convolution needs no im2col tensor and no pattern: its window is read once per panel.
 *
 *   - cols, the side that runs along a vector, is the role of the kernel's last var (the
 *     pixels of a convolution, whose stores are then contiguous); rows, the other;
 *   - a thread packs the cols operand of one panel (KILN_NR columns, every k) into its own
 *     stack array when the panel changes, evaluating the operand's expression per element
 *     with the reduction vars as nested loops (no division per k);
 *   - the rows operand is packed once per thread for all row tiles when it is small and
 *     the same in every batch (a convolution's weights), else per tile;
 *   - the prelude's k_tile (dialect_c.c) multiplies a KILN_MR x KILN_NR tile in registers:
 *     per k one pair of vector loads, KILN_MR broadcasts, 2 KILN_MR vector multiply-adds;
 *   - the epilogue (the kernel's own items: bias, activation, residual, stores) runs per
 *     output of the tile, in the kernel's vars.
 *
 * The vector width is the compiler's (KILN_VW: 16 under AVX-512, else 8), so the source
 * is the same on every x86 host and the tile follows -march=native.
 */
#include "codegen.h"

#include <stdarg.h>

enum { ROLE_BATCH, ROLE_M, ROLE_N };  /* CgGemm.role, as gemm.c */
/* the tile's rows (prelude KILN_MR) and the widest panel it may meet (2 x 16 floats) */
enum { TILE_MR = 6, TILE_NR_MAX = 32 };
/* A thread's panel and row tile live on its stack: at most 2048 k (256 KiB of panel at the
 * widest vectors), and the rows packed once only within 64 KiB. */
enum { TILE_K_MAX = 2048, ROWS_ONCE_BYTES = 64 << 10 };

static int last_role(const Kernel *k, const CgGemm *g) {
  for (int v = k->rank - 1; v >= 0; v--)
    if (k->shape[v] > 1) return g->role[v];
  return ROLE_N;
}

bool cg_cpu_tile_match(const Plan *p, const Kernel *k, const CgOptions *o, CgCpuTile *t) {
  if (!o->cpu_tiles || k->chain != 0) return false;
  CgOptions lo = *o;
  lo.loop_library = true;  /* the structure alone: no GPU tile rules */
  CgGemm g;
  if (!cg_gemm_match(p, k, &lo, &g) || g.n_b != 1) return false;
  if (g.K < 4 || g.K > TILE_K_MAX) return false;
  int cols = last_role(k, &g) == ROLE_M ? ROLE_M : ROLE_N;
  CgCpuTile c = { .g = g, .cols_role = cols, .rows_role = cols == ROLE_M ? ROLE_N : ROLE_M };
  c.cols_x = cols == ROLE_M ? g.a : g.b;
  c.rows_x = cols == ROLE_M ? g.b : g.a;
  c.cols = cols == ROLE_M ? g.M : g.N;
  c.rows = cols == ROLE_M ? g.N : g.M;
  /* a tile of 6 rows and a panel of 16 columns should be mostly full */
  if (c.rows < 4 || c.cols < 8) return false;
  int64_t row_tiles = (c.rows + TILE_MR - 1) / TILE_MR;
  c.rows_once = g.batch == 1 && (double)row_tiles * TILE_MR * (double)g.K * 4 <= ROWS_ONCE_BYTES;
  if (t) *t = c;
  return true;
}

static void put(const CgEmit *em, const char *f, ...) __attribute__((format(printf, 2, 3)));
static void put(const CgEmit *em, const char *f, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, f);
  vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  em->put(em->r, buf);
}

#define open_(em, ...) (put(em, __VA_ARGS__), (em)->indent((em)->r, 1))

static void close_(const CgEmit *em) {
  em->indent(em->r, -1);
  put(em, "}");
}

static const char *L(const CgEmit *em, int64_t v) { return em->lit(em->r, v); }

static void decompose(const CgEmit *em, const Kernel *k, const CgCpuTile *t, int role, const char *flat) {
  int64_t total = role == ROLE_BATCH ? t->g.batch : role == t->rows_role ? t->rows : t->cols;
  em->digits(em->r, flat, 0, k->rank, k->shape, t->g.role, role, total);
}

/* dst[kiln_k * stride + lane] = x for every k, the reduction vars as nested loops in the
 * order of the flat k (the last fastest), kiln_k counting along. */
static void pack_k(const CgEmit *em, const Kernel *k, const Expr *x, const char *dst, const char *stride,
                   const char *lane) {
  const char *I = em->d->index_type;
  open_(em, "{ %s kiln_k = 0;", I);
  int opened = 0;
  for (int i = 0; i < k->n_red; i++) {
    int v = k->rank + i;
    if (k->red_shape[i] == 1) put(em, "const %s v%d = 0;", I, v);
    else open_(em, "for (%s v%d = 0; v%d < %s; v%d++) {", I, v, v, L(em, k->red_shape[i]), v), opened++;
  }
  em->push(em->r);
  char val[256];
  em->emit(em->r, x, val, sizeof val);
  put(em, "%s[kiln_k * %s + %s] = %s;", dst, stride, lane, val);
  put(em, "kiln_k++;");
  em->pop(em->r);
  while (opened--) close_(em);
  close_(em);
}

/* Rows r0 .. r0 + KILN_MR of the rows operand into dst ([K][KILN_MR]); rows past the last
 * read the last again (their results are not stored). */
static void pack_rows(const CgEmit *em, const Kernel *k, const CgCpuTile *t, const char *r0, const char *dst) {
  const char *I = em->d->index_type;
  open_(em, "for (int kiln_i = 0; kiln_i < KILN_MR; kiln_i++) {");
  put(em, "const %s kiln_rq = %s + kiln_i < %s ? %s + kiln_i : %s;", I, r0, L(em, t->rows), r0, L(em, t->rows - 1));
  em->push(em->r);
  decompose(em, k, t, t->rows_role, "kiln_rq");
  pack_k(em, k, t->rows_x, dst, "KILN_MR", "kiln_i");
  em->pop(em->r);
  close_(em);
}

void cg_render_cpu_tile(const Plan *p, const Kernel *k, const CgCpuTile *t, const CgEmit *em) {
  (void)p;
  const Dialect *d = em->d;
  const char *I = d->index_type;
  const CgGemm *g = &t->g;
  int64_t K = g->K, row_tiles = (t->rows + TILE_MR - 1) / TILE_MR;
  double work = (double)t->rows * (double)t->cols * (double)K * (double)g->batch;
  bool parallel = work >= (double)d->min_parallel_work;
  if (parallel) put(em, "#pragma omp parallel");
  open_(em, "{");
  put(em, "float kiln_pc[%lld * KILN_NR];", (long long)K);
  if (t->rows_once) put(em, "float kiln_pr[%lld * KILN_MR];", (long long)(row_tiles * K));
  else put(em, "float kiln_pr[%lld * KILN_MR];", (long long)K);
  put(em, "%s kiln_pl = -1;", I);
  put(em, "const %s kiln_ct = (%s + KILN_NR - 1) / KILN_NR;", I, L(em, t->cols));
  if (t->rows_once) {  /* every row tile, [tile][K][KILN_MR], before the first panel */
    open_(em, "for (%s kiln_ri = 0; kiln_ri < %s; kiln_ri++) {", I, L(em, row_tiles));
    put(em, "const %s kiln_r0 = kiln_ri * KILN_MR;", I);
    put(em, "float *kiln_dst = kiln_pr + kiln_ri * %s;", L(em, K * TILE_MR));
    pack_rows(em, k, t, "kiln_r0", "kiln_dst");
    close_(em);
  }
  if (parallel) put(em, "#pragma omp for schedule(static)");
  /* the row tiles of one panel run in a row: a thread packs a panel once */
  open_(em, "for (%s kiln_t = 0; kiln_t < %s * kiln_ct; kiln_t++) {", I, L(em, g->batch * row_tiles));
  put(em, "const %s kiln_ri = kiln_t %% %s, kiln_cb = kiln_t / %s;", I, L(em, row_tiles), L(em, row_tiles));
  put(em, "const %s kiln_ci = kiln_cb %% kiln_ct, kiln_bz = kiln_cb / kiln_ct;", I);
  put(em, "const %s kiln_r0 = kiln_ri * KILN_MR, kiln_c0 = kiln_ci * KILN_NR;", I);
  em->push(em->r);
  decompose(em, k, t, ROLE_BATCH, "kiln_bz");
  open_(em, "if (kiln_cb != kiln_pl) {");
  put(em, "kiln_pl = kiln_cb;");
  open_(em, "for (int kiln_j = 0; kiln_j < KILN_NR; kiln_j++) {");
  put(em, "const %s kiln_cq = kiln_c0 + kiln_j < %s ? kiln_c0 + kiln_j : %s;", I, L(em, t->cols), L(em, t->cols - 1));
  em->push(em->r);
  decompose(em, k, t, t->cols_role, "kiln_cq");
  pack_k(em, k, t->cols_x, "kiln_pc", "KILN_NR", "kiln_j");
  em->pop(em->r);
  close_(em);
  close_(em);
  if (!t->rows_once) pack_rows(em, k, t, "kiln_r0", "kiln_pr");
  put(em, "float kiln_d[KILN_MR * KILN_NR];");
  if (t->rows_once) put(em, "k_tile(kiln_pr + kiln_ri * %s, kiln_pc, %s, kiln_d);", L(em, K * TILE_MR), L(em, K));
  else put(em, "k_tile(kiln_pr, kiln_pc, %s, kiln_d);", L(em, K));
  open_(em, "for (int kiln_i = 0; kiln_i < KILN_MR && kiln_r0 + kiln_i < %s; kiln_i++) {", L(em, t->rows));
  put(em, "const %s kiln_rq = kiln_r0 + kiln_i;", I);
  em->push(em->r);
  decompose(em, k, t, t->rows_role, "kiln_rq");
  open_(em, "for (int kiln_j = 0; kiln_j < KILN_NR && kiln_c0 + kiln_j < %s; kiln_j++) {", L(em, t->cols));
  put(em, "const %s kiln_cq = kiln_c0 + kiln_j;", I);
  em->push(em->r);
  decompose(em, k, t, t->cols_role, "kiln_cq");
  em->items(em->r, 1, "kiln_d[kiln_i * KILN_NR + kiln_j]");
  em->pop(em->r);
  close_(em);
  em->pop(em->r);
  close_(em);
  em->pop(em->r);
  close_(em);
  close_(em);
}
