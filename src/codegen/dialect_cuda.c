/*
 * dialect_cuda.c — the CUDA C dialect: strings and names only, for NVRTC. The prelude
 * is the CUDA head (the fixed-width integer types NVRTC lacks without headers, CUDA's
 * bit-cast intrinsics) and the same shared scalar helpers as the C dialect's
 * (src/base/scalar.inc, te_eval_*'s semantics), then sigmoid and the block and warp
 * reductions. Kernels are extern "C" so the backend finds them by name; the outer
 * domain maps to a grid-stride loop.
 */
#include "codegen.h"
#include "../base/scalar.h"

static const char prelude[] =
  "KI float k_sigf(float x) { if (x >= 0) return 1.0f / (1.0f + expf(-x)); float e = expf(x); return e / (1.0f + e); }\n"
  /* A 16-bit store's rounding by one conversion (k_f2h and k_f2b are eight instructions and more,
   * f16's with a branch for subnormals), the same bits: nearest even, and a NaN as they give it.
   * Under excess precision (cuda's default) every store rounds an unrounded value: on the bit
   * arithmetic, eager kernels of one operation each ran 1.11-1.13x slower on the H100, by these
   * 0.97. Values already rounded (the option off) keep k_f2b (Dialect.store_unrounded_fn). */
  "KI uint16_t k_f2h_st(float f) {\n"
  "  unsigned u = __float_as_uint(f); unsigned short h;\n"
  "  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(((u >> 16) & 0x8000u) | 0x7e00u);\n"
  "  asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f));\n"
  "  return h;\n"
  "}\n"
  "#if __CUDA_ARCH__ >= 800\n"
  "KI uint16_t k_f2b_st(float f) {\n"
  "  unsigned u = __float_as_uint(f); unsigned short h;\n"
  "  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);\n"
  "  asm(\"cvt.rn.bf16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f));\n"
  "  return h;\n"
  "}\n"
  "#else\n"
  "KI uint16_t k_f2b_st(float f) { return k_f2b(f); }\n"
  "#endif\n"
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
  /* A row held by a quad of lanes (an mma fragment's rows: lanes 4r .. 4r + 3): the same, over
   * the quad, every lane ending with its first lane's value. */
  "template <class T, class F> KI T k_quad(T v, F f) {\n"
  "  v = f(v, k_shfl(v, 1));\n"
  "  v = f(v, k_shfl(v, 2));\n"
  "  return (T)__shfl_sync(0xffffffffu, v, (threadIdx.x & 31) & ~3);\n"
  "}\n"
  /* ... and over the quads of the same lanes in W consecutive warps (a tile of a chain whose keys are
   * split over W warps): each lane's quad value through shared memory, combined in warp order, so every
   * warp of the W gets the same bits. Every thread of the block calls it, in the same order: the first
   * barrier frees the slots the last call read. */
  "template <int W, class T, class F> KI T k_quad_keys(T v, F f) {\n"
  "  __shared__ T sl[256];  /* a chain's CG_GEMM_THREADS threads */\n"
  "  v = k_quad(v, f);\n"
  "  __syncthreads();\n"
  "  sl[threadIdx.x] = v;\n"
  "  __syncthreads();\n"
  "  const int w0 = (int)(threadIdx.x >> 5) / W * W, l = threadIdx.x & 31;\n"
  "  T s = sl[w0 * 32 + l];\n"
  "  for (int j = 1; j < W; j++) s = f(s, sl[(w0 + j) * 32 + l]);\n"
  "  return s;\n"
  "}\n"
  /* ... and over a group of W consecutive lanes (a banded pair's rows, W lanes a row) */
  "template <int W, class T, class F> KI T k_lanes(T v, F f) {\n"
  "  for (int d = W / 2; d > 0; d >>= 1) v = f(v, k_shfl(v, d));\n"
  "  return (T)__shfl_sync(0xffffffffu, v, (threadIdx.x & 31) & ~(W - 1));\n"
  "}\n"
  /* arg-reductions: the better (value, index) pair; ties go to the first index, or the last. As ref
   * (and the glsl dialect): NaN is the extreme, the first NaN's index wins (the last with last) */
  "template <class T> KI bool k_argbetter(T v2, int64_t i2, T v, int64_t i, int mx, int last) {\n"
  "  if (i2 < 0) return false; if (i < 0) return true;\n"
  "  bool n2 = v2 != v2, n = v != v;\n"
  "  if (n2 != n) return n2;\n"
  "  if (!n && (mx ? v2 > v : v2 < v)) return true;\n"
  "  if (n || v2 == v) return last ? i2 > i : i2 < i;\n"
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
  "}\n"
  /* The grid barrier of a cooperative launch (every block resident): bar[0] counts arrivals,
   * bar[1] is the generation. Thread 0 of each block reads the generation before arriving;
   * the last to arrive resets the count and moves the generation on, which releases the
   * others. The fences on both sides order each block's writes before and reads after the
   * barrier at device scope; the block barriers carry that to the block's other threads. */
  /* an arrival count that releases the block's writes and acquires the earlier blocks' (sm_70+) */
  "KI unsigned k_add_acq_rel(unsigned *p, unsigned v) {\n"
  "  unsigned r; asm volatile(\"atom.acq_rel.gpu.add.u32 %0, [%1], %2;\" : \"=r\"(r) : \"l\"(p), \"r\"(v) : \"memory\"); return r;\n"
  "}\n"
  /* Programmatic dependent launch: wait for the kernel before to finish and its writes to be
   * visible, then let the kernel after be launched (it waits the same way); both are no-ops
   * for a kernel launched without the attribute. */
  "KI void k_dependent_entry() {\n"
  "#if __CUDA_ARCH__ >= 900\n"
  "  asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");\n"
  "  asm volatile(\"griddepcontrol.launch_dependents;\" ::: \"memory\");\n"
  "#endif\n"
  "}\n"
  /* ... or only wait: the kernel after is launched once every block of this one has exited, so its
   * blocks take no place beside this one's (KILN_CUDA_PDL=2) */
  "KI void k_dependent_wait() {\n"
  "#if __CUDA_ARCH__ >= 900\n"
  "  asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");\n"
  "#endif\n"
  "}\n"
  /* Tensor cores (sm_80 and later): one warp's 16 x 8 f32 tile += A (16 x k) B (k x 8), mma.sync's
   * fragments; the operands as they sit in a GEMM tile's shared arrays. A bf16 operand value is
   * exact in bf16 (it was loaded from one), so its bits are its top half; f16 and TF32 convert. */
  "#if __CUDA_ARCH__ >= 800\n"
  "#define K_MMA(name, shape, kind) \\\n"
  "KI void name(float &c0, float &c1, float &c2, float &c3, unsigned a0, unsigned a1, unsigned a2, unsigned a3, \\\n"
  "             unsigned b0, unsigned b1) { \\\n"
  "  asm volatile(\"mma.sync.aligned.\" shape \".row.col.f32.\" kind \".\" kind \".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, \" \\\n"
  "               \"{%8,%9}, {%0,%1,%2,%3};\" : \"+f\"(c0), \"+f\"(c1), \"+f\"(c2), \"+f\"(c3) \\\n"
  "               : \"r\"(a0), \"r\"(a1), \"r\"(a2), \"r\"(a3), \"r\"(b0), \"r\"(b1)); \\\n"
  "}\n"
  "K_MMA(k_mma_bf16, \"m16n8k16\", \"bf16\")\n"
  "K_MMA(k_mma_f16, \"m16n8k16\", \"f16\")\n"
  "K_MMA(k_mma_tf32, \"m16n8k8\", \"tf32\")\n"
  "KI uint16_t k_bbits(float x) { return (uint16_t)(__float_as_uint(x) >> 16); }\n"
  /* any f32 rounded to bf16 for an operand, one instruction (mma needs sm_80, as this cvt does); a
   * store's k_f2b keeps ref's NaN payload, an mma operand needs none */
  "KI uint16_t k_bround(float x) { unsigned short h; asm(\"cvt.rn.bf16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(x)); return h; }\n"
  "KI uint16_t k_hbits(float x) { unsigned short h; asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(x)); return h; }\n"
  "KI unsigned k_tf32(float x) { unsigned t; asm(\"cvt.rna.tf32.f32 %0, %1;\" : \"=r\"(t) : \"f\"(x)); return t; }\n"
  /* operands straight to shared memory: 16-byte asynchronous copies (zero-filled where !in), and
   * fragments by ldmatrix (x2 / x4 matrices of 8 x 8, .trans for operands stored along m or n) */
  "KI unsigned k_smem(const void *p) { unsigned long long s; asm(\"cvta.to.shared.u64 %0, %1;\" : \"=l\"(s) : \"l\"(p)); return (unsigned)s; }\n"
  "KI void k_cp16(void *dst, const void *src, bool in) {\n"
  "  asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16, %2;\" :: \"r\"(k_smem(dst)), \"l\"(src), \"r\"(in ? 16 : 0) : \"memory\");\n"
  "}\n"
  "KI void k_cp_commit() { asm volatile(\"cp.async.commit_group;\" ::: \"memory\"); }\n"
  "template <int N> KI void k_cp_wait() { asm volatile(\"cp.async.wait_group %0;\" :: \"n\"(N) : \"memory\"); }\n"
  "#define K_LDM(name, n, tr) \\\n"
  "KI void name(unsigned &r0, unsigned &r1, unsigned &r2, unsigned &r3, const void *p) { \\\n"
  "  if (n == 4) asm volatile(\"ldmatrix.sync.aligned.m8n8.x4\" tr \".shared.b16 {%0,%1,%2,%3}, [%4];\" \\\n"
  "                          : \"=r\"(r0), \"=r\"(r1), \"=r\"(r2), \"=r\"(r3) : \"r\"(k_smem(p)) : \"memory\"); \\\n"
  "  else asm volatile(\"ldmatrix.sync.aligned.m8n8.x2\" tr \".shared.b16 {%0,%1}, [%2];\" \\\n"
  "                    : \"=r\"(r0), \"=r\"(r1) : \"r\"(k_smem(p)) : \"memory\"); \\\n"
  "}\n"
  "K_LDM(k_ldm2, 2, \"\")\n"
  "K_LDM(k_ldm2t, 2, \".trans\")\n"
  "K_LDM(k_ldm4, 4, \"\")\n"
  "K_LDM(k_ldm4t, 4, \".trans\")\n"
  "#endif\n"
  "KI void k_band_sync(unsigned int *bar, unsigned int n) {\n"
  "  __syncthreads();\n"
  "  if (threadIdx.x == 0) {\n"
  "    volatile unsigned int *gen = bar + 1;\n"
  "    unsigned int g = *gen;\n"
  "    __threadfence();\n"
  "    if (atomicAdd(bar, 1u) == n - 1) {\n"
  "      atomicExch(bar, 0u);\n"
  "      __threadfence();\n"
  "      atomicAdd(bar + 1, 1u);\n"
  "    } else {\n"
  "      while (*gen == g) { }\n"
  "    }\n"
  "    __threadfence();\n"
  "  }\n"
  "  __syncthreads();\n"
  "}\n"
  "KI void k_grid_sync(unsigned int *bar) { k_band_sync(bar, gridDim.x); }\n"
  /* A launch group's band of rows between two phases (CG_GROUP_BANDS): each block of the first phase
   * counts itself in at its band once its writes are released; each block of the second waits for its
   * band's count, then counts itself out, the band's last waiter putting both counts back to 0 for the
   * next run (every waiter has read the count by then, and the next run's blocks come after this one's) */
  "KI void k_band_arrive(unsigned int *c) {\n"
  "  __syncthreads();\n"
  "  if (threadIdx.x == 0) { __threadfence(); atomicAdd(c, 1u); }\n"
  "}\n"
  "KI void k_band_wait(unsigned int *c, unsigned int n, unsigned int *out, unsigned int q) {\n"
  "  if (threadIdx.x == 0) {\n"
  "    while (*(volatile unsigned int *)c < n) { }\n"
  "    __threadfence();\n"
  "    if (atomicAdd(out, 1u) == q - 1u) { atomicExch(out, 0u); atomicExch(c, 0u); }\n"
  "  }\n"
  "  __syncthreads();\n"
  "}\n"
  /* A meeting of n blocks by flags, one a block (mine), each only ever written by its block: the
   * block's writes released with its flag's next value, then each of the n flags acquired until it
   * reaches that value (wrapping), one thread a flag. No count to arrive at and move on: the last
   * block's release is all the others wait for. The flags only grow, so no reset between meetings
   * or runs. */
  "KI void k_flag_put(unsigned *f, unsigned v) { asm volatile(\"st.release.gpu.u32 [%0], %1;\" :: \"l\"(f), \"r\"(v) : \"memory\"); }\n"
  "KI unsigned k_flag_get(const unsigned *f) {\n"
  "  unsigned v; asm volatile(\"ld.acquire.gpu.u32 %0, [%1];\" : \"=r\"(v) : \"l\"(f) : \"memory\"); return v;\n"
  "}\n"
  "KI void k_flag_done(unsigned *flags, unsigned mine) {\n"
  "  __syncthreads();\n"
  "  if (threadIdx.x == 0) k_flag_put(flags + mine, k_flag_get(flags + mine) + 1u);\n"
  "}\n"
  "KI void k_band_meet(unsigned *flags, unsigned mine, unsigned n) {\n"
  "  __shared__ unsigned next;\n"
  "  __syncthreads();\n"
  "  if (threadIdx.x == 0) { next = k_flag_get(flags + mine) + 1u; k_flag_put(flags + mine, next); }\n"
  "  __syncthreads();\n"
  "  if (threadIdx.x < n) while ((int)(k_flag_get(flags + threadIdx.x) - next) < 0) { }\n"
  "  __syncthreads();\n"
  "}\n";

