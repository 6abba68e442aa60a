/* kiln demo — placeholder until the command lands: fails loudly, never pretends. */
#include "tools.h"

#include <stdio.h>

int cmd_demo(int argc, char **argv) {
  (void)argc;
  fprintf(stderr, "kiln %s: not built yet\n", argv[0]);
  return 2;
}
