/*
 * test_plan.c — the planner on its own (no compiling): boundary reasons, KILN_CSE,
 * the memory plan's reuse by liveness, plan_check, the printer and the dot writer.
 */
#include <math.h>
#include "test.h"

#include "../../bench/workloads.c"
#include "plan/plan.h"

/* g lowered (into *te) and planned under o, the plan checked; NULL on failure. */
static Plan *plan_graph(const Graph *g, const kiln_options *o, TE **te) {
  Plan *p = NULL;
  *te = NULL;
  OK(te_lower_split(g, o->row_sums != 0, te));
  if (!*te) return NULL;
  PlanOptions po = plan_options(o);
  OK(plan_build(*te, &po, &p));
  if (p) OK(plan_check(p));
  return p;
}

static Plan *plan_of(Workload *w, int fuse, int cse, TE **te) {
  kiln_options o = kiln_options_default();
  o.fuse = fuse;
  o.cse = cse;
  return plan_graph(&w->g->g, &o, te);
}

/* A model of ../shared (path relative to it) loaded into *g; false (printing a skip) if absent. */
static bool load_shared(const char *rel, kiln_graph **g) {
  const char *shared = getenv("KILN_SHARED_DIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", shared ? shared : "../shared", rel);
  *g = NULL;
  if (kiln_graph_load_onnx(path, g) == KILN_OK) return true;
  printf("skip: %s\n", path);
  return false;
}

static bool printed_has(const Plan *p, const char *needle) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  plan_print(p, f);
  fclose(f);
  bool found = buf && strstr(buf, needle);
  free(buf);
  return found;
}

/* Default: softmax recomputes exp in one kernel; KILN_CSE=1 materialises it. */
static void cse(void) {
  Workload w;
  OK(wl_build("softmax_32x64", &w));
  TE *te;
  Plan *p = plan_of(&w, 1, 0, &te);
  CHECK(p && p->n_kernels == 1 && p->arena_bytes == 0);
  plan_free(p);
  te_free(te);
  p = plan_of(&w, 1, 1, &te);
  CHECK_MSG(p && p->n_kernels == 2, "cse softmax: %d kernels", p ? p->n_kernels : -1);
  if (p) {
    CHECK(p->arena_bytes >= 32 * 64 * 4);  /* the shared exp crosses a boundary */
    CHECK(printed_has(p, "(cse)"));
    CHECK(printed_has(p, "read by kernel"));
  }
  plan_free(p);
  te_free(te);
  wl_free(&w);
}

/* Eager mlp: intermediates reuse memory once dead, so the peak is below their sum. */
static void liveness(void) {
  Workload w;
  OK(wl_build("mlp_fwd_b8", &w));
  TE *te;
  Plan *p = plan_of(&w, 0, 0, &te);
  if (p) {
    int64_t sum = 0;
    for (int s = 0; s < te->n_stages; s++)
      if (p->offset[s] >= 0) sum += (te->stages[s].numel * 4 + 63) & ~63;
    CHECK(p->n_kernels == 8);
    CHECK_MSG(p->arena_bytes < sum, "peak %lld, sum of intermediates %lld", (long long)p->arena_bytes, (long long)sum);
    /* no two intermediates live at once share bytes */
    for (int a = 0; a < te->n_stages; a++)
      for (int b = a + 1; b < te->n_stages; b++) {
        if (p->offset[a] < 0 || p->offset[b] < 0) continue;
        int ka = p->kernel_of[a], kb = p->kernel_of[b], la = ka, lb = kb;
        for (int k = 0; k < p->n_kernels; k++)
          for (int i = 0; i < p->kernels[k].n_ins; i++) {
            if (p->kernels[k].ins[i] == a && k > la) la = k;
            if (p->kernels[k].ins[i] == b && k > lb) lb = k;
          }
        bool live_together = ka <= lb && kb <= la;
        bool overlap = p->offset[a] < p->offset[b] + te->stages[b].numel * 4 && p->offset[b] < p->offset[a] + te->stages[a].numel * 4;
        CHECK_MSG(!(live_together && overlap), "t%d and t%d overlap while both live", a, b);
      }
    CHECK(printed_has(p, "eager"));
  }
  plan_free(p);
  te_free(te);
  /* fused: the relu outputs cross kernels with their reason */
  p = plan_of(&w, 1, 0, &te);
  CHECK(p && p->n_kernels == 3);
  if (p) CHECK(printed_has(p, "recomputed"));
  if (p) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    plan_dot(p, f);
    fclose(f);
    CHECK(buf && strstr(buf, "subgraph cluster_2") && !strstr(buf, "cluster_3"));
    free(buf);
  }
  plan_free(p);
  te_free(te);
  wl_free(&w);
}

