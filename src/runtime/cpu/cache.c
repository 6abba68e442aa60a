/*
 * cache.c — generated C to a loaded shared object. Takes source text, produces a
 * dlopen handle. The object is cached in the program's cache folder (options.cache_dir)
 * as <key>.so with the source beside it as <key>.c; the key hashes the source, the
 * compiler's identity (`cc --version` of options.cc) and the flags. A hit is
 * trusted only when the stored source equals the requested one byte for byte; a
 * mismatch (a hash collision, a stale or tampered file) is compiled again.
 * Each compile runs in a private temporary folder inside the cache folder, which is
 * removed afterwards; the finished files are renamed into place, so a reader never
 * sees a half-written object. The compiler is started without a shell.
 *
 * A large source is compiled in pieces, one compiler per CPU (at most MAX_PARTS): each
 * piece is the head of the source (prelude and every kernel's prototype, what precedes
 * the first kernel) and a run of whole kernels; the objects are linked into the one
 * shared object. If a piece fails, the whole source is compiled again in one piece, so
 * that the compiler's message has the source's own line numbers.
 */
#include "cpu.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* -fno-trapping-math: kiln never reads the FP exception flags, and with trapping maths on GCC
 * will not if-convert the selects of k_expf, k_tanhf and k_erff, so every loop over them (a
 * softmax's exp, a GELU) stayed scalar. It changes no result: no operation is reassociated. */
static const char *const cc_flags[] = {
  "-O3", "-march=native", "-fopenmp", "-fPIC", "-shared", "-fno-math-errno", "-fno-trapping-math", "-std=gnu11", "-w",
};
enum { N_FLAGS = sizeof cc_flags / sizeof cc_flags[0] };

const char *cpu_cc_flags(void) {
  return "-O3 -march=native -fopenmp -fPIC -shared -fno-math-errno -fno-trapping-math -std=gnu11 -w";
}

/* `cc --version` per compiler name, read once per process (a handful of names at most). */
enum { N_IDENTITIES = 8, IDENTITY_N = 512 };
static struct { char cc[256]; char text[IDENTITY_N]; } identities[N_IDENTITIES];
static int n_identities;
static pthread_mutex_t identity_lock = PTHREAD_MUTEX_INITIALIZER;

static void read_identity(const char *cc, char *identity) {
  int fd[2];
  snprintf(identity, IDENTITY_N, "%s (version unknown)", cc);
  if (pipe(fd)) return;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fd[1], 1);
  posix_spawn_file_actions_addclose(&fa, fd[0]);
  char *argv[] = { (char *)cc, "--version", NULL };
  pid_t pid;
  int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fd[1]);
  if (rc == 0) {
    size_t n = 0;
    ssize_t got;
    char buf[IDENTITY_N];
    while (n < sizeof buf - 1 && (got = read(fd[0], buf + n, sizeof buf - 1 - n)) > 0) n += (size_t)got;
    buf[n] = 0;
    int status;
    waitpid(pid, &status, 0);
    if (n) memcpy(identity, buf, n + 1);
  }
  close(fd[0]);
}

void cpu_cc_identity(const char *cc, char out[512]) {
  pthread_mutex_lock(&identity_lock);
  int i = 0;
  while (i < n_identities && strcmp(identities[i].cc, cc)) i++;
  if (i == n_identities) {
    if (n_identities == N_IDENTITIES) i = N_IDENTITIES - 1;  /* full: the last slot is read again */
    else n_identities++;
    snprintf(identities[i].cc, sizeof identities[i].cc, "%s", cc);
    read_identity(cc, identities[i].text);
  }
  memcpy(out, identities[i].text, IDENTITY_N);
  pthread_mutex_unlock(&identity_lock);
}

enum { PATH_N = 4200 };

/* out = a + b; the cache folder is at most 4000 bytes, so this always fits. */
static void join(char *out, const char *a, const char *b) {
  size_t la = strlen(a), lb = strlen(b);
  KILN_ASSERT(la + lb < PATH_N);
  memcpy(out, a, la);
  memcpy(out + la, b, lb + 1);
}


enum { MAX_PARTS = 4 };
#define SPLIT_BYTES ((size_t)16 << 10)  /* smaller sources compile in one piece */

/* Starts argv with stderr into log; the child's pid, or -1 with *err set. */
static pid_t spawn_cc(char *const *argv, const char *log, int *err) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 2, log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid;
  *err = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  return *err ? -1 : pid;
}

