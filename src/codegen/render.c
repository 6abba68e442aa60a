/*
 * render.c — the one renderer. Takes a Plan and a Dialect, produces kernel source.
 *
 * A kernel is rendered as loops: the outer domain (parallel: each team thread's share in C, a
 * grid-stride loop over threads on a GPU), then the kernel's steps inside each outer
 * point: inner loops holding accumulators and per-point values, and per-outer-point
 * values between them (plan.h). Expressions are DAGs of hash-consed Exprs: each node
 * is emitted once as a numbered local ("t12") and reused while its scope is open.
 * Two special shapes:
 *   - pointwise kernels put their last dimension in a vectorisable inner loop;
 *   - reductions whose outer space has a long last dimension (matmul, conv, column
 *     sums) keep a row of accumulators over that dimension: for each reduction point
 *     the loop over the row is contiguous and vectorises, and the j-invariant part
 *     of the body (A[i,k] of a matmul) is hoisted out of it. The epilogue then runs
 *     over the finished row.
 * On the CPU three more: rows of accumulators in blocks over a dim the row's loads ignore
 * (a conv's output channels), the row loop split into border / interior / border where
 * the interior's padding guards simplify away; x @ W^T (weights [out, in]) as a 4 x 4 tile
 * of dot products; short reductions (pooling) vectorised over the last outer dim. f32 sums
 * of at most CG_CPU_F32_SUM_MAX terms accumulate in f32 there, longer ones in f64 like ref.
 * Names in the output are numbers only: buffers b<param>, vars v<n>, stage values
 * s<stage id>, accumulators a<stage id>, temporaries t<n>.
 *
 * Which algorithm a kernel gets depends on what the dialect can do (d->grid: blocks of
 * threads; a vector type); how it is spelled comes from the dialect alone. This file writes
 * the C-family syntax every dialect shares (operators, casts, braces, for/if) and kiln's
 * own names; every other token (types, literals, thread and block ids, shared memory,
 * barriers, vectors, reductions, pragmas, signatures) is a field of the Dialect.
 */
#include "codegen.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>

typedef struct Memo { const Expr *e; int id; bool narrow; } Memo;  /* narrow: t<id> is 32-bit index math */

typedef struct R {
  const Plan *p;
  const Kernel *k;
  const Dialect *d;
  const CgOptions *o;
  StrBuf *sb;
  int indent;
  Memo *memo; int n_memo, cap_memo;
  int memo_floor;      /* entries below it are another kernel's (a chain's other kernel emitted inside) */
  int marks[32]; int depth;
  int tmp;
  int *param_of;       /* stage -> parameter number, -1 if none */
  int64_t lo[12 * KILN_MAX_RANK], hi[12 * KILN_MAX_RANK];  /* kernel vars, then unrolled/blocked copies */
  int nv;
  const char *guard;   /* grid dialects: condition on stores of per-row values (one thread writes) */
  bool quad;           /* a row's reductions over a quad of lanes (an mma chain's rows in fragments) */
  int quad_keys;       /* ... and then over this many warps' quads (> 1: the chain's keys split over warps) */
  int lanes;           /* warp_row_steps: a row's lanes, a group of this many (0: the warp; banded pairs) */
  const char *live;    /* warp_row_steps: the condition on every store (NULL: none; a banded pair's rows) */
  const Expr *held;    /* warp_row_steps over a row read from memory (x < 0): the first loop's value kept at
                        * held_at, a lane's own slot, for the loops after (head_input; NULL: none) */
  const char *held_at;
  /* block rows: values of a row point (loads, unary ops) that a later inner loop needs again
   * are kept in registers c<i>[j], captured in the first loop computing them */
  const Expr *cached[8]; int cap_step[8]; int n_cached;
  bool cache_filled[8];  /* the loop at cap_step wrote it (a read before that is a renderer bug) */
  char cidx[24];       /* index of the current point in the c<i> arrays ("j", "4 * j + 1") */
  CgRows ro;           /* block rows: threads per row, rows per block, vector width */
  const char *kt;      /* block rows: this thread's index within its row's threads */
  int step;            /* the inner loop being rendered (-1 outside one) */
  int bdim;            /* cpu row blocks: the prefix dim whose copies are the rows (-1: flat blocks) */
  bool in_simd;        /* cpu: inside a vector loop over outer points (no nested simd pragma) */
  bool all_lazy;       /* every float select lazy: an expression te_unclamp_guarded rewrote (cpu_tile's packs) */
  int guard_var;       /* row_guards counts guards along this var (-1: the kernel's last) */
  const char *lane;    /* cpu: accumulators are arrays over the vector loop's points, indexed so ("[v3]") */
  int taps_unrolled;   /* rowsmall: the window's last var takes its values 0 .. this - 1 inside the vector
                          loop, one block each (0: it is a digit of the tap loop outside) */
  char lits[8][48]; int n_lit;   /* texts of the latest index literals (lit) */
  char guard0[48];     /* block rows: "<thread id> == 0" */
  bool narrow;         /* the text emit() gave last is 32-bit index math (index32_type) */
  int chain_lo, chain_hi;  /* loads of stages of these kernels read locals s<stage> (an attention chain) */
  const char *inner_pre;   /* a line at the top of every inner loop's body (a chain's row value from shared memory) */
  const char *inner_post;  /* ... at the end of step inner_post_step's (the row value P put back) */
  int inner_post_step;
  const Expr *kept;    /* cpu rows: a summand the sum's loop (step kept_step) stores in kE[r] and the later
                        * loops read (cpu_row_summand) */
  int kept_step;
  /* a banded pair (cg_pair_banded) while its GEMM is emitted: the tiles, the two kernels, KC's stage KR reads */
  const CgGemm *band; const Kernel *band_kc, *band_kr; int band_x;
  bool share;          /* in a shared band's steps (CgGemm.band_share): each step's sums meet across the band */
  /* ... a layernorm's variance met with its mean (share_variance): its items, the mean's factor, the
   * loop over a lane's points */
  const Item *var_a, *var_b; const Expr *var_c; bool var_div; const char *share_each;
  /* a headed chain (cg_gemm_headed) while its GEMM is emitted: the tiles, the rows kernel, its value P */
  const CgGemm *head; const Kernel *head_kr; int head_P;
  kiln_status st;
} R;

static void line(R *r, const char *f, ...) __attribute__((format(printf, 2, 3)));
static void line(R *r, const char *f, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, f);
  vsnprintf(buf, sizeof buf, f, ap);
  va_end(ap);
  for (int i = 0; i < r->indent; i++) sb_puts(r->sb, "  ");
  sb_puts(r->sb, buf);
  sb_puts(r->sb, "\n");
}

static void push(R *r) { KILN_ASSERT(r->depth < 32); r->marks[r->depth++] = r->n_memo; }
static void pop(R *r) { r->n_memo = r->marks[--r->depth]; }

static int memo_find(const R *r, const Expr *e, bool *narrow) {
  for (int i = r->n_memo - 1; i >= r->memo_floor; i--)
    if (r->memo[i].e == e) return *narrow = r->memo[i].narrow, r->memo[i].id;
  return -1;
}

/* A growing list of (Expr, value): the renderer's memo, and the visited list of a DAG walk.
 * seen_add is false when out of memory (each walk says what it then assumes). */
static bool seen_add(Memo **list, int *n, int *cap, const Expr *e, int v) {
  if (*n == *cap) {
    int nc = *cap ? 2 * *cap : 64;
    Memo *m = kiln_realloc(*list, (size_t)nc * sizeof *m);
    if (!m) return false;
    *list = m, *cap = nc;
  }
  (*list)[(*n)++] = (Memo){ e, v, false };
  return true;
}

static bool seen_find(const Memo *list, int n, const Expr *e, int *v) {
  for (int i = 0; i < n; i++)
    if (list[i].e == e) return *v = list[i].id, true;
  return false;
}

static void memo_add(R *r, const Expr *e, int id) {
  if (!seen_add(&r->memo, &r->n_memo, &r->cap_memo, e, id)) r->st = kiln_fail(KILN_ERR_NO_MEMORY, "codegen: out of memory");
}

static bool is_unsigned(kiln_dtype t) { return t >= KILN_U8 && t <= KILN_U64; }
static bool is_small_float(kiln_dtype t) { return t == KILN_F16 || t == KILN_BF16; }

static const char *vt(const R *r, kiln_dtype t) { return r->d->value_type[t]; }
static const char *ix(const R *r) { return r->d->index_type; }

/* a converted to type T in the dialect's form: "(T)a" (C family), "T(a)" (GLSL). */
static void cast_to(const R *r, const char *T, const char *a, char *o, size_t n) {
  snprintf(o, n, r->d->cast ? r->d->cast : "(%s)%s", T, a);
}

/* Before a float local's declaration: the dialect's qualifier that keeps its arithmetic exact. */
static const char *fq(const R *r, kiln_dtype t) { return r->d->float_qual && dtype_is_float(t) ? r->d->float_qual : ""; }

/* The NaN test of a, unparenthesised (a bool where bool is a type, else an int): a != a, or
 * the dialect's; and its negation, a == a. */
static void nan_test(const R *r, const char *a, bool is, char *o, size_t n) {
  if (r->d->isnan) {
    if (is) snprintf(o, n, r->d->isnan, a);
    else if (n > 1) o[0] = '!', snprintf(o + 1, n - 1, r->d->isnan, a);
  } else snprintf(o, n, "%s %s %s", a, is ? "!=" : "==", a);
}

/* a != a (or the dialect's isnan) as an int, a NaN flag's type: cast where bool is a type of its own. */
static void nan_flag_test(const R *r, const char *a, char *o, size_t n) {
  char isnan[128];
  nan_test(r, a, true, isnan, sizeof isnan);
  if (r->d->bool_type) {
    char p[140];
    snprintf(p, sizeof p, "(%s)", isnan);
    cast_to(r, "int", p, o, n);
  } else snprintf(o, n, "%s", isnan);
}

/* A boolean constant: 1/0 where comparisons are ints, true/false where bool is a type of its own. */
static const char *truth(const R *r, bool v) { return r->d->bool_type ? (v ? "true" : "false") : (v ? "1" : "0"); }

/* Index literal v in the dialect's form ("INT64_C(12)"). The text stays valid until eight
 * more are made: enough for any one line. */
static const char *lit(R *r, int64_t v) {
  char *b = r->lits[r->n_lit++ % 8];
  snprintf(b, sizeof r->lits[0], r->d->int_lit, (long long)v);
  return b;
}

/* ---- literals ---- */

static void literal(R *r, const Expr *e, char *out, size_t n) {
  kiln_dtype t = e->dtype;
  if (dtype_is_float(t)) {
    double v = e->c.f;
    bool f64 = t == KILN_F64;
    char num[64];
    snprintf(num, sizeof num, r->d->float_lit, v);
    if (v != v) snprintf(out, n, "%s", f64 ? r->d->nan_f64 : r->d->nan_f32);
    else if (isinf(v)) snprintf(out, n, "(%s%s)", v < 0 ? "-" : "", f64 ? r->d->inf_f64 : r->d->inf_f32);
    else snprintf(out, n, v < 0 ? "(%s%s)" : "%s%s", num, f64 ? (r->d->f64_suffix ? r->d->f64_suffix : "") : r->d->f32_suffix);
    return;
  }
  if (t == KILN_I64 && r->o->index32 && r->d->index32_type && e->c.i > INT32_MIN && e->c.i <= INT32_MAX) {
    snprintf(out, n, e->c.i < 0 ? "(%lld)" : "%lld", (long long)e->c.i);  /* an int: 32-bit index math */
    r->narrow = true;
    return;
  }
  /* the smallest i64 has no literal of its own (its negation overflows): by name */
  const char *i = e->c.i == INT64_MIN ? r->d->int_min[KILN_I64] : lit(r, e->c.i);
  if (t == KILN_I64) snprintf(out, n, "%s", i);
  else if (t == KILN_BOOL && r->d->bool_type) snprintf(out, n, "%s", truth(r, e->c.i != 0));
  else {
    char c[96];
    cast_to(r, vt(r, t), i, c, sizeof c);
    snprintf(out, n, "(%s)", c);
  }
}

/* ---- expressions ---- */

static void emit(R *r, const Expr *e, char *out, size_t n);

static int64_t stage_stride(const Stage *s, int i) { return te_stage_stride(s, i); }

static Expr *load_offset(R *r, const Expr *L) {
  TE *te = r->p->te;
  const Stage *S = &te->stages[L->src];
  Expr *off = te_const_i(te, KILN_I64, 0);
  for (int i = 0; i < L->n_args; i++)
    off = te_binary(te, TB_ADD, off, te_binary(te, TB_MUL, L->args[i], te_const_i(te, KILN_I64, stage_stride(S, i))));
  return off ? te_simplify(te, off, r->lo, r->hi, r->nv) : NULL;
}

static bool nonneg(const R *r, const Expr *e) {
  int64_t mn, mx;
  return te_range(e, r->lo, r->hi, r->nv, &mn, &mx) && mn >= 0;
}

/* f16/bf16 values live in floats, rounded after each op: text becomes round_fn(text). */
static void wrap_small(const R *r, kiln_dtype t, char *text, size_t n) {
  if (!is_small_float(t)) return;
  const char *fn = r->d->round_fn[t];
  size_t len = strlen(text), fl = strlen(fn);
  if (len + fl + 2 >= n) return;
  memmove(text + fl + 1, text, len);
  memcpy(text, fn, fl);
  text[fl] = '(';
  text[len + fl + 1] = ')';
  text[len + fl + 2] = 0;
}

/* 32-bit index math, in dialects that name an index32_type: an i64 node is computed in 32
 * bits ("narrow") when te_range bounds its value inside int32 and its i64 operands are
 * narrow too, so every step is exact in 32 bits. On a GPU a 64-bit multiply is several
 * instructions and a 64-bit division by a constant a few tens; the index maps of an
 * implicit-GEMM convolution are mostly such divisions. A narrow value used by a wider
 * op is widened first (binary_text's wide_a), so no 32-bit step can overflow. */
static bool fits32(const R *r, const Expr *e) {
  int64_t mn, mx;
  return r->o->index32 && r->d->index32_type && e->dtype == KILN_I64 && te_range(e, r->lo, r->hi, r->nv, &mn, &mx) &&
         mn > INT32_MIN && mx <= INT32_MAX;
}

/* An i64 op whose operands and result have known ranges (te_range checks every step for
 * overflow): C's signed arithmetic is exact there. */
static bool exact_index(const R *r, const Expr *e) {
  int64_t mn, mx;
  return te_range(e->args[0], r->lo, r->hi, r->nv, &mn, &mx) && te_range(e->args[1], r->lo, r->hi, r->nv, &mn, &mx) &&
         te_range(e, r->lo, r->hi, r->nv, &mn, &mx);
}

/* narrow: a and b are both 32-bit index texts and so is the result (fits32); wide_a: a is a
 * 32-bit text in a 64-bit op (widened before it can overflow). */
static void binary_text(R *r, const Expr *e, const char *a, const char *b, bool narrow, bool wide_a, char *o, size_t n) {
  kiln_dtype ot = e->args[0]->dtype, t = e->dtype;
  const char *T = vt(r, t);
  static const char *const cmp[] = { [TB_EQ] = "==", [TB_NE] = "!=", [TB_LT] = "<", [TB_LE] = "<=", [TB_GT] = ">", [TB_GE] = ">=" };
  if (e->op >= TB_EQ && e->op <= TB_GE) { snprintf(o, n, "(%s %s %s)", a, cmp[e->op], b); return; }
  if (dtype_is_float(ot)) {
    bool d = ot == KILN_F64;
    const char *fn = (d ? r->d->binary_f64 : r->d->binary_f32)[e->op];
    switch (e->op) {
    case TB_ADD: snprintf(o, n, "%s + %s", a, b); break;
    case TB_SUB: snprintf(o, n, "%s - %s", a, b); break;
    case TB_MUL: snprintf(o, n, "%s * %s", a, b); break;
    case TB_DIV: snprintf(o, n, "%s / %s", a, b); break;
    case TB_POW: case TB_MAX: case TB_MIN: case TB_MOD: case TB_FMOD:
      snprintf(o, n, "%s(%s, %s)", fn ? fn : "?", a, b);
      if (!fn && !r->st)
        r->st = kiln_fail(KILN_ERR_UNSUPPORTED, "codegen: kernel %d: the %s dialect has no %s on %s (a missing capability)",
                          r->k->id, r->d->name, te_binary_names[e->op], kiln_dtype_name(ot));
      break;
    case TB_FLOORDIV: snprintf(o, n, "%s(%s / %s)", (d ? r->d->unary_f64 : r->d->unary_f32)[TU_FLOOR], a, b); break;
    case TB_AND: snprintf(o, n, "(%s != 0 && %s != 0)", a, b); return;
    case TB_OR: snprintf(o, n, "(%s != 0 || %s != 0)", a, b); return;
    case TB_XOR: snprintf(o, n, "((%s != 0) != (%s != 0))", a, b); return;
    default: snprintf(o, n, "0"); return;
    }
    wrap_small(r, t, o, n);
    return;
  }
  bool u = is_unsigned(ot) || ot == KILN_BOOL;
  const char *U = vt(r, KILN_U64);  /* integer arithmetic wraps: done in u64 */
  bool cdiv = e->args[1]->kind == EX_CONST && e->args[1]->c.i > 0 && nonneg(r, e->args[0]);
  if (ot == KILN_BOOL && r->d->bool_type && (e->op == TB_AND || e->op == TB_OR || e->op == TB_XOR)) {
    snprintf(o, n, "(%s %s %s)", a, e->op == TB_AND ? "&&" : e->op == TB_OR ? "||" : "!=", b);
    return;
  }
  char in[256];  /* the operation, before its conversion to T */
  /* the helpers' operands where the dialect spells every conversion out (GLSL): in the 32-bit
   * overloads of its helpers below 64 bits (same results once cast back to T; on lavapipe an
   * i32 widened to i64 came out wrong), else in i64/u64 */
  char ha[96], hb[96];
  snprintf(ha, sizeof ha, "%s", a), snprintf(hb, sizeof hb, "%s", b);
  if (r->d->cast) {
    bool wide = ot == KILN_I64 || ot == KILN_U64;
    const char *H = vt(r, u ? (wide ? KILN_U64 : KILN_U32) : (wide ? KILN_I64 : KILN_I32));
    cast_to(r, H, a, ha, sizeof ha), cast_to(r, H, b, hb, sizeof hb);
  }
  switch (e->op) {
  case TB_ADD: case TB_SUB: case TB_MUL: {
    const char *op = e->op == TB_SUB ? "-" : e->op == TB_MUL ? "*" : "+";
    char ua[96], ub[96];
    if (ot == KILN_I64 && (narrow || exact_index(r, e))) {  /* index math: plain C keeps it analysable */
      if (wide_a && !narrow) cast_to(r, ix(r), a, ua, sizeof ua);
      else snprintf(ua, sizeof ua, "%s", a);
      snprintf(o, n, "(%s %s %s)", ua, op, b);
      return;
    }
    cast_to(r, U, a, ua, sizeof ua);
    cast_to(r, U, b, ub, sizeof ub);
    snprintf(in, sizeof in, "(%s %s %s)", ua, op, ub);
    break;
  }
  case TB_DIV: case TB_FLOORDIV:
    if (cdiv) { snprintf(o, n, "(%s / %s)", a, b); return; }
    snprintf(in, sizeof in, "%s(%s, %s)", u ? "k_udiv" : e->op == TB_DIV ? "k_sdiv" : "k_sfdiv", ha, hb);
    break;
  case TB_MOD: case TB_FMOD:
    if (cdiv) { snprintf(o, n, "(%s %% %s)", a, b); return; }
    snprintf(in, sizeof in, "%s(%s, %s)", u ? "k_umod" : e->op == TB_MOD ? "k_smod" : "k_sfmod", ha, hb);
    break;
  case TB_POW: snprintf(in, sizeof in, "%s(%s, %s)", u ? "k_upow" : "k_spow", ha, hb); break;
  case TB_MAX: snprintf(o, n, "(%s > %s ? %s : %s)", a, b, a, b); return;
  case TB_MIN: snprintf(o, n, "(%s < %s ? %s : %s)", a, b, a, b); return;
  case TB_AND: snprintf(in, sizeof in, "(%s & %s)", a, b); break;
  case TB_OR: snprintf(in, sizeof in, "(%s | %s)", a, b); break;
  case TB_XOR: snprintf(in, sizeof in, "(%s ^ %s)", a, b); break;
  case TB_SHL: snprintf(in, sizeof in, "%s(%s, %s)", u ? "k_ushl" : "k_sshl", ha, hb); break;
  case TB_SHR: snprintf(in, sizeof in, "%s(%s, %s)", u ? "k_ushr" : "k_sshr", ha, hb); break;
  default: snprintf(o, n, "0"); return;
  }
  cast_to(r, T, in, o, n);
}

/* Integer limits as doubles for k_f2s (te_eval_cast's saturation). */
static void int_limits(kiln_dtype t, const char **lo, const char **hi) {
  switch (t) {
  case KILN_I32: *lo = "-2147483648.0"; *hi = "2147483647.0"; return;
  case KILN_I16: *lo = "-32768.0"; *hi = "32767.0"; return;
  case KILN_I8: *lo = "-128.0"; *hi = "127.0"; return;
  case KILN_U8: *lo = "0.0"; *hi = "255.0"; return;
  case KILN_U16: *lo = "0.0"; *hi = "65535.0"; return;
  case KILN_U32: *lo = "0.0"; *hi = "4294967295.0"; return;
  default: *lo = "-9223372036854775808.0"; *hi = "9223372036854775808.0"; return;
  }
}

static void float_to_int(const R *r, kiln_dtype to, const char *dbl, char *o, size_t n) {
  if (to == KILN_U64) { snprintf(o, n, "k_f2u(%s)", dbl); return; }
  const char *lo, *hi, *sfx = r->d->f64_suffix ? r->d->f64_suffix : "";
  int_limits(to, &lo, &hi);
  char in[600];
  snprintf(in, sizeof in, "k_f2s(%s, %s%s, %s%s)", dbl, lo, sfx, hi, sfx);
  cast_to(r, vt(r, to), in, o, n);
}

/* An integer value as a double: "(double)a", through u64 for u64 values. */
static void int_to_double(const R *r, kiln_dtype from, const char *a, char *o, size_t n) {
  char u[600];
  if (from == KILN_U64) cast_to(r, vt(r, KILN_U64), a, u, sizeof u), a = u;
  cast_to(r, vt(r, KILN_F64), a, o, n);
}

/* implicit: the rounding an operation's 16-bit dtype implies (EX_CAST op 0), left out under excess
 * precision: the f32 value goes on, and its store or its mma stash rounds it once */
static void cast_text(R *r, kiln_dtype to, kiln_dtype from, const char *a, bool implicit, char *o, size_t n) {
  char d[512];
  if (dtype_is_float(from)) {
    if (to == KILN_BOOL) snprintf(o, n, "(%s != 0)", a);
    else if (from == KILN_F32 && to == KILN_F64 && r->d->widen_f32) snprintf(o, n, r->d->widen_f32, a);
    else if (dtype_is_float(to)) {
      cast_to(r, vt(r, to), a, o, n);
      if (!(implicit && r->o->excess_precision)) wrap_small(r, to, o, n);
    } else {
      cast_to(r, vt(r, KILN_F64), a, d, sizeof d);
      float_to_int(r, to, d, o, n);
    }
    return;
  }
  if (dtype_is_float(to)) {
    if (r->d->int_to_float_direct && to != KILN_F64 && from != KILN_I64 && from != KILN_U64) snprintf(d, sizeof d, "%s", a);
    else int_to_double(r, from, a, d, sizeof d);
    cast_to(r, vt(r, to), d, o, n);
    wrap_small(r, to, o, n);
  } else if (to == KILN_BOOL) snprintf(o, n, "(%s != 0)", a);
  else if (from == KILN_I32 && to == KILN_I64 && r->d->widen_i32) snprintf(o, n, r->d->widen_i32, a, a);
  else cast_to(r, vt(r, to), a, o, n);
}

static void unary_text(R *r, const Expr *e, const char *a, char *o, size_t n) {
  kiln_dtype ot = e->args[0]->dtype, t = e->dtype;
  const char *T = vt(r, t);
  if (dtype_is_float(ot)) {
    bool d = ot == KILN_F64;
    const char *const *un = d ? r->d->unary_f64 : r->d->unary_f32;
    const char *fn = un[e->op];
    char one[16];
    snprintf(one, sizeof one, "1.0%s", d ? (r->d->f64_suffix ? r->d->f64_suffix : "") : r->d->f32_suffix);
    switch (e->op) {
    case TU_NEG: snprintf(o, n, "(-%s)", a); break;
    case TU_RSQRT: snprintf(o, n, "%s / %s(%s)", one, un[TU_SQRT], a); break;
    case TU_RECIP: snprintf(o, n, "%s / %s", one, a); break;
    case TU_NOT: snprintf(o, n, "(%s == 0)", a); return;
    case TU_ISNAN: {
      char t[500];
      nan_test(r, a, true, t, sizeof t);
      snprintf(o, n, "(%s)", t);
      return;
    }
    case TU_ISINF: snprintf(o, n, "(%s(%s) != 0)", fn ? fn : "?", a); return;
    default: snprintf(o, n, "%s(%s)", fn ? fn : "?", a); break;
    }
    if (!fn && e->op != TU_NEG && e->op != TU_RECIP && e->op != TU_RSQRT && !r->st)
      r->st = kiln_fail(KILN_ERR_UNSUPPORTED, "codegen: kernel %d: the %s dialect has no %s on %s (a missing capability)",
                        r->k->id, r->d->name, te_unary_names[e->op], kiln_dtype_name(ot));
    wrap_small(r, t, o, n);
    return;
  }
  bool u = is_unsigned(ot) || ot == KILN_BOOL;
  const char *U = vt(r, KILN_U64);
  char ua[96], in[400];
  cast_to(r, U, a, ua, sizeof ua);
  switch (e->op) {
  case TU_NEG: snprintf(in, sizeof in, "(0 - %s)", ua); break;
  case TU_ABS:
    if (u) { snprintf(o, n, "%s", a); return; }
    snprintf(in, sizeof in, "(%s < 0 ? 0 - %s : %s)", a, ua, ua);
    break;
  case TU_SIGN:
    if (u) snprintf(in, sizeof in, "(%s != 0)", a);
    else if (r->d->bool_type) {
      char p[96], q[96], pt[48], qt[48];
      snprintf(pt, sizeof pt, "(%s > 0)", a), snprintf(qt, sizeof qt, "(%s < 0)", a);
      cast_to(r, "int", pt, p, sizeof p), cast_to(r, "int", qt, q, sizeof q);
      snprintf(in, sizeof in, "(%s - %s)", p, q);
    } else snprintf(in, sizeof in, "((%s > 0) - (%s < 0))", a, a);
    break;
  case TU_NOT:
    if (ot == KILN_BOOL) snprintf(in, sizeof in, "!%s", a);
    else snprintf(in, sizeof in, "~%s", ua);
    break;
  case TU_FLOOR: case TU_CEIL: case TU_ROUND: snprintf(o, n, "%s", a); return;
  case TU_ISNAN: case TU_ISINF: snprintf(o, n, "%s", truth(r, false)); return;
  default: {  /* transcendental on ints: through double, back with Cast rules */
    char d[512], f[600];
    int_to_double(r, ot, a, d, sizeof d);
    const char *fn = r->d->unary_f64[e->op];
    if (e->op == TU_RSQRT) snprintf(f, sizeof f, "1.0 / %s(%s)", r->d->unary_f64[TU_SQRT], d);
    else if (e->op == TU_RECIP) snprintf(f, sizeof f, "1.0 / %s", d);
    else snprintf(f, sizeof f, "%s(%s)", fn ? fn : "?", d);
    float_to_int(r, t, f, o, n);
    return;
  }
  }
  cast_to(r, T, in, o, n);
}

/* Row cache c<i> at the current point: registers, or (a long row, ro.reg_points > 0, one
 * array) the points past reg_points in the dynamic shared array, a thread's points strided
 * by the block so that a warp's accesses take 32 banks. The point index is a constant
 * after unrolling, so the choice costs nothing at run time. */
static void cache_get(const R *r, int i, char *out, size_t n) {
  if (!r->ro.reg_points) { snprintf(out, n, "c%d[%s]", i, r->cidx); return; }
  snprintf(out, n, "(%s < %d ? c%d[%s] : %s[(%s - %d) * %d + %s])", r->cidx, r->ro.reg_points, i, r->cidx,
           r->d->dyn_shared_name, r->cidx, r->ro.reg_points, r->ro.threads, r->kt);
}

static void cache_put(R *r, int i, int id) {
  r->cache_filled[i] = true;
  if (!r->ro.reg_points) { line(r, "c%d[%s] = t%d;", i, r->cidx, id); return; }
  line(r, "if (%s < %d) c%d[%s] = t%d; else %s[(%s - %d) * %d + %s] = t%d;", r->cidx, r->ro.reg_points, i, r->cidx,
       id, r->d->dyn_shared_name, r->cidx, r->ro.reg_points, r->ro.threads, r->kt, id);
}

/* Declares t<N> = text (of the dialect's 32-bit index type when narrow) and memoises e as it
 * (and keeps it in its row cache, if any). */
static void declare_as(R *r, const Expr *e, const char *text, bool narrow, char *out, size_t n) {
  int id = r->tmp++;
  line(r, "%s%s t%d = %s;", fq(r, e->dtype), narrow ? r->d->index32_type : vt(r, e->dtype), id, text);
  memo_add(r, e, id);
  if (narrow && !r->st) r->memo[r->n_memo - 1].narrow = true;
  r->narrow = narrow;
  snprintf(out, n, "t%d", id);
  for (int i = 0; i < r->n_cached; i++)
    if (r->cached[i] == e && r->cap_step[i] == r->step) cache_put(r, i, id);
}

static void declare(R *r, const Expr *e, const char *text, char *out, size_t n) { declare_as(r, e, text, false, out, n); }

static void emit_load(R *r, const Expr *e, char *out, size_t n) {
  snprintf(out, n, "0");  /* what callers print if a failure below returns early */
  int src = e->src;
  int ks = r->p->kernel_of[src];
  if (ks >= 0 && (ks == r->k->id || (ks >= r->chain_lo && ks <= r->chain_hi))) { snprintf(out, n, "s%d", src); return; }
  const Stage *S = &r->p->te->stages[src];
  if (plan_is_baked(r->p->te, src)) {
    TE *te = r->p->te;
    Expr *c = dtype_is_float(S->dtype) ? te_const_f(te, S->dtype, dtype_load_f64(S->dtype, S->data, 0))
                                       : te_const_i(te, S->dtype, dtype_load_i64(S->dtype, S->data, 0));
    if (!c) { r->st = kiln_fail(KILN_ERR_NO_MEMORY, "codegen: out of memory"); return; }
    literal(r, c, out, n);
    return;
  }
  char off[256] = "0", text[400];
  if (S->numel > 1) {
    Expr *o = load_offset(r, e);
    if (!o) { r->st = kiln_fail(KILN_ERR_NO_MEMORY, "codegen: out of memory"); return; }
    emit(r, o, off, sizeof off);
  }
  const char *fn = r->d->load_fn[S->dtype];
  char el[320];
  snprintf(el, sizeof el, r->d->elem ? r->d->elem : "b%d[%s]", r->param_of[src], off);
  snprintf(text, sizeof text, "%s%s%s%s", fn ? fn : "", fn ? "(" : "", el, fn ? ")" : "");
  declare(r, e, text, out, n);
}

/* May e, whose i64 operands' texts are narrow as nar[] says, be computed in 32 bits? Sums,
 * differences, products, max/min and selects; divisions and remainders only by a positive
 * constant of a non-negative value (C's truncation is then the floor). */
static bool narrow_node(const R *r, const Expr *e, const bool *nar) {
  if (!fits32(r, e)) return false;
  for (int i = e->kind == EX_SELECT ? 1 : 0; i < e->n_args; i++)
    if (!nar[i]) return false;
  if (e->kind == EX_SELECT) return true;
  if (e->kind != EX_BINARY || e->args[0]->dtype != KILN_I64) return false;
  switch (e->op) {
  case TB_ADD: case TB_SUB: case TB_MUL: case TB_MAX: case TB_MIN: return true;
  case TB_DIV: case TB_FLOORDIV: case TB_MOD: case TB_FMOD:
    return e->args[1]->kind == EX_CONST && e->args[1]->c.i > 0 && nonneg(r, e->args[0]);
  default: return false;
  }
}

static void finish(R *r, const Expr *e, char a[3][64], const bool *nar, char *out, size_t n) {
  char text[1024];
  bool narrow = narrow_node(r, e, nar);
  switch (e->kind) {
  case EX_UNARY: unary_text(r, e, a[0], text, sizeof text); break;
  case EX_BINARY: binary_text(r, e, a[0], a[1], narrow, nar[0] && nar[1], text, sizeof text); break;
  case EX_SELECT: snprintf(text, sizeof text, "(%s ? %s : %s)", a[0], a[1], a[2]); break;
  case EX_CAST: cast_text(r, e->dtype, e->args[0]->dtype, a[0], e->op == 0, text, sizeof text); break;
  default: snprintf(text, sizeof text, "0"); break;
  }
  declare_as(r, e, text, narrow, out, n);
}

static bool first_visit(R *r, const Expr *e, Memo **seen, int *n, int *cap);

/* Does e read memory that this point has not read yet (a load of another kernel's stage
 * that is not memoised)? A DAG walk; out of memory: no (the select stays eager). */
static bool reads_new(R *r, const Expr *e, Memo **seen, int *n, int *cap) {
  bool narrow;
  if (memo_find(r, e, &narrow) >= 0 || !first_visit(r, e, seen, n, cap)) return false;
  if (e->kind == EX_LOAD) return r->p->kernel_of[e->src] != r->k->id && !plan_is_baked(r->p->te, e->src);
  for (int i = 0; i < e->n_args; i++)
    if (reads_new(r, e->args[i], seen, n, cap)) return true;
  return false;
}

/* A select whose branches read memory is evaluated lazily: only the branch taken is computed,
 * in its own scope (what it memoises is forgotten after it). The gradients of a convolution
 * read a window as a chain of selects over its taps, one load each, of which one is taken;
 * eagerly every tap is loaded. Grid dialects take any such select (raced on the H200). Loop
 * dialects take only selects whose two branches both read memory (the tap chains: 0.71 on
 * cnn_train_b32's step on this CPU), and never in a pointwise kernel: a guard like padding
 * (a load or 0) stays eager, since a branch in a vector loop costs more than the one load
 * (convnet_mini 1.22 when it did not). Row caches keep selects eager (a value captured in a
 * branch may not be there), and so do chains too deep for the memo's scopes. */
static bool lazy_select(R *r, const Expr *e) {
  if (r->all_lazy && e->kind == EX_SELECT && dtype_is_float(e->dtype)) {
    /* not optional: the then-branch may read out of bounds where the condition fails */
    if (r->depth > 24 && !r->st) r->st = kiln_fail(KILN_ERR_UNSUPPORTED, "codegen: kernel %d: guarded selects nested too deep", r->k->id);
    return !r->st;
  }
  if (e->kind != EX_SELECT || !r->o->lazy_select || r->n_cached || r->depth > 24 || !dtype_is_float(e->dtype)) return false;
  if (!r->d->grid && r->k->kind == KN_POINTWISE) return false;
  Memo *seen = NULL;
  int n = 0, cap = 0;
  bool first = reads_new(r, e->args[1], &seen, &n, &cap), lazy;
  if (r->d->grid) lazy = first || reads_new(r, e->args[2], &seen, &n, &cap);
  else {  /* both branches: a fresh walk (the first one marked what the branches share as seen) */
    kiln_free(seen), seen = NULL, n = cap = 0;
    lazy = first && reads_new(r, e->args[2], &seen, &n, &cap);
  }
  kiln_free(seen);
  return lazy && !r->st;
}

static void emit(R *r, const Expr *e, char *out, size_t n);

static void emit_lazy_select(R *r, const Expr *e, char *out, size_t n) {
  char c[64], v[64];
  emit(r, e->args[0], c, sizeof c);
  int id = r->tmp++;
  line(r, "%s t%d;", vt(r, e->dtype), id);
  for (int b = 1; b <= 2; b++) {
    line(r, b == 1 ? "if (%s) {" : "} else {", c);
    r->indent++;
    push(r);
    emit(r, e->args[b], v, sizeof v);
    line(r, "t%d = %s;", id, v);
    pop(r);
    r->indent--;
  }
  line(r, "}");
  memo_add(r, e, id);
  snprintf(out, n, "t%d", id);
  r->narrow = false;
}

/* Recursive: keeps its frame small (deep chains of nodes recurse deeply). */
static void emit(R *r, const Expr *e, char *out, size_t n) {
  r->narrow = false;
  if (r->st) { snprintf(out, n, "0"); return; }
  bool narrow = false;
  int id = memo_find(r, e, &narrow);
  if (id >= 0) { snprintf(out, n, "t%d", id); r->narrow = narrow; return; }
  switch (e->kind) {
  case EX_CONST: literal(r, e, out, n); return;
  case EX_VAR:
    if (fits32(r, e)) {
      char v[16], c[40];
      snprintf(v, sizeof v, "v%d", e->var);
      cast_to(r, r->d->index32_type, v, c, sizeof c);
      snprintf(out, n, "(%s)", c), r->narrow = true;
    } else snprintf(out, n, "v%d", e->var);
    return;
  case EX_LOAD: emit_load(r, e, out, n); r->narrow = false; return;
  case EX_SELECT:
    if (lazy_select(r, e)) { emit_lazy_select(r, e, out, n); return; }
    break;
  default: break;
  }
  char a[3][64];
  bool nar[3] = { false, false, false };
  for (int i = 0; i < e->n_args; i++) emit(r, e->args[i], a[i], sizeof a[i]), nar[i] = r->narrow;
  finish(r, e, a, nar, out, n);
}

/* ---- items ---- */

/* The conversion of a value of dtype t to memory (NULL: none): under excess precision a value kept
 * in f32 rounds as it is stored. */
static const char *store_conversion(const R *r, kiln_dtype t) {
  return r->o->excess_precision && r->d->store_unrounded_fn[t] ? r->d->store_unrounded_fn[t] : r->d->store_fn[t];
}

static void store(R *r, const Item *it, const char *value) {
  if (!it->store) return;
  const Stage *S = &r->p->te->stages[it->stage];
  char off[256] = "0";
  if (S->numel > 1) emit(r, it->offset, off, sizeof off);
  const char *fn = store_conversion(r, S->dtype);
  char el[320];
  snprintf(el, sizeof el, r->d->elem ? r->d->elem : "b%d[%s]", r->param_of[it->stage], off);
  line(r, "%s%s%s%s = %s%s%s%s;", r->guard ? "if (" : "", r->guard ? r->guard : "", r->guard ? ") " : "", el,
       fn ? fn : "", fn ? "(" : "", value, fn ? ")" : "");
}

