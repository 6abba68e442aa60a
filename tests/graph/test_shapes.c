/*
 * Shape and dtype inference for every op in ops.def and every composition, built
 * through the public API: broadcasting, negative axes, rank-0 scalars, zero-size
 * dims, numpy matmul, conv and pooling arithmetic, ONNX slice clamping. Expected
 * shapes are worked out by hand in the comments. Every graph passes graph_check.
 */
#include "graph/graph.h"
#include "test.h"

#include <limits.h>

static kiln_graph *G;

#define DIMS(...) (int)(sizeof((int64_t[]){ __VA_ARGS__ }) / sizeof(int64_t)), (int64_t[]){ __VA_ARGS__ }

static kiln_tensor input(kiln_dtype t, int rank, const int64_t *shape) {
  kiln_tensor x = -1;
  OK(kiln_graph_input(G, NULL, t, rank, shape, &x));
  return x;
}

static kiln_tensor scalar_in(kiln_dtype t) { return input(t, 0, NULL); }

/* Checks x's dtype and shape; reports the caller's line. */
static void expect_at(int line, kiln_tensor x, kiln_dtype t, int rank, const int64_t *shape) {
  int r = -1;
  int64_t s[KILN_MAX_RANK];
  kiln_dtype d;
  if (kiln_tensor_shape(G, x, &r, s) || kiln_tensor_dtype(G, x, &d)) {
    test_failures++;
    fprintf(stderr, "line %d: tensor %d: %s\n", line, (int)x, kiln_last_error());
    return;
  }
  bool ok = d == t && r == rank;
  for (int i = 0; ok && i < rank; i++) ok = s[i] == shape[i];
  if (!ok) {
    char got[200], want[200];
    graph_shape_str(r, s, got, sizeof got);
    graph_shape_str(rank, shape, want, sizeof want);
    test_failures++;
    fprintf(stderr, "line %d: got %s%s, expected %s%s\n", line, kiln_dtype_name(d), got, kiln_dtype_name(t), want);
  }
}
#define EXPECT(x, t, ...) expect_at(__LINE__, x, t, DIMS(__VA_ARGS__))
#define EXPECT_SCALAR(x, t) expect_at(__LINE__, x, t, 0, NULL)

static const Node *producer(kiln_tensor x) {
  const Tensor *t = &G->g.tensors[x];
  return t->kind == T_VALUE ? &G->g.nodes[t->node] : NULL;
}

static void test_unary(void) {
  kiln_tensor xf = input(KILN_F32, DIMS(2, 3)), y;
  for (int op = 0; op < KILN_UNARY_COUNT; op++) {
    if (op == KILN_NOT) continue;
    OK(kiln_graph_unary(G, op, xf, &y));
    if (op == KILN_ISNAN || op == KILN_ISINF) EXPECT(y, KILN_BOOL, 2, 3);
    else EXPECT(y, KILN_F32, 2, 3);
  }
  /* ints and bool where the rules allow them */
  kiln_tensor xi = input(KILN_I16, DIMS(0, 4)), xu = input(KILN_U32, DIMS(5)), xb = scalar_in(KILN_BOOL);
  OK(kiln_graph_unary(G, KILN_NEG, xi, &y)); EXPECT(y, KILN_I16, 0, 4);
  OK(kiln_graph_unary(G, KILN_SIGN, xi, &y)); EXPECT(y, KILN_I16, 0, 4);
  OK(kiln_graph_unary(G, KILN_ABS, xu, &y)); EXPECT(y, KILN_U32, 5);
  OK(kiln_graph_unary(G, KILN_RELU, xu, &y)); EXPECT(y, KILN_U32, 5);
  OK(kiln_graph_unary(G, KILN_SIGN, xu, &y)); EXPECT(y, KILN_U32, 5);
  OK(kiln_graph_unary(G, KILN_NOT, xu, &y)); EXPECT(y, KILN_U32, 5);
  OK(kiln_graph_unary(G, KILN_NOT, xb, &y)); EXPECT_SCALAR(y, KILN_BOOL);
  kiln_tensor xh = input(KILN_BF16, DIMS(1));
  OK(kiln_graph_unary(G, KILN_GELU_TANH, xh, &y)); EXPECT(y, KILN_BF16, 1);
}

