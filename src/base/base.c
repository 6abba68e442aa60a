/*
 * base.c — errors, allocation, arenas, checked sizes, dtypes, half floats,
 * hashing and string building. Small, dependency-free utilities.
 */
#include "base.h"
#include "scalar.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- errors ---- */

static _Thread_local char last_error[1024];

void kiln_die(const char *file, int line, const char *what) {
  fprintf(stderr, "kiln: internal error at %s:%d: %s\n", file, line, what);
  abort();
}

kiln_status kiln_vfail(kiln_status s, const char *fmt, va_list ap) {
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  return s;
}

kiln_status kiln_fail(kiln_status s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  kiln_vfail(s, fmt, ap);
  va_end(ap);
  return s;
}

void kiln_error_prefix(const char *fmt, ...) {
  char head[512], old[sizeof last_error];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(head, sizeof head, fmt, ap);
  va_end(ap);
  memcpy(old, last_error, sizeof old);
  size_t n = strlen(head);
  if (n >= sizeof last_error) n = sizeof last_error - 1;
  memcpy(last_error, head, n);
  size_t m = strlen(old);
  if (m > sizeof last_error - 1 - n) m = sizeof last_error - 1 - n;
  memcpy(last_error + n, old, m);
  last_error[n + m] = 0;
}

const char *kiln_last_error(void) { return last_error; }

const char *kiln_status_name(kiln_status s) {
  switch (s) {
  case KILN_OK: return "ok";
  case KILN_ERR_INVALID_ARG: return "invalid argument";
  case KILN_ERR_MODEL: return "bad model";
  case KILN_ERR_UNSUPPORTED: return "unsupported";
  case KILN_ERR_NO_MEMORY: return "out of memory";
  case KILN_ERR_DEVICE: return "device error";
  case KILN_ERR_COMPILE: return "compile error";
  case KILN_ERR_FALLBACK: return "host fallback in strict mode";
  case KILN_ERR_IO: return "i/o error";
  }
  return "unknown status";
}

int kiln_env_int(const char *name, int dflt) {
  const char *v = getenv(name);
  if (!v || !*v) return dflt;
  return atoi(v);
}

/* ---- allocation ---- */

static long alloc_countdown; /* 0: off; else fail when it reaches 1 and stay failing */

static bool alloc_should_fail(void) {
  if (alloc_countdown == 0) return false;
  if (alloc_countdown == 1) return true;
  alloc_countdown--;
  return false;
}

void kiln_alloc_fail_after(long n) { alloc_countdown = n < 0 ? 0 : n; }

void *kiln_malloc(size_t n) { return alloc_should_fail() ? NULL : malloc(n ? n : 1); }
void *kiln_calloc(size_t c, size_t s) { return alloc_should_fail() ? NULL : calloc(c ? c : 1, s ? s : 1); }
void *kiln_realloc(void *p, size_t n) { return alloc_should_fail() ? NULL : realloc(p, n ? n : 1); }
void kiln_free(void *p) { free(p); }

char *kiln_strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *d = kiln_malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

/* ---- arenas ---- */

struct ArenaBlock { ArenaBlock *next; size_t cap, used; _Alignas(16) unsigned char data[]; };

void *arena_alloc(Arena *a, size_t n) {
  n = (n + 15) & ~(size_t)15;
  if (n == 0) n = 16;
  ArenaBlock *b = a->head;
  if (!b || b->cap - b->used < n) {
    size_t cap = n > 65536 ? n : 65536;
    if (cap > SIZE_MAX - sizeof(ArenaBlock)) return NULL;
    b = kiln_malloc(sizeof(ArenaBlock) + cap);
    if (!b) return NULL;
    b->next = a->head;
    b->cap = cap;
    b->used = 0;
    a->head = b;
  }
  void *p = b->data + b->used;
  b->used += n;
  a->used += n;
  memset(p, 0, n);
  return p;
}

char *arena_strdup(Arena *a, const char *s) {
  size_t n = strlen(s) + 1;
  char *d = arena_alloc(a, n);
  if (d) memcpy(d, s, n);
  return d;
}

