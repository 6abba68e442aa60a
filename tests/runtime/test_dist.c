/*
 * Data parallel: kiln_graph_all_reduce_mean and kiln_graph_set_data_parallel's averaged
 * gradients. What a machine without a second device can check: the plan (each collective a
 * boundary of its own, right after the kernel that makes its operand, both in buffers of their
 * own), a data-parallel step over a group of one rank equal to the plain step on ref, cpu and
 * KILN_TEST_BACKEND, the census (collectives, calls, bytes; no fallbacks), the refusal of more
 * than one rank on a backend without collectives, the communicator's id as text, and a missing
 * NCCL named. With KILN_TEST_NCCL=1 (tools/gpu-check) the same step on cuda over NCCL's
 * communicator of one rank, its buckets through the library.
 */
#include "test.h"
#include "graph/graph.h"
#include "plan/plan.h"
#include "runtime/runtime.h"

#include "../../tools/train_models.c"

#include <pthread.h>

static unsigned long long seed = 11;

enum { BATCH = 16 };

/* One SGD step (momentum 0.9) of the shared MLP, data parallel or not: loss, then each updated
 * parameter as outputs. */
static void build_step_of(ModelKind m, int batch, bool parallel, bool adam, TrainNet *net) {
  OK(train_net_build(m, batch, NULL, 5, 1, net));
  OK(kiln_graph_set_data_parallel(net->g, parallel));
  kiln_tensor upd[TRAIN_MAX_PARAMS];
  OK(kiln_graph_output(net->g, net->loss, "loss"));
  if (adam) OK(kiln_graph_adam(net->g, net->loss, net->n_params, net->params, 1e-3, 0.9, 0.999, 1e-8, upd));
  else OK(kiln_graph_sgd(net->g, net->loss, net->n_params, net->params, 0.05, 0.9, upd));
  for (int i = 0; i < net->n_params; i++) OK(kiln_graph_output(net->g, upd[i], NULL));
}

static void build_step(ModelKind m, bool parallel, bool adam, TrainNet *net) { build_step_of(m, BATCH, parallel, adam, net); }

/* Runs two steps; fills the loss of each and the parameters after both (flat). */
static kiln_program *run_steps(ModelKind m, bool parallel, bool adam, const char *be, kiln_dist *dist, const float *x,
                               const float *y, float loss[2], float *params, int64_t *n) {
  TrainNet net;
  build_step(m, parallel, adam, &net);
  kiln_options o = kiln_options_default();
  o.backend = be;
  o.dist = dist;
  kiln_program *p = NULL;
  OK(kiln_program_compile(net.g, &o, &p));
  void *outs[1 + TRAIN_MAX_PARAMS] = { NULL };
  int64_t off = 0;
  for (int i = 0; i < net.n_params; i++) outs[1 + i] = params + off, off += net.param_numel[i];
  *n = off;
  for (int s = 0; p && s < 2; s++) {
    outs[0] = &loss[s];
    OK(kiln_program_run(p, (const void *[]){ x, y }, outs));
  }
  train_net_free(&net);
  return p;
}

static void random_batch(float *x, float *y) {
  for (int i = 0; i < BATCH * 784; i++) x[i] = (float)test_rand(&seed);
  memset(y, 0, sizeof(float) * BATCH * 10);
  for (int b = 0; b < BATCH; b++) y[b * 10 + (int)((test_rand(&seed) + 1) * 5) % 10] = 1;
}

/* The averaged step over one rank is the plain step: same losses, parameters within rounding
 * (the gradients are stored before the update reads them, so the kernels differ). calls: the
 * communicator's calls a run, or -1 through a library: 1 to one a collective, as its plan's
 * launches close the buckets. */
