/*
 * test_fold_scalar — graph_fold (the host constant folder) computes what the program
 * computes: for every elementwise op and cast it folds, on every dtype it folds (u64 is
 * left to the program), over edge values (0, -0, NaN, inf, 1e30, dtype limits, shift
 * counts 63/64/-1, INT64_MIN and -1, zero divisors), each folded element is bit for bit
 * te_eval_* of the op as te lowers it (relu is max(x, 0)). The ops whose undefined C
 * cases the shared helpers define (integer div/mod by zero, pow, shifts, float
 * max/min/mod/sign, float->int casts) must fold.
 */
#include "graph/graph.h"
#include "te/te.h"
#include "test.h"

#include <string.h>

static const kiln_dtype dtypes[] = {KILN_F32, KILN_F64, KILN_F16, KILN_BF16, KILN_I64, KILN_I32, KILN_I16,
                                    KILN_I8,  KILN_U8,  KILN_U16, KILN_U32, KILN_BOOL};
#define NDT (int)(sizeof dtypes / sizeof dtypes[0])

static const double fvals[] = {0, -0.0, 1, -1, 0.5, -0.5, 1.5, 2.5, -2.5, 3, -7, 1e30, -1e30, INFINITY, -INFINITY,
                               NAN, 65504, 65520, 300, -300, 9223372036854775808.0, 1e-8};
static const int64_t ivals[] = {0, 1, -1, 2, -2, 3, 7, -7, 63, 64, 65, -64, 127, 128, -129, 255,
                                32768, 2147483647, -2147483647 - 1, INT64_MAX, INT64_MIN, INT64_MIN + 1};
#define NV 22
_Static_assert(sizeof fvals / sizeof fvals[0] == NV && sizeof ivals / sizeof ivals[0] == NV, "NV");

/* The te op each public op lowers to (lower.c); -1: none (relu is TB_MAX with 0). */
static const int te_unary_of[KILN_UNARY_COUNT] = {
  [KILN_NEG] = TU_NEG, [KILN_ABS] = TU_ABS, [KILN_EXP] = TU_EXP, [KILN_LOG] = TU_LOG, [KILN_SQRT] = TU_SQRT,
  [KILN_RSQRT] = TU_RSQRT, [KILN_RECIPROCAL] = TU_RECIP, [KILN_TANH] = TU_TANH, [KILN_SIGMOID] = TU_SIGMOID,
  [KILN_RELU] = -1, [KILN_GELU_ERF] = -1, [KILN_GELU_TANH] = -1, [KILN_ERF] = TU_ERF, [KILN_SIN] = TU_SIN,
  [KILN_COS] = TU_COS, [KILN_FLOOR] = TU_FLOOR, [KILN_CEIL] = TU_CEIL, [KILN_ROUND] = TU_ROUND,
  [KILN_SIGN] = TU_SIGN, [KILN_NOT] = TU_NOT, [KILN_ISNAN] = TU_ISNAN, [KILN_ISINF] = TU_ISINF,
};
static const int te_binary_of[KILN_BINARY_COUNT] = {
  [KILN_ADD] = TB_ADD, [KILN_SUB] = TB_SUB, [KILN_MUL] = TB_MUL, [KILN_DIV] = TB_DIV, [KILN_POW] = TB_POW,
  [KILN_MAX] = TB_MAX, [KILN_MIN] = TB_MIN, [KILN_MOD] = TB_MOD, [KILN_FMOD] = TB_FMOD, [KILN_EQ] = TB_EQ,
  [KILN_NE] = TB_NE, [KILN_LT] = TB_LT, [KILN_LE] = TB_LE, [KILN_GT] = TB_GT, [KILN_GE] = TB_GE,
  [KILN_AND] = TB_AND, [KILN_OR] = TB_OR, [KILN_XOR] = TB_XOR, [KILN_SHL] = TB_SHL, [KILN_SHR] = TB_SHR,
};

static bool is_float(kiln_dtype t) { return t <= KILN_BF16; }

/* The edge values stored in dtype t (wrapped or rounded into it by its store). */
static void fill(kiln_dtype t, void *buf) {
  for (int i = 0; i < NV; i++) {
    if (is_float(t)) dtype_store_f64(t, buf, i, fvals[i]);
    else dtype_store_i64(t, buf, i, ivals[i]);
  }
}

static TeValue load(kiln_dtype t, const void *p, int64_t i) {
  TeValue v;
  if (is_float(t)) v.f = dtype_load_f64(t, p, i);
  else v.i = dtype_load_i64(t, p, i);
  return v;
}

static void store(kiln_dtype t, void *p, int64_t i, TeValue v) {
  if (is_float(t)) dtype_store_f64(t, p, i, v.f);
  else dtype_store_i64(t, p, i, v.i);
}