static Plan *plan_with(const Graph *g, const char *backend, int store_moved, int gemm_reuse, TE **te) {
  kiln_options o = kiln_options_default();
  o.backend = backend;
  o.store_moved = store_moved;
  o.gemm_reuse = gemm_reuse;
  return plan_graph(g, &o, te);
}

static int kernels_with(const Graph *g, const char *backend, int store_moved, int gemm_reuse, const char *needle) {
  TE *te;
  Plan *p = plan_with(g, backend, store_moved, gemm_reuse, &te);
  int n = p ? p->n_kernels : -1;
  if (p && needle) CHECK_MSG(printed_has(p, needle), "%s plan lacks \"%s\"", backend, needle);
  plan_free(p);
  te_free(te);
  return n;
}

/* A transpose or head split over arithmetic (x @ W + b, a normalised row) that its readers
 * would recompute: the arithmetic is stored in its own space (joining the GEMM or the row
 * kernel before it) and the move becomes the readers' index map. With KILN_GEMM_REUSE=32 a
 * GEMM operand's prologue counts as recomputed once per 32-wide tile and is inlined when that
 * is at most 4 times (q * scale before a product over 64 keys), unless it reads a parameter
 * the run overwrites; raced on the H200 and off by default. Kernel counts pinned. */
static void moves_and_prologues(void) {
  Workload w;
  OK(wl_build("bert_layer_b8s128", &w));
  const Graph *g = &w.g->g;
  CHECK(kernels_with(g, "cpu", 0, 0, NULL) == 11);                        /* q, k^T, v copied by two kernels */
  CHECK(kernels_with(g, "cuda", 1, 0, "moved by t9 (transpose)") == 9);  /* the bias add stored instead */
  CHECK(kernels_with(g, "cuda", 0, 32, NULL) == 9);                       /* the bias add recomputed in tiles */
  TE *te;
  Plan *p = plan_with(g, "cuda", 1, 0, &te);
  CHECK(p && p->n_kernels == 9);
  for (int k = 0; p && k < p->n_kernels; k++) CHECK(p->kernels[k].kind != KN_POINTWISE);
  plan_free(p);
  te_free(te);
  /* with reuse the softmax's division is recomputed in the value product's tiles: its row
   * kernel stores only the max and the sum */
  p = plan_with(g, "cuda", 1, 32, &te);
  if (p) CHECK_MSG(p->kernels[2].kind == KN_ROW && p->kernels[2].bytes_written == 2 * 96 * 128 * 4,
                   "softmax rows write %lld B", (long long)p->kernels[2].bytes_written);
  plan_free(p);
  te_free(te);
  wl_free(&w);
  /* a training step keeps relu(x @ W1 + b1) stored even with reuse: recomputed by dW2 it would
   * read b1 before b1's update */
  OK(wl_build("mlp_train_b32", &w));
  p = plan_with(&w.g->g, "cuda", 1, 32, &te);
  CHECK(p && p->n_kernels == 9 && p->kernels[0].n_items == 2);
  plan_free(p);
  te_free(te);
  wl_free(&w);

  kiln_graph *kg;
  if (!load_shared("models/encoder4_d256/model.onnx", &kg)) return;
  /* PyTorch's export scales q and k before their product and transposes between the layers'
   * batch-first and sequence-first layouts: 43 kernels before, 40 with the layernorm stored
   * before its transpose, 36 with q * scale and k * scale recomputed in the score product's tiles */
  CHECK(kernels_with(&kg->g, "cpu", 0, 0, NULL) == 43);
  CHECK(kernels_with(&kg->g, "cpu", 1, 0, "moved by") == 40);
  CHECK(kernels_with(&kg->g, "cuda", 1, 32, NULL) == 36);
  kiln_graph_free(kg);
}

