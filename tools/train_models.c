/*
 * The two models of kiln train, built through the public API only:
 *   mlp    x [B,784] -> dense 128 relu -> dense 10
 *   lenet  x [B,1,28,28] -> conv3x3(1->16, pad 1)+bias, relu, maxpool 2 -> conv3x3(16->32, pad 1)
 *          +bias, relu, maxpool 2 -> flatten 1568 -> dense 128 relu -> dense 10
 *          (cnn_train_b32 of ../shared/bench/WORKLOADS.md)
 * and, for training, the mean softmax cross-entropy against one-hot labels. Parameters are
 * either given or drawn like PyTorch's defaults, uniform(+-1/sqrt(fan_in)), from a
 * 64-bit LCG, so a run is reproducible. The batch is either two graph inputs or, in the
 * resident variant, gathered inside the program from a data set it keeps as params, at a
 * step counter it keeps and moves on itself, so a training run moves nothing between host
 * and device.
 */
#include "train.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct Shape { int rank; int64_t d[4]; int64_t fan_in; } Shape;

static const Shape MLP_PARAMS[] = {
  {2, {784, 128}, 784}, {1, {128}, 784}, {2, {128, 10}, 128}, {1, {10}, 128},
};
static const Shape LENET_PARAMS[] = {
  {4, {16, 1, 3, 3}, 9}, {1, {16}, 9}, {4, {32, 16, 3, 3}, 144}, {1, {32}, 144},
  {2, {1568, 128}, 1568}, {1, {128}, 1568}, {2, {128, 10}, 128}, {1, {10}, 128},
};
static const char *const MLP_NAMES[] = {"w1", "b1", "w2", "b2"};
static const char *const LENET_NAMES[] = {"conv1.w", "conv1.b", "conv2.w", "conv2.b", "fc1.w", "fc1.b",
                                          "fc2.w", "fc2.b"};

int train_model_kind(const char *name) {
  if (!strcmp(name, "mlp")) return MODEL_MLP;
  if (!strcmp(name, "lenet")) return MODEL_LENET;
  return -1;
}

static double lcg_uniform(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(*s >> 11) / 9007199254740992.0;
}

static kiln_status add_params(TrainNet *net, const Shape *sh, const char *const *names, int n,
                              const float *const *init, uint64_t seed) {
  net->n_params = n;
  for (int i = 0; i < n; i++) {
    int64_t numel = 1;
    for (int r = 0; r < sh[i].rank; r++) numel *= sh[i].d[r];
    net->param_numel[i] = numel;
    float *v = NULL;
    const float *data = init ? init[i] : NULL;
    if (!data) {
      v = malloc(sizeof(float) * (size_t)numel);
      if (!v) return KILN_ERR_NO_MEMORY;
      double bound = 1 / sqrt((double)sh[i].fan_in);
      for (int64_t j = 0; j < numel; j++) v[j] = (float)((2 * lcg_uniform(&seed) - 1) * bound);
      data = v;
    }
    kiln_status s = kiln_graph_param(net->g, names[i], KILN_F32, sh[i].rank, sh[i].d, data, &net->params[i]);
    free(v);
    if (s) return s;
  }
  return KILN_OK;
}

static kiln_status dense(kiln_graph *g, kiln_tensor x, kiln_tensor w, kiln_tensor b, int relu, kiln_tensor *y) {
  kiln_tensor m, a;
  kiln_status s = kiln_graph_matmul(g, x, w, &m);
  if (!s) s = kiln_graph_binary(g, KILN_ADD, m, b, &a);
  if (s) return s;
  if (!relu) return *y = a, KILN_OK;
  return kiln_graph_unary(g, KILN_RELU, a, y);
}

