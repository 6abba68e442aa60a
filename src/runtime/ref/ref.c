/*
 * ref.c — the reference interpreter, the oracle every backend is compared with.
 * Takes a TE and host buffers, produces each stage's values with plain loops over
 * the output index (and the reduction index). A stage's body is flattened once into
 * a tape (the DAG in post-order, each node once), then run per point with the
 * scalar semantics of te_eval_* (expr.c). The tape runs an instruction at a time over
 * a row of points (lanes: consecutive output points, or a reduction's consecutive
 * terms), and a reduction's instructions that read no reduction index run once per
 * output point: each point's value is the same as one point at a time would give, in
 * the same order of accumulation; the interpreter's dispatch, paid per instruction and
 * point, was most of the test suites' time under ASan (test_cpu_tiles' oracle). Float
 * sums and products accumulate in double, integer ones in 64 bits; max/min let NaN win;
 * argmax/argmin treat NaN as the extreme and break ties by first (or last) index.
 *
 * Strings: a string element is a pointer, carried through the tape as an int64 value, so
 * movement, where and equality of strings (opaque stages with a body) run on the tape; the
 * string ops (normalize, concat, regex, label encode) run below on their operands, and
 * the strings they make come from the caller's arena (ref_eval_stage_strings).
 *
 * The ref backend (rt_backend_ref) runs a whole TE this way, through the one pipeline
 * (schedule.c), which interprets a backend without a dialect. Its census reports no
 * kernels; its host fallbacks are the opaque stages, as on every other backend (they
 * would run on the host anywhere), so the census and strict mode read alike everywhere.
 */
#include "../runtime.h"

#include <math.h>
#include <regex.h>
#include <omp.h>
#include <stdatomic.h>
#include <string.h>

/* ---- the tape ---- */

typedef struct Ins {
  ExprKind kind;
  int op;
  kiln_dtype dtype, adt;     /* result dtype, operand dtype */
  TeValue c;
  int var, src, n;
  int a[KILN_MAX_RANK];      /* argument slots */
  bool vary;                 /* differs from lane to lane (tape_mark) */
  unsigned char av[KILN_MAX_RANK];  /* 1 where argument a[k] varies: its lane l is at l * av[k] */
  int64_t stride[KILN_MAX_RANK], dim[KILN_MAX_RANK];  /* load: source strides and extents */
  const void *buf;           /* load: source buffer */
} Ins;

typedef struct Tape {
  Ins *ins; int n, cap;
  const Expr **key; int *slot; size_t mcap;   /* Expr -> slot */
} Tape;

static int tape_find(const Tape *t, const Expr *e, size_t *at) {
  size_t i = (size_t)(e->hash ^ (uintptr_t)e) & (t->mcap - 1);
  while (t->key[i] && t->key[i] != e) i = (i + 1) & (t->mcap - 1);
  *at = i;
  return t->key[i] ? t->slot[i] : -1;
}

/* Appends e's operands, then e; returns e's slot or -1 when out of memory. */
static int tape_add(Tape *t, const TE *te, const void *const *bufs, const Expr *e) {
  size_t at;
  int found = tape_find(t, e, &at);
  if (found >= 0) return found;
  Ins in = { .kind = e->kind, .op = e->op, .dtype = e->dtype, .c = e->c, .var = e->var, .src = e->src, .n = e->n_args };
  if (e->n_args) in.adt = e->args[0]->dtype;
  if (e->kind == EX_BINARY) in.adt = e->args[0]->dtype;
  if (e->kind == EX_SELECT) in.adt = e->args[1]->dtype;
  for (int i = 0; i < e->n_args; i++)
    if ((in.a[i] = tape_add(t, te, bufs, e->args[i])) < 0) return -1;
  if (e->kind == EX_LOAD) {
    const Stage *s = &te->stages[e->src];
    for (int d = s->rank - 1; d >= 0; d--) {
      in.stride[d] = te_stage_stride(s, d);
      in.dim[d] = s->shape[d];
    }
    in.buf = bufs[e->src];
  }
  if ((size_t)t->n + 1 >= t->mcap / 2) return -1;  /* the memo table is sized for the tree; never fill it */
  if (t->n == t->cap) {
    int cap = t->cap ? 2 * t->cap : 64;
    Ins *ni = kiln_realloc(t->ins, (size_t)cap * sizeof *ni);
    if (!ni) return -1;
    t->ins = ni;
    t->cap = cap;
  }
  t->ins[t->n] = in;
  tape_find(t, e, &at);  /* the table may not have changed, but the slot is recomputed cheaply */
  t->key[at] = e;
  t->slot[at] = t->n;
  return t->n++;
}

