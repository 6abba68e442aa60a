/*
 * lower.c — graph -> te. Takes a Graph (tensors in topological order) and produces a
 * TE: a source stage per input, parameter and constant (their data copied into the TE
 * arena, so the graph may be freed once te_lower returns), then one or more stages per
 * node, in the graph's order.
 *
 * Every op is written as an expression over the output index (vars 0..rank-1) and, for
 * reductions, the reduction index (vars rank..). Movement ops are pure index maps;
 * broadcast dims read index 0; reads that a select guards (padding, concat, gather) are
 * clamped so every load is in range. f16/bf16 arithmetic is done in f32 with a cast
 * back (te.h). Each body is simplified with its var ranges before the stage is added.
 */
#include "te.h"

#include <math.h>
#include <string.h>

typedef struct Lower { TE *te; const Graph *g; int row_sums; } Lower;

/* ---- the TE object ---- */

int te_add_stage(TE *te, const Stage *s) {
  if (te->n_stages == te->cap_stages) {
    int cap = te->cap_stages ? te->cap_stages * 2 : 64;
    Stage *st = kiln_realloc(te->stages, (size_t)cap * sizeof *st);
    if (!st) return -1;
    te->stages = st;
    te->cap_stages = cap;
  }
  te->stages[te->n_stages] = *s;
  te->stages[te->n_stages].id = te->n_stages;
  return te->n_stages++;
}

void te_free(TE *te) {
  if (!te) return;
  kiln_free(te->stages);
  kiln_free(te->buckets);
  arena_free(&te->arena);
  kiln_free(te);
}

/* ---- helpers ---- */

static kiln_status node_fail(const Node *n, kiln_status s, const char *what) {
  return kiln_fail(s, "node '%s' (%s): %s", n->name, op_names[n->op], what);
}

static Expr *V(Lower *L, int v) { return te_var(L->te, v); }
static Expr *I(Lower *L, int64_t v) { return te_const_i(L->te, KILN_I64, v); }
static Expr *add(Lower *L, Expr *a, Expr *b) { return te_binary(L->te, TB_ADD, a, b); }
static Expr *mul(Lower *L, Expr *a, Expr *b) { return te_binary(L->te, TB_MUL, a, b); }
static Expr *and_(Lower *L, Expr *a, Expr *b) { return a ? te_binary(L->te, TB_AND, a, b) : b; }
static const Tensor *tensor(Lower *L, int t) { return &L->g->tensors[t]; }
static int stage_of(Lower *L, int t) { return L->te->tensor_stage[t]; }

static bool is_half(kiln_dtype t) { return t == KILN_F16 || t == KILN_BF16; }
/* The dtype arithmetic on t happens in. */
static kiln_dtype arith_t(kiln_dtype t) { return is_half(t) ? KILN_F32 : t; }
static Expr *arith(Lower *L, Expr *e) { return e ? te_cast(L->te, arith_t(e->dtype), e) : NULL; }

/* min(max(x, 0), n - 1): keeps a guarded read in range. */
static Expr *clamp(Lower *L, Expr *x, int64_t n) {
  Expr *lo = te_binary(L->te, TB_MAX, x, I(L, 0));
  return te_binary(L->te, TB_MIN, lo, I(L, n > 0 ? n - 1 : 0));
}

/* 0 <= x < n */
static Expr *in_range(Lower *L, Expr *x, int64_t lo, int64_t hi) {
  return and_(L, te_binary(L->te, TB_GE, x, I(L, lo)), te_binary(L->te, TB_LT, x, I(L, hi)));
}

static Expr *load(Lower *L, int tensor_id, Expr *const *idx) {
  int s = stage_of(L, tensor_id);
  return te_load(L->te, s, L->te->stages[s].rank, idx);
}

/* Load of tensor t broadcast (NumPy, aligned right) to an output of rank ro. */
static Expr *bcast_load(Lower *L, int t, int ro) {
  const Tensor *x = tensor(L, t);
  Expr *idx[KILN_MAX_RANK];
  for (int d = 0; d < x->rank; d++) idx[d] = x->shape[d] == 1 ? I(L, 0) : V(L, d + ro - x->rank);
  return load(L, t, idx);
}

/* Adds a stage of node n over `shape` (rank dims). suffix NULL: it is the tensor n->out; else an
 * internal stage named after it with suffix. Returns the stage id, or -1 out of memory. */
static int emit_shaped(Lower *L, const Node *n, StageKind kind, kiln_dtype dt, int rank, const int64_t *shape, Expr *body,
                       int n_red, const int64_t *red, ReduceOp rop, int select_last, const char *suffix) {
  TE *te = L->te;
  const Tensor *t = tensor(L, n->out);
  Stage s = { .kind = kind, .dtype = dt, .rank = rank, .numel = 1, .n_red = n_red, .rop = rop,
              .select_last = select_last, .tensor = suffix ? -1 : n->out, .op = n->op };
  int64_t lo[2 * KILN_MAX_RANK], hi[2 * KILN_MAX_RANK];
  for (int v = 0; v < rank; v++) {
    s.shape[v] = shape[v], s.numel *= shape[v];
    lo[v] = 0, hi[v] = shape[v] - 1;
  }
  for (int r = 0; r < n_red; r++) {
    s.red_shape[r] = red[r];
    lo[rank + r] = 0;
    hi[rank + r] = red[r] - 1;
  }
  s.body = te_simplify(te, body, lo, hi, rank + n_red);
  if (suffix) {
    size_t len = strlen(t->name) + strlen(suffix) + 2;
    char *nm = arena_alloc(&te->arena, len);
    if (nm) snprintf(nm, len, "%s.%s", t->name, suffix);
    s.name = nm;
  } else {
    s.name = arena_strdup(&te->arena, t->name);
  }
  if (!s.body || !s.name) return -1;
  return te_add_stage(te, &s);
}

