/*
 * test_no_model_strings.c — "no string from a model ever reaches generated source".
 * Graphs are built whose input, parameter and output names are hostile (comment
 * breakers, #include lines, string-literal escapes, newlines, backslashes, format
 * directives), once through the C API and once as an ONNX model written byte by byte
 * (graph, node, initializer and intermediate tensor names hostile too). Each graph is
 * compiled for "cpu" with its cache folder (options.cache_dir) in a fresh folder, and every file the
 * backend leaves there is searched for the names and their dangerous fragments; each is
 * also rendered for the C and CUDA C dialects (no GPU needed) and the text searched.
 * The search itself is checked first: it must find a name planted in a string and in a
 * file, so the test cannot pass by looking nowhere.
 */
#include "codegen/codegen.h"
#include "graph/graph.h"
#include "test.h"
#include "onnx/pbwrite.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const hostile[] = {
  "*/ #include \"/etc/passwd\" /*",
  "\"); system(\"rm -rf /",
  "nl_before\n#define float double\nnl_after",
  "back\\slash\\\" %n%n%s ?\?/",
  "}; int kiln_pwned = 1; void pwn(void) {",
  "`$(touch /tmp/kiln_pwned)`",
};
enum { N_HOSTILE = sizeof hostile / sizeof hostile[0] };

/* Fragments that must not appear either (a name split or escaped by an emitter would
 * still leave these). The short ones are searched for in text files only: two bytes
 * like "%n" turn up by chance in a compiled object. */
static const char *const fragments[] = {
  "/etc/passwd", "system(", "rm -rf", "nl_before", "nl_after", "back\\slash", "kiln_pwned", "pwn(", "%n", "?\?/",
};
enum { N_FRAGMENTS = sizeof fragments / sizeof fragments[0] };

/* The first hostile name or fragment found in text[0..n), or NULL. */
static const char *find_model_string(const char *text, size_t n, bool binary) {
  for (int i = 0; i < N_HOSTILE; i++)
    if (memmem(text, n, hostile[i], strlen(hostile[i]))) return hostile[i];
  for (int i = 0; i < N_FRAGMENTS; i++) {
    size_t len = strlen(fragments[i]);
    if (binary && len < 6) continue;
    if (memmem(text, n, fragments[i], len)) return fragments[i];
  }
  return NULL;
}

static char *slurp(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  char *buf = NULL;
  if (fseek(f, 0, SEEK_END) == 0) {
    long sz = ftell(f);
    if (sz >= 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)sz + 1)) &&
        fread(buf, 1, (size_t)sz, f) == (size_t)sz) {
      buf[sz] = 0;
      *n = (size_t)sz;
    } else {
      free(buf);
      buf = NULL;
    }
  }
  fclose(f);
  return buf;
}

static bool ends_with(const char *s, const char *suffix) {
  size_t a = strlen(s), b = strlen(suffix);
  return a >= b && !strcmp(s + a - b, suffix);
}

/* Searches every regular file under dir; returns how many files were read and counts
 * (into *hits) the files holding a model string; *sources counts .c/.cu files. */
static int scan_dir(const char *dir, int *hits, int *sources) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int files = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    struct stat st;
    if (lstat(path, &st)) continue;
    if (S_ISDIR(st.st_mode)) { files += scan_dir(path, hits, sources); continue; }
    if (!S_ISREG(st.st_mode)) continue;
    size_t n = 0;
    char *text = slurp(path, &n);
    CHECK_MSG(text != NULL, "cannot read %s", path);
    if (!text) continue;
    files++;
    bool source = ends_with(path, ".c") || ends_with(path, ".cu");
    *sources += source;
    const char *found = find_model_string(text, n, !source && !ends_with(path, ".log"));
    if (found) {
      (*hits)++;
      fprintf(stderr, "%s holds a model string: \"%s\"\n", path, found);
    }
    free(text);
  }
  closedir(d);
  return files;
}

static void remove_tree(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    struct stat st;
    if (!lstat(path, &st) && S_ISDIR(st.st_mode)) remove_tree(path);
    else unlink(path);
  }
  closedir(d);
  rmdir(dir);
}

