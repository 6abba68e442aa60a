// wgmmalab.cu — a lab for Hopper's warpgroup MMA (wgmma, sm_90a) on bf16 products of
// bert_layer_b8s128_bf16's shapes (M 1024: QKV 2304x768, output 768x768, FFN1 3072x768,
// FFN2 768x3072), the products kiln hands cuBLASLt today. Before the renderer emits wgmma,
// this settles on the device what cannot be settled here: the shared-memory descriptors of
// an operand stored N-major (kiln's weights are [K, N], N contiguous; wgmma's transposed B),
// and what tiles, stages and warpgroups buy on these shapes against the library.
//   nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -o wgmmalab bench/gpu/wgmmalab.cu -lcuda && ./wgmmalab [MODE]
// One JSON line per (shape, candidate): its error against an f32 product of the same bf16
// values (max |c - ref| / max |ref|; a wrong layout is O(1)) and its median time (CUDA events
// over batches of 20 back-to-back launches, as bench/gpu/peers-gemm.py times torch.mm).
// Candidates (template arguments):
//   WG      warpgroups a block (1 or 2), each 64 rows of the block's tile (BM = 64 WG)
//   BN      columns a block (64..256), one m64nBNk16 wgmma a warpgroup per 16 of K
//   STAGES  cp.async stages of 64 K each; a tile is loaded STAGES-2 ahead (the stage the
//           wgmma two tiles back read is the one refilled, after the barrier every thread
//           reaches past its wgmma.wait_group 1)
//   BMODE   how B sits in shared memory: 0 N-major, LBO the stride between 64-column panels,
//           SBO the stride between groups of 8 K-rows; 1 the same with LBO and SBO swapped;
//           2 K-major (B transposed on the host first: the control whose descriptors are
//           the A operand's)
//   BMODE 3 the copy engine's form (gemm_tma): B N-major as in 0, both operands' k-tiles brought by
//           cp.async.bulk.tensor from tensor maps (128-byte swizzle, the same layout) completing on an
//           mbarrier a stage; a producer warpgroup (one thread issues the copies, its registers given to
//           the others by setmaxnreg) and two consumer warpgroups of 64 rows; a consumer frees a stage
//           (an mbarrier of 256 arrivals) once its wgmma.wait_group 1 says the products reading it are
//           done; no block barrier in the k loop. Settled on the device 2026-12-06: mode 0's
//           descriptors are right (mode 1 faults). One consumer warpgroup (64-row tiles) too.
//   BMODE 4 mode 3 persistent: no more blocks than are resident at once, each looping over tiles, the stage ring going on
//           from one tile to the next (the next tile's copies under this one's epilogue).
//   Measured on the H100 (2026-12-06, bench/results/2026-12-06-h100-lt-algos.md): mode 3 with two
//   consumers took 14.7, 7.3, 15.7 and 14.8 us on the four shapes, the library 8.0, 4.5, 10.7, 10.0.
// Both operands are 128-byte swizzled: the 16-byte chunk c of a 128-byte row r lands at
// chunk c ^ (r % 8), rows 128 bytes apart, atoms of 8 rows 1024 bytes apart.
#include <cuda.h>
#include <cuda_bf16.h>
#include <cstdio>
#include <cstdlib>
#include <cstdint>
#include <cmath>
#include <vector>
#include <algorithm>

#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("{\"error\": \"%s: %s\"}\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)

