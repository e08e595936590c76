"""Checks the installed tfc package (tests/Python/package.test).

  package_check.py WORKDIR BUILD_DIR PROJ_MLIR

Run with the python of a venv that `pip install python/` made (WORKDIR/venv),
whose package recorded BUILD_DIR. PROJ_MLIR is tests/Runtime/Inputs/proj.mlir:
y = x . w, x [1, 96, 384], w [1, 384, 384] a weight. Checked:
  - tfc is the venv's, and finds libtfcrt.so and tfc-compile in BUILD_DIR;
    $TFC_COMPILE comes first;
  - tfc.compile (library in a temporary directory, removed at close; or
    at `output`) with weights from a safetensors file: y against float64
    numpy on random inputs;
  - inputs: a 64-byte aligned C-order array is read in place, others
    (unaligned, strided, lists) are copied, and the inputs are left as
    they were; outputs are new aligned arrays;
  - DLPack: inputs through numpy's own __dlpack__ (an object that has only
    __dlpack__ and __dlpack_device__: read in place when aligned, copied
    when strided), outputs taken by np.from_dlpack without a copy; with
    torch where it is importable (a CPU tensor read in place,
    torch.from_dlpack(output) sharing its memory), said as SKIP otherwise;
  - two Contexts of the model, one per thread, 20 runs each on inputs of
    their own: every output bit for bit the model's;
  - tfc.compile of a bad MLIR file and of a missing one: tfc.CompileError,
    a tfc.Error whose message is tfc-compile's one line and whose
    exit_code is 1.
"""
import os
import subprocess
import sys
import threading

import numpy as np

# The tests' helpers only (the tfc package is the installed one).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "pylib"))
from tfc_testing.checks import Checks  # noqa: E402
from tfc_testing.safetensors_file import write_arrays  # noqa: E402

checks = Checks()
expect = checks.expect


def write_weights(path, w):
    write_arrays(path, {"w": w.astype("<f4")})


class Exported:
    """Only the DLPack protocol, of a numpy array (as a foreign tensor)."""

    def __init__(self, array):
        self._array = array

    def __dlpack__(self, **kwargs):
        return self._array.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._array.__dlpack_device__()


