/*
 * bench.c — kiln_bench [--backend B] [--runs N] [NAME...]: builds each workload of
 * ../shared/bench/WORKLOADS.md (bench/workloads.h) through the C API, compiles it
 * fused and eager, and prints one JSON line per workload and mode: median ms of one
 * run (after warm-up), kernels per run, bytes moved (from the plan), host fallbacks,
 * and the error against ref, element-wise at its largest and norm-wise, over the floating-point
 * outputs (ref runs only where it is quick: "max_rel_err" and "norm_rel_err" null otherwise).
 */
#include "workloads.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* first: outputs of the first run (training steps change their params every run). */
static kiln_status run_mode(Workload *w, const char *backend, int fuse, int runs, void **outs, void **first,
                            double *median, kiln_census *c) {
  kiln_options o = kiln_options_default();
  o.backend = backend;
  o.fuse = fuse;
  kiln_program *p;
  kiln_status st = kiln_program_compile(w->g, &o, &p);
  if (st) return st;
  double t[64];
  if (runs > 64) runs = 64;
  st = kiln_program_run(p, (const void *const *)w->inputs, first);
  if (!st) st = kiln_program_run(p, (const void *const *)w->inputs, outs);
  int done = 0;
  double start = now_ms();
  for (; done < runs && !st; done++) {
    double t0 = now_ms();
    st = kiln_program_run(p, (const void *const *)w->inputs, outs);
    t[done] = now_ms() - t0;
    if (now_ms() - start > 3000 && done >= 2) { done++; break; }
  }
  if (!st) st = kiln_program_census(p, c);
  kiln_program_free(p);
  qsort(t, (size_t)done, sizeof t[0], cmp_double);
  *median = done ? t[done / 2] : NAN;
  return st;
}

/* The largest element-wise relative error of a's outputs against ref's (floating-point outputs,
 * 16-bit ones widened), and the norm-wise one (||a - ref|| / ||ref|| over them all). An element
 * near zero whose value cancelled can dominate the first; the second says how far the whole is. */
static double max_rel_err(const Workload *w, void **a, void **ref, double *norm) {
  double m = 0, num = 0, den = 0;
  for (int o = 0; o < w->n_outputs; o++) {
    kiln_dtype t = w->output_dtype[o];
    if (t != KILN_F32 && t != KILN_BF16 && t != KILN_F16) continue;
    size_t n = w->output_bytes[o] / kiln_dtype_size(t);
    for (size_t i = 0; i < n; i++) {
      double x = wl_output_value(t, a[o], i), r = wl_output_value(t, ref[o], i);
      double e = fabs(x - r) / (1e-6 + fabs(r));
      if (!(e <= m)) m = e;
      num += (x - r) * (x - r), den += r * r;
    }
  }
  *norm = sqrt(num) / (den > 0 ? sqrt(den) : 1.0);
  return m;
}

static void bench_one(const char *name, const char *backend, int runs) {
  Workload w;
  kiln_status st = wl_build(name, &w);
  if (st) {
    printf("{\"name\":\"%s\",\"error\":\"%s: %s\"}\n", name, kiln_status_name(st), kiln_last_error());
    return;
  }
  void *ref[16] = { 0 }, *outs[16] = { 0 }, *first[16] = { 0 };
  for (int i = 0; i < w.n_outputs; i++) outs[i] = calloc(1, w.output_bytes[i] + 1), first[i] = calloc(1, w.output_bytes[i] + 1);
  size_t in_bytes = 0;
  for (int i = 0; i < w.n_inputs; i++) in_bytes += w.input_bytes[i];
  bool have_ref = in_bytes <= (8u << 20) && w.flops <= 2e9;
  if (have_ref) {
    double m;
    kiln_census c;
    for (int i = 0; i < w.n_outputs; i++) ref[i] = calloc(1, w.output_bytes[i] + 1);
    if (run_mode(&w, "ref", 1, 0, outs, ref, &m, &c)) have_ref = false;
  }
  for (int fuse = 1; fuse >= 0; fuse--) {
    double median;
    kiln_census c = { 0 };
    st = run_mode(&w, backend, fuse, runs, outs, first, &median, &c);
    if (st) {
      printf("{\"name\":\"%s\",\"backend\":\"%s\",\"mode\":\"%s\",\"error\":\"%s: %s\"}\n", name, backend,
             fuse ? "fused" : "eager", kiln_status_name(st), kiln_last_error());
      continue;
    }
    char err[32] = "null", norm_err[32] = "null";
    double norm;
    if (have_ref) {
      snprintf(err, sizeof err, "%.3g", max_rel_err(&w, first, ref, &norm));
      snprintf(norm_err, sizeof norm_err, "%.3g", norm);
    }
    printf("{\"name\":\"%s\",\"backend\":\"%s\",\"mode\":\"%s\",\"median_ms\":%.4f,\"kernels\":%lld,"
           "\"bytes\":%lld,\"fallbacks\":%lld,\"max_rel_err\":%s,\"norm_rel_err\":%s,\"compile_ms\":%.1f,\"cache_hit\":%d}\n",
           name, backend, fuse ? "fused" : "eager", median, (long long)c.kernels_launched,
           (long long)(c.bytes_read + c.bytes_written), (long long)c.host_fallbacks, err, norm_err, c.compile_ms, c.cache_hit);
    fflush(stdout);
  }
  for (int i = 0; i < w.n_outputs; i++) { free(ref[i]); free(outs[i]); free(first[i]); }
  wl_free(&w);
}

int main(int argc, char **argv) {
  const char *backend = "cpu";
  int runs = 20, named = 0;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--backend") && i + 1 < argc) backend = argv[++i];
    else if (!strcmp(argv[i], "--runs") && i + 1 < argc) runs = atoi(argv[++i]);
    else { bench_one(argv[i], backend, runs); named++; }
  }
  if (!named)
    for (int i = 0; i < wl_n_standard; i++) bench_one(wl_standard[i], backend, runs);
  return 0;
}
