/*
 * expr.c — building tensor expressions. Takes constructor calls, produces Exprs that
 * are hash-consed in the TE's arena (equal subtrees are one node), constant-folded
 * with the scalar semantics defined here (te_eval_*: the one definition every backend
 * and the ref interpreter follow; the cases where C leaves a result undefined or
 * where ONNX asks for more than C's operator are the shared helpers of
 * base/scalar.inc, which the generated code's preludes are made of too), and
 * simplified as they are built:
 *   - exact identities only (x*1, x+(-0.0) for floats; x+0, x*0, x/1 for ints; select
 *     of a constant condition; cast to the same dtype);
 *   - i64 index arithmetic is kept in an affine normal form, sum of c*t + k over atoms
 *     t ordered by creation id, so compositions of reshape/transpose/slice maps cancel;
 *   - floordiv/mod by a positive constant pull out the terms the divisor divides.
 * te_simplify rebuilds an expression with the same constructors plus var ranges,
 * which decide floordiv/mod of small remainders, min/max, comparisons and selects.
 * Every constructor returns NULL when out of memory and passes NULL arguments through,
 * so a caller checks once at the end.
 */
#include "te.h"
#include "../base/scalar.h"

#include <math.h>
#include <string.h>

const char *const te_unary_names[TU_COUNT] = {
  "neg", "abs", "exp", "log", "sqrt", "rsqrt", "recip", "tanh", "sigmoid", "erf",
  "sin", "cos", "floor", "ceil", "round", "sign", "not", "isnan", "isinf",
};
const char *const te_binary_names[TB_COUNT] = {
  "add", "sub", "mul", "div", "pow", "max", "min", "mod", "fmod", "floordiv",
  "eq", "ne", "lt", "le", "gt", "ge", "and", "or", "xor", "shl", "shr",
};
_Static_assert(TU_COUNT == 19, "update te_unary_names");
_Static_assert(TB_COUNT == 21, "update te_binary_names");

/* ---- scalar semantics ---- */

static bool is_unsigned(kiln_dtype t) { return t >= KILN_U8 && t <= KILN_U64; }

TeValue te_wrap(kiln_dtype t, TeValue v) {
  switch (t) {
  case KILN_F64: break;
  case KILN_F32: v.f = (double)(float)v.f; break;
  case KILN_F16: v.f = k_rh((float)v.f); break;
  case KILN_BF16: v.f = k_rb((float)v.f); break;
  case KILN_I32: v.i = (int32_t)(uint32_t)v.i; break;
  case KILN_I16: v.i = (int16_t)(uint16_t)v.i; break;
  case KILN_I8: v.i = (int8_t)(uint8_t)v.i; break;
  case KILN_U8: v.i = (uint8_t)v.i; break;
  case KILN_U16: v.i = (uint16_t)v.i; break;
  case KILN_U32: v.i = (uint32_t)v.i; break;
  case KILN_BOOL: v.i = v.i != 0; break;
  default: break;  /* i64, u64 */
  }
  return v;
}

TeValue te_eval_cast(kiln_dtype to, kiln_dtype from, TeValue v) {
  TeValue r;
  if (dtype_is_float(from)) {
    if (dtype_is_float(to)) return te_wrap(to, v);
    r.i = scalar_f2int(to, v.f);  /* truncate, NaN -> 0, saturate; bool: v != 0 */
    return r;
  }
  if (dtype_is_float(to)) {
    r.f = from == KILN_U64 ? (double)(uint64_t)v.i : (double)v.i;
    return te_wrap(to, r);
  }
  return te_wrap(to, v);
}

static TeValue eval_unary_float(TeUnary op, kiln_dtype t, double x) {
  TeValue r;
  switch (op) {
  case TU_NEG: r.f = -x; break;
  case TU_ABS: r.f = fabs(x); break;
  case TU_EXP: r.f = exp(x); break;
  case TU_LOG: r.f = log(x); break;
  case TU_SQRT: r.f = sqrt(x); break;
  case TU_RSQRT: r.f = 1.0 / sqrt(x); break;
  case TU_RECIP: r.f = 1.0 / x; break;
  case TU_TANH: r.f = tanh(x); break;
  case TU_SIGMOID: r.f = k_sigd(x); break;
  case TU_ERF: r.f = erf(x); break;
  case TU_SIN: r.f = sin(x); break;
  case TU_COS: r.f = cos(x); break;
  case TU_FLOOR: r.f = floor(x); break;
  case TU_CEIL: r.f = ceil(x); break;
  case TU_ROUND: r.f = nearbyint(x); break;  /* default rounding mode: half to even */
  case TU_SIGN: r.f = k_signd(x); break;  /* keeps 0, -0 and NaN */
  case TU_NOT: r.i = x == 0; return r;
  case TU_ISNAN: r.i = x != x; return r;
  case TU_ISINF: r.i = isinf(x) != 0; return r;
  default: r.f = 0; break;
  }
  return te_wrap(t, r);
}

TeValue te_eval_unary(TeUnary op, kiln_dtype t, TeValue a) {
  if (dtype_is_float(t)) return eval_unary_float(op, t, a.f);
  TeValue r = a;
  uint64_t u = (uint64_t)a.i;
  switch (op) {
  case TU_NEG: r.i = (int64_t)(0 - u); break;
  case TU_ABS: r.i = !is_unsigned(t) && a.i < 0 ? (int64_t)(0 - u) : a.i; break;
  case TU_SIGN: r.i = is_unsigned(t) ? a.i != 0 : (a.i > 0) - (a.i < 0); break;
  case TU_NOT: r.i = t == KILN_BOOL ? !a.i : (int64_t)~u; break;
  case TU_FLOOR: case TU_CEIL: case TU_ROUND: break;
  case TU_ISNAN: case TU_ISINF: r.i = 0; return r;
  default: {  /* transcendental on ints: through double, back with Cast rules */
    TeValue f = eval_unary_float(op, KILN_F64, te_eval_cast(KILN_F64, t, a).f);
    return te_eval_cast(t, KILN_F64, f);
  }
  }
  return te_wrap(t, r);
}

static bool is_compare(TeBinary op) { return op >= TB_EQ && op <= TB_GE; }

static int64_t compare(TeBinary op, int c) {  /* c: -1, 0, 1 */
  switch (op) {
  case TB_EQ: return c == 0;
  case TB_NE: return c != 0;
  case TB_LT: return c < 0;
  case TB_LE: return c <= 0;
  case TB_GT: return c > 0;
  default: return c >= 0;
  }
}

