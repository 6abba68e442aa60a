/*
 * test_cuda_codegen.c — the CUDA C dialect through the one renderer, checked by NVRTC
 * without a GPU: graphs covering every kernel shape (pointwise, row reductions,
 * contractions, arg-reductions, integer and half-float arithmetic, a training step)
 * are lowered, planned, rendered for cuda and compiled for sm_90. The source must
 * compile cleanly, name no model tensor, and hold one extern "C" kernel per
 * non-host kernel of the plan. Without NVRTC: "skip: no NVRTC" and pass.
 */
#include "cuda_render.h"

static int n_checked;

static void check(const char *what, kiln_graph *g, int fuse) {
  CudaRender r;
  if (cr_render(g, fuse, &r)) {
    int kernels = 0;
    for (int i = 0; i < r.p->n_kernels; i++) kernels += r.p->kernels[i].kind != KN_HOST && r.p->kernels[i].chain >= 0;  /* a chain: its last */
    int found = 0;
    for (const char *s = r.src.s; (s = strstr(s, "extern \"C\" __global__")); s++) found++;
    CHECK_MSG(found == kernels, "%s: %d kernels in source, %d in plan", what, found, kernels);
    CHECK_MSG(!strstr(r.src.s, "secret_name"), "%s: a model name reached the source", what);
    kiln_status st = cr_compile(&r);
    CHECK_MSG(st == KILN_OK, "%s (fuse=%d): %s\n%s", what, fuse, kiln_last_error(), r.src.s);
    n_checked++;
  }
  cr_free(&r);
}

static void both(const char *what, kiln_graph *g) {
  check(what, g, 1);
  check(what, g, 0);
  kiln_graph_free(g);
}

static kiln_graph *unary_graph(kiln_dtype t, int64_t n) {
  kiln_graph *g;
  kiln_tensor x, a, b, c, y;
  OK(kiln_graph_create(&g));
  OK(kiln_graph_input(g, "secret_name", t, 1, &n, &x));
  OK(kiln_graph_unary(g, dtype_is_float(t) ? KILN_TANH : dtype_is_signed(t) ? KILN_NEG : KILN_ABS, x, &a));
  OK(kiln_graph_binary(g, KILN_MUL, a, x, &b));
  OK(kiln_graph_binary(g, dtype_is_float(t) ? KILN_DIV : KILN_MOD, b, x, &c));
  OK(kiln_graph_unary(g, KILN_ABS, c, &y));
  OK(kiln_graph_output(g, y, "y"));
  return g;
}

static kiln_graph *rows_graph(int which) {
  kiln_graph *g;
  kiln_tensor x, y, gm, bt;
  int64_t s[2] = { 64, 300 }, c = 300;
  float ones[300];
  for (int i = 0; i < 300; i++) ones[i] = 1;
  OK(kiln_graph_create(&g));
  OK(kiln_graph_input(g, "x", KILN_F32, 2, s, &x));
  if (which == 0) OK(kiln_graph_softmax(g, x, 1, &y));
  else if (which == 1) OK(kiln_graph_log_softmax(g, x, 1, &y));
  else if (which == 2) {
    OK(kiln_graph_param(g, "g", KILN_F32, 1, &c, ones, &gm));
    OK(kiln_graph_param(g, "b", KILN_F32, 1, &c, ones, &bt));
    OK(kiln_graph_layernorm(g, x, gm, bt, 1, 1e-5, &y));
  } else if (which == 3) OK(kiln_graph_argmax(g, x, 1, 0, 1, &y));
  else if (which == 4) OK(kiln_graph_reduce(g, KILN_REDUCE_MIN, x, 1, (int[]){ 0 }, 1, &y));
  else OK(kiln_graph_reduce(g, KILN_REDUCE_PROD, x, 0, NULL, 0, &y));
  OK(kiln_graph_output(g, y, "y"));
  return g;
}

static kiln_graph *mlp_train_graph(void) {
  kiln_graph *g;
  int64_t xs[2] = { 8, 20 }, ws[2] = { 20, 10 }, bs[1] = { 10 };
  float w[200], b[10];
  for (int i = 0; i < 200; i++) w[i] = 0.01f * (float)(i % 17);
  for (int i = 0; i < 10; i++) b[i] = 0.1f;
  kiln_tensor x, y, wt, bt, h, z, lp, s, loss, gr[2], nb, upd;
  OK(kiln_graph_create(&g));
  OK(kiln_graph_input(g, "x", KILN_F32, 2, xs, &x));
  OK(kiln_graph_input(g, "y", KILN_F32, 2, (int64_t[]){ 8, 10 }, &y));
  OK(kiln_graph_param(g, "w", KILN_F32, 2, ws, w, &wt));
  OK(kiln_graph_param(g, "b", KILN_F32, 1, bs, b, &bt));
  OK(kiln_graph_matmul(g, x, wt, &h));
  OK(kiln_graph_binary(g, KILN_ADD, h, bt, &z));
  OK(kiln_graph_log_softmax(g, z, 1, &lp));
  OK(kiln_graph_binary(g, KILN_MUL, lp, y, &s));
  OK(kiln_graph_reduce(g, KILN_REDUCE_SUM, s, 0, NULL, 0, &loss));
  OK(kiln_graph_grad(g, loss, 2, (kiln_tensor[]){ wt, bt }, gr));
  OK(kiln_graph_output(g, loss, "loss"));
  OK(kiln_graph_binary(g, KILN_SUB, bt, gr[1], &nb));
  OK(kiln_graph_binary(g, KILN_SUB, wt, gr[0], &upd));
  OK(kiln_graph_output(g, upd, "w2"));
  OK(kiln_graph_assign(g, bt, nb));
  return g;
}

static kiln_graph *half_graph(void) {
  kiln_graph *g;
  int64_t n = 100;
  kiln_tensor x, h, e, y;
  OK(kiln_graph_create(&g));
  OK(kiln_graph_input(g, "x", KILN_F32, 1, &n, &x));
  OK(kiln_graph_cast(g, x, KILN_F16, &h));
  OK(kiln_graph_unary(g, KILN_EXP, h, &e));
  OK(kiln_graph_cast(g, e, KILN_I32, &y));
  OK(kiln_graph_output(g, y, "y"));
  return g;
}

int main(void) {
  char dir[128];
  if (!cr_begin("cudacg", dir, sizeof dir)) return 0;
  both("f32 chain", unary_graph(KILN_F32, 1000));
  both("i64 chain", unary_graph(KILN_I64, 7));
  both("u8 chain", unary_graph(KILN_U8, 33));
  both("f64 chain", unary_graph(KILN_F64, 5));
  for (int i = 0; i < 6; i++) both("rows", rows_graph(i));
  both("training step", mlp_train_graph());
  both("half floats", half_graph());
  printf("%d plans rendered and compiled for sm_90\n", n_checked);
  cr_end(dir);
  TEST_MAIN_END();
}
