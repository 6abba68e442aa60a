/*
 * cudadrv.h — the CUDA backend's own view of NVIDIA's libraries, all loaded with
 * dlopen so that kiln builds and runs without them: the driver API (libcuda.so.1),
 * NVRTC (libnvrtc) and cuBLASLt (libcublasLt). No NVIDIA header is included; the few
 * types and constants used are declared here with the values of CUDA 13's headers.
 *
 * Every call goes through a checking helper that turns a failure into KILN_ERR_DEVICE
 * (or KILN_ERR_COMPILE) with the call and what it was doing named in the message.
 */
#ifndef KILN_CUDADRV_H
#define KILN_CUDADRV_H

#include "../../base/base.h"

typedef int CUresult;                 /* 0 is CUDA_SUCCESS */
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;
/* cuLaunchKernelEx's configuration (CUDA 12+): only the attributes kiln sets. */
enum { CUDRV_LAUNCH_ATTR_COOPERATIVE = 2, CUDRV_LAUNCH_ATTR_PROGRAMMATIC_SERIALIZATION = 6 };
typedef struct CUlaunchAttr {
  int id;
  char pad[4];
  union { char bytes[64]; int flag; } value;   /* cooperative / programmaticStreamSerializationAllowed */
} CUlaunchAttr;
typedef struct CUlaunchCfg {
  unsigned grid_x, grid_y, grid_z, block_x, block_y, block_z, smem;
  CUstream stream;
  CUlaunchAttr *attrs;
  unsigned n_attrs;
} CUlaunchCfg;
typedef int nvrtcResult;              /* 0 is NVRTC_SUCCESS */
typedef struct _nvrtcProgram *nvrtcProgram;

enum {
  CUDRV_ATTR_MAX_THREADS_PER_BLOCK = 1,
  CUDRV_ATTR_SM_COUNT = 16,
  CUDRV_ATTR_L2_BYTES = 38,
  CUDRV_ATTR_MAX_THREADS_PER_SM = 39,
  CUDRV_ATTR_CC_MAJOR = 75,
  CUDRV_ATTR_CC_MINOR = 76,
  CUDRV_ATTR_SMEM_OPTIN = 97,
  CUDRV_FUNC_ATTR_MAX_THREADS = 0,
  CUDRV_FUNC_ATTR_LOCAL_BYTES = 3,
  CUDRV_FUNC_ATTR_NUM_REGS = 4,
  CUDRV_FUNC_ATTR_MAX_DYN_SMEM = 8,
  CUDRV_STREAM_NON_BLOCKING = 1,
  CUDRV_CAPTURE_THREAD_LOCAL = 1,
  CUDRV_EVENT_DISABLE_TIMING = 2,
};

/* The driver: entry points, and facts read off device 0 once it is up. */
typedef struct CudaDriver {
  CUresult (*cuInit)(unsigned flags);
  CUresult (*cuDriverGetVersion)(int *v);
  CUresult (*cuDeviceGetCount)(int *n);
  CUresult (*cuDeviceGet)(CUdevice *d, int ordinal);
  CUresult (*cuDeviceGetName)(char *name, int len, CUdevice d);
  CUresult (*cuDeviceGetAttribute)(int *v, int attr, CUdevice d);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *c, CUdevice d);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice d);
  CUresult (*cuCtxSetCurrent)(CUcontext c);
  CUresult (*cuMemAlloc)(CUdeviceptr *p, size_t n);
  CUresult (*cuMemFree)(CUdeviceptr p);
  CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr dst, const void *src, size_t n, CUstream s);
  CUresult (*cuMemcpyDtoHAsync)(void *dst, CUdeviceptr src, size_t n, CUstream s);
  CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s);
  CUresult (*cuMemsetD8Async)(CUdeviceptr dst, unsigned char v, size_t n, CUstream s);
  CUresult (*cuModuleLoadData)(CUmodule *m, const void *image);
  CUresult (*cuModuleUnload)(CUmodule m);
  CUresult (*cuModuleGetFunction)(CUfunction *f, CUmodule m, const char *name);
  CUresult (*cuFuncSetAttribute)(CUfunction f, int attr, int v);
  CUresult (*cuFuncGetAttribute)(int *v, int attr, CUfunction f);
  CUresult (*cuLaunchKernel)(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                             unsigned bz, unsigned smem, CUstream s, void **params, void **extra);
  CUresult (*cuLaunchKernelEx)(const CUlaunchCfg *cfg, CUfunction f, void **params, void **extra);  /* NULL: absent */
  CUresult (*cuLaunchCooperativeKernel)(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                        unsigned bz, unsigned smem, CUstream s, void **params);
  CUresult (*cuOccupancyMaxActiveBlocksPerMultiprocessor)(int *blocks, CUfunction f, int block, size_t dyn_smem);
  CUresult (*cuStreamCreate)(CUstream *s, unsigned flags);
  CUresult (*cuStreamDestroy)(CUstream s);
  CUresult (*cuStreamSynchronize)(CUstream s);
  CUresult (*cuStreamBeginCapture)(CUstream s, int mode);
  CUresult (*cuStreamEndCapture)(CUstream s, CUgraph *g);
  CUresult (*cuGraphInstantiate)(CUgraphExec *e, CUgraph g, unsigned long long flags);
  CUresult (*cuGraphLaunch)(CUgraphExec e, CUstream s);
  CUresult (*cuGraphExecDestroy)(CUgraphExec e);
  CUresult (*cuGraphDestroy)(CUgraph g);
  CUresult (*cuEventCreate)(CUevent *e, unsigned flags);
  CUresult (*cuEventDestroy)(CUevent e);
  CUresult (*cuEventRecord)(CUevent e, CUstream s);
  CUresult (*cuStreamWaitEvent)(CUstream s, CUevent e, unsigned flags);
  CUresult (*cuEventSynchronize)(CUevent e);
  CUresult (*cuEventElapsedTime)(float *ms, CUevent a, CUevent b);
  CUresult (*cuGetErrorName)(CUresult r, const char **s);
  CUresult (*cuGetErrorString)(CUresult r, const char **s);

  void *lib;
  int ordinal;                 /* the device this process runs on ($KILN_CUDA_DEVICE, default 0) */
  CUdevice dev;
  CUcontext ctx;
  char name[128];
  int driver_version;
  int cc_major, cc_minor;      /* compute capability: sm_<major><minor> */
  int sm_count, max_threads_per_sm, smem_optin, l2_bytes;
} CudaDriver;

