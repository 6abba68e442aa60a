/* kiln_program_device, _set_input_buffer and _output_buffer: one program's output handed to
 * another's input where both keep it (on cuda device to device, nothing through the host; on
 * cpu and ref host memory), and the refusals (another device, a wrong size, strings, before
 * a run). Runs on cpu, ref and, where the machine has it, cuda (which KILN_TEST_BACKEND=cuda
 * requires). */
#include "test.h"

#include <stdint.h>

/* y = x * k + 1 over n floats. */
static kiln_program *scale_program(const char *backend, float k, int64_t n, kiln_graph **gp) {
  kiln_graph *g;
  kiln_tensor x, c, one, m, y;
  if (kiln_graph_create(&g)) return NULL;
  OK(kiln_graph_input(g, "x", KILN_F32, 1, &n, &x));
  OK(kiln_graph_scalar(g, KILN_F32, k, &c));
  OK(kiln_graph_scalar(g, KILN_F32, 1, &one));
  OK(kiln_graph_binary(g, KILN_MUL, x, c, &m));
  OK(kiln_graph_binary(g, KILN_ADD, m, one, &y));
  OK(kiln_graph_output(g, y, "y"));
  kiln_options o = kiln_options_default();
  o.backend = backend;
  kiln_program *p = NULL;
  if (kiln_program_compile(g, &o, &p)) p = NULL;
  *gp = g;
  return p;
}

static void test_backend(const char *backend) {
  enum { N = 1000 };
  kiln_graph *ga, *gb;
  kiln_program *a = scale_program(backend, 2, N, &ga), *b = scale_program(backend, 3, N, &gb);
  if (!a || !b) {
    printf("%s: not available here (%s)\n", backend, kiln_last_error());
    const char *want = getenv("KILN_TEST_BACKEND");  /* gpu-check sets cuda: then it must be here */
    CHECK(!strcmp(backend, "cuda") && !(want && !strcmp(want, "cuda")));
    kiln_program_free(a);
    kiln_program_free(b);
    kiln_graph_free(ga);
    kiln_graph_free(gb);
    return;
  }
  kiln_buffer da, db;
  OK(kiln_program_device(a, &da));
  OK(kiln_program_device(b, &db));
  bool device = !strcmp(backend, "cuda");
  CHECK(da.device_type == (device ? KILN_DEVICE_CUDA : KILN_DEVICE_HOST) && da.device_id == 0);
  CHECK(device ? da.stream != 0 && da.stream != db.stream : da.stream == 0);
  kiln_buffer out;
  FAILS(KILN_ERR_INVALID_ARG, kiln_program_output_buffer(a, 0, &out));  /* nothing has run */
  static float x[N], y[N];
  for (int i = 0; i < N; i++) x[i] = (float)i / 7;
  const void *in[1] = { x };
  void *none[1] = { NULL };
  OK(kiln_program_run(a, in, none));  /* y stays where a keeps it */
  OK(kiln_program_output_buffer(a, 0, &out));
  CHECK(out.address && out.bytes == N * 4 && out.device_type == da.device_type);
  kiln_census c;
  OK(kiln_program_census(a, &c));
  if (device) CHECK(c.d2h_bytes == 0 && c.d2h_copies == 0);
  /* a's output is b's input: written by work on a's stream */
  kiln_buffer src = out;
  src.stream = da.stream;
  OK(kiln_program_set_input_buffer(b, 0, &src));
  OK(kiln_program_run(b, NULL, none));
  OK(kiln_program_census(b, &c));
  CHECK(c.h2d_bytes == 0);  /* the input came from a, not the host */
  OK(kiln_program_read_output(b, 0, y));
  for (int i = 0; i < N; i++) CHECK_NEAR(y[i], (x[i] * 2 + 1) * 3 + 1, 1e-6);
  /* a run that writes the caller's buffer keeps nothing on the host */
  void *outs[1] = { y };
  OK(kiln_program_run(a, in, outs));
  if (!device) FAILS(KILN_ERR_INVALID_ARG, kiln_program_output_buffer(a, 0, &out));
  /* refusals */
  kiln_buffer bad = src;
  bad.bytes = 4;
  FAILS(KILN_ERR_INVALID_ARG, kiln_program_set_input_buffer(b, 0, &bad));
  CHECK(strstr(kiln_last_error(), "'x'") && strstr(kiln_last_error(), "4 bytes"));
  bad = src;
  bad.device_type = device ? KILN_DEVICE_HOST : KILN_DEVICE_CUDA;
  FAILS(KILN_ERR_INVALID_ARG, kiln_program_set_input_buffer(b, 0, &bad));
  bad = src;
  bad.device_id = 3;
  FAILS(KILN_ERR_INVALID_ARG, kiln_program_set_input_buffer(b, 0, &bad));
  bad = src;
  bad.address = 0;
  FAILS(KILN_ERR_INVALID_ARG, kiln_program_set_input_buffer(b, 0, &bad));
  FAILS(KILN_ERR_INVALID_ARG, kiln_program_set_input_buffer(b, 1, &src));
  FAILS(KILN_ERR_INVALID_ARG, kiln_program_set_input_buffer(b, 0, NULL));
  FAILS(KILN_ERR_INVALID_ARG, kiln_program_set_input_buffer(NULL, 0, &src));
  FAILS(KILN_ERR_INVALID_ARG, kiln_program_output_buffer(b, -1, &out));
  FAILS(KILN_ERR_INVALID_ARG, kiln_program_output_buffer(b, 0, NULL));
  FAILS(KILN_ERR_INVALID_ARG, kiln_program_device(NULL, &out));
  kiln_program_free(a);
  kiln_program_free(b);
  kiln_graph_free(ga);
  kiln_graph_free(gb);
}

/* Strings have no device buffer. */
static void test_strings(void) {
  kiln_graph *g;
  kiln_tensor s;
  int64_t n = 2;
  OK(kiln_graph_create(&g));
  OK(kiln_graph_input(g, "s", KILN_STRING, 1, &n, &s));
  OK(kiln_graph_output(g, s, "t"));
  kiln_options o = kiln_options_default();
  o.backend = "cpu";
  kiln_program *p;
  OK(kiln_program_compile(g, &o, &p));
  const char *v[2] = { "a", "b" }, *w[2];
  const void *in[1] = { v };
  void *out[1] = { w };
  OK(kiln_program_run(p, in, out));
  kiln_buffer b = { .device_type = KILN_DEVICE_HOST, .address = (uintptr_t)v, .bytes = sizeof v };
  FAILS(KILN_ERR_UNSUPPORTED, kiln_program_set_input_buffer(p, 0, &b));
  FAILS(KILN_ERR_UNSUPPORTED, kiln_program_output_buffer(p, 0, &b));
  CHECK(strstr(kiln_last_error(), "strings"));
  kiln_program_free(p);
  kiln_graph_free(g);
}

int main(void) {
  test_backend("cpu");
  test_backend("ref");
  test_backend("cuda");
  test_strings();
  TEST_MAIN_END();
}
