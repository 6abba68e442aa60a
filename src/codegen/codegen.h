/*
 * codegen — the fourth stage. Takes a Plan, hands on kernel source text in a dialect.
 * One renderer (render.c) holds the algorithms: loops over the outer and inner
 * domains, accumulators, the row-of-accumulators contraction loop, each Expr node
 * emitted once as a local. A dialect is a table of strings and names (below); C,
 * CUDA C and GLSL differ only there. Kernel parameters are numbered buffers b0, b1,
 * ... (the kernel's inputs, then its stored stages); locals are numbered too, so no
 * name from a model ever reaches generated source.
 */
#ifndef KILN_CODEGEN_H
#define KILN_CODEGEN_H

#include "../plan/plan.h"

/* C and CUDA C name each dtype's types alike (<stdint.h> names; f16/bf16 compute in float
 * and are stored as 16-bit words), so both dialect tables take these; GLSL will not. */
#define CG_C_VALUE_TYPES { \
    [KILN_F32] = "float", [KILN_F64] = "double", [KILN_F16] = "float", [KILN_BF16] = "float", \
    [KILN_I64] = "int64_t", [KILN_I32] = "int32_t", [KILN_I16] = "int16_t", [KILN_I8] = "int8_t", \
    [KILN_U8] = "uint8_t", [KILN_U16] = "uint16_t", [KILN_U32] = "uint32_t", [KILN_U64] = "uint64_t", \
    [KILN_BOOL] = "uint8_t", }
#define CG_C_STORE_TYPES { \
    [KILN_F32] = "float", [KILN_F64] = "double", [KILN_F16] = "uint16_t", [KILN_BF16] = "uint16_t", \
    [KILN_I64] = "int64_t", [KILN_I32] = "int32_t", [KILN_I16] = "int16_t", [KILN_I8] = "int8_t", \
    [KILN_U8] = "uint8_t", [KILN_U16] = "uint16_t", [KILN_U32] = "uint32_t", [KILN_U64] = "uint64_t", \
    [KILN_BOOL] = "uint8_t", }

typedef struct Dialect {
  const char *name;
  const char *prelude;            /* helpers emitted once at the top of a program */
  const char *kernel_prefix;      /* before a kernel's name: "void", "extern \"C\" __global__ void" */
  const char *buf_restrict;       /* after the '*' of a buffer parameter: "restrict", "__restrict__" */
  const char *buf_const;          /* before a read-only buffer's element type: "const " */
  const char *shared_qual;        /* on-chip memory qualifier ("" where none) */
  const char *barrier;            /* block barrier statement ("" where none) */
  const char *index_type;         /* index arithmetic type: "int64_t" */
  const char *value_type[KILN_DTYPE_COUNT];   /* arithmetic type of each dtype */
  const char *store_type[KILN_DTYPE_COUNT];   /* element type in memory */
  const char *load_fn[KILN_DTYPE_COUNT];      /* memory -> value conversion ("" for none) */
  const char *store_fn[KILN_DTYPE_COUNT];     /* value -> memory conversion ("" for none) */
  const char *f32_suffix;         /* float literal suffix: "f" */
  const char *inf_f32, *inf_f64, *nan_f32, *nan_f64;
  const char *unary_f32[TU_COUNT];            /* math function per op (NULL: rendered inline) */
  const char *unary_f64[TU_COUNT];
  /* Mapping of the outer domain: loop mode (C, OpenMP) or grid mode (one thread per outer
   * point, grid-stride). */
  bool grid;
  const char *thread_index;       /* grid: first outer point of this thread */
  const char *thread_stride;      /* grid: points between this thread's iterations */
  const char *parallel_for;       /* loop: pragma before the parallel outer loop */
  long long min_parallel_work;    /* loop: points below which a kernel runs on one thread */
  const char *parallel_for_simd;  /* loop: the same for a flat loop that also vectorises */
  const char *simd;               /* loop: pragma before a vectorisable inner loop */
  const char *simd_sum;           /* loop: vectorising pragma; "%s" gets OpenMP reduction clauses */
  bool trampoline;                /* emit void kiln_eN(void *const *a) calling kernel N */
  const char *vec4_type;          /* 16-byte vector of f32 (NULL: none) */
  const char *block_bounds;       /* grid: attribute fixing a kernel's block size ("%d"), or NULL */
  bool acc_f32;                   /* f32 sums/products accumulate in f32 (not f64) */
  /* grid: block-row variant (cg_gpu_rows; 0 = the default shape). The cuda backend sets it
   * from KILN_CUDA_ROW on its own copy of cg_dialect_cuda. */
  int row_variant;
  const char *block_bounds_min;   /* grid: the same with a minimum of blocks per SM ("%d, %d") */
  const char *dyn_shared;         /* grid: declaration of the f32 dynamic shared array k_dyn */
} Dialect;

