/*
 * onnx.c — reads an ONNX ModelProto and builds a kiln graph from it.
 *
 * Takes the bytes of a model (untrusted), produces a Graph whose inputs are the
 * model's graph inputs that are not initializers, whose leaves hold the initializers,
 * and whose outputs are the model's outputs. How: a depth-limited walk of the wire
 * format (protobuf-c recurses, so a hostile nesting must be refused first), then
 * protobuf-c's unpacker with kiln's allocation hook, then the caller's values for inputs
 * checked against what the model declares (dtype, rank, static dims, symbolic dims bound
 * consistently), then one pass over the nodes in file order: each node's attributes are
 * checked against its op's schema (onnx_schema.c), then it goes through the rule for its
 * op in onnx_ops.c. Nodes of model-local functions are inlined with a fresh scope. Every
 * tensor size is checked against the bytes present, every product against overflow, and
 * external data is read only from files under the model's own folder.
 *
 * Errors: a malformed or inconsistent file is KILN_ERR_MODEL, a bad value from the caller
 * KILN_ERR_INVALID_ARG, only what kiln lacks KILN_ERR_UNSUPPORTED. A message names what it
 * is about ("node 'n' (Gemm): ...", "input 'x' dim 1: ...") and never carries a status
 * word; the file loaders put the path first.
 */
#include "onnx_import.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_NESTING 48        /* message nesting accepted in a file */
#define MAX_INLINE_DEPTH 8    /* functions calling functions */
#define NODE_BUDGET (1L << 20) /* ONNX nodes imported, after unrolling and inlining */

/* ---- errors and the allocation hook ---- */

kiln_status im_fail(Importer *im, kiln_status s, const char *fmt, ...) {
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (im->node)
    return kiln_fail(s, "node '%s' (%s): %s", im->node_name, im->node->op_type ? im->node->op_type : "?", msg);
  return kiln_fail(s, "%s", msg);
}

static void *pb_alloc(void *ud, size_t n) { (void)ud; return kiln_malloc(n); }
static void pb_free(void *ud, void *p) { (void)ud; kiln_free(p); }
static ProtobufCAllocator pb_allocator = { pb_alloc, pb_free, NULL };

/* ---- a bounded walk of the wire format ---- */

static bool wire_varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
  uint64_t r = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (*p >= end) return false;
    uint8_t b = *(*p)++;
    r |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) { *v = r; return true; }
  }
  return false;
}

/* Where and why a wire walk stopped: the offset of the bad field, and whether it was
 * nesting (too deep) rather than bytes that are not protobuf. */
typedef struct WireError { size_t at; bool deep; } WireError;

/* Checks that every length fits in the buffer and that messages nest at most
 * MAX_NESTING deep; protobuf-c's recursive unpacker would otherwise exhaust the stack. */
static bool wire_check(const uint8_t *start, const uint8_t *p, const uint8_t *end, const ProtobufCMessageDescriptor *d,
                       int depth, WireError *e) {
  if (depth > MAX_NESTING) return e->at = (size_t)(p - start), e->deep = true, false;
  while (p < end) {
    uint64_t key, v;
    e->at = (size_t)(p - start);
    if (!wire_varint(&p, end, &key)) return false;
    switch (key & 7) {
    case 0: if (!wire_varint(&p, end, &v)) return false; break;
    case 1: if (end - p < 8) return false; p += 8; break;
    case 5: if (end - p < 4) return false; p += 4; break;
    case 2: {
      if (!wire_varint(&p, end, &v) || v > (uint64_t)(end - p)) return false;
      const ProtobufCFieldDescriptor *f =
          key >> 3 <= UINT_MAX ? protobuf_c_message_descriptor_get_field(d, (unsigned)(key >> 3)) : NULL;
      if (f && f->type == PROTOBUF_C_TYPE_MESSAGE && !wire_check(start, p, p + v, f->descriptor, depth + 1, e))
        return false;
      p += v;
      break;
    }
    default: return false;  /* groups (3, 4) do not occur in ONNX */
    }
  }
  return true;
}

/* what: "an ONNX model", "an ONNX tensor" (for the message). */
static kiln_status wire_fail(const WireError *e, const char *what) {
  if (e->deep) return kiln_fail(KILN_ERR_MODEL, "messages nest more than %d deep at byte %zu", MAX_NESTING, e->at);
  return kiln_fail(KILN_ERR_MODEL, "not %s: the bytes are not valid protobuf (truncated or malformed at byte %zu)",
                   what, e->at);
}

static kiln_status unpack_model(const void *data, size_t size, Onnx__ModelProto **out) {
  const uint8_t *p = data;
  WireError e = { 0, false };
  if (!wire_check(p, p, p + size, &onnx__model_proto__descriptor, 0, &e)) return wire_fail(&e, "an ONNX model");
  *out = onnx__model_proto__unpack(&pb_allocator, size, p);
  if (!*out)
    return kiln_fail(KILN_ERR_MODEL, "not an ONNX model: protobuf whose fields do not decode as a ModelProto (or out of "
                     "memory)");
  return KILN_OK;
}

/* ---- names ---- */

static uint64_t name_hash(const char *s) { return hash_bytes(s, strlen(s), 0x6b696c6e); }

static kiln_status map_put(Arena *a, NameMap *m, const char *key, int val) {
  if (2 * (m->n + 1) > m->cap) {
    int cap = m->cap ? 2 * m->cap : 64;
    const char **keys = arena_alloc(a, sizeof *keys * (size_t)cap);
    int *vals = arena_alloc(a, sizeof *vals * (size_t)cap);
    if (!keys || !vals) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory (name table)");
    NameMap nm = { keys, vals, cap, 0, m->parent };
    for (int i = 0; i < m->cap; i++)
      if (m->keys[i]) {
        size_t h = name_hash(m->keys[i]) & (size_t)(cap - 1);
        while (nm.keys[h]) h = (h + 1) & (size_t)(cap - 1);
        nm.keys[h] = m->keys[i], nm.vals[h] = m->vals[i], nm.n++;
      }
    *m = nm;
  }
  size_t h = name_hash(key) & (size_t)(m->cap - 1);
  while (m->keys[h] && strcmp(m->keys[h], key)) h = (h + 1) & (size_t)(m->cap - 1);
  if (!m->keys[h]) {
    if (!(m->keys[h] = arena_strdup(a, key))) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory (names)");
    m->n++;
  }
  m->vals[h] = val;
  return KILN_OK;
}

/* The value of key in m or, failing that, in its enclosing scopes; -1 if none. */
static int map_get(const NameMap *m, const char *key) {
  for (; m; m = m->parent) {
    if (!m->cap) continue;
    size_t h = name_hash(key) & (size_t)(m->cap - 1);
    while (m->keys[h]) {
      if (!strcmp(m->keys[h], key)) return m->vals[h];
      h = (h + 1) & (size_t)(m->cap - 1);
    }
  }
  return -1;
}

int map_get_id(Importer *im, const char *name) { return map_get(im->scope, name); }

/* ---- attributes ---- */

const Onnx__AttributeProto *im_attr(Importer *im, const char *name) {
  const Onnx__NodeProto *n = im->node;
  for (size_t i = 0; i < n->n_attribute; i++) {
    const Onnx__AttributeProto *a = n->attribute[i];
    if (!a->name || strcmp(a->name, name)) continue;
    if (a->ref_attr_name && *a->ref_attr_name) {  /* refers to the calling node's attribute */
      if (!im->caller) return NULL;
      for (size_t j = 0; j < im->caller->n_attribute; j++)
        if (im->caller->attribute[j]->name && !strcmp(im->caller->attribute[j]->name, a->ref_attr_name))
          return im->caller->attribute[j];
      return NULL;
    }
    return a;
  }
  return NULL;
}

int64_t im_attr_i(Importer *im, const char *name, int64_t dflt) {
  const Onnx__AttributeProto *a = im_attr(im, name);
  return a && a->has_i ? a->i : dflt;
}

float im_attr_f(Importer *im, const char *name, float dflt) {
  const Onnx__AttributeProto *a = im_attr(im, name);
  return a && a->has_f ? a->f : dflt;
}

const char *im_attr_s(Importer *im, const char *name, const char *dflt) {
  const Onnx__AttributeProto *a = im_attr(im, name);
  if (!a || !a->has_s) return dflt;
  char *s = arena_alloc(&im->tmp, a->s.len + 1);
  if (!s) return dflt;
  if (a->s.len) memcpy(s, a->s.data, a->s.len);
  return s;
}

