/*
 * Unary ops through the public API, on the backend from $KILN_TEST_BACKEND (default ref).
 * Each op runs on every float dtype (expected = the op in double on the input rounded to
 * the dtype, rounded back), on the integer dtypes it accepts, on special values (NaN, ±inf,
 * -0.0, with exact sign bits where IEEE fixes them), on a rank-0 scalar and on an empty
 * tensor; ops that cannot take a dtype must refuse it with a message.
 */
#include "ops_util.h"

static double f_neg(double x) { return -x; }
static double f_abs(double x) { return fabs(x); }
static double f_exp(double x) { return exp(x); }
static double f_log(double x) { return log(x); }
static double f_sqrt(double x) { return sqrt(x); }
static double f_rsqrt(double x) { return 1.0 / sqrt(x); }
static double f_recip(double x) { return 1.0 / x; }
static double f_tanh(double x) { return tanh(x); }
static double f_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
static double f_relu(double x) { return isnan(x) ? x : x > 0 ? x : 0.0; }
static double f_gelu_erf(double x) { return 0.5 * x * (1.0 + erf(x / sqrt(2.0))); }
static double f_gelu_tanh(double x) {
  const double k = sqrt(2.0 / 3.14159265358979323846);
  return 0.5 * x * (1.0 + tanh(k * (x + 0.044715 * x * x * x)));
}
static double f_erf(double x) { return erf(x); }
static double f_sin(double x) { return sin(x); }
static double f_cos(double x) { return cos(x); }
static double f_floor(double x) { return floor(x); }
static double f_ceil(double x) { return ceil(x); }
/* Half to even, written out rather than trusting the rounding mode. */
static double f_round(double x) {
  if (isnan(x) || isinf(x)) return x;
  double r = floor(x), d = x - r;
  if (d > 0.5 || (d == 0.5 && fmod(r, 2.0) != 0)) r += 1.0;
  return r == 0 ? copysign(0.0, x) : r;
}
static double f_sign(double x) { return isnan(x) ? x : x > 0 ? 1.0 : x < 0 ? -1.0 : 0.0; }
static double f_isnan(double x) { return isnan(x) ? 1 : 0; }
static double f_isinf(double x) { return isinf(x) ? 1 : 0; }

enum { ACC_FLOAT = 1, ACC_SINT = 2, ACC_UINT = 4, ACC_BOOL = 8, OUT_BOOL = 16 };

typedef struct UnOp {
  kiln_unary_op op;
  const char *name;
  double (*f)(double);
  int acc;
} UnOp;

static const UnOp ops[] = {
  {KILN_NEG, "neg", f_neg, ACC_FLOAT | ACC_SINT},
  {KILN_ABS, "abs", f_abs, ACC_FLOAT | ACC_SINT | ACC_UINT},
  {KILN_EXP, "exp", f_exp, ACC_FLOAT},
  {KILN_LOG, "log", f_log, ACC_FLOAT},
  {KILN_SQRT, "sqrt", f_sqrt, ACC_FLOAT},
  {KILN_RSQRT, "rsqrt", f_rsqrt, ACC_FLOAT},
  {KILN_RECIPROCAL, "reciprocal", f_recip, ACC_FLOAT},
  {KILN_TANH, "tanh", f_tanh, ACC_FLOAT},
  {KILN_SIGMOID, "sigmoid", f_sigmoid, ACC_FLOAT},
  {KILN_RELU, "relu", f_relu, ACC_FLOAT | ACC_SINT},
  {KILN_GELU_ERF, "gelu_erf", f_gelu_erf, ACC_FLOAT},
  {KILN_GELU_TANH, "gelu_tanh", f_gelu_tanh, ACC_FLOAT},
  {KILN_ERF, "erf", f_erf, ACC_FLOAT},
  {KILN_SIN, "sin", f_sin, ACC_FLOAT},
  {KILN_COS, "cos", f_cos, ACC_FLOAT},
  {KILN_FLOOR, "floor", f_floor, ACC_FLOAT},
  {KILN_CEIL, "ceil", f_ceil, ACC_FLOAT},
  {KILN_ROUND, "round", f_round, ACC_FLOAT},
  {KILN_SIGN, "sign", f_sign, ACC_FLOAT | ACC_SINT | ACC_UINT},
  {KILN_ISNAN, "isnan", f_isnan, ACC_FLOAT | OUT_BOOL},
  {KILN_ISINF, "isinf", f_isinf, ACC_FLOAT | OUT_BOOL},
};
#define N_OPS ((int)(sizeof ops / sizeof ops[0]))

/* Finite inputs, including the round-half-to-even ties and values every half holds exactly. */
static const double xs[12] = {-3.5, -2.5, -1.5, -0.5, 0.0, 0.25, 0.5, 0.75, 1.5, 2.5, 3.75, 10.0};

