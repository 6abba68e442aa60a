// kglab.cu — does a small f32 GEMM tile run faster with more k groups in its block?
//
// kiln's 32x32 tiles are a block of 256 threads in 4 k groups (64 threads, 4x4 outputs each,
// over a quarter of each 32-point k-tile). Where a layer has about one tile a multiprocessor
// (1024x128x784: 128 tiles) the block's 8 warps leave the schedulers idle most cycles
// (stamplab: ~900 cycles a k-tile for 128 multiply-adds a thread); the split along K that
// would add blocks costs a global round trip or three. This lab keeps one block a tile and
// grows the block instead: KG groups of 64 threads, k-tiles of 8*KG points, two register
// stages of 16-byte reads, the groups' sums added in a tree through shared memory. Times are
// ncu's (run under `ncu --metrics gpu__time_duration.sum --clock-control none`) or CUDA-event
// medians; results are checked against a double-precision host product. Not part of the build:
//   nvcc -O3 -arch=sm_90 --fmad=false -o kglab bench/gpu/kglab.cu && ./kglab
//   ncu --clock-control none --metrics gpu__time_duration.sum ./kglab quick
// H200, 2026-12-04 (ncu, us; KG 4 / 8 / 16): 1024x128x784 16.7 / 14.9 / 16.0, 128x512x784 15.8 / 14.7 /
// 15.3, 128x512x512 11.2 / 10.6 / 11.0, 1024x256x512 17.3 / 17.4 / 20.6. More warps a tile buy at most
// 11 %: the k loop is not waiting on warps alone. ncu's source view of kiln's own tile (stamplab)
// shows why: each k step's two 16-byte shared reads take 6 wavefronts (a quarter warp each) for 16
// multiply-adds a thread, so shared memory, not the FMA pipe, sets the pace of a 4x4 sub-tile.
// Layout 1 (a quarter warp over 2 row groups x 4 column groups instead of 1 x 8) reads as many
// wavefronts (1.25 M against 1.24 M for 1024x128x784) in the same time (18.40 us, events). And 8x8
// a thread (gemm_mt8: 16 groups of 16 threads, half the shared reads a multiply-add) is no faster
// either (ncu: 18.1 us against 16.8 for 1024x128x784, 13.6 against 12.4 for 128x512x512; 16.6
// against 17.1 for 1024x256x512). So neither warps, nor layout, nor shared reads a multiply-add set
// these tiles' pace. Left to measure: the A operand's reads (a warp takes 16 bytes from each of 32
// rows) and the L2 latency of each k-tile.
//
// `kglab cp` (session 28): the same tile with its operands copied by cp.async straight into 2, 3, 4
// or 6 shared stages (A kept [m][k], a thread's rows 8 apart, one barrier a k-tile), each launch
// timed alone and in a train of 20. H200, 2026-12-04, in a train (us; registers / cp 2 / 3 / 4 / 6
// stages): 1024x128x784 13.87 / 12.51 / 13.20 / 12.22 / 12.90; 128x512x784 13.68 / 12.16 / 12.98 /
// 11.95 / 12.66; 128x512x512 9.93 / 8.50 / 8.96 / 8.42 / 8.70; 1024x256x512 16.30 / 12.50 / 13.08 /
// 12.61 / 13.13. An empty kernel: 3.3-3.7 (in a train: the launch rate), 4.9-5.3 alone. So the copies
// are 10-23 % faster, and stages beyond two buy nothing: the loop still does not wait on its reads
// so much as on its own shape. kiln's tiles took them (gemm.c CgGemm.copies, KILN_CUDA_COPY_STAGES).
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <vector>
#include <algorithm>
#include <string>

static int rounds = 100;  // `kglab quick`: 3 (under ncu, which times each launch itself)
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)

