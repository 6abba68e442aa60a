/*
 * cublaslt.c — plain f32 GEMMs through NVIDIA's cuBLASLt, loaded with dlopen
 * (libcublasLt.so.13, .so.12, .so; no NVIDIA header is included, the few types and
 * constants are declared here with CUDA 13's values). Takes a plan kernel that
 * gemm_cuda.c would tile; produces a library call when the kernel is a plain strided
 * (batched) product whose result, optionally plus a bias over n and through a relu or
 * tanh GELU, is the one thing the kernel stores, and the cost rule says the library wins
 * (M*N*K*batch >= 2^26: below that the generated tile kernel is as fast and saves the
 * library's fixed cost).
 *
 * How a kernel maps: each operand is one load whose element offset is affine in the
 * flat m (or n), k and batch indices (checked at probe points); kiln's row-major
 * D[m, n] = A[m, k] B[k, n] is handed to the column-major library as D^T = B^T A^T, so
 * the bias vector runs along the library's rows. Strict f32 (CUBLAS_COMPUTE_32F) unless
 * options.tf32. The call is planned once (descriptors, heuristic algorithm, pointers
 * bound), run once outside capture so the library's lazy set-up happens there, and then
 * enqueued on the program's stream, inside its CUDA graph.
 */
#include "cublaslt.h"
#include "../../codegen/codegen.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

typedef int cublasStatus_t;  /* 0 is CUBLAS_STATUS_SUCCESS */
typedef struct { uint64_t data[8]; } LtAlgo;
typedef struct {
  LtAlgo algo;
  size_t workspace;
  cublasStatus_t state;
  float waves;
  int reserved[4];
} LtHeuristic;

enum {
  LT_R_32F = 0,               /* cudaDataType CUDA_R_32F */
  LT_COMPUTE_32F = 68,        /* cublasComputeType_t */
  LT_COMPUTE_32F_FAST_TF32 = 77,
  LT_OP_N = 0, LT_OP_T = 1,
  LT_DESC_TRANSA = 3, LT_DESC_TRANSB = 4, LT_DESC_EPILOGUE = 7, LT_DESC_BIAS_POINTER = 8,
  LT_EPI_DEFAULT = 1, LT_EPI_RELU = 2, LT_EPI_BIAS = 4, LT_EPI_GELU = 32,
  LT_LAYOUT_BATCH_COUNT = 5, LT_LAYOUT_BATCH_OFFSET = 6,
  LT_PREF_MAX_WORKSPACE = 1,
};

typedef struct CudaLt {
  cublasStatus_t (*create)(void **h);
  cublasStatus_t (*desc_create)(void **d, int compute, int scale);
  cublasStatus_t (*desc_destroy)(void *d);
  cublasStatus_t (*desc_set)(void *d, int attr, const void *v, size_t n);
  cublasStatus_t (*layout_create)(void **l, int type, uint64_t rows, uint64_t cols, int64_t ld);
  cublasStatus_t (*layout_destroy)(void *l);
  cublasStatus_t (*layout_set)(void *l, int attr, const void *v, size_t n);
  cublasStatus_t (*pref_create)(void **p);
  cublasStatus_t (*pref_destroy)(void *p);
  cublasStatus_t (*pref_set)(void *p, int attr, const void *v, size_t n);
  cublasStatus_t (*heuristic)(void *h, void *desc, void *a, void *b, void *c, void *d, void *pref, int n,
                              LtHeuristic *out, int *found);
  cublasStatus_t (*matmul)(void *h, void *desc, const void *alpha, const void *A, void *la, const void *B, void *lb,
                           const void *beta, const void *C, void *lc, void *D, void *ld, const LtAlgo *algo,
                           void *ws, size_t ws_bytes, CUstream s);
  const char *(*status_name)(cublasStatus_t s);
  void *lib;
  void *handle;
} CudaLt;

static CudaLt lt;
static kiln_status lt_state = KILN_ERR_DEVICE;
static bool lt_tried;

static kiln_status lt_check(cublasStatus_t s, const char *call, const char *what) {
  if (s == 0) return KILN_OK;
  const char *name = lt.status_name ? lt.status_name(s) : NULL;
  return kiln_fail(KILN_ERR_DEVICE, "cuda: %s (%s): cuBLASLt status %d %s", call, what, s, name ? name : "");
}