const int64_t *im_attr_ints(Importer *im, const char *name, int *n) {
  const Onnx__AttributeProto *a = im_attr(im, name);
  if (!a || (a->n_ints == 0 && a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__INTS) || a->n_ints > INT_MAX) {
    *n = -1;
    return NULL;
  }
  *n = (int)a->n_ints;
  return a->ints;
}

const float *im_attr_floats(Importer *im, const char *name, int *n) {
  const Onnx__AttributeProto *a = im_attr(im, name);
  if (!a || (a->n_floats == 0 && a->type != ONNX__ATTRIBUTE_PROTO__ATTRIBUTE_TYPE__FLOATS) || a->n_floats > INT_MAX) {
    *n = -1;
    return NULL;
  }
  *n = (int)a->n_floats;
  return a->floats;
}

/* ---- tensors ---- */

/* ONNX TensorProto.DataType -> kiln dtype; false for types kiln does not hold. */
static bool onnx_dtype(int32_t t, kiln_dtype *out) {
  switch (t) {
  case 1: *out = KILN_F32; return true;
  case 2: *out = KILN_U8; return true;
  case 3: *out = KILN_I8; return true;
  case 4: *out = KILN_U16; return true;
  case 5: *out = KILN_I16; return true;
  case 6: *out = KILN_I32; return true;
  case 7: *out = KILN_I64; return true;
  case 8: *out = KILN_STRING; return true;
  case 9: *out = KILN_BOOL; return true;
  case 10: *out = KILN_F16; return true;
  case 11: *out = KILN_F64; return true;
  case 12: *out = KILN_U32; return true;
  case 13: *out = KILN_U64; return true;
  case 16: *out = KILN_BF16; return true;
  default: return false;
  }
}

static const char *onnx_dtype_name(int32_t t) {
  static const char *const names[] = {
    "undefined", "float", "uint8", "int8", "uint16", "int16", "int32", "int64", "string", "bool", "float16",
    "double", "uint32", "uint64", "complex64", "complex128", "bfloat16", "float8e4m3fn", "float8e4m3fnuz",
    "float8e5m2", "float8e5m2fnuz", "uint4", "int4", "float4e2m1", "float8e8m0", "uint2", "int2" };
  return t >= 0 && t < (int32_t)(sizeof names / sizeof names[0]) ? names[t] : "unknown";
}

/* The names above are every type ONNX defines (0 is "undefined": none given). */
#define ONNX_LAST_DTYPE 26

bool onnx_elem_type_valid(int32_t t) { return t >= 1 && t <= ONNX_LAST_DTYPE; }

kiln_status onnx_elem_type(int32_t t, const char *what, kiln_dtype *out) {
  if (onnx_dtype(t, out)) return KILN_OK;
  if (!t) return kiln_fail(KILN_ERR_MODEL, "%s: no element type (undefined, 0)", what);
  if (!onnx_elem_type_valid(t)) return kiln_fail(KILN_ERR_MODEL, "%s: element type %d is not an ONNX type", what, (int)t);
  return kiln_fail(KILN_ERR_UNSUPPORTED, "%s: element type %s (%d) is not supported", what, onnx_dtype_name(t), (int)t);
}

/* Resolves an external-data location inside dir; refuses anything that leaves it. */
static kiln_status external_path(const char *dir, const char *loc, const char *what, char *out, size_t cap) {
  if (!dir) return kiln_fail(KILN_ERR_MODEL, "tensor '%s': external data but no model folder to read it from", what);
  if (!*loc || loc[0] == '/' || loc[0] == '\\')
    return kiln_fail(KILN_ERR_MODEL, "tensor '%s': external data location '%s' is absolute or empty", what, loc);
  for (const char *p = loc; *p;) {  /* no ".." component */
    const char *q = p + strcspn(p, "/\\");
    if (q - p == 2 && p[0] == '.' && p[1] == '.')
      return kiln_fail(KILN_ERR_MODEL, "tensor '%s': external data location '%s' leaves the model folder", what, loc);
    p = *q ? q + 1 : q;
  }
  char joined[PATH_MAX], rdir[PATH_MAX], rfile[PATH_MAX];
  if ((size_t)snprintf(joined, sizeof joined, "%s/%s", dir, loc) >= sizeof joined)
    return kiln_fail(KILN_ERR_MODEL, "tensor '%s': external data path too long", what);
  if (!realpath(dir, rdir)) return kiln_fail(KILN_ERR_IO, "tensor '%s': model folder '%s': %s", what, dir, strerror(errno));
  if (!realpath(joined, rfile))
    return kiln_fail(KILN_ERR_IO, "tensor '%s': external data '%s': %s", what, loc, strerror(errno));
  size_t n = strlen(rdir);
  if (strncmp(rfile, rdir, n) || (rfile[n] != '/' && !(n == 1 && rdir[0] == '/')))
    return kiln_fail(KILN_ERR_MODEL, "tensor '%s': external data '%s' resolves outside the model folder", what, loc);
  if (strlen(rfile) >= cap) return kiln_fail(KILN_ERR_MODEL, "tensor '%s': external data path too long", what);
  strcpy(out, rfile);
  return KILN_OK;
}

/* Opens a regular file for reading; never blocks on a FIFO or device (O_NONBLOCK) and
 * checks the type of what was opened, not of what a path named a moment earlier.
 * -1 with errno set (EINVAL: not a regular file). */
static int open_regular(const char *path, int extra_flags, struct stat *st) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | extra_flags);
  if (fd < 0) return -1;
  if (fstat(fd, st) || !S_ISREG(st->st_mode)) {
    close(fd);
    errno = EINVAL;
    return -1;
  }
  return fd;
}

/* n bytes at offset into dst; false on an error or a file shorter than that. */
static bool read_at(int fd, int64_t offset, void *dst, size_t n) {
  for (size_t done = 0; done < n;) {
    ssize_t got = pread(fd, (char *)dst + done, n - done, (off_t)offset + (off_t)done);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    done += (size_t)got;
  }
  return true;
}

/* A size in decimal digits only (no sign, space or empty string); false if not or too big. */
static bool parse_size(const char *v, int64_t *out) {
  if (!*v) return false;
  int64_t x = 0;
  for (const char *c = v; *c; c++) {
    if (*c < '0' || *c > '9' || x > (INT64_MAX - (*c - '0')) / 10) return false;
    x = x * 10 + (*c - '0');
  }
  *out = x;
  return true;
}

/* Reads external data into a buffer from a, allocated only once the file is known to hold it. */
static kiln_status read_external(const Onnx__TensorProto *t, const char *dir, const char *what, int64_t bytes, Arena *a,
                                 void **out) {
  const char *loc = NULL;
  int64_t offset = 0, length = -1;
  for (size_t i = 0; i < t->n_external_data; i++) {
    const char *k = t->external_data[i]->key, *v = t->external_data[i]->value;
    if (!k || !v) continue;
    if (!strcmp(k, "location")) loc = v;
    else if (!strcmp(k, "offset") || !strcmp(k, "length")) {
      if (!parse_size(v, !strcmp(k, "offset") ? &offset : &length))
        return kiln_fail(KILN_ERR_MODEL, "tensor '%s': external data %s '%s' is not a size", what, k, v);
    }
  }
  if (!loc) return kiln_fail(KILN_ERR_MODEL, "tensor '%s': external data without a location", what);
  if (length >= 0 && length != bytes)
    return kiln_fail(KILN_ERR_MODEL, "tensor '%s': external data length %lld, expected %lld bytes", what, (long long)length,
                     (long long)bytes);
  char path[PATH_MAX];
  kiln_status s = external_path(dir, loc, what, path, sizeof path);
  if (s) return s;
  /* path is resolved: a symlink in its place now would be a swap after the check. */
  struct stat st;
  int fd = open_regular(path, O_NOFOLLOW, &st);
  if (fd < 0)
    return kiln_fail(KILN_ERR_IO, "tensor '%s': external data '%s': %s", what, loc,
                     errno == EINVAL ? "not a regular file" : strerror(errno));
  int64_t need;
  if (!size_add(offset, bytes, &need) || need > (int64_t)st.st_size) {
    close(fd);
    return kiln_fail(KILN_ERR_MODEL, "tensor '%s': external data '%s' holds %lld bytes, needs %lld at offset %lld", what,
                     loc, (long long)st.st_size, (long long)bytes, (long long)offset);
  }
  void *dst = *out = arena_alloc(a, (size_t)bytes + 1);
  bool ok = dst && read_at(fd, offset, dst, (size_t)bytes);
  close(fd);
  if (!dst) return kiln_fail(KILN_ERR_NO_MEMORY, "tensor '%s': cannot allocate %lld bytes", what, (long long)bytes);
  return ok ? KILN_OK : kiln_fail(KILN_ERR_IO, "tensor '%s': short read from external data '%s'", what, loc);
}

