/*
 * kiln train — trains the MLP (784-128-10) or LeNet (cnn_train_b32) on Fashion-MNIST
 * through the compiler: one program computes loss, gradients (kiln_graph_grad) and the
 * optimizer update (kiln_graph_sgd / kiln_graph_adam) per step, with parameters and
 * optimizer state updated in place by the backend. After each epoch the parameters are
 * read back into an inference net that measures test accuracy. Progress (step, loss,
 * samples/s) goes to stderr; the loss curve optionally to an SVG file.
 */
#include "tools.h"
#include "train.h"

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DATA_DIR "/usr/share/datasets/fashion-mnist"
/* Fashion-MNIST training-set pixel mean and standard deviation (of p/255) */
#define PIX_MEAN 0.2860f
#define PIX_STD 0.3530f

typedef struct Args {
  const char *model, *backend, *plot, *data, *optim;
  int epochs, batch, eval_batch, limit;
  double lr, momentum;
  uint64_t seed;
} Args;

static const char usage[] =
    "usage: kiln train --model mlp|lenet [--epochs N] [--backend B] [--batch 32] [--optim sgd|adam]\n"
    "                  [--lr 0.01] [--momentum 0.9] [--plot FILE.svg] [--data DIR] [--limit N] [--seed S]\n"
    "  trains on Fashion-MNIST (IDX files in DIR, default " DATA_DIR ");\n"
    "  --limit uses only the first N training and test images (quick runs on the ref backend)\n"
    "  exit status: 0 trained, 1 training failed, 2 a usage error\n";

