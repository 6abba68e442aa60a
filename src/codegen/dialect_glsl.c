/*
 * dialect_glsl.c — GLSL 4.60 compute shaders for Vulkan (the vulkan backend compiles them
 * with shaderc). Strings and names only, like every dialect.
 *
 * How the source is shaped, and why:
 *   - A GLSL module has one entry point (main), so every kernel sits between
 *     "#if KILN_KERNEL == <n>" and "#endif"; the backend compiles the one source once a
 *     kernel with KILN_KERNEL defined. The prelude is shared.
 *   - Buffers are device addresses (GL_EXT_buffer_reference), so the runtime's buffers are
 *     64-bit addresses with offsets like CUDA's, and no descriptor set is needed. main()
 *     reads the kernel's buffer addresses from a table whose address is a push constant,
 *     with the grid (in blocks) beside it; its workgroups are laid out over x and y (x is at
 *     most 65535 on some devices), and the surplus of the last row returns at once.
 *   - Fixed-width types come from GL_EXT_shader_explicit_arithmetic_types, so the C names
 *     (int64_t, uint8_t, ...) are GLSL types too; bool is a type of its own, stored as
 *     uint8_t. Array indices must be 32-bit: elements are indexed through uint().
 *   - GLSL.std.450 has no f64 exp, log, tanh, erf, sin, cos or pow: those are NULL here, and
 *     the renderer refuses them by name (a missing capability, never a trip through f32).
 *   - The scalar helpers have te_eval_*'s semantics (src/base/scalar.inc), written again in
 *     GLSL: there are no C casts, pointers or unions to share them with.
 *   - Block reductions (a block a row) use subgroup shuffles where the device has them
 *     (KILN_SUBGROUPS, defined by device.c), else a tree in shared memory; both fold in a
 *     fixed order. There are no warp rows or launch groups yet (cg_kernel_shape falls back
 *     to one thread an outer point).
 *   - GEMM tiles (gemm.c): shared arrays must be at module scope in GLSL (shared_at_module:
 *     each kernel's part of the source declares its own), and GLSL has no pointers, so no
 *     view of an array as another shape (no_views): the k groups' tiles are rows of vec4
 *     indexed [k][m / 4][m % 4], and there is no split-K (no module-scope device arrays).
 */
#include "codegen.h"