static void expect_op(Case *c, const UnOp *u, kiln_dtype t, int rank, const int64_t *shape, const double *in, int64_t n) {
  double want[16];
  kiln_dtype ot = (u->acc & OUT_BOOL) ? KILN_BOOL : t;
  for (int64_t i = 0; i < n; i++) {
    double v = u->f(ou_round_to(t, in[i]));
    want[i] = ot == KILN_BOOL ? v : ou_round_to(t, v);
  }
  cs_expect(c, 0, ot, rank, shape, want);
}

static void float_cases(const UnOp *u) {
  int64_t shape[2] = {3, 4};
  for (int d = 0; d < 4; d++) {
    kiln_dtype t = ou_float_dtypes[d];
    Case c;
    cs_begin(&c, "%s %s [3,4]", u->name, ou_dt(t));
    kiln_tensor x = cs_in(&c, t, 2, shape, xs), y = -1;
    COK(&c, kiln_graph_unary(c.g, u->op, x, &y));
    if (cs_run1(&c, y)) expect_op(&c, u, t, 2, shape, xs, 12);
    cs_end(&c);
  }
}

/* NaN, ±inf and ±0 on every float dtype. */
static void special_cases(const UnOp *u) {
  static const double sp[5] = {NAN, INFINITY, -INFINITY, -0.0, 0.0};
  int64_t shape[1] = {5};
  for (int d = 0; d < 4; d++) {
    kiln_dtype t = ou_float_dtypes[d];
    Case c;
    cs_begin(&c, "%s %s special values", u->name, ou_dt(t));
    kiln_tensor x = cs_in(&c, t, 1, shape, sp), y = -1;
    COK(&c, kiln_graph_unary(c.g, u->op, x, &y));
    if (cs_run1(&c, y)) expect_op(&c, u, t, 1, shape, sp, 5);
    cs_end(&c);
  }
}

/* Results beyond a half's range overflow to inf or underflow to (sub)normals and zero. */
static void half_range_cases(void) {
  static const kiln_unary_op uops[3] = {KILN_EXP, KILN_RECIPROCAL, KILN_SIGMOID};
  double (*const fs[3])(double) = {f_exp, f_recip, f_sigmoid};
  double v[5] = {12, -20, 11, 1e-5, -1e-5};
  int64_t shape[1] = {5};
  for (int d = 2; d < 4; d++)
    for (int k = 0; k < 3; k++) {
      kiln_dtype t = ou_float_dtypes[d];
      Case c;
      cs_begin(&c, "op %d %s beyond the half range", (int)uops[k], ou_dt(t));
      kiln_tensor x = cs_in(&c, t, 1, shape, v), y = -1;
      COK(&c, kiln_graph_unary(c.g, uops[k], x, &y));
      double w[5];
      for (int i = 0; i < 5; i++) w[i] = ou_round_to(t, fs[k](ou_round_to(t, v[i])));
      if (cs_run1(&c, y)) cs_expect(&c, 0, t, 1, shape, w);
      cs_end(&c);
    }
}

/* Where IEEE fixes the sign of a zero result, the f32 bits must match exactly. */
static void signed_zero_cases(void) {
  static const struct { kiln_unary_op op; const char *name; float x, want; } zs[] = {
    {KILN_NEG, "neg", 0.0f, -0.0f},    {KILN_NEG, "neg", -0.0f, 0.0f},    {KILN_ABS, "abs", -0.0f, 0.0f},
    {KILN_FLOOR, "floor", -0.0f, -0.0f}, {KILN_CEIL, "ceil", -0.5f, -0.0f}, {KILN_ROUND, "round", -0.5f, -0.0f},
    {KILN_ROUND, "round", 0.5f, 0.0f}, {KILN_SQRT, "sqrt", -0.0f, -0.0f}, {KILN_RECIPROCAL, "reciprocal", -0.0f, -INFINITY},
    {KILN_SIN, "sin", -0.0f, -0.0f},   {KILN_TANH, "tanh", -0.0f, -0.0f}, {KILN_ERF, "erf", -0.0f, -0.0f},
  };
  int64_t shape[1] = {1};
  for (size_t i = 0; i < sizeof zs / sizeof zs[0]; i++) {
    Case c;
    cs_begin(&c, "%s(%g) keeps the IEEE sign of zero (f32)", zs[i].name, (double)zs[i].x);
    double x = zs[i].x;
    kiln_tensor xt = cs_in(&c, KILN_F32, 1, shape, &x), y = -1;
    COK(&c, kiln_graph_unary(c.g, zs[i].op, xt, &y));
    uint32_t bits;
    memcpy(&bits, &zs[i].want, 4);
    uint64_t want = bits;
    if (cs_run1(&c, y)) cs_expect_raw(&c, 0, KILN_F32, 1, shape, &want);
    cs_end(&c);
  }
}

