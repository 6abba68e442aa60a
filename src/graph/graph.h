/*
 * graph — the first stage. Ops with attributes over tensors with static shapes
 * and dtypes, built through the C API or imported from ONNX. Shape inference
 * runs as each node is added; compositions (softmax, layernorm, gelu, mean, ...)
 * expand into primitive ops here, so later stages see only ops.def.
 * Reverse-mode autodiff is a graph -> graph transform (autodiff.c).
 *
 * Hands on: a Graph whose tensors are in topological order (a node's inputs
 * always have smaller ids than its output).
 */
#ifndef KILN_GRAPH_H
#define KILN_GRAPH_H

#include "../base/base.h"

#include <regex.h>

typedef enum {
#define OP(name, str, arity, kind) OP_##name,
#include "ops.def"
#undef OP
  OP_COUNT
} OpKind;

typedef enum { EXPR_INJ, EXPR_RED, EXPR_OPQ } OpExprKind;

extern const char *const op_names[OP_COUNT];
extern const int op_arity[OP_COUNT];
extern const OpExprKind op_expr_kind[OP_COUNT];

typedef enum {
  T_INPUT,   /* fed at each run */
  T_PARAM,   /* data given at build time; uploaded once; may be updated by assign */
  T_CONST,   /* data given at build time; never changes (may be folded) */
  T_VALUE,   /* produced by a node */
} TensorKind;

/*
 * Attributes of every op kind in one flat struct: each op reads the fields it needs.
 * graph_add receives them already normalised (the public API / ONNX importer do that):
 *   unary, binary   no attrs; binary operands share a dtype, output shape is their broadcast;
 *                   comparisons give bool; and/or/xor/not take bool (not also ints), shifts ints
 *   WHERE           in: cond (bool), a, b (same dtype); three-way broadcast
 *   CAST            to
 *   RESHAPE         shape_rank/shape: the output shape (no -1 left); same numel
 *   TRANSPOSE       perm: out.shape[i] = in.shape[perm[i]]
 *   SLICE           for every input axis r: out[..i_r..] = in[..starts[r] + i_r*steps[r]..];
 *                   shape_rank/shape = output shape; every read is in range (importer clamps)
 *   CONCAT          axis; inputs agree on every other dim and dtype
 *   PAD             pads[r] begin, pads[rank+r] end (negative crops), pad_mode, value
 *   EXPAND          shape_rank/shape: the output shape (broadcast of input and target)
 *   GATHER          in: data, indices (i32/i64, any rank, negative counts from the end); axis;
 *                   out shape = data[:axis] + indices.shape + data[axis+1:]
 *   TILE            shape_rank/shape: the output shape (in.shape[r] * repeats[r])
 *   REDUCE_*        n_axes/axes (sorted, unique, >= 0; n_axes == 0 never: the API expands "all"),
 *                   keepdims
 *   ARGMAX/ARGMIN   axis, keepdims, select_last; output i64
 *   MATMUL          numpy.matmul: 1-D operands promoted then squeezed, batch dims broadcast
 *   CONV            in: x [N,C,spatial..], w [M,C/group,kernel..]; conv (strides/dilations/group
 *                   never 0); bias is added by the builder as a separate ADD
 *   STR_NORMALIZE   str: case_change, case_sensitive, words (stopwords, removed); in and out
 *                   string, rank 1 [C] or 2 [1,C]; with stopwords the input must be constant
 *                   (the output length depends on it); all removed gives [1] / [1,1] of ""
 *   STR_CONCAT      two strings, broadcast; elementwise concatenation
 *   REGEX_MATCH     str: pattern (POSIX extended, whole string); string in, bool out
 *   LABEL_ENCODE    str: keys -> values (key_t/val_t: any dtype but bool), dflt; same shape
 *   EQ/NE, WHERE and the movement ops (not PAD) also take strings; nothing else does
 *   MAX_POOL/AVG_POOL  pool (strides/dilations never 0); output spatial dim =
 *                   floor_or_ceil((in + pb + pe - ((k-1)*d + 1)) / s) + 1, and in ceil mode a last
 *                   window starting beyond in + pb is dropped (ONNX rule)
 */
/* Attributes of the string ops; lives in the graph arena (graph_add copies it). */
typedef struct StrAttr {
  int case_change;               /* STR_NORMALIZE: 0 none, 1 lower, 2 upper (ASCII letters only) */
  int case_sensitive;            /* STR_NORMALIZE: stopwords match exactly, else ASCII-case-folded */
  int n_words;                   /* STR_NORMALIZE: stopwords */
  const char **words;
  const char *pattern;           /* REGEX_MATCH */
  kiln_dtype key_t, val_t;       /* LABEL_ENCODE: dtypes of keys and values */
  int64_t n_keys;
  const void *keys, *values;     /* n_keys elements each */
  const void *dflt;              /* one element of val_t */
} StrAttr;

