/*
 * plan.c — the partition of a TE into kernels. Takes a TE, produces a Plan.
 *
 * Three passes, in order (each reads what the one before decided):
 *   1. fill_uses:   consumers of every stage (from the raw bodies).
 *   2. decide_inline: in topological order, an injective stage is inlined into its
 *      readers (recomputed there) unless it is an output, assigned, over the budget,
 *      recomputed many times with real arithmetic (a broadcast of a row statistic, a
 *      matmul prologue), or shared under cse=1. Each decision keeps its reason.
 *      Every materialised stage gets its body with inlined producers substituted.
 *   3. partition:   materialised stages, in topological order, join the kernel of
 *      their latest producer when their iteration space fits it (a reduction over the
 *      same domain, a pointwise value on the outer space, or on the row space of the
 *      kernel's first reduction) and every read of that kernel's stages hits the
 *      current point; else a sibling kernel reading the same input (horizontal
 *      fusion; on a grid backend two GEMM-shaped sums share a kernel only as siblings
 *      over one A); else they start a kernel of their own, and the reason is kept.
 * Then find_chains joins consecutive kernels that keep rows on chip (attention chains;
 * pairs of a narrow contraction and its rows' kernel), fill_stores decides which stages
 * are written (read by another kernel, output, assigned) and fill_memory places
 * intermediates in one arena by liveness.
 * The cost model is bytes: joining a kernel never adds memory traffic, a boundary
 * adds a write and a read of the tensor, so every join that is legal is taken;
 * inlining adds none unless it recomputes arithmetic (counted above).
 */
#include "plan.h"

#include <stdarg.h>
#include <string.h>

enum { DEFAULT_MAX_INPUTS = 24, DEFAULT_MAX_NODES = 4000 };
/* A GEMM operand's prologue (a bias add, a scale) may be recomputed up to this many times,
 * once per tile of the other factor, rather than stored by a kernel of its own: attention's
 * q * scale and k * scale before the score product (64 keys: twice at 32-wide tiles). */
enum { GEMM_RECOMPUTE_MAX = 4 };
enum { CHAIN_AUTO_SCORES = 1 << 20 };  /* attention chains by default: scores of at most this many elements
                                        * (or on tensor cores, chain_on_tensor_cores) */

PlanOptions plan_options(const kiln_options *o) {
  PlanOptions p = { .fuse = o ? o->fuse : 1, .cse = o ? o->cse : 0, .store_moved = o ? o->store_moved : 1,
                    .bounds_moves = o ? o->bounds_moves : 0, .chains = 0 };
  /* off by default on every backend. The cuda backend's tiles are 32 to 128 wide, but on the
   * H200 (2026-12-01, 06bbce1) recomputing prologues in its tiles was slower where it removed
   * kernels: encoder4_d256 0.193 -> 0.205 ms (40 -> 36 kernels), gpt_tiny 0.086 -> 0.095,
   * cnn_train_b32 97 -> 120 us; the tile reads are what its small GEMMs spend their time on.
   * The cpu's contraction loops reread an operand per output row. */
  p.gemm_reuse = o && o->gemm_reuse > 0 ? o->gemm_reuse : 0;
  /* attention chains: 1 always, 0 never; by default (2) on cuda for scores of at most
   * CHAIN_AUTO_SCORES elements, off for cpu. On the H200 (8eabbc1) the chain ran level with the
   * three kernels on encoder4_d256 and gpt_tiny (0.193 and 0.086 ms both ways) with 8 and 4
   * fewer launches, and 3 % behind them on bert_layer_b8s128 (1.5M scores); on the cpu its plain
   * loops ran behind the three kernels' tuned ones (encoder4_d256 26.6 against 10.0 ms). A chain on
   * tensor cores (16-bit) at any size: bert_layer_b8s128_bf16 (1.5M scores) 0.951 on the H100 and
   * 0.927 with the chain's layout on the H200 (2026-12-05, bench/results/2026-12-05-h200-rounding-chains.md) */
  const char *be = o && o->backend ? o->backend : "cpu";
  p.chains = o && o->attention >= 0 ? o->attention : !strcmp(be, "cuda") ? 2 : 0;
  /* a narrow contraction with the row kernel over its rows: 1 on, 0 off, by default on cuda
   * (H200: the shared mlp 0.027 -> 0.024 ms, the training steps 0.976-0.993) and off on cpu
   * (this 2-vCPU EPYC, 2 threads: the mlp 2.65 -> 2.68 ms; its loops over a row's columns
   * do not vectorise as the contraction's own loops do). Wide pairs (2) by default on cuda too, as
   * shared bands (cuda_pair_bands 3; on the H100, 2026-12-06: encoder4_d256 28 -> 24 launches 0.919,
   * gpt_tiny 16 -> 12 1.017; the warp-a-row form had run gpt_tiny from 0.087 to 0.135 ms on the H200) */
  p.pairs = o && o->gemm_rows >= 0 ? (o->gemm_rows > 2 ? 2 : o->gemm_rows) : !strcmp(be, "cuda") ? 2 : 0;
  /* a pair's tail: on by default where the renderer has it, cuda (the cpu's and glsl's pairs
   * have none) */
  p.pair_tails = !strcmp(be, "cuda") && (!o || o->pair_tails != 0);
  /* on cpu (lenet, one thread: its 2x2 max pools 160 -> 85 us, the model 3 % faster); not raced
   * on the grid backends, whose plans stay as they were */
  p.epilogue_ties = o && o->cpu_epilogue && !strcmp(be, "cpu");
  /* grid backends tile one contraction a kernel, or siblings over one A (1: siblings joined,
   * 2: not even those) */
  p.one_contraction = !strcmp(be, "cuda") ? (o && o->siblings == 0 ? 2 : 1) : 0;
  /* a reduction read only through a transpose computed in its reader's order: -1 (default) on;
   * 2 also through reshapes that merge its dims (raced: slower, see kiln.h) */
  p.reorder_sums = o ? (o->reorder_sums == 2 || o->reorder_sums == 3 ? o->reorder_sums : o->reorder_sums != 0) : 1;
  /* on by default: on the H100 (2026-12-05) bert_layer_b8s128_bf16 with its chain 0.0683 ms against
   * 0.0718 for the three kernels (9 launches to 7), the models that chain by default level
   * (encoder4_d256 0.990, gpt_tiny 0.987); on the H200 0.0672 -> 0.0622 with the tensor-core chain */
  p.chain_layout = !o || o->chain_layout != 0;
  p.max_inputs = o && o->max_inputs > 0 ? o->max_inputs : DEFAULT_MAX_INPUTS;
  p.max_nodes = o && o->max_nodes > 0 ? o->max_nodes : DEFAULT_MAX_NODES;
  return p;
}

typedef struct Ctx {
  Plan *p;
  TE *te;
  Expr **ib;           /* stage -> body with inlined producers (materialised stages) */
  int **cons; int *n_cons;  /* stage -> consumer stages */
  bool *needed;        /* computed: output, assigned, or read by a needed stage */
  bool *assigned;      /* stage is the value of an assign */
  bool *opaque_reader; /* read by an opaque stage: must be materialised */
  bool *updated;       /* a parameter some assign overwrites (an optimizer step's weights) */
  const bool *force;   /* stages to inline whatever the recompute rule says (NULL: none) */
} Ctx;

static const char *fmt(Plan *p, const char *f, ...) __attribute__((format(printf, 2, 3)));
static const char *fmt(Plan *p, const char *f, ...) {
  char buf[256];
  va_list ap;
  va_start(ap, f);
  vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  const char *s = arena_strdup(&p->arena, buf);
  return s ? s : "(no memory)";
}

kiln_dtype plan_factor_type(const Expr *e) {
  return e->kind == EX_CAST && e->dtype == KILN_F32 ? e->args[0]->dtype : e->dtype;
}

bool plan_is_baked(const TE *te, int stage) {
  const Stage *s = &te->stages[stage];
  return s->kind == ST_CONST && s->numel == 1 && s->data;
}

bool plan_is_output(const Plan *p, int stage) {
  for (int i = 0; i < p->te->n_outputs; i++)
    if (p->te->outputs[i] == stage) return true;
  return false;
}

static bool is_source(const Stage *s) {
  return s->kind == ST_INPUT || s->kind == ST_PARAM || s->kind == ST_CONST;
}

static int64_t red_numel(const Stage *s) {
  int64_t n = 1;
  for (int i = 0; i < s->n_red; i++) n *= s->red_shape[i];
  return n;
}

/* ---- small pointer set (distinct nodes, distinct stages) ---- */

typedef struct PtrSet { const void **slot; size_t cap, n; bool failed; } PtrSet;

static bool set_add(PtrSet *s, const void *k) {  /* true if newly added */
  if (s->n * 2 >= s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 64;
    const void **ns = kiln_calloc(cap, sizeof *ns);
    if (!ns) { s->failed = true; return false; }
    for (size_t i = 0; i < s->cap; i++)
      if (s->slot[i]) {
        size_t h = ((uintptr_t)s->slot[i] >> 4) & (cap - 1);
        while (ns[h]) h = (h + 1) & (cap - 1);
        ns[h] = s->slot[i];
      }
    kiln_free(s->slot);
    s->slot = ns;
    s->cap = cap;
  }
  size_t h = ((uintptr_t)k >> 4) & (s->cap - 1);
  while (s->slot[h]) {
    if (s->slot[h] == k) return false;
    h = (h + 1) & (s->cap - 1);
  }
  s->slot[h] = k;
  s->n++;
  return true;
}

static bool set_has(const PtrSet *s, const void *k) {
  if (!s->cap) return false;
  for (size_t h = ((uintptr_t)k >> 4) & (s->cap - 1); s->slot[h]; h = (h + 1) & (s->cap - 1))
    if (s->slot[h] == k) return true;
  return false;
}

static void set_free(PtrSet *s) { kiln_free(s->slot); memset(s, 0, sizeof *s); }

/* Distinct nodes of e, and whether any does real arithmetic (not index math, loads, selects).
 * With bounds_moves (`loads` non-NULL), arithmetic is an op on values read from memory: a
 * bounds test such as pad's ((i - 1) >= 0) & ((i - 1) < 14) combines bools, but of index math
 * only, so a pad, a shifted slice or an upsampling mask stays a move that its readers compose
 * into their index maps (a convolution's gradient reads its padded operand as the forward
 * pass reads its own padding). Without (kiln_options.bounds_moves 0, the default; `loads`
 * NULL) any op on bools or floats counts. Returns whether e reads memory; `loads` remembers
 * the nodes that do. */
static bool walk(const Expr *e, PtrSet *seen, PtrSet *loads, bool *arith) {
  if (!set_add(seen, e)) return loads && set_has(loads, e);
  bool reads = e->kind == EX_LOAD;
  for (int i = 0; i < e->n_args; i++) reads |= walk(e->args[i], seen, loads, arith);
  if ((e->kind == EX_UNARY || e->kind == EX_BINARY) && e->args[0]->dtype != KILN_I64 && (reads || !loads))
    *arith = true;
  if (reads && loads) set_add(loads, e);
  return reads;
}

static int64_t count_nodes(const Expr *e, bool *arith, bool bounds_moves) {
  PtrSet s = { 0 }, l = { 0 };
  bool a = false;
  walk(e, &s, bounds_moves ? &l : NULL, &a);  /* which nodes read memory matters only to bounds_moves */
  int64_t n = (int64_t)s.n;
  set_free(&s);
  set_free(&l);
  if (arith) *arith = a;
  return n;
}

typedef struct LoadList { const Expr **l; int n, cap; bool failed; } LoadList;

static void collect_load(const Expr *load, void *ctx) {
  LoadList *ll = ctx;
  if (ll->n == ll->cap) {
    int cap = ll->cap ? ll->cap * 2 : 16;
    const Expr **nl = kiln_realloc(ll->l, (size_t)cap * sizeof *nl);
    if (!nl) { ll->failed = true; return; }
    ll->l = nl;
    ll->cap = cap;
  }
  ll->l[ll->n++] = load;
}

static kiln_status loads_of(const Expr *e, LoadList *ll) {
  ll->n = 0;
  te_visit_loads(e, collect_load, ll);
  return ll->failed ? kiln_fail(KILN_ERR_NO_MEMORY, "plan: out of memory listing loads") : KILN_OK;
}

static int distinct_stages(const LoadList *ll, const TE *te) {
  int n = 0;
  for (int i = 0; i < ll->n; i++) {
    bool dup = false;
    for (int j = 0; j < i && !dup; j++) dup = ll->l[j]->src == ll->l[i]->src;
    if (!dup && !(te->stages[ll->l[i]->src].kind == ST_CONST && te->stages[ll->l[i]->src].numel == 1)) n++;
  }
  return n;
}

/* ---- pass 1: uses ---- */

