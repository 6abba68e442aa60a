/*
 * test_compose — composing injective stages: transpose(reshape(slice(x))) lowers and,
 * after te_inline, is one expression whose only load reads x, with the values ref
 * computes from the unfused stages and from a direct index computation here.
 * Also: reshape of a reshape is the identity map, slice of slice composes, and the
 * div/mod rules cancel what reshapes introduce.
 */
#include "test.h"
#include "runtime/runtime.h"

typedef struct Loads { int n, src[16]; } Loads;

static void collect(const Expr *e, void *ctx) {
  Loads *l = ctx;
  if (l->n < 16) l->src[l->n] = e->src;
  l->n++;
}

static int add_node(Graph *g, OpKind op, int in, const Attr *a) {
  int out = -1;
  OK(graph_add(g, op, 1, &in, a, &out));
  return out;
}

/* Inlines every injective stage into the last one; returns the composed body. */
static Expr *compose_last(TE *te) {
  bool inl[64] = {0};
  const Stage *s = &te->stages[te->n_stages - 1];
  for (int i = 0; i < te->n_stages - 1; i++) inl[i] = te->stages[i].kind == ST_INJECTIVE;
  int64_t lo[KILN_MAX_RANK], hi[KILN_MAX_RANK];
  for (int d = 0; d < s->rank; d++) { lo[d] = 0; hi[d] = s->shape[d] - 1; }
  return te_inline(te, s->body, inl, lo, hi, s->rank);
}

static Expr *vars_load(TE *te, int stage, int n) {
  Expr *idx[KILN_MAX_RANK];
  for (int i = 0; i < n; i++) idx[i] = te_var(te, i);
  return te_load(te, stage, n, idx);
}

static void test_transpose_reshape_slice(void) {
  Graph *g = graph_create();
  int x, t;
  OK(graph_leaf(g, T_INPUT, "x", KILN_F32, 3, (int64_t[]){ 4, 6, 5 }, NULL, &x));
  Attr a = { .shape_rank = 3, .shape = { 3, 3, 4 }, .starts = { 1, 0, 1 }, .steps = { 1, 2, 1 } };
  t = add_node(g, OP_SLICE, x, &a);
  Attr b = { .shape_rank = 2, .shape = { 9, 4 } };
  t = add_node(g, OP_RESHAPE, t, &b);
  Attr c = { .perm = { 1, 0 } };
  t = add_node(g, OP_TRANSPOSE, t, &c);
  OK(graph_output(g, t, "y"));
  TE *te = NULL;
  OK(te_lower(g, &te));
  OK(te_check(te));
  CHECK(te->n_stages == 4);
  char text[2048] = "";
  FILE *m = fmemopen(text, sizeof text - 1, "w");
  te_print(te, m);
  fclose(m);
  CHECK_MSG(strstr(text, "s3 injective [4,9] f32 transpose") && strstr(text, "s0 input [4,6,5] f32 'x'") &&
            strstr(text, "output 'y' = s3"), "te_print:\n%s", text);
  Expr *e = compose_last(te);
  CHECK(e != NULL);
  Loads l = {0};
  te_visit_loads(e, collect, &l);
  CHECK_MSG(l.n == 1 && l.src[0] == te->tensor_stage[x], "%d loads", l.n);
  fprintf(stderr, "composed: ");
  te_print_expr(e, stderr);
  fputc('\n', stderr);

  /* Evaluate the composed expression as a stage of its own and compare with ref's
   * stage-by-stage values and with the index computed here. */
  Stage s = te->stages[te->n_stages - 1];
  s.body = e;
  s.tensor = -1;
  int fused = te_add_stage(te, &s);
  float xv[120], bufs_mem[4][120], fv[36];
  for (int i = 0; i < 120; i++) xv[i] = (float)(i * 7 % 31) - 3.5f;
  void *bufs[5] = { xv, bufs_mem[1], bufs_mem[2], bufs_mem[3], fv };
  OK(ref_eval_all(te, bufs));
  const float *y = bufs[3];
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 9; j++) {
      int flat = j * 4 + i, p = flat / 12, q = flat / 4 % 3, r = flat % 4;
      float want = xv[(1 + p) * 30 + (2 * q) * 5 + (1 + r)];
      CHECK(y[i * 9 + j] == want);
      CHECK(fv[i * 9 + j] == want);
    }
  CHECK(fused == 4);
  te_free(te);
  graph_free(g);
}

