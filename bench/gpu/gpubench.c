/*
 * gpubench — the device-resident benchmark (kiln_gpubench). Builds the workloads of
 * ../shared/bench/WORKLOADS.md through the public C API, compiles each fused and eager
 * for one backend (default cuda), uploads the inputs once (kiln_program_set_input) and
 * times runs that move nothing between host and device: per workload two medians, the
 * device time of the schedule between two CUDA events (census device_ms: how peers.py times
 * its peers, an event before and after the call) and the wall-clock time of one
 * kiln_program_run (host launch and the wait included). Races rank by the device time.
 * Each program first runs back to back for 200 ms (load clocks) and reports that too: the
 * device time a run in batches of runs (batch_ms), and the spread of the timed runs'.
 *
 * Honest by construction: after the timed runs it reads the census, and a run in which
 * any byte crossed to the host or any op fell back prints the census instead of a time.
 * Outputs are checked against the ref backend (or, where ref would take minutes, fused
 * against eager, and the line says so). The 16-bit rows (bf16, bf16amp) also report
 * f32_rel_err: their error against the same graph in f32 over the same values, fused on the
 * same backend (what computing in bf16 costs). One JSON line per workload on stdout.
 *
 *   kiln_gpubench [--backend cuda] [--only NAME,...] [--cse-race] [--row-race] [--no-check]
 *   (--only may also name siblings_<M>x<K>x<N>: three projections of one input; with
 *   --row-race it picks the race's shapes)
 *
 * --row-race: the cuda block-row variants (KILN_CUDA_ROW, codegen.h's cg_gpu_rows) on the
 * softmax and layernorm workloads, plus a tiny softmax whose time is the launch-and-wait
 * overhead; per shape each variant's median, base timed again last (the spread between the
 * two base runs is the noise), the best variant and best/base, and each variant's largest
 * norm-wise error against base (base itself is checked against ref by the plain run).
 */
#include "kiln.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAXT 16

typedef struct Work {
  char name[64];
  kiln_graph *g;
  int n_in;
  void *in[MAXT];                /* values of wdt (f32 or bf16) */
  int64_t in_numel[MAXT];
  int n_out;
  int64_t out_numel[MAXT];
  kiln_dtype out_dt[MAXT];
  double min_bytes, flops, ref_cost;
} Work;

static unsigned long long rng = 0x2545F4914F6CDD1Dull;

static double urand(void) {
  rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
  return ((double)((rng * 2685821657736338717ull) >> 11) + 0.5) / 9007199254740992.0;
}

static float *randn(int64_t n, double scale, double shift) {
  float *p = malloc((size_t)n * sizeof *p);
  if (!p) { fprintf(stderr, "gpubench: out of memory\n"); exit(1); }
  for (int64_t i = 0; i < n; i++)
    p[i] = (float)(shift + scale * sqrt(-2 * log(urand())) * cos(6.283185307179586 * urand()));
  return p;
}

