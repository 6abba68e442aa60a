/*
 * plan — the third stage. Takes a TE, hands on a Plan: the kernels, in launch order,
 * each with its iteration space and the stages it computes, which buffers cross a
 * kernel boundary (with the reason), the memory plan for intermediates and the bytes
 * every kernel moves.
 *
 * A kernel iterates an outer domain (shape, parallel) and, inside each outer point,
 * a sequence of steps: even steps are loops over the inner domain (red_shape) holding
 * accumulations (IT_ACC: a reduce stage) and per-point values (IT_INNER: an injective
 * stage on the kernel's row space), odd steps are per-outer-point values (IT_OUTER).
 * A pointwise kernel is one odd step; a reduction one even step plus its store; a row
 * kernel (softmax, layernorm) alternates them. Every Item's body is already expressed
 * in the kernel's variables (0..rank-1 outer, rank..rank+n_red-1 inner); a load in it
 * of a stage computed in the same kernel always hits the current point, so a renderer
 * reads that stage's local, never memory.
 */
#ifndef KILN_PLAN_H
#define KILN_PLAN_H

#include "../te/te.h"

typedef enum {
  KN_POINTWISE,  /* outer domain only */
  KN_REDUCE,     /* one loop of accumulations (and epilogue) */
  KN_ROW,        /* several steps over one row space: softmax, layernorm */
  KN_HOST,       /* a stage no renderer handles (opaque): ref_eval_stage, counted as fallback */
  KN_COLLECTIVE, /* a collective (all_reduce_mean): no source; the runtime makes the communicator's
                    call, started as soon as its operand exists (plan.c start_collectives) */
} KernelKind;

typedef enum {
  IT_ACC,    /* reduce stage accumulated in an inner loop; its value exists after the loop */
  IT_INNER,  /* injective stage at each point of the row space (inside an inner loop) */
  IT_OUTER,  /* injective stage at each outer point */
} ItemKind;

typedef struct Item {
  ItemKind kind;
  int stage;
  int step;          /* even: inner loop step/2; odd: after loop step/2 */
  Expr *body;        /* in kernel vars; for IT_ACC the reduce body */
  bool store;        /* written to memory (output, or read by another kernel) */
  Expr *offset;      /* element offset of the store in kernel vars (i64) */
} Item;

typedef struct Kernel {
  int id;
  KernelKind kind;
  int anchor;                     /* first stage placed: the reduce or the pointwise space */
  int rank;                       /* outer domain */
  int64_t shape[KILN_MAX_RANK];
  int64_t outer_numel;
  int n_red;                      /* inner domain (0 for pointwise) */
  int64_t red_shape[KILN_MAX_RANK];
  int64_t inner_numel;
  int row_stage_shape_rank;       /* row space (IT_INNER items): shape of the anchor's source */
  int64_t row_shape[KILN_MAX_RANK];
  Expr *row_map[KILN_MAX_RANK];   /* row-space index in kernel vars, or NULL entries if none */
  bool has_row;
  Item *items; int n_items, cap_items;
  int n_steps;
  int *ins; int n_ins;            /* stages read from memory (params order: ins, then stored items) */
  int64_t bytes_read, bytes_written;
  int64_t nodes;                  /* expression nodes (budget) */
  const char *why;                /* why this kernel could not join an earlier one */
  /* chains (plan.c find_chains), consecutive kernels run as one, the rows kept on chip: an
   * attention chain (a contraction, the row kernel over its rows and the contraction over
   * those rows), or a pair (a narrow contraction and the row kernel over its rows). On the
   * chain's last kernel: how many it joins (3 attention or a pair with its tail, 2 a pair);
   * on the ones before: -1; else 0. */
  int chain;
  bool pooled;                    /* a chain of two: a convolution and the pool over its output, the pool
                                   * taken in the convolution's epilogue (find_chains, PlanOptions.pool_ok) */
  bool expanded;                  /* a chain of two: a contraction (a 1x1 convolution) and the window sum
                                   * over its output (a depthwise convolution), the contraction's value
                                   * computed where the window's planes are filled (PlanOptions.expand_ok) */
  bool tailed;                    /* a chain of three: a narrow pair (a contraction and the row kernel over
                                   * its rows) and a contraction over each row's values, computed by
                                   * whoever holds the row after its steps (find_chains, a pair's tail) */
  bool headed;                    /* a chain of two: a row kernel (a layernorm) and the contraction that reads
                                   * its row values as a whole factor, the rows recomputed at the head of each
                                   * of the contraction's tiles (find_chains, PlanOptions.head_ok) */
} Kernel;

