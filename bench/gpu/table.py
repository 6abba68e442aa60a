"""One table from one GPU run: peers.py's JSON (PyTorch eager, torch.compile, JAX) beside
kiln_gpubench's JSON lines, with the floor from the ceilings peers.py measured in the same run.

usage: python3 table.py PEERS.log KILN.jsonl [CSE.jsonl] [--meta 'date commit device'] > table.md

PEERS.log is peers.py's stdout (one JSON line of ceilings per invocation, then one per
workload), so a run cut short still gives the rows it finished; with several invocations
the ceilings of the first are used.

Columns: workload, floor (ms), best peer (ms, which), kiln fused, kiln eager, kernels fused/eager,
best peer / kiln fused (above 1: kiln is faster), floor / kiln fused (share of the floor reached).
kiln's times are CUDA-event medians (gpubench's *_dev_ms: an event before and after the
schedule, as peers.py brackets each call) when present; the wall-clock median of one run
(launch and wait included) is shown beside them.
A kiln time is printed only when gpubench printed one: a run that moved data to the host or fell
back has no time, and its census is shown instead.
"""
import json
import sys


def load_lines(path):
    out = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
    return out


def kt(k, key):
    """kiln's time for key ("fused", "eager"): the event median, else the wall median."""
    return k.get(key + "_dev_ms") or k.get(key + "_ms")


def fmt(v, d=4):
    return "-" if v is None else ("%.*f" % (d, v))


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    meta = ""
    if "--meta" in sys.argv:
        meta = sys.argv[sys.argv.index("--meta") + 1]
        args = [a for a in args if a != meta]
    plines = load_lines(args[0])
    infos = [r for r in plines if "copy_bw_GBs" in r]
    if not infos:
        sys.exit("table.py: no ceilings line in %s" % args[0])
    peers = {"info": infos[0], "rows": [r for r in plines if "workload" in r]}
    kiln = {r["workload"]: r for r in load_lines(args[1]) if "workload" in r}
    race = load_lines(args[2]) if len(args) > 2 else []
    info = peers["info"]
    bw = info["copy_bw_GBs"] * 1e9
    peak = info["gemm_f32_TFLOPs"] * 1e12
    print("# kiln cuda vs peers %s\n" % meta)
    print("Ceilings measured in this run by peers.py: copy %.0f GB/s, f32 GEMM %.1f TFLOP/s (%s, torch %s, jax %s).\n"
          % (bw / 1e9, peak / 1e12, info.get("gpu"), info.get("torch"), info.get("jax", "-")))
    print("| workload | floor ms | best peer ms | peer | kiln fused ms | kiln eager ms | kiln fused wall ms | kernels f/e | peer/kiln | floor/kiln | err |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    names = [r["workload"] for r in peers["rows"]] + [n for n in kiln if n not in {r["workload"] for r in peers["rows"]}]
    prow = {r["workload"]: r for r in peers["rows"]}
    gaps = []
    for name in names:
        p = prow.get(name, {})
        k = kiln.get(name, {})
        mb = k.get("min_bytes", p.get("min_bytes"))
        fl = k.get("flops", p.get("flops"))
        floor = max(mb / bw, fl / peak) * 1e3 if mb is not None else None
        best, who = None, "-"
        for key in ("eager", "inductor", "inductor_cg", "jax"):
            v = p.get(key + "_ms")
            if v is not None and v == v and (best is None or v < best):
                best, who = v, key
        fused, eager = kt(k, "fused"), kt(k, "eager")
        kern = "%s/%s" % (k.get("fused_kernels", "-"), k.get("eager_kernels", "-"))
        ratio = best / fused if best and fused else None
        share = floor / fused if floor and fused else None
        err = k.get("rel_err")
        errs = "-" if err is None else "%.1e (%s)" % (err, k.get("err_vs", ""))
        if k.get("f32_rel_err") is not None:
            errs += "; %.1e against f32" % k["f32_rel_err"]
        if fused is None:
            why = k.get("fused_error") or json.dumps(k.get("fused_census")) if k else "not run"
            errs = "no time: %s" % str(why)[:160]
        print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            name, fmt(floor), fmt(best), who, fmt(fused), fmt(eager), fmt(k.get("fused_ms")), kern,
            "-" if ratio is None else "%.2fx" % ratio, "-" if share is None else "%.0f%%" % (100 * share), errs))
        if share is not None:
            gaps.append((share, name))
    gaps.sort()
    if gaps:
        print("\nFurthest from the floor: " + ", ".join("%s (%.0f%%)" % (n, 100 * s) for s, n in gaps[:3]))
    if race:
        print("\n## CSE race: softmax, default (recompute) vs KILN_CSE=1 (materialise exp)\n")
        print("| shape | off ms | on ms | on/off | kernels off/on |")
        print("|---|---|---|---|---|")
        for r in race:
            print("| %s | %s | %s | %s | %s/%s |" % (r["cse_race"], fmt(kt(r, "off")), fmt(kt(r, "on")),
                  fmt(r.get("on_over_off"), 3), r.get("off_kernels", "-"), r.get("on_kernels", "-")))
    # Acceptance lines of issue 5 that this table can decide.
    print("\n## Acceptance checks\n")
    c = kiln.get("chain10_16M", {})
    if kt(c, "fused"):
        print("- chain10_16M: %.0f%% of copy bandwidth (target 85%%); fused/eager speed-up %.2fx (target 3x)" % (
            100 * c["min_bytes"] / (kt(c, "fused") * 1e-3) / bw, (kt(c, "eager") or 0) / kt(c, "fused")))
    for name, k in kiln.items():
        if (name.startswith("softmax") or name.startswith("layernorm")) and kt(k, "fused") and k["min_bytes"] >= 64e6:
            print("- %s (%.0f MB): %.0f%% of copy bandwidth (target 75%%)" % (
                name, k["min_bytes"] / 1e6, 100 * k["min_bytes"] / (kt(k, "fused") * 1e-3) / bw))
    for name in ("mlp_train_b32", "mlp_fwd_b128"):
        k, p = kiln.get(name, {}), prow.get(name, {})
        best = min([p[x] for x in ("eager_ms", "inductor_ms", "inductor_cg_ms", "jax_ms") if p.get(x) == p.get(x) and p.get(x)] or [None]) if p else None
        if kt(k, "fused") and best:
            print("- %s: best peer %.4f ms / kiln %.4f ms = %.2fx (target > 1x, goal 4x)" % (name, best, kt(k, "fused"), best / kt(k, "fused")))
    fb = [n for n, k in kiln.items() if k.get("fallbacks")]
    print("- fallbacks: %s" % ("0 on every workload run" if not fb else "NONZERO on " + ", ".join(fb)))


if __name__ == "__main__":
    main()
