/*
 * Multi-op graphs and larger, odd sizes: what one-op cases cannot catch. Chains of
 * movement ops (slice with negative steps -> reshape -> transpose -> pad -> gather) are
 * compared with the same chain applied step by step here; identities tie ops to each
 * other (conv of a zero-padded input == conv with pads, (AB)^T == B^T A^T, concat of
 * slices == the input, a cast round trip through f64 is exact); and sizes that are not
 * multiples of any vector width or tile (1031, 4099, 65x70x33) check the edges of
 * compiled kernels against naive loops. Runs on $KILN_TEST_BACKEND like the rest.
 */
#include "ops_util.h"

#include <sys/wait.h>
#include <unistd.h>

static double *dalloc(int64_t n) {
  double *p = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
  if (!p) {
    fprintf(stderr, "out of memory\n");
    exit(2);
  }
  return p;
}

static void rnd(double *v, int64_t n, unsigned long long seed) {
  for (int64_t i = 0; i < n; i++) v[i] = ou_round_f32(test_rand(&seed));
}

/* ---- a movement chain, step by step ---- */

/* x[4,6,10] -> slice(axis 2: 9 down to 0 step -3; axis 0: 1..4) -> [3,6,4]
 *   -> reshape [18,4] -> transpose [4,18] -> pad (edge, begin 1 / end 2 on axis 1) -> [4,21]
 *   -> gather(axis 1, indices [-1, 0, 5, 20, 3]) -> [4,5] */
static void movement_chain(void) {
  Case c;
  cs_begin(&c, "slice -> reshape -> transpose -> pad -> gather chain");
  int64_t xs[3] = {4, 6, 10};
  double x[240], s1[72], t2[72], p3[84], w[20];
  for (int i = 0; i < 240; i++) x[i] = i;
  /* slice */
  for (int a = 0; a < 3; a++)
    for (int b = 0; b < 6; b++)
      for (int k = 0; k < 4; k++) s1[(a * 6 + b) * 4 + k] = x[((a + 1) * 6 + b) * 10 + (9 - 3 * k)];
  /* reshape [18,4] is the same buffer; transpose -> [4,18] */
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 18; j++) t2[i * 18 + j] = s1[j * 4 + i];
  /* edge pad on axis 1 */
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 21; j++) {
      int src = j - 1 < 0 ? 0 : j - 1 > 17 ? 17 : j - 1;
      p3[i * 21 + j] = t2[i * 18 + src];
    }
  static const double idx[5] = {-1, 0, 5, 20, 3};
  for (int i = 0; i < 4; i++)
    for (int k = 0; k < 5; k++) {
      int j = (int)idx[k] < 0 ? (int)idx[k] + 21 : (int)idx[k];
      w[i * 5 + k] = p3[i * 21 + j];
    }
  kiln_tensor xt = cs_in(&c, KILN_F32, 3, xs, x), a = -1, b = -1, t = -1, p = -1, g = -1;
  int64_t st[2] = {9, 1}, en[2] = {-100, 4}, sp[2] = {-3, 1}, rs[2] = {18, 4}, pads[4] = {0, 1, 0, 2}, is[1] = {5};
  int ax[2] = {2, 0}, perm[2] = {1, 0};
  COK(&c, kiln_graph_slice(c.g, xt, 2, st, en, ax, sp, &a));
  COK(&c, kiln_graph_reshape(c.g, a, 2, rs, &b));
  COK(&c, kiln_graph_transpose(c.g, b, perm, &t));
  COK(&c, kiln_graph_pad(c.g, t, pads, KILN_PAD_EDGE, 0, &p));
  kiln_tensor it = cs_in(&c, KILN_I64, 1, is, idx);
  COK(&c, kiln_graph_gather(c.g, p, it, 1, &g));
  int64_t os[2] = {4, 5};
  if (cs_run1(&c, g)) cs_expect_exact(&c, 0, KILN_F32, 2, os, w);
  cs_end(&c);
}

