/*
 * gemm.c — the tiled contraction shape of grid dialects (CG_GPU_GEMM). Takes a plan
 * kernel whose one accumulation is a sum over the inner domain of a product of two
 * factors, produces the body of a grid kernel (in the dialect's tokens: CUDA's
 * threadIdx, __shared__, __syncthreads, ...) that computes it as a GEMM:
 *
 *   - the outer vars split into batch vars (both factors read them), M vars (only the
 *     first factor A reads them) and N vars (only B); M, N, K are the products of their
 *     extents, K the inner domain. So matmul, batched matmul (attention) and convolution
 *     (implicit GEMM: A is the input window, B the weights) are one case;
 *   - a block of CG_GEMM_THREADS threads computes one BM x BN tile of one batch point;
 *     each thread a TM x TN sub-tile at rows ty + i*BM/TM and columns tx + j*BN/TN (so a
 *     warp's shared-memory reads and its global stores run along consecutive addresses);
 *   - both factors go through shared memory BK reduction points at a time, the next
 *     tile's reads issued into registers before the current tile is multiplied. Each tile
 *     element is the factor's expression evaluated by the renderer at the element's vars,
 *     so transposes, broadcasts, slices and padding selects inlined into the factors are
 *     read through their index maps; consecutive threads walk the operand along whichever
 *     of k or m (n) has unit stride in memory, so global reads coalesce;
 *   - products accumulate in f32 registers with the dialect's fused multiply-add (CUDA's
 *     __fmaf_rn: one rounding per step, more accurate than a separate multiply and add,
 *     and unaffected by --fmad=false);
 *   - after the reduction the renderer's epilogue items (bias, activation, residual, the
 *     stores) run on each output of the sub-tile, guarded by the M/N bounds.
 *
 * The tile size follows the problem: 128x128 (8x8 per thread) when that still gives a
 * block per multiprocessor, else 64x64 (4x4), else 32x32 (2x2), so small layers still
 * spread over the chip.
 *
 * Siblings (CgGemm.n_b > 1): the sums of one A times several Bs (q, k and v of one input)
 * share the kernel: the A tile is staged once, each B has its tile, its registers and its
 * accumulators (named by stage, as the epilogue's items read them), and its split-K
 * partials; 32x32 or 64x64 tiles only, one read-ahead stage.
 *
 * Copies (CgGemm.copies): a 32x32 f32 tile in k groups whose two factors are 16-byte vector
 * reads takes its k-tiles as the direct mma tiles do, copied asynchronously straight into 2-4
 * shared stages (no registers on the way, no warp waiting at a store for its read), one barrier
 * a k-tile; on the H200 10-23 % faster k loops than register stages (bench/gpu/kglab.cu cp).
 *
 * Split-K: when even 32x32 tiles leave most of the chip idle and K is long (a batch-32
 * layer of 784 inputs is 4 tiles, each a chain of 25 k-steps), each tile is cut along K
 * into `splits` spans of `kspan` points, one block each. A block stores its partial tile
 * in a module-scope array and counts itself in at the tile's arrival count; the block
 * that arrives last sums the partials in span order (so the result does not depend on
 * which block came last), puts the count back to 0 for the next run, and runs the
 * epilogue. One kernel, atomics only on the counts, deterministic. CgOptions.splitk turns it
 * off.
 */
#include "codegen.h"

#include <stdarg.h>
#include <string.h>

enum { ENOUGH_BLOCKS = 128 };  /* about one per multiprocessor of an H100/H200 (132) */
/* split-K: at most 64 spans of >= 2 k-tiles (a convolution's weight gradient at batch 32 is
 * 5 tiles over K = 6272: 16 spans left 80 blocks on 132 multiprocessors, 13 k-tiles each) */
enum { MAX_SPLITS = 64, MIN_SPAN_TILES = 2 };
enum { LONG_K_TILES = 16 };     /* k-tiles of 32 from which a K is long (gemm_long_k_blocks) */
enum { AUTO_STAGE_TILES = 4 };  /* k-tiles of a block's span from which vector-read tiles read two ahead */
#define SPLIT_WS_BYTES (16 << 20)               /* split-K partial tiles of one kernel, at most */

static bool has_memory_load(const Plan *p, const Kernel *k, const Expr *e) {
  if (e->kind == EX_LOAD) return p->kernel_of[e->src] != k->id && !plan_is_baked(p->te, e->src);
  for (int i = 0; i < e->n_args; i++)
    if (has_memory_load(p, k, e->args[i])) return true;
  return false;
}

/* The first memory load in e (depth first), or NULL. */
static const Expr *first_load(const Plan *p, const Kernel *k, const Expr *e) {
  if (e->kind == EX_LOAD) return p->kernel_of[e->src] != k->id && !plan_is_baked(p->te, e->src) ? e : NULL;
  for (int i = 0; i < e->n_args; i++) {
    const Expr *l = first_load(p, k, e->args[i]);
    if (l) return l;
  }
  return NULL;
}

/* Element offset of load L with every var at 0 except var v at 1 (v < 0: none); false if
 * the offset cannot be evaluated exactly. */
static bool offset_at(const Plan *p, const Expr *L, int nv, int v, int64_t *out) {
  const Stage *S = &p->te->stages[L->src];
  int64_t lo[2 * KILN_MAX_RANK] = { 0 }, off = 0;
  if (v >= 0) lo[v] = 1;
  for (int i = 0; i < L->n_args; i++) {
    int64_t mn, mx;
    if (!te_range(L->args[i], lo, lo, nv, &mn, &mx) || mn != mx) return false;
    off += mn * te_stage_stride(S, i);
  }
  *out = off;
  return true;
}

/* Does the operand's (first) load move by one element when the last inner var moves by
 * one? Then a tile is read along k; else along its own last var (last M or N var). */
static bool reads_along_k(const Plan *p, const Kernel *k, const Expr *x, const CgGemm *g, int own) {
  const Expr *L = first_load(p, k, x);
  int nv = k->rank + k->n_red, last_k = -1, last_own = -1;
  for (int i = k->n_red - 1; i >= 0 && last_k < 0; i--)
    if (k->red_shape[i] > 1) last_k = k->rank + i;
  for (int i = k->rank - 1; i >= 0 && last_own < 0; i--)
    if (g->role[i] == own && k->shape[i] > 1) last_own = i;
  int64_t o0, ok, oo;
  if (!L || last_k < 0 || !offset_at(p, L, nv, -1, &o0)) return false;
  bool k1 = offset_at(p, L, nv, last_k, &ok) && ok - o0 == 1;
  bool own1 = last_own >= 0 && offset_at(p, L, nv, last_own, &oo) && oo - o0 == 1;
  return k1 && !own1;
}

/* bm, bn, bk, tm, tn, k groups. 32x32: four groups of 64 threads, each 4x4 outputs over a
 * quarter of every k-tile (2x2 outputs a thread over the whole k-tile read 4 shared values
 * per 4 multiply-adds: shared-memory bound at a quarter of the FMA rate); after the k loop
 * each thread holds 4x1 outputs of the summed tile, so the split-K and epilogue code is
 * that of any tile. */
static const int tile_cfg[3][6] = { { 128, 128, 8, 8, 8, 1 }, { 64, 64, 16, 4, 4, 1 }, { 32, 32, 32, 4, 1, 4 } };
/* 32x32 where the dialect has no k groups (CgOptions.gemm_kgroups): 2x2 a thread */
static const int tile_flat32[6] = { 32, 32, 32, 2, 2, 1 };
enum { KG_TM = 4, KG_TN = 4, KG_THREADS = CG_GEMM_THREADS / 4 };
/* mma tiles: k-tiles of 32 (two k16 steps of bf16/f16, four k8 of TF32); the shared rows padded by
 * 16 bytes, so that a warp's fragment reads (8 rows x 4 words) fall in 32 distinct banks */
enum { MMA_BK = 32 };
/* direct tiles: k-tiles in flight (the copies of three while one is multiplied: a k-tile of a
 * 128 x 128 tile is about 0.1 us of mma, an HBM read several times that) */
enum { DIRECT_STAGES = 4 };
enum { MMA_BLOCKS = 4 * ENOUGH_BLOCKS };  /* mma tiles under tensor_cores 3: about four blocks a multiprocessor */
static int mma_pad(const CgGemm *g) { return g->mma == CG_MMA_TF32 ? 4 : 8; }
static int mma_esize(const CgGemm *g) { return g->mma == CG_MMA_TF32 ? 4 : 2; }

static int64_t tiles_at(const CgGemm *g, int bm, int bn) {
  return ((g->M + bm - 1) / bm) * ((g->N + bn - 1) / bn) * g->batch;
}

static int64_t tiles_of(const CgGemm *g, int c) { return tiles_at(g, tile_cfg[c][0], tile_cfg[c][1]); }

/* Of tile config c's outputs, those inside the product (the rest pad M and N up to the tile). */
static double tile_use(const CgGemm *g, int c) {
  return (double)g->M * (double)g->N * (double)g->batch / ((double)tiles_of(g, c) * tile_cfg[c][0] * tile_cfg[c][1]);
}

/* Spans for tile config c: `target` blocks in all (two per multiprocessor), each span at least
 * min_span k-tiles long (MIN_SPAN_TILES unless CgOptions.min_span_tiles says; mma tiles keep it), the
 * partial tiles within SPLIT_WS_BYTES. */
static int64_t splits_up_to(const CgGemm *g, int c, int64_t target, int min_span, int64_t most) {
  int64_t tiles = tiles_of(g, c), ktiles = (g->K + tile_cfg[c][2] - 1) / tile_cfg[c][2];
  int64_t splits = (target + tiles - 1) / tiles;
  if (splits > ktiles / min_span) splits = ktiles / min_span;
  if (splits > most) splits = most;
  while (splits > 1 && (double)splits * (double)tiles * tile_cfg[c][0] * tile_cfg[c][1] * 4 * g->n_b > SPLIT_WS_BYTES)
    splits--;
  return splits < 1 ? 1 : splits;
}

static int64_t splits_for(const CgGemm *g, int c, int64_t target, int min_span) {
  return splits_up_to(g, c, target, min_span, MAX_SPLITS);
}

/* K cut into about `splits` spans of whole k-tiles of g->bk (none empty). */
static void set_spans(CgGemm *g, int64_t splits) {
  int64_t ktiles = (g->K + g->bk - 1) / g->bk, span_tiles = (ktiles + splits - 1) / splits;
  g->kspan = span_tiles * g->bk;
  g->splits = (int)((ktiles + span_tiles - 1) / span_tiles);
}

/* The largest tile that gives a block per multiprocessor; else 32x32, split along K when
 * that still leaves the chip under-filled. CG_SPLITK_WIDE (being raced): when 32x32
 * would split, the largest tile whose splits give a block per multiprocessor instead
 * (fewer, longer-per-thread blocks: 4x4 outputs a thread rather than 2x2). */
static void pick_tile(CgGemm *g, CgSplitK splitk, bool kgroups, bool mma_many, int64_t long_k_blocks, bool fit, int min_span,
                      int64_t target) {
  bool off = splitk == CG_SPLITK_OFF, wide = splitk == CG_SPLITK_WIDE;
  int c = g->n_b > 1 ? 1 : 0;  /* siblings: 64 outputs a thread per sum would not fit in registers */
  while (c < 2 && tiles_of(g, c) < ENOUGH_BLOCKS) c++;
  /* CgOptions.gemm_tile_fit (raced on the H200, off: LeNet 1.060): a tile mostly padding (cnn_train_b32's first
   * convolution, 16 channels in a 128 x 128 tile: an eighth of its multiply-adds count) steps
   * down while the smaller tile wastes less; more blocks, as many useful multiply-adds */
  while (fit && !g->mma && c < 2 && tile_use(g, c) < 0.5 && tile_use(g, c + 1) > tile_use(g, c)) c++;
  int64_t splits = tiles_of(g, c) < ENOUGH_BLOCKS && !off ? splits_for(g, c, target, min_span) : 1;
  /* CgOptions.gemm_long_k_blocks (a candidate): the smallest tiles over a long K (mixed
   * precision's 1024x128 layer of 784 inputs: 128 tiles of 25 k-tiles, one block a
   * multiprocessor waiting on one k-tile's reads after another) split towards that many blocks,
   * where today's rule, which splits only below a block a multiprocessor, leaves them whole */
  if (long_k_blocks > 0 && !off && c == 2 && tiles_of(g, c) < long_k_blocks &&
      (g->K + tile_cfg[c][2] - 1) / tile_cfg[c][2] >= LONG_K_TILES) {
    int64_t ls = splits_for(g, c, long_k_blocks, min_span);
    if (ls > splits) splits = ls;
  }
  for (int w = g->n_b > 1 ? 1 : 0; wide && splits > 1 && w < c; w++) {
    int64_t ws = splits_for(g, w, target, min_span);
    if (tiles_of(g, w) * ws >= ENOUGH_BLOCKS) { c = w, splits = ws; break; }
  }
  if (g->mma && mma_many) {
    /* the race's other rule (kiln_options.tensor_cores 3): about four blocks a multiprocessor,
     * the 128 x 128 tile where that still gives MMA_BLOCKS tiles, else 64 x 64 (32 x 32 where
     * those are too few for the chip), split along K towards MMA_BLOCKS blocks. On the H200 it
     * lost (bert_layer_b8s128_bf16 0.215 against 0.187 ms, mlp_fwd_b4096_bf16 0.068 against 0.058):
     * its 64 x 64 tiles' warps spend more on copies and fragments a multiply-add */
    c = tiles_of(g, 0) >= MMA_BLOCKS ? 0 : tiles_of(g, 1) >= ENOUGH_BLOCKS ? 1 : 2;
    int64_t tiles = tiles_of(g, c);
    splits = off || tiles >= MMA_BLOCKS ? 1 : (MMA_BLOCKS + tiles - 1) / tiles;
    if (splits > MAX_SPLITS) splits = MAX_SPLITS;
    while (splits > 1 && (double)splits * (double)tiles * tile_cfg[c][0] * tile_cfg[c][1] * 4 > SPLIT_WS_BYTES) splits--;
  }
  const int *t = c == 2 && !kgroups ? tile_flat32 : tile_cfg[c];
  g->bm = t[0], g->bn = t[1], g->bk = t[2], g->tm = t[3], g->tn = t[4];
  g->kgroups = t[5];
  if (g->mma) {  /* 2 x 4 warps, each (bm / 2) x (bn / 4) in 16 x 8 mma tiles: 2 x 2 fragments of each */
    g->bm = tile_cfg[c][0], g->bn = tile_cfg[c][1];
    g->bk = MMA_BK, g->tm = g->bm / 16, g->tn = g->bn / 16, g->kgroups = 1;
    int64_t kt = (g->K + MMA_BK - 1) / MMA_BK;
    if (splits > kt / MIN_SPAN_TILES) splits = kt / MIN_SPAN_TILES > 1 ? kt / MIN_SPAN_TILES : 1;
  }
  set_spans(g, splits);
}

