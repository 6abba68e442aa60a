/*
 * test_slice_axis — graph_slice_axis, the one ONNX Slice clamping (kiln_graph_slice and
 * the ONNX importer both call it), on the edges: a step of INT64_MIN (no negation), -1,
 * INT64_MAX, starts and ends of INT64_MIN / INT64_MAX, just past -d, empty and huge
 * dims (under the sanitizer build an intermediate overflow fails the run). Expected
 * values follow the ONNX text: negative start/end + d, then start clamped into [0, d]
 * ([0, d-1] for negative steps), end into [0, d] ([-1, d-1]); counted by hand. Then one
 * negative-step slice whose start is below -d runs on ref and selects element 0.
 */
#include "graph/graph.h"
#include "test.h"

typedef struct { int64_t d, start, end, step, first, stride, count; } Case;

static const Case cases[] = {
  /* d = 10 */
  { 10, 5, INT64_MIN, INT64_MIN, 5, -1, 1 },          /* one element: 5 */
  { 10, INT64_MAX, INT64_MIN, INT64_MIN, 9, -1, 1 },  /* start clamps to 9 */
  { 10, INT64_MIN, INT64_MIN, INT64_MIN, 0, -1, 1 },  /* start clamps to 0, end to -1: element 0 */
  { 10, 0, 0, INT64_MIN, 0, -1, 0 },
  { 10, -1, INT64_MIN, -1, 9, -1, 10 },               /* 9 down to 0 */
  { 10, INT64_MAX, INT64_MAX, -1, 0, -1, 0 },          /* start 9, end 9: empty */
  { 10, INT64_MIN, INT64_MIN, -1, 0, -1, 1 },          /* element 0 */
  { 10, -11, -12, -1, 0, -1, 1 },                      /* just past -d: start 0, end -1 */
  { 10, -10, -11, -1, 0, -1, 1 },
  { 10, 3, -8, -1, 3, -1, 1 },                         /* end -8 + 10 = 2: element 3 */
  { 10, 3, 1, -1, 3, -1, 2 },                          /* 3 2 */
  { 10, -3, INT64_MAX, 3, 7, 1, 1 },                   /* 7 (10 is past the end) */
  { 10, 1, 10, 4, 1, 4, 3 },                           /* 1 5 9 */
  { 10, 100, 0, -4, 9, -4, 3 },                        /* 9 5 1 */
  { 10, INT64_MAX, INT64_MIN, -3, 9, -3, 4 },          /* 9 6 3 0 */
  { 10, INT64_MIN, INT64_MAX, 1, 0, 1, 10 },
  { 10, INT64_MAX, INT64_MAX, 1, 0, 1, 0 },
  { 10, 0, INT64_MAX, INT64_MAX, 0, 1, 1 },
  { 10, INT64_MIN, INT64_MAX, INT64_MAX, 0, 1, 1 },
  /* empty dim */
  { 0, 0, INT64_MAX, 1, 0, 1, 0 },
  { 0, INT64_MAX, INT64_MIN, -1, 0, -1, 0 },
  { 0, INT64_MIN, INT64_MIN, INT64_MIN, 0, -1, 0 },
  /* the largest dim: nothing in the arithmetic may overflow */
  { INT64_MAX, -1, INT64_MAX, 1, INT64_MAX - 1, 1, 1 },
  { INT64_MAX, INT64_MIN, INT64_MIN, -1, 0, -1, 1 },
  { INT64_MAX, -1, INT64_MIN, -1, INT64_MAX - 1, -1, INT64_MAX },
  { INT64_MAX, INT64_MIN, INT64_MAX, 2, 0, 2, INT64_C(1) << 62 },
  { INT64_MAX, INT64_MAX, INT64_MIN, INT64_MIN, INT64_MAX - 1, -1, 1 },
  { INT64_MAX, INT64_MIN, INT64_MAX, INT64_MAX, 0, 1, 1 },
};

static void test_cases(void) {
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const Case *c = &cases[i];
    int64_t first = -7, stride = -7, count = -7;
    graph_slice_axis(c->d, c->start, c->end, c->step, &first, &stride, &count);
    CHECK_MSG(first == c->first && stride == c->stride && count == c->count,
              "case %zu (d %lld, %lld:%lld:%lld): first %lld stride %lld count %lld, expected %lld %lld %lld", i,
              (long long)c->d, (long long)c->start, (long long)c->end, (long long)c->step, (long long)first,
              (long long)stride, (long long)count, (long long)c->first, (long long)c->stride, (long long)c->count);
  }
}

/* x[INT64_MIN::-1] of [1 2 3 4]: start clamps to 0 (ONNX: [0, d-1] for negative steps). */
static void test_values(void) {
  kiln_graph *G = NULL;
  kiln_tensor tx, ty;
  double x[4] = { 1, 2, 3, 4 }, y[1] = { 0 };
  OK(kiln_graph_create(&G));
  if (!G) return;
  OK(kiln_graph_input(G, "x", KILN_F64, 1, (int64_t[]){ 4 }, &tx));
  OK(kiln_graph_slice(G, tx, 1, (int64_t[]){ INT64_MIN }, (int64_t[]){ INT64_MIN }, NULL, (int64_t[]){ -1 }, &ty));
  OK(kiln_graph_output(G, ty, "y"));
  kiln_options o = kiln_options_default();
  o.backend = "ref";
  kiln_program *p = NULL;
  OK(kiln_program_compile(G, &o, &p));
  if (p) OK(kiln_program_run(p, (const void *[]){ x }, (void *[]){ y }));
  CHECK(y[0] == 1);
  kiln_program_free(p);
  kiln_graph_free(G);
}

int main(void) {
  test_cases();
  test_values();
  TEST_MAIN_END();
}
