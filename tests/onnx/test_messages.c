/*
 * test_messages — what the ONNX loader says about a bad model or a bad value, word for word
 * where it matters: the status (a malformed file is KILN_ERR_MODEL, a bad value from the
 * caller KILN_ERR_INVALID_ARG, only a gap in kiln KILN_ERR_UNSUPPORTED), the file path first
 * for the path loaders, then the node, attribute, input or output, dim, and the declared and
 * given values. No message carries a status word of its own (the tools print the status
 * before it). Models are written field by field (pbwrite.h); this file also runs under ASan.
 * KILN_TEST_VERBOSE=1 prints each message as a tool would ("STATUS: MESSAGE").
 */
#include "onnx_util.h"
#include "pbwrite.h"

#include <stdarg.h>
#include <unistd.h>

#define T_FLOAT 1
#define T_INT32 6
#define T_COMPLEX64 14

/* AttributeProto.type */
enum { A_FLOAT = 1, A_INT = 2, A_INTS = 7 };

static char tmp[64];  /* the test folder (mkdtemp) */

/* ---- writing models ---- */

/* ValueInfo name: a tensor of elem_type with dims; a dim < 0 is the symbolic dim params[-1 - dim]. */
static void value_info(Buf *g, int field, const char *name, int elem_type, int rank, const int64_t *dims,
                       const char *const *params) {
  Buf shape = { .n = 0 }, tt = { .n = 0 }, tp = { .n = 0 }, vi = { .n = 0 };
  for (int i = 0; i < rank; i++) {
    Buf d = { .n = 0 };
    if (dims[i] < 0) f_str(&d, 2, params[-1 - dims[i]]);
    else f_int(&d, 1, dims[i]);
    f_msg(&shape, 1, &d);
  }
  if (elem_type >= 0) f_int(&tt, 1, elem_type);  /* < 0: leave it out */
  f_msg(&tt, 2, &shape);
  f_msg(&tp, 1, &tt);
  f_str(&vi, 1, name);
  f_msg(&vi, 2, &tp);
  f_msg(g, field, &vi);
}

/* An AttributeProto into attrs (the node's field 5): name, one value, the type as given. */
static void attr_int(Buf *attrs, const char *name, int64_t v, int64_t type) {
  Buf a = { .n = 0 };
  f_str(&a, 1, name);
  f_int(&a, 3, v);
  f_int(&a, 20, type);
  f_msg(attrs, 5, &a);
}

static void attr_float(Buf *attrs, const char *name, float v, int64_t type) {
  Buf a = { .n = 0 };
  f_str(&a, 1, name);
  key(&a, 2, 5);
  uint8_t b[4];
  memcpy(b, &v, 4);
  for (int i = 0; i < 4; i++) put(&a, b[i]);
  f_int(&a, 20, type);
  f_msg(attrs, 5, &a);
}

static void attr_ints(Buf *attrs, const char *name, int n, const int64_t *v) {
  Buf a = { .n = 0 };
  f_str(&a, 1, name);
  for (int i = 0; i < n; i++) f_int(&a, 8, v[i]);
  f_int(&a, 20, A_INTS);
  f_msg(attrs, 5, &a);
}

/* A node: inputs and outputs as space-separated names, attrs its AttributeProto fields (or NULL). */
static void node(Buf *g, const char *name, const char *op, const char *ins, const char *outs, const Buf *attrs) {
  Buf nd = { .n = 0 };
  char buf[256];
  for (int io = 0; io < 2; io++) {
    snprintf(buf, sizeof buf, "%s", io ? outs : ins);
    for (char *t = strtok(buf, " "); t; t = strtok(NULL, " ")) f_str(&nd, io ? 2 : 1, t);
  }
  f_str(&nd, 3, name);
  f_str(&nd, 4, op);
  if (attrs)
    for (size_t i = 0; i < attrs->n; i++) put(&nd, attrs->b[i]);
  f_msg(g, 1, &nd);
}

/* A float initializer of the given dims, all ones. */
static void initializer(Buf *g, const char *name, int rank, const int64_t *dims) {
  Buf t = { .n = 0 };
  int64_t n = 1;
  for (int i = 0; i < rank; i++) f_int(&t, 1, dims[i]), n *= dims[i];
  f_int(&t, 2, T_FLOAT);
  f_str(&t, 8, name);
  for (int64_t i = 0; i < n; i++) {
    float one = 1;
    key(&t, 4, 5);
    uint8_t b[4];
    memcpy(b, &one, 4);
    for (int k = 0; k < 4; k++) put(&t, b[k]);
  }
  f_msg(g, 5, &t);
}

