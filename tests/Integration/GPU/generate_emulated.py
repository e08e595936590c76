#!/usr/bin/env python3
"""tfc.Generator(device="gpu") on the PTX interpreter: GPT-2 and Marian of
../CPU/generate-api.py (Inputs/record_generate.py's random models) built
for the GPU, greedy and beam search token for token as transformers'
generate() in ../CPU/Inputs/generate-expected.json, with the caches on the
device for the whole generation.

Each run and each transfer is watched (tfc.Model.run, DeviceTensor):
every decoder step binds the KV cache (and Marian's cross-attention keys
and values) as device tensors and leaves its outputs on the device; the
host sends only the step's token ids, masks and positions, and takes back
only the logits, the same bytes every step whatever the cache holds;
nothing is copied to a device tensor from the host; the new keys and
values go into the cache by one strided device-to-device copy per cache
tensor (DeviceTensor.copy_2d_from, one cuMemcpy2DAsync_v2 each by the fake
driver's counters), and beam search's reorder by at most one copy per row
and tensor. The fake driver's counters (fake_cuda.h) also show no device
allocation after the second step, and the runtime's graph counters one
graph launch per step. `tfc-generate --device gpu` prints the same ids.

usage: generate_emulated.py BINDIR WORKDIR
  $TFC_CUDA_DRIVER: the PTX interpreter's driver (ptx_cuda.so)
"""

import contextlib
import ctypes
import io
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(HERE, "..", "CPU", "Inputs"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "pylib"))
import record_generate as rec  # noqa: E402
import tfc  # noqa: E402
import tfc.generate  # noqa: E402
from tfc.device import DeviceTensor  # noqa: E402
from tfc_testing.harness import Harness  # noqa: E402

# name: its prompt's length (a decoder's prompt, an encoder-decoder's start
# token); the Generator's max_length is that plus max_new_tokens.
MODELS = {"gpt2": rec.PROMPT, "marian": 1}
# Indices in fake_cuda_counters: mem_allocs, memcpys_2d.
MEM_ALLOCS, MEMCPYS_2D = 1, 16
SETTINGS = ({"num_beams": 1},
            {"num_beams": 4, "length_penalty": 1.0, "early_stopping": False})


class Watch:
    """Records every Model.run (its model, which inputs were device
    tensors, the bytes of the host inputs, outputs_on_device) and every
    transfer of a DeviceTensor, with the fake driver's allocations."""

    def __init__(self):
        self.fake = ctypes.CDLL(os.environ["TFC_CUDA_DRIVER"])
        self.events = []
        run = tfc.Model.run
        watch = self

        def watched_run(model, *inputs, outputs_on_device=False, **named):
            names = [i.name for i in model.inputs]
            device = [n for n, a in zip(names, inputs)
                      if isinstance(a, DeviceTensor)]
            host = sum(np.asarray(a).nbytes for a in inputs
                       if not isinstance(a, DeviceTensor))
            watch.events.append(("run", model, device, host,
                                 outputs_on_device, watch.allocs(),
                                 watch.counter(MEMCPYS_2D)))
            return run(model, *inputs, outputs_on_device=outputs_on_device,
                       **named)

        def watched(name, kind, size):
            method = getattr(DeviceTensor, name)

            def call(tensor, *args, **kw):
                watch.events.append((kind, size(tensor, *args, **kw)))
                return method(tensor, *args, **kw)
            setattr(DeviceTensor, name, call)

        tfc.Model.run = watched_run
        watched("numpy", "d2h", lambda t: t.nbytes)
        watched("copy_from_host", "h2d", lambda t, a: t.nbytes)
        watched("copy_from", "d2d",
                lambda t, src, nbytes=None, *a, **kw: nbytes)
        watched("copy_2d_from", "d2d2",
                lambda t, src, width, height, *a, **kw: width * height)

    def counter(self, index):
        """Counter `index` (a uint64) of fake_cuda_counters (fake_cuda.h;
        room left for more)."""
        c = (ctypes.c_uint64 * 64)()
        self.fake.fake_cuda_get_counters(c)
        return c[index]

    def allocs(self):
        """The fake driver's cuMemAlloc_v2 count (mem_allocs)."""
        return self.counter(MEM_ALLOCS)

    def steps(self, step_model):
        """The step runs of the events since the last reset, each with the
        transfers that follow it up to the next run."""
        out = []
        for e in self.events:
            if e[0] == "run":
                out.append([e, []] if e[1] is step_model else None)
            elif out and out[-1] is not None:
                out[-1][1].append(e)
        return [s for s in out if s is not None]