static void value_item(R *r, const Item *it) {
  char v[256];
  emit(r, it->body, v, sizeof v);
  kiln_dtype t = r->p->te->stages[it->stage].dtype;
  line(r, "%s%s s%d = %s;", fq(r, t), vt(r, t), it->stage, v);
  char name[32];
  snprintf(name, sizeof name, "s%d", it->stage);
  store(r, it, name);
}

static const char *acc_type(const R *r, const Stage *S, kiln_dtype body_t) {
  switch (S->rop) {
  case RO_SUM: case RO_PROD:
    if (dtype_is_float(body_t)) return vt(r, body_t == KILN_F32 && r->d->acc_f32 ? KILN_F32 : KILN_F64);
    return vt(r, KILN_U64);
  default: return vt(r, body_t);
  }
}

/* The extreme of an integer dtype by the dialect's name for it (unsigned minimum: 0). */
static void int_min_max(const R *r, kiln_dtype t, bool max, char *o, size_t n) {
  const char *s = max ? r->d->int_max[t] : r->d->int_min[t];
  snprintf(o, n, "%s", s ? s : "0");
}

/* Float max/min keep NaN in a flag, so the comparison itself is a plain max/min that
 * vectorises (an OpenMP max reduction). */
static bool nan_flag(const Stage *S, kiln_dtype bt) {
  return (S->rop == RO_MAX || S->rop == RO_MIN) && dtype_is_float(bt);
}

static void acc_init(R *r, const Item *it) {
  const Stage *S = &r->p->te->stages[it->stage];
  kiln_dtype bt = it->body->dtype;
  const char *A = acc_type(r, S, bt);
  char init[64];
  switch (S->rop) {
  case RO_SUM: snprintf(init, sizeof init, "0"); break;
  case RO_PROD: snprintf(init, sizeof init, "1"); break;
  case RO_MAX: case RO_MIN:
    if (dtype_is_float(bt)) snprintf(init, sizeof init, "%s%s", S->rop == RO_MAX ? "-" : "", bt == KILN_F64 ? r->d->inf_f64 : r->d->inf_f32);
    else int_min_max(r, bt, S->rop == RO_MIN, init, sizeof init);
    break;
  default: snprintf(init, sizeof init, "0"); break;
  }
  bool arg = S->rop == RO_ARGMAX || S->rop == RO_ARGMIN;
  if (r->lane) {  /* the arrays are declared by the loop that holds them */
    line(r, "a%d%s = %s;", it->stage, r->lane, init);
    if (arg) line(r, "ai%d%s = -1;", it->stage, r->lane);
    if (nan_flag(S, bt)) line(r, "an%d%s = 0;", it->stage, r->lane);
    return;
  }
  char ci[96];  /* where every conversion is spelled out, the literal in the accumulator's type */
  if (r->d->cast) cast_to(r, A, init, ci, sizeof ci);
  else snprintf(ci, sizeof ci, "%s", init);
  line(r, "%s%s a%d = %s;", fq(r, bt), A, it->stage, ci);
  if (arg) line(r, "%s ai%d = -1;", ix(r), it->stage);
  if (nan_flag(S, bt)) line(r, "int an%d = 0;", it->stage);  /* a NaN seen: the result is NaN */
}

static void acc_update(R *r, const Item *it, const char *v) {
  const Stage *S = &r->p->te->stages[it->stage];
  kiln_dtype bt = it->body->dtype;
  bool f = dtype_is_float(bt);
  char a[48], an[48], ai[48];  /* the accumulator, its NaN flag and its index (r->lane: array elements) */
  const char *ln = r->lane ? r->lane : "";
  snprintf(a, sizeof a, "a%d%s", it->stage, ln);
  snprintf(an, sizeof an, "an%d%s", it->stage, ln);
  snprintf(ai, sizeof ai, "ai%d%s", it->stage, ln);
  char cv[320], nan[160], isnan[128];  /* v in the accumulator's type; v != v as an int, and as a test */
  cast_to(r, acc_type(r, S, bt), v, cv, sizeof cv);
  nan_flag_test(r, v, nan, sizeof nan);
  nan_test(r, v, true, isnan, sizeof isnan);
  switch (S->rop) {
  case RO_SUM: line(r, "%s += %s;", a, cv); break;
  case RO_PROD: line(r, "%s *= %s;", a, cv); break;
  case RO_MAX:
    line(r, "%s = %s > %s ? %s : %s;", a, v, a, v, a);
    if (f) line(r, "%s |= %s;", an, nan);
    break;
  case RO_MIN:
    line(r, "%s = %s < %s ? %s : %s;", a, v, a, v, a);
    if (f) line(r, "%s |= %s;", an, nan);
    break;
  case RO_ARGMAX: case RO_ARGMIN: {
    const char *op = S->rop == RO_ARGMAX ? (S->select_last ? ">=" : ">") : (S->select_last ? "<=" : "<");
    /* as ref: NaN is the extreme, the first NaN wins (the last with select_last) */
    if (f) {
      char num[128];  /* the accumulator is not NaN */
      nan_test(r, a, false, num, sizeof num);
      line(r, "if (%s < 0 || (%s && (%s || %s)) || (%s && %s %s %s)) { %s = %s; %s = r; }", ai, isnan, num,
           truth(r, S->select_last), num, v, op, a, a, v, ai);
    } else line(r, "if (%s < 0 || %s %s %s) { %s = %s; %s = r; }", ai, v, op, a, a, v, ai);
    break;
  }
  }
}

static void acc_final(R *r, const Item *it, const char *acc) {
  const Stage *S = &r->p->te->stages[it->stage];
  const char *ln = r->lane ? r->lane : "";
  char text[160];
  if (S->rop == RO_ARGMAX || S->rop == RO_ARGMIN) snprintf(text, sizeof text, "ai%d%s", it->stage, ln);
  else if (nan_flag(S, it->body->dtype)) {
    char nan[64], val[64];
    cast_to(r, vt(r, S->dtype), S->dtype == KILN_F64 ? r->d->nan_f64 : r->d->nan_f32, nan, sizeof nan);
    cast_to(r, vt(r, S->dtype), acc, val, sizeof val);
    snprintf(text, sizeof text, "an%d%s%s ? %s : %s", it->stage, ln, r->d->bool_type ? " != 0" : "", nan, val);
  } else {
    cast_to(r, vt(r, S->dtype), acc, text, sizeof text);
    wrap_small(r, S->dtype, text, sizeof text);
  }
  line(r, "%s%s s%d = %s;", fq(r, S->dtype), vt(r, S->dtype), it->stage, text);
  char name[32];
  snprintf(name, sizeof name, "s%d", it->stage);
  store(r, it, name);
}

/* ---- loops ---- */

/* const v<first+i> = digit i of the flat index `flat` over shape[0..n-1], the last digit
 * first. total 0: every digit, the leading one (i = 0) flat / stride. total > 0 (the GEMM's
 * M, N, batch or K index): only the digits with sel[i] == want (sel NULL: all), of a flat
 * index over those alone with `total` points; the leading one is where the strides reach
 * total, written bare when its stride is 1. */
static void digits(R *r, const char *flat, int first, int n, const int64_t *shape, const int *sel, int want,
                   int64_t total) {
  const char *I = ix(r);
  int64_t stride = 1, points = 1;
  for (int i = 0; i < n; i++)  /* saturates past int32 */
    if (!sel || sel[i] == want)
      points = shape[i] > 0 && points > INT32_MAX / shape[i] ? (int64_t)INT32_MAX + 1 : points * shape[i];
  /* the flat index is below `points`: under 2^31 its digits are 32-bit divisions (fits32) */
  char f32[64], c[60];
  bool narrow = r->o->index32 && r->d->index32_type && points <= INT32_MAX;
  if (narrow) cast_to(r, r->d->index32_type, flat, c, sizeof c), snprintf(f32, sizeof f32, "(%s)", c), flat = f32;
  for (int i = n - 1; i >= 0; i--) {
    if (sel && sel[i] != want) continue;
    bool lead = total > 0 ? stride * shape[i] == total : i == 0;
    int v = first + i;
    char st[48], sh[48];  /* int literals when narrow, else the dialect's i64 ones */
    if (narrow) snprintf(st, sizeof st, "%lld", (long long)stride), snprintf(sh, sizeof sh, "%lld", (long long)shape[i]);
    else snprintf(st, sizeof st, "%s", lit(r, stride)), snprintf(sh, sizeof sh, "%s", lit(r, shape[i]));
    char dg[200];  /* the digit's expression */
    if (shape[i] == 1) snprintf(dg, sizeof dg, "0");
    else if (lead && total > 0 && stride == 1) snprintf(dg, sizeof dg, "%s", flat);
    else if (lead) snprintf(dg, sizeof dg, "%s / %s", flat, st);
    else if (stride == 1) snprintf(dg, sizeof dg, "%s %% %s", flat, sh);
    else snprintf(dg, sizeof dg, "(%s / %s) %% %s", flat, st, sh);
    if (narrow && shape[i] != 1 && r->d->widen_index) {  /* a digit is never negative */
      char w[240];
      snprintf(w, sizeof w, r->d->widen_index, dg);
      line(r, "const %s v%d = %s;", I, v, w);
    } else line(r, "const %s v%d = %s;", I, v, dg);
    stride *= shape[i];
  }
}

static void decompose(R *r, const char *flat, int first, int n, const int64_t *shape) {
  digits(r, flat, first, n, shape, NULL, 0, 0);
}

/* "for (v = from; v < to; v++) {", its body indented: a serial loop of index type */
static void open_for(R *r, const char *v, int64_t from, int64_t to) {
  line(r, "for (%s %s = %lld; %s < %s; %s++) {", ix(r), v, (long long)from, v, lit(r, to), v);
  r->indent++;
}

/* The same over kernel var v<id>. */
static void open_var_for(R *r, int id, int64_t from, int64_t to) {
  char v[16];
  snprintf(v, sizeof v, "v%d", id);
  open_for(r, v, from, to);
}

static void open_outer(R *r, int64_t n, int64_t work, bool simd) {
  if (r->d->grid) {
    line(r, "for (%s o = %s; o < %s; o += %s) {", ix(r), r->d->thread_index, lit(r, n), r->d->thread_stride);
    r->indent++;
    return;
  }
  if (n > 1 && simd) line(r, "%s", r->d->simd);
  char head[256];
  cg_team_for(r->d, "o", lit(r, n), n > 1 && work >= r->d->min_parallel_work, head, sizeof head);
  line(r, "%s", head);
  r->indent++;
}

static void close_block(R *r) { r->indent--; line(r, "}"); }

/* One reduction clause of a vector loop over accumulator <name><stage>[_<w>] (w < 0: none);
 * the length written. */
static size_t simd_clause(const R *r, const char *op, const char *name, int stage, int w, char *out, size_t n) {
  char v[32];
  if (w < 0) snprintf(v, sizeof v, "%s%d", name, stage);
  else snprintf(v, sizeof v, "%s%d_%d", name, stage, w);
  int len = snprintf(out, n, r->d->simd_reduce, op, v);
  return len > 0 ? (size_t)len : 0;
}

/* At one point of inner loop `step`: its accumulations updated, its other items computed. */
static void point_items(R *r, const Kernel *k, int step) {
  for (int i = 0; i < k->n_items; i++) {
    const Item *it = &k->items[i];
    if (it->step != step) continue;
    if (it->kind == IT_ACC) {
      char v[256];
      emit(r, it->body, v, sizeof v);
      acc_update(r, it, v);
    } else value_item(r, it);
  }
}

static void block_combine(R *r, const Item *it);

/* A kernel's accumulations. */
static int acc_items(const Kernel *k) {
  int n = 0;
  for (int i = 0; i < k->n_items; i++) n += k->items[i].kind == IT_ACC;
  return n;
}

/* A layernorm's two sums in one meeting (shared bands meeting by flags): the row kernel's only sums are
 * A = sum of E at step 0 (E the kept summand, in the lane's xv) and B = sum of (E - m)^2 at step 2, where
 * m = A * c (or A / c) at step 1, f32. Then each tile also sends q, its own points' sum of (E - its own
 * mean)^2, with its sum at the first meeting, and B is Chan's pairwise combination of the band's tiles,
 * sum over t of q_t + n_t (S_t / n_t - m)^2: the same value up to rounding, no second meeting. */
static bool share_variance(const R *r, const Kernel *kr, const Item *kept) {
  const Item *a = NULL, *b = NULL, *m = NULL;
  int accs = 0;
  for (int i = 0; i < kr->n_items; i++) {
    const Item *it = &kr->items[i];
    if (it->kind != IT_ACC) continue;
    accs++;
    if (it->step == 0) a = &kr->items[i];
    if (it->step == 2) b = &kr->items[i];
  }
  if (accs != 2 || !a || !b || kept != a) return false;
  const Expr *sq = b->body, *dv = sq->args[0];
  if (sq->kind != EX_BINARY || sq->op != TB_MUL || sq->args[0] != sq->args[1] || dv->kind != EX_BINARY || dv->op != TB_SUB ||
      dv->args[0] != a->body || dv->args[1]->kind != EX_LOAD)
    return false;
  for (int i = 0; i < kr->n_items; i++)
    if (kr->items[i].kind == IT_OUTER && kr->items[i].step == 1 && kr->items[i].stage == dv->args[1]->src) m = &kr->items[i];
  const Expr *mb = m ? m->body : NULL;
  if (!mb || mb->kind != EX_BINARY || (mb->op != TB_MUL && mb->op != TB_DIV) || mb->dtype != KILN_F32) return false;
  /* m = A op c, c a constant (a literal, or a constant stage the plan bakes into the source) */
  int li = mb->args[0]->kind == EX_LOAD && mb->args[0]->src == a->stage ? 0 : 1;
  const Expr *L = mb->args[li], *C = mb->args[1 - li];
  bool lit_c = C->kind == EX_CONST || (C->kind == EX_LOAD && plan_is_baked(r->p->te, C->src));
  if ((mb->op == TB_DIV && li) || L->kind != EX_LOAD || L->src != a->stage || !lit_c || C->dtype != KILN_F32) return false;
  R *w = (R *)r;
  w->var_a = a, w->var_b = b, w->var_c = C, w->var_div = mb->op == TB_DIV;
  return true;
}

/* A shared band's step (R.share): each sum of the step combined within its row's lanes, the row's
 * partial over the tile's columns stored (slot, row, column tile) by the row's first lane; the band's
 * tiles meet at its barrier; then every lane adds the band's partials in column-tile order, the same
 * order in every tile, so that each tile holds the same bits of the row's sum. */
static void share_final(R *r, const Kernel *k, int step) {
  const Dialect *d = r->d;
  const CgGemm *g = r->band;
  int kc = r->band_kc->id;
  int64_t nt = (g->N + g->bn - 1) / g->bn;
  char lead[64], at[160], ld[200], nts[32];
  snprintf(lead, sizeof lead, "gl == 0%s%s", r->live ? " && " : "", r->live ? r->live : "");
  snprintf(nts, sizeof nts, "%lldu", (long long)nt);
  bool any = false;  /* a step of per-point values alone: nothing to meet for */
  for (int i = 0; i < k->n_items; i++) any |= k->items[i].kind == IT_ACC && k->items[i].step == step;
  const Item *va = r->var_a, *vb = r->var_b;
  if (vb && step == vb->step) {  /* the variance, met with the mean (share_variance) */
    line(r, "a%d = cv%d;", vb->stage, vb->stage);
    char acc[48];
    snprintf(acc, sizeof acc, "a%d", vb->stage);
    acc_final(r, vb, acc);
    return;
  }
  int64_t last_cols = g->N - (nt - 1) * g->bn;  /* the last column tile's */
  char ncols[96];
  if (last_cols == g->bn) snprintf(ncols, sizeof ncols, "%d.0%s", g->bn, d->f32_suffix);
  else snprintf(ncols, sizeof ncols, "(t < %lld ? %d.0%s : %lld.0%s)", (long long)(nt - 1), g->bn, d->f32_suffix,
                (long long)last_cols, d->f32_suffix);
  int slots = acc_items(k);  /* the variance's q: the spare slot after the sums' */
  for (int pass = 0, slot = 0; any && pass < 2; pass++) {
    if (pass) {
      char bar[64], mine[32], wait[200];
      if (g->band_flags) {
        snprintf(bar, sizeof bar, "kiln_bb%d + (tm0 / %d) * %lld", kc, g->bm, (long long)nt);
        snprintf(mine, sizeof mine, "(unsigned)(tn0 / %d)", g->bn);
        snprintf(wait, sizeof wait, d->band_meet, bar, mine, nts);
      } else {
        snprintf(bar, sizeof bar, "kiln_bb%d + 2 * (tm0 / %d)", kc, g->bm);
        snprintf(wait, sizeof wait, d->band_barrier, bar, nts);
      }
      line(r, "%s", wait);
    }
    slot = 0;
    for (int i = 0; i < k->n_items; i++) {
      const Item *it = &k->items[i];
      if (it->kind != IT_ACC) continue;
      int s = it->stage, at_slot = slot++;
      if (it->step != step) continue;
      snprintf(at, sizeof at, "(kiln_bp%d + (%s + o) * %lld)", kc, lit(r, at_slot * g->M), (long long)nt);
      char qat[160];
      snprintf(qat, sizeof qat, "(kiln_bp%d + (%s + o) * %lld)", kc, lit(r, slots * g->M), (long long)nt);
      if (!pass) {
        block_combine(r, it);
        line(r, "if (%s) %s[tn0 / %d] = a%d;", lead, at, g->bn, s);
        if (it == va) {  /* q: the tile's own points about its own mean */
          char group[32], own[96];
          snprintf(group, sizeof group, d->group_reduce, r->lanes);
          snprintf(own, sizeof own, "(tn0 + %d <= %s ? %d.0%s : (%s)(%s - tn0))", g->bn, lit(r, g->N), g->bn, d->f32_suffix,
                   vt(r, KILN_F32), lit(r, g->N));
          line(r, "const %s mt%d = a%d / %s;", vt(r, KILN_F32), s, s, own);
          line(r, "%s cq%d = 0.0%s;", vt(r, KILN_F32), s, d->f32_suffix);
          line(r, "%s", r->share_each);
          line(r, "  const %s dq = xv[c] - mt%d;", vt(r, KILN_F32), s);
          line(r, "  cq%d += dq * dq;", s);
          line(r, "}");
          line(r, "cq%d = %s(cq%d, %s);", s, group, s, d->reduce_op[RO_SUM]);
          line(r, "if (%s) %s[tn0 / %d] = cq%d;", lead, qat, g->bn, s);
        }
        continue;
      }
      snprintf(ld, sizeof ld, d->cached_load, at);
      line(r, "a%d = %s;", s, ld);
      char more[200];
      snprintf(more, sizeof more, "%s + t", at);
      snprintf(ld, sizeof ld, d->cached_load, more);
      line(r, "for (int t = 1; t < %lld; t++) a%d += %s;", (long long)nt, s, ld);
      if (it == va) {  /* Chan's combination of the band's tiles into B, before m's own step computes m;
                        * ld reads tile t's sum, ldQ its squares */
        char cst[64], ldQ[200], atQ[200];
        emit(r, r->var_c, cst, sizeof cst);
        snprintf(atQ, sizeof atQ, "%s + t", qat);
        snprintf(ldQ, sizeof ldQ, d->cached_load, atQ);
        line(r, "%s cv%d = 0.0%s;", vt(r, KILN_F32), vb->stage, d->f32_suffix);
        line(r, "{");
        r->indent++;
        line(r, "const %s mm = a%d %s %s;", vt(r, KILN_F32), s, r->var_div ? "/" : "*", cst);
        line(r, "for (int t = 0; t < %lld; t++) {", (long long)nt);
        r->indent++;
        line(r, "const %s nn = %s, dm = %s / nn - mm;", vt(r, KILN_F32), ncols, ld);
        line(r, "cv%d += %s + nn * dm * dm;", vb->stage, ldQ);
        close_block(r);
        close_block(r);
      }
      char acc[48];
      snprintf(acc, sizeof acc, "a%d", s);
      acc_final(r, it, acc);
    }
  }
}

/* After inner loop `step`: each accumulation's result (combined across the threads of its row
 * first when `combine`, block_combine). */
static void accs_final(R *r, const Kernel *k, int step, bool combine) {
  if (combine && r->share) {
    share_final(r, k, step);
    return;
  }
  for (int i = 0; i < k->n_items; i++) {
    const Item *it = &k->items[i];
    if (it->step != step || it->kind != IT_ACC) continue;
    if (combine) block_combine(r, it);
    char acc[48];
    snprintf(acc, sizeof acc, "a%d%s", it->stage, r->lane ? r->lane : "");
    acc_final(r, it, acc);
  }
}

/* A row's kept summand E (row_summand) at `place`, a text naming its row slot: stored there by the
 * sum's loop, and read from there by the loops after it, memoised as E so they do not compute it. */
static void summand_store(R *r, const Expr *E, const char *place) {
  char e[256];
  emit(r, E, e, sizeof e);
  line(r, "%s = %s;  /* the summand, for the steps after */", place, e);
}

static void summand_load(R *r, const Expr *E, const char *place) {
  int id = r->tmp++;
  line(r, "const %s t%d = %s;", vt(r, E->dtype), id, place);
  memo_add(r, E, id);
}

/* How many of k's reduction vars nest as loops of their own around inner_loop's flat one: on
 * loop dialects (CgOptions.cpu_nested_sums), the leading vars before the shortest trailing run
 * of at least 8 points; 0 where the loop's flat point r is read (a kept summand's slot, a
 * chain's row value) */
static int nested_sums(const R *r, const Kernel *k) {
  if (r->d->grid || !r->o->cpu_nested_sums || r->kept || r->inner_pre || r->inner_post || k->n_red < 2) return 0;
  int64_t points = 1;
  int lead = k->n_red;
  while (lead > 0 && points < 8) points *= k->red_shape[--lead];
  return points >= 8 ? lead : 0;
}

/* The loops over k's reduction points, the innermost under `pragma` (a format taking `clauses`;
 * NULL: none), pushed: nested_sums' leading vars as loops, then one loop over the rest, a flat
 * point r split into digits (the last var alone is its own loop). Returns the leading loops
 * opened, for close_sum_loops. On a loop dialect a digit is an integer division and a remainder
 * a point, tens of cycles, and the leading vars' index math goes out of the inner loop:
 * cnn_train_b32's conv1 bias gradient summed 25,088 points of 32 x 28 x 28 flat, about 50
 * cycles a point. */
static int open_sum_loops(R *r, const Kernel *k, const char *pragma, const char *clauses) {
  int lead = nested_sums(r, k);
  for (int i = 0; i < lead; i++) open_var_for(r, k->rank + i, 0, k->red_shape[i]);
  if (pragma) line(r, pragma, clauses);
  if (lead && lead == k->n_red - 1) {
    open_var_for(r, k->rank + lead, 0, k->red_shape[lead]);
    push(r);
    return lead;
  }
  int64_t points = 1;
  for (int i = lead; i < k->n_red; i++) points *= k->red_shape[i];
  open_for(r, "r", 0, points);
  push(r);
  decompose(r, "r", k->rank + lead, k->n_red - lead, k->red_shape + lead);
  return lead;
}

static void close_sum_loops(R *r, int lead) {
  pop(r);
  close_block(r);
  for (int i = 0; i < lead; i++) close_block(r);
}

static void inner_loop(R *r, int step) {
  const Kernel *k = r->k;
  char clauses[512] = "";
  bool simd = true;
  size_t used = 0;
  for (int i = 0; i < k->n_items; i++) {
    const Item *it = &k->items[i];
    if (it->step != step || it->kind != IT_ACC) continue;
    acc_init(r, it);
    const Stage *S = &r->p->te->stages[it->stage];
    const char *op = r->d->simd_reduce_op[S->rop];
    if (!op || used > sizeof clauses - 64) { simd = false; continue; }
    used += simd_clause(r, op, "a", it->stage, -1, clauses + used, sizeof clauses - used);
    if (nan_flag(S, it->body->dtype)) used += simd_clause(r, r->d->simd_reduce_or, "an", it->stage, -1, clauses + used, sizeof clauses - used);
  }
  /* every inner loop vectorises: its points are independent (stores hit distinct elements,
   * reads come from memory or from earlier steps); the pragma also restores what OpenMP's
   * outlining hides from the compiler (restrict) */
  const char *pragma = !r->d->grid && !r->in_simd && simd && r->d->simd_sum && r->d->simd_sum[0] ? r->d->simd_sum : NULL;
  int lead = open_sum_loops(r, k, pragma, clauses);
  if (r->inner_pre) line(r, "%s", r->inner_pre);
  if (r->kept && step > r->kept_step) summand_load(r, r->kept, "kE[r]");
  point_items(r, k, step);
  if (r->kept && step == r->kept_step) summand_store(r, r->kept, "kE[r]");
  if (r->inner_post && step == r->inner_post_step) line(r, "%s", r->inner_post);
  close_sum_loops(r, lead);
  accs_final(r, k, step, false);
}

static const Item *cpu_row_summand(const R *r, const Kernel *k);

static void render_general(R *r, bool simd) {
  const Kernel *k = r->k;
  open_outer(r, k->outer_numel, k->outer_numel * k->inner_numel, simd);
  push(r);
  decompose(r, "o", 0, k->rank, k->shape);
  const Item *kept = simd ? NULL : cpu_row_summand(r, k);
  if (kept) {
    r->kept = kept->body, r->kept_step = kept->step;
    line(r, "%s kE[%lld];", vt(r, kept->body->dtype), (long long)k->inner_numel);
  }
  for (int step = 0; step < k->n_steps; step++) {
    if (!(step & 1)) { inner_loop(r, step); continue; }
    for (int i = 0; i < k->n_items; i++)
      if (k->items[i].step == step) value_item(r, &k->items[i]);
  }
  r->kept = NULL;
  pop(r);
  close_block(r);
}

/* Reductions over a few points each (pooling windows) with a long last outer dim: the outer
 * loop runs over the prefix and a vector loop over the last dim holds each lane's own
 * accumulator, the short reduction loop inside it (unrolled by the compiler, so its index
 * division folds). Any reduction op works this way, max with its NaN flag included. */
static bool rowsmall_interchange(const Kernel *k);

static bool rowsmall_fits(const Kernel *k) {
  if (k->kind != KN_REDUCE || k->rank < 2 || k->inner_numel > 16) return false;
  int64_t J = k->shape[k->rank - 1];  /* 7 (lenet's second pool) vectorises once interchanged */
  return (J >= 8 || (J >= 4 && rowsmall_interchange(k))) && k->outer_numel / J >= 2;
}

/* One accumulation step then values (a pooling window and its epilogue): the reduction
 * loop goes outside and the vector loop over the last dim inside it, each accumulator an
 * array over that dim. GCC vectorises no loop over outer points with a reduction loop
 * inside (the window's index is not affine in a flat reduction index): lenet's pooling,
 * scalar and branchy so, took a third of its run. */
static bool rowsmall_interchange(const Kernel *k) {
  for (int i = 0; i < k->n_items; i++)
    if ((k->items[i].kind == IT_ACC) != (k->items[i].step == 0) || k->items[i].step > 1) return false;
  return k->n_steps <= 2;
}

static int row_guards(R *r, const Expr *e, Memo **seen, int *n, int *cap, Memo **dseen, int *dn, int *dcap);

/* A tap of the window at each point of the last dim from..to: step 0's accumulations, with
 * their bodies from `bodies` (one per accumulation, in item order) when given. */
static void rowsmall_taps(R *r, const Expr *const *bodies, int64_t from, int64_t to) {
  const Kernel *k = r->k;
  line(r, "%s", r->d->simd);
  open_var_for(r, k->rank - 1, from, to);
  push(r);
  for (int q = 0; q < (r->taps_unrolled ? r->taps_unrolled : 1); q++) {
    if (r->taps_unrolled) {
      line(r, "{");
      r->indent++;
      push(r);
      line(r, "const %s v%d = %d;", ix(r), k->rank + k->n_red - 1, q);
    }
    if (!bodies) point_items(r, k, 0);
    else
      for (int i = 0, n = 0; i < k->n_items; i++) {
        const Item *it = &k->items[i];
        if (it->step != 0 || it->kind != IT_ACC) continue;
        char v[256];
        emit(r, bodies[n++], v, sizeof v);
        acc_update(r, it, v);
      }
    if (r->taps_unrolled) {
      pop(r);
      close_block(r);
    }
  }
  pop(r);
  close_block(r);
}

/* Guards along the last dim in step 0's bodies simplified over the current var ranges (into
 * out when given, at most 16). */
static int rowsmall_guards(R *r, const Expr **out) {
  Memo *seen = NULL, *dseen = NULL;
  int n = 0, cap = 0, dn = 0, dcap = 0, g = 0, na = 0;
  for (int i = 0; i < r->k->n_items; i++) {
    const Item *it = &r->k->items[i];
    if (it->step != 0 || it->kind != IT_ACC) continue;
    Expr *y = te_simplify(r->p->te, it->body, r->lo, r->hi, r->nv);
    if (!y || na >= 16) { g++; break; }
    if (out) out[na] = y;
    na++;
    g += row_guards(r, y, &seen, &n, &cap, &dseen, &dn, &dcap);
  }
  kiln_free(seen);
  kiln_free(dseen);
  return g;
}

/* The window's padding along the last dim (a depthwise convolution's, a padded pool's): the
 * smallest margin m (at most 3) that clears every guard from the taps at points m .. J-1-m,
 * whose simplified bodies go to inside; 0: no split. A border point decides per tap; an
 * inside one reads a contiguous run (the decisions along the other dims are the same for the
 * whole loop). */
static int rowsmall_margin(R *r, const Expr **inside) {
  const Kernel *k = r->k;
  int jv = k->rank - 1;
  int64_t J = k->shape[jv], lo = r->lo[jv], hi = r->hi[jv];
  if (!rowsmall_guards(r, NULL)) return 0;
  int found = 0;
  for (int m = 1; m <= 3 && J - 2 * m >= 4 && !found; m++) {
    r->lo[jv] = m, r->hi[jv] = J - 1 - m;
    if (!rowsmall_guards(r, inside)) found = m;
    r->lo[jv] = lo, r->hi[jv] = hi;
  }
  return found;
}

/* points(r, bodies, from, to) over the whole last dim: border, interior and border where
 * rowsmall_margin finds a margin (the interior with its simplified bodies and its range set
 * while rendered), else once with the kernel's own bodies. */
static void split_last_dim(R *r, void (*points)(R *, const Expr *const *, int64_t, int64_t)) {
  int jv = r->k->rank - 1;
  int64_t J = r->k->shape[jv];
  const Expr *inside[16];
  int m = rowsmall_margin(r, inside);
  if (!m) {
    points(r, NULL, 0, J);
    return;
  }
  int64_t lo = r->lo[jv], hi = r->hi[jv];
  points(r, NULL, 0, m);
  r->lo[jv] = m, r->hi[jv] = J - 1 - m;
  points(r, inside, m, J - m);
  r->lo[jv] = lo, r->hi[jv] = hi;
  points(r, NULL, J - m, J);
}

/* A small window summed at each point of a long last dim (a depthwise convolution's 3x3
 * taps), or its max or min (a pool's): the vector loop over the last dim outside, each point's
 * accumulator in a register, the window's vars as nested loops of constant length inside (the
 * compiler unrolls them whole; no division per tap), the epilogue at once; the last dim split
 * into border, interior and border as rowsmall's windows are. As a row of accumulators
 * (rowacc), each tap read and wrote every accumulator in memory and a border point's guards
 * ran once a tap: convnet_mini's 48x48 depthwise convolution took a sixth of the model, and
 * resnet50's 3x3/2 max pool over 64 channels of 112x112 took 294 us against 207 here. */
bool cg_window_match(const Plan *p, const Kernel *k, const CgOptions *o) {
  const TE *te = p->te;
  if (!o->cpu_windows || k->chain != 0) return false;  /* set on loop dialects only */
  if (k->kind != KN_REDUCE || k->rank < 2 || k->inner_numel < 2 || k->inner_numel > 16) return false;
  if (k->shape[k->rank - 1] < 8 || k->outer_numel / k->shape[k->rank - 1] < 2) return false;
  for (int i = 0; i < k->n_items; i++) {
    const Item *it = &k->items[i];
    if (it->kind == IT_INNER || it->step > 1 || (it->kind == IT_ACC) != (it->step == 0)) return false;
    ReduceOp rop = te->stages[it->stage].rop;
    if (it->kind == IT_ACC && ((rop != RO_SUM && rop != RO_MAX && rop != RO_MIN) || it->body->dtype != KILN_F32)) return false;
  }
  return k->n_steps <= 2;
}

bool cg_load_offset_at(const Plan *p, const Expr *L, const int64_t *v, int nv, int64_t *out) {
  const Stage *S = &p->te->stages[L->src];
  int64_t off = 0;
  for (int i = 0; i < L->n_args; i++) {
    int64_t mn, mx;
    if (!te_range(L->args[i], v, v, nv, &mn, &mx) || mn != mx) return false;
    off += mn * te_stage_stride(S, i);
  }
  *out = off;
  return true;
}

bool cg_points_idempotent(const Plan *p, const Kernel *k) {
  const TE *te = p->te;
  for (int i = 0; i < k->n_items; i++)
    for (int a = 0; a < te->n_assigns; a++)
      if (te->assigns[a].value == k->items[i].stage) return false;
  return true;
}

/* Points from..to of the last dim, at the vector loop's width W = 16: a run of more than W
 * points that W does not divide goes in chunks of W, the last one moved back to end at `to`
 * (its first points computed twice, the same values stored again). The compiler's remainder
 * of such a loop was scalar: lenet's first convolution (26 interior points: 16 in a vector,
 * 10 one at a time) 127 -> 98 us, two threads. */
enum { WINDOW_CHUNK = 16 };

/* Opens the vector loop over the last dim from..to: in chunks of w points (two blocks to
 * close) when w > 0, else whole (one block). Chunks need idempotent points. */
static void open_last_dim(R *r, int64_t from, int64_t to, int w) {
  int jv = r->k->rank - 1;
  if (!w) {
    line(r, "%s", r->d->simd);
    open_var_for(r, jv, from, to);
    return;
  }
  line(r, "for (%s kiln_c = %lld; kiln_c < %lld; kiln_c += %d) {", ix(r), (long long)from, (long long)to, w);
  r->indent++;
  line(r, "const %s kiln_b = kiln_c + %d <= %lld ? kiln_c : %lld;", ix(r), w, (long long)to, (long long)(to - w));
  line(r, r->d->simd_len, w);
  line(r, "for (%s v%d = kiln_b; v%d < kiln_b + %d; v%d++) {", ix(r), jv, jv, w, jv);
  r->indent++;
}

static int64_t window_stride(R *r);

static void window_points(R *r, const Expr *const *bodies, int64_t from, int64_t to) {
  const Kernel *k = r->k;
  int64_t n = to - from;
  /* not where a point's taps are known to step over elements (a stride-2 pool's 2x - 1, 2x,
   * 2x + 1): such a group of loads has gaps, and GCC then runs a vector's worth of points of every
   * loop one at a time, half of each chunk (resnet50's 3x3/2 max pool over 112x112: 183 us in
   * chunks, 67 us in one loop of 54 points) */
  bool chunks = n > WINDOW_CHUNK && n % WINDOW_CHUNK && r->d->simd_len && cg_points_idempotent(r->p, r->k) &&
                window_stride(r) <= 1;
  open_last_dim(r, from, to, chunks ? WINDOW_CHUNK : 0);
  push(r);
  /* f32 sums of at most 16 points in f32, as the row of sums and the tiles take them; a max or
   * min as every accumulator does (its NaN in a flag) */
  const char *F = vt(r, KILN_F32);
  for (int i = 0; i < k->n_items; i++)
    if (k->items[i].kind == IT_ACC && r->p->te->stages[k->items[i].stage].rop == RO_SUM) line(r, "%s a%d = 0;", F, k->items[i].stage);
    else if (k->items[i].kind == IT_ACC) acc_init(r, &k->items[i]);
  int opened = 0;
  for (int i = 0; i < k->n_red; i++) {
    if (k->red_shape[i] == 1) line(r, "const %s v%d = 0;", ix(r), k->rank + i);
    else open_var_for(r, k->rank + i, 0, k->red_shape[i]), opened++;
  }
  push(r);
  for (int i = 0, n = 0; i < k->n_items; i++) {
    const Item *it = &k->items[i];
    if (it->kind != IT_ACC) continue;
    char v[256];
    emit(r, bodies ? bodies[n] : it->body, v, sizeof v);
    n++;
    if (r->p->te->stages[it->stage].rop == RO_SUM) line(r, "a%d += %s;", it->stage, v);
    else acc_update(r, it, v);
  }
  pop(r);
  while (opened--) close_block(r);
  accs_final(r, k, 0, false);
  for (int i = 0; i < k->n_items; i++)
    if (k->items[i].step == 1) value_item(r, &k->items[i]);
  pop(r);
  close_block(r);
  if (chunks) close_block(r);
}

/* The window's padding along the dim before the last (a depthwise convolution's top and bottom
 * rows): the smallest margin m (at most 3) that clears every guard along it from the taps at
 * rows m .. I-1-m; 0: none (or too few rows, or too few images to share the threads). */
static int window_row_margin(R *r) {
  const Kernel *k = r->k;
  int iv = k->rank - 2;
  int64_t I = k->shape[iv], lo = r->lo[iv], hi = r->hi[iv];
  if (k->rank < 3 || I < 4 || k->outer_numel / (I * k->shape[k->rank - 1]) < 2) return 0;
  r->guard_var = iv;
  int found = 0;
  if (rowsmall_guards(r, NULL))
    for (int m = 1; m <= 3 && I - 2 * m >= 2 && !found; m++) {
      r->lo[iv] = m, r->hi[iv] = I - 1 - m;
      if (!rowsmall_guards(r, NULL)) found = m;
      r->lo[iv] = lo, r->hi[iv] = hi;
    }
  r->guard_var = -1;
  return found;
}

static void render_window(R *r) {
  const Kernel *k = r->k;
  int64_t J = k->shape[k->rank - 1];
  int m = window_row_margin(r);
  if (!m) {
    open_outer(r, k->outer_numel / J, k->outer_numel * k->inner_numel, false);
    push(r);
    decompose(r, "o", 0, k->rank - 1, k->shape);
    split_last_dim(r, window_points);
    pop(r);
    close_block(r);
    return;
  }
  /* rows border, interior and border: in the interior the bodies are simplified with the row
   * in its range, so the padding's row guards (and their clamps) vanish from every tap, as
   * the column's do in split_last_dim's interior; each image's rows stay on one thread */
  int iv = k->rank - 2;
  int64_t I = k->shape[iv], lo = r->lo[iv], hi = r->hi[iv];
  open_outer(r, k->outer_numel / (I * J), k->outer_numel * k->inner_numel, false);
  push(r);
  decompose(r, "o", 0, k->rank - 2, k->shape);
  const int64_t from[3] = { 0, m, I - m }, to[3] = { m, I - m, I };
  for (int part = 0; part < 3; part++) {
    r->lo[iv] = from[part], r->hi[iv] = to[part] - 1;
    open_var_for(r, iv, from[part], to[part]);
    push(r);
    split_last_dim(r, window_points);
    pop(r);
    close_block(r);
  }
  r->lo[iv] = lo, r->hi[iv] = hi;
  pop(r);
  close_block(r);
}

