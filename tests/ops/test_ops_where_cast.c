/*
 * where and cast through the public API. where: three-way NumPy broadcasting against an
 * explicit index map, several dtypes, errors. cast: every ordered pair of the 13 dtypes on
 * the representative values both dtypes hold (expected bits computed here: float->int
 * truncates toward zero, ->bool is != 0, bool->x is 0/1, narrowing floats round to
 * nearest even), then targeted cases: f16/bf16/f32 ties, overflow to inf, subnormals,
 * NaN/inf/-0.0, integers beyond 2^24 and 2^53, integer narrowing (wraps, as numpy).
 */
#include "ops_util.h"

static double dt_min(kiln_dtype t) {
  switch (t) {
  case KILN_I8: return -128;
  case KILN_I16: return -32768;
  case KILN_I32: return -2147483648.0;
  case KILN_I64: return -9223372036854775808.0;
  case KILN_U8: case KILN_U16: case KILN_U32: case KILN_U64: case KILN_BOOL: return 0;
  default: return -INFINITY;
  }
}
static double dt_max(kiln_dtype t) {
  switch (t) {
  case KILN_I8: return 127;
  case KILN_I16: return 32767;
  case KILN_I32: return 2147483647.0;
  case KILN_I64: return 9223372036854774784.0; /* largest double below 2^63 */
  case KILN_U8: return 255;
  case KILN_U16: return 65535;
  case KILN_U32: return 4294967295.0;
  case KILN_U64: return 18446744073709549568.0; /* largest double below 2^64 */
  case KILN_BOOL: return 1;
  default: return INFINITY;
  }
}

/* Values tried for every pair; each pair uses those the source holds exactly (ints) and
 * whose truncation the target holds (int targets). */
static const double vals[] = {0, 1, -1, 2.5, -2.5, 0.7, -0.7, 3, 100, -100, 127, 200, 255,
                              1000, -1000, 40000, 65504, 1e6, -1e6, 3e9, -3e9, 1e12};
#define NVALS ((int)(sizeof vals / sizeof vals[0]))

static int source_holds(kiln_dtype t, double v) {
  if (t == KILN_BOOL) return v == 0 || v == 1;
  if (ou_is_float(t)) return 1;
  return v == trunc(v) && v >= dt_min(t) && v <= dt_max(t);
}

static void cast_matrix(void) {
  for (int f = 0; f < 13; f++)
    for (int g = 0; g < 13; g++) {
      kiln_dtype from = ou_all_dtypes[f], to = ou_all_dtypes[g];
      double in[NVALS];
      uint64_t want[NVALS];
      int64_t n = 0;
      for (int i = 0; i < NVALS; i++) {
        double v = vals[i];
        if (!source_holds(from, v)) continue;
        double s = ou_as(from, v); /* what the source tensor holds */
        if (isinf(s)) continue;    /* f16 overflow: covered by the targeted cases */
        double r;
        if (to == KILN_BOOL) r = s != 0;
        else if (ou_is_float(to)) r = s;
        else {
          r = trunc(s);
          if (r < dt_min(to) || r > dt_max(to)) continue;
        }
        uint64_t bits = 0;
        ou_store(to, &bits, 0, r);
        in[n] = v;
        want[n++] = bits;
      }
      int64_t shape[1] = {n};
      Case c;
      cs_begin(&c, "cast %s -> %s (%lld values)", ou_dt(from), ou_dt(to), (long long)n);
      kiln_tensor x = cs_in(&c, from, 1, shape, in), y = -1;
      COK(&c, kiln_graph_cast(c.g, x, to, &y));
      if (cs_run1(&c, y)) cs_expect_raw(&c, 0, to, 1, shape, want);
      cs_end(&c);
    }
}

