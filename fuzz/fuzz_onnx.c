/*
 * fuzz_onnx.c — libFuzzer target for the ONNX loader: the bytes are a ModelProto
 * (and, the same bytes, a TensorProto). Imports into a graph and frees it, and reads the
 * declared inputs and outputs as kiln_model_open does; any crash, leak, sanitizer report or
 * missing error message is a finding.
 *
 *   make fuzz                       # builds build-fuzz/fuzz_onnx, seeds, runs 60 s
 *   make fuzz FUZZ_SECONDS=600      # longer
 *   build-fuzz/fuzz_onnx -runs=1000000 build-fuzz/corpus   # by executions
 *
 * No base folder is given, so external data is always refused here (the path checks
 * are tested in tests/onnx/test_hostile.c).
 */
#include "graph/graph.h"

#include <stdlib.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  Graph *g = NULL;
  kiln_status s = graph_load_onnx(data, size, NULL, &g);
  if (s == KILN_OK) {
    if (!g || graph_check(g) != KILN_OK) abort();  /* an accepted model must be a valid graph */
    graph_free(g);
  } else if (g || !kiln_last_error()[0]) {
    abort();  /* a failure must leave no graph and say why */
  }
  Arena a = { 0 };
  kiln_model_tensor *in, *out;
  int n_in, n_out;
  s = onnx_declared_io(data, size, &a, &in, &n_in, &out, &n_out);
  if (s != KILN_OK && !kiln_last_error()[0]) abort();
  for (int i = 0; s == KILN_OK && i < n_in; i++)  /* inputs are typed tensors of a known rank or none */
    if (!in[i].name || in[i].dtype < 0 || in[i].rank > KILN_MAX_RANK) abort();
  arena_free(&a);
  OnnxTensor t;
  if (onnx_read_tensor(data, size, NULL, &t) == KILN_OK) onnx_tensor_clear(&t);
  return 0;
}