/* The chunk width of a pooling row that the vector width does not divide (0: whole rows):
 * 16, 8 or 4 points, the last chunk moved back (open_last_dim), when the row has no guards
 * (a padded pool keeps its border and interior split). A row of 14 ran as 8 + 4 lanes and two
 * scalar points, each with its NaN flag: lenet's first pool 39 -> 19 us, its second (rows
 * of 7, chunks of 4) 27 -> 18 us, two threads. */
static int rowsmall_chunk(R *r) {
  int64_t J = r->k->shape[r->k->rank - 1];
  int w = J > 16 ? 16 : J > 8 ? 8 : 4;
  if (J <= w || J % w == 0 || !r->d->simd_len || !cg_points_idempotent(r->p, r->k)) return 0;
  return rowsmall_guards(r, NULL) ? 0 : w;
}

/* Tap t of the window (its vars' digits, the last fastest) at the current lane: each
 * accumulation's body with the window's vars substituted and simplified, so the tap's
 * offset joins the constant term. Read as `const v = c` in the order the sum had, the offset
 * sat between the other terms and GCC took the taps of a stride-2 pool as unrelated
 * accesses: 4 lanes, not 8 (lenet's first pool 63 us against 20). */
static void rowsmall_tap(R *r, int64_t t) {
  const Kernel *k = r->k;
  TE *te = r->p->te;
  Expr *map[2 * KILN_MAX_RANK];
  int nv = k->rank + k->n_red;
  line(r, "{");
  r->indent++;
  push(r);
  for (int v = 0; v < k->rank; v++) map[v] = te_var(te, v);
  int64_t rest = t;
  for (int i = k->n_red - 1; i >= 0; i--) {
    int64_t c = rest % k->red_shape[i];
    rest /= k->red_shape[i];
    line(r, "const %s v%d = %lld;", ix(r), k->rank + i, (long long)c);  /* for a body left as it was */
    map[k->rank + i] = te_const_i(te, KILN_I64, c);
  }
  bool mapped = true;
  for (int v = 0; v < nv; v++) mapped = mapped && map[v];
  for (int i = 0; i < k->n_items; i++) {
    const Item *it = &k->items[i];
    if (it->step != 0 || it->kind != IT_ACC) continue;  /* step 0 holds only sums (rowsmall_interchange) */
    Expr *y = mapped ? te_substitute(te, it->body, map, nv) : NULL;
    if (y) y = te_simplify(te, y, r->lo, r->hi, r->nv);
    char v[256];
    emit(r, y ? y : it->body, v, sizeof v);
    acc_update(r, it, v);
  }
  pop(r);
  close_block(r);
}

static int64_t offset_at_vars(R *r, const Expr *x, const int64_t *v);

/* The elements between neighbours along the last dim of the first load in the window's first
 * accumulation, at the middle of every var (clear of the padding); 0: not known. */
static int64_t window_stride(R *r) {
  const Kernel *k = r->k;
  int nv = k->rank + k->n_red, jv = k->rank - 1;
  int64_t v[2 * KILN_MAX_RANK];
  for (int i = 0; i < nv; i++) v[i] = (i < k->rank ? k->shape[i] : k->red_shape[i - k->rank]) / 2;
  for (int i = 0; i < k->n_items; i++) {
    if (k->items[i].kind != IT_ACC || k->shape[jv] < 2) continue;
    int64_t a = offset_at_vars(r, k->items[i].body, v);
    v[jv] = v[jv] + 1 < k->shape[jv] ? v[jv] + 1 : v[jv] - 1;
    int64_t b = offset_at_vars(r, k->items[i].body, v);
    return a == INT64_MIN || b == INT64_MIN ? 0 : b > a ? b - a : a - b;
  }
  return 0;
}

static void render_rowsmall(R *r) {
  const Kernel *k = r->k;
  int jv = k->rank - 1;
  int64_t J = k->shape[jv];
  open_outer(r, k->outer_numel / J, k->outer_numel * k->inner_numel, false);
  push(r);
  decompose(r, "o", 0, k->rank - 1, k->shape);
  int w = rowsmall_chunk(r);
  if (w && rowsmall_interchange(k)) {
    /* each lane's accumulator a register, every tap (at most 16) written out inside the vector
     * loop (rowsmall_tap); a chunk re-runs its taps from scratch, so only the stores repeat */
    open_last_dim(r, 0, J, w);
    push(r);
    r->in_simd = true;
    for (int i = 0; i < k->n_items; i++)
      if (k->items[i].kind == IT_ACC) acc_init(r, &k->items[i]);
    for (int64_t t = 0; t < k->inner_numel; t++)
      rowsmall_tap(r, t);
    accs_final(r, k, 0, false);
    for (int i = 0; i < k->n_items; i++)
      if (k->items[i].step == 1) value_item(r, &k->items[i]);
    r->in_simd = false;
    pop(r);
    close_block(r);
    close_block(r);
    pop(r);
    close_block(r);
    return;
  }
  if (rowsmall_interchange(k)) {
    char lane[24];
    snprintf(lane, sizeof lane, "[v%d]", jv);
    for (int i = 0; i < k->n_items; i++) {
      const Item *it = &k->items[i];
      const Stage *S = &r->p->te->stages[it->stage];
      if (it->kind != IT_ACC) continue;
      const char *al = r->d->array_align ? r->d->array_align : "";
      line(r, "%s a%d[%lld]%s;", acc_type(r, S, it->body->dtype), it->stage, (long long)J, al);
      if (S->rop == RO_ARGMAX || S->rop == RO_ARGMIN) line(r, "%s ai%d[%lld]%s;", ix(r), it->stage, (long long)J, al);
      if (nan_flag(S, it->body->dtype)) line(r, "int an%d[%lld]%s;", it->stage, (long long)J, al);
    }
    r->lane = lane;
    r->in_simd = true;
    line(r, "%s", r->d->simd);
    open_var_for(r, jv, 0, J);
    for (int i = 0; i < k->n_items; i++)
      if (k->items[i].kind == IT_ACC) acc_init(r, &k->items[i]);
    close_block(r);
    /* a window's last var (a pool's column within the window, next to its neighbour in
     * memory) unrolled inside the vector loop: a lane's taps in the same order, and the loads
     * of a stride-2 pool's pair are in one iteration, which the compiler takes as two vector
     * loads and a shuffle; as a digit outside, each was a strided gather (lenet's first pool
     * 51 -> 39 us, two threads) */
    int64_t last = k->n_red ? k->red_shape[k->n_red - 1] : 1, stride = window_stride(r);
    /* ... but where a stride over 1 makes the taps overlap (a 3x3 pool at stride 2: 2x - 1,
     * 2x, 2x + 1), the compiler made nothing of the group: resnet50's stem pool ran scalar,
     * 1.7 ms, against 0.3 with the taps outside */
    r->taps_unrolled = last >= 2 && last <= 4 && (stride <= 1 || last <= stride) ? (int)last : 0;
    if (r->taps_unrolled) line(r, "/* the window's last %d taps in one iteration */", r->taps_unrolled);
    open_for(r, "r", 0, k->inner_numel / (r->taps_unrolled ? last : 1));
    push(r);
    decompose(r, "r", k->rank, k->n_red - (r->taps_unrolled ? 1 : 0), k->red_shape);
    split_last_dim(r, rowsmall_taps);  /* the interior's bodies without the padding's guards */
    pop(r);
    close_block(r);
    r->taps_unrolled = 0;
    line(r, "%s", r->d->simd);
    open_var_for(r, jv, 0, J);
    push(r);
    accs_final(r, k, 0, false);
    for (int i = 0; i < k->n_items; i++)
      if (k->items[i].step == 1) value_item(r, &k->items[i]);
    pop(r);
    close_block(r);
    r->lane = NULL;
    r->in_simd = false;
    pop(r);
    close_block(r);
    return;
  }
  open_last_dim(r, 0, J, 0);
  push(r);
  r->in_simd = true;
  for (int step = 0; step < k->n_steps; step++) {
    if (!(step & 1)) { inner_loop(r, step); continue; }
    for (int i = 0; i < k->n_items; i++)
      if (k->items[i].step == step) value_item(r, &k->items[i]);
  }
  r->in_simd = false;
  pop(r);
  close_block(r);
  pop(r);
  close_block(r);
}

static void render_pointwise(R *r) {
  const Kernel *k = r->k;
  int64_t last = k->rank ? k->shape[k->rank - 1] : 1;
  int64_t prefix = last ? k->outer_numel / last : 0;
  if (r->d->grid || k->rank <= 1 || prefix < 16 || last < 4) {
    render_general(r, true);
    return;
  }
  open_outer(r, prefix, k->outer_numel, false);
  push(r);
  decompose(r, "o", 0, k->rank - 1, k->shape);
  line(r, "%s", r->d->simd);
  open_var_for(r, k->rank - 1, 0, last);
  push(r);
  for (int i = 0; i < k->n_items; i++) value_item(r, &k->items[i]);
  pop(r);
  close_block(r);
  pop(r);
  close_block(r);
}

/* Does e depend on var v? (memoised on the DAG) */
static bool depends(const Expr *e, int v, Memo **seen, int *n, int *cap) {
  int known;
  if (seen_find(*seen, *n, e, &known)) return known;
  bool dep = e->kind == EX_VAR && e->var == v;
  for (int i = 0; i < e->n_args && !dep; i++) dep = depends(e->args[i], v, seen, n, cap);
  if (!seen_add(seen, n, cap, e, dep)) return true;  /* conservative: not hoisted */
  return dep;
}

static void hoist(R *r, const Expr *e, int v, Memo **seen, int *n, int *cap) {
  if (e->kind == EX_CONST || e->kind == EX_VAR) return;
  if (!depends(e, v, seen, n, cap)) { char tmp[256]; emit(r, e, tmp, sizeof tmp); return; }
  if (e->kind == EX_LOAD && r->p->kernel_of[e->src] != r->k->id && r->p->te->stages[e->src].numel > 1) {
    Expr *off = load_offset(r, e);  /* the row base of B[k, j] is j-invariant */
    if (off) hoist(r, off, v, seen, n, cap);
    return;
  }
  for (int i = 0; i < e->n_args; i++) hoist(r, e->args[i], v, seen, n, cap);
}

/* Reductions with a long last outer dim: a row of accumulators (matmul i-k-j order). */
typedef struct StrideCheck { R *r; int var; bool ok; } StrideCheck;

/* Element stride of load L's offset along var v, or INT64_MIN when not a constant (a
 * clamped index of a padded read: mostly contiguous). */
static int64_t load_stride(R *r, const Expr *L, int v) {
  TE *te = r->p->te;
  Expr *off = load_offset(r, L);
  Expr *map[12 * KILN_MAX_RANK];
  if (!off || v >= 12 * KILN_MAX_RANK) return INT64_MIN;
  for (int i = 0; i <= v; i++) map[i] = te_var(te, i);
  map[v] = te_binary(te, TB_ADD, te_var(te, v), te_const_i(te, KILN_I64, 1));
  Expr *d = te_binary(te, TB_SUB, te_substitute(te, off, map, v + 1), off);
  d = d ? te_simplify(te, d, r->lo, r->hi, r->nv) : NULL;
  return d && d->kind == EX_CONST ? d->c.i : INT64_MIN;
}

static void check_stride(const Expr *L, void *ctx) {
  StrideCheck *c = ctx;
  if (c->r->p->kernel_of[L->src] == c->r->k->id || c->r->p->te->stages[L->src].numel <= 1) return;
  int64_t st = load_stride(c->r, L, c->var);
  if (st != INT64_MIN && (st > 1 || st < -1)) c->ok = false;
}

/* The row loop runs along the last outer dim: worth it only when every load moves by 0 or 1
 * element along it. A weight stored [out, in] (x @ W^T) is read down a column that way;
 * the plain reduction loop reads it along its rows instead (a contiguous dot product). */
static bool rows_contiguous(R *r) {
  StrideCheck c = { r, r->k->rank - 1, true };
  for (int i = 0; i < r->k->n_items && c.ok; i++)
    if (r->k->items[i].kind == IT_ACC) te_visit_loads(r->k->items[i].body, check_stride, &c);
  return c.ok;
}

static bool rowacc_fits(const Kernel *k, const TE *te) {
  if (k->kind != KN_REDUCE || k->rank < 1 || k->inner_numel < 2) return false;
  int64_t J = k->shape[k->rank - 1];
  if (J < 8 || J > 4096) return false;
  for (int i = 0; i < k->n_items; i++) {
    const Item *it = &k->items[i];
    if (it->kind == IT_INNER || it->step > 1) return false;
    if (it->kind == IT_ACC) {
      const Stage *S = &te->stages[it->stage];
      if (it->step != 0 || S->rop != RO_SUM || !(it->body->dtype == KILN_F32 || it->body->dtype == KILN_F64)) return false;
    }
  }
  return true;
}

/* Unroll the reduction by 4 for f32 sums over a multiple of 4 points: the row of f64
 * accumulators is then read and written once per four products. */
static int rowacc_unroll(R *r) {
  const Kernel *k = r->k;
  int nacc = 0;
  for (int i = 0; i < k->n_items; i++)
    if (k->items[i].kind == IT_ACC) {
      if (k->items[i].body->dtype != KILN_F32) return 1;
      nacc++;
    }
  if (nacc > 8 || k->inner_numel % 4) return 1;
  for (int u = 1; u < 4; u++)
    for (int i = 0; i < k->n_red; i++) {
      r->lo[k->rank + k->n_red * u + i] = 0;
      r->hi[k->rank + k->n_red * u + i] = k->red_shape[i] - 1;
    }
  return 4;
}

/* f32 sums over at most CG_CPU_F32_SUM_MAX points accumulate in f32; longer ones keep the f64 rows. */
static bool sums_f32(const Kernel *k) {
  for (int i = 0; i < k->n_items; i++)
    if (k->items[i].kind == IT_ACC && k->items[i].body->dtype != KILN_F32) return false;
  return k->inner_numel <= CG_CPU_F32_SUM_MAX;
}

/* Var ids of the copies: the inner vars of unrolled step u (u >= 1) start at inner_first,
 * the prefix vars (outer but the last) of blocked row w at row_first. */
static int inner_first(const Kernel *k, int u) { return u ? k->rank + k->n_red * u : k->rank; }
static int row_first(const Kernel *k, int w) { return k->rank + 4 * k->n_red + w * (k->rank - 1); }

/* Var id of row w's copy of the blocked prefix dim (dim blocks). */
static int brow_var(const Kernel *k, int w) { return row_first(k, 4) + w; }

typedef struct DimCheck { R *r; int dim; Memo *seen; int n, cap; bool ok; } DimCheck;

/* A load that moves along the row must not depend on the blocked dim: then every row of the
 * block reads the same value (one load for all the rows' products). */
static void check_dim(const Expr *L, void *ctx) {
  DimCheck *c = ctx;
  if (!c->ok || c->r->p->kernel_of[L->src] == c->r->k->id || c->r->p->te->stages[L->src].numel <= 1) return;
  if (load_stride(c->r, L, c->r->k->rank - 1) != 0 && depends(L, c->dim, &c->seen, &c->n, &c->cap)) c->ok = false;
}

/* The prefix dim to block rows over: the last one that the row-varying loads ignore (a
 * matmul's row i, a convolution's output channel) and that splits into whole blocks: 16
 * rows for rows of at most 16 points (one vector each; lenet 1 thread ~5% faster than 8),
 * 8 up to 32 points, else 4. */
static int block_dim(R *r, int *rows) {
  const Kernel *k = r->k;
  int64_t J = k->shape[k->rank - 1];
  for (int d = k->rank - 2; d >= 0; d--) {
    int R8 = J <= 16 && k->shape[d] % 16 == 0 ? 16 : J <= 32 && k->shape[d] % 8 == 0 ? 8 : k->shape[d] % 4 == 0 ? 4 : 0;
    if (!R8) continue;
    DimCheck c = { r, d, NULL, 0, 0, true };
    for (int i = 0; i < k->n_items && c.ok; i++)
      if (k->items[i].kind == IT_ACC) te_visit_loads(k->items[i].body, check_dim, &c);
    kiln_free(c.seen);
    if (c.ok) { *rows = R8; return d; }
  }
  return -1;
}

/* Rows of the outer prefix per iteration share each load of the j-contiguous operand (B[k, j]
 * of a matmul, the input row of a convolution) across rows of accumulators: copies of one
 * prefix dim that those loads ignore when there is one, else four consecutive prefix points. */
static int row_block(R *r, int64_t prefix) {
  const Kernel *k = r->k;
  r->bdim = -1;
  if (k->n_items > 8 || k->rank < 2) return 1;
  int rows = 1, d = block_dim(r, &rows);
  if (d >= 0) {
    r->bdim = d;
    r->hi[d] = k->shape[d] / rows - 1;
    for (int w = 0; w < rows; w++) { r->lo[brow_var(k, w)] = 0; r->hi[brow_var(k, w)] = k->shape[d] - 1; }
    return rows;
  }
  if (prefix % 4 || prefix < 8) return 1;
  for (int w = 0; w < 4; w++)
    for (int i = 0; i < k->rank - 1; i++) {
      r->lo[row_first(k, w) + i] = 0;
      r->hi[row_first(k, w) + i] = k->shape[i] - 1;
    }
  return 4;
}

/* e with prefix vars renamed to row copy w (w < 0: kept) and inner vars to step u's. */
/* e with each kernel var v replaced by var var[v] (a copy's), simplified under the current
 * ranges (e itself, and the status set, when out of memory). */
static Expr *with_vars(R *r, Expr *e, const int *var) {
  TE *te = r->p->te;
  const Kernel *k = r->k;
  if (!e) return e;
  Expr *map[2 * KILN_MAX_RANK];
  for (int i = 0; i < k->rank + k->n_red; i++) map[i] = te_var(te, var[i]);
  Expr *x = te_substitute(te, e, map, k->rank + k->n_red);
  if (x) x = te_simplify(te, x, r->lo, r->hi, r->nv);
  if (!x) r->st = kiln_fail(KILN_ERR_NO_MEMORY, "codegen: out of memory");
  return x ? x : e;
}

/* The kernel's items at one copy's vars (var NULL: its own), in order: each accumulator's
 * result read from `acc` (a format; %d gets the item's stage), the other items of step
 * `step` (step < 0: all) computed. Epilogues of the tiled shapes, over one output each. */
static void items_at(R *r, int step, const int *var, const char *acc) {
  for (int i = 0; i < r->k->n_items; i++) {
    Item it = r->k->items[i];
    if (it.kind != IT_ACC && step >= 0 && it.step != step) continue;
    if (var) it.body = with_vars(r, it.body, var), it.offset = with_vars(r, it.offset, var);
    char a[64];
    snprintf(a, sizeof a, acc, it.stage);
    if (it.kind == IT_ACC) acc_final(r, &it, a);
    else value_item(r, &it);
  }
}

/* Vars of row copy w (prefix vars; w < 0: kept) and unrolled step u (inner vars). */
static void row_copy_vars(const R *r, int w, int u, int *var) {
  const Kernel *k = r->k;
  for (int i = 0; i < k->rank; i++)
    var[i] = w < 0 || i >= k->rank - 1 ? i : r->bdim < 0 ? row_first(k, w) + i : i == r->bdim ? brow_var(k, w) : i;
  for (int i = 0; i < k->n_red; i++) var[k->rank + i] = inner_first(k, u) + i;
}

static Expr *renamed(R *r, Expr *e, int w, int u) {
  if (!e || (w < 0 && u == 0)) return e;
  int var[2 * KILN_MAX_RANK];
  row_copy_vars(r, w, u, var);
  return with_vars(r, e, var);
}

static void rowacc_epilogue(R *r, int rows, int64_t J) {
  int jv = r->k->rank - 1;
  for (int w = 0; w < rows; w++) {
    open_var_for(r, jv, 0, J);
    push(r);
    int var[2 * KILN_MAX_RANK];
    row_copy_vars(r, w, 0, var);
    char acc[48];
    snprintf(acc, sizeof acc, "a%%d_%d[v%d]", w, jv);
    items_at(r, -1, rows > 1 ? var : NULL, acc);
    pop(r);
    close_block(r);
  }
}

/* renamed, and simplified under the current var ranges even when nothing is renamed. */
static Expr *resimplified(R *r, Expr *e, int w, int u) {
  Expr *x = renamed(r, e, w, u);
  Expr *y = x ? te_simplify(r->p->te, x, r->lo, r->hi, r->nv) : NULL;
  if (x && !y) r->st = kiln_fail(KILN_ERR_NO_MEMORY, "codegen: out of memory");
  return y ? y : x;
}

/* Guards along the row in e: selects on a j-dependent condition and integer compares and
 * clamps of j-dependent indices (the padding of a convolution). */
static int row_guards(R *r, const Expr *e, Memo **seen, int *n, int *cap, Memo **dseen, int *dn, int *dcap) {
  int known;
  if (seen_find(*seen, *n, e, &known)) return 0;
  if (!seen_add(seen, n, cap, e, 0)) return 1;  /* conservative: no split */
  int jv = r->guard_var >= 0 ? r->guard_var : r->k->rank - 1, g = 0;
  if (e->kind == EX_SELECT && depends(e->args[0], jv, dseen, dn, dcap)) g = 1;
  if (e->kind == EX_BINARY && e->n_args == 2 && !dtype_is_float(e->args[0]->dtype) &&
      (e->op == TB_MAX || e->op == TB_MIN || e->op == TB_LT || e->op == TB_LE || e->op == TB_GT || e->op == TB_GE) &&
      depends(e, jv, dseen, dn, dcap))
    g = 1;
  for (int i = 0; i < e->n_args; i++) g += row_guards(r, e->args[i], seen, n, cap, dseen, dn, dcap);
  return g;
}

static int rowacc_guards(R *r, int unroll) {
  Memo *seen = NULL, *dseen = NULL;
  int n = 0, cap = 0, dn = 0, dcap = 0, g = 0;
  for (int u = 0; u < unroll; u++)
    for (int i = 0; i < r->k->n_items; i++)
      if (r->k->items[i].kind == IT_ACC) g += row_guards(r, resimplified(r, r->k->items[i].body, -1, u), &seen, &n, &cap, &dseen, &dn, &dcap);
  kiln_free(seen);
  kiln_free(dseen);
  return g;
}

/* Padding guards along the row (a convolution's taps past the image edge) vanish from the
 * bodies where j keeps every tap inside: the row loop is split into border, interior and
 * border, the interior without masks or clamps. The margin m is the smallest that clears all
 * guards (0: no split). */
static int interior_margin(R *r, int rows, int unroll) {
  const Kernel *k = r->k;
  int jv = k->rank - 1;
  int64_t J = k->shape[jv], lo = r->lo[jv], hi = r->hi[jv];
  (void)rows;
  if (!rowacc_guards(r, unroll)) return 0;
  int found = 0;
  for (int m = 1; m <= 3 && J - 2 * m >= 8 && !found; m++) {
    r->lo[jv] = m, r->hi[jv] = J - 1 - m;
    if (!rowacc_guards(r, unroll)) found = m;
    r->lo[jv] = lo, r->hi[jv] = hi;
  }
  return found;
}

/* One run [from, to) of the row loop: each row's products added into its accumulators. */
static void rowacc_loop(R *r, const Expr *(*body)[4][8], int64_t from, int64_t to, int rows, int unroll, const char *sacc) {
  const Kernel *k = r->k;
  int jv = k->rank - 1;
  line(r, "%s", r->d->simd);
  open_var_for(r, jv, from, to);
  push(r);
  for (int i = 0, n = 0; i < k->n_items; i++) {
    const Item *it = &k->items[i];
    if (it->kind != IT_ACC) continue;
    for (int w = 0; w < rows; w++) {
      char v[4][64];
      for (int u = 0; u < unroll; u++) emit(r, body[w][u][n], v[u], sizeof v[u]);
      /* unrolled: four f32 products summed pairwise in f32, then into the row */
      if (unroll == 4) line(r, "a%d_%d[v%d] += (%s)((%s + %s) + (%s + %s));", it->stage, w, jv, sacc, v[0], v[1], v[2], v[3]);
      else line(r, "a%d_%d[v%d] += (%s)%s;", it->stage, w, jv, sacc, v[0]);
    }
    n++;
  }
  pop(r);
  close_block(r);
}

static void render_rowacc(R *r) {
  const Kernel *k = r->k;
  int jv = k->rank - 1;
  int64_t J = k->shape[jv], prefix = k->outer_numel / J;
  int unroll = rowacc_unroll(r), rows = row_block(r, prefix);
  const char *sacc = vt(r, sums_f32(k) ? KILN_F32 : KILN_F64);
  r->nv = brow_var(k, 16);
  open_outer(r, prefix / rows, k->outer_numel * k->inner_numel, false);
  push(r);
  if (r->bdim >= 0) {  /* o over the prefix with the blocked dim counted in blocks */
    int64_t sh[KILN_MAX_RANK];
    memcpy(sh, k->shape, sizeof sh);
    sh[r->bdim] /= rows;
    decompose(r, "o", 0, k->rank - 1, sh);
    for (int w = 0; w < rows; w++) line(r, "const %s v%d = v%d * %d + %d;", ix(r), brow_var(k, w), r->bdim, rows, w);
  }
  if (rows == 1) decompose(r, "o", 0, k->rank - 1, k->shape);
  for (int w = 0; w < rows && rows > 1 && r->bdim < 0; w++) {
    char flat[16];
    snprintf(flat, sizeof flat, "p%d", w);
    line(r, "const %s p%d = o * %d + %d;", ix(r), w, rows, w);
    decompose(r, flat, row_first(k, w), k->rank - 1, k->shape);
  }
  int nacc = 0;
  for (int i = 0; i < k->n_items; i++) {
    const Item *it = &k->items[i];
    if (it->kind != IT_ACC) continue;
    nacc++;
    for (int w = 0; w < rows; w++) {  /* products in f32, sums in f32 or (as ref) f64 */
      line(r, "%s a%d_%d[%lld];", sacc, it->stage, w, (long long)J);
      line(r, "for (%s j = 0; j < %lld; j++) a%d_%d[j] = 0;", ix(r), (long long)J, it->stage, w);
    }
  }
  line(r, "for (%s r = 0; r < %s; r += %d) {", ix(r), lit(r, k->inner_numel), unroll);
  r->indent++;
  push(r);
  const Expr *body[2][16][4][8];  /* [border, interior][row][unrolled step][acc item] */
  Memo *seen = NULL;
  int ns = 0, cs = 0;
  for (int u = 0; u < unroll; u++) {
    char flat[16];
    snprintf(flat, sizeof flat, "q%d", u);
    line(r, "const %s q%d = r + %d;", ix(r), u, u);
    decompose(r, flat, inner_first(k, u), k->n_red, k->red_shape);
  }
  int m = interior_margin(r, rows, unroll);
  int64_t lo = r->lo[jv], hi = r->hi[jv];
  for (int pass = 0; pass < (m ? 2 : 1); pass++) {  /* pass 1: the interior's bodies */
    if (pass) r->lo[jv] = m, r->hi[jv] = J - 1 - m;
    for (int w = 0; w < rows; w++)
      for (int u = 0; u < unroll; u++)
        for (int i = 0, n = 0; i < k->n_items; i++)
          if (k->items[i].kind == IT_ACC) {
            body[pass][w][u][n] = resimplified(r, k->items[i].body, rows > 1 ? w : -1, u);
            hoist(r, body[pass][w][u][n++], jv, &seen, &ns, &cs);
          }
    r->lo[jv] = lo, r->hi[jv] = hi;
  }
  kiln_free(seen);
  if (!m) rowacc_loop(r, body[0], 0, J, rows, unroll, sacc);
  else {
    rowacc_loop(r, body[0], 0, m, rows, unroll, sacc);
    r->lo[jv] = m, r->hi[jv] = J - 1 - m;
    rowacc_loop(r, body[1], m, J - m, rows, unroll, sacc);
    r->lo[jv] = lo, r->hi[jv] = hi;
    rowacc_loop(r, body[0], J - m, J, rows, unroll, sacc);
  }
  (void)nacc;
  pop(r);
  close_block(r);
  rowacc_epilogue(r, rows, J);
  pop(r);
  close_block(r);
}

/* ---- dot products: x @ W^T ----
 * A reduction whose loads are contiguous along the reduction, not along the last outer dim
 * (weights stored [out, in]): four neighbouring outputs per iteration share each load of
 * the row of x, each a vectorised f64 dot product. */
typedef struct LoadList { const Expr *l[32]; int n; } LoadList;
static void collect_load(const Expr *L, void *ctx) {
  LoadList *ll = ctx;
  if (ll->n < 32) ll->l[ll->n++] = L;
  else ll->n = 32;
}

static int jcopy(const Kernel *k, int w) { return row_first(k, 4) + w; }
static int icopy(const Kernel *k, int w) { return row_first(k, 4) + 4 + w; }

static bool dot_fits(const Kernel *k, const TE *te) {
  if (k->kind != KN_REDUCE || k->rank < 1 || k->inner_numel < 8 || k->n_items > 8) return false;
  int64_t J = k->shape[k->rank - 1];
  if (J % 4 || J < 4) return false;
  for (int i = 0; i < k->n_items; i++) {
    const Item *it = &k->items[i];
    if (it->kind == IT_INNER || it->step > 1) return false;
    if (it->kind == IT_ACC && (it->step != 0 || te->stages[it->stage].rop != RO_SUM || it->body->dtype != KILN_F32))
      return false;
  }
  return true;
}

/* A prefix dim with a multiple of 4 points that no j-varying load depends on (the row i of
 * x @ W^T): four copies of it and four of j make a 4 x 4 tile of dot products, each row of x
 * and each row of W loaded once per reduction step for four products. -1: none. */
/* Rows of x per tile: 4 x 4 dot products (16 accumulators, 8 loads per 16 products) measured
 * best of 2, 4 rows on the encoder; mlp liked 2 by ~10%. */
#define DOT_ROWS 4
static int dot_row_dim(R *r) {
  const Kernel *k = r->k;
  int nacc = 0;
  for (int i = 0; i < k->n_items; i++) nacc += k->items[i].kind == IT_ACC;
  if (nacc != 1) return -1;
  for (int d = k->rank - 2; d >= 0; d--) {
    if (k->shape[d] % DOT_ROWS) continue;
    bool ok = true;
    for (int i = 0; i < k->n_items && ok; i++) {
      if (k->items[i].kind != IT_ACC) continue;
      Memo *seen = NULL;
      int n = 0, cap = 0;
      DimCheck c = { r, d, NULL, 0, 0, true };
      LoadList ll = { { 0 }, 0 };
      te_visit_loads(k->items[i].body, collect_load, &ll);
      for (int l = 0; l < ll.n && ok; l++)
        if (depends(ll.l[l], k->rank - 1, &seen, &n, &cap) && depends(ll.l[l], d, &c.seen, &c.n, &c.cap)) ok = false;
      if (ll.n >= 32) ok = false;
      kiln_free(seen);
      kiln_free(c.seen);
    }
    if (ok) return d;
  }
  return -1;
}

/* e with the last outer var renamed to copy wj and (wi >= 0) the tile's row dim to copy wi. */
static void dot_copy_vars(const R *r, int wi, int wj, int *var) {
  const Kernel *k = r->k;
  for (int i = 0; i < k->rank + k->n_red; i++)
    var[i] = i == k->rank - 1 ? jcopy(k, wj) : wi >= 0 && i == r->bdim ? icopy(k, wi) : i;
}

static Expr *j_renamed(R *r, Expr *e, int wi, int wj) {
  int var[2 * KILN_MAX_RANK];
  dot_copy_vars(r, wi, wj, var);
  return with_vars(r, e, var);
}

/* A divisor C of the reduction index inside the bodies (r / C, r % C: a read through a
 * reshape of heads, [.., h, d] -> [.., h * d]) that divides the reduction: the loop is then
 * split into r = q * C + s, s innermost, so the vector loop has no division. 0: none. */
static int64_t red_divisor(R *r, const Expr *e, Memo **seen, int *n, int *cap, Memo **dseen, int *dn, int *dcap) {
  int known;
  if (seen_find(*seen, *n, e, &known) || !seen_add(seen, n, cap, e, 0)) return 0;
  const Kernel *k = r->k;
  if (e->kind == EX_BINARY && (e->op == TB_FLOORDIV || e->op == TB_MOD || e->op == TB_DIV) &&
      e->args[1]->kind == EX_CONST && !dtype_is_float(e->dtype) && e->args[1]->c.i > 1 &&
      e->args[1]->c.i < k->inner_numel && k->inner_numel % e->args[1]->c.i == 0 && depends(e->args[0], k->rank, dseen, dn, dcap))
    return e->args[1]->c.i;
  for (int i = 0; i < e->n_args; i++) {
    int64_t c = red_divisor(r, e->args[i], seen, n, cap, dseen, dn, dcap);
    if (c) return c;
  }
  return 0;
}

static int64_t dot_split(R *r) {
  const Kernel *k = r->k;
  if (k->n_red != 1) return 0;
  Memo *seen = NULL, *dseen = NULL;
  int n = 0, cap = 0, dn = 0, dcap = 0;
  int64_t c = 0;
  for (int i = 0; i < k->n_items && !c; i++)
    if (k->items[i].kind == IT_ACC) c = red_divisor(r, k->items[i].body, &seen, &n, &cap, &dseen, &dn, &dcap);
  kiln_free(seen);
  kiln_free(dseen);
  return c;
}

static void render_dot(R *r) {
  const Kernel *k = r->k;
  int jv = k->rank - 1;
  int64_t J = k->shape[jv];
  r->bdim = dot_row_dim(r);
  int RI = r->bdim >= 0 ? DOT_ROWS : 1;
  for (int w = 0; w < 4; w++) { r->lo[jcopy(k, w)] = 0; r->hi[jcopy(k, w)] = J - 1; }
  int64_t sh[KILN_MAX_RANK];
  memcpy(sh, k->shape, sizeof sh);
  if (RI > 1) {
    sh[r->bdim] /= RI;
    r->hi[r->bdim] = sh[r->bdim] - 1;
    for (int w = 0; w < RI; w++) { r->lo[icopy(k, w)] = 0; r->hi[icopy(k, w)] = k->shape[r->bdim] - 1; }
  }
  r->nv = icopy(k, 8);
  int64_t C = dot_split(r);
  int qv = icopy(k, 8), sv = qv + 1;  /* r = q * C + s */
  Expr *rmap[2 * KILN_MAX_RANK];
  if (C) {
    TE *te = r->p->te;
    r->lo[qv] = 0, r->hi[qv] = k->inner_numel / C - 1;
    r->lo[sv] = 0, r->hi[sv] = C - 1;
    r->nv = sv + 1;
    for (int i = 0; i < k->rank + k->n_red; i++) rmap[i] = te_var(te, i);
    rmap[k->rank] = te_binary(te, TB_ADD, te_binary(te, TB_MUL, te_var(te, qv), te_const_i(te, KILN_I64, C)), te_var(te, sv));
  }
  const char *sacc = vt(r, sums_f32(k) ? KILN_F32 : KILN_F64);
  open_outer(r, k->outer_numel / 4 / RI, k->outer_numel * k->inner_numel, false);
  push(r);
  line(r, "const %s jb = o %% %s, pf = o / %s;", ix(r), lit(r, J / 4), lit(r, J / 4));
  decompose(r, "pf", 0, k->rank - 1, sh);
  for (int w = 0; w < 4; w++) line(r, "const %s v%d = jb * 4 + %d;", ix(r), jcopy(k, w), w);
  for (int w = 0; w < RI && RI > 1; w++) line(r, "const %s v%d = v%d * %d + %d;", ix(r), icopy(k, w), r->bdim, RI, w);
  char clauses[1024] = "";
  size_t used = 0;
  for (int i = 0; i < k->n_items; i++) {
    const Item *it = &k->items[i];
    if (it->kind != IT_ACC) continue;
    for (int w = 0; w < 4 * RI && used < sizeof clauses - 64; w++) {
      line(r, "%s a%d_%d = 0;", sacc, it->stage, w);
      used += simd_clause(r, r->d->simd_reduce_op[RO_SUM], "a", it->stage, w, clauses + used, sizeof clauses - used);
    }
  }
  if (C) {
    open_for(r, "rq", 0, k->inner_numel / C);
    push(r);
    line(r, "const %s v%d = rq;", ix(r), qv);
  }
  line(r, r->d->simd_sum, clauses);
  open_for(r, "r", 0, C ? C : k->inner_numel);
  push(r);
  if (C) line(r, "const %s v%d = r;", ix(r), sv);
  else decompose(r, "r", k->rank, k->n_red, k->red_shape);
  for (int i = 0; i < k->n_items; i++) {
    const Item *it = &k->items[i];
    if (it->kind != IT_ACC) continue;
    Expr *b = it->body;
    if (C) {
      b = te_substitute(r->p->te, b, rmap, k->rank + k->n_red);
      if (!b) { r->st = kiln_fail(KILN_ERR_NO_MEMORY, "codegen: out of memory"); b = it->body; }
    }
    for (int w = 0; w < 4 * RI; w++) {
      char v[64];
      emit(r, j_renamed(r, b, RI > 1 ? w / 4 : -1, w % 4), v, sizeof v);
      line(r, "a%d_%d += (%s)%s;", it->stage, w, sacc, v);
    }
  }
  pop(r);
  close_block(r);
  if (C) {
    pop(r);
    close_block(r);
  }
  for (int w = 0; w < 4 * RI; w++) {
    line(r, "{");
    r->indent++;
    push(r);
    int var[2 * KILN_MAX_RANK];
    dot_copy_vars(r, RI > 1 ? w / 4 : -1, w % 4, var);
    char acc[32];
    snprintf(acc, sizeof acc, "a%%d_%d", w);
    items_at(r, -1, var, acc);
    pop(r);
    close_block(r);
  }
  pop(r);
  close_block(r);
}

/* ---- GPU shapes (grid dialects) ----
 * Two shapes beside the plain one thread per outer point (cg_gpu_shape decides, and the
 * backend sizes its launch from the same answer):
 *   - block rows: one block per outer point; its threads stride the inner loops and
 *     combine their accumulators with the dialect's block reductions (k_block, k_block_arg)
 *     before the per-row steps, which every thread computes and thread 0 stores;
 *   - vec4: a pointwise f32 kernel whose flat reads and writes become 16-byte vectors, four
 *     points per thread. */

