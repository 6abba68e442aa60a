/*
 * One census format and one strict-mode message on every backend: the same graph on ref,
 * cpu and (when a GPU is present) cuda reports the same host fallbacks, by op with counts
 * ("string_concat:2 label_encode:1"), the same largest tensor that left the device, and in
 * strict mode fails with the same words. Expected strings are written out here, not read
 * off one backend and compared with another only.
 */
#include "test.h"

#include <stdbool.h>
#include <stdint.h>

static const char *const backends[] = { "ref", "cpu", "cuda" };
enum { N_BACKENDS = 3 };

static bool available(const char *be) {
  if (strcmp(be, "cuda")) return true;
  kiln_graph *g;
  kiln_tensor x;
  int64_t s[1] = { 1 };
  OK(kiln_graph_create(&g));
  OK(kiln_graph_input(g, "x", KILN_F32, 1, s, &x));
  OK(kiln_graph_output(g, x, "y"));
  kiln_options o = kiln_options_default();
  o.backend = be;
  kiln_program *p = NULL;
  kiln_status st = kiln_program_compile(g, &o, &p);
  kiln_program_free(p);
  kiln_graph_free(g);
  return st == KILN_OK;
}

/* y = label_encode(concat(concat(x, x), x)) * 2 + 1: three string ops (two of them the same
 * op) on the host, the arithmetic in kernels. x is [4] strings. */
static kiln_graph *strings_graph(void) {
  kiln_graph *g;
  kiln_tensor x, c1, c2, e, m, y;
  int64_t s[1] = { 4 };
  OK(kiln_graph_create(&g));
  OK(kiln_graph_input(g, "x", KILN_STRING, 1, s, &x));
  OK(kiln_graph_string_concat(g, x, x, &c1));
  OK(kiln_graph_string_concat(g, c1, x, &c2));
  const char *keys[2] = { "aaa", "bbb" };
  float vals[2] = { 1.5f, -2.0f }, dflt = 0.25f;
  OK(kiln_graph_label_encode(g, c2, KILN_STRING, KILN_F32, 2, keys, vals, &dflt, &e));
  float two = 2.0f, one = 1.0f;
  kiln_tensor t2, t1;
  OK(kiln_graph_const(g, KILN_F32, 0, NULL, &two, &t2));
  OK(kiln_graph_const(g, KILN_F32, 0, NULL, &one, &t1));
  OK(kiln_graph_binary(g, KILN_MUL, e, t2, &m));
  OK(kiln_graph_binary(g, KILN_ADD, m, t1, &y));
  OK(kiln_graph_output(g, y, "y"));
  return g;
}

static void same_census(void) {
  const char *in[4] = { "a", "b", "c", "" };
  const float want[4] = { 4.0f, -3.0f, 1.5f, 1.5f };
  for (int b = 0; b < N_BACKENDS; b++) {
    if (!available(backends[b])) { printf("  %s: not available, skipped\n", backends[b]); continue; }
    kiln_graph *g = strings_graph();
    kiln_options o = kiln_options_default();
    o.backend = backends[b];
    o.strict = 0;
    kiln_program *p = NULL;
    OK(kiln_program_compile(g, &o, &p));
    float y[4] = { 0 };
    for (int run = 0; p && run < 2; run++) {  /* the counts are per run, not accumulated */
      OK(kiln_program_run(p, (const void *[]){ in }, (void *[]){ y }));
      for (int i = 0; i < 4; i++) CHECK_MSG(y[i] == want[i], "%s: y[%d] = %g, expected %g", backends[b], i, y[i], want[i]);
      kiln_census c;
      OK(kiln_program_census(p, &c));
      CHECK_MSG(c.host_fallbacks == 3, "%s: %lld fallbacks", backends[b], (long long)c.host_fallbacks);
      CHECK_MSG(!strcmp(c.fallback_ops, "string_concat:2 label_encode:1"), "%s: fallback_ops '%s'", backends[b],
                c.fallback_ops);
      /* the largest tensor that crossed: 4 floats of the label encoding or 4 string pointers */
      int64_t big = (int64_t)(4 * sizeof(char *)) > 16 ? (int64_t)(4 * sizeof(char *)) : 16;
      CHECK_MSG(c.largest_fallback_bytes == big, "%s: largest fallback %lld bytes", backends[b],
                (long long)c.largest_fallback_bytes);
    }
    kiln_program_free(p);
    kiln_graph_free(g);
  }
}

static void same_strict(void) {
  char first[512] = "";
  for (int b = 0; b < N_BACKENDS; b++) {
    if (!available(backends[b])) continue;
    kiln_graph *g = strings_graph();
    kiln_options o = kiln_options_default();
    o.backend = backends[b];
    o.strict = 1;
    kiln_program *p = NULL;
    FAILS(KILN_ERR_FALLBACK, kiln_program_compile(g, &o, &p));
    CHECK(p == NULL);
    const char *msg = kiln_last_error();
    CHECK_MSG(strstr(msg, "op string_concat (t") && strstr(msg, "would run on the host (strict mode)"), "%s: '%s'",
              backends[b], msg);
    if (!first[0]) snprintf(first, sizeof first, "%s", msg);
    else CHECK_MSG(!strcmp(first, msg), "%s says '%s', ref says '%s'", backends[b], msg, first);
    kiln_graph_free(g);
  }
}

/* No opaque stage: no fallback anywhere, and an empty op list. */
static void no_fallbacks(void) {
  for (int b = 0; b < N_BACKENDS; b++) {
    if (!available(backends[b])) continue;
    kiln_graph *g;
    kiln_tensor x, y;
    int64_t s[1] = { 8 };
    OK(kiln_graph_create(&g));
    OK(kiln_graph_input(g, "x", KILN_F32, 1, s, &x));
    OK(kiln_graph_unary(g, KILN_EXP, x, &y));
    OK(kiln_graph_output(g, y, "y"));
    kiln_options o = kiln_options_default();
    o.backend = backends[b];
    o.strict = 1;
    kiln_program *p = NULL;
    OK(kiln_program_compile(g, &o, &p));
    float xv[8] = { 0 }, yv[8];
    if (p) OK(kiln_program_run(p, (const void *[]){ xv }, (void *[]){ yv }));
    kiln_census c;
    if (p) OK(kiln_program_census(p, &c));
    CHECK_MSG(p && c.host_fallbacks == 0 && c.fallback_ops[0] == 0 && c.largest_fallback_bytes == 0, "%s",
              backends[b]);
    CHECK_MSG(p && c.kernels_launched == (strcmp(backends[b], "ref") ? 1 : 0), "%s: %lld kernels", backends[b],
              p ? (long long)c.kernels_launched : -1LL);
    kiln_program_free(p);
    kiln_graph_free(g);
  }
}

int main(void) {
  same_census();
  same_strict();
  no_fallbacks();
  TEST_MAIN_END();
}
