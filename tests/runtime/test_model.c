/* kiln_model: a model with a symbolic batch compiled once per set of input shapes, the LRU
 * that bounds them (counted in the census), the declared inputs and outputs, and the
 * refusals (a shape the declaration forbids, an input read as data, bad calls). */
#include "test.h"
#include "../onnx/pbwrite.h"

#include <unistd.h>

static void node(Buf *g, const char *op, const char *a, const char *b, const char *out) {
  Buf n = { .n = 0 };
  f_str(&n, 1, a);
  if (b) f_str(&n, 1, b);
  f_str(&n, 2, out);
  f_str(&n, 4, op);
  f_msg(g, 1, &n);
}

static const float W[8] = { 1, -1, 0.5f, 2, -2, 1, 0.25f, -0.5f };

/* z = relu(x @ w + b), x [N,4], b [N,2] (N symbolic unless batch > 0), w [4,2] an initializer. */
static void mlp_model(Buf *m, int64_t batch) {
  Buf g = { .n = 0 }, t = { .n = 0 };
  node(&g, "MatMul", "x", "w", "h");
  node(&g, "Add", "h", "b", "s");
  node(&g, "Relu", "s", NULL, "z");
  f_str(&g, 2, "g");
  f_int(&t, 1, 4);
  f_int(&t, 1, 2);
  f_int(&t, 2, 1);
  f_str(&t, 8, "w");
  f_bytes(&t, 9, W, sizeof W);
  f_msg(&g, 5, &t);
  int64_t xd[2] = { batch > 0 ? batch : -1, 4 }, bd[2] = { xd[0], 2 };
  f_value_info(&g, 11, "x", 1, 2, xd);
  f_value_info(&g, 11, "b", 1, 2, bd);
  f_value_info(&g, 12, "z", 1, 2, bd);
  pb_model(m, &g, 13);
}

static kiln_value shape2(kiln_dtype t, int64_t d0, int64_t d1) {
  kiln_value v = { .dtype = t, .rank = 2, .shape = { d0, d1 }, .numel = d0 * d1 };
  return v;
}

/* Runs the program for batch n and checks z against the same sum done here. */
static void run_batch(kiln_model *m, int n, int64_t expect_compiles) {
  kiln_value shapes[2] = { shape2(KILN_F32, n, 4), shape2(KILN_F32, n, 2) };
  kiln_program *p = NULL;
  const kiln_graph *g = NULL;
  OK(kiln_model_program(m, 2, shapes, &p, &g));
  if (!p) return;
  kiln_tensor_info oi;
  OK(kiln_graph_output_info(g, 0, &oi));
  CHECK(oi.rank == 2 && oi.shape[0] == n && oi.shape[1] == 2);
  float x[64 * 4], b[64 * 2], z[64 * 2], want[64 * 2];
  for (int i = 0; i < n * 4; i++) x[i] = (float)((i * 7) % 11) - 5;
  for (int i = 0; i < n * 2; i++) b[i] = (float)(i % 3) - 1;
  for (int r = 0; r < n; r++)
    for (int c = 0; c < 2; c++) {
      float s = b[r * 2 + c];
      for (int k = 0; k < 4; k++) s += x[r * 4 + k] * W[k * 2 + c];
      want[r * 2 + c] = s > 0 ? s : 0;
    }
  const void *in[2] = { x, b };
  void *out[1] = { z };
  OK(kiln_program_run(p, in, out));
  for (int i = 0; i < n * 2; i++) CHECK_NEAR(z[i], want[i], 1e-6);
  kiln_census c;
  OK(kiln_model_census(m, &c));
  CHECK_MSG(c.shape_compiles == expect_compiles, "batch %d: %lld compiles, expected %lld", n, (long long)c.shape_compiles,
            (long long)expect_compiles);
  CHECK(c.runs == 1 || c.runs > 1);
  CHECK(c.kernels_planned >= 1 && c.host_fallbacks == 0);
}

