/*
 * cpu.c — the cpu backend's device hooks. Its memory is host memory (the pipeline binds
 * the caller's buffers in place and copies with memcpy); a module is the generated C
 * compiled into a shared object and loaded (cache.c); a kernel is a trampoline
 * `void kiln_eN(void *const *args)` found with dlsym, whose body is an OpenMP loop nest.
 * Launches run synchronously, in order, on the calling thread's OpenMP team.
 */
#include "cpu.h"

#include <dlfcn.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

typedef void (*Entry)(void *const *args);

typedef struct Cpu {
  int omp_dynamic;   /* options.omp_dynamic */
} Cpu;

static kiln_status cpu_probe(void) { return KILN_OK; }

static kiln_status cpu_open(const kiln_options *o, void **dev) {
  Cpu *x = kiln_calloc(1, sizeof *x);
  if (!x) return kiln_fail(KILN_ERR_NO_MEMORY, "cpu: out of memory");
  x->omp_dynamic = o->omp_dynamic;
  *dev = x;
  return KILN_OK;
}

static void cpu_close(void *dev) { kiln_free(dev); }

static kiln_status cpu_build_module(void *dev, const char *src, size_t len, const kiln_options *o, void **module,
                                    bool *hit) {
  (void)dev;
  kiln_status st = cpu_build(src, len, o, module, hit);
  if (st) {
    /* "k.c:123:45: error": the kernel whose source holds that line */
    const char *at = strstr(kiln_last_error(), "k.c:");
    int k = at ? rt_kernel_at_line(src, strtol(at + 4, NULL, 10)) : -1;
    if (k >= 0) kiln_error_prefix("kernel kiln_k%d: ", k);
  }
  return st;
}

static void cpu_unload(void *dev, void *module) {
  (void)dev;
  if (module) dlclose(module);
}

static kiln_status cpu_lookup(void *dev, void *module, const CgLaunch *l, void **fn) {
  (void)dev;
  if (!(*fn = dlsym(module, l->name)))
    return kiln_fail(KILN_ERR_COMPILE, "cpu: kernel %d ('%s') is missing from the compiled library", l->kernel, l->name);
  return KILN_OK;
}

enum { MAX_ARGS = 256 };

static kiln_status cpu_launch(void *dev, void *fn, const CgLaunch *l, const RtBuf *args) {
  Cpu *x = dev;
  void *a[MAX_ARGS];
  if (l->n_params > MAX_ARGS) return kiln_fail(KILN_ERR_UNSUPPORTED, "cpu: kernel %d has %d parameters (at most %d)", l->kernel, l->n_params, MAX_ARGS);
  for (int i = 0; i < l->n_params; i++) a[i] = (void *)(uintptr_t)args[i];
  /* Exact teams by default (kiln_options.omp_dynamic 0). On a machine shared with other work
   * a parallel region can wait for a thread that is not scheduled (measured: 0.14 ms -> 124 ms
   * per training step at load 7 on 2 cores); omp_dynamic 1 (or OMP_DYNAMIC) lets libgomp size
   * each team from the load average instead. */
  if (x->omp_dynamic >= 0) omp_set_dynamic(x->omp_dynamic);
  Entry e;
  memcpy(&e, &fn, sizeof e);  /* object pointer -> function pointer, as POSIX allows */
  e(a);
  return KILN_OK;
}

static kiln_status cpu_library_prepare(void *dev, const CgLibGemm *g, const RtBuf *buf, void **call) {
  return cpu_gemm_prepare(g, buf, ((Cpu *)dev)->omp_dynamic, call);
}

static kiln_status cpu_library_run(void *dev, void *call) {
  (void)dev;
  return cpu_gemm_run(call);
}

static void cpu_library_release(void *dev, void *call) {
  (void)dev;
  cpu_gemm_release(call);
}

static void cpu_describe(void *dev, FILE *f) {
  (void)dev;
  fprintf(f, "compiled: cc %s\n", cpu_cc_flags());
}

const Backend rt_backend_cpu = {
  .name = "cpu",
  .dialect = &cg_dialect_c,
  .host_memory = true,   /* alloc, copies: the pipeline's host memory */
  .probe = cpu_probe,
  .open = cpu_open,
  .close = cpu_close,
  .build = cpu_build_module,
  .unload = cpu_unload,
  .lookup = cpu_lookup,
  .launch = cpu_launch,
  .library_prepare = cpu_library_prepare,
  .library_run = cpu_library_run,
  .library_release = cpu_library_release,
  .describe = cpu_describe,
};