static TeValue eval_binary_float(TeBinary op, kiln_dtype t, double a, double b) {
  TeValue r;
  if (is_compare(op)) {
    if (a != a || b != b) r.i = op == TB_NE;  /* NaN compares unequal and unordered */
    else r.i = compare(op, (a > b) - (a < b));
    return r;
  }
  switch (op) {
  case TB_ADD: r.f = a + b; break;
  case TB_SUB: r.f = a - b; break;
  case TB_MUL: r.f = a * b; break;
  case TB_DIV: r.f = a / b; break;
  case TB_POW: r.f = pow(a, b); break;
  case TB_MAX: r.f = k_maxd(a, b); break;
  case TB_MIN: r.f = k_mind(a, b); break;
  case TB_FMOD: r.f = fmod(a, b); break;
  case TB_MOD: r.f = k_modd(a, b); break;
  case TB_FLOORDIV: r.f = floor(a / b); break;
  case TB_AND: r.i = a != 0 && b != 0; return r;
  case TB_OR: r.i = a != 0 || b != 0; return r;
  case TB_XOR: r.i = (a != 0) != (b != 0); return r;
  default: r.f = 0; break;  /* shifts: ints only */
  }
  return te_wrap(t, r);
}

static TeValue eval_binary_unsigned(TeBinary op, kiln_dtype t, uint64_t a, uint64_t b) {
  TeValue r;
  if (is_compare(op)) { r.i = compare(op, (a > b) - (a < b)); return r; }
  uint64_t v;
  switch (op) {
  case TB_ADD: v = a + b; break;
  case TB_SUB: v = a - b; break;
  case TB_MUL: v = a * b; break;
  case TB_DIV: case TB_FLOORDIV: v = k_udiv(a, b); break;
  case TB_MOD: case TB_FMOD: v = k_umod(a, b); break;
  case TB_POW: v = k_upow(a, b); break;
  case TB_MAX: v = a > b ? a : b; break;
  case TB_MIN: v = a < b ? a : b; break;
  case TB_AND: v = a & b; break;
  case TB_OR: v = a | b; break;
  case TB_XOR: v = a ^ b; break;
  case TB_SHL: v = k_ushl(a, b); break;
  case TB_SHR: v = k_ushr(a, b); break;
  default: v = 0; break;
  }
  r.i = (int64_t)v;
  return te_wrap(t, r);
}

static TeValue eval_binary_signed(TeBinary op, kiln_dtype t, int64_t a, int64_t b) {
  TeValue r;
  if (is_compare(op)) { r.i = compare(op, (a > b) - (a < b)); return r; }
  uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
  int64_t v;
  switch (op) {
  case TB_ADD: v = (int64_t)(ua + ub); break;
  case TB_SUB: v = (int64_t)(ua - ub); break;
  case TB_MUL: v = (int64_t)(ua * ub); break;
  case TB_DIV: v = k_sdiv(a, b); break;
  case TB_FLOORDIV: v = k_sfdiv(a, b); break;
  case TB_FMOD: v = k_sfmod(a, b); break;
  case TB_MOD: v = k_smod(a, b); break;
  case TB_POW: v = k_spow(a, b); break;
  case TB_MAX: v = a > b ? a : b; break;
  case TB_MIN: v = a < b ? a : b; break;
  case TB_AND: v = a & b; break;
  case TB_OR: v = a | b; break;
  case TB_XOR: v = a ^ b; break;
  case TB_SHL: v = k_sshl(a, b); break;
  case TB_SHR: v = k_sshr(a, b); break;
  default: v = 0; break;
  }
  r.i = v;
  return te_wrap(t, r);
}

/* Strings (pointers carried as values): EQ and NE compare the bytes; NULL reads as "". */
static TeValue eval_binary_string(TeBinary op, TeValue a, TeValue b) {
  const char *x = (const char *)(intptr_t)a.i, *y = (const char *)(intptr_t)b.i;
  TeValue r = { .i = 0 };
  bool eq = !strcmp(x ? x : "", y ? y : "");
  if (op == TB_EQ) r.i = eq;
  else if (op == TB_NE) r.i = !eq;
  else KILN_ASSERT(!"arithmetic on strings (graph_add refuses it)");
  return r;
}

TeValue te_eval_binary(TeBinary op, kiln_dtype t, TeValue a, TeValue b) {
  if (t == KILN_STRING) return eval_binary_string(op, a, b);
  if (dtype_is_float(t)) return eval_binary_float(op, t, a.f, b.f);
  if (is_unsigned(t)) return eval_binary_unsigned(op, t, (uint64_t)a.i, (uint64_t)b.i);
  return eval_binary_signed(op, t, a.i, b.i);
}

/* ---- hash-consing ---- */

static uint64_t expr_hash(const Expr *p, Expr *const *args) {
  uint64_t h = hash_bytes(&p->kind, sizeof p->kind, 0);
  h = hash_bytes(&p->dtype, sizeof p->dtype, h);
  h = hash_bytes(&p->op, sizeof p->op, h);
  h = hash_bytes(&p->c, sizeof p->c, h);
  h = hash_bytes(&p->var, sizeof p->var, h);
  h = hash_bytes(&p->src, sizeof p->src, h);
  for (int i = 0; i < p->n_args; i++) h = hash_bytes(&args[i]->hash, sizeof args[i]->hash, h);
  return h;
}

static bool expr_same(const Expr *e, const Expr *p, Expr *const *args) {
  if (e->kind != p->kind || e->dtype != p->dtype || e->op != p->op || e->var != p->var ||
      e->src != p->src || e->n_args != p->n_args || memcmp(&e->c, &p->c, sizeof e->c))
    return false;
  for (int i = 0; i < p->n_args; i++)
    if (e->args[i] != args[i]) return false;
  return true;
}

/* Doubles the bucket table; on failure keeps the old one (chains just get longer). */
static void grow_buckets(TE *te) {
  size_t n = te->n_buckets ? te->n_buckets * 2 : 1024;
  Expr **b = kiln_calloc(n, sizeof *b);
  if (!b) return;
  for (size_t i = 0; i < te->n_buckets; i++)
    for (Expr *e = te->buckets[i], *next; e; e = next) {
      next = e->next_in_bucket;
      e->next_in_bucket = b[e->hash & (n - 1)];
      b[e->hash & (n - 1)] = e;
    }
  kiln_free(te->buckets);
  te->buckets = b;
  te->n_buckets = n;
}

