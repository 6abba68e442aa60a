/*
 * optim — training-step builders. Takes a graph with a scalar loss and the parameters to
 * train; appends their gradients (graph_grad), optimizer state as zero-initialised
 * parameters, the update arithmetic, and one assign per parameter and per state tensor.
 * The program compiled from the graph then computes loss, gradients and update in one
 * schedule, and the backend applies the assigns after each run, so parameters and state
 * are updated in place where they live (on the device for device backends).
 *
 * The update rules follow PyTorch (torch.optim.SGD without dampening or weight decay,
 * torch.optim.Adam without amsgrad), so a step matches it bit for bit up to rounding:
 *   sgd   v <- momentum v + g;  p <- p - lr v           (momentum 0: p <- p - lr g, no state)
 *   adam  t <- t + 1;  m <- b1 m + (1-b1) g;  v <- b2 v + (1-b2) g^2
 *         p <- p - (lr / (1 - b1^t)) m / (sqrt(v) / sqrt(1 - b2^t) + eps)
 *
 * Under f16 autocast (kiln_graph_set_autocast) the step scales its loss dynamically, as
 * torch.cuda.amp.GradScaler does with its defaults, inside the same schedule: the gradients are
 * taken of loss * S and divided by S; if any is inf or NaN the step is skipped (every assign
 * keeps its old value, Adam's step count too) and S halves, else after 2000 clean steps in a row
 * S doubles. S starts at 2^16 and is the f32 param "loss_scale", its clean-step count
 * "loss_scale.good".
 */
#include "graph.h"

#include <string.h>

/* Builder state: after the first failure every helper returns -1 (as in autodiff.c). */
typedef struct Opt {
  Graph *g;
  kiln_status st;
} Opt;

static int node2(Opt *o, OpKind op, int x, int y) {
  if (o->st != KILN_OK || x < 0 || y < 0) return -1;
  Attr at = {0};
  int in[2] = {x, y}, out = -1;
  o->st = graph_add(o->g, op, 2, in, &at, &out);
  return o->st == KILN_OK ? out : -1;
}

static int node1(Opt *o, OpKind op, int x) {
  if (o->st != KILN_OK || x < 0) return -1;
  Attr at = {0};
  int out = -1;
  o->st = graph_add(o->g, op, 1, &x, &at, &out);
  return o->st == KILN_OK ? out : -1;
}

/* A rank-0 leaf of kind (a constant, or a param named name) holding v in dtype t. */
static int scalar_leaf(Opt *o, TensorKind kind, const char *name, kiln_dtype t, double v) {
  if (o->st != KILN_OK) return -1;
  unsigned char buf[8];
  int64_t none[1] = {1};
  int out = -1;
  dtype_store_f64(t, buf, 0, v);
  o->st = graph_leaf(o->g, kind, name, t, 0, none, buf, &out);
  return o->st == KILN_OK ? out : -1;
}

static int scalar(Opt *o, kiln_dtype t, double v) { return scalar_leaf(o, T_CONST, NULL, t, v); }

static int mulc(Opt *o, int x, double c) {
  return x < 0 ? -1 : node2(o, OP_MUL, x, scalar(o, o->g->tensors[x].dtype, c));
}

/* A zero-filled parameter shaped like tensor like, named "<like>.<suffix>". */
static int zeros_param(Opt *o, int like, const char *suffix) {
  if (o->st != KILN_OK) return -1;
  Tensor t = o->g->tensors[like];
  int64_t bytes;
  if (!size_mul(t.numel, (int64_t)kiln_dtype_size(t.dtype), &bytes)) {
    o->st = kiln_fail(KILN_ERR_NO_MEMORY, "optimizer state for '%s' overflows", t.name);
    return -1;
  }
  void *zero = kiln_calloc((size_t)(bytes ? bytes : 1), 1);
  StrBuf name = {0};
  sb_printf(&name, "%s.%s", t.name, suffix);
  int out = -1;
  if (!zero || name.failed)
    o->st = kiln_fail(KILN_ERR_NO_MEMORY, "out of memory for optimizer state of '%s'", t.name);
  else
    o->st = graph_leaf(o->g, T_PARAM, name.s, t.dtype, t.rank, t.shape, zero, &out);
  kiln_free(zero);
  sb_free(&name);
  return o->st == KILN_OK ? out : -1;
}

static void assign(Opt *o, int param, int value) {
  if (o->st == KILN_OK && value >= 0) o->st = graph_assign(o->g, param, value);
}