/* Warpgroup MMA tiles (CgGemm.wgmma): 128 rows (two warpgroups of 64), k-tiles of 64 (one 128-byte
 * swizzled row of 16-bit values), bn of WG_WIDTHS. A wave of tiles over the chip's multiprocessors
 * (WG_SMS: H100 and H200) takes about bn's time (the same 128 rows and K a tile): the width whose
 * waves times bn is least, the widest of a tie (fewer, longer tiles read each row of A fewer times).
 * bert's products: QKV 2304 and FFN1 3072 columns 192 (96 and 128 tiles, one wave), its 768-column
 * products 64 (96 tiles). Stages: as many as WG_SMEM of shared memory holds, at most WG_STAGES. */
enum { WG_BM = 128, WG_BK = 64, WG_SMS = 132, WG_STAGES = 6, WG_SMEM = 200 * 1024 };
static const int WG_WIDTHS[] = { 256, 192, 128, 64 };

static void wgmma_tile(CgGemm *g) {
  int best = 0;
  int64_t best_cost = 0;
  for (size_t i = 0; i < sizeof WG_WIDTHS / sizeof WG_WIDTHS[0]; i++) {
    int64_t waves = (tiles_at(g, WG_BM, WG_WIDTHS[i]) + WG_SMS - 1) / WG_SMS, cost = waves * WG_WIDTHS[i];
    if (!best || cost < best_cost) best = WG_WIDTHS[i], best_cost = cost;
  }
  g->wgmma = true;
  g->bm = WG_BM, g->bn = best, g->bk = WG_BK, g->tm = 1, g->tn = best / 2, g->kgroups = 1;
  set_spans(g, 1);
  int stages = WG_SMEM / ((WG_BM + best) * 128);
  g->wg_stages = stages < WG_STAGES ? stages : WG_STAGES;
}

/* Load L's element offset as base + sum coef[v] * v over the kernel's vars (o->base, o->coef),
 * fitted at 0 and at each var's 1, checked at the far corner and at scattered points; ext the
 * vars' extents. False when L is computed in k, baked, or not affine so. */
static bool affine_load(const Plan *p, const Kernel *k, const Expr *L, const int64_t *ext, struct CgDirect *o) {
  if (L->kind != EX_LOAD || p->kernel_of[L->src] == k->id || plan_is_baked(p->te, L->src)) return false;
  int nv = k->rank + k->n_red;
  int64_t v[2 * KILN_MAX_RANK] = { 0 }, off;
  if (!cg_load_offset_at(p, L, v, nv, &o->base)) return false;
  for (int i = 0; i < nv; i++) {
    o->coef[i] = 0;
    if (ext[i] < 2) continue;
    v[i] = 1;
    bool ok = cg_load_offset_at(p, L, v, nv, &off);
    v[i] = 0;
    if (!ok) return false;
    o->coef[i] = off - o->base;
  }
  for (int t = 0; t < 6; t++) {  /* the far corner, then points scattered over every var */
    int64_t want_off = o->base;
    for (int i = 0; i < nv; i++) {
      v[i] = t == 0 ? ext[i] - 1 : (int64_t)((i * 7 + t * 13 + 3) % (ext[i] > 0 ? ext[i] : 1));
      want_off += o->coef[i] * v[i];
    }
    if (!cg_load_offset_at(p, L, v, nv, &off) || off != want_off) return false;
  }
  o->stage = L->src;
  return true;
}

/* The extents of kernel k's vars (outer, then inner), the last inner var and the last var of
 * role `role` that are longer than 1 (-1: none). */
static void var_extents(const Kernel *k, const CgGemm *g, int role, int64_t *ext, int *last_k, int *last_own) {
  *last_k = *last_own = -1;
  for (int i = 0; i < k->rank; i++) ext[i] = k->shape[i];
  for (int i = 0; i < k->n_red; i++) ext[k->rank + i] = k->red_shape[i];
  for (int i = k->n_red - 1; i >= 0 && *last_k < 0; i--)
    if (k->red_shape[i] > 1) *last_k = k->rank + i;
  for (int i = k->rank - 1; i >= 0 && *last_own < 0; i--)
    if (g->role[i] == role && k->shape[i] > 1) *last_own = i;
}

/* Is o, the offsets of a load, read `width` consecutive elements at a time along var `fast`
 * (coefficient 1, its extent a multiple of width, so that a run never crosses into the next
 * value of another var), every other coefficient and the base multiples of width (aligned)? */
static bool runs_of(const struct CgDirect *o, int nv, const int64_t *ext, int fast, int width) {
  if (fast < 0 || o->coef[fast] != 1 || ext[fast] % width != 0 || o->base % width != 0) return false;
  for (int i = 0; i < nv; i++)
    if (i != fast && o->coef[i] % width != 0) return false;
  return true;
}

bool cg_load_runs(const Plan *p, const Kernel *k, const Expr *L, int fast, int width) {
  int nv = k->rank + k->n_red;
  int64_t ext[2 * KILN_MAX_RANK];
  struct CgDirect o;
  for (int i = 0; i < k->rank; i++) ext[i] = k->shape[i];
  for (int i = 0; i < k->n_red; i++) ext[k->rank + i] = k->red_shape[i];
  return affine_load(p, k, L, ext, &o) && runs_of(&o, nv, ext, fast, width);
}

/* Can factor x (role: CG_ROLE_M for A, CG_ROLE_N for B) be read straight into shared memory?
 * It must be a 16-bit memory load of the mma's kind at an affine offset (affine_load) read in
 * runs of 8 (16-byte chunks) along the last k var, or else along the operand's own last var. */
static bool direct_operand(const Plan *p, const Kernel *k, const CgGemm *g, const Expr *x, int role, struct CgDirect *o) {
  kiln_dtype want = g->mma == CG_MMA_BF16 ? KILN_BF16 : KILN_F16;
  if (x->kind != EX_CAST || x->args[0]->kind != EX_LOAD || x->args[0]->dtype != want) return false;
  int nv = k->rank + k->n_red, last_k, last_own;
  int64_t ext[2 * KILN_MAX_RANK];
  var_extents(k, g, role, ext, &last_k, &last_own);
  if (last_k < 0 || last_own < 0 || !affine_load(p, k, x->args[0], ext, o)) return false;
  o->kfast = o->coef[last_k] == 1 && ext[last_k] % 8 == 0;
  return runs_of(o, nv, ext, o->kfast ? last_k : last_own, 8);
}

/* Can f32 factor x be read 4 elements (16 bytes) a load along the direction its tile is read
 * in (kfast: k, else its own vars)? Every buffer a kernel reads is 16-byte aligned: its own
 * allocation or a 64-byte aligned offset in the arena (plan.c fill_memory). A run is 4
 * consecutive values of the flat index over those vars (kq, or mq / nq). By default the last
 * of them must hold it (coefficient 1, extent a multiple of 4); `across` (CgOptions.gemm_vec
 * 2, a candidate) also takes runs over several vars whose offsets are contiguous (coefficients
 * 1, e1, e1 e2, ... from the last, as a convolution's weights over (ci, kh, kw) or a flattened
 * activation over (c, h, w)) when their extents' product is a multiple of 4. */
static bool vec_operand(const Plan *p, const Kernel *k, const CgGemm *g, const Expr *x, int role, bool kfast, bool across,
                        struct CgDirect *o) {
  if (x->kind != EX_LOAD || x->dtype != KILN_F32) return false;
  int nv = k->rank + k->n_red, last_k, last_own;
  int64_t ext[2 * KILN_MAX_RANK];
  var_extents(k, g, role, ext, &last_k, &last_own);
  if (!affine_load(p, k, x, ext, o)) return false;
  o->kfast = kfast;
  if (!across) return runs_of(o, nv, ext, kfast ? last_k : last_own, 4);
  /* the contiguous vars: from the last of the direction's vars back while coef = run so far */
  bool in_run[2 * KILN_MAX_RANK] = { false };
  int64_t run = 1;
  for (int v = kfast ? nv - 1 : k->rank - 1; v >= (kfast ? k->rank : 0); v--) {
    if (!kfast && g->role[v] != role) continue;
    if (ext[v] < 2) { in_run[v] = true; continue; }
    if (o->coef[v] != run) break;
    in_run[v] = true;
    run *= ext[v];
  }
  if (run % 4 != 0 || o->base % 4 != 0) return false;
  for (int v = 0; v < nv; v++)
    if (!in_run[v] && o->coef[v] % 4 != 0) return false;
  return true;
}

/* The 16-bit dtype a factor's values have exactly (a cast to f32 of a bf16 or f16 value), else f32. */
static kiln_dtype factor_dtype(const Expr *x) {
  return x->kind == EX_CAST && (x->args[0]->dtype == KILN_BF16 || x->args[0]->dtype == KILN_F16) ? x->args[0]->dtype : KILN_F32;
}

/* Is factor x a 16-bit value already rounded where excess precision leaves values unrounded: a
 * load's (f32(load)) or an explicit cast's, which rounds where it stands? */
static bool rounded16(const Expr *x) {
  return x->kind == EX_CAST && (x->args[0]->kind == EX_LOAD || (x->args[0]->kind == EX_CAST && x->args[0]->op == 1));
}

/* Is factor x f32(t(y)) for a 16-bit t and an f32 y: an f32 value rounded to t (autocast's copies)? */
static bool rounded_f32(const Expr *x) {
  return x->kind == EX_CAST && x->dtype == KILN_F32 && x->args[0]->kind == EX_CAST && x->args[0]->args[0]->dtype == KILN_F32 &&
         (x->args[0]->dtype == KILN_BF16 || x->args[0]->dtype == KILN_F16);
}

/* Tensor cores for a product of a and b: both bf16 (f16) values, exact in the mma's operand
 * type; or, where tf32 allows, any f32 values, rounded to TF32 (exact for 16-bit ones). */
static CgMma mma_kind(const Expr *a, const Expr *b, const CgOptions *o) {
  kiln_dtype ta = factor_dtype(a), tb = factor_dtype(b);
  if (o->mma_half && ta == tb && ta == KILN_BF16) return CG_MMA_BF16;
  if (o->mma_half && ta == tb && ta == KILN_F16) return CG_MMA_F16;
  return o->mma_tf32 ? CG_MMA_TF32 : CG_MMA_NONE;
}

/* A narrow contraction a warp a row (CgGemm.narrow): B's K x N values, rows padded to an odd stride,
 * staged whole in shared memory at most this many floats (36 KB: 32 columns over 279 points; a
 * launch group's budget may still keep it apart from other members) */
enum { NARROW_STAGE_FLOATS = 9216 };

int cg_narrow_stride(int64_t N) { return (int)(N | 1); }

bool cg_narrow_stage_fits(int64_t K, int64_t N) { return N <= 32 && K <= NARROW_STAGE_FLOATS / cg_narrow_stride(N); }

/* At most 32 columns over at least CgOptions.narrow_depth points, the kernel's last var the columns
 * and every other var a row var, one f32 sum, no batch, A read along k (a warp's lanes read
 * consecutive depth points of a row), B small enough to stage. */
static bool narrow_fits(const Plan *p, const Kernel *k, const CgOptions *o, const CgGemm *g) {
  int n = k->rank;
  if (o->narrow_depth <= 0 || g->n_b != 1 || g->mma || g->batch != 1 || g->N > 32 || g->K < o->narrow_depth ||
      g->role[n - 1] != CG_ROLE_N || k->shape[n - 1] != g->N || !cg_narrow_stage_fits(g->K, g->N))
    return false;
  for (int v = 0; v < n - 1; v++)
    if (g->role[v] != CG_ROLE_M) return false;
  return reads_along_k(p, k, g->a, g, CG_ROLE_M);
}

