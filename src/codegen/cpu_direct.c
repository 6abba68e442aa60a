/*
 * cpu_direct.c — direct convolutions for loop dialects (the C of the cpu backend). Takes a
 * plan kernel that sums a window (3x3 ...) of one operand times a factor free of the output's
 * rows and columns (a convolution's weights), and renders it without packing the window:
 *
 *   - the window operand of one image is copied, once a thread, into a zero-padded plane
 *     [channel][row][column] on the thread's stack: the operand's own expression evaluated
 *     with the output row and column at 0 and the window's vars running over the plane, so the
 *     padding's guard is decided once an element, not once a tap;
 *   - a task is a block of output channels x output rows x a run of vectors along a row; its
 *     sums are vectors held in registers across every tap (GCC vector types: written as loops
 *     of `omp simd`, the same sums ran 2.3 times slower), each tap one unaligned load a row
 *     vector and one broadcast of the weight an output channel;
 *   - the epilogue (bias, activation, residual, stores) runs per output row, in the kernel's
 *     vars, from the finished sums.
 *
 * An im2col pack (cpu_tile.c) copies each input element once a tap; here it is copied once.
 * Which kernels: the window's vars the last two of the sum (1 x 1 included), strides of 1 to 4
 * (at most the window), and the operand equal to its plane read at row stride x h + rh, column
 * stride x w + rw (checked on the expressions, so a transpose or a slice in front of the
 * convolution is kept or the kernel declined, never misread). With a column stride s the
 * plane's row is stored as s phases (column x at phase x % s, index x / s), so the columns
 * one output vector reads are contiguous in one phase. A window that reads the output's own
 * channel (depthwise, grouped) has a plane a channel: the channel is a var of the plane's image
 * and a task one channel's rows.
 *
 * Flat planes: rows the lanes do not divide (24 at 16 lanes) leave lanes idle in the row form.
 * The plane is stored once per window column rw (column stride x w + rw at w: shifted, zeros
 * where the shift leaves the row) at the output's own pitch, its rows in `stride` phases: with a
 * stride of 1, output q = row x W + column reads element q + rh x W of column rw's copy at tap
 * (rh, rw), so a task's rows run on in its vectors (2 rows of 24 in 3), every lane used. The
 * cost model picks it (CgOptions.cpu_rows_only: never). A depthwise window takes it whenever its
 * rows are whole vectors: its taps are bound by their loads (one multiply-add each), and only
 * flat planes at such a pitch keep every load aligned.
 *
 * Channel lanes: where a few pixels an image leave lanes idle along rows (7x7: 49 outputs in 64
 * lanes), the output channels go along the vectors instead, the pixels broadcast, the weights
 * laid out once [block of channels][k][channels of the block] (the kernel's pack, CgLaunch.pack,
 * filled by a function of the module at compile and again after write_param).
 *
 * A sum past CG_CPU_F32_SUM_MAX points is taken in spans of whole plane channels, each summed in
 * f32 registers, the spans added in f64, as the register tiles' spans.
 */
#include <math.h>
#include <string.h>

#include "codegen.h"

/* A thread's plane lives on its stack; a sum is at most CG_CPU_F32_SUM_MAX points (f32). */
enum { DIRECT_PLANE_BYTES = 512 << 10, DIRECT_ROWS_MAX = 4 };
/* channel lanes: a block of channels' weights is read again from L2 while it and the plane fit
 * this (this EPYC's 1 MiB; at 7/8 of it resnet50's 1x1 1024 -> 512 at 14x14, a block of 2
 * vectors and its plane in place 928 KiB, took 1 vector x 14 pixels: 724 us against 600 in
 * 2 x 7, and its 1024 -> 256 gained 0-3 %) */
enum { CHANNEL_L2_BYTES = 1024 << 10 };
/* channel lanes: a plane (on the thread's stack, as the tiles' 1 MiB panels are) at most this;
 * their plane is the image's only once, where the row form's tasks reread theirs (a 3x3/2 over
 * 256 channels from 28x28, a plane of 890 KiB: 1700-1880 us in tiles, 1360 here, two threads
 * beside a CI run; the row form with a plane of 980 KiB ran at half the tiles' speed) */
enum { CHANNEL_PLANE_BYTES = 1 << 20 };
/* an expansion's sum a point at most (its every point is a multiply-add and a load in the fill) */
enum { EXPAND_SUM_MAX = 1024, EXPAND_MIN_BYTES = 512 << 10 };

static bool has_select(const Expr *e, int depth) {
  if (e->kind == EX_SELECT || depth > 64) return true;
  for (int i = 0; i < e->n_args; i++)
    if (has_select(e->args[i], depth + 1)) return true;
  return false;
}

/* May a 1 x 1 window be read where its operand lies (CgCpuDirect.in_place)? The plane is one f32
 * load of another kernel's buffer at the plane's row and column, rows W apart, columns 1 apart,
 * each plane channel H x W after the one before: the plane's own layout. A copy of it cost
 * convnet_mini's 24 -> 96 expansion at 48 x 48 a plane of 221 KiB filled a run, and kept its
 * 96 -> 24 projection (a plane over 512 KiB) in packed register tiles. */
static bool plane_in_place(const Plan *p, const Kernel *k, const CgCpuDirect *c, bool chained) {
  const Expr *L = c->plane;
  int h = k->rank - 2, w = k->rank - 1, nv = k->rank + k->n_red;
  int64_t H = k->shape[h], W = k->shape[w];
  if (L->kind != EX_LOAD || L->dtype != KILN_F32 || p->kernel_of[L->src] == k->id || plan_is_baked(p->te, L->src) ||
      (k->chain && !chained) || c->YP != H || c->XP != W || c->stride != 1 || c->col_stride != 1)
    return false;
  int64_t v[2 * KILN_MAX_RANK], step = 1, o0, o1;
  for (int i = 0; i < nv; i++) v[i] = (i < k->rank ? k->shape[i] : k->red_shape[i - k->rank]) / 2;
  /* the window's row and column range over the plane's (its rows and columns) */
  v[nv - 2] = H / 2, v[nv - 1] = W / 2;
  for (int i = nv - 1; i >= k->rank; i--) {
    int64_t extent = i == nv - 2 ? H : i == nv - 1 ? W : k->red_shape[i - k->rank], mid = v[i];
    if (extent > 1) {
      v[i] = 0;
      if (!cg_load_offset_at(p, L, v, nv, &o0)) return false;
      v[i] = extent - 1;
      if (!cg_load_offset_at(p, L, v, nv, &o1) || o1 - o0 != step * (extent - 1)) return false;
      v[i] = mid;
      if (!cg_load_offset_at(p, L, v, nv, &o1) || o1 - o0 != step * mid) return false;
    }
    step *= extent;
  }
  return true;
}

/* A tap's cost in half cycles for `sums` multiply-adds and `loads` loads (row vectors and weight
 * broadcasts): two of each a cycle, and no fewer than the eight sums that cover the
 * multiply-add's latency of four cycles on two pipes. Counting every load as a multiply-add
 * chose 8 channels x 3 rows for lenet's 14 rows (5 tasks a column, 15 rows computed) over 8 x 2
 * (7, 14): 171 against 160 us at two threads. */
/* Channel lanes read a 1 x 1 window in place at any stride (each pixel a broadcast at a constant
 * displacement; each plane channel's start from the operand's own expression, operand_at): the
 * plane, an f32 load of another kernel's buffer, runs along its columns contiguously and its rows
 * a pitch apart; that pitch in elements (0: not so). At a stride of 1 this is plane_in_place's
 * plane, rows W apart. */
static int64_t strided_in_place(const Plan *p, const Kernel *k, const CgCpuDirect *c) {
  const Expr *L = c->plane;
  int nv = k->rank + k->n_red, rh = nv - 2, rw = nv - 1;
  if (L->kind != EX_LOAD || L->dtype != KILN_F32 || p->kernel_of[L->src] == k->id || plan_is_baked(p->te, L->src) || k->chain)
    return 0;
  int64_t v[2 * KILN_MAX_RANK], o0, o1, o2;
  for (int i = 0; i < nv; i++) v[i] = (i < k->rank ? k->shape[i] : k->red_shape[i - k->rank]) / 2;
  v[rh] = v[rw] = 0;
  if (!cg_load_offset_at(p, L, v, nv, &o0)) return 0;
  v[rw] = c->XP - 1;
  if (!cg_load_offset_at(p, L, v, nv, &o1) || o1 - o0 != c->XP - 1) return 0;
  if (c->YP == 1) return c->XP;
  v[rh] = c->YP - 1, v[rw] = 0;
  if (!cg_load_offset_at(p, L, v, nv, &o2) || (o2 - o0) % (c->YP - 1)) return 0;
  int64_t pitch = (o2 - o0) / (c->YP - 1);
  v[rh] = c->YP / 2;
  if (pitch < c->XP || !cg_load_offset_at(p, L, v, nv, &o1) || o1 - o0 != pitch * (c->YP / 2)) return 0;
  return pitch;
}

static double tap_cost(int64_t sums, int64_t loads) {
  int64_t c = sums > loads ? sums : loads;
  return (double)(c > 8 ? c : 8);
}

/* The row and flat forms' tap cost over co output channels: tap_cost, but no fewer than 14 half
 * cycles from 128 output channels on, as channel lanes' tasks have. Without it, tasks of 8 sums
 * (4 channels x 2 vectors) were chosen for resnet50's 1x1 expansions at 28x28 and 14x14 and for
 * res128_14's 3x3s, which ran at 0.69-0.76 in channel lanes or 6 channels a task. Below 128
 * channels (lenet, convnet_mini: 6 to 48) the floor's choices ran 1.05-1.39 slower
 * (bench/results/2026-12-07-cpu-row-floor.md). */
static double row_tap_cost(int64_t co, int64_t sums, int64_t loads) {
  double t = tap_cost(sums, loads);
  return co >= 128 && t < 14 ? 14 : t;
}

static bool direct_match(const Plan *p, const Kernel *k, const CgOptions *o, bool chained, CgCpuDirect *dc);

/* Winograd: a thread's plane and its band of transformed patches together at most this (both on
 * its stack, as the planes and panels of the other forms are) */
enum { WINOGRAD_STACK_BYTES = 2 << 20 };
/* Winograd: weights' transforms past this stream from memory (about 1.2 bytes a half cycle) */
enum { WINOGRAD_L3_BYTES = 8 << 20 };

/* Winograd's F(2x2, 3x3) in channel lanes (CgCpuDirect.winograd): each 2 x 2 tile of outputs from
 * its 4 x 4 patch of the plane, V = Bt d B, and the weights' transforms U = G g Gt: 16 sums over
 * the plane channels, M = U V point by point, then Y = At M A. A tile's 4 outputs take 16
 * multiply-adds a plane channel where the window took 36. The cost, in channel_lanes' units (half
 * cycles over an image): 16 taps a plane channel and block of cr tiles, each tap's multiply-adds
 * and loads as channel lanes' panel tasks count them, or its bytes where more: the transforms' cp
 * weight vectors (shared by the band's blocks: a point's are in L1 while the band goes by), from
 * L3 (6 bytes a half cycle) unless every channel block's fit L2 beside the band, and the patches'
 * cr values, from L3 unless the band fits L2. Then the patches' transform (about 40 half cycles
 * a plane channel and tile, by each thread that reads the band: every thread where the band is
 * the image), the plane's fill, the outputs' transform (about 60 a vector of channels and tile)
 * and the epilogue's items. Bands: as many as the cost says, within the stack. Returns HUGE_VAL
 * where it cannot run; else fills w's form. */
static double winograd(const Kernel *k, const CgOptions *o, int budget, double panel_floor, CgCpuDirect *w) {
  int h = k->rank - 2, wv = k->rank - 1, L = w->lanes;
  int64_t H = k->shape[h], W = k->shape[wv], KH = k->red_shape[k->n_red - 2], KW = k->red_shape[k->n_red - 1];
  if (!o->cpu_winograd || KH != 3 || KW != 3 || w->stride != 1 || w->col_stride != 1 || H < 2 || W < 2 ||
      w->PC > CG_CPU_F32_SUM_MAX)
    return HUGE_VAL;
  int64_t TH = (H + 1) / 2, TW = (W + 1) / 2, TT = TH * TW, YW = 2 * TH + 2, XW = 2 * TW + 2;
  double PC = (double)w->PC, plane = 4.0 * PC * (double)(YW * XW);
  double best = HUGE_VAL;
  for (int P = 1; P <= 2 && (P - 1) * L < w->CO; P++)
    for (int R = 1; R * P <= budget; R++) {
      int64_t TB = (TT + R - 1) / R, CB = (w->CO + P * L - 1) / (P * L);
      double t = fmax(tap_cost(R * P, R + P), panel_floor), U = 4.0 * 16 * PC * (double)(CB * P * L);
      double vblock = 4.0 * 16 * PC * R;
      for (int64_t NB = 1; NB <= TB; NB++) {
        int64_t BT = (TB + NB - 1) / NB;
        if (TB % BT) continue;  /* whole bands: a task's work the same, the tasks' split even (bands of 2, 2, 2,
                                 * 2 and 1 blocks ran 256 channels at 14x14 a fifth longer on one thread) */
        double band = vblock * (double)BT;
        if (plane + band + 4.0 * 16 * BT * R * P * L > WINOGRAD_STACK_BYTES) continue;
        double ubw = U + band <= CHANNEL_L2_BYTES ? 16 : U <= WINOGRAD_L3_BYTES ? 6 : 1.2;
        double vbw = band + plane <= CHANNEL_L2_BYTES / 2 ? 16 : 6;
        double tap = fmax(t, 4.0 * P * L / (double)BT / ubw + 4.0 * R / vbw);
        double taps = 16 * PC * (double)(CB * TB) * tap;
        double in = (40.0 * PC * (double)TT + 2.0 * plane / 4) * (double)(NB + (CB > 1)) / (double)NB;
        double out = 60.0 * (double)(CB * P) * (double)(TB * R);
        double cost = taps + in + out + 2.0 * k->n_items * (double)w->CO * (double)(H * W);
        if (cost < best) {
          best = cost;
          w->cp = P, w->cr = R, w->rr = 1, w->TH = TH, w->TW = TW, w->TB = TB, w->BT = BT, w->YW = YW, w->XPA = w->XQ = XW;
        }
      }
    }
  return best;
}

/* Channel lanes (CgCpuDirect.channel_lanes): a task is cp vectors of output channels x rr rows of
 * cr pixels, each tap cp weight vectors and rr x cr broadcasts for cp x rr x cr multiply-adds, so
 * a small image's few pixels leave no lane idle (7x7 leaves 15 of 64 along rows). Where its cost
 * (the row and flat forms' units: tap costs over an image's tasks) is below `best`, or the
 * option asks for it wherever it can, c takes it. Its weights must be constants, read at the
 * channel and the sum's vars only: they are laid out once (cg_render_cpu_pack). */
