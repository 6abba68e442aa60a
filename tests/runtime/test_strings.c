/*
 * String tensors through the public API, on ref and on cpu. Each op's expected output is
 * written out here by hand (or computed with plain C string functions), never by kiln.
 * Every string op must run on the host and be counted, on ref as on cpu: the census shows
 * exactly one host fallback per string op, named by op, and nothing else falls back (the numeric
 * ops around them are kernels). Also: misuse refused at build and run time, output
 * ownership (valid until the next run; the caller's inputs are not kept), and strict mode.
 */
#include "test.h"

#include <stdbool.h>
#include <stdint.h>

static const char *const backends[] = { "ref", "cpu" };

/* Compiles g for backend be; NULL (a failed check) when it cannot. */
static kiln_program *compile(kiln_graph *g, const char *be) {
  kiln_options o = kiln_options_default();
  o.backend = be;
  o.strict = 0;
  kiln_program *p = NULL;
  OK(kiln_program_compile(g, &o, &p));
  return p;
}

static bool strs_eq(const char *const *got, const char *const *want, int n, const char *what, const char *be) {
  for (int i = 0; i < n; i++)
    if (!got[i] || strcmp(got[i], want[i])) {
      test_failures++;
      fprintf(stderr, "%s on %s: element %d is '%s', expected '%s'\n", what, be, i, got[i] ? got[i] : "(null)", want[i]);
      return false;
    }
  return true;
}

/* Exactly want host fallbacks, and ops (e.g. "string_concat:1") among the names: the same on
 * ref as on cpu (an opaque op is a fallback on every backend). */
static void check_census(kiln_program *p, const char *be, int64_t want, const char *ops) {
  kiln_census c;
  OK(kiln_program_census(p, &c));
  CHECK_MSG(c.host_fallbacks == want, "%s: %lld fallbacks (%s), expected %lld", be, (long long)c.host_fallbacks,
            c.fallback_ops, (long long)want);
  CHECK_MSG(!ops || strstr(c.fallback_ops, ops), "fallbacks '%s' lack '%s'", c.fallback_ops, ops);
}

/* StringNormalizer without stopwords runs on the caller's input each run. */
static void normalize_case(const char *be) {
  const char *in[4] = { "Hello", "wORLD", "Straße 42", "" };
  const char *lower[4] = { "hello", "world", "straße 42", "" };
  const char *upper[4] = { "HELLO", "WORLD", "STRAßE 42", "" };  /* ASCII only: ß passes through */
  for (int k = 0; k < 3; k++) {
    kiln_graph *g;
    OK(kiln_graph_create(&g));
    kiln_tensor x, y;
    int64_t s[1] = { 4 };
    OK(kiln_graph_input(g, "x", KILN_STRING, 1, s, &x));
    OK(kiln_graph_string_normalize(g, x, (kiln_case_change)k, 1, 0, NULL, &y));
    OK(kiln_graph_output(g, y, "y"));
    kiln_program *p = compile(g, be);
    const char *out[4] = { 0 };
    if (p) {
      OK(kiln_program_run(p, (const void *[]){ in }, (void *[]){ out }));
      strs_eq(out, k == 0 ? in : k == 1 ? lower : upper, 4, "normalize", be);
      if (k) CHECK(out[0] != in[0]);  /* the program's storage, not the caller's */
      check_census(p, be, 1, "string_normalize:1");
    }
    kiln_program_free(p);
    kiln_graph_free(g);
  }
}

