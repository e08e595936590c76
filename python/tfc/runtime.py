"""Runs models compiled by tfc-compile from Python, on libtfcrt.so.

Needs only ctypes and numpy (Python 3.9+). It is the module `tfc.runtime`
of the `tfc` package (python/ of the repository: `pip install ./python`),
whose names `tfc` re-exports; runtime/python/tfc_runtime.py is this module
too, for scripts that put that directory on the path:

    import tfc

    with tfc.Model("minilm.so", weights="model.safetensors") as m:
        print(m.inputs)                  # [TensorInfo(name='input_ids', ...
        emb, = m.run(ids, mask)          # inputs in order, or by name:
        emb, = m.run(input_ids=ids, attention_mask=mask)
        ms = m.time(ids, mask, runs=20)  # per-run milliseconds

run() returns new numpy arrays, one per output in manifest order, which the
model computed into (no copy; numpy arrays export __dlpack__, so
torch.from_dlpack(out) shares them). Inputs are numpy arrays, objects with
__dlpack__ (a torch CPU tensor; taken with np.from_dlpack, without a copy),
or Python lists and scalars. An input is read in place when it is
C-contiguous, in native byte order, of the model's dtype, not empty and
64-byte aligned (aligned_empty / as_aligned make such arrays; torch's CPU
tensors are); any other is copied into an aligned buffer the model keeps
(copied_inputs names them after each run). Arrays must already have the
model's dtype (no silent float -> int casts); a Python list or scalar is
converted to it. A model built for several batch sizes or sequence lengths
(tfc-compile --batch 1,8 --seq-len 16,32,128) takes the batch size and the
length off the inputs, as tfc-run does. numpy has no bfloat16: a bf16 input
takes a uint16 array of the raw bits (float32_to_bf16 makes one) or a
torch.bfloat16 tensor, a bf16 output comes back as uint16 bits
(bf16_to_float32 widens them). Every failure raises Error with the
runtime's one-line message. A GPU model's inputs and outputs can stay on
the device between runs (DeviceTensor, Model.to_device, run(...,
outputs_on_device=True): tfc/device.py). A model split across the ranks
of an MPI job (tfc-compile --tensor-parallel=N) runs under mpirun, its
inputs and outputs whole or the rank's parts (tfc/parallel.py). A Model
may be used from one thread at a time; Model.context() gives one context
per thread.
load_runtime() says where the runtime library is looked for.
"""

import contextlib
import ctypes
import os
import sys
import threading
import warnings
import weakref
from typing import NamedTuple, Optional, Tuple

import numpy as np

from . import _locate
from .device import SIGNATURES as _DEVICE_SIGNATURES
from .device import DeviceMethods, DeviceTensor
from .parallel import SIGNATURES as _PARALLEL_SIGNATURES
from .parallel import ParallelMethods, launch_error

__all__ = ["Context", "DeviceTensor", "Error", "Model", "TensorInfo", "aligned_empty",
           "allocator_stats", "as_aligned", "bf16_to_float32",
           "float32_to_bf16", "load_runtime", "set_threads", "trim_allocator"]

_ALIGN = 64  # the runtime wants input and output buffers 64-byte aligned
_BF16 = 2
# tfc_dtype (abi.h) and the extra array types of api.h, by numpy type.
_DTYPE_CODES = {np.dtype(t): c for t, c in (
    (np.float32, 0), (np.float16, 1), (np.int64, 3), (np.int32, 4),
    (np.bool_, 5), (np.float64, 6), (np.int8, 7), (np.uint8, 8),
    (np.int16, 9), (np.uint16, 10), (np.uint32, 11), (np.uint64, 12))}
# What a model tensor of each tfc_dtype holds in numpy (bf16: its bits).
_STORAGE = {0: np.dtype(np.float32), 1: np.dtype(np.float16),
            _BF16: np.dtype(np.uint16), 3: np.dtype(np.int64),
            4: np.dtype(np.int32), 5: np.dtype(np.bool_)}


class Error(Exception):
    """A failure, with the runtime's one-line message and the name of its
    tfc_status_code ("NOT_FOUND", "MISMATCH", ...) as `code`."""

    def __init__(self, message, code="INVALID_ARGUMENT"):
        super().__init__(message)
        self.message = message
        self.code = code


