/*
 * test_import — the ONNX importer on models written here field by field:
 *  - every typed TensorProto field (float_data, double_data, int32_data for i8/u16/f16/
 *    bf16/bool, int64_data, uint64_data) decodes to the right values;
 *  - a model-local function with an attribute reference is inlined and computes;
 *  - a Shape -> Gather -> Concat -> Reshape chain and Casts of constants fold away at
 *    import, leaving only the nodes that read the input;
 *  - opset rules: Softmax before 13 flattens to 2-D, from 13 works on its axis.
 */
#include "onnx_util.h"
#include "pbwrite.h"

static void packed_varints(Buf *w, int field, const int64_t *v, int n) {
  Buf p = { .n = 0 };
  for (int i = 0; i < n; i++) varint(&p, (uint64_t)v[i]);
  f_msg(w, field, &p);
}

static void packed_fixed(Buf *w, int field, const void *v, size_t bytes) { f_bytes(w, field, v, bytes); }

static void tensor_header(Buf *t, int dtype, int64_t n, const char *name) {
  f_int(t, 1, n);
  f_int(t, 2, dtype);
  f_str(t, 8, name);
}

static void check_decode(const Buf *t, kiln_dtype want, const double *vals, int n) {
  OnnxTensor x;
  kiln_status s = onnx_read_tensor(t->b, t->n, NULL, &x);
  CHECK_MSG(s == KILN_OK, "%s: %s", kiln_dtype_name(want), kiln_last_error());
  if (s) return;
  CHECK(x.dtype == want && x.rank == 1 && x.numel == n);
  for (int i = 0; i < n && x.numel == n; i++)
    CHECK_MSG(dtype_load_f64(want, x.data, i) == vals[i], "%s[%d] = %g, expected %g", kiln_dtype_name(want), i,
              dtype_load_f64(want, x.data, i), vals[i]);
  onnx_tensor_clear(&x);
}

static void test_typed_fields(void) {
  Buf t;
  float f[3] = { 1.5f, -2, 3e10f };
  double d[3] = { 0.1, -7, 1e300 }, fd[3] = { 1.5, -2, (double)3e10f };
  t.n = 0, tensor_header(&t, 1, 3, "f"), packed_fixed(&t, 4, f, sizeof f);
  check_decode(&t, KILN_F32, fd, 3);
  t.n = 0, tensor_header(&t, 11, 3, "d"), packed_fixed(&t, 10, d, sizeof d);
  check_decode(&t, KILN_F64, d, 3);
  int64_t i8[3] = { -128, 5, 127 }, u16[3] = { 0, 40000, 65535 }, b[3] = { 1, 0, 1 }, i64[3] = { -5, (int64_t)1 << 40, 9 };
  double i8d[3] = { -128, 5, 127 }, u16d[3] = { 0, 40000, 65535 }, bd[3] = { 1, 0, 1 }, i64d[3] = { -5, 1099511627776.0, 9 };
  t.n = 0, tensor_header(&t, 3, 3, "i8"), packed_varints(&t, 5, i8, 3);
  check_decode(&t, KILN_I8, i8d, 3);
  t.n = 0, tensor_header(&t, 4, 3, "u16"), packed_varints(&t, 5, u16, 3);
  check_decode(&t, KILN_U16, u16d, 3);
  t.n = 0, tensor_header(&t, 9, 3, "bool"), packed_varints(&t, 5, b, 3);
  check_decode(&t, KILN_BOOL, bd, 3);
  t.n = 0, tensor_header(&t, 7, 3, "i64"), packed_varints(&t, 7, i64, 3);
  check_decode(&t, KILN_I64, i64d, 3);
  int64_t h[3] = { 0x3C00, 0xC000, 0x3800 }, bf[3] = { 0x3F80, 0xC040, 0x0000 }, u64[3] = { 0, 7, (int64_t)1 << 62 };
  double hd[3] = { 1, -2, 0.5 }, bfd[3] = { 1, -3, 0 }, u64d[3] = { 0, 7, 4611686018427387904.0 };
  t.n = 0, tensor_header(&t, 10, 3, "f16"), packed_varints(&t, 5, h, 3);
  check_decode(&t, KILN_F16, hd, 3);
  t.n = 0, tensor_header(&t, 16, 3, "bf16"), packed_varints(&t, 5, bf, 3);
  check_decode(&t, KILN_BF16, bfd, 3);
  t.n = 0, tensor_header(&t, 13, 3, "u64"), packed_varints(&t, 11, u64, 3);
  check_decode(&t, KILN_U64, u64d, 3);
  t.n = 0, tensor_header(&t, 12, 3, "u32"), packed_varints(&t, 11, u64, 2);  /* two values for three elements */
  OnnxTensor x;
  FAILS(KILN_ERR_MODEL, onnx_read_tensor(t.b, t.n, NULL, &x));
  t.n = 0, tensor_header(&t, 14, 3, "c64");  /* complex: no kiln dtype */
  FAILS(KILN_ERR_UNSUPPORTED, onnx_read_tensor(t.b, t.n, NULL, &x));
}