/* Copies the typed repeated field that ONNX uses for dtype t into dst (numel elements). */
static size_t typed_count(const Onnx__TensorProto *t, kiln_dtype dt) {
  switch (dt) {
  case KILN_F32: return t->n_float_data;
  case KILN_F64: return t->n_double_data;
  case KILN_I64: return t->n_int64_data;
  case KILN_U32: case KILN_U64: return t->n_uint64_data;
  default: return t->n_int32_data;  /* i32 i16 i8 u16 u8 bool f16 bf16 */
  }
}

static void typed_data(const Onnx__TensorProto *t, kiln_dtype dt, int64_t numel, void *dst) {
  for (int64_t i = 0; i < numel; i++) {
    switch (dt) {
    case KILN_F32: ((float *)dst)[i] = t->float_data[i]; break;
    case KILN_F64: ((double *)dst)[i] = t->double_data[i]; break;
    case KILN_I64: ((int64_t *)dst)[i] = t->int64_data[i]; break;
    case KILN_U32: ((uint32_t *)dst)[i] = (uint32_t)t->uint64_data[i]; break;
    case KILN_U64: ((uint64_t *)dst)[i] = t->uint64_data[i]; break;
    case KILN_I32: ((int32_t *)dst)[i] = t->int32_data[i]; break;
    case KILN_I16: ((int16_t *)dst)[i] = (int16_t)t->int32_data[i]; break;
    case KILN_I8: ((int8_t *)dst)[i] = (int8_t)t->int32_data[i]; break;
    case KILN_U16: case KILN_F16: case KILN_BF16: ((uint16_t *)dst)[i] = (uint16_t)t->int32_data[i]; break;
    case KILN_U8: ((uint8_t *)dst)[i] = (uint8_t)t->int32_data[i]; break;
    case KILN_BOOL: ((uint8_t *)dst)[i] = t->int32_data[i] != 0; break;
    default: KILN_ASSERT(0);
    }
  }
}

/* string_data -> one arena block: numel pointers, then each string's bytes and a NUL.
 * Strings stay inside the protobuf's own bytes, so the block is at most a little larger
 * than what the file holds; a string holding a NUL byte cannot be a C string. */
static kiln_status decode_strings(const Onnx__TensorProto *t, const char *what, Arena *a, OnnxTensor *out) {
  bool external = t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
  if (external || t->has_raw_data)
    return kiln_fail(KILN_ERR_MODEL, "tensor '%s': strings must be in string_data, not %s", what,
                     external ? "external data" : "raw_data");
  if ((uint64_t)t->n_string_data != (uint64_t)out->numel)
    return kiln_fail(KILN_ERR_MODEL, "tensor '%s': %lld strings declared, %zu present", what, (long long)out->numel,
                     t->n_string_data);
  int64_t bytes = out->numel * (int64_t)sizeof(char *);  /* numel <= n_string_data: no overflow */
  for (size_t i = 0; i < t->n_string_data; i++) {
    const ProtobufCBinaryData *d = &t->string_data[i];
    if (d->len && memchr(d->data, 0, d->len))
      return kiln_fail(KILN_ERR_UNSUPPORTED, "tensor '%s': string %zu holds a NUL byte (kiln strings are C strings)",
                       what, i);
    if (!size_add(bytes, (int64_t)d->len + 1, &bytes) || bytes > ((int64_t)1 << 40))
      return kiln_fail(KILN_ERR_MODEL, "tensor '%s': strings too large", what);
  }
  char **v = out->data = arena_alloc(a, (size_t)bytes + 1);
  if (!v) return kiln_fail(KILN_ERR_NO_MEMORY, "tensor '%s': cannot allocate %lld bytes of strings", what, (long long)bytes);
  char *p = (char *)(v + out->numel);
  for (int64_t i = 0; i < out->numel; i++) {
    const ProtobufCBinaryData *d = &t->string_data[i];
    v[i] = p;
    if (d->len) memcpy(p, d->data, d->len);
    p[d->len] = 0;
    p += d->len + 1;
  }
  return KILN_OK;
}

/* A host string tensor's size as one block (pointers, then bytes), as decode_strings lays it out. */
static int64_t strings_block_bytes(const OnnxTensor *t) {
  int64_t n = t->numel * (int64_t)sizeof(char *);
  for (int64_t i = 0; i < t->numel; i++) n += (int64_t)strlen(((char **)t->data)[i]) + 1;
  return n;
}

/* TensorProto -> dtype, shape and a host copy of its data (from alloc). */
static kiln_status tensor_decode(const Onnx__TensorProto *t, const char *dir, Arena *a, OnnxTensor *out) {
  const char *what = t->name && *t->name ? t->name : "(unnamed)";
  memset(out, 0, sizeof *out);
  out->name = (char *)what;
  if (!t->has_data_type) return kiln_fail(KILN_ERR_MODEL, "tensor '%s': no data type", what);
  kiln_status s = onnx_elem_type(t->data_type, what, &out->dtype);
  if (s) return s;
  if (t->n_dims > KILN_MAX_RANK)
    return kiln_fail(KILN_ERR_UNSUPPORTED, "tensor '%s': rank %zu exceeds %d", what, t->n_dims, KILN_MAX_RANK);
  if (t->segment) return kiln_fail(KILN_ERR_UNSUPPORTED, "tensor '%s': segmented tensors are not supported", what);
  out->rank = (int)t->n_dims;
  for (int i = 0; i < out->rank; i++) {
    if (t->dims[i] < 0) return kiln_fail(KILN_ERR_MODEL, "tensor '%s': dimension %d is negative (%lld)", what, i, (long long)t->dims[i]);
    out->shape[i] = t->dims[i];
  }
  int64_t bytes;
  if (!shape_numel(out->rank, out->shape, &out->numel) || !size_mul(out->numel, (int64_t)kiln_dtype_size(out->dtype), &bytes) ||
      bytes > ((int64_t)1 << 40))
    return kiln_fail(KILN_ERR_MODEL, "tensor '%s': size overflows", what);
  if (out->dtype == KILN_STRING) return decode_strings(t, what, a, out);
  bool external = t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
  /* The data must be present before the buffer is allocated, so a huge declared shape
   * with no bytes behind it fails cleanly instead of allocating. */
  if (external) return read_external(t, dir, what, bytes, a, &out->data);
  if (t->has_raw_data && (int64_t)t->raw_data.len != bytes)
    return kiln_fail(KILN_ERR_MODEL, "tensor '%s': %lld bytes declared, %zu present", what, (long long)bytes, t->raw_data.len);
  if (!t->has_raw_data && (uint64_t)typed_count(t, out->dtype) != (uint64_t)out->numel)
    return kiln_fail(KILN_ERR_MODEL, "tensor '%s': %lld elements declared, %zu present", what, (long long)out->numel,
                     typed_count(t, out->dtype));
  out->data = arena_alloc(a, (size_t)bytes + 1);
  if (!out->data) return kiln_fail(KILN_ERR_NO_MEMORY, "tensor '%s': cannot allocate %lld bytes", what, (long long)bytes);
  if (t->has_raw_data) {  /* little-endian on disk, as on every host kiln runs on */
    if (bytes) memcpy(out->data, t->raw_data.data, (size_t)bytes);
  } else {
    typed_data(t, out->dtype, out->numel, out->data);
  }
  return KILN_OK;
}

kiln_status im_tensor(Importer *im, const Onnx__TensorProto *t, OnnxTensor *out) {
  return tensor_decode(t, im->base_dir, &im->tmp, out);
}

