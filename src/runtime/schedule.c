/*
 * schedule.c — the one pipeline. Takes a TE and a backend's hooks, produces a schedule
 * that runs: the plan (plan_build), the source in the backend's dialect and every launch's
 * geometry and variant (cg_program_build), the built module, buffers, bound launches and,
 * where the backend can, the whole schedule recorded once as one submission.
 *
 * Buffers. Every stage a kernel reads or stores, every input, output and param, and both
 * sides of every assign has one. Intermediates share one arena laid out by the plan's
 * memory plan; params are copied once at compile into buffers the schedule owns (assigns
 * update them in place); constants are uploaded once (host-memory backends read them where
 * the TE keeps them). Inputs and outputs have buffers of their own; on host-memory
 * backends a run binds the caller's buffers in their place, so nothing is copied. String
 * tensors always live in host memory (an array of `const char *` per stage), on every
 * backend: only opaque stages read or write them.
 *
 * Host fallbacks. A stage no kernel can compute (opaque: every string op) is evaluated by
 * ref_eval_stage_strings, its operands brought to the host and its result sent back, and
 * counted in the census by op ("string_concat:1 label_encode:2") with the largest tensor
 * that crossed; in strict mode compiling fails naming the first such op. The same rule and
 * the same words hold on every backend, ref included (there every stage runs on the host,
 * but only opaque ones are fallbacks: they would be on any backend).
 *
 * A backend without a dialect (ref) interprets: every stage gets a host buffer and is
 * evaluated in order, no plan, no kernels.
 */
#include "runtime.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct Launch {
  const CgLaunch *l;
  CgLaunch run;       /* a group's launch as it runs: a cooperative grid capped at the resident blocks */
  void *fn;
  RtBuf *args;        /* parameter values, from buf[] (host-memory backends: refreshed every run) */
  void *lib;          /* a library call runs instead of the kernel */
  int at;             /* a group: the member it is launched at (its last; codegen may defer an earlier
                         independent kernel into it) */
  int64_t resident;   /* a group: blocks the device keeps resident (0: unknown) */
  int regs, local_bytes;
  void *pack_fn;      /* CgLaunch.pack: the module's kiln_p<k>, filling pack (the kernel's last argument) */
  float *pack;
} Launch;

/* A bucket of collectives (CgLaunch.collective): started after launch `start` (its last member,
 * right after the kernel that makes that member's operand), waited for before launch `join`, the
 * first that reads one of its results (n_launch: the end of the run). */
typedef struct Bucket {
  int start, join;
  int n, *stage;       /* the collectives' stages */
  RtBuf *src, *dst;    /* their operands' and their own buffers, filled when the bucket starts */
  int64_t *count;
  kiln_dtype *dtype;
} Bucket;

struct Schedule {
  const Backend *be;
  TE *te;
  kiln_options opt;
  void *dev;
  Plan *plan;          /* NULL when interpreting */
  CgProgram *cg;
  void *module;
  RtBuf *buf;          /* stage -> buffer this run (0: none) */
  RtBuf *own;          /* stage -> buffer the schedule allocated (0: none) */
  RtBuf arena;         /* intermediates */
  const char ***str;   /* stage -> host array of a string tensor (NULL: not a string) */
  Launch *launch; int n_launch;
  Launch *group; int n_group;   /* launch groups (cg->group), each launched at its last member */
  Bucket *bucket; int n_bucket; /* collectives through the communicator (none: each is a copy) */
  int n_collective;
  int64_t collective_bytes;
  const char **veto;   /* plan kernel -> why it may not join a group (a built group over budget) */
  int *bounds;         /* plan kernel -> resident blocks the group it begins asks for (CgOptions.group_bounds) */
  Arena veto_text;
  int n_rebuilds;
  int n_asked;         /* builds again for a group's ask of resident blocks (check_groups) */
  void *graph;         /* the recorded schedule */
  bool replay, assigns_after_kernels;
  int n_host, n_library;
  RtBuf *assign_tmp;   /* per assign: a copy of its value when that value is itself assigned */
  bool *out_kept;      /* output i of the last run is in own[] (host-memory backends) */
  Arena strings;       /* strings made by this run's string ops */
  int fb_count[OP_COUNT];
  int fb_order[OP_COUNT], n_fb;
  bool cache_hit;
  double build_ms;
  /* options.profile: launch i's time in run r at prof[i * PROFILE_RUNS + r % PROFILE_RUNS] (ms) */
  double *prof;
  int64_t prof_runs;
};

enum { PROFILE_RUNS = 1024 };  /* the last runs a kernel's median is taken over */

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int64_t stage_bytes(const Stage *s) {
  int64_t n = 0;
  if (!size_mul(s->numel, (int64_t)kiln_dtype_size(s->dtype), &n)) return -1;
  return n;
}

static const char *op_name(const Stage *S) { return S->op >= 0 && S->op < OP_COUNT ? op_names[S->op] : "?"; }

static void *host_ptr(RtBuf b) { return (void *)(uintptr_t)b; }

/* ---- memory, through the hooks or (host-memory backends without them) the host ---- */

static kiln_status mem_alloc(Schedule *s, int64_t bytes, const char *what, RtBuf *out) {
  if (s->be->alloc) return s->be->alloc(s->dev, bytes, what, out);
  void *p = kiln_malloc((size_t)(bytes > 0 ? bytes : 1));
  if (!p) return kiln_fail(KILN_ERR_NO_MEMORY, "%s: cannot allocate %lld bytes for %s", s->be->name, (long long)bytes, what);
  *out = (RtBuf)(uintptr_t)p;
  return KILN_OK;
}

static void mem_release(Schedule *s, RtBuf b) {
  if (!b) return;
  if (s->be->release) s->be->release(s->dev, b);
  else kiln_free(host_ptr(b));
}

static kiln_status mem_upload(Schedule *s, RtBuf dst, const void *src, int64_t n, const char *what, kiln_census *c) {
  if (n <= 0 || host_ptr(dst) == src) return KILN_OK;
  if (!s->be->upload) { memcpy(host_ptr(dst), src, (size_t)n); return KILN_OK; }
  if (c) c->h2d_bytes += n, c->h2d_copies++;
  return s->be->upload(s->dev, dst, src, n, what);
}

static kiln_status mem_download(Schedule *s, void *dst, RtBuf src, int64_t n, const char *what, kiln_census *c) {
  if (n <= 0 || host_ptr(src) == dst) return KILN_OK;
  if (!s->be->download) { memcpy(dst, host_ptr(src), (size_t)n); return KILN_OK; }
  if (c) c->d2h_bytes += n, c->d2h_copies++;
  return s->be->download(s->dev, dst, src, n, what);
}

static kiln_status mem_copy(Schedule *s, RtBuf dst, RtBuf src, int64_t n, const char *what) {
  if (n <= 0 || dst == src) return KILN_OK;
  if (!s->be->copy) { memmove(host_ptr(dst), host_ptr(src), (size_t)n); return KILN_OK; }
  return s->be->copy(s->dev, dst, src, n, what);
}

static kiln_status dev_sync(Schedule *s, const char *what) {
  return s->be->sync ? s->be->sync(s->dev, what) : KILN_OK;
}

/* ---- the census's fallbacks: one format, one rule ---- */

static void fallbacks_reset(Schedule *s, kiln_census *c) {
  memset(s->fb_count, 0, sizeof s->fb_count);
  s->n_fb = 0;
  c->host_fallbacks = 0;
  c->largest_fallback_bytes = 0;
  c->fallback_ops[0] = 0;
}

static void fallback_note(Schedule *s, const Stage *S, kiln_census *c) {
  c->host_fallbacks++;
  int64_t n = stage_bytes(S);
  if (n > c->largest_fallback_bytes) c->largest_fallback_bytes = n;
  int op = S->op >= 0 && S->op < OP_COUNT ? S->op : 0;
  if (!s->fb_count[op]++) s->fb_order[s->n_fb++] = op;
}

/* "op:N op:N", ops in the order they first ran. */
static void fallbacks_format(const Schedule *s, kiln_census *c) {
  size_t used = 0;
  c->fallback_ops[0] = 0;
  for (int i = 0; i < s->n_fb && used < sizeof c->fallback_ops; i++) {
    int op = s->fb_order[i];
    used += (size_t)snprintf(c->fallback_ops + used, sizeof c->fallback_ops - used, "%s%s:%d", i ? " " : "",
                             op_names[op], s->fb_count[op]);
  }
}

/* A program whose collectives run over more than one rank needs a backend with collectives and a
 * communicator with a library behind it (kiln_dist_open makes none without an id). */
static kiln_status check_dist(const Schedule *s) {
  int ranks = s->opt.dist ? s->opt.dist->ranks : 1, n = s->n_collective;
  if (n && ranks > 1 && (!s->be->all_reduce || !s->opt.dist->comm))
    return kiln_fail(KILN_ERR_UNSUPPORTED, "%s: the program's %d collective%s run over %d ranks, and %s", s->be->name, n,
                     n > 1 ? "s" : "", ranks,
                     s->be->all_reduce ? "the communicator has no library (an id from kiln_dist_id_new)"
                                       : "this backend has no collectives (cuda does, through NCCL)");
  return KILN_OK;
}

/* Strict mode: the first opaque stage, in stage order, names the op (every backend alike). */
static kiln_status check_strict(const Schedule *s) {
  const TE *te = s->te;
  for (int i = 0; s->opt.strict && i < te->n_stages; i++) {
    const Stage *S = &te->stages[i];
    if (S->kind == ST_OPAQUE && !te_is_collective(S))
      return kiln_fail(KILN_ERR_FALLBACK, "op %s (t%d '%s') would run on the host (strict mode)", op_name(S), S->id,
                       S->name ? S->name : "");
  }
  return KILN_OK;
}

/* ---- buffers ---- */

static bool is_source(const Stage *S) { return S->kind == ST_INPUT || S->kind == ST_PARAM || S->kind == ST_CONST; }

/* Which stages need a buffer: every stage a kernel reads from memory or stores, every
 * input, output and param, and both sides of every assign (all of them when interpreting). */
static bool *needed_buffers(const Schedule *s) {
  const TE *te = s->te;
  bool *need = kiln_calloc((size_t)te->n_stages + 1, sizeof *need);
  if (!need) return NULL;
  for (int i = 0; !s->plan && i < te->n_stages; i++) need[i] = true;
  for (int i = 0; s->plan && i < s->plan->n_kernels; i++) {
    const Kernel *k = &s->plan->kernels[i];
    for (int j = 0; j < k->n_ins; j++) need[k->ins[j]] = true;
    for (int j = 0; j < k->n_items; j++)
      if (s->plan->stored[k->items[j].stage]) need[k->items[j].stage] = true;
  }
  for (int i = 0; i < te->n_outputs; i++) need[te->outputs[i]] = true;
  for (int i = 0; i < te->n_inputs; i++) need[te->inputs[i]] = true;
  for (int i = 0; i < te->n_stages; i++) need[i] |= te->stages[i].kind == ST_PARAM;  /* read_param */
  for (int i = 0; i < te->n_assigns; i++) need[te->assigns[i].param] = need[te->assigns[i].value] = true;
  return need;
}

static kiln_status place_string(Schedule *s, int i) {
  const Stage *S = &s->te->stages[i];
  if (!(s->str[i] = kiln_calloc((size_t)(S->numel > 0 ? S->numel : 1), sizeof(char *))))
    return kiln_fail(KILN_ERR_NO_MEMORY, "%s: no host memory for string tensor '%s'", s->be->name, S->name);
  if (S->data && S->numel > 0) memcpy(s->str[i], S->data, (size_t)S->numel * sizeof(char *));  /* the TE's strings */
  return KILN_OK;
}