const char **arena_strings(Arena *a, const char *const *src, int64_t n) {
  const char **d = arena_alloc(a, sizeof *d * (size_t)(n > 0 ? n : 1));
  for (int64_t i = 0; d && i < n; i++)
    if (!(d[i] = arena_strdup(a, src[i] ? src[i] : ""))) return NULL;
  return d;
}

void arena_free(Arena *a) {
  for (ArenaBlock *b = a->head, *next; b; b = next) {
    next = b->next;
    kiln_free(b);
  }
  a->head = NULL;
  a->used = 0;
}

/* ---- checked sizes ---- */

bool size_mul(int64_t a, int64_t b, int64_t *out) {
  if (a < 0 || b < 0) return false;
  return !__builtin_mul_overflow(a, b, out);
}

bool size_add(int64_t a, int64_t b, int64_t *out) {
  if (a < 0 || b < 0) return false;
  return !__builtin_add_overflow(a, b, out);
}

bool shape_numel(int rank, const int64_t *shape, int64_t *out) {
  int64_t n = 1;
  for (int i = 0; i < rank; i++)
    if (!size_mul(n, shape[i], &n)) return false;
  *out = n;
  return true;
}

/* ---- dtypes ---- */

static const char *const dtype_names[KILN_DTYPE_COUNT] = {
  "f32", "f64", "f16", "bf16", "i64", "i32", "i16", "i8", "u8", "u16", "u32", "u64", "bool", "string",
};
static const size_t dtype_sizes[KILN_DTYPE_COUNT] = { 4, 8, 2, 2, 8, 4, 2, 1, 1, 2, 4, 8, 1, sizeof(const char *) };
_Static_assert(KILN_DTYPE_COUNT == 14, "update dtype_names and dtype_sizes");

bool dtype_valid(int t) { return t >= 0 && t < KILN_DTYPE_COUNT; }
const char *kiln_dtype_name(kiln_dtype t) { return dtype_valid(t) ? dtype_names[t] : "?"; }
size_t kiln_dtype_size(kiln_dtype t) { return dtype_valid(t) ? dtype_sizes[t] : 0; }
bool dtype_is_float(kiln_dtype t) { return t == KILN_F32 || t == KILN_F64 || t == KILN_F16 || t == KILN_BF16; }
bool dtype_is_int(kiln_dtype t) { return t >= KILN_I64 && t <= KILN_U64; }
bool dtype_is_signed(kiln_dtype t) { return dtype_is_float(t) || (t >= KILN_I64 && t <= KILN_I8); }

double dtype_load_f64(kiln_dtype t, const void *p, int64_t i) {
  switch (t) {
  case KILN_F32: return ((const float *)p)[i];
  case KILN_F64: return ((const double *)p)[i];
  case KILN_F16: return half_to_float(((const uint16_t *)p)[i]);
  case KILN_BF16: return bf16_to_float(((const uint16_t *)p)[i]);
  case KILN_I64: return (double)((const int64_t *)p)[i];
  case KILN_I32: return ((const int32_t *)p)[i];
  case KILN_I16: return ((const int16_t *)p)[i];
  case KILN_I8: return ((const int8_t *)p)[i];
  case KILN_U8: return ((const uint8_t *)p)[i];
  case KILN_U16: return ((const uint16_t *)p)[i];
  case KILN_U32: return ((const uint32_t *)p)[i];
  case KILN_U64: return (double)((const uint64_t *)p)[i];
  case KILN_BOOL: return ((const uint8_t *)p)[i] != 0;
  case KILN_STRING: return 0;  /* not a number: callers check for strings first */
  default: KILN_ASSERT(!"bad dtype");
  }
  return 0;
}

/* Float to int64 without UB: NaN gives 0, out of range saturates. */
static int64_t f64_to_i64(double v) {
  if (v != v) return 0;
  if (v >= 9223372036854775807.0) return INT64_MAX;
  if (v <= -9223372036854775808.0) return INT64_MIN;
  return (int64_t)v;
}

