/*
 * kiln demo — builds a small MLP (64-128-128-10, softmax) through the C API, runs it on the
 * default backend and on ref, and prints the plan, the outputs, the agreement with ref and
 * the census. The weights are deterministic pseudo-random numbers, never zeros. Then, when
 * ../shared is there ($KILN_SHARED_DIR), a real model: LeNet exported from PyTorch, loaded from
 * ONNX, run on the default backend and compared with PyTorch's stored output. It takes no
 * arguments. Exit status: 0 both agree, 1 either disagrees or fails, 2 a usage error.
 */
#include "tools.h"

#include <unistd.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { BATCH = 4, IN = 64, H1 = 128, H2 = 128, OUT = 10 };

static float next_value(unsigned *s) {
  *s = *s * 1664525u + 1013904223u;
  return ((float)(*s >> 8) / 16777216.0f - 0.5f) * 0.5f;
}

static float *random_floats(size_t n, unsigned seed) {
  float *v = malloc(n * sizeof *v);
  if (!v) return NULL;
  for (size_t i = 0; i < n; i++) v[i] = next_value(&seed);
  return v;
}

#define TRY(call) do { kiln_status st_ = (call); if (st_ != KILN_OK) { \
  fprintf(stderr, "kiln demo: %s: %s\n", kiln_status_name(st_), kiln_last_error()); goto done; } } while (0)

/* relu(x @ w + b), or without relu for the last layer. */
static kiln_status dense(kiln_graph *g, kiln_tensor x, int in, int out, unsigned seed, int relu,
                         float **keep, kiln_tensor *y) {
  int64_t ws[2] = { in, out }, bs[1] = { out };
  float *w = random_floats((size_t)in * out, seed), *b = random_floats((size_t)out, seed + 1);
  keep[0] = w;
  keep[1] = b;
  if (!w || !b) return KILN_ERR_NO_MEMORY;
  kiln_tensor tw, tb, mm, sum;
  kiln_status st;
  if ((st = kiln_graph_param(g, NULL, KILN_F32, 2, ws, w, &tw)) ||
      (st = kiln_graph_param(g, NULL, KILN_F32, 1, bs, b, &tb)) ||
      (st = kiln_graph_matmul(g, x, tw, &mm)) ||
      (st = kiln_graph_binary(g, KILN_ADD, mm, tb, &sum)))
    return st;
  if (!relu) { *y = sum; return KILN_OK; }
  return kiln_graph_unary(g, KILN_RELU, sum, y);
}

/* LeNet from ONNX on the default backend against PyTorch's output; 0 when it matches or
 * the model is absent, 1 otherwise. */
static int demo_onnx(void) {
  const char *shared = getenv("KILN_SHARED_DIR");
  char model[1024], in[1024], ref[1024];
  snprintf(model, sizeof model, "%s/models/lenet/model.onnx", shared && *shared ? shared : "../shared");
  snprintf(in, sizeof in, "%s/models/lenet/test_data_set_0/input_0.pb", shared && *shared ? shared : "../shared");
  snprintf(ref, sizeof ref, "%s/models/lenet/test_data_set_0/output_0.pb", shared && *shared ? shared : "../shared");
  if (access(model, R_OK) != 0) {
    printf("\n(no %s: the ONNX part of the demo is skipped)\n", model);
    return 0;
  }
  int rc = 1;
  kiln_graph *g = NULL;
  kiln_program *p = NULL;
  kiln_value x = {0}, want = {0};
  kiln_tensor_info yi = {0};
  int n_out = 0;
  float *y = NULL;
  TRY(kiln_graph_load_onnx(model, &g));
  TRY(kiln_value_read_pb(in, &x));
  TRY(kiln_value_read_pb(ref, &want));
  TRY(kiln_graph_output_count(g, &n_out));
  if (n_out == 1) TRY(kiln_graph_output_info(g, 0, &yi));
  if (n_out != 1 || want.dtype != KILN_F32 || yi.numel != want.numel) {
    fprintf(stderr, "kiln demo: %s: unexpected outputs\n", model);
    goto done;
  }
  if (!(y = malloc((size_t)want.numel * sizeof *y))) goto done;
  kiln_options o = kiln_options_default();
  TRY(kiln_program_compile(g, &o, &p));
  TRY(kiln_program_run(p, (const void *[]){ x.data }, (void *[]){ y }));
  double err = 0, scale = 0;
  for (int64_t i = 0; i < want.numel; i++) {
    double r = ((const float *)want.data)[i];
    err = fmax(err, fabs(y[i] - r));
    scale = fmax(scale, fabs(r));
  }
  kiln_census c;
  TRY(kiln_program_census(p, &c));
  char shape[KILN_SHAPE_STR_MAX];
  TRY(kiln_shape_format(x.rank, x.shape, shape, sizeof shape));
  printf("\n== a real model: %s (LeNet, PyTorch export), input %s\n", model, shape);
  printf("  %lld kernels, %lld host fallbacks, read %lld B, write %lld B, compile %.1f ms (%s)\n",
         (long long)c.kernels_launched, (long long)c.host_fallbacks, (long long)c.bytes_read,
         (long long)c.bytes_written, c.compile_ms, c.cache_hit ? "cache hit" : "compiled");
  printf("  max |y - PyTorch| = %.3g (largest |y| %.3g)\n", err, scale);
  rc = err <= 1e-5 + 1e-3 * scale && c.host_fallbacks == 0 ? 0 : 1;
  if (rc) fprintf(stderr, "kiln demo: LeNet disagrees with PyTorch's output or fell back to the host\n");
done:
  kiln_program_free(p);
  kiln_graph_free(g);
  kiln_value_clear(&x);
  kiln_value_clear(&want);
  free(y);
  return rc;
}

