/*
 * Bitwise and/or/xor/not through the public API. On every integer dtype (i8..i64, u8..u64)
 * and/or/xor of two same-dtype operands and not of one are bitwise; the expected bits are
 * computed here from the raw input bits with a width mask, independent of kiln. Patterns
 * include zero, all ones (-1 signed, max unsigned), the sign bit alone, alternating bits,
 * small negatives and an irregular pattern. Also: a fused chain ((a & b) ^ ~c) | d, a
 * broadcast, operands that are constants (folded at graph level) and scalars (identities in
 * the expression layer), bool staying logical, and float / mixed-dtype operands rejected.
 */
#include "ops_util.h"

#define NPAT 10
/* 64-bit patterns; each dtype keeps its low bits (two's complement for signed). */
static const uint64_t pat_a[NPAT] = {
  0, UINT64_MAX, UINT64_C(0x8000000000000080), UINT64_C(0x5555555555555555), UINT64_C(0xaaaaaaaaaaaaaaaa),
  1, (uint64_t)-2, UINT64_C(0x5a3cf00fc3a51e69), (uint64_t)INT64_MIN, UINT64_C(0x7fffffffffffff7f)};
static const uint64_t pat_b[NPAT] = {
  UINT64_MAX, UINT64_MAX, UINT64_C(0xffffffffffffff80), UINT64_C(0xaaaaaaaaaaaaaaaa), UINT64_C(0x0f0f0f0f0f0f0f0f),
  0, (uint64_t)-3, UINT64_C(0x96c3e1f0781e0f87), 1, UINT64_C(0x8000000000000080)};
static const uint64_t pat_c[NPAT] = {
  0, 0x80, UINT64_MAX, 0x7f, (uint64_t)-128, UINT64_C(0x1234567890abcdef), 3, 0, UINT64_MAX, 2};

static const char *const op_name[3] = {"and", "or", "xor"};
static const kiln_binary_op op_kind[3] = {KILN_AND, KILN_OR, KILN_XOR};

static uint64_t width_mask(kiln_dtype t) {
  int bits = ou_bits(t);
  return bits == 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1;
}

static uint64_t bitop(int k, uint64_t a, uint64_t b) {
  return k == 0 ? (a & b) : k == 1 ? (a | b) : (a ^ b);
}

/* and/or/xor on each int dtype, elementwise over the pattern pairs. */
static void binary_all_dtypes(void) {
  int64_t s[1] = {NPAT};
  for (int d = 0; d < 8; d++) {
    kiln_dtype t = ou_int_dtypes[d];
    uint64_t m = width_mask(t), a[NPAT], b[NPAT];
    for (int i = 0; i < NPAT; i++) { a[i] = pat_a[i] & m; b[i] = pat_b[i] & m; }
    for (int k = 0; k < 3; k++) {
      Case c;
      cs_begin(&c, "%s %s", op_name[k], ou_dt(t));
      kiln_tensor x = cs_in_raw(&c, t, 1, s, a), y = cs_in_raw(&c, t, 1, s, b), z = -1;
      COK(&c, kiln_graph_binary(c.g, op_kind[k], x, y, &z));
      uint64_t want[NPAT];
      for (int i = 0; i < NPAT; i++) want[i] = bitop(k, a[i], b[i]) & m;
      if (cs_run1(&c, z)) cs_expect_raw(&c, 0, t, 1, s, want);
      cs_end(&c);
    }
  }
}

/* not on each int dtype: the complement within the width (~0 is all ones, ~-1 is 0). */
static void not_all_dtypes(void) {
  int64_t s[1] = {NPAT};
  for (int d = 0; d < 8; d++) {
    kiln_dtype t = ou_int_dtypes[d];
    uint64_t m = width_mask(t), a[NPAT], want[NPAT];
    for (int i = 0; i < NPAT; i++) { a[i] = pat_a[i] & m; want[i] = ~a[i] & m; }
    Case c;
    cs_begin(&c, "not %s", ou_dt(t));
    kiln_tensor x = cs_in_raw(&c, t, 1, s, a), z = -1;
    COK(&c, kiln_graph_unary(c.g, KILN_NOT, x, &z));
    if (cs_run1(&c, z)) cs_expect_raw(&c, 0, t, 1, s, want);
    cs_end(&c);
  }
}

