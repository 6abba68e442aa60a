/*
 * test_scalar_text — the shared scalar helpers as text, for the generated code's
 * preludes: kiln_scalar_source (and the two heads) are the bytes of src/base/scalar.inc
 * (scalar_head_c.inc, scalar_head_cuda.inc), read from $KILN_SOURCE_DIR; scalar.inc
 * keeps its contract (no preprocessor lines, exactly the helpers listed here); head +
 * source + a use of every helper compiles as C with `cc -std=c11 -Wall -Wextra -Werror`,
 * as CUDA with `nvcc -c -x cu`, and with NVRTC as the cuda backend calls it. Where a GPU
 * is present the helpers then run on it over edge inputs (every f16/bf16 bit pattern,
 * ties, NaN, inf, INT64_MIN, shift counts 63/64/-1, zero divisors) and must give the
 * host's bits (sigmoid, whose exp comes from each side's libm, within 2 ulp). Each
 * missing compiler, NVRTC or GPU prints "skip: ..." and passes.
 */
#include "base/scalar.h"
#include "runtime/cuda/cudadrv.h"
#include "test.h"

#include <stdlib.h>
#include <unistd.h>

static const char *const helpers[] = {
  "h2f", "f2h", "b2f", "f2b", "rh", "rb", "maxf", "minf", "maxd", "mind", "modf", "modd", "sdiv", "sfdiv", "sfmod",
  "smod", "udiv", "umod", "upow", "spow", "sshl", "sshr", "ushl", "ushr", "f2s", "f2u", "signf", "signd", "sigd",
};
#define NHELPERS (int)(sizeof helpers / sizeof helpers[0])

/* Every helper applied to element i of the inputs, once as code: compiled here for the
 * host (Q = static) and, as text with Q = USE, under each head (USE: __device__ or none). */
#define USE_ALL(Q) \
  Q void use_all(int i, const float *fa, const float *fb, const double *da, const double *db, const int64_t *ia, \
                 const int64_t *ib, const uint16_t *h, float *of, double *od, int64_t *oi) { \
    float a = fa[i], b = fb[i]; \
    double x = da[i], y = db[i]; \
    int64_t p = ia[i], q = ib[i], *o = oi + i * 19; \
    uint64_t up = (uint64_t)p, uq = (uint64_t)q; \
    of[i * 8 + 0] = k_h2f(h[i]); of[i * 8 + 1] = k_b2f(h[i]); of[i * 8 + 2] = k_rh(a); of[i * 8 + 3] = k_rb(a); \
    of[i * 8 + 4] = k_maxf(a, b); of[i * 8 + 5] = k_minf(a, b); of[i * 8 + 6] = k_modf(a, b); \
    of[i * 8 + 7] = k_signf(a); \
    od[i * 5 + 0] = k_maxd(x, y); od[i * 5 + 1] = k_mind(x, y); od[i * 5 + 2] = k_modd(x, y); \
    od[i * 5 + 3] = k_signd(x); od[i * 5 + 4] = k_sigd(x); \
    o[0] = k_f2h(a); o[1] = k_f2b(a); o[2] = k_sdiv(p, q); o[3] = k_sfdiv(p, q); o[4] = k_sfmod(p, q); \
    o[5] = k_smod(p, q); o[6] = (int64_t)k_udiv(up, uq); o[7] = (int64_t)k_umod(up, uq); \
    o[8] = (int64_t)k_upow(up, uq & 255); o[9] = k_spow(p, q % 200); o[10] = k_sshl(p, q); \
    o[11] = k_sshr(p, q); o[12] = (int64_t)k_ushl(up, uq); o[13] = (int64_t)k_ushr(up, uq); \
    o[14] = k_f2s(x, -128.0, 127.0); o[15] = k_f2s(x, 0.0, 255.0); o[16] = k_f2s(x, -2147483648.0, 2147483647.0); \
    o[17] = k_f2s(x, -9223372036854775808.0, 9223372036854775808.0); o[18] = (int64_t)k_f2u(x); \
  }