// C[M,N] = A[M,K] B[K,N], row-major, M and N multiples of 32, K a multiple of 4.
// LAYOUT 0: a quarter warp (8 threads) takes one row group of 4 and eight column groups (kiln's
// k groups as of 2026-12-04); 1: two row groups and four column groups.
template <int KG, int LAYOUT>
__global__ void __launch_bounds__(KG * 64) gemm_kg(const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C,
                                                 int M, int N, int K) {
  constexpr int BK = 8 * KG, LD = 36;
  extern __shared__ float4 smem4[];
  float *sm = (float *)smem4;
  float *As[2] = { sm, sm + BK * LD }, *Bs[2] = { sm + 2 * BK * LD, sm + 3 * BK * LD };
  const int t = threadIdx.x, kg = t / 64, u = t % 64;
  const int cx = LAYOUT ? u % 4 + 4 * ((u / 8) % 2) : u % 8, cy = LAYOUT ? (u / 4) % 2 + 2 * (u / 16) : u / 8;
  const int tiles_n = N / 32, tn0 = (blockIdx.x % tiles_n) * 32, tm0 = (blockIdx.x / tiles_n) * 32;
  // one float4 of A (row t % 32, k (t / 32) * 4) and one of B (k t / 8, columns (t % 8) * 4) a thread a k-tile
  const int am = t % 32, ak = (t / 32) * 4, bk = t / 8, bn = (t % 8) * 4;
  float4 pa[2], pb[2];
  auto fetch = [&](int s, int kb) {
    pa[s] = kb + ak < K ? *(const float4 *)(A + (size_t)(tm0 + am) * K + kb + ak) : make_float4(0, 0, 0, 0);
    pb[s] = kb + bk < K ? *(const float4 *)(B + (size_t)(kb + bk) * N + tn0 + bn) : make_float4(0, 0, 0, 0);
  };
  float acc[4][4] = {};
  fetch(0, 0);
  if (BK < K) fetch(1, BK);
  // two register stages, unrolled so that each stage's registers are named (no local memory)
  auto round = [&](int s, int k0) {
    float *as = As[s], *bs = Bs[s];
    as[(ak + 0) * LD + am] = pa[s].x; as[(ak + 1) * LD + am] = pa[s].y;
    as[(ak + 2) * LD + am] = pa[s].z; as[(ak + 3) * LD + am] = pa[s].w;
    *(float4 *)&bs[bk * LD + bn] = pb[s];
    __syncthreads();  // also orders this buffer's reads two rounds ago before these writes
    if (k0 + 2 * BK < K) fetch(s, k0 + 2 * BK);
#pragma unroll
    for (int kq = 0; kq < 8; kq++) {
      const int kk = kg * 8 + kq;
      const float4 a4 = *(const float4 *)&as[kk * LD + cy * 4], b4 = *(const float4 *)&bs[kk * LD + cx * 4];
      const float ra[4] = { a4.x, a4.y, a4.z, a4.w }, rb[4] = { b4.x, b4.y, b4.z, b4.w };
#pragma unroll
      for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) acc[i][j] = __fmaf_rn(ra[i], rb[j], acc[i][j]);
    }
  };
  for (int k0 = 0; k0 < K; k0 += 2 * BK) {
    round(0, k0);
    if (k0 + BK >= K) break;
    round(1, k0 + BK);
  }
  __syncthreads();
  // the groups' sums in a tree: groups [h, 2h) store, groups [0, h) add, h = KG/2 .. 1
  for (int h = KG / 2; h >= 1; h /= 2) {
    if (kg >= h && kg < 2 * h)
      for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) sm[(kg - h) * 1024 + (cy * 4 + i) * 32 + cx * 4 + j] = acc[i][j];
    __syncthreads();
    if (kg < h)
      for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) acc[i][j] += sm[kg * 1024 + (cy * 4 + i) * 32 + cx * 4 + j];
    __syncthreads();
  }
  if (kg == 0)
    for (int i = 0; i < 4; i++)
      *(float4 *)&C[(size_t)(tm0 + cy * 4 + i) * N + tn0 + cx * 4] = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
}

template <int KG> static size_t smem_bytes() {
  size_t tiles = (size_t)4 * 8 * KG * 36 * 4, tree = (size_t)(KG / 2 > 0 ? KG / 2 : 1) * 1024 * 4;
  return std::max(tiles, tree);
}

