/*
 * test_api_io — the introspection and host-value API of kiln.h (kiln_graph_*_count/_info,
 * kiln_value, kiln_value_list, kiln_shape_format, kiln_graph_load_onnx_*bound), through the
 * public header only (plus the allocation hook from base.h).
 *
 * TensorProto and model bytes are written here field by field (pbwrite.h), so each case is
 * exactly what it says: every dtype layout kiln reads, strings, scalars and empty tensors,
 * external data, then hostile bytes (every truncation, absurd or negative dims, unknown and
 * unsupported types, short data, NUL in a string), NULL arguments and failing allocations.
 * Each failure must be a status with a message and leave nothing behind (this file also runs
 * under ASan, which checks for leaks). Graphs built through the C API and, when the shared
 * folder is there, ../shared/models/mlp are introspected; two small written models check
 * binding at import (a symbolic dim, a Reshape shape that becomes a constant).
 */
#include "base/base.h"
#include "onnx/pbwrite.h"
#include "test.h"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

/* ONNX TensorProto.DataType values */
enum { T_FLOAT = 1, T_UINT8 = 2, T_INT8 = 3, T_INT32 = 6, T_INT64 = 7, T_STRING = 8, T_BOOL = 9, T_FLOAT16 = 10,
       T_DOUBLE = 11, T_UINT64 = 13, T_COMPLEX64 = 14, T_BFLOAT16 = 16, T_INT4 = 22 };

static char tmp[64];  /* a folder of this run's files (a short path, under /tmp) */

/* TensorProto header: dims, data type, name. */
static void tensor_head(Buf *t, int rank, const int64_t *dims, int dtype, const char *name) {
  for (int i = 0; i < rank; i++) f_int(t, 1, dims[i]);
  if (dtype) f_int(t, 2, dtype);
  if (name) f_str(t, 8, name);
}

static void write_file(const char *name, const void *p, size_t n, char *path) {
  CHECK(pb_write_file(tmp, name, p, n, path));
}

/* A cleared value: every field zero. */
static bool is_clear(const kiln_value *v) {
  static const kiln_value zero;
  return !memcmp(v, &zero, sizeof zero);
}

/* Decoding must fail with status s, a message, and *out left clear. */
static void must_fail(kiln_status s, const Buf *b, const char *dir, const char *what) {
  kiln_value v;
  memset(&v, 0x5a, sizeof v);
  kiln_status got = kiln_value_read_pb_buffer(b->b, b->n, dir, &v);
  CHECK_MSG(got == s && kiln_last_error()[0] && is_clear(&v), "%s: %s (%s), expected %s", what,
            kiln_status_name(got), kiln_last_error(), kiln_status_name(s));
  if (!got) kiln_value_clear(&v);
}

/* ---- decoding values ---- */

static void test_f32_raw(void) {
  Buf t = { .n = 0 };
  float x[6] = { 1.5f, -2.75f, 0, 3, -0.5f, 1e30f };
  tensor_head(&t, 2, (int64_t[]){ 2, 3 }, T_FLOAT, "x");
  f_bytes(&t, 9, x, sizeof x);
  kiln_value v;
  OK(kiln_value_read_pb_buffer(t.b, t.n, NULL, &v));
  CHECK(v.name && !strcmp(v.name, "x"));
  CHECK(v.dtype == KILN_F32 && v.rank == 2 && v.shape[0] == 2 && v.shape[1] == 3 && v.numel == 6);
  for (int d = 2; d < KILN_MAX_RANK; d++) CHECK(v.shape[d] == 0);
  for (int i = 0; i < 6; i++) {
    double f;
    int64_t n;
    OK(kiln_value_get_f64(&v, i, &f));
    CHECK(f == x[i]);
    OK(kiln_value_get_i64(&v, i, &n));
    CHECK(i == 5 ? n == INT64_MAX : n == (int64_t)x[i]);  /* truncated toward zero; 1e30 saturates */
  }
  double f;
  const char *str;
  FAILS(KILN_ERR_INVALID_ARG, kiln_value_get_f64(&v, 6, &f));
  FAILS(KILN_ERR_INVALID_ARG, kiln_value_get_f64(&v, -1, &f));
  FAILS(KILN_ERR_INVALID_ARG, kiln_value_get_f64(&v, 0, NULL));
  FAILS(KILN_ERR_INVALID_ARG, kiln_value_get_str(&v, 0, &str));
  char s[KILN_SHAPE_STR_MAX];
  OK(kiln_shape_format(v.rank, v.shape, s, sizeof s));
  CHECK(!strcmp(s, "[2,3]"));
  kiln_value_clear(&v);
  CHECK(is_clear(&v));
  kiln_value_clear(&v);  /* twice: harmless */
  kiln_value_clear(NULL);
}

