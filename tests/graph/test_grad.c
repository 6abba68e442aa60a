/*
 * Gradient checks: for every differentiable op, kiln_graph_grad against central
 * differences in f64 on the ref backend. Each case builds y = op(inputs) on f64 graph
 * inputs, loss = sum(y * R) for fixed random weights R, and compares the gradient of
 * every input element to (L(x + h) - L(x - h)) / 2h. Kinks, broadcast operands, strided,
 * dilated and grouped convolutions, negative-step slices and constructed ties (max/min,
 * reductions, max-pool windows) are cases of their own. The last check breaks one rule on
 * purpose (graph_grad_break_rule) and asserts that the checker notices.
 */
#include "test.h"
#include "graph/graph.h"

#define MAX_IN 4

typedef struct In {
  int rank;
  int64_t shape[KILN_MAX_RANK];
  int64_t n;
  double data[512];
} In;

typedef kiln_status (*Build)(kiln_graph *g, const kiln_tensor *x, kiln_tensor *y);

static unsigned long long seed = 0x2545F4914F6CDD1Dull;
static long elements_checked;

/* An input of the given shape, uniform in [lo, hi]. */
static In in_rand(int rank, const int64_t *shape, double lo, double hi) {
  In in = {.rank = rank, .n = 1};
  for (int i = 0; i < rank; i++) in.shape[i] = shape[i], in.n *= shape[i];
  if (in.n > 512) abort();
  for (int64_t i = 0; i < in.n; i++) in.data[i] = lo + (hi - lo) * (test_rand(&seed) + 1) / 2;
  return in;
}

#define SHAPE(...) (const int64_t[]){__VA_ARGS__}
#define RANK(...) ((int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
#define IN(lo, hi, ...) in_rand(RANK(__VA_ARGS__), SHAPE(__VA_ARGS__), lo, hi)

typedef struct Opts {
  double h, tol;
  bool kink_zero;  /* where an input is exactly 0 the gradient must be exactly 0 (documented subgradient) */
  bool quiet;      /* report mismatches through the return value only */
} Opts;

static const Opts DEFAULT = {1e-6, 1e-6, false, false};

/* Runs the check; returns the number of mismatching elements (-1: could not build/run). */
static int gradcheck(const char *name, int n, In *in, Build build, Opts o) {
  kiln_graph *g = NULL;
  kiln_program *p = NULL;
  int bad = -1;
  kiln_tensor x[MAX_IN], grads[MAX_IN], y, r, yr, loss;
  if (kiln_graph_create(&g)) goto out;
  for (int i = 0; i < n; i++)
    if (kiln_graph_input(g, NULL, KILN_F64, in[i].rank, in[i].shape, &x[i])) goto out;
  if (build(g, x, &y)) goto out;
  int rank;
  int64_t shape[KILN_MAX_RANK], ny = 1;
  if (kiln_tensor_shape(g, y, &rank, shape)) goto out;
  for (int i = 0; i < rank; i++) ny *= shape[i];
  double *w = malloc(sizeof(double) * (size_t)(ny ? ny : 1));
  for (int64_t i = 0; i < ny; i++) w[i] = test_rand(&seed);
  kiln_status st = kiln_graph_const(g, KILN_F64, rank, shape, w, &r);
  free(w);
  if (st || kiln_graph_binary(g, KILN_MUL, y, r, &yr) || kiln_graph_reduce(g, KILN_REDUCE_SUM, yr, 0, NULL, 0, &loss))
    goto out;
  if (kiln_graph_grad(g, loss, n, x, grads) || kiln_graph_output(g, loss, "loss")) goto out;
  if (graph_check(&g->g)) goto out;  /* the backward graph keeps the graph's invariants */
  for (int i = 0; i < n; i++)
    if (kiln_graph_output(g, grads[i], NULL)) goto out;
  kiln_options opt = kiln_options_default();
  opt.backend = "ref";
  if (kiln_program_compile(g, &opt, &p)) goto out;
  const void *ins[MAX_IN];
  void *outs[MAX_IN + 1];
  double l0, lp, lm, an[MAX_IN][512];
  for (int i = 0; i < n; i++) ins[i] = in[i].data, outs[1 + i] = an[i];
  outs[0] = &l0;
  if (kiln_program_run(p, ins, outs)) goto out;
  bad = 0;
  outs[0] = &lp;
  for (int i = 0; i < n; i++) {
    double dummy[MAX_IN][512];
    for (int k = 0; k < n; k++) outs[1 + k] = dummy[k];
    for (int64_t j = 0; j < in[i].n; j++) {
      double x0 = in[i].data[j], a = an[i][j];
      if (o.kink_zero && x0 == 0) {
        if (a != 0) {
          bad++;
          if (!o.quiet) fprintf(stderr, "%s: input %d elem %lld at the kink: grad %.9g, documented 0\n", name, i, (long long)j, a);
        }
        continue;
      }
      in[i].data[j] = x0 + o.h;
      outs[0] = &lp;
      if (kiln_program_run(p, ins, outs)) goto fail;
      in[i].data[j] = x0 - o.h;
      outs[0] = &lm;
      if (kiln_program_run(p, ins, outs)) goto fail;
      in[i].data[j] = x0;
      double num = (lp - lm) / (2 * o.h);
      elements_checked++;
      if (!(fabs(a - num) <= o.tol * (1 + fabs(num)))) {
        bad++;
        if (!o.quiet)
          fprintf(stderr, "%s: input %d elem %lld (x = %.9g): grad %.9g, central difference %.9g\n", name, i,
                  (long long)j, x0, a, num);
      }
    }
  }
  goto out;
fail:
  bad = -1;
out:
  if (bad < 0) fprintf(stderr, "%s: could not build or run: %s\n", name, kiln_last_error());
  kiln_program_free(p);
  kiln_graph_free(g);
  return bad;
}

