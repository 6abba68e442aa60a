/*
 * test_toy_dialect.c — "one renderer, dialects as tables" is true: a third dialect, a toy
 * defined here with made-up tokens (TOY_TID, toy_barrier(), toy_shared, toyvec4, ...), in a
 * grid form and a loop form, renders every workload of bench/workloads.h, and
 *
 *   - the toy source holds none of the C or CUDA dialects' tokens (threadIdx, __shared__,
 *     float4, INT64_C, int64_t, #pragma omp, restrict, ...) and the toy tokens where the
 *     algorithms need them (the GEMM's barrier, shared tiles, fence, atomic and fma; the
 *     softmax's block reduction; vec4's vector loads; the long row's dynamic shared array);
 *   - mapping each toy token back to the CUDA (grid form) or C (loop form) token of the same
 *     table field gives exactly the CUDA or C source: everything else the renderer writes is
 *     the same for every dialect, so no target token is spelled outside the tables.
 *
 * Format fields are compared piece by piece between their conversions; every piece of a toy
 * field that differs from the real one contains "toy", so the back-mapping cannot touch
 * text that came from elsewhere. The search is checked to find a planted token first.
 */
#include "built.h"

#include <ctype.h>
#include <stddef.h>

#define TOY_TYPES(f16) { \
    [KILN_F32] = "toyF32", [KILN_F64] = "toyF64", [KILN_F16] = f16, [KILN_BF16] = f16, \
    [KILN_I64] = "toyI64", [KILN_I32] = "toyI32", [KILN_I16] = "toyI16", [KILN_I8] = "toyI8", \
    [KILN_U8] = "toyU8", [KILN_U16] = "toyU16", [KILN_U32] = "toyU32", [KILN_U64] = "toyU64", \
    [KILN_BOOL] = "toyU8", }
#define TOY_UNARY(s) { \
    [TU_ABS] = "toy_abs" s, [TU_EXP] = "toy_exp" s, [TU_LOG] = "toy_log" s, [TU_SQRT] = "toy_sqrt" s, \
    [TU_TANH] = "toy_tanh" s, [TU_SIGMOID] = "toy_sigmoid" s, [TU_ERF] = "toy_erf" s, [TU_SIN] = "toy_sin" s, \
    [TU_COS] = "toy_cos" s, [TU_FLOOR] = "toy_floor" s, [TU_CEIL] = "toy_ceil" s, [TU_ROUND] = "toy_round" s, \
    [TU_SIGN] = "toy_sign" s, [TU_ISINF] = "toy_isinf" s, }
#define TOY_BINARY(s) { [TB_POW] = "toy_pow" s, [TB_MAX] = "toy_max" s, [TB_MIN] = "toy_min" s, \
                        [TB_MOD] = "toy_mod" s, [TB_FMOD] = "toy_fmod" s, }

