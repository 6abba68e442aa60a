/*
 * test_differential.c — random graphs run four ways: fused on cpu, eager on cpu, fused with
 * every kernel in launch groups (grid_sync 3: phases behind grid barriers, or waiting for their band
 * of rows where GEMM tiles read only their own rows of the phase before, on
 * $KILN_DIFF_BACKEND, cuda on a GPU machine; the cpu forms no groups), and on ref (the oracle);
 * all must agree within tolerance, with no host fallbacks. Batched graphs make wide phases of
 * independent kernels whose buffers the memory plan reuses: the groups' conflict analysis is
 * what keeps them apart.
 *
 * The generator grows each graph from one or two inputs with random ops: unary,
 * broadcasting binary, movement (transpose, reshape, slice, concat, expand), reductions
 * (sum, mean, max over a random axis, keepdims either way), matmul, softmax, casts to
 * f64 and i32 (an integer branch with add/mul/max/neg/abs and integer sums). Shapes are
 * small, so compile time dominates: graphs are batched, many independent graphs in one
 * kiln graph, so one compile covers a batch.
 *
 * The grouped run also takes every chain the planner finds (attention chains, and pairs of a
 * narrow matmul and the softmax over its rows).
 *
 * KILN_SEED=S: base seed (graph i of the run uses S + i; a failure prints its seed, and
 * KILN_SEED=<that seed> KILN_DIFF_GRAPHS=1 replays exactly that graph). KILN_DIFF_GRAPHS:
 * how many graphs (default 520; 130 under sanitizers, KILN_SANITIZED=1, for time).
 */
#include "test.h"

#include "base/base.h"

#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

enum { BATCH = 40, MAX_T = 64, MAX_IO = 8 * BATCH };

typedef struct Gen {
  unsigned long long s;
  kiln_graph *g;
  kiln_tensor pool[MAX_T];
  int n;
} Gen;

static int rnd(Gen *G, int n) {
  G->s ^= G->s >> 12; G->s ^= G->s << 25; G->s ^= G->s >> 27;
  return (int)(((G->s * 2685821657736338717ull) >> 33) % (unsigned)n);
}

typedef struct Io {  /* inputs and outputs of the whole batch */
  void *in[MAX_IO]; size_t in_bytes[MAX_IO]; int n_in;
  kiln_dtype out_t[MAX_IO]; size_t out_n[MAX_IO]; int out_graph[MAX_IO]; int n_out;
  unsigned long long seed[BATCH];
} Io;

static void info(Gen *G, kiln_tensor t, int *rank, int64_t *shape, kiln_dtype *dt) {
  OK(kiln_tensor_shape(G->g, t, rank, shape));
  OK(kiln_tensor_dtype(G->g, t, dt));
}

static int64_t numel(int rank, const int64_t *s) {
  int64_t n = 1;
  for (int i = 0; i < rank; i++) n *= s[i];
  return n;
}

static kiln_tensor new_input(Gen *G, Io *io, kiln_dtype dt, int rank, const int64_t *shape) {
  kiln_tensor t = -1;
  OK(kiln_graph_input(G->g, NULL, dt, rank, shape, &t));
  int64_t n = numel(rank, shape);
  size_t es = kiln_dtype_size(dt);
  void *d = malloc((size_t)n * es + 1);
  for (int64_t i = 0; i < n; i++) {
    double v = (rnd(G, 4001) - 2000) / 1000.0;
    if (dt == KILN_F32) ((float *)d)[i] = (float)v;
    else if (dt == KILN_F64) ((double *)d)[i] = v;
    else ((int32_t *)d)[i] = (int32_t)(v * 3);
  }
  io->in[io->n_in] = d;
  io->in_bytes[io->n_in++] = (size_t)n * es;
  return t;
}

static kiln_tensor pick(Gen *G) { return G->pool[rnd(G, G->n)]; }
static void put(Gen *G, kiln_tensor t) { if (t >= 0 && G->n < MAX_T) G->pool[G->n++] = t; }

