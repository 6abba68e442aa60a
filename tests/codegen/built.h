/*
 * built.h — a workload of bench/workloads.h lowered, planned and built by codegen in one
 * dialect, for the tests that inspect a CgProgram (test_launches, test_groups); the workloads
 * alone, built once a process, for test_toy_dialect.
 */
#ifndef KILN_TEST_BUILT_H
#define KILN_TEST_BUILT_H

#include "codegen/codegen.h"
#include "graph/graph.h"
#include "test.h"

#include "../../bench/workloads.c"

typedef struct Built { const Workload *w; TE *te; Plan *p; CgProgram *g; } Built;

/* Each workload is built once a process and kept until it exits: its graph bakes parameters
 * from random draws, which were most of these tests' time when every build drew them again.
 * A Built's plan and program may point into its workload, so none is freed before exit. */
enum { BUILT_WORKLOADS = 64 };
static struct { char name[64]; Workload w; } built_workloads[BUILT_WORKLOADS];
static int built_n;

static void built_workloads_free(void) {
  for (int i = 0; i < built_n; i++) wl_free(&built_workloads[i].w);
  built_n = 0;
}

static const Workload *built_workload(const char *name) {
  for (int i = 0; i < built_n; i++)
    if (!strcmp(built_workloads[i].name, name)) return &built_workloads[i].w;
  KILN_ASSERT(built_n < BUILT_WORKLOADS && strlen(name) < sizeof built_workloads[0].name);
  if (built_n == 0) atexit(built_workloads_free);
  Workload *w = &built_workloads[built_n].w;
  OK(wl_build(name, w));
  snprintf(built_workloads[built_n].name, sizeof built_workloads[0].name, "%s", name);
  built_n++;
  return w;
}

/* The plan of kiln options ko (its backend set from d), the program of o. */
static inline bool build_planned(const char *name, const Dialect *d, const CgOptions *o, kiln_options ko, Built *b) {
  memset(b, 0, sizeof *b);
  ko.backend = d->grid ? "cuda" : "cpu";  /* the plan that backend makes (its GEMM operand reuse) */
  PlanOptions po = plan_options(&ko);
  b->w = built_workload(name);
  if (b->w->g) OK(te_lower_split(&b->w->g->g, ko.row_sums != 0, &b->te));
  if (b->te) OK(plan_build(b->te, &po, &b->p));
  if (b->p) OK(cg_program_build(b->p, d, o, &b->g));
  CHECK_MSG(b->g && b->g->n_launch == b->p->n_kernels, "%s: no program", name);
  return b->g != NULL;
}

static inline bool build(const char *name, const Dialect *d, const CgOptions *o, Built *b) {
  return build_planned(name, d, o, kiln_options_default(), b);
}

static inline void built_free(Built *b) {
  cg_program_free(b->g);
  plan_free(b->p);
  te_free(b->te);
}

#endif
