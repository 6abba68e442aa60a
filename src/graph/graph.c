/*
 * graph.c — building a graph, with shape inference.
 *
 * Takes leaves (inputs, parameters, constants) and primitive nodes with
 * normalised attributes (see the Attr comment in graph.h: that comment is the
 * contract with the te lowering), checks each node's arity, input ids, dtypes
 * and attributes, infers its output shape and dtype, and appends the node and
 * its output tensor. Produces a Graph in topological order.
 *
 * How: one pure function, infer(), checks a node and computes its output; both
 * graph_add and graph_check call it, so the check re-derives exactly what was
 * built. All names, attributes and data live in the graph's arena; the tensor,
 * node, output and assign arrays grow with kiln_realloc. graph_add reserves
 * everything it needs before it writes anything, so a failure leaves the graph
 * as it was.
 */
#include "graph.h"

#include <string.h>

const char *const op_names[OP_COUNT] = {
#define OP(name, str, arity, kind) [OP_##name] = str,
#include "ops.def"
#undef OP
};

const int op_arity[OP_COUNT] = {
#define OP(name, str, arity, kind) [OP_##name] = arity,
#include "ops.def"
#undef OP
};

const OpExprKind op_expr_kind[OP_COUNT] = {
#define OP(name, str, arity, kind) [OP_##name] = EXPR_##kind,
#include "ops.def"
#undef OP
};

/* A new op must also get a case in infer() below (the switch has no default, so
 * -Wswitch reports a missing one) and a lowering in te. */
_Static_assert(OP_COUNT == 67, "ops.def changed: update infer() and the te lowering");

/* ---- small helpers ---- */

void graph_shape_str(int rank, const int64_t *shape, char *buf, size_t n) {
  size_t k = 0;
  if (n == 0) return;
  buf[0] = 0;
  k += (size_t)snprintf(buf + k, n - k, "[");
  for (int i = 0; i < rank && k < n; i++)
    k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "," : "", (long long)shape[i]);
  if (k < n) snprintf(buf + k, n - k, "]");
}

/* "f32[2,3]" for messages and printing. */
static const char *tstr(const Tensor *t, char *buf, size_t n) {
  char s[200];
  graph_shape_str(t->rank, t->shape, s, sizeof s);
  snprintf(buf, n, "%s%s", kiln_dtype_name(t->dtype), s);
  return buf;
}

static bool grow(void **p, int *cap, int need, size_t elem) {
  if (need <= *cap) return true;
  if (need > (1 << 28)) return false;
  int nc = *cap ? *cap : 16;
  while (nc < need) nc *= 2;
  void *q = kiln_realloc(*p, (size_t)nc * elem);
  if (!q) return false;
  *p = q;
  *cap = nc;
  return true;
}

static kiln_status vnode_fail(const char *name, OpKind op, kiln_status s, const char *fmt, va_list ap) {
  char msg[768];
  vsnprintf(msg, sizeof msg, fmt, ap);
  return kiln_fail(s, "node '%s' (%s): %s", name, op_names[op], msg);
}

kiln_status graph_node_error(const Graph *g, OpKind op, kiln_status s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  const char *name = g && g->node_name ? g->node_name : op_names[op];
  kiln_status r = vnode_fail(name, op, s, fmt, ap);
  va_end(ap);
  return r;
}

bool graph_broadcast(int ra, const int64_t *a, int rb, const int64_t *b, int *rank, int64_t *out) {
  int r = ra > rb ? ra : rb;
  if (r > KILN_MAX_RANK) return false;
  int64_t tmp[KILN_MAX_RANK];
  for (int i = 0; i < r; i++) {
    int64_t da = i < r - ra ? 1 : a[i - (r - ra)];
    int64_t db = i < r - rb ? 1 : b[i - (r - rb)];
    if (da == db || db == 1) tmp[i] = da;
    else if (da == 1) tmp[i] = db;
    else return false;
  }
  memcpy(out, tmp, sizeof(int64_t) * (size_t)r);
  *rank = r;
  return true;
}

/* ---- leaves ---- */

Graph *graph_create(void) {
  /* A kiln_graph is a Graph (its only member), so the public handle and the
   * internal pointer are the same address. */
  struct kiln_graph *kg = kiln_calloc(1, sizeof *kg);
  return kg ? &kg->g : NULL;
}

void graph_free(Graph *g) {
  if (!g) return;
  arena_free(&g->arena);
  kiln_free(g->tensors);
  kiln_free(g->nodes);
  kiln_free(g->outputs);
  kiln_free(g->assigns);
  kiln_free(g);
}

/* A name for tensor id: the given one, or "t<id>". NULL when out of memory. */
static const char *tensor_name(Graph *g, const char *name, int id) {
  if (name) return arena_strdup(&g->arena, name);
  char buf[32];
  snprintf(buf, sizeof buf, "t%d", id);
  return arena_strdup(&g->arena, buf);
}

static const char *const kind_names[] = { "input", "param", "const", "value" };