static void int_cases(const UnOp *u) {
  for (int d = 0; d < 8; d++) {
    kiln_dtype t = ou_int_dtypes[d];
    int uns = ou_is_unsigned(t);
    if (!(u->acc & (uns ? ACC_UINT : ACC_SINT))) continue;
    /* values every int dtype holds; signed ones get negatives */
    double sv[6] = {-100, -7, -1, 0, 3, 127}, uv[6] = {0, 1, 2, 7, 100, 255};
    const double *v = uns ? uv : sv;
    if (t == KILN_I8) sv[0] = -128 + 1; /* keep neg/abs in range */
    int64_t shape[2] = {2, 3};
    Case c;
    cs_begin(&c, "%s %s", u->name, ou_dt(t));
    kiln_tensor x = cs_in(&c, t, 2, shape, v), y = -1;
    COK(&c, kiln_graph_unary(c.g, u->op, x, &y));
    double want[6];
    for (int i = 0; i < 6; i++) want[i] = u->f(v[i]);
    if (cs_run1(&c, y)) cs_expect_exact(&c, 0, t, 2, shape, want);
    cs_end(&c);
  }
}

/* Extreme integers: abs/neg of the most negative value wrap (two's complement), as in C
 * on the unsigned representation and in numpy; sign of the extremes. */
static void int_extreme_cases(void) {
  int64_t shape[1] = {3};
  {
    Case c;
    cs_begin(&c, "sign/abs i64 extremes");
    uint64_t raw[3] = {(uint64_t)INT64_MAX, (uint64_t)INT64_MIN + 1, 0};
    kiln_tensor x = cs_in_raw(&c, KILN_I64, 1, shape, raw), s = -1, a = -1;
    COK(&c, kiln_graph_unary(c.g, KILN_SIGN, x, &s));
    COK(&c, kiln_graph_unary(c.g, KILN_ABS, x, &a));
    kiln_tensor outs[2] = {s, a};
    uint64_t ws[3] = {1, (uint64_t)-1, 0}, wa[3] = {(uint64_t)INT64_MAX, (uint64_t)INT64_MAX, 0};
    if (cs_run(&c, 2, outs)) {
      cs_expect_raw(&c, 0, KILN_I64, 1, shape, ws);
      cs_expect_raw(&c, 1, KILN_I64, 1, shape, wa);
    }
    cs_end(&c);
  }
  {
    Case c;
    cs_begin(&c, "sign u64 large");
    uint64_t raw[3] = {UINT64_MAX, 1, 0};
    kiln_tensor x = cs_in_raw(&c, KILN_U64, 1, shape, raw), s = -1;
    COK(&c, kiln_graph_unary(c.g, KILN_SIGN, x, &s));
    uint64_t ws[3] = {1, 1, 0};
    if (cs_run1(&c, s)) cs_expect_raw(&c, 0, KILN_U64, 1, shape, ws);
    cs_end(&c);
  }
}

static void not_cases(void) {
  int64_t shape[1] = {4};
  {
    Case c;
    cs_begin(&c, "not bool");
    double v[4] = {0, 1, 1, 0}, w[4] = {1, 0, 0, 1};
    kiln_tensor x = cs_in(&c, KILN_BOOL, 1, shape, v), y = -1;
    COK(&c, kiln_graph_unary(c.g, KILN_NOT, x, &y));
    if (cs_run1(&c, y)) cs_expect_exact(&c, 0, KILN_BOOL, 1, shape, w);
    cs_end(&c);
  }
  /* on ints, not is bitwise (graph.h: "not also ints") */
  {
    Case c;
    cs_begin(&c, "not i32 bitwise");
    double v[4] = {0, -1, 5, -6}, w[4] = {-1, 0, -6, 5};
    kiln_tensor x = cs_in(&c, KILN_I32, 1, shape, v), y = -1;
    COK(&c, kiln_graph_unary(c.g, KILN_NOT, x, &y));
    if (cs_run1(&c, y)) cs_expect_exact(&c, 0, KILN_I32, 1, shape, w);
    cs_end(&c);
  }
  {
    Case c;
    cs_begin(&c, "not u8 bitwise");
    double v[4] = {0, 255, 0x0f, 0xa5}, w[4] = {255, 0, 0xf0, 0x5a};
    kiln_tensor x = cs_in(&c, KILN_U8, 1, shape, v), y = -1;
    COK(&c, kiln_graph_unary(c.g, KILN_NOT, x, &y));
    if (cs_run1(&c, y)) cs_expect_exact(&c, 0, KILN_U8, 1, shape, w);
    cs_end(&c);
  }
}

