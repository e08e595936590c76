"""Packed weights files (tfc_model_save_packed_weights and
tfc_model_load_packed_weights, runtime/include/tfc/runtime/api.h): a CPU
model's packed (and quantized) copies of its weights, saved after a run and
read back by a later model, which then packs none of them.

A random LLaMA (hidden 256, 4 blocks, grouped heads) is compiled four
ways, so that every layout the kernels pack is saved and read back: f32
panels, bf16 pairs (--dtype=bf16: bf16 dot products where the CPU has
them), int8 panels (--quantize-weights=int8) and int4 integer-dot panels
(int4 weights, int8 activations). For each build, checked:
  - a model that loads the file gives the output of one that packed its
    own copies, bit for bit, and so does its second run;
  - the loaded copies are what it reads: with the file's packed bytes
    zeroed (its table intact), the output changes (a model that packed
    its own copies again would not see it);
  - the output matches the float64 reference on the weights (and
    activations) as the build rounds them, within the bounds of
    tests/Integration/CPU/llama.py; for the quantized builds the
    reference one step less quantized lies over 10 bounds away.
Then the errors, each a one-line status naming the file: saving before a
run, a weights file touched since, another model library, a file that is
not one, one cut short, one whose table was altered, a missing one, a
second file for the same binding, and a weight bound from a caller's
buffer since. The bf16 build binds an f32 checkpoint through conversions:
the file holds them made, and a model that loads it reads its weights from
the file's map.
  packed_weights.py LIBTFCRT BINDIR WORKDIR
"""
import ctypes
import os
import shutil
import struct
import subprocess
import sys
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "runtime", "python"))
sys.path.append(os.path.join(HERE, "..", "..", "Integration", "CPU"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "pylib"))
import tfc_runtime as tfc  # noqa: E402
import llama  # noqa: E402
from tfc_testing.arrays import (bf16_to_f32, random_tokens,  # noqa: E402
                                relative_error, rounded_weights)
from tfc_testing.checks import Checks  # noqa: E402
from tfc_testing.reference import (quantized_activations,  # noqa: E402
                                   quantized_weight)

checks = Checks()
expect = checks.expect


def expect_error(label, fn, code, text):
    try:
        fn()
    except tfc.Error as e:
        ok = e.code == code and text in str(e) and "\n" not in str(e)
        expect("%s: %s %s" % (label, e.code, e), ok)
        return
    expect("%s: no error" % label, False)


def data_offset(path):
    with open(path, "rb") as f:
        header = f.read(48)
    return struct.unpack_from("<Q", header, 16)[0]


def weight_data(rt, m, name):
    """The address of the bytes bound to weight `name` of Model `m`."""
    find, data = rt.tfc_model_find_weight, rt.tfc_model_weight_data
    find.restype, data.restype = ctypes.c_int32, ctypes.c_void_p
    find.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    data.argtypes = [ctypes.c_void_p, ctypes.c_int32]
    return data(m._handle, find(m._handle, name.encode()))


def in_map(address, path):
    """Whether `address` lies in this process's map of the file `path`."""
    path = os.path.realpath(path)
    for line in open("/proc/self/maps"):
        fields = line.split()
        if len(fields) >= 6 and fields[5] == path:
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            if lo <= (address or 0) < hi:
                return True
    return False


