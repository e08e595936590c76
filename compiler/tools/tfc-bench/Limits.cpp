//===- Limits.cpp - What a run of tfc-bench may ask for -------------------===//

#include "Bench.h"

#include <cstdlib>
#include <fstream>
#include <thread>
#include <unistd.h>

namespace tfc::bench {

int maxThreads() {
  return 8 * int(std::max(1u, std::thread::hardware_concurrency()));
}

namespace {

/// The memory tfc-bench may use: the physical memory, or the cgroup's
/// limit (memory.max, cgroup v2) when lower; in bytes.
double memoryBound() {
  double bound =
      double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGESIZE));
  std::ifstream cgroup("/sys/fs/cgroup/memory.max");
  std::string limit;
  if (cgroup >> limit && !limit.empty() &&
      limit.find_first_not_of("0123456789") == std::string::npos) {
    double bytes = std::strtod(limit.c_str(), nullptr);
    if (bytes > 0 && (bound <= 0 || bytes < bound))
      bound = bytes;
  }
  return bound;
}

/// `bytes` for a person: "23.4 GiB", "5.0 PiB", "3.4e+38 bytes".
std::string humanBytes(double bytes) {
  char buf[64];
  double v = bytes / 1048576.0;
  for (const char *unit : {"MiB", "GiB", "TiB", "PiB", "EiB"}) {
    if (v < 1024) {
      std::snprintf(buf, sizeof buf, "%.1f %s", v, unit);
      return buf;
    }
    v /= 1024;
  }
  std::snprintf(buf, sizeof buf, "%.3g bytes", bytes);
  return buf;
}

} // namespace

void checkMemory(const Options &o, const std::string &text,
                 const std::vector<int64_t> &dims) {
  // Every buffer tfc-bench allocates holds 4 bytes an element whatever the
  // element type; the builds' intermediates are f32.
  auto product = [](std::initializer_list<int64_t> factors) {
    double p = 1;
    for (int64_t f : factors)
      p *= double(f);
    return p;
  };
  double elements = 0, extra = 0;
  if (o.kernel == "attention") {
    size_t n = dims.size();
    int64_t b = dims[0], h = dims[1], hkv = n == 6 ? dims[2] : h,
            sq = dims[n - 3 + (n == 4)], skv = dims[n - 2], d = dims.back();
    double q = product({b, h, sq, d}), kv = product({b, hkv, skv, d});
    // Q, K, V, both builds' outputs; the unfused build's scores and
    // probabilities.
    elements = 3 * q + 2 * kv + 2 * product({b, h, sq, skv});
  } else if (o.kernel == "matmul") {
    double a = product({dims[0], dims[1]}), w = product({dims[2], dims[1]}),
           c = product({dims[0], dims[2]});
    // A, W, C, sgemm's f32 copies of them, the packed weight and the f32
    // product before it is rounded; the float64 A and W of the check.
    elements = 2 * (a + w + c) + w + c;
    extra = 8 * (a + w);
  } else {
    double x = product({dims[0], dims[1]});
    // X, two vectors of N, both builds' outputs, two intermediates.
    elements = 5 * x + 2 * double(dims[1]);
  }
  // The cache flush (96 MiB) and sgemm's 1024 x 1024 operands.
  double bytes = 4 * elements + extra + double(128 << 20);
  double bound = memoryBound();
  if (!(bytes <= bound))
    die("shape '" + text + "' needs about " + humanBytes(bytes) +
        " of memory (inputs, outputs, copies and intermediates), more than "
        "this machine's " +
        humanBytes(bound) + " (physical memory, or the cgroup's limit)");
}

} // namespace tfc::bench