static void value_info(Buf *out, int field, const char *name, int dtype, int rank, const int64_t *dims) {
  Buf shape = { .n = 0 }, tt = { .n = 0 }, tp = { .n = 0 }, vi = { .n = 0 };
  for (int i = 0; i < rank; i++) {
    Buf d = { .n = 0 };
    f_int(&d, 1, dims[i]);
    f_msg(&shape, 1, &d);
  }
  f_int(&tt, 1, dtype);
  f_msg(&tt, 2, &shape);
  f_msg(&tp, 1, &tt);
  f_str(&vi, 1, name);
  f_msg(&vi, 2, &tp);
  f_msg(out, field, &vi);
}

/* node: inputs, one output, op, domain, and an optional attribute already encoded. */
static void node(Buf *g, int field, const char *in0, const char *in1, const char *out, const char *op, const char *domain,
                 const Buf *attr) {
  Buf n = { .n = 0 };
  if (in0) f_str(&n, 1, in0);
  if (in1) f_str(&n, 1, in1);
  f_str(&n, 2, out);
  f_str(&n, 3, out);
  f_str(&n, 4, op);
  if (domain) f_str(&n, 7, domain);
  if (attr) f_msg(&n, 5, attr);
  f_msg(g, field, &n);
}

static void opset(Buf *m, int field, const char *domain, int64_t v) {
  Buf o = { .n = 0 };
  f_str(&o, 1, domain);
  f_int(&o, 2, v);
  f_msg(m, field, &o);
}

static Graph *load(const Buf *m) {
  Graph *g = NULL;
  kiln_status s = graph_load_onnx(m->b, m->n, NULL, &g);
  CHECK_MSG(s == KILN_OK, "load: %s", kiln_last_error());
  if (g) OK(graph_check(g));
  return g;
}

/* Runs g on ref with the given inputs into out (one output). */
static void run(Graph *g, const void *const *in, void *out) {
  kiln_options o = kiln_options_default();
  o.backend = "ref";
  kiln_program *p = NULL;
  OK(kiln_program_compile((const kiln_graph *)g, &o, &p));
  void *outs[1] = { out };
  if (p) OK(kiln_program_run(p, in, outs));
  kiln_program_free(p);
}

static void test_function_inlining(void) {
  Buf m = { .n = 0 }, f = { .n = 0 }, g = { .n = 0 }, a = { .n = 0 }, ref = { .n = 0 };
  /* function custom.ScaledAdd(a, b) = alpha * a + b, alpha an attribute of the call */
  f_str(&f, 1, "ScaledAdd");
  f_str(&f, 4, "a");
  f_str(&f, 4, "b");
  f_str(&f, 5, "c");
  f_str(&f, 6, "alpha");
  f_str(&ref, 1, "value_float");
  f_str(&ref, 21, "alpha");
  f_int(&ref, 20, 1);
  node(&f, 7, NULL, NULL, "al", "Constant", NULL, &ref);
  node(&f, 7, "a", "al", "t", "Mul", NULL, NULL);
  node(&f, 7, "t", "b", "c", "Add", NULL, NULL);
  opset(&f, 9, "", 18);
  f_str(&f, 10, "custom");
  f_str(&a, 1, "alpha");
  f_int(&a, 20, 1);
  key(&a, 2, 5);  /* f = 2.5 as a fixed32 */
  float al = 2.5f;
  for (int i = 0; i < 4; i++) put(&a, ((uint8_t *)&al)[i]);
  int64_t dims[2] = { 2, 3 };
  node(&g, 1, "x", "y", "out", "ScaledAdd", "custom", &a);
  f_str(&g, 2, "g");
  value_info(&g, 11, "x", 1, 2, dims);
  value_info(&g, 11, "y", 1, 2, dims);
  value_info(&g, 12, "out", 1, 2, dims);
  f_int(&m, 1, 8);
  opset(&m, 8, "", 18);
  opset(&m, 8, "custom", 1);
  f_msg(&m, 7, &g);
  f_msg(&m, 25, &f);
  Graph *gr = load(&m);
  if (!gr) return;
  float x[6] = { 1, 2, 3, 4, 5, 6 }, y[6] = { 10, 20, 30, 40, 50, 60 }, out[6] = { 0 };
  run(gr, (const void *[]){ x, y }, out);
  for (int i = 0; i < 6; i++) CHECK_NEAR(out[i], 2.5 * x[i] + y[i], 1e-6);
  graph_free(gr);
}

