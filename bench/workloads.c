/*
 * workloads.c — builders for the benchmark workloads (workloads.h). Each builder
 * makes the graph of WORKLOADS.md through the public API, with parameters and inputs
 * drawn from a fixed seed, so every caller sees the same numbers.
 */
#include "workloads.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const wl_standard[] = {
  "chain10_16M", "softmax_4096x128", "softmax_4096x1024", "softmax_4096x4096", "softmax_32768x512",
  "softmax_256x32768", "layernorm_4096x768", "layernorm_16384x1024", "layernorm_8192x4096",
  "mlp_fwd_b128", "mlp_fwd_b4096", "mlp_train_b32", "mlp_train_b1024", "cnn_train_b32", "bert_layer_b8s128",
};
const int wl_n_standard = sizeof wl_standard / sizeof wl_standard[0];

static unsigned long long wl_seed = 0x9e3779b97f4a7c15ull;

static double uniform01(void) {
  wl_seed ^= wl_seed >> 12; wl_seed ^= wl_seed << 25; wl_seed ^= wl_seed >> 27;
  return ((double)((wl_seed * 2685821657736338717ull) >> 11) + 0.5) / 9007199254740992.0;
}

static float normal(void) {
  return (float)(sqrt(-2.0 * log(uniform01())) * cos(6.283185307179586 * uniform01()));
}

static float *random_floats(int64_t n, float scale) {
  float *p = malloc((size_t)(n ? n : 1) * sizeof *p);
  if (p)
    for (int64_t i = 0; i < n; i++) p[i] = normal() * scale;
  return p;
}

/* The dtype of the workload being built: f32, or bf16 / f16 for a name ending in _bf16 /
 * _f16 (every input, param and scalar of that dtype; contractions accumulate in f32). */
static kiln_dtype wl_dtype = KILN_F32;

static uint16_t to_bf16(float f) {  /* round to nearest even; the workloads hold no NaN */
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static uint16_t to_f16(float f) {  /* round to nearest even, normal range and subnormals */
  uint32_t u;
  memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000u, mag = u & 0x7fffffffu;
  if (mag >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);  /* rounds past 65504: inf */
  if (mag < 0x38800000u) {                                     /* below 2^-14: subnormal */
    float a = f < 0 ? -f : f;
    return (uint16_t)(sign | (uint32_t)lrintf(a * 16777216.0f));  /* units of 2^-24, ties to even */
  }
  uint32_t r = mag + 0xfffu + ((mag >> 13) & 1u);
  return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
}

float wl_output_value(kiln_dtype t, const void *out, size_t i) {
  uint32_t u;
  float f;
  if (t == KILN_F32) return ((const float *)out)[i];
  if (t == KILN_BF16) {
    u = (uint32_t)((const uint16_t *)out)[i] << 16;
  } else if (t == KILN_F16) {  /* widened exactly: subnormals scaled, inf and NaN kept */
    uint16_t h = ((const uint16_t *)out)[i];
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) return (h & 0x8000u ? -1.0f : 1.0f) * ldexpf((float)m, -24);
    u = sign | (e == 31 ? 0x7f800000u | (m << 13) : ((e + 112u) << 23) | (m << 13));
  } else {
    return NAN;
  }
  memcpy(&f, &u, 4);
  return f;
}

/* n floats as values of wl_dtype, in a new array (floats themselves for f32). */
static void *in_dtype(float *p, int64_t n) {
  if (wl_dtype == KILN_F32) return p;
  uint16_t *h = malloc((size_t)(n ? n : 1) * sizeof *h);
  if (h)
    for (int64_t i = 0; i < n; i++) h[i] = wl_dtype == KILN_BF16 ? to_bf16(p[i]) : to_f16(p[i]);
  free(p);
  return h;
}

static kiln_status add_input(Workload *w, const char *name, int rank, const int64_t *shape, kiln_tensor *t) {
  int64_t n = 1;
  for (int i = 0; i < rank; i++) n *= shape[i];
  kiln_status st = kiln_graph_input(w->g, name, wl_dtype, rank, shape, t);
  if (st) return st;
  if (!(w->inputs[w->n_inputs] = in_dtype(random_floats(n, 1.0f), n))) return KILN_ERR_NO_MEMORY;
  w->input_bytes[w->n_inputs++] = (size_t)n * kiln_dtype_size(wl_dtype);
  return KILN_OK;
}

