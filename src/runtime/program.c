/*
 * program.c — the public kiln_program_* API and the options. Compiling takes a graph,
 * lowers it to a TE (te_lower), checks it (te_check, always: it is cheap next to a
 * compile), and hands it with the chosen backend's hooks to the one pipeline
 * (schedule.c). The program owns the TE; the TE copies every name and constant it
 * needs, so the graph may be freed right after compiling. The environment is read in
 * kiln_options_default and nowhere below it.
 */
#include "runtime.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct kiln_program {
  TE *te;
  const Backend *be;
  Schedule *sched;
  kiln_options opt;
  kiln_census census;
  bool *in_set;          /* resident inputs (kiln_program_set_input) */
  Arena *in_strings;     /* per input: the strings of a resident string input (set_input; every
                          * backend's resident copy points into them) */
  Arena out_strings;     /* the strings of the last run's string outputs (kiln.h) */
};

/* Every backend built into this tree; a backend adds its row here. */
static const Backend *const backends[] = {
  &rt_backend_ref,
  &rt_backend_cpu,
  &rt_backend_cuda,
  &rt_backend_vulkan,
};

/* $name as a non-negative 64-bit count (digits, optionally with a k/M/G/T suffix of 2^10
 * steps for bytes, or an exponent like 1e11), or dflt when unset, empty or not a count. */
static int64_t env_count(const char *name, int64_t dflt) {
  const char *v = getenv(name);
  if (!v || !*v) return dflt;
  char *end = NULL;
  double x = strtod(v, &end);
  int shift = 0;
  if (end && *end) {
    const char *units = "kMGT", *u = strchr(units, *end);
    if (!u || end[1]) return dflt;
    shift = 10 * (int)(u - units + 1);
  }
  x = ldexp(x, shift);
  if (!(x >= 0) || x >= 9.2e18) return dflt;
  return (int64_t)x;
}

/* $name as text into out (n bytes), or dflt when unset or empty. */
static void env_text(const char *name, const char *dflt, char *out, size_t n) {
  const char *v = getenv(name);
  snprintf(out, n, "%s", v && *v ? v : dflt);
}