static size_t count_nodes(const Expr *e, size_t limit) {
  size_t n = 1;
  for (int i = 0; i < e->n_args && n < limit; i++) n += count_nodes(e->args[i], limit - n);
  return n;
}

static kiln_status tape_build(Tape *t, const TE *te, const void *const *bufs, const Expr *body) {
  /* The table is sized from the tree size (an upper bound on distinct nodes), capped. */
  size_t nodes = count_nodes(body, 1u << 20), cap = 64;
  while (cap < 2 * nodes) cap *= 2;
  *t = (Tape){ .mcap = cap };
  t->key = kiln_calloc(cap, sizeof *t->key);
  t->slot = kiln_calloc(cap, sizeof *t->slot);
  if (!t->key || !t->slot || tape_add(t, te, bufs, body) < 0)
    return kiln_fail(KILN_ERR_NO_MEMORY, "ref: out of memory building an expression tape");
  return KILN_OK;
}

static void tape_free(Tape *t) {
  kiln_free(t->ins);
  kiln_free(t->key);
  kiln_free(t->slot);
}

/* Marks the instructions that differ between lanes: those reading a variable numbered
 * first_lane_var or above, directly or through an argument (post-order: arguments first). */
static void tape_mark(Tape *t, int first_lane_var) {
  for (int i = 0; i < t->n; i++) {
    Ins *in = &t->ins[i];
    in->vary = in->kind == EX_VAR && in->var >= first_lane_var;
    for (int k = 0; k < in->n; k++) {
      in->av[k] = t->ins[in->a[k]].vary;
      in->vary |= in->av[k];
    }
  }
}

enum { MAX_LANES = 64 };
/* The value slots of a thread (t->n x lanes) are kept within this, so a long tape runs
 * in fewer lanes rather than asking for gigabytes. */
#define TAPE_LANE_BYTES ((size_t)1 << 20)

static int tape_lanes(const Tape *t) {
  size_t per_lane = (size_t)t->n * sizeof(TeValue);
  size_t lanes = per_lane ? TAPE_LANE_BYTES / per_lane : MAX_LANES;
  return lanes >= MAX_LANES ? MAX_LANES : lanes < 1 ? 1 : (int)lanes;
}

/* o[l] = a[l * sa] op b[l * sb] for l < m where op and t have a loop of their own here (index math,
 * its bounds checks, f32 products and sums), with te_eval_binary's results; false otherwise. */
static bool binary_lanes(TeBinary op, kiln_dtype t, TeValue *o, const TeValue *a, int sa, const TeValue *b, int sb, int m) {
#define EACH(expr) for (int l = 0; l < m; l++) { int64_t x = a[l * sa].i, y = b[l * sb].i; (void)x, (void)y; expr; } return true
#define EACH_F(expr) for (int l = 0; l < m; l++) { double x = a[l * sa].f, y = b[l * sb].f; expr; } return true
  if (t == KILN_I64) {
    switch (op) {
    case TB_ADD: EACH(o[l].i = (int64_t)((uint64_t)x + (uint64_t)y));
    case TB_SUB: EACH(o[l].i = (int64_t)((uint64_t)x - (uint64_t)y));
    case TB_MUL: EACH(o[l].i = (int64_t)((uint64_t)x * (uint64_t)y));
    case TB_MAX: EACH(o[l].i = x > y ? x : y);
    case TB_MIN: EACH(o[l].i = x < y ? x : y);
    case TB_EQ: EACH(o[l].i = x == y);
    case TB_NE: EACH(o[l].i = x != y);
    case TB_LT: EACH(o[l].i = x < y);
    case TB_LE: EACH(o[l].i = x <= y);
    case TB_GT: EACH(o[l].i = x > y);
    case TB_GE: EACH(o[l].i = x >= y);
    default: return false;
    }
  }
  if (t == KILN_BOOL) {  /* operands 0 or 1 */
    switch (op) {
    case TB_AND: EACH(o[l].i = (x & y) != 0);
    case TB_OR: EACH(o[l].i = (x | y) != 0);
    default: return false;
    }
  }
  if (t == KILN_F32) {
    switch (op) {
    case TB_ADD: EACH_F(o[l].f = (float)(x + y));
    case TB_MUL: EACH_F(o[l].f = (float)(x * y));
    default: return false;
    }
  }
  return false;
#undef EACH
#undef EACH_F
}

