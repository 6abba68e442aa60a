/*
 * fold.c — constant folding on the host, for the shape arithmetic ONNX models carry
 * (Shape -> Gather -> Concat -> Reshape, Cast, Range bounds, Equal/Where on shapes).
 *
 * Takes the graph and a tensor just produced by the last node. When every input of
 * that node is a constant and the result is small, it evaluates the node here, in
 * plain C over doubles (floats) and int64 (integers), turns the tensor into a T_CONST
 * and drops the node. The graph stage comes before te and never calls the runtime, so
 * this is a small evaluator of its own, but its scalar semantics are not: integer
 * division by zero, INT64_MIN / -1, Python mod, shifts out of range, integer pow, NaN
 * in max/min, sign, sigmoid and the saturating float->int cast are the helpers of
 * base/scalar.h that te_eval_* and the generated code use, so a folded constant is what
 * the program would have computed. It leaves alone what it does not know (that node
 * simply runs in the compiled program), so folding is an optimisation, never a
 * requirement.
 * Requires: the node is the last one added. Keeps: topological order.
 */
#include "graph.h"
#include "../base/scalar.h"

#include <math.h>
#include <string.h>

#define FOLD_LIMIT 65536  /* elements: larger constant expressions are left to the program */

/* Multi-index of linear index i in shape. */
static void unravel(int64_t i, int rank, const int64_t *shape, int64_t *idx) {
  for (int r = rank - 1; r >= 0; r--) {
    idx[r] = shape[r] ? i % shape[r] : 0;
    i = shape[r] ? i / shape[r] : 0;
  }
}

static int64_t ravel(int rank, const int64_t *shape, const int64_t *idx) {
  int64_t i = 0;
  for (int r = 0; r < rank; r++) i = i * shape[r] + idx[r];
  return i;
}

/* Linear index into t of output multi-index idx (rank orank), NumPy broadcasting. */
static int64_t bcast(const Tensor *t, int orank, const int64_t *idx) {
  int64_t i = 0;
  for (int r = 0; r < t->rank; r++) {
    int64_t d = t->shape[r], k = idx[orank - t->rank + r];
    i = i * d + (d == 1 ? 0 : k);
  }
  return i;
}

static bool fold_unary_f(OpKind op, double x, double *y) {
  switch (op) {
  case OP_NEG: *y = -x; return true;
  case OP_ABS: *y = fabs(x); return true;
  case OP_EXP: *y = exp(x); return true;
  case OP_LOG: *y = log(x); return true;
  case OP_SQRT: *y = sqrt(x); return true;
  case OP_RSQRT: *y = 1 / sqrt(x); return true;
  case OP_RECIPROCAL: *y = 1 / x; return true;
  case OP_TANH: *y = tanh(x); return true;
  case OP_SIGMOID: *y = k_sigd(x); return true;
  case OP_RELU: *y = k_maxd(x, 0); return true;  /* max(x, 0), as lowered: NaN stays NaN */
  case OP_ERF: *y = erf(x); return true;
  case OP_SIN: *y = sin(x); return true;
  case OP_COS: *y = cos(x); return true;
  case OP_FLOOR: *y = floor(x); return true;
  case OP_CEIL: *y = ceil(x); return true;
  case OP_ROUND: *y = nearbyint(x); return true;
  case OP_SIGN: *y = k_signd(x); return true;
  case OP_ISNAN: *y = isnan(x); return true;
  case OP_ISINF: *y = isinf(x); return true;
  default: return false;
  }
}

static bool fold_unary_i(OpKind op, kiln_dtype t, int64_t x, int64_t *y) {
  switch (op) {
  case OP_NEG: *y = (int64_t)(0 - (uint64_t)x); return true;
  case OP_ABS: *y = x < 0 ? (int64_t)(0 - (uint64_t)x) : x; return true;
  case OP_RELU: *y = x > 0 ? x : 0; return true;
  case OP_SIGN: *y = x > 0 ? 1 : x < 0 ? -1 : 0; return true;
  case OP_NOT: *y = t == KILN_BOOL ? !x : ~x; return true;
  default: return false;
  }
}

static bool fold_binary_f(OpKind op, double a, double b, double *y) {
  switch (op) {
  case OP_ADD: *y = a + b; return true;
  case OP_SUB: *y = a - b; return true;
  case OP_MUL: *y = a * b; return true;
  case OP_DIV: *y = a / b; return true;
  case OP_POW: *y = pow(a, b); return true;
  case OP_MAX: *y = k_maxd(a, b); return true;
  case OP_MIN: *y = k_mind(a, b); return true;
  case OP_MOD: *y = k_modd(a, b); return true;
  case OP_FMOD: *y = fmod(a, b); return true;
  case OP_EQ: *y = a == b; return true;
  case OP_NE: *y = a != b; return true;
  case OP_LT: *y = a < b; return true;
  case OP_LE: *y = a <= b; return true;
  case OP_GT: *y = a > b; return true;
  case OP_GE: *y = a >= b; return true;
  default: return false;
  }
}

