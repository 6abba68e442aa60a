/*
 * cuda.c — the cuda backend (rt_backend_cuda). Takes a TE; plans it, renders every
 * kernel in the CUDA C dialect into one translation unit, compiles that once with
 * NVRTC (cached on disk, see nvrtc.c) and loads it. Produces an executable whose
 * tensors all live on the device:
 *
 *   params, consts   uploaded once at compile, bound directly, updated in place by assigns
 *   inputs, outputs  one device buffer each; a run copies in/out only the host buffers it
 *                    is given (NULL: the tensor stays resident, see kiln_program_set_input)
 *   intermediates    one device arena laid out by the plan's memory plan
 *
 * The whole schedule (kernels, then the assign copies) is captured once into a CUDA
 * graph, so a run is one graph launch and one wait; options.graph_replay = 0 launches
 * kernel by kernel instead (debugging). A kernel the renderer cannot place on the GPU
 * (KN_HOST) runs on the host through ref_eval_stage, which is a counted fallback
 * (an error with options.strict) and turns graph replay off for that program. String
 * tensors never go to the device: each has a host array of pointers, and the string ops
 * (all KN_HOST) read and write those in place.
 */
#include "cudadrv.h"
#include "cublaslt.h"
#include "../runtime.h"
#include "../../codegen/codegen.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct CudaLaunch {
  const Kernel *k;
  CUfunction fn;
  unsigned grid, block, smem;
  CUdeviceptr *args;           /* pointer values, bound once */
  void **argp;                 /* &args[i], then &numel: what cuLaunchKernel takes */
  CudaLtCall *lt;              /* the kernel runs as a cuBLASLt GEMM instead (cublaslt.c) */
} CudaLaunch;

typedef struct CudaExec {
  CudaDriver *d;
  const TE *te;
  Plan *plan;
  CUmodule mod;
  CUstream stream;
  CUdeviceptr *buf;            /* stage -> device pointer, 0 if the stage has no buffer */
  bool *owned;                 /* buf[s] came from its own cuMemAlloc */
  CUdeviceptr arena;           /* intermediates */
  CudaLaunch *launch; int n_launch;
  CUgraph graph;
  CUgraphExec gexec;
  bool replay;                 /* one graph launch per run */
  bool strict;
  int n_host;                  /* KN_HOST kernels (fallbacks) */
  char *source;                /* generated CUDA C, kept for print */
  CUdeviceptr lt_ws;           /* cuBLASLt workspace, shared by the program's library GEMMs */
  bool tf32;
  int row_variant;             /* block-row variant (KILN_CUDA_ROW, cg_gpu_rows) */
  int n_lt;
  Arena arena_host;            /* launch argument tables */
  CUevent ev[2];               /* around the schedule: the census's device_ms */
  /* String tensors stay on the host (kiln.h): stage -> array of numel `const char *`
   * (0 in buf), filled by inputs, constants and the host string ops; strings the ops make
   * live in `strings` until the next run. */
  const char ***host;
  Arena strings;
} CudaExec;

static kiln_status cuda_probe(void) {
  CudaDriver *d;
  CudaNvrtc *r;
  kiln_status st = cuda_driver(&d);
  if (st) return st;
  return cuda_nvrtc(&r);
}

static int64_t stage_bytes(const Stage *s) {
  int64_t n = 0;
  if (!size_mul(s->numel, (int64_t)kiln_dtype_size(s->dtype), &n)) return -1;
  return n;
}

static kiln_status dev_alloc(CudaExec *x, CUdeviceptr *p, int64_t n, const char *what) {
  /* A zero-sized tensor still gets a distinct, valid address. */
  return cuda_check(x->d->cuMemAlloc(p, (size_t)(n < 256 ? 256 : n)), "cuMemAlloc", what);
}

/* Which stages need a buffer: every stage a kernel reads from memory or stores, every
 * input, output and param, and both sides of every assign. */
