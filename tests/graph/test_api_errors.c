/*
 * Bad input to the graph API: every call returns the right status with a message
 * naming the bad thing, and leaves the graph exactly as it was (no tensors or nodes
 * added, even by compositions that fail half way). Then allocation failure: a small
 * graph is built with the Nth allocation failing for N = 1, 2, ... until it
 * succeeds; each failure must be KILN_ERR_NO_MEMORY and leak nothing (ASan's leak
 * checker sees that in the sanitizer build). Also: graph_check catches a corrupted
 * graph, graph_print names every node.
 */
#include "graph/graph.h"
#include "test.h"

static kiln_graph *G;

#define DIMS(...) (int)(sizeof((int64_t[]){ __VA_ARGS__ }) / sizeof(int64_t)), (int64_t[]){ __VA_ARGS__ }

/* call must fail with status s, a message containing sub, and no change to G. */
#define FAILS_WITH(s, sub, call)                                                                             \
  do {                                                                                                       \
    int nt_ = G->g.n_tensors, nn_ = G->g.n_nodes, no_ = G->g.n_outputs, na_ = G->g.n_assigns;                \
    kiln_status st_ = (call);                                                                                \
    if (st_ != (s) || !strstr(kiln_last_error(), sub)) {                                                     \
      test_failures++;                                                                                       \
      fprintf(stderr, "%s:%d: %s -> %s \"%s\", expected %s with \"%s\"\n", __FILE__, __LINE__, #call,       \
              kiln_status_name(st_), kiln_last_error(), kiln_status_name(s), sub);                           \
    }                                                                                                        \
    if (G->g.n_tensors != nt_ || G->g.n_nodes != nn_ || G->g.n_outputs != no_ || G->g.n_assigns != na_) {    \
      test_failures++;                                                                                       \
      fprintf(stderr, "%s:%d: %s changed the graph\n", __FILE__, __LINE__, #call);                          \
    }                                                                                                        \
  } while (0)
#define BAD(sub, call) FAILS_WITH(KILN_ERR_INVALID_ARG, sub, call)

static kiln_tensor input(const char *name, kiln_dtype t, int rank, const int64_t *shape) {
  kiln_tensor x = -1;
  OK(kiln_graph_input(G, name, t, rank, shape, &x));
  return x;
}

static void test_leaves(void) {
  kiln_tensor x;
  float data[4] = { 0 };
  BAD("graph is NULL", kiln_graph_input(NULL, "x", KILN_F32, 1, (int64_t[]){ 2 }, &x));
  BAD("out is NULL", kiln_graph_input(G, "x", KILN_F32, 1, (int64_t[]){ 2 }, NULL));
  BAD("dtype 99", kiln_graph_input(G, "x", (kiln_dtype)99, 1, (int64_t[]){ 2 }, &x));
  BAD("rank 9", kiln_graph_input(G, "x", KILN_F32, 9, (int64_t[9]){ 1 }, &x));
  BAD("rank -1", kiln_graph_input(G, "x", KILN_F32, -1, NULL, &x));
  BAD("shape is NULL", kiln_graph_input(G, "x", KILN_F32, 2, NULL, &x));
  BAD("dim 1 is -3", kiln_graph_input(G, "x", KILN_F32, 2, (int64_t[]){ 2, -3 }, &x));
  FAILS_WITH(KILN_ERR_NO_MEMORY, "'huge'",
             kiln_graph_input(G, "huge", KILN_F32, 2, (int64_t[]){ 1ll << 40, 1ll << 40 }, &x));
  /* numel fits, bytes do not */
  FAILS_WITH(KILN_ERR_NO_MEMORY, "overflows",
             kiln_graph_input(G, "wide", KILN_F64, 1, (int64_t[]){ 1ll << 61 }, &x));
  BAD("data is NULL", kiln_graph_param(G, "w", KILN_F32, 1, (int64_t[]){ 4 }, NULL, &x));
  BAD("data is NULL", kiln_graph_const(G, KILN_F32, 1, (int64_t[]){ 4 }, NULL, &x));
  OK(kiln_graph_const(G, KILN_F32, 1, (int64_t[]){ 0 }, NULL, &x)); /* empty: no data needed */
  OK(kiln_graph_param(G, "w", KILN_F32, 2, (int64_t[]){ 2, 2 }, data, &x));
  BAD("dtype 14", kiln_graph_scalar(G, KILN_DTYPE_COUNT, 1.0, &x));
  /* shapes with a zero dim and a huge one are fine (nothing to store) */
  OK(kiln_graph_input(G, "z", KILN_F32, 2, (int64_t[]){ 0, 1ll << 62 }, &x));
}

static void test_elementwise(void) {
  kiln_tensor f = input("f", KILN_F32, DIMS(2, 3)), g4 = input("g4", KILN_F32, DIMS(4, 3));
  kiln_tensor i = input("i", KILN_I32, DIMS(2, 3)), u = input("u", KILN_U8, DIMS(2, 3));
  kiln_tensor b = input("b", KILN_BOOL, DIMS(2, 3)), y;
  BAD("kiln_graph_unary: graph is NULL", kiln_graph_unary(NULL, KILN_EXP, f, &y));
  BAD("op 22", kiln_graph_unary(G, KILN_UNARY_COUNT, f, &y));
  BAD("x = 999", kiln_graph_unary(G, KILN_EXP, 999, &y));
  BAD("x = -1", kiln_graph_unary(G, KILN_EXP, -1, &y));
  BAD("out is NULL", kiln_graph_unary(G, KILN_EXP, f, NULL));
  BAD("(exp): input 0 'i' has dtype i32, expected a float", kiln_graph_unary(G, KILN_EXP, i, &y));
  BAD("(round): input 0 'b' has dtype bool", kiln_graph_unary(G, KILN_ROUND, b, &y));
  BAD("(isnan): input 0 'u'", kiln_graph_unary(G, KILN_ISNAN, u, &y));
  BAD("(neg): input 0 'u' has dtype u8", kiln_graph_unary(G, KILN_NEG, u, &y));
  BAD("(relu): input 0 'b'", kiln_graph_unary(G, KILN_RELU, b, &y));
  BAD("(not): input 0 'f' has dtype f32", kiln_graph_unary(G, KILN_NOT, f, &y));

  BAD("op 20", kiln_graph_binary(G, KILN_BINARY_COUNT, f, f, &y));
  BAD("b = 1234", kiln_graph_binary(G, KILN_ADD, f, 1234, &y));
  BAD("input 1 'g4' of shape [4,3] does not broadcast with [2,3]", kiln_graph_binary(G, KILN_ADD, f, g4, &y));
  BAD("(mul): input 0 'f' has dtype f32 but input 1 'i' has dtype i32", kiln_graph_binary(G, KILN_MUL, f, i, &y));
  BAD("(add): input 0 'b' has dtype bool", kiln_graph_binary(G, KILN_ADD, b, b, &y));
  BAD("(lt): input 0 'b' has dtype bool", kiln_graph_binary(G, KILN_LT, b, b, &y));
  BAD("(and): input 0 'f' has dtype f32, expected bool or an integer dtype", kiln_graph_binary(G, KILN_AND, f, f, &y));
  BAD("(xor): input 0 'f' has dtype f32, expected bool or an integer dtype", kiln_graph_binary(G, KILN_XOR, f, f, &y));
  OK(kiln_graph_binary(G, KILN_OR, i, i, &y));  /* ints: bitwise */
  BAD("(shl): input 0 'f' has dtype f32, expected an integer", kiln_graph_binary(G, KILN_SHL, f, f, &y));
  /* literals that do not fit the other operand: no constant is left behind */
  kiln_tensor half, big, two;
  OK(kiln_graph_scalar(G, KILN_F32, 0.5, &half));
  OK(kiln_graph_scalar(G, KILN_I32, 300, &big));
  OK(kiln_graph_scalar(G, KILN_I64, 2, &two));
  BAD("value 0.5) cannot be represented as i32", kiln_graph_binary(G, KILN_ADD, i, half, &y));
  BAD("cannot be represented as u8", kiln_graph_binary(G, KILN_ADD, big, u, &y));
  BAD("cannot be represented as bool", kiln_graph_binary(G, KILN_AND, b, two, &y));
  /* a one-element constant is coerced only when dtypes differ and then checked: f32 2 into a bool and */
  BAD("(and): input 0 'f'", kiln_graph_binary(G, KILN_AND, f, two, &y));

  kiln_tensor c = input("c", KILN_BOOL, DIMS(3)), c5 = input("c5", KILN_BOOL, DIMS(5));
  BAD("(where): condition 'f' has dtype f32, expected bool", kiln_graph_where(G, f, f, f, &y));
  BAD("(where): input 1 'f' has dtype f32 but input 2 'i' has dtype i32", kiln_graph_where(G, c, f, i, &y));
  BAD("(where): input 1 'f' of shape [2,3] does not broadcast with [5]", kiln_graph_where(G, c5, f, f, &y));
  BAD("cond = 77", kiln_graph_where(G, 77, f, f, &y));
  BAD("dtype 42", kiln_graph_cast(G, f, (kiln_dtype)42, &y));
}

static void test_movement(void) {
  kiln_tensor x = input("x", KILN_F32, DIMS(2, 3, 4)), y;
  kiln_tensor e = input("e", KILN_F32, DIMS(0, 4));
  BAD("-1 more than once", kiln_graph_reshape(G, x, DIMS(-1, 2, -1), &y));
  BAD("dim 1 is -2", kiln_graph_reshape(G, x, DIMS(4, -2), &y));
  BAD("cannot reshape 'x' of shape [2,3,4] (24 elements) to [5,5]", kiln_graph_reshape(G, x, DIMS(5, 5), &y));
  BAD("cannot infer dim 1", kiln_graph_reshape(G, x, DIMS(5, -1), &y));
  BAD("cannot infer dim 0", kiln_graph_reshape(G, e, DIMS(-1, 0), &y));
  BAD("rank 9", kiln_graph_reshape(G, x, 9, (int64_t[9]){ 1 }, &y));
  BAD("shape overflows", kiln_graph_reshape(G, x, DIMS(1ll << 40, 1ll << 40, -1), &y));

  BAD("perm is not a permutation of 0..2", kiln_graph_transpose(G, x, (int[]){ 0, 0, 1 }, &y));
  BAD("perm is not a permutation", kiln_graph_transpose(G, x, (int[]){ 0, 1, 3 }, &y));

  int64_t st = 0, en = 2, zero = 0;
  BAD("step 0 (axis 1) is 0", kiln_graph_slice(G, x, 1, &st, &en, (int[]){ 1 }, &zero, &y));
  BAD("axis 1 appears twice",
      kiln_graph_slice(G, x, 2, (int64_t[]){ 0, 0 }, (int64_t[]){ 1, 1 }, (int[]){ 1, -2 }, NULL, &y));
  BAD("axis 3 is out of range for rank 3", kiln_graph_slice(G, x, 1, &st, &en, (int[]){ 3 }, NULL, &y));
  BAD("n = 4 axes for 'x' of rank 3", kiln_graph_slice(G, x, 4, (int64_t[4]){ 0 }, (int64_t[4]){ 0 }, NULL, NULL, &y));
  BAD("starts or ends is NULL", kiln_graph_slice(G, x, 1, NULL, &en, NULL, NULL, &y));

  kiln_tensor z = input("z", KILN_F32, DIMS(2, 5, 4)), zi = input("zi", KILN_I32, DIMS(2, 3, 4));
  kiln_tensor s = input("s", KILN_F32, 0, NULL);
  BAD("input 1 'z' of shape [2,5,4] does not match input 0 'x' of shape [2,3,4] outside axis 2",
      kiln_graph_concat(G, 2, (kiln_tensor[]){ x, z }, 2, &y));
  BAD("input 0 'x' has dtype f32 but input 1 'zi' has dtype i32",
      kiln_graph_concat(G, 2, (kiln_tensor[]){ x, zi }, 0, &y));
  BAD("axis -4 is out of range for rank 3", kiln_graph_concat(G, 2, (kiln_tensor[]){ x, x }, -4, &y));
  BAD("n = 0", kiln_graph_concat(G, 0, (kiln_tensor[]){ x }, 0, &y));
  BAD("xs[1] = 5000", kiln_graph_concat(G, 2, (kiln_tensor[]){ x, 5000 }, 0, &y));
  BAD("axis 0 is out of range for rank 0", kiln_graph_concat(G, 2, (kiln_tensor[]){ s, s }, 0, &y));

  BAD("reflect pads 3 and 0 must be smaller than dim 3",
      kiln_graph_pad(G, x, (int64_t[]){ 0, 3, 0, 0, 0, 0 }, KILN_PAD_REFLECT, 0, &y));
  BAD("axis 0: pads -3 and 0 do not fit dim 2",
      kiln_graph_pad(G, x, (int64_t[]){ -3, 0, 0, 0, 0, 0 }, KILN_PAD_CONSTANT, 0, &y));
  BAD("edge padding of an empty dim", kiln_graph_pad(G, e, (int64_t[]){ 1, 0, 0, 0 }, KILN_PAD_EDGE, 0, &y));
  BAD("mode 7", kiln_graph_pad(G, x, (int64_t[6]){ 0 }, (kiln_pad_mode)7, 0, &y));
  BAD("pads is NULL", kiln_graph_pad(G, x, NULL, KILN_PAD_CONSTANT, 0, &y));

  BAD("'x' of shape [2,3,4] does not broadcast with [3,3]", kiln_graph_expand(G, x, DIMS(3, 3), &y));
  BAD("dim 0 is -1", kiln_graph_expand(G, x, DIMS(-1, 3, 4), &y));

  kiln_tensor fi = input("fi", KILN_F32, DIMS(2)), ii = input("ii", KILN_I64, DIMS(2)), ci;
  BAD("indices 'fi' have dtype f32, expected i32 or i64", kiln_graph_gather(G, x, fi, 0, &y));
  BAD("axis 3 is out of range", kiln_graph_gather(G, x, ii, 3, &y));
  OK(kiln_graph_const(G, KILN_I64, DIMS(2), (int64_t[]){ 1, -4 }, &ci));
  BAD("index -4 (element 1 of", kiln_graph_gather(G, x, ci, 1, &y));
  BAD("gather from axis 0 of size 0", kiln_graph_gather(G, e, ii, 0, &y));
  kiln_tensor big = input("big", KILN_I32, DIMS(1, 1, 1, 1, 1, 1));
  OK(kiln_graph_gather(G, x, big, 0, &y)); /* fits exactly: 2 + 6 */
  kiln_tensor big7 = input("big7", KILN_I32, DIMS(1, 1, 1, 1, 1, 1, 1));
  BAD("output rank 9 exceeds 8", kiln_graph_gather(G, x, big7, 0, &y));

  BAD("repeats[1] is -1", kiln_graph_tile(G, x, (int64_t[]){ 1, -1, 1 }, &y));
  BAD("axis 2: 4 * 4611686018427387904 overflows", kiln_graph_tile(G, x, (int64_t[]){ 1, 1, 1ll << 62 }, &y));
  FAILS_WITH(KILN_ERR_NO_MEMORY, "output shape [2,3,4611686018427387904] overflows",
             kiln_graph_tile(G, x, (int64_t[]){ 1, 1, 1ll << 60 }, &y));
}

static void test_reductions(void) {
  kiln_tensor x = input("x", KILN_F32, DIMS(2, 3, 4)), xi = input("xi", KILN_I32, DIMS(2, 0));
  kiln_tensor b = input("b", KILN_BOOL, DIMS(2)), e = input("e", KILN_F32, DIMS(3, 0)), y;
  BAD("(reduce_sum): axis 3 is out of range for 'x' of rank 3",
      kiln_graph_reduce(G, KILN_REDUCE_SUM, x, 1, (int[]){ 3 }, 0, &y));
  BAD("(reduce_mean): axis 1 appears twice", kiln_graph_reduce(G, KILN_REDUCE_MEAN, x, 2, (int[]){ 1, -2 }, 0, &y));
  BAD("op 9", kiln_graph_reduce(G, KILN_REDUCE_COUNT, x, 0, NULL, 0, &y));
  BAD("(reduce_max): 'b' is bool", kiln_graph_reduce(G, KILN_REDUCE_MAX, b, 0, NULL, 0, &y));
  BAD("(reduce_l2): 'xi' has dtype i32, expected a float", kiln_graph_reduce(G, KILN_REDUCE_L2, xi, 0, NULL, 0, &y));
  BAD("(reduce_log_sum_exp): 'xi'", kiln_graph_reduce(G, KILN_REDUCE_LOG_SUM_EXP, xi, 0, NULL, 0, &y));
  BAD("integer mean of 'xi' over zero elements",
      kiln_graph_reduce(G, KILN_REDUCE_MEAN, xi, 1, (int[]){ 1 }, 0, &y));
  BAD("axis -3 is out of range for rank 2", kiln_graph_argmax(G, xi, -3, 0, 0, &y));
  BAD("(argmin): axis 1 of 'e' is empty", kiln_graph_argmin(G, e, 1, 0, 0, &y));
  BAD("(argmax): input 0 'b' has dtype bool", kiln_graph_argmax(G, b, 0, 0, 0, &y));
  BAD("(argmax): axis 1 of 'xi' is empty", kiln_graph_argmax(G, xi, 1, 0, 0, &y));
  OK(kiln_graph_argmax(G, xi, 0, 0, 0, &y)); /* output [0] is empty: no index needed */
}

static void test_contractions(void) {
  kiln_tensor a = input("a", KILN_F32, DIMS(3, 4)), b = input("b", KILN_F32, DIMS(5, 6)), y;
  kiln_tensor s = input("s", KILN_F32, 0, NULL), bi = input("bi", KILN_BOOL, DIMS(4, 4));
  kiln_tensor ba = input("ba", KILN_F32, DIMS(2, 3, 4)), bb = input("bb", KILN_F32, DIMS(3, 4, 5));
  BAD("(matmul): inner dims differ: 'a' [3,4] and 'b' [5,6]", kiln_graph_matmul(G, a, b, &y));
  BAD("matmul operands must have rank >= 1 ('s' has 0", kiln_graph_matmul(G, s, a, &y));
  BAD("batch dims of 'ba' [2,3,4] and 'bb' [3,4,5] do not broadcast", kiln_graph_matmul(G, ba, bb, &y));
  BAD("input 0 'bi' has dtype bool", kiln_graph_matmul(G, bi, bi, &y));

  kiln_tensor x = input("x", KILN_F32, DIMS(1, 4, 8, 8)), w = input("w", KILN_F32, DIMS(6, 2, 3, 3));
  kiln_tensor wi = input("wi", KILN_I32, DIMS(6, 4, 3, 3)), big = input("bigw", KILN_F32, DIMS(6, 4, 9, 9));
  kiln_tensor bias = input("bias", KILN_F32, DIMS(5)), w1 = input("w1", KILN_F32, DIMS(6, 4, 3));
  kiln_conv_params p = { .spatial = 2 };
  BAD("need C % group == 0", kiln_graph_conv(G, x, w, -1, &p, &y)); /* w dim 1 is 2, C is 4, group 1 */
  p.group = 3;
  BAD("with group 3", kiln_graph_conv(G, x, w, -1, &p, &y));
  p.group = 2;
  OK(kiln_graph_conv(G, x, w, -1, &p, &y));
  BAD("bias 'bias' has shape [5], expected [6]", kiln_graph_conv(G, x, w, bias, &p, &y));
  BAD("bias = -2", kiln_graph_conv(G, x, w, -2, &p, &y));
  p.group = 1;
  BAD("input 0 'x' has dtype f32 but input 1 'wi' has dtype i32", kiln_graph_conv(G, x, wi, -1, &p, &y));
  BAD("spatial dim 0: input 8 with pads 0+0 is smaller than the dilated kernel (9", kiln_graph_conv(G, x, big, -1, &p, &y));
  p.pads[0] = 1; /* pads: begins then ends; H gets 1+0 and fits, W still does not */
  BAD("spatial dim 1: input 8 with pads 0+0", kiln_graph_conv(G, x, big, -1, &p, &y));
  p.pads[0] = 0;
  BAD("x 'x' has rank 4 and w 'w1' rank 3", kiln_graph_conv(G, x, w1, -1, &p, &y));
  p.strides[1] = -1;
  BAD("strides[1] is -1", kiln_graph_conv(G, x, w, -1, &p, &y));
  p.strides[1] = 0;
  p.spatial = 4;
  BAD("spatial = 4", kiln_graph_conv(G, x, w, -1, &p, &y));
  BAD("p is NULL", kiln_graph_conv(G, x, w, -1, NULL, &y));

  kiln_pool_params q = { .spatial = 2, .kernel = { 2, 0 } };
  BAD("kernel[1] is 0", kiln_graph_pool(G, KILN_POOL_MAX, x, &q, &y));
  q.kernel[1] = 2;
  q.spatial = 1;
  BAD("x 'x' has rank 4; 1 spatial dims need rank 3", kiln_graph_pool(G, KILN_POOL_AVG, x, &q, &y));
  q.spatial = 2;
  BAD("kind 5", kiln_graph_pool(G, (kiln_pool_kind)5, x, &q, &y));
  q.kernel[0] = 20;
  BAD("smaller than the dilated kernel 20", kiln_graph_pool(G, KILN_POOL_MAX, x, &q, &y));
  q.kernel[0] = 2;
  q.pads[3] = -1;
  BAD("pads for spatial dim 1 are negative", kiln_graph_pool(G, KILN_POOL_MAX, x, &q, &y));
  kiln_tensor xi = input("xi", KILN_I8, DIMS(1, 1, 4, 4));
  q.pads[3] = 0;
  BAD("(avg_pool): input 0 'xi' has dtype i8", kiln_graph_pool(G, KILN_POOL_AVG, xi, &q, &y)); /* max takes ints */
  kiln_tensor xb = input("xb", KILN_BOOL, DIMS(1, 1, 4, 4));
  BAD("(max_pool): input 0 'xb' has dtype bool", kiln_graph_pool(G, KILN_POOL_MAX, xb, &q, &y));
  BAD("'a' has rank 2; global pooling needs", kiln_graph_global_pool(G, KILN_POOL_AVG, a, &y));
}

static void test_compositions(void) {
  kiln_tensor x = input("x", KILN_F32, DIMS(2, 3, 4)), xi = input("xi", KILN_I32, DIMS(2, 3)), y;
  kiln_tensor sc = input("sc", KILN_F32, DIMS(5)), sh = input("sh", KILN_F16, DIMS(4));
  kiln_tensor c3 = input("c3", KILN_F32, DIMS(3)), c4 = input("c4", KILN_F32, DIMS(4));
  BAD("(softmax): 'xi' has dtype i32", kiln_graph_softmax(G, xi, 1, &y));
  BAD("kiln_graph_log_softmax: axis 3 is out of range for rank 3", kiln_graph_log_softmax(G, x, 3, &y));
  BAD("(layernorm): scale 'sc' of shape [5] does not broadcast onto 'x' of shape [2,3,4]",
      kiln_graph_layernorm(G, x, sc, -1, -1, 1e-5, &y));
  BAD("(layernorm): bias 'sh' has dtype f16", kiln_graph_layernorm(G, x, -1, sh, -1, 1e-5, &y));
  BAD("scale = -7", kiln_graph_layernorm(G, x, -7, -1, -1, 1e-5, &y));
  BAD("(batchnorm): var 'c4' must have shape [3]", kiln_graph_batchnorm(G, x, c3, c3, c3, c4, 1e-5, &y));
  BAD("(batchnorm): 'c3' has rank 1", kiln_graph_batchnorm(G, c3, c3, c3, c3, c3, 1e-5, &y));
  BAD("mean = 99", kiln_graph_batchnorm(G, x, c3, c3, 99, c3, 1e-5, &y));
}

static void test_outputs_assigns(void) {
  float w0[2] = { 1, 2 };
  kiln_tensor w, x = input("x", KILN_F32, DIMS(2)), x3 = input("x3", KILN_F32, DIMS(3)), xd, y;
  OK(kiln_graph_param(G, "w", KILN_F32, DIMS(2), w0, &w));
  xd = input("xd", KILN_F64, DIMS(2));
  BAD("x = 4242", kiln_graph_output(G, 4242, "y"));
  BAD("'x' is a input, not a param", kiln_graph_assign(G, x, x));
  BAD("param 'w' is f32[2] but value 'x3' is f32[3]", kiln_graph_assign(G, w, x3));
  BAD("param 'w' is f32[2] but value 'xd' is f64[2]", kiln_graph_assign(G, w, xd));
  OK(kiln_graph_binary(G, KILN_ADD, w, x, &y));
  OK(kiln_graph_assign(G, w, y));
  BAD("param 'w' is already assigned", kiln_graph_assign(G, w, x));
  OK(kiln_graph_output(G, y, NULL));
  CHECK(G->g.n_outputs >= 1 && strcmp(G->g.outputs[G->g.n_outputs - 1].name, G->g.tensors[y].name) == 0);
  OK(kiln_graph_output(G, y, "named"));
  CHECK(strcmp(G->g.outputs[G->g.n_outputs - 1].name, "named") == 0);
  int rank;
  int64_t shape[KILN_MAX_RANK];
  kiln_dtype d;
  BAD("rank is NULL", kiln_tensor_shape(G, y, NULL, shape));
  BAD("x = -3", kiln_tensor_shape(G, -3, &rank, shape));
  BAD("kiln_tensor_dtype: graph is NULL", kiln_tensor_dtype(NULL, y, &d));
  BAD("kiln_graph_create: out is NULL", kiln_graph_create(NULL));
}

/* graph_add directly: arity, ids, and the node name from g->node_name. */
static void test_graph_add(void) {
  Graph *g = &G->g;
  kiln_tensor x = input("x", KILN_F32, DIMS(2, 3)), c = input("c", KILN_F32, DIMS(3, 3)), y;
  int in[2] = { x, c };
  BAD("node 'add' (add): 1 inputs, expected 2", graph_add(g, OP_ADD, 1, in, NULL, &y));
  BAD("(concat): 0 inputs, expected at least 1", graph_add(g, OP_CONCAT, 0, in, NULL, &y));
  BAD("op 67", graph_add(g, OP_COUNT, 1, in, NULL, &y));
  int bad[2] = { x, 100000 };
  BAD("input 1 is tensor 100000", graph_add(g, OP_ADD, 2, bad, NULL, &y));
  g->node_name = "Conv_12";
  BAD("node 'Conv_12' (matmul): inner dims differ", graph_add(g, OP_MATMUL, 2, (int[]){ c, x }, NULL, &y));
  OK(graph_add(g, OP_MATMUL, 2, in, NULL, &y));
  CHECK(strcmp(g->nodes[g->n_nodes - 1].name, "Conv_12") == 0);
  g->node_name = NULL;
  Attr a = { 0 };
  a.n_axes = 2;
  a.axes[0] = 1;
  a.axes[1] = 0;
  BAD("axes must be sorted, unique", graph_add(g, OP_REDUCE_SUM, 1, in, &a, &y));
  a.n_axes = 0;
  BAD("0 axes for input 'x'", graph_add(g, OP_REDUCE_SUM, 1, in, &a, &y));
  a = (Attr){ 0 };
  a.shape_rank = 2;
  a.shape[0] = 2;
  a.shape[1] = 2;
  a.starts[0] = 1;
  a.steps[0] = 1;
  a.starts[1] = 0;
  a.steps[1] = 2;
  BAD("axis 0: 2 elements from 1 in steps of 1 leave 0..1", graph_add(g, OP_SLICE, 1, in, &a, &y));
  a.starts[0] = 0;
  a.steps[1] = 0;
  BAD("axis 1: step is 0", graph_add(g, OP_SLICE, 1, in, &a, &y));
  a.steps[1] = 2;
  OK(graph_add(g, OP_SLICE, 1, in, &a, &y));
  a = (Attr){ 0 };
  a.shape_rank = 2;
  a.shape[0] = 3;
  a.shape[1] = 3;
  BAD("output dim 3 is not a multiple of input dim 2", graph_add(g, OP_TILE, 1, in, &a, &y));
  a.shape[1] = 4;
  BAD("cannot expand 'x' of shape [2,3] to [3,4]", graph_add(g, OP_EXPAND, 1, in, &a, &y));
}

/* graph_check re-derives every shape; a corrupted record must be caught. */
static void test_check_and_print(void) {
  Graph *g = &G->g;
  OK(graph_check(g));
  Tensor *t = &g->tensors[g->nodes[g->n_nodes - 1].out];
  int64_t keep = t->shape[0];
  t->shape[0] = keep + 1;
  t->numel = t->numel / keep * (keep + 1);
  FAILS_WITH(KILN_ERR_MODEL, "differs from inferred", graph_check(g));
  t->shape[0] = keep;
  t->numel = t->numel / (keep + 1) * keep;
  OK(graph_check(g));
  int saved = g->nodes[1].in[0];
  g->nodes[1].in[0] = g->nodes[1].out;
  FAILS_WITH(KILN_ERR_MODEL, "not before its output", graph_check(g));
  g->nodes[1].in[0] = saved;
  OK(graph_check(g));

  FILE *f = tmpfile();
  CHECK(f != NULL);
  if (!f) return;
  kiln_graph_print(G, f);
  long size = ftell(f);
  rewind(f);
  char *text = calloc(1, (size_t)size + 1);
  CHECK(text && fread(text, 1, (size_t)size, f) == (size_t)size);
  fclose(f);
  int lines = 0;
  for (long i = 0; text && i < size; i++) lines += text[i] == '\n';
  CHECK(lines == g->n_tensors + g->n_outputs + g->n_assigns);
  CHECK(text && strstr(text, "node 'Conv_12'") && strstr(text, "= matmul(") && strstr(text, "= param f32[2]"));
  free(text);
}

/* A small graph through the API; returns the first failure. */
static kiln_status build_small(kiln_graph **out) {
  kiln_graph *g;
  kiln_status s;
  float w[12] = { 0 }, b[3] = { 0 };
  kiln_tensor x, wt, bt, y, z, m, c;
  *out = NULL;
  if ((s = kiln_graph_create(&g))) return s;
  *out = g;
  if ((s = kiln_graph_input(g, "x", KILN_F32, 2, (int64_t[]){ 8, 4 }, &x)) ||
      (s = kiln_graph_param(g, "w", KILN_F32, 2, (int64_t[]){ 4, 3 }, w, &wt)) ||
      (s = kiln_graph_param(g, "b", KILN_F32, 1, (int64_t[]){ 3 }, b, &bt)) ||
      (s = kiln_graph_matmul(g, x, wt, &y)) || (s = kiln_graph_binary(g, KILN_ADD, y, bt, &y)) ||
      (s = kiln_graph_scalar(g, KILN_I32, 0, &c)) || (s = kiln_graph_binary(g, KILN_MAX, y, c, &y)) ||
      (s = kiln_graph_layernorm(g, y, bt, bt, -1, 1e-5, &z)) || (s = kiln_graph_log_softmax(g, z, 1, &z)) ||
      (s = kiln_graph_reduce(g, KILN_REDUCE_LOG_SUM_EXP, z, 0, NULL, 0, &m)) ||
      (s = kiln_graph_slice(g, z, 1, (int64_t[]){ -1 }, (int64_t[]){ -100 }, NULL, (int64_t[]){ -2 }, &z)) ||
      (s = kiln_graph_output(g, z, "z")) || (s = kiln_graph_output(g, m, NULL)))
    return s;
  for (int i = 0; i < 40; i++) /* enough nodes to grow the arrays more than once */
    if ((s = kiln_graph_unary(g, KILN_TANH, z, &z))) return s;
  return kiln_graph_output(g, z, "deep");
}

static void test_alloc_failure(void) {
  int failures = 0;
  for (long n = 1; n < 10000; n++) {
    kiln_graph *g;
    kiln_alloc_fail_after(n);
    kiln_status s = build_small(&g);
    kiln_alloc_fail_after(0);
    if (s == KILN_OK) {
      OK(graph_check(&g->g));
      kiln_graph_free(g);
      break;
    }
    failures++;
    CHECK_MSG(s == KILN_ERR_NO_MEMORY && kiln_last_error()[0], "n = %ld: %s: %s", n, kiln_status_name(s),
              kiln_last_error());
    if (g) OK(graph_check(&g->g)); /* what was built before the failure is intact */
    kiln_graph_free(g);
  }
  CHECK(failures >= 5); /* create, arrays, arena blocks, ... all failed at least once */
  printf("allocation failure: %d failing runs before success\n", failures);
}

int main(void) {
  OK(kiln_graph_create(&G));
  test_leaves();
  test_elementwise();
  test_movement();
  test_reductions();
  test_contractions();
  test_compositions();
  test_outputs_assigns();
  test_graph_add();
  test_check_and_print();
  kiln_graph_free(G);
  kiln_graph_free(NULL);
  test_alloc_failure();
  TEST_MAIN_END();
}
