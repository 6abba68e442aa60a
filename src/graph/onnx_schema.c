/*
 * onnx_schema.c — the attributes each ONNX op that kiln imports may carry, by opset, and
 * the check of a node's attributes against them.
 *
 * Takes the node being imported (im->node) with its op, domain and opset; hands back
 * KILN_OK or KILN_ERR_MODEL naming the node, the attribute and what was expected. One
 * table, consulted once per node before the op's import rule runs: a rule may then read
 * any attribute it knows of without asking whether the file was well formed. Attributes
 * ONNX allows but kiln ignores (a Dropout's seed, a Cast's saturate) are listed too: the
 * table is ONNX's schema, not kiln's use of it.
 *
 * Each row gives the attributes of one op from opset `since` until the op's next row
 * ("name:TYPE", TYPE as ONNX's AttributeProto.AttributeType spells it). Rows up to opset 17
 * come from ONNX 1.12's schema registry (every version, folded where nothing changed; the
 * set in force at opset 7, kiln's oldest, opens each op); those from 18 on follow the ONNX
 * operator changelog. A model older than an op's first row (an op kiln imports before ONNX
 * had it) is held to that first row. Rows are sorted by domain, then op, then since: the
 * lookup is a binary search.
 */
#include "onnx_import.h"

#include <string.h>

typedef struct OpAttrs {
  const char *domain;   /* "" for the default domain (ai.onnx) */
  const char *op;
  int since;            /* first opset of this row */
  const char *attrs;    /* "name:TYPE ..." in name order; "" for none */
} OpAttrs;

