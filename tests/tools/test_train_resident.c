/*
 * kiln train's resident training step (train_net_build_resident) against the host-batch
 * step it replaces, on cpu, for both models, with a small synthetic data set (class
 * prototypes plus noise, not Fashion-MNIST). Over a few epochs, each with its own shuffle
 * written into the program (kiln_program_write_param) and the step counter reset:
 *  - every resident step runs with no host fallbacks and no host<->device copies (census),
 *  - the losses the program records in its resident array equal the host path's outputs,
 *  - the parameters after every epoch equal the host path's (1e-6 relative to each tensor's
 *    largest element: the plans differ, so sums may round differently in the last place),
 *  - the loss goes down,
 * and the resident test program (train_net_build_eval) counts as many right answers as the
 * host-batch inference net does with the same parameters, a partial last batch included.
 */
#include "test.h"

#include "../../tools/train_models.c"

#include <stdbool.h>

#define N_IMAGES 60  /* not a multiple of BATCH: each epoch leaves out 4, as kiln train does */
#define EVAL_BATCH 16  /* nor of EVAL_BATCH: the last test batch is partial */
#define BATCH 8
#define EPOCHS 3

static unsigned long long seed = 99;

/* Image i is its class's prototype plus noise; labels one-hot. */
static void make_data(float *images, float *labels, int *cls) {
  float proto[10][784];
  for (int c = 0; c < 10; c++)
    for (int p = 0; p < 784; p++) proto[c][p] = (float)test_rand(&seed);
  memset(labels, 0, sizeof(float) * N_IMAGES * 10);
  for (int i = 0; i < N_IMAGES; i++) {
    cls[i] = (int)((test_rand(&seed) + 1) * 5) % 10;
    labels[i * 10 + cls[i]] = 1;
    for (int p = 0; p < 784; p++) images[i * 784 + p] = proto[cls[i]][p] + 0.5f * (float)test_rand(&seed);
  }
}

static void shuffle(int64_t *perm, int n) {
  for (int i = n - 1; i > 0; i--) {
    int j = (int)((test_rand(&seed) + 1) * 0.5 * (i + 1)) % (i + 1);
    int64_t t = perm[i];
    perm[i] = perm[j], perm[j] = t;
  }
}

/* The training step as kiln train builds it: loss output, SGD with momentum. */
static kiln_program *compile_step(TrainNet *net) {
  kiln_program *p = NULL;
  OK(kiln_graph_output(net->g, net->loss, "loss"));
  OK(kiln_graph_sgd(net->g, net->loss, net->n_params, net->params, 0.05, 0.9, NULL));
  kiln_options o = kiln_options_default();
  o.backend = "cpu";
  OK(kiln_program_compile(net->g, &o, &p));
  return p;
}

/* Largest max|a - b| / max|b| over the params of both programs, per tensor: the two plans
 * differ (the gathered batch fuses into its readers), so sums may round differently in the
 * last place, which an element near zero would blow up as an element-wise relative error. */
static double params_differ(kiln_program *a, const TrainNet *na, kiln_program *b, const TrainNet *nb) {
  double worst = 0;
  for (int i = 0; i < na->n_params; i++) {
    size_t n = (size_t)na->param_numel[i];
    float *va = malloc(sizeof(float) * n), *vb = malloc(sizeof(float) * n);
    if (!va || !vb) { free(va), free(vb); return INFINITY; }
    OK(kiln_program_read_param(a, na->params[i], va));
    OK(kiln_program_read_param(b, nb->params[i], vb));
    double diff = 0, size = 0;
    for (size_t k = 0; k < n; k++) diff = fmax(diff, fabs((double)va[k] - vb[k])), size = fmax(size, fabs(vb[k]));
    worst = fmax(worst, size > 0 ? diff / size : diff);
    free(va), free(vb);
  }
  return worst;
}

/* Right answers of the host-batch inference net with the parameters of prog. */
static int64_t host_correct(ModelKind m, kiln_program *prog, const TrainNet *tn, const float *images,
                            const float *labels) {
  float *vals[TRAIN_MAX_PARAMS] = {0}, x[EVAL_BATCH * 784], logits[EVAL_BATCH * 10];
  for (int i = 0; i < tn->n_params; i++) {
    vals[i] = malloc(sizeof(float) * (size_t)tn->param_numel[i]);
    if (vals[i]) OK(kiln_program_read_param(prog, tn->params[i], vals[i]));
  }
  TrainNet en;
  kiln_program *ep = NULL;
  int64_t correct = 0;
  OK(train_net_build(m, EVAL_BATCH, (const float *const *)vals, 0, 0, &en));
  OK(kiln_graph_output(en.g, en.logits, "logits"));
  kiln_options o = kiln_options_default();
  o.backend = "cpu";
  OK(kiln_program_compile(en.g, &o, &ep));
  for (int start = 0; ep && start < N_IMAGES; start += EVAL_BATCH) {
    int cnt = N_IMAGES - start < EVAL_BATCH ? N_IMAGES - start : EVAL_BATCH;
    memset(x, 0, sizeof x);
    memcpy(x, images + start * 784, sizeof(float) * 784 * (size_t)cnt);
    OK(kiln_program_run(ep, (const void *[]){x}, (void *[]){logits}));
    for (int b = 0; b < cnt; b++) {
      int best = 0, truth = 0;
      for (int c = 1; c < 10; c++) best = logits[b * 10 + c] > logits[b * 10 + best] ? c : best;
      for (int c = 1; c < 10; c++) truth = labels[(start + b) * 10 + c] > 0 ? c : truth;
      correct += best == truth;
    }
  }
  kiln_program_free(ep);
  train_net_free(&en);
  for (int i = 0; i < TRAIN_MAX_PARAMS; i++) free(vals[i]);
  return correct;
}