static int cases_run;

static void check(const char *name, int n, In *in, Build build, Opts o) {
  int bad = gradcheck(name, n, in, build, o);
  cases_run++;
  CHECK_MSG(bad == 0, "%s: %d mismatching gradient elements", name, bad);
}

/* ---- unary ops ---- */

static kiln_unary_op cur_unary;
static kiln_status b_unary(kiln_graph *g, const kiln_tensor *x, kiln_tensor *y) {
  return kiln_graph_unary(g, cur_unary, x[0], y);
}

static void test_unary(void) {
  static const struct { kiln_unary_op op; const char *name; double lo, hi; } u[] = {
    {KILN_NEG, "neg", -2, 2}, {KILN_ABS, "abs", -2, 2}, {KILN_EXP, "exp", -2, 2}, {KILN_LOG, "log", 0.2, 3},
    {KILN_SQRT, "sqrt", 0.2, 3}, {KILN_RSQRT, "rsqrt", 0.2, 3}, {KILN_RECIPROCAL, "reciprocal", 0.3, 3},
    {KILN_TANH, "tanh", -2, 2}, {KILN_SIGMOID, "sigmoid", -3, 3}, {KILN_RELU, "relu", -2, 2},
    {KILN_GELU_ERF, "gelu_erf", -3, 3}, {KILN_GELU_TANH, "gelu_tanh", -3, 3}, {KILN_ERF, "erf", -2, 2},
    {KILN_SIN, "sin", -3, 3}, {KILN_COS, "cos", -3, 3},
    /* piecewise constant: gradient 0 (points drawn away from the steps) */
    {KILN_FLOOR, "floor", 0.1, 0.9}, {KILN_CEIL, "ceil", 1.1, 1.9}, {KILN_ROUND, "round", 0.1, 0.4},
    {KILN_SIGN, "sign", 0.1, 2},
  };
  for (size_t i = 0; i < sizeof u / sizeof u[0]; i++) {
    In x = IN(u[i].lo, u[i].hi, 3, 5);
    cur_unary = u[i].op;
    check(u[i].name, 1, &x, b_unary, DEFAULT);
  }
  /* kinks: relu and abs at exactly 0 take the documented subgradient 0 */
  In x = IN(-1, 1, 4, 4);
  for (int j = 0; j < 16; j += 3) x.data[j] = 0;
  Opts k = DEFAULT;
  k.kink_zero = true;
  cur_unary = KILN_RELU;
  check("relu at 0", 1, &x, b_unary, k);
  cur_unary = KILN_ABS;
  check("abs at 0", 1, &x, b_unary, k);
}

/* ---- binary ops, with broadcasting ---- */

static kiln_binary_op cur_binary;
static kiln_status b_binary(kiln_graph *g, const kiln_tensor *x, kiln_tensor *y) {
  return kiln_graph_binary(g, cur_binary, x[0], x[1], y);
}

