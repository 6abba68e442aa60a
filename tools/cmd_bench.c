/*
 * kiln bench MODEL_DIR|MODEL.onnx [--backend B] [--runs N] [--warmup N] [--threads N] [--tol T]
 *                                   [--budget-ms MS]
 *
 * Times one ONNX model end to end the way a caller sees it. Reads the model and the
 * test data beside it (test_data_set_0/input_K.pb, output_K.pb), compiles for a
 * backend, runs once and compares every output with its reference, then times N runs
 * (after W untimed warm-up runs) of kiln_program_run with host buffers in and out.
 * Prints median and min milliseconds and one JSON line (prefix "json: ") with the
 * census: kernels launched, host fallbacks, bytes moved, compile time, the largest
 * absolute error against the reference. A time is a claim about the intended path, so
 * no time is printed (exit 1) when any op ran on the host or an output is wrong: more
 * than T (default 1e-3) times the reference's largest magnitude (at least 1) away.
 * --threads N sets the OpenMP thread count of the kernels (else $OMP_NUM_THREADS).
 * --budget-ms MS stops timing early once the timed runs add up to MS (at least 3 runs
 * are always timed), so a very slow model does not hold a shared machine for minutes;
 * the JSON line says how many runs were timed.
 * --resident uploads the inputs once (kiln_program_set_input) and times runs that move
 * nothing between host and device, the way a GPU peer is timed with its tensors already
 * there: the JSON line adds the median device time of the schedule (census device_ms,
 * CUDA events on cuda) and no time is printed if a timed run copied a byte to or from the
 * host.
 * Exit status: 0 a time was printed, 1 the run failed or no time was given, 2 a usage error.
 */
#include "tools.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define MAX_FILES 64
#define MAX_COUNT 1000000  /* the most --runs, --warmup, --threads */

typedef struct Bench {
  const char *path, *backend;
  int runs, warmup, threads;
  bool resident;
  double *dev_times;         /* --resident: census device_ms of each timed run */
  int64_t moved;             /* --resident: host<->device bytes of the timed runs */
  double tol, budget_ms;
  char model[PATH_MAX], data_dir[PATH_MAX], name[256];
  kiln_value_list ins, refs;  /* test data: input_K.pb, output_K.pb */
  kiln_value *bind;          /* ins without their names: bound by position */
  kiln_graph *g;
  kiln_program *p;
  const void *inputs[MAX_FILES];
  void *outputs[MAX_FILES];
  double max_abs, ref_mag;   /* largest |got - want| and largest |want| */
  double *times;
  char err[2048];            /* why a step failed: a kiln call's status and message, or this tool's words */
} Bench;

/* Records why a step failed; returns -1. */
static int fail(Bench *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(Bench *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(b->err, sizeof b->err, fmt, ap);
  va_end(ap);
  return -1;
}

/* A kiln call failed with st (about the file path, when given): its status and message are why. */
static int lib_failed(Bench *b, kiln_status st, const char *path) {
  cli_lib_message(st, path, kiln_last_error(), b->err, sizeof b->err);
  return -1;
}

static const char usage[] =
    "usage: kiln bench MODEL_DIR|MODEL.onnx [--backend B] [--runs N] [--warmup N] [--threads N]"
    " [--tol T] [--budget-ms MS] [--resident]\n"
    "  exit status: 0 a time was printed, 1 the run failed or no time was given, 2 a usage error\n";

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* MODEL_DIR -> DIR/model.onnx; the test data sits beside the model; the name is the folder's. */
static int resolve_paths(Bench *b) {
  struct stat st;
  if (stat(b->path, &st) != 0) return fail(b, "cannot read '%s': %s", b->path, strerror(errno));
  int n = S_ISDIR(st.st_mode) ? snprintf(b->model, sizeof b->model, "%s/model.onnx", b->path)
                              : snprintf(b->model, sizeof b->model, "%s", b->path);
  if (n < 0 || (size_t)n >= sizeof b->model) return fail(b, "'%s': path too long", b->path);
  if (stat(b->model, &st) != 0) return fail(b, "cannot read '%s': %s", b->model, strerror(errno));
  char dir[PATH_MAX];
  tools_dirname(b->model, dir, sizeof dir);
  n = snprintf(b->data_dir, sizeof b->data_dir, "%s/test_data_set_0", dir);
  if (n < 0 || (size_t)n >= sizeof b->data_dir) return fail(b, "'%s': path too long", b->path);
  char real[PATH_MAX];
  const char *base = realpath(dir, real) ? real : dir;
  const char *slash = strrchr(base, '/');
  const char *name = slash && slash[1] ? slash + 1 : base;
  size_t len = strlen(name) < sizeof b->name ? strlen(name) : sizeof b->name - 1;
  memcpy(b->name, name, len);
  b->name[len] = 0;
  for (char *c = b->name; *c; c++)  /* the name goes into a JSON string */
    if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20) *c = '_';
  return 0;
}