/* Where a needed stage's buffer comes from. */
typedef enum { AT_STRING, AT_TE_DATA, AT_ARENA, AT_OWN, AT_PARAM } Place;

/* The param an assigned value is stored into (codegen's store_into), -1: none. On host-memory
 * backends an output is the caller's buffer, so it keeps its own. */
static int stored_into(const Schedule *s, int i) {
  if (!s->cg || !s->cg->store_into || i >= s->cg->n_store || s->cg->store_into[i] < 0) return -1;
  if (s->be->host_memory && plan_is_output(s->plan, i)) return -1;
  return s->cg->store_into[i];
}

/* Does a run write stage i (a param assigned, or an output the caller may bind)? Then it has a
 * buffer of its own; a param that only write_param changes is read where the TE keeps it (its
 * copy at compile was most of a warm compile: gpt_tiny 115-127 ms). */
static bool written_in_run(const TE *te, int i) {
  for (int a = 0; a < te->n_assigns; a++)
    if (te->assigns[a].param == i) return true;
  for (int o = 0; o < te->n_outputs; o++)
    if (te->outputs[o] == i) return true;
  return false;
}

static Place placement(const Schedule *s, int i) {
  const Stage *S = &s->te->stages[i];
  const Plan *p = s->plan;
  if (S->dtype == KILN_STRING) return AT_STRING;
  if (stored_into(s, i) >= 0) return AT_PARAM;
  if (S->kind == ST_CONST && s->be->host_memory) return AT_TE_DATA;  /* read only */
  if (S->kind == ST_PARAM && S->data && s->be->host_memory && !written_in_run(s->te, i))
    return AT_TE_DATA;  /* the program's own copy: write_param writes it, no run does */
  if (p && p->offset && p->offset[i] >= 0 && !plan_is_output(p, i) && !is_source(S)) return AT_ARENA;
  return AT_OWN;
}

static void human_bytes(int64_t n, char *out, size_t cap) {
  if (n >= (int64_t)1 << 30) snprintf(out, cap, "%.1f GiB", (double)n / (1 << 30));
  else if (n >= 1 << 20) snprintf(out, cap, "%.1f MiB", (double)n / (1 << 20));
  else snprintf(out, cap, "%lld bytes", (long long)n);
}

/* The caps of options (max_tensor_bytes, max_planned_bytes, max_ref_work), checked before
 * anything is allocated: the tensor or stage over one is named. */
static kiln_status check_caps(const Schedule *s, const bool *need) {
  const TE *te = s->te;
  const kiln_options *o = &s->opt;
  int64_t total = s->plan ? s->plan->arena_bytes : 0, work = 0, most_work = -1;
  int biggest = -1, busiest = -1;
  char a[32], b[32];
  for (int i = 0; i < te->n_stages; i++) {
    const Stage *S = &te->stages[i];
    int64_t n = stage_bytes(S), w = S->numel;
    if (n < 0) return kiln_fail(KILN_ERR_NO_MEMORY, "tensor '%s' (t%d) is too large to address", S->name, S->id);
    if (o->max_tensor_bytes > 0 && n > o->max_tensor_bytes) {
      human_bytes(n, a, sizeof a), human_bytes(o->max_tensor_bytes, b, sizeof b);
      return kiln_fail(KILN_ERR_NO_MEMORY, "tensor '%s' (t%d) would take %s, above max_tensor_bytes "
                       "($KILN_MAX_TENSOR_BYTES) of %s", S->name, S->id, a, b);
    }
    if (need[i] && placement(s, i) == AT_OWN && !size_add(total, n, &total)) total = INT64_MAX;
    if (need[i] && placement(s, i) == AT_OWN && (biggest < 0 || n > stage_bytes(&te->stages[biggest]))) biggest = i;
    for (int r = 0; S->kind == ST_REDUCE && r < S->n_red; r++)
      if (!size_mul(w, S->red_shape[r], &w)) w = INT64_MAX;
    if (!is_source(S) && w > most_work) most_work = w, busiest = i;
    if (!is_source(S) && !size_add(work, w, &work)) work = INT64_MAX;
  }
  if (o->max_planned_bytes > 0 && total > o->max_planned_bytes) {
    human_bytes(total, a, sizeof a), human_bytes(o->max_planned_bytes, b, sizeof b);
    const Stage *B = biggest >= 0 ? &te->stages[biggest] : NULL;
    return kiln_fail(KILN_ERR_NO_MEMORY, "the program would allocate %s, above max_planned_bytes ($KILN_MAX_PLANNED_BYTES) "
                     "of %s; the largest buffer is tensor '%s' (t%d)", a, b, B ? B->name : "?", B ? B->id : -1);
  }
  if (!s->plan && o->max_ref_work > 0 && work > o->max_ref_work) {
    const Stage *B = &te->stages[busiest];
    return kiln_fail(KILN_ERR_NO_MEMORY, "ref would evaluate %lld elements a run, above max_ref_work ($KILN_MAX_REF_WORK) of "
                     "%lld; the most is stage '%s' (t%d, %s) with %lld", (long long)work, (long long)o->max_ref_work,
                     B->name, B->id, op_name(B), (long long)most_work);
  }
  return KILN_OK;
}

static kiln_status check_caps_now(const Schedule *s) {
  bool *need = needed_buffers(s);
  if (!need) return kiln_fail(KILN_ERR_NO_MEMORY, "%s: out of memory", s->be->name);
  kiln_status st = check_caps(s, need);
  kiln_free(need);
  return st;
}

/* Gives every needed stage its buffer; uploads params and consts. */
static kiln_status place_buffers(Schedule *s) {
  const TE *te = s->te;
  const Plan *p = s->plan;
  bool *need = needed_buffers(s);
  s->buf = kiln_calloc((size_t)te->n_stages + 1, sizeof *s->buf);
  s->own = kiln_calloc((size_t)te->n_stages + 1, sizeof *s->own);
  s->str = kiln_calloc((size_t)te->n_stages + 1, sizeof *s->str);
  if (!need || !s->buf || !s->own || !s->str) {
    kiln_free(need);
    return kiln_fail(KILN_ERR_NO_MEMORY, "%s: no host memory for the buffer table", s->be->name);
  }
  kiln_status st = KILN_OK;
  if (p && p->arena_bytes > 0) st = mem_alloc(s, p->arena_bytes, "the intermediate arena", &s->arena);
  for (int i = 0; i < te->n_stages && !st; i++) {
    if (!need[i]) continue;
    const Stage *S = &te->stages[i];
    int64_t n = stage_bytes(S);
    switch (placement(s, i)) {
    case AT_STRING: st = place_string(s, i); break;
    case AT_TE_DATA: s->buf[i] = (RtBuf)(uintptr_t)S->data; break;
    case AT_ARENA: s->buf[i] = s->arena + (RtBuf)p->offset[i]; break;
    case AT_PARAM: break;  /* below, once every param has its buffer */
    case AT_OWN:
      if ((st = mem_alloc(s, n, S->name, &s->own[i]))) break;
      s->buf[i] = s->own[i];
      if ((S->kind == ST_PARAM || S->kind == ST_CONST) && S->data) st = mem_upload(s, s->buf[i], S->data, n, S->name, NULL);
      break;
    }
  }
  for (int i = 0; i < te->n_stages && !st; i++)
    if (need[i] && placement(s, i) == AT_PARAM) s->buf[i] = s->buf[stored_into(s, i)];
  kiln_free(need);
  /* an assign whose value is itself assigned reads a copy, so p <- q, q <- p swaps */
  s->assign_tmp = kiln_calloc((size_t)te->n_assigns + 1, sizeof *s->assign_tmp);
  if (!st && !s->assign_tmp) st = kiln_fail(KILN_ERR_NO_MEMORY, "%s: out of memory", s->be->name);
  for (int a = 0; a < te->n_assigns && !st; a++)
    for (int b = 0; b < te->n_assigns && !st; b++)
      if (b != a && te->assigns[b].param == te->assigns[a].value && !s->assign_tmp[a])
        st = mem_alloc(s, stage_bytes(&te->stages[te->assigns[a].value]), "an assign's value", &s->assign_tmp[a]);
  s->out_kept = kiln_calloc((size_t)te->n_outputs + 1, sizeof *s->out_kept);
  if (!st && !s->out_kept) st = kiln_fail(KILN_ERR_NO_MEMORY, "%s: out of memory", s->be->name);
  if (!st) st = dev_sync(s, "parameter upload");
  return st;
}

/* ---- launches ---- */

/* Lays out a kernel's constant weights (CgLaunch.pack) from its parameters' buffers now: at
 * compile, and after write_param of one of them. */
static kiln_status run_pack(Schedule *s, Launch *L) {
  for (int j = 0; j < L->l->n_params; j++) L->args[j] = s->buf[L->l->params[j]];
  L->args[L->l->n_params] = (RtBuf)(uintptr_t)L->pack;
  kiln_status st = s->be->launch(s->dev, L->pack_fn, L->l, L->args);
  return st ? st : dev_sync(s, "weights' pack");
}

/* A kernel whose weights are laid out for it: the pack's buffer (host memory: only loop
 * dialects render packs) and its first filling. */
static kiln_status bind_pack(Schedule *s, Launch *L) {
  const CgLaunch *l = L->l;
  if (!s->be->host_memory)
    return kiln_fail(KILN_ERR_UNSUPPORTED, "%s: kernel %d lays out its weights, which only host-memory backends do", s->be->name,
                     l->kernel);
  int64_t bytes;
  if (!size_mul(l->pack, (int64_t)sizeof(float), &bytes) || !(L->pack = kiln_malloc((size_t)bytes)))
    return kiln_fail(KILN_ERR_NO_MEMORY, "%s: no memory for kernel %d's weights laid out (%lld floats)", s->be->name, l->kernel,
                     (long long)l->pack);
  CgLaunch pl = *l;
  snprintf(pl.name, sizeof pl.name, "kiln_p%d", l->kernel);
  kiln_status st = s->be->lookup(s->dev, s->module, &pl, &L->pack_fn);
  return st ? st : run_pack(s, L);
}

/* Binds every launch to its entry point and buffers; offers library GEMMs to the backend
 * (planned once, run once here outside any recording, so that the library's lazy set-up
 * does not happen while the schedule is recorded; declined: the generated kernel stays). */
static kiln_status bind_launches(Schedule *s) {
  const CgProgram *g = s->cg;
  s->launch = kiln_calloc((size_t)g->n_launch + 1, sizeof *s->launch);
  if (!s->launch) return kiln_fail(KILN_ERR_NO_MEMORY, "%s: no memory for the launch table", s->be->name);
  s->n_launch = g->n_launch;
  for (int i = 0; i < g->n_launch; i++) {
    const CgLaunch *l = &g->launch[i];
    Launch *L = &s->launch[i];
    L->l = l;
    if (l->host) { s->n_host++; continue; }
    if (l->group >= 0) continue;  /* its group's launch runs it */
    if (l->grid <= 0) continue;   /* nothing to run (a kernel of an attention chain before its last) */
    if (!(L->args = kiln_calloc((size_t)l->n_params + 1, sizeof *L->args)))
      return kiln_fail(KILN_ERR_NO_MEMORY, "%s: no memory for kernel arguments", s->be->name);
    for (int j = 0; j < l->n_params; j++) {
      if (!(L->args[j] = s->buf[l->params[j]]))
        return kiln_fail(KILN_ERR_DEVICE, "%s: kernel %d reads stage %d, which has no buffer", s->be->name, l->kernel,
                         l->params[j]);
    }
    kiln_status st = s->be->lookup(s->dev, s->module, l, &L->fn);
    if (!st && l->pack > 0) st = bind_pack(s, L);
    if (st) return st;
    if (!l->library || !s->opt.cublaslt || !s->be->library_prepare) continue;
    if (s->be->library_prepare(s->dev, &l->lib, s->buf, &L->lib) != KILN_OK) { L->lib = NULL; continue; }
    s->n_library++;
    /* the warm-up keeps the library's lazy set-up out of a recording: none, none needed */
    if (!s->be->record_begin) continue;
    if ((st = s->be->library_run(s->dev, L->lib)) || (st = dev_sync(s, "library warm-up"))) return st;
  }
  for (int i = 0; i < s->n_group; i++) {
    Launch *L = &s->group[i];
    if (!(L->args = kiln_calloc((size_t)L->l->n_params + 1, sizeof *L->args)))
      return kiln_fail(KILN_ERR_NO_MEMORY, "%s: no memory for kernel arguments", s->be->name);
    for (int j = 0; j < L->l->n_params; j++)
      if (!(L->args[j] = s->buf[L->l->params[j]]))
        return kiln_fail(KILN_ERR_DEVICE, "%s: group %d reads stage %d, which has no buffer", s->be->name, i,
                         L->l->params[j]);
  }
  return KILN_OK;
}

