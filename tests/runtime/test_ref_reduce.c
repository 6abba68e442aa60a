/*
 * test_ref_reduce — the interpreter's accumulation rules through whole graphs on ref:
 * argmax/argmin ties (first or last) and NaN (it wins, like numpy), max with NaN,
 * integer sums wrapping like the dtype, reductions over an empty axis, f16 matmul
 * accumulated wide and rounded once, rank-0 and empty tensors.
 */
#include "test.h"
#include "base/base.h"

static kiln_program *compile(kiln_graph *g) {
  kiln_options o = kiln_options_default();
  o.backend = "ref";
  kiln_program *p = NULL;
  OK(kiln_program_compile(g, &o, &p));
  return p;
}

static void test_arg_ties_nan(void) {
  float x[3 * 4] = { 1, 3, 3, 0,   /* tie: first 1, last 2 */
                     NAN, 5, NAN, 7, /* NaN wins: first 0, last 2 */
                     -1, -1, -1, -1 };
  int64_t first[3], last[3], amin[3];
  float mx[3];
  kiln_graph *g;
  kiln_tensor tx, t1, t2, t3, t4;
  OK(kiln_graph_create(&g));
  OK(kiln_graph_input(g, "x", KILN_F32, 2, (int64_t[]){ 3, 4 }, &tx));
  OK(kiln_graph_argmax(g, tx, 1, 0, 0, &t1));
  OK(kiln_graph_argmax(g, tx, -1, 0, 1, &t2));
  OK(kiln_graph_argmin(g, tx, 1, 0, 1, &t3));
  OK(kiln_graph_reduce(g, KILN_REDUCE_MAX, tx, 1, (int[]){ 1 }, 0, &t4));
  OK(kiln_graph_output(g, t1, "first"));
  OK(kiln_graph_output(g, t2, "last"));
  OK(kiln_graph_output(g, t3, "amin"));
  OK(kiln_graph_output(g, t4, "max"));
  kiln_program *p = compile(g);
  if (p) OK(kiln_program_run(p, (const void *[]){ x }, (void *[]){ first, last, amin, mx }));
  CHECK(first[0] == 1 && last[0] == 2);
  CHECK(first[1] == 0 && last[1] == 2);
  CHECK(first[2] == 0 && last[2] == 3);
  CHECK(amin[0] == 3 && amin[1] == 2 && amin[2] == 3);  /* NaN is the extreme for argmin too */
  CHECK(mx[0] == 3 && isnan(mx[1]) && mx[2] == -1);
  kiln_program_free(p);
  kiln_graph_free(g);
}

/* Rows longer than the interpreter's lanes (64 terms a pass): ties for argmax in different
 * passes (first 10, last 150 of 200), a NaN in the third pass, a sum over two axes (9 x 30 terms
 * through the odometer), a max whose term reads no reduction index (x broadcast along the row),
 * and a padded window's bounds checks (an i64 compare, and, min and max in each point's index). */
