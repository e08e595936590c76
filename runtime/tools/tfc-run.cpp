//===- tfc-run.cpp - Run a compiled model on .npy inputs ------------------===//
//
// tfc-run model.so [--weights W.safetensors] --input a.npy [--input b.npy ...]
//         --output y.npy [...] [--repeat N] [--warmup N] [--threads N]
//         [--packed-weights W.packed] [--memory] [--concurrency N]
//         [--device-io] [--no-cuda-graphs]
//
// Uses only the runtime's C API, for CPU and GPU (nvptx) models alike. Every
// error is one line on stderr, "tfc-run: error: ...", and exit status 1.
//
//===----------------------------------------------------------------------===//

#include "GpuCalls.h"

#include "tfc/runtime/api.h"
#include "tfc/runtime/files.h"
#include "tfc/runtime/parallel.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <vector>

namespace {

const char kUsage[] =
    "usage: tfc-run MODEL.so [--weights FILE] --input IN.npy ... "
    "--output OUT.npy ...\n"
    "               [--repeat N] [--warmup N] [--threads N] [--describe]\n"
    "               [--packed-weights FILE.packed] [--memory]\n"
    "               [--concurrency N] [--device-io] [--no-cuda-graphs]\n"
    "\n"
    "Runs a model compiled by tfc-compile. Inputs map to the model's inputs "
    "in\n"
    "order and must match their dtype and shape (bf16 inputs are read from\n"
    "'<u2' arrays); outputs are written in order (bf16 as '<u2'). A model "
    "built\n"
    "for several batch sizes or sequence lengths (tfc-compile --batch,\n"
    "--seq-len) takes any batch and inputs of any length up to the longest:\n"
    "both follow from the inputs' shapes.\n"
    "  --weights FILE   bind the model's weights by name from a safetensors "
    "file\n"
    "                   (a model compiled from ONNX: from its .onnx file)\n"
    "  --repeat N       run N timed times and print the median and min time\n"
    "                   of the model's compute (CUDA events for GPU models)\n"
    "  --warmup N       untimed runs before those (default 1 with --repeat)\n"
    "  --threads N      threads for compiled CPU code (OpenMP), per run: at\n"
    "                   most 8 per core\n"
    "  --concurrency N  with --repeat: N execution contexts of the one loaded\n"
    "                   model (CPU), each running N timed runs on a thread of\n"
    "                   its own at once; prints the throughput (runs per\n"
    "                   second) and each run's median; writes context 0's\n"
    "                   outputs\n"
    "  --packed-weights FILE\n"
    "                   the weights as the CPU kernels pack them (and "
    "quantize\n"
    "                   them): read from FILE where it exists (no packing on\n"
    "                   the first run), else written there after the runs;\n"
    "                   a FILE of other weights or another model is rewritten\n"
    "  --memory         after the runs, print what the runtime's caching\n"
    "                   allocator took from the system for them (the host\n"
    "                   allocator of compiled CPU code's temporaries; for GPU\n"
    "                   models the device allocator, with the weights,\n"
    "                   inputs and outputs on the device)\n"
    "  --device-io      GPU models: inputs and outputs in device tensors,\n"
    "                   copied once, not on each run; with --repeat, also\n"
    "                   times whole tfc_model_invoke calls (without it they\n"
    "                   include the copies to and from host buffers)\n"
    "  --no-cuda-graphs GPU models: launch each run kernel by kernel rather\n"
    "                   than as a CUDA graph (also $TFC_CUDA_GRAPHS=0)\n"
    "  --describe       print the model's signature (and device) and exit\n"
    "GPU models (target nvptx) need the CUDA driver, libcuda.so.1 (or\n"
    "$TFC_CUDA_DRIVER).\n";

struct Options {
  std::string model;
  std::string weights;
  std::string packedWeights;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  long repeat = 0;
  long warmup = -1;
  long threads = 0;
  long concurrency = 0;
  bool describe = false;
  bool memory = false;
  bool deviceIo = false;
  bool noGraphs = false;
};

/// "12.3 MiB", or "0.8 KiB" below a MiB.
std::string byteSize(uint64_t bytes) {
  char buf[32];
  if (bytes < (1u << 20))
    std::snprintf(buf, sizeof buf, "%.1f KiB", double(bytes) / 1024);
  else
    std::snprintf(buf, sizeof buf, "%.1f MiB", double(bytes) / (1 << 20));
  return buf;
}

/// Whether this process is a rank other than 0 of an MPI job (mpirun):
/// every rank meets the same errors, which rank 0 reports.
bool quietRank() {
  const char *rank = std::getenv("OMPI_COMM_WORLD_RANK");
  return rank && *rank && std::strcmp(rank, "0") != 0;
}

[[noreturn]] void fail(const std::string &message) {
  if (!quietRank())
    std::fprintf(stderr, "tfc-run: error: %s\n", message.c_str());
  std::exit(1);
}

/// Exits with the status's message when it is an error.
void check(tfc_status status) {
  if (!status)
    return;
  std::string message = tfc_status_message(status);
  tfc_status_free(status);
  fail(message);
}

long parseCount(const std::string &flag, const std::string &text, long min) {
  errno = 0;
  char *end = nullptr;
  long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE || value < min ||
      value > 1000000000)
    fail(flag + " expects an integer >= " + std::to_string(min) + ", got '" +
         text + "'");
  return value;
}

