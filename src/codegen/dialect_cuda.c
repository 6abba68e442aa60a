/*
 * dialect_cuda.c — the CUDA C dialect: strings and names only, for NVRTC. The prelude
 * gives the scalar helpers the same semantics as the C dialect's (te_eval_* defines
 * them: integer division by zero gives 0, float max/min propagate NaN, float->int
 * casts truncate and saturate, f16/bf16 round to nearest even), written with CUDA's
 * bit-cast intrinsics instead of memcpy, and the fixed-width integer types NVRTC lacks
 * without headers. Kernels are extern "C" so the backend finds them by name; the outer
 * domain maps to a grid-stride loop.
 */
#include "codegen.h"

static const char prelude[] =
  "typedef long long int64_t; typedef unsigned long long uint64_t;\n"
  "typedef int int32_t; typedef unsigned int uint32_t;\n"
  "typedef short int16_t; typedef unsigned short uint16_t;\n"
  "typedef signed char int8_t; typedef unsigned char uint8_t;\n"
  "#define INT64_C(x) x##LL\n"
  "#define INT64_MIN (-9223372036854775807LL - 1)\n"
  "#define INT32_MIN (-2147483647 - 1)\n"
  "#define INT32_MAX 2147483647\n"
  "#define INT16_MIN (-32768)\n"
  "#define INT16_MAX 32767\n"
  "#define INT8_MIN (-128)\n"
  "#define INT8_MAX 127\n"
  "#define UINT8_MAX 255\n"
  "#define UINT16_MAX 65535\n"
  "#define UINT32_MAX 4294967295U\n"
  "#define INT64_MAX 9223372036854775807LL\n"
  "#define UINT64_MAX 18446744073709551615ULL\n"
  "#define K_INFF __int_as_float(0x7f800000)\n"
  "#define K_NANF __int_as_float(0x7fc00000)\n"
  "#define K_INFD __longlong_as_double(0x7ff0000000000000LL)\n"
  "#define K_NAND __longlong_as_double(0x7ff8000000000000LL)\n"
  "#define KI static __device__ __forceinline__\n"
  "KI float k_h2f(uint16_t h) {\n"
  "  uint32_t s = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 31, m = h & 1023, u;\n"
  "  if (e == 0) { if (m == 0) u = s; else { e = 113; while (!(m & 1024)) { m <<= 1; e--; } m &= 1023; u = s | (e << 23) | (m << 13); } }\n"
  "  else if (e == 31) u = s | 0x7f800000u | (m << 13);\n"
  "  else u = s | ((e + 112) << 23) | (m << 13);\n"
  "  return __uint_as_float(u);\n"
  "}\n"
  "KI uint16_t k_f2h(float f) {\n"
  "  uint32_t u = __float_as_uint(f);\n"
  "  uint32_t s = (u >> 16) & 0x8000, a = u & 0x7fffffffu;\n"
  "  if (a > 0x7f800000u) return (uint16_t)(s | 0x7e00);\n"
  "  if (a >= 0x477ff000u) return (uint16_t)(s | 0x7c00);\n"
  "  if (a < 0x38800000u) { float g = __uint_as_float(a) * 16777216.0f; return (uint16_t)(s | (uint32_t)rintf(g)); }\n"
  "  uint32_t r = a + 0xc8000fffu + ((a >> 13) & 1);\n"
  "  return (uint16_t)(s | (r >> 13));\n"
  "}\n"
  "KI float k_b2f(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }\n"
  "KI uint16_t k_f2b(float f) {\n"
  "  uint32_t u = __float_as_uint(f);\n"
  "  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);\n"
  "  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);\n"
  "}\n"
  "KI float k_rh(float f) { return k_h2f(k_f2h(f)); }\n"
  "KI float k_rb(float f) { return k_b2f(k_f2b(f)); }\n"
  "KI float k_maxf(float a, float b) { return a != a || b != b ? K_NANF : a > b ? a : b; }\n"
  "KI float k_minf(float a, float b) { return a != a || b != b ? K_NANF : a < b ? a : b; }\n"
  "KI double k_maxd(double a, double b) { return a != a || b != b ? K_NAND : a > b ? a : b; }\n"
  "KI double k_mind(double a, double b) { return a != a || b != b ? K_NAND : a < b ? a : b; }\n"
  "KI float k_modf(float a, float b) { float r = fmodf(a, b); if (r != 0 && ((r < 0) != (b < 0))) r += b; return r; }\n"
  "KI double k_modd(double a, double b) { double r = fmod(a, b); if (r != 0 && ((r < 0) != (b < 0))) r += b; return r; }\n"
  "KI float k_sigf(float x) { if (x >= 0) return 1.0f / (1.0f + expf(-x)); float e = expf(x); return e / (1.0f + e); }\n"
  "KI double k_sigd(double x) { if (x >= 0) return 1.0 / (1.0 + exp(-x)); double e = exp(x); return e / (1.0 + e); }\n"
  "KI float k_signf(float x) { return x > 0 ? 1.0f : x < 0 ? -1.0f : x; }\n"
  "KI double k_signd(double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : x; }\n"
  "KI int64_t k_sdiv(int64_t a, int64_t b) { return b == 0 ? 0 : (a == INT64_MIN && b == -1) ? INT64_MIN : a / b; }\n"
  "KI int64_t k_sfdiv(int64_t a, int64_t b) {\n"
  "  if (b == 0) return 0; if (a == INT64_MIN && b == -1) return INT64_MIN;\n"
  "  int64_t q = a / b; if (a % b != 0 && ((a < 0) != (b < 0))) q--; return q;\n"
  "}\n"
  "KI int64_t k_sfmod(int64_t a, int64_t b) { return b == 0 || (a == INT64_MIN && b == -1) ? 0 : a % b; }\n"
  "KI int64_t k_smod(int64_t a, int64_t b) { int64_t r = k_sfmod(a, b); if (r != 0 && ((r < 0) != (b < 0))) r += b; return r; }\n"
  "KI uint64_t k_udiv(uint64_t a, uint64_t b) { return b ? a / b : 0; }\n"
  "KI uint64_t k_umod(uint64_t a, uint64_t b) { return b ? a % b : 0; }\n"
  "KI uint64_t k_upow(uint64_t b, uint64_t e) { uint64_t r = 1; for (; e; e >>= 1, b *= b) if (e & 1) r *= b; return r; }\n"
  "KI int64_t k_spow(int64_t b, int64_t e) {\n"
  "  if (e >= 0) return (int64_t)k_upow((uint64_t)b, (uint64_t)e);\n"
  "  if (b == 1) return 1; if (b == -1) return (e & 1) ? -1 : 1; return 0;\n"
  "}\n"
  "KI int64_t k_sshl(int64_t a, int64_t b) { return b < 0 || b >= 64 ? 0 : (int64_t)((uint64_t)a << b); }\n"
  "KI int64_t k_sshr(int64_t a, int64_t b) { return b < 0 || b >= 64 ? (a < 0 ? -1 : 0) : a >> b; }\n"
  "KI uint64_t k_ushl(uint64_t a, uint64_t b) { return b >= 64 ? 0 : a << b; }\n"
  "KI uint64_t k_ushr(uint64_t a, uint64_t b) { return b >= 64 ? 0 : a >> b; }\n"
  "KI int64_t k_f2s(double v, double lo, double hi) {\n"
  "  double f = trunc(v); if (f != f) return 0; if (f <= lo) return (int64_t)lo;\n"
  "  if (f >= hi) return hi >= 9223372036854775807.0 ? INT64_MAX : (int64_t)hi; return (int64_t)f;\n"
  "}\n"
  "KI uint64_t k_f2u(double v) {\n"
  "  double f = trunc(v); if (f != f || f <= 0) return 0; if (f >= 18446744073709551616.0) return UINT64_MAX; return (uint64_t)f;\n"
  "}\n"
  /* Block reductions for one-block-per-row kernels (blockDim.x a multiple of 32, <= 1024):
   * a butterfly within each warp; then, with a power-of-two count of warps, each lane takes
   * one warp's result and a butterfly over them ends the reduction (5 shuffles, not 31
   * shared-memory reads in a chain), lane 0's value broadcast so every thread of the block
   * gets the same, deterministic value (lane 0 of every warp folds in the same order);
   * other warp counts fold the warp results in order. */
  "template <class T> KI T k_shfl(T v, int d) { return (T)__shfl_xor_sync(0xffffffffu, (long long)v, d); }\n"
  "KI float k_shfl(float v, int d) { return __shfl_xor_sync(0xffffffffu, v, d); }\n"
  "KI double k_shfl(double v, int d) { return __shfl_xor_sync(0xffffffffu, v, d); }\n"
  "struct k_add { template <class T> __device__ T operator()(T a, T b) const { return a + b; } };\n"
  "struct k_mul { template <class T> __device__ T operator()(T a, T b) const { return a * b; } };\n"
  "struct k_max { template <class T> __device__ T operator()(T a, T b) const { return a != a ? a : b != b ? b : a > b ? a : b; } };\n"
  "struct k_min { template <class T> __device__ T operator()(T a, T b) const { return a != a ? a : b != b ? b : a < b ? a : b; } };\n"
  "template <class T> KI T k_lane0(T v) { return (T)__shfl_sync(0xffffffffu, (long long)v, 0); }\n"
  "KI float k_lane0(float v) { return __shfl_sync(0xffffffffu, v, 0); }\n"
  "KI double k_lane0(double v) { return __shfl_sync(0xffffffffu, v, 0); }\n"
  "template <class T, class F> KI T k_block(T v, F f) {\n"
  "  __shared__ T sh[32];\n"
  "  for (int d = 16; d > 0; d >>= 1) v = f(v, k_shfl(v, d));\n"
  "  int nw = (blockDim.x + 31) >> 5;\n"
  "  __syncthreads();\n"
  "  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v;\n"
  "  __syncthreads();\n"
  "  if (nw & (nw - 1)) {\n"
  "    v = sh[0];\n"
  "    for (int i = 1; i < nw; i++) v = f(v, sh[i]);\n"
  "    return v;\n"
  "  }\n"
  "  v = sh[(threadIdx.x & 31) & (nw - 1)];\n"
  "  for (int d = nw >> 1; d > 0; d >>= 1) v = f(v, k_shfl(v, d));\n"
  "  return k_lane0(v);\n"
  "}\n"
  /* A warp per row (block-row variants with several rows per block): the butterfly alone,
   * every lane of the warp ends with the same value; no shared memory, no barrier. */
  "template <class T, class F> KI T k_warp(T v, F f) {\n"
  "  for (int d = 16; d > 0; d >>= 1) v = f(v, k_shfl(v, d));\n"
  "  return k_lane0(v);  /* max(+0, -0) depends on the order: one value for the whole warp */\n"
  "}\n"
  /* arg-reductions: the better (value, index) pair; ties go to the first index, or the last. */
  "template <class T> KI bool k_argbetter(T v2, int64_t i2, T v, int64_t i, int mx, int last) {\n"
  "  if (i2 < 0) return false; if (i < 0) return true;\n"
  "  if (mx ? v2 > v : v2 < v) return true;\n"
  "  if (v2 == v) return last ? i2 > i : i2 < i;\n"
  "  return false;\n"
  "}\n"
  "template <class T> KI int64_t k_block_arg(T v, int64_t i, int mx, int last) {\n"
  "  __shared__ T sv[32]; __shared__ int64_t si[32];\n"
  "  for (int d = 16; d > 0; d >>= 1) {\n"
  "    T v2 = k_shfl(v, d); int64_t i2 = k_shfl(i, d);\n"
  "    if (k_argbetter(v2, i2, v, i, mx, last)) { v = v2; i = i2; }\n"
  "  }\n"
  "  int nw = (blockDim.x + 31) >> 5;\n"
  "  __syncthreads();\n"
  "  if ((threadIdx.x & 31) == 0) { sv[threadIdx.x >> 5] = v; si[threadIdx.x >> 5] = i; }\n"
  "  __syncthreads();\n"
  "  v = sv[0]; i = si[0];\n"
  "  for (int w = 1; w < nw; w++) if (k_argbetter(sv[w], si[w], v, i, mx, last)) { v = sv[w]; i = si[w]; }\n"
  "  return i;\n"
  "}\n"
  "template <class T> KI int64_t k_warp_arg(T v, int64_t i, int mx, int last) {\n"
  "  for (int d = 16; d > 0; d >>= 1) {\n"
  "    T v2 = k_shfl(v, d); int64_t i2 = k_shfl(i, d);\n"
  "    if (k_argbetter(v2, i2, v, i, mx, last)) { v = v2; i = i2; }\n"
  "  }\n"
  "  return k_lane0(i);\n"
  "}\n";

