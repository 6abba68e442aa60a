/*
 * test_external_data — the ONNX loader's external data read with an attacker's eye.
 * A model folder is laid out on disk with data inside it, a secret outside it, and
 * symlinks both ways; models whose initializer points at them through location, offset
 * and length entries (written byte by byte, NUL bytes included) must either load the
 * right bytes from inside the folder or fail with a message and no graph. The secret
 * holds different values from the data, so a test can tell which file was read.
 * Cases test_hostile covers ("..", absolute, a symlink to a file outside, missing, a
 * short file) are not repeated here.
 */
#include "onnx_util.h"
#include "pbwrite.h"

#include <fcntl.h>
#include <unistd.h>

static char root[64], model_dir[128];

/* One key/value entry; the value is n bytes (may hold NULs). */
typedef struct Entry { const char *key; const char *value; size_t n; } Entry;
#define E(k, v) { k, v, sizeof(v) - 1 }

/* TensorProto "w": float [2, 3], data_location EXTERNAL with the given entries. */
static void ext_tensor(Buf *t, const Entry *es, int n, int64_t d0) {
  f_int(t, 1, d0);
  f_int(t, 1, 3);
  f_int(t, 2, 1);
  f_str(t, 8, "w");
  for (int i = 0; i < n; i++) {
    Buf e = { .n = 0 };
    f_str(&e, 1, es[i].key);
    f_bytes(&e, 2, es[i].value, es[i].n);
    f_msg(t, 13, &e);
  }
  f_int(t, 14, 1);
}

/* y = x + w, w [d0, 3] external. */
static void model_d0(Buf *m, const Entry *es, int n, int64_t d0) {
  Buf g = { .n = 0 }, node = { .n = 0 }, t = { .n = 0 };
  f_str(&node, 1, "x");
  f_str(&node, 1, "w");
  f_str(&node, 2, "y");
  f_str(&node, 4, "Add");
  f_msg(&g, 1, &node);
  f_str(&g, 2, "g");
  ext_tensor(&t, es, n, d0);
  f_msg(&g, 5, &t);
  f_float_value_info(&g, 11, "x", 2, (const int64_t[]){ 2, 3 });
  f_float_value_info(&g, 12, "y", 2, (const int64_t[]){ 2, 3 });
  pb_model(m, &g, 13);
}

static void model(Buf *m, const Entry *es, int n) { model_d0(m, es, n, 2); }

static const float data[6] = { 1, 2, 3, 4, 5, 6 }, secret[6] = { 666, 666, 666, 666, 666, 666 };

static void write_file(const char *rel, const void *p, size_t n) {
  char path[256];
  snprintf(path, sizeof path, "%s/%s", root, rel);
  FILE *f = fopen(path, "wb");
  CHECK_MSG(f && fwrite(p, 1, n, f) == n, "writing %s", path);
  if (f) fclose(f);
}

/* The model loads, and w holds `want` (read back by running y = x + w with x = 0). */
static void must_load(const Entry *es, int n, const float *want, const char *what) {
  Buf m = { .n = 0 };
  model(&m, es, n);
  Graph *g = NULL;
  kiln_status s = graph_load_onnx(m.b, m.n, model_dir, &g);
  CHECK_MSG(s == KILN_OK, "%s: %s", what, kiln_last_error());
  if (s) return;
  kiln_options o = kiln_options_default();
  o.backend = "ref";
  kiln_program *p = NULL;
  float x[6] = { 0 }, y[6] = { 0 };
  OK(kiln_program_compile((const kiln_graph *)g, &o, &p));
  if (p) OK(kiln_program_run(p, (const void *[]){ x }, (void *[]){ y }));
  for (int i = 0; i < 6; i++) CHECK_MSG(y[i] == want[i], "%s: w[%d] = %g, expected %g", what, i, y[i], want[i]);
  kiln_program_free(p);
  graph_free(g);
}

static void must_fail(const Entry *es, int n, const char *what) {
  Buf m = { .n = 0 };
  model(&m, es, n);
  Graph *g = (Graph *)1;
  kiln_status s = graph_load_onnx(m.b, m.n, model_dir, &g);
  CHECK_MSG(s != KILN_OK && g == NULL && kiln_last_error()[0], "%s: loaded (status %s)", what, kiln_status_name(s));
  if (s == KILN_OK) graph_free(g);
}

/* model/  w.bin (data), pad.bin (8 junk bytes then data), sub/w.bin, alias.bin -> w.bin,
 *         out -> ../outside, chain.bin -> sub/hop.bin, sub/hop.bin -> ../../outside/secret.bin,
 *         short.bin (16 bytes), fifo (a FIFO), dir/ (a folder), zero -> /dev/zero
 * outside/secret.bin */
