/* The cpu backend's register tiles (src/codegen/cpu_tile.c): contractions the library GEMM
 * does not take run as packed-panel tiles with their operands read through the plan's
 * expressions. Convolutions with padding, stride, dilation, groups (depthwise), tails in
 * every dimension and a bias + relu epilogue; a batched product with a short sum and a
 * transposed operand; each against ref, and the printed plan says which kernels are tiles
 * (none with cpu_tiles = 0). A depthwise convolution is no tile: its 3x3 window is summed in a
 * register at each pixel (render.c's render_window; its rows and columns split into border
 * and interior, the interior without the padding's guards), which the plan says too (none with
 * cpu_windows = 0), against ref either way; so is the same with a dilated, strided window, and
 * a convolution of one input channel (9 points a sum: a window, a tile only without windows),
 * its interior rows longer than 16 points in chunks of 16, the last moved back. A
 * window read along the last dim is packed in runs (through the padding's guard, its clamps
 * dropped: with a stride of 1 masked vector loops, with a larger one the lanes where the guard
 * holds found at the run's ends and copied by one strided loop), which the plan says.
 * Weights too many to pack once (256 KiB) are read in place, row by row, which the plan says.
 * Rows that are packed (computed) and too many to pack once go with panels in groups of up to
 * 512 KiB, not 128, each group packing them again, which the plan and the source say.
 * With the defaults, a convolution whose window has at least 2 x 2 taps, strides up to the
 * window's (a row of the plane in phases when its columns stride), runs direct (a depthwise or
 * grouped one a plane a channel, in flat planes where those compute fewer vectors, else from
 * 256 outputs a plane; a dilation whose taps only ever read every other row is a plane of
 * those rows) on a host with AVX2 or AVX-512 (src/codegen/cpu_direct.c: a zero-padded plane
 * an image, sums of channel x row blocks in vector registers), which the plan says; the cases
 * above run with cpu_direct = 0 as well, so each path is checked against ref. Pools whose
 * output rows the vector width does not divide (14, 7, 20, a 3x3 window's 14) run in chunks of
 * 8, 4 and 16, the last moved back, which the generated C says (rows of 16, and padded rows,
 * whole), max with NaN inputs and average, against ref. */
#include "test.h"
#include "codegen/codegen.h"
#include "graph/graph.h"
#include "runtime/runtime.h"

#include <stdio.h>

static int count_in_plan(kiln_program *p, const char *what) {
  char *text = test_program_text(p);
  if (!text) return -1;
  int n = 0;
  for (const char *at = text; (at = strstr(at, what)); at++) n++;
  free(text);
  return n;
}

/* The C source of g's plan under options o (sb_free it): as the cpu backend renders it (its
 * codegen options from o) when `as_run`, else under the renderer's defaults. */
static StrBuf c_source(kiln_graph *g, const kiln_options *o, bool as_run) {
  TE *te = NULL;
  Plan *pl = NULL;
  StrBuf src = { 0 };
  CgOptions co = cg_options_default();
  if (as_run) OK(rt_codegen_options(o, &cg_dialect_c, &co));
  PlanOptions po = plan_options(o);
  if (as_run) rt_plan_renderer(o, &cg_dialect_c, &co, &po);
  OK(te_lower(&g->g, &te));
  if (te) OK(plan_build(te, &po, &pl));
  if (pl) OK(cg_render_plan(pl, &cg_dialect_c, as_run ? &co : NULL, NULL, &src));
  plan_free(pl);
  te_free(te);
  return src;
}

static float *alloc_f32(int64_t n) {
  float *p = calloc((size_t)n, sizeof *p);
  if (!p) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  return p;
}

/* The f32 lanes the cpu backend blocks direct convolutions for (0: it runs none). */
static int host_lanes(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return 16;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 8;
#endif
  return 0;
}

/* KILN_CPU_DIRECT=8|16: the lanes the cpu backend blocks for whatever the host (0: not forced) */
static int lanes_forced(void) {
  const char *e = getenv("KILN_CPU_DIRECT");
  return e ? atoi(e) == 8 ? 8 : atoi(e) == 16 ? 16 : 0 : 0;
}

/* The lanes direct convolutions are blocked for in this run */
static int lanes(void) { return lanes_forced() ? lanes_forced() : host_lanes(); }

/* How many of n outputs differ from ref's beyond 2e-5 relative (NaN only for NaN, an infinity
 * only for itself); nans (may be NULL) gets how many of ref's are NaN. */
static int differ(const float *got, const float *want, int64_t n, int *nans) {
  int bad = 0;
  for (int64_t i = 0; i < n; i++) {
    bad += isnan(want[i])   ? !isnan(got[i])
           : isinf(want[i]) ? got[i] != want[i]
                            : !(fabs((double)got[i] - want[i]) <= 2e-5 * (1 + fabs((double)want[i])));
    if (nans) *nans += isnan(want[i]);
  }
  return bad;
}

/* got against ref's want (differ), every output, and at least one NaN in want: the input's
 * NaN reached an output, as it must. */
static void check_against_ref(const float *got, const float *want, int64_t n, const char *name) {
  int nans = 0, bad = differ(got, want, n, &nans);
  CHECK_MSG(bad == 0, "%s: %d outputs differ from ref", name, bad);
  CHECK_MSG(nans > 0, "%s: the NaN reached no output", name);
}

/* g compiled on ref and run once on ins into outs (the references); NULL if it did not compile. */
static kiln_program *ref_run(kiln_graph *g, const void *const *ins, void *const *outs) {
  kiln_options o = kiln_options_default();
  o.backend = "ref";
  kiln_program *r = NULL;
  OK(kiln_program_compile(g, &o, &r));
  if (r) OK(kiln_program_run(r, ins, outs));
  return r;
}

/* g (one input, in; one output of n points) compiled for cpu with the defaults and run against
 * ref; the program, for the caller's checks of its plan (and to free). */
static kiln_program *cpu_against_ref(kiln_graph *g, const float *in, int64_t n, const char *name) {
  float *got = alloc_f32(n), *want = alloc_f32(n);
  const void *ins[1] = { in };
  void *og[1] = { want };
  kiln_program *r = ref_run(g, ins, og);
  kiln_options o = kiln_options_default();
  o.backend = "cpu";
  kiln_program *p = NULL;
  OK(kiln_program_compile(g, &o, &p));
  if (r && p) {
    og[0] = got;
    OK(kiln_program_run(p, ins, og));
    check_against_ref(got, want, n, name);
  }
  kiln_program_free(r);
  free(got), free(want);
  return p;
}

static float val(int64_t i, int salt) { return (float)((i * 37 + salt * 11) % 23 - 11) / 16.0f; }

/* The largest error of got against want relative to 1 + |want| (a NaN is the worst). */
static double worst_of(const float *got, const float *want, int64_t n) {
  double worst = 0;
  for (int64_t i = 0; i < n; i++) {
    double e = fabs((double)got[i] - want[i]) / (1 + fabs((double)want[i]));
    if (!(e <= worst)) worst = e;
  }
  return worst;
}

/* Compiles g on cpu (direct convolutions off: tiles and windows on; tiles off; windows off)
 * and on ref, runs each on the same inputs and compares the one output; tiles on must give
 * `want_tiles` tile kernels, windows on `want_windows` window kernels, of which `window_tiles`
 * are tiles packed in runs when windows are off (a sum of at most 16 points both can take goes
 * to the window). Then with the defaults, where `want_direct` kernels are direct convolutions
 * (none on a host without AVX2), against ref again. */
static void compare_direct_lanes(const char *name, kiln_graph *g, int n_in, const int64_t *in_numel, int64_t out_numel,
                                 int want_tiles, int want_windows, int want_runs, int want_in_place, int window_tiles,
                                 int want_direct, int want_flat, int want_channels) {
  float *in[4] = { 0 }, *got = alloc_f32(out_numel), *want = alloc_f32(out_numel);
  const void *ins[4];
  for (int i = 0; i < n_in; i++) {
    in[i] = alloc_f32(in_numel[i]);
    for (int64_t j = 0; j < in_numel[i]; j++) in[i][j] = val(j, 3 + i);
    ins[i] = in[i];
  }
  kiln_options o = kiln_options_default();
  o.backend = "ref";
  kiln_program *r = NULL;
  OK(kiln_program_compile(g, &o, &r));
  void *ow[1] = { want };
  if (r) OK(kiln_program_run(r, ins, ow));
  /* cpu_tiles, cpu_windows, cpu_run_ends */
  static const int configs[4][3] = { { 1, 1, 1 }, { 0, 1, 1 }, { 1, 0, 1 }, { 1, 1, 0 } };
  for (int c = 0; c < 6 && r; c++) {
    o = kiln_options_default();
    o.backend = "cpu";
    kiln_program *p = NULL;
    void *og[1] = { got };
    if (c == 5) {  /* channel lanes wherever they can (want_channels of them; -1: not counted) */
      o.cpu_channel_lanes = 2;
      o.cpu_winograd = 0;  /* the window's sum (winograd_cases has Winograd's) */
      OK(kiln_program_compile(g, &o, &p));
      if (!p) break;
      int nc = count_in_plan(p, "channels in lanes"), want_c = host_lanes() ? want_channels : 0;
      CHECK_MSG(want_channels < 0 || nc == want_c, "%s: %d convolutions in channel lanes (want %d)", name, nc, want_c);
      /* each tap's weight vectors loaded once, kept in registers for every pixel (K_KEEP) */
      StrBuf src = c_source(g, &o, true);
      CHECK_MSG(!src.s || (nc > 0) == (strstr(src.s, "K_KEEP(kiln_w[kiln_u])") != NULL), "%s: %d channel-lane kernels, weights %s",
                name, nc, src.s && strstr(src.s, "K_KEEP(kiln_w[kiln_u])") ? "kept" : "not kept");
      sb_free(&src);
      for (int64_t i = 0; i < out_numel; i++) got[i] = NAN;
      OK(kiln_program_run(p, ins, og));
      double worst = worst_of(got, want, out_numel);
      CHECK_MSG(worst <= 2e-5, "%s (channel lanes): worst relative error %.3g", name, worst);
      kiln_program_free(p);
      break;
    }
    if (c == 4) {  /* the defaults, the pixel forms: direct convolutions along rows or flat planes */
      o.cpu_channel_lanes = 0;
      OK(kiln_program_compile(g, &o, &p));
      if (!p) break;
      int nd = count_in_plan(p, "direct convolution"), want_d = host_lanes() ? want_direct : 0;
      CHECK_MSG(nd == want_d, "%s: %d direct convolutions (want %d)", name, nd, want_d);
      int nf = count_in_plan(p, "flat planes"), want_f = host_lanes() ? want_flat : 0;
      CHECK_MSG(nf == want_f, "%s: %d direct convolutions in flat planes (want %d)", name, nf, want_f);
      /* each tap's row vectors loaded once, kept in registers for every output channel (K_KEEP) */
      StrBuf src = c_source(g, &o, true);
      bool kept = src.s && strstr(src.s, "K_KEEP(kiln_x[") != NULL;
      CHECK_MSG(!src.s || (nd > 0) == kept, "%s: %d direct convolutions, row vectors %s", name, nd, kept ? "kept" : "not kept");
      sb_free(&src);
      for (int64_t i = 0; i < out_numel; i++) got[i] = NAN;  /* nothing left from the run before */
      OK(kiln_program_run(p, ins, og));
      double worst = worst_of(got, want, out_numel);
      CHECK_MSG(worst <= 2e-5, "%s (defaults, direct): worst relative error %.3g", name, worst);
      kiln_program_free(p);
      continue;
    }
    int tiles = configs[c][0], windows = configs[c][1], ends = configs[c][2];
    int want_t = want_tiles + (windows ? 0 : window_tiles), want_r = want_runs + (windows ? 0 : window_tiles);
    o.cpu_tiles = tiles;
    o.cpu_windows = windows;
    o.cpu_run_ends = ends;
    o.cpu_direct = 0;
    OK(kiln_program_compile(g, &o, &p));
    if (!p) break;
    int n = count_in_plan(p, "register tiles"), nw = count_in_plan(p, "window sums");
    int nr = count_in_plan(p, "window packed in runs"), ni = count_in_plan(p, "rows read in place");
    CHECK_MSG(ni == (tiles ? want_in_place : 0), "%s: %d tiles reading their rows in place (want %d)", name, ni,
              tiles ? want_in_place : 0);
    CHECK_MSG(nr == (tiles ? want_r : 0), "%s: %d tiles packing their window in runs (want %d)", name, nr,
              tiles ? want_r : 0);
    /* every run is copied from its ends (its guard an interval of the run, or none) unless
     * cpu_run_ends is off: then only strided runs are */
    int n_ends = count_in_plan(p, "runs from their ends"), n_strided = count_in_plan(p, "runs (strided)");
    CHECK_MSG(n_ends == (ends ? nr - n_strided : 0), "%s (cpu_run_ends %d): %d of %d runs (%d strided) from their ends", name,
              ends, n_ends, nr, n_strided);
    /* and the source finds the ends (kiln_ia) just where the plan says */
    StrBuf src = c_source(g, &o, true);
    bool from_ends = src.s && strstr(src.s, "kiln_ia") != NULL;
    CHECK_MSG(!src.s || from_ends == (n_ends + n_strided > 0), "%s (cpu_run_ends %d): %d runs from their ends, %s in the source",
              name, ends, n_ends + n_strided, from_ends ? "kiln_ia" : "no kiln_ia");
    sb_free(&src);
    CHECK_MSG(n == (tiles ? want_t : 0), "%s: %d tile kernels with cpu_tiles = %d, cpu_windows = %d (want %d)", name, n,
              tiles, windows, tiles ? want_t : 0);
    CHECK_MSG(nw == (windows ? want_windows : 0), "%s: %d window kernels with cpu_windows = %d (want %d)", name, nw,
              windows, windows ? want_windows : 0);
    for (int64_t i = 0; i < out_numel; i++) got[i] = NAN;  /* nothing left from the run before */
    OK(kiln_program_run(p, ins, og));
    double worst = worst_of(got, want, out_numel);
    CHECK_MSG(worst <= 2e-5, "%s (cpu_tiles %d, cpu_windows %d, cpu_run_ends %d): worst relative error %.3g", name, tiles,
              windows, ends, worst);
    kiln_program_free(p);
  }
  kiln_program_free(r);
  for (int i = 0; i < n_in; i++) free(in[i]);
  free(got);
  free(want);
}

