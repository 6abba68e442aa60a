/*
 * kiln — a whole-graph fusion compiler and runtime for neural networks.
 *
 * Build a graph (inputs, parameters with data, constants, then ops), mark its
 * outputs, compile it for a backend into a program, run the program with host
 * buffers, read its census (kernels launched, bytes moved, host fallbacks).
 *
 *   kiln_graph *g;  kiln_graph_create(&g);
 *   kiln_tensor x, w, y;
 *   int64_t xs[2] = {32, 784}, ws[2] = {784, 10};
 *   kiln_graph_input(g, "x", KILN_F32, 2, xs, &x);
 *   kiln_graph_param(g, "w", KILN_F32, 2, ws, w_data, &w);
 *   kiln_graph_matmul(g, x, w, &y);
 *   kiln_graph_output(g, y, "y");
 *   kiln_options o = kiln_options_default();      // settings from the environment
 *   kiln_program *p;  kiln_program_compile(g, &o, &p);
 *   kiln_program_run(p, (const void *[]){x_data}, (void *[]){y_data});
 *   kiln_census c;  kiln_program_census(p, &c);
 *   kiln_program_free(p);  kiln_graph_free(g);
 *
 * Every call that can fail returns a kiln_status; results come back through the
 * last argument. On failure kiln_last_error() says what went wrong (per thread).
 * What _create/_compile/_load makes, the matching _free releases; _free(NULL) is a no-op.
 */
#ifndef KILN_H
#define KILN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_MAX_RANK 8

typedef enum kiln_status {
  KILN_OK = 0,
  KILN_ERR_INVALID_ARG = -1,  /* a bad argument to an API call (shape, dtype, axis, handle) */
  KILN_ERR_MODEL = -2,        /* a model file is malformed or inconsistent */
  KILN_ERR_UNSUPPORTED = -3,  /* valid, but kiln cannot do it (yet) */
  KILN_ERR_NO_MEMORY = -4,    /* host or device allocation failed, or a size overflowed */
  KILN_ERR_DEVICE = -5,       /* the backend's device or driver failed or is absent */
  KILN_ERR_COMPILE = -6,      /* generated source failed to compile */
  KILN_ERR_FALLBACK = -7,     /* strict mode: an op would have run on the host */
  KILN_ERR_IO = -8,           /* a file could not be read or written */
} kiln_status;

const char *kiln_status_name(kiln_status s);
/* Message of this thread's last failure; valid until the next failing call on this thread. */
const char *kiln_last_error(void);

typedef enum kiln_dtype {
  KILN_F32, KILN_F64, KILN_F16, KILN_BF16,
  KILN_I64, KILN_I32, KILN_I16, KILN_I8,
  KILN_U8, KILN_U16, KILN_U32, KILN_U64,
  KILN_BOOL,
  KILN_STRING,  /* text; see "String tensors" below */
  KILN_DTYPE_COUNT
} kiln_dtype;

const char *kiln_dtype_name(kiln_dtype t);
size_t kiln_dtype_size(kiln_dtype t);

/* ---- graphs ---------------------------------------------------------------- */

typedef struct kiln_graph kiln_graph;  /* body lives in src/graph */
typedef int32_t kiln_tensor;           /* a tensor of one graph; ids start at 0 */

kiln_status kiln_graph_create(kiln_graph **out);
void kiln_graph_free(kiln_graph *g);

/* Leaves. The graph copies names and data. A NULL name gets a generated one. */
kiln_status kiln_graph_input(kiln_graph *g, const char *name, kiln_dtype t, int rank,
                             const int64_t *shape, kiln_tensor *out);
kiln_status kiln_graph_param(kiln_graph *g, const char *name, kiln_dtype t, int rank,
                             const int64_t *shape, const void *data, kiln_tensor *out);
kiln_status kiln_graph_const(kiln_graph *g, kiln_dtype t, int rank, const int64_t *shape,
                             const void *data, kiln_tensor *out);
/* A rank-0 constant holding value converted to t. */
kiln_status kiln_graph_scalar(kiln_graph *g, kiln_dtype t, double value, kiln_tensor *out);
/* Marks x as an output (outputs are returned in the order marked). */
kiln_status kiln_graph_output(kiln_graph *g, kiln_tensor x, const char *name);
/* Training: after each run the program stores value into parameter param (same shape and dtype). */
kiln_status kiln_graph_assign(kiln_graph *g, kiln_tensor param, kiln_tensor value);

kiln_status kiln_tensor_shape(const kiln_graph *g, kiln_tensor x, int *rank, int64_t *shape /* KILN_MAX_RANK */);
kiln_status kiln_tensor_dtype(const kiln_graph *g, kiln_tensor x, kiln_dtype *out);

typedef enum kiln_unary_op {
  KILN_NEG, KILN_ABS, KILN_EXP, KILN_LOG, KILN_SQRT, KILN_RSQRT, KILN_RECIPROCAL,
  KILN_TANH, KILN_SIGMOID, KILN_RELU, KILN_GELU_ERF, KILN_GELU_TANH, KILN_ERF,
  KILN_SIN, KILN_COS, KILN_FLOOR, KILN_CEIL, KILN_ROUND /* half to even */, KILN_SIGN,
  KILN_NOT, KILN_ISNAN, KILN_ISINF,
  KILN_UNARY_COUNT
} kiln_unary_op;

typedef enum kiln_binary_op {
  KILN_ADD, KILN_SUB, KILN_MUL, KILN_DIV, KILN_POW, KILN_MAX, KILN_MIN,
  KILN_MOD,   /* integer mod with the divisor's sign (ONNX fmod=0) */
  KILN_FMOD,  /* C fmod: the dividend's sign (ONNX fmod=1) */
  KILN_EQ, KILN_NE, KILN_LT, KILN_LE, KILN_GT, KILN_GE,
  KILN_AND, KILN_OR, KILN_XOR,
  KILN_SHL, KILN_SHR,  /* integers only */
  KILN_BINARY_COUNT
} kiln_binary_op;

typedef enum kiln_reduce_op {
  KILN_REDUCE_SUM, KILN_REDUCE_MEAN, KILN_REDUCE_MAX, KILN_REDUCE_MIN, KILN_REDUCE_PROD,
  KILN_REDUCE_SUM_SQUARE, KILN_REDUCE_L1, KILN_REDUCE_L2, KILN_REDUCE_LOG_SUM_EXP,
  KILN_REDUCE_COUNT
} kiln_reduce_op;

typedef enum kiln_pad_mode { KILN_PAD_CONSTANT, KILN_PAD_REFLECT, KILN_PAD_EDGE } kiln_pad_mode;

typedef struct kiln_conv_params {
  int spatial;                 /* 1, 2 or 3 */
  int64_t strides[3];          /* 0 means 1 */
  int64_t dilations[3];        /* 0 means 1 */
  int64_t pads[6];             /* begins of each spatial dim, then ends */
  int64_t group;               /* 0 means 1 */
} kiln_conv_params;

typedef struct kiln_pool_params {
  int spatial;
  int64_t kernel[3];
  int64_t strides[3];          /* 0 means 1 */
  int64_t dilations[3];        /* 0 means 1 */
  int64_t pads[6];             /* begins, then ends */
  int ceil_mode;
  int count_include_pad;       /* average pooling only */
} kiln_pool_params;

typedef enum kiln_pool_kind { KILN_POOL_MAX, KILN_POOL_AVG } kiln_pool_kind;

kiln_status kiln_graph_unary(kiln_graph *g, kiln_unary_op op, kiln_tensor x, kiln_tensor *out);
/* NumPy broadcasting; operands must share a dtype (and/or/xor: bool, logical, or an integer dtype,
 * bitwise; comparisons give bool). */
kiln_status kiln_graph_binary(kiln_graph *g, kiln_binary_op op, kiln_tensor a, kiln_tensor b, kiln_tensor *out);
kiln_status kiln_graph_where(kiln_graph *g, kiln_tensor cond, kiln_tensor a, kiln_tensor b, kiln_tensor *out);
kiln_status kiln_graph_cast(kiln_graph *g, kiln_tensor x, kiln_dtype to, kiln_tensor *out);

/* Movement. shape may hold one -1 (inferred). */
kiln_status kiln_graph_reshape(kiln_graph *g, kiln_tensor x, int rank, const int64_t *shape, kiln_tensor *out);
kiln_status kiln_graph_transpose(kiln_graph *g, kiln_tensor x, const int *perm, kiln_tensor *out);
/* ONNX Slice semantics: clamped starts/ends, negative indices count from the end, steps may be negative.
 * axes NULL means 0..n-1; steps NULL means all 1. */
kiln_status kiln_graph_slice(kiln_graph *g, kiln_tensor x, int n, const int64_t *starts, const int64_t *ends,
                             const int *axes, const int64_t *steps, kiln_tensor *out);
kiln_status kiln_graph_concat(kiln_graph *g, int n, const kiln_tensor *xs, int axis, kiln_tensor *out);
/* pads: rank begins then rank ends; negative pads crop. */
kiln_status kiln_graph_pad(kiln_graph *g, kiln_tensor x, const int64_t *pads, kiln_pad_mode mode, double value,
                           kiln_tensor *out);