bool cg_gemm_match(const Plan *p, const Kernel *k, const CgOptions *o, CgGemm *out) {
  if (k->kind != KN_REDUCE || k->n_steps > 2 || k->rank < 1 || k->n_red < 1) return false;
  CgGemm g = { .acc_item = -1 };
  for (int i = 0; i < k->n_items; i++) {
    const Item *it = &k->items[i];
    if (it->kind == IT_ACC) {
      if (g.n_b == CG_GEMM_MAX_B || it->step != 0) return false;
      if (g.acc_item < 0) g.acc_item = i;
      g.acc_items[g.n_b++] = i;
    } else if (it->kind != IT_OUTER || it->step != 1) return false;
  }
  if (g.acc_item < 0) return false;
  const Item *acc = &k->items[g.acc_item];
  const Stage *S = &p->te->stages[acc->stage];
  const Expr *body = acc->body;
  if (S->rop != RO_SUM || body->dtype != KILN_F32 || S->dtype != KILN_F32) return false;
  if (body->kind != EX_BINARY || body->op != TB_MUL) return false;
  g.a = body->args[0], g.b = body->args[1];
  if (!has_memory_load(p, k, g.a) || !has_memory_load(p, k, g.b)) return false;
  g.M = g.N = g.batch = 1;
  for (int v = 0; v < k->rank; v++) {
    bool ua = te_uses_var(g.a, v), ub = te_uses_var(g.b, v);
    if (ua && ub) g.role[v] = CG_ROLE_BATCH, g.batch *= k->shape[v];
    else if (ub) g.role[v] = CG_ROLE_N, g.N *= k->shape[v];
    else g.role[v] = CG_ROLE_M, g.M *= k->shape[v];
  }
  int first = 0;  /* M holds the first outer var that is not a batch var (the rows of x @ w) */
  while (first < k->rank && (g.role[first] == CG_ROLE_BATCH || k->shape[first] == 1)) first++;
  if (first < k->rank && g.role[first] == CG_ROLE_N) {
    const Expr *t = g.a; g.a = g.b; g.b = t;
    for (int v = 0; v < k->rank; v++) g.role[v] = g.role[v] == CG_ROLE_N ? CG_ROLE_M : g.role[v] == CG_ROLE_M ? CG_ROLE_N : CG_ROLE_BATCH;
    int64_t m = g.M; g.M = g.N; g.N = m;
  }
  g.K = k->inner_numel;
  g.bs[0] = g.b;
  g.mma = g.n_b == 1 && !o->loop_library ? mma_kind(g.a, g.b, o) : CG_MMA_NONE;
  /* siblings: each further sum is the same A times a B that reads no M var */
  for (int q = 1; q < g.n_b; q++) {
    const Item *it = &k->items[g.acc_items[q]];
    const Stage *Sq = &p->te->stages[it->stage];
    const Expr *bq = it->body;
    if (Sq->rop != RO_SUM || Sq->dtype != KILN_F32 || bq->dtype != KILN_F32 || bq->kind != EX_BINARY || bq->op != TB_MUL)
      return false;
    int ai = bq->args[0] == g.a ? 0 : bq->args[1] == g.a ? 1 : -1;
    if (ai < 0 || !has_memory_load(p, k, bq->args[1 - ai])) return false;
    g.bs[q] = bq->args[1 - ai];
    for (int v = 0; v < k->rank; v++)
      if (g.role[v] == CG_ROLE_M && te_uses_var(g.bs[q], v)) return false;
  }
  if (o->loop_library) {  /* a loop dialect's library GEMM: no GPU tile decisions */
    if (out) *out = g;
    return true;
  }
  /* worth a tile: both sides at least 8 wide, and either enough small tiles to spread over
   * the chip or a shape the one-block-per-output reduction does not take */
  if (g.M < 8 || g.N < 8 || g.K < (o->gemm_small_k > 0 ? o->gemm_small_k : 4)) return false;
  if (narrow_fits(p, k, o, &g)) {  /* no tiles: the rest of the tile decisions do not apply */
    g.narrow = true, g.a_kfast = true;
    g.bm = g.bn = g.bk = 32, g.tm = g.tn = 1, g.kgroups = 1, g.splits = 1, g.kspan = g.K, g.stages = 1;
    if (out) *out = g;
    return true;
  }
  pick_tile(&g, o->splitk, o->gemm_kgroups, o->mma_many_blocks, o->gemm_long_k_blocks, o->gemm_tile_fit,
            o->min_span_tiles > 0 ? o->min_span_tiles : MIN_SPAN_TILES, o->split_target > 0 ? o->split_target : 2 * ENOUGH_BLOCKS);
  /* few tiles: one block per output row-reduces instead, unless split-K gives the tiles
   * enough blocks (a batch-32 layer of 784 inputs: 4 tiles x 9 spans) */
  int64_t small_tiles = tiles_of(&g, 2);
  bool block_rows = k->inner_numel >= 64 && k->outer_numel < 32768;
  int64_t spans = g.splits < 16 ? g.splits : 16;  /* the rule as measured with at most 16 spans */
  bool thin = small_tiles < 16 && small_tiles * spans < 32 && block_rows;
  /* CgOptions.thin_spans (cuda's default 128): such a product over a long reduction (cnn_train_b32's
   * first convolution's weight gradient: 9 x 16 outputs over 25,088 points, a row of 4 blocks each,
   * its factor read 9 times) takes one 32x32 tile split into up to thin_spans spans where those give
   * at least 32 blocks: each factor read once, the spans' partials added by the last */
  if (thin && o->thin_spans > 0 && !g.mma && g.n_b == 1 && g.bm == 32 && g.bn == 32) {
    int64_t ts = splits_up_to(&g, 2, (int64_t)o->thin_spans * small_tiles,
                              o->min_span_tiles > 0 ? o->min_span_tiles : MIN_SPAN_TILES, o->thin_spans);
    if (small_tiles * ts >= 32) set_spans(&g, ts), thin = false;
  }
  if (thin) return false;
  /* a cluster of at most 8 blocks (the portable size); each block one span of one tile */
  g.one_fence = o->one_fence;
  g.split_flags = o->split_flags;  /* where it splits, and not in a cluster (cg_gemm_globals, split_combine) */
  g.cluster = o->cluster_splitk && g.n_b == 1 && !g.mma && g.splits > 1 && g.splits <= 8 &&
              tiles_at(&g, g.bm, g.bn) * g.splits <= ((int64_t)1 << 20);
  g.a_kfast = reads_along_k(p, k, g.a, &g, CG_ROLE_M);
  g.b_kfast = reads_along_k(p, k, g.b, &g, CG_ROLE_N);
  g.a_vec = o->gemm_vec && !g.mma && vec_operand(p, k, &g, g.a, CG_ROLE_M, g.a_kfast, o->gemm_vec == 2, &g.va);
  g.b_vec = o->gemm_vec && !g.mma && g.n_b == 1 && vec_operand(p, k, &g, g.b, CG_ROLE_N, g.b_kfast, o->gemm_vec == 2, &g.vb);
  /* read-ahead is for the small tiles of short, latency-bound chains; a 128x128 tile has the
   * work to hide its reads, and a second stage of its operand registers took it from 128
   * registers a thread to 201 (one block a multiprocessor instead of two). By default (0) two
   * stages where both factors are vector reads (a stage is 8 registers) over spans of at least
   * AUTO_STAGE_TILES k-tiles: on the H200 mlp_train_b1024 ran 0.911x (its first layer, 25 k-tiles
   * a block, 17.5 -> 13.8 us), mlp_fwd_b128 0.968x; two stages on every tile ran cnn_train_b32's
   * convolutions, whose tiles read expressions, 1.063x slower */
  int want = o->gemm_stages;
  if (want == 0) want = g.a_vec && g.b_vec && ((g.kspan < g.K ? g.kspan : g.K) + g.bk - 1) / g.bk >= AUTO_STAGE_TILES ? 2 : 1;
  g.stages = (want == 2 || want == 4) && g.bm <= 64 && g.n_b == 1 && !g.mma ? want : 1;
  /* copies: as many stages as the option asks and the block's span has k-tiles (a span of one
   * k-tile has nothing to read ahead, and a launch group's members' shared tiles add up) */
  int64_t span_tiles = ((g.kspan < g.K ? g.kspan : g.K) + g.bk - 1) / g.bk;
  g.copies = o->gemm_copies >= 2 && o->gemm_copies <= 4 && g.kgroups > 1 && !g.mma && g.n_b == 1 && !g.cluster && g.a_vec &&
                     g.b_vec && span_tiles >= 2 ? (int)(span_tiles < o->gemm_copies ? span_tiles : o->gemm_copies) : 0;
  if (g.copies) g.stages = 1, g.kg_tree = o->gemm_kg_tree;
  g.direct = (g.mma == CG_MMA_BF16 || g.mma == CG_MMA_F16) && o->mma_direct && direct_operand(p, k, &g, g.a, CG_ROLE_M, &g.da) &&
             direct_operand(p, k, &g, g.b, CG_ROLE_N, &g.db);
  if (g.direct && o->wgmma) wgmma_tile(&g);
  /* A 32x32 mma tile through registers does two mma a warp on a k-tile of 32, between a wait
   * on its reads and two barriers. Deeper k-tiles (kiln_options.cuda_mma_k 64 or 128) wait less
   * often with more reads a thread in flight, but lost the H200 race: mlp_train_b1024_bf16amp
   * 1.13x slower at 64, 1.38x at 128 (a launch group of two such tiles took 239 registers). */
  if (g.mma && !g.direct && g.bm == 32 && o->mma_small_k > MMA_BK) {
    g.bk = o->mma_small_k;
    set_spans(&g, g.splits);
  }
  bool regs16 = (g.mma == CG_MMA_BF16 || g.mma == CG_MMA_F16) && !g.direct && o->mma_round_late;
  g.a_round = regs16 && rounded_f32(g.a), g.b_round = regs16 && rounded_f32(g.b);
  /* excess precision: any other factor may hold an unrounded f32 */
  bool ep = (g.mma == CG_MMA_BF16 || g.mma == CG_MMA_F16) && !g.direct && o->excess_precision;
  g.a_stash_round = ep && !rounded16(g.a), g.b_stash_round = false;
  for (int q = 0; q < g.n_b; q++) g.b_stash_round |= ep && !rounded16(g.bs[q]);
  for (int q = 1; q < g.n_b; q++)  /* one read order for every B tile */
    if (reads_along_k(p, k, g.bs[q], &g, CG_ROLE_N) != g.b_kfast) return false;
  if (out) *out = g;
  return true;
}

static int kg_stride(const CgGemm *g) { return g->bm + 4; }  /* floats per row; bm == bn (== bk: 32x32 tiles) */

/* A headed tile keeps its rows, all of K, in static shared memory beside one B tile: at 32 rows of
 * 256 points, Ph is 36 KB and the block 41 KB (under the 48 KB a static array may take) */
enum { HEAD_MAX_K = 256 };
/* gemm_heads 3: column tiles a cluster, sharing their rows (8 rows a block at 32-row tiles: a warp a row) */
enum { HEAD_CLUSTER = 4 };

/* The tiles of kc under o as a headed chain takes them (A the load of P along M and K): 32 x 32 k-group
 * f32 tiles, one sum, no batch, B through registers a k-tile at a time. */
static bool head_tiles(const Plan *p, const Kernel *kc, const CgOptions *o, int P, CgGemm *g) {
  if (!o->gemm_heads || !cg_gemm_match(p, kc, o, g)) return false;
  if (g->mma || g->kgroups <= 1 || g->bm != 32 || g->bn != 32 || g->bk != 32 || g->n_b != 1 || g->batch != 1 || g->cluster ||
      g->K > HEAD_MAX_K || g->a->kind != EX_LOAD || g->a->src != P)
    return false;
  g->head = true;
  g->a_vec = g->b_vec = false, g->copies = 0, g->stages = 1, g->direct = false, g->a_round = g->b_round = g->a_stash_round = g->b_stash_round = false;
  if (o->gemm_heads >= 2) set_spans(g, 1);
  int64_t nt = (g->N + g->bn - 1) / g->bn;
  g->head_cluster = o->gemm_heads == 3 && nt % HEAD_CLUSTER == 0 ? HEAD_CLUSTER : 1;
  return true;
}

int cg_gemm_head_lanes(const CgGemm *g) {
  int rows = g->head_cluster > 1 ? g->bm / g->head_cluster : g->bm;  /* a block's share of the tile's rows */
  int G = CG_GEMM_THREADS / rows;
  while (G < 32 && (g->K + G - 1) / G > 32) G *= 2;  /* at most 32 points a lane */
  return G;
}

bool cg_gemm_headed(const Plan *p, const Kernel *kc, const CgOptions *o, CgGemm *g) {
  CgGemm own;
  if (!g) g = &own;
  if (!kc->headed || kc->id < 1) return false;
  const Kernel *kr = kc - 1;
  for (int i = 0; i < kr->n_items; i++)
    if (kr->items[i].kind == IT_INNER) return head_tiles(p, kc, o, kr->items[i].stage, g);
  return false;
}

bool cg_gemm_head_ok(const struct Plan *p, const Kernel *kr, const Kernel *kc, int P, const void *ctx) {
  CgGemm g;
  if (!head_tiles(p, kc, ctx, P, &g)) return false;
  /* P's row vars read KC's M vars alone (the tile's row mq names one row of P: the identity, or a
   * permutation such as encoder4_d256's projections taking (sequence, batch) rows of (batch,
   * sequence) normalised ones), its last var KC's reduction var: then Ph[k][m] holds A at (tm0 + m, k) */
  const Stage *S = &p->te->stages[P];
  const Expr *L = g.a;
  int n = S->rank;
  if (n < 1 || L->n_args != n || kr->rank != n || S->shape[n - 1] != g.K) return false;
  for (int v = 0; v < n - 1; v++)
    for (int x = 0; x < kc->rank + kc->n_red; x++)
      if (te_uses_var(L->args[v], x) && (x >= kc->rank || g.role[x] != CG_ROLE_M)) return false;
  int64_t lo[2 * KILN_MAX_RANK], hi[2 * KILN_MAX_RANK];
  int nv = kc->rank + kc->n_red;
  for (int v = 0; v < nv; v++) lo[v] = 0, hi[v] = (v < kc->rank ? kc->shape[v] : kc->red_shape[v - kc->rank]) - 1;
  Expr *k = te_simplify(p->te, L->args[n - 1], lo, hi, nv);
  return k && k->kind == EX_VAR && k->var == kc->rank;
}

/* Bytes of one stage of a direct tile's operands: rows along k (x by bk + 8) or along x (bk by x + 8). */
static int64_t direct_stage_bytes(const CgGemm *g) {
  return 2 * ((int64_t)(g->da.kfast ? g->bm * (g->bk + 8) : g->bk * (g->bm + 8)) +
              (g->db.kfast ? g->bn * (g->bk + 8) : g->bk * (g->bn + 8)));
}

int64_t cg_gemm_dyn_smem(const CgGemm *g) {
  if (g->wgmma) return (int64_t)g->wg_stages * (g->bm + g->bn) * 128 + 1024;  /* the base rounded up to 1024 */
  return g->direct ? DIRECT_STAGES * direct_stage_bytes(g) + 16 : 0;
}

/* Rows of Ph (CgGemm.head): K in whole k-tiles, the points past K zero. */
static int64_t head_rows(const CgGemm *g) { return (g->K + g->bk - 1) / g->bk * g->bk; }

int64_t cg_gemm_smem(const CgGemm *g) {
  if (g->band_share) {  /* the tile's row values Xb, beside the tile's own */
    CgGemm own = *g;
    own.band_share = false;
    return cg_gemm_smem(&own) + 4 * (int64_t)g->bm * (g->bn + 1);
  }
  if (g->narrow) return 4 * g->K * cg_narrow_stride(g->N);
  if (g->direct) return 16;  /* the split-K flag; the stages are dynamic (cg_gemm_dyn_smem) */
  if (g->head) return 4 * (head_rows(g) + g->bk) * kg_stride(g) + 16;  /* Ph, one B tile, the flag */
  if (g->mma) return (int64_t)mma_esize(g) * (g->bm + g->bn) * (g->bk + mma_pad(g)) + 16;
  if (g->copies) return 4 * (int64_t)g->copies * 2 * g->bk * kg_stride(g) + 16;
  int pad = g->kgroups > 1 ? 4 : 32 / g->bk, bufs = g->stages > 1 ? 2 : 1;
  return 4 * (int64_t)bufs * g->bk * (g->bm + g->n_b * g->bn + (1 + g->n_b) * pad) + 16 +
         (g->cluster ? 4 * (int64_t)g->bm * g->bn : 0);
}

