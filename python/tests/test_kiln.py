"""The Python binding (python/kiln) on the cpu backend: the shared models through
InferenceSession against their PyTorch references, numpy round trips per dtype through ONNX node
tests, options, the census and the plan, every error case, and a leak check.

Run by ctest (python/pytest) with KILN_LIB at the built libkiln.so and KILN_SHARED_DIR at
../shared."""
import gc
import os

import numpy as np
import pytest

import kiln

SHARED = os.environ.get("KILN_SHARED_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared"))
MODELS = os.path.join(SHARED, "models")
NODE = os.path.join(SHARED, "conformance", "onnx-node")


def data_set(folder):
    d = os.path.join(folder, "test_data_set_0")
    read = lambda prefix: [kiln.read_tensor(os.path.join(d, "%s_%d.pb" % (prefix, i)))
                           for i in range(64) if os.path.exists(os.path.join(d, "%s_%d.pb" % (prefix, i)))]
    return read("input"), read("output")


@pytest.mark.parametrize("name", ["mlp", "lenet", "encoder4_d256", "gpt_tiny", "convnet_mini"])
def test_shared_models_through_inference_session(name):
    folder = os.path.join(MODELS, name)
    inputs, outputs = data_set(folder)
    sess = kiln.InferenceSession(os.path.join(folder, "model.onnx"), providers=["CPUExecutionProvider"])
    feeds = {i.name: x for i, x in zip(sess.get_inputs(), inputs)}
    got = sess.run(None, feeds)
    assert len(got) == len(outputs)
    for g, want in zip(got, outputs):
        assert g.shape == want.shape and g.dtype == want.dtype
        np.testing.assert_allclose(g, want, rtol=1e-3, atol=1e-5)
    named = sess.run([sess.get_outputs()[0].name], feeds)
    assert len(named) == 1 and np.array_equal(named[0], got[0])
    assert all(isinstance(i.type, str) and i.type.startswith("tensor(") for i in sess.get_inputs())


# one node test per dtype kiln has: f32, f64, f16, bf16 (as uint16 bits), i8..i64, u8..u64, bool, strings
NODE_TESTS = ["test_abs", "test_cast_FLOAT_to_DOUBLE", "test_cast_FLOAT16_to_FLOAT", "test_cast_FLOAT_to_BFLOAT16",
              "test_cast_BFLOAT16_to_FLOAT", "test_bitwise_and_i16_3d", "test_bitwise_and_i32_2d",
              "test_bitwise_and_ui8_bcast_4v3d", "test_bitwise_and_ui64_bcast_3v1d", "test_and2d", "test_string_concat",
              "test_regex_full_match_basic", "test_strnormalizer_nostopwords_nochangecase", "test_argmax_default_axis_example"]


@pytest.mark.parametrize("name", NODE_TESTS)
def test_dtype_round_trips(name):
    folder = os.path.join(NODE, name)
    inputs, outputs = data_set(folder)
    with kiln.load(os.path.join(folder, "model.onnx")) as m:
        got = m.run(inputs)
        for info, g, want in zip(m.outputs, got, outputs):
            assert g.shape == want.shape, (info, g.shape, want.shape)
            assert g.dtype == want.dtype, (info, g.dtype, want.dtype)
            if g.dtype == object:
                assert list(g.reshape(-1)) == list(want.reshape(-1))
            elif info.dtype == "bfloat16":
                np.testing.assert_allclose(kiln.bfloat16_to_float32(g), kiln.bfloat16_to_float32(want), rtol=1e-2)
            elif g.dtype.kind == "f":
                np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-7)
            else:
                assert np.array_equal(g, want)


def mlp_path():
    return os.path.join(MODELS, "mlp", "model.onnx")


def test_call_inputs_outputs_census_plan():
    m = kiln.load(mlp_path(), backend="cpu")
    (x,), (want,) = data_set(os.path.join(MODELS, "mlp"))
    assert [(i.name, i.dtype, i.shape) for i in m.inputs] == [("input_0", "float32", (128, 784))]
    assert m.outputs[0].shape == (128, 10)
    y = m(x)
    np.testing.assert_allclose(y, want, rtol=1e-3, atol=1e-5)
    c = m.census
    assert c["runs"] == 1 and c["host_fallbacks"] == 0 and c["fallback_ops"] == ""
    assert c["kernels_planned"] >= 1 and c["compile_ms"] >= 0
    text = m.plan()
    assert text.startswith("plan: %d kernels" % c["kernels_planned"])
    dot = m.plan_dot()
    assert dot.startswith("digraph") and dot.count("subgraph cluster") == c["kernels_planned"]
    with pytest.raises(kiln.Unsupported, match="ref"):
        kiln.load(mlp_path(), backend="ref").plan_dot()
    m.close()
    m.close()  # twice is fine


