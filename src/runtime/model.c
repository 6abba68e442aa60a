/*
 * model.c — kiln_model: an ONNX model compiled once per set of input shapes. The model keeps
 * the file's bytes (so every program comes from the same model even if the file changes) and
 * its declared inputs and outputs; kiln_model_program binds a set of shapes through the
 * importer's bound loader, compiles, and keeps the program in a small LRU. The cache is a
 * plain array: a model meets a handful of shapes, and a linear scan of a few keys costs less
 * than the ctypes call that asks for it.
 */
#include "runtime.h"

#include <limits.h>
#include <string.h>

#define MODEL_DEFAULT_CAPACITY 8

/* One compiled set of shapes: key is every input's rank then its dims, in input order. */
typedef struct ShapeProgram {
  int64_t *key;
  int n_key;
  kiln_graph *graph;
  kiln_program *program;
  uint64_t used;  /* the model's clock at the last use: the smallest is evicted */
} ShapeProgram;

struct kiln_model {
  void *bytes;
  size_t size;
  const char *base_dir;  /* NULL: no external data (in names) */
  kiln_options opt;
  Arena names;     /* the declared tensors' names, the path and the base folder */
  kiln_model_tensor *in, *out;
  int n_in, n_out;
  ShapeProgram *cache;
  int capacity, n_cached;
  uint64_t clock;
  int64_t compiles;
  const ShapeProgram *last;
  const char *path;  /* for messages (in names) */
};

static void entry_free(ShapeProgram *e) {
  kiln_program_free(e->program);
  kiln_graph_free(e->graph);
  kiln_free(e->key);
  memset(e, 0, sizeof *e);
}

void kiln_model_free(kiln_model *m) {
  if (!m) return;
  for (int i = 0; i < m->n_cached; i++) entry_free(&m->cache[i]);
  kiln_free(m->cache);
  kiln_free(m->bytes);
  arena_free(&m->names);
  kiln_free(m);
}

/* Takes ownership of bytes (kiln_malloc memory). what: the path, or "model" for a buffer. */
static kiln_status model_create(void *bytes, size_t size, const char *base_dir, const kiln_options *opt, int capacity,
                                const char *what, kiln_model **out) {
  kiln_model *m = kiln_malloc(sizeof *m);
  if (!m) {
    kiln_free(bytes);
    return kiln_fail(KILN_ERR_NO_MEMORY, "kiln_model_open: out of memory");
  }
  memset(m, 0, sizeof *m);
  m->bytes = bytes, m->size = size;
  m->opt = opt ? *opt : kiln_options_default();
  m->capacity = capacity > 0 ? capacity : MODEL_DEFAULT_CAPACITY;
  kiln_status s = KILN_OK;
  if (!(m->path = arena_strdup(&m->names, what)) || (base_dir && !(m->base_dir = arena_strdup(&m->names, base_dir))) ||
      !(m->cache = kiln_malloc((size_t)m->capacity * sizeof *m->cache)))
    s = kiln_fail(KILN_ERR_NO_MEMORY, "kiln_model_open: out of memory");
  if (!s) s = onnx_declared_io(bytes, size, &m->names, &m->in, &m->n_in, &m->out, &m->n_out);
  if (s) {
    kiln_model_free(m);
    return s;
  }
  *out = m;
  return KILN_OK;
}

kiln_status kiln_model_open(const char *path, const kiln_options *opt, int capacity, kiln_model **out) {
  if (!path || !out) return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_model_open: %s is NULL", path ? "out" : "path");
  *out = NULL;
  if (capacity > INT_MAX / (int)sizeof(ShapeProgram))
    return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_model_open: capacity %d is too large", capacity);
  void *bytes;
  size_t size;
  kiln_status s = onnx_read_file(path, &bytes, &size);
  if (s) return s;
  char dir[PATH_MAX];
  onnx_dirname(path, dir, sizeof dir);
  s = model_create(bytes, size, dir, opt, capacity, path, out);
  if (s) kiln_error_prefix("%s: ", path);
  return s;
}

kiln_status kiln_model_open_buffer(const void *data, size_t size, const char *base_dir, const kiln_options *opt,
                                   int capacity, kiln_model **out) {
  if (!out) return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_model_open_buffer: out is NULL");
  *out = NULL;
  if (!data && size) return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_model_open_buffer: data is NULL");
  if (capacity > INT_MAX / (int)sizeof(ShapeProgram))
    return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_model_open_buffer: capacity %d is too large", capacity);
  void *bytes = kiln_malloc(size ? size : 1);
  if (!bytes) return kiln_fail(KILN_ERR_NO_MEMORY, "kiln_model_open_buffer: cannot copy %zu bytes", size);
  if (size) memcpy(bytes, data, size);
  return model_create(bytes, size, base_dir, opt, capacity, "model", out);
}

static kiln_status tensor_at(const char *fn, const kiln_model *m, int i, bool input, kiln_model_tensor *out) {
  if (!m || !out) return kiln_fail(KILN_ERR_INVALID_ARG, "%s: %s is NULL", fn, m ? "out" : "model");
  int n = input ? m->n_in : m->n_out;
  if (i < 0 || i >= n) return kiln_fail(KILN_ERR_INVALID_ARG, "%s: %d is not in 0..%d", fn, i, n - 1);
  *out = (input ? m->in : m->out)[i];
  return KILN_OK;
}

kiln_status kiln_model_input_count(const kiln_model *m, int *out) {
  if (!m || !out) return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_model_input_count: %s is NULL", m ? "out" : "model");
  *out = m->n_in;
  return KILN_OK;
}

