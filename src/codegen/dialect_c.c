/*
 * dialect_c.c — the C dialect: strings and names only. The prelude is the C head and the
 * shared scalar helpers (src/base/scalar.inc, whose semantics te_eval_* defines: integer
 * division by zero gives 0, float max/min propagate NaN, float->int casts truncate and
 * saturate, f16/bf16 round to nearest even), then the C dialect's own vectorisable exp,
 * tanh, erf and sigmoid; render.c decides where each is used. Kernels run under OpenMP.
 */
#include "codegen.h"
#include "../base/scalar.h"

static const char prelude[] =
  /* exp and tanh in f32, branch-free so loops over them vectorise (glibc's are scalar
   * calls, tanhf ~30 ns): Cody-Waite reduction and a degree-6 polynomial, <= 1.01 ulp;
   * tanh from a polynomial below 0.625, else 1 - 2/(exp(2|x|)+1), <= 1.21 ulp. */
  "KI float k_expf(float x) {\n"
  "  float xc = x > -104.0f ? x : -104.0f;\n"
  "  xc = xc < 89.0f ? xc : 89.0f;  /* ternaries, not fminf: they inline as minps/maxps */\n"
  "  float k = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;\n"
  "  float r = xc - k * 0.693359375f;\n"
  "  r = r + k * 2.12194440e-4f;\n"
  "  float p = 1.9875691500e-4f;\n"
  "  p = p * r + 1.3981999507e-3f;\n"
  "  p = p * r + 8.3334519073e-3f;\n"
  "  p = p * r + 4.1665795894e-2f;\n"
  "  p = p * r + 1.6666665459e-1f;\n"
  "  p = p * r + 5.0000001201e-1f;\n"
  "  float y = p * r * r + r + 1.0f;\n"
  "  int32_t ki = (int32_t)k, k1 = ki >> 1, k2 = ki - k1;\n"
  "  y = y * k_bits_f32((uint32_t)(k1 + 127) << 23) * k_bits_f32((uint32_t)(k2 + 127) << 23);\n"
  "  y = x > 88.72283935546875f ? INFINITY : y;\n"
  "  return x != x ? x : y;\n"
  "}\n"
  "KI float k_tanhf(float x) {\n"
  "  float a = fabsf(x), z = x * x;\n"
  "  float p = -5.70498872745e-3f;\n"
  "  p = p * z + 2.06390887954e-2f;\n"
  "  p = p * z - 5.37397155531e-2f;\n"
  "  p = p * z + 1.33314422036e-1f;\n"
  "  p = p * z - 3.33332819422e-1f;\n"
  "  float small = a + a * (p * z);\n"
  "  float e = k_expf(2.0f * (a < 20.0f ? a : 20.0f));\n"
  "  float big = 1.0f - 2.0f / (e + 1.0f);\n"
  "  float t = copysignf(a < 0.625f ? small : big, x);  /* odd: keeps the sign of -0 */\n"
  "  return x != x ? x : t;\n"
  "}\n"
  /* erf in f32, branch-free so GELU's loops vectorise (glibc's erff is a scalar call, ~9%
   * of encoder4_d256 on one thread): |x| < 1 as |x| P(x^2), beyond as 1 - exp(-x^2) R(|x|)
   * with R = erfc(x) exp(x^2) on [1, 4]; both Chebyshev interpolants (degrees 7 and 12)
   * rewritten as monomials in the centred variable. Measured against double erf on every
   * 7th f32 in [0, 10]: <= 2.0 ulp, <= 1.0e-7 absolute; keeps NaN, -0 and +-inf -> +-1. */
  "KI float k_erff(float x) {\n"
  "  float a = fabsf(x), z = x * x;\n"
  "  float u = 2.0f * z - 1.0f;  /* |x| < 1: erf = |x| P(x^2), P on [0, 1] in u = 2x^2 - 1 */\n"
  "  float p = -7.5523795218e-08f;\n"
  "  p = p * u + 1.2316395890e-06f;\n"
  "  p = p * u - 1.7536914157e-05f;\n"
  "  p = p * u + 2.1751199063e-04f;\n"
  "  p = p * u - 2.2854856122e-03f;\n"
  "  p = p * u + 1.9852497722e-02f;\n"
  "  p = p * u - 1.4053608902e-01f;\n"
  "  p = p * u + 9.6546873864e-01f;\n"
  "  float b = a < 4.0f ? a : 4.0f;  /* erfc(4) = 1.5e-8: erf rounds to 1 beyond */\n"
  "  float s = (b - 2.5f) * (1.0f / 1.5f);  /* |x| >= 1: erfc = exp(-x^2) R(|x|), R on [1, 4] */\n"
  "  float r = 1.3365836026e-05f;\n"
  "  r = r * s - 3.6888910623e-05f;\n"
  "  r = r * s + 5.6303575917e-05f;\n"
  "  r = r * s - 1.4405779312e-04f;\n"
  "  r = r * s + 4.1298692297e-04f;\n"
  "  r = r * s - 1.0170089401e-03f;\n"
  "  r = r * s + 2.4024874305e-03f;\n"
  "  r = r * s - 5.5673803229e-03f;\n"
  "  r = r * s + 1.2489520418e-02f;\n"
  "  r = r * s - 2.7005716871e-02f;\n"
  "  r = r * s + 5.6110488190e-02f;\n"
  "  r = r * s - 1.1152100511e-01f;\n"
  "  r = r * s + 2.1080636406e-01f;\n"
  "  float big = 1.0f - k_expf(-b * b) * r;\n"
  "  float e = copysignf(a < 1.0f ? a * p : big, x);\n"
  "  return x != x ? x : e;\n"
  "}\n"
  "KI float k_sigf(float x) { float e = k_expf(x < 0 ? x : -x); return x >= 0 ? 1.0f / (1.0f + e) : e / (1.0f + e); }\n"
  /* The register tile of cpu_tile.c: D[KILN_MR][KILN_NR] = sum over k of R[k][i] P[k][j], R and
   * P packed [K][KILN_MR] and [K][KILN_NR]. Twelve vector accumulators written out so that they
   * stay in registers (AVX2 has 16, AVX-512 32); the width is the compiler's, from -march. */
  "#if defined(__AVX512F__)\n"
  "#define KILN_VW 16\n"
  "#else\n"
  "#define KILN_VW 8\n"
  "#endif\n"
  "#define KILN_MR 6\n"
  "#define KILN_NR (2 * KILN_VW)\n"
  "typedef float k_vf __attribute__((vector_size(KILN_VW * 4), aligned(4)));\n"
  "KI void k_tile(const float *restrict R, const float *restrict P, int64_t K, float *restrict D) {\n"
  "  k_vf c00 = { 0 }, c01 = { 0 }, c10 = { 0 }, c11 = { 0 }, c20 = { 0 }, c21 = { 0 };\n"
  "  k_vf c30 = { 0 }, c31 = { 0 }, c40 = { 0 }, c41 = { 0 }, c50 = { 0 }, c51 = { 0 };\n"
  "  for (int64_t k = 0; k < K; k++, R += KILN_MR, P += KILN_NR) {\n"
  "    k_vf b0 = *(const k_vf *)P, b1 = *(const k_vf *)(P + KILN_VW);\n"
  "    c00 += R[0] * b0, c01 += R[0] * b1, c10 += R[1] * b0, c11 += R[1] * b1;\n"
  "    c20 += R[2] * b0, c21 += R[2] * b1, c30 += R[3] * b0, c31 += R[3] * b1;\n"
  "    c40 += R[4] * b0, c41 += R[4] * b1, c50 += R[5] * b0, c51 += R[5] * b1;\n"
  "  }\n"
  "  k_vf all[12] = { c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51 };\n"
  "  memcpy(D, all, sizeof all);\n"
  "}\n";