static void test_binary(void) {
  static const struct { kiln_binary_op op; const char *name; double alo, ahi, blo, bhi; } b[] = {
    {KILN_ADD, "add", -2, 2, -2, 2}, {KILN_SUB, "sub", -2, 2, -2, 2}, {KILN_MUL, "mul", -2, 2, -2, 2},
    {KILN_DIV, "div", -2, 2, 0.5, 2}, {KILN_POW, "pow", 0.3, 2, -2, 2}, {KILN_MAX, "max", -2, 2, -2, 2},
    {KILN_MIN, "min", -2, 2, -2, 2}, {KILN_FMOD, "fmod", -5, 5, 0.7, 1.9}, {KILN_MOD, "mod", -5, 5, 0.7, 1.9},
  };
  for (size_t i = 0; i < sizeof b / sizeof b[0]; i++) {
    cur_binary = b[i].op;
    In same[2] = {IN(b[i].alo, b[i].ahi, 3, 4), IN(b[i].blo, b[i].bhi, 3, 4)};
    check(b[i].name, 2, same, b_binary, DEFAULT);
    /* broadcast both ways: [2,3,4] with [3,1], and [4] with [2,1,4] */
    In bc[2] = {IN(b[i].alo, b[i].ahi, 2, 3, 4), IN(b[i].blo, b[i].bhi, 3, 1)};
    char name[64];
    snprintf(name, sizeof name, "%s broadcast", b[i].name);
    check(name, 2, bc, b_binary, DEFAULT);
    In bc2[2] = {IN(b[i].alo, b[i].ahi, 4), IN(b[i].blo, b[i].bhi, 2, 1, 4)};
    snprintf(name, sizeof name, "%s broadcast left", b[i].name);
    check(name, 2, bc2, b_binary, DEFAULT);
  }
  /* ties: where a == b, max and min give each operand half (what the central difference measures) */
  In t[2] = {IN(-2, 2, 3, 4), IN(-2, 2, 3, 4)};
  for (int j = 0; j < 12; j += 2) t[1].data[j] = t[0].data[j];
  cur_binary = KILN_MAX;
  check("max ties", 2, t, b_binary, DEFAULT);
  cur_binary = KILN_MIN;
  check("min ties", 2, t, b_binary, DEFAULT);
  /* pow with a negative base and an integer exponent: d/da only (d/db is 0 there by rule) */
  In pw[2] = {IN(-2, -0.5, 5), IN(2, 2, 5)};
  cur_binary = KILN_POW;
  Opts o = DEFAULT;
  o.quiet = true;
  int bad = gradcheck("pow negative base", 2, pw, b_binary, o);
  CHECK_MSG(bad == 5, "pow negative base: expected only the 5 d/db elements to differ (rule gives 0), got %d", bad);
}

static kiln_status b_where(kiln_graph *g, const kiln_tensor *x, kiln_tensor *y) {
  static const uint8_t c[6] = {1, 0, 0, 1, 1, 0};
  kiln_tensor cond;
  kiln_status s = kiln_graph_const(g, KILN_BOOL, 2, SHAPE(2, 3), c, &cond);
  return s ? s : kiln_graph_where(g, cond, x[0], x[1], y);
}

static kiln_status b_cast(kiln_graph *g, const kiln_tensor *x, kiln_tensor *y) {
  kiln_tensor f, e;
  kiln_status s = kiln_graph_cast(g, x[0], KILN_F32, &f);
  if (!s) s = kiln_graph_unary(g, KILN_EXP, f, &e);
  return s ? s : kiln_graph_cast(g, e, KILN_F64, y);
}

static void test_select_cast(void) {
  In w[2] = {IN(-2, 2, 2, 3), IN(-2, 2, 3)};
  check("where (broadcast b)", 2, w, b_where, DEFAULT);
  In c = IN(-1, 1, 3, 4);
  Opts o = {1e-2, 2e-4, false, false};  /* f32 in the middle: a coarse step */
  check("cast f64->f32->f64", 1, &c, b_cast, o);
}

/* ---- movement ---- */