/* Attention chains: scores, softmax rows, the product with v as one kernel (cuda's default;
 * asked for here on cpu), found in bert's workload graph and in the exports of encoder4_d256
 * and gpt_tiny (a causal mask in the rows); the scores and P are absent from the memory plan. */
static int chains_in(const Plan *p) {
  int n = 0;
  for (int k = 0; k < p->n_kernels; k++) n += p->kernels[k].chain == 3;
  return n;
}

static void attention_chains(void) {
  Workload w;
  OK(wl_build("bert_layer_b8s128", &w));
  TE *te;
  kiln_options o = kiln_options_default();
  o.attention = 1;
  Plan *p = plan_graph(&w.g->g, &o, &te);
  if (p) {
    CHECK(p->n_kernels == 9 && chains_in(p) == 1 && p->kernels[3].chain == 3);
    CHECK(p->kernels[1].chain == -1 && p->kernels[2].chain == -1 && plan_chain_end(p, 1) == 3);
    /* the scores [8,12,128,128] and P are not stored; the chain reads q, k, v (one buffer) */
    for (int s = 0; s < te->n_stages; s++)
      if (p->kernel_of[s] == 1 || p->kernel_of[s] == 2) CHECK_MSG(!p->stored[s] && p->offset[s] < 0, "t%d stored", s);
    CHECK(p->kernels[3].n_ins == 1 && p->kernels[1].n_ins == 0 && p->kernels[1].bytes_read == 0);
    CHECK(p->kernels[3].bytes_written == 8 * 128 * 768 * 4);
    CHECK(printed_has(p, "one attention kernel with k1..k2"));
  }
  plan_free(p);
  te_free(te);
  /* chain_layout: the chain's output [8,12,128,64] stored in the order the output projection
   * reads it, [8,128,12,64] (b, then i, h, d), the chain still one kernel in its own order */
  o.chain_layout = 1;
  p = plan_graph(&w.g->g, &o, &te);
  if (p) {
    CHECK(p->n_kernels == 9 && chains_in(p) == 1 && p->kernels[3].chain == 3);
    int stored = 0;
    for (int i = 0; i < p->kernels[3].n_items; i++) {
      const Stage *S = &te->stages[p->kernels[3].items[i].stage];
      if (!p->kernels[3].items[i].store) continue;
      stored++;
      CHECK_MSG(S->permuted && S->layout[0] == 0 && S->layout[1] == 2 && S->layout[2] == 1 && S->layout[3] == 3,
                "t%d: layout %d %d %d %d", S->id, S->layout[0], S->layout[1], S->layout[2], S->layout[3]);
      CHECK(te_stage_stride(S, 0) == 128 * 768 && te_stage_stride(S, 1) == 64 && te_stage_stride(S, 2) == 768 &&
            te_stage_stride(S, 3) == 1);
    }
    CHECK(stored == 1 && printed_has(p, "in the order"));
  }
  plan_free(p);
  te_free(te);
  o.chain_layout = 0;
  /* off, and by default: cuda takes chains of at most 2^20 scores (bert's are 1.5M), cpu none */
  const char *backends[3] = { "cuda", "cuda", "cpu" };
  for (int m = 0; m < 3; m++) {
    o.attention = m ? -1 : 0;
    o.backend = backends[m];
    p = plan_graph(&w.g->g, &o, &te);
    if (p) CHECK(chains_in(p) == 0);
    plan_free(p);
    te_free(te);
  }
  o.backend = "cuda";
  wl_free(&w);
  /* encoder4_d256's q * scale and k * scale are inlined into the chains' staged operands (a
   * second planning): 40 -> 36 kernels, 8 of them in chains, 28 launches */
  const char *models[2] = { "models/encoder4_d256/model.onnx", "models/gpt_tiny/model.onnx" };
  int want[2] = { 4, 2 }, kernels[2] = { 36, 20 };
  o.attention = -1;  /* cuda's default takes these small ones */
  for (int m = 0; m < 2; m++) {
    kiln_graph *kg;
    if (!load_shared(models[m], &kg)) continue;
    p = plan_graph(&kg->g, &o, &te);
    if (p) CHECK_MSG(chains_in(p) == want[m] && p->n_kernels == kernels[m], "%s: %d chains, %d kernels", models[m],
                     chains_in(p), p->n_kernels);
    plan_free(p);
    te_free(te);
    kiln_graph_free(kg);
  }
  /* ONNX Attention node tests (test_models runs them): each forms one chain when asked */
  static const char *const attn[] = { "test_attention_3d_gqa_causal", "test_attention_4d_attn_mask_bool",
                                      "test_attention_4d_diff_heads_sizes_softcap", "test_attention_4d_causal_with_past_and_present",
                                      "test_attention_3d_diff_heads_sizes_scaled", "test_attention_4d_fp16",
                                      "test_attention_4d_diff_heads_mask4d_padded_kv" };
  o.attention = 1;
  for (size_t m = 0; m < sizeof attn / sizeof attn[0]; m++) {
    char rel[256];
    snprintf(rel, sizeof rel, "conformance/onnx-node/%s/model.onnx", attn[m]);
    kiln_graph *kg;
    if (!load_shared(rel, &kg)) continue;
    p = plan_graph(&kg->g, &o, &te);
    if (p) CHECK_MSG(chains_in(p) == 1, "%s: %d chains", attn[m], chains_in(p));
    plan_free(p);
    te_free(te);
    kiln_graph_free(kg);
  }
}