static bool wait_ok(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* Where the source splits into n pieces: head_end is the start of the first kernel
 * ("\n/\* kernel "), cut[0..n] the pieces' bounds, each at a kernel's start; the pieces
 * found (fewer than n when there are fewer kernels), 1 when it does not split. */
static int split_source(const char *src, size_t len, int n, size_t *head_end, size_t *cut) {
  static const char mark[] = "\n/* kernel ";
  const char *first = memmem(src, len, mark, sizeof mark - 1);
  if (!first || n < 2 || len < SPLIT_BYTES) return 1;
  *head_end = (size_t)(first - src) + 1;
  int parts = 0;
  cut[parts++] = *head_end;
  for (int i = 1; i < n; i++) {
    size_t want = *head_end + (len - *head_end) * (size_t)i / (size_t)n;
    const char *at = memmem(src + want, len - want, mark, sizeof mark - 1);
    if (!at) break;
    size_t c = (size_t)(at - src) + 1;
    if (c > cut[parts - 1]) cut[parts++] = c;
  }
  cut[parts] = len;
  return parts;
}

/* dir/k.c compiled in pieces dir/k<i>.c -> dir/k<i>.o, linked into dir/k.so; false when it
 * did not split or a piece failed (the caller compiles the whole). */
static bool run_cc_parts(const char *cc, const char *dir, const char *src, size_t len) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int n = cpus < 2 ? 1 : cpus > MAX_PARTS ? MAX_PARTS : (int)cpus;
  size_t head = 0, cut[MAX_PARTS + 1];
  int parts = split_source(src, len, n, &head, cut);
  if (parts < 2) return false;
  char cfile[MAX_PARTS][PATH_N], ofile[MAX_PARTS][PATH_N], log[PATH_N], sofile[PATH_N];
  pid_t pid[MAX_PARTS];
  bool ok = true;
  int started = 0;
  join(log, dir, "/cc.log");
  for (int i = 0; i < parts && ok; i++) {
    char name[16];
    snprintf(name, sizeof name, "/k%d.c", i);
    join(cfile[i], dir, name);
    snprintf(name, sizeof name, "/k%d.o", i);
    join(ofile[i], dir, name);
    FILE *f = fopen(cfile[i], "wb");
    ok = f && fwrite(src, 1, head, f) == head && fwrite(src + cut[i], 1, cut[i + 1] - cut[i], f) == cut[i + 1] - cut[i];
    if (f && fclose(f)) ok = false;
    if (!ok) break;
    char *argv[N_FLAGS + 6];
    int a = 0;
    argv[a++] = (char *)cc;
    for (int q = 0; q < N_FLAGS; q++)
      if (strcmp(cc_flags[q], "-shared")) argv[a++] = (char *)cc_flags[q];
    argv[a++] = "-c";
    argv[a++] = "-o";
    argv[a++] = ofile[i];
    argv[a++] = cfile[i];
    argv[a] = NULL;
    int err;
    pid[i] = spawn_cc(argv, log, &err);
    if (pid[i] < 0) ok = false;
    else started = i + 1;
  }
  for (int i = 0; i < started; i++) ok = wait_ok(pid[i]) && ok;
  if (ok) {
    join(sofile, dir, "/k.so");
    char *argv[MAX_PARTS + 8];
    int a = 0;
    argv[a++] = (char *)cc;
    argv[a++] = "-shared";
    argv[a++] = "-fopenmp";
    argv[a++] = "-o";
    argv[a++] = sofile;
    for (int i = 0; i < parts; i++) argv[a++] = ofile[i];
    argv[a++] = "-lm";
    argv[a] = NULL;
    int err;
    pid_t p = spawn_cc(argv, log, &err);
    ok = p >= 0 && wait_ok(p);
  }
  for (int i = 0; i < parts; i++) {
    char name[16];
    snprintf(name, sizeof name, "/k%d.c", i);
    join(cfile[0], dir, name);
    unlink(cfile[0]);
    snprintf(name, sizeof name, "/k%d.o", i);
    join(cfile[0], dir, name);
    unlink(cfile[0]);
  }
  return ok;
}

