"""kiln for Python: load an ONNX model, run it on numpy arrays.

    import kiln
    model = kiln.load("model.onnx", backend="cpu")
    (y,) = model.run({"input": x})          # or y = model(x) with one input and one output
    print(model.census["kernels_planned"])

``kiln.InferenceSession`` takes onnxruntime's common calls (``run(output_names, feeds)``,
``get_inputs()``, ``get_outputs()``), so switching is one import.

The binding is ctypes over kiln's C API (include/kiln.h) in libkiln.so: no compiled
extension. The library is found at $KILN_LIB, beside this file, or by the system's loader.
"""
import ctypes
import ctypes.util
import os
import tempfile

import numpy as np

from . import _dlpack

__all__ = ["load", "Model", "DeviceArray", "from_dlpack", "Graph", "Tensor", "InferenceSession", "TensorInfo", "read_tensor", "bfloat16_to_float32", "Error", "InvalidArgument",
           "ModelError", "Unsupported", "OutOfMemory", "DeviceError", "CompileError", "FallbackError", "FileError"]

MAX_RANK = 8


class Error(Exception):
    """A kiln call failed; the message is kiln's (kiln_last_error)."""
    status = None


class InvalidArgument(Error, ValueError):
    status = -1


class ModelError(Error):
    status = -2


class Unsupported(Error):
    status = -3


class OutOfMemory(Error, MemoryError):
    status = -4


class DeviceError(Error):
    status = -5


class CompileError(Error):
    status = -6


class FallbackError(Error):
    status = -7


class FileError(Error, OSError):
    status = -8


_ERRORS = {c.status: c for c in (InvalidArgument, ModelError, Unsupported, OutOfMemory, DeviceError, CompileError,
                                 FallbackError, FileError)}


def _find_library():
    path = os.environ.get("KILN_LIB")
    if path:
        return path
    here = os.path.dirname(os.path.abspath(__file__))
    for name in sorted(os.listdir(here)):
        if name.startswith("libkiln.so"):
            return os.path.join(here, name)
    return ctypes.util.find_library("kiln") or "libkiln.so.0"


_lib = ctypes.CDLL(_find_library())

# kiln_dtype, in include/kiln.h's order, and the numpy type of each. numpy has no bfloat16: a
# bf16 tensor is its uint16 bit patterns (bfloat16_to_float32 widens them)
_DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "uint16",
           "uint32", "uint64", "bool", "string"]
_NUMPY = [np.float32, np.float64, np.float16, np.uint16, np.int64, np.int32, np.int16, np.int8, np.uint8, np.uint16,
          np.uint32, np.uint64, np.bool_, object]
_ORT_TYPES = ["tensor(float)", "tensor(double)", "tensor(float16)", "tensor(bfloat16)", "tensor(int64)",
              "tensor(int32)", "tensor(int16)", "tensor(int8)", "tensor(uint8)", "tensor(uint16)", "tensor(uint32)",
              "tensor(uint64)", "tensor(bool)", "tensor(string)"]
_STRING = 13


class _TensorInfo(ctypes.Structure):
    _fields_ = [("tensor", ctypes.c_int32), ("name", ctypes.c_char_p), ("dtype", ctypes.c_int), ("rank", ctypes.c_int),
                ("shape", ctypes.c_int64 * MAX_RANK), ("numel", ctypes.c_int64)]


class _Census(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int64) for n in ("runs", "kernels_launched", "phases", "submissions", "bytes_read",
                                              "bytes_written", "host_fallbacks", "largest_fallback_bytes")] + \
               [("fallback_ops", ctypes.c_char * 256)] + \
               [(n, ctypes.c_int64) for n in ("h2d_bytes", "d2h_bytes", "h2d_copies", "d2h_copies", "peak_bytes")] + \
               [("compile_ms", ctypes.c_double), ("cache_hit", ctypes.c_int), ("kernels_planned", ctypes.c_int64),
                ("device_ms", ctypes.c_double), ("shape_programs", ctypes.c_int64), ("shape_compiles", ctypes.c_int64),
                ("collectives", ctypes.c_int64), ("collective_calls", ctypes.c_int64), ("collective_bytes", ctypes.c_int64)]


class _Value(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int), ("rank", ctypes.c_int),
                ("shape", ctypes.c_int64 * MAX_RANK), ("numel", ctypes.c_int64), ("data", ctypes.c_void_p)]


class _ModelTensor(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int), ("rank", ctypes.c_int),
                ("shape", ctypes.c_int64 * MAX_RANK), ("dim_name", ctypes.c_char_p * MAX_RANK)]


class _Buffer(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int), ("address", ctypes.c_uint64),
                ("bytes", ctypes.c_int64), ("stream", ctypes.c_uint64)]


def _fn(name, restype, *argtypes):
    f = getattr(_lib, name)
    f.restype, f.argtypes = restype, list(argtypes)
    return f


_vp, _int, _i64p = ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(ctypes.c_int64)
_struct_size = _fn("kiln_struct_size", ctypes.c_size_t, ctypes.c_char_p)


def _check_layouts():
    for c_name, py in (("kiln_census", _Census), ("kiln_tensor_info", _TensorInfo), ("kiln_value", _Value),
                       ("kiln_model_tensor", _ModelTensor), ("kiln_buffer", _Buffer)):
        if _struct_size(c_name.encode()) != ctypes.sizeof(py):
            raise ImportError("kiln: this package's %s is %d bytes, the library's %d: they are from different kilns" %
                              (c_name, ctypes.sizeof(py), _struct_size(c_name.encode())))


_check_layouts()