/* Pairs: a contraction of at most 32 columns and the row kernel over its rows as one kernel
 * (cuda's default; off on cpu): the shared MLP's logits and their softmax, a training step's
 * logits and its loss rows. The logits are stored only where another kernel reads them. */
static int pairs_in(const Plan *p, int *last) {
  int n = 0;
  for (int k = 0; k < p->n_kernels; k++)
    if (p->kernels[k].chain == 2) n++, *last = k;
  return n;
}

/* Pairs with a tail (their last kernel's id in *last). */
static int tails_in(const Plan *p, int *last) {
  int n = 0;
  for (int k = 0; k < p->n_kernels; k++)
    if (p->kernels[k].tailed) {
      n++, *last = k;
      CHECK(p->kernels[k].chain == 3 && k >= 2 && p->kernels[k - 1].chain == -1 && p->kernels[k - 2].chain == -1);
    }
  return n;
}

static void pairs(void) {
  kiln_options o = kiln_options_default();
  o.backend = "cuda";
  TE *te;
  int at = -1;
  kiln_graph *kg;
  if (load_shared("models/mlp/model.onnx", &kg)) {
    Plan *p = plan_graph(&kg->g, &o, &te);
    if (p) {
      CHECK_MSG(p->n_kernels == 4 && pairs_in(p, &at) == 1 && at == 3 && p->kernels[2].chain == -1, "%d kernels",
                p->n_kernels);
      for (int s = 0; s < te->n_stages; s++)  /* the logits [128, 10]: not stored */
        if (p->kernel_of[s] == 2) CHECK_MSG(!p->stored[s], "t%d stored", s);
      CHECK(p->kernels[2].n_ins == 0 && p->kernels[3].n_ins == 3 && printed_has(p, "with the contraction k2 over its rows"));
    }
    plan_free(p);
    te_free(te);
    for (int m = 0; m < 2; m++) {  /* off; cpu's default */
      kiln_options q = o;
      q.gemm_rows = m ? -1 : 0;
      q.backend = m ? "cpu" : "cuda";
      p = plan_graph(&kg->g, &q, &te);
      if (p) CHECK(p->n_kernels == 4 && pairs_in(p, &at) == 0);
      plan_free(p);
      te_free(te);
    }
    kiln_graph_free(kg);
  }
  /* the training steps: the logits (k1) with the softmax cross-entropy's rows (k2), and the
   * gradient of the layer before (the logits' gradient times W2, relu's mask) after them, the
   * pair's tail, moved up past the kernels that do not read it. The loss is each row's sum,
   * taken in the rows kernel, then the sum over the rows (reading one value a row), so the
   * logits are not stored. As one sum over the batch's rows and columns (row_sums 0) it reads
   * the logits again, and the pair stores them; without tails the gradient is a kernel of its
   * own after the loss and the bias gradient. */
  const char *steps[2] = { "mlp_train_b32", "cnn_train_b32" };
  for (int m = 0; m < 2; m++) {
    Workload w;
    OK(wl_build(steps[m], &w));
    for (int v = 0; v < 2; v++) {
      kiln_options q = o;
      q.row_sums = q.pair_tails = v ? 0 : -1;
      Plan *p = plan_graph(&w.g->g, &q, &te);
      if (p && !v) {
        CHECK_MSG(tails_in(p, &at) == 1 && pairs_in(p, &at) == 0, "%s: %d tails", steps[m], tails_in(p, &at));
        bool stored = false;
        for (int s = 0; s < te->n_stages; s++) stored |= p->kernel_of[s] == at - 2 && p->stored[s];
        CHECK_MSG(!stored, "%s: the logits are stored", steps[m]);
        CHECK(printed_has(p, "one kernel with the pair") && p->kernels[at].kind == KN_REDUCE && p->kernels[at].n_red == 1 &&
              p->kernels[at].red_shape[0] == 10);
        /* the loss over the rows: the next kernel, reading one value a row */
        CHECK_MSG(p->kernels[at + 1].rank == 0 && p->kernels[at + 1].inner_numel == 32 && p->kernels[at + 1].bytes_read == 128,
                  "%s: k%d rank %d over %lld, %lld B", steps[m], at + 1, p->kernels[at + 1].rank,
                  (long long)p->kernels[at + 1].inner_numel, (long long)p->kernels[at + 1].bytes_read);
      } else if (p) {
        CHECK_MSG(pairs_in(p, &at) == 1 && tails_in(p, &at) == 0 && p->kernels[at - 1].chain == -1, "%s: %d pairs", steps[m],
                  pairs_in(p, &at));
        bool stored = false;
        for (int s = 0; s < te->n_stages; s++) stored |= p->kernel_of[s] == at - 1 && p->stored[s];
        CHECK_MSG(stored && p->kernels[at].bytes_written > 0, "%s: the logits are not stored", steps[m]);
      }
      plan_free(p);
      te_free(te);
    }
    wl_free(&w);
  }
  /* wide pairs (gemm_rows 2, the default on cuda): gpt_tiny's layernorms after their GEMMs, 256 wide
   * (the output projection and the second FFN layer of each block); none under narrow pairs alone (1) */
  if (load_shared("models/gpt_tiny/model.onnx", &kg)) {
    for (int m = 0; m < 3; m++) {
      kiln_options q = o;
      q.gemm_rows = m == 0 ? 1 : m == 1 ? -1 : 2;
      Plan *p = plan_graph(&kg->g, &q, &te);
      if (p) {
        int n = pairs_in(p, &at), wide = 0;
        for (int k = 0; k < p->n_kernels; k++)
          wide += p->kernels[k].chain == 2 && p->kernels[k - 1].shape[p->kernels[k - 1].rank - 1] == 256;
        CHECK_MSG(n == (m ? 4 : 0) && wide == n, "gpt_tiny gemm_rows %d: %d pairs, %d wide", q.gemm_rows, n, wide);
      }
      plan_free(p);
      te_free(te);
    }
    kiln_graph_free(kg);
  }
  /* a wide pair's factor of the columns is one matrix for every row: bert_layer_b8s128's scores (rows of
   * 128 keys, 2^26.6 multiply-adds, within the wide pairs' work) read keys that move with the batch and
   * head, so they and their softmax stay two kernels; its layernorms' GEMMs are past the work */
  /* encoder4_d256's output projections: each sum [256,256] and its bias, read through the (sequence,
   * batch) transpose by the residual's layernorm, computed with that epilogue in the layernorm's order
   * (reorder_sums 3 under wide pairs), so that they pair with it too: 8 wide pairs; 4 by default */
  if (load_shared("models/encoder4_d256/model.onnx", &kg)) {
    for (int m = 0; m < 2; m++) {
      kiln_options q = o;
      q.reorder_sums = m ? -1 : 3;
      Plan *p = plan_graph(&kg->g, &q, &te);
      if (p) {
        int n = pairs_in(p, &at), ranked = 0;  /* every pair's GEMM over the layernorm's [4,64,256] */
        for (int k = 1; k < p->n_kernels; k++)
          ranked += p->kernels[k].chain == 2 && p->kernels[k - 1].rank == 3 && p->kernels[k - 1].shape[2] == 256;
        CHECK_MSG(n == (m ? 4 : 8) && ranked == n && (m || printed_has(p, "t78 in the order t82 reads it")),
                  "encoder4_d256 reorder_sums %d: %d pairs, %d over the layernorm's [4,64,256]", q.reorder_sums, n, ranked);
      }
      plan_free(p);
      te_free(te);
    }
    kiln_graph_free(kg);
  }
  Workload bw;
  OK(wl_build("bert_layer_b8s128", &bw));
  if (bw.g) {
    kiln_options q = o;
    q.gemm_rows = 2;
    Plan *p = plan_graph(&bw.g->g, &q, &te);
    if (p) CHECK_MSG(pairs_in(p, &at) == 0, "bert_layer_b8s128 gemm_rows 2: %d pairs", pairs_in(p, &at));
    plan_free(p);
    te_free(te);
  }
  wl_free(&bw);
}

