/*
 * Compositions through the public API: softmax, log-softmax (every axis, negative axes,
 * large inputs that overflow a naive exp), layernorm (every start axis, scale/bias present
 * or absent, broadcast scale) and inference batchnorm (rank 2, 3, 4), each against the
 * textbook formula evaluated here in double. The builder expands these into primitive
 * ops, so on half dtypes the intermediates are rounded: those cases allow two ulps.
 */
#include "ops_util.h"

#define MAXN 1024

static void rnd(kiln_dtype t, double *v, int64_t n, unsigned long long seed, double scale, double shift) {
  for (int64_t i = 0; i < n; i++) v[i] = ou_as(t, test_rand(&seed) * scale + shift);
}

/* tolerance for composed results: f32 allows for f32 intermediates; halves a few ulps */
static void expect_comp(Case *c, kiln_dtype t, int rank, const int64_t *shape, double *w) {
  int64_t n = ou_numel(rank, shape);
  for (int64_t i = 0; i < n; i++) w[i] = ou_round_to(t, w[i]);
  double atol = t == KILN_F64 ? 1e-12 : t == KILN_F32 ? 2e-6 : t == KILN_F16 ? 2e-3 : 1.6e-2;
  double rtol = t == KILN_F64 ? 1e-11 : t == KILN_F32 ? 1e-5 : t == KILN_F16 ? 2e-3 : 1.6e-2;
  cs_expect_tol(c, 0, t, rank, shape, w, atol, rtol);
}

/* Visits every 1-D line along axis a: calls f with the flat offsets of its elements. */
static void for_lines(int r, const int64_t *s, int a, void (*f)(const int64_t *off, int64_t n, void *ctx), void *ctx) {
  int64_t outer = 1, inner = 1, n = s[a];
  for (int d = 0; d < a; d++) outer *= s[d];
  for (int d = a + 1; d < r; d++) inner *= s[d];
  int64_t off[MAXN];
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) {
      for (int64_t j = 0; j < n; j++) off[j] = (o * n + j) * inner + i;
      f(off, n, ctx);
    }
}

typedef struct SmCtx { const double *x; double *w; int log; } SmCtx;

static void softmax_line(const int64_t *off, int64_t n, void *vctx) {
  SmCtx *c = vctx;
  double mx = -INFINITY, s = 0;
  for (int64_t j = 0; j < n; j++) mx = c->x[off[j]] > mx ? c->x[off[j]] : mx;
  for (int64_t j = 0; j < n; j++) s += exp(c->x[off[j]] - mx);
  for (int64_t j = 0; j < n; j++)
    c->w[off[j]] = c->log ? c->x[off[j]] - mx - log(s) : exp(c->x[off[j]] - mx) / s;
}

static void softmax_case(int lg, kiln_dtype t, int r, const int64_t *s, int axis, double scale, double shift) {
  Case c;
  cs_begin(&c, "%s %s rank %d axis %d (inputs around %g)", lg ? "log_softmax" : "softmax", ou_dt(t), r, axis, shift);
  double x[MAXN], w[MAXN];
  int64_t n = ou_numel(r, s);
  rnd(t, x, n, 77 + (unsigned)axis, scale, shift);
  SmCtx ctx = {x, w, lg};
  for_lines(r, s, axis < 0 ? axis + r : axis, softmax_line, &ctx);
  kiln_tensor xt = cs_in(&c, t, r, s, x), y = -1;
  if (lg) COK(&c, kiln_graph_log_softmax(c.g, xt, axis, &y));
  else COK(&c, kiln_graph_softmax(c.g, xt, axis, &y));
  if (cs_run1(&c, y)) {
    expect_comp(&c, t, r, s, w);
    if (!lg && !c.failed) {
      /* identity: every line sums to 1 */
      double tot = 0;
      for (int64_t i = 0; i < n; i++) tot += cs_get(&c, 0, i);
      double lines = (double)n / (double)s[axis < 0 ? axis + r : axis];
      double tol = t == KILN_F32 || t == KILN_F64 ? 1e-5 : 2e-2;
      if (fabs(tot - lines) > tol * lines) cs_fail(&c, "lines sum to %g in all, expected %g", tot, lines);
    }
  }
  cs_end(&c);
}

