"""Checks the Python API (runtime/python/tfc_runtime.py) on the fixture
models and one compiled model: numerics against numpy on fresh random
inputs, inputs by position and by name, a model built for several lengths
at every length (lengths_model; Inputs/lengths.py computes what it must
return), bf16 bits, timing, and every error: one line per check ("ok" or
"FAIL"), then the counts; exits 1 on a failure.

usage: python_api_check.py LIBTFCRT FIXTURES WORKDIR [BINDIR [SEED]]
  BINDIR: where tfc-compile is, for the end-to-end check on a tiny LLaMA
  built for lengths 4 and 8 (skipped without it)
  $TFC_CUDA_DRIVER set: gpu_add_model runs on that driver too
"""
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "runtime", "python"))
# After this directory: Integration/CPU has a lengths.py of its own.
sys.path.append(os.path.join(HERE, "..", "..", "Integration", "CPU"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "pylib"))
import tfc_runtime as tfc  # noqa: E402
import lengths  # noqa: E402  (Inputs/lengths.py, lengths_model's reference)
import batches  # noqa: E402  (Inputs/batches.py, batches_model's reference)
from tfc_testing.safetensors_file import write_arrays  # noqa: E402


class Checks:
    def __init__(self, seed):
        self.seed, self.passed, self.failed = seed, 0, []

    def expect(self, label, ok):
        print("%s %s" % ("ok  " if ok else "FAIL", label))
        if ok:
            self.passed += 1
        else:
            self.failed.append(label)

    def error(self, label, fn, code, *parts):
        """`fn()` raises tfc.Error of `code` whose message holds `parts`."""
        try:
            fn()
            self.expect("%s: no error" % label, False)
        except tfc.Error as e:
            self.expect("%s: %s %s" % (label, e.code, e),
                        e.code == code and all(p in str(e) for p in parts)
                        and "\n" not in str(e))

    def finish(self):
        for label in self.failed:
            print("FAIL (seed %d) %s" % (self.seed, label))
        print("%d passed, %d failed" % (self.passed, len(self.failed)))
        sys.exit(1 if self.failed else 0)