static void test_one_rank(ModelKind m, const char *be, kiln_dist *dist, bool adam, int64_t calls) {
  static float x[BATCH * 784], y[BATCH * 10], pp[300000], pd[300000];
  float lp[2], ld[2];
  int64_t np = 0, nd = 0, collectives = m == MODEL_MLP ? 4 : 8;
  random_batch(x, y);
  kiln_program *plain = run_steps(m, false, adam, be, NULL, x, y, lp, pp, &np);
  kiln_program *par = run_steps(m, true, adam, be, dist, x, y, ld, pd, &nd);
  CHECK(np == nd && np == (m == MODEL_MLP ? 784 * 128 + 128 + 128 * 10 + 10 : 206922));
  double worst = 0;
  for (int64_t i = 0; np == nd && i < np; i++) worst = fmax(worst, fabs(pd[i] - pp[i]) / (fabs(pp[i]) + 1e-3));
  CHECK_MSG(worst < 1e-5 && fabsf(ld[0] - lp[0]) <= 1e-6f * fabsf(lp[0]) && fabsf(ld[1] - lp[1]) <= 1e-5f * fabsf(lp[1]),
            "%s%s: the averaged step over one rank differs from the plain one: losses %g %g against %g %g, "
            "parameters %g apart", be, adam ? " (adam)" : "", ld[0], ld[1], lp[0], lp[1], worst);
  CHECK_MSG(lp[1] < lp[0], "%s: the second step's loss %g is not below the first's %g", be, lp[1], lp[0]);
  kiln_census c;
  if (par) OK(kiln_program_census(par, &c));
  int64_t bytes = 4 * np;
  bool calls_ok = calls >= 0 ? c.collective_calls == calls : c.collective_calls >= 1 && c.collective_calls <= collectives;
  CHECK_MSG(par && c.collectives == collectives && c.collective_bytes == bytes && calls_ok && c.host_fallbacks == 0, "%s: %lld collectives of %lld bytes in %lld calls (want %lld, %lld, %lld), %lld fallbacks (%s)",
            be, (long long)c.collectives, (long long)c.collective_bytes, (long long)c.collective_calls, (long long)collectives,
            (long long)bytes, (long long)calls, (long long)c.host_fallbacks, c.fallback_ops);
  char *text = par ? test_program_text(par) : NULL;
  char want[32];
  snprintf(want, sizeof want, "%lld collectives", (long long)collectives);
  CHECK_MSG(!text || !strcmp(be, "ref") || strstr(text, want), "%s: the printed program names no collectives", be);
  free(text);
  kiln_program_free(plain);
  kiln_program_free(par);
}

/* The buckets, through a cpu backend given collectives that copy (a communicator of one rank),
 * so that the schedule's path to a library runs here: each bucket started once a run, after its
 * members' gradients exist (else the parameters would differ from the copies' own path), waited
 * for once a run after it started; a small bucket cap makes more buckets; the warm-up at compile
 * calls each once. */
static int fake_starts, fake_waits, fake_order_bad, fake_members;
static int fake_started[64];

static kiln_status fake_all_reduce(void *dev, void *comm, int b, int n, const RtBuf *src, const RtBuf *dst,
                                   const int64_t *count, const kiln_dtype *dtype) {
  (void)dev, (void)comm;
  for (int i = 0; i < n; i++) memcpy((void *)(uintptr_t)dst[i], (const void *)(uintptr_t)src[i], (size_t)count[i] * kiln_dtype_size(dtype[i]));
  fake_starts++, fake_members += n;
  if (b >= 0 && b < 64) fake_started[b]++;
  return KILN_OK;
}

static kiln_status fake_wait(void *dev, int b) {
  (void)dev;
  fake_waits++;
  if (b < 0 || b >= 64 || fake_started[b] < 1) fake_order_bad++;
  else fake_started[b]--;
  return KILN_OK;
}