static Expr *intern(TE *te, const Expr *p, Expr *const *args) {
  for (int i = 0; i < p->n_args; i++)
    if (!args[i]) return NULL;
  if (te->n_exprs >= te->n_buckets) grow_buckets(te);
  if (!te->n_buckets) return NULL;
  uint64_t h = expr_hash(p, args);
  Expr **slot = &te->buckets[h & (te->n_buckets - 1)];
  for (Expr *e = *slot; e; e = e->next_in_bucket)
    if (e->hash == h && expr_same(e, p, args)) return e;
  Expr *e = arena_alloc(&te->arena, sizeof(Expr) + (size_t)p->n_args * sizeof(Expr *));
  if (!e) return NULL;
  *e = *p;
  if (p->n_args) memcpy(e->args, args, (size_t)p->n_args * sizeof(Expr *));
  e->hash = h;
  e->id = (int)te->n_exprs++;
  e->next_in_bucket = *slot;
  *slot = e;
  return e;
}

static Expr *mk(TE *te, ExprKind kind, kiln_dtype t, int op, int n, Expr *const *args) {
  Expr p = { .kind = kind, .dtype = t, .op = op, .n_args = n, .var = -1, .src = -1 };
  return intern(te, &p, args);
}

static Expr *mk_const(TE *te, kiln_dtype t, TeValue v) {
  Expr p = { .kind = EX_CONST, .dtype = t, .var = -1, .src = -1 };
  p.c = te_wrap(t, v);
  return intern(te, &p, NULL);
}

Expr *te_const_f(TE *te, kiln_dtype t, double v) {
  return mk_const(te, t, te_eval_cast(t, KILN_F64, (TeValue){ .f = v }));
}

Expr *te_const_i(TE *te, kiln_dtype t, int64_t v) {
  return mk_const(te, t, te_eval_cast(t, KILN_I64, (TeValue){ .i = v }));
}

Expr *te_var(TE *te, int v) {
  Expr p = { .kind = EX_VAR, .dtype = KILN_I64, .var = v, .src = -1 };
  return intern(te, &p, NULL);
}

Expr *te_load(TE *te, int stage, int n, Expr *const *idx) {
  KILN_ASSERT(stage >= 0 && stage < te->n_stages && n == te->stages[stage].rank);
  Expr p = { .kind = EX_LOAD, .dtype = te->stages[stage].dtype, .src = stage, .var = -1, .n_args = n };
  return intern(te, &p, idx);
}

bool te_is_float(const Expr *e) { return dtype_is_float(e->dtype); }

bool te_uses_var(const Expr *e, int v) {
  if (e->kind == EX_VAR) return e->var == v;
  for (int i = 0; i < e->n_args; i++)
    if (te_uses_var(e->args[i], v)) return true;
  return false;
}

static bool is_const(const Expr *e) { return e && e->kind == EX_CONST; }
static bool is_int_const(const Expr *e, int64_t v) {
  return is_const(e) && !dtype_is_float(e->dtype) && e->c.i == v;
}

/* ---- ranges ---- */

/* Var ranges for simplification; NULL means none known. */
typedef struct Ranges { const int64_t *lo, *hi; int nvars; } Ranges;

static bool range_of(const Expr *e, const Ranges *r, int64_t *mn, int64_t *mx, int depth);

static bool dtype_range(kiln_dtype t, int64_t *mn, int64_t *mx) {
  double lo, hi;
  if (t == KILN_BOOL) { *mn = 0; *mx = 1; return true; }
  if (!dtype_is_int(t) || t == KILN_I64 || t == KILN_U64) return false;
  scalar_int_limits(t, &lo, &hi);
  *mn = (int64_t)lo;
  *mx = (int64_t)hi;
  return true;
}

static bool range_binary(const Expr *e, const Ranges *r, int64_t *mn, int64_t *mx, int depth) {
  int64_t a0, a1, b0, b1;
  if (!range_of(e->args[0], r, &a0, &a1, depth) || !range_of(e->args[1], r, &b0, &b1, depth)) return false;
  int64_t c[4];
  switch (e->op) {
  case TB_ADD:
    if (__builtin_add_overflow(a0, b0, mn) || __builtin_add_overflow(a1, b1, mx)) return false;
    return true;
  case TB_SUB:
    if (__builtin_sub_overflow(a0, b1, mn) || __builtin_sub_overflow(a1, b0, mx)) return false;
    return true;
  case TB_MUL:
    if (__builtin_mul_overflow(a0, b0, &c[0]) || __builtin_mul_overflow(a0, b1, &c[1]) ||
        __builtin_mul_overflow(a1, b0, &c[2]) || __builtin_mul_overflow(a1, b1, &c[3]))
      return false;
    *mn = *mx = c[0];
    for (int i = 1; i < 4; i++) {
      if (c[i] < *mn) *mn = c[i];
      if (c[i] > *mx) *mx = c[i];
    }
    return true;
  case TB_FLOORDIV:
    if (b0 != b1 || b0 <= 0) return false;
    *mn = te_eval_binary(TB_FLOORDIV, KILN_I64, (TeValue){ .i = a0 }, (TeValue){ .i = b0 }).i;
    *mx = te_eval_binary(TB_FLOORDIV, KILN_I64, (TeValue){ .i = a1 }, (TeValue){ .i = b0 }).i;
    return true;
  case TB_MOD: {
    if (b0 != b1 || b0 <= 0) return false;
    /* one quotient over a0..a1 (a single point among them): the remainders run a0 % b .. a1 % b */
    TeValue q0 = te_eval_binary(TB_FLOORDIV, KILN_I64, (TeValue){ .i = a0 }, (TeValue){ .i = b0 });
    TeValue q1 = te_eval_binary(TB_FLOORDIV, KILN_I64, (TeValue){ .i = a1 }, (TeValue){ .i = b0 });
    if (q0.i == q1.i) {
      *mn = te_eval_binary(TB_MOD, KILN_I64, (TeValue){ .i = a0 }, (TeValue){ .i = b0 }).i;
      *mx = te_eval_binary(TB_MOD, KILN_I64, (TeValue){ .i = a1 }, (TeValue){ .i = b0 }).i;
    } else *mn = 0, *mx = b0 - 1;
    return true;
  }
  case TB_MAX: *mn = a0 > b0 ? a0 : b0; *mx = a1 > b1 ? a1 : b1; return true;
  case TB_MIN: *mn = a0 < b0 ? a0 : b0; *mx = a1 < b1 ? a1 : b1; return true;
  default: return false;
  }
}

