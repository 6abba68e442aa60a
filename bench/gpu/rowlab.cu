// rowlab.cu — a lab for long-row softmax on the GPU (256 x 32768 f32, the WORKLOADS.md
// shape kiln's block-row kernels were furthest from copy bandwidth on). Hand-written
// candidates for the shape the renderer should emit, each timed with CUDA events (median
// of 100 launches, as peers.py times) beside a plain float4 copy of the same bytes, and
// checked against a double-precision host softmax. Not part of the build:
//   nvcc -O3 -arch=sm_90 -o rowlab bench/gpu/rowlab.cu && ./rowlab
// Candidates:
//   regs     1024 threads, the row in registers (8 float4 each), one block per SM (2 waves)
//   split    1024 threads, 8 points in registers, 24 in shared memory, plain loads (the
//            renderer's `long` as of 2026-11-30), two blocks per SM (one wave)
//   staged   split, but the shared part arrives by cp.async (16 B, no registers held), the
//            register part as float4: every load of the row is in flight at once
//   online   1024 threads, (max, sum) in one pass with rescaling, then the row read again
//            (from L2: the whole input is 32 MB, L2 50 MB) to write: no row kept on chip
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <algorithm>
#include <vector>

#define ROWS 256
#define COLS 32768
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)

__device__ __forceinline__ float wmax(float v) { for (int d = 16; d; d >>= 1) v = fmaxf(v, __shfl_xor_sync(~0u, v, d)); return v; }
__device__ __forceinline__ float wsum(float v) { for (int d = 16; d; d >>= 1) v += __shfl_xor_sync(~0u, v, d); return v; }
__device__ __forceinline__ float bmax(float v) {
  __shared__ float sh[32]; v = wmax(v); __syncthreads();
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v; __syncthreads();
  v = sh[threadIdx.x & 31]; return wmax(v);
}
__device__ __forceinline__ float bsum(float v) {
  __shared__ float sh[32]; v = wsum(v); __syncthreads();
  if ((threadIdx.x & 31) == 0) sh[threadIdx.x >> 5] = v; __syncthreads();
  v = sh[threadIdx.x & 31]; return wsum(v);
}
__device__ __forceinline__ float m4(float4 a) { return fmaxf(fmaxf(a.x, a.y), fmaxf(a.z, a.w)); }
__device__ __forceinline__ float s4(float4 a, float m) { return expf(a.x - m) + expf(a.y - m) + expf(a.z - m) + expf(a.w - m); }
__device__ __forceinline__ float4 o4(float4 a, float m, float s) {
  return make_float4(expf(a.x - m) / s, expf(a.y - m) / s, expf(a.z - m) / s, expf(a.w - m) / s);
}

__global__ void __launch_bounds__(1024, 1) k_regs(const float *__restrict__ x, float *__restrict__ y) {
  const float4 *xr = (const float4 *)(x + (size_t)blockIdx.x * COLS);
  float4 *yr = (float4 *)(y + (size_t)blockIdx.x * COLS);
  float4 c[8];
#pragma unroll
  for (int j = 0; j < 8; j++) c[j] = xr[threadIdx.x + j * 1024];
  float m = -INFINITY;
#pragma unroll
  for (int j = 0; j < 8; j++) m = fmaxf(m, m4(c[j]));
  m = bmax(m);
  float s = 0;
#pragma unroll
  for (int j = 0; j < 8; j++) s += s4(c[j], m);
  s = bsum(s);
#pragma unroll
  for (int j = 0; j < 8; j++) yr[threadIdx.x + j * 1024] = o4(c[j], m, s);
}

__global__ void __launch_bounds__(1024, 2) k_split(const float *__restrict__ x, float *__restrict__ y) {
  extern __shared__ float dyn[];
  const float *xr = x + (size_t)blockIdx.x * COLS;
  float *yr = y + (size_t)blockIdx.x * COLS;
  float c[8], m = -INFINITY;
#pragma unroll
  for (int j = 0; j < 32; j++) {
    float v = xr[threadIdx.x + j * 1024];
    if (j < 8) c[j] = v; else dyn[(j - 8) * 1024 + threadIdx.x] = v;
    m = fmaxf(m, v);
  }
  m = bmax(m);
  float s = 0;
#pragma unroll
  for (int j = 0; j < 32; j++) s += expf((j < 8 ? c[j] : dyn[(j - 8) * 1024 + threadIdx.x]) - m);
  s = bsum(s);
#pragma unroll
  for (int j = 0; j < 32; j++) yr[threadIdx.x + j * 1024] = expf((j < 8 ? c[j] : dyn[(j - 8) * 1024 + threadIdx.x]) - m) / s;
}