static void test_buckets(int64_t cap, int want_buckets) {
  static float x[BATCH * 784], y[BATCH * 10], pp[110000], pb[110000];
  float lp[2], lb[2];
  int64_t np = 0;
  random_batch(x, y);
  kiln_program *plain = run_steps(MODEL_MLP, false, false, "cpu", NULL, x, y, lp, pp, &np);
  kiln_program_free(plain);
  TrainNet net;
  build_step(MODEL_MLP, true, false, &net);
  TE *te = NULL;
  OK(te_lower(&net.g->g, &te));
  Backend be = rt_backend_cpu;
  be.all_reduce = fake_all_reduce, be.collective_wait = fake_wait;
  struct kiln_dist one = { .ranks = 1, .rank = 0, .comm = &one };  /* a library's communicator, as far as the schedule knows */
  kiln_options o = kiln_options_default();
  o.dist = &one;
  o.dist_bucket_bytes = cap;
  kiln_census c = { 0 };
  Schedule *s = NULL;
  memset(fake_started, 0, sizeof fake_started);
  fake_starts = fake_waits = fake_order_bad = fake_members = 0;
  if (te) OK(rt_schedule_create(&be, te, &o, &c, &s));
  CHECK_MSG(fake_starts == want_buckets && fake_waits == want_buckets && fake_members == 4,
            "cap %lld: the warm-up started %d buckets of %d collectives and waited %d times, want %d of 4", (long long)cap,
            fake_starts, fake_members, fake_waits, want_buckets);
  void *outs[1 + TRAIN_MAX_PARAMS] = { NULL };
  int64_t off = 0;
  for (int i = 0; i < net.n_params; i++) outs[1 + i] = pb + off, off += net.param_numel[i];
  for (int r = 0; s && r < 2; r++) {
    outs[0] = &lb[r];
    OK(rt_schedule_run(s, (const void *[]){ x, y }, outs, 1, &c));
  }
  CHECK_MSG(fake_starts == 3 * want_buckets && fake_waits == 3 * want_buckets && !fake_order_bad,
            "cap %lld: %d starts and %d waits over the warm-up and two runs (%d out of order), want %d each", (long long)cap,
            fake_starts, fake_waits, fake_order_bad, 3 * want_buckets);
  CHECK_MSG(c.collectives == 4 && c.collective_calls == want_buckets && c.host_fallbacks == 0, "cap %lld: census %lld collectives in %lld calls",
            (long long)cap, (long long)c.collectives, (long long)c.collective_calls);
  double worst = 0;
  for (int64_t i = 0; i < np && off == np; i++) worst = fmax(worst, fabs(pb[i] - pp[i]) / (fabs(pp[i]) + 1e-3));
  CHECK_MSG(off == np && worst < 1e-5 && fabsf(lb[1] - lp[1]) <= 1e-5f * fabsf(lp[1]),
            "cap %lld: the bucketed step differs from the plain one: loss %g against %g, parameters %g apart", (long long)cap,
            lb[1], lp[1], worst);
  rt_schedule_free(s);
  te_free(te);
  train_net_free(&net);
}

/* Two ranks on this cpu, each a thread with its own program, through a communicator of this
 * test's (a barrier and the average of the two ranks' buffers, what NCCL's averaging all-reduce
 * computes), against one rank taking both ranks' images each step: rank r of step s takes
 * images (2 s + r) B .. + B, as kiln train --gpus gives them, and the plain step of batch 2 B
 * takes 2 s B .. + 2 B. The losses (the mean of the ranks') and the parameters agree up to the
 * order of f32 sums, and the two ranks' parameters are the same bits. Buckets of 8 KiB: two
 * calls a step, each waited for where its results are read. */
enum { PAIR_STEPS = 6 };

typedef struct Pair {
  pthread_barrier_t meet;
  const float *src[2][8];
  int64_t count[2][8];
  int n[2], disagree;
} Pair;

typedef struct PairRank {
  Pair *pair;
  int rank;
  const float *x, *y;              /* every step's images and labels */
  float loss[PAIR_STEPS], *params;
  int64_t n_params;
  kiln_status st;
} PairRank;