/* concat of three slices of x along axis 1 gives x back; also through a transpose */
static void concat_of_slices(void) {
  Case c;
  cs_begin(&c, "concat(slices) == x");
  int64_t xs[2] = {5, 11};
  double x[55];
  rnd(x, 55, 3);
  kiln_tensor xt = cs_in(&c, KILN_F32, 2, xs, x), parts[3] = {-1, -1, -1}, y = -1;
  int64_t b[3] = {0, 3, 7}, e[3] = {3, 7, INT64_MAX};
  int ax[1] = {1};
  for (int k = 0; k < 3; k++) COK(&c, kiln_graph_slice(c.g, xt, 1, &b[k], &e[k], ax, NULL, &parts[k]));
  COK(&c, kiln_graph_concat(c.g, 3, parts, -1, &y));
  if (cs_run1(&c, y)) cs_expect_exact(&c, 0, KILN_F32, 2, xs, x);
  cs_end(&c);
}

/* conv(pad0(x), w) == conv(x, w, pads) and both match, as two outputs of one graph */
static void conv_pad_identity(void) {
  Case c;
  cs_begin(&c, "conv(pad(x)) == conv(x, pads)");
  int64_t xs[4] = {1, 3, 9, 8}, ws[4] = {4, 3, 3, 3};
  double *x = dalloc(216), *w = dalloc(108);
  rnd(x, 216, 5);
  rnd(w, 108, 6);
  kiln_tensor xt = cs_in(&c, KILN_F32, 4, xs, x), wt = cs_in(&c, KILN_F32, 4, ws, w), px = -1, y1 = -1, y2 = -1;
  int64_t pads[8] = {0, 0, 2, 1, 0, 0, 1, 2};
  COK(&c, kiln_graph_pad(c.g, xt, pads, KILN_PAD_CONSTANT, 0, &px));
  kiln_conv_params p0, p1;
  memset(&p0, 0, sizeof p0);
  p0.spatial = 2;
  p0.strides[0] = 2;
  p1 = p0;
  p1.pads[0] = 2, p1.pads[1] = 1, p1.pads[2] = 1, p1.pads[3] = 2;
  COK(&c, kiln_graph_conv(c.g, px, wt, -1, &p0, &y1));
  COK(&c, kiln_graph_conv(c.g, xt, wt, -1, &p1, &y2));
  kiln_tensor outs[2] = {y1, y2};
  int64_t os[4] = {1, 4, 5, 9};
  if (cs_run(&c, 2, outs) && cs_check_meta(&c, 0, KILN_F32, 4, os) && cs_check_meta(&c, 1, KILN_F32, 4, os)) {
    for (int64_t i = 0; i < 180; i++)
      if (!ou_close(cs_get(&c, 1, i), cs_get(&c, 0, i), 1e-6, 1e-5)) {
        cs_fail(&c, "element %lld: %g with pads, %g with a pad op", (long long)i, cs_get(&c, 1, i), cs_get(&c, 0, i));
        break;
      }
  }
  cs_end(&c);
  free(x);
  free(w);
}