static const OpAttrs schema[] = {
  { "", "Abs", 6, "" },
  { "", "Acos", 7, "" },
  { "", "Acosh", 9, "" },
  { "", "Add", 7, "" },
  { "", "AffineGrid", 20, "align_corners:INT" },
  { "", "And", 7, "" },
  { "", "ArgMax", 1, "axis:INT keepdims:INT" },
  { "", "ArgMax", 12, "axis:INT keepdims:INT select_last_index:INT" },
  { "", "ArgMin", 1, "axis:INT keepdims:INT" },
  { "", "ArgMin", 12, "axis:INT keepdims:INT select_last_index:INT" },
  { "", "Asin", 7, "" },
  { "", "Asinh", 9, "" },
  { "", "Atan", 7, "" },
  { "", "Atanh", 9, "" },
  { "", "Attention", 23, "is_causal:INT kv_num_heads:INT q_num_heads:INT qk_matmul_output_mode:INT scale:FLOAT "
                         "softcap:FLOAT softmax_precision:INT" },
  { "", "AveragePool", 7, "auto_pad:STRING count_include_pad:INT kernel_shape:INTS pads:INTS strides:INTS" },
  { "", "AveragePool", 10, "auto_pad:STRING ceil_mode:INT count_include_pad:INT kernel_shape:INTS pads:INTS "
                           "strides:INTS" },
  { "", "AveragePool", 19, "auto_pad:STRING ceil_mode:INT count_include_pad:INT dilations:INTS kernel_shape:INTS "
                           "pads:INTS strides:INTS" },
  { "", "BatchNormalization", 7, "epsilon:FLOAT momentum:FLOAT spatial:INT" },
  { "", "BatchNormalization", 9, "epsilon:FLOAT momentum:FLOAT" },
  { "", "BatchNormalization", 14, "epsilon:FLOAT momentum:FLOAT training_mode:INT" },
  { "", "BitShift", 11, "direction:STRING" },
  { "", "BitwiseAnd", 18, "" },
  { "", "BitwiseNot", 18, "" },
  { "", "BitwiseOr", 18, "" },
  { "", "BitwiseXor", 18, "" },
  { "", "BlackmanWindow", 17, "output_datatype:INT periodic:INT" },
  { "", "Cast", 6, "to:INT" },
  { "", "Cast", 19, "saturate:INT to:INT" },
  { "", "Cast", 25, "round_mode:STRING saturate:INT to:INT" },
  { "", "CastLike", 15, "" },
  { "", "CastLike", 19, "saturate:INT" },
  { "", "CastLike", 25, "round_mode:STRING saturate:INT" },
  { "", "Ceil", 6, "" },
  { "", "Celu", 12, "alpha:FLOAT" },
  { "", "CenterCropPad", 18, "axes:INTS" },
  { "", "Clip", 6, "max:FLOAT min:FLOAT" },
  { "", "Clip", 11, "" },
  { "", "Col2Im", 18, "dilations:INTS pads:INTS strides:INTS" },
  { "", "Compress", 9, "axis:INT" },
  { "", "Concat", 1, "axis:INT" },
  { "", "ConcatFromSequence", 11, "axis:INT new_axis:INT" },
  { "", "Constant", 1, "value:TENSOR" },
  { "", "Constant", 11, "sparse_value:SPARSE_TENSOR value:TENSOR" },
  { "", "Constant", 12, "sparse_value:SPARSE_TENSOR value:TENSOR value_float:FLOAT value_floats:FLOATS "
                        "value_int:INT value_ints:INTS value_string:STRING value_strings:STRINGS" },
  { "", "ConstantOfShape", 9, "value:TENSOR" },
  { "", "Conv", 1, "auto_pad:STRING dilations:INTS group:INT kernel_shape:INTS pads:INTS strides:INTS" },
  { "", "ConvInteger", 10, "auto_pad:STRING dilations:INTS group:INT kernel_shape:INTS pads:INTS strides:INTS" },
  { "", "ConvTranspose", 1, "auto_pad:STRING dilations:INTS group:INT kernel_shape:INTS output_padding:INTS "
                            "output_shape:INTS pads:INTS strides:INTS" },
  { "", "Cos", 7, "" },
  { "", "Cosh", 9, "" },
  { "", "CumProd", 26, "exclusive:INT reverse:INT" },
  { "", "CumSum", 11, "exclusive:INT reverse:INT" },
  { "", "DFT", 17, "axis:INT inverse:INT onesided:INT" },
  { "", "DFT", 20, "inverse:INT onesided:INT" },
  { "", "DepthToSpace", 1, "blocksize:INT" },
  { "", "DepthToSpace", 11, "blocksize:INT mode:STRING" },
  { "", "DequantizeLinear", 10, "" },
  { "", "DequantizeLinear", 13, "axis:INT" },
  { "", "DequantizeLinear", 21, "axis:INT block_size:INT" },
  { "", "DequantizeLinear", 23, "axis:INT block_size:INT output_dtype:INT" },
  { "", "Det", 11, "" },
  { "", "Div", 7, "" },
  { "", "Dropout", 7, "ratio:FLOAT" },
  { "", "Dropout", 12, "seed:INT" },
  { "", "DynamicQuantizeLinear", 11, "" },
  { "", "Einsum", 12, "equation:STRING" },
  { "", "Elu", 6, "alpha:FLOAT" },
  { "", "Equal", 7, "" },
  { "", "Erf", 9, "" },
  { "", "Exp", 6, "" },
  { "", "Expand", 8, "" },
  { "", "EyeLike", 9, "dtype:INT k:INT" },
  { "", "Flatten", 1, "axis:INT" },
  { "", "Floor", 6, "" },
  { "", "GRU", 7, "activation_alpha:FLOATS activation_beta:FLOATS activations:STRINGS clip:FLOAT direction:STRING "
                  "hidden_size:INT linear_before_reset:INT" },
  { "", "GRU", 14, "activation_alpha:FLOATS activation_beta:FLOATS activations:STRINGS clip:FLOAT "
                   "direction:STRING hidden_size:INT layout:INT linear_before_reset:INT" },
  { "", "Gather", 1, "axis:INT" },
  { "", "GatherElements", 11, "axis:INT" },
  { "", "GatherND", 11, "" },
  { "", "GatherND", 12, "batch_dims:INT" },
  { "", "Gelu", 20, "approximate:STRING" },
  { "", "Gemm", 7, "alpha:FLOAT beta:FLOAT transA:INT transB:INT" },
  { "", "GlobalAveragePool", 1, "" },
  { "", "GlobalMaxPool", 1, "" },
  { "", "Greater", 7, "" },
  { "", "GreaterOrEqual", 12, "" },
  { "", "GridSample", 16, "align_corners:INT mode:STRING padding_mode:STRING" },
  { "", "GroupNormalization", 18, "epsilon:FLOAT num_groups:INT" },
  { "", "GroupNormalization", 21, "epsilon:FLOAT num_groups:INT stash_type:INT" },
  { "", "HammingWindow", 17, "output_datatype:INT periodic:INT" },
  { "", "HannWindow", 17, "output_datatype:INT periodic:INT" },
  { "", "HardSigmoid", 6, "alpha:FLOAT beta:FLOAT" },
  { "", "HardSwish", 14, "" },
  { "", "Hardmax", 1, "axis:INT" },
  { "", "Identity", 1, "" },
  { "", "If", 1, "else_branch:GRAPH then_branch:GRAPH" },
  { "", "InstanceNormalization", 6, "epsilon:FLOAT" },
  { "", "IsInf", 10, "detect_negative:INT detect_positive:INT" },
  { "", "IsNaN", 9, "" },
  { "", "LRN", 1, "alpha:FLOAT beta:FLOAT bias:FLOAT size:INT" },
  { "", "LSTM", 7, "activation_alpha:FLOATS activation_beta:FLOATS activations:STRINGS clip:FLOAT "
                   "direction:STRING hidden_size:INT input_forget:INT" },
  { "", "LSTM", 14, "activation_alpha:FLOATS activation_beta:FLOATS activations:STRINGS clip:FLOAT "
                    "direction:STRING hidden_size:INT input_forget:INT layout:INT" },
  { "", "LayerNormalization", 17, "axis:INT epsilon:FLOAT stash_type:INT" },
  { "", "LeakyRelu", 6, "alpha:FLOAT" },
  { "", "Less", 7, "" },
  { "", "LessOrEqual", 12, "" },
  { "", "Log", 6, "" },
  { "", "LogSoftmax", 1, "axis:INT" },
  { "", "Loop", 1, "body:GRAPH" },
  { "", "LpNormalization", 1, "axis:INT p:INT" },
  { "", "LpPool", 2, "auto_pad:STRING kernel_shape:INTS p:INT pads:INTS strides:INTS" },
  { "", "LpPool", 18, "auto_pad:STRING ceil_mode:INT dilations:INTS kernel_shape:INTS p:INT pads:INTS strides:INTS" },
  { "", "MatMul", 1, "" },
  { "", "MatMulInteger", 10, "" },
  { "", "Max", 6, "" },
  { "", "MaxPool", 1, "auto_pad:STRING kernel_shape:INTS pads:INTS strides:INTS" },
  { "", "MaxPool", 8, "auto_pad:STRING kernel_shape:INTS pads:INTS storage_order:INT strides:INTS" },
  { "", "MaxPool", 10, "auto_pad:STRING ceil_mode:INT dilations:INTS kernel_shape:INTS pads:INTS "
                       "storage_order:INT strides:INTS" },
  { "", "MaxUnpool", 9, "kernel_shape:INTS pads:INTS strides:INTS" },
  { "", "Mean", 6, "" },
  { "", "MeanVarianceNormalization", 9, "axes:INTS" },
  { "", "Min", 6, "" },
  { "", "Mish", 18, "" },
  { "", "Mod", 10, "fmod:INT" },
  { "", "Mul", 7, "" },
  { "", "Neg", 6, "" },
  { "", "NegativeLogLikelihoodLoss", 12, "ignore_index:INT reduction:STRING" },
  { "", "Not", 1, "" },
  { "", "OneHot", 9, "axis:INT" },
  { "", "Or", 7, "" },
  { "", "PRelu", 6, "" },
  { "", "Pad", 2, "mode:STRING pads:INTS value:FLOAT" },
  { "", "Pad", 11, "mode:STRING" },
  { "", "Pow", 7, "" },
  { "", "QLinearConv", 10, "auto_pad:STRING dilations:INTS group:INT kernel_shape:INTS pads:INTS strides:INTS" },
  { "", "QLinearMatMul", 10, "" },
  { "", "QuantizeLinear", 10, "" },
  { "", "QuantizeLinear", 13, "axis:INT" },
  { "", "QuantizeLinear", 19, "axis:INT saturate:INT" },
  { "", "QuantizeLinear", 21, "axis:INT block_size:INT output_dtype:INT saturate:INT" },
  { "", "QuantizeLinear", 23, "axis:INT block_size:INT output_dtype:INT precision:INT saturate:INT" },
  { "", "RMSNormalization", 23, "axis:INT epsilon:FLOAT stash_type:INT" },
  { "", "RNN", 7, "activation_alpha:FLOATS activation_beta:FLOATS activations:STRINGS clip:FLOAT direction:STRING "
                  "hidden_size:INT" },
  { "", "RNN", 14, "activation_alpha:FLOATS activation_beta:FLOATS activations:STRINGS clip:FLOAT "
                   "direction:STRING hidden_size:INT layout:INT" },
  { "", "Range", 11, "" },
  { "", "Reciprocal", 6, "" },
  { "", "ReduceL1", 1, "axes:INTS keepdims:INT" },
  { "", "ReduceL1", 18, "keepdims:INT noop_with_empty_axes:INT" },
  { "", "ReduceL2", 1, "axes:INTS keepdims:INT" },
  { "", "ReduceL2", 18, "keepdims:INT noop_with_empty_axes:INT" },
  { "", "ReduceLogSum", 1, "axes:INTS keepdims:INT" },
  { "", "ReduceLogSum", 18, "keepdims:INT noop_with_empty_axes:INT" },
  { "", "ReduceLogSumExp", 1, "axes:INTS keepdims:INT" },
  { "", "ReduceLogSumExp", 18, "keepdims:INT noop_with_empty_axes:INT" },
  { "", "ReduceMax", 1, "axes:INTS keepdims:INT" },
  { "", "ReduceMax", 18, "keepdims:INT noop_with_empty_axes:INT" },
  { "", "ReduceMean", 1, "axes:INTS keepdims:INT" },
  { "", "ReduceMean", 18, "keepdims:INT noop_with_empty_axes:INT" },
  { "", "ReduceMin", 1, "axes:INTS keepdims:INT" },
  { "", "ReduceMin", 18, "keepdims:INT noop_with_empty_axes:INT" },
  { "", "ReduceProd", 1, "axes:INTS keepdims:INT" },
  { "", "ReduceProd", 18, "keepdims:INT noop_with_empty_axes:INT" },
  { "", "ReduceSum", 1, "axes:INTS keepdims:INT" },
  { "", "ReduceSum", 13, "keepdims:INT noop_with_empty_axes:INT" },
  { "", "ReduceSumSquare", 1, "axes:INTS keepdims:INT" },
  { "", "ReduceSumSquare", 18, "keepdims:INT noop_with_empty_axes:INT" },
  { "", "RegexFullMatch", 20, "pattern:STRING" },
  { "", "Relu", 6, "" },
  { "", "Reshape", 5, "" },
  { "", "Reshape", 14, "allowzero:INT" },
  { "", "Resize", 10, "mode:STRING" },
  { "", "Resize", 11, "coordinate_transformation_mode:STRING cubic_coeff_a:FLOAT exclude_outside:INT "
                      "extrapolation_value:FLOAT mode:STRING nearest_mode:STRING" },
  { "", "Resize", 18, "antialias:INT axes:INTS coordinate_transformation_mode:STRING cubic_coeff_a:FLOAT "
                      "exclude_outside:INT extrapolation_value:FLOAT keep_aspect_ratio_policy:STRING mode:STRING "
                      "nearest_mode:STRING" },
  { "", "ReverseSequence", 10, "batch_axis:INT time_axis:INT" },
  { "", "RotaryEmbedding", 23, "interleaved:INT num_heads:INT rotary_embedding_dim:INT" },
  { "", "Round", 11, "" },
  { "", "Scan", 8, "body:GRAPH directions:INTS num_scan_inputs:INT" },
  { "", "Scan", 9, "body:GRAPH num_scan_inputs:INT scan_input_axes:INTS scan_input_directions:INTS "
                   "scan_output_axes:INTS scan_output_directions:INTS" },
  { "", "Scatter", 9, "axis:INT" },
  { "", "ScatterElements", 11, "axis:INT" },
  { "", "ScatterElements", 16, "axis:INT reduction:STRING" },
  { "", "ScatterND", 11, "" },
  { "", "ScatterND", 16, "reduction:STRING" },
  { "", "Selu", 6, "alpha:FLOAT gamma:FLOAT" },
  { "", "SequenceAt", 11, "" },
  { "", "SequenceConstruct", 11, "" },
  { "", "SequenceEmpty", 11, "dtype:INT" },
  { "", "SequenceErase", 11, "" },
  { "", "SequenceInsert", 11, "" },
  { "", "SequenceLength", 11, "" },
  { "", "Shape", 1, "" },
  { "", "Shape", 15, "end:INT start:INT" },
  { "", "Shrink", 9, "bias:FLOAT lambd:FLOAT" },
  { "", "Sigmoid", 6, "" },
  { "", "Sign", 9, "" },
  { "", "Sin", 7, "" },
  { "", "Sinh", 9, "" },
  { "", "Size", 1, "" },
  { "", "Slice", 1, "axes:INTS ends:INTS starts:INTS" },
  { "", "Slice", 10, "" },
  { "", "Softmax", 1, "axis:INT" },
  { "", "SoftmaxCrossEntropyLoss", 12, "ignore_index:INT reduction:STRING" },
  { "", "Softplus", 1, "" },
  { "", "Softsign", 1, "" },
  { "", "SpaceToDepth", 1, "blocksize:INT" },
  { "", "Split", 1, "axis:INT split:INTS" },
  { "", "Split", 13, "axis:INT" },
  { "", "Split", 18, "axis:INT num_outputs:INT" },
  { "", "SplitToSequence", 11, "axis:INT keepdims:INT" },
  { "", "Sqrt", 6, "" },
  { "", "Squeeze", 1, "axes:INTS" },
  { "", "Squeeze", 13, "" },
  { "", "StringConcat", 20, "" },
  { "", "StringNormalizer", 10, "case_change_action:STRING is_case_sensitive:INT locale:STRING stopwords:STRINGS" },
  { "", "StringSplit", 20, "delimiter:STRING maxsplit:INT" },
  { "", "Sub", 7, "" },
  { "", "Sum", 6, "" },
  { "", "SwiGLU", 28, "alpha:FLOAT" },
  { "", "Swish", 24, "alpha:FLOAT" },
  { "", "Tan", 7, "" },
  { "", "Tanh", 6, "" },
  { "", "TensorScatter", 24, "axis:INT mode:STRING" },
  { "", "ThresholdedRelu", 10, "alpha:FLOAT" },
  { "", "Tile", 1, "" },
  { "", "Transpose", 1, "perm:INTS" },
  { "", "Trilu", 14, "upper:INT" },
  { "", "Unsqueeze", 1, "axes:INTS" },
  { "", "Unsqueeze", 13, "" },
  { "", "Upsample", 7, "mode:STRING scales:FLOATS" },
  { "", "Upsample", 9, "mode:STRING" },
  { "", "Where", 9, "" },
  { "", "Xor", 7, "" },
  { "ai.onnx.ml", "LabelEncoder", 4, "default_float:FLOAT default_int64:INT default_string:STRING "
                                     "default_tensor:TENSOR keys_floats:FLOATS keys_int64s:INTS "
                                     "keys_strings:STRINGS keys_tensor:TENSOR values_floats:FLOATS "
                                     "values_int64s:INTS values_strings:STRINGS values_tensor:TENSOR" },
  { "ai.onnx.preview.training", "Gradient", 1, "xs:STRINGS y:STRING zs:STRINGS" },
};

