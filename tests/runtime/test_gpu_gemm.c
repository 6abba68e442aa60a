/*
 * test_gpu_gemm.c — the tiled contraction shape (src/codegen/gemm.c) of the grid
 * backends. Without a GPU: which kernels take the shape and how their operands split
 * (M, N, K, batch, the direction a tile is read), under the cuda dialect's options and the
 * glsl dialect's (no split-K; k groups or 2x2 a thread), and that the rendered plans compile with NVRTC
 * for sm_90 (skipped without NVRTC). On cuda (with a GPU), or on vulkan where
 * KILN_TEST_BACKEND=vulkan asks (CI: lavapipe; ctest's runtime/test_gpu_gemm_vulkan): matmul with a fused
 * bias/relu epilogue, a transposed operand, batched matmul (attention scores), a
 * convolution as implicit GEMM and a training step, against ref (the f64-accumulating
 * oracle) on fresh random inputs with poisoned outputs: norm-wise relative error under
 * 1e-5 for K up to 4096 (f32 accumulation), every element written.
 */
#include "test.h"
#include "codegen/codegen.h"
#include "runtime/runtime.h"
#include "runtime/cuda/cudadrv.h"
#include "runtime/cuda/cublaslt.h"

#include <dirent.h>
#include <time.h>

static unsigned long long seed = 29;

static float *rnd(int64_t n) {
  float *p = malloc((size_t)n * sizeof *p);
  for (int64_t i = 0; i < n; i++) p[i] = (float)test_rand(&seed);
  return p;
}

/* ---- graphs ---- */

/* While a 16-bit graph's f32 twin is built (BUILD_TYPED): the 16-bit type whose values its f32
 * parameters take, and where the 16-bit graph's kernel rounds an f32 value, the twin's casts */
static bool twin_on;
static kiln_dtype twin_grid;

static float on_grid(kiln_dtype t, float f) {
  return t == KILN_BF16 ? bf16_to_float(float_to_bf16(f)) : half_to_float(float_to_half(f));
}

/* n floats of test_rand as values of dtype t (bf16 / f16 bits, or floats), a new array */
static void *rnd_as(kiln_dtype t, int64_t n) {
  float *f = rnd(n);
  if (t == KILN_F32) {
    for (int64_t i = 0; twin_on && i < n; i++) f[i] = on_grid(twin_grid, f[i]);
    return f;
  }
  uint16_t *h = malloc((size_t)n * 2);
  for (int64_t i = 0; i < n; i++) h[i] = t == KILN_BF16 ? float_to_bf16(f[i]) : float_to_half(f[i]);
  free(f);
  return h;
}

/* act(x @ w + b) of dtype t (x^T @ w with x stored [k, m]; batched [2, m, k] @ [k, n] with
 * batch): the tensor cores' operands in, the output rounded to t. */
static kiln_graph *dense_act(kiln_dtype t, int64_t m, int64_t k, int64_t n, bool xt, bool batch, kiln_unary_op act) {
  int64_t xs[3] = { 2, xt ? k : m, xt ? m : k }, ws[2] = { k, n };
  void *w = rnd_as(t, k * n), *b = rnd_as(t, n);
  kiln_graph *g;
  kiln_tensor x, wt, bt, y, z, r;
  static const int perm[2] = { 1, 0 };
  OK(kiln_graph_create(&g));
  OK(kiln_graph_input(g, "x", t, batch ? 3 : 2, batch ? xs : xs + 1, &x));
  if (xt) OK(kiln_graph_transpose(g, x, perm, &x));
  OK(kiln_graph_param(g, "w", t, 2, ws, w, &wt));
  OK(kiln_graph_param(g, "b", t, 1, &n, b, &bt));
  OK(kiln_graph_matmul(g, x, wt, &y));
  OK(kiln_graph_binary(g, KILN_ADD, y, bt, &z));
  OK(kiln_graph_unary(g, act, z, &r));
  OK(kiln_graph_output(g, r, "r"));
  free(w), free(b);
  return g;
}

/* layernorm(x @ w + b + x0) over its n columns, x [m, k], x0 [m, n] a residual input: a wide pair under
 * gemm_rows 2 (a banded pair on cuda). */
static kiln_graph *dense_norm(int64_t m, int64_t k, int64_t n) {
  int64_t xs[2] = { m, k }, rs[2] = { m, n }, ws[2] = { k, n };
  float *w = rnd(k * n), *b = rnd(n), *gam = rnd(n), *bet = rnd(n);
  kiln_graph *g;
  kiln_tensor x, x0, wt, bt, gt, et, y, z, h, o;
  OK(kiln_graph_create(&g));
  OK(kiln_graph_input(g, "x", KILN_F32, 2, xs, &x));
  OK(kiln_graph_input(g, "x0", KILN_F32, 2, rs, &x0));
  OK(kiln_graph_param(g, "w", KILN_F32, 2, ws, w, &wt));
  OK(kiln_graph_param(g, "b", KILN_F32, 1, &n, b, &bt));
  OK(kiln_graph_param(g, "g", KILN_F32, 1, &n, gam, &gt));
  OK(kiln_graph_param(g, "e", KILN_F32, 1, &n, bet, &et));
  OK(kiln_graph_matmul(g, x, wt, &y));
  OK(kiln_graph_binary(g, KILN_ADD, y, bt, &z));
  OK(kiln_graph_binary(g, KILN_ADD, z, x0, &h));
  OK(kiln_graph_layernorm(g, h, gt, et, 1, 1e-5, &o));
  OK(kiln_graph_output(g, o, "o"));
  free(w), free(b), free(gam), free(bet);
  return g;
}

/* layernorm(x + x0) @ w + b over the k columns of x and x0 [m, k], w [k, n]: a pre-norm projection, the
 * layernorm at the head of the GEMM's tiles under gemm_heads 1 on cuda; keep: the layernorm an output
 * too (as a post-norm layer's residual reads it), stored by the tiles of the first column. */
static kiln_graph *norm_dense(int64_t m, int64_t k, int64_t n, bool keep) {
  int64_t xs[2] = { m, k }, ws[2] = { k, n };
  float *w = rnd(k * n), *b = rnd(n), *gam = rnd(k), *bet = rnd(k);
  kiln_graph *g;
  kiln_tensor x, x0, wt, bt, gt, et, h, o, y, z;
  OK(kiln_graph_create(&g));
  OK(kiln_graph_input(g, "x", KILN_F32, 2, xs, &x));
  OK(kiln_graph_input(g, "x0", KILN_F32, 2, xs, &x0));
  OK(kiln_graph_param(g, "w", KILN_F32, 2, ws, w, &wt));
  OK(kiln_graph_param(g, "b", KILN_F32, 1, &n, b, &bt));
  OK(kiln_graph_param(g, "g", KILN_F32, 1, &k, gam, &gt));
  OK(kiln_graph_param(g, "e", KILN_F32, 1, &k, bet, &et));
  OK(kiln_graph_binary(g, KILN_ADD, x, x0, &h));
  OK(kiln_graph_layernorm(g, h, gt, et, 1, 1e-5, &o));
  OK(kiln_graph_matmul(g, o, wt, &y));
  OK(kiln_graph_binary(g, KILN_ADD, y, bt, &z));
  OK(kiln_graph_output(g, z, "z"));
  if (keep) OK(kiln_graph_output(g, o, "o"));
  free(w), free(b), free(gam), free(bet);
  return g;
}

/* x @ w of f32 x [m, k] and w [k, n] under bf16 autocast: the product on bf16 copies of both. */
static kiln_graph *autocast_dense(int64_t m, int64_t k, int64_t n) {
  int64_t xs[2] = { m, k }, ws[2] = { k, n };
  float *w = rnd(k * n);
  kiln_graph *g;
  kiln_tensor x, wt, y;
  OK(kiln_graph_create(&g));
  OK(kiln_graph_set_autocast(g, KILN_BF16));
  OK(kiln_graph_input(g, "x", KILN_F32, 2, xs, &x));
  OK(kiln_graph_param(g, "w", KILN_F32, 2, ws, w, &wt));
  OK(kiln_graph_matmul(g, x, wt, &y));
  OK(kiln_graph_output(g, y, "y"));
  free(w);
  return g;
}

static kiln_graph *dense_typed(kiln_dtype t, int64_t m, int64_t k, int64_t n, bool xt, bool batch) {
  return dense_act(t, m, k, n, xt, batch, KILN_RELU);
}

/* relu(x @ w + b), x [m, k] input, w [k, n] param (or x^T @ w with x stored [k, m]). */
static kiln_graph *dense(int64_t m, int64_t k, int64_t n, bool xt) { return dense_typed(KILN_F32, m, k, n, xt, false); }

/* relu(x @ w^T + b), w stored [n, k] as a Linear layer keeps it: B read along k. */
static kiln_graph *dense_wt(int64_t m, int64_t k, int64_t n) {
  int64_t xs[2] = { m, k }, ws[2] = { n, k };
  float *w = rnd(k * n), *b = rnd(n);
  kiln_graph *g;
  kiln_tensor x, wt, bt, y;
  static const int perm[2] = { 1, 0 };
  OK(kiln_graph_create(&g));
  OK(kiln_graph_input(g, "x", KILN_F32, 2, xs, &x));
  OK(kiln_graph_param(g, "w", KILN_F32, 2, ws, w, &wt));
  OK(kiln_graph_transpose(g, wt, perm, &wt));
  OK(kiln_graph_param(g, "b", KILN_F32, 1, &n, b, &bt));
  OK(kiln_graph_matmul(g, x, wt, &y));
  OK(kiln_graph_binary(g, KILN_ADD, y, bt, &y));
  OK(kiln_graph_unary(g, KILN_RELU, y, &y));
  OK(kiln_graph_output(g, y, "r"));
  free(w), free(b);
  return g;
}

/* gelu_tanh(x @ w + b), x [m, k] input, w [k, n] param. */
/* nb sibling projections of one input: x @ w_i + b_i (relu on the odd ones), x [m, k] (or
 * stored [k, m] and transposed), each w_i [k, n]: one GEMM over one A tile on cuda. */
static kiln_graph *siblings(int64_t m, int64_t k, int64_t n, bool xt, int nb) {
  int64_t xs[2] = { xt ? k : m, xt ? m : k }, ws[2] = { k, n };
  kiln_graph *g;
  kiln_tensor x;
  static const int perm[2] = { 1, 0 };
  OK(kiln_graph_create(&g));
  OK(kiln_graph_input(g, "x", KILN_F32, 2, xs, &x));
  if (xt) OK(kiln_graph_transpose(g, x, perm, &x));
  for (int i = 0; i < nb; i++) {
    float *w = rnd(k * n), *b = rnd(n);
    kiln_tensor wt, bt, y, z;
    OK(kiln_graph_param(g, NULL, KILN_F32, 2, ws, w, &wt));
    OK(kiln_graph_param(g, NULL, KILN_F32, 1, &n, b, &bt));
    OK(kiln_graph_matmul(g, x, wt, &y));
    OK(kiln_graph_binary(g, KILN_ADD, y, bt, &z));
    if (i & 1) OK(kiln_graph_unary(g, KILN_RELU, z, &z));
    OK(kiln_graph_output(g, z, NULL));
    free(w), free(b);
  }
  return g;
}

static kiln_graph *dense_gelu(int64_t m, int64_t k, int64_t n) { return dense_act(KILN_F32, m, k, n, false, false, KILN_GELU_TANH); }

/* Attention scores in a new graph: inputs q [b, h, s, d] and kk [b, h, t, d], q @ transpose(kk)
 * -> [b, h, s, t], then * 0.125 (the value returned). */
static kiln_tensor scores_in(kiln_graph **g, kiln_dtype dt, int64_t b, int64_t h, int64_t s, int64_t t, int64_t d) {
  int64_t qs[4] = { b, h, s, d }, ks[4] = { b, h, t, d };
  static const int perm[4] = { 0, 1, 3, 2 };
  kiln_tensor q, kk, kt, y, c, z;
  OK(kiln_graph_create(g));
  OK(kiln_graph_input(*g, "q", dt, 4, qs, &q));
  OK(kiln_graph_input(*g, "k", dt, 4, ks, &kk));
  OK(kiln_graph_transpose(*g, kk, perm, &kt));
  OK(kiln_graph_matmul(*g, q, kt, &y));
  OK(kiln_graph_scalar(*g, dt, 0.125, &c));
  OK(kiln_graph_binary(*g, KILN_MUL, y, c, &z));
  return z;
}

static kiln_graph *scores_typed(kiln_dtype dt, int64_t b, int64_t h, int64_t s, int64_t t, int64_t d) {
  kiln_graph *g;
  kiln_tensor z = scores_in(&g, dt, b, h, s, t, d);
  OK(kiln_graph_output(g, z, "z"));
  return g;
}

static kiln_graph *scores(int64_t b, int64_t h, int64_t s, int64_t t, int64_t d) { return scores_typed(KILN_F32, b, h, s, t, d); }

/* softmax(q @ k^T / 8) @ v of dtype dt, v [b, h, t, e] an input after q and k (an attention chain
 * where the planner joins it). */
static kiln_graph *attention_typed(kiln_dtype dt, int64_t b, int64_t h, int64_t s, int64_t t, int64_t d, int64_t e) {
  int64_t vs[4] = { b, h, t, e };
  kiln_graph *g;
  kiln_tensor z = scores_in(&g, dt, b, h, s, t, d), v, p, o;
  OK(kiln_graph_input(g, "v", dt, 4, vs, &v));
  OK(kiln_graph_softmax(g, z, 3, &p));
  if (dt == KILN_F32 && twin_on) {  /* the twin rounds P where the chain stages it for the second product */
    OK(kiln_graph_cast(g, p, twin_grid, &p));
    OK(kiln_graph_cast(g, p, KILN_F32, &p));
  }
  OK(kiln_graph_matmul(g, p, v, &o));
  OK(kiln_graph_output(g, o, "o"));
  return g;
}

/* conv(x [n, c, h, w], k [m, c, 3, 3], pads 1) + bias. */
static kiln_graph *conv(int64_t n, int64_t c, int64_t h, int64_t w, int64_t m) {
  int64_t xs[4] = { n, c, h, w }, ks[4] = { m, c, 3, 3 };
  float *kd = rnd(m * c * 9), *bd = rnd(m);
  kiln_conv_params cp = { .spatial = 2, .pads = { 1, 1, 1, 1 } };
  kiln_graph *g;
  kiln_tensor x, k, b, y;
  OK(kiln_graph_create(&g));
  OK(kiln_graph_input(g, "x", KILN_F32, 4, xs, &x));
  OK(kiln_graph_param(g, "k", KILN_F32, 4, ks, kd, &k));
  OK(kiln_graph_param(g, "b", KILN_F32, 1, &m, bd, &b));
  OK(kiln_graph_conv(g, x, k, b, &cp, &y));
  OK(kiln_graph_output(g, y, "y"));
  free(kd), free(bd);
  return g;
}

/* One SGD step of relu(x @ w1) @ w2 against a squared error: outputs the new weights
 * (their gradients are x^T @ d and d @ w^T contractions). */
static kiln_graph *train(int64_t batch, int64_t in, int64_t hid, int64_t out) {
  int64_t xs[2] = { batch, in }, w1s[2] = { in, hid }, w2s[2] = { hid, out };
  float *w1 = rnd(in * hid), *w2 = rnd(hid * out);
  kiln_graph *g;
  kiln_tensor x, p[2], h, hr, z, sq, loss, gr[2], lr, t, nw;
  OK(kiln_graph_create(&g));
  OK(kiln_graph_input(g, "x", KILN_F32, 2, xs, &x));
  OK(kiln_graph_param(g, "w1", KILN_F32, 2, w1s, w1, &p[0]));
  OK(kiln_graph_param(g, "w2", KILN_F32, 2, w2s, w2, &p[1]));
  OK(kiln_graph_matmul(g, x, p[0], &h));
  OK(kiln_graph_unary(g, KILN_RELU, h, &hr));
  OK(kiln_graph_matmul(g, hr, p[1], &z));
  OK(kiln_graph_binary(g, KILN_MUL, z, z, &sq));
  OK(kiln_graph_reduce(g, KILN_REDUCE_SUM, sq, 0, NULL, 0, &loss));
  OK(kiln_graph_grad(g, loss, 2, p, gr));
  OK(kiln_graph_scalar(g, KILN_F32, 0.001, &lr));
  for (int i = 0; i < 2; i++) {
    OK(kiln_graph_binary(g, KILN_MUL, lr, gr[i], &t));
    OK(kiln_graph_binary(g, KILN_SUB, p[i], t, &nw));
    OK(kiln_graph_output(g, nw, i ? "w2n" : "w1n"));
  }
  free(w1), free(w2);
  return g;
}

/* ---- without a GPU: shapes and NVRTC ---- */

typedef struct Plans { TE *te; Plan *p; } Plans;

static Plans plan_for(kiln_graph *g, const char *backend) {
  Plans r = { 0 };
  kiln_options o = kiln_options_default();
  if (backend) o.backend = backend;
  PlanOptions po = plan_options(&o);
  OK(te_lower(&g->g, &r.te));
  if (r.te) OK(plan_build(r.te, &po, &r.p));
  return r;
}

