/*
 * Pooling output sizes in ceil mode, swept against PyTorch's rule written out here:
 *   out = floor((in + pb + pe - d*(k-1) - 1 + (s - 1)) / s) + 1, then one less when the last
 *   window would start in the end padding ((out-1)*s >= in + pb).
 * (ONNX MaxPool: "sliding windows that would start in the right padded region are ignored".)
 * Floor mode is the plain formula. Every shape also runs once on ref against the window maxima
 * computed here (-inf for a window that holds only padding, which floor mode can keep).
 */
#include "test.h"

static int64_t expected(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe, int ceil) {
  int64_t span = in + pb + pe - d * (k - 1) - 1;
  if (span < 0) return -1;
  int64_t out = (span + (ceil ? s - 1 : 0)) / s + 1;
  if (ceil && out > 1 && (out - 1) * s >= in + pb) out--;
  return out;
}

int main(void) {
  int checked = 0;
  for (int64_t in = 1; in <= 9; in++)
    for (int64_t k = 1; k <= 3; k++)
      for (int64_t s = 1; s <= 3; s++)
        for (int64_t d = 1; d <= 2; d++)
          for (int64_t pb = 0; pb <= 2; pb++)
            for (int64_t pe = 0; pe <= 3; pe++)
              for (int ceil = 0; ceil <= 1; ceil++) {
                int64_t want = expected(in, k, s, d, pb, pe, ceil);
                if (want < 1) continue;
                kiln_graph *g;
                OK(kiln_graph_create(&g));
                int64_t shape[3] = { 1, 1, in };
                kiln_tensor x, y;
                OK(kiln_graph_input(g, "x", KILN_F32, 3, shape, &x));
                kiln_pool_params p = { .spatial = 1, .kernel = { k }, .strides = { s }, .dilations = { d },
                                       .pads = { pb, pe }, .ceil_mode = ceil };
                kiln_status st = kiln_graph_pool(g, KILN_POOL_MAX, x, &p, &y);
                int rank = 0;
                int64_t out[KILN_MAX_RANK] = { 0 };
                if (st == KILN_OK) OK(kiln_tensor_shape(g, y, &rank, out));
                CHECK_MSG(st == KILN_OK && rank == 3 && out[2] == want,
                          "in %lld k %lld s %lld d %lld pads %lld,%lld ceil %d: got %lld, expected %lld",
                          (long long)in, (long long)k, (long long)s, (long long)d, (long long)pb, (long long)pe, ceil,
                          (long long)out[2], (long long)want);
                /* each output window holds at least one input element: no -inf in the result */
                if (st == KILN_OK && out[2] == want) {
                  OK(kiln_graph_output(g, y, "y"));
                  kiln_options o = kiln_options_default();
                  o.backend = "ref";
                  kiln_program *pr;
                  float xin[9], yout[16];
                  for (int i = 0; i < in; i++) xin[i] = (float)(i + 1);
                  OK(kiln_program_compile(g, &o, &pr));
                  OK(kiln_program_run(pr, (const void *[]){ xin }, (void *[]){ yout }));
                  for (int64_t i = 0; i < want; i++) {
                    float m = -INFINITY;
                    for (int64_t j = 0; j < k; j++) {
                      int64_t at = i * s + j * d - pb;
                      if (at >= 0 && at < in && xin[at] > m) m = xin[at];
                    }
                    CHECK_MSG(yout[i] == m, "in %lld k %lld s %lld d %lld pads %lld,%lld ceil %d: y[%lld] = %g, expected %g",
                              (long long)in, (long long)k, (long long)s, (long long)d, (long long)pb, (long long)pe,
                              ceil, (long long)i, yout[i], m);
                  }
                  kiln_program_free(pr);
                }
                kiln_graph_free(g);
                checked++;
              }
  CHECK(checked > 500);
  printf("%d pool shapes checked\n", checked);
  TEST_MAIN_END();
}
