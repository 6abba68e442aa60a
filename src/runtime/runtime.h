/*
 * runtime — the last stage. Takes a TE, hands on results and the census. One pipeline
 * (program.c, schedule.c) does for every backend what a compiled run needs: plan, render
 * in the backend's dialect, ask the backend to build the source, place buffers, bind
 * launches, record the schedule, run it, evaluate opaque stages on the host (counted
 * fallbacks) and keep the census. A backend is only a table of device hooks (below):
 * memory, copies, building a translation unit, finding and launching a kernel with the
 * geometry codegen decided, and optionally a library GEMM, a recorded schedule and a
 * device clock. Adding one is a dialect table (codegen) and a runtime/<name>/ folder.
 */
#ifndef KILN_RUNTIME_H
#define KILN_RUNTIME_H

#include "../codegen/codegen.h"

/* -- ref/ref.c: the reference interpreter (the oracle) -- */

/* Evaluates stage s of te into out (numel * dtype size bytes), reading every stage it
 * loads from bufs[stage] (host memory, dense row-major, of that stage's dtype).
 * Float sums accumulate in double; ints in int64. */
kiln_status ref_eval_stage(const TE *te, int s, const void *const *bufs, void *out);
/* The same, with strings: an op that makes new strings (normalize with a case change,
 * concat) draws them from the arena strings, which the caller owns and empties between
 * runs; ref_eval_stage refuses such a stage (KILN_ERR_UNSUPPORTED). String stages run
 * on one thread. */
kiln_status ref_eval_stage_strings(const TE *te, int s, const void *const *bufs, void *out, Arena *strings);
/* Evaluates every stage; bufs[s] must be allocated for every non-source stage and set for
 * every source stage (inputs/params/consts). */
kiln_status ref_eval_all(const TE *te, void **bufs);

/* -- team.c: threads for host work (the cpu backend's kernels, ref's large stages) -- */

typedef struct HostTeam HostTeam;
/* One thread's part of a job: thread tid of nt (0 the caller). */
typedef void (*HostJob)(void *ctx, int tid, int nt);
/* A team of `threads` (the caller and threads - 1 workers, who wait for jobs). */
kiln_status host_team_open(int threads, HostTeam **out);
void host_team_close(HostTeam *t);
int host_team_size(const HostTeam *t);
/* Runs job on threads 0 .. nt - 1 (nt at most the team's size; the caller is thread 0) and
 * returns when every one has finished. */
void host_team_run(HostTeam *t, int nt, HostJob job, void *ctx);

/* -- dist.c: kiln_dist -- */

struct kiln_dist {
  int ranks, rank;
  void *comm;          /* NCCL's communicator (cuda/nccl.c); NULL: a group of one rank, no library */
};

/* -- backends -- */

/* A buffer on a backend's device: a device address, or on host-memory backends a pointer. */
typedef unsigned long long RtBuf;  /* the width and type of a CUDA device address */

/*
 * Device hooks. `dev` is the backend's per-program state (open/close). Every hook returns
 * KILN_OK or a failure naming the call and `what`. Optional hooks may be NULL; the comment
 * says what the pipeline does instead.
 */
enum { RT_LT_MAX_ALGOS = 16 };  /* library algorithms a GEMM may time at load (kiln_options.cuda_lt_algos) */

