/*
 * Contractions through the public API, each against a naive loop written here:
 * matmul (2-D, batched, broadcast batch dims, 1-D operands, float and int dtypes) vs a
 * triple loop; conv (1, 2 and 3 spatial dims; stride, padding, dilation, groups including
 * depthwise; bias) vs nested loops over every output and kernel tap; max / avg pooling
 * (ceil mode, count_include_pad both ways, padding, dilation for max; integer max pooling
 * with values at the dtype's extremes, so a wrong padding value shows) vs explicit windows;
 * global pooling. Shapes are small; values pseudo-random in [-1, 1]. Bad arguments fail
 * with a message.
 */
#include "ops_util.h"

#define MAXN 4096

static void rnd(kiln_dtype t, double *v, int64_t n, unsigned long long seed) {
  for (int64_t i = 0; i < n; i++) {
    double x = test_rand(&seed);
    if (!ou_is_float(t)) x = ou_is_unsigned(t) ? floor((x + 1) * 2) : floor(x * 3.5); /* u: 0..3, s: -4..3 */
    v[i] = ou_as(t, x);
  }
}

/* Accumulated results: f32 allows for an f32 accumulator on compiled backends. */
static void expect_acc(Case *c, kiln_dtype t, int rank, const int64_t *shape, const double *w) {
  double want[MAXN];
  int64_t n = ou_numel(rank, shape);
  for (int64_t i = 0; i < n; i++) want[i] = ou_is_float(t) ? ou_round_to(t, w[i]) : w[i];
  if (!ou_is_float(t)) cs_expect_exact(c, 0, t, rank, shape, want);
  else if (t == KILN_F32) cs_expect_tol(c, 0, t, rank, shape, want, 2e-6, 1e-5);
  else cs_expect(c, 0, t, rank, shape, want);
}

/* ---- matmul ---- */

static void matmul_case(const char *what, kiln_dtype t, int ra, const int64_t *sa, int rb, const int64_t *sb) {
  Case c;
  cs_begin(&c, "matmul %s %s", what, ou_dt(t));
  /* numpy.matmul: promote 1-D operands, broadcast batch dims, drop the promoted dims */
  int64_t pa[KILN_MAX_RANK], pb[KILN_MAX_RANK];
  int rpa = ra < 2 ? 2 : ra, rpb = rb < 2 ? 2 : rb;
  if (ra == 1) pa[0] = 1, pa[1] = sa[0];
  else memcpy(pa, sa, sizeof(int64_t) * (size_t)ra);
  if (rb == 1) pb[0] = sb[0], pb[1] = 1;
  else memcpy(pb, sb, sizeof(int64_t) * (size_t)rb);
  int64_t M = pa[rpa - 2], K = pa[rpa - 1], N = pb[rpb - 1];
  int rbat = (rpa > rpb ? rpa : rpb) - 2;
  int64_t bat[KILN_MAX_RANK] = { 0 };
  for (int d = 0; d < rbat; d++) {
    int ia = d - (rbat - (rpa - 2)), ib = d - (rbat - (rpb - 2));
    int64_t da = ia >= 0 ? pa[ia] : 1, db = ib >= 0 ? pb[ib] : 1;
    bat[d] = da == 1 ? db : da;
  }
  int64_t nbat = ou_numel(rbat, bat);
  double a[MAXN], b[MAXN], w[MAXN];
  rnd(t, a, ou_numel(ra, sa), 11 + (unsigned)t);
  rnd(t, b, ou_numel(rb, sb), 23 + (unsigned)t);
  for (int64_t bi = 0; bi < nbat; bi++) {
    int64_t idx[KILN_MAX_RANK];
    ou_unravel(bi, rbat, bat, idx);
    int64_t oa = ou_bcast_offset(rbat, idx, rpa - 2, pa), ob = ou_bcast_offset(rbat, idx, rpb - 2, pb);
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        double s = 0;
        for (int64_t k = 0; k < K; k++) s += a[(oa * M + i) * K + k] * b[(ob * K + k) * N + j];
        w[(bi * M + i) * N + j] = s;
      }
  }
  int64_t so[KILN_MAX_RANK];
  int ro = 0;
  for (int d = 0; d < rbat; d++) so[ro++] = bat[d];
  if (ra > 1) so[ro++] = M;
  if (rb > 1) so[ro++] = N;
  kiln_tensor x = cs_in(&c, t, ra, sa, a), y = cs_in(&c, t, rb, sb, b), z = -1;
  COK(&c, kiln_graph_matmul(c.g, x, y, &z));
  if (cs_run1(&c, z)) expect_acc(&c, t, ro, so, w);
  cs_end(&c);
}

