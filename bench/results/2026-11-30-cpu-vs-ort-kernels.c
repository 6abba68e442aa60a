/*
 * 2026-11-30-cpu-vs-ort-kernels.c — the evidence behind the diagnosis in
 * 2026-11-30-cpu-vs-ort.md. Two kernels that kiln's cpu backend generated (copied verbatim
 * from KILN_DEBUG=2 output of `kiln bench` at 3e43e28, renamed gen_mlp_k1 / gen_lenet_k2; k_maxf
 * written out), timed beside
 * hand-written loops that compute the same values with other loop orders and weight layouts.
 * Not part of the build (bench/results/ is not globbed).
 *
 *   cc -O3 -march=native -fopenmp -fno-math-errno -std=gnu11 -w \
 *      bench/results/2026-11-30-cpu-vs-ort-kernels.c -o /tmp/kernels -lm && OMP_NUM_THREADS=1 /tmp/kernels
 *
 * Same flags as the cpu backend compiles its kernels with. Each variant is checked against the
 * generated kernel's output.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* ---- generated: mlp kernel 1, relu(t10 @ l2.weight^T + l2.bias), weight [512,512] read transposed ---- */
void gen_mlp_k1(const float *restrict b0, const float *restrict b1, const float *restrict b2, float *restrict b3) {
  #pragma omp parallel for schedule(static)
  for (int64_t o = 0; o < INT64_C(128); o++) {
    const int64_t v0 = o / INT64_C(1);
    double a12[512];
    for (int64_t j = 0; j < 512; j++) a12[j] = 0;
    for (int64_t r = 0; r < INT64_C(512); r++) {
      const int64_t v2 = r / INT64_C(1);
      int64_t t0 = (v0 * INT64_C(512));
      int64_t t1 = (t0 + v2);
      float t2 = b0[t1];
      #pragma omp simd
      for (int64_t v1 = 0; v1 < INT64_C(512); v1++) {
        int64_t t3 = (v1 * INT64_C(512));
        int64_t t4 = (t3 + v2);
        float t5 = b1[t4];
        float t6 = t2 * t5;
        a12[v1] += (double)t6;
      }
    }
    for (int64_t v1 = 0; v1 < INT64_C(512); v1++) {
      float s12 = (float)a12[v1];
      float t7 = b2[v1];
      float t8 = s12 + t7;
      float t9 = (t8 != t8 ? NAN : t8 > 0 ? t8 : 0);
      float s14 = t9;
      int64_t t10 = (v0 * INT64_C(512));
      int64_t t11 = (t10 + v1);
      b3[t11] = s14;
    }
  }
}

/* ---- generated: lenet kernel 2, conv c2 (x [32,16,14,14], w [32,16,3,3], pad 1, no bias) ---- */
void gen_lenet_k2(const float *restrict b0, const float *restrict b1, float *restrict b2) {
  #pragma omp parallel for schedule(static)
  for (int64_t o = 0; o < INT64_C(14336); o++) {
    const int64_t v2 = o % INT64_C(14);
    const int64_t v1 = (o / INT64_C(14)) % INT64_C(32);
    const int64_t v0 = o / INT64_C(448);
    double a14[14];
    for (int64_t j = 0; j < 14; j++) a14[j] = 0;
    for (int64_t r = 0; r < INT64_C(144); r++) {
      const int64_t v6 = r % INT64_C(3);
      const int64_t v5 = (r / INT64_C(3)) % INT64_C(3);
      const int64_t v4 = r / INT64_C(9);
      int64_t t0 = (v4 * INT64_C(9));
      int64_t t1 = (v1 * INT64_C(144));
      int64_t t2 = (t0 + t1);
      int64_t t3 = (v5 * INT64_C(3));
      int64_t t4 = (t2 + t3);
      int64_t t5 = (t4 + v6);
      float t6 = b0[t5];
      int64_t t7 = (v5 + v2);
      int64_t t8 = (t7 - INT64_C(1));
      uint8_t t9 = (t8 >= INT64_C(0));
      uint8_t t10 = (t8 < INT64_C(14));
      uint8_t t11 = (uint8_t)(t9 & t10);
      int64_t t12 = (v4 * INT64_C(196));
      int64_t t13 = (v0 * INT64_C(3136));
      int64_t t14 = (t12 + t13);
      int64_t t15 = (t8 > INT64_C(0) ? t8 : INT64_C(0));
      int64_t t16 = (t15 < INT64_C(13) ? t15 : INT64_C(13));
      int64_t t17 = (t16 * INT64_C(14));
      int64_t t18 = (t14 + t17);
      #pragma omp simd
      for (int64_t v3 = 0; v3 < INT64_C(14); v3++) {
        int64_t t19 = (v6 + v3);
        int64_t t20 = (t19 - INT64_C(1));
        uint8_t t21 = (t20 >= INT64_C(0));
        uint8_t t22 = (t20 < INT64_C(14));
        uint8_t t23 = (uint8_t)(t21 & t22);
        uint8_t t24 = (uint8_t)(t11 & t23);
        int64_t t25 = (t20 > INT64_C(0) ? t20 : INT64_C(0));
        int64_t t26 = (t25 < INT64_C(13) ? t25 : INT64_C(13));
        int64_t t27 = (t18 + t26);
        float t28 = b1[t27];
        float t29 = (t24 ? t28 : 0x0p+0f);
        float t30 = t6 * t29;
        a14[v3] += (double)t30;
      }
    }
    for (int64_t v3 = 0; v3 < INT64_C(14); v3++) {
      float s14 = (float)a14[v3];
      int64_t t31 = (v0 * INT64_C(6272));
      int64_t t32 = (v1 * INT64_C(196));
      int64_t t33 = (t31 + t32);
      int64_t t34 = (v2 * INT64_C(14));
      int64_t t35 = (t33 + t34);
      int64_t t36 = (t35 + v3);
      b2[t36] = s14;
    }
  }
}

