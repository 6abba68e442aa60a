/*
 * Compositions add many nodes; the graph's tensor array grows underneath them. A
 * composition that keeps a Tensor pointer across node additions reads freed memory
 * (found by the ONNX fuzzer in layernorm). Padding a fresh graph with k scalars, for
 * every k up to a few growth steps, puts the growth at every point inside each
 * composition; ASan (in CI) flags a stale read, and graph_check plus the values on ref
 * check the result either way.
 */
#include "test.h"
#include "graph/graph.h"

static kiln_status build_all(kiln_graph *g, kiln_tensor x, kiln_tensor sc, kiln_tensor bs, kiln_tensor *y) {
  kiln_status s;
  kiln_tensor a, b, c, d, e;
  if ((s = kiln_graph_layernorm(g, x, sc, bs, -1, 1e-5, &a))) return s;
  if ((s = kiln_graph_softmax(g, a, -1, &b))) return s;
  if ((s = kiln_graph_log_softmax(g, b, 0, &c))) return s;
  if ((s = kiln_graph_reduce(g, KILN_REDUCE_LOG_SUM_EXP, c, 1, (int[]){ 1 }, 1, &d))) return s;
  if ((s = kiln_graph_reduce(g, KILN_REDUCE_MEAN, d, 0, NULL, 0, &e))) return s;
  return kiln_graph_binary(g, KILN_ADD, x, e, y);
}

/* One composition chain in a fresh graph after k leading scalars. */
static void at_offset(int k) {
  kiln_graph *g;
  OK(kiln_graph_create(&g));
  for (int i = 0; i < k; i++) {
    kiln_tensor pad;
    OK(kiln_graph_scalar(g, KILN_F32, i, &pad));
  }
  int64_t shape[2] = { 2, 4 };
  kiln_tensor x, y;
  OK(kiln_graph_input(g, "x", KILN_F32, 2, shape, &x));
  OK(build_all(g, x, -1, -1, &y));
  OK(graph_check(&g->g));
  kiln_graph_free(g);
}

int main(void) {
  for (int k = 0; k < 140; k++) at_offset(k);
  kiln_graph *g;
  OK(kiln_graph_create(&g));
  int64_t shape[2] = { 3, 5 }, cshape[1] = { 5 };
  float sc[5] = { 1, 2, 0.5f, -1, 1.5f }, bs[5] = { 0.1f, 0, -0.2f, 0.3f, 0 };
  kiln_tensor x, tsc, tbs, y;
  OK(kiln_graph_input(g, "x", KILN_F32, 2, shape, &x));
  OK(kiln_graph_param(g, "scale", KILN_F32, 1, cshape, sc, &tsc));
  OK(kiln_graph_param(g, "bias", KILN_F32, 1, cshape, bs, &tbs));
  y = x;
  for (int i = 0; i < 60; i++) OK(build_all(g, y, tsc, tbs, &y));
  OK(graph_check(&g->g));
  OK(kiln_graph_output(g, y, "y"));

  /* Every element stays finite: the chain is well conditioned, so NaN means a bad node. */
  kiln_options o = kiln_options_default();
  o.backend = "ref";
  kiln_program *p;
  float in[15], out[15];
  for (int i = 0; i < 15; i++) in[i] = (float)(i % 7) * 0.25f - 0.5f;
  OK(kiln_program_compile(g, &o, &p));
  OK(kiln_program_run(p, (const void *[]){ in }, (void *[]){ out }));
  for (int i = 0; i < 15; i++) CHECK(isfinite(out[i]));
  kiln_program_free(p);
  kiln_graph_free(g);
  TEST_MAIN_END();
}
