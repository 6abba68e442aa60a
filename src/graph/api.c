/*
 * api.c — the public graph-building API (kiln_graph_*, kiln_tensor_*).
 *
 * Takes the caller's arguments, checks every one of them first (and names the bad
 * one), normalises them into the Attr form that graph_add documents in graph.h
 * (negative axes, reshape -1, ONNX slice clamping, expand broadcasting, tile
 * repeats, conv/pool defaults), and hands on to graph_add or to the compositions
 * in compose.c. An API call that adds several nodes rolls the graph back to where
 * it was when any step fails, so a failed call never leaves half a construction.
 *
 * Literals: a binary op or where whose operands differ in dtype, where one operand
 * is a one-element constant, gets that constant re-made in the other operand's
 * dtype (so max(x, 0) works on f32 x with an int 0), provided the value is exactly
 * representable in an integer target.
 *
 * matmul: MATMUL itself follows numpy.matmul (graph.h), so 1-D operands go to
 * graph_add unchanged: a 1-D left operand is promoted to [1,K] and a 1-D right
 * operand to [K,1], and the promoted dim is dropped from the output.
 */
#include "graph.h"

#include <string.h>

#define GRAPH(kg)                                                            \
  Graph *g = (kg) ? &(kg)->g : NULL;                                         \
  if (!g) return kiln_fail(KILN_ERR_INVALID_ARG, "%s: graph is NULL", __func__)

#define NEED(cond, ...) \
  do { if (!(cond)) return kiln_fail(KILN_ERR_INVALID_ARG, __VA_ARGS__); } while (0)

/* Is x a tensor of g? Names the argument when not. */
static kiln_status check_t(const Graph *g, const char *fn, const char *arg, kiln_tensor x) {
  if (x >= 0 && x < g->n_tensors) return KILN_OK;
  return kiln_fail(KILN_ERR_INVALID_ARG, "%s: %s = %d is not a tensor of this graph (it has %d)", fn, arg, (int)x,
                   g->n_tensors);
}

