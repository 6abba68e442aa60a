/*
 * Binary ops through the public API: arithmetic on every numeric dtype (ints exact, with
 * truncating division, Python-style mod and C-style fmod), comparisons to bool on all 13
 * dtypes, logic on bool, shifts on ints, IEEE special values, NumPy broadcasting (computed
 * here with an explicit index map), rank-0 and zero-size operands, literal coercion, and
 * the errors for mismatched shapes and dtypes.
 */
#include "ops_util.h"

/* Python / ONNX fmod=0: the result takes the divisor's sign. */
static double py_mod(double a, double b) {
  double r = fmod(a, b);
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
static double trunc_div(double a, double b) { return trunc(a / b); }

typedef struct BinOp {
  kiln_binary_op op;
  const char *name;
  int ints;     /* accepted on integer dtypes */
  int cmp;      /* result is bool */
} BinOp;

static const BinOp arith[] = {
  {KILN_ADD, "add", 1, 0}, {KILN_SUB, "sub", 1, 0}, {KILN_MUL, "mul", 1, 0}, {KILN_DIV, "div", 1, 0},
  {KILN_POW, "pow", 1, 0}, {KILN_MAX, "max", 1, 0}, {KILN_MIN, "min", 1, 0}, {KILN_MOD, "mod", 1, 0},
  {KILN_FMOD, "fmod", 1, 0},
};
static const BinOp cmps[] = {
  {KILN_EQ, "eq", 1, 1}, {KILN_NE, "ne", 1, 1}, {KILN_LT, "lt", 1, 1},
  {KILN_LE, "le", 1, 1}, {KILN_GT, "gt", 1, 1}, {KILN_GE, "ge", 1, 1},
};

static double apply(kiln_binary_op op, double a, double b, int is_int) {
  switch (op) {
  case KILN_ADD: return a + b;
  case KILN_SUB: return a - b;
  case KILN_MUL: return a * b;
  case KILN_DIV: return is_int ? trunc_div(a, b) : a / b;
  case KILN_POW: return pow(a, b);
  case KILN_MAX: return isnan(a) || isnan(b) ? NAN : a > b ? a : b;
  case KILN_MIN: return isnan(a) || isnan(b) ? NAN : a < b ? a : b;
  case KILN_MOD: return py_mod(a, b);
  case KILN_FMOD: return fmod(a, b);
  case KILN_EQ: return a == b;
  case KILN_NE: return a != b;
  case KILN_LT: return a < b;
  case KILN_LE: return a <= b;
  case KILN_GT: return a > b;
  case KILN_GE: return a >= b;
  case KILN_AND: return (a != 0) && (b != 0);
  case KILN_OR: return (a != 0) || (b != 0);
  case KILN_XOR: return (a != 0) != (b != 0);
  default: return NAN;
  }
}

#define NV 8
/* Operand tables small enough that every result fits in i8 / u8; signs mixed for mod. */
static const double fa[NV] = {7.5, -7.5, 7.5, -7.5, 6, 0, 12, -3};
static const double fb[NV] = {2, 2, -2, -2, 0.25, 5, 7, 4};
static const double sa[NV] = {7, -7, 7, -7, 6, 0, 12, -3};
static const double sb[NV] = {2, 2, -2, -2, 3, 5, 7, 4};
static const double ua[NV] = {7, 9, 13, 1, 6, 20, 12, 4};
static const double ub[NV] = {2, 4, 5, 1, 3, 7, 7, 4};
/* pow: small exponents so ints stay in range (3^4 = 81, (-3)^3 = -27) */
static const double pa_s[NV] = {2, -3, 3, 0, 1, -1, 5, -2};
static const double pb_s[NV] = {3, 3, 4, 2, 7, 5, 2, 0};
static const double pa_u[NV] = {2, 3, 3, 0, 1, 10, 5, 2};
static const double pb_u[NV] = {3, 3, 4, 2, 7, 2, 2, 0};

static void run_pair(const BinOp *b, kiln_dtype t, const double *a, const double *bb) {
  int64_t shape[2] = {2, 4};
  Case c;
  cs_begin(&c, "%s %s", b->name, ou_dt(t));
  kiln_tensor x = cs_in(&c, t, 2, shape, a), y = cs_in(&c, t, 2, shape, bb), z = -1;
  COK(&c, kiln_graph_binary(c.g, b->op, x, y, &z));
  double want[NV];
  int is_int = !ou_is_float(t);
  for (int i = 0; i < NV; i++) {
    double r = apply(b->op, ou_as(t, a[i]), ou_as(t, bb[i]), is_int);
    want[i] = b->cmp || is_int ? r : ou_round_to(t, r);
  }
  if (cs_run1(&c, z)) {
    if (b->cmp) cs_expect_exact(&c, 0, KILN_BOOL, 2, shape, want);
    else if (is_int) cs_expect_exact(&c, 0, t, 2, shape, want);
    else cs_expect(&c, 0, t, 2, shape, want);
  }
  cs_end(&c);
}

static void dtype_cases(void) {
  for (size_t k = 0; k < sizeof arith / sizeof arith[0]; k++) {
    const BinOp *b = &arith[k];
    for (int d = 0; d < 12; d++) {
      kiln_dtype t = ou_all_dtypes[d];
      if (ou_is_float(t)) run_pair(b, t, fa, fb);
      else if (b->op == KILN_POW) run_pair(b, t, ou_is_unsigned(t) ? pa_u : pa_s, ou_is_unsigned(t) ? pb_u : pb_s);
      else run_pair(b, t, ou_is_unsigned(t) ? ua : sa, ou_is_unsigned(t) ? ub : sb);
    }
  }
  /* comparisons on every dtype: operands with equal, smaller and larger elements */
  static const double ca[NV] = {1, 2, 3, 0, 5, 7, 0, 1}, cb[NV] = {1, 3, 2, 0, 4, 7, 1, 0};
  static const double fca[NV] = {1.5, -2, 3, -0.0, 5, 7, 0.25, 1}, fcb[NV] = {1.5, 3, -2, 0.0, 4, 7, 1, 0.5};
  for (size_t k = 0; k < sizeof cmps / sizeof cmps[0]; k++)
    for (int d = 0; d < 13; d++) {
      kiln_dtype t = ou_all_dtypes[d];
      if (t == KILN_BOOL && cmps[k].op != KILN_EQ && cmps[k].op != KILN_NE) continue;
      run_pair(&cmps[k], t, ou_is_float(t) ? fca : ca, ou_is_float(t) ? fcb : cb);
    }
}

/* Int division truncates toward zero; mod follows the divisor, fmod the dividend. */
static void int_division_cases(void) {
  int64_t shape[1] = {6};
  double a[6] = {7, -7, 7, -7, 1, -1}, b[6] = {2, 2, -2, -2, 3, 3};
  double wdiv[6] = {3, -3, -3, 3, 0, 0}, wmod[6] = {1, 1, -1, -1, 1, 2}, wfmod[6] = {1, -1, 1, -1, 1, -1};
  static const kiln_dtype ts[4] = {KILN_I64, KILN_I32, KILN_I16, KILN_I8};
  for (int d = 0; d < 4; d++) {
    Case c;
    cs_begin(&c, "div/mod/fmod hand values %s", ou_dt(ts[d]));
    kiln_tensor x = cs_in(&c, ts[d], 1, shape, a), y = cs_in(&c, ts[d], 1, shape, b), o[3] = {-1, -1, -1};
    COK(&c, kiln_graph_binary(c.g, KILN_DIV, x, y, &o[0]));
    COK(&c, kiln_graph_binary(c.g, KILN_MOD, x, y, &o[1]));
    COK(&c, kiln_graph_binary(c.g, KILN_FMOD, x, y, &o[2]));
    if (cs_run(&c, 3, o)) {
      cs_expect_exact(&c, 0, ts[d], 1, shape, wdiv);
      cs_expect_exact(&c, 1, ts[d], 1, shape, wmod);
      cs_expect_exact(&c, 2, ts[d], 1, shape, wfmod);
    }
    cs_end(&c);
  }
  {
    Case c;
    cs_begin(&c, "mod/fmod floats hand values f32");
    double fa2[4] = {-7.5, 7.5, 5.25, -5.25}, fb2[4] = {2, -2, 0.5, 0.5};
    double wm[4] = {0.5, -0.5, 0.25, 0.25}, wf[4] = {-1.5, 1.5, 0.25, -0.25};
    int64_t s4[1] = {4};
    kiln_tensor x = cs_in(&c, KILN_F32, 1, s4, fa2), y = cs_in(&c, KILN_F32, 1, s4, fb2), o[2] = {-1, -1};
    COK(&c, kiln_graph_binary(c.g, KILN_MOD, x, y, &o[0]));
    COK(&c, kiln_graph_binary(c.g, KILN_FMOD, x, y, &o[1]));
    if (cs_run(&c, 2, o)) {
      cs_expect_exact(&c, 0, KILN_F32, 1, s4, wm);
      cs_expect_exact(&c, 1, KILN_F32, 1, s4, wf);
    }
    cs_end(&c);
  }
  {
    /* i64 beyond 2^53: exact, not through double */
    Case c;
    cs_begin(&c, "i64 add/div/mod exact beyond 2^53");
    int64_t s2[1] = {2};
    uint64_t ra[2] = {(uint64_t)(INT64_C(1) << 62) + 1, (uint64_t)(-(INT64_C(1) << 60) - 3)};
    uint64_t rb[2] = {3, 7};
    kiln_tensor x = cs_in_raw(&c, KILN_I64, 1, s2, ra), y = cs_in_raw(&c, KILN_I64, 1, s2, rb), o[3] = {-1, -1, -1};
    COK(&c, kiln_graph_binary(c.g, KILN_ADD, x, y, &o[0]));
    COK(&c, kiln_graph_binary(c.g, KILN_DIV, x, y, &o[1]));
    COK(&c, kiln_graph_binary(c.g, KILN_MOD, x, y, &o[2]));
    int64_t a0 = (INT64_C(1) << 62) + 1, a1 = -(INT64_C(1) << 60) - 3;
    uint64_t wadd[2] = {(uint64_t)(a0 + 3), (uint64_t)(a1 + 7)};
    uint64_t wdiv2[2] = {(uint64_t)(a0 / 3), (uint64_t)(a1 / 7)};
    int64_t m1 = a1 % 7;
    if (m1 < 0) m1 += 7;
    uint64_t wmod2[2] = {(uint64_t)(a0 % 3), (uint64_t)m1};
    if (cs_run(&c, 3, o)) {
      cs_expect_raw(&c, 0, KILN_I64, 1, s2, wadd);
      cs_expect_raw(&c, 1, KILN_I64, 1, s2, wdiv2);
      cs_expect_raw(&c, 2, KILN_I64, 1, s2, wmod2);
    }
    cs_end(&c);
  }
  {
    /* u64 above 2^63 compares and divides as unsigned */
    Case c;
    cs_begin(&c, "u64 above 2^63");
    int64_t s2[1] = {2};
    uint64_t ra[2] = {UINT64_MAX, UINT64_C(1) << 63}, rb[2] = {2, 1};
    kiln_tensor x = cs_in_raw(&c, KILN_U64, 1, s2, ra), y = cs_in_raw(&c, KILN_U64, 1, s2, rb), o[2] = {-1, -1};
    COK(&c, kiln_graph_binary(c.g, KILN_DIV, x, y, &o[0]));
    COK(&c, kiln_graph_binary(c.g, KILN_GT, x, y, &o[1]));
    uint64_t wd[2] = {UINT64_MAX / 2, UINT64_C(1) << 63}, wg[2] = {1, 1};
    if (cs_run(&c, 2, o)) {
      cs_expect_raw(&c, 0, KILN_U64, 1, s2, wd);
      cs_expect_raw(&c, 1, KILN_BOOL, 1, s2, wg);
    }
    cs_end(&c);
  }
}

/* IEEE specials: NaN propagates through arithmetic and max/min, compares false (ne true);
 * division by zero gives ±inf / NaN. */
static void special_cases(void) {
  int64_t shape[1] = {6};
  double a[6] = {NAN, 1, -1, 0, INFINITY, 2}, b[6] = {1, 0, 0, 0, INFINITY, NAN};
  static const kiln_binary_op ops[] = {KILN_ADD, KILN_SUB, KILN_MUL, KILN_DIV, KILN_MAX, KILN_MIN,
                                       KILN_EQ,  KILN_NE,  KILN_LT,  KILN_GE,  KILN_POW};
  for (int d = 0; d < 4; d++) {
    kiln_dtype t = ou_float_dtypes[d];
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
      Case c;
      cs_begin(&c, "special values op %d %s", (int)ops[k], ou_dt(t));
      kiln_tensor x = cs_in(&c, t, 1, shape, a), y = cs_in(&c, t, 1, shape, b), z = -1;
      COK(&c, kiln_graph_binary(c.g, ops[k], x, y, &z));
      int cmp = ops[k] >= KILN_EQ && ops[k] <= KILN_GE;
      double want[6];
      for (int i = 0; i < 6; i++) want[i] = apply(ops[k], a[i], b[i], 0);
      if (cs_run1(&c, z)) cs_expect(&c, 0, cmp ? KILN_BOOL : t, 1, shape, want);
      cs_end(&c);
    }
  }
}

