/*
 * test_simplify — expression construction: hash-consing, constant folding with the
 * scalar semantics (int division and modulo signs, round half to even, saturating
 * casts, f16 rounding, unsigned compare/shift), exact identities only, the affine
 * normal form (a flatten's digits summed back to the flat index), div/mod rules with and
 * without var ranges, te_range, te_substitute, te_factor_selects,
 * te_check rejecting a load that can read out of range, and te_unclamp_guarded.
 */
#include "test.h"
#include "te/te.h"

static TE *new_te(void) {
  TE *te = kiln_calloc(1, sizeof *te);
  CHECK(te != NULL);
  return te;
}

static Expr *I(TE *te, int64_t v) { return te_const_i(te, KILN_I64, v); }
static Expr *bin(TE *te, TeBinary op, Expr *a, Expr *b) { return te_binary(te, op, a, b); }

static void test_hash_consing(void) {
  TE *te = new_te();
  Expr *i = te_var(te, 0), *j = te_var(te, 1);
  CHECK(te_var(te, 0) == i);
  CHECK(bin(te, TB_ADD, i, j) == bin(te, TB_ADD, j, i));  /* commutative operands are ordered */
  CHECK(bin(te, TB_ADD, i, j) != bin(te, TB_SUB, i, j));
  CHECK(te_const_f(te, KILN_F32, 0.0) != te_const_f(te, KILN_F32, -0.0));
  CHECK(te_const_f(te, KILN_F32, 1.0) != te_const_f(te, KILN_F64, 1.0));
  te_free(te);
}

static TeValue fold2(TE *te, kiln_dtype t, TeBinary op, double a, double b) {
  Expr *e = dtype_is_float(t) ? bin(te, op, te_const_f(te, t, a), te_const_f(te, t, b))
                              : bin(te, op, te_const_i(te, t, (int64_t)a), te_const_i(te, t, (int64_t)b));
  CHECK(e && e->kind == EX_CONST);
  return e ? e->c : (TeValue){ .i = 0 };
}

static void test_folding(void) {
  TE *te = new_te();
  CHECK(fold2(te, KILN_I32, TB_DIV, -7, 2).i == -3);       /* truncates */
  CHECK(fold2(te, KILN_I32, TB_MOD, -7, 2).i == 1);        /* divisor's sign */
  CHECK(fold2(te, KILN_I32, TB_MOD, 7, -2).i == -1);
  CHECK(fold2(te, KILN_I32, TB_FMOD, -7, 2).i == -1);      /* dividend's sign */
  CHECK(fold2(te, KILN_I64, TB_FLOORDIV, -7, 2).i == -4);
  CHECK(fold2(te, KILN_I32, TB_DIV, 5, 0).i == 0);         /* defined, not a trap */
  CHECK(fold2(te, KILN_I32, TB_ADD, 2147483647, 1).i == -2147483648LL);  /* wraps */
  CHECK(fold2(te, KILN_U8, TB_SUB, 1, 2).i == 255);
  CHECK(fold2(te, KILN_U32, TB_SHR, 4294967295.0, 31).i == 1);
  CHECK(fold2(te, KILN_I8, TB_POW, 3, 4).i == 81);
  CHECK(fold2(te, KILN_F64, TB_MOD, -7.5, 2).f == 0.5);
  CHECK(fold2(te, KILN_F64, TB_FMOD, -7.5, 2).f == -1.5);
  CHECK(isnan(fold2(te, KILN_F32, TB_MAX, NAN, 1).f) && isnan(fold2(te, KILN_F32, TB_MIN, 1, NAN).f));
  CHECK(fold2(te, KILN_F32, TB_LT, NAN, 1).i == 0 && fold2(te, KILN_F32, TB_NE, NAN, NAN).i == 1);
  /* u64 compares unsigned */
  Expr *big = te_const_i(te, KILN_U64, -1), *one = te_const_i(te, KILN_U64, 1);
  CHECK(bin(te, TB_GT, big, one)->c.i == 1);
  /* round half to even; f32 rounding of constants */
  CHECK(te_unary(te, TU_ROUND, te_const_f(te, KILN_F32, 2.5))->c.f == 2.0);
  CHECK(te_unary(te, TU_ROUND, te_const_f(te, KILN_F32, -3.5))->c.f == -4.0);
  CHECK(te_const_f(te, KILN_F32, 0.1)->c.f == (double)0.1f);
  /* casts: truncation, saturation, NaN, bool, f16 round to nearest even */
  CHECK(te_cast(te, KILN_I32, te_const_f(te, KILN_F32, -1.9))->c.i == -1);
  CHECK(te_cast(te, KILN_U8, te_const_f(te, KILN_F32, 300.5))->c.i == 255);
  CHECK(te_cast(te, KILN_I8, te_const_f(te, KILN_F32, -1000))->c.i == -128);
  CHECK(te_cast(te, KILN_I64, te_const_f(te, KILN_F64, NAN))->c.i == 0);
  CHECK(te_cast(te, KILN_BOOL, te_const_f(te, KILN_F32, 0.25))->c.i == 1);
  CHECK(te_cast(te, KILN_I8, te_const_i(te, KILN_I32, 200))->c.i == -56);  /* int -> int wraps */
  CHECK(te_cast(te, KILN_F16, te_const_f(te, KILN_F32, 1.0 + 1.0 / 2048))->c.f == 1.0);  /* tie: to even */
  CHECK(te_cast(te, KILN_F16, te_const_f(te, KILN_F32, 1.0 + 3.0 / 2048))->c.f == 1.0 + 2.0 / 1024);
  CHECK(te_cast(te, KILN_F32, te_const_i(te, KILN_U64, -1))->c.f == 18446744073709551616.0);
  te_free(te);
}