/* Runs cc on dir/k.c into dir/k.so, stderr into dir/cc.log. */
static kiln_status run_cc(const char *cc, const char *dir) {
  char cfile[PATH_N], sofile[PATH_N], log[PATH_N];
  join(cfile, dir, "/k.c");
  join(sofile, dir, "/k.so");
  join(log, dir, "/cc.log");
  char *argv[N_FLAGS + 6];
  int n = 0;
  argv[n++] = (char *)cc;
  for (int i = 0; i < N_FLAGS; i++) argv[n++] = (char *)cc_flags[i];
  argv[n++] = "-o";
  argv[n++] = sofile;
  argv[n++] = cfile;
  argv[n++] = "-lm";
  argv[n] = NULL;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 2, log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid;
  int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc) return kiln_fail(KILN_ERR_COMPILE, "cpu: cannot start the C compiler '%s': %s", argv[0], strerror(rc));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return KILN_OK;
  size_t len = 0;
  char *msg = rt_file_read(log, &len);
  kiln_status st = kiln_fail(KILN_ERR_COMPILE, "cpu: '%s' failed on generated source: %.1500s", argv[0],
                             msg ? msg : "(no output)");
  kiln_free(msg);
  return st;
}

static void remove_tmp(const char *dir) {
  static const char *const names[] = { "/k.c", "/k.so", "/cc.log" };
  char path[PATH_N];
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    join(path, dir, names[i]);
    unlink(path);
  }
  rmdir(dir);
}

static kiln_status compile_into_cache(const char *cc, const char *cache, const char *key, const char *src, size_t len,
                                      void **dl) {
  char dir[PATH_N], final_so[PATH_N], final_c[PATH_N], cfile[PATH_N], sofile[PATH_N], name[64];
  join(dir, cache, "/tmp-XXXXXX");
  if (!mkdtemp(dir)) return kiln_fail(KILN_ERR_IO, "cpu: cannot make a temporary folder in '%s': %s", cache, strerror(errno));
  join(cfile, dir, "/k.c");
  join(sofile, dir, "/k.so");
  kiln_status st = KILN_OK;
  if (!rt_file_write(cfile, src, len)) st = kiln_fail(KILN_ERR_IO, "cpu: cannot write '%s'", cfile);
  if (!st && !run_cc_parts(cc, dir, src, len)) st = run_cc(cc, dir);
  if (!st) {
    /* load from the private path: a name this process never loaded, so dlopen cannot hand
     * back an older library that had the same cache name */
    *dl = dlopen(sofile, RTLD_NOW | RTLD_LOCAL);
    if (!*dl) st = kiln_fail(KILN_ERR_COMPILE, "cpu: dlopen of the compiled kernels failed: %s", dlerror());
  }
  if (!st) {
    snprintf(name, sizeof name, "/%s.so", key);
    join(final_so, cache, name);
    snprintf(name, sizeof name, "/%s.c", key);
    join(final_c, cache, name);
    /* the object first: a present .c always has its .so */
    if (rename(sofile, final_so) == 0) rename(cfile, final_c);
  }
  remove_tmp(dir);
  return st;
}

kiln_status cpu_build(const char *src, size_t len, const kiln_options *o, void **dl, bool *hit) {
  *dl = NULL;
  *hit = false;
  const char *cache = o->cache_dir, *cc = o->cc[0] ? o->cc : "cc";
  kiln_status st = rt_cache_folder(cache);
  if (st) return st;
  char id[512];
  cpu_cc_identity(cc, id);
  const char *flags = cpu_cc_flags();
  uint64_t h = hash_bytes(id, strlen(id), 0x6b696c6e);
  /* the compiler's name too: a wrapper that adds flags (cc -fsanitize=address) reports the
   * version of the compiler it runs, and its objects need another program to load them */
  h = hash_bytes(cc, strlen(cc), h);
  h = hash_bytes(flags, strlen(flags), h);
  h = hash_bytes(src, len, h);
  char key[32], so[PATH_N], cf[PATH_N], name[64];
  snprintf(key, sizeof key, "%016llx", (unsigned long long)h);
  snprintf(name, sizeof name, "/%s.so", key);
  join(so, cache, name);
  snprintf(name, sizeof name, "/%s.c", key);
  join(cf, cache, name);
  size_t stored_len = 0;
  char *stored = o->no_cache ? NULL : rt_file_read(cf, &stored_len);
  bool same = stored && stored_len == len && !memcmp(stored, src, len);
  kiln_free(stored);
  if (same && (*dl = dlopen(so, RTLD_NOW | RTLD_LOCAL))) {
    *hit = true;
    return KILN_OK;
  }
  return compile_into_cache(cc, cache, key, src, len, dl);
}