static void logic_cases(void) {
  int64_t s4[1] = {4};
  double a[4] = {0, 0, 1, 1}, b[4] = {0, 1, 0, 1};
  static const kiln_binary_op ops[3] = {KILN_AND, KILN_OR, KILN_XOR};
  static const char *const nm[3] = {"and", "or", "xor"};
  for (int k = 0; k < 3; k++) {
    Case c;
    cs_begin(&c, "%s bool truth table", nm[k]);
    kiln_tensor x = cs_in(&c, KILN_BOOL, 1, s4, a), y = cs_in(&c, KILN_BOOL, 1, s4, b), z = -1;
    COK(&c, kiln_graph_binary(c.g, ops[k], x, y, &z));
    double want[4];
    for (int i = 0; i < 4; i++) want[i] = apply(ops[k], a[i], b[i], 1);
    if (cs_run1(&c, z)) cs_expect_exact(&c, 0, KILN_BOOL, 1, s4, want);
    cs_end(&c);
  }
  {
    /* broadcast [2,1] x [3] */
    Case c;
    cs_begin(&c, "and bool broadcast [2,1]x[3]");
    int64_t sa[2] = {2, 1}, sb[1] = {3}, so[2] = {2, 3};
    double va[2] = {1, 0}, vb[3] = {1, 0, 1}, w[6] = {1, 0, 1, 0, 0, 0};
    kiln_tensor x = cs_in(&c, KILN_BOOL, 2, sa, va), y = cs_in(&c, KILN_BOOL, 1, sb, vb), z = -1;
    COK(&c, kiln_graph_binary(c.g, KILN_AND, x, y, &z));
    if (cs_run1(&c, z)) cs_expect_exact(&c, 0, KILN_BOOL, 2, so, w);
    cs_end(&c);
  }
}

