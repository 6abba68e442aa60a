/*
 * onnx_ops.c — one import rule per ONNX operator (default domain, opsets 7 and up).
 *
 * Takes a node's input tensor ids (already in the graph) and its attributes, adds the
 * kiln primitives or compositions that compute it, and hands back the output ids.
 * Operands that ONNX passes as tensors but kiln needs as numbers (shapes, axes, pads,
 * slice bounds, repeats) must be constant by the time the node is imported: they are
 * initializers, Constant nodes, or values graph_fold evaluated on the host (each node
 * whose inputs are all constant is folded as soon as it is added). Rules that change
 * between opsets look at im->opset. The table at the end maps op names to rules.
 */
#include "onnx_import.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct Call {
  int n_in; const int *in;
  int n_out; int *out;
  int op;                        /* the OpKind (or other code) the table gives the rule */
  const char *name;              /* ONNX op type */
} Call;

typedef kiln_status (*RuleFn)(Importer *im, Call *c);

/* ---- small helpers ---- */

static Tensor *T(Importer *im, int id) { return &im->g->tensors[id]; }
static int IN(const Call *c, int i) { return i < c->n_in ? c->in[i] : -1; }

static kiln_status need_in(Importer *im, const Call *c, int i) {
  if (IN(c, i) >= 0) return KILN_OK;
  if (IN(c, i) < -1) return im_fail(im, KILN_ERR_MODEL, "input %d is a sequence; a tensor is expected", i);
  return im_fail(im, KILN_ERR_MODEL, "required input %d is missing", i);
}

static int norm_axis(int64_t axis, int rank) {
  if (axis < -rank || axis >= rank) return -1;
  return (int)(axis < 0 ? axis + rank : axis);
}

static kiln_status bad_axis(Importer *im, int64_t axis, int rank) {
  return im_fail(im, KILN_ERR_MODEL, "axis %lld is outside -%d..%d", (long long)axis, rank, rank - 1);
}

/* Adds a primitive, then folds it if every input is constant. */
static kiln_status add(Importer *im, OpKind op, int n, const int *in, const Attr *a, int *out) {
  kiln_status s = graph_add(im->g, op, n, in, a, out);
  return s ? s : graph_fold(im->g, *out);
}

static kiln_status un(Importer *im, OpKind op, int x, int *out) { return add(im, op, 1, &x, NULL, out); }

static kiln_status bin(Importer *im, OpKind op, int a, int b, int *out) {
  int in[2] = { a, b };
  return add(im, op, 2, in, NULL, out);
}

static kiln_status where(Importer *im, int c, int a, int b, int *out) {
  int in[3] = { c, a, b };
  return add(im, OP_WHERE, 3, in, NULL, out);
}

static kiln_status scalar(Importer *im, kiln_dtype t, double v, int *out) { return graph_scalar(im->g, t, v, out); }

/* x op constant, the constant in x's dtype. */
static kiln_status binc(Importer *im, OpKind op, int x, double v, int *out) {
  int c;
  kiln_status s = scalar(im, T(im, x)->dtype, v, &c);
  return s ? s : bin(im, op, x, c, out);
}

/* constant op x */
static kiln_status cbin(Importer *im, OpKind op, double v, int x, int *out) {
  int c;
  kiln_status s = scalar(im, T(im, x)->dtype, v, &c);
  return s ? s : bin(im, op, c, x, out);
}

static kiln_status cast(Importer *im, int x, kiln_dtype to, int *out) {
  if (T(im, x)->dtype == to) { *out = x; return KILN_OK; }
  Attr a = { 0 };
  a.to = to;
  return add(im, OP_CAST, 1, &x, &a, out);
}

static kiln_status reshape(Importer *im, int x, int rank, const int64_t *shape, int *out) {
  Tensor *t = T(im, x);
  if (rank < 0 || rank > KILN_MAX_RANK) return im_fail(im, KILN_ERR_MODEL, "reshape to rank %d", rank);
  if (t->rank == rank && (!rank || !memcmp(t->shape, shape, sizeof(int64_t) * (size_t)rank))) { *out = x; return KILN_OK; }
  Attr a = { 0 };
  a.shape_rank = rank;
  if (rank) memcpy(a.shape, shape, sizeof(int64_t) * (size_t)rank);
  return add(im, OP_RESHAPE, 1, &x, &a, out);
}

static kiln_status transpose(Importer *im, int x, const int *perm, int *out) {
  int r = T(im, x)->rank;
  bool same = true;
  for (int i = 0; i < r; i++) same = same && perm[i] == i;
  if (same) { *out = x; return KILN_OK; }
  Attr a = { 0 };
  memcpy(a.perm, perm, sizeof(int) * (size_t)r);
  return add(im, OP_TRANSPOSE, 1, &x, &a, out);
}

/* x[start:start+n*step:step] along axis (bounds already valid). */
static kiln_status slice1(Importer *im, int x, int axis, int64_t start, int64_t n, int64_t step, int *out) {
  Tensor *t = T(im, x);
  if (axis < 0 || axis >= t->rank) return im_fail(im, KILN_ERR_MODEL, "input '%s' has rank %d, no axis %d", t->name, t->rank, axis);
  Attr a = { 0 };
  a.shape_rank = t->rank;
  for (int r = 0; r < t->rank; r++) a.shape[r] = t->shape[r], a.steps[r] = 1;
  a.starts[axis] = n ? start : 0, a.steps[axis] = step, a.shape[axis] = n;
  return add(im, OP_SLICE, 1, &x, &a, out);
}

static kiln_status insert_dim(Importer *im, int x, int at, int *out);

/* A reshape of a rank-1 [C] tensor to [1, C, 1, ...] for broadcasting over NCHW. */
static kiln_status per_channel(Importer *im, int v, int rank, int *out) {
  int64_t shape[KILN_MAX_RANK];
  for (int i = 0; i < rank; i++) shape[i] = 1;
  if (rank < 2) return im_fail(im, KILN_ERR_MODEL, "input has rank %d; a channel axis needs rank >= 2", rank);
  shape[1] = T(im, v)->numel;
  return reshape(im, v, rank, shape, out);
}

/* The values of a constant integer tensor (arena copy). */
static kiln_status const_ints(Importer *im, int id, const char *what, int64_t **vals, int *n) {
  Tensor *t = T(im, id);
  if (t->kind != T_CONST && t->kind != T_PARAM)
    return im_fail(im, KILN_ERR_UNSUPPORTED, "%s '%s' must be a constant (it is computed at run time)", what, t->name);
  if (!dtype_is_int(t->dtype) && t->dtype != KILN_BOOL)
    return im_fail(im, KILN_ERR_MODEL, "%s '%s' has dtype %s, expected an integer", what, t->name, kiln_dtype_name(t->dtype));
  if (t->numel > 1 << 20) return im_fail(im, KILN_ERR_UNSUPPORTED, "%s '%s' is too large", what, t->name);
  int64_t *v = arena_alloc(&im->tmp, sizeof(int64_t) * (size_t)(t->numel + 1));
  if (!v) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory");
  for (int64_t i = 0; i < t->numel; i++) v[i] = dtype_load_i64(t->dtype, t->data, i);
  *vals = v, *n = (int)t->numel;
  return KILN_OK;
}

static kiln_status const_f64(Importer *im, int id, const char *what, double *v) {
  *v = 0;  /* written on every path: callers read it only on success, but -O3 cannot tell */
  Tensor *t = T(im, id);
  if (t->kind != T_CONST && t->kind != T_PARAM)
    return im_fail(im, KILN_ERR_UNSUPPORTED, "%s '%s' must be a constant (it is computed at run time)", what, t->name);
  if (t->numel != 1) return im_fail(im, KILN_ERR_MODEL, "%s '%s' must hold one element", what, t->name);
  *v = dtype_load_f64(t->dtype, t->data, 0);
  return KILN_OK;
}

/* Axes from an attribute (older opsets) or an input (newer): n = -1 when absent. */
static kiln_status axes_arg(Importer *im, const Call *c, int input, const char *attr, int64_t **axes, int *n) {
  if (IN(c, input) >= 0) return const_ints(im, IN(c, input), "axes", axes, n);
  const int64_t *a = im_attr_ints(im, attr, n);
  *axes = (int64_t *)a;
  return KILN_OK;
}

/* Normalises axes (negative, duplicate) into a sorted list. */
static kiln_status norm_axes(Importer *im, const int64_t *axes, int n, int rank, int *out, int *n_out) {
  bool seen[KILN_MAX_RANK] = { false };
  for (int i = 0; i < n; i++) {
    int a = norm_axis(axes[i], rank);
    if (a < 0) return bad_axis(im, axes[i], rank);
    if (seen[a]) return im_fail(im, KILN_ERR_MODEL, "axis %lld is repeated", (long long)axes[i]);
    seen[a] = true;
  }
  *n_out = 0;
  for (int r = 0; r < rank; r++)
    if (seen[r]) out[(*n_out)++] = r;
  return KILN_OK;
}

static kiln_status give(int *out, int x) {
  *out = x;
  return KILN_OK;
}

static kiln_status identity_out(Call *c, int x) {
  c->out[0] = x;
  return KILN_OK;
}

/* ---- elementwise ---- */

static kiln_status r_unary(Importer *im, Call *c) {
  kiln_status s = need_in(im, c, 0);
  return s ? s : un(im, (OpKind)c->op, IN(c, 0), &c->out[0]);
}

/* Operands of arithmetic must share a dtype; ONNX only lets Pow differ. */
static kiln_status r_binary(Importer *im, Call *c) {
  kiln_status s;
  if ((s = need_in(im, c, 0)) || (s = need_in(im, c, 1))) return s;
  int a = IN(c, 0), b = IN(c, 1);
  OpKind op = (OpKind)c->op;
  if (op == OP_POW && T(im, b)->dtype != T(im, a)->dtype && (s = cast(im, b, T(im, a)->dtype, &b))) return s;
  if (op == OP_MOD) {
    bool f = im_attr_i(im, "fmod", 0) != 0;
    if (!f && dtype_is_float(T(im, a)->dtype))
      return im_fail(im, KILN_ERR_MODEL, "Mod of floats needs fmod=1");
    op = f ? OP_FMOD : OP_MOD;
  }
  if (op == OP_SHL) {
    const char *d = im_attr_s(im, "direction", "");
    if (!strcmp(d, "RIGHT")) op = OP_SHR;
    else if (strcmp(d, "LEFT")) return im_fail(im, KILN_ERR_MODEL, "direction '%s' is neither LEFT nor RIGHT", d);
  }
  return bin(im, op, a, b, &c->out[0]);
}

/* Sum, Mean, Max, Min over any number of inputs. */
static kiln_status r_variadic(Importer *im, Call *c) {
  if (c->n_in < 1) return im_fail(im, KILN_ERR_MODEL, "no inputs");
  kiln_status s;
  int acc = IN(c, 0);
  if ((s = need_in(im, c, 0))) return s;
  OpKind op = c->op == -1 ? OP_ADD : (OpKind)c->op;
  for (int i = 1; i < c->n_in; i++) {
    if ((s = need_in(im, c, i)) || (s = bin(im, op, acc, IN(c, i), &acc))) return s;
  }
  if (c->op == -1 && !strcmp(c->name, "Mean") && c->n_in > 1) return binc(im, OP_DIV, acc, c->n_in, &c->out[0]);
  return identity_out(c, acc);
}

static kiln_status r_where(Importer *im, Call *c) {
  kiln_status s;
  if ((s = need_in(im, c, 0)) || (s = need_in(im, c, 1)) || (s = need_in(im, c, 2))) return s;
  return where(im, IN(c, 0), IN(c, 1), IN(c, 2), &c->out[0]);
}

static kiln_status r_cast(Importer *im, Call *c) {
  kiln_status s = need_in(im, c, 0);
  if (s) return s;
  kiln_dtype to;
  if (!strcmp(c->name, "CastLike")) {
    if ((s = need_in(im, c, 1))) return s;
    to = T(im, IN(c, 1))->dtype;
  } else if ((s = onnx_elem_type((int32_t)im_attr_i(im, "to", 0), "cast target", &to))) {
    return s;
  }
  return cast(im, IN(c, 0), to, &c->out[0]);
}

static kiln_status r_identity(Importer *im, Call *c) {
  kiln_status s = need_in(im, c, 0);
  if (s) return s;
  c->out[0] = IN(c, 0);
  if (c->n_out > 1 && !strcmp(c->name, "Dropout")) {  /* inference: the mask is all true */
    Tensor *x = T(im, IN(c, 0));
    int one;
    Attr a = { 0 };
    a.shape_rank = x->rank;
    memcpy(a.shape, x->shape, sizeof a.shape);
    if ((s = scalar(im, KILN_BOOL, 1, &one))) return s;
    if (a.shape_rank == 0) c->out[1] = one;
    else if ((s = graph_add(im->g, OP_EXPAND, 1, &one, &a, &c->out[1]))) return s;
  }
  if (!strcmp(c->name, "Dropout") && IN(c, 2) >= 0) {
    double train, ratio = 0.5;
    if ((s = const_f64(im, IN(c, 2), "training_mode", &train))) return s;
    if (IN(c, 1) >= 0 && (s = const_f64(im, IN(c, 1), "ratio", &ratio))) return s;
    if (train != 0 && ratio != 0)  /* ratio 0 keeps everything: the identity even in training */
      return im_fail(im, KILN_ERR_UNSUPPORTED, "training_mode=1 (random dropout) is not supported");
  }
  return KILN_OK;
}

static kiln_status r_clip(Importer *im, Call *c) {
  kiln_status s = need_in(im, c, 0);
  if (s) return s;
  int x = IN(c, 0);
  if (im->opset < 11) {
    if ((s = binc(im, OP_MAX, x, im_attr_f(im, "min", -INFINITY), &x))) return s;
    return binc(im, OP_MIN, x, im_attr_f(im, "max", INFINITY), &c->out[0]);
  }
  if (IN(c, 1) >= 0 && (s = bin(im, OP_MAX, x, IN(c, 1), &x))) return s;
  if (IN(c, 2) >= 0 && (s = bin(im, OP_MIN, x, IN(c, 2), &x))) return s;
  return identity_out(c, x);
}

/* The activations with attributes, as compositions. */
static kiln_status activation(Importer *im, Call *c);

/* f16/bf16 compositions run in f32 and round once at the end, as ONNX references do. */
static kiln_status upcast_half(Importer *im, Call *c, RuleFn fn) {
  kiln_dtype dt = IN(c, 0) >= 0 ? T(im, IN(c, 0))->dtype : KILN_F32;
  if (dt != KILN_F16 && dt != KILN_BF16) return fn(im, c);
  int ins[8], y;
  kiln_status s;
  if (c->n_in > 8) return im_fail(im, KILN_ERR_MODEL, "too many inputs");
  for (int i = 0; i < c->n_in; i++) {
    ins[i] = c->in[i];
    if (ins[i] >= 0 && T(im, ins[i])->dtype == dt && (s = cast(im, ins[i], KILN_F32, &ins[i]))) return s;
  }
  Call c2 = *c;
  c2.in = ins, c2.n_out = 1, c2.out = &y;
  if ((s = fn(im, &c2))) return s;
  if (!dtype_is_float(T(im, y)->dtype)) return give(&c->out[0], y);  /* IsInf: bool */
  return cast(im, y, dt, &c->out[0]);
}

static kiln_status r_activation(Importer *im, Call *c) { return upcast_half(im, c, activation); }

static kiln_status activation(Importer *im, Call *c) {
  kiln_status s = need_in(im, c, 0);
  if (s) return s;
  int x = IN(c, 0), t, u, z, *y = &c->out[0];
  const char *op = c->name;
  if (!dtype_is_float(T(im, x)->dtype) && strcmp(op, "PRelu"))
    return im_fail(im, KILN_ERR_MODEL, "input has dtype %s, expected a float", kiln_dtype_name(T(im, x)->dtype));
#define TRY(e) do { if ((s = (e))) return s; } while (0)
  if (!strcmp(op, "LeakyRelu")) {
    TRY(binc(im, OP_LT, x, 0, &t)); TRY(binc(im, OP_MUL, x, im_attr_f(im, "alpha", 0.01f), &u));
    return where(im, t, u, x, y);
  }
  if (!strcmp(op, "PRelu")) {
    TRY(need_in(im, c, 1)); TRY(binc(im, OP_LT, x, 0, &t)); TRY(bin(im, OP_MUL, x, IN(c, 1), &u));
    return where(im, t, u, x, y);
  }
  if (!strcmp(op, "Elu")) {
    TRY(binc(im, OP_LT, x, 0, &t)); TRY(un(im, OP_EXP, x, &u)); TRY(binc(im, OP_SUB, u, 1, &u));
    TRY(binc(im, OP_MUL, u, im_attr_f(im, "alpha", 1), &u));
    return where(im, t, u, x, y);
  }
  if (!strcmp(op, "Selu")) {
    double al = im_attr_f(im, "alpha", 1.67326319217681884765625f), ga = im_attr_f(im, "gamma", 1.05070102214813232421875f);
    TRY(binc(im, OP_LE, x, 0, &t)); TRY(un(im, OP_EXP, x, &u)); TRY(binc(im, OP_MUL, u, al, &u));
    TRY(binc(im, OP_SUB, u, al, &u)); TRY(where(im, t, u, x, &z));
    return binc(im, OP_MUL, z, ga, y);
  }
  if (!strcmp(op, "HardSigmoid") || !strcmp(op, "HardSwish")) {
    bool swish = !strcmp(op, "HardSwish");
    TRY(binc(im, OP_MUL, x, swish ? 1.0 / 6 : im_attr_f(im, "alpha", 0.2f), &t));
    TRY(binc(im, OP_ADD, t, swish ? 0.5 : im_attr_f(im, "beta", 0.5f), &t));
    TRY(binc(im, OP_MIN, t, 1, &t));
    if (!swish) return binc(im, OP_MAX, t, 0, y);
    TRY(binc(im, OP_MAX, t, 0, &t));
    return bin(im, OP_MUL, x, t, y);
  }
  if (!strcmp(op, "Softplus") || !strcmp(op, "Mish")) {
    /* log(1 + exp(x)), written as max(x,0) + log(1 + exp(-|x|)) so large x does not overflow */
    TRY(un(im, OP_ABS, x, &t)); TRY(un(im, OP_NEG, t, &t)); TRY(un(im, OP_EXP, t, &t));
    TRY(binc(im, OP_ADD, t, 1, &t)); TRY(un(im, OP_LOG, t, &t)); TRY(binc(im, OP_MAX, x, 0, &u));
    if (!strcmp(op, "Softplus")) return bin(im, OP_ADD, u, t, y);
    TRY(bin(im, OP_ADD, u, t, &t)); TRY(un(im, OP_TANH, t, &t));
    return bin(im, OP_MUL, x, t, y);
  }
  if (!strcmp(op, "Softsign")) {
    TRY(un(im, OP_ABS, x, &t)); TRY(binc(im, OP_ADD, t, 1, &t));
    return bin(im, OP_DIV, x, t, y);
  }
  if (!strcmp(op, "ThresholdedRelu")) {
    TRY(binc(im, OP_GT, x, im_attr_f(im, "alpha", 1), &t)); TRY(scalar(im, T(im, x)->dtype, 0, &u));
    return where(im, t, x, u, y);
  }
  if (!strcmp(op, "Celu")) {
    double al = im_attr_f(im, "alpha", 1);
    TRY(binc(im, OP_DIV, x, al, &t)); TRY(un(im, OP_EXP, t, &t)); TRY(binc(im, OP_SUB, t, 1, &t));
    TRY(binc(im, OP_MUL, t, al, &t)); TRY(binc(im, OP_MIN, t, 0, &t)); TRY(binc(im, OP_MAX, x, 0, &u));
    return bin(im, OP_ADD, u, t, y);
  }
  if (!strcmp(op, "Shrink")) {
    double l = im_attr_f(im, "lambd", 0.5f), b = im_attr_f(im, "bias", 0);
    TRY(binc(im, OP_LT, x, -l, &t)); TRY(binc(im, OP_ADD, x, b, &u)); TRY(binc(im, OP_GT, x, l, &z));
    int v, zero;
    TRY(binc(im, OP_SUB, x, b, &v)); TRY(scalar(im, T(im, x)->dtype, 0, &zero)); TRY(where(im, z, v, zero, &v));
    return where(im, t, u, v, y);
  }
  if (!strcmp(op, "Swish")) {
    TRY(binc(im, OP_MUL, x, im_attr_f(im, "alpha", 1), &t)); TRY(un(im, OP_SIGMOID, t, &t));
    return bin(im, OP_MUL, x, t, y);
  }
  if (!strcmp(op, "Gelu")) {
    const char *ap = im_attr_s(im, "approximate", "none");
    if (!strcmp(ap, "tanh")) return un(im, OP_GELU_TANH, x, y);
    if (strcmp(ap, "none")) return im_fail(im, KILN_ERR_MODEL, "approximate='%s' is neither none nor tanh", ap);
    return un(im, OP_GELU_ERF, x, y);
  }
  if (!strcmp(op, "Tan")) {
    TRY(un(im, OP_SIN, x, &t)); TRY(un(im, OP_COS, x, &u));
    return bin(im, OP_DIV, t, u, y);
  }
  if (!strcmp(op, "Sinh") || !strcmp(op, "Cosh")) {
    TRY(un(im, OP_EXP, x, &t)); TRY(un(im, OP_NEG, x, &u)); TRY(un(im, OP_EXP, u, &u));
    TRY(bin(im, !strcmp(op, "Sinh") ? OP_SUB : OP_ADD, t, u, &t));
    return binc(im, OP_MUL, t, 0.5, y);
  }
  if (!strcmp(op, "Asinh") || !strcmp(op, "Acosh")) {  /* log(x + sqrt(x*x +- 1)) */
    TRY(bin(im, OP_MUL, x, x, &t)); TRY(binc(im, !strcmp(op, "Asinh") ? OP_ADD : OP_SUB, t, 1, &t));
    TRY(un(im, OP_SQRT, t, &t)); TRY(bin(im, OP_ADD, x, t, &t));
    return un(im, OP_LOG, t, y);
  }
  if (!strcmp(op, "Atanh")) {  /* 0.5 * log((1 + x) / (1 - x)) */
    TRY(binc(im, OP_ADD, x, 1, &t)); TRY(cbin(im, OP_SUB, 1, x, &u)); TRY(bin(im, OP_DIV, t, u, &t));
    TRY(un(im, OP_LOG, t, &t));
    return binc(im, OP_MUL, t, 0.5, y);
  }
  if (!strcmp(op, "Atan") || !strcmp(op, "Asin") || !strcmp(op, "Acos")) {
    /* atan z = 2 atan(z / (1 + sqrt(1 + z^2))): three halvings bring |z| under tan(pi/16),
     * where the odd series to z^11 is good to 1e-10 relative; asin x = 2 atan(x / (1 + sqrt(1 - x^2))) */
    int z = x, z2, q, term, sum;
    bool tan_in = op[1] == 't';
    for (int k = 0; k < 3; k++) {  /* for asin, the first step is asin's half-angle, two atan ones follow */
      TRY(bin(im, OP_MUL, z, z, &z2));
      if (!tan_in && k == 0) TRY(cbin(im, OP_SUB, 1, z2, &q)); else TRY(binc(im, OP_ADD, z2, 1, &q));
      TRY(un(im, OP_SQRT, q, &q)); TRY(binc(im, OP_ADD, q, 1, &q)); TRY(bin(im, OP_DIV, z, q, &z));
    }
    TRY(bin(im, OP_MUL, z, z, &z2));
    TRY(scalar(im, T(im, z)->dtype, -1.0 / 11, &sum));
    for (int n = 9; n >= 1; n -= 2) {  /* Horner in z^2: 1 - z^2/3 + z^4/5 - ... */
      TRY(bin(im, OP_MUL, sum, z2, &term));
      TRY(binc(im, OP_ADD, term, ((n - 1) / 2 % 2 ? -1.0 : 1.0) / n, &sum));
    }
    TRY(bin(im, OP_MUL, sum, z, &sum)); TRY(binc(im, OP_MUL, sum, 8, &sum));
    if (strcmp(op, "Acos")) return give(y, sum);
    return cbin(im, OP_SUB, M_PI / 2, sum, y);
  }
  if (!strcmp(op, "IsInf")) {
    bool pos = im_attr_i(im, "detect_positive", 1) != 0, neg = im_attr_i(im, "detect_negative", 1) != 0;
    TRY(un(im, OP_ISINF, x, &t));
    if (pos && neg) return identity_out(c, t);
    if (!pos && !neg) return bin(im, OP_XOR, t, t, y);  /* all false */
    TRY(binc(im, pos ? OP_GT : OP_LT, x, 0, &u));
    return bin(im, OP_AND, t, u, y);
  }
  return im_fail(im, KILN_ERR_UNSUPPORTED, "no rule");
}

/* ---- movement ---- */

static kiln_status r_reshape(Importer *im, Call *c) {
  kiln_status s;
  if ((s = need_in(im, c, 0)) || (s = need_in(im, c, 1))) return s;
  Tensor *x = T(im, IN(c, 0));
  int64_t *v;
  int n;
  if ((s = const_ints(im, IN(c, 1), "shape", &v, &n))) return s;
  if (n > KILN_MAX_RANK) return im_fail(im, KILN_ERR_UNSUPPORTED, "target rank %d exceeds %d", n, KILN_MAX_RANK);
  bool allowzero = im_attr_i(im, "allowzero", 0) != 0;
  int64_t shape[KILN_MAX_RANK], known = 1;
  int infer = -1;
  for (int i = 0; i < n; i++) {
    shape[i] = v[i];
    if (v[i] == 0 && !allowzero) {
      if (i >= x->rank) return im_fail(im, KILN_ERR_MODEL, "shape[%d] = 0 copies a dimension the input lacks", i);
      shape[i] = x->shape[i];
    }
    if (shape[i] == -1) {
      if (infer >= 0) return im_fail(im, KILN_ERR_MODEL, "shape has more than one -1");
      infer = i;
      continue;
    }
    if (shape[i] < 0) return im_fail(im, KILN_ERR_MODEL, "shape[%d] = %lld", i, (long long)shape[i]);
    if (!size_mul(known, shape[i], &known)) return im_fail(im, KILN_ERR_MODEL, "shape overflows");
  }
  if (infer >= 0) {
    if (known == 0 || x->numel % known)
      return im_fail(im, KILN_ERR_MODEL, "cannot infer -1: %lld elements into blocks of %lld", (long long)x->numel, (long long)known);
    shape[infer] = x->numel / known;
  } else if (known != x->numel) {
    return im_fail(im, KILN_ERR_MODEL, "%lld elements cannot take a shape of %lld", (long long)x->numel, (long long)known);
  }
  return reshape(im, IN(c, 0), n, shape, &c->out[0]);
}

static kiln_status r_flatten(Importer *im, Call *c) {
  kiln_status s = need_in(im, c, 0);
  if (s) return s;
  Tensor *x = T(im, IN(c, 0));
  int64_t axis = im_attr_i(im, "axis", 1);
  if (axis < 0) axis += x->rank;
  if (axis < 0 || axis > x->rank) return bad_axis(im, axis, x->rank);
  int64_t shape[2] = { 1, 1 };
  for (int r = 0; r < x->rank; r++) shape[r >= axis] *= x->shape[r];
  return reshape(im, IN(c, 0), 2, shape, &c->out[0]);
}

static kiln_status r_squeeze(Importer *im, Call *c) {
  kiln_status s = need_in(im, c, 0);
  if (s) return s;
  Tensor *x = T(im, IN(c, 0));
  bool unsq = !strcmp(c->name, "Unsqueeze");
  int64_t *axes;
  int n;
  if ((s = axes_arg(im, c, 1, "axes", &axes, &n))) return s;
  int64_t shape[KILN_MAX_RANK];
  int rank = 0;
  if (unsq) {
    if (n < 0) return im_fail(im, KILN_ERR_MODEL, "axes are missing");
    int out_rank = x->rank + n;
    if (out_rank > KILN_MAX_RANK) return im_fail(im, KILN_ERR_UNSUPPORTED, "output rank %d exceeds %d", out_rank, KILN_MAX_RANK);
    int ax[KILN_MAX_RANK], na;
    if ((s = norm_axes(im, axes, n, out_rank, ax, &na))) return s;
    bool ins[KILN_MAX_RANK] = { false };
    for (int i = 0; i < na; i++) ins[ax[i]] = true;
    for (int r = 0, k = 0; r < out_rank; r++) shape[rank++] = ins[r] ? 1 : x->shape[k++];
  } else {
    bool drop[KILN_MAX_RANK] = { false };
    if (n < 0) {
      for (int r = 0; r < x->rank; r++) drop[r] = x->shape[r] == 1;
    } else {
      int ax[KILN_MAX_RANK], na;
      if ((s = norm_axes(im, axes, n, x->rank, ax, &na))) return s;
      for (int i = 0; i < na; i++) {
        if (x->shape[ax[i]] != 1)
          return im_fail(im, KILN_ERR_MODEL, "axis %d has size %lld, not 1", ax[i], (long long)x->shape[ax[i]]);
        drop[ax[i]] = true;
      }
    }
    for (int r = 0; r < x->rank; r++)
      if (!drop[r]) shape[rank++] = x->shape[r];
  }
  return reshape(im, IN(c, 0), rank, shape, &c->out[0]);
}

static kiln_status r_transpose(Importer *im, Call *c) {
  kiln_status s = need_in(im, c, 0);
  if (s) return s;
  Tensor *x = T(im, IN(c, 0));
  int n, perm[KILN_MAX_RANK];
  const int64_t *p = im_attr_ints(im, "perm", &n);
  if (n >= 0 && n != x->rank) return im_fail(im, KILN_ERR_MODEL, "perm has %d entries for rank %d", n, x->rank);
  bool seen[KILN_MAX_RANK] = { false };
  for (int i = 0; i < x->rank; i++) {
    int64_t v = n >= 0 ? p[i] : x->rank - 1 - i;
    if (v < 0 || v >= x->rank || seen[v]) return im_fail(im, KILN_ERR_MODEL, "perm is not a permutation of 0..%d", x->rank - 1);
    seen[v] = true;
    perm[i] = (int)v;
  }
  return transpose(im, IN(c, 0), perm, &c->out[0]);
}

