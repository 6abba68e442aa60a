/*
 * library.c — which GEMMs a library may run (cuBLASLt on the cuda backend). Takes a plan
 * kernel that gemm.c would tile; produces a CgLibGemm when the kernel is a plain strided
 * (batched) product whose result, optionally plus a bias over n and through a relu or
 * tanh GELU, is the one thing the kernel stores, and the cost rule says the library wins
 * (M*N*K*batch >= 2^26: below that the generated tile kernel is as fast and saves the
 * library's fixed cost).
 *
 * How a kernel maps: each operand is one load whose element offset is affine in the
 * flat m (or n), k and batch indices (checked at probe points); the runtime hands kiln's
 * row-major D[m, n] = A[m, k] B[k, n] to the column-major library as D^T = B^T A^T. The
 * generated kernel stays in the source as the fallback when the library declines.
 */
#include "codegen.h"

#include <string.h>

/* Values of the kernel's vars for flat m, n, k and batch indices (digits of each over the
 * vars of its role, as gemm.c decomposes them). */
static void vars_at(const Kernel *k, const CgGemm *g, int64_t m, int64_t n, int64_t kk, int64_t b, int64_t *v) {
  int64_t flat[3] = { b, m, n };
  for (int i = k->rank - 1; i >= 0; i--) {
    int r = g->role[i];
    v[i] = flat[r] % k->shape[i];
    flat[r] /= k->shape[i];
  }
  for (int i = k->n_red - 1; i >= 0; i--) {
    v[k->rank + i] = kk % k->red_shape[i];
    kk /= k->red_shape[i];
  }
}

/* Element offset of load L (or, with L NULL, of expression off) at the given var values. */
static bool offset_eval(const Plan *p, const Kernel *k, const Expr *L, const Expr *off, const int64_t *v, int64_t *out) {
  int nv = k->rank + k->n_red;
  int64_t mn, mx;
  if (!L) {
    if (!te_range(off, v, v, nv, &mn, &mx) || mn != mx) return false;
    *out = mn;
    return true;
  }
  const Stage *S = &p->te->stages[L->src];
  int64_t o = 0;
  for (int i = 0; i < L->n_args; i++) {
    if (!te_range(L->args[i], v, v, nv, &mn, &mx) || mn != mx) return false;
    o += mn * te_stage_stride(S, i);
  }
  *out = o;
  return true;
}

typedef struct Affine { int64_t base, sm, sn, sk, sb; } Affine;

/* Fits offset = base + sm*m + sn*n + sk*k + sb*b and checks it at probe points. */
static bool affine(const Plan *p, const Kernel *k, const CgGemm *g, const Expr *L, const Expr *off, Affine *a) {
  int64_t v[2 * KILN_MAX_RANK], o;
  int64_t unit[4][4] = { { 1, 0, 0, 0 }, { 0, 1, 0, 0 }, { 0, 0, 1, 0 }, { 0, 0, 0, 1 } };
  int64_t *st[4] = { &a->sm, &a->sn, &a->sk, &a->sb };
  int64_t lim[4] = { g->M, g->N, g->K, g->batch };
  vars_at(k, g, 0, 0, 0, 0, v);
  if (!offset_eval(p, k, L, off, v, &a->base)) return false;
  for (int d = 0; d < 4; d++) {
    *st[d] = 0;
    if (lim[d] < 2) continue;
    vars_at(k, g, unit[d][0], unit[d][1], unit[d][2], unit[d][3], v);
    if (!offset_eval(p, k, L, off, v, &o)) return false;
    *st[d] = o - a->base;
  }
  static const int64_t probe[6][4] = { { 1, 1, 1, 1 }, { -1, -1, -1, -1 }, { 7, 3, 5, 2 }, { -2, 9, -3, 1 },
                                       { 63, 65, 67, 3 }, { -65, -63, -129, -2 } };
  for (int i = 0; i < 6; i++) {
    int64_t q[4];
    for (int d = 0; d < 4; d++) q[d] = ((probe[i][d] % lim[d]) + lim[d]) % lim[d];  /* negative: from the end */
    vars_at(k, g, q[0], q[1], q[2], q[3], v);
    if (!offset_eval(p, k, L, off, v, &o)) return false;
    if (o != a->base + a->sm * q[0] + a->sn * q[1] + a->sk * q[2] + a->sb * q[3]) return false;
  }
  return true;
}

