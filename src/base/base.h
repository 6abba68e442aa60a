/*
 * base — what every stage shares: errors, the allocation hook, arenas, checked
 * size arithmetic, dtype facts, half-precision conversion, hashing and a string
 * builder. Nothing here knows about graphs or kernels.
 */
#ifndef KILN_BASE_H
#define KILN_BASE_H

#include "kiln.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* A bug in kiln (never bad input): print file:line and abort. Always on. */
#define KILN_ASSERT(c) ((c) ? (void)0 : kiln_die(__FILE__, __LINE__, #c))
_Noreturn void kiln_die(const char *file, int line, const char *what);

/* -- error.c -- */

/* Records status and message as this thread's last error and returns status. */
kiln_status kiln_fail(kiln_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
kiln_status kiln_vfail(kiln_status s, const char *fmt, va_list ap);
/* Prefixes the current last-error message ("node 'x' (Conv): " + old message). */
void kiln_error_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Reads an integer environment variable; dflt when unset or empty. */
int kiln_env_int(const char *name, int dflt);

/* -- alloc.c -- */

/* Every host allocation goes through these, so tests can fail the Nth one. */
void *kiln_malloc(size_t n);
void *kiln_calloc(size_t count, size_t size);
void *kiln_realloc(void *p, size_t n);
void kiln_free(void *p);
char *kiln_strdup(const char *s);
/* Test hook: the nth allocation from now (1 = next) and every later one fail; 0 disables. */
void kiln_alloc_fail_after(long n);

/* An arena: many allocations, one free. Memory is zeroed. */
typedef struct ArenaBlock ArenaBlock;
typedef struct Arena { ArenaBlock *head; size_t used; } Arena;
void *arena_alloc(Arena *a, size_t n);  /* NULL when out of memory */
char *arena_strdup(Arena *a, const char *s);
/* A string tensor's elements (n pointers and their bytes) copied into the arena; NULL
 * elements become "" (callers refuse them first where they are an error). NULL when out
 * of memory. The caller checks n * sizeof(char *) for overflow. */
const char **arena_strings(Arena *a, const char *const *src, int64_t n);
void arena_free(Arena *a);

/* Checked arithmetic: false on overflow (or a negative operand). */
bool size_mul(int64_t a, int64_t b, int64_t *out);
bool size_add(int64_t a, int64_t b, int64_t *out);
/* Product of dims; false on overflow or a negative dim. */
bool shape_numel(int rank, const int64_t *shape, int64_t *out);

/* -- dtype.c -- */

bool dtype_is_float(kiln_dtype t);   /* f32 f64 f16 bf16 */
bool dtype_is_int(kiln_dtype t);     /* signed and unsigned integers (not bool) */
bool dtype_is_signed(kiln_dtype t);  /* signed ints and floats */
bool dtype_valid(int t);
/* Reads element i of a buffer of type t as double / int64 (conversion as C casts, floats truncated). */
double dtype_load_f64(kiln_dtype t, const void *p, int64_t i);
int64_t dtype_load_i64(kiln_dtype t, const void *p, int64_t i);
/* Stores v into element i, with ONNX Cast rules (float->int truncates; out of range is implementation-defined but never UB). */
void dtype_store_f64(kiln_dtype t, void *p, int64_t i, double v);
void dtype_store_i64(kiln_dtype t, void *p, int64_t i, int64_t v);

float half_to_float(uint16_t h);
uint16_t float_to_half(float f);      /* round to nearest even */
float bf16_to_float(uint16_t h);
uint16_t float_to_bf16(float f);      /* round to nearest even */

/* -- hash.c / strbuf.c -- */

uint64_t hash_bytes(const void *p, size_t n, uint64_t seed);

typedef struct StrBuf { char *s; size_t len, cap; bool failed; } StrBuf;
void sb_printf(StrBuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sb_puts(StrBuf *b, const char *s);
void sb_free(StrBuf *b);

#endif
