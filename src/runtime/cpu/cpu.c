/*
 * cpu.c — the cpu backend's device hooks. Its memory is host memory (the pipeline binds
 * the caller's buffers in place and copies with memcpy); a module is the generated C
 * compiled into a shared object and loaded (cache.c); a kernel is a trampoline
 * `void kiln_eN(void *const *args, int tid, int nt)` found with dlsym, which every thread of
 * the device's team (team.c) calls with its place, each running its share of the loops.
 * Launches run synchronously, in order, the calling thread thread 0 of the team.
 */
#include "cpu.h"

#include <dlfcn.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef void (*Entry)(void *const *args, int tid, int nt);

typedef struct Cpu {
  int omp_dynamic;   /* options.omp_dynamic */
  HostTeam *team;    /* omp_get_max_threads() threads: OMP_NUM_THREADS, kiln bench --threads */
} Cpu;

static kiln_status cpu_probe(void) { return KILN_OK; }

static kiln_status cpu_open(const kiln_options *o, void **dev) {
  Cpu *x = kiln_calloc(1, sizeof *x);
  if (!x) return kiln_fail(KILN_ERR_NO_MEMORY, "cpu: out of memory");
  x->omp_dynamic = o->omp_dynamic;
  kiln_status st = host_team_open(omp_get_max_threads(), &x->team);
  if (st) {
    kiln_free(x);
    return st;
  }
  *dev = x;
  return KILN_OK;
}

static void cpu_close(void *dev) {
  Cpu *x = dev;
  host_team_close(x->team);
  kiln_free(x);
}

/* Exact teams by default (kiln_options.omp_dynamic 0), as ONNX Runtime's pool. On a machine
 * shared with other work a thread that is not scheduled holds up every kernel (measured with
 * OpenMP's teams: 0.14 -> 124 ms per training step at load 7 on 2 cores); omp_dynamic 1 (or
 * OMP_DYNAMIC=true) sizes each job from the load average instead, as libgomp's dynamic teams
 * did: the processors online less the load, at least one. */
static int threads_now(const Cpu *x) {
  int n = host_team_size(x->team);
  bool dynamic = x->omp_dynamic > 0 || (x->omp_dynamic < 0 && omp_get_dynamic());
  double load;
  if (!dynamic || n == 1 || getloadavg(&load, 1) != 1) return n;
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  double spare = (double)(online > 0 ? online : n) - load;
  return spare >= n ? n : spare < 1.5 ? 1 : (int)(spare + 0.5);
}

void cpu_run(void *dev, HostJob job, void *ctx) {
  Cpu *x = dev;
  /* the thread count asked for since the team started (omp_set_num_threads): a new team */
  int want = omp_get_max_threads();
  if (want != host_team_size(x->team)) {
    HostTeam *t = NULL;
    if (!host_team_open(want, &t)) host_team_close(x->team), x->team = t;
  }
  host_team_run(x->team, threads_now(x), job, ctx);
}

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

typedef struct Launch {
  Entry entry;
  void *const *args;
} Launch;

static void launch_part(void *ctx, int tid, int nt) {
  const Launch *l = ctx;
  l->entry(l->args, tid, nt);
}

static kiln_status cpu_launch(void *dev, void *fn, const CgLaunch *l, const RtBuf *args) {
  void *a[MAX_ARGS];
  int n = l->n_params + (l->pack > 0);  /* a kernel's weights laid out for it: one more, the last */
  if (n > MAX_ARGS) return kiln_fail(KILN_ERR_UNSUPPORTED, "cpu: kernel %d has %d parameters (at most %d)", l->kernel, n, MAX_ARGS);
  for (int i = 0; i < n; i++) a[i] = (void *)(uintptr_t)args[i];
  Launch run = { .args = a };
  memcpy(&run.entry, &fn, sizeof run.entry);  /* object pointer -> function pointer, as POSIX allows */
  cpu_run(dev, launch_part, &run);
  return KILN_OK;
}

static kiln_status cpu_library_prepare(void *dev, const CgLibGemm *g, const RtBuf *buf, void **call) {
  return cpu_gemm_prepare(g, buf, dev, call);
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
