/*
 * te — tensor expressions, the second stage. Every graph op lowers to stages:
 *
 *   injective  out[i] = body(i)                  body loads other stages at index maps of i
 *   reduction  out[i] = (+)_r body(i, r)         (+) in sum/prod/max/min/argmax/argmin
 *   opaque     a host op (a fusion barrier, run by ref_eval_stage on every backend): every
 *              stage of dtype string or reading one. Movement, where and equality of
 *              strings keep their injective body (the ref interpreter moves string
 *              pointers as values, compares strings by bytes); the string ops (op
 *              STR_*, REGEX_MATCH, LABEL_ENCODE) read their operands src[] directly and
 *              their body is only the loads, so the plan sees what they read.
 *
 * plus source stages for inputs, parameters and constants. A body is a DAG of Exprs
 * over index variables: vars 0..rank-1 are the output index, vars rank..rank+n_red-1
 * the reduction index. Exprs are hash-consed in the TE's arena, so equal subtrees are
 * one node (a renderer emits each node once) and pointer equality is structural
 * equality. Index arithmetic is i64 with floor division and non-negative modulo.
 *
 * Invariant (te_check): every LOAD's indices are in range for every point of the
 * consuming stage's domain. Lowering clamps where a select guards an out-of-range read
 * (padding, gather), so a renderer may evaluate any load eagerly.
 *
 * Half floats: arithmetic on f16/bf16 is lowered as cast-to-f32, op, cast back, so only
 * LOAD, CAST and stores ever see f16/bf16.
 *
 * Hands on: a TE whose stages are in topological order (a stage loads only smaller ids).
 */
#ifndef KILN_TE_H
#define KILN_TE_H

#include "../graph/graph.h"

typedef enum {
  EX_CONST,   /* c.f (float dtypes) or c.i (ints, bool) */
  EX_VAR,     /* index variable var (dtype i64) */
  EX_LOAD,    /* stage src at args[0..n-1] (i64 indices, one per dim of src) */
  EX_UNARY,   /* op: TeUnary, args[0] */
  EX_BINARY,  /* op: TeBinary, args[0], args[1] */
  EX_SELECT,  /* args[0] (bool) ? args[1] : args[2] */
  EX_CAST,    /* args[0] converted to dtype (ONNX Cast rules) */
} ExprKind;

typedef enum {
  TU_NEG, TU_ABS, TU_EXP, TU_LOG, TU_SQRT, TU_RSQRT, TU_RECIP, TU_TANH, TU_SIGMOID,
  TU_ERF, TU_SIN, TU_COS, TU_FLOOR, TU_CEIL, TU_ROUND /* half to even */, TU_SIGN,
  TU_NOT /* bool: logical; ints: bitwise */, TU_ISNAN, TU_ISINF,
  TU_COUNT
} TeUnary;

typedef enum {
  TB_ADD, TB_SUB, TB_MUL, TB_DIV /* ints: truncating; index math uses TB_FLOORDIV */,
  TB_POW, TB_MAX, TB_MIN,
  TB_MOD /* result has the divisor's sign (Python); also index math */, TB_FMOD /* C fmod / % */,
  TB_FLOORDIV,
  TB_EQ, TB_NE, TB_LT, TB_LE, TB_GT, TB_GE,    /* result bool */
  TB_AND, TB_OR, TB_XOR,                        /* bool: logical; ints: bitwise */
  TB_SHL, TB_SHR,
  TB_COUNT
} TeBinary;

extern const char *const te_unary_names[TU_COUNT];
extern const char *const te_binary_names[TB_COUNT];

/* A scalar value: floats as double (rounded to their dtype), ints and bool as int64
 * wrapped to their dtype's width (u64 as its bit pattern). */
typedef union TeValue { double f; int64_t i; } TeValue;

typedef struct Expr Expr;
struct Expr {
  ExprKind kind;
  kiln_dtype dtype;
  int op;                 /* TeUnary / TeBinary */
  TeValue c;              /* EX_CONST */
  int var;                /* EX_VAR */
  int src;                /* EX_LOAD: stage id */
  int id;                 /* creation order in its TE: a deterministic tie-break for canonical order */
  int n_args;
  uint64_t hash;
  Expr *next_in_bucket;   /* hash-consing chain */
  Expr *args[];
};

