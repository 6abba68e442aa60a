/* The cpu backend's library GEMM (src/runtime/cpu/gemm.c): products with tails in every
 * dimension, B read along k or along n, batched with shared and with per-batch B, bias with
 * relu or tanh GELU, a bias per row (a 1x1 convolution), against ref; the plan says a library GEMM ran (and none with
 * cublaslt = 0); a weight overwritten with kiln_program_write_param is packed again; a sum
 * too long for f32 accumulators stays with the generated kernel. Products whose rows fill the
 * panels better run swapped (D^T = B^T A^T): bias along m, with A the constant, and the batched
 * B, with neither constant and M <= N; the rest run as they are. B packed per run into many panels
 * is packed where each panel is used (panels_in_tiles). */
#include "test.h"

#include <stdio.h>

enum { M = 64, K = 300, N = 70, BATCH = 3 };  /* 64 x 70 x 300 is above the cpu cost rule (2^20) */

typedef struct Case {
  const char *name;
  bool b_along_n;   /* the weight is a [N, K] param read through a transpose */
  bool batched, batched_b;
  int epilogue;     /* 0 none, 1 bias + relu, 2 bias + gelu_tanh */
} Case;

static float wval(int i, int salt) { return (float)((i * 37 + salt * 11) % 23 - 11) / 16.0f; }

static void run_case(const Case *c) {
  kiln_graph *g;
  OK(kiln_graph_create(&g));
  int64_t xs[3] = { BATCH, M, K }, ws[3] = { BATCH, K, N }, wt[2] = { N, K }, bs[1] = { N };
  int xr = c->batched ? 3 : 2;
  static float w[BATCH * K * N], bias[N];
  for (int i = 0; i < BATCH * K * N; i++) w[i] = wval(i, 1);
  for (int i = 0; i < N; i++) bias[i] = wval(i, 2);
  kiln_tensor x, wp, wk, y, b;
  OK(kiln_graph_input(g, "x", KILN_F32, xr, c->batched ? xs : xs + 1, &x));
  if (c->batched_b) OK(kiln_graph_input(g, "w", KILN_F32, 3, ws, &wp));  /* changes every run: packed per run */
  else if (c->b_along_n) OK(kiln_graph_param(g, "w", KILN_F32, 2, wt, w, &wp));
  else OK(kiln_graph_param(g, "w", KILN_F32, 2, ws + 1, w, &wp));
  wk = wp;
  int perm[2] = { 1, 0 };
  if (c->b_along_n) OK(kiln_graph_transpose(g, wp, perm, &wk));
  OK(kiln_graph_matmul(g, x, wk, &y));
  if (c->epilogue) {
    OK(kiln_graph_param(g, "bias", KILN_F32, 1, bs, bias, &b));
    OK(kiln_graph_binary(g, KILN_ADD, y, b, &y));
    OK(kiln_graph_unary(g, c->epilogue == 1 ? KILN_RELU : KILN_GELU_TANH, y, &y));
  }
  OK(kiln_graph_output(g, y, "y"));
  static float xv[BATCH * M * K], got[BATCH * M * N], want[BATCH * M * N];
  for (int i = 0; i < BATCH * M * K; i++) xv[i] = wval(i, 3);
  const void *in[2] = { xv, w };
  void *out_got[1] = { got }, *out_want[1] = { want };
  int64_t n_out = (c->batched ? BATCH : 1) * M * N;
  for (int lib = 1; lib >= 0; lib--) {
    kiln_options o = kiln_options_default();
    o.backend = "cpu";
    o.cublaslt = lib;
    kiln_program *p = NULL, *r = NULL;
    OK(kiln_program_compile(g, &o, &p));
    o.backend = "ref";
    OK(kiln_program_compile(g, &o, &r));
    if (!p || !r) break;
    int libs = test_library_gemms(p);
    CHECK_MSG(libs == lib, "%s: %d library GEMMs with cublaslt = %d", c->name, libs, lib);
    for (int round = 0; round < 2; round++) {
      if (round == 1 && !c->batched_b) {  /* new weights: packed again */
        for (int i = 0; i < BATCH * K * N; i++) w[i] = wval(i, 4);
        OK(kiln_program_write_param(p, wp, w));
        OK(kiln_program_write_param(r, wp, w));
      }
      if (round == 1 && c->batched_b) for (int i = 0; i < BATCH * K * N; i++) w[i] = wval(i, 5);
      OK(kiln_program_run(p, in, out_got));
      OK(kiln_program_run(r, in, out_want));
      double worst = 0;
      for (int64_t i = 0; i < n_out; i++) {
        double e = fabs((double)got[i] - want[i]) / (1 + fabs((double)want[i]));
        if (e > worst) worst = e;
      }
      CHECK_MSG(worst <= 2e-5, "%s (library %d, round %d): worst relative error %.3g", c->name, lib, round, worst);
    }
    kiln_program_free(p);
    kiln_program_free(r);
    for (int i = 0; i < BATCH * K * N; i++) w[i] = wval(i, 1);  /* the next compile starts from the first weights */
  }
  kiln_graph_free(g);
}

