/*
 * test_fusion.c — pins the planner's kernel counts and bytes, fused and eager, on
 * the cpu backend, and checks every value against ref (tinygrad's check_schedule).
 */
#include "test.h"

#include "../../bench/workloads.c"

#include <stdlib.h>

static char cache_dir[] = "/tmp/kiln-test-fusion-XXXXXX";

/* Runs w on backend with fuse; copies outputs into outs (malloc'd); returns the census. */
static kiln_census run_on(Workload *w, const char *backend, int fuse, void **outs) {
  kiln_census c = { 0 };
  kiln_options o = kiln_options_default();
  o.backend = backend;
  o.fuse = fuse;
  o.strict = 1;
  kiln_program *p = NULL;
  OK(kiln_program_compile(w->g, &o, &p));
  if (!p) return c;
  for (int i = 0; i < w->n_outputs; i++) outs[i] = calloc(1, w->output_bytes[i] + 1);
  OK(kiln_program_run(p, (const void *const *)w->inputs, outs));
  OK(kiln_program_census(p, &c));
  kiln_program_free(p);
  return c;
}

static double max_rel_err(const float *a, const float *b, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; i++) {
    double e = fabs((double)a[i] - (double)b[i]) / (1e-3 + fabs((double)b[i]));
    if (!(e <= m)) m = e;
  }
  return m;
}

/* kernels fused, kernels eager (-1: not pinned); bytes_floor: 1 to check bytes == inputs + outputs */
/* tol: contractions accumulate in f32 (ref in f64), so they get a looser bound */
static void pin(const char *name, int fused, int eager, int bytes_floor, double tol) {
  Workload w;
  OK(wl_build(name, &w));
  if (!w.g) { test_failures++; return; }
  void *ref[8] = { 0 }, *f[8] = { 0 }, *e[8] = { 0 };
  run_on(&w, "ref", 1, ref);
  kiln_census cf = run_on(&w, "cpu", 1, f);
  kiln_census ce = run_on(&w, "cpu", 0, e);
  CHECK_MSG(fused < 0 || cf.kernels_launched == fused, "%s fused: %lld kernels, expected %d", name, (long long)cf.kernels_launched, fused);
  CHECK_MSG(eager < 0 || ce.kernels_launched == eager, "%s eager: %lld kernels, expected %d", name, (long long)ce.kernels_launched, eager);
  CHECK(cf.host_fallbacks == 0 && ce.host_fallbacks == 0);
  if (bytes_floor) {
    int64_t floor = 0;
    for (int i = 0; i < w.n_inputs; i++) floor += (int64_t)w.input_bytes[i];
    for (int i = 0; i < w.n_outputs; i++) floor += (int64_t)w.output_bytes[i];
    CHECK_MSG(cf.bytes_read + cf.bytes_written == floor, "%s: %lld bytes moved, floor %lld", name,
              (long long)(cf.bytes_read + cf.bytes_written), (long long)floor);
    CHECK(ce.bytes_read + ce.bytes_written > floor);
  }
  for (int i = 0; i < w.n_outputs; i++) {
    size_t n = w.output_bytes[i] / sizeof(float);
    if (ref[i] && f[i] && e[i]) {
      double ef = max_rel_err(f[i], ref[i], n), ee = max_rel_err(e[i], ref[i], n);
      CHECK_MSG(ef < tol && ee < tol, "%s output %d: fused err %g, eager err %g", name, i, ef, ee);
    }
    free(ref[i]); free(f[i]); free(e[i]);
  }
  wl_free(&w);
}

int main(void) {
  if (!mkdtemp(cache_dir)) return 1;
  setenv("XDG_CACHE_HOME", cache_dir, 1);
  pin("chain10_4096", 1, 13, 1, 2e-4);
  pin("softmax_64x100", 1, 5, 1, 2e-4);
  pin("logsoftmax_64x100", 1, 6, 0, 2e-4);
  pin("layernorm_32x96", 1, 11, 0, 2e-4);
  pin("linear_relu_33x40x24", 1, 3, 0, 1e-3);
  pin("mlp_fwd_b16", 3, 8, 0, 1e-3);  /* eager: 3 matmul, 3 bias add, 2 relu */
  /* the training step's counts move with autodiff's rules (tests/graph pins them); values only */
  pin("mlp_train_b8", -1, -1, 0, 1e-3);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", cache_dir);
  if (system(cmd)) {}
  TEST_MAIN_END();
}