/* The toy grid dialect: CUDA's capabilities under other names. */
static const Dialect toy_grid = {
  .name = "toy",
  .prelude = "/* the toy prelude: toy_block_reduce, toy_warp_reduce, the k_ scalar helpers */\n",
  .index_type = "toyIndex",
  .value_type = TOY_TYPES("toyF32"),
  .store_type = TOY_TYPES("toyU16"),
  .load_fn = { [KILN_F16] = "toy_h2f", [KILN_BF16] = "toy_b2f" },
  .store_fn = { [KILN_F16] = "toy_f2h", [KILN_BF16] = "toy_f2b" },
  .round_fn = { [KILN_F16] = "toy_round_h", [KILN_BF16] = "toy_round_b" },
  .int_lit = "TOY_LIT(%lld)",
  .int_min = { [KILN_I64] = "TOY_I64_MIN", [KILN_I32] = "TOY_I32_MIN", [KILN_I16] = "TOY_I16_MIN", [KILN_I8] = "TOY_I8_MIN" },
  .int_max = { [KILN_I64] = "TOY_I64_MAX", [KILN_I32] = "TOY_I32_MAX", [KILN_I16] = "TOY_I16_MAX", [KILN_I8] = "TOY_I8_MAX",
               [KILN_U8] = "TOY_U8_MAX", [KILN_U16] = "TOY_U16_MAX", [KILN_U32] = "TOY_U32_MAX",
               [KILN_U64] = "TOY_U64_MAX", [KILN_BOOL] = "TOY_TRUE" },
  .float_lit = "%a",
  .f32_suffix = "_TOYF",
  .uint_suffix = "_TOYU",
  .inf_f32 = "TOY_INF32", .inf_f64 = "TOY_INF64", .nan_f32 = "TOY_QNAN32", .nan_f64 = "TOY_QNAN64",
  .unary_f32 = TOY_UNARY("_f"),
  .unary_f64 = TOY_UNARY("_d"),
  .binary_f32 = TOY_BINARY("_f"),
  .binary_f64 = TOY_BINARY("_d"),
  .acc_f32 = true,
  .kernel_prefix = "toy_kernel",
  .buf_param = "%s%s toy_ptr %s b%d",
  .buf_restrict = "toy_noalias",
  .buf_const = "toy_readonly ",
  .grid = true,
  .thread_index = "TOY_GLOBAL_ID",
  .thread_stride = "TOY_GLOBAL_STRIDE",
  .thread_id = "TOY_TID",
  .block_id = "TOY_BID",
  .block_size = "TOY_BDIM",
  .grid_size = "TOY_GDIM",
  .block_bounds = "toy_threads(%d)",
  .block_bounds_min = "toy_threads(%d, %d)",
  .shared_qual = "toy_shared",
  .global_qual = "toy_global",
  .dyn_shared = "toy_dynamic_shared(toy_dyn);",
  .dyn_shared_name = "toy_dyn",
  .barrier = "toy_barrier();",
  .fence = "toy_fence();",
  .atomic_add = "toy_atomic_add(&%s, %s)",
  .counter_type = "toy_counter",
  .cached_load = "toy_load_uncached(%s)",
  .fma = "toy_fma(%s, %s, %s)",
  .unroll = "toy_unroll",
  .vec4_type = "toyvec4",
  .vec4_lane = { ".toy_l0", ".toy_l1", ".toy_l2", ".toy_l3" },
  .vec4_load = "toy_vload(b%d)[%s]",
  .vec4_store = "toy_vstore(b%d)[%s] = %s;",
  .block_reduce = "toy_block_reduce",
  .warp_reduce = "toy_warp_reduce",
  .block_reduce_arg = "toy_block_reduce_arg",
  .warp_reduce_arg = "toy_warp_reduce_arg",
  .reduce_op = { [RO_SUM] = "toy_add()", [RO_PROD] = "toy_mul()", [RO_MAX] = "toy_max()", [RO_MIN] = "toy_min()" },
  .phase_prefix = "toy_phase_routine",
  .phase_thread_index = "TOY_PHASE_GLOBAL_ID",
  .phase_thread_stride = "TOY_PHASE_GLOBAL_STRIDE",
  .kernel_entry = "  toy_wait_for_the_kernel_before();",
  .grid_barrier = "toy_grid_barrier(%s);",
};

