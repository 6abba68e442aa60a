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
  void *ref[16] = { 0 }, *f[16] = { 0 }, *e[16] = { 0 };
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


/* Builds y = f(x) graphs by hand for the shapes the workloads do not cover. */
static int kernels_of(kiln_graph *g, int fuse, const void *const *in, void *const *out) {
  kiln_options o = kiln_options_default();
  o.backend = "cpu";
  o.fuse = fuse;
  o.strict = 1;
  kiln_program *p = NULL;
  kiln_census c = { 0 };
  OK(kiln_program_compile(g, &o, &p));
  if (p) {
    OK(kiln_program_run(p, in, out));
    OK(kiln_program_census(p, &c));
  }
  kiln_program_free(p);
  return (int)c.kernels_launched;
}

/* Siblings: sum(x) and sum(x*x) over rows (a multi-output reduction), and exp(x), 2x
 * (horizontal pointwise) each share one kernel; values checked by hand. */
static void siblings(void) {
  kiln_graph *g;
  OK(kiln_graph_create(&g));
  int64_t xs[2] = { 16, 50 };
  int ax = 1;
  kiln_tensor x, s1, sq, s2, e, two, d;
  OK(kiln_graph_input(g, "x", KILN_F32, 2, xs, &x));
  OK(kiln_graph_reduce(g, KILN_REDUCE_SUM, x, 1, &ax, 1, &s1));
  OK(kiln_graph_binary(g, KILN_MUL, x, x, &sq));
  OK(kiln_graph_reduce(g, KILN_REDUCE_SUM, sq, 1, &ax, 1, &s2));
  OK(kiln_graph_output(g, s1, "s1"));
  OK(kiln_graph_output(g, s2, "s2"));
  float in[800], o1[16], o2[16], o3[800], o4[800];
  for (int i = 0; i < 800; i++) in[i] = (float)((i * 37) % 101) / 50.0f - 1.0f;
  CHECK(kernels_of(g, 1, (const void *const[]){ in }, (void *const[]){ o1, o2 }) == 1);
  for (int r = 0; r < 16; r++) {
    double a = 0, b = 0;
    for (int c = 0; c < 50; c++) a += in[r * 50 + c], b += (double)in[r * 50 + c] * in[r * 50 + c];
    CHECK_NEAR(o1[r], a, 1e-5);
    CHECK_NEAR(o2[r], b, 1e-5);
  }
  kiln_graph_free(g);
  OK(kiln_graph_create(&g));
  OK(kiln_graph_input(g, "x", KILN_F32, 2, xs, &x));
  OK(kiln_graph_unary(g, KILN_EXP, x, &e));
  OK(kiln_graph_scalar(g, KILN_F32, 2.0, &two));
  OK(kiln_graph_binary(g, KILN_MUL, x, two, &d));
  OK(kiln_graph_output(g, e, "e"));
  OK(kiln_graph_output(g, d, "d"));
  CHECK(kernels_of(g, 1, (const void *const[]){ in }, (void *const[]){ o3, o4 }) == 1);
  CHECK(kernels_of(g, 0, (const void *const[]){ in }, (void *const[]){ o3, o4 }) == 2);
  for (int i = 0; i < 800; i++) { CHECK_NEAR(o3[i], exp(in[i]), 1e-6); CHECK_NEAR(o4[i], 2.0 * in[i], 1e-7); }
  kiln_graph_free(g);
}

/* The input budget ends a kernel: a sum of 6 inputs under KILN_MAX_INPUTS=3. */
static void budget(void) {
  kiln_graph *g;
  OK(kiln_graph_create(&g));
  int64_t n = 64;
  kiln_tensor x[6], acc;
  for (int i = 0; i < 6; i++) OK(kiln_graph_input(g, NULL, KILN_F32, 1, &n, &x[i]));
  acc = x[0];
  for (int i = 1; i < 6; i++) OK(kiln_graph_binary(g, KILN_ADD, acc, x[i], &acc));
  OK(kiln_graph_output(g, acc, "y"));
  float in[6][64], y[64];
  for (int i = 0; i < 6; i++)
    for (int j = 0; j < 64; j++) in[i][j] = (float)(i + j);
  const void *ins[6] = { in[0], in[1], in[2], in[3], in[4], in[5] };
  CHECK(kernels_of(g, 1, ins, (void *const[]){ y }) == 1);
  setenv("KILN_MAX_INPUTS", "3", 1);
  int k = kernels_of(g, 1, ins, (void *const[]){ y });
  CHECK_MSG(k >= 2 && k < 5, "%d kernels under a budget of 3 inputs", k);
  unsetenv("KILN_MAX_INPUTS");
  for (int j = 0; j < 64; j++) CHECK_NEAR(y[j], 15 + 6 * j, 1e-6);
  kiln_graph_free(g);
}

/* Outputs that are an input, a parameter, or one stage twice are copies; an empty
 * tensor runs no iterations. */
static void passthrough(void) {
  kiln_graph *g;
  OK(kiln_graph_create(&g));
  int64_t n = 5, z[2] = { 0, 3 };
  float pd[5] = { 1, 2, 3, 4, 5 }, in[5] = { -1, -2, -3, -4, -5 };
  kiln_tensor x, w, y, e, ez;
  OK(kiln_graph_input(g, "x", KILN_F32, 1, &n, &x));
  OK(kiln_graph_param(g, "w", KILN_F32, 1, &n, pd, &w));
  OK(kiln_graph_binary(g, KILN_ADD, x, w, &y));
  OK(kiln_graph_input(g, "e", KILN_F32, 2, z, &e));
  OK(kiln_graph_unary(g, KILN_EXP, e, &ez));
  OK(kiln_graph_output(g, x, "x"));
  OK(kiln_graph_output(g, w, "w"));
  OK(kiln_graph_output(g, y, "y"));
  OK(kiln_graph_output(g, y, "y again"));
  OK(kiln_graph_output(g, ez, "empty"));
  float o[4][5] = { { 0 } }, empty[1];
  CHECK(kernels_of(g, 1, (const void *const[]){ in, empty }, (void *const[]){ o[0], o[1], o[2], o[3], empty }) >= 1);
  for (int i = 0; i < 5; i++) {
    CHECK(o[0][i] == in[i]);
    CHECK(o[1][i] == pd[i]);
    CHECK(o[2][i] == 0 && o[3][i] == 0);
  }
  kiln_graph_free(g);
}

int main(void) {
  if (!mkdtemp(cache_dir)) return 1;
  setenv("KILN_CACHE_DIR", cache_dir, 1);  /* every program this test compiles caches here */
  pin("chain10_4096", 1, 13, 1, 2e-4);
  pin("softmax_64x100", 1, 5, 1, 2e-4);
  pin("logsoftmax_64x100", 1, 6, 0, 2e-4);
  pin("layernorm_32x96", 1, 11, 0, 2e-4);
  pin("linear_relu_33x40x24", 1, 3, 0, 1e-3);
  pin("mlp_fwd_b16", 3, 8, 0, 1e-3);  /* eager: 3 matmul, 3 bias add, 2 relu */
  /* the training step's counts move with autodiff's rules (tests/graph pins them); values only */
  pin("mlp_train_b8", -1, -1, 0, 1e-3);
  siblings();
  budget();
  passthrough();
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", cache_dir);
  if (system(cmd)) {}
  TEST_MAIN_END();
}