/* A stage of node n's output shape (emit_shaped). */
static int emit(Lower *L, const Node *n, StageKind kind, kiln_dtype dt, Expr *body, int n_red,
                const int64_t *red, ReduceOp rop, int select_last, const char *suffix) {
  const Tensor *t = tensor(L, n->out);
  return emit_shaped(L, n, kind, dt, t->rank, t->shape, body, n_red, red, rop, select_last, suffix);
}

static Expr *load_out(Lower *L, int stage, int rank) {
  Expr *idx[KILN_MAX_RANK];
  for (int d = 0; d < rank; d++) idx[d] = V(L, d);
  return te_load(L->te, stage, rank, idx);
}

/* A reduce stage of node n with accumulator dtype acc_t; a cast stage after it when the
 * output is f16/bf16. Returns the final stage. */
static int emit_reduce(Lower *L, const Node *n, Expr *body, int n_red, const int64_t *red, ReduceOp rop,
                       int select_last) {
  kiln_dtype out_t = tensor(L, n->out)->dtype;
  if (rop == RO_ARGMAX || rop == RO_ARGMIN || !is_half(out_t))
    return emit(L, n, ST_REDUCE, out_t, body, n_red, red, rop, select_last, NULL);
  int acc = emit(L, n, ST_REDUCE, body->dtype, body, n_red, red, rop, select_last, "acc");
  if (acc < 0) return -1;
  Expr *b = te_cast(L->te, out_t, load_out(L, acc, tensor(L, n->out)->rank));
  return b ? emit(L, n, ST_INJECTIVE, out_t, b, 0, NULL, RO_SUM, 0, NULL) : -1;
}

/* ---- elementwise ---- */

/* kiln's tanh GELU, x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))), built in this one
 * order (expression ids follow creation order): OP_GELU_TANH lowers to it, and codegen's
 * library matcher rebuilds it to recognise the epilogue, so the two cannot drift. */
Expr *te_gelu_tanh(TE *te, Expr *x) {
  if (!x) return NULL;
  kiln_dtype t = x->dtype;
  Expr *x3 = te_binary(te, TB_MUL, te_binary(te, TB_MUL, x, x), x);
  Expr *in = te_binary(te, TB_ADD, x, te_binary(te, TB_MUL, x3, te_const_f(te, t, 0.044715)));
  Expr *th = te_unary(te, TU_TANH, te_binary(te, TB_MUL, in, te_const_f(te, t, 0.7978845608028654)));
  Expr *h = te_binary(te, TB_MUL, x, te_const_f(te, t, 0.5));
  return te_binary(te, TB_MUL, h, te_binary(te, TB_ADD, th, te_const_f(te, t, 1.0)));
}

static Expr *unary_body(Lower *L, OpKind op, Expr *x) {
  TE *te = L->te;
  kiln_dtype t = x->dtype;
  switch (op) {
  case OP_NEG: return te_unary(te, TU_NEG, x);
  case OP_ABS: return te_unary(te, TU_ABS, x);
  case OP_EXP: return te_unary(te, TU_EXP, x);
  case OP_LOG: return te_unary(te, TU_LOG, x);
  case OP_SQRT: return te_unary(te, TU_SQRT, x);
  case OP_RSQRT: return te_unary(te, TU_RSQRT, x);
  case OP_RECIPROCAL: return te_unary(te, TU_RECIP, x);
  case OP_TANH: return te_unary(te, TU_TANH, x);
  case OP_SIGMOID: return te_unary(te, TU_SIGMOID, x);
  case OP_RELU: return te_binary(te, TB_MAX, x, te_const_i(te, t, 0));
  case OP_GELU_ERF: {  /* x/2 * (1 + erf(x/sqrt 2)) */
    Expr *e = te_unary(te, TU_ERF, mul(L, x, te_const_f(te, t, M_SQRT1_2)));
    Expr *h = mul(L, x, te_const_f(te, t, 0.5));
    return mul(L, h, add(L, e, te_const_f(te, t, 1.0)));
  }
  case OP_GELU_TANH: return te_gelu_tanh(te, x);
  case OP_ERF: return te_unary(te, TU_ERF, x);
  case OP_SIN: return te_unary(te, TU_SIN, x);
  case OP_COS: return te_unary(te, TU_COS, x);
  case OP_FLOOR: return te_unary(te, TU_FLOOR, x);
  case OP_CEIL: return te_unary(te, TU_CEIL, x);
  case OP_ROUND: return te_unary(te, TU_ROUND, x);
  case OP_SIGN: return te_unary(te, TU_SIGN, x);
  case OP_NOT: return te_unary(te, TU_NOT, x);
  case OP_ISNAN: return te_unary(te, TU_ISNAN, x);
  case OP_ISINF: return te_unary(te, TU_ISINF, x);
  default: return NULL;
  }
}

