/*
 * cuda.c — the cuda backend's device hooks, over the CUDA driver API and NVRTC (both
 * loaded with dlopen, see driver.c): per program one stream and two events; memory is
 * device memory (cuMemAlloc), copies are asynchronous on the stream; a module is the
 * plan's CUDA C compiled by NVRTC (cached on disk, nvrtc.c) and loaded; a launch is
 * cuLaunchKernel with the geometry codegen decided; the recorded schedule is a CUDA graph
 * captured from the stream, so a run is one graph launch and one wait; library GEMMs go
 * to cuBLASLt (cublaslt.c). What runs where, and when, is the pipeline's (schedule.c).
 */
#include "cudadrv.h"
#include "cublaslt.h"
#include "../runtime.h"

#include <stdlib.h>
#include <string.h>

enum { LT_WORKSPACE = 32 << 20, MAX_ARGS = 256 };
/* a timed candidate: this many calls in one graph, so that the calls' own time is timed, not the host's
 * enqueueing (a small GEMM takes less time on the device than cublasLtMatmul takes to enqueue it) */
enum { LT_TIMED_CALLS = 20 };
_Static_assert((int)RT_LT_MAX_ALGOS <= (int)CUDA_LT_MAX_CANDIDATES, "cuda_lt_algos asks for more candidates than a call keeps");

typedef struct CudaDev {
  CudaDriver *d;
  CUstream stream;
  CUevent ev[2];               /* around the schedule: the census's device_ms */
  CUdeviceptr lt_ws;           /* cuBLASLt workspace, shared by the program's library GEMMs */
  bool tf32, fma;
  bool pdl;                    /* programmatic dependent launch between kernels (cuda_pdl) */
  int lt_algos;                /* library GEMMs: candidates timed at load (cuda_lt_algos; 1 the heuristic's first) */
  int debug;                   /* kiln_options.debug: each timed GEMM's choice on stderr */
  char cache_dir[1024];        /* where timed choices are kept (kiln_options.cache_dir; "" or no_cache: nowhere) */
  /* collectives: NCCL's calls on a stream of their own, forked from the program's stream by
   * an event and joined back by one event a bucket (made on first use) */
  CUstream comm;
  CUevent fork;
  CUevent *done; int n_done;
} CudaDev;

typedef struct CudaGraph { CUgraph graph; CUgraphExec exec; } CudaGraph;

static kiln_status cuda_probe(void) {
  CudaDriver *d;
  CudaNvrtc *r;
  kiln_status st = cuda_driver(&d);
  if (st) return st;
  return cuda_nvrtc(&r);
}

static void cuda_close(void *dev) {
  CudaDev *x = dev;
  if (!x) return;
  CudaDriver *d = x->d;
  if (d && x->stream) d->cuStreamSynchronize(x->stream);
  if (d && x->lt_ws) d->cuMemFree(x->lt_ws);
  for (int i = 0; d && i < 2; i++)
    if (x->ev[i]) d->cuEventDestroy(x->ev[i]);
  if (d && x->comm) d->cuStreamSynchronize(x->comm), d->cuStreamDestroy(x->comm);
  if (d && x->fork) d->cuEventDestroy(x->fork);
  for (int i = 0; d && i < x->n_done; i++)
    if (x->done[i]) d->cuEventDestroy(x->done[i]);
  kiln_free(x->done);
  if (d && x->stream) d->cuStreamDestroy(x->stream);
  kiln_free(x);
}