static kiln_status fill_uses(Ctx *c) {
  TE *te = c->te;
  int n = te->n_stages;
  LoadList ll = { 0 };
  kiln_status st = KILN_OK;
  for (int s = 0; s < n && !st; s++) {
    const Stage *S = &te->stages[s];
    if (is_source(S) || !S->body) continue;
    if ((st = loads_of(S->body, &ll))) break;
    for (int i = 0; i < ll.n; i++) {
      int d = ll.l[i]->src;
      if (c->n_cons[d] && c->cons[d][c->n_cons[d] - 1] == s) continue;
      int *nc = kiln_realloc(c->cons[d], (size_t)(c->n_cons[d] + 1) * sizeof *nc);
      if (!nc) { st = kiln_fail(KILN_ERR_NO_MEMORY, "plan: out of memory"); break; }
      c->cons[d] = nc;
      nc[c->n_cons[d]++] = s;
      if (S->kind == ST_OPAQUE) c->opaque_reader[d] = true;
    }
  }
  kiln_free(ll.l);
  return st;
}

/* Loads of stage d in e (distinct index lists). */
static int count_loads_of(const Expr *e, int d) {
  LoadList ll = { 0 };
  if (loads_of(e, &ll)) { kiln_free(ll.l); return 1; }
  int n = 0;
  for (int i = 0; i < ll.n; i++) n += ll.l[i]->src == d;
  kiln_free(ll.l);
  return n;
}

/* ---- pass 2: inline decisions ---- */

static void ranges_of(const Stage *s, int64_t *lo, int64_t *hi) {
  for (int i = 0; i < s->rank; i++) { lo[i] = 0; hi[i] = s->shape[i] - 1; }
  for (int i = 0; i < s->n_red; i++) { lo[s->rank + i] = 0; hi[s->rank + i] = s->red_shape[i] - 1; }
}

static kiln_status inline_body(Ctx *c, int s) {
  const Stage *S = &c->te->stages[s];
  int64_t lo[2 * KILN_MAX_RANK], hi[2 * KILN_MAX_RANK];
  ranges_of(S, lo, hi);
  c->ib[s] = te_inline(c->te, S->body, c->p->inlined, lo, hi, S->rank + S->n_red);
  return c->ib[s] ? KILN_OK : kiln_fail(KILN_ERR_NO_MEMORY, "plan: out of memory inlining t%d", s);
}

/* Consumer C recomputes stage s dom times in all. When C is a contraction (a sum of a product)
 * that loads s in one factor only, a tiled GEMM reads that factor once per tile of the other
 * factor's outer extent n, not n times: with PlanOptions.gemm_reuse = r, dom counts ceil(n / r)
 * reads (the cuda backend's tiles are at least 32 wide; 0 leaves dom as it is). */
static int64_t tiled_reads(const Plan *p, const Stage *C, int s, int64_t dom) {
  int r = p->opt.gemm_reuse;
  const Expr *b = C->body;
  if (r <= 1 || C->kind != ST_REDUCE || C->rop != RO_SUM || b->kind != EX_BINARY || b->op != TB_MUL) return dom;
  int in0 = count_loads_of(b->args[0], s), in1 = count_loads_of(b->args[1], s);
  if ((in0 > 0) == (in1 > 0)) return dom;
  const Expr *own = in0 ? b->args[0] : b->args[1];
  int64_t n = 1;
  for (int v = 0; v < C->rank; v++)
    if (!te_uses_var(own, v)) n *= C->shape[v];
  return n > 1 ? dom / n * ((n + r - 1) / r) : dom;
}

/* A tie the byte count leaves open: arithmetic s on a reduction's result, of that result's
 * shape, read only by other reductions. Stored by the reduction's kernel (its epilogue) or
 * inlined into each reader, it moves the same bytes; inlined, the reader redoes it at every
 * read and carries it into its loop: under a 2x2 max pool, lenet's relu(conv + b) became a
 * NaN-aware select per tap that the cpu's vector loops would not take. The reason, or NULL. */
static const char *epilogue_tie(Ctx *c, int s, const LoadList *ll) {
  const TE *te = c->te;
  const Stage *S = &te->stages[s];
  if (!c->p->opt.epilogue_ties || c->n_cons[s] == 0) return NULL;
  int r = -1;
  for (int i = 0; i < ll->n; i++) {
    const Stage *L = &te->stages[ll->l[i]->src];
    if (L->kind == ST_REDUCE && L->rank == S->rank && !memcmp(L->shape, S->shape, sizeof(int64_t) * (size_t)S->rank)) r = L->id;
  }
  if (r < 0) return NULL;
  for (int i = 0; i < c->n_cons[s]; i++)
    if (te->stages[c->cons[s][i]].kind != ST_REDUCE) return NULL;
  int first = c->cons[s][0];
  return fmt(c->p, "computed once after t%d, not at each read by t%d (%s)", r, first,
             te->stages[first].op >= 0 && te->stages[first].op < OP_COUNT ? op_names[te->stages[first].op] : "?");
}

/* Is s a reduction's result (its f32 sum) rounded to f16 or bf16, point for point? Inlined, each
 * reader in another kernel would load the f32 sum, twice the bytes, and round it again; kept, it
 * joins the reduction's kernel (same space) and is stored narrow where another kernel reads it,
 * a plain 16-bit load that tensor-core tiles copy straight into shared memory. */
static bool narrows_reduction(Ctx *c, int s) {
  const Stage *S = &c->te->stages[s];
  const Expr *b = c->ib[s];
  if ((S->dtype != KILN_BF16 && S->dtype != KILN_F16) || b->kind != EX_CAST || b->args[0]->kind != EX_LOAD) return false;
  const Expr *L = b->args[0];
  const Stage *R = &c->te->stages[L->src];
  if (R->kind != ST_REDUCE || R->rank != S->rank || memcmp(R->shape, S->shape, sizeof(int64_t) * (size_t)S->rank)) return false;
  for (int i = 0; i < L->n_args; i++)
    if (L->args[i]->kind != EX_VAR || L->args[i]->var != i) return false;
  return true;
}

/* Why injective stage s must be materialised, or NULL to inline it. *recompute: the reason
 * is the recompute rule (not an output, assign, opaque reader or budget). */
static const char *must_materialise(Ctx *c, int s, LoadList *ll, bool *recompute) {
  Plan *p = c->p;
  TE *te = c->te;
  const Stage *S = &te->stages[s];
  if (!p->opt.fuse) return "eager";
  if (plan_is_output(p, s)) return "output";
  if (c->assigned[s]) return "assigned to a parameter";
  if (c->opaque_reader[s]) return "read by an opaque op";
  bool arith;
  int64_t nodes = count_nodes(c->ib[s], &arith, p->opt.bounds_moves);
  if (nodes > p->opt.max_nodes) return fmt(p, "budget: %lld nodes", (long long)nodes);
  if (loads_of(c->ib[s], ll)) return "out of memory";
  int nin = distinct_stages(ll, te);
  if (nin > p->opt.max_inputs) return fmt(p, "budget: %d inputs", nin);
  if (!arith && narrows_reduction(c, s)) return "a reduction's result rounded to 16 bits where it is computed";
  if (!arith) return NULL;  /* pure movement: free to recompute anywhere */
  if (c->force && c->force[s]) return NULL;
  *recompute = true;
  if (p->opt.cse && c->n_cons[s] > 1) return fmt(p, "t%d: read by %d stages (cse)", s, c->n_cons[s]);
  /* a recompute that reads a parameter the run overwrites has to come before that update
   * (a training step's relu(x @ W1 + b1) read again by dW2 would order dW2 before b1's
   * update, one more phase); such a value is stored once, as before */
  bool updated = false;
  for (int i = 0; i < ll->n && !updated; i++) updated = c->updated[ll->l[i]->src];
  for (int i = 0; i < c->n_cons[s]; i++) {
    const Stage *C = &te->stages[c->cons[s][i]];
    int64_t all = C->numel * red_numel(C) * count_loads_of(C->body, s);
    int64_t dom = updated ? all : tiled_reads(p, C, s, all);
    int64_t allowed = dom < all ? GEMM_RECOMPUTE_MAX : 1;
    if (S->numel > 0 && dom > allowed * S->numel)
      return fmt(p, "t%d: recomputed %lldx by t%d (%s)", s, (long long)(dom / S->numel), C->id,
                 C->op >= 0 && C->op < OP_COUNT ? op_names[C->op] : "?");
  }
  return epilogue_tie(c, s, ll);
}

/* The stage that body e moves, or -1: e does no arithmetic and loads exactly one stage
 * (constants folded into the source do not count). */
static int moved_stage(Ctx *c, const Expr *e, LoadList *ll) {
  bool arith;
  count_nodes(e, &arith, c->p->opt.bounds_moves);
  if (arith || loads_of(e, ll)) return -1;
  int d = -1;
  for (int i = 0; i < ll->n; i++) {
    int x = ll->l[i]->src;
    if (plan_is_baked(c->te, x) || x == d) continue;
    if (d >= 0) return -1;
    d = x;
  }
  return d;
}

/* Stage s, which the recompute rule materialises, only moves data (a transpose, a reshape,
 * a slice) of values an inlined arithmetic stage computes (x @ W + b, or a normalised row,
 * before the head split or the layout change): the arithmetic stage a, reached through
 * inlined moves, or -1. Materialising a instead stores the same bytes, but in a's own
 * iteration space, where a joins the kernel that produces its operands (the GEMM's epilogue,
 * the row kernel's last loop); the move then composes into its readers' index maps. */
static int stored_before_move(Ctx *c, int s, LoadList *ll) {
  const TE *te = c->te;
  int d = moved_stage(c, te->stages[s].body, ll);
  for (int hops = 0; d >= 0 && hops < 64; hops++) {
    const Stage *D = &te->stages[d];
    if (is_source(D) || D->kind != ST_INJECTIVE || !c->p->inlined[d]) return -1;
    int next = moved_stage(c, D->body, ll);
    if (next < 0) {  /* store_moved 2: a where, its own body a select of loads, judged by what it inlines */
      bool arith;
      count_nodes(c->p->opt.store_moved == 2 && c->ib[d] ? c->ib[d] : D->body, &arith, c->p->opt.bounds_moves);
      return arith ? d : -1;
    }
    d = next;
  }
  return -1;
}

static kiln_status decide_inline(Ctx *c) {
  TE *te = c->te;
  Plan *p = c->p;
  LoadList ll = { 0 };
  kiln_status st = KILN_OK;
  for (int s = 0; s < te->n_stages && !st; s++) {
    const Stage *S = &te->stages[s];
    if (is_source(S)) continue;
    if (S->kind == ST_OPAQUE) { p->why[s] = "opaque op"; continue; }
    if ((st = inline_body(c, s))) break;
    if (S->kind != ST_INJECTIVE) { p->why[s] = "reduction"; continue; }
    bool recompute = false;
    const char *why = must_materialise(c, s, &ll, &recompute);
    int a = why && recompute && p->opt.store_moved ? stored_before_move(c, s, &ll) : -1;
    if (a >= 0) {
      p->inlined[a] = false;
      p->why[a] = fmt(p, "moved by t%d (%s), which would be %s", s,
                      S->op >= 0 && S->op < OP_COUNT ? op_names[S->op] : "?", why);
      if ((st = inline_body(c, s))) break;
      recompute = false;
      why = must_materialise(c, s, &ll, &recompute);
    }
    if (why) p->why[s] = why;
    else p->inlined[s] = true;
  }
  kiln_free(ll.l);
  ll = (LoadList){ 0 };
  if (st) return st;
  /* needed: walk back from outputs and assigns over the bodies that will run */
  for (int i = 0; i < te->n_outputs; i++) c->needed[te->outputs[i]] = true;
  for (int i = 0; i < te->n_assigns; i++) c->needed[te->assigns[i].value] = true;
  for (int s = te->n_stages - 1; s >= 0 && !st; s--) {
    if (!c->needed[s] || is_source(&te->stages[s]) || p->inlined[s]) continue;
    const Expr *body = te->stages[s].kind == ST_OPAQUE ? te->stages[s].body : c->ib[s];
    if (!body) continue;
    if ((st = loads_of(body, &ll))) break;
    for (int i = 0; i < ll.n; i++) c->needed[ll.l[i]->src] = true;
  }
  kiln_free(ll.l);
  return st;
}

/* ---- pass 3: partition ---- */

static Item *kernel_item(Plan *p, const Kernel *k, int stage) {
  (void)p;
  for (int i = 0; i < k->n_items; i++)
    if (k->items[i].stage == stage) return &k->items[i];
  return NULL;
}

static kiln_status push_item(Plan *p, Kernel *k, Item it) {
  if (k->n_items == k->cap_items) {
    int cap = k->cap_items ? 2 * k->cap_items : 4;
    Item *ni = arena_alloc(&p->arena, (size_t)cap * sizeof *ni);
    if (!ni) return kiln_fail(KILN_ERR_NO_MEMORY, "plan: out of memory");
    if (k->n_items) memcpy(ni, k->items, (size_t)k->n_items * sizeof *ni);
    k->items = ni;
    k->cap_items = cap;
  }
  k->items[k->n_items++] = it;
  if (it.step + 1 > k->n_steps) k->n_steps = it.step + 1;
  return KILN_OK;
}

