/*
 * kiln conformance DIR... [--backend B] [--expected FILE] [--write-expected FILE] [--every N]
 *                  [--timeout S] [--in-process]
 *
 * Walks ONNX backend-test folders (a DIR holding model.onnx is one test; otherwise each
 * of its sub-folders is), runs each test's model on test_data_set_0, and compares the
 * outputs the way the ONNX runner does: same dtype and shape, then
 * |got - want| <= atol + rtol * |want| with rtol 1e-3, atol 1e-7, NaN equal to NaN;
 * strings must be equal byte for byte.
 * One line per test (pass / fail with the error or reason / skip with the reason),
 * then "N passed, N failed, N skipped". Each test runs in a forked child with a time
 * limit, so a crash or hang is one failed test, not a dead run. --in-process runs every
 * test in this process instead (no isolation, no time limit): on cuda a forked child
 * cannot share its parent's CUDA context, so each would set one up again; in one process
 * the driver, context and NVRTC are set up once for the whole walk (tools/gpu-check).
 *
 * With --expected FILE (lines "NAME pass" or "NAME skip REASON"): exits 1 if a test
 * listed as pass does not pass, and lists tests that pass but are not listed as pass.
 * --write-expected FILE writes that file from this run (failures become skips with
 * their reason). Exit status: 0 no regression, 1 a test listed as pass did not pass, 2 a
 * usage error (bad arguments, a DIR or --expected FILE that cannot be read, no DIR given).
 * Also here: onnx_run_test, which `kiln run` shares.
 */
#include "tools.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define RTOL 1e-3
#define ATOL 1e-7
#define MAX_FILES 64

static bool exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0;
}

/* Element i of a numeric value with data, i in range: the calls cannot fail. */
static double f64_at(const kiln_value *v, int64_t i) {
  double d = 0;
  kiln_value_get_f64(v, i, &d);
  return d;
}

static int64_t i64_at(const kiln_value *v, int64_t i) {
  int64_t d = 0;
  kiln_value_get_i64(v, i, &d);
  return d;
}

/* Compares got (dtype/shape of want) with want; fills max errors; false on mismatch. */
static bool compare(const kiln_value *got, const kiln_value *want, double rtol, double atol, double *max_abs,
                    double *max_rel, int64_t *bad_at) {
  *bad_at = -1;
  if (want->dtype == KILN_STRING) {
    for (int64_t i = 0; i < want->numel; i++) {
      const char *a = ((const char *const *)got->data)[i], *b = ((const char *const *)want->data)[i];
      if (!a || strcmp(a, b)) { *bad_at = i; return false; }
    }
    return true;
  }
  for (int64_t i = 0; i < want->numel; i++) {
    double a = f64_at(got, i), b = f64_at(want, i);
    if (!kiln_dtype_is_float(want->dtype)) {
      int64_t ia = i64_at(got, i), ib = i64_at(want, i);
      if (ia != ib && *bad_at < 0) *bad_at = i;
      if (ia != ib) *max_abs = fmax(*max_abs, fabs(a - b));
      continue;
    }
    if (isnan(a) && isnan(b)) continue;
    if (isinf(b) && a == b) continue;
    double d = fabs(a - b);
    if (isnan(d)) d = INFINITY;
    *max_abs = fmax(*max_abs, d);
    if (b != 0) *max_rel = fmax(*max_rel, d / fabs(b));
    if (!(d <= atol + rtol * fabs(b)) && *bad_at < 0) *bad_at = i;
  }
  return *bad_at < 0;
}