static int binary_op(OpKind op) {
  switch (op) {
  case OP_ADD: return TB_ADD;
  case OP_SUB: return TB_SUB;
  case OP_MUL: return TB_MUL;
  case OP_DIV: return TB_DIV;
  case OP_POW: return TB_POW;
  case OP_MAX: return TB_MAX;
  case OP_MIN: return TB_MIN;
  case OP_MOD: return TB_MOD;
  case OP_FMOD: return TB_FMOD;
  case OP_EQ: return TB_EQ;
  case OP_NE: return TB_NE;
  case OP_LT: return TB_LT;
  case OP_LE: return TB_LE;
  case OP_GT: return TB_GT;
  case OP_GE: return TB_GE;
  case OP_AND: return TB_AND;
  case OP_OR: return TB_OR;
  case OP_XOR: return TB_XOR;
  case OP_SHL: return TB_SHL;
  case OP_SHR: return TB_SHR;
  default: return -1;
  }
}

static Expr *elementwise(Lower *L, const Node *n) {
  const Tensor *o = tensor(L, n->out);
  TE *te = L->te;
  Expr *r;
  if (n->op == OP_WHERE)
    return te_select(te, bcast_load(L, n->in[0], o->rank), bcast_load(L, n->in[1], o->rank),
                     bcast_load(L, n->in[2], o->rank));
  if (n->op == OP_CAST) return te_cast_explicit(te, n->attr.to, bcast_load(L, n->in[0], o->rank));
  if (n->n_in == 1) {
    Expr *x = arith(L, bcast_load(L, n->in[0], o->rank));
    r = x ? unary_body(L, n->op, x) : NULL;
  } else {
    Expr *a = arith(L, bcast_load(L, n->in[0], o->rank)), *b = arith(L, bcast_load(L, n->in[1], o->rank));
    r = te_binary(te, binary_op(n->op), a, b);
  }
  return te_cast(te, o->dtype, r);
}

/* ---- movement: index maps ---- */

static Expr *reshape(Lower *L, const Node *n) {
  const Tensor *x = tensor(L, n->in[0]), *o = tensor(L, n->out);
  Expr *flat = I(L, 0), *idx[KILN_MAX_RANK];
  int64_t stride = 1;
  for (int d = o->rank - 1; d >= 0; d--) {
    flat = add(L, flat, mul(L, V(L, d), I(L, stride)));
    stride *= o->shape[d] ? o->shape[d] : 1;
  }
  stride = 1;
  for (int d = x->rank - 1; d >= 0; d--) {
    Expr *q = te_binary(L->te, TB_FLOORDIV, flat, I(L, stride));
    idx[d] = d == 0 || x->shape[d] == 0 ? q : te_binary(L->te, TB_MOD, q, I(L, x->shape[d]));
    stride *= x->shape[d] ? x->shape[d] : 1;
  }
  return load(L, n->in[0], idx);
}

static Expr *transpose(Lower *L, const Node *n) {
  const Tensor *o = tensor(L, n->out);
  Expr *idx[KILN_MAX_RANK];
  for (int i = 0; i < o->rank; i++) idx[n->attr.perm[i]] = V(L, i);
  return load(L, n->in[0], idx);
}

static Expr *slice(Lower *L, const Node *n) {
  const Tensor *x = tensor(L, n->in[0]);
  Expr *idx[KILN_MAX_RANK];
  for (int d = 0; d < x->rank; d++) idx[d] = add(L, I(L, n->attr.starts[d]), mul(L, V(L, d), I(L, n->attr.steps[d])));
  return load(L, n->in[0], idx);
}

/* Nested selects on the concat axis; each read clamped to its input's extent. */
static Expr *concat(Lower *L, const Node *n) {
  const Tensor *o = tensor(L, n->out);
  int a = n->attr.axis;
  int64_t end = o->shape[a];  /* inputs are walked from the last: each ends where the next starts */
  Expr *e = NULL;
  for (int j = n->n_in - 1; j >= 0; j--) {
    int64_t len = tensor(L, n->in[j])->shape[a], off = end - len;
    end = off;
    if (len == 0) continue;
    Expr *idx[KILN_MAX_RANK];
    for (int d = 0; d < o->rank; d++) idx[d] = V(L, d);
    idx[a] = clamp(L, te_binary(L->te, TB_SUB, V(L, a), I(L, off)), len);
    Expr *v = load(L, n->in[j], idx);
    e = e ? te_select(L->te, te_binary(L->te, TB_LT, V(L, a), I(L, off + len)), v, e) : v;
  }
  return e ? e : te_const_i(L->te, o->dtype, 0);  /* every input empty: so is the output */
}

