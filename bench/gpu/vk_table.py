"""The vulkan backend's H200 run as tables: kiln_gpubench --backend vulkan (fused and eager),
its CSE race, kiln bench of the shared models on vulkan and cuda (device-resident), beside the
peers measured in the same call (peers.py for the workloads, model_peers.py for the models).

usage: python3 vk_table.py VK.jsonl PEERS.log [--meta 'date commit device'] > table.md

VK.jsonl holds gpubench's lines, its cse_race lines and `kiln bench --resident`'s json lines
(`model`, `backend`); PEERS.log peers.py's and model_peers.py's stdout. Times are device
medians (timestamps on vulkan, CUDA events on cuda and for the peers); "% copy" is the
workload's minimum bytes over the copy bandwidth peers.py measured, over kiln's time.
"""
import os
import sys

from table import load_lines  # the same JSON-lines reading as the cuda table


def load(path):
    return load_lines(path) if os.path.exists(path) else []


def f4(v):
    return "-" if v is None else "%.4f" % v


def best(row, keys=("eager", "inductor", "inductor_cg", "jax")):
    got = [(row[k + "_ms"], k) for k in keys if row.get(k + "_ms")]
    return min(got) if got else (None, "-")


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    meta = sys.argv[sys.argv.index("--meta") + 1] if "--meta" in sys.argv else ""
    args = [a for a in args if a != meta]
    vk, peers = load(args[0]), load(args[1]) if len(args) > 1 else []
    info = next((r for r in peers if "copy_bw_GBs" in r), {})
    bw = info.get("copy_bw_GBs")
    prow = {r["workload"]: r for r in peers if "workload" in r}
    print("# kiln vulkan on the H200 %s\n" % meta)
    print("Copy bandwidth (peers.py, same call): %s\n" % ("%.0f GB/s" % bw if bw else "not measured"))
    print("| workload | fused ms | eager ms | eager / fused | kernels fused/eager | % copy | best peer ms | peer / kiln |")
    print("|---|---|---|---|---|---|---|---|")
    for r in vk:
        if "workload" not in r:
            continue
        fu, ea = r.get("fused_dev_ms") or r.get("fused_ms"), r.get("eager_dev_ms") or r.get("eager_ms")
        pc = "%.0f%%" % (100 * r["min_bytes"] / (bw * 1e9) / (fu * 1e-3)) if bw and fu else "-"
        pm, pk = best(prow.get(r["workload"], {}))
        print("| %s | %s | %s | %s | %s/%s | %s | %s | %s |" % (
            r["workload"], f4(fu), f4(ea), "%.2f" % (ea / fu) if fu and ea else "-", r.get("fused_kernels", "-"),
            r.get("eager_kernels", "-"), pc, "-" if pm is None else "%s (%s)" % (f4(pm), pk),
            "%.2f" % (pm / fu) if pm and fu else "-"))
    models = {}
    for r in vk:
        if "model" in r and "backend" in r:
            models.setdefault(r["model"], {})[r["backend"]] = r
    mpeers = {r["model"]: r for r in peers if "model" in r and "backend" not in r}
    if models:
        print("\n## Shared models, device-resident (kiln bench --resident)\n")
        print("| model | vulkan ms | kernels | cuda ms | kernels | best peer ms | peer / vulkan | fallbacks |")
        print("|---|---|---|---|---|---|---|---|")
        for m, b in models.items():
            v, c = b.get("vulkan", {}), b.get("cuda", {})
            vt = v.get("device_ms") or v.get("median_ms")
            ct = c.get("device_ms") or c.get("median_ms")
            pm, pk = best(mpeers.get(m, {}))
            print("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
                m, f4(vt), v.get("kernels", "-"), f4(ct), c.get("kernels", "-"),
                "-" if pm is None else "%s (%s)" % (f4(pm), pk), "%.2f" % (pm / vt) if pm and vt else "-",
                v.get("fallbacks", "-")))
    race = [r for r in vk if "cse_race" in r]
    if race:
        print("\n## CSE race on vulkan: softmax, recompute exp (default, off) vs materialise it (KILN_CSE=1, on)\n")
        print("| shape | off ms | on ms | on / off |")
        print("|---|---|---|---|")
        for r in race:
            print("| %s | %s | %s | %s |" % (r["cse_race"], f4(r.get("off_dev_ms") or r.get("off_ms")),
                                            f4(r.get("on_dev_ms") or r.get("on_ms")), r.get("on_over_off", "-")))


if __name__ == "__main__":
    main()