static kiln_status b_reshape(kiln_graph *g, const kiln_tensor *x, kiln_tensor *y) {
  kiln_tensor t;
  kiln_status s = kiln_graph_reshape(g, x[0], 2, SHAPE(6, 4), &t);
  return s ? s : kiln_graph_unary(g, KILN_TANH, t, y);  /* nonlinear so the layout matters */
}
static kiln_status b_transpose(kiln_graph *g, const kiln_tensor *x, kiln_tensor *y) {
  kiln_tensor t;
  kiln_status s = kiln_graph_transpose(g, x[0], (const int[]){2, 0, 1}, &t);
  return s ? s : kiln_graph_binary(g, KILN_MUL, t, t, y);
}
static kiln_status b_slice_pos(kiln_graph *g, const kiln_tensor *x, kiln_tensor *y) {
  return kiln_graph_slice(g, x[0], 2, SHAPE(1, 0), SHAPE(4, 7), (const int[]){0, 1}, SHAPE(1, 3), y);
}
static kiln_status b_slice_neg(kiln_graph *g, const kiln_tensor *x, kiln_tensor *y) {
  /* axis 0 reversed (step -1), axis 1 every second from the end (step -2), axis 2 step 3 from 1 */
  return kiln_graph_slice(g, x[0], 3, SHAPE(-1, 6, 1), SHAPE(-100, 0, 5), (const int[]){0, 1, 2},
                          SHAPE(-1, -2, 3), y);
}
static kiln_status b_concat(kiln_graph *g, const kiln_tensor *x, kiln_tensor *y) {
  kiln_tensor c;
  kiln_status s = kiln_graph_concat(g, 3, x, 1, &c);
  return s ? s : kiln_graph_binary(g, KILN_MUL, c, c, y);
}
static kiln_status b_pad_const(kiln_graph *g, const kiln_tensor *x, kiln_tensor *y) {
  /* begins then ends: axis 0 +1/-1 (crop), axis 1 +2/+1 */
  return kiln_graph_pad(g, x[0], SHAPE(1, 2, -1, 1), KILN_PAD_CONSTANT, 0.5, y);
}
static kiln_status b_pad_reflect(kiln_graph *g, const kiln_tensor *x, kiln_tensor *y) {
  return kiln_graph_pad(g, x[0], SHAPE(2, 1, 1, 3), KILN_PAD_REFLECT, 0, y);
}
static kiln_status b_pad_edge(kiln_graph *g, const kiln_tensor *x, kiln_tensor *y) {
  return kiln_graph_pad(g, x[0], SHAPE(2, 0, 3, 2), KILN_PAD_EDGE, 0, y);
}
static kiln_status b_expand(kiln_graph *g, const kiln_tensor *x, kiln_tensor *y) {
  return kiln_graph_expand(g, x[0], 3, SHAPE(2, 3, 4), y);
}
static kiln_status b_gather(kiln_graph *g, const kiln_tensor *x, kiln_tensor *y) {
  static const int64_t idx[5] = {2, -1, 0, 2, 3};  /* negative and repeated indices */
  kiln_tensor i;
  kiln_status s = kiln_graph_const(g, KILN_I64, 1, SHAPE(5), idx, &i);
  return s ? s : kiln_graph_gather(g, x[0], i, 1, y);
}
static kiln_status b_gather2(kiln_graph *g, const kiln_tensor *x, kiln_tensor *y) {
  static const int32_t idx[4] = {1, 0, 1, 1};
  kiln_tensor i;
  kiln_status s = kiln_graph_const(g, KILN_I32, 2, SHAPE(2, 2), idx, &i);
  return s ? s : kiln_graph_gather(g, x[0], i, 0, y);
}
static kiln_status b_tile(kiln_graph *g, const kiln_tensor *x, kiln_tensor *y) {
  kiln_tensor t;
  kiln_status s = kiln_graph_tile(g, x[0], SHAPE(2, 1, 3), &t);
  return s ? s : kiln_graph_binary(g, KILN_MUL, t, t, y);
}

static void test_movement(void) {
  In a = IN(-1, 1, 2, 3, 4);
  check("reshape", 1, &a, b_reshape, DEFAULT);
  check("transpose", 1, &a, b_transpose, DEFAULT);
  In s = IN(-1, 1, 5, 8);
  check("slice steps 1,3", 1, &s, b_slice_pos, DEFAULT);
  In sn = IN(-1, 1, 3, 7, 6);
  check("slice negative steps", 1, &sn, b_slice_neg, DEFAULT);
  In c[3] = {IN(-1, 1, 2, 1, 3), IN(-1, 1, 2, 3, 3), IN(-1, 1, 2, 2, 3)};
  check("concat", 3, c, b_concat, DEFAULT);
  In p = IN(-1, 1, 4, 5);
  check("pad constant (crop too)", 1, &p, b_pad_const, DEFAULT);
  check("pad reflect", 1, &p, b_pad_reflect, DEFAULT);
  check("pad edge", 1, &p, b_pad_edge, DEFAULT);
  In e = IN(-1, 1, 3, 1);
  check("expand", 1, &e, b_expand, DEFAULT);
  In gx = IN(-1, 1, 2, 4, 3);
  check("gather axis 1", 1, &gx, b_gather, DEFAULT);
  In gx2 = IN(-1, 1, 2, 3);
  check("gather axis 0, 2-D indices", 1, &gx2, b_gather2, DEFAULT);
  In t = IN(-1, 1, 2, 3, 2);
  check("tile", 1, &t, b_tile, DEFAULT);
}

