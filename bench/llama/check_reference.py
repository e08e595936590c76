#!/usr/bin/env python3
"""Checks the float64 LLaMA of tests/Integration/CPU/llama.py (the reference
tfc's LLaMA builds are tested against) against transformers' own LlamaModel.

  bash bench/minilm/setup_peers.sh      # once: bench/.venv (torch, transformers)
  bench/.venv/bin/python bench/llama/check_reference.py

transformers' LlamaModel is not float64 throughout even in a float64 model:
LlamaRMSNorm casts to float32, the rotary tables are computed in float32 and
eager attention takes its softmax in float32. Those three are patched to
float64 (same formulas), and then the two models must agree to 1e-12 on the
test's random weights: grouped-query attention, one K/V head with q/k/v/o
biases and linear rope scaling, and plain multi-head attention, a padded
batch row each. (The cases leave out llama3 rope scaling, head_dim and
mlp_bias, which transformers 4.40, where the check began, did not have.)
"""
import os
import sys
import tempfile

import numpy as np
import torch
from transformers import LlamaConfig, LlamaModel
from transformers.models.llama import modeling_llama as ml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "..", "tests", "Integration", "CPU"))
import llama  # noqa: E402


def rms_forward(self, h):
    v = h.pow(2).mean(-1, keepdim=True)
    return self.weight * (h * torch.rsqrt(v + self.variance_epsilon))


def rope_forward(self, x, position_ids):
    c = self.config
    p = c.rope_parameters
    dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    inv = 1.0 / (p["rope_theta"] ** (torch.arange(0, dim, 2,
                                                  dtype=torch.float64) / dim))
    pos = position_ids.double()
    if p["rope_type"] == "linear":
        pos = pos / p["factor"]
    freqs = pos[:, :, None] * inv[None, None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos(), emb.sin()


def main():
    torch.set_default_dtype(torch.float64)
    ml.LlamaRMSNorm.forward = rms_forward
    ml.LlamaRotaryEmbedding.forward = rope_forward
    softmax = torch.nn.functional.softmax
    torch.nn.functional.softmax = \
        lambda x, dim=None, dtype=None: softmax(x, dim=dim)
    cases = [("gqa", {}),
             ("mqa_bias_linear", {"attention_bias": True,
                                  "num_key_value_heads": 1,
                                  "rope_scaling": {"type": "linear",
                                                   "factor": 2.0}}),
             ("mha", {"num_key_value_heads": 4})]
    failed = 0
    for name, extra in cases:
        cfg = dict(llama.CFG, **extra)
        rng = np.random.default_rng(3)
        with tempfile.TemporaryDirectory(prefix="tfc-llama-ref-") as d:
            w = llama.write_model(d, rng, cfg)
        conf = LlamaConfig(**{k: v for k, v in cfg.items()
                              if k != "architectures"})
        conf._attn_implementation = "eager"
        m = LlamaModel(conf).double().eval()
        m.load_state_dict({k[len("model."):]: torch.from_numpy(
            v.astype(np.float64)) for k, v in w.items()}, strict=False)
        ids = rng.integers(0, cfg["vocab_size"], (2, 13))
        mask = np.ones((2, 13), dtype=np.int64)
        mask[1, 9:] = 0
        with torch.no_grad():
            out = m(input_ids=torch.from_numpy(ids),
                    attention_mask=torch.from_numpy(mask))[0].numpy()
        ref = llama.reference(cfg, w, ids, mask)
        rel = np.linalg.norm(out - ref) / np.linalg.norm(ref)
        ok = rel < 1e-12
        failed += not ok
        print("%s %-16s rel. difference %.1e" % ("ok  " if ok else "FAIL",
                                                 name, rel))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
