#include <stdio.h>
#include <time.h>
typedef float v8 __attribute__((vector_size(32)));
int main(void) {
  v8 a[12]; v8 b = {1.0001f,1,1,1,1,1,1,1}, c = {1e-7f,0,0,0,0,0,0,0};
  for (int i = 0; i < 12; i++) a[i] = (v8){0};
  struct timespec t0, t1; clock_gettime(CLOCK_MONOTONIC, &t0);
  long n = 200000000;
  for (long k = 0; k < n; k++) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; i++) a[i] = a[i] * b + c;
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
  float sum = 0; for (int i = 0; i < 12; i++) sum += a[i][0];
  printf("%.1f GFLOP/s (%.2f Gfma-vec/s) sum %g\n", n * 12 * 16 / s / 1e9, n * 12 / s / 1e9, sum);
}