/* -- program.c: what codegen hands on (source and launch decisions, as data) -- */

/* Choices a caller makes for a program. The tool layer and the backends read the
 * environment (KILN_CUDA_ROW, KILN_CUDA_SPLITK, KILN_CUBLASLT) and set these; codegen
 * reads none of it. */
typedef enum {
  CG_SPLITK_ON,    /* split a GEMM's tiles along K when too few tiles fill the chip (default) */
  CG_SPLITK_OFF,   /* never split (KILN_CUDA_SPLITK=0) */
  CG_SPLITK_WIDE,  /* split, and prefer the largest tile whose splits still fill the chip ("wide") */
} CgSplitK;
typedef struct CgOptions {
  int row_variant;      /* cg_row_variant(); the default is the "auto" variant */
  CgSplitK splitk;      /* what KILN_CUDA_SPLITK set: default on, "0" off, "wide" */
  bool library;         /* offer plain GEMMs to a library (cuBLASLt); KILN_CUBLASLT=0 sets false */
} CgOptions;
CgOptions cg_options_default(void);   /* auto rows, split-K on, library on; reads NO environment */

/* A GEMM a library may run instead of the generated kernel (the plan part of today's CudaLtCall):
 * kiln's row-major D[m, n] (+ bias[n], relu or tanh-gelu) = sum_k A[m, k] B[k, n], per batch. */
typedef struct CgLibGemm {
  int a_stage, b_stage, d_stage, bias_stage;   /* bias_stage -1: none */
  int64_t M, N, K, batch;
  int64_t a_off, b_off, d_off, bias_off;       /* element offsets into the stages */
  int64_t lda, ldb, ldd;                       /* leading dimensions (elements) */
  int64_t a_sb, b_sb, d_sb;                    /* batch strides (elements) */
  bool a_t, b_t;                               /* A stored along m (k strided), B along k */
  bool relu, gelu;
} CgLibGemm;

typedef struct CgLaunch {
  int kernel;            /* plan kernel index (= position) */
  bool host;             /* KN_HOST: no source; the runtime evaluates it on the host (a counted fallback) */
  char name[32];         /* entry symbol: the kernel for grid dialects, the trampoline for loop dialects ("" for host) */
  int *params; int n_params;   /* stage bound to each parameter b0..b(n-1), in order (cg_kernel_params) */
  int64_t grid;          /* blocks (already capped as today at 2^20); loop dialects: 1; 0: nothing to run */
  int block;             /* threads per block; loop dialects: 1 */
  int smem;              /* dynamic shared memory bytes (a long row's cache), 0 if none */
  int smem_carveout;     /* percent of L1 as shared memory to request, 0: leave the default */
  bool library;          /* a library GEMM may replace it (lib is filled); the kernel stays as fallback */
  CgLibGemm lib;
  char why[96];          /* what was chosen and why, printable: "gemm 32x32 tiles x 4 K-spans", "block rows p16: 256 threads", ... */
} CgLaunch;

typedef struct CgProgram {
  StrBuf source;         /* the whole translation unit (prelude + every non-host kernel) */
  CgLaunch *launch; int n_launch;   /* one per plan kernel, plan order */
  Arena arena;           /* params arrays etc. */
} CgProgram;
/* Renders the plan in dialect d under options o (NULL: cg_options_default) and decides every
 * kernel's launch. The source is exactly cg_render_plan_opt's. */