static void shift_cases(void) {
  int64_t s4[1] = {4};
  {
    Case c;
    cs_begin(&c, "shl/shr u8");
    double a[4] = {1, 0x80, 0xff, 6}, b[4] = {3, 7, 1, 0};
    double wl[4] = {8, 0, 0xfe, 6}, wr[4] = {0, 1, 0x7f, 6};
    kiln_tensor x = cs_in(&c, KILN_U8, 1, s4, a), y = cs_in(&c, KILN_U8, 1, s4, b), o[2] = {-1, -1};
    COK(&c, kiln_graph_binary(c.g, KILN_SHL, x, y, &o[0]));
    COK(&c, kiln_graph_binary(c.g, KILN_SHR, x, y, &o[1]));
    if (cs_run(&c, 2, o)) {
      cs_expect_exact(&c, 0, KILN_U8, 1, s4, wl);
      cs_expect_exact(&c, 1, KILN_U8, 1, s4, wr);
    }
    cs_end(&c);
  }
  {
    Case c;
    cs_begin(&c, "shl/shr u64 high bit");
    uint64_t a[4] = {1, UINT64_C(1) << 63, UINT64_MAX, 12345}, b[4] = {63, 63, 4, 0};
    uint64_t wl[4] = {UINT64_C(1) << 63, 0, UINT64_MAX << 4, 12345}, wr[4] = {0, 1, UINT64_MAX >> 4, 12345};
    kiln_tensor x = cs_in_raw(&c, KILN_U64, 1, s4, a), y = cs_in_raw(&c, KILN_U64, 1, s4, b), o[2] = {-1, -1};
    COK(&c, kiln_graph_binary(c.g, KILN_SHL, x, y, &o[0]));
    COK(&c, kiln_graph_binary(c.g, KILN_SHR, x, y, &o[1]));
    if (cs_run(&c, 2, o)) {
      cs_expect_raw(&c, 0, KILN_U64, 1, s4, wl);
      cs_expect_raw(&c, 1, KILN_U64, 1, s4, wr);
    }
    cs_end(&c);
  }
  static const kiln_dtype ts[6] = {KILN_I64, KILN_I32, KILN_I16, KILN_I8, KILN_U16, KILN_U32};
  for (int d = 0; d < 6; d++) {
    Case c;
    cs_begin(&c, "shl/shr %s small positive values", ou_dt(ts[d]));
    double a[4] = {5, 20, 1, 3}, b[4] = {2, 2, 6, 0}, wl[4] = {20, 80, 64, 3}, wr[4] = {1, 5, 0, 3};
    kiln_tensor x = cs_in(&c, ts[d], 1, s4, a), y = cs_in(&c, ts[d], 1, s4, b), o[2] = {-1, -1};
    COK(&c, kiln_graph_binary(c.g, KILN_SHL, x, y, &o[0]));
    COK(&c, kiln_graph_binary(c.g, KILN_SHR, x, y, &o[1]));
    if (cs_run(&c, 2, o)) {
      cs_expect_exact(&c, 0, ts[d], 1, s4, wl);
      cs_expect_exact(&c, 1, ts[d], 1, s4, wr);
    }
    cs_end(&c);
  }
  {
    /* signed shr is arithmetic (numpy right_shift): -8 >> 1 = -4, -1 >> 5 = -1 */
    Case c;
    cs_begin(&c, "shr i32 negative is arithmetic");
    int64_t s2[1] = {2};
    double a[2] = {-8, -1}, b[2] = {1, 5}, w[2] = {-4, -1};
    kiln_tensor x = cs_in(&c, KILN_I32, 1, s2, a), y = cs_in(&c, KILN_I32, 1, s2, b), z = -1;
    COK(&c, kiln_graph_binary(c.g, KILN_SHR, x, y, &z));
    if (cs_run1(&c, z)) cs_expect_exact(&c, 0, KILN_I32, 1, s2, w);
    cs_end(&c);
  }
}

