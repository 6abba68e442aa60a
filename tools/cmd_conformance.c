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
 * their reason). Also here: onnx_run_test, which `kiln run` shares.
 */
#include "tools.h"

#include "graph/graph.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
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

/* Compares got (dtype/shape of expected) with want; fills max errors; false on mismatch. */
static bool compare(const void *got, const OnnxTensor *want, double rtol, double atol, double *max_abs, double *max_rel,
                    int64_t *bad_at) {
  *bad_at = -1;
  if (want->dtype == KILN_STRING) {
    for (int64_t i = 0; i < want->numel; i++) {
      const char *a = ((const char *const *)got)[i], *b = ((const char *const *)want->data)[i];
      if (!a || strcmp(a, b)) { *bad_at = i; return false; }
    }
    return true;
  }
  for (int64_t i = 0; i < want->numel; i++) {
    double a = dtype_load_f64(want->dtype, got, i), b = dtype_load_f64(want->dtype, want->data, i);
    if (!dtype_is_float(want->dtype)) {
      int64_t ia = dtype_load_i64(want->dtype, got, i), ib = dtype_load_i64(want->dtype, want->data, i);
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

static void shape_str(int rank, const int64_t *shape, char *buf, size_t cap) {
  size_t n = (size_t)snprintf(buf, cap, "[");
  for (int i = 0; i < rank && n < cap; i++) n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? "," : "", (long long)shape[i]);
  if (n < cap) snprintf(buf + n, cap - n, "]");
}

static void result(TestResult *r, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void result(TestResult *r, int status, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  r->status = status;
  vsnprintf(r->reason, sizeof r->reason, fmt, ap);
  va_end(ap);
  for (char *p = r->reason; *p; p++)
    if (*p == '\n' || *p == '\t') *p = ' ';
}

/* Runs the compiled program on the inputs and compares; everything already loaded. */
static void run_and_check(const OnnxTestSpec *spec, Graph *g, OnnxTensor *ins, int n_in, OnnxTensor *outs, int n_out,
                          TestResult *r) {
  const void *inputs[MAX_FILES + 1];
  void *outputs[MAX_FILES + 1] = { 0 };
  int ni = 0;
  for (int t = 0; t < g->n_tensors; t++) {
    const Tensor *x = &g->tensors[t];
    if (x->kind != T_INPUT) continue;
    const OnnxTensor *v = NULL;
    for (int k = 0; k < n_in && !v; k++)
      if (ins[k].name && !strcmp(ins[k].name, x->name)) v = &ins[k];
    if (!v && t < n_in && !ins[t].name) v = &ins[t];
    if (!v) return result(r, TEST_FAIL, "no value for input '%s'", x->name);
    if (v->dtype != x->dtype || v->numel != x->numel)
      return result(r, TEST_FAIL, "input '%s': value is %s of %lld elements, the model wants %s of %lld", x->name,
                    kiln_dtype_name(v->dtype), (long long)v->numel, kiln_dtype_name(x->dtype), (long long)x->numel);
    if (ni >= MAX_FILES) return result(r, TEST_FAIL, "too many inputs");
    inputs[ni++] = v->data;
  }
  if (n_out && n_out != g->n_outputs)
    return result(r, TEST_FAIL, "the model has %d outputs, the test data %d", g->n_outputs, n_out);
  for (int i = 0; i < g->n_outputs; i++) {
    const Tensor *y = &g->tensors[g->outputs[i].tensor];
    if (i < n_out && (y->dtype != outs[i].dtype || y->rank != outs[i].rank ||
                      memcmp(y->shape, outs[i].shape, sizeof(int64_t) * (size_t)y->rank))) {
      char a[128], b[128];
      shape_str(y->rank, y->shape, a, sizeof a);
      shape_str(outs[i].rank, outs[i].shape, b, sizeof b);
      return result(r, TEST_FAIL, "output %d: kiln gives %s%s, expected %s%s", i, kiln_dtype_name(y->dtype), a,
                    kiln_dtype_name(outs[i].dtype), b);
    }
  }
  kiln_options o = kiln_options_default();
  o.backend = spec->backend;
  kiln_program *p = NULL;
  kiln_status s = kiln_program_compile((const kiln_graph *)g, &o, &p);
  if (s) return result(r, s == KILN_ERR_UNSUPPORTED ? TEST_SKIP : TEST_FAIL, "compile: %s", kiln_last_error());
  for (int i = 0; i < g->n_outputs && !s; i++) {
    const Tensor *y = &g->tensors[g->outputs[i].tensor];
    outputs[i] = kiln_malloc((size_t)y->numel * kiln_dtype_size(y->dtype) + 1);
    if (!outputs[i]) s = kiln_fail(KILN_ERR_NO_MEMORY, "out of memory for output %d", i);
  }
  if (!s) s = kiln_program_run(p, inputs, outputs);
  if (s) {
    result(r, s == KILN_ERR_UNSUPPORTED ? TEST_SKIP : TEST_FAIL, "run: %s", kiln_last_error());
  } else {
    result(r, TEST_PASS, "ok");
    for (int i = 0; i < g->n_outputs; i++) {
      const Tensor *y = &g->tensors[g->outputs[i].tensor];
      char sh[128];
      shape_str(y->rank, y->shape, sh, sizeof sh);
      double ma = 0, mr = 0;
      int64_t bad = -1;
      if (i < n_out && !compare(outputs[i], &outs[i], spec->rtol, spec->atol, &ma, &mr, &bad) && r->status == TEST_PASS &&
          y->dtype == KILN_STRING) {
        const char *got = ((const char *const *)outputs[i])[bad];
        result(r, TEST_FAIL, "output %d '%s': element %lld is \"%.60s\", expected \"%.60s\"", i, g->outputs[i].name,
               (long long)bad, got ? got : "(null)", ((const char *const *)outs[i].data)[bad]);
      } else if (i < n_out && bad >= 0 && r->status == TEST_PASS)
        result(r, TEST_FAIL, "output %d '%s': element %lld is %.9g, expected %.9g (max abs err %.3g, max rel err %.3g)", i,
               g->outputs[i].name, (long long)bad, dtype_load_f64(y->dtype, outputs[i], bad),
               dtype_load_f64(y->dtype, outs[i].data, bad), ma, mr);
      r->max_abs = fmax(r->max_abs, ma), r->max_rel = fmax(r->max_rel, mr);
      if (spec->verbose)
        printf("output %d '%s': %s%s  max abs err %.3g  max rel err %.3g%s\n", i, g->outputs[i].name,
               kiln_dtype_name(y->dtype), sh, ma, mr, i < n_out ? "" : " (no reference)");
    }
    kiln_census c;
    if (spec->verbose && !kiln_program_census(p, &c))
      printf("census: kernels %lld, bytes read %lld, written %lld, host fallbacks %lld (%s), compile %.1f ms\n",
             (long long)c.kernels_launched, (long long)c.bytes_read, (long long)c.bytes_written,
             (long long)c.host_fallbacks, c.fallback_ops[0] ? c.fallback_ops : "-", c.compile_ms);
  }
  for (int i = 0; i < g->n_outputs; i++) kiln_free(outputs[i]);
  kiln_program_free(p);
}

void onnx_run_test(const OnnxTestSpec *spec, TestResult *r) {
  memset(r, 0, sizeof *r);
  OnnxTensor ins[MAX_FILES] = { 0 }, outs[MAX_FILES] = { 0 };
  int n_in = 0, n_out = 0;
  void *model = NULL;
  size_t size = 0;
  Graph *g = NULL;
  kiln_status s = KILN_OK;
  if (spec->data_dir && (s = onnx_read_tensor_set(spec->data_dir, "input", MAX_FILES, ins, &n_in)) == KILN_OK)
    s = onnx_read_tensor_set(spec->data_dir, "output", MAX_FILES, outs, &n_out);
  for (int i = 0; i < n_in; i++) {  /* test data is positional */
    kiln_free(ins[i].name);
    ins[i].name = NULL;
  }
  for (int i = 0; !s && i < spec->n_named; i++) {
    if (n_in >= MAX_FILES) { s = kiln_fail(KILN_ERR_INVALID_ARG, "too many inputs"); break; }
    if (!(s = onnx_read_tensor_file(spec->named_files[i], &ins[n_in]))) {
      kiln_free(ins[n_in].name);
      ins[n_in].name = kiln_strdup(spec->named[i]);
      n_in++;
    }
  }
  if (s) {  /* sequences, strings, 4-bit types: data kiln cannot hold */
    result(r, s == KILN_ERR_IO ? TEST_FAIL : TEST_SKIP, "test data: %s", kiln_last_error());
    goto done;
  }
  if ((s = onnx_read_file(spec->model, &model, &size))) {
    result(r, TEST_FAIL, "%s", kiln_last_error());
    goto done;
  }
  char dir[PATH_MAX];
  onnx_dirname(spec->model, dir, sizeof dir);
  if ((s = graph_load_onnx_bound(model, size, dir, ins, n_in, &g))) {
    /* a model kiln refuses to import is skipped, with the status and the reason */
    result(r, TEST_SKIP, "%s: %s", kiln_status_name(s), kiln_last_error());
    goto done;
  }
  run_and_check(spec, g, ins, n_in, outs, n_out, r);
done:
  graph_free(g);
  kiln_free(model);
  for (int i = 0; i < MAX_FILES; i++) onnx_tensor_clear(&ins[i]), onnx_tensor_clear(&outs[i]);
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

int cmd_conformance(int argc, char **argv) {
  OnnxTestSpec spec = { 0 };
  spec.rtol = RTOL, spec.atol = ATOL;
  const char *expected = NULL, *write_expected = NULL;
  int every = 1, timeout_s = 60;
  bool in_process = false;
  Tests ts = { 0 };
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--backend") && i + 1 < argc) spec.backend = argv[++i];
    else if (!strcmp(argv[i], "--expected") && i + 1 < argc) expected = argv[++i];
    else if (!strcmp(argv[i], "--write-expected") && i + 1 < argc) write_expected = argv[++i];
    else if (!strcmp(argv[i], "--every") && i + 1 < argc) every = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--timeout") && i + 1 < argc) timeout_s = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--in-process")) in_process = true;
    else if (argv[i][0] == '-') {
      fprintf(stderr, "usage: kiln conformance DIR... [--backend B] [--expected FILE] [--write-expected FILE] "
                      "[--every N] [--timeout S] [--in-process]\n");
      return 2;
    } else if (collect(argv[i], &ts)) return 2;
  }
  if (every < 1) every = 1;
  if (timeout_s < 1) timeout_s = 1;
  qsort(ts.v, (size_t)ts.n, sizeof *ts.v, cmp_test);
  Expect *ex = NULL;
  int n_ex = 0;
  if (expected && load_expected(expected, &ex, &n_ex)) return 2;
  FILE *wf = write_expected ? fopen(write_expected, "w") : NULL;
  if (write_expected && !wf) { fprintf(stderr, "kiln conformance: cannot write '%s'\n", write_expected); return 2; }
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
  for (int i = 0; i < ts.n; i++) free(ts.v[i].dir), free(ts.v[i].name);
  free(ts.v);
  for (int i = 0; i < n_ex; i++) free(ex[i].name);
  free(ex);
  return regressions ? 1 : 0;
}
