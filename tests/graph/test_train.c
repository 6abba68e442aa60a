/*
 * Training steps through the compiler: mlp_train_b32 and cnn_train_b32 of
 * ../shared/bench/WORKLOADS.md (one SGD step, lr 0.01, outputs loss and the updated
 * parameters) built with kiln_graph_sgd. On cpu: no host fallbacks and a pinned kernel
 * count; values agree with ref. Also Adam's state, repeated steps lowering the loss, the
 * optimizer builders' argument checks, and the mixed-precision (bf16) step against ref and
 * against the f32 step (on cuda too where KILN_TEST_BACKEND=cuda).
 */
#include "test.h"
#include "graph/graph.h"

#include "../../tools/train_models.c"

/* Kernel counts of one training step on cpu with the planner as of this commit (fused).
 * A change here means the planner changed: re-pin deliberately. */
#define MLP_TRAIN_B32_KERNELS 9  /* the labels' row sum joins the softmax rows' kernel (it reads no kernel) */
#define CNN_TRAIN_B32_KERNELS 27  /* the biases' updates in their sums' kernels */

static unsigned long long seed = 42;

static void random_batch(float *x, int64_t nx, float *y, int batch) {
  for (int64_t i = 0; i < nx; i++) x[i] = (float)test_rand(&seed);
  memset(y, 0, sizeof(float) * (size_t)batch * 10);
  for (int b = 0; b < batch; b++) y[b * 10 + (int)((test_rand(&seed) + 1) * 5) % 10] = 1;
}

/* A workload step: SGD lr 0.01 (no momentum); outputs loss then each updated param. */
static kiln_status build_workload(ModelKind m, TrainNet *net, kiln_tensor *updated) {
  kiln_status s = train_net_build(m, 32, NULL, 7, 1, net);
  if (!s) s = kiln_graph_output(net->g, net->loss, "loss");
  if (!s) s = kiln_graph_sgd(net->g, net->loss, net->n_params, net->params, 0.01, 0, updated);
  for (int i = 0; !s && i < net->n_params; i++) s = kiln_graph_output(net->g, updated[i], NULL);
  return s;
}

/* Runs one step of workload m on backend be; fills loss and the updated params (flat). */
static kiln_program *run_workload(ModelKind m, const char *be, const float *x, const float *y, float *loss,
                                  float *params, int64_t *n_params_total) {
  TrainNet net;
  kiln_tensor upd[TRAIN_MAX_PARAMS];
  kiln_program *p = NULL;
  OK(build_workload(m, &net, upd));
  kiln_options o = kiln_options_default();
  o.backend = be;
  OK(kiln_program_compile(net.g, &o, &p));
  void *outs[1 + TRAIN_MAX_PARAMS] = {loss};
  int64_t off = 0;
  for (int i = 0; i < net.n_params; i++) outs[1 + i] = params + off, off += net.param_numel[i];
  *n_params_total = off;
  if (p) OK(kiln_program_run(p, (const void *[]){x, y}, outs));
  train_net_free(&net);
  return p;
}

/* cpu against ref for one workload step (with_ref), census pinned. The CNN's values are
 * checked against PyTorch in test_train_torch; here ref would only cost time. */
