"""ptxas accepts the PTX of every kernel and example tfc builds for NVIDIA
GPUs: fused and unfused attention in f32, f16 and bf16 (causal, grouped-query
heads, masks, soft caps, odd sizes, one query row, Dv != D; the decode
kernel for few query rows per KV head, its combine where the keys are split,
and its reading of a cache and new keys from two buffers), softmax,
layer_norm, rms_norm, a matmul and both example layers; f16/bf16 attention and matmuls also in
their wgmma builds (ptxas -arch=sm_90a, which must not have to add
warpgroup fences or waits). Fused f16/bf16 attention must run on tensor
cores (mma.sync in the PTX) without register spills, and so must f16/bf16
matmuls (alone, and in unfused attention). With PTX_CUDA (the fake CUDA
driver with the PTX interpreter), every module must also load in the
interpreter: what the numerics tests do not run still uses only PTX it
implements.

usage: ptxas_sweep.py BINDIR WORKDIR [PTX_CUDA]
"""

import ctypes
import os
import re
import subprocess
import sys

BINDIR, WORKDIR = sys.argv[1], sys.argv[2]
interpreter = None
if len(sys.argv) > 3:
    interpreter = ctypes.CDLL(sys.argv[3])
    interpreter.ptxemu_load.restype = ctypes.c_void_p
    interpreter.ptxemu_load.argtypes = [ctypes.c_char_p, ctypes.c_char_p,
                                        ctypes.c_size_t]
    interpreter.ptxemu_unload.argtypes = [ctypes.c_void_p]
SRC = os.path.join(os.path.dirname(__file__), "..", "..", "..")
# The device check's builds (the flags of each kernel variant).
sys.path.insert(0, os.path.join(SRC, "scripts", "device"))
from specs import DECODE_BUILDS, GPU_VARIANTS  # noqa: E402
os.makedirs(WORKDIR, exist_ok=True)
failures = 0


def t(shape, dt):
    return "tensor<%sx%s>" % ("x".join(map(str, shape)), dt)


def attention(b, hq, hkv, sq, skv, d, dv, dt, causal=False, mask=None,
              softcap=None, window=None):
    q, k, v = t((b, hq, sq, d), dt), t((b, hkv, skv, d), dt), t((b, hkv, skv, dv), dt)
    r = t((b, hq, sq, dv), dt)
    args = "%%q: %s, %%k: %s, %%v: %s" % (q, k, v)
    types = [q, k, v]
    operands = "%q, %k, %v"
    if mask:
        m = t(mask, dt)
        args += ", %%m: %s" % m
        types.append(m)
        operands += " mask %m"
    attrs = ["is_causal"] if causal else []
    if softcap:
        attrs.append("softcap = %r : f32" % softcap)
    if window:
        attrs.append("window = %d : i64" % window)
    attrs = " {%s}" % ", ".join(attrs) if attrs else ""
    return ("func.func @main(%s) -> %s {\n  %%o = transformer.attention %s%s : "
            "%s -> %s\n  return %%o : %s\n}\n" %
            (args, r, operands, attrs, ", ".join(types), r, r))


def attention_two_parts(hq, hkv, past, new, d, dt):
    """Causal attention of `new` query rows whose keys and values are a
    cache of `past` and the new ones, concatenated (a decode step)."""
    q, r = t((1, hq, new, d), dt), t((1, hq, new, d), dt)
    p, n, kv = (t((1, hkv, past, d), dt), t((1, hkv, new, d), dt),
                t((1, hkv, past + new, d), dt))
    concat = "  %%%s = tosa.concat %%%s0, %%%s1 {axis = 2 : i32} : (%s, %s) -> %s\n"
    return ("func.func @main(%%q: %s, %%k0: %s, %%k1: %s, %%v0: %s, %%v1: %s)"
            " -> %s {\n" % (q, p, n, p, n, r) + concat % ("k", "k", "k", p, n, kv) +
            concat % ("v", "v", "v", p, n, kv) +
            "  %%o = transformer.attention %%q, %%k, %%v {is_causal} : %s, %s, %s"
            " -> %s\n  return %%o : %s\n}\n" % (q, kv, kv, r, r))


def unary(op, shape, dt, extra=""):
    x = t(shape, dt)
    return ("func.func @main(%%x: %s) -> %s {\n  %%y = transformer.%s %%x%s : "
            "%s -> %s\n  return %%y : %s\n}\n" % (x, x, op, extra, x, x, x))