/* A shape that broadcasts against (rank, s): some dims set to 1, maybe fewer leading dims. */
static void broadcast_shape(Gen *G, int rank, const int64_t *s, int *br, int64_t *bs) {
  int drop = rank > 1 ? rnd(G, 2) : 0;
  *br = rank - drop;
  for (int i = 0; i < *br; i++) bs[i] = rnd(G, 3) == 0 ? 1 : s[i + drop];
}

static void step_float(Gen *G, Io *io) {
  kiln_tensor a = pick(G), out = -1;
  int rank;
  int64_t s[KILN_MAX_RANK];
  kiln_dtype dt;
  info(G, a, &rank, s, &dt);
  if (dt == KILN_I32) {  /* integer branch */
    switch (rnd(G, 6)) {
    case 0: { kiln_tensor b; OK(kiln_graph_binary(G->g, KILN_ADD, a, a, &b)); OK(kiln_graph_binary(G->g, KILN_MUL, b, a, &out)); break; }
    case 1: OK(kiln_graph_unary(G->g, rnd(G, 2) ? KILN_NEG : KILN_ABS, a, &out)); break;
    case 2: { int ax = rank ? rnd(G, rank) : 0; OK(kiln_graph_reduce(G->g, KILN_REDUCE_SUM, a, rank ? 1 : 0, &ax, rnd(G, 2), &out)); break; }
    case 3: { kiln_tensor b; OK(kiln_graph_unary(G->g, KILN_NEG, a, &b)); OK(kiln_graph_binary(G->g, KILN_MAX, a, b, &out)); break; }
    default: OK(kiln_graph_cast(G->g, a, KILN_F32, &out)); break;
    }
    put(G, out);
    return;
  }
  int op = rnd(G, 16);
  switch (op) {
  case 0: {
    static const kiln_unary_op u[] = { KILN_NEG, KILN_ABS, KILN_TANH, KILN_SIGMOID, KILN_RELU, KILN_SIN, KILN_COS,
                                       KILN_FLOOR, KILN_GELU_TANH, KILN_ERF };
    OK(kiln_graph_unary(G->g, u[rnd(G, 10)], a, &out));
    break;
  }
  case 1: {  /* exp(tanh a), log(1 + a*a), sqrt(|a|) */
    kiln_tensor t, one, sq;
    int k = rnd(G, 3);
    if (k == 0) { OK(kiln_graph_unary(G->g, KILN_TANH, a, &t)); OK(kiln_graph_unary(G->g, KILN_EXP, t, &out)); }
    else if (k == 1) {
      OK(kiln_graph_scalar(G->g, dt, 1.0, &one)); OK(kiln_graph_binary(G->g, KILN_MUL, a, a, &sq));
      OK(kiln_graph_binary(G->g, KILN_ADD, one, sq, &t)); OK(kiln_graph_unary(G->g, KILN_LOG, t, &out));
    } else { OK(kiln_graph_unary(G->g, KILN_ABS, a, &t)); OK(kiln_graph_unary(G->g, KILN_SQRT, t, &out)); }
    break;
  }
  case 2: case 3: case 4: {  /* binary with broadcasting against a new input or a pool tensor */
    static const kiln_binary_op b[] = { KILN_ADD, KILN_SUB, KILN_MUL, KILN_MAX, KILN_MIN };
    int br;
    int64_t bs[KILN_MAX_RANK];
    broadcast_shape(G, rank, s, &br, bs);
    kiln_tensor other = rnd(G, 2) ? new_input(G, io, dt, br, bs) : a;
    if (rnd(G, 2)) OK(kiln_graph_binary(G->g, b[rnd(G, 5)], a, other, &out));
    else OK(kiln_graph_binary(G->g, b[rnd(G, 5)], other, a, &out));
    break;
  }
  case 5: {  /* a / (1 + b*b) */
    kiln_tensor b = pick(G), one, sq, den;
    int rb; int64_t sb[KILN_MAX_RANK]; kiln_dtype db;
    info(G, b, &rb, sb, &db);
    if (db != dt) b = a;
    OK(kiln_graph_scalar(G->g, dt, 1.0, &one)); OK(kiln_graph_binary(G->g, KILN_MUL, b, b, &sq));
    OK(kiln_graph_binary(G->g, KILN_ADD, one, sq, &den));
    if (kiln_graph_binary(G->g, KILN_DIV, a, den, &out) != KILN_OK) out = -1;
    break;
  }
  case 6: if (rank >= 2) {
    int perm[KILN_MAX_RANK];
    for (int i = 0; i < rank; i++) perm[i] = i;
    for (int i = rank - 1; i > 0; i--) { int j = rnd(G, i + 1), t = perm[i]; perm[i] = perm[j]; perm[j] = t; }
    OK(kiln_graph_transpose(G->g, a, perm, &out));
  } break;
  case 7: {  /* reshape: flatten, or split the flat size */
    int64_t n = numel(rank, s), ns[3];
    int nr = 1;
    ns[0] = n;
    if (n % 2 == 0 && rnd(G, 2)) { nr = 2; ns[0] = 2; ns[1] = n / 2; }
    if (nr == 2 && ns[1] % 3 == 0 && rnd(G, 2)) { nr = 3; ns[1] = 3; ns[2] = n / 6; }
    OK(kiln_graph_reshape(G->g, a, nr, ns, &out));
    break;
  }
  case 8: if (rank >= 1) {  /* slice one axis, step 1, 2 or -1 */
    int ax = rnd(G, rank);
    int64_t st = rnd(G, (int)s[ax]), en = st + 1 + rnd(G, (int)(s[ax] - st)), step = 1;
    int k = rnd(G, 3);
    if (k == 1) step = 2;
    if (k == 2) { step = -1; int64_t t = st; st = en - 1; en = t - 1; if (en < 0) en = -(s[ax] + 1); }
    OK(kiln_graph_slice(G->g, a, 1, &st, &en, &ax, &step, &out));
  } break;
  case 9: if (rank >= 1) {  /* reduce one axis */
    static const kiln_reduce_op r[] = { KILN_REDUCE_SUM, KILN_REDUCE_MEAN, KILN_REDUCE_MAX, KILN_REDUCE_MIN };
    int ax = rnd(G, rank);
    OK(kiln_graph_reduce(G->g, r[rnd(G, 4)], a, 1, &ax, rnd(G, 2), &out));
  } break;
  case 10: if (rank == 2) {  /* matmul with a new [k, n] input; n >= 8 takes the row-of-accumulators loop */
    static const int64_t ns[] = { 1, 2, 3, 5, 8, 9, 16, 24 };
    int64_t ws[2] = { s[1], ns[rnd(G, 8)] };
    kiln_tensor w = new_input(G, io, dt, 2, ws);
    OK(kiln_graph_matmul(G->g, a, w, &out));
  } else {  /* a fresh dense layer: relu(X @ W + b), k a multiple of 4 or not, m a multiple of 4 or not */
    static const int64_t ks[] = { 3, 4, 8, 12 }, ms[] = { 1, 4, 5, 8, 12 };
    int64_t xs[2] = { ms[rnd(G, 5)], ks[rnd(G, 4)] }, ws[2] = { xs[1], rnd(G, 2) ? 8 : 16 };
    kiln_tensor x = new_input(G, io, KILN_F32, 2, xs), w;
    if (rnd(G, 2)) w = new_input(G, io, KILN_F32, 2, ws);
    else {  /* x @ W^T with W stored [out, in], as ONNX Linear exports it */
      int64_t wt[2] = { ws[1], ws[0] };
      int perm[2] = { 1, 0 };
      OK(kiln_graph_transpose(G->g, new_input(G, io, KILN_F32, 2, wt), perm, &w));
    }
    kiln_tensor b = new_input(G, io, KILN_F32, 1, &ws[1]), mm, sum;
    OK(kiln_graph_matmul(G->g, x, w, &mm));
    OK(kiln_graph_binary(G->g, KILN_ADD, mm, b, &sum));
    OK(kiln_graph_unary(G->g, KILN_RELU, sum, &out));
  } break;
  case 11: if (rank >= 1) OK(kiln_graph_softmax(G->g, a, -1, &out)); break;
  case 14: {  /* a classifier's rows: softmax(X @ W + b) over at most 32 columns (a pair on cuda) */
    static const int64_t ms[] = { 1, 3, 8, 13 }, ks[] = { 3, 8, 40, 67 }, ns[] = { 2, 5, 10, 17, 32 };
    int64_t xs[2] = { ms[rnd(G, 4)], ks[rnd(G, 4)] }, ws[2] = { xs[1], ns[rnd(G, 5)] };
    kiln_tensor mm, sum, b = new_input(G, io, KILN_F32, 1, &ws[1]);
    OK(kiln_graph_matmul(G->g, new_input(G, io, KILN_F32, 2, xs), new_input(G, io, KILN_F32, 2, ws), &mm));
    OK(kiln_graph_binary(G->g, KILN_ADD, mm, b, &sum));
    OK(kiln_graph_softmax(G->g, sum, -1, &out));
  } break;
  case 12: if (rank >= 1) {  /* concat with itself */
    kiln_tensor xs[2] = { a, a };
    OK(kiln_graph_concat(G->g, 2, xs, rnd(G, rank), &out));
  } break;
  case 13: if (rank < 3) {  /* expand with a new leading dim */
    int64_t es[KILN_MAX_RANK];
    es[0] = 1 + rnd(G, 3);
    for (int i = 0; i < rank; i++) es[i + 1] = s[i];
    OK(kiln_graph_expand(G->g, a, rank + 1, es, &out));
  } break;
  default: {  /* a cast: to f64 and back, or to i32 */
    int k = rnd(G, 3);
    kiln_tensor t;
    if (k == 0 && dt == KILN_F32) OK(kiln_graph_cast(G->g, a, KILN_F64, &out));
    else if (k == 1 && dt == KILN_F64) OK(kiln_graph_cast(G->g, a, KILN_F32, &out));
    else { OK(kiln_graph_unary(G->g, KILN_FLOOR, a, &t)); OK(kiln_graph_cast(G->g, t, KILN_I32, &out)); }
    break;
  }
  }
  put(G, out);
}