static kiln_status r_slice(Importer *im, Call *c) {
  kiln_status s = need_in(im, c, 0);
  if (s) return s;
  Tensor *x = T(im, IN(c, 0));
  int64_t *st, *en, *ax = NULL, *sp = NULL;
  int n, ne, na = -1, ns = -1;
  if (im->opset < 10) {
    st = (int64_t *)im_attr_ints(im, "starts", &n);
    en = (int64_t *)im_attr_ints(im, "ends", &ne);
    ax = (int64_t *)im_attr_ints(im, "axes", &na);
    if (n < 0 || ne < 0) return im_fail(im, KILN_ERR_MODEL, "starts and ends are required");
  } else {
    if ((s = need_in(im, c, 1)) || (s = need_in(im, c, 2))) return s;
    if ((s = const_ints(im, IN(c, 1), "starts", &st, &n)) || (s = const_ints(im, IN(c, 2), "ends", &en, &ne))) return s;
    if (IN(c, 3) >= 0 && (s = const_ints(im, IN(c, 3), "axes", &ax, &na))) return s;
    if (IN(c, 4) >= 0 && (s = const_ints(im, IN(c, 4), "steps", &sp, &ns))) return s;
  }
  if (n != ne || (na >= 0 && na != n) || (ns >= 0 && ns != n))
    return im_fail(im, KILN_ERR_MODEL, "starts, ends, axes and steps differ in length");
  Attr a = { 0 };
  a.shape_rank = x->rank;
  bool seen[KILN_MAX_RANK] = { false };
  for (int r = 0; r < x->rank; r++) a.shape[r] = x->shape[r], a.steps[r] = 1;
  for (int i = 0; i < n; i++) {
    int r = norm_axis(na >= 0 ? ax[i] : i, x->rank);
    if (r < 0) return bad_axis(im, na >= 0 ? ax[i] : i, x->rank);
    if (seen[r]) return im_fail(im, KILN_ERR_MODEL, "axis %d is sliced twice", r);
    seen[r] = true;
    int64_t step = ns >= 0 ? sp[i] : 1;
    if (step == 0) return im_fail(im, KILN_ERR_MODEL, "step 0 on axis %d", r);
    graph_slice_axis(x->shape[r], st[i], en[i], step, &a.starts[r], &a.steps[r], &a.shape[r]);
  }
  return add(im, OP_SLICE, 1, c->in, &a, &c->out[0]);
}

static kiln_status r_concat(Importer *im, Call *c) {
  if (c->n_in < 1) return im_fail(im, KILN_ERR_MODEL, "no inputs");
  kiln_status s;
  for (int i = 0; i < c->n_in; i++)
    if ((s = need_in(im, c, i))) return s;
  int rank = T(im, IN(c, 0))->rank;
  int64_t axis = im_attr_i(im, "axis", 0);
  int a = norm_axis(axis, rank);
  if (a < 0) return bad_axis(im, axis, rank);
  if (c->n_in == 1) return identity_out(c, IN(c, 0));
  Attr at = { 0 };
  at.axis = a;
  return add(im, OP_CONCAT, c->n_in, c->in, &at, &c->out[0]);
}

static kiln_status r_split(Importer *im, Call *c) {
  kiln_status s = need_in(im, c, 0);
  if (s) return s;
  Tensor *x = T(im, IN(c, 0));
  int64_t axis0 = im_attr_i(im, "axis", 0);
  int axis = norm_axis(axis0, x->rank);
  if (axis < 0) return bad_axis(im, axis0, x->rank);
  int64_t *sp = NULL;
  int n = -1;
  if (im->opset < 13) sp = (int64_t *)im_attr_ints(im, "split", &n);
  else if (IN(c, 1) >= 0 && (s = const_ints(im, IN(c, 1), "split", &sp, &n))) return s;
  int64_t d = x->shape[axis], start = 0;
  int parts = c->n_out;
  if (parts < 1) return im_fail(im, KILN_ERR_MODEL, "no outputs");
  if (n >= 0 && n != parts) return im_fail(im, KILN_ERR_MODEL, "split has %d sizes for %d outputs", n, parts);
  int64_t chunk = parts ? (d + parts - 1) / parts : 0;
  if (n < 0 && im->opset < 18 && d % parts) return im_fail(im, KILN_ERR_MODEL, "%lld does not split into %d equal parts", (long long)d, parts);
  for (int i = 0; i < parts; i++) {
    int64_t len = n >= 0 ? sp[i] : (start + chunk <= d ? chunk : d - start);
    if (len < 0 || start + len > d) return im_fail(im, KILN_ERR_MODEL, "split sizes exceed dimension %lld", (long long)d);
    if ((s = slice1(im, IN(c, 0), axis, start, len, 1, &c->out[i]))) return s;
    start += len;
  }
  if (start != d) return im_fail(im, KILN_ERR_MODEL, "split sizes sum to %lld, not %lld", (long long)start, (long long)d);
  return KILN_OK;
}

/* Wrap padding: each axis becomes [x[d-b:], x, x[:e]] (negative pads crop). */
static kiln_status pad_wrap(Importer *im, int x, const Attr *a, int *out) {
  kiln_status s;
  int rank = T(im, x)->rank;
  for (int r = 0; r < rank; r++) {
    int64_t d = T(im, x)->shape[r], b = a->pads[r], e = a->pads[rank + r];
    if (b < 0) { if ((s = slice1(im, x, r, -b, d + b > 0 ? d + b : 0, 1, &x))) return s; d += b, b = 0; }
    if (e < 0) { if ((s = slice1(im, x, r, 0, d + e > 0 ? d + e : 0, 1, &x))) return s; d += e, e = 0; }
    if (!b && !e) continue;
    if (b > d || e > d) return im_fail(im, KILN_ERR_UNSUPPORTED, "wrap padding wider than the axis");
    int parts[3], n = 0;
    Attr ca = { 0 };
    ca.axis = r;
    if (b && (s = slice1(im, x, r, d - b, b, 1, &parts[n++]))) return s;
    parts[n++] = x;
    if (e && (s = slice1(im, x, r, 0, e, 1, &parts[n++]))) return s;
    if ((s = add(im, OP_CONCAT, n, parts, &ca, &x))) return s;
  }
  return give(out, x);
}

static kiln_status r_pad(Importer *im, Call *c) {
  kiln_status s = need_in(im, c, 0);
  if (s) return s;
  Tensor *x = T(im, IN(c, 0));
  const char *mode = im_attr_s(im, "mode", "constant");
  int64_t *pads, *axes = NULL;
  int n, na = -1;
  double value = 0;
  if (im->opset < 11) {
    pads = (int64_t *)im_attr_ints(im, "pads", &n);
    if (n < 0) pads = (int64_t *)im_attr_ints(im, "paddings", &n);
    value = im_attr_f(im, "value", 0);
  } else {
    if ((s = need_in(im, c, 1)) || (s = const_ints(im, IN(c, 1), "pads", &pads, &n))) return s;
    if (IN(c, 2) >= 0 && T(im, IN(c, 2))->numel > 0 && (s = const_f64(im, IN(c, 2), "constant_value", &value))) return s;
    if (IN(c, 3) >= 0 && (s = const_ints(im, IN(c, 3), "axes", &axes, &na))) return s;
  }
  int k = na >= 0 ? na : x->rank;
  if (n != 2 * k) return im_fail(im, KILN_ERR_MODEL, "%d pads for %d axes", n, k);
  Attr a = { 0 };
  for (int i = 0; i < k; i++) {
    int r = na >= 0 ? norm_axis(axes[i], x->rank) : i;
    if (r < 0) return bad_axis(im, axes[i], x->rank);
    a.pads[r] = pads[i], a.pads[x->rank + r] = pads[k + i];
  }
  if (!strcmp(mode, "constant")) a.pad_mode = KILN_PAD_CONSTANT;
  else if (!strcmp(mode, "reflect")) a.pad_mode = KILN_PAD_REFLECT;
  else if (!strcmp(mode, "edge")) a.pad_mode = KILN_PAD_EDGE;
  else if (!strcmp(mode, "wrap")) return pad_wrap(im, c->in[0], &a, &c->out[0]);
  else return im_fail(im, KILN_ERR_UNSUPPORTED, "mode '%s' is not supported", mode);
  a.value = value;
  return add(im, OP_PAD, 1, c->in, &a, &c->out[0]);
}

static kiln_status r_expand(Importer *im, Call *c) {
  kiln_status s;
  if ((s = need_in(im, c, 0)) || (s = need_in(im, c, 1))) return s;
  Tensor *x = T(im, IN(c, 0));
  int64_t *v;
  int n, rank;
  if ((s = const_ints(im, IN(c, 1), "shape", &v, &n))) return s;
  if (n > KILN_MAX_RANK) return im_fail(im, KILN_ERR_UNSUPPORTED, "target rank %d exceeds %d", n, KILN_MAX_RANK);
  Attr a = { 0 };
  for (int i = 0; i < n; i++)
    if (v[i] < 0) return im_fail(im, KILN_ERR_MODEL, "shape[%d] = %lld", i, (long long)v[i]);
  if (!graph_broadcast(x->rank, x->shape, n, v, &rank, a.shape))
    return im_fail(im, KILN_ERR_MODEL, "input does not broadcast to the target shape");
  a.shape_rank = rank;
  if (rank == x->rank && !memcmp(a.shape, x->shape, sizeof(int64_t) * (size_t)rank)) return identity_out(c, IN(c, 0));
  int y = IN(c, 0);
  if (rank > x->rank) {  /* kiln's expand keeps the rank; lead with ones first */
    int64_t sh[KILN_MAX_RANK];
    int k = rank - x->rank;
    for (int i = 0; i < rank; i++) sh[i] = i < k ? 1 : x->shape[i - k];
    if ((s = reshape(im, y, rank, sh, &y))) return s;
  }
  return add(im, OP_EXPAND, 1, &y, &a, &c->out[0]);
}

static kiln_status r_gather(Importer *im, Call *c) {
  kiln_status s;
  if ((s = need_in(im, c, 0)) || (s = need_in(im, c, 1))) return s;
  int rank = T(im, IN(c, 0))->rank;
  int64_t axis = im_attr_i(im, "axis", 0);
  Attr a = { 0 };
  if ((a.axis = norm_axis(axis, rank)) < 0) return bad_axis(im, axis, rank);
  return add(im, OP_GATHER, 2, c->in, &a, &c->out[0]);
}

static kiln_status r_tile(Importer *im, Call *c) {
  kiln_status s;
  if ((s = need_in(im, c, 0)) || (s = need_in(im, c, 1))) return s;
  Tensor *x = T(im, IN(c, 0));
  int64_t *v;
  int n;
  if ((s = const_ints(im, IN(c, 1), "repeats", &v, &n))) return s;
  if (n != x->rank) return im_fail(im, KILN_ERR_MODEL, "%d repeats for rank %d", n, x->rank);
  Attr a = { 0 };
  a.shape_rank = x->rank;
  for (int r = 0; r < x->rank; r++)
    if (v[r] < 0 || !size_mul(x->shape[r], v[r], &a.shape[r])) return im_fail(im, KILN_ERR_MODEL, "repeats[%d] = %lld", r, (long long)v[r]);
  return add(im, OP_TILE, 1, c->in, &a, &c->out[0]);
}

static kiln_status r_shape(Importer *im, Call *c) {
  kiln_status s = need_in(im, c, 0);
  if (s) return s;
  Tensor *x = T(im, IN(c, 0));
  int64_t numel = x->numel;  /* x moves when the graph grows */
  if (!strcmp(c->name, "Size")) return im_const_i64(im, 0, NULL, &numel, &c->out[0]);
  int64_t r = x->rank, b = im_attr_i(im, "start", 0), e = im_attr_i(im, "end", r);
  b = b < 0 ? (b + r < 0 ? 0 : b + r) : (b > r ? r : b);
  e = e < 0 ? (e + r < 0 ? 0 : e + r) : (e > r ? r : e);
  int64_t n = e > b ? e - b : 0, dims[KILN_MAX_RANK];
  memcpy(dims, x->shape + b, sizeof(int64_t) * (size_t)n);  /* x moves when the graph grows */
  return im_const_i64(im, 1, &n, dims, &c->out[0]);
}

/* A constant of shape filled with value (a scalar of dtype t), as an expanded scalar. */
static kiln_status filled(Importer *im, kiln_dtype t, double value, int rank, const int64_t *shape, int *out) {
  int sc;
  kiln_status s = scalar(im, t, value, &sc);
  if (s || rank == 0) { *out = sc; return s; }
  int64_t ones[KILN_MAX_RANK];
  for (int i = 0; i < rank; i++) ones[i] = 1;
  if ((s = reshape(im, sc, rank, ones, &sc))) return s;
  Attr a = { 0 };
  a.shape_rank = rank;
  memcpy(a.shape, shape, sizeof(int64_t) * (size_t)rank);
  return add(im, OP_EXPAND, 1, &sc, &a, out);
}

static kiln_status r_constant_of_shape(Importer *im, Call *c) {
  kiln_status s = need_in(im, c, 0);
  if (s) return s;
  int64_t *v;
  int n;
  if ((s = const_ints(im, IN(c, 0), "shape", &v, &n))) return s;
  if (n > KILN_MAX_RANK) return im_fail(im, KILN_ERR_UNSUPPORTED, "rank %d exceeds %d", n, KILN_MAX_RANK);
  for (int i = 0; i < n; i++)
    if (v[i] < 0) return im_fail(im, KILN_ERR_MODEL, "shape[%d] = %lld", i, (long long)v[i]);
  kiln_dtype t = KILN_F32;
  double value = 0;
  const Onnx__AttributeProto *a = im_attr(im, "value");
  if (a && a->t) {
    OnnxTensor vt;
    if ((s = im_tensor(im, a->t, &vt))) return s;
    if (vt.numel != 1) return im_fail(im, KILN_ERR_MODEL, "value must hold one element");
    t = vt.dtype;
    value = dtype_load_f64(t, vt.data, 0);
    if (dtype_is_int(t) && t != KILN_U64 && llabs(dtype_load_i64(t, vt.data, 0)) > (1ll << 52))
      return im_fail(im, KILN_ERR_UNSUPPORTED, "integer fill value beyond 2^52");
  }
  return filled(im, t, value, n, v, &c->out[0]);
}

static kiln_status r_range(Importer *im, Call *c) {
  kiln_status s;
  if ((s = need_in(im, c, 0)) || (s = need_in(im, c, 1)) || (s = need_in(im, c, 2))) return s;
  double st, lim, d;
  if ((s = const_f64(im, IN(c, 0), "start", &st)) || (s = const_f64(im, IN(c, 1), "limit", &lim)) ||
      (s = const_f64(im, IN(c, 2), "delta", &d)))
    return s;
  kiln_dtype t = T(im, IN(c, 0))->dtype;
  if (d == 0) return im_fail(im, KILN_ERR_MODEL, "delta is 0");
  double cnt = ceil((lim - st) / d);
  if (!(cnt >= 0)) cnt = 0;
  if (cnt > (1 << 24)) return im_fail(im, KILN_ERR_UNSUPPORTED, "range of %.0f elements is too large", cnt);
  int64_t n = (int64_t)cnt, bytes = n * (int64_t)kiln_dtype_size(t);
  void *buf = arena_alloc(&im->tmp, (size_t)bytes + 1);
  if (!buf) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory");
  for (int64_t i = 0; i < n; i++) {
    if (dtype_is_int(t)) dtype_store_i64(t, buf, i, dtype_load_i64(t, T(im, IN(c, 0))->data, 0) + i * (int64_t)d);
    else dtype_store_f64(t, buf, i, st + (double)i * d);
  }
  return im_const(im, t, 1, &n, buf, &c->out[0]);
}

static kiln_status r_constant(Importer *im, Call *c) {
  const Onnx__NodeProto *nd = im->node;
  if (nd->n_attribute != 1) return im_fail(im, KILN_ERR_MODEL, "expected exactly one attribute");
  const Onnx__AttributeProto *a = im_attr(im, nd->attribute[0]->name ? nd->attribute[0]->name : "");
  if (!a) return im_fail(im, KILN_ERR_MODEL, "attribute reference is unresolved");
  const char *nm = nd->attribute[0]->name;
  if (!strcmp(nm, "value") && a->t) {
    OnnxTensor v;
    kiln_status s = im_tensor(im, a->t, &v);
    return s ? s : im_const(im, v.dtype, v.rank, v.shape, v.data, &c->out[0]);
  }
  if (!strcmp(nm, "value_float")) { float f = a->f; return im_const(im, KILN_F32, 0, NULL, &f, &c->out[0]); }
  if (!strcmp(nm, "value_int")) { int64_t i = a->i; return im_const_i64(im, 0, NULL, &i, &c->out[0]); }
  if (!strcmp(nm, "value_floats")) {
    int64_t n = (int64_t)a->n_floats;
    return im_const(im, KILN_F32, 1, &n, a->floats, &c->out[0]);
  }
  if (!strcmp(nm, "value_ints")) {
    int64_t n = (int64_t)a->n_ints;
    return im_const_i64(im, 1, &n, a->ints, &c->out[0]);
  }
  return im_fail(im, KILN_ERR_UNSUPPORTED, "attribute '%s' (strings, sparse tensors) is not supported", nm);
}

/* DepthToSpace / SpaceToDepth: a reshape, a transpose and a reshape. */
static kiln_status r_depth_space(Importer *im, Call *c) {
  kiln_status s = need_in(im, c, 0);
  if (s) return s;
  Tensor *x = T(im, IN(c, 0));
  int64_t b = im_attr_i(im, "blocksize", 0);
  if (x->rank != 4 || b <= 0 || b > 4096) return im_fail(im, KILN_ERR_MODEL, "needs a rank-4 input and blocksize in 1..4096");
  int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3];
  int t;
  if (!strcmp(c->name, "DepthToSpace")) {
    if (C % (b * b)) return im_fail(im, KILN_ERR_MODEL, "channels %lld not divisible by blocksize^2", (long long)C);
    bool crd = !strcmp(im_attr_s(im, "mode", "DCR"), "CRD");
    int64_t sh[6] = { N, b, b, C / (b * b), H, W }, sh_crd[6] = { N, C / (b * b), b, b, H, W };
    int p_dcr[6] = { 0, 3, 4, 1, 5, 2 }, p_crd[6] = { 0, 1, 4, 2, 5, 3 };
    int64_t out[4] = { N, C / (b * b), H * b, W * b };
    if ((s = reshape(im, IN(c, 0), 6, crd ? sh_crd : sh, &t)) || (s = transpose(im, t, crd ? p_crd : p_dcr, &t))) return s;
    return reshape(im, t, 4, out, &c->out[0]);
  }
  if (H % b || W % b) return im_fail(im, KILN_ERR_MODEL, "spatial dims not divisible by blocksize");
  int64_t sh[6] = { N, C, H / b, b, W / b, b }, out[4] = { N, C * b * b, H / b, W / b };
  int p[6] = { 0, 3, 5, 1, 2, 4 };
  if ((s = reshape(im, IN(c, 0), 6, sh, &t)) || (s = transpose(im, t, p, &t))) return s;
  return reshape(im, t, 4, out, &c->out[0]);
}

/* Trilu: keep the upper or lower triangle (offset k) of the last two dims. */
static kiln_status r_trilu(Importer *im, Call *c) {
  kiln_status s = need_in(im, c, 0);
  if (s) return s;
  Tensor *x = T(im, IN(c, 0));
  if (x->rank < 2) return im_fail(im, KILN_ERR_MODEL, "input rank %d < 2", x->rank);
  int64_t k = 0, *kv;
  int n;
  if (IN(c, 1) >= 0) {
    if ((s = const_ints(im, IN(c, 1), "k", &kv, &n))) return s;
    if (n != 1) return im_fail(im, KILN_ERR_MODEL, "k must hold one element");
    k = kv[0];
  }
  bool upper = im_attr_i(im, "upper", 1) != 0;
  int64_t R = x->shape[x->rank - 2], C = x->shape[x->rank - 1], sh[2] = { R, C }, cnt;
  if (!size_mul(R, C, &cnt) || cnt > (1 << 24)) return im_fail(im, KILN_ERR_UNSUPPORTED, "matrix too large");
  uint8_t *m = arena_alloc(&im->tmp, (size_t)cnt + 1);
  if (!m) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory");
  for (int64_t i = 0; i < R; i++)
    for (int64_t j = 0; j < C; j++) m[i * C + j] = upper ? j - i >= k : j - i <= k;
  int mask, zero;
  kiln_dtype dt = x->dtype;
  if ((s = im_const(im, KILN_BOOL, 2, sh, m, &mask)) || (s = scalar(im, dt, 0, &zero))) return s;
  return where(im, mask, IN(c, 0), zero, &c->out[0]);
}

static kiln_status r_eyelike(Importer *im, Call *c) {
  kiln_status s = need_in(im, c, 0);
  if (s) return s;
  Tensor *x = T(im, IN(c, 0));
  if (x->rank != 2) return im_fail(im, KILN_ERR_MODEL, "input rank %d, expected 2", x->rank);
  kiln_dtype t = x->dtype;
  if (im_attr(im, "dtype") && (s = onnx_elem_type((int32_t)im_attr_i(im, "dtype", 1), "dtype", &t))) return s;
  int64_t k = im_attr_i(im, "k", 0), R = x->shape[0], C = x->shape[1], cnt, shape[2] = { R, C };
  if (!size_mul(R, C, &cnt) || cnt > (1 << 24)) return im_fail(im, KILN_ERR_UNSUPPORTED, "matrix too large");
  void *m = arena_alloc(&im->tmp, (size_t)cnt * kiln_dtype_size(t) + 1);
  if (!m) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory");
  for (int64_t i = 0; i < R; i++)
    for (int64_t j = 0; j < C; j++) dtype_store_f64(t, m, i * C + j, j - i == k);
  return im_const(im, t, 2, shape, m, &c->out[0]);
}

/* OneHot: where(indices[..., None] == arange(depth), on, off) along axis. */
static kiln_status r_onehot(Importer *im, Call *c) {
  kiln_status s;
  if ((s = need_in(im, c, 0)) || (s = need_in(im, c, 1)) || (s = need_in(im, c, 2))) return s;
  Tensor *ix = T(im, IN(c, 0)), *vals = T(im, IN(c, 2));
  double depth_f;
  if ((s = const_f64(im, IN(c, 1), "depth", &depth_f))) return s;
  if (!(depth_f >= 1 && depth_f <= (1 << 20))) return im_fail(im, KILN_ERR_MODEL, "depth %g out of range", depth_f);
  int64_t depth = (int64_t)depth_f;
  if (vals->numel != 2) return im_fail(im, KILN_ERR_MODEL, "values must hold two elements");
  int rank = ix->rank + 1;
  if (rank > KILN_MAX_RANK) return im_fail(im, KILN_ERR_UNSUPPORTED, "rank too large");
  int64_t axis0 = im_attr_i(im, "axis", -1);
  int axis = norm_axis(axis0, rank);
  if (axis < 0) return bad_axis(im, axis0, rank);
  int64_t *ar = arena_alloc(&im->tmp, sizeof(int64_t) * (size_t)depth), sh[KILN_MAX_RANK], ish[KILN_MAX_RANK];
  if (!ar) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory");
  for (int64_t i = 0; i < depth; i++) ar[i] = i;
  for (int r = 0; r < rank; r++) sh[r] = r == axis ? depth : 1;
  for (int r = 0, k = 0; r < rank; r++) ish[r] = r == axis ? 1 : ix->shape[k++];
  int range, idx, neg, eq, on, off;
  if ((s = im_const_i64(im, rank, sh, ar, &range)) || (s = cast(im, IN(c, 0), KILN_I64, &idx)) ||
      (s = reshape(im, idx, rank, ish, &idx)))
    return s;
  /* negative indices count from the end */
  if ((s = binc(im, OP_LT, idx, 0, &neg)) || (s = binc(im, OP_ADD, idx, (double)depth, &eq)) || (s = where(im, neg, eq, idx, &idx)) ||
      (s = bin(im, OP_EQ, idx, range, &eq)))
    return s;
  if ((s = slice1(im, IN(c, 2), 0, 1, 1, 1, &on)) || (s = slice1(im, IN(c, 2), 0, 0, 1, 1, &off))) return s;
  if ((s = reshape(im, on, 0, NULL, &on)) || (s = reshape(im, off, 0, NULL, &off))) return s;
  return where(im, eq, on, off, &c->out[0]);
}

/* ---- reductions ---- */

static kiln_status r_reduce(Importer *im, Call *c) {
  kiln_status s = need_in(im, c, 0);
  if (s) return s;
  int x = IN(c, 0), rank = T(im, x)->rank;
  int64_t *axes;
  int n;
  bool input_axes = im->opset >= (!strcmp(c->name, "ReduceSum") ? 13 : 18);
  if (input_axes) {
    n = -1;
    if (IN(c, 1) >= 0 && (s = const_ints(im, IN(c, 1), "axes", &axes, &n))) return s;
  } else {
    axes = (int64_t *)im_attr_ints(im, "axes", &n);
  }
  int keep = im_attr_i(im, "keepdims", 1) != 0;
  if (n <= 0 && input_axes && im_attr_i(im, "noop_with_empty_axes", 0)) return identity_out(c, x);
  int ax[KILN_MAX_RANK], na = 0;
  if (n > 0 && (s = norm_axes(im, axes, n, rank, ax, &na))) return s;
  if (na == 0)
    for (int r = 0; r < rank; r++) ax[na++] = r;
  if (rank == 0) return identity_out(c, x);  /* nothing to reduce over */
  if (!strcmp(c->name, "ReduceLogSum")) {
    int t;
    if ((s = graph_reduce(im->g, KILN_REDUCE_SUM, x, na, ax, keep, &t))) return s;
    return un(im, OP_LOG, t, &c->out[0]);
  }
  if (T(im, x)->dtype == KILN_BOOL && (c->op == KILN_REDUCE_MAX || c->op == KILN_REDUCE_MIN)) {
    int t;  /* any / all, through u8 */
    if ((s = cast(im, x, KILN_U8, &t)) || (s = graph_reduce(im->g, (kiln_reduce_op)c->op, t, na, ax, keep, &t))) return s;
    return cast(im, t, KILN_BOOL, &c->out[0]);
  }
  return graph_reduce(im->g, (kiln_reduce_op)c->op, x, na, ax, keep, &c->out[0]);
}

static kiln_status r_arg(Importer *im, Call *c) {
  kiln_status s = need_in(im, c, 0);
  if (s) return s;
  int rank = T(im, IN(c, 0))->rank;
  int64_t axis = im_attr_i(im, "axis", 0);
  Attr a = { 0 };
  if ((a.axis = norm_axis(axis, rank)) < 0) return bad_axis(im, axis, rank);
  a.keepdims = im_attr_i(im, "keepdims", 1) != 0;
  a.select_last = im_attr_i(im, "select_last_index", 0) != 0;
  return add(im, (OpKind)c->op, 1, c->in, &a, &c->out[0]);
}

/* ---- contractions ---- */

static kiln_status r_matmul(Importer *im, Call *c) {
  kiln_status s;
  if ((s = need_in(im, c, 0)) || (s = need_in(im, c, 1))) return s;
  return bin(im, OP_MATMUL, IN(c, 0), IN(c, 1), &c->out[0]);
}

static kiln_status r_gemm(Importer *im, Call *c) {
  kiln_status s;
  if ((s = need_in(im, c, 0)) || (s = need_in(im, c, 1))) return s;
  int a = IN(c, 0), b = IN(c, 1), y, perm[2] = { 1, 0 };
  if (T(im, a)->rank != 2 || T(im, b)->rank != 2) return im_fail(im, KILN_ERR_MODEL, "A and B must be matrices");
  if (im_attr_i(im, "transA", 0) && (s = transpose(im, a, perm, &a))) return s;
  if (im_attr_i(im, "transB", 0) && (s = transpose(im, b, perm, &b))) return s;
  if ((s = bin(im, OP_MATMUL, a, b, &y))) return s;
  double alpha = im_attr_f(im, "alpha", 1), beta = im_attr_f(im, "beta", 1);
  if (alpha != 1 && (s = binc(im, OP_MUL, y, alpha, &y))) return s;
  if (IN(c, 2) >= 0 && beta != 0) {
    int cc = IN(c, 2);
    if (beta != 1 && (s = binc(im, OP_MUL, cc, beta, &cc))) return s;
    if ((s = bin(im, OP_ADD, y, cc, &y))) return s;
  }
  return identity_out(c, y);
}

/* Spatial window attributes shared by Conv and the pools; pads resolved from auto_pad. */
typedef struct Window { int sp; int64_t k[3], st[3], dil[3], pads[6]; } Window;

static kiln_status window(Importer *im, const Tensor *x, const int64_t *kernel, bool ceil_mode, Window *w) {
  w->sp = x->rank - 2;
  if (w->sp < 1 || w->sp > 3) return im_fail(im, KILN_ERR_UNSUPPORTED, "input rank %d: 1 to 3 spatial dims supported", x->rank);
  int n;
  const int64_t *v;
  for (int i = 0; i < w->sp; i++) w->k[i] = kernel[i], w->st[i] = 1, w->dil[i] = 1, w->pads[i] = w->pads[w->sp + i] = 0;
  if ((v = im_attr_ints(im, "strides", &n)) && n >= 0) {
    if (n != w->sp) return im_fail(im, KILN_ERR_MODEL, "%d strides for %d spatial dims", n, w->sp);
    for (int i = 0; i < n; i++) w->st[i] = v[i];
  }
  if ((v = im_attr_ints(im, "dilations", &n)) && n >= 0) {
    if (n != w->sp) return im_fail(im, KILN_ERR_MODEL, "%d dilations for %d spatial dims", n, w->sp);
    for (int i = 0; i < n; i++) w->dil[i] = v[i];
  }
  for (int i = 0; i < w->sp; i++)
    if (w->st[i] <= 0 || w->dil[i] <= 0 || w->k[i] <= 0 || w->k[i] > (1 << 20) || w->st[i] > (1 << 20) || w->dil[i] > (1 << 20))
      return im_fail(im, KILN_ERR_MODEL, "kernel, strides and dilations must be positive");
  const char *ap = im_attr_s(im, "auto_pad", "NOTSET");
  if (!strcmp(ap, "NOTSET")) {
    if ((v = im_attr_ints(im, "pads", &n)) && n >= 0) {
      if (n != 2 * w->sp) return im_fail(im, KILN_ERR_MODEL, "%d pads for %d spatial dims", n, w->sp);
      for (int i = 0; i < n; i++) {
        if (v[i] < 0 || v[i] > (1 << 20)) return im_fail(im, KILN_ERR_MODEL, "pad %lld out of range", (long long)v[i]);
        w->pads[i] = v[i];
      }
    }
  } else if (!strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
    for (int i = 0; i < w->sp; i++) {
      int64_t in = x->shape[2 + i], out = (in + w->st[i] - 1) / w->st[i];
      int64_t total = (out - 1) * w->st[i] + (w->k[i] - 1) * w->dil[i] + 1 - in;
      if (total < 0) total = 0;
      int64_t small = total / 2, big = total - small;
      w->pads[i] = ap[5] == 'U' ? small : big;
      w->pads[w->sp + i] = ap[5] == 'U' ? big : small;
    }
  } else if (strcmp(ap, "VALID")) {
    return im_fail(im, KILN_ERR_MODEL, "auto_pad '%s' is unknown", ap);
  }
  (void)ceil_mode;
  return KILN_OK;
}