static kiln_status cuda_open(const kiln_options *o, void **dev) {
  CudaDev *x = kiln_calloc(1, sizeof *x);
  if (!x) return kiln_fail(KILN_ERR_NO_MEMORY, "cuda: no memory for a program");
  x->tf32 = o->tf32 != 0;
  x->fma = o->cuda_fma != 0 || x->tf32;
  x->pdl = o->cuda_pdl != 0;
  x->lt_algos = o->cuda_lt_algos < 1 ? 1 : o->cuda_lt_algos > RT_LT_MAX_ALGOS ? RT_LT_MAX_ALGOS : o->cuda_lt_algos;
  x->debug = o->debug;
  if (!o->no_cache) snprintf(x->cache_dir, sizeof x->cache_dir, "%s", o->cache_dir);
  CudaNvrtc *r;
  kiln_status st = cuda_driver(&x->d);
  if (!st) st = cuda_nvrtc(&r);
  if (!st) st = cuda_check(x->d->cuStreamCreate(&x->stream, CUDRV_STREAM_NON_BLOCKING), "cuStreamCreate", "program");
  for (int i = 0; i < 2 && !st; i++) st = cuda_check(x->d->cuEventCreate(&x->ev[i], 0), "cuEventCreate", "program");
  if (st) { cuda_close(x); return st; }
  *dev = x;
  return KILN_OK;
}

static kiln_status cuda_alloc(void *dev, int64_t bytes, const char *what, RtBuf *out) {
  CudaDev *x = dev;
  /* A zero-sized tensor still gets a distinct, valid address. */
  return cuda_check(x->d->cuMemAlloc(out, (size_t)(bytes < 256 ? 256 : bytes)), "cuMemAlloc", what);
}

static void cuda_release(void *dev, RtBuf b) {
  CudaDev *x = dev;
  x->d->cuMemFree(b);
}

static kiln_status cuda_upload(void *dev, RtBuf dst, const void *src, int64_t n, const char *what) {
  CudaDev *x = dev;
  return cuda_check(x->d->cuMemcpyHtoDAsync(dst, src, (size_t)n, x->stream), "cuMemcpyHtoDAsync", what);
}

static kiln_status cuda_download(void *dev, void *dst, RtBuf src, int64_t n, const char *what) {
  CudaDev *x = dev;
  return cuda_check(x->d->cuMemcpyDtoHAsync(dst, src, (size_t)n, x->stream), "cuMemcpyDtoHAsync", what);
}

static kiln_status cuda_copy(void *dev, RtBuf dst, RtBuf src, int64_t n, const char *what) {
  CudaDev *x = dev;
  return cuda_check(x->d->cuMemcpyDtoDAsync(dst, src, (size_t)n, x->stream), "cuMemcpyDtoDAsync", what);
}

/* kiln runs on its device's primary context ($KILN_CUDA_DEVICE), the one PyTorch and other
 * runtimes share. */
static void cuda_where(void *dev, int *device_type, int *device_id, unsigned long long *stream) {
  CudaDev *x = dev;
  *device_type = 2, *device_id = x->d->ordinal, *stream = (unsigned long long)(uintptr_t)x->stream;
}

/* Memory another library wrote: its stream is waited for first (1 is the legacy default
 * stream, as DLPack numbers it and as the driver's CU_STREAM_LEGACY is), so the copy on
 * kiln's stream reads what that work left. */
static kiln_status cuda_copy_after(void *dev, RtBuf dst, RtBuf src, int64_t n, unsigned long long stream, const char *what) {
  CudaDev *x = dev;
  CUstream theirs = (CUstream)(uintptr_t)stream;
  if (theirs != x->stream) {
    kiln_status st = cuda_check(x->d->cuStreamSynchronize(theirs), "cuStreamSynchronize", what);
    if (st) return st;
  }
  return cuda_copy(dev, dst, src, n, what);
}

static kiln_status cuda_build(void *dev, const char *src, size_t len, const kiln_options *o, void **module, bool *hit) {
  CudaDev *x = dev;
  (void)len;
  char arch[32];
  cuda_arch_name(x->d, arch, sizeof arch);
  const char *opts[1];
  int n_opts = 0;
  /* strict f32 by default: no multiply-add contraction (cuda_fma races it; tf32 implies it) */
  if (!o->tf32 && !o->cuda_fma) opts[n_opts++] = "--fmad=false";
  void *cubin = NULL;
  size_t size = 0;
  kiln_status st = cuda_compile_cached(src, arch, n_opts, opts, o->cache_dir, o->no_cache != 0, &cubin, &size, hit);
  if (st) {
    /* "kiln.cu(123): error": the kernel whose source holds that line */
    const char *at = strstr(kiln_last_error(), "kiln.cu(");
    int k = at ? rt_kernel_at_line(src, strtol(at + 8, NULL, 10)) : -1;
    if (k >= 0) kiln_error_prefix("kernel kiln_k%d: ", k);
    return st;
  }
  CUmodule mod = NULL;
  st = cuda_check(x->d->cuModuleLoadData(&mod, cubin), "cuModuleLoadData", "the plan's kernels");
  kiln_free(cubin);
  *module = mod;
  return st;
}

