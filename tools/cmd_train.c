/*
 * kiln train — trains the MLP (784-128-10) or LeNet (cnn_train_b32) on Fashion-MNIST
 * through the compiler: one program computes loss, gradients (kiln_graph_grad) and the
 * optimizer update (kiln_graph_sgd / kiln_graph_adam) per step, with parameters and
 * optimizer state updated in place by the backend.
 *
 * The training set lives in that program (train_net_build_resident): normalised images,
 * one-hot labels, the epoch's shuffle order, a step counter and the per-step losses are
 * params, each step gathers its batch on the device and records its loss there, so a step
 * is a run that moves nothing between host and device, and 25 steps are one
 * kiln_program_run_times (the host waits once for them). Per epoch the host
 * writes the new order and resets the counter (kiln_program_write_param), and after the
 * epoch reads the losses back once. --host-batches keeps the old way (a batch filled on the
 * host and uploaded, the loss downloaded, every step), to compare against.
 *
 * After each epoch the parameters are copied into an inference program that keeps the test
 * set the same way and counts right answers on the device (train_net_build_eval), compiled
 * once. Progress (step, samples/s, then the epoch's loss) goes to stderr; the loss curve
 * optionally to an SVG file.
 *
 * --gpus N (data parallel, cuda): one process a GPU. The process started from the command line
 * makes the communicator's id (NCCL's, kiln_dist_id_new), starts N copies of itself with
 * --rank r, $KILN_CUDA_DEVICE=r and the id in $KILN_DIST_ID, and waits for them. Each keeps the
 * whole training set and shuffles it with the same seed; step s of an epoch gives rank r the
 * images idx[(s N + r) B ..][0 .. B), so the N ranks together take the N B images one process
 * would take at --batch N B, in the same order, and the averaged gradients make the same step up
 * to the order of f32 sums. Rank 0 alone prints and tests.
 */
#include "tools.h"
#include "train.h"

#include <limits.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

extern char **environ;

#define DATA_DIR "/usr/share/datasets/fashion-mnist"
/* Fashion-MNIST training-set pixel mean and standard deviation (of p/255) */
#define PIX_MEAN 0.2860f
#define PIX_STD 0.3530f

enum { MAX_GPUS = 64 };

typedef struct Args {
  const char *model, *backend, *plot, *data, *optim, *precision, *losses;
  int epochs, batch, eval_batch, limit;
  int gpus, rank;               /* data parallel: processes, and this one's rank (-1: the one started by hand) */
  kiln_dist *dist;              /* the rank's communicator */
  bool host_batches;
  double lr, momentum;
  uint64_t seed;
} Args;

static const char usage[] =
    "usage: kiln train --model mlp|lenet [--epochs N] [--backend B] [--batch 32] [--optim sgd|adam]\n"
    "                  [--lr 0.01] [--momentum 0.9] [--plot FILE.svg] [--data DIR] [--limit N] [--seed S]\n"
    "                  [--host-batches] [--precision f32|bf16|f16] [--gpus N] [--losses FILE]\n"
    "  trains on Fashion-MNIST (IDX files in DIR, default " DATA_DIR ");\n"
    "  the training and test sets stay on the backend's device: each step gathers its batch there\n"
    "  and keeps its loss there (no host<->device copy per step; the losses are read once an epoch)\n"
    "  --host-batches fills each batch on the host and copies it in, and the loss out, every step\n"
    "  (the old way, to compare against)\n"
    "  --limit uses only the first N training and test images (quick runs on the ref backend)\n"
    "  --precision bf16: mixed precision, each contraction (forward and backward) on bf16 copies of its\n"
    "  operands with an f32 result; weights, optimizer state, loss and updates stay f32; f16 the same\n"
    "  with the loss scaled dynamically inside the step (an overflowing step is skipped)\n"
    "  --gpus N: data parallel on N GPUs (cuda, NCCL), one process a GPU, --batch images each; the\n"
    "  gradients are averaged over the GPUs, so the steps are those of one GPU at --batch N x B\n"
    "  (--rank R is how the processes it starts learn their rank)\n"
    "  --losses FILE: each step's loss, one a line (data parallel: the mean over the GPUs)\n"
    "  exit status: 0 trained, 1 training failed, 2 a usage error\n";