#define TEXT(...) #__VA_ARGS__
#define TEXT_OF(...) TEXT(__VA_ARGS__)
USE_ALL(static)
static const char use_text[] = TEXT_OF(USE_ALL(USE)) "\n";
enum { NOF = 8, NOD = 5, NOI = 19 };

static const char cuda_kernel[] =
  "extern \"C\" __global__ void scalar_check(int n, const float *fa, const float *fb, const double *da,\n"
  "    const double *db, const int64_t *ia, const int64_t *ib, const uint16_t *h, float *of, double *od,\n"
  "    int64_t *oi) {\n"
  "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
  "  if (i < n) use_all(i, fa, fb, da, db, ia, ib, h, of, od, oi);\n"
  "}\n";

static char *read_all(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = NULL;
  size_t cap = 0, len = 0, got;
  do {
    if (len + 4096 > cap) {
      char *nb = realloc(buf, cap = cap * 2 + 4096);
      if (!nb) { free(buf); fclose(f); return NULL; }
      buf = nb;
    }
    got = fread(buf + len, 1, cap - len, f);
    len += got;
  } while (got > 0);
  fclose(f);
  *n = len;
  return buf;
}

/* The embedded text must be the file, byte for byte. */
static void check_bytes(const char *dir, const char *file, const char *text) {
  char path[1024];
  size_t n = 0;
  snprintf(path, sizeof path, "%s/src/base/%s", dir, file);
  char *want = read_all(path, &n);
  CHECK_MSG(want != NULL, "cannot read %s", path);
  if (!want) return;
  size_t m = strlen(text), i = 0;
  while (i < n && i < m && want[i] == text[i]) i++;
  CHECK_MSG(n == m && i == n, "%s: the embedded text (%zu bytes) differs from the file (%zu bytes) at byte %zu", file,
            m, n, i);
  free(want);
}

/* scalar.inc includes and defines nothing, and holds exactly the listed helpers. */
static void check_contract(void) {
  const char *s = kiln_scalar_source;
  int lines = 0, ki = 0;
  for (const char *l = s; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l)) {
    const char *c = l;
    while (*c == ' ' || *c == '\t') c++;
    CHECK_MSG(*c != '#', "scalar.inc line %d is a preprocessor line", lines + 1);
    if (!strncmp(l, "KI ", 3)) ki++;
    lines++;
  }
  CHECK_MSG(ki == NHELPERS, "scalar.inc defines %d helpers, expected %d", ki, NHELPERS);
  for (int i = 0; i < NHELPERS; i++) {
    char name[32];
    snprintf(name, sizeof name, " k_%s(", helpers[i]);
    const char *at = strstr(s, name);
    bool defined = false;
    for (; at && !defined; at = strstr(at + 1, name)) {  /* the definition: "KI <type> k_name(" at a line start */
      const char *l = at;
      while (l > s && l[-1] != '\n') l--;
      defined = !strncmp(l, "KI ", 3) && !memchr(l + 3, ' ', (size_t)(at - l - 3));
    }
    CHECK_MSG(defined, "scalar.inc lacks KI ... k_%s(", helpers[i]);
  }
}

static bool have(const char *tool) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", tool);
  return system(cmd) == 0;
}

static bool write_text(const char *path, const char *const *parts, int n) {
  FILE *f = fopen(path, "w");
  if (!f) return false;
  for (int i = 0; i < n; i++) fputs(parts[i], f);
  return fclose(f) == 0;
}

/* Runs cmd; on failure prints its output. */
static bool run(const char *cmd) {
  char full[2048];
  snprintf(full, sizeof full, "%s 2>&1", cmd);
  FILE *p = popen(full, "r");
  if (!p) return false;
  char line[512];
  StrBuf out = {0};
  while (fgets(line, sizeof line, p)) sb_puts(&out, line);
  int rc = pclose(p);
  if (rc != 0) fprintf(stderr, "$ %s\n%s\n", cmd, out.s ? out.s : "");
  sb_free(&out);
  return rc == 0;
}