/* ---- collectives ---- */

enum { BUCKET_BYTES_DEFAULT = 25 << 20 };  /* PyTorch DDP's bucket_cap_mb */

/* Must launch l wait for collective v's call: does it read or write v's result, or write v's
 * operand (its parameters: the kernel's inputs, then what it stores)? */
static bool waits_for(const Schedule *s, const CgLaunch *l, int v) {
  int u = s->te->stages[v].src[0], reads = s->plan->kernels[l->kernel].n_ins;
  for (int j = 0; j < l->n_params; j++)
    if (l->params[j] == v || (l->params[j] == u && j >= reads)) return true;
  return false;
}

static kiln_status bucket_add(Bucket *B, int v, const Stage *S) {
  size_t n = (size_t)B->n + 1;
  int *stage = kiln_realloc(B->stage, n * sizeof *stage);
  if (stage) B->stage = stage;
  RtBuf *src = stage ? kiln_realloc(B->src, n * sizeof *src) : NULL;
  if (src) B->src = src;
  RtBuf *dst = src ? kiln_realloc(B->dst, n * sizeof *dst) : NULL;
  if (dst) B->dst = dst;
  int64_t *count = dst ? kiln_realloc(B->count, n * sizeof *count) : NULL;
  if (count) B->count = count;
  kiln_dtype *dtype = count ? kiln_realloc(B->dtype, n * sizeof *dtype) : NULL;
  if (!dtype) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory for a bucket of collectives");
  B->dtype = dtype;
  B->stage[B->n] = v, B->count[B->n] = S->numel, B->dtype[B->n] = S->dtype;
  B->n++;
  return KILN_OK;
}

/* Bucket b's call: the communicator averages each member's operand into its buffer. */
static kiln_status start_bucket(Schedule *s, int b) {
  Bucket *B = &s->bucket[b];
  for (int j = 0; j < B->n; j++) B->src[j] = s->buf[s->te->stages[B->stage[j]].src[0]], B->dst[j] = s->buf[B->stage[j]];
  return s->be->all_reduce(s->dev, s->opt.dist->comm, b, B->n, B->src, B->dst, B->count, B->dtype);
}

/* Every bucket waited for before launch i (n_launch: at the end). */
static kiln_status join_buckets(Schedule *s, int i) {
  kiln_status st = KILN_OK;
  for (int b = 0; b < s->n_bucket && !st; b++)
    if (s->bucket[b].join == i) st = s->be->collective_wait(s->dev, b);
  return st;
}

/* The collectives' buckets, where a communicator with a library runs them: in launch order, a
 * bucket takes collectives until it would pass dist_bucket_bytes or a launch must wait for one
 * (waits_for); it starts after its last member (the later a member, the later its gradient) and
 * is waited for by the first launch that must. Over one rank without a library
 * each collective is a copy where it is; over more, a backend without collectives is refused. */
static kiln_status bind_collectives(Schedule *s) {
  const kiln_dist *dist = s->opt.dist;
  if (!s->n_collective || !dist || !dist->comm || !s->be->all_reduce) return KILN_OK;  /* copies (check_dist) */
  int64_t cap = s->opt.dist_bucket_bytes > 0 ? s->opt.dist_bucket_bytes : BUCKET_BYTES_DEFAULT, bytes = 0;
  if (!(s->bucket = kiln_calloc((size_t)s->n_collective, sizeof *s->bucket)))
    return kiln_fail(KILN_ERR_NO_MEMORY, "%s: out of memory for the collectives", s->be->name);
  Bucket *open = NULL;
  for (int i = 0; i < s->n_launch; i++) {
    const CgLaunch *l = s->launch[i].l;
    if (!l->collective) {
      for (int j = 0; open && j < open->n; j++)
        if (waits_for(s, l, open->stage[j])) open = NULL;
      continue;
    }
    int v = s->plan->kernels[l->kernel].anchor;
    int64_t n = stage_bytes(&s->te->stages[v]);
    if (open && bytes + n > cap) open = NULL;
    if (!open) open = &s->bucket[s->n_bucket++], bytes = 0, open->join = s->n_launch;
    kiln_status st = bucket_add(open, v, &s->te->stages[v]);
    if (st) return st;
    open->start = i, bytes += n;
  }
  for (int b = 0; b < s->n_bucket; b++) {
    Bucket *B = &s->bucket[b];
    for (int i = B->start + 1; i < s->n_launch && B->join == s->n_launch; i++)
      for (int j = 0; j < B->n; j++)
        if (waits_for(s, s->launch[i].l, B->stage[j])) B->join = i;
  }
  if (s->opt.debug >= 1)
    for (int b = 0; b < s->n_bucket; b++)
      fprintf(stderr, "> %s: bucket %d: %d collectives, started after launch %d, waited for before launch %d of %d\n",
              s->be->name, b, s->bucket[b].n, s->bucket[b].start, s->bucket[b].join, s->n_launch);
  /* each bucket once before any recording, as the library warm-up above: NCCL connects its
   * ranks at a communicator's first calls, which a CUDA graph capture must not see (every rank
   * compiles the same program, so all make these calls in the same order) */
  kiln_status st = KILN_OK;
  for (int b = 0; b < s->n_bucket && !st; b++)
    if (!(st = start_bucket(s, b))) st = s->be->collective_wait(s->dev, b);
  return st ? st : dev_sync(s, "the collectives' warm-up");
}

/* ---- launch groups: the budget ---- */

/* Looks up every group's entry and asks the device what it keeps resident. A cooperative group
 * must have all its blocks resident: its grid is capped at that, and a group whose compiled
 * code spills or whose resident blocks cannot cover the phases' blocks up to one per
 * multiprocessor would be slower than its kernels apart; its members are vetoed (with the
 * numbers) and the program is rendered again without it. With adaptive bounds (s->bounds), a
 * group of one phase whose blocks take more than one wave asks for the blocks a
 * multiprocessor that would make it one (at most GROUP_ASK_MOST), its registers capped to fit;
 * if it then spills, it asks for nothing again. Counts the groups vetoed and the groups whose
 * ask changed (either way the program is rendered and built once more). */
enum { GROUP_ASK_MOST = 4 };

static kiln_status check_groups(Schedule *s, int *vetoed, int *asked) {
  const CgProgram *g = s->cg;
  *vetoed = *asked = 0;
  kiln_free(s->group);
  s->group = kiln_calloc((size_t)g->n_group + 1, sizeof *s->group);
  if (!s->group) return kiln_fail(KILN_ERR_NO_MEMORY, "%s: no memory for the launch groups", s->be->name);
  s->n_group = g->n_group;
  for (int i = 0; i < g->n_group; i++) {
    Launch *L = &s->group[i];
    L->l = &g->group[i];
    L->run = g->group[i];
    L->at = -1;
    for (int m = 0; m < g->n_launch; m++)
      if (g->launch[m].group == i) L->at = m;
    kiln_status st = s->be->lookup(s->dev, s->module, L->l, &L->fn);
    if (st) return st;
    if (!s->be->residency) continue;
    int per_sm = 0, sms = 0;
    if ((st = s->be->residency(s->dev, L->fn, L->l, &per_sm, &sms, &L->regs, &L->local_bytes))) return st;
    L->resident = (int64_t)per_sm * sms;
    int64_t want = L->l->grid < sms ? L->l->grid : sms;
    int first = cg_group_first(g, i);
    if (s->bounds && first >= 0 && !L->l->cooperative && sms > 0) {
      int ask = (int)((L->l->grid + sms - 1) / sms);
      if (s->bounds[first] > 0 && L->local_bytes > 0) {  /* the ask spilled: none, as before */
        s->bounds[first] = -1;
        (*asked)++;
        continue;
      }
      if (!s->bounds[first] && L->local_bytes == 0 && per_sm > 0 && per_sm < ask && per_sm < GROUP_ASK_MOST) {
        s->bounds[first] = ask < GROUP_ASK_MOST ? ask : GROUP_ASK_MOST;
        if (s->opt.debug >= 1)
          fprintf(stderr, "> %s: group %d (%d registers) keeps %d blocks a multiprocessor for %lld; it asks for %d\n",
                  s->be->name, i, L->regs, per_sm, (long long)L->l->grid, s->bounds[first]);
        (*asked)++;
        continue;
      }
    }
    bool over = L->local_bytes > 0 || (L->l->cooperative && (L->resident < 1 || L->resident < want));
    if (L->l->cooperative && L->resident > 0 && L->run.grid > L->resident) L->run.grid = L->resident;
    if (!over) continue;
    char *why = arena_alloc(&s->veto_text, 96);
    if (!why) return kiln_fail(KILN_ERR_NO_MEMORY, "%s: out of memory", s->be->name);
    snprintf(why, 96, "budget: group %d has %d registers, %d B spilled, %lld blocks resident for %lld", i, L->regs,
             L->local_bytes, (long long)L->resident, (long long)L->l->grid);
    for (int m = 0; m < g->n_launch; m++)
      if (g->launch[m].group == i) s->veto[m] = why;
    if (s->opt.debug >= 1) fprintf(stderr, "> %s: %s; its kernels run apart\n", s->be->name, why);
    (*vetoed)++;
  }
  /* a kernel whose blocks wait for each other (a shared band's tiles at its barriers), launched
   * cooperatively or not, needs every block resident at once; where the device keeps fewer it is
   * vetoed and rendered again in its other form. Launched as any kernel, its blocks wait only for
   * slots the kernel before holds (that one exits: each kernel waits for the one before it) */
  for (int m = 0; m < g->n_launch && s->be->residency; m++) {
    const CgLaunch *l = &g->launch[m];
    if (!(l->cooperative || l->resident) || l->group >= 0 || l->grid <= 0) continue;
    void *fn = NULL;
    int per_sm = 0, sms = 0, regs = 0, local = 0;
    kiln_status st = s->be->lookup(s->dev, s->module, l, &fn);
    if (!st) st = s->be->residency(s->dev, fn, l, &per_sm, &sms, &regs, &local);
    if (st) return st;
    if ((int64_t)per_sm * sms >= l->grid) continue;
    char *why = arena_alloc(&s->veto_text, 96);
    if (!why) return kiln_fail(KILN_ERR_NO_MEMORY, "%s: out of memory", s->be->name);
    snprintf(why, 96, "budget: %d registers, %lld blocks resident for %lld", regs, (long long)per_sm * sms, (long long)l->grid);
    s->veto[m] = why;
    if (s->opt.debug >= 1) fprintf(stderr, "> %s: kernel %d: %s; its band tiles do not wait for each other\n", s->be->name, m, why);
    (*vetoed)++;
  }
  return KILN_OK;
}

/* One opaque stage on the host: its operands come to the host, ref evaluates each of its
 * stages, stored ones go back. Counted in the census. String tensors are read and written
 * in place. */