/* The typed repeated fields (no raw_data) and the 16-bit floats. */
static void test_typed_fields(void) {
  Buf t = { .n = 0 };
  kiln_value v;
  int64_t big = ((int64_t)1 << 60) + 1, n;
  double f;
  tensor_head(&t, 1, (int64_t[]){ 3 }, T_INT64, "i");
  f_int(&t, 7, big), f_int(&t, 7, -7), f_int(&t, 7, 0);
  OK(kiln_value_read_pb_buffer(t.b, t.n, NULL, &v));
  CHECK(v.dtype == KILN_I64 && v.numel == 3);
  OK(kiln_value_get_i64(&v, 0, &n));
  CHECK(n == big);  /* exact, where a double would round */
  OK(kiln_value_get_i64(&v, 1, &n));
  CHECK(n == -7);
  OK(kiln_value_get_f64(&v, 1, &f));
  CHECK(f == -7);
  CHECK(!kiln_dtype_is_float(v.dtype));
  kiln_value_clear(&v);

  t.n = 0;  /* bool in int32_data: any non-zero is true */
  tensor_head(&t, 1, (int64_t[]){ 3 }, T_BOOL, NULL);
  f_int(&t, 5, 0), f_int(&t, 5, 5), f_int(&t, 5, 1);
  OK(kiln_value_read_pb_buffer(t.b, t.n, NULL, &v));
  CHECK(v.dtype == KILN_BOOL && v.name && !strcmp(v.name, ""));  /* unnamed: "" */
  int64_t want[3] = { 0, 1, 1 };
  for (int i = 0; i < 3; i++) {
    OK(kiln_value_get_i64(&v, i, &n));
    CHECK(n == want[i]);
  }
  kiln_value_clear(&v);

  t.n = 0;  /* f16 and bf16 as raw bits: 1.0, -2.0 */
  uint16_t h[2] = { 0x3C00, 0xC000 }, bh[2] = { 0x3F80, 0xC000 };
  tensor_head(&t, 1, (int64_t[]){ 2 }, T_FLOAT16, "h");
  f_bytes(&t, 9, h, sizeof h);
  OK(kiln_value_read_pb_buffer(t.b, t.n, NULL, &v));
  CHECK(v.dtype == KILN_F16 && kiln_dtype_is_float(v.dtype));
  OK(kiln_value_get_f64(&v, 0, &f));
  CHECK(f == 1.0);
  OK(kiln_value_get_f64(&v, 1, &f));
  CHECK(f == -2.0);
  kiln_value_clear(&v);
  t.n = 0;
  tensor_head(&t, 1, (int64_t[]){ 2 }, T_BFLOAT16, "b");
  f_bytes(&t, 9, bh, sizeof bh);
  OK(kiln_value_read_pb_buffer(t.b, t.n, NULL, &v));
  CHECK(v.dtype == KILN_BF16);
  OK(kiln_value_get_f64(&v, 1, &f));
  CHECK(f == -2.0);
  kiln_value_clear(&v);

  t.n = 0;  /* u64 above INT64_MAX: get_i64 wraps as a C cast */
  tensor_head(&t, 1, (int64_t[]){ 1 }, T_UINT64, "u");
  f_int(&t, 11, (int64_t)UINT64_MAX);
  OK(kiln_value_read_pb_buffer(t.b, t.n, NULL, &v));
  CHECK(v.dtype == KILN_U64);
  OK(kiln_value_get_i64(&v, 0, &n));
  CHECK(n == -1);
  kiln_value_clear(&v);

  t.n = 0;  /* double_data, packed (wire type 2) */
  double d[2] = { 0.25, -1e300 };
  tensor_head(&t, 1, (int64_t[]){ 2 }, T_DOUBLE, "d");
  f_bytes(&t, 10, d, sizeof d);
  OK(kiln_value_read_pb_buffer(t.b, t.n, NULL, &v));
  CHECK(v.dtype == KILN_F64);
  OK(kiln_value_get_f64(&v, 1, &f));
  CHECK(f == -1e300);
  kiln_value_clear(&v);

  const kiln_dtype floats[] = { KILN_F32, KILN_F64, KILN_F16, KILN_BF16 };
  int n_float = 0;
  for (int k = 0; k < KILN_DTYPE_COUNT; k++) n_float += kiln_dtype_is_float((kiln_dtype)k);
  CHECK(n_float == 4);
  for (int k = 0; k < 4; k++) CHECK(kiln_dtype_is_float(floats[k]));
  CHECK(!kiln_dtype_is_float(KILN_DTYPE_COUNT) && !kiln_dtype_is_float((kiln_dtype)-1));
}

static void test_scalar_empty_strings(void) {
  Buf t = { .n = 0 };
  kiln_value v;
  double f;
  float one = 4.0f;
  tensor_head(&t, 0, NULL, T_FLOAT, "s");  /* rank 0: one element */
  f_bytes(&t, 9, &one, sizeof one);
  OK(kiln_value_read_pb_buffer(t.b, t.n, NULL, &v));
  CHECK(v.rank == 0 && v.numel == 1);
  OK(kiln_value_get_f64(&v, 0, &f));
  CHECK(f == 4.0);
  char s[8];
  OK(kiln_shape_format(v.rank, v.shape, s, sizeof s));
  CHECK(!strcmp(s, "[]"));
  kiln_value_clear(&v);

  t.n = 0;  /* [0, 3]: no elements, and no data needed */
  tensor_head(&t, 2, (int64_t[]){ 0, 3 }, T_FLOAT, "e");
  OK(kiln_value_read_pb_buffer(t.b, t.n, NULL, &v));
  CHECK(v.numel == 0 && v.rank == 2);
  FAILS(KILN_ERR_INVALID_ARG, kiln_value_get_f64(&v, 0, &f));
  kiln_value_clear(&v);

  t.n = 0;
  tensor_head(&t, 1, (int64_t[]){ 3 }, T_STRING, "words");
  f_str(&t, 6, "ab"), f_str(&t, 6, ""), f_str(&t, 6, "caf\xc3\xa9");
  OK(kiln_value_read_pb_buffer(t.b, t.n, NULL, &v));
  CHECK(v.dtype == KILN_STRING && v.numel == 3);
  const char *want[3] = { "ab", "", "caf\xc3\xa9" }, *got = NULL;
  for (int i = 0; i < 3; i++) {
    OK(kiln_value_get_str(&v, i, &got));
    CHECK(got && !strcmp(got, want[i]));
    CHECK(got == ((char **)v.data)[i]);  /* the value's own pointer */
  }
  FAILS(KILN_ERR_INVALID_ARG, kiln_value_get_str(&v, 3, &got));
  FAILS(KILN_ERR_INVALID_ARG, kiln_value_get_f64(&v, 0, &f));
  int64_t n;
  FAILS(KILN_ERR_INVALID_ARG, kiln_value_get_i64(&v, 0, &n));
  kiln_value_clear(&v);
}

