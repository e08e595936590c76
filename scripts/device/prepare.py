"""Compile every model of the device check and write its manifest.

usage: prepare.py --tfc-compile PATH --out DIR [--target nvptx|cpu]
                  [--gpu-arch sm_90a] [--small] [--jobs N]

Writes DIR/src/NAME.mlir, DIR/models/NAME.BUILD.so and
DIR/manifest.json. A model that does not compile is kept in the manifest
with its error (check.py reports it as FAIL / "not built"); the exit status
is then 2. Standard library only.
"""

import argparse
import concurrent.futures
import datetime
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "pylib"))
import decoders  # noqa: E402
import e2e  # noqa: E402
import generate_timing  # noqa: E402
import minilm  # noqa: E402
import specs  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
SYSTEM_LIB_DIRS = ("/lib/", "/lib64/", "/usr/lib/x86_64-linux-gnu/",
                   "/usr/lib64/")


def git(*args):
    try:
        return subprocess.run(["git", "-C", ROOT] + list(args), check=True,
                              capture_output=True, text=True,
                              timeout=30).stdout.strip()
    except (subprocess.SubprocessError, OSError):
        return "?"


def describe_tree():
    """HEAD, plus a hash of what differs from it (changes, new files)."""
    head = git("rev-parse", "--short", "HEAD")
    h = hashlib.sha1(git("diff", "HEAD").encode())
    new = git("ls-files", "--others", "--exclude-standard").splitlines()
    for path in sorted(new):
        h.update(path.encode())
        with open(os.path.join(ROOT, path), "rb") as f:
            h.update(f.read())
    if not new and not git("diff", "HEAD"):
        return head
    return "%s+dirty.%s" % (head, h.hexdigest()[:7])


def compile_one(tfc_compile, out, model, build, target, gpu_flags):
    """Returns (relative path, None) or (None, one-line error)."""
    src = os.path.join(out, "src", model["name"] + ".mlir")
    rel = os.path.join("models", "%s.%s.so" % (model["name"], build))
    cmd = [tfc_compile, src, "-o", os.path.join(out, rel),
           "--target=" + target] + gpu_flags
    if build == "unfused":
        cmd.append("--no-fusion")
    variant = (specs.GPU_VARIANTS.get(build, []) +
               specs.DECODE_BUILDS.get(build, []))
    if build in specs.GPU_VARIANTS and model.get("decode_shape"):
        variant += specs.DECODE_BUILDS["tiled"]
    if any(f.startswith("--gpu-arch=") for f in variant):
        # The build names its own architecture (wgmma: sm_90a).
        cmd = [f for f in cmd if not f.startswith("--gpu-arch=")]
    cmd += variant
    if model["entry"]:
        cmd.append("--entry=" + model["entry"])
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        return None, "tfc-compile timed out (600 s)"
    except OSError as e:  # gone or mid-link (a rebuild): a FAIL, not a crash
        return None, "tfc-compile: %s" % e
    if r.returncode != 0:
        lines = [l for l in r.stderr.splitlines() if l.strip()]
        return None, (lines[-1] if lines else "exit %d" % r.returncode)
    return rel, None


def foreign_libs(path):
    """Shared libraries a model needs from outside the system directories
    (libomp from the LLVM install, say), which the device may lack."""
    try:
        r = subprocess.run(["ldd", path], capture_output=True, text=True,
                           timeout=30)
    except (subprocess.SubprocessError, OSError):
        return []
    libs = []
    for line in r.stdout.splitlines():
        parts = line.split("=>")
        if len(parts) != 2:
            continue
        name, where = parts[0].strip(), parts[1].split("(")[0].strip()
        if not where.startswith("/") or where.startswith(SYSTEM_LIB_DIRS):
            continue
        if name.startswith("libtfcrt"):
            continue  # the runtime: built there, or carried in bin/
        libs.append(where)
    return libs


