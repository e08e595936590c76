"""ONNX's own backend node tests, compiled and run by tfc.

  backend_cases.py --bin DIR --work DIR [--skips FILE] [--write-skips]

The onnx package carries its node test cases as code: each a one-node
model with its inputs and expected outputs and the tolerances to compare
them with. Every case whose node is an operator tfc translates (domain
ai.onnx) runs, except those the skip list names (`case_name: reason`, one a
line, `#` comments): cases that need what tfc does not do. The cases of one
operator set version go into one model, every name prefixed with the case's
own, so that one tfc-compile and one tfc-run cover them all. A model that
does not import or compile is built case by case to name the cases at
fault.

Each output must match its expected value as numpy.testing.assert_allclose
would with the case's rtol and atol (NaN where NaN is expected), integer
and bool outputs exactly. Prints

  backend: N run, N passed, N skipped (backend-skips.txt)

and exits non-zero if any case fails or the skip list names a case that is
not selected.

--write-skips runs every selected case, skipped or not, and rewrites the
skip list with the cases that fail, under a heading of the kind of tfc's
error (CATEGORIES; "what tfc does not translate" else): each keeps the
list's reason where that is of the same kind, else quotes the error.
"""

import argparse
import os
import re
import subprocess
import sys
import warnings

import ml_dtypes
import numpy as np
import onnx
from onnx import helper, numpy_helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "..", "pylib"))
from tfc_testing import tfc_run  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
SKIPS = os.path.join(HERE, "backend-skips.txt")

def opset_of(case):
    return max(o.version for o in case.model.opset_import
               if o.domain in ("", "ai.onnx"))


def selected_cases(args):
    """The cases of one node of an operator tfc translates."""
    from onnx.backend.test.case.node import collect_testcases
    translated = set(tool(args, "tfc-import", "--onnx-operators")
                     .stdout.split())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases(None)
    out = []
    for c in cases:
        nodes = c.model.graph.node
        if (len(nodes) == 1 and nodes[0].op_type in translated
                and nodes[0].domain in ("", "ai.onnx")):
            out.append(c)
    return sorted(out, key=lambda c: c.name)


# (pattern in tfc's error, the kind of reason) for --write-skips.
CATEGORIES = [
    (r"element type|float64|of int\d+ tensors|cast to data type",
     "element type tfc does not compute in"),
    (r"known when|must be (a )?constant",
     "runtime input that tfc needs known when it compiles"),
    (r"outputs are not supported", "optional outputs tfc does not produce"),
    (r"is not supported: tfc translates its versions",
     "operator version tfc does not translate"),
    (r"not a tensor", "sequence input"),
    (r"holds -\d+ at", "negative indices in a runtime input (tfc-run takes "
     "indices in [0, n))"),
    (r"_bf16: out\d+: Not equal to tolerance rtol=0.001",
     "bf16 results a bf16 rounding from the reference's (the case's rtol "
     "1e-3 is finer than bf16's 2^-8)"),
    (r"tensor<0x", "an empty tensor as an output (internal error: a "
     "zero-element constant)"),
]
UNCATEGORIZED = "what tfc does not translate"


def short_error(err):
    """tfc's error without the tool, the file and the case's prefixes."""
    err = re.sub(r"^tfc-(import|compile|run): ", "", err)
    err = re.sub(r"^\S+\.onnx: ", "", err)
    err = re.sub(r"node '[^']*' ", "", err)
    return re.sub(r"'test_\w+?__(\w+)'", r"'\1'", err)


def write_skips(path, reasons):
    groups = {}
    for name, reason in reasons.items():
        groups.setdefault(reason.split(" (\"", 1)[0], []).append(name)
    with open(path, "w") as f:
        f.write("# ONNX backend node cases (backend_cases.py) that tfc does "
                "not run, and why:\n# each reason quotes the error "
                "tfc-import, tfc-compile or tfc-run gives on the case.\n"
                "# one line a case, `case_name: reason`.\n")
        for group in sorted(groups):
            f.write(f"\n# {group}\n")
            for name in sorted(groups[group]):
                f.write(f"{name}: {reasons[name]}\n")


def rewrite_skips(args, cases, skips):
    """Runs every case until none fails; writes the failures' reasons."""
    failed = {}
    while True:
        groups = {}
        for c in cases:
            if c.name not in failed:
                groups.setdefault(opset_of(c), []).append(c)
        bad = {}
        for opset in sorted(groups):
            bad.update(run_group(args, groups[opset], opset))
        if not bad:
            break
        if not set(bad) - set(failed) or any(n.startswith("opset ")
                                             for n in bad):
            sys.exit(f"backend: cannot tell the failing cases apart: {bad}")
        failed.update(bad)
    reasons = {}
    for name, err in failed.items():
        err = short_error(err)
        kind = next((k for p, k in CATEGORIES
                     if re.search(p, f"{name}: {err}")), UNCATEGORIZED)
        # The list's reason, where of the same kind, is kept as written.
        if skips.get(name, "").startswith(kind + " ("):
            reasons[name] = skips[name]
        else:
            reasons[name] = f'{kind} ("{err}")'
    write_skips(args.skips, reasons)
    print(f"backend: {len(cases) - len(failed)} pass, {len(failed)} written "
          f"to {os.path.basename(args.skips)}")


def read_skips(path):
    skips = {}
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                name, _, reason = line.partition(":")
                skips[name.strip()] = reason.strip()
    return skips