/* Input "y" of shape ys = [b, 10]: one-hot rows of random classes. */
static kiln_status add_onehot(Workload *w, const int64_t ys[2], kiln_tensor *y) {
  kiln_status st = kiln_graph_input(w->g, "y", KILN_F32, 2, ys, y);  /* labels stay f32 */
  if (st) return st;
  float *oh = calloc((size_t)(ys[0] * ys[1]), sizeof *oh);
  if (!oh) return KILN_ERR_NO_MEMORY;
  for (int64_t i = 0; i < ys[0]; i++) oh[i * ys[1] + (int64_t)(uniform01() * (double)ys[1]) % ys[1]] = 1.0f;
  w->inputs[w->n_inputs] = oh;
  w->input_bytes[w->n_inputs++] = (size_t)(ys[0] * ys[1]) * sizeof(float);
  return KILN_OK;
}

static kiln_status add_param(Workload *w, const char *name, int rank, const int64_t *shape, float scale, kiln_tensor *t) {
  int64_t n = 1;
  for (int i = 0; i < rank; i++) n *= shape[i];
  void *d = in_dtype(random_floats(n, scale), n);
  if (!d) return KILN_ERR_NO_MEMORY;
  kiln_status st = kiln_graph_param(w->g, name, wl_dtype, rank, shape, d, t);
  free(d);
  return st;
}

static kiln_status add_output(Workload *w, kiln_tensor t, const char *name) {
  int rank;
  int64_t shape[KILN_MAX_RANK], n = 1;
  kiln_status st = kiln_tensor_shape(w->g, t, &rank, shape);
  if (!st) st = kiln_tensor_dtype(w->g, t, &w->output_dtype[w->n_outputs]);
  if (st) return st;
  for (int i = 0; i < rank; i++) n *= shape[i];
  w->output_bytes[w->n_outputs] = (size_t)n * kiln_dtype_size(w->output_dtype[w->n_outputs]);
  w->n_outputs++;
  return kiln_graph_output(w->g, t, name);
}

#define TRY(call) do { kiln_status st_ = (call); if (st_) return st_; } while (0)

static kiln_status scalar(Workload *w, double v, kiln_tensor *t) { return kiln_graph_scalar(w->g, wl_dtype, v, t); }
static kiln_status bin(Workload *w, kiln_binary_op op, kiln_tensor a, kiln_tensor b, kiln_tensor *t) {
  return kiln_graph_binary(w->g, op, a, b, t);
}

/* a=x*w; b=a+1; c=tanh(b); d=c*c; e=1-d; f=e*x; g=exp(-f); h=max(g,0); i=h/(1+x*x); out=i-0.5 */
static kiln_status chain10(Workload *w, int64_t n) {
  kiln_tensor x, wt, one, zero, half, a, b, c, d, e, f, nf, g, h, xx, den, i, out;
  TRY(add_input(w, "x", 1, &n, &x));
  TRY(add_input(w, "w", 1, &n, &wt));
  TRY(scalar(w, 1, &one)); TRY(scalar(w, 0, &zero)); TRY(scalar(w, 0.5, &half));
  TRY(bin(w, KILN_MUL, x, wt, &a)); TRY(bin(w, KILN_ADD, a, one, &b));
  TRY(kiln_graph_unary(w->g, KILN_TANH, b, &c)); TRY(bin(w, KILN_MUL, c, c, &d));
  TRY(bin(w, KILN_SUB, one, d, &e)); TRY(bin(w, KILN_MUL, e, x, &f));
  TRY(kiln_graph_unary(w->g, KILN_NEG, f, &nf)); TRY(kiln_graph_unary(w->g, KILN_EXP, nf, &g));
  TRY(bin(w, KILN_MAX, g, zero, &h)); TRY(bin(w, KILN_MUL, x, x, &xx)); TRY(bin(w, KILN_ADD, one, xx, &den));
  TRY(bin(w, KILN_DIV, h, den, &i)); TRY(bin(w, KILN_SUB, i, half, &out));
  return add_output(w, out, "out");
}