kiln_status cg_program_build(const Plan *p, const Dialect *d, const CgOptions *o, CgProgram **out);
void cg_program_free(CgProgram *g);   /* NULL: nothing */
void cg_program_print(const CgProgram *g, FILE *f);   /* one line per launch: kernel, name, grid x block, smem, library, why */

/* Transitional: the calls of the runtime written before CgProgram, kept source-compatible
 * until it moves to cg_program_build. Each takes its options as that runtime did: the row
 * variant from Dialect.row_variant and split-K from KILN_CUDA_SPLITK (the one environment
 * read left in codegen; it goes with these wrappers). */
CgOptions cg_options_legacy(const Dialect *d);

/* -- dialect_c.c -- */

extern const Dialect cg_dialect_c;

/* -- dialect_cuda.c -- */

extern const Dialect cg_dialect_cuda;

/* -- render.c -- */

/* Parameters of kernel k in order: inputs, then stored items. Returns the count; stages
 * gets the stage of each (room for k->n_ins + k->n_items). */
int cg_kernel_params(const Plan *p, const Kernel *k, int *stages);
/* Name of kernel k's function ("kiln_k3") and of its trampoline ("kiln_e3"). */
void cg_kernel_name(int k, bool trampoline, char buf[32]);
/* Source of one kernel (appended to out). */
kiln_status cg_render_kernel(const Plan *p, int k, const Dialect *d, const CgOptions *o, StrBuf *out);
/* Prelude and every non-host kernel of the plan, as one translation unit. */
kiln_status cg_render_plan_opt(const Plan *p, const Dialect *d, const CgOptions *o, StrBuf *out);
kiln_status cg_render_plan(const Plan *p, const Dialect *d, StrBuf *out);   /* transitional: cg_options_legacy */
/* How a grid dialect maps kernel k (the backend sizes its launch from it):
 * POINTS one thread per outer point, grid-stride; VEC4 four points per thread, 16-byte f32
 * vectors (outer_numel/4 threads' worth); BLOCK_ROWS one block per outer point, any block
 * size that is a multiple of 32, up to 1024. */
typedef enum { CG_GPU_POINTS, CG_GPU_VEC4, CG_GPU_BLOCK_ROWS, CG_GPU_GEMM } CgGpuShape;
CgGpuShape cg_gpu_shape_opt(const Plan *p, const Kernel *k, const CgOptions *o);
CgGpuShape cg_gpu_shape(const Plan *p, const Kernel *k);   /* transitional: cg_options_legacy(NULL) */
/* The shape kernel k is rendered with in dialect d: cg_gpu_shape_opt where the dialect has
 * the means (VEC4 needs a vector type), CG_GPU_POINTS for loop dialects. */
CgGpuShape cg_kernel_shape(const Plan *p, const Kernel *k, const Dialect *d, const CgOptions *o);
/* BLOCK_ROWS: the block size the kernel was rendered for (launch exactly this many threads). */
int cg_gpu_block(const Kernel *k);
/* BLOCK_ROWS under a row variant: `threads` per row (a power of two, 32..1024), `rows` rows
 * per block (threads * rows <= 1024; > 1 only with 32 threads, one warp per row, reduced
 * with shuffles alone), `vec` 4 when the row's flat f32 loads and stores go as 16-byte
 * vectors (a thread's points then come in runs of 4). Variants (cg_row_variant parses):
 *   0 base   ~8 points per thread, one row per block (cg_gpu_block)
 *   1 warp   rows of <= 1024 points: one warp per row, 8 rows per block; longer rows as base
 *   2 vec    base block sizes, 16-byte loads/stores where the row allows
 *   3 wvec   warp, and vec for the rows it leaves to blocks and for its own rows
 *   4 p16    ~16 points per thread (blocks half the size of base)
 *   5 p16vec p16 and vec
 *   6 long   base, and rows of 16K..32K points (1024 threads, 17..32 points each) keep
 *            only their loads, the first `reg_points` of each thread in registers and the
 *            rest in dynamic shared memory (`smem` bytes), so that two blocks fit an SM
 *            (`min_blocks`): 256 rows of 32768 run in one wave instead of two
 *   7 wveclong  wvec, and long rows as long
 *   8 auto   the default (KILN_CUDA_ROW unset): per row length, the race's winner (render.c) */