kiln_status kiln_graph_expand(kiln_graph *g, kiln_tensor x, int rank, const int64_t *shape, kiln_tensor *out);
/* ONNX Gather: indices of any rank, negative indices count from the end. */
kiln_status kiln_graph_gather(kiln_graph *g, kiln_tensor x, kiln_tensor indices, int axis, kiln_tensor *out);
kiln_status kiln_graph_tile(kiln_graph *g, kiln_tensor x, const int64_t *repeats, kiln_tensor *out);

/* Reductions over n_axes axes (axes NULL or n_axes 0: all axes). */
kiln_status kiln_graph_reduce(kiln_graph *g, kiln_reduce_op op, kiln_tensor x, int n_axes, const int *axes,
                              int keepdims, kiln_tensor *out);
/* Index (i64) of the max/min along axis; ties give the first index, or the last with select_last. */
kiln_status kiln_graph_argmax(kiln_graph *g, kiln_tensor x, int axis, int keepdims, int select_last, kiln_tensor *out);
kiln_status kiln_graph_argmin(kiln_graph *g, kiln_tensor x, int axis, int keepdims, int select_last, kiln_tensor *out);

/* Contractions. matmul follows numpy.matmul (1-D operands promoted, batch dims broadcast). */
kiln_status kiln_graph_matmul(kiln_graph *g, kiln_tensor a, kiln_tensor b, kiln_tensor *out);
/* x: [N, C, spatial...], w: [M, C/group, kernel...], bias: [M] or -1 for none. */
kiln_status kiln_graph_conv(kiln_graph *g, kiln_tensor x, kiln_tensor w, kiln_tensor bias,
                            const kiln_conv_params *p, kiln_tensor *out);
/* Max pooling takes any numeric dtype (integers pad with the dtype's lowest value); average pooling floats. */
kiln_status kiln_graph_pool(kiln_graph *g, kiln_pool_kind kind, kiln_tensor x, const kiln_pool_params *p,
                            kiln_tensor *out);
kiln_status kiln_graph_global_pool(kiln_graph *g, kiln_pool_kind kind, kiln_tensor x, kiln_tensor *out);

/* Compositions: built from the ops above, so the compiler sees through them. */
kiln_status kiln_graph_softmax(kiln_graph *g, kiln_tensor x, int axis, kiln_tensor *out);
kiln_status kiln_graph_log_softmax(kiln_graph *g, kiln_tensor x, int axis, kiln_tensor *out);
/* Normalises over axes axis..rank-1; scale and bias broadcast against those axes, -1 for none. */
kiln_status kiln_graph_layernorm(kiln_graph *g, kiln_tensor x, kiln_tensor scale, kiln_tensor bias, int axis,
                                 double eps, kiln_tensor *out);
/* Inference batch norm over channel axis 1. */
kiln_status kiln_graph_batchnorm(kiln_graph *g, kiln_tensor x, kiln_tensor scale, kiln_tensor bias,
                                 kiln_tensor mean, kiln_tensor var, double eps, kiln_tensor *out);

/* ---- strings ----------------------------------------------------------------
 *
 * A KILN_STRING element is a `const char *` to NUL-terminated bytes (UTF-8 by convention;
 * kiln neither checks nor decodes it), so a string tensor's host buffer is an array of numel
 * pointers (kiln_dtype_size(KILN_STRING) == sizeof(char *)).
 *  - Constants and parameters: the graph copies every string; a NULL element is refused.
 *  - Inputs: kiln_program_run reads the caller's strings during the call and keeps no pointer
 *    to them (kiln_program_set_input copies them). A NULL element is KILN_ERR_INVALID_ARG.
 *  - Outputs: kiln_program_run fills the caller's array with pointers to strings the program
 *    owns, valid until the next kiln_program_run of that program or kiln_program_free (also
 *    what kiln_program_read_output hands back). Do not free or write through them; copy what
 *    must outlive the next run.
 * String tensors live on the host and every op on them runs there: on cpu and cuda each such
 * op is a host fallback in the census, named by op (strict mode refuses it; on cuda a program
 * with host work runs kernel by kernel, not as one CUDA graph); a backend without host string
 * support would refuse a graph holding strings at compile, KILN_ERR_UNSUPPORTED.
 * What takes strings: reshape, transpose, slice, concat, expand, gather, tile, where,
 * KILN_EQ / KILN_NE (byte-wise), and the ops below. Everything else (arithmetic, reductions,
 * casts to or from numbers, pad, parameters that are assigned) is KILN_ERR_INVALID_ARG when the
 * node is added. Letter case is ASCII only: other bytes, UTF-8 sequences included, pass through.
 */
typedef enum kiln_case_change { KILN_CASE_NONE, KILN_CASE_LOWER, KILN_CASE_UPPER } kiln_case_change;

/* ONNX StringNormalizer: x is [C] or [1, C]. Drops every stopword (compared byte for byte when
 * case_sensitive, else with ASCII letters folded), then changes the case. With stopwords the
 * output length depends on the values, so x must be a constant (else KILN_ERR_UNSUPPORTED: shapes
 * are static); when every string is dropped the output is one empty string ([1] or [1, 1]). */
kiln_status kiln_graph_string_normalize(kiln_graph *g, kiln_tensor x, kiln_case_change change, int case_sensitive,
                                        int n_stopwords, const char *const *stopwords, kiln_tensor *out);
/* Elementwise a then b, NumPy broadcasting. */
kiln_status kiln_graph_string_concat(kiln_graph *g, kiln_tensor a, kiln_tensor b, kiln_tensor *out);
/* bool: whether all of each string matches pattern (ONNX RegexFullMatch, RE2 syntax). kiln runs
 * it with POSIX extended regexes: it takes the RE2 subset that translates exactly (literals, .,
 * brackets, \w \d \s and their negations, \b, groups, |, quantifiers incl. lazy ones) and refuses
 * the rest (flags, \p{..}, backreferences, ...) with KILN_ERR_UNSUPPORTED naming it. One
 * difference remains: '.' matches one byte (RE2: one UTF-8 character), newlines included. */
kiln_status kiln_graph_regex_full_match(kiln_graph *g, kiln_tensor x, const char *pattern, kiln_tensor *out);
/* ai.onnx.ml LabelEncoder: each element equal to keys[i] becomes values[i], any other dflt (one
 * element). key_t is x's dtype; key_t and val_t are any dtype but bool. Strings compare by bytes,
 * numbers by their bits (a NaN key finds that NaN; -0.0 and 0.0 differ). The graph copies the
 * tables. */
kiln_status kiln_graph_label_encode(kiln_graph *g, kiln_tensor x, kiln_dtype key_t, kiln_dtype val_t, int64_t n,
                                    const void *keys, const void *values, const void *dflt, kiln_tensor *out);

/* Prints the graph, one node per line. */
void kiln_graph_print(const kiln_graph *g, FILE *f);

/* Mixed precision (autocast): with t KILN_BF16 or KILN_F16, every contraction built afterwards on f32
 * operands (kiln_graph_matmul, kiln_graph_conv with its bias) takes copies of its operands in t and
 * gives an f32 result (the product rounded to t, then widened), as PyTorch's autocast does; the
 * gradients kiln_graph_grad builds through it are t contractions too (a cast's gradient is cast
 * back). Everything else (losses, normalisations, parameters and their updates) stays f32.
 * Under f16, kiln_graph_sgd / kiln_graph_adam scale the loss dynamically in the step itself
 * (params "loss_scale", from 2^16, and "loss_scale.good"): a step whose gradients are not all
 * finite is skipped and halves the scale, 2000 clean steps in a row double it.
 * KILN_F32 turns it off (the default). Any other t is KILN_ERR_INVALID_ARG. */
kiln_status kiln_graph_set_autocast(kiln_graph *g, kiln_dtype t);

/* Data parallel (one process a device, each with its own batch): y is x's mean over the ranks of the
 * communicator the program is compiled with (kiln_options.dist), the same on every rank; a program
 * without one is a group of one rank and y equals x. x must be float. Its gradient is the mean of
 * the gradients over the ranks. The planner gives it a kernel boundary of its own (the reduction
 * is the communicator's call: NCCL's all-reduce on cuda) and starts it as soon as x exists. */
kiln_status kiln_graph_all_reduce_mean(kiln_graph *g, kiln_tensor x, kiln_tensor *out);
/* on 1: kiln_graph_sgd / kiln_graph_adam called afterwards average each gradient over the ranks
 * (kiln_graph_all_reduce_mean) before the update, so that every rank takes the same step, that of
 * the union of the ranks' batches; 0 (the default) off. */
kiln_status kiln_graph_set_data_parallel(kiln_graph *g, int on);

/* Autodiff: grads[i] = d loss / d wrt[i]; loss must be a scalar (any rank with one element) float. */
kiln_status kiln_graph_grad(kiln_graph *g, kiln_tensor loss, int n, const kiln_tensor *wrt, kiln_tensor *grads);
/* Training steps: add the gradients of loss for params (T_PARAM tensors), optimizer state (zero-initialised
 * params named "<param>.momentum", ".adam_m", ".adam_v", and "adam.step") and assigns, so each run of the
 * compiled program computes loss, gradients and update at once and updates params and state in place.
 * updated (n entries, may be NULL) receives the new value of each param. Rules as torch.optim.SGD
 * (v = momentum v + g; p -= lr v) and torch.optim.Adam. */