static void model(Buf *m, const Buf *g, int64_t opset) {
  m->n = 0;
  pb_model(m, g, opset);
}

/* y = op(x) with x, y float [2,3] and the attributes given: a one-node model at opset. */
static void unary(Buf *m, const char *name, const char *op, const Buf *attrs, int64_t opset) {
  Buf g = { .n = 0 };
  node(&g, name, op, "x", "y", attrs);
  f_str(&g, 2, "g");
  value_info(&g, 11, "x", T_FLOAT, 2, (int64_t[]){ 2, 3 }, NULL);
  value_info(&g, 12, "y", T_FLOAT, 2, (int64_t[]){ 2, 3 }, NULL);
  model(m, &g, opset);
}

static void write_file(const char *name, const void *p, size_t n, char *path) {
  CHECK(pb_write_file(tmp, name, p, n, path));
}

/* ---- checking messages ---- */

/* No status word of the library's own in msg: the tools print kiln_status_name first. */
static bool has_status_word(const char *msg) {
  return strstr(msg, "unsupported:") || strstr(msg, "invalid argument:") || strstr(msg, "bad model:");
}

/* The last error has status s (got), starts with head and holds every string in the
 * NULL-terminated list that follows. */
static void expect(kiln_status got, kiln_status s, const char *head, ...) {
  const char *msg = kiln_last_error();
  if (getenv("KILN_TEST_VERBOSE")) printf("%s: %s\n", kiln_status_name(got), msg);  /* the messages, as a tool prints them */
  bool ok = got == s && !strncmp(msg, head, strlen(head)) && !has_status_word(msg);
  va_list ap;
  va_start(ap, head);
  for (const char *w; (w = va_arg(ap, const char *));) ok = ok && strstr(msg, w);
  va_end(ap);
  CHECK_MSG(ok, "%s: '%s', expected %s starting '%s'", kiln_status_name(got), msg, kiln_status_name(s), head);
}

/* Loads from the buffer and from a file: the same status, the buffer's message the file's
 * without its "PATH: " (the head and words are checked on the buffer's). */
static void expect_both(const Buf *m, int n, const kiln_value *bind, kiln_status s, const char *head, ...) {
  char msg[1024], path[PATH_MAX], want[PATH_MAX + 1100];
  kiln_graph *g = (kiln_graph *)1;
  kiln_status got = kiln_graph_load_onnx_buffer_bound(m->b, m->n, NULL, n, bind, &g);
  CHECK(g == NULL);
  snprintf(msg, sizeof msg, "%s", kiln_last_error());
  const char *words[8] = { 0 };
  va_list ap;
  va_start(ap, head);
  for (int i = 0; i < 7 && (words[i] = va_arg(ap, const char *)); i++) {}
  va_end(ap);
  expect(got, s, head, words[0], words[1], words[2], words[3], words[4], words[5], words[6], (const char *)NULL);
  write_file("model.onnx", m->b, m->n, path);
  g = (kiln_graph *)1;
  got = kiln_graph_load_onnx_bound(path, n, bind, &g);
  snprintf(want, sizeof want, "%s: %s", path, msg);
  CHECK_MSG(got == s && g == NULL && !strcmp(kiln_last_error(), want), "from a file: %s '%s', expected '%s'",
            kiln_status_name(got), kiln_last_error(), want);
  if (!n) {  /* the plain loader says the same */
    got = kiln_graph_load_onnx(path, &g);
    CHECK_MSG(got == s && g == NULL && !strcmp(kiln_last_error(), want), "kiln_graph_load_onnx: '%s'", kiln_last_error());
  }
}

static void loads(const Buf *m, int n, const kiln_value *bind, const char *what) {
  kiln_graph *g = NULL;
  kiln_status s = kiln_graph_load_onnx_buffer_bound(m->b, m->n, NULL, n, bind, &g);
  CHECK_MSG(s == KILN_OK && g, "%s: %s: %s", what, kiln_status_name(s), kiln_last_error());
  kiln_graph_free(g);
}

/* ---- the file ---- */

