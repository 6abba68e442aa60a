/*
 * Movement ops through the public API: reshape (with -1), transpose (every permutation of
 * rank 3, one of rank 4), slice (ONNX: clamping, negative indices and steps, empty
 * results), concat, pad (constant / reflect / edge, negative pads crop), expand, gather
 * (any axis, negative indices, rank-0/1/2 indices, i32 and i64, indices as inputs and as
 * constants) and tile. Every expected tensor is built here by walking the output index
 * and computing the input index it reads by the op's definition; inputs hold distinct
 * values (their flat index plus an offset), so a wrong read shows up. Bad arguments
 * (shapes, axes, permutations, overflowing sizes) must fail with a message.
 */
#include "ops_util.h"

#define MAXN 512

/* distinct values; f32 holds them exactly */
static void iota(double *v, int64_t n, double off) {
  for (int64_t i = 0; i < n; i++) v[i] = (double)i + off;
}
/* values of dtype t that differ between neighbours: distinct for wide types, a
 * non-periodic 0/1 pattern for bool, kept in range for 8-bit ints */
static void fill(kiln_dtype t, double *v, int64_t n, double off) {
  for (int64_t i = 0; i < n; i++) {
    double x = (double)i + off;
    if (t == KILN_BOOL) x = ((i * 5 + (int64_t)off) % 3) != 0;
    else if (ou_bits(t) == 8) x = fmod(x, 97);
    v[i] = ou_as(t, x);
  }
}
static int64_t flat(int rank, const int64_t *shape, const int64_t *idx) {
  int64_t f = 0;
  for (int d = 0; d < rank; d++) f = f * shape[d] + idx[d];
  return f;
}

/* ---- reshape ---- */

static void reshape_case(kiln_dtype t, int ri, const int64_t *si, int rs, const int64_t *target, int ro, const int64_t *so) {
  Case c;
  cs_begin(&c, "reshape %s rank %d -> rank %d", ou_dt(t), ri, rs);
  double v[MAXN];
  int64_t n = ou_numel(ri, si);
  fill(t, v, n, 1);
  kiln_tensor x = cs_in(&c, t, ri, si, v), y = -1;
  COK(&c, kiln_graph_reshape(c.g, x, rs, target, &y));
  if (cs_run1(&c, y)) cs_expect_exact(&c, 0, t, ro, so, v);
  cs_end(&c);
}

static void reshape_cases(void) {
  int64_t s234[3] = {2, 3, 4}, t1[2] = {4, -1}, o1[2] = {4, 6}, t2[4] = {-1, 2, 1, 3}, o2[4] = {4, 2, 1, 3};
  int64_t t3[1] = {-1}, o3[1] = {24}, t4[2] = {1, 1}, s6[1] = {6}, t5[3] = {3, 1, 2};
  reshape_case(KILN_F32, 3, s234, 2, t1, 2, o1);
  reshape_case(KILN_I64, 3, s234, 4, t2, 4, o2);
  reshape_case(KILN_F16, 3, s234, 1, t3, 1, o3);
  reshape_case(KILN_U8, 0, NULL, 2, t4, 2, t4);  /* rank 0 -> [1,1] */
  reshape_case(KILN_BOOL, 2, t4, 0, NULL, 0, NULL); /* [1,1] -> rank 0 */
  reshape_case(KILN_F64, 1, s6, 3, t5, 3, t5);
  {
    int64_t s0[2] = {2, 0}, t0[3] = {0, 5, 7};
    reshape_case(KILN_F32, 2, s0, 3, t0, 3, t0);
  }
  {
    /* reshape of a transposed tensor reads in the transposed order */
    Case c;
    cs_begin(&c, "reshape(transpose(x))");
    int64_t s23[2] = {2, 3}, t6[1] = {6};
    double v[6] = {0, 1, 2, 3, 4, 5}, w[6] = {0, 3, 1, 4, 2, 5};
    int perm[2] = {1, 0};
    kiln_tensor x = cs_in(&c, KILN_F32, 2, s23, v), tr = -1, y = -1;
    COK(&c, kiln_graph_transpose(c.g, x, perm, &tr));
    COK(&c, kiln_graph_reshape(c.g, tr, 1, t6, &y));
    if (cs_run1(&c, y)) cs_expect_exact(&c, 0, KILN_F32, 1, t6, w);
    cs_end(&c);
  }
  {
    Case c;
    cs_begin(&c, "reshape errors");
    int64_t b1[2] = {5, -1}, b2[2] = {-1, -1}, b3[2] = {5, 5}, b4[2] = {-2, -12}, b5[3] = {2, 3, 4};
    kiln_tensor x = cs_in(&c, KILN_F32, 3, s234, NULL), y = -1;
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_reshape(c.g, x, 2, b1, &y)); /* 24 not divisible by 5 */
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_reshape(c.g, x, 2, b2, &y)); /* two -1 */
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_reshape(c.g, x, 2, b3, &y)); /* 25 != 24 */
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_reshape(c.g, x, 2, b4, &y)); /* negative dims */
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_reshape(c.g, x, KILN_MAX_RANK + 1, b5, &y));
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_reshape(c.g, x, -1, b5, &y));
    cs_end(&c);
  }
}