static bool range_of(const Expr *e, const Ranges *r, int64_t *mn, int64_t *mx, int depth) {
  if (depth > 48 || dtype_is_float(e->dtype) || e->dtype == KILN_U64) return false;
  if (e->dtype == KILN_BOOL && e->kind != EX_CONST) { *mn = 0; *mx = 1; return true; }
  switch (e->kind) {
  case EX_CONST: *mn = *mx = e->c.i; return true;
  case EX_VAR:
    if (!r || e->var >= r->nvars || r->lo[e->var] > r->hi[e->var]) return false;
    *mn = r->lo[e->var];
    *mx = r->hi[e->var];
    return true;
  case EX_BINARY:
    if (e->dtype == KILN_I64 && range_binary(e, r, mn, mx, depth + 1)) return true;
    return dtype_range(e->dtype, mn, mx);
  case EX_SELECT: {
    int64_t a0, a1, b0, b1;
    if (!range_of(e->args[1], r, &a0, &a1, depth + 1) || !range_of(e->args[2], r, &b0, &b1, depth + 1))
      return false;
    *mn = a0 < b0 ? a0 : b0;
    *mx = a1 > b1 ? a1 : b1;
    return true;
  }
  case EX_CAST:
    if (e->dtype == KILN_I64 && !dtype_is_float(e->args[0]->dtype) && e->args[0]->dtype != KILN_U64)
      return range_of(e->args[0], r, mn, mx, depth + 1);
    return dtype_range(e->dtype, mn, mx);
  default: return dtype_range(e->dtype, mn, mx);
  }
}

int64_t te_stage_stride(const Stage *s, int i) {
  int64_t st = 1;
  if (!s->permuted) {
    for (int j = i + 1; j < s->rank; j++) st *= s->shape[j];
    return st;
  }
  for (int m = s->rank - 1; m >= 0 && s->layout[m] != i; m--) st *= s->shape[s->layout[m]];
  return st;
}

bool te_range(const Expr *e, const int64_t *lo, const int64_t *hi, int nvars, int64_t *min, int64_t *max) {
  Ranges r = { lo, hi, nvars };
  return range_of(e, lo && hi ? &r : NULL, min, max, 0);
}

/* ---- affine normal form of i64 index arithmetic ---- */

#define LIN_MAX 24
typedef struct Lin { Expr *t[LIN_MAX]; int64_t c[LIN_MAX]; int n; int64_t k; bool ok; } Lin;

static void lin_term(Lin *l, Expr *t, int64_t c) {
  for (int i = 0; i < l->n; i++)
    if (l->t[i] == t) {
      if (__builtin_add_overflow(l->c[i], c, &l->c[i])) l->ok = false;
      return;
    }
  if (l->n == LIN_MAX) { l->ok = false; return; }
  l->t[l->n] = t;
  l->c[l->n++] = c;
}

/* Adds scale * e to l, decomposing sums and constant multiples. */
static void lin_add(Lin *l, Expr *e, int64_t scale) {
  if (!l->ok) return;
  int64_t c;
  if (e->kind == EX_CONST) {
    if (__builtin_mul_overflow(e->c.i, scale, &c) || __builtin_add_overflow(l->k, c, &l->k)) l->ok = false;
    return;
  }
  if (e->kind == EX_BINARY && e->dtype == KILN_I64) {
    if (e->op == TB_ADD || e->op == TB_SUB) {
      lin_add(l, e->args[0], scale);
      if (e->op == TB_SUB && scale == INT64_MIN) { l->ok = false; return; }
      lin_add(l, e->args[1], e->op == TB_SUB ? -scale : scale);
      return;
    }
    if (e->op == TB_MUL && (is_const(e->args[0]) || is_const(e->args[1]))) {
      Expr *k = is_const(e->args[1]) ? e->args[1] : e->args[0], *x = k == e->args[1] ? e->args[0] : e->args[1];
      if (__builtin_mul_overflow(k->c.i, scale, &c)) { l->ok = false; return; }
      lin_add(l, x, c);
      return;
    }
  }
  if (e->kind == EX_UNARY && e->op == TU_NEG && e->dtype == KILN_I64 && scale != INT64_MIN) {
    lin_add(l, e->args[0], -scale);
    return;
  }
  lin_term(l, e, scale);
}

static Expr *raw_binary(TE *te, TeBinary op, Expr *a, Expr *b) {
  Expr *args[2] = { a, b };
  return mk(te, EX_BINARY, a->dtype, op, 2, args);
}

/* Rebuilds l as ((t1*c1 + t2*c2) - t3*c3) + k, atoms in creation order. */
static Expr *lin_build(TE *te, Lin *l) {
  for (int i = 1; i < l->n; i++)  /* insertion sort by id: a handful of terms */
    for (int j = i; j > 0 && l->t[j]->id < l->t[j - 1]->id; j--) {
      Expr *t = l->t[j]; l->t[j] = l->t[j - 1]; l->t[j - 1] = t;
      int64_t c = l->c[j]; l->c[j] = l->c[j - 1]; l->c[j - 1] = c;
    }
  Expr *acc = NULL;
  for (int i = 0; i < l->n; i++) {
    int64_t c = l->c[i];
    if (c == 0) continue;
    bool sub = acc && c < 0 && c != INT64_MIN;
    int64_t m = sub ? -c : c;
    Expr *term = m == 1 ? l->t[i] : raw_binary(te, TB_MUL, l->t[i], te_const_i(te, KILN_I64, m));
    if (!term) return NULL;
    acc = !acc ? term : raw_binary(te, sub ? TB_SUB : TB_ADD, acc, term);
    if (!acc) return NULL;
  }
  if (!acc) return te_const_i(te, KILN_I64, l->k);
  if (l->k > 0) return raw_binary(te, TB_ADD, acc, te_const_i(te, KILN_I64, l->k));
  if (l->k < 0 && l->k != INT64_MIN) return raw_binary(te, TB_SUB, acc, te_const_i(te, KILN_I64, -l->k));
  if (l->k < 0) return raw_binary(te, TB_ADD, acc, te_const_i(te, KILN_I64, l->k));
  return acc;
}

/* Is t floordiv(x, c): that node, or floordiv(y, a*c) when x is floordiv(y, a) (divmod_const
 * writes floor(floor(y/a)/c) so)? */
static bool is_floordiv_of(const Expr *t, const Expr *x, int64_t c) {
  if (t->kind != EX_BINARY || t->op != TB_FLOORDIV || !is_const(t->args[1])) return false;
  if (t->args[0] == x) return t->args[1]->c.i == c;
  int64_t ac;
  return x->kind == EX_BINARY && x->op == TB_FLOORDIV && is_const(x->args[1]) && x->args[1]->c.i > 0 &&
         t->args[0] == x->args[0] && !__builtin_mul_overflow(x->args[1]->c.i, c, &ac) && t->args[1]->c.i == ac;
}

/* k*c*floordiv(x, c) + k*mod(x, c) = k*x for c > 0, exactly: a flatten read back through its
 * own digits ([32,32,7,7] as [32,1568]: 49*(j/49) + 7*((j/7)%7) + j%7) becomes j again, so a
 * reshape composed with its inverse leaves an affine index. Applied until no pair is left. */