kiln_status kiln_graph_sgd(kiln_graph *g, kiln_tensor loss, int n, const kiln_tensor *params, double lr,
                           double momentum, kiln_tensor *updated);
kiln_status kiln_graph_adam(kiln_graph *g, kiln_tensor loss, int n, const kiln_tensor *params, double lr,
                            double beta1, double beta2, double eps, kiln_tensor *updated);

/* ---- ONNX ------------------------------------------------------------------- */

/* Loads an ONNX model; external data is read only from the model's own folder. */
kiln_status kiln_graph_load_onnx(const char *path, kiln_graph **out);
kiln_status kiln_graph_load_onnx_buffer(const void *data, size_t size, const char *base_dir, kiln_graph **out);

/* ---- data parallel: a communicator over ranks, one process a device ------------ */

/* The program's collectives (kiln_graph_all_reduce_mean, the averaged gradients of
 * kiln_graph_set_data_parallel) run over the communicator in kiln_options.dist: NCCL on cuda,
 * loaded with dlopen ($KILN_NCCL_LIB, else libnccl.so.2 or libnccl.so). Each rank is a process
 * on its own device ($KILN_CUDA_DEVICE) that compiles the same graph with its rank's
 * communicator and runs it on its own batch; `kiln train --gpus N` starts such processes. */
typedef struct kiln_dist kiln_dist;
enum { KILN_DIST_ID_BYTES = 128, KILN_DIST_ID_TEXT = 2 * KILN_DIST_ID_BYTES + 1 };
typedef struct kiln_dist_id { unsigned char bytes[KILN_DIST_ID_BYTES]; } kiln_dist_id;
/* A new communicator's id (NCCL's unique id), made in one process and handed to every rank; that
 * process serves the ranks' first contact, so it lives until every rank has opened. */
kiln_status kiln_dist_id_new(kiln_dist_id *out);
/* The id as 256 hex digits and a NUL into text (cap >= KILN_DIST_ID_TEXT), and back. */
kiln_status kiln_dist_id_format(const kiln_dist_id *id, char *text, size_t cap);
kiln_status kiln_dist_id_parse(const char *text, kiln_dist_id *out);
/* Joins rank `rank` of `ranks` to the communicator id names, on this process's CUDA device; every
 * rank calls it at about the same time (each waits for all). id NULL with ranks 1: a group of one
 * rank with no library, on any backend (each collective is a copy). */
kiln_status kiln_dist_open(const kiln_dist_id *id, int ranks, int rank, kiln_dist **out);
int kiln_dist_ranks(const kiln_dist *d);
int kiln_dist_rank(const kiln_dist *d);
/* Every program compiled with d must be freed first. NULL: nothing. */
void kiln_dist_close(kiln_dist *d);

/* ---- compiling and running ---------------------------------------------------- */