static void test_binary(void) {
  kiln_tensor a = input(KILN_F32, DIMS(2, 1, 3)), b = input(KILN_F32, DIMS(4, 1)), y;
  /* [2,1,3] with [4,1] -> [2,4,3] */
  for (int op = KILN_ADD; op <= KILN_GE; op++) {
    OK(kiln_graph_binary(G, op, a, b, &y));
    EXPECT(y, op >= KILN_EQ ? KILN_BOOL : KILN_F32, 2, 4, 3);
  }
  kiln_tensor p = input(KILN_BOOL, DIMS(3)), q = scalar_in(KILN_BOOL);
  for (int op = KILN_AND; op <= KILN_XOR; op++) {
    OK(kiln_graph_binary(G, op, p, q, &y));
    EXPECT(y, KILN_BOOL, 3);
  }
  OK(kiln_graph_binary(G, KILN_EQ, p, q, &y)); EXPECT(y, KILN_BOOL, 3);
  kiln_tensor u = input(KILN_U8, DIMS(2, 2)), s = input(KILN_I64, DIMS(2)), t = input(KILN_I64, DIMS(2, 1));
  OK(kiln_graph_binary(G, KILN_SHL, u, u, &y)); EXPECT(y, KILN_U8, 2, 2);
  OK(kiln_graph_binary(G, KILN_SHR, s, t, &y)); EXPECT(y, KILN_I64, 2, 2);
  OK(kiln_graph_binary(G, KILN_MOD, s, t, &y)); EXPECT(y, KILN_I64, 2, 2);
  /* rank 0 with anything; zero-size dims broadcast against 1 */
  kiln_tensor sc = scalar_in(KILN_F32), z = input(KILN_F32, DIMS(0, 3)), one = input(KILN_F32, DIMS(1, 3));
  OK(kiln_graph_binary(G, KILN_MUL, sc, sc, &y)); EXPECT_SCALAR(y, KILN_F32);
  OK(kiln_graph_binary(G, KILN_MUL, sc, a, &y)); EXPECT(y, KILN_F32, 2, 1, 3);
  OK(kiln_graph_binary(G, KILN_SUB, z, one, &y)); EXPECT(y, KILN_F32, 0, 3);
  OK(kiln_graph_binary(G, KILN_SUB, one, z, &y)); EXPECT(y, KILN_F32, 0, 3);
  /* integer literal: max(x, 0) on f32 x makes an f32 constant */
  kiln_tensor zero, zf;
  OK(kiln_graph_scalar(G, KILN_I64, 0, &zero));
  OK(kiln_graph_binary(G, KILN_MAX, a, zero, &y)); EXPECT(y, KILN_F32, 2, 1, 3);
  const Node *n = producer(y);
  CHECK(n && n->op == OP_MAX && G->g.tensors[n->in[1]].dtype == KILN_F32 && G->g.tensors[n->in[1]].kind == T_CONST);
  OK(kiln_graph_binary(G, KILN_SUB, zero, a, &y)); EXPECT(y, KILN_F32, 2, 1, 3);
  n = producer(y);
  CHECK(n && G->g.tensors[n->in[0]].dtype == KILN_F32 && n->in[1] == a);
  /* a float literal of an integral value into an int tensor */
  OK(kiln_graph_scalar(G, KILN_F32, 3, &zf));
  OK(kiln_graph_binary(G, KILN_ADD, s, zf, &y)); EXPECT(y, KILN_I64, 2);
  n = producer(y);
  CHECK(n && G->g.tensors[n->in[1]].dtype == KILN_I64 &&
        dtype_load_i64(KILN_I64, G->g.tensors[n->in[1]].data, 0) == 3);
}

