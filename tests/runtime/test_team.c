/*
 * The cpu backend's team of threads (src/runtime/team.c): every kernel is run by each
 * thread of the team on its own share of the outer loop. A program's outputs are the same bits
 * on 1, 2, 3 and 5 threads (each output is one thread's work, whatever the shares), the team
 * follows omp_set_num_threads between runs of one program, and omp_dynamic 1 (a kernel's
 * threads from the load average) gives them too; all within tolerance of ref. The graph holds
 * every kind of loop the C dialect shares out: a 3x3 convolution (direct), a product with bias
 * and relu, a softmax over rows, a plain pointwise sum and a small kernel below the parallel
 * threshold (thread 0 alone).
 */
#include "test.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

enum { N = 4, C = 3, H = 20, W = 24, M = 16, R = 64, K = 96, J = 80, OUTS = 4 };

static float val(int64_t i, int salt) { return (float)((i * 37 + salt * 11) % 23 - 11) / 16.0f; }

static float *filled(int64_t n, int salt) {
  float *p = malloc((size_t)n * sizeof *p);
  if (!p) abort();
  for (int64_t i = 0; i < n; i++) p[i] = val(i, salt);
  return p;
}

static const int64_t out_numel[OUTS] = { N * M * H * W, R * J, R * J, 7 };

static kiln_graph *build(void) {
  kiln_graph *g;
  OK(kiln_graph_create(&g));
  int64_t xs[4] = { N, C, H, W }, ws[4] = { M, C, 3, 3 }, bs[1] = { M }, as[2] = { R, K }, ms[2] = { K, J }, cs[1] = { J },
          ss[1] = { 7 };
  float *w = filled(M * C * 9, 1), *b = filled(M, 2), *m = filled(K * J, 4), *c = filled(J, 5);
  kiln_tensor x, wp, bp, y, a, mp, cp, z, s, sm, small;
  OK(kiln_graph_input(g, "x", KILN_F32, 4, xs, &x));
  OK(kiln_graph_param(g, "w", KILN_F32, 4, ws, w, &wp));
  OK(kiln_graph_param(g, "b", KILN_F32, 1, bs, b, &bp));
  kiln_conv_params p = { .spatial = 2, .strides = { 1, 1 }, .dilations = { 1, 1 }, .pads = { 1, 1, 1, 1 }, .group = 1 };
  OK(kiln_graph_conv(g, x, wp, bp, &p, &y));
  OK(kiln_graph_unary(g, KILN_RELU, y, &y));
  OK(kiln_graph_output(g, y, "conv"));
  OK(kiln_graph_input(g, "a", KILN_F32, 2, as, &a));
  OK(kiln_graph_param(g, "m", KILN_F32, 2, ms, m, &mp));
  OK(kiln_graph_param(g, "c", KILN_F32, 1, cs, c, &cp));
  OK(kiln_graph_matmul(g, a, mp, &z));
  OK(kiln_graph_binary(g, KILN_ADD, z, cp, &z));
  OK(kiln_graph_unary(g, KILN_RELU, z, &z));
  OK(kiln_graph_output(g, z, "product"));
  OK(kiln_graph_softmax(g, z, 1, &sm));
  OK(kiln_graph_output(g, sm, "softmax"));
  OK(kiln_graph_input(g, "s", KILN_F32, 1, ss, &s));
  OK(kiln_graph_unary(g, KILN_EXP, s, &small));
  OK(kiln_graph_output(g, small, "small"));
  free(w), free(b), free(m), free(c);
  return g;
}

static void run(kiln_program *p, const void *const *ins, float **outs) {
  for (int i = 0; i < OUTS; i++)
    for (int64_t j = 0; j < out_numel[i]; j++) outs[i][j] = NAN;  /* nothing left from a run before */
  OK(kiln_program_run(p, ins, (void **)outs));
}

static int differ_bits(float *const *a, float *const *b) {
  int n = 0;
  for (int i = 0; i < OUTS; i++) n += memcmp(a[i], b[i], (size_t)out_numel[i] * sizeof(float)) != 0;
  return n;
}

int main(void) {
  kiln_graph *g = build();
  float *x = filled(N * C * H * W, 3), *a = filled(R * K, 6), *s = filled(7, 7);
  const void *ins[3] = { x, a, s };
  float *want[OUTS], *first[OUTS], *got[OUTS];
  for (int i = 0; i < OUTS; i++) {
    want[i] = malloc((size_t)out_numel[i] * sizeof(float));
    first[i] = malloc((size_t)out_numel[i] * sizeof(float));
    got[i] = malloc((size_t)out_numel[i] * sizeof(float));
    if (!want[i] || !first[i] || !got[i]) abort();
  }
  kiln_options o = kiln_options_default();
  o.backend = "ref";
  kiln_program *r = NULL, *p = NULL;
  OK(kiln_program_compile(g, &o, &r));
  if (r) run(r, ins, want);
  o = kiln_options_default();
  o.backend = "cpu";
  o.strict = 1;
  o.omp_dynamic = 0;
  int before = omp_get_max_threads();
  omp_set_num_threads(1);
  OK(kiln_program_compile(g, &o, &p));
  const int threads[] = { 1, 2, 3, 5, 2 };
  for (size_t t = 0; p && r && t < sizeof threads / sizeof threads[0]; t++) {
    omp_set_num_threads(threads[t]);
    run(p, ins, t ? got : first);
    if (t) CHECK_MSG(differ_bits(got, first) == 0, "%d threads: outputs differ from 1 thread's", threads[t]);
    double worst = 0;
    for (int i = 0; i < OUTS; i++)
      for (int64_t j = 0; j < out_numel[i]; j++) {
        double e = fabs((double)(t ? got : first)[i][j] - want[i][j]) / (1 + fabs((double)want[i][j]));
        if (!(e <= worst)) worst = e;
      }
    CHECK_MSG(worst < 1e-5, "%d threads: %g from ref", threads[t], worst);
  }
  kiln_program_free(p);
  p = NULL;
  /* a kernel's threads from the load average: the same bits again */
  omp_set_num_threads(2);
  o.omp_dynamic = 1;
  OK(kiln_program_compile(g, &o, &p));
  if (p && r) {
    run(p, ins, got);
    CHECK_MSG(differ_bits(got, first) == 0, "omp_dynamic 1: outputs differ from 1 thread's");
  }
  omp_set_num_threads(before);
  kiln_program_free(p);
  kiln_program_free(r);
  for (int i = 0; i < OUTS; i++) free(want[i]), free(first[i]), free(got[i]);
  free(x), free(a), free(s);
  kiln_graph_free(g);
  TEST_MAIN_END();
}
