/*
 * test.h — a tiny test harness. Each test file is one executable; CHECK records a
 * failure with file:line and carries on; the exit status is the number of failures.
 */
#ifndef KILN_TEST_H
#define KILN_TEST_H

#include "kiln.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int test_failures;

#define CHECK(c) \
  ((c) ? (void)0 : (test_failures++, fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c)))
#define CHECK_MSG(c, ...) \
  ((c) ? (void)0 : (test_failures++, fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #c), \
                    fprintf(stderr, __VA_ARGS__), fputc('\n', stderr)))
/* A kiln call that must succeed. */
#define OK(call) \
  do { kiln_status st_ = (call); \
       if (st_ != KILN_OK) { test_failures++; \
         fprintf(stderr, "%s:%d: %s -> %s: %s\n", __FILE__, __LINE__, #call, kiln_status_name(st_), kiln_last_error()); } \
  } while (0)
/* A kiln call that must fail with status s and leave a message. */
#define FAILS(s, call) \
  do { kiln_status st_ = (call); \
       if (st_ != (s) || !kiln_last_error()[0]) { test_failures++; \
         fprintf(stderr, "%s:%d: %s -> %s, expected %s\n", __FILE__, __LINE__, #call, kiln_status_name(st_), kiln_status_name(s)); } \
  } while (0)
#define CHECK_NEAR(a, b, tol) \
  do { double a_ = (a), b_ = (b); \
       if (!(fabs(a_ - b_) <= (tol) * (1 + fabs(b_)))) { test_failures++; \
         fprintf(stderr, "%s:%d: %s = %.9g, expected %.9g\n", __FILE__, __LINE__, #a, a_, b_); } \
  } while (0)

#define TEST_MAIN_END() \
  do { if (test_failures) fprintf(stderr, "%d check(s) failed\n", test_failures); \
       return test_failures ? 1 : 0; } while (0)

/* Deterministic random numbers for tests (xorshift64*). */
static inline double test_rand(unsigned long long *s) {
  *s ^= *s >> 12; *s ^= *s << 25; *s ^= *s >> 27;
  return (double)((*s * 2685821657736338717ull) >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

/* What kiln_program_print writes for p, as one string (free it), or NULL. */
static inline char *test_program_text(kiln_program *p) {
  FILE *f = tmpfile();
  if (!f) return NULL;
  char *text = NULL;
  if (!kiln_program_print(p, f)) {
    long size = ftell(f);
    rewind(f);
    text = size >= 0 ? calloc(1, (size_t)size + 1) : NULL;
    if (text && fread(text, 1, (size_t)size, f) != (size_t)size) free(text), text = NULL;
  }
  fclose(f);
  return text;
}

/* The count in p's printed summary line, "(N groups, M library GEMMs)"; -1 if none. */
static inline int test_library_gemms(kiln_program *p) {
  char *text = test_program_text(p);
  if (!text) return -1;
  int n = -1;
  for (const char *at = text; (at = strstr(at, " library GEMMs)")); at++) {
    const char *num = at;
    while (num > text && num[-1] != '(' && num[-1] != ' ') num--;
    n = atoi(num);
  }
  free(text);
  return n;
}

/* Does backend be keep a 16-bit operation's result unrounded inside its kernel, rounding it once where
 * it is stored (kiln_options.excess_precision as $KILN_EXCESS_PRECISION sets it; -1, the default, is on
 * for cuda and cpu)? ref rounds every operation. */
static inline bool test_rounds_once(const char *be) {
  int e = kiln_options_default().excess_precision;
  return strcmp(be, "ref") != 0 && (e == 1 || (e == -1 && (!strcmp(be, "cuda") || !strcmp(be, "cpu"))));
}

/* Does backend be compile a one-op program here (its compiler, driver and device present)? */
static inline bool test_backend_present(const char *be) {
  kiln_graph *g;
  kiln_tensor x, y;
  kiln_program *p = NULL;
  kiln_options o = kiln_options_default();
  o.backend = be;
  bool ok = !kiln_graph_create(&g) && !kiln_graph_input(g, "x", KILN_F32, 1, (const int64_t[]){2}, &x) &&
            !kiln_graph_unary(g, KILN_NEG, x, &y) && !kiln_graph_output(g, y, "y") && !kiln_program_compile(g, &o, &p);
  kiln_program_free(p);
  kiln_graph_free(g);
  return ok;
}

#endif