def check_case(h, watch, gen, case, new):
    name, settings = case["model"], case["settings"]
    label = "%s %s" % (name, ", ".join("%s=%s" % kv
                                       for kv in settings.items()))
    ids = np.array(case["input_ids"])
    watch.events = []
    got = gen.generate(ids, np.array(case["attention_mask"]),
                       max_new_tokens=new, **settings)
    want = np.array(case["expected"])
    h.expect("%s: %s as transformers'%s" % (
        label, got.tolist(), "" if np.array_equal(got, want) else
        " " + str(want.tolist())),
        got.shape == want.shape and np.array_equal(got, want))
    rows = len(ids) * settings["num_beams"]
    step_model = [m for m in gen._models.values()
                  if m.inputs[0].shape[0] == rows and any(
                      i.name.startswith("past_key_values.")
                      for i in m.inputs)][0]
    steps = watch.steps(step_model)
    cache = [i for i in step_model.inputs
             if i.name.split(".")[0] in ("past_key_values",
                                         "cross_key_values")]
    cache_bytes = sum(int(np.prod(i.shape)) * np.dtype(
        np.uint16 if i.dtype == "bf16" else i.dtype).itemsize for i in cache)
    on_device = all(set(s[0][2]) == {i.name for i in cache} and s[0][4]
                    for s in steps)
    h.expect("%s: %d steps, each binding the %d caches (%s, %d bytes) as "
             "device tensors, its outputs left on the device" % (
                 label, len(steps), len(cache), ", ".join(sorted({
                     i.name.split(".")[0] for i in cache})), cache_bytes),
             len(steps) > 0 and on_device)
    logits = rows * gen._vocab() * 4
    sent = {s[0][3] for s in steps}
    back = {tuple(x for x in s[1] if x[0] not in ("d2d", "d2d2"))
            for s in steps}
    h.expect("%s: per step %s bytes of ids, masks and positions to the "
             "device, back only the logits (%s)" % (label, sorted(sent),
                                                    sorted(back)),
             len(sent) == 1 and max(sent) < cache_bytes // 8 and
             back == {(("d2h", logits),)})
    h.expect("%s: nothing copied from the host to a device tensor" % label,
             not any(e[0] == "h2d" for e in watch.events))
    past = [i for i in cache if i.name.startswith("past_key_values.")]
    new_bytes = sum(int(np.prod(i.shape)) // i.shape[2] * np.dtype(
        np.uint16 if i.dtype == "bf16" else i.dtype).itemsize for i in past)
    strided = {(len([x for x in s[1] if x[0] == "d2d2"]),
                sum(n for k, n in s[1] if k == "d2d2")) for s in steps}
    driver = {b[0][6] - a[0][6] for a, b in zip(steps, steps[1:])}
    h.expect("%s: each step's new keys and values into the cache on the "
             "device by one 2-D copy per cache tensor (copies, bytes: %s; "
             "the driver's cuMemcpy2DAsync_v2 per step: %s)" % (
                 label, sorted(strided), sorted(driver)),
             strided == {(len(past), new_bytes)} and
             driver == {len(past)})
    row_copies = [[n for k, n in s[1] if k == "d2d"] for s in steps]
    row_bytes = [int(np.prod(i.shape[1:])) * np.dtype(
        np.uint16 if i.dtype == "bf16" else i.dtype).itemsize for i in past]
    beams = settings["num_beams"] > 1
    h.expect("%s: %s (copies per step: %s)" % (
        label, "the beams' rows reordered into the other cache, at most one "
        "copy per row and tensor" if beams else "no other device copy",
        sorted({len(c) for c in row_copies})),
        all(len(c) <= rows * len(past) and
            all(any(n % b == 0 for b in row_bytes) for n in c)
            for c in row_copies) and
        any(row_copies) == beams)
    allocs = [s[0][5] for s in steps] + [watch.allocs()]
    h.expect("%s: no device allocation after the second step (fake "
             "driver's cuMemAlloc count before each step, then at the end: "
             "%s)" % (label, allocs), len(set(allocs[2:])) == 1)
    return len(steps)


