/*
 * program.c — what codegen hands on. Takes a Plan, a Dialect and the caller's CgOptions;
 * produces a CgProgram: the whole translation unit (render.c) and, for every plan kernel,
 * its launch as data — the entry symbol, the stages bound to its parameters, grid and
 * block, dynamic shared memory and carveout, and whether a library GEMM may replace it
 * (library.c). Every number comes from the same decisions the renderer made (cg_kernel_shape,
 * cg_gpu_rows, cg_gemm_match), so a backend only checks them against its device and
 * applies them; it derives nothing.
 *
 * Launch rules of grid dialects (one thread per point, blocks capped at 2^20, beyond which
 * the kernels stride):
 *   points      256 threads, ceil(outer / 256) blocks (vec4: outer / 4 points of work)
 *   block rows  threads * rows per block (cg_gpu_rows), ceil(outer / rows) blocks; a long
 *               row's cache in dynamic shared memory asks for all of L1 as shared memory
 *   gemm        CG_GEMM_THREADS per block, cg_gemm_blocks blocks
 * Loop dialects: one call of the kernel (its trampoline where the dialect has one).
 */
#include "codegen.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { POINT_THREADS = 256, SMEM_CARVEOUT_ALL = 100, GROUP_MAX_PARAMS = 192 };
/* A group's members keep their own static shared arrays side by side (the compiler does not
 * overlay arrays of functions inlined into one kernel), under the 48 KB static limit. */
enum { GROUP_MAX_STATIC_SMEM = 40 << 10 };
static const int64_t GRID_CAP = (int64_t)1 << 20;

CgOptions cg_options_default(void) {
  return (CgOptions){ .row_variant = cg_row_variant(NULL), .warp_rows = true, .smem_rows = true, .splitk = CG_SPLITK_ON, .library = true,
                      .group = CG_GROUP_OFF, .in_place = true, .lazy_select = true, .gemm_kgroups = true, .gemm_stages = 0,
                      .split_rows_below = 512, .split_blocks = 576 };
}

static int64_t capped_blocks(int64_t work, int64_t per_block) {
  int64_t b = (work + per_block - 1) / per_block;
  return b < GRID_CAP ? b : GRID_CAP;
}

