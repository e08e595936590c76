//===- Measure.cpp - One shape's builds checked and timed -----------------===//
//
// The builds of one shape run on the same random inputs: the fused result
// is checked against the unfused one (a matmul's against a float64
// product), then the builds and a reference are timed interleaved, each
// the median of --repeat runs. The reference is oneDNN's sgemm for the
// compute-bound kernels and a copy of the output's bytes for the
// memory-bound ones; GPU builds have none and are timed with CUDA events.
//
//===----------------------------------------------------------------------===//

#include "Bench.h"

#include "tfc/runtime/api.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>

namespace tfc::bench {

namespace {

void check(tfc_status s, const std::string &what) {
  if (!s)
    return;
  std::string m = tfc_status_message(s);
  tfc_status_free(s);
  die(what + ": " + m);
}

/// Bytes swept between timed runs of memory-bound kernels to evict the last
/// level cache (a 32 MiB L3 slice here, shared with the neighbours).
constexpr size_t kFlushBytes = size_t(96) << 20;

/// The side of sgemm's square operands, the reference of attention.
constexpr int64_t kGemmN = 1024;

/// `count` elements of 4 bytes (f32) or fewer (f16, bf16: the first
/// count * 2 bytes), 64-byte aligned.
struct Buffer {
  float *data = nullptr;
  size_t count = 0;
  explicit Buffer(size_t n) : count(n) {
    if (n == 0)
      return;
    size_t bytes = ((n * 4 + 63) / 64) * 64;
    data = static_cast<float *>(std::aligned_alloc(64, bytes));
    if (!data)
      die("out of memory for a buffer of " + std::to_string(bytes) + " bytes");
    std::memset(data, 0, n * 4); // pre-fault
  }
  ~Buffer() { std::free(data); }
  Buffer(const Buffer &) = delete;
  /// Element i of a buffer of `dtype`, as f32.
  float get(size_t i, const std::string &dtype) const {
    if (dtype == "f32")
      return data[i];
    uint16_t bits;
    std::memcpy(&bits, reinterpret_cast<const char *>(data) + 2 * i, 2);
    if (dtype == "f16") {
      _Float16 h;
      std::memcpy(&h, &bits, 2);
      return float(h);
    }
    uint32_t wide = uint32_t(bits) << 16;
    float f;
    std::memcpy(&f, &wide, 4);
    return f;
  }
  /// Sets element i of a buffer of `dtype` to `v`, rounded to nearest.
  void set(size_t i, float v, const std::string &dtype) {
    if (dtype == "f32") {
      data[i] = v;
      return;
    }
    uint16_t bits;
    if (dtype == "f16") {
      _Float16 h = static_cast<_Float16>(v);
      std::memcpy(&bits, &h, 2);
    } else { // bf16, round to nearest even (the inputs are finite)
      uint32_t u;
      std::memcpy(&u, &v, 4);
      bits = uint16_t((u + 0x7fff + ((u >> 16) & 1)) >> 16);
    }
    std::memcpy(reinterpret_cast<char *>(data) + 2 * i, &bits, 2);
  }
};

using Buffers = std::vector<std::unique_ptr<Buffer>>;

size_t elements(const std::vector<int64_t> &shape) {
  size_t n = 1;
  for (int64_t d : shape)
    n *= size_t(d);
  return n;
}

double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// A loaded build with its bound buffers.
struct Build {
  tfc_model *model = nullptr;
  std::unique_ptr<Buffer> out;
  uint64_t workBytes = 0;
  ~Build() { tfc_model_destroy(model); }
};

void loadAndBind(Build &b, const std::string &lib, const Buffers &inputs,
                 const Buffers &weights, const KernelSpec &k) {
  check(tfc_model_load(lib.c_str(), &b.model), "loading " + lib);
  for (size_t i = 0; i < inputs.size(); ++i)
    check(tfc_model_bind_input(b.model, int32_t(i), inputs[i]->data),
          "binding input");
  for (size_t i = 0; i < weights.size(); ++i)
    check(tfc_model_bind_weight(b.model, int32_t(i), weights[i]->data),
          "binding weight");
  b.out = std::make_unique<Buffer>(elements(k.output));
  check(tfc_model_bind_output(b.model, 0, b.out->data), "binding output");
  // Working memory: what the model's first run obtains from the allocator
  // with nothing cached.
  tfc_allocator_trim();
  tfc_allocator_stats before, after;
  tfc_allocator_get_stats(&before);
  check(tfc_model_invoke(b.model), "running " + lib);
  tfc_allocator_get_stats(&after);
  b.workBytes = after.fresh_bytes - before.fresh_bytes;
}

/// oneDNN's sgemm (row-major), looked up at run time.
using SgemmFn = int (*)(char, char, int64_t, int64_t, int64_t, float,
                        const float *, int64_t, const float *, int64_t, float,
                        float *, int64_t);

SgemmFn findSgemm() {
  for (const char *name : {"libdnnl.so.2", "libdnnl.so.3", "libdnnl.so"})
    if (void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL))
      if (void *f = dlsym(h, "dnnl_sgemm"))
        return reinterpret_cast<SgemmFn>(f);
  return nullptr;
}

/// Float64 copies of the first K values of `rows` rows of `b` (row r's l-th
/// at r * K + l), quantized in groups of `group` to [-qmax, qmax] with the
/// scale max|x| / qmax and values rounded to nearest, as ukernels.h defines
/// it (or as they are for qmax 0).
std::vector<double> quantized(const Options &o, const Buffer &b, int64_t rows,
                              int64_t kk, int64_t group, float qmax) {
  std::vector<double> out(size_t(rows * kk));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t l0 = 0; l0 < kk; l0 += group) {
      int64_t l1 = std::min(kk, l0 + group);
      float top = 0;
      for (int64_t l = l0; l < l1; ++l)
        top = std::max(top, std::fabs(b.get(r * kk + l, o.dtype)));
      float scale = top / qmax;
      for (int64_t l = l0; l < l1; ++l) {
        float x = b.get(r * kk + l, o.dtype);
        if (qmax != 0)
          x = scale == 0
                  ? 0.0f
                  : std::clamp(std::nearbyint(x / scale), -qmax, qmax) * scale;
        out[size_t(r * kk + l)] = x;
      }
    }
  return out;
}