/* (A B)^T == B^T A^T, both against a triple loop, at sizes off any tile grid */
static void matmul_large(void) {
  Case c;
  cs_begin(&c, "matmul [65,70]x[70,33] and its transpose identity");
  int64_t M = 65, K = 70, N = 33, as[2] = {65, 70}, bs[2] = {70, 33};
  double *a = dalloc(M * K), *b = dalloc(K * N), *w = dalloc(M * N), *wt = dalloc(M * N);
  rnd(a, M * K, 7);
  rnd(b, K * N, 8);
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) {
      double s = 0;
      for (int64_t k = 0; k < K; k++) s += a[i * K + k] * b[k * N + j];
      w[i * N + j] = ou_round_f32(s);
      wt[j * M + i] = w[i * N + j];
    }
  kiln_tensor at = cs_in(&c, KILN_F32, 2, as, a), bt = cs_in(&c, KILN_F32, 2, bs, b), ab = -1, abT = -1;
  kiln_tensor aT = -1, bT = -1, bTaT = -1;
  int perm[2] = {1, 0};
  COK(&c, kiln_graph_matmul(c.g, at, bt, &ab));
  COK(&c, kiln_graph_transpose(c.g, ab, perm, &abT));
  COK(&c, kiln_graph_transpose(c.g, at, perm, &aT));
  COK(&c, kiln_graph_transpose(c.g, bt, perm, &bT));
  COK(&c, kiln_graph_matmul(c.g, bT, aT, &bTaT));
  kiln_tensor outs[3] = {ab, abT, bTaT};
  int64_t os[2] = {65, 33}, ots[2] = {33, 65};
  if (cs_run(&c, 3, outs)) {
    cs_expect_tol(&c, 0, KILN_F32, 2, os, w, 1e-5, 1e-5);
    cs_expect_tol(&c, 1, KILN_F32, 2, ots, wt, 1e-5, 1e-5);
    cs_expect_tol(&c, 2, KILN_F32, 2, ots, wt, 1e-5, 1e-5);
  }
  cs_end(&c);
  free(a), free(b), free(w), free(wt);
}

static void matmul_batched_large(void) {
  Case c;
  cs_begin(&c, "matmul [3,17,64]x[64,31] broadcast batch");
  int64_t B = 3, M = 17, K = 64, N = 31, as[3] = {3, 17, 64}, bs[2] = {64, 31}, os[3] = {3, 17, 31};
  double *a = dalloc(B * M * K), *b = dalloc(K * N), *w = dalloc(B * M * N);
  rnd(a, B * M * K, 9);
  rnd(b, K * N, 10);
  for (int64_t q = 0; q < B; q++)
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        double s = 0;
        for (int64_t k = 0; k < K; k++) s += a[(q * M + i) * K + k] * b[k * N + j];
        w[(q * M + i) * N + j] = ou_round_f32(s);
      }
  kiln_tensor at = cs_in(&c, KILN_F32, 3, as, a), bt = cs_in(&c, KILN_F32, 2, bs, b), y = -1;
  COK(&c, kiln_graph_matmul(c.g, at, bt, &y));
  if (cs_run1(&c, y)) cs_expect_tol(&c, 0, KILN_F32, 3, os, w, 1e-5, 1e-5);
  cs_end(&c);
  free(a), free(b), free(w);
}

/* half-precision matmul and sum with a long reduction: the accumulator must be wider than
 * the dtype (an f16 accumulator over 512 terms is off by many ulps) */
static void half_long_reductions(void) {
  static const kiln_dtype ts[2] = {KILN_F16, KILN_BF16};
  for (int d = 0; d < 2; d++) {
    kiln_dtype t = ts[d];
    Case c;
    cs_begin(&c, "matmul [8,512]x[512,8] and sum over 2048 in %s", ou_dt(t));
    int64_t M = 8, K = 512, N = 8, as[2] = {8, 512}, bs[2] = {512, 8}, os[2] = {8, 8}, ls[1] = {2048};
    double *a = dalloc(M * K), *b = dalloc(K * N), *w = dalloc(M * N), *l = dalloc(2048), ws = 0;
    unsigned long long seed = 21;
    for (int64_t i = 0; i < M * K; i++) a[i] = ou_as(t, test_rand(&seed));
    for (int64_t i = 0; i < K * N; i++) b[i] = ou_as(t, test_rand(&seed));
    for (int64_t i = 0; i < 2048; i++) l[i] = ou_as(t, 0.75 + 0.25 * test_rand(&seed)), ws += l[i];
    for (int64_t i = 0; i < M; i++)
      for (int64_t j = 0; j < N; j++) {
        double s = 0;
        for (int64_t k = 0; k < K; k++) s += a[i * K + k] * b[k * N + j];
        w[i * N + j] = ou_round_to(t, s);
      }
    ws = ou_round_to(t, ws);
    kiln_tensor at = cs_in(&c, t, 2, as, a), bt = cs_in(&c, t, 2, bs, b), lt = cs_in(&c, t, 1, ls, l), o[2] = {-1, -1};
    COK(&c, kiln_graph_matmul(c.g, at, bt, &o[0]));
    COK(&c, kiln_graph_reduce(c.g, KILN_REDUCE_SUM, lt, 0, NULL, 0, &o[1]));
    if (cs_run(&c, 2, o)) {
      /* one ulp of the result (plus a little for near-zero dot products) */
      double ulp = t == KILN_F16 ? 1.0 / 1024 : 1.0 / 128;
      cs_expect_tol(&c, 0, t, 2, os, w, ulp * 0.1, ulp);
      cs_expect_tol(&c, 1, t, 0, NULL, &ws, 0, ulp);
    }
    cs_end(&c);
    free(a), free(b), free(w), free(l);
  }
}

