/*
 * test_groups.c — launch groups (KILN_GRID_SYNC) and stores in place (KILN_IN_PLACE).
 *
 * Codegen, in the CUDA dialect, for the SGD step mlp_train_b32 (9 kernels: the logits k1, the
 * softmax rows k2 with each row's loss, and the hidden layer's gradient k3 run as one kernel, a
 * pair and its tail): with grid sync its kernels are one cooperative group of 3 phases — the
 * first layer, the rows, then the loss's sum over the rows, the bias and weight gradients and
 * their updates; with siblings only, one group of one phase after two kernels alone; the four
 * new parameters are stored into the parameters themselves; a vetoed kernel splits its group.
 * Without the tail and the rows' losses (pair_tails 0, row_sums 0) the loss's mean reads b2,
 * so b2's update waits a phase, and so does W2's, for the input gradient; stores in place
 * decide that, and the group's shared-memory budget closes it at the weight gradient with copies.
 * The C dialect forms no groups (the cpu's team has no barrier inside a call).
 * For every standard workload, an independent check of the conflict rule: two members of a
 * phase never touch the same bytes unless both only read them, siblings never depend, and
 * kernels that touch the same bytes run in plan order across launches.
 *
 * With band waits (grid sync 3), mlp_fwd_b128's first two layers are one group whose second phase waits for
 * its band of rows of the first, not at a grid barrier (band_groups; band_runs runs it).
 * Then the same step runs on $KILN_TEST_BACKEND (default cpu) with grid sync 0, 1 and 2:
 * each launches what its groups say (1 launch for grid sync on cuda, 9 each way on the cpu),
 * counts its phases,
 * and gives the same bits as the ungrouped program (the same kernels in the same order), and
 * those bits again from a second program; all agree with ref.
 */
#include "../codegen/built.h"
#include "runtime/cuda/cudadrv.h"

#include <math.h>
#include <stdlib.h>

static CgOptions opts(CgGroupMode m, bool in_place) {
  CgOptions o = cg_options_default();
  o.group = m;
  o.in_place = in_place;
  return o;
}

/* groups[i], phases[i] of launch i */
static void expect_members(const char *what, const Built *b, const int *group, const int *phase, int n) {
  CHECK_MSG(b->g->n_launch == n, "%s: %d launches, expected %d", what, b->g->n_launch, n);
  for (int i = 0; i < n && i < b->g->n_launch; i++)
    CHECK_MSG(b->g->launch[i].group == group[i] && (group[i] < 0 || b->g->launch[i].phase == phase[i]),
              "%s: k%d in group %d phase %d, expected %d phase %d", what, i, b->g->launch[i].group,
              b->g->launch[i].phase, group[i], phase[i]);
}

static int stored_in_place(const Built *b) {
  int n = 0;
  for (int s = 0; s < b->g->n_store; s++) n += b->g->store_into[s] >= 0;
  return n;
}

