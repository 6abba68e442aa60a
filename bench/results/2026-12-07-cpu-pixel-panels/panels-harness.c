/* The sums of a 1x1 convolution in channel lanes, M output channels x N pixels over K channels,
 * P weight vectors x R pixels a task (GCC vector types, as kiln generates them), the pixels
 * broadcast from panels [block][K][R] (copied first, timed) or in place (INPLACE=1: the operand
 * [K][N], a row of N floats a channel). Build: gcc -O3 -march=native -fopenmp -fno-math-errno
 * -fno-trapping-math -std=gnu11 panels-harness.c; run: OMP_NUM_THREADS=2 ./a.out [M N K]. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <stdint.h>
#include <omp.h>
typedef float v8 __attribute__((vector_size(32), aligned(4)));
#define K_KEEP(v) __asm__("" : "+v"(v))
static int M = 512, N = 49, K = 2048;
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
/* wp [M/(P*8)][K][P*8]; xp [NB][K][R] */
#define RUN(P, R) \
static void run_##P##_##R(const float *restrict wp, const float *restrict xp, float *restrict y, int inplace) { \
  int NB = (N + R - 1) / R, OB = M / (P * 8); \
  _Pragma("omp parallel for schedule(static)") \
  for (int t = 0; t < OB * NB; t++) { \
    int ob = t % OB, pb = t / OB; \
    const float *w = wp + (int64_t)ob * K * P * 8, *xk = inplace ? xp + pb * R : xp + (int64_t)pb * K * R; const int xs = inplace ? N : R; \
    v8 a[P][R]; \
    for (int p = 0; p < P; p++) for (int r = 0; r < R; r++) a[p][r] = (v8){0}; \
    for (int k = 0; k < K; k++, xk += xs, w += P * 8) { \
      v8 wv[P]; \
      _Pragma("GCC unroll 4") for (int p = 0; p < P; p++) wv[p] = *(const v8 *)(w + p * 8); \
      _Pragma("GCC unroll 16") for (int r = 0; r < R; r++) { float s = xk[r]; _Pragma("GCC unroll 4") for (int p = 0; p < P; p++) a[p][r] += wv[p] * s; } \
    } \
    float tt[P][R][8]; memcpy(tt, a, sizeof tt); \
    int q0 = pb * R, rn = N - q0 < R ? N - q0 : R; \
    for (int p = 0; p < P; p++) for (int r = 0; r < rn; r++) for (int l = 0; l < 8; l++) y[(ob*P*8+p*8+l)*N+q0+r] = tt[p][r][l]; \
  } }
RUN(2,6) RUN(2,7) RUN(3,3) RUN(3,4) RUN(4,3) RUN(1,7) RUN(1,8) RUN(2,5) RUN(1,12)
static void pack(const float *x, float *xp, int R) {
  int NB = (N + R - 1) / R;
  #pragma omp parallel for
  for (int pb = 0; pb < NB; pb++) for (int k = 0; k < K; k++) for (int r = 0; r < R; r++) { int q = pb * R + r; xp[((int64_t)pb * K + k) * R + r] = q < N ? x[k * N + q] : 0; }
}
int main(int argc, char **argv) { int inpl = getenv("INPLACE") != NULL;
  if (argc > 3) M = atoi(argv[1]), N = atoi(argv[2]), K = atoi(argv[3]);
  float *w = aligned_alloc(64, sizeof(float) * M * K), *wp = aligned_alloc(64, sizeof(float) * M * K);
  float *x = aligned_alloc(64, sizeof(float) * (K * N + 64)), *xp = aligned_alloc(64, sizeof(float) * K * (N + 16)), *y = aligned_alloc(64, sizeof(float) * M * N);
  for (int i = 0; i < M * K; i++) w[i] = (float)((i * 7919) % 1000) / 1000 - 0.5f;
  for (int i = 0; i < K * N; i++) x[i] = (float)((i * 104729) % 1000) / 1000 - 0.5f;
  struct { const char *n; void (*f)(const float*, const float*, float*, int); int P, R; } fs[] = {
    {"2x6", run_2_6, 2, 6}, {"2x7", run_2_7, 2, 7}, {"3x3", run_3_3, 3, 3}, {"3x4", run_3_4, 3, 4}, {"4x3", run_4_3, 4, 3}, {"1x7", run_1_7, 1, 7}, {"1x8", run_1_8, 1, 8}, {"2x5", run_2_5, 2, 5}, {"1x12", run_1_12, 1, 12} };
  double fl = 2.0 * M * N * K;
  for (int rep = 0; rep < 2; rep++) {
    printf("%dx%dx%d t%d:", M, N, K, omp_get_max_threads());
    for (size_t i = 0; i < sizeof fs / sizeof *fs; i++) {
      int PL = fs[i].P * 8; if (M % PL) continue;
      for (int ob = 0; ob < M / PL; ob++) for (int k = 0; k < K; k++) for (int c = 0; c < PL; c++) wp[((int64_t)ob * K + k) * PL + c] = w[(int64_t)(ob * PL + c) * K + k];
      double b = 1e9;
      for (int it = 0; it < 12; it++) { double t = now(); if (inpl) fs[i].f(wp, x, y, 1); else { pack(x, xp, fs[i].R); fs[i].f(wp, xp, y, 0); } t = now() - t; if (t < b) b = t; }
      double err = 0; for (int m = 0; m < M; m += 101) for (int n = 0; n < N; n++) { double s = 0; for (int k = 0; k < K; k++) s += (double)w[m*K+k]*x[k*N+n]; double e = s - y[m*N+n]; if (e<0) e=-e; if (e>err) err=e; }
      printf(" %s %5.0f%s", fs[i].n, fl / b / 1e9, err > 1e-3 ? "!" : "");
    }
    printf("  GF/s\n");
  }
}