class TensorInfo(NamedTuple):
    """A tensor of the model's signature. `dtype` is a numpy dtype, or
    "bf16" (held as uint16 bits); `shape` is at the current batch size and
    length; `length_axis` and `batch_axis` are the sequence and batch axes
    (None without one); `bounds` is (lo, hi) for an integer input whose
    elements must lie in [lo, hi)."""
    name: str
    dtype: object
    shape: Tuple[int, ...]
    length_axis: Optional[int]
    bounds: Optional[Tuple[int, int]]
    batch_axis: Optional[int] = None


class _TensorDesc(ctypes.Structure):  # tfc_tensor_desc
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int32),
                ("role", ctypes.c_int32), ("rank", ctypes.c_int32),
                ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("bounds", ctypes.POINTER(ctypes.c_int64))]


# name: (restype, argtypes). A status is a pointer, None when OK.
_P, _I32, _I64, _STR = (ctypes.c_void_p, ctypes.c_int32, ctypes.c_int64,
                        ctypes.c_char_p)
_DESC = ctypes.POINTER(_TensorDesc)
_SIGNATURES = {
    "tfc_status_get_code": (ctypes.c_int, [_P]),
    "tfc_status_message": (_STR, [_P]),
    "tfc_status_free": (None, [_P]),
    "tfc_status_code_name": (_STR, [ctypes.c_int]),
    "tfc_dtype_name": (_STR, [_I32]),
    "tfc_model_load": (_P, [_STR, ctypes.POINTER(ctypes.c_void_p)]),
    "tfc_model_destroy": (None, [_P]),
    "tfc_model_path": (_STR, [_P]),
    "tfc_model_target": (_STR, [_P]),
    "tfc_model_num_inputs": (_I32, [_P]),
    "tfc_model_num_weights": (_I32, [_P]),
    "tfc_model_num_outputs": (_I32, [_P]),
    "tfc_model_input": (_DESC, [_P, _I32]),
    "tfc_model_weight": (_DESC, [_P, _I32]),
    "tfc_model_output": (_DESC, [_P, _I32]),
    "tfc_model_bind_weights": (_P, [_P, _STR]),
    "tfc_model_save_packed_weights": (_P, [_P, _STR]),
    "tfc_model_load_packed_weights": (_P, [_P, _STR]),
    "tfc_model_bind_input": (_P, [_P, _I32, _P]),
    "tfc_model_bind_output": (_P, [_P, _I32, _P]),
    "tfc_model_check_input": (_P, [_P, _I32, _I32, _I32,
                                   ctypes.POINTER(ctypes.c_int64)]),
    "tfc_model_num_batches": (_I32, [_P]),
    "tfc_model_built_batch": (_I64, [_P, _I32]),
    "tfc_model_batch": (_I64, [_P]),
    "tfc_model_set_batch": (_P, [_P, _I64]),
    "tfc_model_input_batch_axis": (_I32, [_P, _I32]),
    "tfc_model_output_batch_axis": (_I32, [_P, _I32]),
    "tfc_model_num_lengths": (_I32, [_P]),
    "tfc_model_built_length": (_I64, [_P, _I32]),
    "tfc_model_length": (_I64, [_P]),
    "tfc_model_set_length": (_P, [_P, _I64]),
    "tfc_model_input_length_axis": (_I32, [_P, _I32]),
    "tfc_model_output_length_axis": (_I32, [_P, _I32]),
    "tfc_model_invoke": (_P, [_P]),
    "tfc_context_create": (_P, [_P, ctypes.POINTER(_P)]),
    "tfc_context_destroy": (None, [_P]),
    "tfc_context_input": (_DESC, [_P, _I32]),
    "tfc_context_output": (_DESC, [_P, _I32]),
    "tfc_context_batch": (_I64, [_P]),
    "tfc_context_length": (_I64, [_P]),
    "tfc_context_check_input": (_P, [_P, _I32, _I32, _I32,
                                     ctypes.POINTER(_I64)]),
    "tfc_context_set_batch": (_P, [_P, _I64]),
    "tfc_context_set_length": (_P, [_P, _I64]),
    "tfc_context_bind_input": (_P, [_P, _I32, _P]),
    "tfc_context_bind_output": (_P, [_P, _I32, _P]),
    "tfc_context_invoke": (_P, [_P]),
    "tfc_model_time": (_P, [_P, _I32, _I32, ctypes.POINTER(ctypes.c_double)]),
    "tfc_set_num_threads": (ctypes.c_int, [_I32]),
    "tfc_allocator_get_stats": (None, [_P]),
    "tfc_allocator_trim": (None, []),
    "tfc_device_allocator_get_stats": (None, [_P]),
    "tfc_device_allocator_trim": (None, []),
    **_DEVICE_SIGNATURES,
    **_PARALLEL_SIGNATURES,
}