static void mlp_train_groups(void) {
  Built b;
  kiln_options old = kiln_options_default();
  old.pair_tails = old.row_sums = 0;
  CgOptions o = opts(CG_GROUP_GRID_SYNC, true);
  if (build("mlp_train_b32", &cg_dialect_cuda, &o, &b)) {
    int g[9] = { 0, -1, -1, 0, 0, 0, 0, 0, 0 }, ph[9] = { 0, 0, 0, 1, 2, 2, 2, 2, 2 };
    expect_members("grid sync", &b, g, ph, 9);
    CHECK_MSG(b.g->n_group == 1 && b.g->group[0].phase == 3 && b.g->group[0].cooperative, "%d groups", b.g->n_group);
    CHECK(b.g->launch[1].grid == 0 && b.g->launch[2].grid == 0 && strstr(b.g->launch[3].why, "rows: k1..k3"));
    CHECK_MSG(stored_in_place(&b) == 4, "%d values stored in place", stored_in_place(&b));
    for (int a = 0; a < b.te->n_assigns; a++)
      CHECK(b.g->store_into[b.te->assigns[a].value] == b.te->assigns[a].param);
    CHECK(strstr(b.g->source.s, "k_grid_sync(kiln_bar0);") && strstr(b.g->source.s, "kiln_g0("));
  }
  built_free(&b);

  o = opts(CG_GROUP_SIBLINGS, true);
  if (build("mlp_train_b32", &cg_dialect_cuda, &o, &b)) {
    int g[9] = { -1, -1, -1, -1, 0, 0, 0, 0, 0 }, ph[9] = { 0 };
    expect_members("siblings", &b, g, ph, 9);
    CHECK(b.g->n_group == 1 && strstr(b.g->group[0].why, "group of k4..k8:") && b.g->group[0].phase == 1 &&
          !b.g->group[0].cooperative);
    CHECK(!strstr(b.g->source.s, "k_grid_sync(kiln_bar"));
  }
  built_free(&b);
  if (build_planned("mlp_train_b32", &cg_dialect_cuda, &o, old, &b)) {
    /* the loss's mean (k3) runs beside the input gradient (k5), and b2's update (k4, stored
     * into b2, which k3 reads) beside the weight updates: deferred past their places */
    int g[9] = { -1, -1, -1, 0, 1, 0, 1, 1, 1 }, ph[9] = { 0 };
    expect_members("siblings, one loss stage, no tail", &b, g, ph, 9);
    CHECK(b.g->n_group == 2 && strstr(b.g->group[0].why, "group of k3, k5:") && strstr(b.g->group[1].why, "group of k4, k6..k8:"));
    for (int i = 0; i < b.g->n_group; i++) CHECK(b.g->group[i].phase == 1 && !b.g->group[i].cooperative);
  }
  built_free(&b);

  /* without stores in place, W2's update does not have to wait for W2's last reader */
  o = opts(CG_GROUP_GRID_SYNC, false);
  if (build_planned("mlp_train_b32", &cg_dialect_cuda, &o, old, &b)) {
    CHECK_MSG(b.g->launch[7].phase == 3, "k7 in phase %d", b.g->launch[7].phase);
    CHECK(stored_in_place(&b) == 0);
  }
  built_free(&b);

  /* copies (the cuda default): the first layer's tile holds two stages of shared tiles, and the
   * members' tiles would pass the group's 40 KB at the weight gradient k8, which launches after
   * the group, its reason printed */
  o = opts(CG_GROUP_GRID_SYNC, true);
  o.gemm_vec = 1, o.gemm_copies = 2;
  if (build_planned("mlp_train_b32", &cg_dialect_cuda, &o, old, &b)) {
    int g[9] = { 0, -1, 0, 0, 0, 0, 0, 0, -1 }, ph[9] = { 0, 0, 1, 2, 3, 2, 3, 3, 0 };
    expect_members("grid sync, copies", &b, g, ph, 9);
    CHECK_MSG(strstr(b.g->launch[0].why, "operands copied to shared, 2 stages") &&
              strstr(b.g->launch[8].why, "not in the group before: budget: shared tiles 39280 + 9232 B > 40960 B"),
              "k0: %s; k8: %s", b.g->launch[0].why, b.g->launch[8].why);
  }
  built_free(&b);

  /* a group's resident blocks: none asked (no bounds but the block), asked for every group
   * (group_blocks) or for the group a kernel begins (group_bounds, what the runtime sets from the
   * compiled group's residency; below 0 no ask); mlp_train_b1024's one group (k4..k6 here, without
   * column rows) begins at k4 */
  int bounds[16] = { 0 };
  for (int m = 0; m < 4; m++) {
    o = opts(CG_GROUP_SIBLINGS, true);
    if (m == 1) o.group_blocks = 3;
    if (m >= 2) bounds[4] = m == 2 ? 4 : -1, o.group_bounds = bounds, o.group_blocks = 3;
    const char *want[4] = { "__launch_bounds__(256) kiln_g0(", "__launch_bounds__(256, 3) kiln_g0(",
                            "__launch_bounds__(256, 4) kiln_g0(", "__launch_bounds__(256) kiln_g0(" };
    if (build("mlp_train_b1024", &cg_dialect_cuda, &o, &b))
      CHECK_MSG(b.g->n_group == 1 && strstr(b.g->group[0].why, "group of k4..k6:") && strstr(b.g->source.s, want[m]),
                "bounds %d: %s", m, b.g->n_group ? b.g->group[0].why : "no group");
    built_free(&b);
  }

  /* a vetoed kernel runs alone and splits the group around it */
  const char *veto[16] = { 0 };
  veto[5] = "test veto";
  o = opts(CG_GROUP_GRID_SYNC, true);
  o.group_veto = veto;
  if (build("mlp_train_b32", &cg_dialect_cuda, &o, &b)) {
    int g[9] = { 0, -1, -1, 0, 0, -1, 1, 1, 1 }, ph[9] = { 0, 0, 0, 1, 2, 0, 0, 0, 0 };
    expect_members("veto", &b, g, ph, 9);
    CHECK(strstr(b.g->launch[5].why, "test veto"));
  }
  built_free(&b);

  /* the C dialect forms no groups: every thread of the cpu's team calls each kernel, and the
   * runtime waits for them all between calls (a call of several kernels has no barrier) */
  o = opts(CG_GROUP_GRID_SYNC, true);
  if (build("mlp_train_b32", &cg_dialect_c, &o, &b)) {
    int g[9] = { -1, -1, -1, -1, -1, -1, -1, -1, -1 }, ph[9] = { 0 };
    expect_members("c", &b, g, ph, 9);
    CHECK(b.g->n_group == 0 && !strstr(b.g->source.s, "kiln_g0"));
  }
  built_free(&b);
}

