# -*- Python -*-
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "TFC"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "Inputs",
                   "unittests", "extract_ptx.py", "ptxas_sweep.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.tfc_obj_root, "tests")

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%tfc_src_root", config.tfc_src_root))
config.substitutions.append(("%tfc_bin", config.tfc_tools_dir))
# The fake CUDA driver that runs PTX modules in an interpreter
# (ptx-interpreter/): GPU builds checked without a GPU.
config.substitutions.append(
    ("%ptx_cuda", os.path.join(config.tfc_obj_root, "runtime", "fixtures",
                               "ptx_cuda.so")))

# The fake NCCL (over MPI) of tensor-parallel GPU builds run on %ptx_cuda.
config.substitutions.append(
    ("%fake_nccl", os.path.join(config.tfc_obj_root, "runtime", "fixtures",
                                "fake_nccl.so")))

llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()

tool_dirs = [config.tfc_tools_dir, config.llvm_tools_dir]
tools = ["tfc-opt", "tfc-import", "tfc-compile", "tfc-run", "tfc-bench"]
llvm_config.add_tool_substitutions(tools, tool_dirs)
llvm_config.with_environment("PATH", config.tfc_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
# ptxas and libdevice (GPU lowering tests): the CUDA toolkit of these machines.
llvm_config.with_environment("PATH", "/usr/local/cuda/bin", append_path=True)
llvm_config.with_environment("CUDA_HOME", "/usr/local/cuda")
# The tests' Python helpers (tests/pylib/tfc_testing): RUN lines run its
# modules with python3 -m.
llvm_config.with_environment(
    "PYTHONPATH", os.path.join(config.tfc_src_root, "tests", "pylib"),
    append_path=True)


def cuda_driver_available():
    """A CUDA driver that initialises and sees at least one device."""
    import ctypes
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    count = ctypes.c_int(0)
    return (cuda.cuInit(0) == 0 and
            cuda.cuDeviceGetCount(ctypes.byref(count)) == 0 and
            count.value > 0)


# Code-generation checks that hold only where the host has AVX-512.
def host_has_avx512():
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.startswith("flags") and " avx512f" in line
                       for line in f)
    except OSError:
        return False


if host_has_avx512():
    config.available_features.add("host-avx512")

# GPU numerics tests (REQUIRES: cuda-driver) run only where a GPU is;
# elsewhere lit reports them UNSUPPORTED.
if cuda_driver_available():
    config.available_features.add("cuda-driver")