def check_add(c, rng, rt, fixtures, work):
    """add_model: y = a + b * w, f32 [2, 3]."""
    path = os.path.join(fixtures, "add_model.so")
    w = rng.standard_normal((2, 3)).astype(np.float32)
    wfile = os.path.join(work, "w.safetensors")
    write_arrays(wfile, {"w": w}, {"format": "pt"})
    with tfc.Model(path, weights=wfile, runtime=rt) as m:
        c.expect("add: signature", [(t.name, t.dtype, t.shape, t.length_axis)
                                    for t in m.inputs + m.weights + m.outputs]
                 == [("a", np.float32, (2, 3), None),
                     ("b", np.float32, (2, 3), None),
                     ("w", np.float32, (2, 3), None),
                     ("y", np.float32, (2, 3), None)])
        c.expect("add: target cpu, one shape", (m.target, m.lengths, m.length)
                 == ("cpu", (), None))
        a, b = (rng.standard_normal((2, 3)).astype(np.float32)
                for _ in range(2))
        ref = a + b * w
        (y,) = m.run(a, b)
        c.expect("add: y = a + b * w", np.allclose(y, ref, rtol=1e-6,
                                                   atol=1e-6))
        (by_name,) = m.run(b=b, a=a)
        (mixed,) = m.run(a, b=b)
        c.expect("add: inputs by name and mixed give the same y",
                 np.array_equal(by_name, y) and np.array_equal(mixed, y))
        # A later run writes new arrays: the earlier results stay.
        a2, b2 = a + 1, b * 2
        (y2,) = m.run(a2, b2)
        c.expect("add: a later run leaves the earlier outputs",
                 np.array_equal(y, by_name) and not np.shares_memory(y, y2)
                 and np.allclose(y2, a2 + b2 * w, rtol=1e-6, atol=1e-6))
        # Strided, big-endian and list inputs are copied in as values.
        (t,) = m.run(np.asfortranarray(a), b.astype(">f4"))
        (lst,) = m.run(a.tolist(), b)
        c.expect("add: Fortran-order, big-endian and list inputs",
                 np.array_equal(t, y) and np.array_equal(lst, y))
        # Weights bound again: the model sees the new ones.
        write_arrays(wfile, {"w": 2 * w}, {"format": "pt"})
        m.bind_weights(wfile)
        (y3,) = m.run(a, b)
        c.expect("add: weights bound again", np.allclose(
            y3, a + b * (2 * w), rtol=1e-6, atol=1e-6))
        ms = m.time(a, b, warmup=2, runs=5)
        c.expect("add: time() gives 5 positive floats: %d" % len(ms),
                 len(ms) == 5 and all(isinstance(x, float) and x > 0
                                      for x in ms))

        c.error("add: too many inputs", lambda: m.run(a, b, b),
                "INVALID_ARGUMENT", "takes 2 inputs (a, b), got 3")
        c.error("add: a missing input", lambda: m.run(a), "INVALID_ARGUMENT",
                "missing input 1 'b'")
        c.error("add: an unknown name", lambda: m.run(a, b, c=b),
                "INVALID_ARGUMENT", "no input 'c' (its inputs: a, b)")
        c.error("add: an input by position and by name",
                lambda: m.run(a, b, a=a), "INVALID_ARGUMENT",
                "input 0 'a' given both by position and by name")
        c.error("add: the wrong dtype", lambda: m.run(a, b.astype(np.int64)),
                "MISMATCH", "input 1 'b': expected f32 [2, 3], got i64 [2, 3]")
        c.error("add: the wrong shape", lambda: m.run(a.T, b), "MISMATCH",
                "input 0 'a': expected f32 [2, 3], got f32 [3, 2]")
        c.error("add: a type the runtime does not take",
                lambda: m.run(a, b.astype(np.complex64)), "MISMATCH",
                "input 1 'b'", "complex64")
        c.error("add: an unconvertible list",
                lambda: m.run(a, [["x"] * 3] * 2),
                "MISMATCH", "input 1 'b': cannot convert to float32")
        c.error("add: time() with 0 runs", lambda: m.time(a, b, runs=0),
                "INVALID_ARGUMENT", "")
    c.error("add: a run after close()", lambda: m.run(a, b),
            "FAILED_PRECONDITION", "is closed")
    m.close()  # again: nothing
    unbound = tfc.Model(path, runtime=rt)
    c.error("add: a run without weights", lambda: unbound.run(a, b),
            "FAILED_PRECONDITION", "")
    del unbound


def check_gpu_add(c, rng, rt, fixtures, work):
    """gpu_add_model, add_model for target nvptx, on the driver that
    $TFC_CUDA_DRIVER names (the tests' fake one): the same host arrays."""
    w = rng.standard_normal((2, 3)).astype(np.float32)
    wfile = os.path.join(work, "gpu_w.safetensors")
    write_arrays(wfile, {"w": w}, {"format": "pt"})
    with tfc.Model(os.path.join(fixtures, "gpu_add_model.so"), wfile,
                   runtime=rt) as m:
        a, b = (rng.standard_normal((2, 3)).astype(np.float32)
                for _ in range(2))
        (y,) = m.run(a, b=b)
        ms = m.time(a, b, runs=4)
        c.expect("gpu add: target %s, y = a + b * w, 4 timed runs" %
                 m.target, m.target == "nvptx" and len(ms) == 4 and
                 np.allclose(y, a + b * w, rtol=1e-6, atol=1e-6))
        before = tfc.allocator_stats(device=True, runtime=rt)
        m.run(a, b)
        after = tfc.allocator_stats(device=True, runtime=rt)
        # The run replays the CUDA graph of the first: its temporaries are
        # the graph's (tests/Runtime/gpu-alloc.test has the cache).
        c.expect("gpu add: a later run replays its graph, allocating "
                 "nothing (%d requests, %d fresh bytes)" %
                 (after["alloc_calls"] - before["alloc_calls"],
                  after["fresh_bytes"] - before["fresh_bytes"]),
                 after["alloc_calls"] == before["alloc_calls"] and
                 after["fresh_bytes"] == before["fresh_bytes"] and
                 m.cuda_graph_stats()["replays"] > 0)
    tfc.trim_allocator(device=True, runtime=rt)
    trimmed = tfc.allocator_stats(device=True, runtime=rt)
    c.expect("gpu add: trimmed, the device cache holds %d bytes" %
             trimmed["cached_bytes"], trimmed["cached_bytes"] == 0 and
             trimmed["cached_blocks"] == 0 and trimmed["live_blocks"] == 0)


