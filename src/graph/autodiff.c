/*
 * autodiff — reverse-mode differentiation as a graph -> graph transform.
 *
 * Takes a graph, a scalar loss and the tensors to differentiate against; appends the
 * backward graph to the same graph and hands back one gradient tensor per wrt tensor.
 * Every vector-Jacobian rule below is written with graph_add over ops.def only, so the
 * backward pass is lowered, fused and compiled exactly like a forward pass: there is no
 * scatter, no opaque kernel and no host code in a gradient.
 *
 * How: tensors that depend on a wrt tensor are marked in one forward sweep; the adjoint
 * of the loss is seeded with ones; nodes are then visited in reverse topological order,
 * and each node whose output has an adjoint adds its rule's contribution to the adjoint
 * of every input that needs one (contributions add up with ADD). Broadcasting operands
 * get their contribution reduce-summed back to their own shape (sum_to).
 *
 * Rules worth knowing (the documented choices):
 *   relu       subgradient 0 at x == 0 (as PyTorch).
 *   abs        sign(x): 0 at x == 0.
 *   floor, ceil, round, sign, comparisons, logic, argmax/argmin: no gradient (zero).
 *   max/min (binary)  on a tie a == b each operand gets half of dy (as PyTorch; this is
 *              also what a central difference measures at a tie).
 *   reduce_max/min, max_pool  the gradient is split equally among every position equal
 *              to the extremum of its reduction group / pooling window (for two tied
 *              positions that is again what a central difference measures).
 *   reduce_prod  exact with zeros: the product of the other elements.
 *   pow        d/db uses log(a) where a > 0 and 0 elsewhere.
 * Index-moving gradients: slice -> flip (for negative steps), zero-interleave through
 * reshape+pad+reshape (for steps > 1), then pad; pooling -> one strided slice per window
 * offset, masked and scattered back through the slice adjoint; conv -> dx is a conv of
 * the zero-interleaved, padded dy with the flipped, group-transposed weights; dw is one
 * matmul over im2col columns built from strided slices (group 1, small kernels), else a
 * conv of x (batch and channels swapped) with dy as the kernel (stride and dilation
 * swapped); gather -> a one-hot (comparison with an iota) matmul. Backward nodes whose
 * inputs are all constants are folded (graph_fold), so the seed costs no kernel.
 */
#include "graph.h"

#include <math.h>
#include <string.h>

/* Test hook (see graph.h): the rule of this op kind is deliberately wrong when >= 0. */
static int broken_rule = -1;

void graph_grad_break_rule(int op) { broken_rule = op; }

/* The state of one graph_grad call. Helpers take and return tensor ids; after the first
 * failure every helper returns -1 and st keeps the first error, so rules read straight. */
typedef struct Ad {
  Graph *g;
  kiln_status st;
  int *adj;       /* adjoint of each tensor of the forward graph, -1: none yet */
  bool *needs;    /* forward tensor depends on a wrt tensor (and is float) */
} Ad;

/* ---- small builders ------------------------------------------------------------ */

static const Tensor *tensor(const Ad *a, int t) { return &a->g->tensors[t]; }

static kiln_dtype dtype_of(const Ad *a, int t) { return tensor(a, t)->dtype; }

static int add_node(Ad *a, OpKind op, int n_in, const int *in, const Attr *at) {
  if (a->st != KILN_OK) return -1;
  for (int i = 0; i < n_in; i++)
    if (in[i] < 0) return -1;
  int out = -1;
  a->st = graph_add(a->g, op, n_in, in, at, &out);
  /* constant chains (the seed, scale factors) become constants, not one-element kernels;
   * ops that grow a constant stay ops, so the program reads the small one */
  if (a->st == KILN_OK && op != OP_EXPAND && op != OP_TILE && op != OP_PAD) a->st = graph_fold(a->g, out);
  return a->st == KILN_OK ? out : -1;
}

static int op1(Ad *a, OpKind op, int x) {
  Attr at = {0};
  return add_node(a, op, 1, &x, &at);
}

static int op2(Ad *a, OpKind op, int x, int y) {
  Attr at = {0};
  int in[2] = {x, y};
  return add_node(a, op, 2, in, &at);
}

static int constant(Ad *a, kiln_dtype t, int rank, const int64_t *shape, const double *v, int64_t n);

static int scalar(Ad *a, kiln_dtype t, double v) {
  int64_t none[1] = {1};
  return constant(a, t, 0, none, &v, 1);
}

static int add(Ad *a, int x, int y) { return op2(a, OP_ADD, x, y); }
static int sub(Ad *a, int x, int y) { return op2(a, OP_SUB, x, y); }
static int mul(Ad *a, int x, int y) { return op2(a, OP_MUL, x, y); }
static int dvd(Ad *a, int x, int y) { return op2(a, OP_DIV, x, y); }
static int neg(Ad *a, int x) { return op1(a, OP_NEG, x); }

/* x * c for a constant c, in x's dtype. */
static int mulc(Ad *a, int x, double c) {
  if (x < 0) return -1;
  return mul(a, x, scalar(a, dtype_of(a, x), c));
}

static int addc(Ad *a, int x, double c) {
  if (x < 0) return -1;
  return add(a, x, scalar(a, dtype_of(a, x), c));
}

static int cast(Ad *a, int x, kiln_dtype to) {
  if (x < 0) return -1;
  if (dtype_of(a, x) == to) return x;
  Attr at = {0};
  at.to = to;
  return add_node(a, OP_CAST, 1, &x, &at);
}

/* A comparison result (bool) as 0/1 in dtype t. */
static int mask(Ad *a, OpKind cmp, int x, int y, kiln_dtype t) { return cast(a, op2(a, cmp, x, y), t); }

static int where(Ad *a, int c, int x, int y) {
  Attr at = {0};
  int in[3] = {c, x, y};
  return add_node(a, OP_WHERE, 3, in, &at);
}

/* x given a new shape by op (reshape or expand); x itself when it already has it. */
static int reshaped(Ad *a, OpKind op, int x, int rank, const int64_t *shape) {
  if (x < 0) return -1;
  const Tensor *t = tensor(a, x);
  if (t->rank == rank && !memcmp(t->shape, shape, (size_t)rank * sizeof *shape)) return x;
  Attr at = {0};
  at.shape_rank = rank;
  memcpy(at.shape, shape, (size_t)rank * sizeof *shape);
  return add_node(a, op, 1, &x, &at);
}

static int reshape(Ad *a, int x, int rank, const int64_t *shape) { return reshaped(a, OP_RESHAPE, x, rank, shape); }
static int expand(Ad *a, int x, int rank, const int64_t *shape) { return reshaped(a, OP_EXPAND, x, rank, shape); }