/* The search must find what it is looking for, in a string and in a file. */
static void test_search_detects(void) {
  char planted[512];
  for (int i = 0; i < N_HOSTILE; i++) {
    snprintf(planted, sizeof planted, "void k0(float *b0) {\n  /* %s */\n}\n", hostile[i]);
    CHECK_MSG(find_model_string(planted, strlen(planted), false) != NULL, "missed planted name %d", i);
  }
  snprintf(planted, sizeof planted, "  b0[i] = 1; // %s\n", "a 'kiln_pwned' fragment");
  CHECK(find_model_string(planted, strlen(planted), true) != NULL);
  CHECK(find_model_string("printf(\"%n\")", 12, false) != NULL);
  CHECK(find_model_string("printf(\"%n\")", 12, true) == NULL);  /* short fragments: text only */
  const char *clean = "void k0(float *restrict b0) { for (long i = 0; i < 8; i++) b0[i] = 0; }";
  CHECK(find_model_string(clean, strlen(clean), false) == NULL);

  char dir[] = "/tmp/kiln_nms_plant_XXXXXX";
  if (!mkdtemp(dir)) { CHECK(!"mkdtemp"); return; }
  char path[256];
  snprintf(path, sizeof path, "%s/k.c", dir);
  FILE *f = fopen(path, "wb");
  CHECK(f != NULL);
  if (f) { fprintf(f, "/* %s */\n", hostile[2]); fclose(f); }
  int hits = 0, sources = 0;
  CHECK(scan_dir(dir, &hits, &sources) == 1 && hits == 1 && sources == 1);
  remove_tree(dir);
}

/* Renders g's plan (fused and eager) for a dialect; fails if a model string shows. */
static void check_render(const char *what, const Graph *g, const Dialect *d, const char *dname) {
  for (int fuse = 1; fuse >= 0; fuse--) {
    TE *te = NULL;
    Plan *p = NULL;
    StrBuf src = { 0 };
    kiln_options o = kiln_options_default();
    o.fuse = fuse;
    PlanOptions po = plan_options(&o);
    OK(te_lower(g, &te));
    if (te) OK(plan_build(te, &po, &p));
    if (p) OK(cg_render_plan(p, d, NULL, NULL, &src));
    CHECK_MSG(src.s && src.len > 0, "%s: nothing rendered for %s", what, dname);
    const char *found = src.s ? find_model_string(src.s, src.len, false) : NULL;
    CHECK_MSG(!found, "%s (%s, fuse=%d): model string \"%s\" in the source", what, dname, fuse, found);
    sb_free(&src);
    plan_free(p);
    te_free(te);
  }
}

/* Compiles g for cpu with a fresh cache folder, runs it, then searches that folder. */
static void check_cpu(const char *what, const kiln_graph *g, const void *const *in, void *const *out) {
  char dir[] = "/tmp/kiln_nms_cache_XXXXXX";
  if (!mkdtemp(dir)) { CHECK(!"mkdtemp"); return; }
  kiln_options o = kiln_options_default();
  o.backend = "cpu";
  snprintf(o.cache_dir, sizeof o.cache_dir, "%s/kiln", dir);
  kiln_program *p = NULL;
  OK(kiln_program_compile(g, &o, &p));
  if (p) OK(kiln_program_run(p, in, out));
  kiln_program_free(p);
  int hits = 0, sources = 0;
  int files = scan_dir(dir, &hits, &sources);
  CHECK_MSG(files >= 2 && sources >= 1, "%s: the cpu cache holds %d files, %d sources", what, files, sources);
  CHECK_MSG(hits == 0, "%s: %d cached file(s) hold a model string", what, hits);
  remove_tree(dir);
}