static void kernel_ranges(const Kernel *k, int64_t *lo, int64_t *hi) {
  for (int i = 0; i < k->rank; i++) { lo[i] = 0; hi[i] = k->shape[i] - 1; }
  for (int i = 0; i < k->n_red; i++) { lo[k->rank + i] = 0; hi[k->rank + i] = k->red_shape[i] - 1; }
}

/* Row space of a reduction kernel: the reduce reads one stage at indices that are a
 * permutation of the kernel's vars, so every point of that stage's shape is one (outer,
 * inner) point and a pointwise value of that shape can be computed inside the loop. */
static void find_row_space(Ctx *c, Kernel *k, const Expr *body) {
  LoadList ll = { 0 };
  if (loads_of(body, &ll) || ll.n == 0) { kiln_free(ll.l); return; }
  const Expr *L = ll.l[0];
  bool ok = true;
  for (int i = 1; i < ll.n && ok; i++) {
    const Stage *a = &c->te->stages[L->src], *b = &c->te->stages[ll.l[i]->src];
    ok = ll.l[i]->n_args == L->n_args && a->rank == b->rank &&
         !memcmp(a->shape, b->shape, (size_t)a->rank * sizeof a->shape[0]) &&
         !memcmp(ll.l[i]->args, L->args, (size_t)L->n_args * sizeof L->args[0]);
  }
  const Stage *X = &c->te->stages[L->src];
  int nv = k->rank + k->n_red, seen[2 * KILN_MAX_RANK] = { 0 };
  int64_t dom[2 * KILN_MAX_RANK];
  for (int i = 0; i < k->rank; i++) dom[i] = k->shape[i];
  for (int i = 0; i < k->n_red; i++) dom[k->rank + i] = k->red_shape[i];
  for (int i = 0; i < L->n_args && ok; i++) {
    const Expr *a = L->args[i];
    if (a->kind == EX_CONST) ok = a->c.i == 0 && X->shape[i] == 1;
    else if (a->kind == EX_VAR) ok = a->var < nv && dom[a->var] == X->shape[i] && !seen[a->var]++;
    else ok = false;
  }
  for (int v = 0; v < nv && ok; v++) ok = seen[v] || dom[v] == 1;
  if (ok) {
    k->has_row = true;
    k->row_stage_shape_rank = X->rank;
    memcpy(k->row_shape, X->shape, sizeof k->row_shape);
    for (int i = 0; i < L->n_args; i++) k->row_map[i] = L->args[i];
  }
  kiln_free(ll.l);
}

static kiln_status new_kernel(Ctx *c, int s, const char *why) {
  Plan *p = c->p;
  const Stage *S = &c->te->stages[s];
  Kernel *k = &p->kernels[p->n_kernels];
  memset(k, 0, sizeof *k);
  k->id = p->n_kernels;
  k->anchor = s;
  k->why = why;
  k->rank = S->rank;
  memcpy(k->shape, S->shape, sizeof k->shape);
  k->outer_numel = S->numel;
  k->inner_numel = 1;
  Item it = { .stage = s, .body = c->ib[s] };
  if (S->kind == ST_OPAQUE) {
    k->kind = te_is_collective(S) ? KN_COLLECTIVE : KN_HOST;
    it.kind = IT_OUTER;
    it.step = 1;
    it.body = S->body;
  } else if (S->kind == ST_REDUCE) {
    k->kind = KN_REDUCE;
    k->n_red = S->n_red;
    memcpy(k->red_shape, S->red_shape, sizeof k->red_shape);
    k->inner_numel = red_numel(S);
    it.kind = IT_ACC;
    it.step = 0;
    if (p->opt.fuse) find_row_space(c, k, S->body);
  } else {
    k->kind = KN_POINTWISE;
    it.kind = IT_OUTER;
    it.step = 1;
  }
  k->nodes = count_nodes(it.body, NULL, false);
  LoadList ll = { 0 };
  if (loads_of(it.body, &ll) == KILN_OK) k->n_ins = distinct_stages(&ll, c->te);  /* budget estimate */
  kiln_free(ll.l);
  p->kernel_of[s] = k->id;
  p->n_kernels++;
  return push_item(p, k, it);
}

static bool same_shape(int ra, const int64_t *a, int rb, const int64_t *b) {
  return ra == rb && !memcmp(a, b, (size_t)ra * sizeof *a);
}

/* Is load L (in kernel vars) of an ACC/OUTER item's stage at the current outer point? */
static bool at_outer_point(const Kernel *k, const Expr *L) {
  if (L->n_args != k->rank) return false;
  for (int i = 0; i < k->rank; i++) {
    const Expr *a = L->args[i];
    if (a->kind == EX_VAR && a->var == i) continue;
    if (a->kind == EX_CONST && a->c.i == 0 && k->shape[i] == 1) continue;
    return false;
  }
  return true;
}

/* Does some item of k already load stage d (so joining adds no input)? */
static bool kernel_reads(const Kernel *k, int d) {
  LoadList ll = { 0 };
  bool found = false;
  for (int i = 0; i < k->n_items && !found; i++) {
    if (loads_of(k->items[i].body, &ll)) break;
    for (int j = 0; j < ll.n && !found; j++) found = ll.l[j]->src == d;
  }
  kiln_free(ll.l);
  return found;
}

/* A sum of a product whose factors each have an outer var the other lacks (x @ W: the rows
 * and the columns), the shape a grid backend tiles as a GEMM. */
static bool tiled_product(const TE *te, int stage, const Expr *body, int rank) {
  if (te->stages[stage].rop != RO_SUM || !body || body->kind != EX_BINARY || body->op != TB_MUL) return false;
  bool only_a = false, only_b = false;
  for (int v = 0; v < rank; v++) {
    bool ua = te_uses_var(body->args[0], v), ub = te_uses_var(body->args[1], v);
    only_a |= ua && !ub, only_b |= ub && !ua;
  }
  return only_a && only_b;
}

/* The factor of a tiled product that a grid backend stages as A: the one that reads the first
 * outer var (of more than one point) not read by both (x of x @ W). */
static const Expr *tiled_a(const Expr *body, const Kernel *k) {
  for (int v = 0; v < k->rank; v++) {
    bool ua = te_uses_var(body->args[0], v), ub = te_uses_var(body->args[1], v);
    if (k->shape[v] > 1 && ua != ub) return ua ? body->args[0] : body->args[1];
  }
  return NULL;
}

/* May tiled product `body` join kernel k's? Siblings over the same A (q, k and v from one
 * input), at most PLAN_SIBLINGS_MAX of them: a grid backend tiles them as one GEMM with a B
 * tile each. */
static bool joins_contractions(const TE *te, const Kernel *k, const Expr *body) {
  const Expr *a = tiled_a(body, k);
  int n = 1;
  /* where the cuda backend gives each to the library, three library calls beat one generated
   * GEMM over the three (H200, siblings_1024x768x768: 0.108 against 0.173 ms); below, one
   * GEMM beats three in one launch (siblings_128x256x256: 0.0092 against 0.0116) */
  if ((double)k->outer_numel * (double)k->inner_numel >= PLAN_LIBRARY_WORK) return false;
  for (int i = 0; i < k->n_items; i++) {
    const Item *it = &k->items[i];
    if (it->kind != IT_ACC || !tiled_product(te, it->stage, it->body, k->rank)) continue;
    if (!a || tiled_a(it->body, k) != a || ++n > PLAN_SIBLINGS_MAX) return false;
  }
  return true;
}

/* Is stage S's shape kernel k's outer shape but for dims of 1 (a sum over [32,14,14] kept
 * as [1,32,1,1], its reader reshaped to [32])? Then map[i] is the kernel's var for S's dim i
 * (0 for S's own dims of 1), and the row-major offsets of S and of the kernel's outer points
 * are the same numbers, so an item of S stores at the kernel's point. */
static bool squeeze_map(TE *te, const Stage *S, const Kernel *k, Expr **map) {
  int j = 0;
  for (int i = 0; i < S->rank; i++) {
    if (S->shape[i] == 1) {
      if (!(map[i] = te_const_i(te, KILN_I64, 0))) return false;
      continue;
    }
    while (j < k->rank && k->shape[j] == 1) j++;
    if (j == k->rank || k->shape[j] != S->shape[i]) return false;
    if (!(map[i] = te_var(te, j++))) return false;
  }
  while (j < k->rank && k->shape[j] == 1) j++;
  return j == k->rank && S->rank > 0;
}

/* Tries to place stage s in kernel k; on failure returns false and sets *why. */
static bool try_join(Ctx *c, Kernel *k, int s, const char **why, kiln_status *st) {
  Plan *p = c->p;
  TE *te = c->te;
  const Stage *S = &te->stages[s];
  Item it = { .stage = s };
  Expr *it_map[KILN_MAX_RANK];
  int64_t lo[2 * KILN_MAX_RANK], hi[2 * KILN_MAX_RANK];
  kernel_ranges(k, lo, hi);
  int nv = k->rank + k->n_red;
  if (plan_kernel_opaque(k) || S->kind == ST_OPAQUE) { *why = "opaque op"; return false; }
  if (S->kind == ST_REDUCE) {
    if (k->n_red == 0 || !same_shape(S->rank, S->shape, k->rank, k->shape) ||
        !same_shape(S->n_red, S->red_shape, k->n_red, k->red_shape)) {
      *why = fmt(p, "t%d: other iteration space", s);
      return false;
    }
    it.kind = IT_ACC;
    it.body = te_simplify(te, c->ib[s], lo, hi, nv);
  } else if (k->has_row && same_shape(S->rank, S->shape, k->row_stage_shape_rank, k->row_shape)) {
    it.kind = IT_INNER;
    it.body = te_substitute(te, c->ib[s], k->row_map, S->rank);
    if (it.body) it.body = te_simplify(te, it.body, lo, hi, nv);
  } else if (same_shape(S->rank, S->shape, k->rank, k->shape)) {
    it.kind = IT_OUTER;
    it.body = te_simplify(te, c->ib[s], lo, hi, nv);
  } else if (squeeze_map(te, S, k, it_map)) {  /* a bias's update [16] after its sum [1,16,1,1] */
    it.kind = IT_OUTER;
    it.body = te_substitute(te, c->ib[s], it_map, S->rank);
    if (it.body) it.body = te_simplify(te, it.body, lo, hi, nv);
  } else {
    *why = fmt(p, "t%d: other iteration space", s);
    return false;
  }
  if (!it.body) { *st = kiln_fail(KILN_ERR_NO_MEMORY, "plan: out of memory"); return false; }
  LoadList ll = { 0 };
  if ((*st = loads_of(it.body, &ll))) return false;
  int step = it.kind == IT_OUTER ? 1 : 0, inner_dep = -1, new_ins = 0;
  bool ok = true;
  for (int i = 0; i < ll.n && ok; i++) {
    const Expr *L = ll.l[i];
    int d = L->src;
    if (p->kernel_of[d] != k->id) {
      if (p->kernel_of[d] > k->id) { *why = fmt(p, "t%d: reads a later kernel", s); ok = false; }
      bool dup = plan_is_baked(te, d);
      for (int j = 0; j < i && !dup; j++) dup = ll.l[j]->src == d;
      if (!dup && !kernel_reads(k, d)) new_ins++;
      continue;
    }
    Item *di = kernel_item(p, k, d);
    if (di->kind == IT_INNER) {
      bool hit = it.kind != IT_OUTER && L->n_args == k->row_stage_shape_rank &&
                 !memcmp(L->args, k->row_map, (size_t)L->n_args * sizeof L->args[0]);
      if (!hit) { *why = fmt(p, "t%d: read at another index by t%d", d, s); ok = false; break; }
      if (di->step > step) step = di->step;
      if (inner_dep < di->step) inner_dep = di->step;
      continue;
    }
    if (!at_outer_point(k, L)) { *why = fmt(p, "t%d: read at another index by t%d", d, s); ok = false; break; }
    int need = di->kind == IT_ACC ? di->step + 1 : di->step;  /* first odd step after it */
    if (it.kind != IT_OUTER) need = (need + 1) & ~1;            /* next loop */
    if (need > step) step = need;
  }
  kiln_free(ll.l);
  if (!ok) return false;
  if (it.kind == IT_OUTER && !(step & 1)) step++;
  if (inner_dep >= 0 && step != inner_dep) { *why = fmt(p, "t%d: needs a finished row of an inner value", s); return false; }
  int64_t nodes = k->nodes + count_nodes(it.body, NULL, false);
  if (nodes > p->opt.max_nodes) { *why = fmt(p, "budget: %lld nodes", (long long)nodes); return false; }
  if (k->n_ins + new_ins > p->opt.max_inputs) { *why = fmt(p, "budget: %d inputs", k->n_ins + new_ins); return false; }
  /* sibling contractions (q, k and v from one input) share a kernel on a grid backend only
   * over one A, which it tiles once for all of them; others in one kernel would leave the
   * tiled shape (a point a thread, each reading its rows and columns alone) */
  if (p->opt.one_contraction && it.kind == IT_ACC && tiled_product(te, s, it.body, k->rank) &&
      (p->opt.one_contraction == 2 || !joins_contractions(te, k, it.body))) {
    *why = fmt(p, "t%d: another contraction over this space, not a sibling over the same A (each its own tiled kernel)", s);
    return false;
  }
  it.step = step;
  if ((*st = push_item(p, k, it))) return false;
  k->nodes = nodes;
  k->n_ins += new_ins;  /* an estimate for the budget; fill_io recounts */
  if (k->kind == KN_REDUCE && (it.kind == IT_INNER || step >= 2)) k->kind = KN_ROW;
  p->kernel_of[s] = k->id;
  return true;
}