/* A value the caller describes (its own memory) reads the same way; bad ones are refused. */
static void test_caller_values(void) {
  int32_t data[4] = { -3, 7, 0, 2147483647 };
  kiln_value v = { .name = "mine", .dtype = KILN_I32, .rank = 2, .shape = { 2, 2 }, .numel = 4, .data = data };
  int64_t n;
  double f;
  OK(kiln_value_get_i64(&v, 3, &n));
  CHECK(n == 2147483647);
  OK(kiln_value_get_f64(&v, 0, &f));
  CHECK(f == -3);
  FAILS(KILN_ERR_INVALID_ARG, kiln_value_get_i64(NULL, 0, &n));
  v.data = NULL;
  FAILS(KILN_ERR_INVALID_ARG, kiln_value_get_i64(&v, 0, &n));
  v.data = data, v.dtype = (kiln_dtype)77;
  FAILS(KILN_ERR_INVALID_ARG, kiln_value_get_i64(&v, 0, &n));
  FAILS(KILN_ERR_INVALID_ARG, kiln_value_get_f64(&v, 0, &f));
}

static void test_shape_format(void) {
  char s[KILN_SHAPE_STR_MAX];
  int64_t widest[KILN_MAX_RANK];
  for (int i = 0; i < KILN_MAX_RANK; i++) widest[i] = INT64_MIN;
  OK(kiln_shape_format(KILN_MAX_RANK, widest, s, sizeof s));  /* the longest text fits */
  CHECK(s[0] == '[' && s[strlen(s) - 1] == ']' && strlen(s) == 1 + 8 * 20 + 7 + 1);
  char small[4];
  FAILS(KILN_ERR_INVALID_ARG, kiln_shape_format(2, (int64_t[]){ 2, 3 }, small, sizeof small));
  CHECK(!strcmp(small, "[2,"));  /* truncated, terminated */
  OK(kiln_shape_format(2, (int64_t[]){ 2, 3 }, s, 6));  /* exactly enough */
  CHECK(!strcmp(s, "[2,3]"));
  FAILS(KILN_ERR_INVALID_ARG, kiln_shape_format(1, (int64_t[]){ 1 }, NULL, 8));
  FAILS(KILN_ERR_INVALID_ARG, kiln_shape_format(1, (int64_t[]){ 1 }, s, 0));
  FAILS(KILN_ERR_INVALID_ARG, kiln_shape_format(KILN_MAX_RANK + 1, widest, s, sizeof s));
  CHECK(s[0] == 0);
  FAILS(KILN_ERR_INVALID_ARG, kiln_shape_format(-1, widest, s, sizeof s));
  FAILS(KILN_ERR_INVALID_ARG, kiln_shape_format(1, NULL, s, sizeof s));
  OK(kiln_shape_format(0, NULL, s, sizeof s));
  CHECK(!strcmp(s, "[]"));
}

/* ---- hostile bytes and arguments ---- */