Options parseOptions(int argc, char **argv) {
  Options options;
  bool sawRepeat = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (arg == "--describe") {
      options.describe = true;
      continue;
    }
    if (arg == "--memory") {
      options.memory = true;
      continue;
    }
    if (arg == "--device-io") {
      options.deviceIo = true;
      continue;
    }
    if (arg == "--no-cuda-graphs") {
      options.noGraphs = true;
      continue;
    }
    if (arg.size() > 1 && arg[0] == '-') {
      std::string flag = arg, value;
      size_t eq = arg.find('=');
      if (eq != std::string::npos) {
        flag = arg.substr(0, eq);
        value = arg.substr(eq + 1);
      }
      static const char *const kValued[] = {
          "--weights", "--input",   "--output",         "--repeat",
          "--warmup",  "--threads", "--packed-weights", "--concurrency"};
      if (std::find_if(std::begin(kValued), std::end(kValued),
                       [&](const char *f) { return flag == f; }) ==
          std::end(kValued))
        fail("unknown option '" + flag + "' (see --help)");
      if (eq == std::string::npos) {
        if (i + 1 >= argc)
          fail(flag + " expects a value");
        value = argv[++i];
      }
      if (flag == "--weights") {
        if (!options.weights.empty())
          fail("--weights given twice");
        options.weights = value;
      } else if (flag == "--input") {
        options.inputs.push_back(value);
      } else if (flag == "--output") {
        options.outputs.push_back(value);
      } else if (flag == "--repeat") {
        options.repeat = parseCount(flag, value, 1);
        sawRepeat = true;
      } else if (flag == "--warmup") {
        options.warmup = parseCount(flag, value, 0);
      } else if (flag == "--threads") {
        options.threads = parseCount(flag, value, 1);
        long cores = long(std::max(1u, std::thread::hardware_concurrency()));
        if (options.threads > 8 * cores)
          fail("--threads " + std::to_string(options.threads) +
               " is more than 8 per core (" + std::to_string(cores) +
               " cores: at most " + std::to_string(8 * cores) + ")");
      } else if (flag == "--concurrency") {
        options.concurrency = parseCount(flag, value, 1);
        long cores = long(std::max(1u, std::thread::hardware_concurrency()));
        if (options.concurrency > 64 * cores)
          fail("--concurrency " + std::to_string(options.concurrency) +
               " is more than 64 per core (" + std::to_string(cores) +
               " cores: at most " + std::to_string(64 * cores) + ")");
      } else if (flag == "--packed-weights") {
        if (value.empty())
          fail("--packed-weights expects a file name");
        options.packedWeights = value;
      }
      continue;
    }
    if (!options.model.empty())
      fail("more than one model given: '" + options.model + "' and '" + arg +
           "'");
    options.model = arg;
  }
  if (options.model.empty())
    fail("no model given (see --help)");
  if (!options.packedWeights.empty() && options.weights.empty())
    fail("--packed-weights goes with --weights: the packed copies are of "
         "the weights bound from that file");
  if (options.concurrency > 0 && !sawRepeat)
    fail("--concurrency times runs: give --repeat N too");
  if (options.warmup < 0)
    options.warmup = sawRepeat ? 1 : 0;
  return options;
}