/* The loop form: one parallel loop per kernel, C's capabilities under other names. */
static Dialect toy_loop(void) {
  Dialect d = toy_grid;
  d.name = "toy-loop";
  d.grid = false;
  d.acc_f32 = false;
  d.kernel_prefix = "toy_routine";
  d.trampoline = "toy_entry %s(toy_args a, toy_int kiln_tid, toy_int kiln_nt) { %s(";
  d.trampoline_arg = "toy_arg(a)[%d]";
  d.trampoline_end = ", kiln_tid, kiln_nt); toy_end }\n";
  d.team_params = ", toy_int kiln_tid, toy_int kiln_nt";
  d.min_parallel_work = cg_dialect_c.min_parallel_work;
  d.simd = "toy_vector";
  d.simd_len = "toy_vector_len(%d)";
  d.array_align = " toy_aligned";
  d.simd_sum = "toy_vector_sum%s";
  d.simd_reduce = " toy_reduce(%s:%s)";
  d.simd_reduce_op[RO_SUM] = "toy_plus", d.simd_reduce_op[RO_PROD] = "toy_times";
  d.simd_reduce_op[RO_MAX] = "toy_maximum", d.simd_reduce_op[RO_MIN] = "toy_minimum";
  d.simd_reduce_or = "toy_or";
  d.kernel_entry = NULL;
  return d;
}

/* ---- searching the toy source ---- */

static const char *const foreign[] = {
  "threadIdx", "blockIdx", "blockDim", "gridDim", "__syncthreads", "__shared__", "float4", "atomicAdd",
  "__threadfence", "__ldcg", "__fmaf_rn", "__launch_bounds__", "#pragma omp", "#pragma unroll", "INT64_C", "int64_t",
  "extern \"C\"", "__global__", "restrict",
  /* and what else only the C and CUDA tables say */
  "float", "double", "uint8_t", "INFINITY", "K_INFF", "K_NANF", "INT64_MIN", "isinf", "k_rh(", "k_block", "k_warp",
  "k_add()", "k_dyn", "k_maxf", "reduction(", "void ", "__device__", "unsigned int", "expf", "0.0f", "1.0f",
};
enum { N_FOREIGN = sizeof foreign / sizeof foreign[0] };

static const char *find_foreign(const char *src) {
  for (int i = 0; i < N_FOREIGN; i++)
    if (strstr(src, foreign[i])) return foreign[i];
  return NULL;
}

/* ---- mapping toy tokens back ---- */

/* Every string field of a Dialect (the name, prelude and transitional row variant aside). */
#define F(f) { offsetof(Dialect, f), 1, #f }
#define A(f) { offsetof(Dialect, f), (int)(sizeof(((Dialect *)0)->f) / sizeof(const char *)), #f }
static const struct { size_t off; int n; const char *name; } fields[] = {
  F(index_type), A(value_type), A(store_type), A(load_fn), A(store_fn), A(round_fn), F(int_lit), A(int_min),
  A(int_max), F(float_lit), F(f32_suffix), F(uint_suffix), F(inf_f32), F(inf_f64), F(nan_f32), F(nan_f64),
  A(unary_f32), A(unary_f64), A(binary_f32), A(binary_f64), F(kernel_prefix), F(buf_param), F(buf_restrict),
  F(buf_const), F(trampoline), F(trampoline_arg), F(trampoline_end), F(team_params), F(simd), F(simd_len), F(array_align), F(tile),
  F(simd_sum), F(simd_reduce), A(simd_reduce_op), F(simd_reduce_or), F(thread_index), F(thread_stride), F(thread_id),
  F(block_id), F(block_size), F(grid_size), F(block_bounds), F(block_bounds_min), F(shared_qual), F(global_qual),
  F(dyn_shared), F(dyn_shared_name), F(barrier), F(fence), F(atomic_add), F(counter_type), F(cached_load), F(fma),
  F(unroll), F(vec4_type), A(vec4_lane), F(vec4_load), F(vec4_store), F(block_reduce), F(warp_reduce),
  F(block_reduce_arg), F(warp_reduce_arg), A(reduce_op), F(phase_prefix), F(phase_thread_index),
  F(phase_thread_stride), F(kernel_entry), F(grid_barrier),
};

typedef struct Pair { char toy[96], real[96]; } Pair;
typedef struct Map { Pair p[512]; int n; } Map;

static bool has_toy(const char *s) {
  for (; *s; s++)
    if (tolower((unsigned char)s[0]) == 't' && tolower((unsigned char)s[1]) == 'o' && tolower((unsigned char)s[2]) == 'y')
      return true;
  return false;
}

