"""Builds the pure-Python tfc package, recording the tfc build tree it
belongs to in tfc/_paths.py (the package looks there for lib/libtfcrt.so
and bin/tfc-compile; tfc/_locate.py has the whole lookup order):

  - $TFC_BUILD_DIR when set (TFC_BUILD_DIR=/path/to/build pip install ./python);
  - else ../build next to this directory (the repository's build/) when it
    holds lib/libtfcrt.so or bin/tfc-compile: `pip install ./python` from
    a built checkout;
  - else nothing: the package finds them through $TFC_RUNTIME_LIB /
    $TFC_COMPILE or the system's search paths.

setuptools' build directory and egg-info go to a temporary directory, not
into the source tree (no stale file of an earlier build gets into a wheel).
"""

import atexit
import os
import shutil
import tempfile

from setuptools import setup
from setuptools.command.build import build
from setuptools.command.build_py import build_py
from setuptools.command.egg_info import egg_info

HERE = os.path.dirname(os.path.abspath(__file__))


def _tfc_build_dir():
    env = os.environ.get("TFC_BUILD_DIR")
    if env:
        return os.path.abspath(env)
    tree = os.path.normpath(os.path.join(HERE, "..", "build"))
    if any(os.path.exists(os.path.join(tree, *p)) for p in
           (("lib", "libtfcrt.so"), ("bin", "tfc-compile"))):
        return tree
    return None


class BuildPy(build_py):
    def run(self):
        super().run()
        path = os.path.join(self.build_lib, "tfc", "_paths.py")
        with open(path, "w") as f:
            f.write('"""Written by setup.py when the package was built."""\n'
                    "BUILD_DIR = %r\n" % _tfc_build_dir())


_scratch = []


def _scratch_dir():
    """One temporary directory per setup.py run, removed at its exit."""
    if not _scratch:
        _scratch.append(tempfile.mkdtemp(prefix="tfc-pybuild-"))
        atexit.register(shutil.rmtree, _scratch[0], True)
    return _scratch[0]


class Build(build):
    def initialize_options(self):
        super().initialize_options()
        self.build_base = os.path.join(_scratch_dir(), "build")


class EggInfo(egg_info):
    def initialize_options(self):
        super().initialize_options()
        self.egg_base = _scratch_dir()


setup(cmdclass={"build": Build, "build_py": BuildPy, "egg_info": EggInfo})
