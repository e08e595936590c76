"""The checks the encoder-decoder families' CPU tests share
(tests/Integration/CPU/encdec.py, t5.py): the whole model in each type,
fused and unfused; its logits; the encoder and the decoder built apart
(--part); the decoder part after a past (--past-len); generation's builds
(the encoder with the cross-attention keys and values, one decoder step
over a fixed cache); and the scripts' --write mode. `h` is the harness
(harness.start); ids, mask [B, S] and dec [B, T] are a check's tokens."""

import json
import sys

import numpy as np

from tfc_testing.arrays import bf16_to_f32, f32_to_bf16

# The whole model's tolerance per type: 1e-4 in f32, 10 units of the
# type's roundoff in f16 and bf16.
TOLERANCES = {"f32": 1e-4, "f16": 10 * 2.0**-11, "bf16": 10 * 2.0**-8}
_OUTPUT_TYPES = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16}


def write_only(script, args, cases, write_model):
    """FAMILY DIR [--set FIELD=JSON]... [--drop TENSOR]...: writes the
    model of cases[FAMILY], those fields set and those tensors left out,
    with write_model(DIR, rng, cfg, drop)."""
    cfg = dict(cases[args[0]])
    directory, drop = args[1], []
    it = iter(args[2:])
    for flag in it:
        value = next(it)
        if flag == "--set":
            k, v = value.split("=", 1)
            cfg[k] = json.loads(v)
        elif flag == "--drop":
            drop.append(value)
        else:
            sys.exit("%s: unknown flag %s" % (script, flag))
    write_model(directory, np.random.default_rng(1), cfg, drop)


def check_whole(h, name, model, ids, mask, dec, dtypes, expected):
    """The whole model's output (the decoder's last hidden state) in each
    of `dtypes`, fused (its fusion summary printed) and unfused, against
    expected(dtype)."""
    b, s = ids.shape
    for dtype in dtypes:
        want = expected(dtype)
        for fused in (True, False):
            lib, summary = h.build_hf(
                "%s_%s" % (name, dtype), model, b, s, fused,
                ["--decoder-seq-len", str(dec.shape[1]), "--dtype=" + dtype])
            if fused:
                print(summary)
            out = h.run_hf(lib, model, [ids, mask, dec])
            h.expect("%s %s: the output is %s" % (name, dtype, dtype),
                     out.dtype == _OUTPUT_TYPES[dtype])
            if dtype == "bf16":
                out = bf16_to_f32(out)
            h.expect_close("%s last hidden state %s %s" % (
                name, dtype, "fused" if fused else "unfused"), out, want,
                TOLERANCES[dtype])


def check_logits(h, name, model, ids, mask, dec, expected):
    """The whole model's logits (--output=logits), fused, f32."""
    lib, _ = h.build_hf(name + "_logits", model, ids.shape[0], ids.shape[1],
                        True, ["--decoder-seq-len", str(dec.shape[1]),
                               "--output=logits"])
    h.expect_close("%s logits" % name, h.run_hf(lib, model, [ids, mask, dec]),
                   expected, 1e-4)


def check_parts(h, name, model, ids, mask, dec, encoded, hidden):
    """--part=encoder's output against `encoded`, and --part=decoder's on
    `encoded` (rounded to f32, as the encoder part returns it) against
    `hidden`, fused and unfused, f32."""
    b, s = ids.shape
    for fused in (True, False):
        tag = "fused" if fused else "unfused"
        lib, _ = h.build_hf(name + "_encoder", model, b, s, fused,
                            ["--part=encoder"])
        h.expect_close("%s --part=encoder %s" % (name, tag),
                       h.run_hf(lib, model, [ids, mask]), encoded, 1e-4)
        lib, _ = h.build_hf(name + "_decoder", model, b, s, fused,
                            ["--decoder-seq-len", str(dec.shape[1]),
                             "--part=decoder"])
        h.expect_close("%s --part=decoder %s" % (name, tag),
                       h.run_hf(lib, model,
                                [dec, encoded.astype(np.float32), mask]),
                       hidden, 1e-4)


def check_past(h, name, model, ids, mask, dec, past, reference,
               builds=(True, False)):
    """The decoder part after a past of `past` of dec's tokens, each of
    `builds` (fused or not), f32: the new tokens' hidden states and the
    self-attention keys and values of all, against reference(kv) ->
    (encoded, hidden), which appends each decoder layer's (keys, values)
    [B, heads, T, head dim] to kv."""
    kv = []
    encoded, hidden = reference(kv)
    inputs = [dec[:, past:], encoded.astype(np.float32), mask]
    for k, v in kv:
        inputs += [k[:, :, :past].astype(np.float32),
                   v[:, :, :past].astype(np.float32)]
    b, s = ids.shape
    for fused in builds:
        lib, _ = h.build_hf(name + "_past", model, b, s, fused,
                            ["--part=decoder", "--decoder-seq-len",
                             str(dec.shape[1] - past), "--past-len=%d" % past])
        out = h.run_hf(lib, model, inputs, 1 + 2 * len(kv))
        label = "%s decoder after %d past %s" % (
            name, past, "fused" if fused else "unfused")
        h.expect_close(label + ": hidden states", out[0], hidden[:, past:],
                       1e-4)
        h.expect_close(label + ": keys and values",
                       np.concatenate([o.ravel() for o in out[1:]]),
                       np.concatenate([t.ravel() for pair in kv
                                       for t in pair]), 1e-4)