static void add_output(Gen *G, Io *io, kiln_tensor t, int graph) {
  int rank; int64_t s[KILN_MAX_RANK]; kiln_dtype dt;
  info(G, t, &rank, s, &dt);
  OK(kiln_graph_output(G->g, t, NULL));
  io->out_t[io->n_out] = dt;
  io->out_n[io->n_out] = (size_t)numel(rank, s);
  io->out_graph[io->n_out++] = graph;
}

/* One random graph (seed) added to G->g. */
static void gen_graph(Gen *G, Io *io, unsigned long long seed, int graph) {
  G->s = seed * 0x9e3779b97f4a7c15ull + 1;
  G->n = 0;
  int rank = 1 + rnd(G, 3);
  int64_t s[3];
  for (int i = 0; i < rank; i++) s[i] = 1 + rnd(G, 5);
  kiln_dtype dt = rnd(G, 8) == 0 ? KILN_I32 : rnd(G, 6) == 0 ? KILN_F64 : KILN_F32;
  put(G, new_input(G, io, dt, rank, s));
  if (rnd(G, 2)) put(G, new_input(G, io, KILN_F32, rank, s));
  int steps = 3 + rnd(G, 8);
  for (int i = 0; i < steps; i++) step_float(G, io);
  add_output(G, io, G->pool[G->n - 1], graph);
  if (G->n > 3 && rnd(G, 2)) add_output(G, io, G->pool[1 + rnd(G, G->n - 2)], graph);
}