int64_t cg_gemm_blocks(const CgGemm *g) {
  int64_t t = g->narrow ? (g->M + CG_GEMM_THREADS / 32 - 1) / (CG_GEMM_THREADS / 32) : tiles_at(g, g->bm, g->bn) * g->splits;
  return t < ((int64_t)1 << 20) ? t : ((int64_t)1 << 20);
}

/* The tile kernel's block w takes span w % S of tile w / S, the tile's columns tile % nt and rows
 * (tile / nt) % mt (cg_render_gemm's loop): its rows' band is w / (S * nt) % mt */
int64_t cg_gemm_band_blocks(const CgGemm *g) {
  return (g->splits > 1 ? g->splits : 1) * ((g->N + g->bn - 1) / g->bn);
}

void cg_gemm_globals(const CgGemm *g, int ki, const Dialect *d, StrBuf *out) {
  if (g->wgmma) d->wgmma_define(out, g->bn, g->mma, !g->da.kfast, !g->db.kfast);
  if (g->splits <= 1) return;
  if (g->cluster) {
    sb_printf(out, "\n%s", d->cluster_helpers);
    return;
  }
  int64_t tiles = tiles_at(g, g->bm, g->bn);
  if (g->split_flags)
    sb_printf(out, "\n/* kernel %d, split-K: partial tiles of its %d spans, and each span's flag (0 at module load, one\n"
                   " * more each run) */\n", ki, g->splits);
  else
    sb_printf(out, "\n/* kernel %d, split-K: partial tiles of its %d spans, and each tile's arrivals (0 at\n"
                   " * module load; the last block of a tile puts its count back to 0) */\n", ki, g->splits);
  sb_printf(out, "%s %s kiln_part%d[%lld];\n", d->global_qual, d->value_type[KILN_F32], ki,
            (long long)(g->splits * tiles * g->bm * g->bn * g->n_b));
  if (g->split_flags) sb_printf(out, "%s %s kiln_sf%d[%lld];\n", d->global_qual, d->counter_type, ki, (long long)(tiles * g->splits));
  else sb_printf(out, "%s %s kiln_arrived%d[%lld];\n", d->global_qual, d->counter_type, ki, (long long)tiles);
}

/* The shared tiles, a declaration a line; returns the count. Rows padded by
 * 32/BK floats: the k-fast stores of a tile (a warp covers BK values of kk times 32/BK of xx)
 * land in 32 distinct banks. */
static int tile_decls(const CgGemm *g, const Dialect *d, char out[3 + CG_GEMM_MAX_B][160]) {
  const char *F = d->value_type[KILN_F32], *bufs = g->stages > 1 ? "[2]" : "";
  if (g->direct) return 0;  /* views of the dynamic shared array (direct_declare) */
  if (g->mma) {  /* rows along k: As[m][k], Bs[n][k], each fragment register one 32-bit read */
    snprintf(out[0], 160, "%s %s As[%d][%d];", d->shared_qual, d->mma_elem[g->mma], g->bm, g->bk + mma_pad(g));
    snprintf(out[1], 160, "%s %s Bs[%d][%d];", d->shared_qual, d->mma_elem[g->mma], g->bn, g->bk + mma_pad(g));
    return 2;
  }
  if (g->kgroups > 1) {  /* no views (no_views): rows of vectors, As[kk][m / 4][m % 4] */
    int n = 0, rows4 = kg_stride(g) / 4;
    for (int b = 0; b < (g->stages > 1 ? 2 : 1); b++) {
      char ix[12] = "";
      if (g->stages > 1) snprintf(ix, sizeof ix, "%d", b);
      snprintf(out[n++], 160, "%s %s As%s[%d][%d];", d->shared_qual, d->vec4_type, ix, g->bk, rows4);
      snprintf(out[n++], 160, "%s %s Bs%s[%d][%d];", d->shared_qual, d->vec4_type, ix, g->bk, rows4);
    }
    for (int q = 1; q < g->n_b; q++) snprintf(out[n++], 160, "%s %s Bs_%d[%d][%d];", d->shared_qual, d->vec4_type, q, g->bk, rows4);
    return n;
  }
  snprintf(out[0], 160, "%s %s As%s[%d][%d];", d->shared_qual, F, bufs, g->bk, g->bm + 32 / g->bk);
  snprintf(out[1], 160, "%s %s Bs%s[%d][%d];", d->shared_qual, F, bufs, g->bk, g->bn + 32 / g->bk);
  for (int q = 1; q < g->n_b; q++) snprintf(out[1 + q], 160, "%s %s Bs_%d[%d][%d];", d->shared_qual, F, q, g->bk, g->bn + 32 / g->bk);
  return 1 + g->n_b;
}

void cg_gemm_shared(const CgGemm *g, const Dialect *d, StrBuf *out) {
  KILN_ASSERT(g->splits == 1);  /* what a dialect with shared_at_module gets */
  char decl[3 + CG_GEMM_MAX_B][160];
  for (int i = 0, n = tile_decls(g, d, decl); i < n; i++) sb_printf(out, "%s\n", decl[i]);
}

/* ---- rendering ----
 * Every token that is the target's (thread and block ids, shared memory, barrier, fence,
 * atomic, cached load, fma, unroll pragma, types and literals) comes from em->d. */

static const char *thread_int(const Dialect *d) { return d->thread_int ? d->thread_int : d->thread_id; }

/* x, an int offset known >= 0, as the dialect adds it to an index (widen_index: zero-extended). */
static const char *widened(const Dialect *d, const char *x, char out[96]) {
  if (!d->widen_index) return x;
  snprintf(out, 96, d->widen_index, x);
  return out;
}

void cg_put(const CgEmit *em, const char *f, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, f);
  vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  em->put(em->r, buf);
}

void cg_close(const CgEmit *em) {
  em->indent(em->r, -1);
  cg_put(em, "}");
}

const char *cg_lit(const CgEmit *em, int64_t v) { return em->lit(em->r, v); }

/* const v<i> = digit of flat over the vars of kernel k with role `role` (outer), or over
 * the inner vars (role < 0). */
static void decompose(const CgEmit *em, const Kernel *k, const CgGemm *g, int role, const char *flat) {
  if (role < 0) em->digits(em->r, flat, k->rank, k->n_red, k->red_shape, NULL, 0, g->K);
  else em->digits(em->r, flat, 0, k->rank, k->shape, g->role, role, role == CG_ROLE_M ? g->M : role == CG_ROLE_N ? g->N : g->batch);
}

/* A vector operand's run of 4 in a bk x width tile: thread c's, at (kk, xx) .. (kk + 3, xx)
 * along k (kfast: a warp takes 8 values of xx, bk / 4 runs each, so its shared stores spread
 * over more banks than 32 runs of one row would) or (kk, xx) .. (kk, xx + 3) along x. Every
 * tile shape has bk * width = 4 * CG_GEMM_THREADS: one run a thread. */
static void vec_place(const CgEmit *em, const CgGemm *g, int width, bool kfast) {
  const char *t = thread_int(em->d);
  int q = g->bk / 4;
  KILN_ASSERT(g->bk * width == 4 * CG_GEMM_THREADS && width % 8 == 0);
  if (kfast) cg_put(em, "const int xx = %s %% 8 + (%s / %d) * 8, kk = ((%s / 8) %% %d) * 4;", t, t, 8 * q, t, q);
  else cg_put(em, "const int xx = (%s %% %d) * 4, kk = %s / %d;", t, width / 4, t, width / 4);
}

/* Load o's element offset at the vars v<i> (decompose's): base + sum coef * v. narrow: in 32-bit
 * arithmetic where every coefficient is >= 0 and the largest offset, base + sum coef * (extent - 1),
 * fits (in a double: exact up to 2^53, far past 2^31); else (or !narrow) in the index type. */
static void affine_offset(const CgEmit *em, const Kernel *k, const struct CgDirect *o, bool narrow, char *out, size_t size) {
  narrow = narrow && o->base >= 0;
  double most = (double)o->base;
  for (int v = 0; v < k->rank + k->n_red; v++) {
    narrow = narrow && o->coef[v] >= 0;
    most += (double)o->coef[v] * (double)((v < k->rank ? k->shape[v] : k->red_shape[v - k->rank]) - 1);
  }
  narrow = narrow && most <= (double)INT32_MAX;
  const char *T = narrow ? "int" : em->d->index_type;
  int n = snprintf(out, size, "%s", narrow ? "0" : cg_lit(em, o->base));
  if (narrow && o->base) n += snprintf(out + n, size - (size_t)n, " + %lld", (long long)o->base);
  for (int v = 0; v < k->rank + k->n_red && n > 0 && (size_t)n < size; v++)
    if (o->coef[v] && narrow) n += snprintf(out + n, size - (size_t)n, " + (%s)v%d * %lld", T, v, (long long)o->coef[v]);
    else if (o->coef[v]) n += snprintf(out + n, size - (size_t)n, " + (%s)v%d * %s", T, v, cg_lit(em, o->coef[v]));
  KILN_ASSERT(n > 0 && (size_t)n + 1 < size);
}

/* A vector operand's run of the tile at kb into pf[0..3] (zeros outside the problem: a run
 * is wholly in or out, runs_of). */
static void fetch_vec(const CgEmit *em, const Kernel *k, const CgGemm *g, const struct CgDirect *o, int role, const char *pf,
                      int width) {
  const Dialect *d = em->d;
  const char *I = d->index_type, *V = d->vec4_type;
  int buf = em->param_of(em->r, o->stage);
  KILN_ASSERT(buf >= 0);
  cg_open(em, "{");
  vec_place(em, g, width, o->kfast);
  char wx[96], wk[96];
  cg_put(em, "const %s mq = %s + %s, kq = kb + %s;", I, role == CG_ROLE_M ? "tm0" : "tn0", widened(d, "xx", wx),
         widened(d, "kk", wk));
  cg_put(em, "%s[0] = %s[1] = %s[2] = %s[3] = 0.0%s;", pf, pf, pf, pf, d->f32_suffix);
  cg_open(em, "if (mq < %s && kq < %s) {", cg_lit(em, role == CG_ROLE_M ? g->M : g->N), cg_lit(em, g->K));
  em->push(em->r);
  decompose(em, k, g, role, "mq");
  decompose(em, k, g, -1, "kq");
  char off[960];
  affine_offset(em, k, o, true, off, sizeof off);
  cg_put(em, "const %s v = *(const %s *)(b%d + (%s));", V, V, buf, off);
  for (int j = 0; j < 4; j++) cg_put(em, "%s[%d] = v%s;", pf, j, d->vec4_lane[j]);
  em->pop(em->r);
  cg_close(em);
  cg_close(em);
}

/* Reads one factor's share of the BK x width tile starting at reduction point kb into
 * registers pf[l] (zero outside the problem), so the reads of the next tile are in
 * flight while the current one is multiplied. vec: the factor's offsets when it is read 4
 * elements a load (fetch_vec), else NULL. */
static void fetch_tile(const CgEmit *em, const Kernel *k, const CgGemm *g, const Expr *x, int role, const char *pf,
                       int width, bool kfast, const struct CgDirect *vec) {
  const Dialect *d = em->d;
  const char *base = role == CG_ROLE_M ? "tm0" : "tn0";
  int64_t limit = role == CG_ROLE_M ? g->M : g->N;
  if (vec) {
    fetch_vec(em, k, g, vec, role, pf, width);
    return;
  }
  cg_put(em, "%s", d->unroll);
  cg_open(em, "for (int l = 0; l < %d; l++) {", g->bk * width / CG_GEMM_THREADS);
  cg_put(em, "const int e = %s + l * %d;", thread_int(d), CG_GEMM_THREADS);
  if (kfast) cg_put(em, "const int kk = e %% %d, xx = e / %d;", g->bk, g->bk);
  else cg_put(em, "const int xx = e %% %d, kk = e / %d;", width, width);
  char wx[96], wk[96];
  cg_put(em, "const %s mq = %s + %s, kq = kb + %s;", d->index_type, base, widened(d, "xx", wx), widened(d, "kk", wk));
  cg_put(em, "%s[l] = 0.0%s;", pf, d->f32_suffix);
  cg_open(em, "if (mq < %s && kq < %s) {", cg_lit(em, limit), cg_lit(em, g->K));
  em->push(em->r);
  decompose(em, k, g, role, "mq");
  decompose(em, k, g, -1, "kq");
  char v[256];
  em->emit(em->r, x, v, sizeof v);
  cg_put(em, "%s[l] = %s;", pf, v);
  em->pop(em->r);
  cg_close(em);
  cg_close(em);
}

/* Registers pf[l] into the shared tile sh[kk][xx]. vec: pf is the run vec_place puts; a run
 * along x into the vector rows of k groups is one 16-byte store. */
static void stash_tile(const CgEmit *em, const CgGemm *g, const char *pf, const char *sh, int width, bool kfast, bool round,
                       bool vec) {
  if (vec) {
    const char *V = em->d->vec4_type;
    cg_open(em, "{");
    vec_place(em, g, width, kfast);
    if (kfast)
      for (int j = 0; j < 4; j++) cg_put(em, "%s[kk + %d][xx] = %s[%d];", sh, j, pf, j);
    else if (g->kgroups > 1)
      cg_put(em, "*(%s *)&%s[kk][xx] = %s{ %s[0], %s[1], %s[2], %s[3] };", V, sh, V, pf, pf, pf, pf);
    else
      for (int j = 0; j < 4; j++) cg_put(em, "%s[kk][xx + %d] = %s[%d];", sh, j, pf, j);
    cg_close(em);
    return;
  }
  cg_put(em, "%s", em->d->unroll);
  cg_open(em, "for (int l = 0; l < %d; l++) {", g->bk * width / CG_GEMM_THREADS);
  cg_put(em, "const int e = %s + l * %d;", thread_int(em->d), CG_GEMM_THREADS);
  if (g->mma) {  /* rows along k, each value in the mma's operand type */
    char x[40], v[96];  /* pf: at most 31 characters (b_of's names) */
    if (kfast) cg_put(em, "const int kk = e %% %d, xx = e / %d;", g->bk, g->bk);
    else cg_put(em, "const int xx = e %% %d, kk = e / %d;", width, width);
    snprintf(x, sizeof x, "%s[l]", pf);
    snprintf(v, sizeof v, (round ? em->d->mma_round : em->d->mma_stash)[g->mma], x);
    cg_put(em, "%s[xx][kk] = %s;", sh, v);
  } else if (g->kgroups > 1 && em->d->no_views) {  /* rows of vectors: element x of row kk is [kk][x / 4][x % 4] */
    if (kfast) cg_put(em, "const int kk = e %% %d, xx = e / %d;", g->bk, g->bk);
    else cg_put(em, "const int kk = e / %d, xx = e %% %d;", width, width);
    cg_put(em, "%s[kk][xx >> 2][xx & 3] = %s[l];", sh, pf);
  } else if (kfast) cg_put(em, "%s[e %% %d][e / %d] = %s[l];", sh, g->bk, g->bk, pf);
  else cg_put(em, "%s[e / %d][e %% %d] = %s[l];", sh, width, width, pf);
  cg_close(em);
}

