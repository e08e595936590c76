"""A model of many arguments for many-args.test.

  many-args.py gen DIR N          DIR/many-args.mlir: @main of N arguments
                                  a0 .. a<N-1> (tensor<4xf32>) returning y,
                                  the sum of every 100th argument and the
                                  last; DIR/in/a<i>.npy: [i, i + 0.25,
                                  i + 0.5, i + 0.75] for each
  many-args.py run DIR N TFC_RUN MODEL
                                  runs MODEL on those inputs and prints
                                  "many-args: OK" if y is that sum (exact:
                                  every partial sum is a multiple of 0.25
                                  well below 2^22), else what differs
"""
import os
import subprocess
import sys

import numpy as np


def summed(n):
    return sorted(set(range(0, n, 100)) | {n - 1})


def value(i):
    return np.array([i, i + 0.25, i + 0.5, i + 0.75], dtype=np.float32)


def gen(out, n):
    t = "tensor<4xf32>"
    lines = ["func.func @main(" + ", ".join(
        f'%a{i}: {t} {{tfc.name = "a{i}"}}' for i in range(n)) +
        f') -> ({t} {{tfc.name = "y"}}) {{']
    used = summed(n)
    acc = f"%a{used[0]}"
    for k, i in enumerate(used[1:]):
        lines.append(f"  %s{k} = tosa.add {acc}, %a{i} : ({t}, {t}) -> {t}")
        acc = f"%s{k}"
    lines.append(f"  return {acc} : {t}")
    lines.append("}")
    with open(os.path.join(out, "many-args.mlir"), "w") as f:
        f.write("\n".join(lines) + "\n")
    os.makedirs(os.path.join(out, "in"), exist_ok=True)
    for i in range(n):
        np.save(os.path.join(out, "in", f"a{i}.npy"), value(i))


def run(out, n, tfc_run, model):
    args = [tfc_run, model]
    for i in range(n):
        args += ["--input", os.path.join(out, "in", f"a{i}.npy")]
    y_path = os.path.join(out, "y.npy")
    args += ["--output", y_path]
    subprocess.run(args, check=True)
    y = np.load(y_path)
    expected = sum(value(i) for i in summed(n))
    if y.shape == expected.shape and np.array_equal(y, expected):
        print("many-args: OK")
    else:
        print(f"many-args: FAIL: y = {y}, expected {expected}")


if __name__ == "__main__":
    if sys.argv[1] == "gen":
        gen(sys.argv[2], int(sys.argv[3]))
    else:
        run(sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5])
