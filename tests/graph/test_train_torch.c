/*
 * Training steps against PyTorch: two tiny models (an MLP and a conv/relu/max-pool/dense
 * net) with weights from the 64-bit LCG of tests/graph/make_torch_ref.py, two optimizer
 * steps (SGD with momentum, Adam) on one batch, compared with the numbers PyTorch 2.11
 * printed in float64 (tests/graph/torch_ref.txt): the loss of each step and every
 * parameter after both steps. f64 must agree to 1e-9; f32 losses to 1e-5 relative
 * (parameters: see main). On ref, and on cpu too when that backend is present.
 */
#include "test.h"

#include <stdbool.h>
#include <stdint.h>

/* ---- the generator of make_torch_ref.py ---- */

static uint64_t lcg;

static double lcg_uniform(void) {
  lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(lcg >> 11) / 9007199254740992.0;
}

static void lcg_fill(double *v, int64_t n, double scale) {
  for (int64_t i = 0; i < n; i++) v[i] = (2.0 * lcg_uniform() - 1.0) * scale;
}

/* ---- the reference file ---- */

#define MAX_VALS 128

/* Reads "<tag> <name> <count> v..." from torch_ref.txt; returns the count or -1. */
static int ref_values(const char *tag, const char *name, double *v) {
  FILE *f = fopen("tests/graph/torch_ref.txt", "r");
  if (!f) return -1;
  char line[8192], t[64], nm[64];
  int count = -1;
  while (fgets(line, sizeof line, f)) {
    int n, off;
    if (line[0] == '#' || sscanf(line, "%63s %63s %d%n", t, nm, &n, &off) != 3) continue;
    if (strcmp(t, tag) || strcmp(nm, name) || n > MAX_VALS) continue;
    char *p = line + off;
    for (count = 0; count < n; count++) {
      char *end;
      v[count] = strtod(p, &end);
      if (end == p) break;
      p = end;
    }
    break;
  }
  fclose(f);
  return count;
}

/* ---- the models ---- */

typedef struct Param { const char *name; int rank; int64_t shape[4]; double scale; } Param;

typedef struct Model {
  const char *name;
  int n_params;
  Param params[6];
  int x_rank;
  int64_t x_shape[4];
  int batch, classes;
} Model;

static const Model MLP = {"mlp", 4,
  {{"w1", 2, {8, 6}, 0.5}, {"b1", 1, {6}, 0.1}, {"w2", 2, {6, 3}, 0.5}, {"b2", 1, {3}, 0.1}},
  2, {4, 8}, 4, 3};
static const Model CNN = {"cnn", 6,
  {{"c1", 4, {2, 1, 3, 3}, 0.5}, {"cb1", 1, {2}, 0.1}, {"w3", 2, {18, 4}, 0.5}, {"b3", 1, {4}, 0.1},
   {"w4", 2, {4, 3}, 0.5}, {"b4", 1, {3}, 0.1}},
  4, {2, 1, 6, 6}, 2, 3};

static int64_t numel(int rank, const int64_t *s) {
  int64_t n = 1;
  for (int i = 0; i < rank; i++) n *= s[i];
  return n;
}

static kiln_status dense(kiln_graph *g, kiln_tensor x, kiln_tensor w, kiln_tensor b, bool relu, kiln_tensor *y) {
  kiln_tensor m, a;
  kiln_status s = kiln_graph_matmul(g, x, w, &m);
  if (!s) s = kiln_graph_binary(g, KILN_ADD, m, b, &a);
  if (s || !relu) return s ? s : (*y = a, KILN_OK);
  return kiln_graph_unary(g, KILN_RELU, a, y);
}

/* logits of the model; p are its params in the order of Model.params */
static kiln_status forward(kiln_graph *g, const Model *m, kiln_tensor x, const kiln_tensor *p, kiln_tensor *out) {
  kiln_tensor h;
  kiln_status s;
  if (m == &MLP) {
    s = dense(g, x, p[0], p[1], true, &h);
    return s ? s : dense(g, h, p[2], p[3], false, out);
  }
  kiln_conv_params cp = {.spatial = 2, .pads = {1, 1, 1, 1}};
  kiln_pool_params pp = {.spatial = 2, .kernel = {2, 2}, .strides = {2, 2}};
  kiln_tensor c, r, mp, f, h2;
  s = kiln_graph_conv(g, x, p[0], p[1], &cp, &c);
  if (!s) s = kiln_graph_unary(g, KILN_RELU, c, &r);
  if (!s) s = kiln_graph_pool(g, KILN_POOL_MAX, r, &pp, &mp);
  if (!s) s = kiln_graph_reshape(g, mp, 2, (const int64_t[]){2, 18}, &f);
  if (!s) s = dense(g, f, p[2], p[3], true, &h2);
  return s ? s : dense(g, h2, p[4], p[5], false, out);
}

/* mean softmax cross-entropy against one-hot labels y */
static kiln_status cross_entropy(kiln_graph *g, kiln_tensor logits, kiln_tensor y, int batch, kiln_dtype t,
                                 kiln_tensor *loss) {
  kiln_tensor ls, py, s, k;
  kiln_status st = kiln_graph_log_softmax(g, logits, -1, &ls);
  if (!st) st = kiln_graph_binary(g, KILN_MUL, ls, y, &py);
  if (!st) st = kiln_graph_reduce(g, KILN_REDUCE_SUM, py, 0, NULL, 0, &s);
  if (!st) st = kiln_graph_scalar(g, t, -1.0 / batch, &k);
  return st ? st : kiln_graph_binary(g, KILN_MUL, s, k, loss);
}

