/*
 * test_cuda_backend.c — whole graphs through the cuda backend, against ref: values,
 * and what the design promises about how they ran (kernel counts, one submission per
 * run with graph replay, host transfers counted in the census, nothing at all crossing
 * to the host in a resident run, parameters updated in place by assigns).
 * Without a GPU: "skip: no CUDA driver" and pass.
 */
#include "test.h"
#include "runtime/runtime.h"

static unsigned long long seed = 11;

static float *rnd(int64_t n) {
  float *p = malloc((size_t)n * sizeof *p);
  for (int64_t i = 0; i < n; i++) p[i] = (float)test_rand(&seed);
  return p;
}

/* Compiles g on backend be (fuse, replay), runs once with host buffers, returns outputs. */
static kiln_program *run_on(kiln_graph *g, const char *be, int fuse, int replay, const void *const *in, void **out) {
  kiln_options o = kiln_options_default();
  o.backend = be, o.fuse = fuse, o.graph_replay = replay, o.strict = strcmp(be, "ref") != 0;
  kiln_program *p = NULL;
  OK(kiln_program_compile(g, &o, &p));
  if (p) OK(kiln_program_run(p, in, out));
  return p;
}

/* Largest |a - b| over the largest |b| (1e-3 at least): cuda sums f32 terms in f32, so its
 * error against ref's f64 sums scales with the terms, not with each result (a matmul or
 * layernorm output near 0 comes from a cancellation). A wrong or unwritten element still
 * shows as an error of order one, NaN as NaN. */
static double max_rel(const float *a, const float *b, int64_t n) {
  double m = 0, scale = 1e-3;
  for (int64_t i = 0; i < n; i++) scale = fmax(scale, fabs((double)b[i]));
  for (int64_t i = 0; i < n; i++) {
    double d = fabs((double)a[i] - b[i]) / scale;
    if (!(d <= m)) m = d;  /* NaN propagates */
  }
  return m;
}

/* Runs g (one f32 input x of n_in elements, one f32 output of n_out) on ref, then cuda fused
 * and eager, with and without graph replay; checks values and census. */
static void check_graph(const char *what, kiln_graph *g, int64_t n_in, int64_t n_out, int64_t fused_kernels) {
  float *x = rnd(n_in), *want = malloc((size_t)n_out * 4), *got = malloc((size_t)n_out * 4);
  const void *in[1] = { x };
  void *outr[1] = { want }, *outc[1] = { got };
  kiln_program *r = run_on(g, "ref", 1, 1, in, outr);
  for (int fuse = 1; fuse >= 0; fuse--)
    for (int replay = 1; replay >= 0; replay--) {
      for (int64_t i = 0; i < n_out; i++) got[i] = NAN;  /* poison */
      kiln_program *p = run_on(g, "cuda", fuse, replay, in, outc);
      if (!p) continue;
      kiln_census c;
      OK(kiln_program_census(p, &c));
      double e = max_rel(got, want, n_out);
      CHECK_MSG(e < 1e-4, "%s fuse=%d replay=%d: max rel error %g", what, fuse, replay, e);
      CHECK_MSG(c.host_fallbacks == 0, "%s: %lld fallbacks (%s)", what, (long long)c.host_fallbacks, c.fallback_ops);
      CHECK(c.h2d_copies == 1 && c.h2d_bytes == n_in * 4);
      CHECK(c.d2h_copies == 1 && c.d2h_bytes == n_out * 4);
      CHECK_MSG(c.submissions == (replay ? 1 : c.kernels_launched), "%s: %lld submissions for %lld kernels", what,
                (long long)c.submissions, (long long)c.kernels_launched);
      if (fuse && fused_kernels > 0)
        CHECK_MSG(c.kernels_launched == fused_kernels, "%s: %lld kernels fused, expected %lld", what,
                  (long long)c.kernels_launched, (long long)fused_kernels);
      kiln_program_free(p);
    }
  kiln_program_free(r);
  free(x), free(want), free(got);
}

static kiln_graph *chain(int64_t n, kiln_tensor *xo) {
  kiln_graph *g;
  kiln_tensor x, one, t, u, y;
  OK(kiln_graph_create(&g));
  OK(kiln_graph_input(g, "x", KILN_F32, 1, &n, &x));
  OK(kiln_graph_scalar(g, KILN_F32, 1.0, &one));
  OK(kiln_graph_unary(g, KILN_TANH, x, &t));
  OK(kiln_graph_binary(g, KILN_MUL, t, x, &u));
  OK(kiln_graph_binary(g, KILN_ADD, u, one, &t));
  OK(kiln_graph_unary(g, KILN_EXP, t, &y));
  OK(kiln_graph_output(g, y, "y"));
  if (xo) *xo = x;
  return g;
}