static bool shares_input(Ctx *c, const Kernel *k, int s) {
  LoadList a = { 0 }, b = { 0 };
  bool found = false;
  if (!loads_of(c->ib[s], &a))
    for (int i = 0; i < k->n_items && !found; i++) {
      if (loads_of(k->items[i].body, &b)) break;
      for (int x = 0; x < a.n && !found; x++)
        for (int y = 0; y < b.n && !found; y++)
          found = a.l[x]->src == b.l[y]->src && c->te->stages[a.l[x]->src].numel > 1;
    }
  kiln_free(a.l);
  kiln_free(b.l);
  return found;
}

static kiln_status place(Ctx *c, int s) {
  Plan *p = c->p;
  const Stage *S = &c->te->stages[s];
  if (te_is_collective(S)) return new_kernel(c, s, "collective: the mean over the ranks, by the communicator");
  if (!p->opt.fuse || S->kind == ST_OPAQUE) return new_kernel(c, s, p->opt.fuse ? "opaque op" : "eager");
  LoadList ll = { 0 };
  kiln_status st = loads_of(c->ib[s], &ll);
  int kmax = -1;
  for (int i = 0; i < ll.n; i++)
    if (p->kernel_of[ll.l[i]->src] > kmax) kmax = p->kernel_of[ll.l[i]->src];
  kiln_free(ll.l);
  if (st) return st;
  const char *why = "first kernel";
  if (kmax >= 0 && try_join(c, &p->kernels[kmax], s, &why, &st)) return KILN_OK;
  if (st) return st;
  /* horizontal: a recent sibling that reads one of the same inputs; a stage that reads no
   * kernel's stage at all (a sum of the labels) depends on nothing computed, so any recent
   * kernel of its iteration space takes it */
  const char *sibling = NULL;  /* why the nearest sibling that shares an input refused */
  int ks = -1;
  for (int k = p->n_kernels - 1; k >= 0 && k >= kmax && k >= p->n_kernels - 8; k--) {
    const char *w2 = NULL;
    bool shares = k != kmax && shares_input(c, &p->kernels[k], s);
    if (k == kmax || (kmax >= 0 && !shares)) continue;
    if (try_join(c, &p->kernels[k], s, &w2, &st)) return KILN_OK;
    if (st) return st;
    if (shares && !sibling) sibling = w2, ks = k;
  }
  if (kmax < 0 && p->n_kernels)
    why = sibling ? fmt(p, "t%d: no producer kernel; sibling k%d: %s", s, ks, sibling)
                  : fmt(p, "t%d: no producer kernel, no sibling fits", s);
  return new_kernel(c, s, why);
}

/* ---- attention chains ----
 * Three consecutive kernels: KC a contraction S[.., i, j] = sum_d A[.., i, d] B[.., j, d] (its
 * epilogue items per point), KR a row kernel over S's rows (softmax: max, sum, the normalised
 * row P as its one row value, in its last loop), KO a contraction O[.., i, e] = sum_j P[.., i, j]
 * V[.., j, e]. When nothing else reads S, P or the row statistics, the three run as one kernel
 * that keeps a block's rows of S (then P) on chip: the scores never reach memory. The chain is
 * found from the expressions (which stage each load reads, at which index), never from op
 * names, and only within the limits of plan.h (a block's rows, the keys' and the values'
 * tiles in shared memory). */

/* Every load in e of a stage computed by kernels lo..hi is at the kernel's point given by
 * want (its index list, n entries); with want NULL there must be none. */
static bool chain_loads_at(Ctx *c, const Expr *e, int lo, int hi, Expr *const *want, int n, LoadList *ll) {
  if (loads_of(e, ll)) return false;
  for (int i = 0; i < ll->n; i++) {
    const Expr *L = ll->l[i];
    int k = c->p->kernel_of[L->src];
    if (k < lo || k > hi) continue;
    if (!want || L->n_args != n || memcmp(L->args, want, (size_t)n * sizeof *want)) return false;
  }
  return true;
}

/* The one accumulation of reduction kernel k, every other item after it, per point; or NULL. */
static const Item *one_accumulation(const Kernel *k) {
  const Item *acc = NULL;
  for (int i = 0; k->kind == KN_REDUCE && i < k->n_items; i++) {
    const Item *it = &k->items[i];
    if (it->kind == IT_ACC) {
      if (acc || it->step != 0) return NULL;
      acc = it;
    } else if (it->kind != IT_OUTER || it->step != 1) return NULL;
  }
  return acc;
}

/* The one accumulation of a contraction kernel (a sum of a product; the other items after
 * it, per point), or NULL. */
static const Item *contraction_of(const Plan *p, const Kernel *k, int min_rank) {
  if (k->kind != KN_REDUCE || k->rank < min_rank || k->rank > KILN_MAX_RANK) return NULL;
  if (min_rank >= 3 && k->n_red != 1) return NULL;
  const Item *acc = one_accumulation(k);
  if (!acc) return NULL;
  const Stage *S = &p->te->stages[acc->stage];
  const Expr *b = acc->body;
  if (S->rop != RO_SUM || S->dtype != KILN_F32 || b->kind != EX_BINARY || b->op != TB_MUL) return NULL;
  return acc;
}

static bool read_elsewhere(Ctx *c, int s, int lo, int hi, LoadList *ll) {
  Plan *p = c->p;
  if (plan_is_output(p, s) || c->assigned[s]) return true;
  for (int k = 0; k < p->n_kernels; k++) {
    if (k >= lo && k <= hi) continue;
    for (int i = 0; i < p->kernels[k].n_items; i++) {
      if (loads_of(p->kernels[k].items[i].body, ll)) return true;
      for (int j = 0; j < ll->n; j++)
        if (ll->l[j]->src == s) return true;
    }
  }
  return false;
}

/* KR = kernel kc + 1, a row kernel over the rows of contraction kc: its row map is the identity
 * (S[.., i, j] at the row var j), and its items read kc's stages only at the row point, and
 * only one of them (the row's values). */
static bool rows_read_one(Ctx *c, int kc, LoadList *ll) {
  Plan *p = c->p;
  const Kernel *KR = &p->kernels[kc + 1];
  int n = KR->rank, x = -1;
  for (int v = 0; v < n; v++) {
    const Expr *m = KR->row_map[v];
    if (!m || m->kind != EX_VAR || m->var != (v < n - 1 ? v : n)) return false;
  }
  for (int i = 0; i < KR->n_items; i++) {
    if (!chain_loads_at(c, KR->items[i].body, kc, kc, KR->row_map, n, ll)) return false;
    for (int j = 0; j < ll->n; j++)
      if (p->kernel_of[ll->l[j]->src] == kc) {
        if (x >= 0 && x != ll->l[j]->src) return false;
        x = ll->l[j]->src;
      }
  }
  return x >= 0;
}

static bool chain_fits(Ctx *c, int kc, LoadList *ll) {
  Plan *p = c->p;
  TE *te = c->te;
  Kernel *KC = &p->kernels[kc], *KR = &p->kernels[kc + 1], *KO = &p->kernels[kc + 2];
  const Item *ac = contraction_of(p, KC, 3), *ao = contraction_of(p, KO, 3);
  if (!ac || !ao || KR->kind != KN_ROW || !KR->has_row || KR->n_red != 1) return false;
  int n = KC->rank;
  int64_t L = KC->shape[n - 1], D = KC->red_shape[0], E = KO->shape[n - 1];
  if (KR->rank != n || KO->rank != n || KR->row_stage_shape_rank != n || KR->red_shape[0] != L ||
      KO->red_shape[0] != L || KR->shape[n - 1] != 1)
    return false;
  for (int v = 0; v < n - 1; v++)
    if (KR->shape[v] != KC->shape[v] || KO->shape[v] != KC->shape[v] || KR->row_shape[v] != KC->shape[v]) return false;
  if (KR->row_shape[n - 1] != L || L > PLAN_CHAIN_MAX_ROW || D > PLAN_CHAIN_MAX_DEPTH || E > PLAN_CHAIN_MAX_DEPTH)
    return false;
  /* the cuda block's shared memory: the rows' queries [R][D+4], keys [L][D+4], values [L][E+4]
   * and rows [R][L+4] in floats, at most 96 KB */
  int64_t R = PLAN_CHAIN_ROWS;
  if ((R * (D + 4) + L * (D + 4) + L * (E + 4) + R * (L + 4)) * 4 > 96 * 1024) return false;
  /* KR reads KC's stages at its row point (rows_read_one), and its one row value P is in
   * its last loop */
  if (!rows_read_one(c, kc, ll)) return false;
  const Item *P = NULL;
  for (int i = 0; i < KR->n_items; i++) {
    const Item *it = &KR->items[i];
    if (it->kind == IT_INNER) {
      if (P) return false;
      P = it;
    }
  }
  if (!P || P->step != KR->n_steps - 1) return false;
  /* KC's factors: A free of j, B free of i; its epilogue reads only its own point */
  const Expr *b = ac->body;
  int ai = te_uses_var(b->args[0], n - 1) ? 1 : 0;
  if (te_uses_var(b->args[ai], n - 1) || te_uses_var(b->args[1 - ai], n - 2)) return false;
  /* KO: one factor reads P at (.., i, j) and nothing else of the chain, the other (V) reads
   * none of it and is free of i; the epilogue reads nothing of KC or KR */
  Expr *at[KILN_MAX_RANK];
  for (int v = 0; v < n - 1; v++) at[v] = te_var(te, v);
  at[n - 1] = te_var(te, n);
  const Expr *f = ao->body;
  int pi = -1;
  for (int x = 0; x < 2; x++) {
    if (loads_of(f->args[x], ll)) return false;
    for (int j = 0; j < ll->n; j++)
      if (ll->l[j]->src == P->stage) pi = x;
  }
  if (pi < 0 || !chain_loads_at(c, f->args[pi], kc, kc + 1, at, n, ll)) return false;
  if (loads_of(f->args[pi], ll)) return false;
  for (int j = 0; j < ll->n; j++)
    if (p->kernel_of[ll->l[j]->src] >= kc && p->kernel_of[ll->l[j]->src] <= kc + 1 && ll->l[j]->src != P->stage)
      return false;
  if (!chain_loads_at(c, f->args[1 - pi], kc, kc + 1, NULL, 0, ll) || te_uses_var(f->args[1 - pi], n - 2)) return false;
  for (int i = 0; i < KO->n_items; i++)
    if (KO->items[i].kind != IT_ACC && !chain_loads_at(c, KO->items[i].body, kc, kc + 1, NULL, 0, ll)) return false;
  /* what KC and KR compute stays in the chain */
  for (int k = kc; k <= kc + 1; k++)
    for (int i = 0; i < p->kernels[k].n_items; i++)
      if (read_elsewhere(c, p->kernels[k].items[i].stage, kc, kc + 2, ll)) return false;
  return true;
}

/* The chain at kc (chain_fits) with both products' factors and its rows' value all bf16 (or all
 * f16), its depths multiples of the mma's: the cuda backend takes it on tensor cores
 * (cg_chain_mma), where it won at any size measured (bert_layer_b8s128_bf16, 1.5M scores). */
static bool chain_on_tensor_cores(Ctx *c, int kc) {
  Plan *p = c->p;
  const Kernel *KC = &p->kernels[kc], *KR = &p->kernels[kc + 1], *KO = &p->kernels[kc + 2];
  const Item *ac = contraction_of(p, KC, 3), *ao = contraction_of(p, KO, 3);
  kiln_dtype t = plan_factor_type(ac->body->args[0]);
  if (t != KILN_BF16 && t != KILN_F16) return false;
  for (int x = 0; x < 2; x++)
    if (plan_factor_type(ac->body->args[x]) != t || plan_factor_type(ao->body->args[x]) != t) return false;
  for (int i = 0; i < KR->n_items; i++)
    if (KR->items[i].kind == IT_INNER && c->te->stages[KR->items[i].stage].dtype != t) return false;
  int n = KC->rank;
  return KC->shape[n - 1] % 16 == 0 && KC->red_shape[0] % 16 == 0 && KO->shape[n - 1] % 8 == 0;
}

