/* kiln_options_set, kiln_options_init and kiln_struct_size: every field by name, bad names
 * and values refused with a message naming them, and the options a program then runs with. */
#include "test.h"

#include <stdio.h>
#include <string.h>

int main(void) {
  CHECK(kiln_struct_size("kiln_census") == sizeof(kiln_census) && kiln_struct_size("kiln_value") == sizeof(kiln_value));
  CHECK(kiln_struct_size("kiln_tensor_info") == sizeof(kiln_tensor_info) && kiln_struct_size("kiln_options") == sizeof(kiln_options));
  CHECK(kiln_struct_size("kiln_value_list") == sizeof(kiln_value_list));
  CHECK(kiln_struct_size("nope") == 0 && kiln_struct_size(NULL) == 0);
  kiln_options o;
  memset(&o, 0x5a, sizeof o);
  OK(kiln_options_init(&o));
  kiln_options d = kiln_options_default();
  CHECK(o.fuse == d.fuse && o.grid_sync == d.grid_sync && !strcmp(o.cc, d.cc));
  OK(kiln_options_set(&o, "backend", "ref"));
  CHECK(o.backend && !strcmp(o.backend, "ref"));
  OK(kiln_options_set(&o, "fuse", "0"));
  OK(kiln_options_set(&o, "grid_sync", "-1"));
  OK(kiln_options_set(&o, "max_tensor_bytes", "1099511627776"));
  OK(kiln_options_set(&o, "cuda_row", "p16"));
  CHECK(o.fuse == 0 && o.grid_sync == -1 && o.max_tensor_bytes == (int64_t)1 << 40 && !strcmp(o.cuda_row, "p16"));
  CHECK(kiln_options_set(&o, "no_such_option", "1") == KILN_ERR_INVALID_ARG);
  CHECK(strstr(kiln_last_error(), "no_such_option"));
  CHECK(kiln_options_set(&o, "fuse", "1x") == KILN_ERR_INVALID_ARG && strstr(kiln_last_error(), "fuse"));
  CHECK(kiln_options_set(&o, "fuse", "") == KILN_ERR_INVALID_ARG);
  CHECK(kiln_options_set(&o, "fuse", "4294967296") == KILN_ERR_INVALID_ARG);  /* past int */
  CHECK(kiln_options_set(&o, "backend", "tpu") == KILN_ERR_INVALID_ARG && strstr(kiln_last_error(), "tpu"));
  CHECK(strstr(kiln_last_error(), "option backend"));
  char longrow[64];
  memset(longrow, 'a', sizeof longrow - 1);
  longrow[sizeof longrow - 1] = 0;
  CHECK(kiln_options_set(&o, "cuda_row", longrow) == KILN_ERR_INVALID_ARG);
  CHECK(!strcmp(o.cuda_row, "p16"));  /* a refused value changes nothing */
  CHECK(kiln_options_set(NULL, "fuse", "1") == KILN_ERR_INVALID_ARG && kiln_options_init(NULL) == KILN_ERR_INVALID_ARG);
  /* the set options are the ones a program compiles with: eager on cpu */
  OK(kiln_options_set(&o, "backend", "cpu"));
  kiln_graph *g;
  kiln_tensor x, y, z;
  int64_t s[1] = { 4 };
  OK(kiln_graph_create(&g));
  OK(kiln_graph_input(g, "x", KILN_F32, 1, s, &x));
  OK(kiln_graph_unary(g, KILN_EXP, x, &y));
  OK(kiln_graph_unary(g, KILN_NEG, y, &z));
  OK(kiln_graph_output(g, z, "z"));
  kiln_program *p;
  OK(kiln_program_compile(g, &o, &p));
  kiln_census c;
  OK(kiln_program_census(p, &c));
  CHECK_MSG(c.kernels_planned == 2, "%lld kernels planned (eager: 2)", (long long)c.kernels_planned);
  /* the plan as Graphviz: a cluster per kernel; ref plans nothing */
  FILE *f = tmpfile();
  CHECK(f);
  if (f) {
    OK(kiln_program_print_dot(p, f));
    rewind(f);
    char text[4096] = "";
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = 0;
    CHECK(!strncmp(text, "digraph", 7) && strstr(text, "cluster_0") && strstr(text, "cluster_1") && !strstr(text, "cluster_2"));
    fclose(f);
  }
  CHECK(kiln_program_print_dot(p, NULL) == KILN_ERR_INVALID_ARG);
  kiln_program_free(p);
  OK(kiln_options_set(&o, "backend", "ref"));
  OK(kiln_program_compile(g, &o, &p));
  f = tmpfile();
  if (f) {
    CHECK(kiln_program_print_dot(p, f) == KILN_ERR_UNSUPPORTED && strstr(kiln_last_error(), "ref"));
    fclose(f);
  }
  kiln_program_free(p);
  kiln_graph_free(g);
  TEST_MAIN_END();
}
