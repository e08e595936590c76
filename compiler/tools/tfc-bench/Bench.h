//===- Bench.h - tfc-bench's options, kernels, runs and report --*- C++ -*-===//
//
// What the parts of tfc-bench share: its options and shapes (Options.cpp),
// their limits (Limits.cpp), the kernel each shape builds (Kernels.cpp),
// the builds tfc-compile makes of it (Compile.cpp), the measurement of one
// shape (Measure.cpp), the table and the JSON file (Report.cpp), and the
// errors, the temporary directory every exit removes and output files whose
// failed writes are errors (Workdir.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef TFC_TOOLS_TFC_BENCH_BENCH_H
#define TFC_TOOLS_TFC_BENCH_BENCH_H

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <memory>
#include <random>
#include <string>
#include <sys/types.h>
#include <vector>

namespace tfc::bench {

struct Options {
  std::string kernel = "attention";
  std::string shapes;
  bool causal = false;
  double softcap = 0; ///< > 0: attention's scores soft-capped (Gemma 2)
  int64_t window = 0; ///< > 0: attention's sliding window (Mistral, Gemma)
  int threads = 1;
  int repeat = 15;
  std::string json;
  std::string workdir;
  std::string target = "cpu";
  std::string dtype = "f32";
  std::vector<std::string> compileFlags;
  bool gpu() const { return target == "nvptx"; }
  bool matmul() const { return kernel == "matmul"; }
  /// Attention and matmul: timed against sgemm, rated in GFLOP/s.
  bool computeBound() const { return kernel == "attention" || matmul(); }
  /// The bits the builds quantize weights to (TFC_UK_QUANTIZE_I8, _I4),
  /// or 0.
  int quantizedWeightBits() const {
    for (const std::string &flag : compileFlags) {
      if (flag == "--quantize-weights=int8")
        return 8;
      if (flag == "--quantize-weights=int4")
        return 4;
    }
    return 0;
  }
  /// Whether the builds quantize the activations of those products too.
  bool quantizesActivations() const {
    return std::find(compileFlags.begin(), compileFlags.end(),
                     "--quantize-activations=int8") != compileFlags.end();
  }
  size_t elementBytes() const { return dtype == "f32" ? 4 : 2; }
  /// How far the fused and the unfused build may differ (relative, in
  /// the norm): f32 rounding; f16 and bf16 results carry 11 and 8
  /// significant bits, and the unfused build rounds its intermediates to
  /// them too, so a few units of 2^-11 or 2^-8.
  double tolerance() const {
    return dtype == "f32" ? 1e-4 : dtype == "f16" ? 5e-3 : 3e-2;
  }
};

/// One shape of --shapes: its name as parsed (no leading zeros), which
/// names its files and its row, and its dimensions.
struct Shape {
  std::string name;
  std::vector<int64_t> dims;
};

/// Prints `tfc-bench: error: MESSAGE` and exits with status 1 (removing the
/// temporary directory, as every exit does).
[[noreturn]] void die(const std::string &message);

//===- Options.cpp --------------------------------------------------------===//

/// The flags of the command line, checked; --help prints the usage and
/// exits with status 0, anything else wrong dies naming it.
Options parseOptions(int argc, char **argv);

/// --shapes (or the kernel's defaults), every one checked before anything
/// is compiled or run: its form, and that a run of it fits in memory (so
/// none of its sizes overflows).
std::vector<Shape> parseShapes(const Options &o);

//===- Limits.cpp ---------------------------------------------------------===//

/// The most --threads may ask for: 8 times the hardware threads.
int maxThreads();
/// The most --repeat may ask for.
constexpr int kMaxRepeat = 1000000;

/// Dies unless one run of `dims` fits in the memory tfc-bench may use: its
/// inputs, weights and outputs, the references' copies and the largest
/// intermediates of the unfused build, counted in floating point (no
/// product overflows), at most the machine's physical memory (or its cgroup's
/// limit, when lower). Every size of the shape then fits in an int64_t.
void checkMemory(const Options &o, const std::string &text,
                 const std::vector<int64_t> &dims);

//===- Kernels.cpp --------------------------------------------------------===//

/// The MLIR of one kernel and the shapes of its inputs and output.
struct KernelSpec {
  std::string mlir;
  std::vector<std::vector<int64_t>> inputs, weights;
  std::vector<int64_t> output;
  double flops = 0; // attention and matmul
};

/// The kernel of `o` on `dims`: its operands, its FLOP count and its module,
/// built with MLIR's builders and printed.
KernelSpec makeKernel(const Options &o, const std::vector<int64_t> &dims);

//===- Compile.cpp --------------------------------------------------------===//

/// Writes the kernel's MLIR to WORKDIR/KERNEL_SHAPE.mlir and compiles it
/// with the tfc-compile next to tfc-bench into KERNEL_SHAPE.fused.so and
/// (but for a matmul, which fusion does not change) .unfused.so; dies with
/// tfc-compile's first line when a build fails. Returns WORKDIR/KERNEL_SHAPE.
std::string compileBuilds(const Options &o, const Shape &shape,
                          const KernelSpec &k);

//===- Measure.cpp --------------------------------------------------------===//

/// One shape's results: medians in milliseconds, the fused build's rate
/// (GFLOP/s, or GB/s for the memory-bound kernels), the reference's rate,
/// the fraction of sgemm's rate (or the time over the copy's), the peak
/// memory of each build and how far the build is from its check.
struct Row {
  std::string shape;
  double fusedMs, unfusedMs, refMs, gflops, refRate, fraction;
  double fusedMiB, unfusedMiB;
  double error;
};

/// Measures one shape after another with what they share: the random
/// inputs (one sequence across the shapes) and oneDNN's sgemm with its
/// operands, looked up once.
class Measurer {
public:
  explicit Measurer(const Options &o);
  ~Measurer();
  /// Whether oneDNN's sgemm was found (host builds of attention and matmul
  /// only).
  bool hasSgemm() const;
  /// Loads the builds at `base` (compileBuilds), checks the fused one
  /// against the unfused one (a matmul against a float64 product), then
  /// times them interleaved with the reference. A check that fails is
  /// printed and sets `mismatch`.
  Row measure(const Shape &shape, const KernelSpec &k, const std::string &base,
              bool &mismatch);

private:
  struct Reference;
  const Options &o;
  std::unique_ptr<Reference> ref;
  std::mt19937 rng{1234};
  std::normal_distribution<float> normal;
};

//===- Report.cpp ---------------------------------------------------------===//

/// The title line and the markdown table of `rows` on the standard output.
void printTable(const Options &o, const std::vector<Row> &rows, bool haveSgemm);

/// The options and `rows` as JSON into `f` (opened on o.json), closed.
void writeJson(const Options &o, const std::vector<Row> &rows, FILE *f);

//===- Workdir.cpp --------------------------------------------------------===//

/// Creates tfc-bench's temporary directory, $TMPDIR/tfc-bench-XXXXXX
/// (/tmp when TMPDIR is unset or empty), and makes every way out of the
/// process remove it: a return from main, die(), and the signals that end
/// a process (interrupts, termination, a broken pipe, crashes), after which
/// the signal ends the process as it would have. Only SIGKILL leaves it.
std::string makeWorkdir();

/// The tfc-compile process tfc-bench waits for (0: none): a signal that ends
/// tfc-bench kills it before removing the directory it writes to.
void setCompileChild(pid_t pid);

/// Flushes and closes `f`, written to `path`; dies naming `path` when a
/// write or the close failed (a full disk, /dev/full).
void closeOrDie(FILE *f, const std::string &path);

} // namespace tfc::bench

#endif // TFC_TOOLS_TFC_BENCH_BENCH_H
