/*
 * Fashion-MNIST for kiln train: IDX files (as shipped by Debian's dataset-fashion-mnist,
 * gzip-compressed; zlib's gzread also reads them uncompressed) into byte arrays, and the
 * loss curve as a small hand-written SVG (raw loss per step in light grey, a moving
 * average in blue, labelled axes).
 */
#include "train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <zlib.h>

static int read_exact(gzFile f, void *p, size_t n, const char *path) {
  size_t got = 0;
  while (got < n) {
    unsigned chunk = n - got > (1u << 30) ? (1u << 30) : (unsigned)(n - got);
    int r = gzread(f, (char *)p + got, chunk);
    if (r <= 0) {
      fprintf(stderr, "kiln train: %s: truncated or unreadable\n", path);
      return -1;
    }
    got += (size_t)r;
  }
  return 0;
}

static uint32_t be32(const unsigned char *b) {
  return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

/* Reads one IDX file of unsigned bytes with the expected number of dims. */
static uint8_t *idx_read(const char *path, int want_dims, uint32_t *dims) {
  gzFile f = gzopen(path, "rb");
  if (!f) {
    fprintf(stderr, "kiln train: cannot open %s\n", path);
    return NULL;
  }
  unsigned char head[4 + 4 * 3];
  uint8_t *data = NULL;
  if (read_exact(f, head, 4 + 4 * (size_t)want_dims, path)) goto out;
  if (head[0] || head[1] || head[2] != 0x08 || head[3] != want_dims) {
    fprintf(stderr, "kiln train: %s is not an IDX file of %d-dim unsigned bytes\n", path, want_dims);
    goto out;
  }
  size_t n = 1;
  for (int i = 0; i < want_dims; i++) {
    dims[i] = be32(head + 4 + 4 * i);
    if (dims[i] == 0 || dims[i] > (1u << 24) || n > SIZE_MAX / dims[i]) {
      fprintf(stderr, "kiln train: %s: implausible dim %u\n", path, dims[i]);
      goto out;
    }
    n *= dims[i];
  }
  data = malloc(n);
  if (!data) fprintf(stderr, "kiln train: out of memory reading %s\n", path);
  else if (read_exact(f, data, n, path)) free(data), data = NULL;
out:
  gzclose(f);
  return data;
}

int dataset_load(const char *images_path, const char *labels_path, Dataset *d) {
  uint32_t id[3], ld[1];
  d->images = idx_read(images_path, 3, id);
  d->labels = d->images ? idx_read(labels_path, 1, ld) : NULL;
  if (!d->labels) {
    dataset_free(d);
    return -1;
  }
  if (ld[0] != id[0]) {
    fprintf(stderr, "kiln train: %u images but %u labels\n", id[0], ld[0]);
    dataset_free(d);
    return -1;
  }
  for (uint32_t i = 0; i < ld[0]; i++)
    if (d->labels[i] > 9) {
      fprintf(stderr, "kiln train: %s: label %u of item %u is not a class 0..9\n", labels_path, d->labels[i], i);
      dataset_free(d);
      return -1;
    }
  d->n = (int)id[0], d->rows = (int)id[1], d->cols = (int)id[2];
  return 0;
}

void dataset_free(Dataset *d) {
  free(d->images);
  free(d->labels);
  d->images = d->labels = NULL;
}

/* ---- the plot ---- */

enum { W = 800, H = 420, L = 70, R = 20, T = 40, B = 50 };

static double px(int i, int n) { return L + (double)(W - L - R) * i / (n > 1 ? n - 1 : 1); }
static double py(double v, double lo, double hi) { return T + (H - T - B) * (1 - (v - lo) / (hi - lo)); }

static void polyline(FILE *f, const float *v, int n, double lo, double hi, const char *style) {
  fprintf(f, "<polyline fill=\"none\" %s points=\"", style);
  int stride = n > 4000 ? n / 4000 : 1;  /* at most ~4000 points */
  for (int i = 0; i < n; i += stride) fprintf(f, "%.1f,%.1f ", px(i, n), py(v[i], lo, hi));
  fprintf(f, "\"/>\n");
}

int plot_loss_svg(const char *path, const float *loss, int n, const char *title) {
  if (n < 1) return -1;
  float *avg = malloc(sizeof(float) * (size_t)n);
  if (!avg) return -1;
  double lo = INFINITY, hi = -INFINITY, run = 0;
  int win = n / 50 > 1 ? n / 50 : 1;
  for (int i = 0; i < n; i++) {  /* trailing moving average over win steps */
    run += loss[i];
    if (i >= win) run -= loss[i - win];
    avg[i] = (float)(run / (i + 1 < win ? i + 1 : win));
    if (isfinite(loss[i])) lo = fmin(lo, loss[i]), hi = fmax(hi, loss[i]);
  }
  if (!(lo < hi)) lo = isfinite(lo) ? lo - 1 : 0, hi = lo + 2;
  lo = fmin(lo, 0);
  FILE *f = fopen(path, "w");
  if (!f) {
    free(avg);
    return -1;
  }
  fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" "
             "font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n", W, H);
  fprintf(f, "<text x=\"%d\" y=\"24\" font-size=\"15\">%s</text>\n", L, title);
  fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", L, H - B, W - R, H - B);
  fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", L, T, L, H - B);
  for (int k = 0; k <= 4; k++) {  /* y ticks */
    double v = lo + (hi - lo) * k / 4;
    fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.3g</text>\n", L - 6, py(v, lo, hi) + 4, v);
    fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", L, py(v, lo, hi), W - R,
            py(v, lo, hi));
  }
  for (int k = 0; k <= 5; k++) {  /* x ticks */
    int i = (int)((int64_t)(n - 1) * k / 5);
    fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%d</text>\n", px(i, n), H - B + 18, i + 1);
  }
  fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">step</text>\n", (L + W - R) / 2, H - 10);
  fprintf(f, "<text x=\"16\" y=\"%d\" transform=\"rotate(-90 16 %d)\" text-anchor=\"middle\">loss</text>\n",
          (T + H - B) / 2, (T + H - B) / 2);
  polyline(f, loss, n, lo, hi, "stroke=\"#bbb\" stroke-width=\"1\"");
  polyline(f, avg, n, lo, hi, "stroke=\"#1f5fbf\" stroke-width=\"2\"");
  fprintf(f, "<text x=\"%d\" y=\"%d\" fill=\"#1f5fbf\">moving average (%d steps)</text>\n", W - R - 220, T + 14, win);
  fprintf(f, "</svg>\n");
  free(avg);
  return fclose(f) == 0 ? 0 : -1;
}