static bool is_memory_load(const Plan *p, const Kernel *k, const Expr *e, kiln_dtype elem) {
  return e->kind == EX_LOAD && p->kernel_of[e->src] != k->id && !plan_is_baked(p->te, e->src) &&
         p->te->stages[e->src].dtype == elem;
}

/* A load of stage s at the kernel's current point. */
static bool at_point(const Kernel *k, const Expr *e, int s) {
  if (e->kind != EX_LOAD || e->src != s || k->rank != e->n_args) return false;
  for (int i = 0; i < e->n_args; i++) {  /* the kernel's own point; a dim of one may read as index 0 */
    const Expr *x = e->args[i];
    bool own = x->kind == EX_VAR && x->var == i;
    bool zero = x->kind == EX_CONST && x->dtype != KILN_F32 && x->dtype != KILN_F64 && x->c.i == 0 && k->shape[i] == 1;
    if (!own && !zero) return false;
  }
  return true;
}

/* Is item it an unstored value that rounds the sum to elem at the same point (a 16-bit
 * product's own stage: elem(acc))? */
static bool rounds_sum(const Kernel *k, const Item *it, int acc_stage, kiln_dtype elem) {
  const Expr *b = it->body;
  return it->kind == IT_OUTER && !it->store && b->kind == EX_CAST && b->dtype == elem && at_point(k, b->args[0], acc_stage);
}

/* The item rounds_sum that e loads, or NULL. */
static const Item *rounding_item(const Kernel *k, const Expr *e, int acc_stage, kiln_dtype elem) {
  for (int i = 0; i < k->n_items; i++)
    if (rounds_sum(k, &k->items[i], acc_stage, elem) && at_point(k, e, k->items[i].stage)) return &k->items[i];
  return NULL;
}

/* e with the roundings of 16-bit values taken off: f32(elem(z)) is z, and a load of the
 * product's rounding item is the sum. The library's epilogue works on the f32 sum and rounds
 * once, where the kernel rounds the product, then the bias's sum, then the activation: the
 * results agree within the 16-bit type's rounding of each step. */
static const Expr *unrounded(const Kernel *k, const Expr *e, int acc_stage, kiln_dtype elem) {
  while (elem != KILN_F32 && e->kind == EX_CAST && e->dtype == KILN_F32 && e->args[0]->dtype == elem) {
    const Expr *y = e->args[0];
    const Item *r = y->kind == EX_LOAD ? rounding_item(k, y, acc_stage, elem) : NULL;
    if (r) y = r->body;
    if (y->kind != EX_CAST || y->args[0]->dtype != KILN_F32) break;
    e = y->args[0];
  }
  return e;
}

/* The memory load behind factor x: x itself (f32), or the load under f32(load) of a 16-bit
 * stage of type elem. */
static const Expr *factor_load(const Plan *p, const Kernel *k, const Expr *x, kiln_dtype elem) {
  if (elem != KILN_F32) {
    if (x->kind != EX_CAST || x->dtype != KILN_F32) return NULL;
    x = x->args[0];
  }
  return is_memory_load(p, k, x, elem) ? x : NULL;
}

/* y when e is kiln's tanh GELU of y: the candidate y is read off e's x/2 factor and its GELU
 * built again by te_gelu_tanh (what lowering of OP_GELU_TANH builds); hash-consing makes
 * equal expressions one node. cuBLASLt's GELU epilogue is the same tanh form. */
