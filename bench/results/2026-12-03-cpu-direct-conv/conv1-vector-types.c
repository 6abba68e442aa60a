#include <stdint.h>
#include <string.h>
typedef float v16 __attribute__((vector_size(64), aligned(4)));
void conv_b(const float *restrict b0, const float *restrict b1, const float *restrict b2, float *restrict b3) {
  #pragma omp parallel for schedule(static)
  for (int64_t n = 0; n < 32; n++) {
    float pad[30][48] __attribute__((aligned(64)));
    memset(pad, 0, sizeof pad);
    for (int h = 0; h < 28; h++) memcpy(&pad[h + 1][1], b1 + n * 784 + h * 28, 28 * 4);
    for (int oc = 0; oc < 16; oc++) {
      float w[9]; for (int k = 0; k < 9; k++) w[k] = b0[oc * 9 + k];
      float *o = b3 + (n * 16 + oc) * 784;
      for (int h = 0; h < 28; h++) {
        v16 a0 = b2[oc] + (v16){0}, a1 = a0;
        for (int kh = 0; kh < 3; kh++)
          for (int kw = 0; kw < 3; kw++) {
            v16 r0 = *(const v16 *)&pad[h + kh][kw], r1 = *(const v16 *)&pad[h + kh][kw + 12];
            a0 += w[kh * 3 + kw] * r0; a1 += w[kh * 3 + kw] * r1;
          }
        v16 z = {0};
        a0 = __builtin_ia32_maxps512_mask(a0, z, z, 0xffff, 4); a1 = __builtin_ia32_maxps512_mask(a1, z, z, 0xffff, 4);
        *(v16 *)&o[h * 28 + 12] = a1;
        *(v16 *)&o[h * 28] = a0;
      }
    }
  }
}
void eb(void *const *a) { conv_b(a[0], a[1], a[2], a[3]); }