/* A narrow contraction and the row kernel over its rows (a classifier's logits and their
 * softmax, or the loss on them): KC a sum over its reduction of a product of two factors, its
 * last var j of at most PLAN_PAIR_MAX_COLS points (PLAN_PAIR_MAX_WIDE with wide pairs: a
 * layernorm after its GEMM) read by one factor only, and the other
 * factor free of j; KR a row kernel over j (rows_read_one). They run as one kernel over KC's
 * rows: a row's values stay in registers between the contraction and the row's steps. What
 * either computes may be stored as usual. */
static bool pair_fits(Ctx *c, int kc, LoadList *ll) {
  Plan *p = c->p;
  const Kernel *KC = &p->kernels[kc], *KR = &p->kernels[kc + 1];
  const Item *ac = contraction_of(p, KC, 2);
  if (!ac || KR->kind != KN_ROW || !KR->has_row || KR->n_red != 1 || KR->chain) return false;
  int n = KC->rank;
  int64_t J = KC->shape[n - 1];
  const Expr *b = ac->body;
  int bi = te_uses_var(b->args[0], n - 1) ? 0 : 1;  /* the factor that reads j */
  if (te_uses_var(b->args[1 - bi], n - 1)) return false;
  /* A wide pair's factor of j is one matrix for every row (a layer's weights): the cuda backend
   * runs it as GEMM tiles that share it. A factor that moves with the rows (attention's keys, a
   * batch of heads) would leave each warp its own row's contraction: bert_layer_b8s128's scores
   * and softmax so ran 1.93x slower than two kernels (H100, 2026-12-06) */
  bool shared = true;
  for (int v = 0; v < n - 1; v++)
    if (KC->shape[v] > 1 && te_uses_var(b->args[bi], v)) shared = false;
  bool wide = p->opt.pairs == 2 && J <= PLAN_PAIR_MAX_WIDE && shared &&
              (double)KC->outer_numel * (double)KC->inner_numel <= PLAN_PAIR_WIDE_WORK;
  if (KR->rank != n || KR->row_stage_shape_rank != n || KR->shape[n - 1] != 1 || KR->red_shape[0] != J ||
      KR->row_shape[n - 1] != J || (J > PLAN_PAIR_MAX_COLS && !wide) || KC->inner_numel > PLAN_PAIR_MAX_DEPTH)
    return false;
  for (int v = 0; v < n - 1; v++)
    if (KR->shape[v] != KC->shape[v] || KR->row_shape[v] != KC->shape[v]) return false;
  return rows_read_one(c, kc, ll);
}

/* ---- a pair's tail ----
 * KD a contraction over the row of pair kc, kr = kc + 1: out[.., i, h] = sum_j f(P[.., i, j]) x
 * g(.., h, j), P a per-point value of KR's row (the logits' gradient), f reading nothing else
 * of the pair, g and KD's epilogue nothing of it at all (the hidden layer's gradient, the
 * gradient of the logits times the weights, then relu's mask). Whoever holds row i (a block, a
 * warp) has every P[i, j] after KR's steps, so it computes the row's points of KD there: P is
 * not read back, and KD is not a dependent kernel of its own. KD may come later than kr + 1;
 * the kernels between neither read it nor (by topological order) are read by it, and it stores
 * no assigned value (a parameter updated in place), so it moves up to follow KR. */
static bool tail_fits(Ctx *c, int kr, int kd, LoadList *ll) {
  Plan *p = c->p;
  TE *te = c->te;
  const Kernel *KC = &p->kernels[kr - 1], *KD = &p->kernels[kd];
  const Item *ad = contraction_of(p, KD, 2);
  int n = KC->rank;
  int64_t J = KC->shape[n - 1];
  if (!ad || KD->chain || KD->rank != n || KD->n_red != 1 || KD->red_shape[0] != J || J > PLAN_PAIR_MAX_COLS) return false;
  for (int v = 0; v < n - 1; v++)
    if (KD->shape[v] != KC->shape[v]) return false;
  for (int i = 0; i < KD->n_items; i++) {
    if (c->assigned[KD->items[i].stage]) return false;
    if (loads_of(KD->items[i].body, ll)) return false;
    for (int j = 0; j < ll->n; j++) {
      int kx = p->kernel_of[ll->l[j]->src];
      if (kx > kr && kx < kd) return false;  /* it reads a kernel it would move ahead of */
    }
  }
  Expr *at[KILN_MAX_RANK];
  for (int v = 0; v < n - 1; v++) at[v] = te_var(te, v);
  at[n - 1] = te_var(te, n);
  const Expr *f = ad->body;
  int pi = -1, P = -1;
  for (int x = 0; x < 2; x++) {
    if (loads_of(f->args[x], ll)) return false;
    for (int j = 0; j < ll->n; j++) {
      int s = ll->l[j]->src, ks = p->kernel_of[s];
      if (ks < kr - 1 || ks > kr) continue;
      if ((pi >= 0 && pi != x) || (P >= 0 && P != s)) return false;
      pi = x, P = s;
    }
  }
  if (pi < 0 || p->kernel_of[P] != kr || !chain_loads_at(c, f->args[pi], kr - 1, kr, at, n, ll)) return false;
  bool inner = false;
  for (int i = 0; i < p->kernels[kr].n_items; i++)
    inner |= p->kernels[kr].items[i].stage == P && p->kernels[kr].items[i].kind == IT_INNER;
  if (!inner || !chain_loads_at(c, f->args[1 - pi], kr - 1, kr, NULL, 0, ll)) return false;
  for (int i = 0; i < KD->n_items; i++)
    if (KD->items[i].kind != IT_ACC && !chain_loads_at(c, KD->items[i].body, kr - 1, kr, NULL, 0, ll)) return false;
  return true;
}

/* ---- rows at the head of their contraction's tiles ----
 * KR a row kernel over rows of J points (a layernorm) whose one per-point value P KC = kr + 1 reads
 * as one whole factor of its one contraction, over a reduction of J points (the QKV or FFN
 * projection of the normalised rows), KC reading nothing else of KR. Each of KC's
 * tiles reads rows of P along the whole reduction, so it can compute those rows itself first:
 * the row kernel's launch goes, for the rows' steps done once a tile of the other factor
 * instead of once. What KR stores for other readers (P itself where a post-norm layer's
 * residual reads it too, its statistics for a backward pass) the first tile of each row band
 * stores. The renderer says whether a tile can hold its rows (PlanOptions.head_ok). The P of
 * the factor, or -1. */
static int head_fits(Ctx *c, int kr, LoadList *ll) {
  Plan *p = c->p;
  const Kernel *KR = &p->kernels[kr], *KC = &p->kernels[kr + 1];
  const Item *ac = contraction_of(p, KC, 1);
  if (!p->opt.head_ok || !ac || KC->chain || KR->chain || KR->kind != KN_ROW || !KR->has_row || KR->n_red != 1 ||
      KC->n_red != 1)
    return -1;
  int n = KR->rank, P = -1;
  int64_t J = KR->red_shape[0];
  if (n < 1 || KR->row_stage_shape_rank != n || KR->shape[n - 1] != 1 || KR->row_shape[n - 1] != J || KC->red_shape[0] != J)
    return -1;
  for (int i = 0; i < KR->n_items; i++) {
    const Item *it = &KR->items[i];
    if (it->kind == IT_INNER) {
      if (P >= 0 || it->step != KR->n_steps - 1) return -1;
      P = it->stage;
    }
  }
  if (P < 0) return -1;
  /* KC reads P only as one whole factor (a load of P, no arithmetic on it), and nothing else of KR;
   * other kernels may read what KR computes (stored by the first column's tiles) */
  const Expr *b = ac->body;
  int pi = -1;
  for (int x = 0; x < 2; x++)
    if (b->args[x]->kind == EX_LOAD && b->args[x]->src == P) pi = x;
  if (pi < 0 || !chain_loads_at(c, b->args[1 - pi], kr, kr, NULL, 0, ll)) return -1;
  for (int i = 0; i < KC->n_items; i++)
    if (&KC->items[i] != ac && !chain_loads_at(c, KC->items[i].body, kr, kr, NULL, 0, ll)) return -1;
  return p->opt.head_ok(p, KR, KC, P, p->opt.pool_ctx) ? P : -1;
}

/* Kernel from moves to position to (< from), the kernels between one later; ids and kernel_of
 * follow. tail_fits said the order stays topological. */
static void move_kernel(Plan *p, int from, int to) {
  Kernel k = p->kernels[from];
  memmove(&p->kernels[to + 1], &p->kernels[to], (size_t)(from - to) * sizeof *p->kernels);
  p->kernels[to] = k;
  for (int i = to; i <= from; i++) {
    p->kernels[i].id = i;
    for (int j = 0; j < p->kernels[i].n_items; j++) p->kernel_of[p->kernels[i].items[j].stage] = i;
  }
}

/* The one value that leaves kernel k, a per-point item that kernel k + 1 alone reads (not an
 * output, not assigned); -1 when none, or when another of k's values leaves it too. */
static int value_for_next(Ctx *c, int k, LoadList *ll) {
  const Kernel *K = &c->p->kernels[k];
  int V = -1;
  for (int i = 0; i < K->n_items; i++) {
    int st = K->items[i].stage;
    if (!read_elsewhere(c, st, k, k, ll)) continue;
    if (V >= 0 || K->items[i].kind != IT_OUTER || read_elsewhere(c, st, k, k + 1, ll)) return -1;
    V = st;
  }
  return V;
}

/* ---- pools in their producer's kernel ----
 * KC a reduction (a convolution: its sum, then its per-point items) of which only one value V
 * leaves the kernel, read by KP = KC + 1 alone; KP one max or sum of V over windows of V's last
 * two dims at the windows' own stride, without padding, the windows tiling V (H = KH x H', W =
 * KW x W'), V's other dims KP's own; KP's items after it read nothing of KC. The two run as one
 * kernel when the renderer says it can take each window in KC's epilogue (PlanOptions.pool_ok):
 * V never reaches memory. Found from the expressions (which stage a load reads, at which
 * index), never from op names. */
static bool pool_fits(Ctx *c, int kc, LoadList *ll) {
  Plan *p = c->p;
  TE *te = c->te;
  const Kernel *KC = &p->kernels[kc], *KP = &p->kernels[kc + 1];
  int n = KC->rank;
  if (!p->opt.pool_ok || KC->chain || KP->chain || KC->kind != KN_REDUCE || KP->kind != KN_REDUCE || n < 3 ||
      n + 2 > KILN_MAX_RANK || KP->rank != n || KP->n_red != 2 || KP->n_steps > 2)
    return false;
  int64_t KH = KP->red_shape[0], KW = KP->red_shape[1];
  for (int v = 0; v < n - 2; v++)
    if (KP->shape[v] != KC->shape[v]) return false;
  if (KC->shape[n - 2] != KH * KP->shape[n - 2] || KC->shape[n - 1] != KW * KP->shape[n - 1]) return false;
  int V = value_for_next(c, kc, ll);
  const Item *acc = V >= 0 ? one_accumulation(KP) : NULL;
  for (int i = 0; acc && i < KP->n_items; i++)
    if (&KP->items[i] != acc && !chain_loads_at(c, KP->items[i].body, kc, kc, NULL, 0, ll)) return false;
  const Stage *A = acc ? &te->stages[acc->stage] : NULL;
  if (!A || (A->rop != RO_MAX && A->rop != RO_SUM) || A->dtype != KILN_F32 || te->stages[V].dtype != KILN_F32) return false;
  /* the accumulated value is V at (.., KH x h + rh, KW x w + rw) */
  const Expr *b = acc->body;
  if (b->kind != EX_LOAD || b->src != V || b->n_args != n) return false;
  int64_t lo[KILN_MAX_RANK], hi[KILN_MAX_RANK];
  for (int v = 0; v < n + 2; v++) lo[v] = 0, hi[v] = (v < n ? KP->shape[v] : KP->red_shape[v - n]) - 1;
  for (int v = 0; v < n; v++) {
    Expr *want = te_var(te, v);
    if (v >= n - 2) {
      int64_t k = v == n - 2 ? KH : KW;
      want = te_binary(te, TB_ADD, te_binary(te, TB_MUL, want, te_const_i(te, KILN_I64, k)), te_var(te, n + v - (n - 2)));
    }
    Expr *got = te_simplify(te, b->args[v], lo, hi, n + 2);
    if (!want || !got || got != te_simplify(te, want, lo, hi, n + 2)) return false;
  }
  return p->opt.pool_ok(p, KC, KP, p->opt.pool_ctx);
}

