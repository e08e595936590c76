"""tfc.compile: runs tfc-compile on a model and loads the library it
writes."""

import os
import re
import subprocess
import tempfile

from . import _locate
from .runtime import Error, Model

__all__ = ["compile", "CompileError"]

_DTYPES = {"f32": "f32", "float32": "f32", "float": "f32",
           "f16": "f16", "float16": "f16", "half": "f16",
           "bf16": "bf16", "bfloat16": "bf16"}


class CompileError(Error):
    """tfc-compile failed: `message` is its one-line error, `exit_code` its
    exit status (negative: killed by that signal), `stderr` all it said,
    `command` the command line."""

    def __init__(self, message, exit_code, stderr="", command=()):
        super().__init__(message, "COMPILE_FAILED")
        self.exit_code = exit_code
        self.stderr = stderr
        self.command = list(command)

    def __str__(self):
        return "%s (tfc-compile exit code %d)" % (self.message,
                                                  self.exit_code)


def _sizes(flag, value):
    """--batch=1,8 from 8 or (1, 8)."""
    if isinstance(value, (int, str)):
        value = [value]
    return "--%s=%s" % (flag, ",".join(str(int(v)) for v in value))


def _dtype_flag(dtype):
    name = getattr(dtype, "name", None) or str(dtype)  # np.dtype, torch
    name = name.split(".")[-1].lower()  # "torch.bfloat16" -> "bfloat16"
    if name not in _DTYPES:
        raise Error("tfc.compile: dtype %r: one of f32, f16, bf16" % (dtype,))
    return "--dtype=" + _DTYPES[name]


def _one_line(stderr, exit_code):
    """tfc-compile's error as one line: the first line that says "error:"
    (an MLIR diagnostic, then the source line and a caret, or tfc-compile's
    own "tfc-compile: error: ..."), else the first line it wrote."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for line in lines:
        if re.search(r"\berror:", line):
            return line
    if lines:
        return lines[0]
    if exit_code < 0:
        return "tfc-compile was killed by signal %d" % -exit_code
    return "tfc-compile failed and wrote no message"


def compile(model, output=None, *, batch=None, seq_len=None, dtype=None,
            target="cpu", fusion=True, extra_args=(), weights=None,
            threads=None, runtime=None, load=True):
    """Compiles `model` with tfc-compile and returns it loaded, a tfc.Model.

    model: an MLIR file, an ONNX file (.onnx), or a Hugging Face model
      directory (one with config.json: compiled with --hf DIR).
    output: the library to write; by default model.so in a temporary
      directory that the returned Model keeps and removes when it is closed
      (with its contexts) or collected.
    batch, seq_len: with a Hugging Face directory, the batch size(s) and
      sequence length(s): an int or a sequence of them (--batch 1,8); with
      an ONNX file, the values of its dynamic dimensions (one each).
    dtype: with a Hugging Face directory, "f32", "f16" or "bf16" (numpy
      and torch dtype names too: "float16", torch.bfloat16).
    target: "cpu" or "nvptx". fusion: False builds the unfused graph
      (--no-fusion). threads: the model's default number of threads
      (--model-threads). extra_args: more tfc-compile flags, as strings.
    weights: the safetensors file to bind; for a Hugging Face directory its
      model.safetensors by default, for an ONNX file the file itself (its
      weights are read where they lie in it); False binds none.
    runtime: as Model's (a libtfcrt.so path or a load_runtime() library).
    load: False writes `output` and returns None, loading nothing (a
      split build joins its MPI job when loaded: every rank loads alike).

    tfc-compile is looked for as tfc.locate() says. A failure raises
    CompileError (a tfc.Error, code "COMPILE_FAILED") whose message is
    tfc-compile's one-line error and whose exit_code its exit status; what
    tfc-compile wrote on success (which fusions it made) is the returned
    model's compile_log."""
    exe, how = _locate.compiler()
    if exe is None:
        raise Error("tfc.compile: tfc-compile %s" % how, "NOT_FOUND")
    source = os.fspath(model)
    hf = os.path.isdir(source)
    cmd = [exe]
    if hf:
        cmd += ["--hf", source]
    else:
        cmd.append(source)
    if batch is not None:
        cmd.append(_sizes("batch", batch))
    if seq_len is not None:
        cmd.append(_sizes("seq-len", seq_len))
    if dtype is not None:
        cmd.append(_dtype_flag(dtype))
    if target is not None:
        cmd.append("--target=%s" % target)
    if not fusion:
        cmd.append("--no-fusion")
    if threads is not None:
        cmd.append("--model-threads=%d" % int(threads))
    cmd += [os.fspath(a) for a in extra_args]

    owned = None
    if output is None:
        owned = tempfile.TemporaryDirectory(prefix="tfc-")
        output = os.path.join(owned.name, "model.so")
    output = os.fspath(output)
    cmd += ["-o", output]
    try:
        try:
            done = subprocess.run(cmd, stdin=subprocess.DEVNULL,
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE)
        except OSError as e:
            raise Error("tfc.compile: cannot run %s (found through %s): %s"
                        % (exe, how, e.strerror or e), "NOT_FOUND") from None
        log = (done.stderr.decode(errors="replace") +
               done.stdout.decode(errors="replace"))
        if done.returncode != 0:
            raise CompileError(_one_line(log, done.returncode),
                               done.returncode, log, cmd)
        if not load:
            if owned is not None:
                owned.cleanup()
            return None
        if weights is None and hf:
            default = os.path.join(source, "model.safetensors")
            weights = default if os.path.exists(default) else None
        elif weights is None and source.endswith(".onnx"):
            weights = source
        m = Model(output, weights=weights or None, runtime=runtime)
    except BaseException:
        if owned is not None:
            owned.cleanup()
        raise
    m._owned_dir = owned
    m.compile_log = log
    return m
