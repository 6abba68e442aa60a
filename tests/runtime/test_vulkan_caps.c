/*
 * test_vulkan_caps.c — a device without an optional feature (shaderFloat64, 16-bit values in
 * memory), as KILN_VULKAN_WITHOUT makes lavapipe look: a kernel that needs one is refused at
 * compile time with KILN_ERR_UNSUPPORTED, a message naming the op, the kernel and the feature,
 * nothing run through a narrower type; f32 work (a row kernel, a contraction, a bool mask)
 * still compiles, declares no f64, and matches ref. Runs under KILN_TEST_BACKEND=vulkan (its
 * ctest entry sets KILN_VULKAN_WITHOUT); elsewhere it skips.
 */
#include "test.h"

#include <math.h>
#include <stdlib.h>

static unsigned long long seed = 41;

static kiln_status compile_on(kiln_graph *g, const char *be, kiln_program **p) {
  kiln_options o = kiln_options_default();
  o.backend = be, o.strict = true;
  *p = NULL;
  return kiln_program_compile(g, &o, p);
}

/* y = unary(x) of one dtype: refused by name when the device lacks the dtype's feature. */
static void refused(kiln_dtype t, const char *feature) {
  kiln_graph *g;
  kiln_tensor x, y;
  int64_t n = 64;
  OK(kiln_graph_create(&g));
  OK(kiln_graph_input(g, "x", t, 1, &n, &x));
  OK(kiln_graph_unary(g, KILN_ABS, x, &y));
  OK(kiln_graph_output(g, y, "y"));
  kiln_program *p;
  FAILS(KILN_ERR_UNSUPPORTED, compile_on(g, "vulkan", &p));
  CHECK(p == NULL);
  const char *e = kiln_last_error();
  CHECK_MSG(strstr(e, "op abs") && strstr(e, "kiln_k0") && strstr(e, feature) && strstr(e, "missing capability"),
            "%s: '%s'", kiln_dtype_name(t), e);
  kiln_graph_free(g);
}

/* softmax(x @ w) where x > 0 (a bool mask, 8-bit in memory), else 0: f32 only, on both. */
static void f32_still_runs(void) {
  kiln_graph *g;
  kiln_tensor x, w, h, s, zero, pos;
  int64_t xs[2] = { 33, 40 }, ws[2] = { 40, 24 }, one = 1;
  OK(kiln_graph_create(&g));
  OK(kiln_graph_input(g, "x", KILN_F32, 2, xs, &x));
  OK(kiln_graph_input(g, "w", KILN_F32, 2, ws, &w));
  OK(kiln_graph_matmul(g, x, w, &h));
  OK(kiln_graph_softmax(g, h, 1, &s));
  float z = 0;
  OK(kiln_graph_const(g, KILN_F32, 1, &one, &z, &zero));
  OK(kiln_graph_binary(g, KILN_GT, h, zero, &pos));
  OK(kiln_graph_output(g, s, "s"));
  OK(kiln_graph_output(g, pos, "pos"));
  float xv[33 * 40], wv[40 * 24], want[33 * 24], got[33 * 24];
  unsigned char wpos[33 * 24], gpos[33 * 24];
  for (int i = 0; i < 33 * 40; i++) xv[i] = (float)test_rand(&seed);
  for (int i = 0; i < 40 * 24; i++) wv[i] = (float)test_rand(&seed);
  const void *in[2] = { xv, wv };
  void *ref_out[2] = { want, wpos }, *vk_out[2] = { got, gpos };
  kiln_program *r, *v;
  OK(compile_on(g, "ref", &r));
  OK(compile_on(g, "vulkan", &v));
  if (r) OK(kiln_program_run(r, in, ref_out));
  for (int i = 0; i < 33 * 24; i++) got[i] = NAN, gpos[i] = 7;
  if (v) OK(kiln_program_run(v, in, vk_out));
  double worst = 0;
  for (int i = 0; i < 33 * 24; i++) {
    double d = fabs((double)got[i] - want[i]);
    if (!(d <= worst)) worst = d;
    CHECK_MSG(gpos[i] == wpos[i], "mask %d: %d, ref %d", i, gpos[i], wpos[i]);
  }
  CHECK_MSG(worst < 1e-5, "softmax(x @ w) on vulkan without f64: max |error| %g", worst);
  kiln_program_free(r);
  kiln_program_free(v);
  kiln_graph_free(g);
}

