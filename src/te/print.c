/*
 * print.c — the TE printer and checker. te_print writes one line per stage (id, kind,
 * shape, dtype, op, name) and its body in infix form (output vars i0.., reduce vars
 * r0..); te_check verifies the invariants later stages rely on: topological order,
 * consistent dtypes, load arity, f16/bf16 only in loads and casts, and every load in
 * range wherever te_range can bound its indices.
 */
#include "te.h"

#include <string.h>

static const char *const stage_kinds[] = { "input", "param", "const", "injective", "reduce", "opaque" };
static const char *const reduce_names[] = { "sum", "prod", "max", "min", "argmax", "argmin" };

/* ---- printing ---- */

typedef struct Printer { FILE *f; int rank; long budget; } Printer;

static const char *infix(int op) {
  switch (op) {
  case TB_ADD: return "+";
  case TB_SUB: return "-";
  case TB_MUL: return "*";
  case TB_DIV: return "/";
  case TB_FLOORDIV: return "//";
  case TB_MOD: return "%";
  case TB_EQ: return "==";
  case TB_NE: return "!=";
  case TB_LT: return "<";
  case TB_LE: return "<=";
  case TB_GT: return ">";
  case TB_GE: return ">=";
  case TB_AND: return "&";
  case TB_OR: return "|";
  case TB_XOR: return "^";
  case TB_SHL: return "<<";
  case TB_SHR: return ">>";
  default: return NULL;
  }
}

static void print_rec(Printer *p, const Expr *e) {
  FILE *f = p->f;
  if (--p->budget < 0) { if (p->budget == -1) fputs("...", f); return; }
  switch (e->kind) {
  case EX_CONST:
    if (dtype_is_float(e->dtype)) fprintf(f, "%.9g", e->c.f);
    else if (e->dtype == KILN_BOOL) fputs(e->c.i ? "true" : "false", f);
    else if (e->dtype == KILN_U64) fprintf(f, "%llu", (unsigned long long)e->c.i);
    else fprintf(f, "%lld", (long long)e->c.i);
    if (e->dtype != KILN_I64 && e->dtype != KILN_F32 && e->dtype != KILN_BOOL) fprintf(f, ":%s", kiln_dtype_name(e->dtype));
    return;
  case EX_VAR:
    if (p->rank >= 0 && e->var >= p->rank) fprintf(f, "r%d", e->var - p->rank);
    else fprintf(f, "i%d", e->var);
    return;
  case EX_LOAD:
    fprintf(f, "s%d[", e->src);
    for (int i = 0; i < e->n_args; i++) {
      if (i) fputs(", ", f);
      print_rec(p, e->args[i]);
    }
    fputc(']', f);
    return;
  case EX_UNARY:
    fprintf(f, "%s(", te_unary_names[e->op]);
    print_rec(p, e->args[0]);
    fputc(')', f);
    return;
  case EX_BINARY: {
    const char *s = infix(e->op);
    fputs(s ? "(" : te_binary_names[e->op], f);
    if (!s) fputc('(', f);
    print_rec(p, e->args[0]);
    fprintf(f, s ? " %s " : ", ", s);
    print_rec(p, e->args[1]);
    fputc(')', f);
    return;
  }
  case EX_SELECT:
    fputc('(', f);
    print_rec(p, e->args[0]);
    fputs(" ? ", f);
    print_rec(p, e->args[1]);
    fputs(" : ", f);
    print_rec(p, e->args[2]);
    fputc(')', f);
    return;
  case EX_CAST:
    fprintf(f, "%s(", kiln_dtype_name(e->dtype));
    print_rec(p, e->args[0]);
    fputc(')', f);
    return;
  }
}

void te_print_expr(const Expr *e, FILE *f) {
  Printer p = { f, -1, 4000 };
  if (e) print_rec(&p, e);
  else fputs("(null)", f);
}

static void print_shape(FILE *f, int rank, const int64_t *shape) {
  fputc('[', f);
  for (int i = 0; i < rank; i++) fprintf(f, i ? ",%lld" : "%lld", (long long)shape[i]);
  fputc(']', f);
}