kiln_status cuda_lt_load(void) {
  if (lt_tried) return lt_state == KILN_OK ? KILN_OK : kiln_fail(KILN_ERR_DEVICE, "cuda: cuBLASLt is not available");
  lt_tried = true;
  static const char *const names[] = { "libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so" };
  for (int i = 0; i < 3 && !lt.lib; i++) lt.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!lt.lib) return kiln_fail(KILN_ERR_DEVICE, "cuda: cannot load libcublasLt (%s)", dlerror());
  static const char *const syms[] = {
    "cublasLtCreate", "cublasLtMatmulDescCreate", "cublasLtMatmulDescDestroy", "cublasLtMatmulDescSetAttribute",
    "cublasLtMatrixLayoutCreate", "cublasLtMatrixLayoutDestroy", "cublasLtMatrixLayoutSetAttribute",
    "cublasLtMatmulPreferenceCreate", "cublasLtMatmulPreferenceDestroy", "cublasLtMatmulPreferenceSetAttribute",
    "cublasLtMatmulAlgoGetHeuristic", "cublasLtMatmul", "cublasLtGetStatusName",
  };
  void **slot[] = { (void **)&lt.create, (void **)&lt.desc_create, (void **)&lt.desc_destroy, (void **)&lt.desc_set,
                    (void **)&lt.layout_create, (void **)&lt.layout_destroy, (void **)&lt.layout_set,
                    (void **)&lt.pref_create, (void **)&lt.pref_destroy, (void **)&lt.pref_set,
                    (void **)&lt.heuristic, (void **)&lt.matmul, (void **)&lt.status_name };
  for (size_t i = 0; i < sizeof syms / sizeof *syms; i++) {
    *slot[i] = dlsym(lt.lib, syms[i]);
    if (!*slot[i]) return kiln_fail(KILN_ERR_DEVICE, "cuda: libcublasLt lacks %s", syms[i]);
  }
  kiln_status st = lt_check(lt.create(&lt.handle), "cublasLtCreate", "handle");
  if (!st) lt_state = KILN_OK;
  return st;
}

/* ---- matching a plan kernel ---- */

/* Values of the kernel's vars for flat m, n, k and batch indices (digits of each over the
 * vars of its role, as gemm_cuda.c decomposes them). */
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
    int64_t stride = 1;
    if (!te_range(L->args[i], v, v, nv, &mn, &mx) || mn != mx) return false;
    for (int j = i + 1; j < S->rank; j++) stride *= S->shape[j];
    o += mn * stride;
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

static bool is_memory_load(const Plan *p, const Kernel *k, const Expr *e) {
  return e->kind == EX_LOAD && p->kernel_of[e->src] != k->id && !plan_is_baked(p->te, e->src) &&
         p->te->stages[e->src].dtype == KILN_F32;
}

/* A load of this kernel's accumulated stage at the current point. */
static bool is_acc(const Plan *p, const Kernel *k, const Expr *e, int acc_stage) {
  (void)p;
  if (e->kind != EX_LOAD || e->src != acc_stage) return false;
  for (int i = 0; i < e->n_args; i++)
    if (e->args[i]->kind != EX_VAR || e->args[i]->var != i) return false;
  return k->rank == e->n_args;
}

/* y when e is kiln's tanh GELU of y (te/lower.c's OP_GELU_TANH), else NULL: the candidate y
 * is read off e's x/2 factor, the GELU of it rebuilt, and hash-consing makes equal
 * expressions one node. cuBLASLt's GELU epilogue is the same tanh form. */
static const Expr *gelu_of(TE *te, const Expr *e) {
  if (e->kind != EX_BINARY || e->op != TB_MUL || e->dtype != KILN_F32) return NULL;
  for (int s = 0; s < 2; s++) {
    const Expr *h = e->args[s];
    if (h->kind != EX_BINARY || h->op != TB_MUL) continue;
    for (int u = 0; u < 2; u++) {
      const Expr *half = h->args[u];
      Expr *y = h->args[1 - u];
      if (half->kind != EX_CONST || half->c.f != 0.5) continue;
      Expr *x3 = te_binary(te, TB_MUL, te_binary(te, TB_MUL, y, y), y);
      Expr *in = x3 ? te_binary(te, TB_ADD, y, te_binary(te, TB_MUL, x3, te_const_f(te, KILN_F32, 0.044715))) : NULL;
      Expr *th = in ? te_unary(te, TU_TANH, te_binary(te, TB_MUL, in, te_const_f(te, KILN_F32, 0.7978845608028654))) : NULL;
      Expr *hh = te_binary(te, TB_MUL, y, te_const_f(te, KILN_F32, 0.5));
      Expr *g = th && hh ? te_binary(te, TB_MUL, hh, te_binary(te, TB_ADD, th, te_const_f(te, KILN_F32, 1.0))) : NULL;
      if (g == e) return y;
    }
  }
  return NULL;
}

