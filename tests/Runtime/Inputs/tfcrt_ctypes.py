"""libtfcrt.so through ctypes, as a Python user would open it: the
signatures the Runtime tests call, the allocator counters, status checks."""
import ctypes
import sys


class Stats(ctypes.Structure):
    """tfc_allocator_stats."""
    _fields_ = [(name, ctypes.c_uint64) for name in (
        "alloc_calls", "free_calls", "fresh_allocs", "fresh_bytes",
        "reused_allocs", "live_blocks", "live_bytes", "cached_blocks",
        "cached_bytes", "foreign_frees")]


def open_runtime(lib_path):
    """The runtime library with argument and result types set, and a
    check(status) that exits with the status's message."""
    rt = ctypes.CDLL(lib_path)
    rt.tfc_status_message.restype = ctypes.c_char_p
    rt.tfc_status_message.argtypes = [ctypes.c_void_p]
    rt.tfc_model_target.restype = ctypes.c_char_p
    rt.tfc_model_target.argtypes = [ctypes.c_void_p]
    rt.tfc_array_data.restype = ctypes.c_void_p
    rt.tfc_array_data.argtypes = [ctypes.c_void_p]
    rt.tfc_model_load.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
    for fn in ("tfc_model_bind_input", "tfc_model_bind_output",
               "tfc_model_bind_weight"):
        getattr(rt, fn).argtypes = [ctypes.c_void_p, ctypes.c_int32,
                                    ctypes.c_void_p]
    rt.tfc_model_invoke.argtypes = [ctypes.c_void_p]
    rt.tfc_model_destroy.argtypes = [ctypes.c_void_p]

    def check(status):
        if status:
            sys.exit("error: " + rt.tfc_status_message(status).decode())

    return rt, check