static void matmul_cases(void) {
  int64_t s34[2] = {3, 4}, s45[2] = {4, 5}, s4[1] = {4};
  for (int d = 0; d < 12; d++) matmul_case("[3,4]x[4,5]", ou_all_dtypes[d], 2, s34, 2, s45);
  { int64_t a[3] = {2, 3, 4}, b[3] = {2, 4, 5}; matmul_case("batched [2,3,4]x[2,4,5]", KILN_F32, 3, a, 3, b); }
  { int64_t a[4] = {2, 1, 3, 4}, b[3] = {3, 4, 2}; matmul_case("broadcast batch [2,1,3,4]x[3,4,2]", KILN_F32, 4, a, 3, b); }
  { int64_t a[3] = {1, 3, 4}, b[3] = {2, 4, 5}; matmul_case("broadcast batch [1,3,4]x[2,4,5]", KILN_F64, 3, a, 3, b); }
  { int64_t b[3] = {2, 4, 5}; matmul_case("2-D x 3-D [3,4]x[2,4,5]", KILN_F16, 2, s34, 3, b); }
  matmul_case("1-D x 2-D [4]x[4,5]", KILN_F32, 1, s4, 2, s45);
  matmul_case("2-D x 1-D [3,4]x[4]", KILN_F32, 2, s34, 1, s4);
  matmul_case("1-D x 1-D [4]x[4]", KILN_I32, 1, s4, 1, s4);
  { int64_t b[3] = {2, 4, 5}; matmul_case("1-D x 3-D [4]x[2,4,5]", KILN_F32, 1, s4, 3, b); }
  { int64_t a[3] = {2, 3, 4}; matmul_case("3-D x 1-D [2,3,4]x[4]", KILN_I64, 3, a, 1, s4); }
  { int64_t a[2] = {1, 1}, b[2] = {1, 1}; matmul_case("[1,1]x[1,1]", KILN_BF16, 2, a, 2, b); }
  { int64_t a[2] = {17, 33}, b[2] = {33, 9}; matmul_case("odd sizes [17,33]x[33,9]", KILN_F32, 2, a, 2, b); }
  { int64_t a[2] = {3, 0}, b[2] = {0, 5}; matmul_case("zero inner dim gives zeros", KILN_F32, 2, a, 2, b); }
  { int64_t a[3] = {0, 3, 4}; matmul_case("zero batch", KILN_F32, 3, a, 2, s45); }
  {
    Case c;
    cs_begin(&c, "matmul errors");
    int64_t s35[2] = {3, 5}, b23[3] = {2, 4, 5}, b33[3] = {3, 3, 4};
    kiln_tensor a = cs_in(&c, KILN_F32, 2, s34, NULL), b = cs_in(&c, KILN_F32, 2, s35, NULL);
    kiln_tensor d = cs_in(&c, KILN_F64, 2, s45, NULL), s = cs_in(&c, KILN_F32, 0, NULL, NULL);
    kiln_tensor p = cs_in(&c, KILN_F32, 3, b23, NULL), q = cs_in(&c, KILN_F32, 3, b33, NULL);
    kiln_tensor bl = cs_in(&c, KILN_BOOL, 2, s45, NULL), bl2 = cs_in(&c, KILN_BOOL, 2, s34, NULL), z = -1;
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_matmul(c.g, a, b, &z));   /* 4 vs 3 */
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_matmul(c.g, a, d, &z));   /* f32 x f64 */
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_matmul(c.g, s, a, &z));   /* rank 0 */
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_matmul(c.g, q, p, &z));   /* batch 3 vs 2 */
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_matmul(c.g, bl2, bl, &z)); /* bool */
    cs_end(&c);
  }
}