def check_types(c, rng, rt, fixtures):
    """types_model: n64 = 2 n (i32 -> i64), hc = h (bf16 bits), nm = !m."""
    m = tfc.Model(os.path.join(fixtures, "types_model.so"), runtime=rt)
    c.expect("types: dtypes", [t.dtype for t in m.inputs + m.outputs] ==
             [np.int32, "bf16", np.bool_, np.int64, "bf16", np.bool_])
    n = rng.integers(-1000, 1000, 4).astype(np.int32)
    h = rng.standard_normal(2).astype(np.float32)
    mask = rng.integers(0, 2, 3).astype(np.bool_)
    n64, hc, nm = m.run(n, tfc.float32_to_bf16(h), mask)
    c.expect("types: n64 = 2 n in i64", n64.dtype == np.int64 and
             np.array_equal(n64, 2 * n.astype(np.int64)))
    c.expect("types: bf16 comes back as uint16 bits, within bf16 roundoff",
             hc.dtype == np.uint16 and np.allclose(
                 tfc.bf16_to_float32(hc), h, rtol=2.0**-8, atol=0))
    c.expect("types: nm = !m", nm.dtype == np.bool_ and
             np.array_equal(nm, ~mask))
    # Lists convert to the input's dtype (bf16: rounded from f32).
    n64, hc, nm = m.run(n.tolist(), [1.0, -2.5], mask.tolist())
    c.expect("types: list inputs", np.array_equal(n64, 2 * n) and
             tfc.bf16_to_float32(hc).tolist() == [1.0, -2.5] and
             np.array_equal(nm, ~mask))
    c.error("types: floats for an i32 input",
            lambda: m.run(n.astype(np.float32), hc, mask), "MISMATCH",
            "input 0 'n': expected i32 [4], got f32 [4]")
    c.error("types: a float list for an i32 input",
            lambda: m.run([0.5, 1, 2, 3], hc, mask), "MISMATCH",
            "input 0 'n': cannot convert to int32")
    c.error("types: f32 for a bf16 input", lambda: m.run(n, h, mask),
            "MISMATCH", "input 1 'h': expected bf16 [2], got f32 [2]")
    # bf16 conversions: round to nearest even, NaN and infinities kept.
    x = np.array([1 + 2.0**-8, 1 + 3 * 2.0**-8, np.inf, -np.inf, np.nan,
                  3.4e38], np.float32)
    got = tfc.bf16_to_float32(tfc.float32_to_bf16(x))
    c.expect("bf16: round to nearest even, inf, NaN, overflow: %s" %
             got.tolist(),
             got[:4].tolist() == [1.0, 1 + 4 * 2.0**-8, np.inf, -np.inf]
             and np.isnan(got[4]) and got[5] == np.inf)