static int transpose(Ad *a, int x, int rank, const int *perm) {
  bool identity = true;
  for (int i = 0; i < rank; i++) identity &= perm[i] == i;
  if (x < 0 || identity) return x;
  Attr at = {0};
  memcpy(at.perm, perm, (size_t)rank * sizeof *perm);
  return add_node(a, OP_TRANSPOSE, 1, &x, &at);
}

/* Constant-zero pad (negative entries crop): pads[r] begin, pads[rank + r] end. */
static int pad0(Ad *a, int x, const int64_t *pads) {
  if (x < 0) return -1;
  int rank = tensor(a, x)->rank;
  bool none = true;
  for (int i = 0; i < 2 * rank; i++) none &= pads[i] == 0;
  if (none) return x;
  Attr at = {0};
  memcpy(at.pads, pads, 2 * (size_t)rank * sizeof *pads);
  at.pad_mode = KILN_PAD_CONSTANT;
  at.value = 0;
  return add_node(a, OP_PAD, 1, &x, &at);
}

/* out[i] = x[starts + i*steps] over every axis, out dims given. */
static int slice(Ad *a, int x, const int64_t *starts, const int64_t *steps, const int64_t *out_shape) {
  if (x < 0) return -1;
  const Tensor *t = tensor(a, x);
  int rank = t->rank;
  bool identity = true;
  for (int r = 0; r < rank; r++) identity &= starts[r] == 0 && steps[r] == 1 && out_shape[r] == t->shape[r];
  if (identity) return x;
  Attr at = {0};
  at.shape_rank = rank;
  memcpy(at.shape, out_shape, (size_t)rank * sizeof *out_shape);
  memcpy(at.starts, starts, (size_t)rank * sizeof *starts);
  memcpy(at.steps, steps, (size_t)rank * sizeof *steps);
  return add_node(a, OP_SLICE, 1, &x, &at);
}

/* Sum over axes (sorted, unique). */
static int reduce_sum(Ad *a, int x, int n_axes, const int *axes, int keepdims) {
  if (x < 0) return -1;
  if (n_axes == 0) return x;
  Attr at = {0};
  at.n_axes = n_axes;
  memcpy(at.axes, axes, (size_t)n_axes * sizeof *axes);
  at.keepdims = keepdims;
  return add_node(a, OP_REDUCE_SUM, 1, &x, &at);
}

/* Reduce-sums x (a broadcast of shape) back to shape: leading extra axes and axes
 * where shape has 1 and x does not. */
static int sum_to(Ad *a, int x, int rank, const int64_t *shape) {
  if (x < 0) return -1;
  const Tensor *t = tensor(a, x);
  int xr = t->rank, lead = xr - rank, n = 0, axes[KILN_MAX_RANK];
  KILN_ASSERT(lead >= 0);
  for (int i = 0; i < xr; i++)
    if (i < lead || (shape[i - lead] == 1 && t->shape[i] != 1)) axes[n++] = i;
  /* when only leading axes go, keepdims 0 gives the target shape with no reshape, so a
   * consumer (a bias update) can share the reduction's iteration space */
  bool leading_only = n == 0 || axes[n - 1] < lead;
  return reshape(a, reduce_sum(a, x, n, axes, !leading_only), rank, shape);
}

static int matmul(Ad *a, int x, int y) { return op2(a, OP_MATMUL, x, y); }

static int conv(Ad *a, int x, int w, const kiln_conv_params *p) {
  Attr at = {0};
  at.conv = *p;
  int in[2] = {x, w};
  return add_node(a, OP_CONV, 2, in, &at);
}

/* A constant tensor from f64 values (converted to t). */
static int constant(Ad *a, kiln_dtype t, int rank, const int64_t *shape, const double *v, int64_t n) {
  if (a->st != KILN_OK) return -1;
  int64_t bytes;
  if (!size_mul(n, (int64_t)kiln_dtype_size(t), &bytes)) {
    a->st = kiln_fail(KILN_ERR_NO_MEMORY, "autodiff: constant of %lld elements overflows", (long long)n);
    return -1;
  }
  void *buf = kiln_malloc((size_t)bytes);
  if (!buf) {
    a->st = kiln_fail(KILN_ERR_NO_MEMORY, "autodiff: out of memory for a constant");
    return -1;
  }
  for (int64_t i = 0; i < n; i++) dtype_store_f64(t, buf, i, v[i]);
  int out = -1;
  a->st = graph_leaf(a->g, T_CONST, NULL, t, rank, shape, buf, &out);
  kiln_free(buf);
  return a->st == KILN_OK ? out : -1;
}

/* ---- shared index-moving adjoints ------------------------------------------------ */

/*
 * Adjoint of out[i] = x[starts + i*steps] (x of in_shape): a tensor of in_shape holding
 * dy at every position read, zero elsewhere. Negative steps are flipped to positive with
 * a step -1 slice; steps > 1 interleave zeros by reshaping [n] -> [n, 1], padding the new
 * axis to s and reshaping to [n*s]; one pad then places the block at its start.
 */
static int slice_adjoint(Ad *a, int dy, int rank, const int64_t *in_shape, const int64_t *starts,
                         const int64_t *steps) {
  if (dy < 0) return -1;
  int64_t n[KILN_MAX_RANK], st[KILN_MAX_RANK], sp[KILN_MAX_RANK];
  int64_t fstart[KILN_MAX_RANK], fstep[KILN_MAX_RANK];
  memcpy(n, tensor(a, dy)->shape, (size_t)rank * sizeof *n);
  bool flip = false;
  for (int r = 0; r < rank; r++) {
    st[r] = starts[r], sp[r] = n[r] > 1 ? steps[r] : 1;
    fstart[r] = 0, fstep[r] = 1;
    if (sp[r] < 0) {  /* reversed read: flip dy, then it is a forward read from the last position */
      fstart[r] = n[r] - 1, fstep[r] = -1, flip = true;
      st[r] = starts[r] + (n[r] - 1) * sp[r];
      sp[r] = -sp[r];
    }
  }
  if (flip) dy = slice(a, dy, fstart, fstep, n);
  for (int r = 0; r < rank && dy >= 0; r++) {
    if (sp[r] == 1) continue;
    if (rank + 1 > KILN_MAX_RANK) {
      a->st = kiln_fail(KILN_ERR_UNSUPPORTED, "autodiff: strided slice gradient of a rank-%d tensor", rank);
      return -1;
    }
    int64_t split[KILN_MAX_RANK], pads[2 * KILN_MAX_RANK] = {0};
    for (int i = 0, j = 0; i < rank; i++) {
      split[j++] = n[i];
      if (i == r) split[j++] = 1;
    }
    pads[(rank + 1) + r + 1] = sp[r] - 1;  /* end of the new unit axis */
    dy = pad0(a, reshape(a, dy, rank + 1, split), pads);
    n[r] *= sp[r];
    dy = reshape(a, dy, rank, n);
  }
  int64_t pads[2 * KILN_MAX_RANK];
  for (int r = 0; r < rank; r++) pads[r] = st[r], pads[rank + r] = in_shape[r] - st[r] - n[r];
  return pad0(a, dy, pads);
}

