#!/bin/bash
# prof.sh ROUNDS MODEL ENV1 ENV2 ... : per-kernel min of mins per env, alternating
R=$1; M=$2; shift 2
cd /work/main
for r in $(seq $R); do
  i=0
  for e in "$@"; do
    env $e KILN_CACHE_DIR=/tmp/cl/cache$i KILN_PROFILE=1 OMP_NUM_THREADS=2 timeout 600 ./build/kiln bench $M --backend cpu --threads 2 --runs 8 > /tmp/cl/out-$i-$r.txt 2>&1
    i=$((i+1))
  done
done
python3 - "$R" "$#" <<'PY'
import sys,re,glob
R=int(sys.argv[1]); n=int(sys.argv[2])
mins=[{} for _ in range(n)]; desc=[{} for _ in range(n)]; tot=[[] for _ in range(n)]
for i in range(n):
  for r in range(1,R+1):
    for line in open(f'/tmp/cl/out-{i}-{r}.txt'):
      m=re.match(r'\s+(k\d+)\s+([\d.]+) us median\s+([\d.]+) us min\s+(.*)',line)
      if m:
        k=m.group(1); v=float(m.group(3)); mins[i][k]=min(mins[i].get(k,1e18),v); desc[i][k]=m.group(4)[-90:]
      m=re.match(r'median ([\d.]+) ms, min ([\d.]+)',line)
      if m: tot[i].append(float(m.group(1)))
ks=sorted(mins[0],key=lambda s:int(s[1:]))
for k in ks:
  print(k, ' '.join('%8.0f'%mins[i].get(k,0) for i in range(n)), ' %.2f'%(mins[1].get(k,0)/mins[0][k]) if n>1 else '', desc[1].get(k,'')[-60:] if n>1 else '')
print('sum of mins', ' '.join('%8.0f'%sum(mins[i].values()) for i in range(n)))
print('model medians', [sorted(t) for t in tot])
PY