/* Grid, block, shared memory and why, for a non-host kernel of a grid dialect. */
static void grid_launch(const Plan *p, const Kernel *k, const Dialect *d, const CgOptions *o, CgLaunch *l) {
  CgGpuShape s = cg_kernel_shape(p, k, d, o);
  const Kernel *end = s == CG_GPU_CHAIN ? &p->kernels[plan_chain_end(p, k->id)] : NULL;
  CgGemm band, head;
  if (end && cg_gemm_headed(p, end, o, &head)) {
    l->block = CG_GEMM_THREADS;
    l->grid = k->chain > 0 ? cg_gemm_blocks(&head) : 0;
    if (k->chain > 0) {
      int n = snprintf(l->why, sizeof l->why, "gemm %dx%d tiles (%d k-groups of 4x4 a thread), each tile's %d rows of k%d first, "
                       "%d lanes a row", head.bm, head.bn, head.kgroups, head.bm, k->id - 1, cg_gemm_head_lanes(&head));
      if (head.splits > 1 && n > 0 && (size_t)n < sizeof l->why)
        n += snprintf(l->why + n, sizeof l->why - (size_t)n, " x %d K-spans of %lld", head.splits, (long long)head.kspan);
      if (head.head_cluster > 1 && n > 0 && (size_t)n < sizeof l->why)
        snprintf(l->why + n, sizeof l->why - (size_t)n, ", the rows shared by clusters of %d column tiles",
                 head.head_cluster);
    } else snprintf(l->why, sizeof l->why, "in the GEMM kernel k%d, at the head of its tiles", end->id);
    return;
  }
  if (end && cg_pair_banded(p, end, d, o, &band)) {
    l->block = CG_GEMM_THREADS;
    l->grid = k->chain > 0 ? cg_gemm_blocks(&band) : 0;
    l->smem = k->chain > 0 ? (int)cg_gemm_dyn_smem(&band) : 0;
    if (l->smem > 48 * 1024) l->smem_carveout = SMEM_CARVEOUT_ALL;
    l->resident = k->chain > 0 && band.band_share;  /* a band's tiles wait for each other: all resident */
    l->cooperative = l->resident && o->pair_bands == 2;
    if (k->chain > 0 && band.band_share)
      snprintf(l->why, sizeof l->why, "rows: k%d..k%d, gemm %dx%d tiles%s, then every tile its columns of its %d rows, the "
               "band's tiles meeting at each sum", k->id - 1, k->id, band.bm, band.bn, band.splits > 1 ? " split along K" : "",
               band.bm);
    else if (k->chain > 0)
      snprintf(l->why, sizeof l->why, "rows: k%d..k%d, gemm %dx%d tiles%s, then each band's last tile its %d rows, %d lanes a row",
               k->id - 1, k->id, band.bm, band.bn, band.splits > 1 ? " split along K" : "", band.bm, cg_pair_band_lanes(&band));
    else snprintf(l->why, sizeof l->why, "in the rows kernel k%d", end->id);
    return;
  }
  if (end && (end->chain == 2 || end->tailed)) {  /* a pair, or a pair and its tail */
    const Kernel *kr = end->tailed ? end - 1 : end;
    bool blocked = cg_pair_blocked(d), wide = blocked && cg_pair_wide(kr), warps = blocked && cg_pair_warps(kr, o);
    l->block = blocked ? CG_GEMM_THREADS : POINT_THREADS;
    l->grid = k->chain <= 0 ? 0
              : wide        ? cg_pair_blocks(kr)
                            : capped_blocks(kr->outer_numel, warps ? CG_GEMM_THREADS / 32 : blocked ? 1 : POINT_THREADS);
    if (k->chain > 0 && wide)
      snprintf(l->why, sizeof l->why, "rows: k%d..k%d, 8 rows a block (a warp a row, %lld columns a lane) x %lld K-spans",
               k->id - 1, k->id, (long long)((k - 1)->shape[k->rank - 1] + 31) / 32, (long long)cg_pair_splits(kr));
    else if (k->chain > 0)
      snprintf(l->why, sizeof l->why, "rows: k%d..k%d, %s%s", k->id - k->chain + 1, k->id,
               warps     ? "a warp a row, 8 rows a block, one column a lane"
               : blocked ? "a block a row, one column a lane"
                         : "a thread a row",
               end->tailed ? ", then the row's points of the contraction over it" : "");
    else snprintf(l->why, sizeof l->why, "in the rows kernel k%d", end->id);
    return;
  }
  if (end && !cg_chain_blocked(d, end)) {
    l->block = POINT_THREADS;
    l->grid = k->chain > 0 ? capped_blocks((k - 1)->outer_numel, POINT_THREADS) : 0;
    snprintf(l->why, sizeof l->why, k->chain > 0 ? "attention: a thread per row" : "in the attention kernel");
    return;
  }
  if (s == CG_GPU_CHAIN) {
    l->block = CG_GEMM_THREADS;
    CgChainForm form = CG_CHAIN_FMA;
    CgMma mma = k->chain > 0 ? cg_chain_mma(p, k, d, o, &form) : CG_MMA_NONE;
    l->grid = k->chain > 0 ? cg_chain_blocks(k, form, o->chain_sm_blocks) : 0;
    l->smem = k->chain > 0 ? (int)cg_chain_smem(k, form, cg_chain_prefetch(k, form, o)) : 0;
    if (l->smem > 48 * 1024) l->smem_carveout = SMEM_CARVEOUT_ALL;
    if (k->chain > 0)
      snprintf(l->why, sizeof l->why, "attention: k%d..k%d, %d rows a block, %d B shared%s%s%s", k->id - k->chain + 1, k->id,
               cg_chain_rows(k, form), l->smem, mma == CG_MMA_BF16 ? ", bf16 mma" : mma == CG_MMA_F16 ? ", f16 mma" : "",
               cg_chain_key_warps(form) == 1   ? ", rows in fragments"
               : cg_chain_key_warps(form) == 2 ? ", rows in fragments, keys over 2 warps"
               : cg_chain_key_warps(form) == 4 ? ", rows in fragments, keys over 4 warps"
                                               : "",
               cg_chain_prefetch(k, form, o) ? ", the next tile's queries copied during this one" : "");
    else snprintf(l->why, sizeof l->why, "in the attention kernel k%d", plan_chain_end(p, k->id));
    return;
  }
  if (s == CG_GPU_GEMM) {
    CgGemm g;
    bool ok = cg_gemm_match(p, k, o, &g);  /* cg_kernel_shape said so */
    KILN_ASSERT(ok);
    l->block = CG_GEMM_THREADS;
    l->grid = cg_gemm_blocks(&g);
    l->smem = (int)cg_gemm_dyn_smem(&g);
    if (l->smem > 48 * 1024) l->smem_carveout = SMEM_CARVEOUT_ALL;
    if (g.narrow) {
      snprintf(l->why, sizeof l->why, "narrow: a warp a row, 8 rows a block, %lld columns over %lld points, B staged "
               "in shared (%lld B)", (long long)g.N, (long long)g.K, (long long)cg_gemm_smem(&g));
      return;
    }
    static const char *const mma_name[CG_MMA_COUNT] = { "", "bf16", "f16", "tf32" };
    char copies[48] = "";
    if (g.copies) snprintf(copies, sizeof copies, ", operands copied to shared, %d stages", g.copies);
    int n = g.wgmma ? snprintf(l->why, sizeof l->why, "gemm %dx%d tiles (%s wgmma, 2 warpgroups of 64x%d, k-tiles of %d "
                               "128-byte swizzled in %d stages, A %s-major, B %s-major)", g.bm, g.bn, mma_name[g.mma], g.bn,
                               g.bk, g.wg_stages, g.da.kfast ? "K" : "M", g.db.kfast ? "K" : "N")
            : g.mma ? snprintf(l->why, sizeof l->why, "gemm %dx%d tiles (%s mma, warps of %dx%d%s)", g.bm, g.bn, mma_name[g.mma],
                             g.bm / 2, g.bn / 4, g.direct ? ", operands copied straight to shared" : "")
            : g.kgroups > 1 ? snprintf(l->why, sizeof l->why, "gemm %dx%d tiles (%d k-groups of 4x4 a thread%s)", g.bm, g.bn,
                                       g.kgroups, copies)
                            : snprintf(l->why, sizeof l->why, "gemm %dx%d tiles (%dx%d a thread)", g.bm, g.bn, g.tm, g.tn);
    if (g.splits > 1 && n > 0 && (size_t)n < sizeof l->why)
      n += snprintf(l->why + n, sizeof l->why - (size_t)n, " x %d K-spans of %lld%s", g.splits, (long long)g.kspan,
                    g.cluster ? " (a cluster)" : "");
    if (g.n_b > 1 && n > 0 && (size_t)n < sizeof l->why)
      snprintf(l->why + n, sizeof l->why - (size_t)n, ", %d sums over one A tile (siblings)", g.n_b);
    return;
  }
  if (s == CG_GPU_BLOCK_ROWS) {
    CgRows ro = cg_rows_of(p, k, o);  /* the kernel's unrolled row loops assume exactly this */
    l->block = ro.threads * ro.rows;
    l->grid = capped_blocks(k->outer_numel * ro.split, ro.rows);
    if (ro.smem > 0) l->smem = ro.smem, l->smem_carveout = SMEM_CARVEOUT_ALL;
    int n = snprintf(l->why, sizeof l->why, "block rows %s: %d threads x %d rows%s",
                     cg_row_variant_name(cg_row_variant_of(p, k, o)), ro.threads, ro.rows,
                     ro.vec == 4 ? ", 16-byte vectors" : "");
    if (ro.split > 1 && n > 0 && (size_t)n < sizeof l->why)
      n += snprintf(l->why + n, sizeof l->why - (size_t)n, ", %d blocks a row (two phases)", ro.split);
    if (ro.columns && n > 0 && (size_t)n < sizeof l->why)
      n += snprintf(l->why + n, sizeof l->why - (size_t)n, ", reads across rows: %d points a thread",
                    (int)((k->inner_numel + ro.threads - 1) / ro.threads));
    if (ro.smem > 0 && n > 0 && (size_t)n < sizeof l->why)
      snprintf(l->why + n, sizeof l->why - (size_t)n, ", row cache %d B shared, %d blocks an SM", ro.smem, ro.min_blocks);
    return;
  }
  bool vec = s == CG_GPU_VEC4;
  l->block = POINT_THREADS;
  l->grid = capped_blocks(vec ? k->outer_numel / 4 : k->outer_numel, POINT_THREADS);
  snprintf(l->why, sizeof l->why, vec ? "vec4 points: 4 a thread, %d threads" : "points: 1 a thread, %d threads",
           POINT_THREADS);
}

static void why_append(CgLaunch *l, const char *f, ...) __attribute__((format(printf, 2, 3)));

