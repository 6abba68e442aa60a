import numpy as np, onnx, sys, os
from onnx import helper as h, TensorProto as TP, numpy_helper as nh
C, M, H = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(0)
w = (rng.standard_normal((M, C, 3, 3)) / np.sqrt(9 * C)).astype(np.float32)
b = rng.standard_normal(M).astype(np.float32) * 0.1
x = rng.standard_normal((1, C, H, H)).astype(np.float32)
def save(name, nodes, inits):
    g = h.make_graph(nodes, name, [h.make_tensor_value_info("x", TP.FLOAT, [1, C, H, H])],
                     [h.make_tensor_value_info("y", TP.FLOAT, [1, M, H, H])], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    d = f"/tmp/wg/{name}_{C}_{M}_{H}"; os.makedirs(d + "/test_data_set_0", exist_ok=True)
    onnx.save(m, d + "/model.onnx")
    open(d + "/test_data_set_0/input_0.pb", "wb").write(nh.from_array(x, "x").SerializeToString())
    xp = np.pad(x[0].astype(np.float64), ((0,0),(1,1),(1,1)))
    y = np.zeros((M, H, H))
    for i in range(3):
        for j in range(3):
            y += np.einsum("mc,chw->mhw", w[:, :, i, j], xp[:, i:i+H, j:j+H])
    y = np.maximum(y + b[:, None, None], 0)[None].astype(np.float32)
    open(d + "/test_data_set_0/output_0.pb", "wb").write(nh.from_array(y, "y").SerializeToString())
save("direct", [h.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1,1,1,1]), h.make_node("Relu", ["c"], ["y"])],
     [nh.from_array(w, "w"), nh.from_array(b, "b")])
# Winograd F(2x2, 3x3)
Bt = np.array([[1,0,-1,0],[0,1,1,0],[0,-1,1,0],[0,1,0,-1]], np.float32)
G = np.array([[1,0,0],[.5,.5,.5],[.5,-.5,.5],[0,0,1]], np.float32)
At = np.array([[1,1,1,0],[0,1,-1,-1]], np.float32)
T = (H + 1) // 2   # tiles a side
U = np.einsum("ak,mckl,bl->abmc", G, w, G).reshape(16, M, C).astype(np.float32)
# input transform as depthwise conv 4x4 stride 2: out channel c*16 + a*4+b, kernel Bt[a,i]*Bt[b,j]
k = np.einsum("ai,bj->abij", Bt, Bt).reshape(16, 1, 4, 4)
kd = np.tile(k, (C, 1, 1, 1)).astype(np.float32)
pad_hi = 2 * T + 2 - H - 1   # padded size 2T+2
Ao = np.einsum("xa,yb->xyab", At, At).reshape(4, 16).astype(np.float32)
nodes = [
  h.make_node("Conv", ["x", "kd"], ["v"], group=C, strides=[2,2], pads=[1,1,pad_hi,pad_hi]),
  h.make_node("Reshape", ["v", "s1"], ["v1"]),            # [C,16,T*T]
  h.make_node("Transpose", ["v1"], ["v2"], perm=[1,0,2]), # [16,C,TT]
  h.make_node("MatMul", ["U", "v2"], ["m"]),               # [16,M,TT]
  h.make_node("Reshape", ["m", "s2"], ["m1"]),             # [16, M*TT]
  h.make_node("MatMul", ["Ao", "m1"], ["o"]),              # [4, M*TT]
  h.make_node("Reshape", ["o", "s3"], ["o1"]),             # [2,2,M,T,T]
  h.make_node("Transpose", ["o1"], ["o2"], perm=[2,3,0,4,1]),  # [M,T,2,T,2]
  h.make_node("Reshape", ["o2", "s4"], ["o3"]),            # [1,M,2T,2T]
  h.make_node("Slice", ["o3", "st", "en", "ax"], ["o4"]),
  h.make_node("Add", ["o4", "b4"], ["o5"]),
  h.make_node("Relu", ["o5"], ["y"])]
inits = [nh.from_array(kd, "kd"), nh.from_array(U, "U"), nh.from_array(Ao, "Ao"),
  nh.from_array(np.array([C,16,T*T], np.int64), "s1"), nh.from_array(np.array([16,M*T*T], np.int64), "s2"),
  nh.from_array(np.array([2,2,M,T,T], np.int64), "s3"), nh.from_array(np.array([1,M,2*T,2*T], np.int64), "s4"),
  nh.from_array(np.array([0,0], np.int64), "st"), nh.from_array(np.array([H,H], np.int64), "en"),
  nh.from_array(np.array([2,3], np.int64), "ax"), nh.from_array(b.reshape(1,M,1,1), "b4")]
save("wino", nodes, inits)