def check_cli(h, watch, model_dir, case, new, work):
    """tfc-generate --device gpu (tfc.generate.main in this process, its
    Generator given --gpu-binary=ptx for the interpreter) on the case's
    batch: transformers' ids, the steps on device tensors."""
    files = {n: os.path.join(work, n + ".npy") for n in ("ids", "mask")}
    np.save(files["ids"], np.array(case["input_ids"]))
    np.save(files["mask"], np.array(case["attention_mask"]))

    class PtxGenerator(tfc.Generator):
        def __init__(self, *args, **kw):
            super().__init__(*args, extra_args=["--gpu-binary=ptx"], **kw)

    real, tfc.generate.Generator = tfc.generate.Generator, PtxGenerator
    printed, watch.events = io.StringIO(), []
    try:
        with contextlib.redirect_stdout(printed):
            tfc.generate.main([
                model_dir, "--ids", files["ids"], "--attention-mask",
                files["mask"], "--max-new-tokens", str(new), "--device",
                "gpu", "--cache-dir", os.path.join(work, "builds")])
    except SystemExit as e:
        printed.write(str(e))
    finally:
        tfc.generate.Generator = real
    want = "\n".join(",".join(map(str, r)) for r in case["expected"])
    h.expect("tfc-generate --device gpu: %s, as transformers'" %
             printed.getvalue().strip().replace("\n", " / "),
             printed.getvalue().strip() == want and
             any(e[0] == "run" and e[2] for e in watch.events))


def main():
    work = sys.argv[2]
    h = Harness(sys.argv[1], work)
    h.use_build()
    with open(os.path.join(HERE, "..", "CPU", "Inputs",
                           "generate-expected.json")) as f:
        expected = json.load(f)
    new = expected["max_new_tokens"]
    dirs = rec.write_models(os.path.join(work, "models"))
    watch = Watch()
    for name, prompt in MODELS.items():
        for f, digest in expected["models"][name]["sha256"].items():
            h.expect("%s/%s is the file transformers ran" % (name, f),
                     rec.sha256(os.path.join(dirs[name], f)) == digest)
        gen = tfc.Generator(dirs[name], prompt + new, batch=2,
                            device="gpu", extra_args=["--gpu-binary=ptx"],
                            cache_dir=os.path.join(work, "builds"))
        h.expect("%s: device=\"gpu\" builds for nvptx" % name,
                 "--target=nvptx" in gen.extra_args)
        for settings in SETTINGS:
            case = [c for c in expected["cases"] if c["model"] == name and
                    c["settings"] == settings][0]
            steps = check_case(h, watch, gen, case, new)
            if name == "gpt2" and settings["num_beams"] == 1:
                check_cli(h, watch, dirs[name], case, new, work)
            model = [m for m in gen._models.values()
                     if m.inputs[0].shape[0] == 2 * settings["num_beams"]
                     and any(i.name.startswith("past_key_values.")
                             for i in m.inputs)][0]
            g = model.cuda_graph_stats()
            h.expect("%s %s: each step one graph launch: %s" % (
                name, settings, g), g["plain_runs"] == 0 and
                g["capture_failures"] == 0 and g["off"] == "" and
                g["captures"] + g["replays"] == steps)
        gen.close()
    for kw, needle in (({"device": "tpu"}, "device 'tpu': \"cpu\" or "
                        "\"gpu\""),
                       ({"device": "cpu", "extra_args": ["--target=nvptx"]},
                        "device \"cpu\" with --target=nvptx in extra_args")):
        try:
            tfc.Generator(dirs["gpt2"], 9, **kw)
            h.expect("Generator(%s): refused" % kw, False)
        except tfc.Error as e:
            h.expect("Generator(%s): %s" % (kw, e), needle in str(e) and
                     len(str(e).splitlines()) == 1)
    h.finish()


if __name__ == "__main__":
    main()