/* ---- transpose ---- */

static void transpose_case(kiln_dtype t, int r, const int64_t *si, const int *perm) {
  Case c;
  cs_begin(&c, "transpose %s rank %d perm %d%d%d%d", ou_dt(t), r, perm[0], perm[1], r > 2 ? perm[2] : 0,
           r > 3 ? perm[3] : 0);
  double v[MAXN], w[MAXN];
  int64_t n = ou_numel(r, si), so[KILN_MAX_RANK];
  fill(t, v, n, 0);
  for (int d = 0; d < r; d++) so[d] = si[perm[d]];
  for (int64_t i = 0; i < n; i++) {
    int64_t oi[KILN_MAX_RANK], ii[KILN_MAX_RANK];
    ou_unravel(i, r, so, oi);
    for (int d = 0; d < r; d++) ii[perm[d]] = oi[d];
    w[i] = v[flat(r, si, ii)];
  }
  kiln_tensor x = cs_in(&c, t, r, si, v), y = -1;
  COK(&c, kiln_graph_transpose(c.g, x, perm, &y));
  if (cs_run1(&c, y)) cs_expect_exact(&c, 0, t, r, so, w);
  cs_end(&c);
}

static void transpose_cases(void) {
  static const int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
  int64_t s[3] = {2, 3, 4};
  for (int p = 0; p < 6; p++) transpose_case(KILN_F32, 3, s, perms[p]);
  int64_t s4[4] = {2, 3, 1, 5};
  int p4[4] = {3, 1, 0, 2};
  transpose_case(KILN_I32, 4, s4, p4);
  transpose_case(KILN_F16, 3, s, perms[4]);
  transpose_case(KILN_I64, 3, s, perms[3]);
  int64_t s2[2] = {3, 5};
  int p2[2] = {1, 0};
  transpose_case(KILN_U16, 2, s2, p2);
  int64_t s0[3] = {2, 0, 3};
  transpose_case(KILN_F32, 3, s0, perms[5]);
  {
    Case c;
    cs_begin(&c, "transpose errors");
    kiln_tensor x = cs_in(&c, KILN_F32, 3, s, NULL), y = -1;
    int dup[3] = {0, 0, 1}, big[3] = {0, 1, 3}, neg[3] = {-1, 0, 1};
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_transpose(c.g, x, dup, &y));
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_transpose(c.g, x, big, &y));
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_transpose(c.g, x, neg, &y));
    cs_end(&c);
  }
}

/* ---- slice: ONNX normalisation written out from the operator spec ---- */

