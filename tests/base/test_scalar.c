/*
 * test_scalar — the shared scalar helpers (base/scalar.inc, compiled for the host) and
 * te_eval_* (the definition, which calls them) on the edge cases C leaves undefined or
 * ONNX defines beyond C: INT64_MIN / -1, division and mod by zero, floor division and
 * Python mod, integer pow with negative exponents and wrapping, shifts by 64 and -1,
 * NaN in max/min, sign of -0 and NaN, sigmoid far in the tails, saturating float->int
 * casts of NaN, inf and 1e30, round half to even, f16/bf16 rounding at ties, at the
 * largest finite value and in the subnormals. Every expected value is worked out here
 * by hand from the rule, not read back from the code.
 */
#include "base/scalar.h"
#include "te/te.h"
#include "test.h"

#include <string.h>

static uint64_t dbits(double d) { uint64_t u; memcpy(&u, &d, 8); return u; }

/* Integers: exact. Floats: the same bits (so -0 is not 0), or both NaN. */
#define EQ_I(got, want) \
  do { int64_t g_ = (int64_t)(got), w_ = (int64_t)(want); \
       CHECK_MSG(g_ == w_, "%s = %lld, expected %lld", #got, (long long)g_, (long long)w_); } while (0)
#define EQ_F(got, want) \
  do { double g_ = (got), w_ = (want); \
       CHECK_MSG((g_ != g_ && w_ != w_) || dbits(g_) == dbits(w_), "%s = %a, expected %a", #got, g_, w_); } while (0)

static TeValue I(int64_t v) { return (TeValue){ .i = v }; }
static TeValue F(double v) { return (TeValue){ .f = v }; }
static int64_t bi(TeBinary op, kiln_dtype t, int64_t a, int64_t b) { return te_eval_binary(op, t, I(a), I(b)).i; }
static double bf(TeBinary op, kiln_dtype t, double a, double b) { return te_eval_binary(op, t, F(a), F(b)).f; }
static int64_t cast_i(kiln_dtype to, kiln_dtype from, double v) { return te_eval_cast(to, from, F(v)).i; }
static double cast_f(kiln_dtype to, kiln_dtype from, double v) { return te_eval_cast(to, from, F(v)).f; }
static float fbits(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static void test_division(void) {
  /* truncating division: x / 0 = 0, INT64_MIN / -1 wraps to INT64_MIN */
  EQ_I(k_sdiv(INT64_MIN, -1), INT64_MIN);
  EQ_I(bi(TB_DIV, KILN_I64, INT64_MIN, -1), INT64_MIN);
  EQ_I(k_sdiv(7, 0), 0);
  EQ_I(bi(TB_DIV, KILN_I64, 7, 0), 0);
  EQ_I(k_sdiv(-7, 2), -3);
  EQ_I(k_sdiv(7, -2), -3);
  EQ_I(bi(TB_DIV, KILN_I32, INT32_MIN, -1), INT32_MIN);  /* 2^31 wraps in i32 */
  /* floor division */
  EQ_I(k_sfdiv(-7, 2), -4);
  EQ_I(k_sfdiv(7, -2), -4);
  EQ_I(k_sfdiv(-8, 2), -4);
  EQ_I(k_sfdiv(7, 2), 3);
  EQ_I(k_sfdiv(7, 0), 0);
  EQ_I(k_sfdiv(INT64_MIN, -1), INT64_MIN);
  EQ_I(bi(TB_FLOORDIV, KILN_I64, -7, 2), -4);
  EQ_I(bi(TB_FLOORDIV, KILN_I64, INT64_MIN, -1), INT64_MIN);
  /* C remainder (the dividend's sign) and Python mod (the divisor's) */
  EQ_I(k_sfmod(-7, 2), -1);
  EQ_I(k_sfmod(7, -2), 1);
  EQ_I(k_sfmod(INT64_MIN, -1), 0);
  EQ_I(k_sfmod(5, 0), 0);
  EQ_I(bi(TB_FMOD, KILN_I64, -7, 2), -1);
  EQ_I(k_smod(-7, 2), 1);
  EQ_I(k_smod(7, -2), -1);
  EQ_I(k_smod(-8, 2), 0);
  EQ_I(k_smod(INT64_MIN, -1), 0);
  EQ_I(k_smod(5, 0), 0);
  EQ_I(k_smod(INT64_MIN, INT64_MAX), INT64_MAX - 1);  /* -2^63 = -2 (2^63 - 1) + 2^63 - 2 */
  EQ_I(bi(TB_MOD, KILN_I64, -7, 2), 1);
  EQ_I(bi(TB_MOD, KILN_I64, 5, 0), 0);
  /* unsigned */
  EQ_I(k_udiv(UINT64_MAX, 2), INT64_MAX);
  EQ_I(k_udiv(5, 0), 0);
  EQ_I(k_umod(5, 0), 0);
  EQ_I(k_umod(UINT64_MAX, 10), 5);
  EQ_I(bi(TB_DIV, KILN_U64, -1, 2), INT64_MAX);  /* u64 max / 2 */
  EQ_I(bi(TB_MOD, KILN_U64, -1, 10), 5);
  EQ_I(bi(TB_DIV, KILN_U8, 200, 0), 0);
}

static void test_pow_shift(void) {
  EQ_I(k_upow(3, 4), 81);
  EQ_I(k_upow(0, 0), 1);
  EQ_I(k_upow(2, 64), 0);          /* wraps */
  EQ_I(k_upow(UINT64_MAX, 2), 1);  /* (2^64 - 1)^2 = 1 mod 2^64 */
  EQ_I(k_spow(2, 10), 1024);
  EQ_I(k_spow(-2, 3), -8);
  EQ_I(k_spow(3, 40), INT64_C(-6289078614652622815));  /* 3^40 mod 2^64, as signed */
  EQ_I(k_spow(2, -1), 0);   /* 1/2 truncates */
  EQ_I(k_spow(1, -5), 1);
  EQ_I(k_spow(-1, -3), -1);
  EQ_I(k_spow(-1, -4), 1);
  EQ_I(k_spow(0, -1), 0);
  EQ_I(bi(TB_POW, KILN_I64, 2, -1), 0);
  EQ_I(bi(TB_POW, KILN_I64, -1, -3), -1);
  EQ_I(bi(TB_POW, KILN_I32, 2, 31), INT32_MIN);  /* 2^31 wraps in i32 */
  EQ_I(bi(TB_POW, KILN_U8, 2, 8), 0);
  /* shifts: a count < 0 or >= 64 shifts everything out; >> of a negative keeps the sign */
  EQ_I(k_sshl(1, 63), INT64_MIN);
  EQ_I(k_sshl(1, 64), 0);
  EQ_I(k_sshl(1, -1), 0);
  EQ_I(k_sshr(-8, 1), -4);
  EQ_I(k_sshr(-8, 64), -1);
  EQ_I(k_sshr(8, 64), 0);
  EQ_I(k_sshr(-8, -1), -1);
  EQ_I(k_sshr(8, -1), 0);
  EQ_I(k_ushl(1, 63), INT64_MIN);
  EQ_I(k_ushl(1, 64), 0);
  EQ_I(k_ushr(UINT64_MAX, 63), 1);
  EQ_I(k_ushr(UINT64_MAX, 64), 0);
  EQ_I(bi(TB_SHL, KILN_I64, 1, 64), 0);
  EQ_I(bi(TB_SHL, KILN_I64, 1, -1), 0);
  EQ_I(bi(TB_SHR, KILN_I64, -8, 64), -1);
  EQ_I(bi(TB_SHR, KILN_I64, -8, -1), -1);
  EQ_I(bi(TB_SHR, KILN_U64, -1, 64), 0);  /* u64 max >> 64 */
  EQ_I(bi(TB_SHL, KILN_U64, 1, 64), 0);
  EQ_I(bi(TB_SHL, KILN_I32, 1, 31), INT32_MIN);
}

static void test_float_ops(void) {
  /* max/min: NaN wins from either side; of +0 and -0 the second */
  EQ_F(k_maxf(NAN, 1), NAN);
  EQ_F(k_maxf(1, NAN), NAN);
  EQ_F(k_minf(NAN, -INFINITY), NAN);
  EQ_F(k_maxd(1, NAN), NAN);
  EQ_F(k_mind(NAN, 1), NAN);
  EQ_F(k_maxd(-0.0, 0.0), 0.0);
  EQ_F(k_maxd(0.0, -0.0), -0.0);
  EQ_F(k_mind(-INFINITY, 1), -INFINITY);
  EQ_F(bf(TB_MAX, KILN_F32, 1, NAN), NAN);
  EQ_F(bf(TB_MIN, KILN_F64, NAN, 1), NAN);
  EQ_F(bf(TB_MAX, KILN_F16, -1, NAN), NAN);
  /* mod with the divisor's sign, fmod with the dividend's */
  EQ_F(k_modf(-7, 2), 1);
  EQ_F(k_modf(7, -2), -1);
  EQ_F(k_modd(5.5, -2), -0.5);  /* fmod 1.5, opposite signs: 1.5 - 2 */
  EQ_F(k_modd(-7, 2), 1);
  CHECK(k_modd(-8, 2) == 0);
  EQ_F(bf(TB_MOD, KILN_F64, -7, 2), 1);
  EQ_F(bf(TB_MOD, KILN_F32, 5.5, -2), -0.5);
  EQ_F(bf(TB_FMOD, KILN_F64, -7, 2), -1);
  /* sign keeps -0 and NaN */
  EQ_F(k_signf(-0.0f), -0.0);
  EQ_F(k_signf(NAN), NAN);
  EQ_F(k_signf(-3), -1);
  EQ_F(k_signd(0.0), 0.0);
  EQ_F(k_signd(1e-300), 1);
  EQ_F(te_eval_unary(TU_SIGN, KILN_F64, F(-0.0)).f, -0.0);
  EQ_F(te_eval_unary(TU_SIGN, KILN_F32, F(NAN)).f, NAN);
  /* sigmoid: exp(-740) is about 4e-322, a subnormal, where 1 / (1 + exp(740)) gives 0 */
  EQ_F(k_sigd(0), 0.5);
  EQ_F(k_sigd(1000), 1);
  EQ_F(k_sigd(-1000), 0);
  EQ_F(k_sigd(NAN), NAN);
  CHECK(k_sigd(-740) > 0 && k_sigd(-740) < 1e-320);
  double t = te_eval_unary(TU_SIGMOID, KILN_F64, F(-740)).f;
  CHECK(t > 0 && t < 1e-320);
  /* round half to even */
  EQ_F(te_eval_unary(TU_ROUND, KILN_F64, F(0.5)).f, 0);
  EQ_F(te_eval_unary(TU_ROUND, KILN_F64, F(1.5)).f, 2);
  EQ_F(te_eval_unary(TU_ROUND, KILN_F64, F(2.5)).f, 2);
  EQ_F(te_eval_unary(TU_ROUND, KILN_F32, F(-2.5)).f, -2);
  EQ_F(te_eval_unary(TU_ROUND, KILN_F64, F(-0.5)).f, -0.0);
}

static void test_casts(void) {
  /* NaN -> 0; out of range saturates; truncation toward 0 */
  EQ_I(k_f2s(NAN, -2147483648.0, 2147483647.0), 0);
  EQ_I(k_f2u(NAN), 0);
  EQ_I(cast_i(KILN_I32, KILN_F32, NAN), 0);
  EQ_I(cast_i(KILN_I64, KILN_F64, NAN), 0);
  EQ_I(cast_i(KILN_U64, KILN_F64, NAN), 0);
  EQ_I(cast_i(KILN_U8, KILN_F32, NAN), 0);
  EQ_I(cast_i(KILN_I32, KILN_F64, INFINITY), INT32_MAX);
  EQ_I(cast_i(KILN_I32, KILN_F64, -INFINITY), INT32_MIN);
  EQ_I(cast_i(KILN_I64, KILN_F32, 1e30), INT64_MAX);
  EQ_I(cast_i(KILN_I64, KILN_F64, -1e30), INT64_MIN);
  EQ_I(cast_i(KILN_U64, KILN_F64, 1e30), -1);  /* UINT64_MAX */
  EQ_I(cast_i(KILN_U64, KILN_F64, -1), 0);
  EQ_I(cast_i(KILN_U8, KILN_F64, -1.5), 0);
  EQ_I(cast_i(KILN_U8, KILN_F64, 300.7), 255);
  EQ_I(cast_i(KILN_I8, KILN_F64, -0.9), 0);
  EQ_I(cast_i(KILN_I8, KILN_F64, -128.9), -128);
  EQ_I(cast_i(KILN_I8, KILN_F64, 127.9), 127);
  EQ_I(cast_i(KILN_I16, KILN_F64, 1e30), 32767);
  EQ_I(cast_i(KILN_U32, KILN_F64, 4294967295.5), 4294967295LL);
  EQ_I(cast_i(KILN_I64, KILN_F64, 9223372036854775808.0), INT64_MAX);  /* 2^63 */
  EQ_I(cast_i(KILN_I64, KILN_F64, -9223372036854775808.0), INT64_MIN);
  EQ_I(cast_i(KILN_U64, KILN_F64, 18446744073709551616.0), -1);        /* 2^64 */
  EQ_I(cast_i(KILN_U64, KILN_F64, 0x1.fffffffffffffp+63), (int64_t)UINT64_C(18446744073709549568));
  EQ_I(k_f2u(0x1.fffffffffffffp+63), (int64_t)UINT64_C(18446744073709549568));
  EQ_I(k_f2s(1e30, -128, 127), 127);
  EQ_I(k_f2s(-1e30, -9223372036854775808.0, 9223372036854775808.0), INT64_MIN);
  EQ_I(k_f2s(1e30, -9223372036854775808.0, 9223372036854775808.0), INT64_MAX);
  EQ_I(k_f2s(-3.99, -128, 127), -3);
  /* to bool: v != 0, so NaN is true */
  EQ_I(cast_i(KILN_BOOL, KILN_F64, NAN), 1);
  EQ_I(cast_i(KILN_BOOL, KILN_F64, -0.0), 0);
  EQ_I(cast_i(KILN_BOOL, KILN_F32, 1e-30), 1);
}

static void test_half(void) {
  /* f16: largest finite 65504 (0x7bff); 65520 is the tie with 65536, and 0x7bff is odd: inf */
  EQ_I(k_f2h(65504.0f), 0x7bff);
  EQ_I(k_f2h(fbits(0x477fefff)), 0x7bff);  /* 65519.996, just below the tie */
  EQ_I(k_f2h(65520.0f), 0x7c00);
  EQ_I(k_f2h(-65520.0f), 0xfc00);
  EQ_I(k_f2h(INFINITY), 0x7c00);
  EQ_I(k_f2h(NAN), 0x7e00);
  EQ_I(k_f2h(-NAN), 0xfe00);
  EQ_I(k_f2h(-0.0f), 0x8000);
  /* ties at 1: 1 + 2^-11 goes down to 1 (even), 1 + 3 2^-11 up to 1 + 2^-9 */
  EQ_I(k_f2h(1.0f), 0x3c00);
  EQ_I(k_f2h(1.0f + 0x1p-11f), 0x3c00);
  EQ_I(k_f2h(1.0f + 0x3p-11f), 0x3c02);
  EQ_I(k_f2h(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);
  /* subnormals: steps of 2^-24; 2^-25 ties to 0, 3 2^-25 to 2^-23; 2^-14 - 2^-25 to 2^-14 */
  EQ_I(k_f2h(0x1p-24f), 0x0001);
  EQ_I(k_f2h(0x1p-25f), 0x0000);
  EQ_I(k_f2h(0x1.000002p-25f), 0x0001);
  EQ_I(k_f2h(0x3p-25f), 0x0002);
  EQ_I(k_f2h(-0x3p-25f), 0x8002);
  EQ_I(k_f2h(0x1p-14f), 0x0400);
  EQ_I(k_f2h(0x1p-14f - 0x1p-25f), 0x0400);
  EQ_I(k_f2h(0x1p-14f - 0x1p-24f), 0x03ff);
  EQ_I(k_f2h(1e-30f), 0x0000);
  EQ_F(k_h2f(0x0001), 0x1p-24);
  EQ_F(k_h2f(0x03ff), 0x3ffp-24);
  EQ_F(k_h2f(0x0400), 0x1p-14);
  EQ_F(k_h2f(0x7bff), 65504);
  EQ_F(k_h2f(0x7c00), INFINITY);
  EQ_F(k_h2f(0xfc00), -INFINITY);
  EQ_F(k_h2f(0x7e00), NAN);
  EQ_F(k_h2f(0x8000), -0.0);
  EQ_F(k_h2f(0x3c01), 1 + 0x1p-10);
  EQ_F(k_rh(65520.0f), INFINITY);
  EQ_F(k_rh(0x1p-25f), 0);
  /* bf16: 8 bits of mantissa; ties at 1 likewise; FLT_MAX is past the tie with inf */
  EQ_I(k_f2b(1.0f), 0x3f80);
  EQ_I(k_f2b(1.0f + 0x1p-8f), 0x3f80);
  EQ_I(k_f2b(1.0f + 0x3p-8f), 0x3f82);
  EQ_I(k_f2b(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
  EQ_I(k_f2b(fbits(0x7f7fffff)), 0x7f80);
  EQ_I(k_f2b(fbits(0x7f7f7fff)), 0x7f7f);   /* just below the tie: the largest finite bf16 */
  EQ_I(k_f2b(fbits(0x7f800001)), 0x7fc0);   /* a signalling NaN stays NaN, never inf */
  EQ_I(k_f2b(fbits(0xffc00000)), 0xffc0);
  EQ_I(k_f2b(-0.0f), 0x8000);
  EQ_F(k_b2f(0x7f7f), 0x1.fep127);
  EQ_F(k_b2f(0x3f81), 1 + 0x1p-7);
  EQ_F(k_rb(1.0f + 0x1p-8f), 1);
  /* te_eval rounds every f16/bf16 result the same way */
  EQ_F(te_wrap(KILN_F16, F(65520)).f, INFINITY);
  EQ_F(cast_f(KILN_F16, KILN_F64, 0x1p-25), 0);
  EQ_F(cast_f(KILN_F16, KILN_F32, 0x3p-25), 0x1p-23);
  EQ_F(cast_f(KILN_BF16, KILN_F32, 1 + 0x1p-8), 1);
  EQ_F(bf(TB_ADD, KILN_F16, 1, 0x1p-11), 1);          /* the sum ties to even */
  EQ_F(bf(TB_ADD, KILN_F16, 1, 0x3p-11), 1 + 0x1p-9);
  EQ_F(bf(TB_MUL, KILN_BF16, 0x1.fep127, 2), INFINITY);
  EQ_F(te_eval_cast(KILN_F16, KILN_I64, I(65520)).f, INFINITY);
  EQ_F(te_eval_cast(KILN_F16, KILN_I32, I(2049)).f, 2048);  /* 2049 ties between 2048 and 2050 */
  EQ_F(te_eval_cast(KILN_F16, KILN_I32, I(2051)).f, 2052);  /* 2051 ties between 2050 and 2052 */
}

int main(void) {
  test_division();
  test_pow_shift();
  test_float_ops();
  test_casts();
  test_half();
  TEST_MAIN_END();
}
