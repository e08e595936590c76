"""Tensor-parallel models (tfc-compile --tensor-parallel=N) from Python.

A split model runs as the N ranks of an MPI job, one process each, every
rank running the same calls in the same order (they meet in each
all-reduce):

    mpirun -np 2 python3 script.py

    m = tfc.Model("tp2.so", weights="model.safetensors")
    m.ranks, m.rank                       # 2, this process's rank
    logits, *kv = m.run(ids, mask)        # whole inputs, whole outputs
    logits, *kv = m.run(ids, mask, gather=False)  # kv: this rank's heads
    m.run(tok, mask2, pos, *cache, gather=False)  # parts taken as they are

run() (a Context's too) and time() take a split input (a KV cache) whole,
each rank taking its part (tfc_model_input_part), or as this rank's part,
as run(..., gather=False) returns it (told apart by the split axis: the
whole's is ranks times the part's). run() puts each split output together
from every rank's part (tfc_model_gather_output, a collective: every
rank's run does) and returns the whole on every rank; with gather=False it
returns this rank's parts, which a decode loop keeps as its cache between
calls (no gather per step). Outputs that are not split (the logits) are
whole either way, and equal on every rank. tfc.Generator runs a split
build this way (Generator(..., tensor_parallel=N)).

The ranks are those Open MPI's mpirun launched (libmpi.so.40, opened when
the model loads). With mpi4py imported first, the runtime uses the MPI
that mpi4py initialised, its MPI_COMM_WORLD's rank and size (so an Open
MPI job another launcher started, srun's, works too), and leaves
MPI_Finalize to it. Other launchers' variables (torchrun's WORLD_SIZE and
RANK, MPICH's PMI_SIZE) make no MPI job: a split model loaded under them
alone fails with one line naming the variable and asking for mpirun.
"""

import ctypes
import os

import numpy as np

_P, _I32 = ctypes.c_void_p, ctypes.c_int32


class _Split(ctypes.Structure):  # tfc_tensor_split
    _fields_ = [("axis", ctypes.c_int32), ("groups", ctypes.c_int32)]


SIGNATURES = {
    "tfc_model_ranks": (_I32, [_P]),
    "tfc_model_rank": (_I32, [_P]),
    "tfc_model_input_split": (_Split, [_P, _I32]),
    "tfc_model_output_split": (_Split, [_P, _I32]),
    "tfc_model_input_part": (_P, [_P, _I32, _P, ctypes.POINTER(_P)]),
    "tfc_model_gather_output": (_P, [_P, _I32, _P, ctypes.POINTER(_P)]),
    "tfc_model_weight_bytes": (ctypes.c_uint64, [_P]),
    "tfc_array_create": (_P, [_I32, _I32, ctypes.POINTER(ctypes.c_int64),
                              ctypes.POINTER(_P)]),
    "tfc_array_destroy": (None, [_P]),
    "tfc_array_rank": (_I32, [_P]),
    "tfc_array_shape": (ctypes.POINTER(ctypes.c_int64), [_P]),
    "tfc_array_data": (_P, [_P]),
    "tfc_array_nbytes": (ctypes.c_size_t, [_P]),
}

# Launchers that give a process a rank without an MPI job: (variable,
# whose).
_OTHER_LAUNCHERS = (("WORLD_SIZE", "torchrun's"),
                    ("PMI_SIZE", "MPICH's or Intel MPI's mpiexec"))


def launch_error(error):
    """`error` (tfc.Error of loading a model) with the runtime's advice to
    launch tfc-run by mpirun given for Python, and the variable named when
    another launcher than mpirun says the process is one of several ranks;
    other errors as they are."""
    advice = " tfc-run ..."
    if error.code != "FAILED_PRECONDITION" or \
            not error.message.endswith(advice):
        return error
    message = error.message[:-len(advice)] + " python3 ..."
    for name, whose in _OTHER_LAUNCHERS:
        value = os.environ.get(name, "")
        if value.isdigit() and int(value) > 1 and \
                not os.environ.get("OMPI_COMM_WORLD_SIZE"):
            message += " (%s=%s is %s and makes no MPI job: tfc's ranks " \
                "are Open MPI's)" % (name, value, whose)
            break
    return type(error)(message, error.code)