/* Integer arithmetic in 64 bits, wrapping like the generated code, stored back into
 * the dtype; u is an unsigned dtype (u8..u32: values are non-negative here). */
static bool fold_binary_i(OpKind op, bool u, int64_t a, int64_t b, int64_t *y) {
  uint64_t ua = (uint64_t)a, ub = (uint64_t)b;
  switch (op) {
  case OP_ADD: *y = (int64_t)(ua + ub); return true;
  case OP_SUB: *y = (int64_t)(ua - ub); return true;
  case OP_MUL: *y = (int64_t)(ua * ub); return true;
  case OP_DIV: *y = u ? (int64_t)k_udiv(ua, ub) : k_sdiv(a, b); return true;
  case OP_MOD: *y = u ? (int64_t)k_umod(ua, ub) : k_smod(a, b); return true;
  case OP_FMOD: *y = u ? (int64_t)k_umod(ua, ub) : k_sfmod(a, b); return true;
  case OP_POW: *y = u ? (int64_t)k_upow(ua, ub) : k_spow(a, b); return true;
  case OP_SHL: *y = u ? (int64_t)k_ushl(ua, ub) : k_sshl(a, b); return true;
  case OP_SHR: *y = u ? (int64_t)k_ushr(ua, ub) : k_sshr(a, b); return true;
  case OP_MAX: *y = a > b ? a : b; return true;
  case OP_MIN: *y = a < b ? a : b; return true;
  case OP_EQ: *y = a == b; return true;
  case OP_NE: *y = a != b; return true;
  case OP_LT: *y = a < b; return true;
  case OP_LE: *y = a <= b; return true;
  case OP_GT: *y = a > b; return true;
  case OP_GE: *y = a >= b; return true;
  /* bitwise: on bool's 0/1 the same as logical; on sign-extended ints it stays in the dtype */
  case OP_AND: *y = a & b; return true;
  case OP_OR: *y = a | b; return true;
  case OP_XOR: *y = a ^ b; return true;
  default: return false;
  }
}

/* Elementwise ops: unary, binary, where, cast. */
static bool fold_elementwise(const Graph *g, const Node *n, const Tensor *y, void *out) {
  const Tensor *a = &g->tensors[n->in[0]];
  const Tensor *b = n->n_in > 1 ? &g->tensors[n->in[1]] : NULL;
  const Tensor *c = n->n_in > 2 ? &g->tensors[n->in[2]] : NULL;
  kiln_dtype t = a->dtype;
  if (t == KILN_U64 || y->dtype == KILN_U64) return false;  /* beyond int64: leave it to the program */
  int64_t idx[KILN_MAX_RANK];
  for (int64_t o = 0; o < y->numel; o++) {
    unravel(o, y->rank, y->shape, idx);
    int64_t ia = bcast(a, y->rank, idx);
    if (n->op == OP_CAST) {
      if (dtype_is_float(t) && !dtype_is_float(y->dtype))
        dtype_store_i64(y->dtype, out, o, scalar_f2int(y->dtype, dtype_load_f64(t, a->data, ia)));
      else if (dtype_is_float(t)) dtype_store_f64(y->dtype, out, o, dtype_load_f64(t, a->data, ia));
      else if (dtype_is_float(y->dtype)) dtype_store_f64(y->dtype, out, o, (double)dtype_load_i64(t, a->data, ia));
      else dtype_store_i64(y->dtype, out, o, dtype_load_i64(t, a->data, ia));
    } else if (n->op == OP_WHERE) {
      int64_t ib = bcast(b, y->rank, idx), ic = bcast(c, y->rank, idx);
      bool cond = dtype_load_i64(a->dtype, a->data, ia) != 0;
      size_t es = kiln_dtype_size(y->dtype);
      memcpy((char *)out + o * (int64_t)es, (const char *)(cond ? b : c)->data + (cond ? ib : ic) * (int64_t)es, es);
    } else if (n->n_in == 1) {
      if (dtype_is_float(t)) {
        double v;
        if (!fold_unary_f(n->op, dtype_load_f64(t, a->data, ia), &v)) return false;
        dtype_store_f64(y->dtype, out, o, v);
      } else {
        int64_t v;
        if (!fold_unary_i(n->op, t, dtype_load_i64(t, a->data, ia), &v)) return false;
        dtype_store_i64(y->dtype, out, o, v);
      }
    } else {
      int64_t ib = bcast(b, y->rank, idx);
      if (dtype_is_float(t)) {
        double v;
        if (!fold_binary_f(n->op, dtype_load_f64(t, a->data, ia), dtype_load_f64(t, b->data, ib), &v)) return false;
        dtype_store_f64(y->dtype, out, o, v);
      } else {
        int64_t v;
        bool u = dtype_is_int(t) && !dtype_is_signed(t);
        if (!fold_binary_i(n->op, u, dtype_load_i64(t, a->data, ia), dtype_load_i64(t, b->data, ib), &v)) return false;
        dtype_store_i64(y->dtype, out, o, v);
      }
    }
  }
  return true;
}