static void cuda_unload(void *dev, void *module) {
  CudaDev *x = dev;
  x->d->cuModuleUnload(module);
}

static kiln_status cuda_lookup(void *dev, void *module, const CgLaunch *l, void **fn) {
  CudaDev *x = dev;
  CUfunction f;
  kiln_status st = cuda_check(x->d->cuModuleGetFunction(&f, module, l->name), "cuModuleGetFunction", l->name);
  int max_threads = 1024;
  if (!st) st = cuda_check(x->d->cuFuncGetAttribute(&max_threads, CUDRV_FUNC_ATTR_MAX_THREADS, f), "cuFuncGetAttribute",
                           "max threads per block");
  if (st) return st;
  if (l->block > (max_threads & ~31))
    return kiln_fail(KILN_ERR_DEVICE, "cuda: kernel %d needs %d threads per block, the compiled code allows %d", l->kernel,
                     l->block, max_threads & ~31);
  if (l->n_params > MAX_ARGS)
    return kiln_fail(KILN_ERR_UNSUPPORTED, "cuda: kernel %d has %d parameters (at most %d)", l->kernel, l->n_params, MAX_ARGS);
  if (l->smem > 0)  /* over 48 KB of dynamic shared memory needs the opt-in */
    st = cuda_check(x->d->cuFuncSetAttribute(f, CUDRV_FUNC_ATTR_MAX_DYN_SMEM, l->smem), "cuFuncSetAttribute",
                    "dynamic shared memory");
  if (!st && l->smem_carveout > 0) {
    enum { ATTR_PREFERRED_SMEM_CARVEOUT = 9 };  /* CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, percent */
    st = cuda_check(x->d->cuFuncSetAttribute(f, ATTR_PREFERRED_SMEM_CARVEOUT, l->smem_carveout), "cuFuncSetAttribute",
                    "shared memory carveout");
  }
  *fn = f;
  return st;
}

static kiln_status cuda_launch(void *dev, void *fn, const CgLaunch *l, const RtBuf *args) {
  CudaDev *x = dev;
  void *argp[MAX_ARGS];
  for (int i = 0; i < l->n_params; i++) argp[i] = (void *)&args[i];
  char what[48];
  snprintf(what, sizeof what, "kernel %s", l->name);
  if (x->pdl && x->d->cuLaunchKernelEx && x->d->cc_major >= 9) {
    /* Programmatic dependent launch: this kernel may be launched while the one before is
     * still running; every kernel starts by waiting for its predecessor to finish and flush
     * (griddepcontrol.wait, the renderer's kernel_entry), so only the launch overlaps. */
    CUlaunchAttr at[2] = { { .id = CUDRV_LAUNCH_ATTR_PROGRAMMATIC_SERIALIZATION, .value.flag = 1 } };
    unsigned n = 1;
    if (l->cooperative) at[n++] = (CUlaunchAttr){ .id = CUDRV_LAUNCH_ATTR_COOPERATIVE, .value.flag = 1 };
    CUlaunchCfg cfg = { (unsigned)l->grid, 1, 1, (unsigned)l->block, 1, 1, (unsigned)l->smem, x->stream, at, n };
    return cuda_check(x->d->cuLaunchKernelEx(&cfg, fn, argp, NULL), "cuLaunchKernelEx", what);
  }
  if (l->cooperative)
    return cuda_check(x->d->cuLaunchCooperativeKernel(fn, (unsigned)l->grid, 1, 1, (unsigned)l->block, 1, 1,
                                                      (unsigned)l->smem, x->stream, argp),
                      "cuLaunchCooperativeKernel", what);
  return cuda_check(x->d->cuLaunchKernel(fn, (unsigned)l->grid, 1, 1, (unsigned)l->block, 1, 1, (unsigned)l->smem,
                                         x->stream, argp, NULL),
                    "cuLaunchKernel", what);
}