static kiln_status pair_all_reduce(void *dev, void *comm, int b, int n, const RtBuf *src, const RtBuf *dst,
                                   const int64_t *count, const kiln_dtype *dtype) {
  PairRank *me = comm;
  Pair *pr = me->pair;
  int r = me->rank;
  (void)dev, (void)b;
  if (n > 8) return kiln_fail(KILN_ERR_UNSUPPORTED, "pair: %d collectives in a bucket", n);
  for (int i = 0; i < n; i++) {
    if (dtype[i] != KILN_F32) return kiln_fail(KILN_ERR_UNSUPPORTED, "pair: %s", kiln_dtype_name(dtype[i]));
    pr->src[r][i] = (const float *)(uintptr_t)src[i], pr->count[r][i] = count[i];
  }
  pr->n[r] = n;
  pthread_barrier_wait(&pr->meet);
  bool same = pr->n[0] == pr->n[1];
  for (int i = 0; same && i < n; i++) same = pr->count[0][i] == pr->count[1][i];
  if (!same) pr->disagree++;
  for (int i = 0; same && i < n; i++) {
    float *d = (float *)(uintptr_t)dst[i];
    for (int64_t j = 0; j < count[i]; j++) d[j] = (pr->src[0][i][j] + pr->src[1][i][j]) * 0.5f;
  }
  pthread_barrier_wait(&pr->meet);  /* neither rank changes its operands before both have read them */
  return KILN_OK;
}

static kiln_status pair_wait(void *dev, int b) {
  (void)dev, (void)b;
  return KILN_OK;
}

static void *pair_rank(void *arg) {
  PairRank *me = arg;
  TrainNet net;
  build_step(MODEL_MLP, true, false, &net);
  TE *te = NULL;
  Schedule *s = NULL;
  Backend be = rt_backend_cpu;
  be.all_reduce = pair_all_reduce, be.collective_wait = pair_wait;
  struct kiln_dist d = { .ranks = 2, .rank = me->rank, .comm = me };
  kiln_options o = kiln_options_default();
  o.dist = &d;
  o.dist_bucket_bytes = 8192;
  kiln_census c = { 0 };
  me->st = te_lower(&net.g->g, &te);
  if (!me->st) me->st = rt_schedule_create(&be, te, &o, &c, &s);  /* its warm-up meets the other rank's */
  void *outs[1 + TRAIN_MAX_PARAMS] = { NULL };
  int64_t off = 0;
  for (int i = 0; i < net.n_params; i++) outs[1 + i] = me->params + off, off += net.param_numel[i];
  me->n_params = off;
  for (int st = 0; !me->st && st < PAIR_STEPS; st++) {
    int64_t at = (int64_t)(2 * st + me->rank) * BATCH;
    outs[0] = &me->loss[st];
    me->st = rt_schedule_run(s, (const void *[]){ me->x + at * 784, me->y + at * 10 }, outs, 1, &c);
  }
  if (!me->st && (c.collectives != 4 || c.collective_calls != 2))
    me->st = kiln_fail(KILN_ERR_INVALID_ARG, "rank %d: %lld collectives in %lld calls, want 4 in 2", me->rank,
                       (long long)c.collectives, (long long)c.collective_calls);
  rt_schedule_free(s);
  te_free(te);
  train_net_free(&net);
  return NULL;
}

