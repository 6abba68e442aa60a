/*
 * kiln — the command-line tool. One sub-command per file (cmd_*.c); this file
 * only dispatches. Every command exits 0 on success, 1 when its work failed, 2 for a usage
 * error (which names the argument, then prints the command's usage); `kiln CMD --help`
 * prints the usage on stdout.
 */
#include "tools.h"

#include <stdio.h>
#include <string.h>

static const struct { const char *name; int (*fn)(int, char **); const char *help; } commands[] = {
  { "demo", cmd_demo, "build a small MLP through the C API, run it, print plan and census" },
  { "run", cmd_run, "MODEL.onnx [--backend B] [--input NAME=FILE.pb]... [--check DIR] [--rtol R] [--atol A]" },
  { "conformance", cmd_conformance, "DIR... [--backend B] [--expected FILE] [--every N] [--timeout S]" },
  { "plan", cmd_plan, "MODEL.onnx|WORKLOAD [--eager] [--cse] [--dot FILE] [--source c|cuda|glsl] [--launches]" },
  { "train", cmd_train, "--model mlp|lenet [--epochs N] [--backend B] [--batch N] [--optim sgd|adam]" },
  { "bench", cmd_bench, "MODEL_DIR|MODEL.onnx [--backend B] [--runs N] [--warmup N] [--threads N]" },
};

static int usage(bool help) {
  FILE *f = help ? stdout : stderr;
  fprintf(f, "usage: kiln COMMAND [ARGS]   (kiln COMMAND --help for all of a command's options)\n");
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].help);
  fprintf(f, "exit status: 0 success, 1 the command's work failed, 2 a usage error\n");
  return help ? 0 : 2;
}

int main(int argc, char **argv) {
  if (argc < 2) return usage(false);
  if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) return usage(true);
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
  fprintf(stderr, "kiln: unknown command '%s'\n", argv[1]);
  return usage(false);
}