static Expr *pad(Lower *L, const Node *n) {
  const Tensor *x = tensor(L, n->in[0]), *o = tensor(L, n->out);
  TE *te = L->te;
  Expr *idx[KILN_MAX_RANK], *cond = NULL;
  for (int d = 0; d < x->rank; d++) {
    int64_t D = x->shape[d];
    Expr *p = te_binary(te, TB_SUB, V(L, d), I(L, n->attr.pads[d]));
    if (D == 0) return te_const_f(te, o->dtype, n->attr.value);  /* nothing to read */
    switch (n->attr.pad_mode) {
    case KILN_PAD_CONSTANT: cond = and_(L, cond, in_range(L, p, 0, D)); break;
    case KILN_PAD_REFLECT: {  /* -1 -> 1, D -> D-2 */
      p = te_select(te, te_binary(te, TB_LT, p, I(L, 0)), te_binary(te, TB_SUB, I(L, 0), p), p);
      p = te_select(te, te_binary(te, TB_GE, p, I(L, D)), te_binary(te, TB_SUB, I(L, 2 * (D - 1)), p), p);
      break;
    }
    case KILN_PAD_EDGE: break;
    }
    idx[d] = clamp(L, p, D);
  }
  Expr *v = load(L, n->in[0], idx);
  return cond ? te_select(te, cond, v, te_const_f(te, o->dtype, n->attr.value)) : v;
}

static Expr *tile(Lower *L, const Node *n) {
  const Tensor *x = tensor(L, n->in[0]);
  Expr *idx[KILN_MAX_RANK];
  for (int d = 0; d < x->rank; d++)
    idx[d] = x->shape[d] <= 1 ? I(L, 0) : te_binary(L->te, TB_MOD, V(L, d), I(L, x->shape[d]));
  return load(L, n->in[0], idx);
}

/* out = data[:axis] + indices.shape + data[axis+1:]; negative indices count from the end,
 * then the index is clamped so the read is always in range. */
static Expr *gather(Lower *L, const Node *n) {
  const Tensor *x = tensor(L, n->in[0]), *ix = tensor(L, n->in[1]);
  TE *te = L->te;
  int a = n->attr.axis;
  int64_t D = x->shape[a];
  Expr *ii[KILN_MAX_RANK], *idx[KILN_MAX_RANK];
  for (int j = 0; j < ix->rank; j++) ii[j] = V(L, a + j);
  Expr *v = te_cast(te, KILN_I64, load(L, n->in[1], ii));
  v = te_select(te, te_binary(te, TB_LT, v, I(L, 0)), add(L, v, I(L, D)), v);
  for (int d = 0; d < x->rank; d++) idx[d] = d < a ? V(L, d) : d == a ? clamp(L, v, D) : V(L, d - 1 + ix->rank);
  return load(L, n->in[0], idx);
}

/* Injective ops: one expression of the output index. */
static Expr *injective_body(Lower *L, const Node *n) {
  switch (n->op) {
  case OP_RESHAPE: return reshape(L, n);
  case OP_TRANSPOSE: return transpose(L, n);
  case OP_SLICE: return slice(L, n);
  case OP_CONCAT: return concat(L, n);
  case OP_PAD: return pad(L, n);
  case OP_EXPAND: return bcast_load(L, n->in[0], tensor(L, n->out)->rank);
  case OP_GATHER: return gather(L, n);
  case OP_TILE: return tile(L, n);
  default: return elementwise(L, n);
  }
}

/* ---- reductions and contractions ---- */

static ReduceOp reduce_op(OpKind op) {
  switch (op) {
  case OP_REDUCE_MAX: return RO_MAX;
  case OP_REDUCE_MIN: return RO_MIN;
  case OP_REDUCE_PROD: return RO_PROD;
  case OP_ARGMAX: return RO_ARGMAX;
  case OP_ARGMIN: return RO_ARGMIN;
  default: return RO_SUM;
  }
}

/* ---- a sum over rows of a value of each row, in two stages ----
 * A sum over (.., rows, j) whose body reads a reduction over j at its own row (a loss summed
 * over a batch of log-softmax rows reads each row's max and sum) is lowered as two stages:
 * the sum over j of each row, shaped as the row statistics are, then the sum of those over
 * the rows. The first has the row statistics' domain, so the planner puts it in the kernel
 * that holds the rows, and only one value a row leaves that kernel. As one stage over
 * (rows, j) it is a dependent kernel of its own, rereading the rows and whatever they were
 * computed from (a bias that a later kernel updates in place, so the two cannot share a
 * launch). The sum's order changes: rows first, then across them. */
typedef struct RowStat {
  const TE *te;
  int m, n_red;           /* the sum's output rank and reduce dims: vars 0..m-1, m..m+n_red-1 (j last) */
  const int64_t *ext;     /* each var's extent */
  const Expr *found;      /* the first load of a row statistic */
} RowStat;

/* load is T[u0, u1, .., 0]: T a reduction over j's extent alone whose last dim is 1; the u's
 * vars of the sum in increasing order, each with T's extent there, every leading reduce var
 * among them (the row), the others output vars (a kept dim, or the sum's own) */
static void row_stat_visit(const Expr *load, void *ctx) {
  RowStat *rs = ctx;
  const Stage *T = &rs->te->stages[load->src];
  int r = T->rank, last = rs->m + rs->n_red - 1;
  if (rs->found || T->kind != ST_REDUCE || T->n_red != 1 || T->red_shape[0] != rs->ext[last] || r < 2 ||
      T->shape[r - 1] != 1 || load->args[r - 1]->kind != EX_CONST || load->args[r - 1]->c.i != 0)
    return;
  int prev = -1, rows = 0;
  for (int d = 0; d < r - 1; d++) {
    const Expr *a = load->args[d];
    if (a->kind != EX_VAR || a->var <= prev || a->var >= last || T->shape[d] != rs->ext[a->var]) return;
    rows += a->var >= rs->m;
    prev = a->var;
  }
  if (rows == rs->n_red - 1) rs->found = load;
}

