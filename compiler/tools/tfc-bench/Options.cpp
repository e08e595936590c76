//===- Options.cpp - tfc-bench's flags and shapes -------------------------===//

#include "Bench.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace tfc::bench {

namespace {

/// The integer `v` of `flag`, at most `max` (`why` says what the bound
/// is); dies otherwise. Below 1: parseOptions says how small it may be.
int parseCount(const char *flag, const char *v, int max,
               const std::string &why) {
  char *end = nullptr;
  errno = 0;
  long long n = std::strtoll(v, &end, 10);
  if (end == v || *end)
    die(std::string(flag) + " must be an integer, got '" + v + "'");
  if (n > max || (errno == ERANGE && n > 0))
    die(std::string(flag) + "=" + v + " is more than " + std::to_string(max) +
        why);
  return n < 1 ? 0 : int(n);
}

void printUsage() {
  std::printf("usage: tfc-bench "
              "[--kernel=attention|softmax|layer_norm|rms_norm|matmul] "
              "[--shapes=S1;S2;...] [--causal] [--softcap=C] "
              "[--window=W] [--threads=N] "
              "[--repeat=R] [--json=FILE] [--target=cpu|nvptx] "
              "[--dtype=f32|f16|bf16] [--compile-flags=\"FLAGS\"]\n"
              "shapes: attention BxHxSxD, BxHxSqxSkvxD (decode: Sq = 1) "
              "or BxHqxHkvxSqxSkvxD, softmax and the norms ROWSxN, "
              "matmul MxKxN (A [M, K] times a weight [N, K] transposed)\n"
              "nvptx: the models' kernels timed with CUDA events, no "
              "reference; compile flags go to both builds\n"
              "limits: --threads at most 8 times the hardware threads, "
              "--repeat at most 1000000, a shape's run within the "
              "machine's memory; builds in $TMPDIR/tfc-bench-*\n");
}

/// Dies unless the flags go together; fills in the kernel's default shapes.
void checkOptions(Options &o) {
  if (o.target != "cpu" && o.target != "nvptx")
    die("unknown --target '" + o.target + "' (cpu or nvptx)");
  if (o.dtype != "f32" && o.dtype != "f16" && o.dtype != "bf16")
    die("unknown --dtype '" + o.dtype + "' (f32, f16 or bf16)");
  if (o.kernel != "attention" && o.kernel != "softmax" &&
      o.kernel != "layer_norm" && o.kernel != "rms_norm" &&
      o.kernel != "matmul")
    die("unknown --kernel '" + o.kernel +
        "' (attention, softmax, layer_norm, rms_norm or matmul)");
  if (o.softcap > 0 && o.kernel != "attention")
    die("--softcap applies to --kernel=attention only");
  if (o.window > 0 && o.kernel != "attention")
    die("--window applies to --kernel=attention only");
  if (o.threads < 1 || o.repeat < 3)
    die("--threads must be at least 1 and --repeat at least 3");
  if (o.shapes.empty())
    o.shapes = o.kernel == "attention"
                   ? "1x12x512x64;1x12x1024x64;1x12x2048x64;1x12x4096x64"
               : o.matmul() ? "128x768x768;128x768x2048;128x2048x768"
                            : "8192x384;2048x1536;1536x4096";
}

/// The dimensions of `text` (positive decimal integers joined by x, each
/// one an int64_t), whose count must be one of `ranks`; dies otherwise.
std::vector<int64_t> parseShape(const std::string &text,
                                std::initializer_list<size_t> ranks) {
  std::vector<int64_t> dims;
  std::stringstream ss(text);
  std::string part;
  while (std::getline(ss, part, 'x')) {
    // Digits only: strtoll would take a sign or leading blanks too.
    char *end = nullptr;
    errno = 0;
    long long v = std::strtoll(part.c_str(), &end, 10);
    if (part.empty() ||
        part.find_first_not_of("0123456789") != std::string::npos || *end ||
        v <= 0)
      die("bad shape '" + text + "': expected positive integers joined by x");
    if (errno == ERANGE)
      die("bad shape '" + text + "': dimension " + part +
          " does not fit in 64 bits");
    dims.push_back(v);
  }
  if (std::find(ranks.begin(), ranks.end(), dims.size()) != ranks.end())
    return dims;
  // "4", "4 or 5", "4, 5 or 6".
  std::string expected;
  for (size_t n = 0; n < ranks.size(); ++n) {
    if (n > 0)
      expected += n + 1 == ranks.size() ? " or " : ", ";
    expected += std::to_string(ranks.begin()[n]);
  }
  die("bad shape '" + text + "': expected " + expected + " dimensions");
}

} // namespace

Options parseOptions(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char *flag) -> const char * {
      size_t n = std::strlen(flag);
      return a.compare(0, n, flag) == 0 ? argv[i] + n : nullptr;
    };
    if (const char *v = value("--kernel="))
      o.kernel = v;
    else if (const char *v = value("--shapes="))
      o.shapes = v;
    else if (a == "--causal")
      o.causal = true;
    else if (const char *v = value("--softcap=")) {
      char *end = nullptr;
      o.softcap = std::strtod(v, &end);
      if (end == v || *end || !(o.softcap > 0) || !std::isfinite(o.softcap))
        die(std::string("--softcap must be a positive number, got '") + v +
            "'");
    } else if (const char *v = value("--window=")) {
      char *end = nullptr;
      errno = 0;
      long long w = std::strtoll(v, &end, 10);
      if (end == v || *end || errno || w <= 0)
        die(std::string("--window must be a positive integer, got '") + v +
            "'");
      o.window = w;
    } else if (const char *v = value("--threads="))
      o.threads = parseCount("--threads", v, maxThreads(),
                             " (8 times this machine's " +
                                 std::to_string(maxThreads() / 8) +
                                 " hardware threads)");
    else if (const char *v = value("--repeat="))
      o.repeat = parseCount("--repeat", v, kMaxRepeat, " runs");
    else if (const char *v = value("--json="))
      o.json = v;
    else if (const char *v = value("--target="))
      o.target = v;
    else if (const char *v = value("--dtype="))
      o.dtype = v;
    else if (const char *v = value("--compile-flags=")) {
      std::stringstream flags(v);
      for (std::string flag; flags >> flag;)
        o.compileFlags.push_back(flag);
    } else if (a == "--help" || a == "-h") {
      printUsage();
      std::exit(0);
    } else
      die("unknown argument '" + a + "' (see --help)");
  }
  checkOptions(o);
  return o;
}

std::vector<Shape> parseShapes(const Options &o) {
  std::vector<Shape> shapes;
  std::stringstream shapeList(o.shapes);
  for (std::string text; std::getline(shapeList, text, ';');) {
    std::vector<int64_t> dims = o.kernel == "attention"
                                    ? parseShape(text, {4, 5, 6})
                                : o.matmul() ? parseShape(text, {3})
                                             : parseShape(text, {2});
    if (dims.size() == 6 && dims[1] % dims[2] != 0)
      die("bad shape '" + text + "': " + std::to_string(dims[1]) +
          " query heads are not a multiple of " + std::to_string(dims[2]) +
          " key/value heads");
    checkMemory(o, text, dims);
    std::string name;
    for (int64_t d : dims)
      name += (name.empty() ? "" : "x") + std::to_string(d);
    shapes.push_back({name, dims});
  }
  return shapes;
}

} // namespace tfc::bench