static void result(TestResult *r, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void result(TestResult *r, int status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  r->status = status;
  r->lib = KILN_OK, r->lib_import = false, r->lib_msg = 0;
  vsnprintf(r->reason, sizeof r->reason, fmt, ap);
  va_end(ap);
  for (char *p = r->reason; *p; p++)
    if (*p == '\n' || *p == '\t') *p = ' ';
}

/* A kiln call failed with st: the reason is "STAGE: " (none when stage is NULL) and its message. */
static void lib_result(TestResult *r, int status, kiln_status st, const char *stage) {
  result(r, status, "%s%s%s", stage ? stage : "", stage ? ": " : "", kiln_last_error());
  r->lib = st;
  r->lib_msg = stage ? (int)strlen(stage) + 2 : 0;
}

/* The output i of g: its info and, described as a value, the buffer it is run into. */
static kiln_value output_value(const kiln_tensor_info *y, void *data) {
  kiln_value v = { .name = y->name, .dtype = y->dtype, .rank = y->rank, .numel = y->numel, .data = data };
  memcpy(v.shape, y->shape, sizeof v.shape);
  return v;
}

/* The value for graph input x: one of its name, else (test data is positional) the unnamed
 * value at x's position in the model, which is x's tensor id (kiln_graph_load_onnx_bound). */
static const kiln_value *input_value(const kiln_tensor_info *x, const kiln_value *ins, int n_in) {
  for (int k = 0; k < n_in; k++)
    if (ins[k].name && !strcmp(ins[k].name, x->name)) return &ins[k];
  return x->tensor < n_in && !ins[x->tensor].name ? &ins[x->tensor] : NULL;
}

/* No value for graph input x: where one was looked for. */
static void no_value(const OnnxTestSpec *spec, const kiln_tensor_info *x, const kiln_value *ins, int n_in,
                     TestResult *r) {
  bool positional = false;  /* any test data? */
  for (int k = 0; k < n_in; k++) positional |= !ins[k].name;
  if (spec->data_dir && !positional)
    result(r, TEST_FAIL, "%s holds no input_0.pb, so input '%s' has no value", spec->data_dir, x->name);
  else if (!spec->data_dir)
    result(r, TEST_FAIL, "no value for input '%s' (give --input %s=FILE.pb or --check DIR)", x->name, x->name);
  else
    result(r, TEST_FAIL, "no value for input '%s'", x->name);
}

/* Is name one of the model's inputs? A graph input is; so is one the import read as data,
 * which became a constant: graph tensor k is the model's k-th input, so it sits among the
 * leading tensors, each a graph input, bound by position (k < n_pos) or named by --input. */
static bool is_model_input(const OnnxTestSpec *spec, const kiln_graph *g, int n_pos, const char *name) {
  int n_in;
  kiln_tensor_info t, x;
  if (kiln_graph_input_count(g, &n_in)) return false;
  for (kiln_tensor k = 0; !kiln_graph_tensor_info(g, k, &t); k++) {
    bool leading = k < n_pos;
    for (int i = 0; i < n_in && !leading; i++) leading = !kiln_graph_input_info(g, i, &x) && x.tensor == k;
    for (int i = 0; i < spec->n_named && !leading; i++) leading = !strcmp(t.name, spec->named[i]);
    if (!leading) return false;
    if (!strcmp(t.name, name)) return true;
  }
  return false;
}

/* Every --input NAME is one of the model's inputs; else false, the reason listing them. */
static bool named_inputs_exist(const OnnxTestSpec *spec, const kiln_graph *g, int n_pos, TestResult *r) {
  for (int i = 0; i < spec->n_named; i++) {
    if (is_model_input(spec, g, n_pos, spec->named[i])) continue;
    char list[768] = "";
    int n_in = 0;
    kiln_graph_input_count(g, &n_in);
    for (int k = 0; k < n_in; k++) {
      kiln_tensor_info x;
      char sh[KILN_SHAPE_STR_MAX];
      if (kiln_graph_input_info(g, k, &x) || kiln_shape_format(x.rank, x.shape, sh, sizeof sh)) continue;
      size_t len = strlen(list);
      snprintf(list + len, sizeof list - len, "%s%s %s %s", len ? ", " : "", x.name, sh, kiln_dtype_name(x.dtype));
    }
    result(r, TEST_FAIL, "--input %s=%s: the model has no input '%s' (inputs: %s)", spec->named[i],
           spec->named_files[i], spec->named[i], list[0] ? list : "none");
    return false;
  }
  return true;
}

/* Runs the compiled program on the inputs and compares; everything already loaded. */
static void run_and_check(const OnnxTestSpec *spec, const kiln_graph *g, const kiln_value *ins, int n_in,
                          const kiln_value *outs, int n_out, TestResult *r) {
  const void *inputs[MAX_FILES + 1];
  void **outputs = NULL;
  kiln_tensor_info *ys = NULL;
  kiln_program *p = NULL;
  int n_gin, n_gout;
  kiln_status s;
  if ((s = kiln_graph_input_count(g, &n_gin)) || (s = kiln_graph_output_count(g, &n_gout)))
    return lib_result(r, TEST_FAIL, s, NULL);
  for (int i = 0; i < n_gin; i++) {
    kiln_tensor_info x;
    if ((s = kiln_graph_input_info(g, i, &x))) return lib_result(r, TEST_FAIL, s, NULL);
    const kiln_value *v = input_value(&x, ins, n_in);
    if (!v) return no_value(spec, &x, ins, n_in, r);
    if (v->dtype != x.dtype || v->numel != x.numel)
      return result(r, TEST_FAIL, "input '%s': value is %s of %lld elements, the model wants %s of %lld", x.name,
                    kiln_dtype_name(v->dtype), (long long)v->numel, kiln_dtype_name(x.dtype), (long long)x.numel);
    if (i >= MAX_FILES) return result(r, TEST_FAIL, "too many inputs");
    inputs[i] = v->data;
  }
  if (n_out && n_out != n_gout)
    return result(r, TEST_FAIL, "the model has %d outputs, the test data %d", n_gout, n_out);
  if (!(ys = calloc((size_t)n_gout + 1, sizeof *ys)) || !(outputs = calloc((size_t)n_gout + 1, sizeof *outputs))) {
    result(r, TEST_FAIL, "out of memory for %d outputs", n_gout);
    goto done;
  }
  for (int i = 0; i < n_gout; i++) {
    const kiln_tensor_info *y = &ys[i];
    if ((s = kiln_graph_output_info(g, i, &ys[i]))) {
      lib_result(r, TEST_FAIL, s, NULL);
      goto done;
    }
    if (i < n_out && (y->dtype != outs[i].dtype || y->rank != outs[i].rank ||
                      memcmp(y->shape, outs[i].shape, sizeof(int64_t) * (size_t)y->rank))) {
      char a[KILN_SHAPE_STR_MAX], b[KILN_SHAPE_STR_MAX];
      kiln_shape_format(y->rank, y->shape, a, sizeof a);
      kiln_shape_format(outs[i].rank, outs[i].shape, b, sizeof b);
      result(r, TEST_FAIL, "output %d: kiln gives %s%s, expected %s%s", i, kiln_dtype_name(y->dtype), a,
             kiln_dtype_name(outs[i].dtype), b);
      goto done;
    }
  }
  kiln_options o = kiln_options_default();
  o.backend = spec->backend;
  /* The expected outputs round every node's result to its type (numpy in f16, one node at a time);
   * the cuda and cpu defaults keep a fused kernel's 16-bit values in f32 and differ from them by a unit or two
   * of the 16-bit type, so a test checks each node's own rounding unless $KILN_EXCESS_PRECISION asks */
  if (!getenv("KILN_EXCESS_PRECISION")) o.excess_precision = 0;
  if ((s = kiln_program_compile(g, &o, &p))) {
    lib_result(r, s == KILN_ERR_UNSUPPORTED ? TEST_SKIP : TEST_FAIL, s, "compile");
    goto done;
  }
  for (int i = 0; i < n_gout; i++)
    if (!(outputs[i] = tools_alloc_elems(ys[i].numel, ys[i].dtype))) {
      result(r, TEST_FAIL, "run: out of memory for output %d", i);
      goto done;
    }
  if ((s = kiln_program_run(p, inputs, outputs))) {
    lib_result(r, s == KILN_ERR_UNSUPPORTED ? TEST_SKIP : TEST_FAIL, s, "run");
    goto done;
  }
  result(r, TEST_PASS, "ok");
  for (int i = 0; i < n_gout; i++) {
    const kiln_tensor_info *y = &ys[i];
    kiln_value got = output_value(y, outputs[i]);
    char sh[KILN_SHAPE_STR_MAX];
    kiln_shape_format(y->rank, y->shape, sh, sizeof sh);
    double ma = 0, mr = 0;
    int64_t bad = -1;
    if (i < n_out && !compare(&got, &outs[i], spec->rtol, spec->atol, &ma, &mr, &bad) && r->status == TEST_PASS &&
        y->dtype == KILN_STRING) {
      const char *gs = ((const char *const *)outputs[i])[bad];
      result(r, TEST_FAIL, "output %d '%s': element %lld is \"%.60s\", expected \"%.60s\"", i, y->name, (long long)bad,
             gs ? gs : "(null)", ((const char *const *)outs[i].data)[bad]);
    } else if (i < n_out && bad >= 0 && r->status == TEST_PASS)
      result(r, TEST_FAIL, "output %d '%s': element %lld is %.9g, expected %.9g (max abs err %.3g, max rel err %.3g)", i,
             y->name, (long long)bad, f64_at(&got, bad), f64_at(&outs[i], bad), ma, mr);
    r->max_abs = fmax(r->max_abs, ma), r->max_rel = fmax(r->max_rel, mr);
    if (spec->verbose)
      printf("output %d '%s': %s%s  max abs err %.3g  max rel err %.3g%s\n", i, y->name, kiln_dtype_name(y->dtype), sh,
             ma, mr, i < n_out ? "" : " (no reference)");
  }
  kiln_census c;
  if (spec->verbose && !kiln_program_census(p, &c))
    printf("census: kernels %lld, bytes read %lld, written %lld, host fallbacks %lld (%s), compile %.1f ms\n",
           (long long)c.kernels_launched, (long long)c.bytes_read, (long long)c.bytes_written,
           (long long)c.host_fallbacks, c.fallback_ops[0] ? c.fallback_ops : "-", c.compile_ms);
done:
  for (int i = 0; outputs && i < n_gout; i++) free(outputs[i]);
  free(outputs);
  free(ys);
  kiln_program_free(p);
}

/* The bytes of a model file (malloc), or false with the reason in r. Opened without
 * blocking and checked to be a regular file, as kiln reads models. */
static bool read_model(const char *path, void **data, size_t *size, TestResult *r) {
  *data = NULL, *size = 0;
  struct stat st;
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return result(r, TEST_FAIL, "cannot open '%s': %s", path, strerror(errno)), false;
  if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
    close(fd);
    return result(r, TEST_FAIL, "cannot open '%s': not a regular file", path), false;
  }
  size_t n = (size_t)st.st_size, done = 0;
  char *buf = malloc(n ? n : 1);
  if (!buf) {
    close(fd);
    return result(r, TEST_FAIL, "'%s': cannot allocate %zu bytes", path, n), false;
  }
  while (done < n) {
    ssize_t got = read(fd, buf + done, n - done);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    done += (size_t)got;
  }
  close(fd);
  if (done < n) {
    free(buf);
    return result(r, TEST_FAIL, "short read from '%s'", path), false;
  }
  *data = buf, *size = n;
  return true;
}