static bool *needed_buffers(CudaExec *x) {
  const TE *te = x->te;
  bool *need = kiln_calloc((size_t)te->n_stages, sizeof *need);
  if (!need) return NULL;
  for (int i = 0; i < x->plan->n_kernels; i++) {
    const Kernel *k = &x->plan->kernels[i];
    for (int j = 0; j < k->n_ins; j++) need[k->ins[j]] = true;
    for (int j = 0; j < k->n_items; j++)
      if (x->plan->stored[k->items[j].stage]) need[k->items[j].stage] = true;
  }
  for (int i = 0; i < te->n_outputs; i++) need[te->outputs[i]] = true;
  for (int i = 0; i < te->n_inputs; i++) need[te->inputs[i]] = true;
  for (int s = 0; s < te->n_stages; s++) need[s] |= te->stages[s].kind == ST_PARAM;  /* read_param */
  for (int i = 0; i < te->n_assigns; i++) need[te->assigns[i].param] = need[te->assigns[i].value] = true;
  return need;
}

/* Gives every needed stage its device address; uploads params and consts. */
static kiln_status place_buffers(CudaExec *x) {
  const TE *te = x->te;
  const Plan *p = x->plan;
  bool *need = needed_buffers(x);
  x->buf = kiln_calloc((size_t)te->n_stages, sizeof *x->buf);
  x->owned = kiln_calloc((size_t)te->n_stages, sizeof *x->owned);
  x->host = kiln_calloc((size_t)te->n_stages, sizeof *x->host);
  if (!need || !x->buf || !x->owned || !x->host) {
    kiln_free(need);
    return kiln_fail(KILN_ERR_NO_MEMORY, "cuda: no host memory for the buffer table");
  }
  kiln_status st = KILN_OK;
  if (p->arena_bytes > 0) st = dev_alloc(x, &x->arena, p->arena_bytes, "intermediate arena");
  for (int s = 0; s < te->n_stages && !st; s++) {
    if (!need[s]) continue;
    const Stage *g = &te->stages[s];
    int64_t n = stage_bytes(g);
    if (n < 0) { st = kiln_fail(KILN_ERR_NO_MEMORY, "cuda: tensor '%s' is too large", g->name); break; }
    if (g->dtype == KILN_STRING) {
      if (!(x->host[s] = kiln_calloc((size_t)(g->numel > 0 ? g->numel : 1), sizeof(char *)))) {
        st = kiln_fail(KILN_ERR_NO_MEMORY, "cuda: no host memory for string tensor '%s'", g->name);
        break;
      }
      if (g->data && n > 0) memcpy(x->host[s], g->data, (size_t)n);  /* the TE's strings */
      continue;
    }
    if (p->offset && p->offset[s] >= 0 && !plan_is_output(p, s) && g->kind != ST_PARAM && g->kind != ST_INPUT &&
        g->kind != ST_CONST) {
      x->buf[s] = x->arena + (CUdeviceptr)p->offset[s];
      continue;
    }
    if ((st = dev_alloc(x, &x->buf[s], n, g->name))) break;
    x->owned[s] = true;
    if ((g->kind == ST_PARAM || g->kind == ST_CONST) && n > 0 && g->data)
      st = cuda_check(x->d->cuMemcpyHtoDAsync(x->buf[s], g->data, (size_t)n, x->stream), "cuMemcpyHtoDAsync",
                      g->name);
  }
  kiln_free(need);
  if (!st) st = cuda_check(x->d->cuStreamSynchronize(x->stream), "cuStreamSynchronize", "parameter upload");
  return st;
}

/* -- launching -- */

enum { LT_WORKSPACE = 32 << 20 };

static kiln_status launch_one(CudaExec *x, const CudaLaunch *l) {
  if (l->lt) return cuda_lt_enqueue(l->lt, x->stream, x->lt_ws, LT_WORKSPACE);
  char what[64];
  snprintf(what, sizeof what, "kernel k%d", l->k->id);
  return cuda_check(x->d->cuLaunchKernel(l->fn, l->grid, 1, 1, l->block, 1, 1, l->smem, x->stream, l->argp, NULL),
                    "cuLaunchKernel", what);
}

/* Host fallback for one KN_HOST kernel: every stage it reads comes to the host, each of
 * its stages is evaluated by ref, stored ones go back. Counted in the census. String
 * stages are host-resident: read and written in place, never copied. */