def main():
    runtime, bindir, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    rng = np.random.default_rng(20261204)
    model = os.path.join(work, "llama")
    cfg, w, weights = llama.write_small_model(model, rng)
    ids, mask = random_tokens(rng, cfg["vocab_size"], 1, 9)
    np.save(os.path.join(work, "ids.npy"), ids)  # for tfc-run
    np.save(os.path.join(work, "mask.npy"), mask)
    rt = tfc.load_runtime(runtime)

    def proj(rounding):
        return {n: rounding(x) if n.endswith("_proj.weight") else x
                for n, x in w.items()}

    # name: (flags, weights as the build rounds them, bound).
    builds = {
        "f32": ([], w, 1e-5),
        "bf16": (["--dtype=bf16"], rounded_weights(w, "bf16"), 10 * 2**-8),
        "int8": (["--quantize-weights=int8"],
                 proj(lambda x: quantized_weight(x, 1, 8)), 1e-4),
        "int4+int8": (["--quantize-weights=int4",
                       "--quantize-activations=int8"],
                      proj(lambda x: quantized_weight(x, 1, 4)), 1e-3),
    }
    libs = {}
    for name, (flags, wq, bound) in builds.items():
        lib = libs[name] = os.path.join(work, name + ".so")
        subprocess.run([os.path.join(bindir, "tfc-compile"), "--hf", model,
                        "--batch", "1", "--seq-len", "9", "-o", lib] + flags,
                       check=True, stdout=subprocess.DEVNULL)
        packed = os.path.join(work, name + ".packed")
        with tfc.Model(lib, weights=weights, runtime=rt) as m:
            expect_error(name + ": save before a run",
                         lambda: m.save_packed_weights(packed),
                         "FAILED_PRECONDITION", "has packed no weights yet")
            own = m.run(ids, mask)[0]
            m.save_packed_weights(packed)
        with tfc.Model(lib, weights=weights, runtime=rt) as m:
            m.load_packed_weights(packed)
            if name == "bf16":
                # The f32 checkpoint's tensors bind to the bf16 model
                # through conversions, which the file holds made: the
                # weights are its bytes, not copies converted again.
                inside = [in_map(weight_data(rt, m, n), packed)
                          for n in ("model.embed_tokens.weight",
                                    "model.norm.weight")]
                expect("bf16: the converted weights are read from the file",
                       all(inside))
            loaded = [m.run(ids, mask)[0], m.run(ids, mask)[0]]
        expect(name + ": the loaded copies give the output of the model's "
               "own, bit for bit, in both runs",
               all(np.array_equal(o, own) for o in loaded))
        zeroed = os.path.join(work, name + ".zeroed.packed")
        shutil.copy(packed, zeroed)
        with open(zeroed, "r+b") as f:
            start = data_offset(zeroed)
            f.seek(start)
            f.write(bytes(os.path.getsize(zeroed) - start))
        with tfc.Model(lib, weights=weights, runtime=rt) as m:
            m.load_packed_weights(zeroed)
            changed = m.run(ids, mask)[0]
        expect(name + ": with the packed bytes zeroed the output changes "
               "(%d of %d values)" % (np.sum(changed != own), own.size),
               not np.array_equal(changed, own))
        act = (quantized_activations
               if "--quantize-activations=int8" in flags else None)
        got = bf16_to_f32(loaded[0]) if name == "bf16" else loaded[0]
        ref = llama.reference(cfg, wq, ids, mask, act=act)
        err = relative_error(got, ref)
        expect("%s: hidden state against float64: rel.err %.1e (bound %.0e)"
               % (name, err, bound), err < bound)
        if name.startswith("int"):
            # The reference one step less quantized (the weights as they
            # are; int4 weights with the activations as they are) lies
            # farther than 10 bounds, or the check could not tell.
            finer = llama.reference(cfg, w if act is None else wq, ids, mask)
            gap = relative_error(finer, ref)
            expect("%s: one step less quantized moves the reference by "
                   "%.1e" % (name, gap), gap > 10 * bound)

    # The Python API's cache: Model(packed_weights=) writes the file after
    # the first run where it is missing, and reads it where it exists.
    cache = os.path.join(work, "cache.packed")
    if os.path.exists(cache):  # a work directory used before
        os.remove(cache)
    with tfc.Model(libs["int4+int8"], weights=weights, runtime=rt,
                   packed_weights=cache) as m:
        written = os.path.exists(cache)
        first = m.run(ids, mask)[0]
    expect("Model(packed_weights=) writes the file after the first run",
           not written and os.path.exists(cache))
    with tfc.Model(libs["int4+int8"], weights=weights, runtime=rt,
                   packed_weights=cache) as m:
        expect_error("... and a later Model has read it",
                     lambda: m.load_packed_weights(cache),
                     "FAILED_PRECONDITION", "already")
        expect("... and gives the same output",
               np.array_equal(m.run(ids, mask)[0], first))
    expect_error("packed_weights without weights",
                 lambda: tfc.Model(libs["int8"], runtime=rt,
                                   packed_weights=cache),
                 "INVALID_ARGUMENT", "goes with weights")

    lib, packed = libs["int8"], os.path.join(work, "int8.packed")
    with tfc.Model(lib, weights=weights, runtime=rt) as m:
        m.load_packed_weights(packed)
        expect_error("a second file for the same binding",
                     lambda: m.load_packed_weights(packed),
                     "FAILED_PRECONDITION", "already")
    with tfc.Model(lib, weights=weights, runtime=rt) as m:
        expect_error("another model library",
                     lambda: m.load_packed_weights(
                         os.path.join(work, "int4+int8.packed")),
                     "MISMATCH", "was saved by another model library")
        for bad, text in [("garbage", "not a packed weights file"),
                          ("short", "truncated or extended"),
                          ("table", "table damaged")]:
            path = os.path.join(work, bad + ".packed")
            data = bytearray(open(packed, "rb").read())
            if bad == "garbage":
                data = bytearray(b"not a packed file" * 8)
            elif bad == "short":
                data = data[:len(data) - 4096]
            else:
                data[60] ^= 1  # inside the table (the format string)
            open(path, "wb").write(data)
            expect_error("a file " + bad, lambda: m.load_packed_weights(path),
                         "BAD_FORMAT", text)
        expect_error("a missing file",
                     lambda: m.load_packed_weights(
                         os.path.join(work, "missing.packed")),
                     "NOT_FOUND", "No such file or directory")
    # A weight bound from a caller's buffer: the copies no longer go with
    # one file.
    with tfc.Model(lib, weights=weights, runtime=rt) as m:
        m.run(ids, mask)
        bind = rt.tfc_model_bind_weight
        bind.restype = ctypes.c_void_p
        bind.argtypes = [ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p]
        norm = np.zeros(cfg["hidden_size"] + 16, np.float32)
        start = (-norm.ctypes.data % 64) // 4  # 64-byte aligned
        norm[start:start + cfg["hidden_size"]] = w["model.norm.weight"]
        weight_data(rt, m, "model.norm.weight")  # sets the signatures
        index = rt.tfc_model_find_weight(m._handle, b"model.norm.weight")
        expect("the final norm's weight is found", index >= 0)
        status = bind(m._handle, index, norm[start:].ctypes.data)
        expect("binding it from a buffer", not status)
        expect_error("a weight bound from a buffer since",
                     lambda: m.save_packed_weights(packed),
                     "FAILED_PRECONDITION", "weights bound from a file")
    # The weights file touched since the copies were saved.
    os.utime(weights, ns=(1, 1))
    with tfc.Model(lib, weights=weights, runtime=rt) as m:
        expect_error("the weights file touched since",
                     lambda: m.load_packed_weights(packed), "MISMATCH",
                     "was packed from other weights")
    # The Python cache of other weights: a warning, packed again and
    # rewritten, then read.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with tfc.Model(libs["int4+int8"], weights=weights, runtime=rt,
                       packed_weights=cache) as m:
            before = os.path.getmtime(cache)
            m.run(ids, mask)
    expect("a stale Python cache warns (%s) and is rewritten" % (
        str(caught[0].message)[:60] if caught else "no warning"),
        len(caught) == 1 and "other weights" in str(caught[0].message)
        and os.path.getmtime(cache) != before)
    with tfc.Model(libs["int4+int8"], weights=weights, runtime=rt,
                   packed_weights=cache) as m:
        expect_error("... and read next time",
                     lambda: m.load_packed_weights(cache),
                     "FAILED_PRECONDITION", "already")
    print("%d failed" % checks.failed)
    sys.exit(1 if checks.failed else 0)


main()