static const char prelude[] =
  "#version 460\n"
  "#extension GL_EXT_buffer_reference : require\n"
  "#extension GL_EXT_shader_explicit_arithmetic_types : require\n"
  "#extension GL_EXT_shader_8bit_storage : require\n"
  "#extension GL_EXT_shader_16bit_storage : require\n"
  /* the float controls the device promises (device.c passes them as -D flags): NaN, inf and
   * signed zeros kept through every rewrite; subnormals kept, not flushed */
  "#extension GL_EXT_control_flow_attributes : require\n"
  /* block reductions: subgroup shuffles where the device has them (device.c says so) */
  "#ifdef KILN_SUBGROUPS\n"
  "#extension GL_KHR_shader_subgroup_basic : require\n"
  "#extension GL_KHR_shader_subgroup_shuffle : require\n"
  "#endif\n"
  "#if defined(KILN_NAN_PRESERVE32) || defined(KILN_DENORM_PRESERVE32)\n"
  "#extension GL_EXT_spirv_intrinsics : require\n"
  "#endif\n"
  "#ifdef KILN_NAN_PRESERVE32\n"
  "spirv_execution_mode(extensions = [\"SPV_KHR_float_controls\"], capabilities = [4466], 4461, 32);\n"
  "#endif\n"
  "#ifdef KILN_NAN_PRESERVE64\n"
  "spirv_execution_mode(extensions = [\"SPV_KHR_float_controls\"], capabilities = [4466], 4461, 64);\n"
  "#endif\n"
  "#ifdef KILN_DENORM_PRESERVE32\n"
  "spirv_execution_mode(extensions = [\"SPV_KHR_float_controls\"], capabilities = [4464], 4459, 32);\n"
  "#endif\n"
  "#ifdef KILN_DENORM_PRESERVE64\n"
  "spirv_execution_mode(extensions = [\"SPV_KHR_float_controls\"], capabilities = [4464], 4459, 64);\n"
  "#endif\n"
  /* a buffer of each element type, named K<type> (the entry's arguments); KILN_BUF_RESTRICT
   * (a race, KILN_VULKAN_DEFINES): every buffer restrict, as if no two parameters aliased */
  "#ifdef KILN_BUF_RESTRICT\n"
  "#define K_BUFQ restrict\n"
  "#else\n"
  "#define K_BUFQ\n"
  "#endif\n"
  "layout(buffer_reference, std430, buffer_reference_align = 4) K_BUFQ buffer Kfloat { float v[]; };\n"
  "layout(buffer_reference, std430, buffer_reference_align = 8) buffer Kdouble { double v[]; };\n"
  "layout(buffer_reference, std430, buffer_reference_align = 8) buffer Kint64_t { int64_t v[]; };\n"
  "layout(buffer_reference, std430, buffer_reference_align = 8) buffer Kuint64_t { uint64_t v[]; };\n"
  "layout(buffer_reference, std430, buffer_reference_align = 4) buffer Kint32_t { int32_t v[]; };\n"
  "layout(buffer_reference, std430, buffer_reference_align = 4) buffer Kuint32_t { uint32_t v[]; };\n"
  "layout(buffer_reference, std430, buffer_reference_align = 2) buffer Kint16_t { int16_t v[]; };\n"
  "layout(buffer_reference, std430, buffer_reference_align = 2) buffer Kuint16_t { uint16_t v[]; };\n"
  "layout(buffer_reference, std430, buffer_reference_align = 1) buffer Kint8_t { int8_t v[]; };\n"
  "layout(buffer_reference, std430, buffer_reference_align = 1) buffer Kuint8_t { uint8_t v[]; };\n"
  "layout(buffer_reference, std430, buffer_reference_align = 16) K_BUFQ buffer Kvec4 { vec4 v[]; };\n"  /* 16-byte f32 loads */
  "layout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer Kargs { uint64_t p[]; };\n"
  /* a kernel of at most 13 buffers (direct_args) finds their addresses in the push constants
   * (120 bytes: 128 is every device's least limit); a larger one reads them from the table at
   * `args`, and so does every kernel where KILN_ARGS_TABLE is defined (KILN_VULKAN_ARGS=table) */
  "layout(push_constant) uniform Kpush { Kargs args; uint grid, pad; uint64_t a[13]; } k_pc;\n"
  "#ifdef KILN_ARGS_TABLE\n"
  "#define K_DIRECT(i) k_pc.args.p[i]\n"
  "#else\n"
  "#define K_DIRECT(i) k_pc.a[i]\n"
  "#endif\n"
  /* the block size, a specialization constant set at launch; declared before the helpers,
   * which would otherwise see gl_WorkGroupSize as (1, 1, 1) */
  "layout(local_size_x_id = 0) in;\n"
  "#define k_bid (gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x)\n"
  "#define INT64_MIN (-9223372036854775807l - 1l)\n"
  "#define INT64_MAX 9223372036854775807l\n"
  "#define UINT64_MAX 18446744073709551615ul\n"
  "#define INT32_MIN (-2147483647 - 1)\n"
  "#define INT32_MAX 2147483647\n"
  "#define UINT32_MAX 4294967295u\n"
  "#define INT16_MIN int16_t(-32768)\n"
  "#define INT16_MAX int16_t(32767)\n"
  "#define UINT16_MAX uint16_t(65535)\n"
  "#define INT8_MIN int8_t(-128)\n"
  "#define INT8_MAX int8_t(127)\n"
  "#define UINT8_MAX uint8_t(255)\n"
  "#define K_INFF uintBitsToFloat(0x7f800000u)\n"
  "#define K_NANF uintBitsToFloat(0x7fc00000u)\n"
  "#define K_INFD packDouble2x32(uvec2(0u, 0x7ff00000u))\n"
  "#define K_NAND packDouble2x32(uvec2(0u, 0x7ff80000u))\n"
  /* f16 and bf16: round to nearest even, NaN stays a quiet NaN (scalar.inc's k_h2f ...) */
  "float k_h2f(uint16_t x) {\n"
  "  uint h = uint(x), s = (h & 0x8000u) << 16, e = (h >> 10) & 31u, m = h & 1023u, u;\n"
  "  if (e == 0u && m == 0u) u = s;\n"
  "  else if (e == 0u) { e = 113u; while ((m & 1024u) == 0u) { m <<= 1; e--; } u = s | (e << 23) | ((m & 1023u) << 13); }\n"
  "  else if (e == 31u) u = s | 0x7f800000u | (m << 13);\n"
  "  else u = s | ((e + 112u) << 23) | (m << 13);\n"
  "  return uintBitsToFloat(u);\n"
  "}\n"
  "uint16_t k_f2h(float f) {\n"
  "  uint u = floatBitsToUint(f), s = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;\n"
  "  if (a > 0x7f800000u) return uint16_t(s | 0x7e00u);\n"
  "  if (a >= 0x477ff000u) return uint16_t(s | 0x7c00u);\n"
  "  if (a < 0x38800000u) return uint16_t(s | uint(roundEven(uintBitsToFloat(a) * 16777216.0)));\n"
  "  return uint16_t(s | ((a + 0xc8000fffu + ((a >> 13) & 1u)) >> 13));\n"
  "}\n"
  "float k_b2f(uint16_t x) { return uintBitsToFloat(uint(x) << 16); }\n"
  "uint16_t k_f2b(float f) {\n"
  "  uint u = floatBitsToUint(f);\n"
  "  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);\n"
  "  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);\n"
  "}\n"
  "float k_rh(float f) { return k_h2f(k_f2h(f)); }\n"
  "float k_rb(float f) { return k_b2f(k_f2b(f)); }\n"
  /* float arithmetic (scalar.inc): max/min keep NaN; mod takes the divisor's sign */
  /* NaN by its bits: a compiler may take x != x for false (NVIDIA's did without float controls) */
  "bool k_isnan(float x) { return (floatBitsToUint(x) & 0x7fffffffu) > 0x7f800000u; }\n"
  "bool k_isnan(double x) { uvec2 u = unpackDouble2x32(x); u.y &= 0x7fffffffu; return u.y > 0x7ff00000u || (u.y == 0x7ff00000u && u.x != 0u); }\n"
  "double k_f2d(float x) {\n"
  "  uint u = floatBitsToUint(x);\n"
  "  if ((u & 0x7f800000u) != 0u || (u & 0x7fffffu) == 0u) return double(x);\n"
  "  double m = ldexp(double(u & 0x7fffffu), -149);\n"
  "  return (u >> 31) != 0u ? -m : m;\n"
  "}\n"
  "bool k_inf(float x) { return (floatBitsToUint(x) & 0x7fffffffu) == 0x7f800000u; }\n"
  "bool k_inf(double x) { uvec2 u = unpackDouble2x32(x); return (u.y & 0x7fffffffu) == 0x7ff00000u && u.x == 0u; }\n"
  "float k_maxf(float a, float b) { float m = a > b ? a : b; return k_isnan(a) ? a : m; }\n"
  "float k_minf(float a, float b) { float m = a < b ? a : b; return k_isnan(a) ? a : m; }\n"
  "double k_maxd(double a, double b) { double m = a > b ? a : b; return k_isnan(a) ? a : m; }\n"
  "double k_mind(double a, double b) { double m = a < b ? a : b; return k_isnan(a) ? a : m; }\n"
  /* C's fmod as a - b trunc(a / b): exact while the quotient fits the mantissa */
  "float k_fmodf(float a, float b) { return b == 0.0 || k_inf(a) ? K_NANF : k_inf(b) ? a : a - b * trunc(a / b); }\n"
  "double k_fmodd(double a, double b) { return b == 0.0lf || k_inf(a) ? K_NAND : k_inf(b) ? a : a - b * trunc(a / b); }\n"
  "float k_modf(float a, float b) { float r = k_fmodf(a, b); if (r != 0.0 && (r < 0.0) != (b < 0.0)) r += b; return r; }\n"
  "double k_modd(double a, double b) { double r = k_fmodd(a, b); if (r != 0.0lf && (r < 0.0lf) != (b < 0.0lf)) r += b; return r; }\n"
  "float k_signf(float x) { return x > 0.0 ? 1.0 : x < 0.0 ? -1.0 : x; }\n"
  "double k_signd(double x) { return x > 0.0lf ? 1.0lf : x < 0.0lf ? -1.0lf : x; }\n"
  /* round half to even on f64 without roundEven: lavapipe on an AMD EPYC host (AVX2) gave -3 for -3.5 and 1 for
   * 1.5 (test_ops_unary_vulkan); x - floor(x) is exact, and a zero keeps x's sign */
  "double k_roundd(double x) {\n"
  "  double f = floor(x), d = x - f, h = f * 0.5lf;\n"
  "  double r = d > 0.5lf ? f + 1.0lf : d < 0.5lf ? f : h == floor(h) ? f : f + 1.0lf;\n"
  "  return r == 0.0lf ? x * 0.0lf : r;\n"
  "}\n"
  "int k_isinf(float x) { return int(k_inf(x)); }\n"
  "int k_isinf(double x) { return int(k_inf(x)); }\n"
  /* pow of a negative base is defined for whole exponents (C's powf), not by GLSL's pow */
  "float k_powf(float a, float b) {\n"
  "  if (b == 0.0) return 1.0;\n"
  "  if (k_isnan(a) || k_isnan(b)) return K_NANF;\n"
  "  if (a >= 0.0) return a == 0.0 ? (b < 0.0 ? K_INFF : 0.0) : pow(a, b);\n"
  "  if (trunc(b) != b) return K_NANF;\n"
  "  float p = k_inf(a) ? (b < 0.0 ? 0.0 : K_INFF) : pow(-a, b);\n"
  "  return mod(b, 2.0) == 1.0 ? -p : p;\n"
  "}\n"
  "float k_copysign(float m, float s) { return uintBitsToFloat((floatBitsToUint(m) & 0x7fffffffu) | (floatBitsToUint(s) & 0x80000000u)); }\n"
  "float k_sigf(float x) { float e = exp(x < 0.0 ? x : -x); return x >= 0.0 ? 1.0 / (1.0 + e) : e / (1.0 + e); }\n"
  "float k_tanhf(float x) {\n"
  "  float a = abs(x), z = x * x;\n"
  "  float p = -5.70498872745e-3;\n"
  "  p = p * z + 2.06390887954e-2;\n"
  "  p = p * z - 5.37397155531e-2;\n"
  "  p = p * z + 1.33314422036e-1;\n"
  "  p = p * z - 3.33332819422e-1;\n"
  "  float small = a + a * (p * z);\n"
  "  float e = exp(2.0 * min(a, 20.0));\n"
  "  float big = 1.0 - 2.0 / (e + 1.0);\n"
  "  float t = a < 0.625 ? small : big;\n"
  "  return k_isnan(x) ? x : k_copysign(t, x);\n"
  "}\n"
  /* erf: |x| < 1 as |x| P(x^2), beyond as 1 - exp(-x^2) R(|x|) (src/base/vmath.inc's k_erff) */
  "float k_erff(float x) {\n"
  "  float a = abs(x), z = x * x, u = 2.0 * z - 1.0;\n"
  "  float p = -7.5523795218e-08;\n"
  "  p = p * u + 1.2316395890e-06; p = p * u - 1.7536914157e-05; p = p * u + 2.1751199063e-04;\n"
  "  p = p * u - 2.2854856122e-03; p = p * u + 1.9852497722e-02; p = p * u - 1.4053608902e-01;\n"
  "  p = p * u + 9.6546873864e-01;\n"
  "  float b = min(a, 4.0), s = (b - 2.5) * (1.0 / 1.5);\n"
  "  float r = 1.3365836026e-05;\n"
  "  r = r * s - 3.6888910623e-05; r = r * s + 5.6303575917e-05; r = r * s - 1.4405779312e-04;\n"
  "  r = r * s + 4.1298692297e-04; r = r * s - 1.0170089401e-03; r = r * s + 2.4024874305e-03;\n"
  "  r = r * s - 5.5673803229e-03; r = r * s + 1.2489520418e-02; r = r * s - 2.7005716871e-02;\n"
  "  r = r * s + 5.6110488190e-02; r = r * s - 1.1152100511e-01; r = r * s + 2.1080636406e-01;\n"
  "  float big = 1.0 - exp(-b * b) * r;\n"
  "  return k_isnan(x) ? x : k_copysign(a < 1.0 ? a * p : big, x);\n"
  "}\n"
  /* integer arithmetic (scalar.inc): defined for every input. GLSL leaves % of negative
   * operands undefined, so remainders are a - (a / b) b. */
  "int64_t k_sdiv(int64_t a, int64_t b) { if (b == 0l) return 0l; if (a == INT64_MIN && b == -1l) return INT64_MIN; return a / b; }\n"
  "int64_t k_sfmod(int64_t a, int64_t b) { return b == 0l || (a == INT64_MIN && b == -1l) ? 0l : a - (a / b) * b; }\n"
  "int64_t k_sfdiv(int64_t a, int64_t b) { int64_t q = k_sdiv(a, b); return k_sfmod(a, b) != 0l && (a < 0l) != (b < 0l) ? q - 1l : q; }\n"
  "int64_t k_smod(int64_t a, int64_t b) { int64_t r = k_sfmod(a, b); if (r != 0l && (r < 0l) != (b < 0l)) r += b; return r; }\n"
  "uint64_t k_udiv(uint64_t a, uint64_t b) { return b != 0ul ? a / b : 0ul; }\n"
  "uint64_t k_umod(uint64_t a, uint64_t b) { return b != 0ul ? a % b : 0ul; }\n"
  "uint64_t k_upow(uint64_t b, uint64_t e) { uint64_t r = 1ul; for (; e != 0ul; e >>= 1, b *= b) if ((e & 1ul) != 0ul) r *= b; return r; }\n"
  "int64_t k_spow(int64_t b, int64_t e) {\n"
  "  if (e >= 0l) return int64_t(k_upow(uint64_t(b), uint64_t(e)));\n"
  "  if (b == 1l) return 1l;\n"
  "  if (b == -1l) return (e & 1l) != 0l ? -1l : 1l;\n"
  "  return 0l;\n"
  "}\n"
  /* the same in 32 bits, for the narrower types (cast back, the results are the i64 ones) */
  "int k_sdiv(int a, int b) { if (b == 0) return 0; if (a == INT32_MIN && b == -1) return INT32_MIN; return a / b; }\n"
  "int k_sfmod(int a, int b) { return b == 0 || (a == INT32_MIN && b == -1) ? 0 : a - (a / b) * b; }\n"
  "int k_sfdiv(int a, int b) { int q = k_sdiv(a, b); return k_sfmod(a, b) != 0 && (a < 0) != (b < 0) ? q - 1 : q; }\n"
  "int k_smod(int a, int b) { int r = k_sfmod(a, b); if (r != 0 && (r < 0) != (b < 0)) r += b; return r; }\n"
  "uint k_udiv(uint a, uint b) { return b != 0u ? a / b : 0u; }\n"
  "uint k_umod(uint a, uint b) { return b != 0u ? a % b : 0u; }\n"
  "uint k_upow(uint b, uint e) { uint r = 1u; for (; e != 0u; e >>= 1, b *= b) if ((e & 1u) != 0u) r *= b; return r; }\n"
  "int k_spow(int b, int e) {\n"
  "  if (e >= 0) return int(k_upow(uint(b), uint(e)));\n"
  "  if (b == 1) return 1;\n"
  "  if (b == -1) return (e & 1) != 0 ? -1 : 1;\n"
  "  return 0;\n"
  "}\n"
  "int k_sshl(int a, int b) { return b < 0 || b >= 32 ? 0 : int(uint(a) << b); }\n"
  "int k_sshr(int a, int b) { return b < 0 || b >= 32 ? (a < 0 ? -1 : 0) : a >> b; }\n"
  "uint k_ushl(uint a, uint b) { return b >= 32u ? 0u : a << b; }\n"
  "uint k_ushr(uint a, uint b) { return b >= 32u ? 0u : a >> b; }\n"
  "int64_t k_sshl(int64_t a, int64_t b) { return b < 0l || b >= 64l ? 0l : int64_t(uint64_t(a) << b); }\n"
  "int64_t k_sshr(int64_t a, int64_t b) { return b < 0l || b >= 64l ? (a < 0l ? -1l : 0l) : a >> b; }\n"
  "uint64_t k_ushl(uint64_t a, uint64_t b) { return b >= 64ul ? 0ul : a << b; }\n"
  "uint64_t k_ushr(uint64_t a, uint64_t b) { return b >= 64ul ? 0ul : a >> b; }\n"
  /* float -> integer: truncate, NaN gives 0, out of range saturates */
  "int64_t k_f2s(double v, double lo, double hi) {\n"
  "  double f = trunc(v);\n"
  "  if (k_isnan(f)) return 0l;\n"
  "  if (f <= lo) return int64_t(lo);\n"
  "  if (f >= hi) return hi >= 9223372036854775807.0lf ? INT64_MAX : int64_t(hi);\n"
  "  return int64_t(f);\n"
  "}\n"
  "uint64_t k_f2u(double v) {\n"
  "  double f = trunc(v);\n"
  "  if (k_isnan(f) || f <= 0.0lf) return 0ul;\n"
  "  if (f >= 18446744073709551616.0lf) return UINT64_MAX;\n"
  "  return uint64_t(f);\n"
  "}\n"
  /* Block reductions (one block a row): op 0 sum, 1 product, 2 max, 3 min (reduce_op); max
   * and min keep a NaN, as the CUDA dialect's. Every thread gets the same value, in a fixed
   * order. Types narrower than 32 bits go through int or uint; 64-bit integers through two
   * 32-bit halves. With subgroups: a butterfly of shuffles in each subgroup, lane 0's value
   * for all of it (max(+0, -0) depends on the order), then each thread folds the subgroups'
   * results in order. Without: a tree over the block in shared memory (the block size is a
   * power of two). The barrier first: the shared array may still be read by the last call. */
  "bool k_isnan(int v) { return false; }\n"
  "bool k_isnan(uint v) { return false; }\n"
  "bool k_isnan(int64_t v) { return false; }\n"
  "bool k_isnan(uint64_t v) { return false; }\n"
  "#define K_OP(T) T k_op(T a, T b, int op) { \\\n"
  "  if (op == 0) return a + b; \\\n"
  "  if (op == 1) return a * b; \\\n"
  "  if (k_isnan(a)) return a; \\\n"
  "  if (k_isnan(b)) return b; \\\n"
  "  return op == 2 ? (a > b ? a : b) : (a < b ? a : b); }\n"
  "K_OP(float) K_OP(double) K_OP(int) K_OP(uint) K_OP(int64_t) K_OP(uint64_t)\n"
  /* (value, index) pairs: the better one; NaN is the extreme, ties go to the first index, or the last */
  "#define K_ARGBETTER(T) bool k_argbetter(T v2, int64_t i2, T v, int64_t i, int mx, int last) { \\\n"
  "  if (i2 < 0l) return false; \\\n"
  "  if (i < 0l) return true; \\\n"
  "  bool n2 = k_isnan(v2), n = k_isnan(v); \\\n"
  "  if (n2 != n) return n2; \\\n"
  "  if (!n && (mx != 0 ? v2 > v : v2 < v)) return true; \\\n"
  "  if (n || v2 == v) return last != 0 ? i2 > i : i2 < i; \\\n"
  "  return false; }\n"
  "K_ARGBETTER(float) K_ARGBETTER(double) K_ARGBETTER(int) K_ARGBETTER(uint) K_ARGBETTER(int64_t) K_ARGBETTER(uint64_t)\n"
  "#ifdef KILN_SUBGROUPS\n"
  "#define KILN_SH 128\n"  /* subgroups of a block of at most 1024, at least 8 lanes each */
  "float k_shx(float v, uint d) { return subgroupShuffleXor(v, d); }\n"
  "double k_shx(double v, uint d) { return subgroupShuffleXor(v, d); }\n"
  "int k_shx(int v, uint d) { return subgroupShuffleXor(v, d); }\n"
  "uint k_shx(uint v, uint d) { return subgroupShuffleXor(v, d); }\n"
  "int64_t k_shx(int64_t v, uint d) { return packInt2x32(subgroupShuffleXor(unpackInt2x32(v), d)); }\n"
  "uint64_t k_shx(uint64_t v, uint d) { return packUint2x32(subgroupShuffleXor(unpackUint2x32(v), d)); }\n"
  "float k_sh0(float v) { return subgroupShuffle(v, 0u); }\n"
  "double k_sh0(double v) { return subgroupShuffle(v, 0u); }\n"
  "int k_sh0(int v) { return subgroupShuffle(v, 0u); }\n"
  "uint k_sh0(uint v) { return subgroupShuffle(v, 0u); }\n"
  "int64_t k_sh0(int64_t v) { return packInt2x32(subgroupShuffle(unpackInt2x32(v), 0u)); }\n"
  "uint64_t k_sh0(uint64_t v) { return packUint2x32(subgroupShuffle(unpackUint2x32(v), 0u)); }\n"
  "#else\n"
  "#define KILN_SH 1024\n"
  "#endif\n"
  /* the block reductions' shared values; a double goes through k_sh_uint64_t as its bits, so that
   * a kernel without f64 declares no f64 (the Float64 capability a device may lack) */
  "shared float k_sh_float[KILN_SH]; shared int k_sh_int[KILN_SH];\n"
  "shared uint k_sh_uint[KILN_SH]; shared int64_t k_sh_int64_t[KILN_SH]; shared uint64_t k_sh_uint64_t[KILN_SH];\n"
  "shared int64_t k_sh_index[KILN_SH];\n"
  "#define K_PUT_double(i, v) k_sh_uint64_t[i] = doubleBitsToUint64(v)\n"
  "#define K_GET_double(i) uint64BitsToDouble(k_sh_uint64_t[i])\n"
  "#define K_PUT_float(i, v) k_sh_float[i] = (v)\n" "#define K_GET_float(i) k_sh_float[i]\n"
  "#define K_PUT_int(i, v) k_sh_int[i] = (v)\n" "#define K_GET_int(i) k_sh_int[i]\n"
  "#define K_PUT_uint(i, v) k_sh_uint[i] = (v)\n" "#define K_GET_uint(i) k_sh_uint[i]\n"
  "#define K_PUT_int64_t(i, v) k_sh_int64_t[i] = (v)\n" "#define K_GET_int64_t(i) k_sh_int64_t[i]\n"
  "#define K_PUT_uint64_t(i, v) k_sh_uint64_t[i] = (v)\n" "#define K_GET_uint64_t(i) k_sh_uint64_t[i]\n"
  "#ifdef KILN_SUBGROUPS\n"
  "#define K_BLOCK(T, W) T k_block(T v, int op) { \\\n"
  "  W w = W(v); \\\n"
  "  for (uint d = gl_SubgroupSize >> 1; d > 0u; d >>= 1) w = k_op(w, k_shx(w, d), op); \\\n"
  "  w = k_sh0(w); \\\n"
  "  barrier(); \\\n"
  "  if (gl_SubgroupInvocationID == 0u) K_PUT_##W(gl_SubgroupID, w); \\\n"
  "  barrier(); \\\n"
  "  w = K_GET_##W(0); \\\n"
  "  for (uint s = 1u; s < gl_NumSubgroups; s++) w = k_op(w, K_GET_##W(s), op); \\\n"
  "  return T(w); }\n"
  "#define K_BLOCK_ARG(T, W) int64_t k_block_arg(T v, int64_t i, int mx, int last) { \\\n"
  "  W w = W(v); \\\n"
  "  for (uint d = gl_SubgroupSize >> 1; d > 0u; d >>= 1) { \\\n"
  "    W w2 = k_shx(w, d); int64_t i2 = k_shx(i, d); \\\n"
  "    if (k_argbetter(w2, i2, w, i, mx, last)) { w = w2; i = i2; } \\\n"
  "  } \\\n"
  "  barrier(); \\\n"
  "  if (gl_SubgroupInvocationID == 0u) { K_PUT_##W(gl_SubgroupID, w); k_sh_index[gl_SubgroupID] = i; } \\\n"
  "  barrier(); \\\n"
  "  w = K_GET_##W(0); i = k_sh_index[0]; \\\n"
  "  for (uint s = 1u; s < gl_NumSubgroups; s++) \\\n"
  "    if (k_argbetter(K_GET_##W(s), k_sh_index[s], w, i, mx, last)) { w = K_GET_##W(s); i = k_sh_index[s]; } \\\n"
  "  return i; }\n"
  "#else\n"
  "#define K_BLOCK(T, W) T k_block(T v, int op) { \\\n"
  "  uint t = gl_LocalInvocationID.x; \\\n"
  "  barrier(); \\\n"
  "  K_PUT_##W(t, W(v)); \\\n"
  "  barrier(); \\\n"
  "  for (uint s = gl_WorkGroupSize.x >> 1; s > 0u; s >>= 1) { \\\n"
  "    if (t < s) K_PUT_##W(t, k_op(K_GET_##W(t), K_GET_##W(t + s), op)); \\\n"
  "    barrier(); \\\n"
  "  } \\\n"
  "  return T(K_GET_##W(0)); }\n"
  "#define K_BLOCK_ARG(T, W) int64_t k_block_arg(T v, int64_t i, int mx, int last) { \\\n"
  "  uint t = gl_LocalInvocationID.x; \\\n"
  "  barrier(); \\\n"
  "  K_PUT_##W(t, W(v)); k_sh_index[t] = i; \\\n"
  "  barrier(); \\\n"
  "  for (uint s = gl_WorkGroupSize.x >> 1; s > 0u; s >>= 1) { \\\n"
  "    if (t < s && k_argbetter(K_GET_##W(t + s), k_sh_index[t + s], K_GET_##W(t), k_sh_index[t], mx, last)) { \\\n"
  "      K_PUT_##W(t, K_GET_##W(t + s)); k_sh_index[t] = k_sh_index[t + s]; \\\n"
  "    } \\\n"
  "    barrier(); \\\n"
  "  } \\\n"
  "  return k_sh_index[0]; }\n"
  "#endif\n"
  "K_BLOCK(float, float) K_BLOCK(double, double) K_BLOCK(int, int) K_BLOCK(uint, uint)\n"
  "K_BLOCK(int64_t, int64_t) K_BLOCK(uint64_t, uint64_t) K_BLOCK(int16_t, int) K_BLOCK(int8_t, int)\n"
  "K_BLOCK(uint16_t, uint) K_BLOCK(uint8_t, uint)\n"
  "K_BLOCK_ARG(float, float) K_BLOCK_ARG(double, double) K_BLOCK_ARG(int, int) K_BLOCK_ARG(uint, uint)\n"
  "K_BLOCK_ARG(int64_t, int64_t) K_BLOCK_ARG(uint64_t, uint64_t) K_BLOCK_ARG(int16_t, int) K_BLOCK_ARG(int8_t, int)\n"
  "K_BLOCK_ARG(uint16_t, uint) K_BLOCK_ARG(uint8_t, uint)\n";

