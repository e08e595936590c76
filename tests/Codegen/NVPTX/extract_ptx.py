"""Writes the PTX of every gpu.binary in an MLIR file (gpu-module-to-binary
with format=isa) to OUT_DIR/<module>.ptx.

usage: extract_ptx.py FILE.mlir OUT_DIR
"""

import os
import re
import sys

BINARY = re.compile(r'gpu\.binary @(\w+)\s+\[#gpu\.object<.*?assembly = '
                    r'"((?:[^"\\]|\\.)*)"')


def main():
    text = open(sys.argv[1]).read()
    out_dir = sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    count = 0
    for name, blob in BINARY.findall(text):
        ptx = re.sub(r"\\([0-9A-Fa-f]{2})",
                     lambda m: chr(int(m.group(1), 16)), blob)
        with open(os.path.join(out_dir, name + ".ptx"), "w") as f:
            f.write(ptx)
        count += 1
    print("extracted %d PTX modules" % count)


if __name__ == "__main__":
    main()