const Dialect cg_dialect_c = {
  CG_C_FAMILY,
  .name = "c",
  .index32_type = "int32_t",
  .prelude_head = kiln_scalar_c_head,
  .prelude_scalar = kiln_scalar_source,
  .prelude = prelude,
  .inf_f32 = "INFINITY", .inf_f64 = "((double)INFINITY)", .nan_f32 = "NAN", .nan_f64 = "((double)NAN)",
  .unary_f32 = CG_C_UNARY_F32("k_expf", "k_tanhf", "k_erff", "nearbyintf"),
  .unary_f64 = CG_C_UNARY_F64("nearbyint"),
  .kernel_prefix = "void",
  .buf_restrict = "restrict",
  .trampoline = "void %s(void *const *a) { %s(",
  .trampoline_arg = "a[%d]",
  .trampoline_end = "); }\n",
  .group_open = "void %s(void *const *a) {\n",
  .group_call_end = ");\n",
  .group_close = "}\n",
  .parallel_for = "#pragma omp parallel for schedule(static)",
  .min_parallel_work = 32768,
  .parallel_for_simd = "#pragma omp parallel for simd schedule(static)",
  .simd = "#pragma omp simd",
  .array_align = " __attribute__((aligned(64)))",
  .tile = "k_tile",
  .simd_sum = "#pragma omp simd%s",
  .simd_reduce = " reduction(%s:%s)",
  .simd_reduce_op = { [RO_SUM] = "+", [RO_PROD] = "*", [RO_MAX] = "max", [RO_MIN] = "min" },
  .simd_reduce_or = "|",
  .grid = false,
};
