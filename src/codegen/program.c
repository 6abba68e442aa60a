/*
 * program.c — what codegen hands on. Takes a Plan, a Dialect and the caller's CgOptions;
 * produces a CgProgram: the whole translation unit (render.c) and, for every plan kernel,
 * its launch as data — the entry symbol, the stages bound to its parameters, grid and
 * block, dynamic shared memory and carveout, and whether a library GEMM may replace it
 * (library.c). Every number comes from the same decisions the renderer made (cg_kernel_shape,
 * cg_gpu_rows, cg_gemm_match), so a backend only checks them against its device and
 * applies them; it derives nothing.
 *
 * Launch rules of grid dialects (one thread per point, blocks capped at 2^20, beyond which
 * the kernels stride):
 *   points      256 threads, ceil(outer / 256) blocks (vec4: outer / 4 points of work)
 *   block rows  threads * rows per block (cg_gpu_rows), ceil(outer / rows) blocks; a long
 *               row's cache in dynamic shared memory asks for all of L1 as shared memory
 *   gemm        CG_GEMM_THREADS per block, cg_gemm_blocks blocks
 * Loop dialects: one call of the kernel (its trampoline where the dialect has one).
 */
#include "codegen.h"

#include <stdlib.h>
#include <string.h>

enum { POINT_THREADS = 256, SMEM_CARVEOUT_ALL = 100 };
static const int64_t GRID_CAP = (int64_t)1 << 20;

CgOptions cg_options_default(void) {
  return (CgOptions){ .row_variant = cg_row_variant(NULL), .splitk = CG_SPLITK_ON, .library = true };
}

static int64_t capped_blocks(int64_t work, int64_t per_block) {
  int64_t b = (work + per_block - 1) / per_block;
  return b < GRID_CAP ? b : GRID_CAP;
}

/* Grid, block, shared memory and why, for a non-host kernel of a grid dialect. */
static void grid_launch(const Plan *p, const Kernel *k, const Dialect *d, const CgOptions *o, CgLaunch *l) {
  CgGpuShape s = cg_kernel_shape(p, k, d, o);
  if (s == CG_GPU_GEMM) {
    CgGemm g;
    bool ok = cg_gemm_match(p, k, o, &g);  /* cg_kernel_shape said so */
    KILN_ASSERT(ok);
    l->block = CG_GEMM_THREADS;
    l->grid = cg_gemm_blocks(&g);
    int n = snprintf(l->why, sizeof l->why, "gemm %dx%d tiles (%dx%d a thread)", g.bm, g.bn, g.tm, g.tn);
    if (g.splits > 1 && n > 0 && (size_t)n < sizeof l->why)
      snprintf(l->why + n, sizeof l->why - (size_t)n, " x %d K-spans of %lld", g.splits, (long long)g.kspan);
    if (o->library) l->library = cg_library_match(p, k, o, &l->lib);
    return;
  }
  if (s == CG_GPU_BLOCK_ROWS) {
    CgRows ro = cg_gpu_rows(k, o->row_variant);  /* the kernel's unrolled row loops assume exactly this */
    l->block = ro.threads * ro.rows;
    l->grid = capped_blocks(k->outer_numel, ro.rows);
    if (ro.smem > 0) l->smem = ro.smem, l->smem_carveout = SMEM_CARVEOUT_ALL;
    int n = snprintf(l->why, sizeof l->why, "block rows %s: %d threads x %d rows%s",
                     cg_row_variant_name(cg_row_variant_resolve(k, o->row_variant)), ro.threads, ro.rows,
                     ro.vec == 4 ? ", 16-byte vectors" : "");
    if (ro.smem > 0 && n > 0 && (size_t)n < sizeof l->why)
      snprintf(l->why + n, sizeof l->why - (size_t)n, ", row cache %d B shared, %d blocks an SM", ro.smem, ro.min_blocks);
    return;
  }
  bool vec = s == CG_GPU_VEC4;
  l->block = POINT_THREADS;
  l->grid = capped_blocks(vec ? k->outer_numel / 4 : k->outer_numel, POINT_THREADS);
  snprintf(l->why, sizeof l->why, vec ? "vec4 points: 4 a thread, %d threads" : "points: 1 a thread, %d threads",
           POINT_THREADS);
}

