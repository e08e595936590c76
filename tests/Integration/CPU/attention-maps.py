"""tfc-compile --hf --attention-maps: the named layers' attention
probabilities as extra outputs, against the float64 references' own (the
families' references in gpt2.py, llama.py, vit.py, clip.py and
tfc_testing/reference.py), for BERT, GPT-2, LLaMA (grouped-query heads),
BART and T5 (encoder, decoder and cross-attention), ViT and CLIP (its
vision and its text tower): random weights, odd sizes, a padded batch row.

Each map must match the reference's probabilities, its rows sum to 1 and
its hidden keys (padding, the future) hold exactly 0; the model's own
output must be that of the build without maps. Prints each build's fusion
summary (the test checks the counts: the mapped layers' attention
unfused, their softmax fused).

usage: attention-maps.py BINDIR WORKDIR [SEED] [--target=cpu|nvptx]
                         [--gpu-binary=cubin|ptx] [--cases=NAME,...]
       attention-maps.py --png DIR NAME...   (examples/attention-maps/
                         plot.py's output: DIR holds exactly the PNGs
                         NAME..., each a valid PNG that matplotlib reads
                         back as the image its header gives)
"""

import json
import os
import struct
import subprocess
import sys
import zlib

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "pylib"))
# The models recorded with transformers (record.py there).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "Inputs", "attention-maps-transformers"))
import clip  # noqa: E402
import encdec  # noqa: E402
import gpt2  # noqa: E402
import llama  # noqa: E402
import maps_fixture  # noqa: E402
import t5  # noqa: E402
import vit  # noqa: E402
from tfc_testing import reference, safetensors_file  # noqa: E402
from tfc_testing.arrays import (bf16_to_f32, random_tokens,  # noqa: E402
                                rounded_weights)
from tfc_testing.harness import Harness, start  # noqa: E402

INPUTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                      "Importer", "Inputs")
BATCH, SEQ = 2, 11
TOLERANCE = {"f32": 1e-4, "f16": 10 * 2.0**-11, "bf16": 10 * 2.0**-8}


def widened(x):
    """A build's output in float64 (bf16 arrives as '<u2')."""
    return (bf16_to_f32(x) if x.dtype == np.uint16 else x).astype(np.float64)


def padding(mask):
    """[B, 1, 1, S]: the keys attention_mask hides."""
    return (mask == 0)[:, None, None, :]


def future(sq, skv):
    """[Sq, Skv]: the keys after each query (causal)."""
    return np.arange(skv)[None, :] > np.arange(sq)[:, None] + skv - sq


def check_maps(h, label, got, expected, dtype):
    """Each map of `got` (name -> array) against `expected` (name ->
    (float64 probabilities, the hidden keys as a broadcastable bool
    array, or None where every key is seen: an image's)): close to the
    reference within the type's tolerance, every row summing to 1 within
    it, the hidden keys exactly 0 (and 0 in the reference too)."""
    tol = TOLERANCE[dtype]
    for name, (ref, hidden) in expected.items():
        g = widened(got[name])
        what = "%s %s %s" % (label, name, dtype)
        h.expect("%s: shape %s" % (what, list(ref.shape)),
                 g.shape == ref.shape)
        if g.shape != ref.shape:
            continue
        h.expect_close(what + ": probabilities", g, ref, tol)
        worst = np.abs(g.sum(-1) - 1).max()
        h.expect("%s: rows sum to 1 (worst by %.1e)" % (what, worst),
                 worst <= tol)
        if hidden is None:
            continue
        hidden = np.broadcast_to(hidden, ref.shape)
        h.expect("%s: every row sees a key" % what,
                 np.all((~hidden).any(-1)))
        h.expect("%s: the %d hidden keys are 0" % (what, hidden.sum()),
                 hidden.any() and np.all(g[hidden] == 0) and
                 np.all(ref[hidden] == 0))


