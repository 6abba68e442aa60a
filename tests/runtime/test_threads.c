/*
 * Settings are per program: two programs with different options (fused and eager, each
 * with its own cache folder) compile and run at the same time from two threads, each
 * getting its own answer, kernel count and cache. Run under ASan in `make test`; a data
 * race in the pipeline, the compiler cache or the library loading shows up there or as a
 * wrong value here.
 */
#include "test.h"

#include <dirent.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

enum { N = 64, ROUNDS = 3 };

typedef struct Job {
  const char *backend;
  int fuse;
  char cache[256];
  int64_t kernels;      /* of the last run */
  int failures;
  char why[256];
} Job;

/* y = exp(-(x * 0.5 + 1)^2) on [N]: four ops; fused one kernel, eager four. */
static void expected(const float *x, float *y) {
  for (int i = 0; i < N; i++) {
    float t = x[i] * 0.5f + 1.0f;
    y[i] = expf(-(t * t));
  }
}

static kiln_status build(kiln_graph **out) {
  kiln_graph *g;
  kiln_tensor x, h, c, a, sq, ng, y, one;
  int64_t s[1] = { N };
  float half = 0.5f, onev = 1.0f;
  kiln_status st = kiln_graph_create(&g);
  if (!st) st = kiln_graph_input(g, "x", KILN_F32, 1, s, &x);
  if (!st) st = kiln_graph_const(g, KILN_F32, 0, NULL, &half, &h);
  if (!st) st = kiln_graph_const(g, KILN_F32, 0, NULL, &onev, &one);
  if (!st) st = kiln_graph_binary(g, KILN_MUL, x, h, &c);
  if (!st) st = kiln_graph_binary(g, KILN_ADD, c, one, &a);
  if (!st) st = kiln_graph_binary(g, KILN_MUL, a, a, &sq);
  if (!st) st = kiln_graph_unary(g, KILN_NEG, sq, &ng);
  if (!st) st = kiln_graph_unary(g, KILN_EXP, ng, &y);
  if (!st) st = kiln_graph_output(g, y, "y");
  if (st) kiln_graph_free(g);
  else *out = g;
  return st;
}

static void *work(void *arg) {
  Job *j = arg;
  float x[N], y[N], want[N];
  for (int i = 0; i < N; i++) x[i] = (float)(i - N / 2) / 8.0f + (j->fuse ? 0.0f : 0.125f);
  expected(x, want);
  for (int r = 0; r < ROUNDS && !j->failures; r++) {
    kiln_graph *g = NULL;
    kiln_program *p = NULL;
    kiln_options o = kiln_options_default();
    o.backend = j->backend;
    o.fuse = j->fuse;
    o.strict = 1;
    o.no_cache = r == 0;  /* the first round compiles, later ones may hit */
    snprintf(o.cache_dir, sizeof o.cache_dir, "%s", j->cache);
    kiln_status st = build(&g);
    if (!st) st = kiln_program_compile(g, &o, &p);
    for (int k = 0; !st && k < 4; k++) st = kiln_program_run(p, (const void *[]){ x }, (void *[]){ y });
    kiln_census c;
    if (!st) st = kiln_program_census(p, &c);
    if (st) {
      j->failures++;
      snprintf(j->why, sizeof j->why, "%s", kiln_last_error());  /* the error is per thread */
    }
    for (int i = 0; !st && i < N && !j->failures; i++)
      if (fabsf(y[i] - want[i]) > 1e-6f * (1 + fabsf(want[i]))) {
        j->failures++;
        snprintf(j->why, sizeof j->why, "y[%d] = %g, expected %g", i, y[i], want[i]);
      }
    if (!st) j->kernels = c.kernels_launched;
    kiln_program_free(p);
    kiln_graph_free(g);
  }
  return NULL;
}

static int count_objects(const char *dir) {
  DIR *d = opendir(dir);
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d));) n += strstr(e->d_name, ".so") != NULL;
  if (d) closedir(d);
  return n;
}

static void remove_dir(const char *dir) {
  DIR *d = opendir(dir);
  char path[512];
  for (struct dirent *e; d && (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    unlink(path);
  }
  if (d) closedir(d);
  rmdir(dir);
}

int main(void) {
  char base[] = "/tmp/kiln-threads-XXXXXX";
  CHECK(mkdtemp(base) != NULL);
  Job jobs[3] = { { .backend = "cpu", .fuse = 1 }, { .backend = "cpu", .fuse = 0 }, { .backend = "ref", .fuse = 1 } };
  for (int i = 0; i < 3; i++) snprintf(jobs[i].cache, sizeof jobs[i].cache, "%s/c%d", base, i);
  pthread_t t[3];
  for (int i = 0; i < 3; i++) CHECK(pthread_create(&t[i], NULL, work, &jobs[i]) == 0);
  for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < 3; i++) CHECK_MSG(!jobs[i].failures, "job %d (%s, fuse %d): %s", i, jobs[i].backend, jobs[i].fuse, jobs[i].why);
  CHECK_MSG(jobs[0].kernels == 1, "fused: %lld kernels", (long long)jobs[0].kernels);
  CHECK_MSG(jobs[1].kernels == 5, "eager: %lld kernels", (long long)jobs[1].kernels);
  CHECK_MSG(jobs[2].kernels == 0, "ref: %lld kernels", (long long)jobs[2].kernels);
  /* each program compiled into the folder its own options named */
  CHECK_MSG(count_objects(jobs[0].cache) >= 1 && count_objects(jobs[1].cache) >= 1, "cache folders: %d, %d objects",
            count_objects(jobs[0].cache), count_objects(jobs[1].cache));
  CHECK(count_objects(jobs[2].cache) == 0);  /* ref compiles nothing */
  for (int i = 0; i < 3; i++) remove_dir(jobs[i].cache);
  rmdir(base);
  TEST_MAIN_END();
}