static void channel_lanes(const Plan *p, const Kernel *k, const CgOptions *o, double best, int budget, CgCpuDirect *c) {
  int h = k->rank - 2, w = k->rank - 1, L = c->lanes;
  int64_t KH = k->red_shape[k->n_red - 2], KW = k->red_shape[k->n_red - 1];
  if (!o->cpu_channel_lanes || c->by_channel || c->CO < L || !cg_reads_constants(p->te, c->weight)) return;
  for (int v = 0; v < k->rank; v++)
    if (v != c->co && te_uses_var(c->weight, v)) return;
  /* the row form's plane at the pitch of its columns, or the operand in place */
  int64_t H = k->shape[h], W = k->shape[w], xq = (c->XP + c->col_stride - 1) / c->col_stride;
  int64_t pitch = KH == 1 && KW == 1 ? strided_in_place(p, k, c) : 0;
  bool in_place = pitch > 0;
  /* Pixel panels (a 1 x 1 window): a task's broadcasts read in place or from the plane lie a
   * channel's pitch apart, a line of L1 a tap (bottleneck2048_7's 1x1 2048 -> 512 at 7x7: a
   * harness of the sums alone ran 1 x 7 at 66 GFLOP/s in place and 95 from panels, 2 x 6 at 89 and
   * 118, two threads of this EPYC). Copied once into panels [block][channel][pixels] they run on
   * contiguously, and a task may take any run of pixels: 2 vectors x 6, within AVX2's 12 sums,
   * where rows of 7 allowed only 1 x 7 or 2 x 1. Three or four vectors a task ran slower from
   * panels (3 x 4 at 73-89, 4 x 3 at 87-104: their weights, streamed from L3 where they pass L2,
   * are most of the bytes), so at most two. The panels are one more family of tasks beside the
   * row's, their fill charged (a load and a store an element), each family's cost taken whole
   * with its epilogue: resnet50's 1x1 128 -> 512 at 28x28 keeps 3 x 4 in place (its weights in L2;
   * 2 x 6 from panels ran it 1.03-1.09 slower; compared by taps alone, it lost 3 x 4 to the row
   * form, 1.15-1.27 slower). */
  int64_t HW = H * W;
  bool panels = o->cpu_pixel_panels && KH * KW == 1 && 4.0 * (double)c->PC * (double)(HW + budget) <= CHANNEL_PLANE_BYTES;
  /* a plane past CHANNEL_PLANE_BYTES keeps a ring of the rows a task's taps read: tasks of one
   * row, rows outermost (a thread's rows go by in order), every block's weights beside it in L2.
   * resnet50's 3x3/2 over 128 channels from 56x56 (a plane of 1.7 MB) took register tiles, 1006 us
   * in the model against 785 here (a ring of 4 rows, 116 KiB). */
  int ring = 0;
  bool rows_ok = true;
  double row_bytes = 4.0 * (double)c->PC * (double)(xq * c->col_stride);
  if (!in_place && row_bytes * (double)c->YP > CHANNEL_PLANE_BYTES) {
    for (ring = 1; ring < KH; ring *= 2) {}
    rows_ok = row_bytes * ring + 4.0 * (double)c->CO * (double)k->inner_numel <= CHANNEL_L2_BYTES;
  }
  if (!rows_ok && !panels) return;
  /* A tap's cost in half cycles: its multiply-adds and loads (tap_cost) but no fewer than 14
   * (tasks of 8 sums ran at half the speed of 14 to 24; see below for one weight vector over a
   * window), and its cp weight vectors, which stream
   * from L3 (about 6 bytes a half cycle) the first time a block of channels' weights is read
   * in an image, and from L2 (16) for its next blocks of pixels while the block and the plane
   * fit in L2. Fitted on res128_14, res256_7, res512_4 and bottleneck2048_7 (bench/models, 2 threads,
   * this EPYC): res512_4's 4x4 images took 1 vector x 16 pixels (713 us) over 2 x 8 (837) and
   * 3 x 8 (932); bottleneck's 7x7 took 2 x 7 (600) over 1 x 14 (639) and 3 x 7 (646). A block is
   * rows x a run of columns dividing the row (a row's part, or whole rows).
   * The floor spares one weight vector over a window of several taps: its pixels' broadcasts
   * come from the plane row a tap reads, and such tasks of 7 or 8 pixels ran at 0.63-0.78 of the
   * forms the floor had chosen (resnet50's 3x3 convolutions at 56x56, 14x14 and 7x7, res256_7's;
   * bench/results/2026-12-07-cpu-tap-floor.md). 1x1 convolutions keep it: their tasks of 7
   * pixels ran 1.13-1.58 slower read in place over 1024 and 2048 channels. */
  /* each candidate's whole cost: its taps over the sum (K points), then its epilogue (below) */
  double K = (double)k->inner_numel, points = (double)c->CO * (double)(H * W);
  double kf = K * (4.0 * (double)c->CO * K > CHANNEL_L2_BYTES ? 0.9 : 1.0);
  double mine = 0, items = 0;
  int cp = 0, cr = 0, rr = 0;
  bool panel = false;
  /* a panel task's floor: where the weights pass half of L2 (channel blocks outermost, each
   * block's weights streamed once while every panel goes by) its 12 sums at AVX2 ran as the
   * register tiles' 12 do, which their estimate below charges 12: resnet50's 1x1s over 512 and
   * 1024 channels at 14x14 took panels at 0.86-0.95 of the tiles. Where the weights fit (pixels
   * outermost) 14, as the row's tasks: its 1x1 128 -> 512 at 28x28 ran 1.03-1.09 slower from
   * panels than 3 x 4 read in place. */
  double panel_floor = 4.0 * (double)c->CO * (double)k->inner_numel <= CHANNEL_L2_BYTES / 2 ? 14 : 12;
  for (int fam = rows_ok ? 0 : 1; fam <= (panels ? 1 : 0); fam++) {  /* 0 blocks of a row's pixels, 1 panels */
    bool pf = fam == 1;
    double plane = pf || in_place ? 4.0 * (double)c->PC * (double)HW : row_bytes * (double)(ring ? ring : c->YP);
    for (int P = 1; P <= (pf ? 2 : 4) && (P - 1) * L < c->CO; P++)
      for (int64_t n = 1; n <= (pf ? HW : W); n++)
        for (int64_t m = 1; (pf || W % n == 0) && m <= H && (m == 1 || n == W) && (m == 1 || !ring); m++) {
          int64_t R = m * n, PB = pf ? (HW + n - 1) / n : (H + m - 1) / m * (W / n);
          if (R * P > budget) break;
          double t = tap_cost(R * P, R + P), bytes = 4.0 * P * L, block = bytes * (double)k->inner_numel;
          double floor = pf ? panel_floor : 14;
          if (t < floor && (P > 1 || KH * KW == 1)) t = floor;
          double first = fmax(t, bytes / 6), again = block + plane <= CHANNEL_L2_BYTES ? fmax(t, bytes / 16) : first;
          double cost = (double)((c->CO + P * L - 1) / (P * L)) * (first + (double)(PB - 1) * again) + (pf ? 2.0 * HW : 0);
          double its = n < W && !pf ? points * (2.0 * k->n_items / L + 2.0) : 2.0 * k->n_items * points;
          if (!cp || kf * cost + its < mine) mine = kf * cost + its, items = its, cp = P, cr = (int)n, rr = (int)m, panel = pf;
          if (pf) break;  /* a block of n pixels, never rows of them */
        }
  }
  if (panel) in_place = false, pitch = 0, ring = 0;
  /* Against the other forms over an image, the sums' taps and the epilogue's items. The row
   * and flat forms read a task's weights as ob rows, ob streams apart: where the weights pass
   * L2 those streams come from L3, and their costs undercount it (res512_4 took 1000 us in
   * flat planes, 19 channels a task, against 713 here at about the same cost); where they fit,
   * the costs compare as they are (convnet_mini's 48 channels at 24x24: 56 us flat, 60 here,
   * at costs 1728 and 1736). The epilogue here goes a point at a time (a pixel's channels are
   * planes apart), about 2 half cycles an item a point, the others' a vector at a time:
   * resnet50's 1x1 expansions with their residual at 14x14 (256 -> 1024) took 387 us here
   * against 318 in rows (tasks of whole rows; part of a row: below). Where neither form's plane
   * fits, the register tiles run (6 channels x
   * 2 vectors of pixels, 12 multiply-adds a point of the sum): resnet50's 1x1 64 -> 256 at 56x56
   * took 532 us here against 366 in tiles. The tiles also pack a window's panel (2 vectors of
   * pixels a point of the sum) for its row tiles, about a half cycle an element: without that
   * term the tiles were taken for resnet50's 3x3 convolutions over 64 channels at 56x56, 11 row
   * tiles a panel, at 736-765 us against 681 here (two threads, this EPYC). A 1 x 1 window's
   * panel is packed too (its term was 0: resnet50's 1x1s over 512 and 1024 channels at 14x14 then
   * stayed in tiles, where panels here ran 0.87-0.95), and a strided window's gathered runs cost
   * twice (its 7x7/2 stem stayed in tiles, where its channel lanes ran 0.83; both on the Zen 3
   * host, bench/results/2026-12-07-cpu-pixel-panels.md). */
  /* The epilogue: where a task takes part of a row, its items run on vectors of a pixel's channels,
   * their stores and a residual's loads a point at a time, planes apart (about 2 half cycles a
   * point): resnet50's 7x7/2 stem (147 sums a point) ran 0.80 of the other form, its 3x3 over 64
   * channels at 56x56 0.97-0.98. Tasks of whole rows keep the other form: 7x7 and 14x14 images
   * (res256_7, bottleneck2048_7, resnet50's last stages) ran 1-8 % slower on vectors. */
  bool channel_items = cr < W && !panel;
  double pack = (c->stride > 1 || c->col_stride > 1 ? 4.0 : 2.0) * L;
  double theirs = best < HUGE_VAL ? K * best
                                  : K * (12.0 * (double)((c->CO + 5) / 6) + pack) * (double)((H * W + 2 * L - 1) / (2 * L));
  bool lanes = cp && (o->cpu_channel_lanes == 2 || mine < theirs + items / L);
  /* Winograd against whichever form the costs took (the other forms' epilogue on vectors) */
  CgCpuDirect wg = *c;
  double wcost = winograd(k, o, budget, panel_floor, &wg);
  if (wcost < HUGE_VAL && (o->cpu_winograd == 2 || wcost < (lanes ? mine : theirs + 2.0 * k->n_items * points / L))) {
    wg.channel_lanes = wg.winograd = true, wg.flat = wg.in_place = wg.panel = wg.channel_items = false;
    wg.pitch = wg.PB = 0, wg.ring = 0;
    *c = wg;
    return;
  }
  if (!lanes) return;
  c->channel_lanes = true, c->cp = cp, c->cr = cr, c->rr = rr, c->flat = false, c->in_place = in_place, c->pitch = pitch;
  c->panel = panel, c->PB = panel ? (HW + cr - 1) / cr : 0;
  c->channel_items = channel_items;
  /* rows outermost where every channel block's weights stay in L2 beside the plane: a task's
   * switch of blocks then reads them from there (render_channels). A 1x1 read in place whose
   * weights fit L2 alone takes them too: its input was written by the kernel before, split
   * among the threads, and channel blocks outermost had each thread read all of it, half from
   * the other core (resnet50's 1024 -> 256 at 14x14: 265 us alone, 360 after its producer,
   * 290 with rows outermost; its 3x3s and the 7x7 stage's 1x1s, whose weights pass L2, ran
   * 1.1-1.7x slower with rows outermost) */
  double wbytes = 4.0 * (double)c->CO * K;
  c->rows_outer = ring || wbytes <= CHANNEL_L2_BYTES / 2 || (in_place && wbytes <= CHANNEL_L2_BYTES);
  c->ring = ring;
  c->XQ = xq, c->XPA = xq * c->col_stride;
}

int64_t cg_cpu_pack_numel(const Kernel *k, const CgCpuDirect *c) {
  if (!c->channel_lanes) return 0;
  int64_t PL = (int64_t)c->cp * c->lanes;
  if (c->winograd) return (c->CO + PL - 1) / PL * PL * 16 * c->PC;
  return (c->CO + PL - 1) / PL * PL * k->inner_numel;
}

bool cg_cpu_direct_match(const Plan *p, const Kernel *k, const CgOptions *o, CgCpuDirect *dc) {
  return direct_match(p, k, o, false, dc);
}

/* chained: k may be a chain's kernel before its last (an expansion's contraction, matched for
 * its structure) */
static bool direct_match(const Plan *p, const Kernel *k, const CgOptions *o, bool chained, CgCpuDirect *dc) {
  TE *te = p->te;
  int L = o->cpu_lanes;
  /* in a chain only as a pooled one's convolution (its pool taken in its epilogue) or an expanded
   * one's window (its operand computed as its planes fill) */
  bool pooled = k->chain < 0 && p->kernels[plan_chain_end(p, k->id)].pooled;
  if ((L != 8 && L != 16) || (k->chain != 0 && !pooled && !k->expanded && !chained) || k->kind != KN_REDUCE || k->rank < 3 || k->n_red < 2 ||
      k->n_steps > 2)
    return false;
  int acc = -1;
  for (int i = 0; i < k->n_items; i++) {
    const Item *it = &k->items[i];
    if (it->kind == IT_INNER || it->step > 1 || (it->kind == IT_ACC) != (it->step == 0)) return false;
    if (it->kind != IT_ACC) continue;
    if (acc >= 0 || te->stages[it->stage].rop != RO_SUM || it->body->dtype != KILN_F32) return false;
    acc = i;
  }
  if (acc < 0) return false;
  int h = k->rank - 2, w = k->rank - 1, rh = k->rank + k->n_red - 2, rw = rh + 1, nv = k->rank + k->n_red;
  int64_t H = k->shape[h], W = k->shape[w], KH = k->red_shape[k->n_red - 2], KW = k->red_shape[k->n_red - 1];
  /* 1 x 1 too: a pointwise convolution over channels is the same sum with one tap (convnet_mini's
   * at 12x12 in flat planes: 25 -> 19, 29 -> 18, 22 -> 17 us, against the register tiles) */
  if (k->inner_numel < 4 || W < 4) return false;
  const Expr *b = k->items[acc].body;
  if (b->kind != EX_BINARY || b->op != TB_MUL) return false;
  const Expr *wt = b->args[0], *win = b->args[1];
  if (te_uses_var(wt, h) || te_uses_var(wt, w)) wt = b->args[1], win = b->args[0];
  if (te_uses_var(wt, h) || te_uses_var(wt, w) || !te_uses_var(win, w)) return false;
  /* the output channels: the one var of more than one point the weights read */
  int co = -1;
  for (int v = 0; v < h; v++)
    if (k->shape[v] > 1 && te_uses_var(wt, v)) {
      if (co >= 0) return false;
      co = v;
    }
  if (co < 0) return false;
  Expr *u = te_unclamp_guarded(te, (Expr *)win);
  if (!u) return false;
  /* a depthwise (or grouped) window reads the output's own channel: each channel's plane is its
   * own, the channel a var of the plane's image, one channel a task */
  bool by_channel = te_uses_var(u, co);
  /* the plane: the operand at output row and column 0, the window's vars its row and column;
   * it must give the operand back at row sh x h + rh, column sw x w + rw */
  Expr *map[2 * KILN_MAX_RANK];
  int64_t lo[2 * KILN_MAX_RANK], hi[2 * KILN_MAX_RANK];
  for (int v = 0; v < nv; v++) {
    map[v] = te_var(te, v);
    lo[v] = 0, hi[v] = (v < k->rank ? k->shape[v] : k->red_shape[v - k->rank]) - 1;
  }
  Expr *zero = te_const_i(te, KILN_I64, 0), *vh = map[h], *vw = map[w], *vrh = map[rh], *vrw = map[rw];
  map[h] = map[w] = zero;
  Expr *plane = te_substitute(te, u, map, nv);
  Expr *want = te_simplify(te, u, lo, hi, nv);
  map[h] = vh, map[w] = vw;
  int sh = 0, sw = 0;
  /* strides up to the window, or up to 4 for a 1 x 1 window (a projection at stride 2) */
  for (int s = 1; s <= 4 && (s <= KH || KH * KW == 1) && plane && want && !sh; s++)
    for (int t = 1; t <= 4 && (t <= KW || KH * KW == 1) && !sh; t++) {
      map[rh] = te_binary(te, TB_ADD, te_binary(te, TB_MUL, vh, te_const_i(te, KILN_I64, s)), vrh);
      map[rw] = te_binary(te, TB_ADD, te_binary(te, TB_MUL, vw, te_const_i(te, KILN_I64, t)), vrw);
      Expr *back = te_substitute(te, plane, map, nv);
      if (back && te_simplify(te, back, lo, hi, nv) == want) sh = s, sw = t;
    }
  if (!sh) return false;
  CgCpuDirect c = { .acc = acc, .weight = wt, .plane = plane, .co = co, .stride = sh, .col_stride = sw, .lanes = L,
                    .by_channel = by_channel };
  c.CO = k->shape[co], c.PC = k->inner_numel / (KH * KW);
  /* a sum longer than f32 is kept for (a 3 x 3 window over 512 channels: 4608 points) in spans
   * of whole plane channels, as even as the channels allow */
  c.span = c.PC;
  if (k->inner_numel > CG_CPU_F32_SUM_MAX) {
    if (KH * KW > CG_CPU_F32_SPAN) return false;
    int64_t spans = (k->inner_numel + CG_CPU_F32_SPAN - 1) / CG_CPU_F32_SPAN;
    c.span = (c.PC + spans - 1) / spans;
    while (c.span * KH * KW > CG_CPU_F32_SPAN) c.span--;
  }
  c.YP = sh * (H - 1) + KH, c.XP = sw * (W - 1) + KW;
  /* the plane's interior: its rows and columns m .. last - m, where the padding's guard is
   * decided by the ranges alone (a fill of rows of 50 spent a third of a depthwise kernel on a
   * guard and a load a column, and a scalar remainder) */
  for (int m = 0; m <= 3 && 2 * m < c.YP && 2 * m < c.XP && !c.inner; m++) {
    lo[rh] = m, hi[rh] = c.YP - 1 - m, lo[rw] = m, hi[rw] = c.XP - 1 - m;
    Expr *y = te_simplify(te, plane, lo, hi, nv);
    if (y && !has_select(y, 0)) c.inner = y, c.margin = m;
  }
  lo[rh] = lo[rw] = 0, hi[rh] = KH - 1, hi[rw] = KW - 1;
  /* the registers: sums within 24 of AVX-512's 32 (12 of AVX2's 16), row vectors a tap within 4 (3) */
  int budget = L == 16 ? 24 : 12, xmax = L == 16 ? 4 : 3;
  /* vectors along a row: at most xmax a task, in equal runs */
  int64_t wvt = (W + L - 1) / L, wc = (wvt + xmax - 1) / xmax;
  c.wv = (int)((wvt + wc - 1) / wc), c.wc = wc;
  c.XQ = wc * c.wv * L + (KW - 1) / sw;  /* a phase: every index an output vector's taps read */
  c.XPA = sw * c.XQ;
  bool in_place = KH == 1 && KW == 1 && plane_in_place(p, k, &c, false);
  /* (channel lanes keep a plane of their own pitch: the forms' planes are checked at the end) */
  if ((double)c.PC * (double)c.YP * (double)c.XPA * 4 > DIRECT_PLANE_BYTES && !in_place && !o->cpu_channel_lanes) return false;
  /* output channels x rows a task: the sums and row vectors within the budget, the blocks even,
   * and the least time (tap_cost) over the whole output, the blocks' padding included */
  double best = 0;
  c.YR = (c.YP + sh - 1) / sh;
  double flat_bytes = ((double)c.PC * (double)KW * (double)sh * (double)c.YR * (double)W + L) * 4;
  bool flat_ok = !o->cpu_rows_only && (flat_bytes <= DIRECT_PLANE_BYTES || in_place) && cg_points_idempotent(p, k);
  if (by_channel) {  /* one channel: rows x vectors within the budget (each tap a load and a multiply-add each) */
    c.ob = 1, c.rr = 1;
    while (c.rr < H && (c.rr + 1) * c.wv <= budget / 2 && c.rr < 2 * DIRECT_ROWS_MAX) c.rr++;
    /* flat when the output's rows are whole vectors too: a tap's vector feeds one multiply-add
     * here, so the loads bound the taps, and in the row form all but a window column's are
     * unaligned (two cache lines each); in flat planes at a pitch of whole vectors every load
     * is aligned. Rows a task: the fewest vectors computed (the last block moved back), then
     * the most rows. */
    /* vectors computed, doubled: the row form's, a tie going to flat when rows are whole vectors */
    int64_t fbest = 2 * ((H + c.rr - 1) / c.rr * c.rr * c.wv * wc) + (W % L == 0);
    for (int fr = 1; flat_ok && fr <= 2 * DIRECT_ROWS_MAX && fr <= H; fr++) {
      int64_t fv = (fr * W + L - 1) / L;
      if (fv > budget / 2) break;
      int64_t work = 2 * ((H + fr - 1) / fr * fv);
      if (work < fbest || (c.flat && work == fbest)) fbest = work, c.flat = true, c.fv = (int)fv, c.rr = fr;
    }
    /* the row form from 256 outputs a plane: at 12x12 filling a channel's plane cost about
     * what its taps did (convnet_mini's 192 channels: 18 -> 21 us), at 48x48 the taps won
     * (96 channels: 49 -> 34 us) */
    if (!c.flat && H * W < 256) return false;
    if (dc) *dc = c;
    return true;
  }
  for (int rr = 1; rr <= DIRECT_ROWS_MAX && rr <= H && rr * c.wv <= xmax; rr++)
    for (int64_t ob = budget / (rr * c.wv); ob >= 1; ob--) {
      int64_t cb = (c.CO + ob - 1) / ob;
      if ((c.CO + cb - 1) / cb != ob) continue;  /* the even blocks of a smaller count */
      double cost = (double)cb * (double)((H + rr - 1) / rr) * (double)wc * row_tap_cost(c.CO, ob * rr * c.wv, rr * c.wv + ob);
      if (!best || cost < best) best = cost, c.ob = (int)ob, c.rr = rr;
    }
  if (!best) return false;
  /* flat: when rows leave lanes idle (24 of 32 at rows of 24), a task's rows run on in its
   * vectors through planes at the output's pitch, one a window column (2 rows of 24 in 3
   * vectors); convnet_mini's 48 -> 48 at 24x24: 74 -> 62 us, two threads. Any stride (the rows
   * in phases); a block that would pass the image's end is moved back, so some outputs are
   * stored twice (the same values) */
  if (flat_ok && W % L)
    for (int fr = 1; fr <= 2 * DIRECT_ROWS_MAX && fr <= H; fr++) {
      int64_t fv = (fr * W + L - 1) / L;
      if (fv > xmax) break;  /* 7 vectors of 3 channels (lenet's rows of 14) ran at half the speed */
      for (int64_t ob = budget / fv; ob >= 1; ob--) {
        int64_t cb = (c.CO + ob - 1) / ob;
        if ((c.CO + cb - 1) / cb != ob) continue;
        double cost = (double)cb * (double)((H + fr - 1) / fr) * row_tap_cost(c.CO, ob * fv, fv + ob);
        if (cost < best) best = cost, c.flat = true, c.ob = (int)ob, c.fv = (int)fv, c.rr = fr;
      }
    }
  /* in place: every vector a task reads inside the operand (the row form's runs end with their
   * rows, the flat form's vectors with its rows) */
  c.in_place = in_place && (c.flat ? (int64_t)c.fv * L == (int64_t)c.rr * W : c.XQ == W);
  bool fits = c.in_place || (c.flat ? flat_bytes : (double)c.PC * (double)c.YP * (double)c.XPA * 4) <= DIRECT_PLANE_BYTES;
  if (!chained && k->chain == 0) channel_lanes(p, k, o, fits ? best : HUGE_VAL, budget, &c);
  if (!c.channel_lanes && !fits) return false;
  if (dc) *dc = c;
  return true;
}

