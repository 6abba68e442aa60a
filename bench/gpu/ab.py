#!/usr/bin/env python3
"""ab.py OLD.jsonl... -- NEW.jsonl...: kiln_gpubench runs of two builds, interleaved in one
call (old, new, old, new, ...), compared per workload: the median over the runs of each
build's CUDA-event median (fused_dev_ms, eager_dev_ms), new/old, and whether any workload
is more than 5 % slower. Kernel counts must agree run to run. Rows "model:NAME" (gpu-check's
race_models: the shared models) have fused times only. Prints a markdown table."""
import json, statistics, sys

def load(paths):
    rows = {}
    for p in paths:
        for l in open(p):
            if not l.startswith("{"):
                continue
            r = json.loads(l)
            if "workload" not in r or "row_race" in r:
                continue
            rows.setdefault(r["workload"], []).append(r)
    return rows

args = sys.argv[1:]
cut = args.index("--")
old, new = load(args[:cut]), load(args[cut + 1:])
worst, lines = 0.0, []
for w in old:
    if w not in new:
        lines.append("| %s | missing in new | | | | | |" % w)
        continue
    for mode in ("fused", "eager"):
        key = mode + "_dev_ms"
        o = [r[key] for r in old[w] if r.get(key)]
        n = [r[key] for r in new[w] if r.get(key)]
        if not any(key in r for r in old[w] + new[w]):
            continue  # a mode the row has not (a model from gpu-check's race_models: fused only)
        if not o or not n:
            lines.append("| %s | %s | no time (old %d, new %d runs) | | | | |" % (w, mode, len(o), len(n)))
            continue
        mo, mn = statistics.median(o), statistics.median(n)
        ko = {r[mode + "_kernels"] for r in old[w]}
        kn = {r[mode + "_kernels"] for r in new[w]}
        ratio = mn / mo
        worst = max(worst, ratio)
        flag = " **slower**" if ratio > 1.05 else ""
        lines.append("| %s | %s | %s | %s | %.4f | %.4f | %.3f%s |" % (
            w, mode, ",".join(map(str, sorted(ko))), ",".join(map(str, sorted(kn))), mo, mn, ratio, flag))
print("| workload | mode | kernels old | kernels new | old ms | new ms | new/old |")
print("|---|---|---|---|---|---|---|")
print("\n".join(lines))
print("\nworst new/old: %.3f (%s)" % (worst, "no workload more than 5% slower" if worst <= 1.05 else "SLOWER than 5%"))