_STAT_FIELDS = ("alloc_calls", "free_calls", "fresh_allocs", "fresh_bytes",
                "reused_allocs", "live_blocks", "live_bytes", "cached_blocks",
                "cached_bytes", "foreign_frees")


class _AllocatorStats(ctypes.Structure):  # tfc_allocator_stats
    _fields_ = [(name, ctypes.c_uint64) for name in _STAT_FIELDS]

_runtimes = {}  # path -> the library opened from it


def load_runtime(path=None):
    """libtfcrt.so with the signatures this module calls declared: `path`,
    else $TFC_RUNTIME_LIB, else lib/libtfcrt.so of the tfc build tree the
    package was installed from (recorded at install) or, run from the
    source tree, of its build/, when it exists, else libtfcrt.so through
    the dynamic loader's search (tfc.locate() says which). Each library is
    opened once."""
    if path is None:
        path = _locate.runtime_library()[0]
    if path not in _runtimes:
        try:
            lib = ctypes.CDLL(path)
            for name, (restype, argtypes) in _SIGNATURES.items():
                fn = getattr(lib, name)
                fn.restype, fn.argtypes = restype, argtypes
        except (OSError, AttributeError) as e:
            raise Error("cannot load the tfc runtime %s: %s" % (path, e),
                        "NOT_FOUND") from None
        _runtimes[path] = lib
    return _runtimes[path]


def _runtime(runtime):
    """A library from load_runtime, given one, a path or None."""
    if runtime is None or isinstance(runtime, (str, os.PathLike)):
        return load_runtime(None if runtime is None else os.fspath(runtime))
    return runtime


def _path(path, what):
    """`path` as bytes for the C API; a NUL inside would cut it short."""
    p = os.fspath(path)
    b = p.encode() if isinstance(p, str) else p
    if b"\0" in b:
        raise Error("%s %r: a path with a NUL byte" % (what, p))
    return b


def _check(rt, status, context=""):
    """Raises Error for a failed tfc_status, which it frees; `context` is
    appended to the runtime's message."""
    if not status:
        return
    code = rt.tfc_status_get_code(status)
    message = rt.tfc_status_message(status).decode(errors="replace")
    rt.tfc_status_free(status)
    raise Error(message + context, rt.tfc_status_code_name(code).decode())


def set_threads(n, runtime=None):
    """Sets the number of threads compiled CPU code uses (best before
    loading models; tfc_set_num_threads). True when an OpenMP runtime is
    in the process now."""
    most = 8 * (os.cpu_count() or 1)
    if n < 1:
        raise Error("set_threads: %d threads; at least 1" % n)
    if n > most:
        raise Error("set_threads: %d threads; at most %d (8 per core)" %
                    (n, most))
    result = _runtime(runtime).tfc_set_num_threads(int(n))
    if result < 0:
        raise Error("set_threads: %d threads refused by the runtime (at "
                    "most 8 per core)" % n)
    return bool(result)


def allocator_stats(device=False, runtime=None):
    """The counters of the runtime's caching allocator as a dict (the fields
    of tfc_allocator_stats: alloc_calls, fresh_allocs, fresh_bytes,
    reused_allocs, live_bytes, cached_bytes, ...): the host allocator behind
    compiled CPU code's buffers, or with `device` the device allocator behind
    GPU models' buffers (all zero before a GPU model has run). A run's
    working memory is the change in fresh_bytes across it."""
    rt = _runtime(runtime)
    stats = _AllocatorStats()
    if device:
        rt.tfc_device_allocator_get_stats(ctypes.byref(stats))
    else:
        rt.tfc_allocator_get_stats(ctypes.byref(stats))
    return {name: getattr(stats, name) for name in _STAT_FIELDS}


