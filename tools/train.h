/* kiln train's pieces: the models (train_models.c), Fashion-MNIST and the loss plot
 * (train_data.c). Models use only the public API, so tests can build them too. */
#ifndef KILN_TRAIN_H
#define KILN_TRAIN_H

#include "kiln.h"

#include <stdint.h>

#define TRAIN_MAX_PARAMS 8

typedef enum { MODEL_MLP, MODEL_LENET } ModelKind;

typedef struct TrainNet {
  kiln_graph *g;
  kiln_tensor x, y;              /* inputs: images (f32), one-hot labels (f32) */
  kiln_tensor logits, loss;      /* loss: -1 for an inference net */
  int n_params;
  kiln_tensor params[TRAIN_MAX_PARAMS];
  int64_t param_numel[TRAIN_MAX_PARAMS];
} TrainNet;

/* -- train_models.c -- */

/* "mlp" (784-128-10) or "lenet" (cnn_train_b32 of bench/WORKLOADS.md); -1 if neither. */
int train_model_kind(const char *name);
/* Builds the net for batch images. init: the parameters' values in order (NULL: PyTorch-style
 * uniform(+-1/sqrt(fan_in)) from seed). with_loss: add the mean softmax cross-entropy. */
kiln_status train_net_build(ModelKind m, int batch, const float *const *init, uint64_t seed, int with_loss,
                            TrainNet *net);
void train_net_free(TrainNet *net);

/* -- train_data.c -- */

typedef struct Dataset {
  int n, rows, cols;
  uint8_t *images;               /* n * rows * cols */
  uint8_t *labels;               /* n */
} Dataset;

/* Reads IDX images and labels (gzip or plain); 0 on success, else prints why and returns -1. */
int dataset_load(const char *images_path, const char *labels_path, Dataset *d);
void dataset_free(Dataset *d);
/* Writes the loss curve (one value per step, plus an optional moving average) as an SVG file. */
int plot_loss_svg(const char *path, const float *loss, int n, const char *title);

#endif