static kiln_status launch_of(const Plan *p, int ki, const Dialect *d, const CgOptions *o, Arena *a, CgLaunch *l) {
  const Kernel *k = &p->kernels[ki];
  *l = (CgLaunch){ .kernel = ki, .host = k->kind == KN_HOST };
  l->params = arena_alloc(a, sizeof *l->params * (size_t)(k->n_ins + k->n_items + 1));
  if (!l->params) return kiln_fail(KILN_ERR_NO_MEMORY, "codegen: no memory for kernel %d's parameters", ki);
  l->n_params = cg_kernel_params(p, k, l->params);
  if (l->host) {
    snprintf(l->why, sizeof l->why, "host: no device form, evaluated by ref (a counted fallback)");
    return KILN_OK;
  }
  cg_kernel_name(ki, !d->grid && d->trampoline, l->name);
  if (d->grid) grid_launch(p, k, d, o, l);
  else {
    l->grid = 1, l->block = 1;
    snprintf(l->why, sizeof l->why, "loop: one call%s", d->trampoline ? " through the trampoline" : "");
  }
  if (l->library) {
    size_t n = strlen(l->why);
    snprintf(l->why + n, sizeof l->why - n, "; library %lldx%lldx%lld x%lld", (long long)l->lib.M,
             (long long)l->lib.N, (long long)l->lib.K, (long long)l->lib.batch);
  }
  return KILN_OK;
}

kiln_status cg_program_build(const Plan *p, const Dialect *d, const CgOptions *o, CgProgram **out) {
  if (!out) return kiln_fail(KILN_ERR_INVALID_ARG, "cg_program_build: out is NULL");
  *out = NULL;
  if (!p || !d) return kiln_fail(KILN_ERR_INVALID_ARG, "cg_program_build: %s is NULL", p ? "dialect" : "plan");
  CgOptions def = cg_options_default();
  if (!o) o = &def;
  CgProgram *g = kiln_calloc(1, sizeof *g);
  if (!g) return kiln_fail(KILN_ERR_NO_MEMORY, "codegen: no memory for a program");
  /* the source first: the library matcher may add expressions to the TE (hash-consed GELU
   * probes), and rendering must see the TE as the plan left it */
  kiln_status st = cg_render_plan(p, d, o, &g->source);
  g->launch = st ? NULL : arena_alloc(&g->arena, sizeof *g->launch * (size_t)(p->n_kernels + 1));
  if (!st && !g->launch) st = kiln_fail(KILN_ERR_NO_MEMORY, "codegen: no memory for the launch table");
  for (int i = 0; !st && i < p->n_kernels; i++) {
    st = launch_of(p, i, d, o, &g->arena, &g->launch[i]);
    g->n_launch = i + 1;
  }
  if (st) {
    cg_program_free(g);
    return st;
  }
  *out = g;
  return KILN_OK;
}

void cg_program_free(CgProgram *g) {
  if (!g) return;
  sb_free(&g->source);
  arena_free(&g->arena);
  kiln_free(g);
}

void cg_program_print(const CgProgram *g, FILE *f) {
  for (int i = 0; g && i < g->n_launch; i++) {
    const CgLaunch *l = &g->launch[i];
    fprintf(f, "k%-3d %-9s grid %7lld x %4d  smem %6d%s  %s  %s\n", l->kernel, l->host ? "(host)" : l->name,
            (long long)l->grid, l->block, l->smem, l->smem_carveout ? "+carve" : "      ",
            l->library ? "library" : "kernel ", l->why);
  }
}