int cmd_demo(int argc, char **argv) {
  Cli cl = cli_start("demo", argc, argv);
  while (cli_next(&cl)) cli_unknown(&cl);
  if (cl.bad || cl.help)
    return cli_usage(&cl, "usage: kiln demo\n"
                          "  exit status: 0 the MLP agrees with ref and LeNet with PyTorch, 1 otherwise, 2 a usage error\n");
  int rc = 1;
  kiln_graph *g = NULL;
  kiln_program *p = NULL, *r = NULL;
  float *keep[6] = { 0 };
  float *x = random_floats(BATCH * IN, 7), y[BATCH * OUT], y_ref[BATCH * OUT];
  kiln_tensor tx, h1, h2, logits, probs;
  int64_t xs[2] = { BATCH, IN };
  if (!x) goto done;

  TRY(kiln_graph_create(&g));
  TRY(kiln_graph_input(g, "x", KILN_F32, 2, xs, &tx));
  TRY(dense(g, tx, IN, H1, 11, 1, keep + 0, &h1));
  TRY(dense(g, h1, H1, H2, 13, 1, keep + 2, &h2));
  TRY(dense(g, h2, H2, OUT, 17, 0, keep + 4, &logits));
  TRY(kiln_graph_softmax(g, logits, -1, &probs));
  TRY(kiln_graph_output(g, probs, "probs"));

  kiln_options o = kiln_options_default(), oref = o;
  oref.backend = "ref";
  TRY(kiln_program_compile(g, &o, &p));
  TRY(kiln_program_compile(g, &oref, &r));
  const char *env_backend = getenv("KILN_BACKEND");
  const char *backend = o.backend ? o.backend : env_backend && *env_backend ? env_backend : "cpu";
  printf("== kiln demo: MLP %d-%d-%d-%d + softmax, batch %d, backend %s\n\n", IN, H1, H2, OUT, BATCH, backend);
  printf("-- plan\n");
  TRY(kiln_program_print(p, stdout));
  TRY(kiln_program_run(p, (const void *[]){ x }, (void *[]){ y }));
  TRY(kiln_program_run(r, (const void *[]){ x }, (void *[]){ y_ref }));

  double max_err = 0;
  for (int i = 0; i < BATCH * OUT; i++) max_err = fmax(max_err, fabs((double)y[i] - y_ref[i]));
  printf("\n-- output (class probabilities)\n");
  for (int b = 0; b < BATCH; b++) {
    printf("  row %d:", b);
    for (int j = 0; j < OUT; j++) printf(" %.4f", y[b * OUT + j]);
    printf("\n");
  }
  printf("  max |y - ref| = %.3g\n", max_err);

  kiln_census c;
  TRY(kiln_program_census(p, &c));
  printf("\n-- census (last run)\n");
  printf("  kernels launched   %lld (planned %lld)\n", (long long)c.kernels_launched, (long long)c.kernels_planned);
  printf("  bytes read/written %lld / %lld\n", (long long)c.bytes_read, (long long)c.bytes_written);
  printf("  host fallbacks     %lld%s%s\n", (long long)c.host_fallbacks, c.fallback_ops[0] ? "  " : "", c.fallback_ops);
  printf("  peak intermediate  %lld bytes\n", (long long)c.peak_bytes);
  printf("  compile            %.1f ms (%s)\n", c.compile_ms, c.cache_hit ? "cache hit" : "compiled");
  rc = max_err < 1e-5 ? 0 : 1;
  if (rc) fprintf(stderr, "kiln demo: result disagrees with ref\n");
  else rc = demo_onnx();
done:
  kiln_program_free(p);
  kiln_program_free(r);
  kiln_graph_free(g);
  for (int i = 0; i < 6; i++) free(keep[i]);
  free(x);
  return rc;
}