/* ---- the conflict rule, checked from the plan's memory plan alone ---- */

typedef struct Span { int space; int64_t lo, hi; } Span;

static Span span_of(const Built *b, int s) {
  const Stage *S = &b->te->stages[s];
  int64_t n = S->numel * (int64_t)kiln_dtype_size(S->dtype);
  if (b->g->store_into[s] >= 0) return (Span){ b->g->store_into[s], 0, n };
  if (S->kind >= ST_INJECTIVE && b->p->offset[s] >= 0 && !plan_is_output(b->p, s)) return (Span){ -1, b->p->offset[s], b->p->offset[s] + n };
  return (Span){ s, 0, n };
}

static bool touch(const Built *b, int ka, int kb) {
  const Kernel *A = &b->p->kernels[ka], *B = &b->p->kernels[kb];
  const CgLaunch *la = &b->g->launch[ka], *lb = &b->g->launch[kb];
  for (int i = 0; i < la->n_params; i++)
    for (int j = 0; j < lb->n_params; j++) {
      if (i < A->n_ins && j < B->n_ins) continue;
      Span x = span_of(b, la->params[i]), y = span_of(b, lb->params[j]);
      if (x.space == y.space && x.lo < y.hi && y.lo < x.hi) return true;
    }
  return false;
}