def test_options_reach_the_planner():
    fused = kiln.load(mlp_path()).census["kernels_planned"]
    eager = kiln.load(mlp_path(), fuse=0).census["kernels_planned"]
    assert eager > fused
    with pytest.raises(kiln.InvalidArgument, match="no_such_option"):
        kiln.load(mlp_path(), no_such_option=1)
    with pytest.raises(kiln.InvalidArgument, match="fuse"):
        kiln.load(mlp_path(), fuse="yes")
    with pytest.raises(kiln.InvalidArgument, match="tpu"):
        kiln.load(mlp_path(), backend="tpu")


def test_errors(tmp_path):
    with pytest.raises(kiln.Error, match="nope.onnx"):
        kiln.load("/nonexistent/nope.onnx")
    m = kiln.load(mlp_path())
    x = np.zeros((128, 784), np.float32)
    with pytest.raises(kiln.InvalidArgument, match="dtype float64"):
        m.run({"input_0": x.astype(np.float64)})
    with pytest.raises(kiln.InvalidArgument, match="input 'input_0' dim 0: the model declares 128, the value has 64"):
        m.run({"input_0": x[:64]})
    with pytest.raises(kiln.InvalidArgument, match="no input named nope"):
        m.run({"nope": x})
    with pytest.raises(kiln.InvalidArgument, match="missing input input_0"):
        m.run({})
    with pytest.raises(kiln.InvalidArgument, match="2 inputs given"):
        m.run([x, x])
    with pytest.raises(kiln.InvalidArgument, match="no output named"):
        m.run({"input_0": x}, ["nope"])
    m.run({"input_0": x[:, ::1]})  # a contiguous view is fine
    m.run({"input_0": np.asfortranarray(x)})  # any layout: copied to row-major
    ro = x.copy()
    ro.setflags(write=False)
    np.testing.assert_array_equal(m.run({"input_0": ro})[0], m.run({"input_0": x})[0])  # read-only memory is fine
    m.close()
    with pytest.raises(kiln.InvalidArgument, match="closed"):
        m.run({"input_0": x})
    with pytest.raises(kiln.InvalidArgument, match="closed"):
        m.census
    bad = tmp_path / "not-a-model.onnx"
    bad.write_bytes(b"\x08\x07garbage")
    with pytest.raises(kiln.ModelError):
        kiln.load(str(bad))
    s = kiln.load(os.path.join(NODE, "test_string_concat", "model.onnx"))
    with pytest.raises(kiln.InvalidArgument, match="strings"):
        s.run([np.array([1, 2], dtype=object)] * 2)


def symbolic_batch(name, tmp_path):
    """The shared model with its batch dim made symbolic ("batch") on every input and output,
    as a dynamic-batch export has it."""
    import onnx
    m = onnx.load(os.path.join(MODELS, name, "model.onnx"))
    for v in list(m.graph.input) + list(m.graph.output):
        if v.name not in {i.name for i in m.graph.initializer}:
            v.type.tensor_type.shape.dim[0].dim_param = "batch"
    path = str(tmp_path / (name + "-batch.onnx"))
    onnx.save(m, path)
    return path


@pytest.mark.parametrize("name", ["mlp", "lenet"])
def test_symbolic_batch_compiles_once_per_shape(name, tmp_path):
    (x,), (want,) = data_set(os.path.join(MODELS, name))
    with kiln.load(symbolic_batch(name, tmp_path), capacity=2) as m:
        assert m.inputs[0].shape[0] == "batch" and m.outputs[0].shape[0] == "batch"
        assert m.census["shape_programs"] == 0  # nothing compiled before the first run
        with pytest.raises(kiln.InvalidArgument, match="not run yet"):
            m.plan()
        for batch, compiles in ((1, 1), (5, 2), (len(x), 3), (5, 3), (1, 4)):  # capacity 2: 1 was evicted
            got = m(x[:batch])
            assert got.shape == (batch,) + want.shape[1:]
            np.testing.assert_allclose(got, want[:batch], rtol=1e-3, atol=1e-5)  # rows are independent
            c = m.census
            assert (c["shape_compiles"], c["shape_programs"]) == (compiles, min(compiles, 2)), (batch, c)
            assert c["host_fallbacks"] == 0 and c["kernels_planned"] >= 1
        assert "kernel" in m.plan()
        with pytest.raises(kiln.InvalidArgument, match="dim %d: the model declares" % (x.ndim - 1)):
            m(x[:2, ..., :5])
    sess = kiln.InferenceSession(symbolic_batch(name, tmp_path), providers=["CPUExecutionProvider"])
    assert sess.get_inputs()[0].shape[0] == "batch"
    (got,) = sess.run(None, {sess.get_inputs()[0].name: x[:3]})
    np.testing.assert_allclose(got, want[:3], rtol=1e-3, atol=1e-5)