/* ---- the same matmul, other loop orders and layouts (M 128, N 512, K 512) ---- */
enum { M = 128, N = 512, K = 512 };

/* The generated loop order again, with the weight's rows padded to 513 floats: the only change
 * is that the stride of the inner loop's weight reads is no longer a power of two. */
__attribute__((noinline)) static void mm_padded(const float *restrict x, const float *restrict w, const float *restrict b,
                                                float *restrict y) {
  for (int64_t o = 0; o < M; o++) {
    float a[N];
    for (int64_t j = 0; j < N; j++) a[j] = 0;
    for (int64_t r = 0; r < K; r++) {
      float xv = x[o * K + r];
      #pragma omp simd
      for (int64_t j = 0; j < N; j++) a[j] += xv * w[j * (K + 1) + r];
    }
    for (int64_t j = 0; j < N; j++) y[o * N + j] = fmaxf(a[j] + b[j], 0);
  }
}

/* Dot-product order: both operands are contiguous along r, so the vector loop is the reduction. */
__attribute__((noinline)) static void mm_dot(const float *restrict x, const float *restrict w, const float *restrict b,
                                             float *restrict y) {
  for (int64_t o = 0; o < M; o++)
    for (int64_t j = 0; j < N; j++) {
      float s = 0;
      #pragma omp simd reduction(+:s)
      for (int64_t r = 0; r < K; r++) s += x[o * K + r] * w[j * K + r];
      y[o * N + j] = fmaxf(s + b[j], 0);
    }
}

/* The generated loop order on a weight transposed once beforehand (wt [K,N]): unit stride. */
__attribute__((noinline)) static void mm_packed(const float *restrict x, const float *restrict wt, const float *restrict b,
                                                float *restrict y) {
  for (int64_t o = 0; o < M; o++) {
    float a[N];
    for (int64_t j = 0; j < N; j++) a[j] = 0;
    for (int64_t r = 0; r < K; r++) {
      float xv = x[o * K + r];
      #pragma omp simd
      for (int64_t j = 0; j < N; j++) a[j] += xv * wt[r * N + j];
    }
    for (int64_t j = 0; j < N; j++) y[o * N + j] = fmaxf(a[j] + b[j], 0);
  }
}

/* As mm_packed with the double accumulator the renderer emits at 3e43e28 (`double a[N]`). */
__attribute__((noinline)) static void mm_packed_f64(const float *restrict x, const float *restrict wt, const float *restrict b,
                                                    float *restrict y) {
  for (int64_t o = 0; o < M; o++) {
    double a[N];
    for (int64_t j = 0; j < N; j++) a[j] = 0;
    for (int64_t r = 0; r < K; r++) {
      float xv = x[o * K + r];
      #pragma omp simd
      for (int64_t j = 0; j < N; j++) a[j] += (double)(xv * wt[r * N + j]);
    }
    for (int64_t j = 0; j < N; j++) y[o * N + j] = fmaxf((float)a[j] + b[j], 0);
  }
}

/* Transposed weight and a 4-row x 64-column register tile: each weight vector loaded once serves 4 rows. */
__attribute__((noinline)) static void mm_tiled(const float *restrict x, const float *restrict wt, const float *restrict b,
                                               float *restrict y) {
  for (int64_t o = 0; o < M; o += 4)
    for (int64_t j0 = 0; j0 < N; j0 += 64) {
      float a[4][64] = { { 0 } };
      for (int64_t r = 0; r < K; r++)
        for (int i = 0; i < 4; i++) {
          float xv = x[(o + i) * K + r];
          #pragma omp simd
          for (int64_t j = 0; j < 64; j++) a[i][j] += xv * wt[r * N + j0 + j];
        }
      for (int i = 0; i < 4; i++)
        for (int64_t j = 0; j < 64; j++) y[(o + i) * N + j0 + j] = fmaxf(a[i][j] + b[j0 + j], 0);
    }
}