static kiln_status run_host_kernel(Schedule *s, const Kernel *k, kiln_census *c) {
  const TE *te = s->te;
  kiln_status st = dev_sync(s, "host fallback");
  const void **bufs = kiln_calloc((size_t)te->n_stages + 1, sizeof *bufs);
  bool *mine = kiln_calloc((size_t)te->n_stages + 1, sizeof *mine);  /* bufs[s] is a temporary */
  if (!bufs || !mine) st = kiln_fail(KILN_ERR_NO_MEMORY, "%s: no memory for a host fallback", s->be->name);
  for (int i = 0; !st && i < te->n_stages; i++)  /* constants the plan bakes into source have no buffer */
    if (te->stages[i].kind == ST_CONST) bufs[i] = te->stages[i].data;
  for (int j = 0; j < k->n_ins && !st; j++) {
    int i = k->ins[j];
    int64_t n = stage_bytes(&te->stages[i]);
    if (te->stages[i].kind == ST_CONST) continue;  /* on the host already */
    if (s->str[i] || s->be->host_memory) { bufs[i] = s->str[i] ? (void *)s->str[i] : host_ptr(s->buf[i]); continue; }
    void *h = kiln_malloc((size_t)(n > 0 ? n : 1));
    if (!h) { st = kiln_fail(KILN_ERR_NO_MEMORY, "%s: no memory for a host fallback", s->be->name); break; }
    bufs[i] = h, mine[i] = true;
    st = mem_download(s, h, s->buf[i], n, te->stages[i].name, c);
    if (!st) st = dev_sync(s, "host fallback");
  }
  for (int j = 0; j < k->n_items && !st; j++) {
    int i = k->items[j].stage;
    const Stage *S = &te->stages[i];
    int64_t n = stage_bytes(S);
    bool in_place = s->str[i] || (s->be->host_memory && s->buf[i]);
    void *h = s->str[i] ? (void *)s->str[i] : in_place ? host_ptr(s->buf[i]) : kiln_malloc((size_t)(n > 0 ? n : 1));
    if (!h) { st = kiln_fail(KILN_ERR_NO_MEMORY, "%s: no memory for a host fallback", s->be->name); break; }
    bufs[i] = h, mine[i] = !in_place;
    st = ref_eval_stage_strings(te, i, bufs, h, &s->strings);
    fallback_note(s, S, c);
    if (!st && !in_place && s->buf[i]) st = mem_upload(s, s->buf[i], h, n, S->name, c);
    if (!st && !in_place) st = dev_sync(s, "host fallback");
  }
  for (int i = 0; mine && i < te->n_stages; i++)
    if (mine[i]) kiln_free((void *)bufs[i]);
  kiln_free(bufs);
  kiln_free(mine);
  return st;
}

static kiln_status enqueue_assigns(Schedule *s) {
  const TE *te = s->te;
  kiln_status st = KILN_OK;
  for (int a = 0; a < te->n_assigns && !st; a++)
    if (s->assign_tmp[a])
      st = mem_copy(s, s->assign_tmp[a], s->buf[te->assigns[a].value], stage_bytes(&te->stages[te->assigns[a].value]),
                    te->stages[te->assigns[a].value].name);
  for (int a = 0; a < te->n_assigns && !st; a++) {
    const Assign *A = &te->assigns[a];
    RtBuf from = s->assign_tmp[a] ? s->assign_tmp[a] : s->buf[A->value];
    st = mem_copy(s, s->buf[A->param], from, stage_bytes(&te->stages[A->param]), te->stages[A->param].name);
  }
  return st;
}

/* Every kernel in plan order (c NULL: while recording, where no host kernel can be). */
static kiln_status enqueue_kernels(Schedule *s, kiln_census *c) {
  kiln_status st = KILN_OK;
  for (int i = 0, b = 0; i < s->n_launch && !st; i++) {
    Launch *L = &s->launch[i];
    if (s->n_bucket && (st = join_buckets(s, i))) break;
    if (L->l->collective) {  /* in a bucket, or alone a copy (the mean over one rank) */
      int v = s->plan->kernels[L->l->kernel].anchor;
      if (!s->n_bucket) st = mem_copy(s, s->buf[v], s->buf[s->te->stages[v].src[0]], stage_bytes(&s->te->stages[v]), "a collective");
      else if (b < s->n_bucket && s->bucket[b].start == i) st = start_bucket(s, b++);
      continue;
    }
    if (L->l->host) {
      if (c) st = run_host_kernel(s, &s->plan->kernels[L->l->kernel], c);
      continue;
    }
    if (L->l->group >= 0) {  /* the group runs at its last member */
      Launch *G = &s->group[L->l->group];
      if (G->at != i) continue;
      L = G;
    }
    if (L->l->grid <= 0) continue;
    double t0 = s->prof ? now_ms() : 0;
    if (L->lib) st = s->be->library_run(s->dev, L->lib);
    else {
      if (s->be->host_memory)  /* the caller's buffers move from run to run */
        for (int j = 0; j < L->l->n_params; j++) L->args[j] = s->buf[L->l->params[j]];
      st = s->be->launch(s->dev, L->fn, L->l->kernel < 0 ? &L->run : L->l, L->args);
    }
    if (s->prof && !st && !(st = dev_sync(s, "profile")))
      s->prof[(int64_t)i * PROFILE_RUNS + s->prof_runs % PROFILE_RUNS] = now_ms() - t0;
  }
  if (!st && s->n_bucket) st = join_buckets(s, s->n_launch);
  if (s->prof && c) s->prof_runs++;
  return st;
}

/* An output that is an assigned param must be read before the assign: then the assigns
 * stay out of the recording and run after the outputs are copied. */
static bool output_is_assigned(const TE *te) {
  for (int i = 0; i < te->n_outputs; i++)
    for (int a = 0; a < te->n_assigns; a++)
      if (te->assigns[a].param == te->outputs[i]) return true;
  return false;
}

static kiln_status record(Schedule *s) {
  kiln_status st = s->be->record_begin(s->dev);
  if (st) return st;
  kiln_status est = enqueue_kernels(s, NULL);
  if (!est && s->assigns_after_kernels) est = enqueue_assigns(s);
  st = s->be->record_end(s->dev, &s->graph);
  return est ? est : st;
}

/* ---- compile ---- */

/* The cpu library GEMM's cost rule: products of at least 2^20 multiply-adds (raced on this
 * cpu: bench/results/2026-12-02-cpu-gemm.md). */
#define CPU_LIBRARY_WORK 1048576.0

int rt_cpu_lanes(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return 16;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 8;
#endif
  return 0;
}

void rt_plan_renderer(const kiln_options *o, const Dialect *d, const CgOptions *g, PlanOptions *po) {
  /* pools in their convolution's epilogue, expansions in their reader's planes: the C dialect's
   * direct convolutions take them */
  if (d && !d->grid && d->tile && o->cpu_pool) po->pool_ok = cg_cpu_pool_ok, po->pool_ctx = g;
  if (d && !d->grid && d->tile && o->cpu_expand) po->expand_ok = cg_cpu_expand_ok, po->pool_ctx = g;
  /* rows at the head of a GEMM's tiles: rt_codegen_options turns them on where the dialect has them */
  if (g && g->gemm_heads) po->head_ok = cg_gemm_head_ok, po->pool_ctx = g;
}