/* a (ra, sa) op b (rb, sb), expected from an explicit broadcast index map. */
static void bcast_case(const char *what, kiln_binary_op op, int ra, const int64_t *sa, int rb, const int64_t *sb,
                       int ro, const int64_t *so) {
  Case c;
  cs_begin(&c, "broadcast %s", what);
  int64_t na = ou_numel(ra, sa), nb = ou_numel(rb, sb), no = ou_numel(ro, so);
  double va[64], vb[64], want[64];
  for (int64_t i = 0; i < na; i++) va[i] = (double)(i * 3 % 7) - 2.5;
  for (int64_t i = 0; i < nb; i++) vb[i] = (double)(i % 5) * 0.5 + 1;
  kiln_tensor x = cs_in(&c, KILN_F32, ra, sa, va), y = cs_in(&c, KILN_F32, rb, sb, vb), z = -1;
  COK(&c, kiln_graph_binary(c.g, op, x, y, &z));
  for (int64_t i = 0; i < no; i++) {
    int64_t idx[KILN_MAX_RANK];
    ou_unravel(i, ro, so, idx);
    want[i] = ou_round_f32(apply(op, va[ou_bcast_offset(ro, idx, ra, sa)], vb[ou_bcast_offset(ro, idx, rb, sb)], 0));
  }
  if (cs_run1(&c, z)) cs_expect(&c, 0, KILN_F32, ro, so, want);
  cs_end(&c);
}

