#!/usr/bin/env python3
"""stamplab.py — where the time of one generated GEMM kernel goes, block by block.

Takes the CUDA source kiln generates for a workload (`kiln plan W --source cuda`), puts
per-block stamps (%globaltimer and clock64, thread 0 of each block) at the seams of one
split-K GEMM kernel, and writes a .cu file that nvcc builds into a program launching that
kernel alone on buffers of random floats:

  P0 entry   P1 k loop done   P2 partial tile stored   P3 arrival counted (every block)
  P4 partials summed (the last block of a tile)   P5 epilogue stored

The program prints the kernel's CUDA-event time (median of 200 launches, each between its
own pair of events, an empty kernel of the same grid beside it) and, built with
-DKILN_STAMPS, from one stamped
launch, each seam's median and maximum in cycles and the spread of block starts and ends
on the global timer. Not part of the build:

  KILN_BACKEND=cuda kiln plan mlp_fwd_b128 --source cuda > plan.txt
  bench/gpu/stamplab.py plan.txt kiln_k1 > lab.cu && nvcc -O3 -arch=sm_90 -DKILN_STAMPS -o lab lab.cu && ./lab
  (without -DKILN_STAMPS: the same kernel unstamped, for its time alone)
"""
import re
import sys

STAMP = 'KS(%d)'
STAMP_DEF = r'''#ifdef KILN_STAMPS
#define KS(n) { if (threadIdx.x == 0) { unsigned long long g_; asm volatile("mov.u64 %0, %globaltimer;" : "=l"(g_)); \
  kiln_ts[blockIdx.x][n] = g_; kiln_cy[blockIdx.x][n] = clock64(); } }
#else
#define KS(n)
#endif'''


def module_source(text):
    at = text.find('/* kiln_scalar_cuda_head')
    if at < 0:
        sys.exit('stamplab: no CUDA source in the input (kiln plan W --source cuda)')
    return text[at:]


def kernel_span(lines, name):
    """Line indices of the kernel's signature and of its closing brace."""
    head = next((i for i, l in enumerate(lines) if re.search(r'__global__ .*\b%s\(' % name, l)), None)
    if head is None:
        sys.exit('stamplab: no kernel %s' % name)
    end = next(i for i in range(head + 1, len(lines)) if lines[i] == '}')
    return head, end


def stamp(lines, head, end, at=None):
    out = {}  # line index -> [stamp text], inserted before that line

    def put(i, n):
        out.setdefault(i, []).append(STAMP % n)

    put(head + 1, 0)
    for n, rx in enumerate(at or []):  # P1.. before the first line matching each pattern, in order
        i = next((i for i in range(head + 1, end) if re.search(rx, lines[i])), None)
        if i is None:
            sys.exit('stamplab: no line of the kernel matches %r' % rx)
        put(i, n + 1)
    for i in range(head, end if not at else head):
        l = lines[i]
        if l.strip() == '__syncthreads();' and i + 1 < end and re.match(r'\s*float \*Ra = ', lines[i + 1]):
            put(i, 1)
        if re.match(r'\s*__threadfence\(\);', l) and i + 1 < end and lines[i + 1].strip() == '__syncthreads();':
            put(i, 2)
        if re.match(r'\s*if \(!last\) continue;', l):
            put(i, 3)
        if re.match(r'\s*if \(threadIdx\.x == 0\) kiln_arrived\d+\[tile\] = 0u;', l):
            put(i, 4)
    put(end - 1, 5)  # the last line of the body closes the block loop: stamp inside it
    res = []
    for i, l in enumerate(lines):
        res.extend(out.get(i, []))
        res.append(l)
    return res


def params(sig, name):
    args = sig[sig.index(name + '(') + len(name) + 1:sig.rindex(')')]
    names, outs = [], []
    for a in args.split(','):
        m = re.match(r'\s*(const )?float \*__restrict__ (b\d+)\s*$', a)
        if not m:
            sys.exit('stamplab: parameter %r is not a float buffer' % a)
        if not m.group(1):
            outs.append(len(names))
        names.append(m.group(2))
    return names, outs