static kiln_status cuda_residency(void *dev, void *fn, const CgLaunch *l, int *per_sm, int *sms, int *regs, int *local) {
  CudaDev *x = dev;
  kiln_status st = cuda_check(x->d->cuOccupancyMaxActiveBlocksPerMultiprocessor(per_sm, fn, l->block, (size_t)l->smem),
                              "cuOccupancyMaxActiveBlocksPerMultiprocessor", l->name);
  if (!st) st = cuda_check(x->d->cuFuncGetAttribute(regs, CUDRV_FUNC_ATTR_NUM_REGS, fn), "cuFuncGetAttribute", "registers");
  if (!st) st = cuda_check(x->d->cuFuncGetAttribute(local, CUDRV_FUNC_ATTR_LOCAL_BYTES, fn), "cuFuncGetAttribute",
                           "local memory");
  *sms = x->d->sm_count;
  return st;
}

/* Candidate i of call c: one call alone first, outside any capture (the library loads an algorithm's
 * kernels on its first call, which a capture must not see); then LT_TIMED_CALLS calls captured as one
 * graph, launched once to warm up and once between the program's events: *us the time of one call.
 * The calls write c's output, as the warm-up at bind does (schedule.c); nothing reads it before a run
 * computes it again. A candidate the library refuses to enqueue gets *us = -1. */
static kiln_status lt_time(CudaDev *x, CudaLtCall *c, int i, float *us) {
  CudaDriver *d = x->d;
  *us = -1;
  memcpy(c->algo, c->cand[i], sizeof c->algo);
  if (cuda_lt_enqueue(c, x->stream, x->lt_ws, LT_WORKSPACE)) return KILN_OK;
  kiln_status st = cuda_check(d->cuStreamSynchronize(x->stream), "cuStreamSynchronize", "library candidates");
  CUgraph graph = NULL;
  CUgraphExec exec = NULL;
  if (!st) st = cuda_check(d->cuStreamBeginCapture(x->stream, CUDRV_CAPTURE_THREAD_LOCAL), "cuStreamBeginCapture",
                           "library candidates");
  if (st) return st;
  kiln_status refused = KILN_OK;
  for (int r = 0; r < LT_TIMED_CALLS && !refused; r++) refused = cuda_lt_enqueue(c, x->stream, x->lt_ws, LT_WORKSPACE);
  st = cuda_check(d->cuStreamEndCapture(x->stream, &graph), "cuStreamEndCapture", "library candidates");
  if (!st && !refused) st = cuda_check(d->cuGraphInstantiate(&exec, graph, 0), "cuGraphInstantiate", "library candidates");
  for (int run = 0; run < 2 && !st && !refused; run++) {
    if (run) st = cuda_check(d->cuEventRecord(x->ev[0], x->stream), "cuEventRecord", "library candidates");
    if (!st) st = cuda_check(d->cuGraphLaunch(exec, x->stream), "cuGraphLaunch", "library candidates");
    if (!st && run) st = cuda_check(d->cuEventRecord(x->ev[1], x->stream), "cuEventRecord", "library candidates");
    if (!st) st = cuda_check(d->cuStreamSynchronize(x->stream), "cuStreamSynchronize", "library candidates");
  }
  float ms = 0;
  if (!st && !refused) st = cuda_check(d->cuEventElapsedTime(&ms, x->ev[0], x->ev[1]), "cuEventElapsedTime", "library candidates");
  if (!st && !refused) *us = ms * 1000.0f / LT_TIMED_CALLS;
  if (exec) d->cuGraphExecDestroy(exec);
  if (graph) d->cuGraphDestroy(graph);
  return st;
}