static void broadcast_cases(void) {
  { int64_t a[2] = {3, 1}, b[2] = {1, 4}, o[2] = {3, 4}; bcast_case("[3,1]x[1,4] sub", KILN_SUB, 2, a, 2, b, 2, o); }
  { int64_t a[2] = {1, 4}, b[2] = {3, 1}, o[2] = {3, 4}; bcast_case("[1,4]x[3,1] div", KILN_DIV, 2, a, 2, b, 2, o); }
  { int64_t b[3] = {2, 3, 4}, o[3] = {2, 3, 4}; bcast_case("rank-0 x [2,3,4] sub", KILN_SUB, 0, NULL, 3, b, 3, o); }
  { int64_t a[3] = {2, 3, 4}, o[3] = {2, 3, 4}; bcast_case("[2,3,4] x rank-0 pow", KILN_POW, 3, a, 0, NULL, 3, o); }
  { int64_t a[3] = {2, 3, 4}, b[1] = {4}, o[3] = {2, 3, 4}; bcast_case("[2,3,4]x[4] max", KILN_MAX, 3, a, 1, b, 3, o); }
  { int64_t a[3] = {2, 1, 4}, b[2] = {3, 1}, o[3] = {2, 3, 4}; bcast_case("[2,1,4]x[3,1] mul", KILN_MUL, 3, a, 2, b, 3, o); }
  { int64_t a[4] = {2, 1, 3, 1}, b[3] = {1, 1, 5}, o[4] = {2, 1, 3, 5}; bcast_case("[2,1,3,1]x[1,1,5] mod", KILN_MOD, 4, a, 3, b, 4, o); }
  { int64_t a[2] = {0, 3}, b[2] = {1, 3}, o[2] = {0, 3}; bcast_case("zero-size [0,3]x[1,3]", KILN_ADD, 2, a, 2, b, 2, o); }
  { int64_t a[2] = {2, 0}, b[2] = {2, 1}, o[2] = {2, 0}; bcast_case("zero-size [2,0]x[2,1]", KILN_ADD, 2, a, 2, b, 2, o); }
  { int64_t a[1] = {0}, o[1] = {0}; bcast_case("zero-size [0] x rank-0", KILN_MUL, 1, a, 0, NULL, 1, o); }
  { bcast_case("rank-0 x rank-0", KILN_SUB, 0, NULL, 0, NULL, 0, NULL); }
  {
    /* comparisons broadcast too, and give bool */
    Case c;
    cs_begin(&c, "lt broadcast [3,1]x[1,2] -> bool");
    int64_t sa[2] = {3, 1}, sb[2] = {1, 2}, so[2] = {3, 2};
    double va[3] = {0, 1, 2}, vb[2] = {1, 2}, w[6] = {1, 1, 0, 1, 0, 0};
    kiln_tensor x = cs_in(&c, KILN_I32, 2, sa, va), y = cs_in(&c, KILN_I32, 2, sb, vb), z = -1;
    COK(&c, kiln_graph_binary(c.g, KILN_LT, x, y, &z));
    if (cs_run1(&c, z)) cs_expect_exact(&c, 0, KILN_BOOL, 2, so, w);
    cs_end(&c);
  }
}