def check_lengths(c, rng, rt, fixtures, work):
    """lengths_model, built for 2, 4 and 8, at every length from 1 to 8 and
    back: the length taken off the inputs, outputs as lengths.py computes
    them (info: the variant that ran)."""
    m = tfc.Model(os.path.join(fixtures, "lengths_model.so"), runtime=rt)
    c.expect("lengths: built (2, 4, 8), now 8", (m.lengths, m.length) ==
             ((2, 4, 8), 8))
    c.expect("lengths: sequence axes", [t.length_axis for t in m.inputs] ==
             [1, 1, None] and [t.length_axis for t in m.outputs] ==
             [1, None, None] and m.inputs[0].bounds == (0, 1000))
    for n in (1, 2, 3, 4, 5, 6, 7, 8, 3):
        d = os.path.join(work, "l%d" % n)
        os.makedirs(d, exist_ok=True)
        lengths.make(d, n, int(rng.integers(1 << 30)))
        ids, mask, scale = (np.load(os.path.join(d, name + ".npy"))
                            for name in ("ids", "mask", "scale"))
        # Weights stay bound across lengths; these are bound anew each time
        # because lengths.check reads the ones in its directory.
        m.bind_weights(os.path.join(d, "w.safetensors"))
        try:
            out = m.run(mask=mask, ids=ids, scale=scale)
        except tfc.Error as e:
            c.expect("lengths: length %d: %s" % (n, e), False)
            continue
        for name, x in zip(("y", "z", "info"), out):
            np.save(os.path.join(d, name + ".npy"), x)
        built = min(b for b in m.lengths if b >= n)
        try:  # prints its line, or exits 1 after the difference
            lengths.check(d, n, built)
            ok = True
        except SystemExit:
            ok = False
        c.expect("lengths: length %d runs as %d, set from the inputs (now "
                 "%s)" % (n, built, m.length), ok and m.length == n and
                 m.inputs[1].shape == (2, 3 + n))
    ms = m.time(ids, mask, scale, runs=3)
    c.expect("lengths: time() at length 3 gives 3 positive floats",
             len(ms) == 3 and min(ms) > 0)

    mask5 = np.zeros((2, 8), np.float32)
    c.error("lengths: inputs of different lengths",
            lambda: m.run(ids, mask5, scale), "INVALID_ARGUMENT",
            "inputs of different lengths: input 0 'ids' has length 3 "
            "(i64 [2, 3]), input 1 'mask' length 5 (f32 [2, 8])")
    ids9, mask9 = (rng.integers(1, 1000, (2, 9)),
                   np.zeros((2, 12), np.float32))
    c.error("lengths: longer than the longest",
            lambda: m.run(ids9, mask9, scale), "INVALID_ARGUMENT",
            "length 9 is longer than the longest it was built for, 8 "
            "(input 0 'ids' is i64 [2, 9])")
    c.error("lengths: no tokens",
            lambda: m.run(ids[:, :0], mask[:, :3], scale), "INVALID_ARGUMENT",
            "length 0 is less than 1")
    bad = ids.copy()
    bad[1, 2] = 1000
    c.error("lengths: an id outside its bounds",
            lambda: m.run(bad, mask, scale),
            "INVALID_ARGUMENT", "input 0 'ids' holds 1000 at [1, 2], outside "
            "[0, 1000)")
    c.error("lengths: set_length(9)", lambda: m.set_length(9),
            "INVALID_ARGUMENT", "longer than the longest")
    m.set_length(2)
    c.expect("lengths: set_length(2)", m.length == 2 and
             m.outputs[0].shape == (2, 2, 4))
    m.close()