typedef struct kiln_options {
  const char *backend;  /* "ref", "cpu", "cuda" ($KILN_BACKEND); NULL: "cpu" */
  int fuse;             /* 1: fuse (default); 0: eager, one kernel per expression ($KILN_FUSE=0) */
  int cse;              /* 1: materialise shared subexpressions ($KILN_CSE=1); default 0 */
  int strict;           /* 1: any host fallback is an error naming the op ($KILN_STRICT=1) */
  int debug;            /* $KILN_DEBUG: 1 plan with boundary reasons, 2 also generated source, 3 also the TE */
  int profile;          /* $KILN_PROFILE=1: each launch timed where it runs (waited for on devices that
                           queue), each kernel's median and fastest over the runs printed to stderr
                           when the program is freed */
  int graph_replay;     /* cuda: 1 capture the schedule once and replay it (default); 0 launch kernel by kernel */
  int tf32;             /* cuda: allow TF32 tensor cores in contractions: cuBLASLt's fast-TF32 mode and
                           the generated tiles' mma on f32 operands rounded to TF32 (default 0, strict
                           f32; $KILN_TF32=1) */
  /* planner budgets per kernel; 0 takes the planner's default */
  int max_inputs;       /* buffers one kernel may read ($KILN_MAX_INPUTS, default 24) */
  int max_nodes;        /* expression nodes in one kernel ($KILN_MAX_NODES, default 4000) */
  /* resource caps, checked at compile before anything is allocated; 0: no cap. A program
   * over one is refused with KILN_ERR_NO_MEMORY naming the tensor (or stage) that exceeds it. */
  int64_t max_tensor_bytes;   /* one tensor ($KILN_MAX_TENSOR_BYTES, default 16 GiB) */
  int64_t max_planned_bytes;  /* every buffer the program allocates together ($KILN_MAX_PLANNED_BYTES,
                                 default 64 GiB) */
  int64_t max_ref_work;       /* ref: element evaluations of one run, a reduction's terms
                                 included ($KILN_MAX_REF_WORK, default 1e11: a few minutes) */
  /* cuda kernel variants */
  char cuda_row[16];    /* block-row shape ($KILN_CUDA_ROW): "" auto (the row race's winner per row
                           length), base, warp, vec, wvec, p16, p16vec, long, wveclong */
  int cuda_splitk;      /* split-K for contractions with few output tiles, and a few long rows of sums
                           split over several blocks in two phases ($KILN_CUDA_SPLITK): 1 on (default),
                           0 off ("0"), 2 wide ("wide": raced, not the default) */
  int cuda_fma;         /* cuda: 1 let NVRTC contract a * b + c into one fused multiply-add (f32 still,
                           one rounding instead of two, as cuBLAS and PyTorch's kernels do);
                           0 (default) --fmad=false ($KILN_CUDA_FMA=1: raced, not yet the default) */
  int cublaslt;         /* 1 let the backend's library run the plain GEMMs the cost rule gives it (default;
                           cuda: cuBLASLt, cpu: kiln's packed micro-kernel); 0 generated kernels only
                           ($KILN_CUBLASLT=0); 2 every plain GEMM it can take, whatever the cost rule
                           says (a race) */
  int cuda_cluster;     /* cuda, sm_90 and later: 1 a GEMM split along K into at most 8 spans runs them as one
                           thread-block cluster, adding the partials through each other's shared memory
                           ($KILN_CUDA_CLUSTER=1; raced, default 0) */
  int cuda_split_rows;  /* cuda: a few long rows of f32 sums go in two phases when there are fewer rows than
                           this; 0 (default) 512, what the H200 race chose ($KILN_CUDA_SPLIT_ROWS) */
  int cuda_split_blocks; /* cuda: ... split so that about this many blocks run in all; 0 (default) 576
                           ($KILN_CUDA_SPLIT_BLOCKS) */
  int cuda_gemm_stages; /* cuda: k-tiles of a generated GEMM whose global reads are in flight at once, 1, 2
                           or 4 (above 1 the shared tiles are double-buffered); 0 (default) what measurement
                           chose: 2 where both factors are 16-byte vector reads over spans of 4 k-tiles
                           or more, else 1 ($KILN_CUDA_GEMM_STAGES) */
  int cuda_pdl;         /* cuda: 1 programmatic dependent launch, each kernel launched while the one before
                           runs and waiting for it inside; 2 the same, but launched only as the blocks of the
                           one before exit (they call no early trigger), so that its blocks take no place
                           beside theirs; 0 off; default -1: 2, the H100 race (mlp_train_b32 0.941,
                           cnn_train_b32 0.960; 1 ran cnn_train_b32 1.113) ($KILN_CUDA_PDL) */
  int grid_sync;        /* launch groups ($KILN_GRID_SYNC): 0 one launch per kernel; 1 neighbouring kernels
                           with no buffer in conflict share one launch; 2 also dependent kernels, as phases
                           of one cooperative launch with grid barriers between (cuda; on cpu a group is one
                           call running its kernels in order); 3 as 2, but a phase of GEMM tiles that reads
                           the phases before it only at its own rows waits for its band of 32 rows of the
                           phase before (a count a band), not at a grid barrier (cuda; not yet raced);
                           -1 (default) what the H200 race chose: 1 on cuda, 0 on cpu */
  int in_place;         /* 1 (default): an assigned value (an optimizer's new parameter) is stored straight
                           into the parameter where every other read of it comes first; 0 a copy after the
                           run ($KILN_IN_PLACE=0) */
  int index32;          /* index math proven to stay inside int32 is done in 32 bits ($KILN_INDEX32): 1 on,
                           0 off, -1 (default) what measurement chose per backend: on for cuda (a 64-bit
                           division by a constant is tens of GPU instructions), off for cpu */
  int store_moved;      /* 1 (default): a transpose, reshape or slice the planner would store because its
                           readers recompute the arithmetic under it stores that arithmetic's result
                           instead, in its own iteration space (joining its producer's kernel), and the
                           move becomes its readers' index map; 0 store the moved tensor; 2 also where the
                           stage under the moves only selects (a where over a mask) and its inlined body does
                           the arithmetic (cnn_train_b32's conv1 gradient, stored in its own layout, not the
                           transposed one its weight gradient reads) ($KILN_STORE_MOVED) */
  int gemm_reuse;       /* planner: a GEMM operand's prologue (a bias add, a scale) counts as recomputed
                           once per this many outputs of the other factor, and is inlined when that is at
                           most 4 times (32 matches cuda's tiles); 0 (default, what the H200 race chose)
                           n times, so it stays stored ($KILN_GEMM_REUSE) */
  int attention;        /* 1: a contraction, a row kernel over its rows (softmax) and a contraction over
                           those rows run as one kernel that keeps a block's rows on chip, the scores never
                           stored; 0 three kernels; -1 (default) what measurement chose per backend: on
                           cuda for scores of at most 2^20 elements or on tensor cores (all 16-bit), off on
                           cpu ($KILN_ATTENTION) */
  int siblings;         /* cuda: contractions of one input over one space (q, k and v as three MatMuls) as
                           one tiled GEMM, the input's tile shared, a tile of each weight; 0 one GEMM
                           kernel each; -1 (default) what measurement chose ($KILN_SIBLINGS) */
  int gemm_rows;        /* 1: a contraction of at most 32 columns and the row kernel over its rows (the
                           logits and their softmax or loss) run as one kernel, a row's values kept on
                           chip; 2: also rows up to 1024 wide whose contraction's weights are one
                           matrix for every row (a layernorm after its GEMM; on cuda a banded pair,
                           cuda_pair_bands); 0 two kernels; -1 (default) 2 on cuda (with shared bands,
                           H100: encoder4_d256 0.919, gpt_tiny 1.017, 4 launches fewer each), 0 on cpu
                           ($KILN_GEMM_ROWS) */
  int reorder_sums;     /* 1: a reduction read only through a transpose of its indices (attention's output
                           before the heads merge) is computed in its reader's order, so the reader gets a
                           plain row-major operand; 0 in its own order; -1 (default) on; 2 also a sum read
                           through reshapes and transposes that merge its dims (a convolution's weight
                           gradient [9,16] read as the weight [16,1,3,3], whose update then joins its kernel;
                           raced: cnn_train_b32 on this 2-vCPU cpu 10.9 -> 11.7-16.5 ms, the weight
                           gradients' tiles reading across their rows); 3 as 1, and under wide pairs
                           (gemm_rows 2) a contraction with its pointwise epilogue that a row kernel reads
                           through reshapes and transposes, in that reader's order, so the two pair
                           (encoder4_d256's output projections with their layernorms: 24 -> 20 launches on
                           cuda, but 1.086x slower on the H100) ($KILN_REORDER_SUMS) */
  int lazy_select;      /* 1 (default) a select whose branches read memory computes only the branch taken
                           (cpu: only where both branches read memory, outside pointwise kernels); 0 both,
                           eagerly ($KILN_LAZY_SELECT=0) */
  /* compilers and caches */
  char cc[256];         /* cpu: the C compiler ($KILN_CC, default "cc") */
  char cache_dir[1024]; /* compiled kernels ($KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else
                           $HOME/.cache/kiln, else /tmp/kiln) */
  int no_cache;         /* 1: never read the on-disk cache, compile again ($KILN_NO_CACHE=1) */
  int omp_dynamic;      /* cpu: kernels run on a team of omp_get_max_threads() threads ($OMP_NUM_THREADS,
                           omp_set_num_threads); 0 each kernel on all of them (default), 1 on as many
                           as the load average leaves free (for a machine shared with other work), -1
                           as OpenMP's dynamic setting says (the default when $OMP_DYNAMIC is set) */
  int cpu_tiles;        /* cpu: 1 (default) contractions the library GEMM does not take (convolutions read
                           through their window, short sums) run as register tiles over packed panels;
                           0 the dot-product loops ($KILN_CPU_TILES=0) */
  int cpu_windows;      /* cpu: 1 (default) small windows summed along a long last dim (depthwise
                           convolutions) keep each point's sum in a register, the window's taps as
                           nested loops inside; 0 a row of sums in memory ($KILN_CPU_WINDOWS=0) */
  int cpu_epilogue;     /* cpu: 1 (default) arithmetic on a reduction's result that only other reductions
                           read (relu(conv + b) under a max pool) is stored by the reduction's kernel, not
                           recomputed inside each reader's loop; 0 inlined ($KILN_CPU_EPILOGUE=0) */
  int gemm_kgroups;     /* cuda, vulkan: 1 (default) a generated GEMM's 32x32 tiles are multiplied by four
                           groups of threads, each over a quarter of every k-tile, 4x4 outputs a thread; 0
                           2x2 outputs a thread over whole k-tiles ($KILN_GEMM_KGROUPS=0; raced) */
  int cpu_direct;       /* cpu: 1 (default) convolutions with a real window (3x3 ...) run direct: each
                           image's input copied once into a zero-padded plane, blocks of output channels
                           x rows summed in vector registers, no im2col pack, blocked for this host's
                           vectors (none without AVX2); 8 or 16 blocked for that many f32 lanes whatever
                           the host (a test of the other blocking); 2 the host's vectors, never in flat
                           planes (rows the lanes do not divide run on in a task's vectors); 0 the
                           register tiles or window sums ($KILN_CPU_DIRECT) */
  int cpu_pool;         /* cpu: 1 (default) a max pool over non-overlapping windows of a direct
                           convolution's output, which nothing else reads, is taken in the
                           convolution's epilogue (the output never written; $KILN_CPU_POOL); 0 a
                           kernel of its own */
  int cpu_expand;       /* cpu: 1 (default) a contraction (a 1x1 convolution) whose output only a
                           depthwise convolution's window reads, an output over 512 KiB, is computed
                           for a block of channels a row at a time where that window's planes are
                           filled (its output never written; $KILN_CPU_EXPAND); 2 whatever its size;
                           0 a kernel of its own */
  int tensor_cores;     /* cuda: 1 (default) a generated contraction of bf16 or f16 operands runs on the
                           tensor cores (warp-level mma, f32 accumulation, the same tiles, split-K and
                           epilogues), operands that are plain loads copied straight into shared memory;
                           2 the same with every operand through registers, 3 with tiles picked for four
                           blocks a multiprocessor, not one (races; both slower on the H200); 0 the f32 tiles of
                           every other contraction ($KILN_TENSOR_CORES). f32 operands take them only
                           where tf32 allows */
  int cuda_mma_k;       /* cuda: the k-tile of a 32x32 tensor-core tile whose operands go through
                           registers (a cast of f32 values: mixed precision), 32, 64 or 128; default
                           0: 32, what the H200 race chose (mlp_train_b1024_bf16amp 1.13x slower at
                           64, 1.38x at 128) ($KILN_CUDA_MMA_K) */
  int cuda_long_k_blocks; /* cuda: a generated GEMM of fewer than this many 32x32 tiles over a K of at
                           least 16 k-tiles of 32 is split along K towards this many blocks, where the
                           split otherwise starts only below 128 tiles; 0 off; default -1: 256 on cuda,
                           the H200 race (mlp_fwd_b4096_bf16 0.943, mlp_train_b1024 0.976, nothing slower
                           than 1.002) ($KILN_CUDA_LONG_K_BLOCKS) */
  int column_rows;      /* gpu: 1 a reduction kernel of a block a row whose inner loop reads memory only
                           across rows (a column sum, a bias gradient) takes 2 points a thread, up to
                           1024 threads, not the row race's 16; 2 the same in blocks of at most 256
                           threads, a launch group's, so that such a kernel may share its neighbours'
                           launch; 0 off; default -1: 2 for cuda, where the H200 races chose it (1
                           against 0: mlp_train_b1024 0.951; 2 against 1: 0.914, its bias gradients
                           sharing launches, 6 becoming 4), 0 for vulkan (not raced there) ($KILN_COLUMN_ROWS) */
  int cuda_mma_late_round; /* cuda: 1 (default) such a tile's f32 values rounded to bf16/f16 (autocast's
                           copies) are read into registers as they are and rounded where they are
                           stored into shared memory, so that no read is waited for before; 0 rounded
                           as they are read ($KILN_CUDA_MMA_LATE_ROUND; a race) */
  int bounds_moves;     /* planner: 1 a select on a test of indices only (a pad's bounds, an upsampling's
                           parity) is a move, which readers compose into their index maps as a forward
                           convolution reads its own padding, not arithmetic to store; 0 (default) such a
                           pad counts as arithmetic and is stored when its readers would read it many times
                           (a convolution's gradient). Raced on the H200: cnn_train_b32 loses three pad
                           kernels but runs 1.155x slower, its gradients' GEMM tiles testing bounds for
                           each operand they read; level on the cpu ($KILN_BOUNDS_MOVES) */
  int cuda_vec_reads;   /* cuda: 1 a generated f32 GEMM tile reads an operand that is a plain load, 4
                           consecutive elements along its fast direction contiguous and 16-byte aligned,
                           16 bytes at a time (a quarter of the loads, bounds tests and index math);
                           0 off; default -1: on, what the H200 race chose (mlp_train_b1024 0.929,
                           the other mlp workloads 0.956-0.966, nothing slower); 2 also runs that cross
                           from one var into the next where their offsets are contiguous (a convolution's
                           weights over (ci, kh, kw); a candidate, not yet raced) ($KILN_CUDA_VEC_READS) */
  int cuda_pair_warps;  /* cuda: a classifier's narrow logits and their rows (a contraction of at most 32
                           columns and the softmax or loss over them, one kernel) of at least this many rows
                           take a warp a row, 8 rows a block, instead of a block a row; 0 never; default -1:
                           512 on cuda, the H200 race (mlp_train_b1024's 1024 rows 0.958; from 1 row the
                           shared mlp's single row ran 1.303) ($KILN_CUDA_PAIR_WARPS) */
  int cuda_pair_bands;  /* cuda: a wide pair (gemm_rows 2: a layernorm after its GEMM) as the GEMM's tiles, each
                           band of rows' last tile running the row kernel over the band, a warp a row; 0 the
                           warp-a-row form (each warp its rows' contraction: gpt_tiny 1.64x slower than two
                           kernels on the H100, the bands 1.20-1.23x); 2 shared bands: every 32 x 32 tile runs
                           the row kernel over its own columns of the band's rows, the band's tiles meeting at
                           each of the row's f32 sums (partials stored, a band barrier, added in column-tile
                           order: the same bits every run), a cooperative launch; 3 as 2, launched as any
                           kernel (its blocks checked resident), the tiles meeting by flags, each tile's
                           written by it alone, where 2 meets at a barrier count, and a layernorm's variance
                           met with its mean (Chan's combination); default -1: 3 (H100, wide pairs on:
                           encoder4_d256 0.919 and gpt_tiny 1.017 under 3, 0.988 and 1.155 under 2)
                           ($KILN_CUDA_PAIR_BANDS) */
  int cuda_copy_stages; /* cuda: 2, 3 or 4: a generated f32 GEMM tile of 32x32 (4 k groups) whose two operands
                           are 16-byte vector reads (cuda_vec_reads) copies them straight into shared
                           memory (cp.async), this many k-tiles in flight, one barrier a k-tile, instead
                           of through registers (at most as many stages as a block's span has k-tiles,
                           from 2); the same sums, bit for bit; 0 off; default -1: 2, the H200 race (the
                           shared mlp 0.863, encoder4_d256 0.932, mlp_fwd_b128 0.936; 4 stages split
                           mlp_train_b1024's launch group: 1.043) ($KILN_CUDA_COPY_STAGES) */
  int cuda_one_fence;   /* cuda: 1 a block that counts itself in at a two-phase reduction's arrival count
                           (split-K, rows in two phases) fences memory in its first thread only, after the
                           block's barrier and around the count, as cooperative groups' grid barrier does,
                           where 0 fences in every thread before the barrier and again after it; 2 its first
                           thread counts with one acquire-release atomic and no fence ($KILN_CUDA_ONE_FENCE;
                           default -1: 2, the H200 races: 1 against 0 mlp_fwd_b128 0.980, convnet_mini
                           0.977; 2 against 1 mlp_fwd_b128 0.961, convnet_mini 0.967, nothing slower than
                           1.016) */
  int pair_tails;       /* 1: a contraction over a pair's row (the logits' gradient times the weights, the
                           hidden layer's gradient) runs in the pair's kernel after the row's steps, by the
                           block or warp that holds the row; 0 its own kernel; default -1: on for cuda,
                           off elsewhere (their pairs have no tails) ($KILN_PAIR_TAILS) */
  int row_sums;         /* 1: a sum over rows of a value of each row (a loss summed over a batch of
                           log-softmax rows) is lowered as each row's sum, in the kernel that holds the
                           row, then the sum of those; 0 one reduction over both; default -1: 1
                           ($KILN_ROW_SUMS) */
  int cuda_group_blocks; /* cuda: a launch group's kernel (grid_sync) is compiled for this many resident
                           blocks a multiprocessor, its registers capped to fit (its members inlined
                           into one function take more registers than any of them alone); 0 no ask;
                           default -1: the budget asks, group by group: a group of one phase whose
                           compiled kernel keeps too few blocks resident for one wave of its grid is
                           built again asking for that wave (at most 4 a multiprocessor), and without
                           the ask if it then spills (the H200 race: mlp_train_b1024 0.0361 -> 0.0344
                           ms, its last group 105 registers and 2 blocks -> 4; nothing else moved)
                           ($KILN_CUDA_GROUP_BLOCKS) */
  int cpu_channel_lanes; /* cpu: 1 (default) a direct convolution whose weights are the program's
                           constants runs with its output channels along the vectors where the cost
                           model says so (a few pixels an image: 7 x 7 leaves 15 of 64 lanes idle
                           along rows, none of 512 channels), its weights laid out for it once at
                           compile and again after kiln_program_write_param; 2 wherever it can; 0
                           never ($KILN_CPU_CHANNEL_LANES) */
  int cuda_tile_fit;    /* cuda: 1 a generated f32 GEMM whose tile would be more than half padding along M or N
                           (a first convolution's 16 channels in a 128 x 128 tile: 7 of 8 multiply-adds on
                           nothing) takes the next smaller tile (64 x 64, then 32 x 32) while that wastes
                           less; 0 (default) the tile from the block count alone, what the H200 race chose
                           (on: LeNet 1.060, cnn_train_b32 1.013) ($KILN_CUDA_TILE_FIT) */
  int cuda_small_k;     /* cuda: a contraction over fewer than this many points (a first convolution's 3 x 3
                           window over one channel: 9) runs a thread an output, its sum in a loop, not in
                           GEMM tiles; 0: below 4; default -1: 16, the H200 race (cnn_train_b32 0.989,
                           nothing slower than 1.005; 32 took convnet_mini's first two: 1.039)
                           ($KILN_CUDA_SMALL_K) */
  int chain_layout;     /* planner: 1 an attention chain's output read only through a transpose (the heads'
                           merge before the output projection) is stored in that reader's order while the
                           chain computes in its own, so the projection reads a plain row-major operand (a
                           library GEMM's); 0 stored in the chain's order; default -1: on (raced on the H100:
                           level on encoder4_d256 and gpt_tiny, bert_layer_b8s128_bf16 0.951) ($KILN_CHAIN_LAYOUT) */
  int cuda_chain_mma;   /* cuda: 1 an attention chain whose queries, keys, values and softmax are
                           all bf16 (or all f16) takes both of its products on tensor cores (warp mma, f32
                           sums) from 16-bit copies in shared memory, the softmax on rows in shared memory;
                           2 (default) the same with each warp's 16 rows kept in its mma fragments from the
                           scores to the second product (H100, 2026-12-07: bert_layer_b8s128_bf16 0.970 and
                           0.964 of 1, its chain 14.9 -> 12.3 us, bench/results/2026-12-07-h100-rows-chain.md;
                           the H200 ran it 1.026 of 1 before the softmax's exponentials were kept); 3 and 4
                           the fragments' form with each tile's keys split over 2 and 4 warps, their rows'
                           maxima and sums met across the warps and their partial outputs added through shared
                           memory (the fragments' form ran each warp's 16 rows over all keys as one chain of
                           dependent instructions; H100: 3 1.046 slower, 4 0.998); 0 f32 multiply-adds as for
                           f32 ($KILN_CUDA_CHAIN_MMA) */
  int gemm_heads;       /* cuda: 1 a row kernel whose per-point value only one contraction reads, as its factor
                           along the reduction (a pre-norm layernorm before the QKV or FFN projection), is
                           computed at the head of each of the contraction's 32 x 32 tiles, the tile's rows
                           kept in shared memory for its k loop: one kernel where there were two (rows of at
                           most 256 points); 2 the same with the headed GEMM not split along K (one
                           head a tile, not one a span); 3 as 2 with a cluster of 4 column tiles
                           sharing the rows (sm_90); 0 off; default -1: off, what the H100 races chose
                           (gpt_tiny 1.41x, 1.15x and 1.33x, encoder4_d256 1.25x, 1.26x and 1.29x slower
                           under 1, 2 and 3: every column tile reads its rows whole) ($KILN_GEMM_HEADS) */
  int cuda_narrow_depth; /* cuda: a contraction of at most 32 columns that no row kernel follows (a classifier's
                           logits and their bias, alone) over at least this many points runs a warp a row, 8
                           rows a block, the factor free of the rows read once a block into shared memory,
                           instead of in 32 x 32 tiles split along K; 0 never; default -1: never, the H100
                           race (mlp_fwd_b4096 0.980, mlp_fwd_b128 1.008) ($KILN_CUDA_NARROW_DEPTH) */
  int cuda_pair_stage;  /* cuda: 1 a narrow pair a warp a row (cuda_pair_warps) reads its contraction's factor
                           free of the rows (the classifier's weights) from shared memory, staged once a
                           block as a narrow contraction's is, not a strided read of L1 a column at a time,
                           its tail reading the same stage; 2 also a pair a block a row (mlp_train_b32's 32
                           rows; not yet raced); 0 from memory; default -1: 1 on cuda, the H100 race
                           (mlp_train_b1024 0.961, its bf16 autocast 0.981) ($KILN_CUDA_PAIR_STAGE) */
  int cuda_kg_sum;      /* cuda: 1 a copied 32 x 32 tile's four k groups put their partial tiles in four copy
                           stages and add them after one barrier; 0 (default) in the tree of five barriers,
                           which the H100 race found no slower (0.992 - 1.007); the same bits either way
                           ($KILN_CUDA_KG_SUM) */
  int cuda_split_flags; /* cuda: 1 a GEMM split along K has each span but the last release its partial tile with a
                           flag of its own and go on, the last span (its blocks after the others) wait for
                           their flags and add their partials and its own in span order; 0 (default) every
                           span counts itself in at the tile's arrival count and the last to arrive adds
                           them all (one fence and atomic a block, every block waiting for its answer); the
                           same bits. Rows in two phases (a few long rows of sums) the same way, their
                           blocks' partials by flags ($KILN_CUDA_SPLIT_FLAGS) */
  int cuda_min_span;    /* cuda: a generated f32 GEMM split along K takes spans of at least this many k-tiles of 32
                           (1 .. 64); 0 (default) 2. Fewer spans kept the arrival count's round trips few;
                           under cuda_split_flags a span more costs the last span one more read
                           (mlp_train_b32's first layer: 9 spans of 96, 36 blocks, or 25 of 32 at 1, 100
                           blocks) ($KILN_CUDA_MIN_SPAN) */
  int cuda_split_target; /* cuda: a generated f32 GEMM of too few tiles for the chip splits along K towards this many
                           blocks (64 .. 4096); 0 (default) 256, two a multiprocessor. More spans shorten
                           each block's chain of k-tiles (mlp_fwd_b128's first layer: 7 k-tiles a block in
                           256 blocks) at the cost of more partials to add ($KILN_CUDA_SPLIT_TARGET) */
  int cuda_thin_spans;  /* cuda: a generated f32 product of fewer than 16 tiles of 32x32, whose split-K would
                           give too few blocks, over a long reduction (cnn_train_b32's first convolution's
                           weight gradient: 9 x 16 outputs over 25,088 points) takes one tile split into up to
                           this many spans (32 .. 128) where those give at least 32 blocks, each factor read
                           once; 0 a row of blocks an output, which reads a factor once per output; default
                           -1: 128, what the race chose (H100, one round: cnn_train_b32 0.972, at 64 spans
                           1.033; not yet raced on the H200) ($KILN_CUDA_THIN_SPANS) */
  int row_values;       /* grid backends: 1 a row kernel's later loops read whole values its first loop kept in
                           registers (a layernorm's x + o + b once, not its three loads and two adds again,
                           rows of vectors too);
                           0 the loads and unary values alone; the same bits; default -1: 1 on cuda (raced with
                           cuda_row_fill on the H100: bert_layer_b8s128_bf16 0.975 and 0.979), 0 elsewhere
                           ($KILN_ROW_VALUES) */
  int nan_fold;         /* grid backends: 1 a max or min row's NaN flag rides in its value through the row's one
                           reduction (the reductions keep a NaN), where 0 (default) reduced the flag in a second
                           reduction of its own: 5 shuffles a warp row, a block row's shared array and 2
                           barriers. The same bits ($KILN_NAN_FOLD; H100: bert_layer_b8s128_bf16 0.986, its chain 15.5 -> 14.8 us) */
  int cuda_row_fill;    /* cuda: a row kernel of a block a row (at least 32 rows) widens its blocks (doubling,
                           at least 2 points a thread) until the grid holds this many warps (64 .. 65536); 0
                           off: 1024 rows of 768 take 64 threads each, 2048 warps, about 15 of an H100
                           multiprocessor's 64; default -1: 8192 ($KILN_CUDA_ROW_FILL) */
  int cuda_row_half;    /* cuda, cuda_row auto: 1 a row kernel that reads a bf16 or f16 tensor along its rows and
                           would take ~16 points a thread (p16) reads them as vectors of four 16-bit values
                           (p16vec); 0 p16 as for f32 rows; default -1: 1 (H100: bert_layer_b8s128_bf16's
                           layernorms 4.95 -> 4.30 us) ($KILN_CUDA_ROW_HALF) */
  int cuda_chain_prefetch; /* cuda: 1 an attention chain on tensor cores (its shared form) whose block takes several
                           tiles of 16 rows copies the next tile's queries while it computes this one, into a
                           second buffer, so that only the first tile waits for its queries (bert's 2 tiles a
                           block waited for each tile's); 0 (default) each tile's queries after the tile before
                           ($KILN_CUDA_CHAIN_PREFETCH; raced on the H100: bert_layer_b8s128_bf16 1.07 slower) */
  int cuda_chain_blocks; /* cuda: an attention chain on tensor cores (its shared form) shares its batch points'
                           tiles of 16 rows out for about this many blocks a multiprocessor (1 .. 8); 0
                           (default) 4. Fewer: each block reads the keys and values for more tiles (bert's 96
                           heads: 4 blocks of 2 tiles at 4, 3 of 3 at 2, 2 of 4 at 1), best with
                           cuda_chain_prefetch ($KILN_CUDA_CHAIN_BLOCKS; raced with the prefetch on the H100:
                           bert_layer_b8s128_bf16 1.07 slower at 2 and at 1) */
  int cuda_chain_lanes; /* cuda: an attention chain on tensor cores (its shared form) takes each row's softmax
                           steps on this many lanes (4, 8, 16 or 32), so that a warp takes 32 / N rows at once
                           and a tile of 16 rows one pass of 8 warps (at 32 each warp took 2 rows in turn,
                           each row's sums a chain of 5 shuffles); 0 (default) 32. The row's sums add in
                           another order: not the same bits ($KILN_CUDA_CHAIN_LANES; H100, bert_layer_b8s128_bf16: 16 lanes
                           0.993, 8 lanes 1.003, 4 lanes 1.036) */
  int cuda_chain_spread; /* cuda: 1 an f32 attention chain's two products give each thread as few rows as fill
                           its block in one pass (at least 1; a tile of 8 rows over 64 keys and 64 columns
                           took 128 and 32 of its 256 threads at 4 rows a thread); 0 4 rows a thread; the
                           same sums in the same order, the same bits; default -1: 1 on cuda, the H100 race
                           (gpt_tiny 0.969, encoder4_d256 0.974) ($KILN_CUDA_CHAIN_SPREAD) */
  int cuda_wgmma;       /* cuda on compute capability 9.0 (H100, H200): 1 a product of bf16 or f16 operands that
                           are plain affine loads runs as generated tiles on Hopper's warpgroup MMA (wgmma, the
                           program built for sm_90a) rather than the library or the mma.sync tiles: 128 rows a
                           tile (a warpgroup each 64), k-tiles of 64 copied 128-byte swizzled into shared
                           memory; 0 (default) off, as the H100 race chose: bert_layer_b8s128_bf16 2.15x and
                           mlp_fwd_b4096_bf16 1.80x slower than the library ($KILN_CUDA_WGMMA) */
  int cuda_lt_algos;    /* cuda: a library GEMM takes the fastest of this many of cuBLASLt's heuristic algorithms,
                           each timed when the program is loaded (a CUDA graph of its calls on the program's own
                           buffers, outside the recorded schedule), the choice kept in cache_dir so that a later
                           load takes the same one untimed; 0 (default) and 1 the heuristic's first, untimed,
                           as the H100 race chose (strict-f32 bert_layer_b8s128 0.981, the bf16 rows unchanged,
                           eager bert bf16 1.06 slower); at most 16 ($KILN_CUDA_LT_ALGOS) */
  int excess_precision; /* every backend that generates code: 1 an f16/bf16 operation's result stays an f32 value
                           inside its kernel, rounded to its 16-bit type only where it is stored (to memory, or
                           as a tensor-core operand), as XLA's allow_excess_precision and Inductor's upcast do;
                           an explicit Cast still rounds where it stands. 0 every operation rounds its result,
                           as ref does, so a fused kernel gives eager's bits. -1 (default) on for cuda and cpu, as
                           their races chose, off for vulkan (not raced) ($KILN_EXCESS_PRECISION) */
  int cpu_run_ends;     /* cpu: 1 (default) a window's run of stride 1 (a convolution's row of output pixels,
                           packed for the register tiles) finds the lanes inside its padding from the run's
                           ends and copies them in one vector loop, unmasked where the run fills its panel;
                           0 one masked vector loop over the run, its guard on every lane (resnet50's 3x3
                           convolutions over 64 channels at 56x56: 0.81-0.85 of the masked form, two threads,
                           this EPYC) ($KILN_CPU_RUN_ENDS) */
  int cpu_cols_once;    /* cpu: 1 (default) register tiles whose column operand is the program's constant (a
                           layer's weights read as [k][n]) lay its panels out once, at compile and after
                           write_param, where each thread packed its groups of panels every run; 0 packed
                           every run ($KILN_CPU_COLS_ONCE) */
  int cpu_pixel_panels; /* cpu: 1 (default) a 1 x 1 convolution in channel lanes copies its operand once a
                           thread an image into panels of a task's pixels [block][channel][pixel], so that a
                           task's broadcasts run on contiguously, and takes tasks of any run of pixels (not
                           only a row's): 0 the operand read in place or from the row form's plane
                           ($KILN_CPU_PANELS) */
  int cpu_winograd;     /* cpu: 1 (default) a 3 x 3 convolution of stride 1 in channel lanes may run as Winograd's
                           F(2x2, 3x3): its weights transformed once into 16 products of 4 x 4 points, each
                           2 x 2 tile of outputs from 16 sums over the channels where the window took 36,
                           where the cost model says; 2 wherever it can; 0 never. Its values differ from the
                           window's sum by rounding only: a tile whose outputs are not all finite is
                           taken again as the window's sum ($KILN_CPU_WINOGRAD) */
  int cpu_split_digits; /* cpu: 1 (default) register tiles pack an operand that reads a reduction var apart by
                           constant divisors (a weight gradient's sum over the batch's pixels, one merged var
                           read as image, row and column) over the var's digits, a loop each, so that its
                           index math adds them where it divided the var at every point; 0 one loop over the
                           var ($KILN_CPU_SPLIT_DIGITS) */
  int cpu_nested_sums;  /* cpu: 1 (default) a sum of the generic loop form runs its leading reduction vars as
                           loops of their own around one flat loop of its trailing points (at least 8), whose
                           digits are the only ones split by division; 0 one flat loop over every point, each
                           split into its vars by divisions ($KILN_CPU_NESTED_SUMS) */
  kiln_dist *dist;      /* the communicator the program's collectives run over, not owned (NULL: a
                           group of one rank, each collective a copy). A communicator of more than one
                           rank needs a backend with collectives: cuda */
  int64_t dist_bucket_bytes; /* collectives started as soon as this many bytes of gradients are ready
                           (one NCCL group of all-reduces, one launch), or their readers need them; 0
                           (default) 25 MiB, PyTorch DDP's bucket ($KILN_DIST_BUCKET_BYTES) */
} kiln_options;