/* ---- expansions (an expanded chain, CgCpuDirect.expand) ----
 * The window reads V, contraction ke's value, at V's own point: its row from the plane's row, its
 * column from the plane's column. So each plane row's V row is computed once, before the row is
 * filled: ke's sum over its reduction (each point's a vector loop along the row, the weight
 * loop-invariant), then ke's items, into kiln_ev; filling the row, the window's load of V is
 * that row's element at the load's column (rows and columns past V's, the padding's, clamped:
 * the window's guard zeroes them). V never reaches memory. */

typedef struct LoadOf { int src, n; const Expr *at; } LoadOf;

static void note_load(const Expr *L, void *ctx) {
  LoadOf *f = ctx;
  if (L->src == f->src) f->n++, f->at = L;
}

/* The one load of stage src in e; NULL: none, or several. */
static const Expr *only_load(const Expr *e, int src) {
  LoadOf f = { src, 0, NULL };
  te_visit_loads(e, note_load, &f);
  return f.n == 1 ? f.at : NULL;
}

/* s<V>: V where the plane's expression e loads it (at the current column) from kiln_ev, its
 * column clamped unless e is the plane's interior form */
static void expand_point(const CgCpuDirect *c, const CgEmit *em, const Expr *e) {
  const Expr *L = c->expand ? only_load(e, c->expand_v) : NULL;
  if (!L) return;
  char col[256];
  em->emit(em->r, L->args[L->n_args - 1], col, sizeof col);
  if (e == c->inner) cg_put(em, "const %s s%d = kiln_ev[%s];", em->d->value_type[KILN_F32], c->expand_v, col);
  else
    cg_put(em, "const %s s%d = kiln_ev[%s < 0 ? 0 : %s > %s ? %s : %s];", em->d->value_type[KILN_F32], c->expand_v, col, col,
           cg_lit(em, c->expand_cols - 1), cg_lit(em, c->expand_cols - 1), col);
}

/* kiln_row[from .. to): expression e (the plane's operand, or its interior form) at each
 * column of the plane's row v<rh> */
static void plane_columns(const Kernel *k, const CgCpuDirect *c, const CgEmit *em, const Expr *e, int64_t from, int64_t to) {
  int rw = k->rank + k->n_red - 1;
  char v[256];
  if (from >= to) return;
  cg_put(em, "%s", em->d->simd);
  cg_open(em, "for (%s v%d = %s; v%d < %s; v%d++) {", em->d->index_type, rw, cg_lit(em, from), rw, cg_lit(em, to), rw);
  em->push(em->r);
  expand_point(c, em, e);
  em->emit_lazy(em->r, e, v, sizeof v);
  cg_put(em, "kiln_row[v%d] = %s;", rw, v);
  em->pop(em->r);
  cg_close(em);
}

/* kiln_row[0 .. XP): the plane's row v<rh> (a column stride of 1), the padding's guard decided
 * once an element, and not at all in an interior row's interior columns */
static void plane_row(const Kernel *k, const CgCpuDirect *c, const CgEmit *em) {
  if (!c->inner || !c->margin) {  /* no guard to drop (m 0: the plane is the operand) */
    plane_columns(k, c, em, c->inner ? c->inner : c->plane, 0, c->XP);
    return;
  }
  int rh = k->rank + k->n_red - 2, m = c->margin;
  cg_open(em, "if (v%d >= %d && v%d < %s) {  /* an interior row: its interior columns unguarded */", rh, m, rh, cg_lit(em, c->YP - m));
  plane_columns(k, c, em, c->plane, 0, m);
  plane_columns(k, c, em, c->inner, m, c->XP - m);
  plane_columns(k, c, em, c->plane, c->XP - m, c->XP);
  cg_close(em);
  cg_open(em, "else {");
  plane_columns(k, c, em, c->plane, 0, c->XP);
  cg_close(em);
}

/* The task's image from kiln_bz (its vars: every kernel var but the channels, row and column),
 * and the band of plane rows kiln_ya .. kiln_yb it reads: the plane's rows past those filled
 * (kiln_py1) are filled, each channel's by `fill` (v<rh> the row); a new image or a band that
 * does not follow starts afresh. Leaves the image's vars pushed. */
static void image_band(const Kernel *k, const CgCpuDirect *c, const CgEmit *em, void (*fill)(const Kernel *, const CgCpuDirect *, const CgEmit *)) {
  const char *I = em->d->index_type;
  int h = k->rank - 2, w = k->rank - 1, rh = k->rank + k->n_red - 2, rw = rh + 1;
  int64_t KH = k->red_shape[k->n_red - 2], KW = k->red_shape[k->n_red - 1];
  int64_t CO = c->by_channel ? 1 : c->CO, NF = k->outer_numel / (CO * k->shape[h] * k->shape[w]);
  int nsel[KILN_MAX_RANK], csel[KILN_MAX_RANK];
  for (int v = 0; v < k->rank; v++) nsel[v] = (v != c->co || c->by_channel) && v != h && v != w;
  for (int i = 0; i < k->n_red; i++) csel[i] = i < k->n_red - 2;
  em->push(em->r);
  em->digits(em->r, "kiln_bz", 0, k->rank, k->shape, nsel, 1, NF);
  if (c->in_place) return;  /* no plane to fill */
  if (c->ring)  /* rows the ring has since overwritten are filled again */
    cg_open(em, "if (kiln_bz != kiln_pn || kiln_ya < kiln_py0 || kiln_ya > kiln_py1 || kiln_ya < kiln_py1 - %d) {", c->ring);
  else cg_open(em, "if (kiln_bz != kiln_pn || kiln_ya < kiln_py0 || kiln_ya > kiln_py1) {");
  cg_put(em, "kiln_pn = kiln_bz, kiln_py0 = kiln_py1 = kiln_ya;");
  cg_close(em);
  cg_open(em, "if (kiln_yb > kiln_py1) {");
  cg_open(em, "for (%s kiln_pc = 0; kiln_pc < %s; kiln_pc++) {", I, cg_lit(em, c->PC));
  em->push(em->r);
  em->digits(em->r, "kiln_pc", k->rank, k->n_red, k->red_shape, csel, 1, c->PC);
  cg_open(em, "for (%s v%d = kiln_py1; v%d < kiln_yb; v%d++) {", I, rh, rh, rh);
  /* the operand with the window's vars as the plane's row and column (their ranges so while
   * it is emitted) */
  em->var_range(em->r, rh, 0, c->YP - 1);
  em->var_range(em->r, rw, 0, c->XP - 1);
  fill(k, c, em);
  em->var_range(em->r, rh, 0, KH - 1);
  em->var_range(em->r, rw, 0, KW - 1);
  cg_close(em);
  em->pop(em->r);
  cg_close(em);
  cg_put(em, "kiln_py1 = kiln_yb;");
  cg_close(em);
}

/* A plane's row: the operand at each column, zeros past them; with a column stride sw, column
 * x at phase x % sw, index x / sw (each phase a strided read, a contiguous store) */
static void row_fill(const Kernel *k, const CgCpuDirect *c, const CgEmit *em) {
  const char *I = em->d->index_type;
  int rh = k->rank + k->n_red - 2, rw = rh + 1, sw = c->col_stride;
  if (c->ring)
    cg_put(em, "%s *kiln_row = kiln_pl + (kiln_pc * %d + (v%d & %d)) * %s;", em->d->value_type[KILN_F32], c->ring, rh, c->ring - 1,
           cg_lit(em, c->XPA));
  else  /* (Winograd's plane has rows past YP, zeros: its last tiles' patches) */
    cg_put(em, "%s *kiln_row = kiln_pl + (kiln_pc * %s + v%d) * %s;", em->d->value_type[KILN_F32], cg_lit(em, c->YW ? c->YW : c->YP),
           rh, cg_lit(em, c->XPA));
  if (sw == 1) {
    plane_row(k, c, em);
    cg_put(em, "for (%s kiln_x = %s; kiln_x < %s; kiln_x++) kiln_row[kiln_x] = 0;", I, cg_lit(em, c->XP), cg_lit(em, c->XPA));
    return;
  }
  char v[256];
  cg_open(em, "for (int kiln_ph = 0; kiln_ph < %d; kiln_ph++) {", sw);
  cg_put(em, "const %s kiln_n = (%s - kiln_ph + %d) / %d;  /* the phase's columns inside the plane */", I, cg_lit(em, c->XP),
         sw - 1, sw);
  cg_put(em, "%s", em->d->simd);
  cg_open(em, "for (%s kiln_x = 0; kiln_x < kiln_n; kiln_x++) {", I);
  em->push(em->r);
  cg_put(em, "const %s v%d = kiln_x * %d + kiln_ph;", I, rw, sw);
  expand_point(c, em, c->plane);
  em->emit_lazy(em->r, c->plane, v, sizeof v);
  cg_put(em, "kiln_row[kiln_ph * %s + kiln_x] = %s;", cg_lit(em, c->XQ), v);
  em->pop(em->r);
  cg_close(em);
  cg_put(em, "for (%s kiln_x = kiln_n; kiln_x < %s; kiln_x++) kiln_row[kiln_ph * %s + kiln_x] = 0;", I, cg_lit(em, c->XQ),
         cg_lit(em, c->XQ));
  cg_close(em);
}

/* kiln_cp[from .. to): expression e (the plane's operand, or its interior form) at plane column
 * x * sw + rw of the row v<rh>, for each x */
static void copy_columns(const Kernel *k, const CgCpuDirect *c, const CgEmit *em, const Expr *e, int rw0, int sw, int64_t from,
                         int64_t to) {
  const char *I = em->d->index_type;
  int rw = k->rank + k->n_red - 1;
  char v[256];
  if (from >= to) return;
  cg_put(em, "%s", em->d->simd);
  cg_open(em, "for (%s kiln_x = %s; kiln_x < %s; kiln_x++) {", I, cg_lit(em, from), cg_lit(em, to));
  em->push(em->r);
  cg_put(em, "const %s v%d = kiln_x * %d + %d;", I, rw, sw, rw0);
  expand_point(c, em, e);
  em->emit_lazy(em->r, e, v, sizeof v);
  cg_put(em, "kiln_cp[kiln_x] = %s;", v);
  em->pop(em->r);
  cg_close(em);
}

/* A flat plane's row y: each window column rw's copy of it (column sw x w + rw at w, W long) in
 * row phase y % sh at index y / sh, each straight from the operand. Through one padded row
 * first, the copies' loads (at + 0, + 1, + 2) overlapped the row's fresh stores at other
 * offsets and waited for them: a depthwise 3x3's fill took twice its taps (60 us against 31). */
static void flat_fill(const Kernel *k, const CgCpuDirect *c, const CgEmit *em) {
  int rh = k->rank + k->n_red - 2, sh = c->stride, sw = c->col_stride, m = c->margin;
  int64_t W = k->shape[k->rank - 1], KW = k->red_shape[k->n_red - 1];
  for (int rw = 0; rw < KW; rw++) {
    cg_open(em, "{");
    cg_put(em, "%s *kiln_cp = kiln_pl + (((kiln_pc * %d + %d) * %d + v%d %% %d) * %s + v%d / %d) * %s;",
           em->d->value_type[KILN_F32], (int)KW, rw, sh, rh, sh, cg_lit(em, c->YR), rh, sh, cg_lit(em, W));
    if (!c->inner || !m) {  /* no guard to drop (m 0: the plane is the operand) */
      copy_columns(k, c, em, c->inner ? c->inner : c->plane, rw, sw, 0, W);
    } else {
      /* interior columns: x x sw + rw within m .. XP - m - 1 */
      int64_t lo = m > rw ? (m - rw + sw - 1) / sw : 0, hi = (c->XP - m - rw + sw - 1) / sw;
      if (hi > W) hi = W;
      if (lo > hi) lo = hi;
      cg_open(em, "if (v%d >= %d && v%d < %s) {  /* an interior row: its interior columns unguarded */", rh, m, rh,
              cg_lit(em, c->YP - m));
      copy_columns(k, c, em, c->plane, rw, sw, 0, lo);
      copy_columns(k, c, em, c->inner, rw, sw, lo, hi);
      copy_columns(k, c, em, c->plane, rw, sw, hi, W);
      cg_close(em);
      cg_open(em, "else {");
      copy_columns(k, c, em, c->plane, rw, sw, 0, W);
      cg_close(em);
    }
    cg_close(em);
  }
}

/* kiln_wt: the weight of output channel kiln_o0 + kiln_i at the current tap (past the last
 * channel, the last again: its sums are not stored) */
static void tap_weight(const CgCpuDirect *c, const CgEmit *em) {
  char v[256];
  if (!c->by_channel)
    cg_put(em, "const %s v%d = kiln_o0 + kiln_i < %s ? kiln_o0 + kiln_i : %s;", em->d->index_type, c->co, cg_lit(em, c->CO),
           cg_lit(em, c->CO - 1));
  em->emit(em->r, c->weight, v, sizeof v);
  cg_put(em, "const %s kiln_wt = %s;", em->d->value_type[KILN_F32], v);
}

/* Each output row kiln_h0 + r (r < rows, inside the image) of channels kiln_o0 .. + ob through
 * the kernel's items, its sum at `sum` (in kiln_i, kiln_r, kiln_j: the column from kiln_w0) */
static void epilogue(const Plan *p, const Kernel *k, const CgCpuDirect *c, const CgEmit *em, int rows, const char *sum) {
  const Dialect *d = em->d;
  const char *I = d->index_type;
  int h = k->rank - 2, w = k->rank - 1, L = c->lanes, run = c->flat ? (int)k->shape[w] : c->wv * L;
  int64_t H = k->shape[h], W = k->shape[w], CO = c->by_channel ? 1 : c->CO;
  cg_put(em, "const %s kiln_wn = %s - kiln_w0 < %d ? %s - kiln_w0 : %d;", I, cg_lit(em, W), run, cg_lit(em, W), run);
  cg_open(em, "for (int kiln_i = 0; kiln_i < %d && kiln_o0 + kiln_i < %s; kiln_i++) {", c->ob, cg_lit(em, CO));
  cg_open(em, "for (int kiln_r = 0; kiln_r < %d && kiln_h0 + kiln_r < %s; kiln_r++) {", rows, cg_lit(em, H));
  em->push(em->r);
  if (!c->by_channel) cg_put(em, "const %s v%d = kiln_o0 + kiln_i;", I, c->co);
  cg_put(em, "const %s v%d = kiln_h0 + kiln_r;", I, h);
  /* a row of one run that whole vectors do not cover goes in chunks of a vector, the last moved
   * back to end at the row's end (its first points stored twice, the same values): the
   * compiler's remainder loop was scalar, and lenet's first convolution (rows of 28) spent 40 %
   * of its time there */
  int chunk = W >= L ? L : W >= 8 ? 8 : 0;
  bool chunks = (c->flat || c->wc == 1) && chunk && W % chunk && d->simd_len && cg_points_idempotent(p, k);
  if (chunks) {
    cg_open(em, "for (%s kiln_c = 0; kiln_c < %s; kiln_c += %d) {", I, cg_lit(em, W), chunk);
    cg_put(em, "const %s kiln_jb = kiln_c + %d <= %s ? kiln_c : %s;", I, chunk, cg_lit(em, W), cg_lit(em, W - chunk));
    cg_put(em, d->simd_len, chunk);
    cg_open(em, "for (%s kiln_j = kiln_jb; kiln_j < kiln_jb + %d; kiln_j++) {", I, chunk);
  } else {
    cg_put(em, "%s", d->simd);
    cg_open(em, "for (%s kiln_j = 0; kiln_j < kiln_wn; kiln_j++) {", I);
  }
  em->push(em->r);
  cg_put(em, "const %s v%d = kiln_w0 + kiln_j;", I, w);
  em->items(em->r, 1, sum);
  em->pop(em->r);
  cg_close(em);
  if (chunks) cg_close(em);
  em->pop(em->r);
  cg_close(em);
  cg_close(em);
}

/* In place (CgCpuDirect.in_place): kiln_pp = the operand at plane channel kiln_pc (its vars in
 * scope), row 0, column 0, plus `plus`. */
static void operand_at(const Plan *p, const Kernel *k, const CgCpuDirect *c, const CgEmit *em, const char *plus) {
  const Dialect *d = em->d;
  const char *I = d->index_type;
  const Expr *L = c->plane;
  const Stage *S = &p->te->stages[L->src];
  int rh = k->rank + k->n_red - 2;
  cg_put(em, "%s kiln_po = 0;", I);
  cg_open(em, "{");
  em->push(em->r);
  cg_put(em, "const %s v%d = 0, v%d = 0;", I, rh, rh + 1);
  char a[256];
  for (int i = 0; i < L->n_args; i++) {
    em->emit(em->r, L->args[i], a, sizeof a);
    cg_put(em, "kiln_po = kiln_po * %s + %s;", cg_lit(em, S->shape[i]), a);
  }
  em->pop(em->r);
  cg_close(em);
  cg_put(em, "const %s *kiln_pp = b%d + kiln_po + %s;", d->value_type[KILN_F32], em->param_of(em->r, L->src), plus);
}