def output_names(h, lib):
    """The names of the library's outputs, in order (tfc-run --describe)."""
    described = subprocess.run([h.run_tool, lib, "--describe"], check=True,
                               capture_output=True, text=True).stdout
    return [line.split()[2].rstrip(":") for line in described.splitlines()
            if line.strip().startswith("output ")]


def check_model(h, name, model, inputs, spec, expected, ref_out, dtype="f32",
                flags=(), image=False):
    """The model built with --attention-maps=`spec` (fused; its summary
    printed) and without: the maps (`expected`, by output name, in the
    order they come) checked, and the first output the same in both
    builds and against `ref_out`. An `image` model takes no --seq-len."""
    flags = ["--dtype=" + dtype] + list(flags)
    seq = None if image else inputs[0].shape[1]
    batch = inputs[0].shape[0]
    plain, _ = h.build_hf(name + "_plain_" + dtype, model, batch, seq, True,
                          flags)
    lib, summary = h.build_hf(name + "_maps_" + dtype, model, batch, seq,
                              True, flags + ["--attention-maps=" + spec])
    print(summary)
    outputs = output_names(h, lib)
    count = len(outputs) - len(expected)
    h.expect("%s --attention-maps=%s: outputs %s end in the maps" % (
        name, spec, ", ".join(outputs)), outputs[count:] == list(expected))
    base = h.run_hf(plain, model, inputs, count)
    base = base if count > 1 else [base]
    out = h.run_hf(lib, model, inputs, len(outputs))
    tol = TOLERANCE[dtype]
    label = "%s --attention-maps=%s" % (name, spec)
    # In f16 and bf16 the mapped layers round their probabilities to the
    # type before the product with V, as the unfused graph does; the fused
    # attention keeps them in f32: the two builds agree as each agrees
    # with the reference.
    h.expect_close("%s %s: output 0 as without maps" % (label, dtype),
                   widened(out[0]), widened(base[0]),
                   tol / 10 if dtype == "f32" else tol)
    h.expect_close("%s %s: output 0" % (label, dtype), widened(out[0]),
                   ref_out, tol)
    check_maps(h, label, dict(zip(outputs[count:], out[count:])), expected,
               dtype)


def check_bert(h, rng):
    model = h.path("bert")
    subprocess.run([sys.executable, os.path.join(INPUTS, "make_fake_bert.py"),
                    model, "--family", "bert", "--layers", "3", "--hidden",
                    "36", "--heads", "3", "--inter", "50", "--vocab", "47",
                    "--max-pos", "16", "--seed",
                    str(int(rng.integers(1 << 30)))], check=True)
    with open(os.path.join(model, "config.json")) as f:
        cfg = json.load(f)
    w = safetensors_file.read(model)
    ids, mask = random_tokens(rng, 47, BATCH + 1, SEQ, 4)
    probs = []
    emb = reference.bert(cfg, w, "", ids, mask, probs=probs)
    check_model(h, "bert", model, [ids, mask], "0,2",
                {"attentions.0": (probs[0], padding(mask)),
                 "attentions.2": (probs[2], padding(mask))}, emb)


