/* kiln train's pieces: the models (train_models.c), Fashion-MNIST and the loss plot
 * (train_data.c). Models use only the public API, so tests can build them too. */
#ifndef KILN_TRAIN_H
#define KILN_TRAIN_H

#include "kiln.h"

#include <stdint.h>

#define TRAIN_MAX_PARAMS 8

typedef enum { MODEL_MLP, MODEL_LENET } ModelKind;

/* A data set for a program to keep: n images of 784 pixels, already normalised as kiln train
 * normalises them, and their one-hot labels (the graph copies both). */
typedef struct TrainData {
  int64_t n;
  const float *images;           /* [n, 784] */
  const float *labels;           /* [n, 10] */
} TrainData;

typedef struct TrainNet {
  kiln_graph *g;
  kiln_tensor x, y;              /* images (f32), one-hot labels (f32): inputs, or the resident batch */
  kiln_tensor logits, loss;      /* loss: -1 for an inference net */
  int n_params;
  kiln_tensor params[TRAIN_MAX_PARAMS];
  int64_t param_numel[TRAIN_MAX_PARAMS];
  /* Resident data (train_net_build_resident), all params; -1 otherwise. Step s of an epoch
   * trains on images perm[s*B .. s*B+B) and stores its loss at losses[s]. */
  kiln_tensor images, labels;    /* [n, 784], [n, 10] */
  kiln_tensor perm;              /* i64 [n]: the epoch's order (identity until written) */
  kiln_tensor step;              /* i64 scalar: the step in the epoch; every run adds 1 */
  kiln_tensor losses;            /* f32 [steps]: the loss of each step of the epoch so far */
  kiln_tensor correct;           /* i64 scalar: right answers so far (train_net_build_eval) */
  int steps;                     /* runs in an epoch: n / B when training (the last partial
                                    batch is left out), n / B rounded up when evaluating */
} TrainNet;

/* -- train_models.c -- */

/* "mlp" (784-128-10) or "lenet" (cnn_train_b32 of bench/WORKLOADS.md); -1 if neither. */
int train_model_kind(const char *name);
/* Builds the net for batch images. init: the parameters' values in order (NULL: PyTorch-style
 * uniform(+-1/sqrt(fan_in)) from seed). with_loss: add the mean softmax cross-entropy. */
kiln_status train_net_build(ModelKind m, int batch, const float *const *init, uint64_t seed, int with_loss,
                            TrainNet *net);
/* The training net (with_loss) of train_net_build, fed from the data set d kept in the graph
 * as params instead of inputs: the graph has no inputs, each run gathers its batch on the
 * device at the resident step counter, records its loss in the resident losses and moves
 * the counter on (assigns). Write perm and reset step (kiln_program_write_param) at the start
 * of each epoch; d->n must hold at least one batch. */
kiln_status train_net_build_resident(ModelKind m, int batch, const TrainData *d, uint64_t seed, TrainNet *net);
/* The inference net of train_net_build over the resident data set d (no inputs): run i of
 * the steps after step is reset classifies images i*B .. i*B+B in order (perm stays the
 * identity; rows past d->n count for nothing) and adds how many it got right to the resident
 * correct. Its parameters are placeholders: write the trained ones before use. d->n >= 1. */
kiln_status train_net_build_eval(ModelKind m, int batch, const TrainData *d, TrainNet *net);
void train_net_free(TrainNet *net);
/* The contractions of the nets built from now on: KILN_F32 (the default), or KILN_BF16 / KILN_F16
 * copies of their operands with f32 results (kiln_graph_set_autocast; parameters, loss and
 * updates stay f32). */
void train_set_precision(kiln_dtype t);
/* on 1: the training nets built from now on average their gradients over the ranks of the
 * communicator they are compiled with (kiln_graph_set_data_parallel), and a resident net records
 * the loss's mean over the ranks; 0 (the default) off. */
void train_set_data_parallel(int on);

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
