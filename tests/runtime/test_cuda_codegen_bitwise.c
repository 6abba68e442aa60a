/*
 * test_cuda_codegen_bitwise.c — and/or/xor/not rendered in the CUDA dialect and compiled
 * by NVRTC for sm_90 (no GPU needed): on every integer dtype a fused chain
 * ((a & b) ^ ~c) | a must render with C's bitwise operators and compile; on bool the
 * same chain stays logical (a '!' for not, no '~'). Fused and unfused plans both.
 * Without NVRTC: "skip: no NVRTC" and pass.
 */
#include "test.h"
#include "codegen/codegen.h"
#include "runtime/cuda/cudadrv.h"

#include <string.h>
#include <unistd.h>

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
  TE *te = NULL;
  Plan *p = NULL;
  StrBuf src = {0};
  kiln_options o = kiln_options_default();
  o.fuse = fuse;
  PlanOptions po = plan_options(&o);
  OK(te_lower(&g->g, &te));
  if (te) OK(plan_build(te, &po, &p));
  if (p) OK(cg_render_plan(p, &cg_dialect_cuda, &src));
  const char *k = src.s ? strstr(src.s, "extern \"C\" __global__") : NULL;  /* kernels, past the helpers */
  CHECK_MSG(!p || k, "%s (fuse=%d): no kernel in the source", nm, fuse);
  if (p && k) {
    if (t == KILN_BOOL) {
      CHECK_MSG(!strchr(k, '~'), "bool (fuse=%d): '~' in the kernels\n%s", fuse, k);
      CHECK_MSG(strchr(k, '!') != NULL, "bool (fuse=%d): no logical not\n%s", fuse, k);
    } else {
      CHECK_MSG(strchr(k, '~') != NULL, "%s (fuse=%d): no '~' in the kernels\n%s", nm, fuse, k);
      CHECK_MSG(strstr(k, " & ") && strstr(k, " ^ ") && strstr(k, " | "), "%s (fuse=%d): missing a bitwise operator\n%s",
                nm, fuse, k);
    }
    CHECK_MSG(!strstr(k, "&&") && !strstr(k, "||"), "%s (fuse=%d): logical operator in the kernels\n%s", nm, fuse, k);
    void *bin = NULL;
    size_t n = 0;
    bool hit;
    kiln_status st = cuda_compile(src.s, "sm_90", 0, NULL, &bin, &n, &hit);
    CHECK_MSG(st == KILN_OK, "%s (fuse=%d): %s\n%s", nm, fuse, kiln_last_error(), src.s);
    kiln_free(bin);
    n_checked++;
  }
  sb_free(&src);
  plan_free(p);
  te_free(te);
}

int main(void) {
  CudaNvrtc *r;
  if (cuda_nvrtc(&r) != KILN_OK) {
    printf("skip: no NVRTC (%s)\n", kiln_last_error());
    return 0;
  }
  char dir[128];
  snprintf(dir, sizeof dir, "/tmp/kiln-test-cudabw-%ld", (long)getpid());
  setenv("KILN_CACHE_DIR", dir, 1);
  static const kiln_dtype ts[9] = {KILN_I8, KILN_I16, KILN_I32, KILN_I64, KILN_U8,
                                   KILN_U16, KILN_U32, KILN_U64, KILN_BOOL};
  for (int i = 0; i < 9; i++) {
    kiln_graph *g = chain(ts[i]);
    check(ts[i], g, 1);
    check(ts[i], g, 0);
    kiln_graph_free(g);
  }
  printf("%d plans rendered and compiled for sm_90\n", n_checked);
  char cmd[200];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  TEST_MAIN_END();
}