/* Rank 0 and an empty tensor (a zero dimension) for every op, on f32 (bool for not). */
static void scalar_and_empty_cases(void) {
  for (int k = 0; k < N_OPS; k++) {
    const UnOp *u = &ops[k];
    kiln_dtype ot = (u->acc & OUT_BOOL) ? KILN_BOOL : KILN_F32;
    {
      Case c;
      cs_begin(&c, "%s rank-0 f32", u->name);
      double v = 0.75;
      kiln_tensor x = cs_in(&c, KILN_F32, 0, NULL, &v), y = -1;
      COK(&c, kiln_graph_unary(c.g, u->op, x, &y));
      double w = ot == KILN_BOOL ? u->f(v) : ou_round_f32(u->f(v));
      if (cs_run1(&c, y)) cs_expect(&c, 0, ot, 0, NULL, &w);
      cs_end(&c);
    }
    {
      Case c;
      int64_t shape[3] = {2, 0, 3};
      cs_begin(&c, "%s empty [2,0,3] f32", u->name);
      kiln_tensor x = cs_in(&c, KILN_F32, 3, shape, NULL), y = -1;
      COK(&c, kiln_graph_unary(c.g, u->op, x, &y));
      if (cs_run1(&c, y)) cs_expect(&c, 0, ot, 3, shape, NULL);
      cs_end(&c);
    }
  }
  {
    Case c;
    int64_t shape[1] = {0};
    cs_begin(&c, "not empty bool");
    kiln_tensor x = cs_in(&c, KILN_BOOL, 1, shape, NULL), y = -1;
    COK(&c, kiln_graph_unary(c.g, KILN_NOT, x, &y));
    if (cs_run1(&c, y)) cs_expect(&c, 0, KILN_BOOL, 1, shape, NULL);
    cs_end(&c);
  }
}

/* Wrong dtypes are refused at build time with a message, and the graph stays usable. */
static void reject_cases(void) {
  static const struct { kiln_unary_op op; kiln_dtype t; const char *what; } bad[] = {
    {KILN_EXP, KILN_I32, "exp i32"},   {KILN_LOG, KILN_I64, "log i64"},     {KILN_SQRT, KILN_BOOL, "sqrt bool"},
    {KILN_SIN, KILN_U8, "sin u8"},     {KILN_TANH, KILN_I16, "tanh i16"},   {KILN_SIGMOID, KILN_BOOL, "sigmoid bool"},
    {KILN_NOT, KILN_F32, "not f32"},   {KILN_NOT, KILN_F16, "not f16"},     {KILN_NEG, KILN_BOOL, "neg bool"},
    {KILN_ISNAN, KILN_BOOL, "isnan bool"}, {KILN_GELU_ERF, KILN_I32, "gelu i32"}, {KILN_ERF, KILN_I8, "erf i8"},
  };
  int64_t shape[1] = {3};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    Case c;
    cs_begin(&c, "reject %s", bad[i].what);
    kiln_tensor x = cs_in(&c, bad[i].t, 1, shape, NULL), y = -1;
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_unary(c.g, bad[i].op, x, &y));
    /* the failed call changed nothing: a valid op on the same input still runs */
    kiln_tensor z = -1;
    double w[3] = {0, 0, 0};
    COK(&c, kiln_graph_cast(c.g, x, KILN_F32, &z));
    if (cs_run1(&c, z)) cs_expect(&c, 0, KILN_F32, 1, shape, w);
    cs_end(&c);
  }
  {
    Case c;
    cs_begin(&c, "reject bad handles and op codes");
    int64_t s1[1] = {2};
    kiln_tensor x = cs_in(&c, KILN_F32, 1, s1, NULL), y = -1;
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_unary(c.g, KILN_EXP, x + 100, &y));
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_unary(c.g, KILN_EXP, -1, &y));
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_unary(c.g, (kiln_unary_op)KILN_UNARY_COUNT, x, &y));
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_unary(NULL, KILN_EXP, x, &y));
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_unary(c.g, KILN_EXP, x, NULL));
    cs_end(&c);
  }
}

int main(void) {
  if (!ou_backend_available()) return 0;
  for (int k = 0; k < N_OPS; k++) {
    if (ops[k].acc & ACC_FLOAT) {
      float_cases(&ops[k]);
      special_cases(&ops[k]);
    }
    int_cases(&ops[k]);
  }
  signed_zero_cases();
  half_range_cases();
  int_extreme_cases();
  not_cases();
  scalar_and_empty_cases();
  reject_cases();
  OU_MAIN_END("unary");
}