def check_gpt2(h, rng):
    cfg = gpt2.CFG
    model = h.path("gpt2")
    w = gpt2.write_model(model, rng, cfg)
    ids, mask = random_tokens(rng, cfg["vocab_size"], BATCH, SEQ, 3)
    hidden = padding(mask) | future(SEQ, SEQ)
    for dtype in ("f32", "f16", "bf16") if h.target == "cpu" else ("f32",):
        probs = []
        out = gpt2.reference(cfg, rounded_weights(w, dtype), ids, mask,
                             probs=probs)
        # bf16: the first layer's map; the second's carries the first
        # layer's bf16 rounding, which its softmax amplifies by the
        # scores' size (1.5e-2 to 4e-2 of norm-wise error over 5 seeds,
        # at 10 units of bf16's roundoff).
        layers = {"f32": (1,), "f16": (0, 1), "bf16": (0,)}[dtype]
        spec = ",".join(str(l) for l in layers)
        maps = {"attentions.%d" % l: (probs[l], hidden) for l in layers}
        check_model(h, "gpt2", model, [ids, mask], spec, maps, out, dtype)
    if h.target != "cpu":
        return
    # One library for batch sizes 1 and 3 run on 2 sequences: as 3, the
    # maps cut back to 2 like the hidden state.
    probs = []
    gpt2.reference(cfg, w, ids, mask, probs=probs)
    lib, summary = h.build_hf("gpt2_batches", model, "1,3", SEQ, True,
                              ["--attention-maps=0"])
    print(summary)
    out = h.run_hf(lib, model, [ids, mask], 2)
    check_maps(h, "gpt2 --batch 1,3", {"attentions.0": out[1]},
               {"attentions.0": (probs[0], hidden)}, "f32")
    # With the KV cache: 4 new tokens after 7, the maps over all 11 keys;
    # the past keys and values are the reference's.
    kv, probs = [], []
    out = gpt2.reference(cfg, w, ids, mask, kv=kv, probs=probs)
    past = SEQ - 4
    inputs = [ids[:, past:], mask]
    for k, v in kv:
        inputs += [k[:, :, :past].astype(np.float32),
                   v[:, :, :past].astype(np.float32)]
    check_model(h, "gpt2_past", model, inputs, "0",
                {"attentions.0": (probs[0][:, :, past:],
                                  hidden[:, :, past:])},
                out[:, past:], flags=["--past-len=%d" % past])


def check_llama(h, rng):
    cfg = llama.CFG  # 4 query heads on 2 key/value heads
    model = h.path("llama")
    w = llama.write_model(model, rng, cfg)
    ids, mask = random_tokens(rng, cfg["vocab_size"], BATCH, SEQ, 2)
    probs = []
    out = llama.reference(cfg, w, ids, mask, probs=probs)
    hidden = padding(mask) | future(SEQ, SEQ)
    check_model(h, "llama", model, [ids, mask], "all",
                {"attentions.%d" % l: (p, hidden)
                 for l, p in enumerate(probs)}, out)


def check_bart(h, rng):
    cfg = encdec.CASES["bart"]
    model = h.path("bart")
    w = encdec.write_model(model, rng, cfg)
    dec_len = 5
    ids, mask = random_tokens(rng, cfg["vocab_size"], BATCH, SEQ - 4, 2)
    dec = rng.integers(0, cfg["vocab_size"], (BATCH, dec_len)).astype(
        np.int64)
    probs = {"encoder": [], "decoder": [], "cross": []}
    _, out = reference.encoder_decoder(cfg, w, ids, mask, dec, probs=probs)
    hidden = {"encoder": padding(mask), "cross": padding(mask),
              "decoder": future(dec_len, dec_len)}
    flags = ["--decoder-seq-len=%d" % dec_len]
    for spec, chosen in (("encoder.1,decoder.0-1,cross.0",
                          (("encoder", 1), ("decoder", 0), ("decoder", 1),
                           ("cross", 0))),
                         ("all", tuple((s, l) for s in ("encoder",
                                                        "decoder", "cross")
                                       for l in range(2)))):
        check_model(h, "bart", model, [ids, mask, dec], spec,
                    {"%s_attentions.%d" % (s, l): (probs[s][l], hidden[s])
                     for s, l in chosen}, out, flags=flags)