static void compare_direct(const char *name, kiln_graph *g, int n_in, const int64_t *in_numel, int64_t out_numel,
                           int want_tiles, int want_windows, int want_runs, int want_in_place, int window_tiles,
                           int want_direct, int want_flat) {
  compare_direct_lanes(name, g, n_in, in_numel, out_numel, want_tiles, want_windows, want_runs, want_in_place, window_tiles,
                       want_direct, want_flat, -1);
}

static void compare(const char *name, kiln_graph *g, int n_in, const int64_t *in_numel, int64_t out_numel,
                    int want_tiles, int want_windows, int want_runs, int want_in_place, int window_tiles) {
  compare_direct(name, g, n_in, in_numel, out_numel, want_tiles, want_windows, want_runs, want_in_place, window_tiles, 0, 0);
}

typedef struct ConvCase {
  const char *name;
  int64_t n, c, h, w, m, kh, kw, stride, dilation, pad, group;
  bool bias_relu;
  int tiles;   /* tile kernels expected: a grouped convolution's channel var is read by both operands
                  (a batch var), which leaves one row a tile: the dot-product loops keep it */
  int windows; /* window kernels expected (a depthwise convolution's) */
  int runs;    /* tiles whose window is packed in runs (a stride of 1 along the last dim) */
  int in_place; /* tiles reading the weights in place (too many to pack once: 256 KiB) */
  int window_tiles; /* windows that are tiles packed in runs without cpu_windows (one input channel) */
  int direct;   /* direct convolutions with the defaults (on a host with AVX2 or AVX-512): a window of
                   at least 2 x 2, strides at most the window, no dilation (by channel: 256 outputs) */
  int64_t row_stride;  /* the stride along rows when not `stride` (0) */
  int flat;     /* of those, in flat planes (rows the lanes do not divide, the cost model's choice;
                   by channel: rows of whole vectors): at 16 lanes, at 8 (KILN_CPU_DIRECT=8) */
  int flat8;
  int ring;     /* no direct form, but channel lanes where asked: a plane past their 1 MiB, kept as a
                   ring of rows (from 8 output channels at 8 lanes) */
} ConvCase;

/* c's convolution (and its bias and relu) as a graph: y = conv(x); w's values into w (freed by
 * the caller) */
static kiln_graph *conv_graph(const ConvCase *c, float **w) {
  kiln_graph *g;
  OK(kiln_graph_create(&g));
  int64_t xs[4] = { c->n, c->c, c->h, c->w }, ws[4] = { c->m, c->c / c->group, c->kh, c->kw }, bs[1] = { c->m };
  int64_t wn = ws[0] * ws[1] * ws[2] * ws[3];
  float *wv = alloc_f32(wn), bias[64];
  for (int64_t i = 0; i < wn; i++) wv[i] = val(i, 1);
  for (int i = 0; i < 64; i++) bias[i] = val(i, 2);
  kiln_tensor x, wp, b = { -1 }, y;
  OK(kiln_graph_input(g, "x", KILN_F32, 4, xs, &x));
  OK(kiln_graph_param(g, "w", KILN_F32, 4, ws, wv, &wp));
  if (c->bias_relu) OK(kiln_graph_param(g, "b", KILN_F32, 1, bs, bias, &b));
  kiln_conv_params p = { .spatial = 2, .strides = { c->row_stride ? c->row_stride : c->stride, c->stride }, .dilations = { c->dilation, c->dilation },
                         .pads = { c->pad, c->pad, c->pad, c->pad }, .group = c->group };
  OK(kiln_graph_conv(g, x, wp, b, &p, &y));
  if (c->bias_relu) OK(kiln_graph_unary(g, KILN_RELU, y, &y));
  OK(kiln_graph_output(g, y, "y"));
  *w = wv;
  return g;
}

static void conv_case(const ConvCase *c) {
  float *w = NULL;
  kiln_graph *g = conv_graph(c, &w);
  kiln_tensor_info info;
  OK(kiln_graph_output_info(g, 0, &info));
  int64_t out = info.numel;
  int64_t in_numel[1] = { c->n * c->c * c->h * c->w };
  /* channel lanes wherever a direct convolution reads constant weights for a vector of channels */
  int channels = c->group == 1 && c->m >= lanes() ? c->direct || c->ring : 0;
  compare_direct_lanes(c->name, g, 1, in_numel, out, c->tiles, c->windows, c->runs, c->in_place, c->window_tiles, c->direct,
                       lanes() == 8 ? c->flat8 : c->flat, channels);
  /* the task's shape at 16 lanes: 8 channels x 2 rows for lenet's rows of 14 (7 tasks a
   * column), not x 3 (5, 15 rows computed) */
  if (lanes() == 16 && c->h == 14 && c->m == 32) {
    kiln_options o = kiln_options_default();
    o.backend = "cpu";
    o.cpu_channel_lanes = 0;
    kiln_program *p = NULL;
    OK(kiln_program_compile(g, &o, &p));
    const char *task = "8 channels x 2 rows x 1 vectors a task";
    CHECK_MSG(p && count_in_plan(p, task) == 1, "%s: no direct task of %s", c->name, task);
    kiln_program_free(p);
  }
  free(w);
  kiln_graph_free(g);
}

/* y[b] = x[b] @ w^T with a sum of 24 points (below the library's 128) and w read through a
 * transpose: a batched tile product. */
static void short_batched_product(void) {
  kiln_graph *g;
  OK(kiln_graph_create(&g));
  int64_t xs[3] = { 3, 37, 24 }, ws[3] = { 3, 29, 24 };
  kiln_tensor x, w, wt, y;
  OK(kiln_graph_input(g, "x", KILN_F32, 3, xs, &x));
  OK(kiln_graph_input(g, "w", KILN_F32, 3, ws, &w));
  int perm[3] = { 0, 2, 1 };
  OK(kiln_graph_transpose(g, w, perm, &wt));
  OK(kiln_graph_matmul(g, x, wt, &y));
  OK(kiln_graph_output(g, y, "y"));
  int64_t in_numel[2] = { 3 * 37 * 24, 3 * 29 * 24 };
  compare("short batched product", g, 2, in_numel, 3 * 37 * 29, 1, 0, 0, 1, 0);
  kiln_graph_free(g);
}

/* y = a^T @ b, a [K, 29] and b [K, 37]: neither operand runs along k, so both are packed a
 * point at a time across their lanes (a weight's columns), with tails in both panels. */
static void product_across_k(int64_t K) {
  kiln_graph *g;
  OK(kiln_graph_create(&g));
  int64_t as[2] = { K, 29 }, bs[2] = { K, 37 };
  kiln_tensor a, at, b, y;
  OK(kiln_graph_input(g, "a", KILN_F32, 2, as, &a));
  OK(kiln_graph_input(g, "b", KILN_F32, 2, bs, &b));
  int perm[2] = { 1, 0 };
  OK(kiln_graph_transpose(g, a, perm, &at));
  OK(kiln_graph_matmul(g, at, b, &y));
  OK(kiln_graph_output(g, y, "y"));
  int64_t in_numel[2] = { K * 29, K * 37 };
  compare(K > 4096 ? "product across k, a long sum in f32 spans added in f64" : "product across k", g, 2, in_numel,
          29 * 37, 1, 0, 0, 0, 0);
  kiln_graph_free(g);
}

/* A 3x3 convolution (zero padding 1) of an input padded at its edges first (edge mode, 2 on
 * each side of the last dim): the window's operand holds the edge's clamp inside the
 * padding's guard, which does not imply it, so packing in runs must keep that clamp (the
 * guard's own clamps go). */
static void conv_of_edge_padded(void) {
  kiln_graph *g;
  OK(kiln_graph_create(&g));
  int64_t xs[4] = { 2, 3, 7, 10 }, ws[4] = { 8, 3, 3, 3 }, pads[8] = { 0, 0, 0, 2, 0, 0, 0, 2 };
  float w[8 * 3 * 3 * 3];
  for (int i = 0; i < 8 * 27; i++) w[i] = val(i, 1);
  kiln_tensor x, xp, wp, y;
  OK(kiln_graph_input(g, "x", KILN_F32, 4, xs, &x));
  OK(kiln_graph_pad(g, x, pads, KILN_PAD_EDGE, 0, &xp));
  OK(kiln_graph_param(g, "w", KILN_F32, 4, ws, w, &wp));
  kiln_conv_params p = { .spatial = 2, .strides = { 1, 1 }, .dilations = { 1, 1 }, .pads = { 1, 1, 1, 1 }, .group = 1 };
  OK(kiln_graph_conv(g, xp, wp, (kiln_tensor){ -1 }, &p, &y));
  OK(kiln_graph_output(g, y, "y"));
  int64_t in_numel[1] = { 2 * 3 * 7 * 10 };
  /* direct by default: the plane is the operand itself, the edge's clamp inside its guard */
  compare_direct("convolution of an edge-padded input", g, 1, in_numel, 2 * 8 * 7 * 14, 1, 0, 1, 0, 0, 1, 0);
  kiln_graph_free(g);
}

/* relu(conv + b) under a 2x2 max pool: with cpu_epilogue (the default) the convolution's kernel
 * stores the relu, which the plan says, and the pool takes plain maxima of it; without, the pool
 * computes the relu at every tap. Two kernels either way, each against ref, NaN in the input
 * included (the pool's maximum must keep it). */
/* max_pool(relu(conv(x) + b)), 2x2 windows at stride 2, at h x w (the last rows and columns
 * dropped when odd), with a NaN in x: the relu stored by the conv's epilogue (cpu_epilogue) or
 * recomputed in the pool's loop; with cpu_pool (and a direct convolution on this host) the pool
 * taken in the conv's epilogue, one launch, when the windows tile the conv's output and nothing
 * else reads it (`shared`: the relu an output too); each against ref, NaN for NaN. */
static void pool_case(int64_t h, int64_t w, bool shared, int epilogue, int pool, int want_launches) {
  kiln_graph *g;
  OK(kiln_graph_create(&g));
  int64_t xs[4] = { 2, 3, h, w }, ws[4] = { 8, 3, 3, 3 }, bs[1] = { 8 }, ho = h / 2, wo = w / 2;
  float wt[8 * 27], bias[8];
  for (int i = 0; i < 8 * 27; i++) wt[i] = val(i, 1);
  for (int i = 0; i < 8; i++) bias[i] = val(i, 2);
  kiln_tensor x, wp, b, y, z;
  OK(kiln_graph_input(g, "x", KILN_F32, 4, xs, &x));
  OK(kiln_graph_param(g, "w", KILN_F32, 4, ws, wt, &wp));
  OK(kiln_graph_param(g, "b", KILN_F32, 1, bs, bias, &b));
  kiln_conv_params cp = { .spatial = 2, .strides = { 1, 1 }, .dilations = { 1, 1 }, .pads = { 1, 1, 1, 1 }, .group = 1 };
  OK(kiln_graph_conv(g, x, wp, b, &cp, &y));
  OK(kiln_graph_unary(g, KILN_RELU, y, &y));
  kiln_pool_params pp = { .spatial = 2, .kernel = { 2, 2 }, .strides = { 2, 2 } };
  OK(kiln_graph_pool(g, KILN_POOL_MAX, y, &pp, &z));
  OK(kiln_graph_output(g, z, "z"));
  if (shared) OK(kiln_graph_output(g, y, "y"));
  int64_t n_in = 2 * 3 * h * w, n_out = 2 * 8 * ho * wo, n_y = 2 * 8 * h * w;
  float *in = alloc_f32(n_in), *got = alloc_f32(n_out), *want = alloc_f32(n_out), *gy = alloc_f32(n_y), *wy = alloc_f32(n_y);
  for (int64_t i = 0; i < n_in; i++) in[i] = val(i, 3);
  in[37] = NAN;  /* reaches a few windows through the convolution */
  const void *ins[1] = { in };
  void *og[2] = { want, wy };
  kiln_program *r = ref_run(g, ins, og), *p = NULL;
  kiln_options o = kiln_options_default();
  o.backend = "cpu";
  o.cpu_epilogue = epilogue;
  o.cpu_pool = pool;
  OK(kiln_program_compile(g, &o, &p));
  char name[128];
  snprintf(name, sizeof name, "pool of relu at %lldx%lld%s (cpu_epilogue %d, cpu_pool %d)", (long long)h, (long long)w,
           shared ? ", the relu an output" : "", epilogue, pool);
  if (p && r) {
    for (int64_t i = 0; i < n_out; i++) got[i] = 7;  /* nothing left from ref's run */
    og[0] = got, og[1] = gy;
    OK(kiln_program_run(p, ins, og));
    kiln_census c;
    OK(kiln_program_census(p, &c));
    int launches = host_lanes() ? want_launches : 2;
    CHECK_MSG(c.kernels_planned == 2, "%s: %lld kernels", name, (long long)c.kernels_planned);
    CHECK_MSG(c.kernels_launched == launches, "%s: %lld launches (want %d)", name, (long long)c.kernels_launched, launches);
    CHECK_MSG(count_in_plan(p, "computed once after") == (epilogue && !shared), "%s: the plan's reason", name);
    CHECK_MSG(count_in_plan(p, "each window of the pool taken") == (launches == 1), "%s: the launch's reason", name);
    int nans = 0, bad = differ(got, want, n_out, &nans) + (shared ? differ(gy, wy, n_y, NULL) : 0);
    CHECK_MSG(bad == 0, "%s: %d outputs differ from ref", name, bad);
    CHECK_MSG(nans > 0, "%s: the NaN reached no output", name);
  }
  kiln_program_free(p);
  kiln_program_free(r);
  kiln_graph_free(g);
  free(in), free(got), free(want), free(gy), free(wy);
}

