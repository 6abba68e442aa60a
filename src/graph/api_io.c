/*
 * api_io.c — the public introspection and host-value API (kiln.h, "introspection and host
 * values"): what a program that runs models it did not build asks of a graph, and ONNX
 * TensorProto files as kiln_value.
 *
 * Takes the caller's arguments, checks every one first (naming the bad one, as api.c does),
 * and hands on to the importer's own readers in onnx.c: a kiln_value is an OnnxTensor under
 * its public name, converted field by field at this boundary (the importer's struct stays
 * private, so either can change alone). Reads only: nothing here changes a graph.
 */
#include "graph.h"

#include <limits.h>
#include <string.h>
#include <sys/stat.h>

#define NEED(cond, ...) \
  do { if (!(cond)) return kiln_fail(KILN_ERR_INVALID_ARG, __VA_ARGS__); } while (0)
#define OUTPTR(p) NEED(p, "%s: %s is NULL", __func__, #p)

/* ---- graph introspection ---- */

static void tensor_info(const Graph *g, int id, const char *name, kiln_tensor_info *out) {
  const Tensor *t = &g->tensors[id];
  memset(out, 0, sizeof *out);
  out->tensor = id;
  out->name = name ? name : t->name;
  out->dtype = t->dtype;
  out->rank = t->rank;
  memcpy(out->shape, t->shape, sizeof(int64_t) * (size_t)t->rank);
  out->numel = t->numel;
}

/* Id of the i-th tensor of kind k (creation order), or -1; *count gets how many there are. */
static int nth_of_kind(const Graph *g, TensorKind k, int i, int *count) {
  int n = 0, id = -1;
  for (int t = 0; t < g->n_tensors; t++)
    if (g->tensors[t].kind == k && n++ == i) id = t;
  *count = n;
  return id;
}

static kiln_status kind_count(const kiln_graph *kg, TensorKind k, const char *fn, int *out) {
  NEED(kg, "%s: graph is NULL", fn);
  NEED(out, "%s: out is NULL", fn);
  nth_of_kind(&kg->g, k, -1, out);
  return KILN_OK;
}

static kiln_status kind_info(const kiln_graph *kg, TensorKind k, const char *what, const char *fn, int i,
                             kiln_tensor_info *out) {
  NEED(kg, "%s: graph is NULL", fn);
  NEED(out, "%s: out is NULL", fn);
  int n, id = nth_of_kind(&kg->g, k, i, &n);
  NEED(id >= 0, "%s: %s %d does not exist (the graph has %d %ss)", fn, what, i, n, what);
  tensor_info(&kg->g, id, NULL, out);
  return KILN_OK;
}

kiln_status kiln_graph_input_count(const kiln_graph *g, int *out) { return kind_count(g, T_INPUT, __func__, out); }
kiln_status kiln_graph_param_count(const kiln_graph *g, int *out) { return kind_count(g, T_PARAM, __func__, out); }

kiln_status kiln_graph_input_info(const kiln_graph *g, int i, kiln_tensor_info *out) {
  return kind_info(g, T_INPUT, "input", __func__, i, out);
}

kiln_status kiln_graph_param_info(const kiln_graph *g, int i, kiln_tensor_info *out) {
  return kind_info(g, T_PARAM, "param", __func__, i, out);
}

kiln_status kiln_graph_output_count(const kiln_graph *kg, int *out) {
  NEED(kg, "%s: graph is NULL", __func__);
  OUTPTR(out);
  *out = kg->g.n_outputs;
  return KILN_OK;
}

kiln_status kiln_graph_output_info(const kiln_graph *kg, int i, kiln_tensor_info *out) {
  NEED(kg, "%s: graph is NULL", __func__);
  OUTPTR(out);
  const Graph *g = &kg->g;
  NEED(i >= 0 && i < g->n_outputs, "%s: output %d does not exist (the graph has %d outputs)", __func__, i,
       g->n_outputs);
  tensor_info(g, g->outputs[i].tensor, g->outputs[i].name, out);
  return KILN_OK;
}

kiln_status kiln_graph_tensor_info(const kiln_graph *kg, kiln_tensor x, kiln_tensor_info *out) {
  NEED(kg, "%s: graph is NULL", __func__);
  OUTPTR(out);
  const Graph *g = &kg->g;
  NEED(x >= 0 && x < g->n_tensors, "%s: x = %d is not a tensor of this graph (it has %d)", __func__, (int)x,
       g->n_tensors);
  tensor_info(g, x, NULL, out);
  return KILN_OK;
}

/* ---- values ---- */

