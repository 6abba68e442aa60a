/*
 * cpu.h — private to the cpu backend: compiling generated C into a shared object,
 * with the on-disk cache (cache.c), used by cpu.c.
 */
#ifndef KILN_CPU_H
#define KILN_CPU_H

#include "../runtime.h"

/* -- cache.c -- */

/* The flags every kernel library is compiled with, as one string (census, print). */
const char *cpu_cc_flags(void);
/* `cc --version`, read once per process. */
const char *cpu_cc_identity(void);
/* The cache folder: $XDG_CACHE_HOME/kiln, else $HOME/.cache/kiln (created). */
kiln_status cpu_cache_dir(char *out, size_t n);
/* Compiles src into a shared object and loads it, or loads the cached one when its
 * stored source equals src. *hit says which. */
kiln_status cpu_build(const char *src, size_t len, void **dl, bool *hit);

#endif
