"""tfc: compile Transformer models ahead of time and run them from Python.

    import tfc

    m = tfc.compile("all-MiniLM-L6-v2/", batch=4, seq_len=128)  # tfc.Model
    emb, = m.run(input_ids=ids, attention_mask=mask)   # numpy in and out
    with m.context() as c:                             # one per thread
        emb, = c.run(ids, mask)
    m = tfc.Model("model.so", weights="model.safetensors")  # a built library
    g = tfc.Generator("gpt2/", max_length=64)          # generate() as
    ids = g.generate(prompt, max_new_tokens=20, num_beams=4)  # transformers'

Inputs are numpy arrays, DLPack tensors (torch CPU tensors, read without a
copy) or lists; outputs are numpy arrays (torch.from_dlpack(out) shares
them). Pure Python on ctypes and numpy: the runtime library (libtfcrt.so)
and tfc-compile come from the tfc build tree, found as tfc.locate() says:
$TFC_RUNTIME_LIB / $TFC_COMPILE, else the build tree recorded when the
package was installed, else the system's search paths.
"""

from . import runtime
from ._locate import locate
from .compiler import CompileError, compile
from .generation import Generator
from .runtime import (Context, Error, Model, TensorInfo, aligned_empty,
                      allocator_stats, as_aligned, bf16_to_float32,
                      float32_to_bf16, load_runtime, set_threads,
                      trim_allocator)

__version__ = "0.1.0"

__all__ = ["CompileError", "Context", "Error", "Generator", "Model",
           "TensorInfo",
           "aligned_empty", "allocator_stats", "as_aligned",
           "bf16_to_float32", "compile", "float32_to_bf16", "load_runtime",
           "locate", "runtime", "set_threads", "trim_allocator"]