/* With stopwords the input must be constant; the op still runs in the program. */
static void normalize_stopwords(const char *be) {
  const char *words[4] = { "monday", "Tuesday", "monday", "FRIDAY" };
  const char *stop[2] = { "MONDAY", "friday" };
  struct { int sensitive, change, n; const char *want[4]; } cases[] = {
    { 0, KILN_CASE_UPPER, 1, { "TUESDAY" } },             /* folded: monday, FRIDAY go */
    { 1, KILN_CASE_NONE, 4, { "monday", "Tuesday", "monday", "FRIDAY" } },  /* exact: nothing goes */
  };
  for (int k = 0; k < 2; k++) {
    kiln_graph *g;
    OK(kiln_graph_create(&g));
    kiln_tensor x, y;
    int64_t s[2] = { 1, 4 };
    OK(kiln_graph_const(g, KILN_STRING, 2, s, words, &x));
    OK(kiln_graph_string_normalize(g, x, (kiln_case_change)cases[k].change, cases[k].sensitive, 2, stop, &y));
    int rank;
    int64_t ys[KILN_MAX_RANK];
    OK(kiln_tensor_shape(g, y, &rank, ys));
    CHECK(rank == 2 && ys[0] == 1 && ys[1] == cases[k].n);
    OK(kiln_graph_output(g, y, "y"));
    kiln_program *p = compile(g, be);
    const char *out[4] = { 0 };
    if (p) {
      OK(kiln_program_run(p, NULL, (void *[]){ out }));
      strs_eq(out, cases[k].want, cases[k].n, "normalize stopwords", be);
      check_census(p, be, 1, "string_normalize:1");
    }
    kiln_program_free(p);
    kiln_graph_free(g);
  }
  /* every string a stopword: one empty string */
  kiln_graph *g;
  OK(kiln_graph_create(&g));
  kiln_tensor x, y;
  int64_t s[1] = { 2 };
  const char *two[2] = { "Friday", "monday" };
  OK(kiln_graph_const(g, KILN_STRING, 1, s, two, &x));
  OK(kiln_graph_string_normalize(g, x, KILN_CASE_LOWER, 0, 2, stop, &y));
  int rank;
  int64_t ys[KILN_MAX_RANK];
  OK(kiln_tensor_shape(g, y, &rank, ys));
  CHECK(rank == 1 && ys[0] == 1);
  OK(kiln_graph_output(g, y, "y"));
  kiln_program *p = compile(g, be);
  const char *out[1] = { 0 };
  if (p) {
    OK(kiln_program_run(p, NULL, (void *[]){ out }));
    CHECK(out[0] && !strcmp(out[0], ""));
  }
  kiln_program_free(p);
  kiln_graph_free(g);
}

/* concat with broadcasting, then equality against a constant, then a numeric op on the
 * bool (a kernel on cpu): two string fallbacks, the cast is generated code. */
static void concat_equal(const char *be) {
  const char *a[6] = { "cat", "dog", "", "é", "a", "ab" };
  const char *b[2] = { "s", "" };
  const char *want_c[6] = { "cats", "dog", "s", "é", "as", "ab" };
  const char *cmp[6] = { "cats", "dogs", "s", "é", "a", "ab" };
  const uint8_t want_eq[6] = { 1, 0, 1, 1, 0, 1 };
  kiln_graph *g;
  OK(kiln_graph_create(&g));
  kiln_tensor x, y, c, k, e, f;
  int64_t sa[2] = { 3, 2 }, sb[1] = { 2 };
  OK(kiln_graph_input(g, "a", KILN_STRING, 2, sa, &x));
  OK(kiln_graph_input(g, "b", KILN_STRING, 1, sb, &y));
  OK(kiln_graph_string_concat(g, x, y, &c));
  OK(kiln_graph_const(g, KILN_STRING, 2, sa, cmp, &k));
  OK(kiln_graph_binary(g, KILN_EQ, c, k, &e));
  OK(kiln_graph_cast(g, e, KILN_F32, &f));
  OK(kiln_graph_output(g, c, "c"));
  OK(kiln_graph_output(g, f, "f"));
  kiln_program *p = compile(g, be);
  const char *out[6] = { 0 };
  float fo[6];
  if (p) {
    OK(kiln_program_run(p, (const void *[]){ a, b }, (void *[]){ out, fo }));
    strs_eq(out, want_c, 6, "concat", be);
    for (int i = 0; i < 6; i++) CHECK_MSG(fo[i] == want_eq[i], "%s: eq %d is %g", be, i, fo[i]);
    check_census(p, be, 2, "string_concat:1");
    check_census(p, be, 2, "eq:1");
    kiln_census cs;
    OK(kiln_program_census(p, &cs));
    if (!strcmp(be, "cpu")) CHECK_MSG(cs.kernels_launched == 1, "the cast is %lld kernels", (long long)cs.kernels_launched);
  }
  kiln_program_free(p);
  kiln_graph_free(g);
}