typedef enum {
  ST_INPUT,     /* graph input: bound at run time */
  ST_PARAM,     /* parameter: data, resident, may be assigned */
  ST_CONST,     /* constant data */
  ST_INJECTIVE,
  ST_REDUCE,
  ST_OPAQUE,
} StageKind;

typedef enum { RO_SUM, RO_PROD, RO_MAX, RO_MIN, RO_ARGMAX, RO_ARGMIN } ReduceOp;

typedef struct Stage {
  int id;
  StageKind kind;
  kiln_dtype dtype;
  int rank;
  int64_t shape[KILN_MAX_RANK];
  int64_t numel;
  Expr *body;                 /* injective and reduce */
  ReduceOp rop;               /* reduce: argmax/argmin give the i64 flat index over the reduce domain */
  int select_last;            /* argmax/argmin ties: last index instead of first */
  int n_red;
  int64_t red_shape[KILN_MAX_RANK];
  const void *data;           /* param/const: host data (te_lower copies it into the TE arena) */
  int tensor;                 /* graph tensor this stage computes, or -1 for an internal stage */
  OpKind op;                  /* graph op it lowers (census, debug); sources: -1 */
  const char *name;           /* debug name; never emitted into generated source */
  const StrAttr *str;         /* string ops: attributes (TE arena) */
  int src[2];                 /* string ops: operand stages, in order */
  /* memory order of the dims where `permuted` (else row-major over shape): layout[0] the slowest dim
   * ... layout[rank - 1] the fastest. Set by the planner alone (an attention chain's output stored in
   * its one reader's order, plan.c reorder_sums); every element offset goes through te_stage_stride. */
  bool permuted;
  int8_t layout[KILN_MAX_RANK];
} Stage;

/* Element stride of dim i of stage s in memory (row-major, or in s->layout's order). */
int64_t te_stage_stride(const Stage *s, int i);

/* A collective (kiln_graph_all_reduce_mean): opaque, operand src[0], run by the communicator. */
static inline bool te_is_collective(const Stage *S) { return S->kind == ST_OPAQUE && S->op == OP_ALL_REDUCE_MEAN; }

typedef struct TE {
  Arena arena;
  Stage *stages; int n_stages, cap_stages;
  Expr **buckets; size_t n_buckets, n_exprs;   /* hash-consing table */
  int *tensor_stage;          /* graph tensor id -> stage id */
  int n_tensors;
  int *inputs; int n_inputs;  /* stage ids of graph inputs, in graph order */
  int *outputs; int n_outputs;
  const char **output_names;
  Assign *assigns; int n_assigns;   /* (param stage, value stage) */
} TE;

/* -- expr.c: construction (hash-consed, constant-folded, simplified as built) -- */

Expr *te_const_f(TE *te, kiln_dtype t, double v);
Expr *te_const_i(TE *te, kiln_dtype t, int64_t v);
Expr *te_var(TE *te, int v);
Expr *te_load(TE *te, int stage, int n, Expr *const *idx);
Expr *te_unary(TE *te, TeUnary op, Expr *a);
Expr *te_binary(TE *te, TeBinary op, Expr *a, Expr *b);   /* comparisons give bool */
Expr *te_select(TE *te, Expr *c, Expr *a, Expr *b);
Expr *te_cast(TE *te, kiln_dtype t, Expr *a);
/* A Cast node's conversion: an EX_CAST of op 1. te_cast's (op 0) is the rounding an operation's
 * dtype implies, which excess precision (CgOptions.excess_precision) may leave out; an explicit
 * one always rounds. */
Expr *te_cast_explicit(TE *te, kiln_dtype t, Expr *a);
/* Replace each VAR v (v < n) by map[v]; other vars are kept. */
Expr *te_substitute(TE *te, Expr *e, Expr *const *map, int n);
/* e with every occurrence of the node `from` (hash-consed: any equal expression) replaced by `to`. */
Expr *te_replace(TE *te, Expr *e, const Expr *from, Expr *to);
/* Simplify using var ranges lo[v]..hi[v] (inclusive): affine normal form, div/mod of
 * (c*q + r) where 0 <= r < c, min/max/compare with known ranges, selects with constant
 * conditions. */