/* ---- conv ---- */

typedef struct ConvSpec {
  int sp;
  int64_t N, C, M, group, in[3], k[3], s[3], d[3], pb[3], pe[3];
  int bias;
} ConvSpec;

static int64_t out_dim(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe, int ceil_mode) {
  int64_t span = in + pb + pe - ((k - 1) * d + 1);
  int64_t n = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  if (ceil_mode && (n - 1) * s >= in + pb) n--; /* ONNX: no window may start in the end padding */
  return n;
}

static void conv_case(const char *what, kiln_dtype t, ConvSpec p) {
  Case c;
  cs_begin(&c, "conv %dd %s %s", p.sp, what, ou_dt(t));
  /* treat every conv as 3-D: missing trailing dims have size 1, kernel 1, no padding */
  int64_t in[3], k[3], s[3], d[3], pb[3], pe[3], od[3];
  for (int i = 0; i < 3; i++) {
    int on = i < p.sp;
    in[i] = on ? p.in[i] : 1;
    k[i] = on ? p.k[i] : 1;
    s[i] = on && p.s[i] ? p.s[i] : 1;
    d[i] = on && p.d[i] ? p.d[i] : 1;
    pb[i] = on ? p.pb[i] : 0;
    pe[i] = on ? p.pe[i] : 0;
    od[i] = out_dim(in[i], k[i], s[i], d[i], pb[i], pe[i], 0);
  }
  int64_t G = p.group ? p.group : 1, Cg = p.C / G, Mg = p.M / G;
  int64_t xs[5] = {p.N, p.C}, ws[5] = {p.M, Cg}, os[5] = {p.N, p.M}, bs[1] = {p.M};
  for (int i = 0; i < p.sp; i++) xs[2 + i] = in[i], ws[2 + i] = k[i], os[2 + i] = od[i];
  static double x[MAXN], w[MAXN], b[64], out[MAXN];
  rnd(t, x, ou_numel(p.sp + 2, xs), 5);
  rnd(t, w, ou_numel(p.sp + 2, ws), 6);
  rnd(t, b, p.M, 7);
  for (int64_t n = 0; n < p.N; n++)
    for (int64_t m = 0; m < p.M; m++) {
      int64_t g = m / Mg;
      for (int64_t o0 = 0; o0 < od[0]; o0++)
        for (int64_t o1 = 0; o1 < od[1]; o1++)
          for (int64_t o2 = 0; o2 < od[2]; o2++) {
            double acc = 0;
            for (int64_t cc = 0; cc < Cg; cc++)
              for (int64_t k0 = 0; k0 < k[0]; k0++)
                for (int64_t k1 = 0; k1 < k[1]; k1++)
                  for (int64_t k2 = 0; k2 < k[2]; k2++) {
                    int64_t i0 = o0 * s[0] - pb[0] + k0 * d[0], i1 = o1 * s[1] - pb[1] + k1 * d[1];
                    int64_t i2 = o2 * s[2] - pb[2] + k2 * d[2];
                    if (i0 < 0 || i0 >= in[0] || i1 < 0 || i1 >= in[1] || i2 < 0 || i2 >= in[2]) continue;
                    int64_t ch = g * Cg + cc;
                    double xv = x[(((n * p.C + ch) * in[0] + i0) * in[1] + i1) * in[2] + i2];
                    double wv = w[(((m * Cg + cc) * k[0] + k0) * k[1] + k1) * k[2] + k2];
                    acc += xv * wv;
                  }
            /* the builder adds the bias as a separate add (graph.h), so the conv result is
             * rounded to the dtype before the bias is added; under excess precision, once after */
            if (p.bias) acc = ou_round_to(t, (ou_excess() ? acc : ou_round_to(t, acc)) + b[m]);
            out[(((n * p.M + m) * od[0] + o0) * od[1] + o1) * od[2] + o2] = acc;
          }
    }
  kiln_conv_params cp;
  memset(&cp, 0, sizeof cp);
  cp.spatial = p.sp;
  cp.group = p.group;
  for (int i = 0; i < p.sp; i++) {
    cp.strides[i] = p.s[i];
    cp.dilations[i] = p.d[i];
    cp.pads[i] = p.pb[i];
    cp.pads[p.sp + i] = p.pe[i];
  }
  kiln_tensor xt = cs_in(&c, t, p.sp + 2, xs, x), wt = cs_in(&c, t, p.sp + 2, ws, w), bt = -1, y = -1;
  if (p.bias) bt = cs_in(&c, t, 1, bs, b);
  COK(&c, kiln_graph_conv(c.g, xt, wt, bt, &cp, &y));
  if (cs_run1(&c, y)) expect_acc(&c, t, p.sp + 2, os, out);
  cs_end(&c);
}

