/*
 * kiln — the command-line tool. One sub-command per file (cmd_*.c); this file
 * only dispatches.
 */
#include "tools.h"

#include <stdio.h>
#include <string.h>

static const struct { const char *name; int (*fn)(int, char **); const char *help; } commands[] = {
  { "demo", cmd_demo, "build a small MLP through the C API, run it, print plan and census" },
  { "run", cmd_run, "MODEL.onnx [--backend B] [--input NAME=FILE.pb]... [--check DIR]" },
  { "conformance", cmd_conformance, "DIR... [--backend B] [--expected FILE]" },
  { "plan", cmd_plan, "MODEL.onnx|WORKLOAD [--eager] [--dot FILE]" },
  { "train", cmd_train, "--model mlp|lenet [--epochs N] [--backend B]" },
  { "bench", cmd_bench, "MODEL_DIR|MODEL.onnx [--backend B] [--runs N] [--warmup N] [--threads N]" },
};

static int usage(void) {
  fprintf(stderr, "usage: kiln COMMAND [ARGS]\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(stderr, "  %-12s %s\n", commands[i].name, commands[i].help);
  return 2;
}

int main(int argc, char **argv) {
  if (argc < 2) return usage();
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
  fprintf(stderr, "kiln: unknown command '%s'\n", argv[1]);
  return usage();
}