/* The sums' loop over plane channels (kiln_pc, opened here; the sums kiln_a, n floats, zeroed).
 * A sum longer than f32 is kept for runs in spans of CgCpuDirect.span channels: each span's sums
 * in f32 registers, added into f64 kiln_aa after it. */
static void sums_open(const CgCpuDirect *c, const CgEmit *em, int64_t n) {
  const char *I = em->d->index_type;
  if (c->span < c->PC) {
    cg_put(em, "%s kiln_aa[%lld];", em->d->value_type[KILN_F64], (long long)n);
    cg_put(em, "memset(kiln_aa, 0, sizeof kiln_aa);");
    cg_open(em, "for (%s kiln_cs = 0; kiln_cs < %s; kiln_cs += %s) {", I, cg_lit(em, c->PC), cg_lit(em, c->span));
    cg_put(em, "const %s kiln_ce = kiln_cs + %s < %s ? kiln_cs + %s : %s;", I, cg_lit(em, c->span), cg_lit(em, c->PC),
           cg_lit(em, c->span), cg_lit(em, c->PC));
    cg_put(em, "memset(kiln_a, 0, sizeof kiln_a);");
    cg_open(em, "for (%s kiln_pc = kiln_cs; kiln_pc < kiln_ce; kiln_pc++) {", I);
    return;
  }
  cg_put(em, "memset(kiln_a, 0, sizeof kiln_a);");
  cg_open(em, "for (%s kiln_pc = 0; kiln_pc < %s; kiln_pc++) {", I, cg_lit(em, c->PC));
}

/* Closes sums_open's loops; kiln_d (declared `dims`, n floats) then holds the sums in f32 (the
 * spans' f64 total rounded once, as a stage of f32 stores its f64 sum). */
static void sums_close(const CgCpuDirect *c, const CgEmit *em, const char *dims, int64_t n) {
  const char *F = em->d->value_type[KILN_F32], *al = em->d->array_align ? em->d->array_align : "";
  cg_close(em);
  if (c->span < c->PC) {
    cg_put(em, "%s kiln_s[%lld]%s;", F, (long long)n, al);
    cg_put(em, "memcpy(kiln_s, kiln_a, sizeof kiln_s);");
    cg_put(em, "for (int kiln_q = 0; kiln_q < %lld; kiln_q++) kiln_aa[kiln_q] += kiln_s[kiln_q];", (long long)n);
    cg_close(em);
  }
  cg_put(em, "%s kiln_d%s%s;", F, dims, al);
  if (c->span < c->PC) {
    cg_put(em, "%s *kiln_dq = (%s *)kiln_d;", F, F);
    cg_put(em, "for (int kiln_q = 0; kiln_q < %lld; kiln_q++) kiln_dq[kiln_q] = (%s)kiln_aa[kiln_q];", (long long)n, F);
  } else cg_put(em, "memcpy(kiln_d, kiln_a, sizeof kiln_d);");
}

/* The flat form's sums and epilogue for a task (render_flat, render_expanded): OB x FV vectors in
 * registers over every plane channel and tap, the planes at `planes` (or the operand, in place),
 * then each output row through the kernel's items. */
static void flat_sums(const Plan *p, const Kernel *k, const CgCpuDirect *c, const CgEmit *em, const char *planes) {
  const Dialect *d = em->d;
  const char *I = d->index_type, *F = d->value_type[KILN_F32];
  int rh = k->rank + k->n_red - 2, rw = rh + 1;
  int64_t W = k->shape[k->rank - 1], KH = k->red_shape[k->n_red - 2], KW = k->red_shape[k->n_red - 1];
  int L = c->lanes, OB = c->ob, FV = c->fv, FR = c->rr, sh = c->stride;
  int64_t chan = KW * sh * c->YR * W;
  int csel[KILN_MAX_RANK];
  for (int i = 0; i < k->n_red; i++) csel[i] = i < k->n_red - 2;
  cg_put(em, "kiln_v kiln_a[%d][%d];", OB, FV);
  sums_open(c, em, (int64_t)OB * FV * L);
  em->push(em->r);
  em->digits(em->r, "kiln_pc", k->rank, k->n_red, k->red_shape, csel, 1, c->PC);
  if (c->in_place) {
    char plus[64];
    snprintf(plus, sizeof plus, "kiln_h0 * %lld", (long long)W);
    operand_at(p, k, c, em, plus);
  } else cg_put(em, "const %s *kiln_pp = %s + kiln_pc * %s + kiln_h0 * %s;", F, planes, cg_lit(em, chan), cg_lit(em, W));
  cg_open(em, "for (%s v%d = 0; v%d < %s; v%d++) {", I, rh, rh, cg_lit(em, KH), rh);
  cg_open(em, "for (%s v%d = 0; v%d < %s; v%d++) {", I, rw, rw, cg_lit(em, KW), rw);
  cg_put(em, "kiln_v kiln_x[%d];", FV);
  cg_put(em, "#pragma GCC unroll %d", FV);
  cg_put(em, "for (int kiln_u = 0; kiln_u < %d; kiln_u++) kiln_x[kiln_u] = *(const kiln_v *)(kiln_pp + ((v%d * %d + v%d %% %d) * %s + "
         "v%d / %d) * %s + kiln_u * %d);", FV, rw, sh, rh, sh, cg_lit(em, c->YR), rh, sh, cg_lit(em, W), L);
  cg_put(em, "for (int kiln_u = 0; kiln_u < %d; kiln_u++) K_KEEP(kiln_x[kiln_u]);  /* one load, not one a channel */", FV);
  cg_put(em, "#pragma GCC unroll %d", OB);
  cg_open(em, "for (int kiln_i = 0; kiln_i < %d; kiln_i++) {", OB);
  em->push(em->r);
  tap_weight(c, em);
  cg_put(em, "#pragma GCC unroll %d", FV);
  cg_put(em, "for (int kiln_u = 0; kiln_u < %d; kiln_u++) kiln_a[kiln_i][kiln_u] += kiln_wt * kiln_x[kiln_u];", FV);
  em->pop(em->r);
  cg_close(em);
  cg_close(em);
  cg_close(em);
  em->pop(em->r);
  char dims[64];
  snprintf(dims, sizeof dims, "[%d][%d]", OB, FV * L);
  sums_close(c, em, dims, (int64_t)OB * FV * L);
  char sum[96];
  snprintf(sum, sizeof sum, "kiln_d[kiln_i][kiln_r * %lld + kiln_j]", (long long)W);
  epilogue(p, k, c, em, FR, sum);
}

/* The flat form (CgCpuDirect.flat): output q = row x W + column of a channel reads, at tap
 * (rh, rw), element q + rh x W of window column rw's plane, so a task's fv vectors of
 * consecutive outputs are fv loads a tap whatever rows they span. */
static void render_flat(const Plan *p, const Kernel *k, const CgCpuDirect *c, const CgEmit *em) {
  const Dialect *d = em->d;
  const char *I = d->index_type, *F = d->value_type[KILN_F32], *al = d->array_align ? d->array_align : "";
  int h = k->rank - 2, w = k->rank - 1;
  int64_t H = k->shape[h], W = k->shape[w], KH = k->red_shape[k->n_red - 2], KW = k->red_shape[k->n_red - 1];
  int L = c->lanes, OB = c->ob, FR = c->rr;
  int64_t CO = c->by_channel ? 1 : c->CO;  /* by channel: the channel is an image var */
  int64_t CB = (CO + OB - 1) / OB, HB = (H + FR - 1) / FR, NF = k->outer_numel / (CO * H * W);
  int sh = c->stride;
  int64_t chan = KW * sh * c->YR * W;  /* a channel's copies, each in sh row phases of YR rows */
  cg_put(em, "typedef %s kiln_v __attribute__((vector_size(%d), aligned(4)));", F, 4 * L);
  bool parallel = (double)k->outer_numel * (double)k->inner_numel >= (double)d->min_parallel_work;
  cg_open(em, "{");
  /* a vector past a block's last row reads into the next plane (lanes not stored); the last
   * plane's has L points after it */
  if (!c->in_place) {
    cg_put(em, "%s kiln_pl[%lld]%s;", F, (long long)(c->PC * chan + L), al);
    cg_put(em, "memset(kiln_pl + %lld, 0, sizeof kiln_pl[0] * %d);", (long long)(c->PC * chan), L);
  }
  cg_put(em, "%s kiln_pn = -1, kiln_py0 = 0, kiln_py1 = 0;  /* the plane's image, its rows filled */", I);
  char head[320];
  cg_team_for(d, "kiln_t", cg_lit(em, NF * HB * CB), parallel, head, sizeof head);
  cg_open(em, "%s", head);
  cg_put(em, "const %s kiln_o0 = kiln_t %% %s * %d, kiln_w0 = 0;", I, cg_lit(em, CB), OB);
  cg_put(em, "const %s kiln_ha = kiln_t / %s %% %s * %d;", I, cg_lit(em, CB), cg_lit(em, HB), FR);
  cg_put(em, "const %s kiln_h0 = kiln_ha < %s ? kiln_ha : %s;  /* the last moved back */", I, cg_lit(em, H - FR),
         cg_lit(em, H - FR));
  cg_put(em, "const %s kiln_bz = kiln_t / %s;", I, cg_lit(em, CB * HB));
  cg_put(em, "const %s kiln_ya = kiln_h0 * %d, kiln_yb = (kiln_h0 + %d) * %d + %s;", I, sh, FR - 1, sh, cg_lit(em, KH));
  image_band(k, c, em, flat_fill);
  flat_sums(p, k, c, em, "kiln_pl");
  em->pop(em->r);
  cg_close(em);
  cg_close(em);
}

/* The stage of kc that pool kp takes windows of (its accumulation's load), and that
 * accumulation. */
static int pooled_value(const Kernel *kp, const Item **acc) {
  for (int i = 0; i < kp->n_items; i++)
    if (kp->items[i].kind == IT_ACC) {
      *acc = &kp->items[i];
      return kp->items[i].body->kind == EX_LOAD ? kp->items[i].body->src : -1;
    }
  *acc = NULL;
  return -1;
}

bool cg_cpu_pool_match(const Plan *p, const Kernel *kc, const Kernel *kp, const CgOptions *o, CgCpuDirect *dc) {
  CgCpuDirect c;
  const Item *acc;
  int V = pooled_value(kp, &acc);
  if (V < 0 || p->te->stages[acc->stage].rop != RO_MAX || !cg_cpu_direct_match(p, kc, o, &c) || c.by_channel || c.wc != 1)
    return false;
  int64_t H = kc->shape[kc->rank - 2], KHp = kp->red_shape[0];
  int budget = c.lanes == 16 ? 24 : 12, xmax = c.lanes == 16 ? 4 : 3;
  /* rows a task a multiple of the window's, then as direct_match: the least time (6 channels x 4
   * rows, the most rows in the budget, ran lenet's pooled conv2 at 393 us against 8 x 2's 160
   * and its pool apart) */
  double best = 0;
  for (int64_t rr = KHp; rr <= DIRECT_ROWS_MAX && rr <= H && rr * c.wv <= xmax; rr += KHp)
    for (int64_t ob = budget / (rr * c.wv); ob >= 1; ob--) {
      int64_t cb = (c.CO + ob - 1) / ob;
      if ((c.CO + cb - 1) / cb != ob) continue;
      double cost = (double)cb * (double)((H + rr - 1) / rr) * tap_cost(ob * rr * c.wv, rr * c.wv + ob);
      if (!best || cost < best) best = cost, c.ob = (int)ob, c.rr = (int)rr;
    }
  if (!best) return false;
  c.flat = false;
  if (dc) *dc = c;
  return true;
}

/* V's load in plane expression e: the one load of V, its row free of the window's column and
 * its column of the window's row, its other args of neither (the image's vars) */
static bool expand_load_ok(const Kernel *kd, const Expr *e, int V) {
  const Expr *L = only_load(e, V);
  int rh = kd->rank + kd->n_red - 2, rw = rh + 1, n = L ? L->n_args : 0;
  if (!L || n < 2) return false;
  for (int i = 0; i < n; i++) {
    bool row = te_uses_var(L->args[i], rh), col = te_uses_var(L->args[i], rw);
    if ((i < n - 2 && (row || col)) || (i == n - 2 && col) || (i == n - 1 && row)) return false;
  }
  return true;
}

/* Is index e the window's own channel (var co, whatever the window's other vars: a depthwise
 * window's channel, v_co + its group's channel 0)? */
static bool reads_channel(const Kernel *kd, const Expr *e, int co) {
  int nv = kd->rank + kd->n_red;
  int64_t v[2 * KILN_MAX_RANK] = { 0 }, mn, mx, at[3] = { 0, kd->shape[co] / 2, kd->shape[co] - 1 };
  for (int i = 0; i < nv; i++)
    if (i != co && te_uses_var(e, i) && (i < kd->rank || kd->red_shape[i - kd->rank] > 1)) return false;
  for (int t = 0; t < 3; t++) {
    v[co] = at[t];
    if (!te_range(e, v, v, nv, &mn, &mx) || mn != mx || mn != at[t]) return false;
  }
  return true;
}

bool cg_cpu_expand_match(const Plan *p, const Kernel *ke, const Kernel *kd, const CgOptions *o, CgCpuDirect *dc) {
  CgCpuDirect c;
  /* a depthwise window (each plane a channel of V, filled once a band), and a sum without a
   * guard (a 1x1 convolution: no padding in the fill's loop) */
  if (!cg_cpu_direct_match(p, kd, o, &c) || !c.by_channel || ke->rank < 2 || ke->inner_numel > EXPAND_SUM_MAX) return false;
  int V = -1, n_acc = 0;
  for (int i = 0; i < ke->n_items; i++) {
    const Item *it = &ke->items[i];
    if (it->kind == IT_ACC) n_acc += 1 + has_select(it->body, 0);
    else if (only_load(c.plane, it->stage)) V = V < 0 ? it->stage : -2;
  }
  if (V < 0 || n_acc != 1 || p->te->stages[V].rank != ke->rank || !expand_load_ok(kd, c.plane, V) ||
      (c.inner && !expand_load_ok(kd, c.inner, V)))
    return false;
  c.expand = ke, c.expand_v = V, c.expand_cols = ke->shape[ke->rank - 1];
  /* flat planes, eg channels a task: the contraction a direct 1 x 1 convolution over an input read
   * in place, V's channel the window's own, eg the most channels whose V rows fit the registers
   * (the channels in whole blocks) */
  CgCpuDirect ce;
  const Expr *L = only_load(c.plane, V);
  int64_t C = kd->shape[c.co], RV = (ke->shape[ke->rank - 1] + c.lanes - 1) / c.lanes;
  int budget = c.lanes == 16 ? 24 : 12;
  if (c.flat && direct_match(p, ke, o, true, &ce) && ce.PC == ke->inner_numel && plane_in_place(p, ke, &ce, true) &&
      ce.co < L->n_args - 2 && ce.CO == C && reads_channel(kd, L->args[ce.co], c.co))
    for (int64_t g = budget / RV; g >= 2 && !c.eg; g--)  /* the block's planes within a plane's bytes (the stack) */
      if (C % g == 0 && (double)g * (double)kd->red_shape[kd->n_red - 1] * c.stride * (double)c.YR *
                                (double)kd->shape[kd->rank - 1] * 4 <= DIRECT_PLANE_BYTES)
        c.eg = (int)g;
  if (!c.eg || p->te->stages[ce.plane->src].numel < c.lanes) return false;
  c.expand_weight = ce.weight, c.expand_x = ce.plane, c.expand_co = ce.co;
  memcpy(c.expand_x_shape, p->te->stages[ce.plane->src].shape, sizeof c.expand_x_shape);
  if (dc) *dc = c;
  return true;
}

/* The planner's question: whether an expansion joins its window. Only where V passes half a
 * core's L2 (its write and read then go to memory): raced on convnet_mini, its 884 KiB V at 48 x
 * 48 joined ran 88 against 45 + 40 us in a quiet phase of this VM and 132 against 77 + 93 in a
 * busy one; its 110 KiB V at 12 x 12 joined 37 against 17 + 15 (quiet), 59 against 28 + 31. */
bool cg_cpu_expand_ok(const Plan *p, const Kernel *ke, const Kernel *kd, const void *ctx) {
  CgCpuDirect c;
  const CgOptions *o = ctx;
  return o && cg_cpu_expand_match(p, ke, kd, o, &c) && (o->cpu_expand_all || p->te->stages[c.expand_v].numel * 4 >= EXPAND_MIN_BYTES);
}

bool cg_cpu_pool_ok(const Plan *p, const Kernel *kc, const Kernel *kp, const void *ctx) {
  return ctx && cg_cpu_pool_match(p, kc, kp, ctx, NULL);
}

/* Does e read var v other than through a load of kernel k's own stages (its sums, which the
 * epilogue has in registers)? */
static bool reads_column(const Kernel *k, const Expr *e, int v) {
  if (e->kind == EX_VAR) return e->var == v;
  if (e->kind == EX_LOAD) {
    for (int i = 0; i < k->n_items; i++)
      if (k->items[i].stage == e->src) return false;
  }
  for (int i = 0; i < e->n_args; i++)
    if (reads_column(k, e->args[i], v)) return true;
  return false;
}

/* The pooled epilogue (cg_cpu_pool_match): the task's rows of kc's value V through kc's items
 * into kiln_s, then each window of them through kp's max and its items (the windows tile the
 * task's rows: whole rows, rows a multiple of the window's): pool_pairs for windows two wide,
 * else pool_windows. A max is the generic renderer's: NaN if any point is NaN. */
static void pool_windows(const Kernel *kc, const Kernel *kp, const CgCpuDirect *c, const CgEmit *em);
static void pool_pairs(const Kernel *kc, const Kernel *kp, const CgCpuDirect *c, const CgEmit *em);