static Plans plan_of(kiln_graph *g) { return plan_for(g, NULL); }

static void plans_free(Plans *r) {
  plan_free(r->p);
  te_free(r->te);
}

/* The one GEMM-shaped kernel of a plan under codegen options o (fails if there is not
 * exactly one). */
static bool only_gemm_opt(const Plans *r, const CgOptions *o, CgGemm *g, const char *what) {
  int n = 0;
  for (int i = 0; r->p && i < r->p->n_kernels; i++)
    if (cg_gpu_shape(r->p, &r->p->kernels[i], o) == CG_GPU_GEMM) {
      n++;
      CHECK(cg_gemm_match(r->p, &r->p->kernels[i], o, g));
    }
  CHECK_MSG(n == 1, "%s: %d GEMM kernels, expected 1", what, n);
  return n == 1;
}

static bool only_gemm(const Plans *r, CgGemm *g, const char *what) {
  CgOptions o = cg_options_default();
  return only_gemm_opt(r, &o, g, what);
}

/* src compiles for sm_90; src freed. */
static void nvrtc_compiles(StrBuf *src, const char *what) {
  void *bin = NULL;
  size_t n = 0;
  bool hit;
  kiln_status st = cuda_compile(src->s, "sm_90", 0, NULL, &bin, &n, &hit);
  CHECK_MSG(st == KILN_OK, "%s: %s\n%s", what, kiln_last_error(), src->s ? src->s : "");
  kiln_free(bin);
  sb_free(src);
}

static void compiles_opt(const Plans *r, const CgOptions *o, const char *what) {
  CudaNvrtc *nv;
  if (!r->p || cuda_nvrtc(&nv) != KILN_OK) return;
  StrBuf src = { 0 };
  OK(cg_render_plan(r->p, &cg_dialect_cuda, o, NULL, &src));
  CHECK_MSG(src.s && (strstr(src.s, "__shared__ float As") || strstr(src.s, "__shared__ float4 Asv") ||
                      strstr(src.s, "__shared__ uint16_t As") || strstr(src.s, "__shared__ unsigned As") ||
                      strstr(src.s, "(*As)[")),
            "%s: no tiled kernel in the source", what);
  nvrtc_compiles(&src, what);
}

/* The plan's cuda source under options o holds `marker` and compiles for sm_90 (skipped without
 * NVRTC). */
static void compiles_with(const Plans *r, const CgOptions *o, const char *marker, const char *what) {
  CudaNvrtc *nv;
  if (!r->p || cuda_nvrtc(&nv) != KILN_OK) return;
  StrBuf src = { 0 };
  OK(cg_render_plan(r->p, &cg_dialect_cuda, o, NULL, &src));
  CHECK_MSG(src.s && strstr(src.s, marker), "%s: no '%s' in the source", what, marker);
  nvrtc_compiles(&src, what);
}

static void compiles(const Plans *r, const char *what) { compiles_opt(r, NULL, what); }

/* The shapes of banded pairs (KILN_GEMM_ROWS=2 on cuda): a band of 32 rows, 8 lanes a row for rows of
 * at most 256 (32 rows at once), 32 for 1000 (4 passes); ragged rows (200: the last band's rows past
 * the last) and ragged columns (196, 1000); split along K (1024 deep). Each source compiles, and again with
 * the bands shared (cuda_pair_bands 2: every tile its columns, the band's tiles meeting at each sum). */
static const int64_t band_dims[][3] = { { 200, 96, 196 }, { 256, 1024, 256 }, { 40, 64, 1000 } };

static void test_band_shapes(void) {
  setenv("KILN_GEMM_ROWS", "2", 1);
  static const char *const lanes[3] = { "k_lanes<8>(", "k_lanes<8>(", "k_lanes<32>(" };
  for (int i = 0; i < 3; i++) {
    kiln_graph *g = dense_norm(band_dims[i][0], band_dims[i][1], band_dims[i][2]);
    Plans r = plan_for(g, "cuda");
    CHECK_MSG(r.p && r.p->n_kernels == 2 && r.p->kernels[1].chain == 2, "dense_norm %d: %d kernels", i, r.p ? r.p->n_kernels : 0);
    kiln_options ko = kiln_options_default();
    ko.backend = "cuda";
    ko.cuda_pair_bands = 1;  /* the band's last tile first (the default is 3) */
    CgOptions co;
    OK(rt_codegen_options(&ko, &cg_dialect_cuda, &co));
    CgGemm band;
    CHECK(r.p && cg_pair_banded(r.p, &r.p->kernels[1], &cg_dialect_cuda, &co, &band));
    if (r.p && i == 1) CHECK_MSG(band.splits > 1, "dense_norm 256x1024x256: %d K-spans", band.splits);
    compiles_with(&r, &co, lanes[i], "dense_norm banded");
    if (i == 0) compiles_with(&r, &co, "const bool live = tm0 + r0 + rw < INT64_C(200);", "dense_norm ragged");
    co.pair_bands = 2;
    CHECK(r.p && cg_pair_banded(r.p, &r.p->kernels[1], &cg_dialect_cuda, &co, &band) && band.band_share);
    compiles_with(&r, &co, "k_band_sync(kiln_bb0 + 2 * (tm0 / 32), ", "dense_norm, shared bands");
    co.pair_bands = 3;
    compiles_with(&r, &co, "k_band_meet(kiln_bb0 + (tm0 / 32) * ", "dense_norm, shared bands meeting by flags");
    compiles_with(&r, &co, " + nn * dm * dm;", "dense_norm, shared bands, the variance by Chan's combination");
    co.pair_bands = 2;
    if (i == 0) compiles_with(&r, &co, "const bool live = tm0 + rw < INT64_C(200);", "dense_norm ragged, shared bands");
    if (i == 2) compiles_with(&r, &co, "if (tn0 + c * 8 + gl < INT64_C(1000)) {", "dense_norm ragged columns, shared bands");
    plans_free(&r);
    kiln_graph_free(g);
  }
  unsetenv("KILN_GEMM_ROWS");
}

/* Rows at the head of their GEMM's tiles (KILN_GEMM_HEADS=1 on cuda): norm_dense's layernorm and its
 * projection as one kernel, the tile's rows into Ph; ragged rows (200: the last tile's rows past M
 * computed on row M - 1, the layernorm an output too, stored by the first column's tiles but for
 * those rows) and a K of 200 (Ph's rows past K zero), a K of 256 split into spans, ragged columns
 * (300). Each source compiles; the cpu plans it as two kernels. */
static const int64_t head_dims[][3] = { { 200, 200, 96 }, { 128, 256, 768 }, { 40, 64, 300 } };

static void test_head_shapes(void) {
  static const char *const marks[4] = { "for (int e = threadIdx.x; e < 768; e += 256) Ph[200 + e / 32][e % 32] = 0.0f;",
                                        "*(const float4 *)&(Ph + k0)[kk][cy * 4]", "Ph[c * 8 + gl][r0 + rw] = s",
                                        "if (tn0 == 0 && kbeg == 0 && tm0 + r0 + rw < INT64_C(200)) b" };
  for (int i = 0; i < 3; i++) {
    kiln_graph *g = norm_dense(head_dims[i][0], head_dims[i][1], head_dims[i][2], i == 0);
    for (int cuda = 1; cuda >= 0; cuda--) {
      kiln_options ko = kiln_options_default();
      ko.backend = cuda ? "cuda" : "cpu";
      ko.gemm_heads = 1;
      ko.gemm_kgroups = 1;  /* heads take k-group tiles (this test runs under KILN_GEMM_KGROUPS=0 too) */
      const Dialect *d = cuda ? &cg_dialect_cuda : &cg_dialect_c;
      PlanOptions po = plan_options(&ko);
      CgOptions co;
      OK(rt_codegen_options(&ko, d, &co));
      rt_plan_renderer(&ko, d, &co, &po);
      Plans r = { 0 };
      OK(te_lower(&g->g, &r.te));
      if (r.te) OK(plan_build(r.te, &po, &r.p));
      int launched = 0;
      for (int k = 0; r.p && k < r.p->n_kernels; k++) launched += r.p->kernels[k].chain >= 0;
      CgGemm h;
      bool headed = r.p && r.p->n_kernels == 2 && cg_gemm_headed(r.p, &r.p->kernels[1], &co, &h);
      CHECK_MSG(r.p && launched == (cuda ? 1 : 2) && headed == cuda, "norm_dense %d on %s: %d kernels launched, headed %d", i,
                ko.backend, launched, headed);
      if (cuda && headed && i == 1) CHECK_MSG(h.splits > 1, "norm_dense 128x256x768: %d K-spans", h.splits);
      if (cuda) compiles_with(&r, &co, marks[i], "norm_dense headed");
      if (cuda && i == 0) compiles_with(&r, &co, marks[3], "norm_dense headed, the layernorm stored");
      if (cuda && i == 1) {  /* gemm_heads 3: 24 column tiles in clusters of 4, each block 8 of a tile's rows */
        CgOptions cl = co;
        cl.gemm_heads = 3;
        CgGemm hc;
        CHECK(r.p && cg_gemm_headed(r.p, &r.p->kernels[1], &cl, &hc) && hc.head_cluster == 4 && hc.splits == 1 &&
              cg_gemm_head_lanes(&hc) == 32);
        compiles_with(&r, &cl, "if (e % 32 / 8 != hr) Ph[e / 32][e % 32] = k_cluster_ld(&Ph[e / 32][e % 32], (unsigned int)(e % 32 / 8));",
                      "norm_dense headed in clusters");
      }
      plans_free(&r);
    }
    kiln_graph_free(g);
  }
}

/* Narrow contractions a warp a row (KILN_CUDA_NARROW_DEPTH on cuda): relu(x@w+b) of at most 32 columns
 * over deep K: a block 8 rows, B staged in shared rows of N | 1 floats. Ragged rows (100: the last
 * block's warps past the rows stop), a K that is no multiple of 32 (272), 32 columns (stride 33), an odd
 * width (17, stride 17). Not narrow: x stored transposed (A not read along k), a B too large to stage
 * (400 x 33 floats), a K under the depth asked for, the option off. Each narrow source compiles. */
static const int64_t narrow_dims[][3] = { { 128, 512, 10 }, { 100, 272, 32 }, { 1000, 256, 17 } };

/* Does any kernel of the plan take the narrow form under o? */
static bool any_narrow(const Plans *r, const CgOptions *o) {
  CgGemm g;
  for (int i = 0; r->p && i < r->p->n_kernels; i++)
    if (cg_gemm_match(r->p, &r->p->kernels[i], o, &g) && g.narrow) return true;
  return false;
}

static void test_narrow_shapes(void) {
  static const int strides[3] = { 11, 33, 17 };
  kiln_options ko = kiln_options_default();
  ko.backend = "cuda";
  ko.cuda_narrow_depth = 256;
  CgOptions co, off = cg_options_default();
  OK(rt_codegen_options(&ko, &cg_dialect_cuda, &co));
  CHECK(co.narrow_depth == 256 && off.narrow_depth == 0);
  for (int i = 0; i < 3; i++) {
    int64_t m = narrow_dims[i][0], k = narrow_dims[i][1], n = narrow_dims[i][2];
    kiln_graph *gr = dense(m, k, n, false);
    Plans r = plan_for(gr, "cuda");
    CgGemm g;
    if (only_gemm_opt(&r, &co, &g, "dense, narrow")) {
      CHECK_MSG(g.narrow && g.splits == 1 && cg_narrow_stride(g.N) == strides[i] && cg_gemm_blocks(&g) == (m + 7) / 8 &&
                cg_gemm_smem(&g) == 4 * k * strides[i], "narrow %lldx%lldx%lld: narrow %d, %d spans, %lld blocks", (long long)m,
                (long long)k, (long long)n, g.narrow, g.splits, (long long)cg_gemm_blocks(&g));
      char mark[96];
      snprintf(mark, sizeof mark, "pa[q] = __fmaf_rn(fa, kiln_nb[kq * %d + q], pa[q]);", strides[i]);
      compiles_with(&r, &co, mark, "dense, narrow");
    }
    CgOptions deeper = co;
    deeper.narrow_depth = k + 1;
    CHECK_MSG(!any_narrow(&r, &off) && !any_narrow(&r, &deeper), "narrow %lldx%lldx%lld: narrow when off or too shallow",
              (long long)m, (long long)k, (long long)n);
    plans_free(&r);
    kiln_graph_free(gr);
  }
  kiln_graph *gt = dense(128, 512, 10, true), *gw = dense(64, 400, 32, false);
  Plans rt = plan_for(gt, "cuda"), rw = plan_for(gw, "cuda");
  CHECK_MSG(rt.p && rw.p && !any_narrow(&rt, &co) && !any_narrow(&rw, &co), "narrow: x^T@w or a B of 400 x 33 taken");
  plans_free(&rt), plans_free(&rw);
  kiln_graph_free(gt), kiln_graph_free(gw);
}

/* g planned for cuda with attention chains on, into *r; the index of the chain's last kernel (-1: none). */
static int chain_plan(kiln_graph *g, Plans *r) {
  kiln_options ko = kiln_options_default();
  ko.backend = "cuda";
  ko.attention = 1;
  PlanOptions po = plan_options(&ko);
  OK(te_lower(&g->g, &r->te));
  if (r->te) OK(plan_build(r->te, &po, &r->p));
  int last = -1;
  for (int k = 0; r->p && k < r->p->n_kernels; k++)
    if (r->p->kernels[k].chain == 3) last = k;
  return last;
}

/* Attention chains on tensor cores (cg_chain_mma): bf16 and f16 chains take both products on the
 * mma under the cuda options, with 16 rows a tile and 16-bit copies in shared memory; f32 does
 * not, nor does a chain under chain_mma off or tensor cores off, nor one whose row is not a
 * multiple of 16. Each source compiles for sm_90. */
static void test_chain_mma_shapes(void) {
  static const kiln_dtype ts[3] = { KILN_BF16, KILN_F16, KILN_F32 };
  static const CgMma want[3] = { CG_MMA_BF16, CG_MMA_F16, CG_MMA_NONE };
  for (int i = 0; i < 4; i++) {
    kiln_graph *g = attention_typed(ts[i % 3], 2, 3, 40, i == 3 ? 40 : 48, 64, 32);
    Plans r = { 0 };
    int last = chain_plan(g, &r);
    CHECK_MSG(last >= 0, "attention %d: no chain in the plan", i);
    if (last < 0) { plans_free(&r), kiln_graph_free(g); continue; }
    const Kernel *ko_ = &r.p->kernels[last];
    CgOptions o = cg_options_default();
    o.mma_half = true, o.chain_mma = 1;
    CgChainForm f;
    CgMma m = cg_chain_mma(r.p, ko_, &cg_dialect_cuda, &o, &f);
    CHECK_MSG(m == (i == 3 ? CG_MMA_NONE : want[i]), "attention %d: chain mma %d, expected %d", i, m, want[i]);
    CHECK(f == (m ? CG_CHAIN_SHARED : CG_CHAIN_FMA));
    if (i < 3) {
      /* f32: half the rows, the 18 tiles of 16 being too few for the chip; mma: the mma's 16 */
      CHECK_MSG(cg_chain_rows(ko_, f) == (m ? 16 : 8), "attention %d: %d rows a tile", i, cg_chain_rows(ko_, f));
      CHECK(cg_chain_smem(ko_, f, false) == (m ? 4 * 16 * (48 + 4) + 2 * (16 * 72 + 48 * 72 + 48 * 40 + 16 * 56)
                                         : 4 * (16 * 68 + 48 * 68 + 48 * 36 + 16 * 52)));
      compiles_with(&r, &o, m ? "*Ps = " : "*Qs = ", "attention chain");
    }
    if (i == 2) {
      /* f32, its threads spread (chain_spread): 8 rows over 48 keys, 2 rows a thread's scores (384 of
       * them); over 32 columns, 1 row a thread's 4 outputs (64 threads) */
      o.chain_spread = true;
      compiles_with(&r, &o, "float acc[2];", "attention chain, scores spread");
      compiles_with(&r, &o, "float o4[1][4];", "attention chain, outputs spread");
      o.chain_spread = false;
    }
    /* the rows in fragments (chain_mma 2): 8 warps of 16 rows a block, the 40 rows one block a
     * batch point, the queries, keys and values alone in shared memory */
    o.chain_mma = 2;
    m = cg_chain_mma(r.p, ko_, &cg_dialect_cuda, &o, &f);
    CHECK(f == (m ? CG_CHAIN_FRAGS : CG_CHAIN_FMA));
    if (m) {
      CHECK(cg_chain_rows(ko_, f) == 128 && cg_chain_splits(ko_, f, 0) == 1);
      CHECK(cg_chain_smem(ko_, f, false) == 2 * (128 * 72 + 48 * 72 + 48 * 40));
      compiles_with(&r, &o, "xs[", "attention chain, rows in fragments");
    }
    o.chain_mma = 0;
    CHECK(cg_chain_mma(r.p, ko_, &cg_dialect_cuda, &o, &f) == CG_MMA_NONE && f == CG_CHAIN_FMA);
    o.chain_mma = 1, o.mma_half = false;
    CHECK(cg_chain_mma(r.p, ko_, &cg_dialect_cuda, &o, &f) == CG_MMA_NONE);
    plans_free(&r);
    kiln_graph_free(g);
  }
}

