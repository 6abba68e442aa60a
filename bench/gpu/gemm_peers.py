#!/usr/bin/env python3
"""The library's time for wgmmalab.cu's shapes: torch.mm of bf16 [M,K] x [K,N] (cuBLAS, or
cuBLASLt, as PyTorch picks), timed as the lab times its kernels: CUDA events around batches
of 20 back-to-back products, the median over 15 batches after one warm batch. The 20 products
are one CUDA graph: launched from Python one by one they took 15-16 us on every shape (H100,
2026-12-06), the launches' time and not the products'. One JSON line a shape."""
import json

import torch

SHAPES = [("qkv", 1024, 2304, 768), ("out", 1024, 768, 768), ("ffn1", 1024, 3072, 768), ("ffn2", 1024, 768, 3072)]

for name, m, n, k in SHAPES:
    a = torch.rand(m, k, device="cuda", dtype=torch.bfloat16) * 2 - 1
    b = torch.rand(k, n, device="cuda", dtype=torch.bfloat16) * 2 - 1
    c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    torch.mm(a, b, out=c)  # the library's choice and workspace before the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(20):
            torch.mm(a, b, out=c)
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for rep in range(16):
        e0.record()
        graph.replay()
        e1.record()
        e1.synchronize()
        if rep:
            times.append(e0.elapsed_time(e1) * 1000 / 20)
    us = sorted(times)[len(times) // 2]
    print(json.dumps({"shape": name, "M": m, "N": n, "K": k, "peer": "torch.mm", "us": round(us, 2),
                      "tflops": round(2 * m * n * k / us * 1e-6)}), flush=True)