static void pool_of_relu(void) {
  /* rows of 12: one vector at 16 lanes, 2 rows a task; at 8 lanes two vectors, rows of 2 pass
   * the 3 row vectors a tap, so the pool stays a kernel of its own */
  int pooled = lanes() == 16 ? 1 : 2;
  pool_case(10, 12, false, 0, 1, 2);  /* the relu inlined into the pool: nothing to take */
  pool_case(10, 12, false, 1, 0, 2);
  pool_case(10, 12, false, 1, 1, pooled);
  pool_case(14, 12, false, 1, 1, pooled);  /* a last block of rows short of the task's */
  pool_case(11, 12, false, 1, 1, 2);  /* the windows leave the last row: no tiling */
  pool_case(10, 12, true, 1, 1, 2);   /* the relu read elsewhere too */
  /* rows of 8: one vector at either width; of 28 (lenet's first): two at 16 lanes, the pairs'
   * shuffles across both */
  pool_case(6, 8, false, 1, 1, 1);
  pool_case(6, 28, false, 1, 1, lanes() == 16 ? 1 : 2);
}

/* A padded 3x3/2 max pool (resnet50's after its stem) at 2 x 5 x 37 x 35 with a NaN, an
 * infinity, a -infinity and ties in x: with cpu_windows (the default) window maxima in
 * registers (cg_window_match), without them a row of accumulators; each NaN for NaN against
 * ref, with the kernel's reason pinned. */
static void window_max_pool(void) {
  enum { N = 2, C = 5, H = 37, W = 75, HO = 19, WO = 38 };
  kiln_graph *g;
  OK(kiln_graph_create(&g));
  int64_t xs[4] = { N, C, H, W };
  kiln_tensor x, z;
  OK(kiln_graph_input(g, "x", KILN_F32, 4, xs, &x));
  kiln_pool_params pp = { .spatial = 2, .kernel = { 3, 3 }, .strides = { 2, 2 }, .pads = { 1, 1, 1, 1 } };
  OK(kiln_graph_pool(g, KILN_POOL_MAX, x, &pp, &z));
  OK(kiln_graph_output(g, z, "z"));
  int64_t n_in = (int64_t)N * C * H * W, n_out = (int64_t)N * C * HO * WO;
  float *in = alloc_f32(n_in), *got = alloc_f32(n_out), *want = alloc_f32(n_out);
  for (int64_t i = 0; i < n_in; i++) in[i] = (float)(i % 5);  /* ties in every window */
  in[W * 4 + 9] = NAN, in[H * W + 3] = INFINITY, in[2 * H * W + W * (H - 1) + W - 1] = -INFINITY;
  const void *ins[1] = { in };
  void *og[1] = { want };
  kiln_program *r = ref_run(g, ins, og);
  for (int windows = 1; windows >= 0 && r; windows--) {
    kiln_options o = kiln_options_default();
    o.backend = "cpu";
    o.cpu_windows = windows;
    kiln_program *p = NULL;
    OK(kiln_program_compile(g, &o, &p));
    if (!p) break;
    char name[64];
    snprintf(name, sizeof name, "max pool (cpu_windows %d)", windows);
    CHECK_MSG(count_in_plan(p, "window maxima in registers") == windows, "%s: the plan's reason", name);
    /* 36 interior points a row, taps two apart: one vector loop, not chunks of 16 (render.c's
     * window_points) */
    StrBuf src = c_source(g, &o, true);
    CHECK_MSG(src.s && (!windows || !strstr(src.s, "kiln_c += ")), "%s: chunks in the window's source", name);
    sb_free(&src);
    for (int64_t i = 0; i < n_out; i++) got[i] = 7;
    og[0] = got;
    OK(kiln_program_run(p, ins, og));
    check_against_ref(got, want, n_out, name);
    kiln_program_free(p);
  }
  kiln_program_free(r);
  kiln_graph_free(g);
  free(in), free(got), free(want);
}

/* (x * 2 + 1) @ w^T, x [300, 10] an input, w [128, 10] a param: a product over 10 points, a
 * training step's dY @ W2^T. The window form would run its vector loop along w's rows, 10
 * apart (a gather at every tap), and compute x * 2 + 1 again at each of the 128 columns:
 * mlp_train_b1024's took 1.6 ms there. It takes register tiles, its rows packed once; against
 * ref, a NaN in x reaching its row. */
static void short_product_tiles(void) {
  enum { R = 300, K = 10, N = 128 };
  kiln_graph *g;
  OK(kiln_graph_create(&g));
  int64_t xs[2] = { R, K }, ws[2] = { N, K };
  float *w = alloc_f32(N * K), *in = alloc_f32(R * K);
  for (int64_t i = 0; i < N * K; i++) w[i] = val(i, 3);
  for (int64_t i = 0; i < R * K; i++) in[i] = val(i, 4);
  in[7 * K + 3] = NAN;
  kiln_tensor x, wp, two, one, y, wt, z;
  static const int perm[2] = { 1, 0 };
  OK(kiln_graph_input(g, "x", KILN_F32, 2, xs, &x));
  OK(kiln_graph_param(g, "w", KILN_F32, 2, ws, w, &wp));
  OK(kiln_graph_scalar(g, KILN_F32, 2, &two));
  OK(kiln_graph_scalar(g, KILN_F32, 1, &one));
  OK(kiln_graph_binary(g, KILN_MUL, x, two, &y));
  OK(kiln_graph_binary(g, KILN_ADD, y, one, &y));
  OK(kiln_graph_transpose(g, wp, perm, &wt));
  OK(kiln_graph_matmul(g, y, wt, &z));
  OK(kiln_graph_output(g, z, "z"));
  kiln_program *p = cpu_against_ref(g, in, R * N, "(x * 2 + 1) @ w^T over 10 points");
  if (p)
    CHECK_MSG(count_in_plan(p, "register tiles") == 1 && count_in_plan(p, "window sums") == 0,
              "a product over 10 points: %d tile kernels, %d windows (1 and 0 expected)", count_in_plan(p, "register tiles"),
              count_in_plan(p, "window sums"));
  kiln_program_free(p);
  kiln_graph_free(g);
  free(w), free(in);
}

/* A reduction var packed over its digits (CgCpuTile.split_digits): a product over k = (n, h, w)
 * merged, as a convolution's weight gradient sums over the batch's pixels: x [N, C, H, W] read
 * as rows [C, N*H*W] (each point split by H*W and W) times y [N, H, W, M] read as [N*H*W, M].
 * Register tiles; the rows' pack loops over the digits n, h and w under the default and over
 * the one var k under cpu_split_digits 0; both against ref; the option is 0 or 1. */
static kiln_graph *split_graph(int64_t n, int64_t c, int64_t h, int64_t w, int64_t m) {
  kiln_graph *g;
  OK(kiln_graph_create(&g));
  int64_t xs[4] = { n, c, h, w }, ys[4] = { n, h, w, m }, as[2] = { c, n * h * w }, bs[2] = { n * h * w, m };
  kiln_tensor x, y, a, b, z;
  OK(kiln_graph_input(g, "x", KILN_F32, 4, xs, &x));
  OK(kiln_graph_input(g, "y", KILN_F32, 4, ys, &y));
  OK(kiln_graph_transpose(g, x, (const int[]){ 1, 0, 2, 3 }, &a));
  OK(kiln_graph_reshape(g, a, 2, as, &a));
  OK(kiln_graph_reshape(g, y, 2, bs, &b));
  OK(kiln_graph_matmul(g, a, b, &z));
  OK(kiln_graph_output(g, z, "z"));
  return g;
}

/* g on cpu under cpu_split_digits 0 and 1 against ref (ref_run) on ins, its one output of n
 * points: the default packs over digits and 0 does not (the source checked), and, where
 * want_tiles >= 0, that many tile kernels. */
static void split_digits_runs(const char *what, kiln_graph *g, const void *const *ins, int64_t n, int want_tiles) {
  float *want = alloc_f32(n), *got = alloc_f32(n);
  kiln_program_free(ref_run(g, ins, (void *[]){ want }));
  for (int split = 0; split < 2; split++) {
    kiln_options o = kiln_options_default();
    o.backend = "cpu";
    o.cpu_split_digits = split;
    kiln_program *p = NULL;
    OK(kiln_program_compile(g, &o, &p));
    StrBuf src = c_source(g, &o, true);
    int digits = 0;
    for (const char *at = src.s; at && (at = strstr(at, "/* its digits */")); at++) digits++;
    sb_free(&src);
    if (p) {
      int tiles = count_in_plan(p, "register tiles");
      CHECK_MSG((want_tiles < 0 || tiles == want_tiles) && (digits > 0) == split,
                "%s, cpu_split_digits %d: %d tile kernels, %d packs over digits", what, split, tiles, digits);
      for (int64_t i = 0; i < n; i++) got[i] = NAN;
      OK(kiln_program_run(p, ins, (void *[]){ got }));
      double e = worst_of(got, want, n);
      CHECK_MSG(e <= 2e-5, "%s, cpu_split_digits %d: worst relative error %.3g", what, split, e);
    }
    kiln_program_free(p);
  }
  free(want), free(got);
}

static void split_digits_case(void) {
  enum { N = 4, C = 12, H = 6, W = 10, M = 20 };
  float *x = alloc_f32(N * C * H * W), *y = alloc_f32(N * H * W * M);
  for (int64_t i = 0; i < N * C * H * W; i++) x[i] = val(i, 3);
  for (int64_t i = 0; i < N * H * W * M; i++) y[i] = val(i, 7) / 4;
  kiln_graph *g = split_graph(N, C, H, W, M);
  split_digits_runs("x^T @ y over k = (n, h, w)", g, (const void *[]){ x, y }, C * M, 1);
  kiln_options o = kiln_options_default();  /* the option's range */
  o.backend = "cpu";
  o.cpu_split_digits = 2;
  kiln_program *bad = NULL;
  FAILS(KILN_ERR_INVALID_ARG, kiln_program_compile(g, &o, &bad));
  CHECK(!bad);
  kiln_graph_free(g);
  free(x), free(y);
}

/* The same through autodiff: dL/dw of sum(conv3x3(x, w, pad 1) * g), x [8, 6, 10, 12], w [16, 6, 3, 3]: the im2col
 * product over k = (n, h, w), its rows picking their tap by selects of h, h + 1, h + 2 (the digits' pack a row at
 * a time, the selects factored). Against ref with cpu_split_digits 1 and 0; the default packs over digits. */
static void split_digits_conv_grad_case(void) {
  enum { N = 8, C = 6, H = 10, W = 12, M = 16 };
  float *x = alloc_f32(N * C * H * W), *w = alloc_f32(M * C * 9), *gy = alloc_f32(N * M * H * W);
  for (int64_t i = 0; i < N * C * H * W; i++) x[i] = val(i, 3);
  for (int64_t i = 0; i < M * C * 9; i++) w[i] = val(i, 5) / 4;
  for (int64_t i = 0; i < N * M * H * W; i++) gy[i] = val(i, 7);
  kiln_graph *g;
  OK(kiln_graph_create(&g));
  int64_t xs[4] = { N, C, H, W }, ws[4] = { M, C, 3, 3 }, ys[4] = { N, M, H, W };
  kiln_tensor xt, wt, gt, y, dw;
  OK(kiln_graph_input(g, "x", KILN_F32, 4, xs, &xt));
  OK(kiln_graph_input(g, "w", KILN_F32, 4, ws, &wt));
  OK(kiln_graph_input(g, "g", KILN_F32, 4, ys, &gt));
  kiln_conv_params cp = { .spatial = 2, .pads = { 1, 1, 1, 1 } };
  OK(kiln_graph_conv(g, xt, wt, -1, &cp, &y));
  OK(kiln_graph_binary(g, KILN_MUL, y, gt, &y));
  OK(kiln_graph_reduce(g, KILN_REDUCE_SUM, y, 0, NULL, 0, &y));
  OK(kiln_graph_grad(g, y, 1, &wt, &dw));
  OK(kiln_graph_output(g, dw, "dw"));
  split_digits_runs("conv3x3 weight gradient", g, (const void *[]){ x, w, gy }, M * C * 9, -1);
  kiln_graph_free(g);
  free(x), free(w), free(gy);
}

/* Constant columns laid out once (CgCpuTile.cols_once): relu(x @ w + b), w a param [2000, 70] over 7
 * rows (under the library GEMM's 2^20 multiply-adds, so the tiles run it), its panels in the
 * kernel's pack in groups of 32 columns, the last part empty: against ref, then again after
 * write_param gives w new values (laid out again), and with cpu_cols_once 0 (packed every run) the
 * same values; w an input (changing run to run) is never laid out once; the option is 0 or 1. */
/* relu(x @ w + b) for columns_once_case: w [K, N] an input, or a param holding w0 */
static kiln_graph *once_graph(int64_t m, int64_t k, int64_t n, bool w_input, const float *w0, const float *bias,
                              kiln_tensor *wt) {
  kiln_graph *g;
  OK(kiln_graph_create(&g));
  int64_t xs[2] = { m, k }, ws[2] = { k, n }, bs[1] = { n };
  kiln_tensor xt, bt, y;
  OK(kiln_graph_input(g, "x", KILN_F32, 2, xs, &xt));
  if (w_input) OK(kiln_graph_input(g, "w", KILN_F32, 2, ws, wt));
  else OK(kiln_graph_param(g, "w", KILN_F32, 2, ws, w0, wt));
  OK(kiln_graph_param(g, "b", KILN_F32, 1, bs, bias, &bt));
  OK(kiln_graph_matmul(g, xt, *wt, &y));
  OK(kiln_graph_binary(g, KILN_ADD, y, bt, &y));
  OK(kiln_graph_unary(g, KILN_RELU, y, &y));
  OK(kiln_graph_output(g, y, "y"));
  return g;
}