/* The API's argument checks, shared by both optimizers. */
static kiln_status check_params(const Graph *g, int n, const kiln_tensor *params, const char *who) {
  if (n < 1 || !params) return kiln_fail(KILN_ERR_INVALID_ARG, "%s: need at least one parameter (n = %d)", who, n);
  for (int i = 0; i < n; i++) {
    if (params[i] < 0 || params[i] >= g->n_tensors)
      return kiln_fail(KILN_ERR_INVALID_ARG, "%s: params[%d] = %d is not a tensor of this graph", who, i, params[i]);
    const Tensor *t = &g->tensors[params[i]];
    if (t->kind != T_PARAM)
      return kiln_fail(KILN_ERR_INVALID_ARG, "%s: params[%d] '%s' is not a parameter", who, i, t->name);
    for (int j = 0; j < g->n_assigns; j++)
      if (g->assigns[j].param == params[i])
        return kiln_fail(KILN_ERR_INVALID_ARG, "%s: params[%d] '%s' is already assigned", who, i, t->name);
  }
  return KILN_OK;
}

enum { SCALE_GROWTH_STEPS = 2000 };  /* GradScaler's growth_interval */
#define SCALE_INIT 65536.0             /* and init_scale; growth 2, backoff 0.5 */

static int cast_to(Opt *o, int x, kiln_dtype t) {
  if (o->st != KILN_OK || x < 0) return -1;
  if (o->g->tensors[x].dtype == t) return x;
  Attr at = {0};
  at.to = t;
  int out = -1;
  o->st = graph_add(o->g, OP_CAST, 1, &x, &at, &out);
  return o->st == KILN_OK ? out : -1;
}

static int node3(Opt *o, OpKind op, int x, int y, int z) {
  if (o->st != KILN_OK || x < 0 || y < 0 || z < 0) return -1;
  Attr at = {0};
  int in[3] = {x, y, z}, out = -1;
  o->st = graph_add(o->g, op, 3, in, &at, &out);
  return o->st == KILN_OK ? out : -1;
}

/* The sum of every element of x as an f32 scalar. */
static int sum_all(Opt *o, int x) {
  if (o->st != KILN_OK || x < 0) return -1;
  kiln_tensor out = -1;
  o->st = kiln_graph_reduce((kiln_graph *)o->g, KILN_REDUCE_SUM, cast_to(o, x, KILN_F32), 0, NULL, 0, &out);
  return o->st == KILN_OK ? out : -1;
}

/* Data parallel: each gradient replaced by its mean over the ranks (the planner starts each
 * reduction as soon as its gradient exists, while the backward pass goes on). */
static void averaged(Opt *o, int n, int *grads) {
  for (int i = 0; o->g->data_parallel && o->st == KILN_OK && i < n; i++) grads[i] = node1(o, OP_ALL_REDUCE_MEAN, grads[i]);
}

/* Gradients of loss for params, into a fresh array (kiln_free it). Under f16 autocast, of loss
 * scaled dynamically: *finite (else -1) is the bool scalar "every gradient is finite", and the
 * scale's update is assigned here. */
static int *gradients(Opt *o, int loss, int n, const kiln_tensor *params, int *finite) {
  *finite = -1;
  int *grads = kiln_calloc((size_t)n, sizeof *grads);
  if (!grads) {
    o->st = kiln_fail(KILN_ERR_NO_MEMORY, "optimizer: out of memory");
    return NULL;
  }
  if (o->g->autocast != KILN_F16) {
    o->st = kiln_graph_grad((kiln_graph *)o->g, loss, n, params, grads);
    averaged(o, n, grads);
    return grads;
  }
  int scale = scalar_leaf(o, T_PARAM, "loss_scale", KILN_F32, SCALE_INIT);
  int good = scalar_leaf(o, T_PARAM, "loss_scale.good", KILN_F32, 0);
  int scaled = node2(o, OP_MUL, loss, cast_to(o, scale, o->g->tensors[loss].dtype));
  if (o->st == KILN_OK) o->st = kiln_graph_grad((kiln_graph *)o->g, scaled, n, params, grads);
  averaged(o, n, grads);  /* before the finite test, so that every rank skips the same steps */
  /* g * 0 is 0 for a finite g and NaN for inf or NaN: the sum over all of them equals itself
   * exactly when every gradient is finite */
  int bad = -1;
  for (int i = 0; o->st == KILN_OK && i < n; i++) {
    grads[i] = node2(o, OP_DIV, grads[i], cast_to(o, scale, o->g->tensors[grads[i]].dtype));
    int z = sum_all(o, mulc(o, grads[i], 0));
    bad = bad < 0 ? z : node2(o, OP_ADD, bad, z);
  }
  *finite = node2(o, OP_EQ, bad, bad);
  int good1 = node2(o, OP_ADD, good, scalar(o, KILN_F32, 1));
  int grow = node2(o, OP_GE, good1, scalar(o, KILN_F32, SCALE_GROWTH_STEPS));
  int zero = scalar(o, KILN_F32, 0);
  assign(o, scale, node3(o, OP_WHERE, *finite, node3(o, OP_WHERE, grow, mulc(o, scale, 2), scale), mulc(o, scale, 0.5)));
  assign(o, good, node3(o, OP_WHERE, *finite, node3(o, OP_WHERE, grow, zero, good1), zero));
  return grads;
}

/* value, or where a scaled step found a gradient not finite, old (the step skipped). */
static int unless_skipped(Opt *o, int finite, int value, int old) {
  return finite < 0 ? value : node3(o, OP_WHERE, finite, value, old);
}