static void test_pointwise(void) {
  /* Sizes that are not multiples of the vector width or the block. */
  int64_t sizes[] = { 1, 3, 1000, 4099, 1 << 20 };
  for (int i = 0; i < 5; i++) {
    kiln_graph *g = chain(sizes[i], NULL);
    check_graph("chain", g, sizes[i], sizes[i], 1);
    kiln_graph_free(g);
  }
}

static void test_rows(void) {
  int64_t shapes[][2] = { { 7, 5 }, { 64, 1000 }, { 300, 4096 }, { 3, 33000 } };
  for (int i = 0; i < 4; i++) {
    kiln_graph *g;
    kiln_tensor x, y, z, gm, bt;
    int64_t c = shapes[i][1];
    float *ones = malloc((size_t)c * 4), *half = malloc((size_t)c * 4);
    for (int64_t j = 0; j < c; j++) ones[j] = 1.0f + 0.001f * (float)j, half[j] = 0.5f;
    OK(kiln_graph_create(&g));
    OK(kiln_graph_input(g, "x", KILN_F32, 2, shapes[i], &x));
    OK(kiln_graph_softmax(g, x, 1, &y));
    OK(kiln_graph_output(g, y, "y"));
    check_graph("softmax", g, shapes[i][0] * c, shapes[i][0] * c, 1);
    kiln_graph_free(g);

    OK(kiln_graph_create(&g));
    OK(kiln_graph_input(g, "x", KILN_F32, 2, shapes[i], &x));
    OK(kiln_graph_param(g, "g", KILN_F32, 1, &c, ones, &gm));
    OK(kiln_graph_param(g, "b", KILN_F32, 1, &c, half, &bt));
    OK(kiln_graph_layernorm(g, x, gm, bt, 1, 1e-5, &z));
    OK(kiln_graph_output(g, z, "z"));
    check_graph("layernorm", g, shapes[i][0] * c, shapes[i][0] * c, 1);
    kiln_graph_free(g);
    free(ones), free(half);
  }
}

static void test_matmul(void) {
  int64_t dims[][3] = { { 1, 1, 1 }, { 5, 7, 3 }, { 128, 784, 512 }, { 33, 65, 17 } };
  for (int i = 0; i < 4; i++) {
    int64_t m = dims[i][0], k = dims[i][1], n = dims[i][2], xs[2] = { m, k }, ws[2] = { k, n };
    float *w = rnd(k * n), *b = rnd(n);
    kiln_graph *g;
    kiln_tensor x, wt, bt, y, z, r;
    OK(kiln_graph_create(&g));
    OK(kiln_graph_input(g, "x", KILN_F32, 2, xs, &x));
    OK(kiln_graph_param(g, "w", KILN_F32, 2, ws, w, &wt));
    OK(kiln_graph_param(g, "b", KILN_F32, 1, &n, b, &bt));
    OK(kiln_graph_matmul(g, x, wt, &y));
    OK(kiln_graph_binary(g, KILN_ADD, y, bt, &z));
    OK(kiln_graph_unary(g, KILN_RELU, z, &r));
    OK(kiln_graph_output(g, r, "r"));
    check_graph("relu(x@w+b)", g, m * k, m * n, 1);
    kiln_graph_free(g);
    free(w), free(b);
  }
}

/* Resident inputs and outputs: after set_input, runs move nothing; read_output gives the
 * right values; a second set_input changes the result. */