static void test_long_rows(void) {
  enum { R = 3, L = 200, A = 9, B = 30 };
  static float x[R * L], y[2 * A * B], z[R], sum2[2], bmax[R * 5], pooled[L];
  static int64_t af[R], al[R];
  for (int r = 0; r < R; r++)
    for (int i = 0; i < L; i++) x[r * L + i] = (float)((i * 37 + r * 11) % 97) / 100.0f;
  x[0 * L + 10] = x[0 * L + 70] = x[0 * L + 150] = 5;  /* ties in passes 0, 1 and 2 */
  x[1 * L + 130] = NAN;
  for (int i = 0; i < 2 * A * B; i++) y[i] = (float)(i % 13) - 6.0f;
  for (int r = 0; r < R; r++) z[r] = (float)r - 1.5f;
  kiln_graph *g;
  kiln_tensor tx, ty, tz, t1, t2, t3, t4, tp, t5;
  OK(kiln_graph_create(&g));
  OK(kiln_graph_input(g, "x", KILN_F32, 2, (int64_t[]){ R, L }, &tx));
  OK(kiln_graph_input(g, "y", KILN_F32, 3, (int64_t[]){ 2, A, B }, &ty));
  OK(kiln_graph_input(g, "z", KILN_F32, 3, (int64_t[]){ R, 1, 1 }, &tz));
  OK(kiln_graph_argmax(g, tx, 1, 0, 0, &t1));
  OK(kiln_graph_argmax(g, tx, 1, 0, 1, &t2));
  OK(kiln_graph_reduce(g, KILN_REDUCE_SUM, ty, 2, (int[]){ 1, 2 }, 0, &t3));
  OK(kiln_graph_expand(g, tz, 3, (int64_t[]){ R, 5, L }, &t4));
  OK(kiln_graph_reduce(g, KILN_REDUCE_MAX, t4, 1, (int[]){ 2 }, 0, &t4));
  /* a 3-wide window of row 0, padded by one each side: a max pool over 1 x 200 */
  kiln_pool_params pp = { .spatial = 1, .kernel = { 3 }, .strides = { 1 }, .pads = { 1, 1 } };
  OK(kiln_graph_slice(g, tx, 1, (int64_t[]){ 0 }, (int64_t[]){ 1 }, (int[]){ 0 }, NULL, &tp));
  OK(kiln_graph_reshape(g, tp, 3, (int64_t[]){ 1, 1, L }, &tp));
  OK(kiln_graph_pool(g, KILN_POOL_MAX, tp, &pp, &t5));
  OK(kiln_graph_output(g, t1, "first"));
  OK(kiln_graph_output(g, t2, "last"));
  OK(kiln_graph_output(g, t3, "sum2"));
  OK(kiln_graph_output(g, t4, "bmax"));
  OK(kiln_graph_output(g, t5, "win"));
  kiln_program *p = compile(g);
  if (p) OK(kiln_program_run(p, (const void *[]){ x, y, z }, (void *[]){ af, al, sum2, bmax, pooled }));
  CHECK(af[0] == 10 && al[0] == 150);
  CHECK(af[1] == 130 && al[1] == 130);  /* NaN wins, from the third pass */
  for (int r = 2; r < R; r++) {
    int best = 0;
    for (int i = 1; i < L; i++)
      if (x[r * L + i] > x[r * L + best]) best = i;
    CHECK_MSG(af[r] == best, "row %d: argmax %lld, want %d", r, (long long)af[r], best);
  }
  for (int b = 0; b < 2; b++) {
    double want = 0;
    for (int i = 0; i < A * B; i++) want += y[b * A * B + i];
    CHECK_NEAR(sum2[b], want, 1e-4);
  }
  for (int r = 0; r < R; r++)
    for (int j = 0; j < 5; j++) CHECK(bmax[r * 5 + j] == z[r]);
  for (int i = 0; i < L; i++) {
    float m = x[i];
    if (i > 0 && x[i - 1] > m) m = x[i - 1];
    if (i + 1 < L && x[i + 1] > m) m = x[i + 1];
    CHECK_MSG(pooled[i] == m, "window %d: %g, want %g", i, pooled[i], m);
  }
  kiln_program_free(p);
  kiln_graph_free(g);
}

static void test_int_sums(void) {
  int32_t x[2 * 2] = { 2147483647, 1, -5, 3 };
  uint8_t u[3] = { 200, 100, 7 };
  int32_t s[2];
  uint8_t su[1];
  int32_t pr[1];
  kiln_graph *g;
  kiln_tensor tx, tu, t1, t2, t3;
  OK(kiln_graph_create(&g));
  OK(kiln_graph_input(g, "x", KILN_I32, 2, (int64_t[]){ 2, 2 }, &tx));
  OK(kiln_graph_input(g, "u", KILN_U8, 1, (int64_t[]){ 3 }, &tu));
  OK(kiln_graph_reduce(g, KILN_REDUCE_SUM, tx, 1, (int[]){ 1 }, 0, &t1));
  OK(kiln_graph_reduce(g, KILN_REDUCE_SUM, tu, 0, NULL, 0, &t2));
  OK(kiln_graph_reduce(g, KILN_REDUCE_PROD, tx, 0, NULL, 0, &t3));
  OK(kiln_graph_output(g, t1, "s"));
  OK(kiln_graph_output(g, t2, "su"));
  OK(kiln_graph_output(g, t3, "prod"));
  kiln_program *p = compile(g);
  if (p) OK(kiln_program_run(p, (const void *[]){ x, u }, (void *[]){ s, su, pr }));
  CHECK(s[0] == INT32_MIN && s[1] == -2);
  CHECK(su[0] == (uint8_t)(200 + 100 + 7));
  CHECK(pr[0] == (int32_t)(uint32_t)((uint64_t)2147483647 * 1 * (uint64_t)(int64_t)-5 * 3));
  kiln_program_free(p);
  kiln_graph_free(g);
}