/* Sibling contractions: q, k and v as three MatMuls of one input share a kernel, as one GEMM
 * over one A tile on cuda (three with siblings off, KILN_SIBLINGS=0) and as one loop nest
 * on cpu. Two contractions that share their B but not their A stay apart on cuda. */
static void sibling_contractions(void) {
  Workload w;
  OK(wl_build("siblings_128x256x256", &w));
  const char *backends[3] = { "cpu", "cuda", "cuda" };
  for (int m = 0; m < 3; m++) {
    kiln_options o = kiln_options_default();
    o.backend = backends[m];
    o.siblings = m == 2 ? 0 : -1;
    TE *te;
    Plan *p = plan_graph(&w.g->g, &o, &te);
    if (p) {
      CHECK_MSG(p->n_kernels == (m == 2 ? 3 : 1), "%s (siblings %d): %d kernels", backends[m], o.siblings, p->n_kernels);
      for (int k = 0; k < p->n_kernels; k++) {
        int accs = 0;
        for (int i = 0; i < p->kernels[k].n_items; i++) accs += p->kernels[k].items[i].kind == IT_ACC;
        CHECK(accs == (m == 2 ? 1 : 3));
      }
      CHECK(m < 2 || printed_has(p, "another contraction over this space"));
    }
    plan_free(p);
    te_free(te);
  }
  wl_free(&w);
  /* y1 = x1 @ w, y2 = x2 @ w: the same B, two As */
  kiln_graph *g;
  kiln_tensor x1, x2, wt, y1, y2;
  int64_t xs[2] = { 64, 96 }, ws[2] = { 96, 80 };
  OK(kiln_graph_create(&g));
  OK(kiln_graph_input(g, "x1", KILN_F32, 2, xs, &x1));
  OK(kiln_graph_input(g, "x2", KILN_F32, 2, xs, &x2));
  OK(kiln_graph_input(g, "w", KILN_F32, 2, ws, &wt));
  OK(kiln_graph_matmul(g, x1, wt, &y1));
  OK(kiln_graph_matmul(g, x2, wt, &y2));
  OK(kiln_graph_output(g, y1, NULL));
  OK(kiln_graph_output(g, y2, NULL));
  for (int m = 0; m < 2; m++) {
    kiln_options o = kiln_options_default();
    o.backend = backends[m];
    TE *te;
    Plan *p = plan_graph(&g->g, &o, &te);
    if (p) CHECK_MSG(p->n_kernels == (m ? 2 : 1), "%s: %d kernels for two As", backends[m], p->n_kernels);
    if (p && m) CHECK(printed_has(p, "not a sibling over the same A"));
    plan_free(p);
    te_free(te);
  }
  kiln_graph_free(g);
}

