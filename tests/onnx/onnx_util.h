/*
 * onnx_util.h — for the ONNX tests: run one test folder (model.onnx + test_data_set_0)
 * through the library on a backend and compare with the reference outputs.
 */
#ifndef KILN_TEST_ONNX_UTIL_H
#define KILN_TEST_ONNX_UTIL_H

#include "graph/graph.h"
#include "test.h"

#include <limits.h>
#include <sys/stat.h>

#define ONNX_MAX_IO 32

static inline int onnx_exists(const char *p) {
  struct stat st;
  return stat(p, &st) == 0;
}

/* The shared folder (../shared from the repo root, or $KILN_SHARED_DIR); NULL if absent. */
static inline const char *onnx_shared_dir(void) {
  const char *d = getenv("KILN_SHARED_DIR");
  if (!d || !*d) d = "../shared";
  return onnx_exists(d) ? d : NULL;
}

static inline kiln_status onnx_read_pb(const char *path, OnnxTensor *t) {
  void *data;
  size_t size;
  kiln_status s = onnx_read_file(path, &data, &size);
  if (s) return s;
  s = onnx_read_tensor(data, size, NULL, t);
  kiln_free(data);
  return s;
}

/*
 * Loads dir/model.onnx with dir/test_data_set_0's inputs, runs it on backend, compares
 * every output (dtype, shape, |got - want| <= atol + rtol |want|; strings byte for byte). Returns KILN_OK on a
 * match; a failing status with kiln_last_error() saying why otherwise. *max_err: the
 * largest absolute error seen. With run false it stops after compiling.
 */
static inline kiln_status onnx_check_dir(const char *dir, const char *backend, double rtol, double atol, bool run,
                                         double *max_err) {
  OnnxTensor ins[ONNX_MAX_IO] = { 0 }, outs[ONNX_MAX_IO] = { 0 };
  int n_in = 0, n_out = 0;
  char path[PATH_MAX];
  kiln_status s = KILN_OK;
  void *model = NULL, *bufs[ONNX_MAX_IO] = { 0 };
  const void *inputs[ONNX_MAX_IO];
  size_t size;
  Graph *g = NULL;
  kiln_program *p = NULL;
  *max_err = 0;
  for (int io = 0; io < 2 && !s; io++)
    for (int i = 0; i < ONNX_MAX_IO && !s; i++) {
      snprintf(path, sizeof path, "%s/test_data_set_0/%s_%d.pb", dir, io ? "output" : "input", i);
      if (!onnx_exists(path)) break;
      s = onnx_read_pb(path, io ? &outs[i] : &ins[i]);
      if (!s) *(io ? &n_out : &n_in) = i + 1;
    }
  for (int i = 0; i < n_in; i++) kiln_free(ins[i].name), ins[i].name = NULL;  /* positional */
  snprintf(path, sizeof path, "%s/model.onnx", dir);
  if (!s) s = onnx_read_file(path, &model, &size);
  if (!s) s = graph_load_onnx_bound(model, size, dir, ins, n_in, &g);
  int ni = 0;
  for (int t = 0; !s && g && t < g->n_tensors && t < n_in; t++)
    if (g->tensors[t].kind == T_INPUT) inputs[ni++] = ins[t].data;
  kiln_options o = kiln_options_default();
  o.backend = backend;
  if (!s) s = kiln_program_compile((const kiln_graph *)g, &o, &p);
  if (!s && g->n_outputs != n_out) s = kiln_fail(KILN_ERR_MODEL, "%d outputs, %d references", g->n_outputs, n_out);
  for (int i = 0; !s && i < n_out; i++) {
    const Tensor *y = &g->tensors[g->outputs[i].tensor];
    if (y->dtype != outs[i].dtype || y->rank != outs[i].rank || memcmp(y->shape, outs[i].shape, sizeof(int64_t) * (size_t)y->rank))
      s = kiln_fail(KILN_ERR_MODEL, "output %d: dtype or shape differs from the reference", i);
    else if (!(bufs[i] = kiln_malloc((size_t)y->numel * kiln_dtype_size(y->dtype) + 1)))
      s = kiln_fail(KILN_ERR_NO_MEMORY, "out of memory");
  }
  if (!s && run) s = kiln_program_run(p, inputs, bufs);
  for (int i = 0; !s && run && i < n_out; i++)
    for (int64_t k = 0; k < outs[i].numel; k++) {
      if (outs[i].dtype == KILN_STRING) {  /* byte for byte */
        const char *a = ((const char *const *)bufs[i])[k], *b = ((const char *const *)outs[i].data)[k];
        if (a && !strcmp(a, b)) continue;
        s = kiln_fail(KILN_ERR_MODEL, "output %d element %lld is \"%s\", expected \"%s\"", i, (long long)k,
                      a ? a : "(null)", b);
        break;
      }
      double a = dtype_load_f64(outs[i].dtype, bufs[i], k), b = dtype_load_f64(outs[i].dtype, outs[i].data, k);
      if ((isnan(a) && isnan(b)) || a == b) continue;
      double d = fabs(a - b);
      *max_err = fmax(*max_err, d);
      if (!(d <= atol + rtol * fabs(b))) {
        s = kiln_fail(KILN_ERR_MODEL, "output %d element %lld is %.9g, expected %.9g", i, (long long)k, a, b);
        break;
      }
    }
  kiln_program_free(p);
  graph_free(g);
  kiln_free(model);
  for (int i = 0; i < ONNX_MAX_IO; i++) onnx_tensor_clear(&ins[i]), onnx_tensor_clear(&outs[i]), kiln_free(bufs[i]);
  return s;
}

#endif