static void test_where_cast(void) {
  kiln_tensor c = input(KILN_BOOL, DIMS(2, 1)), a = input(KILN_F16, DIMS(3)), b = scalar_in(KILN_F16), y;
  OK(kiln_graph_where(G, c, a, b, &y)); EXPECT(y, KILN_F16, 2, 3);
  kiln_tensor zero;
  OK(kiln_graph_scalar(G, KILN_I32, 0, &zero));
  OK(kiln_graph_where(G, c, zero, a, &y)); EXPECT(y, KILN_F16, 2, 3);
  for (int from = 0; from < KILN_DTYPE_COUNT; from++) {
    kiln_tensor x = input(from, DIMS(4, 0));
    for (int to = 0; to < KILN_DTYPE_COUNT; to++) {
      if ((from == KILN_STRING) != (to == KILN_STRING)) {  /* no number is a string */
        CHECK(kiln_graph_cast(G, x, to, &y) == KILN_ERR_INVALID_ARG);
        continue;
      }
      OK(kiln_graph_cast(G, x, to, &y));
      EXPECT(y, to, 4, 0);
    }
  }
}

static void test_movement(void) {
  kiln_tensor x = input(KILN_F32, DIMS(2, 3, 4)), y;
  OK(kiln_graph_reshape(G, x, DIMS(4, -1), &y)); EXPECT(y, KILN_F32, 4, 6);
  OK(kiln_graph_reshape(G, x, DIMS(-1), &y)); EXPECT(y, KILN_F32, 24);
  kiln_tensor one = input(KILN_I8, DIMS(1, 1)), e = input(KILN_F32, DIMS(0, 3));
  OK(kiln_graph_reshape(G, one, 0, NULL, &y)); EXPECT_SCALAR(y, KILN_I8);
  OK(kiln_graph_reshape(G, e, DIMS(3, 0, 7), &y)); EXPECT(y, KILN_F32, 3, 0, 7);

  OK(kiln_graph_transpose(G, x, (int[]){ 2, 0, 1 }, &y)); EXPECT(y, KILN_F32, 4, 2, 3);
  OK(kiln_graph_transpose(G, x, NULL, &y)); EXPECT(y, KILN_F32, 4, 3, 2);

  OK(kiln_graph_concat(G, 2, (kiln_tensor[]){ x, x }, -2, &y)); EXPECT(y, KILN_F32, 2, 6, 4);
  kiln_tensor x0 = input(KILN_F32, DIMS(2, 0, 4));
  OK(kiln_graph_concat(G, 3, (kiln_tensor[]){ x0, x, x0 }, 1, &y)); EXPECT(y, KILN_F32, 2, 3, 4);
  OK(kiln_graph_concat(G, 1, &x, 0, &y)); EXPECT(y, KILN_F32, 2, 3, 4);

  /* pads: begins {1,0,2}, ends {0,-1,3}: [2+1, 3-1, 4+5] */
  OK(kiln_graph_pad(G, x, (int64_t[]){ 1, 0, 2, 0, -1, 3 }, KILN_PAD_CONSTANT, 0.5, &y)); EXPECT(y, KILN_F32, 3, 2, 9);
  OK(kiln_graph_pad(G, x, (int64_t[]){ 1, 2, 3, 1, 2, 3 }, KILN_PAD_REFLECT, 0, &y)); EXPECT(y, KILN_F32, 4, 7, 10);
  OK(kiln_graph_pad(G, x, (int64_t[]){ 5, 0, 0, 0, 0, 9 }, KILN_PAD_EDGE, 0, &y)); EXPECT(y, KILN_F32, 7, 3, 13);

  kiln_tensor c = input(KILN_F32, DIMS(3, 1));
  OK(kiln_graph_expand(G, c, DIMS(2, 1, 4), &y)); EXPECT(y, KILN_F32, 2, 3, 4);
  OK(kiln_graph_expand(G, c, DIMS(1), &y)); EXPECT(y, KILN_F32, 3, 1); /* ONNX: the broadcast of both */
  OK(kiln_graph_expand(G, c, DIMS(3, 0), &y)); EXPECT(y, KILN_F32, 3, 0);

  /* gather: data [5,4,3], indices [2,6] on axis 1 -> [5,2,6,3]; axis -1 -> [5,4,2,6] */
  kiln_tensor d = input(KILN_F32, DIMS(5, 4, 3)), idx = input(KILN_I64, DIMS(2, 6)), is = scalar_in(KILN_I32);
  OK(kiln_graph_gather(G, d, idx, 1, &y)); EXPECT(y, KILN_F32, 5, 2, 6, 3);
  OK(kiln_graph_gather(G, d, idx, -1, &y)); EXPECT(y, KILN_F32, 5, 4, 2, 6);
  OK(kiln_graph_gather(G, d, is, 0, &y)); EXPECT(y, KILN_F32, 4, 3);
  kiln_tensor ci;
  OK(kiln_graph_const(G, KILN_I32, DIMS(3), (int32_t[]){ -5, 0, 4 }, &ci));
  OK(kiln_graph_gather(G, d, ci, 0, &y)); EXPECT(y, KILN_F32, 3, 4, 3);

  OK(kiln_graph_tile(G, x, (int64_t[]){ 2, 1, 0 }, &y)); EXPECT(y, KILN_F32, 4, 3, 0);
  kiln_tensor s = scalar_in(KILN_F64);
  OK(kiln_graph_tile(G, s, NULL, &y)); EXPECT_SCALAR(y, KILN_F64);
}