/* softmax denominators: sum(exp(x - max(x, 1, keep)), 1) over rows of 1031 */
static void reduce_chain_large(void) {
  Case c;
  cs_begin(&c, "sum(exp(x - max(x))) over rows of 1031, and column sums of the transpose");
  int64_t R = 7, L = 1031, xs[2] = {7, 1031};
  double *x = dalloc(R * L), w[7], wc[1031];
  rnd(x, R * L, 11);
  for (int64_t r = 0; r < R; r++) {
    double mx = -INFINITY, s = 0;
    for (int64_t j = 0; j < L; j++) mx = x[r * L + j] > mx ? x[r * L + j] : mx;
    for (int64_t j = 0; j < L; j++) s += exp(x[r * L + j] - mx);
    w[r] = s;
  }
  for (int64_t j = 0; j < L; j++) {
    double s = 0;
    for (int64_t r = 0; r < R; r++) s += x[r * L + j];
    wc[j] = ou_round_f32(s);
  }
  kiln_tensor xt = cs_in(&c, KILN_F32, 2, xs, x), mx = -1, d = -1, e = -1, s = -1, tr = -1, cs = -1;
  int ax1[1] = {1}, perm[2] = {1, 0};
  COK(&c, kiln_graph_reduce(c.g, KILN_REDUCE_MAX, xt, 1, ax1, 1, &mx));
  COK(&c, kiln_graph_binary(c.g, KILN_SUB, xt, mx, &d));
  COK(&c, kiln_graph_unary(c.g, KILN_EXP, d, &e));
  COK(&c, kiln_graph_reduce(c.g, KILN_REDUCE_SUM, e, 1, ax1, 0, &s));
  COK(&c, kiln_graph_transpose(c.g, xt, perm, &tr));
  COK(&c, kiln_graph_reduce(c.g, KILN_REDUCE_SUM, tr, 1, ax1, 0, &cs));
  kiln_tensor outs[2] = {s, cs};
  int64_t o1[1] = {7}, o2[1] = {1031};
  if (cs_run(&c, 2, outs)) {
    cs_expect_tol(&c, 0, KILN_F32, 1, o1, w, 1e-5, 1e-5);
    cs_expect_tol(&c, 1, KILN_F32, 1, o2, wc, 1e-6, 1e-5);
  }
  cs_end(&c);
  free(x);
}

