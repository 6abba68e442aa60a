#!/bin/bash
# usage: ab3.sh ROUNDS "WORKLOADS" "MODEL_DIRS"; A=/work/base B=/work/main: kiln_bench fused/eager medians, kiln bench model medians
R=$1; W=$2; M=$3
for r in $(seq 1 $R); do
  if [ $((r % 2)) = 1 ]; then order="/work/base /work/main"; else order="/work/main /work/base"; fi
  for d in $order; do
    b=$(basename $d)
    [ -n "$W" ] && KILN_CACHE_DIR=/tmp/ec-$b OMP_NUM_THREADS=2 $d/build/kiln_bench --backend cpu --runs ${RUNS:-12} $W 2>/dev/null |
      sed -n 's/.*"name":"\([^"]*\)".*"mode":"\([a-z]*\)","median_ms":\([0-9.]*\).*"fallbacks":\([0-9]*\).*/\1 \2 \3 \4/p' | sed "s|^|$b |"
    for m in $M; do
      KILN_CACHE_DIR=/tmp/ec-$b OMP_NUM_THREADS=2 $d/build/kiln bench $m --backend cpu --threads 2 --runs ${MRUNS:-10} 2>/dev/null |
        sed -n 's/.*"model":"\([^"]*\)".*"median_ms":\([0-9.]*\).*"fallbacks":\([0-9]*\).*/\1 model \2 \3/p' | sed "s|^|$b |"
    done
  done
done > /tmp/ab3/ab3.out
python3 - <<'PY'
import statistics as st, collections
d=collections.defaultdict(list); fb=collections.Counter()
for l in open('/tmp/ab3/ab3.out'):
    b,w,m,t,f=l.split(); d[(w,m,b)].append(float(t)); fb[b]+=int(f)
keys=sorted({(w,m) for (w,m,b) in d})
for w,m in keys:
    a=st.median(d[(w,m,'base')]); b=st.median(d[(w,m,'main')])
    print(f"{w:28s} {m:6s} base {a:8.3f} new {b:8.3f} ratio {b/a:.3f}  mins {min(d[(w,m,'base')]):.3f} {min(d[(w,m,'main')]):.3f}")
print("host fallbacks, all runs:", dict(fb))
PY