static kiln_status rows(Workload *w, int kind, int64_t r, int64_t c) {
  int64_t shape[2] = { r, c };
  kiln_tensor x, y, gs, bs;
  TRY(add_input(w, "x", 2, shape, &x));
  if (kind == 0) TRY(kiln_graph_softmax(w->g, x, -1, &y));
  else if (kind == 1) TRY(kiln_graph_log_softmax(w->g, x, -1, &y));
  else {
    TRY(add_param(w, "g", 1, &c, 1.0f, &gs));
    TRY(add_param(w, "b", 1, &c, 1.0f, &bs));
    TRY(kiln_graph_layernorm(w->g, x, gs, bs, -1, 1e-5, &y));
  }
  return add_output(w, y, "y");
}

/* relu(x @ W + b), optionally without the relu */
static kiln_status dense(Workload *w, kiln_tensor x, int64_t k, int64_t n, bool relu, int layer, kiln_tensor *out) {
  char name[32];
  int64_t ws[2] = { k, n };
  kiln_tensor wt, b, mm, s;
  snprintf(name, sizeof name, "W%d", layer);
  TRY(add_param(w, name, 2, ws, (float)(1.0 / sqrt((double)k)), &wt));
  snprintf(name, sizeof name, "b%d", layer);
  TRY(add_param(w, name, 1, &n, 0.1f, &b));
  TRY(kiln_graph_matmul(w->g, x, wt, &mm));
  TRY(bin(w, KILN_ADD, mm, b, &s));
  if (!relu) { *out = s; return KILN_OK; }
  return kiln_graph_unary(w->g, KILN_RELU, s, out);
}

static kiln_status linear_relu(Workload *w, int64_t m, int64_t k, int64_t n) {
  int64_t xs[2] = { m, k };
  kiln_tensor x, y;
  TRY(add_input(w, "x", 2, xs, &x));
  TRY(dense(w, x, k, n, true, 1, &y));
  w->flops = 2.0 * (double)m * (double)k * (double)n;
  return add_output(w, y, "y");
}

/* Three projections of one input, q, k and v as separate MatMuls (as most ONNX exports of
 * attention write them): x @ Wi + bi, i = 1..3 */
static kiln_status projections(Workload *w, int64_t m, int64_t k, int64_t n) {
  int64_t xs[2] = { m, k };
  kiln_tensor x, y[3];
  static const char *const names[3] = { "q", "k", "v" };
  TRY(add_input(w, "x", 2, xs, &x));
  for (int i = 0; i < 3; i++) TRY(dense(w, x, k, n, false, i + 1, &y[i]));
  w->flops = 3 * 2.0 * (double)m * (double)k * (double)n;
  for (int i = 0; i < 3; i++) TRY(add_output(w, y[i], names[i]));
  return KILN_OK;
}

static kiln_status mlp_fwd(Workload *w, int64_t b) {
  int64_t xs[2] = { b, 784 };
  kiln_tensor x, h1, h2, y;
  TRY(add_input(w, "x", 2, xs, &x));
  TRY(dense(w, x, 784, 512, true, 1, &h1));
  TRY(dense(w, h1, 512, 512, true, 2, &h2));
  TRY(dense(w, h2, 512, 10, false, 3, &y));
  w->flops = 2.0 * (double)b * (784.0 * 512 + 512.0 * 512 + 512.0 * 10);
  return add_output(w, y, "y");
}

