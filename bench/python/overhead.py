"""Per-call overhead of the Python binding over the C API (issue 13: <= 20 us for the shared MLP
on cpu). In one process, interleaved in blocks: model(x) through kiln's Python package, and
kiln_program_run called straight through ctypes on the same program with prepared buffers. The
difference of the medians is what the binding adds per call (checks, array allocation,
pointer arrays). A run of the MLP varies by more than that (OpenMP), so the minimums are
printed too, and a tiny model (an ONNX node test) isolates the binding's own cost. Two more
variants attribute what is left: the C call with fresh output arrays each call, and the C call
after a busy wait as long as the binding's own work (a pause between runs lets OpenMP's threads
go idle, which the next run pays whoever calls it). Last, the time each call spends outside
kiln_program_run is measured inside the call (a shim times the C call), for the binding and for
the bare ctypes call; the run's variation from call to call does not blur it. OVERHEAD_EVICT=N
replaces the run, in that measurement only, by a copy of N bytes: the cold state without the run's
noise. Usage: KILN_LIB=build/libkiln.so PYTHONPATH=python python3 bench/python/overhead.py [MODEL]"""
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


def c_api_fresh_outputs():
    """The C call with new output arrays each call, as the binding makes them."""
    fresh = [np.empty(o.shape, np.float32) for o in outs]
    if kiln._run(program, ins_c, (ctypes.c_void_p * len(fresh))(*[o.ctypes.data for o in fresh])):
        raise kiln.Error("run")


def c_api_again():
    """The same call as c_api: the difference of the two medians is how far two identical
    variants drift apart here (the noise the medians' differences above carry)."""
    if kiln._run(program, ins_c, outs_c):
        raise kiln.Error("run")


GAP_NS = 8000  # about what the binding spends before it calls kiln_program_run (the test_abs row)


def c_api_after_gap():
    """The C call after a busy wait as long as the binding's own work: a pause between runs
    (OpenMP's threads going idle) shows here, not in the binding."""
    t = time.perf_counter_ns()
    while time.perf_counter_ns() - t < GAP_NS:
        pass
    if kiln._run(program, ins_c, outs_c):
        raise kiln.Error("run")


def timed(f, n):
    t = []
    for _ in range(n):
        a = time.perf_counter_ns()
        f()
        t.append(time.perf_counter_ns() - a)
    return t


variants = (binding, c_api, c_api_again, c_api_fresh_outputs, c_api_after_gap)
for f in variants:  # warm
    timed(f, 20)
times = {f.__name__: [] for f in variants}
rounds = int(os.environ.get("OVERHEAD_ROUNDS", "20"))
for _ in range(rounds):
    for f in variants:
        times[f.__name__] += timed(f, 50)
med = {k: statistics.median(v) / 1e3 for k, v in times.items()}
low = {k: min(v) / 1e3 for k, v in times.items()}  # the least noisy estimate when a run's own time varies (OpenMP)
assert np.allclose(m(*xs), outs[0] if len(outs) == 1 else outs, rtol=1e-5, atol=1e-6)
row = {"model": os.path.basename(os.path.dirname(model_path)), "calls": len(times["binding"]), "cpus": os.cpu_count(),
       "threads": os.environ.get("OMP_NUM_THREADS", "")}
for k in times:
    row[k + "_us"], row[k + "_min_us"] = round(med[k], 2), round(low[k], 2)
row["overhead_us"] = round(med["binding"] - med["c_api"], 2)
row["overhead_min_us"] = round(low["binding"] - low["c_api"], 2)
row["a_a_us"] = round(med["c_api_again"] - med["c_api"], 2)  # identical variants: the noise
row["overhead_vs_gap_us"] = round(med["binding"] - med["c_api_after_gap"], 2)  # less the pause's own effect
# In-call: the time of a call outside its kiln_program_run, measured inside each call (a shim
# times the C call), so that the run's own variation from call to call cancels out. Taken for
# model(x) and for the bare ctypes call (what calling C from Python costs at all: after a run
# the interpreter is out of cache, so the lines around the call are slow for both); the
# binding's overhead over the C API is the difference. Interleaved in blocks, like the above.
real_run, inner = kiln._run, []


def timed_run(*args):
    a = time.perf_counter_ns()
    status = real_run(*args)
    inner.append(time.perf_counter_ns() - a)
    return status


def outside(f, n):
    del inner[:]
    total = timed(f, n)
    return [o - i for o, i in zip(total, inner)]


evict = int(os.environ.get("OVERHEAD_EVICT", "0"))
if evict:  # a repeatable stand-in for the run's effect on the caches: a copy of evict bytes, no run
    libc = ctypes.CDLL(None)
    src, dst = ctypes.create_string_buffer(evict), ctypes.create_string_buffer(evict)

    def timed_run(*args):
        a = time.perf_counter_ns()
        libc.memmove(dst, src, evict)
        inner.append(time.perf_counter_ns() - a)
        return 0

    row["evict_bytes"] = evict
kiln._run = timed_run
try:
    around = {"binding": [], "c_api": []}
    for _ in range(rounds):
        around["binding"] += outside(binding, 50)
        around["c_api"] += outside(c_api, 50)
finally:
    kiln._run = real_run
for k, v in around.items():
    v.sort()
    row["in_call_%s_us" % k] = round(statistics.median(v) / 1e3, 2)
    row["in_call_%s_p90_us" % k] = round(v[len(v) * 9 // 10] / 1e3, 2)
row["in_call_overhead_us"] = round(row["in_call_binding_us"] - row["in_call_c_api_us"], 2)
print(json.dumps(row))