Expr *te_simplify(TE *te, Expr *e, const int64_t *lo, const int64_t *hi, int nvars);
/* e with each i64 select's branches' common affine terms taken out of it: select(c, x + 1, x + 2)
 * = x + select(c, 1, 2), so that only a select of what differs depends on its condition (an
 * im2col's taps, concatenated slices of one padded tensor, read at h + kh by selects of h,
 * h + 1 and h + 2). NULL when out of memory. */
Expr *te_factor_selects(TE *te, Expr *e);
/* Inline: replace every load of a stage s with inline_stage[s] (an injective stage) by its
 * body at the load's indices, recursively, simplifying with the given var ranges. */
Expr *te_inline(TE *te, Expr *e, const bool *inline_stage, const int64_t *lo, const int64_t *hi, int nvars);
/* e with the integer clamps inside each float select's then-branch dropped where the
 * select's condition already bounds the clamped value (a padded window's load index,
 * clamped into the input and guarded by the same bounds: the index becomes affine). The
 * result reads out of bounds unless every float select in it is evaluated lazily, its
 * then-branch only where the condition holds. NULL when out of memory. */
Expr *te_unclamp_guarded(TE *te, Expr *e);
/* Interval of an i64/int expression given var ranges; false if unknown. */
bool te_range(const Expr *e, const int64_t *lo, const int64_t *hi, int nvars, int64_t *min, int64_t *max);
/* Calls fn once for each distinct LOAD node in e (a stage read at two index maps is two
 * calls), operands before the load itself. */
void te_visit_loads(const Expr *e, void (*fn)(const Expr *load, void *ctx), void *ctx);
bool te_is_float(const Expr *e);
/* Whether e reads index var v anywhere (loads' indices included). A walk of the tree, not the
 * DAG: for the small operand and body expressions the planner and renderers ask about. */
bool te_uses_var(const Expr *e, int v);
/* The scalar semantics every backend must match (constant folding and ref use them).
 * t is the operands' dtype; comparisons give bool 0/1, ISNAN/ISINF too. Ints: DIV
 * truncates, MOD takes the divisor's sign, FMOD the dividend's, FLOORDIV floors;
 * division by zero gives 0; shifts by >= 64 or < 0 give 0 (SHR of a negative signed
 * value: -1). Float MAX/MIN propagate NaN. Strings: EQ/NE only, by bytes. */
TeValue te_eval_unary(TeUnary op, kiln_dtype t, TeValue a);
TeValue te_eval_binary(TeBinary op, kiln_dtype t, TeValue a, TeValue b);
/* ONNX Cast: float->int truncates and saturates (NaN -> 0), int->int wraps, ->bool is
 * != 0, ->f16/bf16 rounds to nearest even. */
TeValue te_eval_cast(kiln_dtype to, kiln_dtype from, TeValue v);
/* v normalised to dtype t (float rounding, int wrapping). */
TeValue te_wrap(kiln_dtype t, TeValue v);

/* -- lower.c: graph -> te -- */

/* Copies every name and constant it needs: the graph may be freed once it returns.
 * Each stage body is simplified with its var ranges; every load is in range. */
kiln_status te_lower(const Graph *g, TE **out);
/* The same, with row_sums 0: a sum over rows of a value of each row stays one stage (lower.c,
 * split_row_sum; te_lower splits it). */
kiln_status te_lower_split(const Graph *g, int row_sums, TE **out);
void te_free(TE *te);
/* Adds a stage; returns its id or -1 when out of memory. */
int te_add_stage(TE *te, const Stage *s);
kiln_status te_check(const TE *te);
/* kiln's tanh GELU of x (OP_GELU_TANH's body; hash-consed, so an equal GELU is this node). */
Expr *te_gelu_tanh(TE *te, Expr *x);
void te_print(const TE *te, FILE *f);
void te_print_expr(const Expr *e, FILE *f);

#endif