/* One SGD step of 784-128(relu)-10 with softmax cross-entropy against one-hot y. */
static kiln_status mlp_train(Workload *w, int64_t b) {
  int64_t xs[2] = { b, 784 }, ys[2] = { b, 10 };
  kiln_tensor x, y, h, logits, lsm, prod, sum, loss, negb, params[4], upd[4];
  TRY(add_input(w, "x", 2, xs, &x));
  TRY(add_onehot(w, ys, &y));
  TRY(dense(w, x, 784, 128, true, 1, &h));
  TRY(dense(w, h, 128, 10, false, 2, &logits));
  TRY(kiln_graph_log_softmax(w->g, logits, -1, &lsm));
  TRY(bin(w, KILN_MUL, lsm, y, &prod));
  TRY(kiln_graph_reduce(w->g, KILN_REDUCE_SUM, prod, 0, NULL, 0, &sum));
  TRY(scalar(w, -1.0 / (double)b, &negb));
  TRY(bin(w, KILN_MUL, sum, negb, &loss));
  /* params were created in order W1, b1, W2, b2: tensor ids from the graph */
  int found = 0;
  for (kiln_tensor t = 0; found < 4 && t < 64; t++) {
    int rank;
    int64_t sh[KILN_MAX_RANK];
    kiln_dtype dt;
    if (kiln_tensor_shape(w->g, t, &rank, sh) || kiln_tensor_dtype(w->g, t, &dt)) break;
    bool shaped = (rank == 2 && ((sh[0] == 784 && sh[1] == 128) || (sh[0] == 128 && sh[1] == 10))) ||
                  (rank == 1 && (sh[0] == 128 || sh[0] == 10));
    if (shaped && dt == KILN_F32) params[found++] = t;  /* not the bf16 copies autocast makes of them */
  }
  if (found != 4) return KILN_ERR_INVALID_ARG;
  TRY(kiln_graph_sgd(w->g, loss, 4, params, 0.01, 0.0, upd));
  w->flops = 3 * 2.0 * (double)b * (784.0 * 128 + 128.0 * 10);
  TRY(add_output(w, loss, "loss"));
  for (int i = 0; i < 4; i++) TRY(add_output(w, upd[i], "param"));
  return KILN_OK;
}


static kiln_status dense3(Workload *w, kiln_tensor x, int64_t k, int64_t n, const char *name, kiln_tensor *out) {
  int64_t ws[2] = { k, n };
  kiln_tensor wt, b, mm;
  TRY(add_param(w, name, 2, ws, (float)(1.0 / sqrt((double)k)), &wt));
  TRY(add_param(w, name, 1, &n, 0.1f, &b));
  TRY(kiln_graph_matmul(w->g, x, wt, &mm));
  return bin(w, KILN_ADD, mm, b, out);
}

/* [B,S,H*D] -> [B,H,S,D] */
static kiln_status heads(Workload *w, kiln_tensor x, int64_t b, int64_t s, kiln_tensor *out) {
  int64_t sh[4] = { b, s, 12, 64 };
  int perm[4] = { 0, 2, 1, 3 };
  kiln_tensor r;
  TRY(kiln_graph_reshape(w->g, x, 4, sh, &r));
  return kiln_graph_transpose(w->g, r, perm, out);
}

/* Post-norm transformer encoder layer of WORKLOADS.md (12 heads of 64, FFN 3072). */
static kiln_status bert_layer(Workload *w, int64_t b, int64_t s) {
  int64_t xs[3] = { b, s, 768 }, c = 768;
  kiln_tensor x, qkv, q, k, v, qh, kh, vh, kt, sc, scale, sm, o, ot, oc, proj, res, g1, b1, h, f1, f, f2, res2, g2, b2, y;
  TRY(add_input(w, "x", 3, xs, &x));
  TRY(dense3(w, x, 768, 2304, "qkv", &qkv));
  int ax = 2;
  for (int i = 0; i < 3; i++) {
    int64_t st = 768 * i, en = 768 * (i + 1);
    TRY(kiln_graph_slice(w->g, qkv, 1, &st, &en, &ax, NULL, i == 0 ? &q : i == 1 ? &k : &v));
  }
  TRY(heads(w, q, b, s, &qh)); TRY(heads(w, k, b, s, &kh)); TRY(heads(w, v, b, s, &vh));
  int pk[4] = { 0, 1, 3, 2 }, po[4] = { 0, 2, 1, 3 };
  TRY(kiln_graph_transpose(w->g, kh, pk, &kt));
  TRY(kiln_graph_matmul(w->g, qh, kt, &sc));
  TRY(scalar(w, 0.125, &scale));
  TRY(bin(w, KILN_MUL, sc, scale, &sm));
  TRY(kiln_graph_softmax(w->g, sm, -1, &sm));
  TRY(kiln_graph_matmul(w->g, sm, vh, &o));
  TRY(kiln_graph_transpose(w->g, o, po, &ot));
  TRY(kiln_graph_reshape(w->g, ot, 3, xs, &oc));
  TRY(dense3(w, oc, 768, 768, "o", &proj));
  TRY(bin(w, KILN_ADD, x, proj, &res));
  TRY(add_param(w, "ln1.g", 1, &c, 1.0f, &g1)); TRY(add_param(w, "ln1.b", 1, &c, 0.1f, &b1));
  TRY(kiln_graph_layernorm(w->g, res, g1, b1, -1, 1e-5, &h));
  TRY(dense3(w, h, 768, 3072, "ffn1", &f1));
  TRY(kiln_graph_unary(w->g, KILN_GELU_TANH, f1, &f));
  TRY(dense3(w, f, 3072, 768, "ffn2", &f2));
  TRY(bin(w, KILN_ADD, h, f2, &res2));
  TRY(add_param(w, "ln2.g", 1, &c, 1.0f, &g2)); TRY(add_param(w, "ln2.b", 1, &c, 0.1f, &b2));
  TRY(kiln_graph_layernorm(w->g, res2, g2, b2, -1, 1e-5, &y));
  w->flops = 2.0 * (double)(b * s) * 768.0 * (2304 + 768 + 2 * 3072) + 4.0 * (double)(b * 12) * (double)(s * s) * 64;
  return add_output(w, y, "y");
}

