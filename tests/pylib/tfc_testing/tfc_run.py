"""Running a compiled model with tfc-run on arrays."""

import os
import subprocess

import numpy as np


def command(tool, library, inputs, outputs, path, weights=None):
    """The tfc-run command (TOOL) for LIBRARY on INPUTS (arrays in the
    model's input order, written as .npy at path("in<k>.npy")), weights
    bound from WEIGHTS when given, and the paths of its OUTPUTS outputs
    (path("out<k>.npy"))."""
    argv = [tool, library]
    if weights:
        argv += ["--weights", weights]
    for k, value in enumerate(inputs):
        p = path(f"in{k}.npy")
        np.save(p, np.asarray(value))
        argv += ["--input", p]
    outs = [path(f"out{k}.npy") for k in range(outputs)]
    for p in outs:
        argv += ["--output", p]
    return argv, outs


def run(bin_dir, library, inputs, outputs, work, weights=None, stem="run"):
    """Runs LIBRARY with BIN_DIR's tfc-run as command() says, its files in
    WORK named after STEM. Returns (the output arrays, None), or (None,
    tfc-run's stderr) when it fails."""
    argv, outs = command(os.path.join(bin_dir, "tfc-run"), library, inputs,
                         outputs, lambda name: os.path.join(
                             work, f"{stem}_{name}"), weights)
    ran = subprocess.run(argv, capture_output=True, text=True)
    if ran.returncode:
        return None, ran.stderr
    return [np.load(p) for p in outs], None