/* Hopper's warpgroup MMA (sm_90a): the helpers once a module, then the product of one shape.
 * A shared-memory descriptor holds the tile's address, LBO and SBO (each in 16-byte units) and
 * the 128-byte swizzle (mode 1, bits 62-63). The product's scale-d predicate is always set: the
 * accumulators start at 0. A fence.proxy.async orders the cp.async stores to a stage (the
 * generic proxy) before the wgmma reads of it (the async proxy). */
static void cuda_wgmma_define(StrBuf *out, int n, CgMma kind, bool trans_a, bool trans_b) {
  const char *t = kind == CG_MMA_F16 ? "f16" : "bf16";
  sb_puts(out, "\n#ifndef KILN_WGMMA_HELPERS\n"
               "#define KILN_WGMMA_HELPERS\n"
               "KI void k_wg_fence() { asm volatile(\"wgmma.fence.sync.aligned;\" ::: \"memory\"); }\n"
               "KI void k_wg_commit() { asm volatile(\"wgmma.commit_group.sync.aligned;\" ::: \"memory\"); }\n"
               "template <int N> KI void k_wg_wait() { asm volatile(\"wgmma.wait_group.sync.aligned %0;\" :: \"n\"(N) : \"memory\"); }\n"
               "KI void k_fence_async() { asm volatile(\"fence.proxy.async.shared::cta;\" ::: \"memory\"); }\n"
               "KI unsigned long long k_wg_desc(unsigned addr, unsigned lbo, unsigned sbo) {\n"
               "  return (unsigned long long)((addr & 0x3FFFF) >> 4) | ((unsigned long long)((lbo >> 4) & 0x3FFF) << 16) |\n"
               "         ((unsigned long long)((sbo >> 4) & 0x3FFF) << 32) | (1ull << 62);\n"
               "}\n"
               "#endif\n");
  sb_printf(out, "#ifndef KILN_WGMMA_%s_%d_%d%d\n#define KILN_WGMMA_%s_%d_%d%d\n", t, n, trans_a, trans_b, t, n, trans_a, trans_b);
  sb_printf(out, "KI void k_wgmma_%s_%d_%d%d(float *d, unsigned long long da, unsigned long long db) {\n", t, n, trans_a, trans_b);
  int r = n / 2;
  sb_printf(out, "  asm volatile(\"{ .reg .pred p; setp.ne.b32 p, %%%d, 0; wgmma.mma_async.sync.aligned.m64n%dk16.f32.%s.%s {", r + 2, n, t, t);
  for (int i = 0; i < r; i++) sb_printf(out, "%s%%%d", i ? "," : "", i);
  sb_printf(out, "}, %%%d, %%%d, p, 1, 1, %d, %d; }\"\n", r, r + 1, trans_a, trans_b);
  sb_puts(out, "    :");
  for (int i = 0; i < r; i++) sb_printf(out, "%s \"+f\"(d[%d])", i ? "," : "", i);
  sb_puts(out, "\n    : \"l\"(da), \"l\"(db), \"r\"(1));\n}\n#endif\n");
}