/* Node n's sum (out rank m, n_red reduce dims red, body over them) as the two stages above;
 * 0 when it does not read a row statistic (the caller lowers it as one), -1 out of memory. */
static int split_row_sum(Lower *L, const Node *n, Expr *body, int n_red, const int64_t *red) {
  TE *te = L->te;
  const Tensor *o = tensor(L, n->out);
  int m = o->rank, last = m + n_red - 1;
  if (n_red < 2 || last + 1 > KILN_MAX_RANK || red[n_red - 1] < 2 || !te_is_float(body)) return 0;
  int64_t ext[2 * KILN_MAX_RANK];
  for (int d = 0; d <= last; d++) ext[d] = d < m ? o->shape[d] : red[d - m];
  bool *inl = kiln_calloc((size_t)te->n_stages + 1, sizeof *inl);
  if (!inl) return -1;
  for (int s = 0; s < te->n_stages; s++) inl[s] = te->stages[s].kind == ST_INJECTIVE;
  Expr *flat = te_inline(te, body, inl, NULL, NULL, 0);
  kiln_free(inl);
  if (!flat) return -1;
  RowStat rs = { te, m, n_red, ext, NULL };
  te_visit_loads(flat, row_stat_visit, &rs);
  if (!rs.found) return 0;
  /* the rows' sums, shaped as the statistic T: var k its dim k (the sum's var u_k), var r - 1
   * its size-1 dim, var r the row's j; a var of the sum that T does not index must be one the
   * body leaves alone (a kept dim of extent 1), read as 0 */
  const Expr *T = rs.found;
  int r = T->n_args;
  const Stage *TS = &te->stages[T->src];
  Expr *map[2 * KILN_MAX_RANK];
  for (int v = 0; v < last; v++) map[v] = I(L, 0);
  for (int k = 0; k < r - 1; k++) map[T->args[k]->var] = V(L, k);
  map[last] = V(L, r);
  for (int v = 0; v < last; v++)
    if (map[v]->kind == EX_CONST && (te_uses_var(body, v) || ext[v] != 1)) return 0;
  Expr *b = te_substitute(te, body, map, last + 1);
  int rows = b ? emit_shaped(L, n, ST_REDUCE, body->dtype, r, TS->shape, b, 1, &ext[last], RO_SUM, 0, "rows") : -1;
  if (rows < 0) return -1;
  /* the sum over the rows reads them where T is read */
  Expr *at[KILN_MAX_RANK];
  for (int k = 0; k < r; k++) at[k] = T->args[k];
  Expr *sum = te_load(te, rows, r, at);
  return sum ? emit_reduce(L, n, sum, n_red - 1, red, RO_SUM, 0) : -1;
}

/* reduce_* and argmax/argmin: reduced input dims read reduce vars, the others output vars. */
static int lower_reduce(Lower *L, const Node *n) {
  const Tensor *x = tensor(L, n->in[0]), *o = tensor(L, n->out);
  bool arg = n->op == OP_ARGMAX || n->op == OP_ARGMIN;
  int n_axes = arg ? 1 : n->attr.n_axes;
  const int *axes = arg ? &n->attr.axis : n->attr.axes;
  Expr *idx[KILN_MAX_RANK];
  int64_t red[KILN_MAX_RANK];
  for (int d = 0, k = 0, od = 0; d < x->rank; d++) {
    if (k < n_axes && axes[k] == d) {
      red[k] = x->shape[d];
      idx[d] = V(L, o->rank + k++);
      if (n->attr.keepdims) od++;
    } else {
      idx[d] = V(L, od++);
    }
  }
  Expr *body = arith(L, load(L, n->in[0], idx));
  if (!body) return -1;
  if (L->row_sums && reduce_op(n->op) == RO_SUM && !arg) {
    int split = split_row_sum(L, n, body, n_axes, red);
    if (split != 0) return split;
  }
  return emit_reduce(L, n, body, n_axes, red, reduce_op(n->op), n->attr.select_last);
}

/* numpy.matmul: out = [batch.., M?, N?], reduce var k; 1-D operands have no M / N. */
static int lower_matmul(Lower *L, const Node *n) {
  const Tensor *a = tensor(L, n->in[0]), *b = tensor(L, n->in[1]), *o = tensor(L, n->out);
  int am = a->rank >= 2, bn = b->rank >= 2, nb = o->rank - am - bn, ro = o->rank;
  Expr *ai[KILN_MAX_RANK], *bi[KILN_MAX_RANK], *k = V(L, ro);
  int64_t K = a->shape[a->rank - 1];
  for (int d = 0; d < a->rank - 2; d++)
    ai[d] = a->shape[d] == 1 ? I(L, 0) : V(L, nb - (a->rank - 2) + d);
  for (int d = 0; d < b->rank - 2; d++)
    bi[d] = b->shape[d] == 1 ? I(L, 0) : V(L, nb - (b->rank - 2) + d);
  if (am) { ai[a->rank - 2] = V(L, nb); ai[a->rank - 1] = k; } else ai[0] = k;
  if (bn) { bi[b->rank - 2] = k; bi[b->rank - 1] = V(L, nb + am); } else bi[0] = k;
  Expr *body = mul(L, arith(L, load(L, n->in[0], ai)), arith(L, load(L, n->in[1], bi)));
  return body ? emit_reduce(L, n, body, 1, &K, RO_SUM, 0) : -1;
}