static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* start and count of axis dim under (start, end, step) */
static void onnx_slice_axis(int64_t dim, int64_t start, int64_t end, int64_t step, int64_t *st, int64_t *cnt) {
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  if (step > 0) {
    start = clamp64(start, 0, dim);
    end = clamp64(end, 0, dim);
    *cnt = end > start ? (end - start - 1) / step + 1 : 0; /* no overflow for huge steps */
  } else {
    start = clamp64(start, 0, dim - 1);
    end = clamp64(end, -1, dim - 1);
    *cnt = start > end ? (start - end - 1) / (-step) + 1 : 0;
  }
  *st = start;
}

static void slice_case(const char *what, int r, const int64_t *si, int n, const int64_t *starts, const int64_t *ends,
                       const int *axes, const int64_t *steps) {
  Case c;
  cs_begin(&c, "slice %s", what);
  int64_t st[KILN_MAX_RANK], sp[KILN_MAX_RANK], so[KILN_MAX_RANK];
  for (int d = 0; d < r; d++) st[d] = 0, sp[d] = 1, so[d] = si[d];
  for (int k = 0; k < n; k++) {
    int a = axes ? axes[k] : k;
    if (a < 0) a += r;
    sp[a] = steps ? steps[k] : 1;
    onnx_slice_axis(si[a], starts[k], ends[k], sp[a], &st[a], &so[a]);
  }
  double v[MAXN], w[MAXN];
  int64_t ni = ou_numel(r, si), no = ou_numel(r, so);
  iota(v, ni, 0.5);
  for (int64_t i = 0; i < no; i++) {
    int64_t oi[KILN_MAX_RANK], ii[KILN_MAX_RANK];
    ou_unravel(i, r, so, oi);
    for (int d = 0; d < r; d++) ii[d] = st[d] + oi[d] * sp[d];
    w[i] = v[flat(r, si, ii)];
  }
  kiln_tensor x = cs_in(&c, KILN_F32, r, si, v), y = -1;
  COK(&c, kiln_graph_slice(c.g, x, n, starts, ends, axes, steps, &y));
  if (cs_run1(&c, y)) cs_expect_exact(&c, 0, KILN_F32, r, so, w);
  cs_end(&c);
}

static void slice_cases(void) {
  int64_t s56[2] = {5, 6}, s345[3] = {3, 4, 5};
  { int64_t b[2] = {1, -4}, e[2] = {4, 100}; slice_case("basic, negative start, clamped end", 2, s56, 2, b, e, NULL, NULL); }
  { int64_t b[1] = {-1}, e[1] = {-100}, p[1] = {-2}; int ax[1] = {1};
    slice_case("reverse every other on axis 1", 2, s56, 1, b, e, ax, p); }
  { int64_t b[1] = {INT64_MAX}, e[1] = {INT64_MIN}, p[1] = {-1}; int ax[1] = {0};
    slice_case("full reverse with INT64 extremes", 2, s56, 1, b, e, ax, p); }
  { int64_t b[2] = {0, 1}, e[2] = {INT64_MAX, 5}, p[2] = {3, 2}; int ax[2] = {-1, 0};
    slice_case("negative axis, steps 3 and 2", 3, s345, 2, b, e, ax, p); }
  { int64_t b[1] = {3}, e[1] = {1}; int ax[1] = {2}; slice_case("empty: start after end", 3, s345, 1, b, e, ax, NULL); }
  { int64_t b[1] = {1}, e[1] = {3}, p[1] = {-1}; int ax[1] = {1};
    slice_case("empty: negative step, start before end", 3, s345, 1, b, e, ax, p); }
  { int64_t b[1] = {-100}, e[1] = {-99}; int ax[1] = {0}; slice_case("both below range -> empty", 2, s56, 1, b, e, ax, NULL); }
  { int64_t b[3] = {2, 3, 4}, e[3] = {0, 0, 0}, p[3] = {-1, -2, -3};
    slice_case("negative steps on all axes, exclusive ends", 3, s345, 3, b, e, NULL, p); }
  { int64_t b[1] = {1}, e[1] = {2}; int ax[1] = {0}; slice_case("single row", 2, s56, 1, b, e, ax, NULL); }
  { int64_t b[2] = {0, -1}, e[2] = {5, INT64_MIN}, p[2] = {10, -10};
    slice_case("steps longer than the dims", 2, s56, 2, b, e, NULL, p); }
  { int64_t b[1] = {-2}, e[1] = {INT64_MAX}, p[1] = {INT64_MAX}; int ax[1] = {-1};
    slice_case("step INT64_MAX", 3, s345, 1, b, e, ax, p); }
  {
    Case c;
    cs_begin(&c, "slice errors");
    kiln_tensor x = cs_in(&c, KILN_F32, 2, s56, NULL), y = -1;
    int64_t b[3] = {0, 0, 0}, e[3] = {2, 2, 2}, z[1] = {0};
    int ax_big[1] = {2}, ax_dup[2] = {1, -1};
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_slice(c.g, x, 1, b, e, NULL, z, &y));       /* step 0 */
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_slice(c.g, x, 1, b, e, ax_big, NULL, &y));  /* axis 2 of rank 2 */
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_slice(c.g, x, 2, b, e, ax_dup, NULL, &y));  /* axis twice */
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_slice(c.g, x, 3, b, e, NULL, NULL, &y));    /* more than rank */
    cs_end(&c);
  }
}

