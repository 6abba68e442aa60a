/*
 * test_ref — whole graphs through kiln_program_* on the ref backend, against values
 * computed here with naive loops: an MLP (matmul + bias + relu), a grouped, strided,
 * dilated, padded conv, softmax, pooling; assign semantics (outputs see the old
 * parameter, every assign reads before any writes), read_param, the census of the
 * oracle, and argument errors. A stage large enough to be shared among threads gives the
 * same bits on 1 and 3 threads, and leaves no thread behind once the run returns (OpenMP's
 * idle threads did, spinning beside the cpu backend's team).
 */
#include "test.h"

#include <omp.h>
#if defined(__linux__)
#include <dirent.h>
#endif
#include <time.h>

static kiln_options ref_options(void) {
  kiln_options o = kiln_options_default();
  o.backend = "ref";
  return o;
}

static void fill(float *p, int n, unsigned long long seed) {
  for (int i = 0; i < n; i++) p[i] = (float)test_rand(&seed);
}

static void test_mlp(void) {
  enum { B = 5, I = 7, H = 6, O = 3 };
  float x[B * I], w1[I * H], b1[H], w2[H * O], y[B * O];
  fill(x, B * I, 1); fill(w1, I * H, 2); fill(b1, H, 3); fill(w2, H * O, 4);
  kiln_graph *g;
  kiln_tensor tx, tw1, tb1, tw2, t, ty;
  OK(kiln_graph_create(&g));
  OK(kiln_graph_input(g, "x", KILN_F32, 2, (int64_t[]){ B, I }, &tx));
  OK(kiln_graph_param(g, "w1", KILN_F32, 2, (int64_t[]){ I, H }, w1, &tw1));
  OK(kiln_graph_param(g, "b1", KILN_F32, 1, (int64_t[]){ H }, b1, &tb1));
  OK(kiln_graph_param(g, "w2", KILN_F32, 2, (int64_t[]){ H, O }, w2, &tw2));
  OK(kiln_graph_matmul(g, tx, tw1, &t));
  OK(kiln_graph_binary(g, KILN_ADD, t, tb1, &t));
  OK(kiln_graph_unary(g, KILN_RELU, t, &t));
  OK(kiln_graph_matmul(g, t, tw2, &ty));
  OK(kiln_graph_output(g, ty, "y"));
  kiln_options o = ref_options();
  kiln_program *p = NULL;
  OK(kiln_program_compile(g, &o, &p));
  kiln_graph_free(g);  /* the program must not need the graph any more */
  if (!p) return;
  OK(kiln_program_run(p, (const void *[]){ x }, (void *[]){ y }));
  OK(kiln_program_run(p, (const void *[]){ x }, (void *[]){ y }));
  for (int b = 0; b < B; b++)
    for (int o2 = 0; o2 < O; o2++) {
      double acc = 0;
      for (int h = 0; h < H; h++) {
        double s = b1[h];
        for (int i = 0; i < I; i++) s += (double)x[b * I + i] * w1[i * H + h];
        acc += (s > 0 ? s : 0) * w2[h * O + o2];
      }
      CHECK_NEAR(y[b * O + o2], acc, 1e-5);
    }
  kiln_census c;
  OK(kiln_program_census(p, &c));
  CHECK(c.runs == 2 && c.kernels_launched == 0 && c.host_fallbacks == 0 && c.fallback_ops[0] == 0);
  kiln_program_free(p);
}

