"""tfc_device_tensor_copy_2d (api.h) over a fake CUDA driver: strided
device-to-device copies on random tensors of odd sizes (a step's new keys
into a cache slot, a block of a matrix into another, one row, no rows)
against numpy slicing, the driver's calls counted (fake_cuda.h: one
cuMemcpy2DAsync_v2 per copy, or one cuMemcpyAsync per row on a driver
without it), and every error as one line with its code.

usage: gpu_copy_2d.py LIBTFCRT WORKDIR 2d|rows|real [SEED]
  $TFC_CUDA_DRIVER: fake_cuda.so (2d) or fake_cuda_old.so (rows); real:
  the GPU's own driver, the same copies and errors but nothing counted
  and no driver failure
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gpu_device_tensors import start  # noqa: E402
from python_api_check import tfc  # noqa: E402


def main():
    lib, work, mode = sys.argv[1:4]
    if mode == "real":
        os.environ["TFC_CUDA_DRIVER"] = "libcuda.so.1"
    c, rng, rt, _, counters = start(
        lib, work, sys.argv[4] if len(sys.argv) > 4 else None)
    if mode == "real":
        counters = lambda: None  # noqa: E731

    def tensor(shape, dtype):
        a = np.asarray(rng.standard_normal(shape) * 100).astype(dtype)
        t = tfc.DeviceTensor(shape, dtype, rt)
        t.copy_from_host(a)
        return t, a

    def case(label, dst_spec, src_spec, width, height, offset, pitch,
             src_offset, src_pitch, place):
        """Copies with copy_2d_from; `place(want, src)` does it in numpy."""
        dst, want = tensor(*dst_spec)
        src, s = tensor(*src_spec)
        before = counters()
        dst.copy_2d_from(src, width, height, offset, pitch, src_offset,
                         src_pitch)
        after = counters()
        place(want, s)
        calls = expected = ()
        if mode != "real":
            calls = (after.memcpys_2d - before.memcpys_2d,
                     after.memcpys - before.memcpys)
            expected = (0, height) if mode == "rows" or height == 1 else \
                (int(height > 0), 0)
        c.expect("%s: %d rows of %d bytes as numpy's slicing, the source "
                 "unchanged%s" % (label, height, width, calls and
                                  " (%d 2-D copies, %d copies)" % calls),
                 np.array_equal(dst.numpy(), want) and
                 np.array_equal(src.numpy(), s) and calls == expected)
        return dst, src

    # A step's new keys [N, heads, 1, D] into slot 4 of [N, heads, 7, D]:
    # one row per (row, head).
    n, heads, slots, d = 3, 5, 7, 9

    def slot4(w, s):
        w[:, :, 4] = s[:, :, 0]
    case("new keys into cache slot 4 (f32)", ((n, heads, slots, d),
                                              np.float32),
         ((n, heads, 1, d), np.float32), d * 4, n * heads, 4 * d * 4,
         slots * d * 4, 0, d * 4, slot4)

    def slots56(w, s):
        w[:, :, 5:7] = s
    case("a two-token chunk into slots 5..6 (f16)",
         ((n, heads, slots, d), np.float16), ((n, heads, 2, d), np.float16),
         2 * d * 2, n * heads, 5 * d * 2, slots * d * 2, 0, 2 * d * 2,
         slots56)

    def block(w, s):
        w[0:4, 3:8] = s[1:5, 2:7]
    case("a 4 x 5 block of a [7, 9] matrix into a [6, 10] one (f64)",
         ((6, 10), np.float64), ((7, 9), np.float64), 5 * 8, 4, 3 * 8,
         10 * 8, (1 * 9 + 2) * 8, 9 * 8, block)

    def one_row(w, s):
        w[2, 1:12] = s[0, 3:14]
    case("one row, no pitches (i8)", ((5, 13), np.int8), ((1, 17), np.int8),
         11, 1, 2 * 13 + 1, 0, 3, 0, one_row)
    case("no rows", ((4, 4), np.float32), ((4, 4), np.float32), 16, 0, 64,
         0, 0, 0, lambda w, s: None)

    # Every error, on the C API itself (NULL tensors included).
    dst, _ = tensor((4, 6), np.float32)  # 96 bytes
    src, _ = tensor((5, 3), np.float32)  # 60 bytes
    fn = rt.tfc_device_tensor_copy_2d

    def copy(width, height, offset=0, pitch=24, src_offset=0, src_pitch=12,
             to=dst, frm=src):
        tfc._check(rt, fn(to and to._handle, offset, pitch,
                          frm and frm._handle, src_offset, src_pitch, width,
                          height))

    name = "tfc_device_tensor_copy_2d: "
    c.error("NULL destination", lambda: copy(12, 2, to=None),
            "INVALID_ARGUMENT", name + "the destination tensor is NULL")
    c.error("NULL source", lambda: copy(12, 2, frm=None), "INVALID_ARGUMENT",
            name + "the source tensor is NULL")
    c.error("width beyond the destination pitch",
            lambda: copy(12, 2, pitch=8), "INVALID_ARGUMENT",
            name + "destination rows of 12 bytes, pitch 8: the width "
            "exceeds the pitch")
    c.error("width beyond the source pitch",
            lambda: copy(16, 2, src_pitch=12), "INVALID_ARGUMENT",
            name + "source rows of 16 bytes, pitch 12: the width exceeds "
            "the pitch")
    c.error("destination rows past the end",
            lambda: copy(12, 4, offset=28), "INVALID_ARGUMENT",
            name + "destination rows of 12 bytes, pitch 24, 4 rows from "
            "byte 28 lie outside the 96-byte device tensor")
    c.error("source rows past the end",
            lambda: copy(12, 4, src_offset=16, src_pitch=12),
            "INVALID_ARGUMENT", name + "source rows of 12 bytes, pitch 12, "
            "4 rows from byte 16 lie outside the 60-byte device tensor")
    c.error("destination offset past the end",
            lambda: copy(4, 1, offset=97), "INVALID_ARGUMENT",
            name + "destination rows of 4 bytes, pitch 24, 1 row from byte "
            "97 lie outside the 96-byte device tensor")
    c.error("source offset past the end, no rows",
            lambda: copy(4, 0, src_offset=61), "INVALID_ARGUMENT",
            name + "bytes [61, 61 + 0) lie outside the 60-byte device tensor")
    c.error("rows times pitch overflowing",
            lambda: copy(4, 2 ** 62, pitch=2 ** 3), "INVALID_ARGUMENT",
            name + "destination rows of 4 bytes, pitch 8, %d rows from byte "
            "0 lie outside the 96-byte device tensor" % 2 ** 62)
    if mode != "real":
        call, error = ("cuMemcpy2DAsync_v2", "CUDA_ERROR_INVALID_VALUE") if \
            mode == "2d" else ("cuMemcpyAsync", "CUDA_ERROR_ILLEGAL_ADDRESS")
        os.environ["FAKE_CUDA_FAIL"] = call  # read by the fake on each call
        c.error("the driver's %s failing" % call, lambda: copy(12, 2),
                "INTERNAL", name + call + " failed: " + error)
        del os.environ["FAKE_CUDA_FAIL"]
    c.finish()


if __name__ == "__main__":
    main()
