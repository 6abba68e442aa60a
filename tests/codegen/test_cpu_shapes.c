/*
 * test_cpu_shapes.c — the cpu renderer's special loop shapes against the ref backend.
 * Each graph is sized to take one shape of render.c: a convolution wide enough for the
 * border / interior split of the row loop (pads 1 and 2, asymmetric, dilated, strided),
 * with output channels in blocks of 8 and of 4 and none; x @ W^T as the 4 x 4 tile of dot
 * products and without the tile (rows not a multiple of 4), and with its reduction loop split
 * where it reads merged heads; a sum over more terms than f32
 * accumulation takes (the f64 rows); max and average pooling vectorised over the output
 * row, with a NaN that max pooling must keep; the prelude's vectorisable erf; softmax rows, whose
 * exponentials the sum's loop keeps for the last loop (one k_expf in the kernel). Inputs are a fixed pseudo-random sequence;
 * outputs must agree with ref within f32 rounding of the sums.
 */
#include "test.h"
#include "codegen/codegen.h"

#include <stdint.h>

static uint32_t rng = 12345u;
static float next_f(void) {  /* uniform in [-1, 1), a fixed LCG sequence */
  rng = rng * 1664525u + 1013904223u;
  return (float)((rng >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static int64_t numel(int rank, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < rank; i++) n *= shape[i];
  return n;
}

/* Runs g on ref and on cpu with inputs in[0..n_in-1]; compares output 0 (n_out floats). */
static void compare(const char *what, kiln_graph *g, int n_in, void *const *in, int64_t n_out, double tol) {
  float *y[2] = { calloc((size_t)n_out, sizeof(float)), calloc((size_t)n_out, sizeof(float)) };
  const char *be[2] = { "ref", "cpu" };
  CHECK(y[0] && y[1]);
  for (int b = 0; b < 2 && y[0] && y[1]; b++) {
    kiln_options o = kiln_options_default();
    o.backend = be[b];
    kiln_program *p = NULL;
    OK(kiln_program_compile(g, &o, &p));
    if (!p) continue;
    (void)n_in;
    OK(kiln_program_run(p, (const void *const *)in, (void *const[]){ y[b] }));
    if (b == 1) {
      kiln_census c = { 0 };
      OK(kiln_program_census(p, &c));
      CHECK_MSG(c.host_fallbacks == 0, "%s: %lld host fallbacks", what, (long long)c.host_fallbacks);
    }
    kiln_program_free(p);
  }
  int bad = 0;
  for (int64_t i = 0; i < n_out && y[0] && y[1] && bad < 3; i++) {
    double a = y[1][i], r = y[0][i];
    int same = (a != a && r != r) || fabs(a - r) <= tol * (1 + fabs(r));
    if (!same) {
      bad++;
      test_failures++;
      fprintf(stderr, "%s: element %lld: cpu %.9g, ref %.9g\n", what, (long long)i, a, r);
    }
  }
  free(y[0]);
  free(y[1]);
}

static float *filled(int64_t n) {
  float *x = malloc((size_t)n * sizeof *x);
  for (int64_t i = 0; x && i < n; i++) x[i] = next_f();
  return x;
}

/* conv2d, x [N, C, H, W], weight [M, C, kh, kw] a param. */
static void conv_case(const char *what, int64_t M, int64_t H, int64_t W, int64_t k, int64_t stride, int64_t dil,
                      int64_t pb, int64_t pe) {
  kiln_graph *g = NULL;
  OK(kiln_graph_create(&g));
  if (!g) return;
  int64_t xs[4] = { 2, 3, H, W }, ws[4] = { M, 3, k, k };
  float *wd = filled(numel(4, ws)), *xd = filled(numel(4, xs));
  kiln_tensor x, w, y;
  OK(kiln_graph_input(g, "x", KILN_F32, 4, xs, &x));
  OK(kiln_graph_param(g, "w", KILN_F32, 4, ws, wd, &w));
  kiln_conv_params cp = { .spatial = 2, .strides = { stride, stride }, .dilations = { dil, dil },
                          .pads = { pb, pb, pe, pe } };
  OK(kiln_graph_conv(g, x, w, -1, &cp, &y));
  OK(kiln_graph_output(g, y, "y"));
  int r = 0;
  int64_t ys[KILN_MAX_RANK];
  OK(kiln_tensor_shape(g, y, &r, ys));
  compare(what, g, 1, (void *const[]){ xd }, numel(r, ys), 2e-5);
  free(wd);
  free(xd);
  kiln_graph_free(g);
}

/* relu(x @ W^T + b), W [J, K] a param read transposed. */
static void dense_case(const char *what, int64_t I, int64_t J, int64_t K) {
  kiln_graph *g = NULL;
  OK(kiln_graph_create(&g));
  if (!g) return;
  int64_t xs[2] = { I, K }, ws[2] = { J, K }, bs[1] = { J };
  float *xd = filled(I * K), *wd = filled(J * K), *bd = filled(J);
  kiln_tensor x, w, b, wt, m, s, y;
  OK(kiln_graph_input(g, "x", KILN_F32, 2, xs, &x));
  OK(kiln_graph_param(g, "w", KILN_F32, 2, ws, wd, &w));
  OK(kiln_graph_param(g, "b", KILN_F32, 1, bs, bd, &b));
  OK(kiln_graph_transpose(g, w, (const int[]){ 1, 0 }, &wt));
  OK(kiln_graph_matmul(g, x, wt, &m));
  OK(kiln_graph_binary(g, KILN_ADD, m, b, &s));
  OK(kiln_graph_unary(g, KILN_RELU, s, &y));
  OK(kiln_graph_output(g, y, "y"));
  compare(what, g, 1, (void *const[]){ xd }, I * J, 2e-5);
  free(xd);
  free(wd);
  free(bd);
  kiln_graph_free(g);
}

/* Heads merged before a dense layer, as after attention: a [H, I, D] -> [I, H, D] -> [I, H*D],
 * then @ W^T: the reduction index reads a through r / D and r % D (the split reduction loop). */
static void heads_case(void) {
  const int64_t H = 3, I = 8, D = 24, J = 12;
  kiln_graph *g = NULL;
  OK(kiln_graph_create(&g));
  if (!g) return;
  int64_t as[3] = { H, I, D }, ws[2] = { J, H * D }, ms[2] = { I, H * D };
  float *ad = filled(H * I * D), *wd = filled(J * H * D);
  kiln_tensor a, w, at, am, wt, y;
  OK(kiln_graph_input(g, "a", KILN_F32, 3, as, &a));
  OK(kiln_graph_param(g, "w", KILN_F32, 2, ws, wd, &w));
  OK(kiln_graph_transpose(g, a, (const int[]){ 1, 0, 2 }, &at));
  OK(kiln_graph_reshape(g, at, 2, ms, &am));
  OK(kiln_graph_transpose(g, w, (const int[]){ 1, 0 }, &wt));
  OK(kiln_graph_matmul(g, am, wt, &y));
  OK(kiln_graph_output(g, y, "y"));
  compare("heads merged @ W^T (split reduction)", g, 1, (void *const[]){ ad }, I * J, 2e-5);
  free(ad);
  free(wd);
  kiln_graph_free(g);
}

/* A long sum: x [I, K] @ y [K, J] with K past the f32 accumulation limit, values of one
 * sign so that f32 rounding would show; the f64 rows keep it within 1e-6. */
static void long_sum_case(void) {
  const int64_t I = 8, K = 20000, J = 16;
  kiln_graph *g = NULL;
  OK(kiln_graph_create(&g));
  if (!g) return;
  int64_t as[2] = { I, K }, bs[2] = { K, J };
  float *ad = filled(I * K), *bd = filled(K * J);
  for (int64_t i = 0; ad && i < I * K; i++) ad[i] = 1.0f + 0.25f * ad[i];
  for (int64_t i = 0; bd && i < K * J; i++) bd[i] = 1.0f + 0.25f * bd[i];
  kiln_tensor a, b, y;
  OK(kiln_graph_input(g, "a", KILN_F32, 2, as, &a));
  OK(kiln_graph_input(g, "b", KILN_F32, 2, bs, &b));
  OK(kiln_graph_matmul(g, a, b, &y));
  OK(kiln_graph_output(g, y, "y"));
  compare("matmul K=20000 (f64 rows)", g, 2, (void *const[]){ ad, bd }, I * J, 1e-6);
  free(ad);
  free(bd);
  kiln_graph_free(g);
}

static void pool_case(const char *what, kiln_pool_kind kind, int64_t k, int64_t stride, int64_t pad, int nan) {
  kiln_graph *g = NULL;
  OK(kiln_graph_create(&g));
  if (!g) return;
  int64_t xs[4] = { 2, 3, 20, 20 };
  float *xd = filled(numel(4, xs));
  if (nan && xd) xd[2 * 20 + 5] = NAN;  /* row 2, column 5 of the first image */
  kiln_tensor x, y;
  OK(kiln_graph_input(g, "x", KILN_F32, 4, xs, &x));
  kiln_pool_params pp = { .spatial = 2, .kernel = { k, k }, .strides = { stride, stride },
                          .pads = { pad, pad, pad, pad } };
  OK(kiln_graph_pool(g, kind, x, &pp, &y));
  OK(kiln_graph_output(g, y, "y"));
  int r = 0;
  int64_t ys[KILN_MAX_RANK];
  OK(kiln_tensor_shape(g, y, &r, ys));
  compare(what, g, 1, (void *const[]){ xd }, numel(r, ys), 1e-6);
  free(xd);
  kiln_graph_free(g);
}

/* erf (the C prelude's k_erff, vectorised in GELU's loops) across [-6, 6] and the
 * specials, to within 1.5e-7 of ref's double erf rounded to f32. */
static void erf_case(void) {
  const int64_t n = 24006;
  kiln_graph *g = NULL;
  OK(kiln_graph_create(&g));
  if (!g) return;
  float *xd = malloc((size_t)n * sizeof *xd);
  if (!xd) { kiln_graph_free(g); CHECK(xd); return; }
  for (int64_t i = 0; i < n - 6; i++) xd[i] = -6.0f + 12.0f * (float)i / (float)(n - 7);
  const float sp[6] = { 0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-30f };
  memcpy(xd + n - 6, sp, sizeof sp);
  kiln_tensor x, y;
  OK(kiln_graph_input(g, "x", KILN_F32, 1, &n, &x));
  OK(kiln_graph_unary(g, KILN_ERF, x, &y));
  OK(kiln_graph_output(g, y, "y"));
  compare("erf over [-6, 6] and specials", g, 1, (void *const[]){ xd }, n, 1.5e-7);
  free(xd);
  kiln_graph_free(g);
}

/* softmax over rows of 1000 (one row with -inf and one with a NaN) against ref; the sum's loop keeps
 * each exponential in the row array kE and the last loop reads it: one k_expf call in the kernel,
 * none in the loop after the sum. */
/* The C source of g's plan under renderer options co (sb_free it); *kernels: the plan's kernels
 * (-1: no plan). */
static StrBuf c_source(kiln_graph *g, const CgOptions *co, int *kernels) {
  TE *te = NULL;
  Plan *p = NULL;
  StrBuf src = { 0 };
  kiln_options o = kiln_options_default();
  PlanOptions po = plan_options(&o);
  OK(te_lower(&g->g, &te));
  if (te) OK(plan_build(te, &po, &p));
  if (p) OK(cg_render_plan(p, &cg_dialect_c, co, NULL, &src));
  *kernels = p ? p->n_kernels : -1;
  plan_free(p);
  te_free(te);
  return src;
}

/* Kernel 0's definition in src (after its declaration), or NULL. */
static const char *kernel0(const StrBuf *src) {
  const char *k0 = src->s ? strstr(src->s, "void kiln_k0(") : NULL;
  return k0 ? strstr(k0 + 1, "void kiln_k0(") : NULL;
}

static void softmax_kept_case(void) {
  const int64_t R = 37, C = 1000, xs[2] = { R, C };
  kiln_graph *g = NULL;
  OK(kiln_graph_create(&g));
  if (!g) return;
  float *xd = filled(R * C);
  if (xd) xd[3 * C + 7] = -INFINITY, xd[5 * C + 11] = NAN;
  for (int64_t i = 0; xd && i < R * C; i++) xd[i] *= 8.0f;
  kiln_tensor x, y;
  OK(kiln_graph_input(g, "x", KILN_F32, 2, xs, &x));
  OK(kiln_graph_softmax(g, x, 1, &y));
  OK(kiln_graph_output(g, y, "y"));
  compare("softmax 37 x 1000, its exponentials kept", g, 1, (void *const[]){ xd }, R * C, 1e-6);
  CgOptions co = cg_options_default();
  int kernels;
  StrBuf src = c_source(g, &co, &kernels);
  const char *k0 = kernel0(&src), *kept = k0 ? strstr(k0, "kE[r] = ") : NULL;
  int exps = 0;
  for (const char *q = k0; q && (q = strstr(q, "k_expf(")); q++) exps++;
  CHECK_MSG(kernels == 1 && kept && exps == 1 && !strstr(kept, "k_expf("), "softmax rows: %d exponentials, kept %d",
            exps, kept != NULL);
  sb_free(&src);
  free(xd);
  kiln_graph_free(g);
}

/* Sums of the generic loop form with their leading reduction vars nested as loops
 * (cpu_nested_sums, render.c nested_sums): relu(x) * x summed over all axes but the channel of
 * [8, 16, 12, 10] (a convolution's bias gradient: the last var, 10 points, alone in the simd
 * loop), and over the last three of [6, 5, 4, 3] (the trailing 4 x 3 = 12 points one flat loop,
 * split into digits, inside a loop over 5). Against ref nested and flat; the source of each
 * form checked: nested, no flat point r is split by division outside the 12 points' loop. */
static void nested_sum_case(const char *what, const int64_t *xs, int n_axes, const int *axes, const char *flat_loop,
                            const char *nested_loop) {
  kiln_graph *g = NULL;
  OK(kiln_graph_create(&g));
  if (!g) return;
  int64_t n = numel(4, xs), out = n;
  for (int i = 0; i < n_axes; i++) out /= xs[axes[i]];
  float *xd = filled(n);
  kiln_tensor x, y;
  OK(kiln_graph_input(g, "x", KILN_F32, 4, xs, &x));
  OK(kiln_graph_unary(g, KILN_RELU, x, &y));
  OK(kiln_graph_binary(g, KILN_MUL, y, x, &y));
  OK(kiln_graph_reduce(g, KILN_REDUCE_SUM, y, n_axes, axes, 1, &y));
  OK(kiln_graph_output(g, y, "y"));
  for (int nested = 0; nested < 2; nested++) {
    char name[160];
    snprintf(name, sizeof name, "%s, %s", what, nested ? "nested" : "flat");
    setenv("KILN_CPU_NESTED_SUMS", nested ? "1" : "0", 1);
    compare(name, g, 1, (void *const[]){ xd }, out, 1e-5);
    unsetenv("KILN_CPU_NESTED_SUMS");
    CgOptions co = cg_options_default();
    co.cpu_nested_sums = nested;
    int kernels;
    StrBuf src = c_source(g, &co, &kernels);
    const char *k0 = kernel0(&src);
    bool has_flat = k0 && strstr(k0, flat_loop), has_nested = k0 && strstr(k0, nested_loop);
    CHECK_MSG(kernels == 1 && has_flat == !nested && has_nested == nested,
              "%s: %d kernels, the flat loop '%s' %s, the nested one '%s' %s", name, kernels, flat_loop,
              has_flat ? "found" : "absent", nested_loop, has_nested ? "found" : "absent");
    sb_free(&src);
  }
  kiln_options o = kiln_options_default();  /* the option's range */
  o.backend = "cpu";
  o.cpu_nested_sums = 2;
  kiln_program *bad = NULL;
  FAILS(KILN_ERR_INVALID_ARG, kiln_program_compile(g, &o, &bad));
  CHECK(!bad);
  free(xd);
  kiln_graph_free(g);
}

int main(void) {
  conv_case("conv 3x3 pad 1, 8 channels", 8, 16, 16, 3, 1, 1, 1, 1);
  conv_case("conv 5x5 pad 2, 16 channels", 16, 14, 14, 5, 1, 1, 2, 2);
  conv_case("conv 3x3 pads 0/2, 4 channels", 4, 14, 14, 3, 1, 1, 0, 2);
  conv_case("conv 3x3 dilation 2 pad 2, 12 channels", 12, 15, 15, 3, 1, 2, 2, 2);
  conv_case("conv 3x3 stride 2 pad 1, 5 channels", 5, 30, 30, 3, 2, 1, 1, 1);
  dense_case("x @ W^T 4x4 tiles", 12, 20, 67);
  dense_case("x @ W^T rows not a multiple of 4", 6, 8, 33);
  heads_case();
  long_sum_case();
  erf_case();
  softmax_kept_case();
  nested_sum_case("relu(x) * x summed over [8, _, 12, 10]", (const int64_t[]){ 8, 16, 12, 10 }, 3, (const int[]){ 0, 2, 3 },
                  "r < INT64_C(960)", "v6 < INT64_C(10)");
  nested_sum_case("relu(x) * x summed over [_, 5, 4, 3]", (const int64_t[]){ 6, 5, 4, 3 }, 3, (const int[]){ 1, 2, 3 },
                  "r < INT64_C(60)", "r < INT64_C(12)");
  pool_case("max pool 2x2 stride 2 with NaN", KILN_POOL_MAX, 2, 2, 0, 1);
  pool_case("max pool 3x3 stride 1 pad 1", KILN_POOL_MAX, 3, 1, 1, 0);
  pool_case("avg pool 3x3 stride 1 pad 1", KILN_POOL_AVG, 3, 1, 1, 0);
  TEST_MAIN_END();
}