int cg_gpu_block(const Kernel *k) {
  int t = 32;
  /* ~8 row points per thread (measured on the H200: better than ~32 per thread with
   * smaller blocks, 0.069 against 0.100 ms for softmax 4096x4096) */
  while (t < 1024 && (int64_t)t * 8 < k->inner_numel) t *= 2;
  return t;
}

/* Block-row variants raced by kiln_gpubench --row-race (codegen.h lists them). */
static const struct { const char *name; bool warp, vec; int ppt; bool split; } row_variants[CG_ROW_VARIANTS] = {
  { "base", false, false, 8, false }, { "warp", true, false, 8, false },  { "vec", false, true, 8, false },
  { "wvec", true, true, 8, false },   { "p16", false, false, 16, false }, { "p16vec", false, true, 16, false },
  { "long", false, false, 8, true },  { "wveclong", true, true, 8, true }, { "auto", false, false, 0, false },
};
enum { ROW_WARP = 1, ROW_P16 = 4, ROW_P16VEC = 5, ROW_LONG = 6, ROW_AUTO = 8 };

/* The default ("auto"): each row length gets the variant that won its shapes in the row race
 * on the H200 (bench/results/2026-11-30-h200-final.md): a warp per row up to 128 points
 * (softmax 4096x128 0.0085 ms against base 0.0104), 16K..32K-point rows split between
 * registers and shared memory (256x32768 0.0328 against 0.0357), ~16 points per thread
 * otherwise (softmax 4096x4096 0.0413 against 0.0473, layernorm 8192x4096 0.0730 against
 * 0.0821; never slower than base beyond the base/base2 spread). */
int cg_row_variant_resolve(const Kernel *k, int variant) {
  if (variant < 0 || variant >= CG_ROW_VARIANTS) variant = ROW_AUTO;
  if (variant != ROW_AUTO) return variant;
  if (k->inner_numel <= 128) return ROW_WARP;
  if (k->inner_numel > 16384 && k->inner_numel <= 32768) return ROW_LONG;
  return ROW_P16;
}
enum { SPLIT_REG = 8 };  /* points of a long row a thread keeps in registers (<= 32 in all) */

int cg_row_variant(const char *name) {
  if (!name || !name[0]) return ROW_AUTO;
  for (int i = 0; i < CG_ROW_VARIANTS; i++)
    if (!strcmp(name, row_variants[i].name)) return i;
  return -1;
}

/* Does e load a bf16 or f16 tensor of at least `row` values? (*budget bounds the walk of a
 * DAG whose shared nodes would be visited once per path.) */
static bool loads_half_rows(const TE *te, const Expr *e, int64_t row, int *budget) {
  if (--*budget < 0) return false;
  if (e->kind == EX_LOAD) {
    const Stage *s = &te->stages[e->src];
    if ((s->dtype == KILN_BF16 || s->dtype == KILN_F16) && s->numel >= row) return true;
  }
  for (int i = 0; i < e->n_args; i++)
    if (loads_half_rows(te, e->args[i], row, budget)) return true;
  return false;
}

static bool column_rows(const Plan *p, const Kernel *k);

/* ... along its rows: a kernel that reads only across them (column rows) keeps its scalar
 * loads, 4 points a thread in flight, and the launch group its block size shares. */
static bool reads_half_rows(const Plan *p, const Kernel *k, const CgOptions *o) {
  if (o->column_rows && column_rows(p, k)) return false;
  int budget = 512;
  for (int i = 0; i < k->n_items; i++)
    if (k->items[i].body && loads_half_rows(p->te, k->items[i].body, k->inner_numel, &budget)) return true;
  return false;
}

/* A dialect without warp reductions takes the variant's block-per-row twin (wvec: vec), one
 * without dynamic shared memory its twin that keeps long rows in registers (long: base).
 * Without warp reductions (glsl) the default's ~16 points a thread go as 16-byte vectors: on
 * the H200's Vulkan driver p16vec ran layernorm 16384x1024 in 0.0377 ms against p16's 0.0401,
 * softmax 4096x4096 and 32768x512 level (bench/results/2026-12-05-h200-vulkan-rows.md).
 *
 * The auto variant's ~16 points a thread go as vectors of four 16-bit values where a row of
 * bf16/f16 is read (row_half; on the H100 bert_layer_b8s128_bf16's layernorms ran 4.95 and
 * 4.99 us as p16, 4.30 and 4.41 as p16vec, bench/results/2026-12-07-h100-rows-chain.md; f32
 * rows stay p16, which the H200's row race chose for them). */
int cg_row_variant_of(const Plan *p, const Kernel *k, const CgOptions *o) {
  int v = cg_row_variant_resolve(k, o->row_variant);
  bool automatic = o->row_variant < 0 || o->row_variant >= ROW_AUTO;
  if (automatic && v == ROW_P16 && (!o->warp_rows || (o->row_half && reads_half_rows(p, k, o)))) v = ROW_P16VEC;
  bool warp = row_variants[v].warp && o->warp_rows, split = row_variants[v].split && o->smem_rows;
  if (warp == row_variants[v].warp && split == row_variants[v].split) return v;
  for (int pass = 0; pass < 2; pass++, split = false)  /* wveclong without warps: vec */
    for (int i = 0; i < ROW_AUTO; i++)
      if (row_variants[i].warp == warp && row_variants[i].vec == row_variants[v].vec &&
          row_variants[i].ppt == row_variants[v].ppt && row_variants[i].split == split)
        return i;
  return 0;
}

const char *cg_row_variant_name(int variant) {
  return variant >= 0 && variant < CG_ROW_VARIANTS ? row_variants[variant].name : "?";
}

CgRows cg_gpu_rows(const Kernel *k, int variant) {
  variant = cg_row_variant_resolve(k, variant);
  CgRows ro = { cg_gpu_block(k), 1, 1, 0, 0, 1, 1, false };
  /* a warp per row keeps short rows (4..32 points per thread) off __syncthreads and puts
   * 8 rows in each block, so an SM holds many rows in their different phases */
  if (row_variants[variant].warp && k->inner_numel <= 1024) ro.threads = 32, ro.rows = 8;
  else if (row_variants[variant].ppt != 8) {
    ro.threads = 32;
    while (ro.threads < 1024 && (int64_t)ro.threads * row_variants[variant].ppt < k->inner_numel) ro.threads *= 2;
  }
  /* a handful of rows (a loss summed to one value) leave the chip idle: spread each row
   * over up to 1024 threads, ~2 points each, rather than wait on long per-thread chains; but
   * where 4 points a thread on 256 do, 256, the block every launch group takes (a batch's
   * 1024 row losses summed beside the bias gradients) */
  if (ro.rows == 1 && k->outer_numel < 32)
    while (ro.threads < 1024 && (int64_t)ro.threads * 2 < k->inner_numel &&
           !(ro.threads >= 256 && (int64_t)ro.threads * 4 >= k->inner_numel))
      ro.threads *= 2;
  if (row_variants[variant].vec && k->inner_numel % 4 == 0) ro.vec = 4;
  /* a 32K-point row is 128 KB: in registers alone (63 per thread) only one 1024-thread block
   * fits an SM; 12 points in registers and the rest in shared memory let two */
  int64_t per = (k->inner_numel + 4095) / 4096 * 4;  /* points per thread at 1024 threads, vec or not */
  if (row_variants[variant].split && k->kind == KN_ROW && ro.rows == 1 && ro.threads == 1024 && per > 16 && per <= 32) {
    ro.reg_points = SPLIT_REG;
    ro.smem = (int)(per - SPLIT_REG) * 1024 * 4;
    ro.min_blocks = 2;
  }
  return ro;
}

/* Two-phase rows: fewer rows than CgOptions.split_rows_below (512: a few rows more than
 * multiprocessors left some of them two blocks of 1024 threads, the rest one), each long
 * enough to give every block of 256 threads at least SPLIT_MIN_SPAN points; about
 * split_blocks (576, ~4 a multiprocessor) blocks in all. Sums of
 * f32 only (the partials are f32, added in block order: deterministic), and only kernels
 * whose one inner loop is followed by per-row values (n_steps <= 2: no second pass over the
 * row, which would need the whole row's statistic first). */
enum { SPLIT_MIN_SPAN = 1024, SPLIT_MAX = 64, SPLIT_THREADS = 256 };

static int row_splits(const Plan *p, const Kernel *k, const CgOptions *o, const CgRows *ro) {
  if (o->splitk == CG_SPLITK_OFF || o->row_variant != ROW_AUTO || ro->rows != 1 || ro->reg_points || k->n_steps > 2)
    return 1;
  if (k->outer_numel >= o->split_rows_below || k->inner_numel < 2 * SPLIT_MIN_SPAN) return 1;
  int accs = 0;
  for (int i = 0; i < k->n_items; i++) {
    const Item *it = &k->items[i];
    if (it->kind != IT_ACC) continue;
    const Stage *S = &p->te->stages[it->stage];
    if (it->step != 0 || S->rop != RO_SUM || S->dtype != KILN_F32 || it->body->dtype != KILN_F32) return 1;
    accs++;
  }
  if (!accs) return 1;
  int64_t s = (o->split_blocks + k->outer_numel - 1) / k->outer_numel;
  if (s > k->inner_numel / SPLIT_MIN_SPAN) s = k->inner_numel / SPLIT_MIN_SPAN;
  if (s > SPLIT_MAX) s = SPLIT_MAX;
  return s < 2 ? 1 : (int)s;
}

/* Does every memory read of expression e that moves with inner var `last` step over more than
 * one element per step of it (and one at least move)? *n counts those that move; seen and
 * n_seen keep the walk of a DAG linear (past COLUMN_SEEN nodes: no). */
/* COLUMN_GROUP_THREADS: a launch group's blocks (program.c POINT_THREADS), the most column rows
 * take under column_rows 2, so that a bias gradient over a batch of 1024 shares its neighbours'
 * launch (4 points a thread) instead of running alone in 512 threads of 2 */
enum { COLUMN_SEEN = 256, COLUMN_PPT = 2, COLUMN_GROUP_THREADS = 256 };
static bool reads_across(const Plan *p, const Kernel *k, const Expr *e, int last, int *n, const Expr **seen, int *n_seen) {
  for (int i = 0; i < *n_seen; i++)
    if (seen[i] == e) return true;
  if (*n_seen == COLUMN_SEEN) return false;
  seen[(*n_seen)++] = e;
  if (e->kind == EX_LOAD && p->kernel_of[e->src] != k->id && !plan_is_baked(p->te, e->src)) {
    int64_t v[2 * KILN_MAX_RANK] = { 0 }, o0, o1;
    int nv = k->rank + k->n_red;
    if (!cg_load_offset_at(p, e, v, nv, &o0)) return false;
    v[last] = 1;
    if (!cg_load_offset_at(p, e, v, nv, &o1)) return false;
    if (o1 - o0 == 1 || o1 - o0 == -1) return false;  /* along the row: a warp's reads share sectors */
    *n += o1 != o0;
  }
  for (int i = 0; i < e->n_args; i++)
    if (!reads_across(p, k, e->args[i], last, n, seen, n_seen)) return false;
  return true;
}

/* Column rows (CgOptions.column_rows): a block-rows kernel whose inner loop reads memory only
 * across rows (a bias gradient: the sum over the batch of a [batch, n] tensor, a column a
 * block) pays a 32-byte sector a point whatever its threads' layout, so what bounds it is how
 * many of those reads are in flight: COLUMN_PPT points a thread, up to 1024 threads, where the
 * row race's 16 a thread leave 15 reads a thread waiting one after another. */
static bool column_rows(const Plan *p, const Kernel *k) {
  int last = -1, n = 0, n_seen = 0;
  for (int i = k->n_red - 1; i >= 0 && last < 0; i--)
    if (k->red_shape[i] > 1) last = k->rank + i;
  if (last < 0) return false;
  const Expr *seen[COLUMN_SEEN];
  for (int i = 0; i < k->n_items; i++)
    if (k->items[i].kind == IT_ACC && !reads_across(p, k, k->items[i].body, last, &n, seen, &n_seen)) return false;
  return n > 0;
}

CgRows cg_rows_of(const Plan *p, const Kernel *k, const CgOptions *o) {
  CgRows ro = cg_gpu_rows(k, cg_row_variant_of(p, k, o));
  ro.split = row_splits(p, k, o, &ro);
  if (ro.split > 1) ro.threads = SPLIT_THREADS, ro.vec = 1;
  /* few rows leave the chip idle and each thread a long chain (bert's 1024 layernorm rows of
   * 768: 64 threads each, 2 warps a block): more threads a row, down to 2 points each; a
   * handful of rows (under 32) cg_gpu_rows has spread already, to a launch group's block */
  if (o->row_fill && ro.split == 1 && ro.rows == 1 && !ro.reg_points && k->outer_numel >= 32)
    while (ro.threads < 1024 && k->outer_numel * (ro.threads / 32) < o->row_fill &&
           (int64_t)ro.threads * 2 * 2 * ro.vec <= k->inner_numel)
      ro.threads *= 2;
  if (o->column_rows && ro.split == 1 && ro.rows == 1 && ro.vec == 1 && !ro.reg_points && !ro.smem && column_rows(p, k)) {
    int most = o->column_rows == 2 ? COLUMN_GROUP_THREADS : 1024;
    ro.threads = 32, ro.columns = true;
    while (ro.threads < most && (int64_t)ro.threads * COLUMN_PPT < k->inner_numel) ro.threads *= 2;
  }
  return ro;
}

/* Are two-phase rows combined by flags (rows_flags_combine), as split-K is (CgOptions.split_flags)? */
static bool rows_by_flags(const Dialect *d, const CgOptions *o) { return o->split_flags && d->flag_done && d->band_meet; }

void cg_rows_globals(const Plan *p, const Kernel *k, const CgOptions *o, const Dialect *d, StrBuf *out) {
  CgRows ro = cg_rows_of(p, k, o);
  if (ro.split <= 1) return;
  if (rows_by_flags(d, o)) {
    sb_printf(out, "\n/* kernel %d, rows in two phases: each row's %d partial sums of its %d blocks, and each block's\n"
                   " * flag (0 at module load, one more each run) */\n", k->id, acc_items(k), ro.split);
    sb_printf(out, "%s %s kiln_part%d[%lld];\n", d->global_qual, d->value_type[KILN_F32], k->id,
              (long long)(k->outer_numel * ro.split * acc_items(k)));
    sb_printf(out, "%s %s kiln_rf%d[%lld];\n", d->global_qual, d->counter_type, k->id, (long long)(k->outer_numel * ro.split));
    return;
  }
  sb_printf(out, "\n/* kernel %d, rows in two phases: each row's %d partial sums of its %d blocks, and each row's\n"
                 " * arrivals (0 at module load; the last block of a row puts its count back to 0) */\n", k->id, acc_items(k), ro.split);
  sb_printf(out, "%s %s kiln_part%d[%lld];\n", d->global_qual, d->value_type[KILN_F32], k->id,
            (long long)(k->outer_numel * ro.split * acc_items(k)));
  sb_printf(out, "%s %s kiln_arrived%d[%lld];\n", d->global_qual, d->counter_type, k->id, (long long)k->outer_numel);
}

/* Two-phase rows by flags (CgOptions.split_flags, as split-K's): each block of a row but the last
 * stores its partials, releases them with its flag and goes on; the row's last block (after the
 * row's others) moves its flag on, waits for theirs, and adds their partials and then its own, in
 * block order: the bits of the count's form. */
static void rows_flags_combine(R *r, int step) {
  const Kernel *k = r->k;
  const Dialect *d = r->d;
  const char *F = vt(r, KILN_F32);
  int S = r->ro.split, n = acc_items(k), j = 0;
  char flags[64], mine[32], step_line[200];
  snprintf(flags, sizeof flags, "kiln_rf%d + o * %d", k->id, S);
  line(r, "%s *kp = kiln_part%d + o * %d;", F, k->id, S * n);
  line(r, "if (rc != %d) {", S - 1);
  r->indent++;
  for (int i = 0; i < k->n_items; i++)
    if (k->items[i].kind == IT_ACC && k->items[i].step == step)
      line(r, "if (%s == 0) kp[%d + rc] = a%d;", d->thread_id, j++ * S, k->items[i].stage);
  snprintf(mine, sizeof mine, "(unsigned)rc");
  snprintf(step_line, sizeof step_line, d->flag_done, flags, mine);
  line(r, "%s", step_line);
  line(r, "continue;");
  close_block(r);
  char last[32];
  snprintf(last, sizeof last, "%du", S - 1);
  snprintf(step_line, sizeof step_line, d->band_meet, flags, last, last);
  line(r, "%s", step_line);
  j = 0;
  for (int i = 0; i < k->n_items; i++) {
    if (k->items[i].kind != IT_ACC || k->items[i].step != step) continue;
    char addr[64], ld[128];
    int s = k->items[i].stage;
    snprintf(addr, sizeof addr, "kp + %d + q", j++ * S);
    snprintf(ld, sizeof ld, d->cached_load, addr);
    line(r, "{");
    r->indent++;
    line(r, "const %s own = a%d;", F, s);
    line(r, "a%d = 0;", s);
    line(r, "for (int q = 0; q < %d; q++) a%d += %s;", S - 1, s, ld);
    line(r, "a%d += own;  /* its own, last */", s);
    close_block(r);
  }
}

/* Two-phase rows, after the block's own combine: its partials out; the block that arrives
 * last at the row reads every block's partial in block order into a<stage> (the others go
 * on to their next row piece). Partials of row o: [item][block]. */
static void rows_split_combine(R *r, int step) {
  const Kernel *k = r->k;
  const Dialect *d = r->d;
  const char *F = vt(r, KILN_F32);
  int S = r->ro.split, n = acc_items(k), j = 0;
  if (rows_by_flags(d, r->o)) {
    rows_flags_combine(r, step);
    return;
  }
  line(r, "%s *kp = kiln_part%d + o * %d;", F, k->id, S * n);
  for (int i = 0; i < k->n_items; i++)
    if (k->items[i].kind == IT_ACC && k->items[i].step == step)
      line(r, "if (%s == 0) kp[%d + rc] = a%d;", d->thread_id, j++ * S, k->items[i].stage);
  char slot[48], meet[CG_ARRIVAL_LINES][256];
  snprintf(slot, sizeof slot, "kiln_arrived%d[o]", k->id);
  cg_arrival_lines(d, slot, S, r->o->one_fence, meet);
  for (int m = 0; m < CG_ARRIVAL_LINES; m++) line(r, "%s", meet[m]);
  j = 0;
  for (int i = 0; i < k->n_items; i++) {
    if (k->items[i].kind != IT_ACC || k->items[i].step != step) continue;
    char addr[64], ld[128];
    snprintf(addr, sizeof addr, "kp + %d + q", j++ * S);
    snprintf(ld, sizeof ld, d->cached_load, addr);
    line(r, "a%d = 0;", k->items[i].stage);
    line(r, "for (int q = 0; q < %d; q++) a%d += %s;", S, k->items[i].stage, ld);
  }
  line(r, "if (%s == 0) kiln_arrived%d[o] = 0%s;", d->thread_id, k->id, d->uint_suffix);
}

CgGpuShape cg_gpu_shape(const Plan *p, const Kernel *k, const CgOptions *o) {
  if (k->chain) return CG_GPU_CHAIN;
  if (cg_gemm_match(p, k, o, NULL)) return CG_GPU_GEMM;
  if (k->kind == KN_ROW || (k->kind == KN_REDUCE && k->inner_numel >= 64 && k->outer_numel < 32768))
    return CG_GPU_BLOCK_ROWS;
  if (k->kind != KN_POINTWISE || k->outer_numel % 4 || k->outer_numel < 4096) return CG_GPU_POINTS;
  for (int i = 0; i < k->n_items; i++)
    if (p->te->stages[k->items[i].stage].dtype != KILN_F32) return CG_GPU_POINTS;
  return CG_GPU_VEC4;
}

CgGpuShape cg_kernel_shape(const Plan *p, const Kernel *k, const Dialect *d, const CgOptions *o) {
  if (!d->grid) return CG_GPU_POINTS;
  CgGpuShape s = cg_gpu_shape(p, k, o);
  /* each shape needs its means: vectors, block reductions, shared tiles */
  if ((s == CG_GPU_VEC4 && !d->vec4_type) || (s == CG_GPU_BLOCK_ROWS && !d->block_reduce) ||
      (s == CG_GPU_GEMM && !d->shared_qual))
    return CG_GPU_POINTS;
  return s;
}

static void block_combine(R *r, const Item *it) {
  const Stage *S = &r->p->te->stages[it->stage];
  const Dialect *d = r->d;
  int s = it->stage;
  bool warp = r->ro.rows > 1;  /* a warp per row: shuffles only */
  char group[32];
  if (r->lanes) snprintf(group, sizeof group, d->group_reduce, r->lanes);  /* cg_pair_banded said */
  if (r->quad && r->quad_keys > 1) snprintf(group, sizeof group, d->quad_keys_reduce, r->quad_keys);
  const char *red = r->quad ? (r->quad_keys > 1 ? group : d->quad_reduce) : r->lanes ? group : warp ? d->warp_reduce
                                                                                              : d->block_reduce;  /* quad: cg_chain_mma said */
  if (S->rop == RO_ARGMAX || S->rop == RO_ARGMIN)
    line(r, "ai%d = %s(a%d, ai%d, %d, %d);", s, warp ? d->warp_reduce_arg : d->block_reduce_arg, s, s,
         S->rop == RO_ARGMAX, S->select_last != 0);
  else if (nan_flag(S, it->body->dtype) && r->o->nan_fold) {
    /* the lane's flag into its value (the loop's max never takes a NaN: a is one only through the flag),
     * and the dialects' max and min reductions keep a NaN: one reduction gives the row's value and its
     * flag, each thread's the same (acc_final reads the flag) */
    kiln_dtype bt = it->body->dtype;
    char nan[64], flag[96], a[16];
    cast_to(r, acc_type(r, S, bt), bt == KILN_F64 ? d->nan_f64 : d->nan_f32, nan, sizeof nan);
    line(r, "if (an%d%s) a%d = %s;", s, d->bool_type ? " != 0" : "", s, nan);
    line(r, "a%d = %s(a%d, %s);", s, red, s, d->reduce_op[S->rop]);
    snprintf(a, sizeof a, "a%d", s);
    nan_flag_test(r, a, flag, sizeof flag);
    line(r, "an%d = %s;", s, flag);
    return;
  }
  else line(r, "a%d = %s(a%d, %s);", s, red, s, d->reduce_op[S->rop]);
  /* a NaN one thread saw makes the row's result NaN for every thread (the one that stores it
   * and those that read it in the row's later steps) */
  if (nan_flag(S, it->body->dtype)) line(r, "an%d = %s(an%d, %s);", s, red, s, d->reduce_op[RO_MAX]);
}

/* Memory loads in e (not of this kernel's stages), each once; seen is a DAG walk's list. */
/* Is e new to this DAG walk (then it is marked seen)? Out of memory: no, and the status says so. */
static bool first_visit(R *r, const Expr *e, Memo **seen, int *n, int *cap) {
  int known;
  if (seen_find(*seen, *n, e, &known)) return false;
  if (seen_add(seen, n, cap, e, 0)) return true;
  r->st = kiln_fail(KILN_ERR_NO_MEMORY, "codegen: out of memory");
  return false;
}

/* A value the row cache holds for loop `step`: kept by an earlier loop. */
static bool cached_before(const R *r, const Expr *e, int step) {
  for (int c = 0; c < r->n_cached; c++)
    if (r->cached[c] == e && r->cap_step[c] < step) return true;
  return false;
}

/* ... of loop `step`: below a value an earlier loop kept (whole row values) nothing is read again. */
static void collect_loads(R *r, const Expr *e, int step, Memo **seen, int *n, int *cap, const Expr **out, int *n_out, int max) {
  if (!first_visit(r, e, seen, n, cap) || cached_before(r, e, step)) return;
  if (e->kind == EX_LOAD) {
    if (r->p->kernel_of[e->src] != r->k->id && !plan_is_baked(r->p->te, e->src) && *n_out < max) out[(*n_out)++] = e;
    return;
  }
  if (e->kind == EX_UNARY && *n_out < max) out[(*n_out)++] = e;  /* exp, tanh, ...: worth keeping */
  for (int i = 0; i < e->n_args; i++) collect_loads(r, e->args[i], step, seen, n, cap, out, n_out, max);
}

/* Loads and unary nodes of the items of inner loop `step` (an even step). */
static void step_nodes(R *r, int step, const Expr **out, int *n_out, int max) {
  Memo *seen = NULL;
  int n = 0, cap = 0;
  for (int i = 0; i < r->k->n_items; i++)
    if (r->k->items[i].step == step) collect_loads(r, r->k->items[i].body, step, &seen, &n, &cap, out, n_out, max);
  kiln_free(seen);
}

static bool in_list(const Expr *const *l, int n, const Expr *e) {
  for (int i = 0; i < n; i++)
    if (l[i] == e) return true;
  return false;
}

/* Every node of inner loop `step`'s items, into a DAG walk's list. */
static void collect_nodes(R *r, const Expr *e, Memo **seen, int *n, int *cap) {
  if (!first_visit(r, e, seen, n, cap)) return;
  for (int i = 0; i < e->n_args; i++) collect_nodes(r, e->args[i], seen, n, cap);
}

/* A value of the row's points (not of the row: it moves with a reduction var). */
static bool per_point(const Kernel *k, const Expr *e) {
  for (int v = k->rank; v < k->rank + k->n_red; v++)
    if (te_uses_var(e, v)) return true;
  return false;
}

static void cache_add(R *r, const Expr *e, int loop) {
  r->cap_step[r->n_cached] = 2 * loop;
  r->cache_filled[r->n_cached] = false;
  r->cached[r->n_cached++] = e;
}

typedef struct RowLoops { Memo *all[KILN_MAX_RANK + 1]; int n[KILN_MAX_RANK + 1], n_loops; int64_t per; } RowLoops;

/* Top down through loop a's values: the first value on each path that a later loop computes
 * too (and no loop before) is kept whole, so the later loops read one register where they
 * would read its loads and redo its arithmetic (a layernorm's x + o + b, rounded after each
 * add, in both of its later loops); below a kept value nothing more is. */
static void cache_walk(R *r, const RowLoops *L, int a, const Expr *e, Memo **seen, int *n, int *cap) {
  if (!first_visit(r, e, seen, n, cap)) return;
  for (int c = 0; c < r->n_cached; c++)
    if (r->cached[c] == e) return;
  int v;
  bool earlier = false, later = false;
  for (int b = 0; b < a && !earlier; b++) earlier = seen_find(L->all[b], L->n[b], e, &v);
  for (int b = a + 1; b < L->n_loops && !later; b++) later = seen_find(L->all[b], L->n[b], e, &v);
  if (!earlier && later && e->kind != EX_CONST && dtype_is_float(e->dtype) && per_point(r->k, e) && r->n_cached < 8 &&
      (r->n_cached + 1) * L->per <= 96) {
    cache_add(r, e, a);
    return;
  }
  for (int i = 0; i < e->n_args; i++) cache_walk(r, L, a, e->args[i], seen, n, cap);
}

/* Whole values kept (cache_walk); a loop after reads none of the loads below them, vectors
 * included (step_nodes stops at a kept value). */
static void row_cache_values(R *r, int64_t per) {
  const Kernel *k = r->k;
  RowLoops L = { .per = per };
  int cap[KILN_MAX_RANK + 1] = { 0 };
  for (int s = 0; s < k->n_steps && L.n_loops <= KILN_MAX_RANK; s += 2, L.n_loops++)
    for (int i = 0; i < k->n_items; i++)
      if (k->items[i].step == s) collect_nodes(r, k->items[i].body, &L.all[L.n_loops], &L.n[L.n_loops], &cap[L.n_loops]);
  for (int a = 0; a < L.n_loops && !r->st; a++) {
    Memo *seen = NULL;
    int n = 0, c = 0;
    for (int i = 0; i < k->n_items; i++)
      if (k->items[i].step == 2 * a) cache_walk(r, &L, a, k->items[i].body, &seen, &n, &c);
    kiln_free(seen);
  }
  for (int a = 0; a < L.n_loops; a++) kiln_free(L.all[a]);
}

/* Loads and unary values that a later loop computes again. */
static void row_cache_loads(R *r, int64_t per) {
  const Kernel *k = r->k;
  enum { MAXN = 128 };
  const Expr *nodes[KILN_MAX_RANK + 1][MAXN];
  int nn[KILN_MAX_RANK + 1] = { 0 }, n_loops = 0;
  for (int s = 0; s < k->n_steps && n_loops <= KILN_MAX_RANK; s += 2) step_nodes(r, s, nodes[n_loops], &nn[n_loops], MAXN), n_loops++;
  for (int a = 0; a < n_loops; a++)
    for (int i = 0; i < nn[a]; i++) {
      const Expr *e = nodes[a][i];
      bool earlier = false, later = false;
      for (int b = 0; b < a && !earlier; b++) earlier = in_list(nodes[b], nn[b], e);
      for (int b = a + 1; b < n_loops && !later; b++) later = in_list(nodes[b], nn[b], e);
      if (earlier || !later || r->n_cached >= 8 || (r->n_cached + 1) * per > 96) continue;
      /* a value of the row, not of its points (a row statistic a kernel before stored), is
       * computed once outside the loops and memoised there: the first loop never fills a
       * cache for it, and a later loop would read the cache unfilled */
      if (!per_point(k, e)) continue;
      /* a long row split with shared memory keeps its f32 loads only (one array; what
       * derives from them, exp, is computed again) */
      if (r->ro.reg_points && (e->kind != EX_LOAD || e->dtype != KILN_F32 || r->n_cached >= 1)) continue;
      cache_add(r, e, a);
    }
}

/* Rows short enough to sit in registers (at most 32 points per thread): a value that a later
 * inner loop computes again is kept in c<i>[j] by the first loop that computes it (at most 8
 * arrays, 96 registers): whole values (row_cache_values, under CgOptions.row_values), else
 * loads and unary values (row_cache_loads); a long row split with shared memory, its loads. */
static int row_cache(R *r) {
  int64_t tv = (int64_t)r->ro.threads * r->ro.vec;  /* points a row's threads cover per step */
  int64_t per = (r->k->inner_numel + tv - 1) / tv * r->ro.vec;
  r->n_cached = 0;
  if (r->k->n_steps < 3 || per > 32 || per < 1) return 0;
  if (r->o->row_values && !r->ro.reg_points) row_cache_values(r, per);
  else row_cache_loads(r, per);
  for (int i = 0; i < r->n_cached; i++)
    line(r, "%s c%d[%lld];", vt(r, r->cached[i]->dtype), i, (long long)per);
  return r->n_cached ? (int)per : 0;
}

/* The flat index over n vars from `first` of sizes shape, as an Expr simplified like load
 * offsets; vars of size 1 are left out (always 0, and the simplifier keeps them). */
static Expr *vars_flat(R *r, int first, int n, const int64_t *shape) {
  TE *te = r->p->te;
  Expr *f = te_const_i(te, KILN_I64, 0);
  int64_t stride = 1;
  for (int i = n - 1; i >= 0 && f; i--) {
    if (shape[i] > 1)
      f = te_binary(te, TB_ADD, f, te_binary(te, TB_MUL, te_var(te, first + i), te_const_i(te, KILN_I64, stride)));
    stride *= shape[i];
  }
  return f ? te_simplify(te, f, r->lo, r->hi, r->nv) : NULL;
}

/* a and b are the same index (their difference simplifies to the constant 0). */
static bool same_index(R *r, Expr *a, Expr *b) {
  if (!a || !b) return false;
  if (a == b) return true;
  Expr *d = te_simplify(r->p->te, te_binary(r->p->te, TB_SUB, a, b), r->lo, r->hi, r->nv);
  return d && d->kind == EX_CONST && d->c.i == 0;
}

/* vec rows: what goes as 16-byte vectors in inner loop `step`. Loads of f32 memory read at
 * the row's flat index (x[o, r]: kind 0) or at the inner index (gamma[r]: kind 1), unless
 * an earlier loop keeps them in registers; stores of f32 items at the row's flat index. */
typedef struct VecStep {
  Expr *rowf, *inf;
  const Expr *ld[16]; int kind[16]; int n_ld;
  bool half[16];  /* ld[i] is of a 16-bit stage: four values in 8 bytes (Dialect.vec4h_type) */
  bool st[64];
  bool st_half[64];  /* st[i] of a 16-bit stage: four values in 8 bytes (Dialect.vec4h_store) */
} VecStep;

static void vec_step(R *r, int step, VecStep *v) {
  const Kernel *k = r->k;
  TE *te = r->p->te;
  Expr *of = vars_flat(r, 0, k->rank, k->shape);
  v->inf = vars_flat(r, k->rank, k->n_red, k->red_shape);
  v->rowf = of && v->inf ? te_binary(te, TB_ADD, te_binary(te, TB_MUL, of, te_const_i(te, KILN_I64, k->inner_numel)), v->inf) : NULL;
  v->rowf = v->rowf ? te_simplify(te, v->rowf, r->lo, r->hi, r->nv) : NULL;
  v->n_ld = 0;
  memset(v->st, 0, sizeof v->st);
  if (!v->rowf || !v->inf) return;
  enum { MAXN = 128 };
  const Expr *nodes[MAXN];
  int nn = 0;
  step_nodes(r, step, nodes, &nn, MAXN);
  for (int i = 0; i < nn && v->n_ld < 16; i++) {
    const Expr *e = nodes[i];  /* none an earlier loop kept, nor below one (step_nodes) */
    if (e->kind != EX_LOAD || te->stages[e->src].numel <= 1) continue;
    kiln_dtype t = te->stages[e->src].dtype;
    bool half = (t == KILN_BF16 || t == KILN_F16) && r->d->vec4h_type && r->d->load_fn[t];
    if (t != KILN_F32 && !half) continue;
    Expr *off = load_offset(r, e);
    bool row = same_index(r, off, v->rowf), in = !row && same_index(r, off, v->inf);
    if (row || in) v->kind[v->n_ld] = in, v->half[v->n_ld] = half, v->ld[v->n_ld++] = e;
  }
  for (int i = 0; i < k->n_items && i < 64; i++) {
    const Item *it = &k->items[i];
    kiln_dtype t = te->stages[it->stage].dtype;
    bool half = (t == KILN_BF16 || t == KILN_F16) && r->d->vec4h_store && r->d->store_fn[t];
    v->st[i] = it->step == step && it->kind != IT_ACC && it->store && (t == KILN_F32 || half) &&
               same_index(r, te_simplify(te, it->offset, r->lo, r->hi, r->nv), v->rowf);
    v->st_half[i] = v->st[i] && half;
  }
}

/* ---- 16-byte vectors: four f32 points a thread (vec4 pointwise and vec block rows) ---- */

/* "<decl>w<i> = <vector i of parameter param>;" (half: four 16-bit values) */
static void vec_load(R *r, const char *decl, int i, int param, const char *index, bool half) {
  char ld[128];
  snprintf(ld, sizeof ld, half ? r->d->vec4h_load : r->d->vec4_load, param, index);
  line(r, "%sw%d = %s;", decl, i, ld);
}

/* Vector y<i> into vector `index` of parameter param (half: four 16-bit values). */
static void vec_store(R *r, int i, int param, const char *index, bool half) {
  char y[16], st[160];
  snprintf(y, sizeof y, "y%d", i);
  snprintf(st, sizeof st, half ? r->d->vec4h_store : r->d->vec4_store, param, index, y);
  line(r, "%s", st);
}

/* Lane `lane` of vector w<i> as the value of load e at this point (a memoised local t<N>);
 * returns N. */
static int vec_lane_value(R *r, int i, int lane, const Expr *e, bool half) {
  int id = r->tmp++;
  if (half) {
    char w[16], bits[64];
    snprintf(w, sizeof w, "w%d", i);
    snprintf(bits, sizeof bits, r->d->vec4h_lane[lane], w);
    line(r, "const %s t%d = %s(%s);", vt(r, e->dtype), id, r->d->load_fn[e->dtype], bits);
  } else {
    line(r, "const %s t%d = w%d%s;", vt(r, KILN_F32), id, i, r->d->vec4_lane[lane]);
  }
  memo_add(r, e, id);
  return id;
}

/* Item i's value at this point into lane `lane` of vector y<i>, stored whole after the lanes; a
 * 16-bit item (half) converted as store() would convert it. */
static void vec_lane_item(R *r, int i, int lane, bool half) {
  const Item *it = &r->k->items[i];
  char v[256];
  emit(r, it->body, v, sizeof v);
  kiln_dtype t = r->p->te->stages[it->stage].dtype;
  line(r, "const %s s%d = %s;", vt(r, half ? t : KILN_F32), it->stage, v);
  if (!half) {
    line(r, "y%d%s = s%d;", i, r->d->vec4_lane[lane], it->stage);
    return;
  }
  char y[16], bits[96], set[200];
  snprintf(y, sizeof y, "y%d", i);
  snprintf(bits, sizeof bits, "%s(s%d)", store_conversion(r, t), it->stage);
  snprintf(set, sizeof set, r->d->vec4h_set[lane], y, bits);
  line(r, "%s", set);
}

/* The items of inner loop `step` at one point (r and the kernel vars already declared);
 * vector lane `lane` (-1: none) takes its vec loads from w<i> and puts vec stores in y<i>. */
static void block_point(R *r, int step, int per, const VecStep *v, int lane) {
  const Kernel *k = r->k;
  for (int i = 0; per && i < r->n_cached; i++) {
    if (r->cap_step[i] >= step) continue;
    if (!r->cache_filled[i] && !r->st)  /* never a read of registers nothing wrote */
      r->st = kiln_fail(KILN_ERR_UNSUPPORTED, "codegen: kernel %d's row cache c%d is read but was never filled", r->k->id, i);
    int id = r->tmp++;
    char c[200];
    cache_get(r, i, c, sizeof c);
    line(r, "const %s t%d = %s;", vt(r, r->cached[i]->dtype), id, c);
    memo_add(r, r->cached[i], id);
  }
  for (int i = 0; lane >= 0 && i < v->n_ld; i++) {
    int id = vec_lane_value(r, i, lane, v->ld[i], v->half[i]);
    for (int c = 0; c < r->n_cached; c++)
      if (r->cached[c] == v->ld[i] && r->cap_step[c] == step) cache_put(r, c, id);
  }
  for (int i = 0; i < k->n_items; i++) {
    const Item *it = &k->items[i];
    if (it->step != step) continue;
    char val[256];
    if (it->kind == IT_ACC) {
      emit(r, it->body, val, sizeof val);
      acc_update(r, it, val);
    } else if (lane >= 0 && i < 64 && v->st[i]) vec_lane_item(r, i, lane, v->st_half[i]);
    else value_item(r, it);
  }
}