/* The key of c's choice in the cache folder: the device, the call (everything the heuristic was
 * asked about) and the candidates it offered, in its order. Another library or driver that offers
 * other candidates makes another key, and the choice is timed again. */
static bool lt_key(const CudaDev *x, const CudaLtCall *c, StrBuf *key) {
  const CgLibGemm *g = &c->g;
  sb_printf(key, "kiln cuBLASLt choice 1\ndevice %s\nworkspace %d tf32 %d\n", x->d->name, LT_WORKSPACE, x->tf32);
  sb_printf(key, "gemm %s %lld %lld %lld batch %lld ld %lld %lld %lld stride %lld %lld %lld t %d %d bias %d relu %d gelu %d\n",
            kiln_dtype_name(g->elem), (long long)g->M, (long long)g->N, (long long)g->K, (long long)g->batch,
            (long long)g->lda, (long long)g->ldb, (long long)g->ldd, (long long)g->a_sb, (long long)g->b_sb,
            (long long)g->d_sb, g->a_t, g->b_t, g->bias_stage >= 0, g->relu, g->gelu);
  for (int i = 0; i < c->n_cand; i++) {
    sb_puts(key, "candidate");
    for (int j = 0; j < 8; j++) sb_printf(key, " %016llx", (unsigned long long)c->cand[i][j]);
    sb_puts(key, "\n");
  }
  return !key->failed;
}

/* The fastest of c's candidates becomes its algorithm: the heuristic's first guess is its model's,
 * and on a shape it models badly another of its list can be much faster. The choice is kept in the
 * cache folder, so a later load of the same GEMM on the same device takes it untimed and sums in the
 * same order; without a folder each load times again (each order strict f32, or f32-accumulated). */
static kiln_status lt_pick(CudaDev *x, CudaLtCall *c) {
  StrBuf key = { 0 };
  if (!lt_key(x, c, &key)) { sb_free(&key); return kiln_fail(KILN_ERR_NO_MEMORY, "cuda: no memory for a GEMM's key"); }
  char path[1200] = "";
  if (x->cache_dir[0])
    snprintf(path, sizeof path, "%s/cublaslt-%016llx%016llx.txt", x->cache_dir,
             (unsigned long long)hash_bytes(key.s, key.len, 1), (unsigned long long)hash_bytes(key.s, key.len, 2));
  size_t n = 0;
  char *kept = path[0] ? rt_file_read(path, &n) : NULL;
  int pick = -1;
  /* the file is the key, then "pick I"; another key under the same name, or no pick, is timed again */
  if (!kept || n <= key.len || memcmp(kept, key.s, key.len) || sscanf(kept + key.len, "pick %d", &pick) != 1) pick = -1;
  kiln_free(kept);
  float best = -1, first = -1;
  if (pick < 0 || pick >= c->n_cand) {
    pick = 0;
    for (int i = 0; i < c->n_cand; i++) {
      float us;
      kiln_status st = lt_time(x, c, i, &us);
      if (st) { sb_free(&key); return st; }
      if (i == 0) first = us;
      if (us >= 0 && (best < 0 || us < best)) best = us, pick = i;
    }
    if (best < 0) {
      sb_free(&key);
      return kiln_fail(KILN_ERR_UNSUPPORTED, "cuda: cuBLASLt ran none of its algorithms for this GEMM");
    }
    /* a folder that cannot be written only costs the timing again at the next load */
    sb_printf(&key, "pick %d\n", pick);
    if (path[0] && !key.failed && rt_cache_folder(x->cache_dir) == KILN_OK) rt_file_write(path, key.s, key.len);
  }
  sb_free(&key);
  memcpy(c->algo, c->cand[pick], sizeof c->algo);
  if (x->debug && best >= 0)
    fprintf(stderr, "kiln: cuda: library GEMM %lldx%lldx%lld (batch %lld): algorithm %d of %d, %.2f us (the heuristic's "
            "first: %.2f us)\n", (long long)c->g.M, (long long)c->g.N, (long long)c->g.K, (long long)c->g.batch, pick + 1,
            c->n_cand, best, first);
  else if (x->debug)
    fprintf(stderr, "kiln: cuda: library GEMM %lldx%lldx%lld (batch %lld): algorithm %d of %d, as timed before (%s)\n",
            (long long)c->g.M, (long long)c->g.N, (long long)c->g.K, (long long)c->g.batch, pick + 1, c->n_cand, path);
  return KILN_OK;
}

