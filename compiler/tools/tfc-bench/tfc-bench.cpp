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
//===----------------------------------------------------------------------===//

#include "Bench.h"

#include "tfc/runtime/api.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fcntl.h>
#include <memory>
#include <new>
#include <random>
#include <sstream>
#include <string>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using namespace tfc::bench;

namespace {

/// The integer `v` of `flag`, at most `max` (`why` says what the bound
/// is); dies otherwise. Below 1: main says how small it may be.
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

void check(tfc_status s, const std::string &what) {
  if (!s)
    return;
  std::string m = tfc_status_message(s);
  tfc_status_free(s);
  die(what + ": " + m);
}

std::string selfDir() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0)
    die("cannot locate the tfc-bench executable");
  buf[n] = 0;
  std::string p(buf);
  return p.substr(0, p.rfind('/'));
}

/// Compiles `src` into `lib` with tfc-compile; dies with the first line of
/// what it printed when it fails.
void compile(const Options &o, const std::string &src, const std::string &lib,
             bool fused) {
  std::string compiler = selfDir() + "/tfc-compile";
  std::string target = "--target=" + o.target, log = lib + ".log";
  pid_t pid = fork();
  if (pid == 0) {
    std::vector<const char *> argv = {compiler.c_str(), src.c_str(), "-o",
                                      lib.c_str(), target.c_str()};
    if (!fused)
      argv.push_back("--no-fusion");
    for (const std::string &flag : o.compileFlags)
      argv.push_back(flag.c_str());
    argv.push_back(nullptr);
    int out = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out >= 0)
      dup2(out, 2);
    execv(compiler.c_str(), const_cast<char *const *>(argv.data()));
    _exit(127);
  }
  if (pid < 0)
    die(std::string("cannot run tfc-compile: ") + std::strerror(errno));
  setCompileChild(pid);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;
  setCompileChild(0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
    return;
  std::string first;
  if (FILE *f = std::fopen(log.c_str(), "r")) {
    char line[512] = "";
    if (std::fgets(line, sizeof line, f))
      first = line;
    std::fclose(f);
  }
  while (!first.empty() && (first.back() == '\n' || first.back() == '\r'))
    first.pop_back();
  die("tfc-compile failed on " + src + (first.empty() ? "" : ": " + first));
}

/// Bytes swept between timed runs of memory-bound kernels to evict the last
/// level cache (a 32 MiB L3 slice here, shared with the neighbours).
constexpr size_t kFlushBytes = size_t(96) << 20;

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

void loadAndBind(Build &b, const std::string &lib,
                 std::vector<std::unique_ptr<Buffer>> &inputs,
                 std::vector<std::unique_ptr<Buffer>> &weights,
                 const KernelSpec &k) {
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

struct Row {
  std::string shape;
  double fusedMs, unfusedMs, refMs, gflops, refRate, fraction;
  double fusedMiB, unfusedMiB;
  double error;
};

void setThreads(int n) {
  using Fn = void (*)(int);
  if (auto f = reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, "omp_set_num_threads")))
    f(n);
}

} // namespace