static void columns_once_case(void) {
  enum { M = 7, K = 2000, N = 70 };
  float *x = alloc_f32(M * K), *w[2] = { alloc_f32(K * N), alloc_f32(K * N) }, *bias = alloc_f32(N);
  float *want[2] = { alloc_f32(M * N), alloc_f32(M * N) }, *got = alloc_f32(M * N);
  for (int64_t i = 0; i < M * K; i++) x[i] = val(i, 2);
  for (int64_t i = 0; i < K * N; i++) w[0][i] = val(i, 5) / 4, w[1][i] = val(i, 9) / 4;
  for (int64_t i = 0; i < N; i++) bias[i] = val(i, 1);
  kiln_tensor wt;
  kiln_graph *g = once_graph(M, K, N, true, NULL, bias, &wt);  /* ref's outputs for both weights */
  kiln_options o = kiln_options_default();
  o.backend = "ref";
  kiln_program *r = NULL;
  OK(kiln_program_compile(g, &o, &r));
  for (int round = 0; r && round < 2; round++) OK(kiln_program_run(r, (const void *[]){ x, w[round] }, (void *[]){ want[round] }));
  kiln_program_free(r);
  kiln_graph_free(g);
  for (int w_input = 0; w_input < 2; w_input++)
    for (int once = 0; once < 2; once++) {
      g = once_graph(M, K, N, w_input, w[0], bias, &wt);
      o = kiln_options_default();
      o.backend = "cpu";
      o.cpu_cols_once = once;
      kiln_program *p = NULL;
      OK(kiln_program_compile(g, &o, &p));
      if (p) {
        int n1 = count_in_plan(p, "columns laid out once"), want1 = once && !w_input && host_lanes();
        CHECK_MSG(n1 == want1, "relu(x @ w + b), w %s, cpu_cols_once %d: %d kernels with columns laid out once (want %d)",
                  w_input ? "an input" : "a param", once, n1, want1);
        for (int round = 0; round < 2; round++) {
          if (round == 1 && !w_input) OK(kiln_program_write_param(p, wt, w[1]));
          for (int64_t i = 0; i < M * N; i++) got[i] = NAN;
          const void *ins[2] = { x, w[round] };
          OK(kiln_program_run(p, ins, (void *[]){ got }));
          double e = worst_of(got, want[round], M * N);
          CHECK_MSG(e <= 2e-5, "relu(x @ w + b), w %s, cpu_cols_once %d, round %d: worst relative error %.3g",
                    w_input ? "an input" : "a param", once, round, e);
        }
      }
      kiln_program_free(p);
      if (w_input && once) {  /* the option's range */
        o.cpu_cols_once = 2;
        FAILS(KILN_ERR_INVALID_ARG, kiln_program_compile(g, &o, &p));
        CHECK(!p);
      }
      kiln_graph_free(g);
    }
  free(x), free(w[0]), free(w[1]), free(bias), free(want[0]), free(want[1]), free(got);
}

/* A product whose rows are packed (x^T, read across x's rows) and too many to pack once (150 rows
 * over 784: 470 KiB), with 128 columns: each group of panels packs every row tile again, so the
 * panels go in groups of up to 512 KiB (4 of the widest, 8 at AVX2's width), not 128 KiB (1): the
 * plan says so and the C source counts the groups. Then the same with x rounded to bf16 as it is
 * packed (cast to bf16 and back, as a mixed-precision step's copy of x): the packing loops'
 * rounding masks made GCC spill the inlined tile's accumulators (mlp_train_b1024_bf16amp), so
 * the tile is called out of line there, and only there. The values (multiples of 1/16, which bf16
 * holds) sum exactly in any order, against ref. */
static void packed_rows_group(void) {
  enum { R = 150, K = 784, N = 128 };
  for (int rounded = 0; rounded <= 1; rounded++) {
    const char *name = rounded ? "bf16(x)^T @ w, 150 packed rows" : "x^T @ w, 150 packed rows";
    kiln_graph *g;
    OK(kiln_graph_create(&g));
    int64_t xs[2] = { K, R }, ws[2] = { K, N };
    float *w = alloc_f32(K * N), *in = alloc_f32(R * K);
    for (int64_t i = 0; i < K * N; i++) w[i] = val(i, 6 + 2 * rounded);
    for (int64_t i = 0; i < R * K; i++) in[i] = val(i, 7 + 2 * rounded);
    in[5 * R + 131] = NAN;
    kiln_tensor x, wp, xt, z;
    static const int perm[2] = { 1, 0 };
    OK(kiln_graph_input(g, "x", KILN_F32, 2, xs, &x));
    OK(kiln_graph_param(g, "w", KILN_F32, 2, ws, w, &wp));
    if (rounded) {
      OK(kiln_graph_cast(g, x, KILN_BF16, &x));
      OK(kiln_graph_cast(g, x, KILN_F32, &x));
    }
    OK(kiln_graph_transpose(g, x, perm, &xt));
    OK(kiln_graph_matmul(g, xt, wp, &z));
    OK(kiln_graph_output(g, z, "z"));
    kiln_program *p = cpu_against_ref(g, in, R * N, name);
    if (p) {
      CHECK_MSG(count_in_plan(p, "rows packed once a group of panels") == 1, "%s: the plan names no group", name);
      CHECK_MSG(count_in_plan(p, "the tile out of line") == rounded, "%s: the plan has %d tiles out of line (%d expected)",
                name, count_in_plan(p, "the tile out of line"), rounded);
    }
    kiln_options o = kiln_options_default();
    o.backend = "cpu";
    StrBuf src = c_source(g, &o, true);
    CHECK_MSG(src.s && strstr(src.s, "enum { kiln_gp = 4 * 32 / KILN_NR };"), "%s: panels not in groups of 4 x 32 columns",
              name);
    CHECK_MSG(src.s && (strstr(src.s, "k_tile_apart(kiln_pr") != NULL) == rounded, "%s: k_tile_apart %s in the source",
              name, rounded ? "not called" : "called");
    sb_free(&src);
    kiln_program_free(p);
    kiln_graph_free(g);
    free(w), free(in);
  }
}

/* conv(x) + r[h], a bias per output row: the epilogue reads the row var, so its runs must end
 * with each row; a plain conv's runs cross the rows of an image (its stores contiguous); and a
 * conv stored channels last, against ref. */
static void conv_plus_row_bias(void) {
  for (int per_row = 0; per_row <= 2; per_row++) {
    kiln_graph *g;
    OK(kiln_graph_create(&g));
    int64_t xs[4] = { 2, 3, 9, 14 }, ws[4] = { 8, 3, 3, 3 }, rs[4] = { 1, 1, 9, 1 };
    float w[8 * 27], rb[9];
    for (int i = 0; i < 8 * 27; i++) w[i] = val(i, 1);
    for (int i = 0; i < 9; i++) rb[i] = val(i, 5) * 4;
    kiln_tensor x, wp, r, y;
    OK(kiln_graph_input(g, "x", KILN_F32, 4, xs, &x));
    OK(kiln_graph_param(g, "w", KILN_F32, 4, ws, w, &wp));
    kiln_conv_params cp = { .spatial = 2, .strides = { 1, 1 }, .dilations = { 1, 1 }, .pads = { 1, 1, 1, 1 }, .group = 1 };
    OK(kiln_graph_conv(g, x, wp, (kiln_tensor){ -1 }, &cp, &y));
    if (per_row == 1) {
      OK(kiln_graph_param(g, "r", KILN_F32, 4, rs, rb, &r));
      OK(kiln_graph_binary(g, KILN_ADD, y, r, &y));
    }
    if (per_row == 2) {  /* stored channels last: the pixels of a run are not contiguous */
      int perm[4] = { 0, 2, 3, 1 };
      OK(kiln_graph_transpose(g, y, perm, &y));
      OK(kiln_graph_unary(g, KILN_RELU, y, &y));
    }
    OK(kiln_graph_output(g, y, "y"));
    int64_t in_numel[1] = { 2 * 3 * 9 * 14 };
    const char *name = per_row == 1 ? "conv + a bias per row" : per_row ? "conv stored channels last" : "conv (runs across rows)";
    /* channels last, the plan computes the convolution in the transposed space (store_moved):
     * its columns are the channels, one var, and its window is read lane by lane */
    compare_direct(name, g, 1, in_numel, 2 * 8 * 9 * 14, 1, 0, per_row == 2 ? 0 : 1, 0, 0, per_row == 2 ? 0 : 1, 0);
    kiln_graph_free(g);
  }
}

/* y = a @ b, a [37, K] read in place (contiguous along k, too large to pack once) over a long
 * sum: the spans of the f64 sum step the row pointers along k. */
static void rows_in_place_long_sum(void) {
  kiln_graph *g;
  OK(kiln_graph_create(&g));
  int64_t K = 5000, as[2] = { 37, K }, bs[2] = { K, 29 };
  kiln_tensor a, b, y;
  OK(kiln_graph_input(g, "a", KILN_F32, 2, as, &a));
  OK(kiln_graph_input(g, "b", KILN_F32, 2, bs, &b));
  OK(kiln_graph_matmul(g, a, b, &y));
  OK(kiln_graph_output(g, y, "y"));
  int64_t in_numel[2] = { 37 * K, K * 29 };
  compare("rows in place over a long sum", g, 2, in_numel, 37 * 29, 1, 0, 0, 1, 0);
  kiln_graph_free(g);
}

/* A pool over [2, 3, rows, cols] on cpu against ref (max: bit for bit, NaN included; average
 * within 1e-6), and the C source of its plan in chunks of `chunk` points (0: whole rows). */
static void pool_chunks(const char *name, kiln_pool_kind kind, int64_t rows, int64_t cols, int64_t k, int64_t stride,
                        int64_t pad, int chunk, int unrolled) {
  kiln_graph *g;
  OK(kiln_graph_create(&g));
  int64_t xs[4] = { 2, 3, rows, cols };
  kiln_tensor x, y;
  OK(kiln_graph_input(g, "x", KILN_F32, 4, xs, &x));
  kiln_pool_params pp = { .spatial = 2, .kernel = { k, k }, .strides = { stride, stride }, .pads = { pad, pad, pad, pad } };
  OK(kiln_graph_pool(g, kind, x, &pp, &y));
  OK(kiln_graph_output(g, y, "y"));
  int64_t n = 2 * 3 * rows * cols, orows = (rows + 2 * pad - k) / stride + 1, ocols = (cols + 2 * pad - k) / stride + 1;
  int64_t m = 2 * 3 * orows * ocols;
  float *in = alloc_f32(n), *got = alloc_f32(m), *want = alloc_f32(m);
  for (int64_t i = 0; i < n; i++) in[i] = val(i, 5);
  if (kind == KILN_POOL_MAX) in[cols + 3] = in[n - 1] = NAN;  /* one in a first chunk, one in a last */
  const void *ins[1] = { in };
  void *ow[1] = { want }, *og[1] = { got };
  kiln_options o = kiln_options_default();
  o.backend = "ref";
  kiln_program *r = NULL, *p = NULL;
  OK(kiln_program_compile(g, &o, &r));
  if (r) OK(kiln_program_run(r, ins, ow));
  o.backend = "cpu";
  OK(kiln_program_compile(g, &o, &p));
  for (int64_t i = 0; i < m; i++) got[i] = -1;
  if (p && r) {
    OK(kiln_program_run(p, ins, og));
    int bad = 0;
    for (int64_t i = 0; i < m; i++)
      bad += kind == KILN_POOL_MAX ? memcmp(&got[i], &want[i], 4) != 0
                                   : !(fabs((double)got[i] - want[i]) <= 1e-6 * (1 + fabs((double)want[i])));
    CHECK_MSG(bad == 0, "pool %s: %d of %lld outputs differ from ref", name, bad, (long long)m);
  }
  StrBuf src = c_source(g, &o, false);
  if (src.s) {
    char want_text[48];
    snprintf(want_text, sizeof want_text, "kiln_c += %d)", chunk ? chunk : 8);
    CHECK_MSG((strstr(src.s, want_text) != NULL) == (chunk != 0), "pool %s: chunks of %d in the source", name, chunk);
    if (!chunk) CHECK_MSG(!strstr(src.s, "kiln_c += "), "pool %s: chunks in the source", name);
    /* a window's last taps in one iteration where they do not overlap, or are contiguous */
    bool taps = strstr(src.s, "taps in one iteration") != NULL;
    CHECK_MSG(unrolled < 0 || taps == (unrolled != 0), "pool %s: the window's last taps %sin one iteration", name, taps ? "" : "not ");
  }
  sb_free(&src);
  kiln_program_free(p);
  kiln_program_free(r);
  kiln_graph_free(g);
  free(in);
  free(got);
  free(want);
}

/* depthwise(relu(conv1x1(x) + b1)) + b2, 3x3 windows padded by 1, at h x w: with cpu_expand (and
 * direct convolutions on this host) the 1 x 1 convolution's value computed as the depthwise
 * window's planes fill, one launch; without, two. Each against ref, NaN for NaN (a NaN in x). */