/* ---- concat ---- */

static void concat_case(const char *what, kiln_dtype t, int n, int r, int64_t shapes[][KILN_MAX_RANK], int axis) {
  Case c;
  cs_begin(&c, "concat %s %s", what, ou_dt(t));
  int a = axis < 0 ? axis + r : axis;
  int64_t so[KILN_MAX_RANK];
  for (int d = 0; d < r; d++) so[d] = shapes[0][d];
  so[a] = 0;
  for (int k = 0; k < n; k++) so[a] += shapes[k][a];
  double v[4][MAXN], w[MAXN];
  kiln_tensor xs[4];
  for (int k = 0; k < n; k++) {
    int64_t nk = ou_numel(r, shapes[k]);
    fill(t, v[k], nk, 100.0 * (k + 1) + k);
    xs[k] = cs_in(&c, t, r, shapes[k], v[k]);
  }
  int64_t no = ou_numel(r, so);
  for (int64_t i = 0; i < no; i++) {
    int64_t oi[KILN_MAX_RANK];
    ou_unravel(i, r, so, oi);
    int k = 0;
    while (oi[a] >= shapes[k][a]) oi[a] -= shapes[k][a], k++;
    w[i] = v[k][flat(r, shapes[k], oi)];
  }
  kiln_tensor y = -1;
  COK(&c, kiln_graph_concat(c.g, n, xs, axis, &y));
  if (cs_run1(&c, y)) cs_expect_exact(&c, 0, t, r, so, w);
  cs_end(&c);
}

static void concat_cases(void) {
  { int64_t s[3][KILN_MAX_RANK] = {{2, 3}, {1, 3}, {4, 3}}; concat_case("axis 0 of three", KILN_F32, 3, 2, s, 0); }
  { int64_t s[2][KILN_MAX_RANK] = {{2, 3, 2}, {2, 1, 2}}; concat_case("axis 1", KILN_I32, 2, 3, s, 1); }
  { int64_t s[2][KILN_MAX_RANK] = {{2, 3, 2}, {2, 3, 5}}; concat_case("axis -1", KILN_F16, 2, 3, s, -1); }
  { int64_t s[3][KILN_MAX_RANK] = {{2, 3}, {0, 3}, {1, 3}}; concat_case("empty operand", KILN_F64, 3, 2, s, 0); }
  { int64_t s[2][KILN_MAX_RANK] = {{2, 0}, {2, 0}}; concat_case("all empty", KILN_F32, 2, 2, s, 1); }
  { int64_t s[1][KILN_MAX_RANK] = {{3, 2}}; concat_case("single input", KILN_U8, 1, 2, s, 1); }
  { int64_t s[2][KILN_MAX_RANK] = {{3}, {2}}; concat_case("rank 1 bool", KILN_BOOL, 2, 1, s, 0); }
  {
    Case c;
    cs_begin(&c, "concat errors");
    int64_t a[2] = {2, 3}, b[2] = {2, 4}, r1[1] = {6};
    kiln_tensor x = cs_in(&c, KILN_F32, 2, a, NULL), y = cs_in(&c, KILN_F32, 2, b, NULL);
    kiln_tensor z = cs_in(&c, KILN_F64, 2, a, NULL), q = cs_in(&c, KILN_F32, 1, r1, NULL), o = -1;
    kiln_tensor xy[2] = {x, y}, xz[2] = {x, z}, xq[2] = {x, q}, xx[2] = {x, x};
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_concat(c.g, 2, xy, 0, &o)); /* 3 vs 4 off-axis */
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_concat(c.g, 2, xz, 0, &o)); /* dtypes */
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_concat(c.g, 2, xq, 0, &o)); /* ranks */
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_concat(c.g, 2, xx, 2, &o)); /* axis out of range */
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_concat(c.g, 2, xx, -3, &o));
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_concat(c.g, 0, xx, 0, &o)); /* nothing to concat */
    COK(&c, kiln_graph_concat(c.g, 2, xy, 1, &o));                         /* [2,7] is fine */
    cs_end(&c);
  }
}