def layer_norm(shape, dt):
    x, g = t(shape, dt), t(shape[-1:], dt)
    return ("func.func @main(%%x: %s, %%g: %s, %%b: %s) -> %s {\n"
            "  %%y = transformer.layer_norm %%x, %%g, %%b : %s, %s, %s -> %s\n"
            "  return %%y : %s\n}\n" % (x, g, g, x, x, g, g, x, x))


def rms_norm(shape, dt):
    x, g = t(shape, dt), t(shape[-1:], dt)
    return ("func.func @main(%%x: %s, %%g: %s) -> %s {\n"
            "  %%y = transformer.rms_norm %%x, %%g : %s, %s -> %s\n"
            "  return %%y : %s\n}\n" % (x, g, x, x, g, x, x))


def matmul(m, k, n, dt):
    a, b, c = t((1, m, k), dt), t((1, k, n), dt), t((1, m, n), dt)
    return ("func.func @main(%%a: %s, %%b: %s) -> %s {\n"
            "  %%e = tensor.empty() : %s\n"
            "  %%z = arith.constant 0.0 : %s\n"
            "  %%f = linalg.fill ins(%%z : %s) outs(%%e : %s) -> %s\n"
            "  %%c = linalg.batch_matmul ins(%%a, %%b : %s, %s) outs(%%f : %s)"
            " -> %s\n  return %%c : %s\n}\n" %
            (a, b, c, c, dt, dt, c, c, a, b, c, c, c))


def matmul_weight(m, k, n, dt):
    """A matmul by a weight given as [n, k], transposed for it."""
    a, w, wt = t((1, m, k), dt), t((1, n, k), dt), t((1, k, n), dt)
    c = t((1, m, n), "f32")
    return ("func.func @main(%%a: %s, %%w: %s) -> %s {\n"
            "  %%et = tensor.empty() : %s\n"
            "  %%b = linalg.transpose ins(%%w : %s) outs(%%et : %s)"
            " permutation = [0, 2, 1]\n"
            "  %%e = tensor.empty() : %s\n"
            "  %%z = arith.constant 0.0 : f32\n"
            "  %%f = linalg.fill ins(%%z : f32) outs(%%e : %s) -> %s\n"
            "  %%c = linalg.batch_matmul ins(%%a, %%b : %s, %s) outs(%%f : %s)"
            " -> %s\n  return %%c : %s\n}\n" %
            (a, w, c, wt, w, wt, c, c, c, a, wt, c, c, c))


cases = []
for dt in ("f32", "f16", "bf16"):
    # Up to 8 rows of A: the GEMV kernels (a weight [N, K] in f16/bf16 on
    # tensor cores, K = 4096 in a loop of 4 steps; B as [K, N] and f32 on
    # CUDA cores).
    cases += [("gemv_weight_" + dt, matmul_weight(3, 4096, 72, dt), dt),
              ("gemv_kn_" + dt, matmul(1, 520, 200, dt), dt)]
    cases += [
        ("attn_plain_" + dt, attention(1, 4, 4, 128, 128, 64, 64, dt), dt),
        ("attn_causal_odd_" + dt,
         attention(2, 2, 2, 77, 200, 80, 80, dt, causal=True), dt),
        ("attn_causal_long_q_" + dt,
         attention(1, 2, 2, 150, 70, 64, 64, dt, causal=True), dt),
        ("attn_gqa_" + dt, attention(1, 12, 4, 96, 96, 64, 64, dt), dt),
        ("attn_decode_" + dt, attention(2, 4, 4, 1, 1000, 64, 64, dt), dt),
        ("attn_pad_mask_" + dt,
         attention(2, 4, 4, 64, 64, 64, 64, dt, mask=(2, 1, 1, 64)), dt),
        ("attn_d128_causal_" + dt,
         attention(1, 2, 2, 256, 256, 128, 128, dt, causal=True), dt),
        ("attn_dv32_" + dt, attention(1, 2, 2, 64, 80, 64, 32, dt), dt),
        # Gemma 2's soft cap in the score epilogue.
        ("attn_softcap_causal_" + dt,
         attention(1, 4, 2, 100, 100, 64, 64, dt, causal=True, softcap=50.0),
         dt),
        # A sliding window: the key tiles from the first row's window on.
        ("attn_window_causal_" + dt,
         attention(1, 4, 2, 300, 300, 64, 64, dt, causal=True, window=100),
         dt),
        ("softmax_" + dt, unary("softmax", (33, 100), dt,
                                " {dimension = 1 : i64}"), dt),
        ("layer_norm_" + dt, layer_norm((17, 96), dt), dt),
        ("rms_norm_" + dt, rms_norm((3, 5, 130), dt), dt),
        ("matmul_" + dt, matmul(65, 48, 40, dt), dt),
    ]
    # Few query rows per KV head: the split-KV decode kernel (grouped-query
    # heads, two causal rows with a mask, odd and wide head dimensions).
    cases += [
        ("dec_gqa8_d128_" + dt, attention(1, 32, 4, 1, 4096, 128, 128, dt),
         dt),
        ("dec_causal_sq2_mask_" + dt,
         attention(2, 8, 2, 2, 700, 64, 64, dt, causal=True,
                   mask=(2, 1, 1, 700)), dt),
        ("dec_d96_" + dt, attention(1, 8, 1, 1, 300, 96, 96, dt), dt),
        ("dec_softcap_" + dt,
         attention(1, 8, 2, 1, 500, 64, 64, dt, softcap=30.0), dt),
        ("dec_window_" + dt,
         attention(1, 8, 2, 1, 2000, 64, 64, dt, causal=True, window=256),
         dt),
        # The cache and the new keys in two buffers each, read in place.
        ("dec_two_parts_" + dt, attention_two_parts(4, 2, 1000, 3, 64, dt),
         dt),
    ]
    if dt != "f32":  # (f32 beyond D = 128 keeps the FMA kernel)
        cases.append(("dec_d256_" + dt,
                      attention(1, 4, 1, 1, 64, 256, 256, dt), dt))
