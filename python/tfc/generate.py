"""tfc-generate (python -m tfc.generate): token ids in, generated ids out,
through tfc.Generator.

  tfc-generate MODEL_DIR --ids 5,17,3 --max-new-tokens 20 [--num-beams 4]
      [--device gpu]
  tfc-generate MODEL_DIR --ids prompts.npy --attention-mask mask.npy \\
      --max-new-tokens 20 --output out.npy

  mpirun -np 2 tfc-generate MODEL_DIR --tensor-parallel 2 --ids ...

--ids is a comma list (one prompt) or an .npy file of [B, S] int ids.
Without --output the ids print one row per line, comma-separated. A
failure prints one line, "tfc-generate: error: ...", and exits 1. With
--tensor-parallel N the builds are split across the N ranks of the MPI
job (every rank generates the same ids); rank 0 prints or writes them.
"""

import argparse
import os
import sys

import numpy as np

from .generation import Generator
from .runtime import Error


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        sys.exit("tfc-generate: error: %s" % message)


def _flag(value):
    flags = {"true": True, "false": False, "never": "never"}
    if value not in flags:
        raise argparse.ArgumentTypeError("%r: true, false or never" % value)
    return flags[value]


def _ids(value, what):
    if value.endswith(".npy"):
        try:
            return np.load(value)
        except (OSError, ValueError) as e:
            raise Error("%s %s: %s" % (what, value, e)) from None
    try:
        return np.array([[int(v) for v in value.split(",")]], np.int64)
    except ValueError:
        raise Error("%s %r: a comma list of token ids or an .npy file" % (
            what, value)) from None


def _parser():
    p = _Parser(prog="tfc-generate", description=__doc__.split("\n\n")[0])
    p.add_argument("model", help="Hugging Face model directory")
    p.add_argument("--ids", required=True,
                   help="prompt ids: a comma list or an .npy file [B, S]")
    p.add_argument("--attention-mask", help=".npy file [B, S]")
    p.add_argument("--max-new-tokens", type=int, required=True)
    p.add_argument("--max-length", type=int,
                   help="the builds' longest sequence (default: the "
                   "prompt's length + --max-new-tokens)")
    p.add_argument("--num-beams", type=int)
    p.add_argument("--length-penalty", type=float)
    p.add_argument("--early-stopping", type=_flag,
                   help="true, false or never")
    p.add_argument("--eos-token-id", type=int, action="append",
                   help="(repeatable)")
    p.add_argument("--pad-token-id", type=int)
    p.add_argument("--decoder-start-token-id", type=int)
    p.add_argument("--do-sample", action="store_true", default=None)
    p.add_argument("--temperature", type=float)
    p.add_argument("--top-k", type=int)
    p.add_argument("--top-p", type=float)
    p.add_argument("--seed", type=int)
    p.add_argument("--dtype", default="f32", help="f32, f16 or bf16")
    p.add_argument("--device", default="cpu", choices=("cpu", "gpu"),
                   help="gpu: builds for NVIDIA GPUs, the caches kept on the "
                   "device (default cpu)")
    p.add_argument("--cache-dir", help="where the builds are kept")
    p.add_argument("--tensor-parallel", type=int, default=1,
                   help="split the builds across the N ranks of the MPI "
                   "job this runs in (mpirun -np N)")
    p.add_argument("--output", help=".npy file for the ids")
    return p


def main(argv=None):
    a = _parser().parse_args(argv)
    try:
        ids = _ids(a.ids, "--ids")
        mask = None if a.attention_mask is None else \
            _ids(a.attention_mask, "--attention-mask")
        if ids.ndim != 2:
            raise Error("--ids: [batch, length] ids, got shape %s" % (
                list(ids.shape),))
        max_length = a.max_length
        if max_length is None:
            max_length = (ids.shape[1] + a.max_new_tokens if not
                          Generator.is_encoder_decoder(a.model) else
                          1 + a.max_new_tokens)
        with Generator(a.model, max_length, batch=len(ids), dtype=a.dtype,
                       device=a.device, cache_dir=a.cache_dir,
                       tensor_parallel=a.tensor_parallel) as g:
            out = g.generate(
                ids, mask, max_new_tokens=a.max_new_tokens,
                num_beams=a.num_beams, length_penalty=a.length_penalty,
                early_stopping=a.early_stopping, eos_token_id=a.eos_token_id,
                pad_token_id=a.pad_token_id, do_sample=a.do_sample,
                temperature=a.temperature, top_k=a.top_k, top_p=a.top_p,
                seed=a.seed, decoder_start_token_id=a.decoder_start_token_id)
            if g.rank != 0:
                return 0
    except Error as e:
        if a.tensor_parallel > 1 and \
                os.environ.get("OMPI_COMM_WORLD_RANK", "0") != "0":
            sys.exit(1)  # rank 0 says it: every rank meets the same error
        sys.exit("tfc-generate: error: %s" % e.message)
    if a.output:
        np.save(a.output, out)
    else:
        for row in out:
            print(",".join(str(int(t)) for t in row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