_last_error = _fn("kiln_last_error", ctypes.c_char_p)
_graph_free = _fn("kiln_graph_free", None, _vp)
_input_count = _fn("kiln_graph_input_count", _int, _vp, ctypes.POINTER(_int))
_input_info = _fn("kiln_graph_input_info", _int, _vp, _int, ctypes.POINTER(_TensorInfo))
_output_count = _fn("kiln_graph_output_count", _int, _vp, ctypes.POINTER(_int))
_output_info = _fn("kiln_graph_output_info", _int, _vp, _int, ctypes.POINTER(_TensorInfo))
_options_init = _fn("kiln_options_init", _int, _vp)
_options_set = _fn("kiln_options_set", _int, _vp, ctypes.c_char_p, ctypes.c_char_p)
_compile = _fn("kiln_program_compile", _int, _vp, _vp, ctypes.POINTER(_vp))
_run = _fn("kiln_program_run", _int, _vp, ctypes.POINTER(_vp), ctypes.POINTER(_vp))
_census = _fn("kiln_program_census", _int, _vp, ctypes.POINTER(_Census))
_program_free = _fn("kiln_program_free", None, _vp)
_value_read_pb = _fn("kiln_value_read_pb", _int, ctypes.c_char_p, ctypes.POINTER(_Value))
_value_clear = _fn("kiln_value_clear", None, ctypes.POINTER(_Value))
_tensor_info = _fn("kiln_graph_tensor_info", _int, _vp, ctypes.c_int32, ctypes.POINTER(_TensorInfo))
_read_param = _fn("kiln_program_read_param", _int, _vp, ctypes.c_int32, _vp)
_t, _tp = ctypes.c_int32, ctypes.POINTER(ctypes.c_int32)
_graph_create = _fn("kiln_graph_create", _int, ctypes.POINTER(_vp))
_graph_input = _fn("kiln_graph_input", _int, _vp, ctypes.c_char_p, _int, _int, _i64p, _tp)
_graph_param = _fn("kiln_graph_param", _int, _vp, ctypes.c_char_p, _int, _int, _i64p, _vp, _tp)
_graph_const = _fn("kiln_graph_const", _int, _vp, _int, _int, _i64p, _vp, _tp)
_graph_scalar = _fn("kiln_graph_scalar", _int, _vp, _int, ctypes.c_double, _tp)
_graph_output = _fn("kiln_graph_output", _int, _vp, _t, ctypes.c_char_p)
_graph_unary = _fn("kiln_graph_unary", _int, _vp, _int, _t, _tp)
_graph_binary = _fn("kiln_graph_binary", _int, _vp, _int, _t, _t, _tp)
_graph_matmul = _fn("kiln_graph_matmul", _int, _vp, _t, _t, _tp)
_graph_reshape = _fn("kiln_graph_reshape", _int, _vp, _t, _int, _i64p, _tp)
_graph_transpose = _fn("kiln_graph_transpose", _int, _vp, _t, ctypes.POINTER(_int), _tp)
_graph_reduce = _fn("kiln_graph_reduce", _int, _vp, _int, _t, _int, ctypes.POINTER(_int), _int, _tp)
_graph_softmax = _fn("kiln_graph_softmax", _int, _vp, _t, _int, _tp)
_graph_log_softmax = _fn("kiln_graph_log_softmax", _int, _vp, _t, _int, _tp)
_graph_sgd = _fn("kiln_graph_sgd", _int, _vp, _t, _int, _tp, ctypes.c_double, ctypes.c_double, _tp)
_graph_adam = _fn("kiln_graph_adam", _int, _vp, _t, _int, _tp, ctypes.c_double, ctypes.c_double, ctypes.c_double,
                  ctypes.c_double, _tp)
_libc = ctypes.CDLL(ctypes.util.find_library("c"))
_libc.fopen.restype, _libc.fopen.argtypes = _vp, [ctypes.c_char_p, ctypes.c_char_p]
_libc.fclose.restype, _libc.fclose.argtypes = _int, [_vp]
_print = _fn("kiln_program_print", _int, _vp, _vp)
_model_open = _fn("kiln_model_open", _int, ctypes.c_char_p, _vp, _int, ctypes.POINTER(_vp))
_model_input_count = _fn("kiln_model_input_count", _int, _vp, ctypes.POINTER(_int))
_model_output_count = _fn("kiln_model_output_count", _int, _vp, ctypes.POINTER(_int))
_model_input_info = _fn("kiln_model_input_info", _int, _vp, _int, ctypes.POINTER(_ModelTensor))
_model_output_info = _fn("kiln_model_output_info", _int, _vp, _int, ctypes.POINTER(_ModelTensor))
_model_program = _fn("kiln_model_program", _int, _vp, _int, ctypes.POINTER(_Value), ctypes.POINTER(_vp),
                     ctypes.POINTER(_vp))
_program_device = _fn("kiln_program_device", _int, _vp, ctypes.POINTER(_Buffer))
_set_input_buffer = _fn("kiln_program_set_input_buffer", _int, _vp, _int, ctypes.POINTER(_Buffer))
_output_buffer = _fn("kiln_program_output_buffer", _int, _vp, _int, ctypes.POINTER(_Buffer))
_read_output = _fn("kiln_program_read_output", _int, _vp, _int, _vp)
_model_free = _fn("kiln_model_free", None, _vp)
_model_census = _fn("kiln_model_census", _int, _vp, ctypes.POINTER(_Census))
_print_dot = _fn("kiln_program_print_dot", _int, _vp, _vp)