/* The next tile's queries copied during this one (chain_prefetch): bert's 96 heads of 128 queries, 8
 * tiles in 4 blocks of 2, take a second buffer of queries (2 x 16 x 72 16-bit values more) and wait
 * for all but the newest copy; 2 x 3 heads of 40, a tile a block, have nothing to copy ahead. Both
 * sources compile. */
static void test_chain_prefetch_shapes(void) {
  /* batch, heads, queries, blocks a multiprocessor, copies ahead: bert's; a tile a block; 96 heads of 3
   * tiles at a block a multiprocessor, blocks of 2 tiles and of 1 (one block of more than one is enough) */
  static const struct { int64_t b, h, q; int sm; bool pre; } shapes[3] = {
    { 8, 12, 128, 0, true }, { 2, 3, 40, 0, false }, { 8, 12, 48, 1, true } };
  for (int i = 0; i < 3; i++) {
    kiln_graph *g = attention_typed(KILN_BF16, shapes[i].b, shapes[i].h, shapes[i].q, 128, 64, 64);
    Plans r = { 0 };
    int last = chain_plan(g, &r);
    CHECK_MSG(last >= 0, "prefetch %d: no chain in the plan", i);
    if (last >= 0) {
      const Kernel *ko_ = &r.p->kernels[last];
      CgOptions o = cg_options_default();
      o.mma_half = true, o.chain_mma = 1, o.chain_prefetch = true, o.chain_sm_blocks = shapes[i].sm;
      CgChainForm f;
      CHECK(cg_chain_mma(r.p, ko_, &cg_dialect_cuda, &o, &f) == CG_MMA_BF16 && f == CG_CHAIN_SHARED);
      bool pre = cg_chain_prefetch(ko_, f, &o);
      CHECK_MSG(pre == shapes[i].pre, "prefetch %d: %d (%lld blocks a batch point)", i, pre,
                (long long)cg_chain_splits(ko_, f, shapes[i].sm));
      CHECK(cg_chain_smem(ko_, f, true) == cg_chain_smem(ko_, f, false) + 2 * 16 * 72);
      /* bert's 8 tiles a head: 4 blocks of 2 for 4 blocks a multiprocessor, 3 (of 3, 3, 2) for 2, 2 of 4 for 1 */
      if (i == 0)
        CHECK_MSG(cg_chain_splits(ko_, f, 0) == 4 && cg_chain_splits(ko_, f, 4) == 4 && cg_chain_splits(ko_, f, 2) == 3 &&
                      cg_chain_splits(ko_, f, 1) == 2 && cg_chain_blocks(ko_, f, 1) == 96 * 2,
                  "bert's chain: %lld, %lld, %lld blocks a head at 4, 2, 1 a multiprocessor", (long long)cg_chain_splits(ko_, f, 0),
                  (long long)cg_chain_splits(ko_, f, 2), (long long)cg_chain_splits(ko_, f, 1));
      if (i == 0) {
        o.chain_sm_blocks = 1;
        compiles_with(&r, &o, "for (int64_t tt = 0; tt < 4; tt++)", "attention chain, queries copied ahead, 4 tiles a block");
        o.chain_sm_blocks = 0;
      }
      if (pre) compiles_with(&r, &o, "k_cp_wait<1>();", "attention chain, queries copied ahead");
      StrBuf src = { 0 };
      OK(cg_render_plan(r.p, &cg_dialect_cuda, &o, NULL, &src));
      CHECK_MSG(src.s && !!strstr(src.s, "uint16_t *Qc = ") == pre, "prefetch %d: a second buffer of queries %d", i,
                src.s && strstr(src.s, "uint16_t *Qc = "));
      sb_free(&src);
      if (i == 0) {
        /* P's 16-bit values for the second product: its bits where every operation rounded, rounded
         * by the stash under excess precision, where P is an unrounded f32 */
        for (int ep = 0; ep < 2; ep++) {
          o.excess_precision = ep;
          OK(cg_render_plan(r.p, &cg_dialect_cuda, &o, NULL, &src));
          const char *ps = src.s ? strstr(src.s, "Ps[rr * ") : NULL, *eq = ps ? strstr(ps, "] = ") : NULL;
          CHECK_MSG(eq && !strncmp(eq + 4, ep ? "k_bround(" : "k_bbits(", ep ? 9 : 8), "excess %d: P's stash: %.40s", ep,
                    eq ? eq : "(none)");
          sb_free(&src);
        }
        compiles_with(&r, &o, "k_bround(", "attention chain, P rounded at its stash");
        o.excess_precision = false;
      }
      o.chain_prefetch = false;
      CHECK(!cg_chain_prefetch(ko_, f, &o));
      OK(cg_render_plan(r.p, &cg_dialect_cuda, &o, NULL, &src));
      CHECK(src.s && !strstr(src.s, "uint16_t *Qc = "));
      sb_free(&src);
    }
    plans_free(&r);
    kiln_graph_free(g);
  }
}

/* A shared chain's softmax rows on G lanes each (chain_lanes): bert's 16-row tiles are one pass of 8
 * warps at 16 lanes (2 rows a warp at once), the row's sums meeting in its group's shuffles; 130
 * queries leave the last tile ragged, its rows past the queries reading memory at the last query's row
 * and storing nothing there (live); at 4 lanes, 8 rows a warp, two warps take the tile. At 32 (and by default)
 * a warp a row, as before. Each source compiles. */
static void test_chain_lanes_shapes(void) {
  static const int64_t queries[2] = { 128, 130 };
  for (int i = 0; i < 2; i++) {
    kiln_graph *g = attention_typed(KILN_BF16, 8, 12, queries[i], 128, 64, 64);
    Plans r = { 0 };
    int last = chain_plan(g, &r);
    CHECK_MSG(last >= 0, "lanes %d: no chain in the plan", i);
    for (int G = 0; last >= 0 && G <= 32; G = G ? G * 2 : 4) {
      CgOptions o = cg_options_default();
      o.mma_half = true, o.chain_mma = 1, o.chain_lanes = G;
      StrBuf src = { 0 };
      OK(cg_render_plan(r.p, &cg_dialect_cuda, &o, NULL, &src));
      char loop[96], red[32];
      int rows = G && G < 32 ? 32 / G : 1;
      if (G && G < 32) snprintf(loop, sizeof loop, "for (int rr = wp * %d + lane / %d; rr < 16; rr += %d) {", rows, G, 8 * rows);
      else snprintf(loop, sizeof loop, "for (int rr = wp; rr < 16; rr += 8) {");
      snprintf(red, sizeof red, G && G < 32 ? "k_lanes<%d>(" : "k_warp(", G);
      CHECK_MSG(src.s && strstr(src.s, loop), "lanes %d at %d: no '%s'", i, G, loop);
      CHECK_MSG(src.s && strstr(src.s, red), "lanes %d at %d: no '%s'", i, G, red);
      bool live = src.s && strstr(src.s, "const bool live = i0 + rr < INT64_C(130);");
      CHECK_MSG(live == (i == 1 && G && G < 32), "lanes %d at %d: live rows %d", i, G, live);
      CHECK_MSG(src.s && !!strstr(src.s, "if (i0 + rr >= ") == !(G && G < 32), "lanes %d at %d: a break past the queries", i, G);
      /* a row past the queries reads and writes its own row of Ss: on the last query's row, its summands
       * raced with that row's own reads (on the H100: a second run differed, errors up to 5e-3) */
      CHECK_MSG(src.s && strstr(src.s, "= Ss[rr * 132 + r];") && !strstr(src.s, "Ss[rq"), "lanes %d at %d: a row past the "
                "queries on another row of Ss", i, G);
      CHECK_MSG(src.s && !!strstr(src.s, "const int64_t v2 = i0 + (int64_t)rr < INT64_C(130) ? i0 + (int64_t)rr : INT64_C(129)") ==
                    live, "lanes %d at %d: the last query's row index", i, G);
      sb_free(&src);
      if (G == 16 || (G == 4 && i == 1)) compiles_with(&r, &o, "const int gl = lane % ", "attention chain, lanes a row");
    }
    plans_free(&r);
    kiln_graph_free(g);
  }
}

/* A chain whose scores add a mask read at the query row (m [s, t]): with 40 queries the last 16-row tile
 * is ragged, and its rows past the queries read the mask at the last query's row (the scores of those
 * rows are never stored, but a read past m is a read past its buffer); with 48, no tile is ragged and the
 * row is read as it is. In each form on tensor cores, and in the f32 one. */
static void test_chain_ragged_reads(void) {
  static const int64_t queries[2] = { 40, 48 };
  for (int i = 0; i < 2; i++)
    for (int form = 0; form < 4; form++) {  /* f32 FMA; mma shared, fragments, keys over 2 warps */
      kiln_dtype dt = form ? KILN_BF16 : KILN_F32;
      int64_t s = queries[i], ms[2] = { s, 64 }, vs[4] = { 2, 3, 64, 32 };
      kiln_graph *g;
      kiln_tensor z = scores_in(&g, dt, 2, 3, s, 64, 64), m, zm, v, p, o;
      OK(kiln_graph_input(g, "m", dt, 2, ms, &m));
      OK(kiln_graph_binary(g, KILN_ADD, z, m, &zm));
      OK(kiln_graph_input(g, "v", dt, 4, vs, &v));
      OK(kiln_graph_softmax(g, zm, 3, &p));
      OK(kiln_graph_matmul(g, p, v, &o));
      OK(kiln_graph_output(g, o, "o"));
      Plans r = { 0 };
      int last = chain_plan(g, &r);
      CHECK_MSG(last >= 0, "masked chain %lld queries, form %d: no chain in the plan", (long long)s, form);
      if (last >= 0) {
        CgOptions o_ = cg_options_default();
        o_.mma_half = form > 0, o_.chain_mma = form;
        StrBuf src = { 0 };
        OK(cg_render_plan(r.p, &cg_dialect_cuda, &o_, NULL, &src));
        bool clamped = src.s && strstr(src.s, "fr < INT64_C(40) ? ") && strstr(src.s, "fr : INT64_C(39), v3 = ");
        CHECK_MSG(clamped == (i == 0), "masked chain %lld queries, form %d: the score rows clamped %d", (long long)s, form,
                  clamped);
        sb_free(&src);
        if (i == 0) compiles_with(&r, &o_, "fr < INT64_C(40) ? ", "masked attention chain, ragged");
      }
      plans_free(&r);
      kiln_graph_free(g);
    }
}

/* The fragments' form with each tile's keys split over 2 or 4 warps (chain_mma 3, 4): bert's 96 heads of
 * 128 queries over 128 keys take 64 and 32 rows a block (2 and 4 blocks a head), each warp 64 and 32
 * keys; its rows' maxima and sums meet across the tile's warps (k_quad_keys) and its partial outputs go
 * through shared memory (Xs, E / 2 floats a thread) to be added in warp order. 130 queries: the last
 * block's tiles past the queries run on the last tile's rows (tl). 48 keys are no whole k-steps of 2 or
 * 4 warps: the plain fragments' form. Each source compiles. */
static void test_chain_key_warps_shapes(void) {
  static const struct { int64_t q, l; int mma, kw, rows; } shapes[] = {
    { 128, 128, 3, 2, 64 }, { 128, 128, 4, 4, 32 }, { 130, 64, 3, 2, 64 }, { 130, 64, 4, 4, 32 }, { 40, 48, 3, 1, 128 },
  };
  for (int i = 0; i < (int)(sizeof shapes / sizeof shapes[0]); i++) {
    kiln_graph *g = attention_typed(KILN_BF16, 8, 12, shapes[i].q, shapes[i].l, 64, 64);
    Plans r = { 0 };
    int last = chain_plan(g, &r);
    CHECK_MSG(last >= 0, "key warps %d: no chain in the plan", i);
    if (last >= 0) {
      const Kernel *ko_ = &r.p->kernels[last];
      CgOptions o = cg_options_default();
      o.mma_half = true, o.chain_mma = shapes[i].mma;
      CgChainForm f;
      CHECK(cg_chain_mma(r.p, ko_, &cg_dialect_cuda, &o, &f) == CG_MMA_BF16);
      int kw = cg_chain_key_warps(f), rows = cg_chain_rows(ko_, f);
      int64_t L = shapes[i].l, tiles = (shapes[i].q + rows - 1) / rows;
      CHECK_MSG(kw == shapes[i].kw && rows == shapes[i].rows && cg_chain_splits(ko_, f, 0) == tiles,
                "key warps %d: %d warps a tile, %d rows a block, %lld blocks a head", i, kw, rows,
                (long long)cg_chain_splits(ko_, f, 0));
      CHECK(cg_chain_smem(ko_, f, false) == 2 * (rows * 72 + L * 72 + L * 72) + (kw > 1 ? 4 * 256 * 32 : 0));
      StrBuf src = { 0 };
      OK(cg_render_plan(r.p, &cg_dialect_cuda, &o, NULL, &src));
      char red[40];
      snprintf(red, sizeof red, "k_quad_keys<%d>(", kw);
      bool split = src.s && strstr(src.s, red) && strstr(src.s, "Xs[(nt * 4 + q) * 256 + threadIdx.x] = oc[q];") &&
                   strstr(src.s, "const bool tl = ");
      CHECK_MSG(split == (kw > 1), "key warps %d: the split's reductions, partial outputs and tiles %d", i, split);
      CHECK_MSG(src.s && !!strstr(src.s, "if (iw < ") == (kw == 1), "key warps %d: warps past the queries skipped", i);
      sb_free(&src);
      if (kw > 1) compiles_with(&r, &o, red, "attention chain, keys over warps");
    }
    plans_free(&r);
    kiln_graph_free(g);
  }
}

/* Tensor cores: bf16 and f16 products take mma tiles under the cuda options (64x64 tiles of
 * 8 warps of 32x16, k-tiles of 32, 4x4 accumulator values a thread; 192 tiles, enough for the
 * chip), f32 ones only where tf32 allows; tensor_cores 0 turns the 16-bit ones off, 3 picks
 * tiles for four blocks a multiprocessor (3 spans of K here). Each kind's source compiles for
 * sm_90. */
