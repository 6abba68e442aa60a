/*
 * test_program_nomem — allocation failures in lowering, checking, compiling and
 * running on ref: failing the nth allocation, for every n until compile succeeds,
 * must return KILN_ERR_NO_MEMORY with a message and leak nothing (the sanitizer
 * build checks leaks); a run that fails the same way leaves the program usable.
 */
#include "test.h"
#include "base/base.h"

static kiln_graph *build(float *w, float *k) {
  kiln_graph *g;
  kiln_tensor x, tw, tk, t, c, y;
  OK(kiln_graph_create(&g));
  OK(kiln_graph_input(g, "x", KILN_F32, 4, (int64_t[]){ 1, 2, 5, 5 }, &x));
  OK(kiln_graph_param(g, "k", KILN_F32, 4, (int64_t[]){ 3, 2, 3, 3 }, k, &tk));
  OK(kiln_graph_param(g, "w", KILN_F32, 2, (int64_t[]){ 75, 4 }, w, &tw));
  kiln_conv_params cp = { .spatial = 2, .pads = { 1, 1, 1, 1 } };
  OK(kiln_graph_conv(g, x, tk, -1, &cp, &c));
  OK(kiln_graph_reshape(g, c, 2, (int64_t[]){ 1, 75 }, &t));
  OK(kiln_graph_matmul(g, t, tw, &t));
  OK(kiln_graph_softmax(g, t, 1, &y));
  OK(kiln_graph_output(g, y, "y"));
  OK(kiln_graph_assign(g, tw, tw));
  return g;
}

int main(void) {
  float w[75 * 4], k[3 * 2 * 9], x[50], y[4], want[4];
  unsigned long long seed = 3;
  for (int i = 0; i < 300; i++) w[i] = (float)test_rand(&seed);
  for (int i = 0; i < 54; i++) k[i] = (float)test_rand(&seed);
  for (int i = 0; i < 50; i++) x[i] = (float)test_rand(&seed);
  kiln_graph *g = build(w, k);
  kiln_options o = kiln_options_default();
  o.backend = "ref";
  kiln_program *p = NULL;
  OK(kiln_program_compile(g, &o, &p));
  if (p) OK(kiln_program_run(p, (const void *[]){ x }, (void *[]){ want }));
  kiln_program_free(p);

  int failures = 0;
  for (long n = 1; n < 100000; n++) {
    p = NULL;
    kiln_alloc_fail_after(n);
    kiln_status st = kiln_program_compile(g, &o, &p);
    kiln_alloc_fail_after(0);
    if (st == KILN_OK) break;
    failures++;
    CHECK_MSG(st == KILN_ERR_NO_MEMORY && p == NULL && kiln_last_error()[0], "n=%ld: %s: %s", n, kiln_status_name(st),
              kiln_last_error());
  }
  CHECK(failures > 5);  /* the loop did reach the allocations it is meant to fail */
  CHECK(p != NULL);
  if (p) {
    int run_failures = 0;
    for (long n = 1; n < 100000; n++) {
      kiln_alloc_fail_after(n);
      kiln_status st = kiln_program_run(p, (const void *[]){ x }, (void *[]){ y });
      kiln_alloc_fail_after(0);
      if (st == KILN_OK) break;
      run_failures++;
      CHECK_MSG(st == KILN_ERR_NO_MEMORY, "run n=%ld: %s", n, kiln_status_name(st));
    }
    CHECK(run_failures > 0);
    OK(kiln_program_run(p, (const void *[]){ x }, (void *[]){ y }));
    for (int i = 0; i < 4; i++) CHECK(y[i] == want[i]);
  }
  kiln_program_free(p);
  kiln_graph_free(g);
  TEST_MAIN_END();
}