static void test_resident(void) {
  int64_t n = 4099;
  kiln_graph *g = chain(n, NULL);
  float *x = rnd(n), *want = malloc((size_t)n * 4), *got = malloc((size_t)n * 4);
  const void *in[1] = { x };
  void *out[1] = { want };
  kiln_program *r = run_on(g, "ref", 1, 1, in, out);
  kiln_options o = kiln_options_default();
  o.backend = "cuda";
  kiln_program *p = NULL;
  OK(kiln_program_compile(g, &o, &p));
  if (p) {
    OK(kiln_program_set_input(p, 0, x));
    for (int i = 0; i < 3; i++) OK(kiln_program_run(p, NULL, NULL));
    kiln_census c;
    OK(kiln_program_census(p, &c));
    CHECK(c.h2d_bytes == 0 && c.d2h_bytes == 0 && c.h2d_copies == 0 && c.d2h_copies == 0);
    CHECK(c.submissions == 1 && c.kernels_launched == 1);
    OK(kiln_program_read_output(p, 0, got));
    CHECK(max_rel(got, want, n) < 1e-5);
    for (int64_t i = 0; i < n; i++) x[i] += 1.0f;
    OK(kiln_program_set_input(p, 0, x));
    OK(kiln_program_run(p, NULL, NULL));
    OK(kiln_program_read_output(p, 0, got));
    CHECK(max_rel(got, want, n) > 1e-3);  /* the new input took effect */
    FAILS(KILN_ERR_INVALID_ARG, kiln_program_set_input(p, 1, x));
    FAILS(KILN_ERR_INVALID_ARG, kiln_program_read_output(p, 5, got));
  }
  kiln_program_free(p);
  kiln_program_free(r);
  kiln_graph_free(g);
  free(x), free(want), free(got);
}

/* An assign updates a parameter in place on the device: w <- w + x, three runs. */
static void test_assign(void) {
  int64_t n = 1000;
  float *w0 = rnd(n), *x = rnd(n), *w = malloc((size_t)n * 4), *y = malloc((size_t)n * 4);
  kiln_graph *g;
  kiln_tensor xt, wt, s;
  OK(kiln_graph_create(&g));
  OK(kiln_graph_input(g, "x", KILN_F32, 1, &n, &xt));
  OK(kiln_graph_param(g, "w", KILN_F32, 1, &n, w0, &wt));
  OK(kiln_graph_binary(g, KILN_ADD, wt, xt, &s));
  OK(kiln_graph_output(g, s, "s"));
  OK(kiln_graph_assign(g, wt, s));
  kiln_options o = kiln_options_default();
  o.backend = "cuda";
  kiln_program *p = NULL;
  OK(kiln_program_compile(g, &o, &p));
  const void *in[1] = { x };
  void *out[1] = { y };
  for (int r = 0; p && r < 3; r++) OK(kiln_program_run(p, in, out));
  if (p) OK(kiln_program_read_param(p, wt, w));
  int bad = 0;
  for (int64_t i = 0; p && i < n; i++) {
    float want = w0[i];
    for (int r = 0; r < 3; r++) want += x[i];
    bad += fabsf(w[i] - want) > 1e-5f || y[i] != w[i];
  }
  CHECK_MSG(bad == 0, "assign: %d wrong", bad);
  kiln_program_free(p);
  kiln_graph_free(g);
  free(w0), free(x), free(w), free(y);
}

/* The resident API on a backend without device buffers (ref): program.c keeps host copies,
 * so the same calls work everywhere (this part runs without a GPU too). */
static void test_resident_host(void) {
  int64_t n = 100;
  kiln_graph *g = chain(n, NULL);
  float *x = rnd(n), *want = malloc((size_t)n * 4), *got = malloc((size_t)n * 4);
  kiln_options o = kiln_options_default();
  o.backend = "ref";
  kiln_program *p = NULL;
  OK(kiln_program_compile(g, &o, &p));
  if (p) {
    FAILS(KILN_ERR_INVALID_ARG, kiln_program_run(p, NULL, NULL));  /* input never set */
    OK(kiln_program_run(p, (const void *[]){ x }, (void *[]){ want }));
    FAILS(KILN_ERR_INVALID_ARG, kiln_program_read_output(p, 0, got));  /* went to the caller's buffer */
    OK(kiln_program_set_input(p, 0, x));
    OK(kiln_program_run(p, NULL, NULL));
    OK(kiln_program_read_output(p, 0, got));
    CHECK(!memcmp(got, want, (size_t)n * 4));
    FAILS(KILN_ERR_INVALID_ARG, kiln_program_set_input(p, -1, x));
    FAILS(KILN_ERR_INVALID_ARG, kiln_program_read_output(p, 1, got));
  }
  kiln_program_free(p);
  kiln_graph_free(g);
  free(x), free(want), free(got);
}

/* Strings on cuda: string tensors stay on the host, string ops run there as counted
 * fallbacks, and a device kernel consumes what a host op made (label_encode -> f32 ->
 * l*l + 1). Output strings belong to the program (not the caller's input); a resident
 * string input is copied at set_input. */