# Five slices of K: the wgmma GEMM's loop refills its stages.
cases.append(("matmul_deep_bf16", matmul(130, 320, 136, "bf16"), "bf16"))
for name in ("bert-layer/bert_layer.mlir", "gpt-layer/gpt_layer.mlir"):
    with open(os.path.join(SRC, "examples", name)) as f:
        cases.append((os.path.basename(name)[:-5], f.read(), "f32"))


def check(label, ok, detail=""):
    global failures
    print("%s %s%s" % ("ok  " if ok else "FAIL", label,
                       (": " + detail) if detail and not ok else ""))
    if not ok:
        failures += 1


def check_interpreter(label, ptx):
    if not interpreter:
        return
    error = ctypes.create_string_buffer(512)
    with open(ptx, "rb") as f:
        module = interpreter.ptxemu_load(f.read(), error, len(error))
    check(label + ": loads in the PTX interpreter", bool(module),
          error.value.decode())
    interpreter.ptxemu_unload(module)


for name, mlir, dt in cases:
    src = os.path.join(WORKDIR, name + ".mlir")
    with open(src, "w") as f:
        f.write(mlir)
    # The default build (sm_90a: wgmma on TMA tiles, two warpgroups per
    # attention block, i.e. "tma2"); f16/bf16 attention also in the device
    # check's other kernels, and f16/bf16 matmuls on mma.sync and on wgmma
    # with cp.async tiles.
    variants = [("fused", []), ("unfused", ["--no-fusion"])]
    if name.startswith("attn") and dt != "f32":
        variants += [(v, f) for v, f in GPU_VARIANTS.items() if v != "tma2"]
    if name.startswith("matmul") and dt != "f32":
        variants += [(v, GPU_VARIANTS[v]) for v in ("mma", "wgmma")]
    # attn_decode_*: the decode kernel in the fused build (and on tensor
    # cores, "dmma"); the tiled kernels' variants without it.
    decode_shape = name.startswith(("attn_decode", "dec_"))
    if decode_shape and dt != "f32":
        variants.append(("dmma", DECODE_BUILDS["dmma"]))
    for variant, flags in variants:
        fused = variant != "unfused"
        decode = decode_shape and variant in ("fused", "dmma")
        if decode_shape and fused and not decode:
            flags = flags + ["--gpu-decode-kernel=false"]
        label = "%s %s" % (name, variant)
        ptx = os.path.join(WORKDIR, "%s.%s.ptx" % (name, variant))
        cmd = [os.path.join(BINDIR, "tfc-compile"), src, "--target=nvptx",
               "--emit=ptx", "-o", ptx] + flags
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            check(label + ": tfc-compile", False, r.stderr.strip())
            continue
        arch = next((f.split("=", 1)[1] for f in flags
                     if f.startswith("--gpu-arch=")), "sm_90a")
        sm90a = arch == "sm_90a"
        # The kernel the build gets: tfc-compile's default on sm_90a is tma2.
        kind = "tma2" if variant == "fused" else variant
        r = subprocess.run(["ptxas", "-arch=" + arch, "-v", ptx, "-o",
                            ptx + ".cubin"], capture_output=True, text=True)
        check(label + ": ptxas -arch=" + arch, r.returncode == 0,
              r.stderr.strip()[-500:])
        check_interpreter(label, ptx)
        text = open(ptx).read()
        mma = "mma.sync.aligned.m16n8k16.row.col.f32.%s.%s.f32" % (dt, dt)
        if dt != "f32" and name.startswith("matmul") and sm90a:
            check(label + ": the matmul on wgmma, no mma.sync",
                  re.search(r"wgmma\.mma_async\.sync\.aligned\.m64n\d+k16"
                            r"\.f32\.%s\.%s" % (dt, dt), text) and
                  "mma.sync" not in text)
            check(label + ": ptxas keeps the wgmma chains as built",
                  not re.search(r"\(C75\d\d\)", r.stderr), r.stderr)
            spills = re.findall(r"(\d+) bytes spill stores", r.stderr)
            check(label + ": no register spills",
                  spills and all(s == "0" for s in spills), r.stderr)
            if "--gpu-tma=false" not in flags:
                # Thread 0 copies the slices by TMA; the warps wait on
                # mbarriers, not for cp.async groups.
                check(label + ": tiles by TMA, waits on mbarriers",
                      "cp.async.bulk.tensor.3d.shared::cluster.global.tile"
                      in text and "mbarrier.try_wait.parity" in text and
                      "cp.async.cg" not in text)
        elif name.startswith("gemv"):
            tensor_cores = dt != "f32" and "weight" in name
            check(label + ": the GEMV %s" % (
                      "on tensor cores" if tensor_cores else
                      "on CUDA cores (fma, shuffles)"),
                  (mma in text) if tensor_cores else
                  ("mma" not in text and "fma.rn.f32" in text and
                   "shfl.sync.bfly" in text))
            spills = re.findall(r"(\d+) bytes spill stores", r.stderr)
            check(label + ": no register spills",
                  spills and all(s == "0" for s in spills), r.stderr)
        elif dt != "f32" and (name.startswith("matmul") or
                              (name.startswith("attn") and not fused)):
            check(label + ": matmuls on tensor cores",
                  mma in text or ("wgmma.mma_async" in text and sm90a))
        dims = [int(d) for d in
                re.findall(r"tensor<\d+x\d+x\d+x(\d+)x", mlir)[:3]]
        if decode:
            # On the CUDA cores, or with dmma on tensor cores (f16/bf16 head
            # dimensions in steps of 16 whose 64-key tiles fit in 100 KiB);
            # keys per KV head beyond twice the 128 of a chunk are split
            # into chunks that the last block of each (batch x KV head) to
            # arrive combines (atom.add on its counter, membar.gl): one
            # kernel either way.
            skv = dims and int(re.findall(r"tensor<\d+x\d+x(\d+)x", mlir)[1])
            mma_path = (variant == "dmma" and dims[0] % 16 == 0 and
                        dims[2] % 16 == 0 and
                        256 * (dims[0] + dims[2] + 16) + 1024 <= 100 * 1024)
            keys = 64 if mma_path else 32
            tiles = (skv + keys - 1) // keys
            entries = re.findall(r"\.entry (\w+)\(", text)
            split = tiles // (128 // keys) >= 2
            check(label + ": the decode kernel (its chunks combined in it), "
                  "%s" % ("mma.sync" if mma_path else "CUDA cores"),
                  entries == ["attention_decode_0"] and
                  ("atom.global.add.u32" in text and "membar.gl" in text)
                  == split and ("mma.sync" in text) == mma_path,
                  " ".join(entries))
            check(label + ": tiles by cp.async, waited for in order",
                  "cp.async.c" in text and
                  re.search(r"cp\.async\.wait_group\s+1;", text))
            check(label + ": exponentials by ex2.approx.ftz",
                  "ex2.approx.ftz.f32" in text and
                  "ex2.approx.f32" not in text)
            spills = re.findall(r"(\d+) bytes spill stores", r.stderr)
            # With its chunks combined in the kernel, one shape (D = 96, 8
            # rows, f16) has ptxas keep 128 registers and spill one (4
            # bytes), its own choice (the same with -maxrregcount=168;
            # none without the combine): at most 8 bytes there, none
            # anywhere else.
            most = 8 if split and dims[2] == 96 and dt == "f16" else 0
            check(label + ": no register spills%s" % (
                      " (at most %d bytes)" % most if most else ""),
                  spills and all(int(s) <= most for s in spills), r.stderr)
        elif name.startswith("attn") and fused and dt == "f32":
            # The f32 kernel's exponentials flush subnormals too.
            check(label + ": exponentials by ex2.approx.ftz",
                  "ex2.approx.ftz.f32" in text and
                  "ex2.approx.f32" not in text)
        if name.startswith("attn") and fused and dt != "f32" and not decode:
            # wgmma takes head dimensions in 16-byte chunks up to 128;
            # others keep mma.sync.
            if sm90a and all(d % 8 == 0 and d <= 128 for d in dims):
                check(label + ": wgmma on tensor cores, no mma.sync",
                      ("wgmma.mma_async.sync.aligned.m64n" in text and
                       ".f32.%s.%s" % (dt, dt) in text and
                       "mma.sync" not in text))
                # ptxas reports (C75xx) where it must add warpgroup
                # fences or waits, or serialize the wgmma: registers the
                # kernel writes inside a chain, or reads before its wait.
                check(label + ": ptxas keeps the wgmma chains as built",
                      not re.search(r"\(C75\d\d\)", r.stderr), r.stderr)
            else:
                check(label + ": mma.sync on tensor cores", mma in text)
            # The softmax's exponentials flush subnormals: one MUFU.EX2
            # each (plain ex2.approx.f32 costs 3 more SASS instructions).
            check(label + ": exponentials by ex2.approx.ftz",
                  "ex2.approx.ftz.f32" in text and
                  "ex2.approx.f32" not in text)
            if variant == "ldmatrix":
                check(label + ": fragments by ldmatrix (V transposed)",
                      "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" in text
                      and "ld.shared.b32" not in text)
            if kind.startswith("tma") and all(d % 8 == 0 and d <= 128
                                                 for d in dims):
                # One thread copies each tile by TMA; the warps wait on
                # mbarriers, not for cp.async groups.
                check(label + ": tiles by TMA, waits on mbarriers",
                      "cp.async.bulk.tensor.3d.shared::cluster.global.tile"
                      in text and "mbarrier.try_wait.parity" in text and
                      "cp.async.cg" not in text)
            if variant == "tma2p" and all(d % 8 == 0 and d <= 128
                                          for d in dims):
                # A producer warpgroup: 384 threads, launched with 168
                # registers each; the consumers raise theirs to 240, so
                # the kernel must fit there without spilling (checked
                # below), the producer lowers its to 24.
                check(label + ": producer warpgroup and setmaxnreg",
                      ".maxntid 384, 1, 1\n.minnctapersm 1" in text and
                      "setmaxnreg.dec.sync.aligned.u32 \t24;" in text and
                      "setmaxnreg.inc.sync.aligned.u32 \t240;" in text and
                      re.search(r"Used 168 registers", r.stderr), r.stderr)
            if variant in ("async", "async32", "wgmma", "wgmma2"):
                # Head dimensions in 16-byte chunks copy by cp.async; others
                # keep the register-staged tiles.
                if all(d % 8 == 0 for d in dims):
                    check(label + ": tiles by cp.async (16-byte chunks)",
                          re.search(r"cp\.async\.cg\.shared\.global \[.*\], "
                                    r"\[.*\], 16, ", text) and
                          re.search(r"cp\.async\.wait_group\s+1;", text))
            # (Dv = 32: ptxas trades a few spills for occupancy; not checked.)
            if "dv32" not in name:
                spills = re.findall(r"(\d+) bytes spill stores", r.stderr)
                check(label + ": no register spills",
                      spills and all(s == "0" for s in spills), r.stderr)

# Other architectures: Ampere, and Hopper without its arch-specific features
# (mma.sync: PTX that newer GPUs run too).
src = os.path.join(WORKDIR, "attn_causal_odd_bf16.mlir")
for arch in ("sm_80", "sm_90"):
    ptx = os.path.join(WORKDIR, "arch_%s.ptx" % arch)
    r = subprocess.run([os.path.join(BINDIR, "tfc-compile"), src,
                        "--target=nvptx", "--gpu-arch=" + arch, "--emit=ptx",
                        "-o", ptx], capture_output=True, text=True)
    ok = r.returncode == 0
    if ok:
        r = subprocess.run(["ptxas", "-arch=" + arch, ptx, "-o", ptx + ".cubin"],
                           capture_output=True, text=True)
        ok = r.returncode == 0 and (".target %s" % arch) in open(ptx).read()
    check("attn_causal_odd_bf16 fused: ptxas -arch=" + arch, ok,
          r.stderr.strip())
    if os.path.exists(ptx):
        check_interpreter("attn_causal_odd_bf16 fused, " + arch, ptx)

print("%d failed" % failures)
sys.exit(1 if failures else 0)
