/*
 * test_models — the 23 onnx-simple tests and the three models of ../shared/models
 * (mlp, lenet, encoder4_d256) on the ref backend against their reference outputs
 * (rtol 1e-3, atol 1e-5). The six StringNormalizer tests compare their strings byte for
 * byte.
 * Under ASan (KILN_SANITIZED=1) the three models are loaded and compiled but not run:
 * the interpreter at -O0 with ASan needs minutes for them (the normal build runs them).
 */
#include "onnx_util.h"

#include <dirent.h>
#include <time.h>

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int run_on(const char *dir, const char *name, const char *backend, bool run) {
  double err, t0 = now_s();
  kiln_status s = onnx_check_dir(dir, backend, 1e-3, 1e-5, run, &err);
  CHECK_MSG(s == KILN_OK, "%s on %s: %s: %s", name, backend, kiln_status_name(s), kiln_last_error());
  if (s == KILN_OK)
    printf("%s on %s: %s (max abs err %.3g, %.2f s)\n", name, backend, run ? "ok" : "loaded and compiled", err, now_s() - t0);
  return s == KILN_OK;
}

static int run_dir(const char *dir, const char *name, bool run) { return run_on(dir, name, "ref", run); }

int main(void) {
  const char *shared = onnx_shared_dir();
  if (!shared) {
    printf("skip: ../shared is absent\n");
    return 0;
  }
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/conformance/onnx-simple", shared);
  DIR *d = opendir(dir);
  CHECK(d != NULL);
  int n = 0, passed = 0;
  struct dirent *e;
  while (d && (e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char t[PATH_MAX + 256];
    snprintf(t, sizeof t, "%s/%s", dir, e->d_name);
    passed += run_dir(t, e->d_name, true);
    n++;
  }
  if (d) closedir(d);
  CHECK_MSG(n == 23, "found %d onnx-simple tests, expected 23", n);
  CHECK_MSG(passed == 23, "%d onnx-simple tests passed, expected all 23", passed);
  const char *models[] = { "mlp", "lenet", "encoder4_d256", "gpt_tiny", "convnet_mini" };
  bool sanitized = kiln_env_int("KILN_SANITIZED", 0) != 0;
  for (int i = 0; i < 3; i++) {
    snprintf(dir, sizeof dir, "%s/models/%s", shared, models[i]);
    CHECK(run_dir(dir, models[i], !sanitized) == 1);
  }
  /* all five on the backend under test (cpu unless KILN_TEST_BACKEND says); on cpu again with
   * the attention chains (KILN_ATTENTION=1, the cuda default: the C dialect renders them too)
   * with GEMM prologues recomputed once per 32-wide tile (KILN_GEMM_REUSE=32, raced), and with
   * narrow contractions in their rows' kernels (KILN_GEMM_ROWS=1, the cuda default: the mlp's
   * logits and softmax), and with the chains' outputs stored in their readers' order
   * (KILN_CHAIN_LAYOUT=1 beside KILN_ATTENTION=1: the two models with chains) */
  const char *be = getenv("KILN_TEST_BACKEND");
  be = be && *be ? be : "cpu";
  static const char *const envs[5][2] = { { NULL, NULL }, { "KILN_ATTENTION", "1" }, { "KILN_GEMM_REUSE", "32" },
                                          { "KILN_GEMM_ROWS", "1" }, { "KILN_CHAIN_LAYOUT", "1" } };
  for (int pass = 0; pass < 5; pass++) {
    if (pass && strcmp(be, "cpu")) break;
    if (envs[pass][0]) setenv(envs[pass][0], envs[pass][1], 1);
    if (pass == 4) setenv("KILN_ATTENTION", "1", 1);
    for (int i = 0; i < 5; i++) {
      if (pass == 3 && strcmp(models[i], "mlp")) continue;  /* the one model with such a pair */
      if (pass == 4 && strcmp(models[i], "encoder4_d256") && strcmp(models[i], "gpt_tiny")) continue;
      snprintf(dir, sizeof dir, "%s/models/%s", shared, models[i]);
      CHECK(run_on(dir, models[i], be, true) == 1);
    }
    if (envs[pass][0]) unsetenv(envs[pass][0]);
    unsetenv("KILN_ATTENTION");
  }
  /* wide pairs (KILN_GEMM_ROWS=2, cuda's default: the layernorms after their GEMMs; with KILN_REORDER_SUMS=3
   * encoder4_d256's output projections too, computed in their layernorms' order) on the backend under
   * test; on cuda as the GEMMs' tiles, shared (3, the default: met by flags), with each band's rows in its
   * last tile (1), and in the warp-a-row form (0) */
  setenv("KILN_GEMM_ROWS", "2", 1);
  setenv("KILN_REORDER_SUMS", "3", 1);
  for (int bands = 3; bands >= 0; bands -= bands == 3 ? 2 : 1) {
    if (bands != 3 && strcmp(be, "cuda")) break;
    setenv("KILN_CUDA_PAIR_BANDS", bands == 3 ? "3" : bands ? "1" : "0", 1);
    static const char *const wide[2] = { "gpt_tiny", "encoder4_d256" };
    for (int i = 0; i < 2; i++) {
      snprintf(dir, sizeof dir, "%s/models/%s", shared, wide[i]);
      CHECK(run_on(dir, wide[i], be, true) == 1);
    }
  }
  unsetenv("KILN_CUDA_PAIR_BANDS");
  unsetenv("KILN_REORDER_SUMS");
  unsetenv("KILN_GEMM_ROWS");
  /* layernorms at the head of their projections' tiles (KILN_GEMM_HEADS=1, cuda's: elsewhere the same
   * plan as the default): gpt_tiny's pre-norm ones, encoder4_d256's post-norm ones (stored as well) */
  for (int heads = 1; heads <= 3 && !strcmp(be, "cuda"); heads += 2) {  /* 3: the rows shared by clusters */
    setenv("KILN_GEMM_HEADS", heads == 3 ? "3" : "1", 1);
    static const char *const headed[2] = { "gpt_tiny", "encoder4_d256" };
    for (int i = 0; i < 2; i++) {
      snprintf(dir, sizeof dir, "%s/models/%s", shared, headed[i]);
      CHECK(run_on(dir, headed[i], be, true) == 1);
    }
    unsetenv("KILN_GEMM_HEADS");
  }
  /* ONNX Attention exports that form attention chains (test_plan checks that they do): grouped
   * query heads, boolean and additive masks, causal, softcap, past and present, f16, padded keys;
   * on the backend under test with the chains forced on, their outputs in the chain's order and
   * then in their readers' (KILN_CHAIN_LAYOUT=1) */
  static const char *const attn[] = { "test_attention_3d_gqa_causal", "test_attention_4d_attn_mask_bool",
                                      "test_attention_4d_diff_heads_sizes_softcap", "test_attention_4d_causal_with_past_and_present",
                                      "test_attention_3d_diff_heads_sizes_scaled", "test_attention_4d_fp16",
                                      "test_attention_4d_diff_heads_mask4d_padded_kv" };
  setenv("KILN_ATTENTION", "1", 1);
  for (int layout = 0; layout < 2; layout++) {
    setenv("KILN_CHAIN_LAYOUT", layout ? "1" : "0", 1);
    for (size_t i = 0; i < sizeof attn / sizeof attn[0]; i++) {
      snprintf(dir, sizeof dir, "%s/conformance/onnx-node/%s", shared, attn[i]);
      CHECK(run_on(dir, attn[i], be, true) == 1);
    }
  }
  unsetenv("KILN_CHAIN_LAYOUT");
  unsetenv("KILN_ATTENTION");
  TEST_MAIN_END();
}