def check_batches(c, rng, rt, fixtures, work):
    """batches_model, built for batch sizes 1 and 3 and lengths 2 and 5, at
    batch sizes 1 to 7 (beyond 3 in slices) and lengths 1, 3 and 5: both
    taken off the inputs, outputs as batches.py computes them (info: the
    variant that ran each sequence)."""
    m = tfc.Model(os.path.join(fixtures, "batches_model.so"), runtime=rt)
    c.expect("batches: built (1, 3) x (2, 5), now 3 x 5",
             (m.batches, m.batch, m.lengths, m.length) == ((1, 3), 3, (2, 5),
                                                           5))
    c.expect("batches: batch axes", [t.batch_axis for t in m.inputs] ==
             [0, 0, 1] and [t.batch_axis for t in m.outputs] == [0, 0, 1, 0]
             and [t.length_axis for t in m.inputs] == [1, 1, 2])
    for b, n in ((1, 1), (2, 3), (3, 5), (4, 5), (5, 1), (7, 3), (6, 5)):
        d = os.path.join(work, "b%d_%d" % (b, n))
        os.makedirs(d, exist_ok=True)
        batches.make(d, b, n, int(rng.integers(1 << 30)))
        ids, mask, kv = (np.load(os.path.join(d, name + ".npy"))
                         for name in ("ids", "mask", "kv"))
        m.bind_weights(os.path.join(d, "w.safetensors"))
        try:
            out = m.run(ids, mask, kv=kv)
        except tfc.Error as e:
            c.expect("batches: batch %d, length %d: %s" % (b, n, e), False)
            continue
        for name, x in zip(("y", "z", "kv2", "info"), out):
            np.save(os.path.join(d, name + ".npy"), x)
        try:  # prints its line, or exits 1 after the difference
            batches.check(d, b, n, poisoned=False)
            ok = True
        except SystemExit:
            ok = False
        c.expect("batches: batch %d, length %d set from the inputs (now %s, "
                 "%s)" % (b, n, m.batch, m.length),
                 ok and (m.batch, m.length) == (b, n) and
                 m.inputs[2].shape == (2, 2 * b, n))
    c.error("batches: inputs of different batch sizes",
            lambda: m.run(ids, mask[:2], kv), "INVALID_ARGUMENT",
            "inputs of different batch sizes: input 0 'ids' has batch size 6 "
            "(i64 [6, 5]), input 1 'mask' batch size 2 (f32 [2, 8])")
    c.error("batches: set_batch(0)", lambda: m.set_batch(0),
            "INVALID_ARGUMENT", "batch 0 is less than 1")
    m.set_batch(2)
    c.expect("batches: set_batch(2)", m.batch == 2 and
             m.outputs[3].shape == (2, 3))
    m.close()


def check_load_errors(c, rt, lib_path, fixtures, work):
    add = os.path.join(fixtures, "add_model.so")
    c.error("a missing weights file",
            lambda: tfc.Model(add, weights=os.path.join(work, "none.st"),
                              runtime=rt), "NOT_FOUND",
            "none.st: No such file or directory")
    c.error("a missing model", lambda: tfc.Model(os.path.join(work, "no.so"),
                                                 runtime=rt),
            "NOT_FOUND", "no.so: No such file or directory")
    c.error("a library that is not a model",
            lambda: tfc.Model(os.path.join(fixtures, "not_model.so"),
                              runtime=rt), "BAD_FORMAT",
            "not a tfc model: ", "missing symbol tfc_model_manifest")
    text = os.path.join(work, "text.so")
    with open(text, "w") as f:
        f.write("text\n")
    c.error("a text file", lambda: tfc.Model(text, runtime=rt), "BAD_FORMAT",
            "cannot load model ")
    c.error("a manifest with invalid bounds",
            lambda: tfc.Model(os.path.join(fixtures, "bad_bounds_model.so"),
                              runtime=rt), "BAD_FORMAT",
            "manifest argument 0 'x': invalid bounds")
    c.error("a runtime that does not load",
            lambda: tfc.load_runtime(os.path.join(work, "libnone.so")),
            "NOT_FOUND", "cannot load the tfc runtime ")
    os.environ["TFC_RUNTIME_LIB"] = lib_path
    try:
        c.expect("$TFC_RUNTIME_LIB names the runtime, opened once",
                 tfc.load_runtime() is rt)
    finally:
        del os.environ["TFC_RUNTIME_LIB"]
    c.expect("set_threads(2) -> %s" % tfc.set_threads(2, runtime=rt),
             tfc.set_threads(2, runtime=rt) in (True, False))
    c.error("set_threads(0)", lambda: tfc.set_threads(0, runtime=rt),
            "INVALID_ARGUMENT", "at least 1")
    c.error("a path with a NUL byte",
            lambda: tfc.Model(os.path.join(work, "m.so\0.txt"), runtime=rt),
            "INVALID_ARGUMENT", "a path with a NUL byte")
    c.error("set_threads(2**40)", lambda: tfc.set_threads(2**40, runtime=rt),
            "INVALID_ARGUMENT", "8 per core")
    c.expect("tfc_set_num_threads(100000) is refused: %d" %
             rt.tfc_set_num_threads(100000),
             rt.tfc_set_num_threads(100000) == -1)


