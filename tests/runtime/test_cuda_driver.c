/*
 * test_cuda_driver.c — the CUDA backend's driver layer, without the planner:
 * NVRTC compiles a hand-written kernel (and its on-disk cache hits, refuses a
 * tampered entry, reports a compile error with the log), then, where a GPU is
 * present, the kernel is loaded, launched, captured into a CUDA graph and replayed,
 * and the copy bandwidth is measured (KILN_CUDA_BW=1 for the full 1 GiB figure).
 * Without NVRTC or a driver each part prints "skip: ..." and passes.
 */
#include "test.h"
#include "runtime/cuda/cudadrv.h"
#include "runtime/runtime.h"

#include <stdlib.h>
#include <unistd.h>

static const char *kernels =
    "extern \"C\" __global__ void add4(const float4 *__restrict__ a, const float4 *__restrict__ b,\n"
    "                                  float4 *__restrict__ c, long long n4) {\n"
    "  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4;\n"
    "       i += (long long)gridDim.x * blockDim.x) {\n"
    "    float4 x = a[i], y = b[i];\n"
    "    c[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);\n"
    "  }\n"
    "}\n"
    "extern \"C\" __global__ void copy4(const float4 *__restrict__ a, float4 *__restrict__ c, long long n4) {\n"
    "  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4;\n"
    "       i += (long long)gridDim.x * blockDim.x) c[i] = a[i];\n"
    "}\n"
    "extern \"C\" __global__ void inc(float *x, int n) {\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) x[i] += 1.0f;\n"
    "}\n";

static char cache_dir[256];

static void test_nvrtc(const char *arch) {
  void *bin = NULL, *bin2 = NULL;
  size_t n = 0, n2 = 0;
  bool hit = true;
  OK(cuda_compile(kernels, arch, 0, NULL, &bin, &n, &hit));
  CHECK(bin && n > 0 && !hit);
  OK(cuda_compile(kernels, arch, 0, NULL, &bin2, &n2, &hit));
  CHECK(hit && n2 == n && bin2 && !memcmp(bin, bin2, n));
  kiln_free(bin2);
  bin2 = NULL;

  /* Tamper with every stored source: the entry must be recompiled, not trusted. */
  char cmd[600];
  snprintf(cmd, sizeof cmd, "for f in %s/cuda-*.cu; do printf 'x' >> \"$f\"; done", cache_dir);
  CHECK(system(cmd) == 0);
  OK(cuda_compile(kernels, arch, 0, NULL, &bin2, &n2, &hit));
  CHECK(!hit && n2 == n);
  kiln_free(bin2);
  bin2 = NULL;

  /* A different flag is a different key. */
  const char *opt = "-lineinfo";
  OK(cuda_compile(kernels, arch, 1, &opt, &bin2, &n2, &hit));
  CHECK(!hit);
  kiln_free(bin2);
  bin2 = NULL;

  FAILS(KILN_ERR_COMPILE, cuda_compile("extern \"C\" __global__ void k() { undeclared_thing(); }", arch, 0,
                                       NULL, &bin2, &n2, &hit));
  CHECK(strstr(kiln_last_error(), "undeclared_thing") != NULL);
  kiln_free(bin);
}

#define CU(call) OK(cuda_check((call), #call, "test"))

static double event_ms(CudaDriver *d, CUevent a, CUevent b) {
  float ms = 0;
  CU(d->cuEventSynchronize(b));
  CU(d->cuEventElapsedTime(&ms, a, b));
  return ms;
}