def prepare_models(a, gpu_flags):
    """all-MiniLM-L6-v2 (when scripts/install-model.sh has installed it
    here) and the random decoders: (minilm status, {decoder: status},
    failures)."""
    failures = 0
    mini = None
    model_dir = subprocess.run(
        ["bash", os.path.join(ROOT, "scripts", "install-model.sh"), "--check"],
        capture_output=True, text=True)
    if model_dir.returncode == 0:
        err = minilm.prepare(model_dir.stdout.strip(),
                             os.path.join(ROOT, "tests", "fixtures", "minilm"),
                             a.tfc_compile, a.out, a.target, gpu_flags)
        mini = err or "ok"
        print("prepare: minilm: %s" % mini)
        if err:
            failures += 1
    else:
        print("prepare: minilm: model not installed here (scripts/"
              "install-model.sh): not carried")

    # Random decoders (their weights are written again there from the
    # seed).
    import tempfile
    with tempfile.TemporaryDirectory(prefix="tfc-decoders-") as tmp:
        status = decoders.prepare(a.tfc_compile, a.out, a.target, gpu_flags,
                                  tmp)
        # Whole models against PyTorch (their weights drawn there too).
        status.update(e2e.prepare(a.tfc_compile, a.out, a.target,
                                  gpu_flags, tmp, a.small))
    for name, st in status.items():
        print("prepare: %s: %s" % (name, st))
        failures += st != "ok"
    return mini, status, failures


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tfc-compile", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--target", default="nvptx")
    p.add_argument("--gpu-arch", default="")
    p.add_argument("--small", action="store_true",
                   help="dry run: small timing shapes")
    p.add_argument("--numerics-only", action="store_true",
                   help="no timing models (the PTX interpreter's check)")
    p.add_argument("--gpu-binary", default="cubin",
                   help="what GPU models embed: cubin, or ptx (for the PTX "
                   "interpreter of scripts/device-check.sh emulate)")
    p.add_argument("--jobs", type=int, default=1)
    a = p.parse_args()

    help_text = subprocess.run([a.tfc_compile, "--help"], capture_output=True,
                               text=True, timeout=60).stdout
    gpu_arch = a.gpu_arch if a.target != "cpu" else ""
    if gpu_arch and "--gpu-arch" not in help_text:
        print("prepare: tfc-compile has no --gpu-arch; using its default")
        gpu_arch = ""
    arch_note = gpu_arch
    if a.target != "cpu" and not gpu_arch:
        m = re.search(r"(sm_\w+) \(default", help_text)
        arch_note = "%s (tfc-compile default)" % (m.group(1) if m else "?")
    if a.target == "nvptx":  # builds that name their own (wgmma: sm_90a)
        own = ["%s %s" % (b, f.split("=", 1)[1])
               for b, flags in specs.GPU_VARIANTS.items() for f in flags
               if f.startswith("--gpu-arch=")]
        if own:
            arch_note += "; " + ", ".join(own)
    gpu_flags = ["--gpu-arch=" + gpu_arch] if gpu_arch else []
    if a.target != "cpu" and a.gpu_binary != "cubin":
        gpu_flags.append("--gpu-binary=" + a.gpu_binary)

    for sub in ("src", "models"):
        shutil.rmtree(os.path.join(a.out, sub), ignore_errors=True)
        os.makedirs(os.path.join(a.out, sub))
    models = specs.numerics_models(ROOT)
    if not a.numerics_only:
        models += specs.timing_models(a.small)
        models += specs.gemm_timing_models(a.small)
        models += specs.decode_timing_models(a.small)
    if a.target != "nvptx":  # --gpu-ldmatrix and the like are GPU flags
        gpu_only = set(specs.GPU_VARIANTS) | set(specs.DECODE_BUILDS)
        for m in models:
            m["builds"] = [b for b in m["builds"] if b not in gpu_only]
    for m in models:
        with open(os.path.join(a.out, "src", m["name"] + ".mlir"), "w") as f:
            f.write(m["mlir"])

    jobs = [(m, b) for m in models for b in m["builds"]]
    print("prepare: compiling %d builds of %d models (--target=%s%s)" %
          (len(jobs), len(models), a.target,
           " --gpu-arch=" + gpu_arch if gpu_arch else ""))
    failures = 0
    with concurrent.futures.ThreadPoolExecutor(max(1, a.jobs)) as pool:
        futures = [pool.submit(compile_one, a.tfc_compile, a.out, m, b,
                               a.target, gpu_flags) for m, b in jobs]
        for (m, b), fut in zip(jobs, futures):
            rel, err = fut.result()
            m.setdefault("paths", {})[b] = rel
            if err:
                m.setdefault("errors", {})[b] = err
                failures += 1
                print("prepare: FAIL %s %s: %s" % (m["name"], b, err))

    libs = set()
    for m in models:
        for rel in m["paths"].values():
            if rel:
                libs.update(foreign_libs(os.path.join(a.out, rel)))
    lib_dir = os.path.join(a.out, "lib")
    shutil.rmtree(lib_dir, ignore_errors=True)
    os.makedirs(lib_dir)
    for lib in sorted(libs):
        print("prepare: carrying %s (models link it)" % lib)
        shutil.copy2(lib, lib_dir)

    mini, dec = None, {d.name: "not prepared (--numerics-only)"
                       for d in decoders.DECODERS}
    if not a.numerics_only:
        mini, dec, failed = prepare_models(a, gpu_flags)
        failures += failed
    # Generation: tfc.Generator's builds (the small model's in the
    # emulated run's numerics-only preparation).
    import tempfile
    with tempfile.TemporaryDirectory(prefix="tfc-generate-") as tmp:
        gen = generate_timing.prepare(a.tfc_compile, a.out, a.target,
                                      gpu_flags, tmp,
                                      a.small or a.numerics_only)
    for name, st in gen.items():
        print("prepare: %s: %s" % (name, st))
        failures += st != "ok"

    for m in models:
        del m["mlir"]
        m["source"] = os.path.join("src", m["name"] + ".mlir")
    manifest = {
        "created": datetime.datetime.now(datetime.timezone.utc).strftime(
            "%Y-%m-%d %H:%M UTC"),
        "commit": describe_tree(),
        "target": a.target,
        "gpu_arch": arch_note or "host",
        "small": a.small,
        "models": models,
        "minilm": mini,
        "decoders": dec,
        "generate": gen,
    }
    with open(os.path.join(a.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    print("prepare: %d builds, %d failed; manifest %s" %
          (len(jobs), failures, os.path.join(a.out, "manifest.json")))
    return 2 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