std::string describe(const tfc_tensor_desc *desc) {
  std::string text = std::string(tfc_dtype_name(desc->dtype)) + " [";
  for (int32_t i = 0; i < desc->rank; ++i)
    text += (i ? ", " : "") + std::to_string(desc->shape[i]);
  text += "]";
  if (desc->bounds)
    text += " in [" + std::to_string(desc->bounds[0]) + ", " +
            std::to_string(desc->bounds[1]) + ")";
  return text;
}

/// "i64 [2, 3]"
std::string describe(const tfc_array *array) {
  std::string text = std::string(tfc_dtype_name(tfc_array_dtype(array))) + " [";
  for (int32_t i = 0; i < tfc_array_rank(array); ++i)
    text += (i ? ", " : "") + std::to_string(tfc_array_shape(array)[i]);
  return text + "]";
}

std::string nameList(tfc_model *model, bool inputs) {
  int32_t count =
      inputs ? tfc_model_num_inputs(model) : tfc_model_num_outputs(model);
  std::string text;
  for (int32_t i = 0; i < count; ++i) {
    const tfc_tensor_desc *desc =
        inputs ? tfc_model_input(model, i) : tfc_model_output(model, i);
    text += (i ? ", " : "") + std::string(desc->name);
  }
  return text;
}

/// ", batch axis 0, sequence axis 1": the axes whose extents follow the
/// batch size and the length.
std::string axisNote(int32_t batchAxis, int32_t lengthAxis) {
  std::string note;
  if (batchAxis >= 0)
    note += ", batch axis " + std::to_string(batchAxis);
  if (lengthAxis >= 0)
    note += ", sequence axis " + std::to_string(lengthAxis);
  return note;
}

/// The built batch sizes (`batches`) or lengths, increasing; empty for a
/// model of one.
std::vector<int64_t> builtSizes(tfc_model *model, bool batches) {
  std::vector<int64_t> sizes(size_t(batches ? tfc_model_num_batches(model)
                                            : tfc_model_num_lengths(model)));
  for (size_t i = 0; i < sizes.size(); ++i)
    sizes[i] = batches ? tfc_model_built_batch(model, int32_t(i))
                       : tfc_model_built_length(model, int32_t(i));
  return sizes;
}

/// "1, 8": the built batch sizes (lengths).
std::string builtList(tfc_model *model, bool batches) {
  std::string list;
  for (int64_t n : builtSizes(model, batches))
    list += (list.empty() ? "" : ", ") + std::to_string(n);
  return list;
}

void printSignature(tfc_model *model) {
  const tfc_manifest *manifest = tfc_model_manifest_of(model);
  std::printf("model %s: entry %s, target %s\n", tfc_model_path(model),
              manifest->entry ? manifest->entry : "?", tfc_model_target(model));
  if (std::strcmp(tfc_model_target(model), "nvptx") == 0) {
    char device[256];
    check(tfc_device_describe(device, sizeof(device)));
    std::printf("  device: %s\n", device);
  }
  if (tfc_model_num_batches(model))
    std::printf("  batch sizes: %s (the shapes below at %lld; any batch "
                "runs)\n",
                builtList(model, true).c_str(),
                static_cast<long long>(tfc_model_batch(model)));
  if (tfc_model_num_lengths(model))
    std::printf("  lengths: %s (the shapes below at %lld)\n",
                builtList(model, false).c_str(),
                static_cast<long long>(tfc_model_length(model)));
  for (int32_t i = 0; i < tfc_model_num_inputs(model); ++i)
    std::printf("  input %d %s: %s%s\n", i, tfc_model_input(model, i)->name,
                describe(tfc_model_input(model, i)).c_str(),
                axisNote(tfc_model_input_batch_axis(model, i),
                         tfc_model_input_length_axis(model, i))
                    .c_str());
  for (int32_t i = 0; i < tfc_model_num_weights(model); ++i)
    std::printf("  weight %d %s: %s\n", i, tfc_model_weight(model, i)->name,
                describe(tfc_model_weight(model, i)).c_str());
  for (int32_t i = 0; i < tfc_model_num_outputs(model); ++i)
    std::printf("  output %d %s: %s%s\n", i, tfc_model_output(model, i)->name,
                describe(tfc_model_output(model, i)).c_str(),
                axisNote(tfc_model_output_batch_axis(model, i),
                         tfc_model_output_length_axis(model, i))
                    .c_str());
}