/* Loads the kernels, checks add4 and a captured graph of ten inc launches replayed three times. */
static void test_device(CudaDriver *d) {
  char arch[32];
  cuda_arch_name(d, arch, sizeof arch);
  printf("device: %s, %s, %d SMs, L2 %d KiB, driver %d\n", d->name, arch, d->sm_count, d->l2_bytes >> 10,
         d->driver_version);
  void *bin = NULL;
  size_t nbin = 0;
  bool hit;
  OK(cuda_compile(kernels, arch, 0, NULL, &bin, &nbin, &hit));
  if (!bin) return;
  CUmodule m = NULL;
  CUfunction add4 = NULL, copy4 = NULL, inc = NULL;
  CU(d->cuModuleLoadData(&m, bin));
  kiln_free(bin);
  CU(d->cuModuleGetFunction(&add4, m, "add4"));
  CU(d->cuModuleGetFunction(&copy4, m, "copy4"));
  CU(d->cuModuleGetFunction(&inc, m, "inc"));
  CUstream s = NULL;
  CU(d->cuStreamCreate(&s, CUDRV_STREAM_NON_BLOCKING));

  enum { N = 1 << 20 };
  float *ha = malloc(N * sizeof(float)), *hb = malloc(N * sizeof(float)), *hc = malloc(N * sizeof(float));
  unsigned long long seed = 7;
  for (int i = 0; i < N; i++) ha[i] = (float)test_rand(&seed), hb[i] = (float)test_rand(&seed);
  CUdeviceptr a = 0, b = 0, c = 0;
  CU(d->cuMemAlloc(&a, N * sizeof(float)));
  CU(d->cuMemAlloc(&b, N * sizeof(float)));
  CU(d->cuMemAlloc(&c, N * sizeof(float)));
  CU(d->cuMemcpyHtoDAsync(a, ha, N * sizeof(float), s));
  CU(d->cuMemcpyHtoDAsync(b, hb, N * sizeof(float), s));
  CU(d->cuMemsetD8Async(c, 0xff, N * sizeof(float), s));  /* poison: NaN everywhere */
  long long n4 = N / 4;
  void *args[] = { &a, &b, &c, &n4 };
  CU(d->cuLaunchKernel(add4, (unsigned)d->sm_count * 4, 1, 1, 256, 1, 1, 0, s, args, NULL));
  CU(d->cuMemcpyDtoHAsync(hc, c, N * sizeof(float), s));
  CU(d->cuStreamSynchronize(s));
  int bad = 0;
  for (int i = 0; i < N; i++) bad += hc[i] != ha[i] + hb[i];
  CHECK_MSG(bad == 0, "add4: %d wrong of %d", bad, N);

  /* Capture ten launches of inc into one graph; three replays add 30. */
  int n = N;
  void *iargs[] = { &a, &n };
  CUgraph g = NULL;
  CUgraphExec ge = NULL;
  CU(d->cuStreamBeginCapture(s, CUDRV_CAPTURE_THREAD_LOCAL));
  for (int k = 0; k < 10; k++) CU(d->cuLaunchKernel(inc, N / 256, 1, 1, 256, 1, 1, 0, s, iargs, NULL));
  CU(d->cuStreamEndCapture(s, &g));
  CU(d->cuGraphInstantiate(&ge, g, 0));
  for (int r = 0; r < 3; r++) CU(d->cuGraphLaunch(ge, s));
  CU(d->cuMemcpyDtoHAsync(hc, a, N * sizeof(float), s));
  CU(d->cuStreamSynchronize(s));
  bad = 0;
  for (int i = 0; i < N; i++) {
    float want = ha[i];
    for (int k = 0; k < 30; k++) want += 1.0f;  /* the same roundings as the kernels */
    bad += hc[i] != want;
  }
  CHECK_MSG(bad == 0, "graph replay: %d wrong of %d", bad, N);

  /* Graph replay of 10 tiny kernels: how long one submission takes. */
  CUevent e0 = NULL, e1 = NULL;
  CU(d->cuEventCreate(&e0, 0));
  CU(d->cuEventCreate(&e1, 0));
  CU(d->cuEventRecord(e0, s));
  for (int r = 0; r < 100; r++) CU(d->cuGraphLaunch(ge, s));
  CU(d->cuEventRecord(e1, s));
  printf("graph of 10 kernels: %.2f us per replay\n", event_ms(d, e0, e1) * 1e3 / 100);
  CU(d->cuGraphExecDestroy(ge));
  CU(d->cuGraphDestroy(g));

  /* Copy bandwidth: read + write bytes over time, driver copy and float4 kernel. */
  size_t big = kiln_env_int("KILN_CUDA_BW", 0) ? (size_t)1 << 30 : (size_t)64 << 20;
  CUdeviceptr x = 0, y = 0;
  CU(d->cuMemAlloc(&x, big));
  CU(d->cuMemAlloc(&y, big));
  CU(d->cuMemsetD8Async(x, 1, big, s));
  long long bn4 = (long long)(big / 16);
  void *cargs[] = { &x, &y, &bn4 };
  for (int variant = 0; variant < 3; variant++) {
    int reps = 20;
    for (int r = 0; r < 3 + reps; r++) {
      if (r == 3) CU(d->cuEventRecord(e0, s));
      if (variant == 0) CU(d->cuMemcpyDtoDAsync(y, x, big, s));
      else CU(d->cuLaunchKernel(copy4, (unsigned)d->sm_count * (variant == 1 ? 4 : 16), 1, 1, 256, 1, 1, 0, s,
                                cargs, NULL));
    }
    CU(d->cuEventRecord(e1, s));
    double ms = event_ms(d, e0, e1) / reps;
    printf("copy %zu MiB, %s: %.3f ms, %.0f GB/s\n", big >> 20,
           variant == 0 ? "cuMemcpyDtoD" : variant == 1 ? "float4 kernel, 4 blocks/SM" : "float4 kernel, 16 blocks/SM",
           ms, 2.0 * (double)big / (ms * 1e-3) / 1e9);
  }
  /* Host to device, pageable memory (what run() with host buffers pays). */
  CU(d->cuEventRecord(e0, s));
  CU(d->cuMemcpyHtoDAsync(a, ha, N * sizeof(float), s));
  CU(d->cuEventRecord(e1, s));
  printf("h2d 4 MiB pageable: %.1f GB/s\n", (double)N * 4 / (event_ms(d, e0, e1) * 1e-3) / 1e9);

  CU(d->cuMemFree(x));
  CU(d->cuMemFree(y));
  CU(d->cuMemFree(a));
  CU(d->cuMemFree(b));
  CU(d->cuMemFree(c));
  CU(d->cuEventDestroy(e0));
  CU(d->cuEventDestroy(e1));
  CU(d->cuStreamDestroy(s));
  CU(d->cuModuleUnload(m));
  free(ha), free(hb), free(hc);
}

int main(void) {
  snprintf(cache_dir, sizeof cache_dir, "/tmp/kiln-test-cuda-%ld", (long)getpid());
  setenv("KILN_CACHE_DIR", cache_dir, 1);

  CudaNvrtc *r = NULL;
  CudaDriver *d;
  if (cuda_nvrtc(&r) != KILN_OK) {
    printf("skip: no NVRTC (%s)\n", kiln_last_error());
  } else {
    printf("nvrtc %d.%d\n", r->major, r->minor);
    test_nvrtc("sm_90");
  }
  kiln_status ds = cuda_driver(&d);
  if (ds != KILN_OK) {
    CHECK(ds == KILN_ERR_DEVICE && kiln_last_error()[0]);
    /* probe says the same thing, clearly. */
    FAILS(KILN_ERR_DEVICE, rt_backend_cuda.probe());
    printf("skip: no CUDA driver (%s)\n", kiln_last_error());
  } else if (r) {
    test_device(d);
  }
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf %s", cache_dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", cache_dir);
  TEST_MAIN_END();
}