static void test_workload(ModelKind m, const char *name, int64_t kernels, bool with_ref) {
  int64_t nx = 32 * 784, np = 0;
  float *x = malloc(sizeof(float) * (size_t)nx), y[320];
  float *pr = malloc(sizeof(float) * 300000), *pc = malloc(sizeof(float) * 300000);
  float lr, lc;
  random_batch(x, nx, y, 32);
  kiln_program *ref = with_ref ? run_workload(m, "ref", x, y, &lr, pr, &np) : NULL;
  kiln_program *cpu = run_workload(m, "cpu", x, y, &lc, pc, &np);
  CHECK(np < 300000);
  CHECK(lc > 1.5f && lc < 3.5f);  /* about ln 10 for a fresh net */
  if (with_ref) {
    CHECK_NEAR(lc, lr, 1e-5);
    double worst = 0;
    for (int64_t i = 0; i < np; i++) worst = fmax(worst, fabs(pc[i] - pr[i]) / (fabs(pr[i]) + 1e-3));
    CHECK_MSG(worst < 1e-3, "%s: cpu and ref updated parameters differ by %g (relative)", name, worst);
  }
  /* lazy selects skip loads whose values go unused (a convolution gradient's window taps):
   * the same arithmetic, so the same bits as evaluating every branch */
  float *pe = malloc(sizeof(float) * 300000), le = 0;
  int64_t ne = 0;
  setenv("KILN_LAZY_SELECT", "0", 1);
  kiln_program *eager = run_workload(m, "cpu", x, y, &le, pe, &ne);
  unsetenv("KILN_LAZY_SELECT");
  CHECK(ne == np && memcmp(&le, &lc, sizeof le) == 0);
  bool same = ne == np;
  for (int64_t i = 0; same && i < np; i++) same = memcmp(&pe[i], &pc[i], sizeof pc[i]) == 0;
  CHECK_MSG(same, "%s: lazy and eager selects give different parameters", name);
  kiln_program_free(eager);
  /* the planner's raced switches (pads as moves, sums in their readers' order, a where stored
   * under its moves) plan the same step another way: the same values up to the order of sums */
  if (m == MODEL_LENET) {
    setenv("KILN_BOUNDS_MOVES", "1", 1), setenv("KILN_REORDER_SUMS", "2", 1), setenv("KILN_STORE_MOVED", "2", 1);
    kiln_program *other = run_workload(m, "cpu", x, y, &le, pe, &ne);
    unsetenv("KILN_BOUNDS_MOVES"), unsetenv("KILN_REORDER_SUMS"), unsetenv("KILN_STORE_MOVED");
    double worst = 0;
    for (int64_t i = 0; ne == np && i < np; i++) worst = fmax(worst, fabs(pe[i] - pc[i]) / (fabs(pc[i]) + 1e-3));
    kiln_census oc;
    OK(kiln_program_census(other, &oc));
    CHECK_MSG(ne == np && fabsf(le - lc) <= 1e-5f * fabsf(lc) && worst < 1e-5 && oc.kernels_launched < kernels,
              "%s with the raced planner switches: loss %g against %g, parameters %g apart, %lld kernels", name, le, lc,
              worst, (long long)oc.kernels_launched);
    kiln_program_free(other);
  }
  free(pe);
  kiln_census c;
  OK(kiln_program_census(cpu, &c));
  CHECK_MSG(c.host_fallbacks == 0, "%s: %lld host fallbacks (%s)", name, (long long)c.host_fallbacks, c.fallback_ops);
  CHECK_MSG(c.kernels_launched == kernels, "%s: %lld kernels per step, pinned %lld", name,
            (long long)c.kernels_launched, (long long)kernels);
  fprintf(stderr, "%s on cpu: %lld kernels, %lld host fallbacks, %lld bytes read, %lld written\n", name,
          (long long)c.kernels_launched, (long long)c.host_fallbacks, (long long)c.bytes_read, (long long)c.bytes_written);
  kiln_program_free(ref);
  kiln_program_free(cpu);
  free(x), free(pr), free(pc);
}

/* net's parameters as built (their initial values) into p, flat; returns how many. */
static int64_t initial_params(const TrainNet *net, float *p, int64_t cap) {
  int64_t off = 0;
  for (int i = 0; i < net->n_params && off + net->param_numel[i] <= cap; off += net->param_numel[i], i++) {
    const Tensor *t = &net->g->g.tensors[net->params[i]];
    CHECK(t->dtype == KILN_F32);
    memcpy(p + off, t->data, sizeof(float) * (size_t)net->param_numel[i]);
  }
  return off;
}

