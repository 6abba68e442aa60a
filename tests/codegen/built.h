/*
 * built.h — a workload of bench/workloads.h lowered, planned and built by codegen in one
 * dialect, for the tests that inspect a CgProgram (test_launches, test_groups).
 */
#ifndef KILN_TEST_BUILT_H
#define KILN_TEST_BUILT_H

#include "codegen/codegen.h"
#include "graph/graph.h"
#include "test.h"

#include "../../bench/workloads.c"

typedef struct Built { Workload w; TE *te; Plan *p; CgProgram *g; } Built;

static bool build(const char *name, const Dialect *d, const CgOptions *o, Built *b) {
  memset(b, 0, sizeof *b);
  kiln_options ko = kiln_options_default();
  ko.backend = d->grid ? "cuda" : "cpu";  /* the plan that backend makes (its GEMM operand reuse) */
  PlanOptions po = plan_options(&ko);
  OK(wl_build(name, &b->w));
  if (b->w.g) OK(te_lower(&b->w.g->g, &b->te));
  if (b->te) OK(plan_build(b->te, &po, &b->p));
  if (b->p) OK(cg_program_build(b->p, d, o, &b->g));
  CHECK_MSG(b->g && b->g->n_launch == b->p->n_kernels, "%s: no program", name);
  return b->g != NULL;
}

static void built_free(Built *b) {
  cg_program_free(b->g);
  plan_free(b->p);
  te_free(b->te);
  wl_free(&b->w);
}

#endif
