/*
 * cublaslt.h — GEMMs that codegen gave to a library (CgLibGemm), run through cuBLASLt
 * (cublaslt.c) for the cuda backend: a call planned once and enqueued on a stream.
 */
#ifndef KILN_CUBLASLT_H
#define KILN_CUBLASLT_H

#include "cudadrv.h"
#include "../../codegen/codegen.h"

enum { CUDA_LT_MAX_CANDIDATES = 16 };

typedef struct CudaLtCall {
  CgLibGemm g;                 /* what to compute (codegen) */
  /* the library's objects */
  void *desc, *la, *lb, *ld;
  uint64_t algo[8];            /* the one cuda_lt_enqueue runs: cand[0] unless the caller picks another */
  uint64_t cand[CUDA_LT_MAX_CANDIDATES][8];  /* the heuristic's algorithms, its best guess first */
  int n_cand;
  CUdeviceptr pa, pb, pd, pbias;
} CudaLtCall;

/* Loads libcublasLt once per process (pthread_once) and creates its handle (needs the
 * CUDA context current). */
kiln_status cuda_lt_load(void);
/* Binds g to the device buffers (stage -> pointer) and asks the heuristic for up to
 * candidates algorithms (at most CUDA_LT_MAX_CANDIDATES) for a workspace of ws_bytes; the
 * first is the one enqueued. KILN_ERR_UNSUPPORTED: run the generated kernel instead. */
kiln_status cuda_lt_prepare(CudaLtCall *c, const CgLibGemm *g, const CUdeviceptr *buf, bool tf32, size_t ws_bytes,
                            int candidates);
kiln_status cuda_lt_enqueue(const CudaLtCall *c, CUstream s, CUdeviceptr ws, size_t ws_bytes);
void cuda_lt_release(CudaLtCall *c);

#endif