static double value(kiln_dtype t, const void *p, size_t i) {
  switch (t) {
  case KILN_F32: return ((const float *)p)[i];
  case KILN_F64: return ((const double *)p)[i];
  case KILN_I32: return ((const int32_t *)p)[i];
  case KILN_I64: return (double)((const int64_t *)p)[i];
  default: return ((const uint8_t *)p)[i];
  }
}

static bool close_enough(double a, double b) {
  if (a != a || b != b) return a != a && b != b;
  if (a == b) return true;
  return fabs(a - b) <= 2e-4 * (1e-2 + fabs(b));
}

static void run(kiln_graph *g, const char *backend, int fuse, int grid_sync, Io *io, void **outs, kiln_census *c) {
  kiln_options o = kiln_options_default();
  o.backend = backend;
  o.fuse = fuse;
  o.grid_sync = grid_sync;
  if (grid_sync >= 2) o.attention = 1, o.gemm_rows = 2;  /* every join the planner has: chains and pairs, wide too */
  kiln_program *p = NULL;
  OK(kiln_program_compile(g, &o, &p));
  for (int i = 0; i < io->n_out; i++) outs[i] = calloc(io->out_n[i] + 1, 8);
  if (p) {
    OK(kiln_program_run(p, (const void *const *)io->in, outs));
    OK(kiln_program_census(p, c));
  }
  kiln_program_free(p);
}