/* Slices of a [10] vector, and what ONNX says they select. */
static void test_slice(void) {
  kiln_tensor x = input(KILN_F32, DIMS(10)), y;
  struct { int64_t start, end, step, len, first, stride; } cases[] = {
    { 0, 10, 1, 10, 0, 1 },
    { 2, 7, 2, 3, 2, 2 },            /* 2 4 6 */
    { -3, 100, 1, 3, 7, 1 },         /* 7 8 9 */
    { 8, 1, -3, 3, 8, -3 },          /* 8 5 2 */
    { -1, -100, -1, 10, 9, -1 },     /* reversed */
    { 100, 0, -4, 3, 9, -4 },        /* start clamps to 9: 9 5 1 */
    { 20, 30, 1, 0, 0, 1 },          /* empty */
    { 3, 3, 1, 0, 0, 1 },            /* empty */
    { 0, INT64_MAX, INT64_MAX, 1, 0, 1 }, /* one element; the huge step is normalised */
    { INT64_MIN, INT64_MAX, 3, 4, 0, 3 }, /* 0 3 6 9 */
    { 5, INT64_MIN, INT64_MIN, 1, 5, -1 },
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (kiln_graph_slice(G, x, 1, &cases[i].start, &cases[i].end, NULL, &cases[i].step, &y)) {
      test_failures++;
      fprintf(stderr, "slice case %zu: %s\n", i, kiln_last_error());
      continue;
    }
    const Node *n = producer(y);
    EXPECT(y, KILN_F32, cases[i].len);
    CHECK_MSG(n && n->op == OP_SLICE && n->attr.starts[0] == cases[i].first && n->attr.steps[0] == cases[i].stride,
              "case %zu: start %lld step %lld", i, n ? (long long)n->attr.starts[0] : -1,
              n ? (long long)n->attr.steps[0] : -1);
  }
  /* several axes, negative axis, untouched axes keep their size */
  kiln_tensor m = input(KILN_I32, DIMS(4, 5, 6));
  OK(kiln_graph_slice(G, m, 2, (int64_t[]){ -1, 1 }, (int64_t[]){ 0, 5 }, (int[]){ -1, 0 }, (int64_t[]){ -2, 2 }, &y));
  EXPECT(y, KILN_I32, 2, 5, 3); /* axis 2: 5 3 1; axis 0: 1 3 */
  const Node *n = producer(y);
  CHECK(n && n->attr.starts[0] == 1 && n->attr.steps[0] == 2 && n->attr.starts[1] == 0 && n->attr.steps[1] == 1 &&
        n->attr.starts[2] == 5 && n->attr.steps[2] == -2);
  OK(kiln_graph_slice(G, m, 0, NULL, NULL, NULL, NULL, &y)); EXPECT(y, KILN_I32, 4, 5, 6);
}