/* The registers of read-ahead stage s: pfa<s> and pfb<s> (one stage: pfa and pfb). */
static void stage_regs(const CgGemm *g, int s, char pa[16], char pb[16]) {
  if (g->stages == 1) s = -1;
  snprintf(pa, 16, s < 0 ? "pfa" : "pfa%d", s);
  snprintf(pb, 16, s < 0 ? "pfb" : "pfb%d", s);
}

/* Names of sibling q's accumulators, registers and tiles. q 0 keeps the one-B names (acc,
 * cacc, pfb, Bs); with siblings each accumulator carries its stage (the epilogue's items name
 * them so: acc%d) and each further B's registers and tile carry q. */
static void acc_of(const Kernel *k, const CgGemm *g, int q, const char *base, char out[32]) {
  if (g->n_b == 1) snprintf(out, 32, "%s", base);
  else snprintf(out, 32, "%s%d", base, k->items[g->acc_items[q]].stage);
}

static void b_of(int q, const char *base, char out[32]) {
  if (q == 0) snprintf(out, 32, "%s", base);
  else snprintf(out, 32, "%s_%d", base, q);
}

/* What a factor's registers hold: x, or the f32 value under x's rounding (CgGemm.a_round). */
static const Expr *fetched(const Expr *x, bool round) { return round ? x->args[0]->args[0] : x; }

/* Both factors' shares of the k-tile at kb into register stage s (every B's, siblings). */
static void fetch_both(const CgEmit *em, const Kernel *k, const CgGemm *g, const char *kb, int s) {
  char pa[16], pb[16];
  stage_regs(g, s, pa, pb);
  cg_open(em, "{ const %s kb = %s;", em->d->index_type, kb);
  if (!g->head)  /* a headed tile's A is in Ph already */
    fetch_tile(em, k, g, fetched(g->a, g->a_round), CG_ROLE_M, pa, g->bm, g->a_kfast, g->a_vec ? &g->va : NULL);
  for (int q = 0; q < g->n_b; q++) {
    char pq[32];
    b_of(q, pb, pq);
    fetch_tile(em, k, g, fetched(g->bs[q], q == 0 && g->b_round), CG_ROLE_N, pq, g->bn, g->b_kfast,
               q == 0 && g->b_vec ? &g->vb : NULL);
  }
  cg_close(em);
}

/* for (i < tm) for (j < tn) stmt, both unrolled: one statement over the thread's sub-tile. */
static void each_output(const CgEmit *em, const CgGemm *g, const char *stmt) {
  cg_put(em, "%s", em->d->unroll);
  cg_put(em, "for (int i = 0; i < %d; i++)", g->tm);
  cg_put(em, "%s", em->d->unroll);
  cg_put(em, "  for (int j = 0; j < %d; j++) %s", g->tn, stmt);
}

void cg_arrival_lines(const Dialect *d, const char *slot, int blocks, int one_fence, char out[CG_ARRIVAL_LINES][256]) {
  char one[16], add[128];
  snprintf(one, sizeof one, "1%s", d->uint_suffix);
  snprintf(add, sizeof add, d->atomic_add, slot, one);
  if (one_fence == 2 && d->atomic_add_acq_rel) {
    /* the count itself releases what the block wrote (ordered before it by the barrier, as
     * above) and acquires what the blocks before it released: no fence on either side */
    snprintf(add, sizeof add, d->atomic_add_acq_rel, slot, one);
    snprintf(out[0], 256, "%s", d->barrier);
    snprintf(out[1], 256, "if (%s == 0) {", d->thread_id);
    snprintf(out[2], 256, "  last = %s == %d%s;", add, blocks - 1, d->uint_suffix);
    snprintf(out[3], 256, "}");
    snprintf(out[4], 256, "%s", d->barrier);
    snprintf(out[5], 256, "if (!last) continue;");
    return;
  }
  if (one_fence) {
    /* the barrier orders every thread's partial before the first thread's fence, whose release
     * covers what the block wrote (cumulativity: the pattern of cooperative groups' grid barrier);
     * its second fence, acquiring the others' partials, is ordered before the block's reads of
     * them by the barrier after. Every other thread waits at a barrier, not at a fence. */
    snprintf(out[0], 256, "%s", d->barrier);
    snprintf(out[1], 256, "if (%s == 0) {", d->thread_id);
    snprintf(out[2], 256, "  %s last = %s == %d%s; %s", d->fence, add, blocks - 1, d->uint_suffix, d->fence);
    snprintf(out[3], 256, "}");
    snprintf(out[4], 256, "%s", d->barrier);
    snprintf(out[5], 256, "if (!last) continue;");
    return;
  }
  snprintf(out[0], 256, "%s", d->fence);
  snprintf(out[1], 256, "%s", d->barrier);
  snprintf(out[2], 256, "if (%s == 0) last = %s == %d%s;", d->thread_id, add, blocks - 1, d->uint_suffix);
  snprintf(out[3], 256, "%s", d->barrier);
  snprintf(out[4], 256, "if (!last) continue;");
  snprintf(out[5], 256, "%s", d->fence);
}

/* Where output (i, j) of a thread's sub-tile lies in the tile: its row and column as
 * expressions. The FMA tiles' threads stride the tile (rows ty + i * BM/TM, columns
 * tx + j * BN/TN); an mma tile's thread holds its warp's accumulator fragments, i = 2 mi + h
 * and j = 2 ni + e for 16 x 8 mma tile (mi, ni), row (lane / 4) + 8 h, column 2 (lane % 4) + e. */
static void out_place(const CgGemm *g, char row[64], char col[64]) {
  if (g->wgmma) {  /* wgmma's order: value j of n-tile j / 4 of 8 columns, rows + 8 at (j & 2) */
    snprintf(row, 64, "wm0 + ((j >> 1) & 1) * 8 + (lane >> 2)");
    snprintf(col, 64, "(j >> 2) * 8 + (j & 1) + (lane & 3) * 2");
  } else if (g->mma) {
    snprintf(row, 64, "wm0 + (i >> 1) * 16 + (i & 1) * 8 + (lane >> 2)");
    snprintf(col, 64, "wn0 + (j >> 1) * 8 + (j & 1) + (lane & 3) * 2");
  } else {
    snprintf(row, 64, "ty + i * %d", g->bm / g->tm);
    snprintf(col, 64, "tx + j * %d", g->bn / g->tn);
  }
}

/* The same as an offset in a row-major BM x BN tile (split-K's partial tiles). */
static void tile_pos(const CgGemm *g, char out[160]) {
  char r[64], c[64];
  out_place(g, r, c);
  snprintf(out, 160, "(%s) * %d + %s", r, g->bn, c);
}

/* acc[i][j] = the sum over the tile's spans q of one partial each: for every output of the
 * sub-tile, s starts at 0 and `q_loop` (a loop over q adding to s, after an unroll pragma when
 * unroll_q) runs. Both split-K forms add their partials this way, in span order. */
static void sum_partials(const CgEmit *em, const CgGemm *g, const char *q_loop, bool unroll_q, const char *acc) {
  const Dialect *d = em->d;
  cg_put(em, "%s", d->unroll);
  cg_open(em, "for (int i = 0; i < %d; i++) {", g->tm);
  cg_put(em, "%s", d->unroll);
  cg_open(em, "for (int j = 0; j < %d; j++) {", g->tn);
  cg_put(em, "%s s = 0.0%s;", d->value_type[KILN_F32], d->f32_suffix);
  if (unroll_q) cg_put(em, "%s", d->unroll);
  cg_put(em, "%s", q_loop);
  cg_put(em, "%s[i][j] = s;", acc);
  cg_close(em);
  cg_close(em);
}

/* Split-K: this block's partial tile (each sibling's) into its span's place. */
static void store_partials(const CgEmit *em, const Kernel *k, const CgGemm *g, int64_t tiles) {
  const char *F = em->d->value_type[KILN_F32];
  int bmn = g->bm * g->bn, S = g->splits;
  int64_t each = (int64_t)S * tiles * bmn;  /* a sibling's partial tiles */
  char pos[160];
  tile_pos(g, pos);
  cg_put(em, "%s *part = kiln_part%d + (w %% %d) * %s + tile * %d;", F, k->id, S, cg_lit(em, tiles * bmn), bmn);
  for (int b = 0; b < g->n_b; b++) {
    char acc[32], st[320];
    acc_of(k, g, b, "acc", acc);
    if (b) snprintf(st, sizeof st, "part[%s + %s] = %s[i][j];", cg_lit(em, b * each), pos, acc);
    else snprintf(st, sizeof st, "part[%s] = %s[i][j];", pos, acc);
    each_output(em, g, st);
  }
}

/* Split-K: sibling b's partial of span q (a var of the loop) at this thread's output, read through L2,
 * from tp (the tile's partials). */
static void partial_load(const CgEmit *em, const CgGemm *g, int b, int64_t tiles, char *ld, size_t n) {
  int bmn = g->bm * g->bn;
  int64_t each = (int64_t)g->splits * tiles * bmn;
  char pos[160], addr[320];
  tile_pos(g, pos);
  if (b) snprintf(addr, sizeof addr, "tp + %s + q * %s + %s", cg_lit(em, b * each), cg_lit(em, tiles * bmn), pos);
  else snprintf(addr, sizeof addr, "tp + q * %s + %s", cg_lit(em, tiles * bmn), pos);
  snprintf(ld, n, em->d->cached_load, addr);
}

/* Split-K by flags (CgGemm.split_flags): each span but the last stores its partial tile and releases
 * it with its flag (kiln_sf, a tile's S in span order) and goes on; the last span, whose blocks come
 * after its tile's others (each block one span: in the order blocks start, it waits only for blocks
 * started before it), moves its own flag on, waits for the others' flags to reach it, and adds their
 * partials and then its own from registers: span order, the bits of the count's form. */
static void split_flags_combine(const CgEmit *em, const Kernel *k, const CgGemm *g, int64_t tiles) {
  const Dialect *d = em->d;
  const char *F = d->value_type[KILN_F32];
  int ki = k->id, bmn = g->bm * g->bn, S = g->splits;
  char flags[64], mine[32], n[32], step[200];
  snprintf(flags, sizeof flags, "kiln_sf%d + tile * %d", ki, S);
  cg_open(em, "if (w %% %d != %d) {", S, S - 1);
  store_partials(em, k, g, tiles);
  snprintf(mine, sizeof mine, "(unsigned)(w %% %d)", S);
  snprintf(step, sizeof step, d->flag_done, flags, mine);
  cg_put(em, "%s", step);
  cg_put(em, "continue;");
  cg_close(em);
  snprintf(mine, sizeof mine, "%du", S - 1);
  snprintf(n, sizeof n, "%du", S - 1);
  snprintf(step, sizeof step, d->band_meet, flags, mine, n);
  cg_put(em, "%s", step);
  cg_put(em, "const %s *tp = kiln_part%d + tile * %d;", F, ki, bmn);
  for (int b = 0; b < g->n_b; b++) {
    char ld[360], loop[480], acc[32];
    acc_of(k, g, b, "acc", acc);
    partial_load(em, g, b, tiles, ld, sizeof ld);
    snprintf(loop, sizeof loop, "for (int q = 0; q < %d; q++) s += %s;  s += %s[i][j];  /* its own, last */", S - 1, ld, acc);
    sum_partials(em, g, loop, false, acc);
  }
}

/* Split-K: this block's partial tile out; the block that arrives last at the tile sums every
 * span's partial in span order into acc (the others go on to their next tile). */
static void split_combine(const CgEmit *em, const Kernel *k, const CgGemm *g, int64_t tiles) {
  const Dialect *d = em->d;
  const char *F = d->value_type[KILN_F32];
  int ki = k->id, bmn = g->bm * g->bn, S = g->splits;
  if (g->split_flags) {
    split_flags_combine(em, k, g, tiles);
    return;
  }
  store_partials(em, k, g, tiles);
  char slot[48], meet[CG_ARRIVAL_LINES][256];
  snprintf(slot, sizeof slot, "kiln_arrived%d[tile]", ki);
  cg_arrival_lines(d, slot, S, g->one_fence, meet);
  for (int i = 0; i < CG_ARRIVAL_LINES; i++) cg_put(em, "%s", meet[i]);
  cg_put(em, "const %s *tp = kiln_part%d + tile * %d;", F, ki, bmn);
  for (int b = 0; b < g->n_b; b++) {
    char ld[360], loop[420], acc[32];
    acc_of(k, g, b, "acc", acc);
    partial_load(em, g, b, tiles, ld, sizeof ld);
    snprintf(loop, sizeof loop, "for (int q = 0; q < %d; q++) s += %s;", S, ld);
    sum_partials(em, g, loop, false, acc);
  }
  cg_put(em, "if (%s == 0) kiln_arrived%d[tile] = 0%s;", d->thread_id, ki, d->uint_suffix);
}

/* Split-K in a cluster (CgGemm.cluster): the tile's spans are the cluster's blocks, rank =
 * span. Each block's partial tile goes to its shared kiln_cp; after a cluster barrier the
 * rank-0 block adds every rank's partial in rank order (deterministic, as the global split),
 * and a second barrier keeps the others' shared memory until it has read it. Only rank 0
 * runs the epilogue. */
static void cluster_combine(const CgEmit *em, const CgGemm *g) {
  const Dialect *d = em->d;
  int S = g->splits;
  char st[224], pos[160];
  tile_pos(g, pos);
  snprintf(st, sizeof st, "kiln_cp[%s] = acc[i][j];", pos);
  each_output(em, g, st);
  cg_put(em, "%s", d->cluster_sync);
  cg_open(em, "if (w %% %d == 0) {", S);
  char addr[200], ld[300], loop[400];
  snprintf(addr, sizeof addr, "&kiln_cp[%s]", pos);
  snprintf(ld, sizeof ld, d->cluster_load, addr, "q");
  snprintf(loop, sizeof loop, "for (unsigned int q = 0; q < %du; q++) s += %s;", S, ld);
  sum_partials(em, g, loop, true, "acc");
  cg_close(em);
  cg_put(em, "%s", d->cluster_sync);
  cg_put(em, "if (w %% %d != 0) continue;", S);
}