/* x [N, C, H, W], w [M, C/G, KH, KW]; bias; strides, pads, dilations, groups. */
static void test_conv(void) {
  enum { N = 2, C = 4, Hh = 7, W = 6, M = 6, G = 2, KH = 3, KW = 2 };
  kiln_conv_params cp = { .spatial = 2, .strides = { 2, 1 }, .dilations = { 1, 2 }, .pads = { 1, 0, 1, 1 }, .group = G };
  int OH = (Hh + 1 + 1 - ((KH - 1) * 1 + 1)) / 2 + 1, OW = (W + 0 + 1 - ((KW - 1) * 2 + 1)) / 1 + 1;
  float x[N * C * Hh * W], w[M * (C / G) * KH * KW], bias[M], y[N * M * 4 * 5];
  CHECK(OH == 4 && OW == 5);
  fill(x, N * C * Hh * W, 5); fill(w, M * (C / G) * KH * KW, 6); fill(bias, M, 7);
  kiln_graph *g;
  kiln_tensor tx, tw, tb, ty;
  OK(kiln_graph_create(&g));
  OK(kiln_graph_input(g, "x", KILN_F32, 4, (int64_t[]){ N, C, Hh, W }, &tx));
  OK(kiln_graph_param(g, "w", KILN_F32, 4, (int64_t[]){ M, C / G, KH, KW }, w, &tw));
  OK(kiln_graph_param(g, "b", KILN_F32, 1, (int64_t[]){ M }, bias, &tb));
  OK(kiln_graph_conv(g, tx, tw, tb, &cp, &ty));
  OK(kiln_graph_output(g, ty, "y"));
  int rank;
  int64_t shape[KILN_MAX_RANK];
  OK(kiln_tensor_shape(g, ty, &rank, shape));
  CHECK(rank == 4 && shape[2] == OH && shape[3] == OW);
  kiln_options o = ref_options();
  kiln_program *p = NULL;
  OK(kiln_program_compile(g, &o, &p));
  if (p) OK(kiln_program_run(p, (const void *[]){ x }, (void *[]){ y }));
  for (int n = 0; n < N; n++)
    for (int m = 0; m < M; m++)
      for (int oh = 0; oh < OH; oh++)
        for (int ow = 0; ow < OW; ow++) {
          double s = bias[m];
          int gi = m / (M / G);
          for (int c = 0; c < C / G; c++)
            for (int kh = 0; kh < KH; kh++)
              for (int kw = 0; kw < KW; kw++) {
                int ih = oh * 2 - 1 + kh, iw = ow - 0 + kw * 2;
                if (ih < 0 || ih >= Hh || iw < 0 || iw >= W) continue;
                s += (double)x[((n * C + gi * (C / G) + c) * Hh + ih) * W + iw] * w[((m * (C / G) + c) * KH + kh) * KW + kw];
              }
          CHECK_NEAR(y[((n * M + m) * OH + oh) * OW + ow], s, 1e-5);
        }
  kiln_program_free(p);
  kiln_graph_free(g);
}

static void test_softmax(void) {
  float x[3 * 5], y[3 * 5];
  fill(x, 15, 8);
  x[7] = 30;  /* large: a naive exp without the max would still be fine in f64, not the point */
  kiln_graph *g;
  kiln_tensor tx, ty;
  OK(kiln_graph_create(&g));
  OK(kiln_graph_input(g, "x", KILN_F32, 2, (int64_t[]){ 3, 5 }, &tx));
  OK(kiln_graph_softmax(g, tx, -1, &ty));
  OK(kiln_graph_output(g, ty, "y"));
  kiln_options o = ref_options();
  kiln_program *p = NULL;
  OK(kiln_program_compile(g, &o, &p));
  if (p) OK(kiln_program_run(p, (const void *[]){ x }, (void *[]){ y }));
  for (int r = 0; r < 3; r++) {
    double mx = -INFINITY, z = 0;
    for (int j = 0; j < 5; j++) mx = fmax(mx, x[r * 5 + j]);
    for (int j = 0; j < 5; j++) z += exp(x[r * 5 + j] - mx);
    for (int j = 0; j < 5; j++) CHECK_NEAR(y[r * 5 + j], exp(x[r * 5 + j] - mx) / z, 1e-6);
  }
  kiln_program_free(p);
  kiln_graph_free(g);
}

/* Threads of this process now; -1 where that cannot be read. */
static int threads_alive(void) {
#if defined(__linux__)
  DIR *d = opendir("/proc/self/task");
  if (!d) return -1;
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) n += e->d_name[0] != '.';
  closedir(d);
  return n;
#else
  return -1;
#endif
}

/* Threads of this process once those already joined have left /proc: a thread's id is
 * cleared (and pthread_join returns) a moment before the kernel drops its task entry, so
 * a count taken at once may still see it (CI under ASan did). Waits up to 2 s for `want`. */
static int threads_settle(int want) {
  int n = threads_alive();
  for (int i = 0; i < 200 && n != want; i++) {
    nanosleep(&(struct timespec){ .tv_nsec = 10 * 1000 * 1000 }, NULL);
    n = threads_alive();
  }
  return n;
}