/* DIR/input_K.pb and DIR/output_K.pb (spec->data_dir; none without one), or false with the
 * reason in r. */
static bool read_test_data(const OnnxTestSpec *spec, kiln_value_list *set, kiln_value_list *outs, TestResult *r) {
  struct stat st;
  if (!spec->data_dir) return true;
  if (stat(spec->data_dir, &st)) return result(r, TEST_FAIL, "%s: no such folder", spec->data_dir), false;
  if (!S_ISDIR(st.st_mode)) return result(r, TEST_FAIL, "%s: not a folder", spec->data_dir), false;
  kiln_status s = kiln_value_list_read(spec->data_dir, "input", set);
  if (!s) s = kiln_value_list_read(spec->data_dir, "output", outs);
  if (s)  /* sequences, strings, 4-bit types: data kiln cannot hold */
    return lib_result(r, s == KILN_ERR_IO ? TEST_FAIL : TEST_SKIP, s, "test data"), false;
  return true;
}

/* Test data (input_K.pb by position, then --input NAME=FILE by name) and model, read by this
 * tool: a model it cannot read fails the test, one that kiln refuses to import is skipped.
 * An --input file that cannot be read is reported after the names are checked (the model
 * may import without it), so a wrong name is said first. */
void onnx_run_test(const OnnxTestSpec *spec, TestResult *r) {
  memset(r, 0, sizeof *r);
  kiln_value_list set = { 0 }, outs = { 0 };
  kiln_value *named = calloc((size_t)spec->n_named + 1, sizeof *named);
  kiln_value *bind = NULL;
  bool got[MAX_FILES];  /* named[i] was read */
  int n_named = 0, n_bind = 0;
  void *model = NULL;
  size_t size = 0;
  kiln_graph *g = NULL;
  kiln_status s = KILN_OK;
  TestResult unread = { .status = TEST_PASS };  /* the first --input file that could not be read */
  if (!read_test_data(spec, &set, &outs, r)) goto done;
  if (!named || !(bind = calloc((size_t)set.n + (size_t)spec->n_named + 1, sizeof *bind))) {
    result(r, TEST_FAIL, "out of memory");
    goto done;
  }
  for (; n_named < spec->n_named; n_named++) {
    if (set.n + n_named >= MAX_FILES) {
      result(r, TEST_SKIP, "test data: too many inputs");
      goto done;
    }
    s = kiln_value_read_pb(spec->named_files[n_named], &named[n_named]);
    got[n_named] = !s;
    if (s && unread.status == TEST_PASS) lib_result(&unread, s == KILN_ERR_IO ? TEST_FAIL : TEST_SKIP, s, "test data");
  }
  for (int i = 0; i < set.n; i++) {  /* test data is positional */
    bind[n_bind] = set.v[i];
    bind[n_bind++].name = NULL;
  }
  for (int i = 0; i < n_named; i++)
    if (got[i]) {
      bind[n_bind] = named[i];
      bind[n_bind++].name = spec->named[i];
    }
  if (!read_model(spec->model, &model, &size, r)) goto done;
  char dir[PATH_MAX];
  tools_dirname(spec->model, dir, sizeof dir);
  if ((s = kiln_graph_load_onnx_buffer_bound(model, size, dir, n_bind, bind, &g))) {
    if (unread.status != TEST_PASS) {  /* the value missing may be why */
      *r = unread;
      goto done;
    }
    /* a model kiln refuses to import is skipped, with the status and the reason */
    lib_result(r, TEST_SKIP, s, kiln_status_name(s));
    r->lib_import = true;
    goto done;
  }
  if (!named_inputs_exist(spec, g, set.n, r)) goto done;
  if (unread.status != TEST_PASS) *r = unread;
  else run_and_check(spec, g, bind, n_bind, outs.v, outs.n, r);
done:
  kiln_graph_free(g);
  free(model);
  free(bind);
  for (int i = 0; named && i < n_named; i++) kiln_value_clear(&named[i]);
  free(named);
  kiln_value_list_clear(&set);
  kiln_value_list_clear(&outs);
}

