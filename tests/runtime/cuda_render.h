/*
 * cuda_render.h — what the CUDA codegen tests share: lower, plan and render a graph in the
 * CUDA dialect (fused or eager), compile the source with NVRTC for sm_90 (no GPU needed),
 * and run in a private NVRTC cache folder. Without NVRTC a test prints "skip" and passes.
 */
#ifndef KILN_TEST_CUDA_RENDER_H
#define KILN_TEST_CUDA_RENDER_H

#include "test.h"
#include "codegen/codegen.h"
#include "runtime/cuda/cudadrv.h"

#include <string.h>
#include <unistd.h>

typedef struct CudaRender { TE *te; Plan *p; StrBuf src; } CudaRender;

/* True when every stage succeeded and r->src holds the source (failures are CHECKs). */
static bool cr_render(kiln_graph *g, int fuse, CudaRender *r) {
  *r = (CudaRender){0};
  kiln_options o = kiln_options_default();
  o.fuse = fuse;
  PlanOptions po = plan_options(&o);
  OK(te_lower(&g->g, &r->te));
  if (r->te) OK(plan_build(r->te, &po, &r->p));
  if (r->p) OK(cg_render_plan(r->p, &cg_dialect_cuda, NULL, NULL, &r->src));
  return r->p && r->src.s;
}

/* NVRTC for sm_90; the status, with the message in the last error. */
static kiln_status cr_compile(const CudaRender *r) {
  void *bin = NULL;
  size_t n = 0;
  bool hit;
  kiln_status st = cuda_compile(r->src.s, "sm_90", 0, NULL, &bin, &n, &hit);
  kiln_free(bin);
  return st;
}

static void cr_free(CudaRender *r) {
  sb_free(&r->src);
  plan_free(r->p);
  te_free(r->te);
  *r = (CudaRender){0};
}

/* False (after printing "skip") without NVRTC; else points the cache at a fresh folder. */
static bool cr_begin(const char *tag, char *dir, size_t n) {
  CudaNvrtc *nv;
  if (cuda_nvrtc(&nv) != KILN_OK) {
    printf("skip: no NVRTC (%s)\n", kiln_last_error());
    return false;
  }
  snprintf(dir, n, "/tmp/kiln-test-%s-%ld", tag, (long)getpid());
  setenv("KILN_CACHE_DIR", dir, 1);
  return true;
}

static void cr_end(const char *dir) {
  char cmd[200];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

#endif