static void test_mma_shapes(void) {
  static const kiln_dtype ts[3] = { KILN_BF16, KILN_F16, KILN_F32 };
  for (int i = 0; i < 3; i++)
    for (int tf = 0; tf < 2; tf++)
      for (int on = 0; on < 2; on++) {
        kiln_options ko = kiln_options_default();
        ko.tensor_cores = on, ko.tf32 = tf;
        CgOptions co;
        OK(rt_codegen_options(&ko, &cg_dialect_cuda, &co));
        CgMma want = ts[i] == KILN_F32 || !on ? (tf ? CG_MMA_TF32 : CG_MMA_NONE) : ts[i] == KILN_BF16 ? CG_MMA_BF16 : CG_MMA_F16;
        kiln_graph *gr = dense_typed(ts[i], 1024, 768, 768, false, false);
        Plans r = plan_of(gr);
        CgGemm g;
        if (only_gemm_opt(&r, &co, &g, "typed dense")) {
          CHECK_MSG(g.mma == want, "dtype %d tf32 %d tensor_cores %d: mma %d, expected %d", ts[i], tf, on, g.mma, want);
          if (want)
            CHECK_MSG(g.bm == 64 && g.bn == 64 && g.bk == 32 && g.tm == 4 && g.tn == 4 && g.kgroups == 1 && g.stages == 1 &&
                      g.splits == 1, "mma tile %dx%dx%d, %dx%d a thread, %d groups, %d splits", g.bm, g.bn, g.bk, g.tm, g.tn,
                      g.kgroups, g.splits);
          /* 16-bit operands that are plain loads go straight to shared memory: x along k, w along n */
          bool direct = want == CG_MMA_BF16 || want == CG_MMA_F16;
          CHECK_MSG(g.direct == direct && (!direct || (g.da.kfast && !g.db.kfast && g.da.coef[2] == 1 && g.da.coef[0] == 768 &&
                                                       g.db.coef[1] == 1 && g.db.coef[2] == 768)),
                    "direct %d (a along k %d, b along k %d)", g.direct, g.da.kfast, g.db.kfast);
        }
        if (want && (on || ts[i] == KILN_F32)) compiles_opt(&r, &co, "mma tile");
        plans_free(&r);
        kiln_graph_free(gr);
      }
  kiln_options ko = kiln_options_default();
  CgOptions co;
  OK(rt_codegen_options(&ko, &cg_dialect_cuda, &co));
  kiln_graph *gr = dense_typed(KILN_BF16, 128, 784, 512, false, false);
  Plans r = plan_of(gr);
  CgGemm g;
  if (only_gemm_opt(&r, &co, &g, "bf16 dense, split-K"))  /* as the f32 tiles: 4 spans of 7 k-tiles of 32 */
    CHECK_MSG(g.mma == CG_MMA_BF16 && g.bm == 32 && g.tm == 2 && g.splits == 4 && g.kspan == 224, "mma %d, %dx%d, splits %d of %lld",
              g.mma, g.bm, g.bn, g.splits, (long long)g.kspan);
  compiles_opt(&r, &co, "mma tile, split-K");
  plans_free(&r);
  kiln_graph_free(gr);
  ko.tensor_cores = 3;  /* four blocks a multiprocessor: 64x64 tiles (192 of them) in 3 spans of 8 k-tiles */
  OK(rt_codegen_options(&ko, &cg_dialect_cuda, &co));
  gr = dense_typed(KILN_BF16, 1024, 768, 768, false, false);
  r = plan_of(gr);
  if (only_gemm_opt(&r, &co, &g, "bf16 dense, tensor_cores 3"))
    CHECK_MSG(g.mma == CG_MMA_BF16 && g.direct && g.bm == 64 && g.splits == 3 && g.kspan == 256, "mma %d, %dx%d, splits %d", g.mma,
              g.bm, g.bn, g.splits);
  plans_free(&r);
  kiln_graph_free(gr);
  /* tensor_cores 2: mma, every operand through registers; a transposed x goes straight to shared
   * memory along m; a k of 129 (rows of 16-byte chunks would straddle) and an n of 300 do not */
  ko.tensor_cores = 2;
  OK(rt_codegen_options(&ko, &cg_dialect_cuda, &co));
  gr = dense_typed(KILN_BF16, 1024, 768, 768, false, false);
  r = plan_of(gr);
  if (only_gemm_opt(&r, &co, &g, "bf16 dense, tensor_cores 2")) CHECK(g.mma == CG_MMA_BF16 && !g.direct);
  plans_free(&r);
  kiln_graph_free(gr);
  ko.tensor_cores = 1;
  OK(rt_codegen_options(&ko, &cg_dialect_cuda, &co));
  static const struct { int64_t m, k, n; bool xt, direct; } dd[] = {
    { 256, 64, 128, true, true }, { 257, 129, 136, false, false }, { 1000, 40, 300, false, false } };
  for (int i = 0; i < 3; i++) {
    gr = dense_typed(KILN_BF16, dd[i].m, dd[i].k, dd[i].n, dd[i].xt, false);
    r = plan_of(gr);
    if (only_gemm_opt(&r, &co, &g, "bf16 dense, direct or not"))
      CHECK_MSG(g.mma == CG_MMA_BF16 && g.direct == dd[i].direct && (!g.direct || !g.da.kfast),
                "%lldx%lldx%lld: direct %d", (long long)dd[i].m, (long long)dd[i].k, (long long)dd[i].n, g.direct);
    if (i == 0) compiles_opt(&r, &co, "mma tile, A along m");
    plans_free(&r);
    kiln_graph_free(gr);
  }
  /* autocast's bf16 copies of f32 values: a 32x32 tile through registers that holds the f32
   * values and rounds them at the stash (k_bround), or, under cuda_mma_late_round 0, as they are
   * read (k_rb, the stash taking the rounded value's bits) */
  for (int late = 1; late >= 0; late--) {
    kiln_options ka = kiln_options_default();
    ka.cuda_mma_late_round = late;
    OK(rt_codegen_options(&ka, &cg_dialect_cuda, &co));
    gr = autocast_dense(1024, 784, 128);
    r = plan_of(gr);
    if (only_gemm_opt(&r, &co, &g, "autocast dense"))
      CHECK_MSG(g.mma == CG_MMA_BF16 && !g.direct && g.bm == 32 && g.a_round == late && g.b_round == late,
                "late %d: mma %d direct %d %dx%d, rounds %d %d", late, g.mma, g.direct, g.bm, g.bn, g.a_round, g.b_round);
    StrBuf src = { 0 };
    if (r.p) OK(cg_render_plan(r.p, &cg_dialect_cuda, &co, NULL, &src));
    bool rounds_at_stash = src.s && strstr(src.s, "k_bround(pfa[l])"), stashes_bits = src.s && strstr(src.s, "k_bbits(pfa[l])");
    CHECK_MSG(rounds_at_stash == (late == 1) && stashes_bits == (late == 0), "late %d: the stash's conversion", late);
    sb_free(&src);
    compiles_opt(&r, &co, "mma tile, autocast");
    plans_free(&r);
    kiln_graph_free(gr);
  }
  /* excess precision: a factor computed in the tile's prologue (relu(x) in bf16, inlined under
   * gemm_reuse 32) may be an unrounded f32 there, so its stash rounds
   * (k_bround); the weight, a plain load, keeps its bits (k_bbits) */
  for (int ep = 0; ep < 2; ep++) {
    kiln_options ke = kiln_options_default();
    ke.excess_precision = ep;
    ke.cuda_mma_late_round = 0;  /* late, the stash rounds such a factor anyway (the leg above) */
    OK(rt_codegen_options(&ke, &cg_dialect_cuda, &co));
    int64_t xs[2] = { 1024, 784 }, ws[2] = { 784, 128 };
    float *wf = rnd(784 * 128);
    uint16_t *wb = malloc(784 * 128 * sizeof *wb);
    CHECK(wb != NULL);
    kiln_tensor x, sq, wt, y;
    OK(kiln_graph_create(&gr));
    OK(kiln_graph_input(gr, "x", KILN_BF16, 2, xs, &x));
    for (int i = 0; wb && i < 784 * 128; i++) wb[i] = float_to_bf16(wf[i]);
    OK(kiln_graph_param(gr, "w", KILN_BF16, 2, ws, wb, &wt));
    OK(kiln_graph_unary(gr, KILN_RELU, x, &sq));
    OK(kiln_graph_matmul(gr, sq, wt, &y));
    OK(kiln_graph_output(gr, y, "y"));
    free(wf), free(wb);
    setenv("KILN_GEMM_REUSE", "32", 1);  /* relu counted once a 32-column tile: inlined, not stored */
    r = plan_of(gr);
    unsetenv("KILN_GEMM_REUSE");
    if (only_gemm_opt(&r, &co, &g, "bf16 product of a computed factor"))
      CHECK_MSG(g.mma == CG_MMA_BF16 && !g.direct && g.a_stash_round == ep && !g.b_stash_round,
                "excess %d: mma %d direct %d, stash rounds %d %d", ep, g.mma, g.direct, g.a_stash_round, g.b_stash_round);
    StrBuf src = { 0 };
    if (r.p) OK(cg_render_plan(r.p, &cg_dialect_cuda, &co, NULL, &src));
    bool rounds = src.s && strstr(src.s, "k_bround(pfa[l])"), bits = src.s && strstr(src.s, "k_bbits(pfa[l])");
    CHECK_MSG(rounds == (ep == 1) && bits == (ep == 0) && src.s && strstr(src.s, "k_bbits(pfb"), "excess %d: the stashes' conversions", ep);
    /* and its bf16 output, stored unrounded there, by one conversion (k_f2b_st) */
    CHECK_MSG(src.s && !!strstr(src.s, "= k_f2b_st(") == (ep == 1) && !!strstr(src.s, "= k_f2b(") == (ep == 0),
              "excess %d: the store's conversion", ep);
    sb_free(&src);
    compiles_opt(&r, &co, "mma tile, computed factor");
    plans_free(&r);
    kiln_graph_free(gr);
  }

  /* the glsl dialect has no mma: its tiles stay f32 whatever the options */
  OK(rt_codegen_options(&ko, &cg_dialect_glsl, &co));
  gr = dense_typed(KILN_BF16, 1024, 768, 768, false, false);
  r = plan_of(gr);
  if (only_gemm_opt(&r, &co, &g, "bf16 dense, glsl")) CHECK(g.mma == CG_MMA_NONE);
  plans_free(&r);
  kiln_graph_free(gr);
}

/* Hopper's warpgroup MMA (cuda_wgmma): bf16 and f16 products of direct operands take 128-row tiles of
 * k 64, the width whose waves over 132 multiprocessors cost least (bert's 768 columns: 64, 96 tiles;
 * 2304 and 3072: 192, 96 and 128 tiles), one span, and stages as 200 KB hold (6 of 24 KB, 5 of 40 KB);
 * the source holds the product with B N-major (a K-major A) and compiles for sm_90a; a transposed x
 * is M-major A; the option takes the products from the library; f32 products and glsl are untouched. */
static void test_wgmma_shapes(void) {
  kiln_options ko = kiln_options_default();
  ko.cuda_wgmma = 1;
  CgOptions co;
  OK(rt_codegen_options(&ko, &cg_dialect_cuda, &co));
  CHECK(co.wgmma);
  static const struct { int64_t m, k, n; bool xt; int bn, stages; const char *fn; } d[] = {
    { 1024, 768, 768, false, 64, 6, "k_wgmma_bf16_64_01(acc[0]" }, { 1024, 768, 2304, false, 192, 5, "k_wgmma_bf16_192_01(acc[0]" },
    { 1024, 768, 3072, false, 192, 5, "k_wgmma_bf16_192_01(acc[0]" }, { 256, 64, 128, true, 64, 6, "k_wgmma_bf16_64_11(acc[0]" } };
  for (int i = 0; i < 4; i++) {
    kiln_graph *gr = dense_typed(KILN_BF16, d[i].m, d[i].k, d[i].n, d[i].xt, false);
    Plans r = plan_of(gr);
    CgGemm g;
    if (only_gemm_opt(&r, &co, &g, "bf16 dense, wgmma"))
      CHECK_MSG(g.wgmma && g.direct && g.bm == 128 && g.bn == d[i].bn && g.bk == 64 && g.tm == 1 && g.tn == d[i].bn / 2 &&
                g.splits == 1 && g.wg_stages == d[i].stages && g.da.kfast == !d[i].xt && !g.db.kfast,
                "%lldx%lldx%lld: wgmma %d, %dx%dx%d, %d splits, %d stages", (long long)d[i].m, (long long)d[i].k,
                (long long)d[i].n, g.wgmma, g.bm, g.bn, g.bk, g.splits, g.wg_stages);
    CHECK_MSG(!cg_library_candidate(r.p, &r.p->kernels[0], &co), "%lldx%lldx%lld: still the library's", (long long)d[i].m,
              (long long)d[i].k, (long long)d[i].n);
    compiles_with(&r, &co, d[i].fn, "wgmma tile");
    plans_free(&r);
    kiln_graph_free(gr);
  }
  kiln_graph *gr = dense_typed(KILN_F32, 1024, 768, 768, false, false);  /* f32: no mma, no wgmma */
  Plans r = plan_of(gr);
  CgGemm g;
  if (only_gemm_opt(&r, &co, &g, "f32 dense, wgmma asked")) CHECK(!g.wgmma && !g.mma);
  plans_free(&r);
  kiln_graph_free(gr);
  OK(rt_codegen_options(&ko, &cg_dialect_glsl, &co));
  CHECK(!co.wgmma);
  ko.cuda_wgmma = 2;
  CHECK(rt_codegen_options(&ko, &cg_dialect_cuda, &co) == KILN_ERR_INVALID_ARG);
}