/* One inner loop of a block row. The row's threads (r->ro.threads, this one r->kt) stride
 * it; with a row cache (per > 0) the loop is unrolled over the per points of a thread, in
 * runs of 4 when vectors are on (points 4q..4q+3 of vector q = kt + j * threads). */
static void block_inner_loop(R *r, int step, int per) {
  const Kernel *k = r->k;
  const int T = r->ro.threads;
  for (int i = 0; i < k->n_items; i++)
    if (k->items[i].step == step && k->items[i].kind == IT_ACC) acc_init(r, &k->items[i]);
  VecStep v = { 0 };
  bool vec = per && r->ro.vec == 4;
  if (vec) vec_step(r, step, &v);
  int64_t span = (int64_t)T * (vec ? 4 : 1);
  bool guarded = !per || k->inner_numel % span != 0;
  const char *guard = r->guard;
  r->guard = NULL;  /* each thread stores its own inner points */
  snprintf(r->cidx, sizeof r->cidx, "j");
  const char *I = ix(r);
  if (per) {
    line(r, "%s", r->d->unroll);
    line(r, "for (int j = 0; j < %d; j++) {", vec ? per / 4 : per);
    r->indent++;
    const char *p = vec ? "q" : "r";  /* vector q, or point r, of this thread's j-th step */
    char jw[40];
    cast_to(r, I, "j", jw, sizeof jw);
    line(r, "const %s %s = %s + %s * %d;", I, p, r->kt, jw, T);
    if (guarded) line(r, "if (%s < %s) {", p, lit(r, vec ? k->inner_numel / 4 : k->inner_numel));
    else line(r, "{");  /* the row is a whole number of blocks: no bound check between the loads */
  } else {
    if (r->ro.split > 1) line(r, "for (%s r = rbeg + %s; r < rend; r += %s) {", I, r->kt, r->d->block_size);
    else line(r, "for (%s r = %s; r < %s; r += %s) {", I, r->kt, lit(r, k->inner_numel), r->ro.rows > 1 ? "32" : r->d->block_size);
  }
  r->indent++;
  r->step = per ? step : -1;
  if (!vec) {
    push(r);
    decompose(r, "r", k->rank, k->n_red, k->red_shape);
    block_point(r, step, per, &v, -1);
    pop(r);
  } else {
    bool any_st = false;
    for (int i = 0; i < v.n_ld; i++) line(r, "%s w%d;", v.half[i] ? r->d->vec4h_type : r->d->vec4_type, i);
    for (int i = 0; i < k->n_items && i < 64; i++)
      if (v.st[i]) line(r, "%s y%d;", v.st_half[i] ? r->d->vec4h_type : r->d->vec4_type, i), any_st = true;
    if (v.n_ld || any_st) {
      line(r, "%s vq;  /* the row's flat index of point 4q */", I);
      line(r, "{");
      r->indent++;
      push(r);
      line(r, "const %s r = 4 * q;", I);
      decompose(r, "r", k->rank, k->n_red, k->red_shape);
      char t[256];
      emit(r, v.rowf, t, sizeof t);
      line(r, "vq = %s;", t);
      pop(r);
      close_block(r);
    }
    for (int i = 0; i < v.n_ld; i++) vec_load(r, "", i, r->param_of[v.ld[i]->src], v.kind[i] ? "q" : "vq >> 2", v.half[i]);
    for (int l = 0; l < 4; l++) {
      line(r, "{");
      r->indent++;
      push(r);
      line(r, "const %s r = 4 * q + %d;", I, l);
      snprintf(r->cidx, sizeof r->cidx, "4 * j + %d", l);
      decompose(r, "r", k->rank, k->n_red, k->red_shape);
      block_point(r, step, per, &v, l);
      pop(r);
      close_block(r);
    }
    for (int i = 0; i < k->n_items && i < 64; i++)
      if (v.st[i]) vec_store(r, i, r->param_of[k->items[i].stage], "vq >> 2", v.st_half[i]);
  }
  r->guard = guard;
  r->step = -1;
  close_block(r);
  if (per) close_block(r);
  bool split = r->ro.split > 1;
  for (int i = 0; i < k->n_items; i++) {
    const Item *it = &k->items[i];
    if (it->step != step || it->kind != IT_ACC) continue;
    block_combine(r, it);
    char acc[32];
    snprintf(acc, sizeof acc, "a%d", it->stage);
    if (!split) acc_final(r, it, acc);
  }
  if (!split) return;
  rows_split_combine(r, step);
  for (int i = 0; i < k->n_items; i++) {
    const Item *it = &k->items[i];
    if (it->step != step || it->kind != IT_ACC) continue;
    char acc[32];
    snprintf(acc, sizeof acc, "a%d", it->stage);
    acc_final(r, it, acc);
  }
}

/* Block rows: one row per block (ro.rows == 1, the text of the default variant), or a warp
 * per row and ro.rows rows per block (a warp past the last row skips the loop: nothing in it
 * waits on the block). */
static void render_block_rows(R *r) {
  const Kernel *k = r->k;
  const Dialect *d = r->d;
  const char *I = ix(r);
  r->ro = cg_rows_of(r->p, k, r->o);
  if (r->ro.split > 1) {
    int64_t S = r->ro.split, span = (k->inner_numel + S - 1) / S;
    if (!rows_by_flags(d, r->o)) line(r, "%s %s last;", d->shared_qual, d->counter_type);
    line(r, "for (%s w = %s; w < %s; w += %s) {", I, d->block_id, lit(r, k->outer_numel * S), d->grid_size);
    line(r, "  const %s o = w / %lld, rc = w %% %lld;", I, (long long)S, (long long)S);
    line(r, "  const %s rbeg = rc * %s, rend = rbeg + %s < %s ? rbeg + %s : %s;", I, lit(r, span), lit(r, span),
         lit(r, k->inner_numel), lit(r, span), lit(r, k->inner_numel));
    r->kt = d->thread_id;
    snprintf(r->guard0, sizeof r->guard0, "%s == 0", d->thread_id);
    r->guard = r->guard0;
  } else if (r->ro.rows > 1) {
    line(r, "const int kt = %s & 31;", d->thread_id);
    line(r, "for (%s o = (%s)%s * %d + (%s >> 5); o < %s; o += (%s)%s * %d) {", I, I, d->block_id, r->ro.rows, d->thread_id,
         lit(r, k->outer_numel), I, d->grid_size, r->ro.rows);
    r->kt = "kt";
    r->guard = "kt == 0";
  } else {
    if (r->ro.smem) line(r, "%s", d->dyn_shared);
    line(r, "for (%s o = %s; o < %s; o += %s) {", I, d->block_id, lit(r, k->outer_numel), d->grid_size);
    r->kt = d->thread_id;
    snprintf(r->guard0, sizeof r->guard0, "%s == 0", d->thread_id);
    r->guard = r->guard0;
  }
  r->indent++;
  push(r);
  decompose(r, "o", 0, k->rank, k->shape);
  int per = row_cache(r);
  for (int step = 0; step < k->n_steps; step++) {
    if (!(step & 1)) { block_inner_loop(r, step, per); continue; }
    for (int i = 0; i < k->n_items; i++)
      if (k->items[i].step == step) value_item(r, &k->items[i]);
  }
  r->guard = NULL;
  r->n_cached = 0;
  pop(r);
  close_block(r);
}

/* The flat outer index as an Expr in kernel vars, simplified like load offsets. */
static Expr *flat_index(R *r) {
  TE *te = r->p->te;
  Expr *f = te_const_i(te, KILN_I64, 0);
  int64_t stride = 1;
  for (int i = r->k->rank - 1; i >= 0 && f; i--) {
    f = te_binary(te, TB_ADD, f, te_binary(te, TB_MUL, te_var(te, i), te_const_i(te, KILN_I64, stride)));
    stride *= r->k->shape[i];
  }
  return f ? te_simplify(te, f, r->lo, r->hi, r->nv) : NULL;
}

/* Loads of f32 memory stages at the flat index, each once (a DAG walk with a seen list). */
static void flat_loads(R *r, const Expr *e, const Expr *flat, Memo **seen, int *n, int *cap, const Expr **out, int *n_out) {
  if (!first_visit(r, e, seen, n, cap)) return;
  if (e->kind == EX_LOAD) {
    const Stage *S = &r->p->te->stages[e->src];
    if (S->dtype == KILN_F32 && S->numel == r->k->outer_numel && r->p->kernel_of[e->src] != r->k->id && *n_out < 64 &&
        load_offset(r, e) == flat)
      out[(*n_out)++] = e;
    return;
  }
  for (int i = 0; i < e->n_args; i++) flat_loads(r, e->args[i], flat, seen, n, cap, out, n_out);
}

static void render_vec4(R *r) {
  const Kernel *k = r->k;
  Expr *flat = flat_index(r);
  const Expr *loads[64];
  int n_loads = 0, ns = 0, cs = 0;
  Memo *seen = NULL;
  for (int i = 0; i < k->n_items && flat; i++) flat_loads(r, k->items[i].body, flat, &seen, &ns, &cs, loads, &n_loads);
  kiln_free(seen);
  bool vstore[64] = { false };
  for (int i = 0; i < k->n_items && i < 64 && flat; i++)
    vstore[i] = k->items[i].store && te_simplify(r->p->te, k->items[i].offset, r->lo, r->hi, r->nv) == flat;
  const char *I = ix(r);
  line(r, "for (%s q = %s; q < %s; q += %s) {", I, r->d->thread_index, lit(r, k->outer_numel / 4), r->d->thread_stride);
  r->indent++;
  char decl[64];
  snprintf(decl, sizeof decl, "const %s ", r->d->vec4_type);
  for (int i = 0; i < n_loads; i++) vec_load(r, decl, i, r->param_of[loads[i]->src], "q", false);
  for (int i = 0; i < k->n_items && i < 64; i++)
    if (vstore[i]) line(r, "%s y%d;", r->d->vec4_type, i);
  for (int j = 0; j < 4; j++) {
    line(r, "{");
    r->indent++;
    push(r);
    line(r, "const %s o = 4 * q + %d;", I, j);
    decompose(r, "o", 0, k->rank, k->shape);
    for (int i = 0; i < n_loads; i++) vec_lane_value(r, i, j, loads[i], false);
    for (int i = 0; i < k->n_items; i++) {
      if (i < 64 && vstore[i]) vec_lane_item(r, i, j, false);
      else value_item(r, &k->items[i]);
    }
    pop(r);
    close_block(r);
  }
  for (int i = 0; i < k->n_items && i < 64; i++)
    if (vstore[i]) vec_store(r, i, r->param_of[k->items[i].stage], "q", false);
  close_block(r);
}


/* ---- attention chains (plan.h: KC scores, KR rows, KO the product over the rows) ----
 * Rendered once, as the chain's last kernel, over the rows of KR's outer domain. Loops: each
 * row's scores into a local row, KR's steps over it (its one row value P put back in place),
 * then each output of the row as KO's sum over the row. Grid (cg_chain_blocked): a block
 * stages one batch point's keys and values in dynamic shared memory, then takes its share of
 * the point's tiles of cg_chain_rows query rows: the rows' queries, their scores (then P) beside
 * the keys; a warp per row for KR's steps (shuffles). */

typedef struct Chain {
  const Kernel *kc, *kr, *ko;
  const Item *acc_c, *acc_o, *p;
  const Expr *qa, *kb, *vf;       /* KC's factors (A free of j, B free of i), KO's factor V */
  int x;                          /* the stage of KC that KR reads */
  int n;                          /* rank */
  int64_t L, D, E, I, batch;      /* row length, depth, width, queries, batch points */
} Chain;

static bool chain_reads_stage(const Expr *e, int s) {
  if (e->kind == EX_LOAD && e->src == s) return true;
  for (int i = 0; i < e->n_args; i++)
    if (chain_reads_stage(e->args[i], s)) return true;
  return false;
}

static const Item *chain_acc(const Kernel *k) {
  for (int i = 0; i < k->n_items; i++)
    if (k->items[i].kind == IT_ACC) return &k->items[i];
  return NULL;
}

static void chain_of(const Plan *p, const Kernel *ko, Chain *c) {
  memset(c, 0, sizeof *c);
  c->kc = ko - 2, c->kr = ko - 1, c->ko = ko;
  c->n = ko->rank;
  c->acc_c = chain_acc(c->kc), c->acc_o = chain_acc(ko);
  const Expr *b = c->acc_c->body;
  int ai = te_uses_var(b->args[0], c->n - 1) ? 1 : 0;
  c->qa = b->args[ai], c->kb = b->args[1 - ai];
  for (int i = 0; i < c->kr->n_items; i++)
    if (c->kr->items[i].kind == IT_INNER) c->p = &c->kr->items[i];
  const Expr *f = c->acc_o->body;
  int pi = chain_reads_stage(f->args[0], c->p->stage) ? 0 : 1;
  c->vf = f->args[1 - pi];
  c->x = c->acc_c->stage;
  for (int i = 0; i < c->kc->n_items; i++)
    for (int j = 0; j < c->kr->n_items; j++)
      if (chain_reads_stage(c->kr->items[j].body, c->kc->items[i].stage)) c->x = c->kc->items[i].stage;
  c->L = c->kc->shape[c->n - 1], c->D = c->kc->red_shape[0], c->E = ko->shape[c->n - 1];
  c->I = c->kc->shape[c->n - 2], c->batch = c->kc->outer_numel / (c->L * c->I);
  (void)p;
}

bool cg_chain_blocked(const Dialect *d, const Kernel *ko) {
  int64_t L = ko->red_shape[0], E = ko->shape[ko->rank - 1], D = (ko - 2)->red_shape[0];
  return d->grid && d->vec4_type && d->dyn_shared && d->warp_reduce && L % 4 == 0 && D % 4 == 0 && E % 4 == 0;
}

/* Rows a block: PLAN_CHAIN_ROWS, or half that when the blocks would not fill 128 multiprocessors
 * (encoder4_d256: 16 heads of 64 queries, 64 blocks of 16 rows; its blocks wait on memory, so
 * more of them in flight win). An mma chain's tiles are the mma's 16 rows. */
int cg_chain_rows(const Kernel *ko, CgChainForm form) {
  int64_t I = ko->shape[ko->rank - 2], batch = ko->outer_numel / (ko->shape[ko->rank - 1] * I);
  int rows = PLAN_CHAIN_ROWS, kw = cg_chain_key_warps(form);
  if (kw) return rows * (CG_GEMM_THREADS / 32) / kw;  /* a warp's 16 rows each (kw warps a tile's) */
  if (form == CG_CHAIN_FMA && batch * ((I + rows - 1) / rows) < 128) rows /= 2;
  return rows;
}

/* Shared memory, rows padded so that 16-byte vectors stay aligned. f32 (floats): the rows'
 * queries Qs[R][D+4], the keys Ks[L][D+4], the values Vs[L][E+4], the rows Ss[R][L+4]. mma: the
 * rows Ss[R][L+4] in floats, then 16-bit Qs[R][D+8], Ks[L][D+8], Vs[L][E+8] and P's rows
 * Ps[R][L+8] (rows 16 bytes apart modulo 128, so that ldmatrix's eight rows meet no conflict); the
 * fragments' form the 16-bit Qs[RB][D+8], Ks and Vs alone, RB its rows a block. */
int64_t cg_chain_smem(const Kernel *ko, CgChainForm form, bool prefetch) {
  int64_t L = ko->red_shape[0], E = ko->shape[ko->rank - 1], D = (ko - 2)->red_shape[0], R = PLAN_CHAIN_ROWS;
  int kw = cg_chain_key_warps(form);
  if (kw)  /* and with the keys split, each thread's E / 2 partial outputs, for the tile's warps to add */
    return 2 * (cg_chain_rows(ko, form) * (D + 8) + L * (D + 8) + L * (E + 8)) + (kw > 1 ? 4 * CG_GEMM_THREADS * (E / 2) : 0);
  if (form == CG_CHAIN_SHARED)
    return 4 * R * (L + 4) + 2 * ((prefetch ? 2 : 1) * R * (D + 8) + L * (D + 8) + L * (E + 8) + R * (L + 8));
  return 4 * (R * (D + 4) + L * (D + 4) + L * (E + 4) + R * (L + 4));
}

/* Blocks a batch point (each stages the point's keys and values once, then takes its share of
 * the point's row tiles in turn): enough to give the chip about 132 blocks, at most a tile each.
 * bert's 96 heads: 2 blocks of 4 tiles (the keys and values read twice, not 8 times). The shared
 * form aims at sm_blocks blocks a multiprocessor (0: 4). */
int64_t cg_chain_splits(const Kernel *ko, CgChainForm form, int sm_blocks) {
  int64_t I = ko->shape[ko->rank - 2], batch = ko->outer_numel / (ko->shape[ko->rank - 1] * I);
  int rows = cg_chain_rows(ko, form);
  int64_t tiles = (I + rows - 1) / rows, sp = (132 + batch - 1) / batch;
  if (cg_chain_key_warps(form)) return tiles;  /* a block each tile of a warp's rows per warp */
  if (form == CG_CHAIN_SHARED) {  /* about 4 blocks a multiprocessor (their shared memory fits), tiles shared out evenly:
               * the mma leaves a tile's time to latency, which more blocks in flight hide */
    sp = ((sm_blocks > 0 ? sm_blocks : 4) * 132 + batch - 1) / batch;
    if (sp >= tiles) return tiles;
    int64_t per = (tiles + sp - 1) / sp;
    return (tiles + per - 1) / per;
  }
  return sp < tiles ? sp : tiles;
}

bool cg_chain_prefetch(const Kernel *ko, CgChainForm form, const CgOptions *o) {
  int64_t I = ko->shape[ko->rank - 2], tiles = (I + PLAN_CHAIN_ROWS - 1) / PLAN_CHAIN_ROWS;
  return o->chain_prefetch && form == CG_CHAIN_SHARED && tiles > cg_chain_splits(ko, form, o->chain_sm_blocks);
}

int64_t cg_chain_blocks(const Kernel *ko, CgChainForm form, int sm_blocks) {
  int64_t I = ko->shape[ko->rank - 2], batch = ko->outer_numel / (ko->shape[ko->rank - 1] * I);
  int64_t t = batch * cg_chain_splits(ko, form, sm_blocks);
  return t < ((int64_t)1 << 20) ? t : ((int64_t)1 << 20);
}

/* the fragments' form: rows and widths of at most this many points (a thread's registers) */
enum { PLAN_CHAIN_FRAG_ROW = 128 };

CgMma cg_chain_mma(const Plan *p, const Kernel *ko, const Dialect *d, const CgOptions *o, CgChainForm *form) {
  *form = CG_CHAIN_FMA;
  if (!o || !o->chain_mma || !o->mma_half || !d->mma[CG_MMA_BF16] || !d->ldmatrix[0] || !cg_chain_blocked(d, ko))
    return CG_MMA_NONE;
  Chain c;
  chain_of(p, ko, &c);
  kiln_dtype t = plan_factor_type(c.qa);
  if ((t != KILN_BF16 && t != KILN_F16) || plan_factor_type(c.kb) != t || plan_factor_type(c.vf) != t ||
      p->te->stages[c.p->stage].dtype != t || c.L % 16 || c.D % 16 || c.E % 8)
    return CG_MMA_NONE;
  *form = CG_CHAIN_SHARED;
  /* fragments: a thread holds L / 2 of its rows' values and E / 2 outputs (registers), the rows' sums
   * and maxima meet in quads (no arg-reductions) */
  bool frags = o->chain_mma >= 2 && d->quad_reduce && c.L <= PLAN_CHAIN_FRAG_ROW && c.E <= PLAN_CHAIN_FRAG_ROW;
  int kw = o->chain_mma == 3 ? 2 : o->chain_mma == 4 ? 4 : 1;
  if (kw > 1 && (!d->quad_keys_reduce || c.L % (16 * kw))) kw = 1;  /* each warp's share whole 16-key k-steps */
  for (int i = 0; frags && i < c.kr->n_items; i++) {
    const Stage *S = &p->te->stages[c.kr->items[i].stage];
    frags = c.kr->items[i].kind != IT_ACC || (S->rop != RO_ARGMAX && S->rop != RO_ARGMIN);
  }
  if (frags) *form = kw == 4 ? CG_CHAIN_FRAGS4 : kw == 2 ? CG_CHAIN_FRAGS2 : CG_CHAIN_FRAGS;
  return t == KILN_BF16 ? CG_MMA_BF16 : CG_MMA_F16;
}

int cg_chain_key_warps(CgChainForm form) {
  return form == CG_CHAIN_FRAGS ? 1 : form == CG_CHAIN_FRAGS2 ? 2 : form == CG_CHAIN_FRAGS4 ? 4 : 0;
}

/* r renders part k of the chain: its vars' ranges for simplification. */
static void chain_part(R *r, const Kernel *k) {
  r->k = k;
  for (int i = 0; i < k->rank; i++) { r->lo[i] = 0; r->hi[i] = k->shape[i] - 1; }
  for (int i = 0; i < k->n_red; i++) { r->lo[k->rank + i] = 0; r->hi[k->rank + i] = k->red_shape[i] - 1; }
  r->nv = k->rank + k->n_red;
}

/* Items of k at step `step` but the accumulations (per point: value_item). */
static void chain_values(R *r, const Kernel *k, int step) {
  for (int i = 0; i < k->n_items; i++)
    if (k->items[i].step == step && k->items[i].kind != IT_ACC) value_item(r, &k->items[i]);
}

/* "kS[<v>]": the chain's row array at index var v, through the dialect's local subscript. */
static const char *row_at(const R *r, const char *v, char *out, size_t n) {
  char sub[32];
  if (r->d->local_subscript) snprintf(sub, sizeof sub, r->d->local_subscript, v);
  else snprintf(sub, sizeof sub, "%s", v);
  snprintf(out, n, "kS[%s]", sub);
  return out;
}

/* Loops over a chain's rows, open at row o: kS[q] = the value x the row kernel reads of
 * contraction kc's point (o, q) for each of the L points of the row, then kr's steps over the
 * row (p_stage >= 0: kr's row value of that stage put back into kS at its step). */
static void rows_then_steps(R *r, const Kernel *kc, const Kernel *kr, int x, int64_t L, int p_stage, int p_step) {
  const char *I = ix(r), *X = vt(r, r->p->te->stages[x].dtype);
  char pre[96], post[96], at_q[48], at_r[48];
  row_at(r, "q", at_q, sizeof at_q), row_at(r, "r", at_r, sizeof at_r);
  line(r, "%s kS[%lld];", X, (long long)L);
  chain_part(r, kc);
  push(r);
  line(r, "for (%s q = 0; q < %s; q++) {", I, lit(r, L));
  r->indent++;
  line(r, "const %s oc = o * %s + q;", I, lit(r, L));
  decompose(r, "oc", 0, kc->rank, kc->shape);
  inner_loop(r, 0);
  chain_values(r, kc, 1);
  line(r, "%s = s%d;", at_q, x);
  close_block(r);
  pop(r);
  chain_part(r, kr);
  push(r);
  decompose(r, "o", 0, kr->rank, kr->shape);
  snprintf(pre, sizeof pre, "const %s s%d = %s;", X, x, at_r);
  snprintf(post, sizeof post, "%s = s%d;", at_r, p_stage);
  r->inner_pre = pre, r->inner_post = p_stage >= 0 ? post : NULL, r->inner_post_step = p_step;
  for (int step = 0; step < kr->n_steps; step++) {
    if (!(step & 1)) inner_loop(r, step);
    else chain_values(r, kr, step);
  }
  r->inner_pre = r->inner_post = NULL;
  pop(r);
}

static void render_chain_loops(R *r, const Chain *c) {
  const char *I = ix(r);
  char pre[96], at_r[48];
  open_outer(r, c->kr->outer_numel, c->kr->outer_numel * c->L * (c->D + c->E), false);
  rows_then_steps(r, c->kc, c->kr, c->x, c->L, c->p->stage, c->p->step);
  /* each output of the row: KO's sum over it */
  chain_part(r, c->ko);
  push(r);
  snprintf(pre, sizeof pre, "const %s s%d = %s;", vt(r, r->p->te->stages[c->x].dtype), c->p->stage,
           row_at(r, "r", at_r, sizeof at_r));
  r->inner_pre = pre;
  line(r, "for (%s e = 0; e < %s; e++) {", I, lit(r, c->E));
  r->indent++;
  line(r, "const %s oo = o * %s + e;", I, lit(r, c->E));
  decompose(r, "oo", 0, c->ko->rank, c->ko->shape);
  inner_loop(r, 0);
  chain_values(r, c->ko, 1);
  close_block(r);
  r->inner_pre = NULL;
  pop(r);
  close_block(r);
}

/* Of e, for the row's value x and a subexpression f: 1 if e reads x anywhere but inside f, 2 if
 * f is in e (memoised on the DAG, for one f and x; out of memory: 1, which keeps nothing). */
static int reads_through(const Expr *e, const Expr *f, int x, Memo **seen, int *n, int *cap) {
  int known;
  if (e == f) return 2;
  if (seen_find(*seen, *n, e, &known)) return known;
  int m = e->kind == EX_LOAD && e->src == x ? 1 : 0;
  for (int i = 0; i < e->n_args; i++) m |= reads_through(e->args[i], f, x, seen, n, cap);
  if (!seen_add(seen, n, cap, e, m)) return 1;
  return m;
}

/* Does e hold a transcendental (a polynomial or a library call at each point of the cpu's loops)? */
static bool transcendental(const Expr *e, Memo **seen, int *n, int *cap) {
  int known;
  if (seen_find(*seen, *n, e, &known)) return known;
  bool t = e->kind == EX_UNARY && (e->op == TU_EXP || e->op == TU_LOG || e->op == TU_TANH || e->op == TU_SIGMOID ||
                                    e->op == TU_ERF || e->op == TU_SIN || e->op == TU_COS);
  for (int i = 0; i < e->n_args && !t; i++) t = transcendental(e->args[i], seen, n, cap);
  if (!seen_add(seen, n, cap, e, t)) return false;  /* out of memory: nothing kept */
  return t;
}

/* A row's summand worth keeping: the accumulation at step s whose body E the per-point items of a
 * later step compute again (softmax: E = exp(x - max), P = E / sum), so that the steps after s read
 * it instead. x >= 0 (a row held on chip, its value x in a place the caller names): E reads x, and
 * the later steps read x only through E, so E takes x's place (the exponentials of a chain's rows
 * were a third of its instructions). x < 0 (the cpu's loops over a row): E holds a transcendental,
 * and goes to a row array of its own (cpu_row_summand). NULL: none. */
static const Item *row_summand(const R *r, const Kernel *kr, int x) {
  const Item *best = NULL;
  for (int i = 0; i < kr->n_items; i++) {
    const Item *a = &kr->items[i];
    const Expr *E = a->body;
    if (a->kind != IT_ACC || a->step + 2 >= kr->n_steps || !dtype_is_float(E->dtype)) continue;
    Memo *seen = NULL;
    int n = 0, cap = 0, m = 0;
    bool ok = x < 0 ? transcendental(E, &seen, &n, &cap)
                    : E->kind != EX_LOAD && !strcmp(vt(r, E->dtype), vt(r, r->p->te->stages[x].dtype)) &&
                        reads_through(E, NULL, x, &seen, &n, &cap) == 1;  /* E reads x */
    n = 0;  /* the walks below look for E */
    for (int j = 0; ok && j < kr->n_items; j++) {
      const Item *b = &kr->items[j];
      if (b->step > a->step && !(b->step & 1)) m |= reads_through(b->body, E, x, &seen, &n, &cap);  /* per-point items */
    }
    kiln_free(seen);
    if (ok && m == 2) best = a;
  }
  return best;
}

/* The cpu's loops over rows of at most CPU_KEPT_MAX points keep row_summand's E in a row array kE on
 * the stack: softmax 4096 x 1024 1.51 -> 1.19 ms, 4096 x 128 0.20 -> 0.14 on this 2-vCPU EPYC
 * (bench/results/2026-12-05-cpu-kept-summand.md). A summand of loads and adds (a layernorm's
 * residual) is cheaper read again: kept, gpt_tiny ran 1 % slower. */
enum { CPU_KEPT_MAX = 4096 };

static const Item *cpu_row_summand(const R *r, const Kernel *k) {
  return r->d->grid || k->inner_numel > CPU_KEPT_MAX || k->n_steps < 3 ? NULL : row_summand(r, k, -1);
}

/* KR's steps over one row held by one warp (r->k = KR, the row's outer vars declared): each
 * inner loop opens with `head` (a loop or guard over the row's points this lane takes, its
 * point `at`), where `value` (a format for x's stage) gives the row's value x; `post` (NULL:
 * none) runs after step post_step's items; the accumulations meet in shuffles, and the row's
 * outer values are stored by lane 0. */
static void warp_row_steps(R *r, const Kernel *kr, const char *pre, const char *head, const char *at, int x,
                           const char *value, const char *post, int post_step) {
  const char *I = ix(r), *X = x >= 0 ? vt(r, r->p->te->stages[x].dtype) : NULL;  /* x < 0: the row reads memory */
  int n = kr->rank;
  CgRows saved = r->ro;
  r->ro.rows = 2;  /* block_combine: a warp per row, shuffles */
  /* the row's values are stored by its first lane, its points by each lane (r->lanes: a group's "gl") */
  char lead[96];
  snprintf(lead, sizeof lead, "%s%s%s", r->lanes ? "gl == 0" : "lane == 0", r->live ? " && " : "", r->live ? r->live : "");
  r->guard = lead;
  const Item *kept = x >= 0 ? row_summand(r, kr, x) : NULL;
  for (int step = 0; step < kr->n_steps; step++) {
    if (step & 1) { chain_values(r, kr, step); continue; }
    for (int i = 0; i < kr->n_items; i++)
      if (kr->items[i].step == step && kr->items[i].kind == IT_ACC) acc_init(r, &kr->items[i]);
    if (pre) line(r, "%s", pre);
    line(r, "%s", head);
    r->indent++;
    push(r);
    line(r, "const %s v%d = %s;", I, n, at);
    char v[160] = "";
    if (x >= 0) snprintf(v, sizeof v, value, x);
    if (kept && step > kept->step) summand_load(r, kept->body, v);  /* x's place holds the summand */
    else if (x >= 0) line(r, "const %s s%d = %s;", X, x, v);
    if (r->held && step > 0) summand_load(r, r->held, r->held_at);
    r->guard = r->live;  /* each lane stores its own points */
    point_items(r, kr, step);
    if (kept && step == kept->step) summand_store(r, kept->body, v);
    if (r->held && step == 0) summand_store(r, r->held, r->held_at);
    r->guard = lead;
    if (post && step == post_step) line(r, "%s", post);
    pop(r);
    close_block(r);
    accs_final(r, kr, step, true);
  }
  r->guard = NULL;
  r->ro = saved;
}

/* ---- pairs (plan.h: KC a contraction of at most a warp's columns, KR the row kernel over
 * its rows) ----
 * Rendered once, as KR. Loops: each row's values into a local row, then KR's steps over it.
 * Grid (cg_pair_blocked): a block a row. Its threads walk the contraction's depth, each with a
 * partial sum for every column (the factor free of the columns read once a depth point);
 * each warp's sums meet in warp reductions, the warps' in shared memory, added in warp order
 * by the first warp, whose lane q then runs KC's epilogue at column q and holds the row's
 * value there: the one point of KR's row loops it takes. KR's row values combine in warp
 * reductions. (A warp a row, 8 rows a block, ran 15 % behind the GEMM and the row kernel on
 * the shared mlp's 128 x 10 x 512 logits, H200: each warp's chain of 16 dependent steps of
 * loads was the time.) */

bool cg_pair_blocked(const Dialect *d) { return d->grid && d->warp_reduce; }

/* A pair's tail (plan.h Kernel.tailed): the kernel KD, and the stage P of KR it reads at each
 * point of the row, computed at KR's step `step`. */
typedef struct PairTail { const Kernel *kd; int P, step; } PairTail;

bool cg_pair_warps(const Kernel *last, const CgOptions *o) {
  return o->pair_warps > 0 && !cg_pair_wide(last) && last->outer_numel >= o->pair_warps;
}

int64_t cg_pair_staged(const Kernel *last, const CgOptions *o) {
  const Kernel *kc = last - 1;
  int n = kc->rank;
  int64_t J = kc->shape[n - 1];
  if (!o->pair_stage || last->pooled || last->expanded || last->headed || cg_pair_wide(last) ||
      (!cg_pair_warps(last, o) && o->pair_stage < 2) || !cg_narrow_stage_fits(kc->inner_numel, J))
    return 0;
  const Item *acc = chain_acc(kc);
  const Expr *b = acc ? acc->body : NULL;
  if (!b || b->kind != EX_BINARY || b->op != TB_MUL || b->dtype != KILN_F32) return 0;
  const Expr *f = b->args[te_uses_var(b->args[0], n - 1) ? 0 : 1];  /* the factor that reads the column */
  if (f->dtype != KILN_F32) return 0;
  for (int v = 0; v < n - 1; v++)
    if (te_uses_var(f, v)) return 0;  /* not the same for every row */
  return kc->inner_numel * cg_narrow_stride(J);
}

int64_t cg_pair_smem(const Kernel *last) {
  const Kernel *kc = last - 1;
  return 4 * (int64_t)(CG_GEMM_THREADS / 32) * kc->shape[kc->rank - 1];
}

/* A pair's column after its sum: KC's var j = col, the sum's final value from `sum`, KC's
 * epilogue items at the point, and the value KR reads (stage x) into dst. */
static void pair_column(R *r, const Kernel *kc, int x, const char *col, const char *sum, const char *dst) {
  line(r, "const %s v%d = %s;", ix(r), kc->rank - 1, col);
  acc_final(r, chain_acc(kc), sum);
  chain_values(r, kc, 1);
  line(r, "%s = s%d;", dst, x);
}

/* The factor b of contraction k, free of its rows (K depth points x J columns, var n - 1 the column),
 * into a block's shared kiln_nb, a depth point's J values a row of S floats, read in the order it
 * lies in memory; a barrier after. */
static void stage_columns(R *r, const Kernel *k, const Expr *b, int64_t K, int64_t J, int S) {
  const Dialect *d = r->d;
  const char *I = ix(r);
  int n = k->rank;
  char t[256];
  line(r, "%s %s kiln_nb[%lld];", d->shared_qual, vt(r, KILN_F32), (long long)(K * S));
  line(r, "for (int e = %s; e < %lld; e += %d) {", d->thread_id, (long long)(K * J), CG_GEMM_THREADS);
  r->indent++;
  push(r);
  line(r, "const %s kq = e / %lld, v%d = e %% %lld;", I, (long long)J, n - 1, (long long)J);
  decompose(r, "kq", n, k->n_red, k->red_shape);
  emit(r, b, t, sizeof t);
  line(r, "kiln_nb[kq * %d + v%d] = %s;", S, n - 1, t);
  pop(r);
  close_block(r);
  line(r, "%s", d->barrier);
}

/* pa[q] += fa x the staged kiln_nb[kq * S + q] for each of the J columns (stage_columns) */
static void staged_products(R *r, int S, int64_t J) {
  char bq[64], fm[160];
  snprintf(bq, sizeof bq, "kiln_nb[kq * %d + q]", S);
  snprintf(fm, sizeof fm, r->d->fma, "fa", bq, "pa[q]");
  line(r, "%s", r->d->unroll);
  line(r, "for (int q = 0; q < %lld; q++) pa[q] = %s;", (long long)J, fm);
}

/* The J columns' partial sums pa[q] of a warp's lanes added across the warp; then, opened for lane q < J
 * (the caller closes it: pop and close_block), xa its column's sum. */
static void lane_columns_open(R *r, int64_t J) {
  const Dialect *d = r->d;
  for (int64_t q = 0; q < J; q++)
    line(r, "pa[%lld] = %s(pa[%lld], %s);", (long long)q, d->warp_reduce, (long long)q, d->reduce_op[RO_SUM]);
  line(r, "if (lane < %lld) {", (long long)J);
  r->indent++;
  push(r);
  line(r, "%s xa = pa[0];", vt(r, KILN_F32));
  for (int64_t q = 1; q < J; q++) line(r, "if (lane == %lld) xa = pa[%lld];", (long long)q, (long long)q);
}

/* A narrow pair's partial sums: pa[q] for each of KC's J columns, over the depth points
 * first, first + step, ... (a block's threads, or a warp's lanes), the factor free of the
 * columns read once a point. */
static void pair_partials(R *r, const Kernel *kc, const char *first, int step, int staged) {
  const Dialect *d = r->d;
  const char *I = ix(r), *F = vt(r, KILN_F32);
  int n = kc->rank;
  int64_t J = kc->shape[n - 1];
  const Expr *b = chain_acc(kc)->body;
  int bi = te_uses_var(b->args[0], n - 1) ? 0 : 1;  /* the factor that reads the column */
  line(r, "%s pa[%lld];", F, (long long)J);
  line(r, "%s", d->unroll);
  line(r, "for (int q = 0; q < %lld; q++) pa[q] = 0.0%s;", (long long)J, d->f32_suffix);
  line(r, "for (%s kq = %s; kq < %s; kq += %d) {", I, first, lit(r, kc->inner_numel), step);
  r->indent++;
  push(r);
  decompose(r, "kq", n, kc->n_red, kc->red_shape);
  char t[256], fm[320];
  emit(r, b->args[1 - bi], t, sizeof t);
  line(r, "const %s fa = %s;", F, t);
  if (staged) {  /* stage_columns filled kiln_nb */
    staged_products(r, staged, J);
    pop(r);
    close_block(r);
    return;
  }
  for (int64_t q = 0; q < J; q++) {
    line(r, "{");
    r->indent++;
    push(r);
    line(r, "const %s v%d = %lld;", I, n - 1, (long long)q);
    emit(r, b->args[bi], t, sizeof t);
    char pq[32];
    snprintf(pq, sizeof pq, "pa[%lld]", (long long)q);
    snprintf(fm, sizeof fm, d->fma, "fa", t, pq);
    line(r, "%s = %s;", pq, fm);
    pop(r);
    close_block(r);
  }
  pop(r);
  close_block(r);
}

/* KR's steps over a row held one point a lane (lane q: point q of J, in xv), opened by `open`;
 * with a tail, each lane puts its point of the tail's row value P into `keep`[lane]. */
static void pair_row_steps(R *r, const Kernel *kr, int x, long long J, const char *open, const PairTail *t,
                           const char *keep) {
  line(r, "%s", open);
  r->indent++;
  chain_part(r, kr);
  push(r);
  decompose(r, "o", 0, kr->rank, kr->shape);
  char head[48], post[96];
  snprintf(head, sizeof head, "if (lane < %lld) {", J);
  if (t) snprintf(post, sizeof post, "%s[lane] = s%d;", keep, t->P);
  warp_row_steps(r, kr, NULL, head, "lane", x, "xv", t ? post : NULL, t ? t->step : -1);
  pop(r);
  close_block(r);
}

