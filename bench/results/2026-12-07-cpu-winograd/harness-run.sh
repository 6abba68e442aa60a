#!/bin/bash
# run.sh MODEL ENV... : compile model's kernel k0 with env, harness-time it
m=$1; shift
rm -rf /tmp/wh/c; mkdir -p /tmp/wh/c
env "$@" KILN_PROFILE=1 KILN_CACHE_DIR=/tmp/wh/c /work/main/build/kiln bench $m --backend cpu --threads 2 --runs 1 2>&1 | grep -oE "Winograd[^;]*|direct convolution[^;]*|max abs err [^ ]*" | tr "\n" " "
f=$(ls /tmp/wh/c/*.c | head -1)
cd /tmp/wh && gcc -O3 -march=native -fopenmp -fno-math-errno -fno-trapping-math -std=gnu11 -w h.c $f -o hx -lm && ./hx 2 | sort -n -k3 | head -1