def rss_kib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def test_no_leak_over_load_run_free_cycles():
    (x,), _ = data_set(os.path.join(MODELS, "mlp"))

    def cycles(n):
        for _ in range(n):
            with kiln.load(mlp_path()) as m:
                m.run({"input_0": x})
        gc.collect()

    cycles(50)  # warm: the compile cache, allocator arenas
    before = rss_kib()
    cycles(400)
    grown = rss_kib() - before
    assert grown < 16 * 1024, "RSS grew %d KiB over 400 load/run/free cycles" % grown


def test_op_names_match_kiln_h():
    header = open(os.path.join(os.path.dirname(__file__), "..", "..", "include", "kiln.h")).read()

    def enum(name, prefix):
        body = header.split("typedef enum %s {" % name)[1].split("}")[0]
        import re
        body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
        names = [w.strip() for w in body.replace("\n", " ").split(",") if w.strip()]
        return [n[len(prefix):].lower() for n in names if not n.endswith("_COUNT")]

    assert enum("kiln_unary_op", "KILN_") == kiln.UNARY_OPS
    assert enum("kiln_binary_op", "KILN_") == kiln.BINARY_OPS
    assert enum("kiln_reduce_op", "KILN_REDUCE_") == kiln.REDUCE_OPS


def test_graph_forward_matches_numpy():
    rng = np.random.default_rng(1)
    w1, b1 = rng.standard_normal((6, 5)).astype(np.float32), rng.standard_normal(5).astype(np.float32)
    g = kiln.Graph()
    x = g.input("x", "float32", (3, 6))
    h = g.unary("tanh", g.add(g.matmul(x, g.param("w1", w1)), g.const(b1)))
    y = g.softmax(g.mul(h, 2.0), axis=-1)
    g.output(y, "y")
    g.output(g.reduce("mean", h, axes=[1], keepdims=True), "m")
    assert y.shape == (3, 5) and y.dtype == "float32"
    m = g.compile(backend="cpu")
    xs = rng.standard_normal((3, 6)).astype(np.float32)
    got_y, got_m = m.run({"x": xs})
    hh = np.tanh(xs @ w1 + b1)
    e = np.exp(2 * hh - (2 * hh).max(axis=1, keepdims=True))
    np.testing.assert_allclose(got_y, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_m, hh.mean(axis=1, keepdims=True), rtol=1e-5, atol=1e-6)
    with pytest.raises(kiln.InvalidArgument, match="no unary op"):
        g.unary("frobnicate", x)
    other = kiln.Graph()
    with pytest.raises(kiln.InvalidArgument, match="another graph"):
        other.unary("relu", x)
    with pytest.raises(kiln.InvalidArgument):  # kiln's own check: shapes that do not multiply
        g.matmul(x, x)
    g.close()
    with pytest.raises(kiln.InvalidArgument, match="closed"):
        g.unary("relu", x)


