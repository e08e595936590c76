//===- Kernels.cpp - tfc-bench's shapes, their limits and kernels ---------===//

#include "Bench.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace tfc::bench {

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

static std::string tensorType(const std::vector<int64_t> &shape,
                              const std::string &dtype) {
  std::string s = "tensor<";
  for (int64_t d : shape)
    s += std::to_string(d) + "x";
  return s + dtype + ">";
}

KernelSpec makeKernel(const Options &o, const std::vector<int64_t> &dims) {
  KernelSpec k;
  if (o.kernel == "attention") {
    // B x H x S x D, B x H x Sq x Skv x D (decode: Sq = 1), or
    // B x Hq x Hkv x Sq x Skv x D (grouped-query heads).
    size_t n = dims.size();
    int64_t b = dims[0], h = dims[1], hkv = n == 6 ? dims[2] : h,
            sq = dims[n - 3 + (n == 4)], skv = dims[n - 2], d = dims.back();
    std::vector<int64_t> q = {b, h, sq, d}, kv = {b, hkv, skv, d};
    std::string tq = tensorType(q, o.dtype), tkv = tensorType(kv, o.dtype);
    k.inputs = {q, kv, kv};
    k.output = q;
    std::string attrs;
    if (o.causal)
      attrs = "is_causal";
    if (o.softcap > 0) {
      char cap[64];
      std::snprintf(cap, sizeof cap, "softcap = %.9e : f32", o.softcap);
      attrs += (attrs.empty() ? "" : ", ") + std::string(cap);
    }
    if (o.window > 0)
      attrs += (attrs.empty() ? "" : ", ") + std::string("window = ") +
               std::to_string(o.window) + " : i64";
    k.mlir = "func.func @main(%q: " + tq + ", %k: " + tkv + ", %v: " + tkv +
             ") -> " + tq + " {\n  %o = transformer.attention %q, %k, %v " +
             (attrs.empty() ? "" : "{" + attrs + "} ") + ": " + tq + ", " +
             tkv + ", " + tkv + " -> " + tq + "\n  return %o : " + tq + "\n}\n";
    // Query i sees keys j <= i + Skv - Sq when causal (S(S+1)/2 of the S^2
    // pairs for Sq = Skv = S), every key otherwise; with a window only
    // those with j > i + Skv - Sq - window.
    double pairs = double(sq) * skv;
    if (o.causal || o.window > 0) {
      pairs = 0;
      for (int64_t i = 0; i < sq; ++i) {
        int64_t end =
            o.causal ? std::clamp<int64_t>(i + skv - sq + 1, 0, skv) : skv;
        // A window wider than every row is none (and may be near
        // INT64_MAX: no overflow here).
        int64_t window = std::min<int64_t>(o.window, sq + skv);
        int64_t begin =
            o.window > 0
                ? std::clamp<int64_t>(i + skv - sq - window + 1, 0, skv)
                : 0;
        pairs += double(std::max<int64_t>(0, end - begin));
      }
    }
    k.flops = 4.0 * b * h * d * pairs;
    return k;
  }
  if (o.kernel == "matmul") {
    // C = A . W^T with f32 sums, rounded to the element type.
    int64_t m = dims[0], kk = dims[1], n = dims[2];
    std::string ta = tensorType({m, kk}, o.dtype),
                tw = tensorType({n, kk}, o.dtype),
                twt = tensorType({kk, n}, o.dtype),
                tc = tensorType({m, n}, "f32"),
                ty = tensorType({m, n}, o.dtype);
    k.inputs = {{m, kk}};
    k.weights = {{n, kk}};
    k.output = {m, n};
    k.flops = 2.0 * m * n * kk;
    k.mlir = "func.func @main(%a: " + ta + ", %w: " + tw +
             " {tfc.name = \"w\", tfc.role = \"weight\"}) -> " + ty +
             " {\n  %wt = tosa.transpose %w {perms = array<i32: 1, 0>} : (" +
             tw + ") -> " + twt + "\n  %e = tensor.empty() : " + tc +
             "\n  %z = arith.constant 0.0 : f32\n  %f = linalg.fill ins(%z : "
             "f32) outs(%e : " +
             tc + ") -> " + tc + "\n  %c = linalg.matmul ins(%a, %wt : " + ta +
             ", " + twt + ") outs(%f : " + tc + ") -> " + tc + "\n";
    if (o.dtype == "f32")
      k.mlir += "  return %c : " + tc + "\n}\n";
    else
      k.mlir += "  %y = tosa.cast %c : (" + tc + ") -> " + ty +
                "\n  return %y : " + ty + "\n}\n";
    return k;
  }
  int64_t rows = dims[0], n = dims[1];
  std::vector<int64_t> x = {rows, n};
  std::string t = tensorType(x, o.dtype), tn = tensorType({n}, o.dtype);
  k.output = x;
  if (o.kernel == "softmax") {
    k.inputs = {x};
    k.mlir = "func.func @main(%x: " + t + ") -> " + t +
             " {\n  %y = transformer.softmax %x {dimension = 1 : i64} : " + t +
             " -> " + t + "\n  return %y : " + t + "\n}\n";
  } else if (o.kernel == "rms_norm") {
    k.inputs = {x, {n}};
    k.mlir = "func.func @main(%x: " + t + ", %g: " + tn + ") -> " + t +
             " {\n  %y = transformer.rms_norm %x, %g : " + t + ", " + tn +
             " -> " + t + "\n  return %y : " + t + "\n}\n";
  } else {
    k.inputs = {x, {n}, {n}};
    k.mlir = "func.func @main(%x: " + t + ", %g: " + tn + ", %b: " + tn +
             ") -> " + t +
             " {\n  %y = transformer.layer_norm %x, %g, %b : " + t + ", " + tn +
             ", " + tn + " -> " + t + "\n  return %y : " + t + "\n}\n";
  }
  return k;
}

} // namespace tfc::bench