/* f32 (given as bits) -> f16 / bf16 / f64 -> f32, checked bit for bit against our encoders. */
static void rounding_cases(void) {
  const float p11 = ldexpf(1.0f, -11), p8 = ldexpf(1.0f, -8);
  static float fx[20];
  int n = 0;
  fx[n++] = 1.0f + p11;            /* f16 tie -> even (1.0) */
  fx[n++] = 1.0f + 3 * p11;        /* f16 tie -> even (1 + 2^-9) */
  fx[n++] = 1.0f + p11 + ldexpf(1.0f, -20); /* just above a tie -> up */
  fx[n++] = 65504.0f;              /* f16 max */
  fx[n++] = 65519.0f;              /* rounds down to max */
  fx[n++] = 65520.0f;              /* tie with 2^16 -> inf */
  fx[n++] = -70000.0f;             /* -> -inf */
  fx[n++] = ldexpf(1.0f, -25);     /* half the smallest f16 subnormal: tie -> 0 */
  fx[n++] = 3 * ldexpf(1.0f, -25); /* tie -> 2^-23 (even) */
  fx[n++] = ldexpf(1.0f, -24);     /* smallest f16 subnormal */
  fx[n++] = ldexpf(1.0f, -14) - ldexpf(1.0f, -24); /* largest f16 subnormal */
  fx[n++] = -0.0f;
  fx[n++] = INFINITY;
  fx[n++] = -INFINITY;
  fx[n++] = NAN;
  fx[n++] = 1.0f + p8;             /* bf16 tie -> 1.0 */
  fx[n++] = 1.0f + 3 * p8;         /* bf16 tie -> up */
  fx[n++] = FLT_MAX;               /* bf16 -> inf; f16 -> inf */
  fx[n++] = 1e-40f;                /* f32 subnormal */
  fx[n++] = -3.0e38f;
  int64_t shape[1] = {n};
  uint64_t raw[20];
  for (int i = 0; i < n; i++) {
    uint32_t u;
    memcpy(&u, &fx[i], 4);
    raw[i] = u;
  }
  static const kiln_dtype tos[3] = {KILN_F16, KILN_BF16, KILN_F64};
  for (int k = 0; k < 3; k++) {
    Case c;
    cs_begin(&c, "cast f32 -> %s rounding, overflow, subnormals, specials", ou_dt(tos[k]));
    kiln_tensor x = cs_in_raw(&c, KILN_F32, 1, shape, raw), y = -1;
    COK(&c, kiln_graph_cast(c.g, x, tos[k], &y));
    uint64_t want[20];
    for (int i = 0; i < n; i++) {
      double v = fx[i];
      want[i] = tos[k] == KILN_F16 ? ou_f16_bits(ou_round_f16(v))
              : tos[k] == KILN_BF16 ? ou_bf16_bits(ou_round_bf16(v)) : 0;
      if (tos[k] == KILN_F64) memcpy(&want[i], &v, 8);
    }
    if (cs_run1(&c, y)) {
      /* NaN payloads may differ: compare NaN-ness there, bits elsewhere */
      OuVal *o = &c.out[0];
      if (cs_check_meta(&c, 0, tos[k], 1, shape))
        for (int i = 0; i < n; i++) {
          uint64_t g = ou_raw(tos[k], o->p, i);
          int ok = isnan(fx[i]) ? isnan(ou_load(tos[k], o->p, i)) : g == want[i];
          if (!ok) cs_fail(&c, "f32 %a -> %s bits 0x%llx, expected 0x%llx", (double)fx[i], ou_dt(tos[k]),
                           (unsigned long long)g, (unsigned long long)want[i]);
        }
    }
    cs_end(&c);
  }
  {
    /* f64 -> f32 ties and overflow; f64 -> f16 directly */
    Case c;
    cs_begin(&c, "cast f64 -> f32 / f16 rounding");
    double d[6] = {1.0 + ldexp(1, -24), 1.0 + 3 * ldexp(1, -24), 1e300, -1e300, ldexp(1, -150), 0.1};
    int64_t s6[1] = {6};
    kiln_tensor x = cs_in(&c, KILN_F64, 1, s6, d), y = -1, h = -1;
    COK(&c, kiln_graph_cast(c.g, x, KILN_F32, &y));
    COK(&c, kiln_graph_cast(c.g, x, KILN_F16, &h));
    uint64_t w32[6], w16[6];
    for (int i = 0; i < 6; i++) {
      float f = (float)ou_round_fmt(d[i], 24, -126, 127);
      uint32_t u;
      memcpy(&u, &f, 4);
      w32[i] = u;
      w16[i] = ou_f16_bits(ou_round_f16(d[i]));
    }
    kiln_tensor o[2] = {y, h};
    if (cs_run(&c, 2, o)) {
      cs_expect_raw(&c, 0, KILN_F32, 1, s6, w32);
      cs_expect_raw(&c, 1, KILN_F16, 1, s6, w16);
    }
    cs_end(&c);
  }
}

