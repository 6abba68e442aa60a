/*
 * scalar.c — what the shared scalar semantics (scalar.inc) need from dtypes on the
 * host: the float -> integer cast with each integer dtype's limits.
 */
#include "scalar.h"

void scalar_int_limits(kiln_dtype t, double *lo, double *hi) {
  switch (t) {
  case KILN_I32: *lo = -2147483648.0; *hi = 2147483647.0; return;
  case KILN_I16: *lo = -32768.0; *hi = 32767.0; return;
  case KILN_I8: *lo = -128.0; *hi = 127.0; return;
  case KILN_U8: *lo = 0; *hi = 255.0; return;
  case KILN_U16: *lo = 0; *hi = 65535.0; return;
  case KILN_U32: *lo = 0; *hi = 4294967295.0; return;
  default: *lo = -9223372036854775808.0; *hi = 9223372036854775808.0; return;
  }
}

int64_t scalar_f2int(kiln_dtype t, double v) {
  if (t == KILN_BOOL) return v != 0;
  if (t == KILN_U64) return (int64_t)k_f2u(v);
  double lo, hi;
  scalar_int_limits(t, &lo, &hi);
  return k_f2s(v, lo, hi);
}
