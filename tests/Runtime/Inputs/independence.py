"""Models loaded from one library are independent, a library rebuilt at a
loaded path is read again, and a model used by two threads at once refuses
the second call instead of racing (runtime/README.md, "Models").

  independence.py LIBTFCRT PROJ_SO PROJ_ADD_SO WORKDIR

PROJ_SO is Inputs/proj.mlir compiled (y = x . w, a weight the CPU kernels
pack on the first run), PROJ_ADD_SO Inputs/proj-add.mlir (y = x . w + x, the
same signature). Checked:
  - two models of PROJ_SO with different weights: the second has packed
    nothing after the first ran (saving its packed weights is refused),
    and each gives x . w of its own weights;
  - while one model runs on a thread, another of the same library is
    loaded, bound, run and closed again and again on the main thread: every
    run of the first gives its first output, bit for bit;
  - the library copied over by another build (the same path): a new model
    runs the new code while the old model still runs the old;
  - two threads calling one model at once: every call either gives the
    right output or fails with FAILED_PRECONDITION naming the model as in
    use, and at least one call is refused (the threads overlap);
  - a weights file written after it was bound: the next run fails with
    FAILED_PRECONDITION naming the file, and so does a truncated one; bound
    again, the model runs on the new bytes.
"""
import os
import shutil
import sys
import threading

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "runtime", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "pylib"))
import tfc_runtime as tfc  # noqa: E402
from tfc_testing.checks import Checks  # noqa: E402
from tfc_testing.safetensors_file import write_arrays  # noqa: E402

checks = Checks()
expect = checks.expect


def write_weights(path, w):
    write_arrays(path, {"w": w.astype("<f4")})


def main():
    lib, proj, proj_add, work = sys.argv[1:5]
    rt = tfc.load_runtime(lib)
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 96, 384)).astype(np.float32)
    wa = rng.standard_normal((1, 384, 384)).astype(np.float32)
    wb = rng.standard_normal((1, 384, 384)).astype(np.float32)
    pa, pb = os.path.join(work, "a.safetensors"), os.path.join(work, "b.safetensors")
    write_weights(pa, wa)
    write_weights(pb, wb)
    ref_a = (x.astype(np.float64) @ wa.astype(np.float64))
    ref_b = (x.astype(np.float64) @ wb.astype(np.float64))

    def close_to(y, ref):
        return np.max(np.abs(y - ref)) <= 1e-3 * np.max(np.abs(ref))

    # Two models of one library, sequentially.
    a = tfc.Model(proj, weights=pa, runtime=rt)
    ya = a.run(x)[0]
    b = tfc.Model(proj, weights=pb, runtime=rt)
    checks.refused("second model of the library has packed nothing yet",
                   lambda: b.save_packed_weights(os.path.join(work,
                                                              "b.packed")),
                   tfc.Error, lambda e: e.code == "FAILED_PRECONDITION" and
                   "packed no weights" in str(e))
    yb = b.run(x)[0]
    expect("model a gives x . wa", close_to(ya, ref_a))
    expect("model b gives x . wb", close_to(yb, ref_b))
    expect("model a again, after b", np.array_equal(a.run(x)[0], ya))
    b.close()

    # One model runs on a thread while another of the library comes and
    # goes on this one.
    wrong, runs, stop = [0], [0], threading.Event()

    def run_a():
        while not stop.is_set() or runs[0] < 20:
            if not np.array_equal(a.run(x)[0], ya):
                wrong[0] += 1
            runs[0] += 1

    t = threading.Thread(target=run_a)
    t.start()
    cycles_right = 0
    for _ in range(12):
        with tfc.Model(proj, weights=pb, runtime=rt) as m:
            cycles_right += np.array_equal(m.run(x)[0], yb)
            m.bind_weights(pb)
    stop.set()
    t.join()
    expect("%d runs of a beside 12 loads of b: %d wrong" % (runs[0], wrong[0]),
           wrong[0] == 0)
    expect("the 12 models b gave x . wb", cycles_right == 12)

    # The library rebuilt at the same path: here, replaced by another
    # build of the same signature (proj-add).
    local = os.path.join(work, "model.so")
    shutil.copyfile(proj, local)
    old = tfc.Model(local, weights=pa, runtime=rt)
    y_old = old.run(x)[0]
    shutil.copyfile(proj_add, local + ".new")
    os.replace(local + ".new", local)
    new = tfc.Model(local, weights=pa, runtime=rt)
    y_new = new.run(x)[0]
    expect("a model of the rebuilt library runs the new code",
           close_to(y_new, ref_a + x))
    expect("the old model still runs the old code",
           np.array_equal(old.run(x)[0], y_old))
    old.close()
    new.close()

    # One model, two threads at once.
    refused, bad, right = [0], [0], [0]
    barrier = threading.Barrier(2)

    def hammer():
        barrier.wait()
        for _ in range(25):
            try:
                y = a.run(x)[0]
                if np.array_equal(y, ya):
                    right[0] += 1
                else:
                    bad[0] += 1
            except tfc.Error as e:
                if e.code == "FAILED_PRECONDITION" and "in use by another" in str(e):
                    refused[0] += 1
                else:
                    print("unexpected error: %s" % e)
                    bad[0] += 1

    threads = [threading.Thread(target=hammer) for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    expect("two threads on one model: %d right, %d refused, %d wrong" %
           (right[0], refused[0], bad[0]),
           bad[0] == 0 and refused[0] > 0 and right[0] + refused[0] == 50)
    a.close()

    # The weights file changed after it was bound.
    pc = os.path.join(work, "c.safetensors")
    write_weights(pc, wa)
    c = tfc.Model(proj, weights=pc, runtime=rt)
    yc = c.run(x)[0]
    write_weights(pc, wb)  # same size, other bytes
    checks.refused("rewritten weights file", lambda: c.run(x), tfc.Error,
                   lambda e: e.code == "FAILED_PRECONDITION" and
                   pc in str(e) and "changed after it was bound" in str(e)
                   and "\n" not in str(e),
                   "run after the weights file was rewritten")
    c.bind_weights(pc)
    expect("bound again: x . wb", close_to(c.run(x)[0], ref_b))
    with open(pc, "r+b") as f:
        f.truncate(1000)
    checks.refused("truncated weights file", lambda: c.run(x), tfc.Error,
                   lambda e: e.code == "FAILED_PRECONDITION" and
                   "now 1000 bytes" in str(e),
                   "run after the weights file was truncated")
    c.close()
    expect("a third model of wa gives model a's output", np.array_equal(yc, ya))

    print("%d failed" % checks.failed)
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