static void test_two_ranks(void) {
  static float x[2 * PAIR_STEPS * BATCH * 784], y[2 * PAIR_STEPS * BATCH * 10], one[110000], r0[110000], r1[110000];
  for (int s = 0; s < 2 * PAIR_STEPS; s++) random_batch(x + (size_t)s * BATCH * 784, y + (size_t)s * BATCH * 10);
  Pair pair = { .disagree = 0 };
  pthread_barrier_init(&pair.meet, NULL, 2);
  PairRank ranks[2] = { { .pair = &pair, .rank = 0, .x = x, .y = y, .params = r0 },
                        { .pair = &pair, .rank = 1, .x = x, .y = y, .params = r1 } };
  pthread_t th[2];
  for (int r = 0; r < 2; r++) CHECK(pthread_create(&th[r], NULL, pair_rank, &ranks[r]) == 0);
  for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
  pthread_barrier_destroy(&pair.meet);
  for (int r = 0; r < 2; r++) CHECK_MSG(ranks[r].st == KILN_OK, "rank %d: %s", r, kiln_last_error());
  /* one rank, batch 2 B, the same images a step */
  TrainNet net;
  build_step_of(MODEL_MLP, 2 * BATCH, false, false, &net);
  kiln_options o = kiln_options_default();
  o.backend = "cpu";
  kiln_program *p = NULL;
  OK(kiln_program_compile(net.g, &o, &p));
  void *outs[1 + TRAIN_MAX_PARAMS] = { NULL };
  int64_t off = 0;
  for (int i = 0; i < net.n_params; i++) outs[1 + i] = one + off, off += net.param_numel[i];
  float loss[PAIR_STEPS] = { 0 };
  double worst_loss = 0, worst_param = 0;
  for (int st = 0; p && st < PAIR_STEPS; st++) {
    outs[0] = &loss[st];
    int64_t at = (int64_t)2 * st * BATCH;
    OK(kiln_program_run(p, (const void *[]){ x + at * 784, y + at * 10 }, outs));
    double mean = 0.5 * ((double)ranks[0].loss[st] + ranks[1].loss[st]);
    worst_loss = fmax(worst_loss, fabs(mean - loss[st]) / fabs(loss[st]));
  }
  for (int64_t i = 0; i < off && off == ranks[0].n_params; i++) worst_param = fmax(worst_param, fabs(r0[i] - one[i]) / (fabs(one[i]) + 1e-3));
  CHECK_MSG(off == ranks[0].n_params && !memcmp(r0, r1, sizeof(float) * (size_t)off), "the two ranks' parameters differ");
  CHECK_MSG(!pair.disagree, "the ranks' calls disagreed %d times", pair.disagree);
  CHECK_MSG(worst_loss < 1e-5 && worst_param < 1e-5 && loss[PAIR_STEPS - 1] < loss[0],
            "two ranks against one over %d steps: losses %.3g apart (relative), parameters %.3g; loss %g -> %g", PAIR_STEPS,
            worst_loss, worst_param, loss[0], loss[PAIR_STEPS - 1]);
  fprintf(stderr, "two ranks against one, %d steps: losses within %.2g, parameters within %.2g (relative)\n", PAIR_STEPS,
          worst_loss, worst_param);
  kiln_program_free(p);
  train_net_free(&net);
}

/* The plan: one kernel a collective, just after its operand's kernel (or the collectives
 * already there), reason printed; operand and result outside the arena; an operand that only
 * moved a sum (LeNet's weight gradients, reshaped and transposed) is that sum itself. */
static void test_plan(ModelKind m, int collectives) {
  TrainNet net;
  build_step(m, true, false, &net);
  TE *te = NULL;
  Plan *p = NULL;
  OK(te_lower(&net.g->g, &te));
  kiln_options o = kiln_options_default();
  PlanOptions po = plan_options(&o);
  if (te) OK(plan_build(te, &po, &p));
  int found = 0;
  for (int k = 0; p && k < p->n_kernels; k++) {
    const Kernel *K = &p->kernels[k];
    if (K->kind != KN_COLLECTIVE) continue;
    found++;
    int v = K->anchor, u = te->stages[v].src[0], before = k - 1;
    while (before >= 0 && p->kernels[before].kind == KN_COLLECTIVE) before--;
    CHECK_MSG(before >= 0 && plan_chain_end(p, p->kernel_of[u]) == before,
              "collective k%d reads t%d of k%d, but follows k%d", k, u, p->kernel_of[u], before);
    CHECK(p->stored[u] && p->stored[v] && p->offset[u] < 0 && p->offset[v] < 0);
    CHECK(K->why && strstr(K->why, "collective"));
    CHECK_MSG(te->stages[u].kind == ST_REDUCE, "collective k%d averages t%d, %s, not the sum under it", k, u,
              te->stages[u].op >= 0 ? op_names[te->stages[u].op] : "?");
  }
  CHECK_MSG(found == collectives, "%d collective kernels, want %d (one a parameter)", found, collectives);
  plan_free(p);
  te_free(te);
  train_net_free(&net);
}

/* all_reduce_mean's own checks, its gradient (the mean of the gradients: over one rank, the
 * identity's), and its refusal of ints. */