kiln_options kiln_options_default(void) {
  kiln_options o = {0};
  o.backend = getenv("KILN_BACKEND");
  if (o.backend && !*o.backend) o.backend = NULL;
  o.fuse = kiln_env_int("KILN_FUSE", 1) != 0;
  o.cse = kiln_env_int("KILN_CSE", 0) != 0;
  o.strict = kiln_env_int("KILN_STRICT", 0) != 0;
  o.debug = kiln_env_int("KILN_DEBUG", 0);
  o.profile = kiln_env_int("KILN_PROFILE", 0) != 0;
  o.graph_replay = 1;
  o.tf32 = kiln_env_int("KILN_TF32", 0) != 0;
  o.max_inputs = kiln_env_int("KILN_MAX_INPUTS", 0);
  o.max_nodes = kiln_env_int("KILN_MAX_NODES", 0);
  o.max_tensor_bytes = env_count("KILN_MAX_TENSOR_BYTES", (int64_t)16 << 30);
  o.max_planned_bytes = env_count("KILN_MAX_PLANNED_BYTES", (int64_t)64 << 30);
  o.max_ref_work = env_count("KILN_MAX_REF_WORK", (int64_t)100000000000);
  env_text("KILN_CUDA_ROW", "", o.cuda_row, sizeof o.cuda_row);
  const char *sk = getenv("KILN_CUDA_SPLITK");
  o.cuda_splitk = sk && !strcmp(sk, "0") ? 0 : sk && !strcmp(sk, "wide") ? 2 : 1;
  o.cublaslt = kiln_env_int("KILN_CUBLASLT", 1);
  o.cuda_fma = kiln_env_int("KILN_CUDA_FMA", 0) != 0;
  o.grid_sync = kiln_env_int("KILN_GRID_SYNC", -1);
  o.in_place = kiln_env_int("KILN_IN_PLACE", 1) != 0;
  o.cuda_pdl = kiln_env_int("KILN_CUDA_PDL", -1);
  o.cuda_gemm_stages = kiln_env_int("KILN_CUDA_GEMM_STAGES", 0);
  o.cuda_cluster = kiln_env_int("KILN_CUDA_CLUSTER", 0) != 0;
  o.cuda_split_rows = kiln_env_int("KILN_CUDA_SPLIT_ROWS", 0);
  o.cuda_split_blocks = kiln_env_int("KILN_CUDA_SPLIT_BLOCKS", 0);
  o.index32 = kiln_env_int("KILN_INDEX32", -1);
  o.lazy_select = kiln_env_int("KILN_LAZY_SELECT", 1) != 0;
  o.store_moved = kiln_env_int("KILN_STORE_MOVED", 1);
  o.gemm_reuse = kiln_env_int("KILN_GEMM_REUSE", 0);
  o.attention = kiln_env_int("KILN_ATTENTION", -1);
  o.gemm_rows = kiln_env_int("KILN_GEMM_ROWS", -1);
  o.siblings = kiln_env_int("KILN_SIBLINGS", -1);
  o.reorder_sums = kiln_env_int("KILN_REORDER_SUMS", -1);
  env_text("KILN_CC", "cc", o.cc, sizeof o.cc);
  const char *dir = getenv("KILN_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  if (dir && *dir) snprintf(o.cache_dir, sizeof o.cache_dir, "%s", dir);
  else if (xdg && *xdg) snprintf(o.cache_dir, sizeof o.cache_dir, "%s/kiln", xdg);
  else if (home && *home) snprintf(o.cache_dir, sizeof o.cache_dir, "%s/.cache/kiln", home);
  else snprintf(o.cache_dir, sizeof o.cache_dir, "/tmp/kiln");
  o.no_cache = kiln_env_int("KILN_NO_CACHE", 0) != 0;
  /* teams of exactly the threads asked for, as ONNX Runtime's pool: at load 1.2 on this 2-vCPU
   * machine dynamic teams ran one thread, twice as slow (bench/results/2026-12-02-cpu-threads.md) */
  o.omp_dynamic = getenv("OMP_DYNAMIC") ? -1 : 0;
  o.cpu_tiles = kiln_env_int("KILN_CPU_TILES", 1) != 0;
  o.cpu_windows = kiln_env_int("KILN_CPU_WINDOWS", 1) != 0;
  o.cpu_direct = kiln_env_int("KILN_CPU_DIRECT", 1);
  o.cpu_epilogue = kiln_env_int("KILN_CPU_EPILOGUE", 1) != 0;
  /* on by default since its windows are taken in vectors (pool_pairs): raced on lenet (2 threads,
   * this 2-vCPU EPYC) 0.302-0.308 against 0.366-0.381 ms a run with the pools apart */
  o.cpu_pool = kiln_env_int("KILN_CPU_POOL", 1) != 0;
  /* expansions join their windows where their output passes half an L2 (cg_cpu_expand_ok): raced
   * on convnet_mini, 0.58 against 0.57 ms in a quiet phase of this VM, 0.72-0.73 against 0.79 in
   * busy ones */
  o.cpu_expand = kiln_env_int("KILN_CPU_EXPAND", 1);
  o.gemm_kgroups = kiln_env_int("KILN_GEMM_KGROUPS", 1) != 0;
  o.tensor_cores = kiln_env_int("KILN_TENSOR_CORES", 1);
  o.cuda_mma_k = kiln_env_int("KILN_CUDA_MMA_K", 0);
  o.cuda_mma_late_round = kiln_env_int("KILN_CUDA_MMA_LATE_ROUND", 1);
  o.column_rows = kiln_env_int("KILN_COLUMN_ROWS", -1);
  o.cuda_long_k_blocks = kiln_env_int("KILN_CUDA_LONG_K_BLOCKS", -1);
  o.bounds_moves = kiln_env_int("KILN_BOUNDS_MOVES", 0) != 0;
  o.cuda_vec_reads = kiln_env_int("KILN_CUDA_VEC_READS", -1);
  o.cuda_one_fence = kiln_env_int("KILN_CUDA_ONE_FENCE", -1);
  o.cuda_copy_stages = kiln_env_int("KILN_CUDA_COPY_STAGES", -1);
  o.pair_tails = kiln_env_int("KILN_PAIR_TAILS", -1);
  o.row_sums = kiln_env_int("KILN_ROW_SUMS", -1);
  o.cpu_channel_lanes = kiln_env_int("KILN_CPU_CHANNEL_LANES", 1);
  o.cpu_run_ends = kiln_env_int("KILN_CPU_RUN_ENDS", 1);
  o.cpu_pixel_panels = kiln_env_int("KILN_CPU_PANELS", 1);
  o.cpu_cols_once = kiln_env_int("KILN_CPU_COLS_ONCE", 1);
  o.cpu_winograd = kiln_env_int("KILN_CPU_WINOGRAD", 1);
  o.cpu_nested_sums = kiln_env_int("KILN_CPU_NESTED_SUMS", 1);
  o.cpu_split_digits = kiln_env_int("KILN_CPU_SPLIT_DIGITS", 1);
  o.cuda_group_blocks = kiln_env_int("KILN_CUDA_GROUP_BLOCKS", -1);
  o.cuda_pair_warps = kiln_env_int("KILN_CUDA_PAIR_WARPS", -1);
  o.cuda_pair_bands = kiln_env_int("KILN_CUDA_PAIR_BANDS", -1);
  o.cuda_tile_fit = kiln_env_int("KILN_CUDA_TILE_FIT", 0);
  o.cuda_small_k = kiln_env_int("KILN_CUDA_SMALL_K", -1);
  o.cuda_chain_mma = kiln_env_int("KILN_CUDA_CHAIN_MMA", 2);
  o.chain_layout = kiln_env_int("KILN_CHAIN_LAYOUT", -1);
  o.gemm_heads = kiln_env_int("KILN_GEMM_HEADS", -1);
  o.cuda_narrow_depth = kiln_env_int("KILN_CUDA_NARROW_DEPTH", -1);
  o.cuda_pair_stage = kiln_env_int("KILN_CUDA_PAIR_STAGE", -1);
  o.cuda_kg_sum = kiln_env_int("KILN_CUDA_KG_SUM", 0);
  o.cuda_chain_spread = kiln_env_int("KILN_CUDA_CHAIN_SPREAD", -1);
  o.cuda_split_flags = kiln_env_int("KILN_CUDA_SPLIT_FLAGS", 0);
  o.cuda_min_span = kiln_env_int("KILN_CUDA_MIN_SPAN", 0);
  o.cuda_split_target = kiln_env_int("KILN_CUDA_SPLIT_TARGET", 0);
  o.cuda_thin_spans = kiln_env_int("KILN_CUDA_THIN_SPANS", -1);
  o.row_values = kiln_env_int("KILN_ROW_VALUES", -1);
  o.nan_fold = kiln_env_int("KILN_NAN_FOLD", 0);
  o.cuda_chain_prefetch = kiln_env_int("KILN_CUDA_CHAIN_PREFETCH", 0);
  o.cuda_chain_blocks = kiln_env_int("KILN_CUDA_CHAIN_BLOCKS", 0);
  o.cuda_chain_lanes = kiln_env_int("KILN_CUDA_CHAIN_LANES", 0);
  o.cuda_wgmma = kiln_env_int("KILN_CUDA_WGMMA", 0);
  o.cuda_lt_algos = kiln_env_int("KILN_CUDA_LT_ALGOS", 0);
  o.excess_precision = kiln_env_int("KILN_EXCESS_PRECISION", -1);
  o.cuda_row_fill = kiln_env_int("KILN_CUDA_ROW_FILL", -1);
  o.cuda_row_half = kiln_env_int("KILN_CUDA_ROW_HALF", -1);
  o.dist_bucket_bytes = env_count("KILN_DIST_BUCKET_BYTES", 0);
  return o;
}

size_t kiln_struct_size(const char *name) {
  static const struct { const char *name; size_t size; } t[] = {
    { "kiln_options", sizeof(kiln_options) }, { "kiln_census", sizeof(kiln_census) },
    { "kiln_tensor_info", sizeof(kiln_tensor_info) }, { "kiln_value", sizeof(kiln_value) },
    { "kiln_value_list", sizeof(kiln_value_list) }, { "kiln_model_tensor", sizeof(kiln_model_tensor) },
    { "kiln_buffer", sizeof(kiln_buffer) },
  };
  for (size_t i = 0; name && i < sizeof t / sizeof t[0]; i++)
    if (!strcmp(t[i].name, name)) return t[i].size;
  return 0;
}

kiln_status kiln_options_init(kiln_options *o) {
  if (!o) return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_options_init: NULL options");
  *o = kiln_options_default();
  return KILN_OK;
}

/* kiln_options' fields by name, for kiln_options_set: where each is, and how it is read */
typedef enum { OPT_INT, OPT_I64, OPT_TEXT } OptKind;
static const struct { const char *name; size_t at, size; OptKind kind; } option_fields[] = {
#define INT_FIELD(f) { #f, offsetof(kiln_options, f), sizeof(int), OPT_INT }
#define I64_FIELD(f) { #f, offsetof(kiln_options, f), sizeof(int64_t), OPT_I64 }
#define TEXT_FIELD(f) { #f, offsetof(kiln_options, f), sizeof(((kiln_options *)0)->f), OPT_TEXT }
  INT_FIELD(fuse), INT_FIELD(cse), INT_FIELD(strict), INT_FIELD(debug), INT_FIELD(graph_replay), INT_FIELD(tf32),
  INT_FIELD(max_inputs), INT_FIELD(max_nodes), I64_FIELD(max_tensor_bytes), I64_FIELD(max_planned_bytes),
  I64_FIELD(max_ref_work), TEXT_FIELD(cuda_row), INT_FIELD(cuda_splitk), INT_FIELD(cuda_fma), INT_FIELD(cublaslt),
  INT_FIELD(cuda_cluster), INT_FIELD(cuda_split_rows), INT_FIELD(cuda_split_blocks), INT_FIELD(cuda_gemm_stages),
  INT_FIELD(cuda_pdl), INT_FIELD(grid_sync), INT_FIELD(in_place), INT_FIELD(index32), INT_FIELD(store_moved),
  INT_FIELD(gemm_reuse), INT_FIELD(attention), INT_FIELD(siblings), INT_FIELD(gemm_rows), INT_FIELD(reorder_sums),
  INT_FIELD(lazy_select), TEXT_FIELD(cc), TEXT_FIELD(cache_dir), INT_FIELD(no_cache), INT_FIELD(omp_dynamic),
  INT_FIELD(cpu_tiles), INT_FIELD(cpu_windows), INT_FIELD(cpu_epilogue), INT_FIELD(gemm_kgroups),
  INT_FIELD(cpu_direct), INT_FIELD(cpu_pool), INT_FIELD(cpu_expand), INT_FIELD(tensor_cores), INT_FIELD(cuda_mma_k),
  INT_FIELD(cuda_mma_late_round), INT_FIELD(column_rows), INT_FIELD(cuda_long_k_blocks), INT_FIELD(bounds_moves),
  INT_FIELD(cuda_vec_reads), INT_FIELD(cuda_one_fence), INT_FIELD(cuda_pair_warps), INT_FIELD(cuda_pair_bands), INT_FIELD(cuda_copy_stages), INT_FIELD(pair_tails), INT_FIELD(row_sums), INT_FIELD(cuda_group_blocks),
  INT_FIELD(cpu_channel_lanes), INT_FIELD(cuda_tile_fit), INT_FIELD(cuda_small_k), INT_FIELD(cuda_chain_mma), INT_FIELD(chain_layout), INT_FIELD(gemm_heads), INT_FIELD(cuda_narrow_depth), INT_FIELD(cuda_pair_stage), INT_FIELD(cuda_kg_sum), INT_FIELD(cuda_chain_spread), INT_FIELD(cuda_split_flags), INT_FIELD(cuda_min_span), INT_FIELD(cuda_split_target), INT_FIELD(cuda_thin_spans), INT_FIELD(row_values), INT_FIELD(nan_fold), INT_FIELD(cuda_row_fill), INT_FIELD(cuda_row_half), INT_FIELD(cuda_chain_prefetch), INT_FIELD(cuda_chain_blocks), INT_FIELD(cuda_chain_lanes), INT_FIELD(cuda_wgmma), INT_FIELD(cuda_lt_algos), INT_FIELD(excess_precision), INT_FIELD(cpu_run_ends), INT_FIELD(cpu_pixel_panels), INT_FIELD(cpu_cols_once), INT_FIELD(cpu_winograd), INT_FIELD(cpu_nested_sums), INT_FIELD(cpu_split_digits), I64_FIELD(dist_bucket_bytes),
#undef INT_FIELD
#undef I64_FIELD
#undef TEXT_FIELD
};

kiln_status kiln_options_set(kiln_options *o, const char *name, const char *value) {
  if (!o || !name || !value) return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_options_set: NULL argument");
  if (!strcmp(name, "backend")) {  /* kiln's own name string, so the options own nothing */
    const Backend *b = rt_backend_find(value);
    if (!b) {
      char why[256];  /* the message is rewritten in place: copy it first */
      snprintf(why, sizeof why, "%s", kiln_last_error());
      return kiln_fail(KILN_ERR_INVALID_ARG, "option backend: %s", why);
    }
    o->backend = b->name;
    return KILN_OK;
  }
  for (size_t i = 0; i < sizeof option_fields / sizeof option_fields[0]; i++) {
    if (strcmp(option_fields[i].name, name)) continue;
    char *field = (char *)o + option_fields[i].at;
    if (option_fields[i].kind == OPT_TEXT) {
      if (strlen(value) >= option_fields[i].size)
        return kiln_fail(KILN_ERR_INVALID_ARG, "option %s: longer than %zu bytes", name, option_fields[i].size - 1);
      memcpy(field, value, strlen(value) + 1);
      return KILN_OK;
    }
    char *end;
    errno = 0;
    long long v = strtoll(value, &end, 10);
    bool is_int = option_fields[i].kind == OPT_INT;
    if (!*value || *end || errno || (is_int && (v < INT_MIN || v > INT_MAX)))
      return kiln_fail(KILN_ERR_INVALID_ARG, "option %s: '%s' is not a whole number%s", name, value,
                       is_int ? " in int range" : "");
    if (is_int) {
      int x = (int)v;
      memcpy(field, &x, sizeof x);
    } else {
      int64_t x = v;
      memcpy(field, &x, sizeof x);
    }
    return KILN_OK;
  }
  return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_options_set: no option named '%s'", name);
}

const Backend *rt_backend_find(const char *name) {
  if (!name || !*name) name = "cpu";
  char known[128] = "";
  for (size_t i = 0; i < sizeof backends / sizeof backends[0]; i++) {
    if (!strcmp(backends[i]->name, name)) return backends[i];
    size_t n = strlen(known);
    snprintf(known + n, sizeof known - n, "%s%s", n ? ", " : "", backends[i]->name);
  }
  kiln_fail(KILN_ERR_INVALID_ARG, "backend '%s' is not built into this kiln (known: %s)", name, known);
  return NULL;
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

kiln_status kiln_program_compile(const kiln_graph *g, const kiln_options *opt, kiln_program **out) {
  if (!out) return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_program_compile: out is NULL");
  *out = NULL;
  if (!g) return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_program_compile: graph is NULL");
  kiln_options o = opt ? *opt : kiln_options_default();
  const Backend *be = rt_backend_find(o.backend);
  if (!be) return KILN_ERR_INVALID_ARG;
  if (be->probe && be->probe() != KILN_OK) {
    kiln_error_prefix("backend '%s' is unavailable: ", be->name);
    return KILN_ERR_DEVICE;
  }
  kiln_program *p = kiln_calloc(1, sizeof *p);
  if (!p) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory");
  p->be = be;
  p->opt = o;
  p->opt.backend = be->name;  /* a static string: the caller's may not outlive the program */
  double t0 = now_ms();
  kiln_status st = te_lower_split(&g->g, o.row_sums != 0, &p->te);
  if (st == KILN_OK) st = te_check(p->te);
  if (st == KILN_OK && o.debug >= 3) {  /* levels 1-2 are the plan and the source */
    fprintf(stderr, "> te (%d stages) for backend %s:\n", p->te->n_stages, be->name);
    te_print(p->te, stderr);
  }
  if (st == KILN_OK) st = rt_schedule_create(be, p->te, &p->opt, &p->census, &p->sched);
  if (st != KILN_OK) {
    kiln_program_free(p);
    return st;
  }
  p->census.compile_ms = now_ms() - t0;
  *out = p;
  return KILN_OK;
}

/* A string tensor's elements must all point at text. */
static kiln_status check_strings(const char *fn, const Stage *S, int i, const void *src) {
  for (int64_t k = 0; S->dtype == KILN_STRING && k < S->numel; k++)
    if (!((const char *const *)src)[k])
      return kiln_fail(KILN_ERR_INVALID_ARG, "%s: input %d ('%s') string element %lld is NULL", fn, i, S->name,
                       (long long)k);
  return KILN_OK;
}

/* String outputs point into the backend's run storage, the caller's inputs or constants;
 * each string is copied into the program's own storage, so every output string lives
 * exactly until the next run (kiln.h). */
static kiln_status own_strings(kiln_program *p, void *const *out) {
  const TE *te = p->te;
  for (int i = 0; i < te->n_outputs; i++) {
    const Stage *S = &te->stages[te->outputs[i]];
    const char **v = out[i];
    if (!v) continue;  /* not asked for this run (a resident output) */
    for (int64_t k = 0; S->dtype == KILN_STRING && k < S->numel; k++)
      if (!(v[k] = arena_strdup(&p->out_strings, v[k] ? v[k] : "")))
        return kiln_fail(KILN_ERR_NO_MEMORY, "kiln_program_run: out of memory copying the strings of output %d", i);
  }
  return KILN_OK;
}

/* Every input the caller does not give (a NULL array or entry) must be resident (set_input). */
static kiln_status inputs_given_or_set(const kiln_program *p, const void *const *inputs, const char *fn) {
  const TE *te = p->te;
  for (int i = 0; i < te->n_inputs; i++)
    if ((!inputs || !inputs[i]) && te->stages[te->inputs[i]].numel && !(p->in_set && p->in_set[i]))
      return kiln_fail(KILN_ERR_INVALID_ARG, "%s: input %d ('%s') is NULL and was never set", fn, i,
                       te->stages[te->inputs[i]].name);
  return KILN_OK;
}

kiln_status kiln_program_run(kiln_program *p, const void *const *inputs, void *const *outputs) {
  if (!p) return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_program_run: program is NULL");
  const TE *te = p->te;
  for (int i = 0; inputs && i < te->n_inputs; i++) {
    kiln_status st = inputs[i] ? check_strings("kiln_program_run", &te->stages[te->inputs[i]], i, inputs[i]) : KILN_OK;
    if (st) return st;
  }
  arena_free(&p->out_strings);
  kiln_status st = inputs_given_or_set(p, inputs, "kiln_program_run");
  if (!st) st = rt_schedule_run(p->sched, inputs, outputs, 1, &p->census);
  if (!st && outputs) st = own_strings(p, outputs);
  if (st == KILN_OK) p->census.runs++;
  return st;
}

kiln_status kiln_program_run_times(kiln_program *p, int times) {
  if (!p) return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_program_run_times: program is NULL");
  if (times < 1) return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_program_run_times: times is %d (at least 1)", times);
  kiln_status st = inputs_given_or_set(p, NULL, "kiln_program_run_times");
  if (st) return st;
  arena_free(&p->out_strings);
  st = rt_schedule_run(p->sched, NULL, NULL, times, &p->census);
  if (st == KILN_OK) p->census.runs += times;
  return st;
}

kiln_status kiln_program_census(const kiln_program *p, kiln_census *out) {
  if (!p || !out) return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_program_census: %s is NULL", p ? "out" : "program");
  *out = p->census;
  return KILN_OK;
}

kiln_status kiln_program_print(const kiln_program *p, FILE *f) {
  if (!p || !f) return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_program_print: %s is NULL", p ? "file" : "program");
  return rt_schedule_print(p->sched, f);
}

kiln_status kiln_program_print_dot(const kiln_program *p, FILE *f) {
  if (!p || !f) return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_program_print_dot: %s is NULL", p ? "file" : "program");
  return rt_schedule_print_dot(p->sched, f);
}

/* The stage of parameter param, for read_param and write_param (fn names the call in the message). */
static kiln_status param_stage(const kiln_program *p, kiln_tensor param, const char *fn, int *stage) {
  const TE *te = p->te;
  if (param < 0 || param >= te->n_tensors)
    return kiln_fail(KILN_ERR_INVALID_ARG, "%s: tensor %d is not in the graph (0..%d)", fn, param, te->n_tensors - 1);
  int s = te->tensor_stage[param];
  if (te->stages[s].kind != ST_PARAM)
    return kiln_fail(KILN_ERR_INVALID_ARG, "%s: tensor %d ('%s') is not a parameter", fn, param, te->stages[s].name);
  *stage = s;
  return KILN_OK;
}

kiln_status kiln_program_read_param(kiln_program *p, kiln_tensor param, void *dst) {
  if (!p || !dst) return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_program_read_param: %s is NULL", p ? "dst" : "program");
  int s = -1;
  kiln_status st = param_stage(p, param, "kiln_program_read_param", &s);
  return st ? st : rt_schedule_read_param(p->sched, s, dst);
}

kiln_status kiln_program_write_param(kiln_program *p, kiln_tensor param, const void *src) {
  if (!p || !src) return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_program_write_param: %s is NULL", p ? "src" : "program");
  int s = -1;
  kiln_status st = param_stage(p, param, "kiln_program_write_param", &s);
  if (st) return st;
  /* a string param's elements would point at the caller's text, which need not outlive the call */
  if (p->te->stages[s].dtype == KILN_STRING)
    return kiln_fail(KILN_ERR_UNSUPPORTED, "kiln_program_write_param: tensor %d ('%s') is a string parameter", param,
                     p->te->stages[s].name);
  return rt_schedule_write_param(p->sched, s, src);
}

kiln_status kiln_program_set_input(kiln_program *p, int i, const void *src) {
  if (!p || !src) return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_program_set_input: %s is NULL", p ? "src" : "program");
  const TE *te = p->te;
  if (i < 0 || i >= te->n_inputs)
    return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_program_set_input: input %d does not exist (0..%d)", i, te->n_inputs - 1);
  if (!p->in_set && !(p->in_set = kiln_calloc((size_t)te->n_inputs, sizeof *p->in_set)))
    return kiln_fail(KILN_ERR_NO_MEMORY, "kiln_program_set_input: out of memory");
  const Stage *S = &te->stages[te->inputs[i]];
  kiln_status st = check_strings("kiln_program_set_input", S, i, src);
  if (st) return st;
  if (S->dtype == KILN_STRING) {  /* the caller's strings need not outlive this call */
    if (!p->in_strings && !(p->in_strings = kiln_calloc((size_t)te->n_inputs, sizeof *p->in_strings)))
      return kiln_fail(KILN_ERR_NO_MEMORY, "kiln_program_set_input: out of memory");
    p->in_set[i] = false;  /* its old strings go now */
    arena_free(&p->in_strings[i]);
    const char **v = arena_strings(&p->in_strings[i], src, S->numel);
    if (!v && S->numel) return kiln_fail(KILN_ERR_NO_MEMORY, "kiln_program_set_input: out of memory copying strings");
    src = v;
  }
  st = rt_schedule_set_input(p->sched, i, src);
  if (!st) p->in_set[i] = true;
  return st;
}

kiln_status kiln_program_device(const kiln_program *p, kiln_buffer *out) {
  if (!p || !out) return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_program_device: %s is NULL", p ? "out" : "program");
  memset(out, 0, sizeof *out);
  unsigned long long stream;
  rt_schedule_where(p->sched, &out->device_type, &out->device_id, &stream);
  out->stream = stream;
  return KILN_OK;
}

/* Input or output i as a numeric stage of p, for the buffer calls. */
static kiln_status buffer_stage(const char *fn, const kiln_program *p, int i, bool input, const Stage **out) {
  const TE *te = p->te;
  int n = input ? te->n_inputs : te->n_outputs;
  if (i < 0 || i >= n)
    return kiln_fail(KILN_ERR_INVALID_ARG, "%s: %s %d does not exist (0..%d)", fn, input ? "input" : "output", i, n - 1);
  const Stage *S = &te->stages[(input ? te->inputs : te->outputs)[i]];
  if (S->dtype == KILN_STRING)
    return kiln_fail(KILN_ERR_UNSUPPORTED, "%s: %s %d ('%s') holds strings, which have no device buffer", fn,
                     input ? "input" : "output", i, S->name);
  *out = S;
  return KILN_OK;
}

kiln_status kiln_program_set_input_buffer(kiln_program *p, int i, const kiln_buffer *src) {
  if (!p || !src) return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_program_set_input_buffer: %s is NULL", p ? "src" : "program");
  const Stage *S = NULL;
  kiln_status st = buffer_stage(__func__, p, i, true, &S);
  if (st) return st;
  kiln_buffer here;
  kiln_program_device(p, &here);
  if (src->device_type != here.device_type || src->device_id != here.device_id)
    return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_program_set_input_buffer: input %d ('%s'): the memory is on device %d:%d, "
                     "the program on %d:%d", i, S->name, src->device_type, src->device_id, here.device_type, here.device_id);
  int64_t want = S->numel * (int64_t)kiln_dtype_size(S->dtype);
  if (src->bytes != want)
    return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_program_set_input_buffer: input %d ('%s'): %lld bytes given, it holds %lld",
                     i, S->name, (long long)src->bytes, (long long)want);
  if (!src->address && want)
    return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_program_set_input_buffer: input %d ('%s'): address is 0", i, S->name);
  if (!p->in_set && !(p->in_set = kiln_calloc((size_t)p->te->n_inputs, sizeof *p->in_set)))
    return kiln_fail(KILN_ERR_NO_MEMORY, "kiln_program_set_input_buffer: out of memory");
  st = rt_schedule_copy_input(p->sched, i, src->address, src->stream);
  if (!st) p->in_set[i] = true;
  return st;
}

