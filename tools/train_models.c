/*
 * The two models of kiln train, built through the public API only:
 *   mlp    x [B,784] -> dense 128 relu -> dense 10
 *   lenet  x [B,1,28,28] -> conv3x3(1->16, pad 1)+bias, relu, maxpool 2 -> conv3x3(16->32, pad 1)
 *          +bias, relu, maxpool 2 -> flatten 1568 -> dense 128 relu -> dense 10
 *          (cnn_train_b32 of ../shared/bench/WORKLOADS.md)
 * and, for training, the mean softmax cross-entropy against one-hot labels. Parameters are
 * either given or drawn like PyTorch's defaults, uniform(+-1/sqrt(fan_in)), from a
 * 64-bit LCG, so a run is reproducible.
 */
#include "train.h"

#include <math.h>
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

kiln_status train_net_build(ModelKind m, int batch, const float *const *init, uint64_t seed, int with_loss,
                            TrainNet *net) {
  memset(net, 0, sizeof *net);
  net->loss = -1;
  kiln_status s = kiln_graph_create(&net->g);
  if (s) return s;
  int64_t xs_mlp[2] = {batch, 784}, xs_cnn[4] = {batch, 1, 28, 28}, ys[2] = {batch, 10};
  s = m == MODEL_MLP ? kiln_graph_input(net->g, "x", KILN_F32, 2, xs_mlp, &net->x)
                     : kiln_graph_input(net->g, "x", KILN_F32, 4, xs_cnn, &net->x);
  if (!s && with_loss) s = kiln_graph_input(net->g, "y", KILN_F32, 2, ys, &net->y);
  if (!s) s = m == MODEL_MLP ? add_params(net, MLP_PARAMS, MLP_NAMES, 4, init, seed)
                             : add_params(net, LENET_PARAMS, LENET_NAMES, 8, init, seed);
  if (!s) s = forward(m, net, batch);
  if (!s && with_loss) s = cross_entropy(net, batch);
  if (s) train_net_free(net);
  return s;
}

void train_net_free(TrainNet *net) {
  kiln_graph_free(net->g);
  net->g = NULL;
}