/* Defaults with the environment applied: every variable named above, read when this is
 * called and nowhere else (a program keeps its own copy of its options, so two programs in
 * one process may differ). */
kiln_options kiln_options_default(void);
/* sizeof one of kiln.h's structs by its name ("kiln_census", "kiln_tensor_info", "kiln_value",
 * "kiln_value_list", "kiln_options", "kiln_model_tensor", "kiln_buffer"), 0 for any other: a binding that lays them out itself checks
 * its layout against this library's. */
size_t kiln_struct_size(const char *name);
/* For bindings that cannot lay out kiln_options (Python's ctypes): the defaults written into
 * caller memory of kiln_struct_size("kiln_options") bytes, and one field set by its name as text
 * ("backend" "cuda", "fuse" "0", "cuda_row" "p16"). backend takes a backend's name; an integer
 * field a whole number in its range; a text field a string that fits. An unknown name or a bad
 * value is KILN_ERR_INVALID_ARG naming it. */
kiln_status kiln_options_init(kiln_options *o);
kiln_status kiln_options_set(kiln_options *o, const char *name, const char *value);

typedef struct kiln_program kiln_program;

typedef struct kiln_census {
  int64_t runs;                 /* runs since compile (the counters below are for the last run) */
  int64_t kernels_launched;     /* launches per run (a launch group counts once) */
  int64_t phases;               /* dependent phases per run: launches, plus the grid barriers inside
                                   launch groups, plus copies (assigns) between device buffers */
  int64_t submissions;          /* device submissions per run (1 with a replayed graph) */
  int64_t bytes_read;           /* device-memory bytes read by kernels, from the plan */
  int64_t bytes_written;
  int64_t host_fallbacks;       /* ops executed on the host by a non-ref backend */
  int64_t largest_fallback_bytes;
  char fallback_ops[256];       /* "exp:2 matmul:1", by op */
  int64_t h2d_bytes, d2h_bytes; /* host<->device transfers in the last run */
  int64_t h2d_copies, d2h_copies;
  int64_t peak_bytes;           /* memory plan: peak intermediate bytes */
  double compile_ms;
  int cache_hit;                /* compiled code came from the on-disk cache */
  int64_t kernels_planned;
  double device_ms;             /* cuda: the last run's schedule between two stream events
                                   (what CUDA-event timers measure; inputs/outputs copies
                                   excluded); 0 on backends without a device clock */
  int64_t shape_programs;       /* kiln_model_census: programs the model holds, one per set of
                                   input shapes; 0 from kiln_program_census */
  int64_t shape_compiles;       /* kiln_model_census: compiles since the model was opened (a set
                                   of shapes evicted and met again compiles again) */
  int64_t collectives;          /* collectives per run (each gradient averaged over the ranks is one) */
  int64_t collective_calls;     /* calls to the communicator per run: buckets of collectives (0 in a
                                   group of one rank without a library, where each is a copy) */
  int64_t collective_bytes;     /* bytes the collectives reduce per run */
} kiln_census;

