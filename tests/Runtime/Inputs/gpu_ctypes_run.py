"""Runs a GPU model through libtfcrt.so from ctypes, as a Python user would.

ctypes opens the runtime RTLD_LOCAL: the model's host code finds the mgpu*
functions only because tfc_model_load makes the runtime global.

  gpu_ctypes_run.py LIBTFCRT MODEL   runs gpu_add_model three times, printing
                                     the device allocator's counters, then
                                     trims the cache
"""
import ctypes
import sys

from tfcrt_ctypes import Stats, open_runtime


def main(lib_path, model_path):
    rt, check = open_runtime(lib_path)
    stats = Stats()

    def show(label):
        rt.tfc_device_allocator_get_stats(ctypes.byref(stats))
        print(f"{label}: fresh {stats.fresh_allocs} reused "
              f"{stats.reused_allocs} live {stats.live_blocks} cached "
              f"{stats.cached_blocks}")

    model = ctypes.c_void_p()
    check(rt.tfc_model_load(model_path.encode(), ctypes.byref(model)))
    print("target", rt.tfc_model_target(model).decode())
    show("loaded")
    Floats = ctypes.c_float * 6

    def aligned(values):
        # ctypes arrays need not be 64-byte aligned: over-allocate, align.
        raw = (ctypes.c_float * 32)()
        base = ctypes.addressof(raw)
        start = (base + 63) // 64 * 64
        array = Floats.from_address(start)
        array[:] = values
        return raw, array

    keep = []
    for i, values in enumerate(([1, 2, 3, 4, 5, 6], [1] * 6)):
        raw, array = aligned(values)
        keep.append(raw)
        check(rt.tfc_model_bind_input(model, i, ctypes.addressof(array)))
    raw, w = aligned([2] * 6)
    keep.append(raw)
    check(rt.tfc_model_bind_weight(model, 0, ctypes.addressof(w)))
    raw, y = aligned([0] * 6)
    keep.append(raw)
    check(rt.tfc_model_bind_output(model, 0, ctypes.addressof(y)))
    for run in range(3):
        check(rt.tfc_model_invoke(model))
        show(f"run {run}")
    print("y =", " ".join(str(v) for v in y))
    rt.tfc_model_destroy(model)
    show("destroyed")
    rt.tfc_device_allocator_trim()
    show("trimmed")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
