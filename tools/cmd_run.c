/*
 * kiln run MODEL.onnx [--backend B] [--input NAME=FILE.pb]... [--check DIR/test_data_set_0]
 *                     [--rtol R] [--atol A]
 *
 * Loads an ONNX model, compiles it for a backend, runs it once and prints each
 * output's dtype and shape, the largest absolute and relative error against the
 * reference outputs (DIR/output_K.pb, with --check), and the run's census. Inputs come
 * from --input files (by name) or, with --check, from DIR/input_K.pb (by position).
 * Exit status: 0 when the run succeeded and matched its references, 1 when it failed
 * (a file that cannot be read, a bad model, an --input name the model lacks, outputs that
 * differ), 2 for a malformed command line.
 */
#include "tools.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NAMED 64

static const char usage[] =
    "usage: kiln run MODEL.onnx [--backend B] [--input NAME=FILE.pb]... [--check DIR/test_data_set_0]\n"
    "                [--rtol R (default 1e-3)] [--atol A (default 1e-5)]\n"
    "  exit status: 0 the outputs match (or ran, without --check), 1 the run failed, 2 a usage error\n";

/* The --input NAME=FILE.pb arguments. */
typedef struct Named {
  int n;
  const char *names[MAX_NAMED], *files[MAX_NAMED];  /* names point into owned, files into argv */
  char *owned[MAX_NAMED];                           /* each a copy of the argument, cut at its '=' */
} Named;

static bool take_input(Cli *c, Named *in) {
  const char *v = NULL;
  if (!cli_str(c, "--input", "NAME=FILE.pb", &v)) return false;
  if (!v) return true;  /* reported */
  const char *eq = strchr(v, '=');
  if (!eq || eq == v || !eq[1]) return cli_error(c, "--input: expected NAME=FILE.pb, got '%s'", v);
  if (in->n == MAX_NAMED) return cli_error(c, "--input: more than %d inputs", MAX_NAMED);
  if (!(in->owned[in->n] = strdup(v))) return cli_error(c, "out of memory");
  in->owned[in->n][eq - v] = 0;
  in->names[in->n] = in->owned[in->n], in->files[in->n] = eq + 1;
  in->n++;
  return true;
}

/* Runs the model once; prints the outcome and returns the exit status. A failure is one line:
 * a kiln call's status and message (an import's naming the model file), or this tool's own. */
static int run_once(OnnxTestSpec *spec, const Named *in) {
  spec->n_named = in->n, spec->named = in->names, spec->named_files = in->files;
  TestResult r;
  onnx_run_test(spec, &r);
  if (r.status == TEST_PASS) {
    printf("%s\n", spec->data_dir ? "outputs match the references" : "ran (no references to check)");
    return 0;
  }
  char buf[2048];
  if (r.lib) cli_lib_message(r.lib, r.lib_import ? spec->model : NULL, r.reason + r.lib_msg, buf, sizeof buf);
  fprintf(stderr, "kiln run: %s\n", r.lib ? buf : r.reason);
  return 1;
}

int cmd_run(int argc, char **argv) {
  OnnxTestSpec spec = { 0 };
  Named in = { 0 };
  /* a whole model's reference (PyTorch's f32) carries rounding through every layer: rtol 1e-3,
   * atol 1e-5 by default; kiln conformance keeps the node tests' 1e-7 */
  spec.rtol = 1e-3, spec.atol = 1e-5, spec.verbose = 1;
  Cli c = cli_start("run", argc, argv);
  while (cli_next(&c))
    if (!cli_str(&c, "--backend", "B", &spec.backend) && !cli_str(&c, "--check", "DIR", &spec.data_dir) &&
        !cli_real(&c, "--rtol", true, &spec.rtol) && !cli_real(&c, "--atol", true, &spec.atol) && !take_input(&c, &in))
      cli_model(&c, &spec.model);
  if (!c.bad && !c.help && !spec.model) cli_error(&c, "no model path given");
  int rc = c.bad || c.help ? cli_usage(&c, usage) : run_once(&spec, &in);
  for (int i = 0; i < in.n; i++) free(in.owned[i]);
  return rc;
}