static void test_empty_axis(void) {
  float x[1], s[3], m[3];
  kiln_graph *g;
  kiln_tensor tx, t1, t2;
  OK(kiln_graph_create(&g));
  OK(kiln_graph_input(g, "x", KILN_F32, 2, (int64_t[]){ 3, 0 }, &tx));
  OK(kiln_graph_reduce(g, KILN_REDUCE_SUM, tx, 1, (int[]){ 1 }, 0, &t1));
  OK(kiln_graph_reduce(g, KILN_REDUCE_MAX, tx, 1, (int[]){ 1 }, 0, &t2));
  OK(kiln_graph_output(g, t1, "s"));
  OK(kiln_graph_output(g, t2, "m"));
  kiln_program *p = compile(g);
  if (p) OK(kiln_program_run(p, (const void *[]){ x }, (void *[]){ s, m }));
  for (int i = 0; i < 3; i++) CHECK(s[i] == 0 && m[i] == -INFINITY);
  kiln_program_free(p);
  kiln_graph_free(g);
}

/* f16 operands: products and sums in f32/f64, one rounding to f16 at the end. */
static void test_f16_matmul(void) {
  enum { M = 3, K = 40, N = 2 };
  uint16_t a[M * K], b[K * N], y[M * N];
  unsigned long long seed = 11;
  for (int i = 0; i < M * K; i++) a[i] = float_to_half((float)test_rand(&seed));
  for (int i = 0; i < K * N; i++) b[i] = float_to_half((float)test_rand(&seed));
  kiln_graph *g;
  kiln_tensor ta, tb, ty;
  OK(kiln_graph_create(&g));
  OK(kiln_graph_input(g, "a", KILN_F16, 2, (int64_t[]){ M, K }, &ta));
  OK(kiln_graph_input(g, "b", KILN_F16, 2, (int64_t[]){ K, N }, &tb));
  OK(kiln_graph_matmul(g, ta, tb, &ty));
  OK(kiln_graph_output(g, ty, "y"));
  kiln_program *p = compile(g);
  if (p) OK(kiln_program_run(p, (const void *[]){ a, b }, (void *[]){ y }));
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double s = 0;
      for (int k = 0; k < K; k++) s += (double)((float)half_to_float(a[i * K + k]) * half_to_float(b[k * N + j]));
      CHECK(y[i * N + j] == float_to_half((float)s));
    }
  kiln_program_free(p);
  kiln_graph_free(g);
}

static void test_scalar_and_empty(void) {
  double x = 1.5, y;
  float e[1], ey[1];
  kiln_graph *g;
  kiln_tensor tx, tc, t, te_, tey;
  OK(kiln_graph_create(&g));
  OK(kiln_graph_input(g, "x", KILN_F64, 0, NULL, &tx));
  OK(kiln_graph_input(g, "e", KILN_F32, 2, (int64_t[]){ 0, 3 }, &te_));
  OK(kiln_graph_scalar(g, KILN_F64, 2.25, &tc));
  OK(kiln_graph_binary(g, KILN_MUL, tx, tc, &t));
  OK(kiln_graph_unary(g, KILN_EXP, te_, &tey));
  OK(kiln_graph_output(g, t, "y"));
  OK(kiln_graph_output(g, tey, "ey"));
  kiln_program *p = compile(g);
  if (p) OK(kiln_program_run(p, (const void *[]){ &x, e }, (void *[]){ &y, ey }));
  CHECK(y == 1.5 * 2.25);
  kiln_program_free(p);
  kiln_graph_free(g);
}

int main(void) {
  test_arg_ties_nan();
  test_long_rows();
  test_int_sums();
  test_empty_axis();
  test_f16_matmul();
  test_scalar_and_empty();
  TEST_MAIN_END();
}
