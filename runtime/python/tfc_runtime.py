"""The tfc package's runtime module (python/tfc/runtime.py), for scripts
that put this directory on the path:

    sys.path.insert(0, "/path/to/tfc/runtime/python")
    import tfc_runtime      # the same module as tfc.runtime

It loads the package from this source tree (../../python), unless a `tfc`
package is imported already, and makes `tfc_runtime` that package's
`tfc.runtime`: Model, Context, Error, TensorInfo, load_runtime,
set_threads, allocator_stats, the bf16 helpers. New code can
`pip install ./python` and `import tfc` instead.
"""

import importlib.util
import os
import sys

if "tfc" not in sys.modules:
    _pkg = os.path.normpath(os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "python", "tfc"))
    _spec = importlib.util.spec_from_file_location(
        "tfc", os.path.join(_pkg, "__init__.py"),
        submodule_search_locations=[_pkg])
    _tfc = importlib.util.module_from_spec(_spec)
    sys.modules["tfc"] = _tfc
    try:
        _spec.loader.exec_module(_tfc)
    except BaseException:
        del sys.modules["tfc"]
        raise

import tfc.runtime  # noqa: E402

sys.modules[__name__] = tfc.runtime