template <int KG, int LAYOUT = 0> static void run(const char *shape, const float *A, const float *B, float *C, int M, int N, int K,
                                  const std::vector<double> &ref) {
  size_t sh = smem_bytes<KG>();
  CK(cudaFuncSetAttribute(gemm_kg<KG, LAYOUT>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sh));
  int blocks = (M / 32) * (N / 32);
  auto launch = [&] { gemm_kg<KG, LAYOUT><<<blocks, KG * 64, sh>>>(A, B, C, M, N, K); };
  for (int r = 0; r < (rounds > 3 ? 10 : 0); r++) launch();
  CK(cudaDeviceSynchronize());
  cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  std::vector<float> ts;
  for (int r = 0; r < rounds; r++) {
    CK(cudaEventRecord(a)); launch(); CK(cudaEventRecord(b)); CK(cudaEventSynchronize(b));
    float ms; CK(cudaEventElapsedTime(&ms, a, b)); ts.push_back(ms * 1000);
  }
  std::sort(ts.begin(), ts.end());
  std::vector<float> h((size_t)M * N);
  CK(cudaMemcpy(h.data(), C, h.size() * 4, cudaMemcpyDeviceToHost));
  double err = 0;
  for (size_t i = 0; i < h.size(); i++) err = std::max(err, std::fabs(h[i] - ref[i]) / (1e-3 + std::fabs(ref[i])));
  printf("%-14s KG %2d layout %d: %4d threads, %3d blocks, event median %6.2f us, max rel err %.1e\n", shape, KG, LAYOUT, KG * 64,
         blocks, ts[ts.size() / 2], err);
}

// 8x8 a thread: 16 groups of 16 threads (256 in all), each thread rows cy*8.. and columns cx*8..
// of the 32x32 tile over 2 of each 32-point k-tile's points: 4 shared reads of 16 bytes for 64
// multiply-adds (the 4x4 groups: 2 for 16). The groups' sums meet in a tree of four levels.
__global__ void __launch_bounds__(256) gemm_mt8(const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C,
                                                int M, int N, int K) {
  constexpr int BK = 32, LD = 36;
  extern __shared__ float4 smem4[];
  float *sm = (float *)smem4;
  float *As[2] = { sm, sm + BK * LD }, *Bs[2] = { sm + 2 * BK * LD, sm + 3 * BK * LD };
  const int t = threadIdx.x, kg = t / 16, u = t % 16, cx = u % 4, cy = u / 4;
  const int tiles_n = N / 32, tn0 = (blockIdx.x % tiles_n) * 32, tm0 = (blockIdx.x / tiles_n) * 32;
  const int am = t % 32, ak = (t / 32) * 4, bk = t / 8, bn = (t % 8) * 4;
  float4 pa[2], pb[2];
  auto fetch = [&](int s, int kb) {
    pa[s] = kb + ak < K ? *(const float4 *)(A + (size_t)(tm0 + am) * K + kb + ak) : make_float4(0, 0, 0, 0);
    pb[s] = kb + bk < K ? *(const float4 *)(B + (size_t)(kb + bk) * N + tn0 + bn) : make_float4(0, 0, 0, 0);
  };
  float acc[8][8] = {};
  fetch(0, 0);
  if (BK < K) fetch(1, BK);
  auto round = [&](int s, int k0) {
    float *as = As[s], *bs = Bs[s];
    as[(ak + 0) * LD + am] = pa[s].x; as[(ak + 1) * LD + am] = pa[s].y;
    as[(ak + 2) * LD + am] = pa[s].z; as[(ak + 3) * LD + am] = pa[s].w;
    *(float4 *)&bs[bk * LD + bn] = pb[s];
    __syncthreads();
    if (k0 + 2 * BK < K) fetch(s, k0 + 2 * BK);
#pragma unroll
    for (int kq = 0; kq < 2; kq++) {
      const int kk = kg * 2 + kq;
      const float4 a0 = *(const float4 *)&as[kk * LD + cy * 8], a1 = *(const float4 *)&as[kk * LD + cy * 8 + 4];
      const float4 b0 = *(const float4 *)&bs[kk * LD + cx * 8], b1 = *(const float4 *)&bs[kk * LD + cx * 8 + 4];
      const float ra[8] = { a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w };
      const float rb[8] = { b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w };
#pragma unroll
      for (int i = 0; i < 8; i++)
#pragma unroll
        for (int j = 0; j < 8; j++) acc[i][j] = __fmaf_rn(ra[i], rb[j], acc[i][j]);
    }
  };
  for (int k0 = 0; k0 < K; k0 += 2 * BK) {
    round(0, k0);
    if (k0 + BK >= K) break;
    round(1, k0 + BK);
  }
  __syncthreads();
  for (int h = 8; h >= 1; h /= 2) {
    if (kg >= h && kg < 2 * h)
      for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j++) sm[(kg - h) * 1024 + (cy * 8 + i) * 32 + cx * 8 + j] = acc[i][j];
    __syncthreads();
    if (kg < h)
      for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j++) acc[i][j] += sm[kg * 1024 + (cy * 8 + i) * 32 + cx * 8 + j];
    __syncthreads();
  }
  if (kg == 0)
    for (int i = 0; i < 8; i++)
      for (int j = 0; j < 8; j += 4)
        *(float4 *)&C[(size_t)(tm0 + cy * 8 + i) * N + tn0 + cx * 8 + j] = make_float4(acc[i][j], acc[i][j + 1], acc[i][j + 2], acc[i][j + 3]);
}