/* The arguments into *a: true when there is something to train, else false with the exit status in *rc. */
static bool parse_args(int argc, char **argv, Args *a, int *rc) {
  *a = (Args){.epochs = 1, .batch = 32, .eval_batch = 500, .lr = -1, .momentum = 0.9, .data = DATA_DIR,
              .optim = "sgd", .precision = "f32", .seed = 1, .gpus = 1, .rank = -1};
  Cli c = cli_start("train", argc, argv);
  while (cli_next(&c))
    if (!cli_choice(&c, "--model", (const char *const[]){ "mlp", "lenet", NULL }, &a->model) &&
        !cli_int(&c, "--epochs", 1, 1000000, &a->epochs) && !cli_str(&c, "--backend", "B", &a->backend) &&
        !cli_int(&c, "--batch", 1, 1000000, &a->batch) && !cli_real(&c, "--lr", false, &a->lr) &&
        !cli_real(&c, "--momentum", true, &a->momentum) &&
        !cli_choice(&c, "--optim", (const char *const[]){ "sgd", "adam", NULL }, &a->optim) &&
        !cli_str(&c, "--plot", "FILE.svg", &a->plot) && !cli_str(&c, "--losses", "FILE", &a->losses) && !cli_str(&c, "--data", "DIR", &a->data) &&
        !cli_int(&c, "--limit", 0, INT_MAX, &a->limit) && !cli_u64(&c, "--seed", &a->seed) &&
        !cli_flag(&c, "--host-batches", &a->host_batches) &&
        !cli_choice(&c, "--precision", (const char *const[]){ "f32", "bf16", "f16", NULL }, &a->precision) &&
        !cli_int(&c, "--gpus", 1, MAX_GPUS, &a->gpus) && !cli_int(&c, "--rank", 0, MAX_GPUS - 1, &a->rank))
      cli_unknown(&c);
  const char *backend = a->backend ? a->backend : getenv("KILN_BACKEND");
  if (!c.bad && !c.help && !a->model) cli_error(&c, "--model is required (mlp or lenet)");
  if (!c.bad && !c.help && a->gpus > 1 && (!backend || strcmp(backend, "cuda")))
    cli_error(&c, "--gpus %d needs --backend cuda (NCCL averages the gradients)", a->gpus);
  if (!c.bad && !c.help && a->gpus > 1 && a->host_batches) cli_error(&c, "--gpus keeps the data on the GPUs: no --host-batches");
  if (!c.bad && !c.help && a->rank >= a->gpus) cli_error(&c, "--rank %d is not one of --gpus %d", a->rank, a->gpus);
  if (c.bad || c.help) return *rc = cli_usage(&c, usage), false;
  if (a->lr < 0) a->lr = strcmp(a->optim, "adam") ? 0.01 : 0.001;
  train_set_precision(!strcmp(a->precision, "bf16") ? KILN_BF16 : !strcmp(a->precision, "f16") ? KILN_F16 : KILN_F32);
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

/* The first n images of d, normalised as fill_batch does (so accuracy is the same as with
 * host batches), and their one-hot labels: a data set for a program to keep. The arrays are
 * the caller's to free (train_data_free) once a graph has copied them. */
static int train_data_make(const Dataset *d, int n, TrainData *out) {
  *out = (TrainData){.n = n};
  if (d->rows * d->cols != 784) {
    fprintf(stderr, "kiln train: images are %dx%d, the models take 28x28\n", d->rows, d->cols);
    return 1;
  }
  float *x = (size_t)n <= SIZE_MAX / (sizeof(float) * 784) ? malloc(sizeof(float) * 784 * (size_t)n) : NULL;
  float *y = (size_t)n <= SIZE_MAX / (sizeof(float) * 10) ? malloc(sizeof(float) * 10 * (size_t)n) : NULL;
  if (!x || !y) {
    free(x), free(y);
    fprintf(stderr, "kiln train: out of memory for %d images\n", n);
    return 1;
  }
  for (int i = 0; i < n; i++) fill_batch(d, &i, 1, 1, x + (size_t)i * 784, y + (size_t)i * 10);
  out->images = x, out->labels = y;
  return 0;
}

static void train_data_free(TrainData *t) {
  free((void *)t->images), free((void *)t->labels);
  t->images = t->labels = NULL;
}

/* loss < 0: not known yet (resident steps keep it on the device until the epoch ends). */
static void progress(int epoch, int epochs, int step, int steps, double loss, double rate) {
  char bar[31], lossbuf[32] = "";
  int fill = (int)(30.0 * step / steps);
  for (int i = 0; i < 30; i++) bar[i] = i < fill ? '=' : i == fill ? '>' : ' ';
  bar[30] = 0;
  if (loss >= 0) snprintf(lossbuf, sizeof lossbuf, "  loss %.4f", loss);
  fprintf(stderr, "\repoch %d/%d [%s] step %d/%d%s  %.0f samples/s ", epoch, epochs, bar, step, steps, lossbuf, rate);
  fflush(stderr);
}

static kiln_options train_options(const Args *a) {
  kiln_options o = kiln_options_default();
  if (a->backend) o.backend = a->backend;
  o.dist = a->dist;
  return o;
}

/* The process started by hand under --gpus N: the communicator's id, then N ranks of this
 * program on GPUs 0 .. N-1, waited for; the first to fail stops the others (they would wait for
 * it in NCCL for ever). NVLink multicast stays off (NCCL_NVLS_ENABLE=0): the device notes say a
 * program that uses it can take the host's GPUs out of service. */
static int launch_ranks(int argc, char **argv, const Args *a) {
  kiln_dist_id id;
  char text[KILN_DIST_ID_TEXT], rank[16], device[16];
  kiln_status s = kiln_dist_id_new(&id);
  if (!s) s = kiln_dist_id_format(&id, text, sizeof text);
  if (s) return fail("making the communicator's id", s);
  /* argv[0] is the command ("train"): kiln train ARGS --rank r */
  char **args = calloc((size_t)argc + 4, sizeof *args);
  if (!args) return fprintf(stderr, "kiln train: out of memory\n"), 1;
  args[0] = "kiln";
  for (int i = 0; i < argc; i++) args[1 + i] = argv[i];
  args[argc + 1] = "--rank", args[argc + 2] = rank;
  setenv("KILN_DIST_ID", text, 1);
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  pid_t pid[MAX_GPUS];
  int started = 0, rc = 0;
  for (; started < a->gpus; started++) {
    snprintf(rank, sizeof rank, "%d", started), snprintf(device, sizeof device, "%d", started);
    setenv("KILN_CUDA_DEVICE", device, 1);
    int e = posix_spawn(&pid[started], "/proc/self/exe", NULL, NULL, args, environ);
    if (e) {
      fprintf(stderr, "kiln train: cannot start rank %d: %s\n", started, strerror(e));
      rc = 1;
      break;
    }
  }
  free(args);
  for (int r = 0; rc && r < started; r++) kill(pid[r], SIGTERM);  /* they would wait for the missing rank */
  for (int left = started; left > 0; left--) {
    int status = 0;
    pid_t done = waitpid(-1, &status, 0);
    if (done < 0) break;
    bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    for (int r = 0; r < started; r++)
      if (pid[r] == done) {
        pid[r] = 0;
        if (!ok) fprintf(stderr, "kiln train: rank %d %s %d\n", r, WIFEXITED(status) ? "exited with" : "was stopped by signal",
                         WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
      }
    if (!ok && !rc)
      for (int r = 0; r < started; r++)
        if (pid[r] > 0) kill(pid[r], SIGTERM);
    if (!ok) rc = 1;
  }
  return rc;
}

/* A rank started by launch_ranks: its communicator, from the id in $KILN_DIST_ID. */
static int open_rank(Args *a) {
  const char *text = getenv("KILN_DIST_ID");
  kiln_dist_id id;
  if (!text) return fprintf(stderr, "kiln train: --rank is set by --gpus, which puts the communicator's id in KILN_DIST_ID\n"), 1;
  kiln_status s = kiln_dist_id_parse(text, &id);
  if (!s) s = kiln_dist_open(&id, a->gpus, a->rank, &a->dist);
  if (s) return fail("joining the communicator", s);
  train_set_data_parallel(1);
  return 0;
}

/* The test program: the test set resident, right answers counted on the device. */
typedef struct Eval {
  TrainNet net;        /* its graph is freed once compiled; the tensor ids stay */
  kiln_program *prog;
  int n;               /* test images */
} Eval;

static int eval_create(const Args *a, ModelKind m, const Dataset *test, Eval *ev) {
  *ev = (Eval){.n = a->limit && a->limit < test->n ? a->limit : test->n};
  TrainData td;
  if (ev->n < 1) return fprintf(stderr, "kiln train: no test images\n"), 1;
  if (train_data_make(test, ev->n, &td)) return 1;
  kiln_status s = train_net_build_eval(m, a->eval_batch < ev->n ? a->eval_batch : ev->n, &td, &ev->net);
  train_data_free(&td);
  if (s) return fail("building the test net", s);
  kiln_options o = train_options(a);
  s = kiln_program_compile(ev->net.g, &o, &ev->prog);
  train_net_free(&ev->net);  /* the program has its own copy of everything */
  return s ? fail("compiling the test net", s) : 0;
}

static void eval_free(Eval *ev) {
  kiln_program_free(ev->prog);
  train_net_free(&ev->net);
}

/* Test accuracy of the parameters now in prog: they are copied into the test program (read
 * and written once an epoch, not per batch), which then runs over the test set. */
static int evaluate(kiln_program *prog, const TrainNet *tn, Eval *ev, double *accuracy) {
  kiln_status s = KILN_OK;
  for (int i = 0; i < tn->n_params && !s; i++) {
    float *v = malloc(sizeof(float) * (size_t)tn->param_numel[i]);
    s = v ? kiln_program_read_param(prog, tn->params[i], v) : KILN_ERR_NO_MEMORY;
    if (!s) s = kiln_program_write_param(ev->prog, ev->net.params[i], v);
    free(v);
  }
  if (s) return fprintf(stderr, "kiln train: copying the parameters to the test net: %s: %s\n", kiln_status_name(s),
                        s == KILN_ERR_NO_MEMORY ? "out of memory" : kiln_last_error()), 1;
  int64_t zero = 0, correct = 0;
  s = kiln_program_write_param(ev->prog, ev->net.step, &zero);
  if (!s) s = kiln_program_write_param(ev->prog, ev->net.correct, &zero);
  for (int r = 0; r < ev->net.steps && !s; r++) s = kiln_program_run(ev->prog, NULL, NULL);
  if (!s) s = kiln_program_read_param(ev->prog, ev->net.correct, &correct);
  if (s) return fail("testing", s);
  *accuracy = 100.0 * (double)correct / ev->n;
  return 0;
}

static void shuffle(int *idx, int n, uint64_t *s) {
  for (int i = n - 1; i > 0; i--) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    int j = (int)((*s >> 33) % (uint64_t)(i + 1)), t = idx[i];
    idx[i] = idx[j], idx[j] = t;
  }
}

/* Builds and compiles the training step: loss output, gradient and update assigns; with d
 * the batch comes from d kept in the program, else from two inputs. The graph is freed once
 * compiled (the program keeps its own copy, the data set included); tn keeps the ids. */
static int build_step(const Args *a, ModelKind m, const TrainData *d, TrainNet *tn, kiln_program **prog) {
  kiln_status s = d ? train_net_build_resident(m, a->batch, d, a->seed, tn)
                    : train_net_build(m, a->batch, NULL, a->seed, 1, tn);
  if (!s) s = kiln_graph_output(tn->g, tn->loss, "loss");
  bool adam = !strcmp(a->optim, "adam");
  if (!s && adam) s = kiln_graph_adam(tn->g, tn->loss, tn->n_params, tn->params, a->lr, 0.9, 0.999, 1e-8, NULL);
  else if (!s) s = kiln_graph_sgd(tn->g, tn->loss, tn->n_params, tn->params, a->lr, a->momentum, NULL);
  if (s) return fail("building the training step", s);
  kiln_options o = train_options(a);
  double t0 = now();
  s = kiln_program_compile(tn->g, &o, prog);
  kiln_graph_free(tn->g);
  tn->g = NULL;
  if (s) return fail("compiling the training step", s);
  fprintf(stderr, "kiln train: %s, batch %d, %s lr %g", a->model, a->batch, a->optim, a->lr);
  if (!adam) fprintf(stderr, " momentum %g", a->momentum);
  if (strcmp(a->precision, "f32")) fprintf(stderr, ", %s contractions%s", a->precision, strcmp(a->precision, "f16") ? "" : " (loss scaled)");
  fprintf(stderr, " on %s", o.backend ? o.backend : "cpu");
  if (a->gpus > 1) fprintf(stderr, " x %d GPUs (data parallel, gradients averaged by NCCL; %d images a step)", a->gpus,
                           a->gpus * a->batch);
  fprintf(stderr, "; step compiled in %.2f s; ", now() - t0);
  if (d)  /* f32 pixels and one-hot labels */
    fprintf(stderr, "%lld training images resident (%.0f MB)\n", (long long)d->n, (double)d->n * (784 + 10) * 4 / 1e6);
  else fprintf(stderr, "host batches\n");
  return 0;
}

static void print_census(kiln_program *p) {
  kiln_census c;
  if (kiln_program_census(p, &c)) return;
  fprintf(stderr, "kiln train: per step %lld kernels, %lld host fallbacks%s%s, %.1f MB read, %.1f MB written, "
          "%lld+%lld host<->device copies\n", (long long)c.kernels_launched, (long long)c.host_fallbacks,
          c.host_fallbacks ? ": " : "", c.host_fallbacks ? c.fallback_ops : "", c.bytes_read / 1e6,
          c.bytes_written / 1e6, (long long)c.h2d_copies, (long long)c.d2h_copies);
}

/* One epoch's steps in the order idx, losses into curve, their mean into *mean. Resident:
 * the order and a reset counter go in, steps run with nothing crossing, the losses come
 * back once at the end. */
static int train_epoch(const Args *a, const Dataset *train, kiln_program *prog, const TrainNet *tn, const int *idx,
                       int n, int e, float *x, float *y, int64_t *perm, float *curve, double *mean) {
  int world = a->gpus, rank = a->rank < 0 ? 0 : a->rank, steps = n / (a->batch * world);
  int64_t images = (int64_t)a->batch * world;  /* a step's, over all ranks */
  double t0 = now(), sum = 0;
  kiln_status st = KILN_OK;
  int64_t zero = 0;
  /* this rank's share of each step: images idx[(s world + rank) B ..][0 .. B) */
  for (int i = 0; perm && i < n; i++) perm[i] = 0;
  for (int s = 0; perm && s < steps; s++)
    for (int i = 0; i < a->batch; i++) perm[(size_t)s * a->batch + i] = idx[((size_t)s * world + rank) * a->batch + i];
  if (perm && !(st = kiln_program_write_param(prog, tn->perm, perm))) st = kiln_program_write_param(prog, tn->step, &zero);
  if (st) return fail("writing the epoch's order", st);
  /* resident: up to the next progress line (every 25 steps) in one kiln_program_run_times, so
   * the host waits once per 25 steps, not once a step (the first step alone: its census) */
  for (int s = 0, n = 1; s < steps; s += n) {
    n = perm && !(e == 1 && s == 0) ? 25 - s % 25 : 1;
    if (n > steps - s) n = steps - s;
    if (perm) st = kiln_program_run_times(prog, n);
    else {
      fill_batch(train, idx + (size_t)s * a->batch, a->batch, a->batch, x, y);
      st = kiln_program_run(prog, (const void *[]){x, y}, (void *[]){&curve[s]});
      sum += curve[s];
    }
    if (st) return fail("training step", st);
    if (e == 1 && s == 0 && rank == 0) print_census(prog);
    int done = s + n;
    if (rank == 0 && (done % 25 == 0 || done == steps))
      progress(e, a->epochs, done, steps, perm ? -1 : sum / done, (double)done * images / (now() - t0));
  }
  if (perm) {  /* the losses param holds more steps than an epoch of several ranks takes */
    float *all = malloc(sizeof(float) * (size_t)(n / a->batch));
    if (!all) return fprintf(stderr, "kiln train: out of memory\n"), 1;
    if ((st = kiln_program_read_param(prog, tn->losses, all))) return free(all), fail("reading the epoch's losses", st);
    memcpy(curve, all, sizeof(float) * (size_t)steps);
    free(all);
    for (int s = 0; s < steps; s++) sum += curve[s];
    if (rank == 0) progress(e, a->epochs, steps, steps, sum / steps, (double)steps * images / (now() - t0));
  }
  *mean = sum / steps;
  return 0;
}

int cmd_train(int argc, char **argv) {
  Args a;
  int rc = 1;
  if (!parse_args(argc, argv, &a, &rc)) return rc;
  if (a.gpus > 1 && a.rank < 0) return launch_ranks(argc, argv, &a);
  if (a.rank >= 0 && a.gpus > 1 && open_rank(&a)) return 1;
  ModelKind m = (ModelKind)train_model_kind(a.model);
  char p1[1024], p2[1024];
  Dataset train = {0}, test = {0};
  snprintf(p1, sizeof p1, "%s/train-images-idx3-ubyte.gz", a.data);
  snprintf(p2, sizeof p2, "%s/train-labels-idx1-ubyte.gz", a.data);
  if (dataset_load(p1, p2, &train)) return 1;
  snprintf(p1, sizeof p1, "%s/t10k-images-idx3-ubyte.gz", a.data);
  snprintf(p2, sizeof p2, "%s/t10k-labels-idx1-ubyte.gz", a.data);
  if (dataset_load(p1, p2, &test)) return dataset_free(&train), 1;
  int n = a.limit && a.limit < train.n ? a.limit : train.n, steps = n / (a.batch * a.gpus);
  bool lead = a.rank <= 0;  /* rank 0 (or the only process) prints and tests */
  TrainNet tn = {0};
  TrainData td = {0};
  Eval ev = {0};
  kiln_program *prog = NULL;
  int *idx = malloc(sizeof(int) * (size_t)train.n);
  float *x = malloc(sizeof(float) * (size_t)a.batch * 784), *y = malloc(sizeof(float) * (size_t)a.batch * 10);
  float *curve = malloc(sizeof(float) * (size_t)(steps ? steps : 1) * (size_t)a.epochs);
  int64_t *perm = a.host_batches ? NULL : malloc(sizeof(int64_t) * (size_t)(n ? n : 1));
  if (!idx || !x || !y || !curve || (!a.host_batches && !perm) || steps < 1) {
    fprintf(stderr, "kiln train: %s\n", steps < 1 ? "fewer images than one step's batches" : "out of memory");
    goto out;
  }
  if (!a.host_batches && train_data_make(&train, n, &td)) goto out;
  int built = build_step(&a, m, a.host_batches ? NULL : &td, &tn, &prog);
  train_data_free(&td);  /* the program has its own copy */
  if (built || (lead && eval_create(&a, m, &test, &ev))) goto out;
  for (int i = 0; i < train.n; i++) idx[i] = i;
  uint64_t rng = a.seed;
  for (int e = 1; e <= a.epochs; e++) {
    shuffle(idx, n, &rng);
    double t0 = now(), loss, acc;
    if (train_epoch(&a, &train, prog, &tn, idx, n, e, x, y, perm, curve + (size_t)(e - 1) * steps, &loss)) goto out;
    double train_s = now() - t0;
    if (!lead) continue;
    fputc('\n', stderr);
    if (evaluate(prog, &tn, &ev, &acc)) goto out;
    printf("epoch %d: train loss %.4f, test accuracy %.2f%%, %.1f s (train %.2f s, %.0f samples/s", e, loss, acc,
           now() - t0, train_s, (double)steps * a.batch * a.gpus / train_s);
    if (a.gpus > 1) printf(", %.0f a GPU", (double)steps * a.batch / train_s);
    printf(")\n");
    fflush(stdout);
  }
  if (a.losses && lead) {
    FILE *f = fopen(a.losses, "w");
    for (int s = 0; f && s < steps * a.epochs; s++) fprintf(f, "%.9g\n", curve[s]);
    if (!f || fclose(f)) fprintf(stderr, "kiln train: cannot write %s\n", a.losses);
  }
  if (a.plot && lead) {
    char title[160];
    snprintf(title, sizeof title, "kiln train: %s, %s, batch %d, %d epoch(s)", m == MODEL_MLP ? "mlp" : "lenet",
             strcmp(a.optim, "adam") ? "sgd" : "adam", a.batch, a.epochs);
    if (plot_loss_svg(a.plot, curve, steps * a.epochs, title)) fprintf(stderr, "kiln train: cannot write %s\n", a.plot);
    else fprintf(stderr, "kiln train: loss curve written to %s\n", a.plot);
  }
  rc = 0;
out:
  free(idx), free(x), free(y), free(curve), free(perm);
  train_data_free(&td);
  eval_free(&ev);
  kiln_program_free(prog);
  kiln_dist_close(a.dist);  /* after the program compiled with it */
  train_net_free(&tn);
  dataset_free(&train), dataset_free(&test);
  return rc;
}
