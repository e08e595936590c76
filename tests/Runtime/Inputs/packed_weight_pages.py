"""A weight that only the matmul kernel reads leaves the process's resident
memory as soon as the kernel has packed it, during the first run
(runtime/src/common/WeightPages.cpp; abi.h, tfc_runtime_weight_packed);
TFC_KEEP_WEIGHT_PAGES=1 keeps the weights file's pages.

An ONNX graph built here with onnx: LAYERS blocks of Relu(MatMul(h, w) + b),
HIDDEN 1031 wide, on x [1, SEQ, HIDDEN]; each w (4 MiB of f32) at an offset
1 past a multiple of 4 of the external data file (bound in place: only the
kernel reads it), each b at a multiple of 64. One process per setting
(the switch unset, then set) binds the file, resets its peak resident size
(/proc/self/clear_refs) and runs the model twice. Checked:
- the first run's peak growth of resident memory without the switch is
  below the growth with it by more than half the w's bytes (with it the
  run holds every w's file pages and every packed copy at its end;
  without, the file pages of one w at a time);
- after the first run no page wholly inside a w is mapped without the
  switch, and all of them are with it (/proc/self/pagemap's present bit);
- the runs give the same output, bit for bit, in both settings, within
  1e-5 (norm-wise relative error) of float64 numpy.
  packed_weight_pages.py LIBTFCRT BINDIR WORKDIR
"""
import ctypes
import json
import os
import struct
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "runtime", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "pylib"))
import tfc_runtime as tfc  # noqa: E402
from tfc_testing.arrays import relative_error  # noqa: E402
from tfc_testing.checks import Checks  # noqa: E402
from tfc_testing.onnx_files import write_external  # noqa: E402

LAYERS, SEQ, HIDDEN = 6, 5, 1031
PAGE = os.sysconf("SC_PAGE_SIZE")


def make_weights(rng):
    w = {}
    for i in range(LAYERS):
        w["w%d" % i] = (rng.standard_normal((HIDDEN, HIDDEN)) /
                        np.sqrt(HIDDEN)).astype(np.float32)
        w["b%d" % i] = (rng.standard_normal(HIDDEN) * 0.1).astype(np.float32)
    return w


