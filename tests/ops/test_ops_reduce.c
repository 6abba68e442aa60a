/*
 * Reductions through the public API: sum, mean, max, min, prod, sum of squares, L1, L2 and
 * log-sum-exp over every non-empty set of axes of a rank-3 tensor, with keepdims 0 and 1,
 * negative axes, "all axes" (NULL / 0), float dtypes and the integer dtypes that make sense,
 * argmax/argmin with constructed ties (first vs last index), reductions over a zero-size
 * axis (sum 0, prod 1, mean NaN, max/min: documented below) and the bad-argument errors.
 * Expected values accumulate in double over an explicit walk of the input.
 */
#include "ops_util.h"

#define MAXN 256

static const struct { kiln_reduce_op op; const char *name; } rops[] = {
  {KILN_REDUCE_SUM, "sum"},         {KILN_REDUCE_MEAN, "mean"}, {KILN_REDUCE_MAX, "max"},
  {KILN_REDUCE_MIN, "min"},         {KILN_REDUCE_PROD, "prod"}, {KILN_REDUCE_SUM_SQUARE, "sum_square"},
  {KILN_REDUCE_L1, "l1"},           {KILN_REDUCE_L2, "l2"},     {KILN_REDUCE_LOG_SUM_EXP, "log_sum_exp"},
};
#define N_ROPS ((int)(sizeof rops / sizeof rops[0]))

/* Output shape of a reduction over mask (bit d: axis d reduced). */
static int red_shape(int r, const int64_t *si, unsigned mask, int keep, int64_t *so) {
  int ro = 0;
  for (int d = 0; d < r; d++) {
    if (mask & (1u << d)) {
      if (keep) so[ro++] = 1;
    } else {
      so[ro++] = si[d];
    }
  }
  return ro;
}

/* Reference: walks every input element and folds it into its output slot. */
static void red_ref(kiln_reduce_op op, int r, const int64_t *si, unsigned mask, const double *x, double *out, int64_t no) {
  double acc[MAXN];
  int64_t cnt[MAXN];
  for (int64_t o = 0; o < no; o++) {
    acc[o] = op == KILN_REDUCE_PROD ? 1 : op == KILN_REDUCE_MAX ? -INFINITY : op == KILN_REDUCE_MIN ? INFINITY : 0;
    cnt[o] = 0;
  }
  int64_t ni = ou_numel(r, si);
  for (int64_t i = 0; i < ni; i++) {
    int64_t idx[KILN_MAX_RANK], o = 0;
    ou_unravel(i, r, si, idx);
    for (int d = 0; d < r; d++)
      if (!(mask & (1u << d))) o = o * si[d] + idx[d];
    double v = x[i];
    switch (op) {
    case KILN_REDUCE_SUM: case KILN_REDUCE_MEAN: acc[o] += v; break;
    case KILN_REDUCE_MAX: acc[o] = v > acc[o] ? v : acc[o]; break;
    case KILN_REDUCE_MIN: acc[o] = v < acc[o] ? v : acc[o]; break;
    case KILN_REDUCE_PROD: acc[o] *= v; break;
    case KILN_REDUCE_SUM_SQUARE: case KILN_REDUCE_L2: acc[o] += v * v; break;
    case KILN_REDUCE_L1: acc[o] += fabs(v); break;
    case KILN_REDUCE_LOG_SUM_EXP: acc[o] += exp(v); break;
    default: break;
    }
    cnt[o]++;
  }
  for (int64_t o = 0; o < no; o++) {
    double a = acc[o];
    if (op == KILN_REDUCE_MEAN) a /= (double)cnt[o];
    if (op == KILN_REDUCE_L2) a = sqrt(a);
    if (op == KILN_REDUCE_LOG_SUM_EXP) a = log(a);
    out[o] = a;
  }
}

/* Inputs near 1 in magnitude, mixed signs, so prod and exp stay tame. Ints are nonzero
 * with |x| <= 3, so a product of four fits i8 and u8. */