static void lin_merge_divmod(Lin *l) {
  for (bool merged = true; merged && l->ok;) {
    merged = false;
    for (int i = 0; i < l->n && !merged; i++) {
      const Expr *m = l->t[i];
      if (l->c[i] == 0 || m->kind != EX_BINARY || m->op != TB_MOD || !is_const(m->args[1]) || m->args[1]->c.i <= 0)
        continue;
      int64_t c = m->args[1]->c.i, kc;
      if (__builtin_mul_overflow(l->c[i], c, &kc)) continue;
      for (int j = 0; j < l->n; j++) {
        if (j == i || l->c[j] != kc || !is_floordiv_of(l->t[j], m->args[0], c)) continue;
        int64_t k = l->c[i];
        l->c[i] = l->c[j] = 0;
        lin_add(l, m->args[0], k);
        merged = true;
        break;
      }
    }
  }
}

/* a op b for op in add/sub/mul over i64, in normal form; NULL if it does not apply. */
static Expr *affine(TE *te, TeBinary op, Expr *a, Expr *b) {
  Lin l = { .ok = true };
  if (op == TB_MUL) {
    if (is_const(b)) lin_add(&l, a, b->c.i);
    else if (is_const(a)) lin_add(&l, b, a->c.i);
    else return NULL;
  } else {
    lin_add(&l, a, 1);
    lin_add(&l, b, op == TB_SUB ? -1 : 1);
  }
  lin_merge_divmod(&l);
  return l.ok ? lin_build(te, &l) : NULL;
}

static int64_t gcd64(int64_t a, int64_t b) {
  if (a < 0) a = -a;
  if (b < 0) b = -b;
  while (b) { int64_t t = a % b; a = b; b = t; }
  return a;
}

static int64_t floordiv64(int64_t a, int64_t c) {
  return te_eval_binary(TB_FLOORDIV, KILN_I64, (TeValue){ .i = a }, (TeValue){ .i = c }).i;
}

static Expr *mk_binary(TE *te, const Ranges *r, TeBinary op, Expr *a, Expr *b);

/* x = g*B + s with 0 <= s < g and g | c (g from a term's coefficient) gives
 * floordiv(x, c) = floordiv(B, c/g) and mod(x, c) = mod(B, c/g)*g + s: what merging
 * dims in a reshape produces, e.g. floordiv(4i + j, 12) = floordiv(i, 3) for j < 4.
 * NULL when no term gives such a g. */
static Expr *split_small(TE *te, const Ranges *r, TeBinary op, const Lin *x, int64_t c) {
  for (int k = 0; k < x->n; k++) {
    int64_t g = gcd64(c, x->c[k]), mn, mx;
    if (g <= 1 || g >= c) continue;
    Lin big = { .ok = true }, small = { .ok = true };
    for (int i = 0; i < x->n; i++) {
      if (x->c[i] % g == 0) lin_term(&big, x->t[i], x->c[i] / g);
      else lin_term(&small, x->t[i], x->c[i]);
    }
    big.k = floordiv64(x->k, g);
    small.k = x->k - big.k * g;
    Expr *s = lin_build(te, &small);
    if (!s || !range_of(s, r, &mn, &mx, 0) || mn < 0 || mx >= g) continue;
    Expr *b = lin_build(te, &big);
    Expr *d = mk_binary(te, r, op, b, te_const_i(te, KILN_I64, c / g));
    if (op == TB_FLOORDIV) return d;
    return mk_binary(te, r, TB_ADD, mk_binary(te, r, TB_MUL, d, te_const_i(te, KILN_I64, g)), s);
  }
  return NULL;
}

/* floordiv(a, c) or mod(a, c) for a constant c > 0 over i64:
 * floordiv(q*c + x, c) = q + floordiv(x, c) and mod(q*c + x, c) = mod(x, c) always;
 * with ranges, x in [m*c, m*c + c) gives floordiv = m and mod = x - m*c. */
static Expr *divmod_const(TE *te, const Ranges *r, TeBinary op, Expr *a, int64_t c) {
  Lin l = { .ok = true }, q = { .ok = true }, x = { .ok = true };
  lin_add(&l, a, 1);
  if (!l.ok) return NULL;
  for (int i = 0; i < l.n; i++)
    lin_term(l.c[i] % c == 0 ? &q : &x, l.t[i], l.c[i] % c == 0 ? l.c[i] / c : l.c[i]);
  q.k = floordiv64(l.k, c);
  x.k = l.k - q.k * c;
  int64_t g = c;  /* common factor of the divisor and the remainder's coefficients */
  for (int i = 0; i < x.n; i++) g = gcd64(g, x.c[i]);
  g = gcd64(g, x.k);
  if (g > 1) {
    for (int i = 0; i < x.n; i++) x.c[i] /= g;
    x.k /= g;
    c /= g;
  }
  Expr *xe = lin_build(te, &x), *rest;
  if (!xe) return NULL;
  int64_t mn, mx;
  bool known = range_of(xe, r, &mn, &mx, 0) && floordiv64(mn, c) == floordiv64(mx, c);
  if (!known && r && c > 1) {
    rest = split_small(te, r, op, &x, c);
    if (rest) {
      if (g > 1 && op == TB_MOD) rest = mk_binary(te, r, TB_MUL, rest, te_const_i(te, KILN_I64, g));
      Expr *qe = op == TB_MOD ? te_const_i(te, KILN_I64, 0) : lin_build(te, &q);
      return qe ? mk_binary(te, r, TB_ADD, qe, rest) : NULL;
    }
  }
  if (op == TB_MOD) {
    if (c == 1) return te_const_i(te, KILN_I64, 0);
    if (known) rest = mk_binary(te, r, TB_SUB, xe, te_const_i(te, KILN_I64, floordiv64(mn, c) * c));
    else rest = raw_binary(te, TB_MOD, xe, te_const_i(te, KILN_I64, c));
    if (g > 1) rest = mk_binary(te, r, TB_MUL, rest, te_const_i(te, KILN_I64, g));
    return rest;
  }
  if (c == 1) rest = xe;
  else if (known) rest = te_const_i(te, KILN_I64, floordiv64(mn, c));
  else if (xe->kind == EX_BINARY && xe->op == TB_FLOORDIV && is_const(xe->args[1]) && xe->args[1]->c.i > 0 &&
           !__builtin_mul_overflow(xe->args[1]->c.i, c, &mn))
    rest = raw_binary(te, TB_FLOORDIV, xe->args[0], te_const_i(te, KILN_I64, mn));  /* floor(floor(y/a)/c) */
  else rest = raw_binary(te, TB_FLOORDIV, xe, te_const_i(te, KILN_I64, c));
  if (!rest) return NULL;
  Expr *qe = lin_build(te, &q);
  return qe ? mk_binary(te, r, TB_ADD, qe, rest) : NULL;
}