static void pooled_epilogue(const Kernel *kc, const Kernel *kp, const CgCpuDirect *c, const CgEmit *em) {
  const Dialect *d = em->d;
  const char *I = d->index_type, *F = d->value_type[KILN_F32];
  int h = kc->rank - 2, w = kc->rank - 1, RR = c->rr;
  int64_t H = kc->shape[h], W = kc->shape[w], KWp = kp->red_shape[1];
  const Item *acc;
  int V = pooled_value(kp, &acc);
  /* rows padded to whole vectors for pool_pairs' vector loads: the padding's points computed
   * too where kc's items read nothing that depends on the column (a bias, an activation: whole
   * vectors, no scalar tail), else zeros */
  bool pairs = KWp == 2 && c->lanes >= 8;
  int64_t SW = pairs ? (int64_t)c->wv * c->lanes : W;
  bool pad_computed = pairs && SW > W;
  for (int i = 0; i < kc->n_items && pad_computed; i++)
    if (kc->items[i].step >= 1 && (kc->items[i].store || reads_column(kc, kc->items[i].body, w))) pad_computed = false;
  cg_put(em, "%s kiln_s[%d][%d][%lld]%s;", F, c->ob, RR, (long long)SW, d->array_align ? d->array_align : "");
  cg_open(em, "for (int kiln_i = 0; kiln_i < %d && kiln_o0 + kiln_i < %s; kiln_i++) {", c->ob, cg_lit(em, c->CO));
  cg_open(em, "for (int kiln_r = 0; kiln_r < %d && kiln_h0 + kiln_r < %s; kiln_r++) {", RR, cg_lit(em, H));
  em->push(em->r);
  cg_put(em, "const %s v%d = kiln_o0 + kiln_i;", I, c->co);
  cg_put(em, "const %s v%d = kiln_h0 + kiln_r;", I, h);
  cg_put(em, "%s", d->simd);
  cg_open(em, "for (%s kiln_j = 0; kiln_j < %s; kiln_j++) {", I, cg_lit(em, pad_computed ? SW : W));
  em->push(em->r);
  cg_put(em, "const %s v%d = kiln_j;", I, w);
  em->items(em->r, 1, "kiln_d[kiln_i][kiln_r][kiln_j]");
  cg_put(em, "kiln_s[kiln_i][kiln_r][kiln_j] = s%d;", V);
  em->pop(em->r);
  cg_close(em);
  if (SW > W && !pad_computed) cg_put(em, "for (%s kiln_j = %s; kiln_j < %lld; kiln_j++) kiln_s[kiln_i][kiln_r][kiln_j] = 0;", I, cg_lit(em, W), (long long)SW);
  em->pop(em->r);
  cg_close(em);
  cg_close(em);
  if (pairs) pool_pairs(kc, kp, c, em);
  else pool_windows(kc, kp, c, em);
}

/* Opens the loops over a pooled task's outputs: channel kiln_i, pooled row kiln_r (each inside
 * the pool's output), their vars pushed; pool_rows_close closes them. */
static void pool_rows_open(const Kernel *kc, const Kernel *kp, const CgCpuDirect *c, const CgEmit *em) {
  const char *I = em->d->index_type;
  int h = kc->rank - 2, RR = c->rr;
  int64_t KHp = kp->red_shape[0], Hp = kp->shape[h];
  cg_open(em, "for (int kiln_i = 0; kiln_i < %d && kiln_o0 + kiln_i < %s; kiln_i++) {", c->ob, cg_lit(em, c->CO));
  cg_open(em, "for (int kiln_r = 0; kiln_r < %lld && kiln_h0 / %lld + kiln_r < %s; kiln_r++) {", (long long)(RR / KHp),
          (long long)KHp, cg_lit(em, Hp));
  em->push(em->r);
  cg_put(em, "const %s v%d = kiln_o0 + kiln_i;", I, c->co);
  cg_put(em, "const %s v%d = kiln_h0 / %lld + kiln_r;", I, h, (long long)KHp);
}

static void pool_rows_close(const CgEmit *em) {
  em->pop(em->r);
  cg_close(em);
  cg_close(em);
}

/* a vector max of kiln_m and kiln_x into kiln_m, NaN where either is (x > m or x unordered) */
static void vector_max(const CgEmit *em) {
  cg_put(em, "{ const kiln_vi kiln_k = (kiln_x > kiln_m) | (kiln_x != kiln_x);");
  cg_put(em, "  kiln_m = (kiln_v)(((kiln_vi)kiln_x & kiln_k) | ((kiln_vi)kiln_m & ~kiln_k)); }");
}

/* pooled_epilogue's windows two wide, in vectors (GCC's vector extensions): a window's rows
 * combined a whole vector at a time, then each pair of vectors' even and odd lanes (two
 * shuffles) combined into a vector of the pool's outputs, which kp's items take in a vector
 * loop. Staged through arrays as pool_windows, lenet's pooled convolutions ran behind the
 * convolution and its pool apart (conv1 101 us against 50 + 22, two threads, kernel harness). */
static void pool_pairs(const Kernel *kc, const Kernel *kp, const CgCpuDirect *c, const CgEmit *em) {
  const Dialect *d = em->d;
  const char *I = d->index_type, *F = d->value_type[KILN_F32];
  int w = kc->rank - 1, RR = c->rr, L = c->lanes, WV = c->wv, PV = (WV + 1) / 2;
  int64_t KHp = kp->red_shape[0], Wp = kp->shape[w];
  const Item *acc;
  pooled_value(kp, &acc);
  char even[256], odd[256];
  size_t ea = 0, oa = 0;
  for (int j = 0; j < L; j++) {
    ea += (size_t)snprintf(even + ea, sizeof even - ea, "%s%d", j ? ", " : "", 2 * j);
    oa += (size_t)snprintf(odd + oa, sizeof odd - oa, "%s%d", j ? ", " : "", 2 * j + 1);
  }
  cg_put(em, "typedef int kiln_vi __attribute__((vector_size(%d)));", 4 * L);
  cg_put(em, "const kiln_vi kiln_ev = { %s }, kiln_od = { %s };", even, odd);
  /* every window of the task first, into kiln_q, then kp's items: an items loop reading kiln_q
   * right after its vector was stored waited for the store (its second half's load, 6 floats
   * in, is not forwarded: 14 % of lenet's pooled conv1) */
  cg_put(em, "%s kiln_q[%d][%lld][%d]%s;", F, c->ob, (long long)(RR / KHp), PV * L, d->array_align ? d->array_align : "");
  cg_open(em, "for (int kiln_i = 0; kiln_i < %d; kiln_i++) {", c->ob);
  cg_open(em, "for (int kiln_r = 0; kiln_r < %lld; kiln_r++) {", (long long)(RR / KHp));
  cg_put(em, "kiln_v kiln_c[%d];", 2 * PV);
  cg_open(em, "for (int kiln_u = 0; kiln_u < %d; kiln_u++) {", WV);
  cg_put(em, "kiln_v kiln_m = *(const kiln_v *)&kiln_s[kiln_i][kiln_r * %lld][kiln_u * %d];", (long long)KHp, L);
  for (int64_t a = 1; a < KHp; a++) {
    cg_put(em, "const kiln_v kiln_x = *(const kiln_v *)&kiln_s[kiln_i][kiln_r * %lld + %lld][kiln_u * %d];", (long long)KHp,
           (long long)a, L);
    vector_max(em);
  }
  cg_put(em, "kiln_c[kiln_u] = kiln_m;");
  cg_close(em);
  if (WV % 2) cg_put(em, "kiln_c[%d] = kiln_c[%d];", WV, WV - 1);  /* lanes past the row: not stored */
  cg_open(em, "for (int kiln_u = 0; kiln_u < %d; kiln_u++) {", PV);
  cg_put(em, "kiln_v kiln_m = __builtin_shuffle(kiln_c[2 * kiln_u], kiln_c[2 * kiln_u + 1], kiln_ev);");
  cg_put(em, "const kiln_v kiln_x = __builtin_shuffle(kiln_c[2 * kiln_u], kiln_c[2 * kiln_u + 1], kiln_od);");
  vector_max(em);
  cg_put(em, "*(kiln_v *)&kiln_q[kiln_i][kiln_r][kiln_u * %d] = kiln_m;", L);
  cg_close(em);
  cg_close(em);
  cg_close(em);
  em->kernel(em->r, kp);
  pool_rows_open(kc, kp, c, em);
  cg_put(em, "%s", d->simd);
  cg_open(em, "for (%s kiln_j = 0; kiln_j < %s; kiln_j++) {", I, cg_lit(em, Wp));
  em->push(em->r);
  cg_put(em, "const %s v%d = kiln_j;", I, w);
  cg_put(em, "const int an%d = 0;  /* a NaN is in the value */", acc->stage);
  em->items(em->r, 1, "kiln_q[kiln_i][kiln_r][kiln_j]");
  em->pop(em->r);
  cg_close(em);
  pool_rows_close(em);
  em->kernel(em->r, kc);
}

/* pooled_epilogue's windows in general: the rows of a window first, a contiguous vector loop along
 * the row (a max of each column and a NaN flag), then its columns, every column's max read at the
 * pool's stride. */
static void pool_windows(const Kernel *kc, const Kernel *kp, const CgCpuDirect *c, const CgEmit *em) {
  const Dialect *d = em->d;
  const char *I = d->index_type, *F = d->value_type[KILN_F32];
  int w = kc->rank - 1;
  int64_t KHp = kp->red_shape[0], KWp = kp->red_shape[1];
  int64_t Wp = kp->shape[w];
  const Item *acc;
  pooled_value(kp, &acc);
  em->kernel(em->r, kp);
  pool_rows_open(kc, kp, c, em);
  cg_put(em, "%s kiln_c[%lld];", F, (long long)(KWp * Wp));
  cg_put(em, "int kiln_cn[%lld];", (long long)(KWp * Wp));
  cg_put(em, "%s", d->simd);
  cg_open(em, "for (%s kiln_j = 0; kiln_j < %s; kiln_j++) {", I, cg_lit(em, KWp * Wp));
  cg_put(em, "%s kiln_m = -%s;", F, d->inf_f32);
  cg_put(em, "int kiln_n = 0;");
  for (int64_t a = 0; a < KHp; a++) {
    cg_open(em, "{");
    cg_put(em, "const %s kiln_x = kiln_s[kiln_i][kiln_r * %lld + %lld][kiln_j];", F, (long long)KHp, (long long)a);
    cg_put(em, "kiln_m = kiln_x > kiln_m ? kiln_x : kiln_m;");
    cg_put(em, "kiln_n |= kiln_x != kiln_x;");
    cg_close(em);
  }
  cg_put(em, "kiln_c[kiln_j] = kiln_m, kiln_cn[kiln_j] = kiln_n;");
  cg_close(em);
  cg_put(em, "%s", d->simd);
  cg_open(em, "for (%s kiln_j = 0; kiln_j < %s; kiln_j++) {", I, cg_lit(em, Wp));
  em->push(em->r);
  cg_put(em, "const %s v%d = kiln_j;", I, w);
  cg_put(em, "%s kiln_m = -%s;", F, d->inf_f32);
  cg_put(em, "int an%d = 0;", acc->stage);
  for (int64_t b = 0; b < KWp; b++) {
    cg_open(em, "{");
    cg_put(em, "const %s kiln_x = kiln_c[kiln_j * %lld + %lld];", F, (long long)KWp, (long long)b);
    cg_put(em, "kiln_m = kiln_x > kiln_m ? kiln_x : kiln_m;");
    cg_put(em, "an%d |= kiln_cn[kiln_j * %lld + %lld];", acc->stage, (long long)KWp, (long long)b);
    cg_close(em);
  }
  em->items(em->r, 1, "kiln_m");
  em->pop(em->r);
  cg_close(em);
  pool_rows_close(em);
  em->kernel(em->r, kc);
}

static void render_rows(const Plan *p, const Kernel *k, const Kernel *pool, const CgCpuDirect *c, const CgEmit *em);

/* kiln_vr[g][x] = V at channel kiln_c0 + g of the block, V's row that plane row v<rh> reads,
 * column x: the contraction ke's sum over its input's channels, its input's row loaded once for
 * every channel of the block (eg x the row's vectors sums in registers), then ke's items. */
static void expand_rows(const Kernel *k, const CgCpuDirect *c, const CgEmit *em) {
  const Kernel *ke = c->expand;
  const Dialect *d = em->d;
  const char *I = d->index_type;
  const Expr *L = only_load(c->plane, c->expand_v), *X = c->expand_x;
  int n = ke->rank, rh = k->rank + k->n_red - 2, G = c->eg, Lw = c->lanes, acc = -1;
  int64_t W = c->expand_cols, RV = (W + Lw - 1) / Lw, PC = ke->inner_numel;
  for (int i = 0; i < ke->n_items; i++)
    if (ke->items[i].kind == IT_ACC) acc = i;
  if (!L || acc < 0) return;  /* cg_cpu_expand_match said there are */
  char a[256];
  /* V's point but its channel and column, in names ke's vars do not shadow */
  for (int i = 0; i < n - 1; i++) {
    if (i == c->expand_co) continue;
    em->emit(em->r, L->args[i], a, sizeof a);
    cg_put(em, "const %s kiln_e%d = %s;", I, i, a);
  }
  int floor = em->isolate(em->r, -1);
  em->push(em->r);
  em->kernel(em->r, ke);
  int rhe = n + ke->n_red - 2, csel[KILN_MAX_RANK];
  for (int i = 0; i < ke->n_red; i++) csel[i] = i < ke->n_red - 2;
  /* a padding row's (the window's guard zeroes it): nothing */
  cg_open(em, "if (kiln_e%d >= 0 && kiln_e%d < %s) {  /* k%d's value along the row for the block's channels: its sum, "
          "then its items */", n - 2, n - 2, cg_lit(em, ke->shape[n - 2]), ke->id);
  for (int i = 0; i < n - 1; i++)
    if (i != c->expand_co) cg_put(em, "const %s v%d = kiln_e%d;", I, i, i);
  cg_put(em, "kiln_v kiln_va[%d][%lld];", G, (long long)RV);
  cg_put(em, "memset(kiln_va, 0, sizeof kiln_va);");
  cg_open(em, "for (%s kiln_k = 0; kiln_k < %s; kiln_k++) {", I, cg_lit(em, PC));
  em->push(em->r);
  em->digits(em->r, "kiln_k", n, ke->n_red, ke->red_shape, csel, 1, PC);
  /* the input's row at column 0 (the plane's row V's: a 1 x 1 window), its offset from the load's
   * args; then the window's one tap for the weights */
  cg_put(em, "%s kiln_xo = 0;", I);
  cg_open(em, "{");
  em->push(em->r);
  cg_put(em, "const %s v%d = v%d, v%d = 0;", I, rhe, n - 2, rhe + 1);
  for (int i = 0; i < X->n_args; i++) {
    em->emit(em->r, X->args[i], a, sizeof a);
    cg_put(em, "kiln_xo = kiln_xo * %s + %s;", cg_lit(em, c->expand_x_shape[i]), a);
  }
  em->pop(em->r);
  cg_close(em);
  cg_put(em, "const %s *kiln_xr = b%d + kiln_xo;", d->value_type[KILN_F32], em->param_of(em->r, X->src));
  cg_put(em, "kiln_v kiln_xv[%lld];", (long long)RV);
  for (int64_t u = 0; u < RV; u++) {
    if ((u + 1) * Lw <= W) {
      cg_put(em, "kiln_xv[%lld] = *(const kiln_v *)(kiln_xr + %lld);", (long long)u, (long long)(u * Lw));
      continue;
    }
    /* the row's last vector, short: its lanes past the row the next row's (not stored); at the
     * input's end the vector that ends with the row, its lanes shifted down (a copy through
     * memory left every sum in memory: convnet_mini's 96 -> 192 expansion at 12 x 12, 70 -> 36 us) */
    int64_t numel = 1, r = W - u * Lw;
    for (int i = 0; i < X->n_args; i++) numel *= c->expand_x_shape[i];
    char sh[256];
    size_t at = 0;
    for (int j = 0; j < Lw; j++) at += (size_t)snprintf(sh + at, sizeof sh - at, "%s%lld", j ? ", " : "", (long long)(j < r ? Lw - r + j : 0));
    cg_put(em, "if (kiln_xo + %lld <= %s) kiln_xv[%lld] = *(const kiln_v *)(kiln_xr + %lld);", (long long)((u + 1) * Lw),
           cg_lit(em, numel), (long long)u, (long long)(u * Lw));
    cg_put(em, "else kiln_xv[%lld] = __builtin_shuffle(*(const kiln_v *)(kiln_xr + %lld), (kiln_vi){ %s });", (long long)u,
           (long long)(W - Lw), sh);
  }
  cg_put(em, "#pragma GCC unroll %d", G);
  cg_open(em, "for (int kiln_g = 0; kiln_g < %d; kiln_g++) {", G);
  cg_put(em, "const %s kiln_wt = kiln_wb[kiln_k][kiln_g];", d->value_type[KILN_F32]);
  cg_put(em, "#pragma GCC unroll %lld", (long long)RV);
  cg_put(em, "for (int kiln_u = 0; kiln_u < %lld; kiln_u++) kiln_va[kiln_g][kiln_u] += kiln_wt * kiln_xv[kiln_u];", (long long)RV);
  cg_close(em);
  em->pop(em->r);
  cg_close(em);
  cg_put(em, "memcpy(kiln_vr, kiln_va, sizeof kiln_va);");
  cg_open(em, "for (int kiln_g = 0; kiln_g < %d; kiln_g++) {", G);
  em->push(em->r);
  cg_put(em, "const %s v%d = kiln_c0 + kiln_g;", I, c->expand_co);
  cg_put(em, "const %s v%d = kiln_e%d;", I, n - 2, n - 2);
  cg_put(em, "%s", d->simd);
  cg_open(em, "for (%s v%d = 0; v%d < %s; v%d++) {", I, n - 1, n - 1, cg_lit(em, W), n - 1);
  em->push(em->r);
  snprintf(a, sizeof a, "kiln_vr[kiln_g][v%d]", n - 1);
  em->items(em->r, 1, a);
  cg_put(em, "kiln_vr[kiln_g][v%d] = s%d;", n - 1, c->expand_v);
  em->pop(em->r);
  cg_close(em);
  em->pop(em->r);
  cg_close(em);
  cg_close(em);
  em->pop(em->r);
  em->kernel(em->r, k);
  em->isolate(em->r, floor);
  em->var_range(em->r, rh, 0, c->YP - 1);
  em->var_range(em->r, rh + 1, 0, c->XP - 1);
}

/* kiln_wb[k][g] = the contraction's weight of channel kiln_c0 + g of the block at its input's
 * channel k: a point's eg weights one after another (read in place, eg rows of the weights
 * apart, one cache line each, the sums waited on them: 98 against 41 us for convnet_mini's 96 ->
 * 192 expansion at 12 x 12) */