__device__ __forceinline__ uint32_t smem_addr(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void cp16(uint32_t dst, const void *src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }
__device__ __forceinline__ void fence_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void wg_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }
/* a shared-memory matrix descriptor, 128-byte swizzle (mode 1 in bits 62-63) */
__device__ __forceinline__ uint64_t desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return (uint64_t)((addr & 0x3FFFF) >> 4) | ((uint64_t)((lbo >> 4) & 0x3FFF) << 16) |
         ((uint64_t)((sbo >> 4) & 0x3FFF) << 32) | (1ull << 62);
}
template <int TB> __device__ __forceinline__ void wg_mma64(float (&d)[32], uint64_t da, uint64_t db) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, %35;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
               : "l"(da), "l"(db), "r"(1), "n"(TB));
}
template <int TB> __device__ __forceinline__ void wg_mma128(float (&d)[64], uint64_t da, uint64_t db) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, %67;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
               : "l"(da), "l"(db), "r"(1), "n"(TB));
}
template <int TB> __device__ __forceinline__ void wg_mma192(float (&d)[96], uint64_t da, uint64_t db) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %98, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n192k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95}, %96, %97, p, 1, 1, 0, %99;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95])
               : "l"(da), "l"(db), "r"(1), "n"(TB));
}
template <int TB> __device__ __forceinline__ void wg_mma256(float (&d)[128], uint64_t da, uint64_t db) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p, 1, 1, 0, %131;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
               : "l"(da), "l"(db), "r"(1), "n"(TB));
}

template <int BN, int TB> __device__ __forceinline__ void wg_mma(float (&d)[BN / 2], uint64_t da, uint64_t db) {
  if constexpr (BN == 64) wg_mma64<TB>(d, da, db);
  else if constexpr (BN == 128) wg_mma128<TB>(d, da, db);
  else if constexpr (BN == 192) wg_mma192<TB>(d, da, db);
  else wg_mma256<TB>(d, da, db);
}

/* C[M,N] = A[M,K] B[K,N], bf16 in and out, f32 sums; B is b ([K,N]) or, for BMODE 2, bt ([N,K]).
 * M, N, K multiples of the tile (the lab's shapes are). */
template <int WG, int BN, int STAGES, int BMODE>
__global__ void __launch_bounds__(WG * 128, 1) gemm(const __nv_bfloat16 *__restrict__ a, const __nv_bfloat16 *__restrict__ b,
                                                     const __nv_bfloat16 *__restrict__ bt, __nv_bfloat16 *__restrict__ c,
                                                     int M, int N, int K) {
  constexpr int BM = WG * 64, BK = 64, THREADS = WG * 128;
  constexpr int A_BYTES = BM * 128, B_BYTES = BN * 128, STAGE = A_BYTES + B_BYTES;
  extern __shared__ unsigned char dyn[];
  unsigned char *sm = (unsigned char *)(((uintptr_t)dyn + 1023) & ~(uintptr_t)1023);
  const uint32_t base = smem_addr(sm);
  const int tid = threadIdx.x, wg = tid / 128, lane = tid & 31, warp = (tid / 32) % 4;
  const int tiles_n = N / BN;
  const int tm0 = blockIdx.x / tiles_n * BM, tn0 = blockIdx.x % tiles_n * BN;
  const int nkt = K / BK;

  auto load = [&](int t) {
    const int s = t % STAGES, k0 = t * BK;
    const uint32_t as = base + s * STAGE, bs = as + A_BYTES;
    #pragma unroll
    for (int i = tid; i < BM * 8; i += THREADS) {
      const int r = i / 8, ch = i % 8;
      cp16(as + r * 128 + ((ch ^ (r & 7)) * 16), a + (size_t)(tm0 + r) * K + k0 + ch * 8);
    }
    if (BMODE == 2) {
      #pragma unroll
      for (int i = tid; i < BN * 8; i += THREADS) {
        const int r = i / 8, ch = i % 8;
        cp16(bs + r * 128 + ((ch ^ (r & 7)) * 16), bt + (size_t)(tn0 + r) * K + k0 + ch * 8);
      }
    } else {
      #pragma unroll
      for (int i = tid; i < BN * 8; i += THREADS) {
        const int k = i / (BN / 8), n = i % (BN / 8) * 8, panel = n / 64, ch = n % 64 / 8;
        cp16(bs + panel * (BK * 128) + k * 128 + ((ch ^ (k & 7)) * 16), b + (size_t)(k0 + k) * N + tn0 + n);
      }
    }
  };

  float d[BN / 2];
  #pragma unroll
  for (int i = 0; i < BN / 2; i++) d[i] = 0.0f;

  #pragma unroll
  for (int t = 0; t < STAGES - 2; t++) {
    if (t < nkt) load(t);
    cp_commit();
  }
  for (int t = 0; t < nkt; t++) {
    cp_wait<STAGES - 3>();
    fence_async();
    __syncthreads();
    if (t + STAGES - 2 < nkt) load(t + STAGES - 2);
    cp_commit();
    const uint32_t as = base + (t % STAGES) * STAGE + wg * 64 * 128, bs = base + (t % STAGES) * STAGE + A_BYTES;
    wg_fence();
    #pragma unroll
    for (int kk = 0; kk < BK / 16; kk++) {
      const uint64_t da = desc(as + kk * 32, 16, 1024);
      uint64_t db;
      if (BMODE == 0) db = desc(bs + kk * 2048, BK * 128, 1024);
      else if (BMODE == 1) db = desc(bs + kk * 2048, 1024, BK * 128);
      else db = desc(bs + kk * 32, 16, 1024);
      wg_mma<BN, BMODE == 2 ? 0 : 1>(d, da, db);
    }
    wg_commit();
    wg_wait<1>();
  }
  wg_wait<0>();

  const int row = tm0 + wg * 64 + warp * 16 + lane / 4;
  #pragma unroll
  for (int j = 0; j < BN / 8; j++) {
    const int col = tn0 + j * 8 + (lane % 4) * 2;
    *(__nv_bfloat162 *)&c[(size_t)row * N + col] = __floats2bfloat162_rn(d[4 * j], d[4 * j + 1]);
    *(__nv_bfloat162 *)&c[(size_t)(row + 8) * N + col] = __floats2bfloat162_rn(d[4 * j + 2], d[4 * j + 3]);
  }
}

