#!/bin/bash
# usage: ab2.sh ROUNDS "WORKLOADS" ; A=/work/base B=/work/main, fused and eager medians
R=$1; W=$2
for r in $(seq 1 $R); do
  if [ $((r % 2)) = 1 ]; then order="/work/base /work/main"; else order="/work/main /work/base"; fi
  for d in $order; do
    KILN_CACHE_DIR=/tmp/ec-$(basename $d) OMP_NUM_THREADS=2 $d/build/kiln_bench --backend cpu --runs ${RUNS:-15} $W 2>/dev/null |
      sed -n 's/.*"name":"\([^"]*\)".*"mode":"\([a-z]*\)","median_ms":\([0-9.]*\).*/\1 \2 \3/p' | sed "s|^|$(basename $d) |"
  done
done > /tmp/ab2.out
python3 - <<'PY'
import statistics as st, collections
d=collections.defaultdict(list)
for l in open('/tmp/ab2.out'):
    b,w,m,t=l.split(); d[(w,m,b)].append(float(t))
keys=sorted({(w,m) for (w,m,b) in d})
for w,m in keys:
    a=st.median(d[(w,m,'base')]); b=st.median(d[(w,m,'main')])
    print(f"{w:28s} {m:6s} base {a:8.3f} new {b:8.3f} ratio {b/a:.3f}  mins {min(d[(w,m,'base')]):.3f} {min(d[(w,m,'main')]):.3f}")
PY
