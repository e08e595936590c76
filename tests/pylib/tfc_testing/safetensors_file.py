"""safetensors files without the safetensors package: written from raw
bytes (standard library only) or from numpy arrays, read into numpy arrays
(a model directory's single file or its shards)."""

import json
import os
import struct

# safetensors dtype -> numpy dtype name (BF16 has none in numpy).
NUMPY_DTYPES = {"F64": "float64", "F32": "float32", "F16": "float16",
                "I64": "int64", "I32": "int32", "I16": "int16", "I8": "int8",
                "U8": "uint8", "BOOL": "bool"}


def write(path, entries, metadata=None):
    """A safetensors file of `entries`, (name, dtype, shape, raw bytes) in
    file order; a `metadata` dict becomes its __metadata__ entry."""
    header, blobs, offset = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in entries:
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for raw in blobs:
            f.write(raw)


def write_arrays(path, arrays, metadata=None):
    """A safetensors file of {name: numpy array}, each in its own dtype."""
    import numpy as np
    names = {np.dtype(v): k for k, v in NUMPY_DTYPES.items()}
    write(path, [(name, names[a.dtype], a.shape,
                  np.ascontiguousarray(a).tobytes())
                 for name, a in arrays.items()], metadata)


def read(path, bf16=None):
    """{name: numpy array} of a safetensors file, or of a model directory's
    model.safetensors (or the shards its model.safetensors.index.json
    names). BF16 tensors are an error unless `bf16` gives the numpy dtype
    to read their bits as."""
    import numpy as np
    files = [path]
    if os.path.isdir(path):
        files = [os.path.join(path, "model.safetensors")]
        index = os.path.join(path, "model.safetensors.index.json")
        if not os.path.exists(files[0]) and os.path.exists(index):
            with open(index) as f:
                shards = json.load(f)["weight_map"].values()
            files = [os.path.join(path, s) for s in sorted(set(shards))]
    out = {}
    for name in files:
        with open(name, "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(n))
            data = f.read()
        for key, t in header.items():
            if key == "__metadata__":
                continue
            dtype = NUMPY_DTYPES.get(t["dtype"]) or (
                bf16 if t["dtype"] == "BF16" else None)
            if dtype is None:
                raise ValueError("%s: tensor %s has dtype %s" %
                                 (name, key, t["dtype"]))
            begin, end = t["data_offsets"]
            out[key] = np.frombuffer(data[begin:end], dtype=dtype).reshape(
                t["shape"])
    return out