/* What a window kernel (cg_window_match) takes of its taps: its accumulations' reduction. */
static const char *window_what(const Plan *p, const Kernel *k) {
  for (int i = 0; i < k->n_items; i++)
    if (k->items[i].kind == IT_ACC) {
      ReduceOp rop = p->te->stages[k->items[i].stage].rop;
      return rop == RO_MAX ? "maxima" : rop == RO_MIN ? "minima" : "sums";
    }
  return "sums";
}

static kiln_status launch_of(const Plan *p, int ki, const Dialect *d, const CgOptions *o, Arena *a, CgLaunch *l) {
  const Kernel *k = &p->kernels[ki];
  *l = (CgLaunch){ .kernel = ki, .group = -1, .host = k->kind == KN_HOST, .collective = k->kind == KN_COLLECTIVE };
  l->params = arena_alloc(a, sizeof *l->params * (size_t)cg_kernel_params_max(k));
  if (!l->params) return kiln_fail(KILN_ERR_NO_MEMORY, "codegen: no memory for kernel %d's parameters", ki);
  l->n_params = cg_kernel_params(p, k, l->params);
  if (l->host) {
    snprintf(l->why, sizeof l->why, "host: no device form, evaluated by ref (a counted fallback)");
    return KILN_OK;
  }
  if (l->collective) {
    snprintf(l->why, sizeof l->why, "collective: the communicator's all-reduce (mean), in its bucket");
    return KILN_OK;
  }
  cg_kernel_name(ki, !d->grid && d->trampoline, l->name);
  if (d->grid) grid_launch(p, k, d, o, l);
  else if (k->chain < 0) {
    l->grid = 0, l->block = 1;
    const Kernel *end = &p->kernels[plan_chain_end(p, k->id)];
    snprintf(l->why, sizeof l->why, "in the %s kernel k%d",
             end->pooled ? "pooled" : end->expanded ? "expanded" : end->headed ? "headed GEMM" : end->chain == 2 || end->tailed ? "rows" : "attention", end->id);
  } else {
    l->grid = 1, l->block = 1;
    snprintf(l->why, sizeof l->why, "loop: one call%s%s", d->trampoline ? " through the trampoline" : "",
             k->chain == 3 && !k->tailed ? ", an attention chain" : k->tailed ? ", a contraction with its rows and their tail" : k->chain == 2 && !k->pooled && !k->expanded ? ", a contraction with its rows" : "");
    CgCpuTile t;
    CgCpuDirect dc;
    bool direct = d->tile && (k->pooled     ? cg_cpu_pool_match(p, k - 1, k, o, &dc)
                              : k->expanded ? cg_cpu_expand_match(p, k - 1, k, o, &dc)
                                            : cg_cpu_direct_match(p, k, o, &dc));
    if (direct && dc.channel_lanes) l->pack = cg_cpu_pack_numel(k, &dc);
    if (direct && k->expanded) why_append(l, "; k%d's value computed as the planes fill", k->id - 1);
    if (direct && dc.in_place) why_append(l, "; read in place");
    if (direct && dc.winograd)
      why_append(l, "; Winograd F(2x2, 3x3) in channel lanes: %d vectors of channels x %d tiles of 2 x 2 a task, %lld tiles in "
                 "%lld blocks, bands of %lld blocks, planes of %lld x %lld x %lld, weights transformed once", dc.cp, dc.cr,
                 (long long)(dc.TH * dc.TW), (long long)dc.TB, (long long)dc.BT, (long long)dc.PC, (long long)dc.YW, (long long)dc.XPA);
    else if (direct && dc.panel)
      why_append(l, "; direct convolution, channels in lanes over pixel panels: %d vectors of channels x %d pixels a task, "
                 "panels of %lld blocks x %lld x %d, weights laid out once%s", dc.cp, dc.cr, (long long)dc.PB, (long long)dc.PC,
                 dc.cr, dc.rows_outer ? "; pixels outermost" : "");
    else if (direct && dc.channel_lanes)
      why_append(l, "; direct convolution, channels in lanes: %d vectors of channels x %d rows of %d pixels a task, planes of "
                 "%lld x %lld x %lld%s, weights laid out once%s%s", dc.cp, dc.rr, dc.cr, (long long)dc.PC,
                 (long long)(dc.ring ? dc.ring : dc.YP), (long long)dc.XPA, dc.ring ? " (a ring of rows)" : "",
                 dc.rows_outer ? "; rows outermost" : "", dc.channel_items ? "; items on channel vectors" : "");
    else if (direct && k->pooled)
      why_append(l, "; direct convolution, planes of %lld x %lld x %lld, %d channels x %d rows x %d vectors a task; each "
                 "window of the pool taken from them", (long long)dc.PC, (long long)dc.YP, (long long)dc.XPA, dc.ob, dc.rr, dc.wv);
    else if (direct && dc.flat)
      why_append(l, "; direct convolution, flat planes of %lld x %lld x %lld x %lld, %d channels x %d rows in %d vectors a task",
                 (long long)dc.PC, (long long)k->red_shape[k->n_red - 1], (long long)dc.YP, (long long)k->shape[k->rank - 1],
                 dc.ob, dc.rr, dc.fv);
    else if (direct)
      why_append(l, "; direct convolution, planes of %lld x %lld x %lld, %d channels x %d rows x %d vectors a task",
                 (long long)dc.PC, (long long)dc.YP, (long long)dc.XPA, dc.ob, dc.rr, dc.wv);
    else if (d->tile && cg_cpu_tile_match(p, k, o, &t)) {
      l->pack = cg_cpu_tile_pack_numel(&t);  /* constant columns laid out once */
      why_append(l, "; register tiles %lld rows x %lld columns over %lld%s%s%s%s%s", (long long)t.rows, (long long)t.cols,
                 (long long)t.g.K, t.rows_once ? ", rows packed once" : t.rows_direct ? ", rows read in place" : "",
                 !t.cols_runs                            ? ""
                 : t.cols_stride > 1                   ? ", window packed in runs (strided)"
                 : t.cols_ends                         ? ", window packed in runs from their ends"
                                                       : ", window packed in runs",
                 t.rows_once || t.rows_direct ? "" : cg_cpu_tile_group(&t) > 1 ? ", rows packed once a group of panels" : "",
                 t.tile_apart && d->tile_apart ? ", the tile out of line (packs round to 16 bits)" : "",
                 t.cols_once ? ", columns laid out once" : "");
    } else if (cg_window_match(p, k, o))
      why_append(l, "; window %s in registers, %lld points each", window_what(p, k), (long long)k->inner_numel);
  }
  return KILN_OK;
}

static void why_append(CgLaunch *l, const char *f, ...) __attribute__((format(printf, 2, 3)));
static void why_append(CgLaunch *l, const char *f, ...) {
  size_t n = strlen(l->why);
  va_list ap;
  va_start(ap, f);
  vsnprintf(l->why + n, sizeof l->why - n, f, ap);
  va_end(ap);
}