/* Argument k of instruction in at lane l: slot rows of L values, an invariant argument's
 * value in its row's first. */
#define ARG(k, l) v[(size_t)in->a[k] * (size_t)L + (size_t)((l) * in->av[k])]

/* Runs the tape's instructions whose vary flag is `varying` over lanes [0, m) (m is 1 for
 * the invariant ones); lv[var][l] is variable var at lane l (at lane 0 for a variable that
 * does not vary). False if a load would read out of range (a broken TE). */
static bool tape_pass(const Tape *t, TeValue *v, int L, const int64_t (*lv)[MAX_LANES], bool varying, int m) {
  for (int i = 0; i < t->n; i++) {
    const Ins *in = &t->ins[i];
    if (in->vary != varying) continue;
    TeValue *o = v + (size_t)i * (size_t)L;
    switch (in->kind) {
    case EX_CONST: for (int l = 0; l < m; l++) o[l] = in->c; break;
    case EX_VAR: for (int l = 0; l < m; l++) o[l].i = lv[in->var][l]; break;
    case EX_LOAD: {
      int64_t flat[MAX_LANES];
      for (int l = 0; l < m; l++) {
        int64_t f = 0;
        for (int d = 0; d < in->n; d++) {
          int64_t x = ARG(d, l).i;
          if (x < 0 || x >= in->dim[d]) return false;
          f += x * in->stride[d];
        }
        flat[l] = f;
      }
      if (in->dtype == KILN_F32) for (int l = 0; l < m; l++) o[l].f = ((const float *)in->buf)[flat[l]];
      else if (dtype_is_float(in->dtype)) for (int l = 0; l < m; l++) o[l].f = dtype_load_f64(in->dtype, in->buf, flat[l]);
      else for (int l = 0; l < m; l++) o[l].i = dtype_load_i64(in->dtype, in->buf, flat[l]);
      break;
    }
    case EX_UNARY: for (int l = 0; l < m; l++) o[l] = te_eval_unary(in->op, in->adt, ARG(0, l)); break;
    case EX_BINARY: {
      const TeValue *a = &ARG(0, 0), *b = &ARG(1, 0);
      if (!binary_lanes(in->op, in->adt, o, a, in->av[0], b, in->av[1], m))
        for (int l = 0; l < m; l++) o[l] = te_eval_binary(in->op, in->adt, a[l * in->av[0]], b[l * in->av[1]]);
      break;
    }
    case EX_SELECT: for (int l = 0; l < m; l++) o[l] = ARG(0, l).i ? ARG(1, l) : ARG(2, l); break;
    case EX_CAST: for (int l = 0; l < m; l++) o[l] = te_eval_cast(in->dtype, in->adt, ARG(0, l)); break;
    }
  }
  return true;
}

#undef ARG

/* ---- accumulation ---- */

static bool is_unsigned(kiln_dtype t) { return t >= KILN_U8 && t <= KILN_U64; }

/* -1, 0, 1 comparing a and b of dtype t; NaN is above every number and equal to NaN. */
static int cmp_value(kiln_dtype t, TeValue a, TeValue b) {
  if (dtype_is_float(t)) {
    bool na = a.f != a.f, nb = b.f != b.f;
    if (na || nb) return na - nb;
    return (a.f > b.f) - (a.f < b.f);
  }
  if (is_unsigned(t)) return ((uint64_t)a.i > (uint64_t)b.i) - ((uint64_t)a.i < (uint64_t)b.i);
  return (a.i > b.i) - (a.i < b.i);
}

typedef struct Acc { double f; int64_t i; TeValue best; int64_t arg; bool any; } Acc;

static void acc_init(Acc *a, ReduceOp op, kiln_dtype t) {
  *a = (Acc){0};
  if (op == RO_PROD) { a->f = 1; a->i = 1; }
  if (op == RO_MAX) a->f = -INFINITY;
  if (op == RO_MIN) a->f = INFINITY;
  (void)t;
}