/* The resident test program, given the trained parameters, twice (the counters reset). */
static void check_eval(ModelKind m, const char *name, kiln_program *prog, const TrainNet *tn, const float *images,
                       const float *labels) {
  TrainData d = {.n = N_IMAGES, .images = images, .labels = labels};
  TrainNet en;
  kiln_program *ep = NULL;
  OK(train_net_build_eval(m, EVAL_BATCH, &d, &en));
  CHECK(en.steps == (N_IMAGES + EVAL_BATCH - 1) / EVAL_BATCH);
  kiln_options o = kiln_options_default();
  o.backend = "cpu";
  OK(kiln_program_compile(en.g, &o, &ep));
  int64_t want = host_correct(m, prog, tn, images, labels);
  for (int i = 0; ep && i < tn->n_params; i++) {
    float *v = malloc(sizeof(float) * (size_t)tn->param_numel[i]);
    if (!v) continue;
    OK(kiln_program_read_param(prog, tn->params[i], v));
    OK(kiln_program_write_param(ep, en.params[i], v));
    free(v);
  }
  for (int pass = 0; ep && pass < 2; pass++) {
    int64_t zero = 0, got = -1;
    OK(kiln_program_write_param(ep, en.step, &zero));
    OK(kiln_program_write_param(ep, en.correct, &zero));
    for (int r = 0; r < en.steps; r++) OK(kiln_program_run(ep, NULL, NULL));
    kiln_census c;
    OK(kiln_program_census(ep, &c));
    CHECK_MSG(c.host_fallbacks == 0 && c.h2d_copies == 0 && c.d2h_copies == 0,
              "%s eval: %lld host fallbacks, %lld h2d, %lld d2h copies", name, (long long)c.host_fallbacks,
              (long long)c.h2d_copies, (long long)c.d2h_copies);
    OK(kiln_program_read_param(ep, en.correct, &got));
    CHECK_MSG(got == want, "%s eval pass %d: %lld right on the device, %lld with host batches", name, pass,
              (long long)got, (long long)want);
    if (pass == 0) fprintf(stderr, "%s eval: %lld of %d right\n", name, (long long)got, N_IMAGES);
  }
  kiln_program_free(ep);
  train_net_free(&en);
}