/* Library GEMMs, once the source is rendered (the matcher's probes add to the TE). */
static void library_of(const Plan *p, const Dialect *d, const CgOptions *o, CgLaunch *l) {
  if (l->host || l->collective || l->group >= 0 || !o->library || (!d->grid && !o->loop_library)) return;
  /* a convolution in channel lanes keeps its kernel: bottleneck2048_7's 1x1 2048 -> 512 at 7x7
   * ran in 320 us against the library's 365, swapped (bench/models, 2 threads, this EPYC) */
  if (l->pack > 0) return;
  if (d->grid && cg_kernel_shape(p, &p->kernels[l->kernel], d, o) != CG_GPU_GEMM) return;
  l->library = cg_library_match(p, &p->kernels[l->kernel], o, &l->lib);
  if (l->library)
    why_append(l, "; library %lldx%lldx%lld x%lld", (long long)l->lib.M, (long long)l->lib.N, (long long)l->lib.K,
               (long long)l->lib.batch);
}

/* ---- assigned values stored in place ---- */

static void kernel_ranges(const Kernel *k, int64_t *lo, int64_t *hi) {
  for (int i = 0; i < k->rank; i++) lo[i] = 0, hi[i] = k->shape[i] - 1;
  for (int i = 0; i < k->n_red; i++) lo[k->rank + i] = 0, hi[k->rank + i] = k->red_shape[i] - 1;
}

typedef struct ParamReads { const Plan *p; const Kernel *k; int param; const Expr *at; int loads; bool ok; } ParamReads;

/* Counts the loads of the param in an item; ok stays true while each is of the element the
 * value is stored to. */
static void check_param_read(const Expr *L, void *ctx) {
  ParamReads *c = ctx;
  if (L->src != c->param) return;
  c->loads++;
  if (!c->ok) return;
  TE *te = c->p->te;
  const Stage *S = &te->stages[c->param];
  Expr *off = te_const_i(te, KILN_I64, 0);
  for (int i = S->rank - 1; i >= 0 && off; i--)  /* as plan.c builds a store offset */
    off = te_binary(te, TB_ADD, off, te_binary(te, TB_MUL, L->args[i], te_const_i(te, KILN_I64, te_stage_stride(S, i))));
  int64_t lo[2 * KILN_MAX_RANK], hi[2 * KILN_MAX_RANK];
  kernel_ranges(c->k, lo, hi);
  if (off) off = te_simplify(te, off, lo, hi, c->k->rank + c->k->n_red);
  c->ok = off && off == c->at;
}

/* May value v of an assign be stored into param q's buffer? Every other kernel that reads q
 * runs before v's kernel; v's kernel reads q only in outer items no later than v's own, at v's
 * store offset, at an outer point that one thread owns (not a block-rows kernel, where
 * every thread of a block computes an outer item and one stores it). */
static bool in_place_ok(const Plan *p, const Dialect *d, const CgOptions *o, int q, int v) {
  const TE *te = p->te;
  int kv = p->kernel_of[v];
  if (kv < 0 || !p->stored[v] || plan_is_output(p, q)) return false;
  const Kernel *k = &p->kernels[kv];
  if (plan_kernel_opaque(k) || te->stages[q].dtype != te->stages[v].dtype || te->stages[q].numel != te->stages[v].numel)
    return false;
  if (d->grid && cg_kernel_shape(p, k, d, o) == CG_GPU_BLOCK_ROWS) return false;
  for (int j = 0; j < te->n_assigns; j++) {
    const Assign *A = &te->assigns[j];
    if ((A->value == v && A->param != q) || (A->param == q && A->value != v) || A->param == v || A->value == q) return false;
  }
  for (int ki = kv + 1; ki < p->n_kernels; ki++)
    for (int i = 0; i < p->kernels[ki].n_ins; i++)
      if (p->kernels[ki].ins[i] == q) return false;
  int iv = -1;
  for (int i = 0; i < k->n_items; i++)
    if (k->items[i].stage == v) iv = i;
  if (iv < 0 || k->items[iv].kind != IT_OUTER || !k->items[iv].offset) return false;
  for (int i = 0; i < k->n_items; i++) {
    ParamReads c = { p, k, q, k->items[iv].offset, 0, true };
    te_visit_loads(k->items[i].body, check_param_read, &c);
    if (c.loads && (!c.ok || i > iv || k->items[i].kind != IT_OUTER)) return false;
  }
  return true;
}

static kiln_status find_in_place(const Plan *p, const Dialect *d, const CgOptions *o, CgProgram *g) {
  const TE *te = p->te;
  g->store_into = arena_alloc(&g->arena, sizeof *g->store_into * (size_t)(te->n_stages + 1));
  if (!g->store_into) return kiln_fail(KILN_ERR_NO_MEMORY, "codegen: out of memory");
  for (int i = 0; i < te->n_stages; i++) g->store_into[i] = -1;
  g->n_store = te->n_stages;
  for (int a = 0; o->in_place && a < te->n_assigns; a++) {
    const Assign *A = &te->assigns[a];
    if (in_place_ok(p, d, o, A->param, A->value)) g->store_into[A->value] = A->param;
  }
  return KILN_OK;
}

/* ---- launch groups ---- */

/* The memory a stage occupies: a byte range of the intermediate arena (space -1), or all of
 * its own buffer (space = the stage, or the param it is stored into). */
typedef struct Region { int space; int64_t lo, hi; } Region;

static Region region_of(const Plan *p, const CgProgram *g, int s) {
  const Stage *S = &p->te->stages[s];
  int64_t n = S->numel * (int64_t)kiln_dtype_size(S->dtype);
  if (g->store_into[s] >= 0) return (Region){ g->store_into[s], 0, n };
  bool source = S->kind == ST_INPUT || S->kind == ST_PARAM || S->kind == ST_CONST;
  if (p->offset && p->offset[s] >= 0 && !plan_is_output(p, s) && !source) return (Region){ -1, p->offset[s], p->offset[s] + n };
  return (Region){ s, 0, n };
}

static bool overlap(Region a, Region b) { return a.space == b.space && a.lo < b.hi && b.lo < a.hi; }

/* reads_own_rows' visitor: a load of the wanted stage not at var 0 along its first index */
typedef struct OwnRows { int s; bool ok; } OwnRows;
static void own_rows_load(const Expr *load, void *ctx) {
  OwnRows *want = ctx;
  if (load->src != want->s) return;
  const Expr *r = load->n_args > 0 ? load->args[0] : NULL;
  if (!r || r->kind != EX_VAR || r->var != 0) want->ok = false;
}