static void test_shapes(void) {
  CgGemm g;
  CgOptions dflt0 = cg_options_default();
  kiln_graph *gr = dense(128, 784, 512, false);
  Plans r = plan_of(gr);
  if (only_gemm(&r, &g, "dense")) {
    CHECK(g.M == 128 && g.N == 512 && g.K == 784 && g.batch == 1);
    CHECK(g.a_kfast && !g.b_kfast);       /* x [m, k] along k, w [k, n] along n */
    CHECK(g.bm == 32 && g.bn == 32);      /* 4 x 16 tiles of 64: too few for the chip */
    /* 64 tiles: split-K into 4 spans of 7 k-tiles (224 points; the last one 112) */
    CHECK_MSG(g.splits == 4 && g.kspan == 224, "splits %d, kspan %lld", g.splits, (long long)g.kspan);
    CHECK(cg_gemm_blocks(&g) == 256);
  }
  compiles(&r, "dense");
  plans_free(&r);
  CgOptions off = cg_options_default();
  off.splitk = CG_SPLITK_OFF;  /* off: one block per tile over all of K */
  r = plan_of(gr);
  if (only_gemm_opt(&r, &off, &g, "dense, split-K off")) CHECK(g.splits == 1 && g.kspan >= g.K && cg_gemm_blocks(&g) == 64);
  plans_free(&r);
  {  /* long K (gemm_long_k_blocks): 1024x128 outputs over 784 are 128 tiles of 32x32, whole when
      * it is 0 (a block a multiprocessor); towards 512 blocks, 4 spans of 7 k-tiles; towards 256
      * (the cuda default), 2 of 13. A K of 256 (8 k-tiles) is not long: whole either way. The
      * option: 256 on cuda by default, 0 on glsl, -2 refused. */
    kiln_options ko = kiln_options_default();
    ko.cuda_long_k_blocks = -1;
    CgOptions cu, glo;
    OK(rt_codegen_options(&ko, &cg_dialect_cuda, &cu));
    OK(rt_codegen_options(&ko, &cg_dialect_glsl, &glo));
    CHECK_MSG(cu.gemm_long_k_blocks == 256 && glo.gemm_long_k_blocks == 0, "long K blocks: cuda %lld, glsl %lld",
              (long long)cu.gemm_long_k_blocks, (long long)glo.gemm_long_k_blocks);
    ko.cuda_long_k_blocks = -2;
    FAILS(KILN_ERR_INVALID_ARG, rt_codegen_options(&ko, &cg_dialect_cuda, &cu));
    CgOptions lk = cg_options_default(), l256 = cg_options_default();
    lk.gemm_long_k_blocks = 512, l256.gemm_long_k_blocks = 256;
    for (int k = 0; k < 2; k++) {
      kiln_graph *gl = dense(1024, k ? 256 : 784, 128, false);
      Plans rl = plan_of(gl);
      CgGemm d0, d1, d2;
      if (only_gemm(&rl, &d0, "dense 1024x784x128") && only_gemm_opt(&rl, &lk, &d1, "dense 1024x784x128, long K") &&
          only_gemm_opt(&rl, &l256, &d2, "dense 1024x784x128, long K 256"))
        CHECK_MSG(d0.bm == 32 && d0.splits == 1 && d1.bm == 32 && d1.splits == (k ? 1 : 4) && (k || d1.kspan == 224) &&
                  d2.splits == (k ? 1 : 2) && (k || d2.kspan == 416),
                  "K %d: splits %d when off, %d (of %lld) towards 512, %d (of %lld) towards 256", k ? 256 : 784, d0.splits,
                  d1.splits, (long long)d1.kspan, d2.splits, (long long)d2.kspan);
      if (!k) compiles_opt(&rl, &lk, "dense, long K");
      plans_free(&rl);
      kiln_graph_free(gl);
    }
  }
  /* glsl: no module-scope device arrays (no split-K): 64 tiles of 32x32 over all of K, in k
   * groups by default (the tiles rows of vectors), else 2x2 outputs a thread (gemm_kgroups 0);
   * the shared tiles at module scope, in the kernel's part of the source, before its function */
  for (int kgroups = 1; kgroups >= 0; kgroups--) {
    CgOptions gl;
    kiln_options ko = kiln_options_default();
    ko.gemm_kgroups = kgroups;
    OK(rt_codegen_options(&ko, &cg_dialect_glsl, &gl));
    r = plan_of(gr);
    if (only_gemm_opt(&r, &gl, &g, "dense, glsl")) {
      CHECK_MSG(g.bm == 32 && g.bn == 32 && g.kgroups == (kgroups ? 4 : 1) && g.tm == (kgroups ? 4 : 2) && g.tn == (kgroups ? 1 : 2),
                "glsl tile %dx%d, %dx%d a thread, %d groups", g.bm, g.bn, g.tm, g.tn, g.kgroups);
      CHECK(g.splits == 1 && cg_gemm_blocks(&g) == 64);
      StrBuf src = { 0 };
      OK(cg_render_plan(r.p, &cg_dialect_glsl, &gl, NULL, &src));
      const char *decl = kgroups ? "\nshared vec4 As[32][9];" : "\nshared float As[32][33];";
      const char *tiles = src.s ? strstr(src.s, decl) : NULL, *fn = tiles ? strstr(tiles, "void kiln_k") : NULL;
      const char *open = src.s ? strstr(src.s, "#if KILN_KERNEL == ") : NULL;
      CHECK_MSG(tiles && fn && open && open < tiles && !strstr(fn, "shared "), "glsl: the shared tiles are not at module scope");
      sb_free(&src);
    }
    plans_free(&r);
  }
  kiln_graph_free(gr);

  /* split spans: 40 ragged tiles of 63 k-tiles -> 7 spans of 9; mlp_train_b32's first layer,
   * 4 tiles of 25 k-tiles -> 9 spans of 3 (it takes the GEMM shape only because it splits) */
  static const struct { int64_t m, k, n; int splits; int64_t kspan; } sp[] = { { 100, 2000, 300, 7, 288 },
                                                                                { 32, 784, 128, 9, 96 } };
  for (int i = 0; i < 2; i++) {
    gr = dense(sp[i].m, sp[i].k, sp[i].n, false);
    r = plan_of(gr);
    if (only_gemm(&r, &g, "dense split")) {
      CHECK_MSG(g.splits == sp[i].splits && g.kspan == sp[i].kspan, "%lldx%lldx%lld: splits %d, kspan %lld",
                (long long)sp[i].m, (long long)sp[i].k, (long long)sp[i].n, g.splits, (long long)g.kspan);
      CHECK(g.splits * g.kspan >= g.K && (g.splits - 1) * g.kspan < g.K && g.kspan % g.bk == 0);
    }
    compiles(&r, "dense split");
    plans_free(&r);
    kiln_graph_free(gr);
  }

  gr = dense(4096, 512, 512, false);
  r = plan_of(gr);
  if (only_gemm(&r, &g, "dense 4096")) CHECK(g.bm == 128 && g.bn == 128 && g.splits == 1);
  plans_free(&r);
  kiln_graph_free(gr);

  gr = dense(300, 64, 96, true);
  r = plan_of(gr);
  if (only_gemm(&r, &g, "x^T w")) CHECK(g.M == 300 && g.N == 96 && g.K == 64 && !g.a_kfast && !g.b_kfast);
  compiles(&r, "x^T w");
  plans_free(&r);
  kiln_graph_free(gr);

  gr = scores(2, 3, 37, 45, 16);
  r = plan_of(gr);
  if (only_gemm(&r, &g, "scores")) CHECK(g.batch == 6 && g.M == 37 && g.N == 45 && g.K == 16 && g.a_kfast && g.b_kfast);
  compiles(&r, "scores");
  plans_free(&r);
  kiln_graph_free(gr);

  gr = conv(2, 3, 17, 19, 8);
  r = plan_of(gr);
  if (only_gemm(&r, &g, "conv")) CHECK(g.M == 2 * 17 * 19 && g.N == 8 && g.K == 27 && g.batch == 1);
  compiles(&r, "conv");
  plans_free(&r);
  kiln_graph_free(gr);

  /* sibling projections of one input, as cuda plans them: one kernel, one A tile and a B
   * tile for each (never 128x128: 64 sums a thread for each would not fit in registers),
   * split along K like any GEMM, never the library's; from the library's size on
   * (PLAN_LIBRARY_WORK) a GEMM kernel each instead */
  static const struct { int64_t m, k, n; bool xt; int nb, bm, splits; } sb[] = {
    { 128, 784, 512, false, 3, 32, 4 }, { 1000, 100, 520, false, 3, 64, 1 }, { 300, 64, 96, true, 2, 32, 1 },
    { 1024, 768, 768, false, 3, 0, 0 } };
  for (int i = 0; i < 4; i++) {
    gr = siblings(sb[i].m, sb[i].k, sb[i].n, sb[i].xt, sb[i].nb);
    r = plan_for(gr, "cuda");
    if (!sb[i].bm && r.p) {
      CHECK_MSG(r.p->n_kernels == sb[i].nb, "siblings %lldx%lldx%lld: %d kernels", (long long)sb[i].m, (long long)sb[i].k,
                (long long)sb[i].n, r.p->n_kernels);
      for (int j = 0; j < r.p->n_kernels; j++) CHECK(cg_library_candidate(r.p, &r.p->kernels[j], &dflt0));
    } else if (only_gemm(&r, &g, "siblings")) {
      CHECK_MSG(g.n_b == sb[i].nb && g.bm == sb[i].bm && g.splits == sb[i].splits && r.p->n_kernels == 1,
                "siblings %lldx%lldx%lld: %d sums, %dx%d tiles, %d spans", (long long)sb[i].m, (long long)sb[i].k,
                (long long)sb[i].n, g.n_b, g.bm, g.bn, g.splits);
      CHECK(!cg_library_candidate(r.p, &r.p->kernels[0], &dflt0));
    }
    compiles(&r, "siblings");
    plans_free(&r);
    kiln_graph_free(gr);
  }

  /* vector tile reads (cuda by default; CgGemm.a_vec): an f32 operand that is a plain load read
   * in runs of 4 along its read direction (K or its own extent a multiple of 4). x [128, 784]
   * along k and w [784, 512] along n both; x^T (stored [k, m]) along m; M 257 and N 130: neither.
   * Never on glsl, nor when kiln_options.cuda_vec_reads is 0. The source reads 16 bytes at once. */
  {
    static const struct { int64_t m, k, n; bool xt, a, b; } vc[] = {
      { 128, 784, 512, false, true, true }, { 300, 64, 96, true, true, true }, { 257, 129, 130, true, false, false },
      { 100, 2000, 300, false, true, true } };
    kiln_options ko = kiln_options_default();
    ko.cuda_vec_reads = -1, ko.cuda_copy_stages = 0;  /* the vector reads through registers (copies: test_copies_shapes) */
    CgOptions cu, gl, off;
    OK(rt_codegen_options(&ko, &cg_dialect_cuda, &cu));
    OK(rt_codegen_options(&ko, &cg_dialect_glsl, &gl));
    ko.cuda_vec_reads = 0;
    OK(rt_codegen_options(&ko, &cg_dialect_cuda, &off));
    CHECK(cu.gemm_vec == 1 && !gl.gemm_vec && !off.gemm_vec);
    for (int i = 0; i < 4; i++) {
      gr = dense(vc[i].m, vc[i].k, vc[i].n, vc[i].xt);
      r = plan_of(gr);
      CgGemm gv, go;
      if (only_gemm_opt(&r, &cu, &gv, "dense, vector reads") && only_gemm_opt(&r, &off, &go, "dense, vector reads off")) {
        CHECK_MSG(gv.a_vec == vc[i].a && gv.b_vec == vc[i].b && !go.a_vec && !go.b_vec, "%lldx%lldx%lld%s: a_vec %d, b_vec %d",
                  (long long)vc[i].m, (long long)vc[i].k, (long long)vc[i].n, vc[i].xt ? " (x^T)" : "", gv.a_vec, gv.b_vec);
        CHECK(gv.a_kfast == !vc[i].xt && !gv.b_kfast);
        StrBuf src = { 0 };
        OK(cg_render_plan(r.p, &cg_dialect_cuda, &cu, NULL, &src));
        CHECK(src.s && (strstr(src.s, "const float4 v = *(const float4 *)(b") != NULL) == (vc[i].a || vc[i].b));
        sb_free(&src);
        compiles_opt(&r, &cu, "dense, vector reads");
      }
      plans_free(&r);
      kiln_graph_free(gr);
    }
  }

  /* runs across vars (cuda_vec_reads 2, a candidate): a convolution's weights [8, 4, 3, 3] read
   * along k = (ci, kh, kw), offsets contiguous over 36 points, are vector reads only then (their
   * last var is 3 long); its window, padded, never */
  {
    kiln_options ko = kiln_options_default();
    CgOptions one, across;
    ko.cuda_vec_reads = 1;
    OK(rt_codegen_options(&ko, &cg_dialect_cuda, &one));
    ko.cuda_vec_reads = 2;
    OK(rt_codegen_options(&ko, &cg_dialect_cuda, &across));
    CHECK(one.gemm_vec == 1 && across.gemm_vec == 2);
    gr = conv(2, 4, 17, 19, 8);
    r = plan_of(gr);
    CgGemm g1, g2;
    if (only_gemm_opt(&r, &one, &g1, "conv, runs along one var") && only_gemm_opt(&r, &across, &g2, "conv, runs across vars")) {
      CHECK(g1.K == 36 && g1.b_kfast && !g1.a_vec && !g1.b_vec);
      CHECK_MSG(!g2.a_vec && g2.b_vec, "conv 4 -> 8 channels, runs across vars: a_vec %d, b_vec %d", g2.a_vec, g2.b_vec);
      compiles_opt(&r, &across, "conv, runs across vars");
    }
    plans_free(&r);
    kiln_graph_free(gr);
    gr = conv(2, 3, 17, 19, 8);  /* K = 27: no run of 4 */
    r = plan_of(gr);
    if (only_gemm_opt(&r, &across, &g2, "conv 3 channels, runs across vars")) CHECK(!g2.a_vec && !g2.b_vec);
    plans_free(&r);
    kiln_graph_free(gr);
  }

  /* one fence (cuda_one_fence, on by default): a split-K tile's arrival is fenced by its first
   * thread, around its count, after the block's barrier; at 0 every thread fences before the
   * barrier and after the count; at 2 the first thread's count is one acquire-release atomic,
   * no fence. 32x784x128 splits K. */
  {
    kiln_options ko = kiln_options_default();
    CgOptions byd, every, one, acq;
    ko.cuda_one_fence = 3;
    FAILS(KILN_ERR_INVALID_ARG, rt_codegen_options(&ko, &cg_dialect_cuda, &one));
    CHECK(strstr(kiln_last_error(), "KILN_CUDA_ONE_FENCE"));
    ko.cuda_one_fence = -1;
    OK(rt_codegen_options(&ko, &cg_dialect_cuda, &byd));
    ko.cuda_one_fence = 1;
    OK(rt_codegen_options(&ko, &cg_dialect_cuda, &one));
    ko.cuda_one_fence = 0;
    OK(rt_codegen_options(&ko, &cg_dialect_cuda, &every));
    ko.cuda_one_fence = 2;
    OK(rt_codegen_options(&ko, &cg_dialect_cuda, &acq));
    CHECK(byd.one_fence == 2 && one.one_fence == 1 && !every.one_fence && acq.one_fence == 2);
    gr = dense(32, 784, 128, false);
    r = plan_of(gr);
    CgGemm g1;
    if (only_gemm_opt(&r, &one, &g1, "split K, one fence")) {
      CHECK(g1.splits > 1 && g1.one_fence);
      StrBuf s0 = { 0 }, s1 = { 0 }, s2 = { 0 };
      OK(cg_render_plan(r.p, &cg_dialect_cuda, &every, NULL, &s0));
      OK(cg_render_plan(r.p, &cg_dialect_cuda, &one, NULL, &s1));
      OK(cg_render_plan(r.p, &cg_dialect_cuda, &acq, NULL, &s2));
      const char *lone = "__threadfence(); last = atomicAdd(&kiln_arrived";
      CHECK(s0.s && s1.s && !strstr(s0.s, lone) && strstr(s1.s, lone));
      CHECK(s0.s && strstr(s0.s, "__threadfence();\n    __syncthreads();\n    if (threadIdx.x == 0) last = atomicAdd"));
      CHECK(s2.s && strstr(s2.s, "if (threadIdx.x == 0) {\n      last = k_add_acq_rel(&kiln_arrived") && !strstr(s2.s, lone) &&
            !strstr(s2.s, "__threadfence();\n    __syncthreads();") && strstr(s2.s, "atom.acq_rel.gpu.add.u32"));
      sb_free(&s0), sb_free(&s1), sb_free(&s2);
      compiles_opt(&r, &one, "split K, one fence");
      compiles_opt(&r, &acq, "split K, an acquire-release count");
      /* by flags (cuda_split_flags): the spans but the last release their partials and go on; the last
       * waits for their flags and adds theirs, then its own; no arrival count */
      CgOptions fl;
      ko.cuda_split_flags = 1;
      OK(rt_codegen_options(&ko, &cg_dialect_cuda, &fl));
      ko.cuda_split_flags = 0;
      CHECK(fl.split_flags);
      StrBuf s3 = { 0 };
      OK(cg_render_plan(r.p, &cg_dialect_cuda, &fl, NULL, &s3));
      char done[96], meet[96], own[160];
      snprintf(done, sizeof done, "k_flag_done(kiln_sf0 + tile * %d, (unsigned)(w %% %d));", g1.splits, g1.splits);
      snprintf(meet, sizeof meet, "k_band_meet(kiln_sf0 + tile * %d, %du, %du);", g1.splits, g1.splits - 1, g1.splits - 1);
      snprintf(own, sizeof own, "for (int q = 0; q < %d; q++) s += __ldcg(tp + q * ", g1.splits - 1);
      const char *d0 = s3.s ? strstr(s3.s, done) : NULL, *m0 = d0 ? strstr(d0, meet) : NULL, *o0 = m0 ? strstr(m0, own) : NULL;
      CHECK_MSG(o0 && strstr(o0, "s += acc[i][j];  /* its own, last */") && !strstr(s3.s, "kiln_arrived0"),
                "split K by flags: done %d, meet %d, sum %d", !!d0, !!m0, !!o0);
      sb_free(&s3);
      compiles_opt(&r, &fl, "split K by flags");
      fl.min_span_tiles = 1;  /* 25 spans of one k-tile: the last waits for 24 flags */
      compiles_with(&r, &fl, "k_band_meet(kiln_sf0 + tile * 25, 24u, 24u);", "split K by flags, spans of one k-tile");
      ko.cuda_split_flags = 2;
      FAILS(KILN_ERR_INVALID_ARG, rt_codegen_options(&ko, &cg_dialect_cuda, &fl));
      CHECK(strstr(kiln_last_error(), "KILN_CUDA_SPLIT_FLAGS"));
      ko.cuda_split_flags = 0;
    }
    plans_free(&r);
    kiln_graph_free(gr);
  }

  /* a row of 10 outputs over a long reduction is one block per output with thin spans off (the codegen
   * default; cuda's is 128); under thin_spans it is one 32x32 tile split into 64 spans of 2 k-tiles (at 128,
   * still 64: spans of at least 2 of its 128 k-tiles) */
  gr = dense(10, 4096, 10, false);
  r = plan_of(gr);
  CgOptions dflt = cg_options_default(), thin = dflt;
  for (int i = 0; r.p && i < r.p->n_kernels; i++) CHECK(cg_gpu_shape(r.p, &r.p->kernels[i], &dflt) != CG_GPU_GEMM);
  thin.thin_spans = 64;
  CgGemm gt;
  if (only_gemm_opt(&r, &thin, &gt, "thin 10x4096x10"))
    CHECK_MSG(gt.bm == 32 && gt.bn == 32 && gt.splits == 64 && gt.kspan == 64, "thin: %dx%d tiles, %d spans of %lld", gt.bm,
              gt.bn, gt.splits, (long long)gt.kspan);
  thin.thin_spans = 128;
  if (only_gemm_opt(&r, &thin, &gt, "thin 10x4096x10, 128")) CHECK(gt.splits == 64 && gt.kspan == 64);
  compiles_opt(&r, &thin, "thin 10x4096x10");
  plans_free(&r);
  kiln_graph_free(gr);
  /* too short for 32 spans of 2 k-tiles (2000 deep: 63 k-tiles): block rows whatever the option */
  gr = dense(10, 2000, 10, false);
  r = plan_of(gr);
  for (int i = 0; r.p && i < r.p->n_kernels; i++) CHECK(cg_gpu_shape(r.p, &r.p->kernels[i], &thin) != CG_GPU_GEMM);
  plans_free(&r);
  kiln_graph_free(gr);
}

/* Which kernels go to cuBLASLt, and how their operands map (no GPU needed). */
/* Copies (cuda_copy_stages 2..4): a 32x32 k-group tile whose factors are both vector reads copies
 * them straight into shared stages. An operand read along k keeps rows of k (A: x [m, k]; B: w
 * stored [n, k]), one read along x rows of x (A: x stored [k, m]; B: w [k, n]); a factor that is
 * not a vector read (K = 65) or sibling Bs keep the register tiles. Each source compiles. */