static void test_shape_folding(void) {
  Buf m = { .n = 0 }, g = { .n = 0 }, c0 = { .n = 0 }, c1 = { .n = 0 }, ax = { .n = 0 }, h = { .n = 0 }, to = { .n = 0 };
  int64_t dims[3] = { 2, 3, 4 }, odims[2] = { 2, 12 };
  Buf t = { .n = 0 };  /* Constant value: int64 [1] {0} */
  tensor_header(&t, 7, 1, "zero");
  packed_varints(&t, 7, (int64_t[]){ 0 }, 1);
  f_str(&c0, 1, "value");
  f_int(&c0, 20, 4);
  f_msg(&c0, 5, &t);
  f_str(&c1, 1, "value_ints");
  f_int(&c1, 20, 7);
  packed_varints(&c1, 8, (int64_t[]){ -1 }, 1);
  f_str(&ax, 1, "axis");
  f_int(&ax, 20, 2);
  f_int(&ax, 3, 0);
  f_str(&to, 1, "to");
  f_int(&to, 20, 2);
  f_int(&to, 3, 1);
  node(&g, 1, "x", NULL, "s", "Shape", NULL, NULL);
  node(&g, 1, NULL, NULL, "i0", "Constant", NULL, &c0);
  node(&g, 1, "s", "i0", "d0", "Gather", NULL, &ax);
  node(&g, 1, NULL, NULL, "m1", "Constant", NULL, &c1);
  node(&g, 1, "d0", "m1", "ns", "Concat", NULL, &ax);
  node(&g, 1, "x", "ns", "r", "Reshape", NULL, NULL);
  node(&g, 1, "h", NULL, "hf", "Cast", NULL, &to);
  node(&g, 1, "r", "hf", "out", "Add", NULL, NULL);
  int64_t hv[12];
  for (int i = 0; i < 12; i++) hv[i] = float_to_half((float)i * 0.5f);
  tensor_header(&h, 10, 12, "h");
  packed_varints(&h, 5, hv, 12);
  f_msg(&g, 5, &h);
  f_str(&g, 2, "g");
  value_info(&g, 11, "x", 1, 3, dims);
  value_info(&g, 12, "out", 1, 2, odims);
  f_int(&m, 1, 8);
  opset(&m, 8, "", 13);
  f_msg(&m, 7, &g);
  Graph *gr = load(&m);
  if (!gr) return;
  /* Shape, Gather, Concat and the Cast of h folded: only reshape and add read x */
  CHECK_MSG(gr->n_nodes == 2, "%d nodes left after folding", gr->n_nodes);
  for (int i = 0; i < gr->n_nodes; i++) CHECK(gr->nodes[i].op == OP_RESHAPE || gr->nodes[i].op == OP_ADD);
  float x[24], out[24];
  for (int i = 0; i < 24; i++) x[i] = (float)i;
  run(gr, (const void *[]){ x }, out);
  for (int i = 0; i < 24; i++) CHECK_NEAR(out[i], x[i] + (i % 12) * 0.5, 1e-6);
  graph_free(gr);
}

/* Softmax(axis=1) on [2, 2, 2]: opset 11 normalises over the last four elements of each
 * batch row; opset 13 over axis 1 only. */
static void test_softmax_opsets(void) {
  for (int v = 11; v <= 13; v += 2) {
    Buf m = { .n = 0 }, g = { .n = 0 }, ax = { .n = 0 };
    int64_t dims[3] = { 2, 2, 2 };
    f_str(&ax, 1, "axis");
    f_int(&ax, 20, 2);
    f_int(&ax, 3, 1);
    node(&g, 1, "x", NULL, "y", "Softmax", NULL, &ax);
    f_str(&g, 2, "g");
    value_info(&g, 11, "x", 1, 3, dims);
    value_info(&g, 12, "y", 1, 3, dims);
    f_int(&m, 1, 7);
    opset(&m, 8, "", v);
    f_msg(&m, 7, &g);
    Graph *gr = load(&m);
    if (!gr) continue;
    float x[8] = { 0, 1, 2, 3, 4, 5, 6, 7 }, y[8];
    run(gr, (const void *[]){ x }, y);
    for (int b = 0; b < 2; b++)
      for (int i = 0; i < 4; i++) {
        double want;
        if (v == 11) {
          double sum = 0;
          for (int k = 0; k < 4; k++) sum += exp(x[b * 4 + k]);
          want = exp(x[b * 4 + i]) / sum;
        } else {  /* pairs along axis 1: elements i and i ^ 2 */
          int j = i ^ 2;
          want = exp(x[b * 4 + i]) / (exp(x[b * 4 + i]) + exp(x[b * 4 + j]));
        }
        CHECK_NEAR(y[b * 4 + i], want, 1e-6);
      }
    graph_free(gr);
  }
}

int main(void) {
  test_typed_fields();
  test_function_inlining();
  test_shape_folding();
  test_softmax_opsets();
  TEST_MAIN_END();
}