/* Spatial input position of output dim i (var 2+i) and kernel var kv:
 * o*stride - pad_begin + k*dilation. */
static Expr *window_pos(Lower *L, int i, Expr *kv, int64_t stride, int64_t pad_begin, int64_t dil) {
  Expr *p = mul(L, V(L, 2 + i), I(L, stride));
  p = te_binary(L->te, TB_SUB, p, I(L, pad_begin));
  return add(L, p, mul(L, kv, I(L, dil)));
}

/* conv: reduce over (c in group, kernel dims) of x[n, g*Cg + c, pos] * w[m, c, k]. */
static int lower_conv(Lower *L, const Node *n) {
  const Tensor *x = tensor(L, n->in[0]), *w = tensor(L, n->in[1]), *o = tensor(L, n->out);
  const kiln_conv_params *p = &n->attr.conv;
  int s = x->rank - 2, ro = o->rank;
  int64_t Cg = w->shape[1], Mg = w->shape[0] / (p->group ? p->group : 1), red[KILN_MAX_RANK];
  kiln_dtype at = arith_t(o->dtype);
  Expr *xi[KILN_MAX_RANK], *wi[KILN_MAX_RANK], *cond = NULL, *c = V(L, ro);
  red[0] = Cg;
  xi[0] = V(L, 0);
  xi[1] = add(L, mul(L, te_binary(L->te, TB_FLOORDIV, V(L, 1), I(L, Mg ? Mg : 1)), I(L, Cg)), c);
  wi[0] = V(L, 1);
  wi[1] = c;
  for (int i = 0; i < s; i++) {
    Expr *kv = V(L, ro + 1 + i);
    Expr *pos = window_pos(L, i, kv, p->strides[i], p->pads[i], p->dilations[i]);
    red[1 + i] = w->shape[2 + i];
    cond = and_(L, cond, in_range(L, pos, 0, x->shape[2 + i]));
    xi[2 + i] = clamp(L, pos, x->shape[2 + i]);
    wi[2 + i] = kv;
  }
  Expr *xv = te_select(L->te, cond, arith(L, load(L, n->in[0], xi)), te_const_i(L->te, at, 0));
  Expr *body = mul(L, xv, arith(L, load(L, n->in[1], wi)));
  return body ? emit_reduce(L, n, body, 1 + s, red, RO_SUM, 0) : -1;
}

/* The smallest value of dtype t: what max pooling pads with. */
static Expr *lowest(Lower *L, kiln_dtype t) {
  if (dtype_is_float(t)) return te_const_f(L->te, t, -INFINITY);
  if (!dtype_is_signed(t) || t == KILN_BOOL) return te_const_i(L->te, t, 0);
  return te_const_i(L->te, t, (int64_t)((uint64_t)-1 << (8 * kiln_dtype_size(t) - 1)));
}

/* Pools: x [N, C, spatial..]; reduce over the kernel window. Average pooling divides a
 * sum stage by the window count: a constant when no window touches padding, else a
 * second reduce counting the positions inside the counted region. */
static int lower_pool(Lower *L, const Node *n) {
  const Tensor *x = tensor(L, n->in[0]), *o = tensor(L, n->out);
  const kiln_pool_params *p = &n->attr.pool;
  TE *te = L->te;
  int s = x->rank - 2, ro = o->rank;
  bool avg = n->op == OP_AVG_POOL;
  kiln_dtype at = arith_t(o->dtype);
  Expr *xi[KILN_MAX_RANK], *cond = NULL, *ccond = NULL;
  int64_t red[KILN_MAX_RANK], window = 1;
  xi[0] = V(L, 0);
  xi[1] = V(L, 1);
  for (int i = 0; i < s; i++) {
    Expr *pos = window_pos(L, i, V(L, ro + i), p->strides[i], p->pads[i], p->dilations[i]);
    int64_t D = x->shape[2 + i];
    red[i] = p->kernel[i];
    window *= p->kernel[i];
    cond = and_(L, cond, in_range(L, pos, 0, D));
    ccond = and_(L, ccond, p->count_include_pad ? in_range(L, pos, -p->pads[i], D + p->pads[s + i])
                                                : in_range(L, pos, 0, D));
    xi[2 + i] = clamp(L, pos, D);
  }
  Expr *fill = avg ? te_const_i(te, at, 0) : lowest(L, at);
  Expr *body = te_select(te, cond, arith(L, load(L, n->in[0], xi)), fill);
  if (!body) return -1;
  if (!avg) return emit_reduce(L, n, body, s, red, RO_MAX, 0);
  int sum = emit(L, n, ST_REDUCE, at, body, s, red, RO_SUM, 0, "sum");
  if (sum < 0) return -1;
  int64_t lo[2 * KILN_MAX_RANK], hi[2 * KILN_MAX_RANK];
  for (int v = 0; v < ro; v++) { lo[v] = 0; hi[v] = o->shape[v] - 1; }
  for (int i = 0; i < s; i++) { lo[ro + i] = 0; hi[ro + i] = red[i] - 1; }
  ccond = te_simplify(te, ccond, lo, hi, ro + s);
  if (!ccond) return -1;
  Expr *count;
  if (ccond->kind == EX_CONST && ccond->c.i) {
    count = te_const_i(te, at, window);
  } else {
    int cs = emit(L, n, ST_REDUCE, at, te_select(te, ccond, te_const_i(te, at, 1), te_const_i(te, at, 0)), s,
                  red, RO_SUM, 0, "count");
    if (cs < 0) return -1;
    count = load_out(L, cs, ro);
  }
  Expr *q = te_cast(te, o->dtype, te_binary(te, TB_DIV, load_out(L, sum, ro), count));
  return q ? emit(L, n, ST_INJECTIVE, o->dtype, q, 0, NULL, RO_SUM, 0, NULL) : -1;
}