static void conflict_rule(const char *name, CgGroupMode m) {
  Built b;
  CgOptions o = opts(m, true);
  if (!build(name, &cg_dialect_cuda, &o, &b)) { built_free(&b); return; }
  int members = 0;
  for (int x = 0; x < b.g->n_launch; x++) {
    const CgLaunch *lx = &b.g->launch[x];
    if (lx->group < 0) continue;
    members++;
    const CgLaunch *G = &b.g->group[lx->group];
    for (int j = 0; j < lx->n_params; j++) {  /* the group passes every buffer a member takes */
      bool found = false;
      for (int i = 0; i < G->n_params; i++) found |= G->params[i] == lx->params[j];
      CHECK_MSG(found, "%s: k%d's stage %d is not a parameter of its group", name, x, lx->params[j]);
    }
    CHECK(lx->phase >= 0 && lx->phase < G->phase && lx->block == G->block);
    for (int y = x + 1; y < b.g->n_launch; y++) {
      const CgLaunch *ly = &b.g->launch[y];
      if (ly->group != lx->group || !touch(&b, x, y)) continue;
      CHECK_MSG(ly->phase > lx->phase, "%s (mode %d): k%d (phase %d) and k%d (phase %d) touch the same bytes", name, m, x,
                lx->phase, y, ly->phase);
    }
  }
  /* across launches: a group runs at its last member, so kernels that touch the same bytes
   * (one writing) run in plan order (a kernel deferred into a later group passed nothing it
   * touches) */
  for (int x = 0; x < b.g->n_launch; x++)
    for (int y = x + 1; y < b.g->n_launch; y++) {
      const CgLaunch *lx = &b.g->launch[x], *ly = &b.g->launch[y];
      if (lx->host || ly->host || (lx->group >= 0 && lx->group == ly->group) || !touch(&b, x, y)) continue;
      int ax = x, ay = y;
      for (int z = 0; z < b.g->n_launch; z++) {
        if (lx->group >= 0 && b.g->launch[z].group == lx->group) ax = z;
        if (ly->group >= 0 && b.g->launch[z].group == ly->group) ay = z;
      }
      CHECK_MSG(ax < ay, "%s (mode %d): k%d runs at launch %d, after k%d (at %d), and they touch the same bytes", name, m, x,
                ax, y, ay);
    }
  for (int i = 0; i < b.g->n_group; i++) CHECK(m != CG_GROUP_SIBLINGS || b.g->group[i].phase == 1);
  /* band waits: both phases GEMM tiles over the same rows, the later reading the earlier's outputs at its own rows */
  for (int i = 0; i < b.g->n_group; i++)
    for (int ph = 1; ph < b.g->group[i].phase; ph++) {
      if (!(b.g->group[i].band_waits >> ph & 1u)) continue;
      CHECK_MSG(m == CG_GROUP_BANDS, "%s (mode %d): group %d's phase %d waits by bands", name, m, i, ph);
      for (int x = 0; x < b.g->n_launch; x++) {
        const CgLaunch *lx = &b.g->launch[x];
        if (lx->group == i && (lx->phase == ph || lx->phase == ph - 1))
          CHECK_MSG(strstr(lx->why, "gemm 32x32 tiles") && b.p->kernels[x].rank == 2, "%s: k%d waits by bands: %s", name, x, lx->why);
      }
    }
  if (m != CG_GROUP_SIBLINGS && (!strncmp(name, "mlp_train", 9) || !strncmp(name, "cnn_train", 9)))
    CHECK_MSG(members > 0, "%s: no groups", name);
  built_free(&b);
}

/* Band waits (CG_GROUP_BANDS): mlp_fwd_b128's three layers, GEMM tiles of 32 rows over the batch's 128 (4
 * bands; the first two 16 column tiles of 4 spans, 64 blocks a band; the last 1 of 8 spans), as one group (the
 * tiles through registers: the default CgOptions) whose later phases each wait for their band of the phase
 * before: each block of a phase that one waits on counts itself in at its band after its span, each block of
 * the next waits for its band's count, no grid barrier. mlp_train_b32's group keeps its barriers (its second
 * phase is the softmax rows' kernel, not tiles). */