/* ---- the same convolution, vectorised over output channels (NB 32, CI 16, CO 32, 14x14, 3x3, pad 1) ---- */
enum { NB = 32, CI = 16, CO = 32, H = 14, W = 14 };

/* wp is the weight packed once as [ci][kh][kw][co]; borders are skipped per tap, not masked per lane. */
__attribute__((noinline)) static void conv_chan(const float *restrict wp, const float *restrict x, float *restrict y) {
  for (int n = 0; n < NB; n++)
    for (int h = 0; h < H; h++)
      for (int ww = 0; ww < W; ww++) {
        float acc[CO] = { 0 };
        for (int ci = 0; ci < CI; ci++)
          for (int kh = 0; kh < 3; kh++) {
            int ih = h + kh - 1;
            if (ih < 0 || ih >= H) continue;
            for (int kw = 0; kw < 3; kw++) {
              int iw = ww + kw - 1;
              if (iw < 0 || iw >= W) continue;
              float xv = x[((n * CI + ci) * H + ih) * W + iw];
              const float *wr = wp + ((ci * 3 + kh) * 3 + kw) * CO;
              #pragma omp simd
              for (int co = 0; co < CO; co++) acc[co] += xv * wr[co];
            }
          }
        for (int co = 0; co < CO; co++) y[((n * CO + co) * H + h) * W + ww] = acc[co];
      }
}

/* ---- timing ---- */

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static float *randoms(size_t n, unsigned *seed) {
  float *p = malloc(n * sizeof *p);
  if (!p) exit(1);
  for (size_t i = 0; i < n; i++) p[i] = (float)rand_r(seed) / (float)RAND_MAX - 0.5f;
  return p;
}

static double maxdiff(const float *a, const float *b, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
  return m;
}

typedef enum { GEN_MM, MM_PADDED, MM_DOT, MM_PACKED, MM_PACKED_F64, MM_TILED, GEN_CONV, CONV_CHAN, N_VARIANTS } Variant;

int main(void) {
  unsigned seed = 1;
  float *x = randoms(M * K, &seed), *w = randoms(N * K, &seed), *b = randoms(N, &seed);
  float *wpad = calloc(N * (K + 1), sizeof *wpad), *wt = malloc(sizeof *wt * N * K);
  float *cx = randoms(NB * CI * H * W, &seed), *cw = randoms(CO * CI * 9, &seed), *cwp = malloc(sizeof *cwp * CO * CI * 9);
  float *ref = malloc(sizeof *ref * NB * CO * H * W), *y = malloc(sizeof *y * NB * CO * H * W);
  if (!wpad || !wt || !cwp || !ref || !y) return 1;
  for (int j = 0; j < N; j++)
    for (int r = 0; r < K; r++) wpad[j * (K + 1) + r] = w[j * K + r], wt[r * N + j] = w[j * K + r];
  for (int co = 0; co < CO; co++)
    for (int k = 0; k < CI * 9; k++) cwp[k * CO + co] = cw[co * CI * 9 + k];
  static const char *names[N_VARIANTS] = {
    "mlp k1 as generated (W stride 512)", "  same loop, W stride 513", "  dot-product order", "  W transposed once",
    "  W transposed once, double acc", "  W transposed once, 4x64 tile", "lenet k2 as generated", "  over out-channels, w packed once",
  };
  for (int v = 0; v < N_VARIANTS; v++) {
    double best = 1e30;
    for (int rep = 0; rep < 3; rep++) {
      double t0 = now_ms();
      switch ((Variant)v) {
      case GEN_MM: gen_mlp_k1(x, w, b, ref); break;
      case MM_PADDED: mm_padded(x, wpad, b, y); break;
      case MM_DOT: mm_dot(x, w, b, y); break;
      case MM_PACKED: mm_packed(x, wt, b, y); break;
      case MM_PACKED_F64: mm_packed_f64(x, wt, b, y); break;
      case MM_TILED: mm_tiled(x, wt, b, y); break;
      case GEN_CONV: gen_lenet_k2(cw, cx, ref); break;
      case CONV_CHAN: conv_chan(cwp, cx, y); break;
      default: break;
      }
      best = fmin(best, now_ms() - t0);
    }
    int conv = v >= GEN_CONV;
    double flop = conv ? 2.0 * NB * CO * H * W * CI * 9 : 2.0 * M * N * K;
    size_t n = conv ? (size_t)NB * CO * H * W : (size_t)M * N;
    int is_ref = v == GEN_MM || v == GEN_CONV;
    printf("%-36s %9.3f ms %8.2f GFLOP/s", names[v], best, flop / best / 1e6);
    if (is_ref) printf("\n");
    else printf("  max diff vs generated %.2g\n", maxdiff(ref, y, n));
  }
  return 0;
}