static void test_hostile(void) {
  Buf good = { .n = 0 }, t = { .n = 0 };
  float x[6] = { 1, 2, 3, 4, 5, 6 };
  tensor_head(&good, 2, (int64_t[]){ 2, 3 }, T_FLOAT, "x");
  f_bytes(&good, 9, x, sizeof x);
  int decoded = 0;
  for (size_t cut = 0; cut < good.n; cut++) {  /* every prefix: refused, or a smaller valid tensor */
    kiln_value v;
    kiln_status s = kiln_value_read_pb_buffer(good.b, cut, NULL, &v);
    CHECK_MSG(s == KILN_OK ? !is_clear(&v) || cut == 0 : is_clear(&v) && kiln_last_error()[0], "cut %zu: %s", cut,
              kiln_status_name(s));
    decoded += s == KILN_OK;
    kiln_value_clear(&v);
  }
  CHECK(decoded < (int)good.n / 2);  /* most cuts are refused */

  tensor_head(&t, 2, (int64_t[]){ (int64_t)1 << 40, (int64_t)1 << 40 }, T_FLOAT, "huge");
  must_fail(KILN_ERR_MODEL, &t, NULL, "dims whose product overflows");
  t.n = 0;
  tensor_head(&t, 2, (int64_t[]){ (int64_t)1 << 30, 1 << 8 }, T_FLOAT, "big");  /* 1 TiB declared, no data */
  must_fail(KILN_ERR_MODEL, &t, NULL, "a huge shape without data");
  t.n = 0;
  tensor_head(&t, 1, (int64_t[]){ -2 }, T_FLOAT, "neg");
  must_fail(KILN_ERR_MODEL, &t, NULL, "a negative dim");
  t.n = 0;
  tensor_head(&t, 9, (int64_t[]){ 1, 1, 1, 1, 1, 1, 1, 1, 1 }, T_FLOAT, "deep");
  f_bytes(&t, 9, x, 4);
  must_fail(KILN_ERR_UNSUPPORTED, &t, NULL, "rank 9");
  t.n = 0;
  tensor_head(&t, 1, (int64_t[]){ 6 }, T_FLOAT, "short");
  f_bytes(&t, 9, x, sizeof x - 4);
  must_fail(KILN_ERR_MODEL, &t, NULL, "raw data shorter than declared");
  t.n = 0;
  tensor_head(&t, 1, (int64_t[]){ 3 }, T_INT64, "few");
  f_int(&t, 7, 1);
  must_fail(KILN_ERR_MODEL, &t, NULL, "fewer typed elements than declared");
  t.n = 0;
  tensor_head(&t, 1, (int64_t[]){ 1 }, 0, "untyped");
  f_bytes(&t, 9, x, 4);
  must_fail(KILN_ERR_MODEL, &t, NULL, "no data type");
  t.n = 0;
  tensor_head(&t, 1, (int64_t[]){ 1 }, T_COMPLEX64, "c");
  f_bytes(&t, 9, x, 8);
  must_fail(KILN_ERR_UNSUPPORTED, &t, NULL, "complex64");
  t.n = 0;
  tensor_head(&t, 1, (int64_t[]){ 2 }, T_INT4, "i4");
  f_bytes(&t, 9, x, 1);
  must_fail(KILN_ERR_UNSUPPORTED, &t, NULL, "int4");
  t.n = 0;
  tensor_head(&t, 1, (int64_t[]){ 1 }, 999, "what");
  must_fail(KILN_ERR_MODEL, &t, NULL, "a data type ONNX does not define");  /* malformed, not a gap */
  t.n = 0;
  tensor_head(&t, 1, (int64_t[]){ 2 }, T_STRING, "nul");
  f_str(&t, 6, "ok");
  f_bytes(&t, 6, "a\0b", 3);
  must_fail(KILN_ERR_UNSUPPORTED, &t, NULL, "a string with a NUL byte");
  t.n = 0;
  tensor_head(&t, 1, (int64_t[]){ 3 }, T_STRING, "count");
  f_str(&t, 6, "only one");
  must_fail(KILN_ERR_MODEL, &t, NULL, "fewer strings than declared");
  t.n = 0;
  const uint8_t junk[] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01 };
  memcpy(t.b, junk, sizeof junk), t.n = sizeof junk;
  must_fail(KILN_ERR_MODEL, &t, NULL, "junk bytes");
  t.n = 0;  /* external data, but no folder to read it from */
  tensor_head(&t, 1, (int64_t[]){ 2 }, T_FLOAT, "ext");
  Buf e = { .n = 0 };
  f_str(&e, 1, "location"), f_str(&e, 2, "ext.bin");
  f_msg(&t, 13, &e);
  f_int(&t, 14, 1);
  must_fail(KILN_ERR_MODEL, &t, NULL, "external data without a folder");
  t.n = 0;
  tensor_head(&t, 1, (int64_t[]){ 2 }, T_FLOAT, "escape");
  e.n = 0;
  f_str(&e, 1, "location"), f_str(&e, 2, "../ext.bin");
  f_msg(&t, 13, &e);
  f_int(&t, 14, 1);
  must_fail(KILN_ERR_MODEL, &t, tmp, "external data outside the folder");

  kiln_value v;
  FAILS(KILN_ERR_INVALID_ARG, kiln_value_read_pb_buffer(NULL, 4, NULL, &v));
  CHECK(is_clear(&v));
  FAILS(KILN_ERR_INVALID_ARG, kiln_value_read_pb_buffer(good.b, good.n, NULL, NULL));
  FAILS(KILN_ERR_INVALID_ARG, kiln_value_read_pb(NULL, &v));
  FAILS(KILN_ERR_INVALID_ARG, kiln_value_read_pb("x.pb", NULL));
  kiln_value_list l;
  FAILS(KILN_ERR_INVALID_ARG, kiln_value_list_read(NULL, "input", &l));
  FAILS(KILN_ERR_INVALID_ARG, kiln_value_list_read(tmp, NULL, &l));
  FAILS(KILN_ERR_INVALID_ARG, kiln_value_list_read(tmp, "input", NULL));
  kiln_value_list_clear(NULL);
}

/* ---- files and folders ---- */