static void band_groups(void) {
  Built b;
  CgOptions o = opts(CG_GROUP_BANDS, true);
  if (build("mlp_fwd_b128", &cg_dialect_cuda, &o, &b)) {
    int g[3] = { 0, 0, 0 }, ph[3] = { 0, 1, 2 };
    expect_members("bands", &b, g, ph, 3);
    CHECK_MSG(b.g->n_group == 1 && b.g->group[0].band_waits == 6u && b.g->group[0].cooperative &&
                  strstr(b.g->group[0].why, "phase 1 waits for its band of phase 0; phase 2 waits for its band of phase 1") &&
                  !strstr(b.g->group[0].why, "grid barriers"),
              "mlp_fwd_b128 bands: %d groups, waits %u", b.g->n_group, b.g->n_group ? b.g->group[0].band_waits : 0);
    const char *src = b.g->source.s, *g0 = strstr(src, " kiln_g0(");
    const char *k0 = g0 ? strstr(g0, "kiln_k0(v - 0, 256, ") : NULL;
    const char *in = k0 ? strstr(k0, "k_band_arrive(kiln_bc0 + 0 + band);") : NULL;
    const char *wait = in ? strstr(in, "k_band_wait(kiln_bc0 + 0 + band, 64u, kiln_bo0 + 0 + band, 64u);") : NULL;
    const char *k1 = wait ? strstr(wait, "kiln_k1(v - 0, 256, ") : NULL;
    const char *in1 = k1 ? strstr(k1, "k_band_arrive(kiln_bc0 + 4 + band);") : NULL;
    const char *band2 = in1 ? strstr(in1, "const int64_t band = (v - 0) / 8 % 4;") : NULL;
    const char *wait2 = band2 ? strstr(band2, "k_band_wait(kiln_bc0 + 4 + band, 64u, kiln_bo0 + 4 + band, 8u);") : NULL;
    const char *k2 = wait2 ? strstr(wait2, "kiln_k2(v - 0, 32, ") : NULL;
    CHECK_MSG(k2 && strstr(g0, "const int64_t band = (v - 0) / 64 % 4;") && !strstr(g0, "k_grid_sync(") &&
                  strstr(src, "__device__ unsigned int kiln_bc0[12], kiln_bo0[12];"),
              "mlp_fwd_b128 bands: arrive %d, wait %d, k1 after %d, arrive %d, wait %d, k2 after %d", !!in, !!wait, !!k1, !!in1,
              !!wait2, !!k2);
    CudaNvrtc *nv;  /* the source compiles for sm_90 where NVRTC is (no GPU needed) */
    if (cuda_nvrtc(&nv) == KILN_OK) {
      void *bin = NULL;
      size_t n = 0;
      bool hit;
      CHECK_MSG(cuda_compile(src, "sm_90", 0, NULL, &bin, &n, &hit) == KILN_OK, "mlp_fwd_b128 bands: %s", kiln_last_error());
      kiln_free(bin);
    }
  }
  built_free(&b);
  /* a second GEMM over as many rows that reads the first's outputs across all of them (h^T @ v, h [128,128], v
   * [128,256]: h's rows are its reduction) waits at a grid barrier: its band needs every band of h */
  kiln_graph *kg = NULL;
  OK(kiln_graph_create(&kg));
  static float w1[64 * 128], v[128 * 256];
  kiln_tensor x, w, vv, h, ht, z;
  int64_t xs[2] = { 128, 64 }, ws[2] = { 64, 128 }, vs[2] = { 128, 256 };
  int perm[2] = { 1, 0 };
  bool ok = kg && !kiln_graph_input(kg, "x", KILN_F32, 2, xs, &x) && !kiln_graph_param(kg, "w", KILN_F32, 2, ws, w1, &w) &&
            !kiln_graph_param(kg, "v", KILN_F32, 2, vs, v, &vv) && !kiln_graph_matmul(kg, x, w, &h) &&
            !kiln_graph_unary(kg, KILN_RELU, h, &h) && !kiln_graph_transpose(kg, h, perm, &ht) &&
            !kiln_graph_matmul(kg, ht, vv, &z) && !kiln_graph_output(kg, z, "z");
  CHECK(ok);
  TE *te = NULL;
  Plan *pl = NULL;
  CgProgram *prog = NULL;
  kiln_options ko = kiln_options_default();
  ko.backend = "cuda";
  PlanOptions po = plan_options(&ko);
  if (ok) OK(te_lower(&kg->g, &te));
  if (te) OK(plan_build(te, &po, &pl));
  if (pl) OK(cg_program_build(pl, &cg_dialect_cuda, &o, &prog));
  CHECK_MSG(prog && prog->n_group == 1 && prog->group[0].phase == 2 && prog->group[0].band_waits == 0 &&
                strstr(prog->source.s, "k_grid_sync("),
            "h^T @ v after x @ w under bands: %d groups, %d phases, waits %u", prog ? prog->n_group : -1,
            prog && prog->n_group ? prog->group[0].phase : -1, prog && prog->n_group ? prog->group[0].band_waits : 0);
  cg_program_free(prog);
  plan_free(pl);
  te_free(te);
  kiln_graph_free(kg);
  if (build("mlp_train_b32", &cg_dialect_cuda, &o, &b))
    CHECK_MSG(b.g->n_group == 1 && b.g->group[0].phase == 3 && b.g->group[0].band_waits == 0 && strstr(b.g->source.s, "k_grid_sync("),
              "mlp_train_b32 bands: %d groups", b.g->n_group);
  built_free(&b);
}

/* ---- runs ---- */

static const char *backend(void) {
  const char *b = getenv("KILN_TEST_BACKEND");
  return b && *b && strcmp(b, "ref") ? b : "cpu";
}