def check_llama(c, rng, rt, bindir, work):
    """A tiny LLaMA compiled for lengths 4 and 8, run at 3, 4 and 6 (a batch
    row padded) against the float64 reference of tests/Integration/CPU."""
    import llama
    from tfc_testing.arrays import random_tokens
    model = os.path.join(work, "llama")
    w = llama.write_model(model, rng, llama.CFG)
    lib = os.path.join(work, "llama.so")
    subprocess.run([os.path.join(bindir, "tfc-compile"), "--hf", model,
                    "--batch", "2", "--seq-len", "4,8", "-o", lib],
                   check=True, stderr=subprocess.DEVNULL)
    m = tfc.Model(lib, os.path.join(model, "model.safetensors"), runtime=rt)
    for n in (3, 4, 6):
        ids, mask = random_tokens(rng, llama.CFG["vocab_size"], 2, n, n // 2)
        (out,) = m.run(input_ids=ids, attention_mask=mask)
        ref = llama.reference(llama.CFG, w, ids, mask)
        err = np.linalg.norm(out - ref) / np.linalg.norm(ref)
        c.expect("llama length %d: hidden state %s, rel.err %.1e" % (
            n, list(out.shape), err), out.shape == ref.shape and err < 1e-4)
    # The same length again: every temporary comes from the allocator's
    # cache, and some were freed and reused within the run.
    before = tfc.allocator_stats(runtime=rt)
    m.run(input_ids=ids, attention_mask=mask)
    after = tfc.allocator_stats(runtime=rt)
    calls = after["alloc_calls"] - before["alloc_calls"]
    c.expect("llama: a repeated run allocates %d temporaries, %d fresh bytes" %
             (calls, after["fresh_bytes"] - before["fresh_bytes"]),
             calls > 0 and after["fresh_bytes"] == before["fresh_bytes"] and
             after["reused_allocs"] - before["reused_allocs"] == calls)
    c.expect("llama: %d blocks live between runs" % after["live_blocks"],
             after["live_blocks"] == before["live_blocks"])
    m.close()


def main(argv):
    lib_path, fixtures, work = argv[1:4]
    bindir = argv[4] if len(argv) > 4 else None
    seed = int(argv[5]) if len(argv) > 5 else \
        np.random.SeedSequence().entropy % (2**32)
    print("seed", seed)
    rng = np.random.default_rng(seed)
    os.makedirs(work, exist_ok=True)
    c = Checks(seed)
    rt = tfc.load_runtime(lib_path)
    check_add(c, rng, rt, fixtures, work)
    if os.environ.get("TFC_CUDA_DRIVER"):
        check_gpu_add(c, rng, rt, fixtures, work)
    check_types(c, rng, rt, fixtures)
    check_lengths(c, rng, rt, fixtures, work)
    check_batches(c, rng, rt, fixtures, work)
    check_load_errors(c, rt, lib_path, fixtures, work)
    if bindir:
        check_llama(c, rng, rt, bindir, work)
    c.finish()


if __name__ == "__main__":
    main(sys.argv)