def _typed(x, dtype):
    """x as an input of `dtype` (bf16 as its bits)."""
    if dtype == "bf16":
        return f32_to_bf16(x.astype(np.float32))
    return x.astype(_OUTPUT_TYPES[dtype])


def _flat(arrays):
    """The arrays (bf16 bits widened) in one float64 vector."""
    return np.concatenate([(bf16_to_f32(a) if a.dtype == np.uint16 else a)
                           .astype(np.float64).ravel() for a in arrays])


def check_step(h, name, model, ids, mask, dec, reference, cross,
               dtypes=("f32", "bf16"), cap=5, new=2, filled=(3, 1)):
    """Generation's builds in each of `dtypes`, fused (the step's fusion
    summary printed) and unfused: the encoder part with --cross-kv (its
    output and every decoder layer's cross-attention keys and values), and
    one decoder step over a fixed cache of `cap` slots (--part=decoder
    --cross-kv --past-len CAP --position-ids --present=new, `new` tokens)
    with rows at different steps: row r's tokens at positions n_r.. (n =
    `filled`), the reference's keys and values of its first n_r tokens in
    slots 0..n_r-1, garbage in the others (hidden by
    decoder_attention_mask). Against reference(dtype, kv) -> (encoded,
    hidden), which appends each decoder layer's self-attention (keys,
    values) [B, heads, T, head dim] to kv, and cross(dtype, encoded) ->
    each decoder layer's cross-attention (keys, values)."""
    b, s = ids.shape
    filled = np.array(filled)
    garbage = np.random.default_rng(0)
    rows = range(b)
    tokens = np.stack([dec[r, n:n + new] for r, n in zip(rows, filled)])
    positions = filled[:, None] + np.arange(new)[None]
    step_mask = (np.arange(cap + new)[None] < filled[:, None]).astype(
        np.int64)
    step_mask[:, cap:] = 1
    for dtype in dtypes:
        kv = []
        encoded, hidden = reference(dtype, kv)
        kvs = cross(dtype, encoded)
        tol = TOLERANCES[dtype]
        inputs = [tokens] + [_typed(t, dtype) for pair in kvs for t in pair]
        inputs += [mask, step_mask, positions]
        for k, v in kv:
            for t in (k, v):
                slots = garbage.uniform(-3, 3, t.shape[:2] + (cap,) +
                                        t.shape[3:])
                for r, n in zip(rows, filled):
                    slots[r, :, :n] = t[r, :, :n]
                inputs.append(_typed(slots, dtype))
        want = [hidden[r, n:n + new] for r, n in zip(rows, filled)]
        new_kv = [t[r, :, n:n + new] for pair in kv for t in pair
                  for r, n in zip(rows, filled)]
        for fused in (True, False):
            tag = "%s %s %s" % (name, dtype, "fused" if fused else "unfused")
            lib, _ = h.build_hf(name + "_crosskv_" + dtype, model, b, s,
                                fused, ["--part=encoder", "--cross-kv",
                                        "--dtype=" + dtype])
            out = h.run_hf(lib, model, [ids, mask], 1 + 2 * len(kvs))
            h.expect_close(tag + " --part=encoder --cross-kv: its output",
                           _flat(out[:1]), encoded.ravel(), tol)
            h.expect_close(tag + " --part=encoder --cross-kv: cross keys "
                           "and values", _flat(out[1:]),
                           _flat([t for pair in kvs for t in pair]), tol)
            lib, summary = h.build_hf(
                "%s_step_%s" % (name, dtype), model, b, s, fused,
                ["--part=decoder", "--cross-kv", "--decoder-seq-len",
                 str(new), "--past-len=%d" % cap, "--position-ids",
                 "--present=new", "--dtype=" + dtype])
            if fused:
                print(summary)
            out = h.run_hf(lib, model, inputs, 1 + 2 * len(kv))
            label = "%s step of %d tokens at positions %s, %d-slot cache" % (
                tag, new, filled.tolist(), cap)
            h.expect_close(label + ": hidden states", _flat(out[:1]),
                           _flat(want), tol)
            h.expect_close(label + ": the new keys and values",
                           _flat([o[r] for o in out[1:] for r in rows]),
                           _flat(new_kv), tol)