def trim_allocator(device=False, runtime=None):
    """Returns every block the allocator caches to the system (with
    `device`, to the CUDA driver, after the runtime's stream drains)."""
    rt = _runtime(runtime)
    if device:
        rt.tfc_device_allocator_trim()
    else:
        rt.tfc_allocator_trim()


def bf16_to_float32(bits):
    """bf16 raw bits (uint16, as run() returns them) as float32 (exact)."""
    bits = np.asarray(bits, np.uint16)
    return (bits.astype(np.uint32) << 16).view(np.float32)


def float32_to_bf16(x):
    """float32 values as bf16 raw bits (uint16), rounded to nearest even as
    PyTorch's .to(torch.bfloat16) does; NaN stays NaN."""
    u = np.ascontiguousarray(x, np.float32).view(np.uint32)
    bits = ((u + np.uint32(0x7FFF) + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(u.view(np.float32)), np.uint16(0x7FC0), bits)


def _aligned_empty(shape, dtype):
    """An uninitialised array whose data is 64-byte aligned: a view into an
    over-allocated byte buffer, which it keeps alive."""
    dtype = np.dtype(dtype)
    shape = ((int(shape),) if np.ndim(shape) == 0 else
             tuple(int(d) for d in shape))
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(nbytes + _ALIGN, np.uint8)
    start = -raw.ctypes.data % _ALIGN
    return raw[start:start + nbytes].view(dtype).reshape(shape)


def aligned_empty(shape, dtype):
    """An uninitialised C-contiguous array of `shape` and `dtype` whose data
    is 64-byte aligned, as the runtime reads and writes buffers: fill it and
    pass it to run(), which reads it in place (no copy)."""
    return _aligned_empty(shape, dtype)


def _in_place(a):
    """Whether the runtime can read array `a` where it is: dense (C order),
    native byte order, not empty, 64-byte aligned."""
    return (a.flags.c_contiguous and a.dtype.isnative and a.size > 0 and
            a.ctypes.data % _ALIGN == 0)


def as_aligned(a, dtype=None):
    """`a` (an array, a DLPack tensor or a list) as an array that run()
    reads in place: itself when it already is one (C order, native byte
    order, 64-byte aligned, of `dtype` when given), else an aligned copy."""
    a = _from_dlpack(a) if _is_dlpack(a) else np.asarray(a, dtype)
    if dtype is not None and a.dtype != np.dtype(dtype):
        a = a.astype(dtype)
    if _in_place(a) or a.size == 0:
        return a
    out = _aligned_empty(a.shape, a.dtype.newbyteorder("="))
    np.copyto(out, a)
    return out


def _is_dlpack(value):
    return (not isinstance(value, np.ndarray) and
            hasattr(value, "__dlpack__"))


def _from_dlpack(value):
    """A numpy view of a DLPack tensor (no copy): a torch.bfloat16 tensor,
    which numpy cannot hold, as its raw bits (uint16)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        value = value.detach()  # no copy; a tensor that requires grad
        if value.dtype == torch.bfloat16:
            return np.from_dlpack(value.view(torch.int16)).view(np.uint16)
    return np.from_dlpack(value)


class _Closing:
    """close() by `with`, and at garbage collection."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: nothing left to free
            pass


class Model(_Closing, DeviceMethods, ParallelMethods):
    """A compiled model (model.so) loaded by the runtime, its weights bound
    from a safetensors file. close() (or `with`) unloads it early.

    packed_weights: a packed weights file (CPU models, with `weights`): read
    where it exists, so that the first run packs nothing; otherwise, or
    when it is stale (of other weights or another model library: a
    warning), written after the first run (save_packed_weights)."""

    def __init__(self, path, weights=None, runtime=None, packed_weights=None):
        self._handle = None  # first: __del__ runs even if loading fails
        self._save_packed = None
        # tfc.compile's temporary directory of the library, removed once the
        # model and its contexts are closed.
        self._owned_dir = None
        self._contexts = weakref.WeakSet()
        self._copied = ()
        self.compile_log = ""
        # Held by each call that binds or runs (_exclusive): a model serves
        # one call at a time, and a second from another thread is refused.
        self._busy = threading.Lock()
        self._rt = _runtime(runtime)
        handle = ctypes.c_void_p()
        try:
            _check(self._rt, self._rt.tfc_model_load(_path(path, "model"),
                                                     ctypes.byref(handle)))
        except Error as e:
            raise launch_error(e) from None
        self._handle = handle
        self.path = self._rt.tfc_model_path(handle).decode()
        self._names = [t.name for t in self._infos("input")]
        # Aligned buffers the model reads and writes, kept across runs.
        self._in_buffers = [None] * len(self._names)
        self._out_buffers = [None] * len(self._infos("output"))
        if weights is not None:
            self.bind_weights(weights)
        if packed_weights is not None:
            if weights is None:
                raise Error("packed_weights goes with weights: the packed "
                            "copies are of the weights bound from that file")
            if self.ranks > 1:
                raise Error("packed_weights: the %d ranks of a tensor-"
                            "parallel model pack different parts of the "
                            "weights, which one file does not hold"
                            % self.ranks, "FAILED_PRECONDITION")
            if os.path.exists(packed_weights):
                try:
                    self.load_packed_weights(packed_weights)
                except Error as e:
                    # A file of other weights or another model library is
                    # stale: packed again and rewritten, as tfc-run does.
                    if e.code != "MISMATCH":
                        raise
                    warnings.warn("%s; it is written again after the first "
                                  "run" % e, stacklevel=2)
                    self._save_packed = packed_weights
            else:
                self._save_packed = packed_weights

    def close(self):
        """Unloads the model (once; later calls do nothing), after a call
        under way on another thread ends."""
        busy = getattr(self, "_busy", None)
        with busy if busy is not None else contextlib.nullcontext():
            handle, self._handle = getattr(self, "_handle", None), None
            if handle:
                self._rt.tfc_model_destroy(handle)
        self._release_dir()

    def _release_dir(self):
        """Removes tfc.compile's temporary directory once the model and all
        its contexts are closed (the runtime keeps a closed model's library
        loaded for its contexts)."""
        owned = getattr(self, "_owned_dir", None)
        if owned is None or getattr(self, "_handle", None) or \
                any(c._context for c in list(self._contexts)):
            return
        self._owned_dir = None
        owned.cleanup()

    @contextlib.contextmanager
    def _exclusive(self, call):
        """Holds the model for one call, or raises FAILED_PRECONDITION when
        another thread's call holds it (as the C API refuses overlapping
        calls; here binding the inputs, running and reading the outputs are
        one call)."""
        if not self._busy.acquire(blocking=False):
            raise Error("%s: model %s is in use by another call on another "
                        "thread (a model serves one call at a time: load one "
                        "model per thread)" % (call, self.path),
                        "FAILED_PRECONDITION")
        try:
            yield
        finally:
            self._busy.release()

    def __repr__(self):
        return "<tfc.Model %s>" % self.path

    def _function(self, name):
        """tfc_model_<name> and the handle it takes (a Context's are
        tfc_context_<name> and its own)."""
        return getattr(self._rt, "tfc_model_" + name), self._live()

    def _live(self):
        if not self._handle:
            raise Error("model %s is closed" % self.path,
                        "FAILED_PRECONDITION")
        return self._handle

    def _infos(self, role):
        """TensorInfo of every tensor of `role`, at the current batch size
        and length."""
        h, rt = self._live(), self._rt
        get, target = ((rt.tfc_model_weight, h) if role == "weight" else
                       self._function(role))

        def axis(kind, i):
            if role == "weight":
                return None
            k = getattr(rt, "tfc_model_%s_%s_axis" % (role, kind))(h, i)
            return k if k >= 0 else None

        infos = []
        for i in range(getattr(rt, "tfc_model_num_%ss" % role)(h)):
            d = get(target, i).contents
            infos.append(TensorInfo(
                d.name.decode(),
                "bf16" if d.dtype == _BF16 else _STORAGE[d.dtype],
                tuple(d.shape[k] for k in range(d.rank)),
                axis("length", i),
                (d.bounds[0], d.bounds[1]) if d.bounds else None,
                axis("batch", i)))
        return infos

    inputs = property(lambda self: self._infos("input"),
                      doc="The inputs (TensorInfo), in order.")
    outputs = property(lambda self: self._infos("output"),
                       doc="The outputs (TensorInfo), in order.")
    weights = property(lambda self: self._infos("weight"),
                       doc="The weights (TensorInfo), in order.")
    target = property(
        lambda self: self._rt.tfc_model_target(self._live()).decode(),
        doc='"cpu" or "nvptx".')

    def _built(self, sizes, size):
        """tfc_model_num_<sizes> built sizes, tfc_model_built_<size>'s."""
        h, rt = self._live(), self._rt
        built = getattr(rt, "tfc_model_built_" + size)
        return tuple(built(h, i)
                     for i in range(getattr(rt, "tfc_model_num_" + sizes)(h)))

    @property
    def batches(self):
        """The batch sizes the model was built for, increasing; () for a
        model of one batch size."""
        return self._built("batches", "batch")

    @property
    def batch(self):
        """The number of sequences the model takes now; None for a model of
        one batch size."""
        return self._rt.tfc_model_batch(self._live()) or None

    def set_batch(self, n):
        """Makes the model take `n` sequences (any number from 1; beyond the
        largest built it runs in slices); run() does it from the inputs'
        shapes."""
        with self._exclusive("set_batch"):
            _check(self._rt, self._rt.tfc_model_set_batch(self._live(), int(n)))

    @property
    def lengths(self):
        """The sequence lengths the model was built for, increasing; () for
        a model of one length."""
        return self._built("lengths", "length")

    @property
    def length(self):
        """The number of new tokens per sequence the model takes now; None
        for a model of one length."""
        return self._rt.tfc_model_length(self._live()) or None

    def set_length(self, n):
        """Makes the model take `n` tokens per sequence (1 to the longest
        built); run() does it from the inputs' shapes."""
        with self._exclusive("set_length"):
            _check(self._rt, self._rt.tfc_model_set_length(self._live(), int(n)))

    def bind_weights(self, path):
        """Binds every weight by name from a safetensors file."""
        with self._exclusive("bind_weights"):
            _check(self._rt, self._rt.tfc_model_bind_weights(
                self._live(), _path(path, "weights file")))

    def _packed_after_run(self):
        # Model(packed_weights=...) of a file that did not exist: written
        # after the first run (inside run's _exclusive).
        path, self._save_packed = self._save_packed, None
        if path is not None:
            _check(self._rt, self._rt.tfc_model_save_packed_weights(
                self._live(), _path(path, "packed weights file")))

    def save_packed_weights(self, path):
        """Writes the weights as the CPU kernels have packed them so far
        (run the model first) to `path`, for load_packed_weights in a later
        process."""
        with self._exclusive("save_packed_weights"):
            _check(self._rt, self._rt.tfc_model_save_packed_weights(
                self._live(), _path(path, "packed weights file")))

    def load_packed_weights(self, path):
        """Maps a file of save_packed_weights: the model packs none of the
        weights it holds (checked against the bound weights file)."""
        with self._exclusive("load_packed_weights"):
            _check(self._rt, self._rt.tfc_model_load_packed_weights(
                self._live(), _path(path, "packed weights file")))

    def run(self, *inputs, outputs_on_device=False, gather=True, **named):
        """Runs the model once on the inputs, in order or by name (names
        that are not identifiers: run(**{"past.0.key": k})): numpy arrays,
        DLPack tensors (torch CPU tensors), lists, or for a GPU model
        DeviceTensor (tfc.device). Returns the outputs in manifest order:
        new numpy arrays the model computed into (64-byte aligned; later
        runs leave them), or with outputs_on_device the model's
        DeviceTensor outputs, which the next such run overwrites. A
        tensor-parallel model's split inputs are whole or this rank's
        parts, its split outputs whole on every rank, or with gather=False
        this rank's parts (tfc/parallel.py)."""
        with self._exclusive("run"), self._holding():
            inputs, named = self._parts(inputs, named)
            outs = self._bind(inputs, named, fresh_outputs=True,
                              on_device=outputs_on_device)
            _check(self._rt, self._rt.tfc_model_invoke(self._handle))
            self._packed_after_run()
            return self._gathered(outs) if gather else outs

    @contextlib.contextmanager
    def _holding(self):
        """Keeps the arrays _bind bound in place alive for the call (a
        converted list or a DLPack view may have no other owner)."""
        try:
            yield
        finally:
            self._held = None

    @property
    def copied_inputs(self):
        """The names of the inputs the last run (or time) copied into
        aligned buffers; the others it read where they were."""
        return self._copied

    def context(self):
        """A new execution context of this (CPU) model: its own inputs and
        outputs, the model's weights shared read-only. Contexts of one
        model run at once, each from one thread at a time; while any
        exists the model's weights cannot be bound again."""
        return Context(self)

    def time(self, *inputs, warmup=1, runs=10, **named):
        """Runs the model `warmup` times untimed, then `runs` times on the
        inputs (as run() takes them); returns the milliseconds of each
        timed run (the model's own compute)."""
        with self._exclusive("time"), self._holding():
            self._bind(*self._parts(inputs, named))
            ms = (ctypes.c_double * max(runs, 1))()
            _check(self._rt, self._rt.tfc_model_time(self._handle, warmup, runs,
                                                     ms))
            self._packed_after_run()
            return list(ms[:runs])

    def _which(self, i):
        return "input %d '%s'" % (i, self._names[i])

    def _bind(self, inputs, named, fresh_outputs=False, on_device=False):
        """Checks the inputs, sets the batch size and the length from them,
        and binds inputs and outputs: an input in place where the runtime
        can read it there (_in_place), else a copy in the model's aligned
        buffer for it. Outputs are bound to new aligned arrays with
        `fresh_outputs`, else to buffers kept across calls; returns
        them."""
        h, names = self._live(), self._names
        takes = "model %s takes %d inputs (%s)" % (self.path, len(names),
                                                   ", ".join(names))
        if len(inputs) > len(names):
            raise Error("%s, got %d" % (takes, len(inputs)))
        arrays = list(inputs) + [None] * (len(names) - len(inputs))
        for name, value in named.items():
            if name not in names:
                raise Error("model %s has no input '%s' (its inputs: %s)" % (
                    self.path, name, ", ".join(names)))
            i = names.index(name)
            if arrays[i] is not None:
                raise Error("%s given both by position and by name" %
                            self._which(i))
            arrays[i] = value
        missing = [self._which(i) for i, a in enumerate(arrays) if a is None]
        if missing:
            raise Error("%s: missing %s" % (takes, ", ".join(missing)))
        infos = self._infos("input")
        arrays = [a if isinstance(a, DeviceTensor) else
                  self._as_array(i, a, infos[i]) for i, a in enumerate(arrays)]
        if self._rt.tfc_model_num_batches(h) > 0:
            self._set_size_from(arrays, infos, batches=True)
        if self._rt.tfc_model_num_lengths(h) > 0:
            self._set_size_from(arrays, infos, batches=False)
        copied = []
        for i, a in enumerate(arrays):
            if isinstance(a, DeviceTensor):
                if not isinstance(self, Model):  # a Context: CPU models
                    raise Error("%s: a context runs a cpu model: device "
                                "tensors bind to nvptx models" %
                                self._which(i), "FAILED_PRECONDITION")
                _check(self._rt, self._rt.tfc_model_bind_input_tensor(
                    h, i, a._handle))
                continue
            dtype = a.dtype.newbyteorder("=")  # copied in native order
            code = _DTYPE_CODES.get(dtype, -1)
            shape = (ctypes.c_int64 * max(a.ndim, 1))(*a.shape)
            check_input, target = self._function("check_input")
            _check(self._rt, check_input(target, i, code, a.ndim, shape),
                "" if code >= 0 else " (numpy %s)" % a.dtype)
            if _in_place(a):
                buf = a  # read in place: the run only reads its inputs
            else:
                buf = self._in_buffers[i]
                if buf is None or buf.shape != a.shape or buf.dtype != dtype:
                    buf = self._in_buffers[i] = _aligned_empty(a.shape, dtype)
                np.copyto(buf, a)
                copied.append(self._names[i])
            # Bound on every run: setting a shape drops the bindings.
            bind, target = self._function("bind_input")
            _check(self._rt, bind(target, i, buf.ctypes.data))
        self._copied = tuple(copied)
        self._held = arrays
        if on_device:
            outs = self._device_outputs(self._infos("output"))
            for i, t in enumerate(outs):
                _check(self._rt, self._rt.tfc_model_bind_output_tensor(
                    h, i, t._handle))
            return outs
        outs = []
        for i, info in enumerate(self._infos("output")):
            dtype = _STORAGE[_BF16] if info.dtype == "bf16" else info.dtype
            if fresh_outputs:
                buf = _aligned_empty(info.shape, dtype)
            else:
                buf = self._out_buffers[i]
                if buf is None or buf.shape != info.shape:
                    buf = self._out_buffers[i] = _aligned_empty(info.shape,
                                                                dtype)
            bind, target = self._function("bind_output")
            _check(self._rt, bind(target, i, buf.ctypes.data))
            outs.append(buf)
        return outs

    def _as_array(self, i, value, info):
        """A numpy array stays as it is (the runtime checks its dtype), and
        so does a DLPack tensor, viewed as one (np.from_dlpack; a
        torch.bfloat16 tensor as its bits); other values (lists, scalars)
        convert to the input's dtype, but floats do not become integers or
        booleans."""
        if isinstance(value, np.ndarray):
            return value
        if _is_dlpack(value):
            try:
                return _from_dlpack(value)
            except Exception as e:  # BufferError, TypeError, RuntimeError
                raise Error("%s: cannot take %s through DLPack: %s (tfc "
                            "reads host memory: a CPU tensor of a numpy "
                            "dtype, or torch.bfloat16)" % (
                                self._which(i), type(value).__name__,
                                str(e).strip().splitlines()[0] if str(e)
                                else type(e).__name__),
                            "MISMATCH") from None
        try:
            a = np.asarray(value)
            if info.dtype == "bf16":
                return float32_to_bf16(a.astype(np.float32))
            kind = a.dtype.kind
            if a.size and (kind not in "biuf" or
                           kind == "f" and info.dtype.kind in "biu"):
                raise TypeError("%s values" % a.dtype)
            return a.astype(info.dtype)
        except (TypeError, ValueError) as e:
            raise Error("%s: cannot convert to %s: %s" % (
                self._which(i), info.dtype, e), "MISMATCH") from None

    def _set_size_from(self, arrays, infos, batches):
        """The batch size (length) of the inputs as tfc-run takes it: each
        input's extent on its batch axis over the model's constant there
        (the rows of one sequence), or on its sequence axis minus the
        model's constant (a mask's past tokens). They must agree; the model
        is set to it when it differs from the current one."""
        rt = self._rt
        what = "batch size" if batches else "length"
        get, target = self._function("batch" if batches else "length")
        current = get(target)
        size, first = None, None
        for i, (a, info) in enumerate(zip(arrays, infos)):
            axis = info.batch_axis if batches else info.length_axis
            # A rank too small is tfc_model_check_input's to report, and a
            # batch extent that is no multiple of the constant.
            if axis is None or a.ndim <= axis:
                continue
            built = info.shape[axis]
            n = (a.shape[axis] // (built // current) if batches else
                 a.shape[axis] - (built - current))
            if first is None:
                size, first = n, i
            elif n != size:
                raise Error(
                    "inputs of different %ss: %s has %s %d (%s), %s %s %d "
                    "(%s)" % (what, self._which(first), what, size,
                              self._describe(arrays[first]), self._which(i),
                              what, n, self._describe(a)))
        if first is not None and size != current:
            set_size, target = self._function(
                "set_batch" if batches else "set_length")
            _check(rt, set_size(target, size), " (%s is %s)" % (
                self._which(first), self._describe(arrays[first])))

    def _describe(self, a):
        """"i64 [2, 3]", as the runtime describes arrays."""
        code = _DTYPE_CODES.get(a.dtype.newbyteorder("="))
        name = (self._rt.tfc_dtype_name(code).decode() if code is not None
                else str(a.dtype))
        return "%s [%s]" % (name, ", ".join(str(d) for d in a.shape))


# Context (context.py) uses the names above.
from .context import Context  # noqa: E402