kiln_status rt_codegen_options(const kiln_options *o, const Dialect *d, CgOptions *g) {
  *g = cg_options_default();
  const bool cuda = d && d->name && !strcmp(d->name, "cuda");  /* where the H200 races chose the -1 defaults */
  g->row_variant = cg_row_variant(o->cuda_row);
  if (g->row_variant < 0)
    return kiln_fail(KILN_ERR_INVALID_ARG, "cuda_row ($KILN_CUDA_ROW) '%s' names no row variant (base, warp, vec, wvec, "
                     "p16, p16vec, long, wveclong, or empty for auto)", o->cuda_row);
  g->splitk = o->cuda_splitk == 0 ? CG_SPLITK_OFF : o->cuda_splitk == 2 ? CG_SPLITK_WIDE : CG_SPLITK_ON;
  /* split-K and split rows keep partials in module-scope device arrays: a dialect without
   * them (glsl) does neither */
  if (d && d->grid && !d->global_qual) g->splitk = CG_SPLITK_OFF;
  g->gemm_kgroups = o->gemm_kgroups != 0;
  /* tensor cores where the dialect has mma: 16-bit operands unless turned off, f32 only under tf32 */
  g->mma_half = o->tensor_cores && d && d->mma[CG_MMA_BF16];
  g->mma_tf32 = o->tf32 && d && d->mma[CG_MMA_TF32];
  g->mma_direct = d && d->cp_async && (o->tensor_cores == 1 || o->tensor_cores == 3);
  g->mma_many_blocks = o->tensor_cores == 3;
  if (o->cuda_wgmma < 0 || o->cuda_wgmma > 1)
    return kiln_fail(KILN_ERR_INVALID_ARG, "cuda_wgmma ($KILN_CUDA_WGMMA) is %d: 0 off (the default), 1 Hopper's warpgroup "
                     "MMA for 16-bit products", o->cuda_wgmma);
  g->wgmma = o->cuda_wgmma == 1 && g->mma_direct && d->wgmma_define;
  /* read by the cuda backend when the program opens (cuda.c), which is before this: checked here for every backend */
  if (o->cuda_lt_algos < 0 || o->cuda_lt_algos > RT_LT_MAX_ALGOS)
    return kiln_fail(KILN_ERR_INVALID_ARG, "cuda_lt_algos ($KILN_CUDA_LT_ALGOS) is %d: 0 or 1 the heuristic's first "
                     "algorithm (the default), up to %d timed at load", o->cuda_lt_algos, RT_LT_MAX_ALGOS);
  if (o->cuda_mma_k != 0 && o->cuda_mma_k != 32 && o->cuda_mma_k != 64 && o->cuda_mma_k != 128)
    return kiln_fail(KILN_ERR_INVALID_ARG, "cuda_mma_k ($KILN_CUDA_MMA_K) is %d: 0 the default, or 32, 64 or 128", o->cuda_mma_k);
  g->mma_small_k = o->cuda_mma_k ? o->cuda_mma_k : 32;
  g->mma_round_late = o->cuda_mma_late_round != 0;
  if (o->cuda_long_k_blocks < -1 || o->cuda_long_k_blocks > 1 << 16)
    return kiln_fail(KILN_ERR_INVALID_ARG, "cuda_long_k_blocks ($KILN_CUDA_LONG_K_BLOCKS) is %d: -1 the default, 0 off, "
                     "else 1 .. 65536", o->cuda_long_k_blocks);
  /* -1: 256 on cuda, what the H200 race chose over copied tiles (bench/results/2026-12-04-h200-copies.md:
   * mlp_fwd_b4096_bf16 0.943, mlp_train_b1024 0.976, nothing slower than 1.002) */
  g->gemm_long_k_blocks = o->cuda_long_k_blocks >= 0                          ? o->cuda_long_k_blocks
                          : cuda ? 256 : 0;
  /* column rows where the H200 race chose them (bench/results/2026-12-04-h200-bf16-library.md:
   * mlp_train_b1024 0.951, its bf16 autocast 0.905, nothing slower); the glsl dialect's stay off
   * until a race on Vulkan says */
  if (o->column_rows < -1 || o->column_rows > 2)
    return kiln_fail(KILN_ERR_INVALID_ARG, "column_rows ($KILN_COLUMN_ROWS) is %d: -1 the default, 0 off, 1 on, 2 on in "
                     "blocks of at most 256 threads", o->column_rows);
  /* cuda: 2, the H200 race (mlp_train_b1024 0.914: its bias gradients join launch groups) */
  g->column_rows = o->column_rows >= 0 ? o->column_rows : cuda ? 2 : 0;
  g->library = o->cublaslt != 0;
  g->library_all = o->cublaslt == 2;
  /* loop dialects (cpu): the packed micro-kernel wins from small products on (this cpu's race) */
  if (!d->grid) g->library_work = CPU_LIBRARY_WORK, g->loop_library = true;
  g->cpu_tiles = !d->grid && o->cpu_tiles;
  g->cpu_windows = !d->grid && o->cpu_windows;
  if (o->cpu_direct < 0 || (o->cpu_direct > 2 && o->cpu_direct != 8 && o->cpu_direct != 16))
    return kiln_fail(KILN_ERR_INVALID_ARG, "cpu_direct ($KILN_CPU_DIRECT) is %d: 0 off, 1 the host's vectors, 2 the host's "
                     "vectors without flat planes, 8 or 16 that many lanes", o->cpu_direct);
  g->cpu_lanes = d->grid || !o->cpu_direct ? 0 : o->cpu_direct <= 2 ? rt_cpu_lanes() : o->cpu_direct;
  g->cpu_rows_only = o->cpu_direct == 2;
  g->cpu_expand_all = o->cpu_expand == 2;
  if (o->cpu_channel_lanes < 0 || o->cpu_channel_lanes > 2)
    return kiln_fail(KILN_ERR_INVALID_ARG, "cpu_channel_lanes ($KILN_CPU_CHANNEL_LANES) is %d: 0 never, 1 where the cost "
                     "model says, 2 wherever it can", o->cpu_channel_lanes);
  g->cpu_channel_lanes = d->grid ? 0 : o->cpu_channel_lanes;
  if (o->cpu_run_ends < 0 || o->cpu_run_ends > 1)
    return kiln_fail(KILN_ERR_INVALID_ARG, "cpu_run_ends ($KILN_CPU_RUN_ENDS) is %d: 0 masked runs, 1 runs from their ends",
                     o->cpu_run_ends);
  g->cpu_run_ends = !d->grid && o->cpu_run_ends;
  if (o->cpu_pixel_panels < 0 || o->cpu_pixel_panels > 1)
    return kiln_fail(KILN_ERR_INVALID_ARG, "cpu_pixel_panels ($KILN_CPU_PANELS) is %d: 0 in place or the plane, 1 panels of "
                     "a task's pixels", o->cpu_pixel_panels);
  g->cpu_pixel_panels = !d->grid && o->cpu_pixel_panels;
  if (o->cpu_cols_once < 0 || o->cpu_cols_once > 1)
    return kiln_fail(KILN_ERR_INVALID_ARG, "cpu_cols_once ($KILN_CPU_COLS_ONCE) is %d: 0 packed every run, 1 constant "
                     "columns laid out once", o->cpu_cols_once);
  g->cpu_cols_once = !d->grid && o->cpu_cols_once;
  if (o->cpu_winograd < 0 || o->cpu_winograd > 2)
    return kiln_fail(KILN_ERR_INVALID_ARG, "cpu_winograd ($KILN_CPU_WINOGRAD) is %d: 0 never, 1 where the cost model says, "
                     "2 wherever it can", o->cpu_winograd);
  g->cpu_winograd = d->grid ? 0 : o->cpu_winograd;
  if (o->cpu_nested_sums < 0 || o->cpu_nested_sums > 1)
    return kiln_fail(KILN_ERR_INVALID_ARG, "cpu_nested_sums ($KILN_CPU_NESTED_SUMS) is %d: 0 one flat loop a sum, 1 its "
                     "leading vars nested", o->cpu_nested_sums);
  g->cpu_nested_sums = !d->grid && o->cpu_nested_sums;
  if (o->cpu_split_digits < 0 || o->cpu_split_digits > 1)
    return kiln_fail(KILN_ERR_INVALID_ARG, "cpu_split_digits ($KILN_CPU_SPLIT_DIGITS) is %d: 0 one loop a var, 1 its digits "
                     "where an operand reads it apart", o->cpu_split_digits);
  g->cpu_split_digits = !d->grid && o->cpu_split_digits;
  if (o->grid_sync < -1 || o->grid_sync > 3)
    return kiln_fail(KILN_ERR_INVALID_ARG, "grid_sync ($KILN_GRID_SYNC) is %d: -1 the default, 0 off, 1 sibling kernels "
                     "share a launch, 2 also dependent ones across grid barriers, 3 as 2 with GEMM phases waiting for "
                     "their band of rows", o->grid_sync);
  /* the default is what the H200 race chose (bench/results/2026-12-01-h200-grid-sync.md):
   * siblings on grid dialects; loop dialects gain nothing from fewer calls, so none */
  g->group = o->grid_sync >= 0 ? (CgGroupMode)o->grid_sync : d && d->grid ? CG_GROUP_SIBLINGS : CG_GROUP_OFF;
  if (d && d->grid && !d->phase_prefix) g->group = CG_GROUP_OFF;  /* a dialect without launch groups (glsl) */
  /* a dialect without warp reductions (glsl) renders a block per row; without dynamic shared
   * memory, long rows in registers alone (cg_row_variant_of) */
  if (d && d->grid) g->warp_rows = d->warp_reduce != NULL, g->smem_rows = d->dyn_shared != NULL;
  g->in_place = o->in_place != 0;
  if (o->cuda_pdl < -1 || o->cuda_pdl > 2)
    return kiln_fail(KILN_ERR_INVALID_ARG, "cuda_pdl ($KILN_CUDA_PDL) is %d: -1 the default, 0 off, 1 the kernel after "
                     "launched at once, 2 as this one's blocks exit", o->cuda_pdl);
  /* -1: 2 on cuda, the H100 race (bench/results/2026-12-06-h100-pdl-stages.md: mlp_train_b32 0.941, mlp_fwd_b128
   * 0.961, cnn_train_b32 0.960, nothing slower; 1 ran cnn_train_b32 1.113) */
  g->dependent_launch = o->cuda_pdl >= 0 ? o->cuda_pdl : cuda ? 2 : 0;
  if (o->cuda_gemm_stages && o->cuda_gemm_stages != 1 && o->cuda_gemm_stages != 2 && o->cuda_gemm_stages != 4)
    return kiln_fail(KILN_ERR_INVALID_ARG, "cuda_gemm_stages ($KILN_CUDA_GEMM_STAGES) is %d: 0 the default, or 1, 2 or 4 "
                     "k-tiles in flight", o->cuda_gemm_stages);
  if (o->cuda_gemm_stages) g->gemm_stages = o->cuda_gemm_stages;
  if (o->cuda_vec_reads < -1 || o->cuda_vec_reads > 2)
    return kiln_fail(KILN_ERR_INVALID_ARG, "cuda_vec_reads ($KILN_CUDA_VEC_READS) is %d: -1 the default, 0 off, 1 on, "
                     "2 also runs across contiguous vars", o->cuda_vec_reads);
  /* a dialect with 16-byte vectors, built by braces (float4{ .. }), that views arrays as other
   * shapes: cuda (not glsl's rows of vec4);
   * on by default, what the H200 race chose (bench/results/2026-12-04-h200-vec-reads.md:
   * mlp_train_b1024 0.929, mlp_train_b32 0.956, the mlp forwards 0.966, nothing slower) */
  g->gemm_vec = o->cuda_vec_reads != 0 && d && d->grid && d->vec4_type && !d->no_views ? (o->cuda_vec_reads == 2 ? 2 : 1) : 0;
  g->cluster_splitk = o->cuda_cluster && d && d->cluster_dims;
  if (o->cuda_copy_stages < -1 || o->cuda_copy_stages == 1 || o->cuda_copy_stages > 4)
    return kiln_fail(KILN_ERR_INVALID_ARG, "cuda_copy_stages ($KILN_CUDA_COPY_STAGES) is %d: -1 the default, 0 off, or 2, 3 "
                     "or 4 k-tiles copied ahead", o->cuda_copy_stages);
  /* vector reads are what a 16-byte copy takes; -1: 2 stages, what the H200 race chose
   * (bench/results/2026-12-04-h200-copies.md: the shared mlp 0.863, encoder4_d256 0.932, mlp_fwd_b128
   * 0.936, gpt_tiny 0.940; 4 stages split mlp_train_b1024's launch group, 1.043) */
  g->gemm_copies = g->gemm_vec && d->cp_async && o->cuda_copy_stages != 0 ? (o->cuda_copy_stages > 0 ? o->cuda_copy_stages : 2) : 0;
  if (o->cuda_one_fence < -1 || o->cuda_one_fence > 2)
    return kiln_fail(KILN_ERR_INVALID_ARG, "cuda_one_fence ($KILN_CUDA_ONE_FENCE) is %d: -1 the default, 0 off, 1 on, "
                     "2 one acquire-release count", o->cuda_one_fence);
  /* -1: one acquire-release count where the dialect has one (else a fenced count), the H200 race
   * (bench/results/2026-12-04-h200-copies.md: mlp_fwd_b128 0.961, convnet_mini 0.967, nothing slower
   * than 1.016) */
  g->one_fence = o->cuda_one_fence < 0 ? 2 : o->cuda_one_fence;
  if (o->cuda_pair_warps < -1 || o->cuda_pair_warps > 1 << 30)
    return kiln_fail(KILN_ERR_INVALID_ARG, "cuda_pair_warps ($KILN_CUDA_PAIR_WARPS) is %d: -1 the default, 0 never, else "
                     "the rows from which a narrow pair takes a warp a row (at most 2^30)", o->cuda_pair_warps);
  /* -1: from 512 rows on cuda, the H200 race (mlp_train_b1024's 1024 rows 0.958; from 1 row,
   * mlp_train_b32's 32 rows ran 1.041 and the shared mlp's 1 row 1.303: few rows want a block each) */
  g->pair_warps = o->cuda_pair_warps > 0 ? o->cuda_pair_warps
                  : o->cuda_pair_warps < 0 && cuda ? 512 : 0;
  if (o->cuda_pair_bands < -1 || o->cuda_pair_bands > 3)
    return kiln_fail(KILN_ERR_INVALID_ARG, "cuda_pair_bands ($KILN_CUDA_PAIR_BANDS) is %d: -1 the default, 0 off, 1 on, 2 "
                     "every tile its columns of the band's rows (cooperative), 3 the same launched as any kernel",
                     o->cuda_pair_bands);
  /* -1: shared bands met by flags (3), the H100 race (2026-12-06, wide pairs on): encoder4_d256 0.919 with
   * 28 -> 24 launches, gpt_tiny 1.017 with 16 -> 12; met at a barrier (2) 0.988 and 1.155 */
  g->pair_bands = !cuda ? 0 : o->cuda_pair_bands < 0 ? 3 : o->cuda_pair_bands;
  if (o->cuda_group_blocks < -1 || o->cuda_group_blocks > 32)
    return kiln_fail(KILN_ERR_INVALID_ARG, "cuda_group_blocks ($KILN_CUDA_GROUP_BLOCKS) is %d: -1 the default, 0 no ask, "
                     "else 1 .. 32 blocks a multiprocessor", o->cuda_group_blocks);
  g->group_blocks = o->cuda_group_blocks > 0 ? o->cuda_group_blocks : 0;
  if (o->cuda_tile_fit < 0 || o->cuda_tile_fit > 1)
    return kiln_fail(KILN_ERR_INVALID_ARG, "cuda_tile_fit ($KILN_CUDA_TILE_FIT) is %d: 0 off, 1 on", o->cuda_tile_fit);
  g->gemm_tile_fit = o->cuda_tile_fit == 1;
  if (o->cuda_small_k < -1 || o->cuda_small_k > 4096)
    return kiln_fail(KILN_ERR_INVALID_ARG, "cuda_small_k ($KILN_CUDA_SMALL_K) is %d: -1 the default, 0 below 4 points, "
                     "else 1 .. 4096 points", o->cuda_small_k);
  /* -1: 16 on cuda, the H200 race (bench/results/2026-12-05-h200-small-k.md: cnn_train_b32 0.989) */
  if (cuda && o->cuda_small_k != 0) g->gemm_small_k = o->cuda_small_k > 0 ? o->cuda_small_k : 16;
  if (o->cuda_chain_mma < 0 || o->cuda_chain_mma > 4)
    return kiln_fail(KILN_ERR_INVALID_ARG, "cuda_chain_mma ($KILN_CUDA_CHAIN_MMA) is %d: 0 off, 1 the rows in shared "
                     "memory, 2 the rows in fragments, 3 and 4 with each tile's keys over 2 and 4 warps", o->cuda_chain_mma);
  g->chain_mma = cuda ? o->cuda_chain_mma : 0;
  if (o->gemm_heads < -1 || o->gemm_heads > 3)
    return kiln_fail(KILN_ERR_INVALID_ARG, "gemm_heads ($KILN_GEMM_HEADS) is %d: -1 the default, 0 off, 1 on, 2 on with "
                     "the headed GEMM whole along K, 3 as 2 with clusters of column tiles sharing the rows", o->gemm_heads);
  /* cuda: group reductions (a row over a group of lanes) and 16-byte shared rows; -1: off, what the H100
   * races chose (bench/results/2026-12-06-h100-gemm-heads.md: gpt_tiny 1.15x slower at best); 3 needs
   * clusters (else 2) */
  g->gemm_heads = cuda && d->group_reduce && d->vec4_type && !d->no_views && o->gemm_heads > 0 ? o->gemm_heads : 0;
  if (g->gemm_heads == 3 && (!d->cluster_dims || !d->cluster_load || !d->cluster_sync)) g->gemm_heads = 2;
  if (o->cuda_narrow_depth < -1 || o->cuda_narrow_depth > 1 << 20)
    return kiln_fail(KILN_ERR_INVALID_ARG, "cuda_narrow_depth ($KILN_CUDA_NARROW_DEPTH) is %d: -1 the default, 0 never, else "
                     "the points from which a narrow contraction takes a warp a row (at most 2^20)", o->cuda_narrow_depth);
  /* cuda: warp reductions and shared memory; -1: never until a race says */
  g->narrow_depth = cuda && d->warp_reduce && d->shared_qual && o->cuda_narrow_depth > 0 ? o->cuda_narrow_depth : 0;
  if (o->cuda_pair_stage < -1 || o->cuda_pair_stage > 2)
    return kiln_fail(KILN_ERR_INVALID_ARG, "cuda_pair_stage ($KILN_CUDA_PAIR_STAGE) is %d: -1 the default, 0 off, 1 a warp a "
                     "row, 2 also a block a row", o->cuda_pair_stage);
  /* -1: 1 on cuda, the H100 race (mlp_train_b1024 0.961, its bf16 autocast 0.981, nothing slower than 1.009);
   * 2, the block form (mlp_train_b32's 32 rows), not yet raced */
  g->pair_stage = cuda && d->shared_qual ? (o->cuda_pair_stage < 0 ? 1 : o->cuda_pair_stage) : 0;
  if (o->cuda_kg_sum < 0 || o->cuda_kg_sum > 1)
    return kiln_fail(KILN_ERR_INVALID_ARG, "cuda_kg_sum ($KILN_CUDA_KG_SUM) is %d: 0 the tree of barriers, 1 one barrier",
                     o->cuda_kg_sum);
  /* 0 by default: the H100 race found one barrier no faster (the tree 0.992 - 1.007 against it) */
  g->gemm_kg_tree = o->cuda_kg_sum == 0;
  if (o->cuda_chain_spread < -1 || o->cuda_chain_spread > 1)
    return kiln_fail(KILN_ERR_INVALID_ARG, "cuda_chain_spread ($KILN_CUDA_CHAIN_SPREAD) is %d: -1 the default, 0 four rows a "
                     "thread, 1 as few as fill the block", o->cuda_chain_spread);
  /* -1: on for cuda, the H100 race (gpt_tiny 0.969, encoder4_d256 0.974, nothing slower than 1.000) */
  g->chain_spread = cuda && o->cuda_chain_spread != 0;
  if (o->cuda_split_flags < 0 || o->cuda_split_flags > 1)
    return kiln_fail(KILN_ERR_INVALID_ARG, "cuda_split_flags ($KILN_CUDA_SPLIT_FLAGS) is %d: 0 an arrival count, 1 the spans' "
                     "flags", o->cuda_split_flags);
  g->split_flags = cuda && d->flag_done && d->band_meet && o->cuda_split_flags == 1;
  if (o->cuda_min_span < 0 || o->cuda_min_span > 64)
    return kiln_fail(KILN_ERR_INVALID_ARG, "cuda_min_span ($KILN_CUDA_MIN_SPAN) is %d: 0 the default, or 1 .. 64 k-tiles a span",
                     o->cuda_min_span);
  g->min_span_tiles = cuda ? o->cuda_min_span : 0;
  if (o->cuda_split_target != 0 && (o->cuda_split_target < 64 || o->cuda_split_target > 4096))
    return kiln_fail(KILN_ERR_INVALID_ARG, "cuda_split_target ($KILN_CUDA_SPLIT_TARGET) is %d: 0 the default, or 64 .. 4096 "
                     "blocks", o->cuda_split_target);
  g->split_target = cuda ? o->cuda_split_target : 0;
  if (o->cuda_thin_spans < -1 || (o->cuda_thin_spans > 0 && (o->cuda_thin_spans < 32 || o->cuda_thin_spans > 128)))
    return kiln_fail(KILN_ERR_INVALID_ARG, "cuda_thin_spans ($KILN_CUDA_THIN_SPANS) is %d: -1 the default, 0 off, or 32 .. 128 "
                     "spans", o->cuda_thin_spans);
  /* by default 128 on cuda, what the race chose (H100, one round: cnn_train_b32 0.972, its conv1 weight
   * gradient in 112 spans; at 64 spans, 61 blocks of 13 k-tiles, 1.033 slower) */
  g->thin_spans = !cuda ? 0 : o->cuda_thin_spans < 0 ? 128 : o->cuda_thin_spans;
  if (o->row_values < -1 || o->row_values > 1)
    return kiln_fail(KILN_ERR_INVALID_ARG, "row_values ($KILN_ROW_VALUES) is %d: -1 the default, 0 loads kept, 1 whole values",
                     o->row_values);
  /* -1: on for cuda, with the row fill (H100, two calls: bert_layer_b8s128_bf16 0.975 and 0.979, its layernorms
   * 6.15 -> 5.74 and 6.41 -> 5.63 us by ncu, the rest level); vulkan has not raced it */
  g->row_values = o->row_values == 1 || (o->row_values == -1 && cuda);
  if (o->nan_fold < 0 || o->nan_fold > 1)
    return kiln_fail(KILN_ERR_INVALID_ARG, "nan_fold ($KILN_NAN_FOLD) is %d: 0 off, 1 a max or min row's NaN flag in its "
                     "value's reduction", o->nan_fold);
  g->nan_fold = o->nan_fold == 1;
  if (o->excess_precision < -1 || o->excess_precision > 1)
    return kiln_fail(KILN_ERR_INVALID_ARG, "excess_precision ($KILN_EXCESS_PRECISION) is %d: -1 the default, 0 every 16-bit "
                     "operation rounds, 1 rounded where stored", o->excess_precision);
  /* -1: on for cuda (H100, 3 rounds a call: bert_layer_b8s128_bf16 fused 0.965 and eager 0.971, its error
   * against f32 0.0077 -> 0.0043; the other bf16 rows level) and for cpu (this session's 2-core Xeon, 5
   * alternating rounds: layernorm_4096x768_bf16 0.34, softmax_4096x1024_bf16 0.47, bert_layer_b8s128_bf16
   * 0.96, every bf16 row faster); vulkan has not raced it */
  const bool cpu = d && d->name && !strcmp(d->name, "c");
  g->excess_precision = o->excess_precision == 1 || (o->excess_precision == -1 && (cuda || cpu));
  if (o->cuda_row_fill < -1 || (o->cuda_row_fill > 0 && (o->cuda_row_fill < 64 || o->cuda_row_fill > 65536)))
    return kiln_fail(KILN_ERR_INVALID_ARG, "cuda_row_fill ($KILN_CUDA_ROW_FILL) is %d: -1 the default (8192), 0 off, or "
                     "64 .. 65536 warps", o->cuda_row_fill);
  g->row_fill = !cuda ? 0 : o->cuda_row_fill == -1 ? 8192 : o->cuda_row_fill;
  if (o->cuda_row_half < -1 || o->cuda_row_half > 1)
    return kiln_fail(KILN_ERR_INVALID_ARG, "cuda_row_half ($KILN_CUDA_ROW_HALF) is %d: -1 the default (1), 0 off, 1 on",
                     o->cuda_row_half);
  g->row_half = cuda && o->cuda_row_half != 0;
  if (o->cuda_chain_prefetch < 0 || o->cuda_chain_prefetch > 1)
    return kiln_fail(KILN_ERR_INVALID_ARG, "cuda_chain_prefetch ($KILN_CUDA_CHAIN_PREFETCH) is %d: 0 off, 1 the next tile's "
                     "queries copied during this one", o->cuda_chain_prefetch);
  g->chain_prefetch = cuda && o->cuda_chain_prefetch == 1;
  if (o->cuda_chain_blocks < 0 || o->cuda_chain_blocks > 8)
    return kiln_fail(KILN_ERR_INVALID_ARG, "cuda_chain_blocks ($KILN_CUDA_CHAIN_BLOCKS) is %d: 0 the default (4), or 1 .. 8 "
                     "blocks a multiprocessor", o->cuda_chain_blocks);
  g->chain_sm_blocks = cuda ? o->cuda_chain_blocks : 0;
  int cl = o->cuda_chain_lanes;
  if (cl != 0 && cl != 4 && cl != 8 && cl != 16 && cl != 32)
    return kiln_fail(KILN_ERR_INVALID_ARG, "cuda_chain_lanes ($KILN_CUDA_CHAIN_LANES) is %d: 0 the default (32), or 4, 8, 16 "
                     "or 32 lanes a row", cl);
  g->chain_lanes = cuda && cl ? cl : 32;
  if (o->row_sums < -1 || o->row_sums > 1)
    return kiln_fail(KILN_ERR_INVALID_ARG, "row_sums ($KILN_ROW_SUMS) is %d: -1 the default, 0 off, 1 on", o->row_sums);
  if (o->pair_tails < -1 || o->pair_tails > 1)
    return kiln_fail(KILN_ERR_INVALID_ARG, "pair_tails ($KILN_PAIR_TAILS) is %d: -1 the default, 0 off, 1 on", o->pair_tails);
  if (o->cuda_split_rows < 0 || o->cuda_split_rows > 1 << 20 || o->cuda_split_blocks < 0 || o->cuda_split_blocks > 1 << 20)
    return kiln_fail(KILN_ERR_INVALID_ARG, "cuda_split_rows/cuda_split_blocks ($KILN_CUDA_SPLIT_ROWS, $KILN_CUDA_SPLIT_BLOCKS) "
                     "are %d and %d: 0 the default, else 1 .. 2^20", o->cuda_split_rows, o->cuda_split_blocks);
  if (o->cuda_split_rows) g->split_rows_below = o->cuda_split_rows;
  if (o->cuda_split_blocks) g->split_blocks = o->cuda_split_blocks;
  if (o->index32 < -1 || o->index32 > 1)
    return kiln_fail(KILN_ERR_INVALID_ARG, "index32 ($KILN_INDEX32) is %d: -1 the default, 0 off, 1 on", o->index32);
  g->index32 = o->index32 >= 0 ? o->index32 == 1 : d && d->grid;
  g->lazy_select = o->lazy_select != 0;
  return KILN_OK;
}