static void test_symbolic_batch(void) {
  Buf mb = { .n = 0 };
  mlp_model(&mb, 0);
  kiln_options o = kiln_options_default();
  kiln_model *m = NULL;
  OK(kiln_model_open_buffer(mb.b, mb.n, NULL, &o, 2, &m));
  if (!m) return;
  int n_in, n_out;
  OK(kiln_model_input_count(m, &n_in));
  OK(kiln_model_output_count(m, &n_out));
  CHECK(n_in == 2 && n_out == 1);  /* w is an initializer, not an input */
  kiln_model_tensor t;
  OK(kiln_model_input_info(m, 0, &t));
  CHECK(!strcmp(t.name, "x") && t.dtype == KILN_F32 && t.rank == 2 && t.shape[0] == -1 && t.shape[1] == 4);
  CHECK(t.dim_name[0] && !strcmp(t.dim_name[0], "N") && !t.dim_name[1]);
  OK(kiln_model_output_info(m, 0, &t));
  CHECK(!strcmp(t.name, "z") && t.shape[0] == -1 && !strcmp(t.dim_name[0], "N"));
  FAILS(KILN_ERR_INVALID_ARG, kiln_model_input_info(m, 2, &t));
  FAILS(KILN_ERR_INVALID_ARG, kiln_model_output_info(m, -1, &t));
  kiln_census c;
  OK(kiln_model_census(m, &c));
  CHECK(c.shape_programs == 0 && c.shape_compiles == 0 && c.runs == 0);  /* nothing compiled yet */

  run_batch(m, 3, 1);
  run_batch(m, 5, 2);
  run_batch(m, 3, 2);   /* found again */
  run_batch(m, 7, 3);   /* capacity 2: evicts 5, the least recently used */
  run_batch(m, 3, 3);
  run_batch(m, 5, 4);   /* evicted: compiles again */
  run_batch(m, 1, 5);
  OK(kiln_model_census(m, &c));
  CHECK(c.shape_programs == 2);

  /* shapes the declaration refuses: nothing is cached, the message names the input and dim */
  kiln_program *p = (kiln_program *)1;
  kiln_value bad[2] = { shape2(KILN_F32, 3, 4), shape2(KILN_F32, 4, 2) };
  FAILS(KILN_ERR_INVALID_ARG, kiln_model_program(m, 2, bad, &p, NULL));
  CHECK(p == NULL && strstr(kiln_last_error(), "'b'") && strstr(kiln_last_error(), "'N'"));
  bad[1] = shape2(KILN_F32, 3, 2);
  bad[0] = shape2(KILN_F32, 3, 5);
  FAILS(KILN_ERR_INVALID_ARG, kiln_model_program(m, 2, bad, &p, NULL));
  CHECK(strstr(kiln_last_error(), "'x'") && strstr(kiln_last_error(), "declares 4"));
  bad[0] = shape2(KILN_I64, 3, 4);
  FAILS(KILN_ERR_INVALID_ARG, kiln_model_program(m, 2, bad, &p, NULL));
  CHECK_MSG(strstr(kiln_last_error(), "declares type f32, the value has type i64"), "%s", kiln_last_error());
  bad[0] = shape2(KILN_F32, 3, 4);
  bad[0].rank = 9;
  FAILS(KILN_ERR_INVALID_ARG, kiln_model_program(m, 2, bad, &p, NULL));
  bad[0].rank = 2, bad[0].shape[0] = -3;
  FAILS(KILN_ERR_INVALID_ARG, kiln_model_program(m, 2, bad, &p, NULL));
  bad[0].shape[0] = (int64_t)1 << 62, bad[1].shape[0] = (int64_t)1 << 62;
  FAILS(KILN_ERR_INVALID_ARG, kiln_model_program(m, 2, bad, &p, NULL));  /* numel overflows */
  FAILS(KILN_ERR_INVALID_ARG, kiln_model_program(m, 1, bad, &p, NULL));
  FAILS(KILN_ERR_INVALID_ARG, kiln_model_program(m, 2, NULL, &p, NULL));
  FAILS(KILN_ERR_INVALID_ARG, kiln_model_program(NULL, 2, bad, &p, NULL));
  FAILS(KILN_ERR_INVALID_ARG, kiln_model_program(m, 2, bad, NULL, NULL));
  OK(kiln_model_census(m, &c));
  CHECK(c.shape_programs == 2 && c.shape_compiles == 5);
  kiln_model_free(m);
  kiln_model_free(NULL);
}

