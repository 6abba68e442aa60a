/*
 * test_launches.c — the launch decisions codegen hands on (cg_program_build): for workloads
 * of bench/workloads.h, each kernel's grid, block and dynamic shared memory in the CUDA
 * dialect are pinned to the values the cuda backend has always launched with (points: 256
 * threads, a block per 256 points; block rows: cg_gpu_rows' threads x rows, a block per
 * `rows` rows, a long row's shared-memory cache with the carveout; GEMM: 256 threads,
 * cg_gemm_blocks), under the default options and under split-K off and the base row
 * variant. Library GEMM candidates appear for bert's big projections and not for small
 * GEMMs, nor when the options turn the library off. A loop dialect gets one call of the
 * trampoline per kernel. Every launch's parameters are cg_kernel_params' stages, and the
 * source is exactly cg_render_plan's.
 */
#include "built.h"
#include "runtime/runtime.h"

/* One launch's numbers: grid, block, smem, carveout, library. */
typedef struct Want { int kernel; int64_t grid; int block, smem, carveout; bool library; } Want;

/* The shared model `name` loaded (NULL, and a line saying it is skipped, where ../shared lacks it). */
static kiln_graph *shared_model(const char *name) {
  const char *shared = getenv("KILN_SHARED_DIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/models/%s/model.onnx", shared ? shared : "../shared", name);
  kiln_graph *g = NULL;
  if (kiln_graph_load_onnx(path, &g) != KILN_OK) {
    printf("skip: %s\n", path);
    return NULL;
  }
  return g;
}

/* Options o refused on dialect d, the message naming the setting env. */
static void refused(const kiln_options *o, const Dialect *d, const char *env) {
  CgOptions co;
  FAILS(KILN_ERR_INVALID_ARG, rt_codegen_options(o, d, &co));
  CHECK_MSG(strstr(kiln_last_error(), env), "the refusal does not name %s: %s", env, kiln_last_error());
}

/* Under o on cuda, workload's launch n has `grid` blocks and its description says `form`; *co the options. */
static void nth_launch(const kiln_options *o, CgOptions *co, const char *workload, int n, int64_t grid, const char *form) {
  Built b;
  if (rt_codegen_options(o, &cg_dialect_cuda, co) != KILN_OK) return;
  if (build(workload, &cg_dialect_cuda, co, &b)) {
    CHECK_MSG(n < b.g->n_launch, "%s: %d launches, no k%d", workload, b.g->n_launch, n);
    if (n < b.g->n_launch)
      CHECK_MSG(b.g->launch[n].grid == grid && strstr(b.g->launch[n].why, form), "%s's k%d: %lld blocks, %s; expected %lld, %s",
                workload, n, (long long)b.g->launch[n].grid, b.g->launch[n].why, (long long)grid, form);
  }
  built_free(&b);
}

/* The same of the first launch (a GEMM's spans). */
static void first_spans(const kiln_options *o, CgOptions *co, const char *workload, int64_t grid, const char *spans) {
  nth_launch(o, co, workload, 0, grid, spans);
}

static void expect(const char *what, const Built *b, const Want *w, int n) {
  for (int i = 0; i < n; i++) {
    CHECK_MSG(w[i].kernel < b->g->n_launch, "%s: no kernel %d", what, w[i].kernel);
    if (w[i].kernel >= b->g->n_launch) continue;
    const CgLaunch *l = &b->g->launch[w[i].kernel];
    CHECK_MSG(l->grid == w[i].grid && l->block == w[i].block && l->smem == w[i].smem &&
                  l->smem_carveout == w[i].carveout && l->library == w[i].library,
              "%s k%d: grid %lld x %d, smem %d carveout %d, library %d (%s); expected %lld x %d, %d, %d, %d", what,
              w[i].kernel, (long long)l->grid, l->block, l->smem, l->smem_carveout, l->library, l->why,
              (long long)w[i].grid, w[i].block, w[i].smem, w[i].carveout, w[i].library);
  }
}

/* What holds for every launch: its parameters, its name, and the source. */
static void common(const char *what, const Built *b, const Dialect *d, const CgOptions *o) {
  StrBuf src = { 0 };
  OK(cg_render_plan(b->p, d, o, b->g, &src));
  CHECK_MSG(src.s && b->g->source.s && !strcmp(src.s, b->g->source.s), "%s: program source differs", what);
  sb_free(&src);
  for (int i = 0; i < b->g->n_launch; i++) {
    const CgLaunch *l = &b->g->launch[i];
    const Kernel *k = &b->p->kernels[i];
    int st[64];
    int n = cg_kernel_params_max(k) <= 64 ? cg_kernel_params(b->p, k, st) : -1;
    CHECK(l->kernel == i && l->host == (k->kind == KN_HOST));
    CHECK_MSG(l->n_params == n && (n <= 0 || !memcmp(l->params, st, sizeof *st * (size_t)n)), "%s k%d: params", what, i);
    char name[32];
    cg_kernel_name(i, !d->grid && d->trampoline, name);
    CHECK_MSG(l->host || !strcmp(l->name, name), "%s k%d: entry %s, expected %s", what, i, l->name, name);
    CHECK_MSG(l->why[0], "%s k%d: no reason given", what, i);
    CHECK(!l->library || d->grid);
  }
}

static void check(const char *name, const Dialect *d, const CgOptions *o, const Want *w, int n) {
  Built b;
  if (build(name, d, o, &b)) {
    char what[96];
    snprintf(what, sizeof what, "%s (%s)", name, d->name);
    common(what, &b, d, o);
    expect(what, &b, w, n);
  }
  built_free(&b);
}

/* A layernorm's backward row kernel reads the forward's stored rsqrt in two of its loops; a
 * row statistic like it is computed once outside them and never kept in the row cache (the
 * cache once claimed it, was never filled, and its garbage turned a transformer step's
 * gradients into NaN on the H200). The renderer refuses a read of a cache nothing wrote. */
static void layernorm_backward(void) {
  kiln_graph *g;
  kiln_tensor x, gs, bs, w, y, m, p, s, gr[3];
  int64_t xs[2] = { 32, 32 }, d = 32;
  float data[1024];
  for (int i = 0; i < 1024; i++) data[i] = (float)((i * 37) % 11) / 11.0f;
  OK(kiln_graph_create(&g));
  OK(kiln_graph_input(g, "x", KILN_F32, 2, xs, &x));
  OK(kiln_graph_param(g, "g", KILN_F32, 1, &d, data, &gs));
  OK(kiln_graph_param(g, "b", KILN_F32, 1, &d, data + 32, &bs));
  OK(kiln_graph_param(g, "w", KILN_F32, 2, xs, data, &w));
  OK(kiln_graph_layernorm(g, x, gs, bs, 1, 1e-5, &y));
  OK(kiln_graph_matmul(g, y, w, &m));
  OK(kiln_graph_binary(g, KILN_MUL, m, m, &p));
  OK(kiln_graph_reduce(g, KILN_REDUCE_SUM, p, 0, NULL, 0, &s));
  OK(kiln_graph_grad(g, s, 3, (kiln_tensor[]){ x, gs, w }, gr));
  for (int i = 0; i < 3; i++) OK(kiln_graph_output(g, gr[i], NULL));
  const char *backends[2] = { "cpu", "cuda" };
  for (int m2 = 0; m2 < 2; m2++) {  /* both backends' plans, in the cuda dialect */
    kiln_options ko = kiln_options_default();
    ko.backend = backends[m2];
    PlanOptions po = plan_options(&ko);
    TE *te = NULL;
    Plan *pl = NULL;
    CgProgram *prog = NULL;
    CgOptions co = cg_options_default();
    OK(te_lower(&g->g, &te));
    if (te) OK(plan_build(te, &po, &pl));
    if (pl) OK(cg_program_build(pl, &cg_dialect_cuda, &co, &prog));
    CHECK_MSG(prog && strstr(prog->source.s, "c0[j] = "), "layernorm backward (%s plan): no row cache in the source", backends[m2]);
    cg_program_free(prog);
    plan_free(pl);
    te_free(te);
  }
  kiln_graph_free(g);
}

/* gpt_tiny's f32 attention chains (8 rows a tile, 64 keys, 64 columns): under cuda_chain_spread 0, 4 rows a
 * thread in both products (128 and 32 of the block's 256 threads); spread (1, the default), 2 rows a
 * thread's scores (256 threads) and 1 row a thread's outputs (128) */
static CgProgram *model_program(kiln_graph *g, const kiln_options *ko, const Dialect *d, TE **te, Plan **pl);
static void chain_threads(void) {
  kiln_graph *g = shared_model("gpt_tiny");
  if (!g) return;
  for (int spread = 0; spread < 2; spread++) {
    kiln_options ko = kiln_options_default();
    ko.backend = "cuda";
    ko.cuda_chain_spread = spread;
    TE *te;
    Plan *pl;
    CgProgram *prog = model_program(g, &ko, &cg_dialect_cuda, &te, &pl);
    /* the next kernel's start: k5 is a GEMM inside k6's pair (wide pairs, the default) */
    const char *k4 = prog ? strstr(prog->source.s, " kiln_k4(") : NULL, *k5 = k4 ? strstr(k4, "__global__") : NULL;
    const char *sc = k4 ? strstr(k4, spread ? "for (int f = threadIdx.x; f < 256; f += 256) {" : "for (int f = threadIdx.x; f < 128; f += 256) {") : NULL;
    const char *ac = sc ? strstr(sc, spread ? "float acc[2];" : "float acc[4];") : NULL;
    const char *ou = ac ? strstr(ac, spread ? "for (int f = threadIdx.x; f < 128; f += 256) {" : "for (int f = threadIdx.x; f < 32; f += 256) {") : NULL;
    const char *o4 = ou ? strstr(ou, spread ? "float o4[1][4];" : "float o4[4][4];") : NULL;
    CHECK_MSG(o4 && o4 < k5, "gpt_tiny's chain k4, spread %d: scores %d, %d; outputs %d, %d", spread, !!sc, !!ac, !!ou, !!o4);
    cg_program_free(prog);
    plan_free(pl);
    te_free(te);
  }
  kiln_graph_free(g);
}

