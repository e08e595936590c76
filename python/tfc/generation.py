"""tfc.Generator: token generation from a Hugging Face decoder or
encoder-decoder compiled by tfc, as transformers' generate() does it.

    gen = tfc.Generator("gpt2-dir", max_length=64, cache_dir="builds")
    ids = gen.generate(prompt_ids, attention_mask, max_new_tokens=20,
                       num_beams=4, length_penalty=0.6)

A decoder (GPT-2, LLaMA, ...) runs as two builds: a prefill of the prompt
(--kv-cache --position-ids --output=logits) and one decode step over a
cache of max_length - 1 slots (--seq-len 1 --past-len max_length-1
--position-ids --present=new --output=logits), the mask hiding the unused
slots. An encoder-decoder (Marian, BART, mBART, T5) runs its encoder
once (--part=encoder --cross-kv: its output's cross-attention keys and
values for every decoder layer, repeated per beam once) and one decoder
step over a self-attention cache of max_length - 1 slots (--part=decoder
--decoder-seq-len 1 --cross-kv --past-len max_length-1 --position-ids
--present=new --output=logits), decoder_attention_mask hiding the unused
slots. Each build is compiled the first time a shape needs it and kept in
`cache_dir`, named by its flags and the model's files.

With device="gpu" the builds are for NVIDIA GPUs (--target=nvptx) and the
caches stay on the device for the whole generation (tfc.device): the KV
cache and an encoder-decoder's cross-attention keys and values are device
tensors each step binds in place, the step's new keys and values are
copied into their cache slot on the device (one strided copy per cache
tensor, tfc_device_tensor_copy_2d), beam search reorders the
cache by row copies into a second one, and only the logits come to the
host (the search runs there).

With tensor_parallel=N (under mpirun, every rank alike) each rank keeps its
heads of the KV cache and of an encoder-decoder's cross-attention keys and
values (run(..., gather=False): tfc/parallel.py) and picks
the same tokens from the whole logits (sampling needs a seed).

Greedy search and beam search follow transformers' generation/utils.py
(5.x) step for step: beam scores are sums of log-probabilities, a finished
hypothesis scores sum / generated_len ** length_penalty, 2 * num_beams
candidates are kept per step, early_stopping True / False / "never" as
there, EOS and padding after it as there. The logits processors
transformers applies from the generation config are those in PROCESSORS;
a generation config that asks for another one is refused. Sampling
(temperature, top-k, top-p) draws from numpy's RNG (seed), so its tokens
differ from torch's draws though their distribution is the same.
"""

import hashlib
import json
import os
import tempfile

import numpy as np

from . import _locate
from .compiler import CompileError, compile as _compile
from .device import DeviceTensor
from .runtime import Error, Model

__all__ = ["Generator", "PROCESSORS"]

# The generation-config fields applied, in transformers' order.
PROCESSORS = ("bad_words_ids", "min_length", "min_new_tokens",
              "forced_bos_token_id", "forced_eos_token_id",
              "renormalize_logits")
# Fields of other logits processors, with the value that leaves them off.
_NOT_IMPLEMENTED = {
    "repetition_penalty": 1.0, "encoder_repetition_penalty": 1.0,
    "no_repeat_ngram_size": 0, "encoder_no_repeat_ngram_size": 0,
    "sequence_bias": None, "suppress_tokens": None,
    "begin_suppress_tokens": None, "exponential_decay_length_penalty": None,
    "guidance_scale": 1.0, "typical_p": 1.0, "min_p": None,
    "epsilon_cutoff": 0.0, "eta_cutoff": 0.0, "top_h": None,
    "diversity_penalty": 0.0, "num_beam_groups": 1,
    "remove_invalid_values": False}
# The search settings a generation config may give, transformers' defaults.
_SEARCH_DEFAULTS = {"num_beams": 1, "length_penalty": 1.0,
                    "early_stopping": False, "do_sample": False,
                    "temperature": 1.0, "top_k": 50, "top_p": 1.0}
_NEG = np.float32(-1.0e9)  # transformers' score of a barred beam


def _fail(message):
    raise Error("tfc.generate: " + message)