static void test_op(void) {
  kiln_graph *g = NULL;
  OK(kiln_graph_create(&g));
  kiln_tensor x, i, y, w, loss, gx;
  OK(kiln_graph_param(g, "x", KILN_F32, 1, (const int64_t[]){ 3 }, (const float[]){ 1, -2, 4 }, &x));
  OK(kiln_graph_input(g, "i", KILN_I32, 1, (const int64_t[]){ 3 }, &i));
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_all_reduce_mean(g, i, &y));
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_all_reduce_mean(g, 999, &y));
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_all_reduce_mean(g, x, NULL));
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_set_data_parallel(g, 2));
  OK(kiln_graph_all_reduce_mean(g, x, &y));
  OK(kiln_graph_binary(g, KILN_MUL, y, y, &w));
  OK(kiln_graph_reduce(g, KILN_REDUCE_SUM, w, 0, NULL, 0, &loss));
  OK(kiln_graph_grad(g, loss, 1, &x, &gx));
  OK(kiln_graph_output(g, gx, "gx"));
  for (int b = 0; b < 2; b++) {
    kiln_options o = kiln_options_default();
    o.backend = b ? "cpu" : "ref";
    kiln_program *p = NULL;
    float out[3] = { 0 };
    int ints[3] = { 0 };
    OK(kiln_program_compile(g, &o, &p));
    if (p) OK(kiln_program_run(p, (const void *[]){ ints }, (void *[]){ out }));
    CHECK_MSG(out[0] == 2 && out[1] == -4 && out[2] == 8, "%s: d sum(mean(x)^2)/dx = %g %g %g, want 2 -4 8", o.backend,
              out[0], out[1], out[2]);
    kiln_program_free(p);
  }
  kiln_graph_free(g);
}

/* More than one rank with no library behind the communicator (kiln_dist_open makes none without
 * an id): refused at compile, naming the backend and the ranks, on a backend without collectives
 * (ref, cpu) and on one with them (cuda; here also a cpu backend given the test's collectives). */
static void test_refused(const char *be) {
  TrainNet net;
  build_step(MODEL_MLP, true, false, &net);
  struct kiln_dist two = { .ranks = 2, .rank = 1, .comm = NULL };
  kiln_options o = kiln_options_default();
  o.backend = be;
  o.dist = &two;
  kiln_program *p = NULL;
  FAILS(KILN_ERR_UNSUPPORTED, kiln_program_compile(net.g, &o, &p));
  CHECK_MSG(!p && strstr(kiln_last_error(), "2 ranks") && strstr(kiln_last_error(), be), "%s: %s", be, kiln_last_error());
  if (!strcmp(be, "cpu")) {
    TE *te = NULL;
    Schedule *s = NULL;
    kiln_census c = { 0 };
    Backend with = rt_backend_cpu;
    with.all_reduce = fake_all_reduce, with.collective_wait = fake_wait;
    OK(te_lower(&net.g->g, &te));
    if (te) FAILS(KILN_ERR_UNSUPPORTED, rt_schedule_create(&with, te, &o, &c, &s));
    CHECK_MSG(!s && strstr(kiln_last_error(), "no library"), "a backend with collectives, no library: %s", kiln_last_error());
    rt_schedule_free(s);
    te_free(te);
  }
  train_net_free(&net);
}