/* ---- expansions in their reader's planes ----
 * KE a reduction whose one accumulation is a sum in f32 (a 1x1 convolution: a contraction over
 * channels), of which one value V leaves the kernel, stored at KE's own point (V has KE's shape),
 * read by KD = KE + 1 alone; KD a reduction that reads V only in its accumulation (a depthwise
 * convolution's window). They run as one kernel when the renderer says it can compute V where KD
 * gathers its window (PlanOptions.expand_ok): V, an expansion's wide tensor, never reaches memory. */
static bool expand_fits(Ctx *c, int ke, LoadList *ll) {
  Plan *p = c->p;
  TE *te = c->te;
  const Kernel *KE = &p->kernels[ke], *KD = &p->kernels[ke + 1];
  if (!p->opt.expand_ok || KE->chain || KD->chain || KE->kind != KN_REDUCE || KD->kind != KN_REDUCE) return false;
  const Item *acc = one_accumulation(KE), *dacc = one_accumulation(KD);
  if (!acc || !dacc || te->stages[acc->stage].rop != RO_SUM || te->stages[acc->stage].dtype != KILN_F32) return false;
  int V = value_for_next(c, ke, ll);
  if (V < 0) return false;
  const Stage *SV = &te->stages[V];
  if (SV->dtype != KILN_F32 || SV->rank != KE->rank) return false;
  for (int v = 0; v < KE->rank; v++)
    if (SV->shape[v] != KE->shape[v]) return false;
  for (int i = 0; i < KD->n_items; i++)
    if (&KD->items[i] != dacc && !chain_loads_at(c, KD->items[i].body, ke, ke, NULL, 0, ll)) return false;
  return p->opt.expand_ok(p, KE, KD, p->opt.pool_ctx);
}

static kiln_status find_chains(Ctx *c) {
  Plan *p = c->p;
  LoadList ll = { 0 };
  for (int k = 0; p->opt.chains && k + 2 < p->n_kernels; k++) {
    if (p->kernels[k].chain || !chain_fits(c, k, &ll)) continue;
    if (p->opt.chains == 2 && p->kernels[k].outer_numel > CHAIN_AUTO_SCORES && !chain_on_tensor_cores(c, k)) continue;
    p->kernels[k].chain = p->kernels[k + 1].chain = -1;
    p->kernels[k + 2].chain = 3;
    p->kernels[k + 2].why = fmt(p, "%s; one attention kernel with k%d..k%d (rows on chip)", p->kernels[k + 2].why, k, k + 1);
    k += 2;
  }
  for (int k = 0; k + 1 < p->n_kernels; k++) {
    int P = head_fits(c, k, &ll);
    if (P < 0) continue;
    p->kernels[k].chain = -1;
    p->kernels[k + 1].chain = 2, p->kernels[k + 1].headed = true;
    p->kernels[k + 1].why = fmt(p, "%s; one kernel with the rows k%d (t%d's rows computed at the head of each tile)",
                                p->kernels[k + 1].why, k, P);
    k += 1;
  }
  for (int k = 0; p->opt.pairs && k + 1 < p->n_kernels; k++) {
    if (p->kernels[k].chain || !pair_fits(c, k, &ll)) continue;
    p->kernels[k].chain = -1;
    p->kernels[k + 1].chain = 2;
    p->kernels[k + 1].why = fmt(p, "%s; one kernel with the contraction k%d over its rows (the rows in registers)",
                                p->kernels[k + 1].why, k);
    bool tail = false;
    for (int t = k + 2; p->opt.pair_tails && !tail && t < p->n_kernels; t++) {
      if (!tail_fits(c, k + 1, t, &ll)) continue;
      if (t > k + 2) move_kernel(p, t, k + 2);
      p->kernels[k + 1].chain = -1;
      p->kernels[k + 2].chain = 3, p->kernels[k + 2].tailed = true;
      p->kernels[k + 2].why = fmt(p, "%s; one kernel with the pair k%d..k%d (by whoever holds the row, after its steps)",
                                  p->kernels[k + 2].why, k, k + 1);
      tail = true;
    }
    k += tail ? 2 : 1;
  }
  for (int k = 0; k + 1 < p->n_kernels; k++) {
    if (p->kernels[k].chain || !pool_fits(c, k, &ll)) continue;
    p->kernels[k].chain = -1;
    p->kernels[k + 1].chain = 2, p->kernels[k + 1].pooled = true;
    p->kernels[k + 1].why = fmt(p, "%s; one kernel with k%d (each window taken in its epilogue)", p->kernels[k + 1].why, k);
    k += 1;
  }
  for (int k = 0; k + 1 < p->n_kernels; k++) {
    if (p->kernels[k].chain || !expand_fits(c, k, &ll)) continue;
    p->kernels[k].chain = -1;
    p->kernels[k + 1].chain = 2, p->kernels[k + 1].expanded = true;
    p->kernels[k + 1].why = fmt(p, "%s; one kernel with k%d (its value computed where the window is gathered)",
                                p->kernels[k + 1].why, k);
    k += 1;
  }
  bool failed = ll.failed;
  kiln_free(ll.l);
  return failed ? kiln_fail(KILN_ERR_NO_MEMORY, "plan: out of memory") : KILN_OK;
}

/* Each collective moves up to just after the kernel that computes its operand, after the
 * collectives already there: the communicator starts on a gradient while the backward pass goes
 * on (the kernels it moves ahead of read nothing it writes: only later kernels read it). Run
 * before the chains are found, whose kernels must stay consecutive. */
static void start_collectives(Plan *p) {
  for (int k = 0; k < p->n_kernels; k++) {
    if (p->kernels[k].kind != KN_COLLECTIVE) continue;
    int kp = p->kernel_of[p->te->stages[p->kernels[k].anchor].src[0]];
    int to = kp + 1;  /* 0 for an operand no kernel computes */
    while (to < k && p->kernels[to].kind == KN_COLLECTIVE) to++;
    if (to < k) move_kernel(p, k, to);
  }
}

int plan_chain_end(const Plan *p, int k) {
  while (k >= 0 && k < p->n_kernels && p->kernels[k].chain < 0) k++;
  return k;
}

static bool same_chain(const Plan *p, int a, int b) {
  return a >= 0 && b >= 0 && (a == b || plan_chain_end(p, a) == plan_chain_end(p, b));
}

/* ---- stores, inputs, bytes ---- */

static int64_t stage_bytes(const Stage *s) { return s->numel * (int64_t)kiln_dtype_size(s->dtype); }

static kiln_status fill_stores(Ctx *c) {
  Plan *p = c->p;
  TE *te = c->te;
  LoadList ll = { 0 };
  kiln_status st = KILN_OK;
  for (int s = 0; s < te->n_stages; s++) {
    if (p->kernel_of[s] < 0) continue;
    if (plan_is_output(p, s)) p->stored[s] = true, p->why[s] = "output";
    else if (plan_kernel_opaque(&p->kernels[p->kernel_of[s]])) p->stored[s] = true;
    else if (c->assigned[s]) p->stored[s] = true, p->why[s] = "assigned to a parameter";
  }
  for (int s = 0; s < te->n_stages && !st; s++) {
    int ks = p->kernel_of[s];
    if (ks < 0) continue;
    const Expr *body = te->stages[s].kind == ST_OPAQUE ? te->stages[s].body : kernel_item(p, &p->kernels[ks], s)->body;
    if ((st = loads_of(body, &ll))) break;
    for (int i = 0; i < ll.n; i++) {
      int d = ll.l[i]->src;
      if (p->kernel_of[d] < 0 || same_chain(p, p->kernel_of[d], ks) || p->stored[d]) continue;
      p->stored[d] = true;
      if (p->why[d] && !strcmp(p->why[d], "reduction")) p->why[d] = fmt(p, "t%d: read by kernel %d (t%d)", d, ks, s);
      else if (p->why[d]) p->why[d] = fmt(p, "%s; read by kernel %d", p->why[d], ks);
    }
  }
  kiln_free(ll.l);
  return st;
}

static kiln_status store_offset(Plan *p, Kernel *k, Item *it) {
  TE *te = p->te;
  const Stage *S = &te->stages[it->stage];
  Expr *off = te_const_i(te, KILN_I64, 0);
  int64_t stride = 1;
  /* an outer item stores at the kernel's point: its shape is the kernel's, or that but for
   * dims of 1 (squeeze_map), with the same row-major offsets */
  bool outer = it->kind != IT_INNER;
  int rank = outer ? k->rank : S->rank;
  /* a stage stored in another order (Stage.layout) has the kernel's rank where it is set */
  if (S->permuted && rank != S->rank) return kiln_fail(KILN_ERR_UNSUPPORTED, "plan: t%d reordered but stored squeezed", S->id);
  for (int i = rank - 1; i >= 0; i--) {
    Expr *ix = outer ? te_var(te, i) : k->row_map[i];
    int64_t st = S->permuted ? te_stage_stride(S, i) : stride;
    off = te_binary(te, TB_ADD, off, te_binary(te, TB_MUL, ix, te_const_i(te, KILN_I64, st)));
    stride *= outer ? k->shape[i] : S->shape[i];
  }
  int64_t lo[2 * KILN_MAX_RANK], hi[2 * KILN_MAX_RANK];
  kernel_ranges(k, lo, hi);
  it->offset = off ? te_simplify(te, off, lo, hi, k->rank + k->n_red) : NULL;
  return it->offset ? KILN_OK : kiln_fail(KILN_ERR_NO_MEMORY, "plan: out of memory");
}

/* Marks the kernel vars e uses, through the indices of the loads inside it; false when the
 * walk passes `budget` nodes (a DAG walked as a tree), and then nothing is known. */
static bool mark_vars(const Expr *e, bool *used, int *budget) {
  if (--*budget < 0) return false;
  if (e->kind == EX_VAR && e->var >= 0 && e->var < 2 * KILN_MAX_RANK) used[e->var] = true;
  for (int i = 0; i < e->n_args; i++)
    if (!mark_vars(e->args[i], used, budget)) return false;
  return true;
}

/* Elements of its stage that load L can touch in kernel k: along each dimension of the stage,
 * at most the points of the vars that dimension's index uses (through the indices of loads
 * inside it) and at most the dimension's extent. So a batch gathered from a resident data set
 * counts the batch, not the set, also when a convolution's window reads it; a slice counts its
 * part. An upper bound (two vars may meet at one element), INT64_MAX when unknown. */
static int64_t load_points(const Kernel *k, const TE *te, const Expr *L) {
  const Stage *S = &te->stages[L->src];
  int64_t total = 1;
  for (int i = 0; i < L->n_args && i < S->rank; i++) {
    bool used[2 * KILN_MAX_RANK] = { false };
    int budget = 4096;
    if (!mark_vars(L->args[i], used, &budget)) return INT64_MAX;
    int64_t n = 1;
    for (int v = 0; v < k->rank + k->n_red && n < S->shape[i]; v++) {
      int64_t extent = v < k->rank ? k->shape[v] : k->red_shape[v - k->rank];
      if (used[v] && extent > 1) n = n > INT64_MAX / extent ? INT64_MAX : n * extent;
    }
    if (n > S->shape[i]) n = S->shape[i];
    if (n > 0 && total > INT64_MAX / n) return INT64_MAX;
    total *= n;
  }
  return total;
}