def test_every_call_returns_new_outputs():
    """The prepared call cuts small outputs from slabs: across several slabs every output is its
    own memory and keeps its own run's values; a call it does not take (strided, read-only,
    another dtype, a dict, a tuple) gives the same values through the full path."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((4, 3)).astype(np.float32)
    g = kiln.Graph()
    x = g.input("x", "float32", (2, 4))
    h = g.matmul(x, g.param("w", w))
    g.output(h, "h")
    g.output(g.reduce("sum", h, axes=[1], keepdims=False), "s")
    m = g.compile(backend="cpu")
    xs = [rng.standard_normal((2, 4)).astype(np.float32) for _ in range(3 * 64 + 5)]
    got = [m(a) for a in xs]
    assert m._fast is not None and m._fast.slab.slots > 1
    assert len({o[0].ctypes.data for o in got}) == len(xs) and len({o[1].ctypes.data for o in got}) == len(xs)
    for a, (hh, ss) in zip(xs, got):
        np.testing.assert_allclose(hh, a @ w, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(ss, (a @ w).sum(axis=1), rtol=1e-5, atol=1e-5)
        assert hh.shape == (2, 3) and ss.shape == (2,) and hh.dtype == np.float32
    a = xs[0]
    want = a @ w
    wide = np.zeros((2, 8), np.float32)
    wide[:, ::2] = a
    frozen = a.copy()
    frozen.setflags(write=False)
    class Sub(np.ndarray):
        pass

    for variant in (wide[:, ::2], frozen, a.tolist(), a.view(Sub)):
        hh, _ = m(variant)
        np.testing.assert_allclose(hh, want, rtol=1e-5, atol=1e-6)
    for variant in (a.astype(np.float64), a.astype(">f4")):
        with pytest.raises(kiln.InvalidArgument, match="dtype"):
            m(variant)
    for feeds in ({"x": a}, (a,), [a]):
        hh, ss = m.run(feeds)
        np.testing.assert_allclose(hh, want, rtol=1e-5, atol=1e-6)
    m.close()
    with pytest.raises(kiln.InvalidArgument, match="closed"):
        m(a)


def test_graph_training_with_sgd_lowers_the_loss():
    rng = np.random.default_rng(2)
    true_w = rng.standard_normal((4, 1)).astype(np.float32)
    xs = rng.standard_normal((64, 4)).astype(np.float32)
    ys = xs @ true_w
    g = kiln.Graph()
    x, t = g.input("x", "float32", (64, 4)), g.input("t", "float32", (64, 1))
    w = g.param("w", np.zeros((4, 1), np.float32))
    d = g.sub(g.matmul(x, w), t)
    loss = g.reduce("mean", g.mul(d, d))
    (w_new,) = g.sgd(loss, [w], lr=0.1)
    g.output(loss, "loss")
    m = g.compile(backend="cpu")
    losses = [float(m.run({"x": xs, "t": ys})[0]) for _ in range(60)]
    assert losses[-1] < 1e-2 * losses[0], losses[::10]
    np.testing.assert_allclose(m.read_param(w), true_w, rtol=0.05, atol=0.05)
    # one step by hand from the start: w -= lr * 2/N x^T (x w - t), w = 0
    m2 = g.compile(backend="cpu")
    m2.run({"x": xs, "t": ys})
    np.testing.assert_allclose(m2.read_param(w), -0.1 * 2 / 64 * xs.T @ (-ys), rtol=1e-5, atol=1e-6)
    with pytest.raises(kiln.InvalidArgument, match="read_param"):
        kiln.load(mlp_path()).read_param(w)


class DLPackOnly:
    """A producer that numpy cannot read except through DLPack (no __array__)."""

    def __init__(self, a):
        self._a, self.shape = a, a.shape

    def __dlpack__(self, stream=None, **kwargs):
        assert stream is None  # host memory: no stream
        return self._a.__dlpack__()

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


def test_dlpack_on_the_host():
    (x,), (want,) = data_set(os.path.join(MODELS, "mlp"))
    with kiln.load(mlp_path()) as m:
        np.testing.assert_allclose(m(DLPackOnly(x)), want, rtol=1e-3, atol=1e-5)  # a producer as an input
        y = m.run([x], device_outputs=True)[0]  # cpu: outputs are numpy arrays, DLPack producers themselves
        assert isinstance(y, np.ndarray) and y.__dlpack_device__() == (1, 0)
        with pytest.raises(kiln.InvalidArgument, match="dtype float64"):
            m(DLPackOnly(x.astype(np.float64)))
    assert isinstance(kiln.from_dlpack(DLPackOnly(x)), np.ndarray)
    # kiln's producer over host memory, read back by numpy's consumer; released when numpy is done
    src = np.arange(12, dtype=np.float32).reshape(3, 4)
    before = len(kiln._dlpack._exports)

    class Exported:
        def __dlpack__(self, stream=None):
            return kiln._dlpack.export(src.ctypes.data, 1, 0, 0, src.shape, src)

        def __dlpack_device__(self):
            return (1, 0)

    view = np.from_dlpack(Exported())
    assert np.array_equal(view, src) and view.ctypes.data == src.ctypes.data  # no copy
    assert len(kiln._dlpack._exports) == before + 1
    del view
    gc.collect()
    assert len(kiln._dlpack._exports) == before  # the consumer called the deleter
    Exported().__dlpack__()  # a capsule dropped unconsumed releases its tensor too
    gc.collect()
    assert len(kiln._dlpack._exports) == before
    # kiln's consumer: fields read from numpy's capsule; strided and typeless tensors refused
    imp = kiln._dlpack.Imported(src.__dlpack__())
    assert (imp.shape, imp.dtype, imp.address, imp.nbytes) == ((3, 4), 0, src.ctypes.data, 48)
    imp.release()
    with pytest.raises(ValueError, match="strided"):
        kiln._dlpack.Imported(src[:, ::2].__dlpack__())
    with pytest.raises(TypeError, match="no kiln type"):
        kiln._dlpack.Imported(np.zeros(2, np.complex64).__dlpack__())
    for dt in (np.float64, np.float16, np.int8, np.uint16, np.int64):  # numpy 1.24 exports no bool
        a = np.zeros(3, dt)
        assert kiln._DTYPES[kiln._dlpack.Imported(a.__dlpack__()).dtype] == np.dtype(dt).name
