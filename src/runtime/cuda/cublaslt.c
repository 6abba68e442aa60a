/*
 * cublaslt.c — plain f32, bf16 and f16 GEMMs through NVIDIA's cuBLASLt, loaded with dlopen
 * (libcublasLt.so.13, .so.12, .so; no NVIDIA header is included, the few types and
 * constants are declared here with CUDA 13's values). Takes a GEMM that codegen chose
 * for a library (CgLibGemm: which kernels qualify, and the cost rule, live there);
 * produces a library call with the same result.
 *
 * kiln's row-major
 * D[m, n] = A[m, k] B[k, n] is handed to the column-major library as D^T = B^T A^T, so
 * the bias vector runs along the library's rows. Strict f32 sums (CUBLAS_COMPUTE_32F) unless
 * options.tf32 (f32 operands only); 16-bit operands, bias and result are of one type. The
 * call is planned once (descriptors, heuristic algorithm, pointers bound), run once outside
 * capture so the library's lazy set-up happens there, and then enqueued on the program's
 * stream, inside its CUDA graph.
 */
#include "cublaslt.h"
#include <pthread.h>

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
  LT_R_32F = 0, LT_R_16F = 2, LT_R_16BF = 14,   /* cudaDataType */
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
static char lt_why[512];
static pthread_once_t lt_once = PTHREAD_ONCE_INIT;

static kiln_status lt_check(cublasStatus_t s, const char *call, const char *what) {
  if (s == 0) return KILN_OK;
  const char *name = lt.status_name ? lt.status_name(s) : NULL;
  return kiln_fail(KILN_ERR_DEVICE, "cuda: %s (%s): cuBLASLt status %d %s", call, what, s, name ? name : "");
}

static kiln_status lt_open(void) {
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
  return lt_check(lt.create(&lt.handle), "cublasLtCreate", "handle");
}

/* Once per process, whichever thread asks first (the CUDA context is current there). */
static void lt_load_once(void) {
  lt_state = lt_open();
  if (lt_state) snprintf(lt_why, sizeof lt_why, "%s", kiln_last_error());
}

kiln_status cuda_lt_load(void) {
  pthread_once(&lt_once, lt_load_once);
  return lt_state == KILN_OK ? KILN_OK : kiln_fail(lt_state, "%s", lt_why);
}

/* ---- planning and running a call ---- */

static kiln_status layout(void **l, int type, uint64_t rows, uint64_t cols, int64_t ld, int64_t batch, int64_t stride) {
  kiln_status st = lt_check(lt.layout_create(l, type, rows, cols, ld), "cublasLtMatrixLayoutCreate", "operand");
  int32_t n = (int32_t)batch;
  if (!st && batch > 1)
    st = lt_check(lt.layout_set(*l, LT_LAYOUT_BATCH_COUNT, &n, sizeof n), "cublasLtMatrixLayoutSetAttribute", "batch");
  if (!st && batch > 1)
    st = lt_check(lt.layout_set(*l, LT_LAYOUT_BATCH_OFFSET, &stride, sizeof stride), "cublasLtMatrixLayoutSetAttribute",
                  "batch stride");
  return st;
}