static void run_mt8(const char *shape, const float *A, const float *B, float *C, int M, int N, int K, const std::vector<double> &ref) {
  size_t sh = 8 * 1024 * 4;
  CK(cudaFuncSetAttribute(gemm_mt8, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sh));
  int blocks = (M / 32) * (N / 32);
  auto launch = [&] { gemm_mt8<<<blocks, 256, sh>>>(A, B, C, M, N, K); };
  for (int r = 0; r < (rounds > 3 ? 10 : 0); r++) launch();
  CK(cudaDeviceSynchronize());
  cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  std::vector<float> ts;
  for (int r = 0; r < rounds; r++) {
    CK(cudaEventRecord(a)); launch(); CK(cudaEventRecord(b)); CK(cudaEventSynchronize(b));
    float ms; CK(cudaEventElapsedTime(&ms, a, b)); ts.push_back(ms * 1000);
  }
  std::sort(ts.begin(), ts.end());
  std::vector<float> h((size_t)M * N);
  CK(cudaMemcpy(h.data(), C, h.size() * 4, cudaMemcpyDeviceToHost));
  double err = 0;
  for (size_t i = 0; i < h.size(); i++) err = std::max(err, std::fabs(h[i] - ref[i]) / (1e-3 + std::fabs(ref[i])));
  printf("%-14s 8x8 a thread, 16 groups: 256 threads, %3d blocks, event median %6.2f us, max rel err %.1e\n", shape, blocks,
         ts[ts.size() / 2], err);
}

