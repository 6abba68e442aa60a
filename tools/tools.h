/* The kiln command's sub-commands, one file each. argv[0] is the sub-command name. */
#ifndef KILN_TOOLS_H
#define KILN_TOOLS_H

#include "kiln.h"

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

#endif
