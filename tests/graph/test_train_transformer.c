/*
 * test_train_transformer.c — a training step of a small pre-norm transformer block through
 * the compiler, against ref (the f64-accumulating oracle). Per token: layernorm, q, k and v
 * as three MatMuls of the normed input (siblings), two heads of causal attention (scores,
 * mask, softmax rows, the product with v: an attention chain where the backend plans one),
 * the output projection and residual, layernorm, a GELU feed-forward and residual, then a
 * 10-way classifier whose logits and softmax cross-entropy rows are a pair on cuda. One SGD
 * step (kiln_graph_sgd) gives the loss and every updated parameter; they must match ref on
 * the backend under test ($KILN_TEST_BACKEND, default cpu), there with every chain the
 * planner has asked for too (attention chains, pairs), with no host fallbacks; and five
 * steps lower the loss.
 */
#include "test.h"

#include <math.h>
#include <stdlib.h>

enum { B = 2, S = 16, D = 32, H = 2, HD = D / H, F = 64, C = 10, N_PARAMS = 13 };

static unsigned long long seed = 7;

typedef struct Block {
  kiln_graph *g;
  kiln_tensor params[N_PARAMS], loss, updated[N_PARAMS];
  int64_t numel[N_PARAMS];
  float *init[N_PARAMS];
} Block;

static kiln_tensor param(Block *b, int i, int rank, const int64_t *shape, double scale, double offset) {
  int64_t n = 1;
  for (int d = 0; d < rank; d++) n *= shape[d];
  b->numel[i] = n;
  b->init[i] = malloc((size_t)n * sizeof(float));
  for (int64_t j = 0; j < n; j++) b->init[i][j] = (float)(offset + scale * test_rand(&seed));
  kiln_tensor t = -1;
  OK(kiln_graph_param(b->g, NULL, KILN_F32, rank, shape, b->init[i], &t));
  b->params[i] = t;
  return t;
}

static kiln_tensor bin(Block *b, kiln_binary_op op, kiln_tensor x, kiln_tensor y) {
  kiln_tensor t = -1;
  OK(kiln_graph_binary(b->g, op, x, y, &t));
  return t;
}

static kiln_tensor scalar(Block *b, double v) {
  kiln_tensor t = -1;
  OK(kiln_graph_scalar(b->g, KILN_F32, v, &t));
  return t;
}

static kiln_tensor matmul(Block *b, kiln_tensor x, kiln_tensor w) {
  kiln_tensor t = -1;
  OK(kiln_graph_matmul(b->g, x, w, &t));
  return t;
}

static kiln_tensor reshape(Block *b, kiln_tensor x, int rank, const int64_t *shape) {
  kiln_tensor t = -1;
  OK(kiln_graph_reshape(b->g, x, rank, shape, &t));
  return t;
}

static kiln_tensor transpose(Block *b, kiln_tensor x, const int *perm) {
  kiln_tensor t = -1;
  OK(kiln_graph_transpose(b->g, x, perm, &t));
  return t;
}

/* [B*S, D] -> [B, H, S, HD] */
static kiln_tensor heads(Block *b, kiln_tensor x) {
  static const int perm[4] = { 0, 2, 1, 3 };
  return transpose(b, reshape(b, x, 4, (const int64_t[]){ B, S, H, HD }), perm);
}

