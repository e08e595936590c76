"""Changes a compiled model library's manifest in place, as a damaged or
tampered file would: sets the result count (num_results, abi.h's
tfc_manifest) to COUNT.
  patch_manifest.py LIB COUNT"""
import struct
import sys

path, count = sys.argv[1], int(sys.argv[2])
data = bytearray(open(path, "rb").read())
# magic "TFCM" and ABI version 6, then entry and target (two pointers),
# num_args, num_results.
at = data.find(b"TFCM" + struct.pack("<I", 6))
if at < 0 or data.find(b"TFCM" + struct.pack("<I", 6), at + 1) >= 0:
    sys.exit("patch_manifest.py: no single manifest in %s" % path)
struct.pack_into("<i", data, at + 28, count)
open(path, "wb").write(bytes(data))