// cp.async ring (2026-12-04, session 28): is the 32x32 tile waiting on its global reads after all?
// Register stages block a warp at the shared store of a stage until its global read lands; cp.async
// copies straight into shared memory, so ST-1 k-tiles are in flight while the block multiplies.
// A stays [m][k] in shared memory (a 16-byte copy a thread an operand a k-tile); a thread's rows are
// cy + 8i so that a warp's four A rows fall in distinct banks (row stride 36 floats); one barrier a
// k-tile. 256 threads in 4 k groups of 64, 4x4 a thread, the groups' sums in the same tree.
__device__ __forceinline__ void cp16(float *dst, const float *src, int bytes) {
  unsigned d = (unsigned)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(bytes));
}
template <int ST>
__global__ void __launch_bounds__(256) gemm_cp(const float *__restrict__ A, const float *__restrict__ B, float *__restrict__ C,
                                               int M, int N, int K) {
  constexpr int BK = 32, LD = 36;
  extern __shared__ float4 smem4[];
  float *sm = (float *)smem4;
  const int t = threadIdx.x, kg = t / 64, u = t % 64, cx = u % 8, cy = u / 8;
  const int tiles_n = N / 32, tn0 = (blockIdx.x % tiles_n) * 32, tm0 = (blockIdx.x / tiles_n) * 32;
  const int cr = t / 8, cc = (t % 8) * 4;
  const int nt = (K + BK - 1) / BK;
  auto issue = [&](int s, int kb) {
    float *as = sm + s * 2 * BK * LD, *bs = as + BK * LD;
    const bool ia = kb + cc < K, ib = kb + cr < K;
    cp16(&as[cr * LD + cc], ia ? A + (size_t)(tm0 + cr) * K + kb + cc : A, ia ? 16 : 0);
    cp16(&bs[cr * LD + cc], ib ? B + (size_t)(kb + cr) * N + tn0 + cc : B, ib ? 16 : 0);
  };
  for (int s = 0; s < ST - 1; s++) {
    if (s < nt) issue(s, s * BK);
    asm volatile("cp.async.commit_group;\n");
  }
  float acc[4][4] = {};
  for (int r = 0; r < nt; r++) {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(ST - 2));
    __syncthreads();  // stage r landed for every thread; stage r-1's reads are done, so it may be refilled
    if (r + ST - 1 < nt) issue((r + ST - 1) % ST, (r + ST - 1) * BK);
    asm volatile("cp.async.commit_group;\n");
    const float *as = sm + (r % ST) * 2 * BK * LD, *bs = as + BK * LD;
#pragma unroll
    for (int kh = 0; kh < 2; kh++) {
      const int k4 = kg * 8 + kh * 4;
      float4 a[4];
#pragma unroll
      for (int i = 0; i < 4; i++) a[i] = *(const float4 *)&as[(cy + 8 * i) * LD + k4];
#pragma unroll
      for (int kq = 0; kq < 4; kq++) {
        const float4 b4 = *(const float4 *)&bs[(k4 + kq) * LD + cx * 4];
        const float rb[4] = { b4.x, b4.y, b4.z, b4.w };
#pragma unroll
        for (int i = 0; i < 4; i++) {
          const float ra = kq == 0 ? a[i].x : kq == 1 ? a[i].y : kq == 2 ? a[i].z : a[i].w;
#pragma unroll
          for (int j = 0; j < 4; j++) acc[i][j] = __fmaf_rn(ra, rb[j], acc[i][j]);
        }
      }
    }
  }
  asm volatile("cp.async.wait_group 0;\n");
  __syncthreads();
  for (int h = 2; h >= 1; h /= 2) {
    if (kg >= h && kg < 2 * h)
      for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) sm[(kg - h) * 1024 + (cy + 8 * i) * 32 + cx * 4 + j] = acc[i][j];
    __syncthreads();
    if (kg < h)
      for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) acc[i][j] += sm[kg * 1024 + (cy + 8 * i) * 32 + cx * 4 + j];
    __syncthreads();
  }
  if (kg == 0)
    for (int i = 0; i < 4; i++)
      *(float4 *)&C[(size_t)(tm0 + cy + 8 * i) * N + tn0 + cx * 4] = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
}

__global__ void empty_kernel() {}