/* g lowered, planned and (on a grid dialect) built on dialect d under ko, with the renderer's hooks the
 * runtime gives the planner (rt_plan_renderer); the caller frees *te, *pl and the program. */
static CgProgram *model_program(kiln_graph *g, const kiln_options *ko, const Dialect *d, TE **te, Plan **pl) {
  PlanOptions po = plan_options(ko);
  CgOptions co;
  CgProgram *prog = NULL;
  *te = NULL, *pl = NULL;
  OK(rt_codegen_options(ko, d, &co));
  rt_plan_renderer(ko, d, &co, &po);
  OK(te_lower_split(&g->g, ko->row_sums != 0, te));
  if (*te) OK(plan_build(*te, &po, pl));
  if (*pl && d->grid) OK(cg_program_build(*pl, d, &co, &prog));
  return prog;
}

/* Banded pairs: gpt_tiny with wide pairs (gemm_rows 2, the default on cuda), its four layernorms after
 * their GEMMs (the output projection with the residual, the second FFN layer), on cuda as the GEMMs'
 * tiles: 16 launches (narrow pairs alone, gemm_rows 1) to 12. Under cuda_pair_bands 1 each band of 32
 * rows' last tile runs the layernorm's rows; 0 the warp-a-row form of the same plan; shared bands (2; 3,
 * the default) every tile its own columns of its band's rows, its tiles meeting at each sum (2: a
 * cooperative launch's band barrier; 3: flags, any launch). */
static void banded_pairs(void) {
  kiln_graph *g = shared_model("gpt_tiny");
  if (!g) return;
  for (int rows = -1; rows <= 2; rows++)  /* the default (wide pairs), narrow pairs alone, wide pairs */
    for (int bands = 3; bands >= -1; bands--) {
      if (rows == 0 || (rows == 2 ? bands < 0 : bands >= 0)) continue;  /* each form under 2, the default else */
      kiln_options ko = kiln_options_default();
      ko.backend = "cuda";
      ko.gemm_rows = rows;
      ko.cuda_pair_bands = bands;
      bool wide = rows != 1;
      int form = !wide ? -1 : bands < 0 ? 3 : bands;  /* the default's: shared, met by flags */
      TE *te;
      Plan *pl;
      CgProgram *prog = model_program(g, &ko, &cg_dialect_cuda, &te, &pl);
      int launches = 0, banded = 0, warps = 0, shared = 0, coop = 0, resident = 0;
      for (int i = 0; prog && i < prog->n_launch; i++) {
        const CgLaunch *l = &prog->launch[i];
        launches += l->grid > 0;
        banded += l->grid > 0 && strstr(l->why, "then each band's last tile its 32 rows, 8 lanes a row") != NULL;
        warps += l->grid > 0 && strstr(l->why, "8 rows a block (a warp a row, 8 columns a lane)") != NULL;
        shared += l->grid > 0 && strstr(l->why, "then every tile its columns of its 32 rows, the band's tiles meeting") != NULL;
        coop += l->grid > 0 && l->cooperative && l->group < 0;
        resident += l->grid > 0 && l->resident && l->group < 0;
      }
      int want = wide ? 12 : 16;
      CHECK_MSG(prog && launches == want && banded == (form == 1 ? 4 : 0) && warps == (form == 0 ? 4 : 0) &&
                    shared == (form >= 2 ? 4 : 0) && coop == (form == 2 ? 4 : 0) && resident == shared,
                "gpt_tiny gemm_rows %d, bands %d: %d launches (%d banded, %d warp rows, %d shared, %d cooperative, %d resident), "
                "expected %d", rows, bands, launches, banded, warps, shared, coop, resident, want);
      if (prog && form >= 2) {
        /* k6's 8 column tiles a band: under 2 each row's two sums (the mean's and the variance's) each
         * stored at its slot and column tile, met at the band's barrier, added back in column-tile order;
         * under 3 one meeting by flags, the tile's own squares about its own mean beside its sum (the
         * spare slot), the variance Chan's combination of the band's; the tile's row values read from
         * its shared Xb */
        const char *k6 = strstr(prog->source.s, " kiln_k6("), *k7 = k6 ? strstr(k6, " kiln_k7(") : NULL;
        const char *xb = k6 ? strstr(k6, "Xb[(int)(mq - tm0)][(int)(nq - tn0)] = ") : NULL;
        const char *back = xb ? strstr(xb, "xv[c] = Xb[rw][c * 8 + gl];") : NULL;
        const char *put0 = back ? strstr(back, "if (gl == 0) (kiln_bp5 + (INT64_C(0) + o) * 8)[tn0 / 32] = ") : NULL;
        /* cooperative (2): the band's barrier; launched as any kernel (3): the tiles' flags */
        const char *meet = form == 2 ? "k_band_sync(kiln_bb5 + 2 * (tm0 / 32), 8u);"
                                      : "k_band_meet(kiln_bb5 + (tm0 / 32) * 8, (unsigned)(tn0 / 32), 8u);";
        const char *meet0 = put0 ? strstr(put0, meet) : NULL;
        const char *add0 = meet0 ? strstr(meet0, "for (int t = 1; t < 8; t++) a") : NULL;
        const char *put1 = NULL, *meet1 = NULL;
        if (form == 2) {
          put1 = add0 ? strstr(add0, "if (gl == 0) (kiln_bp5 + (INT64_C(128) + o) * 8)[tn0 / 32] = ") : NULL;
          meet1 = put1 ? strstr(put1, meet) : NULL;
        } else {
          const char *q = put0 ? strstr(put0, "if (gl == 0) (kiln_bp5 + (INT64_C(256) + o) * 8)[tn0 / 32] = cq77;") : NULL;
          put1 = q && q < meet0 ? q : NULL;  /* the squares go with the sum, before the meeting */
          const char *chan = add0 ? strstr(add0, "cv82 += __ldcg((kiln_bp5 + (INT64_C(256) + o) * 8) + t) + nn * dm * dm;") : NULL;
          meet1 = chan ? strstr(chan, "a82 = cv82;") : NULL;
        }
        const char *extra = meet1 ? strstr(meet1 + 1, form == 2 ? "k_band_sync(" : "k_band_meet(") : NULL;
        CHECK_MSG(xb && back && put0 && meet0 && add0 && put1 && meet1 && meet1 < k7 && (!extra || extra > k7),
                  "gpt_tiny k6's shared band (%d): Xb %d, back %d, sums %d %d %d %d %d, one meeting too many %d", bands, !!xb,
                  !!back, !!put0, !!meet0, !!add0, !!put1, !!meet1, extra && extra < k7);
        CHECK(strstr(prog->source.s, form == 2 ? "__device__ float kiln_bp5[2048];" : "__device__ float kiln_bp5[3072];") &&
              strstr(prog->source.s, form == 2 ? "__device__ unsigned int kiln_bb5[8];" : "__device__ unsigned int kiln_bb5[32];") &&
              !strstr(prog->source.s, "kiln_bv5"));
      }
      if (prog && form == 2) {
        /* where the device keeps too few blocks resident the runtime vetoes the pair's launch: rendered
         * again, that pair takes the last tile's form, the others stay shared */
        CgOptions cv;
        OK(rt_codegen_options(&ko, &cg_dialect_cuda, &cv));
        const char *veto[64] = { 0 };
        CHECK(pl->n_kernels <= 64);
        veto[6] = "test: too few blocks resident";
        cv.group_veto = veto;
        CgProgram *again = NULL;
        if (pl->n_kernels <= 64) OK(cg_program_build(pl, &cg_dialect_cuda, &cv, &again));
        CHECK_MSG(again && !again->launch[6].resident && !again->launch[6].cooperative &&
                      strstr(again->launch[6].why, "then each band's last tile its 32 rows") && again->launch[9].resident,
                  "gpt_tiny, k6 vetoed: %s", again ? again->launch[6].why : "no program");
        cg_program_free(again);
      }
      if (prog && form == 1) {
        /* k6 (the output projection k5 and the first block's second layernorm): 4 tiles of 32 columns
         * a band of 32 rows, the row values out and back, the band's count put back to 0 */
        const char *k6 = strstr(prog->source.s, " kiln_k6("), *k7 = k6 ? strstr(k6, " kiln_k7(") : NULL;
        const char *bv = k6 ? strstr(k6, "kiln_bv5[mq * INT64_C(256) + nq] = ") : NULL;
        const char *count = k6 ? strstr(k6, "last = k_add_acq_rel(&kiln_band5[tile / 8], 1u) == 7u;") : NULL;
        const char *reset = k6 ? strstr(k6, "if (threadIdx.x == 0) kiln_band5[tile / 8] = 0u;") : NULL;
        const char *back = k6 ? strstr(k6, "xv[c] = __ldcg(kiln_bv5 + o * 256 + c * 8 + gl);") : NULL;
        CHECK_MSG(bv && count && reset && back && bv < count && count < reset && reset < back && back < k7,
                  "gpt_tiny k6's band: store %d, count %d, reset %d, read back %d", !!bv, !!count, !!reset, !!back);
        CHECK(strstr(prog->source.s, "__device__ float kiln_bv5[32768];") &&
              strstr(prog->source.s, "__device__ unsigned int kiln_band5[4];"));
      }
      cg_program_free(prog);
      plan_free(pl);
      te_free(te);
    }
  kiln_graph_free(g);
}

/* encoder4_d256's wide pairs on cuda: by default each layer's second FFN layer with the layernorm after it
 * as shared bands, 28 launches (narrow pairs alone) to 24; under reorder_sums 3 the output projections too
 * (each sum and bias computed in the order the residual's layernorm reads them): 20 */
