/*
 * Resource caps (kiln_options.max_tensor_bytes, max_planned_bytes, max_ref_work): a program
 * over one is refused at compile, before anything is allocated, with KILN_ERR_NO_MEMORY and a
 * message naming the tensor or stage; under them it compiles and runs as before. The
 * defaults come from the environment (KILN_MAX_*), with k/M/G/T suffixes.
 */
#include "test.h"

#include <stdint.h>
#include <stdlib.h>

static kiln_graph *elementwise(int64_t rows, int64_t cols) {
  kiln_graph *g;
  kiln_tensor x, y;
  int64_t s[2] = { rows, cols };
  OK(kiln_graph_create(&g));
  OK(kiln_graph_input(g, "big_x", KILN_F32, 2, s, &x));
  OK(kiln_graph_unary(g, KILN_EXP, x, &y));
  OK(kiln_graph_output(g, y, "y"));
  return g;
}

static kiln_status compile(kiln_graph *g, const char *be, const kiln_options *base, kiln_program **p) {
  kiln_options o = base ? *base : kiln_options_default();
  o.backend = be;
  *p = NULL;
  return kiln_program_compile(g, &o, p);
}

/* A 32 GiB input is over the default 16 GiB tensor cap: refused, by name, nothing allocated. */
static void default_tensor_cap(void) {
  kiln_graph *g = elementwise((int64_t)1 << 21, (int64_t)1 << 12);
  const char *backends[] = { "ref", "cpu" };
  for (int b = 0; b < 2; b++) {
    kiln_program *p;
    FAILS(KILN_ERR_NO_MEMORY, compile(g, backends[b], NULL, &p));
    CHECK(p == NULL);
    CHECK_MSG(strstr(kiln_last_error(), "tensor 'big_x'") && strstr(kiln_last_error(), "32.0 GiB") &&
                  strstr(kiln_last_error(), "max_tensor_bytes"),
              "%s: '%s'", backends[b], kiln_last_error());
  }
  kiln_graph_free(g);
}

static void tensor_cap(void) {
  kiln_options o = kiln_options_default();
  o.max_tensor_bytes = 4096;  /* 1024 floats */
  kiln_graph *g = elementwise(32, 33);  /* 4224 bytes */
  kiln_program *p;
  FAILS(KILN_ERR_NO_MEMORY, compile(g, "cpu", &o, &p));
  CHECK(strstr(kiln_last_error(), "tensor 'big_x'") && strstr(kiln_last_error(), "4224 bytes"));
  kiln_graph_free(g);
  g = elementwise(32, 32);  /* exactly the cap: fine */
  OK(compile(g, "cpu", &o, &p));
  float x[1024] = { 0 }, y[1024];
  if (p) OK(kiln_program_run(p, (const void *[]){ x }, (void *[]){ y }));
  CHECK(p && y[0] == 1.0f && y[1023] == 1.0f);
  kiln_program_free(p);
  kiln_graph_free(g);
}

/* Two inputs and the output, 12 KiB in all on cpu (the caller's buffers are bound, but the
 * program keeps a buffer of its own for each): over 10000 bytes, named by its largest. */
static void planned_cap(void) {
  kiln_graph *g;
  kiln_tensor a, b, y;
  int64_t sa[1] = { 1000 }, sb[1] = { 1000 };
  OK(kiln_graph_create(&g));
  OK(kiln_graph_input(g, "a", KILN_F32, 1, sa, &a));
  OK(kiln_graph_input(g, "b", KILN_F32, 1, sb, &b));
  OK(kiln_graph_binary(g, KILN_ADD, a, b, &y));
  OK(kiln_graph_output(g, y, "y"));
  kiln_options o = kiln_options_default();
  o.max_planned_bytes = 10000;
  kiln_program *p;
  FAILS(KILN_ERR_NO_MEMORY, compile(g, "ref", &o, &p));
  CHECK_MSG(strstr(kiln_last_error(), "would allocate 12000 bytes") && strstr(kiln_last_error(), "max_planned_bytes"),
            "'%s'", kiln_last_error());
  o.max_planned_bytes = 12000;
  OK(compile(g, "ref", &o, &p));
  kiln_program_free(p);
  kiln_graph_free(g);
}

/* A 64x64 by 64x64 matmul is 262144 terms for ref; a cap of 100000 stops ref, not cpu. */
static void ref_work_cap(void) {
  kiln_graph *g;
  kiln_tensor a, w, y;
  int64_t s[2] = { 64, 64 };
  static float wd[64 * 64];
  OK(kiln_graph_create(&g));
  OK(kiln_graph_input(g, "a", KILN_F32, 2, s, &a));
  OK(kiln_graph_param(g, "w", KILN_F32, 2, s, wd, &w));
  OK(kiln_graph_matmul(g, a, w, &y));
  OK(kiln_graph_output(g, y, "y"));
  kiln_options o = kiln_options_default();
  o.max_ref_work = 100000;
  kiln_program *p;
  FAILS(KILN_ERR_NO_MEMORY, compile(g, "ref", &o, &p));
  CHECK_MSG(strstr(kiln_last_error(), "262144") && strstr(kiln_last_error(), "max_ref_work") &&
                strstr(kiln_last_error(), "matmul"),
            "'%s'", kiln_last_error());
  OK(compile(g, "cpu", &o, &p));  /* compiled backends are not bounded by ref's work */
  kiln_program_free(p);
  o.max_ref_work = 0;  /* no cap */
  OK(compile(g, "ref", &o, &p));
  kiln_program_free(p);
  kiln_graph_free(g);
}

static void from_environment(void) {
  setenv("KILN_MAX_TENSOR_BYTES", "3k", 1);
  setenv("KILN_MAX_PLANNED_BYTES", "2G", 1);
  setenv("KILN_MAX_REF_WORK", "1e9", 1);
  kiln_options o = kiln_options_default();
  CHECK(o.max_tensor_bytes == 3072 && o.max_planned_bytes == ((int64_t)2 << 30) && o.max_ref_work == 1000000000);
  setenv("KILN_MAX_TENSOR_BYTES", "lots", 1);  /* not a count: the default stays */
  o = kiln_options_default();
  CHECK(o.max_tensor_bytes == ((int64_t)16 << 30));
  unsetenv("KILN_MAX_TENSOR_BYTES");
  unsetenv("KILN_MAX_PLANNED_BYTES");
  unsetenv("KILN_MAX_REF_WORK");
  o = kiln_options_default();
  CHECK(o.max_planned_bytes == ((int64_t)64 << 30) && o.max_ref_work == 100000000000LL);
}

int main(void) {
  default_tensor_cap();
  tensor_cap();
  planned_cap();
  ref_work_cap();
  from_environment();
  TEST_MAIN_END();
}
