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
 *   - a thread packs the cols operand of a group of panels (KILN_NR columns each, every k;
 *     the group within 128 KiB at any width) into its own stack array when the group changes, evaluating
 *     the operand's expression per element with the reduction vars as nested loops (no
 *     division per k), then runs every row tile over each panel of the group;
 *   - a cols operand that is the program's constant (a layer's weights) is laid out so once, in
 *     the kernel's pack at compile and after write_param, not every run (CgCpuTile.cols_once);
 *   - the rows operand is packed once per thread for all row tiles when it is small and
 *     the same in every batch (a convolution's weights), else once per row tile and group;
 *   - the prelude's k_tile (dialect_c.c) multiplies a KILN_MR x KILN_NR tile in registers:
 *     per k one pair of vector loads, KILN_MR broadcasts, 2 KILN_MR vector multiply-adds;
 *   - the epilogue (the kernel's own items: bias, activation, residual, stores) runs per
 *     output of the tile, in the kernel's vars.
 *
 * The vector width is the compiler's (KILN_VW: 16 under AVX-512, else 8), so the source
 * is the same on every x86 host and the tile follows -march=native.
 */
#include <string.h>

#include "codegen.h"

/* the tile's rows (prelude KILN_MR) and the widest panel it may meet (2 x 16 floats) */
enum { TILE_MR = 6, TILE_NR_MAX = 32 };
/* A thread's panel and row tile live on its stack: at most 8192 k (1 MiB of panel at the
 * widest vectors), and the rows packed once only within 256 KiB. A sum over more than
 * CG_CPU_F32_SUM_MAX points (a convolution's weight gradient over the batch's pixels) runs
 * the tile over spans of TILE_SPAN points, each summed in f32 and the spans added in f64,
 * as the renderer's f64 rows would. */
enum { TILE_K_MAX = 8192, ROWS_ONCE_BYTES = 256 << 10, TILE_SPAN = CG_CPU_F32_SPAN };
/* A group of panels packed at once: within 128 KiB (L2-resident); within 512 KiB where the rows
 * are packed (not read in place), since each group packs every row tile again.
 * mlp_train_b1024_bf16amp's forward product (x and W1 rounded to bf16 as they are packed; 8
 * panels at AVX2's width, one a group) packed x 8 times; in groups of 4 its fused step took 0.56
 * of the time, mlp_fwd_b4096_bf16 0.53, bert_layer_b8s128_bf16 0.75 (2 threads, AVX2). A group
 * is counted in TILE_NR_MAX columns (cg_cpu_tile_group), and the kernel makes it kiln_gp panels
 * of its own KILN_NR, so that at AVX2's width it holds as many bytes, in twice as many panels. */
enum { GROUP_BYTES = 128 << 10, GROUP_PACKED_BYTES = 512 << 10 };
/* pack_lanes: an operand packed a panel at a time reads at most this many rows, or bytes, at once */
enum { PANEL_ROWS_MAX = 32, PANEL_BYTES_MAX = 256 << 10 };
/* a column operand laid out once (CgCpuTile.cols_once) at most this many bytes */
enum { COLS_ONCE_BYTES = 64 << 20 };

static int64_t pack_numel(const CgCpuTile *t);

static int last_role(const Kernel *k, const CgGemm *g) {
  for (int v = k->rank - 1; v >= 0; v--)
    if (k->shape[v] > 1) return g->role[v];
  return CG_ROLE_N;
}

static int role_vars(const Kernel *k, const CgCpuTile *t, int role, int *vars);
static Expr *run_operand(const Plan *p, const Kernel *k, const Expr *x, int *stride);
static bool guard_at_ends(const Expr *u);
static int merged_load_vars(const Plan *p, const Kernel *k, const Expr *u, const int *cv, int n_cv);
static int64_t run_limit(const CgEmit *em, const Kernel *k, const int *cv, int n_cv, int merged, const char *lane);
typedef struct RowsAt { int64_t base, coef[KILN_MAX_RANK]; } RowsAt;
static bool rows_in_place(const Plan *p, const Kernel *k, const CgCpuTile *t, RowsAt *at);
static bool load_step(const Plan *p, const Kernel *k, const Expr *x, int var, int64_t *step);

/* Does a factor's load move by more than one element when the kernel's last var does? The window
 * form's vector loop runs along that var, so such a factor is a gather at every tap (a product's
 * weights [N, K] read along N: mlp_train_b1024_bf16amp's dY @ W2^T, K = 10, 1.6 ms there). */
static bool gathers_along_last(const Plan *p, const Kernel *k, const CgGemm *g) {
  const Expr *f[2] = { g->a, g->b };
  for (int i = 0; i < 2; i++) {
    int64_t step;
    if (load_step(p, k, f[i], k->rank - 1, &step) && step != 0 && step != 1 && step != -1) return true;
  }
  return false;
}

/* Does x round a value to f16 or bf16 (a cast to one from a wider float), within `depth` levels
 * (an operand is a load and a cast or two; the bound keeps a DAG's walk small)? */
static bool rounds_to_half(const Expr *x, int depth) {
  if (x->kind == EX_CAST && (x->dtype == KILN_F16 || x->dtype == KILN_BF16) && x->args[0]->dtype != KILN_F16 &&
      x->args[0]->dtype != KILN_BF16 && te_is_float(x->args[0]))
    return true;
  for (int i = 0; depth > 0 && i < x->n_args; i++)
    if (rounds_to_half(x->args[i], depth - 1)) return true;
  return false;
}

bool cg_cpu_tile_match(const Plan *p, const Kernel *k, const CgOptions *o, CgCpuTile *t) {
  if (!o->cpu_tiles || k->chain != 0) return false;
  CgOptions lo = *o;
  lo.loop_library = true;  /* the structure alone: no GPU tile rules */
  CgGemm g;
  if (!cg_gemm_match(p, k, &lo, &g) || g.n_b != 1) return false;
  if (g.K < 4 || g.K > TILE_K_MAX) return false;
  /* a sum of at most 16 points that render_window takes (lenet's first convolution, one input
   * channel, 3x3) runs there: its vector loop over the row against the pack and the tile's
   * store of 9 products a point, 98 against 130 us at two threads */
  if (g.K <= 16 && cg_window_match(p, k, o) && !gathers_along_last(p, k, &g)) return false;
  int cols = last_role(k, &g) == CG_ROLE_M ? CG_ROLE_M : CG_ROLE_N;
  CgCpuTile c = { .g = g, .cols_role = cols, .rows_role = cols == CG_ROLE_M ? CG_ROLE_N : CG_ROLE_M };
  c.cols_x = cols == CG_ROLE_M ? g.a : g.b;
  c.rows_x = cols == CG_ROLE_M ? g.b : g.a;
  c.cols = cols == CG_ROLE_M ? g.M : g.N;
  c.rows = cols == CG_ROLE_M ? g.N : g.M;
  /* a tile of 6 rows and a panel of 16 columns should be mostly full */
  if (c.rows < 4 || c.cols < 8) return false;
  int64_t row_tiles = (c.rows + TILE_MR - 1) / TILE_MR;
  c.rows_once = g.batch == 1 && (double)row_tiles * TILE_MR * (double)g.K * 4 <= ROWS_ONCE_BYTES;
  int cv[KILN_MAX_RANK];
  if (t && role_vars(k, &c, c.cols_role, cv) >= 2) c.cols_runs = run_operand(p, k, c.cols_x, &c.cols_stride);
  c.cols_ends = c.cols_runs && (c.cols_stride > 1 || (o->cpu_run_ends && guard_at_ends(c.cols_runs)));
  c.rows_direct = !c.rows_once && rows_in_place(p, k, &c, NULL);
  /* only the packed rows' tile has an out-of-line form (rows read in place take tile_rows) */
  c.tile_apart = !c.rows_direct && (rounds_to_half(c.cols_x, 8) || rounds_to_half(c.rows_x, 8));
  /* a constant column operand, the same in every batch (a layer's weights [k][n]), is laid out
   * once (cols_once), where each thread packed its groups of panels every run: encoder4_d256's
   * and gpt_tiny's projections 0.91-0.97 (two threads). Not where the library GEMM takes the
   * product (it packs such weights once itself): lenet's 1568 -> 128 ran 1.27 slower in tiles,
   * encoder4_d256's 256 x 256 x 256 0.91 (bench/results/2026-12-07-cpu-cols-once.md). */
  c.cols_once = o->cpu_cols_once && !c.cols_runs && !c.tile_apart && cg_reads_constants(p->te, c.cols_x) &&
                (double)pack_numel(&c) * 4 <= COLS_ONCE_BYTES && !cg_library_candidate(p, k, o);
  for (int v = 0; v < k->rank && c.cols_once; v++)
    if (g.role[v] == CG_ROLE_BATCH && k->shape[v] > 1 && te_uses_var(c.cols_x, v)) c.cols_once = false;
  c.split_digits = o->cpu_split_digits;
  if (t) *t = c;
  return true;
}


static void decompose(const CgEmit *em, const Kernel *k, const CgCpuTile *t, int role, const char *flat) {
  int64_t total = role == CG_ROLE_BATCH ? t->g.batch : role == t->rows_role ? t->rows : t->cols;
  em->digits(em->r, flat, 0, k->rank, k->shape, t->g.role, role, total);
}

/* The vars of `role` with more than one point, into vars; how many. */
static int role_vars(const Kernel *k, const CgCpuTile *t, int role, int *vars) {
  int n = 0;
  for (int v = 0; v < k->rank; v++)
    if (t->g.role[v] == role && k->shape[v] > 1) vars[n++] = v;
  return n;
}

typedef struct FirstLoad { const Plan *p; const Kernel *k; const Expr *L; } FirstLoad;

static void first_memory_load(const Expr *L, void *ctx) {
  FirstLoad *f = ctx;
  if (!f->L && f->p->kernel_of[L->src] != f->k->id && !plan_is_baked(f->p->te, L->src)) f->L = L;
}

/* How far operand x's first memory load moves when var `var` (a kernel or reduction var) steps
 * by one, at the middle of the kernel's space (away from a window's clamped edges); false when
 * x has no such load or its offset is not exact there. */
static bool load_step(const Plan *p, const Kernel *k, const Expr *x, int var, int64_t *step) {
  FirstLoad f = { p, k, NULL };
  te_visit_loads(x, first_memory_load, &f);
  if (!f.L) return false;
  int nv = k->rank + k->n_red;
  int64_t v[2 * KILN_MAX_RANK], o0, o1;
  for (int i = 0; i < k->rank; i++) v[i] = k->shape[i] / 2;
  for (int i = 0; i < k->n_red; i++) v[k->rank + i] = k->red_shape[i] / 2;
  int64_t extent = var < k->rank ? k->shape[var] : k->red_shape[var - k->rank];
  if (v[var] + 1 >= extent) v[var] = 0;
  if (!cg_load_offset_at(p, f.L, v, nv, &o0)) return false;
  v[var]++;
  if (!cg_load_offset_at(p, f.L, v, nv, &o1)) return false;
  *step = o1 - o0;
  return true;
}

/* Does operand x (its first memory load) move by one element when the last reduction var
 * does? */
static bool runs_along_k(const Plan *p, const Kernel *k, const Expr *x) {
  int last = -1;
  for (int i = k->n_red - 1; i >= 0 && last < 0; i--)
    if (k->red_shape[i] > 1) last = k->rank + i;
  int64_t step;
  return last >= 0 && load_step(p, k, x, last, &step) && step == 1;
}

/* Is the rows operand a plain f32 load of another kernel's buffer, contiguous along the whole
 * sum (the k-th point of a row at its offset + k) and affine in the kernel's vars (a
 * convolution's weights, a product's rows of activations)? Its row tiles are then read in
 * place (the dialect's tile_rows). at: the offset at every var 0 and each kernel var's
 * coefficient. */
static bool rows_in_place(const Plan *p, const Kernel *k, const CgCpuTile *t, RowsAt *at) {
  const Expr *L = t->rows_x;
  if (L->kind != EX_LOAD || L->dtype != KILN_F32 || p->kernel_of[L->src] == k->id || plan_is_baked(p->te, L->src))
    return false;
  int nv = k->rank + k->n_red;
  int64_t v[2 * KILN_MAX_RANK] = { 0 }, base, o;
  if (!cg_load_offset_at(p, L, v, nv, &base)) return false;
  RowsAt a = { .base = base };
  /* each var's coefficient from a step of one, checked at its last point; the sum's vars in
   * row-major order (the flat k is the offset) */
  int64_t coef[2 * KILN_MAX_RANK], stride = 1;
  for (int i = nv - 1; i >= 0; i--) {
    int64_t extent = i < k->rank ? k->shape[i] : k->red_shape[i - k->rank], c = 0;
    if (extent > 1) {
      v[i] = 1;
      if (!cg_load_offset_at(p, L, v, nv, &o)) return false;
      c = o - base;
      v[i] = extent - 1;
      if (!cg_load_offset_at(p, L, v, nv, &o) || o - base != c * (extent - 1)) return false;
      v[i] = 0;
    }
    if (i >= k->rank) {
      if (extent > 1 && c != stride) return false;
      c = stride, stride *= extent;
    } else if (c && t->g.role[i] == t->cols_role) return false;  /* a rows operand does not run along cols */
    else a.coef[i] = c;
    coef[i] = c;
  }
  /* and at the middle of every var at once (no product of two vars) */
  int64_t want = base;
  for (int i = 0; i < nv; i++) {
    v[i] = (i < k->rank ? k->shape[i] : k->red_shape[i - k->rank]) / 2;
    want += coef[i] * v[i];
  }
  if (!cg_load_offset_at(p, L, v, nv, &o) || o != want) return false;
  if (at) *at = a;
  return true;
}

/* Whether e (index math and value) decides nothing per point: no select, no clamp. */
static bool is_plain(const Expr *e) {
  if (e->kind == EX_SELECT) return false;
  if (e->kind == EX_BINARY && (e->op == TB_MAX || e->op == TB_MIN) && !te_is_float(e)) return false;
  for (int i = 0; i < e->n_args; i++)
    if (!is_plain(e->args[i])) return false;
  return true;
}

/* The interior of a window: a box of the lanes' vars (var[i] in lo[i]..hi[i]) inside which
 * operand x, simplified over the box and every k, is `plain`: a convolution's padding select
 * and its clamps decided, the load's index affine. Most of a convolution's pixels are inside;
 * a lane there packs its window as plain loads walking k (a lane of lenet's conv2 packed
 * through the select and clamps took as long as the tile's multiply-adds over it). */
typedef struct Interior {
  int n, var[KILN_MAX_RANK];
  int64_t lo[KILN_MAX_RANK], hi[KILN_MAX_RANK];
  Expr *plain;  /* x over the box; NULL: no interior */
} Interior;

enum { INTERIOR_SCAN_MAX = 4096 };  /* a var with more points is taken whole or not at all */

/* x simplified with the role's vars in box lo..hi (the other vars of the kernel at their full
 * ranges); NULL unless plain. */
static Expr *plain_over(const Plan *p, const Kernel *k, const Expr *x, const int64_t *lo, const int64_t *hi) {
  Expr *y = te_simplify(p->te, (Expr *)x, lo, hi, k->rank + k->n_red);
  return y && is_plain(y) ? y : NULL;
}

static void find_interior(const Plan *p, const Kernel *k, const CgCpuTile *t, int role, const Expr *x, Interior *in) {
  in->plain = NULL;
  in->n = role_vars(k, t, role, in->var);
  if (is_plain(x) || in->n == 0) return;  /* nothing to decide: the pack is plain already */
  int nv = k->rank + k->n_red;
  int64_t lo[2 * KILN_MAX_RANK], hi[2 * KILN_MAX_RANK];
  for (int v = 0; v < k->rank; v++) lo[v] = 0, hi[v] = k->shape[v] - 1;
  for (int i = 0; i < k->n_red; i++) lo[k->rank + i] = 0, hi[k->rank + i] = k->red_shape[i] - 1;
  /* each var's interval with the others at their middle points: the values around the
   * middle where x is plain */
  for (int i = 0; i < in->n; i++) {
    int64_t box_lo[2 * KILN_MAX_RANK], box_hi[2 * KILN_MAX_RANK];
    memcpy(box_lo, lo, sizeof(int64_t) * nv), memcpy(box_hi, hi, sizeof(int64_t) * nv);
    for (int j = 0; j < in->n; j++) box_lo[in->var[j]] = box_hi[in->var[j]] = k->shape[in->var[j]] / 2;
    int v = in->var[i];
    int64_t extent = k->shape[v], mid = extent / 2, a = mid, b = mid;
    if (extent > INTERIOR_SCAN_MAX) {
      box_lo[v] = 0, box_hi[v] = extent - 1;
      if (!plain_over(p, k, x, box_lo, box_hi)) return;
      a = 0, b = extent - 1;
    } else {
      box_lo[v] = box_hi[v] = mid;
      if (!plain_over(p, k, x, box_lo, box_hi)) return;
      for (; a > 0; a--) {
        box_lo[v] = box_hi[v] = a - 1;
        if (!plain_over(p, k, x, box_lo, box_hi)) break;
      }
      for (; b + 1 < extent; b++) {
        box_lo[v] = box_hi[v] = b + 1;
        if (!plain_over(p, k, x, box_lo, box_hi)) break;
      }
    }
    in->lo[i] = a, in->hi[i] = b;
  }
  /* the box of them all: x simplified over it is what an inside lane packs */
  for (int i = 0; i < in->n; i++) lo[in->var[i]] = in->lo[i], hi[in->var[i]] = in->hi[i];
  in->plain = plain_over(p, k, x, lo, hi);
}

/* Packs operand x of `role` for `lanes` consecutive flat indices from `first` (clamped to the
 * last: lanes past it are computed, not stored): lane l, point k goes to
 * dst[(l / width) * K * width + k * width + l % width]. First each lane's vars into the
 * arrays kiln_<tag>v<var>[lanes] (one division per lane), then the points: the reduction
 * vars as nested loops outside (no division per k), the lanes inside, so that consecutive
 * lanes read consecutive memory when the operand runs along them (a weight's columns: a
 * column at a time walked the matrix 4 KiB apart, one L1 set). An operand that runs along k
 * (a convolution's window, a row of activations) is packed a lane at a time instead, its
 * vars in registers and its reads walking k. */
/* The reduction vars as nested loops in their order, the last fastest (both operands' packs
 * walk the points so: the k-th point packed is the same on both sides); the loops opened. */
static int open_points(const CgEmit *em, const Kernel *k) {
  const char *I = em->d->index_type;
  int opened = 0;
  for (int i = 0; i < k->n_red; i++) {
    int v = k->rank + i;
    if (k->red_shape[i] == 1) cg_put(em, "const %s v%d = 0;", I, v);
    else cg_open(em, "for (%s v%d = 0; v%d < %s; v%d++) {", I, v, v, cg_lit(em, k->red_shape[i]), v), opened++;
  }
  return opened;
}

/* ---- reduction vars split into digits where the operand reads them apart ---- */

/* At most this many divisors split one reduction var (digits: one more) */
enum { SPLIT_DIVISORS_MAX = 3 };
typedef struct Divisors { int64_t c[SPLIT_DIVISORS_MAX]; int n; bool ok; uint8_t *seen; size_t n_seen; } Divisors;

/* The constants c > 1 by which x takes floordiv(v, c) or mod(v, c) of var v itself (a
 * reshape's merged dims read apart), each node of the DAG once. */
static void collect_divisors(const Expr *e, int v, Divisors *d) {
  if (!d->ok || (size_t)e->id >= d->n_seen || d->seen[e->id]) return;
  d->seen[e->id] = 1;
  if (e->kind == EX_BINARY && (e->op == TB_FLOORDIV || e->op == TB_MOD) && e->args[0]->kind == EX_VAR &&
      e->args[0]->var == v && e->args[1]->kind == EX_CONST && e->args[1]->c.i > 1) {
    int64_t c = e->args[1]->c.i;
    bool known = false;
    for (int i = 0; i < d->n; i++) known |= d->c[i] == c;
    if (!known && d->n == SPLIT_DIVISORS_MAX) d->ok = false;
    else if (!known) d->c[d->n++] = c;
  }
  for (int i = 0; i < e->n_args; i++) collect_divisors(e->args[i], v, d);
}

/* Does e (a tree: a load's offset) divide var v or take its remainder? */
static bool divides_var(const Expr *e, int v, int depth) {
  if (depth > 64) return true;  /* too deep to tell: as if it did */
  if (e->kind == EX_BINARY && (e->op == TB_FLOORDIV || e->op == TB_MOD) && te_uses_var(e->args[0], v)) return true;
  for (int i = 0; i < e->n_args; i++)
    if (divides_var(e->args[i], v, depth + 1)) return true;
  return false;
}

typedef struct ApartCheck { const Plan *p; const Kernel *k; int v; bool apart; } ApartCheck;

static void load_apart(const Expr *L, void *ctx) {
  ApartCheck *c = ctx;
  const Kernel *k = c->k;
  TE *te = c->p->te;
  if (c->apart || c->p->kernel_of[L->src] == k->id || plan_is_baked(te, L->src)) return;
  const Stage *S = &te->stages[L->src];
  int64_t lo[2 * KILN_MAX_RANK], hi[2 * KILN_MAX_RANK];
  int nv = k->rank + k->n_red;
  for (int i = 0; i < nv; i++) lo[i] = 0, hi[i] = (i < k->rank ? k->shape[i] : k->red_shape[i - k->rank]) - 1;
  Expr *off = te_const_i(te, KILN_I64, 0);
  for (int i = 0; i < L->n_args && off; i++) {
    Expr *term = te_binary(te, TB_MUL, L->args[i], te_const_i(te, KILN_I64, te_stage_stride(S, i)));
    off = term ? te_binary(te, TB_ADD, off, term) : NULL;
  }
  off = off ? te_simplify(te, off, lo, hi, nv) : NULL;
  c->apart = !off || divides_var(off, c->v, 0);
}

/* Does x read var v apart: a load's offset, as the renderer simplifies it, divides v (not a
 * reshape's merged dims that add up again, as a flatten's [n, c * 49 + h * 7 + w] does)? */
static bool reads_apart(const Plan *p, const Kernel *k, const Expr *x, int v) {
  ApartCheck c = { p, k, v, false };
  te_visit_loads(x, load_apart, &c);
  return c.apart;
}

/* Var v's digits (*n of them, extents ext[], most significant first) from the divisors x
 * takes of it, when they nest: each divides the one before and the extent the first, and x
 * reads v apart (reads_apart). 0: none. */
static int var_digits(const Plan *p, const Kernel *k, const Expr *x, int v, int64_t extent, int64_t *ext, int64_t *div) {
  const TE *te = p->te;
  Divisors d = { .ok = true, .n_seen = te->n_exprs };
  d.seen = kiln_calloc(d.n_seen ? d.n_seen : 1, 1);
  if (!d.seen) return 0;
  collect_divisors(x, v, &d);
  kiln_free(d.seen);
  if (!d.ok || !d.n || !reads_apart(p, k, x, v)) return 0;
  for (int i = 1; i < d.n; i++)  /* largest first */
    for (int j = i; j > 0 && d.c[j] > d.c[j - 1]; j--) { int64_t c = d.c[j]; d.c[j] = d.c[j - 1]; d.c[j - 1] = c; }
  if (d.c[0] >= extent || extent % d.c[0]) return 0;
  for (int i = 1; i < d.n; i++)
    if (d.c[i - 1] % d.c[i]) return 0;
  ext[0] = extent / d.c[0];
  for (int i = 1; i < d.n; i++) ext[i] = d.c[i - 1] / d.c[i];
  ext[d.n] = d.c[d.n - 1];
  memcpy(div, d.c, (size_t)d.n * sizeof *div);
  return d.n + 1;
}

/* open_points for operand x, with each reduction var that x reads apart by constant divisors
 * (a weight gradient's k over the batch's pixels, one merged var that its operands split by
 * H * W and W) taken as its digits, a loop each: x's index math then adds digits where it
 * divided the var at every point. The points come in the same order. Returns x over the digits
 * (x itself where nothing splits); *opened: the loops to close. */
static const Expr *open_points_split(const CgEmit *em, const Plan *p, const Kernel *k, const CgCpuTile *t, const Expr *x,
                                     int *opened) {
  const char *I = em->d->index_type;
  TE *te = p->te;
  int nv = k->rank + k->n_red, next = nv;
  Expr *map[2 * KILN_MAX_RANK];
  enum { VARS_MAX = 2 * KILN_MAX_RANK + KILN_MAX_RANK * (SPLIT_DIVISORS_MAX + 1) };  /* the kernel's, then digits */
  int64_t lo[VARS_MAX], hi[VARS_MAX];
  bool split = false;
  for (int i = 0; i < nv; i++) {
    map[i] = te_var(te, i);
    lo[i] = 0, hi[i] = (i < k->rank ? k->shape[i] : k->red_shape[i - k->rank]) - 1;
  }
  *opened = 0;
  for (int i = 0; i < k->n_red; i++) {
    int v = k->rank + i;
    int64_t ext[SPLIT_DIVISORS_MAX + 1], div[SPLIT_DIVISORS_MAX];
    int nd = k->red_shape[i] > 1 && t->split_digits ? var_digits(p, k, x, v, k->red_shape[i], ext, div) : 0;
    if (!nd) {
      if (k->red_shape[i] == 1) cg_put(em, "const %s v%d = 0;", I, v);
      else cg_open(em, "for (%s v%d = 0; v%d < %s; v%d++) {", I, v, v, cg_lit(em, k->red_shape[i]), v), (*opened)++;
      continue;
    }
    char sum[256] = "";
    size_t at = 0;
    Expr *e = NULL;
    bool oom = false;
    for (int j = 0; j < nd; j++) {
      int d = next++;
      lo[d] = 0, hi[d] = ext[j] - 1;
      em->var_range(em->r, d, 0, ext[j] - 1);
      if (ext[j] == 1) cg_put(em, "const %s v%d = 0;", I, d);
      else cg_open(em, "for (%s v%d = 0; v%d < %s; v%d++) {", I, d, d, cg_lit(em, ext[j]), d), (*opened)++;
      Expr *term = te_var(te, d);
      if (j < nd - 1 && term) term = te_binary(te, TB_MUL, term, te_const_i(te, KILN_I64, div[j]));
      e = oom || !term ? NULL : !e ? term : te_binary(te, TB_ADD, e, term);
      oom = !e;
      if (at < sizeof sum)
        at += (size_t)(j < nd - 1 ? snprintf(sum + at, sizeof sum - at, "v%d * %s + ", d, cg_lit(em, div[j]))
                                  : snprintf(sum + at, sizeof sum - at, "v%d", d));
    }
    cg_put(em, "const %s v%d = %s;  /* its digits */", I, v, sum);
    if (!oom) map[v] = e, split = true;  /* (out of memory: x over the var, defined so) */
  }
  if (!split) return x;
  for (int i = 0; i < nv; i++)
    if (!map[i]) return x;  /* out of memory: x over the var, which each point defines */
  /* over the digits, simplified, an im2col's selects of h, h + 1 and h + 2 factored to h plus a
   * select of constants: only that depends on the lane, not on the points */
  Expr *y = te_substitute(te, (Expr *)x, map, nv);
  y = y ? te_simplify(te, y, lo, hi, next) : NULL;
  y = y ? te_factor_selects(te, y) : NULL;
  return y ? y : x;
}

/* Load L's offset at the point v, its indices folded to constants by the TE's own
 * construction (te_substitute of constant vars): unlike te_range at a point, it takes the
 * branch each select's condition picks. false where an index does not fold. */
static bool offset_at_point(const Plan *p, const Expr *L, const int64_t *v, int nv, int64_t *out) {
  TE *te = p->te;
  const Stage *S = &te->stages[L->src];
  Expr *map[2 * KILN_MAX_RANK];
  for (int i = 0; i < nv; i++)
    if (!(map[i] = te_const_i(te, KILN_I64, v[i]))) return false;
  int64_t off = 0;
  for (int i = 0; i < L->n_args; i++) {
    Expr *a = te_substitute(te, L->args[i], map, nv);
    if (!a || a->kind != EX_CONST || te_is_float(a)) return false;
    off += a->c.i * te_stage_stride(S, i);
  }
  *out = off;
  return true;
}

/* Does operand x move by one element along k where its pack splits a reduction var into
 * digits (the last digit, at the middle of the kernel's space)? Its load is then read in runs
 * along k, lane by lane (pack_lanes' lane_outer), each lane's own index math out of the
 * points' loops. Evaluated at points (offset_at_point), which takes the selects an im2col's taps
 * make of one padded tensor, where load_step's ranges do not. Else runs_along_k. */
static bool runs_split(const Plan *p, const Kernel *k, const CgCpuTile *t, const Expr *x) {
  if (runs_along_k(p, k, x)) return true;
  int last = -1;
  for (int i = k->n_red - 1; i >= 0 && last < 0; i--)
    if (k->red_shape[i] > 1) last = i;
  int64_t ext[SPLIT_DIVISORS_MAX + 1], div[SPLIT_DIVISORS_MAX];
  int nd = t->split_digits && last >= 0 ? var_digits(p, k, x, k->rank + last, k->red_shape[last], ext, div) : 0;
  if (!nd) return false;
  FirstLoad f = { p, k, NULL };
  te_visit_loads(x, first_memory_load, &f);
  if (!f.L) return false;
  int nv = k->rank + k->n_red;
  int64_t v[2 * KILN_MAX_RANK], off[2];
  for (int i = 0; i < k->rank; i++) v[i] = k->shape[i] / 2;
  for (int i = 0; i < k->n_red; i++) v[k->rank + i] = k->red_shape[i] / 2;
  v[k->rank + last] -= v[k->rank + last] % ext[nd - 1];  /* the last digit 0: a step stays in its run */
  for (int s = 0; s < 2; s++, v[k->rank + last]++)
    if (!offset_at_point(p, f.L, v, nv, &off[s])) return false;
  return off[1] - off[0] == 1;
}

/* pack_lanes for an operand of one var that does not run along k (a weight's columns):
 * per point, each group of `width` lanes is one vector loop of consecutive elements (a
 * clamped one at the edge of the extent). */
static void pack_one_var(const CgEmit *em, const Plan *p, const Kernel *k, const CgCpuTile *t, int role, const Expr *x,
                         const char *first, const char *groups, const char *width, const char *dst) {
  const char *I = em->d->index_type;
  int64_t extent = role == t->rows_role ? t->rows : t->cols;
  /* a panel at a time, its points in order: the writes run front to back (with the panels
   * innermost they went 16 KiB apart, one L1 set, a third of gpt_tiny's FFN kernel) */
  cg_open(em, "for (int kiln_g = 0; kiln_g < %s; kiln_g++) {", groups);
  cg_put(em, "const %s kiln_b = %s + kiln_g * %s;", I, first, width);
  cg_open(em, "{ %s kiln_k = 0;", I);
  int opened;
  x = open_points_split(em, p, k, t, x, &opened);
  cg_put(em, "%s *kiln_o = %s + kiln_g * %s * %s + kiln_k * %s;", em->d->value_type[KILN_F32], dst, cg_lit(em, t->g.K), width, width);
  for (int edge = 0; edge < 2; edge++) {
    if (!edge) {
      cg_open(em, "if (kiln_b + %s <= %s) {", width, cg_lit(em, extent));
      cg_put(em, "%s", em->d->simd);
    }
    cg_open(em, "for (int kiln_l = 0; kiln_l < %s; kiln_l++) {", width);
    if (!edge) cg_put(em, "const %s kiln_q = kiln_b + kiln_l;", I);
    else cg_put(em, "const %s kiln_q = kiln_b + kiln_l < %s ? kiln_b + kiln_l : %s;", I, cg_lit(em, extent), cg_lit(em, extent - 1));
    em->push(em->r);
    decompose(em, k, t, role, "kiln_q");
    char val[256];
    em->emit(em->r, x, val, sizeof val);
    cg_put(em, "kiln_o[kiln_l] = %s;", val);
    em->pop(em->r);
    cg_close(em);
    if (!edge) {
      em->indent(em->r, -1);
      cg_put(em, "} else {");
      em->indent(em->r, 1);
    } else cg_close(em);
  }
  cg_put(em, "kiln_k++;");
  while (opened--) cg_close(em);
  cg_close(em);
  cg_close(em);
}

/* The lane's vars of `role` from the arrays kiln_<tag>v<var>[lane]. */
static void lane_vars(const CgEmit *em, const Kernel *k, const CgCpuTile *t, int role, char tag, const char *lane) {
  for (int v = 0; v < k->rank; v++) {
    if (t->g.role[v] != role) continue;
    if (k->shape[v] > 1) cg_put(em, "const %s v%d = kiln_%cv%d[%s];", em->d->index_type, v, tag, v, lane);
    else cg_put(em, "const %s v%d = 0;", em->d->index_type, v);
  }
}

/* The points of operand x into dst, the reduction vars as nested loops: inside one lane
 * (its vars already in scope) when one_lane, else each point a loop over every lane. */
static void pack_points(const CgEmit *em, const Plan *p, const Kernel *k, const CgCpuTile *t, int role, const Expr *x,
                        const char *lanes, const char *width, const char *dst, char tag, bool one_lane) {
  cg_open(em, "{ %s kiln_k = 0;", em->d->index_type);
  int opened;
  x = open_points_split(em, p, k, t, x, &opened);
  if (!one_lane) cg_open(em, "for (int kiln_l = 0; kiln_l < %s; kiln_l++) {", lanes);
  em->push(em->r);
  if (!one_lane) lane_vars(em, k, t, role, tag, "kiln_l");
  char val[256];
  em->emit(em->r, x, val, sizeof val);
  cg_put(em, "%s[kiln_l / %s * %s * %s + kiln_k * %s + kiln_l %% %s] = %s;", dst, width, cg_lit(em, t->g.K), width, width, width,
      val);
  em->pop(em->r);
  if (!one_lane) cg_close(em);
  cg_put(em, "kiln_k++;");
  while (opened--) cg_close(em);
  cg_close(em);
}

/* The points of operand x into dst a panel at a time, each point one vector loop over the
 * panel's lanes (their vars from the arrays): the stores contiguous. Over all the lanes of
 * the group at once, each point's stores went a panel apart, a float at a time; but a panel
 * at a time reads K rows at once, which the prefetcher follows only while they are few: on
 * convnet_mini's 1x1 convolutions, one thread, 2304 pixels over 24 channels took 1742 ->
 * 1121 perf samples, 144 pixels over 96 and 192 channels 20 % less, and 2304 over 96 channels
 * (884 KiB read 96 rows at once) 24 % more, hence pack_lanes' rule. */
static void pack_panels(const CgEmit *em, const Plan *p, const Kernel *k, const CgCpuTile *t, int role, const Expr *x,
                        const char *groups, const char *width, const char *dst, char tag) {
  char lane[80];
  snprintf(lane, sizeof lane, "kiln_g * %s + kiln_l", width);
  cg_open(em, "for (int kiln_g = 0; kiln_g < %s; kiln_g++) {", groups);
  cg_open(em, "{ %s kiln_k = 0;", em->d->index_type);
  int opened;
  x = open_points_split(em, p, k, t, x, &opened);
  cg_put(em, "%s *kiln_o = %s + kiln_g * %s * %s + kiln_k * %s;", em->d->value_type[KILN_F32], dst, cg_lit(em, t->g.K), width,
      width);
  cg_put(em, "%s", em->d->simd);
  cg_open(em, "for (int kiln_l = 0; kiln_l < %s; kiln_l++) {", width);
  em->push(em->r);
  lane_vars(em, k, t, role, tag, lane);
  char val[256];
  em->emit(em->r, x, val, sizeof val);
  cg_put(em, "kiln_o[kiln_l] = %s;", val);
  em->pop(em->r);
  cg_close(em);
  cg_put(em, "kiln_k++;");
  while (opened--) cg_close(em);
  cg_close(em);
  cg_close(em);
}

/* How deep float selects nest in e (a then-branch inside a then-branch ...). */
static int select_depth(const Expr *e) {
  int d = 0;
  for (int i = 0; i < e->n_args; i++) {
    int a = select_depth(e->args[i]);
    if (a > d) d = a;
  }
  return d + (e->kind == EX_SELECT && te_is_float(e));
}

/* Is int expression e affine in the vars (sums, differences and constant multiples of vars and
 * constants)? */
static bool affine_int(const Expr *e) {
  if (dtype_is_float(e->dtype)) return false;
  if (e->kind == EX_CONST || e->kind == EX_VAR) return true;
  if (e->kind != EX_BINARY) return false;
  if (e->op == TB_ADD || e->op == TB_SUB) return affine_int(e->args[0]) && affine_int(e->args[1]);
  if (e->op == TB_MUL) return (e->args[0]->kind == EX_CONST && affine_int(e->args[1])) ||
                              (e->args[1]->kind == EX_CONST && affine_int(e->args[0]));
  return false;
}

/* Does condition c hold on an interval of any line through the vars (a conjunction of affine
 * comparisons: a window's padding guard)? */
static bool convex_guard(const Expr *c) {
  if (c->kind != EX_BINARY) return false;
  if (c->op == TB_AND && c->dtype == KILN_BOOL) return convex_guard(c->args[0]) && convex_guard(c->args[1]);
  if (c->op == TB_LT || c->op == TB_LE || c->op == TB_GT || c->op == TB_GE || c->op == TB_EQ)
    return affine_int(c->args[0]) && affine_int(c->args[1]);
  return false;
}

/* Is u its guard's select, the guard holding on an interval of the run (convex_guard), or has
 * it no select at all? Then the lanes inside the guard can be found from the run's ends
 * (run_from_ends). */
static bool guard_at_ends(const Expr *u) {
  bool top = u->kind == EX_SELECT && te_is_float(u);
  return select_depth(u) <= (top ? 1 : 0) && (!top || convex_guard(u->args[0]));
}

/* The window operand of a convolution, packed as runs: the lanes of a panel that share
 * every var but the kernel's last (a row of output pixels) are one run. The operand is
 * rewritten with te_unclamp_guarded and its selects made lazy, so the padding's guard masks
 * the load and the load's index is affine along the run. Lane by lane (pack_points), each
 * point was a scalar load through the guard's clamps and a store a panel row away: lenet's
 * conv2 spent as long packing as multiplying. With a stride of 1 each point of the run is a
 * contiguous copy: from its ends (run_from_ends) where guard_at_ends, else one masked vector
 * loop over a whole panel's width. With a larger stride (2: a strided convolution) a masked
 * loop gathers, slower than lane by lane; there the operand must take the ends' form. NULL: x
 * takes neither form. */
static Expr *run_operand(const Plan *p, const Kernel *k, const Expr *x, int *stride) {
  if (select_depth(x) > 4 || k->rank < 1) return NULL;
  Expr *u = te_unclamp_guarded(p->te, (Expr *)x);
  /* consecutive (or 2 to 4 apart) along the last var, past the guard's clamps */
  int64_t step;
  if (!u || k->shape[k->rank - 1] < 2 || !load_step(p, k, u, k->rank - 1, &step) || step < 1 || step > 4) return NULL;
  *stride = (int)step;
  return *stride == 1 || guard_at_ends(u) ? u : NULL;
}

/* One lane of a run's point, inside the loop over kiln_i: e (lazily, its loads only where taken)
 * at the lane's last var, stored to the lane's place in the panel. */
static void lane_store(const CgEmit *em, const Kernel *k, const Expr *e) {
  char val[256];
  em->push(em->r);
  cg_put(em, "const %s v%d = kiln_w0 + kiln_i;", em->d->index_type, k->rank - 1);
  em->emit_lazy(em->r, e, val, sizeof val);
  cg_put(em, "kiln_o[kiln_i] = %s;", val);
  em->pop(em->r);
}

/* One point of a run (pack_runs) whose operand u takes guard_at_ends: the lanes kiln_ia ..
 * kiln_ib - 1 where u's guard holds (an interval), found from the run's ends, as one vector
 * loop over u's then-branch; the lanes outside through u itself, lazily, one at a time.
 * With a stride of 1 the guard is tested about twice a run, where the masked loop
 * (masked_points) tested it on every lane: resnet50's 3x3 convolutions over 64 channels at
 * 56x56, 11 row tiles a panel, packed their windows for almost as long as they multiplied. */
static void run_from_ends(const CgEmit *em, const Kernel *k, const Expr *u, int stride, const char *width) {
  const char *I = em->d->index_type;
  int last = k->rank - 1;
  bool top = u->kind == EX_SELECT;
  char val[256];
  cg_put(em, "int kiln_ia = 0, kiln_ib = kiln_m;");
  if (top)
    for (int end = 0; end < 2; end++) {
      cg_open(em, end ? "while (kiln_ib > kiln_ia) {" : "while (kiln_ia < kiln_m) {");
      em->push(em->r);
      cg_put(em, "const %s v%d = kiln_w0 + %s;", I, last, end ? "kiln_ib - 1" : "kiln_ia");
      em->emit_lazy(em->r, u->args[0], val, sizeof val);
      cg_put(em, "if (%s) break;", val);
      cg_put(em, end ? "kiln_ib--;" : "kiln_ia++;");
      em->pop(em->r);
      cg_close(em);
    }
  for (int side = 0; top && side < 2; side++) {  /* the few lanes outside: [0, ia), then [ib, m) */
    cg_open(em, side ? "for (int kiln_i = kiln_ib; kiln_i < kiln_m; kiln_i++) {" : "for (int kiln_i = 0; kiln_i < kiln_ia; kiln_i++) {");
    lane_store(em, k, u);
    cg_close(em);
  }
  /* a stride of 1: a whole panel's run in a loop of constant length, any other a masked loop
   * over the panel (a loop of the run's length ran its last lanes one at a time: resnet50's
   * 1x1 convolutions at 14x14, runs of 14 and less, 1.05-1.08 slower than masked_points) */
  const Expr *inside = top ? u->args[1] : u;
  if (stride > 1) {
    cg_put(em, "%s", em->d->simd);
    cg_open(em, "for (int kiln_i = kiln_ia; kiln_i < kiln_ib; kiln_i++) {");
    lane_store(em, k, inside);
    cg_close(em);
    return;
  }
  cg_open(em, "if (kiln_ia == 0 && kiln_ib == %s) {", width);
  cg_put(em, "%s", em->d->simd);
  cg_open(em, "for (int kiln_i = 0; kiln_i < %s; kiln_i++) {", width);
  lane_store(em, k, inside);
  cg_close(em);
  cg_close(em);
  cg_open(em, "else {");
  cg_put(em, "%s", em->d->simd);
  cg_open(em, "for (int kiln_i = 0; kiln_i < %s; kiln_i++) {", width);
  cg_open(em, "if (kiln_i >= kiln_ia && kiln_i < kiln_ib) {");
  lane_store(em, k, inside);
  cg_close(em);
  cg_close(em);
  cg_close(em);
}

/* One point of a run with a stride of 1 (pack_runs): a masked vector loop over the run's lanes,
 * where u's guard does not take the ends' form (or cpu_run_ends is off). */
static void masked_points(const CgEmit *em, const Kernel *k, const Expr *u, const char *width, int64_t run) {
  /* a run is at most a row (or the rows it crosses): with rows of 14, a loop over 32 lanes ran
   * twice as many masked vectors as there were lanes */
  char span[64];
  int64_t row_up = (run + 7) / 8 * 8;
  if (row_up < TILE_NR_MAX) snprintf(span, sizeof span, "(%lld < %s ? %lld : %s)", (long long)row_up, width, (long long)row_up, width);
  else snprintf(span, sizeof span, "%s", width);
  /* 16 lanes at once where the run allows: GCC's default of 8 under -march=native ran a row
   * of 14 as two masked halves (lenet's conv2, one thread, 720 -> 630 us) */
  if (row_up >= 16 && row_up < TILE_NR_MAX && em->d->simd_len) cg_put(em, em->d->simd_len, 16);
  else cg_put(em, "%s", em->d->simd);
  cg_open(em, "for (int kiln_i = 0; kiln_i < %s; kiln_i++) {", span);
  cg_open(em, "if (kiln_i < kiln_m) {");
  lane_store(em, k, u);
  cg_close(em);
  cg_close(em);
}

/* The cols operand's lanes first .. first + lanes into dst in runs (run_operand): each run its
 * other vars from the lane arrays, each point masked_points or run_from_ends; lanes past the
 * end zeros. */
static void pack_runs(const CgEmit *em, const Plan *p, const Kernel *k, const CgCpuTile *t, const Expr *u,
                      const char *first, const char *lanes, const char *width, const char *dst) {
  const char *I = em->d->index_type, *F = em->d->value_type[KILN_F32];
  int last = k->rank - 1, cv[KILN_MAX_RANK], n_cv = role_vars(k, t, t->cols_role, cv);
  int merged = t->cols_stride == 1 && n_cv >= 1 && cv[n_cv - 1] == last ? merged_load_vars(p, k, u, cv, n_cv) : 1;
  char ext[32];  /* a copy: cg_lit's texts are overwritten by later calls */
  snprintf(ext, sizeof ext, "%s", cg_lit(em, t->cols));
  cg_open(em, "for (int kiln_j0 = 0; kiln_j0 < %s;) {", lanes);
  cg_put(em, "%s kiln_n = %s - kiln_j0 %% %s;  /* a run stays in its panel */", I, width, width);
  cg_put(em, "%s *kiln_o0 = %s + kiln_j0 / %s * %s * %s + kiln_j0 %% %s;", F, dst, width, cg_lit(em, t->g.K), width, width);
  cg_open(em, "if (%s + kiln_j0 >= %s) {  /* lanes past the end: zeros, never stored */", first, ext);
  cg_open(em, "for (%s kiln_k = 0; kiln_k < %s; kiln_k++)", I, cg_lit(em, t->g.K));
  cg_put(em, "for (int kiln_i = 0; kiln_i < (int)kiln_n; kiln_i++) kiln_o0[kiln_k * %s + kiln_i] = 0;", width);
  em->indent(em->r, -1);
  cg_put(em, "kiln_j0 += (int)kiln_n;");
  cg_put(em, "continue;");
  cg_close(em);
  cg_put(em, "const %s kiln_w0 = kiln_cv%d[kiln_j0];", I, last);
  int64_t run = run_limit(em, k, cv, n_cv, merged, "kiln_j0");  /* and in its row, or the rows its loads cross */
  cg_put(em, "if (%s + kiln_j0 + kiln_n > %s) kiln_n = %s - %s - kiln_j0;", first, ext, ext, first);
  cg_put(em, "const int kiln_m = (int)kiln_n;");
  em->push(em->r);
  for (int v = 0; v < k->rank; v++) {
    if (t->g.role[v] != t->cols_role || v == last) continue;
    if (k->shape[v] > 1) cg_put(em, "const %s v%d = kiln_cv%d[kiln_j0];", I, v, v);
    else cg_put(em, "const %s v%d = 0;", I, v);
  }
  cg_open(em, "{ %s kiln_k = 0;", I);
  int opened = open_points(em, k);
  cg_put(em, "%s *kiln_o = kiln_o0 + kiln_k * %s;", F, width);
  if (t->cols_ends) run_from_ends(em, k, u, t->cols_stride, width);
  else masked_points(em, k, u, width, run);
  cg_put(em, "kiln_k++;");
  while (opened--) cg_close(em);
  cg_close(em);
  em->pop(em->r);
  cg_put(em, "kiln_j0 += (int)kiln_n;");
  cg_close(em);
}

/* Does pack_lanes take role's lanes' vars from the arrays kiln_<tag>v<var> (lane_table), which
 * the epilogue then reads too? Not for one var that does not run along k (pack_one_var). */
static bool lanes_tabled(const Plan *p, const Kernel *k, const CgCpuTile *t, int role, const Expr *x) {
  int vars[KILN_MAX_RANK];
  return runs_split(p, k, t, x) || role_vars(k, t, role, vars) > 1;
}

/* kiln_<tag>v<var>[l] for each of `lanes` lanes from `first` on (clamped at the extent): the
 * lane's vars of role. */
static void lane_table(const CgEmit *em, const Kernel *k, const CgCpuTile *t, int role, const char *first, const char *lanes,
                       char tag) {
  const char *I = em->d->index_type;
  int64_t extent = role == t->rows_role ? t->rows : t->cols;
  int vars[KILN_MAX_RANK], nv = role_vars(k, t, role, vars);
  cg_open(em, "for (int kiln_l = 0; kiln_l < %s; kiln_l++) {", lanes);
  cg_put(em, "const %s kiln_q = %s + kiln_l < %s ? %s + kiln_l : %s;", I, first, cg_lit(em, extent), first, cg_lit(em, extent - 1));
  em->push(em->r);
  decompose(em, k, t, role, "kiln_q");
  for (int i = 0; i < nv; i++) cg_put(em, "kiln_%cv%d[kiln_l] = v%d;", tag, vars[i], vars[i]);
  em->pop(em->r);
  cg_close(em);
}

static void pack_lanes(const CgEmit *em, const Plan *p, const Kernel *k, const CgCpuTile *t, int role, const Expr *x,
                       const char *first, const char *groups, const char *width, const char *dst, char tag) {
  int64_t extent = role == t->rows_role ? t->rows : t->cols;
  bool lane_outer = runs_split(p, k, t, x);
  if (!lanes_tabled(p, k, t, role, x)) {
    pack_one_var(em, p, k, t, role, x, first, groups, width, dst);
    return;
  }
  char lanes[64];
  snprintf(lanes, sizeof lanes, "%s * %s", groups, width);
  lane_table(em, k, t, role, first, lanes, tag);
  if (role == t->cols_role && t->cols_runs) {
    pack_runs(em, p, k, t, t->cols_runs, first, lanes, width, dst);
    return;
  }
  if (!lane_outer) {
    /* a panel at a time while the operand's rows are few (the prefetcher follows each) or it
     * is small; else a point at a time across the group, each of its rows read in order */
    if (t->g.K <= PANEL_ROWS_MAX || (double)t->g.K * (double)extent * 4 <= PANEL_BYTES_MAX)
      pack_panels(em, p, k, t, role, x, groups, width, dst, tag);
    else pack_points(em, p, k, t, role, x, lanes, width, dst, tag, false);
    return;
  }
  cg_open(em, "for (int kiln_l = 0; kiln_l < %s; kiln_l++) {", lanes);
  lane_vars(em, k, t, role, tag, "kiln_l");
  Interior in;
  find_interior(p, k, t, role, x, &in);
  if (in.plain) {
    char cond[512] = "";
    size_t at = 0;
    for (int i = 0; i < in.n; i++) {
      int64_t full = k->shape[in.var[i]] - 1;
      if (in.lo[i] > 0)
        at += (size_t)snprintf(cond + at, sizeof cond - at, "%sv%d >= %s", at ? " && " : "", in.var[i], cg_lit(em, in.lo[i]));
      if (in.hi[i] < full && at < sizeof cond)
        at += (size_t)snprintf(cond + at, sizeof cond - at, "%sv%d <= %s", at ? " && " : "", in.var[i], cg_lit(em, in.hi[i]));
      if (at >= sizeof cond) break;
    }
    if (at > 0 && at < sizeof cond) {
      cg_open(em, "if (%s) {  /* inside the window's interior */", cond);
      pack_points(em, p, k, t, role, in.plain, lanes, width, dst, tag, true);
      em->indent(em->r, -1);
      cg_put(em, "} else {");
      em->indent(em->r, 1);
      pack_points(em, p, k, t, role, x, lanes, width, dst, tag, true);
      cg_close(em);
    } else pack_points(em, p, k, t, role, at == 0 ? in.plain : x, lanes, width, dst, tag, true);  /* every lane inside, or too long a test */
  } else pack_points(em, p, k, t, role, x, lanes, width, dst, tag, true);
  cg_close(em);
}

/* Rows r0 .. r0 + KILN_MR of the rows operand into dst ([K][KILN_MR]). */
static void pack_rows(const CgEmit *em, const Plan *p, const Kernel *k, const CgCpuTile *t, const char *r0, const char *dst) {
  pack_lanes(em, p, k, t, t->rows_role, t->rows_x, r0, "1", "KILN_MR", dst, 'r');
}

/* Does e read var v other than through a load of the kernel's own stages (the accumulator,
 * which the epilogue takes from the tile, not from memory)? */
static bool reads_var(const Plan *p, const Kernel *k, const Expr *e, int v) {
  if (e->kind == EX_VAR) return e->var == v;
  if (e->kind == EX_LOAD && p->kernel_of[e->src] == k->id) return false;
  for (int i = 0; i < e->n_args; i++)
    if (reads_var(p, k, e->args[i], v)) return true;
  return false;
}

/* Is e, reading var v or the last, a sum of constant multiples of vars (no select, division or
 * clamp, which would see a run's last var past its row)? */
static bool affine_index(const Expr *e, int v, int last) {
  if (e->kind == EX_VAR || e->kind == EX_CONST) return true;
  if (e->kind == EX_BINARY && (e->op == TB_ADD || e->op == TB_SUB))
    return affine_index(e->args[0], v, last) && affine_index(e->args[1], v, last);
  if (e->kind == EX_BINARY && e->op == TB_MUL)
    return (e->args[0]->kind == EX_CONST && affine_index(e->args[1], v, last)) ||
           (e->args[1]->kind == EX_CONST && affine_index(e->args[0], v, last));
  return false;
}

/* Does e read var v or the last other than through loads of another kernel's buffer that run on
 * with the store: offsets affine in both, v's coefficient block times the last's (a residual
 * laid out as the output)? */
static bool reads_across_rows(const Plan *p, const Kernel *k, const Expr *e, int v, int last, int64_t block) {
  if (e->kind == EX_VAR) return e->var == v || e->var == last;
  if (e->kind == EX_LOAD && p->kernel_of[e->src] == k->id) return false;
  if (e->kind == EX_LOAD && !plan_is_baked(p->te, e->src) && (reads_var(p, k, e, v) || reads_var(p, k, e, last))) {
    for (int i = 0; i < e->n_args; i++)
      if (!affine_index(e->args[i], v, last)) return true;
    int nv = k->rank + k->n_red;
    int64_t at[2 * KILN_MAX_RANK] = { 0 }, o0, ov, ol, om;
    if (!cg_load_offset_at(p, e, at, nv, &o0)) return true;
    at[v] = 1;
    if (!cg_load_offset_at(p, e, at, nv, &ov)) return true;
    at[v] = 0, at[last] = 1;
    if (!cg_load_offset_at(p, e, at, nv, &ol)) return true;
    at[v] = k->shape[v] - 1, at[last] = k->shape[last] - 1;  /* and no product of the two */
    if (!cg_load_offset_at(p, e, at, nv, &om)) return true;
    return ov - o0 != block * (ol - o0) || om - o0 != (ov - o0) * at[v] + (ol - o0) * at[last];
  }
  for (int i = 0; i < e->n_args; i++)
    if (reads_across_rows(p, k, e->args[i], v, last, block)) return true;
  return false;
}

/* How many innermost cols vars one epilogue run may cross (1: the last alone). The vars
 * before the last merge while every item reads them (and the last) only through its store and
 * loads laid out as the store, and every store's offset steps by the next var's extent times
 * that var's step: an image's pixels are then one contiguous run, and the run, its last var
 * counting on past its row, stores (and reads a residual) where the row by row runs did.
 * lenet's conv1 (rows of 28, panels of 32) ran two runs a row of the tile; its epilogue, one
 * thread, 255 -> 217 us. */
static int merged_run_vars(const Plan *p, const Kernel *k, const int *cv, int n_cv) {
  int last = cv[n_cv - 1], nv = k->rank + k->n_red;
  int m = 1;
  for (int c = n_cv - 2; c >= 0; c--) {
    int v = cv[c];
    if (v != cv[c + 1] - 1) break;  /* adjacent kernel vars only */
    int64_t block = 1;  /* v's step: the extent of the block inside it */
    for (int j = c + 1; j < n_cv; j++) block *= k->shape[cv[j]];
    bool ok = true;
    for (int i = 0; i < k->n_items && ok; i++) {
      const Item *it = &k->items[i];
      if (it->step < 1) continue;
      if (reads_across_rows(p, k, it->body, v, last, block)) ok = false;
      if (!ok || !it->store || !it->offset) continue;
      int64_t at[2 * KILN_MAX_RANK] = { 0 }, o0, o1, o2, mn, mx;
      bool got = te_range(it->offset, at, at, nv, &mn, &mx) && mn == mx;
      o0 = mn;
      at[v] = 1;
      got = got && te_range(it->offset, at, at, nv, &mn, &mx) && mn == mx;
      o1 = mn;
      at[v] = 0, at[last] = 1;
      got = got && te_range(it->offset, at, at, nv, &mn, &mx) && mn == mx;
      o2 = mn;
      ok = got && o2 - o0 == 1 && o1 - o0 == block;  /* the last var steps by 1 */
    }
    if (!ok) break;
    m++;
  }
  return m;
}

/* merged_run_vars for a packed operand u: how many innermost cols vars a run of its loads may
 * cross (every load of u laid out along them as one contiguous run). */
static int merged_load_vars(const Plan *p, const Kernel *k, const Expr *u, const int *cv, int n_cv) {
  int last = cv[n_cv - 1], m = 1;
  int64_t block = k->shape[last];
  for (int c = n_cv - 2; c >= 0 && cv[c] == cv[c + 1] - 1; c--, m++) {
    if (reads_across_rows(p, k, u, cv[c], last, block)) break;
    block *= k->shape[cv[c]];
  }
  return m;
}

/* Ends run kiln_n (from the last var's kiln_w0) with the block of the `merged` innermost cols
 * vars it starts in, their values in kiln_cv arrays at `lane`; the block's extent. */
static int64_t run_limit(const CgEmit *em, const Kernel *k, const int *cv, int n_cv, int merged, const char *lane) {
  char pos[256], lim[32];
  int64_t block = k->shape[cv[n_cv - 1]];
  size_t at = (size_t)snprintf(pos, sizeof pos, "kiln_w0");
  for (int c = n_cv - 2; c >= n_cv - merged && at < sizeof pos; c--) {
    at += (size_t)snprintf(pos + at, sizeof pos - at, " + kiln_cv%d[%s] * %s", cv[c], lane, cg_lit(em, block));
    block *= k->shape[cv[c]];
  }
  snprintf(lim, sizeof lim, "%s", cg_lit(em, block));
  if (merged > 1) cg_put(em, "if (kiln_n > %s - (%s)) kiln_n = %s - (%s);", lim, pos, lim, pos);
  else cg_put(em, "if (kiln_n > %s - kiln_w0) kiln_n = %s - kiln_w0;", lim, lim);
  return block;
}

/* Output row kiln_i's columns kiln_j (while in range) through the kernel's items. With one
 * cols var the column is kiln_c0 + kiln_j itself, and a whole panel runs as a vector loop
 * (its bias loads and stores contiguous, its activation vectorised); with several, each
 * column's vars come from the panel's kiln_cv arrays (no division per output). */
static void epilogue_row(const CgEmit *em, const Plan *p, const Kernel *k, const CgCpuTile *t, const int *cv, int n_cv) {
  const char *I = em->d->index_type;
  const char *acc = t->g.K > CG_CPU_F32_SUM_MAX ? "kiln_dd[kiln_i * KILN_NR + kiln_j]" : "kiln_d[kiln_i * KILN_NR + kiln_j]";
  if (n_cv <= 1) {
    cg_open(em, "if (kiln_c0 + KILN_NR <= %s) {", cg_lit(em, t->cols));
    cg_put(em, "%s", em->d->simd);
    cg_open(em, "for (int kiln_j = 0; kiln_j < KILN_NR; kiln_j++) {");
    cg_put(em, "const %s kiln_cq = kiln_c0 + kiln_j;", I);
    em->push(em->r);
    decompose(em, k, t, t->cols_role, "kiln_cq");
    em->items(em->r, 1, acc);
    em->pop(em->r);
    cg_close(em);
    em->indent(em->r, -1);
    cg_put(em, "} else {");
    em->indent(em->r, 1);
    cg_open(em, "for (int kiln_j = 0; kiln_j < KILN_NR && kiln_c0 + kiln_j < %s; kiln_j++) {", cg_lit(em, t->cols));
    em->push(em->r);
    cg_put(em, "const %s kiln_cq = kiln_c0 + kiln_j;", I);
    decompose(em, k, t, t->cols_role, "kiln_cq");
    em->items(em->r, 1, acc);
    em->pop(em->r);
    cg_close(em);
    cg_close(em);
    return;
  }
  /* Several vars: the panel's columns as runs along the fastest var (a row of pixels), the
   * others the same along a run, each run one vector loop (a column at a time, its vars from
   * the arrays, stored a float at a time: lenet's conv1, a sum of 9, spent more on its
   * stores than on its products). */
  int last = cv[n_cv - 1], merged = merged_run_vars(p, k, cv, n_cv);
  cg_open(em, "for (int kiln_j0 = 0; kiln_j0 < KILN_NR && kiln_c0 + kiln_j0 < %s;) {", cg_lit(em, t->cols));
  cg_put(em, "const %s kiln_w0 = kiln_cv%d[kiln_p * KILN_NR + kiln_j0];", I, last);
  cg_put(em, "%s kiln_n = KILN_NR - kiln_j0;", I);
  cg_put(em, "if (kiln_c0 + kiln_j0 + kiln_n > %s) kiln_n = %s - kiln_c0 - kiln_j0;", cg_lit(em, t->cols), cg_lit(em, t->cols));
  /* the run ends with its row, or with the block of rows its stores cross in one piece */
  run_limit(em, k, cv, n_cv, merged, "kiln_p * KILN_NR + kiln_j0");
  em->push(em->r);
  for (int v = 0; v < k->rank; v++)
    if (t->g.role[v] == t->cols_role && v != last) {
      int c = 0;
      while (c < n_cv && cv[c] != v) c++;
      if (c < n_cv) cg_put(em, "const %s v%d = kiln_cv%d[kiln_p * KILN_NR + kiln_j0];", I, v, v);
      else cg_put(em, "const %s v%d = 0;", I, v);
    }
  cg_put(em, "%s", em->d->simd);
  cg_open(em, "for (int kiln_j = kiln_j0; kiln_j < kiln_j0 + kiln_n; kiln_j++) {");
  em->push(em->r);
  cg_put(em, "const %s v%d = kiln_w0 + (kiln_j - kiln_j0);", I, last);
  em->items(em->r, 1, acc);
  em->pop(em->r);
  cg_close(em);
  em->pop(em->r);
  cg_put(em, "kiln_j0 += (int)kiln_n;");
  cg_close(em);
}

/* kiln_d = the tile over all K of panel kiln_p: its rows packed at rows_at ([K][KILN_MR]) or, in
 * place, from the pointers kiln_ra; past CG_CPU_F32_SUM_MAX points, in spans of TILE_SPAN each
 * summed in f32, the spans added in f64 into kiln_dd. */
static void tile_call(const CgEmit *em, int64_t K, bool direct, bool apart, const char *rows_at, const char *panel) {
  const Dialect *d = em->d;
  const char *I = d->index_type, *al = d->array_align ? d->array_align : "";
  const char *fn = direct ? d->tile_rows : apart && d->tile_apart ? d->tile_apart : d->tile;
  if (K <= CG_CPU_F32_SUM_MAX) {
    cg_put(em, "%s(%s, %s * %s * KILN_NR, %s, kiln_d);", fn, direct ? "kiln_ra" : rows_at, panel, cg_lit(em, K), cg_lit(em, K));
    return;
  }
  cg_put(em, "%s kiln_dd[KILN_MR * KILN_NR]%s;", d->value_type[KILN_F64], al);
  cg_put(em, "for (int kiln_q = 0; kiln_q < KILN_MR * KILN_NR; kiln_q++) kiln_dd[kiln_q] = 0;");
  cg_open(em, "for (%s kiln_kc = 0; kiln_kc < %s; kiln_kc += %d) {", I, cg_lit(em, K), (int)TILE_SPAN);
  cg_put(em, "const %s kiln_kn = %s - kiln_kc < %d ? %s - kiln_kc : %d;", I, cg_lit(em, K), (int)TILE_SPAN, cg_lit(em, K),
      (int)TILE_SPAN);
  char rows[96];
  if (direct) {
    cg_put(em, "const %s *kiln_rk[KILN_MR];", d->value_type[KILN_F32]);
    cg_put(em, "for (int kiln_l = 0; kiln_l < KILN_MR; kiln_l++) kiln_rk[kiln_l] = kiln_ra[kiln_l] + kiln_kc;");
    snprintf(rows, sizeof rows, "kiln_rk");
  } else snprintf(rows, sizeof rows, "%s + kiln_kc * KILN_MR", rows_at);
  cg_put(em, "%s(%s, %s * %s * KILN_NR + kiln_kc * KILN_NR, kiln_kn, kiln_d);", fn, rows, panel, cg_lit(em, K));
  cg_put(em, "for (int kiln_q = 0; kiln_q < KILN_MR * KILN_NR; kiln_q++) kiln_dd[kiln_q] += kiln_d[kiln_q];");
  cg_close(em);
}

/* The row tile's KILN_MR rows as pointers kiln_ra[] into the rows operand's buffer at k = 0
 * (rows past the last repeat it: their results are not stored), from the offset's
 * coefficients; the batch vars are in scope. */
static void rows_pointers(const CgEmit *em, const Kernel *k, const CgCpuTile *t, const RowsAt *ra) {
  const char *I = em->d->index_type, *F = em->d->value_type[KILN_F32];
  cg_put(em, "const %s *kiln_ra[KILN_MR];", F);
  cg_open(em, "for (int kiln_l = 0; kiln_l < KILN_MR; kiln_l++) {");
  cg_put(em, "const %s kiln_q = kiln_r0 + kiln_l < %s ? kiln_r0 + kiln_l : %s;", I, cg_lit(em, t->rows), cg_lit(em, t->rows - 1));
  em->push(em->r);
  decompose(em, k, t, t->rows_role, "kiln_q");
  char off[512];
  size_t at = (size_t)snprintf(off, sizeof off, "%s", cg_lit(em, ra->base));
  for (int v = 0; v < k->rank && at < sizeof off; v++)
    if (ra->coef[v] && (t->g.role[v] == t->rows_role || t->g.role[v] == CG_ROLE_BATCH))
      at += (size_t)snprintf(off + at, sizeof off - at, " + %s * v%d", cg_lit(em, ra->coef[v]), v);
  cg_put(em, "kiln_ra[kiln_l] = b%d + %s;", em->param_of(em->r, t->rows_x->src), off);
  em->pop(em->r);
  cg_close(em);
}

int64_t cg_cpu_tile_group(const CgCpuTile *t) {
  /* a thread packs a group of panels, then runs every row tile over each panel of it, so a row
   * tile it packs is packed once a group, not once a panel */
  int64_t group = (t->rows_direct || t->rows_once ? GROUP_BYTES : GROUP_PACKED_BYTES) / (t->g.K * TILE_NR_MAX * 4);
  int64_t widest = (t->cols + TILE_NR_MAX - 1) / TILE_NR_MAX;
  if (group > widest) group = widest;
  if (group < 1) group = 1;
  /* a divisor of the panels at the widest vectors, when one of at least half the budget
   * exists: the last group is then whole, and the threads' equal shares of tiles are equal
   * work (convnet_mini's 48->96 stride-2 conv, 5 panels in groups of 2, gave one thread
   * half as many tiles again as the other) */
  for (int64_t div = group; div >= (group + 1) / 2 && div >= 1; div--)
    if (widest % div == 0) {
      group = div;
      break;
    }
  return group;
}

void cg_render_cpu_tile(const Plan *p, const Kernel *k, const CgCpuTile *t, const CgEmit *em) {
  const Dialect *d = em->d;
  const char *I = d->index_type;
  const CgGemm *g = &t->g;
  int64_t K = g->K, row_tiles = (t->rows + TILE_MR - 1) / TILE_MR;
  int64_t group = cg_cpu_tile_group(t);
  double work = (double)t->rows * (double)t->cols * (double)K * (double)g->batch;
  bool parallel = work >= (double)d->min_parallel_work;
  cg_open(em, "{");
  const char *al = d->array_align ? d->array_align : "";
  const char *F = d->value_type[KILN_F32];
  /* the group's panels: group x TILE_NR_MAX columns, twice as many panels at half the widest vectors */
  cg_put(em, "enum { kiln_gp = %lld * %d / KILN_NR };  /* panels a group */", (long long)group, (int)TILE_NR_MAX);
  if (!t->cols_once) cg_put(em, "%s kiln_pc[kiln_gp * %s * KILN_NR]%s;", F, cg_lit(em, K), al);
  cg_put(em, "%s kiln_pr[%lld * KILN_MR]%s;", F, (long long)(t->rows_once ? row_tiles * K : K), al);
  cg_put(em, "%s kiln_pl = -1, kiln_rl = -1;", I);
  int cv[KILN_MAX_RANK], n_cv = role_vars(k, t, t->cols_role, cv);
  int rv[KILN_MAX_RANK], n_rv = role_vars(k, t, t->rows_role, rv);
  for (int c = 0; c < n_cv; c++) cg_put(em, "%s kiln_cv%d[kiln_gp * KILN_NR]%s;", I, cv[c], al);
  for (int c = 0; c < n_rv; c++) cg_put(em, "%s kiln_rv%d[KILN_MR]%s;", I, rv[c], al);
  cg_put(em, "const %s kiln_ct = (%s + KILN_NR - 1) / KILN_NR, kiln_ng = (kiln_ct + kiln_gp - 1) / kiln_gp;", I,
      cg_lit(em, t->cols));
  if (t->rows_once) {  /* every row tile, [tile][K][KILN_MR], before the first panel */
    cg_open(em, "for (%s kiln_ri = 0; kiln_ri < %s; kiln_ri++) {", I, cg_lit(em, row_tiles));
    cg_put(em, "const %s kiln_r0 = kiln_ri * KILN_MR;", I);
    cg_put(em, "%s *kiln_dst = kiln_pr + kiln_ri * %s;", d->value_type[KILN_F32], cg_lit(em, K * TILE_MR));
    pack_rows(em, p, k, t, "kiln_r0", "kiln_dst");
    cg_close(em);
  }
  /* tile t: panel kiln_p of the group fastest, then the row tile, the group, the batch point;
   * only the panels there are (the last group's kiln_lw), so that the threads' shares are even:
   * with the missing ones counted, resnet50's 1x1/2 projection 256 -> 512 at 28x28 (25 panels in
   * groups of 4) left one thread 946 tiles and the other 1204 */
  char tg[64];  /* tiles of a full group */
  snprintf(tg, sizeof tg, "(%s * kiln_gp)", cg_lit(em, row_tiles));
  cg_put(em, "const %s kiln_lw = kiln_ct - (kiln_ng - 1) * kiln_gp, kiln_full = (kiln_ng - 1) * %s;", I, tg);
  char count[96], head[320];
  snprintf(count, sizeof count, "%s * kiln_ct", cg_lit(em, g->batch * row_tiles));
  cg_team_for(d, "kiln_t", count, parallel, head, sizeof head);
  cg_open(em, "%s", head);
  cg_put(em, "const %s kiln_bz = kiln_t / (%s * kiln_ct), kiln_tb = kiln_t %% (%s * kiln_ct);", I, cg_lit(em, row_tiles),
         cg_lit(em, row_tiles));
  cg_put(em, "const %s kiln_gi = kiln_tb < kiln_full ? kiln_tb / %s : kiln_ng - 1;", I, tg);
  cg_put(em, "const %s kiln_tg = kiln_tb - kiln_gi * %s;  /* in its group: constant divisors either way */", I, tg);
  cg_put(em, "const %s kiln_p = kiln_tb < kiln_full ? kiln_tg %% kiln_gp : kiln_tg %% kiln_lw;", I);
  cg_put(em, "const %s kiln_ri = kiln_tb < kiln_full ? kiln_tg / kiln_gp : kiln_tg / kiln_lw, kiln_gb = kiln_bz * kiln_ng + kiln_gi;", I);
  cg_put(em, "const %s kiln_ci = kiln_gi * kiln_gp + kiln_p, kiln_rb = kiln_gb * %s + kiln_ri;  /* the row tile's place */", I,
         cg_lit(em, row_tiles));
  cg_put(em, "const %s kiln_r0 = kiln_ri * KILN_MR, kiln_c0 = kiln_ci * KILN_NR;", I);
  em->push(em->r);
  decompose(em, k, t, CG_ROLE_BATCH, "kiln_bz");
  if (!t->cols_once || lanes_tabled(p, k, t, t->cols_role, t->cols_x)) {
    cg_open(em, "if (kiln_gb != kiln_pl) {");
    cg_put(em, "kiln_pl = kiln_gb;");
    if (t->cols_once)  /* the panels are in the pack: only the lanes' vars, which the epilogue reads */
      lane_table(em, k, t, t->cols_role, "kiln_gi * kiln_gp * KILN_NR", "kiln_gp * KILN_NR", 'c');
    else pack_lanes(em, p, k, t, t->cols_role, t->cols_x, "kiln_gi * kiln_gp * KILN_NR", "kiln_gp", "KILN_NR", "kiln_pc", 'c');
    cg_close(em);
  }
  RowsAt ra;
  bool direct = t->rows_direct && d->tile_rows && rows_in_place(p, k, t, &ra) && em->param_of(em->r, t->rows_x->src) >= 0;
  if (direct) rows_pointers(em, k, t, &ra);
  else if (!t->rows_once) {
    cg_open(em, "if (kiln_rb != kiln_rl) {");
    cg_put(em, "kiln_rl = kiln_rb;");
    pack_rows(em, p, k, t, "kiln_r0", "kiln_pr");
    cg_close(em);
  }
  cg_put(em, "%s kiln_d[KILN_MR * KILN_NR]%s;", F, al);
  char rows_at[64];
  if (t->rows_once) snprintf(rows_at, sizeof rows_at, "kiln_pr + kiln_ri * %lld", (long long)(K * TILE_MR));
  else snprintf(rows_at, sizeof rows_at, "kiln_pr");
  tile_call(em, K, direct, t->tile_apart, rows_at, t->cols_once ? "kiln_pk + kiln_ci" : "kiln_pc + kiln_p");
  cg_open(em, "for (int kiln_i = 0; kiln_i < KILN_MR && kiln_r0 + kiln_i < %s; kiln_i++) {", cg_lit(em, t->rows));
  cg_put(em, "const %s kiln_rq = kiln_r0 + kiln_i;", I);
  em->push(em->r);
  decompose(em, k, t, t->rows_role, "kiln_rq");
  epilogue_row(em, p, k, t, cv, n_cv);
  em->pop(em->r);
  cg_close(em);
  em->pop(em->r);
  cg_close(em);
  cg_close(em);
}

/* The pack of a column operand laid out once: every group of panels the kernel's threads would
 * pack, [panel][K][KILN_NR], the last group whole (its columns past the extent clamped, as a
 * thread packs them). Counted in the widest panels: the same floats at either vector width. */
static int64_t pack_numel(const CgCpuTile *t) {
  int64_t cols = cg_cpu_tile_group(t) * TILE_NR_MAX;
  return (t->cols + cols - 1) / cols * cols * t->g.K;
}

int64_t cg_cpu_tile_pack_numel(const CgCpuTile *t) { return t->cols_once ? pack_numel(t) : 0; }

void cg_render_cpu_tile_pack(const Plan *p, const Kernel *k, const CgCpuTile *t, const CgEmit *em) {
  const char *I = em->d->index_type, *al = em->d->array_align ? em->d->array_align : "";
  cg_put(em, "enum { kiln_gp = %lld * %d / KILN_NR };  /* panels a group */", (long long)cg_cpu_tile_group(t), (int)TILE_NR_MAX);
  int cv[KILN_MAX_RANK], n_cv = role_vars(k, t, t->cols_role, cv);
  for (int c = 0; c < n_cv; c++) cg_put(em, "%s kiln_cv%d[kiln_gp * KILN_NR]%s;", I, cv[c], al);
  cg_put(em, "const %s kiln_ng = (%s + kiln_gp * KILN_NR - 1) / (kiln_gp * KILN_NR);", I, cg_lit(em, t->cols));
  char head[320];
  cg_team_for(em->d, "kiln_gi", "kiln_ng", true, head, sizeof head);
  cg_open(em, "%s", head);
  cg_put(em, "%s *kiln_pc = kiln_pk + kiln_gi * kiln_gp * %s * KILN_NR;", em->d->value_type[KILN_F32], cg_lit(em, t->g.K));
  pack_lanes(em, p, k, t, t->cols_role, t->cols_x, "kiln_gi * kiln_gp * KILN_NR", "kiln_gp", "KILN_NR", "kiln_pc", 'c');
  cg_close(em);
}