#define TENSOR(x) \
  do { kiln_status s_ = check_t(g, __func__, #x, x); if (s_) return s_; } while (0)
#define OUTPTR(p) NEED(p, "%s: %s is NULL", __func__, #p)

static const Tensor *T(const Graph *g, int x) { return &g->tensors[x]; }

static void rollback(Graph *g, int n_tensors, int n_nodes) {
  g->n_tensors = n_tensors;
  g->n_nodes = n_nodes;
}

/* Adds a node; *out gets the tensor id (kiln_tensor and int are the same width). */
static kiln_status add(Graph *g, OpKind op, int n, const int *in, const Attr *a, kiln_tensor *out) {
  int o;
  kiln_status s = graph_add(g, op, n, in, a, &o);
  if (!s) *out = o;
  return s;
}

static kiln_status norm_axis(const char *fn, const char *what, int axis, int rank, int *out) {
  if (axis < -rank || axis >= rank)
    return kiln_fail(KILN_ERR_INVALID_ARG, "%s: %s %d is out of range for rank %d (valid: %d..%d)", fn, what, axis,
                     rank, -rank, rank - 1);
  *out = axis < 0 ? axis + rank : axis;
  return KILN_OK;
}

static kiln_status check_shape(const char *fn, int rank, const int64_t *shape, bool allow_neg1) {
  NEED(rank >= 0 && rank <= KILN_MAX_RANK, "%s: rank %d is outside 0..%d", fn, rank, KILN_MAX_RANK);
  NEED(rank == 0 || shape, "%s: shape is NULL", fn);
  bool minus1 = false;
  for (int i = 0; i < rank; i++) {
    if (allow_neg1 && shape[i] == -1) {
      NEED(!minus1, "%s: shape has -1 more than once (dims %d and earlier)", fn, i);
      minus1 = true;
      continue;
    }
    NEED(shape[i] >= 0, "%s: dim %d is %lld (negative)", fn, i, (long long)shape[i]);
  }
  return KILN_OK;
}

/* ---- graphs and leaves ---- */

kiln_status kiln_graph_create(kiln_graph **out) {
  OUTPTR(out);
  *out = NULL;
  Graph *g = graph_create();
  if (!g) return kiln_fail(KILN_ERR_NO_MEMORY, "kiln_graph_create: out of memory");
  *out = (kiln_graph *)g; /* a kiln_graph is a Graph (its only member) */
  return KILN_OK;
}

void kiln_graph_free(kiln_graph *kg) { graph_free(kg ? &kg->g : NULL); }

static kiln_status leaf(kiln_graph *kg, const char *fn, TensorKind kind, const char *name, kiln_dtype t, int rank,
                        const int64_t *shape, const void *data, kiln_tensor *out) {
  Graph *g = kg ? &kg->g : NULL;
  NEED(g, "%s: graph is NULL", fn);
  NEED(out, "%s: out is NULL", fn);
  NEED(dtype_valid((int)t), "%s: dtype %d is not a kiln_dtype", fn, (int)t);
  kiln_status s = check_shape(fn, rank, shape, false);
  if (s) return s;
  int o;
  if ((s = graph_leaf(g, kind, name, t, rank, shape, data, &o))) {
    kiln_error_prefix("%s: ", fn);
    return s;
  }
  *out = o;
  return KILN_OK;
}

kiln_status kiln_graph_input(kiln_graph *g, const char *name, kiln_dtype t, int rank, const int64_t *shape,
                             kiln_tensor *out) {
  return leaf(g, __func__, T_INPUT, name, t, rank, shape, NULL, out);
}

kiln_status kiln_graph_param(kiln_graph *g, const char *name, kiln_dtype t, int rank, const int64_t *shape,
                             const void *data, kiln_tensor *out) {
  return leaf(g, __func__, T_PARAM, name, t, rank, shape, data, out);
}

kiln_status kiln_graph_const(kiln_graph *g, kiln_dtype t, int rank, const int64_t *shape, const void *data,
                             kiln_tensor *out) {
  return leaf(g, __func__, T_CONST, NULL, t, rank, shape, data, out);
}

kiln_status kiln_graph_scalar(kiln_graph *kg, kiln_dtype t, double value, kiln_tensor *out) {
  GRAPH(kg);
  OUTPTR(out);
  NEED(dtype_valid((int)t), "%s: dtype %d is not a kiln_dtype", __func__, (int)t);
  NEED(t != KILN_STRING, "%s: a number is not a string (make string constants with kiln_graph_const)", __func__);
  int o;
  kiln_status s = graph_scalar(g, t, value, &o);
  if (!s) *out = o;
  return s;
}

kiln_status kiln_graph_output(kiln_graph *kg, kiln_tensor x, const char *name) {
  GRAPH(kg);
  TENSOR(x);
  return graph_output(g, x, name);
}

kiln_status kiln_graph_assign(kiln_graph *kg, kiln_tensor param, kiln_tensor value) {
  GRAPH(kg);
  TENSOR(param);
  TENSOR(value);
  return graph_assign(g, param, value);
}

kiln_status kiln_tensor_shape(const kiln_graph *kg, kiln_tensor x, int *rank, int64_t *shape) {
  GRAPH((kiln_graph *)kg);
  TENSOR(x);
  OUTPTR(rank);
  const Tensor *t = T(g, x);
  NEED(shape || t->rank == 0, "%s: shape is NULL", __func__);
  *rank = t->rank;
  if (t->rank) memcpy(shape, t->shape, sizeof(int64_t) * (size_t)t->rank);
  return KILN_OK;
}

kiln_status kiln_tensor_dtype(const kiln_graph *kg, kiln_tensor x, kiln_dtype *out) {
  GRAPH((kiln_graph *)kg);
  TENSOR(x);
  OUTPTR(out);
  *out = T(g, x)->dtype;
  return KILN_OK;
}

void kiln_graph_print(const kiln_graph *kg, FILE *f) {
  if (kg && f) graph_print(&kg->g, f);
}

/* ---- elementwise ---- */

static const OpKind unary_ops[KILN_UNARY_COUNT] = {
  [KILN_NEG] = OP_NEG, [KILN_ABS] = OP_ABS, [KILN_EXP] = OP_EXP, [KILN_LOG] = OP_LOG, [KILN_SQRT] = OP_SQRT,
  [KILN_RSQRT] = OP_RSQRT, [KILN_RECIPROCAL] = OP_RECIPROCAL, [KILN_TANH] = OP_TANH, [KILN_SIGMOID] = OP_SIGMOID,
  [KILN_RELU] = OP_RELU, [KILN_GELU_ERF] = OP_GELU_ERF, [KILN_GELU_TANH] = OP_GELU_TANH, [KILN_ERF] = OP_ERF,
  [KILN_SIN] = OP_SIN, [KILN_COS] = OP_COS, [KILN_FLOOR] = OP_FLOOR, [KILN_CEIL] = OP_CEIL,
  [KILN_ROUND] = OP_ROUND, [KILN_SIGN] = OP_SIGN, [KILN_NOT] = OP_NOT, [KILN_ISNAN] = OP_ISNAN,
  [KILN_ISINF] = OP_ISINF,
};
_Static_assert(KILN_UNARY_COUNT == 22, "update unary_ops");

static const OpKind binary_ops[KILN_BINARY_COUNT] = {
  [KILN_ADD] = OP_ADD, [KILN_SUB] = OP_SUB, [KILN_MUL] = OP_MUL, [KILN_DIV] = OP_DIV, [KILN_POW] = OP_POW,
  [KILN_MAX] = OP_MAX, [KILN_MIN] = OP_MIN, [KILN_MOD] = OP_MOD, [KILN_FMOD] = OP_FMOD, [KILN_EQ] = OP_EQ,
  [KILN_NE] = OP_NE, [KILN_LT] = OP_LT, [KILN_LE] = OP_LE, [KILN_GT] = OP_GT, [KILN_GE] = OP_GE,
  [KILN_AND] = OP_AND, [KILN_OR] = OP_OR, [KILN_XOR] = OP_XOR, [KILN_SHL] = OP_SHL, [KILN_SHR] = OP_SHR,
};
_Static_assert(KILN_BINARY_COUNT == 20, "update binary_ops");

kiln_status kiln_graph_unary(kiln_graph *kg, kiln_unary_op op, kiln_tensor x, kiln_tensor *out) {
  GRAPH(kg);
  NEED((unsigned)op < KILN_UNARY_COUNT, "%s: op %d is not a kiln_unary_op", __func__, (int)op);
  TENSOR(x);
  OUTPTR(out);
  int in[1] = { x };
  return add(g, unary_ops[op], 1, in, NULL, out);
}

static bool is_literal(const Graph *g, int x) {
  const Tensor *t = T(g, x);
  return t->kind == T_CONST && t->numel == 1 && t->data;
}

/* Re-makes the one-element constant *x in dtype `to`; fails if an integer (or bool)
 * target cannot hold its value exactly. */
static kiln_status coerce(Graph *g, const char *fn, int *x, kiln_dtype to) {
  const Tensor *t = T(g, *x);
  unsigned char buf[8];
  bool exact = true;
  if (dtype_is_float(t->dtype)) {
    double v = dtype_load_f64(t->dtype, t->data, 0);
    dtype_store_f64(to, buf, 0, v);
    if (!dtype_is_float(to)) exact = dtype_load_f64(to, buf, 0) == v;
  } else {
    int64_t v = dtype_load_i64(t->dtype, t->data, 0);
    if (dtype_is_float(to)) {
      dtype_store_f64(to, buf, 0, (double)v);
    } else {
      dtype_store_i64(to, buf, 0, v);
      exact = dtype_load_i64(to, buf, 0) == v;
    }
  }
  NEED(exact, "%s: constant '%s' (%s, value %g) cannot be represented as %s", fn, t->name,
       kiln_dtype_name(t->dtype), dtype_load_f64(t->dtype, t->data, 0), kiln_dtype_name(to));
  int rank = t->rank;
  int64_t shape[KILN_MAX_RANK];
  memcpy(shape, t->shape, sizeof shape);
  return graph_leaf(g, T_CONST, NULL, to, rank, shape, buf, x); /* t is stale from here */
}

/* Operands of different dtypes where one is a one-element constant: convert that one. */
static kiln_status coerce_pair(Graph *g, const char *fn, int *a, int *b) {
  kiln_dtype ta = T(g, *a)->dtype, tb = T(g, *b)->dtype;
  if (ta == tb || ta == KILN_STRING || tb == KILN_STRING) return KILN_OK;  /* no number is a string */
  if (is_literal(g, *b)) return coerce(g, fn, b, ta);
  if (is_literal(g, *a)) return coerce(g, fn, a, tb);
  return KILN_OK; /* graph_add names the mismatch */
}

kiln_status kiln_graph_binary(kiln_graph *kg, kiln_binary_op op, kiln_tensor a, kiln_tensor b, kiln_tensor *out) {
  GRAPH(kg);
  NEED((unsigned)op < KILN_BINARY_COUNT, "%s: op %d is not a kiln_binary_op", __func__, (int)op);
  TENSOR(a);
  TENSOR(b);
  OUTPTR(out);
  int nt = g->n_tensors, nn = g->n_nodes;
  int in[2] = { a, b };
  kiln_status s = coerce_pair(g, __func__, &in[0], &in[1]);
  if (!s) s = add(g, binary_ops[op], 2, in, NULL, out);
  if (s) rollback(g, nt, nn);
  return s;
}

kiln_status kiln_graph_where(kiln_graph *kg, kiln_tensor cond, kiln_tensor a, kiln_tensor b, kiln_tensor *out) {
  GRAPH(kg);
  TENSOR(cond);
  TENSOR(a);
  TENSOR(b);
  OUTPTR(out);
  int nt = g->n_tensors, nn = g->n_nodes;
  int in[3] = { cond, a, b };
  kiln_status s = coerce_pair(g, __func__, &in[1], &in[2]);
  if (!s) s = add(g, OP_WHERE, 3, in, NULL, out);
  if (s) rollback(g, nt, nn);
  return s;
}

kiln_status kiln_graph_cast(kiln_graph *kg, kiln_tensor x, kiln_dtype to, kiln_tensor *out) {
  GRAPH(kg);
  TENSOR(x);
  OUTPTR(out);
  NEED(dtype_valid((int)to), "%s: dtype %d is not a kiln_dtype", __func__, (int)to);
  Attr a = { 0 };
  a.to = to;
  int in[1] = { x };
  return add(g, OP_CAST, 1, in, &a, out);
}

/* ---- movement ---- */

kiln_status kiln_graph_reshape(kiln_graph *kg, kiln_tensor x, int rank, const int64_t *shape, kiln_tensor *out) {
  GRAPH(kg);
  TENSOR(x);
  OUTPTR(out);
  kiln_status s = check_shape(__func__, rank, shape, true);
  if (s) return s;
  const Tensor *t = T(g, x);
  Attr a = { 0 };
  a.shape_rank = rank;
  int64_t known = 1;
  int hole = -1;
  for (int i = 0; i < rank; i++) {
    a.shape[i] = shape[i];
    if (shape[i] == -1) hole = i;
    else NEED(size_mul(known, shape[i], &known), "%s: shape overflows the size range", __func__);
  }
  if (hole >= 0) {
    char b[200];
    graph_shape_str(t->rank, t->shape, b, sizeof b);
    NEED(known > 0 && t->numel % known == 0, "%s: cannot infer dim %d: '%s' %s has %lld elements, other dims give %lld",
         __func__, hole, t->name, b, (long long)t->numel, (long long)known);
    a.shape[hole] = t->numel / known;
  }
  int in[1] = { x };
  return add(g, OP_RESHAPE, 1, in, &a, out);
}

kiln_status kiln_graph_transpose(kiln_graph *kg, kiln_tensor x, const int *perm, kiln_tensor *out) {
  GRAPH(kg);
  TENSOR(x);
  OUTPTR(out);
  int rank = T(g, x)->rank;
  Attr a = { 0 };
  for (int i = 0; i < rank; i++) a.perm[i] = perm ? perm[i] : rank - 1 - i; /* NULL: reverse, like numpy */
  int in[1] = { x };
  return add(g, OP_TRANSPOSE, 1, in, &a, out);
}

/* ONNX Slice on one axis of size d, the one place its clamping is written (the ONNX
 * importer calls it too). Negative start and end count from the end; then start is
 * clamped into [0, d] for a positive step and [0, d-1] for a negative one, end into
 * [0, d] and [-1, d-1]. Gives the first index, the step and the count. A count of 0 or
 * 1 gets a unit step (and a count of 0 the start 0), so later index arithmetic never
 * multiplies by a huge step. No intermediate overflows for any int64 arguments, a step
 * of INT64_MIN (whose negation does not exist) included. Requires d >= 0, step != 0. */
void graph_slice_axis(int64_t d, int64_t start, int64_t end, int64_t step, int64_t *first, int64_t *stride,
                      int64_t *count) {
  if (start < 0) start = start < -d ? 0 : start + d;
  if (end < 0) end = end < -d ? -1 : end + d;  /* -1 only matters for negative steps */
  int64_t n;
  if (step > 0) {
    start = start > d ? d : start;
    end = end < 0 ? 0 : end > d ? d : end;
    n = end > start ? (end - start - 1) / step + 1 : 0;
  } else {
    start = start > d - 1 ? d - 1 : start;
    end = end > d - 1 ? d - 1 : end;
    n = start > end ? (start - end - 1) / (step == INT64_MIN ? INT64_MAX : -step) + 1 : 0;
  }
  *count = n;
  *first = n ? start : 0;
  *stride = n > 1 ? step : step > 0 ? 1 : -1;
}

kiln_status kiln_graph_slice(kiln_graph *kg, kiln_tensor x, int n, const int64_t *starts, const int64_t *ends,
                             const int *axes, const int64_t *steps, kiln_tensor *out) {
  GRAPH(kg);
  TENSOR(x);
  OUTPTR(out);
  const Tensor *t = T(g, x);
  NEED(n >= 0 && n <= t->rank, "%s: n = %d axes for '%s' of rank %d", __func__, n, t->name, t->rank);
  NEED(n == 0 || (starts && ends), "%s: starts or ends is NULL", __func__);
  Attr a = { 0 };
  a.shape_rank = t->rank;
  for (int r = 0; r < t->rank; r++) {
    a.starts[r] = 0;
    a.steps[r] = 1;
    a.shape[r] = t->shape[r];
  }
  bool done[KILN_MAX_RANK] = { false };
  for (int i = 0; i < n; i++) {
    int ax = 0;
    kiln_status s = norm_axis(__func__, "axis", axes ? axes[i] : i, t->rank, &ax);
    if (s) return s;
    NEED(!done[ax], "%s: axis %d appears twice in axes", __func__, ax);
    done[ax] = true;
    int64_t k = steps ? steps[i] : 1;
    NEED(k != 0, "%s: step %d (axis %d) is 0", __func__, i, ax);
    graph_slice_axis(t->shape[ax], starts[i], ends[i], k, &a.starts[ax], &a.steps[ax], &a.shape[ax]);
  }
  int in[1] = { x };
  return add(g, OP_SLICE, 1, in, &a, out);
}

kiln_status kiln_graph_concat(kiln_graph *kg, int n, const kiln_tensor *xs, int axis, kiln_tensor *out) {
  GRAPH(kg);
  OUTPTR(out);
  NEED(n >= 1, "%s: n = %d (need at least one tensor)", __func__, n);
  NEED(xs, "%s: xs is NULL", __func__);
  for (int i = 0; i < n; i++)
    NEED(xs[i] >= 0 && xs[i] < g->n_tensors, "%s: xs[%d] = %d is not a tensor of this graph (it has %d)", __func__,
         i, (int)xs[i], g->n_tensors);
  Attr a = { 0 };
  kiln_status s = norm_axis(__func__, "axis", axis, T(g, xs[0])->rank, &a.axis);
  if (s) return s;
  int *in = kiln_malloc(sizeof(int) * (size_t)n);
  if (!in) return kiln_fail(KILN_ERR_NO_MEMORY, "%s: out of memory", __func__);
  for (int i = 0; i < n; i++) in[i] = xs[i];
  s = add(g, OP_CONCAT, n, in, &a, out);
  kiln_free(in);
  return s;
}

kiln_status kiln_graph_pad(kiln_graph *kg, kiln_tensor x, const int64_t *pads, kiln_pad_mode mode, double value,
                           kiln_tensor *out) {
  GRAPH(kg);
  TENSOR(x);
  OUTPTR(out);
  int rank = T(g, x)->rank;
  NEED(rank == 0 || pads, "%s: pads is NULL", __func__);
  NEED((unsigned)mode <= KILN_PAD_EDGE, "%s: mode %d is not a kiln_pad_mode", __func__, (int)mode);
  Attr a = { 0 };
  for (int i = 0; i < 2 * rank; i++) a.pads[i] = pads[i];
  a.pad_mode = mode;
  a.value = value;
  int in[1] = { x };
  return add(g, OP_PAD, 1, in, &a, out);
}

kiln_status kiln_graph_expand(kiln_graph *kg, kiln_tensor x, int rank, const int64_t *shape, kiln_tensor *out) {
  GRAPH(kg);
  TENSOR(x);
  OUTPTR(out);
  kiln_status s = check_shape(__func__, rank, shape, false);
  if (s) return s;
  const Tensor *t = T(g, x);
  Attr a = { 0 };
  if (!graph_broadcast(t->rank, t->shape, rank, shape, &a.shape_rank, a.shape)) {
    char b1[200], b2[200];
    graph_shape_str(t->rank, t->shape, b1, sizeof b1);
    graph_shape_str(rank, shape, b2, sizeof b2);
    return kiln_fail(KILN_ERR_INVALID_ARG, "%s: '%s' of shape %s does not broadcast with %s", __func__, t->name, b1,
                     b2);
  }
  int in[1] = { x };
  return add(g, OP_EXPAND, 1, in, &a, out);
}

kiln_status kiln_graph_gather(kiln_graph *kg, kiln_tensor x, kiln_tensor indices, int axis, kiln_tensor *out) {
  GRAPH(kg);
  TENSOR(x);
  TENSOR(indices);
  OUTPTR(out);
  Attr a = { 0 };
  kiln_status s = norm_axis(__func__, "axis", axis, T(g, x)->rank, &a.axis);
  if (s) return s;
  int in[2] = { x, indices };
  return add(g, OP_GATHER, 2, in, &a, out);
}

kiln_status kiln_graph_tile(kiln_graph *kg, kiln_tensor x, const int64_t *repeats, kiln_tensor *out) {
  GRAPH(kg);
  TENSOR(x);
  OUTPTR(out);
  const Tensor *t = T(g, x);
  NEED(t->rank == 0 || repeats, "%s: repeats is NULL", __func__);
  Attr a = { 0 };
  a.shape_rank = t->rank;
  for (int r = 0; r < t->rank; r++) {
    NEED(repeats[r] >= 0, "%s: repeats[%d] is %lld (negative)", __func__, r, (long long)repeats[r]);
    NEED(size_mul(t->shape[r], repeats[r], &a.shape[r]), "%s: axis %d: %lld * %lld overflows", __func__, r,
         (long long)t->shape[r], (long long)repeats[r]);
  }
  int in[1] = { x };
  return add(g, OP_TILE, 1, in, &a, out);
}

/* ---- reductions ---- */

kiln_status kiln_graph_reduce(kiln_graph *kg, kiln_reduce_op op, kiln_tensor x, int n_axes, const int *axes,
                              int keepdims, kiln_tensor *out) {
  GRAPH(kg);
  NEED((unsigned)op < KILN_REDUCE_COUNT, "%s: op %d is not a kiln_reduce_op", __func__, (int)op);
  TENSOR(x);
  OUTPTR(out);
  NEED(n_axes >= 0 && n_axes <= KILN_MAX_RANK, "%s: n_axes = %d", __func__, n_axes);
  int o;
  kiln_status s = graph_reduce(g, op, x, axes ? n_axes : 0, axes, keepdims != 0, &o);
  if (!s) *out = o;
  return s;
}

static kiln_status arg_op(Graph *g, const char *fn, OpKind op, kiln_tensor x, int axis, int keepdims, int select_last,
                          kiln_tensor *out) {
  Attr a = { 0 };
  kiln_status s = norm_axis(fn, "axis", axis, T(g, x)->rank, &a.axis);
  if (s) return s;
  a.keepdims = keepdims != 0;
  a.select_last = select_last != 0;
  int in[1] = { x };
  return add(g, op, 1, in, &a, out);
}

kiln_status kiln_graph_argmax(kiln_graph *kg, kiln_tensor x, int axis, int keepdims, int select_last,
                              kiln_tensor *out) {
  GRAPH(kg);
  TENSOR(x);
  OUTPTR(out);
  return arg_op(g, __func__, OP_ARGMAX, x, axis, keepdims, select_last, out);
}

kiln_status kiln_graph_argmin(kiln_graph *kg, kiln_tensor x, int axis, int keepdims, int select_last,
                              kiln_tensor *out) {
  GRAPH(kg);
  TENSOR(x);
  OUTPTR(out);
  return arg_op(g, __func__, OP_ARGMIN, x, axis, keepdims, select_last, out);
}

/* ---- contractions ---- */

kiln_status kiln_graph_set_autocast(kiln_graph *kg, kiln_dtype t) {
  GRAPH(kg);
  NEED(t == KILN_F32 || t == KILN_BF16 || t == KILN_F16, "%s: dtype %d is not f32 (off), bf16 or f16", __func__, (int)t);
  g->autocast = t;
  return KILN_OK;
}

kiln_status kiln_graph_set_data_parallel(kiln_graph *kg, int on) {
  GRAPH(kg);
  NEED(on == 0 || on == 1, "%s: on is %d (0 or 1)", __func__, on);
  g->data_parallel = on;
  return KILN_OK;
}

kiln_status kiln_graph_all_reduce_mean(kiln_graph *kg, kiln_tensor x, kiln_tensor *out) {
  GRAPH(kg);
  TENSOR(x);
  OUTPTR(out);
  int in[1] = { x };
  return add(g, OP_ALL_REDUCE_MEAN, 1, in, NULL, out);
}

/* Under autocast, a contraction of f32 operands: both in[i] (n of them, -1 skipped) replaced by
 * copies in the autocast dtype; true if it applies. */
static bool autocast_inputs(Graph *g, int n, int *in, kiln_status *s) {
  *s = KILN_OK;
  if (g->autocast == KILN_F32) return false;
  for (int i = 0; i < n; i++)
    if (in[i] >= 0 && T(g, in[i])->dtype != KILN_F32) return false;
  Attr a = { 0 };
  a.to = g->autocast;
  for (int i = 0; i < n && !*s; i++)
    if (in[i] >= 0) *s = graph_add(g, OP_CAST, 1, &in[i], &a, &in[i]);
  return true;
}

/* ... and its result y widened back to f32. */
static kiln_status autocast_result(Graph *g, kiln_tensor y, kiln_tensor *out) {
  Attr a = { 0 };
  a.to = KILN_F32;
  int in[1] = { y };
  return add(g, OP_CAST, 1, in, &a, out);
}

kiln_status kiln_graph_matmul(kiln_graph *kg, kiln_tensor a, kiln_tensor b, kiln_tensor *out) {
  GRAPH(kg);
  TENSOR(a);
  TENSOR(b);
  OUTPTR(out);
  int in[2] = { a, b }, nt = g->n_tensors, nn = g->n_nodes;
  kiln_status s;
  if (autocast_inputs(g, 2, in, &s)) {
    kiln_tensor y;
    if (!s) s = add(g, OP_MATMUL, 2, in, NULL, &y);
    if (!s) s = autocast_result(g, y, out);
    if (s) rollback(g, nt, nn);
    return s;
  }
  return add(g, OP_MATMUL, 2, in, NULL, out);
}

/* 0 means 1 for strides, dilations (and group); negative is an error. */
static kiln_status window_defaults(const char *fn, int spatial, int64_t *strides, int64_t *dil, const int64_t *pads) {
  NEED(spatial >= 1 && spatial <= 3, "%s: spatial = %d (must be 1, 2 or 3)", fn, spatial);
  for (int i = 0; i < spatial; i++) {
    NEED(strides[i] >= 0, "%s: strides[%d] is %lld (negative)", fn, i, (long long)strides[i]);
    NEED(dil[i] >= 0, "%s: dilations[%d] is %lld (negative)", fn, i, (long long)dil[i]);
    NEED(pads[i] >= 0 && pads[spatial + i] >= 0, "%s: pads for spatial dim %d are negative", fn, i);
    if (!strides[i]) strides[i] = 1;
    if (!dil[i]) dil[i] = 1;
  }
  for (int i = 0; i < 3; i++) /* unused: zero, so equal nodes compare equal */
    if (i >= spatial) strides[i] = dil[i] = 0;
  return KILN_OK;
}

kiln_status kiln_graph_conv(kiln_graph *kg, kiln_tensor x, kiln_tensor w, kiln_tensor bias,
                            const kiln_conv_params *p, kiln_tensor *out) {
  GRAPH(kg);
  TENSOR(x);
  TENSOR(w);
  NEED(bias == -1 || (bias >= 0 && bias < g->n_tensors),
       "%s: bias = %d is neither -1 nor a tensor of this graph (it has %d)", __func__, (int)bias, g->n_tensors);
  NEED(p, "%s: p is NULL", __func__);
  OUTPTR(out);
  int cin[3] = { x, w, bias }, cnt = g->n_tensors, cnn = g->n_nodes;
  kiln_status cs;
  if (autocast_inputs(g, 3, cin, &cs)) {  /* the convolution (its bias too) on the copies, widened after */
    kiln_dtype t = g->autocast;
    kiln_tensor y;
    g->autocast = KILN_F32;
    if (!cs) cs = kiln_graph_conv(kg, cin[0], cin[1], cin[2], p, &y);
    g->autocast = t;
    if (!cs) cs = autocast_result(g, y, out);
    if (cs) rollback(g, cnt, cnn);
    return cs;
  }
  Attr a = { 0 };
  a.conv = *p;
  kiln_status s = window_defaults(__func__, p->spatial, a.conv.strides, a.conv.dilations, a.conv.pads);
  if (s) return s;
  NEED(p->group >= 0, "%s: group is %lld (negative)", __func__, (long long)p->group);
  if (!a.conv.group) a.conv.group = 1;
  for (int i = 0; i < 6; i++) /* pads: spatial begins, then spatial ends; the rest unused */
    if (i >= 2 * p->spatial) a.conv.pads[i] = 0;
  int nt = g->n_tensors, nn = g->n_nodes;
  int in[2] = { x, w };
  kiln_tensor y;
  if ((s = add(g, OP_CONV, 2, in, &a, &y))) return s;
  if (bias >= 0) {
    const Tensor *bt = T(g, bias), *yt = T(g, y);
    int64_t M = yt->shape[1];
    if (bt->rank != 1 || bt->shape[0] != M) {
      char b[200];
      graph_shape_str(bt->rank, bt->shape, b, sizeof b);
      rollback(g, nt, nn);
      return kiln_fail(KILN_ERR_INVALID_ARG, "%s: bias '%s' has shape %s, expected [%lld]", __func__, bt->name, b,
                       (long long)M);
    }
    Attr r = { 0 };
    r.shape_rank = yt->rank - 1;
    r.shape[0] = M;
    for (int i = 1; i < r.shape_rank; i++) r.shape[i] = 1;
    int rin[1] = { bias };
    kiln_tensor br;
    if (!(s = add(g, OP_RESHAPE, 1, rin, &r, &br))) {
      int ain[2] = { y, br };
      s = add(g, OP_ADD, 2, ain, NULL, &y);
    }
    if (s) {
      rollback(g, nt, nn);
      return s;
    }
  }
  *out = y;
  return KILN_OK;
}

kiln_status kiln_graph_pool(kiln_graph *kg, kiln_pool_kind kind, kiln_tensor x, const kiln_pool_params *p,
                            kiln_tensor *out) {
  GRAPH(kg);
  NEED(kind == KILN_POOL_MAX || kind == KILN_POOL_AVG, "%s: kind %d is not a kiln_pool_kind", __func__, (int)kind);
  TENSOR(x);
  NEED(p, "%s: p is NULL", __func__);
  OUTPTR(out);
  Attr a = { 0 };
  a.pool = *p;
  kiln_status s = window_defaults(__func__, p->spatial, a.pool.strides, a.pool.dilations, a.pool.pads);
  if (s) return s;
  for (int i = 0; i < p->spatial; i++)
    NEED(p->kernel[i] >= 1, "%s: kernel[%d] is %lld (must be >= 1)", __func__, i, (long long)p->kernel[i]);
  for (int i = 0; i < 3; i++)
    if (i >= p->spatial) a.pool.kernel[i] = 0; /* unused */
  for (int i = 0; i < 6; i++)
    if (i >= 2 * p->spatial) a.pool.pads[i] = 0;
  a.pool.ceil_mode = p->ceil_mode != 0;
  a.pool.count_include_pad = kind == KILN_POOL_AVG && p->count_include_pad != 0;
  int in[1] = { x };
  return add(g, kind == KILN_POOL_MAX ? OP_MAX_POOL : OP_AVG_POOL, 1, in, &a, out);
}

kiln_status kiln_graph_global_pool(kiln_graph *kg, kiln_pool_kind kind, kiln_tensor x, kiln_tensor *out) {
  GRAPH(kg);
  NEED(kind == KILN_POOL_MAX || kind == KILN_POOL_AVG, "%s: kind %d is not a kiln_pool_kind", __func__, (int)kind);
  TENSOR(x);
  OUTPTR(out);
  const Tensor *t = T(g, x);
  NEED(t->rank >= 3, "%s: '%s' has rank %d; global pooling needs [N, C, spatial...]", __func__, t->name, t->rank);
  NEED(dtype_is_float(t->dtype), "%s: '%s' has dtype %s, expected a float dtype", __func__, t->name,
       kiln_dtype_name(t->dtype));
  int axes[KILN_MAX_RANK], n = 0;
  for (int r = 2; r < t->rank; r++) axes[n++] = r;
  int o;
  kiln_status s = graph_reduce(g, kind == KILN_POOL_MAX ? KILN_REDUCE_MAX : KILN_REDUCE_MEAN, x, n, axes, 1, &o);
  if (!s) *out = o;
  return s;
}

/* ---- compositions ---- */

static kiln_status softmax(kiln_graph *kg, const char *fn, kiln_tensor x, int axis, bool log, kiln_tensor *out) {
  Graph *g = kg ? &kg->g : NULL;
  NEED(g, "%s: graph is NULL", fn);
  kiln_status s = check_t(g, fn, "x", x);
  if (s) return s;
  NEED(out, "%s: out is NULL", fn);
  int ax = 0, o;
  if ((s = norm_axis(fn, "axis", axis, T(g, x)->rank, &ax))) return s;
  if (!(s = graph_softmax(g, x, ax, log, &o))) *out = o;
  return s;
}

kiln_status kiln_graph_softmax(kiln_graph *g, kiln_tensor x, int axis, kiln_tensor *out) {
  return softmax(g, __func__, x, axis, false, out);
}

kiln_status kiln_graph_log_softmax(kiln_graph *g, kiln_tensor x, int axis, kiln_tensor *out) {
  return softmax(g, __func__, x, axis, true, out);
}

kiln_status kiln_graph_layernorm(kiln_graph *kg, kiln_tensor x, kiln_tensor scale, kiln_tensor bias, int axis,
                                 double eps, kiln_tensor *out) {
  GRAPH(kg);
  TENSOR(x);
  NEED(scale == -1 || (scale >= 0 && scale < g->n_tensors), "%s: scale = %d is neither -1 nor a tensor of this graph",
       __func__, (int)scale);
  NEED(bias == -1 || (bias >= 0 && bias < g->n_tensors), "%s: bias = %d is neither -1 nor a tensor of this graph",
       __func__, (int)bias);
  OUTPTR(out);
  int ax = 0, o;
  kiln_status s = norm_axis(__func__, "axis", axis, T(g, x)->rank, &ax);
  if (s) return s;
  if (!(s = graph_layernorm(g, x, scale, bias, ax, eps, &o))) *out = o;
  return s;
}

kiln_status kiln_graph_batchnorm(kiln_graph *kg, kiln_tensor x, kiln_tensor scale, kiln_tensor bias,
                                 kiln_tensor mean, kiln_tensor var, double eps, kiln_tensor *out) {
  GRAPH(kg);
  TENSOR(x);
  TENSOR(scale);
  TENSOR(bias);
  TENSOR(mean);
  TENSOR(var);
  OUTPTR(out);
  int o;
  kiln_status s = graph_batchnorm(g, x, scale, bias, mean, var, eps, &o);
  if (!s) *out = o;
  return s;
}

/* ---- strings ---- */

kiln_status kiln_graph_string_normalize(kiln_graph *kg, kiln_tensor x, kiln_case_change change, int case_sensitive,
                                        int n_stopwords, const char *const *stopwords, kiln_tensor *out) {
  GRAPH(kg);
  TENSOR(x);
  OUTPTR(out);
  NEED((unsigned)change <= KILN_CASE_UPPER, "%s: change %d is not a kiln_case_change", __func__, (int)change);
  NEED(n_stopwords >= 0 && (n_stopwords == 0 || stopwords), "%s: %d stopwords and the list is %s", __func__,
       n_stopwords, stopwords ? "given" : "NULL");
  for (int i = 0; i < n_stopwords; i++) NEED(stopwords[i], "%s: stopword %d is NULL", __func__, i);
  StrAttr sa = { .case_change = (int)change, .case_sensitive = case_sensitive != 0, .n_words = n_stopwords,
                 .words = (const char **)stopwords };
  Attr a = { 0 };
  a.str = &sa;
  int in[1] = { x };
  return add(g, OP_STR_NORMALIZE, 1, in, &a, out);
}

kiln_status kiln_graph_string_concat(kiln_graph *kg, kiln_tensor a, kiln_tensor b, kiln_tensor *out) {
  GRAPH(kg);
  TENSOR(a);
  TENSOR(b);
  OUTPTR(out);
  int in[2] = { a, b };
  return add(g, OP_STR_CONCAT, 2, in, NULL, out);
}

kiln_status kiln_graph_regex_full_match(kiln_graph *kg, kiln_tensor x, const char *pattern, kiln_tensor *out) {
  GRAPH(kg);
  TENSOR(x);
  OUTPTR(out);
  NEED(pattern, "%s: pattern is NULL", __func__);
  StrAttr sa = { .pattern = pattern };
  Attr a = { 0 };
  a.str = &sa;
  int in[1] = { x };
  return add(g, OP_REGEX_MATCH, 1, in, &a, out);
}

kiln_status kiln_graph_label_encode(kiln_graph *kg, kiln_tensor x, kiln_dtype key_t, kiln_dtype val_t, int64_t n,
                                    const void *keys, const void *values, const void *dflt, kiln_tensor *out) {
  GRAPH(kg);
  TENSOR(x);
  OUTPTR(out);
  NEED(n >= 0 && (n == 0 || (keys && values)), "%s: %lld keys and %s", __func__, (long long)n,
       keys ? "values are NULL" : "keys are NULL");
  NEED(dflt, "%s: dflt is NULL", __func__);
  StrAttr sa = { .key_t = key_t, .val_t = val_t, .n_keys = n, .keys = keys, .values = values, .dflt = dflt };
  Attr a = { 0 };
  a.str = &sa;
  int in[1] = { x };
  return add(g, OP_LABEL_ENCODE, 1, in, &a, out);
}
