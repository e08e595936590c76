//===- Bench.h - tfc-bench's options, kernels and limits ---------*- C++
//-*-===//
//
// What tfc-bench.cpp shares with Kernels.cpp (the shapes, their limits and
// the MLIR of each kernel) and Workdir.cpp (errors, the temporary directory
// every exit removes, and output files whose failed writes are errors).
//
//===----------------------------------------------------------------------===//

#ifndef TFC_TOOLS_TFC_BENCH_BENCH_H
#define TFC_TOOLS_TFC_BENCH_BENCH_H

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
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

/// The most --threads may ask for: 8 times the hardware threads.
int maxThreads();
/// The most --repeat may ask for.
constexpr int kMaxRepeat = 1000000;

/// Prints `tfc-bench: error: MESSAGE` and exits with status 1 (removing the
/// temporary directory, as every exit does).
[[noreturn]] void die(const std::string &message);

//===- Kernels.cpp --------------------------------------------------------===//

/// The MLIR of one kernel and the shapes of its inputs and output.
struct KernelSpec {
  std::string mlir;
  std::vector<std::vector<int64_t>> inputs, weights;
  std::vector<int64_t> output;
  double flops = 0; // attention and matmul
};

/// The dimensions of `text` (positive decimal integers joined by x, each
/// one an int64_t), whose count must be one of `ranks`; dies otherwise.
std::vector<int64_t> parseShape(const std::string &text,
                                std::initializer_list<size_t> ranks);

/// Dies unless one run of `dims` fits in the memory tfc-bench may use: its
/// inputs, weights and outputs, the references' copies and the largest
/// intermediates of the unfused build, counted in floating point (no
/// product overflows), at most the machine's physical memory (or its cgroup's
/// limit, when lower). Every size of the shape then fits in an int64_t.
void checkMemory(const Options &o, const std::string &text,
                 const std::vector<int64_t> &dims);

KernelSpec makeKernel(const Options &o, const std::vector<int64_t> &dims);

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
