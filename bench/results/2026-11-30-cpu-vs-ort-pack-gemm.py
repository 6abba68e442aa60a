# bench/results/2026-11-30-cpu-vs-ort-pack-gemm.py SRC_MODEL_DIR DST_DIR  (needs Debian python3-onnx)
# Rewrites every Gemm(transB=1) whose B is an initializer (directly or through Identity) into
# Gemm(transB=0) on a new initializer holding B transposed: the same function, with the weight
# stored [in, out]. Experiment for the cpu-vs-ort diagnosis; not part of kiln.
import os, sys, onnx
from onnx import numpy_helper
src, dst = sys.argv[1], sys.argv[2]
m = onnx.load(os.path.join(src, 'model.onnx'))
g = m.graph
inits = {i.name: i for i in g.initializer}
ident = {n.output[0]: n.input[0] for n in g.node if n.op_type == 'Identity'}
done = 0
for n in g.node:
    if n.op_type != 'Gemm': continue
    attrs = {a.name: a for a in n.attribute}
    if 'transB' not in attrs or attrs['transB'].i != 1: continue
    b = n.input[1]
    while b not in inits and b in ident: b = ident[b]
    if b not in inits: continue
    w = numpy_helper.to_array(inits[b])
    t = numpy_helper.from_array(w.T.copy(), name=f'packed_{done}')
    g.initializer.append(t)
    n.input[1] = t.name
    attrs['transB'].i = 0
    done += 1
os.makedirs(dst, exist_ok=True)
onnx.save(m, os.path.join(dst, 'model.onnx'))
link = os.path.join(dst, 'test_data_set_0')
if not os.path.exists(link): os.symlink(os.path.join(os.path.abspath(src), 'test_data_set_0'), link)
print(f'{src}: {done} Gemm weights stored transposed')