/* ---- rules ------------------------------------------------------------------------ */

/* Adds contribution c (already of t's shape) to the adjoint of t. */
static void accumulate(Ad *a, int t, int c) {
  if (c < 0 || a->st != KILN_OK) return;
  const Tensor *tt = tensor(a, t), *ct = tensor(a, c);
  if (tt->rank != ct->rank || memcmp(tt->shape, ct->shape, (size_t)tt->rank * sizeof tt->shape[0]) ||
      tt->dtype != ct->dtype) {
    a->st = kiln_fail(KILN_ERR_UNSUPPORTED, "autodiff: gradient of '%s' came out with the wrong shape or dtype",
                      tt->name);
    return;
  }
  a->adj[t] = a->adj[t] < 0 ? c : add(a, a->adj[t], c);
}

/* Contribution dy (broadcast shape) to operand t, summed down to t's shape. */
static void accumulate_to(Ad *a, int t, int c) {
  if (c < 0 || a->st != KILN_OK) return;
  int64_t shape[KILN_MAX_RANK];
  int rank = tensor(a, t)->rank;
  memcpy(shape, tensor(a, t)->shape, sizeof shape);
  accumulate(a, t, sum_to(a, c, rank, shape));
}

/* d/dx of a unary op, times dy; x the input, y the output. -1 with st OK: no gradient. */
static int unary_vjp(Ad *a, OpKind op, int x, int y, int dy) {
  kiln_dtype t = dtype_of(a, x);
  switch (op) {
  case OP_NEG: return neg(a, dy);
  case OP_ABS: return mul(a, dy, op1(a, OP_SIGN, x));
  case OP_EXP: return mul(a, dy, y);
  case OP_LOG: return dvd(a, dy, x);
  case OP_SQRT: return dvd(a, dy, mulc(a, y, 2));
  case OP_RSQRT: return mul(a, dy, mulc(a, mul(a, y, mul(a, y, y)), -0.5));  /* -x^-3/2 / 2 */
  case OP_RECIPROCAL: return neg(a, mul(a, dy, mul(a, y, y)));
  case OP_TANH: return mul(a, dy, sub(a, scalar(a, t, 1), mul(a, y, y)));
  case OP_SIGMOID: return mul(a, dy, mul(a, y, sub(a, scalar(a, t, 1), y)));
  case OP_RELU: return where(a, op2(a, OP_GT, x, scalar(a, t, 0)), dy, scalar(a, t, 0));
  case OP_GELU_ERF: {  /* Phi(x) + x phi(x) */
    int cdf = mulc(a, addc(a, op1(a, OP_ERF, mulc(a, x, M_SQRT1_2)), 1), 0.5);
    int pdf = mulc(a, op1(a, OP_EXP, mulc(a, mul(a, x, x), -0.5)), 0.5 * M_2_SQRTPI * M_SQRT1_2);
    return mul(a, dy, add(a, cdf, mul(a, x, pdf)));
  }
  case OP_GELU_TANH: {  /* 0.5(1+th) + 0.5 x (1-th^2) c (1 + 3k x^2), th = tanh(c (x + k x^3)) */
    const double c = sqrt(2 / M_PI), k = 0.044715;
    int x2 = mul(a, x, x);
    int th = op1(a, OP_TANH, mulc(a, mul(a, x, addc(a, mulc(a, x2, k), 1)), c));
    int left = mulc(a, addc(a, th, 1), 0.5);
    int sech2 = sub(a, scalar(a, t, 1), mul(a, th, th));
    int right = mul(a, mulc(a, mul(a, x, sech2), 0.5 * c), addc(a, mulc(a, x2, 3 * k), 1));
    return mul(a, dy, add(a, left, right));
  }
  case OP_ERF: return mul(a, dy, mulc(a, op1(a, OP_EXP, neg(a, mul(a, x, x))), M_2_SQRTPI));
  case OP_SIN: return mul(a, dy, op1(a, OP_COS, x));
  case OP_COS: return neg(a, mul(a, dy, op1(a, OP_SIN, x)));
  default: return -1;  /* floor, ceil, round, sign: zero almost everywhere */
  }
}

/* trunc(z) = sign(z) * floor(|z|), from ops in the set. */
static int trunc_of(Ad *a, int z) { return mul(a, op1(a, OP_SIGN, z), op1(a, OP_FLOOR, op1(a, OP_ABS, z))); }

/* Binary elementwise: contributions in the broadcast shape for a (*ga) and b (*gb). */
static void binary_vjp(Ad *a, OpKind op, int x, int y, int out, int dy, int *ga, int *gb) {
  kiln_dtype t = dtype_of(a, x);
  *ga = *gb = -1;
  switch (op) {
  case OP_ADD: *ga = dy, *gb = dy; break;
  case OP_SUB: *ga = dy, *gb = neg(a, dy); break;
  case OP_MUL: *ga = mul(a, dy, y), *gb = mul(a, dy, x); break;
  case OP_DIV: *ga = dvd(a, dy, y), *gb = neg(a, dvd(a, mul(a, dy, out), y)); break;
  case OP_POW: {
    int zero = scalar(a, t, 0);
    *ga = mul(a, dy, mul(a, y, op2(a, OP_POW, x, addc(a, y, -1))));
    int pos = op2(a, OP_GT, x, zero);
    int logx = op1(a, OP_LOG, where(a, pos, x, scalar(a, t, 1)));  /* log(a) only where a > 0 */
    *gb = mul(a, dy, where(a, pos, mul(a, out, logx), zero));
    break;
  }
  case OP_MAX: case OP_MIN: {  /* the winner takes dy; a tie splits it in halves */
    OpKind win = op == OP_MAX ? OP_GT : OP_LT;
    int half = mulc(a, mask(a, OP_EQ, x, y, t), 0.5);
    *ga = mul(a, dy, add(a, mask(a, win, x, y, t), half));
    *gb = mul(a, dy, add(a, mask(a, win, y, x, t), half));
    break;
  }
  case OP_MOD:   /* a - floor(a/b) b */
    *ga = dy, *gb = neg(a, mul(a, dy, op1(a, OP_FLOOR, dvd(a, x, y))));
    break;
  case OP_FMOD:  /* a - trunc(a/b) b */
    *ga = dy, *gb = neg(a, mul(a, dy, trunc_of(a, dvd(a, x, y))));
    break;
  default: break;  /* comparisons, logic, shifts: no gradient */
  }
}

/* Fills keep[] with x's shape where reduced axes are 1. */
static void keep_shape(const Tensor *x, const Attr *at, int64_t *keep) {
  memcpy(keep, x->shape, sizeof x->shape);
  for (int i = 0; i < at->n_axes; i++) keep[at->axes[i]] = 1;
}