static void acc_add(Acc *a, ReduceOp op, kiln_dtype t, TeValue v, int64_t r, bool last) {
  bool fl = dtype_is_float(t);
  switch (op) {
  case RO_SUM:
    if (fl) a->f += v.f; else a->i = (int64_t)((uint64_t)a->i + (uint64_t)v.i);
    return;
  case RO_PROD:
    if (fl) a->f *= v.f; else a->i = (int64_t)((uint64_t)a->i * (uint64_t)v.i);
    return;
  case RO_MAX: case RO_MIN: {
    if (!a->any) { a->best = v; a->any = true; return; }
    if (fl && a->best.f != a->best.f) return;  /* NaN wins and stays */
    int c = cmp_value(t, v, a->best);
    if (fl && v.f != v.f) a->best = v;
    else if (op == RO_MAX ? c > 0 : c < 0) a->best = v;
    return;
  }
  case RO_ARGMAX: case RO_ARGMIN: {
    int c = a->any ? cmp_value(t, v, a->best) : 1;
    bool nan = fl && v.f != v.f, best_nan = a->any && fl && a->best.f != a->best.f;
    bool better = !a->any || (nan && !best_nan) ||
                  (!best_nan && !nan && (op == RO_ARGMAX ? c > 0 : c < 0)) || (last && c == 0);
    if (better) { a->best = v; a->arg = r; a->any = true; }
    return;
  }
  }
}

/* The lowest (or highest) value of an integer dtype, for max (min) over nothing. */
static int64_t int_extreme(kiln_dtype t, bool highest) {
  if (t == KILN_BOOL) return highest;
  int bits = 8 * (int)kiln_dtype_size(t);
  if (is_unsigned(t)) return highest ? (bits == 64 ? -1 : (int64_t)((1ull << bits) - 1)) : 0;
  int64_t hi = (int64_t)((1ull << (bits - 1)) - 1);
  return highest ? hi : -hi - 1;
}

static void acc_store(const Acc *a, ReduceOp op, kiln_dtype body_t, kiln_dtype out_t, void *out, int64_t o) {
  bool fl = dtype_is_float(body_t);
  switch (op) {
  case RO_SUM: case RO_PROD:
    if (fl) dtype_store_f64(out_t, out, o, a->f); else dtype_store_i64(out_t, out, o, a->i);
    return;
  case RO_MAX: case RO_MIN:
    if (!a->any) {
      if (fl) dtype_store_f64(out_t, out, o, a->f);
      else dtype_store_i64(out_t, out, o, int_extreme(out_t, op == RO_MIN));
    } else if (fl) {
      dtype_store_f64(out_t, out, o, a->best.f);
    } else {
      dtype_store_i64(out_t, out, o, a->best.i);
    }
    return;
  case RO_ARGMAX: case RO_ARGMIN: dtype_store_i64(out_t, out, o, a->arg); return;
  }
}

/* ---- stages ---- */

/* Advances an odometer over dims; false after the last point. */
static bool next_index(int64_t *idx, const int64_t *dims, int n) {
  for (int d = n - 1; d >= 0; d--) {
    if (++idx[d] < dims[d]) return true;
    idx[d] = 0;
  }
  return false;
}

static kiln_status out_of_range(const Stage *s) {
  return kiln_fail(KILN_ERR_INVALID_ARG, "ref: stage s%d '%s' loads out of range (broken te invariant)", s->id,
                   s->name ? s->name : "");
}

/* The body's value at lane l after a pass. */
static TeValue tape_result(const Tape *t, const TeValue *v, int L, int l) {
  const Ins *last = &t->ins[t->n - 1];
  return v[(size_t)(t->n - 1) * (size_t)L + (size_t)(last->vary ? l : 0)];
}

/* Evaluates output points [begin, end) with the value slots v (t->n x L); false if a load
 * would read out of range. The tape is marked for the stage (tape_mark): an injective
 * stage's lanes are consecutive output points, a reduction's consecutive terms of one. */