static void test_cc(const char *dir) {
  if (!have("cc")) { printf("skip: no cc\n"); return; }
  char src[512], cmd[1200];
  snprintf(src, sizeof src, "%s/scalar_c.c", dir);
  const char *parts[] = { kiln_scalar_c_head, kiln_scalar_source, "#define USE\n", use_text };
  CHECK(write_text(src, parts, 4));
  snprintf(cmd, sizeof cmd, "cc -std=c11 -Wall -Wextra -Werror -O2 -c %s -o %s/scalar_c.o", src, dir);
  CHECK_MSG(run(cmd), "head + kiln_scalar_source does not compile as C11");
  snprintf(cmd, sizeof cmd, "cc -std=gnu11 -O3 -fno-math-errno -Wall -Werror -c %s -o %s/scalar_c3.o", src, dir);
  CHECK_MSG(run(cmd), "head + kiln_scalar_source does not compile with the cpu backend's -std=gnu11 -O3");
  printf("cc: compiles\n");
}

static void test_nvcc(const char *dir) {
  if (!have("nvcc")) { printf("skip: no nvcc\n"); return; }
  char src[512], cmd[1200];
  snprintf(src, sizeof src, "%s/scalar_cuda.cu", dir);
  const char *parts[] = { kiln_scalar_cuda_head, kiln_scalar_source, "#define USE __device__\n", use_text, cuda_kernel };
  CHECK(write_text(src, parts, 5));
  snprintf(cmd, sizeof cmd, "nvcc -c -x cu %s -o %s/scalar_cuda.o", src, dir);
  CHECK_MSG(run(cmd), "head + kiln_scalar_source does not compile with nvcc");
  printf("nvcc: compiles\n");
}

/* ---- NVRTC, and the device ---- */

#define NIN 65536  /* inputs: h runs over every 16-bit pattern */

typedef struct Inputs { float fa[NIN], fb[NIN]; double da[NIN], db[NIN]; int64_t ia[NIN], ib[NIN]; uint16_t h[NIN]; } Inputs;
typedef struct Outputs { float of[NIN * NOF]; double od[NIN * NOD]; int64_t oi[NIN * NOI]; } Outputs;

static const float fedge[] = {
  0.0f, -0.0f, 1.0f, -1.0f, 0.5f, 1.5f, 2.5f, -2.5f, 7.0f, -7.0f, 2.0f, -2.0f, 65504.0f, 65520.0f, 65519.99609375f,
  1.0f + 0x1p-11f, 1.0f + 0x3p-11f, 1.0f + 0x1p-8f, 1.0f + 0x3p-8f, 0x1p-24f, 0x1p-25f, 0x3p-25f, 0x1p-14f,
  0x1p-14f - 0x1p-25f, 0x1p-126f, 0x1p-149f, 3.4028235e38f, 1e30f, -1e30f, 300.5f, -128.5f,
};
static const double dedge[] = {
  0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.5, -2.5, 127.9, 128.0, -128.9, -129.0, 255.5, 256.0, 5.5, -2.0, 2.0,
  2147483647.5, -2147483648.5, 9223372036854775808.0, -9223372036854775808.0, 18446744073709551616.0,
  0x1.fffffffffffffp+63, 1e30, -1e30, -740.0, -745.0, 745.0, 40.0, -40.0, 1e-300,
};
static const int64_t iedge[] = {
  0, 1, -1, 2, -2, 3, 7, -7, 8, -8, 63, 64, 65, -64, 255, 256, INT64_MAX, INT64_MIN, INT64_MIN + 1, -3, 10, 40,
};

static uint64_t rnd(uint64_t *s) {
  *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
  return *s;
}