/* The arguments into *a: true when there is something to train, else false with the exit status in *rc. */
static bool parse_args(int argc, char **argv, Args *a, int *rc) {
  *a = (Args){.epochs = 1, .batch = 32, .eval_batch = 500, .lr = -1, .momentum = 0.9, .data = DATA_DIR,
              .optim = "sgd", .seed = 1};
  Cli c = cli_start("train", argc, argv);
  while (cli_next(&c))
    if (!cli_choice(&c, "--model", (const char *const[]){ "mlp", "lenet", NULL }, &a->model) &&
        !cli_int(&c, "--epochs", 1, 1000000, &a->epochs) && !cli_str(&c, "--backend", "B", &a->backend) &&
        !cli_int(&c, "--batch", 1, 1000000, &a->batch) && !cli_real(&c, "--lr", false, &a->lr) &&
        !cli_real(&c, "--momentum", true, &a->momentum) &&
        !cli_choice(&c, "--optim", (const char *const[]){ "sgd", "adam", NULL }, &a->optim) &&
        !cli_str(&c, "--plot", "FILE.svg", &a->plot) && !cli_str(&c, "--data", "DIR", &a->data) &&
        !cli_int(&c, "--limit", 0, INT_MAX, &a->limit) && !cli_u64(&c, "--seed", &a->seed))
      cli_unknown(&c);
  if (!c.bad && !c.help && !a->model) cli_error(&c, "--model is required (mlp or lenet)");
  if (c.bad || c.help) return *rc = cli_usage(&c, usage), false;
  if (a->lr < 0) a->lr = strcmp(a->optim, "adam") ? 0.01 : 0.001;
  return true;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int fail(const char *what, kiln_status s) {
  fprintf(stderr, "kiln train: %s: %s: %s\n", what, kiln_status_name(s), kiln_last_error());
  return 1;
}

/* Images idx[0..n) of d into x (normalised f32) and, if y, one-hot labels. */
static void fill_batch(const Dataset *d, const int *idx, int n, int batch, float *x, float *y) {
  int px = d->rows * d->cols;
  memset(x, 0, sizeof(float) * (size_t)batch * (size_t)px);
  if (y) memset(y, 0, sizeof(float) * (size_t)batch * 10);
  for (int b = 0; b < n; b++) {
    const uint8_t *img = d->images + (size_t)idx[b] * (size_t)px;
    for (int p = 0; p < px; p++) x[(size_t)b * px + p] = ((float)img[p] / 255.0f - PIX_MEAN) / PIX_STD;
    if (y) y[b * 10 + d->labels[idx[b]]] = 1;
  }
}

static void progress(int epoch, int epochs, int step, int steps, double loss, double rate) {
  char bar[31];
  int fill = (int)(30.0 * step / steps);
  for (int i = 0; i < 30; i++) bar[i] = i < fill ? '=' : i == fill ? '>' : ' ';
  bar[30] = 0;
  fprintf(stderr, "\repoch %d/%d [%s] step %d/%d  loss %.4f  %.0f samples/s ", epoch, epochs, bar, step, steps,
          loss, rate);
  fflush(stderr);
}

/* Test accuracy of the parameters now in prog, through an inference net of eval batch size. */
static int evaluate(const Args *a, ModelKind m, kiln_program *prog, const TrainNet *tn, const Dataset *test,
                    double *accuracy) {
  float *vals[TRAIN_MAX_PARAMS] = {0};
  int rc = 1;
  kiln_status s = KILN_OK;
  for (int i = 0; i < tn->n_params && !s; i++) {
    vals[i] = malloc(sizeof(float) * (size_t)tn->param_numel[i]);
    s = vals[i] ? kiln_program_read_param(prog, tn->params[i], vals[i]) : KILN_ERR_NO_MEMORY;
  }
  TrainNet en = {0};
  kiln_program *ep = NULL;
  int eb = a->eval_batch, n = a->limit && a->limit < test->n ? a->limit : test->n;
  float *x = malloc(sizeof(float) * (size_t)eb * 784), *logits = malloc(sizeof(float) * (size_t)eb * 10);
  int *idx = malloc(sizeof(int) * (size_t)eb);
  if (s) { fail("reading parameters", s); goto out; }
  if (!x || !logits || !idx) { fprintf(stderr, "kiln train: out of memory\n"); goto out; }
  s = train_net_build(m, eb, (const float *const *)vals, 0, 0, &en);
  if (!s) s = kiln_graph_output(en.g, en.logits, "logits");
  if (s) { fail("building the test net", s); goto out; }
  kiln_options o = kiln_options_default();
  if (a->backend) o.backend = a->backend;
  if ((s = kiln_program_compile(en.g, &o, &ep))) { fail("compiling the test net", s); goto out; }
  int correct = 0;
  for (int start = 0; start < n; start += eb) {
    int cnt = n - start < eb ? n - start : eb;
    for (int b = 0; b < cnt; b++) idx[b] = start + b;
    fill_batch(test, idx, cnt, eb, x, NULL);
    if ((s = kiln_program_run(ep, (const void *[]){x}, (void *[]){logits}))) { fail("testing", s); goto out; }
    for (int b = 0; b < cnt; b++) {
      int best = 0;
      for (int c = 1; c < 10; c++) if (logits[b * 10 + c] > logits[b * 10 + best]) best = c;
      correct += best == test->labels[start + b];
    }
  }
  *accuracy = 100.0 * correct / n;
  rc = 0;
out:
  for (int i = 0; i < TRAIN_MAX_PARAMS; i++) free(vals[i]);
  free(x), free(logits), free(idx);
  kiln_program_free(ep);
  train_net_free(&en);
  return rc;
}

static void shuffle(int *idx, int n, uint64_t *s) {
  for (int i = n - 1; i > 0; i--) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    int j = (int)((*s >> 33) % (uint64_t)(i + 1)), t = idx[i];
    idx[i] = idx[j], idx[j] = t;
  }
}

/* Builds and compiles the training step: loss output, gradient and update assigns. */
static int build_step(const Args *a, ModelKind m, TrainNet *tn, kiln_program **prog) {
  kiln_status s = train_net_build(m, a->batch, NULL, a->seed, 1, tn);
  if (!s) s = kiln_graph_output(tn->g, tn->loss, "loss");
  bool adam = !strcmp(a->optim, "adam");
  if (!s && adam) s = kiln_graph_adam(tn->g, tn->loss, tn->n_params, tn->params, a->lr, 0.9, 0.999, 1e-8, NULL);
  else if (!s) s = kiln_graph_sgd(tn->g, tn->loss, tn->n_params, tn->params, a->lr, a->momentum, NULL);
  if (s) return fail("building the training step", s);
  kiln_options o = kiln_options_default();
  if (a->backend) o.backend = a->backend;
  double t0 = now();
  if ((s = kiln_program_compile(tn->g, &o, prog))) return fail("compiling the training step", s);
  fprintf(stderr, "kiln train: %s, batch %d, %s lr %g", a->model, a->batch, a->optim, a->lr);
  if (!adam) fprintf(stderr, " momentum %g", a->momentum);
  fprintf(stderr, " on %s; step compiled in %.2f s\n", o.backend ? o.backend : "?", now() - t0);
  return 0;
}