#define CK(call) \
  do { kiln_status s_ = (call); \
       if (s_ != KILN_OK) { fprintf(stderr, "gpubench: %s: %s: %s\n", #call, kiln_status_name(s_), kiln_last_error()); exit(1); } \
  } while (0)

/* The dtype the workload being built holds its inputs, params and scalars in: f32, or bf16 for
 * the _bf16 rows of WORKLOADS.md (contractions accumulate in f32 either way). */
static kiln_dtype wdt = KILN_F32;

static uint16_t to_bf16(float f) {  /* round to nearest even; no NaN here */
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* Building a 16-bit row's f32 oracle (f32_oracle): f32 tensors whose values are the row's bf16
 * values, so that the two graphs differ only in the rounding of what they compute. */
static bool bf16_values = false;

static float bf16_rounded(float f) {
  uint32_t u = (uint32_t)to_bf16(f) << 16;
  memcpy(&f, &u, 4);
  return f;
}

/* n floats as values of wdt: p itself for f32 (rounded to bf16 under bf16_values), else a new
 * array (p freed). */
static void *as_wdt(float *p, int64_t n) {
  if (wdt == KILN_F32) {
    for (int64_t i = 0; bf16_values && i < n; i++) p[i] = bf16_rounded(p[i]);
    return p;
  }
  uint16_t *h = malloc((size_t)n * 2);
  if (!h) { fprintf(stderr, "gpubench: out of memory\n"); exit(1); }
  for (int64_t i = 0; i < n; i++) h[i] = to_bf16(p[i]);
  free(p);
  return h;
}

static const char *suffix(void) { return wdt == KILN_BF16 ? "_bf16" : ""; }

static int64_t numel(int rank, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < rank; i++) n *= shape[i];
  return n;
}

static kiln_tensor input(Work *w, const char *name, int rank, const int64_t *shape, float *data) {
  kiln_tensor t;
  CK(kiln_graph_input(w->g, name, wdt, rank, shape, &t));
  w->in_numel[w->n_in] = numel(rank, shape);
  w->in[w->n_in++] = as_wdt(data, numel(rank, shape));
  return t;
}

static kiln_tensor param(Work *w, const char *name, int rank, const int64_t *shape, double scale, double shift) {
  kiln_tensor t;
  void *d = as_wdt(randn(numel(rank, shape), scale, shift), numel(rank, shape));
  CK(kiln_graph_param(w->g, name, wdt, rank, shape, d, &t));
  free(d);
  return t;
}

static void output(Work *w, kiln_tensor t) {
  int rank;
  int64_t shape[KILN_MAX_RANK];
  CK(kiln_tensor_shape(w->g, t, &rank, shape));
  CK(kiln_tensor_dtype(w->g, t, &w->out_dt[w->n_out]));
  w->out_numel[w->n_out++] = numel(rank, shape);
  CK(kiln_graph_output(w->g, t, NULL));
}

static kiln_tensor bin(Work *w, kiln_binary_op op, kiln_tensor a, kiln_tensor b) {
  kiln_tensor t;
  CK(kiln_graph_binary(w->g, op, a, b, &t));
  return t;
}

static kiln_tensor un(Work *w, kiln_unary_op op, kiln_tensor a) {
  kiln_tensor t;
  CK(kiln_graph_unary(w->g, op, a, &t));
  return t;
}

static kiln_tensor sc(Work *w, double v) {
  kiln_tensor t;
  CK(kiln_graph_scalar(w->g, wdt, wdt == KILN_F32 && bf16_values ? bf16_rounded((float)v) : v, &t));
  return t;
}

static kiln_tensor mm(Work *w, kiln_tensor a, kiln_tensor b) {
  kiln_tensor t;
  CK(kiln_graph_matmul(w->g, a, b, &t));
  return t;
}

static void begin(Work *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void begin(Work *w, const char *fmt, ...) {
  memset(w, 0, sizeof *w);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(w->name, sizeof w->name, fmt, ap);
  va_end(ap);
  CK(kiln_graph_create(&w->g));
}

static void chain10(Work *w) {
  int64_t n = 1 << 24, s[1] = { n };
  begin(w, "chain10_16M");
  kiln_tensor x = input(w, "x", 1, s, randn(n, 1, 0)), wt = input(w, "w", 1, s, randn(n, 1, 0));
  kiln_tensor a = bin(w, KILN_MUL, x, wt), b = bin(w, KILN_ADD, a, sc(w, 1)), c = un(w, KILN_TANH, b);
  kiln_tensor d = bin(w, KILN_MUL, c, c), e = bin(w, KILN_SUB, sc(w, 1), d), f = bin(w, KILN_MUL, e, x);
  kiln_tensor g = un(w, KILN_EXP, un(w, KILN_NEG, f)), h = bin(w, KILN_MAX, g, sc(w, 0));
  kiln_tensor i = bin(w, KILN_DIV, h, bin(w, KILN_ADD, sc(w, 1), bin(w, KILN_MUL, x, x)));
  output(w, bin(w, KILN_SUB, i, sc(w, 0.5)));
  w->min_bytes = 3.0 * n * 4, w->flops = 12.0 * n, w->ref_cost = 12.0 * n;
}

static void softmax(Work *w, int64_t r, int64_t c) {
  int64_t s[2] = { r, c };
  begin(w, "softmax_%lldx%lld", (long long)r, (long long)c);
  kiln_tensor x = input(w, "x", 2, s, randn(r * c, 1, 0)), y;
  CK(kiln_graph_softmax(w->g, x, 1, &y));
  output(w, y);
  w->min_bytes = 2.0 * r * c * 4, w->flops = 5.0 * r * c, w->ref_cost = 5.0 * r * c;
}

static void layernorm(Work *w, int64_t r, int64_t c) {
  int64_t s[2] = { r, c }, sv[1] = { c };
  begin(w, "layernorm_%lldx%lld", (long long)r, (long long)c);
  kiln_tensor x = input(w, "x", 2, s, randn(r * c, 1, 0));
  kiln_tensor g = input(w, "g", 1, sv, randn(c, 1, 0)), b = input(w, "b", 1, sv, randn(c, 1, 0)), y;
  CK(kiln_graph_layernorm(w->g, x, g, b, 1, 1e-5, &y));
  output(w, y);
  w->min_bytes = 2.0 * r * c * 4, w->flops = 8.0 * r * c, w->ref_cost = 8.0 * r * c;
}

static kiln_tensor dense(Work *w, kiln_tensor x, int64_t k, int64_t n, bool relu, const char *name) {
  int64_t ws[2] = { k, n }, bs[1] = { n };
  char wn[32], bn[32];
  snprintf(wn, sizeof wn, "%s.w", name), snprintf(bn, sizeof bn, "%s.b", name);
  kiln_tensor y = bin(w, KILN_ADD, mm(w, x, param(w, wn, 2, ws, 0.05, 0)), param(w, bn, 1, bs, 0.1, 0));
  return relu ? un(w, KILN_RELU, y) : y;
}

static void mlp_fwd(Work *w, int64_t batch) {
  int64_t s[2] = { batch, 784 };
  begin(w, "mlp_fwd_b%lld%s", (long long)batch, suffix());
  kiln_tensor x = input(w, "x", 2, s, randn(batch * 784, 1, 0));
  kiln_tensor h = dense(w, dense(w, x, 784, 512, true, "l1"), 512, 512, true, "l2");
  output(w, dense(w, h, 512, 10, false, "l3"));
  double p = 784.0 * 512 + 512 + 512.0 * 512 + 512 + 512.0 * 10 + 10;
  w->flops = 2.0 * batch * (784 * 512 + 512 * 512 + 512 * 10);
  w->min_bytes = (double)kiln_dtype_size(wdt) * (p + batch * 784.0 + batch * 10.0), w->ref_cost = w->flops;
}

/* Three projections of one input, q, k and v as separate MatMuls (siblings_<M>x<K>x<N>: run
 * only when --only names it; not a row of WORKLOADS.md). */
static void siblings(Work *w, int64_t m, int64_t k, int64_t n) {
  int64_t s[2] = { m, k };
  begin(w, "siblings_%lldx%lldx%lld", (long long)m, (long long)k, (long long)n);
  kiln_tensor x = input(w, "x", 2, s, randn(m * k, 1, 0));
  static const char *const names[3] = { "q", "k", "v" };
  for (int i = 0; i < 3; i++) output(w, dense(w, x, k, n, false, names[i]));
  w->flops = 3 * 2.0 * (double)m * (double)k * (double)n;
  w->min_bytes = 4.0 * ((double)m * k + 3.0 * ((double)k * n + n) + 3.0 * m * n), w->ref_cost = w->flops;
}

/* loss = -sum(log_softmax(z) * y) / batch */
static kiln_tensor xent(Work *w, kiln_tensor z, kiln_tensor y, int64_t batch) {
  kiln_tensor lp, s;
  CK(kiln_graph_log_softmax(w->g, z, 1, &lp));
  CK(kiln_graph_reduce(w->g, KILN_REDUCE_SUM, bin(w, KILN_MUL, lp, y), 0, NULL, 0, &s));
  return bin(w, KILN_DIV, un(w, KILN_NEG, s), sc(w, (double)batch));
}

static float *one_hot(int64_t batch) {
  float *y = calloc((size_t)batch * 10, sizeof *y);
  for (int64_t i = 0; i < batch; i++) y[i * 10 + (int)(urand() * 10) % 10] = 1;
  return y;
}

/* Outputs the loss, then p - lr * grad for every parameter. */
static void sgd_outputs(Work *w, kiln_tensor loss, int n, const kiln_tensor *p) {
  kiln_tensor gr[MAXT];
  CK(kiln_graph_grad(w->g, loss, n, p, gr));
  output(w, loss);
  for (int i = 0; i < n; i++) output(w, bin(w, KILN_SUB, p[i], bin(w, KILN_MUL, sc(w, 0.01), gr[i])));
}

/* amp: mlp_train_b<B>_bf16amp, every contraction (the backward ones too) on bf16 copies of its
 * operands with an f32 result (kiln_graph_set_autocast); params, loss and update f32 */
static void mlp_train(Work *w, int64_t batch, bool amp) {
  int64_t xs[2] = { batch, 784 }, ys[2] = { batch, 10 }, w1s[2] = { 784, 128 }, b1s[1] = { 128 },
          w2s[2] = { 128, 10 }, b2s[1] = { 10 };
  begin(w, "mlp_train_b%lld%s", (long long)batch, amp ? "_bf16amp" : "");
  if (amp) CK(kiln_graph_set_autocast(w->g, KILN_BF16));
  kiln_tensor x = input(w, "x", 2, xs, randn(batch * 784, 1, 0)), y = input(w, "y", 2, ys, one_hot(batch));
  kiln_tensor p[4] = { param(w, "w1", 2, w1s, 0.05, 0), param(w, "b1", 1, b1s, 0.1, 0),
                       param(w, "w2", 2, w2s, 0.05, 0), param(w, "b2", 1, b2s, 0.1, 0) };
  kiln_tensor h = un(w, KILN_RELU, bin(w, KILN_ADD, mm(w, x, p[0]), p[1]));
  kiln_tensor z = bin(w, KILN_ADD, mm(w, h, p[2]), p[3]);
  sgd_outputs(w, xent(w, z, y, batch), 4, p);
  double np = 784.0 * 128 + 128 + 128 * 10 + 10;
  w->flops = 6.0 * batch * (784 * 128 + 128 * 10);
  w->min_bytes = 4.0 * (2 * np + batch * 794.0), w->ref_cost = w->flops;
}

static kiln_tensor conv_relu_pool(Work *w, kiln_tensor x, kiln_tensor k, kiln_tensor c) {
  kiln_conv_params cp = { .spatial = 2, .pads = { 1, 1, 1, 1 } };
  kiln_pool_params pp = { .spatial = 2, .kernel = { 2, 2 }, .strides = { 2, 2 } };
  kiln_tensor y, z;
  CK(kiln_graph_conv(w->g, x, k, c, &cp, &y));
  CK(kiln_graph_pool(w->g, KILN_POOL_MAX, un(w, KILN_RELU, y), &pp, &z));
  return z;
}

static void cnn_train(Work *w) {
  int64_t batch = 32, xs[4] = { batch, 1, 28, 28 }, ys[2] = { batch, 10 };
  int64_t k1s[4] = { 16, 1, 3, 3 }, c1s[1] = { 16 }, k2s[4] = { 32, 16, 3, 3 }, c2s[1] = { 32 };
  int64_t w3s[2] = { 1568, 128 }, b3s[1] = { 128 }, w4s[2] = { 128, 10 }, b4s[1] = { 10 }, flat[2] = { batch, 1568 };
  begin(w, "cnn_train_b32");
  kiln_tensor x = input(w, "x", 4, xs, randn(batch * 784, 1, 0)), y = input(w, "y", 2, ys, one_hot(batch));
  kiln_tensor p[8] = { param(w, "k1", 4, k1s, 0.3, 0), param(w, "c1", 1, c1s, 0.1, 0),
                       param(w, "k2", 4, k2s, 0.1, 0), param(w, "c2", 1, c2s, 0.1, 0),
                       param(w, "w3", 2, w3s, 0.03, 0), param(w, "b3", 1, b3s, 0.1, 0),
                       param(w, "w4", 2, w4s, 0.1, 0), param(w, "b4", 1, b4s, 0.1, 0) };
  kiln_tensor h = conv_relu_pool(w, conv_relu_pool(w, x, p[0], p[1]), p[2], p[3]), hf;
  CK(kiln_graph_reshape(w->g, h, 2, flat, &hf));
  h = un(w, KILN_RELU, bin(w, KILN_ADD, mm(w, hf, p[4]), p[5]));
  sgd_outputs(w, xent(w, bin(w, KILN_ADD, mm(w, h, p[6]), p[7]), y, batch), 8, p);
  double np = 16 * 9 + 16 + 32 * 16 * 9 + 32 + 1568.0 * 128 + 128 + 1280 + 10;
  w->flops = 6.0 * batch * (28 * 28 * 16 * 9 + 14 * 14 * 32 * 16 * 9 + 1568 * 128 + 1280);
  w->min_bytes = 4.0 * (2 * np + batch * 794.0), w->ref_cost = w->flops;
}

static kiln_tensor heads(Work *w, kiln_tensor qkv, int which, const int *perm) {
  int64_t st[3] = { 0, 0, which * 768 }, en[3] = { 8, 128, (which + 1) * 768 }, s4[4] = { 8, 128, 12, 64 };
  kiln_tensor a, b, c;
  CK(kiln_graph_slice(w->g, qkv, 3, st, en, NULL, NULL, &a));
  CK(kiln_graph_reshape(w->g, a, 4, s4, &b));
  CK(kiln_graph_transpose(w->g, b, perm, &c));
  return c;
}

static kiln_tensor ln(Work *w, kiln_tensor x, const char *name) {
  int64_t s[1] = { 768 };
  char gn[32], bn[32];
  snprintf(gn, sizeof gn, "%s.g", name), snprintf(bn, sizeof bn, "%s.b", name);
  kiln_tensor y;
  CK(kiln_graph_layernorm(w->g, x, param(w, gn, 1, s, 0.1, 1), param(w, bn, 1, s, 0.1, 0), 2, 1e-5, &y));
  return y;
}

static void bert(Work *w) {
  int64_t xs[3] = { 8, 128, 768 }, s3[3] = { 8, 128, 768 };
  static const int p0213[4] = { 0, 2, 1, 3 }, p0231[4] = { 0, 2, 3, 1 };
  begin(w, "bert_layer_b8s128%s", suffix());
  kiln_tensor x = input(w, "x", 3, xs, randn(8 * 128 * 768, 1, 0));
  kiln_tensor qkv = dense(w, x, 768, 2304, false, "qkv");
  kiln_tensor q = heads(w, qkv, 0, p0213), kt = heads(w, qkv, 1, p0231), v = heads(w, qkv, 2, p0213);
  kiln_tensor att, o, ot, h;
  CK(kiln_graph_softmax(w->g, bin(w, KILN_MUL, mm(w, q, kt), sc(w, 0.125)), 3, &att));
  CK(kiln_graph_transpose(w->g, mm(w, att, v), p0213, &o));
  CK(kiln_graph_reshape(w->g, o, 3, s3, &ot));
  h = ln(w, bin(w, KILN_ADD, x, dense(w, ot, 768, 768, false, "o")), "ln1");
  kiln_tensor f = dense(w, un(w, KILN_GELU_TANH, dense(w, h, 768, 3072, false, "f1")), 3072, 768, false, "f2");
  output(w, ln(w, bin(w, KILN_ADD, h, f), "ln2"));
  double bs = 8 * 128;
  w->flops = 2 * bs * (768.0 * 2304 + 768.0 * 768 + 2 * 768.0 * 3072) + 4 * bs * 128 * 768;
  w->min_bytes = (double)kiln_dtype_size(wdt) * (2 * bs * 768 + 768.0 * 2304 + 2304 + 768.0 * 768 + 768 * 5 + 2 * 768.0 * 3072 + 3072);
  w->ref_cost = w->flops;
}

/* -- measuring -- */

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

typedef struct Result {
  kiln_status st;
  double ms, dev_ms;  /* medians: wall clock of a run; the census's device_ms (CUDA events) */
  double dev_lo, dev_hi;  /* the device times' 10th and 90th percentiles: a spread within one program */
  double batch_ms;        /* device time a run in batches of runs back to back (kiln_program_run_times) */
  kiln_census c;
  float *out[MAXT];
  char why[400];
} Result;

static void result_free(Result *r) {
  for (int i = 0; i < MAXT; i++) free(r->out[i]);
}

/* kiln_options.tensor_cores for measure (-1: the default): the bf16 rows are checked against
 * the same graph on the f32 tiles */
static int tensor_cores = -1;

/* Compiles w for backend with fuse/cse, uploads the inputs once, times resident runs. */
static Result measure(Work *w, const char *backend, int fuse, int cse, bool timed, bool keep_out) {
  Result r = { 0 };
  kiln_options o = kiln_options_default();
  o.backend = backend, o.fuse = fuse, o.cse = cse;
  if (tensor_cores >= 0) o.tensor_cores = tensor_cores;
  kiln_program *p = NULL;
  if ((r.st = kiln_program_compile(w->g, &o, &p))) {
    snprintf(r.why, sizeof r.why, "%s", kiln_last_error());
    return r;
  }
  for (int i = 0; i < w->n_in && !r.st; i++) r.st = kiln_program_set_input(p, i, w->in[i]);
  if (!r.st) r.st = kiln_program_run(p, NULL, NULL);
  if (!r.st && timed) {
    double t[400], dev[400];
    int n = 0;
    for (int i = 0; i < 10 && !r.st; i++) r.st = kiln_program_run(p, NULL, NULL);
    /* Runs back to back first, 200 ms of them: a driver that lowers the clocks while the device
     * idles between runs that each wait (the H200's Vulkan driver: 1980 MHz down to 345-900 within
     * seconds; not CUDA's) is at its load clocks for the timed runs. Their batches' times too.
     * On vulkan the warm-up is a second, and each timed run is followed by a batch of about a
     * millisecond of runs back to back, untimed: the device stays busy between timed runs, as
     * the peers' timing loops keep theirs. Without them the H200's driver went down to 345 MHz
     * in the middle of a workload's timed runs (bench/results/2026-12-05-h200-vulkan-rows:
     * layernorm_8192x4096's median 0.170 ms, its p10 0.070). */
    bool keep_busy = !strcmp(backend, "vulkan");
    int reps = 1;
    double bt[64];
    int nb = 0;
    for (double w0 = now_ms(); !r.st && now_ms() - w0 < (keep_busy ? 1000 : 200);) {
      double a = now_ms();
      r.st = kiln_program_run_times(p, reps);
      if (!r.st && now_ms() - a < 1 && reps < 4096) reps *= 2;
    }
    for (int i = 0; i < 10 && !r.st; i++) {
      r.st = kiln_program_run_times(p, reps);
      if (!r.st) r.st = kiln_program_census(p, &r.c);
      if (!r.st) bt[nb++] = r.c.device_ms / reps;
    }
    qsort(bt, (size_t)nb, sizeof bt[0], cmp_d);
    r.batch_ms = nb ? bt[nb / 2] : NAN;
    double start = now_ms();
    while (!r.st && n < 400 && (n < 30 || now_ms() - start < 1500)) {
      double a = now_ms();
      r.st = kiln_program_run(p, NULL, NULL);
      t[n] = now_ms() - a;
      if (!r.st) r.st = kiln_program_census(p, &r.c);
      dev[n++] = r.c.device_ms;
      if (keep_busy && !r.st) r.st = kiln_program_run_times(p, reps);
    }
    if (keep_busy && !r.st) r.st = kiln_program_run(p, NULL, NULL);  /* the census below a lone run's, as without */
    qsort(t, (size_t)n, sizeof t[0], cmp_d);
    qsort(dev, (size_t)n, sizeof dev[0], cmp_d);
    r.ms = n ? t[n / 2] : NAN;
    r.dev_ms = n ? dev[n / 2] : NAN;
    r.dev_lo = n ? dev[n / 10] : NAN, r.dev_hi = n ? dev[n - 1 - n / 10] : NAN;
  }
  if (!r.st) r.st = kiln_program_census(p, &r.c);
  for (int i = 0; keep_out && i < w->n_out && !r.st; i++) {
    r.out[i] = malloc((size_t)w->out_numel[i] * sizeof(float));
    r.st = r.out[i] ? kiln_program_read_output(p, i, r.out[i]) : KILN_ERR_NO_MEMORY;
    if (!r.st && w->out_dt[i] == KILN_BF16)  /* the 16-bit values in the array's first half, widened in place from the end */
      for (int64_t j = w->out_numel[i] - 1; j >= 0; j--) {
        uint32_t u = (uint32_t)((const uint16_t *)r.out[i])[j] << 16;
        memcpy(&r.out[i][j], &u, 4);
      }
  }
  if (r.st) snprintf(r.why, sizeof r.why, "%s", kiln_last_error());
  kiln_program_free(p);
  return r;
}

/* The time races rank by: device (event) time where the backend has one, else wall. */
static double tmed(const Result *r) { return r->dev_ms > 0 ? r->dev_ms : r->ms; }

/* Norm-wise relative error ||a - b|| / ||b|| over every output (NaN if any is NaN). */
static double rel_err(const Work *w, const Result *a, const Result *b) {
  double num = 0, den = 0;
  for (int i = 0; i < w->n_out; i++)
    for (int64_t j = 0; j < w->out_numel[i]; j++) {
      double d = (double)a->out[i][j] - (double)b->out[i][j];
      num += d * d, den += (double)b->out[i][j] * b->out[i][j];
    }
  return sqrt(num) / (sqrt(den) + 1e-30);
}

static void json_str(const char *s) {
  putchar('"');
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') printf("\\%c", *s);
    else if ((unsigned char)*s < 32) putchar(' ');
    else putchar(*s);
  }
  putchar('"');
}

/* A census that allows a time: nothing crossed to the host, nothing fell back. */
static bool honest(const kiln_census *c) {
  return c->h2d_bytes == 0 && c->d2h_bytes == 0 && c->h2d_copies == 0 && c->d2h_copies == 0 && c->host_fallbacks == 0;
}

/* --once: each program run once and checked, no timed runs (under compute-sanitizer, where a run of
 * the sibling GEMMs took 0.4 s under racecheck and the timing loops ran past the step's time) */
static bool once;

static void print_time(const char *key, const Result *r) {
  printf(", \"%s_ms\": ", key);
  if (r->st) { printf("null, \"%s_error\": ", key); json_str(r->why); return; }
  if (!honest(&r->c)) {
    printf("null, \"%s_census\": {\"h2d_bytes\": %lld, \"d2h_bytes\": %lld, \"fallbacks\": %lld, \"ops\": ", key,
           (long long)r->c.h2d_bytes, (long long)r->c.d2h_bytes, (long long)r->c.host_fallbacks);
    json_str(r->c.fallback_ops);
    printf("}");
    return;
  }
  if (once) {  /* no time: a run's kernels only */
    printf("null, \"%s_kernels\": %lld", key, (long long)r->c.kernels_launched);
    return;
  }
  printf("%.5f, \"%s_dev_ms\": %.5f, \"%s_dev_p10\": %.5f, \"%s_dev_p90\": %.5f, \"%s_batch_ms\": %.5f, "
         "\"%s_kernels\": %lld, \"%s_submissions\": %lld", r->ms, key, r->dev_ms, key, r->dev_lo, key, r->dev_hi, key,
         r->batch_ms, key, (long long)r->c.kernels_launched, key, (long long)r->c.submissions);
}

enum { N_WORK = 18 };

/* Workload k of kiln_gpubench's list (the bf16 rows last); oracle: a 16-bit row's f32 twin, the
 * same graph in f32 over the same values (the amp row without autocast). */
static void build(Work *w, int k, bool oracle) {
  static const int64_t sm[5][2] = { { 4096, 128 }, { 4096, 1024 }, { 4096, 4096 }, { 32768, 512 }, { 256, 32768 } };
  static const int64_t lnr[3][2] = { { 4096, 768 }, { 16384, 1024 }, { 8192, 4096 } };
  wdt = (k == 15 || k == 16) && !oracle ? KILN_BF16 : KILN_F32;
  bf16_values = (k == 15 || k == 16) && oracle;
  if (k == 15) mlp_fwd(w, 4096);
  else if (k == 16) bert(w);
  else if (k == 17) mlp_train(w, 1024, !oracle);
  else if (k == 0) chain10(w);
  else if (k <= 5) softmax(w, sm[k - 1][0], sm[k - 1][1]);
  else if (k <= 8) layernorm(w, lnr[k - 6][0], lnr[k - 6][1]);
  else if (k <= 10) mlp_fwd(w, k == 9 ? 128 : 4096);
  else if (k <= 12) mlp_train(w, k == 11 ? 32 : 1024, false);
  else if (k == 13) cnn_train(w);
  else bert(w);
  bf16_values = false;
}

static void work_free(Work *w) {
  kiln_graph_free(w->g);
  for (int i = 0; i < w->n_in; i++) free(w->in[i]);
}

/* A 16-bit row's error against its f32 oracle (built from the random state `seed` the row was
 * built from), fused on the same backend: what computing in bf16 costs in accuracy. Prints
 * "f32_rel_err" (or "f32_error"). */
static void f32_oracle(const Work *w, const Result *f, int k, unsigned long long seed, const char *backend) {
  unsigned long long keep = rng;
  kiln_dtype keep_t = wdt;
  Work o;
  rng = seed;
  build(&o, k, true);
  rng = keep, wdt = keep_t;
  bool same = o.n_out == w->n_out;
  for (int i = 0; same && i < w->n_out; i++) same = o.out_numel[i] == w->out_numel[i];
  Result r = same ? measure(&o, backend, 1, 0, false, true) : (Result){ .st = KILN_ERR_INVALID_ARG };
  if (!same) snprintf(r.why, sizeof r.why, "the f32 oracle's outputs differ in shape");
  if (!r.st) printf(", \"f32_rel_err\": %.3g", rel_err(w, f, &r));
  else { printf(", \"f32_error\": "); json_str(r.why); }
  result_free(&r);
  work_free(&o);
}

/* k, seed: the row's place in the list and the random state it was built from (k < 0: a shape
 * named only in --only) */
static void run_work(Work *w, const char *backend, bool check, int k, unsigned long long seed) {
  Result f = measure(w, backend, 1, 0, !once, check), e = measure(w, backend, 0, 0, !once, check);
  printf("{\"workload\": \"%s\", \"backend\": \"%s\", \"min_bytes\": %.0f, \"flops\": %.0f", w->name, backend,
         w->min_bytes, w->flops);
  print_time("fused", &f);
  print_time("eager", &e);
  if (!f.st) printf(", \"bytes_moved\": %lld, \"fallbacks\": %lld, \"compile_ms\": %.1f",
                    (long long)(f.c.bytes_read + f.c.bytes_written), (long long)f.c.host_fallbacks, f.c.compile_ms);
  if (check && !f.st && !e.st) {
    /* bf16 rows too long for ref: against the same graph fused on the f32 tiles (no tensor cores) */
    bool use_ref = w->ref_cost <= 4e8, simt = !use_ref && strstr(w->name, "bf16") && !strcmp(backend, "cuda");
    if (simt) tensor_cores = 0;
    Result r = use_ref ? measure(w, "ref", 1, 0, false, true) : simt ? measure(w, backend, 1, 0, false, true) : e;
    tensor_cores = -1;
    if (!r.st) printf(", \"rel_err\": %.3g, \"err_vs\": \"%s\", \"eager_rel_err\": %.3g", rel_err(w, &f, &r),
                      use_ref ? "ref" : simt ? "f32 tiles" : "eager", use_ref || simt ? rel_err(w, &e, &r) : 0.0);
    else { printf(", \"ref_error\": "); json_str(r.why); }
    if (use_ref || simt) result_free(&r);
    if (k >= 15) f32_oracle(w, &f, k, seed, backend);
  }
  printf("}\n");
  fflush(stdout);
  result_free(&f), result_free(&e);
}

/* Softmax at nine shapes: default (recompute the shared exp) against KILN_CSE=1. */
static void cse_race(const char *backend) {
  static const int64_t rows[3] = { 1024, 4096, 16384 }, cols[3] = { 128, 1024, 4096 };
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) {
      Work w;
      softmax(&w, rows[i], cols[j]);
      Result off = measure(&w, backend, 1, 0, true, false), on = measure(&w, backend, 1, 1, true, false);
      printf("{\"cse_race\": \"%s\"", w.name);
      print_time("off", &off);
      print_time("on", &on);
      if (!off.st && !on.st) printf(", \"on_over_off\": %.3f", tmed(&on) / tmed(&off));
      printf("}\n");
      fflush(stdout);
      work_free(&w);
    }
}

/* The names KILN_CUDA_ROW takes (src/codegen/render.c); base first, the default. */
static const char *const row_variants[] = { "base", "warp", "vec", "wvec", "p16", "p16vec", "long", "wveclong", "auto" };
enum { N_ROWV = sizeof row_variants / sizeof row_variants[0] };

/* Whether --only's list (names separated by commas; empty: all) picks `name`. */
static bool picked(const char *only, const char *name) {
  bool pick = !only[0];
  for (const char *s = only; *s && !pick;) {
    size_t n = strcspn(s, ",");
    pick = n && !strncmp(name, s, n);
    s += n + (s[n] == ',');
  }
  return pick;
}

static void row_race(const char *backend, const char *only) {
  static const int64_t shapes[][3] = {  /* kind (0 softmax, 1 layernorm), rows, cols */
    { 0, 8, 128 },     { 0, 4096, 128 },   { 0, 4096, 1024 },   { 0, 4096, 4096 }, { 0, 32768, 512 },
    { 0, 256, 32768 }, { 1, 4096, 768 },   { 1, 16384, 1024 }, { 1, 8192, 4096 },
  };
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    Work w;
    if (shapes[s][0] == 0) softmax(&w, shapes[s][1], shapes[s][2]);
    else layernorm(&w, shapes[s][1], shapes[s][2]);
    if (!picked(only, w.name)) {
      work_free(&w);
      continue;
    }
    Result r[N_ROWV + 1];
    for (int v = 0; v <= N_ROWV; v++) {
      setenv("KILN_CUDA_ROW", row_variants[v % N_ROWV], 1);  /* base again last: the noise */
      r[v] = measure(&w, backend, 1, 0, true, v < N_ROWV);
    }
    unsetenv("KILN_CUDA_ROW");
    printf("{\"row_race\": \"%s\", \"min_bytes\": %.0f", w.name, w.min_bytes);
    int best = -1;
    double err = 0;
    for (int v = 0; v <= N_ROWV; v++) {
      print_time(v < N_ROWV ? row_variants[v] : "base2", &r[v]);
      if (v < N_ROWV && !r[v].st && honest(&r[v].c) && (best < 0 || tmed(&r[v]) < tmed(&r[best]))) best = v;
      if (v > 0 && v < N_ROWV && !r[v].st && !r[0].st) {
        double e = rel_err(&w, &r[v], &r[0]);
        printf(", \"%s_err\": %.3g", row_variants[v], e);
        if (!(e <= err)) err = e;  /* NaN stays */
      }
    }
    if (best >= 0 && !r[0].st) printf(", \"best\": \"%s\", \"best_over_base\": %.3f", row_variants[best], tmed(&r[best]) / tmed(&r[0]));
    printf(", \"max_err_vs_base\": %.3g}\n", err);
    fflush(stdout);
    for (int v = 0; v <= N_ROWV; v++) result_free(&r[v]);
    work_free(&w);
  }
}