/* max(x, 0) with an integer literal: relu spelled with a rank-0 constant. */
static void literal_cases(void) {
  int64_t s4[1] = {4};
  double v[4] = {-1.5, 0, 2.5, -0.25}, w[4] = {0, 0, 2.5, 0};
  {
    Case c;
    cs_begin(&c, "max(x f32, scalar f32 0)");
    kiln_tensor x = cs_in(&c, KILN_F32, 1, s4, v), zero = -1, y = -1;
    COK(&c, kiln_graph_scalar(c.g, KILN_F32, 0, &zero));
    COK(&c, kiln_graph_binary(c.g, KILN_MAX, x, zero, &y));
    if (cs_run1(&c, y)) cs_expect_exact(&c, 0, KILN_F32, 1, s4, w);
    cs_end(&c);
  }
  {
    /* an integer rank-0 literal is coerced to the other operand's float dtype */
    Case c;
    cs_begin(&c, "max(x f32, scalar i64 0) coerces the literal");
    kiln_tensor x = cs_in(&c, KILN_F32, 1, s4, v), zero = -1, y = -1;
    COK(&c, kiln_graph_scalar(c.g, KILN_I64, 0, &zero));
    COK(&c, kiln_graph_binary(c.g, KILN_MAX, x, zero, &y));
    if (cs_run1(&c, y)) cs_expect_exact(&c, 0, KILN_F32, 1, s4, w);
    cs_end(&c);
  }
  {
    Case c;
    cs_begin(&c, "scalar i32 literal on the left of an f16 tensor: 1 - x");
    kiln_tensor x = cs_in(&c, KILN_F16, 1, s4, v), one = -1, y = -1;
    COK(&c, kiln_graph_scalar(c.g, KILN_I32, 1, &one));
    COK(&c, kiln_graph_binary(c.g, KILN_SUB, one, x, &y));
    double w2[4] = {2.5, 1, -1.5, 1.25};
    if (cs_run1(&c, y)) cs_expect_exact(&c, 0, KILN_F16, 1, s4, w2);
    cs_end(&c);
  }
  {
    /* the scalar holds the value converted to its dtype: 2.7 as i32 is 2 */
    Case c;
    cs_begin(&c, "scalar value converted to its dtype");
    kiln_tensor s = -1, x = cs_in(&c, KILN_I32, 1, s4, v + 0), y = -1;
    COK(&c, kiln_graph_scalar(c.g, KILN_I32, 2.7, &s));
    COK(&c, kiln_graph_binary(c.g, KILN_MUL, x, s, &y));
    double w3[4] = {-2, 0, 4, 0}; /* inputs -1.5,0,2.5,-0.25 stored as i32 truncate to -1,0,2,0 */
    if (cs_run1(&c, y)) cs_expect_exact(&c, 0, KILN_I32, 1, s4, w3);
    cs_end(&c);
  }
}