static void print_census(kiln_program *p) {
  kiln_census c;
  if (kiln_program_census(p, &c)) return;
  fprintf(stderr, "kiln train: per step %lld kernels, %lld host fallbacks%s%s, %.1f MB read, %.1f MB written\n",
          (long long)c.kernels_launched, (long long)c.host_fallbacks, c.host_fallbacks ? ": " : "",
          c.host_fallbacks ? c.fallback_ops : "", c.bytes_read / 1e6, c.bytes_written / 1e6);
}

int cmd_train(int argc, char **argv) {
  Args a;
  int rc = 1;
  if (!parse_args(argc, argv, &a, &rc)) return rc;
  ModelKind m = (ModelKind)train_model_kind(a.model);
  char p1[1024], p2[1024];
  Dataset train = {0}, test = {0};
  snprintf(p1, sizeof p1, "%s/train-images-idx3-ubyte.gz", a.data);
  snprintf(p2, sizeof p2, "%s/train-labels-idx1-ubyte.gz", a.data);
  if (dataset_load(p1, p2, &train)) return 1;
  snprintf(p1, sizeof p1, "%s/t10k-images-idx3-ubyte.gz", a.data);
  snprintf(p2, sizeof p2, "%s/t10k-labels-idx1-ubyte.gz", a.data);
  if (dataset_load(p1, p2, &test)) return dataset_free(&train), 1;
  int n = a.limit && a.limit < train.n ? a.limit : train.n, steps = n / a.batch;
  TrainNet tn = {0};
  kiln_program *prog = NULL;
  int *idx = malloc(sizeof(int) * (size_t)train.n);
  float *x = malloc(sizeof(float) * (size_t)a.batch * 784), *y = malloc(sizeof(float) * (size_t)a.batch * 10);
  float *curve = malloc(sizeof(float) * (size_t)(steps ? steps : 1) * (size_t)a.epochs);
  if (!idx || !x || !y || !curve || steps < 1) {
    fprintf(stderr, "kiln train: %s\n", steps < 1 ? "fewer images than one batch" : "out of memory");
    goto out;
  }
  if (build_step(&a, m, &tn, &prog)) goto out;
  for (int i = 0; i < train.n; i++) idx[i] = i;
  uint64_t rng = a.seed;
  for (int e = 1; e <= a.epochs; e++) {
    shuffle(idx, n, &rng);
    double t0 = now(), sum = 0;
    for (int s = 0; s < steps; s++) {
      fill_batch(&train, idx + (size_t)s * a.batch, a.batch, a.batch, x, y);
      float loss;
      kiln_status st = kiln_program_run(prog, (const void *[]){x, y}, (void *[]){&loss});
      if (st) { fail("training step", st); goto out; }
      curve[(e - 1) * steps + s] = loss;
      sum += loss;
      if (e == 1 && s == 0) print_census(prog);
      if (s % 25 == 24 || s == steps - 1)
        progress(e, a.epochs, s + 1, steps, sum / (s + 1), (double)(s + 1) * a.batch / (now() - t0));
    }
    double train_s = now() - t0, acc;
    fputc('\n', stderr);
    if (evaluate(&a, m, prog, &tn, &test, &acc)) goto out;
    printf("epoch %d: train loss %.4f, test accuracy %.2f%%, %.1f s (train %.1f s, %.0f samples/s)\n", e,
           sum / steps, acc, now() - t0, train_s, (double)steps * a.batch / train_s);
    fflush(stdout);
  }
  if (a.plot) {
    char title[160];
    snprintf(title, sizeof title, "kiln train: %s, %s, batch %d, %d epoch(s)", m == MODEL_MLP ? "mlp" : "lenet",
             strcmp(a.optim, "adam") ? "sgd" : "adam", a.batch, a.epochs);
    if (plot_loss_svg(a.plot, curve, steps * a.epochs, title)) fprintf(stderr, "kiln train: cannot write %s\n", a.plot);
    else fprintf(stderr, "kiln train: loss curve written to %s\n", a.plot);
  }
  rc = 0;
out:
  free(idx), free(x), free(y), free(curve);
  kiln_program_free(prog);
  train_net_free(&tn);
  dataset_free(&train), dataset_free(&test);
  return rc;
}