void te_print(const TE *te, FILE *f) {
  for (int i = 0; i < te->n_stages; i++) {
    const Stage *s = &te->stages[i];
    fprintf(f, "s%d %s ", s->id, stage_kinds[s->kind]);
    print_shape(f, s->rank, s->shape);
    fprintf(f, " %s", kiln_dtype_name(s->dtype));
    if (s->kind >= ST_INJECTIVE) fprintf(f, " %s", op_names[s->op]);
    fprintf(f, " '%s'", s->name ? s->name : "");
    if (s->kind == ST_REDUCE) {
      fprintf(f, " %s over ", reduce_names[s->rop]);
      print_shape(f, s->n_red, s->red_shape);
      if (s->select_last) fputs(" last", f);
    }
    if (s->body) {
      Printer p = { f, s->rank, 4000 };
      fputs(" = ", f);
      print_rec(&p, s->body);
    }
    fputc('\n', f);
  }
  for (int i = 0; i < te->n_outputs; i++) fprintf(f, "output '%s' = s%d\n", te->output_names[i], te->outputs[i]);
  for (int i = 0; i < te->n_assigns; i++) fprintf(f, "assign s%d <- s%d\n", te->assigns[i].param, te->assigns[i].value);
}

/* ---- checking ---- */

typedef struct Checker {
  const TE *te;
  const Stage *s;
  int64_t lo[2 * KILN_MAX_RANK], hi[2 * KILN_MAX_RANK];
  bool ranges;        /* the domain is non-empty, so var ranges are meaningful */
  long budget;        /* bodies are trees after lowering; a budget bounds a shared DAG */
} Checker;

static kiln_status bad(const Checker *c, const char *what, const Expr *e) {
  char buf[256] = "";
  FILE *m = fmemopen(buf, sizeof buf - 1, "w");
  if (m) { te_print_expr(e, m); fclose(m); }
  return kiln_fail(KILN_ERR_INVALID_ARG, "te_check: stage s%d '%s': %s in %s", c->s->id, c->s->name ? c->s->name : "",
                   what, buf);
}

static kiln_status check_expr(Checker *c, const Expr *e) {
  if (--c->budget < 0) return KILN_OK;
  for (int i = 0; i < e->n_args; i++) {
    kiln_status st = check_expr(c, e->args[i]);
    if (st != KILN_OK) return st;
  }
  bool half = e->dtype == KILN_F16 || e->dtype == KILN_BF16;
  switch (e->kind) {
  case EX_CONST: return KILN_OK;
  case EX_VAR: return e->var < c->s->rank + c->s->n_red ? KILN_OK : bad(c, "var out of the domain", e);
  case EX_LOAD: {
    if (e->src < 0 || e->src >= c->s->id) return bad(c, "load of a later stage", e);
    const Stage *src = &c->te->stages[e->src];
    if (e->n_args != src->rank || e->dtype != src->dtype) return bad(c, "load arity or dtype differs from its stage", e);
    for (int i = 0; i < e->n_args; i++) {
      int64_t mn, mx;
      if (e->args[i]->dtype != KILN_I64) return bad(c, "index is not i64", e);
      if (c->ranges && te_range(e->args[i], c->lo, c->hi, c->s->rank + c->s->n_red, &mn, &mx) &&
          (mn < 0 || mx >= src->shape[i]))
        return bad(c, "load may read out of range", e);
    }
    return KILN_OK;
  }
  case EX_UNARY:
    if (half || e->args[0]->dtype == KILN_F16 || e->args[0]->dtype == KILN_BF16)
      return bad(c, "f16/bf16 arithmetic (must go through f32)", e);
    return KILN_OK;
  case EX_BINARY:
    if (e->args[0]->dtype != e->args[1]->dtype) return bad(c, "operands differ in dtype", e);
    if (e->args[0]->dtype == KILN_F16 || e->args[0]->dtype == KILN_BF16)
      return bad(c, "f16/bf16 arithmetic (must go through f32)", e);
    return KILN_OK;
  case EX_SELECT:
    if (e->args[0]->dtype != KILN_BOOL || e->args[1]->dtype != e->args[2]->dtype || e->dtype != e->args[1]->dtype)
      return bad(c, "select dtypes", e);
    return KILN_OK;
  case EX_CAST: return KILN_OK;
  }
  return bad(c, "unknown expression kind", e);
}