/* How far a step's update (p - p0) is from the f32 step's (want - p0), norm-wise. */
static double update_error(const float *p, const float *want, const float *p0, int64_t n) {
  double du = 0, u = 0;
  for (int64_t i = 0; i < n; i++) {
    double d = (double)p[i] - want[i], uw = (double)want[i] - p0[i];
    du += d * d, u += uw * uw;
  }
  return u > 0 ? sqrt(du / u) : INFINITY;
}

/* Mixed precision (train_set_precision -> kiln_graph_set_autocast): every contraction of the
 * mlp_train_b32 step, the three of the backward pass included, takes bf16 operands; params,
 * loss and update stay f32. On be against ref's run of the same bf16 graph (the products are
 * exact in f32, so only the sums' order and the bf16 roundings they flip differ: 1e-3 relative
 * on the parameters, as for f32), and against the f32 step within the stated tolerance of bf16
 * operands (8 bits of mantissa, about 0.4 % a rounding): loss within 1 %, the step's update
 * (new parameters minus the initial ones) within 10 % norm-wise. The update measured 4.5 % off
 * (cpu and ref alike): a weight gradient sums 32 products of mixed sign, four roundings deep,
 * and the sum cancels where the roundings do not; a lost or f32 backward contraction is 100 % or
 * 0 %, either caught. */
static void test_mixed_precision(const char *be, kiln_dtype t) {
  int64_t nx = 32 * 784, np = 0;
  float *x = malloc(sizeof(float) * (size_t)nx), y[320], l16, lr16, l32;
  float *p16 = malloc(sizeof(float) * 120000), *r16 = malloc(sizeof(float) * 120000), *p32 = malloc(sizeof(float) * 120000);
  float *p0 = malloc(sizeof(float) * 120000);
  random_batch(x, nx, y, 32);
  kiln_program *f32 = run_workload(MODEL_MLP, be, x, y, &l32, p32, &np);
  train_set_precision(t);
  TrainNet net;
  kiln_tensor upd[TRAIN_MAX_PARAMS];
  OK(build_workload(MODEL_MLP, &net, upd));
  int bf16_mm = 0, mm = 0;
  for (int i = 0; i < net.g->g.n_nodes; i++) {
    const Node *n = &net.g->g.nodes[i];
    if (n->op != OP_MATMUL) continue;
    mm++;
    bf16_mm += net.g->g.tensors[n->in[0]].dtype == t && net.g->g.tensors[n->in[1]].dtype == t && net.g->g.tensors[n->out].dtype == t;
  }
  CHECK_MSG(mm == 5 && bf16_mm == 5, "mixed precision: %d of %d contractions in %s, expected 5 of 5", bf16_mm, mm,
            kiln_dtype_name(t));
  int64_t off = initial_params(&net, p0, 120000);  /* the same seed as every step built here */
  train_net_free(&net);
  kiln_program *ref = run_workload(MODEL_MLP, "ref", x, y, &lr16, r16, &np);
  kiln_program *mix = run_workload(MODEL_MLP, be, x, y, &l16, p16, &np);
  train_set_precision(KILN_F32);
  CHECK(off == np);
  /* under excess precision the bf16 products' results are rounded once, where ref rounds each op:
   * the loss moves by about 1e-4 of 2.3 (cpu), well inside the f32 step's 1e-2 */
  CHECK_NEAR(l16, lr16, test_rounds_once(be) ? 1e-3 : 1e-5);
  CHECK_MSG(fabs(l16 - l32) < 1e-2 * fabs(l32), "mixed precision: loss %g against f32 %g", l16, l32);
  double worst_ref = 0, upd_err = update_error(p16, p32, p0, np);
  for (int64_t i = 0; i < np; i++) worst_ref = fmax(worst_ref, fabs(p16[i] - r16[i]) / (fabs(r16[i]) + 1e-3));
  CHECK_MSG(worst_ref < 1e-3, "mixed precision on %s: parameters differ from ref's by %g (relative)", be, worst_ref);
  CHECK_MSG(upd_err < 1e-1 && upd_err > 1e-4, "mixed precision on %s: the update differs from the f32 step's by %g (norm-wise)", be,
            upd_err);
  kiln_census c;
  OK(kiln_program_census(mix, &c));
  CHECK_MSG(c.host_fallbacks == 0, "mixed precision: %lld host fallbacks (%s)", (long long)c.host_fallbacks, c.fallback_ops);
  fprintf(stderr, "mixed precision (%s) on %s: loss %.6f (f32 %.6f), parameters %.2g from ref's, update %.2g from f32's, %lld kernels\n",
          kiln_dtype_name(t), be, l16, l32, worst_ref, upd_err, (long long)c.kernels_launched);
  kiln_program_free(f32), kiln_program_free(ref), kiln_program_free(mix);
  free(x), free(p16), free(r16), free(p32), free(p0);
}