/* ---- the walk ---- */

typedef struct Test { char *dir; char *name; } Test;
typedef struct Tests { Test *v; int n, cap; } Tests;

static int push(Tests *ts, const char *dir, const char *name) {
  if (ts->n == ts->cap) {
    int cap = ts->cap ? 2 * ts->cap : 256;
    Test *v = realloc(ts->v, sizeof *v * (size_t)cap);
    if (!v) return -1;
    ts->v = v, ts->cap = cap;
  }
  ts->v[ts->n].dir = strdup(dir);
  ts->v[ts->n].name = strdup(name);
  return ts->v[ts->n++].dir && ts->v[ts->n - 1].name ? 0 : -1;
}

static int cmp_test(const void *a, const void *b) { return strcmp(((const Test *)a)->name, ((const Test *)b)->name); }

/* Test name: "<parent folder>/<test folder>", so equal test names in two suites differ. */
static void test_name(const char *dir, char *buf, size_t cap) {
  char tmp[PATH_MAX];
  snprintf(tmp, sizeof tmp, "%s", dir);
  size_t n = strlen(tmp);
  while (n > 1 && tmp[n - 1] == '/') tmp[--n] = 0;
  char *last = strrchr(tmp, '/');
  if (!last) { snprintf(buf, cap, "%s", tmp); return; }
  *last = 0;
  char *parent = strrchr(tmp, '/');
  snprintf(buf, cap, "%s/%s", parent ? parent + 1 : tmp, last + 1);
}

