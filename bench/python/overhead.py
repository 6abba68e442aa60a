"""Per-call overhead of the Python binding over the C API (issue 13: <= 20 us for the shared MLP
on cpu). In one process, interleaved in blocks: model(x) through kiln's Python package, and
kiln_program_run called straight through ctypes on the same program with prepared buffers. The
difference of the medians is what the binding adds per call (checks, array allocation,
pointer arrays). A run of the MLP varies by more than that (OpenMP), so the minimums are
printed too, and a tiny model (an ONNX node test) isolates the binding's own cost. Usage: KILN_LIB=build/libkiln.so PYTHONPATH=python python3 bench/python/overhead.py [MODEL]"""
import ctypes
import json
import os
import statistics
import sys
import time

import numpy as np

import kiln

model_path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared",
                                                               "models", "mlp", "model.onnx")
m = kiln.load(model_path, backend="cpu")
xs = [np.random.default_rng(i).standard_normal(info.shape).astype(np.float32) for i, info in enumerate(m.inputs)]
outs = [np.empty(o.shape, np.float32) for o in m.outputs]
ins_c = (ctypes.c_void_p * len(xs))(*[x.ctypes.data for x in xs])
outs_c = (ctypes.c_void_p * len(outs))(*[o.ctypes.data for o in outs])
program = m._last[1]  # the program compiled at load for these shapes


def binding():
    m(*xs)


def c_api():
    if kiln._run(program, ins_c, outs_c):
        raise kiln.Error("run")


def timed(f, n):
    t = []
    for _ in range(n):
        a = time.perf_counter_ns()
        f()
        t.append(time.perf_counter_ns() - a)
    return t


for f in (binding, c_api):  # warm
    timed(f, 20)
b, c = [], []
for _ in range(20):
    b += timed(binding, 50)
    c += timed(c_api, 50)
mb, mc = statistics.median(b) / 1e3, statistics.median(c) / 1e3
lb, lc = min(b) / 1e3, min(c) / 1e3  # the least noisy estimate when a run's own time varies (OpenMP)
assert np.allclose(m(*xs), outs[0] if len(outs) == 1 else outs, rtol=1e-5, atol=1e-6)
print(json.dumps({"model": os.path.basename(os.path.dirname(model_path)), "calls": len(b), "binding_us": round(mb, 2),
                  "c_api_us": round(mc, 2), "overhead_us": round(mb - mc, 2), "binding_min_us": round(lb, 2),
                  "c_api_min_us": round(lc, 2), "overhead_min_us": round(lb - lc, 2), "cpus": os.cpu_count()}))