/// For a model built for several batch sizes (`batches`) or lengths: the
/// batch size (length) its inputs have. An input's extent on its batch axis
/// is a constant times the batch size, on its sequence axis the length plus
/// a constant (past tokens in a mask); the descriptor at the current size
/// shows the constant. Every input with such an axis must agree. Exits on
/// an error.
void setSizeFromInputs(tfc_model *model, const Options &options,
                       const std::vector<tfc_array *> &inputs, bool batches) {
  const char *what = batches ? "batch size" : "length";
  int64_t current = batches ? tfc_model_batch(model) : tfc_model_length(model);
  int64_t size = 0;
  int32_t from = -1;
  auto which = [&](int32_t i) {
    return "input " + std::to_string(i) + " '" +
           tfc_model_input(model, i)->name + "'";
  };
  auto where = [&](int32_t i) {
    return describe(inputs[size_t(i)]) + " in " + options.inputs[size_t(i)];
  };
  for (int32_t i = 0; i < int32_t(inputs.size()); ++i) {
    int32_t axis = batches ? tfc_model_input_batch_axis(model, i)
                           : tfc_model_input_length_axis(model, i);
    // A rank too small is tfc_model_check_input's to report.
    if (axis < 0 || tfc_array_rank(inputs[size_t(i)]) <= axis)
      continue;
    int64_t built = tfc_model_input(model, i)->shape[axis];
    int64_t extent = tfc_array_shape(inputs[size_t(i)])[axis];
    // (A batch extent that is no multiple of the constant is
    // tfc_model_check_input's to report.)
    int64_t inputSize =
        batches ? extent / (built / current) : extent - (built - current);
    if (from < 0) {
      size = inputSize;
      from = i;
    } else if (inputSize != size) {
      fail(std::string("inputs of different ") + what + "s: " + which(from) +
           " has " + what + " " + std::to_string(size) + " (" + where(from) +
           "), " + which(i) + " " + what + " " + std::to_string(inputSize) +
           " (" + where(i) + ")");
    }
  }
  if (from < 0)
    return;
  if (tfc_status status = batches ? tfc_model_set_batch(model, size)
                                  : tfc_model_set_length(model, size)) {
    std::string message = tfc_status_message(status);
    tfc_status_free(status);
    fail(message + " (" + which(from) + " is " + where(from) + ")");
  }
}

/// ", batch 5 (runs as 3 + 3)", ", length 15 (runs as 16)": for a model
/// built for several batch sizes or lengths, the current ones and the
/// built ones they run as where those differ.
std::string shapeNote(tfc_model *model) {
  // The smallest built size of at least n.
  auto builtFor = [&](int64_t n, bool batches) {
    std::vector<int64_t> sizes = builtSizes(model, batches);
    return *std::lower_bound(sizes.begin(), sizes.end(), n);
  };
  std::string note;
  if (tfc_model_num_batches(model)) {
    int64_t batch = tfc_model_batch(model);
    int64_t largest = builtSizes(model, true).back();
    note += ", batch " + std::to_string(batch);
    if (batch > largest) {
      // Slices of the largest, the rest as the smallest that holds it.
      int64_t full = batch / largest, rest = batch % largest;
      note += " (runs as " +
              (full > 1 ? std::to_string(full) + " x " : std::string()) +
              std::to_string(largest) +
              (rest ? " + " + std::to_string(builtFor(rest, true)) : "") + ")";
    } else if (builtFor(batch, true) != batch) {
      note += " (runs as " + std::to_string(builtFor(batch, true)) + ")";
    }
  }
  if (tfc_model_num_lengths(model)) {
    int64_t length = tfc_model_length(model);
    note += ", length " + std::to_string(length);
    if (builtFor(length, false) != length)
      note += " (runs as " + std::to_string(builtFor(length, false)) + ")";
  }
  return note;
}