/* ---- reductions ---- */

static kiln_reduce_op cur_reduce;
static int cur_keep;
static kiln_status b_reduce(kiln_graph *g, const kiln_tensor *x, kiln_tensor *y) {
  return kiln_graph_reduce(g, cur_reduce, x[0], 2, (const int[]){0, 2}, cur_keep, y);
}
static kiln_status b_argmax(kiln_graph *g, const kiln_tensor *x, kiln_tensor *y) {
  kiln_tensor i, f;  /* no gradient through the index: y = x * cast(argmax) */
  kiln_status s = kiln_graph_argmax(g, x[0], 1, 1, 0, &i);
  if (!s) s = kiln_graph_cast(g, i, KILN_F64, &f);
  return s ? s : kiln_graph_binary(g, KILN_MUL, x[0], f, y);
}

static void test_reduce(void) {
  static const struct { kiln_reduce_op op; const char *name; double lo, hi; } r[] = {
    {KILN_REDUCE_SUM, "reduce_sum", -1, 1}, {KILN_REDUCE_MAX, "reduce_max", -1, 1},
    {KILN_REDUCE_MIN, "reduce_min", -1, 1}, {KILN_REDUCE_PROD, "reduce_prod", 0.5, 1.5},
    {KILN_REDUCE_MEAN, "reduce_mean", -1, 1}, {KILN_REDUCE_LOG_SUM_EXP, "reduce_logsumexp", -1, 1},
    {KILN_REDUCE_L2, "reduce_l2", 0.2, 1}, {KILN_REDUCE_SUM_SQUARE, "reduce_sum_square", -1, 1},
  };
  for (size_t i = 0; i < sizeof r / sizeof r[0]; i++)
    for (cur_keep = 0; cur_keep < 2; cur_keep++) {
      In x = IN(r[i].lo, r[i].hi, 3, 2, 4);
      cur_reduce = r[i].op;
      char name[64];
      snprintf(name, sizeof name, "%s keepdims=%d", r[i].name, cur_keep);
      check(name, 1, &x, b_reduce, DEFAULT);
    }
  /* constructed ties: in each group reduced over axes {0,2} of [3,2,4], two elements share the extremum */
  In x = IN(-1, 1, 3, 2, 4);
  for (int c = 0; c < 2; c++) x.data[0 * 8 + c * 4 + 1] = 2, x.data[2 * 8 + c * 4 + 3] = 2;     /* max ties */
  cur_keep = 1;
  cur_reduce = KILN_REDUCE_MAX;
  check("reduce_max ties", 1, &x, b_reduce, DEFAULT);
  for (int c = 0; c < 2; c++) x.data[0 * 8 + c * 4 + 1] = -2, x.data[2 * 8 + c * 4 + 3] = -2;   /* min ties */
  cur_reduce = KILN_REDUCE_MIN;
  check("reduce_min ties", 1, &x, b_reduce, DEFAULT);
  /* prod with zeros: one zero in a group, and a group with two zeros */
  In z = IN(0.5, 1.5, 3, 2, 4);
  z.data[5] = 0;
  z.data[2] = 0, z.data[8 + 1] = 0;
  cur_reduce = KILN_REDUCE_PROD;
  check("reduce_prod with zeros", 1, &z, b_reduce, DEFAULT);
  In a = IN(-1, 1, 3, 4);
  check("argmax (no gradient through the index)", 1, &a, b_argmax, DEFAULT);
}

/* ---- contractions ---- */

static kiln_status b_matmul(kiln_graph *g, const kiln_tensor *x, kiln_tensor *y) {
  return kiln_graph_matmul(g, x[0], x[1], y);
}