static void test_files(void) {
  char path[PATH_MAX], p0[PATH_MAX], p1[PATH_MAX], p3[PATH_MAX];
  Buf t = { .n = 0 };
  float a[2] = { 1, 2 }, b[3] = { 3, 4, 5 };
  tensor_head(&t, 1, (int64_t[]){ 2 }, T_FLOAT, "a");
  f_bytes(&t, 9, a, sizeof a);
  write_file("input_0.pb", t.b, t.n, p0);
  t.n = 0;
  tensor_head(&t, 2, (int64_t[]){ 3, 1 }, T_FLOAT, "b");
  f_bytes(&t, 9, b, sizeof b);
  write_file("input_1.pb", t.b, t.n, p1);
  write_file("input_3.pb", t.b, t.n, p3);  /* after a gap: not read */

  kiln_value v;
  double f;
  OK(kiln_value_read_pb(p1, &v));
  CHECK(v.numel == 3 && v.rank == 2 && !strcmp(v.name, "b"));
  OK(kiln_value_get_f64(&v, 2, &f));
  CHECK(f == 5);
  kiln_value_clear(&v);

  kiln_value_list l;
  OK(kiln_value_list_read(tmp, "input", &l));
  CHECK(l.n == 2 && l.v);
  if (l.n == 2) CHECK(!strcmp(l.v[0].name, "a") && l.v[0].numel == 2 && !strcmp(l.v[1].name, "b"));
  kiln_value_list_clear(&l);
  CHECK(l.n == 0 && l.v == NULL);
  kiln_value_list_clear(&l);
  OK(kiln_value_list_read(tmp, "output", &l));  /* none: not an error */
  CHECK(l.n == 0 && l.v == NULL);
  snprintf(path, sizeof path, "%s/no_such_folder", tmp);
  OK(kiln_value_list_read(path, "input", &l));
  CHECK(l.n == 0);

  /* more files than the list's first allocation holds */
  for (int i = 0; i < 20; i++) {
    char name[32];
    snprintf(name, sizeof name, "many_%d.pb", i);
    write_file(name, t.b, t.n, path);
  }
  OK(kiln_value_list_read(tmp, "many", &l));
  CHECK(l.n == 20);
  kiln_value_list_clear(&l);

  /* a missing file, a folder, a malformed file: the message names the path */
  snprintf(path, sizeof path, "%s/missing.pb", tmp);
  FAILS(KILN_ERR_IO, kiln_value_read_pb(path, &v));
  CHECK(is_clear(&v) && strstr(kiln_last_error(), path));
  FAILS(KILN_ERR_IO, kiln_value_read_pb(tmp, &v));
  write_file("bad_0.pb", "\xff\xff\xff", 3, path);
  FAILS(KILN_ERR_MODEL, kiln_value_read_pb(path, &v));
  CHECK(is_clear(&v) && strstr(kiln_last_error(), path) == kiln_last_error());
  write_file("mixed_0.pb", t.b, t.n, path);
  write_file("mixed_1.pb", "\x0a", 1, path);  /* the second is truncated: nothing is kept */
  memset(&l, 0x5a, sizeof l);
  FAILS(KILN_ERR_MODEL, kiln_value_list_read(tmp, "mixed", &l));
  CHECK(l.n == 0 && l.v == NULL && strstr(kiln_last_error(), "mixed_1.pb"));
  char longdir[PATH_MAX + 16];
  memset(longdir, 'a', sizeof longdir - 1);
  longdir[sizeof longdir - 1] = 0;
  FAILS(KILN_ERR_INVALID_ARG, kiln_value_list_read(longdir, "input", &l));

  /* external data beside the .pb file */
  float ext[2] = { 7, 8 };
  write_file("ext.bin", ext, sizeof ext, path);
  t.n = 0;
  tensor_head(&t, 1, (int64_t[]){ 2 }, T_FLOAT, "ext");
  Buf e = { .n = 0 };
  f_str(&e, 1, "location"), f_str(&e, 2, "ext.bin");
  f_msg(&t, 13, &e);
  f_int(&t, 14, 1);
  write_file("ext.pb", t.b, t.n, path);
  OK(kiln_value_read_pb(path, &v));
  OK(kiln_value_get_f64(&v, 1, &f));
  CHECK(f == 8);
  kiln_value_clear(&v);
  OK(kiln_value_read_pb_buffer(t.b, t.n, tmp, &v));
  CHECK(v.numel == 2);
  kiln_value_clear(&v);
}

/* ---- introspection ---- */

static void test_graph_info(void) {
  kiln_graph *g;
  OK(kiln_graph_create(&g));
  int n = -1;
  OK(kiln_graph_input_count(g, &n));
  CHECK(n == 0);
  OK(kiln_graph_output_count(g, &n));
  CHECK(n == 0);
  OK(kiln_graph_param_count(g, &n));
  CHECK(n == 0);
  float w[12] = { 0 };
  kiln_tensor x, p, c, y, idx, m;
  OK(kiln_graph_input(g, "x", KILN_F32, 2, (int64_t[]){ 2, 3 }, &x));
  OK(kiln_graph_param(g, "w", KILN_F32, 2, (int64_t[]){ 3, 4 }, w, &p));
  OK(kiln_graph_const(g, KILN_F32, 1, (int64_t[]){ 4 }, w, &c));
  OK(kiln_graph_input(g, "idx", KILN_I64, 0, NULL, &idx));
  OK(kiln_graph_matmul(g, x, p, &m));
  OK(kiln_graph_binary(g, KILN_ADD, m, c, &y));
  OK(kiln_graph_output(g, y, "out"));
  OK(kiln_graph_output(g, idx, NULL));  /* no name: the tensor's */

  kiln_tensor_info info;
  OK(kiln_graph_input_count(g, &n));
  CHECK(n == 2);
  OK(kiln_graph_input_info(g, 0, &info));
  CHECK(info.tensor == x && !strcmp(info.name, "x") && info.dtype == KILN_F32 && info.rank == 2 &&
        info.shape[0] == 2 && info.shape[1] == 3 && info.shape[2] == 0 && info.numel == 6);
  OK(kiln_graph_input_info(g, 1, &info));
  CHECK(info.tensor == idx && !strcmp(info.name, "idx") && info.dtype == KILN_I64 && info.rank == 0 &&
        info.numel == 1);
  OK(kiln_graph_param_count(g, &n));
  CHECK(n == 1);
  OK(kiln_graph_param_info(g, 0, &info));
  CHECK(info.tensor == p && !strcmp(info.name, "w") && info.numel == 12);
  OK(kiln_graph_output_count(g, &n));
  CHECK(n == 2);
  OK(kiln_graph_output_info(g, 0, &info));
  CHECK(info.tensor == y && !strcmp(info.name, "out") && info.rank == 2 && info.shape[0] == 2 &&
        info.shape[1] == 4 && info.numel == 8);
  OK(kiln_graph_output_info(g, 1, &info));
  CHECK(info.tensor == idx && !strcmp(info.name, "idx"));
  OK(kiln_graph_tensor_info(g, m, &info));
  CHECK(info.tensor == m && info.numel == 8 && info.name && info.name[0]);
  OK(kiln_graph_tensor_info(g, c, &info));
  CHECK(info.rank == 1 && info.shape[0] == 4);

  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_input_info(g, 2, &info));
  CHECK(strstr(kiln_last_error(), "input 2"));
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_input_info(g, -1, &info));
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_param_info(g, 1, &info));
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_output_info(g, 2, &info));
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_output_info(g, -1, &info));
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_tensor_info(g, 99, &info));
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_tensor_info(g, -1, &info));
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_input_info(NULL, 0, &info));
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_input_info(g, 0, NULL));
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_input_count(NULL, &n));
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_input_count(g, NULL));
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_output_count(NULL, &n));
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_output_count(g, NULL));
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_param_count(NULL, &n));
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_output_info(NULL, 0, &info));
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_param_info(g, 0, NULL));
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_tensor_info(NULL, 0, &info));
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_tensor_info(g, 0, NULL));
  kiln_graph_free(g);
}