kiln_status onnx_read_tensor(const void *data, size_t size, const char *base_dir, OnnxTensor *out) {
  memset(out, 0, sizeof *out);
  if (!data && size) return kiln_fail(KILN_ERR_INVALID_ARG, "onnx_read_tensor: data is NULL");
  WireError e = { 0, false };
  if (!wire_check(data, data, (const uint8_t *)data + size, &onnx__tensor_proto__descriptor, 0, &e))
    return wire_fail(&e, "an ONNX tensor");
  Onnx__TensorProto *t = onnx__tensor_proto__unpack(&pb_allocator, size, data);
  if (!t) return kiln_fail(KILN_ERR_MODEL, "protobuf-c could not decode the TensorProto (malformed or out of memory)");
  Arena a = { 0 };
  OnnxTensor tmp;
  kiln_status s = tensor_decode(t, base_dir, &a, &tmp);
  if (!s) {
    bool str = tmp.dtype == KILN_STRING;
    int64_t bytes = str ? strings_block_bytes(&tmp) : tmp.numel * (int64_t)kiln_dtype_size(tmp.dtype);
    *out = tmp;
    out->name = kiln_strdup(t->name ? t->name : "");
    out->data = kiln_malloc((size_t)bytes + 1);
    if (!out->name || !out->data) {
      onnx_tensor_clear(out);
      s = kiln_fail(KILN_ERR_NO_MEMORY, "out of memory reading a tensor");
    } else if (str) {  /* one block the caller frees at once: pointers re-aimed into the copy */
      char **v = out->data, *p = (char *)(v + tmp.numel);
      for (int64_t i = 0; i < tmp.numel; i++) {
        size_t n = strlen(((char **)tmp.data)[i]) + 1;
        memcpy(p, ((char **)tmp.data)[i], n);
        v[i] = p;
        p += n;
      }
    } else if (bytes) {
      memcpy(out->data, tmp.data, (size_t)bytes);
    }
  }
  arena_free(&a);
  onnx__tensor_proto__free_unpacked(t, &pb_allocator);
  return s;
}

void onnx_tensor_clear(OnnxTensor *t) {
  if (!t) return;
  kiln_free(t->name);
  kiln_free(t->data);
  memset(t, 0, sizeof *t);
}

/* ---- leaves ---- */

kiln_status im_const(Importer *im, kiln_dtype t, int rank, const int64_t *shape, const void *data, int *out) {
  return graph_leaf(im->g, T_CONST, NULL, t, rank, shape, data, out);
}

kiln_status im_const_i64(Importer *im, int rank, const int64_t *shape, const int64_t *data, int *out) {
  return im_const(im, KILN_I64, rank, shape, data, out);
}

/* Initializers up to this many elements are constants (foldable: shapes, axes, small
 * tables); larger ones are parameters, uploaded once. */
#define CONST_LIMIT 4096

static kiln_status add_initializer(Importer *im, const Onnx__TensorProto *t) {
  OnnxTensor v;
  kiln_status s = im_tensor(im, t, &v);
  if (s) return s;
  if (!t->name || !*t->name) return kiln_fail(KILN_ERR_MODEL, "an initializer has no name");
  int id;
  s = graph_leaf(im->g, v.numel <= CONST_LIMIT ? T_CONST : T_PARAM, t->name, v.dtype, v.rank, v.shape, v.data, &id);
  if (s) return s;
  return map_put(&im->tmp, im->scope, t->name, id);
}

static bool is_initializer(const Onnx__GraphProto *gp, const char *name) {
  for (size_t i = 0; i < gp->n_initializer; i++)
    if (gp->initializer[i]->name && !strcmp(gp->initializer[i]->name, name)) return true;
  return false;
}

/* The caller's value for graph input number pos called name: by name, else by
 * position when the value at pos has no name (test-data files are positional). */
static const OnnxTensor *find_binding(Importer *im, const char *name, int pos) {
  for (int i = 0; i < im->n_bind; i++)
    if (im->bind[i].name && !strcmp(im->bind[i].name, name)) return &im->bind[i];
  if (pos < im->n_bind && (!im->bind[pos].name || !*im->bind[pos].name)) return &im->bind[pos];
  return NULL;
}

/* The declared tensor type of a graph input or output, or NULL (none, or a sequence, map or optional). */
static const Onnx__TypeProto__Tensor *tensor_type(const Onnx__ValueInfoProto *vi) {
  const Onnx__TypeProto *tp = vi->type;
  if (!tp || tp->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE) return NULL;
  return tp->tensor_type;
}

static const char *dim_param(const Onnx__TensorShapeProto__Dimension *d) {
  return d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && d->dim_param && *d->dim_param
             ? d->dim_param : NULL;
}

/* The binding of a symbolic dim (dim_param) by an earlier value, or NULL. */
static const DimBind *find_dim(const Importer *im, const char *param) {
  for (int i = 0; i < im->n_dims; i++)
    if (!strcmp(im->dims[i].param, param)) return &im->dims[i];
  return NULL;
}

/* Checks the caller's value b for input name against its declaration: dtype, rank, each
 * static dim exactly, each symbolic dim against the value its name already has (the first
 * value to give it one binds it, for every input). */
static kiln_status check_bound(Importer *im, const char *name, const Onnx__TypeProto__Tensor *tt, const OnnxTensor *b) {
  kiln_dtype dt;
  char what[300];
  snprintf(what, sizeof what, "input '%s'", name);
  kiln_status s = onnx_elem_type(tt->has_elem_type ? tt->elem_type : 0, what, &dt);
  if (s) return s;
  if (b->dtype != dt)
    return kiln_fail(KILN_ERR_INVALID_ARG, "input '%s': the model declares type %s, the value has type %s", name,
                     kiln_dtype_name(dt), kiln_dtype_name(b->dtype));
  if (!tt->shape) return KILN_OK;  /* any shape */
  if (tt->shape->n_dim != (size_t)b->rank)
    return kiln_fail(KILN_ERR_INVALID_ARG, "input '%s': the model declares rank %zu, the value has rank %d", name,
                     tt->shape->n_dim, b->rank);
  for (int i = 0; i < b->rank; i++) {
    const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
    const char *param = dim_param(d);
    if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
      if (d->dim_value < 0)
        return kiln_fail(KILN_ERR_MODEL, "input '%s' dim %d: the model declares %lld (negative)", name, i,
                         (long long)d->dim_value);
      if (d->dim_value != b->shape[i])
        return kiln_fail(KILN_ERR_INVALID_ARG, "input '%s' dim %d: the model declares %lld, the value has %lld", name, i,
                         (long long)d->dim_value, (long long)b->shape[i]);
    } else if (param) {
      const DimBind *db = find_dim(im, param);
      if (db && db->value != b->shape[i])
        return kiln_fail(KILN_ERR_INVALID_ARG, "input '%s' dim %d '%s': bound to %lld by input '%s', the value has %lld",
                         name, i, param, (long long)db->value, db->input, (long long)b->shape[i]);
      if (!db) {
        if (im->n_dims == im->cap_dims) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory (symbolic dims)");
        im->dims[im->n_dims++] = (DimBind){ param, b->shape[i], name };
      }
    }
  }
  return KILN_OK;
}

/* Checks every caller's value against its input's declaration before anything is built,
 * in input order (so a symbolic dim is bound by the first input that has it). */
static kiln_status check_bindings(Importer *im, const Onnx__GraphProto *gp) {
  int64_t bytes;
  if (!im->n_bind) return KILN_OK;
  if (gp->n_input > (size_t)INT_MAX / KILN_MAX_RANK ||
      !size_mul((int64_t)gp->n_input * KILN_MAX_RANK, (int64_t)sizeof(DimBind), &bytes))
    return kiln_fail(KILN_ERR_MODEL, "the graph declares %zu inputs", gp->n_input);
  im->cap_dims = (int)gp->n_input * KILN_MAX_RANK;  /* a symbolic dim per dim of each input, at most */
  if (im->cap_dims && !(im->dims = arena_alloc(&im->tmp, (size_t)bytes)))
    return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory (symbolic dims)");
  for (size_t i = 0, pos = 0; i < gp->n_input; i++) {
    const Onnx__ValueInfoProto *vi = gp->input[i];
    if (!vi->name || !*vi->name || is_initializer(gp, vi->name)) continue;  /* refused, or not an input */
    const OnnxTensor *b = find_binding(im, vi->name, (int)pos++);
    const Onnx__TypeProto__Tensor *tt = tensor_type(vi);
    kiln_status s = b && tt ? check_bound(im, vi->name, tt, b) : KILN_OK;
    if (s) return s;
  }
  return KILN_OK;
}