/* Loads test data and model (inputs bound by position, as the ONNX test runner does). */
static int load(Bench *b) {
  kiln_status s;
  if ((s = kiln_value_list_read(b->data_dir, "input", &b->ins)) ||
      (s = kiln_value_list_read(b->data_dir, "output", &b->refs)))
    return lib_failed(b, s, NULL);
  if (!b->ins.n) return fail(b, "%s holds no input_0.pb", b->data_dir);
  if (!(b->bind = calloc((size_t)b->ins.n, sizeof *b->bind))) return fail(b, "out of memory");
  for (int i = 0; i < b->ins.n; i++) {
    b->bind[i] = b->ins.v[i];
    b->bind[i].name = NULL;
  }
  s = kiln_graph_load_onnx_bound(b->model, b->ins.n, b->bind, &b->g);
  return s ? lib_failed(b, s, b->model) : 0;
}

/* Host buffers for the run: inputs from the test data, outputs allocated. Graph tensor k of
 * an imported model is the model's k-th input (kiln_graph_load_onnx_bound), so the value
 * of the graph input that is tensor t is test datum t. */
static int bind(Bench *b) {
  int n_in, n_out;
  kiln_status s;
  if ((s = kiln_graph_input_count(b->g, &n_in)) || (s = kiln_graph_output_count(b->g, &n_out)))
    return lib_failed(b, s, NULL);
  for (int i = 0; i < n_in; i++) {
    kiln_tensor_info x;
    if ((s = kiln_graph_input_info(b->g, i, &x))) return lib_failed(b, s, NULL);
    if (x.tensor >= b->ins.n || i >= MAX_FILES) return fail(b, "no test data for input '%s'", x.name);
    const kiln_value *v = &b->ins.v[x.tensor];
    if (v->dtype != x.dtype || v->numel != x.numel)
      return fail(b, "input '%s': test data is %s of %lld elements, the model wants %s of %lld", x.name,
                  kiln_dtype_name(v->dtype), (long long)v->numel, kiln_dtype_name(x.dtype), (long long)x.numel);
    b->inputs[i] = v->data;
  }
  if (n_out > MAX_FILES) return fail(b, "more than %d outputs", MAX_FILES);
  if (b->refs.n && b->refs.n != n_out)
    return fail(b, "the model has %d outputs, the test data %d", n_out, b->refs.n);
  for (int i = 0; i < n_out; i++) {
    kiln_tensor_info y;
    if ((s = kiln_graph_output_info(b->g, i, &y))) return lib_failed(b, s, NULL);
    const kiln_value *r = i < b->refs.n ? &b->refs.v[i] : NULL;
    if (r && (y.dtype != r->dtype || y.numel != r->numel))
      return fail(b, "output %d: kiln gives %s of %lld elements, the reference %s of %lld", i,
                  kiln_dtype_name(y.dtype), (long long)y.numel, kiln_dtype_name(r->dtype), (long long)r->numel);
    if (!(b->outputs[i] = tools_alloc_elems(y.numel, y.dtype)))
      return fail(b, "out of memory for output %d", i);
  }
  return 0;
}

/* Element k of a numeric value with data, k in range: the call cannot fail. */
static double f64_at(const kiln_value *v, int64_t k) {
  double d = 0;
  kiln_value_get_f64(v, k, &d);
  return d;
}