/* An OnnxTensor from onnx.c handed over as a value: name and data move, nothing is copied. */
static void take(OnnxTensor *t, kiln_value *v) {
  memset(v, 0, sizeof *v);
  v->name = t->name;
  v->dtype = t->dtype;
  v->rank = t->rank;
  memcpy(v->shape, t->shape, sizeof v->shape);
  v->numel = t->numel;
  v->data = t->data;
  memset(t, 0, sizeof *t);
}

kiln_status kiln_value_read_pb_buffer(const void *data, size_t size, const char *base_dir, kiln_value *out) {
  OUTPTR(out);
  memset(out, 0, sizeof *out);
  NEED(data || !size, "%s: data is NULL", __func__);
  OnnxTensor t;
  kiln_status s = onnx_read_tensor(data, size, base_dir, &t);
  if (!s) take(&t, out);
  return s;
}

kiln_status kiln_value_read_pb(const char *path, kiln_value *out) {
  OUTPTR(out);
  memset(out, 0, sizeof *out);
  OUTPTR(path);
  OnnxTensor t;
  kiln_status s = onnx_read_tensor_file(path, &t);
  if (!s) take(&t, out);
  return s;
}

void kiln_value_clear(kiln_value *v) {
  if (!v) return;
  kiln_free((void *)v->name);
  kiln_free(v->data);
  memset(v, 0, sizeof *v);
}

void kiln_value_list_clear(kiln_value_list *l) {
  if (!l) return;
  for (int i = 0; i < l->n; i++) kiln_value_clear(&l->v[i]);
  kiln_free(l->v);
  memset(l, 0, sizeof *l);
}

kiln_status kiln_value_list_read(const char *dir, const char *prefix, kiln_value_list *out) {
  OUTPTR(out);
  memset(out, 0, sizeof *out);
  OUTPTR(dir);
  OUTPTR(prefix);
  int cap = 0;
  kiln_status s = KILN_OK;
  for (int i = 0; !s && i < INT_MAX; i++) {
    char path[PATH_MAX];
    struct stat st;
    if ((size_t)snprintf(path, sizeof path, "%s/%s_%d.pb", dir, prefix, i) >= sizeof path) {
      s = kiln_fail(KILN_ERR_INVALID_ARG, "test data folder path too long: '%s'", dir);
      break;
    }
    if (stat(path, &st) != 0) break;
    if (out->n == cap) {  /* full? double, checking both the count and the bytes */
      int ncap = cap ? (cap <= INT_MAX / 2 ? 2 * cap : 0) : 8;
      bool fits = ncap && (size_t)ncap <= SIZE_MAX / sizeof(kiln_value);
      kiln_value *v = fits ? kiln_realloc(out->v, sizeof *v * (size_t)ncap) : NULL;
      if (!v) {
        s = kiln_fail(KILN_ERR_NO_MEMORY, "%s: out of memory for %d values", path, ncap);
        break;
      }
      out->v = v, cap = ncap;
    }
    if (!(s = kiln_value_read_pb(path, &out->v[out->n]))) out->n++;
  }
  if (s) kiln_value_list_clear(out);
  return s;
}

/* A value kiln may read: a known dtype, a rank and shape whose product is numel, and for
 * strings no NULL element. data may be NULL (a binding that fixes only a shape: the importer
 * refuses it where it needs the data). arg names it in messages ("bind[2]"). */
static kiln_status check_value(const char *fn, const char *arg, const kiln_value *v) {
  NEED(v, "%s: %s is NULL", fn, arg);
  NEED(dtype_valid((int)v->dtype), "%s: %s has dtype %d, not a kiln_dtype", fn, arg, (int)v->dtype);
  NEED(v->rank >= 0 && v->rank <= KILN_MAX_RANK, "%s: %s has rank %d, outside 0..%d", fn, arg, v->rank,
       KILN_MAX_RANK);
  for (int d = 0; d < v->rank; d++)
    NEED(v->shape[d] >= 0, "%s: %s: dim %d is %lld (negative)", fn, arg, d, (long long)v->shape[d]);
  int64_t numel, bytes;
  NEED(shape_numel(v->rank, v->shape, &numel) && size_mul(numel, (int64_t)kiln_dtype_size(v->dtype), &bytes),
       "%s: %s: the shape's size overflows", fn, arg);
  NEED(numel == v->numel, "%s: %s: numel is %lld, its shape holds %lld", fn, arg, (long long)v->numel,
       (long long)numel);
  for (int64_t i = 0; v->data && v->dtype == KILN_STRING && i < numel; i++)
    NEED(((const char *const *)v->data)[i], "%s: %s: string element %lld is NULL", fn, arg, (long long)i);
  return KILN_OK;
}