typedef struct Backend {
  const char *name;
  /* The dialect kernels are rendered in; NULL: the backend interprets the TE (ref), every
   * stage evaluated on the host into its own buffer, no kernels. */
  const Dialect *dialect;
  /* Buffers are host memory (RtBuf is a pointer): graph inputs and outputs are the caller's
   * buffers, bound in place every run; constants are read where the TE keeps them. */
  bool host_memory;
  /* KILN_OK when the device and its libraries are present; else why not. */
  kiln_status (*probe)(void);
  kiln_status (*open)(const kiln_options *o, void **dev);
  void (*close)(void *dev);
  kiln_status (*alloc)(void *dev, int64_t bytes, const char *what, RtBuf *out);
  void (*release)(void *dev, RtBuf b);
  kiln_status (*upload)(void *dev, RtBuf dst, const void *src, int64_t bytes, const char *what);
  kiln_status (*download)(void *dev, void *dst, RtBuf src, int64_t bytes, const char *what);
  kiln_status (*copy)(void *dev, RtBuf dst, RtBuf src, int64_t bytes, const char *what);
  /* Builds one translation unit (every kernel of the plan) into a module; *hit: it came
   * from the on-disk cache. A compiler error names the kernel (rt_kernel_at_line). */
  kiln_status (*build)(void *dev, const char *src, size_t len, const kiln_options *o, void **module, bool *hit);
  void (*unload)(void *dev, void *module);
  /* The entry point l->name of module, checked against what the device allows for l's
   * geometry (threads per block, shared memory), which it also applies. */
  kiln_status (*lookup)(void *dev, void *module, const CgLaunch *l, void **fn);
  /* Enqueues fn on l's geometry with args[i] bound to parameter b<i> (l->cooperative: all
   * blocks resident at once, as grid barriers need; the pipeline sized l->grid for that). */
  kiln_status (*launch)(void *dev, void *fn, const CgLaunch *l, const RtBuf *args);
  /* Optional: what the compiled fn is on this device at l's block size: how many of its blocks
   * one multiprocessor keeps resident, the multiprocessors, its registers per thread and its
   * local (spilled) bytes per thread. NULL: no limits known (loop backends). */
  kiln_status (*residency)(void *dev, void *fn, const CgLaunch *l, int *per_sm, int *sms, int *regs, int *local_bytes);
  /* Optional library GEMM (cuBLASLt): prepare binds g to the stage buffers (stage -> RtBuf),
   * and may run it there (kiln_options.cuda_lt_algos times up to RT_LT_MAX_ALGOS candidates);
   * KILN_ERR_UNSUPPORTED declines, and the generated kernel runs instead. NULL: never. */
  kiln_status (*library_prepare)(void *dev, const CgLibGemm *g, const RtBuf *stage_buf, void **call);
  kiln_status (*library_run)(void *dev, void *call);
  void (*library_release)(void *dev, void *call);
  /* Optional: what is enqueued between record_begin and record_end becomes one
   * submission, replayed by replay. NULL: every run enqueues kernel by kernel. */
  kiln_status (*record_begin)(void *dev);
  kiln_status (*record_end)(void *dev, void **graph);
  kiln_status (*replay)(void *dev, void *graph);
  void (*graph_free)(void *dev, void *graph);
  /* Waits for everything enqueued; what: what waits (for the message). NULL: launches are
   * synchronous. */
  kiln_status (*sync)(void *dev, const char *what);
  /* Optional device clock: mark(0) before the schedule, mark(1) after, elapsed after a sync. */
  kiln_status (*mark)(void *dev, int which);
  kiln_status (*elapsed)(void *dev, double *ms);
  /* Optional: the device (DLPack's numbering: 2 for CUDA), its ordinal and the stream the
   * program enqueues on, for exchange with other libraries (kiln_program_device); and a copy
   * from memory another library wrote on this device, after the work it enqueued on its
   * stream. NULL: the buffers are host memory (device 1, no stream), copied with memcpy. */
  void (*where)(void *dev, int *device_type, int *device_id, unsigned long long *stream);
  kiln_status (*copy_after)(void *dev, RtBuf dst, RtBuf src, int64_t bytes, unsigned long long stream, const char *what);
  /* Optional collectives over comm (a kiln_dist's): all_reduce starts bucket b, n averaging
   * all-reduces (src[i] -> dst[i], count[i] elements of dtype[i]), on a stream of their own after
   * the work enqueued so far; collective_wait makes the work enqueued after it wait for bucket b.
   * Buckets are numbered from 0 in each run. NULL: a program over more than one rank is refused. */
  kiln_status (*all_reduce)(void *dev, void *comm, int b, int n, const RtBuf *src, const RtBuf *dst, const int64_t *count,
                            const kiln_dtype *dtype);
  kiln_status (*collective_wait)(void *dev, int b);
  /* One line on what compiled and runs the kernels (print). NULL: nothing. */
  void (*describe)(void *dev, FILE *f);
} Backend;

extern const Backend rt_backend_ref;   /* ref/ref.c: the interpreter, the oracle */
extern const Backend rt_backend_cpu;   /* cpu/cpu.c */
extern const Backend rt_backend_cuda;  /* cuda/cuda.c */
extern const Backend rt_backend_vulkan;  /* vulkan/vulkan.c */

/* -- cuda/nccl.c: the communicator of kiln_dist on cuda (NCCL, loaded with dlopen) -- */