static void make_inputs(Inputs *in) {
  enum { NF = sizeof fedge / sizeof fedge[0], ND = sizeof dedge / sizeof dedge[0], NI = sizeof iedge / sizeof iedge[0] };
  float fx[NF + 4];
  double dx[ND + 4];
  memcpy(fx, fedge, sizeof fedge);
  memcpy(dx, dedge, sizeof dedge);
  fx[NF] = INFINITY, fx[NF + 1] = -INFINITY, fx[NF + 2] = NAN, fx[NF + 3] = -NAN;
  dx[ND] = INFINITY, dx[ND + 1] = -INFINITY, dx[ND + 2] = NAN, dx[ND + 3] = -NAN;
  uint64_t s = 0x2545f4914f6cdd1dull;
  for (int i = 0; i < NIN; i++) {
    in->h[i] = (uint16_t)i;
    int j = i % 64, k = (i / 64) % 64;
    bool edge = i < 64 * 64;
    uint64_t r1 = rnd(&s), r2 = rnd(&s);
    uint32_t u1 = (uint32_t)r1, u2 = (uint32_t)(r1 >> 32);
    float f1, f2;
    memcpy(&f1, &u1, 4), memcpy(&f2, &u2, 4);
    double d1, d2;
    memcpy(&d1, &r1, 8), memcpy(&d2, &r2, 8);
    in->fa[i] = edge && j < NF + 4 ? fx[j] : f1;
    in->fb[i] = edge && k < NF + 4 ? fx[k] : f2;
    in->da[i] = edge && j < ND + 4 ? dx[j] : (i & 1) ? d1 : (double)(int64_t)(r1 % 4001) / 8 - 250;
    in->db[i] = edge && k < ND + 4 ? dx[k] : (i & 2) ? d2 : (double)(int64_t)(r2 % 41) - 20;
    in->ia[i] = edge && j < NI ? iedge[j] : (i & 1) ? (int64_t)r1 : (int64_t)(r1 % 201) - 100;
    in->ib[i] = edge && k < NI ? iedge[k] : (i & 2) ? (int64_t)r2 : (int64_t)(r2 % 131) - 65;
  }
}