/* The literal pieces of a printf format, between its conversions. */
static int pieces(const char *f, char out[][96], int max) {
  int n = 0;
  size_t len = 0;
  out[0][0] = 0;
  for (const char *c = f; *c && n < max; c++) {
    if (c[0] == '%' && c[1] == '%') { if (len < 95) out[n][len++] = '%'; out[n][len] = 0; c++; continue; }
    if (c[0] != '%') { if (len < 95) out[n][len++] = *c; out[n][len] = 0; continue; }
    while (*c && !strchr("dsaxuc", *c)) c++;  /* flags and length: "%lld" */
    if (!*c) break;
    if (++n < max) out[n][0] = 0, len = 0;
  }
  return n + 1;
}

static void map_add(Map *m, const char *toy, const char *real, const char *field) {
  if (!strcmp(toy, real)) return;
  CHECK_MSG(has_toy(toy) && real[0], "toy table: field %s maps \"%s\" to \"%s\" (a differing piece must say toy)", field,
            toy, real);
  for (int i = 0; i < m->n; i++)
    if (!strcmp(m->p[i].toy, toy)) {
      CHECK_MSG(!strcmp(m->p[i].real, real), "toy table: \"%s\" stands for \"%s\" and \"%s\"", toy, m->p[i].real, real);
      return;
    }
  KILN_ASSERT(m->n < 512);
  size_t lt = strlen(toy), lr = strlen(real);
  KILN_ASSERT(lt < sizeof m->p[0].toy && lr < sizeof m->p[0].real);
  memcpy(m->p[m->n].toy, toy, lt + 1);
  memcpy(m->p[m->n].real, real, lr + 1);
  m->n++;
}

static int longer_first(const void *a, const void *b) {
  return (int)strlen(((const Pair *)b)->toy) - (int)strlen(((const Pair *)a)->toy);
}

/* toy token -> real token for every field the two dialects fill. */
static void build_map(const Dialect *toy, const Dialect *real, Map *m) {
  m->n = 0;
  for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++)
    for (int i = 0; i < fields[f].n; i++) {
      const char *t = ((const char *const *)((const char *)toy + fields[f].off))[i];
      const char *r = ((const char *const *)((const char *)real + fields[f].off))[i];
      if (!t || !r) continue;  /* a field the other form does not use */
      char tp[8][96], rp[8][96];
      int nt = pieces(t, tp, 8), nr = pieces(r, rp, 8);
      CHECK_MSG(nt == nr, "toy table: field %s has %d conversions, the real one %d", fields[f].name, nt - 1, nr - 1);
      for (int k = 0; k < nt && nt == nr; k++) map_add(m, tp[k], rp[k], fields[f].name);
    }
  qsort(m->p, (size_t)m->n, sizeof m->p[0], longer_first);
}

/* s with every toy token replaced (longest first; the real tokens hold no "toy"). */
static char *map_back(const Map *m, const char *s) {
  char *cur = strdup(s);
  for (int i = 0; cur && i < m->n; i++) {
    const char *t = m->p[i].toy, *r = m->p[i].real;
    size_t tl = strlen(t), rl = strlen(r), n = 0;
    for (const char *q = strstr(cur, t); q; q = strstr(q + tl, t)) n++;
    if (!n) continue;
    char *out = malloc(strlen(cur) + n * rl + 1), *o = out;
    if (!out) { free(cur); return NULL; }
    const char *q = cur;
    for (const char *h = strstr(q, t); h; h = strstr(q, t)) {
      memcpy(o, q, (size_t)(h - q)), o += h - q;
      memcpy(o, r, rl), o += rl;
      q = h + tl;
    }
    strcpy(o, q);
    free(cur);
    cur = out;
  }
  return cur;
}