static void test_reductions(void) {
  kiln_tensor x = input(KILN_F32, DIMS(2, 3, 4)), y;
  for (int op = 0; op < KILN_REDUCE_COUNT; op++) {
    OK(kiln_graph_reduce(G, op, x, 2, (int[]){ -1, 0 }, 0, &y)); EXPECT(y, KILN_F32, 3);
    OK(kiln_graph_reduce(G, op, x, 2, (int[]){ 2, 0 }, 1, &y)); EXPECT(y, KILN_F32, 1, 3, 1);
    OK(kiln_graph_reduce(G, op, x, 0, NULL, 0, &y)); EXPECT_SCALAR(y, KILN_F32);
    OK(kiln_graph_reduce(G, op, x, 0, NULL, 1, &y)); EXPECT(y, KILN_F32, 1, 1, 1);
    kiln_tensor s = scalar_in(KILN_F64);
    OK(kiln_graph_reduce(G, op, s, 0, NULL, 1, &y)); EXPECT_SCALAR(y, KILN_F64);
    kiln_tensor e = input(KILN_F32, DIMS(0, 5));
    OK(kiln_graph_reduce(G, op, e, 1, (int[]){ 0 }, 0, &y)); EXPECT(y, KILN_F32, 5);
  }
  kiln_tensor xi = input(KILN_I32, DIMS(6, 2));
  int int_ops[] = { KILN_REDUCE_SUM, KILN_REDUCE_MEAN, KILN_REDUCE_MAX, KILN_REDUCE_MIN, KILN_REDUCE_PROD,
                    KILN_REDUCE_SUM_SQUARE, KILN_REDUCE_L1 };
  for (size_t i = 0; i < sizeof int_ops / sizeof int_ops[0]; i++) {
    OK(kiln_graph_reduce(G, int_ops[i], xi, 1, (int[]){ 0 }, 0, &y));
    EXPECT(y, KILN_I32, 2);
  }
  /* primitive reductions map to one node each; mean is sum then mul */
  OK(kiln_graph_reduce(G, KILN_REDUCE_MAX, x, 1, (int[]){ 1 }, 0, &y));
  CHECK(producer(y)->op == OP_REDUCE_MAX && producer(y)->attr.n_axes == 1 && producer(y)->attr.axes[0] == 1);
  OK(kiln_graph_reduce(G, KILN_REDUCE_MEAN, x, 1, (int[]){ 1 }, 0, &y));
  CHECK(producer(y)->op == OP_MUL);

  OK(kiln_graph_argmax(G, x, -1, 0, 0, &y)); EXPECT(y, KILN_I64, 2, 3);
  OK(kiln_graph_argmin(G, x, 1, 1, 1, &y)); EXPECT(y, KILN_I64, 2, 1, 4);
  CHECK(producer(y)->attr.select_last == 1 && producer(y)->attr.axis == 1);
  OK(kiln_graph_argmax(G, xi, 0, 0, 0, &y)); EXPECT(y, KILN_I64, 2);
}