/* ../shared/models/mlp: the infos agree with its test data. */
static void test_mlp_model(void) {
  const char *shared = getenv("KILN_SHARED_DIR");
  char model[PATH_MAX], data[PATH_MAX];
  snprintf(model, sizeof model, "%s/models/mlp/model.onnx", shared && *shared ? shared : "../shared");
  snprintf(data, sizeof data, "%s/models/mlp/test_data_set_0", shared && *shared ? shared : "../shared");
  if (access(model, R_OK)) {
    printf("skip: no %s\n", model);
    return;
  }
  kiln_graph *g = NULL;
  kiln_value_list ins = { 0 }, outs = { 0 };
  OK(kiln_graph_load_onnx(model, &g));
  OK(kiln_value_list_read(data, "input", &ins));
  OK(kiln_value_list_read(data, "output", &outs));
  int n_in = -1, n_out = -1, n_par = -1;
  if (g) {
    OK(kiln_graph_input_count(g, &n_in));
    OK(kiln_graph_output_count(g, &n_out));
    OK(kiln_graph_param_count(g, &n_par));
  }
  CHECK(n_in == ins.n && n_out == outs.n && n_in >= 1 && n_out >= 1);
  CHECK(n_par >= 1);  /* the weight matrices are above the constant size */
  for (int i = 0; g && i < n_in && i < ins.n; i++) {
    kiln_tensor_info x;
    OK(kiln_graph_input_info(g, i, &x));
    CHECK(x.tensor == i && x.dtype == ins.v[i].dtype && x.rank == ins.v[i].rank && x.numel == ins.v[i].numel &&
          !memcmp(x.shape, ins.v[i].shape, sizeof x.shape));
  }
  for (int i = 0; g && i < n_out && i < outs.n; i++) {
    kiln_tensor_info y;
    OK(kiln_graph_output_info(g, i, &y));
    CHECK(y.dtype == outs.v[i].dtype && y.numel == outs.v[i].numel && y.name && y.name[0]);
  }
  for (int i = 0; g && i < n_par; i++) {
    kiln_tensor_info w;
    int64_t numel = 1;
    OK(kiln_graph_param_info(g, i, &w));
    for (int d = 0; d < w.rank; d++) numel *= w.shape[d];
    CHECK(w.numel == numel && w.numel > 4096);
  }
  /* bound by position, as kiln run --check does: the same graph */
  kiln_graph *gb = NULL;
  kiln_value *bind = calloc((size_t)ins.n + 1, sizeof *bind);
  for (int i = 0; bind && i < ins.n; i++) bind[i] = ins.v[i], bind[i].name = NULL;
  OK(kiln_graph_load_onnx_bound(model, ins.n, bind, &gb));
  int n_bin = -1;
  if (gb) OK(kiln_graph_input_count(gb, &n_bin));
  CHECK(n_bin == n_in);
  free(bind);
  kiln_graph_free(gb);
  kiln_value_list_clear(&ins);
  kiln_value_list_clear(&outs);
  kiln_graph_free(g);
}

/* ---- binding at import ---- */

/* A model of one node y = op(inputs...), opset 13. */
static void model(Buf *m, const char *op, int n_in, const char *const *ins, const Buf *graph_io) {
  Buf g = { .n = 0 }, node = { .n = 0 };
  for (int i = 0; i < n_in; i++) f_str(&node, 1, ins[i]);
  f_str(&node, 2, "y");
  f_str(&node, 4, op);
  f_msg(&g, 1, &node);
  f_str(&g, 2, "g");
  for (size_t i = 0; i < graph_io->n; i++) put(&g, graph_io->b[i]);
  pb_model(m, &g, 13);
}