static void test_identities(void) {
  TE *te = new_te();
  Stage s = { .kind = ST_INPUT, .dtype = KILN_F32, .rank = 1, .shape = { 4 }, .numel = 4 };
  CHECK(te_add_stage(te, &s) == 0);
  Expr *i = te_var(te, 0);
  Expr *xf = te_load(te, 0, 1, &i);
  CHECK(bin(te, TB_MUL, xf, te_const_f(te, KILN_F32, 1)) == xf);
  CHECK(bin(te, TB_ADD, xf, te_const_f(te, KILN_F32, -0.0)) == xf);
  /* not exact for floats: -0 + 0 = +0, NaN * 0 = NaN */
  CHECK(bin(te, TB_ADD, xf, te_const_f(te, KILN_F32, 0.0)) != xf);
  CHECK(bin(te, TB_MUL, xf, te_const_f(te, KILN_F32, 0.0))->kind == EX_BINARY);
  Expr *xi = te_cast(te, KILN_I32, xf);
  CHECK(bin(te, TB_MUL, xi, te_const_i(te, KILN_I32, 0)) == te_const_i(te, KILN_I32, 0));
  CHECK(bin(te, TB_ADD, xi, te_const_i(te, KILN_I32, 0)) == xi);
  CHECK(te_cast(te, KILN_F32, xf) == xf);
  Expr *c = bin(te, TB_LT, xf, te_const_f(te, KILN_F32, 0));
  CHECK(te_select(te, te_const_i(te, KILN_BOOL, 1), xf, te_const_f(te, KILN_F32, 2)) == xf);
  CHECK(te_select(te, c, xf, xf) == xf);
  /* two reads of one stage under a select: one read at the selected index (and only there) */
  Expr *i1 = bin(te, TB_ADD, i, I(te, 1)), *i2 = bin(te, TB_ADD, i, I(te, 2)), *k = te_var(te, 1);
  Expr *tap = bin(te, TB_LT, k, I(te, 1)), *tap2 = bin(te, TB_LT, k, I(te, 2));
  Expr *chain = te_select(te, tap, xf, te_select(te, tap2, te_load(te, 0, 1, &i1), te_load(te, 0, 1, &i2)));
  Expr *at = te_select(te, tap, i, te_select(te, tap2, i1, i2));
  CHECK(chain->kind == EX_LOAD && chain->src == 0 && chain->args[0] == at);
  Stage s2 = { .kind = ST_INPUT, .dtype = KILN_F32, .rank = 1, .shape = { 4 }, .numel = 4 };
  CHECK(te_add_stage(te, &s2) == 1);
  Expr *yf = te_load(te, 1, 1, &i);  /* reads of two stages stay a select */
  CHECK(te_select(te, tap, xf, yf)->kind == EX_SELECT);
  te_free(te);
}