static void test_matmul(void) {
  kiln_tensor a = input(KILN_F32, DIMS(3, 4)), b = input(KILN_F32, DIMS(4, 5)), v = input(KILN_F32, DIMS(4)), y;
  OK(kiln_graph_matmul(G, a, b, &y)); EXPECT(y, KILN_F32, 3, 5);
  OK(kiln_graph_matmul(G, v, b, &y)); EXPECT(y, KILN_F32, 5);
  OK(kiln_graph_matmul(G, a, v, &y)); EXPECT(y, KILN_F32, 3);
  OK(kiln_graph_matmul(G, v, v, &y)); EXPECT_SCALAR(y, KILN_F32);
  kiln_tensor ba = input(KILN_F32, DIMS(2, 1, 3, 4)), bb = input(KILN_F32, DIMS(5, 4, 6));
  OK(kiln_graph_matmul(G, ba, bb, &y)); EXPECT(y, KILN_F32, 2, 5, 3, 6);
  OK(kiln_graph_matmul(G, ba, v, &y)); EXPECT(y, KILN_F32, 2, 1, 3);
  OK(kiln_graph_matmul(G, v, bb, &y)); EXPECT(y, KILN_F32, 5, 6);
  kiln_tensor c = input(KILN_F32, DIMS(6, 2));
  OK(kiln_graph_matmul(G, bb, c, &y)); EXPECT(y, KILN_F32, 5, 4, 2); /* 2-D broadcast against 3-D */
  kiln_tensor z = input(KILN_F32, DIMS(0, 4)), k0a = input(KILN_I32, DIMS(3, 0)), k0b = input(KILN_I32, DIMS(0, 5));
  OK(kiln_graph_matmul(G, z, b, &y)); EXPECT(y, KILN_F32, 0, 5);
  OK(kiln_graph_matmul(G, k0a, k0b, &y)); EXPECT(y, KILN_I32, 3, 5);
}

static kiln_conv_params conv_params(int spatial, const int64_t *strides, const int64_t *dil, const int64_t *pads,
                                    int64_t group) {
  kiln_conv_params p = { 0 };
  p.spatial = spatial;
  for (int i = 0; i < spatial; i++) {
    p.strides[i] = strides ? strides[i] : 0;
    p.dilations[i] = dil ? dil[i] : 0;
    p.pads[i] = pads ? pads[i] : 0;
    p.pads[spatial + i] = pads ? pads[spatial + i] : 0;
  }
  p.group = group;
  return p;
}

static void test_conv(void) {
  kiln_tensor y;
  /* 1-D: in 10, k 3, stride 2, pads 1+1, dilation 2: (10+2-5)/2+1 = 4; group 2: w [6, 4/2, 3] */
  kiln_tensor x1 = input(KILN_F32, DIMS(1, 4, 10)), w1 = input(KILN_F32, DIMS(6, 2, 3));
  kiln_conv_params p = conv_params(1, (int64_t[]){ 2 }, (int64_t[]){ 2 }, (int64_t[]){ 1, 1 }, 2);
  OK(kiln_graph_conv(G, x1, w1, -1, &p, &y)); EXPECT(y, KILN_F32, 1, 6, 4);
  CHECK(producer(y)->op == OP_CONV && producer(y)->attr.conv.group == 2);
  /* 2-D: H (8+1+1-3)/1+1 = 8, W (9-2)/2+1 = 4; defaults 0 -> 1 */
  kiln_tensor x2 = input(KILN_F64, DIMS(2, 3, 8, 9)), w2 = input(KILN_F64, DIMS(4, 3, 3, 2));
  kiln_tensor bias = input(KILN_F64, DIMS(4));
  p = conv_params(2, (int64_t[]){ 0, 2 }, NULL, (int64_t[]){ 1, 0, 1, 0 }, 0);
  OK(kiln_graph_conv(G, x2, w2, -1, &p, &y)); EXPECT(y, KILN_F64, 2, 4, 8, 4);
  CHECK(producer(y)->attr.conv.strides[0] == 1 && producer(y)->attr.conv.dilations[1] == 1 &&
        producer(y)->attr.conv.group == 1);
  OK(kiln_graph_conv(G, x2, w2, bias, &p, &y)); EXPECT(y, KILN_F64, 2, 4, 8, 4);
  const Node *n = producer(y);
  CHECK(n->op == OP_ADD);
  const Node *r = &G->g.nodes[G->g.tensors[n->in[1]].node];
  CHECK(r->op == OP_RESHAPE && r->attr.shape_rank == 3 && r->attr.shape[0] == 4 && r->attr.shape[2] == 1);
  /* 3-D: D 5-(2*1+1)+1 = 3 (dilation 2, k 2); H 6-3+1 = 4; W 7 */
  kiln_tensor x3 = input(KILN_F16, DIMS(1, 2, 5, 6, 7)), w3 = input(KILN_F16, DIMS(3, 2, 2, 3, 1));
  p = conv_params(3, NULL, (int64_t[]){ 2, 1, 1 }, NULL, 1);
  OK(kiln_graph_conv(G, x3, w3, -1, &p, &y)); EXPECT(y, KILN_F16, 1, 3, 3, 4, 7);
  /* depthwise: group = C = M */
  kiln_tensor xd = input(KILN_F32, DIMS(0, 8, 5, 5)), wd = input(KILN_F32, DIMS(8, 1, 3, 3));
  p = conv_params(2, (int64_t[]){ 2, 2 }, NULL, (int64_t[]){ 1, 1, 1, 1 }, 8);
  OK(kiln_graph_conv(G, xd, wd, -1, &p, &y)); EXPECT(y, KILN_F32, 0, 8, 3, 3);
}