static kiln_status run_host_kernel(CudaExec *x, const Kernel *k, kiln_census *c) {
  const TE *te = x->te;
  kiln_status st = cuda_check(x->d->cuStreamSynchronize(x->stream), "cuStreamSynchronize", "host fallback");
  const void **bufs = kiln_calloc((size_t)te->n_stages, sizeof *bufs);
  bool *mine = kiln_calloc((size_t)te->n_stages, sizeof *mine);  /* bufs[s] is a temporary */
  if (!bufs || !mine) {
    kiln_free(bufs);
    kiln_free(mine);
    return kiln_fail(KILN_ERR_NO_MEMORY, "cuda: no memory for a host fallback");
  }
  for (int j = 0; j < k->n_ins && !st; j++) {
    int s = k->ins[j];
    if (x->host[s]) { bufs[s] = x->host[s]; continue; }
    int64_t n = stage_bytes(&te->stages[s]);
    void *h = kiln_malloc((size_t)(n > 0 ? n : 1));
    if (!h) { st = kiln_fail(KILN_ERR_NO_MEMORY, "cuda: no memory for a host fallback"); break; }
    bufs[s] = h, mine[s] = true;
    st = cuda_check(x->d->cuMemcpyDtoHAsync(h, x->buf[s], (size_t)n, x->stream), "cuMemcpyDtoHAsync", "fallback");
    if (!st) st = cuda_check(x->d->cuStreamSynchronize(x->stream), "cuStreamSynchronize", "fallback");
    c->d2h_bytes += n, c->d2h_copies++;
  }
  for (int j = 0; j < k->n_items && !st; j++) {
    const Item *it = &k->items[j];
    const Stage *g = &te->stages[it->stage];
    int64_t n = stage_bytes(g);
    bool in_place = x->host[it->stage] != NULL;
    void *h = in_place ? (void *)x->host[it->stage] : kiln_malloc((size_t)(n > 0 ? n : 1));
    if (!h) { st = kiln_fail(KILN_ERR_NO_MEMORY, "cuda: no memory for a host fallback"); break; }
    st = ref_eval_stage_strings(te, it->stage, bufs, h, &x->strings);
    bufs[it->stage] = h, mine[it->stage] = !in_place;
    c->host_fallbacks++;
    if (n > c->largest_fallback_bytes) c->largest_fallback_bytes = n;
    size_t used = strlen(c->fallback_ops);
    snprintf(c->fallback_ops + used, sizeof c->fallback_ops - used, "%s%s", used ? " " : "",
             g->op >= 0 && g->op < OP_COUNT ? op_names[g->op] : "stage");
    if (!st && x->plan->stored[it->stage] && !in_place) {
      st = cuda_check(x->d->cuMemcpyHtoDAsync(x->buf[it->stage], h, (size_t)n, x->stream), "cuMemcpyHtoDAsync",
                      "fallback");
      if (!st) st = cuda_check(x->d->cuStreamSynchronize(x->stream), "cuStreamSynchronize", "fallback");
      c->h2d_bytes += n, c->h2d_copies++;
    }
  }
  for (int s = 0; s < te->n_stages; s++)
    if (mine[s]) kiln_free((void *)bufs[s]);
  kiln_free(bufs);
  kiln_free(mine);
  return st;
}

/* The schedule: every kernel in plan order, then param <- value copies for assigns
 * (after every kernel, since kernels of this run may still read the old value). */
static kiln_status enqueue_schedule(CudaExec *x, kiln_census *c) {
  kiln_status st = KILN_OK;
  for (int i = 0; i < x->n_launch && !st; i++) {
    const CudaLaunch *l = &x->launch[i];
    if (l->k->kind == KN_HOST) st = c ? run_host_kernel(x, l->k, c) : KILN_OK;
    else if (l->grid > 0) st = launch_one(x, l);
  }
  for (int i = 0; i < x->te->n_assigns && !st; i++) {
    const Assign *a = &x->te->assigns[i];
    int64_t n = stage_bytes(&x->te->stages[a->param]);
    if (x->buf[a->param] != x->buf[a->value])
      st = cuda_check(x->d->cuMemcpyDtoDAsync(x->buf[a->param], x->buf[a->value], (size_t)n, x->stream),
                      "cuMemcpyDtoDAsync", x->te->stages[a->param].name);
  }
  return st;
}