/* argmax over a long axis whose max is the last element; argmin with the min first */
static void arg_large(void) {
  Case c;
  cs_begin(&c, "argmax/argmin over 4099 elements");
  int64_t n = 4099, xs[2] = {2, 4099};
  double *x = dalloc(2 * n);
  rnd(x, 2 * n, 12);
  x[n - 1] = 5;       /* row 0 max at the end */
  x[n] = -5;          /* row 1 min at the start */
  x[n + 2049] = 5;    /* row 1 max in the middle */
  x[1000] = -5;       /* row 0 min */
  kiln_tensor xt = cs_in(&c, KILN_F32, 2, xs, x), am = -1, an = -1;
  COK(&c, kiln_graph_argmax(c.g, xt, 1, 0, 0, &am));
  COK(&c, kiln_graph_argmin(c.g, xt, 1, 0, 0, &an));
  kiln_tensor outs[2] = {am, an};
  int64_t o[1] = {2};
  double wm[2] = {4098, 2049}, wn[2] = {1000, 0};
  if (cs_run(&c, 2, outs)) {
    cs_expect_exact(&c, 0, KILN_I64, 1, o, wm);
    cs_expect_exact(&c, 1, KILN_I64, 1, o, wn);
  }
  cs_end(&c);
  free(x);
}

/* elementwise over 3 x 4099 with a broadcast row and a scalar, then a cast round trip.
 * x * row + 0.5 may be contracted into one fused multiply-add on compiled backends (one
 * rounding instead of two), so its value is held to one ulp of the product and one of the
 * result; the f32 -> f64 -> f32 round trip must give back exactly the bits that went in. */
static void elementwise_large(void) {
  Case c;
  cs_begin(&c, "(x * row + 0.5) -> f64 -> f32 over [3,4099]");
  int64_t n = 4099, xs[2] = {3, 4099}, rs[1] = {4099};
  double *x = dalloc(3 * n), *r = dalloc(n), *w = dalloc(3 * n);
  rnd(x, 3 * n, 13);
  rnd(r, n, 14);
  for (int64_t i = 0; i < 3 * n; i++) w[i] = ou_round_f32(ou_round_f32(x[i] * r[i % n]) + 0.5);
  kiln_tensor xt = cs_in(&c, KILN_F32, 2, xs, x), rt = cs_in(&c, KILN_F32, 1, rs, r), h = -1, m = -1, s = -1;
  kiln_tensor d = -1, y = -1;
  COK(&c, kiln_graph_scalar(c.g, KILN_F32, 0.5, &h));
  COK(&c, kiln_graph_binary(c.g, KILN_MUL, xt, rt, &m));
  COK(&c, kiln_graph_binary(c.g, KILN_ADD, m, h, &s));
  COK(&c, kiln_graph_cast(c.g, s, KILN_F64, &d));
  COK(&c, kiln_graph_cast(c.g, d, KILN_F32, &y));
  kiln_tensor outs[2] = {s, y};
  if (cs_run(&c, 2, outs)) {
    cs_expect_tol(&c, 0, KILN_F32, 2, xs, w, 1.2e-7, 1.2e-7); /* |x * row| <= 1: a product ulp is <= 2^-24 */
    if (cs_check_meta(&c, 1, KILN_F32, 2, xs))
      for (int64_t i = 0; i < 3 * n; i++)
        if (ou_raw(KILN_F32, c.out[1].p, i) != ou_raw(KILN_F32, c.out[0].p, i)) {
          cs_fail(&c, "round trip changed element %lld: %.9g -> %.9g", (long long)i, cs_get(&c, 0, i), cs_get(&c, 1, i));
          break;
        }
  }
  cs_end(&c);
  free(x), free(r), free(w);
}

/* a pointwise chain over a multiple of 4 points past 4096: the 16-byte vector shape of the
 * grid dialects (VEC4), a broadcast row read per lane */