/* bert's attention output o = att @ v, [b, h, s, d], is read only as transpose(o) [b, s, h, d]
 * reshaped to [b*s, h*d] by the output projection: the sum is computed in the reader's order
 * (kiln_options.reorder_sums), so the projection's A operand is a plain matrix; off, the order
 * stays; in an attention chain (its kernels index rows by the plan's vars) the chain computes in
 * its order and stores in the reader's (kiln_options.chain_layout, on by default). */
static void reordered_sums(void) {
  Workload w;
  OK(wl_build("bert_layer_b8s128", &w));
  for (int m = 0; m < 3; m++) {
    kiln_options o = kiln_options_default();
    o.backend = "cuda";
    o.reorder_sums = m == 1 ? 0 : -1;
    o.attention = m == 2 ? 1 : -1;
    TE *te;
    Plan *p = plan_graph(&w.g->g, &o, &te);
    int found = 0;
    for (int k = 0; p && k < p->n_kernels; k++) {
      const Kernel *K = &p->kernels[k];
      if (K->rank != 4 || K->n_red != 1 || K->red_shape[0] != 128 || K->shape[3] != 64) continue;  /* att @ v */
      found++;
      int64_t s1 = m == 0 ? 128 : 12, s2 = m == 0 ? 12 : 128;  /* [b, s, h, d] reordered, else [b, h, s, d] */
      CHECK_MSG(K->shape[0] == 8 && K->shape[1] == s1 && K->shape[2] == s2,
                "reorder_sums %d attention %d: att @ v over [%lld,%lld,%lld,%lld]", o.reorder_sums, o.attention,
                (long long)K->shape[0], (long long)K->shape[1], (long long)K->shape[2], (long long)K->shape[3]);
    }
    CHECK_MSG(found == 1, "m %d: %d att @ v kernels", m, found);
    CHECK(!p || printed_has(p, "reads it (reorder_sums)") == (m != 1));  /* kiln plan shows the new order */
    plan_free(p);
    te_free(te);
  }
  wl_free(&w);
}