static kiln_status r_conv(Importer *im, Call *c) {
  kiln_status s;
  if ((s = need_in(im, c, 0)) || (s = need_in(im, c, 1))) return s;
  Tensor *x = T(im, IN(c, 0)), *w = T(im, IN(c, 1));
  if (w->rank != x->rank) return im_fail(im, KILN_ERR_MODEL, "weight rank %d differs from input rank %d", w->rank, x->rank);
  Window win;
  if ((s = window(im, x, w->shape + 2, false, &win))) return s;
  Attr a = { 0 };
  a.conv.spatial = win.sp;
  a.conv.group = im_attr_i(im, "group", 1);
  if (a.conv.group <= 0) return im_fail(im, KILN_ERR_MODEL, "group must be positive");
  for (int i = 0; i < win.sp; i++) {
    a.conv.strides[i] = win.st[i], a.conv.dilations[i] = win.dil[i];
    a.conv.pads[i] = win.pads[i], a.conv.pads[win.sp + i] = win.pads[win.sp + i];
  }
  int y;
  if ((s = add(im, OP_CONV, 2, c->in, &a, &y))) return s;
  if (IN(c, 2) >= 0) {
    int b;
    if ((s = per_channel(im, IN(c, 2), T(im, y)->rank, &b)) || (s = bin(im, OP_ADD, y, b, &y))) return s;
  }
  return identity_out(c, y);
}

static kiln_status r_pool(Importer *im, Call *c) {
  kiln_status s = need_in(im, c, 0);
  if (s) return s;
  Tensor *x = T(im, IN(c, 0));
  bool maxp = c->op == KILN_POOL_MAX;
  if (!strcmp(c->name, "GlobalAveragePool") || !strcmp(c->name, "GlobalMaxPool")) {
    int ax[KILN_MAX_RANK], n = 0;
    for (int r = 2; r < x->rank; r++) ax[n++] = r;
    if (n == 0) return im_fail(im, KILN_ERR_MODEL, "input rank %d has no spatial dims", x->rank);
    return graph_reduce(im->g, maxp ? KILN_REDUCE_MAX : KILN_REDUCE_MEAN, IN(c, 0), n, ax, 1, &c->out[0]);
  }
  int n;
  const int64_t *k = im_attr_ints(im, "kernel_shape", &n);
  if (n != x->rank - 2) return im_fail(im, KILN_ERR_MODEL, "kernel_shape has %d entries for %d spatial dims", n, x->rank - 2);
  if (im_attr_i(im, "storage_order", 0)) return im_fail(im, KILN_ERR_UNSUPPORTED, "storage_order=1 is not supported");
  Window win;
  Attr a = { 0 };
  a.pool.ceil_mode = im_attr_i(im, "ceil_mode", 0) != 0;
  if ((s = window(im, x, k, a.pool.ceil_mode, &win))) return s;
  a.pool.spatial = win.sp;
  a.pool.count_include_pad = im_attr_i(im, "count_include_pad", 0) != 0;
  for (int i = 0; i < win.sp; i++) {
    a.pool.kernel[i] = win.k[i], a.pool.strides[i] = win.st[i], a.pool.dilations[i] = win.dil[i];
    a.pool.pads[i] = win.pads[i], a.pool.pads[win.sp + i] = win.pads[win.sp + i];
  }
  if (!strcmp(c->name, "LpPool")) {  /* (sum over the window of |x|^p)^(1/p), through an average */
    double p = (double)im_attr_i(im, "p", 2), k = 1;
    int t;
    a.pool.count_include_pad = 1;
    for (int i = 0; i < win.sp; i++) k *= (double)win.k[i];
    if ((s = un(im, OP_ABS, IN(c, 0), &t)) || (s = binc(im, OP_POW, t, p, &t)) || (s = add(im, OP_AVG_POOL, 1, &t, &a, &t)) ||
        (s = binc(im, OP_MUL, t, k, &t)))
      return s;
    return binc(im, OP_POW, t, 1 / p, &c->out[0]);
  }
  return add(im, maxp ? OP_MAX_POOL : OP_AVG_POOL, 1, c->in, &a, &c->out[0]);
}

/* ConvTranspose as a convolution: the input with stride-1 zeros between its elements,
 * padded by the kernel's reach less the pads, convolved with the flipped kernel whose
 * in/out channel roles are swapped within each group. */
static kiln_status r_conv_transpose(Importer *im, Call *c) {
  kiln_status s;
  if ((s = need_in(im, c, 0)) || (s = need_in(im, c, 1))) return s;
  Tensor *x = T(im, IN(c, 0)), *w = T(im, IN(c, 1));
  int rank = x->rank, sp = rank - 2;
  if (sp < 1 || sp > 3 || w->rank != rank) return im_fail(im, KILN_ERR_UNSUPPORTED, "input rank %d, weight rank %d", rank, w->rank);
  int64_t G = im_attr_i(im, "group", 1), xs[KILN_MAX_RANK], ws[KILN_MAX_RANK];
  memcpy(xs, x->shape, sizeof xs);
  memcpy(ws, w->shape, sizeof ws);
  if (G <= 0 || xs[1] != ws[0] || ws[0] % G) return im_fail(im, KILN_ERR_MODEL, "channels %lld, weight %lld, group %lld",
                                                           (long long)xs[1], (long long)ws[0], (long long)G);
  int64_t st[3], dil[3], op[3], pb[3], pe[3], k[3];
  int n;
  const int64_t *v;
  for (int i = 0; i < sp; i++) st[i] = dil[i] = 1, op[i] = pb[i] = pe[i] = 0, k[i] = ws[2 + i];
#define INTS(name, arr, len)                                                                     \
  if ((v = im_attr_ints(im, name, &n)) && n >= 0) {                                             \
    if (n != (len)) return im_fail(im, KILN_ERR_MODEL, "%s has %d entries", name, n);          \
    for (int i = 0; i < n; i++) arr[i] = v[i];                                                   \
  }
  INTS("strides", st, sp) INTS("dilations", dil, sp) INTS("output_padding", op, sp)
  int64_t pads[6] = { 0 };
  INTS("pads", pads, 2 * sp)
#undef INTS
  for (int i = 0; i < sp; i++) {
    pb[i] = pads[i], pe[i] = pads[sp + i];
    if (st[i] <= 0 || st[i] > 4096 || dil[i] <= 0 || dil[i] > 4096 || k[i] <= 0 || op[i] < 0 || op[i] >= 4096)
      return im_fail(im, KILN_ERR_MODEL, "strides, dilations and kernel must be positive");
  }
  const char *ap = im_attr_s(im, "auto_pad", "NOTSET");
  const int64_t *os = im_attr_ints(im, "output_shape", &n);
  if (n >= 0 || !strcmp(ap, "SAME_UPPER") || !strcmp(ap, "SAME_LOWER")) {
    if (n >= 0 && n != sp) return im_fail(im, KILN_ERR_MODEL, "output_shape has %d entries", n);
    for (int i = 0; i < sp; i++) {
      int64_t want = n >= 0 ? os[i] : xs[2 + i] * st[i];
      int64_t total = st[i] * (xs[2 + i] - 1) + op[i] + (k[i] - 1) * dil[i] + 1 - want;
      /* a negative total extends the output; halves round down, as ONNX's reference does */
      int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
      bool upper = !strcmp(ap, "SAME_UPPER");
      pb[i] = upper ? half : total - half;
      pe[i] = upper ? total - half : half;
    }
  } else if (!strcmp(ap, "VALID")) {
    for (int i = 0; i < sp; i++) pb[i] = pe[i] = 0;
  }
  int y = IN(c, 0), wt = IN(c, 1);
  /* zeros between input elements: [.., L, ..] -> [.., L, s, ..] padded -> [.., L*s, ..] -> first (L-1)*s+1 */
  for (int i = 0; i < sp; i++) {
    if (st[i] == 1) continue;
    int ax = 2 + i, r = T(im, y)->rank;
    int64_t L = T(im, y)->shape[ax], sh[KILN_MAX_RANK], m[KILN_MAX_RANK];
    if (r + 1 > KILN_MAX_RANK) return im_fail(im, KILN_ERR_UNSUPPORTED, "rank too large");
    memcpy(sh, T(im, y)->shape, sizeof sh);
    Attr pa = { 0 };
    pa.pads[r + 1 + ax + 1] = st[i] - 1;
    pa.pad_mode = KILN_PAD_CONSTANT;
    for (int q = 0; q < r; q++) m[q] = sh[q];
    m[ax] = L * st[i];
    if ((s = insert_dim(im, y, ax + 1, &y)) || (s = add(im, OP_PAD, 1, &y, &pa, &y)) || (s = reshape(im, y, r, m, &y)) ||
        (s = slice1(im, y, ax, 0, L ? (L - 1) * st[i] + 1 : 0, 1, &y)))
      return s;
  }
  Attr pa = { 0 };
  pa.pad_mode = KILN_PAD_CONSTANT;
  for (int i = 0; i < sp; i++) {
    int64_t reach = (k[i] - 1) * dil[i];
    pa.pads[2 + i] = reach - pb[i];
    pa.pads[rank + 2 + i] = reach - pe[i] + op[i];
  }
  if ((s = add(im, OP_PAD, 1, &y, &pa, &y))) return s;
  /* the kernel: flipped in space, [C, M/G, k..] -> [M, C/G, k..] */
  for (int i = 0; i < sp; i++)
    if (k[i] > 1 && (s = slice1(im, wt, 2 + i, k[i] - 1, k[i], -1, &wt))) return s;
  int64_t g5[KILN_MAX_RANK], m5[KILN_MAX_RANK];
  int perm[KILN_MAX_RANK];
  g5[0] = G, g5[1] = ws[0] / G, g5[2] = ws[1];
  m5[0] = ws[1] * G, m5[1] = ws[0] / G;
  perm[0] = 0, perm[1] = 2, perm[2] = 1;
  for (int i = 0; i < sp; i++) g5[3 + i] = k[i], m5[2 + i] = k[i], perm[3 + i] = 3 + i;
  if (rank + 1 > KILN_MAX_RANK) return im_fail(im, KILN_ERR_UNSUPPORTED, "rank too large");
  if ((s = reshape(im, wt, rank + 1, g5, &wt)) || (s = transpose(im, wt, perm, &wt)) || (s = reshape(im, wt, rank, m5, &wt)))
    return s;
  Attr a = { 0 };
  a.conv.spatial = sp;
  a.conv.group = G;
  for (int i = 0; i < sp; i++) a.conv.strides[i] = 1, a.conv.dilations[i] = dil[i];
  if ((s = add(im, OP_CONV, 2, (int[]){ y, wt }, &a, &y))) return s;
  if (IN(c, 2) >= 0) {
    int b;
    if ((s = per_channel(im, IN(c, 2), rank, &b)) || (s = bin(im, OP_ADD, y, b, &y))) return s;
  }
  return give(&c->out[0], y);
}

/* ---- normalisations ---- */

static kiln_status r_softmax(Importer *im, Call *c) {
  kiln_status s = need_in(im, c, 0);
  if (s) return s;
  Tensor *x = T(im, IN(c, 0));
  bool lg = c->op == 1;
  int64_t axis0 = im_attr_i(im, "axis", im->opset < 13 ? 1 : -1);
  int rank = x->rank;
  if (rank == 0) return im_fail(im, KILN_ERR_MODEL, "input is a scalar");
  int axis = norm_axis(axis0, rank);
  if (axis < 0) return bad_axis(im, axis0, rank);
  if (im->opset >= 13 || axis == rank - 1) return graph_softmax(im->g, IN(c, 0), axis, lg, &c->out[0]);
  /* before opset 13: the input is viewed as 2-D [prod(:axis), prod(axis:)] */
  int64_t sh[2] = { 1, 1 };
  for (int r = 0; r < rank; r++) sh[r >= axis] *= x->shape[r];
  int t;
  int64_t back[KILN_MAX_RANK];
  memcpy(back, x->shape, sizeof back);
  if ((s = reshape(im, IN(c, 0), 2, sh, &t)) || (s = graph_softmax(im->g, t, 1, lg, &t))) return s;
  return reshape(im, t, rank, back, &c->out[0]);
}

static kiln_status r_layernorm(Importer *im, Call *c) {
  kiln_status s;
  if ((s = need_in(im, c, 0)) || (s = need_in(im, c, 1))) return s;
  int rank = T(im, IN(c, 0))->rank;
  int64_t axis0 = im_attr_i(im, "axis", -1);
  int axis = norm_axis(axis0, rank);
  if (axis < 0) return bad_axis(im, axis0, rank);
  double eps = im_attr_f(im, "epsilon", 1e-5f);
  /* The primitives of graph_layernorm, spelled out here because ONNX also wants Mean and
   * InvStdDev, with statistics in f32 for f16/bf16 input (stash_type 1). (It also keeps
   * import clear of a stale tensor pointer in graph_layernorm that the fuzzer hit.) */
  int x = IN(c, 0), ax[KILN_MAX_RANK], n = 0, m, d, v, y;
  kiln_dtype dt = T(im, x)->dtype;
  for (int r = axis; r < rank; r++) ax[n++] = r;
  if ((s = cast(im, x, dtype_is_float(dt) && dt != KILN_F64 ? KILN_F32 : dt, &x))) return s;
  if ((s = graph_reduce(im->g, KILN_REDUCE_MEAN, x, n, ax, 1, &m)) || (s = bin(im, OP_SUB, x, m, &d)) ||
      (s = bin(im, OP_MUL, d, d, &v)) || (s = graph_reduce(im->g, KILN_REDUCE_MEAN, v, n, ax, 1, &v)) ||
      (s = binc(im, OP_ADD, v, eps, &v)) || (s = un(im, OP_RSQRT, v, &v)) ||
      (s = bin(im, OP_MUL, d, v, &y)) || (s = cast(im, y, dt, &y)) || (s = bin(im, OP_MUL, y, IN(c, 1), &y)))
    return s;
  if (IN(c, 2) >= 0 && (s = bin(im, OP_ADD, y, IN(c, 2), &y))) return s;
  c->out[0] = y, c->out[1] = m;
  if (c->n_out > 2) c->out[2] = v;
  return KILN_OK;
}

static kiln_status r_batchnorm(Importer *im, Call *c) {
  kiln_status s;
  for (int i = 0; i < 5; i++)
    if ((s = need_in(im, c, i))) return s;
  if (im_attr_i(im, "training_mode", 0)) return im_fail(im, KILN_ERR_UNSUPPORTED, "training_mode=1 is not supported");
  return graph_batchnorm(im->g, IN(c, 0), IN(c, 1), IN(c, 2), IN(c, 3), IN(c, 4), im_attr_f(im, "epsilon", 1e-5f), &c->out[0]);
}

/* (x - mean) / sqrt(var + eps) over axes, var the biased mean of squared deviations. */
static kiln_status normalize(Importer *im, int x, int n, const int *ax, double eps, int *out) {
  int m, d, v;
  kiln_status s;
  if ((s = graph_reduce(im->g, KILN_REDUCE_MEAN, x, n, ax, 1, &m)) || (s = bin(im, OP_SUB, x, m, &d)) ||
      (s = bin(im, OP_MUL, d, d, &v)) || (s = graph_reduce(im->g, KILN_REDUCE_MEAN, v, n, ax, 1, &v)) ||
      (s = binc(im, OP_ADD, v, eps, &v)) || (s = un(im, OP_SQRT, v, &v)))
    return s;
  return bin(im, OP_DIV, d, v, out);
}

static kiln_status r_instancenorm(Importer *im, Call *c) {
  kiln_status s;
  for (int i = 0; i < 3; i++)
    if ((s = need_in(im, c, i))) return s;
  int rank = T(im, IN(c, 0))->rank, ax[KILN_MAX_RANK], n = 0, y, sc, b;
  for (int r = 2; r < rank; r++) ax[n++] = r;
  if (!n) return im_fail(im, KILN_ERR_MODEL, "input rank %d has no spatial dims", rank);
  if ((s = normalize(im, IN(c, 0), n, ax, im_attr_f(im, "epsilon", 1e-5f), &y)) ||
      (s = per_channel(im, IN(c, 1), rank, &sc)) || (s = per_channel(im, IN(c, 2), rank, &b)) ||
      (s = bin(im, OP_MUL, y, sc, &y)))
    return s;
  return bin(im, OP_ADD, y, b, &c->out[0]);
}

static kiln_status r_mvn(Importer *im, Call *c) {
  kiln_status s = need_in(im, c, 0);
  if (s) return s;
  int rank = T(im, IN(c, 0))->rank, n, ax[KILN_MAX_RANK], na;
  const int64_t *axes = im_attr_ints(im, "axes", &n);
  int64_t dflt[3] = { 0, 2, 3 };
  if (n < 0) axes = dflt, n = 3;
  if ((s = norm_axes(im, axes, n, rank, ax, &na))) return s;
  return normalize(im, IN(c, 0), na, ax, 1e-9, &c->out[0]);
}

static kiln_status r_rmsnorm(Importer *im, Call *c) {
  kiln_status s;
  if ((s = need_in(im, c, 0)) || (s = need_in(im, c, 1))) return s;
  int x = IN(c, 0), rank = T(im, x)->rank, ax[KILN_MAX_RANK], n = 0, t;
  int64_t axis0 = im_attr_i(im, "axis", -1);
  int axis = norm_axis(axis0, rank);
  if (axis < 0) return bad_axis(im, axis0, rank);
  for (int r = axis; r < rank; r++) ax[n++] = r;
  if ((s = bin(im, OP_MUL, x, x, &t)) || (s = graph_reduce(im->g, KILN_REDUCE_MEAN, t, n, ax, 1, &t)) ||
      (s = binc(im, OP_ADD, t, im_attr_f(im, "epsilon", 1e-5f), &t)) || (s = un(im, OP_SQRT, t, &t)) ||
      (s = bin(im, OP_DIV, x, t, &t)))
    return s;
  return bin(im, OP_MUL, t, IN(c, 1), &c->out[0]);
}

static kiln_status r_lpnorm(Importer *im, Call *c) {
  kiln_status s = need_in(im, c, 0);
  if (s) return s;
  int x = IN(c, 0), rank = T(im, x)->rank, t;
  int64_t axis0 = im_attr_i(im, "axis", -1), p = im_attr_i(im, "p", 2);
  int axis = norm_axis(axis0, rank);
  if (axis < 0) return bad_axis(im, axis0, rank);
  if (p != 1 && p != 2) return im_fail(im, KILN_ERR_MODEL, "p = %lld, expected 1 or 2", (long long)p);
  int z, one;
  if ((s = graph_reduce(im->g, p == 1 ? KILN_REDUCE_L1 : KILN_REDUCE_L2, x, 1, &axis, 1, &t)) ||
      (s = binc(im, OP_EQ, t, 0, &z)) || (s = scalar(im, T(im, t)->dtype, 1, &one)) || (s = where(im, z, one, t, &t)))
    return s;  /* a zero vector stays zero */
  return bin(im, OP_DIV, x, t, &c->out[0]);
}

/* ---- selection by index, losses, scans ---- */

/* An i64 constant 0..n-1 laid along axis of a rank-dim tensor of ones. */
static kiln_status arange_along(Importer *im, int64_t n, int rank, int axis, int *out) {
  int64_t *v = arena_alloc(&im->tmp, sizeof(int64_t) * (size_t)(n + 1)), sh[KILN_MAX_RANK];
  if (!v) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory");
  for (int64_t i = 0; i < n; i++) v[i] = i;
  for (int r = 0; r < rank; r++) sh[r] = r == axis ? n : 1;
  return im_const_i64(im, rank, sh, v, out);
}

/* x with a dim of size 1 inserted at position at. */
static kiln_status insert_dim(Importer *im, int x, int at, int *out) {
  Tensor *t = T(im, x);
  int64_t sh[KILN_MAX_RANK];
  if (t->rank + 1 > KILN_MAX_RANK) return im_fail(im, KILN_ERR_UNSUPPORTED, "rank %d too large", t->rank + 1);
  if (at < 0 || at > t->rank) return im_fail(im, KILN_ERR_MODEL, "no position %d in rank %d", at, t->rank);
  for (int r = 0, k = 0; r <= t->rank; r++) sh[r] = r == at ? 1 : t->shape[k++];
  return reshape(im, x, t->rank + 1, sh, out);
}

/* Integer indices made i64 and non-negative (i + n where i < 0). */
static kiln_status wrap_index(Importer *im, int idx, int64_t n, int *out) {
  int neg, plus;
  kiln_status s;
  if ((s = cast(im, idx, KILN_I64, &idx)) || (s = binc(im, OP_LT, idx, 0, &neg)) || (s = binc(im, OP_ADD, idx, (double)n, &plus)))
    return s;
  return where(im, neg, plus, idx, out);
}

/* out[p] = data[p with p[axis] replaced by idx[p]]: a one-hot select summed over a new
 * axis, so it stays in kiln's primitives (O(n * dim) work, exact: one term is nonzero). */
static kiln_status gather_elements(Importer *im, int data, int idx, int axis, int *out) {
  Tensor *D = T(im, data), *I = T(im, idx);
  int r = D->rank;
  if (I->rank != r) return im_fail(im, KILN_ERR_MODEL, "indices rank %d differs from data rank %d", I->rank, r);
  if (r + 1 > KILN_MAX_RANK) return im_fail(im, KILN_ERR_UNSUPPORTED, "rank %d too large", r + 1);
  int64_t dn = D->shape[axis];
  kiln_dtype dt = D->dtype;
  Attr a = { 0 };
  a.shape_rank = r;
  for (int k = 0; k < r; k++) {
    if (k != axis && I->shape[k] > D->shape[k]) return im_fail(im, KILN_ERR_MODEL, "indices dim %d exceeds data's", k);
    a.shape[k] = k == axis ? dn : I->shape[k], a.steps[k] = 1;
  }
  kiln_status s;
  int e = data, ar, mask, zero, sel;
  bool same = !memcmp(a.shape, D->shape, sizeof(int64_t) * (size_t)r);
  if (!same && (s = add(im, OP_SLICE, 1, &data, &a, &e))) return s;
  if (dt == KILN_BOOL && (s = cast(im, e, KILN_U8, &e))) return s;
  if ((s = insert_dim(im, e, axis, &e)) || (s = wrap_index(im, idx, dn, &idx)) || (s = insert_dim(im, idx, axis + 1, &idx)) ||
      (s = arange_along(im, dn, r + 1, axis + 1, &ar)) || (s = bin(im, OP_EQ, idx, ar, &mask)) ||
      (s = scalar(im, T(im, e)->dtype, 0, &zero)) || (s = where(im, mask, e, zero, &sel)))
    return s;
  int ax = axis + 1;
  if ((s = graph_reduce(im->g, KILN_REDUCE_SUM, sel, 1, &ax, 0, &sel))) return s;
  return cast(im, sel, dt, out);
}

static kiln_status r_gather_elements(Importer *im, Call *c) {
  kiln_status s;
  if ((s = need_in(im, c, 0)) || (s = need_in(im, c, 1))) return s;
  int rank = T(im, IN(c, 0))->rank;
  int64_t axis0 = im_attr_i(im, "axis", 0);
  int axis = norm_axis(axis0, rank);
  if (axis < 0) return bad_axis(im, axis0, rank);
  return gather_elements(im, IN(c, 0), IN(c, 1), axis, &c->out[0]);
}

/* Negative log-likelihood: input [N, C, d...] of log-probabilities, target [N, d...]. */
static kiln_status nll(Importer *im, int input, int target, int weight, int *out) {
  const char *red = im_attr_s(im, "reduction", "mean");
  const Onnx__AttributeProto *ig = im_attr(im, "ignore_index");
  Tensor *x = T(im, input);
  if (x->rank < 2) return im_fail(im, KILN_ERR_MODEL, "input rank %d < 2", x->rank);
  int64_t C = x->shape[1];
  kiln_dtype dt = x->dtype;
  int t, tsafe, ign = -1, picked, loss, w = -1, zero;
  kiln_status s;
  if ((s = cast(im, target, KILN_I64, &t))) return s;
  tsafe = t;
  if (ig && ig->has_i) {  /* ignored targets pick class 0 and weigh 0 */
    int z;
    if ((s = binc(im, OP_EQ, t, (double)ig->i, &ign)) || (s = scalar(im, KILN_I64, 0, &z)) || (s = where(im, ign, z, t, &tsafe)))
      return s;
  }
  int tu;
  if ((s = insert_dim(im, tsafe, 1, &tu)) || (s = gather_elements(im, input, tu, 1, &picked))) return s;
  int64_t tsh[KILN_MAX_RANK];
  Tensor *tt = T(im, t);
  int trank = tt->rank;
  memcpy(tsh, tt->shape, sizeof tsh);
  if ((s = reshape(im, picked, trank, tsh, &picked)) || (s = un(im, OP_NEG, picked, &loss))) return s;
  if (weight >= 0) {
    Attr a = { 0 };
    if (T(im, weight)->numel != C) return im_fail(im, KILN_ERR_MODEL, "weight has %lld entries for %lld classes",
                                                  (long long)T(im, weight)->numel, (long long)C);
    if ((s = add(im, OP_GATHER, 2, (int[]){ weight, tsafe }, &a, &w))) return s;
  }
  if (ign >= 0) {
    if (w < 0 && (s = filled(im, dt, 1, trank, tsh, &w))) return s;
    if ((s = scalar(im, dt, 0, &zero)) || (s = where(im, ign, zero, w, &w))) return s;
  }
  if (w >= 0 && (s = bin(im, OP_MUL, loss, w, &loss))) return s;
  if (!strcmp(red, "none")) return give(out, loss);
  int all[KILN_MAX_RANK], n = 0;
  for (int r = 0; r < trank; r++) all[n++] = r;
  if (!strcmp(red, "sum")) return n ? graph_reduce(im->g, KILN_REDUCE_SUM, loss, n, all, 0, out) : give(out, loss);
  if (strcmp(red, "mean")) return im_fail(im, KILN_ERR_MODEL, "reduction '%s' is unknown", red);
  if (w < 0) return graph_reduce(im->g, KILN_REDUCE_MEAN, loss, n, all, 0, out);
  int sl, sw;
  if ((s = graph_reduce(im->g, KILN_REDUCE_SUM, loss, n, all, 0, &sl)) || (s = graph_reduce(im->g, KILN_REDUCE_SUM, w, n, all, 0, &sw)))
    return s;
  return bin(im, OP_DIV, sl, sw, out);
}

static kiln_status r_nll(Importer *im, Call *c) {
  kiln_status s;
  if ((s = need_in(im, c, 0)) || (s = need_in(im, c, 1))) return s;
  return nll(im, IN(c, 0), IN(c, 1), IN(c, 2), &c->out[0]);
}

static kiln_status r_sce(Importer *im, Call *c) {
  kiln_status s;
  if ((s = need_in(im, c, 0)) || (s = need_in(im, c, 1))) return s;
  int lp;
  if (T(im, IN(c, 0))->rank < 2) return im_fail(im, KILN_ERR_MODEL, "scores rank < 2");
  if ((s = graph_softmax(im->g, IN(c, 0), 1, true, &lp))) return s;
  if (c->n_out > 1) c->out[1] = lp;
  return nll(im, lp, IN(c, 1), IN(c, 2), &c->out[0]);
}

/* Hardmax: one at the first maximum along axis, zero elsewhere. */
static kiln_status hardmax(Importer *im, int x, int axis, int *out) {
  Tensor *t = T(im, x);
  int rank = t->rank, am, ar, eq;
  int64_t n = t->shape[axis];
  kiln_dtype dt = t->dtype;
  Attr a = { 0 };
  a.axis = axis, a.keepdims = 1;
  kiln_status s;
  if ((s = add(im, OP_ARGMAX, 1, &x, &a, &am)) || (s = arange_along(im, n, rank, axis, &ar)) || (s = bin(im, OP_EQ, am, ar, &eq)))
    return s;
  return cast(im, eq, dt, out);
}

static kiln_status r_hardmax(Importer *im, Call *c) {
  kiln_status s = need_in(im, c, 0);
  if (s) return s;
  Tensor *x = T(im, IN(c, 0));
  int rank = x->rank;
  int64_t axis0 = im_attr_i(im, "axis", im->opset < 13 ? 1 : -1);
  int axis = norm_axis(axis0, rank);
  if (rank == 0 || axis < 0) return bad_axis(im, axis0, rank);
  if (im->opset >= 13 || axis == rank - 1) return hardmax(im, IN(c, 0), axis, &c->out[0]);
  int64_t sh[2] = { 1, 1 }, back[KILN_MAX_RANK];
  for (int r = 0; r < rank; r++) sh[r >= axis] *= x->shape[r];
  memcpy(back, x->shape, sizeof back);
  int t;
  if ((s = reshape(im, IN(c, 0), 2, sh, &t)) || (s = hardmax(im, t, 1, &t))) return s;
  return reshape(im, t, rank, back, &c->out[0]);
}