kiln_status graph_leaf(Graph *g, TensorKind kind, const char *name, kiln_dtype t, int rank,
                       const int64_t *shape, const void *data, int *out) {
  const char *what = (unsigned)kind < 4 ? kind_names[kind] : "?";
  const char *nm = name ? name : "(unnamed)";
  if (kind != T_INPUT && kind != T_PARAM && kind != T_CONST)
    return kiln_fail(KILN_ERR_INVALID_ARG, "leaf '%s': kind %d is not input, param or const", nm, (int)kind);
  if (!dtype_valid((int)t))
    return kiln_fail(KILN_ERR_INVALID_ARG, "%s '%s': dtype %d is not a kiln_dtype", what, nm, (int)t);
  if (rank < 0 || rank > KILN_MAX_RANK)
    return kiln_fail(KILN_ERR_INVALID_ARG, "%s '%s': rank %d is outside 0..%d", what, nm, rank, KILN_MAX_RANK);
  if (rank > 0 && !shape) return kiln_fail(KILN_ERR_INVALID_ARG, "%s '%s': shape is NULL", what, nm);
  for (int i = 0; i < rank; i++)
    if (shape[i] < 0)
      return kiln_fail(KILN_ERR_INVALID_ARG, "%s '%s': dim %d is %lld (negative)", what, nm, i, (long long)shape[i]);
  int64_t numel, bytes;
  char s[200];
  graph_shape_str(rank, shape, s, sizeof s);
  if (!shape_numel(rank, shape, &numel) || !size_mul(numel, (int64_t)kiln_dtype_size(t), &bytes))
    return kiln_fail(KILN_ERR_NO_MEMORY, "%s '%s': shape %s of %s overflows the size range", what, nm, s,
                     kiln_dtype_name(t));
  if (kind != T_INPUT && numel > 0 && !data)
    return kiln_fail(KILN_ERR_INVALID_ARG, "%s '%s': data is NULL", what, nm);
  if (!grow((void **)&g->tensors, &g->cap_tensors, g->n_tensors + 1, sizeof(Tensor)))
    return kiln_fail(KILN_ERR_NO_MEMORY, "%s '%s': out of memory", what, nm);
  int id = g->n_tensors;
  const char *tn = tensor_name(g, name, id);
  void *copy = NULL;
  if (kind != T_INPUT && t == KILN_STRING) {  /* the pointers and the bytes they point at */
    for (int64_t i = 0; i < numel; i++)
      if (!((const char *const *)data)[i])
        return kiln_fail(KILN_ERR_INVALID_ARG, "%s '%s': string element %lld is NULL", what, nm, (long long)i);
    if (numel > 0 && !(copy = (void *)arena_strings(&g->arena, data, numel)))
      return kiln_fail(KILN_ERR_NO_MEMORY, "%s '%s': out of memory for %lld strings", what, nm, (long long)numel);
  } else if (kind != T_INPUT && bytes > 0) {
    if ((uint64_t)bytes > SIZE_MAX / 2 || !(copy = arena_alloc(&g->arena, (size_t)bytes)))
      return kiln_fail(KILN_ERR_NO_MEMORY, "%s '%s': out of memory for %lld bytes of data", what, nm,
                       (long long)bytes);
    memcpy(copy, data, (size_t)bytes);
  }
  if (!tn) return kiln_fail(KILN_ERR_NO_MEMORY, "%s '%s': out of memory", what, nm);
  Tensor *x = &g->tensors[id];
  memset(x, 0, sizeof *x);
  x->id = id;
  x->kind = kind;
  x->dtype = t;
  x->rank = rank;
  if (rank) memcpy(x->shape, shape, sizeof(int64_t) * (size_t)rank);
  x->numel = numel;
  x->name = tn;
  x->data = copy;
  x->node = -1;
  g->n_tensors++;
  if (out) *out = id;
  return KILN_OK;
}

/* ---- shape and dtype inference ---- */

/* Everything infer() needs to name the node in a message. */
typedef struct Ctx {
  const Graph *g;
  const char *name;
  OpKind op;
  const int *in;
} Ctx;