static void expand_case(int64_t h, int64_t w, int expand) {
  kiln_graph *g;
  OK(kiln_graph_create(&g));
  int64_t C = 6, E = 16, xs[4] = { 2, C, h, w }, w1s[4] = { E, C, 1, 1 }, w2s[4] = { E, 1, 3, 3 }, bs[1] = { E };
  float w1[16 * 6], w2[16 * 9], b1[16], b2[16];
  for (int i = 0; i < 16 * 6; i++) w1[i] = val(i, 1);
  for (int i = 0; i < 16 * 9; i++) w2[i] = val(i, 4);
  for (int i = 0; i < 16; i++) b1[i] = val(i, 2), b2[i] = val(i, 5);
  kiln_tensor x, pw1, pw2, pb1, pb2, y, z;
  OK(kiln_graph_input(g, "x", KILN_F32, 4, xs, &x));
  OK(kiln_graph_param(g, "w1", KILN_F32, 4, w1s, w1, &pw1));
  OK(kiln_graph_param(g, "w2", KILN_F32, 4, w2s, w2, &pw2));
  OK(kiln_graph_param(g, "b1", KILN_F32, 1, bs, b1, &pb1));
  OK(kiln_graph_param(g, "b2", KILN_F32, 1, bs, b2, &pb2));
  kiln_conv_params c1 = { .spatial = 2, .strides = { 1, 1 }, .dilations = { 1, 1 }, .group = 1 };
  kiln_conv_params c2 = { .spatial = 2, .strides = { 1, 1 }, .dilations = { 1, 1 }, .pads = { 1, 1, 1, 1 }, .group = E };
  OK(kiln_graph_conv(g, x, pw1, pb1, &c1, &y));
  OK(kiln_graph_unary(g, KILN_RELU, y, &y));
  OK(kiln_graph_conv(g, y, pw2, pb2, &c2, &z));
  OK(kiln_graph_output(g, z, "z"));
  int64_t n_in = 2 * C * h * w, n_out = 2 * E * h * w;
  float *in = alloc_f32(n_in), *got = alloc_f32(n_out), *want = alloc_f32(n_out);
  for (int64_t i = 0; i < n_in; i++) in[i] = val(i, 3);
  in[29] = NAN;
  const void *ins[1] = { in };
  void *og[1] = { want };
  kiln_program *r = ref_run(g, ins, og), *p = NULL;
  kiln_options o = kiln_options_default();
  o.backend = "cpu";
  o.cpu_expand = expand;
  OK(kiln_program_compile(g, &o, &p));
  char name[128];
  snprintf(name, sizeof name, "expansion at %lldx%lld (cpu_expand %d)", (long long)h, (long long)w, expand);
  if (p && r) {
    for (int64_t i = 0; i < n_out; i++) got[i] = 7;
    og[0] = got;
    OK(kiln_program_run(p, ins, og));
    kiln_census cs;
    OK(kiln_program_census(p, &cs));
    /* 1: outputs of 512 KiB and more only, 2: any */
    bool joins = expand == 2 || (expand == 1 && 2 * E * h * w * 4 >= (512 << 10));
    int launches = joins && host_lanes() ? 1 : 2;
    CHECK_MSG(cs.kernels_launched == launches, "%s: %lld launches (want %d)", name, (long long)cs.kernels_launched, launches);
    CHECK_MSG(count_in_plan(p, "computed as the planes fill") == (launches == 1), "%s: the launch's reason", name);
    check_against_ref(got, want, n_out, name);
  }
  kiln_program_free(p);
  kiln_program_free(r);
  kiln_graph_free(g);
  free(in), free(got), free(want);
}

/* 1 x 1 windows read where their operand lies (no plane) when every vector a task reads is inside
 * it: rows of whole vectors, or flat tasks of whole vectors; else through a plane, or in tiles */
static void in_place_cases(void) {
  static const struct { ConvCase c; int want; } cases[] = {
    { { "1x1 96 to 24 at 48x48", 1, 96, 48, 48, 24, 1, 1, 1, 1, 0, 1, false, 1, 0, 1, 0, 0, 1, 0, 0, 0, 0 }, 1 },
    { { "1x1 96 to 40 at 12x12 (flat, 4 rows in 3 vectors)", 2, 96, 12, 12, 40, 1, 1, 1, 1, 0, 1, true, 1, 0, 1, 0, 0, 1, 0, 1, 1, 0 }, 1 },
    { { "1x1 24 to 40 at 9x9 (flat tasks past the rows' end)", 2, 24, 9, 9, 40, 1, 1, 1, 1, 0, 1, true, 1, 0, 1, 0, 0, 1, 0, 1, 1, 0 }, 0 },
    { { "1x1 padded (the plane's zeros)", 1, 16, 16, 16, 8, 1, 1, 1, 1, 1, 1, true, 1, 0, 1, 0, 0, 1, 0, 0, 0, 0 }, 0 },
    { { "3x3 at 48x48", 1, 8, 48, 48, 8, 3, 3, 1, 1, 1, 1, true, 1, 0, 1, 0, 0, 1, 0, 0, 0, 0 }, 0 },
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    if (lanes() != 16) break;  /* the rule's arithmetic at AVX-512's lanes */
    float *w = NULL;
    kiln_graph *g = conv_graph(&cases[i].c, &w);
    kiln_options o = kiln_options_default();
    o.backend = "cpu";
    kiln_program *p = NULL;
    OK(kiln_program_compile(g, &o, &p));
    int n = p ? count_in_plan(p, "read in place") : -1;
    CHECK_MSG(n == cases[i].want, "%s: %d kernels read in place (want %d)", cases[i].c.name, n, cases[i].want);
    kiln_program_free(p);
    kiln_graph_free(g);
    free(w);
  }
}

/* relu(conv(x, w) + b), 3x3 pad 1, with w a param (constant: channel lanes may lay it out) or an
 * input (changing run to run: they may not) */
static kiln_graph *lanes_graph(int64_t n, int64_t c, int64_t hw, int64_t m, bool w_input, kiln_tensor *wt) {
  kiln_graph *g;
  OK(kiln_graph_create(&g));
  int64_t xs[4] = { n, c, hw, hw }, ws[4] = { m, c, 3, 3 }, bs[1] = { m };
  float *wv = alloc_f32(m * c * 9), *bias = alloc_f32(m);
  for (int64_t i = 0; i < m * c * 9; i++) wv[i] = val(i, 1) / 8;
  for (int64_t i = 0; i < m; i++) bias[i] = val(i, 2);
  kiln_tensor x, b, y;
  OK(kiln_graph_input(g, "x", KILN_F32, 4, xs, &x));
  if (w_input) OK(kiln_graph_input(g, "w", KILN_F32, 4, ws, wt));
  else OK(kiln_graph_param(g, "w", KILN_F32, 4, ws, wv, wt));
  OK(kiln_graph_param(g, "b", KILN_F32, 1, bs, bias, &b));
  kiln_conv_params p = { .spatial = 2, .strides = { 1, 1 }, .dilations = { 1, 1 }, .pads = { 1, 1, 1, 1 }, .group = 1 };
  OK(kiln_graph_conv(g, x, *wt, b, &p, &y));
  OK(kiln_graph_unary(g, KILN_RELU, y, &y));
  OK(kiln_graph_output(g, y, "y"));
  free(wv);
  free(bias);
  return g;
}

/* g on ref and on cpu with options o (backend set here) over its one input of n_in values
 * (val(i, salt)), its n_out outputs within 2e-5 of each other (the cpu's set to NaN first, so
 * that one left unwritten shows); want_lanes kernels in channel lanes (-1: any). */
static void lanes_against_ref(kiln_graph *g, const kiln_options *o, int64_t n_in, int64_t n_out, int salt, int want_lanes,
                              const char *name) {
  float *x = alloc_f32(n_in), *got = alloc_f32(n_out), *want = alloc_f32(n_out);
  for (int64_t i = 0; i < n_in; i++) x[i] = val(i, salt);
  for (int64_t i = 0; i < n_out; i++) got[i] = NAN;
  const void *ins[1] = { x };
  void *ow[1] = { want };
  kiln_program *r = ref_run(g, ins, ow), *p = NULL;
  kiln_options c = *o;
  c.backend = "cpu";
  OK(kiln_program_compile(g, &c, &p));
  if (p && r) {
    int nc = count_in_plan(p, "channels in lanes");
    CHECK_MSG(want_lanes < 0 || nc == want_lanes, "%s: %d kernels in channel lanes (want %d)", name, nc, want_lanes);
    OK(kiln_program_run(p, ins, (void *[]){ got }));
    double e = worst_of(got, want, n_out);
    CHECK_MSG(e <= 2e-5, "%s: worst relative error %.3g", name, e);
  }
  kiln_program_free(p);
  kiln_program_free(r);
  free(x);
  free(got);
  free(want);
}

/* Channel lanes: res256_7's 3x3 over 256 channels at 7x7 takes them by default (at AVX-512's 16
 * lanes: rows of 7 leave 15 of 64 lanes idle); a weight rewritten by write_param is laid out
 * again; weights that are an input are never laid out, even where channel lanes are asked for
 * wherever they can be. */
static void channel_lanes_cases(void) {
  if (!host_lanes()) return;
  int64_t n = 1, c = 256, hw = 7, m = 256, xn = n * c * hw * hw, yn = n * m * hw * hw, wn = m * c * 9;
  float *x = alloc_f32(xn), *w[2] = { alloc_f32(wn), alloc_f32(wn) }, *got = alloc_f32(yn);
  float *want[2] = { alloc_f32(yn), alloc_f32(yn) };
  for (int64_t i = 0; i < xn; i++) x[i] = val(i, 5);
  for (int64_t i = 0; i < wn; i++) w[0][i] = val(i, 1) / 8, w[1][i] = val(i, 7) / 8;
  /* ref's outputs for both sets of weights, once: weights as a param and as an input are one
   * product (ref under ASan took 18 s a run here) */
  kiln_tensor wt;
  kiln_graph *g = lanes_graph(n, c, hw, m, true, &wt);
  kiln_options o = kiln_options_default();
  o.backend = "ref";
  kiln_program *r = NULL;
  OK(kiln_program_compile(g, &o, &r));
  for (int round = 0; r && round < 2; round++) {
    const void *ins[2] = { x, w[round] };
    void *ow[1] = { want[round] };
    OK(kiln_program_run(r, ins, ow));
  }
  kiln_program_free(r);
  kiln_graph_free(g);
  for (int w_input = 0; w_input < 2; w_input++) {
    g = lanes_graph(n, c, hw, m, w_input, &wt);
    o.backend = "cpu";
    o.cpu_channel_lanes = w_input ? 2 : 1;
    o.cpu_winograd = 0;  /* the window's sum (winograd_cases has Winograd's) */
    kiln_program *p = NULL;
    OK(kiln_program_compile(g, &o, &p));
    if (p) {
      /* a param's: channel lanes by the cost model at either width; at 8 lanes one vector of
       * channels over a row of 7 pixels, the tap floor's exception (res256_7's 3x3 ran 0.68 of
       * the row form there) */
      int nc = count_in_plan(p, "channels in lanes"), want_c = w_input ? 0 : 1;
      CHECK_MSG(nc == want_c, "channel lanes (w %s): %d kernels (want %d)", w_input ? "an input" : "a param", nc, want_c);
      int n17 = count_in_plan(p, "1 vectors of channels x 1 rows of 7 pixels");
      CHECK_MSG(w_input || lanes() != 8 || n17 == 1, "channel lanes (w a param): %d kernels of 1 vector x 7 pixels at 8 lanes", n17);
      for (int round = 0; round < 2; round++) {
        /* round 1, new weights: laid out again (a param), read as they are (an input) */
        if (round == 1 && !w_input) OK(kiln_program_write_param(p, wt, w[1]));
        const void *ins[2] = { x, w[round] };
        void *og[1] = { got };
        for (int64_t i = 0; i < yn; i++) got[i] = NAN;
        OK(kiln_program_run(p, ins, og));
        double e = worst_of(got, want[round], yn);
        CHECK_MSG(e <= 2e-5, "channel lanes (w %s, round %d): worst relative error %.3g", w_input ? "an input" : "a param",
                  round, e);
      }
    }
    kiln_program_free(p);
    kiln_graph_free(g);
  }
  free(x);
  free(w[0]);
  free(w[1]);
  free(got);
  free(want[0]);
  free(want[1]);
  /* the row form's tap floor from 128 output channels (row_tap_cost), at 8 lanes: res128_14's 3x3
   * over 128 channels at 14x14 takes one vector of channels over 7 pixels, not 4 channels x 2
   * vectors a task; convnet_mini's 48 at 24x24 keeps the row form */
  if (lanes() == 8) {
    static const struct { int64_t c, hw; int lanes; } floors[] = { { 128, 14, 1 }, { 48, 24, 0 } };
    for (int i = 0; i < 2; i++) {
      int64_t fc = floors[i].c, fhw = floors[i].hw;
      g = lanes_graph(1, fc, fhw, fc, false, &wt);
      o = kiln_options_default();
      o.cpu_winograd = 0;
      char name[96];
      snprintf(name, sizeof name, "the tap floor, %lld channels at %lldx%lld", (long long)fc, (long long)fhw, (long long)fhw);
      lanes_against_ref(g, &o, fc * fhw * fhw, fc * fhw * fhw, 4, floors[i].lanes, name);
      kiln_graph_free(g);
    }
  }
  /* a plane past the row form's 512 KiB (128 channels of 33 x 33): channel lanes, within 1 MiB */
  g = lanes_graph(1, 128, 31, 32, false, &wt);
  o = kiln_options_default();
  o.cpu_channel_lanes = 2;
  o.cpu_winograd = 0;
  lanes_against_ref(g, &o, 128 * 31 * 31, 32 * 31 * 31, 6, 1, "channel lanes, a plane past 512 KiB");
  kiln_graph_free(g);
}

/* g compiled on cpu with channel lanes wherever they can go (o set to those options), or NULL. */
static kiln_program *lanes_asked(kiln_graph *g, kiln_options *o) {
  *o = kiln_options_default();
  o->backend = "cpu";
  o->cpu_channel_lanes = 2;
  o->cpu_winograd = 0;  /* the window's sum (winograd_cases has Winograd's) */
  kiln_program *p = NULL;
  OK(kiln_program_compile(g, o, &p));
  return p;
}

/* A 3x3/2 over 64 channels of 64 x 64 (two images), 20 outputs: its plane (1.1 MB) passes channel
 * lanes' 1 MiB, so the plane keeps a ring of the rows a task's taps read, tasks one row each,
 * rows outermost (resnet50's 3x3/2 over 128 channels from 56x56). Against ref. */