/* CumSum: out[..j..] = sum over i of x[..i..] where M[i][j] (a constant triangle). */
static kiln_status r_cumsum(Importer *im, Call *c) {
  kiln_status s;
  if ((s = need_in(im, c, 0)) || (s = need_in(im, c, 1))) return s;
  int64_t *av;
  int na;
  if ((s = const_ints(im, IN(c, 1), "axis", &av, &na))) return s;
  if (na != 1) return im_fail(im, KILN_ERR_MODEL, "axis must hold one element");
  Tensor *x = T(im, IN(c, 0));
  int rank = x->rank, axis = norm_axis(av[0], rank);
  if (axis < 0) return bad_axis(im, av[0], rank);
  if (rank + 1 > KILN_MAX_RANK) return im_fail(im, KILN_ERR_UNSUPPORTED, "rank too large");
  int64_t n = x->shape[axis], sh[KILN_MAX_RANK];
  if (n > 2048) return im_fail(im, KILN_ERR_UNSUPPORTED, "cumulative sum over %lld elements", (long long)n);
  bool excl = im_attr_i(im, "exclusive", 0) != 0, rev = im_attr_i(im, "reverse", 0) != 0;
  uint8_t *m = arena_alloc(&im->tmp, (size_t)(n * n + 1));
  if (!m) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory");
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++) m[i * n + j] = rev ? (excl ? i > j : i >= j) : (excl ? i < j : i <= j);
  for (int r = 0; r <= rank; r++) sh[r] = r == axis || r == axis + 1 ? n : 1;
  int mask, xu, zero, sel, ax = axis;
  kiln_dtype dt = x->dtype;
  bool prod = !strcmp(c->name, "CumProd");  /* the same triangle, multiplying (1 where masked) */
  if ((s = im_const(im, KILN_BOOL, rank + 1, sh, m, &mask)) || (s = insert_dim(im, IN(c, 0), axis + 1, &xu)) ||
      (s = scalar(im, dt, prod, &zero)) || (s = where(im, mask, xu, zero, &sel)))
    return s;
  return graph_reduce(im->g, prod ? KILN_REDUCE_PROD : KILN_REDUCE_SUM, sel, 1, &ax, 0, &c->out[0]);
}

/* ---- quantisation ---- */

/* A per-axis [C] vector reshaped to broadcast along axis of a rank-dim tensor. */
static kiln_status along_axis(Importer *im, int v, int rank, int axis, int *out) {
  if (T(im, v)->rank == 0 || T(im, v)->numel == 1) return give(out, v);
  if (T(im, v)->rank != 1) return im_fail(im, KILN_ERR_UNSUPPORTED, "blocked quantisation is not supported");
  int64_t sh[KILN_MAX_RANK];
  for (int r = 0; r < rank; r++) sh[r] = r == axis ? T(im, v)->numel : 1;
  return reshape(im, v, rank, sh, out);
}

static kiln_status r_dequantize(Importer *im, Call *c) {
  kiln_status s;
  if ((s = need_in(im, c, 0)) || (s = need_in(im, c, 1))) return s;
  if (im_attr_i(im, "block_size", 0)) return im_fail(im, KILN_ERR_UNSUPPORTED, "blocked quantisation is not supported");
  int rank = T(im, IN(c, 0))->rank, axis = norm_axis(im_attr_i(im, "axis", 1), rank);
  if (axis < 0 && T(im, IN(c, 1))->numel > 1) return bad_axis(im, im_attr_i(im, "axis", 1), rank);  /* per-axis only */
  kiln_dtype ft = T(im, IN(c, 1))->dtype, work = ft == KILN_F64 ? KILN_F64 : KILN_F32;
  int x, sc, zp;
  if ((s = cast(im, IN(c, 0), work, &x)) || (s = cast(im, IN(c, 1), work, &sc)) || (s = along_axis(im, sc, rank, axis, &sc))) return s;
  if (IN(c, 2) >= 0) {
    if ((s = cast(im, IN(c, 2), work, &zp)) || (s = along_axis(im, zp, rank, axis, &zp)) || (s = bin(im, OP_SUB, x, zp, &x))) return s;
  }
  if ((s = bin(im, OP_MUL, x, sc, &x))) return s;
  kiln_dtype to = ft;
  if (im_attr(im, "output_dtype") && im_attr_i(im, "output_dtype", 0) &&
      (s = onnx_elem_type((int32_t)im_attr_i(im, "output_dtype", 0), "output_dtype", &to)))
    return s;
  return cast(im, x, to, &c->out[0]);
}

static kiln_status r_quantize(Importer *im, Call *c) {
  kiln_status s;
  if ((s = need_in(im, c, 0)) || (s = need_in(im, c, 1))) return s;
  if (im_attr_i(im, "block_size", 0)) return im_fail(im, KILN_ERR_UNSUPPORTED, "blocked quantisation is not supported");
  int rank = T(im, IN(c, 0))->rank, axis = norm_axis(im_attr_i(im, "axis", 1), rank);
  if (axis < 0 && T(im, IN(c, 1))->numel > 1) return bad_axis(im, im_attr_i(im, "axis", 1), rank);  /* per-axis only */
  kiln_dtype to = IN(c, 2) >= 0 ? T(im, IN(c, 2))->dtype : KILN_U8;
  if (im_attr(im, "output_dtype") && im_attr_i(im, "output_dtype", 0) &&
      (s = onnx_elem_type((int32_t)im_attr_i(im, "output_dtype", 0), "output_dtype", &to)))
    return s;
  double lo, hi;
  switch (to) {
  case KILN_U8: lo = 0, hi = 255; break;
  case KILN_I8: lo = -128, hi = 127; break;
  case KILN_U16: lo = 0, hi = 65535; break;
  case KILN_I16: lo = -32768, hi = 32767; break;
  default: return im_fail(im, KILN_ERR_UNSUPPORTED, "quantising to %s is not supported", kiln_dtype_name(to));
  }
  kiln_dtype work = T(im, IN(c, 0))->dtype == KILN_F64 ? KILN_F64 : KILN_F32;
  int x, sc, zp;
  if ((s = cast(im, IN(c, 0), work, &x)) || (s = cast(im, IN(c, 1), work, &sc)) || (s = along_axis(im, sc, rank, axis, &sc)) ||
      (s = bin(im, OP_DIV, x, sc, &x)) || (s = un(im, OP_ROUND, x, &x)))
    return s;
  if (IN(c, 2) >= 0) {
    if ((s = cast(im, IN(c, 2), work, &zp)) || (s = along_axis(im, zp, rank, axis, &zp)) || (s = bin(im, OP_ADD, x, zp, &x))) return s;
  }
  if ((s = binc(im, OP_MAX, x, lo, &x)) || (s = binc(im, OP_MIN, x, hi, &x))) return s;
  return cast(im, x, to, &c->out[0]);
}

/* CenterCropPad: crop or zero-pad each listed axis to the target, centred. */
static kiln_status r_center_crop_pad(Importer *im, Call *c) {
  kiln_status s;
  if ((s = need_in(im, c, 0)) || (s = need_in(im, c, 1))) return s;
  int64_t *sh, *axes = NULL;
  int n, na = -1;
  if ((s = const_ints(im, IN(c, 1), "shape", &sh, &n))) return s;
  axes = (int64_t *)im_attr_ints(im, "axes", &na);
  int x = IN(c, 0), rank = T(im, x)->rank;
  if ((na >= 0 ? na : rank) != n) return im_fail(im, KILN_ERR_MODEL, "shape has %d entries", n);
  Attr a = { 0 };
  bool pad = false;
  for (int i = 0; i < n; i++) {
    int r = na >= 0 ? norm_axis(axes[i], rank) : i;
    if (r < 0) return bad_axis(im, axes[i], rank);
    int64_t d = T(im, x)->shape[r], want = sh[i];
    if (want < 0) return im_fail(im, KILN_ERR_MODEL, "negative target size");
    if (want < d && (s = slice1(im, x, r, (d - want) / 2, want, 1, &x))) return s;
    if (want > d) a.pads[r] = (want - d) / 2, a.pads[rank + r] = want - d - (want - d) / 2, pad = true;
  }
  if (!pad) return identity_out(c, x);
  a.pad_mode = KILN_PAD_CONSTANT;
  return add(im, OP_PAD, 1, &x, &a, &c->out[0]);
}

static kiln_status r_groupnorm(Importer *im, Call *c) {
  kiln_status s;
  for (int i = 0; i < 3; i++)
    if ((s = need_in(im, c, i))) return s;
  Tensor *x = T(im, IN(c, 0));
  int64_t G = im_attr_i(im, "num_groups", 0), back[KILN_MAX_RANK], C, rest = 1;
  int rank = x->rank;
  if (rank < 2 || G <= 0 || x->shape[1] % G) return im_fail(im, KILN_ERR_MODEL, "channels not divisible into %lld groups", (long long)G);
  C = x->shape[1];
  memcpy(back, x->shape, sizeof back);
  for (int r = 1; r < rank; r++) rest *= x->shape[r];
  int64_t gsh[3] = { x->shape[0], G, rest / G };
  int y, ax = 2, sc = IN(c, 1), b = IN(c, 2);
  if ((s = reshape(im, IN(c, 0), 3, gsh, &y)) || (s = normalize(im, y, 1, &ax, im_attr_f(im, "epsilon", 1e-5f), &y)) ||
      (s = reshape(im, y, rank, back, &y)))
    return s;
  if (T(im, sc)->numel == G && G != C) {  /* opset 18: one scale per group */
    int64_t g1[2] = { G, 1 }, gc[1] = { C };
    Attr a = { 0 };
    a.shape_rank = 2, a.shape[0] = G, a.shape[1] = C / G;
    if ((s = reshape(im, sc, 2, g1, &sc)) || (s = add(im, OP_EXPAND, 1, &sc, &a, &sc)) || (s = reshape(im, sc, 1, gc, &sc)) ||
        (s = reshape(im, b, 2, g1, &b)) || (s = add(im, OP_EXPAND, 1, &b, &a, &b)) || (s = reshape(im, b, 1, gc, &b)))
      return s;
  }
  if ((s = per_channel(im, sc, rank, &sc)) || (s = per_channel(im, b, rank, &b)) || (s = bin(im, OP_MUL, y, sc, &y))) return s;
  return bin(im, OP_ADD, y, b, &c->out[0]);
}

/* ---- sequences: lists of tensor ids, resolved while importing ---- */

static kiln_status new_seq(Importer *im, int n, int *out) {
  if (im->n_seqs == im->cap_seqs) {
    int cap = im->cap_seqs ? 2 * im->cap_seqs : 16;
    struct Seq *v = kiln_realloc(im->seqs, sizeof *v * (size_t)cap);
    if (!v) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory");
    im->seqs = v, im->cap_seqs = cap;
  }
  struct Seq *q = &im->seqs[im->n_seqs];
  q->n = n;
  if (!(q->ids = arena_alloc(&im->tmp, sizeof(int) * (size_t)(n + 1)))) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory");
  *out = SEQ_ID(im->n_seqs++);
  return KILN_OK;
}

static kiln_status get_seq(Importer *im, const Call *c, int i, struct Seq **q) {
  int id = IN(c, i);
  if (id >= -1 || SEQ_INDEX(id) >= im->n_seqs) return im_fail(im, KILN_ERR_MODEL, "input %d is not a sequence", i);
  *q = &im->seqs[SEQ_INDEX(id)];
  return KILN_OK;
}

/* A position input (default dflt), negative counting from the end, within 0..limit. */
static kiln_status seq_pos(Importer *im, const Call *c, int i, int64_t dflt, int n, int limit, int64_t *pos) {
  int64_t *v;
  int k;
  kiln_status s;
  *pos = dflt;
  if (IN(c, i) >= 0) {
    if ((s = const_ints(im, IN(c, i), "position", &v, &k))) return s;
    if (k != 1) return im_fail(im, KILN_ERR_MODEL, "position must hold one element");
    *pos = v[0] < 0 ? v[0] + n : v[0];
  }
  if (*pos < 0 || *pos > limit) return im_fail(im, KILN_ERR_MODEL, "position %lld is outside the sequence", (long long)*pos);
  return KILN_OK;
}

static kiln_status r_sequence(Importer *im, Call *c) {
  const char *op = c->name;
  struct Seq *q = NULL;
  kiln_status s;
  int id;
  if (!strcmp(op, "SequenceEmpty")) return new_seq(im, 0, &c->out[0]);
  if (!strcmp(op, "SequenceConstruct")) {
    for (int i = 0; i < c->n_in; i++)
      if ((s = need_in(im, c, i))) return s;
    if ((s = new_seq(im, c->n_in, &id))) return s;
    memcpy(im->seqs[SEQ_INDEX(id)].ids, c->in, sizeof(int) * (size_t)c->n_in);
    return give(&c->out[0], id);
  }
  if ((s = get_seq(im, c, 0, &q))) return s;
  int n = q->n;
  int64_t pos;
  if (!strcmp(op, "SequenceLength")) {
    int64_t len = n;
    return im_const_i64(im, 0, NULL, &len, &c->out[0]);
  }
  if (!strcmp(op, "SequenceAt")) {
    if ((s = need_in(im, c, 1)) || (s = seq_pos(im, c, 1, 0, n, n - 1, &pos))) return s;
    return give(&c->out[0], q->ids[pos]);
  }
  if (!strcmp(op, "SequenceInsert") || !strcmp(op, "SequenceErase")) {
    bool ins = op[8] == 'I';
    if ((ins && (s = need_in(im, c, 1))) || (s = seq_pos(im, c, ins ? 2 : 1, ins ? n : n - 1, n, ins ? n : n - 1, &pos)) ||
        (s = new_seq(im, ins ? n + 1 : n - 1, &id)))
      return s;
    q = &im->seqs[SEQ_INDEX(IN(c, 0))];  /* new_seq may have moved it */
    int *d = im->seqs[SEQ_INDEX(id)].ids, k = 0;
    for (int i = 0; i < n; i++) {
      if (i == pos && ins) d[k++] = IN(c, 1);
      if (i != pos || ins) d[k++] = q->ids[i];
    }
    if (ins && pos == n) d[k++] = IN(c, 1);
    return give(&c->out[0], id);
  }
  if (!strcmp(op, "ConcatFromSequence")) {
    if (n == 0) return im_fail(im, KILN_ERR_MODEL, "the sequence is empty");
    int *ids = arena_alloc(&im->tmp, sizeof(int) * (size_t)n), rank = T(im, q->ids[0])->rank;
    if (!ids) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory");
    memcpy(ids, q->ids, sizeof(int) * (size_t)n);
    bool new_axis = im_attr_i(im, "new_axis", 0) != 0;
    int64_t axis0 = im_attr_i(im, "axis", 0);
    int axis = norm_axis(axis0, rank + new_axis);
    if (axis < 0) return bad_axis(im, axis0, rank + new_axis);
    for (int i = 0; new_axis && i < n; i++)
      if ((s = insert_dim(im, ids[i], axis, &ids[i]))) return s;
    if (n == 1) return give(&c->out[0], ids[0]);
    Attr a = { 0 };
    a.axis = axis;
    return add(im, OP_CONCAT, n, ids, &a, &c->out[0]);
  }
  return im_fail(im, KILN_ERR_UNSUPPORTED, "no rule");
}

static kiln_status r_split_to_sequence(Importer *im, Call *c) {
  kiln_status s = need_in(im, c, 0);
  if (s) return s;
  Tensor *x = T(im, IN(c, 0));
  int64_t axis0 = im_attr_i(im, "axis", 0), d, *sp = NULL;
  int axis = norm_axis(axis0, x->rank), n = -1;
  if (axis < 0) return bad_axis(im, axis0, x->rank);
  d = x->shape[axis];
  bool scalar_split = false;
  if (IN(c, 1) >= 0) {
    scalar_split = T(im, IN(c, 1))->rank == 0;
    if ((s = const_ints(im, IN(c, 1), "split", &sp, &n))) return s;
  }
  bool keep = IN(c, 1) >= 0 || im_attr_i(im, "keepdims", 1) != 0;
  int64_t chunk = scalar_split ? sp[0] : 1;
  if (chunk <= 0) return im_fail(im, KILN_ERR_MODEL, "split size %lld", (long long)chunk);
  int parts = n >= 0 && !scalar_split ? n : (int)((d + chunk - 1) / chunk);
  if (parts > 4096) return im_fail(im, KILN_ERR_UNSUPPORTED, "%d parts", parts);
  int id, x0 = IN(c, 0), rank = x->rank;
  int64_t sh[KILN_MAX_RANK];
  memcpy(sh, x->shape, sizeof sh);
  if ((s = new_seq(im, parts, &id))) return s;
  int64_t start = 0;
  for (int i = 0; i < parts; i++) {
    int64_t len = n >= 0 && !scalar_split ? sp[i] : (start + chunk <= d ? chunk : d - start);
    if (len < 0 || start + len > d) return im_fail(im, KILN_ERR_MODEL, "split sizes exceed dimension %lld", (long long)d);
    int t;
    if ((s = slice1(im, x0, axis, start, len, 1, &t))) return s;
    if (!keep) {  /* each part is one element along axis: drop it */
      int64_t q[KILN_MAX_RANK];
      for (int r = 0, k = 0; r < rank; r++)
        if (r != axis) q[k++] = sh[r];
      if ((s = reshape(im, t, rank - 1, q, &t))) return s;
    }
    im->seqs[SEQ_INDEX(id)].ids[i] = t;
    start += len;
  }
  if (start != d) return im_fail(im, KILN_ERR_MODEL, "split sizes sum to %lld, not %lld", (long long)start, (long long)d);
  return give(&c->out[0], id);
}

/* Gradient (ai.onnx.preview.training): d sum(y) / d x for each name in xs. */
kiln_status im_gradient(Importer *im, int n_in, const int *ins, int n_out, int *outs) {
  (void)n_in, (void)ins;
  const Onnx__AttributeProto *xs = im_attr(im, "xs"), *y = im_attr(im, "y");
  if (!xs || !y || !y->has_s || (int)xs->n_strings != n_out || n_out > KILN_MAX_RANK * 8)
    return im_fail(im, KILN_ERR_MODEL, "needs attributes xs (one per output) and y");
  char name[256];
  int wrt[64], loss, all[KILN_MAX_RANK], k = 0;
  snprintf(name, sizeof name, "%.*s", (int)(y->s.len < 255 ? y->s.len : 255), (const char *)y->s.data);
  if ((loss = map_get_id(im, name)) < 0) return im_fail(im, KILN_ERR_MODEL, "y '%s' is not a tensor defined here", name);
  for (int i = 0; i < n_out && i < 64; i++) {
    snprintf(name, sizeof name, "%.*s", (int)(xs->strings[i].len < 255 ? xs->strings[i].len : 255), (const char *)xs->strings[i].data);
    if ((wrt[i] = map_get_id(im, name)) < 0) return im_fail(im, KILN_ERR_MODEL, "xs '%s' is not a tensor defined here", name);
  }
  for (int r = 0; r < T(im, loss)->rank; r++) all[k++] = r;
  kiln_status s;
  if (k && (s = graph_reduce(im->g, KILN_REDUCE_SUM, loss, k, all, 0, &loss))) return s;
  return graph_grad(im->g, loss, n_out, wrt, outs);
}

/* ---- attention (opset 23) ---- */

/* [B, S, H*D] -> [B, H, S, D] */
static kiln_status heads_split(Importer *im, int x, int64_t h, int *out) {
  Tensor *t = T(im, x);
  if (h <= 0 || t->shape[2] % h) return im_fail(im, KILN_ERR_MODEL, "hidden size %lld does not split into %lld heads",
                                                (long long)t->shape[2], (long long)h);
  int64_t sh[4] = { t->shape[0], t->shape[1], h, t->shape[2] / h };
  int perm[4] = { 0, 2, 1, 3 };
  kiln_status s = reshape(im, x, 4, sh, &x);
  return s ? s : transpose(im, x, perm, out);
}

/* Each of kv heads repeated rep times in place: [h0, h0, h1, h1, ...]. */
static kiln_status repeat_heads(Importer *im, int x, int64_t rep, int *out) {
  Tensor *t = T(im, x);
  int64_t B = t->shape[0], H = t->shape[1], S = t->shape[2], D = t->shape[3];
  int64_t s5[5] = { B, H, 1, S, D }, s4[4] = { B, H * rep, S, D };
  Attr a = { 0 };
  a.shape_rank = 5, a.shape[0] = B, a.shape[1] = H, a.shape[2] = rep, a.shape[3] = S, a.shape[4] = D;
  kiln_status s;
  if ((s = reshape(im, x, 5, s5, &x)) || (s = add(im, OP_EXPAND, 1, &x, &a, &x))) return s;
  return reshape(im, x, 4, s4, out);
}

/* The additive bias of attention: mask (bool: keep where true; float: added), the causal
 * triangle (query i sees key j <= i + offset) and the padding of nonpad_kv_seqlen.
 * *bias = -1 when there is none. */
static kiln_status attention_bias(Importer *im, const Call *c, kiln_dtype dt, int64_t B, int64_t Sq, int64_t Skv,
                                  int64_t past, int *bias) {
  kiln_status s;
  int mask = IN(c, 3), nonpad = IN(c, 6), zero, ninf;
  bool causal = im_attr_i(im, "is_causal", 0) != 0;
  int64_t cells;
  *bias = -1;
  if (!size_mul(Sq, Skv, &cells) || cells > (1 << 24)) return im_fail(im, KILN_ERR_UNSUPPORTED, "attention of %lld x %lld", (long long)Sq, (long long)Skv);
  if ((s = scalar(im, dt, 0, &zero)) || (s = scalar(im, dt, -INFINITY, &ninf))) return s;
  if (mask >= 0) {
    Tensor *m = T(im, mask);
    if (m->rank < 1) return im_fail(im, KILN_ERR_MODEL, "attn_mask is a scalar");
    int64_t padw = Skv - m->shape[m->rank - 1];
    if (padw > 0) {  /* a short mask is padded with "masked out" */
      Attr a = { 0 };
      a.pads[2 * m->rank - 1] = padw;
      a.value = m->dtype == KILN_BOOL ? 0 : -INFINITY;
      if ((s = add(im, OP_PAD, 1, &mask, &a, &mask))) return s;
    }
    if (T(im, mask)->dtype == KILN_BOOL) {
      if ((s = where(im, mask, zero, ninf, &mask))) return s;
    } else if ((s = cast(im, mask, dt, &mask))) {
      return s;
    }
    *bias = mask;
  }
  if (causal) {
    int tri;
    if (nonpad >= 0 && IN(c, 4) < 0) {  /* per batch: j - i + Sq <= nonpad[b] */
      int64_t *d = arena_alloc(&im->tmp, sizeof(int64_t) * (size_t)(Sq * Skv + 1)), sh[3] = { 1, Sq, Skv }, nb[3] = { B, 1, 1 };
      if (!d) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory");
      for (int64_t i = 0; i < Sq; i++)
        for (int64_t j = 0; j < Skv; j++) d[i * Skv + j] = j - i + Sq;
      int dd, np, ok;
      int64_t b4[4] = { B, 1, Sq, Skv };
      if ((s = im_const_i64(im, 3, sh, d, &dd)) || (s = cast(im, nonpad, KILN_I64, &np)) || (s = reshape(im, np, 3, nb, &np)) ||
          (s = bin(im, OP_LE, dd, np, &ok)) || (s = where(im, ok, zero, ninf, &tri)) || (s = reshape(im, tri, 4, b4, &tri)))
        return s;
    } else {
      uint8_t *m = arena_alloc(&im->tmp, (size_t)(Sq * Skv + 1));
      int64_t sh[2] = { Sq, Skv };
      if (!m) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory");
      for (int64_t i = 0; i < Sq; i++)
        for (int64_t j = 0; j < Skv; j++) m[i * Skv + j] = j <= i + past;
      if ((s = im_const(im, KILN_BOOL, 2, sh, m, &tri)) || (s = where(im, tri, zero, ninf, &tri))) return s;
    }
    if (*bias < 0) *bias = tri;
    else if ((s = bin(im, OP_ADD, *bias, tri, bias))) return s;
  }
  if (nonpad >= 0) {  /* keys at or past nonpad_kv_seqlen[b] are padding */
    int ar, np, ok, pm;
    int64_t nb[2] = { B, 1 }, b4[4] = { B, 1, 1, Skv };
    if ((s = arange_along(im, Skv, 2, 1, &ar)) || (s = cast(im, nonpad, KILN_I64, &np)) || (s = reshape(im, np, 2, nb, &np)) ||
        (s = bin(im, OP_LT, ar, np, &ok)) || (s = where(im, ok, zero, ninf, &pm)) || (s = reshape(im, pm, 4, b4, &pm)))
      return s;
    if (*bias < 0) *bias = pm;
    else if ((s = bin(im, OP_ADD, *bias, pm, bias))) return s;
  }
  return KILN_OK;
}

static kiln_status r_attention(Importer *im, Call *c) {
  kiln_status s;
  for (int i = 0; i < 3; i++)
    if ((s = need_in(im, c, i))) return s;
  int q = IN(c, 0), k = IN(c, 1), v = IN(c, 2), rank = T(im, q)->rank;
  kiln_dtype dt = T(im, q)->dtype;
  if (!dtype_is_float(dt)) return im_fail(im, KILN_ERR_MODEL, "Q has dtype %s", kiln_dtype_name(dt));
  if (rank != 3 && rank != 4) return im_fail(im, KILN_ERR_MODEL, "Q has rank %d, expected 3 or 4", rank);
  if (T(im, k)->rank != rank || T(im, v)->rank != rank) return im_fail(im, KILN_ERR_MODEL, "Q, K and V ranks differ");
  int64_t B = T(im, q)->shape[0];
  if (rank == 3) {
    int64_t hq = im_attr_i(im, "q_num_heads", 0), hkv = im_attr_i(im, "kv_num_heads", 0);
    if ((s = heads_split(im, q, hq, &q)) || (s = heads_split(im, k, hkv, &k)) || (s = heads_split(im, v, hkv, &v))) return s;
  }
  int64_t Hq = T(im, q)->shape[1], Sq = T(im, q)->shape[2], D = T(im, q)->shape[3], Hkv = T(im, k)->shape[1], past = 0;
  const Onnx__AttributeProto *sa = im_attr(im, "scale");
  double scale = sa && sa->has_f ? sa->f : 1 / sqrt((double)D), root = sqrt(scale);
  if (IN(c, 4) >= 0) {  /* the cache grows by this step's keys and values */
    int in2[2] = { IN(c, 4), k };
    Attr a = { 0 };
    a.axis = 2;
    past = T(im, IN(c, 4))->shape[2];
    if ((s = add(im, OP_CONCAT, 2, in2, &a, &k))) return s;
  }
  if (IN(c, 5) >= 0) {
    int in2[2] = { IN(c, 5), v };
    Attr a = { 0 };
    a.axis = 2;
    if ((s = add(im, OP_CONCAT, 2, in2, &a, &v))) return s;
  }
  if (c->n_out > 1) c->out[1] = k;
  if (c->n_out > 2) c->out[2] = v;
  int64_t Skv = T(im, k)->shape[2];
  int bias, kt, qk, p, y, perm[4] = { 0, 1, 3, 2 };
  if ((s = attention_bias(im, c, dt, B, Sq, Skv, past, &bias))) return s;
  if (Hq != Hkv) {
    if (Hkv <= 0 || Hq % Hkv) return im_fail(im, KILN_ERR_MODEL, "%lld query heads for %lld kv heads", (long long)Hq, (long long)Hkv);
    if ((s = repeat_heads(im, k, Hq / Hkv, &k)) || (s = repeat_heads(im, v, Hq / Hkv, &v))) return s;
  }
  /* both operands scaled by sqrt(scale), as the ONNX reference does (same rounding) */
  if ((s = binc(im, OP_MUL, q, root, &q)) || (s = binc(im, OP_MUL, k, root, &kt)) || (s = transpose(im, kt, perm, &kt)) ||
      (s = bin(im, OP_MATMUL, q, kt, &qk)))
    return s;
  double cap = im_attr_f(im, "softcap", 0);
  if (cap > 0 && ((s = binc(im, OP_DIV, qk, cap, &qk)) || (s = un(im, OP_TANH, qk, &qk)) || (s = binc(im, OP_MUL, qk, cap, &qk))))
    return s;
  int64_t mode = im_attr_i(im, "qk_matmul_output_mode", 0);
  int scores = qk;
  if (bias >= 0 && (s = bin(im, OP_ADD, qk, bias, &scores))) return s;
  kiln_dtype sp = dt;
  if (im_attr(im, "softmax_precision") && (s = onnx_elem_type((int32_t)im_attr_i(im, "softmax_precision", 1), "softmax_precision", &sp)))
    return s;
  if ((s = cast(im, scores, sp, &p)) || (s = graph_softmax(im->g, p, 3, false, &p))) return s;
  if (bias >= 0) {  /* a fully masked row attends to nothing: zeros, not NaN */
    int nan, zero;
    if ((s = un(im, OP_ISNAN, p, &nan)) || (s = scalar(im, sp, 0, &zero)) || (s = where(im, nan, zero, p, &p))) return s;
  }
  if ((s = cast(im, p, dt, &p)) || (s = bin(im, OP_MATMUL, p, v, &y))) return s;
  if (c->n_out > 3) {
    int w = mode == 3 ? p : mode == 2 ? scores : qk;
    if ((s = cast(im, w, dt, &c->out[3]))) return s;
  }
  if (rank == 3) {
    int perm2[4] = { 0, 2, 1, 3 };
    Tensor *t = T(im, y);
    int64_t sh[3] = { t->shape[0], t->shape[2], t->shape[1] * t->shape[3] };
    if ((s = transpose(im, y, perm2, &y)) || (s = reshape(im, y, 3, sh, &y))) return s;
  }
  return give(&c->out[0], y);
}

/* ---- resize: per axis, a sum of gathers with constant indices and weights ---- */

typedef struct ResizeOpts {
  const char *mode, *coord, *nearest;
  double cubic_a, extrapolation;
  bool exclude_outside, antialias;
} ResizeOpts;

/* The weights of the taps around a source coordinate (ratio in (0, 1]); n taps. */
static int resize_coeffs(const ResizeOpts *o, double ratio, double scale, double *w) {
  if (!strcmp(o->mode, "nearest")) {
    bool hi;
    if (ratio == 1) hi = true;
    else if (!strcmp(o->nearest, "round_prefer_ceil")) hi = ratio >= 0.5;
    else if (!strcmp(o->nearest, "floor")) hi = false;
    else if (!strcmp(o->nearest, "ceil")) hi = true;
    else hi = ratio > 0.5;  /* round_prefer_floor */
    w[0] = !hi, w[1] = hi;
    return 2;
  }
  double A = o->cubic_a;
  if (o->antialias && scale < 1) {  /* a wider kernel, stretched by 1/scale, normalised */
    bool lin = !strcmp(o->mode, "linear");
    int start = (int)floor((lin ? -1 : -2) / scale) + 1, n = lin ? 2 - 2 * start : 2 - 2 * start;
    if (n > 64) n = 64;
    double sum = 0;
    for (int i = 0; i < n; i++) {
      double x = fabs(scale * (start + i - ratio)), c;
      if (lin) c = x < 1 ? 1 - x : 0;
      else c = x <= 1 ? ((A + 2) * x - (A + 3)) * x * x + 1 : x < 2 ? ((A * x - 5 * A) * x + 8 * A) * x - 4 * A : 0;
      w[i] = c, sum += c;
    }
    for (int i = 0; i < n && sum != 0; i++) w[i] /= sum;
    return n;
  }
  if (!strcmp(o->mode, "linear")) {
    w[0] = 1 - ratio, w[1] = ratio;
    return 2;
  }
  double r1 = ratio + 1, q = 1 - ratio, q1 = q + 1;  /* cubic convolution, Keys' kernel */
  w[0] = ((A * r1 - 5 * A) * r1 + 8 * A) * r1 - 4 * A;
  w[1] = ((A + 2) * ratio - (A + 3)) * ratio * ratio + 1;
  w[2] = ((A + 2) * q - (A + 3)) * q * q + 1;
  w[3] = ((A * q1 - 5 * A) * q1 + 8 * A) * q1 - 4 * A;
  return 4;
}