/* A build error that names a kernel ("kiln_k3") gets the ops of that kernel in front, in the
 * words strict mode uses: what the user can find in the model. */
static void name_kernel_ops(const Schedule *s) {
  const char *at = strstr(kiln_last_error(), "kiln_k");
  long k = at ? strtol(at + 6, NULL, 10) : -1;
  if (!s->plan || k < 0 || k >= s->plan->n_kernels) return;
  const Kernel *kn = &s->plan->kernels[k];
  char ops[240];
  size_t used = 0;
  int shown = 0;
  ops[0] = 0;
  for (int i = 0; i < kn->n_items && shown < 3 && used < sizeof ops; i++) {
    const Stage *S = &s->te->stages[kn->items[i].stage];
    if (S->op < 0) continue;
    used += (size_t)snprintf(ops + used, sizeof ops - used, "%s%s (t%d '%s')", shown++ ? ", " : "", op_name(S), S->id,
                             S->name ? S->name : "");
  }
  if (shown) kiln_error_prefix("op%s %s%s: ", shown > 1 ? "s" : "", ops, shown < kn->n_items ? " ..." : "");
}

static kiln_status compile_plan(Schedule *s) {
  CgOptions co;
  PlanOptions po = plan_options(&s->opt);
  kiln_status st = rt_codegen_options(&s->opt, s->be->dialect, &co);
  if (!s->be->library_prepare) co.library = false;  /* nothing to offer a GEMM to (vulkan) */
  rt_plan_renderer(&s->opt, s->be->dialect, &co, &po);
  if (!st) st = plan_build(s->te, &po, &s->plan);
  if (!st && s->opt.debug >= 1) {
    fprintf(stderr, "> plan (%s):\n", s->be->name);
    plan_print(s->plan, stderr);
  }
  if (!st) st = check_caps_now(s);  /* before anything is rendered, compiled or allocated */
  if (!st && !(s->veto = kiln_calloc((size_t)s->plan->n_kernels + 1, sizeof *s->veto)))
    st = kiln_fail(KILN_ERR_NO_MEMORY, "%s: out of memory", s->be->name);
  co.group_veto = s->veto;
  /* adaptive group bounds (cuda_group_blocks -1): the budget asks for them */
  if (!st && s->opt.cuda_group_blocks < 0 && !(s->bounds = kiln_calloc((size_t)s->plan->n_kernels + 1, sizeof *s->bounds)))
    st = kiln_fail(KILN_ERR_NO_MEMORY, "%s: out of memory", s->be->name);
  co.group_bounds = s->bounds;
  /* render and build until every launch group fits its device (each pass vetoes a group or changes an ask) */
  for (int vetoed = 1, asked = 0; !st && (vetoed || asked);) {
    if (s->module) s->be->unload(s->dev, s->module), s->module = NULL;
    cg_program_free(s->cg), s->cg = NULL;
    st = cg_program_build(s->plan, s->be->dialect, &co, &s->cg);
    if (!st && s->opt.debug >= 2) fprintf(stderr, "> source (%s):\n%s\n", s->be->dialect->name, s->cg->source.s);
    if (!st) {
      st = s->be->build(s->dev, s->cg->source.s, s->cg->source.len, &s->opt, &s->module, &s->cache_hit);
      if (st && !(s->cg->n_group > 0 && !s->n_rebuilds)) name_kernel_ops(s);  /* else built again below */
    }
    if (st && s->cg && s->cg->n_group > 0 && !s->n_rebuilds) {
      /* a grouped program the compiler refuses (a resource the estimate missed): once more,
       * every kernel on its own, the compiler's words kept as the reason */
      char *why = arena_alloc(&s->veto_text, 160);
      if (!why) return kiln_fail(KILN_ERR_NO_MEMORY, "%s: out of memory", s->be->name);
      snprintf(why, 160, "budget: the grouped source did not build (%.100s)", kiln_last_error());
      for (int m = 0; m < s->cg->n_launch; m++)
        if (s->cg->launch[m].group >= 0) s->veto[m] = why;
      if (s->opt.debug >= 1) fprintf(stderr, "> %s: %s; building without groups\n", s->be->name, why);
      st = KILN_OK, vetoed = 1, s->n_rebuilds++;
      continue;
    }
    if (!st) st = check_groups(s, &vetoed, &asked);
    if (vetoed) s->n_rebuilds++;
    if (asked) s->n_asked++;
  }
  if (!st && s->opt.debug >= 1) cg_program_print(s->cg, stderr);
  if (!st) st = place_buffers(s);
  if (!st) st = bind_launches(s);
  if (!st) st = bind_collectives(s);
  if (!st && s->opt.profile && !(s->prof = kiln_calloc((size_t)s->n_launch * PROFILE_RUNS + 1, sizeof *s->prof)))
    st = kiln_fail(KILN_ERR_NO_MEMORY, "%s: no memory for the profile", s->be->name);
  /* host work cannot be recorded; a profile times launches one by one */
  s->replay = !st && s->be->record_begin && s->opt.graph_replay && !s->n_host && !s->prof;
  if (s->replay) st = record(s);
  return st;
}