/* Must kernel b (launched after a) wait for a? b writes what a reads or writes, or reads what
 * a writes. */
static bool depends_on(const Plan *p, const CgProgram *g, int a, int b) {
  const CgLaunch *la = &g->launch[a], *lb = &g->launch[b];
  int wa = p->kernels[a].n_ins, wb = p->kernels[b].n_ins;
  for (int i = 0; i < lb->n_params; i++)
    for (int j = 0; j < la->n_params; j++) {
      if (i < wb && j < wa) continue;  /* both only read */
      if (overlap(region_of(p, g, lb->params[i]), region_of(p, g, la->params[j]))) return true;
    }
  return false;
}

/* Why kernel ki cannot be a group member (NULL: it can). */
static const char *not_groupable(const Plan *p, const Dialect *d, const CgOptions *o, const CgLaunch *l) {
  if (l->host) return "host";
  if (l->collective) return "collective";
  if (l->resident) return "band barriers";  /* its blocks all resident (a shared band) */
  if (o->group_veto && o->group_veto[l->kernel]) return o->group_veto[l->kernel];
  if (p->kernels[l->kernel].chain < 0) return "nothing to run";  /* its chain's last kernel runs it */
  if (p->kernels[l->kernel].chain == 3 && !p->kernels[l->kernel].tailed) return "attention chain";
  if (p->kernels[l->kernel].headed) return "rows at the head of its tiles";
  if (!d->phase_prefix) return "dialect has no phases";
  if (l->grid <= 0) return "nothing to run";
  if (l->block != POINT_THREADS) return "block size";
  if (l->smem > 0) return "dynamic shared memory";
  if (cg_library_candidate(p, &p->kernels[l->kernel], o)) return "library GEMM";
  CgGemm gm;
  if (cg_kernel_shape(p, &p->kernels[l->kernel], d, o) == CG_GPU_GEMM && cg_gemm_match(p, &p->kernels[l->kernel], o, &gm) &&
      gm.cluster)
    return "cluster split-K";  /* its launch fixes a cluster of its spans */
  return NULL;
}

/* Static shared memory of kernel l as a phase: a GEMM's staged tiles (gemm.c's As and Bs,
 * padded) and arrival flag; block reductions' warp partials otherwise. */
static int64_t static_smem(const Plan *p, const Dialect *d, const CgOptions *o, const CgLaunch *l) {
  const Kernel *k = &p->kernels[l->kernel];
  CgGemm gm;
  if (d->grid && cg_kernel_shape(p, k, d, o) == CG_GPU_GEMM && cg_gemm_match(p, k, o, &gm))
    return cg_gemm_smem(&gm);
  if (d->grid && k->chain == 2 && !k->headed && cg_pair_blocked(d) && !cg_pair_wide(k))
    return cg_pair_smem(k) + 4 * cg_pair_staged(k, o) + 32 * 16;
  if (d->grid && k->tailed) return cg_pair_smem(k - 1) + 4 * cg_pair_staged(k - 1, o) + cg_tail_smem(k) + 32 * 16;
  return 32 * 16;
}

static int union_add(int *set, int n, int s) {
  for (int i = 0; i < n; i++)
    if (set[i] == s) return n;
  set[n] = s;
  return n + 1;
}

/* Closes members first..last-1 as group g->n_group (or leaves them alone when one): groups are
 * formed on grid dialects only (form_groups). */
static kiln_status close_group(CgProgram *g, int first, int end, int phases) {
  int members = 0, cap = 0;  /* a chain's kernels before its last (grid 0) launch nothing */
  for (int i = first; i < end; i++) members += g->launch[i].grid > 0, cap += g->launch[i].n_params;
  if (members < 2) {
    for (int i = first; i < end; i++) g->launch[i].group = -1, g->launch[i].phase = 0;
    return KILN_OK;
  }
  CgLaunch *G = &g->group[g->n_group];
  *G = (CgLaunch){ .kernel = -1, .group = g->n_group, .phase = phases, .cooperative = phases > 1,
                   .block = POINT_THREADS };
  G->params = arena_alloc(&g->arena, sizeof *G->params * (size_t)(cap + 1));
  if (!G->params) return kiln_fail(KILN_ERR_NO_MEMORY, "codegen: no memory for a launch group");
  int64_t most = 0;
  for (int ph = 0; ph < phases; ph++) {
    int64_t total = 0;
    for (int i = first; i < end; i++)
      if (g->launch[i].phase == ph) total += g->launch[i].grid;
    if (total > most) most = total;
  }
  for (int i = first; i < end; i++) {
    if (g->launch[i].grid <= 0) continue;  /* a chain's kernel before its last: runs there */
    g->launch[i].group = g->n_group;
    for (int j = 0; j < g->launch[i].n_params; j++) G->n_params = union_add(G->params, G->n_params, g->launch[i].params[j]);
  }
  G->grid = most;
  snprintf(G->name, sizeof G->name, "kiln_g%d", g->n_group);
  snprintf(G->why, sizeof G->why, "group of k%d..k%d: %d kernels in %d phase%s%s", first, end - 1, end - first, phases,
           phases > 1 ? "s" : "", G->cooperative ? ", grid barriers between" : "");
  g->n_group++;
  return KILN_OK;
}

/* Where each kernel runs in the sequence of launches: its own place, or its group's last
 * member's (a member deferred into a group comes before the group's own members). */
static void runs_at(const CgProgram *g, int *at, int *last) {
  for (int i = 0; i < g->n_group; i++) last[i] = -1;
  for (int m = 0; m < g->n_launch; m++)
    if (g->launch[m].group >= 0) last[g->launch[m].group] = m;
  for (int m = 0; m < g->n_launch; m++) at[m] = g->launch[m].group < 0 ? m : last[g->launch[m].group];
}

/* After a move among launches lo..hi (deferrals only: every kernel that moved has its place
 * and its new and old launch inside lo..hi), does every pair of kernels that touch the same
 * bytes (one writing) still run in plan order: the earlier at an earlier launch, or in an
 * earlier phase of the same group? Pairs with a kernel outside lo..hi kept their order. */
static bool order_kept(const Plan *p, const CgProgram *g, const int *at, const int *was_at, int lo, int hi) {
  for (int a = 0; a < g->n_launch; a++) {
    bool in_a = (a >= lo && a <= hi) || (at[a] >= lo && at[a] <= hi) || (was_at[a] >= lo && was_at[a] <= hi);
    for (int b = a + 1; in_a && b < g->n_launch; b++) {
      bool in_b = (b >= lo && b <= hi) || (at[b] >= lo && at[b] <= hi) || (was_at[b] >= lo && was_at[b] <= hi);
      const CgLaunch *la = &g->launch[a], *lb = &g->launch[b];
      /* a collective runs where it is: no kernel it reads may be deferred past it */
      if (!in_b || la->host || lb->host || !depends_on(p, g, a, b)) continue;
      if (la->group >= 0 && la->group == lb->group ? la->phase >= lb->phase : at[a] >= at[b]) return false;
    }
  }
  return true;
}