static void test_copies_shapes(void) {
  kiln_options ko = kiln_options_default();
  ko.gemm_kgroups = 1, ko.cuda_vec_reads = -1;  /* whatever the environment (the flat variant's KILN_GEMM_KGROUPS=0) */
  CgOptions byd, c0, c2, c4;
  int bad[] = { 1, 5, -2 };
  for (int i = 0; i < 3; i++) {
    ko.cuda_copy_stages = bad[i];
    FAILS(KILN_ERR_INVALID_ARG, rt_codegen_options(&ko, &cg_dialect_cuda, &c2));
    CHECK(strstr(kiln_last_error(), "KILN_CUDA_COPY_STAGES"));
  }
  ko.cuda_copy_stages = -1;
  OK(rt_codegen_options(&ko, &cg_dialect_cuda, &byd));
  ko.cuda_copy_stages = 0;
  OK(rt_codegen_options(&ko, &cg_dialect_cuda, &c0));
  ko.cuda_copy_stages = 2;
  OK(rt_codegen_options(&ko, &cg_dialect_cuda, &c2));
  ko.cuda_copy_stages = 4;
  OK(rt_codegen_options(&ko, &cg_dialect_cuda, &c4));
  CHECK(byd.gemm_copies == 2 && c0.gemm_copies == 0 && c2.gemm_copies == 2 && c4.gemm_copies == 4);
  ko.cuda_vec_reads = 0;  /* the copies take vector reads */
  CgOptions novec;
  OK(rt_codegen_options(&ko, &cg_dialect_cuda, &novec));
  CHECK(novec.gemm_copies == 0);
  /* copies under 2 and 4 stages: a span of 3 k-tiles (split K, 96 points) takes 3 at most, one of
   * 2 (K = 64) 2, one of 1 (K = 32) none */
  struct { const char *what; kiln_graph *g; int copies, copies4, a_kfast, b_kfast; } c[] = {
    { "x @ w, 1024x784x128", dense(1024, 784, 128, false), 2, 4, 1, 0 },
    { "x^T @ w, 784 rows", dense(1024, 784, 128, true), 2, 4, 0, 0 },
    { "x @ w^T (w [n, k])", dense_wt(256, 512, 256), 2, 4, 1, 1 },
    { "x @ w, split K", dense(32, 784, 128, false), 2, 3, 1, 0 },
    { "x @ w, K = 64: two k-tiles", dense(256, 64, 256, false), 2, 2, 1, 0 },
    { "x @ w, K = 32: one k-tile", dense(256, 32, 256, false), 0, 0, -1, -1 },
    { "x @ w, K = 65: no vector reads", dense(300, 65, 128, false), 0, 0, -1, -1 },
    { "siblings", siblings(256, 256, 64, false, 3), 0, 0, -1, -1 },
  };
  for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
    Plans r = plan_of(c[i].g);
    CgGemm gd, g0, g2, g4;
    if (only_gemm_opt(&r, &byd, &gd, c[i].what) && only_gemm_opt(&r, &c0, &g0, c[i].what) && only_gemm_opt(&r, &c2, &g2, c[i].what) &&
        only_gemm_opt(&r, &c4, &g4, c[i].what)) {
      CHECK_MSG(gd.copies == c[i].copies && g0.copies == 0 && g2.copies == c[i].copies && g4.copies == c[i].copies4,
                "%s: copies %d / %d / %d / %d", c[i].what, gd.copies, g0.copies, g2.copies, g4.copies);
      CHECK(g2.bm == 32 && g2.kgroups == 4);
      if (c[i].copies) {
        CHECK_MSG(g2.va.kfast == (c[i].a_kfast == 1) && g2.vb.kfast == (c[i].b_kfast == 1), "%s: A along k %d, B along k %d",
                  c[i].what, g2.va.kfast, g2.vb.kfast);
        CHECK(g2.stages == 1 && cg_gemm_smem(&g2) == 4 * 2 * 2 * 32 * 36 + 16 &&
              cg_gemm_smem(&g4) == 4 * c[i].copies4 * 2 * 32 * 36 + 16);
        StrBuf s0 = { 0 }, s2 = { 0 };
        OK(cg_render_plan(r.p, &cg_dialect_cuda, &c0, NULL, &s0));
        OK(cg_render_plan(r.p, &cg_dialect_cuda, &c2, NULL, &s2));
        CHECK(s0.s && s2.s && !strstr(s0.s, "k_cp16(&Ac[") && strstr(s2.s, "k_cp16(&Ac[") && strstr(s2.s, "k_cp16(&Bc[") &&
              strstr(s2.s, "k_cp_wait<0>();"));
        /* the groups' tiles in the tree of barriers by default (cuda_kg_sum 0); under cuda_kg_sum 1 each in a
         * copy stage, added after one barrier (only with copies) */
        CgOptions one = c2;
        one.gemm_kg_tree = false;
        StrBuf so = { 0 };
        OK(cg_render_plan(r.p, &cg_dialect_cuda, &one, NULL, &so));
        const char *sum1 = "acc[i][j] = (Ra[e] + Ra[2304 + e]) + (Ra[1152 + e] + Ra[3456 + e]); }";
        CHECK_MSG(c2.gemm_kg_tree && so.s && strstr(so.s, sum1) && !strstr(so.s, "if (kg >= 2) {") && s2.s &&
                      !strstr(s2.s, sum1) && strstr(s2.s, "if (kg >= 2) {") && s0.s && !strstr(s0.s, sum1),
                  "%s: the groups' tiles added after one barrier only when asked, with copies", c[i].what);
        sb_free(&s0), sb_free(&s2), sb_free(&so);
        compiles_opt(&r, &c2, c[i].what);
        compiles_opt(&r, &c4, c[i].what);
      }
    }
    plans_free(&r);
    kiln_graph_free(c[i].g);
  }
}

static void test_library_match(void) {
  CgLibGemm c;
  CgOptions o = cg_options_default();
  kiln_graph *gr = dense(4096, 512, 256, false);
  Plans r = plan_of(gr);
  int n = 0;
  for (int i = 0; r.p && i < r.p->n_kernels; i++)
    if (cg_library_match(r.p, &r.p->kernels[i], &o, &c)) {
      n++;
      CHECK(c.M == 4096 && c.N == 256 && c.K == 512 && c.batch == 1);
      CHECK(!c.a_t && c.lda == 512 && !c.b_t && c.ldb == 256 && c.ldd == 256);
      CHECK(c.relu && c.bias_stage >= 0 && c.bias_off == 0 && c.a_off == 0 && c.d_off == 0);
    }
  CHECK_MSG(n == 1, "dense 4096: %d library GEMMs, expected 1", n);
  plans_free(&r);
  kiln_graph_free(gr);

  gr = dense(1024, 512, 256, true);  /* x stored [k, m]: the library reads A transposed */
  r = plan_of(gr);
  n = 0;
  for (int i = 0; r.p && i < r.p->n_kernels; i++)
    if (cg_library_match(r.p, &r.p->kernels[i], &o, &c)) n++, CHECK(c.a_t && c.lda == 1024 && !c.b_t);
  CHECK_MSG(n == 1, "x^T w: %d library GEMMs, expected 1", n);
  plans_free(&r);
  kiln_graph_free(gr);

  gr = dense(128, 784, 512, false);  /* 51 M multiply-adds: under the cost rule */
  r = plan_of(gr);
  for (int i = 0; r.p && i < r.p->n_kernels; i++) CHECK(!cg_library_match(r.p, &r.p->kernels[i], &o, &c));
  plans_free(&r);
  kiln_graph_free(gr);

  {  /* a tanh GELU epilogue maps to the library's GELU_BIAS */
    gr = dense_gelu(512, 512, 256);
    r = plan_of(gr);
    n = 0;
    for (int i = 0; r.p && i < r.p->n_kernels; i++)
      if (cg_library_match(r.p, &r.p->kernels[i], &o, &c)) n++, CHECK(c.gelu && !c.relu && c.bias_stage >= 0);
    CHECK_MSG(n == 1, "gelu(x@w+b): %d library GEMMs, expected 1", n);
    plans_free(&r);
    kiln_graph_free(gr);
  }

  /* 16-bit operands: the library's bf16 / f16 products with f32 sums, their bias and result of
   * the same type (the kernel's roundings of the product and the bias's sum taken off) */
  static const kiln_dtype half[2] = { KILN_BF16, KILN_F16 };
  for (int t = 0; t < 2; t++)
    for (int act = 0; act < 2; act++) {
      gr = dense_act(half[t], 4096, 512, 256, false, false, act ? KILN_GELU_TANH : KILN_RELU);
      r = plan_of(gr);
      n = 0;
      for (int i = 0; r.p && i < r.p->n_kernels; i++)
        if (cg_library_match(r.p, &r.p->kernels[i], &o, &c)) {
          n++;
          CHECK(c.elem == half[t] && c.M == 4096 && c.N == 256 && c.K == 512 && !c.a_t && !c.b_t && c.bias_stage >= 0);
          CHECK(c.relu == !act && c.gelu == !!act);
        }
      CHECK_MSG(n == 1, "%s dense 4096, %s: %d library GEMMs, expected 1", t ? "f16" : "bf16", act ? "gelu" : "relu", n);
      plans_free(&r);
      kiln_graph_free(gr);
    }
  {  /* bf16 copies of f32 values (autocast) are no memory the library could read */
    gr = autocast_dense(4096, 512, 256);
    r = plan_of(gr);
    for (int i = 0; r.p && i < r.p->n_kernels; i++) CHECK(!cg_library_match(r.p, &r.p->kernels[i], &o, &c));
    plans_free(&r);
    kiln_graph_free(gr);
  }

  gr = conv(32, 64, 32, 32, 64);  /* implicit GEMM: the window is no strided matrix */
  r = plan_of(gr);
  for (int i = 0; r.p && i < r.p->n_kernels; i++) CHECK(!cg_library_match(r.p, &r.p->kernels[i], &o, &c));
  plans_free(&r);
  kiln_graph_free(gr);
}

/* ---- with a GPU: values against ref ---- */

static kiln_program *compile_on(kiln_graph *g, const char *be, int fuse, int replay) {
  kiln_options o = kiln_options_default();
  o.backend = be, o.fuse = fuse, o.graph_replay = replay, o.strict = strcmp(be, "ref") != 0;
  kiln_program *p = NULL;
  OK(kiln_program_compile(g, &o, &p));
  return p;
}

/* ||a - b|| / ||b|| over n values; NaN (an unwritten poisoned element) gives NaN. */
static double norm_rel(const float *a, const float *b, int64_t n) {
  double d = 0, s = 0;
  for (int64_t i = 0; i < n; i++) {
    double e = (double)a[i] - b[i];
    d += e * e, s += (double)b[i] * b[i];
  }
  return sqrt(d) / (s > 0 ? sqrt(s) : 1.0);
}

enum { MAXIO = 4 };

static const char *backend = "cuda";  /* the one check_values runs */
static int want_libraries = -1;       /* check_typed: library GEMMs the fused program must have (-1: any) */
static double tolerance = 1e-5;       /* check_values' norm-wise relative error (f32 accumulation) */

/* Runs g on ref and on the backend (fused with graph replay, eager without) on fresh random
 * inputs of the given sizes; compares every output. */
static void check_values(const char *what, kiln_graph *g, int n_in, const int64_t *in_n, int n_out, const int64_t *out_n) {
  float *in[MAXIO], *want[MAXIO], *got[MAXIO];
  for (int i = 0; i < n_in; i++) in[i] = rnd(in_n[i]);
  for (int i = 0; i < n_out; i++) want[i] = malloc((size_t)out_n[i] * 4), got[i] = malloc((size_t)out_n[i] * 4);
  kiln_program *r = compile_on(g, "ref", 1, 1);
  if (r) OK(kiln_program_run(r, (const void *const *)in, (void *const *)want));
  for (int fuse = 1; fuse >= 0; fuse--) {
    for (int i = 0; i < n_out; i++)
      for (int64_t j = 0; j < out_n[i]; j++) got[i][j] = NAN;  /* poison */
    kiln_program *p = compile_on(g, backend, fuse, fuse);
    if (!p) continue;
    OK(kiln_program_run(p, (const void *const *)in, (void *const *)got));
    /* a second run gives the same bits (split-K: the arrival counts are back at 0, and the
     * spans are summed in a fixed order) */
    for (int i = 0; i < n_out; i++) {
      float *again = malloc((size_t)out_n[i] * 4);
      memset(again, 0xff, (size_t)out_n[i] * 4);  /* NaNs: an output the run leaves unwritten shows */
      void *outs[MAXIO] = { 0 };
      outs[i] = again;
      OK(kiln_program_run(p, (const void *const *)in, outs));
      CHECK_MSG(!memcmp(again, got[i], (size_t)out_n[i] * 4), "%s fuse=%d output %d: a second run differs", what, fuse, i);
      free(again);
    }
    kiln_census c;
    OK(kiln_program_census(p, &c));
    CHECK_MSG(c.host_fallbacks == 0, "%s: %lld fallbacks", what, (long long)c.host_fallbacks);
    for (int i = 0; i < n_out; i++) {
      double e = norm_rel(got[i], want[i], out_n[i]);
      CHECK_MSG(e < tolerance, "%s fuse=%d output %d: relative error %g", what, fuse, i, e);
    }
    kiln_program_free(p);
  }
  kiln_program_free(r);
  for (int i = 0; i < n_in; i++) free(in[i]);
  for (int i = 0; i < n_out; i++) free(want[i]), free(got[i]);
}

/* g = call, a builder that makes its graph of dtype dt_ = t; where the backend rounds once
 * (test_rounds_once: excess precision, cuda's default), twin = the same
 * call again at f32 from the same seed, its parameters on t's grid (else twin = NULL). */
#define BUILD_TYPED(g, twin, t, call)                                                                    \
  do {                                                                                                  \
    unsigned long long s0_ = seed;                                                                      \
    kiln_dtype dt_ = (t);                                                                               \
    (g) = (call);                                                                                       \
    (twin) = NULL;                                                                                      \
    if (test_rounds_once(backend)) {                                                                    \
      unsigned long long s1_ = seed;                                                                    \
      seed = s0_, twin_on = true, twin_grid = dt_, dt_ = KILN_F32;                                      \
      (twin) = (call);                                                                                  \
      seed = s1_, twin_on = false;                                                                      \
    }                                                                                                   \
  } while (0)

/* check_values for a graph of 16-bit dtype t: inputs and outputs as t's bits, poisoned with
 * NaN (0xffff), compared as floats. Where every operation rounds (eager; fused without excess
 * precision) the oracle is ref on g: the products are exact in f32 and summed in f32, so the
 * result before its rounding to t is within f32 accumulation error of ref's; after it, an
 * output differs from ref's by at most one unit of t, and only where ref's value lies that
 * close to a rounding boundary: norm-wise well under 1e-3. Under excess precision a fused
 * program is one kernel that rounds only where it stores (and stages P): its oracle is ref on
 * twin (BUILD_TYPED), each output rounded to t, to the same bound; ref on g would differ by a
 * unit of t at each of its roundings (2.8e-3 norm-wise measured for relu(x@w+b)). */
static void check_typed(const char *what, kiln_graph *g, kiln_graph *twin, kiln_dtype t, int n_in, const int64_t *in_n,
                        int n_out, const int64_t *out_n) {
  uint16_t *in[MAXIO], *want[MAXIO], *got[MAXIO];
  float *want_once[MAXIO] = { 0 };
  for (int i = 0; i < n_in; i++) in[i] = rnd_as(t, in_n[i]);
  for (int i = 0; i < n_out; i++) want[i] = malloc((size_t)out_n[i] * 2), got[i] = malloc((size_t)out_n[i] * 2);
  kiln_program *r = compile_on(g, "ref", 1, 1);
  if (r) OK(kiln_program_run(r, (const void *const *)in, (void *const *)want));
  if (twin) {
    float *win[MAXIO];
    for (int i = 0; i < n_in; i++) {
      CHECK((win[i] = malloc((size_t)in_n[i] * 4)) != NULL);
      for (int64_t j = 0; j < in_n[i]; j++) win[i][j] = t == KILN_BF16 ? bf16_to_float(in[i][j]) : half_to_float(in[i][j]);
    }
    for (int i = 0; i < n_out; i++) CHECK((want_once[i] = malloc((size_t)out_n[i] * 4)) != NULL);
    kiln_program *rt = compile_on(twin, "ref", 1, 1);
    OK(kiln_program_run(rt, (const void *const *)win, (void *const *)want_once));
    for (int i = 0; i < n_out; i++)
      for (int64_t j = 0; j < out_n[i]; j++) want_once[i][j] = on_grid(t, want_once[i][j]);
    kiln_program_free(rt);
    for (int i = 0; i < n_in; i++) free(win[i]);
  }
  for (int fuse = 1; fuse >= 0; fuse--) {
    for (int i = 0; i < n_out; i++) memset(got[i], 0xff, (size_t)out_n[i] * 2);
    kiln_program *p = compile_on(g, backend, fuse, fuse);
    if (!p) continue;
    OK(kiln_program_run(p, (const void *const *)in, (void *const *)got));
    uint16_t *again = malloc((size_t)out_n[0] * 2);
    memset(again, 0xff, (size_t)out_n[0] * 2);
    void *outs[MAXIO] = { again };
    OK(kiln_program_run(p, (const void *const *)in, outs));
    CHECK_MSG(!memcmp(again, got[0], (size_t)out_n[0] * 2), "%s fuse=%d: a second run differs", what, fuse);
    free(again);
    if (fuse && want_libraries >= 0)
      CHECK_MSG(test_library_gemms(p) == want_libraries, "%s: %d library GEMMs, expected %d", what, test_library_gemms(p),
                want_libraries);
    kiln_census c;
    OK(kiln_program_census(p, &c));
    CHECK_MSG(c.host_fallbacks == 0, "%s: %lld fallbacks", what, (long long)c.host_fallbacks);
    for (int i = 0; i < n_out; i++) {
      float *a = malloc((size_t)out_n[i] * 4), *b = malloc((size_t)out_n[i] * 4);
      for (int64_t j = 0; j < out_n[i]; j++) {
        a[j] = t == KILN_BF16 ? bf16_to_float(got[i][j]) : half_to_float(got[i][j]);
        b[j] = t == KILN_BF16 ? bf16_to_float(want[i][j]) : half_to_float(want[i][j]);
      }
      bool once = fuse && twin;
      double e = norm_rel(a, once ? want_once[i] : b, out_n[i]);
      CHECK_MSG(e < 1e-3, "%s (%s) fuse=%d output %d: relative error %g against %s", what, t == KILN_BF16 ? "bf16" : "f16",
                fuse, i, e, once ? "the f32 twin" : "ref");
      free(a), free(b);
    }
    kiln_program_free(p);
  }
  kiln_program_free(r);
  for (int i = 0; i < n_in; i++) free(in[i]);
  for (int i = 0; i < n_out; i++) free(want[i]), free(got[i]), free(want_once[i]);
}

/* The tensor-core tiles against ref: bf16 and f16 operands (split-K, ragged edges and a partial
 * k-tile, a transposed A, 64x64 and 128x128 tiles, a batch), then f32 ones under TF32 (inputs
 * rounded to 10 bits of mantissa: 2e-3 norm-wise). */
