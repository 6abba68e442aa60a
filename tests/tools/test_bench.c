/*
 * test_bench — `kiln bench` end to end: runs the kiln binary built beside this test on
 * ../shared/models/lenet (cpu backend, one thread, a few runs) and checks its JSON line
 * (kernels, no host fallbacks, a time, the error against the reference, the run count
 * under --budget-ms), that it refuses to print a time when the outputs miss the reference
 * tolerance, and its exit codes for a missing model and bad arguments. Skips cleanly when
 * the binary or the models are absent.
 */
#include "test.h"

#include <limits.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char kiln_bin[PATH_MAX];
static char out[65536];

/* Runs kiln with argv (NULL-terminated, argv[0] ignored); stdout into out; returns the exit code. */
static int run_kiln(const char *const *argv) {
  int fd[2];
  if (pipe(fd)) return -1;
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    dup2(fd[1], 1);
    close(fd[0]), close(fd[1]);
    execv(kiln_bin, (char *const *)argv);
    _exit(127);
  }
  close(fd[1]);
  size_t n = 0;
  ssize_t got;
  while ((got = read(fd[0], out + n, sizeof out - 1 - n)) > 0) n += (size_t)got;
  out[n] = 0;
  close(fd[0]);
  int status;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The JSON line's number for key, or NAN when the key is absent. */
static double json_num(const char *key) {
  const char *j = strstr(out, "json: {");
  if (!j) return NAN;
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char *p = strstr(j, pat);
  return p ? strtod(p + strlen(pat), NULL) : NAN;
}

int main(void) {
  ssize_t n = readlink("/proc/self/exe", kiln_bin, sizeof kiln_bin - 8);
  if (n <= 0) return printf("skip: cannot find this test's folder\n"), 0;
  kiln_bin[n] = 0;
  strcpy(strrchr(kiln_bin, '/') + 1, "kiln");
  const char *shared = getenv("KILN_SHARED_DIR") ? getenv("KILN_SHARED_DIR") : "../shared";
  char dir[PATH_MAX], onnx[PATH_MAX + 16];
  snprintf(dir, sizeof dir, "%s/models/lenet", shared);
  snprintf(onnx, sizeof onnx, "%s/model.onnx", dir);
  struct stat st;
  if (access(kiln_bin, X_OK)) return printf("skip: no kiln binary at %s\n", kiln_bin), 0;
  if (stat(onnx, &st)) return printf("skip: no %s\n", onnx), 0;

  /* a timed run: census and error in the JSON line */
  int rc = run_kiln((const char *[]){ "kiln", "bench", dir, "--backend", "cpu", "--threads", "1", "--runs", "3",
                                      "--warmup", "0", NULL });
  CHECK_MSG(rc == 0, "rc %d, output: %s", rc, out);
  CHECK(json_num("kernels") >= 1);
  CHECK(json_num("fallbacks") == 0);
  CHECK(json_num("runs") == 3);
  CHECK(json_num("threads") == 1);
  CHECK(json_num("median_ms") > 0 && json_num("min_ms") > 0 && json_num("min_ms") <= json_num("median_ms"));
  CHECK(json_num("max_abs_err") >= 0 && json_num("max_abs_err") < 1e-4);
  CHECK(strstr(out, "\"model\":\"lenet\"") != NULL);

  /* --resident: inputs set once, runs move nothing to or from the host; the backend under test
   * (cuda on the GPU machine) gives its device time, and the resident outputs are checked */
  const char *be = getenv("KILN_TEST_BACKEND") && *getenv("KILN_TEST_BACKEND") ? getenv("KILN_TEST_BACKEND") : "cpu";
  rc = run_kiln((const char *[]){ "kiln", "bench", dir, "--backend", be, "--threads", "1", "--runs", "3", "--warmup", "1",
                                  "--resident", NULL });
  CHECK_MSG(rc == 0, "rc %d, output: %s", rc, out);
  CHECK(json_num("resident") == 1 && json_num("runs") == 3 && json_num("fallbacks") == 0);
  CHECK(json_num("max_abs_err") >= 0 && json_num("max_abs_err") < 1e-4);
  CHECK(strcmp(be, "cuda") ? json_num("device_ms") == 0 : json_num("device_ms") > 0);

  /* the model file instead of its folder; --budget-ms stops after the minimum of 3 runs */
  rc = run_kiln((const char *[]){ "kiln", "bench", onnx, "--threads", "1", "--runs", "20", "--warmup", "0",
                                  "--budget-ms", "0.001", NULL });
  CHECK_MSG(rc == 0, "rc %d, output: %s", rc, out);
  CHECK(json_num("runs") == 3);

  /* outputs outside the tolerance: no time, exit 1, the reason in the JSON line */
  rc = run_kiln((const char *[]){ "kiln", "bench", dir, "--threads", "1", "--runs", "2", "--tol", "1e-30", NULL });
  CHECK_MSG(rc == 1, "rc %d, output: %s", rc, out);
  CHECK(strstr(out, "\"error\":\"outputs differ from the reference\"") != NULL);
  CHECK(isnan(json_num("median_ms")));
  CHECK(json_num("max_abs_err") > 0);

  /* a missing model, bad arguments */
  CHECK(run_kiln((const char *[]){ "kiln", "bench", "/nonexistent/model", NULL }) == 1);
  CHECK(run_kiln((const char *[]){ "kiln", "bench", dir, "--runs", "0", NULL }) == 2);
  CHECK(run_kiln((const char *[]){ "kiln", "bench", dir, "--threads", "x", NULL }) == 2);
  CHECK(run_kiln((const char *[]){ "kiln", "bench", NULL }) == 2);
  TEST_MAIN_END();
}