MAIN = r'''
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cstring>
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { printf("%%s: %%s\n", #x, cudaGetErrorString(e_)); exit(1); } } while (0)
__global__ void empty_kernel() {}
static float median(std::vector<float> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; }
template <class F> static float time_us(F launch) {
  cudaEvent_t a, b; CK(cudaEventCreate(&a)); CK(cudaEventCreate(&b));
  std::vector<float> t;
  for (int r = 0; r < 200; r++) {
    CK(cudaEventRecord(a)); launch(); CK(cudaEventRecord(b)); CK(cudaEventSynchronize(b));
    float ms; CK(cudaEventElapsedTime(&ms, a, b)); t.push_back(ms * 1000.0f);
  }
  return median(t);
}
int main() {
  const int grid = %(grid)d, block = %(block)d, nbuf = %(nbuf)d;
  const size_t floats = (size_t)16 << 20;
  std::vector<float> h(floats);
  for (size_t i = 0; i < floats; i++) h[i] = (float)((i * 2654435761u) %% 1000) / 1000.0f - 0.5f;
  float *buf[8];
  for (int i = 0; i < nbuf; i++) { CK(cudaMalloc(&buf[i], floats * 4)); CK(cudaMemcpy(buf[i], h.data(), floats * 4, cudaMemcpyHostToDevice)); }
  auto run = [&] { %(kernel)s<<<grid, block>>>(%(args)s); };
  for (int r = 0; r < 20; r++) run();
  CK(cudaDeviceSynchronize());
  float t_kernel = time_us(run);
  float t_empty = time_us([&] { empty_kernel<<<grid, block>>>(); });
  static unsigned long long ts[%(grid)d][6], cy[%(grid)d][6];
  CK(cudaMemset(ts_ptr(), 0, sizeof ts)); CK(cudaMemset(cy_ptr(), 0, sizeof cy));
  run(); CK(cudaDeviceSynchronize());
  CK(cudaMemcpyFromSymbol(ts, kiln_ts, sizeof ts)); CK(cudaMemcpyFromSymbol(cy, kiln_cy, sizeof cy));
  printf("%%s: grid %%d x %%d, event median %%.2f us (empty kernel of that grid %%.2f us)\n", "%(kernel)s", grid, block, t_kernel, t_empty);
  unsigned long long g0 = ~0ull, gmax = 0;
  for (int b = 0; b < grid; b++) { g0 = std::min(g0, ts[b][0]); gmax = std::max(gmax, ts[b][5]); }
  std::vector<float> st, en;
  for (int b = 0; b < grid; b++) { st.push_back((ts[b][0] - g0) / 1000.0f); if (ts[b][5]) en.push_back((ts[b][5] - g0) / 1000.0f); }
  std::sort(st.begin(), st.end()); std::sort(en.begin(), en.end());
  printf("  block starts (us after the first): median %%.2f max %%.2f; ends: min %%.2f median %%.2f max %%.2f (%%zu blocks ran the epilogue)\n",
         st[st.size() / 2], st.back(), en.empty() ? 0 : en[0], en.empty() ? 0 : en[en.size() / 2], en.empty() ? 0 : en.back(), en.size());
  const char *seam[5] = { %(seams)s };
  for (int s = 0; s < 5; s++) {
    std::vector<float> d;
    for (int b = 0; b < grid; b++) {  // to the block's next stamp (a pattern list shorter than four skips some)
      int t = s + 1;
      while (t < 5 && !cy[b][t] && %(sparse)d) t++;
      if (cy[b][s] && cy[b][t]) d.push_back((float)(cy[b][t] - cy[b][s]));
    }
    if (d.empty()) continue;
    std::sort(d.begin(), d.end());
    printf("  %%-30s cycles: median %%8.0f max %%8.0f (%%zu blocks)\n", seam[s], d[d.size() / 2], d.back(), d.size());
  }
  { std::vector<float> d;
    for (int b = 0; b < grid; b++) if (cy[b][5]) d.push_back((float)(cy[b][5] - cy[b][0]));
    std::sort(d.begin(), d.end());
    if (!d.empty()) printf("  %%-30s cycles: median %%8.0f max %%8.0f\n", "P0->P5 whole (last blocks)", d[d.size() / 2], d.back()); }
  const int outs[] = { %(outs)s };
  for (int o : outs) {  // the outputs' bits, to compare variants of one kernel
    if (o < 0) continue;
    CK(cudaMemcpy(h.data(), buf[o], floats * 4, cudaMemcpyDeviceToHost));
    unsigned long long x = 1469598103934665603ull;
    for (size_t i = 0; i < floats; i++) { unsigned u; memcpy(&u, &h[i], 4); x = (x ^ u) * 1099511628211ull; }
    printf("  output b%%d: fnv %%016llx\n", o, x);
  }
  return 0;
}
'''


def main():
    args = sys.argv[1:]
    at = []
    while '--at' in args:  # --at REGEX (up to four): stamps P1.. before those lines instead of the split-K seams
        i = args.index('--at')
        at.append(args[i + 1])
        del args[i:i + 2]
    if len(args) != 2 or len(at) > 4:
        sys.exit('usage: stamplab.py PLAN_WITH_SOURCE KERNEL [--at REGEX]...')
    src = module_source(open(args[0]).read())
    name = args[1]
    lines = src.split('\n')
    head, end = kernel_span(lines, name)
    bufs, outs = params(lines[head], name)
    grid_m = re.search(r'for \(int64_t (?:w|tile|o) = blockIdx\.x; (?:w|tile|o) < INT64_C\((\d+)\)', '\n'.join(lines[head:end]))
    block_m = re.search(r'__launch_bounds__\((\d+)\)', lines[head])
    if not grid_m or not block_m:
        sys.exit('stamplab: %s has no block loop or launch bounds' % name)
    grid, block = int(grid_m.group(1)), int(block_m.group(1))
    stamped = stamp(lines, head, end, at)
    if at:
        marks = ['P0'] + ['/%s/' % a for a in at] + ['end']
        names = ['%s->%s' % (marks[i], marks[i + 1]) for i in range(len(marks) - 1)]
        names += [''] * (5 - len(names))
        if len(at) < 4:  # the end stamp is P5: the last named seam runs from the last pattern to it
            names[len(at)] = '%s->end' % marks[len(at)]
    else:
        names = ['P0->P1 k loop', 'P1->P2 combine+store partial', 'P2->P3 fence+arrival', 'P3->P4 sum partials',
                 'P4->P5 epilogue']
    seams = ', '.join('"%s"' % n.replace('\\', '\\\\').replace('"', "'")[:40] for n in names)
    decl = ['__device__ unsigned long long kiln_ts[%d][6], kiln_cy[%d][6];' % (grid, grid),
            'static void *ts_ptr() { void *p; cudaGetSymbolAddress(&p, kiln_ts); return p; }',
            'static void *cy_ptr() { void *p; cudaGetSymbolAddress(&p, kiln_cy); return p; }', STAMP_DEF]
    cargs = ', '.join('buf[%d]' % i for i in range(len(bufs)))
    sys.stdout.write('\n'.join(decl + stamped))
    sys.stdout.write(MAIN % dict(grid=grid, block=block, nbuf=len(bufs), kernel=name, args=cargs, seams=seams, sparse=1 if at else 0,
                                outs=', '.join(str(i) for i in outs) or '-1'))


if __name__ == '__main__':
    main()