static void elementwise_vec4(void) {
  Case c;
  cs_begin(&c, "relu(x * row + 0.5) over [4,4096] (vector loads and stores)");
  int64_t n = 4096, xs[2] = {4, 4096}, rs[1] = {4096};
  double *x = dalloc(4 * n), *r = dalloc(n), *w = dalloc(4 * n);
  rnd(x, 4 * n, 15);
  rnd(r, n, 16);
  for (int64_t i = 0; i < 4 * n; i++) {
    double v = ou_round_f32(ou_round_f32(x[i] * r[i % n]) + 0.5);
    w[i] = v > 0 ? v : 0;
  }
  kiln_tensor xt = cs_in(&c, KILN_F32, 2, xs, x), rt = cs_in(&c, KILN_F32, 1, rs, r), h = -1, m = -1, s = -1, y = -1;
  COK(&c, kiln_graph_scalar(c.g, KILN_F32, 0.5, &h));
  COK(&c, kiln_graph_binary(c.g, KILN_MUL, xt, rt, &m));
  COK(&c, kiln_graph_binary(c.g, KILN_ADD, m, h, &s));
  COK(&c, kiln_graph_unary(c.g, KILN_RELU, s, &y));
  if (cs_run1(&c, y)) cs_expect_tol(&c, 0, KILN_F32, 2, xs, w, 1.2e-7, 1.2e-7);
  cs_end(&c);
  free(x), free(r), free(w);
}

/* one input feeding several consumers of different kinds, each output checked */
static void shared_input(void) {
  Case c;
  cs_begin(&c, "one input, four consumers (relu, row sum, transpose, slice)");
  int64_t xs[2] = {9, 13};
  double x[117], w0[117], w1[9], w2[117], w3[9];
  rnd(x, 117, 15);
  for (int i = 0; i < 9; i++) {
    double s = 0;
    for (int j = 0; j < 13; j++) {
      w0[i * 13 + j] = x[i * 13 + j] > 0 ? x[i * 13 + j] : 0;
      s += x[i * 13 + j];
      w2[j * 9 + i] = x[i * 13 + j];
    }
    w1[i] = ou_round_f32(s);
    w3[i] = x[i * 13 + 12];
  }
  kiln_tensor xt = cs_in(&c, KILN_F32, 2, xs, x), o[4] = {-1, -1, -1, -1};
  int ax[1] = {1}, perm[2] = {1, 0};
  int64_t b[1] = {-1}, e[1] = {INT64_MAX};
  COK(&c, kiln_graph_unary(c.g, KILN_RELU, xt, &o[0]));
  COK(&c, kiln_graph_reduce(c.g, KILN_REDUCE_SUM, xt, 1, ax, 0, &o[1]));
  COK(&c, kiln_graph_transpose(c.g, xt, perm, &o[2]));
  COK(&c, kiln_graph_slice(c.g, xt, 1, b, e, ax, NULL, &o[3]));
  int64_t s1[1] = {9}, s2[2] = {13, 9}, s3[2] = {9, 1};
  if (cs_run(&c, 4, o)) {
    cs_expect_exact(&c, 0, KILN_F32, 2, xs, w0);
    cs_expect_tol(&c, 1, KILN_F32, 1, s1, w1, 1e-6, 1e-5);
    cs_expect_exact(&c, 2, KILN_F32, 2, s2, w2);
    cs_expect_exact(&c, 3, KILN_F32, 2, s3, w3);
  }
  cs_end(&c);
}

/*
 * Compiled backends dlopen a kernel library built with cc -fopenmp and dlclose it when the
 * program is freed. If that library were the only thing holding libgomp, dlclose would
 * unload libgomp under its live worker threads, and they would crash (seen on cpu before
 * libkiln itself used OpenMP: 4 of 5 runs of this loop died with SIGSEGV). Run in a child
 * process so a regression cannot take the suite down: compile, run and free a
 * 65x70 @ 70x33 matmul program 40 times.
 */