static kiln_status capture(CudaExec *x) {
  CudaDriver *d = x->d;
  kiln_status st = cuda_check(d->cuStreamBeginCapture(x->stream, CUDRV_CAPTURE_THREAD_LOCAL),
                              "cuStreamBeginCapture", "schedule");
  if (st) return st;
  kiln_status est = enqueue_schedule(x, NULL);
  st = cuda_check(d->cuStreamEndCapture(x->stream, &x->graph), "cuStreamEndCapture", "schedule");
  if (est) return est;
  if (st) return st;
  return cuda_check(d->cuGraphInstantiate(&x->gexec, x->graph, 0), "cuGraphInstantiate", "schedule");
}

/* -- compile -- */

static void cuda_free(void *exec);

/* Threads and blocks for one kernel, from the shape render.c gave it (cg_gpu_shape):
 * grid-stride kernels get 256 threads and a block per 256 points (up to 2^20 blocks, then
 * they stride); block-row kernels one block per row (grid-strided past 2^20 rows) of
 * exactly the size they were rendered for (cg_gpu_block); tiled contractions one block
 * of CG_GEMM_THREADS per output tile. */
static kiln_status launch_shape(CudaExec *x, const Plan *p, const Kernel *k, CudaLaunch *l) {
  int max_threads = 1024;
  kiln_status st = cuda_check(x->d->cuFuncGetAttribute(&max_threads, CUDRV_FUNC_ATTR_MAX_THREADS, l->fn),
                              "cuFuncGetAttribute", "max threads per block");
  if (st) return st;
  max_threads &= ~31;
  l->smem = 0;
  CgGpuShape g = cg_gpu_shape(p, k);
  if (g == CG_GPU_GEMM) {  /* one block per output tile (gemm_cuda.c), tile-strided past 2^20 */
    CgGemm gm;
    if (!cg_gemm_match(p, k, &gm)) return kiln_fail(KILN_ERR_DEVICE, "cuda: kernel %d lost its GEMM shape", k->id);
    if (max_threads < CG_GEMM_THREADS)
      return kiln_fail(KILN_ERR_DEVICE, "cuda: kernel %d needs %d threads per block, the compiled code allows %d", k->id,
                       (int)CG_GEMM_THREADS, max_threads);
    l->block = CG_GEMM_THREADS;
    l->grid = (unsigned)cg_gemm_blocks(&gm);
    return KILN_OK;
  }
  if (g == CG_GPU_BLOCK_ROWS) {
    CgRows ro = cg_gpu_rows(k, x->row_variant);  /* the kernel's unrolled row loops assume exactly this */
    int t = ro.threads * ro.rows;
    if (t > max_threads)
      return kiln_fail(KILN_ERR_DEVICE, "cuda: kernel %d needs %d threads per block, the compiled code allows %d", k->id,
                       t, max_threads);
    int64_t blocks = (k->outer_numel + ro.rows - 1) / ro.rows;
    if (ro.smem > 0) {  /* a long row's cache in dynamic shared memory: over 48 KB needs the opt-in */
      enum { ATTR_PREFERRED_SMEM_CARVEOUT = 9 };  /* CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, percent */
      st = cuda_check(x->d->cuFuncSetAttribute(l->fn, CUDRV_FUNC_ATTR_MAX_DYN_SMEM, ro.smem), "cuFuncSetAttribute",
                      "dynamic shared memory of a long-row kernel");
      /* all of L1 as shared memory, so that ro.min_blocks blocks of ro.smem each fit an SM */
      if (!st) st = cuda_check(x->d->cuFuncSetAttribute(l->fn, ATTR_PREFERRED_SMEM_CARVEOUT, 100), "cuFuncSetAttribute",
                               "shared memory carveout of a long-row kernel");
      if (st) return st;
      l->smem = (unsigned)ro.smem;
    }
    l->block = (unsigned)t;
    l->grid = (unsigned)(blocks < (1 << 20) ? blocks : (1 << 20));
    return KILN_OK;
  }
  int64_t work = g == CG_GPU_VEC4 ? k->outer_numel / 4 : k->outer_numel;
  l->block = (unsigned)(256 < max_threads ? 256 : max_threads);
  int64_t blocks = (work + l->block - 1) / l->block, cap = (int64_t)1 << 20;
  l->grid = (unsigned)(blocks < cap ? blocks : cap);
  return KILN_OK;
}

