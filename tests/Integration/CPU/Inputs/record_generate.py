#!/usr/bin/env python3
"""Records transformers' generate() on small random models, for
generate-api.py to compare tfc.Generator with token for token.

Run by hand, once, with a Python that has torch and transformers (CI has
neither; the JSON it writes is committed):

  /work/venv-onnx/bin/python record_generate.py WORKDIR [OUT.json]

It writes the model directories as generate-api.py does (write_models:
the family writers of ../gpt2.py, ../llama.py, ../encdec.py and
../t5.py, plus a generation_config.json each), runs generate() in f32
with each setting of CASES on a batch of two (the second prompt padded: on
the left for
decoders, a shorter source for encoder-decoders) and writes the ids with
the prompts, the settings, the generation configs, the model files'
sha256 and the versions that wrote them. For each case it records the
smallest margin of a decision it made: greedy, the top-2 gap of the
processed scores of each unfinished row at each step; beam search, the
gaps at the edges of the sets each step picks (spy_beams), so that
generate-api.py can assert no near-tie decided a token.
"""

import hashlib
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
# Appended: the directory holds kernels.py, a name transformers imports.
sys.path.append(os.path.dirname(HERE))
import encdec  # noqa: E402
import gpt2  # noqa: E402
import llama  # noqa: E402
import t5  # noqa: E402
from tfc_testing import safetensors_file  # noqa: E402

NEW = 8  # max_new_tokens of every case
PROMPT, SOURCE, PAD = 5, 7, 2  # decoder prompt, source, padding of row 2
# name: (writer, config, seed, generation config). The EOS ids are tokens
# the models produce, so that greedy rows and beams finish early; each
# model's config exercises some of tfc.generation.PROCESSORS.
MODELS = {
    "gpt2": (gpt2.write_model, gpt2.CFG, 30, {"eos_token_id": 36}),
    "llama": (llama.write_model, llama.CFG, 22, {
        "eos_token_id": [56, 94], "pad_token_id": 0, "min_new_tokens": 5,
        "bad_words_ids": [[65], [48, 71]]}),
    # Marian's own choice: the pad token starts the decoder and is barred.
    "marian": (encdec.write_model, encdec.CASES["marian"], 48, {
        "decoder_start_token_id": 11, "pad_token_id": 11, "eos_token_id": 37,
        "forced_eos_token_id": 37, "bad_words_ids": [[11], [59]],
        "renormalize_logits": True}),
    "bart": (encdec.write_model,
             dict(encdec.CASES["bart"],
                  architectures=["BartForConditionalGeneration"]), 24, {
                 "decoder_start_token_id": 2, "bos_token_id": 0,
                 "pad_token_id": 1, "eos_token_id": 30,
                 "forced_bos_token_id": 0, "forced_eos_token_id": 30,
                 "min_length": 4}),
    # T5 (ReLU, the tied and rescaled head) and T5 v1.1 (gated GELU, an
    # lm_head of its own): the pad token starts the decoder.
    "t5": (t5.write_model, t5.CASES["t5"], 0, {
        "decoder_start_token_id": 0, "pad_token_id": 0, "eos_token_id": 16}),
    "t5v11": (t5.write_model, t5.CASES["t5v11"], 2, {
        "decoder_start_token_id": 0, "pad_token_id": 0, "eos_token_id": 11}),
}
# The gains of the norms before the LM heads, scaled up so that the random
# models' logits (and so the beams' scores) lie further apart.
SHARPEN = {"gpt2": {"transformer.ln_f.weight": 3.0,
                    "transformer.ln_f.bias": 3.0},
           "marian": {"model.decoder.layers.1.final_layer_norm.weight": 5.0,
                      "model.decoder.layers.1.final_layer_norm.bias": 5.0},
           # T5's token table smaller too: its unit rows, the residual
           # stream's bulk, make the tied head repeat the last token.
           "t5": {"shared.weight": 0.2,
                  "decoder.final_layer_norm.weight": 4.0},
           "t5v11": {"decoder.final_layer_norm.weight": 3.0}}
CASES = [
    {"num_beams": 1},
    {"num_beams": 4, "length_penalty": 1.0, "early_stopping": False},
    {"num_beams": 4, "length_penalty": 0.6, "early_stopping": True},
    {"num_beams": 4, "length_penalty": 1.0, "early_stopping": "never"},
    {"num_beams": 4, "length_penalty": 0.6, "early_stopping": False},
]


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def write_models(root):
    """The model directories under `root`; returns {name: directory}."""
    dirs = {}
    for name, (write, cfg, seed, gen) in MODELS.items():
        d = dirs[name] = os.path.join(root, name)
        w = write(d, np.random.default_rng(seed), cfg)
        if name in SHARPEN:
            w = safetensors_file.read(os.path.join(d, "model.safetensors"))
            for tensor, gain in SHARPEN[name].items():
                w[tensor] = (w[tensor] * gain).astype(np.float32)
            safetensors_file.write_arrays(
                os.path.join(d, "model.safetensors"), w, {"format": "pt"})
        with open(os.path.join(d, "generation_config.json"), "w") as f:
            json.dump(gen, f)
    return dirs


def prompts(name, cfg):
    """input_ids and attention_mask [2, S] of a model's cases."""
    rng = np.random.default_rng(5)
    vocab = cfg["vocab_size"]
    if cfg.get("is_encoder_decoder"):
        ids = rng.integers(3, vocab, (2, SOURCE))
        mask = np.ones_like(ids)
        mask[1, SOURCE - PAD:] = 0
        ids[1, SOURCE - PAD:] = MODELS[name][3]["pad_token_id"]
    else:
        ids = rng.integers(3, vocab, (2, PROMPT))
        mask = np.ones_like(ids)
        mask[1, :PAD] = 0
        ids[1, :PAD] = MODELS[name][3].get("pad_token_id", 0)
    return ids.astype(np.int64), mask.astype(np.int64)