static void test_empty_file(void) {
  char path[PATH_MAX], want[PATH_MAX + 32];
  write_file("empty.onnx", "", 0, path);
  snprintf(want, sizeof want, "%s: the file is empty", path);
  kiln_graph *g = (kiln_graph *)1;
  FAILS(KILN_ERR_MODEL, kiln_graph_load_onnx(path, &g));
  CHECK_MSG(g == NULL && !strcmp(kiln_last_error(), want), "'%s'", kiln_last_error());
  FAILS(KILN_ERR_MODEL, kiln_graph_load_onnx_bound(path, 0, NULL, &g));
  CHECK(g == NULL && !strcmp(kiln_last_error(), want));
  expect(kiln_graph_load_onnx_buffer("", 0, NULL, &g), KILN_ERR_MODEL, "the model is empty (0 bytes)", NULL);
  /* a missing file: i/o, the path first */
  snprintf(path, sizeof path, "%s/absent.onnx", tmp);
  expect(kiln_graph_load_onnx(path, &g), KILN_ERR_IO, path, ": cannot open: ", NULL);
}

static void test_not_protobuf(void) {
  Buf m = { .n = 0 };
  const char junk[] = "\xff\xff\xff\xff";
  for (size_t i = 0; i < 4; i++) put(&m, (uint8_t)junk[i]);
  expect_both(&m, 0, NULL, KILN_ERR_MODEL, "not an ONNX model: the bytes are not valid protobuf", "byte 0", NULL);
  m.n = 0;
  const char text[] = "hello, world\n";  /* a text file */
  for (size_t i = 0; i < sizeof text - 1; i++) put(&m, (uint8_t)text[i]);
  expect_both(&m, 0, NULL, KILN_ERR_MODEL, "not an ONNX model: ", "protobuf", NULL);
  m.n = 0;
  f_int(&m, 100, 1);  /* protobuf, but no field a model has */
  expect_both(&m, 0, NULL, KILN_ERR_MODEL, "not an ONNX model: no graph, IR version or opset", NULL);
  m.n = 0;
  f_int(&m, 1, 8);  /* a model without a graph */
  expect_both(&m, 0, NULL, KILN_ERR_MODEL, "the model has no graph", NULL);
}

/* ---- nodes ---- */

/* A declared shape the model's own weights disagree with: the first node that fails names
 * itself with its ONNX op, then kiln's. */
static void test_inconsistent_node(void) {
  Buf g = { .n = 0 }, m;
  node(&g, "fc", "MatMul", "x w", "y", NULL);
  f_str(&g, 2, "g");
  initializer(&g, "w", 2, (int64_t[]){ 4, 2 });
  value_info(&g, 11, "x", T_FLOAT, 2, (int64_t[]){ 2, 3 }, NULL);
  value_info(&g, 12, "y", T_FLOAT, 2, (int64_t[]){ 2, 2 }, NULL);
  model(&m, &g, 13);
  expect_both(&m, 0, NULL, KILN_ERR_MODEL, "node 'fc' (MatMul): matmul: ", "inner", NULL);
  char longname[700];  /* a name longer than the message holds: still the model's fault, cut short */
  memset(longname, 'n', sizeof longname - 1);
  longname[sizeof longname - 1] = 0;
  g.n = 0;
  node(&g, longname, "MatMul", "x w", "y", NULL);
  f_str(&g, 2, "g");
  initializer(&g, "w", 2, (int64_t[]){ 4, 2 });
  value_info(&g, 11, "x", T_FLOAT, 2, (int64_t[]){ 2, 3 }, NULL);
  value_info(&g, 12, "y", T_FLOAT, 2, (int64_t[]){ 2, 2 }, NULL);
  model(&m, &g, 13);
  kiln_graph *kg = (kiln_graph *)1;
  expect(kiln_graph_load_onnx_buffer(m.b, m.n, NULL, &kg), KILN_ERR_MODEL, "node 'nnnn", NULL);
  CHECK(kg == NULL);
  g.n = 0;
  node(&g, "n1", "Relu", "x", "y", NULL);
  node(&g, "n2", "FrobnicateV9", "y", "z", NULL);  /* a real gap: unsupported, naming the node */
  f_str(&g, 2, "g");
  value_info(&g, 11, "x", T_FLOAT, 2, (int64_t[]){ 2, 3 }, NULL);
  value_info(&g, 12, "z", T_FLOAT, 2, (int64_t[]){ 2, 3 }, NULL);
  model(&m, &g, 13);
  expect_both(&m, 0, NULL, KILN_ERR_UNSUPPORTED, "node 'n2' (FrobnicateV9): operator FrobnicateV9 is not supported", NULL);
}

/* ---- attributes ---- */