/* Floats to ints truncate toward zero; NaN/inf to bool is true, -0.0 to bool false. */
static void float_to_int_cases(void) {
  int64_t s8[1] = {8};
  double v[8] = {2.7, -2.7, -0.5, 0.5, 1.999, -1.999, 126.9, -127.9};
  for (int d = 0; d < 4; d++) {
    kiln_dtype t = ou_float_dtypes[d];
    Case c;
    cs_begin(&c, "cast %s -> i8/i32/i64 truncates toward zero", ou_dt(t));
    kiln_tensor x = cs_in(&c, t, 1, s8, v), o[3] = {-1, -1, -1};
    COK(&c, kiln_graph_cast(c.g, x, KILN_I8, &o[0]));
    COK(&c, kiln_graph_cast(c.g, x, KILN_I32, &o[1]));
    COK(&c, kiln_graph_cast(c.g, x, KILN_I64, &o[2]));
    double wt[8];
    for (int i = 0; i < 8; i++) wt[i] = trunc(ou_as(t, v[i])); /* bf16 126.9 is 127 */
    if (cs_run(&c, 3, o)) {
      cs_expect_exact(&c, 0, KILN_I8, 1, s8, wt);
      cs_expect_exact(&c, 1, KILN_I32, 1, s8, wt);
      cs_expect_exact(&c, 2, KILN_I64, 1, s8, wt);
    }
    cs_end(&c);
  }
  {
    Case c;
    cs_begin(&c, "cast specials -> bool");
    int64_t s5[1] = {5};
    double sv[5] = {NAN, INFINITY, -0.0, 0.0, -1e-30};
    double wb[5] = {1, 1, 0, 0, 1};
    kiln_tensor x = cs_in(&c, KILN_F64, 1, s5, sv), y = -1;
    COK(&c, kiln_graph_cast(c.g, x, KILN_BOOL, &y));
    if (cs_run1(&c, y)) cs_expect_exact(&c, 0, KILN_BOOL, 1, s5, wb);
    cs_end(&c);
  }
  {
    /* a large f64 truncates exactly into i64 */
    Case c;
    cs_begin(&c, "cast f64 2^40+0.5 -> i64, -2^52-0.5 -> i64");
    int64_t s2[1] = {2};
    double dv[2] = {ldexp(1, 40) + 0.5, -ldexp(1, 52) - 0.5};
    uint64_t w2[2] = {(uint64_t)(INT64_C(1) << 40), (uint64_t)(-(INT64_C(1) << 52))};
    kiln_tensor x = cs_in(&c, KILN_F64, 1, s2, dv), y = -1;
    COK(&c, kiln_graph_cast(c.g, x, KILN_I64, &y));
    if (cs_run1(&c, y)) cs_expect_raw(&c, 0, KILN_I64, 1, s2, w2);
    cs_end(&c);
  }
}