/* A product of 8192 points of 256 terms each: over 2^20 points of work, so ref shares it out. */
static void test_large_stage(void) {
  enum { M = 64, K = 256, N = 128 };
  static float a[M * K], b[K * N], y1[M * N], y3[M * N];
  fill(a, M * K, 11); fill(b, K * N, 12);
  kiln_graph *g;
  kiln_tensor ta, tb, ty;
  OK(kiln_graph_create(&g));
  OK(kiln_graph_input(g, "a", KILN_F32, 2, (int64_t[]){ M, K }, &ta));
  OK(kiln_graph_param(g, "b", KILN_F32, 2, (int64_t[]){ K, N }, b, &tb));
  OK(kiln_graph_matmul(g, ta, tb, &ty));
  OK(kiln_graph_output(g, ty, "y"));
  kiln_options o = ref_options();
  kiln_program *p = NULL;
  OK(kiln_program_compile(g, &o, &p));
  int before_threads = omp_get_max_threads();
  if (p) {
    omp_set_num_threads(1);
    OK(kiln_program_run(p, (const void *[]){ a }, (void *[]){ y1 }));
    omp_set_num_threads(3);
    int alive = threads_alive();
    OK(kiln_program_run(p, (const void *[]){ a }, (void *[]){ y3 }));
    if (alive >= 0) CHECK(threads_settle(alive) == alive);
  }
  omp_set_num_threads(before_threads);
  CHECK(memcmp(y1, y3, sizeof y1) == 0);
  for (int i = 0; i < M; i += 7)
    for (int j = 0; j < N; j += 5) {
      double sum = 0;
      for (int k = 0; k < K; k++) sum += (double)a[i * K + k] * b[k * N + j];
      CHECK_NEAR(y3[i * N + j], sum, 1e-5);
    }
  kiln_program_free(p);
  kiln_graph_free(g);
}

/* Max and average pooling, 2-D, padded, strided, ceil mode, both count modes. */
static void test_pool(int kind, int include_pad, int ceil_mode) {
  enum { N = 1, C = 2, Hh = 5, W = 6 };
  kiln_pool_params pp = { .spatial = 2, .kernel = { 3, 2 }, .strides = { 2, 2 }, .pads = { 1, 1, 1, 0 },
                          .ceil_mode = ceil_mode, .count_include_pad = include_pad };
  float x[N * C * Hh * W], y[64];
  fill(x, N * C * Hh * W, 9);
  kiln_graph *g;
  kiln_tensor tx, ty;
  OK(kiln_graph_create(&g));
  OK(kiln_graph_input(g, "x", KILN_F32, 4, (int64_t[]){ N, C, Hh, W }, &tx));
  OK(kiln_graph_pool(g, kind, tx, &pp, &ty));
  OK(kiln_graph_output(g, ty, "y"));
  int rank;
  int64_t sh[KILN_MAX_RANK];
  OK(kiln_tensor_shape(g, ty, &rank, sh));
  kiln_options o = ref_options();
  kiln_program *p = NULL;
  OK(kiln_program_compile(g, &o, &p));
  if (p) OK(kiln_program_run(p, (const void *[]){ x }, (void *[]){ y }));
  for (int c = 0; c < C; c++)
    for (int oh = 0; oh < sh[2]; oh++)
      for (int ow = 0; ow < sh[3]; ow++) {
        double s = 0, mx = -INFINITY;
        int valid = 0, padded = 0;
        for (int kh = 0; kh < 3; kh++)
          for (int kw = 0; kw < 2; kw++) {
            int ih = oh * 2 - 1 + kh, iw = ow * 2 - 1 + kw;
            if (ih >= -1 && ih < Hh + 1 && iw >= -1 && iw < W + 0) padded++;
            if (ih < 0 || ih >= Hh || iw < 0 || iw >= W) continue;
            valid++;
            s += x[(c * Hh + ih) * W + iw];
            mx = fmax(mx, x[(c * Hh + ih) * W + iw]);
          }
        double want = kind == KILN_POOL_MAX ? mx : s / (include_pad ? padded : valid);
        CHECK_NEAR(y[(c * sh[2] + oh) * sh[3] + ow], want, 1e-6);
      }
  kiln_program_free(p);
  kiln_graph_free(g);
}