/// The input's dtype and rank fit and its shape differs in one axis: perhaps
/// a sequence length other than the one the model was built for.
bool differsInOneAxis(const tfc_tensor_desc *desc, const tfc_array *array) {
  if (tfc_array_dtype(array) != desc->dtype ||
      tfc_array_rank(array) != desc->rank)
    return false;
  int32_t differing = 0;
  for (int32_t i = 0; i < desc->rank; ++i)
    differing += tfc_array_shape(array)[i] != desc->shape[i];
  return differing == 1;
}

std::string plural(size_t n, const char *word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

} // namespace

/// --concurrency N: N contexts of `model` (inputs bound to `inputs`, outputs
/// of their own), each running --warmup untimed and --repeat timed runs on
/// a thread of its own, all at once; prints the throughput and the median
/// run. Returns context 0's outputs (the caller writes and frees them).
std::vector<tfc_array *> runContexts(tfc_model *model, const Options &options,
                                     const std::vector<tfc_array *> &inputs) {
  size_t n = size_t(options.concurrency);
  std::vector<tfc_context *> contexts(n, nullptr);
  std::vector<std::vector<tfc_array *>> outputs(n);
  for (size_t c = 0; c < n; ++c) {
    check(tfc_context_create(model, &contexts[c]));
    if (tfc_model_num_batches(model))
      check(tfc_context_set_batch(contexts[c], tfc_model_batch(model)));
    if (tfc_model_num_lengths(model))
      check(tfc_context_set_length(contexts[c], tfc_model_length(model)));
    for (size_t i = 0; i < inputs.size(); ++i)
      check(tfc_context_bind_input(contexts[c], int32_t(i),
                                   tfc_array_data(inputs[i])));
    for (int32_t i = 0; i < tfc_model_num_outputs(model); ++i) {
      const tfc_tensor_desc *desc = tfc_context_output(contexts[c], i);
      tfc_array *array = nullptr;
      check(tfc_array_create(desc->dtype, desc->rank, desc->shape, &array));
      outputs[c].push_back(array);
      check(tfc_context_bind_output(contexts[c], i, tfc_array_data(array)));
    }
  }
  long runs = options.repeat;
  std::vector<std::vector<double>> times(n, std::vector<double>(size_t(runs)));
  std::vector<tfc_status> failed(n, nullptr);
  std::atomic<size_t> ready{0};
  std::atomic<bool> go{false};
  auto work = [&](size_t c) {
    for (long i = 0; i < options.warmup && !failed[c]; ++i)
      failed[c] = tfc_context_invoke(contexts[c]);
    ++ready;
    while (!go.load())
      std::this_thread::yield();
    for (long i = 0; i < runs && !failed[c]; ++i) {
      auto start = std::chrono::steady_clock::now();
      failed[c] = tfc_context_invoke(contexts[c]);
      times[c][size_t(i)] = std::chrono::duration<double, std::milli>(
                                std::chrono::steady_clock::now() - start)
                                .count();
    }
  };
  std::vector<std::thread> threads;
  for (size_t c = 0; c < n; ++c)
    threads.emplace_back(work, c);
  while (ready.load() < n)
    std::this_thread::yield();
  auto start = std::chrono::steady_clock::now();
  go.store(true);
  for (std::thread &t : threads)
    t.join();
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  for (tfc_status status : failed)
    check(status);
  std::vector<double> all;
  for (const std::vector<double> &t : times)
    all.insert(all.end(), t.begin(), t.end());
  double median = tfc::run::medianMin(all).first;
  std::printf("tfc-run: %s: %zu context%s x %ld runs (%ld warmup each): "
              "%.2f runs/s, median %.4f ms per run%s\n",
              options.model.c_str(), n, n == 1 ? "" : "s", runs, options.warmup,
              double(n) * double(runs) / seconds, median,
              shapeNote(model).c_str());
  for (size_t c = 1; c < n; ++c)
    for (tfc_array *array : outputs[c])
      tfc_array_destroy(array);
  for (tfc_context *context : contexts)
    tfc_context_destroy(context);
  return outputs[0];
}

