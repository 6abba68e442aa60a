/*
 * graph_add on hostile attributes (what a corrupted ONNX model can hand it):
 * for every op, thousands of random Attr values drawn from edge cases (0, -1,
 * huge, INT64_MIN, ...) and random inputs of assorted ranks, dtypes and zero
 * dims. Each call either succeeds and leaves a graph that passes graph_check,
 * or fails with INVALID_ARG / NO_MEMORY, a message naming the node, and no
 * change to the graph. Under UBSan this also shows that no size arithmetic
 * overflows. Deterministic (fixed seed); the seed and op are printed on failure.
 */
#include "graph/graph.h"
#include "test.h"

static unsigned long long seed = 12345;

static uint64_t next(void) {
  seed ^= seed >> 12;
  seed ^= seed << 25;
  seed ^= seed >> 27;
  return seed * 2685821657736338717ull;
}

static int64_t pick64(void) {
  static const int64_t edge[] = { 0, 1, -1, 2, 3, 4, -2, 7, INT64_MAX, INT64_MIN, INT64_MAX / 2, 1ll << 40,
                                  -(1ll << 40), 1ll << 62, INT32_MAX, INT32_MIN };
  uint64_t r = next();
  if (r % 3 == 0) return edge[(r >> 8) % (sizeof edge / sizeof edge[0])];
  return (int64_t)((r >> 8) % 9) - 2; /* -2..6 */
}

static int pick_int(void) {
  uint64_t r = next();
  if (r % 9 == 0) return (r >> 8) & 1 ? INT32_MAX : INT32_MIN;
  return (int)((r >> 8) % 12) - 3; /* -3..8 */
}

static void random_attr(Attr *a) {
  memset(a, 0, sizeof *a);
  a->axis = pick_int();
  a->keepdims = (int)(next() % 3);
  a->select_last = (int)(next() % 3);
  a->n_axes = pick_int();
  for (int i = 0; i < KILN_MAX_RANK; i++) {
    a->axes[i] = next() % 2 ? i : pick_int();
    a->perm[i] = next() % 2 ? KILN_MAX_RANK - 1 - i : pick_int();
    a->shape[i] = pick64();
    a->starts[i] = pick64();
    a->steps[i] = pick64();
  }
  a->shape_rank = pick_int();
  for (int i = 0; i < 2 * KILN_MAX_RANK; i++) a->pads[i] = pick64();
  a->pad_mode = (kiln_pad_mode)(next() % 4);
  a->value = 1.5;
  a->to = (kiln_dtype)(next() % (KILN_DTYPE_COUNT + 2));
  a->conv.spatial = (int)(next() % 5);
  a->pool.spatial = (int)(next() % 5);
  for (int i = 0; i < 3; i++) {
    a->conv.strides[i] = pick64();
    a->conv.dilations[i] = pick64();
    a->pool.kernel[i] = pick64();
    a->pool.strides[i] = pick64();
    a->pool.dilations[i] = pick64();
  }
  for (int i = 0; i < 6; i++) a->conv.pads[i] = a->pool.pads[i] = pick64();
  a->conv.group = pick64();
  a->pool.ceil_mode = (int)(next() % 3);
  a->pool.count_include_pad = (int)(next() % 3);
}

