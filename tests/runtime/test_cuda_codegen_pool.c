/*
 * test_cuda_codegen_pool.c — max pooling on integer dtypes rendered in the CUDA dialect
 * and compiled by NVRTC for sm_90 (no GPU needed). For every integer dtype, windows that
 * touch padding (ceil mode too), a long 1-d window and a pool with a fused add after it
 * must render and compile, and their kernels must carry no float infinity or NaN (the
 * window's padding and the max's start are the dtype's lowest value, and there is no
 * NaN flag); the same graphs in f32 must name both, so that check can fail. Fused and
 * unfused plans. Without NVRTC: "skip: no NVRTC" and pass.
 */
#include "cuda_render.h"

static int n_checked;

static kiln_tensor pool(kiln_graph *g, kiln_tensor x, int sp, const int64_t *k, const int64_t *s, const int64_t *pads,
                        int ceil_mode) {
  kiln_pool_params p;
  memset(&p, 0, sizeof p);
  p.spatial = sp;
  p.ceil_mode = ceil_mode;
  for (int i = 0; i < sp; i++) p.kernel[i] = k[i], p.strides[i] = s[i];
  for (int i = 0; i < 2 * sp; i++) p.pads[i] = pads[i];
  kiln_tensor y = -1;
  OK(kiln_graph_pool(g, KILN_POOL_MAX, x, &p, &y));
  return y;
}

/* Three pools of t: 2-d with pads and ceil, a 1-d window of 64 over 256, and a 2-d pool
 * plus a second input (an epilogue fused into the reduction). */
static kiln_graph *pools(kiln_dtype t) {
  kiln_graph *g;
  kiln_tensor a, b, c, ya, yb, yc, z;
  int64_t sa[4] = {2, 3, 6, 7}, sb[3] = {1, 4, 256}, sc[4] = {1, 8, 16, 16}, sz[4] = {1, 8, 8, 8};
  OK(kiln_graph_create(&g));
  OK(kiln_graph_input(g, "a", t, 4, sa, &a));
  OK(kiln_graph_input(g, "b", t, 3, sb, &b));
  OK(kiln_graph_input(g, "c", t, 4, sc, &c));
  OK(kiln_graph_input(g, "z", t, 4, sz, &z));
  int64_t k2[2] = {3, 3}, s2[2] = {2, 2}, p2[4] = {1, 1, 1, 1}, k1[1] = {64}, s1[1] = {64}, p1[2] = {0, 0};
  int64_t p0[4] = {0, 0, 0, 0}, kc[2] = {2, 2};
  ya = pool(g, a, 2, k2, s2, p2, 1);
  yb = pool(g, b, 1, k1, s1, p1, 0);
  yc = pool(g, c, 2, kc, s2, p0, 0);
  OK(kiln_graph_binary(g, KILN_ADD, yc, z, &yc));
  OK(kiln_graph_output(g, ya, "ya"));
  OK(kiln_graph_output(g, yb, "yb"));
  OK(kiln_graph_output(g, yc, "yc"));
  return g;
}

static void check(kiln_dtype t, kiln_graph *g, int fuse) {
  const char *nm = kiln_dtype_name(t);
  CudaRender r;
  bool ok = cr_render(g, fuse, &r);
  const char *k = ok ? strstr(r.src.s, "extern \"C\" __global__") : NULL;  /* kernels, past the helpers */
  CHECK_MSG(!r.p || k, "%s (fuse=%d): no kernel in the source", nm, fuse);
  if (ok && k) {
    bool fl = t == KILN_F32, inf = strstr(k, "K_INF") != NULL, nan = strstr(k, "K_NAN") != NULL;
    CHECK_MSG(inf == fl && nan == fl, "%s (fuse=%d): kernels %s infinity, %s NaN\n%s", nm, fuse, inf ? "name" : "lack",
              nan ? "name" : "lack", k);
    kiln_status st = cr_compile(&r);
    CHECK_MSG(st == KILN_OK, "%s (fuse=%d): %s\n%s", nm, fuse, kiln_last_error(), r.src.s);
    n_checked++;
  }
  cr_free(&r);
}

int main(void) {
  char dir[128];
  if (!cr_begin("cudapool", dir, sizeof dir)) return 0;
  static const kiln_dtype ts[9] = {KILN_I8, KILN_I16, KILN_I32, KILN_I64, KILN_U8,
                                   KILN_U16, KILN_U32, KILN_U64, KILN_F32};
  for (int i = 0; i < 9; i++) {
    kiln_graph *g = pools(ts[i]);
    check(ts[i], g, 1);
    check(ts[i], g, 0);
    kiln_graph_free(g);
  }
  printf("%d plans rendered and compiled for sm_90\n", n_checked);
  cr_end(dir);
  TEST_MAIN_END();
}