static kiln_census run_step(Workload *w, const char *be, int grid_sync, int copy_stages, void **outs) {
  kiln_census c = { 0 };
  kiln_options o = kiln_options_default();
  o.backend = be;
  o.grid_sync = grid_sync;
  o.cuda_copy_stages = copy_stages;
  o.strict = 1;
  kiln_program *p = NULL;
  OK(kiln_program_compile(w->g, &o, &p));
  for (int i = 0; i < w->n_outputs; i++) outs[i] = calloc(1, w->output_bytes[i] + 1);
  if (p) OK(kiln_program_run(p, (const void *const *)w->inputs, outs));
  if (p) OK(kiln_program_census(p, &c));
  kiln_program_free(p);
  return c;
}

/* The largest relative difference of f32 values a from e (n bytes each), against ref's tolerance scale */
static double worst_from(const void *a, const void *e, size_t bytes) {
  double worst = 0;
  for (size_t j = 0; j < bytes / sizeof(float); j++) {
    double x = ((const float *)a)[j], y = ((const float *)e)[j], d = fabs(x - y) / (1e-3 + fabs(y));
    if (!(d <= worst)) worst = d;  /* a NaN is the worst */
  }
  return worst;
}

static void runs(void) {
  const char *be = backend();
  bool cuda = !strcmp(be, "cuda");
  Workload w;
  OK(wl_build("mlp_train_b32", &w));
  if (!w.g) { test_failures++; return; }
  void *ref[16] = { 0 }, *out[4][16] = { { 0 } };
  kiln_census cr = run_step(&w, "ref", 0, -1, ref), c[4];
  (void)cr;
  int mode[4] = { 0, 1, 2, 2 }, copies[4] = { -1, -1, 0, -1 };
  for (int r = 0; r < 4; r++) c[r] = run_step(&w, be, mode[r], copies[r], out[r]);
  /* launches and phases: 9 kernels (7 launches on cuda, the logits and the hidden layer's
   * gradient in the softmax rows' kernel); on cuda siblings 3 launches in 3 phases and grid
   * sync one launch of 3 phases, its GEMM tiles through registers (cuda_copy_stages 0) or
   * copied (the default: the group's shared tiles stay under its 40 KB). The cpu groups nothing
   * (9 launches each way); no copies left after the run on cuda (stored in place) */
  long long chained = cuda ? 2 : 0;
  CHECK_MSG(c[0].kernels_launched == 9 - chained && c[0].phases == 9 - chained, "%s off: %lld launches, %lld phases", be,
            (long long)c[0].kernels_launched, (long long)c[0].phases);
  CHECK_MSG(c[1].kernels_launched == (cuda ? 3 : 9) && c[1].phases == (cuda ? 3 : 9), "%s siblings: %lld launches, %lld phases",
            be, (long long)c[1].kernels_launched, (long long)c[1].phases);
  CHECK_MSG(c[2].kernels_launched == (cuda ? 1 : 9) && c[2].phases == (cuda ? 3 : 9), "%s grid sync: %lld launches, %lld phases",
            be, (long long)c[2].kernels_launched, (long long)c[2].phases);
  CHECK_MSG(c[3].kernels_launched == (cuda ? 1 : 9) && c[3].phases == (cuda ? 3 : 9),
            "%s grid sync, copies: %lld launches, %lld phases", be, (long long)c[3].kernels_launched, (long long)c[3].phases);
  for (int r = 0; r < 4; r++) CHECK(c[r].host_fallbacks == 0 && (!cuda || c[r].submissions == 1));
  /* cuda: the pair a warp a row (from 16 rows), then a block a row, its contraction's weights staged in
   * shared memory once a block (cuda_pair_stage 1, 2): the same 3 launches, within ref's tolerance below */
  void *staged[2][16] = { { 0 } };
  for (int v = 0; cuda && v < 2; v++) {
    if (!v) setenv("KILN_CUDA_PAIR_WARPS", "16", 1);
    setenv("KILN_CUDA_PAIR_STAGE", v ? "2" : "1", 1);
    kiln_census cs = run_step(&w, be, 1, -1, staged[v]);
    unsetenv("KILN_CUDA_PAIR_WARPS");
    unsetenv("KILN_CUDA_PAIR_STAGE");
    CHECK_MSG(cs.host_fallbacks == 0 && cs.kernels_launched == 3, "cuda, pair staged (%s): %lld launches",
              v ? "a block a row" : "a warp a row", (long long)cs.kernels_launched);
  }
  for (int i = 0; i < w.n_outputs; i++) {
    for (int r = 1; r < 4; r++)
      CHECK_MSG(!memcmp(out[r][i], out[0][i], w.output_bytes[i]), "%s output %d: grid sync %d (run %d) differs from "
                "ungrouped", be, i, mode[r], r);
    double worst = worst_from(out[2][i], ref[i], w.output_bytes[i]);
    CHECK_MSG(worst < 1e-3, "%s output %d: %g from ref", be, i, worst);
    for (int v = 0; v < 2; v++) {
      if (!staged[v][i]) continue;  /* the pair a warp or a block a row, its weights staged */
      worst = worst_from(staged[v][i], ref[i], w.output_bytes[i]);
      CHECK_MSG(worst < 1e-3, "%s output %d, the pair's weights staged (%d): %g from ref", be, i, v + 1, worst);
      free(staged[v][i]);
    }
    free(ref[i]);
    for (int r = 0; r < 4; r++) free(out[r][i]);
  }
  wl_free(&w);
}

