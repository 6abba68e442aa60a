/*
 * pbwrite.h — a tiny protobuf writer for the ONNX tests: models and tensors are written
 * field by field, so a test controls every byte (hostile fields included).
 */
#ifndef KILN_TEST_PBWRITE_H
#define KILN_TEST_PBWRITE_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct Buf { uint8_t b[8192]; size_t n; } Buf;

static inline void put(Buf *w, uint8_t c) { if (w->n < sizeof w->b) w->b[w->n++] = c; }
static inline void varint(Buf *w, uint64_t v) { do { put(w, (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0))); v >>= 7; } while (v); }
static inline void key(Buf *w, int field, int wt) { varint(w, (uint64_t)field << 3 | (uint64_t)wt); }
static inline void f_int(Buf *w, int field, int64_t v) { key(w, field, 0); varint(w, (uint64_t)v); }
static inline void f_bytes(Buf *w, int field, const void *p, size_t n) {
  key(w, field, 2);
  varint(w, n);
  for (size_t i = 0; i < n; i++) put(w, ((const uint8_t *)p)[i]);
}
static inline void f_str(Buf *w, int field, const char *s) { f_bytes(w, field, s, strlen(s)); }
static inline void f_msg(Buf *w, int field, const Buf *m) { f_bytes(w, field, m->b, m->n); }
/* ValueInfoProto `name` (field of out): a tensor of ONNX element type elem; a dim < 0 is
 * symbolic (dim_param "N"). */
static inline void f_value_info(Buf *out, int field, const char *name, int elem, int rank, const int64_t *dims) {
  Buf shape = { .n = 0 }, tt = { .n = 0 }, tp = { .n = 0 }, vi = { .n = 0 };
  for (int i = 0; i < rank; i++) {
    Buf d = { .n = 0 };
    if (dims[i] < 0) f_str(&d, 2, "N");
    else f_int(&d, 1, dims[i]);
    f_msg(&shape, 1, &d);
  }
  f_int(&tt, 1, elem);
  f_msg(&tt, 2, &shape);
  f_msg(&tp, 1, &tt);
  f_str(&vi, 1, name);
  f_msg(&vi, 2, &tp);
  f_msg(out, field, &vi);
}

/* A float tensor (ONNX type 1) of the given dims. */
static inline void f_float_value_info(Buf *out, int field, const char *name, int rank, const int64_t *dims) {
  f_value_info(out, field, name, 1, rank, dims);
}

/* ModelProto: IR version 8, the default domain at opset, and graph g. */
static inline void pb_model(Buf *m, const Buf *g, int64_t opset) {
  Buf ops = { .n = 0 };
  f_int(m, 1, 8);
  f_str(&ops, 1, "");
  f_int(&ops, 2, opset);
  f_msg(m, 8, &ops);
  f_msg(m, 7, g);
}

/* Writes n bytes at p to dir/name (path gets the file's path, PATH_MAX bytes); false on failure. */
static inline bool pb_write_file(const char *dir, const char *name, const void *p, size_t n, char *path) {
  snprintf(path, PATH_MAX, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f) return false;
  bool ok = fwrite(p, 1, n, f) == n;
  return fclose(f) == 0 && ok;
}

#endif