/* Source coordinate of output index x; false when it falls outside (tf_crop_and_resize). */
static bool resize_coord(const ResizeOpts *o, double x, int64_t in, int64_t out, double scale, double r0, double r1,
                         double *xo) {
  double ow = scale * (double)in;
  const char *m = o->coord;
  if (!strcmp(m, "align_corners")) *xo = ow == 1 ? 0 : x * (double)(in - 1) / (ow - 1);
  else if (!strcmp(m, "asymmetric")) *xo = x / scale;
  else if (!strcmp(m, "tf_crop_and_resize")) {
    *xo = (ow == 1 ? (r1 - r0) * (double)(in - 1) / 2 : x * (r1 - r0) * (double)(in - 1) / (ow - 1)) + r0 * (double)(in - 1);
    return *xo >= 0 && *xo <= (double)(in - 1);
  } else if (!strcmp(m, "pytorch_half_pixel")) *xo = ow == 1 ? -0.5 : (x + 0.5) / scale - 0.5;
  else if (!strcmp(m, "half_pixel_symmetric")) {
    double adj = (double)out / ow, off = (double)in / 2 * (1 - adj);
    *xo = off + (x + 0.5) / scale - 0.5;
  } else *xo = (x + 0.5) / scale - 0.5;  /* half_pixel */
  return true;
}

/* Resamples one axis of x to `out` elements. */
static kiln_status resize_axis(Importer *im, const ResizeOpts *o, int x, int axis, int64_t out, double scale, double r0,
                               double r1, int *y) {
  Tensor *t = T(im, x);
  int rank = t->rank;
  int64_t in = t->shape[axis];
  kiln_dtype dt = t->dtype;
  if (in == 0 || out > (1 << 20)) return im_fail(im, KILN_ERR_UNSUPPORTED, "resize of axis %d from %lld to %lld", axis,
                                                 (long long)in, (long long)out);
  enum { MAXT = 64 };
  int64_t *idx = arena_alloc(&im->tmp, sizeof(int64_t) * (size_t)(out * MAXT + 1));
  double *wt = arena_alloc(&im->tmp, sizeof(double) * (size_t)(out * MAXT + 1));
  uint8_t *outside = arena_alloc(&im->tmp, (size_t)out + 1);
  if (!idx || !wt || !outside) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory");
  int taps = 0;
  bool any_out = false;
  for (int64_t j = 0; j < out; j++) {
    double xo, w[MAXT];
    outside[j] = !resize_coord(o, (double)j, in, out, scale, r0, r1, &xo);
    any_out |= outside[j];
    double fl = floor(xo), ratio = xo == fl ? 1 : xo - fl;
    int n = resize_coeffs(o, ratio, scale, w);
    int64_t pad = (n + 1) / 2, lo = (int64_t)fl - n, cand[2 * MAXT + 4];
    int nc = 0;
    for (int64_t k = lo; k <= (int64_t)fl + n + 1 && nc < 2 * MAXT + 4; k++)
      if (k >= -pad && k < in + pad) cand[nc++] = k;
    for (int a = 0; a < nc; a++)  /* nearest first, the smaller index on ties */
      for (int b = a + 1; b < nc; b++) {
        double da = fabs(xo - (double)cand[a]), db = fabs(xo - (double)cand[b]);
        if (db < da || (db == da && cand[b] < cand[a])) { int64_t tmp = cand[a]; cand[a] = cand[b], cand[b] = tmp; }
      }
    if (nc > n) nc = n;
    for (int a = 0; a < nc; a++)  /* ascending, matching the weights */
      for (int b = a + 1; b < nc; b++)
        if (cand[b] < cand[a]) { int64_t tmp = cand[a]; cand[a] = cand[b], cand[b] = tmp; }
    if (o->exclude_outside) {
      double sum = 0;
      for (int a = 0; a < nc; a++) {
        if (cand[a] < 0 || cand[a] >= in) w[a] = 0;
        sum += w[a];
      }
      for (int a = 0; a < nc && sum != 0; a++) w[a] /= sum;
    }
    for (int a = 0; a < MAXT; a++) {
      int64_t k = a < nc ? cand[a] : 0;
      idx[a * out + j] = k < 0 ? 0 : k >= in ? in - 1 : k;  /* edge padding */
      wt[a * out + j] = a < nc ? w[a] : 0;
    }
    if (nc > taps) taps = nc;
  }
  bool nearest = !strcmp(o->mode, "nearest");
  int acc = -1;
  kiln_status s;
  int64_t wsh[KILN_MAX_RANK];
  for (int r = 0; r < rank; r++) wsh[r] = r == axis ? out : 1;
  if (nearest) {  /* one tap: the one with weight 1 */
    for (int64_t j = 0; j < out; j++)
      for (int a = 0; a < taps; a++)
        if (wt[a * out + j] == 1) idx[j] = idx[a * out + j];
    taps = 1;
  }
  for (int a = 0; a < taps; a++) {
    bool used = nearest;
    for (int64_t j = 0; j < out && !used; j++) used = wt[a * out + j] != 0;
    if (!used) continue;
    int ix, gth, w;
    Attr ga = { 0 };
    ga.axis = axis;
    if ((s = im_const_i64(im, 1, &out, idx + a * out, &ix)) || (s = add(im, OP_GATHER, 2, (int[]){ x, ix }, &ga, &gth))) return s;
    if (!nearest) {
      void *wv = arena_alloc(&im->tmp, (size_t)out * kiln_dtype_size(dt) + 1);
      if (!wv) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory");
      for (int64_t j = 0; j < out; j++) dtype_store_f64(dt, wv, j, wt[a * out + j]);
      if ((s = im_const(im, dt, rank, wsh, wv, &w)) || (s = bin(im, OP_MUL, gth, w, &gth))) return s;
    }
    if (acc < 0) acc = gth;
    else if ((s = bin(im, OP_ADD, acc, gth, &acc))) return s;
  }
  if (acc < 0 && (s = filled(im, dt, 0, 0, NULL, &acc))) return s;
  if (any_out) {
    int m, e;
    if ((s = im_const(im, KILN_BOOL, rank, wsh, outside, &m)) || (s = scalar(im, dt, o->extrapolation, &e)) ||
        (s = where(im, m, e, acc, &acc)))
      return s;
  }
  return give(y, acc);
}

static kiln_status r_resize(Importer *im, Call *c) {
  kiln_status s = need_in(im, c, 0);
  if (s) return s;
  Tensor *x = T(im, IN(c, 0));
  int rank = x->rank;
  int64_t inshape[KILN_MAX_RANK];
  memcpy(inshape, x->shape, sizeof inshape);
  bool up = !strcmp(c->name, "Upsample"), old = up || im->opset < 11;
  ResizeOpts o = { im_attr_s(im, "mode", "nearest"), old ? "asymmetric" : im_attr_s(im, "coordinate_transformation_mode", "half_pixel"),
                   old ? "floor" : im_attr_s(im, "nearest_mode", "round_prefer_floor"), im_attr_f(im, "cubic_coeff_a", -0.75f),
                   im_attr_f(im, "extrapolation_value", 0), im_attr_i(im, "exclude_outside", 0) != 0,
                   im_attr_i(im, "antialias", 0) != 0 };
  if (!strcmp(o.mode, "bilinear")) o.mode = "linear";  /* Upsample-7 spelling */
  if (strcmp(o.mode, "nearest") && strcmp(o.mode, "linear") && strcmp(o.mode, "cubic"))
    return im_fail(im, KILN_ERR_MODEL, "mode '%s' is unknown", o.mode);
  if (strcmp(o.mode, "nearest") && !dtype_is_float(x->dtype))
    return im_fail(im, KILN_ERR_UNSUPPORTED, "%s resize of %s", o.mode, kiln_dtype_name(x->dtype));
  /* which axes, at what scale, to what size */
  int axes[KILN_MAX_RANK], na = rank, n;
  const int64_t *av = im_attr_ints(im, "axes", &n);
  if (n >= 0) {
    if (n > rank) return im_fail(im, KILN_ERR_MODEL, "%d axes for rank %d", n, rank);
    na = n;
    for (int i = 0; i < n; i++)
      if ((axes[i] = norm_axis(av[i], rank)) < 0) return bad_axis(im, av[i], rank);
  } else {
    for (int i = 0; i < rank; i++) axes[i] = i;
  }
  double scale[KILN_MAX_RANK], roi[2 * KILN_MAX_RANK];
  int64_t out[KILN_MAX_RANK];
  for (int r = 0; r < rank; r++) scale[r] = 1, out[r] = inshape[r], roi[r] = 0, roi[rank + r] = 1;
  int sin = up ? 1 : old ? 1 : 2, zin = old ? -1 : 3;
  const Tensor *st = IN(c, sin) >= 0 ? T(im, IN(c, sin)) : NULL;
  if (up && !st) {
    const float *fv = im_attr_floats(im, "scales", &n);
    if (n != rank) return im_fail(im, KILN_ERR_MODEL, "scales has %d entries for rank %d", n, rank);
    for (int r = 0; r < rank; r++) scale[r] = fv[r], out[r] = (int64_t)(fv[r] * (double)inshape[r]);
  } else if (st && st->numel > 0) {
    if (st->kind != T_CONST && st->kind != T_PARAM) return im_fail(im, KILN_ERR_UNSUPPORTED, "scales must be constant");
    if (st->numel != na) return im_fail(im, KILN_ERR_MODEL, "scales has %lld entries for %d axes", (long long)st->numel, na);
    for (int i = 0; i < na; i++) {
      double v = dtype_load_f64(st->dtype, st->data, i);
      if (!(v > 0 && v < 1e6)) return im_fail(im, KILN_ERR_MODEL, "scale %g", v);
      scale[axes[i]] = v, out[axes[i]] = (int64_t)(v * (double)inshape[axes[i]]);
    }
  } else if (zin >= 0 && IN(c, zin) >= 0) {
    int64_t *sz;
    if ((s = const_ints(im, IN(c, zin), "sizes", &sz, &n))) return s;
    if (n != na) return im_fail(im, KILN_ERR_MODEL, "sizes has %d entries for %d axes", n, na);
    const char *pol = im_attr_s(im, "keep_aspect_ratio_policy", "stretch");
    double keep = strcmp(pol, "not_larger") ? 0 : INFINITY;
    for (int i = 0; i < na; i++) {
      if (sz[i] < 0) return im_fail(im, KILN_ERR_MODEL, "negative size");
      double f = (double)sz[i] / (double)inshape[axes[i]];
      scale[axes[i]] = f, out[axes[i]] = sz[i];
      keep = !strcmp(pol, "not_larger") ? fmin(keep, f) : fmax(keep, f);
    }
    if (strcmp(pol, "stretch"))
      for (int i = 0; i < na; i++)
        scale[axes[i]] = keep, out[axes[i]] = (int64_t)(keep * (double)inshape[axes[i]] + 0.5);
  } else {
    return im_fail(im, KILN_ERR_MODEL, "neither scales nor sizes given");
  }
  if (!strcmp(o.coord, "tf_crop_and_resize")) {
    const Tensor *rt = IN(c, 1) >= 0 ? T(im, IN(c, 1)) : NULL;
    if (!rt || (rt->kind != T_CONST && rt->kind != T_PARAM) || rt->numel != 2 * na)
      return im_fail(im, KILN_ERR_UNSUPPORTED, "roi must be a constant of %d values", 2 * na);
    for (int i = 0; i < na; i++)
      roi[axes[i]] = dtype_load_f64(rt->dtype, rt->data, i), roi[rank + axes[i]] = dtype_load_f64(rt->dtype, rt->data, na + i);
  }
  int y = IN(c, 0);
  for (int r = rank - 1; r >= 0; r--) {  /* innermost first, as the reference nests */
    if (out[r] == inshape[r] && scale[r] == 1 && strcmp(o.coord, "tf_crop_and_resize")) continue;
    if ((s = resize_axis(im, &o, y, r, out[r], scale[r], roi[r], roi[rank + r], &y))) return s;
  }
  return give(&c->out[0], y);
}

/* ---- control flow, unrolled at import: conditions and trip counts must be constant ---- */

#define MAX_UNROLL 4096  /* iterations of one Loop or Scan */

static kiln_status r_if(Importer *im, Call *c) {
  kiln_status s = need_in(im, c, 0);
  if (s) return s;
  Tensor *cond = T(im, IN(c, 0));
  if (cond->kind != T_CONST || cond->numel != 1)
    return im_fail(im, KILN_ERR_UNSUPPORTED, "the condition '%s' is computed at run time (only constant conditions are unrolled)",
                   cond->name);
  bool take = dtype_load_f64(cond->dtype, cond->data, 0) != 0;
  const Onnx__AttributeProto *a = im_attr(im, take ? "then_branch" : "else_branch");
  return im_subgraph(im, a ? a->g : NULL, 0, NULL, c->n_out, c->out);
}

/* Stacks per-iteration values along a new axis (reversed order when rev). */
static kiln_status stack(Importer *im, int *ids, int n, int64_t axis0, bool rev, int *out) {
  if (n == 0) return im_fail(im, KILN_ERR_UNSUPPORTED, "a scan output of zero iterations has no known shape");
  int rank = T(im, ids[0])->rank + 1, axis = norm_axis(axis0, rank);
  kiln_status s;
  if (axis < 0) return bad_axis(im, axis0, rank);
  for (int i = 0; i < n; i++)
    if ((s = insert_dim(im, ids[i], axis, &ids[i]))) return s;
  if (rev)
    for (int i = 0; i < n / 2; i++) { int t = ids[i]; ids[i] = ids[n - 1 - i], ids[n - 1 - i] = t; }
  if (n == 1) return give(out, ids[0]);
  Attr a = { 0 };
  a.axis = axis;
  return add(im, OP_CONCAT, n, ids, &a, out);
}

static kiln_status r_loop(Importer *im, Call *c) {
  const Onnx__AttributeProto *ba = im_attr(im, "body");
  const Onnx__GraphProto *body = ba ? ba->g : NULL;
  if (!body) return im_fail(im, KILN_ERR_MODEL, "no body");
  int n_carry = c->n_in - 2, n_scan = c->n_out - n_carry;
  if (n_carry < 0 || n_scan < 0 || n_carry + 2 > 64) return im_fail(im, KILN_ERR_MODEL, "%d inputs, %d outputs", c->n_in, c->n_out);
  kiln_status s;
  int64_t trips = MAX_UNROLL + 1;
  double v;
  if (IN(c, 0) >= 0) {
    if ((s = const_f64(im, IN(c, 0), "trip count M", &v))) return s;
    trips = v < 0 ? 0 : v > MAX_UNROLL ? MAX_UNROLL + 1 : (int64_t)v;
  }
  bool cond = true;
  if (IN(c, 1) >= 0) {
    if ((s = const_f64(im, IN(c, 1), "cond", &v))) return s;
    cond = v != 0;
  }
  int carry[64], ins[66], outs[130];
  if (c->n_out > 128) return im_fail(im, KILN_ERR_UNSUPPORTED, "%d outputs", c->n_out);
  int64_t room = trips < MAX_UNROLL ? trips + 1 : MAX_UNROLL + 1;  /* iterations the scan outputs can hold */
  int *scans = n_scan ? arena_alloc(&im->tmp, sizeof(int) * (size_t)n_scan * (size_t)room) : NULL;
  if (n_scan && !scans) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory");
  for (int i = 0; i < n_carry; i++) {
    if ((s = need_in(im, c, 2 + i))) return s;
    carry[i] = IN(c, 2 + i);
  }
  int64_t it = 0;
  for (; it < trips && cond; it++) {
    if (it == MAX_UNROLL) return im_fail(im, KILN_ERR_UNSUPPORTED, "more than %d iterations", MAX_UNROLL);
    uint8_t cb = 1;
    if ((s = im_const_i64(im, 0, NULL, &it, &ins[0])) || (s = im_const(im, KILN_BOOL, 0, NULL, &cb, &ins[1]))) return s;
    memcpy(ins + 2, carry, sizeof(int) * (size_t)n_carry);
    if ((s = im_subgraph(im, body, 2 + n_carry, ins, 1 + n_carry + n_scan, outs))) return s;
    Tensor *co = outs[0] >= 0 ? T(im, outs[0]) : NULL;
    if (!co || co->kind != T_CONST || co->numel != 1)
      return im_fail(im, KILN_ERR_UNSUPPORTED, "the loop condition is computed at run time (only constant ones are unrolled)");
    cond = dtype_load_f64(co->dtype, co->data, 0) != 0;
    memcpy(carry, outs + 1, sizeof(int) * (size_t)n_carry);
    for (int k = 0; k < n_scan; k++) scans[k * room + it] = outs[1 + n_carry + k];
  }
  for (int i = 0; i < n_carry; i++) c->out[i] = carry[i];
  for (int k = 0; k < n_scan; k++)
    if ((s = stack(im, scans + k * room, (int)it, 0, false, &c->out[n_carry + k]))) return s;
  return KILN_OK;
}

static kiln_status r_scan(Importer *im, Call *c) {
  if (im->opset < 9) return im_fail(im, KILN_ERR_UNSUPPORTED, "Scan before opset 9 (batched, with sequence_lens)");
  const Onnx__AttributeProto *ba = im_attr(im, "body");
  const Onnx__GraphProto *body = ba ? ba->g : NULL;
  int m = (int)im_attr_i(im, "num_scan_inputs", 0), n = c->n_in - m, k = c->n_out - n, na;
  if (!body || m <= 0 || n < 0 || k < 0 || c->n_in > 64 || c->n_out > 64)
    return im_fail(im, KILN_ERR_MODEL, "bad body or num_scan_inputs");
  const int64_t *in_ax = im_attr_ints(im, "scan_input_axes", &na), *in_dir, *out_ax, *out_dir;
  if (na >= 0 && na != m) return im_fail(im, KILN_ERR_MODEL, "scan_input_axes has %d entries", na);
  int nd, noa, nod;
  in_dir = im_attr_ints(im, "scan_input_directions", &nd);
  out_ax = im_attr_ints(im, "scan_output_axes", &noa);
  out_dir = im_attr_ints(im, "scan_output_directions", &nod);
  if ((nd >= 0 && nd != m) || (noa >= 0 && noa != k) || (nod >= 0 && nod != k))
    return im_fail(im, KILN_ERR_MODEL, "scan axes/directions lengths differ from the inputs/outputs");
  kiln_status s;
  int state[64], ins[64], outs[64], axis[64];
  int64_t len = -1;
  for (int i = 0; i < c->n_in; i++)
    if ((s = need_in(im, c, i))) return s;
  for (int i = 0; i < n; i++) state[i] = IN(c, i);
  for (int j = 0; j < m; j++) {
    Tensor *x = T(im, IN(c, n + j));
    int64_t a0 = na >= 0 ? in_ax[j] : 0;
    if ((axis[j] = norm_axis(a0, x->rank)) < 0) return bad_axis(im, a0, x->rank);
    if (len >= 0 && x->shape[axis[j]] != len) return im_fail(im, KILN_ERR_MODEL, "scan inputs differ in length");
    len = x->shape[axis[j]];
  }
  if (len > MAX_UNROLL) return im_fail(im, KILN_ERR_UNSUPPORTED, "%lld iterations exceed %d", (long long)len, MAX_UNROLL);
  int *scans = arena_alloc(&im->tmp, sizeof(int) * (size_t)(k + 1) * (size_t)(len + 1));
  if (!scans) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory");
  for (int64_t t = 0; t < len; t++) {
    memcpy(ins, state, sizeof(int) * (size_t)n);
    for (int j = 0; j < m; j++) {  /* slice t of each scan input, its axis dropped */
      int x = IN(c, n + j), r = T(im, x)->rank;
      int64_t at = nd >= 0 && in_dir[j] ? len - 1 - t : t, sh[KILN_MAX_RANK];
      for (int q = 0, w = 0; q < r; q++)
        if (q != axis[j]) sh[w++] = T(im, x)->shape[q];
      if ((s = slice1(im, x, axis[j], at, 1, 1, &x)) || (s = reshape(im, x, r - 1, sh, &ins[n + j]))) return s;
    }
    if ((s = im_subgraph(im, body, n + m, ins, n + k, outs))) return s;
    memcpy(state, outs, sizeof(int) * (size_t)n);
    for (int q = 0; q < k; q++) scans[q * (len + 1) + t] = outs[n + q];
  }
  for (int i = 0; i < n; i++) c->out[i] = state[i];
  for (int q = 0; q < k; q++)
    if ((s = stack(im, scans + q * (len + 1), (int)len, noa >= 0 ? out_ax[q] : 0, nod >= 0 && out_dir[q], &c->out[n + q]))) return s;
  return KILN_OK;
}

/* ---- scatter and gather with constant indices: index maps computed here ---- */

/* data flattened, gathered at constant flat positions src (an output of rank/shape). */
static kiln_status flat_gather(Importer *im, int data, int rank, const int64_t *shape, const int64_t *src, int *out) {
  int64_t n = T(im, data)->numel;
  int flat, ix;
  kiln_status s;
  if ((s = reshape(im, data, 1, &n, &flat)) || (s = im_const_i64(im, rank, shape, src, &ix))) return s;
  Attr a = { 0 };
  return add(im, OP_GATHER, 2, (int[]){ flat, ix }, &a, out);
}

/* data with updates[src[i]] written (or combined by red) at flat position tgt[i], in
 * order: one where() per layer of writers, so duplicates reduce or the last one wins. */
static kiln_status scatter_pairs(Importer *im, int data, int updates, int64_t n, const int64_t *tgt, const int64_t *src,
                                 const char *red, int *out) {
  Tensor *d = T(im, data);
  int64_t D = d->numel, shape[KILN_MAX_RANK];
  int rank = d->rank;
  memcpy(shape, d->shape, sizeof shape);
  OpKind op;
  if (!strcmp(red, "none")) op = OP_COUNT;
  else if (!strcmp(red, "add")) op = OP_ADD;
  else if (!strcmp(red, "mul")) op = OP_MUL;
  else if (!strcmp(red, "max")) op = OP_MAX;
  else if (!strcmp(red, "min")) op = OP_MIN;
  else return im_fail(im, KILN_ERR_MODEL, "reduction '%s' is unknown", red);
  int32_t *seen = arena_alloc(&im->tmp, sizeof(int32_t) * (size_t)(D + 1));
  int64_t *map = arena_alloc(&im->tmp, sizeof(int64_t) * (size_t)(D + 1));
  uint8_t *mask = arena_alloc(&im->tmp, (size_t)(D + 1));
  if (!seen || !map || !mask) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory");
  int layers = 0;
  for (int64_t i = 0; i < n; i++)
    if (++seen[tgt[i]] > layers) layers = seen[tgt[i]];
  if (layers > 64) return im_fail(im, KILN_ERR_UNSUPPORTED, "%d updates to one element", layers);
  int acc = data;
  kiln_status s;
  for (int k = 0; k < layers; k++) {
    memset(seen, 0, sizeof(int32_t) * (size_t)D);
    memset(mask, 0, (size_t)D);
    for (int64_t p = 0; p < D; p++) map[p] = 0;
    for (int64_t i = 0; i < n; i++)  /* the k-th writer of each position */
      if (seen[tgt[i]]++ == k) map[tgt[i]] = src[i], mask[tgt[i]] = 1;
    int g, m, v;
    if ((s = flat_gather(im, updates, rank, shape, map, &g)) || (s = im_const(im, KILN_BOOL, rank, shape, mask, &m))) return s;
    if (op != OP_COUNT && (s = bin(im, op, acc, g, &g))) return s;
    if ((s = where(im, m, g, acc, &v))) return s;
    acc = v;
  }
  return give(out, acc);
}

static kiln_status r_scatter(Importer *im, Call *c) {
  kiln_status s;
  for (int i = 0; i < 3; i++)
    if ((s = need_in(im, c, i))) return s;
  Tensor *d = T(im, IN(c, 0)), *u = T(im, IN(c, 2));
  int64_t *ix;
  int n, rank = d->rank;
  if ((s = const_ints(im, IN(c, 1), "indices", &ix, &n))) return s;
  const char *red = im_attr_s(im, "reduction", "none");
  int64_t D = d->numel, dsh[KILN_MAX_RANK], ush[KILN_MAX_RANK], ish[KILN_MAX_RANK];
  int urank = u->rank, irank = T(im, IN(c, 1))->rank;
  memcpy(dsh, d->shape, sizeof dsh), memcpy(ush, u->shape, sizeof ush), memcpy(ish, T(im, IN(c, 1))->shape, sizeof ish);
  int64_t *tgt = arena_alloc(&im->tmp, sizeof(int64_t) * (size_t)(u->numel + 1) * 1),
          *src = arena_alloc(&im->tmp, sizeof(int64_t) * (size_t)(u->numel + 1));
  if (!tgt || !src) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory");
  int64_t np = 0, idx[KILN_MAX_RANK];
  if (!strcmp(c->name, "ScatterND")) {
    int64_t k = irank ? ish[irank - 1] : 0, inner = 1, tuples = 1;
    if (irank < 1 || k > rank || k < 1) return im_fail(im, KILN_ERR_MODEL, "indices' last dim %lld for data rank %d", (long long)k, rank);
    for (int r = (int)k; r < rank; r++) inner *= dsh[r];
    for (int r = 0; r < irank - 1; r++) tuples *= ish[r];
    if (tuples * inner != u->numel) return im_fail(im, KILN_ERR_MODEL, "updates have %lld elements, expected %lld",
                                                   (long long)u->numel, (long long)(tuples * inner));
    for (int64_t t = 0; t < tuples; t++) {
      int64_t base = 0;
      for (int r = 0; r < k; r++) {
        int64_t v = ix[t * k + r];
        if (v < 0) v += dsh[r];
        if (v < 0 || v >= dsh[r]) return im_fail(im, KILN_ERR_MODEL, "index %lld out of range", (long long)ix[t * k + r]);
        base = base * dsh[r] + v;
      }
      for (int64_t e = 0; e < inner; e++) tgt[np] = base * inner + e, src[np] = t * inner + e, np++;
    }
  } else {  /* ScatterElements, Scatter */
    int64_t axis0 = im_attr_i(im, "axis", 0);
    int axis = norm_axis(axis0, rank);
    if (axis < 0) return bad_axis(im, axis0, rank);
    if (irank != rank || urank != rank || n != u->numel) return im_fail(im, KILN_ERR_MODEL, "indices and updates must match in shape");
    for (int64_t q = 0; q < n; q++) {
      int64_t rem = q, pos = 0;
      for (int r = rank - 1; r >= 0; r--) idx[r] = rem % ush[r], rem /= ush[r];
      int64_t v = ix[q] < 0 ? ix[q] + dsh[axis] : ix[q];
      if (v < 0 || v >= dsh[axis]) return im_fail(im, KILN_ERR_MODEL, "index %lld out of range", (long long)ix[q]);
      idx[axis] = v;
      for (int r = 0; r < rank; r++) {
        if (idx[r] >= dsh[r]) return im_fail(im, KILN_ERR_MODEL, "updates exceed data");
        pos = pos * dsh[r] + idx[r];
      }
      tgt[np] = pos, src[np] = q, np++;
    }
  }
  (void)D;
  return scatter_pairs(im, IN(c, 0), IN(c, 2), np, tgt, src, red, &c->out[0]);
}

static kiln_status r_gather_nd(Importer *im, Call *c) {
  kiln_status s;
  if ((s = need_in(im, c, 0)) || (s = need_in(im, c, 1))) return s;
  Tensor *d = T(im, IN(c, 0)), *it = T(im, IN(c, 1));
  int64_t *ix, dsh[KILN_MAX_RANK], ish[KILN_MAX_RANK], osh[KILN_MAX_RANK];
  int n, rank = d->rank, irank = it->rank, b = (int)im_attr_i(im, "batch_dims", 0);
  memcpy(dsh, d->shape, sizeof dsh), memcpy(ish, it->shape, sizeof ish);
  if ((s = const_ints(im, IN(c, 1), "indices", &ix, &n))) return s;
  int64_t k = irank ? ish[irank - 1] : 0;
  if (irank < 1 || b < 0 || b >= irank || k < 1 || b + k > rank) return im_fail(im, KILN_ERR_MODEL, "indices do not fit the data");
  int orank = 0;
  int64_t tuples = 1, inner = 1, batch_inner = 1;
  for (int r = 0; r < irank - 1; r++) osh[orank++] = ish[r], tuples *= ish[r];
  for (int r = b + (int)k; r < rank; r++) osh[orank++] = dsh[r], inner *= dsh[r];
  for (int r = b; r < irank - 1; r++) batch_inner *= ish[r];  /* tuples per batch entry */
  if (orank > KILN_MAX_RANK) return im_fail(im, KILN_ERR_UNSUPPORTED, "output rank too large");
  int64_t *src = arena_alloc(&im->tmp, sizeof(int64_t) * (size_t)(tuples * inner + 1));
  if (!src) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory");
  int64_t per_batch = 1;
  for (int r = b; r < rank; r++) per_batch *= dsh[r];
  for (int64_t t = 0; t < tuples; t++) {
    int64_t bi = batch_inner ? t / batch_inner : 0, base = 0;
    for (int r = 0; r < k; r++) {
      int64_t v = ix[t * k + r], dim = dsh[b + r];
      if (v < 0) v += dim;
      if (v < 0 || v >= dim) return im_fail(im, KILN_ERR_MODEL, "index %lld out of range", (long long)ix[t * k + r]);
      base = base * dim + v;
    }
    for (int64_t e = 0; e < inner; e++) src[t * inner + e] = bi * per_batch + base * inner + e;
  }
  return flat_gather(im, IN(c, 0), orank, osh, src, &c->out[0]);
}