kiln_status kiln_program_compile(const kiln_graph *g, const kiln_options *opt, kiln_program **out);
/* inputs: one host buffer per graph input, in creation order; outputs: one per marked output.
 * String tensors: see "strings" above (outputs stay valid until the next run). */
kiln_status kiln_program_run(kiln_program *p, const void *const *inputs, void *const *outputs);
/* times runs of p in a row (times >= 1) on its resident inputs (kiln_program_set_input; every
 * input must have been set), reading no output (kiln_program_read_output reads the last run's).
 * On a device the runs are enqueued back to back and the call waits once, so no host round trip
 * separates two runs: a training loop over data the program keeps (its step counter and losses
 * in params) runs as fast as the device goes. The census describes one run, except device_ms,
 * which spans all of them. */
kiln_status kiln_program_run_times(kiln_program *p, int times);
kiln_status kiln_program_census(const kiln_program *p, kiln_census *out);
/* Prints the plan: each kernel, its ops, anchor, buffers, bytes and boundary reasons. */
kiln_status kiln_program_print(const kiln_program *p, FILE *f);
/* The same plan as a Graphviz digraph (each kernel a cluster of its stages); the ref backend,
 * which plans nothing, is KILN_ERR_UNSUPPORTED. */
kiln_status kiln_program_print_dot(const kiln_program *p, FILE *f);
/* Reads the current value of a parameter (after assign updates) into host memory. */
kiln_status kiln_program_read_param(kiln_program *p, kiln_tensor param, void *dst);
/* Overwrites a parameter with numel elements from host memory at src, where the program keeps
 * it (on the device for device backends); the next run reads the new value and assigns update
 * it from there. For data a program keeps resident and changes now and then (a data set's
 * shuffle order, a step counter reset each epoch). A tensor that is not a parameter of the
 * graph, or NULL p or src, is KILN_ERR_INVALID_ARG; a string parameter KILN_ERR_UNSUPPORTED.
 * Not counted in the census's transfers (those are a run's). */
