/*
 * compose.c — compositions built only from primitive ops (ops.def), so every later
 * stage sees through them: scalars, reductions beyond the four primitive ones
 * (mean, sum of squares, L1, L2, log-sum-exp), softmax and log-softmax,
 * layernorm, and inference batchnorm.
 *
 * Takes tensor ids of a graph and plain parameters (axes may be negative here;
 * they are normalised), adds the primitive nodes with graph_add, and hands back
 * the id of the result. Any failure rolls the graph back to where it was, so a
 * failed composition adds nothing.
 *
 * Integer means: the sum divided by the count with a truncating integer DIV (as
 * ONNX ReduceMean does on ints); an integer mean over zero elements is an error.
 * Float means multiply the sum by 1/n, so a mean over zero elements is NaN (0 * inf),
 * as numpy gives.
 */
#include "graph.h"

#include <math.h>
#include <string.h>

static const char *const reduce_names[KILN_REDUCE_COUNT] = {
  "reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod",
  "reduce_sum_square", "reduce_l1", "reduce_l2", "reduce_log_sum_exp",
};
_Static_assert(KILN_REDUCE_COUNT == 9, "update reduce_names and graph_reduce");

/* "node 'NAME' (what): message", NAME being g->node_name or what. */
static kiln_status comp_fail(const Graph *g, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static kiln_status comp_fail(const Graph *g, const char *what, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return kiln_fail(KILN_ERR_INVALID_ARG, "node '%s' (%s): %s", g->node_name ? g->node_name : what, what, msg);
}

static bool valid_t(const Graph *g, int x) { return x >= 0 && x < g->n_tensors; }

static const Tensor *T(const Graph *g, int x) { return &g->tensors[x]; }

static void rollback(Graph *g, int n_tensors, int n_nodes) {
  g->n_tensors = n_tensors;
  g->n_nodes = n_nodes;
}

/* ---- one primitive each ---- */

static kiln_status un(Graph *g, OpKind op, int x, int *out) { return graph_add(g, op, 1, &x, NULL, out); }

static kiln_status bin(Graph *g, OpKind op, int a, int b, int *out) {
  int in[2] = { a, b };
  return graph_add(g, op, 2, in, NULL, out);
}

/* axes: sorted, unique, >= 0, at least one */
static kiln_status red(Graph *g, OpKind op, int x, int n, const int *axes, int keepdims, int *out) {
  Attr a = { 0 };
  a.n_axes = n;
  memcpy(a.axes, axes, sizeof(int) * (size_t)n);
  a.keepdims = keepdims;
  return graph_add(g, op, 1, &x, &a, out);
}

static kiln_status reshape(Graph *g, int x, int rank, const int64_t *shape, int *out) {
  Attr a = { 0 };
  a.shape_rank = rank;
  memcpy(a.shape, shape, sizeof(int64_t) * (size_t)rank);
  return graph_add(g, OP_RESHAPE, 1, &x, &a, out);
}

kiln_status graph_scalar(Graph *g, kiln_dtype t, double v, int *out) {
  if (!dtype_valid((int)t)) return kiln_fail(KILN_ERR_INVALID_ARG, "scalar: dtype %d is not a kiln_dtype", (int)t);
  unsigned char buf[8];
  dtype_store_f64(t, buf, 0, v);
  return graph_leaf(g, T_CONST, NULL, t, 0, NULL, buf, out);
}

/* ---- reductions ---- */

/* Sorts and checks axes (negative count from the end); n == 0 means every axis. */
static kiln_status norm_axes(const Graph *g, const char *what, const Tensor *x, int n, const int *axes, int *out,
                             int *n_out) {
  if (n < 0 || n > KILN_MAX_RANK) return comp_fail(g, what, "%d axes", n);
  if (n > 0 && !axes) return comp_fail(g, what, "axes is NULL");
  bool red[KILN_MAX_RANK] = { false };
  for (int i = 0; i < n; i++) {
    int a = axes[i];
    if (a < -x->rank || a >= x->rank)
      return comp_fail(g, what, "axis %d is out of range for '%s' of rank %d", a, x->name, x->rank);
    if (a < 0) a += x->rank;
    if (red[a]) return comp_fail(g, what, "axis %d appears twice", a);
    red[a] = true;
  }
  *n_out = 0;
  for (int r = 0; r < x->rank; r++)
    if (red[r] || n == 0) out[(*n_out)++] = r;
  return KILN_OK;
}

/* The reduction itself, on normalised axes (n >= 1). Keeps dims throughout where a
 * later broadcast needs them, and drops them at the end if asked. */
static kiln_status reduce_body(Graph *g, kiln_reduce_op op, int x, int n, const int *axes, int keepdims, int *out) {
  const Tensor *t = T(g, x);
  kiln_dtype dt = t->dtype;
  bool fl = dtype_is_float(dt);
  kiln_status s;
  int a, b, c, d, e;
  switch (op) {
  case KILN_REDUCE_SUM: return red(g, OP_REDUCE_SUM, x, n, axes, keepdims, out);
  case KILN_REDUCE_MAX: return red(g, OP_REDUCE_MAX, x, n, axes, keepdims, out);
  case KILN_REDUCE_MIN: return red(g, OP_REDUCE_MIN, x, n, axes, keepdims, out);
  case KILN_REDUCE_PROD: return red(g, OP_REDUCE_PROD, x, n, axes, keepdims, out);
  case KILN_REDUCE_MEAN: {
    int64_t count = 1;
    for (int i = 0; i < n; i++)
      if (!size_mul(count, t->shape[axes[i]], &count))
        return comp_fail(g, reduce_names[op], "the count of reduced elements of '%s' overflows", t->name);
    if (!fl && count == 0)
      return comp_fail(g, reduce_names[op], "integer mean of '%s' over zero elements", t->name);
    if ((s = red(g, OP_REDUCE_SUM, x, n, axes, keepdims, &a))) return s;
    if (fl) {
      if ((s = graph_scalar(g, dt, 1.0 / (double)count, &b))) return s;
      return bin(g, OP_MUL, a, b, out);
    }
    if ((s = graph_scalar(g, dt, (double)count, &b))) return s;
    return bin(g, OP_DIV, a, b, out);
  }
  case KILN_REDUCE_SUM_SQUARE:
    if ((s = bin(g, OP_MUL, x, x, &a))) return s;
    return red(g, OP_REDUCE_SUM, a, n, axes, keepdims, out);
  case KILN_REDUCE_L1:
    if ((s = un(g, OP_ABS, x, &a))) return s;
    return red(g, OP_REDUCE_SUM, a, n, axes, keepdims, out);
  case KILN_REDUCE_L2:
    if (!fl) return comp_fail(g, reduce_names[op], "'%s' has dtype %s, expected a float dtype", t->name,
                              kiln_dtype_name(dt));
    if ((s = bin(g, OP_MUL, x, x, &a)) || (s = red(g, OP_REDUCE_SUM, a, n, axes, keepdims, &b))) return s;
    return un(g, OP_SQRT, b, out);
  case KILN_REDUCE_LOG_SUM_EXP: {
    if (!fl) return comp_fail(g, reduce_names[op], "'%s' has dtype %s, expected a float dtype", t->name,
                              kiln_dtype_name(dt));
    /* log(sum(exp(x - m))) + m with m the max; an infinite m (all -inf, or an empty
     * reduction) is replaced by 0 so the result is -inf / inf instead of NaN. */
    int m, inf, zero, ms;
    int64_t oshape[KILN_MAX_RANK];
    int orank = 0;
    for (int r = 0, i = 0; r < t->rank; r++) {
      if (i < n && axes[i] == r) { i++; continue; }
      oshape[orank++] = t->shape[r];
    }
    if ((s = red(g, OP_REDUCE_MAX, x, n, axes, 1, &m)) || (s = un(g, OP_ISINF, m, &inf)) ||
        (s = graph_scalar(g, dt, 0.0, &zero)))
      return s;
    int win[3] = { inf, zero, m };
    if ((s = graph_add(g, OP_WHERE, 3, win, NULL, &ms))) return s;
    if ((s = bin(g, OP_SUB, x, ms, &a)) || (s = un(g, OP_EXP, a, &b)) ||
        (s = red(g, OP_REDUCE_SUM, b, n, axes, 1, &c)) || (s = un(g, OP_LOG, c, &d)) ||
        (s = bin(g, OP_ADD, d, ms, &e)))
      return s;
    if (keepdims) {
      *out = e;
      return KILN_OK;
    }
    return reshape(g, e, orank, oshape, out);
  }
  case KILN_REDUCE_COUNT: break;
  }
  return comp_fail(g, "reduce", "op %d is not a kiln_reduce_op", (int)op);
}

kiln_status graph_reduce(Graph *g, kiln_reduce_op op, int x, int n_axes, const int *axes, int keepdims, int *out) {
  if ((unsigned)op >= KILN_REDUCE_COUNT) return comp_fail(g, "reduce", "op %d is not a kiln_reduce_op", (int)op);
  const char *what = reduce_names[op];
  if (!valid_t(g, x)) return comp_fail(g, what, "input %d is not a tensor of this graph", x);
  const Tensor *t = T(g, x);
  if (t->dtype == KILN_BOOL) return comp_fail(g, what, "'%s' is bool; reductions need a numeric dtype", t->name);
  int ax[KILN_MAX_RANK], n = 0;
  kiln_status s = norm_axes(g, what, t, n_axes, axes, ax, &n);
  if (s) return s;
  int nt = g->n_tensors, nn = g->n_nodes;
  int src = x;
  if (t->rank == 0) { /* a scalar: reduce a one-element vector to rank 0 */
    int64_t one = 1;
    if ((s = reshape(g, x, 1, &one, &src))) return s;
    ax[0] = 0;
    n = 1;
    keepdims = 0;
  }
  s = reduce_body(g, op, src, n, ax, keepdims != 0, out);
  if (s) rollback(g, nt, nn);
  return s;
}

/* ---- softmax, layernorm, batchnorm ---- */

kiln_status graph_softmax(Graph *g, int x, int axis, bool log, int *out) {
  const char *what = log ? "log_softmax" : "softmax";
  if (!valid_t(g, x)) return comp_fail(g, what, "input %d is not a tensor of this graph", x);
  const Tensor *t = T(g, x);
  if (!dtype_is_float(t->dtype))
    return comp_fail(g, what, "'%s' has dtype %s, expected a float dtype", t->name, kiln_dtype_name(t->dtype));
  if (t->rank == 0) return comp_fail(g, what, "'%s' is a scalar; softmax needs rank >= 1", t->name);
  if (axis < -t->rank || axis >= t->rank)
    return comp_fail(g, what, "axis %d is out of range for '%s' of rank %d", axis, t->name, t->rank);
  if (axis < 0) axis += t->rank;
  int nt = g->n_tensors, nn = g->n_nodes;
  int m, d, e, s_, l;
  kiln_status s;
  /* stable: subtract the max along the axis before exp */
  if ((s = red(g, OP_REDUCE_MAX, x, 1, &axis, 1, &m)) || (s = bin(g, OP_SUB, x, m, &d)) ||
      (s = un(g, OP_EXP, d, &e)) || (s = red(g, OP_REDUCE_SUM, e, 1, &axis, 1, &s_)))
    goto fail;
  if (log) {
    if ((s = un(g, OP_LOG, s_, &l)) || (s = bin(g, OP_SUB, d, l, out))) goto fail;
  } else if ((s = bin(g, OP_DIV, e, s_, out))) {
    goto fail;
  }
  return KILN_OK;
fail:
  rollback(g, nt, nn);
  return s;
}

/* Does `p` (scale or bias) broadcast against x without changing x's shape? */
static bool fits(const Tensor *x, const Tensor *p) {
  int r;
  int64_t s[KILN_MAX_RANK];
  return graph_broadcast(x->rank, x->shape, p->rank, p->shape, &r, s) && r == x->rank &&
         memcmp(s, x->shape, sizeof(int64_t) * (size_t)r) == 0;
}

static kiln_status check_affine(const Graph *g, const char *what, const Tensor *x, int p, const char *role) {
  if (p == -1) return KILN_OK;
  if (!valid_t(g, p)) return comp_fail(g, what, "%s %d is not a tensor of this graph", role, p);
  const Tensor *pt = T(g, p);
  char b1[200], b2[200];
  graph_shape_str(x->rank, x->shape, b1, sizeof b1);
  graph_shape_str(pt->rank, pt->shape, b2, sizeof b2);
  if (!fits(x, pt))
    return comp_fail(g, what, "%s '%s' of shape %s does not broadcast onto '%s' of shape %s", role, pt->name, b2,
                     x->name, b1);
  if (pt->dtype != x->dtype)
    return comp_fail(g, what, "%s '%s' has dtype %s but '%s' has %s", role, pt->name, kiln_dtype_name(pt->dtype),
                     x->name, kiln_dtype_name(x->dtype));
  return KILN_OK;
}

kiln_status graph_layernorm(Graph *g, int x, int scale, int bias, int axis, double eps, int *out) {
  const char *what = "layernorm";
  if (!valid_t(g, x)) return comp_fail(g, what, "input %d is not a tensor of this graph", x);
  const Tensor *t = T(g, x);
  if (!dtype_is_float(t->dtype))
    return comp_fail(g, what, "'%s' has dtype %s, expected a float dtype", t->name, kiln_dtype_name(t->dtype));
  if (t->rank == 0) return comp_fail(g, what, "'%s' is a scalar; layernorm needs rank >= 1", t->name);
  if (axis < -t->rank || axis >= t->rank)
    return comp_fail(g, what, "axis %d is out of range for '%s' of rank %d", axis, t->name, t->rank);
  if (axis < 0) axis += t->rank;
  kiln_status s;
  if ((s = check_affine(g, what, t, scale, "scale")) || (s = check_affine(g, what, t, bias, "bias"))) return s;
  int axes[KILN_MAX_RANK], n = 0;
  for (int r = axis; r < t->rank; r++) axes[n++] = r;
  const kiln_dtype dt = t->dtype;  /* t dangles once nodes are added (g->tensors may move) */
  int nt = g->n_tensors, nn = g->n_nodes;
  int mean, xc, sq, var, ep, ve, inv, y;
  if ((s = graph_reduce(g, KILN_REDUCE_MEAN, x, n, axes, 1, &mean)) || (s = bin(g, OP_SUB, x, mean, &xc)) ||
      (s = bin(g, OP_MUL, xc, xc, &sq)) || (s = graph_reduce(g, KILN_REDUCE_MEAN, sq, n, axes, 1, &var)) ||
      (s = graph_scalar(g, dt, eps, &ep)) || (s = bin(g, OP_ADD, var, ep, &ve)) ||
      (s = un(g, OP_RSQRT, ve, &inv)) || (s = bin(g, OP_MUL, xc, inv, &y)))
    goto fail;
  if (scale != -1 && (s = bin(g, OP_MUL, y, scale, &y))) goto fail;
  if (bias != -1 && (s = bin(g, OP_ADD, y, bias, &y))) goto fail;
  *out = y;
  return KILN_OK;
fail:
  rollback(g, nt, nn);
  return s;
}

kiln_status graph_batchnorm(Graph *g, int x, int scale, int bias, int mean, int var, double eps, int *out) {
  const char *what = "batchnorm";
  if (!valid_t(g, x)) return comp_fail(g, what, "input %d is not a tensor of this graph", x);
  const Tensor *t = T(g, x);
  if (!dtype_is_float(t->dtype))
    return comp_fail(g, what, "'%s' has dtype %s, expected a float dtype", t->name, kiln_dtype_name(t->dtype));
  if (t->rank < 2) return comp_fail(g, what, "'%s' has rank %d; batchnorm needs [N, C, ...]", t->name, t->rank);
  int64_t C = t->shape[1];
  const int params[4] = { scale, bias, mean, var };
  static const char *const roles[4] = { "scale", "bias", "mean", "var" };
  for (int i = 0; i < 4; i++) {
    if (!valid_t(g, params[i])) return comp_fail(g, what, "%s %d is not a tensor of this graph", roles[i], params[i]);
    const Tensor *p = T(g, params[i]);
    if (p->rank != 1 || p->shape[0] != C)
      return comp_fail(g, what, "%s '%s' must have shape [%lld] (the channels of '%s')", roles[i], p->name,
                       (long long)C, t->name);
    if (p->dtype != t->dtype)
      return comp_fail(g, what, "%s '%s' has dtype %s but '%s' has %s", roles[i], p->name, kiln_dtype_name(p->dtype),
                       t->name, kiln_dtype_name(t->dtype));
  }
  /* y = (x - mean) * (scale * rsqrt(var + eps)) + bias, the [C] factors computed
   * once on the parameters and reshaped to [C, 1, ...] to broadcast over axis 1. */
  int64_t cshape[KILN_MAX_RANK];
  int crank = t->rank - 1;
  cshape[0] = C;
  for (int i = 1; i < crank; i++) cshape[i] = 1;
  int nt = g->n_tensors, nn = g->n_nodes;
  int ep, ve, inv, k, kr, mr, br, xc, y;
  kiln_status s;
  if ((s = graph_scalar(g, t->dtype, eps, &ep)) || (s = bin(g, OP_ADD, var, ep, &ve)) ||
      (s = un(g, OP_RSQRT, ve, &inv)) || (s = bin(g, OP_MUL, scale, inv, &k)) ||
      (s = reshape(g, k, crank, cshape, &kr)) || (s = reshape(g, mean, crank, cshape, &mr)) ||
      (s = reshape(g, bias, crank, cshape, &br)) || (s = bin(g, OP_SUB, x, mr, &xc)) ||
      (s = bin(g, OP_MUL, xc, kr, &y)) || (s = bin(g, OP_ADD, y, br, out))) {
    rollback(g, nt, nn);
    return s;
  }
  return KILN_OK;
}
