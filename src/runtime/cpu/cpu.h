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
/* `cc --version` of compiler cc, read once per process and compiler. */
void cpu_cc_identity(const char *cc, char out[512]);
/* Compiles src with o->cc into a shared object and loads it, or loads the one cached in
 * o->cache_dir when its stored source equals src (never with o->no_cache). *hit says which. */
kiln_status cpu_build(const char *src, size_t len, const kiln_options *o, void **dl, bool *hit);

#endif