/* Movement ops copy elements: the source element of each output element. */
static bool source_of(const Graph *g, const Node *n, const Tensor *y, const int64_t *idx, int *which, int64_t *src) {
  const Attr *a = &n->attr;
  const Tensor *x = &g->tensors[n->in[0]];
  int64_t j[KILN_MAX_RANK];
  *which = 0;
  switch (n->op) {
  case OP_RESHAPE: *src = ravel(y->rank, y->shape, idx); return true;
  case OP_EXPAND: *src = bcast(x, y->rank, idx); return true;
  case OP_TRANSPOSE:
    for (int r = 0; r < y->rank; r++) j[a->perm[r]] = idx[r];
    break;
  case OP_SLICE:
    for (int r = 0; r < y->rank; r++) j[r] = a->starts[r] + idx[r] * a->steps[r];
    break;
  case OP_TILE:
    for (int r = 0; r < y->rank; r++) j[r] = idx[r] % x->shape[r];
    break;
  case OP_CONCAT: {
    int64_t k = idx[a->axis];
    int w = 0;
    while (w < n->n_in && k >= g->tensors[n->in[w]].shape[a->axis]) k -= g->tensors[n->in[w++]].shape[a->axis];
    if (w == n->n_in) return false;
    x = &g->tensors[n->in[w]];
    memcpy(j, idx, sizeof(int64_t) * (size_t)y->rank);
    j[a->axis] = k;
    *which = w;
    break;
  }
  case OP_GATHER: {
    const Tensor *ind = &g->tensors[n->in[1]];
    int64_t ii[KILN_MAX_RANK];
    for (int r = 0; r < ind->rank; r++) ii[r] = idx[a->axis + r];
    int64_t v = dtype_load_i64(ind->dtype, ind->data, ravel(ind->rank, ind->shape, ii)), d = x->shape[a->axis];
    if (v < 0) v += d;
    if (v < 0 || v >= d) return false;
    for (int r = 0; r < a->axis; r++) j[r] = idx[r];
    j[a->axis] = v;
    for (int r = a->axis + 1; r < x->rank; r++) j[r] = idx[r - 1 + ind->rank];
    break;
  }
  case OP_PAD:
    for (int r = 0; r < y->rank; r++) {
      int64_t d = x->shape[r], k = idx[r] - a->pads[r];
      if (k < 0 || k >= d) {
        if (a->pad_mode == KILN_PAD_CONSTANT || d == 0) { *which = -1; return true; }
        if (a->pad_mode == KILN_PAD_EDGE) k = k < 0 ? 0 : d - 1;
        else {  /* reflect, without repeating the edge */
          int64_t p = d > 1 ? 2 * (d - 1) : 1;
          k = ((k % p) + p) % p;
          if (k >= d) k = p - k;
        }
      }
      j[r] = k;
    }
    break;
  default: return false;
  }
  *src = ravel(x->rank, x->shape, j);
  return true;
}

static bool fold_movement(const Graph *g, const Node *n, const Tensor *y, void *out) {
  size_t es = kiln_dtype_size(y->dtype);
  int64_t idx[KILN_MAX_RANK], src;
  int which;
  for (int64_t o = 0; o < y->numel; o++) {
    unravel(o, y->rank, y->shape, idx);
    if (!source_of(g, n, y, idx, &which, &src)) return false;
    if (which < 0) dtype_store_f64(y->dtype, out, o, n->attr.value);
    else memcpy((char *)out + o * (int64_t)es, (const char *)g->tensors[n->in[which]].data + src * (int64_t)es, es);
  }
  return true;
}