/* A group's launch from its members as they now are: the union of their buffers, the widest
 * phase's blocks, the members named. 1: in budget; 0: over it (or fewer than two members);
 * -1: out of memory. */
static int regroup(const Plan *p, const Dialect *d, const CgOptions *o, CgProgram *g, int gi) {
  CgLaunch *G = &g->group[gi];
  int cap = 0, n = 0, np = 0;
  int64_t smem = 0, widest = 0;
  for (int m = 0; m < g->n_launch; m++)
    if (g->launch[m].group == gi) cap += g->launch[m].n_params, n++, smem += static_smem(p, d, o, &g->launch[m]);
  if (n < 2) return 0;
  int *params = arena_alloc(&g->arena, sizeof *params * (size_t)(cap + 1));
  if (!params) return -1;
  for (int ph = 0; ph < G->phase; ph++) {
    int64_t total = 0;
    for (int m = 0; m < g->n_launch; m++)
      if (g->launch[m].group == gi && g->launch[m].phase == ph) total += g->launch[m].grid;
    if (total > widest) widest = total;
  }
  int len = snprintf(G->why, sizeof G->why, "group of");
  for (int m = 0, first = 1; m < g->n_launch; m++) {
    const CgLaunch *l = &g->launch[m];
    if (l->group != gi) continue;
    for (int j = 0; j < l->n_params; j++) np = union_add(params, np, l->params[j]);
    bool run = m > 0 && g->launch[m - 1].group == gi, more = m + 1 < g->n_launch && g->launch[m + 1].group == gi;
    if (len > 0 && (size_t)len < sizeof G->why && !(run && more))
      len += run ? snprintf(G->why + len, sizeof G->why - (size_t)len, "..k%d", m)
                 : snprintf(G->why + len, sizeof G->why - (size_t)len, "%s k%d", first ? "" : ",", m);
    first = 0;
  }
  if (len > 0 && (size_t)len < sizeof G->why)
    snprintf(G->why + len, sizeof G->why - (size_t)len, ": %d kernels in %d phase%s%s", n, G->phase, G->phase > 1 ? "s" : "",
             G->cooperative ? ", grid barriers between" : "");
  G->params = params, G->n_params = np, G->grid = widest;
  return np <= GROUP_MAX_PARAMS && smem <= GROUP_MAX_STATIC_SMEM;
}

/* The first group whose launch comes after launch u, within the window (-1: none). */
enum { DEFER_WINDOW = 8 };
static int next_group(const CgProgram *g, const int *last, int u) {
  for (int x = u + 1; x < g->n_launch && x <= u + DEFER_WINDOW; x++)
    if (g->launch[x].group >= 0 && last[g->launch[x].group] > u) return g->launch[x].group;
  return -1;
}

static int group_size(const CgProgram *g, int gi) {
  int n = 0;
  for (int m = 0; m < g->n_launch; m++) n += g->launch[m].group == gi;
  return n;
}

/* Scratch of defer_alone: each kernel's group and launch before a move, and after it. */
typedef struct Moves { int *was, *was_at, *at, *last; } Moves;

/* Keeps a move of kernels among launches u..hi if the groups it touched (gi, g2; -1: none)
 * are in budget and the order holds; else puts every kernel back in its old group. */
static kiln_status keep_or_undo(const Plan *p, const Dialect *d, const CgOptions *o, CgProgram *g, Moves *mv, int u,
                                int gi, int g2) {
  int a = regroup(p, d, o, g, gi), b = g2 >= 0 ? regroup(p, d, o, g, g2) : 1;
  if (a < 0 || b < 0) return kiln_fail(KILN_ERR_NO_MEMORY, "codegen: no memory for launch groups");
  int hi = u;  /* the last launch any moved kernel had or has */
  runs_at(g, mv->at, mv->last);
  for (int m = 0; m < g->n_launch; m++)
    if (mv->at[m] != mv->was_at[m] || g->launch[m].group != mv->was[m]) {
      if (m > hi) hi = m;
      if (mv->at[m] > hi) hi = mv->at[m];
      if (mv->was_at[m] > hi) hi = mv->was_at[m];
    }
  if (a && b && order_kept(p, g, mv->at, mv->was_at, u, hi)) return KILN_OK;
  for (int m = 0; m < g->n_launch; m++) g->launch[m].group = mv->was[m];
  a = regroup(p, d, o, g, gi), b = g2 >= 0 ? regroup(p, d, o, g, g2) : 1;
  return a < 0 || b < 0 ? kiln_fail(KILN_ERR_NO_MEMORY, "codegen: no memory for launch groups") : KILN_OK;
}

/* A kernel left alone runs in the first phase of the next group instead. The group is
 * launched at its last member, so the kernel runs later than its place in the plan. A
 * first-phase member that must wait for it moves on to the group after (or runs alone). With
 * no group after it, it pairs with the next kernel left alone. A move is kept only if the
 * groups stay in budget and every pair of kernels that touch the same bytes still runs in
 * plan order. After a softmax's rows, the loss's mean (an output nothing reads) and the bias
 * update that must follow it (it stores into the bias the mean reads) are such kernels:
 * mlp_train_b32's step goes from 6 launches to 5. */