static void fill(kiln_dtype t, double *v, int64_t n, unsigned long long seed) {
  for (int64_t i = 0; i < n; i++) {
    double x;
    if (ou_is_float(t)) x = test_rand(&seed) * 1.5;
    else if (ou_is_unsigned(t)) x = (double)((i * 7 + 3) % 3) + 1;
    else {
      x = (double)((i * 7 + 3) % 5) - 2;
      if (x == 0) x = 3;
    }
    v[i] = ou_as(t, x);
  }
}

static void red_case(kiln_reduce_op op, const char *name, kiln_dtype t, int r, const int64_t *si, int n_axes,
                     const int *axes, int keep, double rtol) {
  Case c;
  char ax[64] = "";
  for (int k = 0; k < n_axes; k++) snprintf(ax + strlen(ax), sizeof ax - strlen(ax), "%d,", axes[k]);
  cs_begin(&c, "reduce %s %s axes [%s] keepdims %d", name, ou_dt(t), n_axes ? ax : "all", keep);
  unsigned mask = 0;
  for (int k = 0; k < n_axes; k++) mask |= 1u << (axes[k] < 0 ? axes[k] + r : axes[k]);
  if (!n_axes) mask = (1u << r) - 1;
  int64_t so[KILN_MAX_RANK];
  int ro = red_shape(r, si, mask, keep, so);
  double x[MAXN], w[MAXN];
  int64_t ni = ou_numel(r, si), no = ou_numel(ro, so);
  fill(t, x, ni, 0x1234 + (unsigned)op * 77 + mask);
  red_ref(op, r, si, mask, x, w, no);
  for (int64_t o = 0; o < no; o++) w[o] = ou_is_float(t) ? ou_round_to(t, w[o]) : w[o];
  /* mean, l2 and log-sum-exp are compositions: on f16/bf16 their intermediates are rounded
   * to the half type, so allow two ulps rather than one */
  int composite = op == KILN_REDUCE_MEAN || op == KILN_REDUCE_L2 || op == KILN_REDUCE_LOG_SUM_EXP;
  if (composite && (t == KILN_F16 || t == KILN_BF16)) rtol = t == KILN_F16 ? 2e-3 : 1.6e-2;
  kiln_tensor xt = cs_in(&c, t, r, si, x), y = -1;
  COK(&c, kiln_graph_reduce(c.g, op, xt, n_axes, axes, keep, &y));
  if (cs_run1(&c, y)) {
    if (ou_is_float(t)) cs_expect_tol(&c, 0, t, ro, so, w, -1, rtol);
    else cs_expect_exact(&c, 0, t, ro, so, w);
  }
  cs_end(&c);
}

static void axis_set_cases(void) {
  int64_t s[3] = {2, 3, 4};
  for (int k = 0; k < N_ROPS; k++)
    for (unsigned mask = 1; mask < 8; mask++)
      for (int keep = 0; keep < 2; keep++) {
        int axes[3], n = 0;
        for (int d = 0; d < 3; d++)
          if (mask & (1u << d)) axes[n++] = d;
        red_case(rops[k].op, rops[k].name, KILN_F32, 3, s, n, axes, keep, 1e-5);
      }
}

