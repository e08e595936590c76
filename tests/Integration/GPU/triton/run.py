"""Runs the Triton kernels of kernels/ on the PTX interpreter and checks
every output against float64 (generate.py says why and how they were made).

usage: run.py PTX_CUDA_SO [--seed N] [--only SUBSTRING] [--heads BH]
              [--seq S] [--kernels DIR]

PTX_CUDA_SO is the fake CUDA driver with the interpreter
(build/runtime/fixtures/ptx_cuda.so); the kernels are launched through its
driver API as Triton's launcher would (a tensor descriptor argument is a
128-byte CUtensorMap by value, then its shape and strides; two scratch
pointers last). Inputs are fresh random normals (the seed is printed);
outputs start as NaN, so an element a kernel does not write fails.
Matmuls (f32 results) must be within 1e-5 of float64 in norm; attention
(f16 or bf16 results) within 2e-3 of it, plus for bf16 what rounding the
float64 result to bf16 costs alone (about 1.7e-3). Attention runs on
BH = 3 heads of S = 150 (--heads, --seq); with PTXEMU_STATS=1 the
interpreter prints each launch's instruction mix. --kernels reads another
directory that generate.py's format describes (kernels.json and the gzipped
PTX).
"""
import argparse
import ctypes as C
import gzip
import json
import os
import random
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "pylib"))
from tfc_testing import reference  # noqa: E402
from tfc_testing.arrays import bf16_to_f32, f32_to_bf16  # noqa: E402

CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8