static void test_strings(void) {
  kiln_graph *g;
  kiln_tensor x, c, y, k, e, l, l2, one, z, r;
  int64_t n = 3;
  const char *cv[3] = { "!", "?", "!" }, *kv[3] = { "a!", "b?", "zz" }, *keys[2] = { "a", "b" };
  float vals[2] = { 1.5f, 2.5f }, dflt = -1.0f, onev = 1.0f;
  OK(kiln_graph_create(&g));
  OK(kiln_graph_input(g, "x", KILN_STRING, 1, &n, &x));
  OK(kiln_graph_const(g, KILN_STRING, 1, &n, cv, &c));
  OK(kiln_graph_string_concat(g, x, c, &y));
  OK(kiln_graph_const(g, KILN_STRING, 1, &n, kv, &k));
  OK(kiln_graph_binary(g, KILN_EQ, y, k, &e));
  OK(kiln_graph_label_encode(g, x, KILN_STRING, KILN_F32, 2, keys, vals, &dflt, &l));
  OK(kiln_graph_binary(g, KILN_MUL, l, l, &l2));
  OK(kiln_graph_const(g, KILN_F32, 0, NULL, &onev, &one));
  OK(kiln_graph_binary(g, KILN_ADD, l2, one, &z));
  OK(kiln_graph_reshape(g, x, 1, &n, &r));
  OK(kiln_graph_output(g, y, "y"));
  OK(kiln_graph_output(g, e, "e"));
  OK(kiln_graph_output(g, z, "z"));
  OK(kiln_graph_output(g, r, "r"));
  kiln_options o = kiln_options_default();
  o.backend = "cuda";
  kiln_program *p = NULL;
  OK(kiln_program_compile(g, &o, &p));
  char buf[3][4] = { "a", "b", "c" };
  const char *xin[3] = { buf[0], buf[1], buf[2] };
  for (int pass = 0; p && pass < 2; pass++) {
    const char *yo[3] = { 0 }, *ro[3] = { 0 };
    bool eo[3] = { 0 };
    float zo[3] = { 0 };
    if (pass == 0) OK(kiln_program_run(p, (const void *[]){ xin }, (void *[]){ yo, eo, zo, ro }));
    else {  /* resident: set, then spoil the caller's strings; the run must not see that */
      OK(kiln_program_set_input(p, 0, xin));
      buf[0][0] = 'q';
      OK(kiln_program_run(p, NULL, (void *[]){ yo, eo, zo, ro }));
      buf[0][0] = 'a';
    }
    CHECK_MSG(yo[0] && !strcmp(yo[0], "a!") && yo[1] && !strcmp(yo[1], "b?") && yo[2] && !strcmp(yo[2], "c!"),
              "strings pass %d: concat gave '%s' '%s' '%s'", pass, yo[0] ? yo[0] : "-", yo[1] ? yo[1] : "-",
              yo[2] ? yo[2] : "-");
    CHECK(eo[0] && eo[1] && !eo[2]);
    CHECK_MSG(zo[0] == 3.25f && zo[1] == 7.25f && zo[2] == 2.0f, "strings pass %d: z %g %g %g", pass, zo[0], zo[1], zo[2]);
    CHECK(ro[0] && !strcmp(ro[0], "a") && ro[2] && !strcmp(ro[2], "c"));
    CHECK(ro[0] != buf[0] && ro[0] != xin[0]);  /* the program's copy, not the caller's */
    kiln_census cs;
    OK(kiln_program_census(p, &cs));
    CHECK_MSG(cs.host_fallbacks >= 3 && strstr(cs.fallback_ops, "string_concat") && strstr(cs.fallback_ops, "label_encode") &&
                  !strstr(cs.fallback_ops, "mul") && !strstr(cs.fallback_ops, "add"),
              "strings: fallbacks %lld (%s)", (long long)cs.host_fallbacks, cs.fallback_ops);
    CHECK_MSG(cs.kernels_launched >= 1, "strings: %lld kernels (l*l + 1 runs on the device)", (long long)cs.kernels_launched);
  }
  kiln_program_free(p);
  kiln_graph_free(g);
}

int main(void) {
  test_resident_host();
  if (rt_backend_cuda.probe() != KILN_OK) {
    printf("skip: no CUDA driver (%s)\n", kiln_last_error());
    TEST_MAIN_END();
  }
  test_pointwise();
  test_rows();
  test_matmul();
  test_resident();
  test_assign();
  test_strings();
  TEST_MAIN_END();
}
