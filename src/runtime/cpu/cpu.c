/*
 * cpu.c — the cpu backend. Takes a TE, plans it (plan_build), renders every kernel
 * as one C translation unit (cg_render_plan with the C dialect), compiles and loads
 * it (cache.c), and runs the schedule: kernels in plan order, each an OpenMP loop.
 *
 * Buffers: graph inputs and outputs are the caller's host buffers, bound directly
 * (no copies); parameters are copied once at compile into memory the backend owns,
 * since assigns update them; constants are read where the TE keeps them;
 * intermediates live in one arena placed by the plan's memory plan. Assigns are
 * applied after every kernel of the run has finished, so no kernel ever reads a
 * half-updated parameter. A stage no kernel can compute (opaque: every string op)
 * runs through ref_eval_stage_strings and is counted as a host fallback (an error in
 * strict mode); the strings it makes live in x->strings until the next run.
 */
#include "cpu.h"

#include "../../codegen/codegen.h"

#include <dlfcn.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef void (*Entry)(void *const *args);

typedef struct Cpu {
  TE *te;
  Plan *plan;
  void *dl;
  Entry *entry;            /* per kernel; NULL for host kernels */
  int **params;            /* per kernel: stages of its parameters */
  int *n_params;
  void **bufs;             /* stage -> buffer for this run */
  void **args;             /* scratch: one kernel's argument list */
  unsigned char *arena;    /* intermediates */
  void **param_data;       /* param stage -> owned copy */
  Arena strings;           /* strings made by host string ops in this run */
  kiln_options opt;
  int64_t launches;
  bool cache_hit;
  double build_ms;
} Cpu;

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int64_t stage_bytes(const Stage *s) { return s->numel * (int64_t)kiln_dtype_size(s->dtype); }

static void cpu_free(void *exec) {
  Cpu *x = exec;
  if (!x) return;
  if (x->dl) dlclose(x->dl);
  if (x->params)
    for (int k = 0; k < x->plan->n_kernels; k++) kiln_free(x->params[k]);
  if (x->param_data)
    for (int s = 0; s < x->te->n_stages; s++) kiln_free(x->param_data[s]);
  kiln_free(x->params);
  kiln_free(x->n_params);
  kiln_free(x->entry);
  kiln_free(x->bufs);
  kiln_free(x->args);
  kiln_free(x->arena);
  kiln_free(x->param_data);
  arena_free(&x->strings);
  plan_free(x->plan);
  kiln_free(x);
}

static kiln_status check_fallbacks(const Cpu *x) {
  for (int k = 0; k < x->plan->n_kernels; k++) {
    const Kernel *K = &x->plan->kernels[k];
    if (K->kind != KN_HOST) continue;
    const Stage *S = &x->te->stages[K->anchor];
    if (x->opt.strict)
      return kiln_fail(KILN_ERR_FALLBACK, "cpu: op %s (t%d '%s') would run on the host (strict mode)",
                       S->op >= 0 && S->op < OP_COUNT ? op_names[S->op] : "?", S->id, S->name ? S->name : "");
  }
  return KILN_OK;
}

static kiln_status load_entries(Cpu *x) {
  const Plan *p = x->plan;
  int n = p->n_kernels;
  x->entry = kiln_calloc((size_t)n + 1, sizeof *x->entry);
  x->params = kiln_calloc((size_t)n + 1, sizeof *x->params);
  x->n_params = kiln_calloc((size_t)n + 1, sizeof *x->n_params);
  x->args = kiln_calloc((size_t)x->te->n_stages + 1, sizeof *x->args);
  if (!x->entry || !x->params || !x->n_params || !x->args) return kiln_fail(KILN_ERR_NO_MEMORY, "cpu: out of memory");
  for (int k = 0; k < n; k++) {
    const Kernel *K = &p->kernels[k];
    if (!(x->params[k] = kiln_calloc((size_t)(K->n_ins + K->n_items + 1), sizeof **x->params)))
      return kiln_fail(KILN_ERR_NO_MEMORY, "cpu: out of memory");
    x->n_params[k] = cg_kernel_params(p, K, x->params[k]);
    if (K->kind == KN_HOST) continue;
    char name[32];
    cg_kernel_name(k, true, name);
    void *sym = dlsym(x->dl, name);
    if (!sym) return kiln_fail(KILN_ERR_COMPILE, "cpu: kernel %d missing from the compiled library", k);
    memcpy(&x->entry[k], &sym, sizeof sym);  /* object pointer -> function pointer, as POSIX allows */
  }
  return KILN_OK;
}