static void expand_weights(const CgCpuDirect *c, const CgEmit *em) {
  const Kernel *ke = c->expand;
  const char *I = em->d->index_type;
  int n = ke->rank, rhe = n + ke->n_red - 2, csel[KILN_MAX_RANK];
  for (int i = 0; i < ke->n_red; i++) csel[i] = i < ke->n_red - 2;
  char a[256];
  int floor = em->isolate(em->r, -1);
  em->push(em->r);
  em->kernel(em->r, ke);
  cg_open(em, "for (%s kiln_k = 0; kiln_k < %s; kiln_k++) {", I, cg_lit(em, ke->inner_numel));
  em->push(em->r);
  em->digits(em->r, "kiln_k", n, ke->n_red, ke->red_shape, csel, 1, ke->inner_numel);
  cg_put(em, "const %s v%d = 0, v%d = 0;", I, rhe, rhe + 1);
  cg_open(em, "for (int kiln_g = 0; kiln_g < %d; kiln_g++) {", c->eg);
  em->push(em->r);
  cg_put(em, "const %s v%d = kiln_c0 + kiln_g;", I, c->expand_co);
  em->emit(em->r, c->expand_weight, a, sizeof a);
  cg_put(em, "kiln_wb[kiln_k][kiln_g] = %s;", a);
  em->pop(em->r);
  cg_close(em);
  em->pop(em->r);
  cg_close(em);
  em->pop(em->r);
  em->isolate(em->r, floor);
}

/* An expanded chain (CgCpuDirect.expand), flat planes: a task eg channels of the window's x rr
 * rows. The planes of the block's channels fill together as the rows advance: each plane row's V
 * rows for every channel of the block (expand_rows), then each channel's copies (flat_fill, the
 * window's load of V read from its V row); then each channel's taps and epilogue as render_flat's. */
static void render_expanded(const Plan *p, const Kernel *k, const CgCpuDirect *c, const CgEmit *em) {
  const Dialect *d = em->d;
  const char *I = d->index_type, *F = d->value_type[KILN_F32], *al = d->array_align ? d->array_align : "";
  int h = k->rank - 2, w = k->rank - 1, rh = k->rank + k->n_red - 2, rw = rh + 1;
  int64_t H = k->shape[h], W = k->shape[w], KH = k->red_shape[k->n_red - 2], KW = k->red_shape[k->n_red - 1];
  int L = c->lanes, FR = c->rr, G = c->eg, sh = c->stride;
  int64_t C = k->shape[c->co], CBK = C / G, HB = (H + FR - 1) / FR, NF = k->outer_numel / (C * H * W);
  int64_t chan = KW * sh * c->YR * W, RV = (c->expand_cols + L - 1) / L;
  int nsel[KILN_MAX_RANK], csel[KILN_MAX_RANK];
  for (int v = 0; v < k->rank; v++) nsel[v] = v != c->co && v != h && v != w;
  for (int i = 0; i < k->n_red; i++) csel[i] = i < k->n_red - 2;
  cg_put(em, "typedef %s kiln_v __attribute__((vector_size(%d), aligned(4)));", F, 4 * L);
  cg_put(em, "typedef int kiln_vi __attribute__((vector_size(%d)));", 4 * L);
  bool parallel = (double)k->outer_numel * (double)k->inner_numel >= (double)d->min_parallel_work;
  cg_open(em, "{");
  cg_put(em, "%s kiln_pl[%lld]%s;", F, (long long)(G * chan + L), al);
  cg_put(em, "memset(kiln_pl + %lld, 0, sizeof kiln_pl[0] * %d);", (long long)(G * chan), L);
  cg_put(em, "%s kiln_vr[%d][%lld]%s = { { 0 } };  /* a padding row's stays: the guard zeroes it */", F, G, (long long)(RV * L), al);
  cg_put(em, "%s kiln_wb[%lld][%d]%s;", F, (long long)c->expand->inner_numel, G, al);
  cg_put(em, "%s kiln_pn = -1, kiln_py0 = 0, kiln_py1 = 0, kiln_wc = -1;  /* the planes' block, their rows filled */", I);
  char head[320];
  cg_team_for(d, "kiln_t", cg_lit(em, NF * CBK * HB), parallel, head, sizeof head);
  cg_open(em, "%s", head);
  cg_put(em, "const %s kiln_o0 = 0, kiln_w0 = 0;", I);
  cg_put(em, "const %s kiln_ha = kiln_t %% %s * %d;", I, cg_lit(em, HB), FR);
  cg_put(em, "const %s kiln_h0 = kiln_ha < %s ? kiln_ha : %s;  /* the last moved back */", I, cg_lit(em, H - FR),
         cg_lit(em, H - FR));
  cg_put(em, "const %s kiln_bz = kiln_t / %s;  /* the image and the block of channels */", I, cg_lit(em, HB));
  cg_put(em, "const %s kiln_c0 = kiln_bz %% %s * %d, kiln_bn = kiln_bz / %s;", I, cg_lit(em, CBK), G, cg_lit(em, CBK));
  cg_put(em, "const %s kiln_ya = kiln_h0 * %d, kiln_yb = (kiln_h0 + %d) * %d + %s;", I, sh, FR - 1, sh, cg_lit(em, KH));
  cg_open(em, "if (kiln_c0 != kiln_wc) {  /* the block's weights */");
  cg_put(em, "kiln_wc = kiln_c0;");
  expand_weights(c, em);
  em->kernel(em->r, k);
  cg_close(em);
  em->push(em->r);
  em->digits(em->r, "kiln_bn", 0, k->rank, k->shape, nsel, 1, NF);
  cg_open(em, "if (kiln_bz != kiln_pn || kiln_ya < kiln_py0 || kiln_ya > kiln_py1) {");
  cg_put(em, "kiln_pn = kiln_bz, kiln_py0 = kiln_py1 = kiln_ya;");
  cg_close(em);
  cg_open(em, "if (kiln_yb > kiln_py1) {");
  cg_open(em, "for (%s v%d = kiln_py1; v%d < kiln_yb; v%d++) {", I, rh, rh, rh);
  em->var_range(em->r, rh, 0, c->YP - 1);
  em->var_range(em->r, rw, 0, c->XP - 1);
  expand_rows(k, c, em);
  cg_open(em, "for (int kiln_g = 0; kiln_g < %d; kiln_g++) {", G);
  em->push(em->r);
  cg_put(em, "const %s v%d = kiln_c0 + kiln_g, kiln_pc = kiln_g;", I, c->co);
  cg_put(em, "const %s *kiln_ev = kiln_vr[kiln_g];", F);
  em->digits(em->r, "0", k->rank, k->n_red, k->red_shape, csel, 1, 1);
  flat_fill(k, c, em);
  em->pop(em->r);
  cg_close(em);
  em->var_range(em->r, rh, 0, KH - 1);
  em->var_range(em->r, rw, 0, KW - 1);
  cg_close(em);
  cg_put(em, "kiln_py1 = kiln_yb;");
  cg_close(em);
  /* each channel of the block: its taps over its plane, then its epilogue */
  cg_open(em, "for (int kiln_g = 0; kiln_g < %d; kiln_g++) {", G);
  em->push(em->r);
  cg_put(em, "const %s v%d = kiln_c0 + kiln_g;", I, c->co);
  char planes[64];
  snprintf(planes, sizeof planes, "kiln_pl + kiln_g * %lld", (long long)chan);
  flat_sums(p, k, c, em, planes);
  em->pop(em->r);
  cg_close(em);
  em->pop(em->r);
  cg_close(em);
  cg_close(em);
}

/* Channel lanes (CgCpuDirect.channel_lanes). Tasks: an image's channel blocks, each over the
 * image's blocks of rr rows x cr columns (whole rows, or a run dividing a row: the block's
 * weights, [k][cp x lanes] in the pack, stay in cache while its pixels go by). Where all the
 * weights fit in L2 (rows_outer), an image's blocks of rows instead, each over every channel
 * block and its runs: a thread computes a band of rows in every channel, the band the next
 * kernel's threads read when they share out pixels (as the register tiles do), and it fills
 * the plane's rows of its band only. Channel blocks outermost, the 1x1 convolutions after
 * resnet50's 3x3 over 64 and 256 channels read half their input from the other core (5-9 %
 * slower); rows outermost where the weights pass L2, its stage of 512 channels read them again
 * from memory for every row (1.4-1.7x slower). The pixels come from the row form's plane
 * (filled whole, once a thread an image; by rows, its band as the rows go by) or the operand
 * in place: at a tap, pixel (i, j) of the block lies a constant i x sh x pitch + j past the
 * block's first, so a tap's cr x rr broadcasts take one pointer. Flat planes (a copy a window column), which let
 * any run of pixels be one pointer, were 3 times the plane and ran the 3x3 over 512 channels
 * at 7x7 10 % slower (their weights and planes passed L2). The last block of rows moves back to
 * end at the image's last row and stores only the rows past the block before it. */
static void render_panels(const Plan *p, const Kernel *k, const CgCpuDirect *c, const CgEmit *em);

/* A channel-lanes tap: P weight vectors from kiln_wk (loaded once, not once a pixel), then each of
 * the task's R pixels, kiln_xp[x_at] with kiln_r the pixel, broadcast into its P sums kiln_a. */
static void lane_taps(const CgEmit *em, int P, int L, int R, const char *x_at) {
  cg_put(em, "kiln_v kiln_w[%d];", P);
  cg_put(em, "#pragma GCC unroll %d", P);
  cg_put(em, "for (int kiln_u = 0; kiln_u < %d; kiln_u++) kiln_w[kiln_u] = *(const kiln_v *)(kiln_wk + kiln_u * %d);", P, L);
  cg_put(em, "for (int kiln_u = 0; kiln_u < %d; kiln_u++) K_KEEP(kiln_w[kiln_u]);  /* one load, not one a pixel */", P);
  cg_put(em, "#pragma GCC unroll %d", R);
  cg_open(em, "for (int kiln_r = 0; kiln_r < %d; kiln_r++) {", R);
  cg_put(em, "const %s kiln_x = kiln_xp[%s];", em->d->value_type[KILN_F32], x_at);
  cg_put(em, "#pragma GCC unroll %d", P);
  cg_put(em, "for (int kiln_u = 0; kiln_u < %d; kiln_u++) kiln_a[kiln_r][kiln_u] += kiln_x * kiln_w[kiln_u];", P);
  cg_close(em);
}

static void render_winograd(const Kernel *k, const CgCpuDirect *c, const CgEmit *em);

static void render_channels(const Plan *p, const Kernel *k, const CgCpuDirect *c, const CgEmit *em) {
  if (c->panel) {
    render_panels(p, k, c, em);
    return;
  }
  if (c->winograd) {
    render_winograd(k, c, em);
    return;
  }
  const Dialect *d = em->d;
  const char *I = d->index_type, *F = d->value_type[KILN_F32], *al = d->array_align ? d->array_align : "";
  int h = k->rank - 2, w = k->rank - 1, rh = k->rank + k->n_red - 2, rw = rh + 1;
  int64_t H = k->shape[h], W = k->shape[w], KH = k->red_shape[k->n_red - 2], KW = k->red_shape[k->n_red - 1];
  int L = c->lanes, P = c->cp, M = c->rr, N = c->cr, R = M * N, PL = P * L, sh = c->stride, sw = c->col_stride;
  int64_t CB = (c->CO + PL - 1) / PL, HB = (H + M - 1) / M, WB = W / N, NF = k->outer_numel / (c->CO * H * W);
  /* a block's pixel (i, j): i rows of sh plane rows and j columns of sw on, in place; in the
   * plane, whose rows are in phases of the column stride, j columns of one */
  int64_t K = k->inner_numel, plane = (c->ring ? c->ring : c->YP) * c->XPA, pitch = sh * (c->in_place ? c->pitch : c->XPA);
  int64_t step = c->in_place ? sw : 1;
  int csel[KILN_MAX_RANK];
  for (int i = 0; i < k->n_red; i++) csel[i] = i < k->n_red - 2;
  cg_put(em, "typedef %s kiln_v __attribute__((vector_size(%d), aligned(4)));", F, 4 * L);
  bool parallel = (double)k->outer_numel * (double)k->inner_numel >= (double)d->min_parallel_work;
  cg_open(em, "{");
  if (!c->in_place) cg_put(em, "%s kiln_pl[%lld]%s;", F, (long long)(c->PC * plane), al);
  cg_put(em, "%s kiln_pn = -1, kiln_py0 = 0, kiln_py1 = 0;  /* the plane's image, its rows filled */", I);
  char head[320];
  cg_team_for(d, "kiln_t", cg_lit(em, NF * CB * HB * WB), parallel, head, sizeof head);
  cg_open(em, "%s", head);
  int64_t CS = c->rows_outer ? WB : WB * HB, HS = c->rows_outer ? WB * CB : WB;  /* the channel block's and rows' strides in t */
  cg_put(em, "const %s kiln_x0 = kiln_t %% %s * %d, kiln_cb = kiln_t / %s %% %s, kiln_o0 = kiln_cb * %d;", I, cg_lit(em, WB), N,
         cg_lit(em, CS), cg_lit(em, CB), PL);
  cg_put(em, "const %s kiln_ha = kiln_t / %s %% %s * %d;", I, cg_lit(em, HS), cg_lit(em, HB), M);
  cg_put(em, "const %s kiln_y0 = kiln_ha < %s ? kiln_ha : %s;  /* the last moved back */", I, cg_lit(em, H - M), cg_lit(em, H - M));
  cg_put(em, "const %s kiln_bz = kiln_t / %s;", I, cg_lit(em, WB * HB * CB));
  if (c->rows_outer)
    cg_put(em, "const %s kiln_ya = kiln_y0 * %d, kiln_yb = (kiln_y0 + %d) * %d + %s;", I, sh, M - 1, sh, cg_lit(em, KH));
  else
    cg_put(em, "const %s kiln_ya = 0, kiln_yb = %s;", I, cg_lit(em, c->YP));
  image_band(k, c, em, row_fill);
  cg_put(em, "const %s *kiln_wb = kiln_pk + kiln_cb * %s;", F, cg_lit(em, K * PL));
  cg_put(em, "kiln_v kiln_a[%d][%d];", R, P);
  sums_open(c, em, (int64_t)R * PL);
  em->push(em->r);
  em->digits(em->r, "kiln_pc", k->rank, k->n_red, k->red_shape, csel, 1, c->PC);
  char at[96];
  if (c->ring) snprintf(at, sizeof at, "kiln_x0 * %lld", (long long)step);  /* the row at each tap: the ring's */
  else snprintf(at, sizeof at, "kiln_y0 * %lld + kiln_x0 * %lld", (long long)pitch, (long long)step);
  if (c->in_place) operand_at(p, k, c, em, at);
  else cg_put(em, "const %s *kiln_pp = kiln_pl + kiln_pc * %s + %s;", F, cg_lit(em, plane), at);
  cg_open(em, "for (%s v%d = 0; v%d < %s; v%d++) {", I, rh, rh, cg_lit(em, KH), rh);
  cg_open(em, "for (%s v%d = 0; v%d < %s; v%d++) {", I, rw, rw, cg_lit(em, KW), rw);
  if (c->ring)
    cg_put(em, "const %s *kiln_xp = kiln_pp + ((kiln_y0 * %d + v%d) & %d) * %s + v%d %% %d * %s + v%d / %d;", F, sh, rh,
           c->ring - 1, cg_lit(em, c->XPA), rw, sw, cg_lit(em, c->XQ), rw, sw);
  else
    cg_put(em, "const %s *kiln_xp = kiln_pp + v%d * %s + v%d %% %d * %s + v%d / %d;", F, rh, cg_lit(em, c->XPA), rw, sw,
           cg_lit(em, c->XQ), rw, sw);
  cg_put(em, "const %s *kiln_wk = kiln_wb + ((kiln_pc * %s + v%d) * %s + v%d) * %d;", F, cg_lit(em, KH), rh, cg_lit(em, KW), rw,
         PL);
  char x_at[128];
  snprintf(x_at, sizeof x_at, "kiln_r / %d * %s + kiln_r %% %d * %d", N, cg_lit(em, pitch), N, (int)step);
  lane_taps(em, P, L, R, x_at);
  cg_close(em);
  cg_close(em);
  em->pop(em->r);
  char dims[64];
  snprintf(dims, sizeof dims, "[%d][%d]", R, PL);
  sums_close(c, em, dims, (int64_t)R * PL);
  /* the epilogue, the rows past the block before: each pixel's channels a vector at a time
   * (channel_items), else each channel's pixels, a run along a row at a time (the output's and a
   * residual's lines; a pixel's channels are planes apart) */
  cg_put(em, "const int kiln_ni = %s - kiln_o0 < %d ? (int)(%s - kiln_o0) : %d;", cg_lit(em, c->CO), PL, cg_lit(em, c->CO), PL);
  if (!c->channel_items) {
    cg_open(em, "for (int kiln_i = 0; kiln_i < kiln_ni; kiln_i++) {");
    em->push(em->r);
    cg_put(em, "const %s v%d = kiln_o0 + kiln_i;", I, c->co);
  }
  cg_open(em, "for (int kiln_m = 0; kiln_m < %d; kiln_m++) {", M);
  cg_put(em, "if (kiln_y0 + kiln_m < kiln_ha) continue;");
  em->push(em->r);
  cg_put(em, "const %s v%d = kiln_y0 + kiln_m;", I, h);
  if (!c->channel_items) cg_put(em, "%s", d->simd);
  cg_open(em, "for (int kiln_j = 0; kiln_j < %d; kiln_j++) {", N);
  em->push(em->r);
  cg_put(em, "const %s v%d = kiln_x0 + kiln_j;", I, w);
  if (c->channel_items) {
    cg_put(em, "%s", d->simd);
    cg_open(em, "for (int kiln_i = 0; kiln_i < kiln_ni; kiln_i++) {");
    em->push(em->r);
    cg_put(em, "const %s v%d = kiln_o0 + kiln_i;", I, c->co);
  }
  char sum[64];
  snprintf(sum, sizeof sum, "kiln_d[kiln_m * %d + kiln_j][kiln_i]", N);
  em->items(em->r, 1, sum);
  if (c->channel_items) {
    em->pop(em->r);
    cg_close(em);
  }
  em->pop(em->r);
  cg_close(em);
  em->pop(em->r);
  cg_close(em);
  if (!c->channel_items) {
    em->pop(em->r);
    cg_close(em);
  }
  cg_close(em);
  cg_close(em);
}

