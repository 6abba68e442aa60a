/*
 * The values the builder's compositions and normalisations compute, run on the ref
 * backend and compared with naive loops written here: softmax and log-softmax
 * (stable on huge logits, -inf entries), layernorm with scale and bias, inference
 * batchnorm, log-sum-exp of an all -inf row, integer mean (truncating), numpy
 * matmul with 1-D operands, integer literals coerced to the other operand's dtype,
 * conv with bias, global average pooling, ONNX slice with a negative step.
 */
#include "graph/graph.h"
#include "test.h"

static kiln_graph *G;

/* Compiles G on ref, runs once, frees G. */
static void run(const void *const *in, void *const *out) {
  kiln_options o = kiln_options_default();
  o.backend = "ref";
  kiln_program *p = NULL;
  OK(graph_check(&G->g));
  OK(kiln_program_compile(G, &o, &p));
  if (p) OK(kiln_program_run(p, in, out));
  kiln_program_free(p);
  kiln_graph_free(G);
  G = NULL;
}

static void fill(double *p, int n, unsigned long long seed, double scale) {
  for (int i = 0; i < n; i++) p[i] = scale * test_rand(&seed);
}

static void test_softmax(void) {
  enum { A = 2, B = 4, C = 3 };
  double x[A * B * C], y[A * B * C], ly[A * B * C];
  fill(x, A * B * C, 7, 3.0);
  x[0] = 1000; /* overflows exp without the max subtraction */
  x[3] = 999;
  x[C * B + 1] = -INFINITY;
  kiln_tensor tx, ty, tl;
  OK(kiln_graph_create(&G));
  OK(kiln_graph_input(G, "x", KILN_F64, 3, (int64_t[]){ A, B, C }, &tx));
  OK(kiln_graph_softmax(G, tx, 1, &ty));
  OK(kiln_graph_log_softmax(G, tx, -2, &tl));
  OK(kiln_graph_output(G, ty, "y"));
  OK(kiln_graph_output(G, tl, "ly"));
  run((const void *[]){ x }, (void *[]){ y, ly });
  for (int a = 0; a < A; a++)
    for (int c = 0; c < C; c++) {
      double m = -INFINITY, s = 0;
      for (int b = 0; b < B; b++) m = fmax(m, x[(a * B + b) * C + c]);
      for (int b = 0; b < B; b++) s += exp(x[(a * B + b) * C + c] - m);
      for (int b = 0; b < B; b++) {
        int i = (a * B + b) * C + c;
        CHECK_NEAR(y[i], exp(x[i] - m) / s, 1e-12);
        if (isinf(x[i])) CHECK(isinf(ly[i]) && ly[i] < 0);
        else CHECK_NEAR(ly[i], x[i] - m - log(s), 1e-12);
      }
    }
}