static void test_attribute_types(void) {
  Buf a = { .n = 0 }, m;
  /* garbage types: no type at all, 255, 2^31 - 1 */
  attr_float(&a, "alpha", 0.5f, 0);
  unary(&m, "lr", "LeakyRelu", &a, 13);
  expect_both(&m, 0, NULL, KILN_ERR_MODEL, "node 'lr' (LeakyRelu): attribute 'alpha' has no type (UNDEFINED)", NULL);
  const int64_t bad[] = { 255, 2147483647 };
  for (int k = 0; k < 2; k++) {
    char want[128];
    snprintf(want, sizeof want, "node 'lr' (LeakyRelu): attribute 'alpha' has type %lld, which is not an ONNX attribute type",
             (long long)bad[k]);
    a.n = 0;
    attr_float(&a, "alpha", 0.5f, bad[k]);
    unary(&m, "lr", "LeakyRelu", &a, 13);
    expect_both(&m, 0, NULL, KILN_ERR_MODEL, want, NULL);
  }
  /* the wrong type for the name */
  a.n = 0;
  attr_float(&a, "alpha", 0.5f, A_INT);
  unary(&m, "lr", "LeakyRelu", &a, 13);
  expect_both(&m, 0, NULL, KILN_ERR_MODEL, "node 'lr' (LeakyRelu): attribute 'alpha' is INT, expected FLOAT", NULL);
  Buf g = { .n = 0 };
  a.n = 0;
  attr_float(&a, "kernel_shape", 3, A_FLOAT);
  node(&g, "conv1", "Conv", "x w", "y", &a);
  f_str(&g, 2, "g");
  initializer(&g, "w", 4, (int64_t[]){ 1, 1, 3, 3 });
  value_info(&g, 11, "x", T_FLOAT, 4, (int64_t[]){ 1, 1, 5, 5 }, NULL);
  value_info(&g, 12, "y", T_FLOAT, 4, (int64_t[]){ 1, 1, 3, 3 }, NULL);
  model(&m, &g, 11);
  expect_both(&m, 0, NULL, KILN_ERR_MODEL, "node 'conv1' (Conv): attribute 'kernel_shape' is FLOAT, expected INTS", NULL);
  a.n = 0;  /* and right, it loads */
  attr_ints(&a, "kernel_shape", 2, (int64_t[]){ 3, 3 });
  g.n = 0;
  node(&g, "conv1", "Conv", "x w", "y", &a);
  f_str(&g, 2, "g");
  initializer(&g, "w", 4, (int64_t[]){ 1, 1, 3, 3 });
  value_info(&g, 11, "x", T_FLOAT, 4, (int64_t[]){ 1, 1, 5, 5 }, NULL);
  value_info(&g, 12, "y", T_FLOAT, 4, (int64_t[]){ 1, 1, 3, 3 }, NULL);
  model(&m, &g, 11);
  loads(&m, 0, NULL, "Conv with kernel_shape INTS");
}