static void conv_cases(void) {
  /* 1-D */
  conv_case("plain", KILN_F32, (ConvSpec){1, 2, 3, 4, 1, {9}, {3}, {0}, {0}, {0}, {0}, 0});
  conv_case("stride 2, pads 1/2, bias", KILN_F32, (ConvSpec){1, 1, 2, 3, 1, {10}, {3}, {2}, {1}, {1}, {2}, 1});
  conv_case("dilation 3", KILN_F64, (ConvSpec){1, 2, 2, 2, 1, {11}, {3}, {1}, {3}, {0}, {1}, 1});
  /* 2-D */
  conv_case("plain 3x3", KILN_F32, (ConvSpec){2, 2, 3, 4, 1, {6, 5}, {3, 3}, {0}, {0}, {0}, {0}, 0});
  conv_case("stride (2,1), pads, bias", KILN_F32,
            (ConvSpec){2, 1, 3, 2, 1, {7, 6}, {3, 2}, {2, 1}, {1, 1}, {1, 0}, {1, 1}, 1});
  conv_case("dilation (2,2), asymmetric pads", KILN_F32,
            (ConvSpec){2, 1, 2, 3, 1, {8, 7}, {3, 3}, {1, 1}, {2, 2}, {2, 0}, {0, 3}, 0});
  conv_case("groups 2", KILN_F32, (ConvSpec){2, 2, 4, 6, 2, {5, 5}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1});
  conv_case("depthwise (group = C = M)", KILN_F32,
            (ConvSpec){2, 1, 3, 3, 3, {6, 6}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 1});
  conv_case("depthwise multiplier 2 (M = 2C)", KILN_F32,
            (ConvSpec){2, 2, 3, 6, 3, {5, 4}, {2, 2}, {2, 1}, {1, 1}, {0, 1}, {1, 0}, 0});
  conv_case("1x1 stride 2", KILN_F16, (ConvSpec){2, 1, 4, 3, 1, {6, 6}, {1, 1}, {2, 2}, {1, 1}, {0, 0}, {0, 0}, 1});
  conv_case("bf16 3x3", KILN_BF16, (ConvSpec){2, 1, 2, 2, 1, {5, 5}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 0});
  conv_case("f64 stride/dilation/group", KILN_F64,
            (ConvSpec){2, 2, 4, 4, 2, {9, 8}, {2, 3}, {2, 3}, {3, 1}, {1, 2}, {0, 1}, 1});
  conv_case("kernel equals padded input", KILN_F32, (ConvSpec){2, 1, 1, 1, 1, {3, 3}, {5, 5}, {1, 1}, {1, 1}, {1, 1}, {1, 1}, 0});
  /* 3-D */
  conv_case("plain 2x2x2", KILN_F32, (ConvSpec){3, 1, 2, 3, 1, {4, 4, 3}, {2, 2, 2}, {0}, {0}, {0}, {0}, 1});
  conv_case("stride, pads, dilation, groups", KILN_F32,
            (ConvSpec){3, 2, 2, 4, 2, {5, 4, 6}, {2, 3, 2}, {2, 1, 2}, {1, 1, 2}, {1, 1, 0}, {0, 1, 1}, 1});
  {
    Case c;
    cs_begin(&c, "conv errors");
    int64_t xs[4] = {1, 4, 6, 6}, w_bad_c[4] = {2, 3, 3, 3}, w_ok[4] = {6, 2, 3, 3}, w3[3] = {2, 4, 3};
    int64_t big_k[4] = {2, 4, 9, 9}, b_bad[1] = {5}, b_ok[1] = {6};
    kiln_tensor x = cs_in(&c, KILN_F32, 4, xs, NULL), wb = cs_in(&c, KILN_F32, 4, w_bad_c, NULL);
    kiln_tensor wo = cs_in(&c, KILN_F32, 4, w_ok, NULL), wr = cs_in(&c, KILN_F32, 3, w3, NULL);
    kiln_tensor wk = cs_in(&c, KILN_F32, 4, big_k, NULL), bb = cs_in(&c, KILN_F32, 1, b_bad, NULL);
    kiln_tensor bo = cs_in(&c, KILN_F64, 1, b_ok, NULL), wd = cs_in(&c, KILN_F64, 4, w_ok, NULL), y = -1;
    kiln_conv_params p;
    memset(&p, 0, sizeof p);
    p.spatial = 2;
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_conv(c.g, x, wb, -1, &p, &y)); /* C 4 vs w dim 1 = 3 */
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_conv(c.g, x, wr, -1, &p, &y)); /* w rank 3 */
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_conv(c.g, x, wk, -1, &p, &y)); /* kernel 9 > 6 */
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_conv(c.g, x, wd, -1, &p, &y)); /* f32 x, f64 w */
    p.group = 2;
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_conv(c.g, x, wo, bb, &p, &y)); /* bias [5] for M 6 */
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_conv(c.g, x, wo, bo, &p, &y)); /* bias dtype */
    p.group = 3;
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_conv(c.g, x, wo, -1, &p, &y)); /* 4 % 3 */
    p.group = 2;
    p.spatial = 4;
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_conv(c.g, x, wo, -1, &p, &y));
    p.spatial = 2;
    p.strides[0] = -1;
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_conv(c.g, x, wo, -1, &p, &y));
    p.strides[0] = 1;
    p.pads[1] = -1;
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_conv(c.g, x, wo, -1, &p, &y));
    p.pads[1] = 0;
    COK(&c, kiln_graph_conv(c.g, x, wo, -1, &p, &y)); /* and the fixed params work */
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_conv(c.g, x, wo, -1, NULL, &y));
    cs_end(&c);
  }
}