static kiln_status fill_io(Plan *p) {
  TE *te = p->te;
  LoadList ll = { 0 };
  kiln_status st = KILN_OK;
  /* per kernel: the elements its loads of each input may touch, and the loads already counted */
  int64_t *points = kiln_calloc((size_t)te->n_stages + 1, sizeof *points);
  const Expr **counted = NULL;
  int n_counted = 0, cap_counted = 0;
  if (!points) return kiln_fail(KILN_ERR_NO_MEMORY, "plan: out of memory");
  for (int ki = 0; ki < p->n_kernels && !st; ki++) {
    Kernel *k = &p->kernels[ki];
    k->n_ins = 0;
    k->ins = arena_alloc(&p->arena, (size_t)(te->n_stages + 1) * sizeof *k->ins);
    if (!k->ins) { st = kiln_fail(KILN_ERR_NO_MEMORY, "plan: out of memory"); break; }
    k->bytes_read = k->bytes_written = 0;
    n_counted = 0;
    for (int i = 0; i < k->n_items && !st; i++) {
      Item *it = &k->items[i];
      it->store = p->stored[it->stage];
      if (it->store) {
        k->bytes_written += stage_bytes(&te->stages[it->stage]);
        if (!plan_kernel_opaque(k) && (st = store_offset(p, k, it))) break;
      }
      if ((st = loads_of(it->body, &ll))) break;
      for (int j = 0; j < ll.n && !st; j++) {
        int d = ll.l[j]->src;
        if (same_chain(p, p->kernel_of[d], ki) || plan_is_baked(te, d)) continue;
        bool seen = false;
        for (int x = 0; x < n_counted && !seen; x++) seen = counted[x] == ll.l[j];
        if (seen) continue;
        if (n_counted == cap_counted) {
          int cap = cap_counted ? 2 * cap_counted : 64;
          const Expr **nc = kiln_realloc(counted, (size_t)cap * sizeof *nc);
          if (!nc) { st = kiln_fail(KILN_ERR_NO_MEMORY, "plan: out of memory"); break; }
          counted = nc, cap_counted = cap;
        }
        counted[n_counted++] = ll.l[j];
        bool dup = false;
        for (int x = 0; x < k->n_ins && !dup; x++) dup = k->ins[x] == d;
        if (!dup) k->ins[k->n_ins++] = d, points[d] = 0;
        int64_t n = load_points(k, te, ll.l[j]);
        points[d] = points[d] > INT64_MAX - n ? INT64_MAX : points[d] + n;
      }
    }
    for (int x = 0; x < k->n_ins; x++) {
      const Stage *S = &te->stages[k->ins[x]];
      int64_t n = points[k->ins[x]] < S->numel ? points[k->ins[x]] : S->numel;
      k->bytes_read += n * (int64_t)kiln_dtype_size(S->dtype);
    }
    if (k->chain > 0 && !st) {  /* the chain's inputs are its last kernel's: it runs there */
      for (int m = ki - k->chain + 1; m < ki; m++) {
        Kernel *e = &p->kernels[m];
        for (int x = 0; x < e->n_ins; x++) {
          bool dup = false;
          for (int y = 0; y < k->n_ins && !dup; y++) dup = k->ins[y] == e->ins[x];
          if (!dup) k->ins[k->n_ins++] = e->ins[x];
        }
        k->bytes_read += e->bytes_read, k->bytes_written += e->bytes_written;
        p->bytes_read -= e->bytes_read, p->bytes_written -= e->bytes_written;
        e->n_ins = 0, e->bytes_read = e->bytes_written = 0;
      }
    }
    p->bytes_read += k->bytes_read;
    p->bytes_written += k->bytes_written;
  }
  kiln_free(counted);
  kiln_free(points);
  kiln_free(ll.l);
  return st;
}

/* ---- memory plan ---- */

typedef struct Block { int64_t off, size; int stage, last; } Block;

static int64_t first_fit(Block *live, int n, int64_t size) {
  /* live is sorted by offset */
  int64_t at = 0;
  for (int i = 0; i < n; i++) {
    if (live[i].off - at >= size) return at;
    int64_t end = live[i].off + live[i].size;
    if (end > at) at = end;
  }
  return at;
}

static kiln_status fill_memory(Plan *p, const bool *assigned) {
  TE *te = p->te;
  int n = te->n_stages;
  int *last = kiln_calloc((size_t)n, sizeof *last);
  Block *live = kiln_calloc((size_t)n + 1, sizeof *live);
  if (!last || !live) { kiln_free(last); kiln_free(live); return kiln_fail(KILN_ERR_NO_MEMORY, "plan: out of memory"); }
  for (int s = 0; s < n; s++) last[s] = assigned[s] ? p->n_kernels : p->kernel_of[s];
  for (int ki = 0; ki < p->n_kernels; ki++)
    for (int i = 0; i < p->kernels[ki].n_ins; i++) {
      int d = p->kernels[ki].ins[i];
      if (last[d] < ki) last[d] = ki;
    }
  /* a collective's operand and result keep buffers of their own: the communicator reads and
   * writes them on a stream of its own, while the kernels after it run and reuse the arena */
  for (int ki = 0; ki < p->n_kernels; ki++)
    if (p->kernels[ki].kind == KN_COLLECTIVE)
      last[p->kernels[ki].anchor] = last[te->stages[p->kernels[ki].anchor].src[0]] = -1;
  int nl = 0;
  for (int ki = 0; ki < p->n_kernels; ki++) {
    Kernel *k = &p->kernels[ki];
    for (int i = 0; i < k->n_items; i++) {
      int s = k->items[i].stage;
      if (!p->stored[s] || plan_is_output(p, s) || last[s] < 0) continue;
      int64_t size = (stage_bytes(&te->stages[s]) + 63) & ~(int64_t)63;
      int64_t off = first_fit(live, nl, size);
      int at = nl;
      while (at > 0 && live[at - 1].off > off) { live[at] = live[at - 1]; at--; }
      live[at] = (Block){ off, size, s, last[s] };
      nl++;
      p->offset[s] = off;
      if (off + size > p->arena_bytes) p->arena_bytes = off + size;
    }
    int w = 0;
    for (int i = 0; i < nl; i++)
      if (live[i].last > ki) live[w++] = live[i];
    nl = w;
  }
  kiln_free(last);
  kiln_free(live);
  return KILN_OK;
}

/* ---- driver ---- */

static void ctx_free(Ctx *c, int n) {
  if (c->cons)
    for (int i = 0; i < n; i++) kiln_free(c->cons[i]);
  kiln_free(c->cons);
  kiln_free(c->n_cons);
  kiln_free(c->ib);
  kiln_free(c->needed);
  kiln_free(c->assigned);
  kiln_free(c->opaque_reader);
  kiln_free(c->updated);
}

static kiln_status plan_alloc(Plan *p, int n) {
  p->kernels = arena_alloc(&p->arena, (size_t)(n + 1) * sizeof *p->kernels);
  p->kernel_of = arena_alloc(&p->arena, (size_t)(n + 1) * sizeof *p->kernel_of);
  p->inlined = arena_alloc(&p->arena, (size_t)(n + 1) * sizeof *p->inlined);
  p->stored = arena_alloc(&p->arena, (size_t)(n + 1) * sizeof *p->stored);
  p->why = arena_alloc(&p->arena, (size_t)(n + 1) * sizeof *p->why);
  p->offset = arena_alloc(&p->arena, (size_t)(n + 1) * sizeof *p->offset);
  if (!p->kernels || !p->kernel_of || !p->inlined || !p->stored || !p->why || !p->offset)
    return kiln_fail(KILN_ERR_NO_MEMORY, "plan: out of memory");
  for (int i = 0; i < n; i++) p->kernel_of[i] = -1, p->offset[i] = -1;
  return KILN_OK;
}

/* The prologues of attention chains' score products: stages stored only because the recompute
 * rule counts them read L times (q * scale, k * scale), that no kernel but the chain's first
 * reads. The chain stages its operands once per block, so they are inlined there instead (a
 * second planning with them forced inline): force[s] is set for each. */
static void chain_prologues(Ctx *c, bool *force) {
  Plan *p = c->p;
  LoadList ll = { 0 }, other = { 0 };
  for (int ko = 0; ko < p->n_kernels; ko++) {
    if (p->kernels[ko].chain != 3) continue;  /* attention; a pair reads its factors once a row */
    int kc = ko - p->kernels[ko].chain + 1;
    for (int i = 0; i < p->kernels[kc].n_items; i++) {
      if (loads_of(p->kernels[kc].items[i].body, &ll)) break;
      for (int j = 0; j < ll.n; j++) {
        int x = ll.l[j]->src, kx = p->kernel_of[x];
        const Stage *X = &c->te->stages[x];
        if (kx < 0 || kx == kc || force[x] || X->kind != ST_INJECTIVE || !p->why[x] || !strstr(p->why[x], "recomputed"))
          continue;
        force[x] = !read_elsewhere(c, x, kc, kc, &other);
      }
    }
  }
  kiln_free(ll.l);
  kiln_free(other.l);
}

static kiln_status build_once(TE *te, const PlanOptions *o, const bool *force, bool *prologues, Plan **out);

static void count_reader(const Expr *load, void *ctx) {
  int *readers = ctx;
  readers[load->src]++;
}

/* The reduction stage r is, or whose result r rounds to f16/bf16 point for point (a bf16
 * contraction's sum, then its output); -1 for anything else. */
static int sum_of(const TE *te, int r) {
  const Stage *R = &te->stages[r];
  if (R->kind == ST_REDUCE) return r;
  const Expr *b = R->body;
  if (R->kind != ST_INJECTIVE || (R->dtype != KILN_BF16 && R->dtype != KILN_F16) || !b || b->kind != EX_CAST ||
      b->args[0]->kind != EX_LOAD)
    return -1;
  const Expr *L = b->args[0];
  const Stage *S = &te->stages[L->src];
  if (S->kind != ST_REDUCE || S->rank != R->rank || L->n_args != R->rank) return -1;
  for (int i = 0; i < L->n_args; i++)
    if (L->args[i]->kind != EX_VAR || L->args[i]->var != i || S->shape[i] != R->shape[i]) return -1;
  return L->src;
}

/* The var permutation of a stage whose body is one load of a reduction (or of its rounding to
 * 16 bits, sum_of) at permuted vars (transpose(att @ v) before the heads are merged): perm[i] is
 * the var of the load's arg i; false for any other body, or the identity. */
static bool permuted_load(const TE *te, const Stage *T, int perm[KILN_MAX_RANK]) {
  const Expr *L = T->body;
  if (T->kind != ST_INJECTIVE || !L || L->kind != EX_LOAD) return false;
  const Stage *R = &te->stages[L->src];
  if (sum_of(te, L->src) < 0 || R->rank != T->rank || L->n_args != T->rank) return false;
  bool seen[KILN_MAX_RANK] = { false }, identity = true;
  for (int i = 0; i < T->rank; i++) {
    const Expr *a = L->args[i];
    if (a->kind != EX_VAR || a->var >= T->rank || seen[a->var]) return false;
    seen[a->var] = true;
    perm[i] = a->var;
    identity &= a->var == i;
  }
  return !identity;
}

/* Is index e a sum of vars times constants? */
static bool affine_index(const Expr *e) {
  if (e->kind == EX_VAR || e->kind == EX_CONST) return true;
  if (e->kind != EX_BINARY || (e->op != TB_ADD && e->op != TB_SUB && e->op != TB_MUL)) return false;
  if (e->op == TB_MUL && e->args[0]->kind != EX_CONST && e->args[1]->kind != EX_CONST) return false;
  return affine_index(e->args[0]) && affine_index(e->args[1]);
}

/* Is stage e an epilogue of a sum that only it reads, point for point (an output projection's
 * bias: e[i, j] = R[i, j] + b[j]), read by one load alone? Its sum, else -1. */
static int epilogue_sum(const TE *te, const Plan *p, int e, const int *readers) {
  const Stage *E = &te->stages[e];
  if (E->kind != ST_INJECTIVE || !E->body || readers[e] != 1 || plan_is_output(p, e) || E->op == OP_RESHAPE ||
      E->op == OP_TRANSPOSE)
    return -1;
  LoadList ll = { 0 };
  int r = -1;
  bool ok = !loads_of(E->body, &ll);
  for (int j = 0; ok && j < ll.n; j++) {
    const Expr *L = ll.l[j];
    const Stage *R = &te->stages[L->src];
    if (R->kind != ST_REDUCE) continue;
    ok = r < 0 && R->rank == E->rank && L->n_args == E->rank && readers[L->src] == 1 && !plan_is_output(p, L->src);
    for (int i = 0; ok && i < E->rank; i++)
      ok = R->shape[i] == E->shape[i] && L->args[i]->kind == EX_VAR && L->args[i]->var == i;
    r = L->src;
  }
  kiln_free(ll.l);
  for (int i = 0; ok && r >= 0 && i < te->n_assigns; i++)
    ok = te->assigns[i].value != e && te->assigns[i].param != e;
  return ok ? r : -1;
}

/* The sum T reads through reshapes and transposes that only it reads (a weight's gradient
 * [9,16] read as the weight's [16,1,3,3] by its update): the load of that sum, its indices in
 * T's vars, or NULL. Both ops are bijections between spaces of one size, so the sum can be
 * computed in T's order. A slice, a pad or a broadcast is not, and ends the walk. With epi,
 * the walk also passes one epilogue of the sum (epilogue_sum; *epi, else -1): it is computed
 * in T's order with its sum. */
static Expr *sum_through_moves(TE *te, const Plan *p, const Stage *T, const int *readers, int *moves, int *n_moves,
                               int *epi) {
  Expr *L = T->body;
  *n_moves = 0;
  if (epi) *epi = -1;
  if (T->kind != ST_INJECTIVE || !L || L->kind != EX_LOAD) return NULL;
  for (int hops = 0; hops < 8; hops++) {
    const Stage *M = &te->stages[L->src];
    int r = epi && *epi < 0 && hops > 0 ? epilogue_sum(te, p, L->src, readers) : -1;
    if (r >= 0) {  /* the epilogue at L's indices reads its sum at the same ones */
      *epi = L->src;
      if (!(L = te_load(te, r, L->n_args, L->args))) return NULL;
      M = &te->stages[r];
    }
    if (M->kind == ST_REDUCE) {
      /* dims merged (an index i*9 + j*3 + k) tile as before; a dim split (an index h // 64)
       * would leave a GEMM's rows without a var of their own, so such a sum stays */
      bool same = M->rank == T->rank, affine = hops > 0 && M->numel == T->numel;
      for (int i = 0; i < L->n_args && affine; i++)
        affine = affine_index(L->args[i]), same &= L->args[i]->kind == EX_VAR && L->args[i]->var == i;
      return affine && !same ? L : NULL;
    }
    moves[(*n_moves)++] = L->src;
    bool move = M->kind == ST_INJECTIVE && (M->op == OP_RESHAPE || M->op == OP_TRANSPOSE) && M->body &&
                M->body->kind == EX_LOAD && readers[L->src] == 1 && !plan_is_output(p, L->src);
    for (int i = 0; i < te->n_assigns && move; i++) move = te->assigns[i].value != L->src;
    if (!move) return NULL;
    L = te_substitute(te, M->body, L->args, M->rank);  /* M's indices in T's vars */
    if (!L || L->kind != EX_LOAD) return NULL;
  }
  return NULL;
}