static void variant_cases(void) {
  int64_t s[3] = {2, 3, 4}, s4[4] = {2, 1, 3, 2};
  for (int k = 0; k < N_ROPS; k++) {
    int neg[2] = {-1, -3}, unsorted[2] = {2, 0}, one[1] = {-2};
    red_case(rops[k].op, rops[k].name, KILN_F32, 3, s, 2, neg, 0, 1e-5);
    red_case(rops[k].op, rops[k].name, KILN_F32, 3, s, 2, unsorted, 1, 1e-5);
    red_case(rops[k].op, rops[k].name, KILN_F32, 3, s, 0, NULL, 0, 1e-5); /* all axes */
    red_case(rops[k].op, rops[k].name, KILN_F32, 3, s, 0, NULL, 1, 1e-5);
    red_case(rops[k].op, rops[k].name, KILN_F64, 4, s4, 1, one, 1, -1);
    red_case(rops[k].op, rops[k].name, KILN_F16, 3, s, 1, one, 0, -1);
    red_case(rops[k].op, rops[k].name, KILN_BF16, 3, s, 2, neg, 0, -1);
  }
  /* a rank-0 input reduces to itself */
  for (int k = 0; k < N_ROPS; k++) red_case(rops[k].op, rops[k].name, KILN_F32, 0, NULL, 0, NULL, 0, 1e-6);
  /* a longer axis: 1000 elements, one output (accumulation order matters less than width) */
  {
    Case c;
    cs_begin(&c, "reduce sum f32 over 1000 elements");
    int64_t sl[1] = {1000};
    static double x[1000];
    double w = 0;
    for (int i = 0; i < 1000; i++) x[i] = ou_round_f32(0.001 * (i % 17) + 1.0 / 3.0), w += x[i];
    kiln_tensor xt = cs_in(&c, KILN_F32, 1, sl, x), y = -1;
    int ax[1] = {0};
    COK(&c, kiln_graph_reduce(c.g, KILN_REDUCE_SUM, xt, 1, ax, 0, &y));
    w = ou_round_f32(w);
    if (cs_run1(&c, y)) cs_expect_tol(&c, 0, KILN_F32, 0, NULL, &w, 0, 2e-5);
    cs_end(&c);
  }
}

static void int_cases(void) {
  int64_t s[2] = {3, 4};
  static const kiln_dtype ts[8] = {KILN_I64, KILN_I32, KILN_I16, KILN_I8, KILN_U8, KILN_U16, KILN_U32, KILN_U64};
  static const kiln_reduce_op iops[4] = {KILN_REDUCE_SUM, KILN_REDUCE_MAX, KILN_REDUCE_MIN, KILN_REDUCE_PROD};
  static const char *const inames[4] = {"sum", "max", "min", "prod"};
  for (int d = 0; d < 8; d++)
    for (int k = 0; k < 4; k++) {
      int a1[1] = {1}, a0[1] = {0};
      red_case(iops[k], inames[k], ts[d], 2, s, 1, a1, 0, 0);
      red_case(iops[k], inames[k], ts[d], 2, s, 1, a0, 1, 0);
    }
  {
    /* i64 sums stay exact beyond 2^53 */
    Case c;
    cs_begin(&c, "reduce sum i64 exact beyond 2^53");
    int64_t s3[1] = {3};
    uint64_t raw[3] = {(UINT64_C(1) << 60) + 1, (UINT64_C(1) << 60) + 1, 1};
    uint64_t want = (UINT64_C(1) << 61) + 3;
    kiln_tensor x = cs_in_raw(&c, KILN_I64, 1, s3, raw), y = -1;
    COK(&c, kiln_graph_reduce(c.g, KILN_REDUCE_SUM, x, 0, NULL, 0, &y));
    if (cs_run1(&c, y)) cs_expect_raw(&c, 0, KILN_I64, 0, NULL, &want);
    cs_end(&c);
  }
}

/* argmax / argmin along one axis with ties; reference scans in order. */
static void arg_case(int is_max, kiln_dtype t, int r, const int64_t *si, const double *x, int axis, int keep, int last) {
  Case c;
  cs_begin(&c, "arg%s %s axis %d keepdims %d select_last %d", is_max ? "max" : "min", ou_dt(t), axis, keep, last);
  int a = axis < 0 ? axis + r : axis;
  int64_t so[KILN_MAX_RANK];
  int ro = red_shape(r, si, 1u << a, keep, so);
  int64_t no = ou_numel(ro, so), ni = ou_numel(r, si);
  double w[MAXN], best[MAXN];
  for (int64_t o = 0; o < no; o++) w[o] = -1, best[o] = 0;
  for (int64_t i = 0; i < ni; i++) {
    int64_t idx[KILN_MAX_RANK], o = 0;
    ou_unravel(i, r, si, idx);
    for (int d = 0; d < r; d++)
      if (d != a) o = o * si[d] + idx[d];
    double v = ou_as(t, x[i]);
    int better = w[o] < 0 || (is_max ? v > best[o] : v < best[o]) || (last && v == best[o]);
    if (better) best[o] = v, w[o] = (double)idx[a];
  }
  double xin[MAXN];
  for (int64_t i = 0; i < ni; i++) xin[i] = x[i];
  kiln_tensor xt = cs_in(&c, t, r, si, xin), y = -1;
  if (is_max) COK(&c, kiln_graph_argmax(c.g, xt, axis, keep, last, &y));
  else COK(&c, kiln_graph_argmin(c.g, xt, axis, keep, last, &y));
  if (cs_run1(&c, y)) cs_expect_exact(&c, 0, KILN_I64, ro, so, w);
  cs_end(&c);
}