/* y, the last node's output, folded? Then each element must equal want's bytes. */
static int check(kiln_graph *G, kiln_tensor y, const void *want, bool must_fold, const char *what, kiln_dtype t) {
  Graph *g = &G->g;
  OK(graph_fold(g, y));
  const Tensor *ty = &g->tensors[y];
  if (ty->kind != T_CONST) {
    CHECK_MSG(!must_fold, "%s on %s did not fold", what, kiln_dtype_name(t));
    return 0;
  }
  size_t es = kiln_dtype_size(ty->dtype);
  for (int64_t i = 0; i < ty->numel; i++)
    if (memcmp((const char *)ty->data + i * (int64_t)es, (const char *)want + i * (int64_t)es, es)) {
      CHECK_MSG(0, "%s on %s: element %lld differs from te_eval", what, kiln_dtype_name(t), (long long)i);
      return 0;
    }
  return 1;
}

static int test_unary(kiln_dtype t, kiln_unary_op op) {
  if (op == KILN_GELU_ERF || op == KILN_GELU_TANH) return 0;  /* compositions: several nodes */
  unsigned char a[NV * 8], want[NV * 8];
  int64_t shape[1] = {NV};
  kiln_graph *G = NULL;
  kiln_tensor ca, y;
  int folded = 0;
  fill(t, a);
  OK(kiln_graph_create(&G));
  if (!G) return 0;
  OK(kiln_graph_const(G, t, 1, shape, a, &ca));
  if (kiln_graph_unary(G, op, ca, &y) == KILN_OK) {  /* refused for this dtype: nothing to fold */
    kiln_dtype out = G->g.tensors[y].dtype;
    for (int i = 0; i < NV; i++) {
      TeValue x = load(t, a, i);
      TeValue zero = {.i = 0};
      TeValue r = op == KILN_RELU ? te_eval_binary(TB_MAX, t, x, zero) : te_eval_unary(te_unary_of[op], t, x);
      store(out, want, i, r);
    }
    bool must = op == KILN_SIGN || (is_float(t) && (op == KILN_RELU || op == KILN_SIGMOID));
    folded = check(G, y, want, must, op == KILN_RELU ? "relu" : te_unary_names[te_unary_of[op]], t);
  }
  kiln_graph_free(G);
  return folded;
}

static int test_binary(kiln_dtype t, kiln_binary_op op) {
  unsigned char a[NV * 8], want[NV * NV * 8];
  int64_t sa[2] = {NV, 1}, sb[2] = {1, NV};
  kiln_graph *G = NULL;
  kiln_tensor ca, cb, y;
  int folded = 0;
  fill(t, a);
  OK(kiln_graph_create(&G));
  if (!G) return 0;
  OK(kiln_graph_const(G, t, 2, sa, a, &ca));
  OK(kiln_graph_const(G, t, 2, sb, a, &cb));
  if (kiln_graph_binary(G, op, ca, cb, &y) == KILN_OK) {
    kiln_dtype out = G->g.tensors[y].dtype;
    for (int i = 0; i < NV; i++)
      for (int j = 0; j < NV; j++)
        store(out, want, i * NV + j, te_eval_binary(te_binary_of[op], t, load(t, a, i), load(t, a, j)));
    bool must = is_float(t) ? op == KILN_MAX || op == KILN_MIN || op == KILN_MOD
                            : op == KILN_DIV || op == KILN_MOD || op == KILN_FMOD || op == KILN_POW ||
                                  ((op == KILN_SHL || op == KILN_SHR) && t != KILN_BOOL);
    folded = check(G, y, want, must, te_binary_names[te_binary_of[op]], t);
  }
  kiln_graph_free(G);
  return folded;
}

static int test_cast(kiln_dtype from, kiln_dtype to) {
  unsigned char a[NV * 8], want[NV * 8];
  int64_t shape[1] = {NV};
  kiln_graph *G = NULL;
  kiln_tensor ca, y;
  int folded = 0;
  fill(from, a);
  for (int i = 0; i < NV; i++) store(to, want, i, te_eval_cast(to, from, load(from, a, i)));
  OK(kiln_graph_create(&G));
  if (!G) return 0;
  OK(kiln_graph_const(G, from, 1, shape, a, &ca));
  OK(kiln_graph_cast(G, ca, to, &y));
  char what[64];
  snprintf(what, sizeof what, "cast to %s", kiln_dtype_name(to));
  folded = check(G, y, want, true, what, from);
  kiln_graph_free(G);
  return folded;
}

int main(void) {
  int n = 0;
  for (int d = 0; d < NDT; d++) {
    for (int op = 0; op < KILN_UNARY_COUNT; op++) n += test_unary(dtypes[d], (kiln_unary_op)op);
    for (int op = 0; op < KILN_BINARY_COUNT; op++) n += test_binary(dtypes[d], (kiln_binary_op)op);
    for (int e = 0; e < NDT; e++) n += test_cast(dtypes[d], dtypes[e]);
  }
  printf("%d folded op/dtype pairs agree with te_eval\n", n);
  CHECK(n > 300);
  TEST_MAIN_END();
}