static kiln_pool_params pool_params(int spatial, const int64_t *k, const int64_t *s, const int64_t *pads, int ceil) {
  kiln_pool_params p = { 0 };
  p.spatial = spatial;
  for (int i = 0; i < spatial; i++) {
    p.kernel[i] = k[i];
    p.strides[i] = s ? s[i] : 0;
    p.pads[i] = pads ? pads[i] : 0;
    p.pads[spatial + i] = pads ? pads[spatial + i] : 0;
  }
  p.ceil_mode = ceil;
  return p;
}

static void test_pool(void) {
  kiln_tensor y, x = input(KILN_F32, DIMS(1, 1, 5));
  /* in 5, k 2, s 2: floor (3/2)+1 = 2; ceil 3 (last window starts at 4 < 5) */
  kiln_pool_params p = pool_params(1, (int64_t[]){ 2 }, (int64_t[]){ 2 }, NULL, 0);
  OK(kiln_graph_pool(G, KILN_POOL_MAX, x, &p, &y)); EXPECT(y, KILN_F32, 1, 1, 2);
  p.ceil_mode = 1;
  OK(kiln_graph_pool(G, KILN_POOL_AVG, x, &p, &y)); EXPECT(y, KILN_F32, 1, 1, 3);
  /* pads 1+1: span 5; floor 3; ceil would be 4, but the 4th window starts at 6 >= 5+1: dropped -> 3 */
  p = pool_params(1, (int64_t[]){ 2 }, (int64_t[]){ 2 }, (int64_t[]){ 1, 1 }, 1);
  OK(kiln_graph_pool(G, KILN_POOL_MAX, x, &p, &y)); EXPECT(y, KILN_F32, 1, 1, 3);
  /* 2-D, dilation 2, stride 1 default: 7 - 3 + 1 = 5, 6 - 5 + 1 = 2 (k 3 dilated 5) */
  kiln_tensor x2 = input(KILN_F64, DIMS(2, 3, 7, 6));
  p = pool_params(2, (int64_t[]){ 2, 3 }, NULL, NULL, 0);
  p.dilations[0] = 2;
  p.dilations[1] = 2;
  OK(kiln_graph_pool(G, KILN_POOL_MAX, x2, &p, &y)); EXPECT(y, KILN_F64, 2, 3, 5, 2);
  /* 3-D with count_include_pad */
  kiln_tensor x3 = input(KILN_F32, DIMS(1, 2, 4, 4, 4));
  p = pool_params(3, (int64_t[]){ 3, 3, 3 }, (int64_t[]){ 2, 2, 2 }, (int64_t[]){ 1, 1, 1, 1, 1, 1 }, 0);
  p.count_include_pad = 1;
  OK(kiln_graph_pool(G, KILN_POOL_AVG, x3, &p, &y)); EXPECT(y, KILN_F32, 1, 2, 2, 2, 2);
  CHECK(producer(y)->op == OP_AVG_POOL && producer(y)->attr.pool.count_include_pad == 1);
  /* global pools reduce the spatial dims with keepdims */
  OK(kiln_graph_global_pool(G, KILN_POOL_AVG, x3, &y)); EXPECT(y, KILN_F32, 1, 2, 1, 1, 1);
  OK(kiln_graph_global_pool(G, KILN_POOL_MAX, x2, &y)); EXPECT(y, KILN_F64, 2, 3, 1, 1);
  CHECK(producer(y)->op == OP_REDUCE_MAX && producer(y)->attr.n_axes == 2 && producer(y)->attr.keepdims == 1);
}