/* ---- pooling ---- */

typedef struct PoolSpec {
  int sp;
  int64_t N, C, in[3], k[3], s[3], d[3], pb[3], pe[3];
  int ceil_mode, include_pad;
} PoolSpec;

/* set: integer inputs mostly at the dtype's lowest value, some at its highest */
static int pool_extremes;

/* The dtype's lowest and (near-)highest values, both exact in a double: 64-bit maxima are
 * not, so those take the largest double below them. */
static double int_lo(kiln_dtype t) { return ou_is_unsigned(t) ? 0 : -ldexp(1, ou_bits(t) - 1); }
static double int_hi(kiln_dtype t) {
  int b = ou_bits(t) - !ou_is_unsigned(t);
  return b <= 32 ? ldexp(1, b) - 1 : ldexp(1, b) - ldexp(1, b - 53);
}

/* Integers where a wrong padding value shows: a window whose in-range taps all hold the
 * lowest value must give exactly that, not the padding's value. */
static void rnd_extremes(kiln_dtype t, double *v, int64_t n, unsigned long long seed) {
  for (int64_t i = 0; i < n; i++) {
    double x = test_rand(&seed);
    v[i] = x < 0.2 ? int_lo(t) : x < 0.5 ? int_hi(t) : x < 0.7 ? int_lo(t) + 1 : v[i];
  }
}