static int reduce_vjp(Ad *a, const Node *n, int dy) {
  int x = n->in[0], rank = tensor(a, x)->rank;
  int64_t xs[KILN_MAX_RANK], keep[KILN_MAX_RANK];
  memcpy(xs, tensor(a, x)->shape, sizeof xs);
  keep_shape(tensor(a, x), &n->attr, keep);
  kiln_dtype t = dtype_of(a, x);
  int dyk = reshape(a, dy, rank, keep);
  switch (n->op) {
  case OP_REDUCE_SUM: return expand(a, dyk, rank, xs);
  case OP_REDUCE_MAX: case OP_REDUCE_MIN: {  /* split among every position equal to the extremum */
    int m = mask(a, OP_EQ, x, reshape(a, n->out, rank, keep), t);
    int count = reduce_sum(a, m, n->attr.n_axes, n->attr.axes, 1);
    return mul(a, m, dvd(a, dyk, count));
  }
  case OP_REDUCE_PROD: {  /* product of the others, exact when zeros are present */
    int zero = scalar(a, t, 0), one = scalar(a, t, 1);
    int is0 = op2(a, OP_EQ, x, zero);
    Attr at = n->attr;
    at.keepdims = 1;
    int nz_in = where(a, is0, one, x);
    int prod_nz = add_node(a, OP_REDUCE_PROD, 1, &nz_in, &at);
    int zeros = reduce_sum(a, cast(a, is0, t), at.n_axes, at.axes, 1);
    int no_zero = op2(a, OP_EQ, zeros, zero), one_zero = op2(a, OP_EQ, zeros, one);
    int others = where(a, no_zero, dvd(a, prod_nz, x), where(a, one_zero, where(a, is0, prod_nz, zero), zero));
    return mul(a, others, dyk);
  }
  default: return -1;
  }
}

/* Matmul, numpy semantics: 1-D operands are promoted, batch dims broadcast. */
static void matmul_vjp(Ad *a, const Node *n, int dy) {
  int x = n->in[0], y = n->in[1];
  Tensor xt = *tensor(a, x), yt = *tensor(a, y), ot = *tensor(a, n->out);
  int64_t xs[KILN_MAX_RANK], ys[KILN_MAX_RANK], os[KILN_MAX_RANK];
  int xr = xt.rank, yr = yt.rank, orank = ot.rank;
  memcpy(xs, xt.shape, sizeof xs), memcpy(ys, yt.shape, sizeof ys), memcpy(os, ot.shape, sizeof os);
  if (xr == 1) xs[1] = xs[0], xs[0] = 1, xr = 2;
  if (yr == 1) ys[1] = 1, yr = 2;
  /* the output as if no operand had been 1-D: batch.., m, n */
  int nb = orank - (xt.rank != 1) - (yt.rank != 1);
  os[nb + 1] = yt.rank == 1 ? 1 : ot.shape[orank - 1];
  os[nb] = xt.rank == 1 ? 1 : ot.shape[nb];
  orank = nb + 2;
  int x2 = reshape(a, x, xr, xs), y2 = reshape(a, y, yr, ys), dy2 = reshape(a, dy, orank, os);
  int px[KILN_MAX_RANK], py[KILN_MAX_RANK];
  for (int i = 0; i < KILN_MAX_RANK; i++) px[i] = py[i] = i;
  px[xr - 1] = xr - 2, px[xr - 2] = xr - 1;
  py[yr - 1] = yr - 2, py[yr - 2] = yr - 1;
  if (a->needs[x]) {
    int g = sum_to(a, matmul(a, dy2, transpose(a, y2, yr, py)), xr, xs);
    accumulate(a, x, reshape(a, g, xt.rank, xt.shape));
  }
  if (a->needs[y]) {
    int g = sum_to(a, matmul(a, transpose(a, x2, xr, px), dy2), yr, ys);
    accumulate(a, y, reshape(a, g, yt.rank, yt.shape));
  }
}

/*
 * Conv: x [N,C,S..], w [M,C/G,K..], y [N,M,O..], y[o] = sum x[o*s + k*d - pb] w[k].
 */
static int conv_dx(Ad *a, const Node *n, int dy) {
  const kiln_conv_params *p = &n->attr.conv;
  int sp = p->spatial, rank = 2 + sp;
  Tensor xt = *tensor(a, n->in[0]), wt = *tensor(a, n->in[1]), yt = *tensor(a, n->out);
  int64_t G = p->group, M = wt.shape[0], Cg = wt.shape[1], Mg = M / G;
  /* dy zero-interleaved by the stride, then padded so a stride-1 conv lands on x */
  int64_t ones[KILN_MAX_RANK], zstart[KILN_MAX_RANK] = {0}, inter[KILN_MAX_RANK];
  for (int r = 0; r < rank; r++) ones[r] = 1;
  memcpy(inter, yt.shape, sizeof inter);
  for (int i = 0; i < sp; i++) ones[2 + i] = p->strides[i], inter[2 + i] = yt.shape[2 + i] * p->strides[i];
  int d = slice_adjoint(a, dy, rank, inter, zstart, ones);
  int64_t pads[2 * KILN_MAX_RANK] = {0};
  for (int i = 0; i < sp; i++) {
    int64_t keff = (wt.shape[2 + i] - 1) * p->dilations[i] + 1;
    pads[2 + i] = keff - 1 - p->pads[i];
    pads[rank + 2 + i] = xt.shape[2 + i] + keff - 1 - pads[2 + i] - inter[2 + i];
  }
  d = pad0(a, d, pads);
  /* weights [G*Mg, Cg, K..] -> [G, Cg, Mg, K..] -> [C, Mg, K..], spatially flipped */
  int64_t s5[KILN_MAX_RANK] = {G, Mg, Cg}, s3[KILN_MAX_RANK] = {G * Cg, Mg};
  int perm[KILN_MAX_RANK] = {0, 2, 1};
  int64_t fst[KILN_MAX_RANK] = {0}, fsp[KILN_MAX_RANK] = {1, 1}, fsh[KILN_MAX_RANK] = {G * Cg, Mg};
  for (int i = 0; i < sp; i++) {
    s5[3 + i] = s3[2 + i] = fsh[2 + i] = wt.shape[2 + i];
    perm[3 + i] = 3 + i;
    fst[2 + i] = wt.shape[2 + i] - 1, fsp[2 + i] = -1;
  }
  int w = reshape(a, n->in[1], 3 + sp, s5);
  w = reshape(a, transpose(a, w, 3 + sp, perm), rank, s3);
  w = slice(a, w, fst, fsp, fsh);
  kiln_conv_params q = {.spatial = sp, .group = G};
  for (int i = 0; i < sp; i++) q.strides[i] = 1, q.dilations[i] = p->dilations[i];
  return conv(a, d, w, &q);
}

