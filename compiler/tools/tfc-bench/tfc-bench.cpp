//===- tfc-bench.cpp - Fused against unfused, measured in one run ---------===//
//
//   tfc-bench [--kernel=attention|softmax|layer_norm|rms_norm|matmul]
//             [--shapes=S1;S2;...]
//             [--causal] [--softcap=C] [--window=W] [--threads=N]
//             [--repeat=R]
//             [--json=FILE]
//             [--target=cpu|nvptx] [--dtype=f32|f16|bf16]
//             [--compile-flags="FLAGS"]
//
// For each shape, compiles the fused and the unfused build of one kernel
// with tfc-compile, checks that they agree, then times them interleaved
// (median of R runs each after warm-up) next to a reference measured in the
// same run: oneDNN's sgemm for attention (GFLOP/s and the fraction of that
// rate), and a plain copy of the same bytes (one read, one write) for the
// memory-bound softmax and norms. Peak memory is the inputs, outputs
// and the working memory the model obtains from the runtime's allocator.
//
// --kernel=matmul times a linear layer, A [M, K] times a weight W [N, K]
// transposed (as models store them; bound as a weight, so packed once),
// against oneDNN's sgemm of the same shape on the same values in f32 (it
// packs per call). There is one build (fusion does not change a matmul),
// checked against a float64 product (with --compile-flags=
// --quantize-weights=int8 or =int4, of the weight as the build quantizes
// it; with --quantize-activations=int8 as well, of A as quantized too).
//
// With --target=nvptx the builds run through the CUDA driver and each run
// is the model's kernels timed with CUDA events (tfc_model_time: inputs
// copied in and outputs out around them, not timed); there is no reference
// and no memory column. --compile-flags go to both builds' tfc-compile
// (e.g. "--gpu-arch=sm_90" for the mma.sync kernels).
//
// Shapes: attention B x H x S x D (Sq = Skv = S), B x H x Sq x Skv x D
// (decode: Sq = 1) or B x Hq x Hkv x Sq x Skv x D (grouped-query heads),
// softmax, layer_norm and rms_norm ROWS x N, matmul M x K x N.
//
// Limits, checked before anything is compiled: --threads at most 8 times
// the hardware threads, --repeat at most a million, and each shape's run
// (inputs, outputs, the references' copies and the unfused build's largest
// intermediates) within the machine's physical memory or cgroup limit. The
// builds live in $TMPDIR/tfc-bench-XXXXXX (/tmp without TMPDIR), removed
// however tfc-bench ends but by SIGKILL (Workdir.cpp).
//
// Each kernel's MLIR is built with MLIR's builders (Kernels.cpp) and
// compiled by the tfc-compile next to tfc-bench (Compile.cpp); Measure.cpp
// checks and times the builds, Report.cpp prints the table and the JSON.
//
//===----------------------------------------------------------------------===//

#include "Bench.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <new>
#include <unistd.h>

using namespace tfc::bench;

namespace {

void setThreads(int n) {
  using Fn = void (*)(int);
  if (auto f = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "omp_set_num_threads")))
    f(n);
}

/// Gives every OpenMP runtime of the process `o.threads` threads; with more
/// than one, starts the process again with passive waiting first.
void setUpThreads(const Options &o, char **argv) {
  // Two OpenMP runtimes share the process: the models' (LLVM's libomp) and
  // the sgemm reference's (oneDNN's libgomp). With more than one thread,
  // each one's idle workers spin for a while after a parallel region and
  // take the cores from the other's next run (the fused attention on 2
  // threads measured at 1 thread's speed after an sgemm). Passive waiting
  // stops that; libgomp reads it when it loads, so the process starts
  // again with it set (unless the caller chose a policy).
  if (o.threads > 1 && !getenv("OMP_WAIT_POLICY")) {
    setenv("OMP_WAIT_POLICY", "passive", 1);
    execv("/proc/self/exe", argv);
    std::fprintf(stderr,
                 "tfc-bench: warning: could not restart with "
                 "OMP_WAIT_POLICY=passive; OpenMP runtimes may interfere\n");
  }
  // Every OpenMP runtime in the process (the models' and oneDNN's) reads
  // this before it starts.
  setenv("OMP_NUM_THREADS", std::to_string(o.threads).c_str(), 1);
  setThreads(o.threads);
}

} // namespace

int main(int argc, char **argv) {
  Options o = parseOptions(argc, argv);
  std::vector<Shape> shapes = parseShapes(o);
  // What tfc-bench allocates later, when the machine has less than it
  // seemed: one line, not an uncaught std::bad_alloc.
  std::set_new_handler([] { die("out of memory"); });
  setUpThreads(o, argv);

  // A result file that cannot be written fails now, not after the runs.
  FILE *jsonFile = nullptr;
  if (!o.json.empty() && !(jsonFile = std::fopen(o.json.c_str(), "w")))
    die("cannot write " + o.json + ": " + std::strerror(errno));

  o.workdir = makeWorkdir();
  Measurer measurer(o);
  std::vector<Row> rows;
  bool mismatch = false;
  for (const Shape &shape : shapes) {
    KernelSpec k = makeKernel(o, shape.dims);
    std::string base = compileBuilds(o, shape, k);
    rows.push_back(measurer.measure(shape, k, base, mismatch));
  }

  printTable(o, rows, measurer.hasSgemm());
  if (jsonFile)
    writeJson(o, rows, jsonFile);
  if (std::fflush(stdout) != 0 || std::ferror(stdout))
    die(std::string("cannot write the standard output: ") +
        std::strerror(errno));
  // Returning (as dying) removes the temporary directory.
  return mismatch ? 1 : 0;
}