static void build(Block *b) {
  memset(b, 0, sizeof *b);
  OK(kiln_graph_create(&b->g));
  kiln_tensor x, y, mask, t;
  OK(kiln_graph_input(b->g, "x", KILN_F32, 2, (const int64_t[]){ B * S, D }, &x));
  OK(kiln_graph_input(b->g, "y", KILN_F32, 2, (const int64_t[]){ B * S, C }, &y));
  /* the causal mask: 0 on and below the diagonal, -1e9 above */
  float *m = malloc(sizeof(float) * S * S);
  for (int i = 0; i < S; i++)
    for (int j = 0; j < S; j++) m[i * S + j] = j > i ? -1e9f : 0.0f;
  OK(kiln_graph_const(b->g, KILN_F32, 2, (const int64_t[]){ S, S }, m, &mask));
  free(m);
  int64_t dd[2] = { D, D }, df[2] = { D, F }, fd[2] = { F, D }, dc[2] = { D, C }, d1 = D;
  double s = 1.0 / sqrt((double)D);
  kiln_tensor g1 = param(b, 0, 1, &d1, 0.1, 1.0), b1 = param(b, 1, 1, &d1, 0.1, 0.0);
  kiln_tensor wq = param(b, 2, 2, dd, s, 0), wk = param(b, 3, 2, dd, s, 0), wv = param(b, 4, 2, dd, s, 0);
  kiln_tensor wo = param(b, 5, 2, dd, s, 0);
  kiln_tensor g2 = param(b, 6, 1, &d1, 0.1, 1.0), b2 = param(b, 7, 1, &d1, 0.1, 0.0);
  kiln_tensor w1 = param(b, 8, 2, df, s, 0), c1 = param(b, 9, 1, (const int64_t[]){ F }, 0.1, 0);
  kiln_tensor w2 = param(b, 10, 2, fd, 1.0 / sqrt((double)F), 0), wc = param(b, 11, 2, dc, s, 0);
  kiln_tensor cc = param(b, 12, 1, (const int64_t[]){ C }, 0.1, 0);
  /* attention */
  kiln_tensor h, q, k, v, kt, sc, att, o;
  OK(kiln_graph_layernorm(b->g, x, g1, b1, 1, 1e-5, &h));
  q = heads(b, matmul(b, h, wq)), k = heads(b, matmul(b, h, wk)), v = heads(b, matmul(b, h, wv));
  static const int swap[4] = { 0, 1, 3, 2 }, back[4] = { 0, 2, 1, 3 };
  kt = transpose(b, k, swap);
  sc = bin(b, KILN_ADD, bin(b, KILN_MUL, matmul(b, q, kt), scalar(b, 1.0 / sqrt((double)HD))), mask);
  OK(kiln_graph_softmax(b->g, sc, -1, &att));
  o = reshape(b, transpose(b, matmul(b, att, v), back), 2, (const int64_t[]){ B * S, D });
  kiln_tensor r1 = bin(b, KILN_ADD, x, matmul(b, o, wo));
  /* feed-forward */
  kiln_tensor h2, f;
  OK(kiln_graph_layernorm(b->g, r1, g2, b2, 1, 1e-5, &h2));
  OK(kiln_graph_unary(b->g, KILN_GELU_TANH, bin(b, KILN_ADD, matmul(b, h2, w1), c1), &f));
  kiln_tensor r2 = bin(b, KILN_ADD, r1, matmul(b, f, w2));
  /* per-token classifier, softmax cross-entropy, mean over tokens */
  kiln_tensor logits = bin(b, KILN_ADD, matmul(b, r2, wc), cc), lp, sum;
  OK(kiln_graph_log_softmax(b->g, logits, -1, &lp));
  OK(kiln_graph_reduce(b->g, KILN_REDUCE_SUM, bin(b, KILN_MUL, lp, y), 0, NULL, 0, &sum));
  OK(kiln_graph_unary(b->g, KILN_NEG, bin(b, KILN_DIV, sum, scalar(b, (double)(B * S))), &t));
  b->loss = t;
  OK(kiln_graph_output(b->g, b->loss, "loss"));
  OK(kiln_graph_sgd(b->g, b->loss, N_PARAMS, b->params, 0.05, 0, b->updated));
  for (int i = 0; i < N_PARAMS; i++) OK(kiln_graph_output(b->g, b->updated[i], NULL));
}

static void block_free(Block *b) {
  kiln_graph_free(b->g);
  for (int i = 0; i < N_PARAMS; i++) free(b->init[i]);
}

static const char *backend(void) {
  const char *be = getenv("KILN_TEST_BACKEND");
  return be && *be && strcmp(be, "ref") ? be : "cpu";
}