static const Expr *gelu_of(TE *te, const Expr *e, bool probe) {
  if (e->kind != EX_BINARY || e->op != TB_MUL || e->dtype != KILN_F32) return NULL;
  for (int s = 0; s < 2; s++) {
    const Expr *h = e->args[s];
    if (h->kind != EX_BINARY || h->op != TB_MUL) continue;
    for (int u = 0; u < 2; u++) {
      const Expr *half = h->args[u];
      Expr *y = h->args[1 - u];
      if (half->kind == EX_CONST && half->c.f == 0.5 && (probe || te_gelu_tanh(te, y) == e)) return y;
    }
  }
  return NULL;
}

/* The stored item's body: [relu|gelu](acc [+ bias[n]]), in either operand order; on loop
 * dialects the bias may run along m instead (bias[m]: cuBLASLt's runs along n only). */
static bool epilogue(const Plan *p, const Kernel *k, const CgGemm *g, const CgOptions *o, const Expr *e, int acc_stage,
                     CgLibGemm *c, bool probe) {
  const Expr *y;
  e = unrounded(k, e, acc_stage, c->elem);
  if (e->kind == EX_BINARY && e->op == TB_MAX && e->args[1]->kind == EX_CONST && e->args[1]->c.f == 0) {
    c->relu = true;
    e = e->args[0];
  } else if ((y = gelu_of(p->te, e, probe))) {
    c->gelu = true;
    e = y;
  }
  e = unrounded(k, e, acc_stage, c->elem);
  if (at_point(k, e, acc_stage)) return true;
  if (e->kind != EX_BINARY || e->op != TB_ADD) return false;
  const Expr *e0 = unrounded(k, e->args[0], acc_stage, c->elem), *e1 = unrounded(k, e->args[1], acc_stage, c->elem);
  const Expr *b = at_point(k, e0, acc_stage) ? e->args[1] : at_point(k, e1, acc_stage) ? e->args[0] : NULL;
  Affine a;
  if (b) b = factor_load(p, k, b, c->elem);  /* the bias has the operands' type, as the library's */
  if (!b || !affine(p, k, g, b, NULL, &a)) return false;
  bool along_n = !a.sm && !a.sk && !a.sb && a.sn == 1;  /* bias[n], shared by every row and batch */
  bool along_m = o->loop_library && !a.sn && !a.sk && !a.sb && a.sm == 1;
  if (!along_n && !along_m) return false;
  c->bias_stage = b->src, c->bias_off = a.base, c->bias_m = along_m;
  return true;
}

bool cg_stage_constant(const TE *te, int stage) {
  const Stage *S = &te->stages[stage];
  bool constant = S->kind == ST_CONST || S->kind == ST_PARAM;
  for (int i = 0; constant && i < te->n_assigns; i++) constant = te->assigns[i].param != stage;
  return constant;
}

typedef struct Constant { const TE *te; bool all; } Constant;

static void note_constant(const Expr *L, void *ctx) {
  Constant *c = ctx;
  c->all &= cg_stage_constant(c->te, L->src);
}

bool cg_reads_constants(const TE *te, const Expr *e) {
  Constant c = { te, true };
  te_visit_loads(e, note_constant, &c);
  return c.all;
}

static bool worth_a_library(const CgGemm *g, const CgOptions *o) {
  if (g->wgmma) return false;  /* asked for by name (CgOptions.wgmma): the race is against the library */
  if (o->library_all) return true;
  double work = (double)g->M * (double)g->N * (double)g->K * (double)g->batch;
  return work >= (o->library_work > 0 ? o->library_work : PLAN_LIBRARY_WORK);  /* cuda: 2^26 (plan.h: siblings split there) */
}

/* probe: every test but the GELU's, which would build the candidate's GELU in the TE (a
 * product by 0.5 of the right shape is taken for one). */
