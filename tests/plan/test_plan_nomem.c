/*
 * test_plan_nomem.c — every allocation of planning and rendering can fail: fail the
 * 1st, 2nd, ... allocation after lowering and check each attempt returns
 * KILN_ERR_NO_MEMORY (or succeeds once the count passes the last one) and leaks nothing
 * (the ASan run checks the leaks).
 */
#include "test.h"

#include "../../bench/workloads.c"
#include "codegen/codegen.h"

static void attempt(TE *te, int fuse, long n, bool *done) {
  kiln_options o = kiln_options_default();
  o.fuse = fuse;
  PlanOptions po = plan_options(&o);
  Plan *p = NULL;
  StrBuf sb = { 0 };
  kiln_alloc_fail_after(n);
  kiln_status st = plan_build(te, &po, &p);
  if (!st) st = cg_render_plan(p, &cg_dialect_c, NULL, NULL, &sb);
  kiln_alloc_fail_after(0);
  CHECK_MSG(st == KILN_OK || st == KILN_ERR_NO_MEMORY, "allocation %ld: %s", n, kiln_status_name(st));
  if (st == KILN_OK) CHECK(sb.s && strstr(sb.s, "kiln_k0"));
  *done = st == KILN_OK;
  sb_free(&sb);
  plan_free(p);
}

int main(void) {
  const char *names[] = { "layernorm_8x16", "mlp_fwd_b2" };
  for (int w = 0; w < 2; w++) {
    Workload wl;
    OK(wl_build(names[w], &wl));
    TE *te = NULL;
    OK(te_lower(&wl.g->g, &te));
    for (int fuse = 0; fuse < 2 && te; fuse++) {
      bool done = false;
      long n = 1;
      for (; n < 20000 && !done; n++) attempt(te, fuse, n, &done);
      CHECK_MSG(done, "%s: planning never succeeded", names[w]);
      CHECK_MSG(n > 20, "%s: only %ld allocations were failed", names[w], n);
    }
    te_free(te);
    wl_free(&wl);
  }
  TEST_MAIN_END();
}