// a launch timed alone (events around it) and in a train of 20 on one stream (the mean), so that the
// kernel's own time shows without the fixed cost of a lone launch
template <class L> static void time_it(const char *what, const char *shape, int blocks, L launch, const float *C, int M, int N,
                                       const std::vector<double> *ref) {
  for (int r = 0; r < 10; r++) launch();
  CK(cudaDeviceSynchronize());
  cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  std::vector<float> lone, train;
  for (int r = 0; r < rounds; r++) {
    CK(cudaEventRecord(a)); launch(); CK(cudaEventRecord(b)); CK(cudaEventSynchronize(b));
    float ms; CK(cudaEventElapsedTime(&ms, a, b)); lone.push_back(ms * 1000);
    CK(cudaEventRecord(a)); for (int i = 0; i < 20; i++) launch(); CK(cudaEventRecord(b)); CK(cudaEventSynchronize(b));
    CK(cudaEventElapsedTime(&ms, a, b)); train.push_back(ms * 1000 / 20);
  }
  CK(cudaGetLastError());
  std::sort(lone.begin(), lone.end()); std::sort(train.begin(), train.end());
  double err = 0;
  if (ref) {
    std::vector<float> h((size_t)M * N);
    CK(cudaMemcpy(h.data(), C, h.size() * 4, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < h.size(); i++) err = std::max(err, std::fabs(h[i] - (*ref)[i]) / (1e-3 + std::fabs((*ref)[i])));
  }
  printf("%-14s %-22s %4d blocks: lone %6.2f us, in a train %6.2f us, max rel err %.1e\n", shape, what, blocks,
         lone[lone.size() / 2], train[train.size() / 2], err);
}

// the cp.async ring against the register stages, each launch alone and in a train (`kglab cp`)
static void cp_runs(const char *name, const float *A, const float *B, float *C, int M, int N, int K, const std::vector<double> &ref) {
  const int blocks = (M / 32) * (N / 32);
  time_it("empty kernel", name, blocks, [&] { empty_kernel<<<blocks, 256>>>(); }, C, M, N, nullptr);
  size_t sh = smem_bytes<4>();
  CK(cudaFuncSetAttribute(gemm_kg<4, 0>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sh));
  time_it("registers, 2 stages", name, blocks, [&] { gemm_kg<4, 0><<<blocks, 256, sh>>>(A, B, C, M, N, K); }, C, M, N, &ref);
#define CP_RUN(ST)                                                                                                       \
  {                                                                                                                      \
    size_t shc = std::max((size_t)(ST) * 2 * 32 * 36 * 4, (size_t)2 * 1024 * 4);                                         \
    CK(cudaFuncSetAttribute(gemm_cp<ST>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)shc));                        \
    time_it("cp.async, " #ST " stages", name, blocks, [&] { gemm_cp<ST><<<blocks, 256, shc>>>(A, B, C, M, N, K); }, C, M, N, \
            &ref);                                                                                                       \
  }
  CP_RUN(2) CP_RUN(3) CP_RUN(4) CP_RUN(6)
#undef CP_RUN
}

static void shape(int M, int N, int K, bool cp = false) {
  std::vector<float> hA((size_t)M * K), hB((size_t)K * N);
  for (size_t i = 0; i < hA.size(); i++) hA[i] = (float)((i * 2654435761u) % 1000) / 1000.0f - 0.5f;
  for (size_t i = 0; i < hB.size(); i++) hB[i] = (float)((i * 40503u) % 1000) / 1000.0f - 0.5f;
  std::vector<double> ref((size_t)M * N, 0.0);
  for (int m = 0; m < M; m++)
    for (int k = 0; k < K; k++)
      for (int n = 0; n < N; n++) ref[(size_t)m * N + n] += (double)hA[(size_t)m * K + k] * hB[(size_t)k * N + n];
  float *A, *B, *C;
  CK(cudaMalloc(&A, hA.size() * 4)); CK(cudaMalloc(&B, hB.size() * 4)); CK(cudaMalloc(&C, (size_t)M * N * 4));
  CK(cudaMemcpy(A, hA.data(), hA.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(B, hB.data(), hB.size() * 4, cudaMemcpyHostToDevice));
  char name[64];
  snprintf(name, sizeof name, "%dx%dx%d", M, N, K);
  if (cp) {
    cp_runs(name, A, B, C, M, N, K, ref);
    CK(cudaFree(A)); CK(cudaFree(B)); CK(cudaFree(C));
    return;
  }
  run<4>(name, A, B, C, M, N, K, ref);
  run<4, 1>(name, A, B, C, M, N, K, ref);
  run_mt8(name, A, B, C, M, N, K, ref);
  run<8>(name, A, B, C, M, N, K, ref);
  run<16>(name, A, B, C, M, N, K, ref);
  CK(cudaFree(A)); CK(cudaFree(B)); CK(cudaFree(C));
}

int main(int argc, char **argv) {
  if (argc > 1 && std::string(argv[1]) == "quick") rounds = 3;
  if (argc > 1 && std::string(argv[1]) == "cp") {  // the cp.async ring against the register stages
    shape(1024, 128, 784, true);
    shape(128, 512, 784, true);
    shape(128, 512, 512, true);
    shape(1024, 256, 512, true);
    return 0;
  }
  shape(1024, 128, 784);  // mlp_train_b1024's forward layer: 128 tiles
  shape(128, 512, 784);   // mlp_fwd_b128's first layer: 64 tiles
  shape(128, 512, 512);   // its second
  shape(1024, 256, 512);  // 256 tiles
  return 0;
}