static void test_matmul(void) {
  In m1[2] = {IN(-1, 1, 2, 3, 4), IN(-1, 1, 4, 5)};
  check("matmul batch x matrix", 2, m1, b_matmul, DEFAULT);
  In m2[2] = {IN(-1, 1, 4), IN(-1, 1, 4, 5)};
  check("matmul vector x matrix", 2, m2, b_matmul, DEFAULT);
  In m3[2] = {IN(-1, 1, 2, 3, 4), IN(-1, 1, 4)};
  check("matmul batch x vector", 2, m3, b_matmul, DEFAULT);
  In m4[2] = {IN(-1, 1, 2, 1, 3, 4), IN(-1, 1, 3, 4, 2)};
  check("matmul broadcast batch", 2, m4, b_matmul, DEFAULT);
  In m5[2] = {IN(-1, 1, 4), IN(-1, 1, 4)};
  check("matmul vector x vector", 2, m5, b_matmul, DEFAULT);
}

static kiln_conv_params cur_conv;
static kiln_status b_conv(kiln_graph *g, const kiln_tensor *x, kiln_tensor *y) {
  return kiln_graph_conv(g, x[0], x[1], -1, &cur_conv, y);
}
static kiln_status b_conv_bias(kiln_graph *g, const kiln_tensor *x, kiln_tensor *y) {
  return kiln_graph_conv(g, x[0], x[1], x[2], &cur_conv, y);
}

static void test_conv(void) {
  cur_conv = (kiln_conv_params){.spatial = 2, .pads = {1, 1, 1, 1}};
  In c1[3] = {IN(-1, 1, 2, 2, 5, 5), IN(-1, 1, 3, 2, 3, 3), IN(-1, 1, 3)};
  check("conv 3x3 pad 1 + bias", 3, c1, b_conv_bias, DEFAULT);
  cur_conv = (kiln_conv_params){.spatial = 2, .strides = {2, 1}, .dilations = {1, 2}, .pads = {1, 0, 0, 2}};
  In c2[2] = {IN(-1, 1, 1, 2, 7, 6), IN(-1, 1, 2, 2, 3, 2)};
  check("conv strided, dilated, asymmetric pads", 2, c2, b_conv, DEFAULT);
  cur_conv = (kiln_conv_params){.spatial = 2, .strides = {2, 2}, .dilations = {2, 1}, .pads = {2, 1, 1, 0}, .group = 2};
  In c3[2] = {IN(-1, 1, 2, 4, 7, 6), IN(-1, 1, 6, 2, 2, 3)};
  check("conv grouped (2), strided, dilated", 2, c3, b_conv, DEFAULT);
  cur_conv = (kiln_conv_params){.spatial = 2, .pads = {1, 1, 1, 1}, .group = 3};
  In c4[2] = {IN(-1, 1, 1, 3, 4, 4), IN(-1, 1, 3, 1, 3, 3)};
  check("conv depthwise", 2, c4, b_conv, DEFAULT);
  cur_conv = (kiln_conv_params){.spatial = 1, .strides = {3}, .pads = {2, 1}};
  In c5[2] = {IN(-1, 1, 2, 2, 9), IN(-1, 1, 2, 2, 4)};
  check("conv 1-D stride 3", 2, c5, b_conv, DEFAULT);
  /* 30 taps: dw through the conv form rather than im2col */
  cur_conv = (kiln_conv_params){.spatial = 2, .strides = {1, 2}, .pads = {0, 1, 1, 0}};
  In c7[2] = {IN(-1, 1, 1, 2, 8, 7), IN(-1, 1, 2, 2, 6, 5)};
  check("conv 6x5 kernel (dw as conv)", 2, c7, b_conv, DEFAULT);
  cur_conv = (kiln_conv_params){.spatial = 3, .strides = {1, 2, 1}, .pads = {0, 1, 0, 0, 0, 1}};
  In c6[2] = {IN(-1, 1, 1, 1, 3, 4, 3), IN(-1, 1, 2, 1, 2, 2, 2)};
  check("conv 3-D", 2, c6, b_conv, DEFAULT);
}

static kiln_pool_params cur_pool;
static kiln_pool_kind cur_pool_kind;
static kiln_status b_pool(kiln_graph *g, const kiln_tensor *x, kiln_tensor *y) {
  return kiln_graph_pool(g, cur_pool_kind, x[0], &cur_pool, y);
}