static int collect(const char *dir, Tests *ts) {
  char path[PATH_MAX], name[PATH_MAX];
  snprintf(path, sizeof path, "%s/model.onnx", dir);
  if (exists(path)) {
    test_name(dir, name, sizeof name);
    return push(ts, dir, name);
  }
  DIR *d = opendir(dir);
  if (!d) {
    fprintf(stderr, "kiln conformance: cannot open '%s': %s\n", dir, strerror(errno));
    return -1;
  }
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    snprintf(path, sizeof path, "%s/%s/model.onnx", dir, e->d_name);
    if (!exists(path)) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    test_name(path, name, sizeof name);
    if (push(ts, path, name)) break;
  }
  closedir(d);
  return 0;
}

/* Runs one test in a child process so a crash or a hang fails only that test. */
static void run_isolated(const OnnxTestSpec *spec, int timeout_s, TestResult *r) {
  int fd[2];
  if (pipe(fd)) { onnx_run_test(spec, r); return; }
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) { close(fd[0]); close(fd[1]); onnx_run_test(spec, r); return; }
  if (pid == 0) {
    close(fd[0]);
    alarm((unsigned)timeout_s);
    TestResult cr;
    onnx_run_test(spec, &cr);
    ssize_t w = write(fd[1], &cr, sizeof cr);
    (void)w;
    _exit(0);
  }
  close(fd[1]);
  memset(r, 0, sizeof *r);
  ssize_t got = 0, k;
  while (got < (ssize_t)sizeof *r && (k = read(fd[0], (char *)r + got, sizeof *r - (size_t)got)) > 0) got += k;
  close(fd[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  if (got != (ssize_t)sizeof *r) {
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM) result(r, TEST_FAIL, "timed out after %d s", timeout_s);
    else if (WIFSIGNALED(st)) result(r, TEST_FAIL, "crashed (signal %d)", WTERMSIG(st));
    else result(r, TEST_FAIL, "child exited with status %d", WEXITSTATUS(st));
  }
}