int main(void) {
  Graph *g = graph_create();
  CHECK(g != NULL);
  if (!g) TEST_MAIN_END();
  /* a pool of leaves: ranks 0..5, a zero dim, several dtypes, constant indices in and out of range */
  static const int64_t shapes[][5] = { { 0 }, { 3 }, { 2, 3 }, { 1, 4, 5 }, { 2, 3, 4, 5 }, { 1, 2, 6, 6, 3 },
                                       { 2, 0, 3 }, { 1, 1 } };
  static const int ranks[] = { 0, 1, 2, 3, 4, 5, 3, 2 };
  static const kiln_dtype dts[] = { KILN_F32, KILN_I64, KILN_BOOL, KILN_I32, KILN_F16, KILN_U8 };
  for (int s = 0; s < 8; s++)
    for (int d = 0; d < 6; d++) OK(graph_leaf(g, T_INPUT, NULL, dts[d], ranks[s], shapes[s], NULL, NULL));
  int64_t idx[4] = { 0, -1, 2, -3 };
  OK(graph_leaf(g, T_CONST, "idx", KILN_I64, 1, (int64_t[]){ 4 }, idx, NULL));
  int leaves = g->n_tensors, ok = 0, bad = 0;
  for (int iter = 0; iter < 400; iter++)
    for (int op = 0; op < OP_COUNT; op++) {
      Attr a;
      random_attr(&a);
      int n_in = op_arity[op] >= 0 ? op_arity[op] : 1 + (int)(next() % 3);
      if (next() % 16 == 0) n_in = (int)(next() % 4);
      int in[4];
      for (int i = 0; i < 4; i++) in[i] = (int)(next() % (uint64_t)g->n_tensors);
      if (next() % 32 == 0) in[0] = -1 - (int)(next() % 3);
      if (next() % 2 && in[0] >= 0) { /* tame half the windows, so the accepting paths run too */
        const Tensor *x = &g->tensors[in[0]];
        a.conv.spatial = a.pool.spatial = x->rank - 2;
        a.shape_rank = x->rank;
        a.conv.group = 1;
        for (int i = 0; i < 3; i++) {
          a.conv.strides[i] = a.pool.strides[i] = 1 + (int64_t)(next() % 2);
          a.conv.dilations[i] = a.pool.dilations[i] = 1 + (int64_t)(next() % 2);
          a.pool.kernel[i] = 1 + (int64_t)(next() % 3);
        }
        for (int i = 0; i < 6; i++) a.conv.pads[i] = a.pool.pads[i] = (int64_t)(next() % 2);
        for (int r = 0; r < x->rank; r++) {
          a.shape[r] = x->shape[r] ? (int64_t)(next() % (uint64_t)x->shape[r]) : 0;
          a.starts[r] = x->shape[r] ? (int64_t)(next() % (uint64_t)x->shape[r]) : 0;
          a.steps[r] = next() % 2 ? 1 : -1;
        }
        if (op == OP_CONV) { /* a weight with x's rank and channels */
          for (int t = 0; t < g->n_tensors; t++)
            if (g->tensors[t].rank == x->rank && g->tensors[t].dtype == x->dtype && x->rank >= 3 &&
                g->tensors[t].shape[1] == x->shape[1] && next() % 2)
              in[1] = t;
        }
      }
      int nt = g->n_tensors, nn = g->n_nodes, out = -1;
      kiln_status st = graph_add(g, (OpKind)op, n_in, in, &a, &out);
      if (st == KILN_OK) {
        ok++;
        CHECK_MSG(out == nt && g->n_tensors == nt + 1 && g->n_nodes == nn + 1, "op %s iter %d", op_names[op], iter);
      } else {
        bad++;
        CHECK_MSG((st == KILN_ERR_INVALID_ARG || st == KILN_ERR_NO_MEMORY) && strstr(kiln_last_error(), op_names[op]),
                  "op %s iter %d: %s: %s", op_names[op], iter, kiln_status_name(st), kiln_last_error());
        CHECK_MSG(g->n_tensors == nt && g->n_nodes == nn, "op %s iter %d changed the graph", op_names[op], iter);
      }
      /* keep the pool small so later nodes still pick leaves often */
      if (g->n_tensors > leaves + 200) {
        OK(graph_check(g));
        g->n_tensors = leaves;
        g->n_nodes = 0;
      }
    }
  OK(graph_check(g));
  printf("random attributes: %d nodes added, %d rejected\n", ok, bad);
  CHECK(ok > 500 && bad > 500); /* both paths exercised */
  graph_free(g);
  TEST_MAIN_END();
}