/* Row sums (lower.c, split_row_sum): a sum over all of log_softmax(x) * y reads each row's max
 * and sum, so it is lowered as each row's sum ([6, 1] over the row's 12, the row statistics'
 * shape), which the plan puts in the rows kernel, then the sum over the 6 rows; so is the same
 * sum keeping its dims ([1, 1]: the kept dims' vars are not the row's). A sum over all of x * x
 * reads no row statistic and stays one stage, as do the losses with row_sums 0. The values
 * agree with ref on the cpu both ways. */
static void row_sums(void) {
  kiln_graph *g;
  OK(kiln_graph_create(&g));
  int64_t xs[2] = { 6, 12 };
  kiln_tensor x, y, lsm, prod, loss, kept, sq, total;
  OK(kiln_graph_input(g, "x", KILN_F32, 2, xs, &x));
  OK(kiln_graph_input(g, "y", KILN_F32, 2, xs, &y));
  OK(kiln_graph_log_softmax(g, x, -1, &lsm));
  OK(kiln_graph_binary(g, KILN_MUL, lsm, y, &prod));
  OK(kiln_graph_reduce(g, KILN_REDUCE_SUM, prod, 0, NULL, 0, &loss));
  OK(kiln_graph_reduce(g, KILN_REDUCE_SUM, prod, 0, NULL, 1, &kept));
  OK(kiln_graph_binary(g, KILN_MUL, x, x, &sq));
  OK(kiln_graph_reduce(g, KILN_REDUCE_SUM, sq, 0, NULL, 0, &total));
  OK(kiln_graph_output(g, loss, "loss"));
  OK(kiln_graph_output(g, kept, "kept"));
  OK(kiln_graph_output(g, total, "total"));
  float xv[72], yv[72], want[3] = { 0 }, got[2][3];
  for (int i = 0; i < 72; i++) xv[i] = (float)((i * 37) % 23) / 7.0f - 1.5f, yv[i] = (float)(i % 5) / 4.0f;
  for (int m = 0; m < 2; m++) {
    kiln_options o = kiln_options_default();
    o.row_sums = m ? 0 : -1;
    TE *te;
    Plan *p = plan_graph(&g->g, &o, &te);
    int rows = 0;
    for (int s = 0; te && s < te->n_stages; s++) {
      const Stage *S = &te->stages[s];
      if (S->name && strstr(S->name, ".rows")) {
        rows++;
        CHECK(S->rank == 2 && S->shape[0] == 6 && S->shape[1] == 1 && S->n_red == 1 && S->red_shape[0] == 12);
        const Kernel *K = p ? &p->kernels[p->kernel_of[s]] : NULL;  /* with the row statistics, in the rows kernel */
        CHECK_MSG(K && K->kind == KN_ROW && K->rank == 2 && K->shape[0] == 6 && K->red_shape[0] == 12, "t%d not in the rows", s);
        CHECK(p && p->stored[s] && p->kernel_of[te->tensor_stage[loss]] != K->id);
      }
    }
    const kiln_tensor outs[3] = { loss, kept, total };
    for (int i = 0; te && i < 3; i++) {  /* the two losses over the rows' sums, the plain sum over both dims */
      const Stage *S = &te->stages[te->tensor_stage[outs[i]]];
      bool split = m == 0 && i < 2;
      CHECK_MSG(S->kind == ST_REDUCE && S->n_red == (split ? 1 : 2) && S->red_shape[0] == 6,
                "row_sums %d: output %d sums over %d dims", o.row_sums, i, S->n_red);
    }
    CHECK_MSG(rows == (m == 0 ? 2 : 0), "row_sums %d: %d rows stages", o.row_sums, rows);
    plan_free(p);
    te_free(te);
    for (int be = 0; be < 2; be++) {  /* ref, then cpu */
      o.backend = be ? "cpu" : "ref";
      kiln_program *pr = NULL;
      float out[3];
      OK(kiln_program_compile(g, &o, &pr));
      if (pr) OK(kiln_program_run(pr, (const void *[]){ xv, yv }, (void *[]){ &out[0], &out[1], &out[2] }));
      kiln_program_free(pr);
      if (!be && !m) memcpy(want, out, sizeof want);
      if (be) memcpy(got[m], out, sizeof out);
    }
    for (int i = 0; i < 3; i++)
      CHECK_MSG(fabsf(got[m][i] - want[i]) <= 1e-5f * (1.0f + fabsf(want[i])), "row_sums %d output %d: %g, ref %g", o.row_sums,
                i, (double)got[m][i], (double)want[i]);
  }
  CHECK(want[0] == want[1] && want[0] < 0);
  kiln_graph_free(g);
}

int main(void) {
  row_sums();
  cse();
  liveness();
  moves_and_prologues();
  attention_chains();
  pairs();
  sibling_contractions();
  reordered_sums();
  TEST_MAIN_END();
}