/// How far the fused build's output is from the unfused one's, or a
/// matmul's from the float64 product (of the inputs as rounded to the
/// element type; of the weight as quantized, when the build quantizes it:
/// per row of W [N, K] (int8) or 128 values of it (int4); of A's rows
/// quantized in blocks of 128 too, when the build quantizes activations):
/// relative, in the norm.
double relativeError(const Options &o, const std::vector<int64_t> &dims,
                     const Buffers &inputs, const Buffers &weights,
                     const Build &fused, const Build &unfused) {
  std::vector<double> w, a;
  if (o.matmul()) {
    int64_t m = dims[0], kk = dims[1], n = dims[2];
    int bits = o.quantizedWeightBits();
    w = quantized(o, *weights[0], n, kk, bits == 4 ? 128 : kk,
                  bits == 4   ? 7.0f
                  : bits == 8 ? 127.0f
                              : 0.0f);
    a = quantized(o, *inputs[0], m, kk, 128,
                  bits && o.quantizesActivations() ? 127.0f : 0.0f);
  }
  auto expected = [&](size_t i) -> double {
    if (!o.matmul())
      return unfused.out->get(i, o.dtype);
    int64_t kk = dims[1], n = dims[2], row = int64_t(i) / n,
            col = int64_t(i) % n;
    double sum = 0;
    for (int64_t l = 0; l < kk; ++l)
      sum += a[size_t(row * kk + l)] * w[size_t(col * kk + l)];
    return sum;
  };
  double num = 0, den = 0;
  for (size_t i = 0; i < fused.out->count; ++i) {
    double f = fused.out->get(i, o.dtype), u = expected(i);
    num += (f - u) * (f - u);
    den += u * u;
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

/// The seconds of each timed run: the fused build, the unfused one (0 for
/// a matmul) and the reference (0 on the GPU).
struct Timings {
  std::vector<double> fused, unfused, reference;
};

/// --repeat interleaved rounds of the builds and `reference`.
template <typename Reference>
Timings timeRounds(const Options &o, const Build &fused, const Build &unfused,
                   Reference &reference) {
  // Memory-bound kernels and their copy each start from cold caches: a
  // sweep over a buffer larger than the last-level cache slice evicts
  // what the previous run left there (otherwise whichever runs after the
  // smaller footprint finds part of its input cached, and the ratio
  // depends on the order and on the neighbours' cache use).
  Buffer flush(o.computeBound() || o.gpu() ? 0 : kFlushBytes / 4);
  auto evict = [&]() {
    for (size_t i = 0; i < flush.count; i += 16)
      flush.data[i] += 1.0f;
    asm volatile("" : : "r"(flush.data) : "memory");
  };
  Timings t;
  // GPU: each run is the model's kernels, timed with CUDA events after
  // one untimed run of each build.
  auto kernelSeconds = [&](tfc_model *m, int32_t warmup, const char *what) {
    double ms = 0;
    check(tfc_model_time(m, warmup, 1, &ms), what);
    return ms * 1e-3;
  };
  for (int r = 0; r < o.repeat; ++r) {
    if (o.gpu()) {
      int32_t warmup = r == 0 ? 1 : 0;
      t.fused.push_back(kernelSeconds(fused.model, warmup, "fused run"));
      t.unfused.push_back(
          o.matmul() ? 0 : kernelSeconds(unfused.model, warmup, "unfused run"));
      t.reference.push_back(0);
      continue;
    }
    evict();
    double t0 = now();
    check(tfc_model_invoke(fused.model), "fused run");
    double t1 = now();
    evict();
    double t2 = now();
    if (!o.matmul())
      check(tfc_model_invoke(unfused.model), "unfused run");
    double t3 = now();
    evict();
    double t4 = now();
    reference();
    double t5 = now();
    t.fused.push_back(t1 - t0);
    t.unfused.push_back(t3 - t2);
    t.reference.push_back(t5 - t4);
  }
  return t;
}

} // namespace

/// oneDNN's sgemm when found, and attention's 1024 x 1024 operands of it.
struct Measurer::Reference {
  SgemmFn sgemm = nullptr;
  std::unique_ptr<Buffer> a, b, c;
};

Measurer::Measurer(const Options &o) : o(o), ref(new Reference) {
  // The references run on the host: none for GPU builds.
  ref->sgemm = o.computeBound() && !o.gpu() ? findSgemm() : nullptr;
  if (ref->sgemm && !o.matmul()) {
    ref->a = std::make_unique<Buffer>(kGemmN * kGemmN);
    ref->b = std::make_unique<Buffer>(kGemmN * kGemmN);
    ref->c = std::make_unique<Buffer>(kGemmN * kGemmN);
    for (size_t i = 0; i < ref->a->count; ++i)
      ref->a->data[i] = ref->b->data[i] = float(i % 7) * 0.1f;
  }
}

Measurer::~Measurer() = default;

bool Measurer::hasSgemm() const { return ref->sgemm != nullptr; }

Row Measurer::measure(const Shape &shape, const KernelSpec &k,
                      const std::string &base, bool &mismatch) {
  const std::vector<int64_t> &dims = shape.dims;
  bool matmul = o.matmul();
  size_t ioBytes = elements(k.output) * o.elementBytes();
  auto random = [&](const std::vector<std::vector<int64_t>> &shapes) {
    Buffers buffers;
    for (const std::vector<int64_t> &s : shapes) {
      buffers.push_back(std::make_unique<Buffer>(elements(s)));
      for (size_t i = 0; i < buffers.back()->count; ++i)
        buffers.back()->set(i, normal(rng), o.dtype);
      ioBytes += elements(s) * o.elementBytes();
    }
    return buffers;
  };
  Buffers inputs = random(k.inputs);
  Buffers weights = random(k.weights);
  Build fused, unfused;
  loadAndBind(fused, base + ".fused.so", inputs, weights, k);
  if (!matmul)
    loadAndBind(unfused, base + ".unfused.so", inputs, weights, k);

  double error = relativeError(o, dims, inputs, weights, fused, unfused);
  if (!(error <= o.tolerance())) {
    std::fprintf(stderr, "tfc-bench: %s %s: %s differ (%g)\n", o.kernel.c_str(),
                 shape.name.c_str(),
                 matmul ? "the build and a float64 product"
                        : "fused and unfused",
                 error);
    mismatch = true;
  }
  // A matmul's sgemm runs the same shape on the same values in f32.
  SgemmFn sgemm = ref->sgemm;
  std::unique_ptr<Buffer> ma, mw, mc;
  if (matmul && sgemm) {
    ma = std::make_unique<Buffer>(inputs[0]->count);
    mw = std::make_unique<Buffer>(weights[0]->count);
    mc = std::make_unique<Buffer>(elements(k.output));
    for (size_t i = 0; i < ma->count; ++i)
      ma->data[i] = inputs[0]->get(i, o.dtype);
    for (size_t i = 0; i < mw->count; ++i)
      mw->data[i] = weights[0]->get(i, o.dtype);
  }

  // The reference: sgemm (compute) or a copy of the output's bytes
  // (memory), from the kernel's own input buffer into its own output
  // buffer: the same pages, so the same bandwidth whatever memory the
  // process was given (which varies from process to process here).
  Buffer &copySrc = *inputs[0], &copyDst = *fused.out;
  auto reference = [&]() {
    if (o.gpu())
      return;
    if (matmul && sgemm)
      sgemm('N', 'T', dims[0], dims[2], dims[1], 1.0f, ma->data, dims[1],
            mw->data, dims[1], 0.0f, mc->data, dims[2]);
    else if (sgemm)
      sgemm('N', 'N', kGemmN, kGemmN, kGemmN, 1.0f, ref->a->data, kGemmN,
            ref->b->data, kGemmN, 0.0f, ref->c->data, kGemmN);
    else {
      std::memcpy(copyDst.data, copySrc.data, copyDst.count * o.elementBytes());
      // The copy must happen: its destination escapes.
      asm volatile("" : : "r"(copyDst.data) : "memory");
    }
  };
  reference();
  Timings t = timeRounds(o, fused, unfused, reference);

  Row row;
  row.shape = shape.name;
  row.fusedMs = median(t.fused) * 1e3;
  row.unfusedMs = median(t.unfused) * 1e3;
  row.refMs = median(t.reference) * 1e3;
  row.error = error;
  if (o.computeBound()) {
    double refFlops = matmul ? k.flops : 2.0 * kGemmN * kGemmN * kGemmN;
    row.gflops = k.flops / (row.fusedMs * 1e6);
    row.refRate = sgemm ? refFlops / (row.refMs * 1e6) : 0;
    row.fraction = sgemm ? row.gflops / row.refRate : 0;
  } else {
    // Bandwidth of the kernel counted as one read and one write, and its
    // time over the copy's.
    double bytes = 2.0 * elements(k.output) * o.elementBytes();
    row.gflops = bytes / (row.fusedMs * 1e6);
    row.refRate = o.gpu() ? 0 : bytes / (row.refMs * 1e6);
    row.fraction = o.gpu() ? 0 : row.fusedMs / row.refMs;
  }
  row.fusedMiB = (ioBytes + fused.workBytes) / 1048576.0;
  row.unfusedMiB = (ioBytes + unfused.workBytes) / 1048576.0;
  return row;
}

} // namespace tfc::bench
