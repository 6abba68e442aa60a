/*
 * codegen — the fourth stage. Takes a Plan, hands on a CgProgram (program.c): the kernel
 * source text in a dialect, and each kernel's launch as data (grid, block, shared memory,
 * a library GEMM that may replace it), so a backend applies decisions and derives none.
 * One renderer (render.c) holds the algorithms: loops over the outer and inner domains,
 * accumulators, the row-of-accumulators contraction loop, each Expr node emitted once as
 * a local; the GEMM tile (gemm.c) is one of those algorithms. A dialect is a table of
 * strings (below); C, CUDA C and GLSL differ only there (tests/codegen/test_toy_dialect.c
 * renders everything through a third, made-up table). Kernel parameters are numbered
 * buffers b0, b1, ... (the kernel's inputs, then its stored stages); locals are numbered
 * too, so no name from a model ever reaches generated source.
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
/* ... and their limits by the <stdint.h> names (the CUDA prelude defines them). */
#define CG_C_INT_MIN { \
    [KILN_I64] = "INT64_MIN", [KILN_I32] = "INT32_MIN", [KILN_I16] = "INT16_MIN", [KILN_I8] = "INT8_MIN", }
#define CG_C_INT_MAX { \
    [KILN_I64] = "INT64_MAX", [KILN_I32] = "INT32_MAX", [KILN_I16] = "INT16_MAX", [KILN_I8] = "INT8_MAX", \
    [KILN_U8] = "UINT8_MAX", [KILN_U16] = "UINT16_MAX", [KILN_U32] = "UINT32_MAX", [KILN_U64] = "UINT64_MAX", \
    [KILN_BOOL] = "1", }
/* Float operators that C and CUDA C write as calls (the k_ ones are the preludes'). */
#define CG_C_BINARY_F32 { [TB_POW] = "powf", [TB_MAX] = "k_maxf", [TB_MIN] = "k_minf", [TB_MOD] = "k_modf", \
                          [TB_FMOD] = "fmodf", }
#define CG_C_BINARY_F64 { [TB_POW] = "pow", [TB_MAX] = "k_maxd", [TB_MIN] = "k_mind", [TB_MOD] = "k_modd", \
                          [TB_FMOD] = "fmod", }
/* Their math functions, the four that differ named by each dialect (exp, tanh, erf, round). */
#define CG_C_UNARY_F32(exp, tanh, erf, round) { \
    [TU_ABS] = "fabsf", [TU_EXP] = exp, [TU_LOG] = "logf", [TU_SQRT] = "sqrtf", [TU_TANH] = tanh, \
    [TU_SIGMOID] = "k_sigf", [TU_ERF] = erf, [TU_SIN] = "sinf", [TU_COS] = "cosf", [TU_FLOOR] = "floorf", \
    [TU_CEIL] = "ceilf", [TU_ROUND] = round, [TU_SIGN] = "k_signf", [TU_ISINF] = "isinf", }
#define CG_C_UNARY_F64(round) { \
    [TU_ABS] = "fabs", [TU_EXP] = "exp", [TU_LOG] = "log", [TU_SQRT] = "sqrt", [TU_TANH] = "tanh", \
    [TU_SIGMOID] = "k_sigd", [TU_ERF] = "erf", [TU_SIN] = "sin", [TU_COS] = "cos", [TU_FLOOR] = "floor", \
    [TU_CEIL] = "ceil", [TU_ROUND] = round, [TU_SIGN] = "k_signd", [TU_ISINF] = "isinf", }
/* What C and CUDA C share of a Dialect (tinygrad's CStyleLanguage): the types, literals,
 * half-float helpers, float operators and buffer parameters. Each table adds its own. */
#define CG_C_FAMILY \
  .index_type = "int64_t", .value_type = CG_C_VALUE_TYPES, .store_type = CG_C_STORE_TYPES, \
  .load_fn = { [KILN_F16] = "k_h2f", [KILN_BF16] = "k_b2f" }, .store_fn = { [KILN_F16] = "k_f2h", [KILN_BF16] = "k_f2b" }, \
  .round_fn = { [KILN_F16] = "k_rh", [KILN_BF16] = "k_rb" }, .int_lit = "INT64_C(%lld)", .int_min = CG_C_INT_MIN, \
  .int_max = CG_C_INT_MAX, .float_lit = "%a", .f32_suffix = "f", .uint_suffix = "u", .binary_f32 = CG_C_BINARY_F32, \
  .binary_f64 = CG_C_BINARY_F64, .buf_param = "%s%s *%s b%d", .buf_const = "const "

/* The tensor-core operand kinds of a GEMM tile (CgGemm.mma): none (f32 FMA), bf16 or f16 operands
 * (m16n8k16), f32 operands rounded to TF32 (m16n8k8); the accumulation is f32 in each. */
typedef enum { CG_MMA_NONE, CG_MMA_BF16, CG_MMA_F16, CG_MMA_TF32, CG_MMA_COUNT } CgMma;

/*
 * A dialect: every token of generated source that differs between targets. The renderer
 * writes the algorithms once in the expression syntax C, CUDA C and their kin share
 * (operators, (T)x casts, pointers and arrays, blocks, for/if, comments) and takes
 * everything else from here. A field documented as a printf format gets exactly the
 * arguments listed, in order. NULL or "" where a dialect has no such thing, as noted.
 *
 * The prelude defines, besides what the dialect's own names need, the scalar helpers with
 * te_eval_* semantics that the renderer calls by their kiln names: k_sdiv k_sfdiv k_smod
 * k_sfmod k_udiv k_umod k_spow k_upow k_sshl k_sshr k_ushl k_ushr (integer ops), k_f2s
 * k_f2u (saturating float->int casts); grid dialects also the block and warp reductions
 * named below.
 */