kiln_status kiln_program_write_param(kiln_program *p, kiln_tensor param, const void *src);
/* Device-resident tensors. set_input copies host data into input i's buffer on the program's
 * device, where it stays; kiln_program_run with inputs NULL (or a NULL entry) reuses that
 * resident value, and with outputs NULL (or a NULL entry) leaves the output on the device, so
 * such a run moves nothing between host and device (the census shows it). read_output copies
 * output i of the last run to host memory. */
kiln_status kiln_program_set_input(kiln_program *p, int i, const void *src);
kiln_status kiln_program_read_output(kiln_program *p, int i, void *dst);
void kiln_program_free(kiln_program *p);

/* Memory a program keeps, for exchange with other libraries without a trip through the host
 * (DLPack; the device numbers are DLPack's). */
#define KILN_DEVICE_HOST 1
#define KILN_DEVICE_CUDA 2
typedef struct kiln_buffer {
  int device_type;   /* KILN_DEVICE_HOST or KILN_DEVICE_CUDA */
  int device_id;     /* the device's ordinal (kiln's cuda backend runs on device 0's primary context) */
  uint64_t address;  /* the first byte: a host pointer or a CUDA device address */
  int64_t bytes;
  uint64_t stream;   /* a CUstream: the one the program enqueues on (kiln_program_device), or the one
                        whose work wrote the memory (kiln_program_set_input_buffer; 1 is the legacy
                        default stream); 0 on the host */
} kiln_buffer;
/* The program's device and stream (address and bytes 0). */
kiln_status kiln_program_device(const kiln_program *p, kiln_buffer *out);
/* Input i's resident value (as kiln_program_set_input) copied from memory on the program's
 * device: one device-to-device copy, after the work enqueued on src->stream, done when the
 * call returns. src->bytes must be the input's size; strings are KILN_ERR_UNSUPPORTED. */
kiln_status kiln_program_set_input_buffer(kiln_program *p, int i, const kiln_buffer *src);
/* Where output i of the last run is: on a device backend the program's own buffer (a run
 * with outputs NULL leaves it there and moves nothing); on the host only when the last run
 * was given no buffer for it. The next run overwrites it, kiln_program_free frees it. */
kiln_status kiln_program_output_buffer(const kiln_program *p, int i, kiln_buffer *out);

/* ---- introspection and host values -----------------------------------------------
 *
 * What a program that runs models it did not build needs (the kiln command, a Python
 * binding): the inputs, outputs and parameters of a graph, and host tensors read from ONNX
 * TensorProto files, such as an ONNX test-data folder (input_0.pb ... and output_0.pb ...).
 */

/* One tensor of a graph as a caller sees it. name points into the graph (valid until
 * kiln_graph_free); shape holds rank dims, the rest are 0. */
typedef struct kiln_tensor_info {
  kiln_tensor tensor;            /* its id: for kiln_program_read_param, kiln_tensor_shape, ... */
  const char *name;              /* an output: the name it was marked with; else the tensor's */
  kiln_dtype dtype;
  int rank;
  int64_t shape[KILN_MAX_RANK];
  int64_t numel;                 /* product of the dims (1 at rank 0) */
} kiln_tensor_info;

/* Inputs: what kiln_program_run takes, in creation order (input i is inputs[i]). Outputs: in
 * the order marked (output i is outputs[i]). Params: the tensors with data that the program
 * keeps and may update (kiln_graph_param, the optimizer state kiln_graph_sgd / _adam add, the
 * large initializers of an ONNX model), in creation order. An index out of range is
 * KILN_ERR_INVALID_ARG. */