static void encoder_pairs(void) {
  kiln_graph *g = shared_model("encoder4_d256");
  if (!g) return;
  for (int m = 0; m < 3; m++) {  /* the epilogues reordered, the defaults, narrow pairs alone */
    kiln_options ko = kiln_options_default();
    ko.backend = "cuda";
    if (m == 0) ko.reorder_sums = 3;
    if (m == 2) ko.gemm_rows = 1;
    TE *te;
    Plan *pl;
    CgProgram *prog = model_program(g, &ko, &cg_dialect_cuda, &te, &pl);
    int launches = 0, shared = 0;
    for (int i = 0; prog && i < prog->n_launch; i++) {
      const CgLaunch *l = &prog->launch[i];
      launches += l->grid > 0;
      shared += l->grid > 0 && strstr(l->why, "then every tile its columns of its 32 rows, the band's tiles meeting") != NULL;
    }
    int want = m == 0 ? 20 : m == 1 ? 24 : 28;
    CHECK_MSG(prog && launches == want && shared == (28 - want), "encoder4_d256 (%s): %d launches, %d shared bands, expected %d",
              m == 0 ? "reorder_sums 3" : m == 1 ? "defaults" : "gemm_rows 1", launches, shared, want);
    cg_program_free(prog);
    plan_free(pl);
    te_free(te);
  }
  kiln_graph_free(g);
}

/* Rows at the head of their GEMM's tiles: gpt_tiny's five pre-norm layernorms (each read only by the
 * projection after it: QKV, the first FFN layer, the head) computed by each 32x32 tile of that
 * GEMM for its rows, into Ph, its k loop reading A there: 16 launches to 11 under gemm_heads 1;
 * encoder4_d256's post-norm layernorms before the first FFN layer and the next layer's QKV (read
 * through the (sequence, batch) order), their rows also stored for the residuals by the first
 * column's tiles: 28 to 21. The default, and the cpu's plan under gemm_heads 1, unchanged. */
static void headed_gemms(const char *model, int plain, int fewer, int heads_in) {
  kiln_graph *g = shared_model(model);
  if (!g) return;
  for (int heads = -1; heads <= 3; heads += 2) {  /* the default, on, in clusters */
    kiln_options ko = kiln_options_default();
    ko.backend = "cuda";
    ko.gemm_heads = heads;
    ko.gemm_rows = 1;  /* narrow pairs alone: a wide pair's GEMM takes no rows at its head */
    TE *te;
    Plan *pl;
    CgProgram *prog = model_program(g, &ko, &cg_dialect_cuda, &te, &pl);
    int launches = 0, headed = 0, inside = 0;
    for (int i = 0; prog && i < prog->n_launch; i++) {
      const CgLaunch *l = &prog->launch[i];
      launches += l->grid > 0;
      headed += l->grid > 0 && strstr(l->why, "32 rows of k") &&
                strstr(l->why, heads == 3 ? " first, 32 lanes a row" : " first, 8 lanes a row") &&
                (heads == 3) == (strstr(l->why, "shared by clusters of 4 column tiles") != NULL);
      inside += l->grid == 0 && strstr(l->why, "at the head of its tiles") != NULL;
    }
    int want = heads >= 1 ? fewer : plain;
    CHECK_MSG(prog && launches == want && headed == (heads >= 1 ? heads_in : 0) && inside == headed,
              "%s gemm_heads %d: %d launches (%d headed, %d rows inside), expected %d", model, heads, launches, headed, inside,
              want);
    if (prog && heads >= 1 && !strcmp(model, "encoder4_d256")) {
      /* k9 (the second layer's QKV): the first layer's second layernorm k8, its rows stored for the
       * residual by the first column's tiles (in clusters: the first cluster's, each its share) */
      const char *k9 = strstr(prog->source.s, " kiln_k9("), *k10 = k9 ? strstr(k9, "\n}\n") : NULL;
      const char *st = k9 ? strstr(k9, heads == 3 ? "if (tn0 < 128 && kbeg == 0) b" : "if (tn0 == 0 && kbeg == 0) b") : NULL;
      CHECK_MSG(st && st < k10, "encoder4_d256 k9: no store of the head's rows by the first column's tiles");
    }
    if (prog && heads == 1 && !strcmp(model, "gpt_tiny")) {
      /* k1 (QKV, split into 3 K-spans): the rows of the embedding's layernorm k0 into Ph, every lane
       * of a row's 8 its columns c * 8 + gl, each point's x read from memory once and held in its
       * slot of Ph until P replaces it, then the k loop's A tiles read from Ph in place */
      const char *k1 = strstr(prog->source.s, " kiln_k1("), *k2 = k1 ? strstr(k1, "\n}\n") : NULL;
      const char *decl = k1 ? strstr(k1, "__shared__ float4 Phv[2304], Bsv[288];") : NULL;
      const char *row = k1 ? strstr(k1, "const int64_t mq = tm0 + r0 + rw < INT64_C(128) ? tm0 + r0 + rw : INT64_C(127);") : NULL;
      const char *held = row ? strstr(row, "Ph[c * 8 + gl][r0 + rw] = t") : NULL;  /* the row's x, read once */
      const char *put = held ? strstr(held, "Ph[c * 8 + gl][r0 + rw] = s") : NULL;
      const char *read = put ? strstr(put, "*(const float4 *)&(Ph + k0)[kk][cy * 4]") : NULL;
      CHECK_MSG(decl && row && held && put && read && read < k2, "gpt_tiny k1's head: Ph %d, row %d, held %d, put %d, read %d",
                !!decl, !!row, !!held, !!put, !!read);
      CHECK_MSG(k1 && !strstr(k1, "pfa[l] ="), "gpt_tiny k1 still fetches A through registers");
    }
    cg_program_free(prog);
    plan_free(pl);
    te_free(te);
  }
  /* the cpu backend has no heads: its plan is the same under gemm_heads 1 */
  kiln_options ko = kiln_options_default();
  ko.gemm_heads = 1;
  TE *te;
  Plan *pl;
  model_program(g, &ko, &cg_dialect_c, &te, &pl);
  int headed = 0;
  for (int i = 0; pl && i < pl->n_kernels; i++) headed += pl->kernels[i].headed;
  CHECK_MSG(pl && headed == 0, "cpu gemm_heads 1: %d headed kernels", headed);
  plan_free(pl);
  te_free(te);
  kiln_graph_free(g);
}