static bool eval_range(const Stage *s, const Tape *t, TeValue *v, int L, void *out, int64_t begin, int64_t end,
                       int64_t red_n) {
  int64_t idx[KILN_MAX_RANK] = {0}, rest = begin;
  int64_t lv[2 * KILN_MAX_RANK][MAX_LANES];
  for (int d = s->rank - 1; d >= 0; d--) {
    idx[d] = rest % s->shape[d];
    rest /= s->shape[d];
  }
  kiln_dtype bt = s->body->dtype;
  if (s->kind != ST_REDUCE) {  /* injective, or an opaque string stage with an index form */
    if (!tape_pass(t, v, L, lv, false, 1)) return false;  /* what reads no index at all */
    for (int64_t o = begin; o < end;) {
      int m = end - o < L ? (int)(end - o) : L;
      for (int l = 0; l < m; l++, next_index(idx, s->shape, s->rank))
        for (int d = 0; d < s->rank; d++) lv[d][l] = idx[d];
      if (!tape_pass(t, v, L, lv, true, m)) return false;
      for (int l = 0; l < m; l++, o++) {
        TeValue r = tape_result(t, v, L, l);
        if (dtype_is_float(s->dtype)) dtype_store_f64(s->dtype, out, o, r.f);
        else dtype_store_i64(s->dtype, out, o, r.i);
      }
    }
    return true;
  }
  for (int64_t o = begin; o < end; o++, next_index(idx, s->shape, s->rank)) {
    Acc acc;
    acc_init(&acc, s->rop, bt);
    if (red_n > 0) {
      for (int d = 0; d < s->rank; d++) lv[d][0] = idx[d];
      if (!tape_pass(t, v, L, lv, false, 1)) return false;  /* what reads no reduction index */
      int64_t rv[KILN_MAX_RANK] = {0};
      for (int64_t r = 0; r < red_n;) {
        int m = red_n - r < L ? (int)(red_n - r) : L;
        for (int l = 0; l < m; l++, next_index(rv, s->red_shape, s->n_red))
          for (int d = 0; d < s->n_red; d++) lv[s->rank + d][l] = rv[d];
        if (!tape_pass(t, v, L, lv, true, m)) return false;
        for (int l = 0; l < m; l++, r++) acc_add(&acc, s->rop, bt, tape_result(t, v, L, l), r, s->select_last);
      }
    }
    acc_store(&acc, s->rop, bt, s->dtype, out, o);
  }
  return true;
}

/* A large stage's points in chunks, each taken by the next free thread of a team. */
typedef struct PointJob {
  const Stage *s;
  const Tape *t;
  TeValue *v;               /* t->n x lanes value slots a thread */
  int lanes;
  void *out;
  int64_t red_n;
  int chunks;
  atomic_int next;          /* the next chunk not yet taken */
  atomic_bool bad;
} PointJob;

static void eval_chunks(void *ctx, int tid, int nt) {
  (void)nt;
  PointJob *j = ctx;
  int64_t n = j->s->numel;
  for (int c; (c = atomic_fetch_add_explicit(&j->next, 1, memory_order_relaxed)) < j->chunks;) {
    int64_t b = n / j->chunks * c + (c < n % j->chunks ? c : n % j->chunks);
    int64_t e = b + n / j->chunks + (c < n % j->chunks);
    if (!eval_range(j->s, j->t, j->v + (size_t)tid * (size_t)j->t->n * (size_t)j->lanes, j->lanes, j->out, b, e, j->red_n))
      atomic_store_explicit(&j->bad, true, memory_order_relaxed);
  }
}

/* Every output point is independent, so large stages are split into chunks across
 * threads; each point is still computed the same way, so results do not depend on
 * the thread count. The threads are a team of the stage's own, closed when it ends:
 * OpenMP's idle threads spun on for milliseconds after a parallel loop here, on the
 * cores the cpu backend's team ran on next (a short program then ran 5 times slower,
 * bench/results/2026-12-07-ref-team.md). Starting them costs tens of microseconds,
 * against at least 2^20 points interpreted. */