static void test_affine(void) {
  TE *te = new_te();
  {  /* te_factor_selects: an im2col tap's select of h, h + 1 and h + 2 is h plus a select of constants */
    Expr *h = te_var(te, 0), *c1 = bin(te, TB_LT, te_var(te, 1), I(te, 3)), *c2 = bin(te, TB_LT, te_var(te, 1), I(te, 6));
    Expr *e = te_select(te, c1, h, te_select(te, c2, bin(te, TB_ADD, h, I(te, 1)), bin(te, TB_ADD, h, I(te, 2))));
    Expr *want = bin(te, TB_ADD, h, te_select(te, c1, I(te, 0), te_select(te, c2, I(te, 1), I(te, 2))));
    CHECK(te_factor_selects(te, e) == want);
    Expr *apart = te_select(te, c1, h, te_var(te, 2));  /* nothing in common: unchanged */
    CHECK(te_factor_selects(te, apart) == apart);
  }
  Expr *i = te_var(te, 0), *j = te_var(te, 1);
  CHECK(bin(te, TB_SUB, bin(te, TB_ADD, i, I(te, 1)), I(te, 1)) == i);
  Expr *e = bin(te, TB_MUL, bin(te, TB_ADD, i, j), I(te, 2));           /* 2i + 2j */
  e = bin(te, TB_SUB, bin(te, TB_SUB, e, j), bin(te, TB_MUL, I(te, 2), i));  /* - j - 2i */
  CHECK(e == j);
  CHECK(bin(te, TB_SUB, i, i) == I(te, 0));
  /* without ranges: only what holds for every value */
  Expr *q = bin(te, TB_ADD, bin(te, TB_MUL, i, I(te, 4)), j);          /* 4i + j */
  CHECK(bin(te, TB_FLOORDIV, bin(te, TB_MUL, i, I(te, 4)), I(te, 4)) == i);
  CHECK(bin(te, TB_MOD, bin(te, TB_ADD, bin(te, TB_MUL, i, I(te, 6)), I(te, 8)), I(te, 3)) == I(te, 2));
  CHECK(bin(te, TB_FLOORDIV, q, I(te, 4))->kind != EX_VAR);            /* j unbounded: stays */
  /* with ranges: j in [0, 3] */
  int64_t lo[2] = { 0, 0 }, hi[2] = { 9, 3 };
  CHECK(te_simplify(te, bin(te, TB_FLOORDIV, q, I(te, 4)), lo, hi, 2) == i);
  CHECK(te_simplify(te, bin(te, TB_MOD, q, I(te, 4)), lo, hi, 2) == j);
  Expr *d12 = te_simplify(te, bin(te, TB_FLOORDIV, q, I(te, 12)), lo, hi, 2);
  CHECK(d12 == bin(te, TB_FLOORDIV, i, I(te, 3)));
  Expr *m12 = te_simplify(te, bin(te, TB_MOD, q, I(te, 12)), lo, hi, 2);
  CHECK(m12 == bin(te, TB_ADD, bin(te, TB_MUL, bin(te, TB_MOD, i, I(te, 3)), I(te, 4)), j));
  CHECK(te_simplify(te, bin(te, TB_MOD, i, I(te, 10)), lo, hi, 2) == i);
  CHECK(te_simplify(te, bin(te, TB_MIN, i, I(te, 9)), lo, hi, 2) == i);
  CHECK(te_simplify(te, bin(te, TB_MAX, j, I(te, 0)), lo, hi, 2) == j);
  Expr *lt = te_simplify(te, bin(te, TB_LT, bin(te, TB_ADD, i, j), I(te, 13)), lo, hi, 2);
  CHECK(lt == te_const_i(te, KILN_BOOL, 1));
  Expr *sel = te_select(te, bin(te, TB_GE, j, I(te, 4)), i, j);
  CHECK(te_simplify(te, sel, lo, hi, 2) == j);
  /* floor(floor(x/a)/b) == floor(x/(a*b)) */
  CHECK(bin(te, TB_FLOORDIV, bin(te, TB_FLOORDIV, i, I(te, 3)), I(te, 5)) == bin(te, TB_FLOORDIV, i, I(te, 15)));
  int64_t mn, mx;
  CHECK(te_range(q, lo, hi, 2, &mn, &mx) && mn == 0 && mx == 39);
  CHECK(te_range(bin(te, TB_MOD, bin(te, TB_SUB, j, I(te, 7)), I(te, 5)), lo, hi, 2, &mn, &mx) && mn == 0 && mx == 4);
  CHECK(!te_range(q, NULL, NULL, 0, &mn, &mx));
  /* a remainder at a point, or over a span of one quotient, is exact (a reshape's k % 64 at k =
   * 767 is 63, not 0..63: the library's operand probes evaluate offsets at points) */
  int64_t at[2] = { 7, 3 }, span_lo[2] = { 4, 0 }, span_hi[2] = { 6, 0 }, wide_lo[2] = { 2, 0 }, wide_hi[2] = { 6, 0 };
  CHECK(te_range(bin(te, TB_MOD, q, I(te, 5)), at, at, 2, &mn, &mx) && mn == 1 && mx == 1);  /* 31 % 5 */
  CHECK(te_range(bin(te, TB_MOD, i, I(te, 8)), span_lo, span_hi, 2, &mn, &mx) && mn == 4 && mx == 6);
  CHECK(te_range(bin(te, TB_MOD, i, I(te, 4)), wide_lo, wide_hi, 2, &mn, &mx) && mn == 0 && mx == 3);
  int64_t neg[2] = { -3, 0 };
  CHECK(te_range(bin(te, TB_MOD, i, I(te, 5)), neg, neg, 2, &mn, &mx) && mn == 2 && mx == 2);  /* floor mod */
  /* a flatten read back through its digits is the flat index again, without ranges: c * (x / c)
   * + x % c == x (here [32,7,7] as 1568: 49 (j/49) + 7 ((j/7) % 7) + j % 7), inside a larger sum
   * too; a pair whose coefficients do not match stays */
  Expr *digits = bin(te, TB_ADD, bin(te, TB_ADD, bin(te, TB_MUL, bin(te, TB_FLOORDIV, i, I(te, 49)), I(te, 49)),
                                    bin(te, TB_MUL, bin(te, TB_MOD, bin(te, TB_FLOORDIV, i, I(te, 7)), I(te, 7)), I(te, 7))),
                     bin(te, TB_MOD, i, I(te, 7)));
  CHECK(digits == i);
  Expr *shifted = bin(te, TB_ADD, bin(te, TB_MUL, bin(te, TB_FLOORDIV, bin(te, TB_ADD, i, j), I(te, 5)), I(te, 15)),
                      bin(te, TB_MUL, bin(te, TB_MOD, bin(te, TB_ADD, i, j), I(te, 5)), I(te, 3)));
  CHECK(shifted == bin(te, TB_MUL, bin(te, TB_ADD, i, j), I(te, 3)));  /* 3 (5 ((i+j)/5) + (i+j) % 5) */
  Expr *unmatched = bin(te, TB_ADD, bin(te, TB_MUL, bin(te, TB_FLOORDIV, i, I(te, 5)), I(te, 4)), bin(te, TB_MOD, i, I(te, 5)));
  CHECK(unmatched != i && te_uses_var(unmatched, 0));
  /* substitution */
  Expr *map[2] = { bin(te, TB_ADD, j, I(te, 1)), I(te, 2) };
  CHECK(te_substitute(te, q, map, 2) == bin(te, TB_ADD, bin(te, TB_MUL, j, I(te, 4)), I(te, 6)));
  te_free(te);
}

