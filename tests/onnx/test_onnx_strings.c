/*
 * test_onnx_strings — string tensors in ONNX files, written here byte by byte: string_data
 * decoded into C strings (empty strings, UTF-8, a zero-size tensor), and hostile tensors
 * refused with a message and no leak (count mismatch, a huge declared shape with one
 * string, raw_data or external data for strings, a NUL byte inside a string, allocation
 * failures at every step). Then models: StringNormalizer with stopwords on a bound input
 * (the input becomes constant: its length decides the output's), without a binding
 * (refused, named), StringSplit on a computed input (refused), a bad case_change_action,
 * LabelEncoder with mismatched tables, and each model that loads runs on ref and cpu
 * with its outputs checked against values written here.
 */
#include "onnx_util.h"
#include "pbwrite.h"

/* TensorProto: dims, data_type 8, the given strings (lengths given: NUL bytes allowed). */
static void str_tensor(Buf *t, const char *name, int rank, const int64_t *dims, int n, const char *const *s,
                       const size_t *len) {
  for (int i = 0; i < rank; i++) f_int(t, 1, dims[i]);
  f_int(t, 2, 8);
  for (int i = 0; i < n; i++) f_bytes(t, 6, s[i], len ? len[i] : strlen(s[i]));
  if (name) f_str(t, 8, name);
}

static void decode_good(void) {
  const char *s[4] = { "abc", "", "Straße", "x y" };
  Buf t = { .n = 0 };
  int64_t d[2] = { 2, 2 };
  str_tensor(&t, "s", 2, d, 4, s, NULL);
  OnnxTensor v;
  OK(onnx_read_tensor(t.b, t.n, NULL, &v));
  CHECK(v.dtype == KILN_STRING && v.rank == 2 && v.numel == 4);
  for (int i = 0; v.data && i < 4; i++) CHECK(!strcmp(((char **)v.data)[i], s[i]));
  onnx_tensor_clear(&v);  /* one block: ASan checks nothing else was allocated */
  Buf z = { .n = 0 };
  int64_t zd[1] = { 0 };
  str_tensor(&z, "z", 1, zd, 0, NULL, NULL);
  OK(onnx_read_tensor(z.b, z.n, NULL, &v));
  CHECK(v.dtype == KILN_STRING && v.numel == 0);
  onnx_tensor_clear(&v);
}

static void must_refuse(const Buf *t, kiln_status want, const char *needle, const char *what) {
  OnnxTensor v;
  kiln_status s = onnx_read_tensor(t->b, t->n, NULL, &v);
  CHECK_MSG(s == want && strstr(kiln_last_error(), needle), "%s: %s, '%s'", what, kiln_status_name(s), kiln_last_error());
  if (!s) onnx_tensor_clear(&v);
}

static void decode_hostile(void) {
  const char *s[2] = { "a", "b" };
  int64_t d3[1] = { 3 }, huge[2] = { (int64_t)1 << 30, (int64_t)1 << 9 };
  Buf t = { .n = 0 };
  str_tensor(&t, "few", 1, d3, 2, s, NULL);
  must_refuse(&t, KILN_ERR_MODEL, "3 strings declared, 2 present", "count");
  t.n = 0;
  str_tensor(&t, "huge", 2, huge, 1, s, NULL);
  must_refuse(&t, KILN_ERR_MODEL, "huge", "huge shape");
  t.n = 0;
  str_tensor(&t, "raw", 1, (int64_t[]){ 1 }, 0, NULL, NULL);
  f_bytes(&t, 9, "abcdefgh", 8);
  must_refuse(&t, KILN_ERR_MODEL, "string_data", "raw_data");
  t.n = 0;
  str_tensor(&t, "ext", 1, (int64_t[]){ 1 }, 0, NULL, NULL);
  f_int(&t, 14, 1);  /* data_location EXTERNAL */
  must_refuse(&t, KILN_ERR_MODEL, "string_data", "external");
  t.n = 0;
  const char *nul[1] = { "a\0b" };
  size_t len[1] = { 3 };
  str_tensor(&t, "nul", 1, (int64_t[]){ 1 }, 1, nul, len);
  must_refuse(&t, KILN_ERR_UNSUPPORTED, "NUL byte", "NUL");
  /* every allocation failing in turn: an error or a tensor, never a leak */
  t.n = 0;
  str_tensor(&t, "s", 1, (int64_t[]){ 2 }, 2, s, NULL);
  for (long n = 1; n < 100; n++) {
    OnnxTensor v;
    kiln_alloc_fail_after(n);
    kiln_status st = onnx_read_tensor(t.b, t.n, NULL, &v);
    kiln_alloc_fail_after(0);
    if (st == KILN_OK) { onnx_tensor_clear(&v); break; }
    CHECK(st == KILN_ERR_NO_MEMORY || st == KILN_ERR_MODEL);
  }
}