const Dialect cg_dialect_cuda = {
  CG_C_FAMILY,
  .store_unrounded_fn = { [KILN_F16] = "k_f2h_st", [KILN_BF16] = "k_f2b_st" },
  .name = "cuda",
  .index32_type = "int",
  .prelude_head = kiln_scalar_cuda_head,
  .prelude_scalar = kiln_scalar_source,
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
  .warp_barrier = "__syncwarp();",
  .fence = "__threadfence();",
  .atomic_add = "atomicAdd(&%s, %s)",
  .atomic_add_acq_rel = "k_add_acq_rel(&%s, %s)",
  .counter_type = "unsigned int",
  .cached_load = "__ldcg(%s)",
  .fma = "__fmaf_rn(%s, %s, %s)",
  .mma = { [CG_MMA_BF16] = "k_mma_bf16", [CG_MMA_F16] = "k_mma_f16", [CG_MMA_TF32] = "k_mma_tf32" },
  .mma_elem = { [CG_MMA_BF16] = "uint16_t", [CG_MMA_F16] = "uint16_t", [CG_MMA_TF32] = "unsigned" },
  .mma_stash = { [CG_MMA_BF16] = "k_bbits(%s)", [CG_MMA_F16] = "k_hbits(%s)", [CG_MMA_TF32] = "k_tf32(%s)" },
  .mma_round = { [CG_MMA_BF16] = "k_bround(%s)", [CG_MMA_F16] = "k_hbits(%s)" },
  .wgmma_define = cuda_wgmma_define,
  .cp_async = "k_cp16", .cp_commit = "k_cp_commit();", .cp_wait = "k_cp_wait<%d>();", .cp_wait0 = "k_cp_wait<0>();",
  .ldmatrix = { "k_ldm2", "k_ldm2t", "k_ldm4", "k_ldm4t" },
  .unroll = "#pragma unroll",
  .vec4_type = "float4",
  .vec4_lane = { ".x", ".y", ".z", ".w" },
  .vec4_load = "((const float4 *)b%d)[%s]",
  .vec4_store = "((float4 *)b%d)[%s] = %s;",
  .vec4h_type = "uint2",
  .vec4h_load = "((const uint2 *)b%d)[%s]",
  .vec4h_lane = { "(uint16_t)%s.x", "(uint16_t)(%s.x >> 16)", "(uint16_t)%s.y", "(uint16_t)(%s.y >> 16)" },
  .vec4h_store = "((uint2 *)b%d)[%s] = %s;",
  .vec4h_set = { "%s.x = (unsigned)%s;", "%s.x |= (unsigned)%s << 16;", "%s.y = (unsigned)%s;", "%s.y |= (unsigned)%s << 16;" },
  .block_reduce = "k_block",
  .warp_reduce = "k_warp", .quad_reduce = "k_quad", .quad_keys_reduce = "k_quad_keys<%d>", .group_reduce = "k_lanes<%d>",
  .block_reduce_arg = "k_block_arg",
  .warp_reduce_arg = "k_warp_arg",
  .reduce_op = { [RO_SUM] = "k_add()", [RO_PROD] = "k_mul()", [RO_MAX] = "k_max()", [RO_MIN] = "k_min()" },
  .phase_prefix = "static __device__ __forceinline__ void",
  .phase_thread_index = "((int64_t)k_bid * blockDim.x + threadIdx.x)",
  .phase_thread_stride = "((int64_t)k_nbid * blockDim.x)",
  .grid_barrier = "k_grid_sync(%s);",
  .band_arrive = "k_band_arrive(%s);",
  .band_wait = "k_band_wait(%s, %su, %s, %su);",
  .band_barrier = "k_band_sync(%s, %s);",
  .band_meet = "k_band_meet(%s, %s, %s);",
  .flag_done = "k_flag_done(%s, %s);",
  .kernel_entry = "  k_dependent_entry();",
  .kernel_entry_wait = "  k_dependent_wait();",
  /* sm_90 and later: barrier.cluster, and mapa to reach another block's shared memory */
  .cluster_dims = "__cluster_dims__(%d, 1, 1)",
  .cluster_helpers =
    "#ifndef KILN_CLUSTER_HELPERS\n"
    "#define KILN_CLUSTER_HELPERS\n"
    "static __device__ __forceinline__ void k_cluster_sync(void) {\n"
    "  asm volatile(\"barrier.cluster.arrive.release.aligned;\\n\\tbarrier.cluster.wait.acquire.aligned;\" ::: \"memory\");\n"
    "}\n"
    "static __device__ __forceinline__ float k_cluster_ld(const float *p, unsigned int rank) {\n"
    "  unsigned long long s;\n"
    "  unsigned int a, ra;\n"
    "  float v;\n"
    "  asm(\"cvta.to.shared.u64 %0, %1;\" : \"=l\"(s) : \"l\"(p));\n"
    "  a = (unsigned int)s;\n"
    "  asm volatile(\"mapa.shared::cluster.u32 %0, %1, %2;\" : \"=r\"(ra) : \"r\"(a), \"r\"(rank));\n"
    "  asm volatile(\"ld.shared::cluster.f32 %0, [%1];\" : \"=f\"(v) : \"r\"(ra) : \"memory\");\n"
    "  return v;\n"
    "}\n"
    "#endif\n",
  .cluster_sync = "k_cluster_sync();",
  .cluster_load = "k_cluster_ld(%s, %s)",
};