kiln_status kiln_model_output_count(const kiln_model *m, int *out) {
  if (!m || !out) return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_model_output_count: %s is NULL", m ? "out" : "model");
  *out = m->n_out;
  return KILN_OK;
}

kiln_status kiln_model_input_info(const kiln_model *m, int i, kiln_model_tensor *out) {
  return tensor_at(__func__, m, i, true, out);
}

kiln_status kiln_model_output_info(const kiln_model *m, int i, kiln_model_tensor *out) {
  return tensor_at(__func__, m, i, false, out);
}

/* The key of a set of shapes (checked: ranks in range, dims >= 0) into key[0..*n). */
static kiln_status shape_key(const kiln_model *m, const kiln_value *v, int64_t *key, int *n) {
  int k = 0;
  for (int i = 0; i < m->n_in; i++) {
    if (v[i].rank < 0 || v[i].rank > KILN_MAX_RANK)
      return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_model_program: input '%s': rank %d is not in 0..%d", m->in[i].name,
                       v[i].rank, KILN_MAX_RANK);
    key[k++] = v[i].rank;
    for (int d = 0; d < v[i].rank; d++) {
      if (v[i].shape[d] < 0)
        return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_model_program: input '%s' dim %d is negative (%lld)", m->in[i].name,
                         d, (long long)v[i].shape[d]);
      key[k++] = v[i].shape[d];
    }
  }
  *n = k;
  return KILN_OK;
}

static ShapeProgram *cache_find(kiln_model *m, const int64_t *key, int n) {
  for (int i = 0; i < m->n_cached; i++) {
    ShapeProgram *e = &m->cache[i];
    if (e->n_key == n && !memcmp(e->key, key, (size_t)n * sizeof *key)) return e;
  }
  return NULL;
}

/* Imports the model with these shapes bound and compiles it into e (all or nothing). */
static kiln_status compile_shapes(kiln_model *m, const kiln_value *v, ShapeProgram *e) {
  kiln_value *bind = kiln_malloc((size_t)(m->n_in ? m->n_in : 1) * sizeof *bind);
  if (!bind) return kiln_fail(KILN_ERR_NO_MEMORY, "kiln_model_program: out of memory");
  for (int i = 0; i < m->n_in; i++) {
    int64_t numel = 1;
    for (int d = 0; d < v[i].rank; d++)
      if (!size_mul(numel, v[i].shape[d], &numel)) {
        kiln_free(bind);
        return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_model_program: input '%s': the shape's size overflows",
                         m->in[i].name);
      }
    bind[i] = (kiln_value){ .name = m->in[i].name, .dtype = v[i].dtype, .rank = v[i].rank, .numel = numel };
    memcpy(bind[i].shape, v[i].shape, sizeof bind[i].shape);
  }
  kiln_status s = kiln_graph_load_onnx_buffer_bound(m->bytes, m->size, m->base_dir, m->n_in, bind, &e->graph);
  kiln_free(bind);
  if (s) {
    kiln_error_prefix("%s: ", m->path);
    return s;
  }
  if ((s = kiln_program_compile(e->graph, &m->opt, &e->program))) {
    kiln_graph_free(e->graph);
    e->graph = NULL;
    return s;
  }
  m->compiles++;
  return KILN_OK;
}

kiln_status kiln_model_program(kiln_model *m, int n, const kiln_value *shapes, kiln_program **program,
                               const kiln_graph **graph) {
  if (!m || !program) return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_model_program: %s is NULL", m ? "program" : "model");
  *program = NULL;
  if (graph) *graph = NULL;
  if (n != m->n_in) return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_model_program: %d shapes given, the model has %d inputs", n, m->n_in);
  if (n && !shapes) return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_model_program: shapes is NULL");
  int64_t *key = kiln_malloc((size_t)(n ? n : 1) * (KILN_MAX_RANK + 1) * sizeof *key);
  if (!key) return kiln_fail(KILN_ERR_NO_MEMORY, "kiln_model_program: out of memory");
  int n_key = 0;
  kiln_status s = shape_key(m, shapes, key, &n_key);
  ShapeProgram *e = s ? NULL : cache_find(m, key, n_key);
  if (!s && !e) {
    ShapeProgram fresh = { .key = key, .n_key = n_key };
    if ((s = compile_shapes(m, shapes, &fresh))) goto done;
    key = NULL;  /* the entry owns it */
    if (m->n_cached == m->capacity) {  /* evict the least recently used */
      ShapeProgram *old = &m->cache[0];
      for (int i = 1; i < m->n_cached; i++)
        if (m->cache[i].used < old->used) old = &m->cache[i];
      entry_free(old);
      *old = fresh;
      e = old;
    } else {
      e = &m->cache[m->n_cached++];
      *e = fresh;
    }
  }
  if (e) {
    e->used = ++m->clock;
    m->last = e;
    *program = e->program;
    if (graph) *graph = e->graph;
  }
done:
  kiln_free(key);
  return s;
}

kiln_status kiln_model_census(const kiln_model *m, kiln_census *out) {
  if (!m || !out) return kiln_fail(KILN_ERR_INVALID_ARG, "kiln_model_census: %s is NULL", m ? "out" : "model");
  memset(out, 0, sizeof *out);
  kiln_status s = m->last ? kiln_program_census(m->last->program, out) : KILN_OK;
  out->shape_programs = m->n_cached;
  out->shape_compiles = m->compiles;
  return s;
}