static void test_mma_values(bool sanitized) {
  setenv("KILN_CUBLASLT", "0", 1);  /* the tiles, on shapes the library would take */
  want_libraries = 0;
  static const struct { int64_t m, k, n; bool xt, batch; } d[] = {
    { 128, 784, 512, false, false }, { 1000, 40, 300, false, false }, { 257, 129, 130, true, false },
    { 1024, 768, 768, false, false }, { 1024, 64, 1024, false, true }, { 256, 64, 128, true, false } };
  for (int t = 0; t < 2; t++)
    for (int i = 0; i < 6; i++) {
      if (sanitized && i > 2) continue;
      kiln_dtype dt = t ? KILN_F16 : KILN_BF16;
      int64_t rows = d[i].m * (d[i].batch ? 2 : 1), ni = rows * d[i].k, no = rows * d[i].n;
      kiln_graph *g, *tw;
      BUILD_TYPED(g, tw, dt, dense_typed(dt_, d[i].m, d[i].k, d[i].n, d[i].xt, d[i].batch));
      check_typed("mma relu(x@w+b)", g, tw, dt, 1, &ni, 1, &no);
      if (d[i].batch) {  /* tiles for four blocks a multiprocessor: 64x64 (one: 128x128) */
        setenv("KILN_TENSOR_CORES", "3", 1);
        check_typed("mma relu(x@w+b), 128x128 tiles", g, tw, dt, 1, &ni, 1, &no);
        unsetenv("KILN_TENSOR_CORES");
      }
      kiln_graph_free(g), kiln_graph_free(tw);
    }
  {  /* an attention chain on tensor cores (cg_chain_mma): 40 queries, so the second tile of 16 rows
      * and the third are ragged; f32 rows between the products */
    int64_t ins[3] = { 2 * 3 * 40 * 64, 2 * 3 * 48 * 64, 2 * 3 * 48 * 32 }, outs[1] = { 2 * 3 * 40 * 32 };
    setenv("KILN_ATTENTION", "1", 1);
    for (int t = 0; t < 4; t++) {  /* 2, 3: each warp's rows in its fragments (KILN_CUDA_CHAIN_MMA=2) */
      setenv("KILN_CUDA_CHAIN_MMA", t < 2 ? "1" : "2", 1);
      kiln_graph *g, *tw;
      BUILD_TYPED(g, tw, t & 1 ? KILN_F16 : KILN_BF16, attention_typed(dt_, 2, 3, 40, 48, 64, 32));
      check_typed(t < 2 ? "mma attention chain" : "mma attention chain, rows in fragments", g, tw, t & 1 ? KILN_F16 : KILN_BF16,
                  3, ins, 1, outs);
      kiln_graph_free(g), kiln_graph_free(tw);
    }
    unsetenv("KILN_CUDA_CHAIN_MMA");
    /* the next tile's queries copied during this one (KILN_CUDA_CHAIN_PREFETCH=1): 96 batch points of 130
     * queries, 9 tiles in 5 blocks of 2, the last block's one tile ragged and with nothing to copy ahead;
     * at a block a multiprocessor (KILN_CUDA_CHAIN_BLOCKS=1), blocks of 5 tiles and of 4, the buffers
     * taking turns */
    setenv("KILN_CUDA_CHAIN_PREFETCH", "1", 1);
    for (int t = 0; t < 4; t++) {
      int64_t pins[3] = { 96 * 130 * 64, 96 * 48 * 64, 96 * 48 * 32 }, pouts[1] = { 96 * 130 * 32 };
      setenv("KILN_CUDA_CHAIN_BLOCKS", t < 2 ? "0" : "1", 1);
      kiln_graph *g, *tw;
      BUILD_TYPED(g, tw, t & 1 ? KILN_F16 : KILN_BF16, attention_typed(dt_, 8, 12, 130, 48, 64, 32));
      check_typed(t < 2 ? "mma attention chain, queries copied ahead" : "mma attention chain, queries copied ahead, 5 tiles a block",
                  g, tw, t & 1 ? KILN_F16 : KILN_BF16, 3, pins, 1, pouts);
      kiln_graph_free(g), kiln_graph_free(tw);
    }
    unsetenv("KILN_CUDA_CHAIN_BLOCKS");
    unsetenv("KILN_CUDA_CHAIN_PREFETCH");
    /* the softmax rows on 16, 8 and 4 lanes each (KILN_CUDA_CHAIN_LANES): the same 96 batch points of 130
     * queries, the last tile's 14 rows past the queries on their own rows of scores */
    static const char *lanes[3] = { "16", "8", "4" };
    for (int t = 0; t < 4; t++) {
      int64_t pins[3] = { 96 * 130 * 64, 96 * 48 * 64, 96 * 48 * 32 }, pouts[1] = { 96 * 130 * 32 };
      setenv("KILN_CUDA_CHAIN_LANES", lanes[t % 3], 1);
      kiln_graph *g, *tw;
      BUILD_TYPED(g, tw, t == 3 ? KILN_F16 : KILN_BF16, attention_typed(dt_, 8, 12, 130, 48, 64, 32));
      check_typed("mma attention chain, rows on lane groups", g, tw, t == 3 ? KILN_F16 : KILN_BF16, 3, pins, 1, pouts);
      kiln_graph_free(g), kiln_graph_free(tw);
    }
    unsetenv("KILN_CUDA_CHAIN_LANES");
    /* the fragments' form with each tile's keys over 2 and 4 warps (KILN_CUDA_CHAIN_MMA=3, 4): 96 batch points
     * of 130 queries over 64 keys, the last block's tiles past the queries on the last tile's rows; once with
     * the NaN fold (its flag then rides in the value's reduction across the warps) */
    for (int t = 0; t < 4; t++) {
      int64_t kins[3] = { 96 * 130 * 64, 96 * 64 * 64, 96 * 64 * 32 }, kouts[1] = { 96 * 130 * 32 };
      setenv("KILN_CUDA_CHAIN_MMA", t & 1 ? "4" : "3", 1);
      if (t == 2) setenv("KILN_NAN_FOLD", "1", 1);
      kiln_graph *g, *tw;
      BUILD_TYPED(g, tw, t == 3 ? KILN_F16 : KILN_BF16, attention_typed(dt_, 8, 12, 130, 64, 64, 32));
      check_typed("mma attention chain, keys over warps", g, tw, t == 3 ? KILN_F16 : KILN_BF16, 3, kins, 1, kouts);
      kiln_graph_free(g), kiln_graph_free(tw);
      unsetenv("KILN_NAN_FOLD");
    }
    unsetenv("KILN_CUDA_CHAIN_MMA");
    /* f32 chains (FMA), 4 rows a thread and spread (KILN_CUDA_CHAIN_SPREAD=1); 40 queries, 48 keys */
    for (int s = 0; s < 2; s++) {
      setenv("KILN_CUDA_CHAIN_SPREAD", s ? "1" : "0", 1);
      kiln_graph *g = attention_typed(KILN_F32, 2, 3, 40, 48, 64, 32);
      check_values(s ? "f32 attention chain, spread" : "f32 attention chain", g, 3, ins, 1, outs);
      kiln_graph_free(g);
    }
    unsetenv("KILN_CUDA_CHAIN_SPREAD");
    unsetenv("KILN_ATTENTION");
  }
  {  /* attention's scores through the heads' transposes, direct with batch vars */
    int64_t ins[2] = { 2 * 3 * 40 * 64, 2 * 3 * 48 * 64 }, outs[1] = { 2 * 3 * 40 * 48 };
    kiln_graph *g, *tw;
    BUILD_TYPED(g, tw, KILN_BF16, scores_typed(dt_, 2, 3, 40, 48, 64));
    check_typed("mma scores", g, tw, KILN_BF16, 2, ins, 1, outs);
    kiln_graph_free(g), kiln_graph_free(tw);
  }
  setenv("KILN_TF32", "1", 1);
  tolerance = 2e-3;
  for (int i = 0; i < (sanitized ? 2 : 4); i++) {
    int64_t ni = d[i].m * d[i].k, no = d[i].m * d[i].n;
    kiln_graph *g = dense(d[i].m, d[i].k, d[i].n, d[i].xt);
    check_values("tf32 relu(x@w+b)", g, 1, &ni, 1, &no);
    kiln_graph_free(g);
  }
  unsetenv("KILN_TF32");
  tolerance = 1e-5;
  unsetenv("KILN_CUBLASLT");
  want_libraries = -1;
}

/* The warpgroup MMA tiles against ref, where the device is compute capability 9.0 (else the option's
 * program does not build, and the legs say so): 768 columns over 768 (64-wide tiles, 12 k-tiles in 6
 * stages), 2304 (192-wide), a K of 784 (a ragged last k-tile, zero-filled), ragged rows and columns, a
 * transposed x (M-major A), a batch, attention's scores (K-major B: the keys read along their depth). */
static void test_wgmma_values(void) {
  setenv("KILN_CUDA_WGMMA", "1", 1);
  want_libraries = 0;
  kiln_graph *probe = dense_typed(KILN_BF16, 128, 64, 64, false, false);
  kiln_options o = kiln_options_default();
  o.backend = "cuda", o.strict = 1;
  kiln_program *pp = NULL;
  kiln_status st = kiln_program_compile(probe, &o, &pp);
  kiln_program_free(pp);
  kiln_graph_free(probe);
  if (st == KILN_ERR_UNSUPPORTED && strstr(kiln_last_error(), "wgmma")) {
    printf("skip: the warpgroup MMA legs: %s\n", kiln_last_error());
  } else {
    static const struct { int64_t m, k, n; bool xt, batch; } d[] = {
      { 1024, 768, 768, false, false }, { 1024, 768, 2304, false, false }, { 128, 784, 512, false, false },
      { 1000, 64, 200, false, false }, { 256, 64, 128, true, false }, { 1024, 64, 1024, false, true } };
    for (int t = 0; t < 2; t++)
      for (int i = 0; i < 6; i++) {
        kiln_dtype dt = t ? KILN_F16 : KILN_BF16;
        int64_t rows = d[i].m * (d[i].batch ? 2 : 1), ni = rows * d[i].k, no = rows * d[i].n;
        kiln_graph *g, *tw;
        BUILD_TYPED(g, tw, dt, dense_typed(dt_, d[i].m, d[i].k, d[i].n, d[i].xt, d[i].batch));
        check_typed("wgmma relu(x@w+b)", g, tw, dt, 1, &ni, 1, &no);
        kiln_graph_free(g), kiln_graph_free(tw);
      }
    int64_t ins[2] = { 2 * 3 * 40 * 64, 2 * 3 * 48 * 64 }, outs[1] = { 2 * 3 * 40 * 48 };
    kiln_graph *g, *tw;
    BUILD_TYPED(g, tw, KILN_BF16, scores_typed(dt_, 2, 3, 40, 48, 64));
    check_typed("wgmma scores", g, tw, KILN_BF16, 2, ins, 1, outs);
    kiln_graph_free(g), kiln_graph_free(tw);
  }
  want_libraries = -1;
  unsetenv("KILN_CUDA_WGMMA");
}

/* The library's 16-bit GEMMs: act(x @ w + b) of bf16 and f16 values, relu and GELU, one library
 * GEMM in the fused program where cuBLASLt loads. The library's epilogue works on the f32 sum and
 * rounds once (README, KILN_CUBLASLT), so its oracle is ref's f32 run of the same values with its
 * result rounded to the 16-bit type once: within f32 accumulation of it, norm-wise far under one
 * unit of the type. ref's run of the 16-bit graph, which rounds the product and the bias's sum
 * too, differs from both by about a unit (2.9e-3 for bf16). */
/* How many cuBLASLt choices (cuda_lt_algos) the cache folder keeps; with drop, each is removed. */
static int cached_choices(const char *dir, bool drop) {
  DIR *d = opendir(dir);
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d));) {
    if (strncmp(e->d_name, "cublaslt-", 9)) continue;
    n++;
    char path[2048];
    if (drop && (size_t)snprintf(path, sizeof path, "%s/%s", dir, e->d_name) < sizeof path) remove(path);
  }
  if (d) closedir(d);
  return n;
}

static void test_library_values16(void) {
  static const kiln_dtype half[2] = { KILN_BF16, KILN_F16 };
  enum { M = 1024, K = 768, N = 768 };
  for (int t = 0; t < 2; t++)
    for (int act = 0; act < 2; act++) {
      kiln_dtype dt = half[t];
      float *v[3] = { rnd((int64_t)M * K), rnd((int64_t)K * N), rnd(N) };  /* x, w, b as values of dt */
      uint16_t *bits[3];
      int64_t nv[3] = { (int64_t)M * K, (int64_t)K * N, N };
      for (int i = 0; i < 3; i++) {
        bits[i] = malloc((size_t)nv[i] * 2);
        for (int64_t j = 0; j < nv[i]; j++) {
          bits[i][j] = dt == KILN_BF16 ? float_to_bf16(v[i][j]) : float_to_half(v[i][j]);
          v[i][j] = dt == KILN_BF16 ? bf16_to_float(bits[i][j]) : half_to_float(bits[i][j]);
        }
      }
      kiln_graph *g[2];
      for (int f = 0; f < 2; f++) {  /* 0: the 16-bit graph, 1: f32 over the same values */
        int64_t xs[2] = { M, K }, ws[2] = { K, N }, n = N;
        kiln_dtype gt = f ? KILN_F32 : dt;
        kiln_tensor x, w, b, y, z, r;
        OK(kiln_graph_create(&g[f]));
        OK(kiln_graph_input(g[f], "x", gt, 2, xs, &x));
        OK(kiln_graph_param(g[f], "w", gt, 2, ws, f ? (void *)v[1] : (void *)bits[1], &w));
        OK(kiln_graph_param(g[f], "b", gt, 1, &n, f ? (void *)v[2] : (void *)bits[2], &b));
        OK(kiln_graph_matmul(g[f], x, w, &y));
        OK(kiln_graph_binary(g[f], KILN_ADD, y, b, &z));
        OK(kiln_graph_unary(g[f], act ? KILN_GELU_TANH : KILN_RELU, z, &r));
        OK(kiln_graph_output(g[f], r, "r"));
      }
      float *want = malloc((size_t)M * N * 4), *got = malloc((size_t)M * N * 4);
      uint16_t *out = malloc((size_t)M * N * 2);
      /* then with the fastest of 8 of the library's algorithms, each timed at load (cuda_lt_algos) */
      for (int tuned = 0; tuned < 2; tuned++) {
        setenv("KILN_CUDA_LT_ALGOS", tuned ? "8" : "0", 1);
        /* no choice kept from an earlier run: the first load below must time and keep its own */
        kiln_options ko = kiln_options_default();
        if (tuned) cached_choices(ko.cache_dir, true);
        kiln_program *r = compile_on(g[1], "ref", 1, 1), *p = compile_on(g[0], backend, 1, 1);
        if (r && p) {
          OK(kiln_program_run(r, (const void *const *)&v[0], (void *const *)&want));
          memset(out, 0xff, (size_t)M * N * 2);
          OK(kiln_program_run(p, (const void *const *)&bits[0], (void *const *)&out));
          for (int64_t j = 0; j < (int64_t)M * N; j++) {
            uint16_t once = dt == KILN_BF16 ? float_to_bf16(want[j]) : float_to_half(want[j]);
            want[j] = dt == KILN_BF16 ? bf16_to_float(once) : half_to_float(once);
            got[j] = dt == KILN_BF16 ? bf16_to_float(out[j]) : half_to_float(out[j]);
          }
          double e = norm_rel(got, want, (int64_t)M * N);
          const char *what = act ? "library gelu(x@w+b)" : "library relu(x@w+b)";
          CHECK_MSG(e < 2e-4, "%s (%s, %s): relative error %g against one rounding of ref's f32 run", what, t ? "f16" : "bf16",
                    tuned ? "8 algorithms timed" : "the heuristic's first", e);
          if (cuda_lt_load() == KILN_OK)
            CHECK_MSG(test_library_gemms(p) == 1, "%s: %d library GEMMs, expected 1", what, test_library_gemms(p));
          /* the choice is kept in the cache folder, and a second load takes it: the same algorithm, the same bits */
          if (tuned && cuda_lt_load() == KILN_OK && !ko.no_cache)
            CHECK_MSG(cached_choices(ko.cache_dir, false) > 0, "%s: no cuBLASLt choice kept in %s", what, ko.cache_dir);
          kiln_program *again = tuned ? compile_on(g[0], backend, 1, 1) : NULL;
          uint16_t *out2 = again ? malloc((size_t)M * N * 2) : NULL;
          if (again && out2) {
            memset(out2, 0xff, (size_t)M * N * 2);
            OK(kiln_program_run(again, (const void *const *)&bits[0], (void *const *)&out2));
            CHECK_MSG(!memcmp(out, out2, (size_t)M * N * 2), "%s (%s): two loads of the timed GEMM differ", what,
                      t ? "f16" : "bf16");
          }
          free(out2);
          kiln_program_free(again);
        }
        kiln_program_free(r), kiln_program_free(p);
      }
      unsetenv("KILN_CUDA_LT_ALGOS");
      free(want), free(got), free(out);
      for (int i = 0; i < 3; i++) free(v[i]), free(bits[i]);
      kiln_graph_free(g[0]), kiln_graph_free(g[1]);
    }
}