/* Element i of a numeric or bool value (checked by the get_* calls). */
static kiln_status element(const char *fn, const kiln_value *v, int64_t i, bool string) {
  NEED(v, "%s: v is NULL", fn);
  NEED(dtype_valid((int)v->dtype), "%s: dtype %d is not a kiln_dtype", fn, (int)v->dtype);
  NEED((v->dtype == KILN_STRING) == string, "%s: the value is %s, not %s", fn, kiln_dtype_name(v->dtype),
       string ? "a string" : "a number");
  NEED(i >= 0 && i < v->numel, "%s: index %lld is outside 0..%lld", fn, (long long)i, (long long)v->numel - 1);
  NEED(v->data, "%s: data is NULL", fn);
  return KILN_OK;
}

kiln_status kiln_value_get_f64(const kiln_value *v, int64_t i, double *out) {
  kiln_status s = element(__func__, v, i, false);
  if (s) return s;
  OUTPTR(out);
  *out = dtype_load_f64(v->dtype, v->data, i);
  return KILN_OK;
}

kiln_status kiln_value_get_i64(const kiln_value *v, int64_t i, int64_t *out) {
  kiln_status s = element(__func__, v, i, false);
  if (s) return s;
  OUTPTR(out);
  *out = dtype_load_i64(v->dtype, v->data, i);
  return KILN_OK;
}

kiln_status kiln_value_get_str(const kiln_value *v, int64_t i, const char **out) {
  kiln_status s = element(__func__, v, i, true);
  if (s) return s;
  OUTPTR(out);
  *out = ((const char *const *)v->data)[i];
  return KILN_OK;
}

int kiln_dtype_is_float(kiln_dtype t) { return dtype_is_float(t); }

kiln_status kiln_shape_format(int rank, const int64_t *shape, char *buf, size_t cap) {
  NEED(buf && cap, "%s: buf is NULL or cap is 0", __func__);
  buf[0] = 0;
  NEED(rank >= 0 && rank <= KILN_MAX_RANK, "%s: rank %d is outside 0..%d", __func__, rank, KILN_MAX_RANK);
  NEED(shape || !rank, "%s: shape is NULL", __func__);
  graph_shape_str(rank, shape, buf, cap);
  size_t need = 3;  /* "[]" and the NUL */
  for (int i = 0; i < rank; i++) need += (size_t)snprintf(NULL, 0, "%s%lld", i ? "," : "", (long long)shape[i]);
  NEED(need <= cap, "%s: %zu bytes do not hold the shape (%zu needed)", __func__, cap, need);
  return KILN_OK;
}

/* ---- binding at import ---- */

/* The caller's values, each checked, as the importer's (*ts to kiln_free; NULL for none).
 * The importer only reads them: names and data are not copied. */
static kiln_status bind_values(const char *fn, int n, const kiln_value *bind, OnnxTensor **ts) {
  *ts = NULL;
  NEED(n >= 0, "%s: n is %d (negative)", fn, n);
  NEED(bind || !n, "%s: bind is NULL", fn);
  for (int k = 0; k < n; k++) {
    char arg[32];
    snprintf(arg, sizeof arg, "bind[%d]", k);
    kiln_status s = check_value(fn, arg, &bind[k]);
    if (s) return s;
  }
  if (!n) return KILN_OK;
  OnnxTensor *t = *ts = kiln_calloc((size_t)n, sizeof *t);
  if (!t) return kiln_fail(KILN_ERR_NO_MEMORY, "%s: out of memory for %d values", fn, n);
  for (int k = 0; k < n; k++) {
    const kiln_value *v = &bind[k];
    t[k] = (OnnxTensor){ .name = (char *)v->name, .dtype = v->dtype, .rank = v->rank, .numel = v->numel,
                         .data = v->data };
    memcpy(t[k].shape, v->shape, sizeof t[k].shape);
  }
  return KILN_OK;
}

kiln_status kiln_graph_load_onnx_buffer_bound(const void *data, size_t size, const char *base_dir, int n,
                                              const kiln_value *bind, kiln_graph **out) {
  OUTPTR(out);
  *out = NULL;
  NEED(data || !size, "%s: data is NULL", __func__);
  OnnxTensor *ts;
  kiln_status s = bind_values(__func__, n, bind, &ts);
  if (s) return s;
  Graph *g;
  s = graph_load_onnx_bound(data, size, base_dir, ts, n, &g);
  kiln_free(ts);
  *out = (kiln_graph *)g;
  return s;
}

kiln_status kiln_graph_load_onnx_bound(const char *path, int n, const kiln_value *bind, kiln_graph **out) {
  OUTPTR(out);
  *out = NULL;
  OUTPTR(path);
  OnnxTensor *ts;
  kiln_status s = bind_values(__func__, n, bind, &ts);
  if (s) return s;
  Graph *g;
  s = graph_load_onnx_file(path, ts, n, &g);
  kiln_free(ts);
  *out = (kiln_graph *)g;
  return s;
}