/* A static model is one program; a model that reads an input as data cannot be bound by shape. */
static void test_static_and_data_inputs(void) {
  Buf mb = { .n = 0 };
  mlp_model(&mb, 4);
  kiln_model *m = NULL;
  OK(kiln_model_open_buffer(mb.b, mb.n, NULL, NULL, 0, &m));
  if (m) {
    kiln_model_tensor t;
    OK(kiln_model_input_info(m, 0, &t));
    CHECK(t.shape[0] == 4 && !t.dim_name[0]);
    run_batch(m, 4, 1);
    run_batch(m, 4, 1);
    kiln_value bad[2] = { shape2(KILN_F32, 3, 4), shape2(KILN_F32, 3, 2) };
    kiln_program *p;
    FAILS(KILN_ERR_INVALID_ARG, kiln_model_program(m, 2, bad, &p, NULL));
    kiln_model_free(m);
  }
  /* y = Reshape(x, s): s is read while importing */
  Buf g = { .n = 0 }, mr = { .n = 0 };
  node(&g, "Reshape", "x", "s", "y");
  f_str(&g, 2, "g");
  int64_t xd[2] = { -1, 4 }, sd[1] = { 2 }, yd[2] = { -1, 4 };
  f_value_info(&g, 11, "x", 1, 2, xd);
  f_value_info(&g, 11, "s", 7, 1, sd);
  f_value_info(&g, 12, "y", 1, 2, yd);
  pb_model(&mr, &g, 13);
  OK(kiln_model_open_buffer(mr.b, mr.n, NULL, NULL, 0, &m));
  if (m) {
    kiln_value v[2] = { shape2(KILN_F32, 2, 4), { .dtype = KILN_I64, .rank = 1, .shape = { 2 }, .numel = 2 } };
    kiln_program *p;
    FAILS(KILN_ERR_INVALID_ARG, kiln_model_program(m, 2, v, &p, NULL));
    CHECK(strstr(kiln_last_error(), "'s'") && strstr(kiln_last_error(), "reads its value"));
    kiln_model_free(m);
  }
}

static void test_open_refusals(void) {
  kiln_model *m = (kiln_model *)1;
  FAILS(KILN_ERR_IO, kiln_model_open("/nonexistent/model.onnx", NULL, 0, &m));
  CHECK(m == NULL && strstr(kiln_last_error(), "/nonexistent/model.onnx"));
  FAILS(KILN_ERR_INVALID_ARG, kiln_model_open(NULL, NULL, 0, &m));
  FAILS(KILN_ERR_INVALID_ARG, kiln_model_open_buffer(NULL, 4, NULL, NULL, 0, &m));
  FAILS(KILN_ERR_MODEL, kiln_model_open_buffer("\xff\xff\xff", 3, NULL, NULL, 0, &m));
  FAILS(KILN_ERR_MODEL, kiln_model_open_buffer("", 0, NULL, NULL, 0, &m));
  /* an input with a sequence type, and one with no type */
  Buf g = { .n = 0 }, mb = { .n = 0 }, vi = { .n = 0 };
  node(&g, "Relu", "x", NULL, "y");
  f_str(&vi, 1, "x");
  f_msg(&g, 11, &vi);
  pb_model(&mb, &g, 13);
  FAILS(KILN_ERR_MODEL, kiln_model_open_buffer(mb.b, mb.n, NULL, NULL, 0, &m));
  CHECK(strstr(kiln_last_error(), "'x'") && strstr(kiln_last_error(), "no type"));
  /* every prefix of a good model: refused with a message or opened, never a crash or leak */
  Buf good = { .n = 0 };
  mlp_model(&good, 0);
  for (size_t cut = 0; cut < good.n; cut++) {
    kiln_model *p = NULL;
    kiln_status s = kiln_model_open_buffer(good.b, cut, NULL, NULL, 0, &p);
    CHECK(s == KILN_OK ? p != NULL : p == NULL && kiln_last_error()[0]);
    kiln_model_free(p);
  }
  /* a file: its folder is where external data is read from */
  char dir[] = "/tmp/kiln-model-XXXXXX", path[PATH_MAX];
  if (mkdtemp(dir) && pb_write_file(dir, "m.onnx", good.b, good.n, path)) {
    OK(kiln_model_open(path, NULL, 1, &m));
    if (m) {
      run_batch(m, 2, 1);
      run_batch(m, 6, 2);
      run_batch(m, 2, 3);  /* capacity 1 */
      kiln_model_free(m);
    }
    unlink(path);
    rmdir(dir);
  }
}

int main(void) {
  test_symbolic_batch();
  test_static_and_data_inputs();
  test_open_refusals();
  TEST_MAIN_END();
}