/* conv3x3 pad 1 + bias, relu, maxpool 2 */
static kiln_status conv_block(kiln_graph *g, kiln_tensor x, kiln_tensor w, kiln_tensor b, kiln_tensor *y) {
  kiln_conv_params cp = {.spatial = 2, .pads = {1, 1, 1, 1}};
  kiln_pool_params pp = {.spatial = 2, .kernel = {2, 2}, .strides = {2, 2}};
  kiln_tensor c, r;
  kiln_status s = kiln_graph_conv(g, x, w, b, &cp, &c);
  if (!s) s = kiln_graph_unary(g, KILN_RELU, c, &r);
  return s ? s : kiln_graph_pool(g, KILN_POOL_MAX, r, &pp, y);
}

static kiln_status forward(ModelKind m, TrainNet *net, int batch) {
  kiln_graph *g = net->g;
  const kiln_tensor *p = net->params;
  kiln_tensor h, h2, f;
  kiln_status s;
  if (m == MODEL_MLP) {
    s = dense(g, net->x, p[0], p[1], 1, &h);
    return s ? s : dense(g, h, p[2], p[3], 0, &net->logits);
  }
  s = conv_block(g, net->x, p[0], p[1], &h);
  if (!s) s = conv_block(g, h, p[2], p[3], &h2);
  if (!s) s = kiln_graph_reshape(g, h2, 2, (const int64_t[]){batch, 1568}, &f);
  if (!s) s = dense(g, f, p[4], p[5], 1, &h);
  return s ? s : dense(g, h, p[6], p[7], 0, &net->logits);
}

/* loss = -(1/B) sum(y * log_softmax(logits)) */
static kiln_status cross_entropy(TrainNet *net, int batch) {
  kiln_graph *g = net->g;
  kiln_tensor ls, py, s, k;
  kiln_status st = kiln_graph_log_softmax(g, net->logits, -1, &ls);
  if (!st) st = kiln_graph_binary(g, KILN_MUL, ls, net->y, &py);
  if (!st) st = kiln_graph_reduce(g, KILN_REDUCE_SUM, py, 0, NULL, 0, &s);
  if (!st) st = kiln_graph_scalar(g, KILN_F32, -1.0 / batch, &k);
  return st ? st : kiln_graph_binary(g, KILN_MUL, s, k, &net->loss);
}

/* n elements of size bytes each, or NULL when that overflows or memory is short. */
static void *alloc_array(int64_t n, size_t size) {
  if (n < 0 || (uint64_t)n > SIZE_MAX / size) return NULL;
  return malloc((size_t)(n ? n : 1) * size);
}

/* A constant i64 vector 0, 1, ..., n-1. */
static kiln_status arange(kiln_graph *g, int64_t n, kiln_tensor *out) {
  int64_t *v = alloc_array(n, sizeof *v);
  if (!v) return KILN_ERR_NO_MEMORY;
  for (int64_t i = 0; i < n; i++) v[i] = i;
  kiln_status s = kiln_graph_const(g, KILN_I64, 1, &n, v, out);
  free(v);
  return s;
}

/* The data set as params, and the batch of this step gathered from them on the device:
 * x = images[perm[p]], y = labels[perm[p]] for p = step*B + b, b < B (Gather with indices
 * computed in the graph lowers to an injective expression, so it fuses into its readers).
 * p is clamped to the last image: an evaluation's last batch may run past the end (its
 * caller masks those rows with *pos, the unclamped p); training's never does. */