def _address(a):
    """The first byte of a C-contiguous array: through the buffer protocol where it is writable
    (a third of the cost of a.ctypes.data, which the per-call overhead notices), else ctypes."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(a))
    except (TypeError, ValueError):  # read-only, or empty
        return a.ctypes.data


def _check(status, what):
    if status != 0:
        message = (_last_error() or b"").decode("utf-8", "replace")
        raise _ERRORS.get(status, Error)("%s: %s" % (what, message) if message else what)


class TensorInfo:
    """An input or output: ``name``, ``dtype`` (kiln's name: "float32", ...), ``shape`` (a tuple)
    and ``type`` (onnxruntime's spelling, "tensor(float)")."""

    def __init__(self, info):
        self.name = info.name.decode("utf-8", "replace")
        self.dtype = _DTYPES[info.dtype]
        self.shape = tuple(info.shape[i] for i in range(info.rank))
        self.type = _ORT_TYPES[info.dtype]
        self._dtype = info.dtype
        self._numel = info.numel
        self._np = _NUMPY[info.dtype] if 0 <= info.dtype < len(_NUMPY) else None

    def __repr__(self):
        return "TensorInfo(name=%r, dtype=%r, shape=%r)" % (self.name, self.dtype, self.shape)


def _numpy_type(dtype, name):
    t = _NUMPY[dtype]
    if t is None:
        raise Unsupported("%s: %s tensors have no numpy type" % (name, _DTYPES[dtype]))
    return t


def _declared(t):
    """A TensorInfo from a model's declaration: a symbolic dim is its name (None if unnamed)."""
    info = _TensorInfo()
    info.name, info.dtype, info.rank = t.name, max(t.dtype, 0), max(t.rank, 0)
    out = TensorInfo(info)
    if t.dtype < 0:
        out.dtype = out.type = None
    if t.rank < 0:
        out.shape = None
    else:
        out.shape = tuple(t.shape[i] if t.shape[i] >= 0 else
                          (t.dim_name[i].decode("utf-8", "replace") if t.dim_name[i] else None) for i in range(t.rank))
    return out


def _options(backend, options):
    opts = ctypes.create_string_buffer(_struct_size(b"kiln_options"))
    _check(_options_init(opts), "options")
    if backend is not None:
        options["backend"] = backend
    for name, value in options.items():
        if isinstance(value, bool):
            value = int(value)
        _check(_options_set(opts, name.encode(), str(value).encode()), "option %s" % name)
    return opts


class Model:
    """A compiled model. From an ONNX file it is a kiln_model: one program per set of input
    shapes, compiled on first use (a model without symbolic dims compiles at load) and kept, at
    most ``capacity`` of them (least recently used evicted; ``census["shape_programs"]``).
    Frees itself when collected, or at ``close()`` / the end of a ``with`` block; a closed model
    raises InvalidArgument."""

    def __init__(self, path, backend=None, _owner=None, capacity=8, **options):
        self._model = self._program = None
        self._owner = _owner  # a kiln.Graph compiled from: it keeps the graph, read_param reads its tensors
        self._entries = {}    # input shapes -> (their TensorInfos, the outputs' TensorInfos)
        self._last = None     # (shapes, program, inputs, outputs) of the last run
        self._runs = 0        # DeviceArrays of an earlier run know they are stale
        self._exports = 0     # DLPack views of outputs not yet released: close() waits for them
        self._closed = False
        self._fast = None     # the last program's call with everything prepared (_FastCall)
        opts = _options(backend, options)
        if _owner is None:
            m = _vp()
            _check(_model_open(os.fsencode(path), opts, int(capacity), ctypes.byref(m)), "load")
            self._model = m
            self.inputs = [_declared(t) for t in self._model_tensors(_model_input_count, _model_input_info)]
            self.outputs = [_declared(t) for t in self._model_tensors(_model_output_count, _model_output_info)]
            if all(i.shape is not None and all(isinstance(d, int) for d in i.shape) for i in self.inputs):
                key = tuple(i.shape for i in self.inputs)
                self._select(key)  # static: compiled now, and the outputs are the compiled ones
                self.outputs = list(self._last[3])
            return
        graph, program = _owner._g, _vp()
        ins, outs = _infos(graph, _input_count, _input_info), _infos(graph, _output_count, _output_info)
        _check(_compile(graph, opts, ctypes.byref(program)), "compile graph")
        self._program = program
        self.inputs, self.outputs = ins, outs
        self._last = (tuple(i.shape for i in ins), program, ins, outs)
        self._fast = _FastCall.of(self._last, [i.name for i in ins])

    def _model_tensors(self, count, info):
        n = _int()
        _check(count(self._model, ctypes.byref(n)), "model tensors")
        out = []
        for i in range(n.value):
            t = _ModelTensor()
            _check(info(self._model, i, ctypes.byref(t)), "model tensor %d" % i)
            out.append(t)
        return out

    def _live(self):
        if self._closed:
            raise InvalidArgument("the model is closed")

    def _select(self, key):
        """The program for input shapes key (a tuple of shape tuples), compiled on first use."""
        if self._model is None:  # a Graph's program has one set of shapes
            for info, shape in zip(self.inputs, key):
                if shape != info.shape:
                    raise InvalidArgument("input %s: shape %s, the model takes %s" % (info.name, shape, info.shape))
            return self._last
        n = len(self.inputs)
        values = (_Value * max(n, 1))()
        for k, (info, shape) in enumerate(zip(self.inputs, key)):
            if len(shape) > MAX_RANK:
                raise InvalidArgument("input %s: rank %d is above kiln's %d" % (info.name, len(shape), MAX_RANK))
            values[k].dtype, values[k].rank = info._dtype, len(shape)
            for d, v in enumerate(shape):
                values[k].shape[d] = v
        program, graph = _vp(), _vp()
        _check(_model_program(self._model, n, values, ctypes.byref(program), ctypes.byref(graph)),
               "input shapes %s" % (list(key),))
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = (_infos(graph, _input_count, _input_info),
                                          _infos(graph, _output_count, _output_info))
            if len(self._entries) > 64:  # infos of shapes kiln may have evicted: keep the newest
                self._entries.pop(next(iter(self._entries)))
        self._last = (key, program, entry[0], entry[1])
        self._fast = _FastCall.of(self._last, [i.name for i in self.inputs])
        return self._last

    @staticmethod
    def _input_array(info, value):
        """value as a C-contiguous array of the input's numpy type (strings: an object array), or
        as it is when it is device memory (a DeviceArray, or a DLPack producer on a device)."""
        if isinstance(value, DeviceArray):
            return value
        if not isinstance(value, np.ndarray) and hasattr(value, "__dlpack_device__"):
            if value.__dlpack_device__()[0] != _dlpack.KDL_CPU:
                return _Producer(value)
            value = np.from_dlpack(value)  # host memory: a view
        if info._dtype == _STRING:
            return np.asarray(value, dtype=object)
        t = _numpy_type(info._dtype, info.name)
        a = value if isinstance(value, np.ndarray) else np.asarray(value, dtype=t)
        if a.dtype != np.dtype(t):
            raise InvalidArgument("input %s: dtype %s, the model takes %s" % (info.name, a.dtype, info.dtype))
        return np.ascontiguousarray(a)

    @staticmethod
    def _input_pointer(a):
        if a.dtype == object:
            items = [s.encode("utf-8") if isinstance(s, str) else s for s in a.reshape(-1)]
            if not all(isinstance(s, bytes) and b"\0" not in s for s in items):
                raise InvalidArgument("strings (str or bytes without NUL) expected")
            buf = (ctypes.c_char_p * max(len(items), 1))(*items)
            return buf, ctypes.cast(buf, _vp)
        return a, _address(a)

    def _ordered(self, feeds):
        if feeds is None:
            feeds = {}
        if isinstance(feeds, dict):
            unknown = set(feeds) - {i.name for i in self.inputs}
            if unknown:
                raise InvalidArgument("no input named %s (inputs: %s)" % (
                    ", ".join(sorted(unknown)), ", ".join(i.name for i in self.inputs)))
            missing = [i.name for i in self.inputs if i.name not in feeds]
            if missing:
                raise InvalidArgument("missing input %s" % ", ".join(missing))
            return [feeds[i.name] for i in self.inputs]
        values = list(feeds)
        if len(values) != len(self.inputs):
            raise InvalidArgument("%d inputs given, the model takes %d" % (len(values), len(self.inputs)))
        return values

    def _device_input(self, program, k, info, value):
        """Input k from device memory: one device-to-device copy into the program's buffer."""
        here = _Buffer()
        _check(_program_device(program, ctypes.byref(here)), "device")
        imported = None
        if isinstance(value, _Producer):
            stream = here.stream if here.device_type != _dlpack.KDL_CPU else None
            try:
                imported = _dlpack.Imported(value.obj.__dlpack__(stream=stream))
            except (TypeError, ValueError) as e:
                raise InvalidArgument("input %s: %s" % (info.name, e)) from None
            b = _Buffer(imported.device_type, imported.device_id, imported.address, imported.nbytes, here.stream)
            dtype, shape = imported.dtype, imported.shape
        else:
            b, dtype, shape = value._buffer(), value._dtype, value.shape
        try:
            if dtype != info._dtype:
                raise InvalidArgument("input %s: dtype %s, the model takes %s" % (info.name, _DTYPES[dtype], info.dtype))
            if shape != info.shape:
                raise InvalidArgument("input %s: shape %s, the model takes %s" % (info.name, shape, info.shape))
            _check(_set_input_buffer(program, k, ctypes.byref(b)), "input %s" % info.name)
        finally:
            if imported is not None:
                imported.release()

    def run(self, feeds=None, output_names=None, device_outputs=False):
        """Runs the model. feeds: a dict of input name -> array, or a list in input order; an
        array is a numpy array (or anything numpy takes), or device memory: a DeviceArray or any
        DLPack producer (a CUDA torch tensor), copied device to device. Returns the outputs as a
        list (those named in output_names, in that order; None: every output): numpy arrays, or
        with device_outputs on a device backend, DeviceArrays viewing the program's own output
        buffers (no copy; valid until the model's next run)."""
        self._live()
        fast = self._fast
        if fast is not None and not device_outputs and output_names is None:
            results = fast.results(feeds)
            if results is not None:
                self._runs += 1
                return results
        arrays = [self._input_array(info, v) for info, v in zip(self.inputs, self._ordered(feeds))]
        key = tuple(a.shape for a in arrays)
        last = self._last if self._last is not None and self._last[0] == key else self._select(key)
        _, program, in_infos, out_infos = last
        keep, ins = [], (_vp * max(len(arrays), 1))()
        for k, (info, a) in enumerate(zip(in_infos, arrays)):
            if isinstance(a, (DeviceArray, _Producer)):
                self._device_input(program, k, info, a)
                continue  # ins[k] NULL: the resident value
            try:
                held, ins[k] = self._input_pointer(a)
            except InvalidArgument as e:
                raise InvalidArgument("input %s: %s" % (info.name, e)) from None
            keep.append(held)
        if device_outputs:
            here = _Buffer()
            _check(_program_device(program, ctypes.byref(here)), "device")
            device_outputs = here.device_type != _dlpack.KDL_CPU  # host outputs are numpy arrays, DLPack producers too
        outs_np, outs = [], (_vp * max(len(out_infos), 1))()
        for k, info in enumerate(out_infos):
            if device_outputs and info._dtype != _STRING:
                outs_np.append(None)  # left on the device
            elif info._dtype == _STRING:
                buf = (ctypes.c_char_p * max(info._numel, 1))()
                outs_np.append(buf)
                outs[k] = ctypes.cast(buf, _vp)
            else:
                a = np.empty(info.shape, info._np)
                outs_np.append(a)
                outs[k] = _address(a)
        _check(_run(program, ins, outs), "run")
        self._runs += 1
        results = []
        for k, (info, a) in enumerate(zip(out_infos, outs_np)):
            if a is None:
                a = DeviceArray(self, program, k, info)
            elif info._dtype == _STRING:  # kiln's strings are valid until the next run: copied now
                s = np.empty(info._numel, dtype=object)
                for i in range(info._numel):
                    s[i] = a[i].decode("utf-8", "replace") if a[i] is not None else ""
                a = s.reshape(info.shape)
            results.append(a)
        if output_names is None:
            return results
        names = [o.name for o in out_infos]
        for n in output_names:
            if n not in names:
                raise InvalidArgument("no output named %s (outputs: %s)" % (n, ", ".join(names)))
        return [results[names.index(n)] for n in output_names]

    def read_param(self, tensor):
        """The current value of a parameter (after the runs' updates) as a numpy array; tensor: a
        kiln.Tensor of the Graph the program was compiled from."""
        self._live()
        owner = self._owner
        if owner is None or not owner._g or tensor.graph is not owner:
            raise InvalidArgument("read_param: a tensor of the open kiln.Graph this model was compiled from")
        info = _TensorInfo()
        _check(_tensor_info(owner._g, tensor.id, ctypes.byref(info)), "param")
        a = np.empty(tuple(info.shape[i] for i in range(info.rank)), dtype=_numpy_type(info.dtype, "param"))
        _check(_read_param(self._program, tensor.id, _vp(a.ctypes.data)), "read_param")
        return a

    def __call__(self, *arrays):
        fast = self._fast
        if fast is not None:
            out = fast.call(arrays)
            if out is not None:
                self._runs += 1
                return out
        out = self.run(list(arrays))
        return out[0] if len(out) == 1 else tuple(out)

    @property
    def census(self):
        """The last run's counters (kiln_census) as a dict: kernels, bytes, fallbacks by op, and
        for an ONNX model the programs it holds (shape_programs) and its compiles (shape_compiles)."""
        self._live()
        c = _Census()
        if self._model:
            _check(_model_census(self._model, ctypes.byref(c)), "census")
        else:
            _check(_census(self._program, ctypes.byref(c)), "census")
        d = {name: getattr(c, name) for name, _ in _Census._fields_}
        d["fallback_ops"] = c.fallback_ops.decode("utf-8", "replace")
        return d

    def _printed(self, printer, what):
        self._live()
        if self._last is None:
            raise InvalidArgument("%s: the model has symbolic dims and has not run yet: nothing is compiled" % what)
        with tempfile.NamedTemporaryFile(prefix="kiln-plan-", suffix=".txt") as tmp:
            f = _libc.fopen(os.fsencode(tmp.name), b"w")
            if not f:
                raise FileError("%s: cannot open %s" % (what, tmp.name))
            try:
                _check(printer(self._last[1], f), what)
            finally:
                _libc.fclose(f)
            with open(tmp.name, encoding="utf-8", errors="replace") as text:
                return text.read()

    def plan(self):
        """The plan of the program run last (compiled at load for a model without symbolic dims):
        each kernel, its anchor, bytes and boundary reasons."""
        return self._printed(_print, "plan")

    def plan_dot(self):
        """The same plan as Graphviz text (each kernel a cluster of its stages)."""
        return self._printed(_print_dot, "plan_dot")

    def _export_done(self):
        self._exports -= 1
        if self._closed and not self._exports:
            self._free()

    def close(self):
        """Frees the programs now, or when the last DLPack view of an output is released."""
        self._closed = True
        self._fast = None  # no call runs after close, even while DLPack views keep the programs
        if not self._exports:
            self._free()

    def _free(self):
        self._fast = None
        self._last = None
        self._entries = {}
        if self._program:
            _program_free(self._program)
            self._program = None
        if self._model:
            _model_free(self._model)
            self._model = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class _FastCall:
    """The common call prepared once per program: numeric host arrays of exactly the shapes and
    dtypes the program takes, writable and C-contiguous, in a list, a tuple or a dict by name;
    every output a new numpy array. After a run that streams megabytes the interpreter's code
    and data are out of cache, so each operation around kiln_program_run costs several times
    what it costs warm (bench/python/overhead.py measures this on the shared MLP): `call` does
    as few as it can. One call asks an input for its address and layout at once
    (ctypes.c_char.from_buffer takes only a writable C-contiguous buffer), and takes its outputs,
    and their pointer array, from a slab (_Slab). Anything else returns None, and the full path
    checks and runs it."""

    @staticmethod
    def of(last, names):
        """The prepared call of program `last`, or None where the full path must take every call
        (string inputs or outputs)."""
        _, _, ins, outs = last
        if any(t._dtype == _STRING for t in ins) or any(t._dtype == _STRING for t in outs):
            return None
        return _FastCall(last, names)

    def __init__(self, last, names):
        key, self.program, ins, outs = last
        self.names, self.n = names, len(ins)
        self.slab = _Slab([(o.shape, o._np) for o in outs])
        self.call = self._prepared([i.shape for i in ins], [np.dtype(i._np) for i in ins])

    def _prepared(self, shapes, dtypes):
        """call(arrays) -> the outputs (one array, or a tuple) or None, with the names it uses
        bound in its closure (but _run, which bench/python/overhead.py wraps to time it)."""
        program, n = self.program, self.n
        from_buffer, addressof = ctypes.c_char.from_buffer, ctypes.addressof
        ins, ready, fill = (_vp * max(n, 1))(), self.slab.ready, self.slab.fill
        layouts = tuple(zip(shapes, dtypes))

        def call(arrays):
            if len(arrays) != n:
                return None
            k = 0
            for a in arrays:
                shape, dtype = layouts[k]
                try:  # numpy's own dtype object and shape, and a buffer from_buffer takes
                    if a.dtype is not dtype or a.shape != shape:
                        return None
                    ins[k] = addressof(from_buffer(a))
                except (AttributeError, TypeError, ValueError):  # not an array; read-only, strided, empty
                    return None
                k += 1
            if not ready:
                fill()
            out, outs = ready.pop()
            status = _run(program, ins, outs)
            if status:
                _check(status, "run")
            return out

        return call

    def results(self, feeds):
        """The outputs as a list, for Model.run (a dict is put in input order first), or None."""
        if type(feeds) is dict:
            if len(feeds) != self.n:
                return None
            try:
                feeds = [feeds[n] for n in self.names]
            except KeyError:
                return None
        elif type(feeds) is not list and type(feeds) is not tuple:
            return None
        out = self.call(feeds)
        if out is None:
            return None
        return list(out) if type(out) is tuple else [out]


class _Slab:
    """New output arrays for many calls from one allocation. A slot is one view of each output
    into blocks allocated together, with the pointer array kiln_program_run takes for them; a
    call pops a slot and no slot is handed out twice, so every output is a new array (one kept
    holds its block, at most SLAB_BYTES, alive). Outputs above SLOT_MAX bytes in all get a
    slot of their own each call: there the allocation is small beside the run."""

    SLAB_BYTES, SLOT_MAX, SLOTS_MAX = 262144, 32768, 64

    def __init__(self, outputs):
        self.outputs = [(tuple(shape), t) for shape, t in outputs]
        self.sizes = [int(np.prod(shape, dtype=np.int64)) * np.dtype(t).itemsize for shape, t in self.outputs]
        total = sum(self.sizes)
        self.slots = min(self.SLOTS_MAX, self.SLAB_BYTES // total) if 0 < total <= self.SLOT_MAX else 1
        self.ready = []  # (the outputs: one array or a tuple, their pointer array); the last is next

    def fill(self):
        n, blocks = self.slots, []
        for (shape, t), size in zip(self.outputs, self.sizes):
            block = np.empty((n,) + shape, t)
            blocks.append((block, _address(block), size))
        for i in reversed(range(n)):  # popped from the end: slot 0 first
            views = tuple(block[i, ...] for block, _, _ in blocks)
            pointers = (_vp * max(len(views), 1))(*[base + i * size for _, base, size in blocks])
            self.ready.append((views[0] if len(views) == 1 else views, pointers))

class _Producer:
    """A DLPack producer on a device (a CUDA torch tensor), read when its program is known."""

    def __init__(self, obj):
        self.obj = obj
        self.shape = tuple(int(d) for d in obj.shape)


class DeviceArray:
    """Device memory as kiln hands it over: a model's output left where its program keeps it
    (``model.run(..., device_outputs=True)``; valid until the model's next run, which overwrites
    it), or memory another library exported (``kiln.from_dlpack``). Both are DLPack producers
    (``torch.from_dlpack(a)`` views them with no copy) and model inputs (one device-to-device
    copy). ``numpy()`` copies an output to the host."""

    def __init__(self, model, program, index, info, imported=None):
        self._model, self._program, self._index, self._imported = model, program, index, imported
        self._generation = model._runs if model is not None else None
        if imported is not None:
            self.shape, self._dtype = imported.shape, imported.dtype
            self._device = (imported.device_type, imported.device_id)
        else:
            self.shape, self._dtype = info.shape, info._dtype
            b = self._buffer()
            self._device = (b.device_type, b.device_id)
        self.dtype = _DTYPES[self._dtype]

    def _buffer(self):
        if self._imported is not None:
            i = self._imported
            return _Buffer(i.device_type, i.device_id, i.address, i.nbytes, 1)  # made ready on the legacy stream
        m = self._model
        if m._closed or m._runs != self._generation:
            raise InvalidArgument("this output was overwritten by a later run of its model (or the model is "
                                  "closed): copy what you keep")
        b = _Buffer()
        _check(_output_buffer(self._program, self._index, ctypes.byref(b)), "output buffer")
        return b

    @property
    def device(self):
        return "%s:%d" % ({_dlpack.KDL_CPU: "cpu", _dlpack.KDL_CUDA: "cuda"}.get(self._device[0], "?"), self._device[1])

    def __dlpack_device__(self):
        return self._device

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule viewing this memory. kiln's runs are complete when run() returns,
        so any consumer stream may read it at once."""
        if copy:
            raise BufferError("kiln exports views (copy=True is not supported)")
        if dl_device is not None and tuple(dl_device) != self._device:
            raise BufferError("the memory is on %s" % self.device)
        b = self._buffer()
        owner = self._model if self._imported is None else self
        capsule = _dlpack.export(b.address, b.device_type, b.device_id, self._dtype, self.shape, owner)
        if self._imported is None:
            self._model._exports += 1
        return capsule

    def numpy(self):
        if self._imported is not None:
            raise Unsupported("memory from another library: copy it to the host with that library")
        self._buffer()  # not stale
        a = np.empty(self.shape, dtype=_numpy_type(self._dtype, "output"))
        _check(_read_output(self._program, self._index, _vp(a.ctypes.data)), "read_output")
        return a

    def __array__(self, dtype=None):
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def __repr__(self):
        return "DeviceArray(%s, %s%s)" % (self.device, self.dtype, list(self.shape))


def from_dlpack(x):
    """A DLPack producer's memory for kiln: host memory as a numpy array (a view), device
    memory as a DeviceArray (holding the producer's memory until it is collected). The
    producer is asked to have its work done on the legacy default stream."""
    device = x.__dlpack_device__()
    if device[0] == _dlpack.KDL_CPU:
        return np.from_dlpack(x)
    if device[0] != _dlpack.KDL_CUDA:
        raise Unsupported("DLPack device type %d: kiln has cpu and cuda" % device[0])
    try:
        imported = _dlpack.Imported(x.__dlpack__(stream=1))
    except (TypeError, ValueError) as e:
        raise InvalidArgument(str(e)) from None
    return DeviceArray(None, None, None, None, imported)


def _infos(graph, count, info):
    n = _int()
    _check(count(graph, ctypes.byref(n)), "tensors")
    out = []
    for i in range(n.value):
        t = _TensorInfo()
        _check(info(graph, i, ctypes.byref(t)), "tensor %d" % i)
        out.append(TensorInfo(t))
    return out


def load(path, backend=None, capacity=8, **options):
    """Loads an ONNX model and compiles it (now, or on first use per set of input shapes where
    the model leaves dims symbolic). backend: "cpu" (default), "cuda" or "ref"; capacity: how
    many programs for distinct shapes are kept; options: any kiln_options field by name
    (fuse=0, grid_sync=1, ...)."""
    return Model(path, backend, capacity=capacity, **options)


_PROVIDERS = {"CPUExecutionProvider": "cpu", "CUDAExecutionProvider": "cuda"}


class InferenceSession:
    """onnxruntime's InferenceSession over kiln: the first of providers kiln knows picks the
    backend (CUDAExecutionProvider: cuda, CPUExecutionProvider: cpu); a kiln backend name works too."""

    def __init__(self, path, sess_options=None, providers=None, **kwargs):
        backend = None
        for p in providers or []:
            name = p[0] if isinstance(p, (tuple, list)) else p
            if name in _PROVIDERS or name in ("cpu", "cuda", "ref"):
                backend = _PROVIDERS.get(name, name)
                break
        self._model = Model(path, backend)

    def get_inputs(self):
        return list(self._model.inputs)

    def get_outputs(self):
        return list(self._model.outputs)

    def run(self, output_names, input_feed, run_options=None):
        return self._model.run(input_feed, output_names)


def bfloat16_to_float32(bits):
    """bf16 bit patterns (uint16, as kiln hands bf16 tensors over) widened to float32, exactly."""
    b = np.asarray(bits, dtype=np.uint16)
    return (b.astype(np.uint32) << 16).view(np.float32)


def read_tensor(path):
    """A serialized ONNX TensorProto file (an ONNX test-data input_0.pb) as a numpy array."""
    v = _Value()
    _check(_value_read_pb(os.fsencode(path), ctypes.byref(v)), "read")  # the message starts with path
    try:
        shape = tuple(v.shape[i] for i in range(v.rank))
        if v.dtype == _STRING:
            ptrs = ctypes.cast(v.data, ctypes.POINTER(ctypes.c_char_p))
            return np.array([ptrs[i].decode("utf-8", "replace") for i in range(v.numel)], dtype=object).reshape(shape)
        t = _numpy_type(v.dtype, path)
        n = v.numel * np.dtype(t).itemsize
        raw = ctypes.string_at(v.data, n) if n else b""
        return np.frombuffer(raw, dtype=t).reshape(shape).copy()
    finally:
        _value_clear(ctypes.byref(v))


# include/kiln.h's op enums, in order (python/tests checks them against the header)
UNARY_OPS = ["neg", "abs", "exp", "log", "sqrt", "rsqrt", "reciprocal", "tanh", "sigmoid", "relu", "gelu_erf",
             "gelu_tanh", "erf", "sin", "cos", "floor", "ceil", "round", "sign", "not", "isnan", "isinf"]
BINARY_OPS = ["add", "sub", "mul", "div", "pow", "max", "min", "mod", "fmod", "eq", "ne", "lt", "le", "gt", "ge",
              "and", "or", "xor", "shl", "shr"]
REDUCE_OPS = ["sum", "mean", "max", "min", "prod", "sum_square", "l1", "l2", "log_sum_exp"]


class Tensor:
    """A tensor of a kiln.Graph: its id, and its graph."""

    def __init__(self, graph, tid):
        self.graph, self.id = graph, tid

    @property
    def shape(self):
        info = _TensorInfo()
        _check(_tensor_info(self.graph._g, self.id, ctypes.byref(info)), "tensor")
        return tuple(info.shape[i] for i in range(info.rank))

    @property
    def dtype(self):
        info = _TensorInfo()
        _check(_tensor_info(self.graph._g, self.id, ctypes.byref(info)), "tensor")
        return _DTYPES[info.dtype]

    def __repr__(self):
        return "Tensor(%d, %s%s)" % (self.id, self.dtype, list(self.shape))


def _dims(shape):
    shape = tuple(int(d) for d in shape)
    if len(shape) > MAX_RANK:
        raise InvalidArgument("rank %d is above kiln's %d" % (len(shape), MAX_RANK))
    return len(shape), (ctypes.c_int64 * max(len(shape), 1))(*shape)


def _dtype_code(dtype):
    name = np.dtype(dtype).name if not isinstance(dtype, str) or dtype not in _DTYPES else dtype
    if name == "bool":
        name = "bool"
    if name not in _DTYPES:
        raise Unsupported("dtype %s has no kiln type" % name)
    return _DTYPES.index(name)


class Graph:
    """kiln's C graph API from Python: inputs, params and constants from numpy, ops by name
    (unary/binary/reduce names as in include/kiln.h: "relu", "add", "mean"), outputs, gradients'
    training steps (sgd, adam); compile() gives a Model whose read_param reads the trained values.

        g = kiln.Graph()
        x = g.input("x", "float32", (32, 4)); w = g.param("w", np.ones((4, 2), np.float32))
        y = g.unary("relu", g.matmul(x, w)); g.output(y, "y")
        model = g.compile(backend="cpu"); (out,) = model.run({"x": xs})
    """

    def __init__(self):
        self._g = None
        g = _vp()
        _check(_graph_create(ctypes.byref(g)), "graph")
        self._g = g
        self._programs = []

    def _new(self, f, what, *args):
        if not self._g:
            raise InvalidArgument("the graph is closed")
        out = ctypes.c_int32()
        _check(f(self._g, *args, ctypes.byref(out)), what)
        return Tensor(self, out.value)

    def _tensor(self, x):
        if isinstance(x, Tensor):
            if x.graph is not self:
                raise InvalidArgument("tensor %d belongs to another graph" % x.id)
            return x.id
        if isinstance(x, (int, float)) and not isinstance(x, bool):
            return self.scalar(x).id
        raise InvalidArgument("expected a kiln.Tensor of this graph, got %r" % (x,))

    def input(self, name, dtype, shape):
        rank, dims = _dims(shape)
        return self._new(_graph_input, "input %s" % name, name.encode(), _dtype_code(dtype), rank, dims)

    def param(self, name, value):
        a = np.ascontiguousarray(value)
        rank, dims = _dims(a.shape)
        return self._new(_graph_param, "param %s" % name, name.encode(), _dtype_code(a.dtype), rank, dims,
                         _vp(a.ctypes.data))

    def const(self, value):
        a = np.ascontiguousarray(value)
        rank, dims = _dims(a.shape)
        return self._new(_graph_const, "const", _dtype_code(a.dtype), rank, dims, _vp(a.ctypes.data))

    def scalar(self, value, dtype="float32"):
        return self._new(_graph_scalar, "scalar", _dtype_code(dtype), float(value))

    def unary(self, op, x):
        if op not in UNARY_OPS:
            raise InvalidArgument("no unary op %r (ops: %s)" % (op, ", ".join(UNARY_OPS)))
        return self._new(_graph_unary, op, UNARY_OPS.index(op), self._tensor(x))

    def binary(self, op, a, b):
        if op not in BINARY_OPS:
            raise InvalidArgument("no binary op %r (ops: %s)" % (op, ", ".join(BINARY_OPS)))
        return self._new(_graph_binary, op, BINARY_OPS.index(op), self._tensor(a), self._tensor(b))

    def add(self, a, b): return self.binary("add", a, b)
    def sub(self, a, b): return self.binary("sub", a, b)
    def mul(self, a, b): return self.binary("mul", a, b)
    def div(self, a, b): return self.binary("div", a, b)

    def matmul(self, a, b):
        return self._new(_graph_matmul, "matmul", self._tensor(a), self._tensor(b))

    def reshape(self, x, shape):
        rank, dims = _dims(shape)
        return self._new(_graph_reshape, "reshape", self._tensor(x), rank, dims)

    def transpose(self, x, perm):
        p = (ctypes.c_int * max(len(perm), 1))(*perm)
        return self._new(_graph_transpose, "transpose", self._tensor(x), p)

    def reduce(self, op, x, axes=None, keepdims=False):
        if op not in REDUCE_OPS:
            raise InvalidArgument("no reduce op %r (ops: %s)" % (op, ", ".join(REDUCE_OPS)))
        axes = list(axes or [])
        a = (ctypes.c_int * max(len(axes), 1))(*axes)
        return self._new(_graph_reduce, "reduce", REDUCE_OPS.index(op), self._tensor(x), len(axes), a, int(keepdims))

    def softmax(self, x, axis=-1):
        return self._new(_graph_softmax, "softmax", self._tensor(x), axis)

    def log_softmax(self, x, axis=-1):
        return self._new(_graph_log_softmax, "log_softmax", self._tensor(x), axis)

    def output(self, x, name=None):
        if not self._g:
            raise InvalidArgument("the graph is closed")
        _check(_graph_output(self._g, self._tensor(x), name.encode() if name else None), "output")

    def _step(self, f, what, loss, params, *hyper):
        ids = (ctypes.c_int32 * max(len(params), 1))(*[self._tensor(p) for p in params])
        upd = (ctypes.c_int32 * max(len(params), 1))()
        if not self._g:
            raise InvalidArgument("the graph is closed")
        _check(f(self._g, self._tensor(loss), len(params), ids, *hyper, upd), what)
        return [Tensor(self, upd[i]) for i in range(len(params))]

    def sgd(self, loss, params, lr, momentum=0.0):
        """A training step: the gradients of loss for params and their SGD update in place (each
        run of the compiled program computes loss, gradients and update). Returns the updated
        params' tensors."""
        return self._step(_graph_sgd, "sgd", loss, params, float(lr), float(momentum))

    def adam(self, loss, params, lr, beta1=0.9, beta2=0.999, eps=1e-8):
        return self._step(_graph_adam, "adam", loss, params, float(lr), float(beta1), float(beta2), float(eps))

    def compile(self, backend=None, **options):
        """A Model running this graph as it is now (later changes need a new compile)."""
        if not self._g:
            raise InvalidArgument("the graph is closed")
        return Model(None, backend, _owner=self, **options)

    def close(self):
        if self._g:
            _graph_free(self._g)
            self._g = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