template <int REG4>  // float4s per thread kept in registers; 8 - REG4 staged in shared memory
__global__ void __launch_bounds__(1024, 2) k_staged(const float *__restrict__ x, float *__restrict__ y) {
  extern __shared__ float4 dyn4[];
  const float4 *xr = (const float4 *)(x + (size_t)blockIdx.x * COLS);
  float4 *yr = (float4 *)(y + (size_t)blockIdx.x * COLS);
  const int t = threadIdx.x;
#pragma unroll
  for (int j = REG4; j < 8; j++) {
    unsigned sa = (unsigned)__cvta_generic_to_shared(&dyn4[(j - REG4) * 1024 + t]);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(sa), "l"(&xr[t + j * 1024]));
  }
  asm volatile("cp.async.commit_group;\n" ::);
  float4 c[REG4 > 0 ? REG4 : 1];
#pragma unroll
  for (int j = 0; j < REG4; j++) c[j] = xr[t + j * 1024];
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
  float m = -INFINITY;
#pragma unroll
  for (int j = 0; j < 8; j++) m = fmaxf(m, m4(j < REG4 ? c[j] : dyn4[(j - REG4) * 1024 + t]));
  m = bmax(m);
  float s = 0;
#pragma unroll
  for (int j = 0; j < 8; j++) s += s4(j < REG4 ? c[j] : dyn4[(j - REG4) * 1024 + t], m);
  s = bsum(s);
#pragma unroll
  for (int j = 0; j < 8; j++) yr[t + j * 1024] = o4(j < REG4 ? c[j] : dyn4[(j - REG4) * 1024 + t], m, s);
}

__global__ void __launch_bounds__(1024, 2) k_online(const float *__restrict__ x, float *__restrict__ y) {
  const float4 *xr = (const float4 *)(x + (size_t)blockIdx.x * COLS);
  float4 *yr = (float4 *)(y + (size_t)blockIdx.x * COLS);
  float m = -INFINITY, s = 0;
#pragma unroll 4
  for (int j = 0; j < 8; j++) {
    float4 v = xr[threadIdx.x + j * 1024];
    float mn = fmaxf(m, m4(v));
    s = s * expf(m - mn) + s4(v, mn);
    m = mn;
  }
  float M = bmax(m);
  s = bsum(m == -INFINITY ? 0.f : s * expf(m - M));
#pragma unroll 4
  for (int j = 0; j < 8; j++) yr[threadIdx.x + j * 1024] = o4(xr[threadIdx.x + j * 1024], M, s);
}

__global__ void k_copy(const float4 *__restrict__ x, float4 *__restrict__ y, int n4) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += gridDim.x * blockDim.x) y[i] = x[i];
}

// four float4 per thread, all loads issued before any store; one pass over the grid
__global__ void k_copy4(const float4 *__restrict__ x, float4 *__restrict__ y) {
  size_t i = (size_t)blockIdx.x * 1024 + threadIdx.x;
  float4 a = x[i], b = x[i + 256], c = x[i + 512], d = x[i + 768];
  y[i] = a, y[i + 256] = b, y[i + 512] = c, y[i + 768] = d;
}

template <class F> static float med(F launch) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  for (int i = 0; i < 20; i++) launch();
  CK(cudaDeviceSynchronize());
  std::vector<float> t;
  for (int i = 0; i < 100; i++) {
    CK(cudaEventRecord(a)); launch(); CK(cudaEventRecord(b)); CK(cudaEventSynchronize(b));
    float ms; CK(cudaEventElapsedTime(&ms, a, b)); t.push_back(ms);
  }
  CK(cudaGetLastError());
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