kiln_status rt_schedule_create(const Backend *be, TE *te, const kiln_options *o, kiln_census *c, Schedule **out) {
  *out = NULL;
  Schedule *s = kiln_calloc(1, sizeof *s);
  if (!s) return kiln_fail(KILN_ERR_NO_MEMORY, "%s: out of memory", be->name);
  s->be = be;
  s->te = te;
  s->opt = *o;
  double t0 = now_ms();
  s->assigns_after_kernels = !output_is_assigned(te);
  for (int i = 0; i < te->n_stages; i++)  /* each a kernel of its own, or on an interpreter a copy */
    if (te_is_collective(&te->stages[i])) s->n_collective++, s->collective_bytes += stage_bytes(&te->stages[i]);
  kiln_status st = check_strict(s);
  if (!st) st = check_dist(s);
  if (!st && be->open) st = be->open(&s->opt, &s->dev);
  if (!st && be->dialect) st = compile_plan(s);
  else if (!st && !(st = check_caps_now(s))) st = place_buffers(s);
  if (st) { rt_schedule_free(s); return st; }
  s->build_ms = now_ms() - t0;
  c->cache_hit = s->cache_hit;
  c->kernels_planned = s->plan ? s->plan->n_kernels : 0;
  c->peak_bytes = s->plan ? s->plan->arena_bytes : 0;
  *out = s;
  return KILN_OK;
}