static kiln_status bind_static(Cpu *x) {
  TE *te = x->te;
  x->bufs = kiln_calloc((size_t)te->n_stages + 1, sizeof *x->bufs);
  x->param_data = kiln_calloc((size_t)te->n_stages + 1, sizeof *x->param_data);
  if (!x->bufs || !x->param_data) return kiln_fail(KILN_ERR_NO_MEMORY, "cpu: out of memory");
  if (x->plan->arena_bytes && !(x->arena = kiln_malloc((size_t)x->plan->arena_bytes)))
    return kiln_fail(KILN_ERR_NO_MEMORY, "cpu: cannot allocate %lld bytes of intermediates",
                     (long long)x->plan->arena_bytes);
  for (int s = 0; s < te->n_stages; s++) {
    const Stage *S = &te->stages[s];
    if (S->kind == ST_PARAM) {
      size_t b = (size_t)stage_bytes(S);
      if (!(x->param_data[s] = kiln_malloc(b))) return kiln_fail(KILN_ERR_NO_MEMORY, "cpu: out of memory copying param '%s'", S->name);
      if (b && S->data) memcpy(x->param_data[s], S->data, b);
      x->bufs[s] = x->param_data[s];
    } else if (S->kind == ST_CONST) {
      x->bufs[s] = (void *)S->data;
    } else if (x->plan->offset[s] >= 0) {
      x->bufs[s] = x->arena + x->plan->offset[s];
    }
  }
  return KILN_OK;
}

static kiln_status cpu_compile(const TE *cte, const kiln_options *o, void **exec, kiln_census *c) {
  *exec = NULL;
  Cpu *x = kiln_calloc(1, sizeof *x);
  if (!x) return kiln_fail(KILN_ERR_NO_MEMORY, "cpu: out of memory");
  /* the plan adds hash-consed index expressions to the TE's arena; stages are untouched */
  x->te = (TE *)cte;
  x->opt = *o;
  double t0 = now_ms();
  PlanOptions po = plan_options(o);
  kiln_status st = plan_build(x->te, &po, &x->plan);
  if (!st && o->debug >= 1) {
    fprintf(stderr, "> plan:\n");
    plan_print(x->plan, stderr);
  }
  if (!st) st = check_fallbacks(x);
  StrBuf src = { 0 };
  if (!st) st = cg_render_plan(x->plan, &cg_dialect_c, &src);
  if (!st && o->debug >= 2) fprintf(stderr, "> source (cc %s):\n%s\n", cpu_cc_flags(), src.s);
  if (!st) st = cpu_build(src.s, src.len, &x->dl, &x->cache_hit);
  sb_free(&src);
  if (!st) st = load_entries(x);
  if (!st) st = bind_static(x);
  if (st) { cpu_free(x); return st; }
  x->build_ms = now_ms() - t0;
  for (int k = 0; k < x->plan->n_kernels; k++) x->launches += x->plan->kernels[k].kind != KN_HOST;
  c->cache_hit = x->cache_hit;
  c->kernels_planned = x->plan->n_kernels;
  c->peak_bytes = x->plan->arena_bytes;
  c->compile_ms = x->build_ms;
  *exec = x;
  return KILN_OK;
}

static void note_fallback(kiln_census *c, const Stage *S) {
  c->host_fallbacks++;
  if (stage_bytes(S) > c->largest_fallback_bytes) c->largest_fallback_bytes = stage_bytes(S);
  const char *op = S->op >= 0 && S->op < OP_COUNT ? op_names[S->op] : "?";
  size_t n = strlen(c->fallback_ops);
  snprintf(c->fallback_ops + n, sizeof c->fallback_ops - n, "%s%s:1", n ? " " : "", op);
}