static kiln_status fail(const Ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static kiln_status fail(const Ctx *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  kiln_status r = vnode_fail(c->name, c->op, KILN_ERR_INVALID_ARG, fmt, ap);
  va_end(ap);
  return r;
}

static const Tensor *inp(const Ctx *c, int i) { return &c->g->tensors[c->in[i]]; }

/* dtype classes for the rules below */
enum { D_FLOAT = 1, D_SINT = 2, D_UINT = 4, D_BOOL = 8, D_STR = 16, D_NUM = D_FLOAT | D_SINT | D_UINT,
       D_INT = D_SINT | D_UINT };

static int dclass(kiln_dtype t) {
  if (t == KILN_STRING) return D_STR;
  if (dtype_is_float(t)) return D_FLOAT;
  if (t == KILN_BOOL) return D_BOOL;
  return dtype_is_signed(t) ? D_SINT : D_UINT;
}

static const char *class_desc(int mask) {
  switch (mask) {
  case D_FLOAT: return "a float dtype (f32, f64, f16, bf16)";
  case D_FLOAT | D_SINT: return "a float or signed integer dtype";
  case D_NUM: return "a numeric dtype (not bool)";
  case D_BOOL: return "bool";
  case D_BOOL | D_INT: return "bool or an integer dtype";
  case D_INT: return "an integer dtype";
  case D_FLOAT | D_INT | D_BOOL: return "any dtype but string";
  case D_NUM | D_BOOL | D_STR: return "any dtype";
  case D_STR: return "string";
  }
  return "another dtype";
}

static kiln_status need_class(const Ctx *c, int i, int mask) {
  const Tensor *t = inp(c, i);
  if (dclass(t->dtype) & mask) return KILN_OK;
  return fail(c, "input %d '%s' has dtype %s, expected %s", i, t->name, kiln_dtype_name(t->dtype),
              class_desc(mask));
}

static kiln_status same_dtype(const Ctx *c, int i, int j) {
  const Tensor *a = inp(c, i), *b = inp(c, j);
  if (a->dtype == b->dtype) return KILN_OK;
  return fail(c, "input %d '%s' has dtype %s but input %d '%s' has dtype %s; they must match", i, a->name,
              kiln_dtype_name(a->dtype), j, b->name, kiln_dtype_name(b->dtype));
}

static int unary_class(OpKind op) {
  switch (op) {
  case OP_NEG: return D_FLOAT | D_SINT;
  case OP_ABS: case OP_RELU: case OP_SIGN: return D_NUM; /* sign of an unsigned value is 0 or 1 (ONNX Sign) */
  case OP_NOT: return D_BOOL | D_INT;
  default: return D_FLOAT;
  }
}

static int binary_class(OpKind op) {
  switch (op) {
  case OP_EQ: case OP_NE: return D_NUM | D_BOOL | D_STR;  /* strings: byte-wise equality */
  case OP_AND: case OP_OR: case OP_XOR: return D_BOOL | D_INT;  /* bool: logical; ints: bitwise */
  case OP_SHL: case OP_SHR: return D_INT;
  default: return D_NUM;
  }
}

static bool is_compare(OpKind op) { return op >= OP_EQ && op <= OP_GE; }

/* Output description filled by infer(). */
typedef struct Out { kiln_dtype dtype; int rank; int64_t shape[KILN_MAX_RANK]; } Out;

static kiln_status broadcast_inputs(const Ctx *c, int n, Out *o) {
  o->rank = 0;
  for (int i = 0; i < n; i++) {
    const Tensor *t = inp(c, i);
    int r;
    int64_t s[KILN_MAX_RANK];
    if (!graph_broadcast(o->rank, o->shape, t->rank, t->shape, &r, s)) {
      char a[200], b[200];
      graph_shape_str(o->rank, o->shape, a, sizeof a);
      graph_shape_str(t->rank, t->shape, b, sizeof b);
      return fail(c, "input %d '%s' of shape %s does not broadcast with %s", i, t->name, b, a);
    }
    o->rank = r;
    memcpy(o->shape, s, sizeof s);
  }
  return KILN_OK;
}

static kiln_status check_shape_attr(const Ctx *c, const Attr *a) {
  if (a->shape_rank < 0 || a->shape_rank > KILN_MAX_RANK)
    return fail(c, "attribute shape has rank %d, outside 0..%d", a->shape_rank, KILN_MAX_RANK);
  for (int i = 0; i < a->shape_rank; i++)
    if (a->shape[i] < 0) return fail(c, "attribute shape dim %d is %lld (negative)", i, (long long)a->shape[i]);
  return KILN_OK;
}

static void set_shape_from_attr(Out *o, const Attr *a) {
  o->rank = a->shape_rank;
  memcpy(o->shape, a->shape, sizeof(int64_t) * (size_t)a->shape_rank);
}

static kiln_status infer_reshape(const Ctx *c, const Attr *a, Out *o) {
  kiln_status s = check_shape_attr(c, a);
  if (s) return s;
  const Tensor *x = inp(c, 0);
  int64_t n;
  char b1[200], b2[200];
  graph_shape_str(x->rank, x->shape, b1, sizeof b1);
  graph_shape_str(a->shape_rank, a->shape, b2, sizeof b2);
  if (!shape_numel(a->shape_rank, a->shape, &n) || n != x->numel)
    return fail(c, "cannot reshape '%s' of shape %s (%lld elements) to %s", x->name, b1, (long long)x->numel, b2);
  set_shape_from_attr(o, a);
  return KILN_OK;
}

static kiln_status infer_transpose(const Ctx *c, const Attr *a, Out *o) {
  const Tensor *x = inp(c, 0);
  bool seen[KILN_MAX_RANK] = { false };
  for (int i = 0; i < x->rank; i++) {
    int p = a->perm[i];
    if (p < 0 || p >= x->rank || seen[p])
      return fail(c, "perm is not a permutation of 0..%d (entry %d is %d)", x->rank - 1, i, p);
    seen[p] = true;
    o->shape[i] = x->shape[p];
  }
  o->rank = x->rank;
  return KILN_OK;
}

static kiln_status infer_slice(const Ctx *c, const Attr *a, Out *o) {
  kiln_status s = check_shape_attr(c, a);
  if (s) return s;
  const Tensor *x = inp(c, 0);
  if (a->shape_rank != x->rank)
    return fail(c, "slice output rank %d differs from input '%s' rank %d", a->shape_rank, x->name, x->rank);
  for (int r = 0; r < x->rank; r++) {
    int64_t d = x->shape[r], n = a->shape[r], st = a->starts[r], step = a->steps[r], last;
    if (step == 0) return fail(c, "axis %d: step is 0", r);
    if (n == 0) continue;
    if (st < 0 || st >= d || __builtin_mul_overflow(n - 1, step, &last) || __builtin_add_overflow(st, last, &last) ||
        last < 0 || last >= d)
      return fail(c, "axis %d: %lld elements from %lld in steps of %lld leave 0..%lld", r, (long long)n,
                  (long long)st, (long long)step, (long long)d - 1);
  }
  set_shape_from_attr(o, a);
  return KILN_OK;
}

static kiln_status infer_concat(const Ctx *c, int n_in, const Attr *a, Out *o) {
  const Tensor *x = inp(c, 0);
  if (x->rank == 0) return fail(c, "input 0 '%s' is a scalar (rank 0); concat needs rank >= 1", x->name);
  if (a->axis < 0 || a->axis >= x->rank) return fail(c, "axis %d is outside 0..%d", a->axis, x->rank - 1);
  o->rank = x->rank;
  memcpy(o->shape, x->shape, sizeof o->shape);
  for (int i = 1; i < n_in; i++) {
    const Tensor *t = inp(c, i);
    kiln_status s = same_dtype(c, 0, i);
    if (s) return s;
    char b1[200], b2[200];
    graph_shape_str(x->rank, x->shape, b1, sizeof b1);
    graph_shape_str(t->rank, t->shape, b2, sizeof b2);
    bool ok = t->rank == x->rank;
    for (int r = 0; ok && r < x->rank; r++)
      if (r != a->axis && t->shape[r] != x->shape[r]) ok = false;
    if (!ok)
      return fail(c, "input %d '%s' of shape %s does not match input 0 '%s' of shape %s outside axis %d", i,
                  t->name, b2, x->name, b1, a->axis);
    if (!size_add(o->shape[a->axis], t->shape[a->axis], &o->shape[a->axis]))
      return fail(c, "concatenated axis %d overflows", a->axis);
  }
  return KILN_OK;
}

static kiln_status infer_pad(const Ctx *c, const Attr *a, Out *o) {
  const Tensor *x = inp(c, 0);
  if ((unsigned)a->pad_mode > KILN_PAD_EDGE) return fail(c, "pad mode %d is not a kiln_pad_mode", (int)a->pad_mode);
  o->rank = x->rank;
  for (int r = 0; r < x->rank; r++) {
    int64_t d = x->shape[r], pb = a->pads[r], pe = a->pads[x->rank + r], n;
    if (pb < -d || pe < -d || __builtin_add_overflow(d, pb, &n) || __builtin_add_overflow(n, pe, &n) || n < 0)
      return fail(c, "axis %d: pads %lld and %lld do not fit dim %lld", r, (long long)pb, (long long)pe,
                  (long long)d);
    if (a->pad_mode == KILN_PAD_REFLECT && (pb > d - 1 || pe > d - 1) && (pb > 0 || pe > 0))
      return fail(c, "axis %d: reflect pads %lld and %lld must be smaller than dim %lld", r, (long long)pb,
                  (long long)pe, (long long)d);
    if (a->pad_mode == KILN_PAD_EDGE && d == 0 && (pb > 0 || pe > 0))
      return fail(c, "axis %d: edge padding of an empty dim", r);
    o->shape[r] = n;
  }
  return KILN_OK;
}

static kiln_status infer_expand(const Ctx *c, const Attr *a, Out *o) {
  kiln_status s = check_shape_attr(c, a);
  if (s) return s;
  const Tensor *x = inp(c, 0);
  char b1[200], b2[200];
  graph_shape_str(x->rank, x->shape, b1, sizeof b1);
  graph_shape_str(a->shape_rank, a->shape, b2, sizeof b2);
  bool ok = a->shape_rank >= x->rank;
  for (int i = 0; ok && i < x->rank; i++) {
    int64_t d = x->shape[i], e = a->shape[a->shape_rank - x->rank + i];
    if (d != e && d != 1) ok = false;
  }
  if (!ok) return fail(c, "cannot expand '%s' of shape %s to %s", x->name, b1, b2);
  set_shape_from_attr(o, a);
  return KILN_OK;
}

static kiln_status infer_gather(const Ctx *c, const Attr *a, Out *o) {
  const Tensor *x = inp(c, 0), *idx = inp(c, 1);
  if (x->rank == 0) return fail(c, "data '%s' is a scalar; gather needs rank >= 1", x->name);
  if (idx->dtype != KILN_I32 && idx->dtype != KILN_I64)
    return fail(c, "indices '%s' have dtype %s, expected i32 or i64", idx->name, kiln_dtype_name(idx->dtype));
  if (a->axis < 0 || a->axis >= x->rank) return fail(c, "axis %d is outside 0..%d", a->axis, x->rank - 1);
  if (x->rank - 1 + idx->rank > KILN_MAX_RANK)
    return fail(c, "output rank %d exceeds %d", x->rank - 1 + idx->rank, KILN_MAX_RANK);
  int64_t d = x->shape[a->axis];
  if (idx->kind == T_CONST && idx->data)
    for (int64_t i = 0; i < idx->numel; i++) {
      int64_t v = dtype_load_i64(idx->dtype, idx->data, i);
      if (v < -d || v >= d)
        return fail(c, "index %lld (element %lld of '%s') is outside -%lld..%lld", (long long)v, (long long)i,
                    idx->name, (long long)d, (long long)d - 1);
    }
  if (d == 0 && idx->numel > 0) return fail(c, "gather from axis %d of size 0", a->axis);
  o->rank = 0;
  for (int r = 0; r < a->axis; r++) o->shape[o->rank++] = x->shape[r];
  for (int r = 0; r < idx->rank; r++) o->shape[o->rank++] = idx->shape[r];
  for (int r = a->axis + 1; r < x->rank; r++) o->shape[o->rank++] = x->shape[r];
  return KILN_OK;
}

static kiln_status infer_tile(const Ctx *c, const Attr *a, Out *o) {
  kiln_status s = check_shape_attr(c, a);
  if (s) return s;
  const Tensor *x = inp(c, 0);
  if (a->shape_rank != x->rank)
    return fail(c, "tile output rank %d differs from input '%s' rank %d", a->shape_rank, x->name, x->rank);
  for (int r = 0; r < x->rank; r++) {
    int64_t d = x->shape[r], e = a->shape[r];
    if (d == 0 ? e != 0 : e % d != 0)
      return fail(c, "axis %d: output dim %lld is not a multiple of input dim %lld", r, (long long)e, (long long)d);
  }
  set_shape_from_attr(o, a);
  return KILN_OK;
}

static kiln_status infer_reduce(const Ctx *c, const Attr *a, Out *o) {
  const Tensor *x = inp(c, 0);
  if (a->n_axes < 1 || a->n_axes > x->rank)
    return fail(c, "%d axes for input '%s' of rank %d (need 1..rank)", a->n_axes, x->name, x->rank);
  if (a->keepdims != 0 && a->keepdims != 1) return fail(c, "keepdims is %d, expected 0 or 1", a->keepdims);
  bool red[KILN_MAX_RANK] = { false };
  for (int i = 0; i < a->n_axes; i++) {
    if (a->axes[i] < 0 || a->axes[i] >= x->rank || (i > 0 && a->axes[i] <= a->axes[i - 1]))
      return fail(c, "axes must be sorted, unique and in 0..%d (entry %d is %d)", x->rank - 1, i, a->axes[i]);
    red[a->axes[i]] = true;
  }
  o->rank = 0;
  for (int r = 0; r < x->rank; r++) {
    if (!red[r]) o->shape[o->rank++] = x->shape[r];
    else if (a->keepdims) o->shape[o->rank++] = 1;
  }
  return KILN_OK;
}

static kiln_status infer_arg(const Ctx *c, const Attr *a, Out *o) {
  const Tensor *x = inp(c, 0);
  if (x->rank == 0) return fail(c, "input '%s' is a scalar; %s needs rank >= 1", x->name, op_names[c->op]);
  if (a->axis < 0 || a->axis >= x->rank) return fail(c, "axis %d is outside 0..%d", a->axis, x->rank - 1);
  if (a->keepdims != 0 && a->keepdims != 1) return fail(c, "keepdims is %d, expected 0 or 1", a->keepdims);
  if (a->select_last != 0 && a->select_last != 1)
    return fail(c, "select_last is %d, expected 0 or 1", a->select_last);
  if (x->shape[a->axis] == 0) {
    bool others_empty = false; /* an empty output needs no index */
    for (int r = 0; r < x->rank; r++)
      if (r != a->axis && x->shape[r] == 0) others_empty = true;
    if (!others_empty) return fail(c, "axis %d of '%s' is empty: no index to return", a->axis, x->name);
  }
  Attr ra = { 0 };
  ra.n_axes = 1;
  ra.axes[0] = a->axis;
  ra.keepdims = a->keepdims;
  kiln_status s = infer_reduce(c, &ra, o);
  o->dtype = KILN_I64;
  return s;
}

static kiln_status infer_matmul(const Ctx *c, Out *o) {
  const Tensor *a = inp(c, 0), *b = inp(c, 1);
  if (a->rank < 1 || b->rank < 1)
    return fail(c, "matmul operands must have rank >= 1 ('%s' has %d, '%s' has %d)", a->name, a->rank, b->name,
                b->rank);
  int64_t k1 = a->shape[a->rank - 1], k2 = b->rank == 1 ? b->shape[0] : b->shape[b->rank - 2];
  char b1[200], b2[200];
  graph_shape_str(a->rank, a->shape, b1, sizeof b1);
  graph_shape_str(b->rank, b->shape, b2, sizeof b2);
  if (k1 != k2) return fail(c, "inner dims differ: '%s' %s and '%s' %s", a->name, b1, b->name, b2);
  int ba = a->rank > 2 ? a->rank - 2 : 0, bb = b->rank > 2 ? b->rank - 2 : 0;
  if (!graph_broadcast(ba, a->shape, bb, b->shape, &o->rank, o->shape))
    return fail(c, "batch dims of '%s' %s and '%s' %s do not broadcast", a->name, b1, b->name, b2);
  if (a->rank > 1) o->shape[o->rank++] = a->shape[a->rank - 2];
  if (b->rank > 1) o->shape[o->rank++] = b->shape[b->rank - 1];
  return KILN_OK;
}

/* One spatial output dim: floor_or_ceil((in + pb + pe - ((k-1)*d + 1)) / s) + 1. -1 if the window
 * does not fit. */
static int64_t window_out(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe, int ceil_mode) {
  int64_t ek, span;
  if (!size_mul(k - 1, d, &ek) || !size_add(ek, 1, &ek) || !size_add(in, pb, &span) || !size_add(span, pe, &span))
    return -1;
  if (span < ek) return -1;
  span -= ek;
  int64_t n = span / s + 1;
  if (ceil_mode) {
    int64_t start;
    if (span % s) n++; /* n <= span/2 + 2 here (s >= 2): no overflow */
    /* the last window must start inside the input or the begin pad (in + pb fits: checked
     * above); also when floor and ceil agree, as ONNX and PyTorch drop it then too */
    if (n > 1 && (__builtin_mul_overflow(n - 1, s, &start) || start >= in + pb)) n--;
  }
  return n;
}

static kiln_status check_window(const Ctx *c, int spatial, const int64_t *strides, const int64_t *dil,
                                const int64_t *pads) {
  for (int i = 0; i < spatial; i++) {
    if (strides[i] < 1) return fail(c, "stride %d is %lld (must be >= 1)", i, (long long)strides[i]);
    if (dil[i] < 1) return fail(c, "dilation %d is %lld (must be >= 1)", i, (long long)dil[i]);
    if (pads[i] < 0 || pads[spatial + i] < 0)
      return fail(c, "spatial dim %d: pads %lld, %lld are negative", i, (long long)pads[i],
                  (long long)pads[spatial + i]);
  }
  return KILN_OK;
}

static kiln_status infer_conv(const Ctx *c, const Attr *a, Out *o) {
  const Tensor *x = inp(c, 0), *w = inp(c, 1);
  const kiln_conv_params *p = &a->conv;
  if (p->spatial < 1 || p->spatial > 3) return fail(c, "%d spatial dims (must be 1..3)", p->spatial);
  if (x->rank != p->spatial + 2 || w->rank != p->spatial + 2)
    return fail(c, "x '%s' has rank %d and w '%s' rank %d; %d spatial dims need rank %d", x->name, x->rank,
                w->name, w->rank, p->spatial, p->spatial + 2);
  kiln_status s = check_window(c, p->spatial, p->strides, p->dilations, p->pads);
  if (s) return s;
  int64_t C = x->shape[1], M = w->shape[0], grp = p->group;
  if (grp < 1) return fail(c, "group is %lld (must be >= 1)", (long long)grp);
  if (C % grp || M % grp || w->shape[1] != C / grp)
    return fail(c, "x '%s' has %lld channels and w '%s' is [%lld,%lld,...]; with group %lld need C %% group == 0, "
                "M %% group == 0 and w dim 1 == C/group", x->name, (long long)C, w->name, (long long)M,
                (long long)w->shape[1], (long long)grp);
  o->rank = x->rank;
  o->shape[0] = x->shape[0];
  o->shape[1] = M;
  for (int i = 0; i < p->spatial; i++) {
    int64_t k = w->shape[2 + i];
    if (k < 1) return fail(c, "kernel dim %d of w '%s' is %lld", i, w->name, (long long)k);
    int64_t n = window_out(x->shape[2 + i], k, p->strides[i], p->dilations[i], p->pads[i], p->pads[p->spatial + i], 0);
    if (n < 1)
      return fail(c, "spatial dim %d: input %lld with pads %lld+%lld is smaller than the dilated kernel (%lld, dilation %lld)",
                  i, (long long)x->shape[2 + i], (long long)p->pads[i], (long long)p->pads[p->spatial + i],
                  (long long)k, (long long)p->dilations[i]);
    o->shape[2 + i] = n;
  }
  return KILN_OK;
}

static kiln_status infer_pool(const Ctx *c, const Attr *a, Out *o) {
  const Tensor *x = inp(c, 0);
  const kiln_pool_params *p = &a->pool;
  if (p->spatial < 1 || p->spatial > 3) return fail(c, "%d spatial dims (must be 1..3)", p->spatial);
  if (x->rank != p->spatial + 2)
    return fail(c, "x '%s' has rank %d; %d spatial dims need rank %d", x->name, x->rank, p->spatial, p->spatial + 2);
  kiln_status s = check_window(c, p->spatial, p->strides, p->dilations, p->pads);
  if (s) return s;
  if (p->ceil_mode != 0 && p->ceil_mode != 1) return fail(c, "ceil_mode is %d, expected 0 or 1", p->ceil_mode);
  if (p->count_include_pad != 0 && p->count_include_pad != 1)
    return fail(c, "count_include_pad is %d, expected 0 or 1", p->count_include_pad);
  o->rank = x->rank;
  o->shape[0] = x->shape[0];
  o->shape[1] = x->shape[1];
  for (int i = 0; i < p->spatial; i++) {
    if (p->kernel[i] < 1) return fail(c, "kernel dim %d is %lld (must be >= 1)", i, (long long)p->kernel[i]);
    int64_t n = window_out(x->shape[2 + i], p->kernel[i], p->strides[i], p->dilations[i], p->pads[i],
                           p->pads[p->spatial + i], p->ceil_mode);
    if (n < 1)
      return fail(c, "spatial dim %d: input %lld with pads %lld+%lld is smaller than the dilated kernel %lld", i,
                  (long long)x->shape[2 + i], (long long)p->pads[i], (long long)p->pads[p->spatial + i],
                  (long long)p->kernel[i]);
    o->shape[2 + i] = n;
  }
  return KILN_OK;
}

/* StringNormalizer: [C] or [1, C]; stopwords shorten it, so with stopwords the input must
 * be constant; when every string goes the output is one empty string (ONNX). */
static kiln_status infer_normalize(const Ctx *c, const Attr *a, Out *o) {
  const Tensor *x = inp(c, 0);
  kiln_status s = need_class(c, 0, D_STR);
  if (s) return s;
  const StrAttr *sa = a->str;
  if (!sa) return fail(c, "no attributes");
  if (sa->case_change < 0 || sa->case_change > 2) return fail(c, "case_change is %d (0, 1 or 2)", sa->case_change);
  if (sa->n_words < 0 || (sa->n_words && !sa->words)) return fail(c, "%d stopwords, NULL list", sa->n_words);
  for (int i = 0; i < sa->n_words; i++)
    if (!sa->words[i]) return fail(c, "stopword %d is NULL", i);
  if (x->rank != 1 && !(x->rank == 2 && x->shape[0] == 1))
    return fail(c, "input '%s' has rank %d; StringNormalizer takes [C] or [1, C]", x->name, x->rank);
  if (!sa->n_words) return KILN_OK;
  if (x->kind != T_CONST)
    return graph_node_error(c->g, c->op, KILN_ERR_UNSUPPORTED,
                            "with stopwords the output length depends on the values of '%s', which must be "
                            "constant (kiln's shapes are static)", x->name);
  int64_t kept = 0;
  for (int64_t i = 0; i < x->numel; i++) kept += str_keep(sa, ((const char *const *)x->data)[i]);
  o->shape[x->rank - 1] = kept ? kept : 1;
  return KILN_OK;
}

static bool label_dtype(kiln_dtype t) { return dtype_valid((int)t) && t != KILN_BOOL; }

static kiln_status infer_label(const Ctx *c, const Attr *a, Out *o) {
  const StrAttr *sa = a->str;
  if (!sa) return fail(c, "no attributes");
  if (!label_dtype(sa->key_t) || !label_dtype(sa->val_t))
    return fail(c, "keys %s -> values %s: LabelEncoder takes strings and numbers (not bool)", kiln_dtype_name(sa->key_t),
                kiln_dtype_name(sa->val_t));
  if (inp(c, 0)->dtype != sa->key_t)
    return fail(c, "input '%s' has dtype %s but the keys are %s", inp(c, 0)->name, kiln_dtype_name(inp(c, 0)->dtype),
                kiln_dtype_name(sa->key_t));
  if (sa->n_keys < 0 || (sa->n_keys && (!sa->keys || !sa->values)) || !sa->dflt)
    return fail(c, "%lld keys: keys, values and the default must be given", (long long)sa->n_keys);
  for (int64_t i = 0; sa->key_t == KILN_STRING && i < sa->n_keys; i++)
    if (!((const char *const *)sa->keys)[i]) return fail(c, "key %lld is NULL", (long long)i);
  for (int64_t i = 0; sa->val_t == KILN_STRING && i < sa->n_keys; i++)
    if (!((const char *const *)sa->values)[i]) return fail(c, "value %lld is NULL", (long long)i);
  if (sa->val_t == KILN_STRING && !*(const char *const *)sa->dflt) return fail(c, "the default string is NULL");
  o->dtype = sa->val_t;
  return KILN_OK;
}

/* Checks one node and computes its output dtype and shape. Pure: reads g, changes nothing. */
static kiln_status infer(const Ctx *c, int n_in, const Attr *a, Out *o) {
  OpKind op = c->op;
  const Tensor *x = inp(c, 0);
  kiln_status s = KILN_OK;
  o->dtype = x->dtype;
  o->rank = x->rank;
  memcpy(o->shape, x->shape, sizeof o->shape);
  switch (op) {
  case OP_NEG: case OP_ABS: case OP_EXP: case OP_LOG: case OP_SQRT: case OP_RSQRT: case OP_RECIPROCAL:
  case OP_TANH: case OP_SIGMOID: case OP_RELU: case OP_GELU_ERF: case OP_GELU_TANH: case OP_ERF: case OP_SIN:
  case OP_COS: case OP_FLOOR: case OP_CEIL: case OP_ROUND: case OP_SIGN: case OP_NOT: case OP_ISNAN:
  case OP_ISINF:
    if ((s = need_class(c, 0, unary_class(op)))) return s;
    if (op == OP_ISNAN || op == OP_ISINF) o->dtype = KILN_BOOL;
    return KILN_OK;
  case OP_ADD: case OP_SUB: case OP_MUL: case OP_DIV: case OP_POW: case OP_MAX: case OP_MIN: case OP_MOD:
  case OP_FMOD: case OP_EQ: case OP_NE: case OP_LT: case OP_LE: case OP_GT: case OP_GE: case OP_AND: case OP_OR:
  case OP_XOR: case OP_SHL: case OP_SHR:
    if ((s = same_dtype(c, 0, 1)) || (s = need_class(c, 0, binary_class(op)))) return s;
    if (is_compare(op)) o->dtype = KILN_BOOL;
    return broadcast_inputs(c, 2, o);
  case OP_WHERE:
    if (x->dtype != KILN_BOOL)
      return fail(c, "condition '%s' has dtype %s, expected bool", x->name, kiln_dtype_name(x->dtype));
    if ((s = same_dtype(c, 1, 2))) return s;
    o->dtype = inp(c, 1)->dtype;
    return broadcast_inputs(c, 3, o);
  case OP_CAST:
    if (!dtype_valid((int)a->to)) return fail(c, "target dtype %d is not a kiln_dtype", (int)a->to);
    if ((x->dtype == KILN_STRING) != (a->to == KILN_STRING))
      return fail(c, "cast of '%s' from %s to %s: strings do not convert to or from numbers", x->name,
                  kiln_dtype_name(x->dtype), kiln_dtype_name(a->to));
    o->dtype = a->to;
    return KILN_OK;
  case OP_RESHAPE: return infer_reshape(c, a, o);
  case OP_TRANSPOSE: return infer_transpose(c, a, o);
  case OP_SLICE: return infer_slice(c, a, o);
  case OP_CONCAT: return infer_concat(c, n_in, a, o);
  case OP_PAD:
    if ((s = need_class(c, 0, D_NUM | D_BOOL))) return s;  /* a string has no pad value */
    return infer_pad(c, a, o);
  case OP_EXPAND: return infer_expand(c, a, o);
  case OP_GATHER: return infer_gather(c, a, o);
  case OP_TILE: return infer_tile(c, a, o);
  case OP_REDUCE_SUM: case OP_REDUCE_MAX: case OP_REDUCE_MIN: case OP_REDUCE_PROD:
    if ((s = need_class(c, 0, D_NUM))) return s;
    return infer_reduce(c, a, o);
  case OP_ARGMAX: case OP_ARGMIN:
    if ((s = need_class(c, 0, D_NUM))) return s;
    return infer_arg(c, a, o);
  case OP_MATMUL:
    if ((s = same_dtype(c, 0, 1)) || (s = need_class(c, 0, D_NUM))) return s;
    return infer_matmul(c, o);
  case OP_CONV:
    if ((s = same_dtype(c, 0, 1)) || (s = need_class(c, 0, D_FLOAT))) return s;
    return infer_conv(c, a, o);
  case OP_MAX_POOL: case OP_AVG_POOL:  /* a max is exact on any numeric dtype (ONNX MaxPool-12: int8, uint8) */
    if ((s = need_class(c, 0, op == OP_MAX_POOL ? D_NUM : D_FLOAT))) return s;
    return infer_pool(c, a, o);
  case OP_STR_NORMALIZE: return infer_normalize(c, a, o);
  case OP_STR_CONCAT:
    if ((s = need_class(c, 0, D_STR)) || (s = need_class(c, 1, D_STR))) return s;
    return broadcast_inputs(c, 2, o);
  case OP_REGEX_MATCH:
    if ((s = need_class(c, 0, D_STR))) return s;
    if (!a->str || !a->str->pattern) return fail(c, "no pattern");
    {
      regex_t re;
      if ((s = str_regex_compile(a->str->pattern, &re))) {
        kiln_error_prefix("node '%s' (%s): ", c->name, op_names[op]);
        return s;
      }
      regfree(&re);
    }
    o->dtype = KILN_BOOL;
    return KILN_OK;
  case OP_LABEL_ENCODE: return infer_label(c, a, o);
  case OP_ALL_REDUCE_MEAN: return need_class(c, 0, D_FLOAT);  /* a mean of whole numbers is no whole number */
  case OP_COUNT: break;
  }
  KILN_ASSERT(!"unknown op");
  return KILN_ERR_INVALID_ARG;
}

/* Ops whose Attr is ignored: their node stores a zeroed Attr, so equal nodes compare equal. */
static bool op_has_attr(OpKind op) { return op >= OP_CAST; }

/* ---- adding nodes ---- */

kiln_status graph_add(Graph *g, OpKind op, int n_in, const int *in, const Attr *attr, int *out) {
  if ((unsigned)op >= OP_COUNT) return kiln_fail(KILN_ERR_INVALID_ARG, "graph_add: op %d is not an OpKind", (int)op);
  if (op_arity[op] >= 0 ? n_in != op_arity[op] : n_in < 1)
    return graph_node_error(g, op, KILN_ERR_INVALID_ARG, "%d inputs, expected %s%d", n_in,
                            op_arity[op] < 0 ? "at least " : "", op_arity[op] < 0 ? 1 : op_arity[op]);
  if (!in) return graph_node_error(g, op, KILN_ERR_INVALID_ARG, "inputs are NULL");
  for (int i = 0; i < n_in; i++)
    if (in[i] < 0 || in[i] >= g->n_tensors)
      return graph_node_error(g, op, KILN_ERR_INVALID_ARG, "input %d is tensor %d; the graph has tensors 0..%d", i,
                              in[i], g->n_tensors - 1);
  Attr zero = { 0 };
  const Attr *a = attr && op_has_attr(op) ? attr : &zero;
  Ctx c = { g, g->node_name ? g->node_name : op_names[op], op, in };
  Out o;
  kiln_status s = infer(&c, n_in, a, &o);
  if (s) return s;
  int64_t numel, bytes;
  if (!shape_numel(o.rank, o.shape, &numel) || !size_mul(numel, (int64_t)kiln_dtype_size(o.dtype), &bytes)) {
    char b[200];
    graph_shape_str(o.rank, o.shape, b, sizeof b);
    return graph_node_error(g, op, KILN_ERR_NO_MEMORY, "output shape %s overflows the size range", b);
  }
  /* Reserve everything before writing anything. */
  if (!grow((void **)&g->tensors, &g->cap_tensors, g->n_tensors + 1, sizeof(Tensor)) ||
      !grow((void **)&g->nodes, &g->cap_nodes, g->n_nodes + 1, sizeof(Node)))
    return graph_node_error(g, op, KILN_ERR_NO_MEMORY, "out of memory");
  int id = g->n_tensors;
  int *ins = arena_alloc(&g->arena, sizeof(int) * (size_t)n_in);
  const char *tn = tensor_name(g, NULL, id);
  const char *nn = g->node_name ? arena_strdup(&g->arena, g->node_name) : op_names[op];
  if (!ins || !tn || !nn) return graph_node_error(g, op, KILN_ERR_NO_MEMORY, "out of memory");
  memcpy(ins, in, sizeof(int) * (size_t)n_in);
  const StrAttr *str = a->str ? str_attr_copy(&g->arena, a->str) : NULL;
  if (a->str && !str) return graph_node_error(g, op, KILN_ERR_NO_MEMORY, "out of memory");
  Node *n = &g->nodes[g->n_nodes];
  memset(n, 0, sizeof *n);
  n->op = op;
  n->n_in = n_in;
  n->in = ins;
  n->out = id;
  n->attr = *a;
  n->attr.str = str;
  n->name = nn;
  Tensor *t = &g->tensors[id];
  memset(t, 0, sizeof *t);
  t->id = id;
  t->kind = T_VALUE;
  t->dtype = o.dtype;
  t->rank = o.rank;
  memcpy(t->shape, o.shape, sizeof(int64_t) * (size_t)o.rank);
  t->numel = numel;
  t->name = tn;
  t->node = g->n_nodes;
  g->n_nodes++;
  g->n_tensors++;
  if (out) *out = id;
  return KILN_OK;
}

kiln_status graph_output(Graph *g, int tensor, const char *name) {
  if (tensor < 0 || tensor >= g->n_tensors)
    return kiln_fail(KILN_ERR_INVALID_ARG, "output: tensor %d is not in the graph (it has %d)", tensor, g->n_tensors);
  if (!grow((void **)&g->outputs, &g->cap_outputs, g->n_outputs + 1, sizeof(Output)))
    return kiln_fail(KILN_ERR_NO_MEMORY, "output '%s': out of memory", name ? name : g->tensors[tensor].name);
  const char *nm = name ? arena_strdup(&g->arena, name) : g->tensors[tensor].name;
  if (!nm) return kiln_fail(KILN_ERR_NO_MEMORY, "output '%s': out of memory", name);
  g->outputs[g->n_outputs++] = (Output){ tensor, nm };
  return KILN_OK;
}

kiln_status graph_assign(Graph *g, int param, int value) {
  if (param < 0 || param >= g->n_tensors)
    return kiln_fail(KILN_ERR_INVALID_ARG, "assign: param %d is not in the graph (it has %d)", param, g->n_tensors);
  if (value < 0 || value >= g->n_tensors)
    return kiln_fail(KILN_ERR_INVALID_ARG, "assign: value %d is not in the graph (it has %d)", value, g->n_tensors);
  const Tensor *p = &g->tensors[param], *v = &g->tensors[value];
  char b1[240], b2[240];
  if (p->kind != T_PARAM)
    return kiln_fail(KILN_ERR_INVALID_ARG, "assign: '%s' is a %s, not a param", p->name, kind_names[p->kind]);
  if (p->dtype == KILN_STRING)  /* a run's strings die with the next run; a param outlives it */
    return kiln_fail(KILN_ERR_INVALID_ARG, "assign: param '%s' holds strings, which cannot be assigned", p->name);
  if (p->dtype != v->dtype || p->rank != v->rank ||
      memcmp(p->shape, v->shape, sizeof(int64_t) * (size_t)p->rank) != 0)
    return kiln_fail(KILN_ERR_INVALID_ARG, "assign: param '%s' is %s but value '%s' is %s", p->name,
                     tstr(p, b1, sizeof b1), v->name, tstr(v, b2, sizeof b2));
  for (int i = 0; i < g->n_assigns; i++)
    if (g->assigns[i].param == param)
      return kiln_fail(KILN_ERR_INVALID_ARG, "assign: param '%s' is already assigned", p->name);
  if (!grow((void **)&g->assigns, &g->cap_assigns, g->n_assigns + 1, sizeof(Assign)))
    return kiln_fail(KILN_ERR_NO_MEMORY, "assign '%s': out of memory", p->name);
  g->assigns[g->n_assigns++] = (Assign){ param, value };
  return KILN_OK;
}

/* ---- checking and printing ---- */

static kiln_status check_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static kiln_status check_fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char msg[768];
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return kiln_fail(KILN_ERR_MODEL, "graph_check: %s", msg);
}