def _token_list(value, name):
    """An int or a list of ints as a list (None as None)."""
    if value is None:
        return None
    values = [value] if np.isscalar(value) else list(value)
    if not values or any(int(v) != v or v < 0 for v in values):
        _fail("%s %r: a token id or a list of them" % (name, value))
    return [int(v) for v in values]


def generation_config(directory):
    """The model's generation settings: generation_config.json where it
    exists, else the fields of config.json (as transformers'
    GenerationConfig.from_model_config takes them)."""
    for name in ("generation_config.json", "config.json"):
        path = os.path.join(directory, name)
        if os.path.exists(path):
            try:
                with open(path) as f:
                    cfg = json.load(f)
            except (OSError, ValueError) as e:
                raise Error("tfc.Generator: %s: %s" % (path, e)) from None
            if not isinstance(cfg, dict):
                raise Error("tfc.Generator: %s: not a JSON object" % path)
            cfg["_file"] = path
            return cfg
    raise Error("tfc.Generator: %s has no config.json" % directory,
                "NOT_FOUND")


def _model_config(directory):
    """config.json's bytes and its object."""
    path = os.path.join(directory, "config.json")
    if not os.path.isfile(path):
        raise Error("tfc.Generator: %s: no config.json (a Hugging Face "
                    "model directory)" % directory, "NOT_FOUND")
    with open(path, "rb") as f:
        raw = f.read()
    try:
        cfg = json.loads(raw)
    except ValueError as e:
        raise Error("tfc.Generator: %s: %s" % (path, e)) from None
    if not isinstance(cfg, dict):
        raise Error("tfc.Generator: %s: not a JSON object" % path)
    return raw, cfg