typedef struct Attr {
  int axis;                      /* concat, gather, argmax/argmin (normalised, >= 0) */
  int keepdims;                  /* reductions */
  int select_last;               /* argmax/argmin */
  int n_axes;                    /* reductions: axes reduced (normalised, sorted, unique) */
  int axes[KILN_MAX_RANK];
  int perm[KILN_MAX_RANK];       /* transpose */
  int shape_rank;                /* reshape/expand/tile: the output shape (-1 already resolved) */
  int64_t shape[KILN_MAX_RANK];
  /* slice, normalised over every axis of the input: out[i] = in[start + i*step], dims from out shape */
  int64_t starts[KILN_MAX_RANK], steps[KILN_MAX_RANK];
  int64_t pads[2 * KILN_MAX_RANK];   /* pad: begins then ends over all axes (may be negative) */
  kiln_pad_mode pad_mode;
  double value;                  /* pad constant */
  kiln_dtype to;                 /* cast */
  kiln_conv_params conv;         /* conv */
  kiln_pool_params pool;         /* pools */
  const StrAttr *str;            /* string ops */
} Attr;

typedef struct Tensor {
  int id;
  TensorKind kind;
  kiln_dtype dtype;
  int rank;
  int64_t shape[KILN_MAX_RANK];
  int64_t numel;
  const char *name;              /* never NULL; from the model or generated ("t12") */
  void *data;                    /* T_PARAM / T_CONST: host data, owned by the graph arena */
  int node;                      /* T_VALUE: index of the producing node, else -1 */
} Tensor;

typedef struct Node {
  OpKind op;
  int n_in;
  int *in;                       /* tensor ids */
  int out;                       /* tensor id (every op has exactly one output) */
  Attr attr;
  const char *name;              /* from the model, or the op name */
} Node;

typedef struct Output { int tensor; const char *name; } Output;
typedef struct Assign { int param, value; } Assign;

typedef struct Graph {
  Arena arena;
  Tensor *tensors; int n_tensors, cap_tensors;
  Node *nodes; int n_nodes, cap_nodes;
  Output *outputs; int n_outputs, cap_outputs;
  Assign *assigns; int n_assigns, cap_assigns;
  const char *node_name;         /* name given to the next nodes added (ONNX import); NULL: op name */
  kiln_dtype autocast;           /* kiln_graph_set_autocast: f32 (off), bf16 or f16 */
  bool data_parallel;            /* kiln_graph_set_data_parallel: training steps average gradients over ranks */
} Graph;

struct kiln_graph { Graph g; };

/* -- graph.c: building, with shape inference -- */

Graph *graph_create(void);
void graph_free(Graph *g);
/* Leaves. data is copied (NULL for inputs). */
kiln_status graph_leaf(Graph *g, TensorKind kind, const char *name, kiln_dtype t, int rank,
                       const int64_t *shape, const void *data, int *out);
/* Adds a primitive node after checking and inferring the output; on failure records an
 * error naming the node (g->node_name) and changes nothing. Bad inputs or attributes give
 * KILN_ERR_INVALID_ARG (an importer may report them as KILN_ERR_MODEL); an output size that
 * overflows, or a failed allocation, KILN_ERR_NO_MEMORY. attr may be NULL for ops without. */