/* y = x @ w onto g: x an input [m, k], w a param [k, n]; compiled on cpu into *p and, with r,
 * on ref into *r. */
static void compile_input_by_param(kiln_graph *g, int64_t m, int64_t k, int64_t n, const float *w, kiln_program **p,
                                   kiln_program **r) {
  int64_t xs[2] = { m, k }, ws[2] = { k, n };
  kiln_tensor x, wp, y;
  OK(kiln_graph_input(g, "x", KILN_F32, 2, xs, &x));
  OK(kiln_graph_param(g, "w", KILN_F32, 2, ws, w, &wp));
  OK(kiln_graph_matmul(g, x, wp, &y));
  OK(kiln_graph_output(g, y, "y"));
  kiln_options o = kiln_options_default();
  o.backend = "cpu";
  *p = NULL;
  OK(kiln_program_compile(g, &o, p));
  if (!r) return;
  o.backend = "ref";
  *r = NULL;
  OK(kiln_program_compile(g, &o, r));
}

/* A sum over more than CG_CPU_F32_SUM_MAX (4096) points keeps the renderer's f64 accumulators:
 * the library, which sums in f32, declines it. */
static void long_sum_declined(void) {
  kiln_graph *g;
  OK(kiln_graph_create(&g));
  static float w[5000 * 40];
  kiln_program *p;
  compile_input_by_param(g, 16, 5000, 40, w, &p, NULL);
  if (p) CHECK_MSG(test_library_gemms(p) == 0, "K = 5000: %d library GEMMs", test_library_gemms(p));
  kiln_program_free(p);
  kiln_graph_free(g);
}

/* relu(a @ x + bias) onto g: a made by the caller ([.., rows, K]), x an input of shape xs, bias
 * [rows, 1] a param; compiled on cpu into *p and on ref into *r. */
static void compile_bias_relu(kiln_graph *g, kiln_tensor a, const int64_t xs[3], const int64_t bs[2], const float *bias,
                              kiln_program **p, kiln_program **r) {
  kiln_tensor xi, b, y;
  OK(kiln_graph_input(g, "x", KILN_F32, 3, xs, &xi));
  OK(kiln_graph_param(g, "bias", KILN_F32, 2, bs, bias, &b));
  OK(kiln_graph_matmul(g, a, xi, &y));
  OK(kiln_graph_binary(g, KILN_ADD, y, b, &y));
  OK(kiln_graph_unary(g, KILN_RELU, y, &y));
  OK(kiln_graph_output(g, y, "y"));
  kiln_options o = kiln_options_default();
  o.backend = "cpu";
  *p = *r = NULL;
  OK(kiln_program_compile(g, &o, p));
  o.backend = "ref";
  OK(kiln_program_compile(g, &o, r));
}