static kiln_status r_compress(Importer *im, Call *c) {
  kiln_status s;
  if ((s = need_in(im, c, 0)) || (s = need_in(im, c, 1))) return s;
  int64_t *cond;
  int n, x = IN(c, 0);
  if ((s = const_ints(im, IN(c, 1), "condition", &cond, &n))) return s;
  const Onnx__AttributeProto *aa = im_attr(im, "axis");
  int axis = 0;
  if (aa && aa->has_i) {
    if ((axis = norm_axis(aa->i, T(im, x)->rank)) < 0) return bad_axis(im, aa->i, T(im, x)->rank);
  } else {
    int64_t all = T(im, x)->numel;
    if ((s = reshape(im, x, 1, &all, &x))) return s;
  }
  int64_t dim = T(im, x)->shape[axis], k = 0;
  if (n > dim) return im_fail(im, KILN_ERR_MODEL, "condition longer than the axis");
  int64_t *sel = arena_alloc(&im->tmp, sizeof(int64_t) * (size_t)(n + 1));
  if (!sel) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory");
  for (int i = 0; i < n; i++)
    if (cond[i]) sel[k++] = i;
  if (k == 0) return im_fail(im, KILN_ERR_UNSUPPORTED, "nothing selected (an empty result)");
  int ix;
  Attr a = { 0 };
  a.axis = axis;
  if ((s = im_const_i64(im, 1, &k, sel, &ix))) return s;
  return add(im, OP_GATHER, 2, (int[]){ x, ix }, &a, &c->out[0]);
}

/* ---- generated constants ---- */

static kiln_status r_window(Importer *im, Call *c) {
  kiln_status s = need_in(im, c, 0);
  if (s) return s;
  double size;
  kiln_dtype t;
  if ((s = const_f64(im, IN(c, 0), "size", &size)) ||
      (s = onnx_elem_type((int32_t)im_attr_i(im, "output_datatype", 1), "output_datatype", &t)))
    return s;
  if (!(size >= 0 && size <= (1 << 20))) return im_fail(im, KILN_ERR_MODEL, "size %g", size);
  int64_t n = (int64_t)size;
  double N = im_attr_i(im, "periodic", 1) ? (double)n : (double)n - 1, a0, a1, a2 = 0;
  if (!strcmp(c->name, "HannWindow")) a0 = 0.5, a1 = 0.5;
  else if (!strcmp(c->name, "HammingWindow")) a0 = 25.0 / 46, a1 = 21.0 / 46;
  else a0 = 0.42, a1 = 0.5, a2 = 0.08;
  void *v = arena_alloc(&im->tmp, (size_t)n * kiln_dtype_size(t) + 1);
  if (!v) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory");
  for (int64_t i = 0; i < n; i++) {
    double x = 2 * M_PI * (double)i / N;
    dtype_store_f64(t, v, i, a0 - a1 * cos(x) + a2 * cos(2 * x));
  }
  return im_const(im, t, 1, &n, v, &c->out[0]);
}

/* AffineGrid: the normalised base grid (x, y[, z], 1) times theta transposed. */
static kiln_status r_affine_grid(Importer *im, Call *c) {
  kiln_status s;
  if ((s = need_in(im, c, 0)) || (s = need_in(im, c, 1))) return s;
  int64_t *sz;
  int n;
  if ((s = const_ints(im, IN(c, 1), "size", &sz, &n))) return s;
  if (n != 4 && n != 5) return im_fail(im, KILN_ERR_MODEL, "size has %d entries", n);
  int sp = n - 2;  /* spatial dims: H, W or D, H, W */
  bool align = im_attr_i(im, "align_corners", 0) != 0;
  int64_t cnt = 1;
  for (int i = 2; i < n; i++) {
    if (sz[i] <= 0 || sz[i] > 4096) return im_fail(im, KILN_ERR_UNSUPPORTED, "grid size %lld", (long long)sz[i]);
    cnt *= sz[i];
  }
  if (cnt > (1 << 22)) return im_fail(im, KILN_ERR_UNSUPPORTED, "grid too large");
  kiln_dtype t = T(im, IN(c, 0))->dtype;
  void *base = arena_alloc(&im->tmp, (size_t)(cnt * (sp + 1)) * kiln_dtype_size(t) + 1);
  if (!base) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory");
  for (int64_t p = 0; p < cnt; p++) {
    int64_t rem = p;
    for (int d = sp - 1; d >= 0; d--) {  /* d: spatial dim from the last (x) to the first */
      int64_t L = sz[2 + d], i = rem % L;
      rem /= L;
      double v = align ? (L > 1 ? -1 + 2.0 * (double)i / (double)(L - 1) : -1) : (2.0 * (double)i + 1) / (double)L - 1;
      dtype_store_f64(t, base, p * (sp + 1) + (sp - 1 - d), v);  /* x first */
    }
    dtype_store_f64(t, base, p * (sp + 1) + sp, 1);
  }
  int64_t bsh[3] = { 1, cnt, sp + 1 }, osh[KILN_MAX_RANK];
  int b, th, g, perm[3] = { 0, 2, 1 };
  osh[0] = sz[0];
  for (int i = 0; i < sp; i++) osh[1 + i] = sz[2 + i];
  osh[1 + sp] = sp;
  if ((s = im_const(im, t, 3, bsh, base, &b)) || (s = transpose(im, IN(c, 0), perm, &th)) || (s = bin(im, OP_MATMUL, b, th, &g)))
    return s;
  return reshape(im, g, sp + 2, osh, &c->out[0]);
}

/* ---- GridSample: data-dependent taps as gathers with computed indices ---- */

#define TRY(e) do { if ((s = (e))) return s; } while (0)

/* Reflects x into [lo, hi] off the nearer border, as many times as it takes. */
static kiln_status reflect_f(Importer *im, int x, double lo, double hi, int *out) {
  kiln_status s;
  double rng = hi - lo;
  if (rng <= 0) {  /* a one-pixel axis with corners aligned: everything maps to lo */
    int z;
    TRY(binc(im, OP_MUL, x, 0, &z));
    return binc(im, OP_ADD, z, lo, out);
  }
  int below, above, dx, n, r, even, a, b, lowside, highside, t;
  TRY(binc(im, OP_LT, x, lo, &below)); TRY(binc(im, OP_GT, x, hi, &above));
  /* dx: distance past the border crossed */
  TRY(cbin(im, OP_SUB, lo, x, &a)); TRY(binc(im, OP_SUB, x, hi, &b)); TRY(where(im, below, a, b, &dx));
  TRY(binc(im, OP_DIV, dx, rng, &n)); TRY(un(im, OP_FLOOR, n, &n));
  TRY(binc(im, OP_MUL, n, rng, &r)); TRY(bin(im, OP_SUB, dx, r, &r));
  TRY(binc(im, OP_FMOD, n, 2, &even)); TRY(binc(im, OP_EQ, even, 0, &even));
  TRY(cbin(im, OP_ADD, lo, r, &lowside)); TRY(cbin(im, OP_SUB, hi, r, &highside));
  TRY(where(im, even, lowside, highside, &a));   /* below: even -> lo + r, odd -> hi - r */
  TRY(where(im, even, highside, lowside, &b));   /* above: even -> hi - r, odd -> lo + r */
  TRY(where(im, above, b, x, &t));
  return where(im, below, a, t, out);
}

/* Truncation toward zero. */
static kiln_status trunc_f(Importer *im, int x, int *out) {
  kiln_status s;
  int neg, f, c;
  TRY(binc(im, OP_LT, x, 0, &neg)); TRY(un(im, OP_FLOOR, x, &f)); TRY(un(im, OP_CEIL, x, &c));
  return where(im, neg, c, f, out);
}

typedef struct GsTap { int idx, w; } GsTap;  /* i64 index along one dim, float weight (or -1: 1) */

static kiln_status r_grid_sample(Importer *im, Call *c) {
  kiln_status s;
  TRY(need_in(im, c, 0)); TRY(need_in(im, c, 1));
  Tensor *xt = T(im, IN(c, 0)), *gt = T(im, IN(c, 1));
  int rank = xt->rank, S = rank - 2;
  if (S < 1 || S > 3 || gt->rank != rank || gt->shape[rank - 1] != S)
    return im_fail(im, KILN_ERR_MODEL, "X rank %d and grid rank %d do not fit", rank, gt->rank);
  int64_t xs[KILN_MAX_RANK], gs[KILN_MAX_RANK], N = xt->shape[0], C = xt->shape[1], vol = 1;
  memcpy(xs, xt->shape, sizeof xs), memcpy(gs, gt->shape, sizeof gs);
  kiln_dtype dt = xt->dtype, ct = gt->dtype == KILN_F64 ? KILN_F64 : KILN_F32;
  if (!dtype_is_float(dt) || !dtype_is_float(gt->dtype)) return im_fail(im, KILN_ERR_MODEL, "X and grid must be float");
  for (int i = 0; i < S; i++)
    if (xs[2 + i] < 1 || !size_mul(vol, xs[2 + i], &vol)) return im_fail(im, KILN_ERR_UNSUPPORTED, "empty or oversized input");
  int64_t nvol;
  if (!size_mul(N, vol, &nvol) || N > (1 << 20)) return im_fail(im, KILN_ERR_UNSUPPORTED, "input too large");
  const char *mode = im_attr_s(im, "mode", "linear"), *pad = im_attr_s(im, "padding_mode", "zeros");
  if (!strcmp(mode, "bilinear")) mode = "linear";
  if (!strcmp(mode, "bicubic")) mode = "cubic";
  bool align = im_attr_i(im, "align_corners", 0) != 0, zeros = !strcmp(pad, "zeros"), border = !strcmp(pad, "border");
  bool nearest = !strcmp(mode, "nearest"), cubic = !strcmp(mode, "cubic");
  if (!nearest && !cubic && strcmp(mode, "linear")) return im_fail(im, KILN_ERR_MODEL, "mode '%s' is unknown", mode);
  if (!zeros && !border && strcmp(pad, "reflection")) return im_fail(im, KILN_ERR_MODEL, "padding_mode '%s' is unknown", pad);
  int nt = nearest ? 1 : cubic ? 4 : 2;
  GsTap taps[3][4];
  int valid_all = -1, osh_rank = rank - 1;
  int64_t osh[KILN_MAX_RANK];  /* [N, O...] */
  for (int r = 0; r < osh_rank; r++) osh[r] = gs[r];
  int grid;
  TRY(cast(im, IN(c, 1), ct, &grid));
  for (int i = 0; i < S; i++) {
    double L = (double)xs[2 + i], lo = align ? 0 : -0.5, hi = align ? L - 1 : L - 0.5;
    int g, x, oob, cl;
    TRY(slice1(im, grid, rank - 1, S - 1 - i, 1, 1, &g)); TRY(reshape(im, g, osh_rank, osh, &g));
    /* denormalise */
    TRY(binc(im, OP_ADD, g, 1, &x));
    if (align) { TRY(binc(im, OP_MUL, x, (L - 1) / 2, &x)); }
    else { TRY(binc(im, OP_MUL, x, L, &x)); TRY(binc(im, OP_SUB, x, 1, &x)); TRY(binc(im, OP_MUL, x, 0.5, &x)); }
    if (nearest) TRY(un(im, OP_ROUND, x, &x));  /* half to even (the test data's rule, 2-D and 3-D) */
    if (!zeros) {  /* coordinates outside the borders move in */
      int a, b;
      TRY(binc(im, OP_LT, x, lo, &a)); TRY(binc(im, OP_GT, x, hi, &b)); TRY(bin(im, OP_OR, a, b, &oob));
      if (border) { TRY(binc(im, OP_MAX, x, 0, &cl)); TRY(binc(im, OP_MIN, cl, L - 1, &cl)); }
      else TRY(reflect_f(im, x, lo, hi, &cl));
      TRY(where(im, oob, cl, x, &x));
    }
    int x0, fr;
    if (nearest) { TRY(trunc_f(im, x, &x0)); fr = -1; }
    else { TRY(un(im, OP_FLOOR, x, &x0)); TRY(bin(im, OP_SUB, x, x0, &fr)); }
    for (int k = 0; k < nt; k++) {
      int ti, w = -1, ok;
      TRY(binc(im, OP_ADD, x0, nearest ? 0 : cubic ? k - 1 : k, &ti));
      if (!nearest) {  /* tap weight from the fraction */
        double A = -0.75;
        if (!cubic) {
          if (k == 0) TRY(cbin(im, OP_SUB, 1, fr, &w));
          else w = fr;
        } else {
          int d, d2, d3;  /* distance of tap k from the point: |k - 1 - fr| */
          TRY(binc(im, OP_SUB, fr, (double)(k - 1), &d)); TRY(un(im, OP_ABS, d, &d));
          TRY(bin(im, OP_MUL, d, d, &d2)); TRY(bin(im, OP_MUL, d2, d, &d3));
          int p1, p2, p3, q;
          if (k == 1 || k == 2) {  /* (A+2)|d|^3 - (A+3)|d|^2 + 1 */
            TRY(binc(im, OP_MUL, d3, A + 2, &p1)); TRY(binc(im, OP_MUL, d2, A + 3, &p2)); TRY(bin(im, OP_SUB, p1, p2, &q));
            TRY(binc(im, OP_ADD, q, 1, &w));
          } else {  /* A|d|^3 - 5A|d|^2 + 8A|d| - 4A */
            TRY(binc(im, OP_MUL, d3, A, &p1)); TRY(binc(im, OP_MUL, d2, 5 * A, &p2)); TRY(bin(im, OP_SUB, p1, p2, &q));
            TRY(binc(im, OP_MUL, d, 8 * A, &p3)); TRY(bin(im, OP_ADD, q, p3, &q)); TRY(binc(im, OP_SUB, q, 4 * A, &w));
          }
        }
      }
      /* the tap's pixel under the padding mode */
      if (zeros) {
        int a, b, z;
        TRY(binc(im, OP_GE, ti, 0, &a)); TRY(binc(im, OP_LE, ti, L - 1, &b)); TRY(bin(im, OP_AND, a, b, &ok));
        if (w < 0) TRY(scalar(im, ct, 1, &w));
        TRY(scalar(im, ct, 0, &z)); TRY(where(im, ok, w, z, &w));
      } else if (!border) {
        TRY(reflect_f(im, ti, lo, hi, &ti)); TRY(trunc_f(im, ti, &ti));
      }
      TRY(binc(im, OP_MAX, ti, 0, &ti)); TRY(binc(im, OP_MIN, ti, L - 1, &ti));  /* border, and safe gathers */
      TRY(cast(im, ti, KILN_I64, &ti));
      taps[i][k] = (GsTap){ ti, w };
    }
  }
  (void)valid_all;
  /* X as [C, N * vol]; each combination of taps is one gather at n * vol + sum idx_i * stride_i */
  int xr, perm[KILN_MAX_RANK], acc = -1, boff;
  for (int r = 0; r < rank; r++) perm[r] = r;
  perm[0] = 1, perm[1] = 0;
  int64_t flat[2] = { C, N * vol }, bsh[KILN_MAX_RANK], *bv = arena_alloc(&im->tmp, sizeof(int64_t) * (size_t)(N + 1));
  if (!bv) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory");
  for (int64_t n = 0; n < N; n++) bv[n] = n * vol;
  for (int r = 0; r < osh_rank; r++) bsh[r] = r == 0 ? N : 1;
  TRY(transpose(im, IN(c, 0), perm, &xr)); TRY(reshape(im, xr, 2, flat, &xr)); TRY(im_const_i64(im, osh_rank, bsh, bv, &boff));
  int combos = 1;
  for (int i = 0; i < S; i++) combos *= nt;
  for (int cb = 0; cb < combos; cb++) {
    int idx = boff, w = -1, rem = cb;
    int64_t stride = vol;
    for (int i = 0; i < S; i++) {
      int k = rem % nt, t;
      rem /= nt;
      stride /= xs[2 + i];
      TRY(binc(im, OP_MUL, taps[i][k].idx, (double)stride, &t)); TRY(bin(im, OP_ADD, idx, t, &idx));
      if (taps[i][k].w >= 0) {
        if (w < 0) w = taps[i][k].w;
        else TRY(bin(im, OP_MUL, w, taps[i][k].w, &w));
      }
    }
    int gth;
    Attr ga = { 0 };
    ga.axis = 1;
    TRY(add(im, OP_GATHER, 2, (int[]){ xr, idx }, &ga, &gth));  /* [C, N, O...] */
    if (w >= 0) { TRY(cast(im, w, dt, &w)); TRY(bin(im, OP_MUL, gth, w, &gth)); }
    if (acc < 0) acc = gth;
    else TRY(bin(im, OP_ADD, acc, gth, &acc));
  }
  return transpose(im, acc, perm, &c->out[0]);
}
#undef TRY

/* ---- transforms and windows over constant geometry ---- */

#define TRY(e) do { if ((s = (e))) return s; } while (0)

/* Moves axis a of a rank-r tensor to the end (or back, with back set). */
static kiln_status axis_to_end(Importer *im, int x, int a, bool back, int *out) {
  int r = T(im, x)->rank, perm[KILN_MAX_RANK], k = 0;
  if (!back) {
    for (int i = 0; i < r; i++)
      if (i != a) perm[k++] = i;
    perm[r - 1] = a;
  } else {
    for (int i = 0; i < r; i++) perm[i] = i < a ? i : i == a ? r - 1 : i - 1;
  }
  return transpose(im, x, perm, out);
}

/* Real output of an inverse DFT from bins 0..n-1 of a Hermitian spectrum:
 * x[j] = (1/L) sum_k w_k (re_k cos - im_k sin)(2 pi j k / L), w_k = 2 except at 0 and L/2. */
static kiln_status irfft(Importer *im, Call *c, int axis, int64_t n, int64_t L) {
  kiln_status s;
  Tensor *x = T(im, IN(c, 0));
  int rank = x->rank, comp = (int)x->shape[rank - 1];
  kiln_dtype dt = x->dtype;
  int64_t sh[KILN_MAX_RANK];
  memcpy(sh, x->shape, sizeof sh);
  if (L < 1 || L > 4096) return im_fail(im, KILN_ERR_UNSUPPORTED, "dft_length %lld", (long long)L);
  void *cm = arena_alloc(&im->tmp, (size_t)(n * L) * kiln_dtype_size(dt) + 1), *sm = arena_alloc(&im->tmp, (size_t)(n * L) * kiln_dtype_size(dt) + 1);
  if (!cm || !sm) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory");
  for (int64_t k = 0; k < n; k++)
    for (int64_t j = 0; j < L; j++) {
      double w = k > L / 2 ? 0 : (k == 0 || 2 * k == L) ? 1 : 2, th = 2 * M_PI * (double)((j * k) % L) / (double)L;
      dtype_store_f64(dt, cm, k * L + j, w * cos(th) / (double)L);
      dtype_store_f64(dt, sm, k * L + j, -w * sin(th) / (double)L);
    }
  int64_t msh[2] = { n, L };
  int part, C, Sn, y, t;
  TRY(slice1(im, IN(c, 0), rank - 1, 0, 1, 1, &part)); TRY(reshape(im, part, rank - 1, sh, &part));
  TRY(axis_to_end(im, part, axis, false, &part));
  TRY(im_const(im, dt, 2, msh, cm, &C)); TRY(bin(im, OP_MATMUL, part, C, &y));
  if (comp == 2) {
    TRY(slice1(im, IN(c, 0), rank - 1, 1, 1, 1, &part)); TRY(reshape(im, part, rank - 1, sh, &part));
    TRY(axis_to_end(im, part, axis, false, &part));
    TRY(im_const(im, dt, 2, msh, sm, &Sn)); TRY(bin(im, OP_MATMUL, part, Sn, &t)); TRY(bin(im, OP_ADD, y, t, &y));
  }
  TRY(axis_to_end(im, y, axis, true, &y));
  return insert_dim(im, y, rank - 1, &c->out[0]);
}

/* DFT as two matmuls with constant cos and sin matrices along the signal axis. */
static kiln_status r_dft(Importer *im, Call *c) {
  kiln_status s;
  TRY(need_in(im, c, 0));
  Tensor *x = T(im, IN(c, 0));
  int rank = x->rank;
  int64_t comp = rank ? x->shape[rank - 1] : 0, a0 = im->opset >= 20 ? -2 : im_attr_i(im, "axis", 1), *v;
  int n;
  if (rank < 2 || (comp != 1 && comp != 2) || !dtype_is_float(x->dtype))
    return im_fail(im, KILN_ERR_MODEL, "input must be float [..., 1 or 2]");
  if (im->opset >= 20 && IN(c, 2) >= 0) {
    TRY(const_ints(im, IN(c, 2), "axis", &v, &n));
    if (n != 1) return im_fail(im, KILN_ERR_MODEL, "axis must hold one element");
    a0 = v[0];
  }
  int axis = norm_axis(a0, rank);
  if (axis < 0 || axis == rank - 1) return bad_axis(im, a0, rank - 1);
  int64_t len = x->shape[axis], L = len, sh[KILN_MAX_RANK];
  if (IN(c, 1) >= 0) {
    TRY(const_ints(im, IN(c, 1), "dft_length", &v, &n));
    if (n != 1 || v[0] < 1) return im_fail(im, KILN_ERR_MODEL, "dft_length must be one positive value");
    L = v[0];
  }
  bool inv = im_attr_i(im, "inverse", 0) != 0, one = im_attr_i(im, "onesided", 0) != 0;
  if (inv && one) {  /* the inverse of a one-sided spectrum: a real signal of dft_length */
    if (IN(c, 1) < 0) L = 2 * (len - 1);
    return irfft(im, c, axis, len, L);
  }
  int64_t K = one ? L / 2 + 1 : L;
  if (L > 4096) return im_fail(im, KILN_ERR_UNSUPPORTED, "dft_length %lld", (long long)L);
  kiln_dtype dt = x->dtype;
  memcpy(sh, x->shape, sizeof sh);
  int part[2] = { -1, -1 };
  for (int k = 0; k < comp; k++) {  /* real and imaginary parts, each [..., len, ...] */
    TRY(slice1(im, IN(c, 0), rank - 1, k, 1, 1, &part[k]));
    TRY(reshape(im, part[k], rank - 1, sh, &part[k]));
    if (L < len) TRY(slice1(im, part[k], axis, 0, L, 1, &part[k]));
    if (L > len) {
      Attr pa = { 0 };
      pa.pads[(rank - 1) + axis] = L - len;
      TRY(add(im, OP_PAD, 1, &part[k], &pa, &part[k]));
    }
    TRY(axis_to_end(im, part[k], axis, false, &part[k]));
  }
  void *cm = arena_alloc(&im->tmp, (size_t)(L * K) * kiln_dtype_size(dt) + 1), *sm = arena_alloc(&im->tmp, (size_t)(L * K) * kiln_dtype_size(dt) + 1);
  if (!cm || !sm) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory");
  for (int64_t j = 0; j < L; j++)
    for (int64_t k = 0; k < K; k++) {
      double th = 2 * M_PI * (double)((j * k) % L) / (double)L, sc = inv ? 1.0 / (double)L : 1;
      dtype_store_f64(dt, cm, j * K + k, cos(th) * sc);
      dtype_store_f64(dt, sm, j * K + k, (inv ? sin(th) : -sin(th)) * sc);
    }
  int64_t msh[2] = { L, K };
  int C, Sn, re, im_, t;
  TRY(im_const(im, dt, 2, msh, cm, &C)); TRY(im_const(im, dt, 2, msh, sm, &Sn));
  /* (re + i im)(cos + i sin'), sin' = -sin forward and +sin inverse */
  TRY(bin(im, OP_MATMUL, part[0], C, &re)); TRY(bin(im, OP_MATMUL, part[0], Sn, &im_));
  if (part[1] >= 0) {
    TRY(bin(im, OP_MATMUL, part[1], Sn, &t)); TRY(bin(im, OP_SUB, re, t, &re));
    TRY(bin(im, OP_MATMUL, part[1], C, &t)); TRY(bin(im, OP_ADD, im_, t, &im_));
  }
  TRY(axis_to_end(im, re, axis, true, &re)); TRY(axis_to_end(im, im_, axis, true, &im_));
  TRY(insert_dim(im, re, rank - 1, &re)); TRY(insert_dim(im, im_, rank - 1, &im_));
  Attr a = { 0 };
  a.axis = rank - 1;
  return add(im, OP_CONCAT, 2, (int[]){ re, im_ }, &a, &c->out[0]);
}

/* Col2Im: each column entry added at its image position (a constant map, scatter-add). */
static kiln_status r_col2im(Importer *im, Call *c) {
  kiln_status s;
  TRY(need_in(im, c, 0)); TRY(need_in(im, c, 1)); TRY(need_in(im, c, 2));
  int64_t *img, *blk, xs[3];
  int ni, nb, n;
  TRY(const_ints(im, IN(c, 1), "image_shape", &img, &ni)); TRY(const_ints(im, IN(c, 2), "block_shape", &blk, &nb));
  Tensor *x = T(im, IN(c, 0));
  if (x->rank != 3 || ni != nb || ni < 1 || ni > 3) return im_fail(im, KILN_ERR_MODEL, "input [N, C*K, L] and matching shapes expected");
  memcpy(xs, x->shape, sizeof xs);
  int sp = ni;
  int64_t st[3], dl[3], pb[3], pe[3], K = 1, HW = 1, nbk[3], Lb = 1;
  const int64_t *v;
  for (int i = 0; i < sp; i++) st[i] = dl[i] = 1, pb[i] = pe[i] = 0;
  if ((v = im_attr_ints(im, "strides", &n)) && n == sp) for (int i = 0; i < sp; i++) st[i] = v[i];
  if ((v = im_attr_ints(im, "dilations", &n)) && n == sp) for (int i = 0; i < sp; i++) dl[i] = v[i];
  if ((v = im_attr_ints(im, "pads", &n)) && n == 2 * sp) for (int i = 0; i < sp; i++) pb[i] = v[i], pe[i] = v[sp + i];
  for (int i = 0; i < sp; i++) {
    if (blk[i] < 1 || img[i] < 1 || st[i] < 1 || dl[i] < 1 || img[i] > 4096 || blk[i] > 64)
      return im_fail(im, KILN_ERR_MODEL, "bad geometry");
    K *= blk[i], HW *= img[i];
    nbk[i] = (img[i] + pb[i] + pe[i] - (dl[i] * (blk[i] - 1) + 1)) / st[i] + 1;
    if (nbk[i] < 1) return im_fail(im, KILN_ERR_MODEL, "no blocks fit");
    Lb *= nbk[i];
  }
  if (xs[1] % K || xs[2] != Lb) return im_fail(im, KILN_ERR_MODEL, "input does not match the block geometry");
  int64_t N = xs[0], C = xs[1] / K, total = x->numel, np = 0, osh[5];
  if (total > (1 << 22)) return im_fail(im, KILN_ERR_UNSUPPORTED, "too large");
  int64_t *tgt = arena_alloc(&im->tmp, sizeof(int64_t) * (size_t)(total + 1)), *src = arena_alloc(&im->tmp, sizeof(int64_t) * (size_t)(total + 1));
  if (!tgt || !src) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory");
  for (int64_t e = 0; e < total; e++) {
    int64_t l = e % Lb, ck = (e / Lb) % (C * K), b = e / (Lb * C * K), ch = ck / K, k = ck % K, pos = 0;
    bool ok = true;
    int64_t kr = k, lrem = l, coord[3];
    for (int i = sp - 1; i >= 0; i--) {
      int64_t ki = kr % blk[i], li = lrem % nbk[i];
      kr /= blk[i], lrem /= nbk[i];
      coord[i] = li * st[i] - pb[i] + ki * dl[i];
      if (coord[i] < 0 || coord[i] >= img[i]) ok = false;
    }
    if (!ok) continue;
    for (int i = 0; i < sp; i++) pos = pos * img[i] + coord[i];
    tgt[np] = (b * C + ch) * HW + pos, src[np] = e, np++;
  }
  osh[0] = N, osh[1] = C;
  for (int i = 0; i < sp; i++) osh[2 + i] = img[i];
  int zero;
  TRY(filled(im, x->dtype, 0, 2 + sp, osh, &zero));
  return scatter_pairs(im, zero, IN(c, 0), np, tgt, src, "add", &c->out[0]);
}

/* LRN: x / (bias + alpha/size * sum of squares over neighbouring channels)^beta. */
static kiln_status r_lrn(Importer *im, Call *c) {
  kiln_status s;
  TRY(need_in(im, c, 0));
  int x = IN(c, 0), rank = T(im, x)->rank, sq, acc = -1, t;
  int64_t size = im_attr_i(im, "size", 0), C = rank >= 2 ? T(im, x)->shape[1] : 0;
  if (rank < 2 || size < 1 || size > 1024) return im_fail(im, KILN_ERR_MODEL, "needs rank >= 2 and size >= 1");
  double alpha = im_attr_f(im, "alpha", 1e-4f), beta = im_attr_f(im, "beta", 0.75f), bias = im_attr_f(im, "bias", 1);
  Attr pa = { 0 };
  pa.pads[1] = (size - 1) / 2, pa.pads[rank + 1] = size - 1 - (size - 1) / 2;
  TRY(bin(im, OP_MUL, x, x, &sq)); TRY(add(im, OP_PAD, 1, &sq, &pa, &sq));
  for (int64_t k = 0; k < size; k++) {
    TRY(slice1(im, sq, 1, k, C, 1, &t));
    if (acc < 0) acc = t;
    else TRY(bin(im, OP_ADD, acc, t, &acc));
  }
  TRY(binc(im, OP_MUL, acc, alpha / (double)size, &acc)); TRY(binc(im, OP_ADD, acc, bias, &acc)); TRY(binc(im, OP_POW, acc, beta, &acc));
  return bin(im, OP_DIV, x, acc, &c->out[0]);
}