/* A pair's tail (Kernel.tailed): KD's points of row o, at h = first, first + step, .. of its last
 * dim, each the sum over the row's J values (`row`[q], P's value at point q, as KR's step left
 * it) of the product of KD's two factors, P's read there; then KD's epilogue at the point. */
static void pair_tail(R *r, const PairTail *t, const char *row, const char *first, int step, int staged) {
  const Dialect *d = r->d;
  const Kernel *kd = t->kd;
  const char *I = ix(r), *F = vt(r, KILN_F32), *X = vt(r, r->p->te->stages[t->P].dtype);
  int n = kd->rank;
  const Item *acc = chain_acc(kd);
  chain_part(r, kd);
  push(r);
  decompose(r, "o", 0, n - 1, kd->shape);
  line(r, "for (%s h = %s; h < %s; h += %d) {", I, first, lit(r, kd->shape[n - 1]), step);
  r->indent++;
  push(r);
  line(r, "const %s v%d = h;", I, n - 1);
  line(r, "%s ta = 0.0%s;", F, d->f32_suffix);
  line(r, "%s", d->unroll);
  line(r, "for (%s q = 0; q < %lld; q++) {", I, (long long)kd->red_shape[0]);
  r->indent++;
  push(r);
  line(r, "const %s v%d = q;", I, n);
  line(r, "const %s s%d = %s[q];", X, t->P, row);
  char a[2][256], fm[600];
  int gi = chain_reads_stage(acc->body->args[0], t->P) ? 1 : 0;  /* the factor free of the row's values */
  for (int i = 0; i < 2; i++) {
    if (staged && i == gi) snprintf(a[i], sizeof a[i], "kiln_nb[h * %d + q]", staged);  /* tail_reads_stage said */
    else emit(r, acc->body->args[i], a[i], sizeof a[i]);
  }
  snprintf(fm, sizeof fm, d->fma, a[0], a[1], "ta");
  line(r, "ta = %s;", fm);
  pop(r);
  close_block(r);
  acc_final(r, acc, "ta");
  chain_values(r, kd, 1);
  pop(r);
  close_block(r);
  pop(r);
}

/* Does the tail read its factor free of the row's values from the stage of its pair's contraction: is
 * it that contraction's staged factor b with the last var and the depth var swapped (the hidden
 * layer's gradient reads W2 at [h, q] where the logits read it at [k, j])? */
static bool tail_reads_stage(R *r, const PairTail *t, const Kernel *kc, const Expr *b) {
  const Kernel *kd = t->kd;
  int n = kd->rank;
  if (kc->rank != n || kc->n_red != 1 || kd->n_red != 1 || n + 1 > 2 * KILN_MAX_RANK) return false;
  const Expr *f = chain_acc(kd)->body;
  const Expr *g = f->args[chain_reads_stage(f->args[0], t->P) ? 1 : 0];
  if (chain_reads_stage(g, t->P)) return false;
  TE *te = r->p->te;
  Expr *map[2 * KILN_MAX_RANK];
  int64_t lo[2 * KILN_MAX_RANK], hi[2 * KILN_MAX_RANK];
  for (int v = 0; v <= n; v++) map[v] = te_var(te, v), lo[v] = 0, hi[v] = (v < n ? kc->shape[v] : kc->red_shape[0]) - 1;
  map[n - 1] = te_var(te, n), map[n] = te_var(te, n - 1);
  for (int v = 0; v <= n; v++)
    if (!map[v]) return false;
  Expr *sw = te_substitute(te, (Expr *)g, map, n + 1);
  Expr *x = sw ? te_simplify(te, sw, lo, hi, n + 1) : NULL, *y = te_simplify(te, (Expr *)b, lo, hi, n + 1);
  return x && y && x == y;
}

int64_t cg_tail_smem(const Kernel *tail) {
  (void)tail;
  return 4 * (int64_t)(CG_GEMM_THREADS / 32) * 32;  /* a row of at most 32 f32 (PLAN_PAIR_MAX_COLS) a warp */
}

/* A pair's contraction factor free of the rows staged (cg_pair_staged), before the rows: its stride, 0 when
 * not staged; *tS the tail's (0 when its factor is not the staged one read transposed). */
static int pair_stage(R *r, const Kernel *kc, const Kernel *kr, const PairTail *t, int *tS) {
  int n = kc->rank;
  int64_t J = kc->shape[n - 1];
  int S = cg_pair_staged(kr, r->o) ? cg_narrow_stride(J) : 0;
  *tS = 0;
  if (S) {
    const Expr *b = chain_acc(kc)->body, *f = b->args[te_uses_var(b->args[0], n - 1) ? 0 : 1];
    stage_columns(r, kc, f, kc->inner_numel, J, S);
    *tS = t && tail_reads_stage(r, t, kc, f) ? S : 0;
  }
  return S;
}

static void render_pair_block(R *r, const Kernel *kc, const Kernel *kr, int x, const PairTail *t) {
  const Dialect *d = r->d;
  const char *I = ix(r), *F = vt(r, KILN_F32), *X = vt(r, r->p->te->stages[x].dtype), *T = d->thread_id;
  int n = kc->rank, W = CG_GEMM_THREADS / 32;
  int64_t J = kc->shape[n - 1];
  int tS, S = pair_stage(r, kc, kr, t, &tS);
  line(r, "%s %s kiln_pr[%d][%lld];", d->shared_qual, F, W, (long long)J);
  line(r, "const int lane = %s %% 32, wp = %s / 32;", T, T);
  line(r, "for (%s o = %s; o < %s; o += %s) {", I, d->block_id, lit(r, kr->outer_numel), d->grid_size);
  r->indent++;
  line(r, "%s xv = 0;", X);
  line(r, "{");
  r->indent++;
  chain_part(r, kc);
  push(r);
  decompose(r, "o", 0, n - 1, kc->shape);
  pair_partials(r, kc, T, CG_GEMM_THREADS, S);
  for (int64_t q = 0; q < J; q++)
    line(r, "{ const %s s = %s(pa[%lld], %s); if (lane == 0) kiln_pr[wp][%lld] = s; }", F, d->warp_reduce, (long long)q,
         d->reduce_op[RO_SUM], (long long)q);
  line(r, "%s", d->barrier);
  line(r, "if (wp == 0 && lane < %lld) {", (long long)J);
  r->indent++;
  push(r);
  line(r, "%s xa = kiln_pr[0][lane];", F);
  line(r, "for (int w = 1; w < %d; w++) xa += kiln_pr[w][lane];", W);
  pair_column(r, kc, x, "lane", "xa", "xv");
  pop(r);
  close_block(r);
  pop(r);
  close_block(r);
  if (t) line(r, "%s %s kiln_tail[%lld];", d->shared_qual, vt(r, r->p->te->stages[t->P].dtype), (long long)J);
  pair_row_steps(r, kr, x, (long long)J, "if (wp == 0) {", t, "kiln_tail");  /* in the first warp */
  if (t) {
    line(r, "%s  /* the row's values, for every thread's points of the tail */", d->barrier);
    pair_tail(r, t, "kiln_tail", T, CG_GEMM_THREADS, tS);
  }
  line(r, "%s  /* the next row's partials wait for these reads */", d->barrier);
  close_block(r);
}

/* A row of J points over G lanes (lane index `lane`): lane l's columns c * G + l; `each` the loop over them, the
 * points past the row skipped when G does not divide J (wide pairs' warps, banded pairs' groups) */
typedef struct LaneColumns { char col[48], cond[96], each[160]; } LaneColumns;
static LaneColumns lane_columns(int G, const char *lane, int64_t J) {
  LaneColumns lc;
  long long C = (J + G - 1) / G;
  snprintf(lc.col, sizeof lc.col, "c * %d + %s", G, lane);
  snprintf(lc.cond, sizeof lc.cond, "%s < %lld", lc.col, (long long)J);
  if (J % G) snprintf(lc.each, sizeof lc.each, "for (int c = 0; c < %lld; c++) if (%s) {", C, lc.cond);
  else snprintf(lc.each, sizeof lc.each, "for (int c = 0; c < %lld; c++) {", C);
  return lc;
}

/* ---- wide pairs (rows wider than a warp: a layernorm after its GEMM) ----
 * Grid: a block of CG_GEMM_THREADS takes PAIR_ROWS rows (a warp each) of one span of the
 * depth; lane l holds the row's columns l, l + 32, ... in registers. A depth point's factor
 * free of the columns is one load a warp (every lane reads the same element); the other is
 * read along the row, the block's warps sharing it through L1. With more than one span each
 * block stores its partial rows and counts itself in at its rows' arrival count; the block
 * that arrives last adds the spans in span order (deterministic), puts the count back to 0,
 * runs KC's epilogue at each of a lane's columns and KR's steps over the row held in the
 * warp, as a narrow pair's first warp does. */
enum { PAIR_ROWS = CG_GEMM_THREADS / 32, PAIR_MIN_SPAN = 32, PAIR_MAX_SPANS = 32, PAIR_UNROLL = 8 };

bool cg_pair_wide(const Kernel *last) {
  const Kernel *kc = last - 1;
  return kc->shape[kc->rank - 1] > 32;
}

static int64_t pair_row_blocks(const Kernel *last) { return (last->outer_numel + PAIR_ROWS - 1) / PAIR_ROWS; }

/* Spans of the depth: about two blocks a multiprocessor of an H100/H200, each span at least
 * PAIR_MIN_SPAN deep. */
int64_t cg_pair_splits(const Kernel *last) {
  const Kernel *kc = last - 1;
  int64_t rb = pair_row_blocks(last), s = (256 + rb - 1) / rb, most = kc->inner_numel / PAIR_MIN_SPAN;
  if (s > most) s = most;
  if (s > PAIR_MAX_SPANS) s = PAIR_MAX_SPANS;
  return s < 1 ? 1 : s;
}

int64_t cg_pair_blocks(const Kernel *last) {
  int64_t t = pair_row_blocks(last) * cg_pair_splits(last);
  return t < ((int64_t)1 << 20) ? t : ((int64_t)1 << 20);
}

void cg_pair_globals(const Kernel *last, const Dialect *d, StrBuf *out) {
  const Kernel *kc = last - 1;
  int64_t S = cg_pair_splits(last), rb = pair_row_blocks(last), J = kc->shape[kc->rank - 1];
  if (S <= 1) return;
  sb_printf(out, "\n/* kernel %d, a wide pair over %lld spans: each span's partial rows, and each row block's\n"
                 " * arrivals (0 at module load; the last block of a row block puts its count back to 0) */\n",
            last->id, (long long)S);
  sb_printf(out, "%s %s kiln_part%d[%lld];\n", d->global_qual, d->value_type[KILN_F32], last->id,
            (long long)(S * rb * PAIR_ROWS * J));
  sb_printf(out, "%s %s kiln_arrived%d[%lld];\n", d->global_qual, d->counter_type, last->id, (long long)rb);
}

static void render_pair_wide(R *r, const Kernel *kc, const Kernel *kr, int x) {
  const Dialect *d = r->d;
  const char *I = ix(r), *F = vt(r, KILN_F32), *T = d->thread_id;
  int n = kc->rank;
  int64_t J = kc->shape[n - 1], C = (J + 31) / 32, S = cg_pair_splits(kr), RB = pair_row_blocks(kr);
  int64_t span = (kc->inner_numel + S - 1) / S;
  const Item *acc = chain_acc(kc);
  const Expr *b = acc->body;
  int bi = te_uses_var(b->args[0], n - 1) ? 0 : 1;  /* the factor that reads the column */
  LaneColumns lc = lane_columns(32, "lane", J);
  const char *col = lc.col, *cond = lc.cond, *each = lc.each;
  if (S > 1) line(r, "%s %s last;", d->shared_qual, d->counter_type);
  line(r, "const int lane = %s %% 32, wp = %s / 32;", T, T);
  line(r, "for (%s w = %s; w < %s; w += %s) {", I, d->block_id, lit(r, RB * S), d->grid_size);
  r->indent++;
  line(r, "const %s rb = w / %lld, sp = w %% %lld, o = rb * %d + wp;", I, (long long)S, (long long)S, PAIR_ROWS);
  line(r, "const bool live = o < %s;", lit(r, kr->outer_numel));
  line(r, "%s pa[%lld], xv[%lld];", F, (long long)C, (long long)C);
  line(r, "%s", d->unroll);
  line(r, "for (int c = 0; c < %lld; c++) pa[c] = 0.0%s;", (long long)C, d->f32_suffix);
  line(r, "if (live) {");
  r->indent++;
  chain_part(r, kc);
  push(r);
  decompose(r, "o", 0, n - 1, kc->shape);
  line(r, "const %s kb = sp * %s, ke = kb + %s < %s ? kb + %s : %s;", I, lit(r, span), lit(r, span),
       lit(r, kc->inner_numel), lit(r, span), lit(r, kc->inner_numel));
  /* PAIR_UNROLL depth points at once, so their loads are in flight together (H200, gpt_tiny
   * with wide pairs: 0.150 ms a point at a time, 0.135 with 8; 0.087 without wide pairs) */
  line(r, "for (%s k0 = kb; k0 < ke; k0 += %d) {", I, PAIR_UNROLL);
  r->indent++;
  line(r, "%s", d->unroll);
  line(r, "for (int u = 0; u < %d; u++) if (k0 + u < ke) {", PAIR_UNROLL);
  r->indent++;
  line(r, "const %s kq = k0 + u;", I);
  push(r);
  decompose(r, "kq", n, kc->n_red, kc->red_shape);
  char t[256], fm[320];
  emit(r, b->args[1 - bi], t, sizeof t);
  line(r, "const %s fa = %s;", F, t);
  line(r, "%s", d->unroll);
  line(r, "%s", each);
  r->indent++;
  push(r);
  line(r, "const %s v%d = %s;", I, n - 1, col);
  emit(r, b->args[bi], t, sizeof t);
  snprintf(fm, sizeof fm, d->fma, "fa", t, "pa[c]");
  line(r, "pa[c] = %s;", fm);
  pop(r);
  close_block(r);
  pop(r);
  close_block(r);
  close_block(r);
  pop(r);
  close_block(r);
  if (S > 1) {
    /* partial rows [span][row][column] */
    line(r, "%s *part = kiln_part%d + (sp * %s + o) * %lld;", F, kr->id, lit(r, RB * PAIR_ROWS), (long long)J);
    line(r, "%s", d->unroll);
    line(r, "for (int c = 0; c < %lld; c++) if (live && %s) part[%s] = pa[c];", (long long)C, cond, col);
    char slot[48], meet[CG_ARRIVAL_LINES][256];
    snprintf(slot, sizeof slot, "kiln_arrived%d[rb]", kr->id);
    cg_arrival_lines(d, slot, (int)S, r->o->one_fence, meet);
    for (int m = 0; m < CG_ARRIVAL_LINES; m++) line(r, "%s", meet[m]);
    char addr[160], ld[200];
    snprintf(addr, sizeof addr, "kiln_part%d + (q * %lld + o) * %lld + c * 32 + lane", kr->id,
             (long long)(RB * PAIR_ROWS), (long long)J);
    snprintf(ld, sizeof ld, d->cached_load, addr);
    line(r, "%s", d->unroll);
    line(r, "for (int c = 0; c < %lld; c++) {", (long long)C);
    line(r, "  %s s = 0.0%s;", F, d->f32_suffix);
    line(r, "  if (live && %s)", cond);
    line(r, "    for (int q = 0; q < %lld; q++) s += %s;", (long long)S, ld);
    line(r, "  pa[c] = s;");
    line(r, "}");
    line(r, "if (%s == 0) kiln_arrived%d[rb] = 0%s;", T, kr->id, d->uint_suffix);
  }
  /* KC's epilogue at each of the lane's columns, then KR's steps over the warp's row */
  line(r, "if (live) {");
  r->indent++;
  line(r, "{");
  r->indent++;
  chain_part(r, kc);
  push(r);
  decompose(r, "o", 0, n - 1, kc->shape);
  line(r, "%s", d->unroll);
  line(r, "%s", each);
  r->indent++;
  push(r);
  pair_column(r, kc, x, col, "pa[c]", "xv[c]");
  pop(r);
  close_block(r);
  pop(r);
  close_block(r);
  chain_part(r, kr);
  push(r);
  decompose(r, "o", 0, kr->rank, kr->shape);
  warp_row_steps(r, kr, d->unroll, each, col, x, "xv[c]", NULL, -1);
  pop(r);
  close_block(r);
  close_block(r);
}

/* A narrow pair a warp a row (cg_pair_warps): a block takes 8 rows, its warps independent (no
 * barrier, no shared memory). Lane l sums depth points l, l + 32, ... for every column; each
 * column's sums meet in a warp reduction that every lane sees, lane q keeps column q, runs KC's
 * epilogue there and holds the row's value for KR's steps, as a block row's first warp does.
 * Where rows are many, a block a row spends its time starting blocks (mlp_train_b1024's 1024
 * rows: the last block started 2.9 us after the first, each one's work 3.2 us). */
static void render_pair_warps(R *r, const Kernel *kc, const Kernel *kr, int x, const PairTail *t) {
  const Dialect *d = r->d;
  const char *I = ix(r), *X = vt(r, r->p->te->stages[x].dtype), *T = d->thread_id;
  int n = kc->rank, W = CG_GEMM_THREADS / 32;
  int64_t J = kc->shape[n - 1], rows = kr->outer_numel;
  int tS, S = pair_stage(r, kc, kr, t, &tS);
  line(r, "const int lane = %s %% 32, wp = %s / 32;", T, T);
  if (t) line(r, "%s %s kiln_tail[%d][%lld];", d->shared_qual, vt(r, r->p->te->stages[t->P].dtype), W, (long long)J);
  line(r, "for (%s ob = %s; ob < %s; ob += %s) {", I, d->block_id, lit(r, (rows + W - 1) / W), d->grid_size);
  r->indent++;
  line(r, "const %s o = ob * %d + wp;", I, W);
  line(r, "if (o >= %s) break;  /* the whole warp: its shuffles stay full */", lit(r, rows));
  line(r, "%s xv = 0;", X);
  line(r, "{");
  r->indent++;
  chain_part(r, kc);
  push(r);
  decompose(r, "o", 0, n - 1, kc->shape);
  pair_partials(r, kc, "lane", 32, S);
  lane_columns_open(r, J);
  pair_column(r, kc, x, "lane", "xa", "xv");
  pop(r);
  close_block(r);
  pop(r);
  close_block(r);
  pair_row_steps(r, kr, x, (long long)J, "{", t, "kiln_tail[wp]");  /* in this warp */
  if (t) {
    line(r, "%s  /* the row's values, for every lane's points of the tail */", d->warp_barrier);
    pair_tail(r, t, "kiln_tail[wp]", "lane", 32, tS);
    line(r, "%s  /* the next row's values wait for these reads */", d->warp_barrier);
  }
  close_block(r);
}

static void render_pair_banded(R *r, const Kernel *kc, const Kernel *kr, int x);

static void render_pair(R *r) {
  const Kernel *end = r->k, *kr = end->tailed ? end - 1 : end, *kc = kr - 1;
  int x = -1;  /* the stage of KC that KR reads */
  for (int i = 0; i < kc->n_items; i++)
    for (int j = 0; j < kr->n_items; j++)
      if (chain_reads_stage(kr->items[j].body, kc->items[i].stage)) x = kc->items[i].stage;
  PairTail tail = { .kd = end, .P = -1 }, *t = NULL;
  if (end->tailed) {  /* P: the one stage of KR the tail reads (plan.c tail_fits), at its step */
    for (int j = 0; j < kr->n_items; j++)
      if (chain_reads_stage(chain_acc(end)->body, kr->items[j].stage))
        tail.P = kr->items[j].stage, tail.step = kr->items[j].step;
    t = &tail;
    if (tail.P < 0 || !cg_pair_blocked(r->d) || cg_pair_wide(kr) || !r->d->warp_barrier) {
      /* planned for another backend (plan_options gives tails to cuda alone) */
      r->st = kiln_fail(KILN_ERR_UNSUPPORTED, "codegen: kernel %d: the %s dialect has no pair's tail (a block or warp a "
                        "row and a warp barrier)", end->id, r->d->name);
      return;
    }
  }
  r->chain_lo = kc->id, r->chain_hi = end->id;
  if (cg_pair_banded(r->p, kr, r->d, r->o, NULL)) render_pair_banded(r, kc, kr, x);
  else if (cg_pair_blocked(r->d) && cg_pair_wide(kr)) render_pair_wide(r, kc, kr, x);
  else if (cg_pair_blocked(r->d) && cg_pair_warps(kr, r->o)) render_pair_warps(r, kc, kr, x, t);
  else if (cg_pair_blocked(r->d)) render_pair_block(r, kc, kr, x, t);
  else {
    open_outer(r, kr->outer_numel, kr->outer_numel * kc->shape[kc->rank - 1] * kc->inner_numel, false);
    rows_then_steps(r, kc, kr, x, kc->shape[kc->rank - 1], -1, -1);
    close_block(r);
  }
  chain_part(r, end);
}

/* const v<i> for the batch digits of bz: vars 0 .. rank-3, the same in every part of a chain */
static void chain_batch_vars(R *r, const Kernel *k) { decompose(r, "bz", 0, k->rank - 2, k->shape); }

/* The element offset of the first memory load in x at the var values v (INT64_MIN: none). */
typedef struct FirstLoad { const Expr *l; } FirstLoad;
static void first_load_cb(const Expr *L, void *ctx) {
  FirstLoad *f = ctx;
  if (!f->l) f->l = L;
}

static int64_t offset_at_vars(R *r, const Expr *x, const int64_t *v) {
  FirstLoad f = { NULL };
  te_visit_loads(x, first_load_cb, &f);
  if (!f.l) return INT64_MIN;
  Expr *o = load_offset(r, f.l);
  int64_t mn, mx;
  if (!o || !te_range(o, v, v, r->nv, &mn, &mx) || mn != mx) return INT64_MIN;
  return mn;
}

/* One factor of a part into shared memory: for every element (fr, fc) of the rows x cols tile,
 * var vr = r0 + fr (or fr with r0 NULL), var vc = fc, var vz = 0, sh[fr * ld + fc] = x (0 past
 * the queries when guarded). Consecutive threads walk the tile along whichever of fr and fc
 * has unit stride in x's first load, so the global reads coalesce. */
/* chain_stage's copies: a 16-bit factor that is a plain load read in aligned runs of 8 along the
 * tile's columns (cg_load_runs) goes straight into shared memory, 16 bytes (8 values) an
 * asynchronous copy, zero-filled past the queries; the caller waits for them (cp_wait0) before
 * its barrier. One copy for 8 values also means one element's index math for 8. */
static void chain_copies(R *r, const Kernel *k, const Expr *L, int64_t rows, int64_t cols, int64_t ld, int vr,
                         const char *r0, int vc, int vz, const char *sh, int unroll) {
  const Dialect *d = r->d;
  const char *I = ix(r);
  int64_t c8 = cols / 8, chunks = rows * c8;
  if (unroll > 1 && chunks >= (int64_t)unroll * CG_GEMM_THREADS) line(r, "%s %d", d->unroll, unroll);
  line(r, "for (int f = %s; f < %lld; f += %d) {", d->thread_id, (long long)chunks, CG_GEMM_THREADS);
  r->indent++;
  push(r);
  line(r, "const int fr = f / %lld, fc = (f %% %lld) * 8;", (long long)c8, (long long)c8);
  chain_batch_vars(r, k);
  line(r, "const %s v%d = %s%s(%s)fr;", I, vr, r0 ? r0 : "", r0 ? " + " : "", I);
  line(r, "const %s v%d = fc;", I, vc);
  if (vz >= 0) line(r, "const %s v%d = 0;", I, vz);
  int buf = r->param_of[L->src];
  line(r, "const %s *src = b%d;", d->store_type[L->dtype], buf);
  if (r0) line(r, "const bool in = v%d < %s;", vr, lit(r, k->shape[vr]));
  else line(r, "const bool in = true;");
  line(r, "if (in) {");
  r->indent++;
  push(r);
  Expr *o = load_offset(r, L);
  char off[256];
  if (!o) { r->st = kiln_fail(KILN_ERR_NO_MEMORY, "codegen: out of memory"); return; }
  emit(r, o, off, sizeof off);
  line(r, "src = b%d + (%s);", buf, off);
  pop(r);
  close_block(r);
  line(r, "%s(&%s[fr * %lld + fc], src, in);", d->cp_async, sh, (long long)ld);
  pop(r);
  close_block(r);
}

static void chain_stage(R *r, const Kernel *k, const Expr *x, int64_t rows, int64_t cols, int64_t ld, int vr,
                        const char *r0, int vc, int vz, const char *sh, const char *stash, int unroll) {
  const char *I = ix(r), *F = vt(r, KILN_F32);
  chain_part(r, k);
  int64_t v[2 * KILN_MAX_RANK] = { 0 };
  int64_t o0 = offset_at_vars(r, x, v);
  v[vr] = 1;
  int64_t o1 = offset_at_vars(r, x, v);
  v[vr] = 0, v[vc] = 1;
  int64_t o2 = offset_at_vars(r, x, v);
  bool row_fast = o0 != INT64_MIN && o1 != INT64_MIN && o1 - o0 == 1 && !(o2 != INT64_MIN && o2 - o0 == 1);
  const Expr *L = x->kind == EX_CAST && x->dtype == KILN_F32 ? x->args[0] : NULL;
  if (stash && r->d->cp_async && L && L->kind == EX_LOAD && (L->dtype == KILN_BF16 || L->dtype == KILN_F16) &&
      cg_load_runs(r->p, k, L, vc, 8)) {
    chain_copies(r, k, L, rows, cols, ld, vr, r0, vc, vz, sh, unroll);
    return;
  }
  if (unroll > 1 && rows * cols >= (int64_t)unroll * CG_GEMM_THREADS) line(r, "%s %d", r->d->unroll, unroll);
  line(r, "for (int f = %s; f < %lld; f += %d) {", r->d->thread_id, (long long)(rows * cols), CG_GEMM_THREADS);
  r->indent++;
  push(r);
  if (row_fast) line(r, "const int fr = f %% %lld, fc = f / %lld;", (long long)rows, (long long)rows);
  else line(r, "const int fr = f / %lld, fc = f %% %lld;", (long long)cols, (long long)cols);
  chain_batch_vars(r, k);
  line(r, "const %s v%d = %s%s(%s)fr;", I, vr, r0 ? r0 : "", r0 ? " + " : "", I);
  line(r, "const %s v%d = fc;", I, vc);
  if (vz >= 0) line(r, "const %s v%d = 0;", I, vz);
  if (r0) line(r, "%s xv = 0.0%s;", F, r->d->f32_suffix), line(r, "if (v%d < %s) {", vr, lit(r, k->shape[vr])), r->indent++;
  char t[256], st[300];
  emit(r, x, t, sizeof t);
  if (r0) line(r, "xv = %s;", t), close_block(r), snprintf(t, sizeof t, "xv");
  if (stash) snprintf(st, sizeof st, stash, t);
  else snprintf(st, sizeof st, "%s", t);
  line(r, "%s[fr * %lld + fc] = %s;", sh, (long long)ld, st);
  pop(r);
  close_block(r);
}

/* A chain's row tiles share three pieces whatever form their products take. At a point of the scores
 * (KC's vars: the batch point's, row row0 + fr, column col): KC's sum acc finished, its values, and
 * the value x the rows read stored to dst. */
/* The chain's row var (row0 + off) and its last var (col); with clamp, a row past the queries takes the
 * last query's: what it reads at the row it reads there, never past a tensor (its results are not stored). */
static void chain_row_vars(R *r, const Chain *c, const char *row0, const char *off, bool clamp, const char *col) {
  const char *I = ix(r);
  if (clamp)
    line(r, "const %s v%d = %s + (%s)%s < %s ? %s + (%s)%s : %s, v%d = %s;", I, c->n - 2, row0, I, off, lit(r, c->I), row0,
         I, off, lit(r, c->I - 1), c->n - 1, col);
  else line(r, "const %s v%d = %s + (%s)%s, v%d = %s;", I, c->n - 2, row0, I, off, c->n - 1, col);
}

static void chain_score_point(R *r, const Chain *c, const char *row0, const char *col, const char *acc, const char *dst) {
  push(r);
  chain_batch_vars(r, c->kc);
  chain_row_vars(r, c, row0, "fr", c->I % 16 != 0, col);  /* a ragged last tile's rows past the queries (a mask's reads) */
  acc_final(r, c->acc_c, acc);
  chain_values(r, c->kc, 1);
  line(r, "%s = s%d;", dst, c->x);
  pop(r);
}

/* KR's steps over a tile's `rows` rows of scores in Ss (sd apart), a warp a row (warp wp takes rows
 * wp, wp + 8, ...), lanes along the row; post: where P goes, a format of P's value. With G < 32
 * lanes a row (CgOptions.chain_lanes) a warp takes 32 / G rows at once, each row's sums meeting in
 * its group's shuffles: a tile's 16 rows are one pass of 8 warps, where a warp a row took two
 * passes, each of dependent shuffles. Every lane of a warp then runs the same passes (the full-mask
 * shuffles need it): a row past the queries runs on its own row of Ss (the zero queries' scores) with
 * the last query's row index for what it reads from memory, and stores nothing but its own rows of Ss
 * and Ps, which no output reads. */
static void chain_rows_shared(R *r, const Chain *c, int rows, int64_t sd, const char *post, int G) {
  const char *I = ix(r);
  int W = CG_GEMM_THREADS / 32, P = 32 / G;
  bool ragged = G < 32 && c->I % rows != 0;
  KILN_ASSERT(G >= 1 && 32 % G == 0 && rows % P == 0);
  chain_part(r, c->kr);
  if (G < 32) line(r, "const int gl = lane %% %d;", G);
  if (G < 32) line(r, "for (int rr = wp * %d + lane / %d; rr < %d; rr += %d) {", P, G, rows, W * P);
  else line(r, "for (int rr = wp; rr < %d; rr += %d) {", rows, W);
  r->indent++;
  if (G == 32) line(r, "if (i0 + rr >= %s) break;", lit(r, c->I));
  if (ragged) line(r, "const bool live = i0 + rr < %s;", lit(r, c->I));
  push(r);
  chain_batch_vars(r, c->kc);
  chain_row_vars(r, c, "i0", "rr", ragged, "0");
  char head[96], value[64], pv[32], at[160];
  if (G < 32) snprintf(head, sizeof head, "for (%s r = gl; r < %s; r += %d) {", I, lit(r, c->L), G);
  else snprintf(head, sizeof head, "for (%s r = lane; r < %s; r += 32) {", I, lit(r, c->L));
  /* each group's own row of Ss (a row past the queries holds the zero queries' scores): the sum's loop
   * writes its summands there, so a group on the last query's row in Ss would race with that row's own */
  snprintf(value, sizeof value, "Ss[rr * %lld + r]", (long long)sd);
  snprintf(pv, sizeof pv, "s%d", c->p->stage);
  snprintf(at, sizeof at, post, pv);
  if (G < 32) r->lanes = G, r->live = ragged ? "live" : NULL;
  warp_row_steps(r, c->kr, NULL, head, "r", c->x, value, at, c->p->step);
  r->lanes = 0, r->live = NULL;
  pop(r);
  close_block(r);
}

/* At an output point (KO's vars: row row0 + fr, column col), KO's items with its sum acc. */
static void chain_out_point(R *r, const Chain *c, const char *row0, const char *col, const char *acc) {
  const char *I = ix(r);
  push(r);
  chain_batch_vars(r, c->kc);
  line(r, "const %s v%d = %s + (%s)fr, v%d = %s;", I, c->n - 2, row0, I, c->n - 1, col);
  items_at(r, 1, NULL, acc);
  pop(r);
}

/* Rows a thread in the FMA chain's two products (its scores over one key, its outputs over 4 columns):
 * 4 each; or (CgOptions.chain_spread) as few as give the block's threads one pass, at least 1: a tile
 * of 8 rows over 64 keys and 64 columns took 128 and 32 of its 256 threads with 4. A thread's sums
 * each run over the depth (the keys) in the same order either way: the same bits. */
static int chain_rows_a_thread(const R *r, int64_t units) {
  if (!r->o->chain_spread) return 4;
  int q = 1;
  while (q < 4 && units > (int64_t)q * CG_GEMM_THREADS) q *= 2;
  return q;
}

static void render_chain_grid(R *r, const Chain *c) {
  const Dialect *d = r->d;
  const char *I = ix(r), *F = vt(r, KILN_F32), *T = d->thread_id, *V = d->vec4_type;
  int n = c->n, R_ = cg_chain_rows(c->ko, CG_CHAIN_FMA), RS = PLAN_CHAIN_ROWS;
  int RQ = chain_rows_a_thread(r, R_ * c->L), RO = chain_rows_a_thread(r, R_ * (c->E / 4));
  KILN_ASSERT(R_ % RQ == 0 && R_ % RO == 0);
  int64_t it = (c->I + R_ - 1) / R_, sp = cg_chain_splits(c->ko, CG_CHAIN_FMA, r->o->chain_sm_blocks), tpb = (it + sp - 1) / sp;
  int64_t qd = c->D + 4, kd = c->D + 4, vd = c->E + 4, sd = c->L + 4;
  const char *dy = d->dyn_shared_name;
  line(r, "%s", d->dyn_shared);
  line(r, "%s *Qs = %s, *Ks = %s + %lld, *Vs = %s + %lld, *Ss = %s + %lld;", F, dy, dy, (long long)(RS * qd), dy,
       (long long)(RS * qd + c->L * kd), dy, (long long)(RS * qd + c->L * kd + c->L * vd));
  line(r, "const int lane = %s %% 32, wp = %s / 32;", T, T);
  line(r, "for (%s blk = %s; blk < %s; blk += %s) {", I, d->block_id, lit(r, c->batch * sp), d->grid_size);
  r->indent++;
  line(r, "const %s bz = blk / %s, t0 = (blk %% %s) * %lld;", I, lit(r, sp), lit(r, sp), (long long)tpb);
  /* the point's keys [L][D] and values [L][E], once; then each row tile's queries [R][D] */
  chain_stage(r, c->kc, c->kb, c->L, c->D, kd, n - 1, NULL, n, n - 2, "Ks", NULL, 0);
  chain_stage(r, c->ko, c->vf, c->L, c->E, vd, n, NULL, n - 1, n - 2, "Vs", NULL, 0);
  line(r, "for (%s tt = 0; tt < %lld; tt++) {", I, (long long)tpb);
  r->indent++;
  line(r, "const %s i0 = (t0 + tt) * %d;", I, R_);
  line(r, "if (i0 >= %s) break;  /* the same for every thread of the block */", lit(r, c->I));
  chain_stage(r, c->kc, c->qa, R_, c->D, qd, n - 2, "i0", n, n - 1, "Qs", NULL, 0);
  line(r, "%s", d->barrier);
  /* scores: thread f's RQ rows RQ (f / L) .. and key f % L, lanes along the keys, 16-byte reads
   * along d (each key's vector serves RQ rows: shared-memory bytes, not multiply-adds, bound
   * this loop) */
  line(r, "for (int f = %s; f < %lld; f += %d) {", T, (long long)(R_ / RQ * c->L), CG_GEMM_THREADS);
  r->indent++;
  chain_part(r, c->kc);
  line(r, "const int rg = f / %lld, fc = f %% %lld;", (long long)c->L, (long long)c->L);
  line(r, "%s acc[%d];", F, RQ);
  line(r, "%s", d->unroll);
  line(r, "for (int i = 0; i < %d; i++) acc[i] = 0.0%s;", RQ, d->f32_suffix);
  line(r, "for (int t = 0; t < %lld; t += 4) {", (long long)c->D);
  r->indent++;
  line(r, "const %s y4 = *(const %s *)&Ks[fc * %lld + t];", V, V, (long long)kd);
  line(r, "%s", d->unroll);
  line(r, "for (int i = 0; i < %d; i++) {", RQ);
  r->indent++;
  line(r, "const %s x4 = *(const %s *)&Qs[(%d * rg + i) * %lld + t];", V, V, RQ, (long long)qd);
  for (int l = 0; l < 4; l++) {
    char xa[16], yb[16], fm[160];
    snprintf(xa, sizeof xa, "x4%s", d->vec4_lane[l]);
    snprintf(yb, sizeof yb, "y4%s", d->vec4_lane[l]);
    snprintf(fm, sizeof fm, d->fma, xa, yb, "acc[i]");
    line(r, "acc[i] = %s;", fm);
  }
  close_block(r);
  close_block(r);
  line(r, "%s", d->unroll);
  line(r, "for (int i = 0; i < %d; i++) {", RQ);
  r->indent++;
  line(r, "const int fr = %d * rg + i;", RQ);
  char ss[64];
  snprintf(ss, sizeof ss, "Ss[fr * %lld + fc]", (long long)sd);
  chain_score_point(r, c, "i0", "fc", "acc[i]", ss);
  close_block(r);
  close_block(r);
  line(r, "%s", d->barrier);
  /* KR's steps, P put back in place */
  char post[64];
  snprintf(post, sizeof post, "Ss[rr * %lld + r] = %%s;", (long long)sd);
  chain_rows_shared(r, c, R_, sd, post, 32);
  line(r, "%s", d->barrier);
  /* outputs: thread f's RO rows RO (f / (E/4)) .. by 4 consecutive e, P's rows and v's rows
   * read as 16-byte vectors */
  int64_t e4 = c->E / 4;
  line(r, "for (int f = %s; f < %lld; f += %d) {", T, (long long)(R_ / RO * e4), CG_GEMM_THREADS);
  r->indent++;
  chain_part(r, c->ko);
  line(r, "const int rg = f / %lld, f4 = f %% %lld;", (long long)e4, (long long)e4);
  line(r, "%s o4[%d][4];", F, RO);
  line(r, "%s", d->unroll);
  line(r, "for (int i = 0; i < %d; i++) o4[i / 4][i %% 4] = 0.0%s;", 4 * RO, d->f32_suffix);
  line(r, "for (int t = 0; t < %lld; t += 4) {", (long long)c->L);
  r->indent++;
  line(r, "%s w4[4];", V);
  line(r, "%s", d->unroll);
  line(r, "for (int u = 0; u < 4; u++) w4[u] = *(const %s *)&Vs[(t + u) * %lld + 4 * f4];", V, (long long)vd);
  line(r, "%s", d->unroll);
  line(r, "for (int i = 0; i < %d; i++) {", RO);
  r->indent++;
  line(r, "const %s p4 = *(const %s *)&Ss[(%d * rg + i) * %lld + t];", V, V, RO, (long long)sd);
  for (int u = 0; u < 4; u++)
    for (int l = 0; l < 4; l++) {
      char pu[16], wl[24], ol[24], fm[200];
      snprintf(pu, sizeof pu, "p4%s", d->vec4_lane[u]);
      snprintf(wl, sizeof wl, "w4[%d]%s", u, d->vec4_lane[l]);
      snprintf(ol, sizeof ol, "o4[i][%d]", l);
      snprintf(fm, sizeof fm, d->fma, pu, wl, ol);
      line(r, "o4[i][%d] = %s;", l, fm);
    }
  close_block(r);
  close_block(r);
  line(r, "%s", d->unroll);
  line(r, "for (int i = 0; i < %d; i++) {", RO);
  r->indent++;
  line(r, "const int fr = %d * rg + i;", RO);
  line(r, "if (i0 + fr >= %s) break;", lit(r, c->I));
  line(r, "%s", d->unroll);
  line(r, "for (int l = 0; l < 4; l++) {");
  r->indent++;
  chain_out_point(r, c, "i0", "4 * f4 + l", "o4[i][l]");
  close_block(r);
  close_block(r);
  close_block(r);
  line(r, "%s", d->barrier);  /* the next tile's staging waits for every read of this one */
  close_block(r);
  close_block(r);
}