/* Line number and text of the first difference of a and b. */
static void first_difference(const char *a, const char *b, char *out, size_t n) {
  int line = 1;
  const char *la = a, *lb = b;
  while (*a && *a == *b) {
    if (*a == '\n') line++, la = a + 1, lb = b + 1;
    a++, b++;
  }
  int ea = (int)strcspn(la, "\n"), eb = (int)strcspn(lb, "\n");
  snprintf(out, n, "line %d:\n  toy mapped back: %.*s\n  real:            %.*s", line, ea, la, eb, lb);
}

/* ---- rendering the workloads ---- */

typedef struct Src { char *toy, *real; int kernels; } Src;

/* The workload's source in the toy dialect and in the real one (prelude stripped). */
static bool render(const char *name, const Dialect *toy, const Dialect *real, const CgOptions *o, int fuse, Src *s) {
  TE *te = NULL;
  Plan *p = NULL;
  CgProgram *gt = NULL, *gr = NULL;
  kiln_options ko = kiln_options_default();
  ko.fuse = fuse;
  PlanOptions po = plan_options(&ko);
  memset(s, 0, sizeof *s);
  /* built once a process (built.h): drawing a workload's random parameters for each of its nine
   * renders was four fifths of this test's time */
  const Workload *w = built_workload(name);
  if (w->g) OK(te_lower(&w->g->g, &te));
  if (te) OK(plan_build(te, &po, &p));
  if (p) OK(cg_program_build(p, real, o, &gr));
  if (p) OK(cg_program_build(p, toy, o, &gt));
  if (gt && gr) {
    StrBuf pt = { 0 }, pr = { 0 };
    cg_render_prelude(toy, &pt);
    cg_render_prelude(real, &pr);
    CHECK(!pt.failed && !pr.failed && !strncmp(gt->source.s, pt.s, pt.len) && !strncmp(gr->source.s, pr.s, pr.len));
    s->toy = strdup(gt->source.s + pt.len);
    s->real = strdup(gr->source.s + pr.len);
    sb_free(&pt);
    sb_free(&pr);
    for (int i = 0; i < p->n_kernels; i++) s->kernels += p->kernels[i].kind != KN_HOST && p->kernels[i].chain >= 0;
  }
  cg_program_free(gt);
  cg_program_free(gr);
  plan_free(p);
  te_free(te);
  return s->toy && s->real;
}

static int occurrences(const char *s, const char *what) {
  int n = 0;
  for (const char *q = strstr(s, what); q; q = strstr(q + 1, what)) n++;
  return n;
}

/* Renders a workload both ways; checks the toy text is foreign-free, complete and maps back.
 * Returns the toy source (caller frees) for the pins. */
static char *check(const char *name, const Dialect *toy, const Dialect *real, const Map *m, const CgOptions *o,
                   int fuse) {
  Src s;
  if (!render(name, toy, real, o, fuse, &s)) {
    CHECK_MSG(false, "%s (%s): nothing rendered", name, toy->name);
    return NULL;
  }
  const char *bad = find_foreign(s.toy);
  CHECK_MSG(!bad, "%s (%s, row %s, fuse %d): \"%s\" in the toy source", name, toy->name,
            cg_row_variant_name(o->row_variant), fuse, bad);
  CHECK_MSG(occurrences(s.toy, " items, ") == s.kernels, "%s (%s): %d kernels in the source, %d in the plan", name,
            toy->name, occurrences(s.toy, " items, "), s.kernels);
  char *back = map_back(m, s.toy);
  CHECK(back != NULL);
  if (back && strcmp(back, s.real)) {
    char diff[600];
    first_difference(back, s.real, diff, sizeof diff);
    CHECK_MSG(false, "%s (%s, row %s, fuse %d): the toy source is not the %s source renamed, at %s", name, toy->name,
              cg_row_variant_name(o->row_variant), fuse, real->name, diff);
  }
  free(back);
  free(s.real);
  return s.toy;
}