static void test_attribute_names(void) {
  Buf a = { .n = 0 }, m;
  attr_float(&a, "alpha2", 1, A_FLOAT);
  unary(&m, "n", "Relu", &a, 14);
  expect_both(&m, 0, NULL, KILN_ERR_MODEL, "node 'n' (Relu): unknown attribute 'alpha2' (Relu at opset 14 takes none)", NULL);
  unary(&m, "lr", "LeakyRelu", &a, 16);
  expect_both(&m, 0, NULL, KILN_ERR_MODEL, "node 'lr' (LeakyRelu): unknown attribute 'alpha2' (LeakyRelu at opset 16 takes alpha)",
              NULL);
  a.n = 0;
  attr_float(&a, "", 1, A_FLOAT);  /* renamed to '' */
  unary(&m, "lr", "LeakyRelu", &a, 13);
  expect_both(&m, 0, NULL, KILN_ERR_MODEL, "node 'lr' (LeakyRelu): attribute 0 has no name", NULL);
  a.n = 0;
  attr_float(&a, "alpha", 1, A_FLOAT);
  attr_float(&a, "alpha", 2, A_FLOAT);
  unary(&m, "lr", "LeakyRelu", &a, 13);
  expect_both(&m, 0, NULL, KILN_ERR_MODEL, "node 'lr' (LeakyRelu): attribute 'alpha' is given twice", NULL);

  /* by the imported opset: Squeeze's axes is an attribute up to 12, an input from 13 */
  Buf g = { .n = 0 };
  a.n = 0;
  attr_ints(&a, "axes", 1, (int64_t[]){ 0 });
  node(&g, "sq", "Squeeze", "x", "y", &a);
  f_str(&g, 2, "g");
  value_info(&g, 11, "x", T_FLOAT, 2, (int64_t[]){ 1, 3 }, NULL);
  value_info(&g, 12, "y", T_FLOAT, 1, (int64_t[]){ 3 }, NULL);
  model(&m, &g, 11);
  loads(&m, 0, NULL, "Squeeze-11 with axes");
  model(&m, &g, 13);
  expect_both(&m, 0, NULL, KILN_ERR_MODEL, "node 'sq' (Squeeze): unknown attribute 'axes' (Squeeze at opset 13 takes none)",
              NULL);

  /* attributes ONNX allows and kiln ignores still load */
  a.n = 0;
  attr_int(&a, "seed", 7, A_INT);
  unary(&m, "d", "Dropout", &a, 13);
  loads(&m, 0, NULL, "Dropout with seed");
  a.n = 0;
  attr_int(&a, "to", T_FLOAT, A_INT);
  attr_int(&a, "saturate", 1, A_INT);
  unary(&m, "c", "Cast", &a, 19);
  loads(&m, 0, NULL, "Cast-19 with saturate");
  unary(&m, "c", "Cast", &a, 13);  /* saturate came at 19 */
  expect_both(&m, 0, NULL, KILN_ERR_MODEL, "node 'c' (Cast): unknown attribute 'saturate' (Cast at opset 13 takes to)", NULL);
}

/* ---- graph inputs and outputs ---- */

static void test_io_types(void) {
  const int64_t types[] = { 0, 255, -1 };  /* -1: no elem_type field at all */
  for (int k = 0; k < 3; k++) {
    Buf g = { .n = 0 }, m;
    char want[96];
    node(&g, "n", "Relu", "x", "y", NULL);
    f_str(&g, 2, "g");
    value_info(&g, 11, "x", T_FLOAT, 2, (int64_t[]){ 2, 3 }, NULL);
    value_info(&g, 12, "y", (int)types[k], 2, (int64_t[]){ 2, 3 }, NULL);
    model(&m, &g, 13);
    if (types[k] == 255) snprintf(want, sizeof want, "output 'y': element type 255 is not an ONNX type");
    else snprintf(want, sizeof want, "output 'y': no element type (undefined, 0)");
    expect_both(&m, 0, NULL, KILN_ERR_MODEL, want, NULL);
    g.n = 0;
    node(&g, "n", "Relu", "x", "y", NULL);
    f_str(&g, 2, "g");
    value_info(&g, 11, "x", (int)types[k], 2, (int64_t[]){ 2, 3 }, NULL);
    value_info(&g, 12, "y", T_FLOAT, 2, (int64_t[]){ 2, 3 }, NULL);
    model(&m, &g, 13);
    if (types[k] == 255) snprintf(want, sizeof want, "input 'x': element type 255 is not an ONNX type");
    else snprintf(want, sizeof want, "input 'x': no element type (undefined, 0)");
    expect_both(&m, 0, NULL, KILN_ERR_MODEL, want, NULL);
  }
  Buf g = { .n = 0 }, m;  /* an ONNX type kiln lacks is a gap */
  node(&g, "n", "Identity", "x", "y", NULL);
  f_str(&g, 2, "g");
  value_info(&g, 11, "x", T_COMPLEX64, 1, (int64_t[]){ 2 }, NULL);
  value_info(&g, 12, "y", T_COMPLEX64, 1, (int64_t[]){ 2 }, NULL);
  model(&m, &g, 13);
  expect_both(&m, 0, NULL, KILN_ERR_UNSUPPORTED, "input 'x': element type complex64 (14) is not supported", NULL);
}

/* ---- bound values ---- */

/* z = x + y; x declared [2,3] (or [batch,3]), y [batch,3]. */
static void add_model(Buf *m, bool x_symbolic) {
  Buf g = { .n = 0 };
  const char *params[] = { "batch" };
  node(&g, "add", "Add", "x y", "z", NULL);
  f_str(&g, 2, "g");
  value_info(&g, 11, "x", T_FLOAT, 2, (int64_t[]){ x_symbolic ? -1 : 2, 3 }, params);
  value_info(&g, 11, "y", T_FLOAT, 2, (int64_t[]){ -1, 3 }, params);
  value_info(&g, 12, "z", T_FLOAT, 2, (int64_t[]){ -1, 3 }, params);
  model(m, &g, 13);
}

