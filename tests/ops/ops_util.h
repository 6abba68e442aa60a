/*
 * ops_util.h — shared helpers for the per-op tests in tests/ops. Only the public API
 * (kiln.h) is used to build and run graphs; expected values are computed by the tests
 * themselves (naive loops, hand-derived numbers). This header supplies:
 *   - host tensors of any dtype filled from doubles (our own f16/bf16 rounding, written
 *     here from the IEEE definitions, independent of src/base);
 *   - a Case: a small graph of inputs + ops, compiled and run on the backend named by
 *     $KILN_TEST_BACKEND (default "ref"); on non-ref backends the census must show no
 *     host fallbacks;
 *   - comparisons that name the case and the first mismatching element, treat NaN as
 *     equal to NaN, and can demand exact bits (for -0.0 and casts);
 *   - known bugs: a case marked with cs_known_bug() prints "KNOWN BUG: ..." instead of
 *     failing, so a bug in another stage stays documented without breaking the suite.
 */
#ifndef KILN_OPS_UTIL_H
#define KILN_OPS_UTIL_H

#include "test.h"

#include <float.h>
#include <stdarg.h>
#include <stdint.h>

#define OU_MAX_IN 16
#define OU_MAX_OUT 8

static int ou_cases;        /* cases run */
static int ou_known_hits;   /* known-bug cases that reproduced */
static int ou_unsupported;  /* cases the backend refused for a missing capability (listed) */
static int ou_verbose = -1; /* $KILN_TEST_VERBOSE */

static inline const char *ou_backend(void) {
  const char *b = getenv("KILN_TEST_BACKEND");
  return b && b[0] ? b : "ref";
}

/* Does the backend round a 16-bit value once, where it is stored, not after each operation
 * (kiln_options.excess_precision, from $KILN_EXCESS_PRECISION)? ref always rounds each. */
static inline int ou_excess(void) { return test_rounds_once(ou_backend()); }

static inline int ou_is_float(kiln_dtype t) {
  return t == KILN_F32 || t == KILN_F64 || t == KILN_F16 || t == KILN_BF16;
}
static inline int ou_is_unsigned(kiln_dtype t) {
  return t == KILN_U8 || t == KILN_U16 || t == KILN_U32 || t == KILN_U64;
}
static inline int ou_is_int(kiln_dtype t) { return !ou_is_float(t) && t != KILN_BOOL; }
static inline int ou_bits(kiln_dtype t) {
  switch (t) {
  case KILN_I8: case KILN_U8: case KILN_BOOL: return 8;
  case KILN_I16: case KILN_U16: case KILN_F16: case KILN_BF16: return 16;
  case KILN_I32: case KILN_U32: case KILN_F32: return 32;
  default: return 64;
  }
}
static inline size_t ou_size(kiln_dtype t) { return (size_t)ou_bits(t) / 8; }

static const kiln_dtype ou_all_dtypes[13] = {KILN_F32, KILN_F64, KILN_F16, KILN_BF16, KILN_I64,
                                             KILN_I32, KILN_I16, KILN_I8,  KILN_U8,   KILN_U16,
                                             KILN_U32, KILN_U64, KILN_BOOL};
static const kiln_dtype ou_float_dtypes[4] = {KILN_F32, KILN_F64, KILN_F16, KILN_BF16};
static const kiln_dtype ou_int_dtypes[8] = {KILN_I64, KILN_I32, KILN_I16, KILN_I8,
                                            KILN_U8,  KILN_U16, KILN_U32, KILN_U64};
static const char *const ou_dtype_str[13] = {"f32", "f64", "f16", "bf16", "i64", "i32", "i16",
                                             "i8",  "u8",  "u16", "u32", "u64", "bool"};
static inline const char *ou_dt(kiln_dtype t) { return (unsigned)t < 13 ? ou_dtype_str[t] : "?"; }

/* ---- half floats, from the definitions ---------------------------------------------- */

/* Rounds x to a binary float with p significand bits, minimum normal exponent emin and
 * overflow to inf at 2^(emax+1), to nearest even (the default rounding mode). */