def unaligned(a):
    """A C-order copy of `a` whose data is not 64-byte aligned."""
    raw = np.empty(a.nbytes + 64 + a.itemsize, np.uint8)
    start = (-raw.ctypes.data % 64) + a.itemsize
    out = raw[start:start + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out


def main():
    work, build, proj = sys.argv[1:4]
    import tfc

    venv = os.path.realpath(os.path.join(work, "venv"))
    where = os.path.realpath(tfc.__file__)
    expect("tfc %s imported from the venv: %s" % (tfc.__version__, where),
           where.startswith(venv + os.sep))
    found = tfc.locate()
    build = os.path.realpath(build)
    expect("tfc.locate(): runtime %s, compiler %s (%s)" % (
        found["runtime"][0], found["compiler"][0], found["compiler"][1]),
        os.path.realpath(found["runtime"][0]) ==
        os.path.join(build, "lib", "libtfcrt.so") and
        os.path.realpath(found["compiler"][0]) ==
        os.path.join(build, "bin", "tfc-compile") and
        "recorded" in found["compiler"][1])
    print("numpy %s" % np.__version__)

    rng = np.random.default_rng(11)
    x = rng.standard_normal((1, 96, 384)).astype(np.float32)
    w = rng.standard_normal((1, 384, 384)).astype(np.float32)
    weights = os.path.join(work, "w.safetensors")
    write_weights(weights, w)
    ref = x.astype(np.float64) @ w.astype(np.float64)

    def close_to(y, want=ref):
        return (y.shape == want.shape and y.dtype == np.float32 and
                np.max(np.abs(y - want)) <= 1e-4 * np.max(np.abs(want)))

    # $TFC_COMPILE first.
    os.environ["TFC_COMPILE"] = os.path.join(work, "no-such-tfc-compile")
    checks.refused("$TFC_COMPILE names tfc-compile",
                   lambda: tfc.compile(proj), tfc.Error,
                   lambda e: e.code == "NOT_FOUND" and
                   "no-such-tfc-compile" in str(e))
    del os.environ["TFC_COMPILE"]

    model = tfc.compile(proj, weights=weights)
    library = model.path
    y, = model.run(x)
    expect("tfc.compile: y = x . w of %s against float64 numpy "
           "(max error %.1e)" % (library, np.max(np.abs(y - ref))),
           close_to(y))
    expect("the output is a new 64-byte aligned array",
           y.flags.owndata is False and y.ctypes.data % 64 == 0 and
           y.flags.writeable)
    y_again, = model.run(x)
    expect("a second run leaves the first output (new arrays): %s" %
           (not np.shares_memory(y, y_again)),
           not np.shares_memory(y, y_again) and np.array_equal(y, y_again))

    # Inputs in place or copied.
    xa = tfc.as_aligned(x)
    kept = xa.copy()
    ya, = model.run(xa)
    expect("an aligned input is read in place (copied_inputs %s) and left "
           "as it was" % (model.copied_inputs,),
           model.copied_inputs == () and np.array_equal(ya, y) and
           np.array_equal(xa, kept) and xa.ctypes.data % 64 == 0)
    ye = tfc.aligned_empty(x.shape, np.float32)
    ye[...] = x
    yb, = model.run(x=ye)
    expect("tfc.aligned_empty: read in place, by name (copied_inputs %s)" %
           (model.copied_inputs,),
           model.copied_inputs == () and np.array_equal(yb, y))
    xu = unaligned(x)
    yu, = model.run(xu)
    expect("an unaligned input is copied (copied_inputs %s)" %
           (model.copied_inputs,),
           model.copied_inputs == ("x",) and np.array_equal(yu, y))
    xs = np.ascontiguousarray(x.transpose(0, 2, 1)).transpose(0, 2, 1)
    ys, = model.run(xs)
    expect("a strided input is copied (copied_inputs %s)" %
           (model.copied_inputs,),
           model.copied_inputs == ("x",) and np.array_equal(ys, y))
    yl, = model.run(x.tolist())
    expect("a list is converted", np.array_equal(yl, y))

    # DLPack in and out.
    yd, = model.run(Exported(xa))
    expect("DLPack input (numpy's __dlpack__), aligned: read in place "
           "(copied_inputs %s)" % (model.copied_inputs,),
           model.copied_inputs == () and np.array_equal(yd, y))
    yds, = model.run(Exported(xs))
    expect("DLPack input, strided: copied (copied_inputs %s)" %
           (model.copied_inputs,),
           model.copied_inputs == ("x",) and np.array_equal(yds, y))
    view = np.from_dlpack(yd)
    expect("np.from_dlpack(output) shares the output's memory",
           view.ctypes.data == yd.ctypes.data and np.array_equal(view, y))
    checks.refused("a DLPack f64 tensor for an f32 input is refused",
                   lambda: model.run(Exported(xa.astype(np.float64))),
                   tfc.Error,
                   lambda e: e.code == "MISMATCH" and "\n" not in str(e))
    try:
        import torch
    except ImportError:
        torch = None
    if torch is None:
        print("SKIP: torch is not importable in this venv: DLPack checked "
              "with numpy's __dlpack__ only")
    else:
        t = torch.from_numpy(x).clone()  # torch's allocator: 64-byte aligned
        yt, = model.run(t)
        expect("torch %s CPU tensor input: %s (copied_inputs %s)" % (
            torch.__version__, "read in place" if t.data_ptr() % 64 == 0
            else "unaligned, copied", model.copied_inputs),
            np.array_equal(yt, y) and model.copied_inputs ==
            (() if t.data_ptr() % 64 == 0 else ("x",)))
        tt = torch.from_dlpack(yt)
        expect("torch.from_dlpack(output) shares its memory",
               tt.data_ptr() == yt.ctypes.data and
               np.array_equal(tt.numpy(), y))

    # Contexts, one per thread.
    xs2 = [rng.standard_normal(x.shape).astype(np.float32) for _ in range(2)]
    wanted = [model.run(v)[0] for v in xs2]
    contexts = [model.context() for _ in xs2]
    wrong = [0, 0]

    def serve(i):
        for _ in range(20):
            got, = contexts[i].run(xs2[i])
            wrong[i] += not np.array_equal(got, wanted[i])

    threads = [threading.Thread(target=serve, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    expect("2 contexts on 2 threads, 20 runs each: %s wrong" % wrong,
           wrong == [0, 0] and all(close_to(
               v, v2.astype(np.float64) @ w.astype(np.float64))
               for v, v2 in zip(wanted, xs2)))
    model.close()
    expect("the library's temporary directory lives on with its contexts",
           os.path.exists(library))
    got, = contexts[0].run(xs2[0])
    expect("a context runs after its model is closed",
           np.array_equal(got, wanted[0]))
    for c in contexts:
        c.close()
    expect("closing the model and its contexts removes the temporary "
           "directory", not os.path.exists(os.path.dirname(library)))

    out = os.path.join(work, "proj.so")
    with tfc.compile(proj, out, weights=weights, threads=1) as m2:
        y2, = m2.run(x)
        expect("tfc.compile(output=%s, threads=1)" % out,
               m2.path == out and np.array_equal(y2, y))
    expect("a library at `output` stays", os.path.exists(out))

    # tfc-compile's errors.
    bad = os.path.join(work, "bad.mlir")
    with open(bad, "w") as f:
        f.write("func.func @f(%x: tensor<2xf32>) -> tensor<2xf32> {\n"
                "  %y = tosa.nonsense %x : tensor<2xf32>\n"
                "  return %y : tensor<2xf32>\n}\n")
    for path, wants in ((bad, "error:"),
                        (os.path.join(work, "missing.mlir"),
                         "cannot open input file")):
        try:
            tfc.compile(path)
            expect("tfc.compile(%s) fails" % os.path.basename(path), False)
        except tfc.Error as e:
            expect("tfc.compile(%s): %s: %s" % (
                os.path.basename(path), type(e).__name__, e),
                isinstance(e, tfc.CompileError) and e.exit_code == 1 and
                "\n" not in str(e) and "\n" not in e.message and
                wants in e.message and e.code == "COMPILE_FAILED")

    # An ONNX file: compiled, its weights bound from the file itself by
    # default; the same output as tfc-run --weights model.onnx gives.
    src = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.dirname(os.path.abspath(proj)))))
    onnx_model = os.path.join(src, "tests", "Importer", "ONNX", "Inputs",
                              "models", "seed-torchscript.onnx")
    ids = rng.integers(0, 64, (2, 8)).astype(np.int64)
    mask = np.ones((2, 8), np.int64)
    mask[1, 5:] = 0
    with tfc.compile(onnx_model, batch=2, seq_len=8) as m:
        hidden, = m.run(ids, mask)
    cli = os.path.join(work, "cli.so")
    subprocess.run([os.path.join(build, "bin", "tfc-compile"), onnx_model,
                    "--batch", "2", "--seq-len", "8", "-o", cli], check=True,
                   capture_output=True)
    for name, a in (("ids", ids), ("mask", mask)):
        np.save(os.path.join(work, name + ".npy"), a)
    subprocess.run([os.path.join(build, "bin", "tfc-run"), cli, "--weights",
                    onnx_model, "--input", os.path.join(work, "ids.npy"),
                    "--input", os.path.join(work, "mask.npy"), "--output",
                    os.path.join(work, "hidden.npy")], check=True,
                   capture_output=True)
    expect("tfc.compile of an ONNX file binds its weights from the file: "
           "as tfc-run's", np.array_equal(hidden, np.load(
               os.path.join(work, "hidden.npy"))))

    print("%d passed, %d failed" % (checks.passed, checks.failed))
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
