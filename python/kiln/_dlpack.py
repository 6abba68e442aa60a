"""DLPack in ctypes: the legacy (unversioned) DLManagedTensor that every framework reads,
produced from memory kiln keeps and consumed from any object with ``__dlpack__``.

A capsule named "dltensor" holds a DLManagedTensor; a consumer renames it "used_dltensor"
and calls the tensor's deleter when done with the memory. A capsule that dies unconsumed
calls the deleter itself (its destructor, below)."""
import ctypes
import itertools

KDL_CPU, KDL_CUDA = 1, 2


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


# kiln_dtype (include/kiln.h's order) -> DLPack (code, bits): int 0, uint 1, float 2, bfloat 4, bool 6
DTYPES = [(2, 32), (2, 64), (2, 16), (4, 16), (0, 64), (0, 32), (0, 16), (0, 8), (1, 8), (1, 16), (1, 32), (1, 64),
          (6, 8), None]

_NAME, _USED = b"dltensor", b"used_dltensor"
_api = ctypes.pythonapi
_api.PyCapsule_New.restype, _api.PyCapsule_New.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p,
                                                                              ctypes.c_void_p]
_api.PyCapsule_IsValid.restype, _api.PyCapsule_IsValid.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype, _api.PyCapsule_GetPointer.argtypes = ctypes.c_void_p, [ctypes.py_object,
                                                                                          ctypes.c_char_p]
_api.PyCapsule_SetName.restype, _api.PyCapsule_SetName.argtypes = ctypes.c_int, [ctypes.py_object, ctypes.c_char_p]
_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
# the same call on a raw pointer, for the destructor of a capsule being freed (a py_object
# argument would take a reference to it)
_pointer_of_dying = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))

# what keeps an exported tensor's memory alive, by manager_ctx: (the struct, its shape, owner)
_exports = {}
_keys = itertools.count(1)


def _release(address):
    managed = DLManagedTensor.from_address(address)
    entry = _exports.pop(managed.manager_ctx, None)
    if entry is not None and hasattr(entry[2], "_export_done"):
        entry[2]._export_done()


_deleter = _DELETER(_release)
_deleter_address = ctypes.cast(_deleter, ctypes.c_void_p).value


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _capsule_destructor(capsule):
    # a capsule still named "dltensor" was never consumed: the memory is released here
    if _api.PyCapsule_IsValid(capsule, _NAME):
        _release(_pointer_of_dying(capsule, _NAME))


def export(address, device_type, device_id, dtype, shape, owner):
    """A "dltensor" capsule over bytes at address (row-major, dtype a kiln_dtype) that keeps
    owner alive (and calls owner._export_done(), if it has one, when the consumer is done)."""
    code_bits = DTYPES[dtype]
    if code_bits is None:
        raise TypeError("strings have no DLPack type")
    managed = DLManagedTensor()
    dims = (ctypes.c_int64 * max(len(shape), 1))(*shape)
    t = managed.dl_tensor
    t.data, t.device, t.ndim = address, DLDevice(device_type, device_id), len(shape)
    t.dtype = DLDataType(code_bits[0], code_bits[1], 1)
    t.shape, t.strides, t.byte_offset = dims, None, 0  # strides NULL: compact row-major
    key = next(_keys)
    managed.manager_ctx, managed.deleter = key, _deleter_address
    _exports[key] = (managed, dims, owner)
    return _api.PyCapsule_New(ctypes.addressof(managed), _NAME, ctypes.cast(_capsule_destructor, ctypes.c_void_p))


class Imported:
    """A consumed capsule: the producer's memory (address, device, kiln dtype, shape), held
    until release() (or collection) calls the producer's deleter."""

    def __init__(self, capsule):
        self._capsule = capsule
        self._address = _api.PyCapsule_GetPointer(capsule, _NAME)  # raises ValueError on another name
        managed = DLManagedTensor.from_address(self._address)
        t = managed.dl_tensor
        self.device_type, self.device_id = t.device.device_type, t.device.device_id
        self.shape = tuple(t.shape[i] for i in range(t.ndim))
        code = (t.dtype.code, t.dtype.bits)
        if t.dtype.lanes != 1 or code not in DTYPES:
            raise TypeError("DLPack type code %d, %d bits, %d lanes has no kiln type" % (code + (t.dtype.lanes,)))
        self.dtype = DTYPES.index(code)
        self.itemsize = t.dtype.bits // 8
        if t.strides:  # compact row-major only (a dim of 1 may have any stride)
            want = self.itemsize
            for i in reversed(range(t.ndim)):
                if self.shape[i] != 1 and t.strides[i] * self.itemsize != want:
                    raise ValueError("a strided tensor (strides %s): make it contiguous first" %
                                     (tuple(t.strides[k] for k in range(t.ndim)),))
                want *= self.shape[i]
        self.address = (t.data or 0) + t.byte_offset
        self.nbytes = self.itemsize
        for d in self.shape:
            self.nbytes *= d
        _api.PyCapsule_SetName(capsule, _USED)  # ours now: its destructor leaves the memory to us
        self._deleter = managed.deleter

    def release(self):
        if self._deleter:
            deleter, self._deleter = self._deleter, None
            _DELETER(deleter)(self._address)
        self._capsule = None

    def __del__(self):
        try:
            self.release()
        except Exception:
            pass