static bool lay_out(void) {
  snprintf(root, sizeof root, "/tmp/kiln_extdata_XXXXXX");
  if (!mkdtemp(root)) return false;
  snprintf(model_dir, sizeof model_dir, "%s/model", root);
  char path[256], path2[256];
  const char *dirs[] = { "model", "model/sub", "model/dir", "outside" };
  for (int i = 0; i < 4; i++) {
    snprintf(path, sizeof path, "%s/%s", root, dirs[i]);
    if (mkdir(path, 0700)) return false;
  }
  write_file("model/w.bin", data, sizeof data);
  write_file("model/sub/w.bin", data, sizeof data);
  write_file("outside/secret.bin", secret, sizeof secret);
  write_file("model/short.bin", data, 16);
  char pad[8 + sizeof data];
  memset(pad, 0x7f, 8);
  memcpy(pad + 8, data, sizeof data);
  write_file("model/pad.bin", pad, sizeof pad);
  const char *links[][2] = {
    { "w.bin", "model/alias.bin" },
    { "../outside", "model/out" },
    { "sub/hop.bin", "model/chain.bin" },
    { "../../outside/secret.bin", "model/sub/hop.bin" },
    { "/dev/zero", "model/zero" },
  };
  for (int i = 0; i < 5; i++) {
    snprintf(path, sizeof path, "%s/%s", root, links[i][1]);
    if (symlink(links[i][0], path)) return false;
  }
  snprintf(path2, sizeof path2, "%s/model/fifo", root);
  return mkfifo(path2, 0600) == 0;
}

static void test_inside(void) {
  must_load((Entry[]){ E("location", "w.bin") }, 1, data, "plain");
  must_load((Entry[]){ E("location", "./w.bin") }, 1, data, "./w.bin");
  must_load((Entry[]){ E("location", "sub/w.bin") }, 1, data, "sub folder");
  must_load((Entry[]){ E("location", "alias.bin") }, 1, data, "symlink that stays inside");
  must_load((Entry[]){ E("location", "pad.bin"), E("offset", "8"), E("length", "24") }, 3, data, "offset 8");
  must_load((Entry[]){ E("offset", "0"), E("location", "w.bin"), E("length", "24") }, 3, data, "entries in any order");
}

static void test_leaving(void) {
  must_fail((Entry[]){ E("location", "out/secret.bin") }, 1, "through a symlinked folder that leaves");
  must_fail((Entry[]){ E("location", "chain.bin") }, 1, "through a chain of symlinks that leaves");
  must_fail((Entry[]){ E("location", "sub/hop.bin") }, 1, "a relative symlink in a sub folder that leaves");
  must_fail((Entry[]){ E("location", "zero") }, 1, "a symlink to /dev/zero");
  must_fail((Entry[]){ E("location", "..\\outside\\secret.bin") }, 1, "backslash separators");
  must_fail((Entry[]){ E("location", "w.bin"), E("location", "out/secret.bin") }, 2, "the last location wins");
  must_fail((Entry[]){ E("location", "."), }, 1, "the folder itself");
  must_fail((Entry[]){ E("location", "dir") }, 1, "a folder");
  must_fail((Entry[]){ E("location", "fifo") }, 1, "a FIFO (must not block)");
}

/* protobuf-c hands strings to C cut at the first NUL: whatever the cut leaves, nothing
 * outside the folder may be read. */
static void test_nul_bytes(void) {
  must_fail((Entry[]){ E("location", "\0../outside/secret.bin") }, 1, "NUL first");
  must_fail((Entry[]){ E("location", "nothing\0/../../outside/secret.bin") }, 1, "NUL after a missing name");
  Buf m = { .n = 0 };
  model(&m, (Entry[]){ E("location", "w.bin\0/../../outside/secret.bin") }, 1);
  Graph *g = NULL;
  if (graph_load_onnx(m.b, m.n, model_dir, &g) == KILN_OK) {  /* read as "w.bin": the data, not the secret */
    const float *w = NULL;
    for (int i = 0; i < g->n_tensors; i++)
      if (g->tensors[i].data && g->tensors[i].rank == 2) w = g->tensors[i].data;
    CHECK(w && !memcmp(w, data, sizeof data));
    graph_free(g);
  } else {
    CHECK(g == NULL && kiln_last_error()[0]);
  }
  must_fail((Entry[]){ E("location", "w.bin"), E("offset", "8\0") }, 2, "offset 8 then NUL: 8 + 24 > 24");
}