/* y = Relu(x), x: f32 [N, 3]. Unloadable until x is bound. */
static void test_bind_symbolic(void) {
  Buf io = { .n = 0 }, m = { .n = 0 };
  f_value_info(&io, 11, "x", T_FLOAT, 2, (int64_t[]){ -1, 3 });
  f_value_info(&io, 12, "y", T_FLOAT, 2, (int64_t[]){ -1, 3 });
  model(&m, "Relu", 1, (const char *[]){ "x" }, &io);
  kiln_graph *g = (kiln_graph *)1;
  FAILS(KILN_ERR_UNSUPPORTED, kiln_graph_load_onnx_buffer_bound(m.b, m.n, NULL, 0, NULL, &g));
  CHECK(g == NULL);
  CHECK(strstr(kiln_last_error(), "symbolic"));
  float x[6] = { -1, 2, -3, 4, -5, 6 };
  kiln_value v = { .name = "x", .dtype = KILN_F32, .rank = 2, .shape = { 2, 3 }, .numel = 6, .data = x };
  const char *names[] = { "x", NULL, "" };  /* by name, then by position twice */
  for (int k = 0; k < 3; k++) {
    v.name = names[k];
    OK(kiln_graph_load_onnx_buffer_bound(m.b, m.n, NULL, 1, &v, &g));
    kiln_tensor_info info;
    if (!g) continue;
    OK(kiln_graph_input_info(g, 0, &info));
    CHECK(info.tensor == 0 && !strcmp(info.name, "x") && info.shape[0] == 2 && info.numel == 6);
    OK(kiln_graph_output_info(g, 0, &info));
    CHECK(!strcmp(info.name, "y") && info.shape[0] == 2 && info.shape[1] == 3);
    kiln_graph_free(g);
  }
  v.name = "x";
  v.data = NULL;  /* only the shape: enough for an input the model does not read at import */
  OK(kiln_graph_load_onnx_buffer_bound(m.b, m.n, NULL, 1, &v, &g));
  kiln_graph_free(g);
  v.data = x;
  v.name = "other";  /* neither its name nor unnamed: x stays unbound */
  FAILS(KILN_ERR_UNSUPPORTED, kiln_graph_load_onnx_buffer_bound(m.b, m.n, NULL, 1, &v, &g));
  v.name = "x";

  /* values the model does not declare, and values that are not values */
  kiln_value bad = v;
  bad.dtype = KILN_I32;
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_load_onnx_buffer_bound(m.b, m.n, NULL, 1, &bad, &g));
  CHECK(g == NULL && strstr(kiln_last_error(), "type"));
  bad = v, bad.rank = 3, bad.shape[2] = 1;
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_load_onnx_buffer_bound(m.b, m.n, NULL, 1, &bad, &g));
  CHECK(strstr(kiln_last_error(), "rank"));
  bad = v, bad.numel = 7;
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_load_onnx_buffer_bound(m.b, m.n, NULL, 1, &bad, &g));
  CHECK(strstr(kiln_last_error(), "bind[0]"));
  bad = v, bad.dtype = (kiln_dtype)99;
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_load_onnx_buffer_bound(m.b, m.n, NULL, 1, &bad, &g));
  bad = v, bad.rank = KILN_MAX_RANK + 1;
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_load_onnx_buffer_bound(m.b, m.n, NULL, 1, &bad, &g));
  bad = v, bad.shape[0] = -2, bad.numel = -6;
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_load_onnx_buffer_bound(m.b, m.n, NULL, 1, &bad, &g));
  bad = v, bad.rank = 2, bad.shape[0] = (int64_t)1 << 62, bad.shape[1] = 8;
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_load_onnx_buffer_bound(m.b, m.n, NULL, 1, &bad, &g));
  const char *strs[2] = { "a", NULL };
  kiln_value sv = { .name = "s", .dtype = KILN_STRING, .rank = 1, .shape = { 2 }, .numel = 2, .data = strs };
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_load_onnx_buffer_bound(m.b, m.n, NULL, 1, &sv, &g));
  CHECK(strstr(kiln_last_error(), "NULL"));
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_load_onnx_buffer_bound(m.b, m.n, NULL, -1, &v, &g));
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_load_onnx_buffer_bound(m.b, m.n, NULL, 1, NULL, &g));
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_load_onnx_buffer_bound(m.b, m.n, NULL, 1, &v, NULL));
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_load_onnx_buffer_bound(NULL, 10, NULL, 1, &v, &g));
  FAILS(KILN_ERR_MODEL, kiln_graph_load_onnx_buffer_bound(m.b, m.n / 2, NULL, 1, &v, &g));
  CHECK(g == NULL);

  /* the same model from a file */
  char path[PATH_MAX];
  write_file("relu.onnx", m.b, m.n, path);
  OK(kiln_graph_load_onnx_bound(path, 1, &v, &g));
  CHECK(g != NULL);
  kiln_graph_free(g);
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_load_onnx_bound(NULL, 1, &v, &g));
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_load_onnx_bound(path, 1, &v, NULL));
  snprintf(path, sizeof path, "%s/absent.onnx", tmp);
  FAILS(KILN_ERR_IO, kiln_graph_load_onnx_bound(path, 1, &v, &g));
  CHECK(g == NULL && strstr(kiln_last_error(), path));
}

