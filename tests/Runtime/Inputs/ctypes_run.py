"""Drives libtfcrt.so through ctypes, as a Python user would.

ctypes opens the library RTLD_LOCAL, so a model can only find the allocator
(_mlir_memref_to_llvm_*) because tfc_model_load makes the runtime global.

  ctypes_run.py LIBTFCRT MODEL   runs alloc_model twice and prints the
                                 allocator counters
"""
import ctypes
import sys

from tfcrt_ctypes import Stats, open_runtime


def main(lib_path, model_path):
    rt, check = open_runtime(lib_path)

    model = ctypes.c_void_p()
    check(rt.tfc_model_load(model_path.encode(), ctypes.byref(model)))
    shape = (ctypes.c_int64 * 2)(4, 1024)
    x, y = ctypes.c_void_p(), ctypes.c_void_p()
    check(rt.tfc_array_create(0, 2, shape, ctypes.byref(x)))
    check(rt.tfc_array_create(0, 2, shape, ctypes.byref(y)))
    check(rt.tfc_model_bind_input(model, 0, rt.tfc_array_data(x)))
    check(rt.tfc_model_bind_output(model, 0, rt.tfc_array_data(y)))
    stats = Stats()
    for run in range(2):
        check(rt.tfc_model_invoke(model))
        rt.tfc_allocator_get_stats(ctypes.byref(stats))
        print(f"run {run}: fresh {stats.fresh_allocs} "
              f"reused {stats.reused_allocs} live {stats.live_blocks}")
    ys = ctypes.cast(rt.tfc_array_data(y), ctypes.POINTER(ctypes.c_float))
    print(f"y[0] = {ys[0]}, y[4095] = {ys[4095]}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