typedef struct Dialect {
  const char *name;
  /* Emitted once at the top of a program, in this order (NULL: nothing): what the shared
   * scalar helpers need (kiln_scalar_c_head, kiln_scalar_cuda_head), the shared helpers
   * themselves (kiln_scalar_source, src/base/scalar.inc: te_eval_*'s semantics, once),
   * the vectorisable f32 functions (C: kiln_vmath_c_source, src/base/vmath.inc; NULL: none),
   * then the dialect's own helpers. */
  const char *prelude_head;
  const char *prelude_scalar;
  const char *prelude_math;
  const char *prelude;

  /* -- types and literals -- */
  const char *index_type;         /* index arithmetic (i64) type: "int64_t" */
  const char *index32_type;       /* 32-bit type for index math proven in range ("int"; NULL: all in index_type) */
  const char *local_subscript;    /* a local array's subscript from an index_type value, "int(%s)" (GLSL
                                     takes no 64-bit subscript); NULL: as it is */
  const char *value_type[KILN_DTYPE_COUNT];   /* arithmetic type of each dtype */
  const char *store_type[KILN_DTYPE_COUNT];   /* element type in memory */
  const char *load_fn[KILN_DTYPE_COUNT];      /* memory -> value conversion (NULL for none) */
  const char *store_fn[KILN_DTYPE_COUNT];     /* value -> memory conversion (NULL for none) */
  const char *store_unrounded_fn[KILN_DTYPE_COUNT]; /* the same bits by a faster conversion, for values not
                                                  rounded before (excess precision); NULL: store_fn */
  const char *round_fn[KILN_DTYPE_COUNT];     /* f16/bf16: a float rounded to the dtype ("k_rh") */
  const char *int_lit;            /* format of an i64 literal; %lld: the value. "INT64_C(%lld)" */
  const char *int_min[KILN_DTYPE_COUNT];      /* smallest value of a signed integer dtype, by name */
  const char *int_max[KILN_DTYPE_COUNT];      /* largest value of an integer dtype (bool: "1") */
  const char *float_lit;          /* format of a finite float literal; %a: the value as a double */
  const char *f32_suffix;         /* after an f32 literal: "f" */
  const char *uint_suffix;        /* after an unsigned literal (split-K arrival counts): "u" */
  const char *inf_f32, *inf_f64, *nan_f32, *nan_f64;
  const char *f64_suffix;         /* after an f64 literal (NULL: none; GLSL's unsuffixed literals are f32) */
  const char *cast;               /* a conversion; %s type, %s value (NULL: C's "(%s)%s") */
  const char *float_qual;         /* before a float local's declaration: no contraction, no unsafe algebra
                                   * (GLSL "precise ": the strict f32 the other dialects get; NULL: none) */
  const char *widen_i32;          /* i32 to i64 where cast's form is not trusted; %s the value, twice (NULL: cast) */
  const char *isnan;              /* a NaN test of %s where x != x is not trusted (NULL: x != x) */
  const char *widen_f32;          /* f32 to f64 where a subnormal may be flushed on the way; %s the value
                                   * (NULL: cast) */
  const char *widen_index;        /* a 32-bit index known >= 0 to index_type, %s the value (zero-extended
                                   * where sign extension is not trusted; NULL: implicit) */
  bool bool_type;                 /* bool is a type of its own (GLSL): comparisons are not ints, and bools
                                   * take no integer operators, so bool ops and flags are spelled apart */

  /* -- math -- */
  const char *unary_f32[TU_COUNT];            /* function per op (NULL: rendered inline); ISINF */
  const char *unary_f64[TU_COUNT];            /* is a predicate, written (fn(x) != 0) */
  const char *binary_f32[TB_COUNT];           /* POW MAX MIN MOD FMOD as calls fn(a, b) */
  const char *binary_f64[TB_COUNT];
  bool acc_f32;                   /* f32 sums/products accumulate in f32 (not f64) */
  bool int_to_float_direct;       /* integers of up to 32 bits become f32 (f16, bf16) directly, not through
                                     f64: the same value (they are exact in f64, so one rounding either way),
                                     and no f64 for a device that may lack it (glsl) */

  /* -- kernel signatures -- */
  const char *kernel_prefix;      /* before a kernel's name: "void", "extern \"C\" __global__ void" */
  const char *buf_param;          /* a buffer parameter; %s const qualifier (buf_const or ""), %s element
                                   * type, %s buf_restrict, %d parameter number: "%s%s *%s b%d" */
  const char *buf_restrict;       /* "restrict", "__restrict__" */
  const char *buf_const;          /* on a read-only buffer: "const " */
  const char *elem;               /* an element of a buffer parameter; %d parameter, %s index (NULL: "b%d[%s]") */
  /* shader dialects: a compiled module holds one kernel and its entry (NULL kernel_begin: none).
   * kernel_begin (%d the kernel's number) opens the kernel's part of the source, kernel_end
   * closes it after the entry; the entry is `entry` (%s the kernel's name), entry_arg per
   * parameter (%s element type, %d parameter number; ", " between) and entry_end. */
  const char *kernel_begin, *kernel_end, *entry, *entry_arg, *entry_end;
  /* ... and entry_arg_direct (the same arguments) for a kernel of at most direct_args
   * parameters: their addresses pushed with the launch itself, no table to read first (the
   * runtime pushes them in exactly that case) */
  const char *entry_arg_direct;
  int direct_args;
  /* loop dialects: an entry of one signature for every kernel, calling it with its buffers
   * from an array and its thread's place in the team (NULL trampoline: none). %s entry name,
   * %s kernel name; then trampoline_arg per parameter (%d its number, ", " between) and
   * trampoline_end. */
  const char *trampoline, *trampoline_arg, *trampoline_end;

  /* -- loop dialects: the outer domain as a loop over a thread's share -- */
  /* Every thread of the runtime's team calls a kernel (the threads kiln_tid = 0 .. kiln_nt - 1,
   * team_params after its buffers); each runs its own share of the outer loop (cg_team_for),
   * and the runtime waits for them all between kernels. */
  const char *team_params;
  long long min_parallel_work;    /* points below which a kernel runs on one thread */
  const char *simd;               /* pragma before a vectorisable inner loop */
  const char *simd_len;           /* the same asking for vectors of %d lanes (NULL: simd) */
  const char *tile;               /* loop dialects: the prelude's register tile (cpu_tile.c renders calls to
                                     it with its KILN_MR x KILN_NR shape); NULL: none */
  const char *tile_apart;         /* the tile as a function of its own, never inlined (NULL: tile) */
  const char *tile_rows;          /* the same tile reading its KILN_MR rows in place from an array of row
                                     pointers, contiguous along k (NULL: rows are always packed) */
  const char *array_align;        /* after a local array's declarator: its alignment for vector loops
                                     (GCC's vector code for one assumed 16 bytes the stack did not give) */
  const char *simd_sum;           /* vectorising pragma of a reduction loop; %s its reduction clauses */
  const char *simd_reduce;        /* one reduction clause; %s operator, %s variable: " reduction(%s:%s)" */
  const char *simd_reduce_op[RO_ARGMIN + 1];  /* the clause's operator per reduction (NULL: no clause) */
  const char *simd_reduce_or;     /* the operator of a NaN flag's clause: "|" */

  /* -- grid dialects: one thread per outer point, blocks of threads -- */
  bool grid;
  const char *thread_index;       /* first outer point of this thread (an index_type expression) */
  const char *thread_stride;      /* points between this thread's iterations */
  const char *thread_id;          /* this thread's index in its block: "threadIdx.x" */
  const char *block_id;           /* this block's index in the grid: "blockIdx.x" */
  const char *block_size;         /* threads per block: "blockDim.x" */
  const char *grid_size;          /* blocks in the grid: "gridDim.x" */
  const char *block_bounds;       /* attribute fixing a kernel's block size; %d threads (NULL: none) */
  const char *block_bounds_min;   /* the same with a minimum of resident blocks; %d threads, %d blocks */
  const char *shared_qual;        /* on-chip (block-shared) memory declaration qualifier: "__shared__" */
  bool shared_at_module;          /* shared arrays are declared at module scope, before the kernel's function
                                   * (GLSL: not inside a function); else at the top of its body */
  bool no_views;                  /* no pointers: an array cannot be read through a view of another shape
                                   * (GLSL), so no GEMM k groups (their tiles are vectors read as floats) */
  const char *thread_int;         /* thread_id as an int (NULL: thread_id converts implicitly) */
  const char *global_qual;        /* module-scope device array qualifier: "__device__" */
  const char *dyn_shared;         /* declaration of the f32 dynamic shared array named dyn_shared_name */
  const char *dyn_shared_name;    /* "k_dyn" */
  const char *barrier;            /* block barrier statement: "__syncthreads();" */
  const char *warp_barrier;       /* the same for one warp: "__syncwarp();" (NULL: none; a pair's tail needs it) */
  const char *fence;              /* device-wide memory fence statement: "__threadfence();" */
  const char *atomic_add;         /* returns the old value; %s the lvalue, %s the addend: "atomicAdd(&%s, %s)" */
  const char *counter_type;       /* type atomic_add counts in: "unsigned int" */
  const char *atomic_add_acq_rel; /* atomic_add with acquire and release semantics at device scope (NULL: none) */
  const char *cached_load;        /* an f32 load past the incoherent caches; %s the address: "__ldcg(%s)" */
  const char *fma;                /* f32 a * b + c, one rounding; %s a, %s b, %s c: "__fmaf_rn(%s, %s, %s)" */
  /* warp-level matrix multiply-accumulate per CgMma kind (NULL: none): a function of
   * (float &c0, &c1, &c2, &c3, unsigned a0, a1, a2, a3, b0, b1) adding A (16 x k) times B (k x 8)
   * into the warp's 16 x 8 f32 tile, PTX's mma.sync fragment layouts (k 16: 16-bit pairs; k 8:
   * TF32); the shared tile element type, and the conversion (%s an f32 value) of an operand value
   * into it (the value is exact in bf16/f16 for those kinds; TF32 rounds); mma_round the same
   * conversion of any f32 value, rounded to nearest even as a cast to the 16-bit type does */
  const char *mma[CG_MMA_COUNT];
  const char *mma_elem[CG_MMA_COUNT];
  const char *mma_stash[CG_MMA_COUNT];
  const char *mma_round[CG_MMA_COUNT];
  /* 16-bit mma operands read straight into shared memory (NULL cp_async: none): cp_async(void *dst,
   * const void *src, bool in) copies 16 bytes, zeros where !in, asynchronously; cp_commit() closes
   * a group of them, cp_wait (%d: n) waits for all groups but the last n, cp_wait0 for all;
   * ldmatrix[t] (t: 0 x2, 1 x2 transposed, 2 x4, 3 x4 transposed) loads 2 or 4 8 x 8 matrices of
   * 16-bit values from shared memory into fragment registers (unsigned &r0, ..., const void *row
   * address of this lane) */
  const char *cp_async, *cp_commit, *cp_wait, *cp_wait0, *ldmatrix[4];
  /* Hopper's warpgroup MMA (NULL: none; the program is built for sm_90a where its source holds one):
   * writes the module-scope helpers once (k_wg_fence, k_wg_commit, k_wg_wait<N>, k_fence_async,
   * k_wg_desc(shared address, LBO, SBO) for 128-byte swizzled tiles) and the product of one
   * m64nNk16 shape, k_wgmma_<kind>_<n>_<ta><tb>(float *acc, desc a, desc b): acc's n / 2 values in
   * wgmma's order, A and B K-major (0) or M / N-major (1) */
  void (*wgmma_define)(StrBuf *out, int n, CgMma kind, bool trans_a, bool trans_b);
  const char *unroll;             /* pragma before a loop to unroll fully: "#pragma unroll" */
  const char *vec4_type;          /* 16-byte vector of f32 (NULL: none, no VEC4 shape) */
  const char *vec4_lane[4];       /* the lanes' access suffixes: ".x", ".y", ".z", ".w" */
  const char *vec4_load;          /* a vector read; %d parameter number, %s vector index:
                                   * "((const float4 *)b%d)[%s]" */
  const char *vec4_store;         /* a vector write statement; %d parameter, %s index, %s value */
  const char *vec4h_type;         /* 8-byte vector of four f16 or bf16 values (NULL: 16-bit rows read a
                                   * value at a time) */
  const char *vec4h_load;         /* its read: %d parameter number, %s vector index */
  const char *vec4h_lane[4];      /* lane l's 16 bits (a uint16_t) of the vector named by %s */
  const char *vec4h_store;        /* its write statement: %d parameter, %s index, %s value (NULL: 16-bit
                                   * rows stored a value at a time) */
  const char *vec4h_set[4];       /* lane l of the vector named by the first %s set to the 16 bits of the
                                   * second, lanes in order (lane 0 and 2 assign, 1 and 3 or in) */
  const char *block_reduce;       /* T block_reduce(T v, op): every thread of the block gets op over all */
  const char *warp_reduce;        /* the same over a warp of 32 */
  const char *quad_keys_reduce;   /* ... and then over the quads of the same lanes in W warps (a format of W),
                                   * through shared memory (NULL: none; a chain's keys split over warps) */
  const char *quad_reduce;        /* the same over a quad of lanes 4r .. 4r + 3 (NULL: none; an mma
                                   * chain's rows in fragments, cg_chain_mma) */
  const char *group_reduce;       /* the same over W consecutive lanes (%d: W, a power of two 2 .. 32), every
                                   * lane ending with its group's first lane's value (NULL: none; banded
                                   * pairs' rows) */
  const char *block_reduce_arg;   /* int64 block_reduce_arg(T v, int64 i, int max, int last): the index */
  const char *warp_reduce_arg;
  const char *reduce_op[RO_MIN + 1];          /* op argument of block/warp_reduce: "k_add()" ... */

  /* -- launch groups (grid dialects; NULL: the dialect has none) -- */
  const char *phase_prefix;       /* before a phase's device function: "static __device__ __forceinline__ void" */
  const char *phase_thread_index; /* thread_index over the virtual block k_bid: "((int64_t)k_bid * blockDim.x + threadIdx.x)" */
  const char *phase_thread_stride;/* thread_stride over k_nbid virtual blocks */
  const char *kernel_entry;       /* first statement of every kernel (NULL: none): wait for the kernel before it
                                   * to complete, and let the one after launch (programmatic dependent launch;
                                   * a no-op when the launch was not made so) */
  const char *kernel_entry_wait;  /* ... that waits and lets the one after launch only as its blocks exit */
  const char *grid_barrier;       /* statement waiting for every block; %s the group's barrier array:
                                   * "k_grid_sync(%s);" (the prelude defines it) */
  const char *band_barrier;       /* ... waiting for %s (the second) blocks, all resident, at the barrier array %s
                                   * (the first), the same two words (NULL: none) */
  const char *band_meet;          /* a meeting of blocks by flags: the flags %s, this block's %s of %s (the flag's
                                   * index, the blocks); they only grow (NULL: none) */
  const char *band_arrive;        /* the block's writes released and counted in at the count %s (NULL: none) */
  const char *band_wait;          /* waiting until the count %s reaches %s, then counted out at the second count %s
                                   * of %s waiters, the last putting both back to 0 (NULL: none) */
  const char *flag_done;          /* the block's writes released with its flag %s of the flags %s... here the flags
                                   * %s and its index %s moved on, nothing waited for (with band_meet) */
  /* thread-block clusters (NULL: none): the kernel attribute fixing a 1-D cluster of %d blocks,
   * the helpers' definitions (module scope, once), a barrier of the cluster's blocks that also
   * orders their shared memory, and a load of float *%s in the shared memory of cluster block %s */
  const char *cluster_dims, *cluster_helpers, *cluster_sync, *cluster_load;
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
/* Launch groups (KILN_GRID_SYNC): consecutive kernels of a grid dialect joined into one launch.
 * Within a group, kernels with no buffer in conflict (nothing one writes is read or written by
 * another) share a phase: their blocks are one range of the launch. Dependent kernels go to a
 * later phase, behind a grid-wide barrier (cooperative: every block resident). */
typedef enum {
  CG_GROUP_OFF,          /* one launch per kernel */
  CG_GROUP_SIBLINGS,     /* independent neighbours share a launch; a dependence ends the group */
  CG_GROUP_GRID_SYNC,    /* dependent phases too, across grid barriers, in one cooperative launch */
  CG_GROUP_BANDS,        /* as GRID_SYNC, but a phase of GEMM tiles that reads the phases before it only in its
                            own band of rows waits for that band of the phase before, not for the grid
                            (CgLaunch.band_waits) */
} CgGroupMode;
typedef struct CgOptions {
  int row_variant;      /* cg_row_variant(); the default is the "auto" variant */
  bool warp_rows;       /* a warp per row is renderable (the dialect has warp reductions); else the
                           variants that ask for one take a block per row (cg_row_variant_of) */
  bool smem_rows;       /* long rows may keep part of themselves in dynamic shared memory */
  int column_rows;      /* block rows whose inner loop reads only across rows take 2 points a thread, up to
                           1024 threads (1) or up to 256 (2: a launch group's block size, so that such a
                           kernel may share one); 0 off (render.c column_rows; kiln_options.column_rows) */
  CgSplitK splitk;      /* what KILN_CUDA_SPLITK set: default on, "0" off, "wide" */
  bool library;         /* offer plain GEMMs to a library (cuBLASLt); KILN_CUBLASLT=0 sets false */
  bool library_all;     /* with library: every plain GEMM, whatever the cost rule says (KILN_CUBLASLT=2, a race) */
  double library_work;  /* the cost rule: multiply-adds from which the library runs a GEMM (0: PLAN_LIBRARY_WORK) */
  bool loop_library;    /* loop dialects (cpu): offer plain GEMMs to the backend's library too, matched by
                           their structure alone (cg_gemm_match skips the GPU tile rules) */
  CgGroupMode group;    /* KILN_GRID_SYNC: 0 off, 1 siblings, 2 grid sync */
  bool in_place;        /* store an assigned value straight into its param where that is safe (KILN_IN_PLACE) */
  bool index32;         /* 32-bit index math where proven in range, in dialects with index32_type (KILN_INDEX32) */
  bool lazy_select;     /* grid dialects: a select's branch that reads memory only when taken (KILN_LAZY_SELECT) */
  int dependent_launch; /* kernels start with the dialect's kernel_entry (1), or its kernel_entry_wait (2)
                           (KILN_CUDA_PDL) */
  /* two-phase rows: kernels of fewer rows than split_rows_below, split so that about split_blocks
   * blocks run in all (KILN_CUDA_SPLIT_ROWS, KILN_CUDA_SPLIT_BLOCKS; the H200 race chose 512 and
   * 576, about 4 blocks of 256 threads a multiprocessor: cnn_train_b32 0.932 against 128 and 256) */
  int split_rows_below;
  int split_blocks;
  bool cluster_splitk;  /* split-K through thread-block clusters where the spans fit one (KILN_CUDA_CLUSTER) */
  int min_span_tiles;   /* split-K: a span at least this many k-tiles (0: gemm.c's MIN_SPAN_TILES, 2;
                           kiln_options.cuda_min_span) */
  bool nan_fold;        /* grid dialects: a max or min row's NaN flag folded into its value before the row's one
                           reduction (block_combine; kiln_options.nan_fold) */
  bool excess_precision; /* an f16/bf16 operation's result kept unrounded in its f32 variable: only an explicit
                           cast (EX_CAST op 1) rounds in the kernel, stores round, 16-bit mma operands are
                           rounded at the stash (kiln_options.excess_precision) */
  bool row_values;      /* block rows keep whole values for their later loops (render.c row_cache_values;
                           kiln_options.row_values) */
  int row_fill;         /* block rows of a block a row widen their blocks until the grid holds this many warps
                           (0 off; cg_rows_of; kiln_options.cuda_row_fill) */
  bool row_half;        /* the auto variant reads rows of bf16/f16 tensors as vectors (p16 -> p16vec;
                           cg_row_variant_of; kiln_options.cuda_row_half) */
  int split_target;     /* split-K: the blocks a GEMM of too few tiles splits towards (0: gemm.c's 2 x
                           ENOUGH_BLOCKS; kiln_options.cuda_split_target) */
  int thin_spans;       /* split-K: a product of too few tiles for split-K by the usual rule, over a long
                           reduction, takes one 32x32 tile split into up to this many spans rather than block
                           rows (0 off; kiln_options.cuda_thin_spans) */
  bool split_flags;     /* split-K tiles: the last span adds the others' partials once their flags say so (the
                           dialect's flag_done and band_meet), where the last block to arrive at a count
                           did (kiln_options.cuda_split_flags; the same bits) */
  int one_fence;        /* arrival counts: 1 the first thread fences around its count, after the block's
                           barrier, instead of every thread before it and after (0); 2 its count is one
                           acquire-release atomic, no fence (the dialect's atomic_add_acq_rel; else as 1)
                           (cg_arrival_lines) */
  bool cpu_tiles;       /* loop dialects: contractions as register tiles over packed panels (cpu_tile.c;
                           KILN_CPU_TILES) */
  bool cpu_windows;     /* loop dialects: small windows along a long last dim with a register sum a point
                           (render.c's render_window; KILN_CPU_WINDOWS) */
  int cpu_lanes;        /* loop dialects: f32 lanes of the host's vectors (16 AVX-512, 8 AVX2; 0: none known,
                           or KILN_CPU_DIRECT=0): convolutions run direct (cpu_direct.c) blocked for them */
  bool cpu_rows_only;   /* loop dialects: direct convolutions never in flat planes (KILN_CPU_DIRECT=2) */
  bool cpu_expand_all;  /* loop dialects: expansions join their windows whatever their size (KILN_CPU_EXPAND=2) */
  int cpu_channel_lanes; /* loop dialects: direct convolutions with constant weights run with output channels
                           along the vectors, 1 where the cost model says, 2 wherever they can, 0 never */
  bool cpu_run_ends;    /* loop dialects: a window's runs of stride 1 copied between their guard's ends, the guard
                           not tested on every lane (CgCpuTile.cols_ends; kiln_options.cpu_run_ends) */
  bool cpu_cols_once;   /* loop dialects: register tiles lay a constant column operand out once
                           (CgCpuTile.cols_once; kiln_options.cpu_cols_once) */
  int cpu_winograd;     /* loop dialects: 3 x 3 convolutions in channel lanes as Winograd's F(2x2, 3x3)
                           (CgCpuDirect.winograd; kiln_options.cpu_winograd): 0 never, 1 by cost, 2 always */
  bool cpu_split_digits; /* loop dialects: register tiles pack a reduction var that an operand reads apart by
                           constant divisors over its digits (CgCpuTile.split_digits; kiln_options.cpu_split_digits) */
  bool cpu_nested_sums; /* loop dialects: the generic form's sums nest their leading reduction vars as loops
                           (render.c nested_sums; kiln_options.cpu_nested_sums) */
  bool cpu_pixel_panels; /* loop dialects: a 1 x 1 convolution in channel lanes reads panels of its tasks'
                           pixels (CgCpuDirect.panel; kiln_options.cpu_pixel_panels) */
  bool mma_half;        /* GEMM tiles: contractions of bf16/f16 operands on the dialect's mma (tensor cores) */
  bool mma_tf32;        /* ... and of f32 operands, rounded to TF32 (kiln_options.tf32) */
  int chain_mma;        /* attention chains of 16-bit values: both products on the mma where mma_half allows
                           (cg_chain_mma; kiln_options.cuda_chain_mma): 0 never, 1 the rows in shared
                           memory, 2 each warp's rows in its mma fragments (CG_CHAIN_FRAGS), 3 and 4 each
                           tile's keys over 2 and 4 warps (CG_CHAIN_FRAGS2, CG_CHAIN_FRAGS4) */
  bool mma_many_blocks; /* ... their tiles picked for about four blocks a multiprocessor, not one as the f32
                           tiles are (kiln_options.tensor_cores 3: raced, slower on the H200) */
  int mma_small_k;      /* ... the k-tile of a 32x32 mma tile through registers (kiln_options.cuda_mma_k:
                           32, 64 or 128; 0 is 32) */
  int gemm_small_k;     /* GEMM tiles: contractions over fewer points run a thread an output (0: fewer than 4;
                           kiln_options.cuda_small_k) */
  bool gemm_tile_fit;   /* ... f32 tiles more than half padding along M or N step down while that wastes less
                           (kiln_options.cuda_tile_fit) */
  int gemm_long_k_blocks; /* ... 32x32 tiles over at least 16 k-tiles, fewer than this many, split along K towards
                           it (0: only below a block a multiprocessor, as always); kiln_options.cuda_long_k_blocks */
  bool mma_round_late;  /* ... f32 values rounded to their 16-bit type read unrounded, rounded at the stash
                           (CgGemm.a_round; kiln_options.cuda_mma_late_round) */
  bool mma_direct;      /* ... 16-bit operands that are plain affine loads read straight into shared memory
                           (CgGemm.direct; kiln_options.tensor_cores 2: through registers like any operand) */
  bool wgmma;           /* ... and those on the dialect's warpgroup MMA (CgGemm.wgmma; kiln_options.cuda_wgmma) */
  bool gemm_kgroups;    /* GEMM tiles: 32x32 tiles in k groups (a dialect with views of arrays); else 2x2
                           outputs a thread over whole k-tiles */
  int gemm_heads;       /* rows at the head of their contraction's tiles (cg_gemm_head_ok;
                           kiln_options.gemm_heads): 0 never, 1 on, 2 on with the headed GEMM whole
                           along K (one head a tile, not one a span), 3 as 2 with a cluster of column
                           tiles sharing the rows (CgGemm.head_cluster; a dialect with clusters) */
  int pair_bands;       /* wide pairs (a layernorm after its GEMM) as GEMM tiles with a band tail
                           (cg_pair_banded; kiln_options.cuda_pair_bands): 0 none, 1 the band's last
                           tile runs its rows, 2 every tile its own columns of them (CgGemm.band_share),
                           a cooperative launch; 3 as 2, an ordinary launch (its blocks checked resident)
                           whose tiles meet by flags (CgGemm.band_flags) */
  int64_t narrow_depth; /* contractions of at most 32 columns that no row kernel follows, over at least this many
                           points, a warp a row (CgGemm.narrow; kiln_options.cuda_narrow_depth); 0 never */
  int pair_stage;       /* narrow pairs read their contraction's factor free of the rows from shared memory,
                           staged once a block (cg_pair_staged; kiln_options.cuda_pair_stage): 0 never, 1 a
                           warp a row (pair_warps), 2 also a block a row */
  int64_t pair_warps;   /* narrow pairs (a contraction of at most 32 columns and its rows) of at least this
                           many rows take a warp a row, 8 rows a block; 0 never (cg_pair_warps;
                           KILN_CUDA_PAIR_WARPS) */
  int group_blocks;     /* a launch group's kernel asks for this many resident blocks a multiprocessor
                           (launch bounds: its registers capped to fit); 0 no ask. Its members are
                           inlined into one function, whose registers come out above any member's
                           alone (mlp_train_b1024's last group: 109, members at most 65), which can halve
                           the blocks resident (KILN_CUDA_GROUP_BLOCKS) */
  const int *group_bounds; /* plan kernel -> blocks a multiprocessor that the group it begins asks for
                           (over group_blocks; NULL or 0: group_blocks; < 0 no ask): set by the runtime
                           from the compiled group's residency */
  int gemm_stages;      /* GEMM tiles: k-tiles whose global reads are in flight at once (1, 2 or 4;
                           above 1 the shared tiles are double-buffered; 0 the default: 2 for tiles
                           whose factors are vector reads over spans of 4 k-tiles or more, else 1);
                           KILN_CUDA_GEMM_STAGES */
  int chain_sm_blocks;  /* an mma chain's shared form: the blocks a multiprocessor its batch points' tiles are
                           shared out for (0: 4; cg_chain_splits; kiln_options.cuda_chain_blocks) */
  bool chain_prefetch;  /* an mma chain's shared form: the next tile's queries copied during this tile
                           (cg_chain_prefetch; kiln_options.cuda_chain_prefetch) */
  int chain_lanes;      /* an mma chain's shared form: lanes a row in its softmax steps (4 .. 32; 0 reads as 32;
                           kiln_options.cuda_chain_lanes) */
  bool chain_spread;    /* f32 attention chains: as few rows a thread as fill the block (kiln_options.cuda_chain_spread;
                           the same bits) */
  bool gemm_kg_tree;    /* copied k-group tiles add their groups' partial tiles in a tree of five barriers, not
                           after one (kiln_options.cuda_kg_sum 0; the same bits) */
  int gemm_copies;      /* f32 32x32 k-group tiles whose two factors are vector reads (gemm_vec) copy them
                           straight into this many shared stages (the dialect's cp_async; 2 .. 4), one
                           barrier a k-tile; 0: through registers (CgGemm.copies; KILN_CUDA_COPY_STAGES) */
  int gemm_vec;         /* f32 GEMM tiles: operands that are plain affine loads read 4 elements a load
                           (CgGemm.a_vec; a dialect with 16-byte vectors and views; KILN_CUDA_VEC_READS):
                           0 never, 1 runs along one var, 2 also runs across contiguous vars */
  /* Per plan kernel (NULL: none): may not join a group, and why ("budget: 96 registers, ...");
   * the runtime sets these when a built group does not fit its device, then builds again. */
  const char *const *group_veto;
} CgOptions;
CgOptions cg_options_default(void);   /* auto rows, split-K on, library on, no groups, in place; reads NO environment */

/* A GEMM a library may run instead of the generated kernel (the plan part of today's CudaLtCall):
 * kiln's row-major D[m, n] (+ bias[n], relu or tanh-gelu) = sum_k A[m, k] B[k, n], per batch. */
/* On loop dialects, f32 sums over at most this many points accumulate in f32 (as ONNX Runtime's
 * MLAS does): twice the vector width of f64 and no conversion per product. The rounding error of
 * a sum of K terms grows like K * 2^-24 at worst (sqrt(K) * 2^-24 typically): <= 2.4e-4 relative
 * for K = 4096, ~1e-6 on the ONNX models here. Longer sums (column sums over many rows) keep f64
 * accumulators in the renderer, and the cpu library GEMM (f32 accumulators) declines them. */
#define CG_CPU_F32_SUM_MAX 4096
/* a longer sum is taken in spans of at most this many points, each summed in f32, the spans
 * added in f64 */
#define CG_CPU_F32_SPAN 2048
/* ... and the cpu library GEMM takes sums over at least this many points (raced on convnet_mini). */
#define CG_CPU_LIBRARY_MIN_K 128
/* ... and declines a B operand that changes each run (not the program's constant) of more than
 * this many bytes, which it reads in place or packs whole before its tiles: the register tiles,
 * packing a group of panels at a time, ran resnet50's 1x1 convolutions (B its activations, 1.6
 * and 3.2 MB) 0.89-0.99 of the library's time */
#define CG_CPU_LIBRARY_B_BYTES (1 << 20)

typedef struct CgLibGemm {
  int a_stage, b_stage, d_stage, bias_stage;   /* bias_stage -1: none */
  int64_t M, N, K, batch;
  int64_t a_off, b_off, d_off, bias_off;       /* element offsets into the stages */
  int64_t lda, ldb, ldd;                       /* leading dimensions (elements) */
  int64_t a_sb, b_sb, d_sb;                    /* batch strides (elements) */
  kiln_dtype elem;                             /* the operands', bias's and result's type: f32, or bf16 / f16
                                                  (f32 sums; cuda only) */
  bool a_t, b_t;                               /* A stored along m (k strided), B along k */
  bool relu, gelu;
  bool bias_m;                                 /* the bias runs along m (a convolution's per-channel bias,
                                                  its channels being the rows): loop dialects only */
  bool a_constant, b_constant;                 /* A, B is a constant of the program: a const, or a param
                                                  no assign updates (the cpu library packs it once) */
} CgLibGemm;

typedef struct CgLaunch {
  int kernel;            /* plan kernel index (= position); a group's launch: -1 */
  int group;             /* the group this kernel runs in (its launch is CgProgram.group[group]), -1: its own */
  int phase;             /* a group member's phase; a group: how many phases */
  bool cooperative;      /* a group with several phases: all blocks resident, grid barriers between phases */
  unsigned band_waits;   /* a group: bit ph set where phase ph waits for its band of rows of phase ph - 1 alone,
                            not at a grid barrier (CG_GROUP_BANDS) */
  bool resident;         /* its blocks wait for each other (a shared band's tiles): the runtime checks that the
                            device keeps them all resident at once, else vetoes the form (cooperative or not) */
  bool host;             /* KN_HOST: no source; the runtime evaluates it on the host (a counted fallback) */
  bool collective;       /* KN_COLLECTIVE: no source; the runtime makes the communicator's call */
  char name[32];         /* entry symbol: the kernel for grid dialects, the trampoline for loop dialects ("" for host) */
  int *params; int n_params;   /* stage bound to each parameter b0..b(n-1), in order (cg_kernel_params) */
  int64_t grid;          /* blocks (already capped as today at 2^20); loop dialects: 1; 0: nothing to run */
  int block;             /* threads per block; loop dialects: 1 */
  int smem;              /* dynamic shared memory bytes (a long row's cache), 0 if none */
  int smem_carveout;     /* percent of L1 as shared memory to request, 0: leave the default */
  bool library;          /* a library GEMM may replace it (lib is filled); the kernel stays as fallback */
  CgLibGemm lib;
  int64_t pack;         /* loop dialects: floats of the kernel's constant weights laid out for it (0: none).
                            The module's kiln_p<k> (a trampoline like the kernel's) fills them from the
                            kernel's own parameters, given the pack as one more, the last; the kernel reads
                            it there too. The runtime runs it at compile and after write_param. */
  char why[256];        /* what was chosen and why, printable: "gemm 32x32 tiles (2x2 a thread) x 4 K-spans of 224",
                          * "block rows p16: 64 threads x 1 rows", "vec4 points: 4 a thread, 256 threads", ... */
} CgLaunch;

typedef struct CgProgram {
  StrBuf source;         /* the whole translation unit (prelude + every non-host kernel) */
  CgLaunch *launch; int n_launch;   /* one per plan kernel, plan order */
  CgLaunch *group; int n_group;     /* one per launch group, launched where its last member is */
  /* stage -> the param whose buffer it is stored into (-1: its own): an assigned value
   * written in place because every other read of the param comes before, and its own
   * kernel reads the param only at the point it stores, in the thread that stores it */
  int *store_into; int n_store;
  Arena arena;           /* params arrays etc. */
} CgProgram;
/* Renders the plan in dialect d under options o (NULL: cg_options_default) and decides every
 * kernel's launch. The source is exactly cg_render_plan's. */
kiln_status cg_program_build(const Plan *p, const Dialect *d, const CgOptions *o, CgProgram **out);
void cg_program_free(CgProgram *g);   /* NULL: nothing */
/* The first launch (plan kernel) of group gi: what CgOptions.group_bounds is keyed by; -1 none. */
int cg_group_first(const CgProgram *g, int gi);
void cg_program_print(const CgProgram *g, FILE *f);   /* one line per launch: kernel, name, grid x block, smem, library, why */

/* -- dialect_c.c -- */

extern const Dialect cg_dialect_c;

/* -- dialect_cuda.c -- */

extern const Dialect cg_dialect_cuda;

/* -- dialect_glsl.c -- */

extern const Dialect cg_dialect_glsl;

/* -- render.c -- */

/* Parameters of kernel k in order: inputs, then stored items (a chain's last kernel: those of
 * every kernel of the chain). Returns the count; stages gets the stage of each (room for
 * cg_kernel_params_max). */
int cg_kernel_params(const Plan *p, const Kernel *k, int *stages);
int cg_kernel_params_max(const Kernel *k);
/* Name of kernel k's function ("kiln_k3") and of its trampoline ("kiln_e3"). */
void cg_kernel_name(int k, bool trampoline, char buf[32]);
/* Loop dialects: the head of a loop of var over 0 .. count - 1 (count an expression of the
 * index type), "{" included: the calling thread's share of it when parallel, else all of it on
 * thread 0 (none on the others). */
void cg_team_for(const Dialect *d, const char *var, const char *count, bool parallel, char *out, size_t n);
/* Source of one kernel (appended to out). With launches g (NULL: none), a group member is
 * rendered as a phase (grid dialects: a device function of its virtual block and block count;
 * loop dialects: as usual), and a kernel storing into a param (g->store_into) without restrict. */
kiln_status cg_render_kernel(const Plan *p, int k, const Dialect *d, const CgOptions *o, const CgProgram *g,
                             StrBuf *out);
/* Prelude and every non-host kernel of the plan, as one translation unit (o NULL: defaults);
 * with launches (NULL: none), every group's entry after its members. */
kiln_status cg_render_plan(const Plan *p, const Dialect *d, const CgOptions *o, const CgProgram *launches, StrBuf *out);
/* The prelude alone (the three prelude fields in order), appended to out. */
void cg_render_prelude(const Dialect *d, StrBuf *out);
/* How a grid dialect maps kernel k (the backend sizes its launch from it):
 * POINTS one thread per outer point, grid-stride; VEC4 four points per thread, 16-byte f32
 * vectors (outer_numel/4 threads' worth); BLOCK_ROWS one block per outer point, any block
 * size that is a multiple of 32, up to 1024. */
typedef enum { CG_GPU_POINTS, CG_GPU_VEC4, CG_GPU_BLOCK_ROWS, CG_GPU_GEMM, CG_GPU_CHAIN } CgGpuShape;
/* CHAIN: the kernels of an attention chain (plan.h), rendered and launched as its last one:
 * CG_GEMM_THREADS threads, a block per PLAN_CHAIN_ROWS rows of one batch point, this much
 * dynamic shared memory (bytes) and these blocks. */
/* A blocked chain's form: its products as f32 multiply-adds, on the mma with the rows between them in
 * shared memory, or on the mma with each warp's 16 rows in its fragments throughout; FRAGS2 and FRAGS4
 * as FRAGS with each tile's keys split over 2 or 4 warps. */
typedef enum { CG_CHAIN_FMA, CG_CHAIN_SHARED, CG_CHAIN_FRAGS, CG_CHAIN_FRAGS2, CG_CHAIN_FRAGS4 } CgChainForm;
/* The warps a tile of the fragments' forms (1, 2, 4), their share of its keys each; 0 for the other forms. */
int cg_chain_key_warps(CgChainForm form);
/* Shared memory of a chain's block; prefetch (cg_chain_prefetch): a second tile of queries. */
int64_t cg_chain_smem(const Kernel *last, CgChainForm form, bool prefetch);
/* Does the chain ending at ko copy its next tile's queries during this one (CgOptions.chain_prefetch,
 * the shared form, a block of more than one tile)? */
bool cg_chain_prefetch(const Kernel *ko, CgChainForm form, const CgOptions *o);
int cg_chain_rows(const Kernel *last, CgChainForm form);
/* Blocks a batch point; the shared form aims at sm_blocks blocks a multiprocessor (0: 4;
 * CgOptions.chain_sm_blocks). */
int64_t cg_chain_splits(const Kernel *last, CgChainForm form, int sm_blocks);
/* The tensor-core kind of a blocked chain's two products (CG_MMA_NONE: f32 FMA) and its form: bf16 or
 * f16 where the dialect has mma, the options allow 16-bit tensor cores and CgOptions.chain_mma, the
 * queries, keys, values and P are all of that type, and the row, depth and width are multiples of the
 * mma's tiles; the fragments' form also needs quad reductions and no arg-reduction in the rows. */
CgMma cg_chain_mma(const Plan *p, const Kernel *last, const Dialect *d, const CgOptions *o, CgChainForm *form);
/* Does grid dialect d run the chain ending at kernel last in blocks (16-byte vectors along the
 * row, the depth and the width, all multiples of 4; dynamic shared memory; warp reductions)?
 * Else (and in loop dialects) a chain is a loop over its rows, a thread each. */
bool cg_chain_blocked(const Dialect *d, const Kernel *last);
/* A pair (plan.h: a narrow contraction and the row kernel over its rows) in grid dialect d:
 * with warp reductions, a block of CG_GEMM_THREADS a row (its columns one a lane of the first
 * warp) and this much static shared memory (bytes; last: the pair's last kernel); else a
 * thread a row. */
bool cg_pair_blocked(const Dialect *d);
int64_t cg_pair_smem(const Kernel *last);
/* A pair's tail (Kernel.tailed, the chain's last kernel): the row's values it keeps in shared
 * memory for the contraction over them. */
int64_t cg_tail_smem(const Kernel *tail);
/* A wide pair (rows of more than 32 columns, plan.h's PLAN_PAIR_MAX_WIDE) in a blocked grid
 * dialect: a block of CG_GEMM_THREADS takes 8 rows (a warp each) of one of cg_pair_splits spans
 * of the depth, cg_pair_blocks blocks; cg_pair_globals its partial rows and arrival counts. */
bool cg_pair_wide(const Kernel *last);
/* A narrow pair of at least CgOptions.pair_warps rows in a blocked grid dialect: a warp a row, 8
 * rows a block (a block a row otherwise: 1024 rows took 2.9 us only to start on the H200). */
bool cg_pair_warps(const Kernel *last, const CgOptions *o);
/* A narrow pair whose contraction's factor free of the rows is read once a block into shared memory, as a
 * narrow contraction's is (CgOptions.pair_stage: a warp a row, or also a block a row): the floats staged;
 * 0 not staged (last: the rows kernel). */
int64_t cg_pair_staged(const Kernel *last, const CgOptions *o);
int64_t cg_pair_splits(const Kernel *last);
int64_t cg_pair_blocks(const Kernel *last);
void cg_pair_globals(const Kernel *last, const Dialect *d, StrBuf *out);
int64_t cg_chain_blocks(const Kernel *last, CgChainForm form, int sm_blocks);
CgGpuShape cg_gpu_shape(const Plan *p, const Kernel *k, const CgOptions *o);
/* The shape kernel k is rendered with in dialect d: cg_gpu_shape where the dialect has
 * the means (VEC4 needs a vector type, BLOCK_ROWS block reductions, GEMM shared memory),
 * else CG_GPU_POINTS; CG_GPU_POINTS for loop dialects. */
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
typedef struct CgRows { int threads, rows, vec, reg_points, smem, min_blocks, split; bool columns; } CgRows;
enum { CG_ROW_VARIANTS = 9 };
CgRows cg_gpu_rows(const Kernel *k, int variant);
/* The shape a block-row kernel is rendered with: cg_gpu_rows, and, for a few long rows of
 * sums (a bias gradient, a loss's mean), each row split over `split` blocks of 256 threads
 * (two phases: a partial per block, the last block to arrive at its row adds them in order
 * and runs the rest of the kernel). Off with CgOptions.splitk off and for named variants. */
CgRows cg_rows_of(const Plan *p, const Kernel *k, const CgOptions *o);
/* Module-scope declarations of a split row kernel (its partials and arrival counts). */
void cg_rows_globals(const Plan *p, const Kernel *k, const CgOptions *o, const Dialect *d, StrBuf *out);
/* The concrete variant (never auto) that cg_gpu_rows uses for kernel k. */
int cg_row_variant_resolve(const Kernel *k, int variant);
/* ... and what the options' dialect can render of it (warp_rows, smem_rows), 16-bit rows as
 * vectors (row_half): the variant cg_rows_of renders kernel k of plan p with. */
int cg_row_variant_of(const Plan *p, const Kernel *k, const CgOptions *o);
/* Variant number of a name ("base", "warp", ...; NULL or "" is auto), -1 if unknown; and the
 * name of a number. */
int cg_row_variant(const char *name);
const char *cg_row_variant_name(int variant);

/* -- gemm.c: the tiled contraction shape (CG_GPU_GEMM) of a grid dialect --
 * A reduce-sum kernel whose accumulated body is a product of two factors, one free of
 * some outer vars (M), the other free of others (N), both possibly sharing batch vars:
 * matmul, batched matmul, conv as implicit GEMM. Each block computes one BM x BN tile of
 * one batch point, staging both factors through shared memory (read through their own
 * index maps: transposes, broadcasts, padding), then runs the kernel's epilogue items on
 * each of its outputs. */
enum { CG_GEMM_THREADS = 256 };
enum { CG_GEMM_MAX_B = PLAN_SIBLINGS_MAX };
enum { CG_ROLE_BATCH, CG_ROLE_M, CG_ROLE_N };  /* CgGemm.role: read by both factors, by A only, by B only */
typedef struct CgGemm {
  const Expr *a, *b;               /* the two factors (A: no N var, B: no M var) */
  /* sibling contractions over one A (q, k and v of one input): n_b sums of A times bs[q],
   * accumulations acc_items[q], one tile of each B beside A's; n_b 1: bs[0] = b */
  int n_b;
  const Expr *bs[CG_GEMM_MAX_B];
  int acc_items[CG_GEMM_MAX_B];
  int role[KILN_MAX_RANK];         /* per outer var: CG_ROLE_BATCH, CG_ROLE_M or CG_ROLE_N */
  int64_t M, N, K, batch;
  int bm, bn, bk, tm, tn;          /* tile and per-thread sub-tile (of the epilogue, after any k groups) */
  int kgroups;                     /* > 1: the block's threads form kgroups groups, each multiplying
                                      its share of every k-tile into a KG_TM x KG_TN sub-tile read as
                                      vectors from shared memory; the partial tiles are added in
                                      shared memory, in group order, before the epilogue */
  bool a_kfast, b_kfast;           /* global reads of a tile run along k (else along m / n) */
  bool a_round, b_round;           /* mma through registers: the factor is f32 values rounded to the mma's
                                      16-bit type (a cast: mixed precision); the registers hold them
                                      unrounded and the stash rounds, so that no read is waited for
                                      before the tile's stash */
  bool a_stash_round, b_stash_round; /* mma through registers under excess precision: a factor that is
                                      no plain 16-bit load may hold an unrounded f32, so its stash
                                      rounds (mma_round) */
  int acc_item;                    /* index of the IT_ACC item */
  int splits;                      /* split-K: blocks per tile, each over kspan points of K */
  int64_t kspan;                   /* (a multiple of bk; 1 split: kspan >= K) */
  bool cluster;                    /* split-K: a tile's spans are the blocks of one cluster, their partials
                                      added from each other's shared memory (no global round trip) */
  int one_fence;                   /* split-K's arrival count by one thread (CgOptions.one_fence) */
  bool split_flags;                /* split-K: each span but the last releases its partial with its flag; the last
                                      waits for their flags and adds theirs and its own, in span order
                                      (CgOptions.split_flags) */
  int stages;                      /* k-tiles read ahead into registers (CgOptions.gemm_stages); above 1
                                      the shared tiles are double-buffered, one barrier a k-tile */
  CgMma mma;                       /* tensor cores: the operands' kind (CG_MMA_NONE: f32 FMA). The tile's
                                      8 warps are 2 x 4, each warp's outputs a grid of 16 x 8 mma
                                      tiles; a thread's tm x tn are their accumulator fragments */
  /* mma tiles whose two factors are each a 16-bit load at an element offset affine in the kernel's
   * vars (base + sum coef[v] * v), 8 consecutive elements along k or along the operand's own last
   * var contiguous and 16-byte aligned: read 16 bytes at a time straight into two stages of shared
   * tiles (the dialect's cp_async), fragments by ldmatrix */
  bool direct;
  struct CgDirect { int stage; bool kfast; int64_t base, coef[2 * KILN_MAX_RANK]; } da, db;
  /* direct tiles on Hopper's warpgroup MMA (CgOptions.wgmma): 128 x bn tiles, k-tiles of 64 copied into
   * wg_stages stages of 128-byte swizzled rows (an operand read along k: a row of 64 k a tile row; along
   * its own x: panels of 64 x, a row of them a k), two warpgroups each 64 rows, one m64nBNk16 wgmma a
   * warpgroup per 16 of k from shared-memory descriptors; a thread's accumulators acc[0][0 .. bn / 2 - 1]
   * in wgmma's order; no split along K */
  bool wgmma;
  int wg_stages;
  /* f32 tiles (no mma) whose factor is an f32 load affine in the kernel's vars with coefficient 1
   * along its read direction (k when a_kfast, else its own last var), that var's extent, the other
   * coefficients and the base multiples of 4: each thread reads its 4 consecutive elements of a
   * k-tile as one 16-byte vector (CgOptions.gemm_vec); va, vb the offsets */
  bool a_vec, b_vec;
  struct CgDirect va, vb;
  /* f32 k-group tiles with both factors vector reads (CgOptions.gemm_copies): the k-tiles copied
   * 16 bytes at a time straight into `copies` shared stages, as direct mma tiles do. An operand read
   * along k keeps rows of k ([x][k]: a thread's 4 rows or columns x + 8i, each a 16-byte read of 4
   * k), one read along x rows of x ([k][x]: its 4 consecutive x a 16-byte read a k). Each output's
   * products are added in the order of the register tiles: the same bits. 0: through registers */
  int copies;
  bool kg_tree;                    /* copies: the groups' tiles added in a tree of barriers (CgOptions.gemm_kg_tree), not
                                      each in its own stage after one */
  /* a band tail follows the epilogue (a wide pair's rows: cg_pair_banded): each output is handed to
   * CgEmit.band (phase 0, mq and nq in scope) after the items, and every tile, after its epilogue,
   * to CgEmit.band's phase 1, where it counts itself in at its row band (tile, tm0 in scope) */
  bool band;
  /* band: every tile of a band (32 x 32 tiles) runs the row kernel's steps over its own 32 columns of the
   * band's rows, held in a shared tile Xb; at each step's sums the band's tiles meet: each stores its
   * rows' partial sums, waits at the band's barrier (the dialect's band_barrier; every block resident,
   * CgLaunch.resident), and adds the band's partials in column-tile order (CgOptions.pair_bands 2, 3) */
  bool band_share;
  bool band_flags;                 /* band_share: the band's tiles meet by flags (the dialect's band_meet), not at
                                      a barrier (CgOptions.pair_bands 3) */
  /* rows at the head of the tiles (Kernel.headed: a row kernel whose per-point value is A, the factor
   * read along M): each tile first computes its bm rows, all K points of each, into a shared array
   * Ph[k][m] (k-major, rows of bm + 4 floats, the k-tiles' own layout) through CgEmit.head, and its
   * k loop reads A's k-tiles there in place; B through registers as usual */
  bool head;
  /* a narrow contraction a warp a row (CgOptions.narrow_depth): at most 32 columns, the kernel's last var
   * N's only one and every other var M's, A read along k; B, K x N values free of the rows, staged whole
   * in a block's shared memory (rows of cg_narrow_stride(N) floats); no tiles, no split along K
   * (render.c's render_narrow; cg_gemm_blocks: 8 rows a block) */
  bool narrow;
  int head_cluster;                /* > 1: a cluster of this many column tiles shares its rows, each block
                                      computing bm / head_cluster of them and reading the others' from
                                      their blocks' Ph (CgOptions.gemm_heads 3) */
} CgGemm;
/* Does kernel k take the tiled shape under options o (split-K)? Fills g (may be NULL) when
 * it does. */
bool cg_gemm_match(const Plan *p, const Kernel *k, const CgOptions *o, CgGemm *g);
/* A narrow contraction's (or a staged pair's) staged B of N columns: floats a depth point (N | 1: odd, so
 * that lanes reading consecutive depth points of one column fall in distinct banks). */
int cg_narrow_stride(int64_t N);
/* Do K x N values (N at most 32) fit the stage of a narrow contraction (also a narrow pair's, a warp
 * a row: cg_pair_staged)? */
bool cg_narrow_stage_fits(int64_t K, int64_t N);
/* Blocks to launch (CG_GEMM_THREADS threads each). */
int64_t cg_gemm_blocks(const CgGemm *g);
/* Blocks of one band of bm rows (no batch): block w holds rows of band w / cg_gemm_band_blocks(g) % (M / bm) */
int64_t cg_gemm_band_blocks(const CgGemm *g);
/* Static shared memory of the tile kernel's block: the staged tiles (and their buffers), the flag. */
int64_t cg_gemm_smem(const CgGemm *g);
/* Dynamic shared memory of the tile kernel's block (the stages of a direct mma tile; 0: none). */
int64_t cg_gemm_dyn_smem(const CgGemm *g);
/* Module-scope declarations kernel ki's GEMM needs before its function (split-K: the
 * partial tiles and per-tile arrival counts); nothing when it does not split. */
void cg_gemm_globals(const CgGemm *g, int ki, const Dialect *d, StrBuf *out);
/* The shared tiles at module scope, for a dialect with shared_at_module (its part of the
 * source is kernel ki's alone); no k groups, no split-K there. */
void cg_gemm_shared(const CgGemm *g, const Dialect *d, StrBuf *out);
/* What the renderer lends gemm.c: the dialect, text lines at its indent, index literals
 * (valid until eight more are made), the digit decomposition of a flat index into kernel
 * vars (render.c's digits: vars first..first+n-1 of sizes shape, those with sel[i] == want,
 * over `total` points), expressions emitted as locals (memoised inside push/pop scopes),
 * and the kernel's epilogue items of a step with the accumulator's value given as text
 * (no '%' in it). */
typedef struct CgEmit {
  void *r;
  const Dialect *d;
  void (*put)(void *r, const char *line);
  void (*indent)(void *r, int delta);
  const char *(*lit)(void *r, int64_t v);
  void (*digits)(void *r, const char *flat, int first, int n, const int64_t *shape, const int *sel, int want,
                 int64_t total);
  void (*emit)(void *r, const Expr *e, char *out, size_t n);
  /* emit with every float select lazy (its then-branch computed only where its condition
   * holds), as an expression from te_unclamp_guarded needs */
  void (*emit_lazy)(void *r, const Expr *e, char *out, size_t n);
  void (*push)(void *r);
  void (*pop)(void *r);
  int (*param_of)(void *r, int stage);  /* the kernel parameter b<n> that holds stage's buffer, -1: none */
  void (*items)(void *r, int step, const char *acc);
  /* the range var takes in what is emitted next (load offsets are simplified with it), until set again */
  void (*var_range)(void *r, int var, int64_t lo, int64_t hi);
  /* the plan kernel whose items `items` emits, its vars' ranges its shapes (a chain's kernels
   * in turn) */
  void (*kernel)(void *r, const Kernel *k);
  /* what is emitted next takes no value emitted before (another kernel's vars have the same
   * names): floor -1 hides everything so far; returns the floor to restore it with */
  int (*isolate)(void *r, int floor);
  /* CgGemm.band: phase 0 after each output's items, phase 1 after each tile's epilogue (NULL: none) */
  void (*band)(void *r, int phase);
  /* CgGemm.head: the tile's rows into Ph (tm0 in scope), before its k loop (NULL: none) */
  void (*head)(void *r);
} CgEmit;
void cg_render_gemm(const Plan *p, const Kernel *k, const CgGemm *g, const CgEmit *em);
/* A banded pair: a wide pair (no tail) whose contraction takes the GEMM tiles under o, one row var
 * after the others, no batch, one sum (CgOptions.pair_bands). Each tile stores its outputs of the
 * contraction's row value for the row kernel, and counts itself in at its band of rows; the band's
 * last tile runs the row kernel's steps over the band's rows, a group of lanes a row. Fills g (may be NULL). */
bool cg_pair_banded(const Plan *p, const Kernel *last, const Dialect *d, const CgOptions *o, CgGemm *g);
/* ... and the lanes that take a row there: as few as hold a band in one pass of the block, as many as keep
 * a lane's points at most 32 */
int cg_pair_band_lanes(const CgGemm *g);
/* Rows at the head of their contraction's tiles (plan.h PlanOptions.head_ok, ctx the CgOptions): kc
 * takes 32 x 32 f32 tiles of k groups (no mma, no siblings, no batch) whose A factor is the load of
 * kr's per-point value P at rows named by KC's M vars alone (the identity or a permutation) and along
 * K, the rows of at most HEAD_MAX_K points, each a row of kr; kr's reductions within a group of lanes. */
bool cg_gemm_head_ok(const struct Plan *p, const Kernel *kr, const Kernel *kc, int P, const void *ctx);
/* ... the GEMM of a headed chain's last kernel kc (its rows kernel kc - 1), g filled (may be NULL) */
bool cg_gemm_headed(const Plan *p, const Kernel *kc, const CgOptions *o, CgGemm *g);
/* ... and the lanes that take a row of its head: a block's rows in one pass, at most 32 points a lane */
int cg_gemm_head_lanes(const CgGemm *g);
/* Lines through a CgEmit (gemm.c): one formatted line; one that opens a block (the lines
 * after it indented); the block's closing brace; an index literal in the dialect's form. */
void cg_put(const CgEmit *em, const char *f, ...) __attribute__((format(printf, 2, 3)));
#define cg_open(em, ...) (cg_put(em, __VA_ARGS__), (em)->indent((em)->r, 1))
void cg_close(const CgEmit *em);
const char *cg_lit(const CgEmit *em, int64_t v);
/* The lines where the blocks of one split piece of work meet (a tile's K-spans, a row's
 * pieces), each block's partial already stored: the block that arrives last at counter
 * `slot` (of `blocks`) goes on past them, the others `continue` to their next piece. With
 * one_fence (CgOptions.one_fence) the block's first thread alone counts, fenced around its count
 * (1) or by an acquire-release count (2). */
enum { CG_ARRIVAL_LINES = 6 };
void cg_arrival_lines(const Dialect *d, const char *slot, int blocks, int one_fence, char out[CG_ARRIVAL_LINES][256]);

/* -- cpu_tile.c: register tiles for the contractions of loop dialects -- */

/* A contraction as rows x cols tiles (KILN_MR x KILN_NR of the C prelude) over K: cols is
 * the role of the kernel's last var (the vector side), rows the other. */
typedef struct CgCpuTile {
  CgGemm g;                        /* the product as cg_gemm_match reads it (structure only) */
  int rows_role, cols_role;        /* CgGemm.role values: 1 M, 2 N */
  const Expr *rows_x, *cols_x;     /* the operands of each side */
  int64_t rows, cols;              /* extents (M or N) */
  bool rows_once;                  /* the rows operand is packed once per thread, for every tile */
  bool rows_direct;                /* the rows operand is a plain f32 load contiguous along k, read in
                                    * place (the dialect's tile_rows) instead of packed */
  int cols_stride;                 /* elements between a run's consecutive lanes in cols_runs' load (1, 2 ...) */
  const Expr *cols_runs;           /* a window read along the last var: cols_x with its guarded clamps
                                    * dropped, packed in runs, masked or (cols_stride > 1) strided vector
                                    * loops (NULL: lane by lane) */
  bool cols_ends;                  /* cols_runs' lanes inside the guard found from the run's ends, then one
                                    * loop over them (run_from_ends: always with cols_stride > 1; with 1,
                                    * CgOptions.cpu_run_ends) */
  bool cols_once;                  /* the cols operand is the program's constant, the same in every batch: its
                                    * panels are laid out once in the kernel's pack (CgLaunch.pack: groups of
                                    * panels [panel][K][KILN_NR], as a thread packs them), not every run */
  bool tile_apart;                 /* the rows are packed and a packed operand is rounded to f16/bf16 as it
                                    * is packed: the tile is called out of line (the dialect's tile_apart) */
  bool split_digits;               /* a reduction var an operand reads apart by constant divisors is packed
                                    * over its digits, a loop each (open_points_split; CgOptions.cpu_split_digits) */
} CgCpuTile;
/* Does kernel k of a loop dialect sum a small window at each point of its last dim with the sum
 * in a register (render.c's render_window; a depthwise convolution), under o? */
bool cg_window_match(const Plan *p, const Kernel *k, const CgOptions *o);
/* Does kernel k of a loop dialect render as register tiles under o? Fills t (may be NULL). */
bool cg_cpu_tile_match(const Plan *p, const Kernel *k, const CgOptions *o, CgCpuTile *t);
/* Columns a thread packs at once, in units of the widest panel (32 columns; cpu_tile.c says how many). */
int64_t cg_cpu_tile_group(const CgCpuTile *t);
void cg_render_cpu_tile(const Plan *p, const Kernel *k, const CgCpuTile *t, const CgEmit *em);
/* The floats of t's pack (0: none, t->cols_once false), and its pack function's body. */
int64_t cg_cpu_tile_pack_numel(const CgCpuTile *t);
void cg_render_cpu_tile_pack(const Plan *p, const Kernel *k, const CgCpuTile *t, const CgEmit *em);

/* May a loop dialect's kernel compute and store a point twice (a vector loop's last chunk moved
 * back)? Only when it stores the values of its own point, none into a buffer the kernel reads (an
 * assigned value, which may be stored in place). */
bool cg_points_idempotent(const Plan *p, const Kernel *k);
/* Is stage a constant of the program: a const, or a param no assign updates (the same value
 * every run until write_param)? (library.c) */
bool cg_stage_constant(const TE *te, int stage);
/* Does e read only the program's constants (consts, params no assign updates)? */
bool cg_reads_constants(const TE *te, const Expr *e);
/* The element offset of load L with the vars at v (nv of them); false where it is not exact. */
bool cg_load_offset_at(const Plan *p, const Expr *L, const int64_t *v, int nv, int64_t *out);
/* Is load L, over kernel k's vars (outer, then inner), affine and read in aligned runs of `width`
 * consecutive elements along var `fast` (coefficient 1, its extent, the base and every other
 * coefficient multiples of width)? Buffers are 16-byte aligned, so a run of 16 bytes is one copy. */
bool cg_load_runs(const Plan *p, const Kernel *k, const Expr *L, int fast, int width);

/* -- cpu_direct.c: direct convolutions for loop dialects -- */

typedef struct CgCpuDirect {
  int acc;                         /* the kernel's IT_ACC item */
  const Expr *weight;              /* the factor free of the output's row and column */
  const Expr *plane;               /* the window operand at output row and column 0, guards lazy: with
                                    * the window's vars as a plane's row and column, its element there */
  int co;                          /* the kernel var of the output channels (the weight's) */
  bool by_channel;                 /* the window reads the output's channel (depthwise): a plane a channel */
  int stride, col_stride;          /* plane rows between output rows, plane columns between output columns */
  int lanes;                       /* f32 lanes a vector (CgOptions.cpu_lanes) */
  int64_t CO, PC, YP, XP, XPA, XQ; /* output channels; the plane's channels, rows, columns, row pitch and
                                    * the pitch of a row's phase (XPA = col_stride x XQ) */
  int ob, rr, wv;                  /* a task's output channels, rows, and vectors along its row */
  int64_t wc;                      /* runs of wv vectors a row */
  bool flat;                       /* rows at the output's pitch, one plane a window column (shifted by
                                    * it, zeros where it leaves the row): a task's rr rows run on in fv
                                    * vectors (the last block of rows moved back) */
  int fv;                          /* flat: vectors a task */
  const Expr *inner;               /* the plane over rows and columns m .. its last - m, simplified: its
                                    * padding's guards gone (NULL: none found for m <= 3) */
  int margin;                      /* that m */
  bool channel_lanes;              /* output channels along the vectors: a task cp vectors of channels x cr
                                    * pixels of one image (each a broadcast a tap), its weights read from
                                    * the kernel's pack (CgLaunch.pack: [block][k][cp x lanes], k the sum's
                                    * flat index, zeros past the channels) */
  int cp, cr;
  bool rows_outer;                 /* channel lanes: tasks take an image's rows outermost, every channel
                                    * block within (the weights fit in L2), else channel blocks outermost */
  int ring;                        /* channel lanes: the plane keeps this many rows (a power of two), row y
                                    * at y % ring, where the image's plane passes CHANNEL_PLANE_BYTES (tasks
                                    * of one row, rows outermost); 0: every row */
  bool channel_items;              /* channel lanes: the epilogue runs a pixel's channels as vectors, else
                                    * a channel's run of pixels a point at a time (cpu_direct.c) */
  int64_t pitch;                   /* channel lanes in place: the operand's row pitch (elements) */
  bool panel;                      /* channel lanes over pixel panels (a 1 x 1 window): a task is cp vectors
                                    * of channels x cr pixels of the image taken flat (rr 1; the last
                                    * block's pixels past the image zeros, not stored), the operand copied
                                    * once a thread an image into kiln_pl [block][plane channel][cr] as
                                    * its blocks are first read (CgOptions.cpu_pixel_panels) */
  int64_t PB;                      /* panel: blocks of cr pixels an image */
  bool winograd;                   /* channel lanes as Winograd's F(2x2, 3x3) (a 3 x 3 window of stride 1;
                                    * CgOptions.cpu_winograd): the weights laid out once as their 16
                                    * transforms [block][16][plane channel][cp x lanes]; a task is cp vectors
                                    * of channels x cr tiles of 2 x 2 outputs, the image's TH x TW tiles taken
                                    * flat in TB blocks; a thread copies the image into its plane (YW rows of
                                    * XPA) and transforms a block's 4 x 4 patches of every plane channel into
                                    * kiln_pv [block of the band][16][plane channel][cr] the first time it
                                    * reads the block; tasks go by bands of BT blocks, every channel block
                                    * within */
  int64_t TH, TW, TB, BT, YW;
  int64_t span;                    /* plane channels a span of the sum: PC where the sum is at most
                                    * CG_CPU_F32_SUM_MAX points, else spans of at most CG_CPU_F32_SPAN
                                    * points, each summed in f32 and the spans added in f64 */
  int64_t YR;                      /* flat: rows of a plane's row phase (YP / stride, rounded up) */
  bool in_place;                   /* a 1 x 1 window read where its operand lies: no plane (the operand's
                                    * rows and channels at the plane's pitch, every vector inside it) */
  const Kernel *expand;            /* an expanded chain's contraction (NULL: none): its value V, which the
                                    * window reads, computed a row of V at a time as the planes fill */
  int expand_v;                    /* V */
  int64_t expand_cols;             /* V's last extent */
  int eg;                          /* channels a task (flat planes of each), V's rows for them at once:
                                    * the contraction's input loaded once for them all */
  const Expr *expand_weight, *expand_x;  /* the contraction's weight and input as a direct 1 x 1
                                    * convolution's (its plane: the input at the plane's row and column) */
  int expand_co;                   /* its var of the output channels */
  int64_t expand_x_shape[KILN_MAX_RANK];  /* the shape of the stage its input loads */
} CgCpuDirect;
/* Does kernel k of a loop dialect render as a direct convolution under o (o->cpu_lanes set)?
 * Fills dc (may be NULL) when it does. */
bool cg_cpu_direct_match(const Plan *p, const Kernel *k, const CgOptions *o, CgCpuDirect *dc);
void cg_render_cpu_direct(const Plan *p, const Kernel *k, const CgCpuDirect *dc, const CgEmit *em);
/* The body of a channel-lanes convolution's pack function (CgLaunch.pack): its weights into
 * kiln_pk, shared across the team (kiln_tid of kiln_nt). */
void cg_render_cpu_pack(const Plan *p, const Kernel *k, const CgCpuDirect *dc, const CgEmit *em);
/* The floats of dc's pack (0: it has none). */
int64_t cg_cpu_pack_numel(const Kernel *k, const CgCpuDirect *dc);
/* A direct convolution kc with the max pool kp over its output (a pooled chain, Plan's
 * Kernel.pooled) in its epilogue: the row form, whole rows a task, rows a multiple of the
 * pool's window. cg_cpu_pool_ok is PlanOptions.pool_ok (ctx: the CgOptions). */
bool cg_cpu_pool_match(const Plan *p, const Kernel *kc, const Kernel *kp, const CgOptions *o, CgCpuDirect *dc);
bool cg_cpu_pool_ok(const Plan *p, const Kernel *kc, const Kernel *kp, const void *ctx);
void cg_render_cpu_pooled(const Plan *p, const Kernel *kc, const Kernel *kp, const CgCpuDirect *dc, const CgEmit *em);
/* A direct convolution kd whose window reads the value V of contraction ke (an expanded chain,
 * Plan's Kernel.expanded), rendered by cg_render_cpu_direct with V's rows computed where the
 * planes are filled: V read once by the window at V's own point in its row and column, its row
 * and column free of the window's column and row. cg_cpu_expand_ok is PlanOptions.expand_ok. */
bool cg_cpu_expand_match(const Plan *p, const Kernel *ke, const Kernel *kd, const CgOptions *o, CgCpuDirect *dc);
bool cg_cpu_expand_ok(const Plan *p, const Kernel *ke, const Kernel *kd, const void *ctx);

/* -- library.c: which GEMMs a library (cuBLASLt) may run -- */

/* Does kernel k (a CG_GPU_GEMM kernel under o) run as a library GEMM? The cost rule
 * (M*N*K*batch >= 2^26), operands affine in m, n, k and batch, one stored result with an
 * optional bias[n] and relu or tanh GELU. Fills c when it does. */
bool cg_library_match(const Plan *p, const Kernel *k, const CgOptions *o, CgLibGemm *c);
/* cg_library_match without its one test that builds (a GELU epilogue is taken on its shape):
 * the kernel may go to the library, so it stays out of launch groups. Adds nothing to the TE. */
bool cg_library_candidate(const Plan *p, const Kernel *k, const CgOptions *o);

#endif