/* On failure the graph is cut back to where it was (nodes, tensors, assigns). */
static kiln_status finish(Opt *o, int n_nodes, int n_tensors, int n_assigns) {
  if (o->st != KILN_OK) o->g->n_nodes = n_nodes, o->g->n_tensors = n_tensors, o->g->n_assigns = n_assigns;
  return o->st;
}

kiln_status kiln_graph_sgd(kiln_graph *kg, kiln_tensor loss, int n, const kiln_tensor *params, double lr,
                           double momentum, kiln_tensor *updated) {
  if (!kg) return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_graph_sgd: graph is NULL");
  Graph *g = &kg->g;
  kiln_status st = check_params(g, n, params, "kiln_graph_sgd");
  if (st != KILN_OK) return st;
  if (!(momentum >= 0 && momentum < 1))
    return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_graph_sgd: momentum %g is outside [0, 1)", momentum);
  Opt o = {.g = g};
  int n_nodes = g->n_nodes, n_tensors = g->n_tensors, n_assigns = g->n_assigns;
  int finite;
  int *grads = gradients(&o, loss, n, params, &finite);
  for (int i = 0; o.st == KILN_OK && i < n; i++) {
    int step = grads[i];
    if (momentum > 0) {  /* v <- momentum v + g */
      int v = zeros_param(&o, params[i], "momentum");
      step = node2(&o, OP_ADD, mulc(&o, v, momentum), grads[i]);
      assign(&o, v, unless_skipped(&o, finite, step, v));
    }
    int p = unless_skipped(&o, finite, node2(&o, OP_SUB, params[i], mulc(&o, step, lr)), params[i]);
    assign(&o, params[i], p);
    if (updated) updated[i] = p;
  }
  kiln_free(grads);
  return finish(&o, n_nodes, n_tensors, n_assigns);
}

kiln_status kiln_graph_adam(kiln_graph *kg, kiln_tensor loss, int n, const kiln_tensor *params, double lr,
                            double beta1, double beta2, double eps, kiln_tensor *updated) {
  if (!kg) return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_graph_adam: graph is NULL");
  Graph *g = &kg->g;
  kiln_status st = check_params(g, n, params, "kiln_graph_adam");
  if (st != KILN_OK) return st;
  if (!(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1 && eps >= 0))
    return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_graph_adam: need 0 <= beta1, beta2 < 1 and eps >= 0 (got %g, %g, %g)",
                     beta1, beta2, eps);
  Opt o = {.g = g};
  int n_nodes = g->n_nodes, n_tensors = g->n_tensors, n_assigns = g->n_assigns;
  int finite;
  int *grads = gradients(&o, loss, n, params, &finite);
  /* one step counter for all parameters, in the first parameter's dtype */
  kiln_dtype ct = g->tensors[params[0]].dtype;
  int counter = scalar_leaf(&o, T_PARAM, "adam.step", ct, 0);
  int t = node2(&o, OP_ADD, counter, scalar(&o, ct, 1));
  assign(&o, counter, unless_skipped(&o, finite, t, counter));
  for (int i = 0; o.st == KILN_OK && i < n; i++) {
    int p = params[i], gi = grads[i];
    kiln_dtype dt = g->tensors[p].dtype;
    int ti = t;
    if (dt != ct) {
      Attr at = {0};
      at.to = dt;
      o.st = graph_add(g, OP_CAST, 1, &t, &at, &ti);
    }
    int m = zeros_param(&o, p, "adam_m"), v = zeros_param(&o, p, "adam_v");
    int m1 = node2(&o, OP_ADD, mulc(&o, m, beta1), mulc(&o, gi, 1 - beta1));
    int v1 = node2(&o, OP_ADD, mulc(&o, v, beta2), mulc(&o, node2(&o, OP_MUL, gi, gi), 1 - beta2));
    int one = scalar(&o, dt, 1);
    int bc1 = node2(&o, OP_SUB, one, node2(&o, OP_POW, scalar(&o, dt, beta1), ti));
    int bc2 = node2(&o, OP_SUB, one, node2(&o, OP_POW, scalar(&o, dt, beta2), ti));
    int denom = node2(&o, OP_ADD, node2(&o, OP_DIV, node1(&o, OP_SQRT, v1), node1(&o, OP_SQRT, bc2)),
                      scalar(&o, dt, eps));
    int step = node2(&o, OP_DIV, node2(&o, OP_MUL, node2(&o, OP_DIV, scalar(&o, dt, lr), bc1), m1), denom);
    int p1 = unless_skipped(&o, finite, node2(&o, OP_SUB, p, step), p);
    assign(&o, m, unless_skipped(&o, finite, m1, m));
    assign(&o, v, unless_skipped(&o, finite, v1, v));
    assign(&o, p, p1);
    if (updated) updated[i] = p1;
  }
  kiln_free(grads);
  return finish(&o, n_nodes, n_tensors, n_assigns);
}