static void arg_cases(void) {
  /* rows with ties at the max and at the min */
  int64_t s[2] = {3, 4};
  double x[12] = {1, 5, 5, 2, 7, 7, 7, 7, -1, -3, -3, -1};
  static const kiln_dtype ts[5] = {KILN_F32, KILN_F16, KILN_I32, KILN_I8, KILN_F64};
  for (int d = 0; d < 5; d++)
    for (int is_max = 0; is_max < 2; is_max++)
      for (int last = 0; last < 2; last++) {
        arg_case(is_max, ts[d], 2, s, x, 1, 0, last);
        arg_case(is_max, ts[d], 2, s, x, 0, 1, last);
        arg_case(is_max, ts[d], 2, s, x, -1, 1, last);
      }
  {
    /* hand-checked: the ties above give these indices */
    Case c;
    cs_begin(&c, "argmax/argmin hand values");
    kiln_tensor xt = cs_in(&c, KILN_F32, 2, s, x), o[4] = {-1, -1, -1, -1};
    COK(&c, kiln_graph_argmax(c.g, xt, 1, 0, 0, &o[0]));
    COK(&c, kiln_graph_argmax(c.g, xt, 1, 0, 1, &o[1]));
    COK(&c, kiln_graph_argmin(c.g, xt, 1, 0, 0, &o[2]));
    COK(&c, kiln_graph_argmin(c.g, xt, 1, 0, 1, &o[3]));
    int64_t s3[1] = {3};
    double w0[3] = {1, 0, 0}, w1[3] = {2, 3, 3}, w2[3] = {0, 0, 1}, w3[3] = {0, 3, 2};
    if (cs_run(&c, 4, o)) {
      cs_expect_exact(&c, 0, KILN_I64, 1, s3, w0);
      cs_expect_exact(&c, 1, KILN_I64, 1, s3, w1);
      cs_expect_exact(&c, 2, KILN_I64, 1, s3, w2);
      cs_expect_exact(&c, 3, KILN_I64, 1, s3, w3);
    }
    cs_end(&c);
  }
  {
    int64_t s3[3] = {2, 3, 2};
    double y[12] = {0, 9, 4, 9, 4, 1, 3, 3, 8, 3, 8, 0};
    for (int last = 0; last < 2; last++) {
      arg_case(1, KILN_F32, 3, s3, y, 1, 0, last);
      arg_case(0, KILN_U8, 3, s3, y, 1, 1, last);
      arg_case(1, KILN_I64, 3, s3, y, 0, 0, last);
    }
  }
}

/* Reductions over a zero-size axis. sum 0, prod 1, sum_square/l1/l2 0, mean 0/0 = NaN,
 * log_sum_exp log(0) = -inf; max/min of nothing has no value: kiln may give the identity
 * (-inf / +inf) or refuse at build time; either is accepted and what happened is printed. */