/* Movement of strings: transpose, slice, gather, reshape, concat, where. */
static void movement(const char *be) {
  const char *in[6] = { "a0", "a1", "a2", "b0", "b1", "b2" };
  kiln_graph *g;
  OK(kiln_graph_create(&g));
  kiln_tensor x, t, sl, gi, ga, r, cc, cond, w, other;
  int64_t s[2] = { 2, 3 }, is[1] = { 2 }, rs[1] = { 6 };
  int64_t idx[2] = { 2, 0 };
  OK(kiln_graph_input(g, "x", KILN_STRING, 2, s, &x));
  OK(kiln_graph_transpose(g, x, (const int[]){ 1, 0 }, &t));                     /* [3,2] */
  OK(kiln_graph_slice(g, x, 1, (const int64_t[]){ 2 }, (const int64_t[]){ -100 }, (const int[]){ 1 },
                      (const int64_t[]){ -1 }, &sl));                                /* [2,3] reversed cols */
  OK(kiln_graph_const(g, KILN_I64, 1, is, idx, &gi));
  OK(kiln_graph_gather(g, x, gi, 1, &ga));                                        /* [2,2] */
  OK(kiln_graph_reshape(g, t, 1, rs, &r));                                        /* [6] */
  OK(kiln_graph_concat(g, 2, (const kiln_tensor[]){ x, sl }, 0, &cc));            /* [4,3] */
  const uint8_t cv[3] = { 1, 0, 1 };
  const char *ov[1] = { "z" };
  OK(kiln_graph_const(g, KILN_BOOL, 1, (const int64_t[]){ 3 }, cv, &cond));
  OK(kiln_graph_const(g, KILN_STRING, 0, NULL, ov, &other));
  OK(kiln_graph_where(g, cond, x, other, &w));                                    /* [2,3] */
  OK(kiln_graph_output(g, r, "r"));
  OK(kiln_graph_output(g, ga, "ga"));
  OK(kiln_graph_output(g, cc, "cc"));
  OK(kiln_graph_output(g, w, "w"));
  kiln_program *p = compile(g, be);
  const char *ro[6], *gao[4], *cco[12], *wo[6];
  if (p) {
    OK(kiln_program_run(p, (const void *[]){ in }, (void *[]){ ro, gao, cco, wo }));
    strs_eq(ro, (const char *[]){ "a0", "b0", "a1", "b1", "a2", "b2" }, 6, "transpose+reshape", be);
    strs_eq(gao, (const char *[]){ "a2", "a0", "b2", "b0" }, 4, "gather", be);
    strs_eq(cco, (const char *[]){ "a0", "a1", "a2", "b0", "b1", "b2", "a2", "a1", "a0", "b2", "b1", "b0" }, 12,
            "concat+slice", be);
    strs_eq(wo, (const char *[]){ "a0", "z", "a2", "b0", "z", "b2" }, 6, "where", be);
    for (int i = 0; i < 6; i++) CHECK(ro[i] != in[(i % 2) * 3 + i / 2]);  /* copies, not the caller's */
    kiln_census c;
    OK(kiln_program_census(p, &c));
    if (!strcmp(be, "cpu")) CHECK_MSG(c.host_fallbacks >= 4 && c.kernels_launched == 0, "%lld fallbacks, %lld kernels",
                                      (long long)c.host_fallbacks, (long long)c.kernels_launched);
  }
  kiln_program_free(p);
  kiln_graph_free(g);
}

static void regex_label(const char *be) {
  const char *in[5] = { "www.google.com", "www.bbc.co.uk", "WWW.x.com", "www...com", "www.a-b.com" };
  const uint8_t want_m[5] = { 1, 0, 0, 1, 1 };
  const char *keys[3] = { "www.google.com", "www.bbc.co.uk", "www.a-b.com" };
  const int64_t vals[3] = { 7, 8, 9 }, dflt = -1;
  const int64_t want_l[5] = { 7, 8, -1, -1, 9 };
  const int64_t ikeys[2] = { 8, 9 };
  const char *svals[2] = { "eight", "nine" }, *sdflt = "none";
  kiln_graph *g;
  OK(kiln_graph_create(&g));
  kiln_tensor x, m, l, back;
  int64_t s[1] = { 5 };
  OK(kiln_graph_input(g, "x", KILN_STRING, 1, s, &x));
  OK(kiln_graph_regex_full_match(g, x, "www\\.[\\w.-]+\\.com", &m));
  OK(kiln_graph_label_encode(g, x, KILN_STRING, KILN_I64, 3, keys, vals, &dflt, &l));
  OK(kiln_graph_label_encode(g, l, KILN_I64, KILN_STRING, 2, ikeys, svals, &sdflt, &back));
  OK(kiln_graph_output(g, m, "m"));
  OK(kiln_graph_output(g, l, "l"));
  OK(kiln_graph_output(g, back, "back"));
  kiln_program *p = compile(g, be);
  uint8_t mo[5];
  int64_t lo[5];
  const char *bo[5];
  if (p) {
    OK(kiln_program_run(p, (const void *[]){ in }, (void *[]){ mo, lo, bo }));
    for (int i = 0; i < 5; i++) CHECK_MSG(mo[i] == want_m[i], "%s: match %d ('%s') is %d", be, i, in[i], mo[i]);
    for (int i = 0; i < 5; i++) CHECK_MSG(lo[i] == want_l[i], "%s: label %d is %lld", be, i, (long long)lo[i]);
    strs_eq(bo, (const char *[]){ "none", "eight", "none", "none", "nine" }, 5, "label i64->string", be);
    check_census(p, be, 3, "regex_full_match:1");
  }
  kiln_program_free(p);
  kiln_graph_free(g);
}