static kiln_status eval_points(const Stage *s, const Tape *t, void *out) {
  int64_t red_n, work;
  if (s->numel == 0) return KILN_OK;
  if (!shape_numel(s->n_red, s->red_shape, &red_n)) return kiln_fail(KILN_ERR_NO_MEMORY, "ref: reduce domain overflows");
  if (!size_mul(s->numel, red_n ? red_n : 1, &work)) work = INT64_MAX;
  int threads = work >= (1 << 20) ? omp_get_max_threads() : 1;
  if (threads > s->numel) threads = (int)s->numel;
  HostTeam *team = NULL;
  if (threads > 1 && host_team_open(threads, &team) != KILN_OK) threads = 1;  /* one thread does it all */
  PointJob j = { .s = s, .t = t, .out = out, .red_n = red_n, .chunks = 1, .lanes = tape_lanes(t) };
  if (threads > 1) j.chunks = 4 * threads < s->numel ? 4 * threads : (int)s->numel;
  atomic_init(&j.next, 0);
  atomic_init(&j.bad, false);
  j.v = kiln_malloc(sizeof(TeValue) * (size_t)t->n * (size_t)j.lanes * (size_t)threads);
  if (!j.v) {
    host_team_close(team);
    return kiln_fail(KILN_ERR_NO_MEMORY, "ref: out of memory");
  }
  if (team) host_team_run(team, threads, eval_chunks, &j);
  else eval_chunks(&j, 0, 1);
  host_team_close(team);
  kiln_free(j.v);
  return atomic_load(&j.bad) ? out_of_range(s) : KILN_OK;
}

/* ---- strings ---- */

/* Flat index into operand a of output point o of stage st (NumPy broadcasting). */
static int64_t bcast_at(const Stage *a, const Stage *st, int64_t o) {
  int64_t idx[KILN_MAX_RANK], flat = 0, rest = o;
  for (int d = st->rank - 1; d >= 0; d--) {
    idx[d] = st->shape[d] ? rest % st->shape[d] : 0;
    rest = st->shape[d] ? rest / st->shape[d] : 0;
  }
  for (int d = 0; d < a->rank; d++) {
    int64_t k = idx[st->rank - a->rank + d];
    flat = flat * a->shape[d] + (a->shape[d] == 1 ? 0 : k);
  }
  return flat;
}

static const char *str_at(const void *buf, int64_t i) {
  const char *s = ((const char *const *)buf)[i];
  return s ? s : "";
}

/* n bytes for a new string of this run, from the caller's string storage. */
static char *new_string(const Stage *st, Arena *strings, size_t n, kiln_status *rc) {
  char *p = strings ? arena_alloc(strings, n) : NULL;
  if (!strings)
    *rc = kiln_fail(KILN_ERR_UNSUPPORTED, "ref: op %s (t%d '%s') makes strings, and this backend gives no string storage",
                    op_names[st->op], st->id, st->name);
  else if (!p)
    *rc = kiln_fail(KILN_ERR_NO_MEMORY, "ref: out of memory for the strings of '%s'", st->name);
  return p;
}

/* StringNormalizer: drop stopwords, map case; the graph fixed how many remain. */
static kiln_status eval_normalize(const TE *te, const Stage *st, const void *const *bufs, const char **out,
                                  Arena *strings) {
  const Stage *x = &te->stages[st->src[0]];
  const StrAttr *a = st->str;
  kiln_status rc = KILN_OK;
  int64_t k = 0;
  for (int64_t i = 0; i < x->numel && !rc; i++) {
    const char *s = str_at(bufs[x->id], i);
    if (!str_keep(a, s)) continue;
    if (k == st->numel) { k++; break; }
    if (a->case_change) {
      char *c = new_string(st, strings, strlen(s) + 1, &rc);
      if (c) str_case(a, s, c);
      s = c;
    }
    out[k++] = s;
  }
  if (rc) return rc;
  if (k == 0 && st->numel == 1) out[k++] = "";  /* all removed: one empty string (ONNX) */
  if (k != st->numel)
    return kiln_fail(KILN_ERR_INVALID_ARG, "ref: '%s' keeps %s%lld strings, the graph was built for %lld", st->name,
                     k > st->numel ? "more than " : "", (long long)(k > st->numel ? st->numel : k), (long long)st->numel);
  return KILN_OK;
}

static kiln_status eval_concat(const TE *te, const Stage *st, const void *const *bufs, const char **out,
                               Arena *strings) {
  const Stage *a = &te->stages[st->src[0]], *b = &te->stages[st->src[1]];
  kiln_status rc = KILN_OK;
  for (int64_t o = 0; o < st->numel && !rc; o++) {
    const char *x = str_at(bufs[a->id], bcast_at(a, st, o)), *y = str_at(bufs[b->id], bcast_at(b, st, o));
    size_t nx = strlen(x), ny = strlen(y);
    char *c = new_string(st, strings, nx + ny + 1, &rc);
    if (!c) break;
    memcpy(c, x, nx);
    memcpy(c + nx, y, ny + 1);
    out[o] = c;
  }
  return rc;
}

