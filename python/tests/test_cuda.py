"""The Python binding on the cuda backend with PyTorch (tools/gpu-check's python step): the
shared models through InferenceSession against their references, and DLPack both ways with
torch CUDA tensors: inputs copied device to device, outputs viewed with no copy, nothing
through the host (the census says so), stale views refused, a model closed under a live view
kept until torch lets go. Skipped unless KILN_TEST_BACKEND=cuda; then torch must be there.
Runs under pytest or as a script (the GPU machine may lack pytest)."""
import gc
import os
import sys

import numpy as np

import kiln

ON_CUDA = os.environ.get("KILN_TEST_BACKEND") == "cuda"
SHARED = os.environ.get("KILN_SHARED_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared"))
MODELS = os.path.join(SHARED, "models")

if not ON_CUDA:
    import pytest
    pytest.skip("KILN_TEST_BACKEND is not cuda", allow_module_level=True)

import torch  # noqa: E402  (on the GPU machine it must import)


def data_set(name):
    d = os.path.join(MODELS, name, "test_data_set_0")
    read = lambda p: [kiln.read_tensor(os.path.join(d, "%s_%d.pb" % (p, i)))
                      for i in range(16) if os.path.exists(os.path.join(d, "%s_%d.pb" % (p, i)))]
    return read("input"), read("output")


def model_path(name):
    return os.path.join(MODELS, name, "model.onnx")


def test_shared_models_on_cuda():
    for name in ("mlp", "lenet", "encoder4_d256", "gpt_tiny", "convnet_mini"):
        inputs, outputs = data_set(name)
        sess = kiln.InferenceSession(model_path(name), providers=["CUDAExecutionProvider"])
        got = sess.run(None, {i.name: x for i, x in zip(sess.get_inputs(), inputs)})
        for g, want in zip(got, outputs):
            np.testing.assert_allclose(g, want, rtol=1e-3, atol=1e-5, err_msg=name)
        assert sess._model.census["host_fallbacks"] == 0, name


def test_torch_round_trip_without_the_host():
    (x,), (want,) = data_set("mlp")
    xt = torch.from_numpy(x).cuda()
    m = kiln.load(model_path("mlp"), backend="cuda")
    (y,) = m.run([xt], device_outputs=True)
    assert isinstance(y, kiln.DeviceArray) and y.device == "cuda:0" and y.shape == want.shape
    c = m.census
    assert c["h2d_bytes"] == 0 and c["d2h_bytes"] == 0, c  # in and out on the device
    yt = torch.from_dlpack(y)
    assert yt.device.type == "cuda" and yt.data_ptr() == y._buffer().address  # a view, no copy
    np.testing.assert_allclose(yt.cpu().numpy(), want, rtol=1e-3, atol=1e-5)
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-3, atol=1e-5)
    # torch's work on its own stream is ordered before kiln's copy: an input written by a kernel
    # torch has just queued is read whole
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        xt2 = torch.from_numpy(x).cuda(non_blocking=True) * 1.0
        (y2,) = m.run([xt2])
    np.testing.assert_allclose(y2, want, rtol=1e-3, atol=1e-5)
    # a DeviceArray from one program is another's input (a kiln.Graph on cuda: relu of the logits)
    g = kiln.Graph()
    logits = g.input("logits", "float32", want.shape)
    g.output(g.unary("relu", logits), "r")
    relu = g.compile(backend="cuda")
    (y,) = m.run([xt], device_outputs=True)
    (r,) = relu.run([y])
    np.testing.assert_allclose(r, np.maximum(want, 0), rtol=1e-3, atol=1e-5)
    assert relu.census["h2d_bytes"] == 0
    # kiln.from_dlpack: torch's memory as a kiln input
    d = kiln.from_dlpack(xt)
    assert isinstance(d, kiln.DeviceArray) and d.shape == x.shape
    np.testing.assert_allclose(m(d), want, rtol=1e-3, atol=1e-5)
    # refusals: a strided tensor, a wrong dtype, a cuda tensor for a cpu model
    for bad, match in ((xt.t().contiguous().t(), "strided"), (xt.double(), "dtype float64")):
        try:
            m.run([bad])
        except kiln.InvalidArgument as e:
            assert match in str(e), e
        else:
            raise AssertionError("%s: accepted" % match)
    cpu = kiln.load(model_path("mlp"), backend="cpu")
    try:
        cpu.run([xt])
    except kiln.InvalidArgument as e:
        assert "device" in str(e), e
    else:
        raise AssertionError("a cuda tensor for a cpu model: accepted")
    # a later run overwrites a view: kiln refuses the stale DeviceArray (torch's view sees the new values)
    (y,) = m.run([xt], device_outputs=True)
    m.run([xt * 0], device_outputs=True)
    try:
        y.numpy()
    except kiln.InvalidArgument as e:
        assert "overwritten" in str(e)
    else:
        raise AssertionError("a stale DeviceArray was read")
    # close() under a live torch view: the buffers stay until torch lets go
    (y,) = m.run([xt], device_outputs=True)
    yt = torch.from_dlpack(y)
    m.close()
    torch.cuda.synchronize()
    np.testing.assert_allclose(yt.cpu().numpy(), want, rtol=1e-3, atol=1e-5)
    assert m._model is not None and m._exports == 1
    del yt
    gc.collect()
    assert m._model is None and m._exports == 0


if __name__ == "__main__":
    failed = 0
    for name, f in sorted(globals().items()):
        if name.startswith("test_") and callable(f):
            try:
                f()
                print("PASS", name)
            except Exception as e:  # report every test, then fail
                failed += 1
                print("FAIL", name, repr(e))
                import traceback
                traceback.print_exc()
    print("%d failed" % failed)
    sys.exit(1 if failed else 0)
