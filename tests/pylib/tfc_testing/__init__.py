"""Shared helpers of tfc's Python tests, the device check (scripts/device)
and the benchmarks (bench/):

  mlir              MLIR text of one-op test functions; signatures parsed
  attention         transformer.attention functions, and the attention
                    graphs exporters write in TOSA (the fusion's cases)
  gpu_builds        the GPU builds (tfc-compile flags) of the kernels
  tosa_eval         a numpy evaluator of TOSA / transformer functions
  reference         float64 numpy references (attention, norms, BERT, ...)
  arrays            bf16 bits, errors, random inputs
  harness           compile with tfc-compile, run with tfc-run, compare
  encdec            the encoder-decoder families' checks (parts, a past)
  tfc_run           a compiled model run by tfc-run on arrays
  checks            PASS/FAIL lines of the runtime's tests
  safetensors_file  safetensors files without the safetensors package
  onnx_files        ONNX files of external data at chosen offsets (onnx)

RUN lines run its modules with python3 -m (lit puts tests/pylib on
PYTHONPATH); a script puts tests/pylib on sys.path itself, relative to its
own file, so that it also runs by hand. mlir, attention, gpu_builds,
checks and safetensors_file need only the standard library.
"""