static kiln_status r_reverse_sequence(Importer *im, Call *c) {
  kiln_status s;
  TRY(need_in(im, c, 0)); TRY(need_in(im, c, 1));
  Tensor *x = T(im, IN(c, 0));
  int64_t *lens, sh[KILN_MAX_RANK];
  int n, rank = x->rank, ba = (int)im_attr_i(im, "batch_axis", 1), ta = (int)im_attr_i(im, "time_axis", 0);
  TRY(const_ints(im, IN(c, 1), "sequence_lens", &lens, &n));
  if (rank < 2 || (ba != 0 && ba != 1) || (ta != 0 && ta != 1) || ba == ta || n != x->shape[ba])
    return im_fail(im, KILN_ERR_MODEL, "batch/time axes or sequence_lens do not fit");
  memcpy(sh, x->shape, sizeof sh);
  int64_t total = x->numel, idx[KILN_MAX_RANK];
  int64_t *src = arena_alloc(&im->tmp, sizeof(int64_t) * (size_t)(total + 1));
  if (!src) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory");
  for (int64_t e = 0; e < total; e++) {
    int64_t rem = e, p = 0;
    for (int r = rank - 1; r >= 0; r--) idx[r] = rem % sh[r], rem /= sh[r];
    int64_t L = lens[idx[ba]];
    if (L < 0 || L > sh[ta]) return im_fail(im, KILN_ERR_MODEL, "sequence length %lld", (long long)L);
    if (idx[ta] < L) idx[ta] = L - 1 - idx[ta];
    for (int r = 0; r < rank; r++) p = p * sh[r] + idx[r];
    src[e] = p;
  }
  return flat_gather(im, IN(c, 0), rank, sh, src, &c->out[0]);
}

/* Einsum: every operand laid over one index space (diagonals taken first), multiplied
 * with broadcasting, summed over the letters the output drops, transposed to it. */
static kiln_status r_einsum(Importer *im, Call *c) {
  kiln_status s;
  const char *eq = im_attr_s(im, "equation", NULL);
  if (!eq) return im_fail(im, KILN_ERR_MODEL, "no equation");
  char terms[16][16], out[64];
  int nt = 0, len[16] = { 0 }, nout = 0;
  for (int i = 0; i < c->n_in; i++)
    if ((s = need_in(im, c, i))) return s;
  bool explicit_out = false;
  int ell_rank = -1;
  const char *p = eq;
  for (; *p && nt < 16; p++) {  /* parse "ab,bc->ac"; "..." becomes the letters 'A'.. */
    if (*p == ' ') continue;
    if (*p == ',') { nt++; continue; }
    if (*p == '-' && p[1] == '>') { explicit_out = true; p += 2; break; }
    if (nt >= c->n_in) return im_fail(im, KILN_ERR_MODEL, "equation has more terms than inputs");
    if (*p == '.' && p[1] == '.' && p[2] == '.') {
      int r, er = 0;  /* letters after the ellipsis in this term */
      for (const char *q = p + 3; *q && *q != ',' && *q != '-'; q++) er += *q != ' ';
      r = T(im, IN(c, nt))->rank - len[nt] - er;
      if (r < 0) return im_fail(im, KILN_ERR_MODEL, "term %d has more letters than input %d has dims", nt, nt);
      if (ell_rank >= 0 && r != ell_rank)  /* ONNX broadcasts them */
        return im_fail(im, KILN_ERR_UNSUPPORTED, "ellipses of different ranks (%d and %d)", ell_rank, r);
      ell_rank = r;
      for (int k = 0; k < r && len[nt] < 15; k++) terms[nt][len[nt]++] = (char)('A' + k);
      p += 2;
      continue;
    }
    if (!(*p >= 'a' && *p <= 'z') || len[nt] >= 15) return im_fail(im, KILN_ERR_MODEL, "bad equation '%s'", eq);
    terms[nt][len[nt]++] = *p;
  }
  nt++;
  if (nt != c->n_in) return im_fail(im, KILN_ERR_MODEL, "equation has %d terms for %d inputs", nt, c->n_in);
  for (; explicit_out && *p && nout < 15; p++) {
    if (*p == ' ') continue;
    if (*p == '.' && p[1] == '.' && p[2] == '.') {
      for (int k = 0; k < (ell_rank > 0 ? ell_rank : 0) && nout < 32; k++) out[nout++] = (char)('A' + k);
      p += 2;
      continue;
    }
    out[nout++] = *p;
  }
  char all[64];
  int na = 0, count[128] = { 0 };
  int64_t dim[128];
  for (int t = 0; t < nt; t++) {
    Tensor *x = T(im, IN(c, t));
    if (x->rank != len[t]) return im_fail(im, KILN_ERR_MODEL, "term %d has %d letters for rank %d", t, len[t], x->rank);
    for (int k = 0; k < len[t]; k++) {
      unsigned char ch = (unsigned char)terms[t][k];
      if (!count[ch]++) all[na++] = (char)ch, dim[ch] = x->shape[k];
      else if (dim[ch] != x->shape[k] && x->shape[k] != 1 && dim[ch] != 1)
        return im_fail(im, KILN_ERR_MODEL, "letter %c has sizes %lld and %lld", ch, (long long)dim[ch], (long long)x->shape[k]);
      else if (dim[ch] == 1) dim[ch] = x->shape[k];
    }
  }
  if (!explicit_out) {  /* implicit: ellipsis letters, then the letters seen once, sorted */
    for (int k = 0; k < na && nout < 63; k++)
      if (all[k] >= 'A' && all[k] <= 'Z') out[nout++] = all[k];
    for (int ch = 'a'; ch <= 'z' && nout < 63; ch++)
      if (count[ch] == 1) out[nout++] = (char)ch;
  }
  if (na > KILN_MAX_RANK) return im_fail(im, KILN_ERR_UNSUPPORTED, "%d distinct letters exceed rank %d", na, KILN_MAX_RANK);
  int prod = -1;
  for (int t = 0; t < nt; t++) {
    int x = IN(c, t), l = len[t];
    char term[16];
    memcpy(term, terms[t], 16);
    for (int a = 0; a < l; a++)  /* a repeated letter: keep the diagonal */
      for (int b = a + 1; b < l; b++) {
        if (term[a] != term[b]) continue;
        int64_t n = T(im, x)->shape[a], sh[KILN_MAX_RANK];
        uint8_t *eye = arena_alloc(&im->tmp, (size_t)(n * n + 1));
        if (!eye) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory");
        for (int64_t i = 0; i < n * n; i++) eye[i] = i / n == i % n;
        for (int r = 0; r < l; r++) sh[r] = r == a || r == b ? n : 1;
        int e, z, ax = b;
        TRY(im_const(im, KILN_BOOL, l, sh, eye, &e)); TRY(scalar(im, T(im, x)->dtype, 0, &z)); TRY(where(im, e, x, z, &x));
        TRY(graph_reduce(im->g, KILN_REDUCE_SUM, x, 1, &ax, 0, &x));
        memmove(term + b, term + b + 1, (size_t)(l - b - 1));
        l--, b--;
      }
    /* transpose into the order of `all`, then ones for the letters it lacks */
    int perm[KILN_MAX_RANK], k = 0;
    int64_t sh[KILN_MAX_RANK];
    for (int q = 0; q < na; q++)
      for (int r = 0; r < l; r++)
        if (term[r] == all[q]) perm[k++] = r;
    TRY(transpose(im, x, perm, &x));
    for (int q = 0, r = 0; q < na; q++) {
      bool has = memchr(term, all[q], (size_t)l) != NULL;
      sh[q] = has ? T(im, x)->shape[r++] : 1;
    }
    TRY(reshape(im, x, na, sh, &x));
    if (prod < 0) prod = x;
    else TRY(bin(im, OP_MUL, prod, x, &prod));
  }
  int red[KILN_MAX_RANK], nr = 0;
  for (int q = 0; q < na; q++)
    if (!memchr(out, all[q], (size_t)nout)) red[nr++] = q;
  if (nr) TRY(graph_reduce(im->g, KILN_REDUCE_SUM, prod, nr, red, 0, &prod));
  char kept[64];
  int nk = 0, perm[KILN_MAX_RANK];
  for (int q = 0; q < na; q++)
    if (memchr(out, all[q], (size_t)nout)) kept[nk++] = all[q];
  if (nk != nout) return im_fail(im, KILN_ERR_MODEL, "output letters not in the inputs");
  for (int o = 0; o < nout; o++)
    for (int q = 0; q < nk; q++)
      if (kept[q] == out[o]) perm[o] = q;
  if (T(im, prod)->rank != nk) {  /* broadcast size-1 dims the output keeps */
    return im_fail(im, KILN_ERR_UNSUPPORTED, "einsum shape mismatch");
  }
  return transpose(im, prod, perm, &c->out[0]);
}
#undef TRY

/* ---- recurrent layers, unrolled over the (static) sequence ---- */

#define TRY(e) do { if ((s = (e))) return s; } while (0)

static kiln_status rnn_act(Importer *im, const char *name, int x, int *out) {
  if (!strcmp(name, "Sigmoid")) return un(im, OP_SIGMOID, x, out);
  if (!strcmp(name, "Tanh")) return un(im, OP_TANH, x, out);
  if (!strcmp(name, "Relu")) return un(im, OP_RELU, x, out);
  return im_fail(im, KILN_ERR_UNSUPPORTED, "activation %s is not supported", name);
}

/* Slice k of size n along axis (a gate block, a direction, a time step), that axis dropped. */
static kiln_status take(Importer *im, int x, int axis, int64_t k, int64_t n, bool drop, int *out) {
  kiln_status s;
  int r = T(im, x)->rank;
  int64_t sh[KILN_MAX_RANK];
  if (axis < 0 || axis >= r) return im_fail(im, KILN_ERR_MODEL, "input '%s' has rank %d, no axis %d", T(im, x)->name, r, axis);
  TRY(slice1(im, x, axis, k * n, n, 1, out));
  if (!drop) return KILN_OK;
  for (int q = 0, w = 0; q < r; q++)
    if (q != axis) sh[w++] = T(im, *out)->shape[q];
  return reshape(im, *out, r - 1, sh, out);
}

/* RNN (G=1), GRU (G=3, gates z r h), LSTM (G=4, gates i o f c). */
static kiln_status r_rnn(Importer *im, Call *c) {
  kiln_status s;
  TRY(need_in(im, c, 0)); TRY(need_in(im, c, 1)); TRY(need_in(im, c, 2));
  const char *op = c->name;
  int G = !strcmp(op, "LSTM") ? 4 : !strcmp(op, "GRU") ? 3 : 1;
  bool lstm = G == 4, gru = G == 3, batchwise = im_attr_i(im, "layout", 0) != 0;
  const char *dir = im_attr_s(im, "direction", "forward");
  int D = !strcmp(dir, "bidirectional") ? 2 : 1;
  bool reverse_only = !strcmp(dir, "reverse");
  int64_t H = im_attr_i(im, "hidden_size", 0);
  double clip = im_attr_f(im, "clip", 0);
  if (im_attr_i(im, "input_forget", 0)) return im_fail(im, KILN_ERR_UNSUPPORTED, "input_forget=1 is not supported");
  if (im_attr_floats(im, "activation_alpha", &(int){ 0 }) || im_attr_floats(im, "activation_beta", &(int){ 0 }))
    return im_fail(im, KILN_ERR_UNSUPPORTED, "activation_alpha/beta are not supported");
  const char *acts[6] = { "Sigmoid", "Tanh", "Tanh", "Sigmoid", "Tanh", "Tanh" };
  if (G == 1) acts[0] = acts[3] = "Tanh";
  const Onnx__AttributeProto *aa = im_attr(im, "activations");
  int per = G == 1 ? 1 : G == 3 ? 2 : 3;
  if (aa && aa->n_strings) {
    if ((int)aa->n_strings != per * D) return im_fail(im, KILN_ERR_MODEL, "%zu activations for %d directions", aa->n_strings, D);
    for (int i = 0; i < per * D; i++) {
      char *nm = arena_alloc(&im->tmp, 32);
      if (!nm) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory");
      snprintf(nm, 32, "%.*s", (int)(aa->strings[i].len < 31 ? aa->strings[i].len : 31), (const char *)aa->strings[i].data);
      acts[i] = nm;
    }
  } else if (D == 2) {
    for (int i = 0; i < per; i++) acts[per + i] = acts[i];
  }
  int x = IN(c, 0), W = IN(c, 1), R = IN(c, 2), perm3[3] = { 1, 0, 2 };
  if (T(im, x)->rank != 3 || T(im, W)->rank != 3 || T(im, R)->rank != 3) return im_fail(im, KILN_ERR_MODEL, "X, W, R must be rank 3");
  if (batchwise) TRY(transpose(im, x, perm3, &x));
  int64_t S = T(im, x)->shape[0], B = T(im, x)->shape[1];
  /* H first: a hidden_size above INT64_MAX / G would overflow G * H */
  if (H <= 0 || H > INT64_MAX / G || T(im, W)->shape[0] != D || T(im, W)->shape[1] != G * H || T(im, R)->shape[2] != H)
    return im_fail(im, KILN_ERR_MODEL, "W/R shapes do not match hidden_size %lld and %d directions", (long long)H, D);
  if (S > MAX_UNROLL) return im_fail(im, KILN_ERR_UNSUPPORTED, "sequence of %lld steps", (long long)S);
  if (IN(c, 4) >= 0) {  /* sequence_lens: only the full length is supported */
    int64_t *lens;
    int n;
    TRY(const_ints(im, IN(c, 4), "sequence_lens", &lens, &n));
    for (int i = 0; i < n; i++)
      if (lens[i] != S) return im_fail(im, KILN_ERR_UNSUPPORTED, "sequence_lens shorter than the sequence");
  }
  kiln_dtype dt = T(im, x)->dtype;
  int ys[2], yh[2], yc[2];
  int *hs = arena_alloc(&im->tmp, sizeof(int) * (size_t)(S + 1));
  if (!hs) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory");
  for (int d = 0; d < D; d++) {
    bool rev = reverse_only || d == 1;
    int w, r, wb = -1, rb = -1, xw, h, cst = -1, p = -1, perm2[2] = { 1, 0 };
    const char **act = acts + d * per;
    TRY(take(im, W, 0, d, 1, true, &w)); TRY(transpose(im, w, perm2, &w));   /* [I, G*H] */
    TRY(take(im, R, 0, d, 1, true, &r)); TRY(transpose(im, r, perm2, &r));   /* [H, G*H] */
    if (IN(c, 3) >= 0) {
      int b;
      TRY(take(im, IN(c, 3), 0, d, 1, true, &b));
      TRY(take(im, b, 0, 0, G * H, false, &wb)); TRY(take(im, b, 0, 1, G * H, false, &rb));
    }
    TRY(bin(im, OP_MATMUL, x, w, &xw));  /* every step's input projection at once: [S, B, G*H] */
    if (wb >= 0) TRY(bin(im, OP_ADD, xw, wb, &xw));
    if (IN(c, 5) >= 0) {
      int h0 = IN(c, 5);
      if (batchwise) TRY(transpose(im, h0, perm3, &h0));
      TRY(take(im, h0, 0, d, 1, true, &h));
    } else {
      int64_t sh[2] = { B, H };
      TRY(filled(im, dt, 0, 2, sh, &h));
    }
    if (lstm) {
      if (IN(c, 6) >= 0) {
        int c0 = IN(c, 6);
        if (batchwise) TRY(transpose(im, c0, perm3, &c0));
        TRY(take(im, c0, 0, d, 1, true, &cst));
      } else {
        int64_t sh[2] = { B, H };
        TRY(filled(im, dt, 0, 2, sh, &cst));
      }
      if (IN(c, 7) >= 0) TRY(take(im, IN(c, 7), 0, d, 1, true, &p));
    }
    bool lbr = im_attr_i(im, "linear_before_reset", 0) != 0;
    for (int64_t k = 0; k < S; k++) {
      int64_t t = rev ? S - 1 - k : k;
      int xt, hr, g[4], gr = -1;
      TRY(take(im, xw, 0, t, 1, true, &xt));
      TRY(bin(im, OP_MATMUL, h, r, &hr));
      if (rb >= 0) TRY(bin(im, OP_ADD, hr, rb, &hr));
      for (int q = 0; q < G; q++) {
        int xq, hq;
        TRY(take(im, xt, 1, q, H, false, &xq)); TRY(take(im, hr, 1, q, H, false, &hq));
        if (gru && q == 2) { g[q] = xq, gr = hq; continue; }  /* the candidate mixes in the reset gate below */
        TRY(bin(im, OP_ADD, xq, hq, &g[q]));
      }
      if (clip > 0)
        for (int q = 0; q < G; q++)
          if (!(gru && q == 2)) { TRY(binc(im, OP_MAX, g[q], -clip, &g[q])); TRY(binc(im, OP_MIN, g[q], clip, &g[q])); }
      if (G == 1) {
        TRY(rnn_act(im, act[0], g[0], &h));
      } else if (gru) {
        int z, rs, cand, t1, t2;
        TRY(rnn_act(im, act[0], g[0], &z)); TRY(rnn_act(im, act[0], g[1], &rs));
        if (lbr) {
          TRY(bin(im, OP_MUL, rs, gr, &t1));
        } else {  /* (r * h) R_h^T + Rb_h */
          int rh, rhh;
          TRY(bin(im, OP_MUL, rs, h, &rh)); TRY(take(im, r, 1, 2, H, false, &rhh)); TRY(bin(im, OP_MATMUL, rh, rhh, &t1));
          if (rb >= 0) { int rbh; TRY(take(im, rb, 0, 2, H, false, &rbh)); TRY(bin(im, OP_ADD, t1, rbh, &t1)); }
        }
        TRY(bin(im, OP_ADD, g[2], t1, &cand));
        if (clip > 0) { TRY(binc(im, OP_MAX, cand, -clip, &cand)); TRY(binc(im, OP_MIN, cand, clip, &cand)); }
        TRY(rnn_act(im, act[1], cand, &cand));
        TRY(cbin(im, OP_SUB, 1, z, &t1)); TRY(bin(im, OP_MUL, t1, cand, &t1)); TRY(bin(im, OP_MUL, z, h, &t2));
        TRY(bin(im, OP_ADD, t1, t2, &h));
      } else {  /* LSTM: i o f c */
        int it, ft, ot, ct, t1;
        if (p >= 0) {
          int pi, pf;
          TRY(take(im, p, 0, 0, H, false, &pi)); TRY(take(im, p, 0, 2, H, false, &pf));
          TRY(bin(im, OP_MUL, pi, cst, &t1)); TRY(bin(im, OP_ADD, g[0], t1, &g[0]));
          TRY(bin(im, OP_MUL, pf, cst, &t1)); TRY(bin(im, OP_ADD, g[2], t1, &g[2]));
        }
        TRY(rnn_act(im, act[0], g[0], &it)); TRY(rnn_act(im, act[0], g[2], &ft)); TRY(rnn_act(im, act[1], g[3], &ct));
        TRY(bin(im, OP_MUL, ft, cst, &cst)); TRY(bin(im, OP_MUL, it, ct, &t1)); TRY(bin(im, OP_ADD, cst, t1, &cst));
        if (p >= 0) { int po; TRY(take(im, p, 0, 1, H, false, &po)); TRY(bin(im, OP_MUL, po, cst, &t1)); TRY(bin(im, OP_ADD, g[1], t1, &g[1])); }
        TRY(rnn_act(im, act[0], g[1], &ot)); TRY(rnn_act(im, act[2], cst, &t1)); TRY(bin(im, OP_MUL, ot, t1, &h));
      }
      hs[t] = h;
    }
    TRY(stack(im, hs, (int)S, 0, false, &ys[d]));  /* [S, B, H] in time order */
    yh[d] = h, yc[d] = cst;
  }
  /* Y [S, D, B, H], Y_h and Y_c [D, B, H]; batch first with layout 1 */
  int y, fh, fc = -1;
  Attr a = { 0 };
  for (int d = 0; d < D; d++) {
    TRY(insert_dim(im, ys[d], 1, &ys[d])); TRY(insert_dim(im, yh[d], 0, &yh[d]));
    if (lstm) TRY(insert_dim(im, yc[d], 0, &yc[d]));
  }
  a.axis = 1;
  if (D == 2) TRY(add(im, OP_CONCAT, 2, ys, &a, &y)); else y = ys[0];
  a.axis = 0;
  if (D == 2) TRY(add(im, OP_CONCAT, 2, yh, &a, &fh)); else fh = yh[0];
  if (lstm) { if (D == 2) TRY(add(im, OP_CONCAT, 2, yc, &a, &fc)); else fc = yc[0]; }
  if (batchwise) {
    int p4[4] = { 2, 0, 1, 3 };
    TRY(transpose(im, y, p4, &y)); TRY(transpose(im, fh, perm3, &fh));
    if (lstm) TRY(transpose(im, fc, perm3, &fc));
  }
  if (c->n_out > 0) c->out[0] = y;
  if (c->n_out > 1) c->out[1] = fh;
  if (c->n_out > 2 && lstm) c->out[2] = fc;
  return KILN_OK;
}
#undef TRY

/* RotaryEmbedding (opset 23): rotate pairs of each head's first rotary_embedding_dim
 * features by the cached cos/sin of their position. */
static kiln_status r_rotary(Importer *im, Call *c) {
  kiln_status s;
#define TRY(e) do { if ((s = (e))) return s; } while (0)
  TRY(need_in(im, c, 0)); TRY(need_in(im, c, 1)); TRY(need_in(im, c, 2));
  int x = IN(c, 0), rank = T(im, x)->rank, p4[4] = { 0, 2, 1, 3 };
  int64_t xs[KILN_MAX_RANK], H = im_attr_i(im, "num_heads", 0);
  memcpy(xs, T(im, x)->shape, sizeof xs);
  bool inter = im_attr_i(im, "interleaved", 0) != 0;
  if (rank == 4) {
    TRY(transpose(im, x, p4, &x));  /* [B, S, H, D] */
  } else if (rank == 3) {
    if (H <= 0 || xs[2] % H) return im_fail(im, KILN_ERR_MODEL, "num_heads %lld does not divide %lld", (long long)H, (long long)xs[2]);
    int64_t sh[4] = { xs[0], xs[1], H, xs[2] / H };
    TRY(reshape(im, x, 4, sh, &x));
  } else {
    return im_fail(im, KILN_ERR_MODEL, "input rank %d, expected 3 or 4", rank);
  }
  int64_t B = T(im, x)->shape[0], S = T(im, x)->shape[1], D = T(im, x)->shape[3], rot = im_attr_i(im, "rotary_embedding_dim", 0);
  if (rot == 0) rot = D;
  if (rot < 2 || rot > D || rot % 2) return im_fail(im, KILN_ERR_MODEL, "rotary_embedding_dim %lld for head size %lld", (long long)rot, (long long)D);
  int cs = IN(c, 1), sn = IN(c, 2), xr, xp = -1, x1, x2, t1, t2, re, imv, y;
  if (IN(c, 3) >= 0) {
    Attr a = { 0 };
    TRY(add(im, OP_GATHER, 2, (int[]){ cs, IN(c, 3) }, &a, &cs)); TRY(add(im, OP_GATHER, 2, (int[]){ sn, IN(c, 3) }, &a, &sn));
  }
  if (T(im, cs)->rank != 3 || T(im, cs)->shape[2] < rot / 2) return im_fail(im, KILN_ERR_MODEL, "cos/sin caches must be [B, S, >= rot/2]");
  TRY(take(im, cs, 2, 0, rot / 2, false, &cs)); TRY(take(im, sn, 2, 0, rot / 2, false, &sn));
  TRY(insert_dim(im, cs, 2, &cs)); TRY(insert_dim(im, sn, 2, &sn));  /* [B, S, 1, rot/2] */
  TRY(take(im, x, 3, 0, rot, false, &xr));
  if (rot < D) TRY(slice1(im, x, 3, rot, D - rot, 1, &xp));
  if (inter) { TRY(slice1(im, xr, 3, 0, rot / 2, 2, &x1)); TRY(slice1(im, xr, 3, 1, rot / 2, 2, &x2)); }
  else { TRY(take(im, xr, 3, 0, rot / 2, false, &x1)); TRY(take(im, xr, 3, 1, rot / 2, false, &x2)); }
  TRY(bin(im, OP_MUL, cs, x1, &t1)); TRY(bin(im, OP_MUL, sn, x2, &t2)); TRY(bin(im, OP_SUB, t1, t2, &re));
  TRY(bin(im, OP_MUL, sn, x1, &t1)); TRY(bin(im, OP_MUL, cs, x2, &t2)); TRY(bin(im, OP_ADD, t1, t2, &imv));
  Attr a = { 0 };
  if (inter) {  /* pairs back side by side: [.., rot/2, 2] -> [.., rot] */
    int64_t sh[4] = { B, S, T(im, re)->shape[2], rot };
    TRY(insert_dim(im, re, 4, &re)); TRY(insert_dim(im, imv, 4, &imv));
    a.axis = 4;
    TRY(add(im, OP_CONCAT, 2, (int[]){ re, imv }, &a, &y)); TRY(reshape(im, y, 4, sh, &y));
  } else {
    a.axis = 3;
    TRY(add(im, OP_CONCAT, 2, (int[]){ re, imv }, &a, &y));
  }
  if (xp >= 0) { a.axis = 3; TRY(add(im, OP_CONCAT, 2, (int[]){ y, xp }, &a, &y)); }
  if (rank == 4) return transpose(im, y, p4, &c->out[0]);
  return reshape(im, y, 3, xs, &c->out[0]);
#undef TRY
}

/* ---- integer and quantised contractions, computed exactly in f64 ---- */

#define TRY(e) do { if ((s = (e))) return s; } while (0)

/* f64 of x minus its zero point (zp -1: none); a 1-D zero point of more than one entry
 * lies along axis (rows of a matrix, output channels of a kernel). */
static kiln_status centred(Importer *im, int x, int zp, int axis, int *out) {
  kiln_status s;
  int rank = T(im, x)->rank;
  TRY(cast(im, x, KILN_F64, &x));
  if (zp < 0) return give(out, x);
  TRY(cast(im, zp, KILN_F64, &zp));
  if (T(im, zp)->rank == 1 && T(im, zp)->numel > 1 && axis >= 0) TRY(along_axis(im, zp, rank, axis, &zp));
  return bin(im, OP_SUB, x, zp, out);
}

/* round(acc * scale / y_scale) + y_zp, saturated to y_zp's type (u8 when absent). */
static kiln_status requantise(Importer *im, int acc, int scale, int ysc, int yzp, int *out) {
  kiln_status s;
  kiln_dtype to = yzp >= 0 ? T(im, yzp)->dtype : KILN_U8;
  double lo, hi;
  switch (to) {
  case KILN_U8: lo = 0, hi = 255; break;
  case KILN_I8: lo = -128, hi = 127; break;
  default: return im_fail(im, KILN_ERR_UNSUPPORTED, "quantised output of %s", kiln_dtype_name(to));
  }
  TRY(bin(im, OP_MUL, acc, scale, &acc)); TRY(cast(im, ysc, KILN_F64, &ysc)); TRY(bin(im, OP_DIV, acc, ysc, &acc));
  TRY(un(im, OP_ROUND, acc, &acc));
  if (yzp >= 0) { int z; TRY(cast(im, yzp, KILN_F64, &z)); TRY(bin(im, OP_ADD, acc, z, &acc)); }
  TRY(binc(im, OP_MAX, acc, lo, &acc)); TRY(binc(im, OP_MIN, acc, hi, &acc));
  return cast(im, acc, to, out);
}

static kiln_status r_matmul_integer(Importer *im, Call *c) {
  kiln_status s;
  bool q = !strcmp(c->name, "QLinearMatMul");
  int ia = 0, ib = q ? 3 : 1, iaz = 2, ibz = q ? 5 : 3, a, b, y;
  TRY(need_in(im, c, ia)); TRY(need_in(im, c, ib));
  int ar = T(im, IN(c, ia))->rank;
  TRY(centred(im, IN(c, ia), IN(c, iaz), ar - 2, &a)); TRY(centred(im, IN(c, ib), IN(c, ibz), -1, &b));
  TRY(bin(im, OP_MATMUL, a, b, &y));
  if (!q) return cast(im, y, KILN_I32, &c->out[0]);
  int as, bs, sc;
  TRY(need_in(im, c, 1)); TRY(need_in(im, c, 4)); TRY(need_in(im, c, 6));  /* the scales */
  TRY(cast(im, IN(c, 1), KILN_F64, &as)); TRY(cast(im, IN(c, 4), KILN_F64, &bs));
  if (T(im, as)->rank == 1 && T(im, as)->numel > 1) TRY(along_axis(im, as, ar, ar - 2, &as));
  TRY(bin(im, OP_MUL, as, bs, &sc));
  return requantise(im, y, sc, IN(c, 6), IN(c, 7), &c->out[0]);
}

static kiln_status r_conv_integer(Importer *im, Call *c) {
  kiln_status s;
  bool q = !strcmp(c->name, "QLinearConv");
  int ix = 0, iw = q ? 3 : 1, ixz = 2, iwz = q ? 5 : 3, ins[3] = { -1, -1, -1 }, y;
  TRY(need_in(im, c, ix)); TRY(need_in(im, c, iw));
  TRY(centred(im, IN(c, ix), IN(c, ixz), -1, &ins[0])); TRY(centred(im, IN(c, iw), IN(c, iwz), 0, &ins[1]));
  if (q && IN(c, 8) >= 0) TRY(cast(im, IN(c, 8), KILN_F64, &ins[2]));  /* int32 bias, in units of xs * ws */
  Call c2 = *c;
  c2.in = ins, c2.n_in = 3, c2.n_out = 1, c2.out = &y;
  TRY(r_conv(im, &c2));
  if (!q) return cast(im, y, KILN_I32, &c->out[0]);
  int xs, ws, sc;
  TRY(need_in(im, c, 1)); TRY(need_in(im, c, 4)); TRY(need_in(im, c, 6));
  TRY(cast(im, IN(c, 1), KILN_F64, &xs)); TRY(cast(im, IN(c, 4), KILN_F64, &ws));
  if (T(im, ws)->rank == 1 && T(im, ws)->numel > 1) TRY(per_channel(im, ws, T(im, y)->rank, &ws));
  TRY(bin(im, OP_MUL, xs, ws, &sc));
  return requantise(im, y, sc, IN(c, 6), IN(c, 7), &c->out[0]);
}
#undef TRY

/* ---- small compositions of newer opsets ---- */

#define TRY(e) do { if ((s = (e))) return s; } while (0)

static kiln_status swiglu(Importer *im, Call *c) {
  kiln_status s;
  int t;
  TRY(need_in(im, c, 0)); TRY(need_in(im, c, 1));
  TRY(binc(im, OP_MUL, IN(c, 0), im_attr_f(im, "alpha", 1), &t)); TRY(un(im, OP_SIGMOID, t, &t));
  TRY(bin(im, OP_MUL, IN(c, 0), t, &t));
  return bin(im, OP_MUL, t, IN(c, 1), &c->out[0]);
}

static kiln_status r_swiglu(Importer *im, Call *c) { return upcast_half(im, c, swiglu); }