/* Largest im2col matrix (elements) conv_dw builds; above it dw is one conv instead. */
#define IM2COL_MAX_ELEMS ((int64_t)1 << 24)
#define IM2COL_MAX_TAPS 27

/*
 * dw as one matmul (group 1): cols[(n,o..), (c,k..)] = x_pad[n, c, o*s + k*d] gathered by
 * one strided slice per kernel tap and a concat, then dw^T[(c,k..), m] = cols^T dy. Compared
 * with the conv below, whose outputs are only [C, M, K..] with a long reduction each, the
 * matmul's rows are long, which code generators vectorise well.
 */
static int conv_dw_im2col(Ad *a, const Node *n, int dy) {
  const kiln_conv_params *p = &n->attr.conv;
  int sp = p->spatial, rank = 2 + sp;
  Tensor xt = *tensor(a, n->in[0]), wt = *tensor(a, n->in[1]), yt = *tensor(a, n->out);
  int64_t N = xt.shape[0], C = xt.shape[1], M = wt.shape[0], O = 1, T = 1;
  int64_t pads[2 * KILN_MAX_RANK] = {0}, starts[KILN_MAX_RANK] = {0}, steps[KILN_MAX_RANK] = {1, 1};
  int64_t tap_shape[KILN_MAX_RANK + 1];
  for (int i = 0; i < sp; i++) {
    int64_t need = (yt.shape[2 + i] - 1) * p->strides[i] + (wt.shape[2 + i] - 1) * p->dilations[i] + 1;
    pads[2 + i] = p->pads[i];
    pads[rank + 2 + i] = need - xt.shape[2 + i] - p->pads[i];  /* negative: rows no window reads */
    steps[2 + i] = p->strides[i];
    O *= yt.shape[2 + i], T *= wt.shape[2 + i];
  }
  int xp = pad0(a, n->in[0], pads);
  int64_t sl_shape[KILN_MAX_RANK] = {N, C};
  tap_shape[0] = N, tap_shape[1] = C, tap_shape[2] = 1;
  for (int i = 0; i < sp; i++) tap_shape[3 + i] = sl_shape[2 + i] = yt.shape[2 + i];
  int taps[IM2COL_MAX_TAPS];
  for (int64_t k = 0; k < T; k++) {
    int64_t rem = k;
    for (int i = sp - 1; i >= 0; i--)
      starts[2 + i] = (rem % wt.shape[2 + i]) * p->dilations[i], rem /= wt.shape[2 + i];
    taps[k] = reshape(a, slice(a, xp, starts, steps, sl_shape), rank + 1, tap_shape);
  }
  int cols = T == 1 ? taps[0] : -1;
  if (T > 1 && a->st == KILN_OK) {
    Attr at = {0};
    at.axis = 2;
    cols = add_node(a, OP_CONCAT, (int)T, taps, &at);  /* [N, C, T, O..] */
  }
  /* cols^T [C*T, N*O] @ dy [N*O, M]: rows (c, tap) outer, M innermost, so the tap
   * selection is evaluated once per row and reduction step, not per output lane */
  int perm[KILN_MAX_RANK + 1] = {1, 2, 0};
  for (int i = 0; i < sp; i++) perm[3 + i] = 3 + i;
  int64_t cs[2] = {C * T, N * O}, ds[2] = {N * O, M}, rs[KILN_MAX_RANK] = {C};
  cols = reshape(a, transpose(a, cols, rank + 1, perm), 2, cs);
  int pk[KILN_MAX_RANK] = {0};
  for (int i = 0; i < sp; i++) pk[1 + i] = 2 + i;
  pk[1 + sp] = 1;
  int dyr = reshape(a, transpose(a, dy, rank, pk), 2, ds);  /* [N*O, M] */
  for (int i = 0; i < sp; i++) rs[1 + i] = wt.shape[2 + i];
  rs[1 + sp] = M;
  int r = reshape(a, matmul(a, cols, dyr), rank, rs);  /* [C, K.., M] */
  int back[KILN_MAX_RANK] = {sp + 1, 0};
  for (int i = 0; i < sp; i++) back[2 + i] = 1 + i;
  return transpose(a, r, rank, back);
}

static int conv_dw(Ad *a, const Node *n, int dy) {
  {
    const Tensor *xt = tensor(a, n->in[0]), *wt = tensor(a, n->in[1]), *yt = tensor(a, n->out);
    int64_t taps = 1, cols = xt->shape[0] * xt->shape[1];
    for (int i = 0; i < n->attr.conv.spatial; i++) taps *= wt->shape[2 + i], cols *= yt->shape[2 + i];
    if (n->attr.conv.group == 1 && taps <= IM2COL_MAX_TAPS && cols <= IM2COL_MAX_ELEMS / taps)
      return conv_dw_im2col(a, n, dy);
  }
  const kiln_conv_params *p = &n->attr.conv;
  int sp = p->spatial, rank = 2 + sp;
  Tensor xt = *tensor(a, n->in[0]), wt = *tensor(a, n->in[1]);
  int64_t G = p->group, N = xt.shape[0], C = xt.shape[1], Cg = C / G, M = wt.shape[0];
  /* x [N, G, Cg, S..] -> [Cg, G, N, S..] -> [Cg, G*N, S..]: channels become the batch */
  int64_t s4[KILN_MAX_RANK] = {N, G, Cg}, s3[KILN_MAX_RANK] = {Cg, G * N};
  int perm[KILN_MAX_RANK] = {2, 1, 0};
  for (int i = 0; i < sp; i++) s4[3 + i] = s3[2 + i] = xt.shape[2 + i], perm[3 + i] = 3 + i;
  int x = reshape(a, n->in[0], 3 + sp, s4);
  x = reshape(a, transpose(a, x, 3 + sp, perm), rank, s3);
  int pk[KILN_MAX_RANK] = {1, 0};
  for (int i = 0; i < sp; i++) pk[2 + i] = 2 + i;
  int k = transpose(a, dy, rank, pk);  /* [M, N, O..]: dy is the kernel */
  kiln_conv_params q = {.spatial = sp, .group = G};
  for (int i = 0; i < sp; i++) {
    q.strides[i] = p->dilations[i], q.dilations[i] = p->strides[i];
    q.pads[i] = p->pads[i], q.pads[sp + i] = p->pads[sp + i];
  }
  int r = conv(a, x, k, &q);  /* [Cg, M, K'..] with K' >= K */
  if (r < 0) return -1;
  int64_t z[KILN_MAX_RANK] = {0}, st[KILN_MAX_RANK], sh[KILN_MAX_RANK] = {Cg, M};
  for (int i = 0; i < rank; i++) st[i] = 1;
  for (int i = 0; i < sp; i++) sh[2 + i] = wt.shape[2 + i];
  return transpose(a, slice(a, r, z, st, sh), rank, pk);
}