/* mlp_fwd_b128 under grid sync 3 (its first two layers waiting by bands) on $KILN_TEST_BACKEND: on cuda 2 launches
 * of 3 phases (the group's 2, the last layer's 1), bit for bit the ungrouped program's, twice, and within ref's
 * tolerance; on the cpu, which groups nothing, 3 launches and the same bits */
static void band_runs(void) {
  const char *be = backend();
  bool cuda = !strcmp(be, "cuda");
  Workload w;
  OK(wl_build("mlp_fwd_b128", &w));
  if (!w.g) { test_failures++; return; }
  void *ref[16] = { 0 }, *out[3][16] = { { 0 } };
  run_step(&w, "ref", 0, -1, ref);
  kiln_census c[3];
  int mode[3] = { 0, 3, 3 };
  for (int r = 0; r < 3; r++) c[r] = run_step(&w, be, mode[r], -1, out[r]);
  CHECK_MSG(c[0].kernels_launched == 3 && c[1].kernels_launched == (cuda ? 2 : 3) && c[1].phases == 3 && c[2].host_fallbacks == 0,
            "%s mlp_fwd_b128 bands: %lld launches, %lld phases (ungrouped %lld)", be, (long long)c[1].kernels_launched,
            (long long)c[1].phases, (long long)c[0].kernels_launched);
  for (int i = 0; i < w.n_outputs; i++) {
    for (int r = 1; r < 3; r++)
      CHECK_MSG(!memcmp(out[r][i], out[0][i], w.output_bytes[i]), "%s mlp_fwd_b128 output %d: bands (run %d) differ from "
                "ungrouped", be, i, r);
    double worst = worst_from(out[1][i], ref[i], w.output_bytes[i]);
    CHECK_MSG(worst < 1e-3, "%s mlp_fwd_b128 output %d, bands: %g from ref", be, i, worst);
    free(ref[i]);
    for (int r = 0; r < 3; r++) free(out[r][i]);
  }
  wl_free(&w);
}

int main(void) {
  char dir[] = "/tmp/kiln-test-groups-XXXXXX";
  if (!mkdtemp(dir)) return 1;
  setenv("KILN_CACHE_DIR", dir, 1);
  mlp_train_groups();
  const char *names[] = { "mlp_fwd_b128", "mlp_train_b32", "mlp_train_b1024", "cnn_train_b32", "softmax_4096x1024",
                          "layernorm_4096x768", "chain10_4096", "bert_layer_b2s32" };
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    conflict_rule(names[i], CG_GROUP_SIBLINGS);
    conflict_rule(names[i], CG_GROUP_GRID_SYNC);
    conflict_rule(names[i], CG_GROUP_BANDS);
  }
  band_groups();
  runs();
  band_runs();
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd)) {}
  TEST_MAIN_END();
}