static int cmp_ms(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* options.profile: each kernel's median and fastest launch over the last runs, with what it is */
static void profile_print(Schedule *s) {
  int64_t n = s->prof_runs < PROFILE_RUNS ? s->prof_runs : PROFILE_RUNS;
  if (!s->prof || n < 1) return;
  double total = 0;
  fprintf(stderr, "profile: %s, %lld runs, each launch waited for\n", s->be->name, (long long)n);
  for (int i = 0; i < s->n_launch; i++) {
    const CgLaunch *l = s->launch[i].l;
    double *t = s->prof + (int64_t)i * PROFILE_RUNS;
    if (l->host || l->grid <= 0 || (l->group >= 0 && s->group[l->group].at != i)) continue;
    qsort(t, (size_t)n, sizeof *t, cmp_ms);
    total += t[n / 2];
    fprintf(stderr, "  k%-3d %9.1f us median %9.1f us min  %s\n", l->kernel, t[n / 2] * 1e3, t[0] * 1e3,
            l->group >= 0 ? s->group[l->group].l->why : l->why);
  }
  fprintf(stderr, "  sum of medians %.1f us\n", total * 1e3);
}

void rt_schedule_free(Schedule *s) {
  if (!s) return;
  const TE *te = s->te;
  if (s->dev && s->be->sync) s->be->sync(s->dev, "free");
  profile_print(s);
  kiln_free(s->prof);
  if (s->graph) s->be->graph_free(s->dev, s->graph);
  for (int i = 0; s->launch && i < s->n_launch; i++) {
    if (s->launch[i].lib) s->be->library_release(s->dev, s->launch[i].lib);
    kiln_free(s->launch[i].args);
    kiln_free(s->launch[i].pack);
  }
  kiln_free(s->launch);
  for (int i = 0; s->group && i < s->n_group; i++) kiln_free(s->group[i].args);
  kiln_free(s->group);
  for (int b = 0; s->bucket && b < s->n_bucket; b++) {
    Bucket *B = &s->bucket[b];
    kiln_free(B->stage), kiln_free(B->src), kiln_free(B->dst), kiln_free(B->count), kiln_free(B->dtype);
  }
  kiln_free(s->bucket);
  kiln_free(s->veto);
  kiln_free(s->bounds);
  arena_free(&s->veto_text);
  for (int a = 0; s->assign_tmp && a < te->n_assigns; a++) mem_release(s, s->assign_tmp[a]);
  for (int i = 0; s->own && i < te->n_stages; i++) mem_release(s, s->own[i]);
  mem_release(s, s->arena);
  for (int i = 0; s->str && i < te->n_stages; i++) kiln_free(s->str[i]);
  if (s->module) s->be->unload(s->dev, s->module);
  if (s->dev && s->be->close) s->be->close(s->dev);
  kiln_free(s->assign_tmp);
  kiln_free(s->out_kept);
  kiln_free(s->buf);
  kiln_free(s->own);
  kiln_free(s->str);
  arena_free(&s->strings);
  cg_program_free(s->cg);
  plan_free(s->plan);
  kiln_free(s);
}

/* ---- run ---- */

/* Interpreting: every stage in order on the host; only opaque ones are fallbacks. */
static kiln_status interpret(Schedule *s, kiln_census *c) {
  const TE *te = s->te;
  const void **view = kiln_calloc((size_t)te->n_stages + 1, sizeof *view);  /* stage -> host memory */
  if (!view) return kiln_fail(KILN_ERR_NO_MEMORY, "%s: out of memory", s->be->name);
  for (int i = 0; i < te->n_stages; i++) view[i] = s->str[i] ? (void *)s->str[i] : host_ptr(s->buf[i]);
  kiln_status st = KILN_OK;
  for (int i = 0; i < te->n_stages && !st; i++) {
    const Stage *S = &te->stages[i];
    if (is_source(S)) {
      if (!view[i] && S->numel) st = kiln_fail(KILN_ERR_INVALID_ARG, "%s: source stage s%d '%s' has no buffer", s->be->name, i, S->name);
      continue;
    }
    st = ref_eval_stage_strings(te, i, view, (void *)view[i], &s->strings);
    if (!st && S->kind == ST_OPAQUE && !te_is_collective(S)) fallback_note(s, S, c);  /* a collective is no op of ref's */
  }
  kiln_free(view);
  return st;
}

static kiln_status bind_inputs(Schedule *s, const void *const *in, kiln_census *c) {
  const TE *te = s->te;
  kiln_status st = KILN_OK;
  for (int i = 0; i < te->n_inputs && !st; i++) {
    int k = te->inputs[i];
    const Stage *S = &te->stages[k];
    const void *src = in ? in[i] : NULL;
    int64_t n = stage_bytes(S);
    if (s->str[k]) { if (src && n > 0) memcpy(s->str[k], src, (size_t)n); continue; }
    if (s->be->host_memory) s->buf[k] = src ? (RtBuf)(uintptr_t)src : s->own[k];
    else if (src) st = mem_upload(s, s->buf[k], src, n, S->name, c);
  }
  return st;
}

/* Host-memory backends write computed outputs straight into the caller's buffers. */
static void bind_outputs(Schedule *s, void *const *out) {
  const TE *te = s->te;
  for (int i = 0; s->be->host_memory && i < te->n_outputs; i++) {
    int k = te->outputs[i];
    if (is_source(&te->stages[k]) || s->str[k]) continue;
    bool first = true;
    for (int j = 0; j < i && first; j++) first = te->outputs[j] != k;
    if (first) s->buf[k] = out && out[i] ? (RtBuf)(uintptr_t)out[i] : s->own[k];
  }
}

static kiln_status copy_outputs(Schedule *s, void *const *out, kiln_census *c) {
  const TE *te = s->te;
  kiln_status st = KILN_OK;
  for (int i = 0; i < te->n_outputs && !st; i++) {
    int k = te->outputs[i];
    int64_t n = stage_bytes(&te->stages[k]);
    s->out_kept[i] = !out || !out[i] || s->buf[k] != (RtBuf)(uintptr_t)out[i];
    if (!out || !out[i] || n <= 0) continue;
    if (s->str[k]) memcpy(out[i], s->str[k], (size_t)n);  /* program.c copies the strings themselves */
    else st = mem_download(s, out[i], s->buf[k], n, te->stages[k].name, c);
  }
  return st;
}

kiln_status rt_schedule_run(Schedule *s, const void *const *in, void *const *out, int times, kiln_census *c) {
  KILN_ASSERT(times >= 1 && (times == 1 || (!in && !out)));
  c->h2d_bytes = c->d2h_bytes = c->h2d_copies = c->d2h_copies = 0;
  c->device_ms = 0;
  fallbacks_reset(s, c);
  arena_free(&s->strings);  /* the last run's strings: program.c has copied its outputs */
  kiln_status st = bind_inputs(s, in, c);
  bind_outputs(s, out);
  if (!st && s->be->mark) st = s->be->mark(s->dev, 0);
  for (int t = 0; t < times && !st; t++) {
    if (t > 0) {  /* the census is one run's */
      c->h2d_bytes = c->d2h_bytes = c->h2d_copies = c->d2h_copies = 0;
      fallbacks_reset(s, c);
      arena_free(&s->strings);
    }
    if (!s->plan) st = interpret(s, c);
    else if (s->replay) st = s->be->replay(s->dev, s->graph);
    else st = enqueue_kernels(s, c);
    if (!st && !s->replay && s->assigns_after_kernels) st = enqueue_assigns(s);
    /* assigns that wait for the outputs' read (an output is an assigned param) follow each run */
    if (!st && t + 1 < times && !s->assigns_after_kernels) {
      st = dev_sync(s, "outputs");
      if (!st) st = enqueue_assigns(s);
    }
  }
  if (!st && s->be->mark) st = s->be->mark(s->dev, 1);
  if (!st) st = copy_outputs(s, out, c);
  if (!st && !s->assigns_after_kernels) {  /* an output is an assigned param: read it first */
    st = dev_sync(s, "outputs");
    if (!st) st = enqueue_assigns(s);
  }
  if (!st) st = dev_sync(s, "run");
  if (!st && s->be->elapsed) st = s->be->elapsed(s->dev, &c->device_ms);
  if (st) return st;
  fallbacks_format(s, c);
  int64_t kernels = 0, phases = 0;
  for (int i = 0; i < s->n_launch; i++) {
    const CgLaunch *l = s->launch[i].l;
    bool alone = !l->host && l->group < 0 && l->grid > 0;
    kernels += alone, phases += alone;
  }
  for (int i = 0; i < s->n_group; i++) kernels++, phases += s->group[i].l->phase;
  for (int a = 0; s->plan && !s->be->host_memory && a < s->te->n_assigns; a++)  /* copies not stored in place */
    phases += s->buf[s->te->assigns[a].param] != s->buf[s->te->assigns[a].value];
  if (!s->n_bucket && s->plan && !s->be->host_memory) phases += s->n_collective;  /* each a copy */
  c->kernels_launched = kernels;
  c->phases = phases;
  c->collectives = s->n_collective;
  c->collective_calls = s->n_bucket;
  c->collective_bytes = s->collective_bytes;
  c->submissions = s->replay ? 1 : kernels;
  c->bytes_read = s->plan ? s->plan->bytes_read : 0;
  c->bytes_written = s->plan ? s->plan->bytes_written : 0;
  c->peak_bytes = s->plan ? s->plan->arena_bytes : 0;
  c->kernels_planned = s->plan ? s->plan->n_kernels : 0;
  c->cache_hit = s->cache_hit;
  return KILN_OK;
}

/* ---- resident tensors ---- */

kiln_status rt_schedule_set_input(Schedule *s, int i, const void *src) {
  int k = s->te->inputs[i];
  const Stage *S = &s->te->stages[k];
  int64_t n = stage_bytes(S);
  if (s->str[k]) {  /* strings: pointers into program.c's copy of them */
    if (n > 0) memcpy(s->str[k], src, (size_t)n);
    return KILN_OK;
  }
  kiln_status st = mem_upload(s, s->own[k], src, n, S->name, NULL);
  return st ? st : dev_sync(s, "set_input");
}

static kiln_status read_stage(Schedule *s, int k, void *dst) {
  const Stage *S = &s->te->stages[k];
  int64_t n = stage_bytes(S);
  if (s->str[k]) {  /* strings: valid until the next run */
    if (n > 0) memcpy(dst, s->str[k], (size_t)n);
    return KILN_OK;
  }
  if (!s->buf[k]) return kiln_fail(KILN_ERR_INVALID_ARG, "%s: stage %d ('%s') has no buffer", s->be->name, k, S->name);
  kiln_status st = mem_download(s, dst, s->buf[k], n, S->name, NULL);
  return st ? st : dev_sync(s, "read");
}

kiln_status rt_schedule_read_output(Schedule *s, int i, void *dst) {
  if (s->be->host_memory && !s->out_kept[i])
    return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_program_read_output: output %d was not kept (no run left it resident)", i);
  return read_stage(s, s->te->outputs[i], dst);
}

kiln_status rt_schedule_read_param(Schedule *s, int stage, void *dst) { return read_stage(s, stage, dst); }

/* Through the backend's upload hook, like the compile-time upload of params: on a device the
 * new value lands in the param's device buffer, which every recorded launch already reads. No
 * run is in flight (rt_schedule_run waits before it returns); the wait after the copy lets
 * the caller reuse src at once. */
kiln_status rt_schedule_write_param(Schedule *s, int stage, const void *src) {
  const Stage *S = &s->te->stages[stage];
  if (!s->buf[stage]) return kiln_fail(KILN_ERR_INVALID_ARG, "%s: stage %d ('%s') has no buffer", s->be->name, stage, S->name);
  kiln_status st = mem_upload(s, s->buf[stage], src, stage_bytes(S), S->name, NULL);
  if (!st) st = dev_sync(s, "write_param");
  /* a library call that packed this param once packs the new value (prepared again) */
  for (int i = 0; !st && i < s->n_launch; i++) {
    Launch *L = &s->launch[i];
    const CgLibGemm *g = &L->l->lib;
    if (!s->be->host_memory || !L->lib || !((g->b_stage == stage && g->b_constant) || (g->a_stage == stage && g->a_constant)))
      continue;
    s->be->library_release(s->dev, L->lib);
    L->lib = NULL;
    if (s->be->library_prepare(s->dev, &L->l->lib, s->buf, &L->lib) != KILN_OK) L->lib = NULL, s->n_library--;
  }
  /* a kernel whose weights were laid out from this param lays them out again */
  for (int i = 0; !st && i < s->n_launch; i++) {
    Launch *L = &s->launch[i];
    bool reads = false;
    for (int j = 0; L->pack && j < L->l->n_params; j++) reads |= L->l->params[j] == stage;
    if (reads) st = run_pack(s, L);
  }
  return st;
}

kiln_status rt_schedule_copy_input(Schedule *s, int i, unsigned long long address, unsigned long long stream) {
  int k = s->te->inputs[i];
  const Stage *S = &s->te->stages[k];
  int64_t n = stage_bytes(S);
  if (!s->be->copy_after) {  /* host memory */
    if (n > 0) memcpy((void *)(uintptr_t)s->own[k], (const void *)(uintptr_t)address, (size_t)n);
    return KILN_OK;
  }
  kiln_status st = s->be->copy_after(s->dev, s->own[k], (RtBuf)address, n, stream, S->name);
  return st ? st : dev_sync(s, "set_input_buffer");
}

kiln_status rt_schedule_output_at(const Schedule *s, int i, unsigned long long *address) {
  int k = s->te->outputs[i];
  if (s->be->host_memory && !s->out_kept[i])
    return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_program_output_buffer: output %d was not kept (the last run wrote it "
                     "to the caller's buffer)", i);
  if (!s->buf[k]) return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_program_output_buffer: output %d has no buffer", i);
  *address = s->buf[k];
  return KILN_OK;
}

void rt_schedule_where(const Schedule *s, int *device_type, int *device_id, unsigned long long *stream) {
  *device_type = 1, *device_id = 0, *stream = 0;
  if (s->be->where) s->be->where(s->dev, device_type, device_id, stream);
}

kiln_status rt_schedule_print_dot(const Schedule *s, FILE *f) {
  if (!s->plan)
    return kiln_fail(KILN_ERR_UNSUPPORTED, "the %s backend interprets the graph: it has no plan to draw", s->be->name);
  plan_dot(s->plan, f);
  return KILN_OK;
}

kiln_status rt_schedule_print(const Schedule *s, FILE *f) {
  if (!s->plan) {
    fprintf(f, "%s: %d stages interpreted on the host, no kernels\n", s->be->name, s->te->n_stages);
    te_print(s->te, f);
    return KILN_OK;
  }
  plan_print(s->plan, f);
  cg_program_print(s->cg, f);
  for (int i = 0; i < s->n_group; i++) {
    const Launch *G = &s->group[i];
    if (G->resident > 0)
      fprintf(f, "g%d: %d registers, %d B spilled, %lld blocks resident; launched with %lld\n", i, G->regs,
              G->local_bytes, (long long)G->resident, (long long)G->run.grid);
  }
  int alone = 0;
  for (int i = 0; i < s->n_launch; i++)
    alone += !s->launch[i].l->host && !s->launch[i].l->collective && s->launch[i].l->group < 0;
  if (s->n_collective && s->n_bucket)
    fprintf(f, "%s: %d collectives (%lld bytes) through the communicator in %d bucket%s\n", s->be->name, s->n_collective,
            (long long)s->collective_bytes, s->n_bucket, s->n_bucket == 1 ? "" : "s");
  else if (s->n_collective)
    fprintf(f, "%s: %d collectives (%lld bytes), each a copy (one rank, no library)\n", s->be->name, s->n_collective,
            (long long)s->collective_bytes);
  fprintf(f, "%s: %d kernels in %d launches (%d groups, %d library GEMMs), %s; built in %.1f ms%s%s, cache %s\n",
          s->be->name, s->n_launch - s->n_host - s->n_collective, alone + s->n_group, s->n_group, s->n_library,
          s->replay ? "one recorded submission per run" : "kernel by kernel", s->build_ms,
          s->n_rebuilds ? " (again without groups over budget)" : "",
          s->n_asked ? " (again with groups asking for resident blocks)" : "", s->cache_hit ? "hit" : "miss");
  if (s->be->describe) s->be->describe(s->dev, f);
  return KILN_OK;
}

int rt_kernel_at_line(const char *src, long line) {
  long n = 1;
  int k = -1;
  for (const char *p = src; p && *p && n <= line; p++) {
    if (*p == '\n') n++;
    else if (p[0] == '/' && p[1] == '*' && !strncmp(p, "/* kernel ", 10)) k = atoi(p + 10);
  }
  return k;
}