/* Integers of up to 32 bits to f32 go direct (no f64), with ref's values at the edges of f32's
 * integers; an i64 to f32 still goes through f64, so it is refused. */
static void int_casts(void) {
  static const kiln_dtype from[] = { KILN_I32, KILN_U32, KILN_I16, KILN_U8, KILN_BOOL };
  for (int f = 0; f < 5; f++) {
    bool sixteen = from[f] == KILN_I16;  /* withheld too: refused, checked above */
    kiln_graph *g;
    kiln_tensor x, y;
    int64_t n = 8;
    OK(kiln_graph_create(&g));
    OK(kiln_graph_input(g, "x", from[f], 1, &n, &x));
    OK(kiln_graph_cast(g, x, KILN_F32, &y));
    OK(kiln_graph_output(g, y, "y"));
    int32_t i32[8] = { 0, -1, 16777217, -16777219, 2147483647, -2147483647 - 1, 123456789, 7 };
    uint32_t u32[8] = { 0, 1, 16777217u, 4294967295u, 2147483648u, 33554431u, 99, 7 };
    uint8_t u8[8] = { 0, 1, 255, 128, 7, 9, 200, 3 }, b[8] = { 0, 1, 1, 0, 1, 0, 0, 1 };
    const void *data = from[f] == KILN_I32 ? (const void *)i32 : from[f] == KILN_U32 ? (const void *)u32
                       : from[f] == KILN_U8 ? (const void *)u8 : (const void *)b;
    float want[8], got[8];
    kiln_program *r, *v;
    OK(compile_on(g, "ref", &r));
    kiln_status st = compile_on(g, "vulkan", &v);
    if (sixteen) CHECK(st == KILN_ERR_UNSUPPORTED);
    else {
      OK(st);
      const void *in[1] = { data };
      void *ro[1] = { want }, *vo[1] = { got };
      if (r && v) {
        OK(kiln_program_run(r, in, ro));
        OK(kiln_program_run(v, in, vo));
        CHECK_MSG(!memcmp(want, got, sizeof got), "%s to f32: differs from ref", kiln_dtype_name(from[f]));
      }
    }
    kiln_program_free(r);
    kiln_program_free(v);
    kiln_graph_free(g);
  }
  kiln_graph *g;
  kiln_tensor x, y;
  int64_t n = 8;
  OK(kiln_graph_create(&g));
  OK(kiln_graph_input(g, "x", KILN_I64, 1, &n, &x));
  OK(kiln_graph_cast(g, x, KILN_F32, &y));
  OK(kiln_graph_output(g, y, "y"));
  kiln_program *v;
  FAILS(KILN_ERR_UNSUPPORTED, compile_on(g, "vulkan", &v));
  CHECK(strstr(kiln_last_error(), "op cast") && strstr(kiln_last_error(), "shaderFloat64"));
  kiln_graph_free(g);
}

int main(void) {
  const char *be = getenv("KILN_TEST_BACKEND");
  if (!be || strcmp(be, "vulkan")) {
    printf("skip: KILN_TEST_BACKEND is not vulkan\n");
    TEST_MAIN_END();
  }
  const char *without = getenv("KILN_VULKAN_WITHOUT");
  if (!without || !strstr(without, "shaderFloat64") || !strstr(without, "storageBuffer16BitAccess")) {
    CHECK(!"KILN_VULKAN_WITHOUT must withhold shaderFloat64 and storageBuffer16BitAccess");
    TEST_MAIN_END();
  }
  refused(KILN_F64, "shaderFloat64");
  refused(KILN_F16, "16-bit");  /* shaderInt16 or storageBuffer16BitAccess: the first the SPIR-V declares */
  refused(KILN_I16, "16-bit");
  f32_still_runs();
  int_casts();
  TEST_MAIN_END();
}