static void pool_case(const char *what, kiln_pool_kind kind, kiln_dtype t, PoolSpec p) {
  Case c;
  cs_begin(&c, "%s pool %s %s", kind == KILN_POOL_MAX ? "max" : "avg", what, ou_dt(t));
  int64_t in[3], k[3], s[3], d[3], pb[3], pe[3], od[3];
  for (int i = 0; i < 3; i++) {
    int on = i < p.sp;
    in[i] = on ? p.in[i] : 1;
    k[i] = on ? p.k[i] : 1;
    s[i] = on && p.s[i] ? p.s[i] : 1;
    d[i] = on && p.d[i] ? p.d[i] : 1;
    pb[i] = on ? p.pb[i] : 0;
    pe[i] = on ? p.pe[i] : 0;
    od[i] = out_dim(in[i], k[i], s[i], d[i], pb[i], pe[i], p.ceil_mode);
  }
  int64_t xs[5] = {p.N, p.C}, os[5] = {p.N, p.C};
  for (int i = 0; i < p.sp; i++) xs[2 + i] = in[i], os[2 + i] = od[i];
  static double x[MAXN], out[MAXN];
  rnd(t, x, ou_numel(p.sp + 2, xs), 9);
  if (pool_extremes) rnd_extremes(t, x, ou_numel(p.sp + 2, xs), 17);
  int64_t nc = p.N * p.C, padded_at_lo = 0, at_hi = 0;
  for (int64_t q = 0; q < nc; q++)
    for (int64_t o0 = 0; o0 < od[0]; o0++)
      for (int64_t o1 = 0; o1 < od[1]; o1++)
        for (int64_t o2 = 0; o2 < od[2]; o2++) {
          double mx = -INFINITY, sum = 0;
          int64_t valid = 0, counted = 0, taps = 0;
          for (int64_t k0 = 0; k0 < k[0]; k0++)
            for (int64_t k1 = 0; k1 < k[1]; k1++)
              for (int64_t k2 = 0; k2 < k[2]; k2++) {
                int64_t i0 = o0 * s[0] - pb[0] + k0 * d[0], i1 = o1 * s[1] - pb[1] + k1 * d[1];
                int64_t i2 = o2 * s[2] - pb[2] + k2 * d[2];
                /* count_include_pad counts taps inside the padded extent, not past it (ceil mode) */
                if (i0 < in[0] + pe[0] && i1 < in[1] + pe[1] && i2 < in[2] + pe[2]) counted++;
                taps++;
                if (i0 < 0 || i0 >= in[0] || i1 < 0 || i1 >= in[1] || i2 < 0 || i2 >= in[2]) continue;
                double v = x[((q * in[0] + i0) * in[1] + i1) * in[2] + i2];
                mx = v > mx ? v : mx;
                sum += v;
                valid++;
              }
          double r = kind == KILN_POOL_MAX ? mx : sum / (double)(p.include_pad ? counted : valid);
          if (pool_extremes) padded_at_lo += valid < taps && r == int_lo(t), at_hi += r == int_hi(t);
          out[((q * od[0] + o0) * od[1] + o1) * od[2] + o2] = r;
        }
  kiln_pool_params pp;
  memset(&pp, 0, sizeof pp);
  pp.spatial = p.sp;
  pp.ceil_mode = p.ceil_mode;
  pp.count_include_pad = p.include_pad;
  for (int i = 0; i < p.sp; i++) {
    pp.kernel[i] = p.k[i];
    pp.strides[i] = p.s[i];
    pp.dilations[i] = p.d[i];
    pp.pads[i] = p.pb[i];
    pp.pads[p.sp + i] = p.pe[i];
  }
  /* the case itself must be able to catch a wrong padding value or a wrapped maximum */
  if (pool_extremes && (!padded_at_lo || !at_hi)) cs_fail(&c, "test data: %lld padded windows at the lowest value, %lld at the highest",
                                                      (long long)padded_at_lo, (long long)at_hi);
  kiln_tensor xt = cs_in(&c, t, p.sp + 2, xs, x), y = -1;
  COK(&c, kiln_graph_pool(c.g, kind, xt, &pp, &y));
  if (cs_run1(&c, y)) {
    if (kind == KILN_POOL_MAX) cs_expect_exact(&c, 0, t, p.sp + 2, os, out);
    else expect_acc(&c, t, p.sp + 2, os, out);
  }
  cs_end(&c);
}