/* ---- k groups (CgGemm.kgroups > 1) ----
 * The tiles live in shared arrays of 16-byte vectors (so a row of 4 floats is one vector
 * load), viewed as float rows padded by 4 floats: As[kk][m], Bs[kk][n]. Group kg of the
 * block's kgroups takes k-points kg * bk/kgroups .. of each k-tile; within a group thread
 * (cx, cy) multiplies rows cy*4.. by columns cx*4... */

static void kg_declare(const CgEmit *em, const CgGemm *g) {
  const Dialect *d = em->d;
  const char *F = d->value_type[KILN_F32], *V = d->vec4_type;
  int st = kg_stride(g), n = g->bk * st / 4, bufs = g->stages > 1 ? 2 : 1;
  if (d->no_views) {  /* the vector rows are declared at module scope (tile_decls) */
    cg_put(em, "const int kg = %s / %d, cx = (%s %% %d) %% %d, cy = (%s %% %d) / %d;", thread_int(d), KG_THREADS, thread_int(d),
        KG_THREADS, g->bn / KG_TN, thread_int(d), KG_THREADS, g->bn / KG_TN);
    return;
  }
  if (g->head) {  /* the tile's rows Ph[k][m] (CgGemm.head), A's k-tiles read in place; As names it for kg_sum */
    cg_put(em, "%s %s Phv[%lld], Bsv[%d];", d->shared_qual, V, (long long)(head_rows(g) * st / 4), n);
    cg_put(em, "%s (*Ph)[%d] = (%s (*)[%d])Phv, (*Bs)[%d] = (%s (*)[%d])Bsv, (*As)[%d] = Ph;", F, st, F, st, st, F, st, st);
  } else if (g->copies) {  /* stages Ac[s][row][col], Bc[s][row][col]; As, Bs stage 0's, for kg_sum */
    KILN_ASSERT(g->bk == g->bm && g->bk == g->bn);
    cg_put(em, "%s %s Kcv[%d];", d->shared_qual, V, 2 * g->copies * n);
    cg_put(em, "%s (*Ac)[%d][%d] = (%s (*)[%d][%d])Kcv, (*Bc)[%d][%d] = (%s (*)[%d][%d])(Kcv + %d);", F, g->bk, st, F, g->bk, st,
        g->bk, st, F, g->bk, st, g->copies * n);
    cg_put(em, "%s (*As)[%d] = Ac[0], (*Bs)[%d] = Bc[0];", F, st, st);
  } else if (bufs == 1) {
    cg_put(em, "%s %s Asv[%d], Bsv[%d];", d->shared_qual, V, n, n);
    cg_put(em, "%s (*As)[%d] = (%s (*)[%d])Asv, (*Bs)[%d] = (%s (*)[%d])Bsv;", F, st, F, st, st, F, st);
  } else {
    cg_put(em, "%s %s Asv[%d], Bsv[%d];", d->shared_qual, V, bufs * n, bufs * n);
    for (int b = 0; b < bufs; b++)
      cg_put(em, "%s (*As%d)[%d] = (%s (*)[%d])(Asv + %d), (*Bs%d)[%d] = (%s (*)[%d])(Bsv + %d);", F, b, st, F, st, b * n,
          b, st, F, st, b * n);
  }
  for (int q = 1; q < g->n_b; q++)  /* siblings' B tiles (one buffer: siblings read ahead one stage) */
    cg_put(em, "%s %s Bsv_%d[%d]; %s (*Bs_%d)[%d] = (%s (*)[%d])Bsv_%d;", d->shared_qual, V, q, n, F, q, st, F, st, q);
  cg_put(em, "const int kg = %s / %d, cx = (%s %% %d) %% %d, cy = (%s %% %d) / %d;", d->thread_id, KG_THREADS, d->thread_id,
      KG_THREADS, g->bn / KG_TN, d->thread_id, KG_THREADS, g->bn / KG_TN);
}

static void kg_multiply(const CgEmit *em, const CgGemm *g, const char *As, const char *Bs, const char *cacc) {
  const Dialect *d = em->d;
  const char *V = d->vec4_type;
  int per = g->bk / g->kgroups;
  cg_put(em, "%s", d->unroll);
  cg_open(em, "for (int kq = 0; kq < %d; kq++) {", per);
  cg_put(em, "const int kk = kg * %d + kq;", per);
  if (d->no_views) cg_put(em, "const %s a4 = %s[kk][cy], b4 = %s[kk][cx];", V, As, Bs);  /* KG_TM = KG_TN = 4 */
  else
    cg_put(em, "const %s a4 = *(const %s *)&%s[kk][cy * %d], b4 = *(const %s *)&%s[kk][cx * %d];", V, V, As, KG_TM, V, Bs,
        KG_TN);
  cg_put(em, "const %s ra[4] = { a4%s, a4%s, a4%s, a4%s }, rb[4] = { b4%s, b4%s, b4%s, b4%s };", d->value_type[KILN_F32],
      d->vec4_lane[0], d->vec4_lane[1], d->vec4_lane[2], d->vec4_lane[3], d->vec4_lane[0], d->vec4_lane[1],
      d->vec4_lane[2], d->vec4_lane[3]);
  char fma[160], at[48];
  snprintf(at, sizeof at, "%s[i][j]", cacc);
  snprintf(fma, sizeof fma, d->fma, "ra[i]", "rb[j]", at);
  cg_put(em, "%s", d->unroll);
  cg_put(em, "for (int i = 0; i < %d; i++)", KG_TM);
  cg_put(em, "%s", d->unroll);
  cg_put(em, "  for (int j = 0; j < %d; j++) %s = %s;", KG_TN, at, fma);
  cg_close(em);
}

/* ---- tensor cores (CgGemm.mma) ----
 * Warp w of the block's 8 takes rows wm0 .. wm0 + bm/2 and columns wn0 .. wn0 + bn/4 of the tile,
 * as MI x NI mma tiles of 16 x 8. Per k step (16 for 16-bit operands, 8 for TF32), each mma tile
 * row's A fragment and each column's B fragment are read once from shared memory (a register
 * holds a pair of 16-bit values along k, or one TF32 value) and every pair multiplied. */

/* Every mma of the warp's grid: A fragment row i times B fragment column j into accumulator
 * values acc[2i .. 2i+1][2j .. 2j+1] (mma's c0 c1 / c2 c3: rows lane / 4 and + 8). */
static void mma_products(const CgEmit *em, const CgGemm *g) {
  const Dialect *d = em->d;
  cg_put(em, "%s", d->unroll);
  cg_put(em, "for (int i = 0; i < %d; i++)", g->tm / 2);
  cg_put(em, "%s", d->unroll);
  cg_put(em, "  for (int j = 0; j < %d; j++)", g->tn / 2);
  cg_put(em, "    %s(acc[2 * i][2 * j], acc[2 * i][2 * j + 1], acc[2 * i + 1][2 * j], acc[2 * i + 1][2 * j + 1], fa[i][0], "
             "fa[i][1], fa[i][2], fa[i][3], fb[j][0], fb[j][1]);", d->mma[g->mma]);
}
static void mma_multiply(const CgEmit *em, const CgGemm *g) {
  const Dialect *d = em->d;
  bool wide = g->mma != CG_MMA_TF32;            /* 16-bit operands: two k values a register */
  int kstep = wide ? 16 : 8, kh = kstep / 2, per = wide ? 2 : 1, mi = g->tm / 2, ni = g->tn / 2;
  const char *rd = wide ? "*(const unsigned *)&%s[%s][%s]" : "%s[%s][%s]";
  char at[8][48], r[4][140];
  cg_put(em, "%s", d->unroll);
  cg_open(em, "for (int ks = 0; ks < %d; ks += %d) {", g->bk, kstep);
  cg_put(em, "unsigned fa[%d][4], fb[%d][2];", mi, ni);
  cg_put(em, "const int fk = ks + (lane & 3) * %d;", per);
  cg_put(em, "%s", d->unroll);
  cg_open(em, "for (int i = 0; i < %d; i++) {", mi);
  cg_put(em, "const int fr = wm0 + i * 16 + (lane >> 2);");
  snprintf(at[0], 48, "fr"), snprintf(at[1], 48, "fr + 8"), snprintf(at[2], 48, "fk"), snprintf(at[3], 48, "fk + %d", kh);
  for (int q = 0; q < 4; q++) snprintf(r[q], sizeof r[q], rd, "As", at[q & 1], at[2 + (q >> 1)]);
  cg_put(em, "fa[i][0] = %s; fa[i][1] = %s; fa[i][2] = %s; fa[i][3] = %s;", r[0], r[1], r[2], r[3]);
  cg_close(em);
  cg_put(em, "%s", d->unroll);
  cg_open(em, "for (int j = 0; j < %d; j++) {", ni);
  cg_put(em, "const int fc = wn0 + j * 8 + (lane >> 2);");
  snprintf(r[0], sizeof r[0], rd, "Bs", "fc", at[2]);
  snprintf(r[1], sizeof r[1], rd, "Bs", "fc", at[3]);
  cg_put(em, "fb[j][0] = %s; fb[j][1] = %s;", r[0], r[1]);
  cg_close(em);
  mma_products(em, g);
  cg_close(em);
}

/* ---- mma tiles with direct operands (CgGemm.direct) ----
 * Two stages of shared tiles: while the warps multiply k-tile t from stage t & 1, the copies of
 * k-tile t + 1 into the other stage are in flight (16 bytes each, no registers on the way).
 * An operand stored along k keeps rows of k (x by bk + 8), one stored along its own x rows of x
 * (bk by x + 8); the 16-byte pad puts the 8 rows ldmatrix reads at once in distinct banks. */

/* Operand o's copies of the k-tile at kb (an index expression) into shared stage st of sh: 16 bytes
 * a copy, 8 values of a 16-bit mma operand or 4 of an f32 one (CgGemm.copies). */
static void direct_issue(const CgEmit *em, const Kernel *k, const CgGemm *g, const struct CgDirect *o, int role,
                         const char *sh, const char *kb, const char *st) {
  const Dialect *d = em->d;
  const char *I = d->index_type;
  int run = g->mma ? 8 : 4, width = role == CG_ROLE_M ? g->bm : g->bn, chunks = width * g->bk / run;
  int per = (chunks + CG_GEMM_THREADS - 1) / CG_GEMM_THREADS, buf = em->param_of(em->r, o->stage);
  KILN_ASSERT(buf >= 0);
  cg_put(em, "%s", d->unroll);
  cg_open(em, "for (int l = 0; l < %d; l++) {", per);
  cg_put(em, "const int c = %s + l * %d;", thread_int(d), CG_GEMM_THREADS);
  if (chunks % CG_GEMM_THREADS) cg_put(em, "if (c >= %d) break;", chunks);
  if (o->kfast) cg_put(em, "const int xx = c / %d, kk = (c %% %d) * %d;", g->bk / run, g->bk / run, run);
  else cg_put(em, "const int kk = c / %d, xx = (c %% %d) * %d;", width / run, width / run, run);
  char wx[96], wk[96];
  cg_put(em, "const %s mq = %s + %s, kq = %s + %s;", I, role == CG_ROLE_M ? "tm0" : "tn0", widened(d, "xx", wx), kb,
         widened(d, "kk", wk));
  cg_put(em, "const bool in = mq < %s && kq < %s;", cg_lit(em, role == CG_ROLE_M ? g->M : g->N), cg_lit(em, g->K));
  cg_put(em, "const %s *src = b%d;", d->store_type[g->mma == CG_MMA_BF16 ? KILN_BF16 : g->mma ? KILN_F16 : KILN_F32], buf);
  cg_open(em, "if (in) {");
  em->push(em->r);
  decompose(em, k, g, role, "mq");
  decompose(em, k, g, -1, "kq");
  char off[960];
  affine_offset(em, k, o, !g->mma, off, sizeof off);  /* mma tiles: index-type math, as raced */
  cg_put(em, "src = b%d + (%s);", buf, off);
  em->pop(em->r);
  cg_close(em);
  if (g->wgmma && o->kfast)  /* row xx's chunk c % 8 at chunk (c % 8) ^ (xx % 8) */
    cg_put(em, "%s(%s + (%s) * %d + %d + xx * 128 + (((c & 7) ^ (xx & 7)) << 4), src, in);", d->cp_async, sh, st,
           (g->bm + g->bn) * 128, role == CG_ROLE_N ? g->bm * 128 : 0);
  else if (g->wgmma)  /* panel xx / 64, its row kk, chunk (xx % 64) / 8 at that ^ (kk % 8) */
    cg_put(em, "%s(%s + (%s) * %d + %d + (xx >> 6) * %d + kk * 128 + ((((xx & 63) >> 3) ^ (kk & 7)) << 4), src, in);", d->cp_async,
           sh, st, (g->bm + g->bn) * 128, role == CG_ROLE_N ? g->bm * 128 : 0, WG_BK * 128);
  else cg_put(em, "%s(&%s[%s][%s][%s], src, in);", d->cp_async, sh, st, o->kfast ? "xx" : "kk", o->kfast ? "kk" : "xx");
  cg_close(em);
}