int main(int argc, char **argv) {
  const char *backend = "cuda", *only = "";
  bool race = false, check = true, rrace = false;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--backend") && i + 1 < argc) backend = argv[++i];
    else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
    else if (!strcmp(argv[i], "--cse-race")) race = true;
    else if (!strcmp(argv[i], "--row-race")) rrace = true;
    else if (!strcmp(argv[i], "--no-check")) check = false;
    else if (!strcmp(argv[i], "--once")) once = true;
    else {
      fprintf(stderr, "usage: kiln_gpubench [--backend B] [--only NAME,...] [--cse-race] [--row-race] [--no-check] [--once]\n");
      return 2;
    }
  }
  if (race) { cse_race(backend); return 0; }
  if (rrace) { row_race(backend, only); return 0; }
  for (int k = 0; k < N_WORK; k++) {
    Work w;
    unsigned long long seed = rng;
    build(&w, k, false);
    if (picked(only, w.name)) run_work(&w, backend, check, k, seed);
    work_free(&w);
  }
  for (const char *s = only; *s;) {  /* shapes named only in --only */
    size_t n = strcspn(s, ",");
    long long m, k, c;
    if (sscanf(s, "siblings_%lldx%lldx%lld", &m, &k, &c) == 3 && m > 0 && k > 0 && c > 0) {
      Work w;
      siblings(&w, m, k, c);
      run_work(&w, backend, check, -1, 0);
      work_free(&w);
    }
    s += n + (s[n] == ',');
  }
  return 0;
}