int64_t dtype_load_i64(kiln_dtype t, const void *p, int64_t i) {
  switch (t) {
  case KILN_I64: return ((const int64_t *)p)[i];
  case KILN_U64: return (int64_t)((const uint64_t *)p)[i];
  case KILN_I32: return ((const int32_t *)p)[i];
  case KILN_I16: return ((const int16_t *)p)[i];
  case KILN_I8: return ((const int8_t *)p)[i];
  case KILN_U8: return ((const uint8_t *)p)[i];
  case KILN_U16: return ((const uint16_t *)p)[i];
  case KILN_U32: return ((const uint32_t *)p)[i];
  case KILN_BOOL: return ((const uint8_t *)p)[i] != 0;
  case KILN_STRING: return (int64_t)(intptr_t)((const char *const *)p)[i];  /* the pointer, moved as a value */
  default: return f64_to_i64(dtype_load_f64(t, p, i));
  }
}

void dtype_store_f64(kiln_dtype t, void *p, int64_t i, double v) {
  switch (t) {
  case KILN_F32: ((float *)p)[i] = (float)v; return;
  case KILN_F64: ((double *)p)[i] = v; return;
  case KILN_F16: ((uint16_t *)p)[i] = float_to_half((float)v); return;
  case KILN_BF16: ((uint16_t *)p)[i] = float_to_bf16((float)v); return;
  case KILN_BOOL: ((uint8_t *)p)[i] = v != 0; return;
  case KILN_STRING: ((const char **)p)[i] = NULL; return;  /* no number is a string */
  case KILN_U64:
    ((uint64_t *)p)[i] = v != v || v <= 0 ? 0 : v >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)v;
    return;
  default: dtype_store_i64(t, p, i, f64_to_i64(v)); return;
  }
}

void dtype_store_i64(kiln_dtype t, void *p, int64_t i, int64_t v) {
  switch (t) {
  case KILN_I64: ((int64_t *)p)[i] = v; return;
  case KILN_U64: ((uint64_t *)p)[i] = (uint64_t)v; return;
  case KILN_I32: ((int32_t *)p)[i] = (int32_t)(uint32_t)v; return;  /* wraps, as C on two's complement */
  case KILN_I16: ((int16_t *)p)[i] = (int16_t)(uint16_t)v; return;
  case KILN_I8: ((int8_t *)p)[i] = (int8_t)(uint8_t)v; return;
  case KILN_U8: ((uint8_t *)p)[i] = (uint8_t)v; return;
  case KILN_U16: ((uint16_t *)p)[i] = (uint16_t)v; return;
  case KILN_U32: ((uint32_t *)p)[i] = (uint32_t)v; return;
  case KILN_BOOL: ((uint8_t *)p)[i] = v != 0; return;
  case KILN_STRING: ((const char **)p)[i] = (const char *)(intptr_t)v; return;
  default: dtype_store_f64(t, p, i, (double)v); return;
  }
}

/* ---- half precision: the shared definitions (scalar.inc) ---- */

float half_to_float(uint16_t h) { return k_h2f(h); }
uint16_t float_to_half(float f) { return k_f2h(f); }
float bf16_to_float(uint16_t h) { return k_b2f(h); }
uint16_t float_to_bf16(float f) { return k_f2b(f); }

/* ---- hashing (FNV-1a, 64-bit) ---- */

uint64_t hash_bytes(const void *p, size_t n, uint64_t seed) {
  const unsigned char *c = p;
  uint64_t h = seed ^ 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 1099511628211ull;
  return h;
}

/* ---- string builder ---- */

static void sb_reserve(StrBuf *b, size_t extra) {
  if (b->failed) return;
  if (b->len + extra + 1 <= b->cap) return;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + extra + 1) cap *= 2;
  char *s = kiln_realloc(b->s, cap);
  if (!s) { b->failed = true; return; }
  b->s = s;
  b->cap = cap;
}

void sb_printf(StrBuf *b, const char *fmt, ...) {
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) { b->failed = true; va_end(ap2); return; }
  sb_reserve(b, (size_t)n);
  if (!b->failed) {
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap2);
    b->len += (size_t)n;
  }
  va_end(ap2);
}

void sb_puts(StrBuf *b, const char *s) {
  size_t n = strlen(s);
  sb_reserve(b, n);
  if (b->failed) return;
  memcpy(b->s + b->len, s, n + 1);
  b->len += n;
}

void sb_free(StrBuf *b) {
  kiln_free(b->s);
  *b = (StrBuf){0};
}