def write_model(path, weights):
    """path and path.data: each w at 1 + a multiple of 4, each b at a
    multiple of 64."""
    h, nodes = "x", []
    for i in range(LAYERS):
        out = "y" if i == LAYERS - 1 else "h%d" % i
        nodes += [helper.make_node("MatMul", [h, "w%d" % i], ["m%d" % i]),
                  helper.make_node("Add", ["m%d" % i, "b%d" % i],
                                   ["a%d" % i]),
                  helper.make_node("Relu", ["a%d" % i], [out])]
        h = out
    shape = [1, SEQ, HIDDEN]
    write_external(
        path, nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
        weights, lambda name, at: ((at + 3) // 4 * 4 + 1 if name[0] == "w"
                                   else (at + 63) // 64 * 64))


def reference(w, x):
    h = x.astype(np.float64)
    for i in range(LAYERS):
        h = np.maximum(h @ w["w%d" % i].astype(np.float64) + w["b%d" % i], 0)
    return h


def status_kib(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise SystemExit("FAIL: /proc/self/status lacks " + field)


def present_pages(address, nbytes):
    """(mapped, total) pages wholly inside [address, address + nbytes)."""
    first = (address + PAGE - 1) // PAGE
    last = (address + nbytes) // PAGE
    with open("/proc/self/pagemap", "rb") as f:
        f.seek(first * 8)
        data = f.read((last - first) * 8)
    entries = struct.unpack("<%dQ" % (last - first), data)
    return sum(e >> 63 for e in entries), last - first


def child(runtime, lib, onnx_path, x_path):
    """Runs the model twice in this process; prints what it saw as JSON."""
    rt = tfc.load_runtime(runtime)
    rt.tfc_model_weight_data.restype = ctypes.c_void_p
    rt.tfc_model_weight_data.argtypes = [ctypes.c_void_p, ctypes.c_int32]
    rt.tfc_model_find_weight.restype = ctypes.c_int32
    rt.tfc_model_find_weight.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    x = np.load(x_path)
    with tfc.Model(lib, weights=onnx_path, runtime=rt) as m:
        ranges = [(rt.tfc_model_weight_data(
            m._handle, rt.tfc_model_find_weight(m._handle, b"w%d" % i)),
            HIDDEN * HIDDEN * 4) for i in range(LAYERS)]
        before = status_kib("VmRSS")
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # VmHWM back to VmRSS
        first = m.run(x)
        growth = status_kib("VmHWM") - before
        pages = [present_pages(a, n) for a, n in ranges]
        second = m.run(x)
    np.save(x_path + ".out.npy", first)
    print(json.dumps({
        "growth_kib": growth, "mapped": sum(p[0] for p in pages),
        "pages": sum(p[1] for p in pages),
        "same": bool(np.array_equal(first, second))}))


def main():
    runtime, bindir, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(20261205)
    weights = make_weights(rng)
    x = rng.standard_normal((1, SEQ, HIDDEN)).astype(np.float32)
    onnx_path = os.path.join(work, "model.onnx")
    write_model(onnx_path, weights)
    onnx.checker.check_model(onnx_path)
    lib = os.path.join(work, "model.so")
    subprocess.run([os.path.join(bindir, "tfc-compile"), onnx_path, "-o", lib],
                   check=True, stdout=subprocess.DEVNULL)
    want = reference(weights, x)
    checks = Checks()
    expect = checks.expect
    seen, outs = {}, {}
    for keep in (False, True):
        env = {k: v for k, v in os.environ.items()
               if k != "TFC_KEEP_WEIGHT_PAGES"}
        if keep:
            env["TFC_KEEP_WEIGHT_PAGES"] = "1"
        x_path = os.path.join(work, "x_keep%d.npy" % keep)
        np.save(x_path, x)
        done = subprocess.run([sys.executable, __file__, "--child", runtime,
                               lib, onnx_path, x_path], env=env,
                              capture_output=True, text=True)
        if done.returncode:
            raise SystemExit("FAIL: the child process (keep %d): %s"
                             % (keep, done.stderr))
        seen[keep] = json.loads(done.stdout.splitlines()[-1])
        outs[keep] = np.load(x_path + ".out.npy")
        print("keep %d: %s" % (keep, seen[keep]))
    w_kib = LAYERS * HIDDEN * HIDDEN * 4 // 1024
    drop, keep = seen[False]["growth_kib"], seen[True]["growth_kib"]
    expect("the first run's peak resident growth: %d KiB, with "
           "TFC_KEEP_WEIGHT_PAGES=1 %d KiB: less by over half the "
           "%d KiB of packed-only weights" % (drop, keep, w_kib),
           drop < keep - w_kib // 2)
    expect("after the first run, %d of the packed-only weights' %d pages "
           "mapped (none)" % (seen[False]["mapped"], seen[False]["pages"]),
           seen[False]["pages"] > 0 and seen[False]["mapped"] == 0)
    expect("with TFC_KEEP_WEIGHT_PAGES=1, %d of %d mapped (all)"
           % (seen[True]["mapped"], seen[True]["pages"]),
           seen[True]["pages"] > 0 and
           seen[True]["mapped"] == seen[True]["pages"])
    for k in (False, True):
        expect("keep %d: the second run repeats the first" % k,
               seen[k]["same"])
        err = relative_error(outs[k], want)
        expect("keep %d: output against float64: rel.err %.1e (bound 1e-5)"
               % (k, err), err < 1e-5)
    expect("both settings give the same output",
           np.array_equal(outs[False], outs[True]))
    print("%d failed" % checks.failed)
    sys.exit(1 if checks.failed else 0)


if __name__ == "__main__":
    if sys.argv[1] == "--child":
        child(*sys.argv[2:6])
    else:
        main()
