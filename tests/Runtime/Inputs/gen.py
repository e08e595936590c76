"""Writes and prints the files the tfc-run tests use.

  gen.py npy PATH DTYPE SHAPE [FILL]   SHAPE like 2x3 ("" for a scalar);
                                       FILL: arange (default), ones, or a number
  gen.py st PATH NAME:DTYPE:SHAPE[:FILL] ...   a safetensors file
  gen.py head PATH N                   keep the first N bytes of PATH
  gen.py fortran PATH                  a Fortran-order f32 2x3 array
  gen.py print PATH                    "dtype [shape]: v0 v1 ..." of a .npy
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "pylib"))
from tfc_testing import safetensors_file  # noqa: E402

ST_DTYPES = {"f32": "F32", "f16": "F16", "bf16": "BF16", "i64": "I64",
             "i32": "I32", "bool": "BOOL", "f64": "F64"}
NP_DTYPES = {"f32": "<f4", "f16": "<f2", "bf16": "<u2", "i64": "<i8",
             "i32": "<i4", "bool": "|b1", "f64": "<f8", "u2": "<u2"}


def shape_of(text):
    return tuple(int(d) for d in text.split("x")) if text else ()


def make(dtype, shape, fill):
    n = int(np.prod(shape, dtype=np.int64))
    if fill == "arange":
        values = np.arange(n)
    elif fill == "ones":
        values = np.ones(n)
    else:
        values = np.full(n, float(fill))
    if dtype == "bool":
        return (values.reshape(shape) % 2).astype(np.bool_)
    if dtype == "bf16":
        bits = values.astype(np.float32).view(np.uint32) >> 16
        return bits.astype("<u2").reshape(shape)
    return values.astype(NP_DTYPES[dtype]).reshape(shape)


def main(argv):
    cmd = argv[1]
    if cmd == "npy":
        fill = argv[5] if len(argv) > 5 else "arange"
        np.save(argv[2], make(argv[3], shape_of(argv[4]), fill))
    elif cmd == "st":
        entries = []
        for spec in argv[3:]:
            parts = spec.split(":")
            name, dtype, shape = parts[0], parts[1], shape_of(parts[2])
            fill = parts[3] if len(parts) > 3 else "arange"
            entries.append((name, ST_DTYPES[dtype], shape,
                            make(dtype, shape, fill).tobytes()))
        safetensors_file.write(argv[2], entries)
    elif cmd == "head":
        with open(argv[2], "rb") as f:
            data = f.read()
        with open(argv[2], "wb") as f:
            f.write(data[: int(argv[3])])
    elif cmd == "fortran":
        np.save(argv[2], np.asfortranarray(np.ones((2, 3), np.float32)))
    elif cmd == "print":
        a = np.load(argv[2])
        shape = "[" + ", ".join(str(d) for d in a.shape) + "]"
        values = " ".join(str(v) for v in a.reshape(-1).tolist())
        print(f"{a.dtype.str} {shape}: {values}")
    else:
        sys.exit(f"gen.py: unknown command {cmd}")


if __name__ == "__main__":
    main(sys.argv)