/* ---- strings: host ops ---- */

/* A string op: an opaque stage whose body only names what it reads (element 0 of each
 * operand), for the plan; ref runs the op on src[]. */
static int lower_string_op(Lower *L, const Node *n) {
  TE *te = L->te;
  Expr *body = NULL, *zero[KILN_MAX_RANK];
  for (int d = 0; d < KILN_MAX_RANK; d++) zero[d] = I(L, 0);
  for (int i = 0; i < n->n_in; i++) {
    Expr *x = load(L, n->in[i], zero);
    body = body ? te_binary(te, TB_EQ, body, x) : x;
  }
  StrAttr *str = n->attr.str ? str_attr_copy(&te->arena, n->attr.str) : NULL;
  if (!body || (n->attr.str && !str)) return -1;
  int id = emit(L, n, ST_OPAQUE, tensor(L, n->out)->dtype, body, 0, NULL, RO_SUM, 0, NULL);
  if (id < 0) return -1;
  te->stages[id].str = str;
  for (int i = 0; i < n->n_in; i++) te->stages[id].src[i] = stage_of(L, n->in[i]);
  return id;
}

/* A collective: an opaque stage (the planner gives it a boundary of its own, the runtime the
 * communicator's call) whose body is its operand at the same point, what it is in a group of one
 * rank (ref evaluates that). An operand that only moves a computed tensor of as many elements (a
 * weight gradient's reshape and transpose) commutes with the mean: the unmoved tensor is averaged
 * and the result moved, a move its readers compose into their index maps instead of one stored
 * before the call. */
static int lower_collective(Lower *L, const Node *n) {
  TE *te = L->te;
  int s = stage_of(L, n->in[0]);
  const Stage *S = &te->stages[s];
  const Expr *b = S->kind == ST_INJECTIVE ? S->body : NULL;  /* S at the output's point, through its moves */
  for (const Stage *X; b && b->kind == EX_LOAD && (X = &te->stages[b->src])->kind == ST_INJECTIVE && X->body &&
                       X->body->kind == EX_LOAD && X->numel == S->numel && X->dtype == S->dtype;)
    b = te_substitute(te, X->body, b->args, X->rank);
  if (b && b->kind == EX_LOAD) {
    const Stage *Y = &te->stages[b->src];
    if ((Y->kind == ST_INJECTIVE || Y->kind == ST_REDUCE) && Y->numel == S->numel && Y->dtype == S->dtype) {
      int y = Y->id, rank = Y->rank;  /* emitting may move the stages: S and Y are not read after it */
      kiln_dtype dt = Y->dtype;
      int64_t shape[KILN_MAX_RANK];
      memcpy(shape, Y->shape, sizeof shape);
      int c = emit_shaped(L, n, ST_OPAQUE, dt, rank, shape, load_out(L, y, rank), 0, NULL, RO_SUM, 0, "unmoved");
      if (c < 0) return -1;
      te->stages[c].src[0] = y;
      Expr *moved = te_load(te, c, b->n_args, b->args);
      return moved ? emit(L, n, ST_INJECTIVE, dt, moved, 0, NULL, RO_SUM, 0, NULL) : -1;
    }
  }
  int id = emit(L, n, ST_OPAQUE, tensor(L, n->out)->dtype, load_out(L, s, S->rank), 0, NULL, RO_SUM, 0, NULL);
  if (id >= 0) te->stages[id].src[0] = s;
  return id;
}

/* Strings live on the host: a stage of strings, or one reading strings, is opaque. */
static bool touches_strings(Lower *L, const Node *n) {
  bool s = tensor(L, n->out)->dtype == KILN_STRING;
  for (int i = 0; i < n->n_in; i++) s |= tensor(L, n->in[i])->dtype == KILN_STRING;
  return s;
}

/* ---- driver ---- */