/* Largest |got - want| over every numeric output with a reference (NaN counts as infinite). */
static void measure_error(Bench *b) {
  b->max_abs = 0, b->ref_mag = 0;
  for (int i = 0; i < b->refs.n; i++) {
    const kiln_value *r = &b->refs.v[i];
    if (r->dtype == KILN_STRING) continue;  /* no distance between strings */
    kiln_value got = *r;  /* the run's output, described as the reference is */
    got.data = b->outputs[i];
    for (int64_t k = 0; k < r->numel; k++) {
      double g = f64_at(&got, k), want = f64_at(r, k);
      double d = fabs(g - want);
      if (isnan(d)) d = (isnan(g) && isnan(want)) ? 0 : INFINITY;
      if (d > b->max_abs) b->max_abs = d;
      if (isfinite(want) && fabs(want) > b->ref_mag) b->ref_mag = fabs(want);
    }
  }
}

/* One timed run: host buffers in and out, or (--resident) the inputs set once and nothing
 * copied; a resident run's device time and transfers come from its census. */
static kiln_status run_once(Bench *b, double *dev_ms) {
  if (!b->resident) return kiln_program_run(b->p, b->inputs, b->outputs);
  kiln_census c;
  kiln_status s = kiln_program_run(b->p, NULL, NULL);
  if (!s) s = kiln_program_census(b->p, &c);
  if (!s) *dev_ms = c.device_ms, b->moved += c.h2d_bytes + c.d2h_bytes;
  return s;
}

static int time_runs(Bench *b) {
  int n_in = 0, n_out = 0;
  kiln_status s = kiln_graph_input_count(b->g, &n_in);
  if (!s) s = kiln_graph_output_count(b->g, &n_out);
  for (int i = 0; b->resident && i < n_in && !s; i++) s = kiln_program_set_input(b->p, i, b->inputs[i]);
  double dev = 0;
  for (int i = 0; i < b->warmup && !s; i++) s = run_once(b, &dev);
  /* resident: 200 ms of runs back to back before the timed ones, so that a driver that lowers
   * its clocks while the device idles between runs that each wait (the H200's Vulkan driver:
   * 1980 MHz down to 345-900 within seconds) times them at its load clocks, as CUDA's keeps */
  int reps = 1;
  for (double w0 = now_ms(); b->resident && !s && now_ms() - w0 < 200;) {
    double a = now_ms();
    s = kiln_program_run_times(b->p, reps);
    if (!s && now_ms() - a < 1 && reps < 4096) reps *= 2;
  }
  if (s) return lib_failed(b, s, NULL);
  b->moved = 0;
  b->times = calloc((size_t)b->runs, sizeof *b->times);
  b->dev_times = calloc((size_t)b->runs, sizeof *b->dev_times);
  if (!b->times || !b->dev_times) return fail(b, "out of memory");
  double spent = 0;
  int done = 0;
  for (; done < b->runs && !s; done++) {
    if (b->budget_ms > 0 && done >= 3 && spent >= b->budget_ms) break;
    double t0 = now_ms();
    s = run_once(b, &b->dev_times[done]);
    b->times[done] = now_ms() - t0;
    spent += b->times[done];
  }
  b->runs = done;
  if (s) return lib_failed(b, s, NULL);
  if (b->moved) return fail(b, "the timed runs moved %lld bytes between host and device", (long long)b->moved);
  /* the resident runs' outputs are checked too (after the timing, read back once) */
  for (int i = 0; b->resident && i < n_out && !s; i++) s = kiln_program_read_output(b->p, i, b->outputs[i]);
  if (s) return lib_failed(b, s, NULL);
  if (b->resident) measure_error(b);
  qsort(b->times, (size_t)b->runs, sizeof *b->times, cmp_double);
  qsort(b->dev_times, (size_t)b->runs, sizeof *b->dev_times, cmp_double);
  return 0;
}