/* A comparison decided by ranges: 1 or 0, or -1 when undecided. */
static int decide_compare(TeBinary op, const Ranges *r, Expr *a, Expr *b) {
  int64_t a0, a1, b0, b1;
  if (!range_of(a, r, &a0, &a1, 0) || !range_of(b, r, &b0, &b1, 0)) return -1;
  switch (op) {
  case TB_LT: return a1 < b0 ? 1 : a0 >= b1 ? 0 : -1;
  case TB_LE: return a1 <= b0 ? 1 : a0 > b1 ? 0 : -1;
  case TB_GT: return a0 > b1 ? 1 : a1 <= b0 ? 0 : -1;
  case TB_GE: return a0 >= b1 ? 1 : a1 < b0 ? 0 : -1;
  case TB_EQ: return a0 == a1 && b0 == b1 && a0 == b0 ? 1 : (a1 < b0 || b1 < a0) ? 0 : -1;
  case TB_NE: return a0 == a1 && b0 == b1 && a0 == b0 ? 0 : (a1 < b0 || b1 < a0) ? 1 : -1;
  default: return -1;
  }
}

static bool commutative(TeBinary op) {
  return op == TB_ADD || op == TB_MUL || op == TB_MAX || op == TB_MIN || op == TB_EQ || op == TB_NE ||
         op == TB_AND || op == TB_OR || op == TB_XOR;
}

/* Exact identities; NULL when none applies. */
static Expr *identity(TeBinary op, Expr *a, Expr *b) {
  bool fl = dtype_is_float(a->dtype);
  if (fl && is_const(b)) {
    double v = b->c.f;
    if ((op == TB_MUL || op == TB_DIV) && v == 1.0) return a;
    if (op == TB_ADD && v == 0 && signbit(v)) return a;   /* x + -0.0 == x, even for x = -0.0 */
    if (op == TB_SUB && v == 0 && !signbit(v)) return a;  /* x - 0.0 == x */
    return NULL;
  }
  if (fl) return NULL;
  if (a->dtype == KILN_BOOL) {
    if (op == TB_AND && is_const(b)) return b->c.i ? a : b;
    if (op == TB_OR && is_const(b)) return b->c.i ? b : a;
    return NULL;
  }
  if (is_int_const(b, 0) && (op == TB_ADD || op == TB_SUB || op == TB_OR || op == TB_XOR || op == TB_SHL || op == TB_SHR))
    return a;
  if (is_int_const(b, 0) && (op == TB_MUL || op == TB_AND)) return b;
  if (is_int_const(b, 1) && (op == TB_MUL || op == TB_DIV || op == TB_FLOORDIV)) return a;
  if ((op == TB_MAX || op == TB_MIN) && a == b) return a;
  return NULL;
}

static Expr *mk_binary(TE *te, const Ranges *r, TeBinary op, Expr *a, Expr *b) {
  if (!a || !b) return NULL;
  KILN_ASSERT(a->dtype == b->dtype);
  kiln_dtype out = is_compare(op) ? KILN_BOOL : a->dtype;
  if (is_const(a) && is_const(b)) return mk_const(te, out, te_eval_binary(op, a->dtype, a->c, b->c));
  if (commutative(op) && (is_const(a) || (!is_const(b) && b->id < a->id))) {
    Expr *t = a; a = b; b = t;  /* constant second, else creation order */
  }
  Expr *e = identity(op, a, b);
  if (e) return e;
  if (a->dtype == KILN_I64) {
    if (op == TB_ADD || op == TB_SUB || op == TB_MUL) {
      e = affine(te, op, a, b);
      if (e) return e;
    }
    if ((op == TB_FLOORDIV || op == TB_MOD) && is_const(b) && b->c.i > 0) {
      e = divmod_const(te, r, op, a, b->c.i);
      if (e) return e;
    }
  }
  if (r && !dtype_is_float(a->dtype)) {
    int64_t a0, a1, b0, b1;
    int d = is_compare(op) ? decide_compare(op, r, a, b) : -1;
    if (d >= 0) return te_const_i(te, KILN_BOOL, d);
    if ((op == TB_MIN || op == TB_MAX) && range_of(a, r, &a0, &a1, 0) && range_of(b, r, &b0, &b1, 0)) {
      if (a1 <= b0) return op == TB_MIN ? a : b;
      if (b1 <= a0) return op == TB_MIN ? b : a;
    }
  }
  Expr *args[2] = { a, b };
  return mk(te, EX_BINARY, out, op, 2, args);
}

Expr *te_binary(TE *te, TeBinary op, Expr *a, Expr *b) { return mk_binary(te, NULL, op, a, b); }

Expr *te_unary(TE *te, TeUnary op, Expr *a) {
  if (!a) return NULL;
  kiln_dtype out = op == TU_ISNAN || op == TU_ISINF ? KILN_BOOL : a->dtype;
  if (is_const(a)) return mk_const(te, out, te_eval_unary(op, a->dtype, a->c));
  if (op == TU_NEG && a->dtype == KILN_I64) return te_binary(te, TB_SUB, te_const_i(te, KILN_I64, 0), a);
  if (!dtype_is_float(a->dtype) && (op == TU_FLOOR || op == TU_CEIL || op == TU_ROUND)) return a;
  return mk(te, EX_UNARY, out, op, 1, &a);
}

Expr *te_select(TE *te, Expr *c, Expr *a, Expr *b) {
  if (!c || !a || !b) return NULL;
  KILN_ASSERT(c->dtype == KILN_BOOL && a->dtype == b->dtype);
  if (is_const(c)) return c->c.i ? a : b;
  if (a == b) return a;
  /* c ? s[i..] : s[j..], two reads of one stage: one read at c ? i : j. The same element is
   * read as before, whichever way c goes; a chain of them (a concat's slices, an im2col's taps
   * over one padded input) becomes index math that a loop can hoist, not branches around
   * loads that keep one read in flight. */
  if (a->kind == EX_LOAD && b->kind == EX_LOAD && a->src == b->src && a->n_args == b->n_args) {
    Expr *idx[KILN_MAX_RANK];
    for (int i = 0; i < a->n_args; i++)
      if (!(idx[i] = te_select(te, c, a->args[i], b->args[i]))) return NULL;
    return te_load(te, a->src, a->n_args, idx);
  }
  Expr *args[3] = { c, a, b };
  return mk(te, EX_SELECT, a->dtype, 0, 3, args);
}

/* explicit: EX_CAST's op, 1 for a Cast node's conversion (te_cast_explicit) */
static Expr *cast_as(TE *te, kiln_dtype t, Expr *a, int explicit) {
  if (!a) return NULL;
  if (a->dtype == t) return a;
  if (is_const(a)) return mk_const(te, t, te_eval_cast(t, a->dtype, a->c));
  return mk(te, EX_CAST, t, explicit, 1, &a);
}