/* Reductions read only through a permutation of their vars, computed in that permutation's
 * order instead (kiln_options.reorder_sums): R[.., s, h, ..] read as T = transpose(R) becomes
 * R' = T's shape, its body at the permuted vars, and T an identity view of R'. Attention's
 * output then lands in the layout the output projection reads as a plain matrix (a library
 * GEMM's operand), not through the heads' transpose. Likewise a sum read through reshapes and
 * transposes (sum_through_moves): a convolution's weight gradient, computed in the weight's
 * order, takes the weight's update as its epilogue. A reduction in a chain or a pair keeps
 * its order (those kernels index their rows by the plan's own vars), but under chain_layout an
 * attention chain's output is stored in its reader's order (Stage.layout). Under 3 with wide pairs,
 * a contraction and its pointwise epilogue read by a row kernel through moves (encoder4_d256's output
 * projection and bias, read by the residual's layernorm through the (sequence, batch) transpose)
 * are computed in the reader's order, so that the pair takes them: on the H100 (2026-12-06)
 * encoder4_d256 went from 24 to 20 launches but 1.086x slower, so it is not the default. *reader_out: each
 * reordered sum's reader (-1 elsewhere), or NULL when none was reordered; the caller frees it. */
static kiln_status reorder_sums(TE *te, const Plan *p, int **reader_out) {
  *reader_out = NULL;
  int *readers = kiln_calloc((size_t)te->n_stages + 1, sizeof *readers);
  int *reader = kiln_malloc(((size_t)te->n_stages + 1) * sizeof *reader);
  if (!readers || !reader) {
    kiln_free(readers), kiln_free(reader);
    return kiln_fail(KILN_ERR_NO_MEMORY, "plan: out of memory");
  }
  bool any = false;
  for (int i = 0; i < te->n_stages; i++) reader[i] = -1;
  for (int s = 0; s < te->n_stages; s++)  /* loads, not stages: a stage read twice counts 2 and is kept */
    if (te->stages[s].body) te_visit_loads(te->stages[s].body, count_reader, readers);
  kiln_status st = KILN_OK;
  for (int s = 0; s < te->n_stages && !st; s++) {
    Stage *T = &te->stages[s];
    int perm[KILN_MAX_RANK], moves[8], n_moves = 0, epi = -1;
    Expr *map[2 * KILN_MAX_RANK], *at[KILN_MAX_RANK];
    const Expr *L = permuted_load(te, T, perm) ? T->body : NULL;
    bool epilogues = p->opt.reorder_sums == 3 && p->opt.pairs == 2;
    if (!L && (p->opt.reorder_sums == 2 || epilogues)) {
      L = sum_through_moves(te, p, T, readers, moves, &n_moves, epilogues ? &epi : NULL);
      if (L && epilogues && epi < 0) L = NULL;  /* 3: only a sum with its epilogue, which its row kernel pairs with */
    }
    if (!L) continue;
    int r = L->src, k = p->kernel_of[r], r0 = sum_of(te, r);  /* r0: the sum itself (r, or the sum r rounds) */
    /* an attention chain's output (its last kernel's) keeps the chain's order but is stored in T's:
     * R's dim i is T's perm[i], so its memory order is the inverse of perm */
    bool layout = L == T->body && p->opt.chain_layout && k >= 0 && p->kernels[k].chain == 3 && readers[r] == 1 &&
                  !plan_is_output(p, r) && te->stages[r].rank == T->rank && !te->stages[r].permuted;
    for (int i = 0; i < te->n_assigns && layout; i++) layout = te->assigns[i].value != r && te->assigns[i].param != r;
    if (layout) {
      for (int i = 0; i < T->rank; i++) te->stages[r].layout[perm[i]] = (int8_t)i;
      te->stages[r].permuted = true;
      reader[r] = s, any = true;
      continue;
    }
    bool kept = readers[r] != 1 || plan_is_output(p, r) || k < 0 || p->kernels[k].chain != 0;
    if (r0 != r) kept = kept || readers[r0] != 1 || plan_is_output(p, r0) || p->kernel_of[r0] != k ||
                       te->stages[r0].rank != T->rank;
    for (int i = 0; i < te->n_assigns && !kept; i++)
      kept = te->assigns[i].value == r || te->assigns[i].param == r || te->assigns[i].value == r0 || te->assigns[i].param == r0;
    if (kept || (epi >= 0 && r0 != r)) continue;
    Stage *R = &te->stages[r0];
    bool ok = true;
    for (int i = 0; i < R->rank; i++) map[i] = L->args[i];  /* R's outer vars in T's; its sum's after T's */
    for (int j = 0; j < R->n_red; j++) ok &= (map[R->rank + j] = te_var(te, T->rank + j)) != NULL;
    for (int i = 0; i < T->rank; i++) ok &= (at[i] = te_var(te, i)) != NULL;
    Expr *body = ok ? te_substitute(te, R->body, map, R->rank + R->n_red) : NULL;
    /* the epilogue at T's vars: its loads at L's indices, its sum's (L itself) at T's own (once R has them) */
    Expr *ebody = body && epi >= 0 ? te_substitute(te, te->stages[epi].body, map, te->stages[epi].rank) : NULL;
    if (!body || (epi >= 0 && !ebody)) { st = kiln_fail(KILN_ERR_NO_MEMORY, "plan: out of memory"); break; }
    R->body = body;
    R->rank = T->rank;
    memcpy(R->shape, T->shape, sizeof R->shape);
    if (r0 != r) memcpy(te->stages[r].shape, T->shape, sizeof R->shape);  /* its identity rounding keeps reading R */
    if (epi >= 0) {
      Stage *E = &te->stages[epi];
      Expr *at_r = te_load(te, r, T->rank, at);
      if (!at_r || !(ebody = te_replace(te, ebody, L, at_r))) { st = kiln_fail(KILN_ERR_NO_MEMORY, "plan: out of memory"); break; }
      E->body = ebody;
      E->rank = T->rank;
      memcpy(E->shape, T->shape, sizeof E->shape);
    }
    if (!(T->body = te_load(te, epi >= 0 ? epi : r, T->rank, at))) {
      st = kiln_fail(KILN_ERR_NO_MEMORY, "plan: out of memory");
      break;
    }
    /* the moves T read through are read by nothing now, and their loads have R's old rank */
    for (int i = 0; i < n_moves && !st; i++)
      if (!(te->stages[moves[i]].body = te_const_f(te, te->stages[moves[i]].dtype, 0)))
        st = kiln_fail(KILN_ERR_NO_MEMORY, "plan: out of memory");
    reader[r] = s, any = true;
  }
  kiln_free(readers);
  if (st || !any) kiln_free(reader), reader = NULL;
  *reader_out = reader;
  return st;
}

kiln_status plan_build(TE *te, const PlanOptions *o, Plan **out) {
  *out = NULL;
  bool *force = kiln_calloc((size_t)te->n_stages + 1, sizeof *force);
  if (!force) return kiln_fail(KILN_ERR_NO_MEMORY, "plan: out of memory");
  Plan *p = NULL;
  bool again = false;
  kiln_status st = build_once(te, o, NULL, force, &p);
  int *reader = NULL;
  if (!st && o->reorder_sums) st = reorder_sums(te, p, &reader);
  if (!st && reader) {  /* the plan again over the new orders */
    plan_free(p);
    p = NULL;
    memset(force, 0, ((size_t)te->n_stages + 1) * sizeof *force);
    st = build_once(te, o, NULL, force, &p);
  }
  for (int s = 0; s < te->n_stages && !st; s++) again |= force[s];
  if (!st && again) {
    plan_free(p);
    p = NULL;
    st = build_once(te, o, force, NULL, &p);
  }
  for (int s = 0; !st && reader && s < te->n_stages; s++) {  /* kiln plan says so where the sum is */
    int k = reader[s] >= 0 ? p->kernel_of[s] : -1;
    if (k >= 0 && p->kernels[k].why)
      p->kernels[k].why = fmt(p, "%s; t%d in the order t%d reads it (reorder_sums)", p->kernels[k].why, s, reader[s]);
  }
  kiln_free(reader);
  kiln_free(force);
  if (st) plan_free(p);  /* a step after a plan was built failed */
  *out = st ? NULL : p;
  return st;
}

/* One planning; with prologues, also which stages a second one should inline (chain_prologues). */
static kiln_status build_once(TE *te, const PlanOptions *o, const bool *force, bool *prologues, Plan **out) {
  *out = NULL;
  Plan *p = kiln_calloc(1, sizeof *p);
  if (!p) return kiln_fail(KILN_ERR_NO_MEMORY, "plan: out of memory");
  p->te = te;
  p->opt = *o;
  if (p->opt.max_inputs <= 0) p->opt.max_inputs = DEFAULT_MAX_INPUTS;
  if (p->opt.max_nodes <= 0) p->opt.max_nodes = DEFAULT_MAX_NODES;
  int n = te->n_stages;
  Ctx c = { .p = p, .te = te, .force = force };
  size_t m = (size_t)n + 1;
  c.ib = kiln_calloc(m, sizeof *c.ib);
  c.cons = kiln_calloc(m, sizeof *c.cons);
  c.n_cons = kiln_calloc(m, sizeof *c.n_cons);
  c.needed = kiln_calloc(m, sizeof *c.needed);
  c.assigned = kiln_calloc(m, sizeof *c.assigned);
  c.opaque_reader = kiln_calloc(m, sizeof *c.opaque_reader);
  c.updated = kiln_calloc(m, sizeof *c.updated);
  kiln_status st = KILN_OK;
  if (!c.ib || !c.cons || !c.n_cons || !c.needed || !c.assigned || !c.opaque_reader || !c.updated)
    st = kiln_fail(KILN_ERR_NO_MEMORY, "plan: out of memory");
  if (!st) st = plan_alloc(p, n);
  for (int i = 0; !st && i < te->n_assigns; i++) c.assigned[te->assigns[i].value] = c.updated[te->assigns[i].param] = true;
  if (!st) st = fill_uses(&c);
  if (!st) st = decide_inline(&c);
  for (int s = 0; s < n && !st; s++) {
    const Stage *S = &te->stages[s];
    if (is_source(S) || p->inlined[s] || !c.needed[s]) continue;
    st = place(&c, s);
  }
  if (!st) start_collectives(p);  /* before the chains, whose reasons name kernels by place */
  if (!st) st = find_chains(&c);
  if (!st && prologues) chain_prologues(&c, prologues);
  if (!st) st = fill_stores(&c);
  if (!st) st = fill_io(p);
  if (!st) st = fill_memory(p, c.assigned);
  ctx_free(&c, n);
  if (!st) st = plan_check(p);
  if (st) { plan_free(p); return st; }
  *out = p;
  return KILN_OK;
}

void plan_free(Plan *p) {
  if (!p) return;
  arena_free(&p->arena);
  kiln_free(p);
}

kiln_status plan_check(const Plan *p) {
  const TE *te = p->te;
  for (int ki = 0; ki < p->n_kernels; ki++) {
    const Kernel *k = &p->kernels[ki];
    for (int i = 0; i < k->n_ins; i++) {
      int d = k->ins[i];
      const Stage *D = &te->stages[d];
      bool src = D->kind == ST_INPUT || D->kind == ST_PARAM || D->kind == ST_CONST;
      if (!src && (p->kernel_of[d] < 0 || p->kernel_of[d] >= ki || !p->stored[d]))
        return kiln_fail(KILN_ERR_INVALID_ARG, "plan_check: kernel %d reads t%d before it is written", ki, d);
    }
    for (int i = 0; i < k->n_items; i++)
      if (p->kernel_of[k->items[i].stage] != ki)
        return kiln_fail(KILN_ERR_INVALID_ARG, "plan_check: t%d placed twice", k->items[i].stage);
  }
  for (int i = 0; i < te->n_outputs; i++) {
    int s = te->outputs[i];
    const Stage *S = &te->stages[s];
    bool src = S->kind == ST_INPUT || S->kind == ST_PARAM || S->kind == ST_CONST;
    if (!src && (p->kernel_of[s] < 0 || !p->stored[s]))
      return kiln_fail(KILN_ERR_INVALID_ARG, "plan_check: output t%d is not computed", s);
  }
  return KILN_OK;
}