static void test_check_out_of_range(void) {
  TE *te = new_te();
  Stage in = { .kind = ST_INPUT, .dtype = KILN_F32, .rank = 1, .shape = { 4 }, .numel = 4, .name = "x" };
  te_add_stage(te, &in);
  Stage s = { .kind = ST_INJECTIVE, .dtype = KILN_F32, .rank = 1, .shape = { 4 }, .numel = 4, .name = "y" };
  Expr *idx = bin(te, TB_ADD, te_var(te, 0), I(te, 1));
  s.body = te_load(te, 0, 1, &idx);
  te_add_stage(te, &s);
  FAILS(KILN_ERR_INVALID_ARG, te_check(te));
  CHECK(strstr(kiln_last_error(), "out of range") != NULL);
  te->stages[1].shape[0] = 3;
  te->stages[1].numel = 3;
  OK(te_check(te));
  Expr *h = te_load(te, 0, 1, &idx);
  te->stages[1].body = te_cast(te, KILN_F32, te_unary(te, TU_EXP, te_cast(te, KILN_F16, h)));
  FAILS(KILN_ERR_INVALID_ARG, te_check(te));  /* f16 arithmetic must go through f32 */
  te_free(te);
}

/* te_unclamp_guarded: inside a float select's then-branch, a clamp of x to lo..hi goes where
 * the condition bounds x within it (x >= 0 && x < 14 implies max(x, 0) = x and min(x, 13) = x),
 * and stays where it does not (min(x, 9): x may be 10..13 there), as it does outside a select,
 * in the else-branch and in an int select. */