/* ---- pad ---- */

static int64_t pad_src(int64_t i, int64_t n, kiln_pad_mode m) {
  if (i >= 0 && i < n) return i;
  if (m == KILN_PAD_CONSTANT) return -1;
  if (m == KILN_PAD_EDGE) return i < 0 ? 0 : n - 1;
  while (i < 0 || i >= n) i = i < 0 ? -i : 2 * (n - 1) - i; /* reflect without repeating the edge */
  return i;
}

static void pad_case(const char *what, kiln_dtype t, int r, const int64_t *si, const int64_t *pads, kiln_pad_mode m,
                     double value) {
  Case c;
  cs_begin(&c, "pad %s %s", what, ou_dt(t));
  int64_t so[KILN_MAX_RANK];
  for (int d = 0; d < r; d++) so[d] = si[d] + pads[d] + pads[r + d];
  double v[MAXN], w[MAXN];
  int64_t ni = ou_numel(r, si), no = ou_numel(r, so);
  fill(t, v, ni, 1);
  for (int64_t i = 0; i < no; i++) {
    int64_t oi[KILN_MAX_RANK], ii[KILN_MAX_RANK];
    int inside = 1;
    ou_unravel(i, r, so, oi);
    for (int d = 0; d < r; d++) {
      ii[d] = pad_src(oi[d] - pads[d], si[d], m);
      if (ii[d] < 0) inside = 0;
    }
    w[i] = inside ? v[flat(r, si, ii)] : ou_as(t, value);
  }
  kiln_tensor x = cs_in(&c, t, r, si, v), y = -1;
  COK(&c, kiln_graph_pad(c.g, x, pads, m, value, &y));
  if (cs_run1(&c, y)) cs_expect_exact(&c, 0, t, r, so, w);
  cs_end(&c);
}

