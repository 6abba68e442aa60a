/*
 * kiln run MODEL.onnx [--backend B] [--input NAME=FILE.pb]... [--check DIR/test_data_set_0]
 *
 * Loads an ONNX model, compiles it for a backend, runs it once and prints each
 * output's dtype and shape, the largest absolute and relative error against the
 * reference outputs (DIR/output_K.pb, with --check), and the run's census. Inputs come
 * from --input files (by name) or, with --check, from DIR/input_K.pb (by position).
 * Exit status: 0 when the run succeeded and matched its references, 1 otherwise.
 */
#include "tools.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NAMED 64

static int usage(void) {
  fprintf(stderr, "usage: kiln run MODEL.onnx [--backend B] [--input NAME=FILE.pb]... [--check DIR/test_data_set_0]\n"
                  "       [--rtol R] [--atol A]\n");
  return 2;
}

int cmd_run(int argc, char **argv) {
  OnnxTestSpec spec = { 0 };
  const char *names[MAX_NAMED], *files[MAX_NAMED];
  char *owned[MAX_NAMED];
  int n = 0;
  spec.rtol = 1e-3, spec.atol = 1e-7, spec.verbose = 1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--backend") && i + 1 < argc) spec.backend = argv[++i];
    else if (!strcmp(argv[i], "--check") && i + 1 < argc) spec.data_dir = argv[++i];
    else if (!strcmp(argv[i], "--rtol") && i + 1 < argc) spec.rtol = atof(argv[++i]);
    else if (!strcmp(argv[i], "--atol") && i + 1 < argc) spec.atol = atof(argv[++i]);
    else if (!strcmp(argv[i], "--input") && i + 1 < argc) {
      char *eq = strchr(argv[++i], '=');
      if (!eq || n == MAX_NAMED) return usage();
      owned[n] = strdup(argv[i]);
      if (!owned[n]) return 2;
      owned[n][eq - argv[i]] = 0;
      names[n] = owned[n], files[n] = eq + 1;
      n++;
    } else if (argv[i][0] == '-' || spec.model) {
      return usage();
    } else {
      spec.model = argv[i];
    }
  }
  if (!spec.model) return usage();
  spec.n_named = n, spec.named = names, spec.named_files = files;
  TestResult r;
  onnx_run_test(&spec, &r);
  for (int i = 0; i < n; i++) free(owned[i]);
  if (r.status == TEST_PASS) {
    printf("%s\n", spec.data_dir ? "outputs match the references" : "ran (no references to check)");
    return 0;
  }
  fprintf(stderr, "kiln run: %s: %s\n", r.status == TEST_SKIP ? "unsupported" : "failed", r.reason);
  return 1;
}