/* A 1x1 convolution's shape: relu(w [M, K] @ x [1, K, N] + bias [M, 1]), the weight the rows and
 * a bias per row, the output's leading dim of one read as index 0: the library takes it. Its 64
 * rows fill two panels where its 70 columns leave 26 lanes of 96 empty: the product runs
 * swapped, the constant weight packed once, and again after write_param. */
static void bias_along_m(void) {
  kiln_graph *g;
  OK(kiln_graph_create(&g));
  int64_t ws[2] = { M, K }, xs[3] = { 1, K, N }, bs[2] = { M, 1 };
  static float w[M * K], bias[M], x[K * N], got[M * N], want[M * N];
  for (int i = 0; i < M * K; i++) w[i] = wval(i, 6);
  for (int i = 0; i < M; i++) bias[i] = wval(i, 7);
  for (int i = 0; i < K * N; i++) x[i] = wval(i, 8);
  kiln_tensor wp;
  kiln_program *p, *r;
  OK(kiln_graph_param(g, "w", KILN_F32, 2, ws, w, &wp));
  compile_bias_relu(g, wp, xs, bs, bias, &p, &r);
  for (int round = 0; round < 2 && p && r; round++) {
    if (!round) CHECK_MSG(test_library_gemms(p) == 1, "bias along m: %d library GEMMs", test_library_gemms(p));
    if (round == 1) {  /* new weights: the swapped product's packed A packed again */
      for (int i = 0; i < M * K; i++) w[i] = wval(i, 9);
      OK(kiln_program_write_param(p, wp, w));
      OK(kiln_program_write_param(r, wp, w));
    }
    const void *in[1] = { x };
    void *og[1] = { got }, *ow[1] = { want };
    OK(kiln_program_run(p, in, og));
    OK(kiln_program_run(r, in, ow));
    double worst = 0;
    for (int i = 0; i < M * N; i++) {
      double e = fabs((double)got[i] - want[i]) / (1 + fabs((double)want[i]));
      if (e > worst) worst = e;
    }
    CHECK_MSG(worst <= 2e-5, "bias along m (round %d): worst relative error %.3g", round, worst);
  }
  kiln_program_free(p);
  kiln_program_free(r);
  kiln_graph_free(g);
}

/* A product packed per run into at least 16 panels packs each panel in the thread that uses it,
 * just before its row tiles, into one place a thread (gemm.c, packs_in_tiles): relu(w [40, 160] @
 * x + bias [40, 1]) over x [1, 160, 600] (19 panels, the last of 24 columns), and relu(a @ x +
 * bias) with a [3, 40, 160] and x [3, 160, 200] inputs (7 panels a batch, each batch its own),
 * two runs with new inputs, against ref. With rows of x a multiple of 16 floats (640, and 208
 * a batch) and 7 row tiles, the full panels are read in place (gemm.c, reads_in_place) and
 * only 208's last, of 16 columns, is packed. */
static void panels_in_tiles(int batch, int n) {
  enum { PM = 40, PK = 160 };  /* K of at least 128: the library's (CG_CPU_LIBRARY_MIN_K) */
  kiln_graph *g;
  OK(kiln_graph_create(&g));
  int64_t ws[2] = { PM, PK }, xs[3] = { batch, PK, n }, bs[2] = { PM, 1 };
  static float w[3 * PM * PK], bias[PM], x[3 * PK * 640], got[3 * PM * 640], want[3 * PM * 640];
  for (int i = 0; i < 3 * PM * PK; i++) w[i] = wval(i, 10);
  for (int i = 0; i < PM; i++) bias[i] = wval(i, 11);
  kiln_tensor wp;
  kiln_program *p, *r;
  int64_t as[3] = { batch, PM, PK };
  if (batch > 1) OK(kiln_graph_input(g, "a", KILN_F32, 3, as, &wp));
  else OK(kiln_graph_param(g, "w", KILN_F32, 2, ws, w, &wp));
  compile_bias_relu(g, wp, xs, bs, bias, &p, &r);
  CHECK_MSG(p && test_library_gemms(p) == 1, "panels in tiles (batch %d): %d library GEMMs", batch, p ? test_library_gemms(p) : -1);
  for (int round = 0; round < 2 && p && r; round++) {
    for (int i = 0; i < batch * PK * n; i++) x[i] = wval(i, 12 + round);
    const void *in2[2] = { w, x }, *in1[1] = { x };
    OK(kiln_program_run(p, batch > 1 ? in2 : in1, (void *[]){ got }));
    OK(kiln_program_run(r, batch > 1 ? in2 : in1, (void *[]){ want }));
    double worst = 0;
    for (int64_t i = 0; i < (int64_t)batch * PM * n; i++) worst = fmax(worst, fabs((double)got[i] - want[i]) / (1 + fabs((double)want[i])));
    CHECK_MSG(worst <= 2e-5, "panels in tiles (batch %d, round %d): worst relative error %.3g", batch, round, worst);
  }
  kiln_program_free(p);
  kiln_program_free(r);
  kiln_graph_free(g);
}

