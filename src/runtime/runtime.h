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
/* Evaluates every stage; bufs[s] must be allocated for every non-source stage and set for
 * every source stage (inputs/params/consts). */
kiln_status ref_eval_all(const TE *te, void **bufs);

/* -- backends -- */

typedef struct Backend {
  const char *name;
  /* true when the device and its libraries are present; else a message in the last error */
  kiln_status (*probe)(void);
} Backend;

const Backend *rt_backend_find(const char *name);

#endif