static void test_layernorm_batchnorm(void) {
  enum { A = 2, B = 3, C = 4 };
  double x[A * B * C], sc[B * C], bi[C], y[A * B * C];
  fill(x, A * B * C, 1, 2.0);
  fill(sc, B * C, 2, 1.0);
  fill(bi, C, 3, 1.0);
  kiln_tensor tx, ts, tb, ty;
  OK(kiln_graph_create(&G));
  OK(kiln_graph_input(G, "x", KILN_F64, 3, (int64_t[]){ A, B, C }, &tx));
  OK(kiln_graph_param(G, "scale", KILN_F64, 2, (int64_t[]){ B, C }, sc, &ts));
  OK(kiln_graph_param(G, "bias", KILN_F64, 1, (int64_t[]){ C }, bi, &tb));
  OK(kiln_graph_layernorm(G, tx, ts, tb, 1, 1e-3, &ty));
  OK(kiln_graph_output(G, ty, "y"));
  run((const void *[]){ x }, (void *[]){ y });
  for (int a = 0; a < A; a++) {
    double m = 0, v = 0;
    for (int i = 0; i < B * C; i++) m += x[a * B * C + i];
    m /= B * C;
    for (int i = 0; i < B * C; i++) v += (x[a * B * C + i] - m) * (x[a * B * C + i] - m);
    v /= B * C;
    for (int i = 0; i < B * C; i++)
      CHECK_NEAR(y[a * B * C + i], (x[a * B * C + i] - m) / sqrt(v + 1e-3) * sc[i] + bi[i % C], 1e-12);
  }

  /* batchnorm: x [N=2, C=3, 2, 2] */
  double xb[24], mean[3] = { 0.5, -1, 2 }, var[3] = { 1, 0.25, 4 }, g[3] = { 1, 2, -1 }, be[3] = { 0, 1, 3 }, yb[24];
  fill(xb, 24, 4, 3.0);
  kiln_tensor tm, tv, tg, tbe;
  OK(kiln_graph_create(&G));
  OK(kiln_graph_input(G, "x", KILN_F64, 4, (int64_t[]){ 2, 3, 2, 2 }, &tx));
  OK(kiln_graph_const(G, KILN_F64, 1, (int64_t[]){ 3 }, g, &tg));
  OK(kiln_graph_const(G, KILN_F64, 1, (int64_t[]){ 3 }, be, &tbe));
  OK(kiln_graph_const(G, KILN_F64, 1, (int64_t[]){ 3 }, mean, &tm));
  OK(kiln_graph_const(G, KILN_F64, 1, (int64_t[]){ 3 }, var, &tv));
  OK(kiln_graph_batchnorm(G, tx, tg, tbe, tm, tv, 1e-5, &ty));
  OK(kiln_graph_output(G, ty, "y"));
  run((const void *[]){ xb }, (void *[]){ yb });
  for (int i = 0; i < 24; i++) {
    int c = i / 4 % 3;
    CHECK_NEAR(yb[i], (xb[i] - mean[c]) / sqrt(var[c] + 1e-5) * g[c] + be[c], 1e-12);
  }
}

static void test_reduce_edges(void) {
  /* log-sum-exp over rows, one of them all -inf: -inf, not NaN */
  double x[6] = { 1, 2, 3, -INFINITY, -INFINITY, -INFINITY }, y[2];
  int32_t xi[6] = { -7, 0, 0, 5, 5, 6 }, yi[2];
  kiln_tensor tx, txi, ty, tyi;
  OK(kiln_graph_create(&G));
  OK(kiln_graph_input(G, "x", KILN_F64, 2, (int64_t[]){ 2, 3 }, &tx));
  OK(kiln_graph_input(G, "xi", KILN_I32, 2, (int64_t[]){ 2, 3 }, &txi));
  OK(kiln_graph_reduce(G, KILN_REDUCE_LOG_SUM_EXP, tx, 1, (int[]){ -1 }, 0, &ty));
  OK(kiln_graph_reduce(G, KILN_REDUCE_MEAN, txi, 1, (int[]){ 1 }, 0, &tyi));
  OK(kiln_graph_output(G, ty, "y"));
  OK(kiln_graph_output(G, tyi, "yi"));
  run((const void *[]){ x, xi }, (void *[]){ y, yi });
  CHECK_NEAR(y[0], log(exp(1) + exp(2) + exp(3)), 1e-12);
  CHECK(isinf(y[1]) && y[1] < 0);
  CHECK(yi[0] == -2 && yi[1] == 5); /* -7/3 and 16/3, truncated */
}

