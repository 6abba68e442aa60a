/*
 * nvrtc.c — CUDA C source to CUBIN, through NVRTC and an on-disk cache. Takes one
 * translation unit (all kernels of a plan) and the target arch; produces the CUBIN
 * bytes. The cache key hashes everything that changes the binary: the NVRTC version,
 * the flags, the arch and the source. A hit is not trusted on the hash alone: the
 * source stored beside the CUBIN must equal the requested source byte for byte, or
 * the entry is recompiled and overwritten.
 */
#include "cudadrv.h"
#include "../runtime.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static kiln_status rtc_check(CudaNvrtc *r, nvrtcResult e, const char *call) {
  if (e == 0) return KILN_OK;
  return kiln_fail(KILN_ERR_COMPILE, "cuda: %s: %s", call, r->nvrtcGetErrorString(e));
}

/* One NVRTC compile; on a compile error the message carries the log. */
static kiln_status compile_now(CudaNvrtc *r, const char *src, int n, const char *const *opts, void **out,
                               size_t *size) {
  nvrtcProgram p = NULL;
  kiln_status st = rtc_check(r, r->nvrtcCreateProgram(&p, src, "kiln.cu", 0, NULL, NULL), "nvrtcCreateProgram");
  if (st) return st;
  nvrtcResult ce = r->nvrtcCompileProgram(p, n, opts);
  if (ce != 0) {
    size_t ln = 0;
    char *log = NULL;
    if (r->nvrtcGetProgramLogSize(p, &ln) == 0 && (log = kiln_malloc(ln + 1)) && r->nvrtcGetProgramLog(p, log) == 0)
      log[ln] = 0;
    st = kiln_fail(KILN_ERR_COMPILE, "cuda: nvrtcCompileProgram: %s\n%s", r->nvrtcGetErrorString(ce),
                   log ? log : "(no log)");
    kiln_free(log);
  } else if (!(st = rtc_check(r, r->nvrtcGetCUBINSize(p, size), "nvrtcGetCUBINSize"))) {
    *out = kiln_malloc(*size);
    if (!*out) st = kiln_fail(KILN_ERR_NO_MEMORY, "cuda: no memory for a CUBIN of %zu bytes", *size);
    else if ((st = rtc_check(r, r->nvrtcGetCUBIN(p, *out), "nvrtcGetCUBIN"))) { kiln_free(*out); *out = NULL; }
  }
  r->nvrtcDestroyProgram(&p);
  return st;
}

kiln_status cuda_compile_cached(const char *src, const char *arch, int n_opts, const char *const *opts,
                                const char *dir, bool no_cache, void **cubin, size_t *size, bool *hit) {
  CudaNvrtc *r;
  kiln_status st = cuda_nvrtc(&r);
  if (st) return st;
  const char *all[24];
  char archopt[64];
  /* warpgroup MMA (kiln_options.cuda_wgmma) is sm_90a's alone: built for it, such a program runs on
   * compute capability 9.0 and nothing else */
  if (strstr(src, "wgmma.mma_async")) {
    if (strcmp(arch, "sm_90") && strcmp(arch, "sm_90a"))
      return kiln_fail(KILN_ERR_UNSUPPORTED, "cuda: warpgroup MMA (cuda_wgmma, $KILN_CUDA_WGMMA) needs compute capability "
                       "9.0 (sm_90a), and this device is %s", arch);
    arch = "sm_90a";
  }
  snprintf(archopt, sizeof archopt, "--gpu-architecture=%s", arch);
  int n = 0;
  all[n++] = archopt;
  all[n++] = "--std=c++17";
  for (int i = 0; i < n_opts && n < 24; i++) all[n++] = opts[i];

  /* Key: NVRTC version, flags and arch in a header line, then the source. */
  StrBuf key = {0};
  sb_printf(&key, "nvrtc %d.%d", r->major, r->minor);
  for (int i = 0; i < n; i++) sb_printf(&key, " %s", all[i]);
  sb_puts(&key, "\n");
  if (key.failed) { sb_free(&key); return kiln_fail(KILN_ERR_NO_MEMORY, "cuda: no memory for a cache key"); }
  uint64_t h1 = hash_bytes(key.s, key.len, 1), h2 = hash_bytes(src, strlen(src), h1);
  uint64_t h3 = hash_bytes(src, strlen(src), h1 ^ 0x9e3779b97f4a7c15ull);

  if (!dir) dir = "";
  char cpath[1200], spath[1200];
  snprintf(cpath, sizeof cpath, "%s/cuda-%016llx%016llx.cubin", dir, (unsigned long long)h2, (unsigned long long)h3);
  snprintf(spath, sizeof spath, "%s/cuda-%016llx%016llx.cu", dir, (unsigned long long)h2, (unsigned long long)h3);
  *hit = false;
  if (dir[0] && !no_cache) {
    size_t sn = 0, cn = 0;
    char *stored = rt_file_read(spath, &sn);
    /* The stored file is the key header followed by the source. */
    bool same = stored && sn == key.len + strlen(src) && !memcmp(stored, key.s, key.len) &&
                !memcmp(stored + key.len, src, strlen(src));
    kiln_free(stored);
    if (same && (*cubin = rt_file_read(cpath, &cn)) != NULL && cn > 0) {
      *size = cn;
      *hit = true;
      sb_free(&key);
      return KILN_OK;
    }
  }
  st = compile_now(r, src, n, all, cubin, size);
  if (!st && dir[0] && rt_cache_folder(dir) == KILN_OK) {
    /* A cache that cannot be written only costs time later: not an error. */
    sb_puts(&key, src);
    if (!key.failed && rt_file_write(cpath, *cubin, *size)) rt_file_write(spath, key.s, key.len);
  }
  sb_free(&key);
  return st;
}

kiln_status cuda_compile(const char *src, const char *arch, int n_opts, const char *const *opts, void **cubin,
                         size_t *size, bool *hit) {
  kiln_options o = kiln_options_default();
  return cuda_compile_cached(src, arch, n_opts, opts, o.cache_dir, o.no_cache != 0, cubin, size, hit);
}