Expr *te_cast(TE *te, kiln_dtype t, Expr *a) { return cast_as(te, t, a, 0); }
Expr *te_cast_explicit(TE *te, kiln_dtype t, Expr *a) { return cast_as(te, t, a, 1); }

/* ---- rewriting: substitute, simplify, inline ---- */

/* A pointer -> pointer memo, so a DAG is rewritten in time linear in its nodes. */
typedef struct Memo { const Expr **key; Expr **val; size_t cap, n; } Memo;

static size_t memo_slot(const Memo *m, const Expr *e) {
  size_t i = (size_t)(e->hash ^ (uintptr_t)e) & (m->cap - 1);
  while (m->key[i] && m->key[i] != e) i = (i + 1) & (m->cap - 1);
  return i;
}

static Expr *memo_get(const Memo *m, const Expr *e) {
  if (!m->cap) return NULL;
  size_t i = memo_slot(m, e);
  return m->key[i] ? m->val[i] : NULL;
}

static bool memo_put(Memo *m, const Expr *e, Expr *v) {
  if (2 * (m->n + 1) > m->cap) {
    Memo g = { .cap = m->cap ? m->cap * 2 : 64 };
    g.key = kiln_calloc(g.cap, sizeof *g.key);
    g.val = kiln_calloc(g.cap, sizeof *g.val);
    if (!g.key || !g.val) { kiln_free(g.key); kiln_free(g.val); return false; }
    for (size_t i = 0; i < m->cap; i++)
      if (m->key[i]) {
        size_t j = memo_slot(&g, m->key[i]);
        g.key[j] = m->key[i];
        g.val[j] = m->val[i];
      }
    g.n = m->n;
    kiln_free(m->key);
    kiln_free(m->val);
    *m = g;
  }
  size_t i = memo_slot(m, e);
  if (!m->key[i]) m->n++;
  m->key[i] = e;
  m->val[i] = v;
  return true;
}

static void memo_free(Memo *m) {
  kiln_free(m->key);
  kiln_free(m->val);
  *m = (Memo){0};
}

typedef struct Rewrite {
  TE *te;
  Memo memo;
  Expr *const *map; int nmap;    /* substitute: var v < nmap -> map[v] */
  const bool *inl;               /* inline: stages to inline */
  const Ranges *r;               /* simplify with these var ranges (NULL: none) */
  const Expr *from; Expr *to;    /* replace: the node from -> to */
  bool factor;                   /* factor_select each i64 select */
} Rewrite;

/* select(c, a, b) over i64 with the affine terms a and b share (the same atom, the same
 * coefficient) taken out: select(c, x + 1, x + 2) = x + select(c, 1, 2). */
static Expr *factor_select(TE *te, Expr *c, Expr *a, Expr *b) {
  Lin la = { .ok = true }, lb = { .ok = true }, common = { .ok = true }, ra = { .ok = true }, rb = { .ok = true };
  lin_add(&la, a, 1);
  lin_add(&lb, b, 1);
  if (!la.ok || !lb.ok) return te_select(te, c, a, b);
  bool used[LIN_MAX] = { false };
  for (int i = 0; i < la.n; i++) {
    int j = 0;
    while (j < lb.n && (lb.t[j] != la.t[i] || lb.c[j] != la.c[i])) j++;
    if (j < lb.n) lin_term(&common, la.t[i], la.c[i]), used[j] = true;
    else lin_term(&ra, la.t[i], la.c[i]);
  }
  for (int j = 0; j < lb.n; j++)
    if (!used[j]) lin_term(&rb, lb.t[j], lb.c[j]);
  if (!common.n || !common.ok || !ra.ok || !rb.ok) return te_select(te, c, a, b);
  ra.k = la.k, rb.k = lb.k;
  Expr *ea = lin_build(te, &ra), *eb = lin_build(te, &rb), *ec = lin_build(te, &common);
  Expr *s = ea && eb ? te_select(te, c, ea, eb) : NULL;
  return s && ec ? te_binary(te, TB_ADD, ec, s) : NULL;
}

static Expr *rewrite(Rewrite *w, Expr *e);

static Expr *rebuild(Rewrite *w, Expr *e, Expr **a) {
  TE *te = w->te;
  switch (e->kind) {
  case EX_CONST: return e;
  case EX_VAR: return e->var < w->nmap ? w->map[e->var] : e;
  case EX_LOAD:
    if (w->inl && w->inl[e->src]) {
      const Stage *s = &te->stages[e->src];
      KILN_ASSERT(s->kind == ST_INJECTIVE);
      Expr *body = te_substitute(te, s->body, a, s->rank);
      return body ? rewrite(w, body) : NULL;
    }
    return te_load(te, e->src, e->n_args, a);
  case EX_UNARY: return te_unary(te, e->op, a[0]);
  case EX_BINARY: return mk_binary(te, w->r, e->op, a[0], a[1]);
  case EX_SELECT:
    if (w->factor && e->dtype == KILN_I64) return factor_select(te, a[0], a[1], a[2]);
    return te_select(te, a[0], a[1], a[2]);
  case EX_CAST: return cast_as(te, e->dtype, a[0], e->op);  /* a rewritten cast keeps its kind */
  }
  return NULL;
}

static Expr *rewrite(Rewrite *w, Expr *e) {
  if (!e) return NULL;
  if (e == w->from) return w->to;
  Expr *done = memo_get(&w->memo, e);
  if (done) return done;
  Expr *a[KILN_MAX_RANK > 3 ? KILN_MAX_RANK : 3];
  for (int i = 0; i < e->n_args; i++)
    if (!(a[i] = rewrite(w, e->args[i]))) return NULL;
  Expr *r = rebuild(w, e, a);
  if (r && !memo_put(&w->memo, e, r)) return NULL;
  return r;
}

static Expr *run_rewrite(Rewrite *w, Expr *e) {
  Expr *r = rewrite(w, e);
  memo_free(&w->memo);
  return r;
}

Expr *te_substitute(TE *te, Expr *e, Expr *const *map, int n) {
  Rewrite w = { .te = te, .map = map, .nmap = n };
  return run_rewrite(&w, e);
}

Expr *te_replace(TE *te, Expr *e, const Expr *from, Expr *to) {
  Rewrite w = { .te = te, .from = from, .to = to };
  return run_rewrite(&w, e);
}

Expr *te_simplify(TE *te, Expr *e, const int64_t *lo, const int64_t *hi, int nvars) {
  Ranges r = { lo, hi, nvars };
  Rewrite w = { .te = te, .r = lo && hi ? &r : NULL };
  return run_rewrite(&w, e);
}

