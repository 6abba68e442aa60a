/*
 * test_fold_bitwise — graph_fold (the host constant folder the ONNX importer runs) on
 * and/or/xor/not of constants: bitwise on every integer dtype it folds (i8..i64,
 * u8..u32; u64 is left to the program, which must keep the node), logical on bool.
 * Expected bits come from the raw input bits and a width mask, computed here.
 */
#include "graph/graph.h"
#include "test.h"

#include <string.h>

#define N 6
static const uint64_t pa[N] = {0, UINT64_MAX, UINT64_C(0x8000000000000080), UINT64_C(0x5555555555555555),
                               (uint64_t)-2, UINT64_C(0x5a3cf00fc3a51e69)};
static const uint64_t pb[N] = {UINT64_MAX, UINT64_MAX, UINT64_C(0xffffffffffffff80), UINT64_C(0xaaaaaaaaaaaaaaaa),
                               (uint64_t)-3, UINT64_C(0x96c3e1f0781e0f87)};

static const kiln_dtype ints[8] = {KILN_I8, KILN_I16, KILN_I32, KILN_I64, KILN_U8, KILN_U16, KILN_U32, KILN_U64};
static const kiln_binary_op bops[3] = {KILN_AND, KILN_OR, KILN_XOR};

static uint64_t raw_at(kiln_dtype t, const void *p, int i) {
  uint64_t u = 0;
  size_t sz = kiln_dtype_size(t);
  memcpy(&u, (const char *)p + (size_t)i * sz, sz);  /* little-endian host */
  return u;
}

/* Folds tensor y (the last node's output) and checks it became a constant with bits want. */
static void check_folded(kiln_graph *G, kiln_tensor y, kiln_dtype t, const uint64_t *want, const char *what) {
  Graph *g = &G->g;
  int nodes = g->n_nodes;
  CHECK_MSG(graph_fold(g, y) == KILN_OK, "%s %s: %s", what, kiln_dtype_name(t), kiln_last_error());
  const Tensor *ty = &g->tensors[y];
  if (t == KILN_U64) {  /* beyond the folder's int64: the node stays */
    CHECK_MSG(ty->kind == T_VALUE && g->n_nodes == nodes, "%s u64 should not fold", what);
    return;
  }
  CHECK_MSG(ty->kind == T_CONST && g->n_nodes == nodes - 1, "%s %s did not fold", what, kiln_dtype_name(t));
  if (ty->kind != T_CONST) return;
  for (int i = 0; i < N; i++)
    CHECK_MSG(raw_at(t, ty->data, i) == want[i], "%s %s [%d] = 0x%llx, expected 0x%llx", what, kiln_dtype_name(t), i,
              (unsigned long long)raw_at(t, ty->data, i), (unsigned long long)want[i]);
}

static void test_ints(void) {
  int64_t shape[1] = {N};
  for (int d = 0; d < 8; d++) {
    kiln_dtype t = ints[d];
    int bits = (int)kiln_dtype_size(t) * 8;
    uint64_t m = bits == 64 ? UINT64_MAX : (UINT64_C(1) << bits) - 1, a[N], b[N], want[N];
    unsigned char ra[N * 8], rb[N * 8];
    size_t sz = kiln_dtype_size(t);
    for (int i = 0; i < N; i++) {
      a[i] = pa[i] & m, b[i] = pb[i] & m;
      memcpy(ra + (size_t)i * sz, &a[i], sz);
      memcpy(rb + (size_t)i * sz, &b[i], sz);
    }
    for (int k = 0; k < 4; k++) {
      kiln_graph *G = NULL;
      kiln_tensor ca, cb, y = -1;
      OK(kiln_graph_create(&G));
      if (!G) return;
      OK(kiln_graph_const(G, t, 1, shape, ra, &ca));
      OK(kiln_graph_const(G, t, 1, shape, rb, &cb));
      if (k < 3) OK(kiln_graph_binary(G, bops[k], ca, cb, &y));
      else OK(kiln_graph_unary(G, KILN_NOT, ca, &y));
      for (int i = 0; i < N; i++)
        want[i] = (k == 0 ? a[i] & b[i] : k == 1 ? a[i] | b[i] : k == 2 ? a[i] ^ b[i] : ~a[i]) & m;
      static const char *const nm[4] = {"and", "or", "xor", "not"};
      if (y >= 0) check_folded(G, y, t, want, nm[k]);
      kiln_graph_free(G);
    }
  }
}

static void test_bool(void) {
  int64_t shape[1] = {4};
  unsigned char a[4] = {0, 0, 1, 1}, b[4] = {0, 1, 0, 1};
  static const uint64_t tt[4][4] = {{0, 0, 0, 1}, {0, 1, 1, 1}, {0, 1, 1, 0}, {1, 1, 0, 0}};
  for (int k = 0; k < 4; k++) {
    kiln_graph *G = NULL;
    kiln_tensor ca, cb, y = -1;
    OK(kiln_graph_create(&G));
    if (!G) return;
    OK(kiln_graph_const(G, KILN_BOOL, 1, shape, a, &ca));
    OK(kiln_graph_const(G, KILN_BOOL, 1, shape, b, &cb));
    if (k < 3) OK(kiln_graph_binary(G, bops[k], ca, cb, &y));
    else OK(kiln_graph_unary(G, KILN_NOT, ca, &y));
    Graph *g = &G->g;
    OK(graph_fold(g, y));
    const Tensor *ty = &g->tensors[y];
    CHECK_MSG(ty->kind == T_CONST, "bool op %d did not fold", k);
    for (int i = 0; i < 4 && ty->kind == T_CONST; i++)
      CHECK_MSG(((const unsigned char *)ty->data)[i] == tt[k][i], "bool op %d [%d] = %d", k, i,
                ((const unsigned char *)ty->data)[i]);
    kiln_graph_free(G);
  }
}

int main(void) {
  test_ints();
  test_bool();
  TEST_MAIN_END();
}