/* RE2 constructs and their POSIX translations: each pattern against a string it fully
 * matches and one it does not (worked out by hand from RE2's syntax). */
static void regex_translation(const char *be) {
  static const struct { const char *re, *yes, *no; } t[] = {
    { "[^\\d]+", "abc", "a1" },       { "(?:ab)+", "abab", "aba" },   { "a+?b", "aaab", "b" },
    { "\\d{2,3}", "12", "1234" },      { "[a\\-z]+", "a-z", "b" },    { "[\\]x]+", "]x]", "y" },
    { "[\\^a]+", "^a^", "b" },          { "\\w+@\\w+\\.com", "me@x.com", "me@x.org" },
    { "x|y", "y", "xy" },               { "\\s*\\S+", "  ab", "a b" }, { "[\\w.]+", "a.b_c", "a-b" },
    { "colou?r", "color", "colouur" },
  };
  for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
    kiln_graph *g;
    OK(kiln_graph_create(&g));
    kiln_tensor x, m;
    int64_t s[1] = { 2 };
    OK(kiln_graph_input(g, "x", KILN_STRING, 1, s, &x));
    OK(kiln_graph_regex_full_match(g, x, t[k].re, &m));
    OK(kiln_graph_output(g, m, "m"));
    kiln_program *p = compile(g, be);
    uint8_t mo[2] = { 9, 9 };
    if (p) OK(kiln_program_run(p, (const void *[]){ (const char *[]){ t[k].yes, t[k].no } }, (void *[]){ mo }));
    CHECK_MSG(mo[0] == 1 && mo[1] == 0, "%s: /%s/ on '%s' %d, on '%s' %d", be, t[k].re, t[k].yes, mo[0], t[k].no, mo[1]);
    kiln_program_free(p);
    kiln_graph_free(g);
  }
}

/* Outputs stay valid until the next run; a run replaces them; inputs are not kept. */
static void ownership(const char *be) {
  kiln_graph *g;
  OK(kiln_graph_create(&g));
  kiln_tensor x, y;
  int64_t s[1] = { 2 };
  OK(kiln_graph_input(g, "x", KILN_STRING, 1, s, &x));
  OK(kiln_graph_string_normalize(g, x, KILN_CASE_UPPER, 1, 0, NULL, &y));
  OK(kiln_graph_output(g, y, "y"));
  OK(kiln_graph_output(g, x, "x_again"));
  kiln_program *p = compile(g, be);
  if (p) {
    char buf1[8] = "ab", buf2[8] = "cd";
    const char *in[2] = { buf1, buf2 }, *out[2], *again[2];
    OK(kiln_program_run(p, (const void *[]){ in }, (void *[]){ out, again }));
    memset(buf1, 'x', 7);  /* the caller reuses its memory: the outputs must not change */
    strs_eq(out, (const char *[]){ "AB", "CD" }, 2, "run 1", be);
    strs_eq(again, (const char *[]){ "ab", "cd" }, 2, "identity output", be);
    const char *first = out[0];
    const char *in2[2] = { "e", "f" };
    OK(kiln_program_run(p, (const void *[]){ in2 }, (void *[]){ out, again }));
    strs_eq(out, (const char *[]){ "E", "F" }, 2, "run 2", be);
    CHECK(first != NULL);  /* first is dangling now by contract: ASan would flag a read */
    /* resident input: copied at set_input */
    char buf3[8] = "gh";
    const char *in3[2] = { buf3, "ij" };
    OK(kiln_program_set_input(p, 0, in3));
    memset(buf3, 0, sizeof buf3);
    OK(kiln_program_run(p, NULL, (void *[]){ out, again }));
    strs_eq(out, (const char *[]){ "GH", "IJ" }, 2, "resident input", be);
    OK(kiln_program_run(p, NULL, (void *[]){ NULL, again }));  /* output 0 stays with the program */
    const char *ro[2];
    OK(kiln_program_read_output(p, 0, ro));
    strs_eq(ro, (const char *[]){ "GH", "IJ" }, 2, "read_output", be);
    /* a NULL element is refused and changes nothing */
    const char *bad[2] = { "k", NULL };
    FAILS(KILN_ERR_INVALID_ARG, kiln_program_run(p, (const void *[]){ bad }, (void *[]){ out, again }));
    CHECK(strstr(kiln_last_error(), "element 1 is NULL") != NULL);
    FAILS(KILN_ERR_INVALID_ARG, kiln_program_set_input(p, 0, bad));
  }
  kiln_program_free(p);
  kiln_graph_free(g);
}