#define N_SCHEMA (sizeof schema / sizeof schema[0])

/* AttributeProto.AttributeType by number (0 is UNDEFINED: no type given). */
static const char *const type_names[] = {
  "UNDEFINED", "FLOAT", "INT", "STRING", "TENSOR", "GRAPH", "FLOATS", "INTS", "STRINGS", "TENSORS", "GRAPHS",
  "SPARSE_TENSOR", "SPARSE_TENSORS", "TYPE_PROTO", "TYPE_PROTOS",
};

#define N_TYPES ((int)(sizeof type_names / sizeof type_names[0]))

static int row_cmp(const OpAttrs *r, const char *domain, const char *op) {
  int c = strcmp(r->domain, domain);
  return c ? c : strcmp(r->op, op);
}

/* The row in force for op at opset (-1: the newest), or NULL when the table has no such op. */
static const OpAttrs *find_row(const char *domain, const char *op, int opset) {
  size_t lo = 0, hi = N_SCHEMA;
  while (lo < hi) {  /* the first row not below (domain, op) */
    size_t mid = lo + (hi - lo) / 2;
    if (row_cmp(&schema[mid], domain, op) < 0) lo = mid + 1;
    else hi = mid;
  }
  if (lo == N_SCHEMA || row_cmp(&schema[lo], domain, op)) return NULL;
  const OpAttrs *r = &schema[lo];
  for (size_t i = lo + 1; i < N_SCHEMA && !row_cmp(&schema[i], domain, op); i++)
    if (opset < 0 || schema[i].since <= opset) r = &schema[i];
  return r;
}