static kiln_status resident_batch(ModelKind m, TrainNet *net, const TrainData *d, int batch, kiln_tensor *pos) {
  kiln_graph *g = net->g;
  int64_t n = d->n, is[2] = {n, 784}, ls[2] = {n, 10}, zero = 0;
  int64_t *identity = alloc_array(n, sizeof *identity);  /* the order until an epoch writes its own */
  if (!identity) return KILN_ERR_NO_MEMORY;
  for (int64_t i = 0; i < n; i++) identity[i] = i;
  kiln_tensor b, start, offsets, last, in_range, idx, x;
  kiln_status s = kiln_graph_param(g, "data.images", KILN_F32, 2, is, d->images, &net->images);
  if (!s) s = kiln_graph_param(g, "data.labels", KILN_F32, 2, ls, d->labels, &net->labels);
  if (!s) s = kiln_graph_param(g, "data.perm", KILN_I64, 1, &n, identity, &net->perm);
  if (!s) s = kiln_graph_param(g, "data.step", KILN_I64, 0, NULL, &zero, &net->step);
  free(identity);
  if (!s) s = kiln_graph_scalar(g, KILN_I64, batch, &b);
  if (!s) s = kiln_graph_binary(g, KILN_MUL, net->step, b, &start);
  if (!s) s = arange(g, batch, &offsets);
  if (!s) s = kiln_graph_binary(g, KILN_ADD, start, offsets, pos);
  if (!s) s = kiln_graph_scalar(g, KILN_I64, (double)(n - 1), &last);
  if (!s) s = kiln_graph_binary(g, KILN_MIN, *pos, last, &in_range);
  if (!s) s = kiln_graph_gather(g, net->perm, in_range, 0, &idx);
  if (!s) s = kiln_graph_gather(g, net->images, idx, 0, &x);
  if (!s) s = kiln_graph_gather(g, net->labels, idx, 0, &net->y);
  if (s) return s;
  if (m == MODEL_MLP) return net->x = x, KILN_OK;
  return kiln_graph_reshape(g, x, 4, (const int64_t[]){batch, 1, 28, 28}, &net->x);
}

/* step <- step + 1 after each run, so the next run takes the next batch. */
static kiln_status advance(TrainNet *net) {
  kiln_tensor one, next;
  kiln_status s = kiln_graph_scalar(net->g, KILN_I64, 1, &one);
  if (!s) s = kiln_graph_binary(net->g, KILN_ADD, net->step, one, &next);
  return s ? s : kiln_graph_assign(net->g, net->step, next);
}

/* correct <- correct + the batch's right answers (argmax of logits equals argmax of the
 * one-hot label; ties go to the first class, as a host loop with > would pick), counting
 * only rows pos < n. */
static kiln_status count_correct(TrainNet *net, kiln_tensor pos, int64_t n) {
  kiln_graph *g = net->g;
  int64_t zero = 0;
  kiln_tensor pred, truth, same, end, valid, hit, hits, total, sum;
  kiln_status s = kiln_graph_param(g, "data.correct", KILN_I64, 0, NULL, &zero, &net->correct);
  if (!s) s = kiln_graph_argmax(g, net->logits, 1, 0, 0, &pred);
  if (!s) s = kiln_graph_argmax(g, net->y, 1, 0, 0, &truth);
  if (!s) s = kiln_graph_binary(g, KILN_EQ, pred, truth, &same);
  if (!s) s = kiln_graph_scalar(g, KILN_I64, (double)n, &end);
  if (!s) s = kiln_graph_binary(g, KILN_LT, pos, end, &valid);
  if (!s) s = kiln_graph_binary(g, KILN_AND, same, valid, &hit);
  if (!s) s = kiln_graph_cast(g, hit, KILN_I64, &hits);
  if (!s) s = kiln_graph_reduce(g, KILN_REDUCE_SUM, hits, 0, NULL, 0, &total);
  if (!s) s = kiln_graph_binary(g, KILN_ADD, net->correct, total, &sum);
  if (!s) s = kiln_graph_assign(g, net->correct, sum);
  return s ? s : advance(net);
}

static kiln_dtype train_precision = KILN_F32;
static int train_parallel;

void train_set_precision(kiln_dtype t) { train_precision = t; }
void train_set_data_parallel(int on) { train_parallel = on; }

/* losses[step] <- loss (data parallel: its mean over the ranks, the loss of the whole step),
 * step <- step + 1, after each run: the loss never has to leave the device during an epoch, and
 * the next run gathers the next batch. */