kiln_status cuda_lt_prepare(CudaLtCall *c, const CgLibGemm *g, const CUdeviceptr *buf, bool tf32, size_t ws_bytes,
                            int candidates) {
  memset(c, 0, sizeof *c);
  c->g = *g;
  if (c->g.bias_m) return kiln_fail(KILN_ERR_UNSUPPORTED, "cuda: cuBLASLt's bias runs along n only");
  if (c->g.batch > 2147483647 || c->g.M > 2147483647 || c->g.N > 2147483647)
    return kiln_fail(KILN_ERR_UNSUPPORTED, "cuda: GEMM too large for one cuBLASLt call");
  int type = c->g.elem == KILN_BF16 ? LT_R_16BF : c->g.elem == KILN_F16 ? LT_R_16F : LT_R_32F;
  CUdeviceptr es = type == LT_R_32F ? 4 : 2;
  c->pa = buf[c->g.a_stage] + (CUdeviceptr)c->g.a_off * es;
  c->pb = buf[c->g.b_stage] + (CUdeviceptr)c->g.b_off * es;
  c->pd = buf[c->g.d_stage] + (CUdeviceptr)c->g.d_off * es;
  c->pbias = c->g.bias_stage >= 0 ? buf[c->g.bias_stage] + (CUdeviceptr)c->g.bias_off * es : 0;
  /* the library's default heuristics assume 256-byte aligned matrices */
  if ((c->pa | c->pb | c->pd) % 256 || c->pbias % 16)
    return kiln_fail(KILN_ERR_UNSUPPORTED, "cuda: GEMM operand not 256-byte aligned");
  int compute = tf32 && type == LT_R_32F ? LT_COMPUTE_32F_FAST_TF32 : LT_COMPUTE_32F;
  kiln_status st = lt_check(lt.desc_create(&c->desc, compute, LT_R_32F), "cublasLtMatmulDescCreate", "GEMM");
  /* library view: D^T [N x M] = op(B^T) [N x K] * op(A^T) [K x M] */
  int32_t ta = c->g.b_t ? LT_OP_T : LT_OP_N, tb = c->g.a_t ? LT_OP_T : LT_OP_N;
  int32_t epi = (c->g.bias_stage >= 0 ? LT_EPI_BIAS : 0) | (c->g.relu ? LT_EPI_RELU : 0) | (c->g.gelu ? LT_EPI_GELU : 0);
  if (!epi) epi = LT_EPI_DEFAULT;
  if (!st) st = lt_check(lt.desc_set(c->desc, LT_DESC_TRANSA, &ta, sizeof ta), "cublasLtMatmulDescSetAttribute", "transa");
  if (!st) st = lt_check(lt.desc_set(c->desc, LT_DESC_TRANSB, &tb, sizeof tb), "cublasLtMatmulDescSetAttribute", "transb");
  if (!st) st = lt_check(lt.desc_set(c->desc, LT_DESC_EPILOGUE, &epi, sizeof epi), "cublasLtMatmulDescSetAttribute", "epilogue");
  if (!st && c->pbias) {
    const void *bp = (const void *)(uintptr_t)c->pbias;
    st = lt_check(lt.desc_set(c->desc, LT_DESC_BIAS_POINTER, &bp, sizeof bp), "cublasLtMatmulDescSetAttribute", "bias");
  }
  uint64_t M = (uint64_t)c->g.M, N = (uint64_t)c->g.N, K = (uint64_t)c->g.K;
  if (!st) st = layout(&c->la, type, c->g.b_t ? K : N, c->g.b_t ? N : K, c->g.ldb, c->g.batch, c->g.b_sb);
  if (!st) st = layout(&c->lb, type, c->g.a_t ? M : K, c->g.a_t ? K : M, c->g.lda, c->g.batch, c->g.a_sb);
  if (!st) st = layout(&c->ld, type, N, M, c->g.ldd, c->g.batch, c->g.d_sb);
  void *pref = NULL;
  if (!st) st = lt_check(lt.pref_create(&pref), "cublasLtMatmulPreferenceCreate", "GEMM");
  uint64_t ws = ws_bytes;
  if (!st) st = lt_check(lt.pref_set(pref, LT_PREF_MAX_WORKSPACE, &ws, sizeof ws), "cublasLtMatmulPreferenceSetAttribute", "workspace");
  LtHeuristic h[CUDA_LT_MAX_CANDIDATES];
  int found = 0, want = candidates < 1 ? 1 : candidates > CUDA_LT_MAX_CANDIDATES ? CUDA_LT_MAX_CANDIDATES : candidates;
  if (!st) st = lt_check(lt.heuristic(lt.handle, c->desc, c->la, c->lb, c->ld, c->ld, pref, want, h, &found),
                         "cublasLtMatmulAlgoGetHeuristic", "GEMM");
  if (pref) lt.pref_destroy(pref);
  for (int i = 0; !st && i < found && i < want; i++)  /* the heuristic's order; a result it marks failed is left out */
    if (h[i].state == 0) memcpy(c->cand[c->n_cand++], &h[i].algo, sizeof h[i].algo);
  if (!st && c->n_cand < 1) st = kiln_fail(KILN_ERR_UNSUPPORTED, "cuda: cuBLASLt has no algorithm for this GEMM");
  if (!st) memcpy(c->algo, c->cand[0], sizeof c->algo);
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