/* NVRTC, usable without a driver (it only compiles). */
typedef struct CudaNvrtc {
  nvrtcResult (*nvrtcVersion)(int *major, int *minor);
  nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram *p, const char *src, const char *name, int n_headers,
                                    const char *const *headers, const char *const *include_names);
  nvrtcResult (*nvrtcDestroyProgram)(nvrtcProgram *p);
  nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram p, int n_opts, const char *const *opts);
  nvrtcResult (*nvrtcGetCUBINSize)(nvrtcProgram p, size_t *n);
  nvrtcResult (*nvrtcGetCUBIN)(nvrtcProgram p, char *cubin);
  nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram p, size_t *n);
  nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram p, char *log);
  const char *(*nvrtcGetErrorString)(nvrtcResult r);

  void *lib;
  int major, minor;
} CudaNvrtc;

/* -- driver.c -- */

/* Loads libcuda, initialises it and makes the primary context of device $KILN_CUDA_DEVICE (a
 * whole number, default 0: one process a device, as data-parallel training runs) current on the
 * calling thread. Loaded once per process; a later call repeats the first answer. On
 * failure: KILN_ERR_DEVICE saying what is missing ("no CUDA driver: ..."). */
kiln_status cuda_driver(CudaDriver **out);
/* KILN_OK, or KILN_ERR_DEVICE "cuda: CALL (WHAT): CUDA_ERROR_X: text". */
kiln_status cuda_check(CUresult r, const char *call, const char *what);
/* Loads NVRTC once (libnvrtc.so, .so.13, .so.12, then under /usr/local/cuda). */
kiln_status cuda_nvrtc(CudaNvrtc **out);
/* "sm_90" for the loaded device, into buf. */
void cuda_arch_name(const CudaDriver *d, char *buf, size_t n);

/* -- nvrtc.c -- */

/* Compiles src (one translation unit, many kernels) for arch ("sm_90") with opts
 * added to kiln's own, through the on-disk cache in dir ("" or no_cache: none): the key
 * hashes source, NVRTC version, flags and arch; the source is stored beside the CUBIN
 * and compared on a hit. The CUBIN is returned in kiln_malloc'ed memory. On a compile
 * error: KILN_ERR_COMPILE with the NVRTC log. *hit says whether it came from the cache. */
kiln_status cuda_compile_cached(const char *src, const char *arch, int n_opts, const char *const *opts,
                                const char *dir, bool no_cache, void **cubin, size_t *size, bool *hit);
/* The same in the cache of kiln_options_default() (tests and tools). */
kiln_status cuda_compile(const char *src, const char *arch, int n_opts, const char *const *opts, void **cubin,
                         size_t *size, bool *hit);

#endif
