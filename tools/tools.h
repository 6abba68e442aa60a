/* The kiln command's sub-commands, one file each. argv[0] is the sub-command name. */
#ifndef KILN_TOOLS_H
#define KILN_TOOLS_H

#include "kiln.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int cmd_demo(int argc, char **argv);         /* cmd_demo.c */
int cmd_run(int argc, char **argv);          /* cmd_run.c */
int cmd_conformance(int argc, char **argv);  /* cmd_conformance.c */
int cmd_plan(int argc, char **argv);         /* cmd_plan.c */
int cmd_train(int argc, char **argv);        /* cmd_train.c */
int cmd_bench(int argc, char **argv);        /* cmd_bench.c */

/* cmd_conformance.c: one ONNX test (model + test data), shared with `kiln run`. */
typedef struct OnnxTestSpec {
  const char *model;                 /* model.onnx */
  const char *data_dir;              /* test_data_set_N (input_K.pb, output_K.pb), or NULL */
  int n_named; const char *const *named; const char *const *named_files;  /* --input NAME=FILE */
  const char *backend;               /* NULL: the default */
  double rtol, atol;
  int verbose;                       /* print each output's shape and error, and the census */
} OnnxTestSpec;
enum { TEST_PASS, TEST_FAIL, TEST_SKIP };
typedef struct TestResult { int status; double max_abs, max_rel; char reason[1024]; } TestResult;
void onnx_run_test(const OnnxTestSpec *spec, TestResult *r);

/* -- helpers the commands share -- */

/* The folder part of path ("." for a bare file name, "/" for a file at the root) into buf. */
static inline void tools_dirname(const char *path, char *buf, size_t cap) {
  const char *slash = strrchr(path, '/');
  if (!slash) snprintf(buf, cap, ".");
  else if (slash == path) snprintf(buf, cap, "/");
  else snprintf(buf, cap, "%.*s", (int)(slash - path), path);
}

/* malloc for numel elements of t and one byte more (so an empty tensor gets a buffer too);
 * NULL when out of memory or when the size overflows. */
static inline void *tools_alloc_elems(int64_t numel, kiln_dtype t) {
  size_t size = kiln_dtype_size(t);
  if (numel < 0 || !size || (uint64_t)numel > (SIZE_MAX - 1) / size) return NULL;
  return malloc((size_t)numel * size + 1);
}

#endif
