/*
 * kiln train's resident programs in the CUDA dialect, checked by NVRTC without a GPU: the
 * training step of both models (the batch gathered from resident params at a resident step
 * counter, the loss stored into a resident array) and the test net (right answers counted
 * on the device) plan with no host kernel, render one extern "C" kernel per planned kernel
 * and compile for sm_90. What the cpu tests run (tests/tools/test_train_resident.c), the
 * cuda backend can at least build. Without NVRTC: "skip: no NVRTC" and pass.
 */
#include "cuda_render.h"

#include "../../tools/train_models.c"

#define N_IMAGES 64

static void check(const char *what, TrainNet *net) {
  CudaRender r;
  if (cr_render(net->g, 1, &r)) {
    int kernels = 0, host = 0;
    for (int i = 0; i < r.p->n_kernels; i++) {
      kernels += r.p->kernels[i].kind != KN_HOST && r.p->kernels[i].chain >= 0;  /* a chain: its last */
      host += r.p->kernels[i].kind == KN_HOST;
    }
    CHECK_MSG(host == 0, "%s: %d host kernels", what, host);
    int found = 0;
    for (const char *s = r.src.s; (s = strstr(s, "extern \"C\" __global__")); s++) found++;
    CHECK_MSG(found == kernels, "%s: %d kernels in source, %d in plan", what, found, kernels);
    kiln_status st = cr_compile(&r);
    CHECK_MSG(st == KILN_OK, "%s: %s", what, kiln_last_error());
    fprintf(stderr, "%s: %d kernels, compiled by NVRTC\n", what, kernels);
  }
  cr_free(&r);
  train_net_free(net);
}

int main(void) {
  char dir[128];
  if (!cr_begin("resident", dir, sizeof dir)) return 0;
  static float images[N_IMAGES * 784], labels[N_IMAGES * 10];
  unsigned long long seed = 3;
  for (int i = 0; i < N_IMAGES * 784; i++) images[i] = (float)test_rand(&seed);
  for (int i = 0; i < N_IMAGES; i++) labels[i * 10 + i % 10] = 1;
  TrainData d = {.n = N_IMAGES, .images = images, .labels = labels};
  const char *names[2] = {"mlp", "lenet"};
  for (int m = MODEL_MLP; m <= MODEL_LENET; m++) {
    TrainNet net;
    char what[64];
    OK(train_net_build_resident((ModelKind)m, 32, &d, 1, &net));
    OK(kiln_graph_output(net.g, net.loss, "loss"));
    OK(kiln_graph_sgd(net.g, net.loss, net.n_params, net.params, 0.01, 0.9, NULL));
    snprintf(what, sizeof what, "%s resident step", names[m]);
    check(what, &net);
    OK(train_net_build_eval((ModelKind)m, 24, &d, &net));  /* 64 = 2 * 24 + 16: a partial last batch */
    snprintf(what, sizeof what, "%s resident test net", names[m]);
    check(what, &net);
  }
  cr_end(dir);
  TEST_MAIN_END();
}
