/* Built against an installed kiln by tests/install/check-install: y = relu(x @ w + 1) on the
 * default backend, checked element by element against the same sums in plain C. */
#include <kiln.h>

#include <math.h>
#include <stdio.h>

#define FAIL(what) do { fprintf(stderr, "hello: %s: %s\n", what, kiln_last_error()); return 1; } while (0)

int main(void) {
  float x[2 * 3] = { 1, -2, 3, 0.5f, 0.25f, -1 }, w[3 * 2] = { 1, 2, -1, 0.5f, 2, -3 }, y[2 * 2];
  int64_t xs[2] = { 2, 3 }, ws[2] = { 3, 2 };
  kiln_graph *g;
  kiln_tensor tx, tw, t, one, s, r;
  if (kiln_graph_create(&g)) FAIL("create");
  if (kiln_graph_input(g, "x", KILN_F32, 2, xs, &tx) || kiln_graph_input(g, "w", KILN_F32, 2, ws, &tw) ||
      kiln_graph_matmul(g, tx, tw, &t) || kiln_graph_scalar(g, KILN_F32, 1.0, &one) ||
      kiln_graph_binary(g, KILN_ADD, t, one, &s) || kiln_graph_unary(g, KILN_RELU, s, &r) ||
      kiln_graph_output(g, r, "y"))
    FAIL("build");
  kiln_options o = kiln_options_default();
  kiln_program *p;
  if (kiln_program_compile(g, &o, &p)) FAIL("compile");
  const void *in[2] = { x, w };
  void *out[1] = { y };
  if (kiln_program_run(p, in, out)) FAIL("run");
  int bad = 0;
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++) {
      float want = 1;
      for (int k = 0; k < 3; k++) want += x[i * 3 + k] * w[k * 2 + j];
      want = want > 0 ? want : 0;
      if (fabsf(y[i * 2 + j] - want) > 1e-6f) bad++, fprintf(stderr, "y[%d][%d] = %g, want %g\n", i, j, y[i * 2 + j], want);
    }
  kiln_program_free(p);
  kiln_graph_free(g);
  if (!bad) printf("hello: ok\n");
  return bad != 0;
}