static bool lib_match(const Plan *p, const Kernel *k, const CgOptions *o, CgLibGemm *c, bool probe) {
  CgGemm g;
  if (!cg_gemm_match(p, k, o, &g) || g.n_b > 1 || !worth_a_library(&g, o)) return false;  /* one B a call */
  if (o->loop_library && g.K > CG_CPU_F32_SUM_MAX) return false;  /* the f64 rows' sums, not the library's f32 */
  /* cpu: a short sum leaves the tile's packing and epilogue uncovered (convnet_mini's 1x1
   * convolutions over 24 and 96 channels ran 1.1-1.5x slower as library calls) */
  if (o->loop_library && g.K < CG_CPU_LIBRARY_MIN_K) return false;
  /* 16-bit operands (bf16, f16; the cuda library's f32 sums) as the mma tiles take them; the
   * loop dialects' library is f32 */
  kiln_dtype elem = g.a->kind == EX_CAST && g.a->dtype == KILN_F32 ? g.a->args[0]->dtype : KILN_F32;
  if (elem != KILN_BF16 && elem != KILN_F16) elem = KILN_F32;
  if (elem != KILN_F32 && o->loop_library) return false;
  const Expr *la = factor_load(p, k, g.a, elem), *lb = factor_load(p, k, g.b, elem);
  if (!la || !lb) return false;
  memset(c, 0, sizeof *c);
  c->bias_stage = -1;
  c->elem = elem;
  c->M = g.M, c->N = g.N, c->K = g.K, c->batch = g.batch;
  const Item *acc = &k->items[g.acc_item], *out = NULL;
  int rounding = 0;  /* the product's own 16-bit stage, read by the epilogue */
  for (int i = 0; i < k->n_items; i++) {
    const Item *it = &k->items[i];
    if (!it->store) {
      rounding += elem != KILN_F32 && rounds_sum(k, it, acc->stage, elem);
      continue;
    }
    if (out) return false;  /* one stored result only */
    out = &k->items[i];
  }
  if (!out || !out->offset || p->te->stages[out->stage].dtype != elem) return false;
  const Expr *body = out->body;
  if (elem != KILN_F32) {  /* elem(f32 epilogue) */
    if (body->kind != EX_CAST || body->args[0]->dtype != KILN_F32) return false;
    body = body->args[0];
  }
  if (out != acc && !epilogue(p, k, &g, o, body, acc->stage, c, probe)) return false;
  if (out != acc && k->n_items != 2 + rounding) return false;  /* no other values in between */
  Affine a, b, d;
  if (!affine(p, k, &g, la, NULL, &a) || !affine(p, k, &g, lb, NULL, &b) || !affine(p, k, &g, NULL, out->offset, &d))
    return false;
  if (a.sn || b.sm || d.sk || d.sn != 1 || d.sm < g.N) return false;
  /* A [m, k]: along k (library op N on its [K x M] view) or along m (op T on [M x K]) */
  if (a.sk == 1 && a.sm >= g.K) c->a_t = false, c->lda = a.sm;
  else if (a.sm == 1 && a.sk >= g.M) c->a_t = true, c->lda = a.sk;
  else return false;
  if (b.sn == 1 && b.sk >= g.N) c->b_t = false, c->ldb = b.sk;
  else if (b.sk == 1 && b.sn >= g.K) c->b_t = true, c->ldb = b.sn;
  else return false;
  c->a_stage = la->src, c->b_stage = lb->src, c->d_stage = out->stage;
  c->a_off = a.base, c->b_off = b.base, c->d_off = d.base;
  c->a_sb = a.sb, c->b_sb = b.sb, c->d_sb = d.sb, c->ldd = d.sm;
  c->a_constant = cg_stage_constant(p->te, c->a_stage);
  c->b_constant = cg_stage_constant(p->te, c->b_stage);
  if (o->loop_library && !o->library_all && !c->b_constant && 4.0 * (double)g.K * (double)g.N > CG_CPU_LIBRARY_B_BYTES)
    return false;
  return true;
}

bool cg_library_match(const Plan *p, const Kernel *k, const CgOptions *o, CgLibGemm *c) {
  return lib_match(p, k, o, c, false);
}

bool cg_library_candidate(const Plan *p, const Kernel *k, const CgOptions *o) {
  CgLibGemm c;
  return o->library && lib_match(p, k, o, &c, true);
}
