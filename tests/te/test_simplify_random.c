/*
 * test_simplify_random — soundness of index simplification. Random i64 expressions
 * over three vars (sums, constant multiples, floordiv and mod by constants of either
 * sign, min/max, comparisons and selects) are described here as plain trees, built
 * with the te constructors, simplified with random var ranges, and evaluated at every
 * point of those ranges by an evaluator written here, against the tree itself; so is each
 * one with its selects' common affine terms factored out (te_factor_selects).
 * A failure prints the seed and both expressions.
 */
#include "test.h"
#include "te/te.h"

enum { N_EXPRS = 3000, NV = 3 };
enum { K_CONST, K_VAR, K_ADD, K_SUB, K_MULC, K_DIVC, K_MODC, K_MIN, K_MAX, K_SEL, K_COUNT };

typedef struct Tree { int kind, cmp; int64_t c; struct Tree *a, *b, *x, *y; } Tree;

static Tree pool[4096];
static int n_pool;
static unsigned long long seed;

static int rnd(int n) { return (int)((test_rand(&seed) + 1) / 2 * n) % n; }

static int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static int64_t floor_mod(int64_t a, int64_t b) { return a - floor_div(a, b) * b; }

static int64_t nonzero_const(void) {
  static const int64_t cs[] = { 1, 2, 3, 4, 5, 6, 8, 12, -1, -2, -3, -4 };
  return cs[rnd(sizeof cs / sizeof cs[0])];
}

static Tree *leaf(int kind, int64_t c, Tree *a, Tree *b) {
  Tree *n = &pool[n_pool++];
  *n = (Tree){ .kind = kind, .c = c, .a = a, .b = b };
  return n;
}

/* What reshapes produce: (c1*v1 + c2*v2 + k) floordiv or mod a multiple of some ci. */
static Tree *gen_radix(void) {
  static const int64_t cs[] = { 1, 2, 3, 4, 6, 8 };
  int64_t c1 = cs[rnd(6)], c2 = cs[rnd(6)], m = (rnd(2) ? c1 : c2) * (1 + rnd(3)) * (rnd(5) ? 1 : -1);
  Tree *t = leaf(K_ADD, 0, leaf(K_MULC, c1, leaf(K_VAR, rnd(NV), 0, 0), 0), leaf(K_MULC, c2, leaf(K_VAR, rnd(NV), 0, 0), 0));
  if (rnd(2)) t = leaf(K_ADD, 0, t, leaf(K_CONST, rnd(9) - 4, 0, 0));
  if (rnd(2)) t = leaf(K_ADD, 0, t, leaf(K_VAR, rnd(NV), 0, 0));
  t = leaf(rnd(2) ? K_DIVC : K_MODC, m, t, 0);
  if (rnd(3) == 0) t = leaf(rnd(2) ? K_DIVC : K_MODC, cs[1 + rnd(5)], t, 0);
  return t;
}

static Tree *gen(int depth) {
  if (depth > 0 && rnd(4) == 0) return gen_radix();
  Tree *n = &pool[n_pool++];
  *n = (Tree){ .kind = depth <= 0 ? rnd(2) : rnd(K_COUNT) };
  switch (n->kind) {
  case K_CONST: n->c = rnd(21) - 10; break;
  case K_VAR: n->c = rnd(NV); break;
  case K_MULC: case K_DIVC: case K_MODC: n->a = gen(depth - 1); n->c = nonzero_const(); break;
  case K_SEL: n->cmp = rnd(6); n->x = gen(depth - 1); n->y = gen(depth - 1); /* fall through */
  default: n->a = gen(depth - 1); n->b = gen(depth - 1); break;
  }
  return n;
}

static int64_t cmp(int k, int64_t a, int64_t b) {
  switch (k) {
  case 0: return a < b;
  case 1: return a <= b;
  case 2: return a > b;
  case 3: return a >= b;
  case 4: return a == b;
  default: return a != b;
  }
}

static int64_t eval_node(const Tree *n, const int64_t *v) {
  switch (n->kind) {
  case K_CONST: return n->c;
  case K_VAR: return v[n->c];
  case K_ADD: return eval_node(n->a, v) + eval_node(n->b, v);
  case K_SUB: return eval_node(n->a, v) - eval_node(n->b, v);
  case K_MULC: return eval_node(n->a, v) * n->c;
  case K_DIVC: return floor_div(eval_node(n->a, v), n->c);
  case K_MODC: return floor_mod(eval_node(n->a, v), n->c);
  case K_MIN: { int64_t a = eval_node(n->a, v), b = eval_node(n->b, v); return a < b ? a : b; }
  case K_MAX: { int64_t a = eval_node(n->a, v), b = eval_node(n->b, v); return a > b ? a : b; }
  default: return cmp(n->cmp, eval_node(n->x, v), eval_node(n->y, v)) ? eval_node(n->a, v) : eval_node(n->b, v);
  }
}