/* A plain GEMM the cost rule gives to cuBLASLt (cublaslt.c): planned once, then run once
 * here, outside any capture, so that the library's lazy set-up does not happen while the
 * schedule is captured. Where the library is missing or declines, the generated kernel
 * stays. KILN_CUBLASLT=0 keeps every generated kernel (comparisons, debugging). */
static kiln_status try_library(CudaExec *x, const Kernel *k, CudaLaunch *l) {
  const char *env = getenv("KILN_CUBLASLT");
  CudaLtCall c;
  if ((env && !strcmp(env, "0")) || !cuda_lt_match(x->plan, k, &c) || cuda_lt_load() != KILN_OK) return KILN_OK;
  if (!x->lt_ws) {
    kiln_status st = dev_alloc(x, &x->lt_ws, LT_WORKSPACE, "cuBLASLt workspace");
    if (st) return st;
  }
  if (cuda_lt_prepare(&c, x->buf, x->tf32, LT_WORKSPACE) != KILN_OK) return KILN_OK;
  l->lt = arena_alloc(&x->arena_host, sizeof *l->lt);
  if (!l->lt) { cuda_lt_release(&c); return kiln_fail(KILN_ERR_NO_MEMORY, "cuda: no memory for a GEMM call"); }
  *l->lt = c;
  x->n_lt++;
  kiln_status st = cuda_lt_enqueue(l->lt, x->stream, x->lt_ws, LT_WORKSPACE);
  if (!st) st = cuda_check(x->d->cuStreamSynchronize(x->stream), "cuStreamSynchronize", "cuBLASLt warm-up");
  return st;
}

static kiln_status bind_launches(CudaExec *x) {
  const Plan *p = x->plan;
  x->launch = kiln_calloc((size_t)(p->n_kernels ? p->n_kernels : 1), sizeof *x->launch);
  if (!x->launch) return kiln_fail(KILN_ERR_NO_MEMORY, "cuda: no memory for the launch table");
  x->n_launch = p->n_kernels;
  for (int i = 0; i < p->n_kernels; i++) {
    const Kernel *k = &p->kernels[i];
    CudaLaunch *l = &x->launch[i];
    l->k = k;
    if (k->kind == KN_HOST) { x->n_host++; continue; }
    int *stages = arena_alloc(&x->arena_host, sizeof *stages * (size_t)(k->n_ins + k->n_items + 1));
    l->args = arena_alloc(&x->arena_host, sizeof *l->args * (size_t)(k->n_ins + k->n_items + 1));
    l->argp = arena_alloc(&x->arena_host, sizeof *l->argp * (size_t)(k->n_ins + k->n_items + 1));
    if (!stages || !l->args || !l->argp) return kiln_fail(KILN_ERR_NO_MEMORY, "cuda: no memory for kernel arguments");
    int n = cg_kernel_params(p, k, stages);
    for (int j = 0; j < n; j++) {
      if (!x->buf[stages[j]]) return kiln_fail(KILN_ERR_DEVICE, "cuda: kernel %d reads stage %d, which has no buffer", k->id, stages[j]);
      l->args[j] = x->buf[stages[j]];
      l->argp[j] = &l->args[j];
    }
    char name[32];
    cg_kernel_name(i, false, name);
    kiln_status st = cuda_check(x->d->cuModuleGetFunction(&l->fn, x->mod, name), "cuModuleGetFunction", name);
    if (st) return st;
    if ((st = launch_shape(x, p, k, l))) return st;
    if ((st = try_library(x, k, l))) return st;
  }
  return KILN_OK;
}

/* The kernel whose source holds the first line NVRTC complains about ("kiln.cu(123): error"),
 * found from the renderer's "kernel N:" comment above that line; -1 if none. */