/* Expected file: name -> "pass" or "skip ...". */
typedef struct Expect { char *name; bool pass; } Expect;

static int load_expected(const char *path, Expect **out, int *n) {
  FILE *f = fopen(path, "r");
  if (!f) { fprintf(stderr, "kiln conformance: cannot open '%s': %s\n", path, strerror(errno)); return -1; }
  char line[2048];
  int cap = 0;
  *out = NULL, *n = 0;
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '#' || line[0] == '\n') continue;
    char *sp = strchr(line, ' ');
    if (!sp) continue;
    *sp = 0;
    if (*n == cap) {
      cap = cap ? 2 * cap : 2048;
      Expect *v = realloc(*out, sizeof *v * (size_t)cap);
      if (!v) break;
      *out = v;
    }
    (*out)[*n].name = strdup(line);
    (*out)[(*n)++].pass = !strncmp(sp + 1, "pass", 4);
  }
  fclose(f);
  return 0;
}

static const Expect *find_expect(const Expect *e, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (!strcmp(e[i].name, name)) return &e[i];
  return NULL;
}

static void tests_free(Tests *ts) {
  for (int i = 0; i < ts->n; i++) free(ts->v[i].dir), free(ts->v[i].name);
  free(ts->v);
}

static const char usage[] =
    "usage: kiln conformance DIR... [--backend B] [--expected FILE] [--write-expected FILE] [--every N]\n"
    "                        [--timeout S] [--in-process]\n"
    "  exit status: 0 no regression, 1 a test listed as pass did not pass, 2 a usage error or a DIR or FILE\n"
    "  that cannot be read\n";