/* One step on backend be (joins: every chain and pair asked for); loss and updated params
 * into out[0..N_PARAMS]. */
static kiln_program *step(Block *b, const char *be, int joins, const float *x, const float *y, float **out,
                          kiln_census *c) {
  kiln_options o = kiln_options_default();
  o.backend = be;
  o.strict = strcmp(be, "ref") != 0;
  if (joins) o.attention = 1, o.gemm_rows = 2;  /* wide pairs too */
  kiln_program *p = NULL;
  OK(kiln_program_compile(b->g, &o, &p));
  if (!p) return NULL;
  OK(kiln_program_run(p, (const void *[]){ x, y }, (void *const *)out));
  OK(kiln_program_census(p, c));
  return p;
}

int main(void) {
  char dir[] = "/tmp/kiln-test-transformer-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  setenv("KILN_CACHE_DIR", dir, 1);
  Block b;
  build(&b);
  float *x = malloc(sizeof(float) * B * S * D), *y = calloc((size_t)B * S * C, sizeof(float));
  for (int i = 0; i < B * S * D; i++) x[i] = (float)test_rand(&seed);
  for (int i = 0; i < B * S; i++) y[i * C + (int)((test_rand(&seed) + 2) * 4) % C] = 1;
  float *want[1 + N_PARAMS], *got[1 + N_PARAMS];
  for (int i = 0; i <= N_PARAMS; i++) {
    size_t n = i ? (size_t)b.numel[i - 1] : 1;
    want[i] = malloc(n * sizeof(float)), got[i] = malloc(n * sizeof(float));
  }
  kiln_census c;
  kiln_program_free(step(&b, "ref", 0, x, y, want, &c));
  const char *be = backend();
  for (int joins = 0; joins < 2; joins++) {
    kiln_program *p = step(&b, be, joins, x, y, got, &c);
    if (!p) continue;
    CHECK_MSG(c.host_fallbacks == 0, "%s (joins %d): %lld host fallbacks (%s)", be, joins, (long long)c.host_fallbacks,
              c.fallback_ops);
    CHECK_MSG(fabsf(got[0][0] - want[0][0]) <= 1e-5f * (1 + fabsf(want[0][0])), "%s (joins %d): loss %.8g, ref %.8g", be,
              joins, got[0][0], want[0][0]);
    CHECK(want[0][0] > 1.5f && want[0][0] < 4.0f);  /* about ln 10 for a fresh block */
    for (int i = 1; i <= N_PARAMS; i++) {
      double worst = 0, moved = 0;
      for (int64_t j = 0; j < b.numel[i - 1]; j++) {
        double e = fabs((double)got[i][j] - want[i][j]) / (fabs((double)want[i][j]) + 1e-2);
        if (!(e <= worst)) worst = e;
        moved = fmax(moved, fabs((double)want[i][j] - b.init[i - 1][j]));
      }
      CHECK_MSG(worst < 1e-4, "%s (joins %d): parameter %d differs from ref by %g", be, joins, i - 1, worst);
      CHECK_MSG(moved > 0, "parameter %d did not move", i - 1);  /* every gradient reaches its parameter */
    }
    fprintf(stderr, "transformer step on %s (joins %d): %lld kernels, loss %.6f (ref %.6f)\n", be, joins,
            (long long)c.kernels_launched, got[0][0], want[0][0]);
    /* five steps, each from the last one's parameters, lower the loss */
    float first = got[0][0];
    for (int s = 0; s < 5; s++) {
      for (int i = 0; i < N_PARAMS; i++) OK(kiln_program_write_param(p, b.params[i], got[1 + i]));
      OK(kiln_program_run(p, (const void *[]){ x, y }, (void *const *)got));
    }
    CHECK_MSG(got[0][0] < first, "%s: loss %g after five more steps, %g at first", be, got[0][0], first);
    kiln_program_free(p);
  }
  for (int i = 0; i <= N_PARAMS; i++) free(want[i]), free(got[i]);
  free(x), free(y);
  block_free(&b);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd)) {}
  TEST_MAIN_END();
}
