/*
 * test.h — a tiny test harness. Each test file is one executable; CHECK records a
 * failure with file:line and carries on; the exit status is the number of failures.
 */
#ifndef KILN_TEST_H
#define KILN_TEST_H

#include "kiln.h"

#include <math.h>
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

#endif