static kiln_status record_loss(TrainNet *net) {
  kiln_graph *g = net->g;
  int64_t steps = net->steps;
  kiln_tensor loss = net->loss;
  if (train_parallel) {
    kiln_status s = kiln_graph_all_reduce_mean(g, net->loss, &loss);
    if (s) return s;
  }
  float *zeros = alloc_array(steps, sizeof *zeros);
  if (!zeros) return KILN_ERR_NO_MEMORY;
  memset(zeros, 0, sizeof *zeros * (size_t)steps);
  kiln_tensor ar, here, kept;
  kiln_status s = kiln_graph_param(g, "data.losses", KILN_F32, 1, &steps, zeros, &net->losses);
  free(zeros);
  if (!s) s = arange(g, steps, &ar);
  if (!s) s = kiln_graph_binary(g, KILN_EQ, ar, net->step, &here);
  if (!s) s = kiln_graph_where(g, here, loss, net->losses, &kept);
  if (!s) s = kiln_graph_assign(g, net->losses, kept);
  return s ? s : advance(net);
}

/* What a net ends in: logits only, the training loss, or (resident) the count of right answers. */
typedef enum { HEAD_LOGITS, HEAD_LOSS, HEAD_CORRECT } Head;

/* train_net_build, or with d a resident variant of steps batches: the batch comes from d,
 * not inputs. */
static kiln_status build(ModelKind m, int batch, const float *const *init, uint64_t seed, Head head,
                         const TrainData *d, int steps, TrainNet *net) {
  memset(net, 0, sizeof *net);
  net->loss = net->images = net->labels = net->perm = net->step = net->losses = net->correct = -1;
  net->steps = steps;
  kiln_status s = kiln_graph_create(&net->g);
  if (!s) s = kiln_graph_set_autocast(net->g, train_precision);
  if (!s && head == HEAD_LOSS) s = kiln_graph_set_data_parallel(net->g, train_parallel);
  if (s) return s;
  int64_t xs_mlp[2] = {batch, 784}, xs_cnn[4] = {batch, 1, 28, 28}, ys[2] = {batch, 10};
  kiln_tensor pos = -1;
  if (d) s = resident_batch(m, net, d, batch, &pos);
  else s = m == MODEL_MLP ? kiln_graph_input(net->g, "x", KILN_F32, 2, xs_mlp, &net->x)
                          : kiln_graph_input(net->g, "x", KILN_F32, 4, xs_cnn, &net->x);
  if (!s && head == HEAD_LOSS && !d) s = kiln_graph_input(net->g, "y", KILN_F32, 2, ys, &net->y);
  if (!s) s = m == MODEL_MLP ? add_params(net, MLP_PARAMS, MLP_NAMES, 4, init, seed)
                             : add_params(net, LENET_PARAMS, LENET_NAMES, 8, init, seed);
  if (!s) s = forward(m, net, batch);
  if (!s && head == HEAD_LOSS) s = cross_entropy(net, batch);
  if (!s && head == HEAD_LOSS && d) s = record_loss(net);
  if (!s && head == HEAD_CORRECT) s = count_correct(net, pos, d->n);
  if (s) train_net_free(net);
  return s;
}

kiln_status train_net_build(ModelKind m, int batch, const float *const *init, uint64_t seed, int with_loss,
                            TrainNet *net) {
  return build(m, batch, init, seed, with_loss ? HEAD_LOSS : HEAD_LOGITS, NULL, 0, net);
}

kiln_status train_net_build_resident(ModelKind m, int batch, const TrainData *d, uint64_t seed, TrainNet *net) {
  if (batch < 1 || !d || d->n < batch || d->n / batch > INT32_MAX) {  /* see train.h */
    memset(net, 0, sizeof *net);
    return KILN_ERR_INVALID_ARG;
  }
  /* training leaves out the last partial batch of each epoch's order */
  return build(m, batch, NULL, seed, HEAD_LOSS, d, (int)(d->n / batch), net);
}

kiln_status train_net_build_eval(ModelKind m, int batch, const TrainData *d, TrainNet *net) {
  if (batch < 1 || !d || d->n < 1 || d->n / batch >= INT32_MAX) {  /* see train.h */
    memset(net, 0, sizeof *net);
    return KILN_ERR_INVALID_ARG;
  }
  return build(m, batch, NULL, 0, HEAD_CORRECT, d, (int)((d->n + batch - 1) / batch), net);
}

void train_net_free(TrainNet *net) {
  kiln_graph_free(net->g);
  net->g = NULL;
}