/* Ints beyond the float's significand round to nearest even. */
static void int_to_float_cases(void) {
  int64_t s3[1] = {3};
  {
    Case c;
    cs_begin(&c, "cast i64 -> f64/f32 beyond 2^53 / 2^24");
    uint64_t raw[3] = {(UINT64_C(1) << 53) + 1, (UINT64_C(1) << 24) + 1, (uint64_t)-((INT64_C(1) << 53) + 3)};
    kiln_tensor x = cs_in_raw(&c, KILN_I64, 1, s3, raw), o[2] = {-1, -1};
    COK(&c, kiln_graph_cast(c.g, x, KILN_F64, &o[0]));
    COK(&c, kiln_graph_cast(c.g, x, KILN_F32, &o[1]));
    /* 2^53+1 -> 2^53 (tie to even); -(2^53+3) -> -(2^53+4) (tie to even) */
    double w64[3] = {ldexp(1, 53), ldexp(1, 24) + 1, -(ldexp(1, 53) + 4)};
    double w32[3] = {ldexp(1, 53), ldexp(1, 24), -ldexp(1, 53)};
    if (cs_run(&c, 2, o)) {
      cs_expect_exact(&c, 0, KILN_F64, 1, s3, w64);
      cs_expect_exact(&c, 1, KILN_F32, 1, s3, w32);
    }
    cs_end(&c);
  }
  {
    Case c;
    cs_begin(&c, "cast u64 above 2^63 -> f64/f32/f16");
    uint64_t raw[3] = {UINT64_MAX, UINT64_C(1) << 63, 65519};
    kiln_tensor x = cs_in_raw(&c, KILN_U64, 1, s3, raw), o[3] = {-1, -1, -1};
    COK(&c, kiln_graph_cast(c.g, x, KILN_F64, &o[0]));
    COK(&c, kiln_graph_cast(c.g, x, KILN_F32, &o[1]));
    COK(&c, kiln_graph_cast(c.g, x, KILN_F16, &o[2]));
    double w[3] = {ldexp(1, 64), ldexp(1, 63), 65519};
    double w16[3] = {INFINITY, INFINITY, 65504};
    if (cs_run(&c, 3, o)) {
      cs_expect_exact(&c, 0, KILN_F64, 1, s3, w);
      cs_expect_exact(&c, 1, KILN_F32, 1, s3, w);
      cs_expect_exact(&c, 2, KILN_F16, 1, s3, w16);
    }
    cs_end(&c);
  }
}

/* Integer narrowing and sign changes keep the low bits (two's complement), as numpy. */
static void int_wrap_cases(void) {
  int64_t s4[1] = {4};
  Case c;
  cs_begin(&c, "cast i32 -> u8/i8/u16/u64 wraps");
  double v[4] = {-1, 300, 200, -129};
  kiln_tensor x = cs_in(&c, KILN_I32, 1, s4, v), o[4] = {-1, -1, -1, -1};
  COK(&c, kiln_graph_cast(c.g, x, KILN_U8, &o[0]));
  COK(&c, kiln_graph_cast(c.g, x, KILN_I8, &o[1]));
  COK(&c, kiln_graph_cast(c.g, x, KILN_U16, &o[2]));
  COK(&c, kiln_graph_cast(c.g, x, KILN_U64, &o[3]));
  double wu8[4] = {255, 44, 200, 127}, wi8[4] = {-1, 44, -56, 127}, wu16[4] = {65535, 300, 200, 65407};
  uint64_t wu64[4] = {UINT64_MAX, 300, 200, (uint64_t)(int64_t)-129};
  if (cs_run(&c, 4, o)) {
    cs_expect_exact(&c, 0, KILN_U8, 1, s4, wu8);
    cs_expect_exact(&c, 1, KILN_I8, 1, s4, wi8);
    cs_expect_exact(&c, 2, KILN_U16, 1, s4, wu16);
    cs_expect_raw(&c, 3, KILN_U64, 1, s4, wu64);
  }
  cs_end(&c);
}

static void cast_misc_cases(void) {
  {
    Case c;
    cs_begin(&c, "cast rank-0 and empty");
    int64_t s0[2] = {3, 0};
    double v = -2.5, w = -2;
    kiln_tensor x = cs_in(&c, KILN_F32, 0, NULL, &v), e = cs_in(&c, KILN_F16, 2, s0, NULL), o[2] = {-1, -1};
    COK(&c, kiln_graph_cast(c.g, x, KILN_I16, &o[0]));
    COK(&c, kiln_graph_cast(c.g, e, KILN_BOOL, &o[1]));
    if (cs_run(&c, 2, o)) {
      cs_expect_exact(&c, 0, KILN_I16, 0, NULL, &w);
      cs_expect_exact(&c, 1, KILN_BOOL, 2, s0, NULL);
    }
    cs_end(&c);
  }
  {
    Case c;
    cs_begin(&c, "cast to an invalid dtype is refused");
    int64_t s1[1] = {2};
    kiln_tensor x = cs_in(&c, KILN_F32, 1, s1, NULL), y = -1;
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_cast(c.g, x, KILN_DTYPE_COUNT, &y));
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_cast(c.g, x, (kiln_dtype)-1, &y));
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_cast(c.g, x + 7, KILN_F64, &y));
    cs_end(&c);
  }
}