/* Per-dim count of window taps inside [lo, hi) for output o (avg-pool divisors). */
static int64_t taps_inside(const kiln_pool_params *p, int i, int64_t o, int64_t lo, int64_t hi) {
  int64_t c = 0;
  for (int64_t k = 0; k < p->kernel[i]; k++) {
    int64_t pos = o * p->strides[i] + k * p->dilations[i] - p->pads[i];
    c += pos >= lo && pos < hi;
  }
  return c;
}

/* The avg-pool divisor of every output position, [O..]. */
static int pool_divisor(Ad *a, const kiln_pool_params *p, const Tensor *xt, const Tensor *yt) {
  int sp = p->spatial;
  int64_t n = 1;
  for (int i = 0; i < sp; i++) n *= yt->shape[2 + i];
  double *v = kiln_malloc((size_t)n * sizeof *v);
  if (!v) {
    a->st = kiln_fail(KILN_ERR_NO_MEMORY, "autodiff: out of memory for pool divisors");
    return -1;
  }
  for (int64_t f = 0; f < n; f++) {
    int64_t rem = f;
    double div = 1;
    for (int i = sp - 1; i >= 0; i--) {
      int64_t o = rem % yt->shape[2 + i], S = xt->shape[2 + i];
      rem /= yt->shape[2 + i];
      div *= p->count_include_pad ? (double)taps_inside(p, i, o, -p->pads[i], S + p->pads[sp + i])
                                  : (double)taps_inside(p, i, o, 0, S);
    }
    v[f] = div;
  }
  int c = constant(a, xt->dtype, sp, &yt->shape[2], v, n);
  kiln_free(v);
  return c;
}

/*
 * Pools: each window offset k reads x_pad at a strided slice, [N,C,O..]; the adjoint is
 * the sum over k of that slice's adjoint. max: a tap gets dy / ties where it equals the
 * window's max (ties = how many taps of the window do). avg: every tap gets dy / divisor.
 */
static int pool_vjp(Ad *a, const Node *n, int dy) {
  const kiln_pool_params *p = &n->attr.pool;
  int sp = p->spatial, rank = 2 + sp;
  Tensor xt = *tensor(a, n->in[0]), yt = *tensor(a, n->out);
  kiln_dtype t = xt.dtype;
  bool is_max = n->op == OP_MAX_POOL;
  int64_t pads[2 * KILN_MAX_RANK] = {0}, ps[KILN_MAX_RANK];
  memcpy(ps, xt.shape, sizeof ps);
  int64_t taps = 1;
  for (int i = 0; i < sp; i++) {  /* pad so every window (ceil mode too) is in range */
    int64_t need = (yt.shape[2 + i] - 1) * p->strides[i] + (p->kernel[i] - 1) * p->dilations[i] + 1;
    pads[2 + i] = p->pads[i];
    pads[rank + 2 + i] = need - xt.shape[2 + i] - p->pads[i];
    if (pads[rank + 2 + i] < p->pads[sp + i]) pads[rank + 2 + i] = p->pads[sp + i];
    ps[2 + i] += pads[2 + i] + pads[rank + 2 + i];
    taps *= p->kernel[i];
  }
  int xp = -1, count = -1, g = -1;
  if (is_max) {
    Attr at = {0};
    memcpy(at.pads, pads, sizeof at.pads);
    at.pad_mode = KILN_PAD_CONSTANT;
    at.value = -INFINITY;
    xp = add_node(a, OP_PAD, 1, &n->in[0], &at);
  } else {
    g = dvd(a, dy, pool_divisor(a, p, &xt, &yt));
  }
  int tap[64], masks[64];  /* max: slices and masks per tap (bounded below) */
  if (is_max && taps > 64) {
    a->st = kiln_fail(KILN_ERR_UNSUPPORTED, "autodiff: max-pool gradient with %lld taps (max 64)", (long long)taps);
    return -1;
  }
  int64_t starts[KILN_MAX_RANK] = {0}, steps[KILN_MAX_RANK];
  for (int r = 0; r < rank; r++) steps[r] = r < 2 ? 1 : p->strides[r - 2];
  for (int64_t k = 0; is_max && k < taps; k++) {
    int64_t rem = k;
    for (int i = sp - 1; i >= 0; i--) starts[2 + i] = (rem % p->kernel[i]) * p->dilations[i], rem /= p->kernel[i];
    tap[k] = slice(a, xp, starts, steps, yt.shape);
    masks[k] = mask(a, OP_EQ, tap[k], n->out, t);
    count = count < 0 ? masks[k] : add(a, count, masks[k]);
  }
  if (is_max) g = dvd(a, dy, count);
  int sum = -1;
  for (int64_t k = 0; k < taps; k++) {
    int64_t rem = k;
    for (int i = sp - 1; i >= 0; i--) starts[2 + i] = (rem % p->kernel[i]) * p->dilations[i], rem /= p->kernel[i];
    int c = slice_adjoint(a, is_max ? mul(a, masks[k], g) : g, rank, ps, starts, steps);
    sum = sum < 0 ? c : add(a, sum, c);
  }
  for (int i = 0; i < 2 * rank; i++) pads[i] = -pads[i];
  return pad0(a, sum, pads);
}

/* Pad adjoint along one axis r for reflect/edge modes (pads >= 0). */
static int pad_axis_adjoint(Ad *a, int dy, int r, int64_t pb, int64_t pe, int64_t n, kiln_pad_mode mode) {
  if (dy < 0) return -1;
  Tensor dt = *tensor(a, dy);
  int rank = dt.rank;
  int64_t st[KILN_MAX_RANK] = {0}, sp[KILN_MAX_RANK], sh[KILN_MAX_RANK], pads[2 * KILN_MAX_RANK] = {0};
  memcpy(sh, dt.shape, sizeof sh);
  for (int i = 0; i < rank; i++) sp[i] = 1;
  st[r] = pb, sh[r] = n;
  int out = slice(a, dy, st, sp, sh);  /* the middle maps one to one */
  for (int side = 0; side < 2; side++) {
    int64_t len = side ? pe : pb;
    if (len == 0) continue;
    memcpy(sh, dt.shape, sizeof sh);
    sh[r] = len;
    memset(pads, 0, sizeof pads);
    int c;
    if (mode == KILN_PAD_EDGE) {  /* every padded position copies the end element */
      st[r] = side ? pb + n : 0, sp[r] = 1;
      int axis[1] = {r};
      c = reduce_sum(a, slice(a, dy, st, sp, sh), 1, axis, 1);
      pads[r] = side ? n - 1 : 0, pads[rank + r] = side ? 0 : n - 1;
    } else {  /* reflect: left j -> pb - j, right pb+n+k -> n-2-k; read reversed */
      st[r] = side ? pb + n + pe - 1 : pb - 1, sp[r] = -1;
      c = slice(a, dy, st, sp, sh);
      pads[r] = side ? n - 1 - pe : 1, pads[rank + r] = side ? 1 : n - 1 - pb;
    }
    out = add(a, out, pad0(a, c, pads));
    sp[r] = 1;
  }
  return out;
}