/* The param of net's graph named name, or -1. */
static kiln_tensor param_named(kiln_graph *g, const char *name) {
  for (int i = 0; i < g->g.n_tensors; i++)
    if (g->g.tensors[i].kind == T_PARAM && g->g.tensors[i].name && !strcmp(g->g.tensors[i].name, name)) return i;
  return -1;
}

/* f16 autocast: the SGD step scales its loss dynamically. A clean step keeps the scale (2^16)
 * and counts itself; a batch that overflows f16 (1e5 is past its 65504) skips the step (every
 * parameter keeps its bits) and halves the scale; the next clean step updates at the new scale
 * and counts 1 again. The clean step's update is within 10 % of the f32 step's, as for bf16
 * (f16 keeps 11 bits, but a relu unit whose input rounds across 0 flips its whole row of the
 * gradient: measured 0.05 % to 2.6 % over different batches). */
static void test_loss_scaling(const char *be) {
  int64_t nx = 32 * 784, np = 0;
  float *x = malloc(sizeof(float) * (size_t)nx), y[320], l32, l16, *p32 = malloc(sizeof(float) * 120000);
  random_batch(x, nx, y, 32);
  kiln_program *f32 = run_workload(MODEL_MLP, be, x, y, &l32, p32, &np);
  train_set_precision(KILN_F16);
  TrainNet net;
  kiln_tensor upd[TRAIN_MAX_PARAMS];
  OK(build_workload(MODEL_MLP, &net, upd));
  train_set_precision(KILN_F32);
  kiln_tensor scale = param_named(net.g, "loss_scale"), good = param_named(net.g, "loss_scale.good");
  CHECK(scale >= 0 && good >= 0);
  float *p0 = malloc(sizeof(float) * 120000);
  int64_t off = initial_params(&net, p0, 120000);
  CHECK(off == np);
  kiln_options o = kiln_options_default();
  o.backend = be;
  kiln_program *p = NULL;
  OK(kiln_program_compile(net.g, &o, &p));
  float *a = malloc(sizeof(float) * 120000), *b = malloc(sizeof(float) * 120000), sc, gd;
  void *outs[1 + TRAIN_MAX_PARAMS] = { &l16 };
  off = 0;
  for (int i = 0; i < net.n_params; i++) outs[1 + i] = a + off, off += net.param_numel[i];
  if (p) {
    OK(kiln_program_run(p, (const void *[]){ x, y }, outs));  /* clean */
    OK(kiln_program_read_param(p, scale, &sc));
    OK(kiln_program_read_param(p, good, &gd));
    CHECK_MSG(sc == 65536 && gd == 1, "clean step: scale %g, clean steps %g", sc, gd);
    double e = update_error(a, p32, p0, np);
    CHECK_MSG(e < 1e-1 && e > 0, "f16 step: update %g from the f32 step's (norm-wise)", e);
    fprintf(stderr, "f16 step with loss scaling on %s: update %.2g from the f32 step's\n", be, e);
    CHECK_NEAR(l16, l32, 1e-2 * l32);
    float big = x[5];
    x[5] = 1e5f;  /* inf in f16: the step is skipped */
    for (int i = 0; i < net.n_params; i++) outs[1 + i] = NULL;
    OK(kiln_program_run(p, (const void *[]){ x, y }, outs));
    x[5] = big;
    OK(kiln_program_read_param(p, scale, &sc));
    OK(kiln_program_read_param(p, good, &gd));
    CHECK_MSG(sc == 32768 && gd == 0 && !isfinite(l16), "overflowing step: scale %g, clean steps %g, loss %g", sc, gd, l16);
    off = 0;
    bool kept = true;
    for (int i = 0; i < net.n_params; off += net.param_numel[i], i++) {
      OK(kiln_program_read_param(p, net.params[i], b + off));
      kept &= !memcmp(b + off, a + off, sizeof(float) * (size_t)net.param_numel[i]);
    }
    CHECK_MSG(kept, "an overflowing f16 step changed the parameters");
    OK(kiln_program_run(p, (const void *[]){ x, y }, outs));  /* clean again, at the halved scale */
    OK(kiln_program_read_param(p, scale, &sc));
    OK(kiln_program_read_param(p, good, &gd));
    CHECK_MSG(sc == 32768 && gd == 1 && isfinite(l16), "clean step after: scale %g, clean steps %g", sc, gd);
    kiln_census c;
    OK(kiln_program_census(p, &c));
    CHECK_MSG(c.host_fallbacks == 0, "loss scaling: %lld host fallbacks (%s)", (long long)c.host_fallbacks, c.fallback_ops);
  }
  kiln_program_free(p), kiln_program_free(f32);
  train_net_free(&net);
  free(x), free(p32), free(p0), free(a), free(b);
}