static void batch(unsigned long long base, int count) {
  Gen G = { 0 };
  Io *io = calloc(1, sizeof *io);
  OK(kiln_graph_create(&G.g));
  for (int i = 0; i < count; i++) {
    io->seed[i] = base + (unsigned long long)i;
    gen_graph(&G, io, io->seed[i], i);
  }
  static void *ref[MAX_IO], *fu[MAX_IO], *ea[MAX_IO], *gr[MAX_IO];
  kiln_census cr = { 0 }, cf = { 0 }, ce = { 0 }, cg = { 0 };
  /* the grouped run: every kernel joined into launch groups, phases behind grid barriers or band
   * waits, on the backend $KILN_DIFF_BACKEND names (cuda on a GPU machine), else on the cpu */
  const char *grouped = getenv("KILN_DIFF_BACKEND") && *getenv("KILN_DIFF_BACKEND") ? getenv("KILN_DIFF_BACKEND") : "cpu";
  run(G.g, "ref", 1, 0, io, ref, &cr);
  run(G.g, "cpu", 1, 0, io, fu, &cf);
  run(G.g, "cpu", 0, 0, io, ea, &ce);
  run(G.g, grouped, 1, 3, io, gr, &cg);
  CHECK_MSG(cf.host_fallbacks == 0 && ce.host_fallbacks == 0 && cg.host_fallbacks == 0, "fallbacks: %s / %s / %s",
            cf.fallback_ops, ce.fallback_ops, cg.fallback_ops);
  CHECK(cf.kernels_launched <= ce.kernels_launched);
  /* the cpu forms no groups (its team has no barrier inside a call): there the grouped run
   * checks the chains and pairs */
  CHECK_MSG(cg.kernels_launched <= cf.kernels_launched, "grouped on %s: %lld launches, fused on cpu %lld", grouped,
            (long long)cg.kernels_launched, (long long)cf.kernels_launched);
  int bad_graph = -1;
  for (int o = 0; o < io->n_out; o++) {
    for (size_t i = 0; i < io->out_n[o]; i++) {
      double r = value(io->out_t[o], ref[o], i), f = value(io->out_t[o], fu[o], i), e = value(io->out_t[o], ea[o], i);
      double q = value(io->out_t[o], gr[o], i);
      if (!close_enough(f, r) || !close_enough(e, r) || !close_enough(q, r)) {
        if (bad_graph != io->out_graph[o])
          fprintf(stderr, "graph seed %llu (KILN_SEED=%llu KILN_DIFF_GRAPHS=1): output %d [%zu]: ref %.9g fused %.9g eager "
                  "%.9g grouped (%s) %.9g\n", io->seed[io->out_graph[o]], io->seed[io->out_graph[o]], o, i, r, f, e,
                  grouped, q);
        bad_graph = io->out_graph[o];
        test_failures++;
        break;
      }
    }
    free(ref[o]); free(fu[o]); free(ea[o]); free(gr[o]);
  }
  for (int i = 0; i < io->n_in; i++) free(io->in[i]);
  kiln_graph_free(G.g);
  free(io);
}

int main(void) {
  char dir[] = "/tmp/kiln-test-diff-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  setenv("KILN_CACHE_DIR", dir, 1);  /* every program this test compiles caches here */
  unsigned long long base = (unsigned long long)kiln_env_int("KILN_SEED", 1);
  int total = kiln_env_int("KILN_DIFF_GRAPHS", kiln_env_int("KILN_SANITIZED", 0) ? 130 : 520);
  for (int done = 0; done < total; done += BATCH)
    batch(base + (unsigned long long)done, total - done < BATCH ? total - done : BATCH);
  fprintf(stderr, "%d random graphs from seed %llu\n", total, base);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd)) {}
  TEST_MAIN_END();
}
