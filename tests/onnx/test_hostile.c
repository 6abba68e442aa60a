/*
 * test_hostile — the ONNX loader on bad input: every case must return an error with a
 * message and no graph, never crash or leak (this file also runs under ASan+UBSan).
 *
 * Models are written here byte by byte with a tiny protobuf writer, so each hostile
 * field is exactly what the test says: truncations at every cut point, flipped bytes,
 * huge and negative dims, raw data shorter than declared, external data outside the
 * model folder (absolute, "..", a symlink), missing inputs, unknown ops, deep nesting,
 * loops that would unroll without end, and every input the fuzzer ever crashed on.
 * A well-formed model built the same way must load and compute, so the writer itself
 * is checked.
 */
#include "onnx_util.h"
#include "pbwrite.h"

#include <dirent.h>
#include <unistd.h>

/* A float initializer "w" with declared dims and `have` floats of raw data. */
static void initializer(Buf *g, int rank, const int64_t *dims, size_t have, const char *ext_location) {
  Buf t = { .n = 0 };
  for (int i = 0; i < rank; i++) f_int(&t, 1, dims[i]);
  f_int(&t, 2, 1);
  f_str(&t, 8, "w");
  if (ext_location) {
    Buf e = { .n = 0 };
    f_str(&e, 1, "location");
    f_str(&e, 2, ext_location);
    f_msg(&t, 13, &e);
    f_int(&t, 14, 1);  /* EXTERNAL */
  } else {
    float v[64] = { 0 };
    for (size_t i = 0; i < have && i < 64; i++) v[i] = (float)i;
    f_bytes(&t, 9, v, have * sizeof(float));
  }
  f_msg(g, 5, &t);
}

typedef struct Spec {
  const char *op;                 /* y = op(x, w) */
  int64_t xdims[2], wdims[2];
  size_t w_have;                  /* floats of raw data for w */
  const char *ext;                /* external data location for w */
  const char *node_input1;        /* defaults to "w" */
  int64_t opset;
} Spec;

/* model: inputs x [2,3] and initializer w; one node y = op(x, w); output y. */
static void build(Buf *m, const Spec *sp) {
  Buf g = { .n = 0 }, node = { .n = 0 };
  f_str(&node, 1, "x");
  f_str(&node, 1, sp->node_input1 ? sp->node_input1 : "w");
  f_str(&node, 2, "y");
  f_str(&node, 3, "the_node");
  f_str(&node, 4, sp->op);
  f_msg(&g, 1, &node);
  f_str(&g, 2, "g");
  initializer(&g, 2, sp->wdims, sp->w_have, sp->ext);
  f_value_info(&g, 11, "x", 1, 2, sp->xdims);
  int64_t yd[2] = { sp->xdims[0], sp->xdims[1] };
  f_value_info(&g, 12, "y", 1, 2, yd);
  pb_model(m, &g, sp->opset ? sp->opset : 13);
}

static const Spec good = { "Add", { 2, 3 }, { 2, 3 }, 6, NULL, NULL, 0 };

/* Loading must fail with a message and leave no graph. */
static void must_fail(const Buf *m, const char *dir, const char *what) {
  Graph *g = (Graph *)1;
  kiln_status s = graph_load_onnx(m->b, m->n, dir, &g);
  CHECK_MSG(s != KILN_OK && g == NULL && kiln_last_error()[0], "%s: loaded (status %s)", what, kiln_status_name(s));
  if (s == KILN_OK) graph_free(g);
}

static void test_good_model(void) {
  Buf m = { .n = 0 };
  build(&m, &good);
  Graph *g;
  OK(graph_load_onnx(m.b, m.n, NULL, &g));
  if (!g) return;
  CHECK(g->n_outputs == 1);
  kiln_options o = kiln_options_default();
  o.backend = "ref";
  kiln_program *p = NULL;
  OK(kiln_program_compile((const kiln_graph *)g, &o, &p));
  float x[6] = { 1, 2, 3, 4, 5, 6 }, y[6] = { 0 };
  const void *in[1] = { x };
  void *out[1] = { y };
  if (p) OK(kiln_program_run(p, in, out));
  for (int i = 0; i < 6; i++) CHECK_NEAR(y[i], x[i] + i, 0);  /* w holds 0..5 */
  kiln_program_free(p);
  graph_free(g);
}