def check_t5(h, rng):
    """T5: the relative position bias and the padding mask added to
    unscaled scores (encoder), causal self-attention with its bias
    (decoder), and cross-attention without one."""
    cfg = t5.CASES["t5"]
    model = h.path("t5")
    w = t5.write_model(model, rng, cfg)
    dec_len = 5
    ids, mask = random_tokens(rng, cfg["vocab_size"], BATCH, SEQ - 4, 2)
    dec = rng.integers(0, cfg["vocab_size"], (BATCH, dec_len)).astype(
        np.int64)
    probs = {"encoder": [], "decoder": [], "cross": []}
    _, out = reference.t5(cfg, w, ids, mask, dec, probs=probs)
    hidden = {"encoder": padding(mask), "cross": padding(mask),
              "decoder": future(dec_len, dec_len)}
    chosen = (("encoder", 0), ("decoder", 1), ("cross", 1))
    check_model(h, "t5", model, [ids, mask, dec], "encoder.0,decoder.1,cross.1",
                {"%s_attentions.%d" % (s, l): (probs[s][l], hidden[s])
                 for s, l in chosen}, out,
                flags=["--decoder-seq-len=%d" % dec_len])


def check_vit(h, rng):
    """ViTModel on a 24x16 image of 2 channels (7 tokens, no Q/K/V
    biases): both layers in f32, the first in bf16."""
    cfg = vit.VIT_MODEL
    model = h.path("vit")
    w = vit.write_model(model, rng, cfg)
    pixels = vit.pixels_for(rng, cfg, BATCH + 1)
    for dtype, layers in (("f32", (0, 1)), ("bf16", (0,))):
        probs = []
        out = vit.reference(cfg, rounded_weights(w, dtype), pixels,
                            probs=probs)
        check_model(h, "vit", model, [pixels],
                    ",".join(str(l) for l in layers),
                    {"attentions.%d" % l: (probs[l], None) for l in layers},
                    out, dtype, image=True)


def check_clip(h, rng):
    """CLIPModel's towers, one a build: the vision tower's every layer
    (vision_attentions.L) and the text tower's (text_attentions.L: the
    causal limit and a right-padded row), each beside its embeds."""
    cfg = clip.CLIP
    model = h.path("clip")
    w = clip.write_model(model, rng, cfg)
    pixels = vit.pixels_for(rng, clip.VISION, BATCH)
    probs = []
    out = clip.reference(cfg, w, [pixels], True, probs=probs)
    check_model(h, "clip_vision", model, [pixels], "all",
                {"vision_attentions.%d" % l: (p, None)
                 for l, p in enumerate(probs)}, out,
                flags=["--part=vision"], image=True)
    ids, mask = clip.text_inputs(rng, clip.TEXT, False)
    hidden = padding(mask) | future(clip.SEQ, clip.SEQ)
    for dtype, spec in (("f32", "0-1"), ("bf16", "0")):
        probs = []
        out = clip.reference(cfg, rounded_weights(w, dtype), [ids, mask],
                             False, probs=probs)
        layers = range(2) if dtype == "f32" else (0,)
        check_model(h, "clip_text", model, [ids, mask], spec,
                    {"text_attentions.%d" % l: (probs[l], hidden)
                     for l in layers}, out, dtype, flags=["--part=text"])


def transformers_builds(cfg, given):
    """[(tfc-compile flags, inputs, --seq-len or None)]: the builds of a
    recorded model (CLIP's two towers, one a build)."""
    seq = maps_fixture.SEQ
    tokens = [given.get("input_ids"), given.get("attention_mask")]
    kind = maps_fixture.kind(cfg)
    if kind == "image":
        return [([], [given["pixel_values"]], None)]
    if kind == "clip":
        return [(["--part=vision"], [given["pixel_values"]], None),
                (["--part=text"], tokens, seq)]
    if kind == "encdec":
        return [(["--decoder-seq-len=%d" % maps_fixture.DEC],
                 tokens + [given["decoder_input_ids"]], seq)]
    return [([], tokens, seq)]