static void test_reshape_reshape_identity(void) {
  Graph *g = graph_create();
  int x, t;
  OK(graph_leaf(g, T_INPUT, "x", KILN_F32, 3, (int64_t[]){ 2, 3, 4 }, NULL, &x));
  Attr a = { .shape_rank = 2, .shape = { 6, 4 } };
  t = add_node(g, OP_RESHAPE, x, &a);
  Attr b = { .shape_rank = 1, .shape = { 24 } };
  t = add_node(g, OP_RESHAPE, t, &b);
  Attr c = { .shape_rank = 3, .shape = { 2, 3, 4 } };
  t = add_node(g, OP_RESHAPE, t, &c);
  OK(graph_output(g, t, "y"));
  TE *te = NULL;
  OK(te_lower(g, &te));
  OK(te_check(te));
  Expr *e = compose_last(te);
  CHECK_MSG(e == vars_load(te, te->tensor_stage[x], 3), "reshape chain did not cancel");
  te_free(te);
  graph_free(g);
}

static void test_slice_slice(void) {
  Graph *g = graph_create();
  int x, t;
  OK(graph_leaf(g, T_INPUT, "x", KILN_I32, 1, (int64_t[]){ 10 }, NULL, &x));
  Attr a = { .shape_rank = 1, .shape = { 5 }, .starts = { 1 }, .steps = { 2 } };    /* 1 3 5 7 9 */
  t = add_node(g, OP_SLICE, x, &a);
  Attr b = { .shape_rank = 1, .shape = { 2 }, .starts = { 3 }, .steps = { -2 } };   /* 7 3 */
  t = add_node(g, OP_SLICE, t, &b);
  OK(graph_output(g, t, "y"));
  TE *te = NULL;
  OK(te_lower(g, &te));
  OK(te_check(te));
  Expr *e = compose_last(te);
  Expr *want_i = te_binary(te, TB_SUB, te_const_i(te, KILN_I64, 7), te_binary(te, TB_MUL, te_var(te, 0), te_const_i(te, KILN_I64, 4)));
  CHECK_MSG(e == te_load(te, te->tensor_stage[x], 1, &want_i), "slice of slice is not x[7 - 4*i0]");
  te_free(te);
  graph_free(g);
}

/* Transpose then reshape back and transpose again: [2,3] -> [3,2] -> reshape [2,3]
 * is a genuine shuffle, so the composed map must keep div/mod but stay one load. */
static void test_shuffle_values(void) {
  Graph *g = graph_create();
  int x, t;
  OK(graph_leaf(g, T_INPUT, "x", KILN_I64, 2, (int64_t[]){ 2, 3 }, NULL, &x));
  Attr p = { .perm = { 1, 0 } };
  t = add_node(g, OP_TRANSPOSE, x, &p);
  Attr r = { .shape_rank = 2, .shape = { 2, 3 } };
  t = add_node(g, OP_RESHAPE, t, &r);
  OK(graph_output(g, t, "y"));
  TE *te = NULL;
  OK(te_lower(g, &te));
  Expr *e = compose_last(te);
  Loads l = {0};
  te_visit_loads(e, collect, &l);
  CHECK(l.n == 1);
  Stage s = te->stages[te->n_stages - 1];
  s.body = e;
  te_add_stage(te, &s);
  int64_t xv[6] = { 0, 1, 2, 3, 4, 5 }, t1[6], t2[6], f[6];
  void *bufs[4] = { xv, t1, t2, f };
  OK(ref_eval_all(te, bufs));
  int64_t want[6] = { 0, 3, 1, 4, 2, 5 };  /* x.T flattened */
  for (int i = 0; i < 6; i++) CHECK(t2[i] == want[i] && f[i] == want[i]);
  te_free(te);
  graph_free(g);
}

/* Splitting heads: [B,S,D] -> [B,S,H,Dh] -> transpose(0,2,1,3) is x[b, s, h*Dh + d]:
 * no division or modulo survives. */
static void test_split_heads(void) {
  Graph *g = graph_create();
  int x, t;
  OK(graph_leaf(g, T_INPUT, "x", KILN_F32, 3, (int64_t[]){ 2, 3, 8 }, NULL, &x));
  Attr r = { .shape_rank = 4, .shape = { 2, 3, 2, 4 } };
  t = add_node(g, OP_RESHAPE, x, &r);
  Attr p = { .perm = { 0, 2, 1, 3 } };
  t = add_node(g, OP_TRANSPOSE, t, &p);
  OK(graph_output(g, t, "y"));
  TE *te = NULL;
  OK(te_lower(g, &te));
  Expr *e = compose_last(te);
  Expr *idx[3] = { te_var(te, 0), te_var(te, 2),
                   te_binary(te, TB_ADD, te_binary(te, TB_MUL, te_var(te, 1), te_const_i(te, KILN_I64, 4)), te_var(te, 3)) };
  CHECK_MSG(e == te_load(te, te->tensor_stage[x], 3, idx), "split heads did not compose to x[i0, i2, 4*i1 + i3]");
  te_free(te);
  graph_free(g);
}

int main(void) {
  test_split_heads();
  test_transpose_reshape_slice();
  test_reshape_reshape_identity();
  test_slice_slice();
  test_shuffle_values();
  TEST_MAIN_END();
}