static void channel_lanes_ring(void) {
  if (!host_lanes()) return;
  static const ConvCase rc = { "ring", 2, 64, 64, 64, 20, 3, 3, 2, 1, 1, 1, true, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 };
  int64_t n = rc.n, c = rc.c, hw = rc.h, m = rc.m, oh = (hw - 1) / 2 + 1;
  float *wv = NULL;
  kiln_graph *g = conv_graph(&rc, &wv);
  int64_t xn = n * c * hw * hw, yn = n * m * oh * oh;
  float *in = alloc_f32(xn), *got = alloc_f32(yn), *want = alloc_f32(yn);
  for (int64_t i = 0; i < xn; i++) in[i] = val(i, 3);
  in[5 * hw + 7] = NAN;  /* one output of the first image's third row and its neighbours */
  const void *ins[1] = { in };
  kiln_program *r = ref_run(g, ins, (void *[]){ want });
  kiln_options o;
  kiln_program *p = lanes_asked(g, &o);
  if (p && r) {
    CHECK_MSG(count_in_plan(p, "a ring of rows") == 1, "channel lanes' ring: not taken");
    for (int64_t i = 0; i < yn; i++) got[i] = -1;
    OK(kiln_program_run(p, ins, (void *[]){ got }));
    check_against_ref(got, want, yn, "channel lanes, a ring of rows");
  }
  kiln_program_free(p);
  kiln_program_free(r);
  kiln_graph_free(g);
  free(wv);
  free(in);
  free(got);
  free(want);
}

/* A 1x1 read in place whose weights fit L2 but not half of it (256 x 768 floats) takes rows
 * outermost (cpu_direct.c's channel_lanes: its input's other half is the other core's), and one
 * whose weights pass L2 (256 x 1088) keeps channel blocks outermost; both against ref, two
 * images of 5x5. */
static void channel_lanes_in_place_rows(void) {
  if (!host_lanes()) return;
  for (int big = 0; big < 2; big++) {
    enum { N = 2, HW = 5, CO = 256 };
    int64_t C = big ? 1088 : 768;
    kiln_graph *g;
    OK(kiln_graph_create(&g));
    int64_t xs[4] = { N, C, HW, HW }, ws[4] = { CO, C, 1, 1 }, bs[1] = { CO };
    float *wv = alloc_f32(CO * C), *bias = alloc_f32(CO);
    for (int64_t i = 0; i < CO * C; i++) wv[i] = val(i, 6) / 16;
    for (int64_t i = 0; i < CO; i++) bias[i] = val(i, 2);
    kiln_tensor x, w, b, y;
    OK(kiln_graph_input(g, "x", KILN_F32, 4, xs, &x));
    OK(kiln_graph_param(g, "w", KILN_F32, 4, ws, wv, &w));
    OK(kiln_graph_param(g, "b", KILN_F32, 1, bs, bias, &b));
    kiln_conv_params cp = { .spatial = 2, .strides = { 1, 1 }, .dilations = { 1, 1 }, .group = 1 };
    OK(kiln_graph_conv(g, x, w, b, &cp, &y));
    OK(kiln_graph_unary(g, KILN_RELU, y, &y));
    OK(kiln_graph_output(g, y, "y"));
    free(wv);
    free(bias);
    /* without pixel panels, which take these where they pass half of L2 (pixel_panels_cases) */
    kiln_options o = kiln_options_default();
    o.backend = "cpu";
    o.cpu_channel_lanes = 2;
    o.cpu_pixel_panels = 0;
    kiln_program *p = NULL;
    OK(kiln_program_compile(g, &o, &p));
    int in_place = p ? count_in_plan(p, "read in place; direct convolution, channels in lanes") : -1;
    int rows = p ? count_in_plan(p, "rows outermost") : -1;
    CHECK_MSG(in_place == 1 && rows == !big, "1x1 over %lld channels read in place: %d in place, %d rows outermost (want 1, %d)",
              (long long)C, in_place, rows, !big);
    kiln_program_free(p);
    lanes_against_ref(g, &o, N * C * HW * HW, N * CO * HW * HW, 3, 1, big ? "1x1 in place, weights past L2" : "1x1 in place by rows");
    kiln_graph_free(g);
  }
}

/* relu(conv1x1(x, w, stride) + b + r), x [n, c, hw, hw], w [m, c, 1, 1] a param (channel lanes may
 * lay it out), r [n, m, hw', hw'] a param read at each output pixel (the residual of a
 * bottleneck's last 1x1) */
static kiln_graph *pointwise_graph(int64_t n, int64_t c, int64_t hw, int64_t m, int stride) {
  kiln_graph *g;
  OK(kiln_graph_create(&g));
  int64_t ohw = (hw - 1) / stride + 1;
  int64_t xs[4] = { n, c, hw, hw }, ws[4] = { m, c, 1, 1 }, bs[1] = { m }, rs[4] = { n, m, ohw, ohw };
  float *wv = alloc_f32(m * c), *bias = alloc_f32(m), *res = alloc_f32(n * m * ohw * ohw);
  for (int64_t i = 0; i < m * c; i++) wv[i] = val(i, 6) / 16;
  for (int64_t i = 0; i < m; i++) bias[i] = val(i, 2);
  for (int64_t i = 0; i < n * m * ohw * ohw; i++) res[i] = val(i, 8);
  kiln_tensor x, w, b, r, y;
  OK(kiln_graph_input(g, "x", KILN_F32, 4, xs, &x));
  OK(kiln_graph_param(g, "w", KILN_F32, 4, ws, wv, &w));
  OK(kiln_graph_param(g, "b", KILN_F32, 1, bs, bias, &b));
  OK(kiln_graph_param(g, "r", KILN_F32, 4, rs, res, &r));
  kiln_conv_params cp = { .spatial = 2, .strides = { stride, stride }, .dilations = { 1, 1 }, .group = 1 };
  OK(kiln_graph_conv(g, x, w, b, &cp, &y));
  OK(kiln_graph_binary(g, KILN_ADD, y, r, &y));
  OK(kiln_graph_unary(g, KILN_RELU, y, &y));
  OK(kiln_graph_output(g, y, "y"));
  free(wv);
  free(bias);
  free(res);
  return g;
}

/* Pixel panels (CgCpuDirect.panel): a 1x1 convolution in channel lanes copies its tasks' pixels
 * into panels and takes runs of pixels across rows. At 8 lanes resnet50's and bottleneck2048_7's
 * 1x1s at 7x7 take 2 vectors x 6 pixels by default (bottleneck's 0.45-0.64 of the row form); here
 * 256 -> 64 channels (weights in L2: pixels outermost) and 1088 -> 256 (past it: channel blocks
 * outermost), 49 pixels in 9 blocks, the last one pixel; a 1x1/2 from 14x14 over five images (a
 * thread's panels filled again for each of its images, at any count of threads up to 4); a sum over 4200 channels (past f32's 4096 points:
 * in spans); each against ref, and with cpu_pixel_panels 0, where no kernel takes them. */
static void pixel_panels_cases(void) {
  if (!host_lanes()) return;
  static const struct { int64_t n, c, hw, m; int stride, outer; const char *name; } cases[] = {
    { 1, 256, 7, 64, 1, 1, "1x1 256 -> 64 at 7x7" },
    { 1, 1088, 7, 256, 1, 0, "1x1 1088 -> 256 at 7x7" },
    { 5, 128, 14, 64, 2, -1, "1x1/2 128 -> 64 from 14x14, five images" },
    { 1, 4200, 7, 32, 1, -1, "1x1 4200 -> 32 at 7x7 (spans)" },
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int64_t n = cases[i].n, c = cases[i].c, hw = cases[i].hw, m = cases[i].m, ohw = (hw - 1) / cases[i].stride + 1;
    int64_t xn = n * c * hw * hw, yn = n * m * ohw * ohw;
    kiln_graph *g = pointwise_graph(n, c, hw, m, cases[i].stride);
    float *x = alloc_f32(xn), *got = alloc_f32(yn), *want = alloc_f32(yn);
    for (int64_t j = 0; j < xn; j++) x[j] = val(j, 3 + (int)i);
    const void *ins[1] = { x };
    kiln_program *r = ref_run(g, ins, (void *[]){ want });  /* once: both settings against it */
    for (int panels = 0; r && panels < 2; panels++) {
      kiln_options o = kiln_options_default();
      o.backend = "cpu";
      o.cpu_channel_lanes = 2;  /* lanes wherever they can go; panels or not by the cost model */
      o.cpu_pixel_panels = panels;
      kiln_program *p = NULL;
      OK(kiln_program_compile(g, &o, &p));
      if (!p) continue;
      int np = count_in_plan(p, "over pixel panels"), n26 = count_in_plan(p, "2 vectors of channels x 6 pixels");
      int outer = count_in_plan(p, "pixels outermost");
      CHECK_MSG(count_in_plan(p, "channels in lanes") == 1, "%s, cpu_pixel_panels %d: not in channel lanes", cases[i].name, panels);
      if (!panels) CHECK_MSG(np == 0, "%s, cpu_pixel_panels 0: %d kernels over pixel panels", cases[i].name, np);
      else if (lanes() == 8 && cases[i].outer >= 0)
        CHECK_MSG(np == 1 && n26 == 1 && outer == cases[i].outer,
                  "%s at 8 lanes: %d kernels over pixel panels, %d of 2 vectors x 6 pixels, %d pixels outermost (want 1, 1, %d)",
                  cases[i].name, np, n26, outer, cases[i].outer);
      else CHECK_MSG(np == 1 || lanes() != 8, "%s at 8 lanes: %d kernels over pixel panels (want 1)", cases[i].name, np);
      for (int64_t j = 0; j < yn; j++) got[j] = NAN;
      OK(kiln_program_run(p, ins, (void *[]){ got }));
      double e = worst_of(got, want, yn);
      CHECK_MSG(e <= 2e-5, "%s, cpu_pixel_panels %d: worst relative error %.3g", cases[i].name, panels, e);
      kiln_program_free(p);
    }
    kiln_program_free(r);
    free(x), free(got), free(want);
    kiln_graph_free(g);
  }
  /* by default at 8 lanes (plans only): resnet50's 1x1 1024 -> 256 at 14x14 takes panels (its
   * weights past half of L2: a panel task's floor of 12 sums, the tiles' estimate packing a 1x1's
   * window too; 0.95 of the tiles), and its 7x7/2 stem channel lanes (a strided window's packing
   * charged twice; 0.83) */
  if (lanes() == 8) {
    kiln_graph *g = pointwise_graph(1, 1024, 14, 256, 1);
    kiln_options o = kiln_options_default();
    o.backend = "cpu";
    kiln_program *p = NULL;
    OK(kiln_program_compile(g, &o, &p));
    int np = p ? count_in_plan(p, "over pixel panels") : -1;
    CHECK_MSG(np == 1, "1x1 1024 -> 256 at 14x14 by default: %d kernels over pixel panels (want 1)", np);
    kiln_program_free(p);
    kiln_graph_free(g);
    OK(kiln_graph_create(&g));
    int64_t xs[4] = { 1, 3, 224, 224 }, ws[4] = { 64, 3, 7, 7 }, bs[1] = { 64 };
    float *wv = alloc_f32(64 * 3 * 49), *bias = alloc_f32(64);
    for (int64_t i = 0; i < 64 * 3 * 49; i++) wv[i] = val(i, 3) / 4;
    for (int64_t i = 0; i < 64; i++) bias[i] = val(i, 4);
    kiln_tensor x, w, b, y;
    OK(kiln_graph_input(g, "x", KILN_F32, 4, xs, &x));
    OK(kiln_graph_param(g, "w", KILN_F32, 4, ws, wv, &w));
    OK(kiln_graph_param(g, "b", KILN_F32, 1, bs, bias, &b));
    kiln_conv_params cp = { .spatial = 2, .strides = { 2, 2 }, .dilations = { 1, 1 }, .pads = { 3, 3, 3, 3 }, .group = 1 };
    OK(kiln_graph_conv(g, x, w, b, &cp, &y));
    OK(kiln_graph_unary(g, KILN_RELU, y, &y));
    OK(kiln_graph_output(g, y, "y"));
    free(wv);
    free(bias);
    OK(kiln_program_compile(g, &o, &p));
    int nl = p ? count_in_plan(p, "channels in lanes") : -1;
    CHECK_MSG(nl == 1, "a 7x7/2 stem by default: %d kernels in channel lanes (want 1)", nl);
    kiln_program_free(p);
    kiln_graph_free(g);
  }
  {  /* cpu_pixel_panels is 0 or 1 */
    kiln_graph *g = pointwise_graph(1, 16, 5, 16, 1);
    kiln_options o = kiln_options_default();
    o.backend = "cpu";
    o.cpu_pixel_panels = 2;
    kiln_program *p = NULL;
    FAILS(KILN_ERR_INVALID_ARG, kiln_program_compile(g, &o, &p));
    CHECK(!p);
    kiln_graph_free(g);
  }
}

/* Winograd's F(2x2, 3x3) (CgCpuDirect.winograd), a 3x3 convolution of stride 1 in channel lanes.
 * Asked for wherever it can go (cpu_winograd 2), against ref: 24 -> 20 channels (a block of 16 and
 * one of 4 at 8 lanes) at 9x9 (an odd row and column: the last tiles half outside, the plane's
 * rows past its last zeros) over five images (a thread's patches transformed again for each of
 * its images, at any count of threads up to 4), then new weights by write_param (their transforms
 * laid out again); 16 -> 16 at 4x4 over five images (a band of one block: the image alone tells a
 * thread its patches are stale). By the cost model at 8 lanes, against the window's sum
 * (cpu_winograd 0, itself checked against ref above): resnet50's 3x3s over 128 channels at 28x28
 * (bands of 3 of its 33 blocks; 0.51 of the window's sum) and over 64 at 56x56 (a band a block, every
 * channel block's transforms in L2; 0.64); res512_4's over 512 at 4x4 keeps the window's sum (its
 * transforms, 16 MiB, stream from memory: 1.8 times slower asked for). cpu_winograd is 0 to 2. */