static void pad_cases(void) {
  int64_t s34[2] = {3, 4}, s5[1] = {5}, s234[3] = {2, 3, 4};
  { int64_t p[4] = {1, 2, 0, 1}; pad_case("constant 1.5", KILN_F32, 2, s34, p, KILN_PAD_CONSTANT, 1.5); }
  { int64_t p[4] = {1, 2, 0, 1}; pad_case("constant -7 on i32", KILN_I32, 2, s34, p, KILN_PAD_CONSTANT, -7); }
  { int64_t p[4] = {2, 3, 2, 1}; pad_case("reflect", KILN_F32, 2, s34, p, KILN_PAD_REFLECT, 0); }
  { int64_t p[4] = {2, 3, 2, 1}; pad_case("edge", KILN_F16, 2, s34, p, KILN_PAD_EDGE, 0); }
  { int64_t p[2] = {4, 4}; pad_case("reflect up to dim-1", KILN_F64, 1, s5, p, KILN_PAD_REFLECT, 0); }
  { int64_t p[2] = {-1, -2}; pad_case("negative pads crop", KILN_F32, 1, s5, p, KILN_PAD_CONSTANT, 9); }
  { int64_t p[4] = {-1, 2, 1, -2}; pad_case("crop one side, pad the other", KILN_I64, 2, s34, p, KILN_PAD_CONSTANT, 3); }
  { int64_t p[4] = {-1, 2, 1, -2}; pad_case("crop and edge", KILN_F32, 2, s34, p, KILN_PAD_EDGE, 0); }
  { int64_t p[6] = {0, 1, 0, 1, 0, 2}; pad_case("rank 3 constant bool", KILN_BOOL, 3, s234, p, KILN_PAD_CONSTANT, 1); }
  { int64_t p[2] = {0, 0}; pad_case("no-op", KILN_U8, 1, s5, p, KILN_PAD_REFLECT, 0); }
  { int64_t s0[2] = {0, 3}, p[4] = {1, 0, 1, 0}; pad_case("constant pad of an empty tensor", KILN_F32, 2, s0, p, KILN_PAD_CONSTANT, 2); }
  {
    Case c;
    cs_begin(&c, "pad errors");
    kiln_tensor x = cs_in(&c, KILN_F32, 1, s5, NULL), y = -1;
    int64_t crop_all[2] = {-3, -3}, huge[2] = {INT64_MAX - 2, 0};
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_pad(c.g, x, crop_all, KILN_PAD_CONSTANT, 0, &y)); /* size -1 */
    CERR2(&c, KILN_ERR_INVALID_ARG, KILN_ERR_NO_MEMORY, kiln_graph_pad(c.g, x, huge, KILN_PAD_CONSTANT, 0, &y));
    int64_t zero[2] = {0, 0};
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_pad(c.g, x, zero, (kiln_pad_mode)7, 0, &y));
    cs_end(&c);
  }
}

/* ---- expand ---- */

static void expand_case(kiln_dtype t, int ri, const int64_t *si, int rt, const int64_t *target, int ro,
                        const int64_t *so) {
  Case c;
  cs_begin(&c, "expand %s rank %d -> rank %d", ou_dt(t), ri, ro);
  double v[MAXN], w[MAXN];
  int64_t ni = ou_numel(ri, si), no = ou_numel(ro, so);
  fill(t, v, ni, 2);
  for (int64_t i = 0; i < no; i++) {
    int64_t oi[KILN_MAX_RANK];
    ou_unravel(i, ro, so, oi);
    w[i] = v[ou_bcast_offset(ro, oi, ri, si)];
  }
  kiln_tensor x = cs_in(&c, t, ri, si, v), y = -1;
  COK(&c, kiln_graph_expand(c.g, x, rt, target, &y));
  if (cs_run1(&c, y)) cs_expect_exact(&c, 0, t, ro, so, w);
  cs_end(&c);
}

static void expand_cases(void) {
  { int64_t s[2] = {3, 1}, tg[3] = {2, 3, 4}; expand_case(KILN_F32, 2, s, 3, tg, 3, tg); }
  { int64_t s[2] = {3, 1}, tg[2] = {1, 4}, o[2] = {3, 4}; expand_case(KILN_I16, 2, s, 2, tg, 2, o); } /* ONNX: broadcast of both */
  { int64_t tg[2] = {2, 2}; expand_case(KILN_F64, 0, NULL, 2, tg, 2, tg); }
  { int64_t s[1] = {4}, tg[1] = {1}, o[1] = {4}; expand_case(KILN_BOOL, 1, s, 1, tg, 1, o); }
  { int64_t s[2] = {1, 3}, tg[3] = {2, 0, 3}; expand_case(KILN_F32, 2, s, 3, tg, 3, tg); }
  {
    Case c;
    cs_begin(&c, "expand errors");
    int64_t s[1] = {3}, bad[1] = {4}, huge[3] = {INT64_C(1) << 40, INT64_C(1) << 40, 3}, negs[2] = {-1, 3};
    kiln_tensor x = cs_in(&c, KILN_F32, 1, s, NULL), y = -1;
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_expand(c.g, x, 1, bad, &y));
    CERR2(&c, KILN_ERR_INVALID_ARG, KILN_ERR_NO_MEMORY, kiln_graph_expand(c.g, x, 3, huge, &y));
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_expand(c.g, x, 2, negs, &y));
    cs_end(&c);
  }
}

