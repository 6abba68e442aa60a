/*
 * onnx_import.h — private to the ONNX importer (onnx.c reads the protobuf and walks
 * the graph; onnx_ops.c holds one import rule per ONNX op; onnx_schema.c the attributes
 * each op may carry). Not part of graph.h: nothing outside these files sees protobuf types.
 */
#ifndef KILN_ONNX_IMPORT_H
#define KILN_ONNX_IMPORT_H

#include "graph.h"
#include "onnx.pb-c.h"

/* Name -> tensor id, open addressing; keys live in the importer's arena. */
typedef struct NameMap {
  const char **keys; int *vals; int cap, n;
  const struct NameMap *parent;  /* enclosing scope a subgraph may read (NULL: none) */
} NameMap;

/* A symbolic dim (dim_param) given a value by a caller's value for an input. */
typedef struct DimBind { const char *param; int64_t value; const char *input; } DimBind;

typedef struct Importer {
  Graph *g;
  Arena tmp;                     /* scratch for the whole import: freed at the end */
  const char *base_dir;          /* folder external data may be read from; NULL: none */
  const Onnx__ModelProto *model;
  const OnnxTensor *bind; int n_bind;    /* caller-supplied input values (may be NULL) */
  DimBind *dims; int n_dims, cap_dims;   /* the symbolic dims those values bind (arena) */
  NameMap *scope;                /* the names visible to the nodes being imported */
  int opset;                     /* version of the default domain in the current scope */
  int depth;                     /* function-inlining depth */
  long *budget;                  /* nodes left to import (unrolling and inlining included), shared */
  size_t file_size, mem_limit;   /* bytes of the model; arena bytes allowed while importing nodes */
  /* the node being imported, for error messages */
  const Onnx__NodeProto *node;
  const char *node_name;
  /* attribute references of an inlined function call, NULL outside functions */
  const Onnx__NodeProto *caller;
  /* ONNX sequences live only at import time: a list of tensor ids, named in the
   * scope by a negative id (SEQ_ID). They never reach the graph. */
  struct Seq { int n; int *ids; } *seqs;
  int n_seqs, cap_seqs;
} Importer;

#define SEQ_ID(k) (-2 - (k))   /* name-map value of sequence k; -1 means "no value" */
#define SEQ_INDEX(id) (-2 - (id))

/* -- onnx.c -- */

kiln_status im_fail(Importer *im, kiln_status s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The id a name has in the current scope: a tensor (>= 0), a sequence (< -1) or -1. */
int map_get_id(Importer *im, const char *name);
/* Attribute lookup on the current node (references into a calling function resolved). */
const Onnx__AttributeProto *im_attr(Importer *im, const char *name);
int64_t im_attr_i(Importer *im, const char *name, int64_t dflt);
float im_attr_f(Importer *im, const char *name, float dflt);
const char *im_attr_s(Importer *im, const char *name, const char *dflt);  /* arena copy */
/* ints attribute: n = -1 when absent */
const int64_t *im_attr_ints(Importer *im, const char *name, int *n);
const float *im_attr_floats(Importer *im, const char *name, int *n);
/* TensorProto -> host tensor (arena memory). what names the tensor in errors. */
kiln_status im_tensor(Importer *im, const Onnx__TensorProto *t, OnnxTensor *out);
/* ONNX element type -> kiln dtype: KILN_ERR_UNSUPPORTED naming what for an ONNX type kiln
 * lacks, KILN_ERR_MODEL for 0 (undefined) and numbers ONNX does not define. */
kiln_status onnx_elem_type(int32_t t, const char *what, kiln_dtype *out);
/* Whether t is an element type ONNX defines (1..26; 0 is "undefined"). */
bool onnx_elem_type_valid(int32_t t);
/* New constant leaf. */
kiln_status im_const(Importer *im, kiln_dtype t, int rank, const int64_t *shape, const void *data, int *out);
kiln_status im_const_i64(Importer *im, int rank, const int64_t *shape, const int64_t *data, int *out);

/* -- onnx_ops.c -- */

/* Imports one node of the default domain: ins[i] = tensor id or -1 for a missing
 * optional input; writes outs[0..n_out-1] (-1: output not produced). */
kiln_status im_node(Importer *im, const char *op, int n_in, const int *ins, int n_out, int *outs);
/* Imports a subgraph (If branch, Loop/Scan body) with its inputs bound to ins; it sees
 * the enclosing names. outs[i]: the ids of its outputs. */
kiln_status im_subgraph(Importer *im, const Onnx__GraphProto *body, int n_in, const int *ins, int n_out, int *outs);
/* ai.onnx.ml LabelEncoder (the one ai.onnx.ml op kiln imports). */
kiln_status im_label_encoder(Importer *im, int n_in, const int *ins, int n_out, int *outs);
/* ai.onnx.preview.training Gradient, through graph_grad. */
kiln_status im_gradient(Importer *im, int n_in, const int *ins, int n_out, int *outs);

/* -- onnx_schema.c -- */

/* Checks the current node's attributes: each has a name (given once) and an ONNX type and,
 * for an op the schema table lists (domain "" or "ai.onnx" for the default; NULL: check no
 * schema, as for a call of a model-local function), a name and type that op takes at opset
 * (-1: the newest). A failure is KILN_ERR_MODEL naming the node, the attribute and what was
 * expected. Ops the table lacks pass here and are refused as unsupported by their import. */
kiln_status im_check_attrs(Importer *im, const char *domain, const char *op, int opset);
/* "FLOAT", "INTS", ... for an AttributeProto type; NULL for a number that is none. */
const char *onnx_attr_type_name(int type);

#endif