static kiln_status cpu_run(void *exec, const void *const *inputs, void *const *outputs, kiln_census *c) {
  Cpu *x = exec;
  TE *te = x->te;
  const Plan *p = x->plan;
  for (int i = 0; i < te->n_inputs; i++) x->bufs[te->inputs[i]] = (void *)inputs[i];
  for (int i = 0; i < te->n_outputs; i++) {
    int s = te->outputs[i];
    const Stage *S = &te->stages[s];
    if (S->kind == ST_INPUT || S->kind == ST_PARAM || S->kind == ST_CONST) continue;
    bool first = true;
    for (int j = 0; j < i && first; j++) first = te->outputs[j] != s;
    if (first) x->bufs[s] = outputs[i];
  }
  /* Threads by load: on a busy machine a parallel region waits for a thread that is not
   * scheduled (measured: 0.14 ms -> 124 ms per training step at load 7 on 2 cores);
   * libgomp's dynamic mode sizes each team from the load average. $OMP_DYNAMIC wins. */
  if (!getenv("OMP_DYNAMIC")) omp_set_dynamic(1);
  c->host_fallbacks = 0;
  c->largest_fallback_bytes = 0;
  c->fallback_ops[0] = 0;
  arena_free(&x->strings);  /* the last run's strings: program.c has copied its outputs */
  for (int k = 0; k < p->n_kernels; k++) {
    const Kernel *K = &p->kernels[k];
    if (K->kind == KN_HOST) {
      const Stage *S = &te->stages[K->anchor];
      kiln_status st =
          ref_eval_stage_strings(te, K->anchor, (const void *const *)x->bufs, x->bufs[K->anchor], &x->strings);
      if (st) return st;
      note_fallback(c, S);
      continue;
    }
    for (int i = 0; i < x->n_params[k]; i++) x->args[i] = x->bufs[x->params[k][i]];
    x->entry[k](x->args);
  }
  /* outputs that are sources or repeat an earlier output: copies */
  for (int i = 0; i < te->n_outputs; i++) {
    int s = te->outputs[i];
    if (x->bufs[s] != outputs[i] && stage_bytes(&te->stages[s]))
      memcpy(outputs[i], x->bufs[s], (size_t)stage_bytes(&te->stages[s]));
  }
  /* assigns last: every kernel has read the old values */
  for (int i = 0; i < te->n_assigns; i++) {
    int ps = te->assigns[i].param, vs = te->assigns[i].value;
    if (x->param_data[ps] && x->bufs[vs] && x->param_data[ps] != x->bufs[vs])
      memmove(x->param_data[ps], x->bufs[vs], (size_t)stage_bytes(&te->stages[ps]));
  }
  c->kernels_launched = x->launches;
  c->submissions = x->launches;
  c->bytes_read = p->bytes_read;
  c->bytes_written = p->bytes_written;
  c->peak_bytes = p->arena_bytes;
  c->kernels_planned = p->n_kernels;
  c->cache_hit = x->cache_hit;
  c->h2d_bytes = c->d2h_bytes = c->h2d_copies = c->d2h_copies = 0;
  return KILN_OK;
}

static kiln_status cpu_read_param(void *exec, int stage, void *dst) {
  Cpu *x = exec;
  if (!x->param_data[stage]) return kiln_fail(KILN_ERR_INVALID_ARG, "cpu: stage %d is not a parameter", stage);
  memcpy(dst, x->param_data[stage], (size_t)stage_bytes(&x->te->stages[stage]));
  return KILN_OK;
}

static kiln_status cpu_print(void *exec, FILE *f) {
  Cpu *x = exec;
  plan_print(x->plan, f);
  fprintf(f, "compiled: cc %s, %.1f ms, cache %s\n", cpu_cc_flags(), x->build_ms, x->cache_hit ? "hit" : "miss");
  return KILN_OK;
}

static kiln_status cpu_probe(void) { return KILN_OK; }

const Backend rt_backend_cpu = {
  .name = "cpu",
  .probe = cpu_probe,
  .compile = cpu_compile,
  .run = cpu_run,
  .read_param = cpu_read_param,
  .print = cpu_print,
  .free = cpu_free,
  .set_input = NULL,    /* host memory already: program.c hands host buffers every run */
  .strings = true,
  .read_output = NULL,
};