/* Channel lanes over pixel panels (CgCpuDirect.panel, a 1 x 1 window). Tasks: an image's channel
 * blocks x its blocks of cr pixels taken flat (q = row x W + column), in render_channels' two
 * orders. A thread copies a block's pixels of every plane channel into its panel the first time
 * it reads the block in an image (kiln_pf: the image each block holds), so a thread whose tasks
 * keep to some blocks (rows outermost) fills only those. A tap is then cp weight vectors and cr
 * broadcasts from one run of cr floats, the next channel's run right after it. */
static void render_panels(const Plan *p, const Kernel *k, const CgCpuDirect *c, const CgEmit *em) {
  const Dialect *d = em->d;
  const char *I = d->index_type, *F = d->value_type[KILN_F32], *al = d->array_align ? d->array_align : "";
  int h = k->rank - 2, w = k->rank - 1, rh = k->rank + k->n_red - 2, rw = rh + 1;
  int64_t H = k->shape[h], W = k->shape[w], HW = H * W, K = k->inner_numel, PB = c->PB;
  int L = c->lanes, P = c->cp, R = c->cr, PL = P * L;
  int64_t CB = (c->CO + PL - 1) / PL, NF = k->outer_numel / (c->CO * HW);
  int nsel[KILN_MAX_RANK], csel[KILN_MAX_RANK];
  for (int v = 0; v < k->rank; v++) nsel[v] = v != c->co && v != h && v != w;
  for (int i = 0; i < k->n_red; i++) csel[i] = i < k->n_red - 2;
  cg_put(em, "typedef %s kiln_v __attribute__((vector_size(%d), aligned(4)));", F, 4 * L);
  bool parallel = (double)k->outer_numel * (double)k->inner_numel >= (double)d->min_parallel_work;
  cg_open(em, "{");
  cg_put(em, "%s kiln_pl[%lld]%s;", F, (long long)(PB * R * c->PC), al);
  cg_put(em, "%s kiln_pf[%lld];  /* the image whose pixels each block of the panels holds */", I, (long long)PB);
  cg_put(em, "for (%s kiln_b = 0; kiln_b < %s; kiln_b++) kiln_pf[kiln_b] = -1;", I, cg_lit(em, PB));
  char head[320];
  cg_team_for(d, "kiln_t", cg_lit(em, NF * CB * PB), parallel, head, sizeof head);
  cg_open(em, "%s", head);
  if (c->rows_outer)
    cg_put(em, "const %s kiln_cb = kiln_t %% %s, kiln_pb = kiln_t / %s %% %s;", I, cg_lit(em, CB), cg_lit(em, CB), cg_lit(em, PB));
  else
    cg_put(em, "const %s kiln_pb = kiln_t %% %s, kiln_cb = kiln_t / %s %% %s;", I, cg_lit(em, PB), cg_lit(em, PB), cg_lit(em, CB));
  cg_put(em, "const %s kiln_bz = kiln_t / %s, kiln_o0 = kiln_cb * %d;", I, cg_lit(em, CB * PB), PL);
  em->push(em->r);
  em->digits(em->r, "kiln_bz", 0, k->rank, k->shape, nsel, 1, NF);
  cg_open(em, "if (kiln_pf[kiln_pb] != kiln_bz) {  /* the block's pixels of this image, once */");
  cg_put(em, "kiln_pf[kiln_pb] = kiln_bz;");
  cg_open(em, "for (%s kiln_pc = 0; kiln_pc < %s; kiln_pc++) {", I, cg_lit(em, c->PC));
  em->push(em->r);
  em->digits(em->r, "kiln_pc", k->rank, k->n_red, k->red_shape, csel, 1, c->PC);
  cg_put(em, "%s *kiln_row = kiln_pl + (kiln_pb * %s + kiln_pc) * %d;", F, cg_lit(em, c->PC), R);
  cg_open(em, "for (int kiln_r = 0; kiln_r < %d; kiln_r++) {", R);
  cg_put(em, "const %s kiln_q = kiln_pb * %d + kiln_r;", I, R);
  cg_open(em, "if (kiln_q >= %s) {  /* past the image: zeros, never stored */", cg_lit(em, HW));
  cg_put(em, "kiln_row[kiln_r] = 0;");
  cg_put(em, "continue;");
  cg_close(em);
  em->push(em->r);
  /* the operand at the pixel: the plane's row and column its output row and column at the strides */
  cg_put(em, "const %s v%d = kiln_q / %s * %d, v%d = kiln_q %% %s * %d;", I, rh, cg_lit(em, W), c->stride, rw, cg_lit(em, W),
         c->col_stride);
  em->var_range(em->r, rh, 0, c->YP - 1);
  em->var_range(em->r, rw, 0, c->XP - 1);
  char v[256];
  em->emit_lazy(em->r, c->plane, v, sizeof v);
  cg_put(em, "kiln_row[kiln_r] = %s;", v);
  em->var_range(em->r, rh, 0, 0);
  em->var_range(em->r, rw, 0, 0);
  em->pop(em->r);
  cg_close(em);
  em->pop(em->r);
  cg_close(em);
  cg_close(em);
  cg_put(em, "const %s *kiln_wb = kiln_pk + kiln_cb * %s, *kiln_xb = kiln_pl + kiln_pb * %s;", F, cg_lit(em, K * PL),
         cg_lit(em, c->PC * R));
  cg_put(em, "kiln_v kiln_a[%d][%d];", R, P);
  sums_open(c, em, (int64_t)R * PL);
  cg_put(em, "const %s *kiln_xp = kiln_xb + kiln_pc * %d, *kiln_wk = kiln_wb + kiln_pc * %d;", F, R, PL);
  lane_taps(em, P, L, R, "kiln_r");
  char dims[64];
  snprintf(dims, sizeof dims, "[%d][%d]", R, PL);
  sums_close(c, em, dims, (int64_t)R * PL);
  /* the epilogue: each channel's run of the block's pixels (the output's and a residual's lines) */
  cg_put(em, "const int kiln_ni = %s - kiln_o0 < %d ? (int)(%s - kiln_o0) : %d;", cg_lit(em, c->CO), PL, cg_lit(em, c->CO), PL);
  cg_put(em, "const int kiln_rn = %s - kiln_pb * %d < %d ? (int)(%s - kiln_pb * %d) : %d;", cg_lit(em, HW), R, R, cg_lit(em, HW),
         R, R);
  cg_open(em, "for (int kiln_i = 0; kiln_i < kiln_ni; kiln_i++) {");
  em->push(em->r);
  cg_put(em, "const %s v%d = kiln_o0 + kiln_i;", I, c->co);
  cg_put(em, "%s", d->simd);
  cg_open(em, "for (int kiln_r = 0; kiln_r < kiln_rn; kiln_r++) {");
  em->push(em->r);
  cg_put(em, "const %s v%d = (kiln_pb * %d + kiln_r) / %s, v%d = (kiln_pb * %d + kiln_r) %% %s;", I, h, R, cg_lit(em, W), w, R,
         cg_lit(em, W));
  em->items(em->r, 1, "kiln_d[kiln_r][kiln_i]");
  em->pop(em->r);
  cg_close(em);
  em->pop(em->r);
  cg_close(em);
  em->pop(em->r);
  cg_close(em);
  cg_close(em);
  (void)p;
}

/* Winograd (CgCpuDirect.winograd). Tasks: an image's bands of BT tile blocks x its channel blocks
 * (t = (image x NB + band) x CB + channel block). A task first makes sure its thread holds the
 * band's patches: each block's slot of kiln_pv is filled (its plane rows by image_band, then the
 * transform) the first time the thread reads the block in the band (kiln_pf: the image and band
 * each slot holds). The sums then run one transform point at a time over every block of the band,
 * so that point's weights (a plane channel's cp vectors each) stay in L1 while the band's patches
 * stream by; each block's cp x cr vectors over the plane channels into kiln_m. Last the outputs'
 * transform gives each channel's 2 x 2 outputs a tile to the epilogue. Tiles past the image's
 * last (its odd row or column) read zeros and are not stored. */
static void render_winograd(const Kernel *k, const CgCpuDirect *c, const CgEmit *em) {
  const Dialect *d = em->d;
  const char *I = d->index_type, *F = d->value_type[KILN_F32], *al = d->array_align ? d->array_align : "";
  int h = k->rank - 2, w = k->rank - 1;
  int64_t H = k->shape[h], W = k->shape[w], TT = c->TH * c->TW, PC = c->PC, XW = c->XPA, BT = c->BT;
  int L = c->lanes, P = c->cp, R = c->cr, PL = P * L;
  int64_t CB = (c->CO + PL - 1) / PL, NB = (c->TB + BT - 1) / BT, NF = k->outer_numel / (c->CO * H * W);
  int rh = k->rank + k->n_red - 2, rw = rh + 1, csel[KILN_MAX_RANK];
  for (int i = 0; i < k->n_red; i++) csel[i] = i < k->n_red - 2;
  cg_put(em, "typedef %s kiln_v __attribute__((vector_size(%d), aligned(4)));", F, 4 * L);
  bool parallel = (double)k->outer_numel * (double)k->inner_numel >= (double)d->min_parallel_work;
  cg_open(em, "{");
  cg_put(em, "%s kiln_pl[%lld]%s;", F, (long long)(PC * c->YW * XW), al);
  cg_put(em, "%s kiln_pv[%lld]%s;", F, (long long)(BT * 16 * PC * R), al);
  cg_put(em, "%s kiln_pf[%lld];  /* the image and band whose patches each slot holds */", I, (long long)BT);
  cg_put(em, "for (%s kiln_b = 0; kiln_b < %s; kiln_b++) kiln_pf[kiln_b] = -1;", I, cg_lit(em, BT));
  cg_put(em, "%s kiln_pn = -1, kiln_py0 = 0, kiln_py1 = 0;  /* the plane's image, its rows filled */", I);
  if (c->YW > c->YP)  /* the rows below the plane's last, which the last tiles' patches read */
    cg_put(em, "for (%s kiln_pc = 0; kiln_pc < %s; kiln_pc++) memset(kiln_pl + (kiln_pc * %s + %s) * %s, 0, %s);", I,
           cg_lit(em, PC), cg_lit(em, c->YW), cg_lit(em, c->YP), cg_lit(em, XW), cg_lit(em, (c->YW - c->YP) * XW * 4));
  char head[320];
  cg_team_for(d, "kiln_t", cg_lit(em, NF * NB * CB), parallel, head, sizeof head);
  cg_open(em, "%s", head);
  cg_put(em, "const %s kiln_cb = kiln_t %% %s, kiln_bd = kiln_t / %s %% %s, kiln_bz = kiln_t / %s, kiln_o0 = kiln_cb * %d;", I,
         cg_lit(em, CB), cg_lit(em, CB), cg_lit(em, NB), cg_lit(em, NB * CB), PL);
  cg_put(em, "const %s kiln_q0 = kiln_bd * %s, kiln_qe = kiln_q0 + %s < %s ? kiln_q0 + %s : %s;  /* the band's tiles */", I,
         cg_lit(em, BT * R), cg_lit(em, BT * R), cg_lit(em, TT), cg_lit(em, BT * R), cg_lit(em, TT));
  cg_put(em, "const int kiln_nb = (int)((kiln_qe - kiln_q0 + %d) / %d);  /* its blocks */", R - 1, R);
  cg_open(em, "for (int kiln_tl = 0; kiln_tl < kiln_nb; kiln_tl++) {");
  cg_open(em, "if (kiln_pf[kiln_tl] == kiln_bz * %s + kiln_bd) continue;  /* the block's patches, once a band */", cg_lit(em, NB));
  cg_put(em, "kiln_pf[kiln_tl] = kiln_bz * %s + kiln_bd;", cg_lit(em, NB));
  cg_put(em, "const %s kiln_qa = kiln_q0 + kiln_tl * %d, kiln_qb = kiln_qa + %d < kiln_qe ? kiln_qa + %d : kiln_qe;", I, R, R, R);
  cg_put(em, "%s *kiln_vb = kiln_pv + kiln_tl * %s;", F, cg_lit(em, 16 * PC * R));
  /* the plane's rows the block's patches read: from its first tile's row to its last's + 4 */
  cg_put(em, "const %s kiln_ya = kiln_qa / %s * 2, kiln_yr = (kiln_qb - 1) / %s * 2 + 4;", I, cg_lit(em, c->TW), cg_lit(em, c->TW));
  cg_put(em, "const %s kiln_yb = kiln_yr < %s ? kiln_yr : %s;", I, cg_lit(em, c->YP), cg_lit(em, c->YP));
  image_band(k, c, em, row_fill);
  em->pop(em->r);
  cg_open(em, "for (%s kiln_pc = 0; kiln_pc < %s; kiln_pc++) {", I, cg_lit(em, PC));
  cg_put(em, "const %s *kiln_pp = kiln_pl + kiln_pc * %s;", F, cg_lit(em, c->YW * XW));
  cg_put(em, "%s *kiln_vv = kiln_vb + kiln_pc * %d;", F, R);
  cg_open(em, "for (int kiln_r = 0; kiln_r < %d; kiln_r++) {", R);
  cg_put(em, "const %s kiln_q = kiln_qa + kiln_r;", I);
  cg_open(em, "if (kiln_q >= kiln_qb) {  /* past the image's tiles: zeros, never stored */");
  cg_put(em, "for (int kiln_e = 0; kiln_e < 16; kiln_e++) kiln_vv[kiln_e * %s + kiln_r] = 0;", cg_lit(em, PC * R));
  cg_put(em, "continue;");
  cg_close(em);
  cg_put(em, "const %s *kiln_d0 = kiln_pp + kiln_q / %s * %s + kiln_q %% %s * 2;", F, cg_lit(em, c->TW), cg_lit(em, 2 * XW),
         cg_lit(em, c->TW));
  /* T = d B along each row, then V = Bt T down each column (Bt: 1 0 -1 0 / 0 1 1 0 / 0 -1 1 0 / 0 1 0 -1) */
  cg_put(em, "%s kiln_tt[4][4];", F);
  cg_open(em, "for (int kiln_i = 0; kiln_i < 4; kiln_i++) {");
  cg_put(em, "const %s *kiln_di = kiln_d0 + kiln_i * %s;", F, cg_lit(em, XW));
  cg_put(em, "kiln_tt[kiln_i][0] = kiln_di[0] - kiln_di[2], kiln_tt[kiln_i][1] = kiln_di[1] + kiln_di[2];");
  cg_put(em, "kiln_tt[kiln_i][2] = kiln_di[2] - kiln_di[1], kiln_tt[kiln_i][3] = kiln_di[1] - kiln_di[3];");
  cg_close(em);
  cg_open(em, "for (int kiln_j = 0; kiln_j < 4; kiln_j++) {");
  cg_put(em, "kiln_vv[(0 + kiln_j) * %s + kiln_r] = kiln_tt[0][kiln_j] - kiln_tt[2][kiln_j];", cg_lit(em, PC * R));
  cg_put(em, "kiln_vv[(4 + kiln_j) * %s + kiln_r] = kiln_tt[1][kiln_j] + kiln_tt[2][kiln_j];", cg_lit(em, PC * R));
  cg_put(em, "kiln_vv[(8 + kiln_j) * %s + kiln_r] = kiln_tt[2][kiln_j] - kiln_tt[1][kiln_j];", cg_lit(em, PC * R));
  cg_put(em, "kiln_vv[(12 + kiln_j) * %s + kiln_r] = kiln_tt[1][kiln_j] - kiln_tt[3][kiln_j];", cg_lit(em, PC * R));
  cg_close(em);
  cg_close(em);
  cg_close(em);
  cg_close(em);
  /* the 16 sums over the plane channels, a transform point at a time over the band's blocks */
  cg_put(em, "const %s *kiln_wb = kiln_pk + kiln_cb * %s;", F, cg_lit(em, 16 * PC * PL));
  cg_put(em, "%s kiln_m[16][%lld][%d][%d]%s;", F, (long long)BT, R, PL, al);
  cg_open(em, "for (int kiln_e = 0; kiln_e < 16; kiln_e++) {");
  cg_open(em, "for (int kiln_tl = 0; kiln_tl < kiln_nb; kiln_tl++) {");
  cg_put(em, "kiln_v kiln_a[%d][%d];", R, P);
  cg_put(em, "memset(kiln_a, 0, sizeof kiln_a);");
  cg_put(em, "const %s *kiln_xb = kiln_pv + (kiln_tl * 16 + kiln_e) * %s, *kiln_we = kiln_wb + kiln_e * %s;", F,
         cg_lit(em, PC * R), cg_lit(em, PC * PL));
  cg_open(em, "for (%s kiln_pc = 0; kiln_pc < %s; kiln_pc++) {", I, cg_lit(em, PC));
  cg_put(em, "const %s *kiln_xp = kiln_xb + kiln_pc * %d, *kiln_wk = kiln_we + kiln_pc * %d;", F, R, PL);
  lane_taps(em, P, L, R, "kiln_r");
  cg_close(em);
  cg_put(em, "memcpy(kiln_m[kiln_e][kiln_tl], kiln_a, sizeof kiln_a);");
  cg_close(em);
  cg_close(em);
  /* each block: Y = At M A (At: 1 1 1 0 / 0 1 -1 -1), a vector of channels at a time, into
   * kiln_d[tile][row x 2 + column], then the epilogue, each channel's outputs tile by tile */
  int nsel[KILN_MAX_RANK];
  for (int v = 0; v < k->rank; v++) nsel[v] = v != c->co && v != h && v != w;
  em->push(em->r);
  em->digits(em->r, "kiln_bz", 0, k->rank, k->shape, nsel, 1, NF);
  cg_put(em, "const int kiln_ni = %s - kiln_o0 < %d ? (int)(%s - kiln_o0) : %d;", cg_lit(em, c->CO), PL, cg_lit(em, c->CO), PL);
  cg_open(em, "for (int kiln_tl = 0; kiln_tl < kiln_nb; kiln_tl++) {");
  cg_put(em, "%s kiln_d[%d][4][%d]%s;", F, R, PL, al);
  cg_open(em, "for (int kiln_r = 0; kiln_r < %d; kiln_r++) {", R);
  cg_put(em, "%s", d->simd);
  cg_open(em, "for (int kiln_l = 0; kiln_l < %d; kiln_l++) {", PL);
  cg_put(em, "%s kiln_s0[4], kiln_s1[4];", F);
  cg_open(em, "for (int kiln_x = 0; kiln_x < 4; kiln_x++) {");
  cg_put(em, "const %s *kiln_mx = &kiln_m[kiln_x * 4][kiln_tl][kiln_r][kiln_l];", F);
  cg_put(em, "const %s kiln_m0 = kiln_mx[0], kiln_m1 = kiln_mx[%s], kiln_m2 = kiln_mx[%s], kiln_m3 = kiln_mx[%s];", F,
         cg_lit(em, BT * R * PL), cg_lit(em, 2 * BT * R * PL), cg_lit(em, 3 * BT * R * PL));
  cg_put(em, "kiln_s0[kiln_x] = kiln_m0 + kiln_m1 + kiln_m2, kiln_s1[kiln_x] = kiln_m1 - kiln_m2 - kiln_m3;");
  cg_close(em);
  cg_put(em, "kiln_d[kiln_r][0][kiln_l] = kiln_s0[0] + kiln_s0[1] + kiln_s0[2];");
  cg_put(em, "kiln_d[kiln_r][1][kiln_l] = kiln_s1[0] + kiln_s1[1] + kiln_s1[2];");
  cg_put(em, "kiln_d[kiln_r][2][kiln_l] = kiln_s0[1] - kiln_s0[2] - kiln_s0[3];");
  cg_put(em, "kiln_d[kiln_r][3][kiln_l] = kiln_s1[1] - kiln_s1[2] - kiln_s1[3];");
  cg_close(em);
  cg_close(em);
  cg_put(em, "const %s kiln_qa = kiln_q0 + kiln_tl * %d, kiln_qb = kiln_qa + %d < kiln_qe ? kiln_qa + %d : kiln_qe;", I, R, R, R);
  /* A tile whose outputs are not all finite (an infinity or NaN in its patch, or a sum past f32's
   * range) takes them again as the window's sum: the transforms spread a patch's NaN or infinity
   * to all four outputs (and an infinity times the transforms' zeros to NaN), where the window
   * makes exactly the outputs it covers NaN or infinite. */
  cg_open(em, "for (int kiln_r = 0; kiln_r < kiln_qb - kiln_qa; kiln_r++) {");
  cg_put(em, "%s kiln_z = 0;", F);
  cg_put(em, "for (int kiln_s = 0; kiln_s < 4; kiln_s++)");
  cg_put(em, "  for (int kiln_l = 0; kiln_l < kiln_ni; kiln_l++) kiln_z += kiln_d[kiln_r][kiln_s][kiln_l] * 0.0f;");
  cg_put(em, "if (kiln_z == 0) continue;  /* all finite (a NaN compares unequal) */");
  cg_put(em, "const %s kiln_q = kiln_qa + kiln_r;", I);
  cg_open(em, "for (int kiln_l = 0; kiln_l < kiln_ni; kiln_l++) {");
  em->push(em->r);
  cg_put(em, "const %s v%d = kiln_o0 + kiln_l;", I, c->co);
  cg_open(em, "for (int kiln_s = 0; kiln_s < 4; kiln_s++) {");
  cg_put(em, "const %s *kiln_pp = kiln_pl + (kiln_q / %s * 2 + kiln_s / 2) * %s + kiln_q %% %s * 2 + kiln_s %% 2;", F,
         cg_lit(em, c->TW), cg_lit(em, XW), cg_lit(em, c->TW));
  cg_put(em, "%s kiln_acc = 0;", F);
  cg_open(em, "for (%s kiln_pc = 0; kiln_pc < %s; kiln_pc++) {", I, cg_lit(em, PC));
  em->push(em->r);
  em->digits(em->r, "kiln_pc", k->rank, k->n_red, k->red_shape, csel, 1, PC);
  cg_open(em, "for (%s v%d = 0; v%d < 3; v%d++) {", I, rh, rh, rh);
  cg_open(em, "for (%s v%d = 0; v%d < 3; v%d++) {", I, rw, rw, rw);
  em->push(em->r);
  char wv[256];
  em->emit(em->r, c->weight, wv, sizeof wv);
  cg_put(em, "kiln_acc += %s * kiln_pp[(kiln_pc * %s + v%d) * %s + v%d];", wv, cg_lit(em, c->YW), rh, cg_lit(em, XW), rw);
  em->pop(em->r);
  cg_close(em);
  cg_close(em);
  em->pop(em->r);
  cg_close(em);
  cg_put(em, "kiln_d[kiln_r][kiln_s][kiln_l] = kiln_acc;");
  cg_close(em);
  em->pop(em->r);
  cg_close(em);
  cg_close(em);
  cg_open(em, "for (int kiln_i = 0; kiln_i < kiln_ni; kiln_i++) {");
  em->push(em->r);
  cg_put(em, "const %s v%d = kiln_o0 + kiln_i;", I, c->co);
  cg_open(em, "for (%s kiln_q = kiln_qa; kiln_q < kiln_qb; kiln_q++) {", I);
  cg_open(em, "for (int kiln_s = 0; kiln_s < 4; kiln_s++) {");
  cg_put(em, "const %s kiln_y = kiln_q / %s * 2 + kiln_s / 2, kiln_x = kiln_q %% %s * 2 + kiln_s %% 2;", I, cg_lit(em, c->TW),
         cg_lit(em, c->TW));
  cg_put(em, "if (kiln_y >= %s || kiln_x >= %s) continue;", cg_lit(em, H), cg_lit(em, W));
  em->push(em->r);
  cg_put(em, "const %s v%d = kiln_y, v%d = kiln_x;", I, h, w);
  em->items(em->r, 1, "kiln_d[kiln_q - kiln_qa][kiln_s][kiln_i]");
  em->pop(em->r);
  cg_close(em);
  cg_close(em);
  em->pop(em->r);
  cg_close(em);
  cg_close(em);
  em->pop(em->r);
  cg_close(em);
  cg_close(em);
}