/* A 16-row product of an mma chain (cg_chain_mma), n-tile by n-tile of 8 columns: warp wp takes n-tiles
 * nt = wp, wp + 8, ... (per_warp: every n-tile, unrolled, for its own rows), its f32 tile acc[4] the
 * sum over `depth` (k-steps ks = 0, 16, ...) of A's fragments by B's (b_ld at address b_at, of nt and
 * ks). A's: ldmatrix x4 of the 16 rows of shared array a, ld elements apart; or (ld 0) the registers
 * a[ks / 16][0..3]. Left open inside the loop over the fragment's 4 points q, fr and fc declared:
 * thread lane holds acc[q] at row (lane / 4) + 8 (q / 2) and column 8 nt + 2 (lane % 4) + q % 2
 * (PTX's m16n8 layout). */
/* Value q of an m16n8 accumulator of n-tile nt: its row fr in the tile, its column fc. */
static void mma_point(R *r) { line(r, "const int fr = (lane >> 2) + (q >> 1) * 8, fc = nt * 8 + (lane & 3) * 2 + (q & 1);"); }

static void mma_tiles(R *r, CgMma mma, const char *acc, bool per_warp, int64_t n_tiles, int64_t depth, const char *a,
                      int64_t ld, const char *b_ld, const char *b_at) {
  const Dialect *d = r->d;
  const char *F = vt(r, KILN_F32), *z = d->f32_suffix;
  if (per_warp) line(r, "%s", d->unroll), line(r, "for (int nt = 0; nt < %lld; nt++) {", (long long)n_tiles);
  else line(r, "for (int nt = wp; nt < %lld; nt += %d) {", (long long)n_tiles, CG_GEMM_THREADS / 32);
  r->indent++;
  line(r, "%s %s[4] = { 0.0%s, 0.0%s, 0.0%s, 0.0%s };", F, acc, z, z, z, z);
  line(r, "%s", d->unroll);
  line(r, "for (int ks = 0; ks < %lld; ks += 16) {", (long long)depth);
  r->indent++;
  if (ld) {
    line(r, "unsigned a0, a1, a2, a3, b0, b1, u2, u3;");
    line(r, "%s(a0, a1, a2, a3, &%s[(lane & 15) * %lld + ks + (lane >> 4) * 8]);", d->ldmatrix[2], a, (long long)ld);
  } else {
    line(r, "unsigned b0, b1, u2, u3;");
    line(r, "const unsigned a0 = %s[ks / 16][0], a1 = %s[ks / 16][1], a2 = %s[ks / 16][2], a3 = %s[ks / 16][3];", a, a,
         a, a);
  }
  line(r, "%s(b0, b1, u2, u3, %s);", b_ld, b_at);
  line(r, "%s(%s[0], %s[1], %s[2], %s[3], a0, a1, a2, a3, b0, b1);", d->mma[mma], acc, acc, acc, acc);
  close_block(r);
  line(r, "%s", d->unroll);
  line(r, "for (int q = 0; q < 4; q++) {");
  r->indent++;
  mma_point(r);
}

/* An attention chain on tensor cores (cg_chain_mma): render_chain_grid's blocks and row tiles, 16
 * rows a tile (the mma's), with the queries, keys and values staged as their 16-bit values (exact:
 * each factor is one) and both products warp mma tiles, m16n8k16 with f32 sums; warp wp takes the
 * products' 8-column n-tiles wp, wp + 8, .... The scores' epilogue and KR's steps run on f32 rows
 * in shared memory as in the f32 form, KR writing P's 16-bit rows beside them for the second
 * product. The sums' order differs from the f32 form's (the mma's own), as a GEMM tile's does. */
/* an mma chain's staging loops: this many elements' loads a thread in flight at once (each is a
 * 2-byte load; one at a time, bert's 16384 keys and values took most of the kernel) */
enum { CHAIN_STAGE_UNROLL = 8 };

/* how a chain stages a 16-bit value: its bits as they are, or under excess precision (where a
 * computed value, P's above all, is an unrounded f32) rounded to the mma's type */
static const char *chain_stash(const R *r, CgMma mma) {
  return r->o->excess_precision && r->d->mma_round[mma] ? r->d->mma_round[mma] : r->d->mma_stash[mma];
}

static void render_chain_mma(R *r, const Chain *c, CgMma mma) {
  const Dialect *d = r->d;
  const char *I = ix(r), *F = vt(r, KILN_F32), *T = d->thread_id, *stash = chain_stash(r, mma);
  int n = c->n, R_ = PLAN_CHAIN_ROWS;
  int64_t it = (c->I + R_ - 1) / R_, sp = cg_chain_splits(c->ko, CG_CHAIN_SHARED, r->o->chain_sm_blocks), tpb = (it + sp - 1) / sp;
  int64_t sd = c->L + 4, qd = c->D + 8, kd = c->D + 8, vd = c->E + 8, pd = c->L + 8;
  const char *dy = d->dyn_shared_name;
  /* prefetch: two tiles of queries, the one being computed (Qc) and the next one, copied meanwhile */
  bool pre = cg_chain_prefetch(c->ko, CG_CHAIN_SHARED, r->o);
  line(r, "%s", d->dyn_shared);
  line(r, "%s *Ss = %s;", F, dy);
  line(r, "uint16_t *Qs = (uint16_t *)(%s + %lld), *Ks = Qs + %lld, *Vs = Ks + %lld, *Ps = Vs + %lld;", dy,
       (long long)(R_ * sd), (long long)((pre ? 2 : 1) * R_ * qd), (long long)(c->L * kd), (long long)(c->L * vd));
  line(r, "const int lane = %s %% 32, wp = %s / 32;", T, T);
  line(r, "for (%s blk = %s; blk < %s; blk += %s) {", I, d->block_id, lit(r, c->batch * sp), d->grid_size);
  r->indent++;
  line(r, "const %s bz = blk / %s, t0 = (blk %% %s) * %lld;", I, lit(r, sp), lit(r, sp), (long long)tpb);
  chain_stage(r, c->kc, c->kb, c->L, c->D, kd, n - 1, NULL, n, n - 2, "Ks", stash, CHAIN_STAGE_UNROLL);
  chain_stage(r, c->ko, c->vf, c->L, c->E, vd, n, NULL, n - 1, n - 2, "Vs", stash, CHAIN_STAGE_UNROLL);
  if (pre) {  /* the first tile's queries in the keys' and values' group */
    line(r, "if (t0 * %d < %s) {", R_, lit(r, c->I));
    r->indent++;
    line(r, "const %s i1 = t0 * %d;", I, R_);
    chain_stage(r, c->kc, c->qa, R_, c->D, qd, n - 2, "i1", n, n - 1, "Qs", stash, CHAIN_STAGE_UNROLL);
    close_block(r);
  }
  line(r, "%s", d->cp_commit);  /* the keys' and values' copies, if copied; waited for with the queries' */
  line(r, "for (%s tt = 0; tt < %lld; tt++) {", I, (long long)tpb);
  r->indent++;
  line(r, "const %s i0 = (t0 + tt) * %d;", I, R_);
  line(r, "if (i0 >= %s) break;  /* the same for every thread of the block */", lit(r, c->I));
  if (pre) {
    /* the next tile's queries into the other buffer (the barrier that ended the tile before this one
     * saw every read of it), then a wait for all but that newest group: this tile's queries */
    char next[64];
    snprintf(next, sizeof next, "Qs + ((tt + 1) & 1) * %lld", (long long)(R_ * qd));
    line(r, "uint16_t *Qc = Qs + (tt & 1) * %lld;", (long long)(R_ * qd));
    line(r, "if (tt + 1 < %lld && i0 + %d < %s) {", (long long)tpb, R_, lit(r, c->I));
    r->indent++;
    line(r, "const %s i1 = i0 + %d;", I, R_);
    line(r, "uint16_t *Qn = %s;", next);
    chain_stage(r, c->kc, c->qa, R_, c->D, qd, n - 2, "i1", n, n - 1, "Qn", stash, CHAIN_STAGE_UNROLL);
    line(r, "%s", d->cp_commit);
    char wait1[48];
    snprintf(wait1, sizeof wait1, d->cp_wait, 1);
    line(r, "%s", wait1);
    r->indent--;
    line(r, "} else {");
    r->indent++;
    line(r, "%s", d->cp_wait0);
    close_block(r);
  } else {
    chain_stage(r, c->kc, c->qa, R_, c->D, qd, n - 2, "i0", n, n - 1, "Qs", stash, CHAIN_STAGE_UNROLL);
    line(r, "%s", d->cp_commit);
    line(r, "%s", d->cp_wait0);
  }
  line(r, "%s", d->barrier);
  /* scores: Q (16 x D, ldmatrix x4 along each 16-deep k-step) by the keys' rows n-tile by n-tile
   * (a key row is a column of K^T: ldmatrix x2, not transposed) */
  chain_part(r, c->kc);
  char bq[128];
  snprintf(bq, sizeof bq, "&Ks[(nt * 8 + (lane & 7)) * %lld + ks + ((lane >> 3) & 1) * 8]", (long long)kd);
  mma_tiles(r, mma, "cc", false, c->L / 8, c->D, pre ? "Qc" : "Qs", qd, d->ldmatrix[0], bq);
  char ss[64];
  snprintf(ss, sizeof ss, "Ss[fr * %lld + fc]", (long long)sd);
  chain_score_point(r, c, "i0", "fc", "cc[q]", ss);
  close_block(r);
  close_block(r);
  line(r, "%s", d->barrier);
  /* KR's steps, P's 16-bit row to Ps */
  char pb[64], post[128];
  snprintf(pb, sizeof pb, stash, "%s");
  snprintf(post, sizeof post, "Ps[rr * %lld + r] = %s;", (long long)pd, pb);
  chain_rows_shared(r, c, R_, sd, post, r->o->chain_lanes ? r->o->chain_lanes : 32);
  line(r, "%s", d->barrier);
  /* outputs: P (16 x L) by the values (L x E, stored along e: ldmatrix x2 transposed) */
  chain_part(r, c->ko);
  char bv[128];
  snprintf(bv, sizeof bv, "&Vs[(ks + (lane & 7) + ((lane >> 3) & 1) * 8) * %lld + nt * 8]", (long long)vd);
  mma_tiles(r, mma, "oc", false, c->E / 8, c->L, "Ps", pd, d->ldmatrix[1], bv);
  line(r, "if (i0 + fr >= %s) continue;", lit(r, c->I));
  chain_out_point(r, c, "i0", "fc", "oc[q]");
  close_block(r);
  close_block(r);
  line(r, "%s", d->barrier);  /* the next tile's staging waits for every read of this one */
  close_block(r);
  close_block(r);
}

/* An attention chain with each warp's rows in its mma fragments (CG_CHAIN_FRAGS): a block stages one
 * batch point's keys and values and the queries of its 8 warps' 16-row tiles (16-bit, as
 * render_chain_mma does), then each warp alone: the scores of its 16 rows over the L keys as L/8
 * m16n8 tiles whose f32 values stay in registers (xs: thread lane holds rows lane/4 and lane/4 + 8,
 * columns 2 (lane % 4) and one more of each 8), the scores' epilogue on them, KR's steps for each of
 * its two rows with the row's sums and maxima meeting in the quad of lanes that holds it (k_quad),
 * P written back in place, P's values packed into the A fragments of the second product (an m16n8
 * accumulator's layout is the m16k16 A operand's), and the product with the values n-tile by n-tile.
 * No shared memory for the rows and no barrier between the products. */
static void render_chain_frags(R *r, const Chain *c, CgMma mma, CgChainForm form) {
  const Dialect *d = r->d;
  const char *I = ix(r), *F = vt(r, KILN_F32), *T = d->thread_id, *stash = chain_stash(r, mma);
  int n = c->n, RB = cg_chain_rows(c->ko, form), KW = cg_chain_key_warps(form);
  int64_t sp = cg_chain_splits(c->ko, form, r->o->chain_sm_blocks), qd = c->D + 8, kd = c->D + 8, vd = c->E + 8;
  int64_t NT = c->L / 8 / KW, ET = c->E / 8, KS = c->L / 16 / KW;  /* a warp's share of the keys: NT n-tiles, KS k-steps */
  const char *dy = d->dyn_shared_name;
  line(r, "%s", d->dyn_shared);
  line(r, "uint16_t *Qs = (uint16_t *)%s, *Ks = Qs + %lld, *Vs = Ks + %lld;", dy, (long long)(RB * qd),
       (long long)(c->L * kd));
  if (KW > 1) line(r, "%s *Xs = (%s *)(Vs + %lld);  /* each thread's partial outputs */", F, F, (long long)(c->L * vd));
  line(r, "const int lane = %s %% 32, wp = %s / 32;", T, T);
  line(r, "for (%s blk = %s; blk < %s; blk += %s) {", I, d->block_id, lit(r, c->batch * sp), d->grid_size);
  r->indent++;
  line(r, "const %s bz = blk / %s, i0 = (blk %% %s) * %d;", I, lit(r, sp), lit(r, sp), RB);
  chain_stage(r, c->kc, c->kb, c->L, c->D, kd, n - 1, NULL, n, n - 2, "Ks", stash, CHAIN_STAGE_UNROLL);
  chain_stage(r, c->ko, c->vf, c->L, c->E, vd, n, NULL, n - 1, n - 2, "Vs", stash, CHAIN_STAGE_UNROLL);
  chain_stage(r, c->kc, c->qa, RB, c->D, qd, n - 2, "i0", n, n - 1, "Qs", stash, CHAIN_STAGE_UNROLL);
  line(r, "%s", d->cp_commit);
  line(r, "%s", d->cp_wait0);
  line(r, "%s", d->barrier);
  char qrow[64], kcol[48], at[96], bq[128], bv[160];
  if (KW == 1) {
    line(r, "const %s iw = i0 + wp * 16;  /* this warp's first row */", I);
    line(r, "if (iw < %s) {", lit(r, c->I));
    snprintf(qrow, sizeof qrow, "wp * 16");
    kcol[0] = 0;
  } else {
    /* each tile's keys over KW warps, whose rows' maxima and sums meet at barriers (k_quad_keys): every
     * warp runs every step, a tile past the queries on the last tile's rows, storing nothing */
    line(r, "const bool tl = i0 + (wp / %d) * 16 < %s;  /* this warp's tile is the queries' */", KW, lit(r, c->I));
    line(r, "const %s iw = tl ? i0 + (wp / %d) * 16 : %s;  /* its first row */", I, KW, lit(r, (c->I - 1) / 16 * 16));
    line(r, "const int kc0 = (wp %% %d) * %lld;  /* its first key */", KW, (long long)(c->L / KW));
    line(r, "{");
    snprintf(qrow, sizeof qrow, "(int)(iw - i0)");
    snprintf(kcol, sizeof kcol, "kc0 + ");
  }
  r->indent++;
  /* the scores, A's fragments of the warp's 16 rows loaded once */
  line(r, "unsigned qa[%lld][4];", (long long)(c->D / 16));
  line(r, "%s", d->unroll);
  line(r, "for (int ks = 0; ks < %lld; ks++)", (long long)(c->D / 16));
  line(r, "  %s(qa[ks][0], qa[ks][1], qa[ks][2], qa[ks][3], &Qs[(%s + (lane & 15)) * %lld + ks * 16 + (lane >> 4) * 8]);",
       d->ldmatrix[2], qrow, (long long)qd);
  line(r, "%s xs[%lld];", F, (long long)(NT * 4));
  chain_part(r, c->kc);
  snprintf(bq, sizeof bq, "&Ks[(%snt * 8 + (lane & 7)) * %lld + ks + ((lane >> 3) & 1) * 8]", kcol, (long long)kd);
  mma_tiles(r, mma, "cc", true, NT, c->D, "qa", 0, d->ldmatrix[0], bq);
  char col[48];
  snprintf(col, sizeof col, "%sfc", kcol);
  chain_score_point(r, c, "iw", col, "cc[q]", "xs[nt * 4 + q]");
  close_block(r);
  close_block(r);
  /* KR's steps, row by row of the thread's two: the row's points of the warp's keys are held by its
   * quad, 2 a fragment of each n-tile; P back into xs */
  chain_part(r, c->kr);
  bool quad = r->quad;
  r->quad = true, r->quad_keys = KW, r->live = KW > 1 ? "tl" : NULL;
  for (int h = 0; h < 2; h++) {
    line(r, "{  /* row lane / 4%s */", h ? " + 8" : "");
    r->indent++;
    push(r);
    chain_batch_vars(r, c->kc);
    line(r, "const %s v%d = iw + (%s)((lane >> 2) + %d), v%d = 0;", I, n - 2, I, 8 * h, n - 1);
    char head[96], value[64], post[96];
    snprintf(head, sizeof head, "for (int u = 0; u < %lld; u++) {", (long long)(NT * 2));
    snprintf(at, sizeof at, "%s(u >> 1) * 8 + (lane & 3) * 2 + (u & 1)", kcol);
    snprintf(value, sizeof value, "xs[(u >> 1) * 4 + %d + (u & 1)]", 2 * h);
    snprintf(post, sizeof post, "xs[(u >> 1) * 4 + %d + (u & 1)] = s%d;", 2 * h, c->p->stage);
    warp_row_steps(r, c->kr, d->unroll, head, at, c->x, value, post, c->p->step);
    pop(r);
    close_block(r);
  }
  r->quad = quad, r->quad_keys = 0, r->live = NULL;
  /* P (16 x the warp's keys) as A fragments: an m16n8 tile's (q 0, 1 | 2, 3) are the rows' (lane / 4 |
   * + 8) pairs of one 8-column half of a 16-deep k-step */
  line(r, "unsigned pa[%lld][4];", (long long)KS);
  line(r, "%s", d->unroll);
  line(r, "for (int ks = 0; ks < %lld; ks++)", (long long)KS);
  line(r, "%s", d->unroll);
  line(r, "  for (int g = 0; g < 4; g++) {  /* A's a0..a3: g & 1 the row half, g >> 1 the column half */");
  line(r, "    const int at = (2 * ks + (g >> 1)) * 4 + (g & 1) * 2;");
  char lo[96], hi[96];
  snprintf(lo, sizeof lo, stash, "xs[at]");
  snprintf(hi, sizeof hi, stash, "xs[at + 1]");
  line(r, "    pa[ks][g] = (unsigned)%s | ((unsigned)%s << 16);", lo, hi);
  line(r, "  }");
  /* outputs: P by the values, n-tile by n-tile (V stored along e: ldmatrix x2 transposed) */
  chain_part(r, c->ko);
  snprintf(bv, sizeof bv, "&Vs[(%sks + (lane & 7) + ((lane >> 3) & 1) * 8) * %lld + nt * 8]", kcol, (long long)vd);
  mma_tiles(r, mma, "oc", true, ET, c->L / KW, "pa", 0, d->ldmatrix[1], bv);
  if (KW == 1) {
    line(r, "if (iw + fr >= %s) continue;", lit(r, c->I));
    chain_out_point(r, c, "iw", "fc", "oc[q]");
    close_block(r);
    close_block(r);
  } else {
    /* each warp's sums over its keys; the tile's KW warps add them in warp order (the same bits
     * whichever adds), each warp the n-tiles of its turn */
    line(r, "Xs[(nt * 4 + q) * %d + %s] = oc[q];", CG_GEMM_THREADS, T);
    close_block(r);
    close_block(r);
    line(r, "%s", d->barrier);
    line(r, "for (int nt = wp %% %d; nt < %lld; nt += %d) {", KW, (long long)ET, KW);
    r->indent++;
    line(r, "%s", d->unroll);
    line(r, "for (int q = 0; q < 4; q++) {");
    r->indent++;
    mma_point(r);
    line(r, "const %s *xo = Xs + (nt * 4 + q) * %d + (wp / %d) * %d + lane;", F, CG_GEMM_THREADS, KW, 32 * KW);
    line(r, "%s os = xo[0];", F);
    line(r, "for (int j = 1; j < %d; j++) os += xo[j * 32];", KW);
    line(r, "if (!tl || iw + fr >= %s) continue;", lit(r, c->I));
    chain_out_point(r, c, "iw", "fc", "os");
    close_block(r);
    close_block(r);
  }
  close_block(r);
  line(r, "%s", d->barrier);  /* the next block's staging waits for every read of this one */
  close_block(r);
}

static void render_headed(R *r);

static void render_chain(R *r) {
  if (r->k->headed) { render_headed(r); return; }
  if (r->k->chain == 2 || r->k->tailed) { render_pair(r); return; }
  Chain c;
  chain_of(r->p, r->k, &c);
  r->chain_lo = c.kc->id, r->chain_hi = c.ko->id;
  CgChainForm form;
  CgMma mma = cg_chain_mma(r->p, c.ko, r->d, r->o, &form);
  if (cg_chain_key_warps(form)) render_chain_frags(r, &c, mma, form);
  else if (mma) render_chain_mma(r, &c, mma);
  else if (cg_chain_blocked(r->d, c.ko)) render_chain_grid(r, &c);
  else render_chain_loops(r, &c);  /* on a grid without the means: a thread per row, its row in registers */
  chain_part(r, c.ko);
}

/* What gemm.c borrows from the renderer to render the tiled contraction shape. */
static void hk_put(void *r, const char *s) { line(r, "%s", s); }
static void hk_indent(void *r, int d) { ((R *)r)->indent += d; }
static const char *hk_lit(void *r, int64_t v) { return lit(r, v); }
static void hk_digits(void *r, const char *flat, int first, int n, const int64_t *shape, const int *sel, int want,
                      int64_t total) {
  digits(r, flat, first, n, shape, sel, want, total);
}
static void hk_emit(void *r, const Expr *e, char *o, size_t n) { emit(r, e, o, n); }
static void hk_emit_lazy(void *r, const Expr *e, char *o, size_t n) {
  R *rr = r;
  bool was = rr->all_lazy;
  rr->all_lazy = true;
  emit(rr, e, o, n);
  rr->all_lazy = was;
}
static void hk_push(void *r) { push(r); }
static void hk_pop(void *r) { pop(r); }
static void hk_items(void *r, int step, const char *acc) { items_at(r, step, NULL, acc); }
static int hk_param_of(void *r, int stage) { return ((R *)r)->param_of[stage]; }
static void hk_var_range(void *r, int var, int64_t lo, int64_t hi) {
  R *rr = r;
  if (var < 0 || var >= (int)(sizeof rr->lo / sizeof rr->lo[0])) return;
  rr->lo[var] = lo, rr->hi[var] = hi;
  if (var >= rr->nv) rr->nv = var + 1;  /* a var of the caller's own (a reduction var's digit) */
}
static void set_kernel(R *r, const Kernel *k) {
  r->k = k;
  for (int i = 0; i < k->rank; i++) r->lo[i] = 0, r->hi[i] = k->shape[i] - 1;
  for (int i = 0; i < k->n_red; i++) r->lo[k->rank + i] = 0, r->hi[k->rank + i] = k->red_shape[i] - 1;
  r->nv = k->rank + k->n_red;
}
static void hk_kernel(void *r, const Kernel *k) { set_kernel(r, k); }
static int hk_isolate(void *r, int floor) {
  R *rr = r;
  int was = rr->memo_floor;
  rr->memo_floor = floor < 0 ? rr->n_memo : floor;
  return was;
}
static CgEmit emit_hooks(R *r) {
  return (CgEmit){ r, r->d, hk_put, hk_indent, hk_lit, hk_digits, hk_emit, hk_emit_lazy, hk_push, hk_pop, hk_param_of, hk_items,
                   hk_var_range, hk_kernel, hk_isolate, NULL, NULL };
}

/* Shared bands (CgOptions.pair_bands 2 and 3; band_share_steps): 32 x 32 tiles, the row kernel's sums
 * f32 sums alone, at most SHARE_MAX_BLOCKS blocks, which must all be resident at once: the runtime
 * checks the device and vetoes the form (group_veto) where it keeps fewer */
enum { SHARE_MAX_BLOCKS = 1024 };

static bool band_shares(const Plan *p, const Kernel *last, const Dialect *d, const CgOptions *o, const CgGemm *g) {
  if (!d->band_barrier || !d->band_meet || g->bm != 32 || g->bn != 32 || cg_gemm_blocks(g) > SHARE_MAX_BLOCKS ||
      (o->group_veto && o->group_veto[last->id]))
    return false;
  for (int i = 0; i < last->n_items; i++) {
    const Item *it = &last->items[i];
    if (it->kind != IT_ACC) continue;
    const Stage *S = &p->te->stages[it->stage];
    if (S->rop != RO_SUM || S->dtype != KILN_F32 || it->body->dtype != KILN_F32) return false;
  }
  return true;
}

/* ---- banded pairs (a wide pair whose contraction takes the GEMM tiles) ----
 * The warp-a-row form above reads the factor free of the rows once a row, from L1 at best; the
 * tiles read it once a tile from shared memory. Here KC is an ordinary tiled GEMM (split-K and all):
 * each output of KC's row value x also goes to a module-scope row buffer, and each tile, after its
 * epilogue, counts itself in at its band of BM rows. The band's last tile (its count back to 0 for
 * the next run) reads the band's rows back, G lanes a row (cg_pair_band_lanes), lane l of a group its
 * columns c * G + l, and runs KR's steps over them as a wide pair's warp does, the reductions within
 * the group. One kernel where there were two; the rows cross L2 once more, the launch and the row
 * kernel's start are gone, but a band's rows wait for its last tile and run on one block (on the
 * H100, gpt_tiny's 128 rows in 4 bands ran 1.2x slower than the GEMM and its row kernel: not a
 * default, bench/results/2026-12-05-h100-banded-pairs.md). */
bool cg_pair_banded(const Plan *p, const Kernel *last, const Dialect *d, const CgOptions *o, CgGemm *g) {
  CgGemm own;
  if (!g) g = &own;
  if (last->chain != 2 || last->tailed || last->headed || !o->pair_bands || !cg_pair_blocked(d) || !d->cached_load || !d->shared_qual ||
      !cg_pair_wide(last))
    return false;
  const Kernel *kc = last - 1;
  int n = kc->rank;
  /* (warpgroup MMA tiles hold their outputs in wgmma's order, which the band's steps do not read) */
  if (!cg_gemm_match(p, kc, o, g) || g->n_b != 1 || g->batch != 1 || g->cluster || g->wgmma || g->role[n - 1] != CG_ROLE_N)
    return false;
  for (int v = 0; v < n - 1; v++)  /* the rows, flat in KC's order: mq is the row */
    if (g->role[v] != CG_ROLE_M && kc->shape[v] != 1) return false;
  if (!d->group_reduce || g->N > 32 * 32) return false;  /* a band's rows in groups of lanes, at most 32 points a lane */
  for (int i = 0; i < last->n_items; i++) {  /* and no arg-reductions there (warp-wide only) */
    ReduceOp rop = last->items[i].kind == IT_ACC ? p->te->stages[last->items[i].stage].rop : RO_SUM;
    if (rop == RO_ARGMAX || rop == RO_ARGMIN) return false;
  }
  g->band = true;
  g->band_share = o->pair_bands >= 2 && band_shares(p, last, d, o, g);
  g->band_flags = g->band_share && o->pair_bands == 3;
  return true;
}

/* Lanes a row in a band's tail: as few as hold a band's rows in one pass of the block (a row of 8 lanes,
 * 32 rows at once, for 32-row tiles), as many as keep a lane's points at most 32 (J / lanes) */
int cg_pair_band_lanes(const CgGemm *g) {
  int G = CG_GEMM_THREADS / g->bm;
  if (G < 4) G = 4;
  while (G < 32 && (g->N + G - 1) / G > 32) G *= 2;
  return G;
}

static void band_globals(const Kernel *last, const CgGemm *g, const Dialect *d, StrBuf *out) {
  const Kernel *kc = last - 1;
  if (g->band_share) {
    int64_t nt = (g->N + g->bn - 1) / g->bn, nb = (g->M + g->bm - 1) / g->bm;
    sb_printf(out, "\n/* kernel %d, shared bands: each row's partial sums, a slot a sum of k%d's, a column tile a partial;\n"
                   " * %s */\n", last->id, last->id,
              g->band_flags ? "each tile's flag (0 at module load, one more at each meeting)"
                            : "each band's barrier (count, generation: 0 at module load, the count back to 0 after each)");
    sb_printf(out, "%s %s kiln_bp%d[%lld];\n", d->global_qual, d->value_type[KILN_F32], kc->id,
              (long long)((acc_items(last) + g->band_flags) * g->M * nt));  /* a slot a sum (and a spare: share_variance) */
    sb_printf(out, "%s %s kiln_bb%d[%lld];\n", d->global_qual, d->counter_type, kc->id, (long long)(g->band_flags ? nb * nt : 2 * nb));
    return;
  }
  sb_printf(out, "\n/* kernel %d, a banded pair: k%d's row values, and each band's tiles that have arrived (0 at\n"
                 " * module load; the band's last tile puts its count back to 0) */\n", last->id, kc->id);
  sb_printf(out, "%s %s kiln_bv%d[%lld];\n", d->global_qual, d->value_type[KILN_F32], kc->id, (long long)(g->M * g->N));
  sb_printf(out, "%s %s kiln_band%d[%lld];\n", d->global_qual, d->counter_type, kc->id,
            (long long)((g->M + g->bm - 1) / g->bm));
}

/* A shared band's tile (CgGemm.band_share): after its epilogue, a row of the tile to each group of
 * SHARE_LANES lanes (32 rows at once), lane l its columns c * SHARE_LANES + l, read from Xb; KR's steps
 * over them, each step's sums meeting across the band (share_final). A row past the last (in the last
 * band of a ragged M) is computed on the last row and stores nothing. */
enum { SHARE_LANES = 8 };

static void band_share_steps(R *r) {
  const Dialect *d = r->d;
  const CgGemm *g = r->band;
  const Kernel *kc = r->band_kc, *kr = r->band_kr;
  const char *I = ix(r), *F = vt(r, KILN_F32), *T = d->thread_id;
  int G = SHARE_LANES, C = g->bn / SHARE_LANES;
  KILN_ASSERT(G * g->bm == CG_GEMM_THREADS && C * G == g->bn);
  bool ragged = g->M % g->bm != 0, cols = g->N % g->bn != 0;
  line(r, "%s", d->barrier);  /* every output of the tile in Xb */
  int floor = hk_isolate(r, -1);  /* KR's vars take KC's names */
  line(r, "{");
  r->indent++;
  line(r, "const int gl = %s %% %d, rw = %s / %d;", T, G, T, G);
  if (ragged) {
    line(r, "const bool live = tm0 + rw < %s;", lit(r, g->M));
    line(r, "const %s o = live ? tm0 + rw : %s;", I, lit(r, g->M - 1));
  } else line(r, "const %s o = tm0 + rw;", I);
  LaneColumns lc;
  snprintf(lc.col, sizeof lc.col, "tn0 + c * %d + gl", G);
  snprintf(lc.cond, sizeof lc.cond, "%s < %s", lc.col, lit(r, g->N));
  if (cols) snprintf(lc.each, sizeof lc.each, "for (int c = 0; c < %d; c++) if (%s) {", C, lc.cond);
  else snprintf(lc.each, sizeof lc.each, "for (int c = 0; c < %d; c++) {", C);
  line(r, "%s xv[%d];", F, C);
  line(r, "%s", d->unroll);
  char keep[200];
  snprintf(keep, sizeof keep, "%s%s%s", ragged ? "live" : "", ragged && cols ? " && " : "", cols ? lc.cond : "");
  if (ragged || cols) line(r, "for (int c = 0; c < %d; c++) xv[c] = %s ? Xb[rw][c * %d + gl] : 0.0%s;", C, keep, G, d->f32_suffix);
  else line(r, "for (int c = 0; c < %d; c++) xv[c] = Xb[rw][c * %d + gl];", C, G);
  set_kernel(r, kr);
  push(r);
  decompose(r, "o", 0, kr->rank, kr->shape);
  r->lanes = G, r->live = ragged ? "live" : NULL, r->share = true, r->share_each = lc.each;
  r->var_a = r->var_b = NULL;
  if (g->band_flags) share_variance(r, kr, row_summand(r, kr, r->band_x));
  warp_row_steps(r, kr, d->unroll, lc.each, lc.col, r->band_x, "xv[c]", NULL, -1);
  r->lanes = 0, r->live = NULL, r->share = false, r->share_each = NULL, r->var_a = r->var_b = NULL;
  pop(r);
  set_kernel(r, kc);
  close_block(r);
  hk_isolate(r, floor);
}

static void band_hook(void *rv, int phase) {
  R *r = rv;
  const Dialect *d = r->d;
  const CgGemm *g = r->band;
  const Kernel *kc = r->band_kc, *kr = r->band_kr;
  int x = r->band_x;
  if (phase == 0 && g->band_share) {  /* an output of the tile: x's value in the tile's Xb */
    line(r, "Xb[(int)(mq - tm0)][(int)(nq - tn0)] = s%d;", x);
    return;
  }
  if (phase == 0) {  /* an output of the tile: x's value in the row buffer */
    line(r, "kiln_bv%d[mq * %s + nq] = s%d;", kc->id, lit(r, g->N), x);
    return;
  }
  if (g->band_share) {
    band_share_steps(r);
    return;
  }
  const char *I = ix(r), *F = vt(r, KILN_F32), *T = d->thread_id;
  int64_t J = g->N, nt = (g->N + g->bn - 1) / g->bn;
  int G = cg_pair_band_lanes(g), C = (int)((J + G - 1) / G), RP = CG_GEMM_THREADS / G;
  char slot[64], meet[CG_ARRIVAL_LINES][256];
  snprintf(slot, sizeof slot, "kiln_band%d[tile / %lld]", kc->id, (long long)nt);
  cg_arrival_lines(d, slot, (int)nt, r->o->one_fence, meet);
  for (int m = 0; m < CG_ARRIVAL_LINES; m++) line(r, "%s", meet[m]);
  line(r, "if (%s == 0) %s = 0%s;", T, slot, d->uint_suffix);
  LaneColumns lc = lane_columns(G, "gl", J);
  const char *col = lc.col, *cond = lc.cond, *each = lc.each;
  int floor = hk_isolate(r, -1);  /* KR's vars take KC's names */
  line(r, "{");
  r->indent++;
  /* G lanes a row, RP rows at once; every lane of a warp takes part in its groups' shuffles, so a row
   * past the last (in the last band of a ragged M) is computed on the last row and stores nothing */
  line(r, "const int gl = %s %% %d, rw = %s / %d;", T, G, T, G);
  line(r, "for (int r0 = 0; r0 < %d; r0 += %d) {", g->bm, RP);
  r->indent++;
  bool ragged = g->M % g->bm != 0;
  if (ragged) {
    line(r, "const bool live = tm0 + r0 + rw < %s;", lit(r, g->M));
    line(r, "const %s o = live ? tm0 + r0 + rw : %s;", I, lit(r, g->M - 1));
  } else line(r, "const %s o = tm0 + r0 + rw;", I);
  line(r, "%s xv[%d];", F, C);
  char addr[128], ld[192];
  snprintf(addr, sizeof addr, "kiln_bv%d + o * %lld + c * %d + gl", kc->id, (long long)J, G);
  snprintf(ld, sizeof ld, d->cached_load, addr);
  line(r, "%s", d->unroll);
  if (J % G) line(r, "for (int c = 0; c < %d; c++) xv[c] = %s ? %s : 0.0%s;", C, cond, ld, d->f32_suffix);
  else line(r, "for (int c = 0; c < %d; c++) xv[c] = %s;", C, ld);
  set_kernel(r, kr);
  push(r);
  decompose(r, "o", 0, kr->rank, kr->shape);
  r->lanes = G, r->live = ragged ? "live" : NULL;
  warp_row_steps(r, kr, d->unroll, each, col, x, "xv[c]", NULL, -1);
  r->lanes = 0, r->live = NULL;
  pop(r);
  set_kernel(r, kc);
  close_block(r);
  close_block(r);
  hk_isolate(r, floor);
}

static void render_pair_banded(R *r, const Kernel *kc, const Kernel *kr, int x) {
  CgGemm g;
  bool ok = cg_pair_banded(r->p, kr, r->d, r->o, &g);  /* render_pair asked */
  KILN_ASSERT(ok);
  if (!ok) return;
  r->band = &g, r->band_kc = kc, r->band_kr = kr, r->band_x = x;
  set_kernel(r, kc);
  CgEmit em = emit_hooks(r);
  em.band = band_hook;
  cg_render_gemm(r->p, kc, &g, &em);
  r->band = NULL;
}

/* ---- rows at the head of their contraction's tiles (plan.h Kernel.headed) ----
 * KC's GEMM tiles as usual, but each tile first runs KR's steps over its bm rows, G lanes a row
 * (the band tail's groups: 8 lanes, the 32 rows in one pass; in a cluster of CL column tiles
 * sharing the rows, bm / CL rows a block, a warp a row), every point of each row, and puts
 * P, the row's per-point value KC reads as its A, into Ph[k][m]; the k loop then reads A's k-tiles
 * in Ph where they lie. What KR stores for other kernels (P for a residual, statistics) the tiles
 * of the first column and span store. A row past M (a ragged last tile) is computed on row M - 1;
 * it stores nothing, and its products land in outputs nobody stores. */
/* The row's value worth keeping where a row is read from memory (a headed chain's KR, in Ph): the
 * body E of KR's first accumulation (a layernorm's x, or its sum with a residual) when every later
 * step reads E's loads only through E; NULL: none. */
/* The stages e loads (at most max; memoised on the DAG). false: out of memory or too many. */
static bool load_stages(const Expr *e, int *st, int *n, int max, Memo **seen, int *ns, int *cap) {
  int known;
  if (seen_find(*seen, *ns, e, &known)) return true;
  if (!seen_add(seen, ns, cap, e, 0)) return false;
  if (e->kind == EX_LOAD) {
    for (int i = 0; i < *n; i++)
      if (st[i] == e->src) return true;
    if (*n == max) return false;
    st[(*n)++] = e->src;
    return true;
  }
  for (int i = 0; i < e->n_args; i++)
    if (!load_stages(e->args[i], st, n, max, seen, ns, cap)) return false;
  return true;
}

