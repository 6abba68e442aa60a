/*
 * kiln plan MODEL.onnx|WORKLOAD [--eager] [--cse] [--dot FILE]
 *
 * Lowers a model (an ONNX file, or a workload of bench/workloads.h by name) and prints
 * its plan with plan_print: each kernel, its stages, anchor, buffers, bytes and the
 * reason for every boundary, then totals. Nothing is compiled. --dot writes Graphviz
 * with one cluster per kernel.
 */
#include "tools.h"

#include "../bench/workloads.c"
#include "plan/plan.h"

#include <stdio.h>
#include <string.h>

static int usage(void) {
  fprintf(stderr, "usage: kiln plan MODEL.onnx|WORKLOAD [--eager] [--cse] [--dot FILE]\nworkloads:");
  for (int i = 0; i < wl_n_standard; i++) fprintf(stderr, " %s", wl_standard[i]);
  fprintf(stderr, "\n  (also chain10_N, softmax_RxC, logsoftmax_RxC, layernorm_RxC, linear_relu_MxKxN, mlp_fwd_bB)\n");
  return 2;
}

static int fail(const char *what, kiln_status st) {
  fprintf(stderr, "kiln plan: %s: %s: %s\n", what, kiln_status_name(st), kiln_last_error());
  return 1;
}

int cmd_plan(int argc, char **argv) {
  const char *model = NULL, *dot = NULL;
  kiln_options o = kiln_options_default();
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--eager")) o.fuse = 0;
    else if (!strcmp(argv[i], "--cse")) o.cse = 1;
    else if (!strcmp(argv[i], "--dot") && i + 1 < argc) dot = argv[++i];
    else if (argv[i][0] == '-' || model) return usage();
    else model = argv[i];
  }
  if (!model) return usage();
  Workload w = { 0 };
  kiln_graph *g = NULL;
  kiln_status st;
  size_t len = strlen(model);
  if (len > 5 && !strcmp(model + len - 5, ".onnx")) st = kiln_graph_load_onnx(model, &g);
  else if ((st = wl_build(model, &w)) == KILN_OK) g = w.g;
  else { fprintf(stderr, "kiln plan: '%s' is neither an .onnx file nor a known workload\n", model); return usage(); }
  if (st) return fail(model, st);
  TE *te = NULL;
  Plan *p = NULL;
  st = te_lower(&g->g, &te);
  PlanOptions po = plan_options(&o);
  if (!st) st = plan_build(te, &po, &p);
  if (!st) {
    printf("%s:\n", model);
    plan_print(p, stdout);
    if (dot) {
      FILE *f = fopen(dot, "w");
      if (!f) { fprintf(stderr, "kiln plan: cannot write '%s'\n", dot); st = KILN_ERR_IO; }
      else { plan_dot(p, f); fclose(f); }
    }
  } else {
    fail(model, st);
  }
  plan_free(p);
  te_free(te);
  if (w.g) wl_free(&w);
  else kiln_graph_free(g);
  return st ? 1 : 0;
}
