/*
 * print.c — the plan printer (KILN_DEBUG=1, `kiln plan`, tests) and the Graphviz
 * writer. Takes a Plan, writes text: per kernel its kind, iteration space, the
 * stages it computes by step, the buffers it reads and writes with bytes, and why it
 * is a kernel of its own; then every materialised stage with its reason; then totals.
 * Model names appear here (they help a reader) but never in generated source.
 */
#include "plan.h"

static const char *const kind_names[] = { "pointwise", "reduce", "row", "host", "collective" };
static const char *const item_names[] = { "acc", "inner", "outer" };

static const char *op_of(const Stage *s) {
  if (s->kind == ST_INPUT) return "input";
  if (s->kind == ST_PARAM) return "param";
  if (s->kind == ST_CONST) return "const";
  return s->op >= 0 && s->op < OP_COUNT ? op_names[s->op] : "?";
}

static void print_shape(FILE *f, int rank, const int64_t *shape) {
  fputc('[', f);
  for (int i = 0; i < rank; i++) fprintf(f, "%s%lld", i ? "," : "", (long long)shape[i]);
  fputc(']', f);
}

static void print_stage(FILE *f, const TE *te, int s) {
  const Stage *S = &te->stages[s];
  fprintf(f, "t%d %s %s", s, op_of(S), kiln_dtype_name(S->dtype));
  print_shape(f, S->rank, S->shape);
  if (S->name && S->kind <= ST_CONST) fprintf(f, " '%s'", S->name);
}

static void print_kernel(const Plan *p, const Kernel *k, FILE *f) {
  const TE *te = p->te;
  fprintf(f, "kernel %d: %s ", k->id, kind_names[k->kind]);
  print_shape(f, k->rank, k->shape);
  if (k->n_red) { fputs(" x ", f); print_shape(f, k->n_red, k->red_shape); }
  fprintf(f, ", anchor t%d %s, read %lld B, write %lld B\n", k->anchor, op_of(&te->stages[k->anchor]),
          (long long)k->bytes_read, (long long)k->bytes_written);
  fprintf(f, "  launch: %lld outer x %lld inner points\n", (long long)k->outer_numel, (long long)k->inner_numel);
  for (int i = 0; i < k->n_items; i++) {
    const Item *it = &k->items[i];
    fprintf(f, "  step %d %-5s ", it->step, item_names[it->kind]);
    print_stage(f, te, it->stage);
    fprintf(f, "%s\n", it->store ? " -> memory" : " (local)");
  }
  for (int i = 0; i < k->n_ins; i++) {
    fputs("  in  ", f);
    print_stage(f, te, k->ins[i]);
    fputc('\n', f);
  }
  if (k->why) fprintf(f, "  boundary: %s\n", k->why);
}

void plan_print(const Plan *p, FILE *f) {
  const TE *te = p->te;
  fprintf(f, "plan: %d kernels (%s%s)\n", p->n_kernels, p->opt.fuse ? "fused" : "eager", p->opt.cse ? ", cse" : "");
  for (int k = 0; k < p->n_kernels; k++) print_kernel(p, &p->kernels[k], f);
  fputs("materialised:\n", f);
  for (int s = 0; s < te->n_stages; s++)
    if (p->kernel_of[s] >= 0 && p->why[s]) {
      bool named = p->why[s][0] == 't' && p->why[s][1] >= '0' && p->why[s][1] <= '9';  /* "t5: read by ..." */
      if (!named) fprintf(f, "  t%d: ", s);
      else fputs("  ", f);
      fprintf(f, "%s%s\n", p->why[s], p->stored[s] ? "" : " (kept in registers)");
    }
  int64_t in_floor = 0, out_floor = 0;
  for (int i = 0; i < te->n_inputs; i++) in_floor += te->stages[te->inputs[i]].numel * (int64_t)kiln_dtype_size(te->stages[te->inputs[i]].dtype);
  for (int i = 0; i < te->n_outputs; i++) out_floor += te->stages[te->outputs[i]].numel * (int64_t)kiln_dtype_size(te->stages[te->outputs[i]].dtype);
  fprintf(f, "totals: %d kernels, read %lld B, write %lld B, peak intermediates %lld B (graph inputs %lld B, outputs %lld B)\n",
          p->n_kernels, (long long)p->bytes_read, (long long)p->bytes_written, (long long)p->arena_bytes,
          (long long)in_floor, (long long)out_floor);
}

void plan_dot(const Plan *p, FILE *f) {
  const TE *te = p->te;
  fputs("digraph plan {\n  rankdir=TB;\n  node [shape=box,fontsize=10];\n", f);
  for (int k = 0; k < p->n_kernels; k++) {
    const Kernel *K = &p->kernels[k];
    fprintf(f, "  subgraph cluster_%d {\n    label=\"kernel %d (%s)\";\n", k, k, kind_names[K->kind]);
    for (int i = 0; i < K->n_items; i++) {
      int s = K->items[i].stage;
      fprintf(f, "    t%d [label=\"t%d %s\"%s];\n", s, s, op_of(&te->stages[s]), K->items[i].store ? ",style=bold" : "");
    }
    fputs("  }\n", f);
  }
  for (int k = 0; k < p->n_kernels; k++) {
    const Kernel *K = &p->kernels[k];
    for (int i = 0; i < K->n_ins; i++) {
      int d = K->ins[i];
      if (p->kernel_of[d] < 0) fprintf(f, "  t%d [label=\"t%d %s\",shape=ellipse];\n", d, d, op_of(&te->stages[d]));
      fprintf(f, "  t%d -> t%d;\n", d, K->anchor);
    }
  }
  fputs("}\n", f);
}