static int kernel_at_error(const char *src, const char *log) {
  const char *at = strstr(log, "kiln.cu(");
  if (!at) return -1;
  long line = strtol(at + 8, NULL, 10), n = 1;
  int k = -1;
  for (const char *p = src; *p && n <= line; p++) {
    if (*p == '\n') n++;
    else if (p[0] == '/' && p[1] == '*' && !strncmp(p, "/* kernel ", 10)) k = atoi(p + 10);
  }
  return k;
}

static kiln_status render_and_load(CudaExec *x, const kiln_options *o, kiln_census *c) {
  StrBuf src = {0};
  Dialect d = cg_dialect_cuda;
  d.row_variant = x->row_variant;
  kiln_status st = cg_render_plan(x->plan, &d, &src);
  if (st) { sb_free(&src); return st; }
  if (o->debug >= 2) fprintf(stderr, "-- cuda source --\n%s\n", src.s);
  x->source = src.s;
  char arch[32];
  cuda_arch_name(x->d, arch, sizeof arch);
  const char *opts[2];
  int n_opts = 0;
  if (!o->tf32) opts[n_opts++] = "--fmad=false";  /* strict f32: no fused multiply-add contraction */
  void *cubin = NULL;
  size_t size = 0;
  bool hit = false;
  if ((st = cuda_compile(x->source, arch, n_opts, opts, &cubin, &size, &hit))) {
    int k = kernel_at_error(x->source, kiln_last_error());
    if (k >= 0 && k < x->plan->n_kernels)
      kiln_error_prefix("kernel kiln_k%d (anchor stage %d): ", k, x->plan->kernels[k].anchor);
    return st;
  }
  c->cache_hit = hit;
  st = cuda_check(x->d->cuModuleLoadData(&x->mod, cubin), "cuModuleLoadData", "the plan's kernels");
  kiln_free(cubin);
  return st;
}

static kiln_status cuda_compile_te(const TE *te, const kiln_options *o, void **exec, kiln_census *c) {
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  CudaExec *x = kiln_calloc(1, sizeof *x);
  if (!x) return kiln_fail(KILN_ERR_NO_MEMORY, "cuda: no memory for a program");
  x->te = te;
  x->replay = o->graph_replay != 0;
  x->strict = o->strict != 0;
  x->tf32 = o->tf32 != 0;
  /* KILN_CUDA_ROW=base|warp|vec|wvec|p16|p16vec|long|wveclong: the block-row shape (kiln_gpubench
   * --row-race races them; the default stays base until the race says otherwise) */
  const char *rv = getenv("KILN_CUDA_ROW");
  x->row_variant = cg_row_variant(rv);
  CudaNvrtc *r;
  kiln_status st = x->row_variant < 0 ? kiln_fail(KILN_ERR_INVALID_ARG, "cuda: KILN_CUDA_ROW names no row variant (base, warp, vec, wvec, p16, p16vec, long, wveclong, auto)") : KILN_OK;
  if (!st) st = cuda_driver(&x->d);
  if (!st) st = cuda_nvrtc(&r);
  PlanOptions po = plan_options(o);
  if (!st) st = plan_build((TE *)te, &po, &x->plan);  /* the plan adds expressions to te's arena */
  if (!st && o->debug >= 1) plan_print(x->plan, stderr);
  if (!st) st = cuda_check(x->d->cuStreamCreate(&x->stream, CUDRV_STREAM_NON_BLOCKING), "cuStreamCreate", "program");
  for (int i = 0; i < 2 && !st; i++) st = cuda_check(x->d->cuEventCreate(&x->ev[i], 0), "cuEventCreate", "program");
  if (!st) st = render_and_load(x, o, c);
  if (!st) st = place_buffers(x);
  if (!st) st = bind_launches(x);
  if (!st && x->n_host && x->strict)
    st = kiln_fail(KILN_ERR_FALLBACK, "cuda: strict mode: %d kernel(s) would run on the host", x->n_host);
  if (!st && x->n_host) x->replay = false;  /* host work cannot sit inside a CUDA graph */
  if (!st && x->replay) st = capture(x);
  if (st) { cuda_free(x); return st; }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  c->compile_ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
  c->kernels_planned = x->plan->n_kernels;
  c->peak_bytes = x->plan->arena_bytes;
  *exec = x;
  return KILN_OK;
}