/* Plants two equal maxima in every (non-overlapping) 2x2 window of a [1,2,4,4] input. */
static void plant_ties(In *x) {
  for (int c = 0; c < 2; c++)
    for (int wy = 0; wy < 2; wy++)
      for (int wx = 0; wx < 2; wx++) {
        double *p = &x->data[c * 16 + wy * 8 + wx * 2];
        p[0] = p[5] = 1.5 + 0.1 * (c + wy + wx);  /* (0,0) and (1,1) of the window */
      }
}

static void test_pool(void) {
  cur_pool_kind = KILN_POOL_MAX;
  cur_pool = (kiln_pool_params){.spatial = 2, .kernel = {2, 2}, .strides = {2, 2}};
  In x = IN(-1, 1, 1, 2, 4, 4);
  check("max_pool 2x2", 1, &x, b_pool, DEFAULT);
  plant_ties(&x);
  check("max_pool 2x2 with ties in every window", 1, &x, b_pool, DEFAULT);
  cur_pool = (kiln_pool_params){.spatial = 2, .kernel = {3, 3}, .strides = {2, 2}, .pads = {1, 1, 1, 1}};
  In y = IN(-1, 1, 1, 2, 5, 5);
  check("max_pool 3x3 stride 2 pad 1 (overlapping)", 1, &y, b_pool, DEFAULT);
  cur_pool = (kiln_pool_params){.spatial = 2, .kernel = {2, 2}, .strides = {2, 2}, .dilations = {2, 1}, .ceil_mode = 1};
  In z = IN(-1, 1, 1, 1, 7, 5);
  check("max_pool dilated, ceil mode", 1, &z, b_pool, DEFAULT);
  cur_pool = (kiln_pool_params){.spatial = 1, .kernel = {3}, .strides = {1}};
  In t = IN(-1, 1, 1, 1, 6);
  t.data[2] = t.data[3] = 2;  /* two tied maxima shared by two overlapping windows */
  check("max_pool 1-D overlapping windows with a tie", 1, &t, b_pool, DEFAULT);

  cur_pool_kind = KILN_POOL_AVG;
  for (int inc = 0; inc < 2; inc++) {
    cur_pool = (kiln_pool_params){.spatial = 2, .kernel = {3, 3}, .strides = {2, 2}, .pads = {1, 1, 1, 1},
                                  .count_include_pad = inc};
    In a = IN(-1, 1, 1, 2, 5, 5);
    check(inc ? "avg_pool pad, count_include_pad=1" : "avg_pool pad, count_include_pad=0", 1, &a, b_pool, DEFAULT);
    cur_pool.ceil_mode = 1;
    cur_pool.pads[2] = cur_pool.pads[3] = 0;
    In b = IN(-1, 1, 1, 1, 6, 6);
    check(inc ? "avg_pool ceil, count_include_pad=1" : "avg_pool ceil, count_include_pad=0", 1, &b, b_pool, DEFAULT);
  }
  cur_pool = (kiln_pool_params){.spatial = 2, .kernel = {2, 2}, .strides = {1, 1}, .dilations = {1, 2}};
  In d = IN(-1, 1, 1, 1, 4, 5);
  check("avg_pool dilated, overlapping", 1, &d, b_pool, DEFAULT);
}

/* ---- compositions through the public API ---- */

static kiln_status b_softmax(kiln_graph *g, const kiln_tensor *x, kiln_tensor *y) {
  return kiln_graph_softmax(g, x[0], 1, y);
}
static kiln_status b_log_softmax(kiln_graph *g, const kiln_tensor *x, kiln_tensor *y) {
  return kiln_graph_log_softmax(g, x[0], -1, y);
}
static kiln_status b_layernorm(kiln_graph *g, const kiln_tensor *x, kiln_tensor *y) {
  return kiln_graph_layernorm(g, x[0], x[1], x[2], 1, 1e-5, y);
}

static void test_compose(void) {
  In s = IN(-2, 2, 3, 5);
  check("softmax", 1, &s, b_softmax, DEFAULT);
  check("log_softmax", 1, &s, b_log_softmax, DEFAULT);
  In ln[3] = {IN(-2, 2, 3, 4), IN(0.5, 1.5, 4), IN(-1, 1, 4)};
  check("layernorm", 3, ln, b_layernorm, DEFAULT);
}

/* ---- the checker catches a broken rule ---- */

