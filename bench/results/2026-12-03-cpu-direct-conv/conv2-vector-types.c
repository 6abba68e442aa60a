#include <stdint.h>
#include <string.h>
#include <immintrin.h>
typedef float v16 __attribute__((vector_size(64), aligned(4)));
/* b0 W[32][16][3][3], b1 in[32][16][14][14], b2 bias[32], b3 out[32][32][14][14] */
#define OB 8
#define RR 2
void conv2(const float *restrict b0, const float *restrict b1, const float *restrict b2, float *restrict b3) {
  #pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < 32; n++) {
    float pad[16][16][32] __attribute__((aligned(64)));
    memset(pad, 0, sizeof pad);
    for (int c = 0; c < 16; c++)
      for (int h = 0; h < 14; h++) memcpy(&pad[c][h + 1][1], b1 + ((n * 16 + c) * 14 + h) * 14, 14 * 4);
    for (int ob = 0; ob < 32; ob += OB) {
      for (int h = 0; h < 14; h += RR) {
        v16 a[OB][RR];
        for (int i = 0; i < OB; i++) for (int r = 0; r < RR; r++) a[i][r] = b2[ob + i] + (v16){0};
        for (int c = 0; c < 16; c++)
          for (int kh = 0; kh < 3; kh++)
            for (int kw = 0; kw < 3; kw++) {
              v16 x[RR]; for (int r = 0; r < RR; r++) x[r] = *(const v16 *)&pad[c][h + r + kh][kw];
              for (int i = 0; i < OB; i++) {
                float w = b0[(((ob + i) * 16 + c) * 3 + kh) * 3 + kw];
                for (int r = 0; r < RR; r++) a[i][r] += w * x[r];
              }
            }
        for (int i = 0; i < OB; i++)
          for (int r = 0; r < RR; r++) {
            v16 z = {0};
            v16 y = __builtin_ia32_maxps512_mask(a[i][r], z, z, 0xffff, 4);
            _mm512_mask_storeu_ps(b3 + ((n * 32 + ob + i) * 14 + h + r) * 14, 0x3fff, (__m512)y);
          }
      }
    }
  }
}
void e2(void *const *a) { conv2(a[0], a[1], a[2], a[3]); }
