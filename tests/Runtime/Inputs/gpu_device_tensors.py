"""Device tensors and CUDA graphs of a GPU model through the Python API
(tfc.device on the C API of api.h, "Device tensors" and "CUDA graphs") on
gpu_add_model (y = a + b * w, f32 [2, 3]) over the fake CUDA driver, whose
counters (fake_cuda.h) show what ran: round trips of device tensors,
inputs and outputs bound in place (outputs left on the device, host
buffers untouched), a graph captured on the first run and replayed on the
next, captured again for other device buffers, the same numbers kernel by
kernel, and every error as one line with its code.

usage: gpu_device_tensors.py LIBTFCRT FIXTURES WORKDIR [SEED]
  $TFC_CUDA_DRIVER: the fake driver (fake_cuda.so)
"""
import ctypes
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from python_api_check import Checks, tfc, write_arrays  # noqa: E402


class _Counters(ctypes.Structure):  # fake_cuda_counters
    _fields_ = [(n, ctypes.c_uint64) for n in (
        "init_calls", "mem_allocs", "mem_frees", "live_allocs", "live_bytes",
        "launches", "set_attribute_calls", "module_loads", "module_unloads",
        "last_jit_opt_level", "tensor_map_encodes", "captures",
        "captured_launches", "graph_launches", "graph_execs_live",
        "memcpys", "memcpys_2d")]


def start(lib, work, seed):
    """The checks, a generator of `seed` (random without), the runtime
    `lib`, the fake driver $TFC_CUDA_DRIVER and a reader of its counters."""
    seed = int(seed) if seed else int.from_bytes(os.urandom(4), "little")
    print("seed %d" % seed)
    os.makedirs(work, exist_ok=True)
    rt = tfc.load_runtime(lib)
    # The driver the runtime opened: the same library, so the same counters.
    fake = ctypes.CDLL(os.environ["TFC_CUDA_DRIVER"])

    def counters():
        out = _Counters()
        fake.fake_cuda_get_counters(ctypes.byref(out))
        return out
    return Checks(seed), np.random.default_rng(seed), rt, fake, counters