/* Sum, max, min, prod over the reduced axes (doubles for floats, int64 for ints). */
static bool fold_reduce(const Graph *g, const Node *n, const Tensor *y, void *out) {
  const Tensor *x = &g->tensors[n->in[0]];
  if (x->dtype == KILN_U64 || x->numel > FOLD_LIMIT) return false;
  bool red[KILN_MAX_RANK] = { false }, fl = dtype_is_float(x->dtype);
  for (int i = 0; i < n->attr.n_axes; i++) red[n->attr.axes[i]] = true;
  double *acc = kiln_malloc(sizeof(double) * (size_t)(y->numel + 1));
  int64_t *iacc = kiln_malloc(sizeof(int64_t) * (size_t)(y->numel + 1));
  if (!acc || !iacc) { kiln_free(acc); kiln_free(iacc); return false; }
  double init = n->op == OP_REDUCE_SUM ? 0 : n->op == OP_REDUCE_PROD ? 1 : n->op == OP_REDUCE_MAX ? -INFINITY : INFINITY;
  int64_t iinit = n->op == OP_REDUCE_SUM ? 0 : n->op == OP_REDUCE_PROD ? 1 : n->op == OP_REDUCE_MAX ? INT64_MIN : INT64_MAX;
  for (int64_t o = 0; o < y->numel; o++) acc[o] = init, iacc[o] = iinit;
  int64_t idx[KILN_MAX_RANK], oi[KILN_MAX_RANK];
  int64_t kshape[KILN_MAX_RANK];  /* output shape with kept dims */
  for (int r = 0; r < x->rank; r++) kshape[r] = red[r] ? 1 : x->shape[r];
  for (int64_t i = 0; i < x->numel; i++) {
    unravel(i, x->rank, x->shape, idx);
    for (int r = 0; r < x->rank; r++) oi[r] = red[r] ? 0 : idx[r];
    int64_t o = ravel(x->rank, kshape, oi);
    if (fl) {
      double v = dtype_load_f64(x->dtype, x->data, i);
      switch (n->op) {
      case OP_REDUCE_SUM: acc[o] += v; break;
      case OP_REDUCE_PROD: acc[o] *= v; break;
      case OP_REDUCE_MAX: acc[o] = isnan(v) || v > acc[o] ? v : acc[o]; break;
      default: acc[o] = isnan(v) || v < acc[o] ? v : acc[o]; break;
      }
    } else {
      int64_t v = dtype_load_i64(x->dtype, x->data, i);
      switch (n->op) {
      case OP_REDUCE_SUM: iacc[o] = (int64_t)((uint64_t)iacc[o] + (uint64_t)v); break;
      case OP_REDUCE_PROD: iacc[o] = (int64_t)((uint64_t)iacc[o] * (uint64_t)v); break;
      case OP_REDUCE_MAX: iacc[o] = v > iacc[o] ? v : iacc[o]; break;
      default: iacc[o] = v < iacc[o] ? v : iacc[o]; break;
      }
    }
  }
  for (int64_t o = 0; o < y->numel; o++) {
    if (fl) dtype_store_f64(y->dtype, out, o, acc[o]);
    else dtype_store_i64(y->dtype, out, o, iacc[o]);
  }
  kiln_free(acc);
  kiln_free(iacc);
  return true;
}

kiln_status graph_fold(Graph *g, int t) {
  if (t < 0 || t >= g->n_tensors) return kiln_fail(KILN_ERR_INVALID_ARG, "graph_fold: tensor %d is not in the graph", t);
  Tensor *y = &g->tensors[t];
  if (y->kind != T_VALUE || y->node != g->n_nodes - 1 || y->numel > FOLD_LIMIT) return KILN_OK;
  const Node *n = &g->nodes[y->node];
  bool strings = y->dtype == KILN_STRING;
  for (int i = 0; i < n->n_in; i++) {
    if (g->tensors[n->in[i]].kind != T_CONST) return KILN_OK;
    strings |= g->tensors[n->in[i]].dtype == KILN_STRING;
  }
  /* String movement copies pointers into the graph arena; string ops run in the program. */
  if (strings && !(n->op >= OP_RESHAPE && n->op <= OP_TILE)) return KILN_OK;
  size_t bytes = (size_t)y->numel * kiln_dtype_size(y->dtype);
  void *out = arena_alloc(&g->arena, bytes ? bytes : 1);
  if (!out) return graph_node_error(g, n->op, KILN_ERR_NO_MEMORY, "out of memory while folding");
  bool ok;
  if (n->op <= OP_CAST) ok = fold_elementwise(g, n, y, out);
  else if (n->op >= OP_RESHAPE && n->op <= OP_TILE) ok = fold_movement(g, n, y, out);
  else if (n->op >= OP_REDUCE_SUM && n->op <= OP_REDUCE_PROD) ok = fold_reduce(g, n, y, out);
  else ok = false;
  if (!ok) return KILN_OK;  /* not foldable here: it runs in the program */
  y->kind = T_CONST;
  y->data = out;
  y->node = -1;
  g->n_nodes--;
  return KILN_OK;
}