/* The warps' fragments of k-tile stage st by ldmatrix, and their mma's. */
static void direct_multiply(const CgEmit *em, const CgGemm *g, const char *st) {
  const Dialect *d = em->d;
  int mi = g->tm / 2, ni = g->tn / 2;
  cg_put(em, "%s", d->unroll);
  cg_open(em, "for (int ks = 0; ks < %d; ks += 16) {", g->bk);
  cg_put(em, "unsigned fa[%d][4], fb[%d][2];", mi, ni);
  cg_put(em, "%s", d->unroll);
  cg_open(em, "for (int i = 0; i < %d; i++) {", mi);
  if (g->da.kfast)
    cg_put(em, "%s(fa[i][0], fa[i][1], fa[i][2], fa[i][3], &As[%s][wm0 + i * 16 + (lane & 15)][ks + (lane >> 4) * 8]);",
           d->ldmatrix[2], st);
  else
    cg_put(em, "%s(fa[i][0], fa[i][1], fa[i][2], fa[i][3], &As[%s][ks + (lane & 7) + (lane >> 4) * 8][wm0 + i * 16 + ((lane >> 3) & 1) * 8]);",
           d->ldmatrix[3], st);
  cg_close(em);
  if (ni == 1) {  /* one 16 x 8 tile a warp (32 x 32 tiles): two matrices */
    cg_put(em, "unsigned u2, u3;");
    if (g->db.kfast)
      cg_put(em, "%s(fb[0][0], fb[0][1], u2, u3, &Bs[%s][wn0 + (lane & 7)][ks + ((lane >> 3) & 1) * 8]);", d->ldmatrix[0], st);
    else cg_put(em, "%s(fb[0][0], fb[0][1], u2, u3, &Bs[%s][ks + (lane & 7) + ((lane >> 3) & 1) * 8][wn0]);", d->ldmatrix[1], st);
  } else {
    cg_put(em, "%s", d->unroll);
    cg_open(em, "for (int j = 0; j < %d; j += 2) {", ni);
    if (g->db.kfast)
      cg_put(em, "%s(fb[j][0], fb[j][1], fb[j + 1][0], fb[j + 1][1], &Bs[%s][wn0 + j * 8 + (lane & 7) + (lane >> 4) * 8][ks + ((lane >> 3) & 1) * 8]);",
             d->ldmatrix[2], st);
    else
      cg_put(em, "%s(fb[j][0], fb[j][1], fb[j + 1][0], fb[j + 1][1], &Bs[%s][ks + (lane & 7) + ((lane >> 3) & 1) * 8][wn0 + j * 8 + (lane >> 4) * 8]);",
             d->ldmatrix[3], st);
    cg_close(em);
  }
  mma_products(em, g);
  cg_close(em);
}

/* An f32 k-group tile's products on stage st (CgGemm.copies): group kg takes points kg * per ..
 * + per - 1 of the k-tile, four at a time; a read along k gives one row's (or column's) 4 points,
 * one along x 4 rows' (columns') one point. Each accumulator adds its products in k order, as
 * kg_multiply does. */
static void copy_multiply(const CgEmit *em, const CgGemm *g, const char *st) {
  const Dialect *d = em->d;
  const char *F = d->value_type[KILN_F32], *V = d->vec4_type;
  int per = g->bk / g->kgroups;
  KILN_ASSERT(per % 4 == 0 && KG_TM == 4 && KG_TN == 4);
  cg_put(em, "%s", d->unroll);
  cg_open(em, "for (int kh = 0; kh < %d; kh++) {", per / 4);
  cg_put(em, "const int k4 = kg * %d + kh * 4;", per);
  cg_put(em, "%s fa[4][4], fb[4][4];", F);  /* [point][row], [point][column] */
  for (int op = 0; op < 2; op++) {
    bool kfast = op ? g->vb.kfast : g->va.kfast;
    const char *sh = op ? "Bc" : "Ac", *f = op ? "fb" : "fa", *c = op ? "cx" : "cy";
    cg_put(em, "%s", d->unroll);
    cg_open(em, "for (int q = 0; q < 4; q++) {");
    if (kfast) {
      cg_put(em, "const %s v = *(const %s *)&%s[%s][%s + %d * q][k4];", V, V, sh, st, c, g->bm / KG_TM);
      for (int l = 0; l < 4; l++) cg_put(em, "%s[%d][q] = v%s;", f, l, d->vec4_lane[l]);
    } else {
      cg_put(em, "const %s v = *(const %s *)&%s[%s][k4 + q][%s * 4];", V, V, sh, st, c);
      for (int l = 0; l < 4; l++) cg_put(em, "%s[q][%d] = v%s;", f, l, d->vec4_lane[l]);
    }
    cg_close(em);
  }
  char fma[160];
  snprintf(fma, sizeof fma, d->fma, "fa[q][i]", "fb[q][j]", "cacc[i][j]");
  cg_put(em, "%s", d->unroll);
  cg_put(em, "for (int q = 0; q < 4; q++)");
  cg_put(em, "%s", d->unroll);
  cg_put(em, "  for (int i = 0; i < 4; i++)");
  cg_put(em, "%s", d->unroll);
  cg_put(em, "    for (int j = 0; j < 4; j++) cacc[i][j] = %s;", fma);
  cg_close(em);
}

/* The stages of a direct tile as views of the dynamic shared array: As[stage][row][col]. */
static void direct_declare(const CgEmit *em, const CgGemm *g) {
  const Dialect *d = em->d;
  const char *E = d->mma_elem[g->mma];
  int ar = g->da.kfast ? g->bm : g->bk, ac = g->da.kfast ? g->bk + 8 : g->bm + 8;
  int br = g->db.kfast ? g->bn : g->bk, bc = g->db.kfast ? g->bk + 8 : g->bn + 8;
  cg_put(em, "%s", d->dyn_shared);  /* its base rounded up to 16 bytes (cg_gemm_dyn_smem adds them) */
  cg_put(em, "%s *kd = (%s *)(((unsigned long long)%s + 15) & ~15ull);", E, E, d->dyn_shared_name);
  cg_put(em, "%s (*As)[%d][%d] = (%s (*)[%d][%d])kd;", E, ar, ac, E, ar, ac);
  cg_put(em, "%s (*Bs)[%d][%d] = (%s (*)[%d][%d])(kd + %d);", E, br, bc, E, br, bc, DIRECT_STAGES * ar * ac);
}

/* ---- direct tiles on the warpgroup MMA (CgGemm.wgmma) ----
 * Stage s of the dynamic shared array (its base rounded up to 1024 bytes, the swizzle's period)
 * holds A's 128 x 64 k-tile, then B's bn x 64: (128 + bn) rows of 128 bytes, each 16-byte chunk c of
 * a row r at chunk c ^ (r % 8), as the 128-byte swizzle of wgmma's descriptors reads it. An operand
 * read along k keeps its x a row (K-major: rows 128 bytes apart, groups of 8 rows SBO = 1024 apart);
 * one read along x keeps panels of 64 x, its k a row of the panel (M- or N-major: groups of 8 k
 * rows SBO = 1024 apart, panels LBO = 8192 apart). A warpgroup's 16 k of the k-tile start 32 bytes
 * further along a K-major row, 16 rows (2048 bytes) further down a panel. */
static void wgmma_declare(const CgEmit *em) {
  const Dialect *d = em->d;
  cg_put(em, "%s", d->dyn_shared);
  cg_put(em, "unsigned char *kw = (unsigned char *)(((unsigned long long)%s + 1023) & ~1023ull);", d->dyn_shared_name);
}

/* A warpgroup MMA tile's products of k-tile stage st: four of 16 k a warpgroup, asynchronous; the
 * wait lets the products of the k-tile before finish, no later. */
static void wgmma_multiply(const CgEmit *em, const CgGemm *g) {
  const Dialect *d = em->d;
  int stage = (g->bm + g->bn) * 128;
  cg_put(em, "const unsigned sa = k_smem(kw) + (unsigned)st * %d + (%s >> 7) * %d, sb = k_smem(kw) + (unsigned)st * %d + %d;", stage,
         thread_int(d), 64 * 128, stage, g->bm * 128);
  cg_put(em, "k_wg_fence();");
  cg_put(em, "%s", d->unroll);
  cg_put(em, "for (int kk = 0; kk < %d; kk++)", WG_BK / 16);
  cg_put(em, "  k_wgmma_%s_%d_%d%d(acc[0], k_wg_desc(sa + kk * %d, %d, 1024), k_wg_desc(sb + kk * %d, %d, 1024));",
         g->mma == CG_MMA_F16 ? "f16" : "bf16", g->bn, !g->da.kfast, !g->db.kfast, g->da.kfast ? 32 : 2048,
         g->da.kfast ? 16 : WG_BK * 128, g->db.kfast ? 32 : 2048, g->db.kfast ? 16 : WG_BK * 128);
  cg_put(em, "k_wg_commit();");
  cg_put(em, "k_wg_wait<1>();");
}

/* The k loop of a direct mma tile, of an f32 k-group tile with copies (CgGemm.copies stages of Ac /
 * Bc), or of a warpgroup MMA tile (wg_stages stages of kw), over the block's span kbeg .. kend: the
 * copies of the first `ahead` k-tiles, then per k-tile t: wait for its copies, one barrier, the
 * copies of t + ahead into the stage the barrier freed, and multiply. The mma and FMA tiles multiply
 * synchronously: every warp past the barrier is done with t - 1, so ahead is P - 1. A warpgroup MMA
 * tile's products go out asynchronously and each warpgroup waits for all but its latest: past the
 * barrier only t - 2 is done, so ahead is P - 2; its copies' writes (the generic proxy) are fenced
 * for the products' reads (the async proxy) before the barrier. */
static void direct_loop(const CgEmit *em, const Kernel *k, const CgGemm *g) {
  const Dialect *d = em->d;
  const char *I = d->index_type;
  const char *As = g->wgmma ? "kw" : g->copies ? "Ac" : "As", *Bs = g->wgmma ? "kw" : g->copies ? "Bc" : "Bs";
  const struct CgDirect *oa = g->copies ? &g->va : &g->da, *ob = g->copies ? &g->vb : &g->db;
  int P = g->wgmma ? g->wg_stages : g->copies ? g->copies : DIRECT_STAGES, ahead = g->wgmma ? P - 2 : P - 1;
  char at[64], wait[64];
  cg_put(em, "const %s nkt = (kend - kbeg + %d) / %d;", I, g->bk - 1, g->bk);
  for (int s = 0; s < ahead; s++) {
    char st[12];
    snprintf(at, sizeof at, "kbeg + %d", s * g->bk);
    snprintf(st, sizeof st, "%d", s);
    cg_open(em, "if (%d < nkt) {", s);
    direct_issue(em, k, g, oa, CG_ROLE_M, As, at, st);
    direct_issue(em, k, g, ob, CG_ROLE_N, Bs, at, st);
    cg_close(em);
    cg_put(em, "%s", d->cp_commit);
  }
  cg_open(em, "for (%s t = 0; t < nkt; t++) {", I);
  snprintf(wait, sizeof wait, d->cp_wait, ahead - 1);
  cg_put(em, "%s", wait);  /* the groups of t + 1 .. t + ahead - 1 may still be in flight */
  if (g->wgmma) cg_put(em, "k_fence_async();");
  cg_put(em, "%s", d->barrier);
  cg_open(em, "if (t + %d < nkt) {", ahead);
  cg_put(em, "const %s kn = kbeg + (t + %d) * %d;", I, ahead, g->bk);
  cg_put(em, "const int sn = (int)((t + %d) %% %d);", ahead, P);
  direct_issue(em, k, g, oa, CG_ROLE_M, As, "kn", "sn");
  direct_issue(em, k, g, ob, CG_ROLE_N, Bs, "kn", "sn");
  cg_close(em);
  cg_put(em, "%s", d->cp_commit);  /* an empty group near the end keeps the wait's count */
  cg_put(em, "const int st = (int)(t %% %d);", P);
  if (g->wgmma) wgmma_multiply(em, g);
  else if (g->copies) copy_multiply(em, g, "st");
  else direct_multiply(em, g, "st");
  cg_close(em);
  if (g->wgmma) cg_put(em, "k_wg_wait<0>();");
  cg_put(em, "%s", d->cp_wait0);
  cg_put(em, "%s", d->barrier);  /* no copy in flight, every product done, before the next tile's */
}

/* One step of adding the groups' tiles: where cond, stmt on each of the thread's KG_TM x KG_TN
 * outputs (i, j); then a barrier. */
static void kg_step(const CgEmit *em, const char *cond, const char *stmt) {
  const Dialect *d = em->d;
  cg_open(em, "if (%s) {", cond);
  cg_put(em, "%s", d->unroll);
  cg_put(em, "for (int i = 0; i < %d; i++)", KG_TM);
  cg_put(em, "%s", d->unroll);
  cg_put(em, "  for (int j = 0; j < %d; j++) %s", KG_TN, stmt);
  cg_close(em);
  cg_put(em, "%s", d->barrier);
}

/* kg_sum over rows of vectors (no_views): output (r, c) of a group's sub-tile at
 * [r][c / 4][c % 4]; the tiles have bk >= bm rows. */
static void kg_sum_vec(const CgEmit *em, const CgGemm *g, int rows, int cols, const char *As, const char *Bs,
                       const char *cacc, const char *acc) {
  const Dialect *d = em->d;
  char at[32], rd[160];
  snprintf(at, sizeof at, "[cy * %d + i][cx][j]", KG_TM);
  const char *conds[4] = { "kg >= 2", "kg < 2", "kg == 1", "kg == 0" };
  for (int s = 0; s < 4; s++) {
    char stmt[320];
    if (s == 0) snprintf(stmt, sizeof stmt, "if (kg == 2) %s%s = %s[i][j]; else %s%s = %s[i][j];", As, at, cacc, Bs, at, cacc);
    else if (s == 1) snprintf(stmt, sizeof stmt, "%s[i][j] += kg == 0 ? %s%s : %s%s;", cacc, As, at, Bs, at);
    else if (s == 2) snprintf(stmt, sizeof stmt, "%s%s = %s[i][j];", As, at, cacc);
    else snprintf(stmt, sizeof stmt, "%s%s += %s[i][j];", As, at, cacc);
    kg_step(em, conds[s], stmt);
  }
  snprintf(rd, sizeof rd, "{ const int r = ty + i * %d, c = tx + j * %d; %s[i][j] = %s[r][c >> 2][c & 3]; }", rows, cols, acc, As);
  each_output(em, g, rd);
  cg_put(em, "%s", d->barrier);
}

/* The groups' partial tiles added in shared memory, (g0 + g2) + (g1 + g3) (a fixed order),
 * then each thread's epilogue outputs (rows ty + i * rows, column tx + j * cols) read back. */
