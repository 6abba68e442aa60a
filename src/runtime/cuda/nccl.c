/*
 * nccl.c — the communicator behind kiln_dist on the cuda backend. Takes a device buffer list,
 * hands NCCL the calls. NCCL is loaded with dlopen once per process ($KILN_NCCL_LIB, else
 * libnccl.so.2, then libnccl.so), so one build runs with and without it: an id is NCCL's
 * unique id, a communicator is ncclCommInitRank's on this process's device (driver.c made its
 * context current), and a bucket of all-reduces is one ncclGroupStart .. ncclGroupEnd of
 * ncclAllReduce calls with ncclAvg, which NCCL runs as one launch on the stream it is given.
 * NVLink multicast stays off: NCCL_NVLS_ENABLE=0 is set before NCCL is loaded.
 */
#include "cudadrv.h"
#include "../runtime.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef int ncclResult;                            /* 0 is ncclSuccess */
typedef struct NcclId { unsigned char bytes[KILN_DIST_ID_BYTES]; } NcclId;  /* ncclUniqueId, by value */
enum { NCCL_AVG = 4 };                             /* ncclRedOp_t: the mean over the ranks */
enum { NCCL_F16 = 6, NCCL_F32 = 7, NCCL_F64 = 8, NCCL_BF16 = 9 };  /* ncclDataType_t */
enum { NCCL_AVG_VERSION = 21000 };                 /* ncclAvg arrived in NCCL 2.10 */

typedef struct Nccl {
  ncclResult (*ncclGetVersion)(int *v);
  ncclResult (*ncclGetUniqueId)(NcclId *id);
  ncclResult (*ncclCommInitRank)(void **comm, int ranks, NcclId id, int rank);
  ncclResult (*ncclCommDestroy)(void *comm);
  ncclResult (*ncclAllReduce)(const void *src, void *dst, size_t count, int dtype, int op, void *comm, CUstream s);
  ncclResult (*ncclGroupStart)(void);
  ncclResult (*ncclGroupEnd)(void);
  const char *(*ncclGetErrorString)(ncclResult r);
  const char *(*ncclGetLastError)(void *comm);     /* NULL: an older NCCL */
  void *lib;
  int version;
} Nccl;

static Nccl nccl;
static kiln_status nccl_status;
static char nccl_why[512];
static pthread_once_t nccl_once = PTHREAD_ONCE_INIT;

static bool sym(void *fnptr, const char *name) {
  void *p = dlsym(nccl.lib, name);
  if (p) memcpy(fnptr, &p, sizeof p);  /* object -> function pointer without a cast warning */
  return p != NULL;
}

static void load_nccl(void) {
  /* NVLink multicast never: on the machines kiln is measured on, a program that uses it can take
   * the host's GPUs out of service for a day (the device notes). NCCL reads this when it starts. */
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  const char *own = getenv("KILN_NCCL_LIB");
  const char *names[] = { own && *own ? own : "libnccl.so.2", "libnccl.so" };
  int tries = own && *own ? 1 : 2;
  for (int i = 0; i < tries && !nccl.lib; i++) nccl.lib = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  const char *missing = NULL;
  if (!nccl.lib) {
    const char *e = dlerror();
    nccl_status = kiln_fail(KILN_ERR_DEVICE, "no NCCL: cannot load %s (%s); set KILN_NCCL_LIB to its path",
                            own && *own ? own : "libnccl.so.2 or libnccl.so", e ? e : "not found");
  } else if (!sym(&nccl.ncclGetVersion, missing = "ncclGetVersion") ||
             !sym(&nccl.ncclGetUniqueId, missing = "ncclGetUniqueId") ||
             !sym(&nccl.ncclCommInitRank, missing = "ncclCommInitRank") ||
             !sym(&nccl.ncclCommDestroy, missing = "ncclCommDestroy") ||
             !sym(&nccl.ncclAllReduce, missing = "ncclAllReduce") ||
             !sym(&nccl.ncclGroupStart, missing = "ncclGroupStart") ||
             !sym(&nccl.ncclGroupEnd, missing = "ncclGroupEnd") ||
             !sym(&nccl.ncclGetErrorString, missing = "ncclGetErrorString")) {
    nccl_status = kiln_fail(KILN_ERR_DEVICE, "NCCL library lacks %s", missing);
  } else if (nccl.ncclGetVersion(&nccl.version) != 0) {
    nccl_status = kiln_fail(KILN_ERR_DEVICE, "NCCL: ncclGetVersion failed");
  } else if (nccl.version < NCCL_AVG_VERSION) {
    nccl_status = kiln_fail(KILN_ERR_DEVICE, "NCCL %d is older than 2.10, which brought the averaging all-reduce kiln uses",
                            nccl.version);
  }
  if (nccl.lib && !sym(&nccl.ncclGetLastError, "ncclGetLastError")) nccl.ncclGetLastError = NULL;
  if (nccl_status) snprintf(nccl_why, sizeof nccl_why, "%s", kiln_last_error());
}