static void test_truncations_and_flips(void) {
  Buf m = { .n = 0 };
  build(&m, &good);
  int loaded = 0;
  for (size_t cut = 0; cut < m.n; cut++) {  /* every prefix: refused or (rarely) still a valid model */
    Graph *g = NULL;
    kiln_status s = graph_load_onnx(m.b, cut, NULL, &g);
    if (s == KILN_OK) loaded++, graph_free(g);
    else CHECK(g == NULL && kiln_last_error()[0]);
  }
  CHECK(loaded < 3);
  unsigned long long seed = 12345;
  for (int k = 0; k < 2000; k++) {  /* flip one to three bytes */
    Buf f = m;
    int flips = 1 + (int)((test_rand(&seed) + 1) * 1.5);
    for (int j = 0; j < flips; j++) {
      size_t at = (size_t)((test_rand(&seed) + 1) / 2 * (double)(f.n - 1));
      f.b[at] ^= (uint8_t)(1 + (int)((test_rand(&seed) + 1) * 127));
    }
    Graph *g = NULL;
    kiln_status s = graph_load_onnx(f.b, f.n, NULL, &g);
    if (s == KILN_OK) { CHECK(graph_check(g) == KILN_OK); graph_free(g); }
    else CHECK(g == NULL && kiln_last_error()[0]);
  }
}

static void test_bad_tensors(void) {
  Buf m = { .n = 0 };
  Spec s = good;
  s.w_have = 5;  /* raw data one float short */
  build(&m, &s);
  must_fail(&m, NULL, "short raw data");
  CHECK(strstr(kiln_last_error(), "'w'") != NULL);
  m.n = 0, s = good, s.wdims[0] = (int64_t)1 << 40, s.wdims[1] = (int64_t)1 << 40;  /* numel overflows */
  build(&m, &s);
  must_fail(&m, NULL, "overflowing dims");
  m.n = 0, s = good, s.wdims[0] = (int64_t)1 << 30;  /* huge but representable: no bytes behind it */
  build(&m, &s);
  must_fail(&m, NULL, "huge declared dims");
  m.n = 0, s = good, s.wdims[0] = -2;
  build(&m, &s);
  must_fail(&m, NULL, "negative dim");
  CHECK(strstr(kiln_last_error(), "negative") != NULL);
  m.n = 0, s = good, s.xdims[0] = -1;  /* a symbolic input dim with no value given */
  build(&m, &s);
  must_fail(&m, NULL, "symbolic input");
  m.n = 0, s = good, s.wdims[0] = 3;  /* shapes that do not broadcast */
  s.w_have = 9;
  build(&m, &s);
  must_fail(&m, NULL, "mismatched shapes");
  CHECK(strstr(kiln_last_error(), "the_node") != NULL);
}

static void test_graph_errors(void) {
  Buf m = { .n = 0 };
  Spec s = good;
  s.node_input1 = "nowhere";
  build(&m, &s);
  must_fail(&m, NULL, "missing input");
  CHECK(strstr(kiln_last_error(), "nowhere") != NULL);
  m.n = 0, s = good, s.op = "FrobnicateV9";
  build(&m, &s);
  Graph *g = NULL;
  CHECK(graph_load_onnx(m.b, m.n, NULL, &g) == KILN_ERR_UNSUPPORTED && g == NULL);
  CHECK(strstr(kiln_last_error(), "the_node") && strstr(kiln_last_error(), "FrobnicateV9"));
  m.n = 0, s = good, s.opset = 3;
  build(&m, &s);
  must_fail(&m, NULL, "opset 3");
  /* messages nested far deeper than any model: refused before protobuf-c recurses */
  Buf deep = { .n = 0 };
  for (int i = 0; i < 200 && deep.n + 16 < sizeof deep.b; i++) {
    Buf outer = { .n = 0 };
    f_msg(&outer, i % 2 ? 5 : 7, &deep);  /* graph -> initializer -> ... alternating */
    deep = outer;
  }
  must_fail(&deep, NULL, "deep nesting");
  must_fail(&(Buf){ .n = 0 }, NULL, "empty file");
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_load_onnx(NULL, (kiln_graph **)&g));
  FAILS(KILN_ERR_IO, kiln_graph_load_onnx("/nonexistent/model.onnx", (kiln_graph **)&g));
}