static kiln_status defer_alone(const Plan *p, const Dialect *d, const CgOptions *o, CgProgram *g) {
  size_t n = (size_t)g->n_launch + 1;
  Moves mv = { kiln_calloc(n, sizeof(int)), kiln_calloc(n, sizeof(int)), kiln_calloc(n, sizeof(int)),
               kiln_calloc(n + (size_t)g->n_launch, sizeof(int)) };
  kiln_status st = mv.was && mv.was_at && mv.at && mv.last ? KILN_OK
                   : kiln_fail(KILN_ERR_NO_MEMORY, "codegen: no memory for launch groups");
  for (int u = 0; u < g->n_launch && !st; u++) {
    CgLaunch *lu = &g->launch[u];
    if (lu->group >= 0 || not_groupable(p, d, o, lu)) continue;
    runs_at(g, mv.was_at, mv.last);
    for (int m = 0; m < g->n_launch; m++) mv.was[m] = g->launch[m].group;
    int gi = next_group(g, mv.last, u), g2 = -1;
    if (gi >= 0) {
      g2 = next_group(g, mv.last, mv.last[gi]);
      lu->group = gi, lu->phase = 0;
      for (int m = u + 1; m < g->n_launch; m++) {  /* first-phase members that must wait for u move on */
        CgLaunch *lm = &g->launch[m];
        if (lm->group == gi && lm->phase == 0 && depends_on(p, g, u, m)) lm->group = g2;
      }
    } else {
      int v = u + 1;  /* the next kernel left alone that may share a launch with u */
      for (; v < g->n_launch && v <= u + DEFER_WINDOW; v++)
        if (g->launch[v].group < 0 && !not_groupable(p, d, o, &g->launch[v])) break;
      if (v >= g->n_launch || v > u + DEFER_WINDOW) continue;
      gi = g->n_group++;
      g->group[gi] = (CgLaunch){ .kernel = -1, .group = gi, .phase = 1, .block = POINT_THREADS };
      snprintf(g->group[gi].name, sizeof g->group[gi].name, "kiln_g%d", gi);
      lu->group = g->launch[v].group = gi;
      lu->phase = g->launch[v].phase = 0;
    }
    st = keep_or_undo(p, d, o, g, &mv, u, gi, g2);
    if (!st && gi == g->n_group - 1 && group_size(g, gi) == 0) g->n_group--;  /* a pair that was undone */
  }
  kiln_free(mv.was), kiln_free(mv.was_at), kiln_free(mv.at), kiln_free(mv.last);
  return st;
}

/* CG_GROUP_BANDS: is launch l a GEMM whose virtual blocks are its tiles' spans, one each, over [M, N] (var 0
 * the rows, var 1 the columns), no batch, no cluster, no rows at its head or band at its tail? Its
 * block v then holds rows of band v / cg_gemm_band_blocks % row tiles (gemm.c's tile order). */
static bool band_tiles(const Plan *p, const Dialect *d, const CgOptions *o, const CgLaunch *l, CgGemm *gm) {
  const Kernel *k = &p->kernels[l->kernel];
  if (k->chain || k->rank != 2 || cg_kernel_shape(p, k, d, o) != CG_GPU_GEMM || !cg_gemm_match(p, k, o, gm)) return false;
  if (gm->narrow || gm->batch != 1 || gm->cluster || gm->band || gm->head || gm->wgmma || gm->role[0] != CG_ROLE_M ||
      gm->role[1] != CG_ROLE_N)
    return false;
  int64_t tiles = ((gm->M + gm->bm - 1) / gm->bm) * ((gm->N + gm->bn - 1) / gm->bn);
  return l->grid == tiles * (gm->splits > 1 ? gm->splits : 1);
}

/* Does every load of stage s in kernel k read it at k's own row (index 0 = var 0), s of k's rows? */
static bool reads_own_rows(const Plan *p, const Kernel *k, int s, int64_t rows) {
  const Stage *S = &p->te->stages[s];
  if (S->rank < 1 || S->shape[0] != rows) return false;
  OwnRows want = { s, true };
  for (int i = 0; i < k->n_items && want.ok; i++) te_visit_loads(k->items[i].body, own_rows_load, &want);
  return want.ok;
}

/* Bit ph of the result: phase ph of group gi may wait for its band of phase ph - 1 alone. Every
 * member of both phases band_tiles over the same rows in the same bands; and whatever a member of
 * phase ph depends on in an earlier phase, it only reads, at its own rows, a stage that member
 * wrote (nothing it writes meets anything an earlier member reads or writes: no region reused
 * within the group). Band b of phase ph then needs band b of phase ph - 1 alone, and through it
 * of the phases before. */
static unsigned band_waits_of(const Plan *p, const Dialect *d, const CgOptions *o, const CgProgram *g, int gi) {
  const CgLaunch *G = &g->group[gi];
  if (!d->band_arrive || !d->band_wait || G->phase < 2 || G->phase > 32) return 0;
  unsigned waits = 0;
  int64_t M = -1, bm = -1;
  bool tiles[32] = { false };  /* each phase's members all band_tiles over M in bands of bm */
  for (int ph = 0; ph < G->phase; ph++) {
    tiles[ph] = true;
    for (int m = 0; m < g->n_launch; m++) {
      const CgLaunch *l = &g->launch[m];
      if (l->group != gi || l->phase != ph) continue;
      CgGemm gm;
      bool ok = band_tiles(p, d, o, l, &gm) && (M < 0 || (gm.M == M && gm.bm == bm));
      if (ok && M < 0) M = gm.M, bm = gm.bm;
      tiles[ph] = tiles[ph] && ok;
    }
  }
  for (int ph = 1; ph < G->phase; ph++) {
    bool ok = tiles[ph] && tiles[ph - 1];
    for (int b = 0; b < g->n_launch && ok; b++) {
      const CgLaunch *lb = &g->launch[b];
      if (lb->group != gi || lb->phase != ph) continue;
      const Kernel *kb = &p->kernels[b];
      for (int a = 0; a < g->n_launch && ok; a++) {
        const CgLaunch *la = &g->launch[a];
        if (la->group != gi || la->phase >= ph || !depends_on(p, g, a, b)) continue;
        const Kernel *ka = &p->kernels[a];
        for (int i = kb->n_ins; i < lb->n_params && ok; i++)  /* b writes nothing a touches */
          for (int j = 0; j < la->n_params && ok; j++)
            ok = !overlap(region_of(p, g, lb->params[i]), region_of(p, g, la->params[j]));
        for (int j = ka->n_ins; j < la->n_params && ok; j++)  /* what a writes, b reads only as that stage, at its rows */
          for (int i = 0; i < kb->n_ins && ok; i++)
            if (overlap(region_of(p, g, la->params[j]), region_of(p, g, lb->params[i])))
              ok = la->params[j] == lb->params[i] && reads_own_rows(p, kb, lb->params[i], M);
      }
    }
    if (ok) waits |= 1u << ph;
  }
  return waits;
}

/* Consecutive groupable kernels, each in the first phase after every member it depends on;
 * siblings mode ends the group at the first dependence instead. A kernel that cannot join
 * ends the group before it. */
