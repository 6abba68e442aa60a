/*
 * workloads.h — the workloads of ../shared/bench/WORKLOADS.md, built through the
 * public C API, shared by the benchmark (bench/bench.c), `kiln plan` and the tests.
 * A name picks the workload and its shape: chain10_<N>[K|M], softmax_<R>x<C>,
 * logsoftmax_<R>x<C>, layernorm_<R>x<C>, linear_relu_<M>x<K>x<N>, siblings_<M>x<K>x<N>, mlp_fwd_b<B>,
 * mlp_train_b<B>, cnn_train_b<B>, bert_layer_b<B>s<S>; a suffix _bf16 (_f16) makes every tensor bf16 (f16),
 * _bf16amp every contraction bf16 with f32 results (kiln_graph_set_autocast). Inputs are filled with
 * deterministic standard-normal data.
 */
#ifndef KILN_WORKLOADS_H
#define KILN_WORKLOADS_H

#include "kiln.h"

typedef struct Workload {
  char name[64];
  kiln_graph *g;
  int n_inputs, n_outputs;
  void *inputs[8];
  size_t input_bytes[8];
  size_t output_bytes[16];
  kiln_dtype output_dtype[16];
  double flops;              /* multiply-adds x 2 of the contractions */
} Workload;

/* Builds workload name; on failure returns the status with kiln_last_error set. */
kiln_status wl_build(const char *name, Workload *w);
void wl_free(Workload *w);
/* Element i of an output of dtype t (f32, bf16 or f16) as a float; NAN for any other dtype. */
float wl_output_value(kiln_dtype t, const void *out, size_t i);
/* The names of WORKLOADS.md (the benchmark's list). */
extern const char *const wl_standard[];
extern const int wl_n_standard;

#endif