static void winograd_cases(void) {
  if (!host_lanes()) return;
  static const struct { int64_t n, c, hw, m; } small[] = { { 5, 24, 9, 20 }, { 5, 16, 4, 16 } };
  for (size_t i = 0; i < sizeof small / sizeof small[0]; i++) {
    int64_t n = small[i].n, c = small[i].c, hw = small[i].hw, m = small[i].m, xn = n * c * hw * hw, yn = n * m * hw * hw;
    int64_t wn = m * c * 9;
    kiln_tensor wt;
    kiln_graph *g = lanes_graph(n, c, hw, m, false, &wt);
    float *x = alloc_f32(xn), *w2 = alloc_f32(wn), *got = alloc_f32(yn), *want = alloc_f32(yn);
    for (int64_t j = 0; j < xn; j++) x[j] = val(j, 9 + (int)i);
    for (int64_t j = 0; j < wn; j++) w2[j] = val(j, 5) / 8;
    kiln_options o = kiln_options_default();
    o.backend = "cpu";
    o.cpu_winograd = 2;
    kiln_program *p = NULL;
    OK(kiln_program_compile(g, &o, &p));
    int nw = p ? count_in_plan(p, "Winograd F(2x2, 3x3)") : -1;
    CHECK_MSG(nw == 1, "winograd %lld -> %lld at %lldx%lld asked for: %d kernels (want 1)", (long long)c, (long long)m,
              (long long)hw, (long long)hw, nw);
    if (hw % 2) {  /* the plane's rows past the image's last, which the last tiles' patches read, zeroed (their
                    * garbage would cancel in exact arithmetic, so values alone seldom show it missing) */
      StrBuf src = c_source(g, &o, true);
      CHECK_MSG(src.s && strstr(src.s, "memset(kiln_pl + (kiln_pc * "), "winograd at %lldx%lld: the rows past the plane not zeroed",
                (long long)hw, (long long)hw);
      sb_free(&src);
    }
    for (int round = 0; p && round < 2; round++) {
      if (round == 1) {  /* new weights, in the graph for ref and written to the program */
        OK(kiln_program_write_param(p, wt, w2));
        kiln_graph_free(g);
        g = lanes_graph(n, c, hw, m, true, &wt);
      }
      const void *ins[2] = { x, w2 };
      kiln_program *r = ref_run(g, ins, (void *[]){ want });
      for (int64_t j = 0; j < yn; j++) got[j] = NAN;
      OK(kiln_program_run(p, ins, (void *[]){ got }));
      double e = worst_of(got, want, yn);
      CHECK_MSG(e <= 2e-5, "winograd %lld -> %lld at %lldx%lld, round %d: worst relative error %.3g", (long long)c, (long long)m,
                (long long)hw, (long long)hw, round, e);
      kiln_program_free(r);
    }
    kiln_program_free(p);
    kiln_graph_free(g);
    free(x), free(w2), free(got), free(want);
  }
  static const struct { int64_t c, hw; int winograd; const char *bands; } shapes[] = {
    { 128, 28, 1, "bands of 3 blocks" }, { 64, 56, 1, "bands of 1 blocks" }, { 512, 4, 0, NULL } };
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
    int64_t c = shapes[i].c, hw = shapes[i].hw, xn = c * hw * hw;
    kiln_tensor wt;
    kiln_graph *g = lanes_graph(1, c, hw, c, false, &wt);
    float *x = alloc_f32(xn), *got = alloc_f32(xn), *want = alloc_f32(xn);
    for (int64_t j = 0; j < xn; j++) x[j] = val(j, 2 + (int)i);
    kiln_options o = kiln_options_default();
    o.backend = "cpu";
    kiln_program *p = NULL, *q = NULL;
    OK(kiln_program_compile(g, &o, &p));
    o.cpu_winograd = 0;
    OK(kiln_program_compile(g, &o, &q));
    if (p && q) {
      int nw = count_in_plan(p, "Winograd F(2x2, 3x3)"), nb = shapes[i].bands ? count_in_plan(p, shapes[i].bands) : 0;
      CHECK_MSG(count_in_plan(q, "Winograd") == 0, "3x3 over %lld at %lldx%lld, cpu_winograd 0: Winograd", (long long)c,
                (long long)hw, (long long)hw);
      if (lanes() == 8)
        CHECK_MSG(nw == shapes[i].winograd && nb == shapes[i].winograd,
                  "3x3 over %lld at %lldx%lld by default at 8 lanes: %d Winograd kernels, %d with %s (want %d)", (long long)c,
                  (long long)hw, (long long)hw, nw, nb, shapes[i].bands ? shapes[i].bands : "bands", shapes[i].winograd);
      const void *ins[1] = { x };
      for (int64_t j = 0; j < xn; j++) got[j] = want[j] = NAN;
      OK(kiln_program_run(q, ins, (void *[]){ want }));
      OK(kiln_program_run(p, ins, (void *[]){ got }));
      double e = worst_of(got, want, xn);
      CHECK_MSG(e <= 2e-5, "3x3 over %lld at %lldx%lld: worst relative error %.3g against the window's sum", (long long)c,
                (long long)hw, (long long)hw, e);
    }
    kiln_program_free(p);
    kiln_program_free(q);
    kiln_graph_free(g);
    free(x), free(got), free(want);
  }
  {  /* a NaN and infinities in the input: exactly the outputs whose window holds one are NaN or infinite, as
      * ref's (the tiles holding them taken again as the window's sum; the transforms alone spread them to
      * a tile's four outputs) */
    enum { N = 2, C = 24, HW = 9, M = 20 };
    kiln_tensor wt;
    kiln_graph *g = lanes_graph(N, C, HW, M, false, &wt);
    int64_t xn = (int64_t)N * C * HW * HW, yn = (int64_t)N * M * HW * HW;
    float *x = alloc_f32(xn), *got = alloc_f32(yn), *want = alloc_f32(yn);
    for (int64_t j = 0; j < xn; j++) x[j] = val(j, 4);
    x[(3 * HW + 4) * HW + 5] = NAN;                       /* image 0, channel 3, row 4, column 5 */
    x[((C + 7) * HW + 8) * HW + 8] = INFINITY;            /* image 1, channel 7, the last row and column */
    x[(1 * HW + 0) * HW + 2] = -INFINITY;                 /* image 0, channel 1, the first row */
    const void *ins[1] = { x };
    kiln_program *r = ref_run(g, ins, (void *[]){ want }), *p = NULL;
    kiln_options o = kiln_options_default();
    o.backend = "cpu";
    o.cpu_winograd = 2;
    OK(kiln_program_compile(g, &o, &p));
    if (p && r) {
      CHECK_MSG(count_in_plan(p, "Winograd F(2x2, 3x3)") == 1, "winograd with a NaN: not Winograd");
      for (int64_t j = 0; j < yn; j++) got[j] = 0;
      OK(kiln_program_run(p, ins, (void *[]){ got }));
      int infs = 0;
      for (int64_t j = 0; j < yn; j++) infs += isinf(want[j]);
      CHECK_MSG(infs > 0, "winograd with an infinity: no infinite output in ref's");
      check_against_ref(got, want, yn, "winograd with a NaN and infinities");
    }
    kiln_program_free(p);
    p = NULL;
    o.cpu_winograd = 3;  /* the option's range: 0 to 2 */
    FAILS(KILN_ERR_INVALID_ARG, kiln_program_compile(g, &o, &p));
    CHECK(!p);
    kiln_program_free(r);
    kiln_graph_free(g);
    free(x), free(got), free(want);
  }
}

/* Channel lanes whose tasks take part of a row run their epilogue on vectors of a pixel's
 * channels (CgCpuDirect.channel_items; resnet50's 7x7/2 stem): two images of 28x28 at a stride
 * of 2 into 14x14, 40 output channels (a block of 32 and one of 8), and a residual read at each
 * pixel (a point at a time, planes apart) before the relu, against ref. */
static void channel_items_case(void) {
  if (!host_lanes()) return;
  enum { N = 2, C = 3, HW = 28, CO = 40, OW = 14 };
  kiln_graph *g;
  OK(kiln_graph_create(&g));
  int64_t xs[4] = { N, C, HW, HW }, ws[4] = { CO, C, 7, 7 }, bs[1] = { CO }, rs[4] = { N, CO, OW, OW };
  int64_t wn = (int64_t)CO * C * 49, rn = (int64_t)N * CO * OW * OW;
  float *wv = alloc_f32(wn), *bias = alloc_f32(CO), *res = alloc_f32(rn);
  for (int64_t i = 0; i < wn; i++) wv[i] = val(i, 3) / 4;
  for (int64_t i = 0; i < CO; i++) bias[i] = val(i, 4);
  for (int64_t i = 0; i < rn; i++) res[i] = val(i, 9);
  kiln_tensor x, w, b, r, y;
  OK(kiln_graph_input(g, "x", KILN_F32, 4, xs, &x));
  OK(kiln_graph_param(g, "w", KILN_F32, 4, ws, wv, &w));
  OK(kiln_graph_param(g, "b", KILN_F32, 1, bs, bias, &b));
  OK(kiln_graph_param(g, "r", KILN_F32, 4, rs, res, &r));
  kiln_conv_params cp = { .spatial = 2, .strides = { 2, 2 }, .dilations = { 1, 1 }, .pads = { 3, 3, 3, 3 }, .group = 1 };
  OK(kiln_graph_conv(g, x, w, b, &cp, &y));
  OK(kiln_graph_binary(g, KILN_ADD, y, r, &y));
  OK(kiln_graph_unary(g, KILN_RELU, y, &y));
  OK(kiln_graph_output(g, y, "y"));
  free(wv);
  free(bias);
  free(res);
  kiln_options o;
  kiln_program *p = lanes_asked(g, &o);
  int ni = p ? count_in_plan(p, "items on channel vectors") : -1;
  CHECK_MSG(ni == 1, "a stem in channel lanes: %d kernels with items on channel vectors (want 1)", ni);
  kiln_program_free(p);
  lanes_against_ref(g, &o, (int64_t)N * C * HW * HW, rn, 2, 1, "channel lanes, items on channel vectors");
  kiln_graph_free(g);
}

/* Channel lanes by rows (CgCpuDirect.rows_outer, weights within L2): resnet50's 3x3 over 64
 * channels at 56x56 takes them by default on AVX-512 hosts, where the tiles' window packing made
 * them the dearer (cpu_direct.c, channel_lanes' pack term; its plan only, not run); and the
 * same weights over two images of 10x10, lanes asked for, against ref: a thread's band of the
 * plane starts again in the second image. */
static void channel_lanes_by_rows(void) {
  if (!host_lanes()) return;
  kiln_tensor wt;
  kiln_graph *g = lanes_graph(1, 64, 56, 64, false, &wt);
  kiln_options o = kiln_options_default();
  o.backend = "cpu";
  o.cpu_winograd = 0;  /* the window's sum (winograd_cases has Winograd's) */
  kiln_program *p = NULL;
  OK(kiln_program_compile(g, &o, &p));
  int nc = p ? count_in_plan(p, "channels in lanes") : -1;
  CHECK_MSG(lanes() != 16 || nc == 1, "resnet50's 3x3 over 64 channels: %d kernels in channel lanes (want 1)", nc);
  kiln_program_free(p);
  kiln_graph_free(g);
  enum { N = 2, C = 64, HW = 10 };
  g = lanes_graph(N, C, HW, C, false, &wt);
  o.cpu_channel_lanes = 2;
  lanes_against_ref(g, &o, (int64_t)N * C * HW * HW, (int64_t)N * C * HW * HW, 8, 1, "channel lanes by rows");
  kiln_graph_free(g);
}

/* relu(conv1x1(x) + b + r) over 32 channels in register tiles, rows of 10 (panels of 32 cross them): with the
 * residual r laid out as the output, the epilogue's runs go on across rows, one a panel; read
 * through a transpose (its pixels a column apart along a run), a run a row. x's pack crosses
 * rows either way. Each against ref. */
static void residual_runs_case(void) {
  for (int transposed = 0; transposed <= 1; transposed++) {
    kiln_graph *g;
    OK(kiln_graph_create(&g));
    int64_t xs[4] = { 2, 32, 10, 10 }, ws[4] = { 24, 32, 1, 1 }, bs[1] = { 24 }, rs[4] = { 2, 24, 10, 10 };
    float w[24 * 32], b[24];
    for (int i = 0; i < 24 * 32; i++) w[i] = val(i, 1);
    for (int i = 0; i < 24; i++) b[i] = val(i, 2);
    kiln_tensor x, r, pw, pb, y;
    OK(kiln_graph_input(g, "x", KILN_F32, 4, xs, &x));
    OK(kiln_graph_input(g, "r", KILN_F32, 4, rs, &r));
    OK(kiln_graph_param(g, "w", KILN_F32, 4, ws, w, &pw));
    OK(kiln_graph_param(g, "b", KILN_F32, 1, bs, b, &pb));
    kiln_conv_params cp = { .spatial = 2, .strides = { 1, 1 }, .dilations = { 1, 1 }, .group = 1 };
    OK(kiln_graph_conv(g, x, pw, pb, &cp, &y));
    if (transposed) {
      int perm[4] = { 0, 1, 3, 2 };
      OK(kiln_graph_transpose(g, r, perm, &r));
    }
    OK(kiln_graph_binary(g, KILN_ADD, y, r, &y));
    OK(kiln_graph_unary(g, KILN_RELU, y, &y));
    OK(kiln_graph_output(g, y, "y"));
    int64_t nx = 2 * 32 * 100, ny = 2 * 24 * 100;
    float *in = alloc_f32(nx), *res = alloc_f32(ny), *got = alloc_f32(ny), *want = alloc_f32(ny);
    for (int64_t i = 0; i < nx; i++) in[i] = val(i, 3);
    for (int64_t i = 0; i < ny; i++) res[i] = val(i * 7 + 1, 4);  /* relu's both sides */
    res[10] = res[ny - 1] = NAN;  /* a row's first point, the last */
    const void *ins[2] = { in, res };
    void *ow[1] = { want }, *og[1] = { got };
    kiln_program *ref = ref_run(g, ins, ow), *p = NULL;
    kiln_options o = kiln_options_default();
    o.backend = "cpu";
    o.cpu_direct = 0;
    o.cpu_channel_lanes = 0;
    OK(kiln_program_compile(g, &o, &p));
    const char *name = transposed ? "residual read through a transpose" : "residual laid out as the output";
    if (p && ref) {
      CHECK_MSG(count_in_plan(p, "register tiles") == 1, "%s: not in register tiles", name);
      for (int64_t i = 0; i < ny; i++) got[i] = NAN;
      OK(kiln_program_run(p, ins, og));
      check_against_ref(got, want, ny, name);
    }
    StrBuf src = c_source(g, &o, true);
    if (src.s) {
      bool across = strstr(src.s, "kiln_cv2[kiln_p * KILN_NR + kiln_j0] * INT64_C(10)") != NULL;
      CHECK_MSG(across == !transposed, "%s: the epilogue's runs %s rows", name, across ? "cross" : "keep to");
      /* x is contiguous along its pixels: its runs of the pack cross rows either way */
      CHECK_MSG(strstr(src.s, "kiln_cv2[kiln_j0] * INT64_C(10)"), "%s: the pack's runs keep to rows", name);
    }
    sb_free(&src);
    kiln_program_free(p);
    kiln_program_free(ref);
    kiln_graph_free(g);
    free(in);
    free(res);
    free(got);
    free(want);
  }
}