/* y = softmax(relu(x @ w + b)) with hostile names rotated through the roles. */
static void test_api_names(int rot) {
  const char *nx = hostile[rot % N_HOSTILE], *nw = hostile[(rot + 1) % N_HOSTILE];
  const char *nb = hostile[(rot + 2) % N_HOSTILE], *ny = hostile[(rot + 3) % N_HOSTILE];
  const char *nz = hostile[(rot + 4) % N_HOSTILE];
  int64_t xs[2] = { 4, 8 }, ws[2] = { 8, 5 }, bs = 5;
  float w[40], b[5], x[32], y[20], z[20];
  for (int i = 0; i < 40; i++) w[i] = (float)((i * 7) % 11) / 11.0f - 0.5f;
  for (int i = 0; i < 5; i++) b[i] = 0.1f * (float)i;
  for (int i = 0; i < 32; i++) x[i] = (float)((i * 5) % 13) / 13.0f;
  kiln_graph *g;
  kiln_tensor tx, tw, tb, mm, s, r, ty, tz;
  OK(kiln_graph_create(&g));
  OK(kiln_graph_input(g, nx, KILN_F32, 2, xs, &tx));
  OK(kiln_graph_param(g, nw, KILN_F32, 2, ws, w, &tw));
  OK(kiln_graph_param(g, nb, KILN_F32, 1, &bs, b, &tb));
  OK(kiln_graph_matmul(g, tx, tw, &mm));
  OK(kiln_graph_binary(g, KILN_ADD, mm, tb, &s));
  OK(kiln_graph_unary(g, KILN_RELU, s, &r));
  OK(kiln_graph_softmax(g, r, 1, &ty));
  OK(kiln_graph_reduce(g, KILN_REDUCE_SUM, r, 1, (const int[]){ 0 }, 1, &tz));
  OK(kiln_graph_output(g, ty, ny));
  OK(kiln_graph_output(g, tz, nz));
  char what[64];
  snprintf(what, sizeof what, "api graph, rotation %d", rot);
  check_render(what, &g->g, &cg_dialect_c, "c");
  check_render(what, &g->g, &cg_dialect_cuda, "cuda");
  check_cpu(what, g, (const void *[]){ x }, (void *[]){ y, z });
  double row = 0;
  for (int j = 0; j < 5; j++) row += y[j];
  CHECK_NEAR(row, 1.0, 1e-5);  /* the program ran: softmax rows sum to one */
  kiln_graph_free(g);
}

static void node(Buf *g, const char *op, const char *name, const char *in0, const char *in1, const char *out) {
  Buf n = { .n = 0 };
  f_str(&n, 1, in0);
  if (in1) f_str(&n, 1, in1);
  f_str(&n, 2, out);
  f_str(&n, 3, name);
  f_str(&n, 4, op);
  f_str(&n, 6, hostile[1]);  /* doc_string */
  f_msg(g, 1, &n);
}

/* An ONNX model: y = Exp(Relu(x + w)), every name and doc string hostile. */
static void test_onnx_names(void) {
  Buf m = { .n = 0 }, g = { .n = 0 }, ops = { .n = 0 }, t = { .n = 0 };
  const char *nx = hostile[0], *nw = hostile[1], *nt = hostile[2], *nr = hostile[3], *ny = hostile[4];
  node(&g, "Add", hostile[5], nx, nw, nt);
  node(&g, "Relu", hostile[0], nt, NULL, nr);
  node(&g, "Exp", hostile[3], nr, NULL, ny);
  f_str(&g, 2, hostile[5]);  /* graph name */
  float w[6] = { 0.5f, -1, 2, -3, 0.25f, 1 };
  f_int(&t, 1, 2);
  f_int(&t, 1, 3);
  f_int(&t, 2, 1);
  f_str(&t, 8, nw);
  f_bytes(&t, 9, w, sizeof w);
  f_msg(&g, 5, &t);
  f_float_value_info(&g, 11, nx, 2, (const int64_t[]){ 2, 3 });
  f_float_value_info(&g, 12, ny, 2, (const int64_t[]){ 2, 3 });
  f_int(&m, 1, 8);
  f_str(&m, 2, hostile[2]);  /* producer name */
  f_str(&ops, 1, "");
  f_int(&ops, 2, 13);
  f_msg(&m, 8, &ops);
  f_msg(&m, 7, &g);
  CHECK(m.n < sizeof m.b);  /* the writer did not run out of room */

  kiln_graph *kg = NULL;
  OK(kiln_graph_load_onnx_buffer(m.b, m.n, NULL, &kg));
  if (!kg) return;
  check_render("onnx model", &kg->g, &cg_dialect_c, "c");
  check_render("onnx model", &kg->g, &cg_dialect_cuda, "cuda");
  float x[6] = { 1, 2, 3, 4, 5, 6 }, y[6];
  check_cpu("onnx model", kg, (const void *[]){ x }, (void *[]){ y });
  for (int i = 0; i < 6; i++) CHECK_NEAR(y[i], exp(fmax(x[i] + w[i], 0)), 1e-5);
  kiln_graph_free(kg);
}

int main(void) {
  test_search_detects();
  for (int rot = 0; rot < N_HOSTILE; rot++) test_api_names(rot);
  test_onnx_names();
  TEST_MAIN_END();
}