/* ---- the copy engine's form (BMODE 3) ---- */
__device__ __forceinline__ void mbar_init(uint64_t *b, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(b)), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect(uint64_t *b, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(b)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t *b) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(b)) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t *b, int parity) {
  uint32_t done;
  do {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done) : "r"(smem_addr(b)), "r"(parity) : "memory");
  } while (!done);
}
/* a 2-d box of the tensor map at (c0 innermost, c1) into shared dst, its bytes counted on bar */
__device__ __forceinline__ void tma_load(uint32_t dst, const CUtensorMap *map, int c0, int c1, uint64_t *bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
               ::"r"(dst), "l"((uint64_t)map), "r"(c0), "r"(c1), "r"(smem_addr(bar)) : "memory");
}

template <int CW, int BN, int STAGES, bool PERSIST>
__global__ void __launch_bounds__(128 * (CW + 1), 1) gemm_tma(const __grid_constant__ CUtensorMap ta,
                                                           const __grid_constant__ CUtensorMap tb,
                                                           __nv_bfloat16 *__restrict__ c, int M, int N, int K) {
  constexpr int BM = 64 * CW, A_BYTES = BM * 128, STAGE = A_BYTES + BN * 128;
  extern __shared__ unsigned char dyn[];
  __shared__ __align__(8) uint64_t full[STAGES], empty[STAGES];
  unsigned char *sm = (unsigned char *)(((uintptr_t)dyn + 1023) & ~(uintptr_t)1023);
  const uint32_t base = smem_addr(sm);
  const int tid = threadIdx.x, wg = tid / 128, lane = tid & 31, warp = (tid / 32) % 4;
  const int tiles_n = N / BN, tiles = M / BM * tiles_n, nkt = K / 64;
  if (tid == 0) {
    for (int s = 0; s < STAGES; s++) mbar_init(&full[s], 1), mbar_init(&empty[s], 128 * CW);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
  /* g counts k-tiles through the stage ring across this block's tiles (PERSIST: a tile loop over a
   * grid of at most one block an SM, the next tile's copies under this one's epilogue) */
  int g = 0;
  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
    if (tid == 0)
      for (int tile = blockIdx.x; tile < tiles; tile += PERSIST ? gridDim.x : tiles) {
        const int tm0 = tile / tiles_n * BM, tn0 = tile % tiles_n * BN;
        for (int t = 0; t < nkt; t++, g++) {
          const int s = g % STAGES;
          if (g >= STAGES) mbar_wait(&empty[s], (g / STAGES + 1) & 1);
          mbar_expect(&full[s], STAGE);
          tma_load(base + s * STAGE, &ta, t * 64, tm0, &full[s]);
          #pragma unroll
          for (int p = 0; p < BN / 64; p++) tma_load(base + s * STAGE + A_BYTES + p * 8192, &tb, tn0 + p * 64, t * 64, &full[s]);
        }
      }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
    const int cw = wg - 1;
    for (int tile = blockIdx.x; tile < tiles; tile += PERSIST ? gridDim.x : tiles) {
      const int tm0 = tile / tiles_n * BM, tn0 = tile % tiles_n * BN;
      float d[BN / 2];
      #pragma unroll
      for (int i = 0; i < BN / 2; i++) d[i] = 0.0f;
      for (int t = 0; t < nkt; t++, g++) {
        const int s = g % STAGES;
        mbar_wait(&full[s], (g / STAGES) & 1);
        const uint32_t as = base + s * STAGE + cw * 64 * 128, bs = base + s * STAGE + A_BYTES;
        wg_fence();
        #pragma unroll
        for (int kk = 0; kk < 4; kk++) wg_mma<BN, 1>(d, desc(as + kk * 32, 16, 1024), desc(bs + kk * 2048, 8192, 1024));
        wg_commit();
        wg_wait<1>();
        if (t > 0) mbar_arrive(&empty[(g - 1) % STAGES]);  /* the products of the k-tile before are done with its stage */
      }
      wg_wait<0>();
      mbar_arrive(&empty[(g - 1) % STAGES]);  /* and the tile's last: the producer may be on the next tile */
      const int row = tm0 + cw * 64 + warp * 16 + lane / 4;
      #pragma unroll
      for (int j = 0; j < BN / 8; j++) {
        const int col = tn0 + j * 8 + (lane % 4) * 2;
        *(__nv_bfloat162 *)&c[(size_t)row * N + col] = __floats2bfloat162_rn(d[4 * j], d[4 * j + 1]);
        *(__nv_bfloat162 *)&c[(size_t)(row + 8) * N + col] = __floats2bfloat162_rn(d[4 * j + 2], d[4 * j + 3]);
      }
    }
  }
}