def _log_softmax(x):
    x = x.astype(np.float64)
    m = np.max(x, -1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    z = x - m
    return (z - np.log(np.sum(np.exp(z), -1, keepdims=True))).astype(
        np.float32)


def _softmax(x):
    return np.exp(_log_softmax(x).astype(np.float64))


def _ranked(x):
    """Indices of x's last axis, largest first; ties by lower index."""
    return np.argsort(-x, axis=-1, kind="stable")


def _top(x, n):
    """The first n of _ranked(x) (a 2-D x), without sorting all of a row:
    the values at least each row's n-th largest, sorted as _ranked sorts."""
    if n >= x.shape[-1]:
        return _ranked(x)[:, :n]
    nth = np.partition(x, x.shape[-1] - n, axis=-1)[:, x.shape[-1] - n]
    out = np.empty((x.shape[0], n), np.int64)
    for r in range(x.shape[0]):
        cand = np.flatnonzero(x[r] >= nth[r])  # ascending: ties stay in order
        out[r] = cand[np.argsort(-x[r, cand], kind="stable")][:n]
    return out


class Generator:
    """Generates token ids with tfc builds of the Hugging Face model in
    directory `model`, for sequences of at most `max_length` tokens (a
    decoder's prompt and new tokens; an encoder-decoder's decoder tokens,
    its start token included).

    dtype: "f32", "f16" or "bf16" (the logits are f32 either way).
    device: "cpu" or "gpu" (builds for --target=nvptx, the caches kept on
      the device); by default "gpu" where extra_args has --target=nvptx,
      else "cpu".
    cache_dir: where the builds are kept across Generators and processes
      (created if missing); by default a temporary directory of this
      Generator. batch: the batch size whose decode step is compiled now
      (others when first used). threads, extra_args: as tfc.compile's.
    tensor_parallel: the ranks of the MPI job the builds are split across.

    A model tfc cannot build a decode step of raises Error here, with
    tfc-compile's one-line message."""

    def __init__(self, model, max_length, *, batch=1, dtype="f32",
                 device=None, cache_dir=None, threads=None, extra_args=(),
                 tensor_parallel=1):
        self.directory = os.fspath(model)
        raw, self.config = _model_config(self.directory)
        self.encoder_decoder = bool(self.config.get("is_encoder_decoder"))
        self.max_length = int(max_length)
        if self.max_length < 2:
            raise Error("tfc.Generator: max_length %d: at least 2 (a token "
                        "and the one generated after it)" % self.max_length)
        self.dtype, self.threads = dtype, threads
        self.extra_args = [os.fspath(a) for a in extra_args]
        if tensor_parallel != 1:
            self.extra_args.append("--tensor-parallel=%s" % tensor_parallel)
        gpu = "--target=nvptx" in self.extra_args
        if device is None:
            device = "gpu" if gpu else "cpu"
        if device not in ("cpu", "gpu"):
            raise Error("tfc.Generator: device %r: \"cpu\" or \"gpu\"" %
                        (device,))
        if device == "cpu" and gpu:
            raise Error("tfc.Generator: device \"cpu\" with --target=nvptx "
                        "in extra_args (a GPU build: device=\"gpu\")")
        self.device = device
        if device == "gpu" and not gpu:
            self.extra_args.append("--target=nvptx")
        self.gen_config = generation_config(self.directory)
        for field, off in _NOT_IMPLEMENTED.items():
            value = self.gen_config.get(field)
            if value is not None and value != off:
                raise Error("tfc.Generator: %s sets %s = %r: tfc's generation "
                            "applies only %s" % (
                                self.gen_config["_file"], field, value,
                                ", ".join(PROCESSORS)))
        weights = os.path.join(self.directory, "model.safetensors")
        self.weights = weights if os.path.exists(weights) else None
        # The builds kept in cache_dir are of these files, flags and
        # tfc-compile.
        compiler = _locate.compiler()[0]
        stamps = [(os.stat(p).st_size, os.stat(p).st_mtime_ns)
                  for p in (self.weights, compiler) if p]
        self._fingerprint = hashlib.sha256(
            raw + repr((stamps, dtype, threads, self.extra_args)).encode()
        ).hexdigest()
        self._owned = None
        if cache_dir is None:
            self._owned = tempfile.TemporaryDirectory(prefix="tfc-generate-")
            cache_dir = self._owned.name
        self.cache_dir = os.fspath(cache_dir)
        os.makedirs(self.cache_dir, exist_ok=True)
        self._models = {}
        if not self.encoder_decoder:
            self._step_model(int(batch))

    @property
    def rank(self):
        """This process's rank among the builds' ranks (0 unless split)."""
        return next(iter(self._models.values())).rank if self._models else 0

    @staticmethod
    def is_encoder_decoder(model):
        """Whether the model in directory `model` is an encoder-decoder."""
        return bool(_model_config(os.fspath(model))[1].get(
            "is_encoder_decoder"))

    def close(self):
        """Unloads the builds (and removes the temporary cache_dir)."""
        for m in self._models.values():
            m.close()
        self._models = {}
        if self._owned is not None:
            self._owned.cleanup()
            self._owned = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # The builds.

    def _build(self, batch, seq_len, flags):
        """The build of these flags, compiled on first use."""
        key = (batch, seq_len) + tuple(flags)
        if key in self._models:
            return self._models[key]
        name = hashlib.sha256((self._fingerprint + repr(key)).encode()
                              ).hexdigest()[:24]
        path = os.path.join(self.cache_dir, "tfc-%s.so" % name)
        if not os.path.exists(path):
            part = path + ".%d.part" % os.getpid()
            try:
                _compile(self.directory, part, batch=batch, seq_len=seq_len,
                         dtype=self.dtype, threads=self.threads,
                         extra_args=list(flags) + self.extra_args,
                         load=False)
            except CompileError as e:
                raise Error("tfc.Generator: cannot build %s's %s: %s" % (
                    self.directory, "encoder-decoder step"
                    if self.encoder_decoder else "decode step with a KV "
                    "cache", e.message), e.code) from None
            os.replace(part, path)
        m = self._models[key] = Model(path, weights=self.weights)
        return m

    def _step_model(self, batch):
        return self._build(batch, 1, [
            "--past-len=%d" % (self.max_length - 1), "--position-ids",
            "--present=new", "--output=logits"])

    # Generation.

    def _setting(self, given, name):
        if given is not None:
            return given
        value = self.gen_config.get(name)
        return _SEARCH_DEFAULTS[name] if value is None else value

    def generate(self, input_ids, attention_mask=None, *, max_new_tokens,
                 num_beams=None, length_penalty=None, early_stopping=None,
                 eos_token_id=None, pad_token_id=None, do_sample=None,
                 temperature=None, top_k=None, top_p=None, seed=None,
                 decoder_start_token_id=None):
        """Token ids [B, T] (int64) as transformers' generate() returns
        them: a decoder's prompt then the new tokens; an encoder-decoder's
        decoder_start_token_id then the new tokens; padding after a row's
        EOS (greedy) or after a shorter hypothesis (beam search).

        input_ids, attention_mask: [B, S] (attention_mask by default
        input_ids != pad where the pad token occurs and is no EOS, else
        ones; decoders' prompts padded on the left). A setting left None
        is the model's generation config's, else transformers' default
        (num_beams 1, length_penalty 1.0, early_stopping False, greedy,
        temperature 1.0, top_k 50, top_p 1.0). eos_token_id: an id or a
        list. seed: the sampling RNG's."""
        gc = self.gen_config
        ids = np.asarray(input_ids)
        if ids.ndim == 1:
            ids = ids[None]
        if ids.ndim != 2 or ids.size == 0 or ids.dtype.kind not in "iu":
            _fail("input_ids: a [batch, length] array of token ids, got %s "
                  "%s" % (ids.dtype, list(ids.shape)))
        ids = ids.astype(np.int64)
        eos = _token_list(eos_token_id if eos_token_id is not None
                          else gc.get("eos_token_id"), "eos_token_id")
        pad = pad_token_id if pad_token_id is not None else \
            gc.get("pad_token_id")
        if pad is None and eos is not None:
            pad = eos[0]
        mask = self._mask(ids, attention_mask, pad, eos)
        s = {n: self._setting(v, n) for n, v in (
            ("num_beams", num_beams), ("length_penalty", length_penalty),
            ("early_stopping", early_stopping), ("do_sample", do_sample),
            ("temperature", temperature), ("top_k", top_k),
            ("top_p", top_p))}
        beams = s["num_beams"]
        if int(beams) != beams or beams < 1:
            _fail("num_beams %r: 1 or more" % (beams,))
        if int(max_new_tokens) != max_new_tokens or max_new_tokens < 1:
            _fail("max_new_tokens %r: 1 or more" % (max_new_tokens,))
        if s["early_stopping"] not in (True, False, "never"):
            _fail("early_stopping %r: True, False or \"never\"" %
                  (s["early_stopping"],))
        if s["do_sample"] and beams > 1:
            _fail("do_sample with num_beams %d: beam sampling is not "
                  "implemented" % beams)
        if s["do_sample"] and not (s["temperature"] > 0 and s["top_k"] >= 0
                                   and 0 < s["top_p"] <= 1):
            _fail("temperature %r, top_k %r, top_p %r: temperature > 0, "
                  "top_k >= 0 (0: off), 0 < top_p <= 1" % (
                      s["temperature"], s["top_k"], s["top_p"]))
        if self.encoder_decoder:
            start = decoder_start_token_id
            for name in ("decoder_start_token_id", "bos_token_id"):
                start = gc.get(name) if start is None else start
            if start is None:
                _fail("%s: an encoder-decoder needs decoder_start_token_id "
                      "(or bos_token_id)" % gc["_file"])
            prompt = np.full((ids.shape[0], 1), int(start), np.int64)
        else:
            prompt = ids
        max_length = prompt.shape[1] + int(max_new_tokens)
        if max_length > self.max_length:
            _fail("%d %s + max_new_tokens %d = %d tokens, beyond this "
                  "Generator's max_length %d" % (
                      prompt.shape[1], "decoder start token" if
                      self.encoder_decoder else "prompt tokens",
                      max_new_tokens, max_length, self.max_length))
        procs = _Processors(gc, eos, prompt.shape[1], max_length, s,
                            self._vocab(), beams)
        run = (_EncoderDecoderRun if self.encoder_decoder else _DecoderRun)(
            self, ids, mask, beams)
        if s["do_sample"] and seed is None and run.model.ranks > 1:
            _fail("do_sample on builds split across %d ranks needs a seed "
                  "(every rank draws the same tokens)" % run.model.ranks)
        search = _Search(run, procs, eos, pad, max_length)
        if beams > 1:
            return search.beam(prompt, beams, float(s["length_penalty"]),
                               s["early_stopping"])
        return search.greedy(prompt, bool(s["do_sample"]),
                             np.random.default_rng(seed))

    def _vocab(self):
        c = self.config
        if self.encoder_decoder and not c.get(
                "share_encoder_decoder_embeddings", True):
            return int(c.get("decoder_vocab_size") or c["vocab_size"])
        return int(c["vocab_size"])

    @staticmethod
    def _mask(ids, attention_mask, pad, eos):
        if attention_mask is None:
            # transformers' default: the pad token's places where it occurs
            # and is no EOS.
            if pad is not None and (ids == pad).any() and \
                    (eos is None or pad not in eos):
                return (ids != pad).astype(np.int64)
            return np.ones_like(ids)
        mask = np.asarray(attention_mask)
        if mask.shape != ids.shape:
            _fail("attention_mask %s: the shape of input_ids %s" % (
                list(mask.shape), list(ids.shape)))
        return mask.astype(np.int64)


class _HostCache:
    """A run's KV cache in numpy arrays [N, heads, slots, ...] passed to
    each step."""

    on_device = False

    def __init__(self, tensors):
        self.tensors = tensors

    def store(self, out, slot):
        """A step's outputs: its new keys and values (out[1:]) written into
        slot `slot`; returns the last token's logits."""
        for c, o in zip(self.tensors, out[1:]):
            c[:, :, slot] = o[:, :, 0]
        return out[0][:, -1]

    def reorder(self, rows):
        self.tensors = [c[rows] for c in self.tensors]


def _device_copies(dst, src, spans):
    """Copies (dst byte offset, src byte offset, bytes) spans from device
    tensor src to dst on the device, adjacent spans as one copy."""
    run = None
    for d, s, n in spans:
        if run and run[0] + run[2] == d and run[1] + run[2] == s:
            run[2] += n
            continue
        if run:
            dst.copy_from(src, run[2], run[0], run[1])
        run = [d, s, n]
    if run:
        dst.copy_from(src, run[2], run[0], run[1])


def _device_place(dst, src, start, repeat=1):
    """dst[i * repeat + j, :, start:start + n] = src[i] for j < repeat, on
    the device: src [N, heads, n, ...], dst [N * repeat, heads, slots,
    ...]. One 2-D copy (a row per row and head) when repeat is 1, else one
    per (i, j)."""
    rows, heads, n = src.shape[:3]
    slots = dst.shape[2]
    slot = src.nbytes // max(rows * heads * n, 1)  # bytes of one slot
    blocks = [(0, 0, rows * heads)] if repeat == 1 else [
        ((i * repeat + j) * heads, i * heads, heads)
        for i in range(rows) for j in range(repeat)]
    for d, s, height in blocks:
        dst.copy_2d_from(src, n * slot, height,
                         offset=(d * slots + start) * slot,
                         pitch=slots * slot, src_offset=s * n * slot,
                         src_pitch=n * slot)


class _DeviceCache:
    """A run's KV cache in device tensors: each step binds them in place,
    its new keys and values (device outputs) are copied into their slot on
    the device, one 2-D copy per tensor, and only the logits come to the
    host; beam search reorders the rows into a second set of tensors, one
    copy per run of consecutive rows."""

    on_device = True

    def __init__(self, model, tensors):
        self.model, self.tensors, self._spare = model, tensors, None

    def store(self, out, slot):
        for c, o in zip(self.tensors, out[1:]):
            _device_place(c, o, slot)
        return out[0].numpy()[:, -1]

    def reorder(self, rows):
        rows = np.asarray(rows)
        if np.array_equal(rows, np.arange(len(rows))):
            return
        if self._spare is None:
            self._spare = [DeviceTensor(c.shape, c.dtype, self.model._rt)
                           for c in self.tensors]
        for dst, src in zip(self._spare, self.tensors):
            row = src.nbytes // src.shape[0]
            _device_copies(dst, src, ((r * row, int(f) * row, row)
                                      for r, f in enumerate(rows)))
        self.tensors, self._spare = self._spare, self.tensors


def _cache(model, on_device, shapes, prefill=(), start=0, repeat=1):
    """A zero cache of `shapes` ((shape, numpy dtype) each), the prefill's
    keys and values [N, heads, n, ...] (numpy or device tensors) written
    at slots [start, start + n) of each row repeated `repeat` times."""
    if on_device:
        tensors = [DeviceTensor(s, d, model._rt) for s, d in shapes]
        for t, o in zip(tensors, prefill):
            _device_place(t, o, start, repeat)
        return _DeviceCache(model, tensors)
    tensors = [np.zeros(s, d) for s, d in shapes]
    for t, o in zip(tensors, prefill):
        t[:, :, start:start + o.shape[2]] = np.repeat(o, repeat, 0)
    return _HostCache(tensors)


def _cache_shapes(model):
    """(shape, numpy dtype) of a step build's past_key_values inputs."""
    return [(tuple(i.shape), np.dtype(np.uint16 if i.dtype == "bf16"
                                      else i.dtype))
            for i in model.inputs if i.name.startswith("past_key_values.")]


def _host(array):
    return array.numpy() if isinstance(array, DeviceTensor) else array


class _DecoderRun:
    """A decoder's prefill, then one step per token over a fixed cache."""

    def __init__(self, gen, ids, mask, k):
        b, s = ids.shape
        gpu = gen.device == "gpu"
        pos = np.where(mask == 0, 0, np.cumsum(mask, -1) - 1).astype(np.int64)
        prefill = gen._build(b, s, ["--kv-cache", "--position-ids",
                                    "--output=logits"])
        out = prefill.run(ids, mask, pos, outputs_on_device=gpu,
                          gather=False)
        self.first = np.repeat(_host(out[0])[:, -1], k, 0)
        cap = gen.max_length - 1
        self.model = gen._step_model(b * k)
        self.cache = _cache(self.model, gpu, _cache_shapes(self.model),
                            out[1:], 0, k)
        self.mask = np.zeros((b * k, cap + 1), np.int64)
        self.mask[:, :s] = np.repeat(mask, k, 0)
        self.mask[:, cap] = 1
        self.pos = np.repeat(pos[:, -1], k, 0)
        self.slot = s

    def step(self, tokens):
        """The logits after feeding `tokens` [B*k], one per row."""
        self.pos = self.pos + 1
        out = self.model.run(tokens[:, None].astype(np.int64), self.mask,
                             self.pos[:, None], *self.cache.tensors,
                             outputs_on_device=self.cache.on_device,
                             gather=False)
        self.mask[:, self.slot] = 1
        self.slot += 1
        return self.cache.store(out, self.slot - 1)

    def reorder(self, rows):
        self.cache.reorder(rows)
        self.mask, self.pos = self.mask[rows], self.pos[rows]


class _EncoderDecoderRun:
    """The encoder once, with the cross-attention keys and values, then
    one decoder step build over a fixed self-attention cache: slot j holds
    the keys and values of decoder position j."""

    def __init__(self, gen, ids, mask, k):
        b, s = ids.shape
        gpu = gen.device == "gpu"
        encoder = gen._build(b, s, ["--part=encoder", "--cross-kv"])
        # Every beam of a row attends to the same source.
        out = encoder.run(ids, mask, outputs_on_device=gpu,
                          gather=False)[1:]
        self.mask = np.repeat(mask, k, 0)
        cap = gen.max_length - 1
        self.model = gen._build(b * k, s, [
            "--part=decoder", "--decoder-seq-len=1", "--cross-kv",
            "--past-len=%d" % cap, "--position-ids", "--present=new",
            "--output=logits"])
        self.cross = _cache(self.model, gpu, [
            ((o.shape[0] * k,) + o.shape[1:], o.dtype) for o in out],
            out, 0, k).tensors
        self.cache = _cache(self.model, gpu, _cache_shapes(self.model))
        self.self_mask = np.zeros((b * k, cap + 1), np.int64)
        self.self_mask[:, cap] = 1
        self.slot = 0
        self.first = None  # the first logits come from the start token

    def step(self, tokens):
        """The logits after feeding `tokens` [B*k], one per row, at
        position self.slot."""
        out = self.model.run(
            tokens[:, None].astype(np.int64), *self.cross, self.mask,
            self.self_mask, np.full((len(tokens), 1), self.slot, np.int64),
            *self.cache.tensors, outputs_on_device=self.cache.on_device,
            gather=False)
        self.self_mask[:, self.slot] = 1
        self.slot += 1
        return self.cache.store(out, self.slot - 1)

    def reorder(self, rows):
        # The mask and the position are the same in every row.
        self.cache.reorder(rows)


class _Processors:
    """The logits processors of transformers' _get_logits_processor that a
    generation config turns on (PROCESSORS), then the sampling warpers."""

    def __init__(self, gc, eos, prompt_len, max_length, s, vocab, beams):
        self.eos, self.prompt_len, self.max_length = eos, prompt_len, \
            max_length
        self.bad = {}
        for seq in gc.get("bad_words_ids") or []:
            seq = _token_list(seq, "bad_words_ids entry")
            if any(t >= vocab for t in seq):
                _fail("%s: bad_words_ids entry %s beyond the vocabulary of "
                      "%d" % (gc["_file"], seq, vocab))
            if eos is None or len(seq) > 1 or seq[0] not in eos:
                self.bad.setdefault(tuple(seq[:-1]), []).append(seq[-1])
        self.min_length = int(gc.get("min_length") or 0) if eos else 0
        self.min_new = int(gc.get("min_new_tokens") or 0) if eos else 0
        self.forced_bos = gc.get("forced_bos_token_id")
        self.forced_eos = _token_list(gc.get("forced_eos_token_id"),
                                      "forced_eos_token_id")
        self.renormalize = bool(gc.get("renormalize_logits"))
        self.sample = s if s["do_sample"] else None

    def __call__(self, ids, scores):
        """transformers' processors on `scores` [N, V] (float32) after the
        tokens `ids` [N, cur_len]."""
        scores = scores.copy()
        cur = ids.shape[1]
        for prefix, last in self.bad.items():
            n = len(prefix)
            if n > cur:
                continue
            rows = np.all(ids[:, cur - n:] == np.array(prefix, np.int64),
                          -1) if n else np.ones(len(ids), bool)
            scores[np.ix_(rows, last)] = -np.inf
        if cur < self.min_length or cur - self.prompt_len < self.min_new:
            scores[:, self.eos] = -np.inf
        if self.forced_bos is not None and cur == 1:
            scores[:] = -np.inf
            scores[:, self.forced_bos] = 0
        if self.forced_eos is not None and cur == self.max_length - 1:
            scores[:] = -np.inf
            scores[:, self.forced_eos] = 0
        if self.sample is not None:
            scores = self._warp(scores)
        if self.renormalize:
            scores = _log_softmax(scores)
        return scores

    def _warp(self, scores):
        """Temperature, top-k, top-p (transformers' warpers, one token kept
        at least)."""
        s = self.sample
        if s["temperature"] != 1.0:
            scores = (scores / np.float32(s["temperature"])).astype(
                np.float32)
        k = min(int(s["top_k"]), scores.shape[-1])
        if k:
            kth = -np.sort(-scores, -1)[:, k - 1:k]
            scores = np.where(scores < kth, -np.inf, scores).astype(
                np.float32)
        if s["top_p"] < 1.0:
            order = np.argsort(scores, -1, kind="stable")
            ascending = np.take_along_axis(scores, order, -1)
            cum = np.cumsum(_softmax(ascending), -1)
            drop = cum <= 1 - s["top_p"]
            drop[:, -1] = False
            remove = np.zeros_like(drop)
            np.put_along_axis(remove, order, drop, -1)
            scores = np.where(remove, -np.inf, scores).astype(np.float32)
        return scores


class _Search:
    """Greedy search, sampling and beam search over a run's logits."""

    def __init__(self, run, procs, eos, pad, max_length):
        self.run, self.procs, self.eos, self.pad = run, procs, eos, pad
        self.max_length = max_length

    def _first(self, prompt_tokens):
        first = self.run.first
        return self.run.step(prompt_tokens) if first is None else first

    def _stops(self, seqs):
        """transformers' stopping criteria on sequences [N, cur_len]: the
        maximum length, or an EOS last."""
        done = np.full(len(seqs), seqs.shape[1] >= self.max_length)
        if self.eos is not None:
            done |= np.isin(seqs[:, -1], self.eos)
        return done

    def greedy(self, prompt, sample, rng):
        ids = prompt
        unfinished = np.ones(len(ids), bool)
        logits = self._first(ids[:, -1])
        while True:
            scores = self.procs(ids, logits.astype(np.float32))
            if sample:
                p = _softmax(scores)
                cum = np.cumsum(p, -1)
                u = rng.random(len(p))[:, None] * cum[:, -1:]
                nxt = np.minimum((cum <= u).sum(-1), p.shape[1] - 1)
            else:
                nxt = np.argmax(scores, -1)
            if self.eos is not None:
                nxt = np.where(unfinished, nxt, self.pad)
            ids = np.concatenate([ids, nxt[:, None].astype(np.int64)], 1)
            unfinished &= ~self._stops(ids)
            if not unfinished.any():
                return ids
            logits = self.run.step(ids[:, -1])

    def beam(self, prompt, k, lp, early):
        """transformers' _beam_search, in float32 as there."""
        b, plen = prompt.shape
        L, eos = self.max_length, self.eos
        keep = max(2, 1 + (len(eos) if eos else 0)) * k
        top_k_mask = np.arange(keep) < k
        fill = (self.pad or eos[0]) if eos is not None else -1
        running = np.full((b, k, L), fill, np.int64)
        running[:, :, :plen] = prompt[:, None]
        seqs = running.copy()
        run_scores = np.zeros((b, k), np.float32)
        run_scores[:, 1:] = _NEG
        scores = np.full((b, k), _NEG, np.float32)
        finished = np.zeros((b, k), bool)
        improvable = np.ones((b, 1), bool)
        run_idx = np.full((b, k, L - plen), -1, np.int32)
        idx = run_idx.copy()
        cur = plen
        logits = self._first(np.repeat(prompt[:, -1], k))
        rows = np.arange(b)[:, None]
        while True:
            flat = running[:, :, :cur].reshape(b * k, cur)
            logp = self.procs(flat, _log_softmax(logits))
            acc = (logp.reshape(b, k, -1) + run_scores[:, :, None]).reshape(
                b, -1).astype(np.float32)
            vocab = acc.shape[1] // k
            top = _top(acc, keep)
            top_scores = np.take_along_axis(acc, top, 1)
            src = top // vocab
            cand = running[rows, src].copy()
            cand[:, :, cur] = top % vocab
            cand_idx = run_idx[rows, src].copy()
            cand_idx[:, :, cur - plen] = src + np.arange(b)[:, None] * k
            hits = self._stops(cand[:, :, :cur + 1].reshape(
                b * keep, cur + 1)).reshape(b, keep)
            # The live beams: the best candidates that did not stop.
            live = (top_scores + hits.astype(np.float32) * _NEG).astype(
                np.float32)
            nxt = _ranked(live)[:, :k]
            running = cand[rows, nxt]
            run_scores = live[rows, nxt]
            run_idx = cand_idx[rows, nxt]
            # The finished hypotheses: merged with the top k that stopped.
            just = hits & top_k_mask[None]
            fin = (top_scores / np.float32((cur + 1 - plen) ** lp)).astype(
                np.float32)
            full = finished.all(-1, keepdims=True) & (early is True)
            fin = fin + full.astype(np.float32) * _NEG
            fin = fin + (~improvable).astype(np.float32) * _NEG
            fin = (fin + (~just).astype(np.float32) * _NEG).astype(
                np.float32)
            m_scores = np.concatenate([scores, fin], 1)
            best = _ranked(m_scores)[:, :k]
            seqs = np.concatenate([seqs, cand], 1)[rows, best]
            idx = np.concatenate([idx, cand_idx], 1)[rows, best]
            finished = np.concatenate([finished, just], 1)[rows, best]
            scores = m_scores[rows, best]
            beam_rows = run_idx[:, :, cur - plen].reshape(-1)
            cur += 1
            if early == "never" and lp > 0.0:
                hypothetical = L - plen
            else:
                hypothetical = cur - plen
            possible = (run_scores[:, :1] / np.float32(
                hypothetical ** lp)).astype(np.float32)
            worst = np.where(finished, scores.min(1, keepdims=True),
                             np.float32(-1.0e9))
            improvable = improvable & np.any(possible > worst, -1,
                                             keepdims=True)
            if not (improvable.any() and
                    not (finished.all() and early is True) and
                    not hits.all()):
                break
            self.run.reorder(beam_rows)
            logits = self.run.step(running[:, :, cur - 1].reshape(-1))
        generated = int((idx[:, 0] != -1).sum(-1).max())
        return seqs[:, 0, :plen + generated]