static void test_compositions(void) {
  kiln_tensor x = input(KILN_F32, DIMS(2, 3, 4)), y;
  OK(kiln_graph_softmax(G, x, -1, &y)); EXPECT(y, KILN_F32, 2, 3, 4);
  CHECK(producer(y)->op == OP_DIV);
  OK(kiln_graph_log_softmax(G, x, 0, &y)); EXPECT(y, KILN_F32, 2, 3, 4);
  CHECK(producer(y)->op == OP_SUB);
  kiln_tensor sc = input(KILN_F32, DIMS(3, 4)), bi = input(KILN_F32, DIMS(4));
  OK(kiln_graph_layernorm(G, x, sc, bi, 1, 1e-5, &y)); EXPECT(y, KILN_F32, 2, 3, 4);
  OK(kiln_graph_layernorm(G, x, -1, -1, -1, 1e-5, &y)); EXPECT(y, KILN_F32, 2, 3, 4);
  kiln_tensor img = input(KILN_F32, DIMS(2, 3, 5, 5)), c = input(KILN_F32, DIMS(3));
  OK(kiln_graph_batchnorm(G, img, c, c, c, c, 1e-5, &y)); EXPECT(y, KILN_F32, 2, 3, 5, 5);
  kiln_tensor flat = input(KILN_F32, DIMS(7, 3));
  OK(kiln_graph_batchnorm(G, flat, c, c, c, c, 1e-5, &y)); EXPECT(y, KILN_F32, 7, 3);
  kiln_tensor s;
  OK(kiln_graph_scalar(G, KILN_BF16, 1.5, &s)); EXPECT_SCALAR(s, KILN_BF16);
  CHECK(G->g.tensors[s].kind == T_CONST && dtype_load_f64(KILN_BF16, G->g.tensors[s].data, 0) == 1.5);
}

/* Every node in the graph is a primitive from ops.def with the documented arity. */
static void test_all_primitive(void) {
  const Graph *g = &G->g;
  for (int i = 0; i < g->n_nodes; i++) {
    const Node *n = &g->nodes[i];
    CHECK((unsigned)n->op < OP_COUNT);
    CHECK(op_arity[n->op] < 0 || n->n_in == op_arity[n->op]);
  }
  CHECK(strcmp(op_names[OP_GELU_TANH], "gelu_tanh") == 0 && op_arity[OP_WHERE] == 3 && op_arity[OP_CONCAT] == -1);
  CHECK(op_expr_kind[OP_MATMUL] == EXPR_RED && op_expr_kind[OP_SLICE] == EXPR_INJ);
}

int main(void) {
  OK(kiln_graph_create(&G));
  test_unary();
  test_binary();
  test_where_cast();
  test_movement();
  test_slice();
  test_reductions();
  test_matmul();
  test_conv();
  test_pool();
  test_compositions();
  test_all_primitive();
  OK(graph_check(&G->g));
  printf("graph: %d tensors, %d nodes\n", G->g.n_tensors, G->g.n_nodes);
  kiln_graph_free(G);
  TEST_MAIN_END();
}