struct Plan;

typedef struct PlanOptions {
  int fuse;         /* 0: eager, one kernel per non-source stage */
  int cse;          /* 1: materialise injective values read by several kernels */
  int max_inputs;   /* budget: buffers read by one kernel */
  int max_nodes;    /* budget: expression nodes in one kernel */
  int store_moved;  /* store the arithmetic under a move rather than the moved tensor (kiln_options) */
  int bounds_moves; /* a bounds test on indices (a pad's) is a move, not arithmetic (kiln_options) */
  int gemm_reuse;   /* a GEMM reads an operand once per this many outputs of the other factor (0: n times) */
  int chains;       /* attention chains: 0 none, 1 all that fit, 2 small ones (kiln_options.attention) */
  int pairs;        /* a contraction and the row kernel over its rows as one (kiln_options.gemm_rows): 0 never,
                       1 rows of at most a warp's columns, 2 also wide rows (PLAN_PAIR_MAX_WIDE) */
  int pair_tails;   /* a narrow pair takes a contraction over its row after it (Kernel.tailed;
                       kiln_options.pair_tails): 0 never, 1 when one fits */
  int one_contraction;  /* grid backends: a kernel holds one GEMM-shaped sum, or (1) siblings over one A
                           (kiln_options.siblings); 0 any number */
  int reorder_sums;     /* a reduction read only through a permutation of its vars is computed in that
                           order (kiln_options.reorder_sums: 1, 2 or 3) */
  bool chain_layout;    /* ... and an attention chain's, computed in the chain's order, stored in its
                           reader's (Stage.layout; kiln_options.chain_layout) */
  int epilogue_ties;    /* arithmetic on a reduction's result that only other reductions read (relu(conv + b)
                           under a max pool) is stored by its producer's epilogue, not inlined into the readers
                           (kiln_options.cpu_epilogue, cpu only) */
  /* Pools in their producer's kernel (Kernel.pooled): kernel kc, a reduction whose one stored value
   * only kernel kc + 1 reads, a max or a sum of that value over non-overlapping windows that tile
   * its last two dims, joins kc + 1 when the renderer says it can take the pool in kc's epilogue
   * (the planner knows no renderer: the runtime hands one in; NULL: never) */
  bool (*pool_ok)(const struct Plan *p, const Kernel *kc, const Kernel *kp, const void *ctx);
  /* Expansions in their reader's planes (Kernel.expanded): kernel ke, a sum in f32 whose one stored
   * value only kernel ke + 1 reads, and only in its accumulation, joins ke + 1 when the renderer
   * says it can compute that value where ke + 1 gathers its operand (NULL: never) */
  bool (*expand_ok)(const struct Plan *p, const Kernel *ke, const Kernel *kd, const void *ctx);
  /* Rows at the head of their contraction's tiles (Kernel.headed): kernel kr, a row kernel whose one
   * per-point value P kernel kr + 1 (a contraction) reads as one whole factor along its reduction
   * (others may read P too: it is stored as well), joins kr + 1 when the renderer says each tile can
   * compute the rows it reads (NULL: never) */
  bool (*head_ok)(const struct Plan *p, const Kernel *kr, const Kernel *kc, int P, const void *ctx);
  const void *pool_ctx;   /* the renderer's context for pool_ok, expand_ok and head_ok */
} PlanOptions;