/* ValueInfo of a string tensor [n]. */
static void str_vi(Buf *out, int field, const char *name, int64_t n) {
  Buf shape = { .n = 0 }, tt = { .n = 0 }, tp = { .n = 0 }, vi = { .n = 0 }, d = { .n = 0 };
  f_int(&d, 1, n);
  f_msg(&shape, 1, &d);
  f_int(&tt, 1, 8);
  f_msg(&tt, 2, &shape);
  f_msg(&tp, 1, &tt);
  f_str(&vi, 1, name);
  f_msg(&vi, 2, &tp);
  f_msg(out, field, &vi);
}

static void attr_s(Buf *node, const char *name, const char *v) {
  Buf a = { .n = 0 };
  f_str(&a, 1, name);
  f_str(&a, 4, v);
  f_int(&a, 20, 3);
  f_msg(node, 5, &a);
}

static void attr_i(Buf *node, const char *name, int64_t v) {
  Buf a = { .n = 0 };
  f_str(&a, 1, name);
  f_int(&a, 3, v);
  f_int(&a, 20, 2);
  f_msg(node, 5, &a);
}

static void attr_strs(Buf *node, const char *name, int n, const char *const *v) {
  Buf a = { .n = 0 };
  f_str(&a, 1, name);
  for (int i = 0; i < n; i++) f_str(&a, 9, v[i]);
  f_int(&a, 20, 8);
  f_msg(node, 5, &a);
}

static void attr_ints(Buf *node, const char *name, int n, const int64_t *v) {
  Buf a = { .n = 0 };
  f_str(&a, 1, name);
  for (int i = 0; i < n; i++) f_int(&a, 8, v[i]);
  f_int(&a, 20, 7);
  f_msg(node, 5, &a);
}

/* model: x string [n] -> (Identity when pre) -> node -> y; the node's attributes given. */
static void model(Buf *m, const Buf *node, int64_t n, bool pre, const char *domain) {
  Buf g = { .n = 0 }, ops = { .n = 0 }, ml = { .n = 0 };
  if (pre) {
    Buf id = { .n = 0 };
    f_str(&id, 1, "x");
    f_str(&id, 2, "x1");
    f_str(&id, 4, "Identity");
    f_msg(&g, 1, &id);
  }
  f_msg(&g, 1, node);
  f_str(&g, 2, "g");
  str_vi(&g, 11, "x", n);
  f_int(m, 1, 8);
  f_str(&ops, 1, "");
  f_int(&ops, 2, 20);
  f_msg(m, 8, &ops);
  if (domain) {
    f_str(&ml, 1, domain);
    f_int(&ml, 2, 4);
    f_msg(m, 8, &ml);
  }
  Buf out = { .n = 0 };  /* a ValueInfo with only a name */
  f_str(&out, 1, "y");
  f_msg(&g, 12, &out);
  f_msg(m, 7, &g);
}

static Buf node_of(const char *op, const char *in, const char *domain) {
  Buf n = { .n = 0 };
  f_str(&n, 1, in);
  f_str(&n, 2, "y");
  f_str(&n, 3, "the_node");
  f_str(&n, 4, op);
  if (domain) f_str(&n, 7, domain);
  return n;
}

/* Loads m with x bound to xs (or unbound), runs it on ref and cpu, checks y == want. */
static void load_run(const Buf *m, int n, const char *const *xs, int n_want, const char *const *want, const char *what) {
  OnnxTensor b = { 0 };
  b.dtype = KILN_STRING;
  b.rank = 1;
  b.shape[0] = n;
  b.numel = n;
  b.data = (void *)xs;
  Graph *g = NULL;
  OK(graph_load_onnx_bound(m->b, m->n, NULL, &b, 1, &g));
  if (!g) return;
  const Tensor *y = &g->tensors[g->outputs[0].tensor];
  CHECK_MSG(y->numel == n_want, "%s: %lld outputs", what, (long long)y->numel);
  bool x_input = g->tensors[0].kind == T_INPUT;
  for (int k = 0; k < 2 && y->numel == n_want; k++) {
    kiln_options o = kiln_options_default();
    o.backend = k ? "cpu" : "ref";
    kiln_program *p = NULL;
    OK(kiln_program_compile((const kiln_graph *)g, &o, &p));
    const char *out[8] = { 0 };
    if (p) OK(kiln_program_run(p, x_input ? (const void *[]){ xs } : NULL, (void *[]){ out }));
    for (int i = 0; p && i < n_want; i++)
      CHECK_MSG(out[i] && !strcmp(out[i], want[i]), "%s on %s: %d is '%s', expected '%s'", what, o.backend, i,
                out[i] ? out[i] : "(null)", want[i]);
    kiln_program_free(p);
  }
  graph_free(g);
}