int main(int argc, char **argv) {
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
      return 0;
    } else
      die("unknown argument '" + a + "' (see --help)");
  }
  if (o.target != "cpu" && o.target != "nvptx")
    die("unknown --target '" + o.target + "' (cpu or nvptx)");
  if (o.dtype != "f32" && o.dtype != "f16" && o.dtype != "bf16")
    die("unknown --dtype '" + o.dtype + "' (f32, f16 or bf16)");
  if (o.kernel != "attention" && o.kernel != "softmax" &&
      o.kernel != "layer_norm" && o.kernel != "rms_norm" &&
      o.kernel != "matmul")
    die("unknown --kernel '" + o.kernel +
        "' (attention, softmax, layer_norm, rms_norm or matmul)");
  bool matmul = o.kernel == "matmul";
  if (o.softcap > 0 && o.kernel != "attention")
    die("--softcap applies to --kernel=attention only");
  if (o.window > 0 && o.kernel != "attention")
    die("--window applies to --kernel=attention only");
  if (o.threads < 1 || o.repeat < 3)
    die("--threads must be at least 1 and --repeat at least 3");
  if (o.shapes.empty())
    o.shapes = o.kernel == "attention"
                   ? "1x12x512x64;1x12x1024x64;1x12x2048x64;1x12x4096x64"
               : matmul ? "128x768x768;128x768x2048;128x2048x768"
                        : "8192x384;2048x1536;1536x4096";
  // Every shape is checked before anything is compiled or run: its form,
  // and that a run of it fits in memory (so none of its sizes overflows).
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes;
  std::stringstream shapeList(o.shapes);
  for (std::string text; std::getline(shapeList, text, ';');) {
    std::vector<int64_t> dims = o.kernel == "attention"
                                    ? parseShape(text, {4, 5, 6})
                                : matmul ? parseShape(text, {3})
                                         : parseShape(text, {2});
    if (dims.size() == 6 && dims[1] % dims[2] != 0)
      die("bad shape '" + text + "': " + std::to_string(dims[1]) +
          " query heads are not a multiple of " + std::to_string(dims[2]) +
          " key/value heads");
    checkMemory(o, text, dims);
    // Named as parsed (no leading zeros) in files and rows.
    std::string name;
    for (int64_t d : dims)
      name += (name.empty() ? "" : "x") + std::to_string(d);
    shapes.push_back({name, dims});
  }
  // What tfc-bench allocates later, when the machine has less than it
  // seemed: one line, not an uncaught std::bad_alloc.
  std::set_new_handler([] { die("out of memory"); });
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

  // A result file that cannot be written fails now, not after the runs.
  FILE *jsonFile = nullptr;
  if (!o.json.empty() && !(jsonFile = std::fopen(o.json.c_str(), "w")))
    die("cannot write " + o.json + ": " + std::strerror(errno));

  o.workdir = makeWorkdir();

  // The references run on the host: none for GPU builds.
  bool computeBound = o.kernel == "attention" || matmul;
  SgemmFn sgemm = computeBound && !o.gpu() ? findSgemm() : nullptr;
  const int64_t gemmN = 1024;
  std::unique_ptr<Buffer> ga, gb, gc;
  if (sgemm && !matmul) {
    ga = std::make_unique<Buffer>(gemmN * gemmN);
    gb = std::make_unique<Buffer>(gemmN * gemmN);
    gc = std::make_unique<Buffer>(gemmN * gemmN);
    for (size_t i = 0; i < ga->count; ++i)
      ga->data[i] = gb->data[i] = float(i % 7) * 0.1f;
  }

  std::vector<Row> rows;
  std::mt19937 rng(1234);
  std::normal_distribution<float> normal;
  bool mismatch = false;
  for (const auto &shape : shapes) {
    const std::string &shapeText = shape.first;
    const std::vector<int64_t> &dims = shape.second;
    KernelSpec k = makeKernel(o, dims);
    std::string base = o.workdir + "/" + o.kernel + "_" + shapeText;
    {
      FILE *f = std::fopen((base + ".mlir").c_str(), "w");
      if (!f)
        die("cannot write " + base + ".mlir: " + std::strerror(errno));
      std::fputs(k.mlir.c_str(), f);
      closeOrDie(f, base + ".mlir");
    }
    compile(o, base + ".mlir", base + ".fused.so", true);
    if (!matmul)
      compile(o, base + ".mlir", base + ".unfused.so", false);

    std::vector<std::unique_ptr<Buffer>> inputs;
    size_t ioBytes = elements(k.output) * o.elementBytes();
    for (auto &shape : k.inputs) {
      inputs.push_back(std::make_unique<Buffer>(elements(shape)));
      for (size_t i = 0; i < inputs.back()->count; ++i)
        inputs.back()->set(i, normal(rng), o.dtype);
      ioBytes += elements(shape) * o.elementBytes();
    }
    std::vector<std::unique_ptr<Buffer>> weights;
    for (auto &shape : k.weights) {
      weights.push_back(std::make_unique<Buffer>(elements(shape)));
      for (size_t i = 0; i < weights.back()->count; ++i)
        weights.back()->set(i, normal(rng), o.dtype);
      ioBytes += elements(shape) * o.elementBytes();
    }
    Build fused, unfused;
    loadAndBind(fused, base + ".fused.so", inputs, weights, k);
    if (!matmul)
      loadAndBind(unfused, base + ".unfused.so", inputs, weights, k);

    // The unfused build's result, or a matmul's float64 product (of the
    // inputs as rounded to the element type; of the weight as quantized,
    // when the build quantizes it: per row of W [N, K] (int8) or 128 values
    // of it (int4), scale max|x| / qmax, values rounded to nearest, as
    // ukernels.h defines it; of A's rows quantized in blocks of 128 too,
    // when the build quantizes activations).
    std::vector<double> w, a;
    if (matmul) {
      int64_t m = dims[0], kk = dims[1], n = dims[2];
      // `rows` rows of K values of `b` (row r's l-th at r * kk + l),
      // quantized in groups of `group` to [-qmax, qmax] (or as they are
      // for qmax 0).
      auto quantize = [&](const Buffer &b, int64_t rows, int64_t group,
                          float qmax) {
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
                        : std::clamp(std::nearbyint(x / scale), -qmax, qmax) *
                              scale;
              out[size_t(r * kk + l)] = x;
            }
          }
        return out;
      };
      int bits = o.quantizedWeightBits();
      w = quantize(*weights[0], n, bits == 4 ? 128 : kk,
                   bits == 4   ? 7.0f
                   : bits == 8 ? 127.0f
                               : 0.0f);
      a = quantize(*inputs[0], m, 128,
                   bits && o.quantizesActivations() ? 127.0f : 0.0f);
    }
    auto expected = [&](size_t i) -> double {
      if (!matmul)
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
    double error = std::sqrt(num / std::max(den, 1e-300));
    if (!(error <= o.tolerance())) {
      std::fprintf(stderr, "tfc-bench: %s %s: %s differ (%g)\n",
                   o.kernel.c_str(), shapeText.c_str(),
                   matmul ? "the build and a float64 product"
                          : "fused and unfused",
                   error);
      mismatch = true;
    }
    // A matmul's sgemm runs the same shape on the same values in f32.
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
        sgemm('N', 'N', gemmN, gemmN, gemmN, 1.0f, ga->data, gemmN, gb->data,
              gemmN, 0.0f, gc->data, gemmN);
      else {
        std::memcpy(copyDst.data, copySrc.data,
                    copyDst.count * o.elementBytes());
        // The copy must happen: its destination escapes.
        asm volatile("" : : "r"(copyDst.data) : "memory");
      }
    };
    reference();
    // Memory-bound kernels and their copy each start from cold caches: a
    // sweep over a buffer larger than the last-level cache slice evicts
    // what the previous run left there (otherwise whichever runs after the
    // smaller footprint finds part of its input cached, and the ratio
    // depends on the order and on the neighbours' cache use).
    Buffer flush(computeBound || o.gpu() ? 0 : kFlushBytes / 4);
    auto evict = [&]() {
      for (size_t i = 0; i < flush.count; i += 16)
        flush.data[i] += 1.0f;
      asm volatile("" : : "r"(flush.data) : "memory");
    };
    std::vector<double> tf, tu, tr;
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
        tf.push_back(kernelSeconds(fused.model, warmup, "fused run"));
        tu.push_back(
            matmul ? 0 : kernelSeconds(unfused.model, warmup, "unfused run"));
        tr.push_back(0);
        continue;
      }
      evict();
      double t0 = now();
      check(tfc_model_invoke(fused.model), "fused run");
      double t1 = now();
      evict();
      double t2 = now();
      if (!matmul)
        check(tfc_model_invoke(unfused.model), "unfused run");
      double t3 = now();
      evict();
      double t4 = now();
      reference();
      double t5 = now();
      tf.push_back(t1 - t0);
      tu.push_back(t3 - t2);
      tr.push_back(t5 - t4);
    }
    Row row;
    row.shape = shapeText;
    row.fusedMs = median(tf) * 1e3;
    row.unfusedMs = median(tu) * 1e3;
    row.refMs = median(tr) * 1e3;
    row.error = error;
    if (computeBound) {
      double refFlops = matmul ? k.flops : 2.0 * gemmN * gemmN * gemmN;
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
    rows.push_back(row);
  }

  bool att = computeBound;
  std::string variant;
  if (att) {
    std::vector<std::string> parts;
    if (o.causal)
      parts.push_back("causal");
    if (o.window > 0)
      parts.push_back("window " + std::to_string(o.window));
    if (o.softcap > 0) {
      char cap[64];
      std::snprintf(cap, sizeof cap, "softcap %g", o.softcap);
      parts.push_back(cap);
    }
    for (size_t i = 0; i < parts.size(); ++i)
      variant += (i ? ", " : " (") + parts[i];
    if (!parts.empty())
      variant += ")";
  }
  if (o.gpu())
    std::printf("tfc-bench: %s%s, nvptx %s, median of %d interleaved runs "
                "(kernels, CUDA events)\n",
                o.kernel.c_str(), variant.c_str(), o.dtype.c_str(), o.repeat);
  else
    std::printf("tfc-bench: %s%s, %s%d thread%s, median of %d interleaved "
                "runs\n",
                o.kernel.c_str(), variant.c_str(),
                o.dtype == "f32" ? "" : (o.dtype + ", ").c_str(), o.threads,
                o.threads == 1 ? "" : "s", o.repeat);
  if (matmul)
    std::printf("| shape MxKxN | tfc ms | tfc GFLOP/s | sgemm ms | sgemm "
                "GFLOP/s | of sgemm | MiB |\n|---|---|---|---|---|---|---|\n");
  else if (att)
    std::printf("| shape BxHxSxD, BxHxSqxSkvxD or BxHqxHkvxSqxSkvxD | fused ms "
                "| unfused ms | "
                "speedup | fused "
                "GFLOP/s | sgemm GFLOP/s | of sgemm | fused MiB | unfused "
                "MiB |\n|---|---|---|---|---|---|---|---|---|\n");
  else
    std::printf("| shape RxN | fused ms | unfused ms | speedup | fused GB/s "
                "| copy GB/s | time / copy | fused MiB | unfused MiB |\n"
                "|---|---|---|---|---|---|---|---|---|\n");
  for (const Row &r : rows) {
    if (matmul) {
      if (o.gpu())
        std::printf("| %s | %.3f | %.1f | — | — | — | — |\n", r.shape.c_str(),
                    r.fusedMs, r.gflops);
      else
        std::printf("| %s | %.3f | %.1f | %.3f | %.1f | %.0f%% | %.1f |\n",
                    r.shape.c_str(), r.fusedMs, r.gflops, r.refMs, r.refRate,
                    r.fraction * 100, r.fusedMiB);
      continue;
    }
    std::printf("| %s | %.3f | %.3f | %.2fx | %.1f |", r.shape.c_str(),
                r.fusedMs, r.unfusedMs, r.unfusedMs / r.fusedMs, r.gflops);
    if (o.gpu()) // no host reference, the device memory is not counted
      std::printf(" — | — | — | — |\n");
    else
      std::printf(" %.1f | %.2f%s | %.1f | %.1f |\n", r.refRate,
                  att ? r.fraction * 100 : r.fraction, att ? "%" : "x",
                  r.fusedMiB, r.unfusedMiB);
  }
  if (att && !sgemm && !o.gpu())
    std::printf("(oneDNN not found: no sgemm reference)\n");

  if (FILE *f = jsonFile) {
    char softcapJson[32] = "null";
    if (o.softcap > 0)
      std::snprintf(softcapJson, sizeof softcapJson, "%.9g", o.softcap);
    std::string windowJson =
        o.window > 0 ? std::to_string(o.window) : std::string("null");
    std::fprintf(f,
                 "{\"kernel\": \"%s\", \"causal\": %s, \"softcap\": %s, "
                 "\"window\": %s, \"threads\": %d, \"repeat\": %d, "
                 "\"target\": \"%s\", \"dtype\": \"%s\", \"rows\": [\n",
                 o.kernel.c_str(), o.causal ? "true" : "false", softcapJson,
                 windowJson.c_str(), o.threads, o.repeat, o.target.c_str(),
                 o.dtype.c_str());
    // GPU builds: no host reference and no memory count (null); a matmul
    // has no unfused build (null) and is checked against float64.
    auto value = [](bool known, double v, const char *format) {
      char buf[64] = "null";
      if (known)
        std::snprintf(buf, sizeof buf, format, v);
      return std::string(buf);
    };
    auto host = [&](double v, const char *format) {
      return value(!o.gpu(), v, format);
    };
    for (size_t i = 0; i < rows.size(); ++i) {
      const Row &r = rows[i];
      std::fprintf(
          f,
          "  {\"shape\": \"%s\", \"fused_ms\": %.6f, \"unfused_ms\": %s, "
          "\"speedup\": %s, \"%s\": %.3f, \"%s\": %s, \"%s\": %s, "
          "\"fused_peak_mib\": %s, \"unfused_peak_mib\": %s, "
          "\"%s\": %.3g}%s\n",
          r.shape.c_str(), r.fusedMs,
          value(!matmul, r.unfusedMs, "%.6f").c_str(),
          value(!matmul, r.unfusedMs / r.fusedMs, "%.4f").c_str(),
          att ? "fused_gflops" : "fused_gbps", r.gflops,
          att ? "sgemm_gflops" : "copy_gbps", host(r.refRate, "%.3f").c_str(),
          att ? "fraction_of_sgemm" : "time_over_copy",
          host(r.fraction, "%.4f").c_str(), host(r.fusedMiB, "%.3f").c_str(),
          value(!o.gpu() && !matmul, r.unfusedMiB, "%.3f").c_str(),
          matmul ? "rel_error_vs_float64" : "fused_vs_unfused_rel_error",
          r.error, i + 1 < rows.size() ? "," : "");
    }
    std::fprintf(f, "]}\n");
    closeOrDie(f, o.json);
  }
  if (std::fflush(stdout) != 0 || std::ferror(stdout))
    die(std::string("cannot write the standard output: ") +
        std::strerror(errno));
  // Returning (as dying) removes the temporary directory.
  return mismatch ? 1 : 0;
}