static kiln_status cuda_library_prepare(void *dev, const CgLibGemm *g, const RtBuf *buf, void **call) {
  CudaDev *x = dev;
  *call = NULL;
  kiln_status st = cuda_lt_load();
  if (!st && !x->lt_ws) st = cuda_alloc(x, LT_WORKSPACE, "cuBLASLt workspace", &x->lt_ws);
  if (st) return st;
  CudaLtCall *c = kiln_calloc(1, sizeof *c);
  if (!c) return kiln_fail(KILN_ERR_NO_MEMORY, "cuda: no memory for a GEMM call");
  if (!(st = cuda_lt_prepare(c, g, buf, x->tf32, LT_WORKSPACE, x->lt_algos)) && c->n_cand > 1) st = lt_pick(x, c);
  if (st) {
    cuda_lt_release(c);
    kiln_free(c);
    return st;
  }
  *call = c;
  return KILN_OK;
}

static kiln_status cuda_library_run(void *dev, void *call) {
  CudaDev *x = dev;
  return cuda_lt_enqueue(call, x->stream, x->lt_ws, LT_WORKSPACE);
}

static void cuda_library_release(void *dev, void *call) {
  (void)dev;
  cuda_lt_release(call);
  kiln_free(call);
}

/* Bucket b: the communicator's stream waits for the work enqueued so far, runs the bucket's
 * all-reduces as one NCCL group, and marks its end with done[b]. Inside a recording, the fork and
 * the join (cuda_collective_wait) make the communicator's stream part of the captured graph. */
static kiln_status cuda_all_reduce(void *dev, void *comm, int b, int n, const RtBuf *src, const RtBuf *dst,
                                   const int64_t *count, const kiln_dtype *dtype) {
  CudaDev *x = dev;
  CudaDriver *d = x->d;
  kiln_status st = KILN_OK;
  if (!x->comm) st = cuda_check(d->cuStreamCreate(&x->comm, CUDRV_STREAM_NON_BLOCKING), "cuStreamCreate", "collectives");
  if (!st && !x->fork) st = cuda_check(d->cuEventCreate(&x->fork, CUDRV_EVENT_DISABLE_TIMING), "cuEventCreate", "collectives");
  if (!st && b >= x->n_done) {
    CUevent *done = kiln_realloc(x->done, (size_t)(b + 1) * sizeof *done);
    if (!done) return kiln_fail(KILN_ERR_NO_MEMORY, "cuda: no memory for the collectives' events");
    x->done = done;
    for (; x->n_done <= b && !st; x->n_done++)
      x->done[x->n_done] = NULL,
      st = cuda_check(d->cuEventCreate(&x->done[x->n_done], CUDRV_EVENT_DISABLE_TIMING), "cuEventCreate", "collectives");
  }
  if (!st) st = cuda_check(d->cuEventRecord(x->fork, x->stream), "cuEventRecord", "collectives");
  if (!st) st = cuda_check(d->cuStreamWaitEvent(x->comm, x->fork, 0), "cuStreamWaitEvent", "collectives");
  if (!st) st = rt_nccl_all_reduce(comm, (unsigned long long)(uintptr_t)x->comm, n, src, dst, count, dtype);
  if (!st) st = cuda_check(d->cuEventRecord(x->done[b], x->comm), "cuEventRecord", "collectives");
  return st;
}

static kiln_status cuda_collective_wait(void *dev, int b) {
  CudaDev *x = dev;
  if (b < 0 || b >= x->n_done) return kiln_fail(KILN_ERR_INVALID_ARG, "cuda: bucket %d of collectives never started", b);
  return cuda_check(x->d->cuStreamWaitEvent(x->stream, x->done[b], 0), "cuStreamWaitEvent", "collectives");
}