int main(void) {
  const Dialect *cu = &cg_dialect_cuda;
  CgOptions dflt = cg_options_default(), off = dflt, base = dflt, nolib = dflt;
  off.splitk = CG_SPLITK_OFF;
  base.row_variant = cg_row_variant("base");
  nolib.library = false;
  CHECK(dflt.row_variant == cg_row_variant("auto") && dflt.splitk == CG_SPLITK_ON && dflt.library);

  /* points: 16M f32 as vec4, 4M threads' worth in blocks of 256 */
  check("chain10_16M", cu, &dflt, (Want[]){ { 0, 16384, 256, 0, 0, false } }, 1);
  /* block rows: the auto variant keeps 32K-point rows half in shared memory (96 KB, all of L1
   * asked for) so that two 1024-thread blocks share an SM; base keeps them in registers */
  check("softmax_256x32768", cu, &dflt, (Want[]){ { 0, 256, 1024, 98304, 100, false } }, 1);
  check("softmax_256x32768", cu, &base, (Want[]){ { 0, 256, 1024, 0, 0, false } }, 1);
  /* rows of 128: a warp each, 8 rows a block; base: one 32-thread block a row */
  check("softmax_4096x128", cu, &dflt, (Want[]){ { 0, 512, 256, 0, 0, false } }, 1);
  check("softmax_4096x128", cu, &base, (Want[]){ { 0, 4096, 32, 0, 0, false } }, 1);
  check("layernorm_8192x4096", cu, &dflt, (Want[]){ { 0, 8192, 256, 0, 0, false } }, 1);
  /* GEMMs of a batch of 128: 64 tiles of 32x32 split into 4 K-spans (256 blocks), the last
   * layer's 4 tiles into 8; with split-K off one block per tile, and the last layer (too few
   * tiles unsplit) a block per output row instead */
  check("mlp_fwd_b128", cu, &dflt,
        (Want[]){ { 0, 256, 256, 0, 0, false }, { 1, 256, 256, 0, 0, false }, { 2, 32, 256, 0, 0, false } }, 3);
  check("mlp_fwd_b128", cu, &off,
        (Want[]){ { 0, 64, 256, 0, 0, false }, { 1, 64, 256, 0, 0, false }, { 2, 1280, 32, 0, 0, false } }, 3);
  /* cnn_train_b32's first convolution (25088 x 16 over 9): a 128x128 tile a block of 128 pixels,
   * 7/8 of its columns padding; with the tile fit 32x32 tiles, half padding, 784 blocks */
  {
    CgOptions fit = dflt;
    fit.gemm_tile_fit = true;
    check("cnn_train_b32", cu, &dflt, (Want[]){ { 0, 196, 256, 0, 0, false } }, 1);
    check("cnn_train_b32", cu, &fit, (Want[]){ { 0, 784, 256, 0, 0, false } }, 1);
    Built cb;
    if (build("cnn_train_b32", cu, &fit, &cb)) CHECK(strstr(cb.g->launch[0].why, "gemm 32x32 tiles"));
    built_free(&cb);
    /* under cuda_small_k 16 its sum over 9 points is a thread an output's loop: 401408 outputs */
    CgOptions small = dflt;
    small.gemm_small_k = 16;
    check("cnn_train_b32", cu, &small, (Want[]){ { 0, 1568, 256, 0, 0, false } }, 1);
    if (build("cnn_train_b32", cu, &small, &cb)) CHECK(strstr(cb.g->launch[0].why, "points: 1 a thread"));
    built_free(&cb);
    /* narrow contractions (cuda_narrow_depth): the last layer's 10 columns over 512 a warp a row, 16
     * blocks of 8 rows, its W staged in shared; the two wide layers keep their tiles */
    CgOptions nar = dflt;
    nar.narrow_depth = 256;
    check("mlp_fwd_b128", cu, &nar,
          (Want[]){ { 0, 256, 256, 0, 0, false }, { 1, 256, 256, 0, 0, false }, { 2, 16, 256, 0, 0, false } }, 3);
    if (build("mlp_fwd_b128", cu, &nar, &cb)) CHECK(strstr(cb.g->launch[2].why, "narrow: a warp a row") && !strstr(cb.g->launch[1].why, "narrow"));
    built_free(&cb);
    nar.narrow_depth = 513;  /* deeper than the layer: tiles as before */
    check("mlp_fwd_b128", cu, &nar,
          (Want[]){ { 0, 256, 256, 0, 0, false }, { 1, 256, 256, 0, 0, false }, { 2, 32, 256, 0, 0, false } }, 3);
    /* nothing else the fit touches among the GEMMs of a batch of 128 */
    check("mlp_fwd_b128", cu, &fit,
          (Want[]){ { 0, 256, 256, 0, 0, false }, { 1, 256, 256, 0, 0, false }, { 2, 32, 256, 0, 0, false } }, 3);
  }
  /* glsl (no warp reductions): the default's ~16 points a thread go as 16-byte vectors, the
   * variant asked by name as it is */
  {
    kiln_options ko = kiln_options_default();
    CgOptions go;
    if (rt_codegen_options(&ko, &cg_dialect_glsl, &go) == KILN_OK) {
      Built lb;
      if (build("layernorm_16384x1024", &cg_dialect_glsl, &go, &lb)) CHECK(strstr(lb.g->source.s, "vec4 w0"));
      built_free(&lb);
      go.row_variant = cg_row_variant("p16");
      if (build("layernorm_16384x1024", &cg_dialect_glsl, &go, &lb)) CHECK(!strstr(lb.g->source.s, "vec4 w0"));
      built_free(&lb);
    }
  }
  /* three projections of one input: one GEMM (32x32 tiles, 4 K-spans), three B tiles */
  check("siblings_128x256x256", cu, &dflt, (Want[]){ { 0, 128, 256, 0, 0, false } }, 1);
  {
    Built sb;
    if (build("siblings_128x256x256", cu, &dflt, &sb))
      CHECK(sb.g->n_launch == 1 && strstr(sb.g->launch[0].why, "gemm 32x32 tiles (4 k-groups of 4x4 a thread) x 4 K-spans "
                                                                 "of 64, 3 sums over one A tile (siblings)"));
    built_free(&sb);
  }
  /* a training step's logits (k1, 32 x 10 over 128) run in the kernel of the softmax
   * cross-entropy's rows (k2, a pair), and the hidden layer's gradient (k3, 32 x 128 over the
   * row's 10) after them, the pair's tail: a block a row; k1 and k2 launch nothing */
  check("mlp_train_b32", cu, &dflt,
        (Want[]){ { 1, 0, 256, 0, 0, false }, { 2, 0, 256, 0, 0, false }, { 3, 32, 256, 0, 0, false } }, 3);
  {
    Built tb;
    if (build("mlp_train_b32", cu, &dflt, &tb)) {
      CHECK_MSG(strstr(tb.g->launch[3].why, "rows: k1..k3, a block a row, one column a lane, then the row's points of the "
                                             "contraction over it"), "b32 k3: %s", tb.g->launch[3].why);
      const char *k3 = strstr(tb.g->source.s, "kiln_k3("), *end = k3 ? strstr(k3, "\n}\n") : NULL;
      /* the row's values kept for the tail, the block's barrier before its threads read them */
      const char *keep = k3 ? strstr(k3, "kiln_tail[lane] = s") : NULL, *bar = keep ? strstr(keep, "__syncthreads();") : NULL;
      CHECK(keep && bar && end && bar < end && strstr(bar, "= kiln_tail[q];") < end);
    }
    built_free(&tb);
  }
  /* bert: the QKV projection (its bias in the library's epilogue) and the FFN layers go to the
   * library (>= 2^26 multiply-adds). q, k and v are views of the QKV product plus bias (the
   * head split is the score and value products' index maps), so those two products are
   * generated batched GEMMs: the library's one batch stride cannot walk batch x head. Its
   * 1.5M scores are past the attention chain's default (2^20) */
  const Want bert[] = {
    { 0, 144, 256, 0, 0, true },   { 1, 384, 256, 0, 0, false }, { 2, 1536, 256, 0, 0, false },
    { 3, 192, 256, 0, 0, false },  { 4, 192, 256, 0, 0, true },  { 5, 1024, 64, 0, 0, false },
    { 6, 192, 256, 0, 0, true },   { 7, 192, 256, 0, 0, true },  { 8, 1024, 64, 0, 0, false },
  };
  /* k4, the output projection, reads attention's output as a plain [1024, 768] matrix (k3
   * computes it in the heads-merged order, kiln_options.reorder_sums), so it is a library call */
  check("bert_layer_b8s128", cu, &dflt, bert, 9);
  Want bert_nolib[9];
  for (int i = 0; i < 9; i++) bert_nolib[i] = bert[i], bert_nolib[i].library = false;
  check("bert_layer_b8s128", cu, &nolib, bert_nolib, 9);

  /* the library calls of bert's QKV projection, x [1024, 768] @ w [768, 2304] plus its bias,
   * and of the first FFN layer with bias and tanh GELU (the epilogue recognised through
   * te_gelu_tanh) */
  Built b;
  if (build("bert_layer_b8s128", cu, &dflt, &b) && b.g->n_launch == 9) {
    const CgLibGemm *l = &b.g->launch[0].lib;
    CHECK_MSG(l->M == 1024 && l->N == 2304 && l->K == 768 && l->batch == 1, "qkv: %lldx%lldx%lld x%lld", (long long)l->M,
              (long long)l->N, (long long)l->K, (long long)l->batch);
    CHECK_MSG(!l->a_t && l->lda == 768 && !l->b_t && l->ldb == 2304 && l->ldd == 2304 && l->bias_stage >= 0 &&
                  l->bias_off == 0 && !l->relu && !l->gelu,
              "qkv: a_t %d lda %lld b_t %d ldb %lld ldd %lld bias %d", l->a_t, (long long)l->lda, l->b_t, (long long)l->ldb,
              (long long)l->ldd, l->bias_stage);
    l = &b.g->launch[6].lib;
    CHECK(l->M == 1024 && l->N == 3072 && l->K == 768 && l->gelu && !l->relu && l->bias_stage >= 0 && l->bias_off == 0);
    CHECK(b.p->kernels[1].n_ins == 1 && b.p->kernels[1].kind == KN_REDUCE);  /* the scores read q + b, k + b in place */
  }
  built_free(&b);
  /* KILN_ATTENTION=1: scores, softmax rows and the product with v are one attention chain
   * launched as k3: two blocks a head (192), each staging the head's keys and values once and
   * taking 4 tiles of 16 query rows in turn, the rows' queries and scores beside them, 82432 B
   * of shared memory (all of L1 asked for); k1 and k2 launch nothing. Its output is stored in the
   * heads' merged order (kiln_options.chain_layout), so k4 is the library's call again */
  setenv("KILN_ATTENTION", "1", 1);
  const Want bert_chain[] = { { 0, 144, 256, 0, 0, true }, { 1, 0, 256, 0, 0, false }, { 2, 0, 256, 0, 0, false },
                              { 3, 192, 256, 82432, 100, false }, { 4, 192, 256, 0, 0, true } };
  check("bert_layer_b8s128", cu, &dflt, bert_chain, 5);
  if (build("bert_layer_b8s128", cu, &dflt, &b) && b.g->n_launch == 9) {
    CHECK(b.p->kernels[1].n_ins == 0 && b.p->kernels[3].n_ins == 1);  /* the chain reads q + b, k + b, v + b in place */
    CHECK(strstr(b.g->launch[1].why, "in the attention kernel k3") && strstr(b.g->source.s, "extern __shared__ float k_dyn[];"));
  }
  built_free(&b);
  /* a grid dialect without 16-byte vectors runs the chain as a thread per row (12288 rows) */
  Dialect novec = cg_dialect_cuda;
  novec.vec4_type = NULL;
  if (build("bert_layer_b8s128", &novec, &dflt, &b) && b.g->n_launch == 9)
    CHECK(b.g->launch[3].grid == 48 && b.g->launch[3].smem == 0 && strstr(b.g->launch[3].why, "a thread per row") &&
          strstr(b.g->source.s, "float kS[128];") && !strstr(b.g->source.s, "k_dyn"));
  built_free(&b);
  unsetenv("KILN_ATTENTION");

  /* cnn_train_b32's bias gradients: 32 rows of 6272 and 16 rows of 25088 points, each row
   * split over 6 and 24 blocks of 256 threads (two phases, about 576 blocks in all), each
   * bias's update in the same kernel; conv1's weight gradient, 144 rows of 25088, over 4
   * blocks a row (it was 144 blocks of 1024 threads); conv2's weight gradient, 5 tiles over
   * K = 6272, in 49 K-spans (at most 64). Split-K off: one block a row, as before. */
  check("cnn_train_b32", cu, &dflt,
        (Want[]){ { 16, 192, 256, 0, 0, false }, { 21, 384, 256, 0, 0, false }, { 20, 245, 256, 0, 0, false },
                  { 24, 576, 256, 0, 0, false } }, 4);
  check("cnn_train_b32", cu, &off, (Want[]){ { 16, 32, 512, 0, 0, false }, { 21, 16, 1024, 0, 0, false } }, 2);
  if (build("cnn_train_b32", cu, &dflt, &b)) {
    CHECK(strstr(b.g->launch[21].why, "24 blocks a row (two phases)") && strstr(b.g->source.s, "kiln_arrived21[16]"));
    CHECK(strstr(b.g->launch[24].why, "4 blocks a row (two phases)") && strstr(b.g->source.s, "kiln_arrived24[144]"));
    CHECK(strstr(b.g->launch[20].why, "4 k-groups of 4x4") && strstr(b.g->launch[20].why, "49 K-spans"));
    CgOptions grouped = dflt;
    grouped.group = CG_GROUP_SIBLINGS;
    built_free(&b);
    if (build("cnn_train_b32", cu, &grouped, &b)) {
      /* kernels alone plus groups: 17 launches (27 kernels); the pooling gradients' window
       * selects are stored before their reshapes, which compose into the padded reads */
      int launches = 0;
      for (int i = 0; i < b.g->n_launch; i++) launches += b.g->launch[i].group < 0;
      CHECK_MSG(launches + b.g->n_group == 17, "cnn_train_b32 grouped: %d launches", launches + b.g->n_group);
    }
  }
  built_free(&b);
  /* Its updates in their gradients' kernels: the dense layers' and the biases' (a sum kept as
   * [1,16,1,1], its update over [16]) by default; the convolutions' weights' too when a sum is
   * computed in the order of the reshapes it is read through (reorder_sums 2). With pads as
   * moves (bounds_moves 1) no kernel stores a pad: the gradients' convolutions read their
   * padded operands as the forward ones do. Both raced slower on the H200 and the cpu. */
  for (int v = 0; v < 2; v++) {
    if (v) setenv("KILN_BOUNDS_MOVES", "1", 1), setenv("KILN_REORDER_SUMS", "2", 1);
    if (build("cnn_train_b32", cu, &dflt, &b)) {
      int pads = 0, updates = 0;
      for (int i = 0; i < b.p->n_kernels; i++) {
        const Kernel *k = &b.p->kernels[i];
        pads += b.p->te->stages[k->anchor].op == OP_PAD;
        for (int j = 0; j < k->n_items; j++)
          updates += k->items[j].kind == IT_OUTER && b.p->te->stages[k->anchor].kind == ST_REDUCE &&
                     b.p->te->stages[k->items[j].stage].op == OP_SUB && k->items[j].store;
      }
      CHECK_MSG(pads == (v ? 0 : 3) && updates == (v ? 8 : 6) && b.p->n_kernels == (v ? 22 : 27),
                "cnn_train_b32 (bounds_moves %d): %d kernels store a pad, %d of 8 updates in their gradient's kernel, %d kernels",
                v, pads, updates, b.p->n_kernels);
    }
    built_free(&b);
  }
  unsetenv("KILN_BOUNDS_MOVES"), unsetenv("KILN_REORDER_SUMS");
  /* store_moved 2: conv1's gradient (a where over relu's mask, read by its weight gradient
   * through a transpose) is stored in its own layout, [32,16,28,28], by a kernel of its own;
   * by default the transposed [25088,16] is */
  for (int v = 0; v < 2; v++) {
    if (v) setenv("KILN_STORE_MOVED", "2", 1);
    if (build("cnn_train_b32", cu, &dflt, &b)) {
      int where = 0, moved = 0;
      for (int i = 0; i < b.p->n_kernels; i++) {
        const Stage *A = &b.p->te->stages[b.p->kernels[i].anchor];
        where += A->op == OP_WHERE && A->rank == 4 && A->shape[2] == 28;
        moved += A->op == OP_RESHAPE && A->rank == 2 && A->shape[0] == 25088;
      }
      CHECK_MSG(where == v && moved == !v, "cnn_train_b32 (store_moved %d): %d where, %d reshape kernels", v ? 2 : 1,
                where, moved);
    }
    built_free(&b);
  }
  unsetenv("KILN_STORE_MOVED");

  /* read-ahead stages and cluster split-K render what they say (raced on the H200, both off by
   * default): two register stages and double-buffered k-grouped tiles; a cluster of the 4
   * spans of each tile, kept out of launch groups, with no global partials */
  {
    CgOptions st2 = dflt, cl = dflt;
    st2.gemm_stages = 2;
    cl.cluster_splitk = true, cl.group = CG_GROUP_SIBLINGS;
    if (build("mlp_fwd_b128", cu, &st2, &b)) {
      CHECK(strstr(b.g->source.s, "float pfa1[4], pfb1[4];") && strstr(b.g->source.s, "(*As1)[36]"));
      CHECK(b.g->launch[0].grid == 256);
    }
    built_free(&b);
    if (build("mlp_fwd_b128", cu, &dflt, &b))
      CHECK(!strstr(b.g->source.s, "pfa1") && !strstr(b.g->source.s, "__cluster_dims__") && strstr(b.g->source.s, "kiln_part0"));
    built_free(&b);
    if (build("mlp_fwd_b128", cu, &cl, &b)) {
      CHECK(strstr(b.g->source.s, "__cluster_dims__(4, 1, 1) kiln_k0(") && strstr(b.g->source.s, "__cluster_dims__(8, 1, 1) kiln_k2("));
      CHECK(!strstr(b.g->source.s, "kiln_part0") && strstr(b.g->launch[0].why, "(a cluster)"));
      CHECK(b.g->n_group == 0 && b.g->launch[0].group < 0 && b.g->launch[0].grid == 256);
    }
    built_free(&b);
  }

  /* bf16 (the cuda backend's options: tensor cores on): bert_layer_b8s128_bf16 is 9 kernels in 7
   * launches, its attention one chain on tensor cores at any size (k3, the fragments' form: 8 warps of
   * 16 rows a block, 96 blocks, 55296 B of shared memory), the
   * projections and FFN layers tensor-core tiles whose operands go straight to shared memory, in 4
   * stages of dynamic shared memory (128x128 tiles: 75792 bytes, past 48 KB, so the carveout;
   * 64x64: 38928); the four weight
   * products (the head-batched ones are no strided matrices) and mlp's two large layers are the
   * library's too (bf16 cuBLASLt with their bias and GELU), the tiles staying as the fallback; its
   * rows kernels as in f32. mlp_fwd_b4096_bf16: two 128x128 direct tiles and a 32x32 one through
   * registers (its 10 columns are not whole 16-byte rows), whose K of 512 is long: 2 spans of 256
   * (cuda_long_k_blocks 256, the cuda default). Its layernorms' 1024 rows take 256 threads each (the
   * cuda default's row fill, 8192 warps; 64 a row without) where their rows are f32; bert's are bf16,
   * read 4 values a vector (cuda_row_half), 64 threads a row: the fill keeps 4 points a thread */
  {
    kiln_options ko = kiln_options_default();
    CgOptions tc;
    OK(rt_codegen_options(&ko, cu, &tc));
    CHECK(tc.mma_half && tc.mma_direct && !tc.mma_tf32);
    const Want bert16[] = {
      { 0, 144, 256, 75792, 100, true }, { 1, 0, 256, 0, 0, false },     { 2, 0, 256, 0, 0, false },
      { 3, 96, 256, 55296, 100, false }, { 4, 192, 256, 38928, 0, true }, { 5, 1024, 64, 0, 0, false },
      { 6, 192, 256, 75792, 100, true }, { 7, 192, 256, 38928, 0, true },  { 8, 1024, 64, 0, 0, false },
    };
    check("bert_layer_b8s128_bf16", cu, &tc, bert16, 9);
    check("mlp_fwd_b4096_bf16", cu, &tc,
          (Want[]){ { 0, 128, 256, 75792, 100, true }, { 1, 128, 256, 75792, 100, true }, { 2, 256, 256, 0, 0, false } }, 3);
    if (build("bert_layer_b8s128_bf16", cu, &tc, &b)) {
      int mma = 0;
      for (const char *q = b.g->source.s; (q = strstr(q, "k_mma_bf16(acc")); q++) mma++;
      CHECK_MSG(mma == 4 && b.g->n_launch == 9, "bert bf16: %d mma loops in %d kernels, expected 4 in 9", mma, b.g->n_launch);
      CHECK(strstr(b.g->launch[3].why, "attention: k1..k3") && strstr(b.g->launch[3].why, "bf16 mma"));
      /* the softmax's exponentials once: the sum's loop leaves each in its score's place, P's reads it
       * (the fragments' form, the default, writes that loop once for each half of a fragment's rows) */
      const char *k3 = strstr(b.g->source.s, " kiln_k3("), *k4 = k3 ? strstr(k3, " kiln_k4(") : NULL;
      int exps = 0, kept = 0;
      for (const char *q = k3; q && k4 && (q = strstr(q, "expf(")) && q < k4; q++) exps++;
      for (const char *q = k3; q && k4 && (q = strstr(q, "/* the summand, for the steps after */")) && q < k4; q++) kept++;
      CHECK_MSG(exps == 2 && kept == 2, "bert bf16's chain: %d exponentials, %d summands kept", exps, kept);
    }
    built_free(&b);
  }

  /* the options' switches reach codegen: stages 1, 2 or 4 (0 the default, gemm.c's rule), anything else
   * refused; clusters only in a dialect that has them */
  {
    kiln_options ko = kiln_options_default();
    CgOptions co;
    ko.cuda_gemm_stages = 4, ko.cuda_cluster = 1;
    if (rt_codegen_options(&ko, cu, &co) == KILN_OK) CHECK(co.gemm_stages == 4 && co.cluster_splitk);
    else CHECK_MSG(false, "%s", kiln_last_error());
    if (rt_codegen_options(&ko, &cg_dialect_c, &co) == KILN_OK) CHECK(!co.cluster_splitk);
    ko.cuda_gemm_stages = 0;
    if (rt_codegen_options(&ko, cu, &co) == KILN_OK) CHECK(co.gemm_stages == 0);  /* gemm.c's rule */
    ko.cuda_gemm_stages = 3;
    FAILS(KILN_ERR_INVALID_ARG, rt_codegen_options(&ko, cu, &co));
    CHECK(strstr(kiln_last_error(), "KILN_CUDA_GEMM_STAGES"));
    /* column rows: by default 2 on cuda (blocks of at most 256), off on glsl; 0, 1 and 2 either way;
     * anything else refused */
    kiln_options kc = kiln_options_default();
    kc.column_rows = -1;
    if (rt_codegen_options(&kc, cu, &co) == KILN_OK) CHECK(co.column_rows == 2);
    if (rt_codegen_options(&kc, &cg_dialect_glsl, &co) == KILN_OK) CHECK(!co.column_rows);
    kc.column_rows = 0;
    if (rt_codegen_options(&kc, cu, &co) == KILN_OK) CHECK(!co.column_rows);
    kc.column_rows = 1;
    if (rt_codegen_options(&kc, &cg_dialect_glsl, &co) == KILN_OK) CHECK(co.column_rows);
    kc.column_rows = 2;
    if (rt_codegen_options(&kc, cu, &co) == KILN_OK) CHECK(co.column_rows == 2);
    kc.column_rows = 3;
    FAILS(KILN_ERR_INVALID_ARG, rt_codegen_options(&kc, cu, &co));
    CHECK(strstr(kiln_last_error(), "KILN_COLUMN_ROWS"));
    /* narrow pairs a warp a row: from 512 rows on cuda by default, never on glsl; N any positive */
    kiln_options kp = kiln_options_default();
    kp.cuda_pair_warps = -1;
    if (rt_codegen_options(&kp, cu, &co) == KILN_OK) CHECK(co.pair_warps == 512);
    if (rt_codegen_options(&kp, &cg_dialect_glsl, &co) == KILN_OK) CHECK(co.pair_warps == 0);
    kp.cuda_pair_warps = 0;
    if (rt_codegen_options(&kp, cu, &co) == KILN_OK) CHECK(co.pair_warps == 0);
    kp.cuda_pair_warps = 64;
    if (rt_codegen_options(&kp, cu, &co) == KILN_OK) CHECK(co.pair_warps == 64);
    kp.cuda_pair_warps = -2;
    FAILS(KILN_ERR_INVALID_ARG, rt_codegen_options(&kp, cu, &co));
    CHECK(strstr(kiln_last_error(), "KILN_CUDA_PAIR_WARPS"));
    /* the tile fit: off by default, on when asked, nothing else taken */
    kiln_options kf = kiln_options_default();
    if (rt_codegen_options(&kf, cu, &co) == KILN_OK) CHECK(!co.gemm_tile_fit);
    kf.cuda_tile_fit = 1;
    if (rt_codegen_options(&kf, cu, &co) == KILN_OK) CHECK(co.gemm_tile_fit);
    kf.cuda_tile_fit = 2;
    refused(&kf, cu, "KILN_CUDA_TILE_FIT");
    /* small contractions a thread an output: below 16 points by default on cuda, below 4 under
     * 0 and elsewhere, below N when asked */
    kf = kiln_options_default();
    if (rt_codegen_options(&kf, cu, &co) == KILN_OK) CHECK(co.gemm_small_k == 16);
    if (rt_codegen_options(&kf, &cg_dialect_glsl, &co) == KILN_OK) CHECK(co.gemm_small_k == 0);
    kf.cuda_small_k = 0;
    if (rt_codegen_options(&kf, cu, &co) == KILN_OK) CHECK(co.gemm_small_k == 0);
    kf.cuda_small_k = 16;
    if (rt_codegen_options(&kf, cu, &co) == KILN_OK) CHECK(co.gemm_small_k == 16);
    if (rt_codegen_options(&kf, &cg_dialect_glsl, &co) == KILN_OK) CHECK(co.gemm_small_k == 0);
    kf.cuda_small_k = -2;
    refused(&kf, cu, "KILN_CUDA_SMALL_K");
    /* narrow contractions a warp a row: never by default, from N points when asked, never on glsl */
    kf = kiln_options_default();
    if (rt_codegen_options(&kf, cu, &co) == KILN_OK) CHECK(co.narrow_depth == 0);
    kf.cuda_narrow_depth = 256;
    if (rt_codegen_options(&kf, cu, &co) == KILN_OK) CHECK(co.narrow_depth == 256);
    if (rt_codegen_options(&kf, &cg_dialect_glsl, &co) == KILN_OK) CHECK(co.narrow_depth == 0);
    kf.cuda_narrow_depth = -2;
    refused(&kf, cu, "KILN_CUDA_NARROW_DEPTH");
    /* wide pairs' bands: shared and met by flags by default (3), 1 the band's last tile, 2 shared by the
     * band's tiles at a barrier, none on glsl */
    kf = kiln_options_default();
    if (rt_codegen_options(&kf, cu, &co) == KILN_OK) CHECK(co.pair_bands == 3);
    kf.cuda_pair_bands = 1;
    if (rt_codegen_options(&kf, cu, &co) == KILN_OK) CHECK(co.pair_bands == 1);
    kf.cuda_pair_bands = 2;
    if (rt_codegen_options(&kf, cu, &co) == KILN_OK) CHECK(co.pair_bands == 2);
    if (rt_codegen_options(&kf, &cg_dialect_glsl, &co) == KILN_OK) CHECK(co.pair_bands == 0);
    kf.cuda_pair_bands = 4;
    refused(&kf, cu, "KILN_CUDA_PAIR_BANDS");
    /* f32 attention chains' threads (chain_spread, pinned on gpt_tiny in chain_threads): spread by default on cuda */
    kf = kiln_options_default();
    if (rt_codegen_options(&kf, cu, &co) == KILN_OK) CHECK(co.chain_spread);
    kf.cuda_chain_spread = 0;
    if (rt_codegen_options(&kf, cu, &co) == KILN_OK) CHECK(!co.chain_spread);
    kf.cuda_chain_spread = 1;
    if (rt_codegen_options(&kf, cu, &co) == KILN_OK) CHECK(co.chain_spread);
    if (rt_codegen_options(&kf, &cg_dialect_glsl, &co) == KILN_OK) CHECK(!co.chain_spread);
    kf.cuda_chain_spread = 2;
    refused(&kf, cu, "KILN_CUDA_CHAIN_SPREAD");
    /* spans of at least 2 k-tiles by default: mlp_train_b32's first layer (784 deep, 4 tiles) in 9 spans, 36
     * blocks; at 1, 25 spans, 100 blocks */
    kf = kiln_options_default();
    first_spans(&kf, &co, "mlp_train_b32", 36, "x 9 K-spans of 96");
    CHECK(co.min_span_tiles == 0);
    kf.cuda_min_span = 1;
    first_spans(&kf, &co, "mlp_train_b32", 100, "x 25 K-spans of 32");
    CHECK(co.min_span_tiles == 1);
    kf.cuda_min_span = 65;
    refused(&kf, cu, "KILN_CUDA_MIN_SPAN");
    /* split-K towards 256 blocks by default: mlp_fwd_b128's first layer (784 deep, 64 tiles) in 4 spans; towards
     * 512, 7 spans, 448 blocks */
    kf = kiln_options_default();
    first_spans(&kf, &co, "mlp_fwd_b128", 256, "x 4 K-spans of 224");
    CHECK(co.split_target == 0);
    kf.cuda_split_target = 512;
    first_spans(&kf, &co, "mlp_fwd_b128", 448, "x 7 K-spans of 128");
    CHECK(co.split_target == 512);
    kf.cuda_split_target = 63;
    refused(&kf, cu, "KILN_CUDA_SPLIT_TARGET");
    kf.cuda_split_target = 4097;
    refused(&kf, cu, "KILN_CUDA_SPLIT_TARGET");
    /* cnn_train_b32's first convolution's weight gradient (9 x 16 over 25,088: k24): by default (cuda_thin_spans 128)
     * one 32x32 tile in 112 spans of 7 k-tiles, at 64 in 61 spans of 13, in block rows when off; glsl never */
    kf = kiln_options_default();
    CHECK(rt_codegen_options(&kf, cu, &co) == KILN_OK && co.thin_spans == 128);
    nth_launch(&kf, &co, "cnn_train_b32", 24, 112, "x 112 K-spans of 224");
    if (rt_codegen_options(&kf, &cg_dialect_glsl, &co) == KILN_OK) CHECK(co.thin_spans == 0);
    kf.cuda_thin_spans = 0;
    nth_launch(&kf, &co, "cnn_train_b32", 24, 576, "block rows long");
    kf.cuda_thin_spans = 64;
    nth_launch(&kf, &co, "cnn_train_b32", 24, 61, "gemm 32x32 tiles (4 k-groups of 4x4 a thread) x 61 K-spans of 416");
    kf.cuda_thin_spans = 128;
    nth_launch(&kf, &co, "cnn_train_b32", 24, 112, "x 112 K-spans of 224");
    kf.cuda_thin_spans = 31;
    refused(&kf, cu, "KILN_CUDA_THIN_SPANS");
    kf.cuda_thin_spans = -2;
    refused(&kf, cu, "KILN_CUDA_THIN_SPANS");
    kf.cuda_thin_spans = 129;
    refused(&kf, cu, "KILN_CUDA_THIN_SPANS");
    /* whole row values kept and rows widened to 8192 warps by default on cuda, neither on glsl; 0 turns each off */
    kf = kiln_options_default();
    if (rt_codegen_options(&kf, cu, &co) == KILN_OK) CHECK(co.row_values && co.row_fill == 8192);
    if (rt_codegen_options(&kf, &cg_dialect_glsl, &co) == KILN_OK) CHECK(!co.row_values && co.row_fill == 0);
    kf.row_values = 0, kf.cuda_row_fill = 0;
    if (rt_codegen_options(&kf, cu, &co) == KILN_OK) CHECK(!co.row_values && co.row_fill == 0);
    kf.row_values = 1, kf.cuda_row_fill = 4096;
    if (rt_codegen_options(&kf, cu, &co) == KILN_OK) CHECK(co.row_values && co.row_fill == 4096);
    if (rt_codegen_options(&kf, &cg_dialect_glsl, &co) == KILN_OK) CHECK(co.row_values && co.row_fill == 0);
    kf.row_values = 2;
    refused(&kf, cu, "KILN_ROW_VALUES");
    kf.row_values = -1, kf.cuda_row_fill = 63;
    refused(&kf, cu, "KILN_CUDA_ROW_FILL");
    kf.cuda_row_fill = -2;
    refused(&kf, cu, "KILN_CUDA_ROW_FILL");
    /* the chains' queries copied ahead: off by default, on cuda alone when asked */
    kf = kiln_options_default();
    if (rt_codegen_options(&kf, cu, &co) == KILN_OK) CHECK(!co.chain_prefetch);
    kf.cuda_chain_prefetch = 1;
    if (rt_codegen_options(&kf, cu, &co) == KILN_OK) CHECK(co.chain_prefetch);
    if (rt_codegen_options(&kf, &cg_dialect_glsl, &co) == KILN_OK) CHECK(!co.chain_prefetch);
    kf.cuda_chain_prefetch = 2;
    refused(&kf, cu, "KILN_CUDA_CHAIN_PREFETCH");
    /* the shared chain's blocks a multiprocessor: 0 (4) by default, 1 .. 8 on cuda alone */
    kf = kiln_options_default();
    if (rt_codegen_options(&kf, cu, &co) == KILN_OK) CHECK(co.chain_sm_blocks == 0);
    kf.cuda_chain_blocks = 2;
    if (rt_codegen_options(&kf, cu, &co) == KILN_OK) CHECK(co.chain_sm_blocks == 2);
    if (rt_codegen_options(&kf, &cg_dialect_glsl, &co) == KILN_OK) CHECK(co.chain_sm_blocks == 0);
    kf.cuda_chain_blocks = 9;
    refused(&kf, cu, "KILN_CUDA_CHAIN_BLOCKS");
    /* the chain's forms on tensor cores: 0 .. 4 (3 and 4 the keys over warps), on cuda alone */
    kf = kiln_options_default();
    kf.cuda_chain_mma = 4;
    if (rt_codegen_options(&kf, cu, &co) == KILN_OK) CHECK(co.chain_mma == 4);
    if (rt_codegen_options(&kf, &cg_dialect_glsl, &co) == KILN_OK) CHECK(co.chain_mma == 0);
    kf.cuda_chain_mma = 5;
    refused(&kf, cu, "KILN_CUDA_CHAIN_MMA");
    /* a max row's NaN flag in its value's reduction: off by default, on every grid backend when asked */
    kf = kiln_options_default();
    if (rt_codegen_options(&kf, cu, &co) == KILN_OK) CHECK(!co.nan_fold);
    kf.nan_fold = 1;
    if (rt_codegen_options(&kf, cu, &co) == KILN_OK) CHECK(co.nan_fold);
    if (rt_codegen_options(&kf, &cg_dialect_glsl, &co) == KILN_OK) CHECK(co.nan_fold);
    kf.nan_fold = 2;
    refused(&kf, cu, "KILN_NAN_FOLD");
    /* the shared chain's lanes a softmax row: 32 by default, 4, 8, 16 or 32 on cuda alone */
    kf = kiln_options_default();
    if (rt_codegen_options(&kf, cu, &co) == KILN_OK) CHECK(co.chain_lanes == 32);
    kf.cuda_chain_lanes = 16;
    if (rt_codegen_options(&kf, cu, &co) == KILN_OK) CHECK(co.chain_lanes == 16);
    if (rt_codegen_options(&kf, &cg_dialect_glsl, &co) == KILN_OK) CHECK(co.chain_lanes == 32);
    kf.cuda_chain_lanes = 12;
    refused(&kf, cu, "KILN_CUDA_CHAIN_LANES");
    kf.cuda_chain_lanes = 64;
    refused(&kf, cu, "KILN_CUDA_CHAIN_LANES");
    /* library algorithms timed at load: 0 .. 16 on every backend (the cuda backend reads it) */
    kf = kiln_options_default();
    CHECK(kf.cuda_lt_algos == 0);
    kf.cuda_lt_algos = 16;
    CHECK(rt_codegen_options(&kf, cu, &co) == KILN_OK);
    kf.cuda_lt_algos = 17;
    refused(&kf, cu, "KILN_CUDA_LT_ALGOS");
    kf.cuda_lt_algos = -1;
    refused(&kf, cu, "KILN_CUDA_LT_ALGOS");
    /* split-K by flags: off by default; on, mlp_fwd_b128's three split GEMMs each release their spans'
     * partials by flags and keep no arrival count, in the same 3 launches; none on glsl */
    kf = kiln_options_default();
    if (rt_codegen_options(&kf, cu, &co) == KILN_OK) CHECK(!co.split_flags);
    kf.cuda_split_flags = 1;
    if (rt_codegen_options(&kf, &cg_dialect_glsl, &co) == KILN_OK) CHECK(!co.split_flags);
    if (rt_codegen_options(&kf, cu, &co) == KILN_OK) {
      CHECK(co.split_flags);
      Built fb;
      if (build("mlp_fwd_b128", cu, &co, &fb)) {
        int done = 0, meets = 0, launches = 0;
        for (const char *s = fb.g->source.s; (s = strstr(s, "      k_flag_done(kiln_sf")); s++) done++;
        for (const char *s = fb.g->source.s; (s = strstr(s, "    k_band_meet(kiln_sf")); s++) meets++;
        for (int i = 0; i < fb.g->n_launch; i++) launches += fb.g->launch[i].grid > 0;
        CHECK_MSG(done == 3 && meets == 3 && launches == 3 && !strstr(fb.g->source.s, "kiln_arrived"),
                  "mlp_fwd_b128 split by flags: %d done, %d meetings, %d launches", done, meets, launches);
      }
      built_free(&fb);
    }
    /* programmatic dependent launch: 1 each kernel waits and lets the next launch, 2 (cuda's default) it only
     * waits; 0 neither; glsl has none */
    kf = kiln_options_default();
    if (rt_codegen_options(&kf, cu, &co) == KILN_OK) CHECK(co.dependent_launch == 2);
    if (rt_codegen_options(&kf, &cg_dialect_glsl, &co) == KILN_OK) CHECK(co.dependent_launch == 0);
    kf.cuda_pdl = 0;
    if (rt_codegen_options(&kf, cu, &co) == KILN_OK) CHECK(co.dependent_launch == 0);
    kf.cuda_pdl = 2;
    if (rt_codegen_options(&kf, cu, &co) == KILN_OK) {
      CHECK(co.dependent_launch == 2);
      Built pb;
      if (build("mlp_train_b32", cu, &co, &pb))
        CHECK(strstr(pb.g->source.s, ") {\n  k_dependent_wait();\n") && !strstr(pb.g->source.s, "  k_dependent_entry();"));
      built_free(&pb);
      co.dependent_launch = 1;
      if (build("mlp_train_b32", cu, &co, &pb))
        CHECK(strstr(pb.g->source.s, ") {\n  k_dependent_entry();\n") && !strstr(pb.g->source.s, "  k_dependent_wait();"));
      built_free(&pb);
    }
    kf.cuda_pdl = 3;
    refused(&kf, cu, "KILN_CUDA_PDL");
    /* copied tiles' groups added in the tree of barriers by default (the race found one barrier no faster);
     * after one barrier when asked */
    kf = kiln_options_default();
    if (rt_codegen_options(&kf, cu, &co) == KILN_OK) CHECK(co.gemm_kg_tree);
    kf.cuda_kg_sum = 1;
    if (rt_codegen_options(&kf, cu, &co) == KILN_OK) CHECK(!co.gemm_kg_tree);
    kf.cuda_kg_sum = 2;
    refused(&kf, cu, "KILN_CUDA_KG_SUM");
    /* a pair's weights staged: a warp a row by default on cuda, off or also a block a row when asked,
     * never on glsl */
    kf = kiln_options_default();
    if (rt_codegen_options(&kf, cu, &co) == KILN_OK) CHECK(co.pair_stage == 1);
    kf.cuda_pair_stage = 0;
    if (rt_codegen_options(&kf, cu, &co) == KILN_OK) CHECK(co.pair_stage == 0);
    kf.cuda_pair_stage = 2;
    if (rt_codegen_options(&kf, cu, &co) == KILN_OK) CHECK(co.pair_stage == 2);
    kf.cuda_pair_stage = 1;
    if (rt_codegen_options(&kf, &cg_dialect_glsl, &co) == KILN_OK) CHECK(co.pair_stage == 0);
    kf.cuda_pair_stage = 3;
    refused(&kf, cu, "KILN_CUDA_PAIR_STAGE");
  }

  /* mlp_train_b1024: dW2 (k6) and dW1 with its SGD update (k8) are large enough for the cost
   * rule, but the library cannot take k8 (its stored value is the update), so they are not
   * kept alone: k6 shares a launch with the loss (k4) and db2 (k5); db1 (k7, 64 threads)
   * launches alone, then k8: 5 launches in all. Nor can the library take k0, which stores
   * relu(x @ W1 + b1) beside the product. */
  {
    CgOptions grouped = dflt;
    grouped.group = CG_GROUP_SIBLINGS;
    if (build("mlp_train_b1024", cu, &grouped, &b)) {
      int launches = 0;
      for (int i = 0; i < b.g->n_launch; i++) launches += b.g->launch[i].group < 0 && b.g->launch[i].grid > 0;
      CHECK_MSG(launches + b.g->n_group == 5, "mlp_train_b1024 grouped: %d launches", launches + b.g->n_group);
      CHECK(b.g->n_launch == 9 && b.g->launch[6].group >= 0 && b.g->launch[6].group == b.g->launch[4].group &&
            b.g->launch[5].group == b.g->launch[4].group && !b.g->launch[8].library);
      CHECK(!strstr(b.g->launch[0].why, "alone: library") && b.p->kernels[0].n_items == 2);
    }
    built_free(&b);
  }

  /* column rows (the cuda backend's default; off in cg_options_default): mlp_train_b1024's bias
   * gradient db1, the sum over the batch of a [1024, 128] tensor, reads across rows: 512 threads
   * of 2 points with them, the row race's 64 of 16 without; so does db2 (k5, 10 rows: 256 threads
   * of 4 points without); its row kernels (whose reads run along the row) keep theirs */
  {
    CgOptions cols = dflt;
    cols.column_rows = 1;
    Built c;
    if (build("mlp_train_b1024", cu, &dflt, &b) && build("mlp_train_b1024", cu, &cols, &c)) {
      CHECK_MSG(b.g->launch[7].block == 64 && !strstr(b.g->launch[7].why, "across rows"), "k7 %d threads: %s", b.g->launch[7].block,
                b.g->launch[7].why);
      CHECK_MSG(c.g->launch[7].block == 512 && strstr(c.g->launch[7].why, "reads across rows: 2 points a thread"), "k7 %d threads: %s",
                c.g->launch[7].block, c.g->launch[7].why);
      CHECK_MSG(b.g->launch[5].block == 256 && c.g->launch[5].block == 512, "k5: %d threads, %d with column rows",
                b.g->launch[5].block, c.g->launch[5].block);
      for (int i = 0; i < b.g->n_launch; i++)
        if (i != 5 && i != 7) CHECK_MSG(b.g->launch[i].block == c.g->launch[i].block, "k%d: %d threads, %d with column rows",
                                        i, b.g->launch[i].block, c.g->launch[i].block);
    }
    built_free(&b);
    built_free(&c);
  }

  /* column rows in blocks of at most 256 threads (column_rows 2): mlp_train_b1024's bias
   * gradients db2 (k5) and db1 (k7) take 4 points a thread and join the launch groups of their
   * neighbours, 6 launches becoming 3; at 1 they run alone in 512 threads */
  {
    CgOptions one = dflt, two = dflt;
    one.group = two.group = CG_GROUP_SIBLINGS;
    one.column_rows = 1, two.column_rows = 2;
    Built c;
    if (build("mlp_train_b1024", cu, &one, &b) && build("mlp_train_b1024", cu, &two, &c)) {
      int n1 = 0, n2 = 0;
      for (int i = 0; i < b.g->n_launch; i++) n1 += b.g->launch[i].group < 0 && b.g->launch[i].grid > 0;
      for (int i = 0; i < c.g->n_launch; i++) n2 += c.g->launch[i].group < 0 && c.g->launch[i].grid > 0;
      CHECK_MSG(n1 + b.g->n_group == 6 && n2 + c.g->n_group == 3, "launches: %d at column rows 1, %d at 2",
                n1 + b.g->n_group, n2 + c.g->n_group);
      for (int k = 5; k <= 7; k += 2) {
        CHECK_MSG(b.g->launch[k].block == 512 && b.g->launch[k].group < 0, "k%d at 1: %s", k, b.g->launch[k].why);
        CHECK_MSG(c.g->launch[k].block == 256 && c.g->launch[k].group >= 0 &&
                      strstr(c.g->launch[k].why, "reads across rows: 4 points a thread"),
                  "k%d at 2: %d threads, group %d: %s", k, c.g->launch[k].block, c.g->launch[k].group, c.g->launch[k].why);
      }
    }
    built_free(&b);
    built_free(&c);
  }

  /* narrow pairs a warp a row (pair_warps; 512 on cuda by default): from 512 rows, mlp_train_b1024's logits
   * and their loss (1024 rows), then their tail, run 8 rows a block, 128 blocks, where
   * mlp_train_b32's 32 rows keep a block a row; the source has no block barrier and no shared
   * partials, and the warp's barrier before its lanes read the row's values for the tail */
  {
    CgOptions pw = dflt;
    pw.pair_warps = 512;
    Built c;
    if (build("mlp_train_b1024", cu, &dflt, &b) && build("mlp_train_b1024", cu, &pw, &c)) {
      CHECK_MSG(b.g->launch[3].grid == 1024 && strstr(b.g->launch[3].why, "a block a row"), "k3: %s", b.g->launch[3].why);
      CHECK_MSG(c.g->launch[3].grid == 128 && c.g->launch[3].block == 256 && strstr(c.g->launch[3].why, "a warp a row"),
                "k3 with pair warps: grid %lld: %s", (long long)c.g->launch[3].grid, c.g->launch[3].why);
      StrBuf src = { 0 };
      if (cg_render_plan(c.p, cu, &pw, c.g, &src) == KILN_OK && src.s) {
        const char *k3 = strstr(src.s, "kiln_k3("), *end = k3 ? strstr(k3, "\n}\n") : NULL;
        CHECK(k3 && end && strstr(k3, "const int64_t o = ob * 8 + wp;") < end);
        CHECK(k3 && end && (!strstr(k3, "__syncthreads") || strstr(k3, "__syncthreads") > end) &&
              (!strstr(k3, "kiln_pr") || strstr(k3, "kiln_pr") > end));
        const char *keep = k3 ? strstr(k3, "kiln_tail[wp][lane] = s") : NULL, *bar = keep ? strstr(keep, "__syncwarp();") : NULL;
        CHECK(keep && bar && end && bar < end && strstr(bar, "= kiln_tail[wp][q];") < end);
      } else CHECK_MSG(0, "mlp_train_b1024 with pair warps: %s", kiln_last_error());
      sb_free(&src);
    }
    built_free(&b);
    built_free(&c);
    if (build("mlp_train_b32", cu, &pw, &c))
      CHECK_MSG(c.g->launch[3].grid == 32 && strstr(c.g->launch[3].why, "a block a row"), "b32 k3: %s", c.g->launch[3].why);
    built_free(&c);
    /* ... and with the weights staged (pair_stage): 10 x 128 of them, rows of 11 floats, one block barrier
     * before the rows; the tail (the hidden layer's gradient, W2 read transposed) reads the same stage;
     * the block form (32 rows) stages nothing but under pair_stage 2 */
    CgOptions ps = pw;
    ps.pair_stage = 1;
    if (build("mlp_train_b1024", cu, &ps, &c)) {
      StrBuf src = { 0 };
      if (cg_render_plan(c.p, cu, &ps, c.g, &src) == KILN_OK && src.s) {
        const char *k3 = strstr(src.s, "kiln_k3("), *end = k3 ? strstr(k3, "\n}\n") : NULL;
        const char *nb = k3 ? strstr(k3, "__shared__ float kiln_nb[1408];") : NULL, *bar = nb ? strstr(nb, "__syncthreads();") : NULL;
        const char *rows = k3 ? strstr(k3, "const int64_t o = ob * 8 + wp;") : NULL;
        const char *bar2 = bar ? strstr(bar + 1, "__syncthreads") : NULL;
        CHECK_MSG(nb && bar && rows && end && bar < rows && rows < end && (!bar2 || bar2 > end) &&
                      strstr(rows, "pa[q] = __fmaf_rn(fa, kiln_nb[kq * 11 + q], pa[q]);") < end &&
                      strstr(rows, "ta = __fmaf_rn(s42, kiln_nb[h * 11 + q], ta);") < end,  /* the tail reads W2 there too */
                  "mlp_train_b1024's pair with its weights staged");
        CHECK(c.p && cg_pair_staged(&c.p->kernels[2], &ps) == 128 * 11);
      }
      sb_free(&src);
    }
    built_free(&c);
    if (build("mlp_train_b32", cu, &ps, &c)) CHECK(c.p && cg_pair_staged(&c.p->kernels[2], &ps) == 0);
    built_free(&c);
    /* pair_stage 2: mlp_train_b32's pair a block a row stages W2 too, one block barrier before the rows; a thread
     * a depth point of the logits, a point of the tail */
    ps.pair_stage = 2;
    if (build("mlp_train_b32", cu, &ps, &c)) {
      CHECK(c.p && cg_pair_staged(&c.p->kernels[2], &ps) == 128 * 11);
      const char *k3 = strstr(c.g->source.s, "kiln_k3("), *end = k3 ? strstr(k3, "\n}\n") : NULL;
      const char *nb = k3 ? strstr(k3, "__shared__ float kiln_nb[1408];") : NULL;
      const char *rows = k3 ? strstr(k3, "for (int64_t o = blockIdx.x;") : NULL;
      CHECK_MSG(nb && rows && end && nb < rows && strstr(nb, "__syncthreads();") < rows &&
                    strstr(rows, "pa[q] = __fmaf_rn(fa, kiln_nb[kq * 11 + q], pa[q]);") < end &&
                    strstr(rows, "kiln_nb[h * 11 + q]") < end,
                "mlp_train_b32's pair a block a row with its weights staged");
    }
    built_free(&c);
  }

  /* a loop dialect: one call per kernel, through the trampoline */
  const Want loop[] = { { 0, 1, 1, 0, 0, false }, { 1, 1, 1, 0, 0, false }, { 2, 1, 1, 0, 0, false } };
  check("mlp_fwd_b128", &cg_dialect_c, &dflt, loop, 3);
  layernorm_backward();
  banded_pairs();
  encoder_pairs();
  chain_threads();
  headed_gemms("gpt_tiny", 16, 11, 5);
  headed_gemms("encoder4_d256", 28, 21, 7);
  check("softmax_256x32768", &cg_dialect_c, &dflt, loop, 1);

  /* every standard workload: the common invariants in both dialects */
  for (int i = 0; i < wl_n_standard; i++) {
    check(wl_standard[i], cu, &dflt, NULL, 0);
    check(wl_standard[i], &cg_dialect_c, &dflt, NULL, 0);
  }
  FAILS(KILN_ERR_INVALID_ARG, cg_program_build(NULL, cu, &dflt, &b.g));
  CHECK(b.g == NULL);

  /* every allocation of cg_program_build can fail: each attempt returns KILN_ERR_NO_MEMORY
   * and hands back nothing (the ASan run checks the leaks), until the count passes the last */
  const char *small[] = { "mlp_fwd_b2", "linear_relu_512x512x512", "softmax_8x40000" };
  for (int w = 0; w < 3; w++)
    for (int d = 0; d < 2; d++) {
      Built nb;
      if (!build(small[w], d ? cu : &cg_dialect_c, &dflt, &nb)) { built_free(&nb); continue; }
      bool done = false;
      long n = 1;
      for (; n < 20000 && !done; n++) {
        CgProgram *g = (CgProgram *)&n;  /* not NULL: a failure must clear it */
        kiln_alloc_fail_after(n);
        kiln_status st = cg_program_build(nb.p, d ? cu : &cg_dialect_c, &dflt, &g);
        kiln_alloc_fail_after(0);
        CHECK_MSG(st == KILN_OK || (st == KILN_ERR_NO_MEMORY && !g), "%s allocation %ld: %s", small[w], n,
                  kiln_status_name(st));
        if (st == KILN_OK) CHECK(g->n_launch == nb.g->n_launch && !strcmp(g->source.s, nb.g->source.s));
        done = st == KILN_OK;
        if (st == KILN_OK) cg_program_free(g);
      }
      CHECK_MSG(done && n > 3, "%s: %ld allocations", small[w], n);
      built_free(&nb);
    }
  TEST_MAIN_END();
}