def renamed(case):
    """The case's graph with every name prefixed by the case's name."""
    g = onnx.GraphProto()
    g.CopyFrom(case.model.graph)
    p = case.name + "__"

    def ren(name):
        return p + name if name else name
    for n in g.node:
        n.name = p + (n.name or "node")
        n.input[:] = [ren(x) for x in n.input]
        n.output[:] = [ren(x) for x in n.output]
    for coll in (g.input, g.output, g.value_info, g.initializer):
        for v in coll:
            v.name = ren(v.name)
    return g


def combine(cases, opset):
    graphs = [renamed(c) for c in cases]
    g = helper.make_graph(
        [n for x in graphs for n in x.node], f"backend_opset{opset}",
        [i for x in graphs for i in x.input],
        [o for x in graphs for o in x.output],
        [t for x in graphs for t in x.initializer],
        value_info=[v for x in graphs for v in x.value_info])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = max(c.model.ir_version for c in cases)
    return m


def tool(args, name, *argv):
    return subprocess.run([os.path.join(args.bin, name), *argv],
                          capture_output=True, text=True)


def first_error(stderr):
    lines = stderr.strip().splitlines()
    for line in lines:
        if "error:" in line:
            return line.split("error:", 1)[1].strip()
    return lines[-1] if lines else "no message"


def tfc_error(args, step, model, path, *argv):
    """tfc-import's or tfc-compile's error on MODEL, None if it takes it."""
    onnx.save(model, path)
    r = tool(args, step, path, *argv)
    return f"{step}: {first_error(r.stderr)}" if r.returncode else None


def case_errors(args, cases, step, *argv):
    """STEP's error for each case it refuses, given the case on its own."""
    errors = {}
    for c in cases:
        base = os.path.join(args.work, c.name)
        err = tfc_error(args, step, c.model, base + ".onnx", *argv,
                        base + ".out")
        if err:
            errors[c.name] = err
    return errors


def as_array(value):
    """A case's value as numpy (some cases store TensorProtos)."""
    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    return np.asarray(value)


def to_tfc(value):
    """bf16 as tfc-run reads it: its bits, uint16."""
    value = as_array(value)
    return value.view(np.uint16) if value.dtype == ml_dtypes.bfloat16 \
        else value


def mismatch(got, want, rtol, atol):
    if want.dtype == ml_dtypes.bfloat16 and got.dtype == np.uint16:
        got = got.view(ml_dtypes.bfloat16).astype(np.float32)
        want = want.astype(np.float32)
    if got.shape != want.shape:
        return f"shape {got.shape}, expected {want.shape}"
    if want.dtype.kind in "biu":
        if got.dtype.kind not in "biu" or not np.array_equal(got, want):
            return f"differs: {got!r} vs {want!r}"
        return None
    try:
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol,
                                   equal_nan=True)
    except AssertionError as e:
        return " ".join(str(e).split())[:300]
    return None


def run_group(args, cases, opset):
    """Runs the cases of one operator set; returns the failures."""
    model = combine(cases, opset)
    path = os.path.join(args.work, f"opset{opset}.onnx")
    lib = os.path.join(args.work, f"opset{opset}.so")
    # A model that does not build is built case by case to name the cases
    # at fault (importing takes ~50 ms a case, compiling ~1 s).
    for step, argv in (("tfc-import", ["-o", os.devnull]),
                       ("tfc-compile", ["-o", lib])):
        err = tfc_error(args, step, model, path, *argv)
        if err:
            bad = case_errors(args, cases, step, "-o")
            return bad or {f"opset {opset}": err}
    inputs, expected = [], []
    for c in cases:
        (case_inputs, case_outputs), = c.data_sets
        inputs += [to_tfc(v) for v in case_inputs]
        expected += [(c, k, as_array(v)) for k, v in enumerate(case_outputs)]
    results, error = tfc_run.run(
        args.bin, lib, inputs, len(expected), args.work,
        weights=path if model.graph.initializer else None, stem=f"opset{opset}")
    if error:
        # tfc-run names the input it refuses: the case is its prefix.
        err = "tfc-run: " + first_error(error)
        at = [c.name for c in cases if f"'{c.name}__" in err]
        return {(at[0] if at else f"opset {opset}"): err}
    bad = {}
    for got, (c, k, want) in zip(results, expected):
        why = mismatch(got, want, c.rtol, c.atol)
        if why:
            bad[c.name] = f"out{k}: {why}"
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--skips", default=SKIPS)
    ap.add_argument("--write-skips", action="store_true")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    cases = selected_cases(args)
    skips = read_skips(args.skips)
    if args.write_skips:
        rewrite_skips(args, cases, skips)
        return
    names = {c.name for c in cases}
    stale = sorted(set(skips) - names)
    run = [c for c in cases if c.name not in skips]
    groups = {}
    for c in run:
        groups.setdefault(opset_of(c), []).append(c)
    bad = {}
    for opset in sorted(groups):
        bad.update(run_group(args, groups[opset], opset))
    passed = len([c for c in run if c.name not in bad])
    print(f"backend: {len(run)} run, {passed} passed, "
          f"{len(cases) - len(run)} skipped ({os.path.basename(args.skips)})")
    for name in sorted(bad):
        print(f"  FAIL {name}: {bad[name]}")
    for name in stale:
        print(f"  stale skip-list entry: {name} is not a selected case")
    if bad or stale:
        sys.exit(1)


if __name__ == "__main__":
    main()