/* a row-major [rows, cols] bf16 tensor as a tensor map of boxes of box_cols x box_rows, 128-byte swizzled */
static CUtensorMap tensor_map(const __nv_bfloat16 *p, int rows, int cols, int box_cols, int box_rows) {
  CUtensorMap m;
  cuuint64_t dims[2] = { (cuuint64_t)cols, (cuuint64_t)rows }, strides[1] = { (cuuint64_t)cols * 2 };
  cuuint32_t box[2] = { (cuuint32_t)box_cols, (cuuint32_t)box_rows }, es[2] = { 1, 1 };
  CUresult r = cuTensorMapEncodeTiled(&m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, (void *)p, dims, strides, box, es,
                                      CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) {
    printf("{\"error\": \"cuTensorMapEncodeTiled: %d\"}\n", (int)r);
    exit(1);
  }
  return m;
}

/* the reference: one thread an output, f32 sums of the same bf16 values */
__global__ void reference(const __nv_bfloat16 *a, const __nv_bfloat16 *b, float *c, int M, int N, int K) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x, m = blockIdx.y;
  if (n >= N) return;
  float s = 0;
  for (int k = 0; k < K; k++) s += __bfloat162float(a[(size_t)m * K + k]) * __bfloat162float(b[(size_t)k * N + n]);
  c[(size_t)m * N + n] = s;
}

struct Shape { const char *name; int M, N, K; };
struct Bufs { __nv_bfloat16 *a, *b, *bt, *c; float *ref; };

static float median(std::vector<float> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }

