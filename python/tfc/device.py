"""Device tensors and CUDA graphs of GPU models (tfc.runtime).

A GPU model (tfc-compile --target=nvptx) copies each input to the device
and each output back on every run. Inputs and outputs that should stay on
the device between runs (a decoder's KV cache) go in DeviceTensor:

    with tfc.Model("gpt2.so", weights="model.safetensors") as m:
        kv = m.to_device(cache)                    # copied once
        hidden, k_new = m.run(ids, mask, kv, outputs_on_device=True)
        kv.copy_from(k_new, nbytes, offset=...)    # on the device
        print(hidden.numpy())

run() takes DeviceTensor inputs in place; with outputs_on_device=True it
returns DeviceTensor outputs: the model's own, kept across runs (the next
run with outputs_on_device overwrites them; numpy() copies one to the
host). Runs go through CUDA graphs (api.h, "CUDA graphs"): captured on the
first run on a set of device buffers, replayed on the next;
set_cuda_graphs(False) turns them off, cuda_graph_stats() counts them.
"""

import ctypes

import numpy as np

_P, _I32, _SIZE = ctypes.c_void_p, ctypes.c_int32, ctypes.c_size_t
SIGNATURES = {
    "tfc_device_tensor_create": (_P, [_I32, _I32,
                                      ctypes.POINTER(ctypes.c_int64),
                                      ctypes.POINTER(_P)]),
    "tfc_device_tensor_destroy": (None, [_P]),
    "tfc_device_tensor_pointer": (ctypes.c_uint64, [_P]),
    "tfc_device_tensor_copy_from_host": (_P, [_P, _SIZE, _P, _SIZE]),
    "tfc_device_tensor_copy_to_host": (_P, [_P, _SIZE, _P, _SIZE]),
    "tfc_device_tensor_copy": (_P, [_P, _SIZE, _P, _SIZE, _SIZE]),
    "tfc_device_tensor_copy_2d": (_P, [_P, _SIZE, _SIZE, _P, _SIZE, _SIZE,
                                       _SIZE, _SIZE]),
    "tfc_model_bind_input_tensor": (_P, [_P, _I32, _P]),
    "tfc_model_bind_output_tensor": (_P, [_P, _I32, _P]),
    "tfc_model_set_cuda_graphs": (_P, [_P, _I32]),
    "tfc_model_get_cuda_graph_stats": (_P, [_P, _P]),
    "tfc_model_cuda_graphs_off_reason": (ctypes.c_char_p, [_P]),
}
_GRAPH_FIELDS = ("captures", "replays", "plain_runs", "capture_failures",
                 "graphs")


class _GraphStats(ctypes.Structure):  # tfc_cuda_graph_stats
    _fields_ = [(name, ctypes.c_uint64) for name in _GRAPH_FIELDS]


class DeviceTensor:
    """A dense tensor in the GPU's memory (tfc_device_tensor): `shape`,
    `dtype` (numpy; bf16 as uint16 bits), `nbytes`, `pointer` (its
    CUdeviceptr). Freed by close() or garbage collection; it must outlive
    the runs of a model it is bound to."""

    def __init__(self, shape, dtype, runtime=None):
        from .runtime import _DTYPE_CODES, _check, _runtime
        self._handle = None
        self._rt = _runtime(runtime)
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        code = _DTYPE_CODES.get(self.dtype.newbyteorder("="), -1)
        handle = _P()
        _check(self._rt, self._rt.tfc_device_tensor_create(
            code, len(self.shape),
            (ctypes.c_int64 * max(len(self.shape), 1))(*self.shape),
            ctypes.byref(handle)))
        self._handle = handle
        self.nbytes = int(np.prod(self.shape, dtype=np.int64)) * \
            self.dtype.itemsize

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def pointer(self):
        return self._rt.tfc_device_tensor_pointer(self._handle)

    def copy_from_host(self, array):
        """Copies a numpy array of this shape and dtype to the device."""
        from .runtime import Error, _check
        a = np.asarray(array, order="C")
        if a.shape != self.shape or a.dtype != self.dtype:
            raise Error("device tensor %s %s: cannot take %s %s" % (
                self.dtype, list(self.shape), a.dtype, list(a.shape)),
                "MISMATCH")
        _check(self._rt, self._rt.tfc_device_tensor_copy_from_host(
            self._handle, 0, a.ctypes.data, self.nbytes))

    def numpy(self):
        """A new numpy array holding the tensor's elements."""
        from .runtime import _check
        out = np.empty(self.shape, self.dtype)
        _check(self._rt, self._rt.tfc_device_tensor_copy_to_host(
            self._handle, 0, out.ctypes.data, self.nbytes))
        return out

    def copy_from(self, src, nbytes=None, offset=0, src_offset=0):
        """Copies `nbytes` (all of `src`) from byte `src_offset` of device
        tensor `src` to byte `offset` of this one, on the device."""
        from .runtime import _check
        _check(self._rt, self._rt.tfc_device_tensor_copy(
            self._handle, offset, src._handle, src_offset,
            src.nbytes if nbytes is None else nbytes))

    def copy_2d_from(self, src, width, height, offset=0, pitch=0,
                     src_offset=0, src_pitch=0):
        """Copies `height` rows of `width` bytes from device tensor `src`
        on the device, in one copy: row r from byte src_offset + r *
        src_pitch of `src` to byte offset + r * pitch of this one."""
        from .runtime import _check
        _check(self._rt, self._rt.tfc_device_tensor_copy_2d(
            self._handle, offset, pitch, src._handle, src_offset, src_pitch,
            width, height))

    def close(self):
        handle, self._handle = getattr(self, "_handle", None), None
        if handle:
            self._rt.tfc_device_tensor_destroy(handle)

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass

    def __repr__(self):
        return "<tfc.DeviceTensor %s %s>" % (self.dtype, list(self.shape))


class DeviceMethods:
    """Model's device tensor and CUDA graph methods."""

    def to_device(self, array):
        """A DeviceTensor holding a copy of `array`."""
        a = np.asarray(array, order="C")
        t = DeviceTensor(a.shape, a.dtype, self._rt)
        t.copy_from_host(a)
        return t

    def set_cuda_graphs(self, enable):
        """Turns CUDA graphs on or off (off drops the model's graphs)."""
        from .runtime import _check
        with self._exclusive("set_cuda_graphs"):
            _check(self._rt, self._rt.tfc_model_set_cuda_graphs(
                self._live(), 1 if enable else 0))

    def cuda_graph_stats(self):
        """The model's graph counters as a dict (captures, replays,
        plain_runs, capture_failures, graphs) and "off": why graphs are
        not used ("" while they are)."""
        from .runtime import _check
        stats = _GraphStats()
        with self._exclusive("cuda_graph_stats"):
            _check(self._rt, self._rt.tfc_model_get_cuda_graph_stats(
                self._live(), ctypes.byref(stats)))
            off = self._rt.tfc_model_cuda_graphs_off_reason(self._handle)
        out = {name: getattr(stats, name) for name in _GRAPH_FIELDS}
        out["off"] = off.decode()
        return out

    def _device_outputs(self, infos):
        """The model's DeviceTensor outputs, kept across runs."""
        outs = getattr(self, "_device_outs", None) or []
        if [(o.shape, o.dtype) for o in outs] != [
                (tuple(i.shape), np.dtype(np.uint16 if i.dtype == "bf16"
                                          else i.dtype)) for i in infos]:
            outs = self._device_outs = [
                DeviceTensor(i.shape, np.uint16 if i.dtype == "bf16"
                             else i.dtype, self._rt) for i in infos]
        return outs
