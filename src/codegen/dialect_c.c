/*
 * dialect_c.c — the C dialect: strings and names only. The prelude is the C head and the
 * shared scalar helpers (src/base/scalar.inc, whose semantics te_eval_* defines: integer
 * division by zero gives 0, float max/min propagate NaN, float->int casts truncate and
 * saturate, f16/bf16 round to nearest even), then the vectorisable exp, tanh, erf and
 * sigmoid (src/base/vmath.inc, which the cpu library GEMM compiles too) and the register
 * tile; render.c decides where each is used. Every thread of the runtime's team calls each
 * kernel (its place kiln_tid of kiln_nt); OpenMP only vectorises (omp simd).
 */
#include "codegen.h"
#include "../base/scalar.h"

static const char prelude[] =
  /* A vector value pinned to a register. GCC folds a vector load into each multiply-add that
   * uses it, so a direct convolution's row vector, used once for each of a task's output
   * channels, was loaded again for each: 36 loads for 24 multiply-adds a tap row, and the loads
   * bound the loop (res128_14's 3x3 over 128 channels, AVX2: 1.4-1.9 ms -> 0.8 ms a kernel,
   * bench/results/2026-12-07-cpu-keep-vectors.md). An empty asm that takes and gives the value
   * in a vector register leaves GCC one load to make. */
  "#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))\n"
  "#define K_KEEP(v) __asm__(\"\" : \"+v\"(v))\n"
  "#else\n"
  "#define K_KEEP(v) ((void)0)\n"
  "#endif\n"
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
  "}\n"
  /* The tile out of line, for kernels whose packs round to bf16 or f16: inlined there, the packing
   * loops' rounding masks kept vector registers across the tile, and GCC moved 4 of its 12
   * accumulators to the stack (mlp_train_b1024_bf16amp's weight gradient, AVX2). Elsewhere an
   * out-of-line tile was slower (bench/results/2026-12-06-cpu-packed-groups.md). */
  "static __attribute__((noinline, unused)) void k_tile_apart(const float *restrict R, const float *restrict P, int64_t K,\n"
  "                                                         float *restrict D) {\n"
  "  k_tile(R, P, K, D);\n"
  "}\n"
  /* The same tile with its rows read in place, each from its own pointer (contiguous along k):
   * for an operand of many rows over a long sum (a convolution's weights over 256 or 512
   * channels) packing each row tile cost as much as its multiply-adds. */
  "KI void k_tile_rows(const float *const *restrict A, const float *restrict P, int64_t K, float *restrict D) {\n"
  "  k_vf c00 = { 0 }, c01 = { 0 }, c10 = { 0 }, c11 = { 0 }, c20 = { 0 }, c21 = { 0 };\n"
  "  k_vf c30 = { 0 }, c31 = { 0 }, c40 = { 0 }, c41 = { 0 }, c50 = { 0 }, c51 = { 0 };\n"
  "  const float *a0 = A[0], *a1 = A[1], *a2 = A[2], *a3 = A[3], *a4 = A[4], *a5 = A[5];\n"
  "  for (int64_t k = 0; k < K; k++, P += KILN_NR) {\n"
  "    k_vf b0 = *(const k_vf *)P, b1 = *(const k_vf *)(P + KILN_VW);\n"
  "    c00 += a0[k] * b0, c01 += a0[k] * b1, c10 += a1[k] * b0, c11 += a1[k] * b1;\n"
  "    c20 += a2[k] * b0, c21 += a2[k] * b1, c30 += a3[k] * b0, c31 += a3[k] * b1;\n"
  "    c40 += a4[k] * b0, c41 += a4[k] * b1, c50 += a5[k] * b0, c51 += a5[k] * b1;\n"
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
  .prelude_math = kiln_vmath_c_source,
  .prelude = prelude,
  .inf_f32 = "INFINITY", .inf_f64 = "((double)INFINITY)", .nan_f32 = "NAN", .nan_f64 = "((double)NAN)",
  .unary_f32 = CG_C_UNARY_F32("k_expf", "k_tanhf", "k_erff", "nearbyintf"),
  .unary_f64 = CG_C_UNARY_F64("nearbyint"),
  .kernel_prefix = "void",
  .buf_restrict = "restrict",
  .trampoline = "void %s(void *const *a, int kiln_tid, int kiln_nt) { %s(",
  .trampoline_arg = "a[%d]",
  .trampoline_end = ", kiln_tid, kiln_nt); }\n",
  .team_params = ", int kiln_tid, int kiln_nt",
  .min_parallel_work = 32768,
  .simd = "#pragma omp simd",
  .simd_len = "#pragma omp simd simdlen(%d)",
  .array_align = " __attribute__((aligned(64)))",
  .tile = "k_tile",
  .tile_apart = "k_tile_apart",
  .tile_rows = "k_tile_rows",
  .simd_sum = "#pragma omp simd%s",
  .simd_reduce = " reduction(%s:%s)",
  .simd_reduce_op = { [RO_SUM] = "+", [RO_PROD] = "*", [RO_MAX] = "max", [RO_MIN] = "min" },
  .simd_reduce_or = "|",
  .grid = false,
};