int main(void) {
  /* KILN_CPU_DIRECT=8 on a host of 8 lanes is this test's own run again (CI under ASan: 150 s) */
  if (lanes_forced() && lanes_forced() == host_lanes()) {
    printf("KILN_CPU_DIRECT=%d on a host of %d lanes: the same run as without it; skipped\n", lanes_forced(), host_lanes());
    return 77;
  }
  static const ConvCase convs[] = {
    { "3x3 pad 1 (lenet's conv2)", 4, 16, 14, 14, 32, 3, 3, 1, 1, 1, 1, true, 1, 0, 1, 0, 0, 1, 0, 0, 0, 0 },
    { "tails: 7 outputs, 5x9 image", 3, 5, 5, 9, 7, 3, 3, 1, 1, 1, 1, false, 1, 0, 1, 0, 0, 1, 0, 1, 1, 0 },
    { "rows of 37 (runs across panels)", 3, 2, 6, 37, 16, 3, 3, 1, 1, 1, 1, true, 1, 0, 1, 0, 0, 1, 0, 0, 0, 0 },
    { "no padding (no guard)", 2, 3, 9, 11, 8, 3, 3, 1, 1, 0, 1, false, 1, 0, 1, 0, 0, 1, 0, 1, 1, 0 },
    { "stride 2, pad 2, 5x5", 2, 6, 17, 13, 10, 5, 5, 2, 1, 2, 1, true, 1, 0, 1, 0, 0, 1, 0, 1, 0, 0 },
    { "dilation 2", 2, 4, 12, 12, 9, 3, 3, 1, 2, 2, 1, false, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0 },
    { "groups 2", 2, 8, 10, 10, 12, 3, 3, 1, 1, 1, 2, true, 0, 0, 0, 0, 0, 1, 0, 1, 1, 0 },
    { "depthwise", 2, 12, 11, 11, 12, 3, 3, 1, 1, 1, 12, true, 0, 1, 0, 0, 0, 1, 0, 1, 1, 0 },
    { "depthwise, stride 2, dilation 2, pad 2", 2, 8, 23, 21, 8, 3, 3, 2, 2, 2, 8, false, 0, 1, 0, 0, 0, 1, 0, 1, 1, 0 },
    /* 1 x 1 direct too: flat at rows of 9, rows at 48 (a plane of 24 x 48 x 48), tiles for a
     * plane over 512 KiB */
    { "1x1 over 24 channels", 2, 24, 9, 9, 40, 1, 1, 1, 1, 0, 1, true, 1, 0, 1, 0, 0, 1, 0, 1, 1, 0 },
    { "1x1 24 to 40 at 48x48", 1, 24, 48, 48, 40, 1, 1, 1, 1, 0, 1, true, 1, 0, 1, 0, 0, 1, 0, 0, 0, 0 },
    { "1x1 96 to 40 at 12x12 (flat, in place)", 2, 96, 12, 12, 40, 1, 1, 1, 1, 0, 1, true, 1, 0, 1, 0, 0, 1, 0, 1, 1, 0 },
    { "1x1 96 to 24 at 48x48 (in place: no plane to pass 512 KiB)", 1, 96, 48, 48, 24, 1, 1, 1, 1, 0, 1, false, 1, 0, 1, 0, 0, 1, 0, 0, 0, 0 },
    { "128 to 64 channels at 5x5 (weights read in place)", 1, 128, 5, 5, 64, 3, 3, 1, 1, 1, 1, true, 1, 0, 1, 1, 0, 1, 0, 1, 1, 0 },
    { "stride 2 over 96 channels (weights in place)", 2, 96, 9, 8, 80, 3, 3, 2, 1, 1, 1, false, 1, 0, 1, 1, 0, 1, 0, 1, 1, 0 },
    { "stride 3, pad 1, 4x4", 2, 5, 19, 23, 9, 4, 4, 3, 1, 1, 1, true, 1, 0, 1, 0, 0, 1, 0, 1, 0, 0 },
    { "stride 2, dilation 3 (a stride of 2, taps 3 apart)", 1, 4, 16, 19, 7, 3, 3, 2, 3, 3, 1, false, 1, 0, 1, 0, 0, 0, 0, 0, 0, 0 },
    /* 9 taps a point: a window, its interior rows of 26 points in chunks of 16 (the last moved
     * back), 29 of 27 and 20 of 18 too; without windows a tile */
    { "one input channel (lenet's conv1)", 2, 1, 28, 28, 16, 3, 3, 1, 1, 1, 1, true, 0, 1, 0, 0, 1, 1, 0, 0, 0, 0 },
    { "one input channel, rows of 29", 1, 1, 7, 29, 5, 3, 3, 1, 1, 1, 1, false, 0, 1, 0, 0, 1, 1, 0, 0, 0, 0 },
    { "one input channel, rows of 20, no padding", 2, 1, 6, 20, 4, 3, 3, 1, 1, 0, 1, true, 0, 1, 0, 0, 1, 1, 0, 1, 0, 0 },
    /* direct with a row stride: the plane's rows two apart an output row, its columns one; and
     * columns three apart, rows one (a plane of three phases a row) */
    { "rows stride 2, columns 1", 2, 6, 15, 22, 11, 3, 3, 1, 1, 1, 1, true, 1, 0, 1, 0, 0, 1, 2, 1, 0, 0 },
    { "rows stride 1, columns 3", 2, 5, 12, 52, 9, 3, 3, 3, 1, 1, 1, false, 1, 0, 1, 0, 0, 1, 1, 1, 0, 0 },
    /* a plane over 512 KiB (200 channels x 42 rows x 82 columns): tiles, not direct */
    { "a plane too large to go direct", 1, 200, 40, 64, 8, 3, 3, 1, 1, 1, 1, false, 1, 0, 1, 0, 0, 0, 0, 0, 0, 1 },
    /* a window that reads the output's channel (depthwise, grouped) goes direct a plane a channel,
     * in flat planes where they compute fewer vectors (the row form only from 256 outputs a plane) */
    { "depthwise at 24x24 (a plane a channel)", 2, 8, 24, 24, 8, 3, 3, 1, 1, 1, 8, true, 0, 1, 0, 0, 0, 1, 0, 1, 1, 0 },
    { "depthwise stride 2 from 40x36", 1, 6, 40, 36, 6, 3, 3, 2, 1, 1, 6, false, 0, 1, 0, 0, 0, 1, 0, 1, 1, 0 },
    /* the row form when flat planes (a copy a window column) pass 512 KiB */
    { "depthwise at 240x240 (rows: flat planes too large)", 1, 2, 240, 240, 2, 3, 3, 1, 1, 1, 2, true, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0 },
    /* depthwise with rows of whole vectors: flat planes (every tap's load aligned), any stride */
    { "depthwise at 32x32 (flat planes)", 1, 8, 32, 32, 8, 3, 3, 1, 1, 1, 8, true, 0, 1, 0, 0, 0, 1, 0, 1, 1, 0 },
    { "depthwise stride 2 from 33x32 (flat planes)", 2, 8, 33, 32, 8, 3, 3, 2, 1, 1, 8, true, 0, 1, 0, 0, 0, 1, 0, 1, 1, 0 },
    { "groups 4 at 18x18 (a plane a channel)", 1, 8, 18, 18, 8, 3, 3, 1, 1, 1, 4, true, 0, 0, 0, 0, 0, 1, 0, 1, 1, 0 },
    /* rows of 24 at 16 lanes: flat, 2 rows in 3 vectors a task, the last block moved back (25 rows) */
    { "48 to 48 at 25x24 (flat planes)", 1, 48, 25, 24, 48, 3, 3, 1, 1, 1, 1, true, 1, 0, 1, 0, 0, 1, 0, 1, 0, 0 },
    /* 2 x 5 taps at a stride of 1: direct with 80 output rows (bands of rows across threads) */
    { "2x5 window, 80 rows", 1, 3, 81, 30, 5, 2, 5, 1, 1, 0, 1, true, 1, 0, 1, 0, 0, 1, 0, 0, 0, 0 },
    /* sums past f32's 4096 points (a 3 x 3 window over 520 and 460 channels): direct in spans of
     * whole channels, each summed in f32, the spans added in f64; flat at 4x4, rows at 6x16 */
    { "3x3 over 520 channels at 4x4 (spans)", 2, 520, 4, 4, 20, 3, 3, 1, 1, 1, 1, true, 1, 0, 1, 1, 0, 1, 0, 1, 1, 0 },
    { "3x3 over 460 channels at 6x16 (spans)", 1, 460, 6, 16, 8, 3, 3, 1, 1, 1, 1, false, 1, 0, 1, 0, 0, 1, 0, 0, 0, 0 },
    /* a 1x1 projection at stride 2 (resnet50's): channel lanes read it in place, rows 2 x 15 apart */
    { "1x1 stride 2 from 15x15 (a projection)", 2, 64, 15, 15, 48, 1, 1, 2, 1, 0, 1, true, 1, 0, 1, 0, 0, 1, 0, 1, 0, 0 },
  };
  for (size_t i = 0; i < sizeof convs / sizeof convs[0]; i++) conv_case(&convs[i]);
  {  /* cpu_run_ends is 0 or 1 */
    float *w = NULL;
    kiln_graph *g = conv_graph(&convs[0], &w);
    kiln_options o = kiln_options_default();
    o.backend = "cpu";
    o.cpu_run_ends = 2;
    kiln_program *p = NULL;
    FAILS(KILN_ERR_INVALID_ARG, kiln_program_compile(g, &o, &p));
    CHECK(!p);
    free(w);
    kiln_graph_free(g);
  }
  in_place_cases();
  residual_runs_case();
  channel_lanes_cases();
  channel_lanes_by_rows();
  channel_items_case();
  channel_lanes_in_place_rows();
  pixel_panels_cases();
  winograd_cases();
  channel_lanes_ring();
  window_max_pool();
  short_product_tiles();
  columns_once_case();
  split_digits_case();
  split_digits_conv_grad_case();
  packed_rows_group();
  expand_case(16, 16, 0);
  expand_case(16, 16, 1);  /* the default: 32 KiB, too small to join */
  expand_case(16, 16, 2);  /* flat planes at 16 lanes, one vector a row */
  expand_case(20, 20, 2);  /* rows of a vector and a short one */
  expand_case(7, 30, 2);
  expand_case(128, 32, 1);  /* the default, 512 KiB: joined */
  conv_of_edge_padded();
  pool_of_relu();
  pool_chunks("2x2 stride 2, rows of 14 (lenet's first)", KILN_POOL_MAX, 28, 28, 2, 2, 0, 8, -1);
  pool_chunks("2x2 stride 2, rows of 7 (lenet's second)", KILN_POOL_MAX, 14, 14, 2, 2, 0, 4, -1);
  pool_chunks("2x2 stride 2 average, rows of 20", KILN_POOL_AVG, 10, 40, 2, 2, 0, 16, -1);
  pool_chunks("3x3 stride 2, rows of 14", KILN_POOL_MAX, 9, 29, 3, 2, 0, 8, -1);
  pool_chunks("2x2 stride 2, rows of 16", KILN_POOL_MAX, 6, 32, 2, 2, 0, 0, -1);
  pool_chunks("3x3 pad 1 average, rows of 14 (guards: whole)", KILN_POOL_AVG, 6, 14, 3, 1, 1, 0, -1);
  /* resnet50's stem pool: 3x3 at stride 2 overlap, so the taps go outside the vector loop (one
   * iteration's 2x - 1, 2x, 2x + 1 ran scalar); 3x3 at stride 1 keeps them (2x2 at stride 2 at
   * rows of 56 runs in chunks) */
  pool_chunks("3x3 stride 2 pad 1, rows of 56 (resnet50's stem pool)", KILN_POOL_MAX, 12, 112, 3, 2, 1, 0, 0);
  pool_chunks("2x2 stride 2, rows of 56", KILN_POOL_MAX, 12, 112, 2, 2, 0, 16, -1);
  pool_chunks("3x3 stride 1 pad 1, rows of 40", KILN_POOL_MAX, 8, 40, 3, 1, 1, 0, 1);
  conv_plus_row_bias();
  short_batched_product();
  product_across_k(24);
  product_across_k(5000);
  rows_in_place_long_sum();  /* over CG_CPU_F32_SUM_MAX: spans of 2048 (a weight gradient's sum over pixels) */
  TEST_MAIN_END();
}
