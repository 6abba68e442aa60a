/*
 * cli.c — what every kiln command does with its command line, written once: reading the
 * arguments strictly, and reporting a failure in one format.
 *
 * A command walks its arguments with cli_next and offers each to the cli_* readers in turn;
 * the reader whose flag it is takes it (and its value) and returns true. A bad argument is
 * reported here, naming the argument and what was expected:
 *
 *   kiln bench: --runs: expected a positive integer, got 'abc'
 *   kiln run: --input needs a value (NAME=FILE.pb)
 *   kiln run: unknown option '--frobnicate'
 *
 * and ends the walk; the command then prints its usage and exits 2. Numbers go through
 * strtol / strtod with an end pointer and range checks, so "5x", "1e3" (for an integer),
 * "nan" and "" are errors, never a silent 0.
 */
#include "tools.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

Cli cli_start(const char *cmd, int argc, char **argv) {
  return (Cli){ .cmd = cmd, .argc = argc, .argv = argv, .i = 0 };
}

bool cli_next(Cli *c) {
  if (c->bad || c->help || ++c->i >= c->argc) return false;
  const char *a = c->argv[c->i];
  c->help = !strcmp(a, "-h") || !strcmp(a, "--help");
  return !c->help;
}

bool cli_error(Cli *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "kiln %s: ", c->cmd);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  c->bad = true;
  return true;
}

/* Is the current argument flag? */
static bool is(const Cli *c, const char *flag) { return !strcmp(c->argv[c->i], flag); }

/* The value after the current flag, taking it; NULL (reported) when there is none. A next
 * argument that is itself a "--" flag is not taken as the value. */
static const char *value(Cli *c, const char *what) {
  const char *v = c->i + 1 < c->argc ? c->argv[c->i + 1] : NULL;
  if (!v || !strncmp(v, "--", 2)) {
    cli_error(c, "%s needs a value (%s)", c->argv[c->i], what);
    return NULL;
  }
  c->i++;
  return v;
}

bool cli_flag(Cli *c, const char *flag, bool *out) {
  if (!is(c, flag)) return false;
  *out = true;
  return true;
}

bool cli_str(Cli *c, const char *flag, const char *what, const char **out) {
  if (!is(c, flag)) return false;
  const char *v = value(c, what);
  if (v) *out = v;
  return true;
}

/* "a positive integer" for lo 1, and so on. */
static const char *int_words(long long lo) {
  return lo == 1 ? "a positive integer" : lo == 0 ? "a non-negative integer" : "an integer";
}

/* s as an integer in [lo, hi] into *out; false (reported against flag) otherwise. */
static bool parse_int(Cli *c, const char *flag, const char *s, long long lo, long long hi, long long *out) {
  char *end = (char *)s;
  errno = 0;
  long long v = isspace((unsigned char)s[0]) ? 0 : strtoll(s, &end, 10);
  if (end == s || *end || (errno == ERANGE && v < 0) || v < lo)
    return !cli_error(c, "%s: expected %s, got '%s'", flag, int_words(lo), s);
  if (errno == ERANGE || v > hi) return !cli_error(c, "%s: expected at most %lld, got '%s'", flag, hi, s);
  *out = v;
  return true;
}

bool cli_int(Cli *c, const char *flag, int lo, int hi, int *out) {
  if (!is(c, flag)) return false;
  const char *v = value(c, int_words(lo));
  long long n = 0;
  if (v && parse_int(c, flag, v, lo, hi, &n)) *out = (int)n;
  return true;
}

bool cli_u64(Cli *c, const char *flag, uint64_t *out) {
  if (!is(c, flag)) return false;
  const char *v = value(c, "a non-negative integer");
  if (!v) return true;
  char *end = (char *)v;
  errno = 0;
  unsigned long long n = isdigit((unsigned char)v[0]) ? strtoull(v, &end, 10) : 0;
  if (end == v || *end || errno == ERANGE)
    return cli_error(c, "%s: expected a non-negative integer below 2^64, got '%s'", flag, v);
  *out = n;
  return true;
}

bool cli_real(Cli *c, const char *flag, bool zero_ok, double *out) {
  if (!is(c, flag)) return false;
  const char *words = zero_ok ? "a non-negative number" : "a positive number";
  const char *v = value(c, words);
  if (!v) return true;
  char *end = (char *)v;
  errno = 0;
  double d = isspace((unsigned char)v[0]) ? NAN : strtod(v, &end);
  bool overflow = errno == ERANGE && fabs(d) > 1;  /* underflow to a tiny number is fine */
  if (end == v || *end || overflow || !isfinite(d) || d < 0 || (!zero_ok && d == 0))
    return cli_error(c, "%s: expected %s, got '%s'", flag, words, v);
  *out = d;
  return true;
}

bool cli_choice(Cli *c, const char *flag, const char *const *choices, const char **out) {
  if (!is(c, flag)) return false;
  char words[256] = "";  /* "a, b or c" */
  size_t n = 0;
  while (choices[n]) n++;
  for (size_t k = 0; k < n; k++) {
    size_t len = strlen(words);
    snprintf(words + len, sizeof words - len, "%s%s", k == 0 ? "" : k + 1 == n ? " or " : ", ", choices[k]);
  }
  const char *v = value(c, words);
  if (!v) return true;
  for (size_t k = 0; k < n; k++)
    if (!strcmp(v, choices[k])) {
      *out = choices[k];
      return true;
    }
  return cli_error(c, "%s: expected %s, got '%s'", flag, words, v);
}

bool cli_model(Cli *c, const char **model) {
  const char *a = c->argv[c->i];
  if (a[0] == '-') return cli_error(c, "unknown option '%s'", a);
  if (*model) return cli_error(c, "a second model path '%s' (the model is '%s')", a, *model);
  *model = a;
  return true;
}

bool cli_unknown(Cli *c) {
  const char *a = c->argv[c->i];
  return a[0] == '-' ? cli_error(c, "unknown option '%s'", a) : cli_error(c, "unexpected argument '%s'", a);
}

int cli_usage(const Cli *c, const char *text) {
  fputs(text, c->help ? stdout : stderr);
  return c->help ? 0 : 2;
}

/* ---- failures ---- */

void cli_lib_message(kiln_status st, const char *path, const char *msg, char *buf, size_t cap) {
  const char *name = kiln_status_name(st);
  size_t n = strlen(name);
  if (!strncmp(msg, name, n) && !strncmp(msg + n, ": ", 2)) msg += n + 2;  /* the status once */
  if (path && strncmp(msg, path, strlen(path))) snprintf(buf, cap, "%s: %s: %s", name, path, msg);
  else snprintf(buf, cap, "%s: %s", name, msg);
}

int cli_lib_error(const char *cmd, kiln_status st, const char *path) {
  char buf[2048];
  cli_lib_message(st, path, kiln_last_error(), buf, sizeof buf);
  fprintf(stderr, "kiln %s: %s\n", cmd, buf);
  return 1;
}
