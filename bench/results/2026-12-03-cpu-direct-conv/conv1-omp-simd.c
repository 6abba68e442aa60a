#include <stdint.h>
#include <string.h>
static inline float k_maxf(float a, float b) { return a > b ? a : b; }
void conv_m(const float *restrict b0, const float *restrict b1, const float *restrict b2, float *restrict b3) {
  #pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < 32; n++) {
    float pad[30][48] __attribute__((aligned(64)));
    memset(pad, 0, sizeof pad);
    for (int h = 0; h < 28; h++) memcpy(&pad[h + 1][1], b1 + n * 784 + h * 28, 28 * 4);
    for (int oc = 0; oc < 16; oc++) {
      float *o = b3 + (n * 16 + oc) * 784;
      float w[9]; for (int q = 0; q < 9; q++) w[q] = b0[oc * 9 + q];
      const float bias = b2[oc];
      for (int h = 0; h < 28; h++) {
        for (int c = 0; c < 28; c += 16) {
          const int b = c + 16 <= 28 ? c : 12;
          #pragma omp simd
          for (int j = b; j < b + 16; j++) {
            float a = 0;
            for (int kh = 0; kh < 3; kh++)
              for (int kw = 0; kw < 3; kw++) a += w[kh * 3 + kw] * pad[h + kh][j + kw];
            o[h * 28 + j] = k_maxf(a + bias, 0);
          }
        }
      }
    }
  }
}
void em(void *const *a) { conv_m(a[0], a[1], a[2], a[3]); }
