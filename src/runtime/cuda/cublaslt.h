/*
 * cublaslt.h — plain f32 GEMMs of a plan through cuBLASLt (cublaslt.c), for the cuda
 * backend: which kernels qualify, and a call planned once and enqueued on a stream.
 */
#ifndef KILN_CUBLASLT_H
#define KILN_CUBLASLT_H

#include "cudadrv.h"
#include "../../plan/plan.h"

typedef struct CudaLtCall {
  /* from the plan: kiln's D[m, n] (+ bias[n], relu or gelu) = sum_k A[m, k] B[k, n], per batch */
  int a_stage, b_stage, d_stage, bias_stage;   /* bias_stage -1: none */
  int64_t M, N, K, batch;
  int64_t a_off, b_off, d_off, bias_off;       /* element offsets into the stages */
  int64_t lda, ldb, ldd;                       /* leading dimensions (elements) */
  int64_t a_sb, b_sb, d_sb;                    /* batch strides (elements) */
  bool a_t, b_t;                               /* A stored along m (k strided), B along k */
  bool relu, gelu;
  /* the library's objects */
  void *desc, *la, *lb, *ld;
  uint64_t algo[8];
  CUdeviceptr pa, pb, pd, pbias;
} CudaLtCall;

/* Loads libcublasLt once and creates its handle (needs the CUDA context current). */
kiln_status cuda_lt_load(void);
/* Does kernel k run best as a library GEMM? Fills c's plan part. */
bool cuda_lt_match(const Plan *p, const Kernel *k, CudaLtCall *c);
/* Binds c to the device buffers (stage -> pointer) and picks an algorithm for a
 * workspace of ws_bytes. KILN_ERR_UNSUPPORTED: run the generated kernel instead. */
kiln_status cuda_lt_prepare(CudaLtCall *c, const CUdeviceptr *buf, bool tf32, size_t ws_bytes);
kiln_status cuda_lt_enqueue(const CudaLtCall *c, CUstream s, CUdeviceptr ws, size_t ws_bytes);
void cuda_lt_release(CudaLtCall *c);

#endif