/* ---- gather ---- */

static void gather_case(const char *what, kiln_dtype t, int rd, const int64_t *sd, kiln_dtype it, int ri,
                        const int64_t *si, const double *idx, int axis, int as_const) {
  Case c;
  cs_begin(&c, "gather %s (%s data, %s indices%s)", what, ou_dt(t), ou_dt(it), as_const ? ", constant" : "");
  int a = axis < 0 ? axis + rd : axis;
  int ro = rd - 1 + ri;
  int64_t so[KILN_MAX_RANK];
  for (int d = 0; d < a; d++) so[d] = sd[d];
  for (int d = 0; d < ri; d++) so[a + d] = si[d];
  for (int d = a + 1; d < rd; d++) so[ri + d - 1] = sd[d];
  double v[MAXN], w[MAXN];
  int64_t nd = ou_numel(rd, sd), no = ou_numel(ro, so);
  fill(t, v, nd, 10);
  for (int64_t i = 0; i < no; i++) {
    int64_t oi[KILN_MAX_RANK], di[KILN_MAX_RANK];
    ou_unravel(i, ro, so, oi);
    for (int d = 0; d < a; d++) di[d] = oi[d];
    int64_t j = (int64_t)idx[flat(ri, si, oi + a)];
    di[a] = j < 0 ? j + sd[a] : j;
    for (int d = a + 1; d < rd; d++) di[d] = oi[ri + d - 1];
    w[i] = v[flat(rd, sd, di)];
  }
  kiln_tensor x = cs_in(&c, t, rd, sd, v), ix = -1, y = -1;
  ix = as_const ? cs_const(&c, it, ri, si, idx) : cs_in(&c, it, ri, si, idx);
  COK(&c, kiln_graph_gather(c.g, x, ix, axis, &y));
  if (cs_run1(&c, y)) cs_expect_exact(&c, 0, t, ro, so, w);
  cs_end(&c);
}

static void gather_cases(void) {
  int64_t s34[2] = {3, 4}, s234[3] = {2, 3, 4};
  for (int k = 0; k < 2; k++) {
    kiln_dtype it = k ? KILN_I32 : KILN_I64;
    for (int cst = 0; cst < 2; cst++) {
      { int64_t si[1] = {3}; double ix[3] = {2, -1, 0};
        gather_case("axis 0, negative index", KILN_F32, 2, s34, it, 1, si, ix, 0, cst); }
      { int64_t si[2] = {2, 2}; double ix[4] = {0, 3, -4, 1};
        gather_case("axis 1, rank-2 indices", KILN_F32, 2, s34, it, 2, si, ix, 1, cst); }
      { double ix[1] = {-2};
        gather_case("axis 1 of rank 3, rank-0 index", KILN_I64, 3, s234, it, 0, NULL, ix, 1, cst); }
      { int64_t si[2] = {1, 5}; double ix[5] = {3, 3, -1, 0, 1};
        gather_case("axis -1 of rank 3, repeats", KILN_F16, 3, s234, it, 2, si, ix, -1, cst); }
    }
  }
  { int64_t si[1] = {0}; double ix[1] = {0}; gather_case("empty indices", KILN_F32, 2, s34, KILN_I64, 1, si, ix, 0, 0); }
  { int64_t si[1] = {4}; double ix[4] = {1, 0, 1, 1}; gather_case("bool data", KILN_BOOL, 2, s34, KILN_I32, 1, si, ix, 0, 0); }
  {
    Case c;
    cs_begin(&c, "gather errors");
    int64_t si[1] = {2};
    kiln_tensor x = cs_in(&c, KILN_F32, 2, s34, NULL), fi = cs_in(&c, KILN_F32, 1, si, NULL);
    kiln_tensor ui = cs_in(&c, KILN_U8, 1, si, NULL), ii = cs_in(&c, KILN_I64, 1, si, NULL), y = -1;
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_gather(c.g, x, fi, 0, &y)); /* float indices */
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_gather(c.g, x, ui, 0, &y)); /* only i32/i64 */
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_gather(c.g, x, ii, 2, &y)); /* axis out of range */
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_gather(c.g, x, ii, -3, &y));
    cs_end(&c);
  }
}