/* Outputs are computed from the parameter before the update; assigns read first. */
static void test_assign(void) {
  float a0[4] = { 1, 2, 3, 4 }, b0[4] = { 10, 20, 30, 40 }, x[4] = { 0.5f, 0.25f, -1, 2 }, y[4], a[4], b[4];
  kiln_graph *g;
  kiln_tensor ta, tb, tx, ty, tnew;
  OK(kiln_graph_create(&g));
  OK(kiln_graph_input(g, "x", KILN_F32, 1, (int64_t[]){ 4 }, &tx));
  OK(kiln_graph_param(g, "a", KILN_F32, 1, (int64_t[]){ 4 }, a0, &ta));
  OK(kiln_graph_param(g, "b", KILN_F32, 1, (int64_t[]){ 4 }, b0, &tb));
  OK(kiln_graph_binary(g, KILN_MUL, ta, tx, &ty));
  OK(kiln_graph_binary(g, KILN_ADD, tb, tx, &tnew));
  OK(kiln_graph_output(g, ty, "y"));
  OK(kiln_graph_assign(g, ta, tnew));  /* a <- b + x */
  OK(kiln_graph_assign(g, tb, ta));    /* b <- a (the old a) */
  kiln_options o = ref_options();
  kiln_program *p = NULL;
  OK(kiln_program_compile(g, &o, &p));
  if (!p) { kiln_graph_free(g); return; }
  float ea[4], eb[4];
  memcpy(ea, a0, sizeof ea);
  memcpy(eb, b0, sizeof eb);
  for (int run = 0; run < 3; run++) {
    OK(kiln_program_run(p, (const void *[]){ x }, (void *[]){ y }));
    for (int i = 0; i < 4; i++) CHECK(y[i] == ea[i] * x[i]);
    for (int i = 0; i < 4; i++) {
      float na = eb[i] + x[i];
      eb[i] = ea[i];
      ea[i] = na;
    }
    OK(kiln_program_read_param(p, ta, a));
    OK(kiln_program_read_param(p, tb, b));
    CHECK(!memcmp(a, ea, sizeof a) && !memcmp(b, eb, sizeof b));
  }
  FAILS(KILN_ERR_INVALID_ARG, kiln_program_read_param(p, tx, a));
  FAILS(KILN_ERR_INVALID_ARG, kiln_program_read_param(p, 999, a));
  kiln_census c;
  OK(kiln_program_census(p, &c));
  CHECK(c.runs == 3);
  kiln_program_free(p);
  kiln_graph_free(g);
}

static void test_errors(void) {
  kiln_graph *g;
  kiln_tensor tx, ty;
  OK(kiln_graph_create(&g));
  OK(kiln_graph_input(g, "x", KILN_F32, 1, (int64_t[]){ 4 }, &tx));
  OK(kiln_graph_unary(g, KILN_EXP, tx, &ty));
  OK(kiln_graph_output(g, ty, "y"));
  kiln_options o = kiln_options_default();
  o.backend = "no-such-backend";
  kiln_program *p = (kiln_program *)&o;
  FAILS(KILN_ERR_INVALID_ARG, kiln_program_compile(g, &o, &p));
  CHECK(p == NULL && strstr(kiln_last_error(), "no-such-backend") && strstr(kiln_last_error(), "ref"));
  FAILS(KILN_ERR_INVALID_ARG, kiln_program_compile(NULL, &o, &p));
  o.backend = "ref";
  OK(kiln_program_compile(g, &o, &p));
  float y[4];
  FAILS(KILN_ERR_INVALID_ARG, kiln_program_run(p, (const void *[]){ NULL }, (void *[]){ y }));
  FAILS(KILN_ERR_INVALID_ARG, kiln_program_run(NULL, NULL, NULL));
  kiln_program_free(p);
  kiln_program_free(NULL);
  kiln_graph_free(g);
}

int main(void) {
  test_mlp();
  test_conv();
  test_softmax();
  test_large_stage();
  for (int kind = 0; kind < 2; kind++)
    for (int inc = 0; inc < 2; inc++)
      for (int ceil_mode = 0; ceil_mode < 2; ceil_mode++) test_pool(kind, inc, ceil_mode);
  test_assign();
  test_errors();
  TEST_MAIN_END();
}