/* -- run -- */

static kiln_status copy_io(CudaExec *x, const void *const *in, void *const *out, bool inputs, kiln_census *c) {
  const TE *te = x->te;
  kiln_status st = KILN_OK;
  int n = inputs ? te->n_inputs : te->n_outputs;
  for (int i = 0; i < n && !st; i++) {
    int s = inputs ? te->inputs[i] : te->outputs[i];
    int64_t bytes = stage_bytes(&te->stages[s]);
    if (bytes <= 0) continue;
    if (x->host[s]) {  /* strings: pointers in and out; program.c copies output strings */
      if (inputs && in && in[i]) memcpy(x->host[s], in[i], (size_t)bytes);
      else if (!inputs && out && out[i]) memcpy(out[i], x->host[s], (size_t)bytes);
      continue;
    }
    if (inputs && in && in[i]) {
      st = cuda_check(x->d->cuMemcpyHtoDAsync(x->buf[s], in[i], (size_t)bytes, x->stream), "cuMemcpyHtoDAsync",
                      te->stages[s].name);
      c->h2d_bytes += bytes, c->h2d_copies++;
    } else if (!inputs && out && out[i]) {
      st = cuda_check(x->d->cuMemcpyDtoHAsync(out[i], x->buf[s], (size_t)bytes, x->stream), "cuMemcpyDtoHAsync",
                      te->stages[s].name);
      c->d2h_bytes += bytes, c->d2h_copies++;
    }
  }
  return st;
}

static kiln_status cuda_run(void *exec, const void *const *in, void *const *out, kiln_census *c) {
  CudaExec *x = exec;
  c->h2d_bytes = c->d2h_bytes = c->h2d_copies = c->d2h_copies = 0;
  c->host_fallbacks = c->largest_fallback_bytes = 0;
  c->fallback_ops[0] = 0;
  c->device_ms = 0;
  arena_free(&x->strings);  /* the last run's strings: program.c has copied its outputs */
  kiln_status st = copy_io(x, in, out, true, c);
  /* the schedule between two events: device time as CUDA-event timers (peers.py) see it */
  if (!st) st = cuda_check(x->d->cuEventRecord(x->ev[0], x->stream), "cuEventRecord", "run");
  if (!st && x->replay) st = cuda_check(x->d->cuGraphLaunch(x->gexec, x->stream), "cuGraphLaunch", "schedule");
  else if (!st) st = enqueue_schedule(x, c);
  if (!st) st = cuda_check(x->d->cuEventRecord(x->ev[1], x->stream), "cuEventRecord", "run");
  if (!st) st = copy_io(x, in, out, false, c);
  if (!st) st = cuda_check(x->d->cuStreamSynchronize(x->stream), "cuStreamSynchronize", "run");
  float ms = 0;
  if (!st) st = cuda_check(x->d->cuEventElapsedTime(&ms, x->ev[0], x->ev[1]), "cuEventElapsedTime", "run");
  if (st) return st;
  c->device_ms = ms;
  int64_t kernels = 0;
  for (int i = 0; i < x->n_launch; i++) kernels += x->launch[i].k->kind != KN_HOST && x->launch[i].grid > 0;
  c->kernels_launched = kernels;
  c->submissions = x->replay ? 1 : kernels;
  c->bytes_read = x->plan->bytes_read;
  c->bytes_written = x->plan->bytes_written;
  return KILN_OK;
}

static kiln_status cuda_read_param(void *exec, int stage, void *dst) {
  CudaExec *x = exec;
  if (stage >= 0 && stage < x->te->n_stages && x->host[stage]) {  /* strings: valid until the next run */
    memcpy(dst, x->host[stage], (size_t)stage_bytes(&x->te->stages[stage]));
    return KILN_OK;
  }
  if (stage < 0 || stage >= x->te->n_stages || !x->buf[stage])
    return kiln_fail(KILN_ERR_INVALID_ARG, "cuda: stage %d has no device buffer", stage);
  int64_t n = stage_bytes(&x->te->stages[stage]);
  kiln_status st = cuda_check(x->d->cuMemcpyDtoHAsync(dst, x->buf[stage], (size_t)n, x->stream),
                              "cuMemcpyDtoHAsync", x->te->stages[stage].name);
  if (!st) st = cuda_check(x->d->cuStreamSynchronize(x->stream), "cuStreamSynchronize", "read");
  return st;
}