static void test_values(void) {
  int64_t dims[][4] = { { 128, 784, 512, 0 }, { 33, 65, 17, 0 }, { 64, 4096, 96, 0 }, { 1000, 40, 300, 0 },
                        { 300, 64, 96, 1 }, { 257, 129, 130, 1 }, { 1024, 256, 256, 0 }, { 512, 512, 256, 1 },
                        { 100, 2000, 300, 0 }, { 100, 2000, 300, 1 }, { 32, 784, 128, 0 } };  /* the last 3 split K */
  /* under the sanitizers (KILN_SANITIZED=1, CI's time) four shapes: the host's paths are the
   * same for each, the sanitizers watch those; every shape runs in the plain build */
  bool sanitized = kiln_env_int("KILN_SANITIZED", 0) != 0;
  for (int i = 0; i < 11; i++) {
    if (sanitized && i != 0 && i != 1 && i != 5 && i != 10) continue;
    int64_t m = dims[i][0], k = dims[i][1], n = dims[i][2], ni = m * k, no = m * n;
    kiln_graph *g = dense(m, k, n, dims[i][3] != 0);
    check_values(dims[i][3] ? "relu(x^T@w+b)" : "relu(x@w+b)", g, 1, &ni, 1, &no);
    kiln_graph_free(g);
  }
  if (!strcmp(backend, "cuda")) {  /* split-K by flags: against ref, and the same bits as by the arrival count */
    for (int i = 0; i <= 4; i += 2) {  /* 4: 32x784x128 in spans of one k-tile (KILN_CUDA_MIN_SPAN=1, both forms) */
      int64_t m = i < 3 ? dims[i][0] : 32, k = i < 3 ? dims[i][1] : 784, n = i < 3 ? dims[i][2] : 128, ni = m * k, no = m * n;
      if (i == 4) setenv("KILN_CUDA_MIN_SPAN", "1", 1);
      kiln_graph *g = dense(m, k, n, false);
      setenv("KILN_CUDA_SPLIT_FLAGS", "1", 1);
      check_values("relu(x@w+b), split-K by flags", g, 1, &ni, 1, &no);
      float *x = rnd(ni), *by[2] = { malloc((size_t)no * 4), malloc((size_t)no * 4) };
      for (int f = 0; f < 2; f++) {
        setenv("KILN_CUDA_SPLIT_FLAGS", f ? "1" : "0", 1);
        memset(by[f], 0xff, (size_t)no * 4);
        kiln_program *p = compile_on(g, backend, 1, 1);
        if (p) OK(kiln_program_run(p, (const void *const *)&x, (void *const *)&by[f]));
        kiln_program_free(p);
      }
      CHECK_MSG(!memcmp(by[0], by[1], (size_t)no * 4), "%lldx%lldx%lld: split-K by flags and by count differ", (long long)m,
                (long long)k, (long long)n);
      free(x), free(by[0]), free(by[1]);
      kiln_graph_free(g);
    }
    unsetenv("KILN_CUDA_MIN_SPAN");
    unsetenv("KILN_CUDA_SPLIT_FLAGS");
  }
  if (!strcmp(backend, "cuda")) {  /* thin products over long reductions in one tile split along K (cuda_thin_spans) */
    const int64_t thin[][3] = { { 10, 4096, 10 }, { 9, 25088, 16 }, { 20, 3000, 30 } };
    for (int i = 0; i < 3; i++)
      for (int t = 0; t < 3; t++) {  /* the default (128 spans), 64 spans, off (block rows) */
        if (sanitized && t) continue;
        int64_t m = thin[i][0], k = thin[i][1], n = thin[i][2], ni = m * k, no = m * n;
        kiln_graph *g = dense(m, k, n, i == 1);
        if (t) setenv("KILN_CUDA_THIN_SPANS", t == 1 ? "64" : "0", 1);
        else unsetenv("KILN_CUDA_THIN_SPANS");  /* the shape before left it at 0 */
        check_values(t == 0 ? "relu(x@w+b), thin, 128 spans" : t == 1 ? "relu(x@w+b), thin, 64 spans" : "relu(x@w+b), thin, block rows",
                     g, 1, &ni, 1, &no);
        kiln_graph_free(g);
      }
    unsetenv("KILN_CUDA_THIN_SPANS");
  }
  if (!strcmp(backend, "cuda")) {  /* banded pairs (test_band_shapes), and their warp-a-row form */
    setenv("KILN_GEMM_ROWS", "2", 1);
    for (int i = 0; i < 3; i++)
      for (int bands = 3; bands >= 0; bands--) {
        if (sanitized && !bands) continue;
        int64_t m = band_dims[i][0], k = band_dims[i][1], n = band_dims[i][2], ins[2] = { m * k, m * n }, no = m * n;
        kiln_graph *g = dense_norm(m, k, n);
        setenv("KILN_CUDA_PAIR_BANDS", bands == 3 ? "3" : bands == 2 ? "2" : bands ? "1" : "0", 1);
        check_values(bands == 3 ? "layernorm(x@w+b+x0), shared bands, an ordinary launch"
                     : bands == 2 ? "layernorm(x@w+b+x0), shared bands" : bands ? "layernorm(x@w+b+x0), banded"
                                : "layernorm(x@w+b+x0), a warp a row", g, 2, ins, 1, &no);
        kiln_graph_free(g);
      }
    unsetenv("KILN_CUDA_PAIR_BANDS");
    unsetenv("KILN_GEMM_ROWS");
  }
  if (!strcmp(backend, "cuda")) {  /* rows at the head of their GEMM's tiles (test_head_shapes), and two kernels */
    for (int i = 0; i < 3; i++)
      for (int heads = 3; heads >= 0; heads -= heads == 3 ? 2 : 1) {  /* 3 (clusters), 1, 0 */
        if (sanitized && !heads) continue;
        int64_t m = head_dims[i][0], k = head_dims[i][1], n = head_dims[i][2], ins[2] = { m * k, m * k }, outs[2] = { m * n, m * k };
        kiln_graph *g = norm_dense(m, k, n, i == 0);
        setenv("KILN_GEMM_HEADS", heads == 3 ? "3" : heads ? "1" : "0", 1);
        check_values(heads == 3 ? "layernorm(x+x0)@w+b, headed in clusters" : heads ? "layernorm(x+x0)@w+b, headed"
                                : "layernorm(x+x0)@w+b, two kernels", g, 2, ins, i == 0 ? 2 : 1, outs);
        kiln_graph_free(g);
      }
    unsetenv("KILN_GEMM_HEADS");
  }
  if (!strcmp(backend, "cuda")) {  /* narrow contractions a warp a row (test_narrow_shapes) */
    setenv("KILN_CUDA_NARROW_DEPTH", "256", 1);
    for (int i = 0; i < 3; i++) {
      if (sanitized && i == 2) continue;
      int64_t m = narrow_dims[i][0], k = narrow_dims[i][1], n = narrow_dims[i][2], ni = m * k, no = m * n;
      kiln_graph *g = dense(m, k, n, false);
      check_values("relu(x@w+b), narrow", g, 1, &ni, 1, &no);
      kiln_graph_free(g);
    }
    unsetenv("KILN_CUDA_NARROW_DEPTH");
  }
  /* split-K under its candidates (cuda's): a long K split towards 512 blocks (KILN_CUDA_LONG_K_BLOCKS), and a
   * GEMM of few tiles split towards 1024 (KILN_CUDA_SPLIT_TARGET: 128x784x512 in 9 spans) */
  static const struct { const char *env, *value, *what; int64_t m, k, n; } splits[] = {
    { "KILN_CUDA_LONG_K_BLOCKS", "512", "relu(x@w+b), long K split", 1024, 784, 128 },
    { "KILN_CUDA_SPLIT_TARGET", "1024", "relu(x@w+b), split towards 1024 blocks", 128, 784, 512 },
  };
  for (size_t i = 0; !strcmp(backend, "cuda") && i < sizeof splits / sizeof splits[0]; i++) {
    int64_t ni = splits[i].m * splits[i].k, no = splits[i].m * splits[i].n;
    kiln_graph *g = dense(splits[i].m, splits[i].k, splits[i].n, false);
    setenv(splits[i].env, splits[i].value, 1);
    check_values(splits[i].what, g, 1, &ni, 1, &no);
    unsetenv(splits[i].env);
    kiln_graph_free(g);
  }
  if (!strcmp(backend, "cuda")) {  /* split-K arrivals fenced by every thread (cuda_one_fence 0, the old way) */
    setenv("KILN_CUDA_ONE_FENCE", "0", 1);
    for (int i = 8; i < 11; i++) {  /* the split-K shapes */
      int64_t m = dims[i][0], k = dims[i][1], n = dims[i][2], ni = m * k, no = m * n;
      kiln_graph *g = dense(m, k, n, dims[i][3] != 0);
      check_values("relu(x@w+b), split K, every thread fences", g, 1, &ni, 1, &no);
      kiln_graph_free(g);
    }
    setenv("KILN_CUDA_ONE_FENCE", "2", 1);  /* one acquire-release count */
    for (int i = 8; i < 11; i++) {
      int64_t m = dims[i][0], k = dims[i][1], n = dims[i][2], ni = m * k, no = m * n;
      kiln_graph *g = dense(m, k, n, dims[i][3] != 0);
      check_values("relu(x@w+b), split K, an acquire-release count", g, 1, &ni, 1, &no);
      kiln_graph_free(g);
    }
    unsetenv("KILN_CUDA_ONE_FENCE");
  }
  if (!strcmp(backend, "cuda")) {  /* copies: against ref, and the same bits as the register tiles */
    for (int stages = 2; stages <= 4; stages += 2) {
      char sv[2] = { (char)('0' + stages), 0 };
      for (int i = 0; i < 12; i++) {
        if (sanitized && i != 0 && i != 5 && i != 10 && i != 11) continue;
        bool wt = i == 11;  /* w stored [n, k] */
        int64_t m = wt ? 256 : dims[i][0], k = wt ? 512 : dims[i][1], n = wt ? 256 : dims[i][2], ni = m * k, no = m * n;
        kiln_graph *g = wt ? dense_wt(m, k, n) : dense(m, k, n, dims[i][3] != 0);
        float *in = rnd(ni), *out[2] = { malloc((size_t)no * 4), malloc((size_t)no * 4) };
        for (int on = 0; on < 2; on++) {
          setenv("KILN_CUDA_COPY_STAGES", on ? sv : "0", 1);
          kiln_program *p = compile_on(g, "cuda", 1, 1);
          if (p) OK(kiln_program_run(p, (const void *const *)&in, (void *const *)&out[on]));
          kiln_program_free(p);
          unsetenv("KILN_CUDA_COPY_STAGES");
        }
        CHECK_MSG(!memcmp(out[0], out[1], (size_t)no * 4), "copies %d, %lldx%lldx%lld: not the register tiles' bits", stages,
                  (long long)m, (long long)k, (long long)n);
        if (stages == 4) {  /* 2 is the default: the shapes above */
          setenv("KILN_CUDA_COPY_STAGES", sv, 1);
          check_values("relu(x@w+b), operands copied to shared, 4 stages", g, 1, &ni, 1, &no);
          unsetenv("KILN_CUDA_COPY_STAGES");
        }
        free(in), free(out[0]), free(out[1]);
        kiln_graph_free(g);
      }
    }
  }
  if (!strcmp(backend, "cuda")) {  /* the scalar tile reads that vector reads replace (cuda_vec_reads 0) */
    setenv("KILN_CUDA_VEC_READS", "0", 1);
    for (int i = 0; i < 11; i += 4) {
      int64_t m = dims[i][0], k = dims[i][1], n = dims[i][2], ni = m * k, no = m * n;
      kiln_graph *g = dense(m, k, n, dims[i][3] != 0);
      check_values("relu(x@w+b), scalar tile reads", g, 1, &ni, 1, &no);
      kiln_graph_free(g);
    }
    unsetenv("KILN_CUDA_VEC_READS");
  }
  if (!strcmp(backend, "cuda")) {  /* runs across vars (cuda_vec_reads 2): a convolution's weights */
    int64_t ins[1] = { 2 * 4 * 17 * 19 }, outs[1] = { 2 * 8 * 17 * 19 };
    kiln_graph *g = conv(2, 4, 17, 19, 8);
    setenv("KILN_CUDA_VEC_READS", "2", 1);
    check_values("conv, vector reads across vars", g, 1, ins, 1, outs);
    unsetenv("KILN_CUDA_VEC_READS");
    kiln_graph_free(g);
  }
  for (int i = 0; i < 2; i++) {  /* the library's GELU_BIAS, then the tile kernel's gelu */
    int64_t m = i ? 200 : 512, ni = m * 512, no = m * 256;
    kiln_graph *g = dense_gelu(m, 512, 256);
    check_values("gelu(x@w+b)", g, 1, &ni, 1, &no);
    kiln_graph_free(g);
  }
  {
    int64_t ins[2] = { 2 * 3 * 37 * 16, 2 * 3 * 45 * 16 }, outs[1] = { 2 * 3 * 37 * 45 };
    kiln_graph *g = scores(2, 3, 37, 45, 16);
    check_values("scores", g, 2, ins, 1, outs);
    kiln_graph_free(g);
  }
  {
    int64_t ins[1] = { 2 * 3 * 17 * 19 }, outs[1] = { 2 * 8 * 17 * 19 };
    kiln_graph *g = conv(2, 3, 17, 19, 8);
    check_values("conv", g, 1, ins, 1, outs);
    kiln_graph_free(g);
  }
  /* siblings: split-K with k-grouped 32x32 tiles, ragged 64x64 tiles, a transposed A */
  static const struct { int64_t m, k, n; bool xt; int nb; } sb[] = {
    { 128, 784, 512, false, 3 }, { 1000, 100, 520, false, 3 }, { 300, 64, 96, true, 2 }, { 33, 65, 17, false, 4 } };
  for (int i = 0; i < (sanitized ? 2 : 4); i++) {
    int64_t ni = sb[i].m * sb[i].k, no[4];
    for (int j = 0; j < sb[i].nb; j++) no[j] = sb[i].m * sb[i].n;
    kiln_graph *g = siblings(sb[i].m, sb[i].k, sb[i].n, sb[i].xt, sb[i].nb);
    check_values("siblings", g, 1, &ni, sb[i].nb, no);
    kiln_graph_free(g);
  }
  {
    int64_t ins[1] = { 64 * 300 }, outs[2] = { 300 * 128, 128 * 40 };
    kiln_graph *g = train(64, 300, 128, 40);
    check_values("train step", g, 1, ins, 2, outs);
    kiln_graph_free(g);
  }
}

/* Each section's seconds, printed as it ends: this test runs for minutes on a GPU (NVRTC compiles every
 * variant), and a run cut off by ctest's limit shows how far it got and where the time went. */
static double seconds_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

#define TIMED(call)                                                     \
  do {                                                                  \
    double t0_ = seconds_now();                                         \
    call;                                                               \
    printf("%-30s %7.1f s\n", #call, seconds_now() - t0_);              \
    fflush(stdout);                                                     \
  } while (0)

/* No argument: the shapes and test_values. "wgmma" or "mma": only the tensor-core value sections
 * (warpgroup MMA; warp MMA and the library's 16-bit GEMMs), each a ctest entry of its own
 * (CMakeLists.txt): on the H100 the three took 126, 80 and more seconds, and all in one process
 * ran past ctest's 240 s. */
int main(int argc, char **argv) {
  const char *part = argc > 1 ? argv[1] : "";
  bool wgmma = !strcmp(part, "wgmma"), mma = !strcmp(part, "mma");
  if (!wgmma && !mma && part[0]) {
    fprintf(stderr, "usage: test_gpu_gemm [wgmma|mma]\n");
    return 2;
  }
  if (!wgmma && !mma) {
    TIMED(test_shapes());
    TIMED(test_band_shapes());
    TIMED(test_head_shapes());
    TIMED(test_narrow_shapes());
    TIMED(test_copies_shapes());
    TIMED(test_mma_shapes());
    TIMED(test_wgmma_shapes());
    TIMED(test_chain_mma_shapes());
    TIMED(test_chain_prefetch_shapes());
    TIMED(test_chain_lanes_shapes());
    TIMED(test_chain_key_warps_shapes());
    TIMED(test_chain_ragged_reads());
    TIMED(test_library_match());
  }
  const char *want = getenv("KILN_TEST_BACKEND");
  if (want && !strcmp(want, "vulkan")) {
    if (wgmma || mma) TEST_MAIN_END();  /* the tensor-core sections are cuda's */
    backend = "vulkan";
    if (rt_backend_vulkan.probe() != KILN_OK) {
      CHECK_MSG(!getenv("KILN_TEST_REQUIRE_BACKEND"), "no vulkan device: %s", kiln_last_error());
      TEST_MAIN_END();
    }
    TIMED(test_values());
    TEST_MAIN_END();
  }
  if (rt_backend_cuda.probe() != KILN_OK) {
    printf("skip: no CUDA driver (%s)\n", kiln_last_error());
    TEST_MAIN_END();
  }
  if (wgmma) TIMED(test_wgmma_values());
  if (mma) {
    TIMED(test_mma_values(kiln_env_int("KILN_SANITIZED", 0) != 0));
    TIMED(test_library_values16());
  }
  if (!wgmma && !mma) TIMED(test_values());
  TEST_MAIN_END();
}