/* Repeated SGD-momentum and Adam steps on one batch drive the loss down; Adam counts steps. */
static void test_repeated_steps(const char *be) {
  for (int adam = 0; adam < 2; adam++) {
    TrainNet net;
    OK(train_net_build(MODEL_MLP, 16, NULL, 3, 1, &net));
    OK(kiln_graph_output(net.g, net.loss, "loss"));
    if (adam) OK(kiln_graph_adam(net.g, net.loss, net.n_params, net.params, 1e-3, 0.9, 0.999, 1e-8, NULL));
    else OK(kiln_graph_sgd(net.g, net.loss, net.n_params, net.params, 0.05, 0.9, NULL));
    kiln_options o = kiln_options_default();
    o.backend = be;
    kiln_program *p = NULL;
    OK(kiln_program_compile(net.g, &o, &p));
    float x[16 * 784], y[160], first = 0, loss = 0;
    random_batch(x, 16 * 784, y, 16);
    for (int s = 0; p && s < 8; s++) {
      OK(kiln_program_run(p, (const void *[]){x, y}, (void *[]){&loss}));
      if (s == 0) first = loss;
    }
    CHECK_MSG(loss < 0.5f * first, "%s on %s: loss %g after 8 steps, %g at the first", adam ? "adam" : "sgd", be,
              loss, first);
    if (adam && p) {  /* the step counter is a parameter named adam.step, now 8 */
      kiln_tensor counter = -1;
      for (int t = 0; t < net.g->g.n_tensors; t++)
        if (!strcmp(net.g->g.tensors[t].name, "adam.step")) counter = t;
      float steps = 0;
      CHECK(counter >= 0);
      if (counter >= 0) OK(kiln_program_read_param(p, counter, &steps));
      CHECK(steps == 8);
    }
    kiln_program_free(p);
    train_net_free(&net);
  }
}