static void test_unclamp_guarded(void) {
  TE *te = new_te();
  Stage in = { .kind = ST_INPUT, .dtype = KILN_F32, .rank = 1, .shape = { 14 }, .numel = 14, .name = "x" };
  CHECK(te_add_stage(te, &in) == 0);
  Expr *x = bin(te, TB_SUB, te_var(te, 0), I(te, 1));
  Expr *guard = bin(te, TB_AND, bin(te, TB_GE, x, I(te, 0)), bin(te, TB_LT, x, I(te, 14)));
  Expr *clamp13 = bin(te, TB_MIN, bin(te, TB_MAX, x, I(te, 0)), I(te, 13));
  Expr *clamp9 = bin(te, TB_MIN, bin(te, TB_MAX, x, I(te, 0)), I(te, 9));
  Expr *zero = te_const_f(te, KILN_F32, 0);
  Expr *load13 = te_load(te, 0, 1, &clamp13), *load9 = te_load(te, 0, 1, &clamp9), *plain = te_load(te, 0, 1, &x);
  CHECK(te_unclamp_guarded(te, te_select(te, guard, load13, zero)) == te_select(te, guard, plain, zero));
  Expr *max_only = bin(te, TB_MIN, x, I(te, 9));
  CHECK(te_unclamp_guarded(te, te_select(te, guard, load9, zero)) == te_select(te, guard, te_load(te, 0, 1, &max_only), zero));
  /* the other branch and code outside a select keep their clamps */
  Expr *other = te_select(te, guard, zero, load13);
  CHECK(te_unclamp_guarded(te, other) == other);
  Expr *sum = bin(te, TB_ADD, load13, te_select(te, guard, load13, zero));
  CHECK(te_unclamp_guarded(te, sum) == bin(te, TB_ADD, load13, te_select(te, guard, plain, zero)));
  /* a mirrored comparison (0 <= x, 13 >= x) says the same */
  Expr *mirrored = bin(te, TB_AND, bin(te, TB_LE, I(te, 0), x), bin(te, TB_GE, I(te, 13), x));
  CHECK(te_unclamp_guarded(te, te_select(te, mirrored, load13, zero)) == te_select(te, mirrored, plain, zero));
  /* an int select is left alone: only float selects are evaluated lazily */
  Expr *ints = te_select(te, guard, clamp13, I(te, 0));
  CHECK(te_unclamp_guarded(te, ints) == ints);
  te_free(te);
}

int main(void) {
  test_unclamp_guarded();
  test_hash_consing();
  test_folding();
  test_identities();
  test_affine();
  test_check_out_of_range();
  TEST_MAIN_END();
}