static void test_bound_shapes(void) {
  Buf m;
  float data[64] = { 0 };
  kiln_value x = { .name = "x", .dtype = KILN_F32, .rank = 2, .shape = { 2, 5 }, .numel = 10, .data = data };
  kiln_value y = { .name = "y", .dtype = KILN_F32, .rank = 2, .shape = { 7, 3 }, .numel = 21, .data = data };
  add_model(&m, false);
  expect_both(&m, 1, &x, KILN_ERR_INVALID_ARG, "input 'x' dim 1: the model declares 3, the value has 5", NULL);
  x.shape[0] = 4, x.shape[1] = 3, x.numel = 12;
  expect_both(&m, 1, &x, KILN_ERR_INVALID_ARG, "input 'x' dim 0: the model declares 2, the value has 4", NULL);

  /* a symbolic dim takes the first value given it, for every input that names it */
  add_model(&m, true);
  kiln_value both[2] = { x, y };
  expect_both(&m, 2, both, KILN_ERR_INVALID_ARG, "input 'y' dim 0 'batch': bound to 4 by input 'x', the value has 7", NULL);
  both[1].shape[0] = 4, both[1].numel = 12;
  loads(&m, 2, both, "x and y with batch 4");
  kiln_graph *g = NULL;  /* x alone binds batch: y, still an input, is [4,3] */
  OK(kiln_graph_load_onnx_buffer_bound(m.b, m.n, NULL, 1, &x, &g));
  kiln_tensor_info info;
  if (g) {
    OK(kiln_graph_input_info(g, 1, &info));
    CHECK(!strcmp(info.name, "y") && info.rank == 2 && info.shape[0] == 4 && info.shape[1] == 3);
    OK(kiln_graph_output_info(g, 0, &info));
    CHECK(info.shape[0] == 4);
    kiln_graph_free(g);
  }

  /* rank and dtype, named the same way */
  kiln_value r3 = { .name = "x", .dtype = KILN_F32, .rank = 3, .shape = { 2, 3, 1 }, .numel = 6, .data = data };
  expect_both(&m, 1, &r3, KILN_ERR_INVALID_ARG, "input 'x': the model declares rank 2, the value has rank 3", NULL);
  kiln_value i32 = { .name = "x", .dtype = KILN_I32, .rank = 2, .shape = { 2, 3 }, .numel = 6, .data = data };
  expect_both(&m, 1, &i32, KILN_ERR_INVALID_ARG, "input 'x': the model declares type f32, the value has type i32",
              NULL);
}

/* An input the model reads as data (a Reshape's shape) bound without data. */
static void test_bound_without_data(void) {
  Buf g = { .n = 0 }, m;
  node(&g, "r", "Reshape", "x s", "y", NULL);
  f_str(&g, 2, "g");
  value_info(&g, 11, "x", T_FLOAT, 2, (int64_t[]){ 2, 3 }, NULL);
  Buf vi = { .n = 0 };
  value_info(&vi, 11, "s", 7, 1, (int64_t[]){ 1 }, NULL);  /* int64 [1] */
  for (size_t i = 0; i < vi.n; i++) put(&g, vi.b[i]);
  value_info(&g, 12, "y", T_FLOAT, 1, (int64_t[]){ 6 }, NULL);
  model(&m, &g, 13);
  kiln_value s = { .name = "s", .dtype = KILN_I64, .rank = 1, .shape = { 1 }, .numel = 1, .data = NULL };
  expect_both(&m, 1, &s, KILN_ERR_INVALID_ARG, "input 's': the model reads its value while importing", "no data", NULL);
  int64_t six = 6;
  s.data = &six;
  loads(&m, 1, &s, "Reshape with its shape bound");
}

int main(void) {
  snprintf(tmp, sizeof tmp, "/tmp/kiln_test_messages_XXXXXX");
  if (!mkdtemp(tmp)) {
    fprintf(stderr, "cannot make a temporary folder\n");
    return 1;
  }
  test_empty_file();
  test_not_protobuf();
  test_inconsistent_node();
  test_attribute_types();
  test_attribute_names();
  test_io_types();
  test_bound_shapes();
  test_bound_without_data();
  const char *files[] = { "empty.onnx", "model.onnx" };
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", tmp, files[i]);
    unlink(path);
  }
  rmdir(tmp);
  TEST_MAIN_END();
}