static void test_broken_rule(void) {
  static const struct { int op; const char *name; } broken[] = {
    {OP_MUL, "mul"}, {OP_CONV, "conv"}, {OP_MAX_POOL, "max_pool"}, {OP_SLICE, "slice"},
  };
  Opts o = DEFAULT;
  o.quiet = true;
  for (size_t i = 0; i < sizeof broken / sizeof broken[0]; i++) {
    graph_grad_break_rule(broken[i].op);
    int bad = -1;
    if (broken[i].op == OP_MUL) {
      cur_binary = KILN_MUL;
      In m[2] = {IN(-2, 2, 3, 4), IN(-2, 2, 3, 4)};
      bad = gradcheck("broken mul", 2, m, b_binary, o);
    } else if (broken[i].op == OP_CONV) {
      cur_conv = (kiln_conv_params){.spatial = 2, .pads = {1, 1, 1, 1}};
      In c[2] = {IN(-1, 1, 1, 2, 4, 4), IN(-1, 1, 2, 2, 3, 3)};
      bad = gradcheck("broken conv", 2, c, b_conv, o);
    } else if (broken[i].op == OP_MAX_POOL) {
      cur_pool_kind = KILN_POOL_MAX;
      cur_pool = (kiln_pool_params){.spatial = 2, .kernel = {2, 2}, .strides = {2, 2}};
      In x = IN(-1, 1, 1, 2, 4, 4);
      bad = gradcheck("broken max_pool", 1, &x, b_pool, o);
    } else {
      In s = IN(-1, 1, 3, 7, 6);
      bad = gradcheck("broken slice", 1, &s, b_slice_neg, o);
    }
    graph_grad_break_rule(-1);
    CHECK_MSG(bad > 0, "breaking the %s rule went unnoticed (%d mismatches)", broken[i].name, bad);
  }
}

/* ---- argument checks of kiln_graph_grad ---- */

static void test_api_checks(void) {
  kiln_graph *g;
  OK(kiln_graph_create(&g));
  kiln_tensor x, v, i, loss, s, gr[2];
  OK(kiln_graph_input(g, "x", KILN_F32, 2, SHAPE(2, 3), &x));
  OK(kiln_graph_input(g, "i", KILN_I32, 1, SHAPE(3), &i));
  OK(kiln_graph_unary(g, KILN_EXP, x, &v));
  OK(kiln_graph_reduce(g, KILN_REDUCE_SUM, v, 0, NULL, 0, &loss));
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_grad(g, v, 1, &x, gr));          /* loss not scalar */
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_grad(g, loss, 1, &i, gr));       /* wrt not float */
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_grad(g, loss, 2, (const kiln_tensor[]){x, x}, gr));  /* not distinct */
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_grad(g, 999, 1, &x, gr));
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_grad(NULL, loss, 1, &x, gr));
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_grad(g, loss, 1, NULL, gr));
  OK(kiln_graph_reduce(g, KILN_REDUCE_SUM, i, 0, NULL, 0, &s));
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_grad(g, s, 1, &x, gr));          /* integer loss */
  /* a wrt the loss does not depend on gets zeros */
  kiln_tensor z;
  OK(kiln_graph_input(g, "z", KILN_F32, 1, SHAPE(4), &z));
  OK(kiln_graph_grad(g, loss, 2, (const kiln_tensor[]){x, z}, gr));
  int rank;
  int64_t shape[KILN_MAX_RANK];
  OK(kiln_tensor_shape(g, gr[1], &rank, shape));
  CHECK(rank == 1 && shape[0] == 4);
  OK(graph_check(&g->g));
  kiln_graph_free(g);
}

/* ---- collectives: the mean over the ranks, here a group of one (tests/runtime/test_dist.c) ---- */

static kiln_status b_all_reduce(kiln_graph *g, const kiln_tensor *x, kiln_tensor *y) {
  kiln_tensor m, t;
  kiln_status s = kiln_graph_all_reduce_mean(g, x[0], &m);  /* read twice: its gradient adds up */
  if (!s) s = kiln_graph_unary(g, KILN_TANH, m, &t);
  return s ? s : kiln_graph_binary(g, KILN_MUL, t, m, y);
}

static void test_collective(void) {
  In x = IN(-2, 2, 4, 3);
  check("all_reduce_mean", 1, &x, b_all_reduce, DEFAULT);
}

int main(void) {
  test_api_checks();
  test_collective();
  test_unary();
  test_binary();
  test_select_cast();
  test_movement();
  test_reduce();
  test_matmul();
  test_conv();
  test_pool();
  test_compose();
  test_broken_rule();
  fprintf(stderr, "%d gradient checks run, %ld elements compared\n", cases_run, elements_checked);
  TEST_MAIN_END();
}