static kiln_status lower_node(Lower *L, const Node *n) {
  int id;
  switch (n->op) {
  case OP_REDUCE_SUM: case OP_REDUCE_MAX: case OP_REDUCE_MIN: case OP_REDUCE_PROD:
  case OP_ARGMAX: case OP_ARGMIN:
    id = lower_reduce(L, n);
    break;
  case OP_MATMUL: id = lower_matmul(L, n); break;
  case OP_CONV: id = lower_conv(L, n); break;
  case OP_MAX_POOL: case OP_AVG_POOL: id = lower_pool(L, n); break;
  case OP_STR_NORMALIZE: case OP_STR_CONCAT: case OP_REGEX_MATCH: case OP_LABEL_ENCODE:
    id = lower_string_op(L, n);
    break;
  case OP_ALL_REDUCE_MEAN: id = lower_collective(L, n); break;
  default: {
    if (op_expr_kind[n->op] != EXPR_INJ) return node_fail(n, KILN_ERR_UNSUPPORTED, "no lowering for this op");
    Expr *body = injective_body(L, n);
    StageKind k = touches_strings(L, n) ? ST_OPAQUE : ST_INJECTIVE;
    id = body ? emit(L, n, k, tensor(L, n->out)->dtype, body, 0, NULL, RO_SUM, 0, NULL) : -1;
    break;
  }
  }
  if (id < 0) return node_fail(n, KILN_ERR_NO_MEMORY, "out of memory while lowering");
  L->te->tensor_stage[n->out] = id;
  return KILN_OK;
}

static kiln_status lower_source(Lower *L, const Tensor *t) {
  TE *te = L->te;
  static const StageKind kinds[] = { [T_INPUT] = ST_INPUT, [T_PARAM] = ST_PARAM, [T_CONST] = ST_CONST };
  Stage s = { .kind = kinds[t->kind], .dtype = t->dtype, .rank = t->rank, .numel = t->numel,
              .tensor = t->id, .op = (OpKind)-1, .name = arena_strdup(&te->arena, t->name) };
  memcpy(s.shape, t->shape, sizeof s.shape);
  if (!s.name) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory lowering tensor '%s'", t->name);
  if (t->kind != T_INPUT) {
    int64_t bytes;
    if (!size_mul(t->numel, (int64_t)kiln_dtype_size(t->dtype), &bytes))
      return kiln_fail(KILN_ERR_NO_MEMORY, "tensor '%s' is too large", t->name);
    void *d = t->dtype == KILN_STRING && t->numel ? (void *)arena_strings(&te->arena, t->data, t->numel)
                                                  : arena_alloc(&te->arena, (size_t)bytes);
    if (!d) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory copying tensor '%s'", t->name);
    if (bytes && t->dtype != KILN_STRING) memcpy(d, t->data, (size_t)bytes);
    s.data = d;
  }
  int id = te_add_stage(te, &s);
  if (id < 0) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory lowering tensor '%s'", t->name);
  te->tensor_stage[t->id] = id;
  if (t->kind == T_INPUT) te->inputs[te->n_inputs++] = id;
  return KILN_OK;
}

/* Outputs, their names and assigns, as stage ids. */
static kiln_status lower_interface(Lower *L) {
  TE *te = L->te;
  const Graph *g = L->g;
  te->outputs = arena_alloc(&te->arena, sizeof(int) * (size_t)(g->n_outputs + 1));
  te->output_names = arena_alloc(&te->arena, sizeof(char *) * (size_t)(g->n_outputs + 1));
  te->assigns = arena_alloc(&te->arena, sizeof(Assign) * (size_t)(g->n_assigns + 1));
  if (!te->outputs || !te->output_names || !te->assigns) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory");
  for (int i = 0; i < g->n_outputs; i++) {
    te->outputs[i] = te->tensor_stage[g->outputs[i].tensor];
    te->output_names[i] = arena_strdup(&te->arena, g->outputs[i].name);
    if (!te->output_names[i]) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory");
  }
  te->n_outputs = g->n_outputs;
  for (int i = 0; i < g->n_assigns; i++)
    te->assigns[i] = (Assign){ te->tensor_stage[g->assigns[i].param], te->tensor_stage[g->assigns[i].value] };
  te->n_assigns = g->n_assigns;
  return KILN_OK;
}

kiln_status te_lower(const Graph *g, TE **out) { return te_lower_split(g, 1, out); }

kiln_status te_lower_split(const Graph *g, int row_sums, TE **out) {
  *out = NULL;
  TE *te = kiln_calloc(1, sizeof *te);
  if (!te) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory");
  Lower L = { te, g, row_sums };
  te->n_tensors = g->n_tensors;
  te->tensor_stage = arena_alloc(&te->arena, sizeof(int) * (size_t)(g->n_tensors + 1));
  te->inputs = arena_alloc(&te->arena, sizeof(int) * (size_t)(g->n_tensors + 1));
  kiln_status st = te->tensor_stage && te->inputs ? KILN_OK : kiln_fail(KILN_ERR_NO_MEMORY, "out of memory");
  for (int t = 0; st == KILN_OK && t < g->n_tensors; t++) {
    const Tensor *x = &g->tensors[t];
    st = x->kind == T_VALUE ? lower_node(&L, &g->nodes[x->node]) : lower_source(&L, x);
  }
  if (st == KILN_OK) st = lower_interface(&L);
  if (st != KILN_OK) {
    te_free(te);
    return st;
  }
  *out = te;
  return KILN_OK;
}