kiln_status graph_check(const Graph *g) {
  for (int i = 0; i < g->n_tensors; i++) {
    const Tensor *t = &g->tensors[i];
    int64_t n;
    if (t->id != i) return check_fail("tensor %d has id %d", i, t->id);
    if (!t->name) return check_fail("tensor %d has no name", i);
    if ((unsigned)t->kind > T_VALUE || !dtype_valid((int)t->dtype) || t->rank < 0 || t->rank > KILN_MAX_RANK)
      return check_fail("tensor '%s' has a bad kind, dtype or rank", t->name);
    if (!shape_numel(t->rank, t->shape, &n) || n != t->numel)
      return check_fail("tensor '%s': numel %lld does not match its shape", t->name, (long long)t->numel);
    if (t->kind == T_VALUE && (t->node < 0 || t->node >= g->n_nodes || g->nodes[t->node].out != i))
      return check_fail("value '%s' names producer %d, which does not produce it", t->name, t->node);
    if ((t->kind == T_PARAM || t->kind == T_CONST) && n > 0 && !t->data)
      return check_fail("%s '%s' has no data", kind_names[t->kind], t->name);
  }
  int last_out = -1;
  for (int k = 0; k < g->n_nodes; k++) {
    const Node *nd = &g->nodes[k];
    if ((unsigned)nd->op >= OP_COUNT) return check_fail("node %d has op %d", k, (int)nd->op);
    if (nd->out <= last_out || nd->out >= g->n_tensors)
      return check_fail("node %d '%s' output %d is out of order", k, nd->name, nd->out);
    last_out = nd->out;
    const Tensor *t = &g->tensors[nd->out];
    if (t->kind == T_VALUE && t->node != k)
      return check_fail("node %d '%s': its output '%s' names producer %d", k, nd->name, t->name, t->node);
    if (op_arity[nd->op] >= 0 ? nd->n_in != op_arity[nd->op] : nd->n_in < 1)
      return check_fail("node '%s' (%s) has %d inputs", nd->name, op_names[nd->op], nd->n_in);
    for (int i = 0; i < nd->n_in; i++)
      if (nd->in[i] < 0 || nd->in[i] >= nd->out)
        return check_fail("node '%s' (%s) input %d is tensor %d, not before its output %d", nd->name,
                          op_names[nd->op], i, nd->in[i], nd->out);
    Ctx c = { g, nd->name, nd->op, nd->in };
    Out o;
    kiln_status s = infer(&c, nd->n_in, &nd->attr, &o);
    if (s) {
      kiln_error_prefix("graph_check: ");
      return KILN_ERR_MODEL;
    }
    if (o.dtype != t->dtype || o.rank != t->rank || memcmp(o.shape, t->shape, sizeof(int64_t) * (size_t)o.rank)) {
      char b[240], b2[200];
      graph_shape_str(o.rank, o.shape, b2, sizeof b2);
      return check_fail("node '%s' (%s): recorded output %s differs from inferred %s%s", nd->name, op_names[nd->op],
                        tstr(t, b, sizeof b), kiln_dtype_name(o.dtype), b2);
    }
  }
  for (int i = 0; i < g->n_outputs; i++)
    if (g->outputs[i].tensor < 0 || g->outputs[i].tensor >= g->n_tensors || !g->outputs[i].name)
      return check_fail("output %d is tensor %d", i, g->outputs[i].tensor);
  for (int i = 0; i < g->n_assigns; i++) {
    const Assign *as = &g->assigns[i];
    if (as->param < 0 || as->param >= g->n_tensors || as->value < 0 || as->value >= g->n_tensors ||
        g->tensors[as->param].kind != T_PARAM)
      return check_fail("assign %d (%d <- %d) is malformed", i, as->param, as->value);
  }
  return KILN_OK;
}

