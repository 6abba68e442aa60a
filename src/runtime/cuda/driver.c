/*
 * driver.c — finds NVIDIA's libraries at run time. Takes nothing; produces the
 * CudaDriver and CudaNvrtc tables of entry points (cudadrv.h), each filled once per
 * process under pthread_once. The driver is initialised, the primary context of device
 * $KILN_CUDA_DEVICE (default 0; one process a device) retained and made current, and the facts the code generator needs (compute
 * capability, multiprocessor count, shared memory limit) read off the device.
 *
 * A machine without a GPU is normal: the first failure is remembered and every later
 * call answers with the same message, so `kiln` can say why cuda is unavailable while
 * everything else runs.
 */
#include "cudadrv.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static CudaDriver drv;
static kiln_status drv_status;
static char drv_why[512];
static pthread_once_t drv_once = PTHREAD_ONCE_INIT;
static pid_t drv_pid;               /* the process that set the driver up */

static CudaNvrtc rtc;
static kiln_status rtc_status;
static char rtc_why[512];
static pthread_once_t rtc_once = PTHREAD_ONCE_INIT;

kiln_status cuda_check(CUresult r, const char *call, const char *what) {
  if (r == 0) return KILN_OK;
  const char *name = "?", *text = "?";
  if (drv.cuGetErrorName) drv.cuGetErrorName(r, &name);
  if (drv.cuGetErrorString) drv.cuGetErrorString(r, &text);
  return kiln_fail(KILN_ERR_DEVICE, "cuda: %s (%s): %s (%d): %s", call, what, name ? name : "?", r,
                   text ? text : "?");
}

/* Resolves the first of the given names that exists; false if none does. */
static bool sym(void *lib, void *fnptr, const char *a, const char *b) {
  void *p = dlsym(lib, a);
  if (!p && b) p = dlsym(lib, b);
  if (!p) return false;
  memcpy(fnptr, &p, sizeof p);  /* object -> function pointer without a cast warning */
  return true;
}

#define NEED(lib, field, a, b) \
  do { if (!sym(lib, &(field), a, b)) { missing = a; goto fail; } } while (0)