static void test_api_checks(void) {
  TrainNet net;
  OK(train_net_build(MODEL_MLP, 4, NULL, 1, 1, &net));
  kiln_graph *g = net.g;
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_sgd(g, net.loss, 1, &net.x, 0.1, 0, NULL));  /* an input */
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_sgd(g, net.loss, 2, (const kiln_tensor[]){net.params[0], net.params[0]}, 0.1, 0, NULL));
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_sgd(g, net.loss, 1, net.params, 0.1, 1.5, NULL));  /* momentum */
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_adam(g, net.loss, 1, net.params, 0.1, 1.0, 0.999, 1e-8, NULL));
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_sgd(g, net.logits, 1, net.params, 0.1, 0, NULL));  /* loss not scalar */
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_sgd(NULL, net.loss, 1, net.params, 0.1, 0, NULL));
  int n_nodes = g->g.n_nodes, n_assigns = g->g.n_assigns;
  CHECK(n_assigns == 0 && n_nodes > 0);  /* failed calls left nothing behind */
  OK(kiln_graph_sgd(g, net.loss, 1, net.params, 0.1, 0.9, NULL));
  CHECK(g->g.n_assigns == 2);  /* the param and its momentum */
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_sgd(g, net.loss, 1, net.params, 0.1, 0, NULL));  /* assigned already */
  OK(graph_check(&g->g));
  /* autocast: f32, bf16 or f16 only; an f64 product is left alone, an f32 one gets its casts */
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_set_autocast(g, KILN_F64));
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_set_autocast(NULL, KILN_BF16));
  OK(kiln_graph_set_autocast(g, KILN_F16));
  kiln_tensor a, b, m;
  OK(kiln_graph_input(g, "a64", KILN_F64, 2, (const int64_t[]){ 2, 3 }, &a));
  OK(kiln_graph_input(g, "b64", KILN_F64, 2, (const int64_t[]){ 3, 4 }, &b));
  int before = g->g.n_nodes;
  OK(kiln_graph_matmul(g, a, b, &m));
  CHECK(g->g.n_nodes == before + 1 && g->g.tensors[m].dtype == KILN_F64);
  before = g->g.n_nodes;
  int tensors = g->g.n_tensors;
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_matmul(g, net.logits, net.params[2], &m));  /* [4,10] @ [128,10] */
  CHECK(g->g.n_nodes == before && g->g.n_tensors == tensors);  /* its casts rolled back too */
  kiln_tensor c;
  OK(kiln_graph_input(g, "c", KILN_F32, 2, (const int64_t[]){ 10, 3 }, &c));
  before = g->g.n_nodes;
  OK(kiln_graph_matmul(g, net.logits, c, &m));  /* two casts to f16, the product, one cast back */
  const Node *mm = &g->g.nodes[g->g.n_nodes - 2];
  CHECK(g->g.n_nodes == before + 4 && g->g.tensors[m].dtype == KILN_F32 && mm->op == OP_MATMUL &&
        g->g.tensors[mm->in[0]].dtype == KILN_F16 && g->g.tensors[mm->out].dtype == KILN_F16);
  OK(graph_check(&g->g));
  train_net_free(&net);
}

int main(void) {
  test_api_checks();
  test_repeated_steps("ref");
  if (!test_backend_present("cpu")) {
    fprintf(stderr, "skip: cpu backend not available (%s)\n", kiln_last_error());
    TEST_MAIN_END();
  }
  test_repeated_steps("cpu");
  test_workload(MODEL_MLP, "mlp_train_b32", MLP_TRAIN_B32_KERNELS, true);
  test_workload(MODEL_LENET, "cnn_train_b32", CNN_TRAIN_B32_KERNELS, false);
  test_mixed_precision("cpu", KILN_BF16);
  test_mixed_precision("cpu", KILN_F16);
  test_loss_scaling("cpu");
  const char *want = getenv("KILN_TEST_BACKEND");
  if (want && !strcmp(want, "cuda") && test_backend_present("cuda")) test_mixed_precision("cuda", KILN_BF16), test_loss_scaling("cuda");
  TEST_MAIN_END();
}