static const Expr *head_input(const Kernel *kr) {
  const Item *first = NULL;
  for (int i = 0; i < kr->n_items && !first; i++)
    if (kr->items[i].kind == IT_ACC && kr->items[i].step == 0) first = &kr->items[i];
  if (!first || !dtype_is_float(first->body->dtype) || kr->n_steps < 3) return NULL;
  const Expr *E = first->body;
  enum { MAXS = 16 };
  int st[MAXS], n = 0, ns = 0, cap = 0;
  Memo *seen = NULL;
  bool ok = load_stages(E, st, &n, MAXS, &seen, &ns, &cap);
  kiln_free(seen);
  for (int x = 0; ok && x < n; x++) {  /* every later step reads stage st[x] only through E */
    seen = NULL, ns = cap = 0;
    for (int i = 0; ok && i < kr->n_items; i++)
      if (kr->items[i].step > 0 && !(kr->items[i].step & 1)) ok = !(reads_through(kr->items[i].body, E, st[x], &seen, &ns, &cap) & 1);
    kiln_free(seen);
  }
  return ok ? E : NULL;
}

static void head_hook(void *rv) {
  R *r = rv;
  const Dialect *d = r->d;
  const CgGemm *g = r->head;
  const Kernel *kr = r->head_kr, *kc = r->k;
  const char *I = ix(r), *T = d->thread_id;
  int64_t J = g->K, rows = (g->K + g->bk - 1) / g->bk * g->bk;
  int CL = g->head_cluster > 1 ? g->head_cluster : 1;  /* a cluster's blocks share the tile's rows */
  int G = cg_gemm_head_lanes(g), RP = CG_GEMM_THREADS / G;
  LaneColumns lc = lane_columns(G, "gl", J);
  line(r, "{");
  r->indent++;
  line(r, "const int gl = %s %% %d, rw = %s / %d;", T, G, T, G);
  if (rows > J)  /* k-tile points past K multiply as zeros */
    line(r, "for (int e = %s; e < %lld; e += %d) Ph[%lld + e / %d][e %% %d] = 0.0%s;", T, (long long)((rows - J) * g->bm),
         CG_GEMM_THREADS, (long long)J, g->bm, g->bm, d->f32_suffix);
  if (CL > 1)  /* this block's share of the rows: cluster rank hr's bm / CL (the tiles of a cluster are consecutive) */
    line(r, "const int hr = (int)(tile %% %d);", CL);
  if (CL > 1) line(r, "for (int r0 = hr * %d, r1 = r0 + %d; r0 < r1; r0 += %d) {", g->bm / CL, g->bm / CL, RP);
  else line(r, "for (int r0 = 0; r0 < %d; r0 += %d) {", g->bm, RP);
  r->indent++;
  /* the tile's row mq is KC's M vars; the row of P that A reads there, o, is the flat index of P's
   * row vars in them (cg_gemm_head_ok) */
  TE *te = r->p->te;
  const Stage *S = &te->stages[r->head_P];
  Expr *row = te_const_i(te, KILN_I64, 0);
  for (int v = 0; v + 1 < S->rank; v++)
    row = te_binary(te, TB_ADD, te_binary(te, TB_MUL, row, te_const_i(te, KILN_I64, S->shape[v])), g->a->args[v]);
  row = row ? te_simplify(te, row, r->lo, r->hi, r->nv) : NULL;
  if (!row) {
    r->st = kiln_fail(KILN_ERR_NO_MEMORY, "codegen: out of memory");
    return;
  }
  line(r, "%s o;", I);
  line(r, "{");
  r->indent++;
  line(r, "const %s mq = tm0 + r0 + rw < %s ? tm0 + r0 + rw : %s;", I, lit(r, g->M), lit(r, g->M - 1));
  push(r);
  digits(r, "mq", 0, kc->rank, kc->shape, g->role, CG_ROLE_M, g->M);
  char ox[256];
  emit(r, row, ox, sizeof ox);
  line(r, "o = %s;", ox);
  pop(r);
  close_block(r);
  char post[160];
  snprintf(post, sizeof post, "Ph[%s][r0 + rw] = s%d;", lc.col, r->head_P);
  int last = -1;
  for (int i = 0; i < kr->n_items; i++)
    if (kr->items[i].stage == r->head_P) last = kr->items[i].step;
  int floor = hk_isolate(r, -1);  /* KR's vars take KC's names */
  set_kernel(r, kr);
  push(r);
  decompose(r, "o", 0, kr->rank, kr->shape);
  /* the row's value read from memory once, kept in the lane's own slots of Ph, where P goes in the end
   * (in registers, with the loops unrolled to keep them there, the compiler hoisted every load and
   * gpt_tiny's headed kernels spilled at 128 registers) */
  char held_at[96];
  snprintf(held_at, sizeof held_at, "Ph[%s][r0 + rw]", lc.col);
  const Expr *held = head_input(kr);
  r->held = held && held->dtype == KILN_F32 ? held : NULL;  /* Ph's slots are f32 */
  r->held_at = held_at;
  /* what KR stores for other kernels, the first column's tiles store (in clusters, the first cluster's,
   * each its share of the rows; a row past M: nothing) */
  char live[96];
  snprintf(live, sizeof live, "tn0 %s %d && kbeg == 0%s", CL > 1 ? "<" : "==", CL > 1 ? CL * g->bn : 0,
           g->M % g->bm ? " && tm0 + r0 + rw < " : "");
  if (g->M % g->bm) snprintf(live + strlen(live), sizeof live - strlen(live), "%s", lit(r, g->M));
  r->lanes = G, r->live = live;
  /* the loops as the compiler unrolls them: fully unrolled, it hoisted every read into 255 registers; by
   * 8 (#pragma unroll 8), gpt_tiny ran 1.60x slower than two kernels on the H100, against 1.41x */
  warp_row_steps(r, kr, NULL, lc.each, lc.col, -1, NULL, post, last);
  r->lanes = 0, r->live = NULL, r->held = NULL, r->held_at = NULL;
  pop(r);
  set_kernel(r, kc);
  hk_isolate(r, floor);
  close_block(r);
  if (CL > 1) {  /* the other blocks' rows from their Ph; a second barrier before any block writes its Ph again */
    line(r, "%s", d->cluster_sync);
    char at[48], rank[48], ld[160];
    snprintf(at, sizeof at, "&Ph[e / %d][e %% %d]", g->bm, g->bm);
    snprintf(rank, sizeof rank, "(unsigned int)(e %% %d / %d)", g->bm, g->bm / CL);
    snprintf(ld, sizeof ld, d->cluster_load, at, rank);
    line(r, "for (int e = %s; e < %lld; e += %d)", T, (long long)(J * g->bm), CG_GEMM_THREADS);
    line(r, "  if (e %% %d / %d != hr) Ph[e / %d][e %% %d] = %s;", g->bm, g->bm / CL, g->bm, g->bm, ld);
    line(r, "%s", d->cluster_sync);
  }
  close_block(r);
}

static void render_headed(R *r) {
  const Kernel *kc = r->k, *kr = kc - 1;
  CgGemm g;
  if (!cg_gemm_headed(r->p, kc, r->o, &g)) {  /* planned for another backend: plan_options gives heads to cuda alone */
    r->st = kiln_fail(KILN_ERR_UNSUPPORTED, "codegen: kernel %d: the %s dialect has no rows at the head of a GEMM's tiles",
                      kc->id, r->d->name);
    return;
  }
  r->chain_lo = kr->id, r->chain_hi = kc->id;
  r->head = &g, r->head_kr = kr, r->head_P = g.a->src;  /* A is the load of P (cg_gemm_headed) */
  CgEmit em = emit_hooks(r);
  em.head = head_hook;
  cg_render_gemm(r->p, kc, &g, &em);
  r->head = NULL;
}

static void render_cpu_tile(R *r) {
  CgCpuTile t;
  bool ok = cg_cpu_tile_match(r->p, r->k, r->o, &t);
  KILN_ASSERT(ok);
  if (!ok) return;
  CgEmit em = emit_hooks(r);
  cg_render_cpu_tile(r->p, r->k, &t, &em);
}

/* A pooled chain (plan.h Kernel.pooled): the convolution k - 1 rendered direct, the pool k in
 * its epilogue; r's kernel is the convolution's while its items are emitted. */
static void render_cpu_pooled(R *r) {
  const Kernel *kp = r->k, *kc = kp - 1;
  CgCpuDirect c;
  /* the planner asked cg_cpu_pool_ok, for the C dialect */
  if (r->d->grid || !r->d->tile || !cg_cpu_pool_match(r->p, kc, kp, r->o, &c)) {
    r->st = kiln_fail(KILN_ERR_UNSUPPORTED, "codegen: kernels %d and %d were planned as a pooled convolution it cannot render",
                      kc->id, kp->id);
    return;
  }
  r->chain_lo = kc->id, r->chain_hi = kp->id;
  set_kernel(r, kc);
  CgEmit em = emit_hooks(r);
  cg_render_cpu_pooled(r->p, kc, kp, &c, &em);
  set_kernel(r, kp);
}

/* An expanded chain (plan.h Kernel.expanded): the window sum k rendered direct, the contraction
 * k - 1's value computed where its planes are filled. */
static void render_cpu_expanded(R *r) {
  const Kernel *kd = r->k, *ke = kd - 1;
  CgCpuDirect c;
  /* the planner asked cg_cpu_expand_ok, for the C dialect */
  if (r->d->grid || !r->d->tile || !cg_cpu_expand_match(r->p, ke, kd, r->o, &c)) {
    r->st = kiln_fail(KILN_ERR_UNSUPPORTED, "codegen: kernels %d and %d were planned as an expansion it cannot render",
                      ke->id, kd->id);
    return;
  }
  r->chain_lo = ke->id, r->chain_hi = kd->id;
  CgEmit em = emit_hooks(r);
  cg_render_cpu_direct(r->p, kd, &c, &em);
}

/* A channel-lanes convolution's pack (CgLaunch.pack): kiln_q<k>, over the kernel's np parameters
 * and the pack, writes its weights laid out; kiln_p<k>, a trampoline like the kernel's, calls it.
 * Nothing the kernel's body emitted is in scope. */
/* A kernel's buffer parameters b0 .. b<np-1>, comma-separated. */
static void buf_params(StrBuf *out, const Dialect *d, const Plan *p, const Kernel *k, const int *params, int np) {
  for (int i = 0; i < np; i++) {
    sb_puts(out, i ? ", " : "");
    sb_printf(out, d->buf_param, i < k->n_ins ? d->buf_const : "", d->store_type[p->te->stages[params[i]].dtype],
              d->buf_restrict, i);
  }
}

/* A loop dialect's trampoline `name`, calling fn with its first n arguments. */
static void trampoline(StrBuf *out, const Dialect *d, const char *name, const char *fn, int n) {
  sb_printf(out, d->trampoline, name, fn);
  for (int i = 0; i < n; i++) {
    sb_puts(out, i ? ", " : "");
    sb_printf(out, d->trampoline_arg, i);
  }
  sb_puts(out, d->trampoline_end);
}

static void render_pack(R *r, const CgCpuDirect *c, const CgCpuTile *t, int np, const int *params) {
  const Dialect *d = r->d;
  StrBuf *out = r->sb;
  int ki = r->k->id;
  sb_printf(out, "\n/* kernel %d's weights, laid out once */\nstatic void kiln_q%d(", ki, ki);
  buf_params(out, d, r->p, r->k, params, np);
  sb_printf(out, "%s%s *%s kiln_pk%s) {\n", np ? ", " : "", d->value_type[KILN_F32], d->buf_restrict, d->team_params);
  int floor = hk_isolate(r, -1);
  r->indent = 1;
  CgEmit em = emit_hooks(r);
  if (t) cg_render_cpu_tile_pack(r->p, r->k, t, &em);
  else cg_render_cpu_pack(r->p, r->k, c, &em);
  hk_isolate(r, floor);
  char pn[32], qn[32];
  snprintf(pn, sizeof pn, "kiln_p%d", ki);
  snprintf(qn, sizeof qn, "kiln_q%d", ki);
  sb_puts(out, "}\n");
  trampoline(out, d, pn, qn, np + 1);
}

/* c: what cg_cpu_direct_match found (its proof substitutes and simplifies the window: once) */
static void render_cpu_direct(R *r, const CgCpuDirect *c) {
  CgEmit em = emit_hooks(r);
  cg_render_cpu_direct(r->p, r->k, c, &em);
}

/* ---- narrow contractions a warp a row (CgGemm.narrow) ----
 * A contraction of at most 32 columns that no row kernel follows (a classifier's logits and their
 * bias) fills a fraction of each 32 x 32 tile (10 of its 32 columns), and over a deep K its blocks
 * come from splitting K: partial tiles, an arrival count and a second pass. Here it runs as a narrow
 * pair's contraction does (render_pair_warps): a block takes 8 rows, a warp each; lane l sums depth
 * points l, l + 32, ... for every column, and the columns meet in warp reductions. B, free of the
 * rows, is read once a block into shared memory, a depth point's N values a row of S = N | 1 floats
 * (an odd stride puts the lanes' consecutive depth points in distinct banks). Lane q then runs the
 * epilogue at column q. */
static void render_narrow(R *r, const CgGemm *g) {
  const Dialect *d = r->d;
  const Kernel *k = r->k;
  const char *I = ix(r), *F = vt(r, KILN_F32), *T = d->thread_id;
  int n = k->rank, W = CG_GEMM_THREADS / 32, S = cg_narrow_stride(g->N);
  long long J = (long long)g->N;
  char t[256];
  chain_part(r, k);
  stage_columns(r, k, g->b, g->K, J, S);
  line(r, "const int lane = %s %% 32, wp = %s / 32;", T, T);
  line(r, "for (%s ob = %s; ob < %s; ob += %s) {", I, d->block_id, lit(r, (g->M + W - 1) / W), d->grid_size);
  r->indent++;
  line(r, "const %s o = ob * %d + wp;", I, W);
  line(r, "if (o >= %s) break;  /* the whole warp: its shuffles stay full */", lit(r, g->M));
  push(r);
  decompose(r, "o", 0, n - 1, k->shape);
  line(r, "%s pa[%lld];", F, J);
  line(r, "%s", d->unroll);
  line(r, "for (int q = 0; q < %lld; q++) pa[q] = 0.0%s;", J, d->f32_suffix);
  if (g->K <= 32 * 32) line(r, "%s", d->unroll);  /* at most 32 steps a lane: their reads in flight together */
  line(r, "for (%s kq = lane; kq < %s; kq += 32) {", I, lit(r, g->K));
  r->indent++;
  push(r);
  decompose(r, "kq", n, k->n_red, k->red_shape);
  emit(r, g->a, t, sizeof t);
  line(r, "const %s fa = %s;", F, t);
  staged_products(r, S, J);
  pop(r);
  close_block(r);
  lane_columns_open(r, J);
  line(r, "const %s v%d = lane;", I, n - 1);
  acc_final(r, &k->items[g->acc_item], "xa");
  chain_values(r, k, 1);
  pop(r);
  close_block(r);
  pop(r);
  close_block(r);
}

static void render_gemm(R *r) {
  CgGemm g;
  bool ok = cg_gemm_match(r->p, r->k, r->o, &g);  /* cg_gpu_shape said so */
  KILN_ASSERT(ok);
  if (!ok) return;
  if (g.narrow) {
    render_narrow(r, &g);
    return;
  }
  CgEmit em = emit_hooks(r);
  cg_render_gemm(r->p, r->k, &g, &em);
}

/* ---- kernels ---- */

int cg_kernel_params(const Plan *p, const Kernel *k, int *stages) {
  int n = 0;
  if (k->chain < 0) return 0;  /* its buffers are its chain's last kernel's */
  for (int i = 0; i < k->n_ins; i++) stages[n++] = k->ins[i];
  /* a chain stores at its last kernel what any of its kernels stores (a pair's logits) */
  for (const Kernel *m = k->chain > 0 ? k - k->chain + 1 : k; m <= k; m++)
    for (int i = 0; i < m->n_items; i++)
      if (p->stored[m->items[i].stage]) stages[n++] = m->items[i].stage;
  return n;
}

int cg_kernel_params_max(const Kernel *k) {
  int n = k->n_ins + 1;
  for (const Kernel *m = k->chain > 0 ? k - k->chain + 1 : k; m <= k; m++) n += m->n_items;
  return n;
}

void cg_kernel_name(int k, bool trampoline, char buf[32]) {
  snprintf(buf, 32, "kiln_%c%d", trampoline ? 'e' : 'k', k);
}

void cg_team_for(const Dialect *d, const char *var, const char *count, bool parallel, char *out, size_t n) {
  const char *I = d->index_type;
  if (parallel)  /* static shares, as even as the count allows (each thread's bounds from its place) */
    snprintf(out, n, "for (%s %s = (%s) * kiln_tid / kiln_nt; %s < (%s) * (kiln_tid + 1) / kiln_nt; %s++) {", I, var, count,
             var, count, var);
  else
    snprintf(out, n, "for (%s %s = 0; %s < (kiln_tid ? 0 : %s); %s++) {", I, var, var, count, var);
}

/* A grid dialect's tokens for a kernel run as a phase of a launch group: the block and grid
 * it sees are the virtual k_bid of k_nbid its group hands it; no restrict on its buffers, since
 * a group's later phases may rewrite what an earlier one read (a read-only-cache load of a
 * buffer the same launch writes would be stale). */
static Dialect phase_dialect(const Dialect *d) {
  Dialect pd = *d;
  pd.kernel_prefix = d->phase_prefix;
  pd.block_id = "k_bid";
  pd.grid_size = "k_nbid";
  pd.thread_index = d->phase_thread_index;
  pd.thread_stride = d->phase_thread_stride;
  pd.block_bounds = pd.block_bounds_min = NULL;
  pd.buf_restrict = "";
  return pd;
}

kiln_status cg_render_kernel(const Plan *p, int ki, const Dialect *d, const CgOptions *o, const CgProgram *g,
                             StrBuf *out) {
  const Kernel *k = &p->kernels[ki];
  const TE *te = p->te;
  if (plan_kernel_opaque(k) || k->chain < 0) return KILN_OK;  /* a chain is rendered as its last kernel */
  Dialect pd;
  bool phase = g && ki < g->n_launch && g->launch[ki].group >= 0 && d->grid && d->phase_prefix;
  bool in_place = false;  /* it stores into a param it also reads: the two parameters alias */
  for (int i = 0; g && g->store_into && i < k->n_items; i++) in_place |= g->store_into[k->items[i].stage] >= 0;
  if (phase) pd = phase_dialect(d), d = &pd;
  else if (in_place) pd = *d, pd.buf_restrict = "", d = &pd;
  R r = { .p = p, .k = k, .d = d, .o = o, .sb = out, .cidx = "j", .guard_var = -1 };
  int *params = kiln_calloc((size_t)cg_kernel_params_max(k), sizeof *params);
  r.param_of = kiln_calloc((size_t)te->n_stages + 1, sizeof *r.param_of);
  if (!params || !r.param_of) {
    kiln_free(params);
    kiln_free(r.param_of);
    return kiln_fail(KILN_ERR_NO_MEMORY, "codegen: out of memory");
  }
  for (int i = 0; i < te->n_stages; i++) r.param_of[i] = -1;
  int np = cg_kernel_params(p, k, params);
  for (int i = 0; i < np; i++) r.param_of[params[i]] = i;
  for (int i = 0; i < k->rank; i++) { r.lo[i] = 0; r.hi[i] = k->shape[i] - 1; }
  for (int i = 0; i < k->n_red; i++) { r.lo[k->rank + i] = 0; r.hi[k->rank + i] = k->red_shape[i] - 1; }
  r.nv = k->rank + k->n_red;
  r.step = -1;
  r.chain_lo = r.chain_hi = -1;
  char name[32];
  cg_kernel_name(ki, false, name);
  CgGpuShape gs = cg_kernel_shape(p, k, d, o);
  CgGemm gemm;
  CgCpuDirect direct;
  /* a direct convolution (matched once: its proof adds to the TE); with channel lanes, its
   * weights' pack the kernel's last parameter */
  bool is_direct = !d->grid && d->tile && k->chain == 0 && k->kind != KN_POINTWISE && cg_cpu_direct_match(p, k, o, &direct);
  /* register tiles whose constant columns are laid out once: the same pack parameter */
  CgCpuTile tile;
  bool tile_once = !d->grid && d->tile && !is_direct && k->chain == 0 && !k->pooled && !k->expanded &&
                   gs != CG_GPU_GEMM && gs != CG_GPU_BLOCK_ROWS && gs != CG_GPU_VEC4 && k->kind != KN_POINTWISE &&
                   cg_cpu_tile_match(p, k, o, &tile) && tile.cols_once;
  bool packed = (is_direct && direct.channel_lanes) || tile_once;
  if (gs == CG_GPU_GEMM && cg_gemm_match(p, k, o, &gemm)) cg_gemm_globals(&gemm, ki, d, out);
  if (gs == CG_GPU_BLOCK_ROWS) cg_rows_globals(p, k, o, d, out);
  CgGemm band, head;
  bool headed = gs == CG_GPU_CHAIN && cg_gemm_headed(p, k, o, &head);
  if (headed) {
    cg_gemm_globals(&head, k->id, d, out);
    if (head.head_cluster > 1) sb_printf(out, "\n%s", d->cluster_helpers);
  } else if (gs == CG_GPU_CHAIN && cg_pair_banded(p, k, d, o, &band)) {
    cg_gemm_globals(&band, (k - 1)->id, d, out);  /* its names are KC's */
    band_globals(k, &band, d, out);
  } else if (gs == CG_GPU_CHAIN && k->chain == 2 && !k->headed && cg_pair_blocked(d) && cg_pair_wide(k)) cg_pair_globals(k, d, out);
  if (d->kernel_begin) sb_printf(out, d->kernel_begin, ki);
  if (gs == CG_GPU_GEMM && d->shared_at_module) cg_gemm_shared(&gemm, d, out);
  sb_printf(out, "\n/* kernel %d: %d items, %d steps */\n%s ", ki, k->n_items, k->n_steps, d->kernel_prefix);
  if (d->block_bounds && gs == CG_GPU_CHAIN) sb_printf(out, d->block_bounds, (int)CG_GEMM_THREADS), sb_puts(out, " ");
  else if (d->block_bounds && (gs == CG_GPU_BLOCK_ROWS || gs == CG_GPU_GEMM)) {
    CgRows ro = cg_rows_of(p, k, o);
    if (gs == CG_GPU_BLOCK_ROWS && ro.min_blocks > 1 && d->block_bounds_min)
      sb_printf(out, d->block_bounds_min, ro.threads * ro.rows, ro.min_blocks);
    else sb_printf(out, d->block_bounds, gs == CG_GPU_GEMM ? (int)CG_GEMM_THREADS : ro.threads * ro.rows);
    sb_puts(out, " ");
  }
  if (gs == CG_GPU_GEMM && gemm.cluster && !phase) {
    sb_printf(out, d->cluster_dims, gemm.splits);
    sb_puts(out, " ");
  }
  if (headed && head.head_cluster > 1 && !phase) {  /* never a phase: headed kernels join no group */
    sb_printf(out, d->cluster_dims, head.head_cluster);
    sb_puts(out, " ");
  }
  sb_printf(out, "%s(", name);
  if (phase) sb_printf(out, "%s k_bid, %s k_nbid%s", d->index_type, d->index_type, np ? ", " : "");
  buf_params(out, d, p, k, params, np);
  if (packed) sb_printf(out, "%sconst %s *%s kiln_pk", np ? ", " : "", d->value_type[KILN_F32], d->buf_restrict);
  if (!d->grid && d->team_params) sb_puts(out, d->team_params);
  sb_puts(out, ") {\n");
  const char *entry = o->dependent_launch == 2 ? d->kernel_entry_wait : o->dependent_launch ? d->kernel_entry : NULL;
  if (entry && !phase) sb_printf(out, "%s\n", entry);
  r.indent = 1;
  if (k->pooled) render_cpu_pooled(&r);
  else if (k->expanded) render_cpu_expanded(&r);
  else if (k->chain > 0) render_chain(&r);
  else if (gs == CG_GPU_GEMM) render_gemm(&r);
  else if (gs == CG_GPU_BLOCK_ROWS) render_block_rows(&r);
  else if (gs == CG_GPU_VEC4) render_vec4(&r);
  else if (k->kind == KN_POINTWISE) render_pointwise(&r);
  else if (is_direct) render_cpu_direct(&r, &direct);
  else if (!d->grid && d->tile && cg_cpu_tile_match(p, k, o, NULL)) render_cpu_tile(&r);
  else if (!d->grid && cg_window_match(p, k, o)) render_window(&r);
  else if (!d->grid && rowacc_fits(k, te) && rows_contiguous(&r)) render_rowacc(&r);
  else if (!d->grid && dot_fits(k, te) && !rows_contiguous(&r)) render_dot(&r);
  else if (!d->grid && rowsmall_fits(k)) render_rowsmall(&r);
  else render_general(&r, false);
  sb_puts(out, "}\n");
  if (!d->grid && d->trampoline) {
    char tn[32];
    cg_kernel_name(ki, true, tn);
    trampoline(out, d, tn, name, np + packed);
  }
  if (packed && !r.st) render_pack(&r, &direct, tile_once ? &tile : NULL, np, params);
  if (d->kernel_begin) {
    sb_printf(out, d->entry, name);
    for (int i = 0; i < np; i++) {
      sb_puts(out, i ? ", " : "");
      sb_printf(out, np <= d->direct_args ? d->entry_arg_direct : d->entry_arg, d->store_type[te->stages[params[i]].dtype], i);
    }
    sb_puts(out, d->entry_end);
    sb_puts(out, d->kernel_end);
  }
  kiln_free(params);
  kiln_free(r.param_of);
  kiln_free(r.memo);
  if (!r.st && out->failed) r.st = kiln_fail(KILN_ERR_NO_MEMORY, "codegen: out of memory");
  return r.st;
}

void cg_render_prelude(const Dialect *d, StrBuf *out) {
  const char *parts[4] = { d->prelude_head, d->prelude_scalar, d->prelude_math, d->prelude };
  for (int i = 0; i < 4; i++)
    if (parts[i]) sb_puts(out, parts[i]);
}

/* Position of stage s among a group's parameters. */
static int group_param(const CgLaunch *g, int s) {
  for (int i = 0; i < g->n_params; i++)
    if (g->params[i] == s) return i;
  return -1;
}

/* A group's entry. Grid dialects: a kernel over the union of its members' buffers that runs
 * each phase as one range of virtual blocks (the members' own grids, back to back) strided
 * over the launch's blocks, a grid barrier between phases (grid dialects only: a loop dialect's
 * team has no barrier inside a call, so its kernels are never grouped). */
static void render_group(const Plan *p, const Dialect *d, const CgOptions *o, const CgProgram *g, int gi, StrBuf *out) {
  const CgLaunch *G = &g->group[gi];
  const TE *te = p->te;
  const char *I = d->index_type;
  char bar[32];
  snprintf(bar, sizeof bar, "kiln_bar%d", gi);
  sb_printf(out, "\n/* group %d: %d phases */\n", gi, G->phase);
  if (G->cooperative) sb_printf(out, "%s %s %s[2];\n", d->global_qual, d->counter_type, bar);
  /* band waits (CgLaunch.band_waits): each phase's blocks in each band of rows, counted in (arrivals) by
   * the phase before a waiting phase, counted out (waiters) by the waiting phase */
  int64_t bands = 0, per_band[33] = { 0 };
  CgGemm gm;
  for (int m = 0; G->band_waits && m < g->n_launch; m++) {
    const CgLaunch *l = &g->launch[m];
    bool involved = (G->band_waits >> l->phase & 1u) || (l->phase + 1 < G->phase && (G->band_waits >> (l->phase + 1) & 1u));
    if (l->group != gi || !involved || !cg_gemm_match(p, &p->kernels[m], o, &gm)) continue;
    bands = (gm.M + gm.bm - 1) / gm.bm;  /* one M and bm for every member involved (band_waits_of) */
    per_band[l->phase] += l->grid / bands;
  }
  if (G->band_waits)
    sb_printf(out, "%s %s kiln_bc%d[%lld], kiln_bo%d[%lld];\n", d->global_qual, d->counter_type, gi, (long long)(G->phase * bands), gi,
              (long long)(G->phase * bands));
  sb_printf(out, "%s ", d->kernel_prefix);
  int first = cg_group_first(g, gi), ask = o->group_blocks;
  if (o->group_bounds && first >= 0 && o->group_bounds[first]) ask = o->group_bounds[first];
  if (d->block_bounds_min && ask > 0) sb_printf(out, d->block_bounds_min, G->block, ask), sb_puts(out, " ");
  else if (d->block_bounds) sb_printf(out, d->block_bounds, G->block), sb_puts(out, " ");
  sb_printf(out, "%s(", G->name);
  for (int i = 0; i < G->n_params; i++) {
    bool written = false;  /* read-only in every member: const */
    for (int m = 0; m < g->n_launch; m++) {
      const CgLaunch *l = &g->launch[m];
      if (l->group != gi) continue;
      const Kernel *k = &p->kernels[m];
      for (int j = k->n_ins; j < l->n_params; j++) written |= l->params[j] == G->params[i];
    }
    sb_puts(out, i ? ", " : "");
    sb_printf(out, d->buf_param, written ? "" : d->buf_const, d->store_type[te->stages[G->params[i]].dtype], "", i);
  }
  sb_puts(out, ") {\n");
  const char *entry = o->dependent_launch == 2 ? d->kernel_entry_wait : o->dependent_launch ? d->kernel_entry : NULL;
  if (entry) sb_printf(out, "%s\n", entry);
  for (int ph = 0; ph < G->phase; ph++) {
    bool wait = G->band_waits >> ph & 1u, arrive = ph + 1 < G->phase && (G->band_waits >> (ph + 1) & 1u);
    if (ph && !wait) sb_printf(out, "  "), sb_printf(out, d->grid_barrier, bar), sb_puts(out, "\n");
    int64_t total = 0;
    for (int m = 0; m < g->n_launch; m++)
      if (g->launch[m].group == gi && g->launch[m].phase == ph) total += g->launch[m].grid;
    sb_printf(out, "  for (%s v = %s; v < %lld; v += %s) {\n", I, d->block_id, (long long)total, d->grid_size);
    int64_t at = 0;
    bool first = true;
    for (int m = 0; m < g->n_launch; m++) {
      const CgLaunch *l = &g->launch[m];
      if (l->group != gi || l->phase != ph) continue;
      char name[32];
      cg_kernel_name(m, false, name);
      sb_printf(out, "    %sif (v < %lld) %s", first ? "" : "else ", (long long)(at + l->grid), wait || arrive ? "{\n" : "");
      char c[96], n[32], q[32], o2[96];
      if ((wait || arrive) && cg_gemm_match(p, &p->kernels[m], o, &gm))  /* its block's band: gemm.c's tile order */
        sb_printf(out, "      const %s band = (v - %lld) / %lld %% %lld;\n", I, (long long)at, (long long)cg_gemm_band_blocks(&gm),
                  (long long)bands);
      if (wait) {
        snprintf(c, sizeof c, "kiln_bc%d + %lld + band", gi, (long long)((ph - 1) * bands));
        snprintf(o2, sizeof o2, "kiln_bo%d + %lld + band", gi, (long long)((ph - 1) * bands));
        snprintf(n, sizeof n, "%lld", (long long)per_band[ph - 1]);
        snprintf(q, sizeof q, "%lld", (long long)per_band[ph]);
        sb_puts(out, "      "), sb_printf(out, d->band_wait, c, n, o2, q), sb_puts(out, "\n");
      }
      if (wait || arrive) sb_puts(out, "      ");
      sb_printf(out, "%s(v - %lld, %lld", name, (long long)at, (long long)l->grid);
      for (int j = 0; j < l->n_params; j++) sb_printf(out, ", b%d", group_param(G, l->params[j]));
      sb_puts(out, ");\n");
      if (arrive) {
        snprintf(c, sizeof c, "kiln_bc%d + %lld + band", gi, (long long)(ph * bands));
        sb_puts(out, "      "), sb_printf(out, d->band_arrive, c), sb_puts(out, "\n");
      }
      if (wait || arrive) sb_puts(out, "    }\n");
      at += l->grid;
      first = false;
    }
    sb_puts(out, "  }\n");
  }
  sb_puts(out, "}\n");
}

/* ---- one body for kernels alike ----
 * The layers of a model repeat: kernel bodies that differ only in the names of their own
 * locals (accumulators a<stage>, values s<stage>, temporaries t<n>: the stage numbers
 * differ from layer to layer) are one function, and each such kernel's trampoline calls
 * the first. The compiler then sees each distinct body once (encoder4_d256: four layers). */

/* Is identifier id[0..n) one of the renderer's locals named by a number (a13, an13, ai13,
 * s13, t7, a13_2)? Parameters (b<i>) and vars (v<i>) keep their names: they are positional. */
static bool numbered_local(const char *id, size_t n) {
  size_t pre = 0;
  while (pre < n && id[pre] >= 'a' && id[pre] <= 'z') pre++;
  if (pre == 0 || pre == n || pre > 2 || id[pre] < '0' || id[pre] > '9') return false;  /* a number, a word, ... */
  for (size_t i = pre; i < n; i++)  /* a13, a13_2 (a dot tile's accumulators) */
    if ((id[i] < '0' || id[i] > '9') && id[i] != '_') return false;
  return !strncmp(id, "a", pre) || !strncmp(id, "an", pre) || !strncmp(id, "ai", pre) || !strncmp(id, "s", pre) ||
         !strncmp(id, "t", pre);
}

static bool ident_char(char c) { return c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

/* text[0..len) with each numbered local renamed by its order of first appearance ("@0"...). */
static void canonical(const char *text, size_t len, StrBuf *out) {
  const char *seen[512];
  size_t seen_n[512];
  int n_seen = 0;
  for (size_t i = 0; i < len;) {
    if (!ident_char(text[i])) {  /* the text up to the next identifier, as it is */
      size_t j = i;
      while (j < len && !ident_char(text[j])) j++;
      sb_printf(out, "%.*s", (int)(j - i), text + i);
      i = j;
      continue;
    }
    size_t j = i;
    while (j < len && ident_char(text[j])) j++;
    int id = -1;
    if (numbered_local(text + i, j - i)) {
      for (int q = 0; q < n_seen && id < 0; q++)
        if (seen_n[q] == j - i && !memcmp(seen[q], text + i, j - i)) id = q;
      if (id < 0 && n_seen < 512) seen[n_seen] = text + i, seen_n[n_seen] = j - i, id = n_seen++;
      if (id < 0) out->failed = true;  /* too many to tell apart: this body is kept as it is */
    }
    if (id >= 0) sb_printf(out, "@%d", id);
    else sb_printf(out, "%.*s", (int)(j - i), text + i);
    i = j;
  }
}

typedef struct Body { int kernel; StrBuf canon; } Body;

/* The prototype of the kernel function in kb (its signature line, "{" made ";"), so that a
 * backend may compile the source in pieces, each after the prelude and every prototype. */
static void prototype(const StrBuf *kb, const char *name, StrBuf *out) {
  const char *at = kb->s ? strstr(kb->s, name) : NULL;
  if (!at) return;
  const char *line = at;
  while (line > kb->s && line[-1] != '\n') line--;
  const char *end = strstr(at, ") {\n");
  if (end) sb_printf(out, "%.*s);\n", (int)(end - line), line);
}

kiln_status cg_render_plan(const Plan *p, const Dialect *d, const CgOptions *o, const CgProgram *g, StrBuf *out) {
  CgOptions dflt = cg_options_default();
  if (!o) o = &dflt;
  cg_render_prelude(d, out);
  bool share = !d->grid && d->trampoline;
  StrBuf protos = { 0 }, kernels = { 0 };
  StrBuf *dst = share ? &kernels : out;  /* loop dialects: prototypes, then the kernels */
  Body *bodies = share ? kiln_calloc((size_t)p->n_kernels + 1, sizeof *bodies) : NULL;
  int n_bodies = 0;
  kiln_status st = share && !bodies ? kiln_fail(KILN_ERR_NO_MEMORY, "codegen: out of memory") : KILN_OK;
  for (int k = 0; !st && k < p->n_kernels; k++) {
    if (!share) {
      st = cg_render_kernel(p, k, d, o, g, out);
      continue;
    }
    StrBuf kb = { 0 };
    st = cg_render_kernel(p, k, d, o, g, &kb);
    char name[32], tn[32];
    cg_kernel_name(k, false, name);
    cg_kernel_name(k, true, tn);
    const char *sig = kb.s ? strstr(kb.s, name) : NULL;
    const char *tramp = kb.s ? strstr(kb.s, tn) : NULL;
    while (tramp && tramp > kb.s && tramp[-1] != '\n') tramp--;
    StrBuf canon = { 0 };
    int same = -1;
    bool grouped = g && k < g->n_launch && g->launch[k].group >= 0;  /* its group calls kiln_k<k> itself */
    if (!st && sig && tramp && tramp > sig && !grouped) {
      sig += strlen(name);
      canonical(sig, (size_t)(tramp - sig), &canon);
      for (int b = 0; b < n_bodies && same < 0 && !canon.failed; b++)
        if (bodies[b].canon.len == canon.len && !memcmp(bodies[b].canon.s, canon.s, canon.len)) same = bodies[b].kernel;
    }
    if (same >= 0) {  /* only its trampoline, calling the body it shares */
      char first[32], call[40];
      cg_kernel_name(same, false, first);
      snprintf(call, sizeof call, "%s(", name);
      const char *at = strstr(tramp, call);
      sb_printf(dst, "\n/* kernel %d: %d items, %d steps, the body of kernel %d */\n", k, p->kernels[k].n_items,
                p->kernels[k].n_steps, same);
      if (at) sb_printf(dst, "%.*s%s%s", (int)(at - tramp), tramp, first, at + strlen(name));
      else dst->failed = true;
      sb_free(&canon);
    } else {
      if (kb.s) sb_puts(dst, kb.s);
      prototype(&kb, name, &protos);
      if (sig && tramp && !canon.failed && canon.s) bodies[n_bodies].kernel = k, bodies[n_bodies++].canon = canon;
      else sb_free(&canon);
    }
    if (kb.failed) dst->failed = true;
    sb_free(&kb);
  }
  for (int b = 0; b < n_bodies; b++) sb_free(&bodies[b].canon);
  kiln_free(bodies);
  if (share && !st) {
    if (protos.len) sb_printf(out, "\n/* every kernel's prototype: the source may be compiled in pieces */\n%s", protos.s);
    if (kernels.len) sb_puts(out, kernels.s);
    if (protos.failed || kernels.failed) out->failed = true;
  }
  sb_free(&protos);
  sb_free(&kernels);
  if (st) return st;
  for (int i = 0; g && i < g->n_group; i++) render_group(p, d, o, g, i, out);
  return out->failed ? kiln_fail(KILN_ERR_NO_MEMORY, "codegen: out of memory") : KILN_OK;
}