/* The type the row gives name ("INTS", ...) into type (NUL-terminated), false if it has no such attribute. */
static bool row_type(const OpAttrs *r, const char *name, char *type, size_t cap) {
  size_t n = strlen(name);
  for (const char *p = r->attrs; *p;) {
    const char *colon = strchr(p, ':'), *end = colon ? colon + strcspn(colon, " ") : p + strlen(p);
    if (colon && (size_t)(colon - p) == n && !memcmp(p, name, n)) {
      snprintf(type, cap, "%.*s", (int)(end - colon - 1), colon + 1);
      return true;
    }
    p = *end ? end + 1 : end;
  }
  return false;
}

/* The row's attribute names, "a, b, c" ("none" if it has none), into buf. */
static void row_names(const OpAttrs *r, char *buf, size_t cap) {
  size_t n = 0;
  buf[0] = 0;
  for (const char *p = r->attrs; *p && n + 1 < cap;) {
    const char *colon = strchr(p, ':'), *end = colon ? colon + strcspn(colon, " ") : p + strlen(p);
    int len = (int)((colon ? colon : end) - p);
    int w = snprintf(buf + n, cap - n, "%s%.*s", n ? ", " : "", len, p);
    n = w < 0 || (size_t)w >= cap - n ? cap - 1 : n + (size_t)w;
    p = *end ? end + 1 : end;
  }
  if (!n) snprintf(buf, cap, "none");
}