const Dialect cg_dialect_glsl = {
  .name = "glsl",
  .prelude = prelude,
  .index_type = "int64_t",
  .index32_type = "int",  /* a 64-bit division is tens of instructions on a GPU, as on CUDA */
  .local_subscript = "int(%s)",
  .value_type = { [KILN_F32] = "float", [KILN_F64] = "double", [KILN_F16] = "float", [KILN_BF16] = "float",
                  [KILN_I64] = "int64_t", [KILN_I32] = "int32_t", [KILN_I16] = "int16_t", [KILN_I8] = "int8_t",
                  [KILN_U8] = "uint8_t", [KILN_U16] = "uint16_t", [KILN_U32] = "uint32_t", [KILN_U64] = "uint64_t",
                  [KILN_BOOL] = "bool" },
  .store_type = CG_C_STORE_TYPES,
  .load_fn = { [KILN_F16] = "k_h2f", [KILN_BF16] = "k_b2f", [KILN_BOOL] = "bool" },
  .store_fn = { [KILN_F16] = "k_f2h", [KILN_BF16] = "k_f2b", [KILN_BOOL] = "uint8_t" },
  .round_fn = { [KILN_F16] = "k_rh", [KILN_BF16] = "k_rb" },
  .int_lit = "%lldl",
  .int_min = CG_C_INT_MIN,
  .int_max = { [KILN_I64] = "INT64_MAX", [KILN_I32] = "INT32_MAX", [KILN_I16] = "INT16_MAX", [KILN_I8] = "INT8_MAX",
               [KILN_U8] = "UINT8_MAX", [KILN_U16] = "UINT16_MAX", [KILN_U32] = "UINT32_MAX", [KILN_U64] = "UINT64_MAX",
               [KILN_BOOL] = "true" },
  .float_lit = "%#.17g",  /* no hex floats in GLSL; 17 digits give every double (and float) back exactly */
  .f32_suffix = "f",
  .f64_suffix = "lf",
  .uint_suffix = "u",
  .inf_f32 = "K_INFF", .inf_f64 = "K_INFD", .nan_f32 = "K_NANF", .nan_f64 = "K_NAND",
  .cast = "%s(%s)",
  /* strict f32, as CUDA's --fmad=false: no contraction, and no rewrite a NaN or an inf would
   * notice (Mesa folded 0 * (1 / 0) of a mean over nothing to 0) */
  .float_qual = "precise ",
  /* lavapipe (Mesa 22.3) got int64_t(i) of a loaded i32 wrong where the result fed 64-bit
   * arithmetic (gathers with negative i32 indices): the two halves, put together */
  .widen_i32 = "packInt2x32(ivec2(%s, %s >> 31))",
  .isnan = "k_isnan(%s)",
  /* and lavapipe got 64-bit comparisons of a sign-extended int wrong (a row loop's bound
   * check dropped a block's first 64 points): indices known >= 0 are zero-extended, and the
   * thread and block numbers come from their unsigned built-ins straight to int64_t */
  .widen_index = "int64_t(uint(%s))",
  /* NVIDIA has no f32 subnormal preservation for Vulkan: double(x) flushed 2^-133 to 0. The
   * bits of a subnormal, read apart, are a normal f64. */
  .widen_f32 = "k_f2d(%s)",
  .bool_type = true,
  .unary_f32 = { [TU_ABS] = "abs", [TU_EXP] = "exp", [TU_LOG] = "log", [TU_SQRT] = "sqrt", [TU_TANH] = "k_tanhf",
                 [TU_SIGMOID] = "k_sigf", [TU_ERF] = "k_erff", [TU_SIN] = "sin", [TU_COS] = "cos", [TU_FLOOR] = "floor",
                 [TU_CEIL] = "ceil", [TU_ROUND] = "roundEven", [TU_SIGN] = "k_signf", [TU_ISINF] = "k_isinf" },
  .unary_f64 = { [TU_ABS] = "abs", [TU_SQRT] = "sqrt", [TU_FLOOR] = "floor", [TU_CEIL] = "ceil", [TU_ROUND] = "k_roundd",
                 [TU_SIGN] = "k_signd", [TU_ISINF] = "k_isinf" },
  .binary_f32 = { [TB_POW] = "k_powf", [TB_MAX] = "k_maxf", [TB_MIN] = "k_minf", [TB_MOD] = "k_modf", [TB_FMOD] = "k_fmodf" },
  .binary_f64 = { [TB_MAX] = "k_maxd", [TB_MIN] = "k_mind", [TB_MOD] = "k_modd", [TB_FMOD] = "k_fmodd" },
  .acc_f32 = true,  /* as on CUDA: f32 sums in f32 */
  .int_to_float_direct = true,
  .kernel_prefix = "void",
  .buf_param = "%sK%s%s b%d",  /* the buffer reference type of the element type */
  .buf_const = "",
  .buf_restrict = "",
  .elem = "b%d.v[uint(%s)]",
  .kernel_begin = "\n#if KILN_KERNEL == %d\n",
  .kernel_end = "#endif\n",
  .entry = "void main() {\n  if (k_bid >= k_pc.grid) return;\n  %s(",
  .entry_arg = "K%s(k_pc.args.p[%d])",
  .entry_arg_direct = "K%s(K_DIRECT(%d))",
  .direct_args = 13,
  .entry_end = ");\n}\n",
  .grid = true,
  .thread_index = "(int64_t(k_bid) * int64_t(gl_WorkGroupSize.x) + int64_t(gl_LocalInvocationID.x))",
  .thread_stride = "(int64_t(k_pc.grid) * int64_t(gl_WorkGroupSize.x))",
  .thread_id = "int64_t(gl_LocalInvocationID.x)",
  .block_id = "int64_t(k_bid)",
  .block_size = "int64_t(gl_WorkGroupSize.x)",
  .grid_size = "int64_t(k_pc.grid)",
  .unroll = "[[unroll]]",
  .vec4_type = "vec4",
  .vec4_lane = { ".x", ".y", ".z", ".w" },
  .vec4_load = "Kvec4(uint64_t(b%d)).v[uint(%s)]",
  .vec4_store = "Kvec4(uint64_t(b%d)).v[uint(%s)] = %s;",
  .thread_int = "int(gl_LocalInvocationID.x)",
  .shared_qual = "shared",
  .shared_at_module = true,
  .no_views = true,
  .fma = "fma(%s, %s, %s)",
  .barrier = "barrier();",
  .block_reduce = "k_block",
  .block_reduce_arg = "k_block_arg",
  .reduce_op = { [RO_SUM] = "0", [RO_PROD] = "1", [RO_MAX] = "2", [RO_MIN] = "3" },
};