kiln_status graph_add(Graph *g, OpKind op, int n_in, const int *in, const Attr *attr, int *out);
kiln_status graph_output(Graph *g, int tensor, const char *name);
kiln_status graph_assign(Graph *g, int param, int value);
/* Records "node 'NAME' (op): MESSAGE" as the last error, returns status. */
kiln_status graph_node_error(const Graph *g, OpKind op, kiln_status s, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Invariants: topological order, shapes consistent with inference. For tests and debug builds. */
kiln_status graph_check(const Graph *g);
void graph_print(const Graph *g, FILE *f);
/* Broadcast two shapes (NumPy rules). */
bool graph_broadcast(int ra, const int64_t *a, int rb, const int64_t *b, int *rank, int64_t *out);
/* Writes "[2,3]" into buf (truncated to n bytes), for messages. */
void graph_shape_str(int rank, const int64_t *shape, char *buf, size_t n);

/* -- api.c: the public graph API -- */

/* ONNX Slice clamping on one axis of size d (>= 0; step != 0): the first index, the
 * step (unit when count <= 1) and the count; defined for every int64 input. */
void graph_slice_axis(int64_t d, int64_t start, int64_t end, int64_t step, int64_t *first, int64_t *stride,
                      int64_t *count);

/* -- compose.c: compositions built from primitives (also behind the public API) -- */

kiln_status graph_softmax(Graph *g, int x, int axis, bool log, int *out);
kiln_status graph_layernorm(Graph *g, int x, int scale, int bias, int axis, double eps, int *out);
kiln_status graph_batchnorm(Graph *g, int x, int scale, int bias, int mean, int var, double eps, int *out);
kiln_status graph_reduce(Graph *g, kiln_reduce_op op, int x, int n_axes, const int *axes, int keepdims, int *out);
kiln_status graph_scalar(Graph *g, kiln_dtype t, double v, int *out);

/* -- strings.c: the scalar semantics of the string ops (graph inference and ref share them) -- */

/* StringNormalizer: whether s survives the stopwords; its case-mapped copy into buf
 * (strlen(s) + 1 bytes). ASCII letters change case; every other byte passes through. */
bool str_keep(const StrAttr *a, const char *s);
void str_case(const StrAttr *a, const char *s, char *buf);
/* LabelEncoder: index of element i of src (dtype a->key_t) in a->keys, or -1. Strings
 * compare by bytes, numbers by bits. */
int64_t str_label_find(const StrAttr *a, const void *src, int64_t i);
/* RegexFullMatch: compiles an RE2-syntax pattern to a POSIX extended regex anchored at
 * both ends (regfree it). The RE2 subset kiln takes: literals, . [] [^] ranges, \w \W \d
 * \D \s \S (ASCII classes, also inside brackets except the negated ones), \b \B, escaped
 * punctuation, ^ $, groups ( ) and (?: ), |, * + ? {m,n}, lazy quantifiers (the same full
 * matches). Refused (KILN_ERR_UNSUPPORTED, naming the construct): flags, named groups,
 * \p{..}, \Q..\E, hex/octal escapes, backreferences. Differences that remain: . matches
 * one byte (RE2: one UTF-8 character) and also a newline (RE2: not). */
kiln_status str_regex_compile(const char *pattern, regex_t *re);
/* Copies a into the arena (words, pattern, tables); NULL when out of memory. */
StrAttr *str_attr_copy(Arena *arena, const StrAttr *a);

/* -- fold.c: constant folding (ONNX shape sub-graphs) -- */

/* If every input of tensor t's producer is constant, evaluates it and turns t into T_CONST. */
kiln_status graph_fold(Graph *g, int t);

/* -- autodiff.c: reverse mode as a graph transform -- */

kiln_status graph_grad(Graph *g, int loss, int n, const int *wrt, int *grads);
/* Test hook: makes the vector-Jacobian rule of op kind op deliberately wrong (its
 * contributions scaled by 1.25); -1 restores every rule. Lets a test show that the
 * gradient check catches a broken rule. */
void graph_grad_break_rule(int op);

/* -- onnx.c: import -- */

kiln_status graph_load_onnx(const void *data, size_t size, const char *base_dir, Graph **out);
/* A host tensor as ONNX stores it (a TensorProto: initializer or test-data .pb file). */
typedef struct OnnxTensor {
  char *name; kiln_dtype dtype; int rank; int64_t shape[KILN_MAX_RANK]; int64_t numel; void *data;
} OnnxTensor;
/* As graph_load_onnx, with values for graph inputs: they fix shapes the model leaves
 * symbolic, and an input used as a shape operand (Reshape's shape, ...) becomes a constant.
 * A value matches by name, or when unnamed by position among the graph inputs that are not
 * initializers. Tensor k of the graph is that k-th input (T_INPUT, or T_CONST if it became one). */
kiln_status graph_load_onnx_bound(const void *data, size_t size, const char *base_dir,
                                  const OnnxTensor *bind, int n_bind, Graph **out);
/* As graph_load_onnx_bound from the file at path (external data beside it); every
 * failure's message starts with the path. */
kiln_status graph_load_onnx_file(const char *path, const OnnxTensor *bind, int n_bind, Graph **out);
/* The declared graph inputs (those that are not initializers, in order) and outputs of a
 * model, for kiln_model: arrays, names and dim names in a. Inputs must be typed tensors. */
kiln_status onnx_declared_io(const void *data, size_t size, Arena *a, kiln_model_tensor **in, int *n_in,
                             kiln_model_tensor **out, int *n_out);
/* Reads one serialized TensorProto; name and data come from kiln_malloc (onnx_tensor_clear).
 * A string tensor's data is one block: numel char pointers, then the strings they point at. */
kiln_status onnx_read_tensor(const void *data, size_t size, const char *base_dir, OnnxTensor *out);
void onnx_tensor_clear(OnnxTensor *t);
/* Test hooks: the attribute check of the import (onnx_schema.c) on every node of a model,
 * its subgraphs' and functions' too, without importing it; and the schema table's own
 * consistency (sorted, known types), KILN_OK or a message naming the bad row. */
kiln_status onnx_check_attrs(const void *data, size_t size);
kiln_status onnx_schema_check_table(void);
/* A whole file into kiln_malloc memory; the folder part of a path ("." for none). */
kiln_status onnx_read_file(const char *path, void **data, size_t *size);
void onnx_dirname(const char *path, char *buf, size_t cap);
/* A TensorProto file (external data beside it); a failure's message starts with the path. */
kiln_status onnx_read_tensor_file(const char *path, OnnxTensor *t);
/* DIR/PREFIX_0.pb, DIR/PREFIX_1.pb, ... until one is missing (at most max) into ts; *n read.
 * On failure ts[0..*n) hold what was read (the caller clears them). */
kiln_status onnx_read_tensor_set(const char *dir, const char *prefix, int max, OnnxTensor *ts, int *n);

#endif