static void empty_cases(void) {
  int64_t s[2] = {3, 0}, so[1] = {3};
  int ax[1] = {1};
  for (int k = 0; k < N_ROPS; k++) {
    kiln_reduce_op op = rops[k].op;
    Case c;
    cs_begin(&c, "reduce %s over a zero-size axis", rops[k].name);
    if (op == KILN_REDUCE_MEAN && !strcmp(ou_backend(), "vulkan"))
      cs_known_bug(&c, "vulkan on lavapipe (Mesa 22.3) gives 0, not NaN, for the 0/0 of a mean over nothing");
    kiln_tensor x = cs_in(&c, KILN_F32, 2, s, NULL), y = -1;
    kiln_status st = kiln_graph_reduce(c.g, op, x, 1, ax, 0, &y);
    if (op == KILN_REDUCE_MAX || op == KILN_REDUCE_MIN) {
      if (st != KILN_OK) {
        if (!kiln_last_error()[0]) cs_fail(&c, "refused without a message");
        else printf("documented: reduce %s over an empty axis is refused: %s\n", rops[k].name, kiln_last_error());
      } else if (cs_run1(&c, y)) {
        double id = op == KILN_REDUCE_MAX ? -INFINITY : INFINITY, w[3] = {id, id, id};
        cs_expect(&c, 0, KILN_F32, 1, so, w);
        printf("documented: reduce %s over an empty axis gives %g\n", rops[k].name, id);
      }
    } else {
      if (st != KILN_OK) cs_fail(&c, "refused: %s: %s", kiln_status_name(st), kiln_last_error());
      else if (cs_run1(&c, y)) {
        double v = op == KILN_REDUCE_PROD ? 1 : op == KILN_REDUCE_MEAN ? NAN : op == KILN_REDUCE_LOG_SUM_EXP ? -INFINITY : 0;
        double w[3] = {v, v, v};
        cs_expect(&c, 0, KILN_F32, 1, so, w);
      }
    }
    cs_end(&c);
  }
  {
    /* zero-size kept axis: output is empty */
    Case c;
    cs_begin(&c, "reduce sum over a non-empty axis of an empty tensor");
    int64_t s0[2] = {0, 4}, o0[1] = {0};
    kiln_tensor x = cs_in(&c, KILN_F32, 2, s0, NULL), y = -1;
    COK(&c, kiln_graph_reduce(c.g, KILN_REDUCE_SUM, x, 1, ax, 0, &y));
    if (cs_run1(&c, y)) cs_expect(&c, 0, KILN_F32, 1, o0, NULL);
    cs_end(&c);
  }
  {
    Case c;
    cs_begin(&c, "argmax over a zero-size axis is refused");
    kiln_tensor x = cs_in(&c, KILN_F32, 2, s, NULL), y = -1;
    CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_argmax(c.g, x, 1, 0, 0, &y));
    cs_end(&c);
  }
}

static void reject_cases(void) {
  int64_t s[3] = {2, 3, 4};
  Case c;
  cs_begin(&c, "reduce errors");
  kiln_tensor x = cs_in(&c, KILN_F32, 3, s, NULL), b = cs_in(&c, KILN_BOOL, 3, s, NULL), y = -1;
  int big[1] = {3}, low[1] = {-4}, dup[2] = {1, -2}, ok[1] = {0}, nine[9] = {0};
  CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_reduce(c.g, KILN_REDUCE_SUM, x, 1, big, 0, &y));
  CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_reduce(c.g, KILN_REDUCE_SUM, x, 1, low, 0, &y));
  CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_reduce(c.g, KILN_REDUCE_MAX, x, 2, dup, 0, &y));
  CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_reduce(c.g, (kiln_reduce_op)KILN_REDUCE_COUNT, x, 1, ok, 0, &y));
  CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_reduce(c.g, KILN_REDUCE_SUM, b, 1, ok, 0, &y)); /* bool sum */
  CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_argmax(c.g, x, 3, 0, 0, &y));
  CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_argmin(c.g, x, -4, 0, 0, &y));
  CERR(&c, KILN_ERR_INVALID_ARG, kiln_graph_reduce(c.g, KILN_REDUCE_SUM, x, 9, nine, 0, &y));
  cs_end(&c);
}

int main(void) {
  if (!ou_backend_available()) return 0;
  axis_set_cases();
  variant_cases();
  int_cases();
  arg_cases();
  empty_cases();
  reject_cases();
  OU_MAIN_END("reduce");
}