static uint64_t fbits_of(double d) { uint64_t u; memcpy(&u, &d, 8); return u; }
static uint32_t f32bits_of(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

/* Device results against the host's: the same bits; NaN matches any NaN (payloads are not
 * semantics, and the two sides' NaN constants may differ in them); sigmoid within 2 ulp. */
static void compare(const Outputs *dev, const Outputs *host) {
  long bad = 0;
  for (long i = 0; i < (long)NIN * NOF; i++) {
    float a = dev->of[i], b = host->of[i];
    if (!(a != a && b != b) && f32bits_of(a) != f32bits_of(b) && bad++ < 10)
      fprintf(stderr, "float output %ld of input %ld: device %a, host %a\n", i % NOF, i / NOF, a, b);
  }
  for (long i = 0; i < (long)NIN * NOD; i++) {
    double a = dev->od[i], b = host->od[i];
    if (a != a && b != b) continue;
    uint64_t ua = fbits_of(a), ub = fbits_of(b);
    bool sig = i % NOD == 4, near = (ua > ub ? ua - ub : ub - ua) <= 2;
    if (ua != ub && !(sig && near) && bad++ < 20)
      fprintf(stderr, "double output %ld of input %ld: device %a, host %a\n", i % NOD, i / NOD, a, b);
  }
  for (long i = 0; i < (long)NIN * NOI; i++)
    if (dev->oi[i] != host->oi[i] && bad++ < 30)
      fprintf(stderr, "int output %ld of input %ld: device %lld, host %lld\n", i % NOI, i / NOI,
              (long long)dev->oi[i], (long long)host->oi[i]);
  CHECK_MSG(bad == 0, "%ld device results differ from the host's", bad);
}

#define CU(call) OK(cuda_check((call), #call, "test_scalar_text"))

static void run_on_device(CudaDriver *d, const void *cubin, const Inputs *in, Outputs *out) {
  CUmodule m = NULL;
  CUfunction f = NULL;
  CU(d->cuModuleLoadData(&m, cubin));
  if (!m) return;
  CU(d->cuModuleGetFunction(&f, m, "scalar_check"));
  CUstream s = NULL;
  CU(d->cuStreamCreate(&s, CUDRV_STREAM_NON_BLOCKING));
  CUdeviceptr p[10] = { 0 };
  size_t sz[10] = { sizeof in->fa, sizeof in->fb, sizeof in->da, sizeof in->db, sizeof in->ia, sizeof in->ib,
                    sizeof in->h, sizeof out->of, sizeof out->od, sizeof out->oi };
  const void *src[7] = { in->fa, in->fb, in->da, in->db, in->ia, in->ib, in->h };
  void *dst[3] = { out->of, out->od, out->oi };
  for (int i = 0; i < 10; i++) CU(d->cuMemAlloc(&p[i], sz[i]));
  for (int i = 0; i < 7; i++) CU(d->cuMemcpyHtoDAsync(p[i], src[i], sz[i], s));
  for (int i = 7; i < 10; i++) CU(d->cuMemsetD8Async(p[i], 0xff, sz[i], s));
  int n = NIN;
  void *args[11] = { &n, &p[0], &p[1], &p[2], &p[3], &p[4], &p[5], &p[6], &p[7], &p[8], &p[9] };
  CU(d->cuLaunchKernel(f, NIN / 256, 1, 1, 256, 1, 1, 0, s, args, NULL));
  for (int i = 0; i < 3; i++) CU(d->cuMemcpyDtoHAsync(dst[i], p[7 + i], sz[7 + i], s));
  CU(d->cuStreamSynchronize(s));
  for (int i = 0; i < 10; i++) CU(d->cuMemFree(p[i]));
  CU(d->cuStreamDestroy(s));
  CU(d->cuModuleUnload(m));
}

static void test_nvrtc_device(void) {
  CudaNvrtc *r = NULL;
  if (cuda_nvrtc(&r) != KILN_OK) { printf("skip: no NVRTC (%s)\n", kiln_last_error()); return; }
  CudaDriver *d = NULL;
  bool gpu = cuda_driver(&d) == KILN_OK;
  char arch[32] = "sm_90";
  if (gpu) cuda_arch_name(d, arch, sizeof arch);
  StrBuf src = { 0 };
  sb_puts(&src, kiln_scalar_cuda_head);
  sb_puts(&src, kiln_scalar_source);
  sb_puts(&src, "#define USE __device__\n");
  sb_puts(&src, use_text);
  sb_puts(&src, cuda_kernel);
  CHECK(!src.failed);
  void *cubin = NULL;
  size_t size = 0;
  bool hit = false;
  const char *opt = "--fmad=false";  /* as the cuda backend compiles */
  OK(cuda_compile(src.s, arch, 1, &opt, &cubin, &size, &hit));
  sb_free(&src);
  printf("nvrtc %d.%d: compiles for %s\n", r->major, r->minor, arch);
  if (!gpu) printf("skip: no GPU (%s)\n", kiln_last_error());
  Inputs *in = malloc(sizeof *in);
  Outputs *dev = malloc(sizeof *dev), *host = malloc(sizeof *host);
  if (gpu && cubin && in && dev && host) {
    make_inputs(in);
    for (int i = 0; i < NIN; i++) use_all(i, in->fa, in->fb, in->da, in->db, in->ia, in->ib, in->h, host->of, host->od, host->oi);
    run_on_device(d, cubin, in, dev);
    compare(dev, host);
    printf("%s: %d inputs x %d helpers, device == host\n", d->name, NIN, NOF + NOD + NOI);
  }
  free(in), free(dev), free(host);
  kiln_free(cubin);
}

int main(void) {
  const char *root = getenv("KILN_SOURCE_DIR");
  if (!root || !*root) root = ".";
  check_bytes(root, "scalar.inc", kiln_scalar_source);
  check_bytes(root, "scalar_head_c.inc", kiln_scalar_c_head);
  check_bytes(root, "scalar_head_cuda.inc", kiln_scalar_cuda_head);
  check_contract();

  char dir[] = "/tmp/kiln-test-scalar-XXXXXX";
  CHECK(mkdtemp(dir) != NULL);
  char cache[sizeof dir + 8];
  snprintf(cache, sizeof cache, "%s/cache", dir);
  setenv("KILN_CACHE_DIR", cache, 1);  /* NVRTC's cache: this run's own, removed below */
  test_cc(dir);
  test_nvcc(dir);
  test_nvrtc_device();
  char cmd[sizeof dir + 16];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
  TEST_MAIN_END();
}
