"""Reduces an input that crashes tfc-fuzz-onnx-import, model by model.

  python3 compiler/fuzz/reduce_onnx_crash.py FUZZER CRASH...

libFuzzer's -minimize_crash drops bytes, which seldom leaves a valid
protobuf. This drops whole nodes, initializers, graph inputs and outputs,
node attributes and node inputs, one at a time, keeping each removal after
which FUZZER (the fuzz target, built with the bug) still stops with the
same sanitizer report (its first line, addresses removed). Writes
crash-<sha1>.onnx of the result into the current folder and prints its
report.
"""

import hashlib
import os
import re
import subprocess
import sys
import tempfile

import onnx


def report(fuzzer, data):
    """The first line of the sanitizer's report on `data`, or None."""
    with tempfile.NamedTemporaryFile(suffix=".onnx", delete=False) as f:
        f.write(data)
    env = dict(os.environ, UBSAN_OPTIONS="halt_on_error=1")
    run = subprocess.run([fuzzer, f.name], capture_output=True, text=True,
                         env=env, timeout=120)
    os.unlink(f.name)
    for line in run.stderr.splitlines():
        if re.search(r"runtime error|ERROR: (Address|Leak)Sanitizer|"
                     r"ERROR: libFuzzer", line):
            return re.sub(r"==\d+==|0x[0-9a-f]+", "", line)
    return None


def removals(m):
    """Each single removal, as (field, node index, element index), last
    first."""
    out = []
    for field in ("node", "initializer", "input", "output", "value_info"):
        out += [(field, None, i) for i in range(len(getattr(m.graph, field)))]
    for k, n in enumerate(m.graph.node):
        out += [("attribute", k, i) for i in range(len(n.attribute))]
        out += [("node_input", k, i) for i in range(len(n.input))]
    return out[::-1]


def without(m, removal):
    field, k, i = removal
    t = onnx.ModelProto()
    t.CopyFrom(m)
    if field == "attribute":
        del t.graph.node[k].attribute[i]
    elif field == "node_input":
        del t.graph.node[k].input[i]
    else:
        del getattr(t.graph, field)[i]
    return t


def reduce(fuzzer, data):
    want = report(fuzzer, data)
    if not want:
        sys.exit("the input does not crash the fuzz target")
    m = onnx.ModelProto()
    m.ParseFromString(data)
    changed = True
    while changed:
        changed = False
        for removal in removals(m):
            try:
                t = without(m, removal)
            except IndexError:  # an earlier removal shortened the list
                continue
            if report(fuzzer, t.SerializeToString()) == want:
                m, changed = t, True
    return m.SerializeToString(), want


def main(fuzzer, paths):
    for path in paths:
        with open(path, "rb") as f:
            data, want = reduce(fuzzer, f.read())
        name = "crash-" + hashlib.sha1(data).hexdigest() + ".onnx"
        with open(name, "wb") as f:
            f.write(data)
        print(f"{path}: {len(data)} bytes in {name}: {want}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