/* A pack's loop (channel lanes' and Winograd's weights): tasks of a block of output channels x n
 * points named kiln_<name> (their digits over the sum's vars `sel`), then each of the block's
 * PL channels, v<co> (clamped to the last; the caller stores zeros past them). Closed by
 * pack_close. */
static void pack_open(const Kernel *k, const CgCpuDirect *c, const CgEmit *em, int64_t n, const char *name, const int *sel) {
  const char *I = em->d->index_type;
  int PL = c->cp * c->lanes;
  int64_t CB = (c->CO + PL - 1) / PL;
  char head[320];
  cg_team_for(em->d, "kiln_q", cg_lit(em, CB * n), true, head, sizeof head);
  cg_open(em, "%s", head);
  cg_put(em, "const %s kiln_%s = kiln_q %% %s, kiln_o0 = kiln_q / %s * %d;", I, name, cg_lit(em, n), cg_lit(em, n), PL);
  em->push(em->r);
  char var[32];
  snprintf(var, sizeof var, "kiln_%s", name);
  em->digits(em->r, var, k->rank, k->n_red, k->red_shape, sel, 1, n);
  cg_open(em, "for (int kiln_j = 0; kiln_j < %d; kiln_j++) {", PL);
  cg_put(em, "const %s v%d = kiln_o0 + kiln_j < %s ? kiln_o0 + kiln_j : %s;", I, c->co, cg_lit(em, c->CO), cg_lit(em, c->CO - 1));
}

static void pack_close(const CgEmit *em) {
  cg_close(em);
  em->pop(em->r);
  cg_close(em);
}

/* Winograd's weights: each output channel's 3 x 3 window g of each plane channel as U = G g Gt
 * (G: 1 0 0 / .5 .5 .5 / .5 -.5 .5 / 0 0 1), in f64, rounded once; the pack [block][16][plane
 * channel][cp x lanes], zeros past the channels */
static void winograd_pack(const Kernel *k, const CgCpuDirect *c, const CgEmit *em) {
  const Dialect *d = em->d;
  const char *I = d->index_type, *D = d->value_type[KILN_F64];
  int rh = k->rank + k->n_red - 2, rw = rh + 1, PL = c->cp * c->lanes;
  int64_t PC = c->PC;
  int csel[KILN_MAX_RANK];
  for (int i = 0; i < k->n_red; i++) csel[i] = i < k->n_red - 2;
  char v[256];
  pack_open(k, c, em, PC, "pc", csel);
  cg_put(em, "%s kiln_g[3][3], kiln_gr[3][4], kiln_u[4][4];", D);
  cg_open(em, "for (%s v%d = 0; v%d < 3; v%d++) {", I, rh, rh, rh);
  cg_open(em, "for (%s v%d = 0; v%d < 3; v%d++) {", I, rw, rw, rw);
  em->push(em->r);
  em->emit(em->r, c->weight, v, sizeof v);
  cg_put(em, "kiln_g[v%d][v%d] = %s;", rh, rw, v);
  em->pop(em->r);
  cg_close(em);
  cg_close(em);
  cg_open(em, "for (int kiln_i = 0; kiln_i < 3; kiln_i++) {");
  cg_put(em, "const %s *kiln_gi = kiln_g[kiln_i];", D);
  cg_put(em, "kiln_gr[kiln_i][0] = kiln_gi[0], kiln_gr[kiln_i][3] = kiln_gi[2];");
  cg_put(em, "kiln_gr[kiln_i][1] = (kiln_gi[0] + kiln_gi[1] + kiln_gi[2]) * 0.5;");
  cg_put(em, "kiln_gr[kiln_i][2] = (kiln_gi[0] - kiln_gi[1] + kiln_gi[2]) * 0.5;");
  cg_close(em);
  cg_open(em, "for (int kiln_n = 0; kiln_n < 4; kiln_n++) {");
  cg_put(em, "kiln_u[0][kiln_n] = kiln_gr[0][kiln_n], kiln_u[3][kiln_n] = kiln_gr[2][kiln_n];");
  cg_put(em, "kiln_u[1][kiln_n] = (kiln_gr[0][kiln_n] + kiln_gr[1][kiln_n] + kiln_gr[2][kiln_n]) * 0.5;");
  cg_put(em, "kiln_u[2][kiln_n] = (kiln_gr[0][kiln_n] - kiln_gr[1][kiln_n] + kiln_gr[2][kiln_n]) * 0.5;");
  cg_close(em);
  /* the block's transforms begin at kiln_o0 x 16 x PC (kiln_o0 its first channel, PL a block) */
  cg_put(em, "for (int kiln_e = 0; kiln_e < 16; kiln_e++)");
  cg_put(em, "  kiln_pk[kiln_o0 * %s + (kiln_e * %s + kiln_pc) * %d + kiln_j] = kiln_o0 + kiln_j < %s ? (%s)kiln_u[kiln_e / 4][kiln_e %% 4] : 0;",
         cg_lit(em, 16 * PC), cg_lit(em, PC), PL, cg_lit(em, c->CO), d->value_type[KILN_F32]);
  pack_close(em);
}

void cg_render_cpu_pack(const Plan *p, const Kernel *k, const CgCpuDirect *c, const CgEmit *em) {
  if (c->winograd) {
    winograd_pack(k, c, em);
    return;
  }
  int PL = c->cp * c->lanes;
  int all[KILN_MAX_RANK];
  for (int i = 0; i < k->n_red; i++) all[i] = 1;
  char v[256];
  pack_open(k, c, em, k->inner_numel, "kk", all);
  em->emit(em->r, c->weight, v, sizeof v);
  cg_put(em, "kiln_pk[kiln_q * %d + kiln_j] = kiln_o0 + kiln_j < %s ? %s : 0;", PL, cg_lit(em, c->CO), v);
  pack_close(em);
  (void)p;
}

void cg_render_cpu_direct(const Plan *p, const Kernel *k, const CgCpuDirect *c, const CgEmit *em) {
  if (c->channel_lanes) render_channels(p, k, c, em);
  else if (c->expand) render_expanded(p, k, c, em);
  else if (c->flat) render_flat(p, k, c, em);
  else render_rows(p, k, NULL, c, em);
}

void cg_render_cpu_pooled(const Plan *p, const Kernel *kc, const Kernel *kp, const CgCpuDirect *c, const CgEmit *em) {
  render_rows(p, kc, kp, c, em);
}

/* The row form; with pool, its epilogue the pool's (pooled_epilogue). */
static void render_rows(const Plan *p, const Kernel *k, const Kernel *pool, const CgCpuDirect *c, const CgEmit *em) {
  const Dialect *d = em->d;
  const char *I = d->index_type, *F = d->value_type[KILN_F32], *al = d->array_align ? d->array_align : "";
  int h = k->rank - 2, w = k->rank - 1, rh = k->rank + k->n_red - 2, rw = rh + 1;
  int64_t H = k->shape[h], W = k->shape[w], KH = k->red_shape[k->n_red - 2], KW = k->red_shape[k->n_red - 1];
  int L = c->lanes, OB = c->ob, RR = c->rr, WV = c->wv;
  int64_t CO = c->by_channel ? 1 : c->CO;  /* by channel: the channel is an image var */
  int64_t CB = (CO + OB - 1) / OB, HB = (H + RR - 1) / RR, NF = k->outer_numel / (CO * H * W);
  int64_t plane = c->YP * c->XPA;
  /* the sum's vars but the window's from kiln_pc */
  int csel[KILN_MAX_RANK], sw = c->col_stride;
  for (int i = 0; i < k->n_red; i++) csel[i] = i < k->n_red - 2;
  cg_put(em, "typedef %s kiln_v __attribute__((vector_size(%d), aligned(4)));", F, 4 * L);
  double work = (double)k->outer_numel * (double)k->inner_numel;
  bool parallel = work >= (double)d->min_parallel_work;
  cg_open(em, "{");
  if (!c->in_place) cg_put(em, "%s kiln_pl[%lld]%s;", F, (long long)(c->PC * plane), al);
  cg_put(em, "%s kiln_pn = -1, kiln_py0 = 0, kiln_py1 = 0;  /* the plane's image, its rows filled */", I);
  /* channel blocks fastest, then runs along the row, rows, images: a thread's share of an
   * image is a band of rows, and it fills the plane's rows that band reads */
  char head[320];
  cg_team_for(d, "kiln_t", cg_lit(em, NF * HB * c->wc * CB), parallel, head, sizeof head);
  cg_open(em, "%s", head);
  cg_put(em, "const %s kiln_o0 = kiln_t %% %s * %d;", I, cg_lit(em, CB), OB);
  cg_put(em, "const %s kiln_w0 = kiln_t / %s %% %s * %d;", I, cg_lit(em, CB), cg_lit(em, c->wc), WV * L);
  cg_put(em, "const %s kiln_h0 = kiln_t / %s %% %s * %d;", I, cg_lit(em, CB * c->wc), cg_lit(em, HB), RR);
  cg_put(em, "const %s kiln_bz = kiln_t / %s;", I, cg_lit(em, CB * c->wc * HB));
  cg_put(em, "const %s kiln_hl = kiln_h0 + %d < %s ? kiln_h0 + %d : %s;", I, RR, cg_lit(em, H), RR, cg_lit(em, H));
  cg_put(em, "const %s kiln_ya = kiln_h0 * %d, kiln_yb = (kiln_hl - 1) * %d + %s;", I, c->stride, c->stride, cg_lit(em, KH));
  image_band(k, c, em, row_fill);
  /* the sums: OB x RR x WV vectors in registers over every tap */
  cg_put(em, "kiln_v kiln_a[%d][%d][%d];", OB, RR, WV);
  cg_put(em, "%s kiln_hr[%d];  /* rows past the last repeat it: computed, not stored */", I, RR);
  cg_put(em, "for (int kiln_r = 0; kiln_r < %d; kiln_r++) kiln_hr[kiln_r] = kiln_h0 + kiln_r < %s ? kiln_h0 + kiln_r : %s;", RR,
         cg_lit(em, H), cg_lit(em, H - 1));
  sums_open(c, em, (int64_t)OB * RR * WV * L);
  em->push(em->r);
  em->digits(em->r, "kiln_pc", k->rank, k->n_red, k->red_shape, csel, 1, c->PC);
  if (c->in_place) operand_at(p, k, c, em, "kiln_w0");
  else cg_put(em, "const %s *kiln_pp = kiln_pl + kiln_pc * %s + kiln_w0;", F, cg_lit(em, plane));
  cg_open(em, "for (%s v%d = 0; v%d < %s; v%d++) {", I, rh, rh, cg_lit(em, KH), rh);
  cg_open(em, "for (%s v%d = 0; v%d < %s; v%d++) {", I, rw, rw, cg_lit(em, KW), rw);
  cg_put(em, "kiln_v kiln_x[%d][%d];", RR, WV);
  cg_put(em, "#pragma GCC unroll %d", RR);
  cg_open(em, "for (int kiln_r = 0; kiln_r < %d; kiln_r++) {", RR);
  cg_put(em, "#pragma GCC unroll %d", WV);
  cg_put(em, "for (int kiln_u = 0; kiln_u < %d; kiln_u++) kiln_x[kiln_r][kiln_u] = *(const kiln_v *)(kiln_pp + "
         "(kiln_hr[kiln_r] * %d + v%d) * %s + v%d %% %d * %s + kiln_u * %d + v%d / %d);", WV, c->stride, rh,
         cg_lit(em, c->XPA), rw, sw, cg_lit(em, c->XQ), L, rw, sw);
  cg_put(em, "for (int kiln_u = 0; kiln_u < %d; kiln_u++) K_KEEP(kiln_x[kiln_r][kiln_u]);  /* one load, not one a channel */", WV);
  cg_close(em);
  cg_put(em, "#pragma GCC unroll %d", OB);
  cg_open(em, "for (int kiln_i = 0; kiln_i < %d; kiln_i++) {", OB);
  em->push(em->r);
  tap_weight(c, em);
  cg_put(em, "#pragma GCC unroll %d", RR);
  cg_put(em, "for (int kiln_r = 0; kiln_r < %d; kiln_r++)", RR);
  cg_put(em, "  for (int kiln_u = 0; kiln_u < %d; kiln_u++) kiln_a[kiln_i][kiln_r][kiln_u] += kiln_wt * kiln_x[kiln_r][kiln_u];", WV);
  em->pop(em->r);
  cg_close(em);
  cg_close(em);
  cg_close(em);
  em->pop(em->r);
  /* the epilogue: the sums out of the registers at once (indexed by a variable they would
   * live in memory all along), then each output row of the block through the kernel's items */
  char dims[64];
  snprintf(dims, sizeof dims, "[%d][%d][%d]", OB, RR, WV * L);
  sums_close(c, em, dims, (int64_t)OB * RR * WV * L);
  if (pool) pooled_epilogue(k, pool, c, em);
  else epilogue(p, k, c, em, RR, "kiln_d[kiln_i][kiln_r][kiln_j]");
  em->pop(em->r);
  cg_close(em);
  cg_close(em);
}