Expr *te_factor_selects(TE *te, Expr *e) {
  Rewrite w = { .te = te, .factor = true };
  return run_rewrite(&w, e);
}

Expr *te_inline(TE *te, Expr *e, const bool *inline_stage, const int64_t *lo, const int64_t *hi, int nvars) {
  Ranges r = { lo, hi, nvars };
  Rewrite w = { .te = te, .inl = inline_stage, .r = lo && hi ? &r : NULL };
  return run_rewrite(&w, e);
}

/* ---- clamps a guard makes redundant ---- */

/* What a select's condition tells its then-branch: int expression e lies in lo..hi, from the
 * conjuncts e < c, e <= c, e > c, e >= c (c a constant, on either side). */
typedef struct Fact { const Expr *e; int64_t lo, hi; } Fact;
enum { FACTS_MAX = 32 };
typedef struct Facts { Fact f[FACTS_MAX]; int n; } Facts;

static void fact_add(Facts *fs, const Expr *e, int64_t lo, int64_t hi) {
  for (int i = 0; i < fs->n; i++)
    if (fs->f[i].e == e) {
      if (lo > fs->f[i].lo) fs->f[i].lo = lo;
      if (hi < fs->f[i].hi) fs->f[i].hi = hi;
      return;
    }
  if (fs->n < FACTS_MAX) fs->f[fs->n++] = (Fact){ e, lo, hi };  /* past the cap a fact is dropped: a clamp stays */
}

static void facts_of(const Expr *c, Facts *fs) {
  if (c->kind != EX_BINARY) return;
  if (c->op == TB_AND && c->dtype == KILN_BOOL) {
    facts_of(c->args[0], fs);
    facts_of(c->args[1], fs);
    return;
  }
  int op = c->op;
  const Expr *e = c->args[0], *k = c->args[1];
  if (dtype_is_float(e->dtype) || e->dtype == KILN_U64) return;
  if (is_const(e) && !is_const(k)) {  /* c OP e: mirror it */
    const Expr *t = e; e = k; k = t;
    op = op == TB_LT ? TB_GT : op == TB_LE ? TB_GE : op == TB_GT ? TB_LT : op == TB_GE ? TB_LE : op;
  }
  if (!is_const(k)) return;
  int64_t v = k->c.i;
  switch (op) {
  case TB_LT: if (v > INT64_MIN) fact_add(fs, e, INT64_MIN, v - 1); break;
  case TB_LE: fact_add(fs, e, INT64_MIN, v); break;
  case TB_GT: if (v < INT64_MAX) fact_add(fs, e, v + 1, INT64_MAX); break;
  case TB_GE: fact_add(fs, e, v, INT64_MAX); break;
  default: break;
  }
}

typedef struct Unclamp { TE *te; Memo memo; const Facts *facts; } Unclamp;

static Expr *unclamp(Unclamp *u, Expr *e);

/* e's bounds from the facts in force: false when none speaks of e. */
static bool fact_bounds(const Facts *fs, const Expr *e, int64_t *lo, int64_t *hi) {
  for (int i = 0; fs && i < fs->n; i++)
    if (fs->f[i].e == e) return *lo = fs->f[i].lo, *hi = fs->f[i].hi, true;
  return false;
}

static Expr *unclamp_node(Unclamp *u, Expr *e, Expr **a) {
  TE *te = u->te;
  switch (e->kind) {
  case EX_CONST: case EX_VAR: return e;
  case EX_LOAD: return te_load(te, e->src, e->n_args, a);
  case EX_UNARY: return te_unary(te, e->op, a[0]);
  case EX_CAST: return cast_as(te, e->dtype, a[0], e->op);  /* a rewritten cast keeps its kind */
  case EX_SELECT: return te_select(te, a[0], a[1], a[2]);
  case EX_BINARY: {
    int64_t lo, hi;
    if ((e->op == TB_MAX || e->op == TB_MIN) && !dtype_is_float(e->dtype))
      for (int s = 0; s < 2; s++) {  /* max(x, c) with x >= c known, min(x, c) with x <= c known: x */
        Expr *x = a[s], *c = a[1 - s];
        if (!is_const(c) || !fact_bounds(u->facts, x, &lo, &hi)) continue;
        if (e->op == TB_MAX ? lo >= c->c.i : hi <= c->c.i) {
          /* x is the value now: what the facts said of the clamp holds of x */
          return x;
        }
      }
    return te_binary(te, e->op, a[0], a[1]);
  }
  }
  return NULL;
}

static Expr *unclamp(Unclamp *u, Expr *e) {
  if (!e) return NULL;
  Expr *done = memo_get(&u->memo, e);
  if (done) return done;
  Expr *a[KILN_MAX_RANK > 3 ? KILN_MAX_RANK : 3];
  Expr *r;
  if (e->kind == EX_SELECT && dtype_is_float(e->dtype)) {
    /* the then-branch under the condition's facts (and those already in force), in a scope
     * of its own: what it rewrites holds only where the condition does */
    if (!(a[0] = unclamp(u, e->args[0])) || !(a[2] = unclamp(u, e->args[2]))) return NULL;
    Facts inner = u->facts ? *u->facts : (Facts){ .n = 0 };
    facts_of(a[0], &inner);
    Unclamp v = { .te = u->te, .facts = &inner };
    a[1] = unclamp(&v, e->args[1]);
    memo_free(&v.memo);
    if (!a[1]) return NULL;
    r = te_select(u->te, a[0], a[1], a[2]);
  } else {
    for (int i = 0; i < e->n_args; i++)
      if (!(a[i] = unclamp(u, e->args[i]))) return NULL;
    r = unclamp_node(u, e, a);
  }
  if (r && !memo_put(&u->memo, e, r)) return NULL;
  return r;
}

Expr *te_unclamp_guarded(TE *te, Expr *e) {
  Unclamp u = { .te = te };
  Expr *r = unclamp(&u, e);
  memo_free(&u.memo);
  return r;
}

/* ---- visiting ---- */

typedef struct Visit { Memo seen; void (*fn)(const Expr *, void *); void *ctx; } Visit;

static void visit(Visit *v, const Expr *e) {
  if (memo_get(&v->seen, e)) return;
  memo_put(&v->seen, e, (Expr *)e);  /* on failure we may revisit: fn sees a stage twice at worst */
  for (int i = 0; i < e->n_args; i++) visit(v, e->args[i]);
  if (e->kind == EX_LOAD) v->fn(e, v->ctx);
}

void te_visit_loads(const Expr *e, void (*fn)(const Expr *load, void *ctx), void *ctx) {
  Visit v = { .fn = fn, .ctx = ctx };
  if (e) visit(&v, e);
  memo_free(&v.seen);
}