/* What every graph input must be, for the import and for kiln_model's declared inputs: named,
 * a tensor, of an element type kiln has. */
static kiln_status input_type(const Onnx__ValueInfoProto *vi, const Onnx__TypeProto__Tensor **tt, kiln_dtype *dt) {
  const char *name = vi->name;
  if (!name || !*name) return kiln_fail(KILN_ERR_MODEL, "a graph input has no name");
  if (!(*tt = tensor_type(vi)))
    return kiln_fail(vi->type ? KILN_ERR_UNSUPPORTED : KILN_ERR_MODEL, "input '%s': %s", name,
                     vi->type ? "only tensor inputs are supported (sequence/map/optional are not)" : "no type declared");
  char what[300];
  snprintf(what, sizeof what, "input '%s'", name);
  return onnx_elem_type((*tt)->has_elem_type ? (*tt)->elem_type : 0, what, dt);
}

/* A graph input that is not an initializer: its declared type, or the caller's value
 * (checked against it by check_bindings). */
static kiln_status add_input(Importer *im, const Onnx__ValueInfoProto *vi, int pos, bool as_const) {
  const char *name = vi->name;
  const Onnx__TypeProto__Tensor *tt;
  kiln_dtype dt;
  kiln_status s = input_type(vi, &tt, &dt);
  if (s) return s;
  const OnnxTensor *b = find_binding(im, name, pos);
  int rank = 0;
  int64_t shape[KILN_MAX_RANK];
  if (b) {
    rank = b->rank;
    memcpy(shape, b->shape, sizeof shape);
    if (as_const && !b->data && b->numel)
      return kiln_fail(KILN_ERR_INVALID_ARG, "input '%s': the model reads its value while importing (as a shape, axes, "
                       "...), and the value bound to it has no data", name);
  } else {
    if (!tt->shape) return kiln_fail(KILN_ERR_UNSUPPORTED, "input '%s': no shape declared (static shapes are required)", name);
    if (tt->shape->n_dim > KILN_MAX_RANK)
      return kiln_fail(KILN_ERR_UNSUPPORTED, "input '%s': rank %zu exceeds %d", name, tt->shape->n_dim, KILN_MAX_RANK);
    rank = (int)tt->shape->n_dim;
    for (int i = 0; i < rank; i++) {
      const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
      const char *param = dim_param(d);
      const DimBind *db = param ? find_dim(im, param) : NULL;
      if (db) {  /* bound by another input's value */
        shape[i] = db->value;
        continue;
      }
      if (d->value_case != ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
        return kiln_fail(KILN_ERR_UNSUPPORTED, "input '%s': dimension %d is symbolic ('%s'); give a value for this input",
                         name, i, param ? param : "?");
      if (d->dim_value < 0)
        return kiln_fail(KILN_ERR_MODEL, "input '%s': dimension %d is negative (%lld)", name, i, (long long)d->dim_value);
      shape[i] = d->dim_value;
    }
  }
  int id;
  if (as_const && b) s = graph_leaf(im->g, T_CONST, name, dt, rank, shape, b->data, &id);
  else s = graph_leaf(im->g, T_INPUT, name, dt, rank, shape, NULL, &id);
  if (s) return s;
  return map_put(&im->tmp, im->scope, name, id);
}

/* ---- nodes ---- */

/* Inputs that import rules read as data (shapes, axes, pads, ...): a graph input fed
 * there must be known when the graph is built. */
static bool is_shape_operand(const char *op, size_t i) {
  static const struct { const char *op; unsigned mask; } t[] = {
    { "Reshape", 2 }, { "Expand", 2 }, { "Tile", 2 }, { "ConstantOfShape", 1 }, { "Range", 7 },
    { "Slice", 30 }, { "Pad", 14 }, { "Squeeze", 2 }, { "Unsqueeze", 2 }, { "Split", 2 },
    { "ReduceSum", 2 }, { "ReduceMean", 2 }, { "ReduceMax", 2 }, { "ReduceMin", 2 }, { "ReduceProd", 2 },
    { "ReduceSumSquare", 2 }, { "ReduceL1", 2 }, { "ReduceL2", 2 }, { "ReduceLogSum", 2 },
    { "ReduceLogSumExp", 2 }, { "OneHot", 2 }, { "Trilu", 2 }, { "CenterCropPad", 2 }, { "Resize", 14 },
    { "Upsample", 2 }, { "TopK", 2 }, { "EyeLike", 0 }, { "CumSum", 2 }, { "Dropout", 6 },
    { "SequenceInsert", 4 }, { "SequenceErase", 2 }, { "SequenceAt", 2 }, { "SplitToSequence", 2 },
    { "If", 1 }, { "Loop", 3 }, { "ScatterElements", 2 }, { "Scatter", 2 }, { "ScatterND", 2 }, { "GatherND", 2 },
    { "Compress", 2 }, { "HannWindow", 1 }, { "HammingWindow", 1 }, { "BlackmanWindow", 1 }, { "AffineGrid", 2 },
    { "CumProd", 2 }, { "DFT", 6 }, { "Col2Im", 6 }, { "ReverseSequence", 2 }, { "RNN", 16 }, { "GRU", 16 }, { "LSTM", 16 },
    { "MaxUnpool", 6 }, { "TensorScatter", 4 },
  };
  for (size_t k = 0; k < sizeof t / sizeof t[0]; k++)
    if (!strcmp(op, t[k].op)) return i < 32 && (t[k].mask >> i & 1);
  return false;
}

/* Inputs whose values decide an output's length: StringSplit's strings (the most pieces),
 * StringNormalizer's strings when stopwords may remove some. */
static bool decides_length(const Onnx__NodeProto *nd, size_t i) {
  const char *op = nd->op_type ? nd->op_type : "";
  if (i != 0) return false;
  if (!strcmp(op, "StringSplit")) return true;
  if (strcmp(op, "StringNormalizer")) return false;
  for (size_t a = 0; a < nd->n_attribute; a++)
    if (nd->attribute[a]->name && !strcmp(nd->attribute[a]->name, "stopwords") && nd->attribute[a]->n_strings) return true;
  return false;
}

/* The names whose values import rules read, directly or through the nodes computing
 * them (Shape and Size read only their input's shape). One pass in reverse node order
 * suffices: nodes come in topological order. Subgraphs (If branches, Loop and Scan
 * bodies) are walked where they sit: their outputs are needed when the node's are, and
 * what they need from the enclosing graph is marked in the same table (names are
 * unique across a model). */
static kiln_status mark_needed(Importer *im, size_t n_node, Onnx__NodeProto *const *nodes, NameMap *need, int depth) {
  kiln_status s;
  if (depth > MAX_INLINE_DEPTH) return KILN_OK;
  for (size_t n = n_node; n-- > 0;) {
    const Onnx__NodeProto *nd = nodes[n];
    const char *op = nd->op_type ? nd->op_type : "";
    bool out_needed = false;
    for (size_t i = 0; i < nd->n_output; i++) out_needed |= nd->output[i] && map_get(need, nd->output[i]) >= 0;
    for (size_t a = 0; a < nd->n_attribute; a++) {
      const Onnx__GraphProto *body = nd->attribute[a]->g;
      if (!body) continue;
      for (size_t i = 0; out_needed && i < body->n_output; i++)
        if (body->output[i]->name && *body->output[i]->name && (s = map_put(&im->tmp, need, body->output[i]->name, 1))) return s;
      if ((s = mark_needed(im, body->n_node, body->node, need, depth + 1))) return s;
    }
    bool shape_only = !strcmp(op, "Shape") || !strcmp(op, "Size");
    for (size_t i = 0; i < nd->n_input; i++) {
      if (!nd->input[i] || !*nd->input[i]) continue;
      if (((out_needed && !shape_only) || is_shape_operand(op, i) || decides_length(nd, i)) &&
          (s = map_put(&im->tmp, need, nd->input[i], 1)))
        return s;
    }
  }
  return KILN_OK;
}

static const Onnx__FunctionProto *find_function(Importer *im, const char *domain, const char *name) {
  for (size_t i = 0; i < im->model->n_functions; i++) {
    const Onnx__FunctionProto *f = im->model->functions[i];
    if (f->name && !strcmp(f->name, name) && !strcmp(f->domain ? f->domain : "", domain)) return f;
  }
  return NULL;
}

static int opset_of(size_t n, Onnx__OperatorSetIdProto *const *ops, const char *domain) {
  for (size_t i = 0; i < n; i++) {
    const char *d = ops[i]->domain ? ops[i]->domain : "";
    if (!strcmp(d, domain) || (!*domain && !strcmp(d, "ai.onnx")))
      return ops[i]->has_version && ops[i]->version > 0 && ops[i]->version < 1000 ? (int)ops[i]->version : -1;
  }
  return -1;
}

static kiln_status import_nodes(Importer *im, size_t n, Onnx__NodeProto *const *nodes);

/* Inlines a model-local function: its body sees only its formal inputs. */
static kiln_status inline_function(Importer *im, const Onnx__FunctionProto *f, const int *ins, size_t n_in,
                                   int *outs, size_t n_out) {
  if (im->depth >= MAX_INLINE_DEPTH)
    return im_fail(im, KILN_ERR_MODEL, "functions nest more than %d deep (recursive?)", MAX_INLINE_DEPTH);
  NameMap local = { 0 };
  for (size_t i = 0; i < f->n_input && i < n_in; i++)
    if (ins[i] >= 0 && f->input[i] && *f->input[i]) {
      kiln_status s = map_put(&im->tmp, &local, f->input[i], ins[i]);
      if (s) return s;
    }
  Importer sub = *im;
  sub.scope = &local;
  sub.depth = im->depth + 1;
  sub.caller = im->node;
  int v = opset_of(f->n_opset_import, f->opset_import, "");
  if (v > 0) sub.opset = v;
  kiln_status s = import_nodes(&sub, f->n_node, f->node);
  im->tmp = sub.tmp;  /* the arena and the sequence table may have grown */
  im->seqs = sub.seqs, im->n_seqs = sub.n_seqs, im->cap_seqs = sub.cap_seqs;
  if (s) return s;
  for (size_t i = 0; i < n_out; i++) {
    outs[i] = i < f->n_output && f->output[i] ? map_get(&local, f->output[i]) : -1;
    if (outs[i] == -1) return im_fail(im, KILN_ERR_MODEL, "function '%s' does not produce output %zu", f->name, i);
  }
  return KILN_OK;
}

kiln_status im_subgraph(Importer *im, const Onnx__GraphProto *body, int n_in, const int *ins, int n_out, int *outs) {
  if (!body) return im_fail(im, KILN_ERR_MODEL, "subgraph attribute is missing");
  if (im->depth >= MAX_INLINE_DEPTH) return im_fail(im, KILN_ERR_UNSUPPORTED, "subgraphs nest more than %d deep", MAX_INLINE_DEPTH);
  if ((int)body->n_input != n_in || (int)body->n_output != n_out)
    return im_fail(im, KILN_ERR_MODEL, "subgraph '%s' has %zu inputs and %zu outputs, the node gives %d and wants %d",
                   body->name ? body->name : "", body->n_input, body->n_output, n_in, n_out);
  NameMap local = { 0 };
  local.parent = im->scope;
  kiln_status s = KILN_OK;
  for (int i = 0; i < n_in && !s; i++)
    if (body->input[i]->name && *body->input[i]->name) s = map_put(&im->tmp, &local, body->input[i]->name, ins[i]);
  Importer sub = *im;
  sub.scope = &local;
  sub.depth = im->depth + 1;
  const Onnx__NodeProto *node = im->node;
  const char *node_name = im->node_name;
  for (size_t i = 0; i < body->n_initializer && !s; i++) s = add_initializer(&sub, body->initializer[i]);
  if (!s) s = import_nodes(&sub, body->n_node, body->node);
  im->tmp = sub.tmp;
  im->seqs = sub.seqs, im->n_seqs = sub.n_seqs, im->cap_seqs = sub.cap_seqs;
  im->node = node, im->node_name = node_name, im->g->node_name = node_name;
  if (s) return s;
  for (int i = 0; i < n_out; i++) {
    const char *nm = body->output[i]->name;
    if ((outs[i] = nm && *nm ? map_get(&local, nm) : -1) == -1)
      return im_fail(im, KILN_ERR_MODEL, "subgraph output '%s' is not produced", nm ? nm : "");
  }
  return KILN_OK;
}

#define MAX_IO 64

/* A failure inside the node's rule, as the user reads it: the message names this node with
 * its ONNX op ("node 'n' (Gemm): ..."). Graph building names kiln's op instead ("node 'n'
 * (matmul): inner dims differ"); that becomes a word of the message. What graph building
 * calls a bad argument is, coming from a file, an inconsistent model. */
static kiln_status node_failed(Importer *im, const char *op, kiln_status s) {
  if (s == KILN_ERR_INVALID_ARG) s = KILN_ERR_MODEL;
  char msg[1024], head[512];
  snprintf(msg, sizeof msg, "%s", kiln_last_error());
  int n = snprintf(head, sizeof head, "node '%s' (", im->node_name);
  if (strncmp(msg, "node '", 6)) {
    kiln_error_prefix("node '%s' (%s): ", im->node_name, op);
    return s;
  }
  bool ours = n > 0 && (size_t)n < sizeof head && !strncmp(msg, head, (size_t)n);  /* this node, not one inside it */
  const char *kop = ours ? msg + n : NULL, *close = ours ? strstr(kop, "): ") : NULL;
  if (close && ((size_t)(close - kop) != strlen(op) || strncmp(kop, op, strlen(op))))  /* kiln's op, not ONNX's */
    kiln_fail(s, "node '%s' (%s): %.*s: %s", im->node_name, op, (int)(close - kop), kop, close + 3);
  return s;
}

/* The opset a node of domain is checked at: the current one for the default domain, the
 * model's import of any other (-1: none, the newest schema). */
static int node_opset(const Importer *im, const char *domain) {
  if (!*domain || !strcmp(domain, "ai.onnx")) return im->opset;
  return opset_of(im->model->n_opset_import, im->model->opset_import, domain);
}

static kiln_status import_node(Importer *im, const Onnx__NodeProto *nd) {
  const char *op = nd->op_type ? nd->op_type : "";
  const char *domain = nd->domain ? nd->domain : "";
  im->node = nd;
  im->node_name = nd->name && *nd->name ? nd->name : (nd->n_output && nd->output[0] && *nd->output[0] ? nd->output[0] : op);
  im->g->node_name = im->node_name;
  if (!*op) return im_fail(im, KILN_ERR_MODEL, "node without an op_type");
  if (--*im->budget < 0)  /* nested loops and functions could otherwise multiply without end */
    return im_fail(im, KILN_ERR_UNSUPPORTED, "the model unrolls to more than %ld nodes", (long)NODE_BUDGET);
  if (im->g->arena.used + im->tmp.used > im->mem_limit)  /* nor constants multiply beyond the file's size */
    return im_fail(im, KILN_ERR_UNSUPPORTED, "importing needs more than %zu MiB beyond the weights", im->mem_limit >> 20);
  if (nd->n_input > MAX_IO || nd->n_output > MAX_IO)
    return im_fail(im, KILN_ERR_UNSUPPORTED, "%zu inputs and %zu outputs: at most %d each", nd->n_input, nd->n_output, MAX_IO);
  const Onnx__FunctionProto *f = find_function(im, domain, op);
  kiln_status s = im_check_attrs(im, f ? NULL : domain, op, node_opset(im, domain));
  if (s) return s;
  int ins[MAX_IO], outs[MAX_IO];
  for (size_t i = 0; i < nd->n_input; i++) {
    const char *nm = nd->input[i];
    ins[i] = -1;
    if (!nm || !*nm) continue;  /* an omitted optional input */
    if ((ins[i] = map_get(im->scope, nm)) == -1)
      return im_fail(im, KILN_ERR_MODEL, "input '%s' is not defined before this node", nm);
  }
  for (size_t i = 0; i < nd->n_output; i++) outs[i] = -1;
  if (f) s = inline_function(im, f, ins, nd->n_input, outs, nd->n_output);
  else if (!strcmp(domain, "ai.onnx.preview.training") && !strcmp(op, "Gradient"))
    s = im_gradient(im, (int)nd->n_input, ins, (int)nd->n_output, outs);
  else if (!strcmp(domain, "ai.onnx.ml") && !strcmp(op, "LabelEncoder"))
    s = im_label_encoder(im, (int)nd->n_input, ins, (int)nd->n_output, outs);
  else if (*domain && strcmp(domain, "ai.onnx"))
    return im_fail(im, KILN_ERR_UNSUPPORTED, "operator domain '%s' is not supported", domain);
  else if (im->opset < 0)
    return im_fail(im, KILN_ERR_MODEL, "the model imports no opset for the default domain");
  else s = im_node(im, op, (int)nd->n_input, ins, (int)nd->n_output, outs);
  if (s) return node_failed(im, op, s);
  for (size_t i = 0; i < nd->n_output; i++) {
    const char *nm = nd->output[i];
    if (!nm || !*nm) continue;
    if (outs[i] == -1) return im_fail(im, KILN_ERR_UNSUPPORTED, "output %zu ('%s') is not supported", i, nm);
    if ((s = map_put(&im->tmp, im->scope, nm, outs[i]))) return s;
  }
  return KILN_OK;
}

static kiln_status import_nodes(Importer *im, size_t n, Onnx__NodeProto *const *nodes) {
  for (size_t i = 0; i < n; i++) {
    kiln_status s = import_node(im, nodes[i]);
    if (s) return s;
  }
  im->node = NULL;
  im->g->node_name = NULL;
  return KILN_OK;
}

/* The graph's outputs as declared, before any node is imported: each has a name and, where
 * it declares a tensor, an ONNX element type (no type, or a sequence: the nodes decide). */
static kiln_status check_outputs(const Onnx__GraphProto *gp) {
  if (!gp->n_output) return kiln_fail(KILN_ERR_MODEL, "the graph has no outputs");
  for (size_t i = 0; i < gp->n_output; i++) {
    const char *nm = gp->output[i]->name;
    if (!nm || !*nm) return kiln_fail(KILN_ERR_MODEL, "graph output %zu has no name", i);
    const Onnx__TypeProto__Tensor *tt = tensor_type(gp->output[i]);
    int32_t t = tt && tt->has_elem_type ? tt->elem_type : 0;
    if (tt && !t) return kiln_fail(KILN_ERR_MODEL, "output '%s': no element type (undefined, 0)", nm);
    if (tt && !onnx_elem_type_valid(t))
      return kiln_fail(KILN_ERR_MODEL, "output '%s': element type %d is not an ONNX type", nm, (int)t);
  }
  return KILN_OK;
}

static kiln_status mark_outputs(Importer *im, const Onnx__GraphProto *gp) {
  for (size_t i = 0; i < gp->n_output; i++) {
    const char *nm = gp->output[i]->name;
    int id = map_get(im->scope, nm);
    if (id == -1) return kiln_fail(KILN_ERR_MODEL, "graph output '%s' is not produced by any node", nm);
    if (id < 0) return kiln_fail(KILN_ERR_UNSUPPORTED, "graph output '%s' is a sequence; only tensors can leave", nm);
    kiln_status s = graph_output(im->g, id, nm);
    if (s) return s;
  }
  return KILN_OK;
}

static kiln_status import_graph(Importer *im, const Onnx__GraphProto *gp) {
  kiln_status s;
  int pos = 0;
  NameMap need = { 0 };
  if ((s = check_outputs(gp)) || (s = mark_needed(im, gp->n_node, gp->node, &need, 0)) || (s = check_bindings(im, gp)))
    return s;
  for (size_t i = 0; i < gp->n_input; i++) {
    const Onnx__ValueInfoProto *vi = gp->input[i];
    if (vi->name && is_initializer(gp, vi->name)) continue;  /* a default value, not an input */
    if ((s = add_input(im, vi, pos++, map_get(&need, vi->name ? vi->name : "") >= 0))) return s;
  }
  for (size_t i = 0; i < gp->n_initializer; i++)
    if ((s = add_initializer(im, gp->initializer[i]))) return s;
  if (gp->n_sparse_initializer) return kiln_fail(KILN_ERR_UNSUPPORTED, "sparse initializers are not supported");
  /* constants the nodes create (folded shapes, index maps) may grow to 4x the file plus 512 MiB */
  im->mem_limit = im->g->arena.used + im->tmp.used + 4 * im->file_size + ((size_t)512 << 20);
  if ((s = import_nodes(im, gp->n_node, gp->node))) return s;
  return mark_outputs(im, gp);
}

kiln_status graph_load_onnx_bound(const void *data, size_t size, const char *base_dir, const OnnxTensor *bind, int n_bind,
                                  Graph **out) {
  *out = NULL;
  if (!data && size) return kiln_fail(KILN_ERR_INVALID_ARG, "graph_load_onnx: data is NULL");
  if (!size) return kiln_fail(KILN_ERR_MODEL, "the model is empty (0 bytes)");
  Onnx__ModelProto *m;
  kiln_status s = unpack_model(data, size, &m);
  if (s) return s;
  Importer im = { 0 };
  NameMap top = { 0 };
  long budget = NODE_BUDGET;
  im.budget = &budget;
  im.file_size = size;
  im.mem_limit = SIZE_MAX;
  im.base_dir = base_dir, im.model = m, im.bind = bind, im.n_bind = n_bind, im.scope = &top;
  im.opset = opset_of(m->n_opset_import, m->opset_import, "");
  if (!m->graph && !m->has_ir_version && !m->n_opset_import)  /* protobuf, but none of a model's fields */
    s = kiln_fail(KILN_ERR_MODEL, "not an ONNX model: no graph, IR version or opset in %zu bytes", size);
  else if (!m->graph) s = kiln_fail(KILN_ERR_MODEL, "the model has no graph");
  else if (im.opset >= 0 && im.opset < 7) s = kiln_fail(KILN_ERR_UNSUPPORTED, "opset %d is older than 7", im.opset);
  else if (!(im.g = graph_create())) s = kiln_fail(KILN_ERR_NO_MEMORY, "out of memory");
  else s = import_graph(&im, m->graph);
  if (s && im.g) graph_free(im.g);
  else *out = im.g;
  arena_free(&im.tmp);
  kiln_free(im.seqs);
  onnx__model_proto__free_unpacked(m, &pb_allocator);
  return s;
}

/* One declared graph input or output into *t, its names copied into a. An input must be what
 * the import takes (input_type); an output may leave its type out. */
static kiln_status declared_tensor(const Onnx__ValueInfoProto *vi, bool input, Arena *a, kiln_model_tensor *t) {
  const char *kind = input ? "input" : "output";
  memset(t, 0, sizeof *t);
  t->dtype = t->rank = -1;
  const Onnx__TypeProto__Tensor *tt = NULL;
  kiln_dtype dt = KILN_F32;
  char what[300];
  snprintf(what, sizeof what, "%s '%s'", kind, vi->name ? vi->name : "");
  kiln_status s = KILN_OK;
  if (input) s = input_type(vi, &tt, &dt);
  else if (!vi->name || !*vi->name) s = kiln_fail(KILN_ERR_MODEL, "a graph output has no name");
  else if ((tt = tensor_type(vi)) && tt->has_elem_type) s = onnx_elem_type(tt->elem_type, what, &dt);
  if (s) return s;
  if (!(t->name = arena_strdup(a, vi->name))) return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory");
  if (!tt) return KILN_OK;
  if (input || tt->has_elem_type) t->dtype = (int)dt;
  if (!tt->shape) return KILN_OK;
  if (tt->shape->n_dim > KILN_MAX_RANK)
    return kiln_fail(KILN_ERR_UNSUPPORTED, "%s: rank %zu exceeds %d", what, tt->shape->n_dim, KILN_MAX_RANK);
  t->rank = (int)tt->shape->n_dim;
  for (int i = 0; i < t->rank; i++) {
    const Onnx__TensorShapeProto__Dimension *d = tt->shape->dim[i];
    const char *param = dim_param(d);
    t->shape[i] = -1;
    if (d->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE) {
      if (d->dim_value < 0)
        return kiln_fail(KILN_ERR_MODEL, "%s: dimension %d is negative (%lld)", what, i, (long long)d->dim_value);
      t->shape[i] = d->dim_value;
    } else if (param && !(t->dim_name[i] = arena_strdup(a, param))) {
      return kiln_fail(KILN_ERR_NO_MEMORY, "out of memory");
    }
  }
  return KILN_OK;
}

kiln_status onnx_declared_io(const void *data, size_t size, Arena *a, kiln_model_tensor **in, int *n_in,
                             kiln_model_tensor **out, int *n_out) {
  *in = *out = NULL, *n_in = *n_out = 0;
  if (!data && size) return kiln_fail(KILN_ERR_INVALID_ARG, "onnx_declared_io: data is NULL");
  if (!size) return kiln_fail(KILN_ERR_MODEL, "the model is empty (0 bytes)");
  Onnx__ModelProto *m;
  kiln_status s = unpack_model(data, size, &m);
  if (s) return s;
  const Onnx__GraphProto *gp = m->graph;
  size_t ni = 0;
  if (!gp) s = kiln_fail(KILN_ERR_MODEL, "the model has no graph");
  else if (gp->n_input > (size_t)INT_MAX / sizeof(kiln_model_tensor) ||
           gp->n_output > (size_t)INT_MAX / sizeof(kiln_model_tensor))
    s = kiln_fail(KILN_ERR_MODEL, "the graph declares %zu inputs and %zu outputs", gp->n_input, gp->n_output);
  else if ((gp->n_input && !(*in = arena_alloc(a, gp->n_input * sizeof **in))) ||
           (gp->n_output && !(*out = arena_alloc(a, gp->n_output * sizeof **out))))
    s = kiln_fail(KILN_ERR_NO_MEMORY, "out of memory (model inputs)");
  for (size_t i = 0; !s && i < gp->n_input; i++) {
    const Onnx__ValueInfoProto *vi = gp->input[i];
    if (vi->name && is_initializer(gp, vi->name)) continue;  /* a default value, not an input */
    s = declared_tensor(vi, true, a, &(*in)[ni++]);
  }
  for (size_t i = 0; !s && gp && i < gp->n_output; i++) s = declared_tensor(gp->output[i], false, a, &(*out)[i]);
  if (!s) *n_in = (int)ni, *n_out = (int)gp->n_output;
  onnx__model_proto__free_unpacked(m, &pb_allocator);
  return s;
}

/* The attribute check alone on nodes and the subgraphs in their attributes, at opset. */
static kiln_status check_attrs_in(Importer *im, size_t n, Onnx__NodeProto *const *nodes, int opset, int depth) {
  if (depth > MAX_NESTING) return KILN_OK;  /* the wire walk refused deeper files already */
  for (size_t i = 0; i < n; i++) {
    const Onnx__NodeProto *nd = nodes[i];
    const char *op = nd->op_type ? nd->op_type : "", *domain = nd->domain ? nd->domain : "";
    im->node = nd, im->node_name = nd->name && *nd->name ? nd->name : op, im->opset = opset;
    kiln_status s = im_check_attrs(im, find_function(im, domain, op) ? NULL : domain, op, node_opset(im, domain));
    for (size_t a = 0; !s && a < nd->n_attribute; a++) {
      const Onnx__AttributeProto *at = nd->attribute[a];
      if (at->g) s = check_attrs_in(im, at->g->n_node, at->g->node, opset, depth + 1);
      for (size_t k = 0; !s && k < at->n_graphs; k++)
        s = check_attrs_in(im, at->graphs[k]->n_node, at->graphs[k]->node, opset, depth + 1);
    }
    if (s) return s;
  }
  return KILN_OK;
}

kiln_status onnx_check_attrs(const void *data, size_t size) {
  Onnx__ModelProto *m;
  kiln_status s = unpack_model(data, size, &m);
  if (s) return s;
  Importer im = { 0 };
  im.model = m;
  int opset = opset_of(m->n_opset_import, m->opset_import, "");
  if (m->graph) s = check_attrs_in(&im, m->graph->n_node, m->graph->node, opset, 0);
  for (size_t i = 0; !s && i < m->n_functions; i++) {
    const Onnx__FunctionProto *f = m->functions[i];
    int v = opset_of(f->n_opset_import, f->opset_import, "");
    s = check_attrs_in(&im, f->n_node, f->node, v > 0 ? v : opset, 0);
  }
  onnx__model_proto__free_unpacked(m, &pb_allocator);
  return s;
}

kiln_status graph_load_onnx(const void *data, size_t size, const char *base_dir, Graph **out) {
  return graph_load_onnx_bound(data, size, base_dir, NULL, 0, out);
}

/* ---- public API ---- */

kiln_status kiln_graph_load_onnx_buffer(const void *data, size_t size, const char *base_dir, kiln_graph **out) {
  if (!out) return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_graph_load_onnx_buffer: out is NULL");
  Graph *g;
  kiln_status s = graph_load_onnx(data, size, base_dir, &g);
  *out = (kiln_graph *)g;
  return s;
}

/* Reads a whole file into kiln_malloc memory. */
kiln_status onnx_read_file(const char *path, void **data, size_t *size) {
  *data = NULL, *size = 0;
  struct stat st;
  int fd = open_regular(path, 0, &st);
  if (fd < 0) return kiln_fail(KILN_ERR_IO, "%s: cannot open: %s", path, errno == EINVAL ? "not a regular file" : strerror(errno));
  size_t n = (size_t)st.st_size;
  void *buf = kiln_malloc(n ? n : 1);
  if (!buf) {
    close(fd);
    return kiln_fail(KILN_ERR_NO_MEMORY, "%s: cannot allocate %zu bytes", path, n);
  }
  bool ok = read_at(fd, 0, buf, n);
  close(fd);
  if (!ok) {
    kiln_free(buf);
    return kiln_fail(KILN_ERR_IO, "%s: short read", path);
  }
  *data = buf, *size = n;
  return KILN_OK;
}

/* The folder of path ("." for a bare file name), into buf. */
void onnx_dirname(const char *path, char *buf, size_t cap) {
  const char *slash = strrchr(path, '/');
  if (!slash) snprintf(buf, cap, ".");
  else if (slash == path) snprintf(buf, cap, "/");
  else snprintf(buf, cap, "%.*s", (int)(slash - path), path);
}

/* The bytes of path and its folder (where its external data lives). */
static kiln_status read_with_dir(const char *path, void **data, size_t *size, char dir[PATH_MAX]) {
  kiln_status s = onnx_read_file(path, data, size);
  if (!s) onnx_dirname(path, dir, PATH_MAX);
  return s;
}

kiln_status onnx_read_tensor_file(const char *path, OnnxTensor *t) {
  memset(t, 0, sizeof *t);
  void *data;
  size_t size;
  char dir[PATH_MAX];
  kiln_status s = read_with_dir(path, &data, &size, dir);
  if (s) return s;
  if (!size) s = kiln_fail(KILN_ERR_MODEL, "%s: the file is empty", path);
  else if ((s = onnx_read_tensor(data, size, dir, t))) kiln_error_prefix("%s: ", path);
  kiln_free(data);
  return s;
}

kiln_status onnx_read_tensor_set(const char *dir, const char *prefix, int max, OnnxTensor *ts, int *n) {
  *n = 0;
  for (int i = 0; i < max; i++) {
    char path[PATH_MAX];
    struct stat st;
    if ((size_t)snprintf(path, sizeof path, "%s/%s_%d.pb", dir, prefix, i) >= sizeof path)
      return kiln_fail(KILN_ERR_INVALID_ARG, "test data folder path too long: '%s'", dir);
    if (stat(path, &st) != 0) break;
    kiln_status s = onnx_read_tensor_file(path, &ts[i]);
    if (s) return s;
    *n = i + 1;
  }
  return KILN_OK;
}

kiln_status graph_load_onnx_file(const char *path, const OnnxTensor *bind, int n_bind, Graph **out) {
  *out = NULL;
  void *data;
  size_t size;
  char dir[PATH_MAX];
  kiln_status s = read_with_dir(path, &data, &size, dir);
  if (s) return s;
  if (!size) s = kiln_fail(KILN_ERR_MODEL, "%s: the file is empty", path);
  else if ((s = graph_load_onnx_bound(data, size, dir, bind, n_bind, out))) kiln_error_prefix("%s: ", path);
  kiln_free(data);
  return s;
}

kiln_status kiln_graph_load_onnx(const char *path, kiln_graph **out) {
  if (!path || !out) return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_graph_load_onnx: %s is NULL", path ? "out" : "path");
  Graph *g;
  kiln_status s = graph_load_onnx_file(path, NULL, 0, &g);
  *out = (kiln_graph *)g;
  return s;
}
