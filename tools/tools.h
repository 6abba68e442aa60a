/* The kiln command's sub-commands, one file each. argv[0] is the sub-command name. */
#ifndef KILN_TOOLS_H
#define KILN_TOOLS_H

#include "kiln.h"

int cmd_demo(int argc, char **argv);         /* cmd_demo.c */
int cmd_run(int argc, char **argv);          /* cmd_run.c */
int cmd_conformance(int argc, char **argv);  /* cmd_conformance.c */
int cmd_plan(int argc, char **argv);         /* cmd_plan.c */
int cmd_train(int argc, char **argv);        /* cmd_train.c */

#endif