static double median(const double *sorted, int n) {
  return n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

/* Compile, check once, then time. Prints the result; returns the exit status. */
static int bench(Bench *b) {
  kiln_options o = kiln_options_default();
  if (b->backend) o.backend = b->backend;
  kiln_status s = kiln_program_compile(b->g, &o, &b->p);
  if (!s) s = kiln_program_run(b->p, b->inputs, b->outputs);
  if (s) return cli_lib_error("bench", s, NULL);
  measure_error(b);
  kiln_census c;
  if ((s = kiln_program_census(b->p, &c))) return cli_lib_error("bench", s, NULL);
  const char *why = NULL;
  if (c.host_fallbacks) why = "host fallbacks";
  else if (!(b->max_abs <= b->tol * fmax(1, b->ref_mag))) why = "outputs differ from the reference";
  if (!why && time_runs(b)) {
    fprintf(stderr, "kiln bench: %s\n", b->err);
    return 1;
  }
  if (!why && !(b->max_abs <= b->tol * fmax(1, b->ref_mag))) why = "the resident runs' outputs differ from the reference";
  const char *backend = b->backend ? b->backend : getenv("KILN_BACKEND") ? getenv("KILN_BACKEND") : "cpu";
  int threads = omp_get_max_threads();
  printf("%s on %s, threads %d: kernels %lld, host fallbacks %lld%s%s%s, max abs err %.3g (reference max |y| %.3g)\n",
         b->name, backend, threads, (long long)c.kernels_launched, (long long)c.host_fallbacks,
         c.fallback_ops[0] ? " (" : "", c.fallback_ops, c.fallback_ops[0] ? ")" : "", b->max_abs, b->ref_mag);
  if (why) {
    printf("json: {\"model\":\"%s\",\"backend\":\"%s\",\"error\":\"%s\",\"fallbacks\":%lld,\"max_abs_err\":%.6g}\n",
           b->name, backend, why, (long long)c.host_fallbacks, b->max_abs);
    fprintf(stderr, "kiln bench: %s: %s; no time reported\n", b->name, why);
    return 1;
  }
  double med = median(b->times, b->runs), min = b->times[0];
  double dev = b->resident ? median(b->dev_times, b->runs) : 0;
  printf("median %.4f ms, min %.4f ms over %d runs (%d warm-up)%s", med, min, b->runs, b->warmup,
         b->resident ? ", inputs resident" : "\n");
  if (b->resident) printf("; device %.4f ms\n", dev);
  printf("json: {\"model\":\"%s\",\"backend\":\"%s\",\"resident\":%d,\"device_ms\":%.4f,\"threads\":%d,\"runs\":%d,"
         "\"median_ms\":%.4f,\"min_ms\":%.4f,"
         "\"kernels\":%lld,\"fallbacks\":%lld,\"bytes_read\":%lld,\"bytes_written\":%lld,\"peak_bytes\":%lld,"
         "\"compile_ms\":%.1f,\"cache_hit\":%d,\"max_abs_err\":%.6g}\n",
         b->name, backend, b->resident, dev, threads, b->runs, med, min, (long long)c.kernels_launched, (long long)c.host_fallbacks,
         (long long)c.bytes_read, (long long)c.bytes_written, (long long)c.peak_bytes, c.compile_ms, c.cache_hit,
         b->max_abs);
  return 0;
}

static void bench_clear(Bench *b) {
  kiln_program_free(b->p);
  kiln_graph_free(b->g);
  kiln_value_list_clear(&b->ins);
  kiln_value_list_clear(&b->refs);
  free(b->bind);
  for (int i = 0; i < MAX_FILES; i++) free(b->outputs[i]);
  free(b->times);
  free(b->dev_times);
}

int cmd_bench(int argc, char **argv) {
  static Bench b;  /* large (paths, test data slots); one per process */
  memset(&b, 0, sizeof b);
  b.runs = 50, b.warmup = 5, b.tol = 1e-3;
  Cli c = cli_start("bench", argc, argv);
  while (cli_next(&c))
    if (!cli_str(&c, "--backend", "B", &b.backend) && !cli_int(&c, "--runs", 1, MAX_COUNT, &b.runs) &&
        !cli_int(&c, "--warmup", 0, MAX_COUNT, &b.warmup) && !cli_int(&c, "--threads", 1, MAX_COUNT, &b.threads) &&
        !cli_real(&c, "--tol", false, &b.tol) && !cli_real(&c, "--budget-ms", true, &b.budget_ms) &&
        !cli_flag(&c, "--resident", &b.resident))
      cli_model(&c, &b.path);
  if (!c.bad && !c.help && !b.path) cli_error(&c, "no model given (MODEL_DIR or MODEL.onnx)");
  if (c.bad || c.help) return cli_usage(&c, usage);
  if (b.threads) omp_set_num_threads(b.threads);
  int rc;
  if (resolve_paths(&b) || load(&b) || bind(&b)) {
    fprintf(stderr, "kiln bench: %s\n", b.err);
    rc = 1;
  } else {
    rc = bench(&b);
  }
  bench_clear(&b);
  return rc;
}