static kiln_status form_groups(const Plan *p, const Dialect *d, const CgOptions *o, CgProgram *g) {
  /* a loop dialect's kernel ends when its whole team has run it: the runtime waits between calls,
   * and a call of several kernels would have no barrier between them */
  if (o->group == CG_GROUP_OFF || g->n_launch < 2 || !d->grid) return KILN_OK;
  g->group = arena_alloc(&g->arena, sizeof *g->group * (size_t)(g->n_launch + 1));
  int *params = kiln_calloc((size_t)GROUP_MAX_PARAMS + 1, sizeof *params);
  if (!g->group || !params) { kiln_free(params); return kiln_fail(KILN_ERR_NO_MEMORY, "codegen: no memory for launch groups"); }
  kiln_status st = KILN_OK;
  int first = -1, phases = 0, n_params = 0;
  int64_t smem = 0;
  for (int i = 0; i < g->n_launch && !st; i++) {
    CgLaunch *l = &g->launch[i];
    const char *no = not_groupable(p, d, o, l);
    if (no && !strcmp(no, "nothing to run")) continue;  /* no launch, no buffers: no boundary */
    if (no) {
      if (first >= 0) st = close_group(g, first, i, phases);
      first = -1;
      if (!l->host && !l->collective && strcmp(no, "nothing to run")) why_append(l, "; alone: %s", no);
      continue;
    }
    int ph = 0;
    for (int j = first >= 0 ? first : i; j < i; j++)
      if (depends_on(p, g, j, i) && g->launch[j].phase + 1 > ph) ph = g->launch[j].phase + 1;
    int np = n_params;
    for (int j = 0; j < l->n_params && np <= GROUP_MAX_PARAMS - 1; j++) np = union_add(params, np, l->params[j]);
    int64_t sm = static_smem(p, d, o, l);
    bool full = np >= GROUP_MAX_PARAMS || smem + sm > GROUP_MAX_STATIC_SMEM;
    if (first >= 0 && ((ph > 0 && o->group == CG_GROUP_SIBLINGS) || full)) {
      if (full && np >= GROUP_MAX_PARAMS) why_append(l, "; not in the group before: budget: parameters %d > %d", np, GROUP_MAX_PARAMS - 1);
      else if (full)
        why_append(l, "; not in the group before: budget: shared tiles %lld + %lld B > %d B", (long long)smem, (long long)sm,
                   GROUP_MAX_STATIC_SMEM);
      st = close_group(g, first, i, phases);
      first = -1;
    }
    if (first < 0) {
      first = i, phases = 0, ph = 0, n_params = 0, smem = 0;
      for (int j = 0; j < l->n_params; j++) n_params = union_add(params, n_params, l->params[j]);
    } else n_params = np;
    smem += sm;
    l->phase = ph;
    if (ph + 1 > phases) phases = ph + 1;
  }
  if (!st && first >= 0) st = close_group(g, first, g->n_launch, phases);
  kiln_free(params);
  if (!st) st = defer_alone(p, d, o, g);
  for (int gi = 0; !st && o->group == CG_GROUP_BANDS && gi < g->n_group; gi++) {
    CgLaunch *G = &g->group[gi];
    G->band_waits = band_waits_of(p, d, o, g, gi);
    char *bars = strstr(G->why, ", grid barriers between");
    unsigned every = G->phase >= 32 ? ~1u : ((1u << G->phase) - 1u) & ~1u;  /* phases 1 .. phase - 1 */
    if (bars && G->band_waits == every) {  /* no barrier left: say so */
      size_t n = strlen(", grid barriers between");
      memmove(bars, bars + n, strlen(bars + n) + 1);
    }
    for (int ph = 1; ph < G->phase; ph++)
      if (G->band_waits >> ph & 1u) why_append(G, "; phase %d waits for its band of phase %d", ph, ph - 1);
  }
  return st;
}

kiln_status cg_program_build(const Plan *p, const Dialect *d, const CgOptions *o, CgProgram **out) {
  if (!out) return kiln_fail(KILN_ERR_INVALID_ARG, "cg_program_build: out is NULL");
  *out = NULL;
  if (!p || !d) return kiln_fail(KILN_ERR_INVALID_ARG, "cg_program_build: %s is NULL", p ? "dialect" : "plan");
  CgOptions def = cg_options_default();
  if (!o) o = &def;
  CgProgram *g = kiln_calloc(1, sizeof *g);
  if (!g) return kiln_fail(KILN_ERR_NO_MEMORY, "codegen: no memory for a program");
  /* geometry, stores in place and groups, then the source, then library GEMMs: the library
   * matcher adds expressions to the TE (hash-consed GELU probes), and rendering must see
   * the TE as the plan left it */
  kiln_status st = KILN_OK;
  g->launch = arena_alloc(&g->arena, sizeof *g->launch * (size_t)(p->n_kernels + 1));
  if (!g->launch) st = kiln_fail(KILN_ERR_NO_MEMORY, "codegen: no memory for the launch table");
  for (int i = 0; !st && i < p->n_kernels; i++) {
    st = launch_of(p, i, d, o, &g->arena, &g->launch[i]);
    g->n_launch = i + 1;
  }
  if (!st) st = find_in_place(p, d, o, g);
  if (!st) st = form_groups(p, d, o, g);
  if (!st) st = cg_render_plan(p, d, o, g, &g->source);
  for (int i = 0; !st && i < g->n_launch; i++) library_of(p, d, o, &g->launch[i]);
  if (st) {
    cg_program_free(g);
    return st;
  }
  *out = g;
  return KILN_OK;
}

int cg_group_first(const CgProgram *g, int gi) {
  for (int m = 0; m < g->n_launch; m++)
    if (g->launch[m].group == gi) return m;
  return -1;
}

void cg_program_free(CgProgram *g) {
  if (!g) return;
  sb_free(&g->source);
  arena_free(&g->arena);
  kiln_free(g);
}

void cg_program_print(const CgProgram *g, FILE *f) {
  for (int i = 0; g && i < g->n_launch; i++) {
    const CgLaunch *l = &g->launch[i];
    char in[24] = "";
    if (l->group >= 0) snprintf(in, sizeof in, " g%d.%d", l->group, l->phase);
    fprintf(f, "k%-3d %-9s grid %7lld x %4d  smem %6d%s  %s%-7s  %s\n", l->kernel, l->host ? "(host)" : l->collective ? "(collect)" : l->name,
            (long long)l->grid, l->block, l->smem, l->smem_carveout ? "+carve" : "      ",
            l->library ? "library" : l->group >= 0 ? "phase  " : "kernel ", in, l->why);
  }
  for (int i = 0; g && i < g->n_group; i++) {
    const CgLaunch *l = &g->group[i];
    fprintf(f, "g%-3d %-9s grid %7lld x %4d  %s  %s\n", i, l->name, (long long)l->grid, l->block,
            l->cooperative ? "cooperative" : "one launch ", l->why);
  }
  for (int s = 0; g && g->store_into && s < g->n_store; s++)
    if (g->store_into[s] >= 0) fprintf(f, "t%d stored in place into param t%d (an assign)\n", s, g->store_into[s]);
}
