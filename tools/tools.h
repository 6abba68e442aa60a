/* The kiln command's sub-commands, one file each. argv[0] is the sub-command name. */
#ifndef KILN_TOOLS_H
#define KILN_TOOLS_H

#include "kiln.h"

#include <stdbool.h>
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
typedef struct TestResult {
  int status;
  kiln_status lib;   /* the kiln call that failed, or KILN_OK: the failure is this tool's own finding */
  bool lib_import;   /* that call imported the model (so its message should name the model file) */
  int lib_msg;       /* reason + lib_msg is that call's message, after this tool's words before it */
  double max_abs, max_rel;
  char reason[1024];
} TestResult;
void onnx_run_test(const OnnxTestSpec *spec, TestResult *r);

/* -- cli.c: the command line, read strictly; failures in one format -- */

/* A walk over a command's arguments argv[1..argc). Each reader below looks at the current
 * argument: it returns false when that is not its flag, else true, having taken the flag and
 * its value into *out. A missing or malformed value is reported ("kiln CMD: --runs: expected
 * a positive integer, got 'abc'"), sets bad and ends the walk: the command then prints its
 * usage and returns 2. -h or --help sets help and ends the walk too. */
typedef struct Cli {
  const char *cmd;  /* "run": messages begin "kiln run: " */
  int argc;
  char **argv;
  int i;            /* the argument being read */
  bool bad;         /* an argument error was reported */
  bool help;        /* -h or --help */
} Cli;

Cli cli_start(const char *cmd, int argc, char **argv);
bool cli_next(Cli *c);  /* to the next argument; false at the end, after an error, at --help */
/* Prints "kiln CMD: " and the message, sets bad; returns true (the argument was dealt with). */
bool cli_error(Cli *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool cli_flag(Cli *c, const char *flag, bool *out);                        /* no value: *out = true */
bool cli_str(Cli *c, const char *flag, const char *what, const char **out);  /* what: "NAME=FILE.pb" */
bool cli_int(Cli *c, const char *flag, int lo, int hi, int *out);           /* lo 0 or 1 */
bool cli_u64(Cli *c, const char *flag, uint64_t *out);
bool cli_real(Cli *c, const char *flag, bool zero_ok, double *out);         /* finite, > 0 (>= 0) */
bool cli_choice(Cli *c, const char *flag, const char *const *choices, const char **out);  /* NULL-ended */
/* Takes any argument: the model path when *model is unset, else "a second model path"; a
 * "-..." argument is an unknown option. */
bool cli_model(Cli *c, const char **model);
/* Takes any argument, as an error: an unknown option or an unexpected argument. */
bool cli_unknown(Cli *c);
/* The command's usage text: on stdout for --help (returns 0), else on stderr (returns 2). */
int cli_usage(const Cli *c, const char *text);

/* A failed kiln call as "STATUS: MESSAGE" into buf, the status word once (a message that
 * already begins with it is not given it again); with path, "STATUS: PATH: MESSAGE" unless
 * the message already begins with path. */
void cli_lib_message(kiln_status st, const char *path, const char *msg, char *buf, size_t cap);
/* Prints "kiln CMD: " and cli_lib_message of kiln_last_error() on one line; returns 1. */
int cli_lib_error(const char *cmd, kiln_status st, const char *path);

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