/* where(cond, a, b) with three-way broadcasting, expected from the index map. */
static void where_case(kiln_dtype t, int rc, const int64_t *sc, int ra, const int64_t *sa, int rb, const int64_t *sb,
                       int ro, const int64_t *so) {
  Case c;
  cs_begin(&c, "where %s cond rank %d, a rank %d, b rank %d", ou_dt(t), rc, ra, rb);
  double vc[64], va[64], vb[64], want[64];
  int64_t nc = ou_numel(rc, sc), na = ou_numel(ra, sa), nb = ou_numel(rb, sb), no = ou_numel(ro, so);
  for (int64_t i = 0; i < nc; i++) vc[i] = (i * 7 + 3) % 3 != 0;
  for (int64_t i = 0; i < na; i++) va[i] = ou_as(t, (double)(i % 11) + (ou_is_float(t) ? 0.5 : 0));
  for (int64_t i = 0; i < nb; i++) vb[i] = ou_as(t, t == KILN_BOOL ? 0 : 20 + (double)(i % 13));
  kiln_tensor cd = cs_in(&c, KILN_BOOL, rc, sc, vc), a = cs_in(&c, t, ra, sa, va), b = cs_in(&c, t, rb, sb, vb), y = -1;
  COK(&c, kiln_graph_where(c.g, cd, a, b, &y));
  for (int64_t i = 0; i < no; i++) {
    int64_t idx[KILN_MAX_RANK];
    ou_unravel(i, ro, so, idx);
    want[i] = vc[ou_bcast_offset(ro, idx, rc, sc)] ? va[ou_bcast_offset(ro, idx, ra, sa)]
                                                    : vb[ou_bcast_offset(ro, idx, rb, sb)];
  }
  if (cs_run1(&c, y)) cs_expect_exact(&c, 0, t, ro, so, want);
  cs_end(&c);
}

static void where_cases(void) {
  int64_t s234[3] = {2, 3, 4}, s34[2] = {3, 4}, s31[2] = {3, 1}, s4[1] = {4}, s14[2] = {1, 4}, s211[3] = {2, 1, 1};
  for (int d = 0; d < 13; d++) where_case(ou_all_dtypes[d], 3, s234, 3, s234, 3, s234, 3, s234);
  where_case(KILN_F32, 2, s31, 1, s4, 0, NULL, 2, s34);
  where_case(KILN_I64, 0, NULL, 2, s34, 1, s4, 2, s34);
  where_case(KILN_F16, 1, s4, 3, s211, 2, s31, 3, s234);
  where_case(KILN_F64, 2, s14, 2, s31, 3, s211, 3, s234);
  {
    int64_t z[2] = {0, 4};
    where_case(KILN_F32, 2, z, 1, s4, 2, s14, 2, z);
  }
  {
    Case c;
    cs_begin(&c, "where errors");
    kiln_tensor cf = cs_in(&c, KILN_F32, 1, s4, NULL), cb = cs_in(&c, KILN_BOOL, 1, s4, NULL);
    kiln_tensor a = cs_in(&c, KILN_F32, 1, s4, NULL), b64 = cs_in(&c, KILN_F64, 1, s4, NULL);
    kiln_tensor a3 = cs_in(&c, KILN_F32, 2, s31, NULL), y = -1;
    int64_t s5[1] = {5};
    kiln_tensor a5 = cs_in(&c, KILN_F32, 1, s5, NULL);
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_where(c.g, cf, a, a, &y));  /* cond not bool */
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_where(c.g, cb, a, b64, &y)); /* a, b dtypes differ */
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_where(c.g, cb, a, a5, &y));  /* [4] vs [5] */
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_where(c.g, cb, a5, a3, &y)); /* [5] vs [3,1] ok, cond [4] not */
    cs_end(&c);
  }
}

int main(void) {
  if (!ou_backend_available()) return 0;
  cast_matrix();
  rounding_cases();
  float_to_int_cases();
  int_to_float_cases();
  int_wrap_cases();
  cast_misc_cases();
  where_cases();
  OU_MAIN_END("where_cast");
}
