/*
 * runtime — the last stage. Takes a TE (and, for compiling backends, the plan and
 * the generated source), owns device memory, runs the schedule and keeps the census.
 *
 * A backend is a static const table of function pointers (below); optional slots may
 * be NULL, and the comment says what happens instead. program.c implements the public
 * kiln_program_* API on top of it.
 */
#ifndef KILN_RUNTIME_H
#define KILN_RUNTIME_H

#include "../te/te.h"

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

/* -- backends -- */

/*
 * A backend compiles a whole TE into an executable it owns (for cpu/cuda: plan, render,
 * compile, load; for ref: nothing) and runs it. program.c owns the TE (it outlives the
 * executable) and the public API; backends fill the census for what they did.
 * Any stage a backend cannot run itself it evaluates with ref_eval_stage and counts as
 * a host fallback (census.host_fallbacks, fallback_ops, largest_fallback_bytes); with
 * o->strict that is an error (KILN_ERR_FALLBACK) naming the op.
 */
typedef struct Backend {
  const char *name;
  /* KILN_OK when the device and its libraries are present; else why not (last error). */
  kiln_status (*probe)(void);
  kiln_status (*compile)(const TE *te, const kiln_options *o, void **exec, kiln_census *c);
  /* inputs: host buffers in te->inputs order; outputs: host buffers in te->outputs order.
   * After the outputs are written, every assign (param <- value) takes effect. */
  kiln_status (*run)(void *exec, const void *const *inputs, void *const *outputs, kiln_census *c);
  /* Current value of a param stage into host memory. */
  kiln_status (*read_param)(void *exec, int stage, void *dst);
  /* Prints the schedule (kernels, bytes, boundary reasons). Optional: NULL prints "no plan". */
  kiln_status (*print)(void *exec, FILE *f);
  void (*free)(void *exec);
  /* Resident tensors (kiln_program_set_input/read_output). run() may get inputs or outputs
   * NULL, or NULL entries: that tensor stays where it is. Optional: a backend that leaves
   * these NULL is given host buffers for every run, and program.c keeps the copies. */
  kiln_status (*set_input)(void *exec, int i, const void *src);   /* host -> input i, kept */
  kiln_status (*read_output)(void *exec, int i, void *dst);       /* output i of the last run */
  /* Runs string stages (ref_eval_stage_strings with storage it empties each run). A backend
   * without it is refused programs with string tensors at compile (KILN_ERR_UNSUPPORTED). */
  bool strings;
} Backend;

extern const Backend rt_backend_ref;   /* ref/ref.c: the oracle; its census counts 0 kernels, 0 fallbacks */
extern const Backend rt_backend_cpu;   /* cpu/cpu.c */
extern const Backend rt_backend_cuda;  /* cuda/cuda.c */

/* -- program.c -- */

/* The backend called name, or NULL (with a message listing the known ones). */
const Backend *rt_backend_find(const char *name);

#endif