static void softmax_cases(void) {
  int64_t s3[3] = {2, 3, 5}, s1[1] = {7}, s4[4] = {2, 1, 3, 4};
  for (int lg = 0; lg < 2; lg++) {
    for (int a = -3; a < 3; a++) softmax_case(lg, KILN_F32, 3, s3, a, 3, 0);
    softmax_case(lg, KILN_F64, 4, s4, 1, 3, 0);   /* a size-1 axis: softmax 1, log 0 */
    softmax_case(lg, KILN_F64, 4, s4, -1, 3, 0);
    softmax_case(lg, KILN_F32, 1, s1, 0, 5, 1000); /* exp(1000) overflows: needs the max shift */
    softmax_case(lg, KILN_F32, 1, s1, 0, 5, -1000);
    softmax_case(lg, KILN_F16, 3, s3, 2, 2, 0);
    softmax_case(lg, KILN_BF16, 3, s3, 0, 2, 0);
  }
  {
    Case c;
    cs_begin(&c, "softmax errors");
    int64_t s2[2] = {2, 3};
    kiln_tensor x = cs_in(&c, KILN_F32, 2, s2, NULL), xi = cs_in(&c, KILN_I32, 2, s2, NULL), y = -1;
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_softmax(c.g, x, 2, &y));
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_softmax(c.g, x, -3, &y));
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_log_softmax(c.g, x, 5, &y));
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_softmax(c.g, xi, 1, &y)); /* ints */
    cs_end(&c);
  }
}

/* layernorm over axes a..r-1: (x - mean) / sqrt(var + eps) * scale + bias, var biased. */
static void layernorm_case(kiln_dtype t, int r, const int64_t *s, int axis, int has_scale, int has_bias, int scale_rank,
                           double eps) {
  Case c;
  cs_begin(&c, "layernorm %s rank %d axis %d scale %d (rank %d) bias %d eps %g", ou_dt(t), r, axis, has_scale, scale_rank,
           has_bias, eps);
  int a = axis < 0 ? axis + r : axis;
  int64_t n = ou_numel(r, s), inner = ou_numel(r - a, s + a), outer = n / inner;
  /* scale/bias of rank scale_rank: the trailing dims of x[a:] */
  const int64_t *ss = s + r - scale_rank;
  int64_t ns = ou_numel(scale_rank, ss);
  double x[MAXN], w[MAXN], sc[MAXN], bi[MAXN];
  rnd(t, x, n, 3, 2, 0.5);
  rnd(t, sc, ns, 4, 1, 1);
  rnd(t, bi, ns, 5, 1, 0);
  for (int64_t o = 0; o < outer; o++) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < inner; i++) mean += x[o * inner + i];
    mean /= (double)inner;
    for (int64_t i = 0; i < inner; i++) var += (x[o * inner + i] - mean) * (x[o * inner + i] - mean);
    var /= (double)inner;
    for (int64_t i = 0; i < inner; i++) {
      int64_t si = i % ns; /* trailing dims: row-major, so the scale index is i mod its size */
      double v = (x[o * inner + i] - mean) / sqrt(var + eps);
      if (has_scale) v *= sc[si];
      if (has_bias) v += bi[si];
      w[o * inner + i] = v;
    }
  }
  kiln_tensor xt = cs_in(&c, t, r, s, x), st = -1, bt = -1, y = -1;
  if (has_scale) st = cs_in(&c, t, scale_rank, ss, sc);
  if (has_bias) bt = cs_in(&c, t, scale_rank, ss, bi);
  COK(&c, kiln_graph_layernorm(c.g, xt, st, bt, axis, eps, &y));
  if (cs_run1(&c, y)) expect_comp(&c, t, r, s, w);
  cs_end(&c);
}

static void layernorm_cases(void) {
  int64_t s3[3] = {2, 3, 8}, s2[2] = {4, 6};
  layernorm_case(KILN_F32, 3, s3, 2, 1, 1, 1, 1e-5);
  layernorm_case(KILN_F32, 3, s3, -1, 1, 0, 1, 1e-5);
  layernorm_case(KILN_F32, 3, s3, 1, 1, 1, 2, 1e-5);  /* two normalised axes, full-rank scale */
  layernorm_case(KILN_F32, 3, s3, 1, 1, 1, 1, 1e-3);  /* scale broadcast over the middle axis */
  layernorm_case(KILN_F32, 3, s3, 0, 0, 0, 1, 1e-5);  /* everything, no affine */
  layernorm_case(KILN_F32, 3, s3, -2, 0, 1, 2, 0.5);  /* large eps matters */
  layernorm_case(KILN_F64, 2, s2, 1, 1, 1, 1, 1e-12);
  layernorm_case(KILN_F16, 3, s3, 2, 1, 1, 1, 1e-5);
  layernorm_case(KILN_BF16, 2, s2, -1, 1, 1, 1, 1e-5);
  {
    /* a constant row: variance 0, output = bias (no NaN) */
    Case c;
    cs_begin(&c, "layernorm of a constant row gives bias");
    int64_t s[2] = {1, 4}, sb[1] = {4};
    double x[4] = {3, 3, 3, 3}, sc[4] = {2, 2, 2, 2}, b[4] = {0.5, -1, 0, 7};
    kiln_tensor xt = cs_in(&c, KILN_F32, 2, s, x), st = cs_in(&c, KILN_F32, 1, sb, sc), bt = cs_in(&c, KILN_F32, 1, sb, b), y = -1;
    COK(&c, kiln_graph_layernorm(c.g, xt, st, bt, 1, 1e-5, &y));
    if (cs_run1(&c, y)) cs_expect_tol(&c, 0, KILN_F32, 2, s, b, 1e-6, 1e-6);
    cs_end(&c);
  }
  {
    Case c;
    cs_begin(&c, "layernorm errors");
    int64_t s[2] = {4, 6}, bad[1] = {5}, ok[1] = {6};
    kiln_tensor x = cs_in(&c, KILN_F32, 2, s, NULL), sb = cs_in(&c, KILN_F32, 1, bad, NULL);
    kiln_tensor so = cs_in(&c, KILN_F64, 1, ok, NULL), xi = cs_in(&c, KILN_I64, 2, s, NULL), y = -1;
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_layernorm(c.g, x, sb, -1, 1, 1e-5, &y)); /* [5] vs [6] */
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_layernorm(c.g, x, so, -1, 1, 1e-5, &y)); /* f64 scale */
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_layernorm(c.g, x, -1, -1, 2, 1e-5, &y)); /* axis */
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_layernorm(c.g, x, -1, -1, -3, 1e-5, &y));
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_layernorm(c.g, xi, -1, -1, 1, 1e-5, &y)); /* ints */
    cs_end(&c);
  }
}

