/*
 * cpu.h — private to the cpu backend: compiling generated C into a shared object, with the
 * on-disk cache (cache.c); the team of threads kernels run on (team.c); the library GEMM
 * (gemm.c); used by cpu.c.
 */
#ifndef KILN_CPU_H
#define KILN_CPU_H

#include "../runtime.h"

/* -- cache.c -- */

/* The flags every kernel library is compiled with, as one string (census, print). */
const char *cpu_cc_flags(void);
/* `cc --version` of compiler cc, read once per process and compiler. */
void cpu_cc_identity(const char *cc, char out[512]);
/* Compiles src with o->cc into a shared object and loads it, or loads the one cached in
 * o->cache_dir when its stored source equals src (never with o->no_cache). *hit says which. */
kiln_status cpu_build(const char *src, size_t len, const kiln_options *o, void **dl, bool *hit);

/* -- cpu.c -- */

/* Runs job on the cpu device's team, with as many threads as it runs kernels with now. */
void cpu_run(void *dev, HostJob job, void *ctx);

/* -- gemm.c: the library GEMM (a packed-panel micro-kernel) -- */

/* A call for g on the schedule's stage buffers buf (read at each run), run on dev's team; B is
 * packed now when g->b_constant. KILN_ERR_UNSUPPORTED declines (the generated kernel runs). */
kiln_status cpu_gemm_prepare(const CgLibGemm *g, const RtBuf *buf, void *dev, void **call);
kiln_status cpu_gemm_run(void *call);
void cpu_gemm_release(void *call);

#endif