typedef struct CgRows { int threads, rows, vec, reg_points, smem, min_blocks; } CgRows;
enum { CG_ROW_VARIANTS = 9 };
CgRows cg_gpu_rows(const Kernel *k, int variant);
/* The concrete variant (never auto) that cg_gpu_rows uses for kernel k. */
int cg_row_variant_resolve(const Kernel *k, int variant);
/* Variant number of a name ("base", "warp", ...; NULL or "" is auto), -1 if unknown; and the
 * name of a number. */
int cg_row_variant(const char *name);
const char *cg_row_variant_name(int variant);

/* -- gemm_cuda.c: the tiled contraction shape (CG_GPU_GEMM) of a grid dialect --
 * A reduce-sum kernel whose accumulated body is a product of two factors, one free of
 * some outer vars (M), the other free of others (N), both possibly sharing batch vars:
 * matmul, batched matmul, conv as implicit GEMM. Each block computes one BM x BN tile of
 * one batch point, staging both factors through shared memory (read through their own
 * index maps: transposes, broadcasts, padding), then runs the kernel's epilogue items on
 * each of its outputs. */
enum { CG_GEMM_THREADS = 256 };
typedef struct CgGemm {
  const Expr *a, *b;               /* the two factors (A: no N var, B: no M var) */
  int role[KILN_MAX_RANK];         /* per outer var: 0 batch, 1 M, 2 N */
  int64_t M, N, K, batch;
  int bm, bn, bk, tm, tn;          /* tile and per-thread sub-tile */
  bool a_kfast, b_kfast;           /* global reads of a tile run along k (else along m / n) */
  int acc_item;                    /* index of the IT_ACC item */
  int splits;                      /* split-K: blocks per tile, each over kspan points of K */
  int64_t kspan;                   /* (a multiple of bk; 1 split: kspan >= K) */
} CgGemm;
/* Does kernel k take the tiled shape under options o (split-K)? Fills g (may be NULL) when
 * it does. */
bool cg_gemm_match_opt(const Plan *p, const Kernel *k, const CgOptions *o, CgGemm *g);
bool cg_gemm_match(const Plan *p, const Kernel *k, CgGemm *g);   /* transitional: cg_options_legacy(NULL) */
/* Blocks to launch (CG_GEMM_THREADS threads each). */
int64_t cg_gemm_blocks(const CgGemm *g);
/* Module-scope declarations kernel ki's GEMM needs before its function (split-K: the
 * partial tiles and per-tile arrival counts); nothing when it does not split. */
void cg_gemm_globals(const CgGemm *g, int ki, StrBuf *out);
/* What the renderer lends gemm_cuda.c: text lines at its indent, expressions emitted as
 * locals (memoised inside push/pop scopes), and the kernel's epilogue items of a step
 * with the accumulator's value given as text. */
typedef struct CgEmit {
  void *r;
  void (*put)(void *r, const char *line);
  void (*indent)(void *r, int delta);
  void (*emit)(void *r, const Expr *e, char *out, size_t n);
  void (*push)(void *r);
  void (*pop)(void *r);
  void (*items)(void *r, int step, const char *acc);
} CgEmit;
void cg_render_gemm(const Plan *p, const Kernel *k, const CgGemm *g, const CgEmit *em);

/* -- library.c: which GEMMs a library (cuBLASLt) may run -- */

/* Does kernel k (a CG_GPU_GEMM kernel under o) run as a library GEMM? The cost rule
 * (M*N*K*batch >= 2^26), operands affine in m, n, k and batch, one stored result with an
 * optional bias[n] and relu or tanh GELU. Fills c when it does. */
bool cg_library_match(const Plan *p, const Kernel *k, const CgOptions *o, CgLibGemm *c);

#endif