typedef struct Plan {
  Arena arena;
  TE *te;                         /* not owned; the plan adds expressions to its arena */
  PlanOptions opt;
  Kernel *kernels; int n_kernels;
  int *kernel_of;                 /* stage -> kernel computing it, -1 for sources and inlined */
  bool *inlined;                  /* stage inlined into its readers (never materialised) */
  bool *stored;                   /* stage has a buffer written by a kernel */
  const char **why;               /* stage -> reason it is materialised (NULL if inlined) */
  /* memory plan: intermediates (stored, not outputs) live in one arena */
  int64_t *offset;                /* stage -> byte offset in the arena, -1 if none */
  int64_t arena_bytes;            /* peak */
  int64_t bytes_read, bytes_written;
} Plan;

/* -- plan.c -- */

/* No source of its own: a host fallback or a collective. */
static inline bool plan_kernel_opaque(const Kernel *k) { return k->kind == KN_HOST || k->kind == KN_COLLECTIVE; }

PlanOptions plan_options(const kiln_options *o);
/* requires: te_check(te); keeps te stages; adds expressions to te's arena. */
kiln_status plan_build(TE *te, const PlanOptions *o, Plan **out);
void plan_free(Plan *p);
/* Invariants: every non-source stage computed once or inlined, loads of in-kernel stages at
 * the current point, launch order respects dependences. For tests and debug builds. */
kiln_status plan_check(const Plan *p);
bool plan_is_output(const Plan *p, int stage);
/* The last kernel of kernel k's chain (k itself when it is in none). */
int plan_chain_end(const Plan *p, int k);
/* Limits of an attention chain (the cuda dialect keeps a block's rows, the keys' and values'
 * tiles in shared memory): rows of at most this many points, contractions at most this deep
 * and wide, and CHAIN_ROWS rows a block. */
enum { PLAN_CHAIN_MAX_ROW = 512, PLAN_CHAIN_MAX_DEPTH = 256, PLAN_CHAIN_ROWS = 16 };
/* Limits of a pair: rows of at most a warp's lanes (the cuda dialect keeps a row's values one
 * a lane), a contraction at most this deep (a warp walks it for each row). A wide pair
 * (PlanOptions.pairs 2): rows of at most PLAN_PAIR_MAX_WIDE points (32 a lane), below the
 * library's work. */
enum { PLAN_PAIR_MAX_COLS = 32, PLAN_PAIR_MAX_DEPTH = 4096, PLAN_PAIR_MAX_WIDE = 1024 };
/* ... and a wide pair's contraction of at most this many multiply-adds: twice the library's, so that a
 * 256-row FFN layer of 1024 inputs (encoder4_d256's, 2^26, the library's alone) may race its tiles with the
 * layernorm in them against the library and a row kernel (cuda's banded pairs) */
#define PLAN_PAIR_WIDE_WORK (2 * PLAN_LIBRARY_WORK)
/* Sibling contractions a kernel may hold on a grid backend (one A tile, a B tile each); they
 * share one only below PLAN_LIBRARY_WORK multiply-adds each, where the cuda backend hands a
 * GEMM to its library (codegen/library.c reads it too). */
enum { PLAN_SIBLINGS_MAX = 4 };
#define PLAN_LIBRARY_WORK 67108864.0 /* 2^26 */
/* A scalar constant: rendered as a literal in the source, never a buffer. */
bool plan_is_baked(const TE *te, int stage);
/* The type a tensor-core product takes a factor in: a 16-bit load widened for an f32 sum is its
 * 16-bit type (the planner's default for 16-bit attention chains, the cuda backend's mma). */
kiln_dtype plan_factor_type(const Expr *e);

/* -- print.c -- */

/* The one printer (KILN_DEBUG=1, `kiln plan`, tests): kernels, items, buffers, reasons, totals. */
void plan_print(const Plan *p, FILE *f);
/* Graphviz: one cluster per kernel. */
void plan_dot(const Plan *p, FILE *f);

#endif