/* One SGD step of the LeNet-like net of WORKLOADS.md (cnn_train_b32). */
static kiln_status cnn_train(Workload *w, int64_t b) {
  int64_t xs[4] = { b, 1, 28, 28 }, ys[2] = { b, 10 };
  int64_t w1s[4] = { 16, 1, 3, 3 }, w2s[4] = { 32, 16, 3, 3 }, c1 = 16, c2 = 32, flat[2] = { b, 1568 };
  kiln_tensor x, y, w1, bb1, w2, bb2, h1, r1, p1, h2, r2, p2, fl, d1, r3, logits, lsm, prod, sum, negb, loss;
  TRY(add_input(w, "x", 4, xs, &x));
  TRY(add_onehot(w, ys, &y));
  TRY(add_param(w, "c1.w", 4, w1s, 1.0f / 3.0f, &w1)); TRY(add_param(w, "c1.b", 1, &c1, 0.1f, &bb1));
  TRY(add_param(w, "c2.w", 4, w2s, 1.0f / 12.0f, &w2)); TRY(add_param(w, "c2.b", 1, &c2, 0.1f, &bb2));
  kiln_conv_params cp = { .spatial = 2, .pads = { 1, 1, 1, 1 } };
  kiln_pool_params pp = { .spatial = 2, .kernel = { 2, 2 }, .strides = { 2, 2 } };
  TRY(kiln_graph_conv(w->g, x, w1, bb1, &cp, &h1));
  TRY(kiln_graph_unary(w->g, KILN_RELU, h1, &r1));
  TRY(kiln_graph_pool(w->g, KILN_POOL_MAX, r1, &pp, &p1));
  TRY(kiln_graph_conv(w->g, p1, w2, bb2, &cp, &h2));
  TRY(kiln_graph_unary(w->g, KILN_RELU, h2, &r2));
  TRY(kiln_graph_pool(w->g, KILN_POOL_MAX, r2, &pp, &p2));
  TRY(kiln_graph_reshape(w->g, p2, 2, flat, &fl));
  TRY(dense(w, fl, 1568, 128, true, 3, &r3));
  (void)d1;
  TRY(dense(w, r3, 128, 10, false, 4, &logits));
  TRY(kiln_graph_log_softmax(w->g, logits, -1, &lsm));
  TRY(bin(w, KILN_MUL, lsm, y, &prod));
  TRY(kiln_graph_reduce(w->g, KILN_REDUCE_SUM, prod, 0, NULL, 0, &sum));
  TRY(scalar(w, -1.0 / (double)b, &negb));
  TRY(bin(w, KILN_MUL, sum, negb, &loss));
  kiln_tensor params[8], upd[8];
  int found = 0;
  for (kiln_tensor t = 0; found < 8 && t < 64; t++) {
    int rank;
    int64_t sh[KILN_MAX_RANK];
    if (kiln_tensor_shape(w->g, t, &rank, sh)) break;
    bool is_param = (rank == 4 && (sh[0] == 16 || sh[0] == 32) && sh[2] == 3) ||
                    (rank == 1 && (sh[0] == 16 || sh[0] == 32 || sh[0] == 128 || sh[0] == 10)) ||
                    (rank == 2 && ((sh[0] == 1568 && sh[1] == 128) || (sh[0] == 128 && sh[1] == 10)));
    if (is_param && t != x && t != y) params[found++] = t;
  }
  if (found != 8) return KILN_ERR_INVALID_ARG;
  TRY(kiln_graph_sgd(w->g, loss, 8, params, 0.01, 0.0, upd));
  w->flops = 3 * 2.0 * (double)b * (28.0 * 28 * 16 * 9 + 14.0 * 14 * 32 * 16 * 9 + 1568.0 * 128 + 1280.0);
  TRY(add_output(w, loss, "loss"));
  for (int i = 0; i < 8; i++) TRY(add_output(w, upd[i], "param"));
  return KILN_OK;
}