/* Det of [..., n, n] for n <= 3, by cofactors. */
static kiln_status r_det(Importer *im, Call *c) {
  kiln_status s;
  TRY(need_in(im, c, 0));
  int x = IN(c, 0), r = T(im, x)->rank, e[3][3];
  int64_t n = r >= 2 ? T(im, x)->shape[r - 1] : 0;
  if (r < 2 || T(im, x)->shape[r - 2] != n || n < 1 || n > 3) return im_fail(im, KILN_ERR_UNSUPPORTED, "determinant of other than 1x1 to 3x3 matrices");
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      TRY(take(im, x, r - 2, i, 1, true, &e[i][j])); TRY(take(im, e[i][j], r - 2, j, 1, true, &e[i][j]));
    }
  if (n == 1) return give(&c->out[0], e[0][0]);
  int a, b, d = -1;
  if (n == 2) {
    TRY(bin(im, OP_MUL, e[0][0], e[1][1], &a)); TRY(bin(im, OP_MUL, e[0][1], e[1][0], &b));
    return bin(im, OP_SUB, a, b, &c->out[0]);
  }
  for (int j = 0; j < 3; j++) {  /* expansion along the first row */
    int j1 = (j + 1) % 3, j2 = (j + 2) % 3, m;
    TRY(bin(im, OP_MUL, e[1][j1], e[2][j2], &a)); TRY(bin(im, OP_MUL, e[1][j2], e[2][j1], &b)); TRY(bin(im, OP_SUB, a, b, &m));
    TRY(bin(im, OP_MUL, e[0][j], m, &m));
    if (d < 0) d = m;
    else TRY(bin(im, OP_ADD, d, m, &d));
  }
  return give(&c->out[0], d);
}

/* MaxUnpool: X's values put back at the flat output positions MaxPool reported. */
static kiln_status r_max_unpool(Importer *im, Call *c) {
  kiln_status s;
  TRY(need_in(im, c, 0)); TRY(need_in(im, c, 1));
  Tensor *x = T(im, IN(c, 0));
  int rank = x->rank, sp = rank - 2, n, nk;
  int64_t *ix, osh[KILN_MAX_RANK], total = 1;
  TRY(const_ints(im, IN(c, 1), "indices", &ix, &n));
  if (sp < 1 || n != x->numel) return im_fail(im, KILN_ERR_MODEL, "indices must match X");
  const int64_t *k = im_attr_ints(im, "kernel_shape", &nk), *st, *pd;
  int ns, np;
  st = im_attr_ints(im, "strides", &ns), pd = im_attr_ints(im, "pads", &np);
  if (nk != sp) return im_fail(im, KILN_ERR_MODEL, "kernel_shape has %d entries", nk);
  osh[0] = x->shape[0], osh[1] = x->shape[1];
  for (int i = 0; i < sp; i++)  /* the shape MaxPool's input had; indices are flat into it */
    osh[2 + i] = (x->shape[2 + i] - 1) * (ns == sp ? st[i] : 1) + k[i] - (np == 2 * sp ? pd[i] + pd[sp + i] : 0);
  Attr grow = { 0 };
  bool padded = false;
  if (IN(c, 2) >= 0) {  /* a larger requested output: zeros after the end of each axis */
    int64_t *o;
    int no;
    TRY(const_ints(im, IN(c, 2), "output_shape", &o, &no));
    if (no != rank) return im_fail(im, KILN_ERR_MODEL, "output_shape has %d entries", no);
    for (int i = 0; i < rank; i++) {
      if (o[i] < osh[i] || o[i] > osh[i] + (1 << 20)) return im_fail(im, KILN_ERR_UNSUPPORTED, "output_shape smaller than the pooled input");
      grow.pads[rank + i] = o[i] - osh[i], padded |= o[i] != osh[i];
    }
  }
  for (int i = 0; i < rank; i++)
    if (osh[i] < 0 || !size_mul(total, osh[i], &total) || total > (1 << 24)) return im_fail(im, KILN_ERR_UNSUPPORTED, "output too large");
  int64_t *src = arena_alloc(&im->tmp, sizeof(int64_t) * (size_t)(n + 1));
  if (!src) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory");
  for (int i = 0; i < n; i++) {
    if (ix[i] < 0 || ix[i] >= total) return im_fail(im, KILN_ERR_MODEL, "index %lld outside the output", (long long)ix[i]);
    src[i] = i;
  }
  int zero, y;
  TRY(filled(im, x->dtype, 0, rank, osh, &zero));
  TRY(scatter_pairs(im, zero, IN(c, 0), n, ix, src, "none", &y));
  if (!padded) return give(&c->out[0], y);
  return add(im, OP_PAD, 1, &y, &grow, &c->out[0]);
}

/* TensorScatter: each batch entry's update written into the cache at its write index
 * along axis (wrapping round in circular mode). */
static kiln_status r_tensor_scatter(Importer *im, Call *c) {
  kiln_status s;
  TRY(need_in(im, c, 0)); TRY(need_in(im, c, 1));
  Tensor *cache = T(im, IN(c, 0)), *u = T(im, IN(c, 1));
  int rank = cache->rank, nw = 0;
  int64_t a0 = im_attr_i(im, "axis", -2), *wi = NULL, cs[KILN_MAX_RANK], us[KILN_MAX_RANK];
  int axis = norm_axis(a0, rank);
  if (axis <= 0 || u->rank != rank) return bad_axis(im, a0, rank);
  memcpy(cs, cache->shape, sizeof cs), memcpy(us, u->shape, sizeof us);
  if (IN(c, 2) >= 0) TRY(const_ints(im, IN(c, 2), "write_indices", &wi, &nw));
  if (wi && nw != cs[0]) return im_fail(im, KILN_ERR_MODEL, "write_indices has %d entries for batch %lld", nw, (long long)cs[0]);
  if (us[0] != cs[0]) return im_fail(im, KILN_ERR_MODEL, "update batch %lld differs from the cache's %lld", (long long)us[0], (long long)cs[0]);
  bool circ = !strcmp(im_attr_s(im, "mode", "linear"), "circular");
  int64_t n = u->numel, idx[KILN_MAX_RANK];
  int64_t *tgt = arena_alloc(&im->tmp, sizeof(int64_t) * (size_t)(n + 1)), *src = arena_alloc(&im->tmp, sizeof(int64_t) * (size_t)(n + 1));
  if (!tgt || !src) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory");
  for (int64_t e = 0; e < n; e++) {
    int64_t rem = e, pos = 0;
    for (int r = rank - 1; r >= 0; r--) idx[r] = rem % us[r], rem /= us[r];
    int64_t at = idx[axis] + (wi ? wi[idx[0]] : 0);
    if (circ && cs[axis] > 0) at %= cs[axis];
    if (at < 0 || at >= cs[axis]) return im_fail(im, KILN_ERR_MODEL, "write position %lld outside the cache", (long long)at);
    idx[axis] = at;
    for (int r = 0; r < rank; r++) {
      if (idx[r] >= cs[r]) return im_fail(im, KILN_ERR_MODEL, "update larger than the cache");
      pos = pos * cs[r] + idx[r];
    }
    tgt[e] = pos, src[e] = e;
  }
  return scatter_pairs(im, IN(c, 0), IN(c, 1), n, tgt, src, "none", &c->out[0]);
}
#undef TRY

/* DynamicQuantizeLinear: u8 with the scale and zero point that map [min(x, 0), max(x, 0)]
 * onto 0..255. */
static kiln_status r_dynamic_quantize(Importer *im, Call *c) {
  kiln_status s;
#define TRY(e) do { if ((s = (e))) return s; } while (0)
  TRY(need_in(im, c, 0));
  int x = IN(c, 0), rank = T(im, x)->rank, all[KILN_MAX_RANK], lo, hi, sc, y, z;
  if (T(im, x)->dtype != KILN_F32) return im_fail(im, KILN_ERR_MODEL, "input must be f32");
  for (int r = 0; r < rank; r++) all[r] = r;
  if (rank) {
    TRY(graph_reduce(im->g, KILN_REDUCE_MIN, x, rank, all, 0, &lo)); TRY(graph_reduce(im->g, KILN_REDUCE_MAX, x, rank, all, 0, &hi));
  } else {
    lo = hi = x;
  }
  TRY(binc(im, OP_MIN, lo, 0, &lo)); TRY(binc(im, OP_MAX, hi, 0, &hi));
  TRY(bin(im, OP_SUB, hi, lo, &sc)); TRY(binc(im, OP_DIV, sc, 255, &sc));
  /* zero point: saturate(round(-min / scale)); a zero scale (all zeros) maps to 0 */
  int safe, isz, one;
  TRY(binc(im, OP_EQ, sc, 0, &isz)); TRY(scalar(im, KILN_F32, 1, &one)); TRY(where(im, isz, one, sc, &safe));
  TRY(un(im, OP_NEG, lo, &z)); TRY(bin(im, OP_DIV, z, safe, &z)); TRY(un(im, OP_ROUND, z, &z));
  TRY(binc(im, OP_MAX, z, 0, &z)); TRY(binc(im, OP_MIN, z, 255, &z));
  TRY(bin(im, OP_DIV, x, safe, &y)); TRY(un(im, OP_ROUND, y, &y)); TRY(bin(im, OP_ADD, y, z, &y));
  TRY(binc(im, OP_MAX, y, 0, &y)); TRY(binc(im, OP_MIN, y, 255, &y));
  TRY(cast(im, y, KILN_U8, &c->out[0]));
  if (c->n_out > 1) c->out[1] = sc;
  if (c->n_out > 2) TRY(cast(im, z, KILN_U8, &c->out[2]));
  return KILN_OK;
#undef TRY
}

/* ---- strings ---- */

/* A strings attribute as C strings in the import arena; n = -1 when absent. */
static kiln_status attr_strings(Importer *im, const char *name, const char ***out, int *n) {
  const Onnx__AttributeProto *a = im_attr(im, name);
  *out = NULL;
  *n = -1;
  if (!a) return KILN_OK;
  if (a->n_strings > (1 << 24)) return im_fail(im, KILN_ERR_UNSUPPORTED, "attribute %s holds %zu strings", name, a->n_strings);
  const char **v = arena_alloc(&im->tmp, sizeof *v * (a->n_strings + 1));
  if (!v) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory");
  for (size_t i = 0; i < a->n_strings; i++) {
    const ProtobufCBinaryData *d = &a->strings[i];
    if (d->len && memchr(d->data, 0, d->len))
      return im_fail(im, KILN_ERR_UNSUPPORTED, "attribute %s: string %zu holds a NUL byte", name, i);
    char *c = arena_alloc(&im->tmp, d->len + 1);
    if (!c) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory");
    if (d->len) memcpy(c, d->data, d->len);
    v[i] = c;
  }
  *out = v;
  *n = (int)a->n_strings;
  return KILN_OK;
}

/* StringNormalizer (opset 10). The locale attribute is not applied: case mapping is ASCII. */
static kiln_status r_string_normalizer(Importer *im, Call *c) {
  kiln_status s;
  if ((s = need_in(im, c, 0))) return s;
  const char *act = im_attr_s(im, "case_change_action", "NONE");
  StrAttr sa = { .case_sensitive = im_attr_i(im, "is_case_sensitive", 0) != 0 };
  if (!strcmp(act, "LOWER")) sa.case_change = 1;
  else if (!strcmp(act, "UPPER")) sa.case_change = 2;
  else if (strcmp(act, "NONE")) return im_fail(im, KILN_ERR_MODEL, "case_change_action '%s' is not LOWER, UPPER or NONE", act);
  if ((s = attr_strings(im, "stopwords", &sa.words, &sa.n_words))) return s;
  if (sa.n_words < 0) sa.n_words = 0;
  Attr a = { 0 };
  a.str = &sa;
  return add(im, OP_STR_NORMALIZE, 1, &c->in[0], &a, &c->out[0]);
}

static kiln_status r_string_concat(Importer *im, Call *c) {
  kiln_status s;
  if ((s = need_in(im, c, 0)) || (s = need_in(im, c, 1))) return s;
  return bin(im, OP_STR_CONCAT, IN(c, 0), IN(c, 1), &c->out[0]);
}

static kiln_status r_regex_full_match(Importer *im, Call *c) {
  kiln_status s;
  if ((s = need_in(im, c, 0))) return s;
  const Onnx__AttributeProto *pa = im_attr(im, "pattern");
  if (!pa || !pa->has_s) return im_fail(im, KILN_ERR_MODEL, "no pattern");
  if (pa->s.len && memchr(pa->s.data, 0, pa->s.len)) return im_fail(im, KILN_ERR_UNSUPPORTED, "the pattern holds a NUL byte");
  StrAttr sa = { .pattern = im_attr_s(im, "pattern", "") };
  Attr a = { 0 };
  a.str = &sa;
  return add(im, OP_REGEX_MATCH, 1, &c->in[0], &a, &c->out[0]);
}

static bool split_space(char ch) { return ch == ' ' || (ch >= '\t' && ch <= '\r'); }

/* Python's str.split: with a delimiter, every occurrence splits (empty pieces kept); without
 * one, runs of ASCII whitespace split and the ends are trimmed. At most maxsplit splits
 * (< 0: no limit); the rest is the last piece. Calls piece() for each; returns the count. */
static int64_t split_one(const char *s, const char *delim, int64_t maxsplit,
                         void (*piece)(void *ctx, const char *p, size_t n), void *ctx) {
  int64_t n = 0;
  size_t dl = strlen(delim);
  if (dl) {
    for (const char *q; maxsplit < 0 || n < maxsplit; s = q + dl, n++) {
      if (!(q = strstr(s, delim))) break;
      if (piece) piece(ctx, s, (size_t)(q - s));
    }
    if (piece) piece(ctx, s, strlen(s));
    return n + 1;
  }
  while (*s) {
    while (split_space(*s)) s++;
    if (!*s) break;
    if (maxsplit >= 0 && n == maxsplit) {  /* the rest, leading whitespace gone, trailing kept */
      if (piece) piece(ctx, s, strlen(s));
      return n + 1;
    }
    const char *e = s;
    while (*e && !split_space(*e)) e++;
    if (piece) piece(ctx, s, (size_t)(e - s));
    n++;
    s = e;
  }
  return n;
}

typedef struct SplitOut { Arena *a; const char **v; bool oom; } SplitOut;

static void split_store(void *ctx, const char *p, size_t n) {
  SplitOut *o = ctx;
  char *c = arena_alloc(o->a, n + 1);
  if (!c) { o->oom = true; *o->v++ = ""; return; }
  memcpy(c, p, n);
  *o->v++ = c;
}

/* StringSplit (opset 20). The pieces' count is the output's last dim, so the strings must
 * be known when the graph is built: the split happens here, into constants. */
static kiln_status r_string_split(Importer *im, Call *c) {
  kiln_status s;
  if ((s = need_in(im, c, 0))) return s;
  const Tensor *x = T(im, IN(c, 0));
  if (x->dtype != KILN_STRING) return im_fail(im, KILN_ERR_MODEL, "input '%s' is %s, not string", x->name, kiln_dtype_name(x->dtype));
  if (x->kind != T_CONST)
    return im_fail(im, KILN_ERR_UNSUPPORTED, "the output shape depends on the strings of '%s', which must be constant "
                   "(kiln's shapes are static)", x->name);
  if (x->rank >= KILN_MAX_RANK) return im_fail(im, KILN_ERR_UNSUPPORTED, "input rank %d leaves no room for the pieces", x->rank);
  const char *delim = im_attr_s(im, "delimiter", "");
  const Onnx__AttributeProto *ma = im_attr(im, "maxsplit");
  int64_t maxsplit = ma && ma->has_i ? ma->i : -1;
  if (ma && ma->has_i && maxsplit < 0) return im_fail(im, KILN_ERR_MODEL, "maxsplit %lld is negative", (long long)maxsplit);
  const char *const *xs = x->data;
  int64_t n = x->numel, most = 0, total;
  int64_t *counts = arena_alloc(&im->tmp, sizeof(int64_t) * (size_t)(n + 1));
  if (!counts) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory");
  for (int64_t i = 0; i < n; i++) {
    counts[i] = split_one(xs[i], delim, maxsplit, NULL, NULL);
    if (counts[i] > most) most = counts[i];
  }
  int64_t shape[KILN_MAX_RANK];
  memcpy(shape, x->shape, sizeof shape);
  shape[x->rank] = most;
  if (!size_mul(n, most, &total) || total > ((int64_t)1 << 26))
    return im_fail(im, KILN_ERR_UNSUPPORTED, "%lld strings of up to %lld pieces are too many", (long long)n, (long long)most);
  const char **v = arena_alloc(&im->tmp, sizeof *v * (size_t)(total + 1));
  if (!v) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory");
  for (int64_t i = 0; i < total; i++) v[i] = "";
  SplitOut o = { &im->tmp, NULL, false };
  for (int64_t i = 0; i < n; i++) {
    o.v = v + i * most;
    split_one(xs[i], delim, maxsplit, split_store, &o);
  }
  if (o.oom) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory");
  /* x points into the graph's tensor table, which the first constant may move */
  int xrank = x->rank;
  int64_t xshape[KILN_MAX_RANK];
  memcpy(xshape, x->shape, sizeof xshape);
  if ((s = im_const(im, KILN_STRING, xrank + 1, shape, v, &c->out[0]))) return s;
  return c->n_out > 1 ? im_const_i64(im, xrank, xshape, counts, &c->out[1]) : KILN_OK;
}

/* LabelEncoder's keys or values: a TensorProto attribute NAME_tensor, else one of the typed
 * lists NAME_strings / NAME_int64s / NAME_floats. */
static kiln_status label_table(Importer *im, const char *name, kiln_dtype *t, int64_t *n, const void **data) {
  char an[64];
  snprintf(an, sizeof an, "%s_tensor", name);
  const Onnx__AttributeProto *a = im_attr(im, an);
  if (a && a->t) {
    OnnxTensor v;
    kiln_status s = im_tensor(im, a->t, &v);
    if (s) return s;
    *t = v.dtype, *n = v.numel, *data = v.data;
    return KILN_OK;
  }
  int k;
  const char **strs;
  snprintf(an, sizeof an, "%s_strings", name);
  kiln_status s = attr_strings(im, an, &strs, &k);
  if (s) return s;
  if (k >= 0) { *t = KILN_STRING, *n = k, *data = strs; return KILN_OK; }
  snprintf(an, sizeof an, "%s_int64s", name);
  const int64_t *ints = im_attr_ints(im, an, &k);
  if (k >= 0) { *t = KILN_I64, *n = k, *data = ints; return KILN_OK; }
  snprintf(an, sizeof an, "%s_floats", name);
  const float *fl = im_attr_floats(im, an, &k);
  if (k >= 0) { *t = KILN_F32, *n = k, *data = fl; return KILN_OK; }
  return im_fail(im, KILN_ERR_MODEL, "no %s (%s_tensor, _strings, _int64s or _floats)", name, name);
}

kiln_status im_label_encoder(Importer *im, int n_in, const int *ins, int n_out, int *outs) {
  if (n_in != 1 || ins[0] < 0 || n_out != 1) return im_fail(im, KILN_ERR_MODEL, "expects one input and one output");
  StrAttr sa = { 0 };
  int64_t nv;
  kiln_status s;
  if ((s = label_table(im, "keys", &sa.key_t, &sa.n_keys, &sa.keys)) ||
      (s = label_table(im, "values", &sa.val_t, &nv, &sa.values)))
    return s;
  if (nv != sa.n_keys) return im_fail(im, KILN_ERR_MODEL, "%lld keys but %lld values", (long long)sa.n_keys, (long long)nv);
  /* the default: default_tensor, else default_<type> by the values' type, else ONNX's */
  static const char *const unused = "_Unused";
  static const int64_t minus_one = -1;
  static const float neg_zero = -0.0f;
  const Onnx__AttributeProto *da = im_attr(im, "default_tensor");
  OnnxTensor dv;
  float f;
  int64_t i;
  if (da && da->t) {
    if ((s = im_tensor(im, da->t, &dv))) return s;
    if (dv.numel != 1 || dv.dtype != sa.val_t)
      return im_fail(im, KILN_ERR_MODEL, "default_tensor must be one %s", kiln_dtype_name(sa.val_t));
    sa.dflt = dv.data;
  } else if (sa.val_t == KILN_STRING) {
    const char **d = arena_alloc(&im->tmp, sizeof *d);
    if (!d) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory");
    *d = im_attr_s(im, "default_string", unused);
    sa.dflt = d;
  } else if (sa.val_t == KILN_I64) {
    i = im_attr_i(im, "default_int64", minus_one);
    sa.dflt = &i;
  } else if (sa.val_t == KILN_F32) {
    f = im_attr_f(im, "default_float", neg_zero);
    sa.dflt = &f;
  } else {
    return im_fail(im, KILN_ERR_MODEL, "values of %s need a default_tensor", kiln_dtype_name(sa.val_t));
  }
  Attr a = { 0 };
  a.str = &sa;
  return add(im, OP_LABEL_ENCODE, 1, ins, &a, &outs[0]);
}

/* ---- the table ---- */

static const struct Rule { const char *name; RuleFn fn; int op; } rules[] = {
  { "Neg", r_unary, OP_NEG }, { "Abs", r_unary, OP_ABS }, { "Exp", r_unary, OP_EXP }, { "Log", r_unary, OP_LOG },
  { "Sqrt", r_unary, OP_SQRT }, { "Reciprocal", r_unary, OP_RECIPROCAL }, { "Tanh", r_unary, OP_TANH },
  { "Sigmoid", r_unary, OP_SIGMOID }, { "Relu", r_unary, OP_RELU }, { "Erf", r_unary, OP_ERF },
  { "Sin", r_unary, OP_SIN }, { "Cos", r_unary, OP_COS }, { "Floor", r_unary, OP_FLOOR }, { "Ceil", r_unary, OP_CEIL },
  { "Round", r_unary, OP_ROUND }, { "Sign", r_unary, OP_SIGN }, { "IsNaN", r_unary, OP_ISNAN }, { "Not", r_unary, OP_NOT },
  { "BitwiseNot", r_unary, OP_NOT },  /* kiln's not is bitwise on integers */
  { "Add", r_binary, OP_ADD }, { "Sub", r_binary, OP_SUB }, { "Mul", r_binary, OP_MUL }, { "Div", r_binary, OP_DIV },
  { "Pow", r_binary, OP_POW }, { "Mod", r_binary, OP_MOD }, { "BitShift", r_binary, OP_SHL },
  { "Equal", r_binary, OP_EQ }, { "Less", r_binary, OP_LT }, { "Greater", r_binary, OP_GT },
  { "LessOrEqual", r_binary, OP_LE }, { "GreaterOrEqual", r_binary, OP_GE },
  { "And", r_binary, OP_AND }, { "Or", r_binary, OP_OR }, { "Xor", r_binary, OP_XOR },
  { "BitwiseAnd", r_binary, OP_AND }, { "BitwiseOr", r_binary, OP_OR }, { "BitwiseXor", r_binary, OP_XOR },
  { "Sum", r_variadic, -1 }, { "Mean", r_variadic, -1 }, { "Max", r_variadic, OP_MAX }, { "Min", r_variadic, OP_MIN },
  { "Where", r_where, 0 }, { "Cast", r_cast, 0 }, { "CastLike", r_cast, 0 },
  { "Identity", r_identity, 0 }, { "Dropout", r_identity, 0 }, { "Clip", r_clip, 0 },
  { "LeakyRelu", r_activation, 0 }, { "PRelu", r_activation, 0 }, { "Elu", r_activation, 0 },
  { "Selu", r_activation, 0 }, { "HardSigmoid", r_activation, 0 }, { "HardSwish", r_activation, 0 },
  { "Softplus", r_activation, 0 }, { "Mish", r_activation, 0 }, { "Softsign", r_activation, 0 },
  { "ThresholdedRelu", r_activation, 0 }, { "Celu", r_activation, 0 }, { "Shrink", r_activation, 0 },
  { "Swish", r_activation, 0 }, { "Gelu", r_activation, 0 }, { "Tan", r_activation, 0 }, { "Sinh", r_activation, 0 },
  { "Cosh", r_activation, 0 }, { "Asinh", r_activation, 0 }, { "Acosh", r_activation, 0 },
  { "Atanh", r_activation, 0 }, { "IsInf", r_activation, 0 }, { "Atan", r_activation, 0 }, { "Asin", r_activation, 0 },
  { "Acos", r_activation, 0 },
  { "Reshape", r_reshape, 0 }, { "Flatten", r_flatten, 0 }, { "Squeeze", r_squeeze, 0 }, { "Unsqueeze", r_squeeze, 0 },
  { "Transpose", r_transpose, 0 }, { "Slice", r_slice, 0 }, { "Concat", r_concat, 0 }, { "Split", r_split, 0 },
  { "Pad", r_pad, 0 }, { "Expand", r_expand, 0 }, { "Gather", r_gather, 0 }, { "Tile", r_tile, 0 },
  { "Shape", r_shape, 0 }, { "Size", r_shape, 0 }, { "ConstantOfShape", r_constant_of_shape, 0 },
  { "Range", r_range, 0 }, { "Constant", r_constant, 0 }, { "DepthToSpace", r_depth_space, 0 },
  { "SpaceToDepth", r_depth_space, 0 }, { "Trilu", r_trilu, 0 }, { "EyeLike", r_eyelike, 0 }, { "OneHot", r_onehot, 0 },
  { "ReduceSum", r_reduce, KILN_REDUCE_SUM }, { "ReduceMean", r_reduce, KILN_REDUCE_MEAN },
  { "ReduceMax", r_reduce, KILN_REDUCE_MAX }, { "ReduceMin", r_reduce, KILN_REDUCE_MIN },
  { "ReduceProd", r_reduce, KILN_REDUCE_PROD }, { "ReduceSumSquare", r_reduce, KILN_REDUCE_SUM_SQUARE },
  { "ReduceL1", r_reduce, KILN_REDUCE_L1 }, { "ReduceL2", r_reduce, KILN_REDUCE_L2 },
  { "ReduceLogSumExp", r_reduce, KILN_REDUCE_LOG_SUM_EXP }, { "ReduceLogSum", r_reduce, KILN_REDUCE_SUM },
  { "ArgMax", r_arg, OP_ARGMAX }, { "ArgMin", r_arg, OP_ARGMIN },
  { "MatMul", r_matmul, 0 }, { "Gemm", r_gemm, 0 }, { "Conv", r_conv, 0 },
  { "MaxPool", r_pool, KILN_POOL_MAX }, { "AveragePool", r_pool, KILN_POOL_AVG },
  { "GlobalMaxPool", r_pool, KILN_POOL_MAX }, { "GlobalAveragePool", r_pool, KILN_POOL_AVG },
  { "Softmax", r_softmax, 0 }, { "LogSoftmax", r_softmax, 1 }, { "LayerNormalization", r_layernorm, 0 },
  { "BatchNormalization", r_batchnorm, 0 }, { "InstanceNormalization", r_instancenorm, 0 },
  { "MeanVarianceNormalization", r_mvn, 0 }, { "RMSNormalization", r_rmsnorm, 0 },
  { "LpNormalization", r_lpnorm, 0 }, { "GroupNormalization", r_groupnorm, 0 },
  { "GatherElements", r_gather_elements, 0 }, { "NegativeLogLikelihoodLoss", r_nll, 0 },
  { "SoftmaxCrossEntropyLoss", r_sce, 0 }, { "Hardmax", r_hardmax, 0 }, { "CumSum", r_cumsum, 0 },
  { "DequantizeLinear", r_dequantize, 0 }, { "QuantizeLinear", r_quantize, 0 },
  { "CenterCropPad", r_center_crop_pad, 0 }, { "LpPool", r_pool, KILN_POOL_AVG },
  { "SequenceEmpty", r_sequence, 0 }, { "SequenceConstruct", r_sequence, 0 }, { "SequenceLength", r_sequence, 0 },
  { "SequenceAt", r_sequence, 0 }, { "SequenceInsert", r_sequence, 0 }, { "SequenceErase", r_sequence, 0 },
  { "ConcatFromSequence", r_sequence, 0 }, { "SplitToSequence", r_split_to_sequence, 0 },
  { "Attention", r_attention, 0 }, { "Resize", r_resize, 0 }, { "Upsample", r_resize, 0 },
  { "ConvTranspose", r_conv_transpose, 0 }, { "If", r_if, 0 }, { "Loop", r_loop, 0 }, { "Scan", r_scan, 0 },
  { "ScatterElements", r_scatter, 0 }, { "Scatter", r_scatter, 0 }, { "ScatterND", r_scatter, 0 },
  { "GatherND", r_gather_nd, 0 }, { "Compress", r_compress, 0 }, { "HannWindow", r_window, 0 },
  { "HammingWindow", r_window, 0 }, { "BlackmanWindow", r_window, 0 }, { "AffineGrid", r_affine_grid, 0 },
  { "CumProd", r_cumsum, 0 }, { "GridSample", r_grid_sample, 0 }, { "DFT", r_dft, 0 }, { "Col2Im", r_col2im, 0 },
  { "LRN", r_lrn, 0 }, { "ReverseSequence", r_reverse_sequence, 0 }, { "Einsum", r_einsum, 0 },
  { "RNN", r_rnn, 0 }, { "GRU", r_rnn, 0 }, { "LSTM", r_rnn, 0 }, { "RotaryEmbedding", r_rotary, 0 },
  { "MatMulInteger", r_matmul_integer, 0 }, { "QLinearMatMul", r_matmul_integer, 0 },
  { "ConvInteger", r_conv_integer, 0 }, { "QLinearConv", r_conv_integer, 0 },
  { "DynamicQuantizeLinear", r_dynamic_quantize, 0 }, { "SwiGLU", r_swiglu, 0 }, { "Det", r_det, 0 }, { "MaxUnpool", r_max_unpool, 0 }, { "TensorScatter", r_tensor_scatter, 0 },
  { "StringNormalizer", r_string_normalizer, 0 }, { "StringConcat", r_string_concat, 0 },
  { "StringSplit", r_string_split, 0 }, { "RegexFullMatch", r_regex_full_match, 0 },
};

kiln_status im_node(Importer *im, const char *op, int n_in, const int *ins, int n_out, int *outs) {
  for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
    if (strcmp(rules[i].name, op)) continue;
    Call c = { n_in, ins, n_out, outs, rules[i].op, op };
    return rules[i].fn(im, &c);
  }
  return im_fail(im, KILN_ERR_UNSUPPORTED, "operator %s is not supported", op);
}