static kiln_status check_stage(const TE *te, const Stage *s, int i) {
  int64_t n;
  if (s->id != i || s->rank < 0 || s->rank > KILN_MAX_RANK || !dtype_valid(s->dtype))
    return kiln_fail(KILN_ERR_INVALID_ARG, "te_check: stage %d is malformed", i);
  if (!shape_numel(s->rank, s->shape, &n) || n != s->numel)
    return kiln_fail(KILN_ERR_INVALID_ARG, "te_check: stage s%d numel %lld does not match its shape", i,
                     (long long)s->numel);
  if (s->kind <= ST_CONST) {
    if (s->body || (s->kind != ST_INPUT && !s->data))
      return kiln_fail(KILN_ERR_INVALID_ARG, "te_check: source stage s%d has a body or lacks data", i);
    return KILN_OK;
  }
  if (s->kind == ST_OPAQUE) return KILN_OK;
  if (!s->body) return kiln_fail(KILN_ERR_INVALID_ARG, "te_check: stage s%d has no body", i);
  Checker c = { .te = te, .s = s, .ranges = s->numel > 0, .budget = 200000 };
  for (int v = 0; v < s->rank; v++) { c.lo[v] = 0; c.hi[v] = s->shape[v] - 1; }
  if (s->kind == ST_REDUCE) {
    if (s->n_red < 0 || s->n_red > KILN_MAX_RANK || s->rank + s->n_red > 2 * KILN_MAX_RANK)
      return kiln_fail(KILN_ERR_INVALID_ARG, "te_check: stage s%d has %d reduce dims", i, s->n_red);
    for (int r = 0; r < s->n_red; r++) {
      c.lo[s->rank + r] = 0;
      c.hi[s->rank + r] = s->red_shape[r] - 1;
      if (s->red_shape[r] <= 0) c.ranges = false;
    }
    bool arg = s->rop == RO_ARGMAX || s->rop == RO_ARGMIN;
    if (arg ? s->dtype != KILN_I64 : s->body->dtype != s->dtype)
      return kiln_fail(KILN_ERR_INVALID_ARG, "te_check: reduce stage s%d dtype %s, body %s", i,
                       kiln_dtype_name(s->dtype), kiln_dtype_name(s->body->dtype));
  } else if (s->n_red != 0 || s->body->dtype != s->dtype) {
    return kiln_fail(KILN_ERR_INVALID_ARG, "te_check: injective stage s%d dtype %s, body %s", i,
                     kiln_dtype_name(s->dtype), kiln_dtype_name(s->body->dtype));
  }
  return check_expr(&c, s->body);
}

kiln_status te_check(const TE *te) {
  for (int i = 0; i < te->n_stages; i++) {
    kiln_status st = check_stage(te, &te->stages[i], i);
    if (st != KILN_OK) return st;
  }
  for (int i = 0; i < te->n_inputs; i++)
    if (te->inputs[i] < 0 || te->inputs[i] >= te->n_stages || te->stages[te->inputs[i]].kind != ST_INPUT)
      return kiln_fail(KILN_ERR_INVALID_ARG, "te_check: input %d is not an input stage", i);
  for (int i = 0; i < te->n_outputs; i++)
    if (te->outputs[i] < 0 || te->outputs[i] >= te->n_stages)
      return kiln_fail(KILN_ERR_INVALID_ARG, "te_check: output %d is not a stage", i);
  for (int i = 0; i < te->n_assigns; i++) {
    const Assign *a = &te->assigns[i];
    if (a->param < 0 || a->param >= te->n_stages || te->stages[a->param].kind != ST_PARAM || a->value < 0 ||
        a->value >= te->n_stages || te->stages[a->value].dtype != te->stages[a->param].dtype ||
        te->stages[a->value].numel != te->stages[a->param].numel)
      return kiln_fail(KILN_ERR_INVALID_ARG, "te_check: assign %d does not match a param", i);
  }
  return KILN_OK;
}
