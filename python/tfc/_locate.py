"""Where the tfc runtime library (libtfcrt.so) and tfc-compile are.

Each is looked for, in order:
  1. the environment: $TFC_RUNTIME_LIB (the library's path) and
     $TFC_COMPILE (tfc-compile's);
  2. the tfc build tree of the package: the one recorded in tfc/_paths.py
     when the package was built (setup.py writes it from $TFC_BUILD_DIR, or
     from ../build next to python/ when it exists), or, for the package run
     from the source tree (python/ on sys.path, runtime/python/
     tfc_runtime.py), the repository's build/: <build>/lib/libtfcrt.so and
     <build>/bin/tfc-compile, each where it exists;
  3. the system: libtfcrt.so through the dynamic loader's search
     (LD_LIBRARY_PATH, ld.so.cache, ...), tfc-compile on $PATH.
"""

import os
import shutil

RUNTIME_ENV = "TFC_RUNTIME_LIB"
COMPILE_ENV = "TFC_COMPILE"
RUNTIME_NAME = "libtfcrt.so"
COMPILE_NAME = "tfc-compile"


def build_dir():
    """(directory, how it was found) of the tfc build tree this package
    belongs to, or (None, None)."""
    try:
        from . import _paths  # written by setup.py into built packages
        recorded = getattr(_paths, "BUILD_DIR", None)
    except ImportError:
        recorded = None
    if recorded:
        return recorded, "the build tree recorded at install (tfc/_paths.py)"
    # Run from the source tree: <repo>/python/tfc/_locate.py.
    source = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if os.path.isfile(os.path.join(source, "pyproject.toml")) and \
            os.path.isfile(os.path.join(source, "setup.py")):
        build = os.path.join(os.path.dirname(source), "build")
        if os.path.isdir(build):
            return build, "the source tree's build/"
    return None, None


def _env_or_build(env, subdir, name, usable):
    """(path, how it was found) from $`env`, else <build>/`subdir`/`name`
    where `usable`; (None, None) otherwise."""
    value = os.environ.get(env)
    if value:
        return value, "$" + env
    build, how = build_dir()
    if build:
        path = os.path.join(build, subdir, name)
        if usable(path):
            return path, how
    return None, None


def runtime_library():
    """(path or bare name for the dynamic loader, how it was found)."""
    path, how = _env_or_build(RUNTIME_ENV, "lib", RUNTIME_NAME,
                              os.path.exists)
    if path:
        return path, how
    return RUNTIME_NAME, "the dynamic loader's search path"


def compiler():
    """(path of tfc-compile, how it was found), or (None, why not)."""
    path, how = _env_or_build(
        COMPILE_ENV, "bin", COMPILE_NAME,
        lambda p: os.path.isfile(p) and os.access(p, os.X_OK))
    if path:
        return path, how
    found = shutil.which(COMPILE_NAME)
    if found:
        return found, "$PATH"
    return None, ("not found: set $%s, install tfc from a build tree that "
                  "has bin/%s (TFC_BUILD_DIR=... pip install ./python), or "
                  "put it on $PATH" % (COMPILE_ENV, COMPILE_NAME))


def locate():
    """Where tfc looks, as a dict: build_dir, runtime, compiler, each a
    (path, how it was found) pair."""
    return {"build_dir": build_dir(), "runtime": runtime_library(),
            "compiler": compiler()}