/* One candidate: launch() once, checked against the reference, then timed where it agrees. */
template <class L> static void measure(const Shape &s, const Bufs &x, int wg, int bn, int stages, int bmode, int blocks, L launch) {
  CK(cudaMemset(x.c, 0, (size_t)s.M * s.N * 2));
  launch();
  cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    printf("{\"shape\": \"%s\", \"wg\": %d, \"bn\": %d, \"stages\": %d, \"bmode\": %d, \"error\": \"%s\"}\n", s.name, wg, bn, stages,
           bmode, cudaGetErrorString(e));
    exit(1);  /* a fault leaves the context unusable */
  }
  std::vector<__nv_bfloat16> hc((size_t)s.M * s.N);
  std::vector<float> hr((size_t)s.M * s.N);
  CK(cudaMemcpy(hc.data(), x.c, hc.size() * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hr.data(), x.ref, hr.size() * 4, cudaMemcpyDeviceToHost));
  double maxref = 0, maxerr = 0;
  for (size_t i = 0; i < hr.size(); i++) {
    maxref = std::max(maxref, (double)fabsf(hr[i]));
    maxerr = std::max(maxerr, (double)fabsf(__bfloat162float(hc[i]) - hr[i]));
  }
  const double err = maxerr / maxref;
  float us = -1;
  if (err < 1e-2) {
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<float> times;
    for (int rep = 0; rep < 16; rep++) {
      CK(cudaEventRecord(e0));
      for (int i = 0; i < 20; i++) launch();
      CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1));
      float ms;
      CK(cudaEventElapsedTime(&ms, e0, e1));
      if (rep) times.push_back(ms * 1000 / 20);
    }
    us = median(times);
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
  }
  printf("{\"shape\": \"%s\", \"M\": %d, \"N\": %d, \"K\": %d, \"wg\": %d, \"bn\": %d, \"stages\": %d, \"bmode\": %d, \"blocks\": %d, "
         "\"err\": %.3g, \"ok\": %s, \"us\": %.2f, \"tflops\": %.0f}\n",
         s.name, s.M, s.N, s.K, wg, bn, stages, bmode, blocks, err, err < 1e-2 ? "true" : "false", us,
         us > 0 ? 2.0 * s.M * s.N * s.K / us * 1e-6 : 0.0);
  fflush(stdout);
}

template <int WG, int BN, int STAGES, int BMODE> static void run(const Shape &s, const Bufs &x) {
  constexpr int BM = WG * 64;
  if (s.M % BM || s.N % BN || s.K % 64) return;
  const int smem = STAGES * (BM + BN) * 128 + 1024;
  auto kern = gemm<WG, BN, STAGES, BMODE>;
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const int blocks = s.M / BM * (s.N / BN);
  measure(s, x, WG, BN, STAGES, BMODE, blocks,
          [&] { kern<<<blocks, WG * 128, smem>>>(x.a, x.b, x.bt, x.c, s.M, s.N, s.K); });
}

/* the copy engine's form: CW consumer warpgroups (64 CW rows), the producer's warpgroup beside them;
 * PERSIST: no more blocks than are resident at once, each looping over tiles */
template <int CW, int BN, int STAGES, bool PERSIST> static void run_tma(const Shape &s, const Bufs &x) {
  constexpr int BM = 64 * CW;
  if (s.M % BM || s.N % BN || s.K % 64) return;
  const CUtensorMap ta = tensor_map(x.a, s.M, s.K, 64, BM), tb = tensor_map(x.b, s.K, s.N, 64, 64);
  const int smem = STAGES * (BM + BN) * 128 + 1024;
  auto kern = gemm_tma<CW, BN, STAGES, PERSIST>;
  CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  int sms = 0, per_sm = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, 128 * (CW + 1), smem));
  const int tiles = s.M / BM * (s.N / BN), blocks = PERSIST ? std::min(tiles, sms * std::max(per_sm, 1)) : tiles;
  /* the mode says the form: 3 the copy engine, 4 the same persistent */
  measure(s, x, CW, BN, STAGES, PERSIST ? 4 : 3, blocks,
          [&] { kern<<<blocks, 128 * (CW + 1), smem>>>(ta, tb, x.c, s.M, s.N, s.K); });
}