/* y = Reshape(x, s): bound, s becomes a constant and the graph has one input left. */
static void test_bind_shape_operand(void) {
  Buf io = { .n = 0 }, m = { .n = 0 };
  f_value_info(&io, 11, "x", T_FLOAT, 2, (int64_t[]){ 2, 3 });
  f_value_info(&io, 11, "s", T_INT64, 1, (int64_t[]){ 2 });
  f_value_info(&io, 12, "y", T_FLOAT, 2, (int64_t[]){ 3, 2 });
  model(&m, "Reshape", 2, (const char *[]){ "x", "s" }, &io);
  kiln_graph *g = NULL;
  CHECK(kiln_graph_load_onnx_buffer_bound(m.b, m.n, NULL, 0, NULL, &g) != KILN_OK && !g);  /* s unknown */
  int64_t shape[2] = { 3, 2 };
  float x[6] = { 1, 2, 3, 4, 5, 6 }, y[6] = { 0 };
  kiln_value s = { .name = "s", .dtype = KILN_I64, .rank = 1, .shape = { 2 }, .numel = 2, .data = shape };
  OK(kiln_graph_load_onnx_buffer_bound(m.b, m.n, NULL, 1, &s, &g));
  if (!g) return;
  int n = -1;
  kiln_tensor_info info;
  OK(kiln_graph_input_count(g, &n));
  CHECK(n == 1);
  OK(kiln_graph_input_info(g, 0, &info));
  CHECK(info.tensor == 0 && !strcmp(info.name, "x"));
  OK(kiln_graph_tensor_info(g, 1, &info));  /* tensor 1 is the model's input 1: now a constant */
  CHECK(!strcmp(info.name, "s") && info.dtype == KILN_I64);
  OK(kiln_graph_output_info(g, 0, &info));
  CHECK(info.rank == 2 && info.shape[0] == 3 && info.shape[1] == 2);
  kiln_options o = kiln_options_default();
  o.backend = "ref";
  kiln_program *p = NULL;
  OK(kiln_program_compile(g, &o, &p));
  if (p) OK(kiln_program_run(p, (const void *[]){ x }, (void *[]){ y }));
  for (int i = 0; i < 6; i++) CHECK(y[i] == x[i]);
  kiln_program_free(p);
  kiln_graph_free(g);

  /* by position, x fixed by shape only; s without data cannot become a constant */
  kiln_value both[2] = { { .dtype = KILN_F32, .rank = 2, .shape = { 2, 3 }, .numel = 6 }, s };
  both[1].name = NULL;
  OK(kiln_graph_load_onnx_buffer_bound(m.b, m.n, NULL, 2, both, &g));
  CHECK(g != NULL);
  kiln_graph_free(g);
  both[1].data = NULL;
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_load_onnx_buffer_bound(m.b, m.n, NULL, 2, both, &g));
  CHECK(g == NULL);
}

/* ---- failing allocations ---- */

/* Each run fails one more allocation; every failure is a status with a message (protobuf-c's
 * own allocation failing reads as a malformed message, KILN_ERR_MODEL) and ASan sees no leak. */
static void test_alloc_failure(void) {
  Buf t = { .n = 0 }, ts = { .n = 0 }, io = { .n = 0 }, m = { .n = 0 };
  float x[6] = { 1, 2, 3, 4, 5, 6 };
  tensor_head(&t, 2, (int64_t[]){ 2, 3 }, T_FLOAT, "x");
  f_bytes(&t, 9, x, sizeof x);
  tensor_head(&ts, 1, (int64_t[]){ 2 }, T_STRING, "s");
  f_str(&ts, 6, "one"), f_str(&ts, 6, "two");
  f_value_info(&io, 11, "x", T_FLOAT, 2, (int64_t[]){ -1, 3 });
  f_value_info(&io, 12, "y", T_FLOAT, 2, (int64_t[]){ -1, 3 });
  model(&m, "Relu", 1, (const char *[]){ "x" }, &io);
  kiln_value bind = { .name = "x", .dtype = KILN_F32, .rank = 2, .shape = { 2, 3 }, .numel = 6, .data = x };
  int failures[4] = { 0 };
  for (int which = 0; which < 4; which++)
    for (long n = 1; n < 10000; n++) {
      kiln_value v = { 0 };
      kiln_value_list l = { 0 };
      kiln_graph *g = NULL;
      kiln_status s;
      kiln_alloc_fail_after(n);
      if (which == 0) s = kiln_value_read_pb_buffer(t.b, t.n, NULL, &v);
      else if (which == 1) s = kiln_value_read_pb_buffer(ts.b, ts.n, NULL, &v);
      else if (which == 2) s = kiln_value_list_read(tmp, "many", &l);
      else s = kiln_graph_load_onnx_buffer_bound(m.b, m.n, NULL, 1, &bind, &g);
      kiln_alloc_fail_after(0);
      if (s == KILN_OK) {
        CHECK(which == 2 ? l.n == 20 : which == 3 ? g != NULL : v.data != NULL);
        kiln_value_clear(&v), kiln_value_list_clear(&l), kiln_graph_free(g);
        break;
      }
      failures[which]++;
      CHECK_MSG((s == KILN_ERR_NO_MEMORY || s == KILN_ERR_MODEL) && kiln_last_error()[0] && is_clear(&v) &&
                    l.n == 0 && !l.v && !g,
                "case %d, n = %ld: %s: %s", which, n, kiln_status_name(s), kiln_last_error());
    }
  for (int which = 0; which < 4; which++) CHECK_MSG(failures[which] >= 2, "case %d: %d", which, failures[which]);
  printf("allocation failure: %d, %d, %d, %d failing runs before success\n", failures[0], failures[1], failures[2],
         failures[3]);
}

/* Removes this run's folder and what is in it. */
static void remove_tmp(void) {
  const char *names[] = { "input_0.pb", "input_1.pb", "input_3.pb", "bad_0.pb", "mixed_0.pb", "mixed_1.pb",
                          "ext.bin", "ext.pb", "relu.onnx" };
  char path[PATH_MAX];
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    snprintf(path, sizeof path, "%s/%s", tmp, names[i]);
    unlink(path);
  }
  for (int i = 0; i < 20; i++) {
    snprintf(path, sizeof path, "%s/many_%d.pb", tmp, i);
    unlink(path);
  }
  CHECK_MSG(rmdir(tmp) == 0, "cannot remove %s", tmp);
}

int main(void) {
  snprintf(tmp, sizeof tmp, "/tmp/kiln_test_api_io_XXXXXX");
  if (!mkdtemp(tmp)) return printf("cannot make a temporary folder\n"), 1;
  test_f32_raw();
  test_typed_fields();
  test_scalar_empty_strings();
  test_caller_values();
  test_shape_format();
  test_hostile();
  test_files();
  test_graph_info();
  test_mlp_model();
  test_bind_symbolic();
  test_bind_shape_operand();
  test_alloc_failure();
  remove_tmp();
  TEST_MAIN_END();
}