kiln_status rt_nccl_id(unsigned char id[KILN_DIST_ID_BYTES]);
/* NCCL's communicator for rank of ranks on this process's CUDA device (set up here if not yet). */
kiln_status rt_nccl_open(const unsigned char id[KILN_DIST_ID_BYTES], int ranks, int rank, void **comm);
void rt_nccl_close(void *comm);
/* n averaging all-reduces as one group (one launch) on stream. */
kiln_status rt_nccl_all_reduce(void *comm, unsigned long long stream, int n, const RtBuf *src, const RtBuf *dst,
                               const int64_t *count, const kiln_dtype *dtype);

/* -- program.c -- */

/* The backend called name (NULL or "": cpu), or NULL (with a message listing the known ones). */
const Backend *rt_backend_find(const char *name);

/* -- files.c: the on-disk caches' files (cpu and cuda) -- */

/* mkdir -p of a cache folder and its parent (~/.cache/kiln). */
kiln_status rt_cache_folder(const char *dir);
/* A whole file in kiln_malloc'ed memory, NUL-terminated; NULL if absent or unreadable. */
char *rt_file_read(const char *path, size_t *size);
/* Writes through a temporary file and a rename: a concurrent reader sees all or nothing. */
bool rt_file_write(const char *path, const void *data, size_t n);

/* -- schedule.c: the one pipeline, used by program.c -- */

typedef struct Schedule Schedule;
/* Plans, renders, builds and binds te for backend be under o; the census gets what compiling
 * decided (kernels planned, cache hit, peak bytes). te must outlive the schedule. */
kiln_status rt_schedule_create(const Backend *be, TE *te, const kiln_options *o, kiln_census *c, Schedule **out);
void rt_schedule_free(Schedule *s);
/* times runs (>= 1), waiting once after the last. inputs/outputs: host buffers in te order,
 * bound for the first run and read after the last (times > 1: both NULL); NULL arrays or
 * entries keep the tensor resident (rt_schedule_set_input) or leave an output on the device.
 * Assigns take effect after the outputs are written. The census counts one run (device_ms:
 * all of them). */
kiln_status rt_schedule_run(Schedule *s, const void *const *inputs, void *const *outputs, int times, kiln_census *c);
/* Resident tensors: host -> input i (kept until set again); output i of the last run -> host;
 * a param's current value -> host; host -> a param (numeric, not string), in place. */
kiln_status rt_schedule_set_input(Schedule *s, int i, const void *src);
kiln_status rt_schedule_read_output(Schedule *s, int i, void *dst);
kiln_status rt_schedule_read_param(Schedule *s, int stage, void *dst);
kiln_status rt_schedule_write_param(Schedule *s, int stage, const void *src);
/* Input i's resident value copied from bytes at address on the program's device, written by
 * work on stream (0 on host); output i of the last run where the schedule keeps it. */
kiln_status rt_schedule_copy_input(Schedule *s, int i, unsigned long long address, unsigned long long stream);
kiln_status rt_schedule_output_at(const Schedule *s, int i, unsigned long long *address);
void rt_schedule_where(const Schedule *s, int *device_type, int *device_id, unsigned long long *stream);
kiln_status rt_schedule_print(const Schedule *s, FILE *f);
/* The plan as Graphviz: kernels as clusters of their stages (plan_dot); no plan (ref) is KILN_ERR_UNSUPPORTED. */
kiln_status rt_schedule_print_dot(const Schedule *s, FILE *f);
/* The codegen choices options o make for dialect d (row variant, split-K, library GEMMs, launch
 * groups, stores in place); an unknown cuda_row or grid_sync is KILN_ERR_INVALID_ARG. */
kiln_status rt_codegen_options(const kiln_options *o, const Dialect *d, CgOptions *out);
/* What the planner asks of dialect d's renderer (PlanOptions.pool_ok), g the codegen options it
 * renders with (kept alive while the plan is built). */
void rt_plan_renderer(const kiln_options *o, const Dialect *d, const CgOptions *g, PlanOptions *po);
/* f32 lanes of this host's widest vectors the generated C is compiled for (-march=native): 16
 * with AVX-512, 8 with AVX2 and FMA, 0 elsewhere. */
int rt_cpu_lanes(void);
/* The kernel whose rendered source holds line `line` (from the renderer's "kernel N:"
 * comments), -1 if none: for a backend's compiler errors. */
int rt_kernel_at_line(const char *src, long line);

#endif