static inline double ou_round_fmt(double x, int p, int emin, int emax) {
  if (isnan(x) || isinf(x) || x == 0) return x;
  int e;
  frexp(fabs(x), &e); /* |x| = m * 2^e, m in [0.5, 1): exponent of the leading bit is e-1 */
  int lead = e - 1 < emin ? emin : e - 1;
  double q = ldexp(1.0, lead - (p - 1));
  double r = nearbyint(x / q) * q;
  if (fabs(r) >= ldexp(1.0, emax + 1)) return x > 0 ? INFINITY : -INFINITY;
  return r;
}
static inline double ou_round_f16(double x) { return ou_round_fmt(x, 11, -14, 15); }
static inline double ou_round_bf16(double x) { return ou_round_fmt((double)(float)x, 8, -126, 127); }
static inline double ou_round_f32(double x) { return (double)(float)x; }
/* Rounds a double to what a tensor of dtype t can hold (floats only). */
static inline double ou_round_to(kiln_dtype t, double x) {
  switch (t) {
  case KILN_F16: return ou_round_f16(x);
  case KILN_BF16: return ou_round_bf16(x);
  case KILN_F32: return ou_round_f32(x);
  default: return x;
  }
}

/* Encodes a value already representable in f16 (or inf/nan). */
static inline uint16_t ou_f16_bits(double r) {
  if (isnan(r)) return 0x7e00;
  uint16_t s = signbit(r) ? 0x8000 : 0;
  double a = fabs(r);
  if (isinf(a)) return s | 0x7c00;
  if (a == 0) return s;
  int e;
  frexp(a, &e);
  e -= 1;
  if (e < -14) return s | (uint16_t)(a / ldexp(1.0, -24)); /* subnormal: multiples of 2^-24 */
  return s | (uint16_t)((e + 15) << 10) | (uint16_t)((a / ldexp(1.0, e) - 1.0) * 1024.0);
}
static inline double ou_f16_value(uint16_t h) {
  int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  double v;
  if (e == 31) v = m ? NAN : INFINITY;
  else if (e == 0) v = ldexp((double)m, -24);
  else v = ldexp(1.0 + m / 1024.0, e - 15);
  return s ? -v : v;
}
static inline uint16_t ou_bf16_bits(double r) {
  float f = (float)r;
  uint32_t u;
  memcpy(&u, &f, 4);
  if (isnan(r)) return 0x7fc0;
  return (uint16_t)(u >> 16);
}
static inline double ou_bf16_value(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

/* ---- element access ------------------------------------------------------------------- */

/* Stores v (already a value of t's range for ints; rounded here for halves). */
static inline void ou_store(kiln_dtype t, void *p, int64_t i, double v) {
  switch (t) {
  case KILN_F32: ((float *)p)[i] = (float)v; break;
  case KILN_F64: ((double *)p)[i] = v; break;
  case KILN_F16: ((uint16_t *)p)[i] = ou_f16_bits(ou_round_f16(v)); break;
  case KILN_BF16: ((uint16_t *)p)[i] = ou_bf16_bits(ou_round_bf16(v)); break;
  case KILN_I64: ((int64_t *)p)[i] = (int64_t)v; break;
  case KILN_I32: ((int32_t *)p)[i] = (int32_t)v; break;
  case KILN_I16: ((int16_t *)p)[i] = (int16_t)v; break;
  case KILN_I8: ((int8_t *)p)[i] = (int8_t)v; break;
  case KILN_U8: ((uint8_t *)p)[i] = (uint8_t)v; break;
  case KILN_U16: ((uint16_t *)p)[i] = (uint16_t)v; break;
  case KILN_U32: ((uint32_t *)p)[i] = (uint32_t)v; break;
  case KILN_U64: ((uint64_t *)p)[i] = (uint64_t)v; break;
  case KILN_BOOL: ((uint8_t *)p)[i] = v != 0; break;
  default: break;
  }
}
static inline double ou_load(kiln_dtype t, const void *p, int64_t i) {
  switch (t) {
  case KILN_F32: return ((const float *)p)[i];
  case KILN_F64: return ((const double *)p)[i];
  case KILN_F16: return ou_f16_value(((const uint16_t *)p)[i]);
  case KILN_BF16: return ou_bf16_value(((const uint16_t *)p)[i]);
  case KILN_I64: return (double)((const int64_t *)p)[i];
  case KILN_I32: return ((const int32_t *)p)[i];
  case KILN_I16: return ((const int16_t *)p)[i];
  case KILN_I8: return ((const int8_t *)p)[i];
  case KILN_U8: return ((const uint8_t *)p)[i];
  case KILN_U16: return ((const uint16_t *)p)[i];
  case KILN_U32: return ((const uint32_t *)p)[i];
  case KILN_U64: return (double)((const uint64_t *)p)[i];
  case KILN_BOOL: return ((const uint8_t *)p)[i];
  default: return NAN;
  }
}
/* v as a tensor of dtype t holds it (rounded, truncated, or != 0 for bool). */
static inline double ou_as(kiln_dtype t, double v) {
  uint64_t buf = 0;
  ou_store(t, &buf, 0, v);
  return ou_load(t, &buf, 0);
}
/* The raw bits of element i, zero-extended (exact comparisons, ints beyond 2^53). */
static inline uint64_t ou_raw(kiln_dtype t, const void *p, int64_t i) {
  uint64_t u = 0;
  memcpy(&u, (const char *)p + (size_t)i * ou_size(t), ou_size(t));
  return u;
}
static inline void ou_set_raw(kiln_dtype t, void *p, int64_t i, uint64_t u) {
  memcpy((char *)p + (size_t)i * ou_size(t), &u, ou_size(t)); /* little-endian host */
}

static inline int64_t ou_numel(int rank, const int64_t *shape) {
  int64_t n = 1;
  for (int i = 0; i < rank; i++) n *= shape[i];
  return n;
}

/* Multi-index of flat index i (row-major). */
static inline void ou_unravel(int64_t i, int rank, const int64_t *shape, int64_t *idx) {
  for (int d = rank - 1; d >= 0; d--) {
    idx[d] = shape[d] ? i % shape[d] : 0;
    i = shape[d] ? i / shape[d] : 0;
  }
}
/* Flat offset into a tensor of (rank, shape) broadcast (NumPy rules) to an output index
 * idx of rank out_rank: leading dims missing, size-1 dims read index 0. */
static inline int64_t ou_bcast_offset(int out_rank, const int64_t *idx, int rank, const int64_t *shape) {
  int64_t off = 0;
  for (int d = 0; d < rank; d++) {
    int64_t j = shape[d] == 1 ? 0 : idx[out_rank - rank + d];
    off = off * shape[d] + j;
  }
  return off;
}

/* ---- a case: graph, inputs, run, results ---------------------------------------------- */

typedef struct OuVal {
  kiln_dtype t;
  int rank;
  int64_t shape[KILN_MAX_RANK];
  int64_t n;
  void *p;      /* raw elements */
} OuVal;

typedef struct Case {
  char name[200];
  kiln_graph *g;
  int n_in;
  kiln_tensor in[OU_MAX_IN];
  void *in_data[OU_MAX_IN];
  int n_out;
  OuVal out[OU_MAX_OUT];
  const char *known_bug; /* set: failures print KNOWN BUG and do not count */
  int failed;
  int build_failed;
} Case;

static inline void cs_fail(Case *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void cs_fail(Case *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (c->known_bug) {
    if (!c->failed) ou_known_hits++;
    fprintf(stderr, "KNOWN BUG: %s [%s]: ", c->known_bug, c->name);
  } else {
    test_failures++;
    fprintf(stderr, "FAIL [%s]: ", c->name);
  }
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  c->failed = 1;
}

static inline void cs_begin(Case *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void cs_begin(Case *c, const char *fmt, ...) {
  memset(c, 0, sizeof *c);
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->name, sizeof c->name, fmt, ap);
  va_end(ap);
  if (ou_verbose < 0) ou_verbose = getenv("KILN_TEST_VERBOSE") ? 1 : 0;
  if (ou_verbose) fprintf(stderr, "case %s\n", c->name);
  ou_cases++;
  kiln_status s = kiln_graph_create(&c->g);
  if (s != KILN_OK) cs_fail(c, "kiln_graph_create -> %s: %s", kiln_status_name(s), kiln_last_error());
}

/* Marks the case as reproducing a known bug in another part of kiln. */
static inline void cs_known_bug(Case *c, const char *what) { c->known_bug = what; }

static inline void cs_end(Case *c) {
  if (c->known_bug && !c->failed)
    fprintf(stderr, "note: known bug no longer reproduces (remove the mark): %s [%s]\n", c->known_bug, c->name);
  for (int i = 0; i < c->n_in; i++) free(c->in_data[i]);
  for (int i = 0; i < c->n_out; i++) free(c->out[i].p);
  kiln_graph_free(c->g);
  c->g = NULL;
}

/* A builder call inside a case that must succeed. */
#define COK(c, call) \
  do { kiln_status st_ = (call); \
       if (st_ != KILN_OK) { (c)->build_failed = 1; \
         cs_fail((c), "%s:%d: %s -> %s: %s", __FILE__, __LINE__, #call, kiln_status_name(st_), kiln_last_error()); } \
  } while (0)
/* A builder call inside a case that must fail with status s and leave a message. */
#define CERR(c, s, call) \
  do { kiln_status st_ = (call); \
       if (st_ != (s) || !kiln_last_error() || !kiln_last_error()[0]) \
         cs_fail((c), "%s:%d: %s -> %s, expected %s", __FILE__, __LINE__, #call, kiln_status_name(st_), kiln_status_name(s)); \
       else if (ou_verbose) fprintf(stderr, "  expected error: %s\n", kiln_last_error()); \
  } while (0)
/* Must fail with either status (specs that allow both, e.g. overflowing sizes). */
#define CERR2(c, s1, s2, call) \
  do { kiln_status st_ = (call); \
       if ((st_ != (s1) && st_ != (s2)) || !kiln_last_error() || !kiln_last_error()[0]) \
         cs_fail((c), "%s:%d: %s -> %s, expected %s or %s", __FILE__, __LINE__, #call, kiln_status_name(st_), \
                 kiln_status_name(s1), kiln_status_name(s2)); \
       else if (ou_verbose) fprintf(stderr, "  expected error: %s\n", kiln_last_error()); \
  } while (0)

/* A graph input with data; vals (numel doubles, NULL: zeros) converted to t. */
static inline kiln_tensor cs_in(Case *c, kiln_dtype t, int rank, const int64_t *shape, const double *vals) {
  if (!c->g || c->n_in >= OU_MAX_IN) { cs_fail(c, "too many inputs"); return -1; }
  int64_t n = ou_numel(rank, shape);
  void *p = calloc(n > 0 ? (size_t)n : 1, ou_size(t));
  if (!p) { cs_fail(c, "out of memory"); return -1; }
  for (int64_t i = 0; vals && i < n; i++) ou_store(t, p, i, vals[i]);
  kiln_tensor x = -1;
  char nm[16];
  snprintf(nm, sizeof nm, "in%d", c->n_in);
  kiln_status s = kiln_graph_input(c->g, nm, t, rank, shape, &x);
  if (s != KILN_OK) {
    free(p);
    c->build_failed = 1;
    cs_fail(c, "kiln_graph_input(%s) -> %s: %s", ou_dt(t), kiln_status_name(s), kiln_last_error());
    return -1;
  }
  c->in[c->n_in] = x;
  c->in_data[c->n_in++] = p;
  return x;
}
/* A graph input whose raw element bits are given (exact ints, NaN payloads, -0.0). */
static inline kiln_tensor cs_in_raw(Case *c, kiln_dtype t, int rank, const int64_t *shape, const uint64_t *raw) {
  kiln_tensor x = cs_in(c, t, rank, shape, NULL);
  if (x < 0) return x;
  int64_t n = ou_numel(rank, shape);
  for (int64_t i = 0; i < n; i++) ou_set_raw(t, c->in_data[c->n_in - 1], i, raw[i]);
  return x;
}
/* A constant leaf with values converted to t. */
static inline kiln_tensor cs_const(Case *c, kiln_dtype t, int rank, const int64_t *shape, const double *vals) {
  int64_t n = ou_numel(rank, shape);
  void *p = calloc(n > 0 ? (size_t)n : 1, ou_size(t));
  kiln_tensor x = -1;
  if (!p) { cs_fail(c, "out of memory"); return -1; }
  for (int64_t i = 0; i < n; i++) ou_store(t, p, i, vals[i]);
  COK(c, kiln_graph_const(c->g, t, rank, shape, p, &x));
  free(p);
  return x;
}

/* Marks outs as outputs, compiles, runs once; results land in c->out[]. 1 on success. */
static inline int cs_run(Case *c, int n_out, const kiln_tensor *outs) {
  if (c->build_failed || !c->g) return 0;
  if (n_out > OU_MAX_OUT) { cs_fail(c, "too many outputs"); return 0; }
  for (int k = 0; k < n_out; k++) {
    OuVal *o = &c->out[k];
    kiln_status s = kiln_tensor_dtype(c->g, outs[k], &o->t);
    if (s == KILN_OK) s = kiln_tensor_shape(c->g, outs[k], &o->rank, o->shape);
    if (s == KILN_OK) s = kiln_graph_output(c->g, outs[k], NULL);
    if (s != KILN_OK) { cs_fail(c, "output %d: %s: %s", k, kiln_status_name(s), kiln_last_error()); return 0; }
    if (o->rank < 0 || o->rank > KILN_MAX_RANK || (unsigned)o->t >= 13) {
      cs_fail(c, "output %d: bad rank %d / dtype %d", k, o->rank, (int)o->t);
      return 0;
    }
    o->n = ou_numel(o->rank, o->shape);
    o->p = calloc(o->n > 0 ? (size_t)o->n : 1, ou_size(o->t));
    /* poison: a kernel that skips elements shows up as a mismatch */
    if (o->p) memset(o->p, 0xA5, (size_t)(o->n > 0 ? o->n : 0) * ou_size(o->t));
    c->n_out = k + 1;
  }
  kiln_options opt = kiln_options_default();
  opt.backend = ou_backend();
  kiln_program *p = NULL;
  kiln_status s = kiln_program_compile(c->g, &opt, &p);
  /* a device without the op (f64 exp on Vulkan) refuses it by name: listed, not failed */
  if (s == KILN_ERR_UNSUPPORTED && strstr(kiln_last_error(), "(a missing capability)")) {
    printf("UNSUPPORTED [%s] on %s: %s\n", c->name, opt.backend, kiln_last_error());
    ou_unsupported++;
    return 0;
  }
  if (s != KILN_OK) { cs_fail(c, "compile on %s -> %s: %s", opt.backend, kiln_status_name(s), kiln_last_error()); return 0; }
  const void *ins[OU_MAX_IN];
  void *outp[OU_MAX_OUT];
  for (int i = 0; i < c->n_in; i++) ins[i] = c->in_data[i];
  for (int k = 0; k < n_out; k++) outp[k] = c->out[k].p;
  s = kiln_program_run(p, ins, outp);
  int ok = s == KILN_OK;
  if (!ok) cs_fail(c, "run on %s -> %s: %s", opt.backend, kiln_status_name(s), kiln_last_error());
  kiln_census cen;
  memset(&cen, 0, sizeof cen);
  if (ok && kiln_program_census(p, &cen) == KILN_OK) {
    if (cen.runs != 1) cs_fail(c, "census runs = %lld, expected 1", (long long)cen.runs);
    if (strcmp(opt.backend, "ref") != 0 && cen.host_fallbacks != 0)
      cs_fail(c, "backend %s: %lld host fallbacks (%s)", opt.backend, (long long)cen.host_fallbacks, cen.fallback_ops);
  } else if (ok) {
    cs_fail(c, "census: %s", kiln_last_error());
  }
  kiln_program_free(p);
  return ok;
}
static inline int cs_run1(Case *c, kiln_tensor out) { return cs_run(c, 1, &out); }

/* ---- comparisons ------------------------------------------------------------------------ */

static inline void ou_tol(kiln_dtype t, double *atol, double *rtol) {
  switch (t) {
  case KILN_F64: *atol = 1e-12; *rtol = 1e-12; break;
  case KILN_F32: *atol = 1e-6; *rtol = 2e-6; break;
  case KILN_F16: *atol = 1e-4; *rtol = 1e-3; break;
  case KILN_BF16: *atol = 1e-3; *rtol = 8e-3; break;
  default: *atol = 0; *rtol = 0; break;
  }
}

/* Equal within tolerance; NaN matches NaN; infinities must match exactly. */
static inline int ou_close(double got, double want, double atol, double rtol) {
  if (isnan(want)) return isnan(got);
  if (isinf(want) || isinf(got)) return got == want;
  return fabs(got - want) <= atol + rtol * fabs(want);
}

static inline int cs_check_meta(Case *c, int k, kiln_dtype t, int rank, const int64_t *shape) {
  if (k >= c->n_out) { cs_fail(c, "no output %d", k); return 0; }
  OuVal *o = &c->out[k];
  if (o->t != t) { cs_fail(c, "output %d dtype %s, expected %s", k, ou_dt(o->t), ou_dt(t)); return 0; }
  int same = o->rank == rank;
  for (int i = 0; same && i < rank; i++) same = o->shape[i] == shape[i];
  if (!same) {
    char a[128] = "", b[128] = "";
    for (int i = 0; i < o->rank; i++) snprintf(a + strlen(a), sizeof a - strlen(a), "%lld,", (long long)o->shape[i]);
    for (int i = 0; i < rank; i++) snprintf(b + strlen(b), sizeof b - strlen(b), "%lld,", (long long)shape[i]);
    cs_fail(c, "output %d shape [%s], expected [%s]", k, a, b);
    return 0;
  }
  return 1;
}

/* Output k has dtype t, the shape, and values close to want (atol/rtol < 0: dtype default). */
static inline void cs_expect_tol(Case *c, int k, kiln_dtype t, int rank, const int64_t *shape, const double *want,
                                 double atol, double rtol) {
  if (!cs_check_meta(c, k, t, rank, shape)) return;
  double da, dr;
  ou_tol(t, &da, &dr);
  if (atol < 0) atol = da;
  if (rtol < 0) rtol = dr;
  OuVal *o = &c->out[k];
  int bad = 0;
  for (int64_t i = 0; i < o->n; i++) {
    double g = ou_load(t, o->p, i);
    if (!ou_close(g, want[i], atol, rtol)) {
      if (bad < 4) cs_fail(c, "output %d [%lld] = %.10g, expected %.10g", k, (long long)i, g, want[i]);
      bad++;
    }
  }
  if (bad > 4) cs_fail(c, "... %d mismatches in all (of %lld)", bad, (long long)o->n);
}
static inline void cs_expect(Case *c, int k, kiln_dtype t, int rank, const int64_t *shape, const double *want) {
  cs_expect_tol(c, k, t, rank, shape, want, -1, -1);
}
/* Exact raw bits (ints of any width, -0.0, casts). */
static inline void cs_expect_raw(Case *c, int k, kiln_dtype t, int rank, const int64_t *shape, const uint64_t *want) {
  if (!cs_check_meta(c, k, t, rank, shape)) return;
  OuVal *o = &c->out[k];
  int bad = 0;
  for (int64_t i = 0; i < o->n; i++) {
    uint64_t g = ou_raw(t, o->p, i);
    if (g != want[i]) {
      if (bad < 4)
        cs_fail(c, "output %d [%lld] = 0x%llx (%.10g), expected 0x%llx (%.10g)", k, (long long)i, (unsigned long long)g,
                ou_load(t, o->p, i), (unsigned long long)want[i], ou_load(t, &want[i], 0));
      bad++;
    }
  }
  if (bad > 4) cs_fail(c, "... %d mismatches in all", bad);
}
/* Exact values (ints, bools, or floats that must be exact, e.g. floor); -0.0 == 0.0 here. */
static inline void cs_expect_exact(Case *c, int k, kiln_dtype t, int rank, const int64_t *shape, const double *want) {
  cs_expect_tol(c, k, t, rank, shape, want, 0, 0);
}
/* Value at index i of output k as double (for ad-hoc checks). */
static inline double cs_get(const Case *c, int k, int64_t i) { return ou_load(c->out[k].t, c->out[k].p, i); }

/* Summary line; exit status from test.h. */
#define OU_MAIN_END(family) \
  do { fprintf(stderr, "%s on %s: %d cases, %d known bug(s) reproduced, %d unsupported, %d check(s) failed\n", (family), \
               ou_backend(), ou_cases, ou_known_hits, ou_unsupported, test_failures); \
       TEST_MAIN_END(); } while (0)

/* Skips the whole file (exit 0) when the chosen backend cannot compile a trivial graph
 * because the backend is unknown or its device is absent. */
static inline int ou_backend_available(void) {
  if (strcmp(ou_backend(), "ref") == 0) return 1;
  kiln_graph *g = NULL;
  kiln_tensor x, y;
  int64_t sh[1] = {2};
  if (kiln_graph_create(&g) != KILN_OK) return 1;
  int ok = kiln_graph_input(g, "x", KILN_F32, 1, sh, &x) == KILN_OK &&
           kiln_graph_unary(g, KILN_NEG, x, &y) == KILN_OK && kiln_graph_output(g, y, "y") == KILN_OK;
  int avail = 1;
  if (ok) {
    kiln_options o = kiln_options_default();
    o.backend = ou_backend();
    kiln_program *p = NULL;
    kiln_status s = kiln_program_compile(g, &o, &p);
    if (s == KILN_ERR_DEVICE || s == KILN_ERR_UNSUPPORTED ||
        (s == KILN_ERR_INVALID_ARG && strstr(kiln_last_error(), "backend"))) {
      /* where the build found the backend's pieces (KILN_TEST_REQUIRE_BACKEND), absent is a failure */
      const char *req = getenv("KILN_TEST_REQUIRE_BACKEND");
      printf("%s: backend %s unavailable: %s\n", req && *req ? "FAIL" : "skip", o.backend, kiln_last_error());
      if (req && *req) exit(1);
      avail = 0;
    }
    kiln_program_free(p);
  }
  kiln_graph_free(g);
  return avail;
}

#endif