static void test_model(ModelKind m, const char *name, const float *images, const float *labels) {
  TrainData d = {.n = N_IMAGES, .images = images, .labels = labels};
  TrainNet rn, hn;
  OK(train_net_build_resident(m, BATCH, &d, 5, &rn));
  OK(train_net_build(m, BATCH, NULL, 5, 1, &hn));
  CHECK(rn.steps == N_IMAGES / BATCH);
  int in_count = -1;
  OK(kiln_graph_input_count(rn.g, &in_count));
  CHECK_MSG(in_count == 0, "%s: the resident step has %d graph inputs", name, in_count);
  kiln_program *rp = compile_step(&rn), *hp = compile_step(&hn);
  if (!rp || !hp) goto out;
  int steps = rn.steps;
  int64_t perm[N_IMAGES];
  float losses[N_IMAGES / BATCH], host_losses[N_IMAGES / BATCH], x[BATCH * 784], y[BATCH * 10];
  double first_epoch = 0, last_epoch = 0;
  for (int i = 0; i < N_IMAGES; i++) perm[i] = i;
  for (int e = 0; e < EPOCHS; e++) {
    shuffle(perm, N_IMAGES);
    int64_t zero = 0;
    OK(kiln_program_write_param(rp, rn.perm, perm));
    OK(kiln_program_write_param(rp, rn.step, &zero));
    /* the last epoch's resident steps as two kiln_program_run_times: the same losses and
     * parameters as step by step with host batches, the census one run's */
    bool chunked = e == EPOCHS - 1;
    if (chunked) {
      kiln_census c0, c1;
      OK(kiln_program_census(rp, &c0));
      OK(kiln_program_run_times(rp, steps / 2));
      OK(kiln_program_run_times(rp, steps - steps / 2));
      OK(kiln_program_census(rp, &c1));
      CHECK_MSG(c1.runs == c0.runs + steps, "%s: %lld runs counted for %d", name, (long long)(c1.runs - c0.runs), steps);
      CHECK(c1.host_fallbacks == 0 && c1.h2d_copies == 0 && c1.d2h_copies == 0 &&
            c1.kernels_launched == c0.kernels_launched);
    }
    for (int s = 0; s < steps; s++) {
      kiln_census c;
      if (!chunked) OK(kiln_program_run(rp, NULL, NULL));
      OK(kiln_program_census(rp, &c));
      CHECK_MSG(c.host_fallbacks == 0, "%s: %lld host fallbacks (%s)", name, (long long)c.host_fallbacks,
                c.fallback_ops);
      CHECK_MSG(c.h2d_copies == 0 && c.d2h_copies == 0 && c.h2d_bytes == 0 && c.d2h_bytes == 0,
                "%s step %d: %lld h2d copies, %lld d2h copies", name, s, (long long)c.h2d_copies,
                (long long)c.d2h_copies);
      for (int b = 0; b < BATCH; b++) {  /* the old way: the same batch filled on the host */
        memcpy(x + b * 784, images + perm[s * BATCH + b] * 784, sizeof(float) * 784);
        memcpy(y + b * 10, labels + perm[s * BATCH + b] * 10, sizeof(float) * 10);
      }
      OK(kiln_program_run(hp, (const void *[]){x, y}, (void *[]){&host_losses[s]}));
    }
    int64_t at = -1;
    OK(kiln_program_read_param(rp, rn.losses, losses));
    OK(kiln_program_read_param(rp, rn.step, &at));
    CHECK_MSG(at == steps, "%s: step counter %lld after an epoch of %d steps", name, (long long)at, steps);
    double sum = 0;
    for (int s = 0; s < steps; s++) {
      sum += losses[s];
      /* relative, but not below 1e-7 absolute: a loss near 0 (-log p, p near 1) carries the
       * logits' f32 rounding as an absolute error, which differing plans (register tiles on
       * one side, dot-product loops on the other) give in the last places */
      CHECK_MSG(fabs(losses[s] - host_losses[s]) <= 1e-6 * fmax(fabs(host_losses[s]), 0.1),
                "%s epoch %d step %d: resident loss %.9g, host batches %.9g", name, e, s, losses[s], host_losses[s]);
    }
    if (e == 0) first_epoch = sum / steps;
    last_epoch = sum / steps;
    double worst = params_differ(rp, &rn, hp, &hn);
    CHECK_MSG(worst <= 1e-6, "%s epoch %d: resident and host-batch parameters differ by %g (relative)", name, e, worst);
    fprintf(stderr, "%s epoch %d: mean loss %.4f, parameters differ by %g (relative)\n", name, e, sum / steps, worst);
  }
  /* bytes moved (the census after a run): the resident step gathers its batch, so it reads the
   * batch's images and labels (and the order), not the whole set it keeps; the host-batch step
   * reads the same batch from its inputs. Counting the set would add N_IMAGES - BATCH images a
   * step. (LeNet's count stays looser: conv1's weight gradient reduces over the batch and the
   * pixels as one var, so the bound takes every image the order may name.) */
  if (m == MODEL_MLP) {
    kiln_census cr, ch;
    OK(kiln_program_census(rp, &cr));
    OK(kiln_program_census(hp, &ch));
    int64_t set = (int64_t)N_IMAGES * (784 + 10) * 4, extra = cr.bytes_read - ch.bytes_read;
    CHECK_MSG(extra < set / 2, "%s: the resident step reads %lld B, the host-batch one %lld B (the set is %lld B)", name,
              (long long)cr.bytes_read, (long long)ch.bytes_read, (long long)set);
  }
  /* run_times refuses no runs, and a program with an input never set (the host-batch step) */
  FAILS(KILN_ERR_INVALID_ARG, kiln_program_run_times(rp, 0));
  FAILS(KILN_ERR_INVALID_ARG, kiln_program_run_times(hp, 3));
  CHECK_MSG(strstr(kiln_last_error(), "input 0") && strstr(kiln_last_error(), "never set"), "%s", kiln_last_error());
  CHECK_MSG(last_epoch < 0.9 * first_epoch, "%s: mean loss %g in the last epoch, %g in the first", name, last_epoch,
            first_epoch);
  check_eval(m, name, rp, &rn, images, labels);
out:
  kiln_program_free(rp);
  kiln_program_free(hp);
  train_net_free(&rn);
  train_net_free(&hn);
}

int main(void) {
  if (!test_backend_present("cpu")) {
    fprintf(stderr, "train_resident: cpu backend absent, skipped\n");
    return 0;
  }
  static float images[N_IMAGES * 784], labels[N_IMAGES * 10];
  int cls[N_IMAGES];
  make_data(images, labels, cls);
  test_model(MODEL_MLP, "mlp", images, labels);
  test_model(MODEL_LENET, "lenet", images, labels);
  TrainData tiny = {.n = BATCH - 1, .images = images, .labels = labels};
  TrainNet net;
  CHECK(train_net_build_resident(MODEL_MLP, BATCH, &tiny, 5, &net) == KILN_ERR_INVALID_ARG && !net.g);
  TEST_MAIN_END();
}