static void reject_cases(void) {
  int64_t s3[1] = {3}, s4[1] = {4}, s23[2] = {2, 3}, s32[2] = {3, 2};
  {
    Case c;
    cs_begin(&c, "reject mismatched shapes");
    kiln_tensor a = cs_in(&c, KILN_F32, 1, s3, NULL), b = cs_in(&c, KILN_F32, 1, s4, NULL), z = -1;
    kiln_tensor p = cs_in(&c, KILN_F32, 2, s23, NULL), q = cs_in(&c, KILN_F32, 2, s32, NULL);
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_binary(c.g, KILN_ADD, a, b, &z));
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_binary(c.g, KILN_MUL, p, q, &z));
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_binary(c.g, KILN_EQ, p, b, &z)); /* [2,3] vs [4] */
    cs_end(&c);
  }
  {
    Case c;
    cs_begin(&c, "reject mismatched dtypes");
    kiln_tensor a = cs_in(&c, KILN_F32, 1, s3, NULL), b = cs_in(&c, KILN_F64, 1, s3, NULL);
    kiln_tensor i = cs_in(&c, KILN_I32, 1, s3, NULL), u = cs_in(&c, KILN_U32, 1, s3, NULL), z = -1;
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_binary(c.g, KILN_ADD, a, b, &z));
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_binary(c.g, KILN_LT, a, i, &z));
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_binary(c.g, KILN_SUB, i, u, &z));
    cs_end(&c);
  }
  {
    Case c;
    cs_begin(&c, "reject ops on dtypes they do not take");
    kiln_tensor f = cs_in(&c, KILN_F32, 1, s3, NULL), f2 = cs_in(&c, KILN_F32, 1, s3, NULL);
    kiln_tensor bl = cs_in(&c, KILN_BOOL, 1, s3, NULL), bl2 = cs_in(&c, KILN_BOOL, 1, s3, NULL), z = -1;
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_binary(c.g, KILN_AND, f, f2, &z));
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_binary(c.g, KILN_XOR, f, f2, &z));
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_binary(c.g, KILN_SHL, f, f2, &z));
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_binary(c.g, KILN_SHR, bl, bl2, &z));
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_binary(c.g, KILN_ADD, bl, bl2, &z));
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_binary(c.g, KILN_DIV, bl, bl2, &z));
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_binary(c.g, (kiln_binary_op)KILN_BINARY_COUNT, f, f2, &z));
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_binary(c.g, KILN_ADD, f, 999, &z));
    /* still usable */
    COK(&c, kiln_graph_binary(c.g, KILN_OR, bl, bl2, &z));
    double w[3] = {0, 0, 0};
    if (cs_run1(&c, z)) cs_expect_exact(&c, 0, KILN_BOOL, 1, s3, w);
    cs_end(&c);
  }
  {
    /* broadcast of sizes whose product overflows int64 */
    Case c;
    cs_begin(&c, "reject broadcast whose size overflows");
    int64_t sa[2] = {INT64_C(1) << 32, 1}, sb[2] = {1, INT64_C(1) << 32};
    kiln_tensor a = -1, b = -1, z = -1;
    COK(&c, kiln_graph_input(c.g, "a", KILN_F32, 2, sa, &a));
    COK(&c, kiln_graph_input(c.g, "b", KILN_F32, 2, sb, &b));
    if (!c.build_failed) CERR2(&c, KILN_ERR_NO_MEMORY, KILN_ERR_INVALID_ARG, kiln_graph_binary(c.g, KILN_ADD, a, b, &z));
    cs_end(&c);
  }
}

int main(void) {
  if (!ou_backend_available()) return 0;
  dtype_cases();
  int_division_cases();
  special_cases();
  logic_cases();
  shift_cases();
  broadcast_cases();
  literal_cases();
  reject_cases();
  OU_MAIN_END("binary");
}