static void gomp_unload_case(void) {
  Case c;
  cs_begin(&c, "free programs whose kernels ran on OpenMP threads, 40 times (child process)");
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    int64_t as[2] = {65, 70}, bs[2] = {70, 33};
    static float a[65 * 70], b[70 * 33], y[65 * 33];
    for (int it = 0; it < 40; it++) {
      kiln_graph *g = NULL;
      kiln_tensor at, bt, yt;
      kiln_program *p = NULL;
      kiln_options o = kiln_options_default();
      o.backend = ou_backend();
      if (kiln_graph_create(&g) || kiln_graph_input(g, "a", KILN_F32, 2, as, &at) ||
          kiln_graph_input(g, "b", KILN_F32, 2, bs, &bt) || kiln_graph_matmul(g, at, bt, &yt) ||
          kiln_graph_output(g, yt, "y") || kiln_program_compile(g, &o, &p) ||
          kiln_program_run(p, (const void *[]){a, b}, (void *[]){y}))
        _exit(3);
      kiln_program_free(p);
      kiln_graph_free(g);
    }
    _exit(0);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) cs_fail(&c, "fork/wait failed");
  else if (WIFSIGNALED(status)) cs_fail(&c, "child killed by signal %d", WTERMSIG(status));
  else if (WEXITSTATUS(status) != 0) cs_fail(&c, "child exited %d", WEXITSTATUS(status));
  cs_end(&c);
}

/* ---- excess precision (kiln_options.excess_precision) ----
 * bf16 values in [1, 2): a product is exact in f32 (16 bits), a product plus a value in [1, 2)
 * too (17 bits), and a sum of 64 products (22 bits), whatever the order. So each output has
 * exact bits either way: rounded after every operation (ref; the default) or once, where the
 * kernel stores it (excess precision on a generating backend). An explicit Cast rounds in both. */
enum { EP_R = 16, EP_C = 64 };

static void ep_inputs(double *x, double *a, unsigned long long seed) {
  for (int i = 0; i < EP_R * EP_C; i++) {
    x[i] = ou_as(KILN_BF16, 1.5 + 0.5 * test_rand(&seed));
    a[i] = ou_as(KILN_BF16, 1.5 + 0.5 * test_rand(&seed));
  }
}