static int pad_vjp(Ad *a, const Node *n, int dy) {
  Tensor xt = *tensor(a, n->in[0]);
  int rank = xt.rank;
  int64_t pads[2 * KILN_MAX_RANK];
  if (n->attr.pad_mode == KILN_PAD_CONSTANT) {
    for (int i = 0; i < 2 * rank; i++) pads[i] = -n->attr.pads[i];
    return pad0(a, dy, pads);
  }
  /* reflect / edge: each axis's index map is independent, so adjoints compose axis by axis */
  for (int r = 0; r < rank; r++)
    if (n->attr.pads[r] < 0 || n->attr.pads[rank + r] < 0) {
      a->st = kiln_fail(KILN_ERR_UNSUPPORTED, "autodiff: gradient of a %s pad that crops",
                        n->attr.pad_mode == KILN_PAD_EDGE ? "edge" : "reflect");
      return -1;
    }
  for (int r = 0; r < rank && dy >= 0; r++)
    if (n->attr.pads[r] || n->attr.pads[rank + r])
      dy = pad_axis_adjoint(a, dy, r, n->attr.pads[r], n->attr.pads[rank + r], xt.shape[r], n->attr.pad_mode);
  return dy;
}

/* Gather along axis: dx[A, k, B] = sum_i [idx_i == k] dy[A, i, B], a one-hot matmul. */
static int gather_vjp(Ad *a, const Node *n, int dy) {
  Tensor xt = *tensor(a, n->in[0]), it = *tensor(a, n->in[1]);
  int axis = n->attr.axis;
  int64_t A = 1, B = 1, K = xt.shape[axis], I = it.numel;
  for (int i = 0; i < axis; i++) A *= xt.shape[i];
  for (int i = axis + 1; i < xt.rank; i++) B *= xt.shape[i];
  double *iota = kiln_malloc((size_t)(K ? K : 1) * sizeof *iota);
  if (!iota) {
    a->st = kiln_fail(KILN_ERR_NO_MEMORY, "autodiff: out of memory for a gather gradient");
    return -1;
  }
  for (int64_t k = 0; k < K; k++) iota[k] = (double)k;
  int64_t ks[2] = {K, 1}, is[2] = {1, I}, s3[3] = {A, I, B};
  int ids = constant(a, it.dtype, 2, ks, iota, K);
  kiln_free(iota);
  int idx = reshape(a, n->in[1], 2, is);
  int zero = scalar(a, it.dtype, 0);
  idx = where(a, op2(a, OP_LT, idx, zero), add(a, idx, scalar(a, it.dtype, (double)K)), idx);
  int onehot = mask(a, OP_EQ, ids, idx, xt.dtype);  /* [K, I] */
  int g = matmul(a, onehot, reshape(a, dy, 3, s3));  /* [A, K, B] */
  return reshape(a, g, xt.rank, xt.shape);
}

/* Tile: out dim r splits as [repeat, n]; sum over the repeat axes. */
static int tile_vjp(Ad *a, const Node *n, int dy) {
  Tensor xt = *tensor(a, n->in[0]), yt = *tensor(a, n->out);
  int64_t split[KILN_MAX_RANK];
  int axes[KILN_MAX_RANK], na = 0, j = 0;
  for (int r = 0; r < xt.rank; r++) {
    int64_t rep = xt.shape[r] ? yt.shape[r] / xt.shape[r] : 1;
    if (rep > 1) {
      if (j + 1 + (xt.rank - r) > KILN_MAX_RANK) {
        a->st = kiln_fail(KILN_ERR_UNSUPPORTED, "autodiff: tile gradient needs rank > %d", KILN_MAX_RANK);
        return -1;
      }
      axes[na++] = j, split[j++] = rep;
    }
    split[j++] = xt.shape[r];
  }
  return reshape(a, reduce_sum(a, reshape(a, dy, j, split), na, axes, 0), xt.rank, xt.shape);
}

static void concat_vjp(Ad *a, const Node *n, int dy) {
  Tensor yt = *tensor(a, n->out);
  int axis = n->attr.axis;
  int64_t st[KILN_MAX_RANK] = {0}, sp[KILN_MAX_RANK], off = 0;
  for (int r = 0; r < yt.rank; r++) sp[r] = 1;
  for (int i = 0; i < n->n_in; i++) {
    int in = n->in[i];
    Tensor xt = *tensor(a, in);
    st[axis] = off;
    off += xt.shape[axis];
    if (a->needs[in]) accumulate(a, in, slice(a, dy, st, sp, xt.shape));
  }
}

/* Applies the rule of node n (its output's adjoint is dy). */
static void node_vjp(Ad *a, const Node *n, int dy) {
  int x = n->in[0];
  switch (n->op) {
  case OP_NEG: case OP_ABS: case OP_EXP: case OP_LOG: case OP_SQRT: case OP_RSQRT: case OP_RECIPROCAL:
  case OP_TANH: case OP_SIGMOID: case OP_RELU: case OP_GELU_ERF: case OP_GELU_TANH: case OP_ERF:
  case OP_SIN: case OP_COS: case OP_FLOOR: case OP_CEIL: case OP_ROUND: case OP_SIGN:
    accumulate(a, x, unary_vjp(a, n->op, x, n->out, dy));
    break;
  case OP_ADD: case OP_SUB: case OP_MUL: case OP_DIV: case OP_POW: case OP_MAX: case OP_MIN:
  case OP_MOD: case OP_FMOD: {
    int ga, gb;
    binary_vjp(a, n->op, x, n->in[1], n->out, dy, &ga, &gb);
    if (a->needs[x]) accumulate_to(a, x, ga);
    if (a->needs[n->in[1]]) accumulate_to(a, n->in[1], gb);
    break;
  }
  case OP_WHERE: {
    int zero = scalar(a, dtype_of(a, n->out), 0);
    if (a->needs[n->in[1]]) accumulate_to(a, n->in[1], where(a, n->in[0], dy, zero));
    if (a->needs[n->in[2]]) accumulate_to(a, n->in[2], where(a, n->in[0], zero, dy));
    break;
  }
  case OP_CAST:
    if (dtype_is_float(dtype_of(a, n->out))) accumulate(a, x, cast(a, dy, dtype_of(a, x)));
    break;
  case OP_RESHAPE: {
    Tensor xt = *tensor(a, x);
    accumulate(a, x, reshape(a, dy, xt.rank, xt.shape));
    break;
  }
  case OP_TRANSPOSE: {
    int inv[KILN_MAX_RANK], rank = tensor(a, x)->rank;
    for (int i = 0; i < rank; i++) inv[n->attr.perm[i]] = i;
    accumulate(a, x, transpose(a, dy, rank, inv));
    break;
  }
  case OP_SLICE: {
    Tensor xt = *tensor(a, x);
    accumulate(a, x, slice_adjoint(a, dy, xt.rank, xt.shape, n->attr.starts, n->attr.steps));
    break;
  }
  case OP_CONCAT: concat_vjp(a, n, dy); break;
  case OP_PAD: accumulate(a, x, pad_vjp(a, n, dy)); break;
  case OP_EXPAND: accumulate_to(a, x, dy); break;
  case OP_GATHER: accumulate(a, x, gather_vjp(a, n, dy)); break;
  case OP_TILE: accumulate(a, x, tile_vjp(a, n, dy)); break;
  case OP_REDUCE_SUM: case OP_REDUCE_MAX: case OP_REDUCE_MIN: case OP_REDUCE_PROD:
    accumulate(a, x, reduce_vjp(a, n, dy));
    break;
  case OP_MATMUL: matmul_vjp(a, n, dy); break;
  case OP_CONV:
    if (a->needs[x]) accumulate(a, x, conv_dx(a, n, dy));
    if (a->needs[n->in[1]]) accumulate(a, n->in[1], conv_dw(a, n, dy));
    break;
  case OP_MAX_POOL: case OP_AVG_POOL: accumulate(a, x, pool_vjp(a, n, dy)); break;
  /* every rank's y is the mean of every rank's x: d loss / d x_r = mean over ranks of dy */
  case OP_ALL_REDUCE_MEAN: accumulate(a, x, op1(a, OP_ALL_REDUCE_MEAN, dy)); break;
  default: break;  /* no gradient: integer/bool results, argmax/argmin */
  }
}