const char *onnx_attr_type_name(int type) { return type >= 0 && type < N_TYPES ? type_names[type] : NULL; }

kiln_status onnx_schema_check_table(void) {
  for (size_t i = 0; i < N_SCHEMA; i++) {
    const OpAttrs *r = &schema[i], *q = i ? &schema[i - 1] : NULL;
    int c = q ? row_cmp(q, r->domain, r->op) : -1;
    if (c > 0 || (c == 0 && q->since >= r->since))
      return kiln_fail(KILN_ERR_INVALID_ARG, "schema row %zu (%s-%d) is out of order", i, r->op, r->since);
    const char *prev = "";
    size_t prev_n = 0;
    for (const char *p = r->attrs; *p;) {
      const char *colon = strchr(p, ':'), *end = colon ? colon + strcspn(colon, " ") : p + strlen(p);
      size_t tn = colon ? (size_t)(end - colon - 1) : 0, n = colon ? (size_t)(colon - p) : 0;
      bool known = false;
      for (int t = 1; t < N_TYPES; t++) known |= tn == strlen(type_names[t]) && !strncmp(colon + 1, type_names[t], tn);
      int order = strncmp(prev, p, prev_n < n ? prev_n : n);  /* names ascending, each once */
      if (!known || !n || (prev_n && (order > 0 || (order == 0 && prev_n >= n))))
        return kiln_fail(KILN_ERR_INVALID_ARG, "schema row %zu (%s-%d): bad or unordered entry '%.*s'", i, r->op,
                         r->since, (int)(end - p), p);
      prev = p, prev_n = n;
      p = *end ? end + 1 : end;
    }
  }
  return KILN_OK;
}