static void must_fail_model(const Buf *m, kiln_status want, const char *needle, const char *what) {
  Graph *g = (Graph *)1;
  kiln_status s = graph_load_onnx(m->b, m->n, NULL, &g);
  CHECK_MSG(s == want && g == NULL && strstr(kiln_last_error(), needle), "%s: %s '%s'", what, kiln_status_name(s),
            kiln_last_error());
  if (s == KILN_OK) graph_free(g);
}

static void models(void) {
  const char *xs[3] = { "Monday", "tuesday", "monday" };
  const char *stop[1] = { "MONDAY" };
  Buf m = { .n = 0 }, n = node_of("StringNormalizer", "x", NULL);
  attr_s(&n, "case_change_action", "UPPER");
  attr_strs(&n, "stopwords", 1, stop);
  model(&m, &n, 3, false, NULL);
  load_run(&m, 3, xs, 1, (const char *[]){ "TUESDAY" }, "normalize stopwords");
  must_fail_model(&m, KILN_ERR_UNSUPPORTED, "must be constant", "normalize stopwords unbound");
  /* a case-sensitive stopword list removing nothing; no stopwords at all keeps x an input */
  m.n = 0;
  n = node_of("StringNormalizer", "x", NULL);
  attr_s(&n, "case_change_action", "LOWER");
  attr_i(&n, "is_case_sensitive", 1);
  model(&m, &n, 3, false, NULL);
  load_run(&m, 3, xs, 3, (const char *[]){ "monday", "tuesday", "monday" }, "normalize lower");
  m.n = 0;
  n = node_of("StringNormalizer", "x", NULL);
  attr_s(&n, "case_change_action", "TITLE");
  model(&m, &n, 3, false, NULL);
  must_fail_model(&m, KILN_ERR_MODEL, "TITLE", "bad case_change_action");
  /* StringSplit of a computed (unbound) input cannot have a static shape */
  m.n = 0;
  n = node_of("StringSplit", "x1", NULL);
  attr_s(&n, "delimiter", ",");
  model(&m, &n, 3, true, NULL);
  must_fail_model(&m, KILN_ERR_UNSUPPORTED, "must be constant", "split unbound");
  /* LabelEncoder: 2 keys, 1 value */
  m.n = 0;
  n = node_of("LabelEncoder", "x", "ai.onnx.ml");
  attr_strs(&n, "keys_strings", 2, (const char *[]){ "a", "b" });
  attr_ints(&n, "values_int64s", 1, (const int64_t[]){ 1 });
  model(&m, &n, 3, false, "ai.onnx.ml");
  must_fail_model(&m, KILN_ERR_MODEL, "2 keys but 1 values", "label tables");
  /* RegexFullMatch with a construct kiln does not translate */
  m.n = 0;
  n = node_of("RegexFullMatch", "x", NULL);
  attr_s(&n, "pattern", "(?P<name>a)");
  model(&m, &n, 3, false, NULL);
  must_fail_model(&m, KILN_ERR_UNSUPPORTED, "not supported", "regex named group");
  /* a string stopword attribute with a NUL byte */
  m.n = 0;
  n = node_of("StringNormalizer", "x", NULL);
  Buf a = { .n = 0 };
  f_str(&a, 1, "stopwords");
  f_bytes(&a, 9, "a\0b", 3);
  f_int(&a, 20, 8);
  f_msg(&n, 5, &a);
  model(&m, &n, 3, false, NULL);
  OnnxTensor b = { .dtype = KILN_STRING, .rank = 1, .shape = { 3 }, .numel = 3, .data = (void *)xs };
  Graph *g = (Graph *)1;
  kiln_status s = graph_load_onnx_bound(m.b, m.n, NULL, &b, 1, &g);
  CHECK_MSG(s == KILN_ERR_UNSUPPORTED && g == NULL && strstr(kiln_last_error(), "NUL"), "stopword NUL: %s", kiln_last_error());
  if (!s) graph_free(g);
}

int main(void) {
  decode_good();
  decode_hostile();
  models();
  TEST_MAIN_END();
}