/* ((a & b) ^ ~c) | d in one graph (one fused kernel on compiled backends), every int dtype. */
static void chain_all_dtypes(void) {
  int64_t s[1] = {NPAT};
  for (int d = 0; d < 8; d++) {
    kiln_dtype t = ou_int_dtypes[d];
    uint64_t m = width_mask(t), a[NPAT], b[NPAT], cc[NPAT], dd[NPAT], want[NPAT];
    for (int i = 0; i < NPAT; i++) {
      a[i] = pat_a[i] & m; b[i] = pat_b[i] & m; cc[i] = pat_c[i] & m;
      dd[i] = (i % 3 == 0 ? pat_c[(i + 1) % NPAT] : 0) & m;
      want[i] = (((a[i] & b[i]) ^ ~cc[i]) | dd[i]) & m;
    }
    Case c;
    cs_begin(&c, "((a & b) ^ ~c) | d %s", ou_dt(t));
    kiln_tensor xa = cs_in_raw(&c, t, 1, s, a), xb = cs_in_raw(&c, t, 1, s, b);
    kiln_tensor xc = cs_in_raw(&c, t, 1, s, cc), xd = cs_in_raw(&c, t, 1, s, dd);
    kiln_tensor ab = -1, nc = -1, x = -1, z = -1;
    COK(&c, kiln_graph_binary(c.g, KILN_AND, xa, xb, &ab));
    COK(&c, kiln_graph_unary(c.g, KILN_NOT, xc, &nc));
    COK(&c, kiln_graph_binary(c.g, KILN_XOR, ab, nc, &x));
    COK(&c, kiln_graph_binary(c.g, KILN_OR, x, xd, &z));
    if (cs_run1(&c, z)) cs_expect_raw(&c, 0, t, 1, s, want);
    cs_end(&c);
  }
}

/* [2,1] op [3] with signed bytes (negative values), expected from an explicit index map. */
static void broadcast_case(void) {
  int64_t sa[2] = {2, 1}, sb[1] = {3}, so[2] = {2, 3};
  uint64_t a[2] = {0xf0, 0x81}, b[3] = {0xff, 0x0f, 0x7e};  /* i8: -16, -127; -1, 15, 126 */
  for (int k = 0; k < 3; k++) {
    Case c;
    cs_begin(&c, "%s i8 broadcast [2,1]x[3]", op_name[k]);
    kiln_tensor x = cs_in_raw(&c, KILN_I8, 2, sa, a), y = cs_in_raw(&c, KILN_I8, 1, sb, b), z = -1;
    COK(&c, kiln_graph_binary(c.g, op_kind[k], x, y, &z));
    uint64_t want[6];
    for (int i = 0; i < 2; i++)
      for (int j = 0; j < 3; j++) want[i * 3 + j] = bitop(k, a[i], b[j]) & 0xff;
    if (cs_run1(&c, z)) cs_expect_raw(&c, 0, KILN_I8, 2, so, want);
    cs_end(&c);
  }
}

/* Constant operands (the graph folds them) and scalar literals (x & 0, x | 0, x ^ -1 are
 * identities or constants in the expression layer); i32 and u16, negatives included. */
static void constant_cases(void) {
  static const kiln_dtype ts[2] = {KILN_I32, KILN_U16};
  int64_t s[1] = {NPAT};
  for (int d = 0; d < 2; d++) {
    kiln_dtype t = ts[d];
    uint64_t m = width_mask(t), a[NPAT], b[NPAT];
    for (int i = 0; i < NPAT; i++) { a[i] = pat_a[i] & m; b[i] = pat_c[i] & m; }
    {
      Case c;
      cs_begin(&c, "folded constants %s", ou_dt(t));
      /* little-endian: the low bytes of each pattern are the element */
      unsigned char ra[NPAT * 8], rb[NPAT * 8];
      for (int i = 0; i < NPAT; i++) {
        ou_set_raw(t, ra, i, a[i]);
        ou_set_raw(t, rb, i, b[i]);
      }
      kiln_tensor ca = -1, cb = -1, o[4] = {-1, -1, -1, -1};
      COK(&c, kiln_graph_const(c.g, t, 1, s, ra, &ca));
      COK(&c, kiln_graph_const(c.g, t, 1, s, rb, &cb));
      for (int k = 0; k < 3; k++) COK(&c, kiln_graph_binary(c.g, op_kind[k], ca, cb, &o[k]));
      COK(&c, kiln_graph_unary(c.g, KILN_NOT, ca, &o[3]));
      if (cs_run(&c, 4, o)) {
        uint64_t want[NPAT];
        for (int k = 0; k < 3; k++) {
          for (int i = 0; i < NPAT; i++) want[i] = bitop(k, a[i], b[i]) & m;
          cs_expect_raw(&c, k, t, 1, s, want);
        }
        for (int i = 0; i < NPAT; i++) want[i] = ~a[i] & m;
        cs_expect_raw(&c, 3, t, 1, s, want);
      }
      cs_end(&c);
    }
    {
      Case c;
      cs_begin(&c, "scalar operands %s", ou_dt(t));
      kiln_tensor x = cs_in_raw(&c, t, 1, s, a), zero = -1, ones = -1, nib = -1;
      kiln_tensor o[4] = {-1, -1, -1, -1};
      double all = t == KILN_I32 ? -1.0 : 65535.0;
      COK(&c, kiln_graph_scalar(c.g, t, 0, &zero));
      COK(&c, kiln_graph_scalar(c.g, t, all, &ones));
      COK(&c, kiln_graph_scalar(c.g, t, 0x0f, &nib));
      COK(&c, kiln_graph_binary(c.g, KILN_AND, x, zero, &o[0]));
      COK(&c, kiln_graph_binary(c.g, KILN_OR, zero, x, &o[1]));
      COK(&c, kiln_graph_binary(c.g, KILN_XOR, x, ones, &o[2]));
      COK(&c, kiln_graph_binary(c.g, KILN_AND, nib, x, &o[3]));
      if (cs_run(&c, 4, o)) {
        uint64_t w[4][NPAT];
        for (int i = 0; i < NPAT; i++) {
          w[0][i] = 0;
          w[1][i] = a[i];
          w[2][i] = (a[i] ^ m) & m;
          w[3][i] = a[i] & 0x0f;
        }
        for (int k = 0; k < 4; k++) cs_expect_raw(&c, k, t, 1, s, w[k]);
      }
      cs_end(&c);
    }
  }
}