/* A B operand past CG_CPU_LIBRARY_B_BYTES (1 MiB): [512, 520] floats. Where it changes each run
 * (relu(w @ x + bias), x an input: a 1x1 convolution's activations) the library declines it and
 * the register tiles take it; where it is the program's constant (x2 @ w2, w2 a param) the library
 * takes it. Each against ref. */
static void large_b_operand(bool constant) {
  enum { LM = 24, LK = 512, LN = 520 };
  kiln_graph *g;
  OK(kiln_graph_create(&g));
  static float w[LK * LN], a[LM * LK], bias[LM], got[LM * LN], want[LM * LN];
  for (int i = 0; i < LK * LN; i++) w[i] = wval(i, 13);
  for (int i = 0; i < LM * LK; i++) a[i] = wval(i, 14);
  for (int i = 0; i < LM; i++) bias[i] = wval(i, 15);
  kiln_program *p = NULL, *r = NULL;
  const void *in[1];
  if (constant) {
    compile_input_by_param(g, LM, LK, LN, w, &p, &r);
    in[0] = a;
  } else {
    int64_t ws[2] = { LM, LK }, xs[3] = { 1, LK, LN }, bs[2] = { LM, 1 };
    kiln_tensor wp;
    OK(kiln_graph_param(g, "w", KILN_F32, 2, ws, a, &wp));
    compile_bias_relu(g, wp, xs, bs, bias, &p, &r);
    in[0] = w;
  }
  if (p && r) {
    CHECK_MSG(test_library_gemms(p) == constant, "a B of %d x %d (%s): %d library GEMMs", LK, LN, constant ? "constant" : "an input",
              test_library_gemms(p));
    OK(kiln_program_run(p, in, (void *[]){ got }));
    OK(kiln_program_run(r, in, (void *[]){ want }));
    double worst = 0;
    for (int i = 0; i < LM * LN; i++) worst = fmax(worst, fabs((double)got[i] - want[i]) / (1 + fabs((double)want[i])));
    CHECK_MSG(worst <= 2e-5, "a B of %d x %d (%s): worst relative error %.3g", LK, LN, constant ? "constant" : "an input", worst);
  }
  kiln_program_free(p);
  kiln_program_free(r);
  kiln_graph_free(g);
}

int main(void) {
  panels_in_tiles(1, 600);
  panels_in_tiles(3, 200);
  panels_in_tiles(1, 640);
  panels_in_tiles(3, 208);
  long_sum_declined();
  large_b_operand(false);
  large_b_operand(true);
  bias_along_m();
  static const Case cases[] = {
    { "plain", false, false, false, 0 },
    { "bias relu", false, false, false, 1 },
    { "bias gelu, B along n", true, false, false, 2 },
    { "batched, shared B", false, true, false, 1 },
    { "batched B (an input)", false, true, true, 0 },
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i]);
  TEST_MAIN_END();
}
