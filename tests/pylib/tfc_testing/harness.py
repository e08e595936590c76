"""Compile MLIR with tfc-compile, run it with tfc-run, compare with numpy.

Shared by the CPU numerics tests: every check compiles the fused and the
unfused build of the same graph, runs both on fresh random inputs (tfc-run
poisons outputs with NaN before every run, so unwritten elements fail) and
compares each with a float64 reference.
"""

import os
import subprocess
import sys

import numpy as np

from tfc_testing.arrays import (bf16_to_f32, one_ulp_moves, random_tokens,
                                relative_error, rounded_weights)
from tfc_testing import tfc_run
from tfc_testing.reference import quantized_activations, quantized_weight


def parse_args(argv):
    """The positional arguments, the target (--target=cpu|nvptx) and the
    other tfc-compile flags (--gpu-binary=...) of a test's command line."""
    args = [a for a in argv if not a.startswith("--")]
    target = "cpu"
    flags = []
    for a in argv:
        if a.startswith("--target="):
            target = a[len("--target="):]
        elif a.startswith("--gpu-binary="):
            flags.append(a)
    return args, target, flags


def start(argv):
    """The harness and random generator of a test's command line (BINDIR
    WORKDIR [SEED] [--target=...] [--cases=NAME,...] [tfc-compile flags]);
    a seed not given is drawn, and printed either way. Returns (harness,
    rng, target)."""
    args, target, flags = parse_args(argv)
    bindir, workdir = args[:2]
    seed = int(args[2]) if len(args) > 2 else \
        np.random.SeedSequence().entropy % (2**32)
    print("seed", seed)
    h = Harness(bindir, workdir, target, flags)
    h.seed = seed
    for a in argv:
        if a.startswith("--cases="):
            h.cases = a[len("--cases="):].split(",")
    return h, np.random.default_rng(seed), target


class RoundedPast(list):
    """The `kv` list a reference model appends each layer's keys and values
    to ([B, heads, S, D]), which first overwrites those of the first `past`
    positions with the layer's entry of `given` (in place: the reference
    goes on with them). The later tokens are then computed from the cache
    a decode build is handed, the reference's own keys and values rounded
    to the build's type, rather than from the exact ones."""

    def __init__(self, past, given):
        super().__init__()
        self.past, self.given = past, given

    def append(self, pair):
        for t, g in zip(pair, self.given[len(self)]):
            t[:, :, :self.past] = g.astype(np.float64)
        super().append(pair)