kiln_status kiln_graph_input_count(const kiln_graph *g, int *out);
kiln_status kiln_graph_input_info(const kiln_graph *g, int i, kiln_tensor_info *out);
kiln_status kiln_graph_output_count(const kiln_graph *g, int *out);
kiln_status kiln_graph_output_info(const kiln_graph *g, int i, kiln_tensor_info *out);
kiln_status kiln_graph_param_count(const kiln_graph *g, int *out);
kiln_status kiln_graph_param_info(const kiln_graph *g, int i, kiln_tensor_info *out);
/* Any tensor of g, by id. */
kiln_status kiln_graph_tensor_info(const kiln_graph *g, kiln_tensor x, kiln_tensor_info *out);

/* A host tensor: numel elements of dtype, packed in row-major order at data (a KILN_STRING
 * value's data is numel `char *`, see "strings" above). A value kiln reads (kiln_value_read_pb,
 * kiln_value_list_read) owns its name and data, one allocation each (a string value's pointers
 * and bytes are one block), and kiln_value_clear releases them. A caller may also fill one in
 * to describe its own memory (to bind at import, or to read elements with kiln_value_get_*):
 * kiln only reads such a value during the call, and it must not be cleared. */
typedef struct kiln_value {
  const char *name;              /* the TensorProto's name ("" when it has none); may be NULL */
  kiln_dtype dtype;
  int rank;
  int64_t shape[KILN_MAX_RANK];  /* rank dims, the rest 0 */
  int64_t numel;                 /* product of the dims (1 at rank 0) */
  void *data;
} kiln_value;

/* Decodes one serialized TensorProto into *out. *out is overwritten, not freed (clear a value
 * before reading into it again), and is all zeros after a failure. External data is read only
 * from inside base_dir (NULL: a tensor with external data is KILN_ERR_MODEL). Malformed or
 * truncated bytes, sizes that overflow or disagree with the data present are KILN_ERR_MODEL;
 * element types kiln lacks (4-bit, complex, ...), ranks above KILN_MAX_RANK and strings
 * holding a NUL byte KILN_ERR_UNSUPPORTED. */
kiln_status kiln_value_read_pb_buffer(const void *data, size_t size, const char *base_dir, kiln_value *out);
/* A TensorProto file; its external data beside it. A failure's message starts with path. */
kiln_status kiln_value_read_pb(const char *path, kiln_value *out);
/* Frees what kiln_value_read_pb* gave v and zeroes *v; NULL does nothing. */
void kiln_value_clear(kiln_value *v);

/* Values read from a folder: v[0..n). */
typedef struct kiln_value_list {
  int n;
  kiln_value *v;
} kiln_value_list;

/* Reads dir/PREFIX_0.pb, dir/PREFIX_1.pb, ... up to the first that does not exist (prefix
 * "input" or "output" in an ONNX test_data_set_N folder); a folder without PREFIX_0.pb, or
 * no folder, gives n = 0. On failure *out holds nothing and the message names the file. */
kiln_status kiln_value_list_read(const char *dir, const char *prefix, kiln_value_list *out);
/* Clears every value, frees the array and zeroes *l; NULL does nothing. */
void kiln_value_list_clear(kiln_value_list *l);

/* Element i (0 <= i < numel) of a numeric or bool value: get_f64 converts as a C cast
 * (f16 and bf16 exactly; i64/u64 beyond 2^53 rounded), get_i64 truncates floats toward zero
 * (NaN gives 0, out of range saturates; a u64 above INT64_MAX wraps). A string value, an
 * index out of range, or a value without data is KILN_ERR_INVALID_ARG. get_str hands back
 * element i of a string value (the value's own pointer). */
kiln_status kiln_value_get_f64(const kiln_value *v, int64_t i, double *out);
kiln_status kiln_value_get_i64(const kiln_value *v, int64_t i, int64_t *out);
kiln_status kiln_value_get_str(const kiln_value *v, int64_t i, const char **out);

/* 1 for f32, f64, f16 and bf16; 0 for any other t. */
int kiln_dtype_is_float(kiln_dtype t);

/* Room for any shape as text: "[" + 8 dims of up to 20 characters + 7 commas + "]" + NUL. */
#define KILN_SHAPE_STR_MAX 176
/* Writes "[2,3]" ("[]" at rank 0) into buf, always NUL-terminated. A buffer too small
 * (truncated text written) is KILN_ERR_INVALID_ARG; KILN_SHAPE_STR_MAX bytes always fit. */
kiln_status kiln_shape_format(int rank, const int64_t *shape, char *buf, size_t cap);

/* As kiln_graph_load_onnx, with values for some of the model's graph inputs (those that are
 * not initializers). An input takes the value of its name or, failing that, bind[k] for the
 * k-th input when that value's name is NULL or ""; a name no input has is ignored. A bound
 * value fixes the input's shape (so a model may leave dims symbolic; its dtype, its rank
 * and every static dim the model declares must match exactly, and a symbolic dim takes the
 * first value bound to it, which every input sharing that dim's name must then have); an input the model reads as data while importing
 * (a Reshape's shape, a Slice's starts, ...) becomes a constant holding the value and is no
 * longer an input of the graph. data may be NULL to fix only the shape (an input read as data
 * is then KILN_ERR_INVALID_ARG). Each value is checked first (dtype, rank, numel = product of
 * the shape, no NULL string); kiln reads bind only during the call. Graph tensor k is the
 * model's k-th input, so kiln_graph_input_info's tensor field says which model input each
 * remaining graph input is. n may be 0 (bind NULL). */
/* Every failure of a loader that takes a path starts its message with the path. */
kiln_status kiln_graph_load_onnx_bound(const char *path, int n, const kiln_value *bind, kiln_graph **out);
kiln_status kiln_graph_load_onnx_buffer_bound(const void *data, size_t size, const char *base_dir, int n,
                                              const kiln_value *bind, kiln_graph **out);

/* ---- models with symbolic dimensions ---------------------------------------------
 *
 * An ONNX export usually leaves the batch symbolic ("batch", "N"). A kiln_model holds such
 * a model's bytes and compiles it once per distinct set of input shapes, on first use:
 * kiln_model_program binds the shapes (as kiln_graph_load_onnx_bound does, so shape-dependent
 * folding happens per concrete shape), compiles, and keeps the program. At most `capacity`
 * programs are kept; past that the least recently used one is freed. A model without
 * symbolic dims works the same way with one program. Not thread-safe (one model, one thread
 * at a time).
 */
typedef struct kiln_model kiln_model;

/* A declared input or output of a model. */
typedef struct kiln_model_tensor {
  const char *name;                     /* valid until kiln_model_free */
  int dtype;                            /* a kiln_dtype; -1 when the model declares none (outputs only) */
  int rank;                             /* -1 when the model declares no shape */
  int64_t shape[KILN_MAX_RANK];         /* rank dims; -1 for a symbolic one */
  const char *dim_name[KILN_MAX_RANK];  /* a symbolic dim's name (dim_param); NULL otherwise */
} kiln_model_tensor;

/* Reads the model and its declared inputs and outputs; compiles nothing. opt: the options
 * every program is compiled with (NULL: kiln_options_default()); capacity <= 0: 8. An input
 * that is not a tensor or has no type, or dims past KILN_MAX_RANK, fail here. External data
 * is read from beside path (from base_dir for a buffer, NULL: none) at each compile. The
 * buffer is copied. */
kiln_status kiln_model_open(const char *path, const kiln_options *opt, int capacity, kiln_model **out);
kiln_status kiln_model_open_buffer(const void *data, size_t size, const char *base_dir, const kiln_options *opt,
                                   int capacity, kiln_model **out);
/* The declared inputs (graph inputs that are not initializers, in order) and outputs. An
 * index out of range is KILN_ERR_INVALID_ARG. */
kiln_status kiln_model_input_count(const kiln_model *m, int *out);
kiln_status kiln_model_input_info(const kiln_model *m, int i, kiln_model_tensor *out);
kiln_status kiln_model_output_count(const kiln_model *m, int *out);
kiln_status kiln_model_output_info(const kiln_model *m, int i, kiln_model_tensor *out);
/* The program for input shapes: shapes[i] gives input i's dtype, rank and shape (name and
 * data are not read; n must be the input count). Compiled on the first call with these
 * shapes, found again after. *program (and *graph, the graph it was compiled from, for its
 * input and output infos; graph may be NULL) stay the model's: valid until the next
 * kiln_model_program on m or kiln_model_free. Run it with the kiln_program_* calls. A shape
 * the model's declaration refuses is KILN_ERR_INVALID_ARG naming the input and dim; an input
 * the model reads as data while importing (a Reshape's shape) cannot be bound by shape and
 * is KILN_ERR_INVALID_ARG (bind it with kiln_graph_load_onnx_bound). A failed compile keeps
 * nothing. */
kiln_status kiln_model_program(kiln_model *m, int n, const kiln_value *shapes, kiln_program **program,
                               const kiln_graph **graph);
/* The census of the program used last (zeros before the first), with shape_programs and
 * shape_compiles filled. */
kiln_status kiln_model_census(const kiln_model *m, kiln_census *out);
void kiln_model_free(kiln_model *m);

#ifdef __cplusplus
}
#endif
#endif