static kiln_status cuda_record_begin(void *dev) {
  CudaDev *x = dev;
  return cuda_check(x->d->cuStreamBeginCapture(x->stream, CUDRV_CAPTURE_THREAD_LOCAL), "cuStreamBeginCapture", "schedule");
}

static void cuda_graph_free(void *dev, void *graph) {
  CudaDev *x = dev;
  CudaGraph *g = graph;
  if (g->exec) x->d->cuGraphExecDestroy(g->exec);
  if (g->graph) x->d->cuGraphDestroy(g->graph);
  kiln_free(g);
}

static kiln_status cuda_record_end(void *dev, void **graph) {
  CudaDev *x = dev;
  CudaGraph *g = kiln_calloc(1, sizeof *g);
  CUgraph captured = NULL;
  kiln_status st = cuda_check(x->d->cuStreamEndCapture(x->stream, &captured), "cuStreamEndCapture", "schedule");
  if (!g) {
    if (captured) x->d->cuGraphDestroy(captured);
    return kiln_fail(KILN_ERR_NO_MEMORY, "cuda: no memory for a graph");
  }
  g->graph = captured;
  if (!st) st = cuda_check(x->d->cuGraphInstantiate(&g->exec, g->graph, 0), "cuGraphInstantiate", "schedule");
  if (st) { cuda_graph_free(x, g); return st; }
  *graph = g;
  return KILN_OK;
}

static kiln_status cuda_replay(void *dev, void *graph) {
  CudaDev *x = dev;
  return cuda_check(x->d->cuGraphLaunch(((CudaGraph *)graph)->exec, x->stream), "cuGraphLaunch", "schedule");
}

static kiln_status cuda_sync(void *dev, const char *what) {
  CudaDev *x = dev;
  return cuda_check(x->d->cuStreamSynchronize(x->stream), "cuStreamSynchronize", what);
}

/* The schedule between two events: device time as CUDA-event timers (peers.py) see it. */
static kiln_status cuda_mark(void *dev, int which) {
  CudaDev *x = dev;
  return cuda_check(x->d->cuEventRecord(x->ev[which], x->stream), "cuEventRecord", "run");
}

static kiln_status cuda_elapsed(void *dev, double *ms) {
  CudaDev *x = dev;
  float f = 0;
  kiln_status st = cuda_check(x->d->cuEventElapsedTime(&f, x->ev[0], x->ev[1]), "cuEventElapsedTime", "run");
  *ms = f;
  return st;
}

static void cuda_describe(void *dev, FILE *f) {
  CudaDev *x = dev;
  fprintf(f, "cuda: %s, NVRTC %s\n", x->d->name,
          x->tf32 ? "with TF32" : x->fma ? "f32, multiply-adds contracted" : "strict f32 (--fmad=false)");
}

const Backend rt_backend_cuda = {
  .name = "cuda",
  .dialect = &cg_dialect_cuda,
  .host_memory = false,
  .probe = cuda_probe,
  .open = cuda_open,
  .close = cuda_close,
  .alloc = cuda_alloc,
  .release = cuda_release,
  .upload = cuda_upload,
  .download = cuda_download,
  .copy = cuda_copy,
  .build = cuda_build,
  .unload = cuda_unload,
  .lookup = cuda_lookup,
  .launch = cuda_launch,
  .residency = cuda_residency,
  .library_prepare = cuda_library_prepare,
  .library_run = cuda_library_run,
  .library_release = cuda_library_release,
  .record_begin = cuda_record_begin,
  .record_end = cuda_record_end,
  .replay = cuda_replay,
  .graph_free = cuda_graph_free,
  .sync = cuda_sync,
  .mark = cuda_mark,
  .elapsed = cuda_elapsed,
  .describe = cuda_describe,
  .all_reduce = cuda_all_reduce,
  .collective_wait = cuda_collective_wait,
  .where = cuda_where,
  .copy_after = cuda_copy_after,
};