kiln_status im_check_attrs(Importer *im, const char *domain, const char *op, int opset) {
  const Onnx__NodeProto *nd = im->node;
  const OpAttrs *row = domain ? find_row(!strcmp(domain, "ai.onnx") ? "" : domain, op, opset) : NULL;
  for (size_t i = 0; i < nd->n_attribute; i++) {
    const Onnx__AttributeProto *a = nd->attribute[i];
    const char *name = a->name ? a->name : "";
    if (!*name) return im_fail(im, KILN_ERR_MODEL, "attribute %zu has no name", i);
    for (size_t j = 0; j < i; j++)
      if (nd->attribute[j]->name && !strcmp(nd->attribute[j]->name, name))
        return im_fail(im, KILN_ERR_MODEL, "attribute '%s' is given twice", name);
    int t = a->has_type ? (int)a->type : 0;
    if (t == 0) return im_fail(im, KILN_ERR_MODEL, "attribute '%s' has no type (UNDEFINED)", name);
    if (!onnx_attr_type_name(t))
      return im_fail(im, KILN_ERR_MODEL, "attribute '%s' has type %d, which is not an ONNX attribute type", name, t);
    if (!row) continue;  /* not an op kiln imports: refused as unsupported later */
    char want[32];
    if (!row_type(row, name, want, sizeof want)) {
      char names[512];
      row_names(row, names, sizeof names);
      char at[32] = "";
      if (opset >= 0) snprintf(at, sizeof at, " at opset %d", opset);
      return im_fail(im, KILN_ERR_MODEL, "unknown attribute '%s' (%s%s takes %s)", name, op, at, names);
    }
    if (strcmp(want, type_names[t]))
      return im_fail(im, KILN_ERR_MODEL, "attribute '%s' is %s, expected %s", name, type_names[t], want);
  }
  return KILN_OK;
}