static kiln_status cuda_print(void *exec, FILE *f) {
  CudaExec *x = exec;
  plan_print(x->plan, f);
  fprintf(f, "cuda: %s, %d kernels (%d of them cuBLASLt GEMMs), %s\n", x->d->name, x->n_launch, x->n_lt,
          x->replay ? "one CUDA graph per run" : "kernel by kernel");
  return KILN_OK;
}

static kiln_status cuda_set_input(void *exec, int i, const void *src) {
  CudaExec *x = exec;
  if (i < 0 || i >= x->te->n_inputs)
    return kiln_fail(KILN_ERR_INVALID_ARG, "cuda: input %d does not exist (the graph has %d)", i, x->te->n_inputs);
  int s = x->te->inputs[i];
  int64_t n = stage_bytes(&x->te->stages[s]);
  kiln_status st = KILN_OK;
  if (x->host[s]) {  /* strings: pointers into program.c's copy of them */
    if (n > 0) memcpy(x->host[s], src, (size_t)n);
    return KILN_OK;
  }
  if (n > 0) st = cuda_check(x->d->cuMemcpyHtoDAsync(x->buf[s], src, (size_t)n, x->stream), "cuMemcpyHtoDAsync",
                             x->te->stages[s].name);
  if (!st) st = cuda_check(x->d->cuStreamSynchronize(x->stream), "cuStreamSynchronize", "set_input");
  return st;
}

static kiln_status cuda_read_output(void *exec, int i, void *dst) {
  CudaExec *x = exec;
  if (i < 0 || i >= x->te->n_outputs)
    return kiln_fail(KILN_ERR_INVALID_ARG, "cuda: output %d does not exist (the graph has %d)", i, x->te->n_outputs);
  return cuda_read_param(exec, x->te->outputs[i], dst);
}

static void cuda_free(void *exec) {
  CudaExec *x = exec;
  if (!x) return;
  CudaDriver *d = x->d;
  if (d) {
    if (x->stream) d->cuStreamSynchronize(x->stream);
    if (x->gexec) d->cuGraphExecDestroy(x->gexec);
    for (int i = 0; x->launch && i < x->n_launch; i++)
      if (x->launch[i].lt) cuda_lt_release(x->launch[i].lt);
    if (x->lt_ws) d->cuMemFree(x->lt_ws);
    if (x->graph) d->cuGraphDestroy(x->graph);
    for (int s = 0; x->buf && s < x->te->n_stages; s++)
      if (x->owned[s]) d->cuMemFree(x->buf[s]);
    if (x->arena) d->cuMemFree(x->arena);
    if (x->mod) d->cuModuleUnload(x->mod);
    if (x->stream) d->cuStreamDestroy(x->stream);
    for (int i = 0; i < 2; i++)
      if (x->ev[i]) d->cuEventDestroy(x->ev[i]);
  }
  for (int s = 0; x->host && s < x->te->n_stages; s++) kiln_free(x->host[s]);
  kiln_free(x->host);
  arena_free(&x->strings);
  kiln_free(x->buf);
  kiln_free(x->owned);
  kiln_free(x->launch);
  kiln_free(x->source);
  arena_free(&x->arena_host);
  if (x->plan) plan_free(x->plan);
  kiln_free(x);
}

const Backend rt_backend_cuda = {
  .name = "cuda",
  .probe = cuda_probe,
  .compile = cuda_compile_te,
  .run = cuda_run,
  .read_param = cuda_read_param,
  .print = cuda_print,
  .free = cuda_free,
  .set_input = cuda_set_input,
  .read_output = cuda_read_output,
  .strings = true,  /* string tensors on the host, their ops as counted host fallbacks */
};
