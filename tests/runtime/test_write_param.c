/*
 * kiln_program_write_param: a parameter written from the host reads back as written, the
 * next run computes with it and its assign updates it from there, a run with no inputs and
 * outputs left on the device moves nothing (census), and bad arguments fail with a message
 * naming the tensor. On ref, on cpu, and on cuda where a GPU is present (the write goes
 * through the backend's upload hook, like the compile-time upload of params).
 */
#include "test.h"

#include <stdbool.h>

/* No inputs: y = 2 w; w <- w + 1; counter (i64 scalar) <- counter + 1. */
static void test_write_then_run(const char *be) {
  kiln_graph *g;
  kiln_tensor w, two, y, one, w1, k, k1, kone;
  float w0[4] = {0.5f, -1, 2, 8};
  int64_t k0 = 0;
  OK(kiln_graph_create(&g));
  OK(kiln_graph_param(g, "w", KILN_F32, 1, (const int64_t[]){4}, w0, &w));
  OK(kiln_graph_param(g, "counter", KILN_I64, 0, NULL, &k0, &k));
  OK(kiln_graph_scalar(g, KILN_F32, 2, &two));
  OK(kiln_graph_binary(g, KILN_MUL, w, two, &y));
  OK(kiln_graph_output(g, y, "y"));
  OK(kiln_graph_scalar(g, KILN_F32, 1, &one));
  OK(kiln_graph_binary(g, KILN_ADD, w, one, &w1));
  OK(kiln_graph_assign(g, w, w1));
  OK(kiln_graph_scalar(g, KILN_I64, 1, &kone));
  OK(kiln_graph_binary(g, KILN_ADD, k, kone, &k1));
  OK(kiln_graph_assign(g, k, k1));
  kiln_options o = kiln_options_default();
  o.backend = be;
  kiln_program *p = NULL;
  OK(kiln_program_compile(g, &o, &p));
  if (!p) { kiln_graph_free(g); return; }

  float nw[4] = {3, -4, 0.25f, 100}, got[4] = {0}, out[4] = {0};
  int64_t nk = 41, gk = 0;
  OK(kiln_program_write_param(p, w, nw));
  OK(kiln_program_write_param(p, k, &nk));
  OK(kiln_program_read_param(p, w, got));
  OK(kiln_program_read_param(p, k, &gk));
  CHECK_MSG(!memcmp(got, nw, sizeof got), "%s: w reads back %g %g %g %g", be, got[0], got[1], got[2], got[3]);
  CHECK_MSG(gk == 41, "%s: counter reads back %lld", be, (long long)gk);

  OK(kiln_program_run(p, NULL, (void *[]){out}));  /* the run sees the written value */
  for (int i = 0; i < 4; i++) CHECK_MSG(out[i] == 2 * nw[i], "%s: y[%d] = %g after the write", be, i, out[i]);
  OK(kiln_program_run(p, NULL, NULL));  /* nothing crosses: no inputs, the output stays */
  kiln_census c;
  OK(kiln_program_census(p, &c));
  CHECK_MSG(c.h2d_copies == 0 && c.d2h_copies == 0, "%s: a run without inputs or outputs copied %lld h2d, %lld d2h", be,
            (long long)c.h2d_copies, (long long)c.d2h_copies);
  OK(kiln_program_read_param(p, w, got));
  OK(kiln_program_read_param(p, k, &gk));
  for (int i = 0; i < 4; i++) CHECK_MSG(got[i] == nw[i] + 2, "%s: w[%d] = %g after two runs", be, i, got[i]);
  CHECK_MSG(gk == 43, "%s: counter %lld after two runs, expected 43", be, (long long)gk);

  /* the same write again resets what the assigns moved on */
  OK(kiln_program_write_param(p, k, &k0));
  OK(kiln_program_run(p, NULL, NULL));
  OK(kiln_program_read_param(p, k, &gk));
  CHECK_MSG(gk == 1, "%s: counter %lld after reset and one run", be, (long long)gk);

  FAILS(KILN_ERR_INVALID_ARG, kiln_program_write_param(NULL, w, nw));
  FAILS(KILN_ERR_INVALID_ARG, kiln_program_write_param(p, w, NULL));
  CHECK(strstr(kiln_last_error(), "src is NULL") != NULL);
  FAILS(KILN_ERR_INVALID_ARG, kiln_program_write_param(p, 999, nw));
  CHECK(strstr(kiln_last_error(), "tensor 999 is not in the graph") != NULL);
  FAILS(KILN_ERR_INVALID_ARG, kiln_program_write_param(p, -1, nw));
  FAILS(KILN_ERR_INVALID_ARG, kiln_program_write_param(p, y, nw));
  CHECK_MSG(strstr(kiln_last_error(), "'") && strstr(kiln_last_error(), "is not a parameter"), "message: %s",
            kiln_last_error());
  FAILS(KILN_ERR_INVALID_ARG, kiln_program_write_param(p, two, nw));  /* a constant is not a parameter */
  OK(kiln_program_read_param(p, w, got));  /* failed writes changed nothing */
  for (int i = 0; i < 4; i++) CHECK(got[i] == nw[i] + 3);
  kiln_program_free(p);
  kiln_graph_free(g);
}

/* A string parameter cannot be written (its elements would point at the caller's text). */
static void test_string_param(void) {
  kiln_graph *g;
  kiln_tensor s, t;
  const char *v[2] = {"a", "b"};
  OK(kiln_graph_create(&g));
  OK(kiln_graph_param(g, "names", KILN_STRING, 1, (const int64_t[]){2}, v, &s));
  OK(kiln_graph_reshape(g, s, 2, (const int64_t[]){1, 2}, &t));
  OK(kiln_graph_output(g, t, "t"));
  kiln_options o = kiln_options_default();
  o.backend = "ref";
  kiln_program *p = NULL;
  OK(kiln_program_compile(g, &o, &p));
  if (p) {
    FAILS(KILN_ERR_UNSUPPORTED, kiln_program_write_param(p, s, v));
    CHECK(strstr(kiln_last_error(), "'names'") != NULL);
  }
  kiln_program_free(p);
  kiln_graph_free(g);
}

int main(void) {
  const char *backends[] = {"ref", "cpu", "cuda"};
  for (int i = 0; i < 3; i++) {
    if (i && !test_backend_present(backends[i])) {
      fprintf(stderr, "write_param: %s absent, skipped\n", backends[i]);
      continue;
    }
    test_write_then_run(backends[i]);
  }
  test_string_param();
  TEST_MAIN_END();
}
