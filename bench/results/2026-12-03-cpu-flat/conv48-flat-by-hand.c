/* convnet_mini's 48 -> 48 3x3 convolution at 24x24 (bias, relu) in flat planes, by hand: one copy of
 * the plane a window column at the output's pitch, 8 channels x 3 vectors (2 rows of 24) a task.
 * 55.7 us at two threads (the generated row form 74, the generated flat form 62). Drop-in for the
 * kernel of that name in the generated source of `kiln plan convnet_mini --source c`; time with
 * 2026-12-02-cpu-kernel-harness.c (kiln_e5 20736 27648 48 27648). */
#include <omp.h>
#include <string.h>
#include <stdint.h>
void kiln_k5(const float *restrict b0, const float *restrict b1, const float *restrict b2, float *restrict b3) {
  typedef float kiln_v __attribute__((vector_size(64), aligned(4)));
  enum { C = 48, H = 24, W = 24, P = (H + 2) * W + 16, OB = 8, V = 3, NV = H * W / 16 };
  #pragma omp parallel
  {
    static __thread float pl[3][C][P] __attribute__((aligned(64)));
    int nt = omp_get_num_threads(), me = omp_get_thread_num();
    int nblk = (NV + V - 1) / V, ncb = (C + OB - 1) / OB, ntask = nblk * ncb;
    int t0 = (int)((long)ntask * me / nt), t1 = (int)((long)ntask * (me + 1) / nt);
    /* rows this thread reads */
    int q0 = (t0 / ncb) * V * 16, q1 = ((t1 - 1) / ncb + 1) * V * 16; if (q1 > H*W) q1 = H*W;
    int y0 = q0 / W - 1, y1 = (q1 - 1) / W + 1;  /* input rows y0..y1 inclusive */
    if (y0 < -1) y0 = -1; if (y1 > H) y1 = H;
    for (int c = 0; c < C; c++)
      for (int y = y0; y <= y1; y++) {
        float *r0 = pl[0][c] + (y + 1) * W, *r1 = pl[1][c] + (y + 1) * W, *r2 = pl[2][c] + (y + 1) * W;
        if (y >= 0 && y < H) {
          const float *src = b1 + c * H * W + y * W;
          r0[0] = 0;
          #pragma omp simd
          for (int x = 1; x < W; x++) r0[x] = src[x - 1];
          #pragma omp simd
          for (int x = 0; x < W; x++) r1[x] = src[x];
          #pragma omp simd
          for (int x = 0; x < W - 1; x++) r2[x] = src[x + 1];
          r2[W - 1] = 0;
        } else {
          for (int x = 0; x < W; x++) r0[x] = r1[x] = r2[x] = 0;
        }
      }
    for (int t = t0; t < t1; t++) {
      int o0 = t % ncb * OB, q = t / ncb * V * 16;
      if (q + V * 16 > H * W) q = H * W - V * 16;
      kiln_v acc[OB][V];
      memset(acc, 0, sizeof acc);
      for (int c = 0; c < C; c++) {
        for (int dy = 0; dy < 3; dy++)
          for (int dx = 0; dx < 3; dx++) {
            const float *pp = pl[dx][c] + q + dy * W;
            kiln_v x[V];
            #pragma GCC unroll 8
            for (int u = 0; u < V; u++) x[u] = *(const kiln_v *)(pp + 16 * u);
            #pragma GCC unroll 8
            for (int i = 0; i < OB; i++) {
              const float w = b0[(o0 + i) * C * 9 + c * 9 + dy * 3 + dx];
              #pragma GCC unroll 8
              for (int u = 0; u < V; u++) acc[i][u] += w * x[u];
            }
          }
      }
      float d[OB][V * 16] __attribute__((aligned(64)));
      memcpy(d, acc, sizeof d);
      for (int i = 0; i < OB; i++) {
        const float bb = b2[o0 + i];
        #pragma omp simd
        for (int j = 0; j < V * 16; j++) { float s = d[i][j] + bb; b3[(o0 + i) * H * W + q + j] = s > 0 ? s : 0; }
      }
    }
  }
}
