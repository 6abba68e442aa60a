/*
 * kiln plan MODEL.onnx|WORKLOAD [--eager] [--cse] [--dot FILE] [--source c|cuda|glsl] [--launches]
 *
 * Lowers a model (an ONNX file, or a workload of bench/workloads.h by name) and prints
 * its plan with plan_print: each kernel, its stages, anchor, buffers, bytes and the
 * reason for every boundary, then totals. Nothing is compiled. --dot writes Graphviz
 * with one cluster per kernel. --source prints the generated source of the whole plan in
 * that dialect, so kernels can be read on a machine without a GPU or compiler; --launches
 * prints each kernel's launch as codegen decided it (cg_program_print: grid, block, shared
 * memory, library GEMM, why), in the --source dialect (cuda when none is given). With either,
 * the plan is that dialect's backend's (cuda: attention chains, pairs), unless KILN_BACKEND
 * names another. The codegen
 * options are the program's (kiln_options_default: KILN_CUDA_ROW, KILN_CUDA_SPLITK,
 * KILN_CUBLASLT), turned into codegen's as the pipeline turns them (rt_codegen_options).
 *
 * Exit status: 0 the plan was printed, 1 the model or workload failed, 2 a usage error.
 *
 * The one tool that sees past kiln.h: it prints the plan and the source without compiling,
 * so it includes runtime/runtime.h, the pipeline's header (which brings plan, codegen, te).
 */
#include "tools.h"

#include "../bench/workloads.c"
#include "runtime/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(bool help) {
  FILE *f = help ? stdout : stderr;
  fprintf(f, "usage: kiln plan MODEL.onnx|WORKLOAD [--eager] [--cse] [--dot FILE] [--source c|cuda|glsl] [--launches]\n"
             "workloads:");
  for (int i = 0; i < wl_n_standard; i++) fprintf(f, " %s", wl_standard[i]);
  fprintf(f, "\n  (also chain10_N, softmax_RxC, logsoftmax_RxC, layernorm_RxC, linear_relu_MxKxN, siblings_MxKxN, mlp_fwd_bB)\n"
             "  exit status: 0 the plan was printed, 1 the model or workload failed, 2 a usage error\n");
  return help ? 0 : 2;
}

/* A library failure: "kiln plan: STATUS: [PATH: ]MESSAGE" (the path only where the message
 * lacks it), as every command prints it. */
static int fail(const char *path, kiln_status st) { return cli_lib_error("plan", st, path); }

int cmd_plan(int argc, char **argv) {
  const char *model = NULL, *dot = NULL, *source = NULL;
  bool launches = false, eager = false, cse = false;
  kiln_options o = kiln_options_default();
  Cli c = cli_start("plan", argc, argv);
  while (cli_next(&c))
    if (!cli_flag(&c, "--eager", &eager) && !cli_flag(&c, "--cse", &cse) && !cli_str(&c, "--dot", "FILE", &dot) &&
        !cli_choice(&c, "--source", (const char *const[]){ "c", "cuda", "glsl", NULL }, &source) &&
        !cli_flag(&c, "--launches", &launches))
      cli_model(&c, &model);
  if (!c.bad && !c.help && !model) cli_error(&c, "no model given (MODEL.onnx or a workload)");
  if (c.bad || c.help) return usage(c.help);
  if (eager) o.fuse = 0;
  if (cse) o.cse = 1;
  kiln_status st0;
  const Dialect *dialect = !source || !strcmp(source, "cuda") ? &cg_dialect_cuda
                           : !strcmp(source, "c")              ? &cg_dialect_c
                                                               : &cg_dialect_glsl;
  /* the source or launches of a dialect come from the plan of its backend (unless KILN_BACKEND
   * says otherwise): cuda plans attention chains and pairs the cpu's does not */
  if (!o.backend && (source || launches))
    o.backend = dialect == &cg_dialect_glsl ? "vulkan" : dialect->grid ? "cuda" : "cpu";
  CgOptions co;
  if ((st0 = rt_codegen_options(&o, dialect, &co))) return fail(NULL, st0);
  Workload w = { 0 };
  kiln_graph *g = NULL;
  kiln_status st;
  size_t len = strlen(model);
  if (len > 5 && !strcmp(model + len - 5, ".onnx")) st = kiln_graph_load_onnx(model, &g);
  else if ((st = wl_build(model, &w)) == KILN_OK) g = w.g;
  else {
    fprintf(stderr, "kiln plan: '%s' is neither an .onnx file nor a known workload\n", model);
    return usage(false);
  }
  if (st) return fail(model, st);
  TE *te = NULL;
  Plan *p = NULL;
  st = te_lower_split(&g->g, o.row_sums != 0, &te);  /* as kiln_program_compile lowers it */
  PlanOptions po = plan_options(&o);
  /* the planner asks the renderer of the plan's backend (the cpu's by default) */
  const char *be = o.backend ? o.backend : "cpu";
  const Dialect *planned = !strcmp(be, "cuda") ? &cg_dialect_cuda : !strcmp(be, "vulkan") ? &cg_dialect_glsl : &cg_dialect_c;
  CgOptions pco;
  if (!st && !(st = rt_codegen_options(&o, planned, &pco))) rt_plan_renderer(&o, planned, &pco, &po);
  if (!st) st = plan_build(te, &po, &p);
  if (!st) {
    printf("%s:\n", model);
    plan_print(p, stdout);
    if (dot) {
      FILE *f = fopen(dot, "w");
      if (!f) { fprintf(stderr, "kiln plan: cannot write '%s'\n", dot); st = KILN_ERR_IO; }
      else { plan_dot(p, f); fclose(f); }
    }
    if (!st && (source || launches)) {
      CgProgram *prog = NULL;
      st = cg_program_build(p, dialect, &co, &prog);
      if (st) fail(NULL, st);
      if (!st && source) fputs(prog->source.s, stdout);
      if (!st && launches) {
        printf("launches (%s):\n", dialect->name);
        cg_program_print(prog, stdout);
      }
      cg_program_free(prog);
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