static void test_external_data(void) {
  char dir[] = "/tmp/kiln_hostile_XXXXXX", path[256], sub[128];
  if (!mkdtemp(dir)) { CHECK(!"mkdtemp"); return; }
  snprintf(sub, sizeof sub, "%s/model", dir);
  CHECK(mkdir(sub, 0700) == 0);
  float w[6] = { 0, 1, 2, 3, 4, 5 };
  snprintf(path, sizeof path, "%s/w.bin", sub);  /* inside the model folder */
  FILE *f = fopen(path, "wb");
  CHECK(f && fwrite(w, sizeof w, 1, f) == 1);
  if (f) fclose(f);
  snprintf(path, sizeof path, "%s/secret.bin", dir);  /* outside it */
  f = fopen(path, "wb");
  CHECK(f && fwrite(w, sizeof w, 1, f) == 1);
  if (f) fclose(f);
  char link[256];
  snprintf(link, sizeof link, "%s/link.bin", sub);
  CHECK(symlink(path, link) == 0);

  Buf m = { .n = 0 };
  Spec s = good;
  s.ext = "w.bin";
  build(&m, &s);
  Graph *g = NULL;
  OK(graph_load_onnx(m.b, m.n, sub, &g));
  graph_free(g);
  must_fail(&m, NULL, "external data without a folder");
  const char *bad[] = { "../secret.bin", path, "link.bin", "missing.bin", "", "a/../../secret.bin" };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    m.n = 0, s.ext = bad[i];
    build(&m, &s);
    must_fail(&m, sub, bad[i]);
  }
  m.n = 0, s.ext = "w.bin", s.wdims[0] = 4;  /* file shorter than the tensor */
  build(&m, &s);
  must_fail(&m, sub, "short external data");
  unlink(link);
  unlink(path);
  snprintf(path, sizeof path, "%s/w.bin", sub);
  unlink(path);
  rmdir(sub);
  rmdir(dir);
}

/* vi with a rank-0 or rank-1 shape of one element */
static void small_vi(Buf *out, int field, const char *name, int dtype, int rank) {
  Buf shape = { .n = 0 }, tt = { .n = 0 }, tp = { .n = 0 }, vi = { .n = 0 }, d = { .n = 0 };
  f_int(&d, 1, 1);
  if (rank) f_msg(&shape, 1, &d);
  f_int(&tt, 1, dtype);
  f_msg(&tt, 2, &shape);
  f_msg(&tp, 1, &tt);
  f_str(&vi, 1, name);
  f_msg(&vi, 2, &tp);
  f_msg(out, field, &vi);
}

static void identity(Buf *g, const char *in, const char *out) {
  Buf n = { .n = 0 };
  f_str(&n, 1, in);
  f_str(&n, 2, out);
  f_str(&n, 4, "Identity");
  f_msg(g, 1, &n);
}