static void test_id_and_open(void) {
  kiln_dist_id id, back;
  char text[KILN_DIST_ID_TEXT];
  for (int i = 0; i < KILN_DIST_ID_BYTES; i++) id.bytes[i] = (unsigned char)(i * 37 + 5);
  OK(kiln_dist_id_format(&id, text, sizeof text));
  CHECK(strlen(text) == 2 * KILN_DIST_ID_BYTES && !strncmp(text, "052a4f", 6));
  OK(kiln_dist_id_parse(text, &back));
  CHECK(!memcmp(id.bytes, back.bytes, sizeof id.bytes));
  FAILS(KILN_ERR_INVALID_ARG, kiln_dist_id_format(&id, text, sizeof text - 1));
  text[7] = 'g';
  FAILS(KILN_ERR_INVALID_ARG, kiln_dist_id_parse(text, &back));
  CHECK(strstr(kiln_last_error(), "character 7"));
  FAILS(KILN_ERR_INVALID_ARG, kiln_dist_id_parse("00ff", &back));
  kiln_dist *d = NULL;
  FAILS(KILN_ERR_INVALID_ARG, kiln_dist_open(NULL, 2, 0, &d));  /* two ranks need an id */
  FAILS(KILN_ERR_INVALID_ARG, kiln_dist_open(&id, 2, 2, &d));
  FAILS(KILN_ERR_INVALID_ARG, kiln_dist_open(NULL, 1, 0, NULL));
  OK(kiln_dist_open(NULL, 1, 0, &d));
  CHECK(d && kiln_dist_ranks(d) == 1 && kiln_dist_rank(d) == 0 && kiln_dist_ranks(NULL) == 1);
  kiln_dist_close(d);
  kiln_dist_close(NULL);
}

/* Without NCCL (here: a path that is none) the id and a communicator say so; NVLink multicast is
 * turned off before NCCL is looked for, whatever the environment said. */
static void test_no_nccl(void) {
  setenv("KILN_NCCL_LIB", "/nonexistent/libnccl.so.2", 1);
  setenv("NCCL_NVLS_ENABLE", "1", 1);
  kiln_dist_id id;
  FAILS(KILN_ERR_DEVICE, kiln_dist_id_new(&id));
  CHECK_MSG(strstr(kiln_last_error(), "/nonexistent/libnccl.so.2") && strstr(kiln_last_error(), "NCCL"), "%s",
            kiln_last_error());
  const char *nvls = getenv("NCCL_NVLS_ENABLE");
  CHECK_MSG(nvls && !strcmp(nvls, "0"), "NCCL_NVLS_ENABLE is '%s' after NCCL was looked for", nvls ? nvls : "(unset)");
  unsetenv("KILN_NCCL_LIB");
}

int main(void) {
  const char *extra = getenv("KILN_TEST_BACKEND");
  test_plan(MODEL_MLP, 4);
  test_plan(MODEL_LENET, 8);
  test_op();
  test_id_and_open();
  test_buckets(0, 1);  /* 25 MiB: the four gradients in one bucket */
  /* 8 KiB: b2, W2 and b1 (5672 bytes), then W1 (401 KB, over the cap alone); 4 KiB: each alone */
  test_buckets(8192, 2);
  test_buckets(4096, 4);
  test_two_ranks();
  kiln_dist *one = NULL;
  OK(kiln_dist_open(NULL, 1, 0, &one));
  const char *bes[] = { "ref", "cpu", extra && strcmp(extra, "cpu") && strcmp(extra, "ref") ? extra : NULL };
  for (int b = 0; b < 3 && bes[b]; b++) {
    test_one_rank(MODEL_MLP, bes[b], NULL, false, 0);
    test_one_rank(MODEL_MLP, bes[b], one, true, 0);
    if (strcmp(bes[b], "ref")) test_one_rank(MODEL_LENET, bes[b], one, false, 0);  /* ref: minutes for a CNN step */
    test_refused(bes[b]);
  }
  kiln_dist_close(one);
  if (getenv("KILN_TEST_NCCL") && !strcmp(getenv("KILN_TEST_NCCL"), "1")) {
    /* NCCL's communicator of one rank on cuda: the buckets go through the library */
    kiln_dist_id id;
    kiln_dist *nccl = NULL;
    OK(kiln_dist_id_new(&id));
    OK(kiln_dist_open(&id, 1, 0, &nccl));
    if (nccl) test_one_rank(MODEL_MLP, "cuda", nccl, false, -1), test_one_rank(MODEL_MLP, "cuda", nccl, true, -1);
    if (nccl) test_one_rank(MODEL_LENET, "cuda", nccl, false, -1);
    kiln_dist_close(nccl);
  } else {
    test_no_nccl();
  }
  TEST_MAIN_END();
}