static void print_attr(const Node *n, int in_rank, FILE *f) {
  const Attr *a = &n->attr;
  char b[200];
  switch (n->op) {
  case OP_CAST: fprintf(f, " to=%s", kiln_dtype_name(a->to)); break;
  case OP_RESHAPE: case OP_EXPAND: case OP_TILE: case OP_SLICE:
    graph_shape_str(a->shape_rank, a->shape, b, sizeof b);
    fprintf(f, " shape=%s", b);
    if (n->op == OP_SLICE) {
      graph_shape_str(in_rank, a->starts, b, sizeof b);
      fprintf(f, " starts=%s", b);
      graph_shape_str(in_rank, a->steps, b, sizeof b);
      fprintf(f, " steps=%s", b);
    }
    break;
  case OP_TRANSPOSE:
    fprintf(f, " perm=[");
    for (int i = 0; i < in_rank; i++) fprintf(f, "%s%d", i ? "," : "", a->perm[i]);
    fprintf(f, "]");
    break;
  case OP_PAD:
    graph_shape_str(2 * in_rank, a->pads, b, sizeof b);
    fprintf(f, " pads=%s mode=%d value=%g", b, (int)a->pad_mode, a->value);
    break;
  case OP_CONCAT: case OP_GATHER: fprintf(f, " axis=%d", a->axis); break;
  case OP_ARGMAX: case OP_ARGMIN:
    fprintf(f, " axis=%d keepdims=%d select_last=%d", a->axis, a->keepdims, a->select_last);
    break;
  case OP_REDUCE_SUM: case OP_REDUCE_MAX: case OP_REDUCE_MIN: case OP_REDUCE_PROD:
    fprintf(f, " axes=[");
    for (int i = 0; i < a->n_axes; i++) fprintf(f, "%s%d", i ? "," : "", a->axes[i]);
    fprintf(f, "] keepdims=%d", a->keepdims);
    break;
  case OP_CONV:
    fprintf(f, " group=%lld", (long long)a->conv.group);
    break;
  case OP_MAX_POOL: case OP_AVG_POOL:
    graph_shape_str(a->pool.spatial, a->pool.kernel, b, sizeof b);
    fprintf(f, " kernel=%s ceil=%d", b, a->pool.ceil_mode);
    break;
  default: break;
  }
}

void graph_print(const Graph *g, FILE *f) {
  char b[240];
  for (int i = 0; i < g->n_tensors; i++) {
    const Tensor *t = &g->tensors[i];
    if (t->kind == T_VALUE) {
      const Node *n = &g->nodes[t->node];
      fprintf(f, "%%%d %s = %s(", i, t->name, op_names[n->op]);
      for (int k = 0; k < n->n_in; k++) fprintf(f, "%s%%%d", k ? ", " : "", n->in[k]);
      fprintf(f, ")");
      print_attr(n, g->tensors[n->in[0]].rank, f);
      fprintf(f, " -> %s  ; node '%s'\n", tstr(t, b, sizeof b), n->name);
    } else {
      fprintf(f, "%%%d %s = %s %s\n", i, t->name, kind_names[t->kind], tstr(t, b, sizeof b));
    }
  }
  for (int i = 0; i < g->n_outputs; i++)
    fprintf(f, "output %s = %%%d\n", g->outputs[i].name, g->outputs[i].tensor);
  for (int i = 0; i < g->n_assigns; i++)
    fprintf(f, "assign %%%d <- %%%d\n", g->assigns[i].param, g->assigns[i].value);
}