def main():
    lib, fixtures, work = sys.argv[1:4]
    c, rng, rt, fake, counters = start(
        lib, work, sys.argv[4] if len(sys.argv) > 4 else None)

    def delta(before, field):
        return getattr(counters(), field) - getattr(before, field)

    # Round trips, odd sizes, copies between tensors at offsets.
    for shape, dtype in (((3, 5), np.float32), ((7,), np.int64),
                         ((2, 3, 3), np.float16), ((), np.int32)):
        x = np.asarray(rng.standard_normal(shape) * 100).astype(dtype)
        t = tfc.DeviceTensor(shape, dtype, rt)
        t.copy_from_host(x)
        back = t.numpy()
        c.expect("device tensor %s %s: round trip" % (np.dtype(dtype).name,
                                                      list(shape)),
                 back.dtype == x.dtype and back.shape == x.shape and
                 np.array_equal(back, x))
    src = tfc.DeviceTensor((5,), np.float32, rt)
    s = rng.standard_normal(5).astype(np.float32)
    src.copy_from_host(s)
    dst = tfc.DeviceTensor((6,), np.float32, rt)
    dst.copy_from(src, nbytes=8, offset=12, src_offset=4)
    want = np.zeros(6, np.float32)
    want[3:5] = s[1:3]
    c.expect("device tensor: created zero, 2 elements copied at offsets",
             np.array_equal(dst.numpy(), want))
    c.error("copy past the end", lambda: dst.copy_from(src, nbytes=24),
            "INVALID_ARGUMENT", "bytes [0, 0 + 24) lie outside the "
            "20-byte device tensor")
    c.error("unknown dtype", lambda: tfc.DeviceTensor((2,), np.complex64, rt),
            "INVALID_ARGUMENT", "tfc_device_tensor_create: unknown dtype -1")
    os.environ["FAKE_CUDA_MEMORY"] = "1"  # read by the fake on each call
    c.error("device memory runs out",
            lambda: tfc.DeviceTensor((1024,), np.float32, rt),
            "OUT_OF_MEMORY", "tfc_device_tensor_create: cuMemAlloc_v2 failed "
            "(4096 bytes for f32 [1024]): CUDA_ERROR_OUT_OF_MEMORY")
    del os.environ["FAKE_CUDA_MEMORY"]
    c.error("host array of another shape",
            lambda: src.copy_from_host(np.zeros(4, np.float32)), "MISMATCH",
            "device tensor float32 [5]: cannot take float32 [4]")

    w = rng.standard_normal((2, 3)).astype(np.float32)
    wfile = os.path.join(work, "w.safetensors")
    write_arrays(wfile, {"w": w}, {"format": "pt"})
    path = os.path.join(fixtures, "gpu_add_model.so")
    a, b, a2 = (rng.standard_normal((2, 3)).astype(np.float32)
                for _ in range(3))
    with tfc.Model(path, wfile, runtime=rt) as m:
        da, db, da2 = m.to_device(a), m.to_device(b), m.to_device(a2)
        before = counters()
        (y,) = m.run(da, db, outputs_on_device=True)
        c.expect("first run on device tensors: captured (%d captures, %d "
                 "graph launches, %d kernels)" % (
                     delta(before, "captures"),
                     delta(before, "graph_launches"),
                     delta(before, "launches")),
                 delta(before, "captures") == 1 and
                 delta(before, "captured_launches") == 2 and
                 delta(before, "graph_launches") == 1 and
                 delta(before, "launches") == 2)
        got = y.numpy()
        c.expect("output on the device: %r, y = a + b * w" % y,
                 isinstance(y, tfc.DeviceTensor) and
                 fake.fake_cuda_is_device(ctypes.c_void_p(y.pointer), 24) and
                 np.allclose(got, a + b * w, rtol=1e-6, atol=1e-6))
        before = counters()
        (y2,) = m.run(da, db, outputs_on_device=True)
        c.expect("second run replays the graph (%d captures, %d graph "
                 "launches, %d kernels), into the same output tensor" % (
                     delta(before, "captures"),
                     delta(before, "graph_launches"),
                     delta(before, "launches")),
                 delta(before, "captures") == 0 and
                 delta(before, "graph_launches") == 1 and
                 delta(before, "launches") == 2 and y2 is y and
                 np.array_equal(y2.numpy(), got))
        # New bytes in the same tensor: the graph reads them.
        a3 = rng.standard_normal((2, 3)).astype(np.float32)
        da.copy_from_host(a3)
        before = counters()
        m.run(da, db, outputs_on_device=True)
        c.expect("new contents of a bound tensor: replayed, new outputs",
                 delta(before, "captures") == 0 and
                 np.allclose(y.numpy(), a3 + b * w, rtol=1e-6, atol=1e-6))
        # Another tensor is another pointer: captured again; back to the
        # first, its graph is still there.
        before = counters()
        m.run(da2, db, outputs_on_device=True)
        c.expect("another input tensor: captured again",
                 delta(before, "captures") == 1 and
                 np.allclose(y.numpy(), a2 + b * w, rtol=1e-6, atol=1e-6))
        before = counters()
        m.run(da, db, outputs_on_device=True)
        graphs = m.cuda_graph_stats()
        c.expect("the first tensor again: its graph replayed (%s)" % graphs,
                 delta(before, "captures") == 0 and
                 graphs["captures"] == 2 and graphs["replays"] == 3 and
                 graphs["graphs"] == 2 and graphs["plain_runs"] == 0 and
                 graphs["off"] == "")
        replayed = y.numpy()
        m.set_cuda_graphs(False)
        before = counters()
        m.run(da, db, outputs_on_device=True)
        graphs = m.cuda_graph_stats()
        c.expect("graphs off: kernel by kernel, the same bits (%s)" % graphs,
                 delta(before, "graph_launches") == 0 and
                 delta(before, "launches") == 2 and
                 counters().graph_execs_live == 0 and
                 graphs["plain_runs"] == 1 and graphs["graphs"] == 0 and
                 graphs["off"] == "turned off" and
                 np.array_equal(y.numpy(), replayed))
        m.set_cuda_graphs(True)
        # A host output buffer replaced by a device binding is not written.
        h = m._handle
        host_y = tfc.aligned_empty((2, 3), np.float32)
        host_y[...] = 7
        out = tfc.DeviceTensor((2, 3), np.float32, rt)
        for status in (rt.tfc_model_bind_output(h, 0, host_y.ctypes.data),
                       rt.tfc_model_bind_output_tensor(h, 0, out._handle),
                       rt.tfc_model_invoke(h)):
            tfc._check(rt, status)
        c.expect("an output bound to a device tensor: the earlier host "
                 "buffer untouched, the tensor written",
                 np.all(host_y == 7) and
                 np.allclose(out.numpy(), a3 + b * w, rtol=1e-6, atol=1e-6))
        # Host inputs again (the default binding): copied in as before.
        (hy,) = m.run(a, b)
        c.expect("host inputs after device ones",
                 np.allclose(hy, a + b * w, rtol=1e-6, atol=1e-6))

        # While an input is bound to a device tensor, the model's own
        # device buffer for it is given back; a host binding takes one
        # again.
        live = tfc.allocator_stats(device=True, runtime=rt)["live_blocks"]
        tfc._check(rt, rt.tfc_model_bind_input_tensor(h, 1, db._handle))
        bound = tfc.allocator_stats(device=True, runtime=rt)["live_blocks"]
        tfc._check(rt, rt.tfc_model_bind_input(h, 1, host_y.ctypes.data))
        again = tfc.allocator_stats(device=True, runtime=rt)["live_blocks"]
        c.expect("a device binding frees the model's own buffer, a host "
                 "binding allocates it again (%d, %d, %d live blocks)" % (
                     live, bound, again),
                 bound == live - 1 and again == live)
        tfc._check(rt, rt.tfc_model_bind_input_tensor(h, 1, db._handle))

        # A raw CUdeviceptr with its type said by the caller.
        bind = rt.tfc_model_bind_input_device
        bind.restype = ctypes.c_void_p
        bind.argtypes = [ctypes.c_void_p, ctypes.c_int32, ctypes.c_uint64,
                         ctypes.c_int32, ctypes.c_int32,
                         ctypes.POINTER(ctypes.c_int64)]
        shape = (ctypes.c_int64 * 2)(2, 3)

        def raw(ptr, dtype=0, rank=2, index=0):
            tfc._check(rt, bind(h, index, ptr, dtype, rank, shape))

        raw(da2.pointer)
        tfc._check(rt, rt.tfc_model_bind_output(
            h, 0, host_y.ctypes.data))
        tfc._check(rt, rt.tfc_model_invoke(h))
        c.expect("input bound to a raw device pointer",
                 np.allclose(host_y, a2 + b * w, rtol=1e-6, atol=1e-6))
        c.error("raw pointer, NULL", lambda: raw(0), "INVALID_ARGUMENT",
                "gpu_add_model.so: input 0 'a': buffer is NULL")
        c.error("raw pointer, misaligned", lambda: raw(da2.pointer + 4),
                "INVALID_ARGUMENT", "input 0 'a': buffer is not 64-byte "
                "aligned")
        c.error("raw pointer, another dtype", lambda: raw(da2.pointer, 4),
                "MISMATCH", "input 0 'a': expected f32 [2, 3], got i32 [2, 3]")
        c.error("raw pointer, index out of range",
                lambda: raw(da2.pointer, index=2), "INVALID_ARGUMENT",
                "tfc_model_bind_input_device: index 2 out of range: model")
        half = m.to_device(np.zeros((2, 3), np.float16))
        c.error("device tensor of another dtype", lambda: m.run(half, b),
                "MISMATCH", "input 0 'a': expected f32 [2, 3], got the device "
                "tensor's f16 [2, 3]")
        wrong = tfc.DeviceTensor((3, 2), np.float32, rt)
        c.error("output tensor of another shape",
                lambda: tfc._check(rt, rt.tfc_model_bind_output_tensor(
                    h, 0, wrong._handle)),
                "MISMATCH", "output 0 'y': expected f32 [2, 3], got the "
                "device tensor's f32 [3, 2]")

    cpu = os.path.join(fixtures, "add_model.so")
    with tfc.Model(cpu, wfile, runtime=rt) as m:
        t = m.to_device(a)
        c.error("device tensor on a cpu model", lambda: m.run(t, b),
                "FAILED_PRECONDITION", "tfc_model_bind_input_tensor: model ",
                "add_model.so is a cpu model: device buffers bind to nvptx "
                "models only")
        c.error("graphs of a cpu model", lambda: m.set_cuda_graphs(False),
                "FAILED_PRECONDITION", "add_model.so is a cpu model: CUDA "
                "graphs are for nvptx models")
        with m.context() as ctx:
            c.error("device tensor in a context", lambda: ctx.run(t, b),
                    "FAILED_PRECONDITION", "input 0 'a': a context runs a cpu "
                    "model: device tensors bind to nvptx models")
    c.finish()


if __name__ == "__main__":
    main()