/* The stored item's body: [relu|gelu](acc [+ bias[n]]), in either operand order. */
static bool epilogue(const Plan *p, const Kernel *k, const CgGemm *g, const Expr *e, int acc_stage, CudaLtCall *c) {
  const Expr *y;
  if (e->kind == EX_BINARY && e->op == TB_MAX && e->args[1]->kind == EX_CONST && e->args[1]->c.f == 0) {
    c->relu = true;
    e = e->args[0];
  } else if ((y = gelu_of(p->te, e))) {
    c->gelu = true;
    e = y;
  }
  if (is_acc(p, k, e, acc_stage)) return true;
  if (e->kind != EX_BINARY || e->op != TB_ADD) return false;
  const Expr *b = is_acc(p, k, e->args[0], acc_stage) ? e->args[1] : is_acc(p, k, e->args[1], acc_stage) ? e->args[0] : NULL;
  Affine a;
  if (!b || !is_memory_load(p, k, b) || !affine(p, k, g, b, NULL, &a)) return false;
  if (a.sm || a.sk || a.sb || a.sn != 1) return false;  /* bias[n], shared by every row and batch */
  c->bias_stage = b->src, c->bias_off = a.base;
  return true;
}

bool cuda_lt_match(const Plan *p, const Kernel *k, CudaLtCall *c) {
  CgGemm g;
  if (!cg_gemm_match(p, k, &g)) return false;
  double work = (double)g.M * (double)g.N * (double)g.K * (double)g.batch;
  if (work < 67108864.0) return false;  /* 2^26 multiply-adds */
  if (!is_memory_load(p, k, g.a) || !is_memory_load(p, k, g.b)) return false;
  memset(c, 0, sizeof *c);
  c->bias_stage = -1;
  c->M = g.M, c->N = g.N, c->K = g.K, c->batch = g.batch;
  const Item *acc = &k->items[g.acc_item], *out = NULL;
  for (int i = 0; i < k->n_items; i++) {
    if (!k->items[i].store) continue;
    if (out) return false;  /* one stored result only */
    out = &k->items[i];
  }
  if (!out || !out->offset) return false;
  if (out != acc && !epilogue(p, k, &g, out->body, acc->stage, c)) return false;
  if (out != acc && k->n_items != 2) return false;  /* no other values in between */
  Affine a, b, d;
  if (!affine(p, k, &g, g.a, NULL, &a) || !affine(p, k, &g, g.b, NULL, &b) || !affine(p, k, &g, NULL, out->offset, &d))
    return false;
  if (a.sn || b.sm || d.sk || d.sn != 1 || d.sm < g.N) return false;
  /* A [m, k]: along k (library op N on its [K x M] view) or along m (op T on [M x K]) */
  if (a.sk == 1 && a.sm >= g.K) c->a_t = false, c->lda = a.sm;
  else if (a.sm == 1 && a.sk >= g.M) c->a_t = true, c->lda = a.sk;
  else return false;
  if (b.sn == 1 && b.sk >= g.N) c->b_t = false, c->ldb = b.sk;
  else if (b.sk == 1 && b.sn >= g.K) c->b_t = true, c->ldb = b.sn;
  else return false;
  c->a_stage = g.a->src, c->b_stage = g.b->src, c->d_stage = out->stage;
  c->a_off = a.base, c->b_off = b.base, c->d_off = d.base;
  c->a_sb = a.sb, c->b_sb = b.sb, c->d_sb = d.sb, c->ldd = d.sm;
  return true;
}

/* ---- planning and running a call ---- */

static kiln_status layout(void **l, uint64_t rows, uint64_t cols, int64_t ld, int64_t batch, int64_t stride) {
  kiln_status st = lt_check(lt.layout_create(l, LT_R_32F, rows, cols, ld), "cublasLtMatrixLayoutCreate", "operand");
  int32_t n = (int32_t)batch;
  if (!st && batch > 1)
    st = lt_check(lt.layout_set(*l, LT_LAYOUT_BATCH_COUNT, &n, sizeof n), "cublasLtMatrixLayoutSetAttribute", "batch");
  if (!st && batch > 1)
    st = lt_check(lt.layout_set(*l, LT_LAYOUT_BATCH_OFFSET, &stride, sizeof stride), "cublasLtMatrixLayoutSetAttribute",
                  "batch stride");
  return st;
}