static bool resolve_driver(void *l, const char **missing_out) {
  const char *missing = NULL;
  NEED(l, drv.cuInit, "cuInit", NULL);
  NEED(l, drv.cuDriverGetVersion, "cuDriverGetVersion", NULL);
  NEED(l, drv.cuDeviceGetCount, "cuDeviceGetCount", NULL);
  NEED(l, drv.cuDeviceGet, "cuDeviceGet", NULL);
  NEED(l, drv.cuDeviceGetName, "cuDeviceGetName", NULL);
  NEED(l, drv.cuDeviceGetAttribute, "cuDeviceGetAttribute", NULL);
  NEED(l, drv.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", NULL);
  NEED(l, drv.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease");
  NEED(l, drv.cuCtxSetCurrent, "cuCtxSetCurrent", NULL);
  NEED(l, drv.cuMemAlloc, "cuMemAlloc_v2", NULL);
  NEED(l, drv.cuMemFree, "cuMemFree_v2", NULL);
  NEED(l, drv.cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", NULL);
  NEED(l, drv.cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", NULL);
  NEED(l, drv.cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", NULL);
  NEED(l, drv.cuMemsetD8Async, "cuMemsetD8Async", NULL);
  NEED(l, drv.cuModuleLoadData, "cuModuleLoadData", NULL);
  NEED(l, drv.cuModuleUnload, "cuModuleUnload", NULL);
  NEED(l, drv.cuModuleGetFunction, "cuModuleGetFunction", NULL);
  NEED(l, drv.cuFuncSetAttribute, "cuFuncSetAttribute", NULL);
  NEED(l, drv.cuFuncGetAttribute, "cuFuncGetAttribute", NULL);
  NEED(l, drv.cuLaunchKernel, "cuLaunchKernel", NULL);
  NEED(l, drv.cuLaunchCooperativeKernel, "cuLaunchCooperativeKernel", NULL);
  NEED(l, drv.cuOccupancyMaxActiveBlocksPerMultiprocessor, "cuOccupancyMaxActiveBlocksPerMultiprocessor", NULL);
  NEED(l, drv.cuStreamCreate, "cuStreamCreate", NULL);
  NEED(l, drv.cuStreamDestroy, "cuStreamDestroy_v2", NULL);
  NEED(l, drv.cuStreamSynchronize, "cuStreamSynchronize", NULL);
  NEED(l, drv.cuStreamBeginCapture, "cuStreamBeginCapture_v2", NULL);
  NEED(l, drv.cuStreamEndCapture, "cuStreamEndCapture", NULL);
  NEED(l, drv.cuGraphInstantiate, "cuGraphInstantiateWithFlags", NULL);
  NEED(l, drv.cuGraphLaunch, "cuGraphLaunch", NULL);
  NEED(l, drv.cuGraphExecDestroy, "cuGraphExecDestroy", NULL);
  NEED(l, drv.cuGraphDestroy, "cuGraphDestroy", NULL);
  if (!sym(l, &drv.cuLaunchKernelEx, "cuLaunchKernelEx", NULL)) drv.cuLaunchKernelEx = NULL;  /* CUDA 12+: PDL */
  NEED(l, drv.cuEventCreate, "cuEventCreate", NULL);
  NEED(l, drv.cuEventDestroy, "cuEventDestroy_v2", NULL);
  NEED(l, drv.cuEventRecord, "cuEventRecord", NULL);
  NEED(l, drv.cuStreamWaitEvent, "cuStreamWaitEvent", NULL);
  NEED(l, drv.cuEventSynchronize, "cuEventSynchronize", NULL);
  NEED(l, drv.cuEventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime");
  NEED(l, drv.cuGetErrorName, "cuGetErrorName", NULL);
  NEED(l, drv.cuGetErrorString, "cuGetErrorString", NULL);
  return true;
fail:
  *missing_out = missing;
  return false;
}

static kiln_status attr(int *v, int a, const char *what) {
  return cuda_check(drv.cuDeviceGetAttribute(v, a, drv.dev), "cuDeviceGetAttribute", what);
}

/* $KILN_CUDA_DEVICE: a device ordinal below n, else -1 (unset: 0). */
static int device_ordinal(int n) {
  const char *v = getenv("KILN_CUDA_DEVICE");
  if (!v || !*v) return 0;
  char *end;
  long d = strtol(v, &end, 10);
  return *end || d < 0 || d >= n ? -1 : (int)d;
}

static kiln_status open_device(void) {
  kiln_status st;
  int n = 0;
  if ((st = cuda_check(drv.cuInit(0), "cuInit", "initialising the driver"))) return st;
  if ((st = cuda_check(drv.cuDriverGetVersion(&drv.driver_version), "cuDriverGetVersion", "driver"))) return st;
  if ((st = cuda_check(drv.cuDeviceGetCount(&n), "cuDeviceGetCount", "counting devices"))) return st;
  if (n < 1) return kiln_fail(KILN_ERR_DEVICE, "cuda: the driver found no GPU");
  if ((drv.ordinal = device_ordinal(n)) < 0)
    return kiln_fail(KILN_ERR_DEVICE, "cuda: KILN_CUDA_DEVICE is '%s', not a device of the %d the driver found (0 .. %d)",
                     getenv("KILN_CUDA_DEVICE"), n, n - 1);
  char what[32];
  snprintf(what, sizeof what, "device %d", drv.ordinal);
  if ((st = cuda_check(drv.cuDeviceGet(&drv.dev, drv.ordinal), "cuDeviceGet", what))) return st;
  if ((st = cuda_check(drv.cuDeviceGetName(drv.name, sizeof drv.name, drv.dev), "cuDeviceGetName", what))) return st;
  if ((st = attr(&drv.cc_major, CUDRV_ATTR_CC_MAJOR, "compute capability"))) return st;
  if ((st = attr(&drv.cc_minor, CUDRV_ATTR_CC_MINOR, "compute capability"))) return st;
  if ((st = attr(&drv.sm_count, CUDRV_ATTR_SM_COUNT, "multiprocessor count"))) return st;
  if ((st = attr(&drv.max_threads_per_sm, CUDRV_ATTR_MAX_THREADS_PER_SM, "threads per multiprocessor"))) return st;
  if ((st = attr(&drv.smem_optin, CUDRV_ATTR_SMEM_OPTIN, "shared memory per block"))) return st;
  if ((st = attr(&drv.l2_bytes, CUDRV_ATTR_L2_BYTES, "L2 size"))) return st;
  if ((st = cuda_check(drv.cuDevicePrimaryCtxRetain(&drv.ctx, drv.dev), "cuDevicePrimaryCtxRetain", what))) return st;
  return cuda_check(drv.cuCtxSetCurrent(drv.ctx), "cuCtxSetCurrent", what);
}

static void load_driver(void) {
  const char *missing = NULL;
  drv_pid = getpid();
  drv.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!drv.lib) {
    const char *e = dlerror();
    drv_status = kiln_fail(KILN_ERR_DEVICE, "no CUDA driver: cannot load libcuda.so.1 (%s)", e ? e : "not found");
  } else if (!resolve_driver(drv.lib, &missing)) {
    drv_status = kiln_fail(KILN_ERR_DEVICE, "no usable CUDA driver: libcuda.so.1 lacks %s (driver too old?)", missing);
  } else {
    drv_status = open_device();
  }
  if (drv_status) snprintf(drv_why, sizeof drv_why, "%s", kiln_last_error());
}

kiln_status cuda_driver(CudaDriver **out) {
  pthread_once(&drv_once, load_driver);
  if (drv_status) return kiln_fail(drv_status, "%s", drv_why);
  if (getpid() != drv_pid)
    return kiln_fail(KILN_ERR_DEVICE, "cuda: this process was forked after its parent set CUDA up, and CUDA "
                     "cannot be used in such a child (set the backend up after the fork, or exec)");
  /* The primary context is current only on the thread that loaded it; make it so here. */
  kiln_status st = cuda_check(drv.cuCtxSetCurrent(drv.ctx), "cuCtxSetCurrent", "the device's primary context");
  if (st) return st;
  *out = &drv;
  return KILN_OK;
}

void cuda_arch_name(const CudaDriver *d, char *buf, size_t n) {
  snprintf(buf, n, "sm_%d%d", d->cc_major, d->cc_minor);
}

static bool resolve_nvrtc(void *l, const char **missing_out) {
  const char *missing = NULL;
  NEED(l, rtc.nvrtcVersion, "nvrtcVersion", NULL);
  NEED(l, rtc.nvrtcCreateProgram, "nvrtcCreateProgram", NULL);
  NEED(l, rtc.nvrtcDestroyProgram, "nvrtcDestroyProgram", NULL);
  NEED(l, rtc.nvrtcCompileProgram, "nvrtcCompileProgram", NULL);
  NEED(l, rtc.nvrtcGetCUBINSize, "nvrtcGetCUBINSize", NULL);
  NEED(l, rtc.nvrtcGetCUBIN, "nvrtcGetCUBIN", NULL);
  NEED(l, rtc.nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize", NULL);
  NEED(l, rtc.nvrtcGetProgramLog, "nvrtcGetProgramLog", NULL);
  NEED(l, rtc.nvrtcGetErrorString, "nvrtcGetErrorString", NULL);
  return true;
fail:
  *missing_out = missing;
  return false;
}

static void load_nvrtc(void) {
  static const char *const names[] = {
    "libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12",
    "/usr/local/cuda/lib64/libnvrtc.so", "/usr/local/cuda/lib64/libnvrtc.so.13",
  };
  const char *missing = NULL;
  for (size_t i = 0; i < sizeof names / sizeof names[0] && !rtc.lib; i++)
    rtc.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!rtc.lib) {
    rtc_status = kiln_fail(KILN_ERR_DEVICE, "no NVRTC: cannot load libnvrtc.so, .so.13 or .so.12");
  } else if (!resolve_nvrtc(rtc.lib, &missing)) {
    rtc_status = kiln_fail(KILN_ERR_DEVICE, "NVRTC library lacks %s", missing);
  } else if (rtc.nvrtcVersion(&rtc.major, &rtc.minor) != 0) {
    rtc_status = kiln_fail(KILN_ERR_DEVICE, "cuda: nvrtcVersion failed");
  }
  if (rtc_status) snprintf(rtc_why, sizeof rtc_why, "%s", kiln_last_error());
}

kiln_status cuda_nvrtc(CudaNvrtc **out) {
  pthread_once(&rtc_once, load_nvrtc);
  if (rtc_status) return kiln_fail(rtc_status, "%s", rtc_why);
  *out = &rtc;
  return KILN_OK;
}