/* bool stays logical: truth tables for and/or/xor, and not. */
static void bool_cases(void) {
  int64_t s4[1] = {4};
  double a[4] = {0, 0, 1, 1}, b[4] = {0, 1, 0, 1};
  static const double tt[3][4] = {{0, 0, 0, 1}, {0, 1, 1, 1}, {0, 1, 1, 0}};
  for (int k = 0; k < 3; k++) {
    Case c;
    cs_begin(&c, "%s bool truth table", op_name[k]);
    kiln_tensor x = cs_in(&c, KILN_BOOL, 1, s4, a), y = cs_in(&c, KILN_BOOL, 1, s4, b), z = -1;
    COK(&c, kiln_graph_binary(c.g, op_kind[k], x, y, &z));
    if (cs_run1(&c, z)) cs_expect_exact(&c, 0, KILN_BOOL, 1, s4, tt[k]);
    cs_end(&c);
  }
  {
    Case c;
    cs_begin(&c, "not bool and (not a) xor b");
    kiln_tensor x = cs_in(&c, KILN_BOOL, 1, s4, a), y = cs_in(&c, KILN_BOOL, 1, s4, b), o[2] = {-1, -1};
    COK(&c, kiln_graph_unary(c.g, KILN_NOT, x, &o[0]));
    COK(&c, kiln_graph_binary(c.g, KILN_XOR, o[0], y, &o[1]));
    double wn[4] = {1, 1, 0, 0}, wx[4] = {1, 0, 0, 1};
    if (cs_run(&c, 2, o)) {
      cs_expect_exact(&c, 0, KILN_BOOL, 1, s4, wn);
      cs_expect_exact(&c, 1, KILN_BOOL, 1, s4, wx);
    }
    cs_end(&c);
  }
}

/* Floats are rejected for all four; and/or/xor need one int dtype on both sides. */
static void reject_cases(void) {
  int64_t s3[1] = {3};
  for (int d = 0; d < 4; d++) {
    kiln_dtype t = ou_float_dtypes[d];
    Case c;
    cs_begin(&c, "reject bitwise on %s", ou_dt(t));
    kiln_tensor f = cs_in(&c, t, 1, s3, NULL), g = cs_in(&c, t, 1, s3, NULL), z = -1;
    for (int k = 0; k < 3; k++) CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_binary(c.g, op_kind[k], f, g, &z));
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_unary(c.g, KILN_NOT, f, &z));
    cs_end(&c);
  }
  {
    Case c;
    cs_begin(&c, "reject bitwise on mixed dtypes");
    kiln_tensor i = cs_in(&c, KILN_I32, 1, s3, NULL), u = cs_in(&c, KILN_U32, 1, s3, NULL);
    kiln_tensor l = cs_in(&c, KILN_I64, 1, s3, NULL), b = cs_in(&c, KILN_BOOL, 1, s3, NULL), z = -1;
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_binary(c.g, KILN_AND, i, u, &z));
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_binary(c.g, KILN_OR, i, l, &z));
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_binary(c.g, KILN_XOR, b, u, &z));
    cs_end(&c);
  }
}

int main(void) {
  if (!ou_backend_available()) return 0;
  binary_all_dtypes();
  not_all_dtypes();
  chain_all_dtypes();
  broadcast_case();
  constant_cases();
  bool_cases();
  reject_cases();
  OU_MAIN_END("bitwise");
}