class Harness:
    def __init__(self, bindir, workdir, target="cpu", compile_flags=()):
        self.target = target
        self.compile_flags = list(compile_flags)
        self.compile = os.path.join(bindir, "tfc-compile")
        self.run_tool = os.path.join(bindir, "tfc-run")
        self.workdir = workdir
        os.makedirs(workdir, exist_ok=True)
        self.failures = 0
        self.failed = []  # the lines of the failed checks
        self.seed = None  # printed again with them when known
        self.checks = 0
        self.cases = None  # --cases=NAME,...: run only those

    def use_build(self):
        """Points the Python package (tfc.compile, tfc.Model) at this
        build's tfc-compile and runtime ($TFC_COMPILE, $TFC_RUNTIME_LIB);
        mpirun's ranks inherit them."""
        os.environ["TFC_COMPILE"] = self.compile
        os.environ["TFC_RUNTIME_LIB"] = os.path.join(
            os.path.dirname(os.path.dirname(os.path.abspath(self.compile))),
            "lib", "libtfcrt.so")

    def wants(self, case):
        """Whether the command line selects `case` (all without --cases)."""
        return self.cases is None or case in self.cases

    def path(self, name):
        return os.path.join(self.workdir, name)

    def build(self, name, mlir, fused, entry=None, flags=()):
        src = self.path(name + ".mlir")
        with open(src, "w") as f:
            f.write(mlir)
        lib = self.path(name + (".fused" if fused else ".unfused") + ".so")
        cmd = [self.compile, src, "-o", lib, "--target=" + self.target]
        cmd += self.compile_flags
        if not fused:
            cmd.append("--no-fusion")
        if entry:
            cmd.append("--entry=" + entry)
        cmd += flags
        subprocess.run(cmd, check=True, stderr=subprocess.PIPE)
        return lib

    def build_hf(self, name, model, batch, seq, fused, flags=()):
        """tfc-compile --hf MODEL [FLAGS] (no --seq-len where `seq` is None:
        an image model's); returns the library and the fusion summary
        tfc-compile printed."""
        lib = self.path(name + (".fused" if fused else ".unfused") + ".so")
        cmd = [self.compile, "--hf", model, "--batch", str(batch)]
        if seq is not None:
            cmd += ["--seq-len", str(seq)]
        cmd += ["-o", lib, "--target=" + self.target]
        cmd += self.compile_flags + list(flags)
        if not fused:
            cmd.append("--no-fusion")
        summary = subprocess.run(cmd, check=True, stderr=subprocess.PIPE,
                                 text=True).stderr.strip()
        return lib, summary

    def run_args(self, lib, model, inputs, num_outputs):
        """The tfc-run command for `lib` on `inputs` (written as .npy),
        with the model's model.safetensors when `model` is given, and the
        paths of its outputs."""
        weights = os.path.join(model, "model.safetensors") if model else None
        return tfc_run.command(self.run_tool, lib, inputs, num_outputs,
                               self.path, weights)

    def run_hf(self, lib, model, inputs, num_outputs=1):
        """Runs a library built by build_hf on the model's
        model.safetensors; returns its output (a list of `num_outputs`
        when more than one)."""
        args, outs = self.run_args(lib, model, inputs, num_outputs)
        subprocess.run(args, check=True)
        got = [np.load(p) for p in outs]
        return got[0] if num_outputs == 1 else got

    def expect_token_refused(self, label, lib, model, ids, mask, vocab):
        """A token id one past the vocabulary in the last position: tfc-run
        exits 1 with the runtime's one-line error naming input_ids, the
        element and the range, instead of reading outside the embedding
        table."""
        bad = ids.copy()
        bad[-1, -1] = vocab
        args, _ = self.run_args(lib, model, [bad, mask], 1)
        proc = subprocess.run(args, capture_output=True, text=True)
        where = "[%d, %d]" % (ids.shape[0] - 1, ids.shape[1] - 1)
        message = "input 0 'input_ids' holds %d at %s, outside [0, %d)" % (
            vocab, where, vocab)
        self.expect("%s: an id past the vocabulary is refused" % label,
                    proc.returncode == 1 and message in proc.stderr and
                    len(proc.stderr.strip().splitlines()) == 1)

    def check_hidden_states(self, name, model, ids, mask, ref,
                            dtypes=(("f32", 1e-4), ("f16", 10 * 2.0**-11),
                                    ("bf16", 10 * 2.0**-8)),
                            what="last hidden state"):
        """The model built for [B, S] = ids.shape in each of `dtypes` (with
        its tolerance), fused (its fusion summary printed) and unfused: each
        build's output (`what`) against the float64 reference `ref(dtype)`,
        the model on its weights rounded to that type (rounded_weights), as
        --dtype rounds them: what is left is the build's arithmetic. The
        defaults: f32 within 1e-4; f16 and bf16 (f32 matmul sums, norm
        statistics and activations in f32) within 10 units of the type's
        roundoff (2^-11, 2^-8) on the norm-wise error."""
        self.check_builds(name, model, [ids, mask], ref, dtypes, what,
                          seq=ids.shape[1])

    def check_builds(self, name, model, inputs, ref, dtypes, what, flags=(),
                     seq=None):
        """check_hidden_states on any `inputs`: the model built for batch
        inputs[0].shape[0] (and --seq-len `seq` where given; an image
        model takes none) with `flags`, in each of `dtypes` fused and
        unfused, each build's output against `ref(dtype)`. An output in
        bf16 ('<u2' in .npy) is widened to f32 first."""
        for dtype, tol in dtypes:
            expected = ref(dtype)
            for fused in (True, False):
                lib, summary = self.build_hf(
                    name + "_" + dtype, model, inputs[0].shape[0], seq, fused,
                    ["--dtype=" + dtype] + list(flags))
                if fused:
                    print(summary)
                out = self.run_hf(lib, model, inputs)
                if out.dtype == np.uint16:
                    out = bf16_to_f32(out)
                self.expect_close("%s %s %s %s" %
                                  (name, what, dtype,
                                   "fused" if fused else "unfused"),
                                  out, expected, tol)

    def random_model(self, rng, write_model, name, cfg, batch, seq,
                     padding):
        """A random model of `cfg` written by `write_model(directory, rng,
        cfg)` under `name` and a batch of tokens for it whose second row
        ends in `padding` padding tokens: (directory, weights, ids, mask)."""
        model = self.path(name)
        w = write_model(model, rng, cfg)
        ids, mask = random_tokens(rng, cfg["vocab_size"], batch, seq, padding)
        return model, w, ids, mask

    def check_cases(self, rng, cases, write_model, reference, batch, seq):
        """check_hidden_states for each (name, cfg) of `cases` the command
        line selects: a random model of cfg on [batch, seq] tokens (4 of
        padding in the second row) against reference(cfg, weights, ids,
        mask)."""
        for name, cfg in cases:
            if not self.wants(name):
                continue
            model, w, ids, mask = self.random_model(rng, write_model, name,
                                                    cfg, batch, seq, 4)
            self.check_hidden_states(
                name, model, ids, mask,
                lambda dtype: reference(cfg, rounded_weights(w, dtype), ids,
                                        mask))

    def check_kv_cache(self, name, reference, cfg, layers, model, w, ids,
                       mask, dtype, tol):
        """The decoder in `model` compiled with its KV cache, against
        `reference(cfg, w, ids, mask, kv)`, the float64 model of the whole
        sequence (appending each layer's keys and values to kv): prefill
        (--kv-cache: no past, the keys and values returned), a chunk after
        a past and one-token decode (--past-len: the reference's keys and
        values of the earlier tokens as inputs). The hidden states of the
        new tokens and the keys and values of all tokens must match within
        `tol`; in f16, the hidden states of the tokens after a past within
        the larger of `tol` and three times what one-ulp moves of the cache
        change them by (largest_move). A few tokens' states carry the
        model's conditioning on the draw: over 18 seeds their error was 0.4
        to 1.4 times that move, and seed 1011's decode step missed 10 f16
        ulps (8.98e-3) where its moves reached 9.8e-3."""
        kv = []
        whole = reference(cfg, w, ids, mask, kv)
        np_type = {"f32": np.float32, "f16": np.float16}[dtype]
        seq = ids.shape[1]
        for past in (0, seq - 4, seq - 1):
            flags = ["--dtype=" + dtype,
                     "--past-len=%d" % past if past else "--kv-cache"]
            inputs = [ids[:, past:], mask]
            # The cache handed to the build: the reference's keys and
            # values of the past tokens, rounded to the build's type. The
            # reference of the new tokens computes from that cache too
            # (RoundedPast), so that only the build's own rounding is
            # measured, not the cache's amplified through the layers.
            given = [tuple(t[:, :, :past].astype(np_type) for t in pair)
                     for pair in kv] if past else []
            for k, v in given:
                inputs += [k, v]
            ref_kv = RoundedPast(past, given) if past else kv
            ref = reference(cfg, w, ids, mask, ref_kv) if past else whole
            for fused in (True, False):
                lib, _ = self.build_hf("%s_kv%d_%s" % (name, past, dtype),
                                       model, ids.shape[0], seq - past,
                                       fused, flags)
                out = self.run_hf(lib, model, inputs, 1 + 2 * layers)
                label = "%s %s past %d, %d new %s" % (
                    name, dtype, past, seq - past,
                    "fused" if fused else "unfused")
                bound = tol
                if past and dtype != "f32":
                    # A few tokens' hidden states after a past in f16: how
                    # far one-ulp moves of the cache move them (from their
                    # own stream, so that a seed keeps its inputs).
                    move = self.largest_move(
                        lambda x: self.run_hf(lib, model, x,
                                              1 + 2 * layers)[0],
                        inputs, out[0], np.random.default_rng([self.seed, 1]))
                    bound = max(tol, 3 * move)
                    if bound > tol:
                        print("   (one-ulp moves of the cache change the "
                              "hidden states by up to %.2e: bound %.2e)" %
                              (move, bound))
                self.expect_close(label + ": hidden states", out[0],
                                  ref[:, past:], bound)
                self.expect_close(
                    label + ": keys and values",
                    np.concatenate([o.astype(np.float64).ravel()
                                    for o in out[1:]]),
                    np.concatenate([t.ravel() for pair in ref_kv
                                    for t in pair]),
                    tol)

    def check_fixed_cache(self, name, reference, cfg, layers, model, w, ids,
                          mask, dtype, tol):
        """One build for every decode step (--past-len C --seq-len 1
        --position-ids, C = S - 1): steps n = C - 3 .. C, each with the
        reference's keys and values of the first n tokens in slots 0..n-1
        of the cache, garbage in the others (hidden by attention_mask) and
        position n. The step's hidden state and the new token's keys and
        values (the last slot of what it returns; with --present=new all
        of it) must match the float64 model of the whole sequence."""
        kv = []
        ref = reference(cfg, w, ids, mask, kv)
        np_type = {"f32": np.float32, "f16": np.float16}[dtype]
        b, cap = ids.shape[0], ids.shape[1] - 1
        garbage = np.random.default_rng(0)
        for fused, present in ((True, "all"), (False, "all"), (True, "new"),
                               (False, "new")):
            lib, _ = self.build_hf("%s_cache%d_%s_%s" % (name, cap, dtype,
                                                         present), model,
                                   b, 1, fused,
                                   ["--dtype=" + dtype, "--past-len=%d" % cap,
                                    "--position-ids", "--present=" + present])
            new_slot = cap if present == "all" else 0
            for n in range(cap - 3, cap + 1):
                step_mask = np.zeros((b, cap + 1), dtype=np.int64)
                step_mask[:, :n] = mask[:, :n]
                step_mask[:, cap] = mask[:, n]
                inputs = [ids[:, n:n + 1], step_mask,
                          np.full((b, 1), n, dtype=np.int64)]
                for k, v in kv:
                    for t in (k, v):
                        slots = garbage.uniform(-3, 3, t[:, :, :cap].shape)
                        slots[:, :, :n] = t[:, :, :n]
                        inputs.append(slots.astype(np_type))
                out = self.run_hf(lib, model, inputs, 1 + 2 * layers)
                label = "%s %s one build, step %d of a %d-slot cache %s%s" % (
                    name, dtype, n, cap, "fused" if fused else "unfused",
                    ", --present=new" if present == "new" else "")
                self.expect_close(label + ": hidden state", out[0],
                                  ref[:, n:n + 1], tol)
                if present == "new":
                    self.expect(label + ": present holds the new token only",
                                all(o.shape[2] == 1 for o in out[1:]))
                self.expect_close(
                    label + ": the new keys and values",
                    np.concatenate([o[:, :, new_slot].astype(np.float64)
                                    .ravel() for o in out[1:]]),
                    np.concatenate([t[:, :, n].ravel() for pair in kv
                                    for t in pair]), tol)

    def check_quantized(self, name, reference, model, w, inputs, axes, tol,
                        flags=()):
        """The model built with --quantize-weights=int8 and =int4, fused and
        unfused, against `reference(weights, bits, act)` on the weights as
        the build quantizes them (`axes`: each quantized weight's name ->
        the axis of its input features; the others as they are; `bits` 8 or
        4; `act` None), within `tol`; and built with
        --quantize-activations=int8 as well, against the reference whose
        `act` quantizes the input of every quantized weight's product
        (quantized_activations), row by row (expect_rows_close: rounding
        activations makes the model discontinuous). The reference one step
        less quantized (on the weights as they are, `bits` 0; with `act`
        None) must be farther than 10 tol, or the check could not tell the
        builds apart."""
        plain = reference(w, 0, None)
        for bits in (8, 4):
            wq = dict(w)
            for n, axis in axes.items():
                wq[n] = quantized_weight(w[n], axis, bits)
            finer = plain
            for act in (None, quantized_activations):
                ref = reference(wq, bits, act)
                gap = np.linalg.norm(finer - ref) / np.linalg.norm(ref)
                what = "the weights to int%d" % bits + (
                    ", then the activations to int8" if act else "")
                self.expect("%s: quantizing %s moves the reference by %.1e, "
                            "over 10x the tolerance" % (name, what, gap),
                            gap > 10 * tol)
                finer = ref
                option = ["--quantize-weights=int%d" % bits] + (
                    ["--quantize-activations=int8"] if act else [])
                for fused in (True, False):
                    lib, _ = self.build_hf(
                        "%s_int%d%s" % (name, bits, "_a8" if act else ""),
                        model, inputs[0].shape[0], inputs[0].shape[1], fused,
                        option + list(flags))
                    out = self.run_hf(lib, model, inputs)
                    label = "%s %s %s" % (name, " ".join(option),
                                          "fused" if fused else "unfused")
                    if act:
                        self.expect_rows_close(label, out, ref, tol)
                    else:
                        self.expect_close(label, out, ref, tol)

    def run(self, lib, inputs, num_outputs=1):
        args, outs = self.run_args(lib, None, inputs, num_outputs)
        subprocess.run(args, check=True)
        return [np.load(p) for p in outs]

    def expect_close(self, label, got, ref, tol):
        self.checks += 1
        got64 = got.astype(np.float64)
        err = relative_error(got64, ref)
        ok = np.all(np.isfinite(got64)) and err <= tol
        self.report(ok, "%-60s rel.err %.2e (tol %.0e)" % (label, err, tol))
        return ok

    def largest_move(self, run, inputs, out, rng, count=4):
        """How far `count` one-ulp moves of the float `inputs`
        (one_ulp_moves, drawn from `rng`) move `run(inputs)` = `out`: the
        largest relative_error of run(moved) against out. A measure of how
        well conditioned the computation is on this draw: where the moves
        change the output by more than a tolerance allows, the build's own
        rounding can too."""
        return max(relative_error(run(one_ulp_moves(rng, inputs)), out)
                   for _ in range(count))

    def expect_rows_close(self, label, got, ref, tol, share=0.25,
                          cap=5e-2):
        """At least `share` of the rows (along the last axis) of `got` within
        `tol` of `ref`'s, and every row within `cap`. For a model whose
        activations are quantized: a value that lies within f32 roundoff of
        a rounding boundary may round the other way in the build than in
        the float64 reference, a difference of one quantum (of 127 per
        block), which moves that token's later activations across other
        boundaries and, through attention, the later tokens': those rows
        then differ by the quantization noise (1e-2 with these widths),
        while the others match as closely as without quantization. A build
        quantizing otherwise misses every row by that noise."""
        self.checks += 1
        got64 = got.astype(np.float64).reshape(-1, got.shape[-1])
        ref2 = ref.reshape(-1, ref.shape[-1])
        err = np.linalg.norm(got64 - ref2, axis=1) / np.maximum(
            np.linalg.norm(ref2, axis=1), 1e-30)
        close = int(np.sum(err <= tol))
        ok = (np.all(np.isfinite(got64)) and close >= share * len(err) and
              err.max() <= cap)
        self.report(ok, "%-60s %d of %d rows within %.0e (at least %d%%), "
                    "worst %.2e (cap %.0e)" % (label, close, len(err), tol,
                                               100 * share, err.max(), cap))
        return ok

    def expect(self, label, condition):
        self.checks += 1
        self.report(condition, label)

    def report(self, ok, line):
        """Prints one check's line, `ok` or FAIL; keeps the failed ones."""
        print("%s %s" % ("ok  " if ok else "FAIL", line))
        if not ok:
            self.failures += 1
            self.failed.append(line)

    def finish(self):
        """The failed checks again with the seed (next to the summary, where
        a log that shows only the end of the output still has them), then
        the counts; exits 1 on a failure."""
        for line in self.failed:
            print("FAIL (seed %s) %s" % (self.seed, line))
        print("%d passed, %d failed" % (self.checks - self.failures,
                                       self.failures))
        sys.exit(1 if self.failures else 0)