static void pin(const char *src, const char *name, const char *const *want, int n) {
  for (int i = 0; src && i < n; i++) CHECK_MSG(strstr(src, want[i]), "%s: no \"%s\" in the toy source", name, want[i]);
}

int main(void) {
  /* the search finds what it looks for */
  CHECK(find_foreign("x = 1;\n  __syncthreads();\n") && find_foreign("const int64_t v0 = 0;") && !find_foreign("toy_barrier();"));
  CHECK(has_toy("a TOY b") && !has_toy("tomato"));
  char pc[8][96];
  CHECK(pieces("((const float4 *)b%d)[%s]", pc, 8) == 3 && !strcmp(pc[0], "((const float4 *)b") && !strcmp(pc[1], ")[") &&
        !strcmp(pc[2], "]"));
  CHECK(pieces("INT64_C(%lld)", pc, 8) == 2 && !strcmp(pc[0], "INT64_C(") && !strcmp(pc[1], ")"));

  Dialect loop = toy_loop();
  Map *mg = calloc(1, sizeof *mg), *ml = calloc(1, sizeof *ml);
  KILN_ASSERT(mg && ml);
  build_map(&toy_grid, &cg_dialect_cuda, mg);
  build_map(&loop, &cg_dialect_c, ml);
  CHECK(mg->n > 60 && ml->n > 50);

  CgOptions dflt = cg_options_default(), wvec = dflt, p16vec = dflt, base = dflt, nosplit = dflt;
  wvec.row_variant = cg_row_variant("wveclong");
  p16vec.row_variant = cg_row_variant("p16vec");
  base.row_variant = cg_row_variant("base");
  nosplit.splitk = CG_SPLITK_OFF;
  const CgOptions *grid_opts[] = { &dflt, &wvec, &p16vec, &base, &nosplit };
  for (int i = 0; i < wl_n_standard; i++) {
    const char *name = wl_standard[i];
    for (size_t v = 0; v < sizeof grid_opts / sizeof grid_opts[0]; v++) free(check(name, &toy_grid, &cg_dialect_cuda, mg, grid_opts[v], 1));
    free(check(name, &toy_grid, &cg_dialect_cuda, mg, &dflt, 0));
    free(check(name, &loop, &cg_dialect_c, ml, &dflt, 1));
    free(check(name, &loop, &cg_dialect_c, ml, &dflt, 0));
  }

  /* the toy tokens where the algorithms need them */
  char *s = check("mlp_fwd_b128", &toy_grid, &cg_dialect_cuda, mg, &dflt, 1);  /* split-K GEMMs */
  pin(s, "mlp_fwd_b128", (const char *const[]){ "toy_shared toyvec4 Asv[", "toy_barrier();", "toy_fence();",
      "toy_atomic_add(&kiln_arrived", "toy_load_uncached(tp + q * TOY_LIT(", "toy_fma(ra[i], rb[j], cacc[i][j])",
      "toy_global toy_counter kiln_arrived", "toy_unroll", "TOY_TID", "TOY_BID", "TOY_GDIM", "toy_threads(256)",
      "1_TOYU", "toy_kernel toy_threads(256) kiln_k0(toy_readonly toyF32 toy_ptr toy_noalias b0" }, 14);
  free(s);
  s = check("softmax_4096x1024", &toy_grid, &cg_dialect_cuda, mg, &dflt, 1);  /* a block per row */
  pin(s, "softmax_4096x1024", (const char *const[]){ "= toy_block_reduce(a", "toy_max()", "toy_add()", "toy_exp_f(" }, 4);
  free(s);
  s = check("mlp_train_b1024", &toy_grid, &cg_dialect_cuda, mg, &dflt, 1);  /* column sums: one pass, a store per row */
  pin(s, "mlp_train_b1024", (const char *const[]){ "r += TOY_BDIM", "if (TOY_TID == 0) b" }, 2);
  free(s);
  s = check("softmax_4096x128", &toy_grid, &cg_dialect_cuda, mg, &dflt, 1);  /* a warp per row */
  pin(s, "softmax_4096x128", (const char *const[]){ "= toy_warp_reduce(a", "const int kt = TOY_TID & 31;" }, 2);
  free(s);
  s = check("softmax_256x32768", &toy_grid, &cg_dialect_cuda, mg, &dflt, 1);  /* long rows: dynamic shared */
  pin(s, "softmax_256x32768", (const char *const[]){ "toy_dynamic_shared(toy_dyn);", "toy_dyn[(", "toy_threads(1024, 2)" }, 3);
  free(s);
  s = check("softmax_4096x1024", &toy_grid, &cg_dialect_cuda, mg, &p16vec, 1);  /* vector rows */
  pin(s, "softmax_4096x1024 p16vec", (const char *const[]){ "toyvec4 w0;", "w0 = toy_vload(b0)[vq >> 2];", ".toy_l3;",
      "toy_vstore(b1)[vq >> 2] = y" }, 4);
  free(s);
  s = check("chain10_16M", &toy_grid, &cg_dialect_cuda, mg, &dflt, 1);  /* vec4 pointwise */
  pin(s, "chain10_16M", (const char *const[]){ "const toyvec4 w0 = toy_vload(b0)[q];", "for (toyIndex q = TOY_GLOBAL_ID;",
      "q += TOY_GLOBAL_STRIDE", "y0.toy_l2 = s" }, 4);
  free(s);
  s = check("bert_layer_b8s128", &toy_grid, &cg_dialect_cuda, mg, &dflt, 1);
  pin(s, "bert_layer_b8s128", (const char *const[]){ "toy_tanh_f(", "TOY_LIT(" }, 2);
  free(s);
  /* an attention chain (KILN_ATTENTION=1): blocks with vector products, shared rows and warp
   * reductions in the grid form, loops over rows in the loop form */
  setenv("KILN_ATTENTION", "1", 1);
  s = check("bert_layer_b8s128", &toy_grid, &cg_dialect_cuda, mg, &dflt, 1);
  pin(s, "bert_layer_b8s128 chain", (const char *const[]){ "toy_dynamic_shared(toy_dyn);", "*Ks = toy_dyn + ",
      "const toyvec4 y4 = *(const toyvec4 *)&Ks[", "= toy_warp_reduce(a", "toy_fma(p4.toy_l0, w4[0].toy_l0, o4[i][0])" }, 5);
  free(s);
  s = check("bert_layer_b8s128", &loop, &cg_dialect_c, ml, &dflt, 1);
  pin(s, "bert_layer_b8s128 chain (loop)", (const char *const[]){ "toyF32 kS[128];", "kS[q] = s15;" }, 2);
  free(s);
  unsetenv("KILN_ATTENTION");
  s = check("mlp_fwd_b128", &loop, &cg_dialect_c, ml, &dflt, 1);  /* loop form: the trampolines, a thread's share */
  pin(s, "mlp_fwd_b128 (loop)", (const char *const[]){
      "toy_entry kiln_e0(toy_args a, toy_int kiln_tid, toy_int kiln_nt) { kiln_k0(toy_arg(a)[0]",
      ", kiln_tid, kiln_nt); toy_end }", ", toy_int kiln_tid, toy_int kiln_nt) {", "* kiln_tid / kiln_nt;",
      "toy_routine kiln_k0(" }, 5);
  free(s);
  s = check("cnn_train_b32", &loop, &cg_dialect_c, ml, &dflt, 1);  /* vector loops and their reduction clauses */
  pin(s, "cnn_train_b32 (loop)", (const char *const[]){ "toy_vector\n", "toy_vector_sum toy_reduce(toy_plus:a",
      "toy_maximum:a", "toy_or:an", "TOY_INF32" }, 5);
  free(s);
  free(mg);
  free(ml);
  TEST_MAIN_END();
}