int main() {
  size_t n = (size_t)ROWS * COLS;
  std::vector<float> h(n), out(n);
  unsigned long long r = 88172645463325252ull;
  for (size_t i = 0; i < n; i++) { r ^= r << 13; r ^= r >> 7; r ^= r << 17; h[i] = (float)((r >> 11) * (1.0 / 9007199254740992.0) * 8 - 4); }
  float *x, *y;
  CK(cudaMalloc(&x, n * 4)); CK(cudaMalloc(&y, n * 4));
  CK(cudaMemcpy(x, h.data(), n * 4, cudaMemcpyHostToDevice));
  CK(cudaFuncSetAttribute(k_split, cudaFuncAttributeMaxDynamicSharedMemorySize, 96 * 1024));
  CK(cudaFuncSetAttribute(k_staged<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, 96 * 1024));
  CK(cudaFuncSetAttribute(k_staged<3>, cudaFuncAttributeMaxDynamicSharedMemorySize, 80 * 1024));
  CK(cudaFuncSetAttribute(k_staged<0>, cudaFuncAttributeMaxDynamicSharedMemorySize, 128 * 1024));
  double bytes = 2.0 * n * 4;
  float tc = med([&] { k_copy<<<132 * 8, 256>>>((const float4 *)x, (float4 *)y, (int)(n / 4)); });
  printf("{\"rowlab\": \"copy32MB\", \"ms\": %.5f, \"GBs\": %.0f}\n", tc, bytes / tc / 1e6);
  // the best copy of these bytes found: a memcpy, and a one-pass kernel with 4 loads in flight
  float tm = med([&] { CK(cudaMemcpyAsync(y, x, n * 4, cudaMemcpyDeviceToDevice)); });
  printf("{\"rowlab\": \"memcpy32MB\", \"ms\": %.5f, \"GBs\": %.0f}\n", tm, bytes / tm / 1e6);
  float t4 = med([&] { k_copy4<<<(unsigned)(n / 4 / 1024), 256>>>((const float4 *)x, (float4 *)y); });
  printf("{\"rowlab\": \"copy4_32MB\", \"ms\": %.5f, \"GBs\": %.0f}\n", t4, bytes / t4 / 1e6);
  // 1 GiB moved (512 MiB each way), the size peers.py measures its ceiling at
  {
    float *X, *Y; size_t N = (size_t)1 << 27;
    CK(cudaMalloc(&X, N * 4)); CK(cudaMalloc(&Y, N * 4));
    float tb = med([&] { k_copy4<<<(unsigned)(N / 4 / 1024), 256>>>((const float4 *)X, (float4 *)Y); });
    printf("{\"rowlab\": \"copy4_512MB\", \"ms\": %.5f, \"GBs\": %.0f}\n", tb, 2.0 * N * 4 / tb / 1e6);
    CK(cudaFree(X)); CK(cudaFree(Y));
  }
  tc = std::min(tc, std::min(tm, t4));
  struct { const char *name; void (*k)(const float *, float *); int smem; } ks[] = {
    { "regs", k_regs, 0 }, { "split", k_split, 96 * 1024 }, { "staged2", k_staged<2>, 96 * 1024 },
    { "staged3", k_staged<3>, 80 * 1024 }, { "staged0", k_staged<0>, 128 * 1024 }, { "online", k_online, 0 },
  };
  for (auto &k : ks) {
    CK(cudaMemset(y, 0, n * 4));
    float ms = med([&] { k.k<<<ROWS, 1024, k.smem>>>(x, y); });
    CK(cudaMemcpy(out.data(), y, n * 4, cudaMemcpyDeviceToHost));
    double err = 0;
    for (int row = 0; row < ROWS; row += 37) {
      double mx = -1e300, s = 0;
      for (int c = 0; c < COLS; c++) mx = std::max(mx, (double)h[(size_t)row * COLS + c]);
      for (int c = 0; c < COLS; c++) s += exp(h[(size_t)row * COLS + c] - mx);
      for (int c = 0; c < COLS; c++) {
        double want = exp(h[(size_t)row * COLS + c] - mx) / s;
        err = std::max(err, fabs(out[(size_t)row * COLS + c] - want) / (want + 1e-30));
      }
    }
    cudaFuncAttributes fa; CK(cudaFuncGetAttributes(&fa, k.k));
    printf("{\"rowlab\": \"%s\", \"ms\": %.5f, \"GBs\": %.0f, \"of_copy\": %.3f, \"max_rel_err\": %.2g, \"regs\": %d, \"spill\": %d}\n",
           k.name, ms, bytes / ms / 1e6, tc / ms, err, fa.numRegs, (int)fa.localSizeBytes);
  }
  // one kernel as a captured one-node graph against a plain launch (kiln replays a graph)
  {
    cudaStream_t st; CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    cudaGraph_t g; cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    k_split<<<ROWS, 1024, 96 * 1024, st>>>(x, y);
    CK(cudaStreamEndCapture(st, &g)); CK(cudaGraphInstantiate(&ge, g, 0));
    cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
    for (int mode = 0; mode < 2; mode++) {
      std::vector<float> t;
      for (int i = 0; i < 120; i++) {
        CK(cudaEventRecord(a, st));
        if (mode) CK(cudaGraphLaunch(ge, st)); else k_split<<<ROWS, 1024, 96 * 1024, st>>>(x, y);
        CK(cudaEventRecord(b, st)); CK(cudaEventSynchronize(b));
        float ms; CK(cudaEventElapsedTime(&ms, a, b)); if (i >= 20) t.push_back(ms);
      }
      std::sort(t.begin(), t.end());
      printf("{\"rowlab\": \"split_%s\", \"ms\": %.5f}\n", mode ? "graph" : "launch", t[t.size() / 2]);
    }
  }
  return 0;
}