/* the copy engine's candidates: two consumers and one, stages filling shared memory, and fewer stages
 * so that 2 or 3 blocks share an SM */
template <bool PERSIST> static void sweep_tma(const Shape &s, const Bufs &x) {
  run_tma<2, 64, 8, PERSIST>(s, x);
  run_tma<2, 128, 6, PERSIST>(s, x);
  run_tma<2, 192, 5, PERSIST>(s, x);
  run_tma<2, 256, 4, PERSIST>(s, x);
  run_tma<1, 64, 8, PERSIST>(s, x);
  run_tma<1, 128, 8, PERSIST>(s, x);
  run_tma<1, 192, 6, PERSIST>(s, x);
  run_tma<1, 64, 4, PERSIST>(s, x);
  run_tma<2, 64, 4, PERSIST>(s, x);
}

/* every candidate whose stages fit 227 KB of shared memory */
template <int BMODE> static void sweep(const Shape &s, const Bufs &x) {
  run<1, 64, 6, BMODE>(s, x);
  run<1, 128, 6, BMODE>(s, x);
  run<1, 192, 6, BMODE>(s, x);
  run<1, 256, 5, BMODE>(s, x);
  run<2, 64, 6, BMODE>(s, x);
  run<2, 128, 6, BMODE>(s, x);
  run<2, 192, 5, BMODE>(s, x);
  run<2, 256, 4, BMODE>(s, x);
}

int main(int argc, char **argv) {
  const Shape shapes[] = { { "qkv", 1024, 2304, 768 }, { "out", 1024, 768, 768 }, { "ffn1", 1024, 3072, 768 }, { "ffn2", 1024, 768, 3072 } };
  const int only_mode = argc > 1 ? atoi(argv[1]) : -1;  /* one BMODE alone (a fault ends the run) */
  for (const Shape &s : shapes) {
    Bufs x;
    const size_t na = (size_t)s.M * s.K, nb = (size_t)s.K * s.N, nc = (size_t)s.M * s.N;
    CK(cudaMalloc(&x.a, na * 2));
    CK(cudaMalloc(&x.b, nb * 2));
    CK(cudaMalloc(&x.bt, nb * 2));
    CK(cudaMalloc(&x.c, nc * 2));
    CK(cudaMalloc(&x.ref, nc * 4));
    std::vector<__nv_bfloat16> ha(na), hb(nb), hbt(nb);
    srand(1);
    for (auto &v : ha) v = __float2bfloat16((rand() / (float)RAND_MAX) * 2 - 1);
    for (size_t k = 0; k < (size_t)s.K; k++)
      for (size_t n = 0; n < (size_t)s.N; n++) hb[k * s.N + n] = hbt[n * s.K + k] = __float2bfloat16((rand() / (float)RAND_MAX) * 2 - 1);
    CK(cudaMemcpy(x.a, ha.data(), na * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(x.b, hb.data(), nb * 2, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(x.bt, hbt.data(), nb * 2, cudaMemcpyHostToDevice));
    reference<<<dim3((s.N + 127) / 128, s.M), 128>>>(x.a, x.b, x.ref, s.M, s.N, s.K);
    CK(cudaDeviceSynchronize());
    if (only_mode < 0 || only_mode == 3) sweep_tma<false>(s, x);
    if (only_mode < 0 || only_mode == 4) sweep_tma<true>(s, x);
    if (only_mode < 0 || only_mode == 2) sweep<2>(s, x);
    if (only_mode < 0 || only_mode == 0) sweep<0>(s, x);
    if (only_mode < 0 || only_mode == 1) sweep<1>(s, x);
    CK(cudaFree(x.a));
    CK(cudaFree(x.b));
    CK(cudaFree(x.bt));
    CK(cudaFree(x.c));
    CK(cudaFree(x.ref));
  }
  return 0;
}