const Dialect cg_dialect_cuda = {
  CG_C_FAMILY,
  .name = "cuda",
  .prelude = prelude,
  .inf_f32 = "K_INFF", .inf_f64 = "K_INFD", .nan_f32 = "K_NANF", .nan_f64 = "K_NAND",
  .unary_f32 = CG_C_UNARY_F32("expf", "tanhf", "erff", "rintf"),
  .unary_f64 = CG_C_UNARY_F64("rint"),
  .acc_f32 = true,  /* f32 sums in f32: no f32->f64 conversion per term (slow on GPUs) */
  .kernel_prefix = "extern \"C\" __global__ void",
  .buf_restrict = "__restrict__",
  .grid = true,
  .thread_index = "((int64_t)blockIdx.x * blockDim.x + threadIdx.x)",
  .thread_stride = "((int64_t)gridDim.x * blockDim.x)",
  .thread_id = "threadIdx.x",
  .block_id = "blockIdx.x",
  .block_size = "blockDim.x",
  .grid_size = "gridDim.x",
  .block_bounds = "__launch_bounds__(%d)",
  .block_bounds_min = "__launch_bounds__(%d, %d)",
  .shared_qual = "__shared__",
  .global_qual = "__device__",
  .dyn_shared = "extern __shared__ float k_dyn[];",
  .dyn_shared_name = "k_dyn",
  .barrier = "__syncthreads();",
  .fence = "__threadfence();",
  .atomic_add = "atomicAdd(&%s, %s)",
  .counter_type = "unsigned int",
  .cached_load = "__ldcg(%s)",
  .fma = "__fmaf_rn(%s, %s, %s)",
  .unroll = "#pragma unroll",
  .vec4_type = "float4",
  .vec4_lane = { ".x", ".y", ".z", ".w" },
  .vec4_load = "((const float4 *)b%d)[%s]",
  .vec4_store = "((float4 *)b%d)[%s] = %s;",
  .block_reduce = "k_block",
  .warp_reduce = "k_warp",
  .block_reduce_arg = "k_block_arg",
  .warp_reduce_arg = "k_warp_arg",
  .reduce_op = { [RO_SUM] = "k_add()", [RO_PROD] = "k_mul()", [RO_MAX] = "k_max()", [RO_MIN] = "k_min()" },
};