static int64_t count(const char *s, const char **end) {
  char *e;
  long long v = strtoll(s, &e, 10);
  if (*e == 'K') v *= 1024, e++;
  else if (*e == 'M') v *= 1024 * 1024, e++;
  *end = e;
  return v;
}

kiln_status wl_build(const char *name, Workload *w) {
  memset(w, 0, sizeof *w);
  snprintf(w->name, sizeof w->name, "%s", name);
  wl_seed = 0x9e3779b97f4a7c15ull;
  char base[64];
  snprintf(base, sizeof base, "%s", name);
  size_t len = strlen(base);
  wl_dtype = KILN_F32;
  bool amp = len > 8 && !strcmp(base + len - 8, "_bf16amp");  /* f32 graph, bf16 contractions (autocast) */
  if (amp) base[len - 8] = 0;
  else if (len > 5 && !strcmp(base + len - 5, "_bf16")) wl_dtype = KILN_BF16, base[len - 5] = 0;
  else if (len > 4 && !strcmp(base + len - 4, "_f16")) wl_dtype = KILN_F16, base[len - 4] = 0;
  name = base;
  kiln_status st = kiln_graph_create(&w->g);
  if (!st && amp) st = kiln_graph_set_autocast(w->g, KILN_BF16);
  if (st) return st;
  const char *e;
  int64_t a, b, c;
  if (!strncmp(name, "chain10_", 8)) { a = count(name + 8, &e); st = *e ? KILN_ERR_INVALID_ARG : chain10(w, a); }
  else if (sscanf(name, "softmax_%lldx%lld", (long long *)&a, (long long *)&b) == 2) st = rows(w, 0, a, b);
  else if (sscanf(name, "logsoftmax_%lldx%lld", (long long *)&a, (long long *)&b) == 2) st = rows(w, 1, a, b);
  else if (sscanf(name, "layernorm_%lldx%lld", (long long *)&a, (long long *)&b) == 2) st = rows(w, 2, a, b);
  else if (sscanf(name, "linear_relu_%lldx%lldx%lld", (long long *)&a, (long long *)&b, (long long *)&c) == 3)
    st = linear_relu(w, a, b, c);
  else if (sscanf(name, "siblings_%lldx%lldx%lld", (long long *)&a, (long long *)&b, (long long *)&c) == 3)
    st = projections(w, a, b, c);
  else if (sscanf(name, "mlp_fwd_b%lld", (long long *)&a) == 1) st = mlp_fwd(w, a);
  else if (sscanf(name, "mlp_train_b%lld", (long long *)&a) == 1) st = mlp_train(w, a);
  else if (sscanf(name, "cnn_train_b%lld", (long long *)&a) == 1) st = cnn_train(w, a);
  else if (sscanf(name, "bert_layer_b%llds%lld", (long long *)&a, (long long *)&b) == 2) st = bert_layer(w, a, b);
  else st = KILN_ERR_INVALID_ARG;
  if (st) wl_free(w);
  return st;
}

void wl_free(Workload *w) {
  kiln_graph_free(w->g);
  for (int i = 0; i < w->n_inputs; i++) free(w->inputs[i]);
  memset(w, 0, sizeof *w);
}