/* which: 0 x*a + b, 1 the row sums of x*a, 2 f32(bf16(2u)) + 0.5 of an f32 u, 3 (x*a) @ I */
static void excess_case(int which, int excess) {
  static const char *const what[4] = { "x*a + b", "row sums of x*a", "an explicit Cast's rounding",
                                       "(x*a) @ I, the product's factor computed" };
  setenv("KILN_EXCESS_PRECISION", excess ? "1" : "0", 1);
  bool once = ou_excess();
  Case c;
  cs_begin(&c, "bf16 %s, excess precision %d", what[which], excess);
  int64_t xs[2] = { EP_R, EP_C }, rs[1] = { EP_R }, is[2] = { EP_C, EP_C };
  double x[EP_R * EP_C], a[EP_R * EP_C], b[EP_R * EP_C], w[EP_R * EP_C], other[EP_R * EP_C];
  double *eye = dalloc(EP_C * EP_C);
  ep_inputs(x, a, 31 + (unsigned long long)which);
  ep_inputs(b, w, 41);
  int n = which == 1 ? EP_R : EP_R * EP_C, differ = 0;
  unsigned long long seed = 51;
  if (which == 1) /* x = 1 + 2^-7 and a = 1 + m 2^-7 (m in 40..63): x*a = 1 + (m + 1) 2^-7 + m 2^-14
                   * rounds down by m 2^-14, so 64 roundings move a row's sum by about 0.2, where
                   * bf16's step near 90 is 0.5 */
    for (int i = 0; i < EP_R * EP_C; i++) x[i] = 1 + 0x1p-7, a[i] = 1 + (40 + (int)(12 + 11.99 * test_rand(&seed))) * 0x1p-7;
  if (which == 2) /* u in [1, 2) with 20-bit mantissas: 2u is not a bf16 value */
    for (int i = 0; i < n; i++) x[i] = 1 + ldexp((double)((i * 40503) % (1 << 20)), -20);
  kiln_tensor xt = cs_in(&c, which == 2 ? KILN_F32 : KILN_BF16, 2, xs, x), y = -1, t = -1, u = -1;
  if (which == 2) {
    double two = 2, half = 0.5;
    kiln_tensor tw = cs_const(&c, KILN_F32, 0, NULL, &two), hf = cs_const(&c, KILN_F32, 0, NULL, &half);
    COK(&c, kiln_graph_binary(c.g, KILN_MUL, xt, tw, &t));
    COK(&c, kiln_graph_cast(c.g, t, KILN_BF16, &u));
    COK(&c, kiln_graph_cast(c.g, u, KILN_F32, &t));
    COK(&c, kiln_graph_binary(c.g, KILN_ADD, t, hf, &y));
    for (int i = 0; i < n; i++) w[i] = other[i] = ou_round_bf16(2 * x[i]) + 0.5, differ += w[i] != 2 * x[i] + 0.5;
  } else {
    kiln_tensor at = cs_in(&c, KILN_BF16, 2, xs, a);
    COK(&c, kiln_graph_binary(c.g, KILN_MUL, xt, at, &t));
    if (which == 0) {
      kiln_tensor bt = cs_in(&c, KILN_BF16, 2, xs, b);
      COK(&c, kiln_graph_binary(c.g, KILN_ADD, t, bt, &y));
      for (int i = 0; i < n; i++) {
        double once_v = ou_round_bf16(x[i] * a[i] + b[i]), each_v = ou_round_bf16(ou_round_bf16(x[i] * a[i]) + b[i]);
        w[i] = once ? once_v : each_v, other[i] = once ? each_v : once_v;
      }
    } else if (which == 1) {
      int ax[1] = { 1 };
      COK(&c, kiln_graph_reduce(c.g, KILN_REDUCE_SUM, t, 1, ax, 0, &y));
      for (int r = 0; r < EP_R; r++) {
        double s1 = 0, se = 0;
        for (int j = 0; j < EP_C; j++) s1 += x[r * EP_C + j] * a[r * EP_C + j], se += ou_round_bf16(x[r * EP_C + j] * a[r * EP_C + j]);
        w[r] = ou_round_bf16(once ? s1 : se), other[r] = ou_round_bf16(once ? se : s1);
      }
    } else {
      /* each output is one factor's value times 1: the value the factor was rounded to (a
       * tensor-core stash that truncated an unrounded f32 would show here), or, where the
       * backend multiplies it unrounded, its one rounding at the store: the same bits */
      for (int i = 0; i < EP_C; i++) eye[i * EP_C + i] = 1;
      kiln_tensor it = cs_in(&c, KILN_BF16, 2, is, eye);
      COK(&c, kiln_graph_matmul(c.g, t, it, &y));
      for (int i = 0; i < n; i++) w[i] = other[i] = ou_round_bf16(x[i] * a[i]), differ += w[i] != x[i] * a[i];
    }
  }
  if (which < 2)
    for (int i = 0; i < n; i++) differ += w[i] != other[i];
  /* the inputs must tell the two roundings apart, or the case shows nothing */
  if (differ == 0) cs_fail(&c, "no element where one rounding and a rounding after each operation differ");
  if (cs_run1(&c, y)) cs_expect_exact(&c, 0, which == 2 ? KILN_F32 : KILN_BF16, which == 1 ? 1 : 2, which == 1 ? rs : xs, w);
  cs_end(&c);
  free(eye);
  unsetenv("KILN_EXCESS_PRECISION");
}

static void excess_precision(void) {
  for (int which = 0; which < 4; which++)
    for (int excess = 0; excess < 2; excess++) excess_case(which, excess);
}

int main(void) {
  if (!ou_backend_available()) return 0;
  /* cpu only: CUDA cannot be used in a child forked after the parent set it up */
  if (strcmp(ou_backend(), "cpu") == 0) gomp_unload_case();
  movement_chain();
  concat_of_slices();
  conv_pad_identity();
  matmul_large();
  matmul_batched_large();
  half_long_reductions();
  reduce_chain_large();
  arg_large();
  elementwise_large();
  elementwise_vec4();
  shared_input();
  excess_precision();
  OU_MAIN_END("chains");
}