/* Loop M times over an identity body (M an int64 initializer); nested `depth` deep. */
static void loop_model(Buf *m, int64_t trips, int depth) {
  Buf body = { .n = 0 };
  f_str(&body, 2, "body");
  small_vi(&body, 11, "i", 7, 0);
  small_vi(&body, 11, "c", 9, 0);
  small_vi(&body, 11, "v", 1, 1);
  identity(&body, "c", "c_out");
  identity(&body, "v", "v_out");
  small_vi(&body, 12, "c_out", 9, 0);
  small_vi(&body, 12, "v_out", 1, 1);
  for (int k = 0; k < depth; k++) {  /* wrap: the body itself runs a loop over v */
    Buf outer = { .n = 0 }, node = { .n = 0 }, at = { .n = 0 };
    f_str(&outer, 2, "body");
    small_vi(&outer, 11, "i", 7, 0);
    small_vi(&outer, 11, "c", 9, 0);
    small_vi(&outer, 11, "v", 1, 1);
    identity(&outer, "c", "c_out");
    f_str(&at, 1, "body");
    f_int(&at, 20, 5);
    f_msg(&at, 6, &body);
    f_str(&node, 1, "M");
    f_str(&node, 1, "");
    f_str(&node, 1, "v");
    f_str(&node, 2, "v_out");
    f_str(&node, 4, "Loop");
    f_msg(&node, 5, &at);
    f_msg(&outer, 1, &node);
    small_vi(&outer, 12, "c_out", 9, 0);
    small_vi(&outer, 12, "v_out", 1, 1);
    body = outer;
  }
  Buf g = { .n = 0 }, node = { .n = 0 }, at = { .n = 0 }, t = { .n = 0 };
  f_str(&at, 1, "body");
  f_int(&at, 20, 5);
  f_msg(&at, 6, &body);
  f_str(&node, 1, "M");
  f_str(&node, 1, "");
  f_str(&node, 1, "x");
  f_str(&node, 2, "y");
  f_str(&node, 3, "the_loop");
  f_str(&node, 4, "Loop");
  f_msg(&node, 5, &at);
  f_msg(&g, 1, &node);
  f_str(&g, 2, "g");
  f_int(&t, 2, 7);
  f_str(&t, 8, "M");
  f_bytes(&t, 9, &trips, sizeof trips);
  f_msg(&g, 5, &t);
  small_vi(&g, 11, "x", 1, 1);
  small_vi(&g, 12, "y", 1, 1);
  pb_model(m, &g, 13);
}

static void test_unrolling_limits(void) {
  Buf m = { .n = 0 };
  Graph *g = NULL;
  loop_model(&m, 3, 0);  /* small: unrolls to identities */
  OK(graph_load_onnx(m.b, m.n, NULL, &g));
  graph_free(g);
  m.n = 0;
  loop_model(&m, 1000000000, 0);
  CHECK(graph_load_onnx(m.b, m.n, NULL, &g) == KILN_ERR_UNSUPPORTED && g == NULL);
  CHECK(strstr(kiln_last_error(), "the_loop") != NULL);
  m.n = 0;
  loop_model(&m, 4000, 3);  /* 4000^4 iterations if nothing stopped it */
  CHECK(graph_load_onnx(m.b, m.n, NULL, &g) == KILN_ERR_UNSUPPORTED && g == NULL);
  CHECK(strstr(kiln_last_error(), "nodes") != NULL);
}

static void test_alloc_failures(void) {
  Buf m = { .n = 0 };
  build(&m, &good);
  for (long n = 1; n < 400; n++) {  /* fail the nth allocation: an error, never a crash or leak */
    Graph *g = NULL;
    kiln_alloc_fail_after(n);
    kiln_status s = graph_load_onnx(m.b, m.n, NULL, &g);
    kiln_alloc_fail_after(0);
    if (s == KILN_OK) { graph_free(g); break; }
    CHECK(g == NULL && kiln_last_error()[0]);
  }
}

/* Inputs the fuzzer once crashed on (fuzz/regressions): each must now load or fail cleanly. */
static void test_fuzz_regressions(void) {
  const char *src = getenv("KILN_SOURCE_DIR");
  char dir[PATH_MAX];
  snprintf(dir, sizeof dir, "%s/fuzz/regressions", src && *src ? src : ".");
  DIR *d = opendir(dir);
  CHECK_MSG(d != NULL, "%s is missing", dir);
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d))) {
    if (e->d_name[0] == '.') continue;
    char path[PATH_MAX + 256];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    void *data;
    size_t size;
    OK(onnx_read_file(path, &data, &size));
    Graph *g = NULL;
    kiln_status s = graph_load_onnx(data, size, NULL, &g);
    if (s == KILN_OK) CHECK(graph_check(g) == KILN_OK);
    else CHECK_MSG(g == NULL && kiln_last_error()[0], "%s: failed without a message", e->d_name);
    graph_free(g);
    kiln_free(data);
    n++;
  }
  if (d) closedir(d);
  CHECK(n >= 3);
}

int main(void) {
  test_good_model();
  test_truncations_and_flips();
  test_bad_tensors();
  test_graph_errors();
  test_external_data();
  test_unrolling_limits();
  test_fuzz_regressions();
  test_alloc_failures();
  TEST_MAIN_END();
}