/// Refuses outputs that would overwrite what the run reads (the model, the
/// weights, an input) or each other, before anything is written. A packed
/// weights file is read or written: it may be neither an input nor an
/// output.
void checkOutputPaths(const Options &options) {
  std::vector<tfc::ToolFile> inputs = {{"the model", options.model}};
  if (!options.weights.empty())
    inputs.push_back({"--weights", options.weights});
  for (size_t i = 0; i < options.inputs.size(); ++i)
    inputs.push_back({"--input " + std::to_string(i), options.inputs[i]});
  std::vector<tfc::ToolFile> outputs;
  if (!options.packedWeights.empty())
    outputs.push_back({"--packed-weights", options.packedWeights});
  for (size_t i = 0; i < options.outputs.size(); ++i)
    outputs.push_back({"--output " + std::to_string(i), options.outputs[i]});
  std::string clash = tfc::checkOutputs(inputs, outputs);
  if (!clash.empty())
    fail(clash);
}

int main(int argc, char **argv) {
  Options options = parseOptions(argc, argv);
  checkOutputPaths(options);
  // Before the model loads: the runtime applies it to the model's OpenMP.
  if (options.threads > 0)
    tfc_set_num_threads(int32_t(options.threads));

  tfc_model *model = nullptr;
  check(tfc_model_load(options.model.c_str(), &model));
  if (options.describe) {
    printSignature(model);
    tfc_model_destroy(model);
    return 0;
  }

  int32_t numWeights = tfc_model_num_weights(model);
  if (!options.weights.empty())
    check(tfc_model_bind_weights(model, options.weights.c_str()));
  else if (numWeights > 0)
    fail("model " + options.model + " has " + plural(numWeights, "weight") +
         " (" + tfc_model_weight(model, 0)->name +
         (numWeights > 1 ? ", ..." : "") + "): pass --weights FILE");

  // Packed copies from an earlier process; else this one's, saved below.
  // A packed weights file of other weights or another model library is
  // replaced (the cache is stale); anything else wrong with it is an error
  // (it may not be a packed weights file at all).
  if (!options.packedWeights.empty() && tfc_model_ranks(model) > 1)
    fail("--packed-weights: the ranks of a tensor-parallel model pack "
         "different parts of the weights into one file");
  bool savePacked = false;
  if (!options.packedWeights.empty()) {
    struct stat st;
    if (::stat(options.packedWeights.c_str(), &st) == 0) {
      tfc_status status =
          tfc_model_load_packed_weights(model, options.packedWeights.c_str());
      if (tfc_status_get_code(status) == TFC_MISMATCH) {
        std::fprintf(
            stderr,
            "tfc-run: warning: %s; it is written again after the runs\n",
            tfc_status_message(status));
        tfc_status_free(status);
        savePacked = true;
      } else {
        check(status);
        std::fprintf(stderr, "tfc-run: read packed weights from %s\n",
                     options.packedWeights.c_str());
      }
    } else {
      savePacked = true;
    }
  }

  size_t numInputs = size_t(tfc_model_num_inputs(model));
  if (options.inputs.size() != numInputs)
    fail("model " + options.model + " takes " + plural(numInputs, "input") +
         (numInputs ? " (" + nameList(model, true) + ")" : "") + ", got " +
         std::to_string(options.inputs.size()));
  size_t numOutputs = size_t(tfc_model_num_outputs(model));
  if (options.outputs.size() != numOutputs)
    fail("model " + options.model + " has " + plural(numOutputs, "output") +
         (numOutputs ? " (" + nameList(model, false) + ")" : "") + ", got " +
         std::to_string(options.outputs.size()) + " --output");

  std::vector<tfc_array *> inputs, outputs;
  for (size_t i = 0; i < numInputs; ++i) {
    tfc_array *array = nullptr;
    if (tfc_status status =
            tfc_array_read_npy(options.inputs[i].c_str(), &array)) {
      std::string message = tfc_status_message(status);
      tfc_status_free(status);
      fail("input " + std::to_string(i) + " '" +
           tfc_model_input(model, int32_t(i))->name + "': " + message);
    }
    // A tensor-parallel model takes this rank's part of a split input.
    if (tfc_model_ranks(model) > 1) {
      tfc_array *part = nullptr;
      tfc_status status = tfc_model_input_part(model, int32_t(i), array, &part);
      tfc_array_destroy(array);
      if (status) {
        std::string message = tfc_status_message(status);
        tfc_status_free(status);
        fail(message + " in " + options.inputs[i]);
      }
      array = part;
    }
    inputs.push_back(array);
  }
  // Before the inputs are checked: their shapes are those of the batch
  // size and length.
  bool severalShapes =
      tfc_model_num_batches(model) > 0 || tfc_model_num_lengths(model) > 0;
  if (tfc_model_num_batches(model))
    setSizeFromInputs(model, options, inputs, /*batches=*/true);
  if (tfc_model_num_lengths(model))
    setSizeFromInputs(model, options, inputs, /*batches=*/false);
  for (size_t i = 0; i < numInputs; ++i) {
    tfc_array *array = inputs[i];
    tfc_status status =
        tfc_model_check_input(model, int32_t(i), tfc_array_dtype(array),
                              tfc_array_rank(array), tfc_array_shape(array));
    if (status) {
      std::string message = tfc_status_message(status);
      tfc_status_free(status);
      std::string hint;
      if (!severalShapes &&
          differsInOneAxis(tfc_model_input(model, int32_t(i)), array))
        hint = " (a model built for one shape; tfc-compile --batch "
               "B1,B2,... --seq-len L1,L2,... builds several)";
      fail(message + " in " + options.inputs[i] + hint);
    }
    check(tfc_model_bind_input(model, int32_t(i), tfc_array_data(array)));
  }
  for (size_t i = 0; i < numOutputs; ++i) {
    const tfc_tensor_desc *desc = tfc_model_output(model, int32_t(i));
    tfc_array *array = nullptr;
    check(tfc_array_create(desc->dtype, desc->rank, desc->shape, &array));
    outputs.push_back(array);
    check(tfc_model_bind_output(model, int32_t(i), tfc_array_data(array)));
  }
  bool gpu = std::strcmp(tfc_model_target(model), "nvptx") == 0;
  if (options.noGraphs)
    check(tfc_model_set_cuda_graphs(model, 0));
  // --device-io: the arrays go to device tensors once, bound in place.
  std::vector<tfc_device_tensor *> deviceInputs, deviceOutputs;
  if (options.deviceIo) {
    if (!gpu)
      fail("--device-io keeps inputs and outputs on the GPU: model " +
           options.model + " is a cpu model");
    check(tfc::run::toDevice(inputs, deviceInputs));
    check(tfc::run::toDevice(outputs, deviceOutputs));
    for (size_t i = 0; i < numInputs; ++i)
      check(tfc_model_bind_input_tensor(model, int32_t(i), deviceInputs[i]));
    for (size_t i = 0; i < numOutputs; ++i)
      check(tfc_model_bind_output_tensor(model, int32_t(i), deviceOutputs[i]));
  }

  // The allocator's counters before the runs (--memory): GPU models count
  // on the device allocator, which also holds the weights and the model's
  // device copies of inputs and outputs.
  auto allocatorStats = [&] {
    tfc_allocator_stats stats;
    if (gpu)
      tfc_device_allocator_get_stats(&stats);
    else
      tfc_allocator_get_stats(&stats);
    return stats;
  };
  tfc_allocator_stats before = allocatorStats();

  std::vector<tfc_array *> contextOutputs;
  if (options.concurrency > 0 && tfc_model_ranks(model) > 1)
    fail("--concurrency: a tensor-parallel model runs one call at a time "
         "(its ranks meet in each all-reduce)");
  if (options.concurrency > 0) {
    contextOutputs = runContexts(model, options, inputs);
  } else if (options.repeat > 0) {
    // The runtime times the model's own compute and poisons the outputs
    // before every run (GPU models: inputs and outputs copied once).
    long runs = options.repeat;
    std::vector<double> times(size_t(runs), 0.0);
    check(tfc_model_time(model, int32_t(options.warmup), int32_t(runs),
                         times.data()));
    auto [median, min] = tfc::run::medianMin(times);
    std::printf("tfc-run: %s: %ld runs (%ld warmup): median %.4f ms, min "
                "%.4f ms%s\n",
                options.model.c_str(), runs, options.warmup, median, min,
                shapeNote(model).c_str());
    if (gpu)
      check(tfc::run::timeCalls(model, options.model, options.deviceIo, runs));
  } else {
    // Outputs are poisoned (all bits set: NaN for floats, -1 for integers)
    // before every run, so an element the model fails to write shows.
    for (long i = 0; i <= options.warmup; ++i) {
      for (tfc_array *array : outputs)
        std::memset(tfc_array_data(array), 0xff, tfc_array_nbytes(array));
      check(tfc_model_invoke(model));
    }
  }

  if (options.memory && tfc_model_ranks(model) > 1)
    std::printf("tfc-run: %s: rank %d of %d: %llu bytes of weights bound\n",
                options.model.c_str(), int(tfc_model_rank(model)),
                int(tfc_model_ranks(model)),
                (unsigned long long)tfc_model_weight_bytes(model));
  if (options.memory) {
    tfc_allocator_stats after = allocatorStats();
    // With --repeat, a GPU model's whole calls are timed too.
    long runs =
        options.repeat > 0
            ? options.repeat * (gpu && options.concurrency == 0 ? 2 : 1) +
                  options.warmup
            : options.warmup + 1;
    std::printf(
        "tfc-run: %s: %s allocator over %ld run%s: %s from the "
        "system in %llu blocks; %llu requests, %llu served from its "
        "cache; %s live after the runs\n",
        options.model.c_str(), gpu ? "device" : "host", runs,
        runs == 1 ? "" : "s",
        byteSize(after.fresh_bytes - before.fresh_bytes).c_str(),
        (unsigned long long)(after.fresh_allocs - before.fresh_allocs),
        (unsigned long long)(after.alloc_calls - before.alloc_calls),
        (unsigned long long)(after.reused_allocs - before.reused_allocs),
        byteSize(after.live_bytes).c_str());
  }

  if (savePacked) {
    check(tfc_model_save_packed_weights(model, options.packedWeights.c_str()));
    std::fprintf(stderr, "tfc-run: wrote packed weights to %s\n",
                 options.packedWeights.c_str());
  }

  for (size_t i = 0; i < deviceOutputs.size(); ++i)
    check(tfc_device_tensor_copy_to_host(deviceOutputs[i], 0,
                                         tfc_array_data(outputs[i]),
                                         tfc_array_nbytes(outputs[i])));
  for (size_t i = 0; i < numOutputs; ++i) {
    tfc_array *array = contextOutputs.empty() ? outputs[i] : contextOutputs[i];
    // A tensor-parallel model's outputs: split ones put together from
    // every rank's part, written by rank 0.
    if (tfc_model_ranks(model) > 1) {
      tfc_array *whole = nullptr;
      check(tfc_model_gather_output(model, int32_t(i), array, &whole));
      if (tfc_model_rank(model) == 0)
        check(tfc_array_write_npy(whole, options.outputs[i].c_str()));
      tfc_array_destroy(whole);
      continue;
    }
    // bf16 results go out as their raw bits ('<u2').
    check(tfc_array_write_npy(array, options.outputs[i].c_str()));
  }
  for (tfc_array *array : inputs)
    tfc_array_destroy(array);
  for (tfc_array *array : outputs)
    tfc_array_destroy(array);
  for (tfc_array *array : contextOutputs)
    tfc_array_destroy(array);
  tfc_model_destroy(model);
  for (tfc_device_tensor *tensor : deviceInputs)
    tfc_device_tensor_destroy(tensor);
  for (tfc_device_tensor *tensor : deviceOutputs)
    tfc_device_tensor_destroy(tensor);
  return 0;
}