kiln_status cuda_lt_prepare(CudaLtCall *c, const CUdeviceptr *buf, bool tf32, size_t ws_bytes) {
  if (c->batch > 2147483647 || c->M > 2147483647 || c->N > 2147483647)
    return kiln_fail(KILN_ERR_UNSUPPORTED, "cuda: GEMM too large for one cuBLASLt call");
  c->pa = buf[c->a_stage] + (CUdeviceptr)c->a_off * 4;
  c->pb = buf[c->b_stage] + (CUdeviceptr)c->b_off * 4;
  c->pd = buf[c->d_stage] + (CUdeviceptr)c->d_off * 4;
  c->pbias = c->bias_stage >= 0 ? buf[c->bias_stage] + (CUdeviceptr)c->bias_off * 4 : 0;
  /* the library's default heuristics assume 256-byte aligned matrices */
  if ((c->pa | c->pb | c->pd) % 256 || c->pbias % 16)
    return kiln_fail(KILN_ERR_UNSUPPORTED, "cuda: GEMM operand not 256-byte aligned");
  kiln_status st = lt_check(lt.desc_create(&c->desc, tf32 ? LT_COMPUTE_32F_FAST_TF32 : LT_COMPUTE_32F, LT_R_32F),
                            "cublasLtMatmulDescCreate", "GEMM");
  /* library view: D^T [N x M] = op(B^T) [N x K] * op(A^T) [K x M] */
  int32_t ta = c->b_t ? LT_OP_T : LT_OP_N, tb = c->a_t ? LT_OP_T : LT_OP_N;
  int32_t epi = (c->bias_stage >= 0 ? LT_EPI_BIAS : 0) | (c->relu ? LT_EPI_RELU : 0) | (c->gelu ? LT_EPI_GELU : 0);
  if (!epi) epi = LT_EPI_DEFAULT;
  if (!st) st = lt_check(lt.desc_set(c->desc, LT_DESC_TRANSA, &ta, sizeof ta), "cublasLtMatmulDescSetAttribute", "transa");
  if (!st) st = lt_check(lt.desc_set(c->desc, LT_DESC_TRANSB, &tb, sizeof tb), "cublasLtMatmulDescSetAttribute", "transb");
  if (!st) st = lt_check(lt.desc_set(c->desc, LT_DESC_EPILOGUE, &epi, sizeof epi), "cublasLtMatmulDescSetAttribute", "epilogue");
  if (!st && c->pbias) {
    const void *bp = (const void *)(uintptr_t)c->pbias;
    st = lt_check(lt.desc_set(c->desc, LT_DESC_BIAS_POINTER, &bp, sizeof bp), "cublasLtMatmulDescSetAttribute", "bias");
  }
  uint64_t M = (uint64_t)c->M, N = (uint64_t)c->N, K = (uint64_t)c->K;
  if (!st) st = layout(&c->la, c->b_t ? K : N, c->b_t ? N : K, c->ldb, c->batch, c->b_sb);
  if (!st) st = layout(&c->lb, c->a_t ? M : K, c->a_t ? K : M, c->lda, c->batch, c->a_sb);
  if (!st) st = layout(&c->ld, N, M, c->ldd, c->batch, c->d_sb);
  void *pref = NULL;
  if (!st) st = lt_check(lt.pref_create(&pref), "cublasLtMatmulPreferenceCreate", "GEMM");
  uint64_t ws = ws_bytes;
  if (!st) st = lt_check(lt.pref_set(pref, LT_PREF_MAX_WORKSPACE, &ws, sizeof ws), "cublasLtMatmulPreferenceSetAttribute", "workspace");
  LtHeuristic h;
  int found = 0;
  if (!st) st = lt_check(lt.heuristic(lt.handle, c->desc, c->la, c->lb, c->ld, c->ld, pref, 1, &h, &found),
                         "cublasLtMatmulAlgoGetHeuristic", "GEMM");
  if (pref) lt.pref_destroy(pref);
  if (!st && (found < 1 || h.state != 0)) st = kiln_fail(KILN_ERR_UNSUPPORTED, "cuda: cuBLASLt has no algorithm for this GEMM");
  if (!st) memcpy(c->algo, &h.algo, sizeof h.algo);
  if (st) cuda_lt_release(c);
  return st;
}

kiln_status cuda_lt_enqueue(const CudaLtCall *c, CUstream s, CUdeviceptr ws, size_t ws_bytes) {
  static const float one = 1.0f, zero = 0.0f;
  LtAlgo algo;
  memcpy(&algo, c->algo, sizeof algo);
  const void *A = (const void *)(uintptr_t)c->pb, *B = (const void *)(uintptr_t)c->pa;
  void *D = (void *)(uintptr_t)c->pd;
  return lt_check(lt.matmul(lt.handle, c->desc, &one, A, c->la, B, c->lb, &zero, D, c->ld, D, c->ld, &algo,
                            (void *)(uintptr_t)ws, ws_bytes, s),
                  "cublasLtMatmul", "GEMM");
}

void cuda_lt_release(CudaLtCall *c) {
  if (c->la) lt.layout_destroy(c->la);
  if (c->lb) lt.layout_destroy(c->lb);
  if (c->ld) lt.layout_destroy(c->ld);
  if (c->desc) lt.desc_destroy(c->desc);
  c->la = c->lb = c->ld = c->desc = NULL;
}