/* Converts doubles to dtype t in a fresh buffer. */
static void *to_dtype(const double *v, int64_t n, kiln_dtype t) {
  void *b = malloc((size_t)n * 8);
  for (int64_t i = 0; i < n; i++) {
    if (t == KILN_F32) ((float *)b)[i] = (float)v[i];
    else ((double *)b)[i] = v[i];
  }
  return b;
}

static double elem(const void *b, int64_t i, kiln_dtype t) {
  return t == KILN_F32 ? ((const float *)b)[i] : ((const double *)b)[i];
}

/* Two steps of model m with optimizer optim ("sgd"/"adam") on backend be, dtype t; compares. */
static void run_case(const Model *m, const char *optim, const char *be, kiln_dtype t, double tol, double ptol) {
  char tag[32];
  snprintf(tag, sizeof tag, "%s_%s", m->name, optim);
  lcg = 12345;
  double xd[MAX_VALS], pd[6][MAX_VALS], yd[16 * 3] = {0};
  int64_t xn = numel(m->x_rank, m->x_shape);
  lcg_fill(xd, xn, 1.0);
  for (int i = 0; i < m->n_params; i++) lcg_fill(pd[i], numel(m->params[i].rank, m->params[i].shape), m->params[i].scale);
  for (int b = 0; b < m->batch; b++) yd[b * m->classes + (int)(lcg_uniform() * m->classes)] = 1;

  kiln_graph *g;
  OK(kiln_graph_create(&g));
  kiln_tensor x, y, p[6], logits, loss;
  OK(kiln_graph_input(g, "x", t, m->x_rank, m->x_shape, &x));
  OK(kiln_graph_input(g, "y", t, 2, (const int64_t[]){m->batch, m->classes}, &y));
  for (int i = 0; i < m->n_params; i++) {
    const Param *pr = &m->params[i];
    void *d = to_dtype(pd[i], numel(pr->rank, pr->shape), t);
    OK(kiln_graph_param(g, pr->name, t, pr->rank, pr->shape, d, &p[i]));
    free(d);
  }
  OK(forward(g, m, x, p, &logits));
  OK(cross_entropy(g, logits, y, m->batch, t, &loss));
  OK(kiln_graph_output(g, loss, "loss"));
  if (!strcmp(optim, "sgd")) OK(kiln_graph_sgd(g, loss, m->n_params, p, 0.1, 0.9, NULL));
  else OK(kiln_graph_adam(g, loss, m->n_params, p, 0.01, 0.9, 0.999, 1e-8, NULL));
  kiln_options o = kiln_options_default();
  o.backend = be;
  kiln_program *prog = NULL;
  OK(kiln_program_compile(g, &o, &prog));
  void *xb = to_dtype(xd, xn, t), *yb = to_dtype(yd, m->batch * m->classes, t);
  double ref[MAX_VALS];
  for (int step = 0; prog && step < 2; step++) {
    double l = 0;
    float lf = 0;
    OK(kiln_program_run(prog, (const void *[]){xb, yb}, (void *[]){t == KILN_F32 ? (void *)&lf : (void *)&l}));
    if (t == KILN_F32) l = lf;
    char nm[16];
    snprintf(nm, sizeof nm, "loss%d", step);
    CHECK(ref_values(tag, nm, ref) == 1);
    CHECK_MSG(fabs(l - ref[0]) <= tol * fabs(ref[0]), "%s on %s (%s): %s = %.12g, torch %.12g", tag, be,
              kiln_dtype_name(t), nm, l, ref[0]);
  }
  for (int i = 0; prog && i < m->n_params; i++) {
    const Param *pr = &m->params[i];
    int64_t n = numel(pr->rank, pr->shape);
    void *buf = malloc((size_t)n * 8);
    OK(kiln_program_read_param(prog, p[i], buf));
    CHECK(ref_values(tag, pr->name, ref) == n);
    double worst = 0;
    for (int64_t j = 0; j < n; j++) {
      double d = fabs(elem(buf, j, t) - ref[j]) / (fabs(ref[j]) + 1e-2);
      if (d > worst) worst = d;
    }
    CHECK_MSG(worst <= ptol, "%s on %s (%s): param %s differs from torch by %.3g (relative)", tag, be,
              kiln_dtype_name(t), pr->name, worst);
    free(buf);
  }
  free(xb), free(yb);
  kiln_program_free(prog);
  kiln_graph_free(g);
}

int main(void) {
  double probe[1];
  if (ref_values("mlp_sgd", "loss0", probe) != 1) {
    fprintf(stderr, "tests/graph/torch_ref.txt missing or unreadable (run from the repo root)\n");
    return 1;
  }
  const char *backends[] = {"ref", "cpu"};
  for (int b = 0; b < 2; b++) {
    if (b > 0 && !test_backend_present(backends[b])) {
      fprintf(stderr, "skip: backend %s not available (%s)\n", backends[b], kiln_last_error());
      continue;
    }
    for (int mi = 0; mi < 2; mi++)
      for (int oi = 0; oi < 2; oi++) {
        const Model *m = mi ? &CNN : &MLP;
        const char *opt = oi ? "adam" : "sgd";
        run_case(m, opt, backends[b], KILN_F64, 1e-9, 1e-9);
        /* f32: the loss to 1e-5; parameters to 1e-6 after SGD, 5e-5 after Adam, whose
         * m / sqrt(v) magnifies the rounding of gradients that nearly cancel across steps */
        run_case(m, opt, backends[b], KILN_F32, 1e-5, oi ? 5e-5 : 1e-6);
      }
    fprintf(stderr, "compared with torch on %s: mlp and cnn, sgd and adam, f64 and f32\n", backends[b]);
  }
  TEST_MAIN_END();
}
