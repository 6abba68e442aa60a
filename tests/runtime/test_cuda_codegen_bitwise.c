/*
 * test_cuda_codegen_bitwise.c — and/or/xor/not rendered in the CUDA dialect and compiled
 * by NVRTC for sm_90 (no GPU needed): on every integer dtype a fused chain
 * ((a & b) ^ ~c) | a must render with C's bitwise operators and compile; on bool the
 * same chain stays logical (a '!' for not, no '~'). Fused and unfused plans both.
 * Without NVRTC: "skip: no NVRTC" and pass.
 */
#include "cuda_render.h"

static int n_checked;

static kiln_graph *chain(kiln_dtype t) {
  kiln_graph *g;
  kiln_tensor a, b, c, ab, nc, x, y;
  int64_t n = 37;
  OK(kiln_graph_create(&g));
  OK(kiln_graph_input(g, "a", t, 1, &n, &a));
  OK(kiln_graph_input(g, "b", t, 1, &n, &b));
  OK(kiln_graph_input(g, "c", t, 1, &n, &c));
  OK(kiln_graph_binary(g, KILN_AND, a, b, &ab));
  OK(kiln_graph_unary(g, KILN_NOT, c, &nc));
  OK(kiln_graph_binary(g, KILN_XOR, ab, nc, &x));
  OK(kiln_graph_binary(g, KILN_OR, x, a, &y));
  OK(kiln_graph_output(g, y, "y"));
  return g;
}

static void check(kiln_dtype t, kiln_graph *g, int fuse) {
  const char *nm = kiln_dtype_name(t);
  CudaRender r;
  bool ok = cr_render(g, fuse, &r);
  const char *k = ok ? strstr(r.src.s, "extern \"C\" __global__") : NULL;  /* kernels, past the helpers */
  CHECK_MSG(!r.p || k, "%s (fuse=%d): no kernel in the source", nm, fuse);
  if (ok && k) {
    if (t == KILN_BOOL) {
      CHECK_MSG(!strchr(k, '~'), "bool (fuse=%d): '~' in the kernels\n%s", fuse, k);
      CHECK_MSG(strchr(k, '!') != NULL, "bool (fuse=%d): no logical not\n%s", fuse, k);
    } else {
      CHECK_MSG(strchr(k, '~') != NULL, "%s (fuse=%d): no '~' in the kernels\n%s", nm, fuse, k);
      CHECK_MSG(strstr(k, " & ") && strstr(k, " ^ ") && strstr(k, " | "), "%s (fuse=%d): missing a bitwise operator\n%s",
                nm, fuse, k);
    }
    CHECK_MSG(!strstr(k, "&&") && !strstr(k, "||"), "%s (fuse=%d): logical operator in the kernels\n%s", nm, fuse, k);
    kiln_status st = cr_compile(&r);
    CHECK_MSG(st == KILN_OK, "%s (fuse=%d): %s\n%s", nm, fuse, kiln_last_error(), r.src.s);
    n_checked++;
  }
  cr_free(&r);
}

int main(void) {
  char dir[128];
  if (!cr_begin("cudabw", dir, sizeof dir)) return 0;
  static const kiln_dtype ts[9] = {KILN_I8, KILN_I16, KILN_I32, KILN_I64, KILN_U8,
                                   KILN_U16, KILN_U32, KILN_U64, KILN_BOOL};
  for (int i = 0; i < 9; i++) {
    kiln_graph *g = chain(ts[i]);
    check(ts[i], g, 1);
    check(ts[i], g, 0);
    kiln_graph_free(g);
  }
  printf("%d plans rendered and compiled for sm_90\n", n_checked);
  cr_end(dir);
  TEST_MAIN_END();
}