static kiln_status eval_regex(const TE *te, const Stage *st, const void *const *bufs, uint8_t *out) {
  const Stage *x = &te->stages[st->src[0]];
  regex_t re;
  kiln_status rc = str_regex_compile(st->str->pattern, &re);
  if (rc) return rc;
  for (int64_t i = 0; i < st->numel; i++) out[i] = regexec(&re, str_at(bufs[x->id], i), 0, NULL, 0) == 0;
  regfree(&re);
  return KILN_OK;
}

static kiln_status eval_label(const TE *te, const Stage *st, const void *const *bufs, void *out) {
  const Stage *x = &te->stages[st->src[0]];
  const StrAttr *a = st->str;
  size_t es = kiln_dtype_size(a->val_t);
  for (int64_t i = 0; i < st->numel; i++) {
    int64_t k = str_label_find(a, bufs[x->id], i);
    const char *v = k >= 0 ? (const char *)a->values + (size_t)k * es : a->dflt;
    memcpy((char *)out + (size_t)i * es, v, es);
  }
  return KILN_OK;
}

static kiln_status eval_string_op(const TE *te, const Stage *st, const void *const *bufs, void *out, Arena *strings) {
  switch (st->op) {
  case OP_STR_NORMALIZE: return eval_normalize(te, st, bufs, out, strings);
  case OP_STR_CONCAT: return eval_concat(te, st, bufs, out, strings);
  case OP_REGEX_MATCH: return eval_regex(te, st, bufs, out);
  case OP_LABEL_ENCODE: return eval_label(te, st, bufs, out);
  default: return kiln_fail(KILN_ERR_UNSUPPORTED, "ref: opaque stage s%d '%s' has no host op", st->id, st->name);
  }
}

kiln_status ref_eval_stage_strings(const TE *te, int s, const void *const *bufs, void *out, Arena *strings) {
  const Stage *st = &te->stages[s];
  if (st->kind == ST_PARAM || st->kind == ST_CONST) {
    if (st->numel) memcpy(out, st->data, (size_t)st->numel * kiln_dtype_size(st->dtype));
    return KILN_OK;
  }
  if (st->kind == ST_OPAQUE && st->op >= OP_STR_NORMALIZE && st->op <= OP_LABEL_ENCODE)
    return eval_string_op(te, st, bufs, out, strings);
  if (st->kind == ST_INPUT || (st->kind == ST_OPAQUE && !st->body))
    return kiln_fail(KILN_ERR_UNSUPPORTED, "ref: stage s%d '%s' (%s) cannot be evaluated", s, st->name ? st->name : "",
                     st->kind == ST_INPUT ? "an input" : "opaque");
  Tape t;
  kiln_status rc = tape_build(&t, te, bufs, st->body);
  if (rc == KILN_OK) {
    tape_mark(&t, st->kind == ST_REDUCE ? st->rank : 0);
    rc = eval_points(st, &t, out);
  }
  tape_free(&t);
  return rc;
}

kiln_status ref_eval_stage(const TE *te, int s, const void *const *bufs, void *out) {
  return ref_eval_stage_strings(te, s, bufs, out, NULL);
}

static kiln_status ref_eval_all_strings(const TE *te, void **bufs, Arena *strings) {
  for (int s = 0; s < te->n_stages; s++) {
    const Stage *st = &te->stages[s];
    if (st->kind <= ST_CONST) {
      if (!bufs[s] && st->numel) return kiln_fail(KILN_ERR_INVALID_ARG, "ref: source stage s%d '%s' has no buffer", s, st->name);
      continue;
    }
    kiln_status rc = ref_eval_stage_strings(te, s, (const void *const *)bufs, bufs[s], strings);
    if (rc != KILN_OK) return rc;
  }
  return KILN_OK;
}

kiln_status ref_eval_all(const TE *te, void **bufs) { return ref_eval_all_strings(te, bufs, NULL); }

/* ---- the ref backend ---- */

static kiln_status ref_probe(void) { return KILN_OK; }

/* No dialect: the pipeline (schedule.c) interprets every stage with ref_eval_stage_strings
 * into host memory of its own. */
const Backend rt_backend_ref = {
  .name = "ref",
  .dialect = NULL,
  .host_memory = true,
  .probe = ref_probe,
};
