/*
 * test_schema — the attribute table of the ONNX importer (src/graph/onnx_schema.c) against
 * real models: its rows are sorted and spell known types, and every node of every shared
 * model and ONNX conformance model (their subgraphs and functions too) passes the attribute
 * check at its model's opset, including the models kiln does not import for other reasons
 * (test data it cannot hold, ops it lacks). A table that forgot an attribute ONNX allows, or
 * gave it the wrong type, fails here by name. Skips the walk when ../shared is absent.
 */
#include "onnx_util.h"

#include <dirent.h>

static int checked;

/* dir/model.onnx, when there is one, must pass. */
static void check_model(const char *dir) {
  char path[PATH_MAX];
  if ((size_t)snprintf(path, sizeof path, "%s/model.onnx", dir) >= sizeof path || !onnx_exists(path)) return;
  void *data;
  size_t size;
  kiln_status s = onnx_read_file(path, &data, &size);
  CHECK_MSG(s == KILN_OK, "%s: %s", path, kiln_last_error());
  if (s) return;
  s = onnx_check_attrs(data, size);
  CHECK_MSG(s == KILN_OK, "%s: %s: %s", path, kiln_status_name(s), kiln_last_error());
  kiln_free(data);
  checked++;
}

/* Every folder under root holding a model.onnx. */
static void check_suite(const char *root) {
  DIR *d = opendir(root);
  if (!d) return;
  for (struct dirent *e; (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
    char dir[PATH_MAX];
    if ((size_t)snprintf(dir, sizeof dir, "%s/%s", root, e->d_name) < sizeof dir) check_model(dir);
  }
  closedir(d);
}

int main(void) {
  OK(onnx_schema_check_table());
  const char *shared = onnx_shared_dir();
  if (!shared) {
    printf("skip: no shared folder\n");
    TEST_MAIN_END();
  }
  const char *suites[] = { "conformance/onnx-node", "conformance/onnx-simple", "models" };
  for (size_t i = 0; i < sizeof suites / sizeof suites[0]; i++) {
    char root[PATH_MAX];
    snprintf(root, sizeof root, "%s/%s", shared, suites[i]);
    check_suite(root);
  }
  printf("%d models checked\n", checked);
  CHECK(checked > 0);
  TEST_MAIN_END();
}