/* ---- tile ---- */

static void tile_case(kiln_dtype t, int r, const int64_t *si, const int64_t *rep) {
  Case c;
  cs_begin(&c, "tile %s rank %d", ou_dt(t), r);
  int64_t so[KILN_MAX_RANK];
  for (int d = 0; d < r; d++) so[d] = si[d] * rep[d];
  double v[MAXN], w[MAXN];
  int64_t ni = ou_numel(r, si), no = ou_numel(r, so);
  fill(t, v, ni, 3);
  for (int64_t i = 0; i < no; i++) {
    int64_t oi[KILN_MAX_RANK];
    ou_unravel(i, r, so, oi);
    for (int d = 0; d < r; d++) oi[d] %= si[d];
    w[i] = v[flat(r, si, oi)];
  }
  kiln_tensor x = cs_in(&c, t, r, si, v), y = -1;
  COK(&c, kiln_graph_tile(c.g, x, rep, &y));
  if (cs_run1(&c, y)) cs_expect_exact(&c, 0, t, r, so, w);
  cs_end(&c);
}

static void tile_cases(void) {
  { int64_t s[2] = {2, 3}, r[2] = {2, 3}; tile_case(KILN_F32, 2, s, r); }
  { int64_t s[3] = {2, 1, 3}, r[3] = {1, 4, 1}; tile_case(KILN_I8, 3, s, r); }
  { int64_t s[1] = {4}, r[1] = {1}; tile_case(KILN_F64, 1, s, r); }
  { int64_t s[2] = {2, 3}, r[2] = {0, 2}; tile_case(KILN_F32, 2, s, r); } /* zero repeats: empty */
  tile_case(KILN_F32, 0, NULL, NULL);                                     /* rank 0: itself */
  {
    Case c;
    cs_begin(&c, "tile errors");
    int64_t s[2] = {2, 3}, neg[2] = {1, -1}, huge[2] = {INT64_C(1) << 62, 4};
    kiln_tensor x = cs_in(&c, KILN_F32, 2, s, NULL), y = -1;
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_tile(c.g, x, neg, &y));
    CERR2(&c, KILN_ERR_INVALID_ARG, KILN_ERR_NO_MEMORY, kiln_graph_tile(c.g, x, huge, &y));
    cs_end(&c);
  }
}

/* Leaves with overflowing or negative sizes fail before any op sees them. */
static void leaf_cases(void) {
  Case c;
  cs_begin(&c, "leaf shape errors");
  int64_t huge[3] = {INT64_C(1) << 31, INT64_C(1) << 31, INT64_C(1) << 31}, neg[2] = {2, -3};
  int64_t big[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  kiln_tensor x = -1;
  CERR2(&c, KILN_ERR_INVALID_ARG, KILN_ERR_NO_MEMORY, kiln_graph_input(c.g, "h", KILN_F32, 3, huge, &x));
  CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_input(c.g, "n", KILN_F32, 2, neg, &x));
  CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_input(c.g, "r", KILN_F32, 9, big, &x));
  CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_input(c.g, "d", KILN_DTYPE_COUNT, 2, big, &x));
  cs_end(&c);
}

int main(void) {
  if (!ou_backend_available()) return 0;
  reshape_cases();
  transpose_cases();
  slice_cases();
  concat_cases();
  pad_cases();
  expand_cases();
  gather_cases();
  tile_cases();
  leaf_cases();
  OU_MAIN_END("movement");
}