def _gap(gaps, a, b):
    """Records a - b where both are scores of live candidates (barred ones
    carry -1e9)."""
    if a > -1e8 and b > -1e8:
        gaps.append(float(a - b))


def spy_beams(model, gaps, eos):
    """Wraps the model's beam search steps to record the gap at the edge
    of each set a step picks: the k best unfinished candidates that go on,
    the k best candidates among which those that finish are hypotheses,
    the k best hypotheses."""
    import torch
    top_k, update = model._get_top_k_continuations, \
        model._update_finished_beams

    def continuations(accumulated_log_probs, **kw):
        k, keep = kw["num_beams"], kw["beams_to_keep"]
        vocab = accumulated_log_probs.shape[-1] // k
        values, index = torch.topk(accumulated_log_probs, keep + 1)
        ends = kw["cur_len"] + 1 >= kw["decoder_prompt_len"] + NEW
        for v, i in zip(values.tolist(), index.tolist()):
            hit = [ends or j % vocab in eos for j in i]
            # The k best that go on (the one after the 2k kept competing).
            going = [x for x, h in zip(v, hit) if not h]
            if len(going) > k:
                _gap(gaps, going[k - 1], going[k])
            # The first k that may finish: where a finishing one is at the
            # edge.
            if hit[k - 1] or hit[k]:
                _gap(gaps, v[k - 1], v[k])
        return top_k(accumulated_log_probs=accumulated_log_probs, **kw)

    def finished(**kw):
        k = kw["num_beams"]
        lp = kw["topk_log_probs"] / ((kw["cur_len"] + 1 - kw[
            "decoder_prompt_len"]) ** kw["length_penalty"])
        full = torch.all(kw["is_sent_finished"], -1, keepdim=True) & (
            kw["early_stopping"] is True)
        lp = lp + full.float() * -1e9
        lp = lp + (~kw["is_early_stop_heuristic_unsatisfied"]).float() * -1e9
        did = kw["next_token_hits_stopping_criteria"] & \
            kw["top_num_beam_mask"][None, :]
        lp = lp + (~did).float() * -1e9
        merged = torch.cat((kw["beam_scores"], lp), 1)
        for v in torch.topk(merged, k + 1).values.tolist():
            _gap(gaps, v[k - 1], v[k])
        return update(**kw)

    model._get_top_k_continuations = continuations
    model._update_finished_beams = finished


def record(model, ids, mask, case, eos):
    """generate()'s ids and the smallest decision margin."""
    import torch
    gaps = []
    if case["num_beams"] > 1:
        spy_beams(model, gaps, eos.tolist())
    with torch.no_grad():
        out = model.generate(torch.tensor(ids), attention_mask=torch.tensor(
            mask), max_new_tokens=NEW, do_sample=False, output_scores=True,
            return_dict_in_generate=True, **case)
    if case["num_beams"] > 1:
        del model._get_top_k_continuations, model._update_finished_beams
    seqs = out.sequences.numpy()
    if case["num_beams"] == 1:
        start = seqs.shape[1] - len(out.scores)
        for step, scores in enumerate(out.scores):
            before = seqs[:, start:start + step]
            for r in range(len(seqs)):
                if np.isin(before[r], eos).any():
                    continue  # finished: padded, not decided
                top = torch.topk(scores[r], 2).values
                if torch.isfinite(top).all():
                    gaps.append(float(top[0] - top[1]))
    return seqs, min(gaps) if gaps else None


def main():
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoModelForSeq2SeqLM
    work = sys.argv[1]
    out_path = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
        HERE, "generate-expected.json")
    torch.manual_seed(0)
    dirs = write_models(work)
    result = {"versions": {"transformers": transformers.__version__,
                           "torch": torch.__version__,
                           "numpy": np.__version__},
              "max_new_tokens": NEW, "models": {}, "cases": []}
    for name, d in dirs.items():
        cfg, gen = MODELS[name][1], MODELS[name][3]
        auto = AutoModelForSeq2SeqLM if cfg.get("is_encoder_decoder") \
            else AutoModelForCausalLM
        model = auto.from_pretrained(d, dtype=torch.float32).eval()
        gc = model.generation_config
        for field, value in gen.items():
            assert getattr(gc, field) == value, (name, field,
                                                 getattr(gc, field), value)
        result["models"][name] = {
            "generation_config": gen,
            "sha256": {f: sha256(os.path.join(d, f)) for f in
                       ("config.json", "model.safetensors")}}
        ids, mask = prompts(name, cfg)
        eos = np.array(gen["eos_token_id"]).ravel()
        for case in CASES:
            seqs, margin = record(model, ids, mask, case, eos)
            hit = bool(np.isin(seqs[:, -NEW:], eos).any())
            result["cases"].append({
                "model": name, "settings": case, "input_ids": ids.tolist(),
                "attention_mask": mask.tolist(), "expected": seqs.tolist(),
                "eos_hit": hit, "margin": margin})
            print(name, case, seqs.tolist(), "eos hit" if hit else "",
                  "margin %.3g" % margin)
    with open(out_path, "w") as f:  # a case a line
        f.write("{\n%s,\n\"cases\": [\n%s\n]}\n" % (",\n".join(
            "%s: %s" % (json.dumps(k), json.dumps(v)) for k, v in
            result.items() if k != "cases"), ",\n".join(
                json.dumps(c) for c in result["cases"])))


if __name__ == "__main__":
    main()