static void pool_cases(void) {
  for (int kind = 0; kind < 2; kind++) {
    kiln_pool_kind pk = kind ? KILN_POOL_AVG : KILN_POOL_MAX;
    for (int inc = 0; inc < (kind ? 2 : 1); inc++) {
      pool_case("1d k3 s2", pk, KILN_F32, (PoolSpec){1, 1, 2, {9}, {3}, {2}, {0}, {0}, {0}, 0, inc});
      pool_case("1d k3 s2 ceil", pk, KILN_F32, (PoolSpec){1, 1, 2, {10}, {3}, {2}, {0}, {0}, {0}, 1, inc});
      pool_case("2d k2 s2", pk, KILN_F32, (PoolSpec){2, 2, 3, {6, 6}, {2, 2}, {2, 2}, {0}, {0}, {0}, 0, inc});
      pool_case("2d k3 s1 pads 1", pk, KILN_F32, (PoolSpec){2, 1, 2, {5, 6}, {3, 3}, {1, 1}, {0}, {1, 1}, {1, 1}, 0, inc});
      pool_case("2d k3 s2 pads 1 ceil", pk, KILN_F32,
                (PoolSpec){2, 1, 2, {6, 7}, {3, 3}, {2, 2}, {0}, {1, 1}, {1, 1}, 1, inc});
      pool_case("2d k2 s3 asymmetric pads ceil", pk, KILN_F32,
                (PoolSpec){2, 1, 1, {7, 8}, {2, 3}, {3, 2}, {0}, {1, 0}, {0, 2}, 1, inc});
      pool_case("2d ceil drops a window starting in the end pad", pk, KILN_F32,
                (PoolSpec){2, 1, 1, {6, 6}, {2, 2}, {2, 2}, {0}, {0, 0}, {1, 1}, 1, inc});
      pool_case("3d k2 s2 pads", pk, KILN_F32,
                (PoolSpec){3, 1, 2, {4, 5, 3}, {2, 2, 2}, {2, 2, 1}, {0}, {1, 0, 1}, {0, 1, 0}, 0, inc});
      pool_case("2d f16", pk, KILN_F16, (PoolSpec){2, 1, 2, {5, 5}, {3, 3}, {2, 2}, {0}, {1, 1}, {1, 1}, 0, inc});
      pool_case("2d f64 ceil", pk, KILN_F64, (PoolSpec){2, 2, 1, {6, 5}, {2, 2}, {2, 2}, {0}, {0, 1}, {1, 0}, 1, inc});
    }
  }
  /* dilation (max pooling) */
  pool_case("2d dilation 2", KILN_POOL_MAX, KILN_F32,
            (PoolSpec){2, 1, 2, {7, 7}, {3, 3}, {1, 1}, {2, 2}, {0}, {0}, 0, 0});
  pool_case("2d dilation (2,3) stride 2 pads ceil", KILN_POOL_MAX, KILN_F32,
            (PoolSpec){2, 1, 1, {9, 10}, {2, 3}, {2, 2}, {2, 3}, {1, 1}, {1, 2}, 1, 0});
  /* ONNX MaxPool (opset 12+) takes int8 and uint8 too; kiln takes every integer dtype */
  pool_case("1d dilation 3", KILN_POOL_MAX, KILN_I8, (PoolSpec){1, 1, 2, {10}, {3}, {1}, {3}, {0}, {0}, 0, 0});
  pool_case("2d", KILN_POOL_MAX, KILN_U8, (PoolSpec){2, 1, 1, {4, 4}, {2, 2}, {2, 2}, {0}, {0}, {0}, 0, 0});
  pool_extremes = 1;
  for (int d = 0; d < 8; d++) {
    kiln_dtype t = ou_int_dtypes[d];
    pool_case("2d k3 s2 pads 1 ceil, extremes", KILN_POOL_MAX, t,
              (PoolSpec){2, 2, 2, {6, 7}, {3, 3}, {2, 2}, {0}, {1, 1}, {1, 1}, 1, 0});
    pool_case("1d k3 s2 begin pad, ceil, extremes", KILN_POOL_MAX, t,
              (PoolSpec){1, 2, 3, {9}, {3}, {2}, {0}, {1}, {0}, 1, 0});
  }
  pool_extremes = 0;
  {
    Case c;
    cs_begin(&c, "avg pool refuses integers");
    int64_t xs[4] = {1, 1, 4, 4};
    kiln_tensor x = cs_in(&c, KILN_I8, 4, xs, NULL), y = -1;
    kiln_pool_params p;
    memset(&p, 0, sizeof p);
    p.spatial = 2;
    p.kernel[0] = p.kernel[1] = 2;
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_pool(c.g, KILN_POOL_AVG, x, &p, &y));
    x = cs_in(&c, KILN_BOOL, 4, xs, NULL);
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_pool(c.g, KILN_POOL_MAX, x, &p, &y));
    cs_end(&c);
  }
  {
    Case c;
    cs_begin(&c, "pool errors");
    int64_t xs[4] = {1, 2, 5, 5}, x3[3] = {1, 2, 5};
    kiln_tensor x = cs_in(&c, KILN_F32, 4, xs, NULL), r3 = cs_in(&c, KILN_F32, 3, x3, NULL), y = -1;
    kiln_pool_params p;
    memset(&p, 0, sizeof p);
    p.spatial = 2;
    p.kernel[0] = p.kernel[1] = 2;
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_pool(c.g, KILN_POOL_MAX, r3, &p, &y)); /* rank 3 for 2 dims */
    p.kernel[1] = 0;
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_pool(c.g, KILN_POOL_AVG, x, &p, &y));
    p.kernel[1] = 6;
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_pool(c.g, KILN_POOL_MAX, x, &p, &y)); /* 6 > 5 */
    p.kernel[1] = 2;
    p.strides[0] = -2;
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_pool(c.g, KILN_POOL_MAX, x, &p, &y));
    p.strides[0] = 0;
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_pool(c.g, (kiln_pool_kind)5, x, &p, &y));
    p.spatial = 0;
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_pool(c.g, KILN_POOL_MAX, x, &p, &y));
    cs_end(&c);
  }
}