def check_transformers(h, rng):
    """tfc against transformers itself: the models of
    Inputs/attention-maps-transformers (BERT, GPT-2, BART, T5, ViT, LLaMA,
    CLIP), their weights and inputs drawn again from the recorded seeds,
    built with --attention-maps=all; every map within 1e-5 (max abs) of
    the probabilities transformers computed (output_attentions=True,
    eager)."""
    with open(maps_fixture.MODELS_JSON) as f:
        recorded = json.load(f)["models"]
    expected = np.load(maps_fixture.EXPECTED_NPZ)
    for name, (cfg, seed) in maps_fixture.MODELS.items():
        r = recorded[name]
        model = h.path("transformers_" + name)
        digest = maps_fixture.write_model(model, cfg, r["tensors"], seed)
        h.expect("transformers %s: config and weights as recorded" % name,
                 cfg == r["config"] and seed == r["seed"] and
                 digest == r["sha256"])
        got = {}
        for i, (flags, given, seq) in enumerate(transformers_builds(
                cfg, maps_fixture.inputs(cfg, seed))):
            lib, _ = h.build_hf("transformers_%s_%d" % (name, i), model,
                                maps_fixture.BATCH, seq, True,
                                ["--attention-maps=all"] + flags)
            outputs = output_names(h, lib)
            out = h.run_hf(lib, model, given, len(outputs))
            got.update((o, x) for o, x in zip(outputs, out)
                       if "attentions." in o)
        want = sorted(k.split("/", 1)[1] for k in expected.files
                      if k.startswith(name + "/"))
        h.expect("transformers %s: the maps %s" % (name, ", ".join(want)),
                 sorted(got) == want)
        for m in want:
            ref = expected[name + "/" + m]
            g = got.get(m)
            worst = np.abs(g - ref).max() if g is not None and \
                g.shape == ref.shape else np.inf
            h.expect("transformers %s %s %s: max abs %.1e (tol 1e-05)" % (
                name, m, list(ref.shape), worst), worst <= 1e-5)


def png_chunks(data):
    """[(type, body, CRC correct)] of the PNG bytes after the signature."""
    chunks, at = [], 8
    while at + 12 <= len(data):
        n, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + n]
        crc = data[at + 8 + n:at + 12 + n]
        chunks.append((kind, body, len(crc) == 4 and struct.unpack(
            ">I", crc)[0] == zlib.crc32(kind + body)))
        at += 12 + n
    return chunks


def check_pngs(directory, names):
    """plot.py's PNGs: DIR holds `names` and nothing else; each has the PNG
    signature, chunks of correct CRCs from IHDR (width and height > 0) to
    IEND, and matplotlib reads it as an image of that size that is not one
    colour."""
    import matplotlib.image
    h = Harness("", directory)
    h.expect("%s holds the %d PNGs named" % (directory, len(names)),
             sorted(os.listdir(directory)) == sorted(names))
    for name in names:
        with open(os.path.join(directory, name), "rb") as f:
            data = f.read()
        chunks = png_chunks(data)
        width, height = struct.unpack(">II", chunks[0][1][:8]) \
            if chunks and chunks[0][0] == b"IHDR" else (0, 0)
        h.expect("%s: PNG signature, IHDR %dx%d, chunks to IEND, CRCs" % (
            name, width, height),
            data[:8] == b"\x89PNG\r\n\x1a\n" and width > 0 and height > 0
            and chunks[-1][0] == b"IEND" and all(c[2] for c in chunks))
        try:
            image = matplotlib.image.imread(os.path.join(directory, name))
        except (OSError, SyntaxError, ValueError) as e:
            h.expect("%s: matplotlib reads it (%s)" % (name, e), False)
            continue
        h.expect("%s: matplotlib reads %s, not one colour" % (
            name, list(image.shape)),
            image.shape[:2] == (height, width) and
            np.ptp(image[..., :3]) > 0)
    h.finish()


def main():
    if sys.argv[1] == "--png":
        return check_pngs(sys.argv[2], sys.argv[3:])
    h, rng, _ = start(sys.argv[1:])
    for name, check in (("bert", check_bert), ("gpt2", check_gpt2),
                        ("llama", check_llama), ("bart", check_bart),
                        ("t5", check_t5), ("vit", check_vit),
                        ("clip", check_clip),
                        ("transformers", check_transformers)):
        if h.wants(name):
            check(h, rng)
    h.finish()


if __name__ == "__main__":
    main()
