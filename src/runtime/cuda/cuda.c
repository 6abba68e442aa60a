/*
 * cuda.c — the cuda backend (rt_backend_cuda). Takes a TE, plans it, renders every
 * kernel in the CUDA C dialect into one translation unit, compiles that once with
 * NVRTC (cached on disk) and loads it; parameters are uploaded once and stay
 * resident, intermediates live in one device arena, and the whole schedule is
 * captured into a CUDA graph so that a run is one launch and one wait.
 *
 * Until the planner and renderer land, compile() says so; probe() already tells
 * whether a GPU, its driver and NVRTC are there.
 */
#include "cudadrv.h"
#include "../runtime.h"

static kiln_status cuda_probe(void) {
  CudaDriver *d;
  CudaNvrtc *r;
  kiln_status st = cuda_driver(&d);
  if (st) return st;
  return cuda_nvrtc(&r);
}

static kiln_status cuda_compile_te(const TE *te, const kiln_options *o, void **exec, kiln_census *c) {
  (void)te, (void)o, (void)exec, (void)c;
  kiln_status st = cuda_probe();
  if (st) return st;
  return kiln_fail(KILN_ERR_UNSUPPORTED, "cuda: this build has no planner yet, so no graph can be compiled");
}

static kiln_status cuda_run(void *exec, const void *const *in, void *const *out, kiln_census *c) {
  (void)exec, (void)in, (void)out, (void)c;
  return kiln_fail(KILN_ERR_UNSUPPORTED, "cuda: nothing compiled");
}

static kiln_status cuda_read_param(void *exec, int stage, void *dst) {
  (void)exec, (void)stage, (void)dst;
  return kiln_fail(KILN_ERR_UNSUPPORTED, "cuda: nothing compiled");
}

static void cuda_free(void *exec) { (void)exec; }

const Backend rt_backend_cuda = {
  .name = "cuda",
  .probe = cuda_probe,
  .compile = cuda_compile_te,
  .run = cuda_run,
  .read_param = cuda_read_param,
  .print = NULL,
  .free = cuda_free,
};