static void kg_sum(const CgEmit *em, const CgGemm *g, int rows, int cols, const char *As, const char *Bs,
                   const char *cacc, const char *acc) {
  const Dialect *d = em->d;
  if (d->no_views) {
    kg_sum_vec(em, g, rows, cols, As, Bs, cacc, acc);
    return;
  }
  int st = kg_stride(g);
  const char *F = d->value_type[KILN_F32];
  char at[96];
  /* a thread's sub-tile: 4 consecutive rows (columns), or rows 8 apart where copies read along k */
  bool rows8 = g->copies && g->va.kfast, cols8 = g->copies && g->vb.kfast;
  snprintf(at, sizeof at, "[(%s) * %d + %s]", rows8 ? "cy + 8 * i" : "cy * 4 + i", st, cols8 ? "cx + 8 * j" : "cx * 4 + j");
  KILN_ASSERT(KG_TM == 4 && KG_TN == 4 && g->bm == 32 && g->bn == 32);
  if (g->copies && g->n_b == 1 && !g->kg_tree) {
    /* copied tiles keep 2 x copies tiles of bk x st floats in a row (Kcv): each group puts its partial
     * tile in its own, one barrier, and every thread adds its outputs' four, (g0 + g2) + (g1 + g3) as
     * below (the same bits); the steps below take three barriers more */
    int R = g->bk * st;
    cg_put(em, "%s *Ra = &%s[0][0];", F, As);
    char stmt[160], rd[320];
    snprintf(stmt, sizeof stmt, "Ra[kg * %d + (%.*s)] = %s[i][j];", R, (int)strlen(at) - 2, at + 1, cacc);  /* at's inside */
    cg_put(em, "%s", d->unroll);
    cg_put(em, "for (int i = 0; i < %d; i++)", KG_TM);
    cg_put(em, "%s", d->unroll);
    cg_put(em, "  for (int j = 0; j < %d; j++) %s", KG_TN, stmt);
    cg_put(em, "%s", d->barrier);
    snprintf(rd, sizeof rd, "{ const int e = (ty + i * %d) * %d + tx + j * %d; %s[i][j] = (Ra[e] + Ra[%d + e]) + (Ra[%d + e] + "
             "Ra[%d + e]); }", rows, st, cols, acc, 2 * R, R, 3 * R);
    each_output(em, g, rd);
    cg_put(em, "%s", d->barrier);  /* the next tile's copies into Ac wait for every read */
    return;
  }
  cg_put(em, "%s *Ra = &%s[0][0], *Rb = &%s[0][0];", F, As, Bs);
  static const char *const steps[4][2] = {
    { "kg >= 2", "(kg == 2 ? Ra : Rb)%s = %s[i][j];" }, { "kg < 2", "%s[i][j] += (kg == 0 ? Ra : Rb)%s;" },
    { "kg == 1", "Ra%s = %s[i][j];" }, { "kg == 0", "Ra%s += %s[i][j];" },
  };
  for (int s = 0; s < 4; s++) {
    char stmt[160];
    if (s == 1) snprintf(stmt, sizeof stmt, steps[s][1], cacc, at);  /* the one that adds into cacc */
    else snprintf(stmt, sizeof stmt, steps[s][1], at, cacc);
    kg_step(em, steps[s][0], stmt);
  }
  char rd[128];
  snprintf(rd, sizeof rd, "%s[i][j] = Ra[(ty + i * %d) * %d + tx + j * %d];", acc, rows, st, cols);
  each_output(em, g, rd);
  cg_put(em, "%s", d->barrier);  /* the next tile's stores into As wait for every read */
}

/* The k loop of every other tile: operands through registers into shared memory. */
static void register_loop(const CgEmit *em, const Kernel *k, const CgGemm *g, const char *const sa[2], const char *const sb[2]) {
  const Dialect *d = em->d;
  const char *I = d->index_type, *F = d->value_type[KILN_F32];
  int rows = g->bm / g->tm, cols = g->bn / g->tn;
  bool dbl = g->stages > 1;
  /* Register stages: the reads of the next `stages` k-tiles are in flight while one is
   * multiplied (a short span pays its memory latency about once, not once a k-tile). With
   * one stage the shared tile is rewritten behind a second barrier; with more, the tiles
   * alternate between two buffers (a block's k-tile s goes to buffer s & 1: stages is even),
   * and the one barrier after a stash also tells that every thread is done with the buffer
   * the next stash overwrites. */
  int D = g->stages;
  for (int s = 0; s < D; s++) {
    char pa[16], pb[16];
    stage_regs(g, s, pa, pb);
    cg_put(em, "%s %s[%d], %s[%d];", F, pa, g->bk * g->bm / CG_GEMM_THREADS, pb, g->bk * g->bn / CG_GEMM_THREADS);
    for (int q = 1; q < g->n_b; q++) cg_put(em, "%s %s_%d[%d];", F, pb, q, g->bk * g->bn / CG_GEMM_THREADS);
  }
  for (int s = 0; s < D; s++) {
    char at[48];
    snprintf(at, sizeof at, D == 1 ? "kbeg" : "kbeg + %d", s * g->bk);
    if (s > 0) cg_put(em, "if (%s < kend)", at);
    fetch_both(em, k, g, at, s);
  }
  cg_open(em, "for (%s k0 = kbeg; k0 < kend; k0 += %d) {", I, D * g->bk);
  for (int s = 0; s < D; s++) {
    char pa[16], pb[16], next[48];
    const char *As = sa[s & 1], *Bs = sb[s & 1], *kc = D == 1 ? "k0" : "kc";  /* one stage: the loop's own k0 */
    stage_regs(g, s, pa, pb);
    if (D > 1) cg_open(em, "{ const %s kc = k0 + %d;", I, s * g->bk);
    if (s > 0) cg_put(em, "if (kc >= kend) break;");
    char Ah[48];
    if (g->head) snprintf(Ah, sizeof Ah, "(Ph + %s)", kc), As = Ah;  /* the k-tile's rows of Ph, in place */
    else stash_tile(em, g, pa, As, g->bm, g->a_kfast, g->a_round || g->a_stash_round, g->a_vec);
    stash_tile(em, g, pb, Bs, g->bn, g->b_kfast, g->b_round || g->b_stash_round, g->b_vec);
    for (int q = 1; q < g->n_b; q++) {  /* siblings: one stage, one buffer */
      char pq[32], bq[32];
      b_of(q, pb, pq);
      b_of(q, "Bs", bq);
      stash_tile(em, g, pq, bq, g->bn, g->b_kfast, g->b_stash_round, false);
    }
    cg_put(em, "%s", d->barrier);
    cg_put(em, "if (%s + %d < kend)", kc, D * g->bk);
    snprintf(next, sizeof next, "%s + %d", kc, D * g->bk);
    fetch_both(em, k, g, next, s);
    if (g->mma) mma_multiply(em, g);
    else if (g->kgroups > 1)
      for (int q = 0; q < g->n_b; q++) {
        char bq[32], cacc[32];
        b_of(q, Bs, bq);
        acc_of(k, g, q, "cacc", cacc);
        kg_multiply(em, g, As, bq, cacc);
      }
    else {
      cg_put(em, "%s", d->unroll);
      cg_open(em, "for (int kk = 0; kk < %d; kk++) {", g->bk);
      cg_put(em, "%s ra[%d], rb[%d];", F, g->tm, g->tn);
      cg_put(em, "%s", d->unroll);
      cg_put(em, "for (int i = 0; i < %d; i++) ra[i] = %s[kk][ty + i * %d];", g->tm, As, rows);
      for (int q = 0; q < g->n_b; q++) {
        char bq[32], acc[32], at[48], fma[160], step[224];
        b_of(q, Bs, bq);
        acc_of(k, g, q, "acc", acc);
        cg_put(em, "%s", d->unroll);
        cg_put(em, "for (int j = 0; j < %d; j++) rb[j] = %s[kk][tx + j * %d];", g->tn, bq, cols);
        snprintf(at, sizeof at, "%s[i][j]", acc);
        snprintf(fma, sizeof fma, d->fma, "ra[i]", "rb[j]", at);
        snprintf(step, sizeof step, "%s = %s;", at, fma);
        each_output(em, g, step);
      }
      cg_close(em);
    }
    if (!dbl) cg_put(em, "%s", d->barrier);
    if (D > 1) cg_close(em);
  }
  cg_close(em);
  if (dbl) cg_put(em, "%s", d->barrier);  /* every multiply done before the buffers are reused */
}

void cg_render_gemm(const Plan *p, const Kernel *k, const CgGemm *g, const CgEmit *em) {
  (void)p;
  const Dialect *d = em->d;
  const char *I = d->index_type, *F = d->value_type[KILN_F32];
  int64_t mt = (g->M + g->bm - 1) / g->bm, nt = (g->N + g->bn - 1) / g->bn;
  int rows = g->bm / g->tm, cols = g->bn / g->tn;  /* threads along m and n; rows*cols = CG_GEMM_THREADS */
  bool dbl = g->stages > 1;  /* double-buffered shared tiles */
  const char *sa[2] = { "As", "As" }, *sb[2] = { "Bs", "Bs" };
  if (dbl && g->kgroups > 1) sa[0] = "As0", sa[1] = "As1", sb[0] = "Bs0", sb[1] = "Bs1";
  else if (dbl) sa[0] = "As[0]", sa[1] = "As[1]", sb[0] = "Bs[0]", sb[1] = "Bs[1]";
  if (g->kgroups > 1) kg_declare(em, g);
  else if (g->wgmma) wgmma_declare(em);
  else if (g->direct) direct_declare(em, g);
  else if (!d->shared_at_module) {
    char decl[3 + CG_GEMM_MAX_B][160];
    for (int i = 0, n = tile_decls(g, d, decl); i < n; i++) cg_put(em, "%s", decl[i]);
  }
  if (g->wgmma)  /* warpgroup w's 64 rows, its warp's 16 of them */
    cg_put(em, "const int lane = %s & 31, wm0 = (%s >> 7) * 64 + ((%s >> 5) & 3) * 16;", thread_int(d), thread_int(d), thread_int(d));
  else if (g->mma)
    cg_put(em, "const int lane = %s & 31, wm0 = (%s >> 5) / 4 * %d, wn0 = (%s >> 5) %% 4 * %d;", thread_int(d), thread_int(d),
        g->bm / 2, thread_int(d), g->bn / 4);
  else cg_put(em, "const int tx = %s %% %d, ty = %s / %d;", thread_int(d), cols, thread_int(d), cols);
  int64_t tiles = mt * nt * g->batch;
  int S = g->splits > 1 ? g->splits : 1;
  if (S > 1 && g->cluster) cg_put(em, "%s %s kiln_cp[%d];", d->shared_qual, F, g->bm * g->bn);
  if ((S > 1 && !g->cluster && !g->split_flags) || (g->band && !g->band_share))  /* arrivals: a tile's spans, a band's tiles */
    cg_put(em, "%s %s last;", d->shared_qual, d->counter_type);
  if (g->band_share) cg_put(em, "%s %s Xb[%d][%d];", d->shared_qual, F, g->bm, g->bn + 1);  /* the tile's row values */
  if (S > 1) {
    cg_open(em, "for (%s w = %s; w < %s; w += %s) {", I, d->block_id, cg_lit(em, tiles * S), d->grid_size);
    cg_put(em, "const %s tile = w / %d, kbeg = (w %% %d) * %s;", I, S, S, cg_lit(em, g->kspan));
    cg_put(em, "const %s kend = kbeg + %s < %s ? kbeg + %s : %s;", I, cg_lit(em, g->kspan), cg_lit(em, g->K), cg_lit(em, g->kspan),
        cg_lit(em, g->K));
  } else {
    cg_open(em, "for (%s tile = %s; tile < %s; tile += %s) {", I, d->block_id, cg_lit(em, tiles), d->grid_size);
    cg_put(em, "const %s kbeg = 0, kend = %s;", I, cg_lit(em, g->K));
  }
  cg_put(em, "const %s tn0 = (tile %% %s) * %d;", I, cg_lit(em, nt), g->bn);
  cg_put(em, "const %s tm0 = ((tile / %s) %% %s) * %d;", I, cg_lit(em, nt), cg_lit(em, mt), g->bm);
  cg_put(em, "const %s bz = tile / %s;", I, cg_lit(em, nt * mt));
  if (g->head) {  /* the tile's rows into Ph; the last tile's reads of Ph (kg_sum) ended at a barrier */
    em->head(em->r);
    cg_put(em, "%s", d->barrier);
  }
  em->push(em->r);
  decompose(em, k, g, CG_ROLE_BATCH, "bz");
  for (int q = 0; q < g->n_b; q++) {
    char acc[32], cacc[32], zero[64];
    acc_of(k, g, q, "acc", acc);
    acc_of(k, g, q, "cacc", cacc);
    cg_put(em, "%s %s[%d][%d];", F, acc, g->tm, g->tn);
    snprintf(zero, sizeof zero, "%s[i][j] = 0.0%s;", acc, d->f32_suffix);
    if (g->kgroups > 1) {
      cg_put(em, "%s %s[%d][%d];", F, cacc, KG_TM, KG_TN);
      snprintf(zero, sizeof zero, "%s[i][j] = 0.0%s;", cacc, d->f32_suffix);
      cg_put(em, "%s", d->unroll);
      cg_put(em, "for (int i = 0; i < %d; i++)", KG_TM);
      cg_put(em, "%s", d->unroll);
      cg_put(em, "  for (int j = 0; j < %d; j++) %s", KG_TN, zero);
    } else each_output(em, g, zero);
  }
  if (g->direct || g->copies) direct_loop(em, k, g);
  else register_loop(em, k, g, sa, sb);
  for (int q = 0; g->kgroups > 1 && q < g->n_b; q++) {
    char acc[32], cacc[32];
    acc_of(k, g, q, "acc", acc);
    acc_of(k, g, q, "cacc", cacc);
    if (g->n_b > 1) cg_open(em, "{");  /* each sum's scratch pointers in a scope of their own */
    kg_sum(em, g, rows, cols, sa[0], sb[0], cacc, acc);
    if (g->n_b > 1) cg_close(em);
  }
  if (S > 1 && g->cluster) cluster_combine(em, g);
  else if (S > 1) split_combine(em, k, g, tiles);
  /* epilogue: every output of the sub-tile, in the kernel's own vars */
  cg_put(em, "%s", d->unroll);
  cg_open(em, "for (int i = 0; i < %d; i++) {", g->tm);
  cg_put(em, "%s", d->unroll);
  cg_open(em, "for (int j = 0; j < %d; j++) {", g->tn);
  char om[64], on[64], wm[96], wn[96];
  out_place(g, om, on);
  cg_put(em, "const %s mq = tm0 + %s, nq = tn0 + %s;", I, widened(d, om, wm), widened(d, on, wn));
  cg_open(em, "if (mq < %s && nq < %s) {", cg_lit(em, g->M), cg_lit(em, g->N));
  em->push(em->r);
  decompose(em, k, g, CG_ROLE_M, "mq");
  decompose(em, k, g, CG_ROLE_N, "nq");
  em->items(em->r, 1, g->n_b > 1 ? "acc%d[i][j]" : "acc[i][j]");  /* siblings: each item's own sum */
  if (g->band) em->band(em->r, 0);
  em->pop(em->r);
  cg_close(em);
  cg_close(em);
  cg_close(em);
  if (g->band) em->band(em->r, 1);
  em->pop(em->r);
  cg_close(em);
}
