/*
 * test_cpu_cache.c — the cpu backend's on-disk cache: a second compile of the same
 * graph is a hit; a cached object whose stored source differs from the requested
 * source is not used (recompiled: a miss), and the values stay right; a wrapper of the same
 * compiler has entries of its own.
 */
#include "test.h"

#include <dirent.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[] = "/tmp/kiln-test-cache-XXXXXX";

static kiln_census compile_run_cc(kiln_graph *g, const float *x, float *y, const char *cc) {
  kiln_options o = kiln_options_default();
  o.backend = "cpu";
  if (cc) snprintf(o.cc, sizeof o.cc, "%s", cc);
  snprintf(o.cache_dir, sizeof o.cache_dir, "%s/kiln", dir);  /* this program's own cache */
  kiln_program *p = NULL;
  kiln_census c = { 0 };
  OK(kiln_program_compile(g, &o, &p));
  if (!p) return c;
  OK(kiln_program_run(p, (const void *const[]){ x }, (void *const[]){ y }));
  OK(kiln_program_census(p, &c));
  kiln_program_free(p);
  return c;
}

static kiln_census compile_run(kiln_graph *g, const float *x, float *y) { return compile_run_cc(g, x, y, NULL); }

/* Rewrites every stored source in the cache folder (keeps its length: flips a comment). */
static int tamper(void) {
  char path[256];
  int n = 0;
  snprintf(path, sizeof path, "%s/kiln", dir);
  DIR *d = opendir(path);
  if (!d) return 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t len = strlen(e->d_name);
    if (len < 3 || strcmp(e->d_name + len - 2, ".c")) continue;
    char file[512];
    snprintf(file, sizeof file, "%s/%s", path, e->d_name);
    FILE *f = fopen(file, "r+b");
    if (!f) continue;
    fseek(f, -2, SEEK_END);
    fputc('X', f);  /* the source ends "}\n": now "X\n", so it differs byte for byte */
    fclose(f);
    n++;
  }
  closedir(d);
  return n;
}

int main(void) {
  if (!mkdtemp(dir)) return 1;
  kiln_graph *g;
  OK(kiln_graph_create(&g));
  int64_t n = 1000;
  kiln_tensor x, t, y;
  OK(kiln_graph_input(g, "x", KILN_F32, 1, &n, &x));
  OK(kiln_graph_unary(g, KILN_TANH, x, &t));
  OK(kiln_graph_binary(g, KILN_MUL, t, x, &y));
  OK(kiln_graph_output(g, y, "y"));
  float xs[1000], ys[1000];
  for (int i = 0; i < 1000; i++) xs[i] = (float)(i - 500) / 100.0f;
  kiln_census c1 = compile_run(g, xs, ys);
  CHECK(c1.cache_hit == 0);
  kiln_census c2 = compile_run(g, xs, ys);
  CHECK(c2.cache_hit == 1);
  CHECK(tamper() == 1);
  memset(ys, 0, sizeof ys);
  kiln_census c3 = compile_run(g, xs, ys);
  CHECK_MSG(c3.cache_hit == 0, "a cached object with a different stored source was used");
  for (int i = 0; i < 1000; i++) CHECK_NEAR(ys[i], tanhf(xs[i]) * xs[i], 1e-6);
  kiln_census c4 = compile_run(g, xs, ys);  /* the recompile replaced the entry */
  CHECK(c4.cache_hit == 1);
  /* a wrapper of the same compiler (the same --version) is another compiler: its own entry */
  char wrap[256];
  snprintf(wrap, sizeof wrap, "%s/cc-wrapper", dir);
  FILE *f = fopen(wrap, "w");
  if (f) {
    fputs("#!/bin/sh\nexec cc \"$@\"\n", f);
    fclose(f);
    chmod(wrap, 0700);
    kiln_census c5 = compile_run_cc(g, xs, ys, wrap);
    CHECK_MSG(c5.cache_hit == 0, "a wrapper of cc was handed cc's cached object");
    for (int i = 0; i < 1000; i++) CHECK_NEAR(ys[i], tanhf(xs[i]) * xs[i], 1e-6);
  }
  kiln_graph_free(g);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd)) {}
  TEST_MAIN_END();
}