/* Build-time refusals: arithmetic, reductions, casts, pad, mixed dtypes, NULL data. */
static void misuse(void) {
  kiln_graph *g;
  OK(kiln_graph_create(&g));
  kiln_tensor x, f, y, one;
  int64_t s[1] = { 2 };
  OK(kiln_graph_input(g, "x", KILN_STRING, 1, s, &x));
  OK(kiln_graph_input(g, "f", KILN_F32, 1, s, &f));
  for (int op = 0; op < KILN_BINARY_COUNT; op++) {
    if (op == KILN_EQ || op == KILN_NE) continue;
    FAILS(KILN_ERR_INVALID_ARG, kiln_graph_binary(g, (kiln_binary_op)op, x, x, &y));
    CHECK(strstr(kiln_last_error(), "string") != NULL);
  }
  for (int op = 0; op < KILN_UNARY_COUNT; op++) FAILS(KILN_ERR_INVALID_ARG, kiln_graph_unary(g, (kiln_unary_op)op, x, &y));
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_binary(g, KILN_EQ, x, f, &y));
  OK(kiln_graph_scalar(g, KILN_F32, 1, &one));
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_binary(g, KILN_ADD, x, one, &y));  /* no literal coercion to string */
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_scalar(g, KILN_STRING, 1, &y));
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_reduce(g, KILN_REDUCE_MAX, x, 0, NULL, 0, &y));
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_cast(g, x, KILN_F32, &y));
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_cast(g, f, KILN_STRING, &y));
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_pad(g, x, (const int64_t[]){ 1, 1 }, KILN_PAD_CONSTANT, 0, &y));
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_argmax(g, x, 0, 0, 0, &y));
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_string_concat(g, x, f, &y));
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_string_normalize(g, f, KILN_CASE_LOWER, 1, 0, NULL, &y));
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_string_normalize(g, x, (kiln_case_change)3, 1, 0, NULL, &y));
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_string_normalize(g, x, KILN_CASE_LOWER, 1, 1, (const char *[]){ NULL }, &y));
  /* stopwords on a non-constant input: the output length is data-dependent */
  FAILS(KILN_ERR_UNSUPPORTED, kiln_graph_string_normalize(g, x, KILN_CASE_LOWER, 1, 1, (const char *[]){ "a" }, &y));
  FAILS(KILN_ERR_UNSUPPORTED, kiln_graph_regex_full_match(g, x, "(?i)abc", &y));
  FAILS(KILN_ERR_UNSUPPORTED, kiln_graph_regex_full_match(g, x, "\\p{L}+", &y));
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_regex_full_match(g, x, "a(b", &y));
  int64_t k = 1, v = 2;
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_label_encode(g, x, KILN_I64, KILN_I64, 1, &k, &v, &v, &y));   /* key dtype */
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_label_encode(g, f, KILN_F32, KILN_BOOL, 1, &k, &v, &v, &y));  /* value dtype */
  const char *nul[2] = { "a", NULL };
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_const(g, KILN_STRING, 1, s, nul, &y));
  kiln_tensor sp;
  const char *two[2] = { "a", "b" };
  OK(kiln_graph_param(g, "sp", KILN_STRING, 1, s, two, &sp));
  FAILS(KILN_ERR_INVALID_ARG, kiln_graph_assign(g, sp, x));
  kiln_graph_free(g);

  /* strict mode on cpu refuses the host op; cuda (never probed here) is refused by name */
  OK(kiln_graph_create(&g));
  OK(kiln_graph_input(g, "x", KILN_STRING, 1, s, &x));
  OK(kiln_graph_string_concat(g, x, x, &y));
  OK(kiln_graph_output(g, y, "y"));
  kiln_options o = kiln_options_default();
  o.backend = "cpu";
  o.strict = 1;
  kiln_program *p = NULL;
  FAILS(KILN_ERR_FALLBACK, kiln_program_compile(g, &o, &p));
  CHECK(p == NULL && strstr(kiln_last_error(), "string_concat") != NULL);
  kiln_graph_free(g);
}

int main(void) {
  for (int b = 0; b < 2; b++) {
    normalize_case(backends[b]);
    normalize_stopwords(backends[b]);
    concat_equal(backends[b]);
    movement(backends[b]);
    regex_label(backends[b]);
    regex_translation(backends[b]);
    ownership(backends[b]);
  }
  misuse();
  TEST_MAIN_END();
}