class Driver:
    def __init__(self, path):
        self.lib = C.CDLL(path)
        self.check(self.lib.cuInit(0), "cuInit")
        dev = C.c_int()
        self.check(self.lib.cuDeviceGet(C.byref(dev), 0), "cuDeviceGet")
        ctx = C.c_void_p()
        self.check(self.lib.cuDevicePrimaryCtxRetain(C.byref(ctx), dev),
                   "cuDevicePrimaryCtxRetain")
        self.check(self.lib.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
        self.keep = []

    def check(self, rc, what):
        if rc != 0:
            name = C.c_char_p()
            self.lib.cuGetErrorName(rc, C.byref(name))
            raise RuntimeError("%s: %s" % (what, name.value.decode()))

    def alloc(self, array):
        """A device copy of `array`: its address (c_uint64)."""
        ptr = C.c_uint64()
        self.check(self.lib.cuMemAlloc_v2(C.byref(ptr), array.nbytes),
                   "cuMemAlloc")
        self.copy(ptr.value, array.ctypes.data, array.nbytes)
        return ptr

    def copy(self, dst, src, nbytes):
        self.check(self.lib.cuMemcpyAsync(C.c_uint64(dst), C.c_uint64(src),
                                          C.c_size_t(nbytes), None),
                   "cuMemcpyAsync")
        self.check(self.lib.cuStreamSynchronize(None), "cuStreamSynchronize")

    def read(self, ptr, like):
        out = np.empty_like(like)
        self.copy(out.ctypes.data, ptr.value, out.nbytes)
        return out

    def tensor_map(self, ptr, shape, meta):
        """A CUtensorMap as Triton's launcher encodes it: row-major `shape`
        in elements, box `block_size`, the kernel's swizzle."""
        raw = (C.c_uint8 * 192)()
        self.keep.append(raw)
        m = (C.c_uint8 * 128).from_buffer(raw, (-C.addressof(raw)) % 64)
        rank, eb = len(shape), meta["elem_size"]
        strides, s = [], eb
        for n in reversed(shape[1:]):
            s *= n
            strides.append(s)
        self.check(self.lib.cuTensorMapEncodeTiled(
            m, meta["elem_type"], rank, C.c_void_p(ptr.value),
            (C.c_uint64 * rank)(*reversed(shape)),
            (C.c_uint64 * max(rank - 1, 1))(*strides),
            (C.c_uint32 * rank)(*reversed(meta["block_size"])),
            (C.c_uint32 * rank)(*([1] * rank)), 0, meta["swizzle"], 2, 0),
            "cuTensorMapEncodeTiled")
        return m

    def launch(self, case, grid, args):
        module, function = C.c_void_p(), C.c_void_p()
        with gzip.open(os.path.join(self.kernels,
                                    case["name"] + ".ptx.gz")) as f:
            ptx = f.read() + b"\0"
        self.check(self.lib.cuModuleLoadData(C.byref(module), ptx),
                   "cuModuleLoadData")
        self.check(self.lib.cuModuleGetFunction(C.byref(function), module,
                                                case["entry"].encode()),
                   "cuModuleGetFunction")
        shared = case["shared"]
        if shared > 48 * 1024:
            self.check(self.lib.cuFuncSetAttribute(
                function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                shared), "cuFuncSetAttribute")
        scratch = C.c_uint64(0)
        args = args + [scratch, scratch]
        params = (C.c_void_p * len(args))(
            *[C.cast(C.byref(a), C.c_void_p) for a in args])
        self.check(self.lib.cuLaunchKernel(function, *grid, case["threads"],
                                           1, 1, shared, None, params, None),
                   "cuLaunchKernel")
        self.check(self.lib.cuStreamSynchronize(None), "cuStreamSynchronize")
        self.check(self.lib.cuModuleUnload(module), "cuModuleUnload")


def to_type(x, dtype):
    """(the device array, its values in float64) of x rounded to dtype."""
    a = x.astype(np.float16) if dtype == "f16" else f32_to_bf16(x)
    return a, from_type(a, dtype)


def from_type(a, dtype):
    return (a if dtype == "f16" else bf16_to_f32(a)).astype(np.float64)


def nan_like(a):
    return np.full(a.shape, 0x7FFF if a.dtype == np.uint16 else np.nan,
                   a.dtype)


def run_matmul(drv, case, rng, *_):
    bm, bn, bk = case["BM"], case["BN"], case["BK"]
    if "shape" in case:  # generate.py --mix: whole tiles
        m, n, k = case["shape"]
    elif case["kernel"] == "matmul_tma":
        m, n, k = 100, 88, 136  # rows of 16-byte multiples, partial tiles
    elif not case["masked"]:
        m, n, k = 2 * bm, 2 * bn, 2 * bk + 64  # whole tiles, 3 or more on K
    else:
        m, n, k = 97, 75, 131
    a, a64 = to_type(rng.standard_normal((m, k)), case["dtype"])
    b, b64 = to_type(rng.standard_normal((k, n)), case["dtype"])
    c = np.full((m, n), np.nan, np.float32)
    pc = drv.alloc(c)
    grid = ((m + bm - 1) // bm, (n + bn - 1) // bn, 1)
    if case["kernel"] == "matmul_tma":
        pa, pb = drv.alloc(a), drv.alloc(b)
        da, db = case["descriptors"]
        args = [drv.tensor_map(pa, [m, k], da), C.c_int32(m), C.c_int32(k),
                C.c_int64(k), C.c_int64(1),
                drv.tensor_map(pb, [k, n], db), C.c_int32(k), C.c_int32(n),
                C.c_int64(n), C.c_int64(1),
                pc, C.c_int32(m), C.c_int32(n), C.c_int32(k)]
    else:
        bt = case["transposed_b"]
        pa, pb = drv.alloc(a), drv.alloc(np.ascontiguousarray(b.T) if bt
                                         else b)
        sbk, sbn = (1, k) if bt else (n, 1)
        args = [pa, pb, pc, C.c_int32(m), C.c_int32(n), C.c_int32(k),
                C.c_int32(sbk), C.c_int32(sbn)]
    drv.launch(case, grid, args)
    return drv.read(pc, c).astype(np.float64), a64 @ b64, 0.0


def run_attention(drv, case, rng, bh, s):
    dt, d, bm = case["dtype"], case["D"], case["BM"]
    if case.get("full_tiles"):  # the kernel checks no bounds
        s = (s + bm - 1) // bm * bm
    q, k, v = [to_type(rng.standard_normal((bh, s, d)), dt) for _ in range(3)]
    o = nan_like(q[0])
    ptrs = [drv.alloc(x[0]) for x in (q, k, v)] + [drv.alloc(o)]
    scale = 1 / np.sqrt(d)
    if case["kernel"] == "attention_tma":
        args = []
        for p, meta in zip(ptrs, case["descriptors"]):
            args += [drv.tensor_map(p, [bh, s, d], meta),
                     C.c_int32(bh), C.c_int32(s), C.c_int32(d),
                     C.c_int64(s * d), C.c_int64(d), C.c_int64(1)]
    else:
        args = list(ptrs)
    drv.launch(case, ((s + bm - 1) // bm, bh, 1),
               args + [C.c_int32(s), C.c_float(scale)])
    out = from_type(drv.read(ptrs[3], o), dt)
    ref = reference.attention(q[1][None], k[1][None], v[1][None],
                              scale=scale, causal=case["causal"])[0]
    floor = 0.0
    if dt == "bf16":
        floor = np.linalg.norm(to_type(ref, dt)[1] - ref) / np.linalg.norm(ref)
    return out, ref, floor


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("driver")
    ap.add_argument("--seed", type=int, default=random.randrange(1 << 30))
    ap.add_argument("--only", default="")
    ap.add_argument("--heads", type=int, default=3)
    ap.add_argument("--seq", type=int, default=150)
    ap.add_argument("--kernels", default=os.path.join(HERE, "kernels"))
    a = ap.parse_args()
    with open(os.path.join(a.kernels, "kernels.json")) as f:
        listing = json.load(f)
    print("seed %d; kernels of Triton %s" % (a.seed, listing["triton"]))
    drv = Driver(a.driver)
    drv.kernels = a.kernels
    rng = np.random.default_rng(a.seed)
    runs = failed = 0
    for case in listing["kernels"]:
        if a.only not in case["name"]:
            continue
        runs += 1
        try:
            run = run_matmul if "matmul" in case["kernel"] else run_attention
            out, ref, floor = run(drv, case, rng, a.heads, a.seq)
        except RuntimeError as e:
            failed += 1
            print("FAIL %s: %s" % (case["name"], e), flush=True)
            continue
        err = np.linalg.norm(out - ref) / np.linalg.norm(ref)
        bound = 1e-5 if "matmul" in case["kernel"] else floor + 2e-3
        ok = bool(np.isfinite(out).all()) and err <= bound
        failed += not ok
        print("%s %s: relative error %.2e (bound %.2e)%s" % (
            "ok  " if ok else "FAIL", case["name"], err, bound,
            "" if np.isfinite(out).all() else ", not all finite"),
            flush=True)
    print("%d kernels, %d failed" % (runs, failed))
    return 1 if failed or not runs else 0


if __name__ == "__main__":
    sys.exit(main())
