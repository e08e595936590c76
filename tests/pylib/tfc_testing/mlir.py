"""MLIR text of small test functions, one op each (softmax, layer_norm,
rms_norm, a TOSA matmul), as the numerics tests and the device check
compile them (transformer.attention: attention.py); and the signatures of
the functions of a module's text. Standard library only (the device
check's prepare step imports it where numpy may be missing)."""

import re


def tensor_type(shape, dtype="f32"):
    """tensor<2x3xf32>; a rank-0 shape gives tensor<f32>."""
    return "tensor<%s>" % "x".join([str(d) for d in shape] + [dtype])


def function(args, result, body, name="main"):
    """func.func @NAME(%a: T, ...) -> RESULT: `args` are (name, type)
    pairs, `body` its lines (without indentation); it returns the value the
    last line defines."""
    ret = body[-1].split("=", 1)[0].strip()
    lines = ["func.func @%s(%s) -> %s {" % (
        name, ", ".join("%%%s: %s" % a for a in args), result)]
    lines += ["  " + line for line in body]
    lines += ["  return %s : %s" % (ret, result), "}", ""]
    return "\n".join(lines)


def softmax(shape, dim, dtype="f32"):
    t = tensor_type(shape, dtype)
    return function([("x", t)], t, [
        "%%y = transformer.softmax %%x {dimension = %d : i64} : %s -> %s"
        % (dim, t, t)])


def layer_norm(shape, eps, dtype="f32"):
    """x, gamma, beta -> LayerNorm over the last axis (eps: an f32
    attribute)."""
    t, tn = tensor_type(shape, dtype), tensor_type(shape[-1:], dtype)
    return function([("x", t), ("g", tn), ("b", tn)], t, [
        "%%y = transformer.layer_norm %%x, %%g, %%b {epsilon = %.9e : f32}"
        " : %s, %s, %s -> %s" % (eps, t, tn, tn, t)])


def rms_norm(shape, eps, dtype="f32"):
    """x, gamma -> RMSNorm over the last axis (eps: an f32 attribute)."""
    t, tn = tensor_type(shape, dtype), tensor_type(shape[-1:], dtype)
    return function([("x", t), ("g", tn)], t, [
        "%%y = transformer.rms_norm %%x, %%g {epsilon = %.9e : f32}"
        " : %s, %s -> %s" % (eps, t, tn, t)])


def matmul(batch, m, k, n, dtype="f32", weight=False, result="f32"):
    """A @ B by tosa.matmul (operands `dtype`, the product `result`); with
    `weight`, B is given as [batch, n, k] and transposed for the product
    (tosa.transpose), as imported models multiply by their weights."""
    ta = tensor_type((batch, m, k), dtype)
    tb = tensor_type((batch, n, k) if weight else (batch, k, n), dtype)
    tbt = tensor_type((batch, k, n), dtype)
    tc, tz = tensor_type((batch, m, n), result), tensor_type((1,), dtype)
    body = []
    if weight:
        body.append("%%bt = tosa.transpose %%b {perms = array<i32: 0, 2, 1>}"
                    " : (%s) -> %s" % (tb, tbt))
    body += ['%%zp = "tosa.const"() {values = dense<0.0> : %s} : () -> %s'
             % (tz, tz),
             "%%c = tosa.matmul %%a, %%%s, %%zp, %%zp : (%s, %s, %s, %s) -> %s"
             % ("bt" if weight else "b", ta, tbt, tz, tz, tc)]
    return function([("a", ta), ("b", tb)], tc, body)


SIGNATURE = re.compile(
    r"func\.func @(\w+)\((.*?)\)\s*->(?:\s*tensor<([^>]*)>)?", re.S)
ARGUMENT = re.compile(r"%(\w+)\s*:\s*tensor<([^>]*)>")


def parse_tensor(spec):
    """"2x3xf32" (or tensor<2x3xf32>) -> ([2, 3], "f32")."""
    spec = spec.strip()
    if spec.startswith("tensor<"):
        spec = spec[len("tensor<"):-1]
    parts = spec.split("x")
    return [int(d) for d in parts[:-1]], parts[-1]


def signatures(text):
    """Every func.func of `text`: (name, [(argument, shape, dtype)],
    (shape, dtype) of its first result or None where that is not a
    tensor)."""
    out = []
    for m in SIGNATURE.finditer(text):
        args = [(a,) + tuple(parse_tensor(t))
                for a, t in ARGUMENT.findall(m.group(2))]
        out.append((m.group(1), args,
                    parse_tensor(m.group(3)) if m.group(3) else None))
    return out