static void global_pool_case(kiln_pool_kind kind, kiln_dtype t, int r, const int64_t *xs) {
  Case c;
  cs_begin(&c, "global %s pool rank %d %s", kind == KILN_POOL_MAX ? "max" : "avg", r, ou_dt(t));
  static double x[MAXN], w[64];
  int64_t n = ou_numel(r, xs), nc = xs[0] * xs[1], per = n / nc, os[5] = {xs[0], xs[1], 1, 1, 1};
  rnd(t, x, n, 31);
  for (int64_t q = 0; q < nc; q++) {
    double mx = -INFINITY, s = 0;
    for (int64_t i = 0; i < per; i++) mx = x[q * per + i] > mx ? x[q * per + i] : mx, s += x[q * per + i];
    w[q] = kind == KILN_POOL_MAX ? mx : s / (double)per;
  }
  kiln_tensor xt = cs_in(&c, t, r, xs, x), y = -1;
  COK(&c, kiln_graph_global_pool(c.g, kind, xt, &y));
  if (cs_run1(&c, y)) {
    if (kind == KILN_POOL_MAX) cs_expect_exact(&c, 0, t, r, os, w);
    else expect_acc(&c, t, r, os, w);
  }
  cs_end(&c);
}

static void global_pool_cases(void) {
  int64_t s4[4] = {2, 3, 4, 5}, s3[3] = {2, 2, 7}, s5[5] = {1, 2, 3, 2, 4};
  for (int k = 0; k < 2; k++) {
    kiln_pool_kind pk = k ? KILN_POOL_AVG : KILN_POOL_MAX;
    global_pool_case(pk, KILN_F32, 4, s4);
    global_pool_case(pk, KILN_F32, 3, s3);
    global_pool_case(pk, KILN_F64, 5, s5);
    global_pool_case(pk, KILN_F16, 4, s4);
  }
  {
    Case c;
    cs_begin(&c, "global pool errors");
    int64_t s2[2] = {2, 3};
    kiln_tensor x = cs_in(&c, KILN_F32, 2, s2, NULL), y = -1;
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_global_pool(c.g, KILN_POOL_AVG, x, &y)); /* no spatial dims */
    cs_end(&c);
  }
}

int main(void) {
  if (!ou_backend_available()) return 0;
  matmul_cases();
  conv_cases();
  pool_cases();
  global_pool_cases();
  OU_MAIN_END("contract");
}