class _Array:
    """A tfc_array (api.h) of `shape` and tfc_dtype `code`, with a numpy
    view of its data; destroyed on leaving `with`."""

    def __init__(self, rt, code=None, shape=None, handle=None):
        from .runtime import _check
        self._rt = rt
        if handle is None:
            handle = ctypes.c_void_p()
            dims = (ctypes.c_int64 * max(len(shape), 1))(*shape)
            _check(rt, rt.tfc_array_create(code, len(shape), dims,
                                           ctypes.byref(handle)))
        self.handle = handle

    def view(self, dtype):
        rt, h = self._rt, self.handle
        shape = tuple(rt.tfc_array_shape(h)[k]
                      for k in range(rt.tfc_array_rank(h)))
        n = rt.tfc_array_nbytes(h)
        raw = (ctypes.c_uint8 * n).from_address(rt.tfc_array_data(h)) \
            if n else bytearray()
        return np.frombuffer(raw, np.uint8).view(dtype).reshape(shape)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._rt.tfc_array_destroy(self.handle)


class ParallelMethods:
    """tfc.Model's tensor-parallel side (mixed into Model; a Context runs
    and gathers as its model does)."""

    @property
    def ranks(self):
        """The ranks the model is split across (1 for a model that is
        not)."""
        return self._rt.tfc_model_ranks(self._live())

    @property
    def rank(self):
        """This process's rank among them (0 for a model not split)."""
        return self._rt.tfc_model_rank(self._live())

    @property
    def weight_bytes(self):
        """The bytes of weights bound on this rank (its parts of the split
        weights, all of the others)."""
        return self._rt.tfc_model_weight_bytes(self._live())

    def _parts(self, inputs, named):
        """The inputs with each split one given whole replaced by this
        rank's part of it (a part, or an input of another size, is left
        for the run to take or refuse as it is)."""
        h, rt = self._live(), self._rt
        if rt.tfc_model_ranks(h) == 1:
            return inputs, named
        inputs = list(inputs)
        infos = self._infos("input")
        for i, info in enumerate(infos):
            split = rt.tfc_model_input_split(h, i)
            if split.axis < 0:
                continue
            name = self._names[i]
            if i < len(inputs):
                inputs[i] = self._part(i, inputs[i], info, split.axis)
            elif name in named:
                named = dict(named)
                named[name] = self._part(i, named[name], info, split.axis)
        return inputs, named

    def _part(self, i, value, info, axis):
        from .runtime import (_DTYPE_CODES, DeviceTensor, _aligned_empty,
                              _check)
        if isinstance(value, DeviceTensor):
            return value
        a = self._as_array(i, value, info)
        dtype = a.dtype.newbyteorder("=")
        code = _DTYPE_CODES.get(dtype)
        if code is None or (a.ndim > axis and
                            a.shape[axis] == info.shape[axis]):
            return a  # this rank's part, or what the run refuses
        rt, part = self._rt, ctypes.c_void_p()
        with _Array(rt, code, a.shape) as whole:
            np.copyto(whole.view(dtype), a)
            _check(rt, rt.tfc_model_input_part(self._live(), i, whole.handle,
                                               ctypes.byref(part)))
        with _Array(rt, handle=part) as p:
            view = p.view(dtype)
            out = _aligned_empty(view.shape, dtype)
            np.copyto(out, view)
        return out

    def _gathered(self, outs):
        """The whole of each split output from every rank's part (every
        rank calls it: a collective); the others as they are."""
        from .runtime import _aligned_empty, _check
        h, rt = self._live(), self._rt
        if rt.tfc_model_ranks(h) == 1:
            return outs
        outs = list(outs)
        for i, part in enumerate(outs):
            if rt.tfc_model_output_split(h, i).axis < 0:
                continue
            whole = ctypes.c_void_p()
            # The model's dtype: a bf16 output is summed as bf16, not as the
            # uint16 of its bits.
            code = rt.tfc_model_output(h, i).contents.dtype
            with _Array(rt, code, part.shape) as p:
                np.copyto(p.view(part.dtype), part)
                _check(rt, rt.tfc_model_gather_output(h, i, p.handle,
                                                      ctypes.byref(whole)))
            with _Array(rt, handle=whole) as w:
                view = w.view(part.dtype)
                outs[i] = _aligned_empty(view.shape, part.dtype)
                np.copyto(outs[i], view)
        return outs