kiln_status kiln_program_output_buffer(const kiln_program *p, int i, kiln_buffer *out) {
  if (!p || !out) return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_program_output_buffer: %s is NULL", p ? "out" : "program");
  const Stage *S = NULL;
  kiln_status st = buffer_stage(__func__, p, i, false, &S);
  if (st) return st;
  if (!p->census.runs) return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_program_output_buffer: the program has not run");
  unsigned long long address;
  if ((st = rt_schedule_output_at(p->sched, i, &address))) return st;
  kiln_program_device(p, out);
  out->address = address;
  out->bytes = S->numel * (int64_t)kiln_dtype_size(S->dtype);
  return KILN_OK;
}

kiln_status kiln_program_read_output(kiln_program *p, int i, void *dst) {
  if (!p || !dst) return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_program_read_output: %s is NULL", p ? "dst" : "program");
  const TE *te = p->te;
  if (i < 0 || i >= te->n_outputs)
    return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_program_read_output: output %d does not exist (0..%d)", i,
                     te->n_outputs - 1);
  return rt_schedule_read_output(p->sched, i, dst);
}

void kiln_program_free(kiln_program *p) {
  if (!p) return;
  for (int i = 0; p->in_strings && i < p->te->n_inputs; i++) arena_free(&p->in_strings[i]);
  kiln_free(p->in_strings);
  arena_free(&p->out_strings);
  kiln_free(p->in_set);
  rt_schedule_free(p->sched);
  te_free(p->te);
  kiln_free(p);
}