/* ---- the transform ------------------------------------------------------------- */

/* Marks tensors that depend on a wrt tensor (float only: nothing flows through ints). */
static void mark_needs(Ad *a, int n, const int *wrt) {
  Graph *g = a->g;
  for (int i = 0; i < n; i++) a->needs[wrt[i]] = true;
  for (int k = 0; k < g->n_nodes; k++) {
    const Node *nd = &g->nodes[k];
    bool any = false;
    for (int i = 0; i < nd->n_in; i++) any |= a->needs[nd->in[i]];
    a->needs[nd->out] = any && dtype_is_float(g->tensors[nd->out].dtype);
  }
  for (int i = 0; i < n; i++) a->needs[wrt[i]] = true;
}

/* Contributions of the broken rule's node are scaled (test hook). */
static void break_contributions(Ad *a, const Node *n, const int *before) {
  for (int i = 0; i < n->n_in; i++) {
    int t = n->in[i];
    if (a->st == KILN_OK && a->adj[t] >= 0 && a->adj[t] != before[i]) a->adj[t] = mulc(a, a->adj[t], 1.25);
  }
}

static kiln_status run_grad(Ad *a, int loss, int n, const int *wrt, int *grads) {
  Graph *g = a->g;
  int n_nodes = g->n_nodes;
  mark_needs(a, n, wrt);
  Tensor lt = *tensor(a, loss);
  a->adj[loss] = expand(a, scalar(a, lt.dtype, 1), lt.rank, lt.shape);
  for (int k = n_nodes - 1; k >= 0 && a->st == KILN_OK; k--) {
    Node nd = g->nodes[k];  /* a copy: graph_add may move the node array */
    int dy = a->adj[nd.out];
    if (dy < 0 || !a->needs[nd.out]) continue;
    int before[KILN_MAX_RANK * 2 + 8];
    bool hook = (int)nd.op == broken_rule && nd.n_in <= (int)(sizeof before / sizeof before[0]);
    for (int i = 0; hook && i < nd.n_in; i++) before[i] = a->adj[nd.in[i]];
    node_vjp(a, &nd, dy);
    if (hook) break_contributions(a, &nd, before);
  }
  for (int i = 0; i < n && a->st == KILN_OK; i++) {
    Tensor wt = *tensor(a, wrt[i]);
    grads[i] = a->adj[wrt[i]] >= 0 ? a->adj[wrt[i]] : expand(a, scalar(a, wt.dtype, 0), wt.rank, wt.shape);
  }
  return a->st;
}

/* requires: wrt distinct float tensors, loss a one-element float tensor (checked by the
 * API); appends nodes only. On failure the appended nodes and tensors are dropped. */
kiln_status graph_grad(Graph *g, int loss, int n, const int *wrt, int *grads) {
  Ad a = {.g = g};
  int n_nodes = g->n_nodes, n_tensors = g->n_tensors;
  a.adj = kiln_malloc((size_t)g->n_tensors * sizeof *a.adj);
  a.needs = kiln_calloc((size_t)g->n_tensors, sizeof *a.needs);
  if (!a.adj || !a.needs) {
    kiln_free(a.adj), kiln_free(a.needs);
    return kiln_fail(KILN_ERR_NO_MEMORY, "autodiff: out of memory");
  }
  for (int i = 0; i < g->n_tensors; i++) a.adj[i] = -1;
  kiln_status st = run_grad(&a, loss, n, wrt, grads);
  kiln_free(a.adj), kiln_free(a.needs);
  if (st != KILN_OK) {
    kiln_error_prefix("gradient of '%s': ", g->tensors[loss].name);
    g->n_nodes = n_nodes, g->n_tensors = n_tensors;
  }
  return st;
}

#define NEED(c, ...) do { if (!(c)) return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_graph_grad: " __VA_ARGS__); } while (0)

kiln_status kiln_graph_grad(kiln_graph *kg, kiln_tensor loss, int n, const kiln_tensor *wrt, kiln_tensor *grads) {
  NEED(kg, "graph is NULL");
  Graph *g = &kg->g;
  NEED(loss >= 0 && loss < g->n_tensors, "loss %d is not a tensor of this graph", loss);
  const Tensor *lt = &g->tensors[loss];
  NEED(lt->numel == 1, "loss '%s' has %lld elements, expected a scalar", lt->name, (long long)lt->numel);
  NEED(dtype_is_float(lt->dtype), "loss '%s' is %s, expected a float", lt->name, kiln_dtype_name(lt->dtype));
  NEED(n >= 0 && (n == 0 || (wrt && grads)), "bad count %d or NULL wrt/grads", n);
  for (int i = 0; i < n; i++) {
    NEED(wrt[i] >= 0 && wrt[i] < g->n_tensors, "wrt[%d] = %d is not a tensor of this graph", i, wrt[i]);
    const Tensor *t = &g->tensors[wrt[i]];
    NEED(dtype_is_float(t->dtype), "wrt[%d] '%s' is %s, expected a float", i, t->name, kiln_dtype_name(t->dtype));
    for (int j = 0; j < i; j++) NEED(wrt[j] != wrt[i], "wrt[%d] and wrt[%d] are both '%s'", j, i, t->name);
  }
  return graph_grad(g, loss, n, wrt, grads);
}