int cmd_conformance(int argc, char **argv) {
  OnnxTestSpec spec = { 0 };
  spec.rtol = RTOL, spec.atol = ATOL;
  const char *expected = NULL, *write_expected = NULL;
  int every = 1, timeout_s = 60, n_dirs = 0;
  bool in_process = false;
  Tests ts = { 0 };
  char **dirs = calloc((size_t)argc, sizeof *dirs);
  if (!dirs) return fprintf(stderr, "kiln conformance: out of memory\n"), 1;
  Cli c = cli_start("conformance", argc, argv);
  while (cli_next(&c))
    if (!cli_str(&c, "--backend", "B", &spec.backend) && !cli_str(&c, "--expected", "FILE", &expected) &&
        !cli_str(&c, "--write-expected", "FILE", &write_expected) && !cli_int(&c, "--every", 1, INT_MAX, &every) &&
        !cli_int(&c, "--timeout", 1, 1000000, &timeout_s) && !cli_flag(&c, "--in-process", &in_process)) {
      if (argv[c.i][0] == '-') cli_unknown(&c);
      else dirs[n_dirs++] = argv[c.i];
    }
  if (!c.bad && !c.help && !n_dirs) cli_error(&c, "no DIR given");
  bool bad = c.bad || c.help;
  for (int i = 0; i < n_dirs && !bad; i++) bad = collect(dirs[i], &ts) != 0;
  free(dirs);
  if (bad) {
    tests_free(&ts);
    return c.bad || c.help ? cli_usage(&c, usage) : 2;
  }
  qsort(ts.v, (size_t)ts.n, sizeof *ts.v, cmp_test);
  Expect *ex = NULL;
  int n_ex = 0;
  if (expected && load_expected(expected, &ex, &n_ex)) { tests_free(&ts); return 2; }
  FILE *wf = write_expected ? fopen(write_expected, "w") : NULL;
  if (write_expected && !wf) {
    fprintf(stderr, "kiln conformance: cannot write '%s'\n", write_expected);
    for (int i = 0; i < n_ex; i++) free(ex[i].name);
    free(ex);
    tests_free(&ts);
    return 2;
  }
  if (wf) fprintf(wf, "# Written by `kiln conformance ... --write-expected`: NAME pass, or NAME skip REASON.\n");
  int passed = 0, failed = 0, skipped = 0, regressions = 0, newly = 0;
  for (int i = 0; i < ts.n; i += every) {
    char model[PATH_MAX], data[PATH_MAX];
    snprintf(model, sizeof model, "%s/model.onnx", ts.v[i].dir);
    snprintf(data, sizeof data, "%s/test_data_set_0", ts.v[i].dir);
    spec.model = model, spec.data_dir = data;
    TestResult r;
    if (in_process) onnx_run_test(&spec, &r);
    else run_isolated(&spec, timeout_s, &r);
    const char *word = r.status == TEST_PASS ? "pass" : r.status == TEST_SKIP ? "skip" : "fail";
    if (r.status == TEST_PASS) printf("%s pass (max abs err %.3g)\n", ts.v[i].name, r.max_abs);
    else printf("%s %s: %s\n", ts.v[i].name, word, r.reason);
    passed += r.status == TEST_PASS, failed += r.status == TEST_FAIL, skipped += r.status == TEST_SKIP;
    if (wf) {
      if (r.status == TEST_PASS) fprintf(wf, "%s pass\n", ts.v[i].name);
      else fprintf(wf, "%s skip %s%s\n", ts.v[i].name, r.status == TEST_FAIL ? "fails: " : "", r.reason);
    }
    if (ex) {
      const Expect *e = find_expect(ex, n_ex, ts.v[i].name);
      if (e && e->pass && r.status != TEST_PASS) {
        regressions++;
        printf("REGRESSION: %s is listed as pass\n", ts.v[i].name);
      }
      if ((!e || !e->pass) && r.status == TEST_PASS) {
        newly++;
        printf("NEWLY PASSING: %s\n", ts.v[i].name);
      }
    }
    fflush(stdout);
  }
  if (wf) fclose(wf);
  printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  if (ex) printf("%d regressions, %d newly passing (against %s)\n", regressions, newly, expected);
  tests_free(&ts);
  for (int i = 0; i < n_ex; i++) free(ex[i].name);
  free(ex);
  return regressions ? 1 : 0;
}