static void test_sizes(void) {
  must_fail((Entry[]){ E("location", "pad.bin"), E("offset", "9223372036854775800") }, 2, "offset + length overflows");
  must_fail((Entry[]){ E("location", "pad.bin"), E("offset", "99999999999999999999") }, 2, "offset beyond int64");
  must_fail((Entry[]){ E("location", "pad.bin"), E("offset", "-8") }, 2, "negative offset");
  must_fail((Entry[]){ E("location", "pad.bin"), E("offset", "") }, 2, "empty offset");
  must_fail((Entry[]){ E("location", "pad.bin"), E("offset", " 8") }, 2, "offset with a space");
  must_fail((Entry[]){ E("location", "pad.bin"), E("offset", "0x8") }, 2, "hex offset");
  must_fail((Entry[]){ E("location", "w.bin"), E("length", "48") }, 2, "length larger than the tensor and the file");
  must_fail((Entry[]){ E("location", "w.bin"), E("length", "16") }, 2, "length smaller than the tensor");
  must_fail((Entry[]){ E("location", "w.bin"), E("length", "-24") }, 2, "negative length");
  must_fail((Entry[]){ E("location", "short.bin"), E("length", "24") }, 2, "length equal to the tensor, file shorter");
  must_fail((Entry[]){ E("location", "w.bin"), E("offset", "4") }, 2, "offset pushes the end past the file");
  must_fail((Entry[]){ E("length", "24") }, 1, "no location");

  /* A huge declared shape with a small file fails on the size check, before allocating. */
  Buf m = { .n = 0 };
  model_d0(&m, (Entry[]){ E("location", "w.bin") }, 1, (int64_t)1 << 36);
  Graph *gr = (Graph *)1;
  CHECK(graph_load_onnx(m.b, m.n, model_dir, &gr) != KILN_OK && gr == NULL);
  CHECK_MSG(strstr(kiln_last_error(), "holds 24 bytes"), "huge shape: %s", kiln_last_error());
}

/* External data of a TensorProto file (test data) is looked up beside that file. */
static void test_tensor_file(void) {
  Buf t = { .n = 0 };
  ext_tensor(&t, (Entry[]){ E("location", "w.bin") }, 1, 2);
  write_file("model/w.pb", t.b, t.n);
  char path[256];
  snprintf(path, sizeof path, "%s/model/w.pb", root);
  OnnxTensor x;
  OK(onnx_read_tensor_file(path, &x));
  CHECK(x.numel == 6 && x.data && !memcmp(x.data, data, sizeof data));
  onnx_tensor_clear(&x);
  t.n = 0;
  ext_tensor(&t, (Entry[]){ E("location", "out/secret.bin") }, 1, 2);
  write_file("model/bad.pb", t.b, t.n);
  snprintf(path, sizeof path, "%s/model/bad.pb", root);
  kiln_status s = onnx_read_tensor_file(path, &x);
  CHECK(s != KILN_OK && strstr(kiln_last_error(), "bad.pb"));
  CHECK(x.data == NULL);
  snprintf(path, sizeof path, "%s/model/fifo", root);
  CHECK(onnx_read_tensor_file(path, &x) == KILN_ERR_IO);  /* refused, not waited on */
  snprintf(path, sizeof path, "%s/model/dir", root);
  CHECK(onnx_read_tensor_file(path, &x) == KILN_ERR_IO);
}

static void remove_all(void) {
  const char *files[] = { "model/w.bin", "model/sub/w.bin", "outside/secret.bin", "model/short.bin", "model/pad.bin",
                          "model/alias.bin", "model/out", "model/chain.bin", "model/sub/hop.bin", "model/zero",
                          "model/fifo", "model/w.pb", "model/bad.pb" };
  const char *dirs[] = { "model/sub", "model/dir", "model", "outside", "" };
  char path[256];
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    snprintf(path, sizeof path, "%s/%s", root, files[i]);
    unlink(path);
  }
  for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
    snprintf(path, sizeof path, "%s/%s", root, dirs[i]);
    CHECK_MSG(rmdir(path) == 0, "left behind: %s", path);
  }
}

int main(void) {
  if (!lay_out()) {
    fprintf(stderr, "cannot lay out the model folder under /tmp\n");
    return 1;
  }
  test_inside();
  test_leaving();
  test_nul_bytes();
  test_sizes();
  test_tensor_file();
  remove_all();
  TEST_MAIN_END();
}