static kiln_status nccl_load(void) {
  pthread_once(&nccl_once, load_nccl);
  return nccl_status ? kiln_fail(nccl_status, "%s", nccl_why) : KILN_OK;
}

static kiln_status nccl_check(ncclResult r, const char *call, void *comm) {
  if (r == 0) return KILN_OK;
  const char *last = comm && nccl.ncclGetLastError ? nccl.ncclGetLastError(comm) : NULL;
  return kiln_fail(KILN_ERR_DEVICE, "NCCL: %s: %s (%d)%s%s", call, nccl.ncclGetErrorString(r), r, last && *last ? ": " : "",
                   last ? last : "");
}

kiln_status rt_nccl_id(unsigned char id[KILN_DIST_ID_BYTES]) {
  kiln_status st = nccl_load();
  NcclId u;
  if (!st) st = nccl_check(nccl.ncclGetUniqueId(&u), "ncclGetUniqueId", NULL);
  if (!st) memcpy(id, u.bytes, sizeof u.bytes);
  return st;
}

kiln_status rt_nccl_open(const unsigned char id[KILN_DIST_ID_BYTES], int ranks, int rank, void **comm) {
  *comm = NULL;
  CudaDriver *d;
  kiln_status st = cuda_driver(&d);  /* NCCL runs on the device whose context is current */
  if (!st) st = nccl_load();
  if (st) return st;
  NcclId u;
  memcpy(u.bytes, id, sizeof u.bytes);
  return nccl_check(nccl.ncclCommInitRank(comm, ranks, u, rank), "ncclCommInitRank", NULL);
}

void rt_nccl_close(void *comm) {
  if (comm && !nccl_load()) nccl.ncclCommDestroy(comm);
}

static int nccl_dtype(kiln_dtype t) {
  switch (t) {
  case KILN_F32: return NCCL_F32;
  case KILN_F64: return NCCL_F64;
  case KILN_F16: return NCCL_F16;
  case KILN_BF16: return NCCL_BF16;
  default: return -1;
  }
}

kiln_status rt_nccl_all_reduce(void *comm, unsigned long long stream, int n, const RtBuf *src, const RtBuf *dst,
                               const int64_t *count, const kiln_dtype *dtype) {
  kiln_status st = nccl_load();
  for (int i = 0; !st && i < n; i++)
    if (nccl_dtype(dtype[i]) < 0)
      st = kiln_fail(KILN_ERR_UNSUPPORTED, "NCCL: no all-reduce of %s", kiln_dtype_name(dtype[i]));
  if (st) return st;
  CUstream s = (CUstream)(uintptr_t)stream;
  if ((st = nccl_check(nccl.ncclGroupStart(), "ncclGroupStart", comm))) return st;
  for (int i = 0; i < n && !st; i++)
    st = nccl_check(nccl.ncclAllReduce((const void *)(uintptr_t)src[i], (void *)(uintptr_t)dst[i], (size_t)count[i],
                                       nccl_dtype(dtype[i]), NCCL_AVG, comm, s),
                    "ncclAllReduce", comm);
  kiln_status end = nccl_check(nccl.ncclGroupEnd(), "ncclGroupEnd", comm);  /* a group once started is ended */
  return st ? st : end;
}