/* batchnorm: (x - mean[c]) / sqrt(var[c] + eps) * scale[c] + bias[c], c = axis 1. */
static void batchnorm_case(kiln_dtype t, int r, const int64_t *s, double eps) {
  Case c;
  cs_begin(&c, "batchnorm %s rank %d eps %g", ou_dt(t), r, eps);
  int64_t n = ou_numel(r, s), C = s[1], inner = n / (s[0] * C), cs1[1] = {C};
  double x[MAXN], w[MAXN], sc[64], bi[64], mu[64], var[64];
  rnd(t, x, n, 8, 2, 0);
  rnd(t, sc, C, 9, 1, 1);
  rnd(t, bi, C, 10, 1, 0);
  rnd(t, mu, C, 11, 1, 0);
  rnd(t, var, C, 12, 0.5, 1); /* positive */
  for (int64_t i = 0; i < n; i++) {
    int64_t ch = (i / inner) % C;
    w[i] = (x[i] - mu[ch]) / sqrt(var[ch] + eps) * sc[ch] + bi[ch];
  }
  kiln_tensor xt = cs_in(&c, t, r, s, x), st = cs_in(&c, t, 1, cs1, sc), bt = cs_in(&c, t, 1, cs1, bi);
  kiln_tensor mt = cs_in(&c, t, 1, cs1, mu), vt = cs_in(&c, t, 1, cs1, var), y = -1;
  COK(&c, kiln_graph_batchnorm(c.g, xt, st, bt, mt, vt, eps, &y));
  if (cs_run1(&c, y)) expect_comp(&c, t, r, s, w);
  cs_end(&c);
}

static void batchnorm_cases(void) {
  int64_t s2[2] = {4, 3}, s3[3] = {2, 3, 5}, s4[4] = {2, 4, 3, 3};
  batchnorm_case(KILN_F32, 2, s2, 1e-5);
  batchnorm_case(KILN_F32, 3, s3, 1e-5);
  batchnorm_case(KILN_F32, 4, s4, 0.1);
  batchnorm_case(KILN_F64, 4, s4, 1e-9);
  batchnorm_case(KILN_F16, 4, s4, 1e-3);
  {
    Case c;
    cs_begin(&c, "batchnorm errors");
    int64_t s[4] = {1, 3, 2, 2}, c3[1] = {3}, c4[1] = {4}, s1[1] = {3};
    kiln_tensor x = cs_in(&c, KILN_F32, 4, s, NULL), p3 = cs_in(&c, KILN_F32, 1, c3, NULL);
    kiln_tensor p4 = cs_in(&c, KILN_F32, 1, c4, NULL), pd = cs_in(&c, KILN_F64, 1, c3, NULL);
    kiln_tensor r1 = cs_in(&c, KILN_F32, 1, s1, NULL), y = -1;
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_batchnorm(c.g, x, p4, p3, p3, p3, 1e-5, &y)); /* scale [4] */
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_batchnorm(c.g, x, p3, p3, p3, p4, 1e-5, &y)); /* var [4] */
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_batchnorm(c.g, x, p3, pd, p3, p3, 1e-5, &y)); /* f64 bias */
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_batchnorm(c.g, r1, p3, p3, p3, p3, 1e-5, &y)); /* rank 1: no channel axis */
    cs_end(&c);
  }
}

int main(void) {
  if (!ou_backend_available()) return 0;
  softmax_cases();
  layernorm_cases();
  batchnorm_cases();
  OU_MAIN_END("compose");
}