static void test_matmul_literals(void) {
  double v[3] = { 1, -2, 3 }, m[6] = { 1, 2, 3, 4, 5, 6 }, vm[2], mv[2], vv, r[3];
  kiln_tensor tv, tm, tmt, t1, t2, t3, zero, t4;
  OK(kiln_graph_create(&G));
  OK(kiln_graph_input(G, "v", KILN_F64, 1, (int64_t[]){ 3 }, &tv));
  OK(kiln_graph_input(G, "m", KILN_F64, 2, (int64_t[]){ 3, 2 }, &tm)); /* [[1,2],[3,4],[5,6]] */
  OK(kiln_graph_transpose(G, tm, NULL, &tmt));
  OK(kiln_graph_matmul(G, tv, tm, &t1));  /* [3] @ [3,2] -> [2] */
  OK(kiln_graph_matmul(G, tmt, tv, &t2)); /* [2,3] @ [3] -> [2] */
  OK(kiln_graph_matmul(G, tv, tv, &t3));  /* -> [] */
  OK(kiln_graph_scalar(G, KILN_I64, 0, &zero));
  OK(kiln_graph_binary(G, KILN_MAX, tv, zero, &t4)); /* relu by an int literal */
  OK(kiln_graph_output(G, t1, "vm"));
  OK(kiln_graph_output(G, t2, "mv"));
  OK(kiln_graph_output(G, t3, "vv"));
  OK(kiln_graph_output(G, t4, "r"));
  run((const void *[]){ v, m }, (void *[]){ vm, mv, &vv, r });
  CHECK(vm[0] == 1 - 6 + 15 && vm[1] == 2 - 8 + 18);
  CHECK(mv[0] == vm[0] && mv[1] == vm[1]);
  CHECK(vv == 1 + 4 + 9);
  CHECK(r[0] == 1 && r[1] == 0 && r[2] == 3);
}

static void test_conv_pool_slice(void) {
  /* x [1, 2, 3]: 1-D conv, w [2, 2, 2], bias [2], pads 1+0; then global average pool */
  double x[6] = { 1, 2, 3, 4, 5, 6 }, w[8] = { 1, 0, 0, 1, -1, 1, 2, 0 }, b[2] = { 10, 20 };
  double y[6], gp[2], sl[3];
  kiln_tensor tx, tw, tb, ty, tg, ts;
  OK(kiln_graph_create(&G));
  OK(kiln_graph_input(G, "x", KILN_F64, 3, (int64_t[]){ 1, 2, 3 }, &tx));
  OK(kiln_graph_param(G, "w", KILN_F64, 3, (int64_t[]){ 2, 2, 2 }, w, &tw));
  OK(kiln_graph_param(G, "b", KILN_F64, 1, (int64_t[]){ 2 }, b, &tb));
  kiln_conv_params p = { .spatial = 1, .pads = { 1, 0 } };
  OK(kiln_graph_conv(G, tx, tw, tb, &p, &ty)); /* out length (3 + 1 - 2) + 1 = 3 */
  OK(kiln_graph_global_pool(G, KILN_POOL_AVG, ty, &tg));
  OK(kiln_graph_slice(G, tx, 2, (int64_t[]){ 0, -1 }, (int64_t[]){ 1, INT64_MIN }, (int[]){ 1, 2 }, (int64_t[]){ 1, -1 },
                      &ts)); /* [1, 1, 3] */
  OK(kiln_graph_output(G, ty, "y"));
  OK(kiln_graph_output(G, tg, "g"));
  OK(kiln_graph_output(G, ts, "s"));
  run((const void *[]){ x }, (void *[]){ y, gp, sl });
  for (int m = 0; m < 2; m++) {
    double avg = 0;
    for (int o = 0; o < 3; o++) {
      double acc = b[m];
      for (int c = 0; c < 2; c++)
        for (int k = 0; k < 2; k++) {
          int i = o + k - 1;
          if (i >= 0 && i < 3) acc += x[c * 3 + i] * w[(m * 2 + c) * 2 + k];
        }
      CHECK_NEAR(y[m * 3 + o], acc, 1e-12);
      avg += acc / 3;
    }
    CHECK_NEAR(gp[m], avg, 1e-12);
  }
  CHECK(sl[0] == 3 && sl[1] == 2 && sl[2] == 1); /* row 0 reversed */
}

int main(void) {
  test_softmax();
  test_layernorm_batchnorm();
  test_reduce_edges();
  test_matmul_literals();
  test_conv_pool_slice();
  TEST_MAIN_END();
}
