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

/* -- team.c: the threads every kernel runs on -- */

typedef struct CpuTeam CpuTeam;
/* One thread's part of a job: thread tid of nt (0 the caller). */
typedef void (*CpuJob)(void *ctx, int tid, int nt);
/* A team of `threads` (the caller and threads - 1 workers, who wait for jobs). */
kiln_status cpu_team_open(int threads, CpuTeam **out);
void cpu_team_close(CpuTeam *t);
int cpu_team_size(const CpuTeam *t);
/* Runs job on threads 0 .. nt - 1 (nt at most the team's size; the caller is thread 0) and
 * returns when every one has finished. */
void cpu_team_run(CpuTeam *t, int nt, CpuJob job, void *ctx);

/* -- cpu.c -- */

/* Runs job on the cpu device's team, with as many threads as it runs kernels with now. */
void cpu_run(void *dev, CpuJob job, void *ctx);

/* -- gemm.c: the library GEMM (a packed-panel micro-kernel) -- */

/* A call for g on the schedule's stage buffers buf (read at each run), run on dev's team; B is
 * packed now when g->b_constant. KILN_ERR_UNSUPPORTED declines (the generated kernel runs). */
kiln_status cpu_gemm_prepare(const CgLibGemm *g, const RtBuf *buf, void *dev, void **call);
kiln_status cpu_gemm_run(void *call);
void cpu_gemm_release(void *call);

#endif