static Expr *build(TE *te, const Tree *n) {
  Expr *k = te_const_i(te, KILN_I64, n->c);
  static const TeBinary cmps[] = { TB_LT, TB_LE, TB_GT, TB_GE, TB_EQ, TB_NE };
  switch (n->kind) {
  case K_CONST: return k;
  case K_VAR: return te_var(te, (int)n->c);
  case K_ADD: return te_binary(te, TB_ADD, build(te, n->a), build(te, n->b));
  case K_SUB: return te_binary(te, TB_SUB, build(te, n->a), build(te, n->b));
  case K_MULC: return te_binary(te, TB_MUL, build(te, n->a), k);
  case K_DIVC: return te_binary(te, TB_FLOORDIV, build(te, n->a), k);
  case K_MODC: return te_binary(te, TB_MOD, build(te, n->a), k);
  case K_MIN: return te_binary(te, TB_MIN, build(te, n->a), build(te, n->b));
  case K_MAX: return te_binary(te, TB_MAX, build(te, n->a), build(te, n->b));
  default:
    return te_select(te, te_binary(te, cmps[n->cmp], build(te, n->x), build(te, n->y)), build(te, n->a),
                     build(te, n->b));
  }
}

/* An evaluator for what the constructors and te_simplify produce, with the semantics
 * written out here (not te_eval_*). */
static int64_t eval_expr(const Expr *e, const int64_t *v, bool *ok) {
  switch (e->kind) {
  case EX_CONST: return e->c.i;
  case EX_VAR: return v[e->var];
  case EX_UNARY:
    if (e->op == TU_NEG) return -eval_expr(e->args[0], v, ok);
    if (e->op == TU_NOT) return !eval_expr(e->args[0], v, ok);
    break;
  case EX_SELECT: return eval_expr(e->args[0], v, ok) ? eval_expr(e->args[1], v, ok) : eval_expr(e->args[2], v, ok);
  case EX_BINARY: {
    int64_t a = eval_expr(e->args[0], v, ok), b = eval_expr(e->args[1], v, ok);
    switch (e->op) {
    case TB_ADD: return a + b;
    case TB_SUB: return a - b;
    case TB_MUL: return a * b;
    case TB_FLOORDIV: return b ? floor_div(a, b) : 0;
    case TB_MOD: return b ? floor_mod(a, b) : 0;
    case TB_MIN: return a < b ? a : b;
    case TB_MAX: return a > b ? a : b;
    case TB_LT: return a < b;
    case TB_LE: return a <= b;
    case TB_GT: return a > b;
    case TB_GE: return a >= b;
    case TB_EQ: return a == b;
    case TB_NE: return a != b;
    case TB_AND: return a && b;
    case TB_OR: return a || b;
    default: break;
    }
    break;
  }
  default: break;
  }
  *ok = false;
  return 0;
}

int main(void) {
  TE *te = kiln_calloc(1, sizeof *te);
  int bad = 0;
  for (int t = 0; t < N_EXPRS && bad < 5; t++) {
    seed = 0x9e3779b97f4a7c15ull ^ (unsigned long long)t * 1000003ull;
    unsigned long long start = seed;
    n_pool = 0;
    Tree *root = gen(1 + rnd(5));
    int64_t lo[NV], hi[NV];
    for (int i = 0; i < NV; i++) {
      lo[i] = rnd(3) == 0 ? -rnd(6) : 0;
      hi[i] = lo[i] + rnd(9);
    }
    Expr *built = build(te, root);
    Expr *simple = te_simplify(te, built, lo, hi, NV), *factored = built ? te_factor_selects(te, built) : NULL;
    CHECK(built && simple && factored);
    if (!built || !simple || !factored) break;
    int64_t v[NV];
    for (v[0] = lo[0]; v[0] <= hi[0]; v[0]++)
      for (v[1] = lo[1]; v[1] <= hi[1]; v[1]++)
        for (v[2] = lo[2]; v[2] <= hi[2]; v[2]++) {
          bool ok = true;
          int64_t want = eval_node(root, v), b = eval_expr(built, v, &ok), s = eval_expr(simple, v, &ok);
          int64_t f = eval_expr(factored, v, &ok);
          if (ok && b == want && s == want && f == want) continue;
          if (bad++ < 5) {
            fprintf(stderr, "seed %llu at (%lld,%lld,%lld): want %lld, built %lld, simplified %lld\n  built: ", start,
                    (long long)v[0], (long long)v[1], (long long)v[2], (long long)want, (long long)b, (long long)s);
            te_print_expr(built, stderr);
            fputs("\n  simplified: ", stderr);
            te_print_expr(simple, stderr);
            fprintf(stderr, "\n  factored (%lld): ", (long long)f);
            te_print_expr(factored, stderr);
            fputc('\n', stderr);
          }
          v[0] = hi[0]; v[1] = hi[1]; v[2] = hi[2];  /* one report per expression */
        }
  }
  CHECK(bad == 0);
  te_free(te);
  TEST_MAIN_END();
}
