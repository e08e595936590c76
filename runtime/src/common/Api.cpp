//===- Api.cpp - The tfc runtime C API ------------------------------------===//

#include "tfc/runtime/api.h"

#include "tfc/runtime/buffer.h"
#include "tfc/runtime/dtype.h"
#include "tfc/runtime/npy.h"
#include "tfc/runtime/safetensors.h"

#include "ElfCheck.h"
#include "LibraryCopy.h"
#include "Variants.h"
#include "cuda/Failure.h"
#include "cuda/GpuModel.h"
#include "cuda/Modules.h"
#include "formats/PackedWeights.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <link.h>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <sys/stat.h>
#include <system_error>
#include <thread>
#include <vector>

using tfc::DType;

struct tfc_status_impl {
  tfc_status_code code;
  std::string message;
};

struct tfc_model {
  std::string path;
  void *handle = nullptr;
  /// The model's own copy of its library, which `handle` runs: closed
  /// after the handle.
  std::unique_ptr<tfc::LibraryCopy> library;
  /// Set while a call that runs the model or changes its bindings is under
  /// way (Exclusive): a second one from another thread is refused.
  std::atomic<bool> busy{false};
  /// The descriptors the model takes now: the library's manifest, or for a
  /// model built for several batch sizes or lengths the copy `variants`
  /// keeps at the current ones.
  const tfc_manifest *manifest = nullptr;
  tfc_model_run_fn run = nullptr; // a cpu model with variants runs them
  /// Null for a model of one shape.
  std::unique_ptr<tfc::ModelVariants> variants;
  tfc_model_weights_changed_fn weightsChanged = nullptr; // optional
  /// The packed weights' entry points (abi.h): null for a model that packs
  /// none.
  tfc_model_packed_format_fn packedFormat = nullptr;
  tfc_model_packed_weights_fn packedWeights = nullptr;
  tfc_model_adopt_packed_weight_fn adoptPackedWeight = nullptr;
  std::vector<int32_t> inputArgs;  // argument index of each input
  std::vector<int32_t> weightArgs; // argument index of each weight
  std::vector<void *> buffers;     // arguments, then results
  std::unique_ptr<tfc::SafetensorsFile> weightsFile;
  /// Whether weightsFile's pages were dropped (releaseWeightPages).
  bool weightPagesReleased = false;
  std::vector<tfc::AlignedBuffer> weightCopies;
  /// A CPU model's weights bound through a conversion (another float type
  /// in the file) that is not made yet: by weight index, the file's tensor.
  /// They are converted on first need (convertPendingWeights), unless a
  /// packed weights file holds their converted bytes.
  std::vector<std::pair<int32_t, const tfc::SafetensorsTensor *>>
      pendingConversions;
  /// Weights bound through a conversion, by weight index (whose copies a
  /// packed weights file keeps).
  std::vector<bool> converted;
  /// The pending conversions that packedFile's converted bytes stand in
  /// for (bound to them).
  std::vector<std::pair<int32_t, const tfc::SafetensorsTensor *>>
      fromPackedFile;
  /// The weights file's size and modification time while every weight is
  /// bound from it; empty otherwise.
  std::string weightsIdentity;
  /// The packed weights file whose copies the model holds (adopted).
  std::unique_ptr<tfc::PackedWeightsFile> packedFile;
  /// The device side of an nvptx model; null for cpu models.
  std::unique_ptr<tfc::cuda::GpuModel> gpu;
};

struct tfc_array {
  int32_t dtype = 0;
  std::vector<int64_t> shape;
  tfc::AlignedBuffer data;
};

namespace {

/// Returned when a status itself cannot be allocated; never freed.
tfc_status_impl outOfMemoryStatus{TFC_OUT_OF_MEMORY, "out of memory"};

tfc_status makeStatus(tfc_status_code code, std::string message) {
  try {
    return new tfc_status_impl{code, std::move(message)};
  } catch (...) {
    return &outOfMemoryStatus;
  }
}

/// Runs `body` and turns an escaping exception into a status.
template <typename Fn> tfc_status guard(Fn &&body) {
  try {
    return body();
  } catch (const std::bad_alloc &) {
    return makeStatus(TFC_OUT_OF_MEMORY, "out of memory");
  } catch (const std::exception &e) {
    return makeStatus(TFC_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return makeStatus(TFC_INTERNAL, "internal error");
  }
}

std::string quote(const char *name) {
  return std::string("'") + (name ? name : "<null>") + "'";
}

std::string describe(int32_t dtype, int32_t rank, const int64_t *shape) {
  return std::string(tfc_dtype_name(dtype)) + " " +
         tfc::shapeString(shape, rank > 0 && shape ? rank : 0);
}

std::string describe(const tfc_tensor_desc &desc) {
  return describe(desc.dtype, desc.rank, desc.shape);
}

bool fileExists(const char *path) {
  struct stat st;
  return ::stat(path, &st) == 0;
}

/// "123 bytes, modified 1764781200.123456789": what a packed weights file
/// records of the weights file it was packed from.
std::string fileIdentity(const std::string &path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return "";
  char nanos[16];
  std::snprintf(nanos, sizeof(nanos), "%09ld", long(st.st_mtim.tv_nsec));
  return std::to_string(st.st_size) + " bytes, modified " +
         std::to_string(st.st_mtim.tv_sec) + "." + nanos;
}

/// "input 0 'a'"
std::string roleName(const tfc_model *model, tfc_tensor_role role,
                     int32_t index) {
  const tfc_tensor_desc *desc =
      role == TFC_ROLE_INPUT    ? tfc_model_input(model, index)
      : role == TFC_ROLE_WEIGHT ? tfc_model_weight(model, index)
                                : tfc_model_output(model, index);
  const char *kind = role == TFC_ROLE_INPUT    ? "input"
                     : role == TFC_ROLE_WEIGHT ? "weight"
                                               : "output";
  return std::string(kind) + " " + std::to_string(index) + " " +
         quote(desc ? desc->name : nullptr);
}

tfc_status checkDescriptor(const std::string &path, const char *what,
                           int32_t index, const tfc_tensor_desc &desc,
                           bool isResult) {
  std::string where =
      "model " + path + ": manifest " + what + " " + std::to_string(index);
  if (!desc.name)
    return makeStatus(TFC_BAD_FORMAT, where + " has no name");
  where += " " + quote(desc.name);
  if (desc.dtype < 0 || desc.dtype > TFC_DTYPE_BOOL)
    return makeStatus(TFC_BAD_FORMAT,
                      where + ": invalid dtype " + std::to_string(desc.dtype));
  bool roleOk =
      isResult ? desc.role == TFC_ROLE_OUTPUT
               : (desc.role == TFC_ROLE_INPUT || desc.role == TFC_ROLE_WEIGHT);
  if (!roleOk)
    return makeStatus(TFC_BAD_FORMAT,
                      where + ": invalid role " + std::to_string(desc.role));
  if (desc.rank < 0 || desc.rank > 64 || (desc.rank > 0 && !desc.shape))
    return makeStatus(TFC_BAD_FORMAT,
                      where + ": invalid rank " + std::to_string(desc.rank));
  std::vector<int64_t> shape(desc.shape, desc.shape + desc.rank);
  if (!tfc::tensorBytes(shape, tfc::dtypeSize(DType(desc.dtype))))
    return makeStatus(TFC_BAD_FORMAT,
                      where + ": invalid shape " + tfc::shapeString(shape));
  if (desc.bounds) {
    bool integer = desc.dtype == TFC_DTYPE_I32 || desc.dtype == TFC_DTYPE_I64;
    if (!integer || desc.role != TFC_ROLE_INPUT ||
        desc.bounds[0] >= desc.bounds[1])
      return makeStatus(TFC_BAD_FORMAT,
                        where + ": invalid bounds (only an i32 or i64 input "
                                "has them, and lo < hi)");
  }
  return nullptr;
}

void promoteSelfToGlobal() {
  // Compiled models resolve _mlir_memref_to_llvm_* from the global scope. When
  // this library itself was opened RTLD_LOCAL (Python's ctypes does that),
  // make its symbols global first.
  static std::once_flag once;
  std::call_once(once, [] {
    Dl_info self;
    if (dladdr(reinterpret_cast<void *>(&tfc_model_load), &self) &&
        self.dli_fname)
      dlopen(self.dli_fname, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD);
  });
}

/// dlsym that only accepts a symbol defined by the library itself, not by one
/// of its dependencies.
void *ownSymbol(void *handle, const char *name) {
  void *symbol = dlsym(handle, name);
  if (!symbol)
    return nullptr;
  struct link_map *map = nullptr;
  Dl_info info;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || !map ||
      !dladdr(symbol, &info) || !info.dli_fname || !map->l_name)
    return symbol;
  return std::strcmp(info.dli_fname, map->l_name) == 0 ? symbol : nullptr;
}

/// dlclose for a model library. A GPU model's destructors unload its
/// kernels; a failure there has no run to report it to and is dropped.
void closeLibrary(void *handle) {
  tfc::cuda::FailureScope ignored;
  dlclose(handle);
}

tfc_status fromGpu(tfc::cuda::GpuError error) {
  return error ? makeStatus(error.code, std::move(error.message)) : nullptr;
}

/// Slot i of model->buffers: "input 0 'a'", "weight 1 'w'", "output 0 'y'".
std::vector<tfc::cuda::Slot> gpuSlots(const tfc_model *model) {
  std::vector<tfc::cuda::Slot> slots(model->buffers.size());
  for (size_t i = 0; i < model->inputArgs.size(); ++i)
    slots[model->inputArgs[i]] = {
        tfc_tensor_desc_nbytes(tfc_model_input(model, int32_t(i))),
        TFC_ROLE_INPUT, roleName(model, TFC_ROLE_INPUT, int32_t(i))};
  for (size_t i = 0; i < model->weightArgs.size(); ++i)
    slots[model->weightArgs[i]] = {
        tfc_tensor_desc_nbytes(tfc_model_weight(model, int32_t(i))),
        TFC_ROLE_WEIGHT, roleName(model, TFC_ROLE_WEIGHT, int32_t(i))};
  size_t numArgs = size_t(model->manifest->num_args);
  for (int32_t i = 0; i < model->manifest->num_results; ++i)
    slots[numArgs + size_t(i)] = {
        tfc_tensor_desc_nbytes(tfc_model_output(model, i)), TFC_ROLE_OUTPUT,
        roleName(model, TFC_ROLE_OUTPUT, i)};
  return slots;
}

/// Set by tfc_set_num_threads; applied to every model loaded afterwards.
std::atomic<int32_t> requestedThreads{0};

/// Makes the converted copies tfc_model_bind_weights deferred (all, or
/// weight `only`'s): OUT_OF_MEMORY naming the tensor when one cannot be.
/// Their elements are converted in chunks on the threads tfc_set_num_threads
/// asked for (or one per CPU): the conversion reads the checkpoint's pages
/// and fills new ones, and the page faults of both run in parallel too.
tfc_status convertPendingWeights(tfc_model *model, int32_t only = -1) {
  struct Chunk {
    const char *src;
    tfc::DType from;
    char *dst;
    tfc::DType to;
    size_t count;
  };
  constexpr size_t kChunk = size_t(1) << 20; // elements
  std::vector<Chunk> chunks;
  tfc_status status = nullptr;
  auto &pending = model->pendingConversions;
  for (size_t i = 0; i < pending.size();) {
    auto [index, tensor] = pending[i];
    if (only >= 0 && index != only) {
      ++i;
      continue;
    }
    const tfc_tensor_desc &desc = *tfc_model_weight(model, index);
    size_t nbytes = tfc_tensor_desc_nbytes(&desc);
    tfc::AlignedBuffer copy;
    if (!copy.allocate(nbytes)) {
      // The copies bound so far are still converted, below.
      status =
          makeStatus(TFC_OUT_OF_MEMORY,
                     "weights file " + model->weightsFile->path() +
                         ": tensor " + quote(desc.name) + ": out of memory");
      break;
    }
    auto to = static_cast<tfc::DType>(desc.dtype);
    size_t count = nbytes / tfc_dtype_size(desc.dtype);
    size_t fromSize = tfc_dtype_size(int32_t(tensor->dtype));
    size_t toSize = tfc_dtype_size(desc.dtype);
    for (size_t at = 0; at < count; at += kChunk)
      chunks.push_back(
          {reinterpret_cast<const char *>(tensor->data) + at * fromSize,
           tensor->dtype, reinterpret_cast<char *>(copy.data()) + at * toSize,
           to, std::min(kChunk, count - at)});
    model->buffers[model->weightArgs[index]] = copy.data();
    model->weightCopies.push_back(std::move(copy));
    pending.erase(pending.begin() + std::ptrdiff_t(i));
  }
  std::atomic<size_t> next{0};
  auto convert = [&] {
    for (size_t c; (c = next++) < chunks.size();)
      tfc::convertFloats(chunks[c].src, chunks[c].from, chunks[c].dst,
                         chunks[c].to, chunks[c].count);
  };
  int32_t asked = requestedThreads.load();
  size_t threads = std::min<size_t>(
      {chunks.size(), 16,
       asked > 0 ? size_t(asked)
                 : std::max<size_t>(std::thread::hardware_concurrency(), 1)});
  std::vector<std::thread> helpers;
  for (size_t t = 1; t < threads; ++t) {
    try {
      helpers.emplace_back(convert);
    } catch (const std::system_error &) {
      break; // the threads there are do the rest
    }
  }
  convert();
  for (std::thread &helper : helpers)
    helper.join();
  return status;
}

/// Holds `model` for one call that runs it or changes its bindings; a
/// second such call while one is under way (from another thread: a model
/// serves one call at a time) is refused rather than let to race.
class Exclusive {
public:
  explicit Exclusive(tfc_model *model)
      : model(model), held(!model->busy.exchange(true)) {}
  ~Exclusive() {
    if (held)
      model->busy.store(false);
  }
  Exclusive(const Exclusive &) = delete;
  Exclusive &operator=(const Exclusive &) = delete;
  /// Null when held; else FAILED_PRECONDITION naming `call`.
  tfc_status refusal(const char *call) const {
    if (held)
      return nullptr;
    return makeStatus(TFC_FAILED_PRECONDITION,
                      std::string(call) + ": model " + model->path +
                          " is in use by another call on another thread (a "
                          "model serves one call at a time: load one model "
                          "per thread)");
  }

private:
  tfc_model *model;
  bool held;
};

/// FAILED_PRECONDITION when a file the model reads its weights from in
/// place changed since it was mapped: its pages would show the new bytes
/// (or raise SIGBUS past a new end). A GPU model's weights are on the
/// device.
tfc_status checkWeightFiles(const tfc_model *model) {
  if (model->gpu)
    return nullptr;
  if (model->weightsFile)
    if (std::string change = model->weightsFile->changeSinceOpen();
        !change.empty())
      return makeStatus(TFC_FAILED_PRECONDITION,
                        "model " + model->path + ": weights file " +
                            model->weightsFile->path() +
                            " changed after it was bound (" + change +
                            "): bind it again");
  if (model->packedFile)
    if (std::string change = model->packedFile->changeSinceOpen();
        !change.empty())
      return makeStatus(TFC_FAILED_PRECONDITION,
                        "model " + model->path + ": packed weights file " +
                            model->packedFile->path() +
                            " changed after it was loaded (" + change +
                            "): bind the weights and load it again");
  return nullptr;
}

/// FAILED_PRECONDITION naming the first unbound argument or result.
tfc_status checkBound(const tfc_model *model) {
  for (size_t i = 0; i < model->inputArgs.size(); ++i)
    if (!model->buffers[model->inputArgs[i]])
      return makeStatus(TFC_FAILED_PRECONDITION,
                        model->path + ": " +
                            roleName(model, TFC_ROLE_INPUT, int32_t(i)) +
                            " is not bound");
  for (size_t i = 0; i < model->weightArgs.size(); ++i)
    if (!model->buffers[model->weightArgs[i]])
      return makeStatus(TFC_FAILED_PRECONDITION,
                        model->path + ": " +
                            roleName(model, TFC_ROLE_WEIGHT, int32_t(i)) +
                            " is not bound (bind a weights file)");
  for (int32_t i = 0; i < model->manifest->num_results; ++i)
    if (!model->buffers[size_t(model->manifest->num_args) + size_t(i)])
      return makeStatus(TFC_FAILED_PRECONDITION,
                        model->path + ": " +
                            roleName(model, TFC_ROLE_OUTPUT, i) +
                            " is not bound");
  return nullptr;
}

template <typename T>
std::optional<size_t> firstOutside(const void *data, size_t count, int64_t lo,
                                   int64_t hi) {
  const T *values = static_cast<const T *>(data);
  for (size_t i = 0; i < count; ++i)
    if (int64_t(values[i]) < lo || int64_t(values[i]) >= hi)
      return i;
  return std::nullopt;
}

/// Checks every input the manifest bounds (token ids that index a table):
/// the first element outside [lo, hi) is an error naming the input, the
/// element and the range.
tfc_status checkInputBounds(const tfc_model *model) {
  for (size_t i = 0; i < model->inputArgs.size(); ++i) {
    const tfc_tensor_desc &desc = model->manifest->args[model->inputArgs[i]];
    if (!desc.bounds)
      continue;
    const void *data = model->buffers[model->inputArgs[i]];
    size_t count = tfc_tensor_desc_nbytes(&desc) / tfc_dtype_size(desc.dtype);
    int64_t lo = desc.bounds[0], hi = desc.bounds[1];
    bool wide = desc.dtype == TFC_DTYPE_I64;
    std::optional<size_t> at = wide
                                   ? firstOutside<int64_t>(data, count, lo, hi)
                                   : firstOutside<int32_t>(data, count, lo, hi);
    if (!at)
      continue;
    int64_t value = wide ? static_cast<const int64_t *>(data)[*at]
                         : static_cast<const int32_t *>(data)[*at];
    std::vector<int64_t> index(size_t(desc.rank));
    for (size_t d = index.size(), rest = *at; d-- > 0;) {
      index[d] = int64_t(rest % size_t(desc.shape[d]));
      rest /= size_t(desc.shape[d]);
    }
    return makeStatus(TFC_INVALID_ARGUMENT,
                      model->path + ": " +
                          roleName(model, TFC_ROLE_INPUT, int32_t(i)) +
                          " holds " + std::to_string(value) + " at " +
                          tfc::shapeString(index) + ", outside [" +
                          std::to_string(lo) + ", " + std::to_string(hi) + ")");
  }
  return nullptr;
}

/// Fills every bound output with 0xFF bytes (NaN, -1), so that an element
/// the model does not write shows (ModelVariants::run poisons its staging
/// buffers too).
void poisonHostOutputs(tfc_model *model) {
  size_t numArgs = size_t(model->manifest->num_args);
  for (int32_t i = 0; i < model->manifest->num_results; ++i)
    std::memset(model->buffers[numArgs + size_t(i)], 0xff,
                tfc_tensor_desc_nbytes(tfc_model_output(model, i)));
}

/// After a CPU model's first run with weights from a file: the kernels have
/// packed (and quantized) their copies of the weights they multiply by,
/// the weights of another float type are converted, and the file's
/// bytes are read no more, so its pages are dropped from the process's
/// resident memory. The few read in place every run (embedding rows, norm
/// scales) come back from the file on the next run. A GPU model's weights
/// are on the device once bound.
void releaseWeightPages(tfc_model *model) {
  if (!model->weightsFile || model->weightPagesReleased)
    return;
  model->weightsFile->releasePages();
  model->weightPagesReleased = true;
}

/// Calls omp_set_num_threads as found from `scope` (RTLD_DEFAULT, or a model's
/// handle: a model opened RTLD_LOCAL keeps its OpenMP runtime out of the
/// global scope).
bool applyThreads(void *scope) {
  int32_t threads = requestedThreads.load();
  if (threads <= 0)
    return false;
  using SetFn = void (*)(int);
  auto set = reinterpret_cast<SetFn>(dlsym(scope, "omp_set_num_threads"));
  if (!set)
    return false;
  set(threads);
  return true;
}

} // namespace

extern "C" {

/*===-- Status ------------------------------------------------------------===*/

tfc_status_code tfc_status_get_code(tfc_status status) {
  return status ? status->code : TFC_OK;
}

const char *tfc_status_message(tfc_status status) {
  return status ? status->message.c_str() : "";
}

void tfc_status_free(tfc_status status) {
  if (status != &outOfMemoryStatus)
    delete status;
}

const char *tfc_status_code_name(tfc_status_code code) {
  switch (code) {
  case TFC_OK:
    return "OK";
  case TFC_INVALID_ARGUMENT:
    return "INVALID_ARGUMENT";
  case TFC_NOT_FOUND:
    return "NOT_FOUND";
  case TFC_IO_ERROR:
    return "IO_ERROR";
  case TFC_BAD_FORMAT:
    return "BAD_FORMAT";
  case TFC_MISMATCH:
    return "MISMATCH";
  case TFC_FAILED_PRECONDITION:
    return "FAILED_PRECONDITION";
  case TFC_OUT_OF_MEMORY:
    return "OUT_OF_MEMORY";
  case TFC_UNIMPLEMENTED:
    return "UNIMPLEMENTED";
  case TFC_INTERNAL:
    return "INTERNAL";
  }
  return "UNKNOWN";
}

/*===-- Element types -----------------------------------------------------===*/

size_t tfc_dtype_size(int32_t dtype) {
  return tfc::isValidDType(dtype) ? tfc::dtypeSize(DType(dtype)) : 0;
}

const char *tfc_dtype_name(int32_t dtype) {
  return tfc::isValidDType(dtype) ? tfc::dtypeName(DType(dtype)) : "?";
}

size_t tfc_tensor_desc_nbytes(const tfc_tensor_desc *desc) {
  if (!desc || desc->rank < 0 || (desc->rank > 0 && !desc->shape) ||
      !tfc::isValidDType(desc->dtype))
    return 0;
  std::vector<int64_t> shape(desc->shape, desc->shape + desc->rank);
  return tfc::tensorBytes(shape, tfc::dtypeSize(DType(desc->dtype)))
      .value_or(0);
}

/*===-- Models ------------------------------------------------------------===*/

tfc_status tfc_model_load(const char *path, tfc_model **out) {
  if (out)
    *out = nullptr;
  if (!path || !out)
    return makeStatus(TFC_INVALID_ARGUMENT,
                      "tfc_model_load: path and out must not be NULL");
  return guard([&]() -> tfc_status {
    std::string file = path;
    if (!fileExists(path))
      return makeStatus(TFC_NOT_FOUND,
                        "model " + file + ": " + std::strerror(ENOENT));
    // The model runs a copy of its own (LibraryCopy.h): another model of
    // the same file, or the file rebuilt, is another library.
    std::string error;
    std::unique_ptr<tfc::LibraryCopy> library =
        tfc::LibraryCopy::make(file, error);
    if (!library)
      return makeStatus(TFC_IO_ERROR,
                        "cannot load model " + file + ": " + error);
    // dlopen maps a truncated library and the loader then dies of SIGBUS.
    std::string damaged = tfc::checkElfExtents(library->openPath());
    if (!damaged.empty())
      return makeStatus(TFC_BAD_FORMAT,
                        "cannot load model " + file + ": " + damaged);
    promoteSelfToGlobal();
    // Collects the kernel modules a GPU model's constructors register.
    tfc::cuda::LoadScope gpuModules;
    dlerror();
    void *handle = dlopen(library->openPath().c_str(), RTLD_NOW | RTLD_LOCAL);
    std::string reason;
    if (!handle) {
      const char *text = dlerror();
      reason = library->renamed(text ? text : "dlopen failed", file);
      // A system that refuses to run code from memfds runs a temporary
      // file's.
      if (library->inMemory())
        if (auto onDisk = tfc::LibraryCopy::make(file, error, false)) {
          handle = dlopen(onDisk->openPath().c_str(), RTLD_NOW | RTLD_LOCAL);
          if (handle)
            library = std::move(onDisk);
          else
            dlerror();
        }
    }
    gpuModules.close();
    if (!handle)
      // Not a loadable library, or one whose dependencies are missing.
      return makeStatus(TFC_BAD_FORMAT,
                        "cannot load model " + file + ": " + reason);
    auto fail = [&](tfc_status_code code, const std::string &message) {
      closeLibrary(handle);
      return makeStatus(code, message);
    };
    auto manifestFn = reinterpret_cast<tfc_model_manifest_fn>(
        ownSymbol(handle, "tfc_model_manifest"));
    if (!manifestFn)
      return fail(TFC_BAD_FORMAT, "not a tfc model: " + file +
                                      ": missing symbol tfc_model_manifest");
    auto runFn =
        reinterpret_cast<tfc_model_run_fn>(ownSymbol(handle, "tfc_model_run"));
    if (!runFn)
      return fail(TFC_BAD_FORMAT, "not a tfc model: " + file +
                                      ": missing symbol tfc_model_run");
    const tfc_manifest *manifest = manifestFn();
    if (!manifest)
      return fail(TFC_BAD_FORMAT, "not a tfc model: " + file +
                                      ": tfc_model_manifest() is NULL");
    if (manifest->magic != TFC_MANIFEST_MAGIC) {
      char buf[96];
      std::snprintf(buf, sizeof(buf),
                    "bad manifest magic 0x%08x, expected 0x%08x",
                    manifest->magic, TFC_MANIFEST_MAGIC);
      return fail(TFC_BAD_FORMAT, "not a tfc model: " + file + ": " + buf);
    }
    if (manifest->abi_version != TFC_ABI_VERSION)
      return fail(TFC_MISMATCH, "model " + file + ": ABI version " +
                                    std::to_string(manifest->abi_version) +
                                    ", this runtime supports " +
                                    std::to_string(TFC_ABI_VERSION));
    if (manifest->num_args < 0 || manifest->num_results < 0 ||
        (manifest->num_args > 0 && !manifest->args) ||
        (manifest->num_results > 0 && !manifest->results))
      return fail(TFC_BAD_FORMAT,
                  "model " + file + ": manifest has invalid argument counts");
    if (!manifest->target)
      return fail(TFC_BAD_FORMAT, "model " + file + ": manifest has no target");
    bool isGpu = std::strcmp(manifest->target, "nvptx") == 0;
    if (!isGpu && std::strcmp(manifest->target, "cpu") != 0)
      return fail(TFC_BAD_FORMAT,
                  "model " + file + ": unknown target " +
                      quote(manifest->target) +
                      " (this runtime runs cpu and nvptx models)");

    auto model = std::make_unique<tfc_model>();
    model->path = file;
    for (int32_t i = 0; i < manifest->num_args; ++i) {
      const tfc_tensor_desc &desc = manifest->args[i];
      if (tfc_status s = checkDescriptor(file, "argument", i, desc, false)) {
        closeLibrary(handle);
        return s;
      }
      (desc.role == TFC_ROLE_INPUT ? model->inputArgs : model->weightArgs)
          .push_back(i);
    }
    for (int32_t i = 0; i < manifest->num_results; ++i)
      if (tfc_status s =
              checkDescriptor(file, "result", i, manifest->results[i], true)) {
        closeLibrary(handle);
        return s;
      }
    for (size_t i = 0; i < model->weightArgs.size(); ++i)
      for (size_t j = 0; j < i; ++j)
        if (std::strcmp(manifest->args[model->weightArgs[i]].name,
                        manifest->args[model->weightArgs[j]].name) == 0)
          return fail(TFC_BAD_FORMAT,
                      "model " + file + ": manifest names weight " +
                          quote(manifest->args[model->weightArgs[i]].name) +
                          " twice");
    // A model built for several batch sizes or sequence lengths (abi.h).
    auto variantsFn = reinterpret_cast<tfc_model_variants_fn>(
        ownSymbol(handle, "tfc_model_variants"));
    if (variantsFn) {
      const tfc_model_variant *variants = nullptr;
      int32_t count = variantsFn(&variants);
      std::string error;
      model->variants =
          tfc::ModelVariants::create(file, *manifest, variants, count, error);
      if (!model->variants)
        return fail(TFC_BAD_FORMAT, error);
    }
    applyThreads(handle);
    model->handle = handle;
    model->library = std::move(library);
    model->manifest = model->variants ? &model->variants->manifest() : manifest;
    model->run = runFn;
    model->weightsChanged = reinterpret_cast<tfc_model_weights_changed_fn>(
        ownSymbol(handle, "tfc_model_weights_changed"));
    model->packedFormat = reinterpret_cast<tfc_model_packed_format_fn>(
        ownSymbol(handle, "tfc_model_packed_format"));
    model->packedWeights = reinterpret_cast<tfc_model_packed_weights_fn>(
        ownSymbol(handle, "tfc_model_packed_weights"));
    model->adoptPackedWeight =
        reinterpret_cast<tfc_model_adopt_packed_weight_fn>(
            ownSymbol(handle, "tfc_model_adopt_packed_weight"));
    if (!model->packedFormat || !model->adoptPackedWeight)
      model->packedWeights = nullptr;
    model->buffers.assign(
        size_t(manifest->num_args) + size_t(manifest->num_results), nullptr);
    model->converted.assign(model->weightArgs.size(), false);
    if (isGpu)
      if (tfc::cuda::GpuError e = tfc::cuda::GpuModel::create(
              file, gpuModules, gpuSlots(model.get()), model->gpu))
        return fail(e.code, e.message);
    *out = model.release();
    return nullptr;
  });
}

void tfc_model_destroy(tfc_model *model) {
  if (!model)
    return;
  void *handle = model->handle;
  // The library's copy can stay loaded after dlclose (threads that ran it
  // hold its thread-local storage): what it packed from these weights (or
  // adopted from a file about to be unmapped) must not outlive them.
  if (model->weightsChanged)
    model->weightsChanged();
  std::unique_ptr<tfc::LibraryCopy> library = std::move(model->library);
  delete model;
  if (handle)
    closeLibrary(handle);
}

const tfc_manifest *tfc_model_manifest_of(const tfc_model *model) {
  return model ? model->manifest : nullptr;
}

const char *tfc_model_path(const tfc_model *model) {
  return model ? model->path.c_str() : "";
}

const char *tfc_model_target(const tfc_model *model) {
  return model ? model->manifest->target : "";
}

int32_t tfc_model_num_inputs(const tfc_model *model) {
  return model ? int32_t(model->inputArgs.size()) : 0;
}

int32_t tfc_model_num_weights(const tfc_model *model) {
  return model ? int32_t(model->weightArgs.size()) : 0;
}

int32_t tfc_model_num_outputs(const tfc_model *model) {
  return model ? model->manifest->num_results : 0;
}

const tfc_tensor_desc *tfc_model_input(const tfc_model *model, int32_t index) {
  if (!model || index < 0 || size_t(index) >= model->inputArgs.size())
    return nullptr;
  return &model->manifest->args[model->inputArgs[index]];
}

const tfc_tensor_desc *tfc_model_weight(const tfc_model *model, int32_t index) {
  if (!model || index < 0 || size_t(index) >= model->weightArgs.size())
    return nullptr;
  return &model->manifest->args[model->weightArgs[index]];
}

const tfc_tensor_desc *tfc_model_output(const tfc_model *model, int32_t index) {
  if (!model || index < 0 || index >= model->manifest->num_results)
    return nullptr;
  return &model->manifest->results[index];
}

int32_t tfc_model_find_weight(const tfc_model *model, const char *name) {
  if (!model || !name)
    return -1;
  for (size_t i = 0; i < model->weightArgs.size(); ++i)
    if (std::strcmp(model->manifest->args[model->weightArgs[i]].name, name) ==
        0)
      return int32_t(i);
  return -1;
}

tfc_status tfc_model_bind_weights(tfc_model *model,
                                  const char *safetensors_path) {
  if (!model || !safetensors_path)
    return makeStatus(
        TFC_INVALID_ARGUMENT,
        "tfc_model_bind_weights: model and path must not be NULL");
  Exclusive exclusive(model);
  if (tfc_status s = exclusive.refusal("tfc_model_bind_weights"))
    return s;
  return guard([&]() -> tfc_status {
    std::string path = safetensors_path;
    if (!fileExists(safetensors_path))
      return makeStatus(TFC_NOT_FOUND,
                        "weights file " + path + ": " + std::strerror(ENOENT));
    std::string error;
    std::unique_ptr<tfc::SafetensorsFile> file =
        tfc::SafetensorsFile::open(path, error);
    if (!file)
      return makeStatus(TFC_BAD_FORMAT, "weights file " + error);
    std::vector<tfc::AlignedBuffer> copies;
    std::vector<const void *> pointers;
    std::vector<std::pair<int32_t, const tfc::SafetensorsTensor *>> pending;
    std::vector<bool> converted;
    for (int32_t arg : model->weightArgs) {
      const tfc_tensor_desc &desc = model->manifest->args[arg];
      const tfc::SafetensorsTensor *tensor = file->find(desc.name);
      if (!tensor)
        return makeStatus(TFC_NOT_FOUND,
                          "weights file " + path + ": missing tensor " +
                              quote(desc.name) + " (" + describe(desc) +
                              ") that model " + model->path + " needs");
      bool sameShape =
          tensor->shape.size() == size_t(desc.rank) &&
          std::equal(tensor->shape.begin(), tensor->shape.end(), desc.shape);
      // A float tensor binds to a weight of another float type through a
      // converted copy (an f32 checkpoint for a model compiled with
      // --dtype bf16, or the other way), made once: for a CPU model on
      // first need (a packed weights file may hold it; below), for a GPU
      // model here.
      tfc::DType want = static_cast<tfc::DType>(desc.dtype);
      bool convert = int32_t(tensor->dtype) != desc.dtype &&
                     tfc::isFloatConvertible(tensor->dtype, want);
      if ((int32_t(tensor->dtype) != desc.dtype && !convert) || !sameShape)
        return makeStatus(TFC_MISMATCH,
                          "weights file " + path + ": tensor " +
                              quote(desc.name) + ": model " + model->path +
                              " expects " + describe(desc) + ", the file has " +
                              describe(int32_t(tensor->dtype),
                                       int32_t(tensor->shape.size()),
                                       tensor->shape.data()));
      // Compiled code reads weights with element-aligned accesses only (the
      // kernels pack or load them unaligned), so a tensor aligned to its
      // element size is used in place, without a copy. A GPU model's weights
      // are copied to the device from wherever they are.
      size_t elementAlignment = std::max<size_t>(tfc_dtype_size(desc.dtype), 1);
      bool aligned =
          reinterpret_cast<uintptr_t>(tensor->data) % elementAlignment == 0;
      converted.push_back(convert);
      if (convert && !model->gpu) {
        pending.emplace_back(int32_t(pointers.size()), tensor);
        pointers.push_back(nullptr);
        continue;
      }
      if ((aligned || model->gpu) && tensor->nbytes > 0 && !convert) {
        pointers.push_back(tensor->data);
        continue;
      }
      size_t nbytes = tfc_tensor_desc_nbytes(&desc);
      tfc::AlignedBuffer copy;
      if (!copy.allocate(nbytes))
        return makeStatus(TFC_OUT_OF_MEMORY,
                          "weights file " + path + ": tensor " +
                              quote(desc.name) + ": out of memory");
      if (convert)
        tfc::convertFloats(tensor->data, tensor->dtype, copy.data(), want,
                           nbytes / tfc_dtype_size(desc.dtype));
      else if (nbytes)
        std::memcpy(copy.data(), tensor->data, nbytes);
      pointers.push_back(copy.data());
      copies.push_back(std::move(copy));
    }
    if (model->gpu) {
      for (size_t i = 0; i < model->weightArgs.size(); ++i) {
        if (tfc::cuda::GpuError e =
                model->gpu->upload(size_t(model->weightArgs[i]), pointers[i])) {
          // Some device buffers now hold the new weights, some the old.
          for (int32_t arg : model->weightArgs)
            model->buffers[arg] = nullptr;
          model->weightCopies.clear();
          model->pendingConversions.clear();
          model->weightsFile.reset();
          model->weightsIdentity.clear();
          return fromGpu(std::move(e));
        }
      }
    }
    for (size_t i = 0; i < model->weightArgs.size(); ++i)
      model->buffers[model->weightArgs[i]] = const_cast<void *>(pointers[i]);
    model->weightCopies = std::move(copies);
    model->pendingConversions = std::move(pending);
    model->converted = std::move(converted);
    model->weightsFile = std::move(file);
    model->weightsIdentity = fileIdentity(path);
    model->weightPagesReleased = false;
    if (model->gpu)
      releaseWeightPages(model);
    if (model->weightsChanged)
      model->weightsChanged();
    model->fromPackedFile.clear();
    model->packedFile.reset();
    return nullptr;
  });
}

const void *tfc_model_weight_data(const tfc_model *model, int32_t index) {
  if (!model || index < 0 || size_t(index) >= model->weightArgs.size())
    return nullptr;
  // A deferred conversion is made now (NULL when it cannot be).
  if (tfc_status s =
          convertPendingWeights(const_cast<tfc_model *>(model), index)) {
    tfc_status_free(s);
    return nullptr;
  }
  return model->buffers[model->weightArgs[index]];
}

namespace {

/// The kind of a packed weights file's entry that holds a weight bound
/// through a conversion, as converted (not a kernel's packed copy).
constexpr int32_t kConvertedKind = -1;

/// Unmaps the model's packed weights file, after its kernels drop the
/// copies they adopted from it; the weights bound to its converted bytes
/// go back to being converted on first need.
void dropPackedFile(tfc_model *model) {
  if (model->weightsChanged)
    model->weightsChanged();
  for (const auto &p : model->fromPackedFile) {
    model->buffers[model->weightArgs[p.first]] = nullptr;
    model->pendingConversions.push_back(p);
  }
  model->fromPackedFile.clear();
  model->packedFile.reset();
}

/// UNIMPLEMENTED for a model that packs no weights, FAILED_PRECONDITION for
/// weights not all bound from one file; null when packed weights can be
/// saved or loaded for `model`.
tfc_status checkPackable(const tfc_model *model) {
  if (!model->packedWeights)
    return makeStatus(TFC_UNIMPLEMENTED,
                      "model " + model->path +
                          " packs no weights (a GPU model, or one built "
                          "without the CPU micro-kernels)");
  if (model->weightsIdentity.empty())
    return makeStatus(TFC_FAILED_PRECONDITION,
                      "model " + model->path +
                          ": packed weights go with weights bound from a file "
                          "(tfc_model_bind_weights); bind them first");
  return nullptr;
}

} // namespace

tfc_status tfc_model_save_packed_weights(tfc_model *model, const char *path) {
  if (!model || !path)
    return makeStatus(
        TFC_INVALID_ARGUMENT,
        "tfc_model_save_packed_weights: model and path must not be NULL");
  Exclusive exclusive(model);
  if (tfc_status s = exclusive.refusal("tfc_model_save_packed_weights"))
    return s;
  return guard([&]() -> tfc_status {
    if (tfc_status s = checkPackable(model))
      return s;
    std::vector<tfc_packed_weight> copies(
        size_t(std::max(model->packedWeights(nullptr, 0), 0)));
    copies.resize(size_t(
        std::clamp(model->packedWeights(copies.data(), int32_t(copies.size())),
                   0, int32_t(copies.size()))));
    // Conversions not made yet are made now: the file keeps them.
    if (tfc_status s = convertPendingWeights(model))
      return s;
    // Each copy names the bytes it was packed from: a bound weight's (a B
    // computed by the model, were there one, would be left out).
    std::vector<tfc::PackedEntry> entries;
    auto entryOf = [&](int32_t i) {
      const tfc_tensor_desc &desc = *tfc_model_weight(model, i);
      tfc::PackedEntry e;
      e.weight = desc.name;
      e.dtype = desc.dtype;
      e.shape.assign(desc.shape, desc.shape + desc.rank);
      return e;
    };
    for (const tfc_packed_weight &c : copies) {
      const auto *source = static_cast<const char *>(c.source);
      for (int32_t i = 0; i < tfc_model_num_weights(model); ++i) {
        const tfc_tensor_desc &desc = *tfc_model_weight(model, i);
        const auto *data =
            static_cast<const char *>(model->buffers[model->weightArgs[i]]);
        if (!data || source < data ||
            source >= data + tfc_tensor_desc_nbytes(&desc))
          continue;
        tfc::PackedEntry e = entryOf(i);
        e.offset = uint64_t(source - data);
        e.kind[0] = c.kind[0];
        e.kind[1] = c.kind[1];
        e.k = c.k;
        e.n = c.n;
        e.strides[0] = c.strides[0];
        e.strides[1] = c.strides[1];
        e.data = c.data;
        e.bytes = c.bytes;
        entries.push_back(std::move(e));
        break;
      }
    }
    if (entries.empty())
      return makeStatus(TFC_FAILED_PRECONDITION,
                        "model " + model->path +
                            " has packed no weights yet: run it once, then "
                            "save them");
    // The weights bound through a conversion, as converted: a later
    // process maps them instead of converting them again.
    for (int32_t i = 0; i < tfc_model_num_weights(model); ++i) {
      if (!model->converted[size_t(i)])
        continue;
      tfc::PackedEntry e = entryOf(i);
      e.kind[0] = e.kind[1] = kConvertedKind;
      e.data = model->buffers[model->weightArgs[i]];
      e.bytes = tfc_tensor_desc_nbytes(tfc_model_weight(model, i));
      entries.push_back(std::move(e));
    }
    std::string error;
    if (!tfc::writePackedWeights(path, model->packedFormat(),
                                 tfc::fileContentIdentity(model->path),
                                 model->weightsIdentity, entries, error))
      return makeStatus(TFC_IO_ERROR, "packed weights file " + error);
    return nullptr;
  });
}

tfc_status tfc_model_load_packed_weights(tfc_model *model, const char *path) {
  if (!model || !path)
    return makeStatus(
        TFC_INVALID_ARGUMENT,
        "tfc_model_load_packed_weights: model and path must not be NULL");
  Exclusive exclusive(model);
  if (tfc_status s = exclusive.refusal("tfc_model_load_packed_weights"))
    return s;
  return guard([&]() -> tfc_status {
    if (tfc_status s = checkPackable(model))
      return s;
    std::string where = std::string("packed weights file ") + path;
    if (model->packedFile)
      return makeStatus(TFC_FAILED_PRECONDITION,
                        where + ": model " + model->path + " holds those of " +
                            model->packedFile->path() +
                            " already; bind its weights again first");
    if (!fileExists(path))
      return makeStatus(TFC_NOT_FOUND, where + ": " + std::strerror(ENOENT));
    std::string error;
    std::unique_ptr<tfc::PackedWeightsFile> file =
        tfc::PackedWeightsFile::open(path, error);
    if (!file)
      return makeStatus(TFC_BAD_FORMAT, "packed weights file " + error);
    std::string format = model->packedFormat();
    if (file->format() != format)
      return makeStatus(TFC_MISMATCH, where + " was packed by kernels '" +
                                          file->format() + "', model " +
                                          model->path + "'s are '" + format +
                                          "'");
    // The same kernels pack the same bytes, but only the model library
    // knows which products quantize which weights (int8 or int4 builds of
    // one checkpoint hold the same weights).
    std::string modelIdentity = tfc::fileContentIdentity(model->path);
    if (file->modelIdentity() != modelIdentity)
      return makeStatus(TFC_MISMATCH, where +
                                          " was saved by another model "
                                          "library (" +
                                          file->modelIdentity() + "; " +
                                          model->path + " is " + modelIdentity +
                                          "): save it again");
    if (file->weightsIdentity() != model->weightsIdentity)
      return makeStatus(TFC_MISMATCH,
                        where + " was packed from other weights (a file of " +
                            file->weightsIdentity() + "; " +
                            model->weightsFile->path() + " is " +
                            model->weightsIdentity + "): save it again");
    // Every entry names one of the model's weights as it is now.
    std::vector<int32_t> weightOf;
    for (const tfc::PackedEntry &e : file->entries()) {
      int32_t i = tfc_model_find_weight(model, e.weight.c_str());
      if (i < 0)
        return makeStatus(TFC_MISMATCH,
                          where + ": weight " + quote(e.weight.c_str()) +
                              " is not one of model " + model->path + "'s");
      const tfc_tensor_desc &desc = *tfc_model_weight(model, i);
      if (e.dtype != desc.dtype || e.shape.size() != size_t(desc.rank) ||
          !std::equal(e.shape.begin(), e.shape.end(), desc.shape))
        return makeStatus(
            TFC_MISMATCH,
            where + ": weight " + quote(desc.name) + " is " +
                describe(e.dtype, int32_t(e.shape.size()), e.shape.data()) +
                " there, model " + model->path + " has " + describe(desc));
      size_t nbytes = tfc_tensor_desc_nbytes(&desc);
      bool isConversion = e.kind[0] == kConvertedKind;
      if (isConversion ? !model->converted[size_t(i)] || e.offset != 0 ||
                             e.bytes != nbytes
                       : e.offset >= nbytes)
        return makeStatus(TFC_BAD_FORMAT,
                          where + ": weight " + quote(desc.name) + ": " +
                              (isConversion
                                   ? "a converted copy of " +
                                         std::to_string(e.bytes) + " bytes"
                                   : "offset " + std::to_string(e.offset)) +
                              " does not fit it");
      weightOf.push_back(i);
    }
    // What the model holds now goes; the file's converted weights are
    // bound in place of the conversions not made yet, then its packed
    // copies come in (their keys name the weights' bytes as bound), all or
    // none.
    if (model->weightsChanged)
      model->weightsChanged();
    model->packedFile = std::move(file);
    const std::vector<tfc::PackedEntry> &entries = model->packedFile->entries();
    auto &pending = model->pendingConversions;
    for (size_t k = 0; k < entries.size(); ++k) {
      auto it =
          std::find_if(pending.begin(), pending.end(),
                       [&](const auto &p) { return p.first == weightOf[k]; });
      if (entries[k].kind[0] != kConvertedKind || it == pending.end())
        continue;
      model->buffers[model->weightArgs[weightOf[k]]] =
          const_cast<void *>(entries[k].data);
      model->fromPackedFile.push_back(*it);
      pending.erase(it);
    }
    for (size_t k = 0; k < entries.size(); ++k) {
      const tfc::PackedEntry &e = entries[k];
      if (e.kind[0] == kConvertedKind)
        continue;
      const auto *data =
          static_cast<const char *>(tfc_model_weight_data(model, weightOf[k]));
      tfc_packed_weight copy = {data + e.offset,
                                {e.kind[0], e.kind[1]},
                                e.k,
                                e.n,
                                {e.strides[0], e.strides[1]},
                                e.data,
                                e.bytes};
      if (!data || model->adoptPackedWeight(&copy) != 0) {
        dropPackedFile(model);
        return makeStatus(
            data ? TFC_BAD_FORMAT : TFC_OUT_OF_MEMORY,
            where + ": entry " + std::to_string(k) + " (weight " +
                quote(e.weight.c_str()) + ", " + std::to_string(e.k) + " x " +
                std::to_string(e.n) + ") " +
                (data ? "is not a copy model " + model->path + "'s kernels make"
                      : "cannot be converted: out of memory"));
      }
    }
    return nullptr;
  });
}

static tfc_status bindArgument(tfc_model *model, tfc_tensor_role role,
                               int32_t index, const void *data) {
  const char *fn = role == TFC_ROLE_INPUT    ? "tfc_model_bind_input"
                   : role == TFC_ROLE_WEIGHT ? "tfc_model_bind_weight"
                                             : "tfc_model_bind_output";
  if (!model)
    return makeStatus(TFC_INVALID_ARGUMENT,
                      std::string(fn) + ": model must not be NULL");
  Exclusive exclusive(model);
  if (tfc_status s = exclusive.refusal(fn))
    return s;
  return guard([&]() -> tfc_status {
    int32_t count = role == TFC_ROLE_INPUT    ? tfc_model_num_inputs(model)
                    : role == TFC_ROLE_WEIGHT ? tfc_model_num_weights(model)
                                              : tfc_model_num_outputs(model);
    if (index < 0 || index >= count)
      return makeStatus(TFC_INVALID_ARGUMENT,
                        std::string(fn) + ": index " + std::to_string(index) +
                            " out of range: model " + model->path + " has " +
                            std::to_string(count));
    std::string where = model->path + ": " + roleName(model, role, index);
    if (!data)
      return makeStatus(TFC_INVALID_ARGUMENT, where + ": buffer is NULL");
    if (reinterpret_cast<uintptr_t>(data) % tfc::kBufferAlignment != 0)
      return makeStatus(TFC_INVALID_ARGUMENT,
                        where + ": buffer is not 64-byte aligned");
    size_t slot = role == TFC_ROLE_INPUT ? size_t(model->inputArgs[index])
                  : role == TFC_ROLE_WEIGHT
                      ? size_t(model->weightArgs[index])
                      : size_t(model->manifest->num_args) + size_t(index);
    if (role == TFC_ROLE_WEIGHT && model->gpu) {
      if (tfc::cuda::GpuError e = model->gpu->upload(slot, data)) {
        model->buffers[slot] = nullptr;
        return fromGpu(std::move(e));
      }
    }
    if (role == TFC_ROLE_WEIGHT) {
      // The kernels drop what they derived from the weights (dropPackedFile
      // calls weightsChanged), and this one is no conversion of the file's.
      dropPackedFile(model);
      auto &pending = model->pendingConversions;
      pending.erase(
          std::remove_if(pending.begin(), pending.end(),
                         [&](const auto &p) { return p.first == index; }),
          pending.end());
      model->converted[size_t(index)] = false;
      model->weightsIdentity.clear();
    }
    model->buffers[slot] = const_cast<void *>(data);
    return nullptr;
  });
}

tfc_status tfc_model_bind_weight(tfc_model *model, int32_t index,
                                 const void *data) {
  return bindArgument(model, TFC_ROLE_WEIGHT, index, data);
}

tfc_status tfc_model_bind_input(tfc_model *model, int32_t index,
                                const void *data) {
  return bindArgument(model, TFC_ROLE_INPUT, index, data);
}

tfc_status tfc_model_bind_output(tfc_model *model, int32_t index, void *data) {
  return bindArgument(model, TFC_ROLE_OUTPUT, index, data);
}

tfc_status tfc_model_check_input(const tfc_model *model, int32_t index,
                                 int32_t dtype, int32_t rank,
                                 const int64_t *shape) {
  if (!model || rank < 0 || (rank > 0 && !shape))
    return makeStatus(TFC_INVALID_ARGUMENT,
                      "tfc_model_check_input: invalid arguments");
  return guard([&]() -> tfc_status {
    const tfc_tensor_desc *desc = tfc_model_input(model, index);
    if (!desc)
      return makeStatus(
          TFC_INVALID_ARGUMENT,
          "tfc_model_check_input: index " + std::to_string(index) +
              " out of range: model " + model->path + " has " +
              std::to_string(model->inputArgs.size()) + " inputs");
    bool dtypeOk = dtype == desc->dtype ||
                   (desc->dtype == TFC_DTYPE_BF16 && dtype == TFC_DTYPE_U16);
    bool shapeOk = rank == desc->rank &&
                   (rank == 0 || std::equal(shape, shape + rank, desc->shape));
    if (dtypeOk && shapeOk)
      return nullptr;
    return makeStatus(TFC_MISMATCH, roleName(model, TFC_ROLE_INPUT, index) +
                                        ": expected " + describe(*desc) +
                                        ", got " +
                                        describe(dtype, rank, shape));
  });
}

tfc_status tfc_model_invoke(tfc_model *model) {
  if (!model)
    return makeStatus(TFC_INVALID_ARGUMENT,
                      "tfc_model_invoke: model must not be NULL");
  Exclusive exclusive(model);
  if (tfc_status s = exclusive.refusal("tfc_model_invoke"))
    return s;
  return guard([&]() -> tfc_status {
    if (tfc_status s = checkWeightFiles(model))
      return s;
    if (tfc_status s = convertPendingWeights(model))
      return s;
    if (tfc_status s = checkBound(model))
      return s;
    if (tfc_status s = checkInputBounds(model))
      return s;
    if (model->gpu)
      return fromGpu(model->gpu->invoke(model->run, model->buffers.data()));
    if (model->variants)
      model->variants->run(model->buffers.data());
    else
      model->run(model->buffers.data());
    releaseWeightPages(model);
    return nullptr;
  });
}

tfc_status tfc_model_time(tfc_model *model, int32_t warmup, int32_t runs,
                          double *ms) {
  if (!model || !ms || runs < 1 || warmup < 0)
    return makeStatus(TFC_INVALID_ARGUMENT,
                      "tfc_model_time: needs a model, runs >= 1, warmup >= 0 "
                      "and room for the times");
  Exclusive exclusive(model);
  if (tfc_status s = exclusive.refusal("tfc_model_time"))
    return s;
  return guard([&]() -> tfc_status {
    if (tfc_status s = checkWeightFiles(model))
      return s;
    if (tfc_status s = convertPendingWeights(model))
      return s;
    if (tfc_status s = checkBound(model))
      return s;
    if (tfc_status s = checkInputBounds(model))
      return s;
    if (model->gpu)
      return fromGpu(model->gpu->time(model->run, model->buffers.data(), warmup,
                                      runs, ms));
    // A shape that runs as a larger variant: its padding and cutting copies
    // are part of each run, and timed with it.
    auto runOnce = [&] {
      if (model->variants)
        model->variants->run(model->buffers.data());
      else
        model->run(model->buffers.data());
    };
    // The weights' pages are dropped after the first run, outside the
    // time of any.
    for (int32_t i = 0; i < warmup; ++i) {
      poisonHostOutputs(model);
      runOnce();
      releaseWeightPages(model);
    }
    for (int32_t i = 0; i < runs; ++i) {
      poisonHostOutputs(model);
      auto start = std::chrono::steady_clock::now();
      runOnce();
      std::chrono::duration<double, std::milli> elapsed =
          std::chrono::steady_clock::now() - start;
      ms[i] = elapsed.count();
      releaseWeightPages(model);
    }
    return nullptr;
  });
}

/*===-- Batch sizes and sequence lengths ----------------------------------===*/

namespace {

/// The variants of a model built for several batch sizes (`batches`) or
/// lengths, or null.
const tfc::ModelVariants *severalOf(const tfc_model *model, bool batches) {
  if (!model || !model->variants)
    return nullptr;
  const tfc::ModelVariants &v = *model->variants;
  return (batches ? v.batches() : v.lengths()).size() > 1 ? &v : nullptr;
}

int32_t numBuilt(const tfc_model *model, bool batches) {
  const tfc::ModelVariants *v = severalOf(model, batches);
  return v ? int32_t((batches ? v->batches() : v->lengths()).size()) : 0;
}

int64_t builtAt(const tfc_model *model, bool batches, int32_t index) {
  if (index < 0 || index >= numBuilt(model, batches))
    return 0;
  const tfc::ModelVariants &v = *model->variants;
  return (batches ? v.batches() : v.lengths())[size_t(index)];
}

/// The batch or sequence axis of input or output `index`, or -1.
int32_t axisOf(const tfc_model *model, bool input, int32_t index, bool batch) {
  if (!model || !model->variants || index < 0)
    return -1;
  size_t slot;
  if (input) {
    if (size_t(index) >= model->inputArgs.size())
      return -1;
    slot = size_t(model->inputArgs[size_t(index)]);
  } else {
    if (index >= model->manifest->num_results)
      return -1;
    slot = size_t(model->manifest->num_args) + size_t(index);
  }
  return batch ? model->variants->batchAxis(slot)
               : model->variants->lengthAxis(slot);
}

/// tfc_model_set_batch (`batch`) and tfc_model_set_length.
tfc_status setShape(tfc_model *model, bool batch, int64_t size) {
  const char *fn = batch ? "tfc_model_set_batch" : "tfc_model_set_length";
  if (!model)
    return makeStatus(TFC_INVALID_ARGUMENT,
                      std::string(fn) + ": model must not be NULL");
  Exclusive exclusive(model);
  if (tfc_status s = exclusive.refusal(fn))
    return s;
  return guard([&]() -> tfc_status {
    tfc::ModelVariants *variants = model->variants.get();
    if (!severalOf(model, batch))
      return makeStatus(
          TFC_FAILED_PRECONDITION,
          "model " + model->path +
              (batch ? " was built for one batch size; compile it with "
                       "--batch B1,B2,... to run other batch sizes"
                     : " was built for one sequence length; compile it "
                       "with --seq-len L1,L2,... to run other lengths"));
    std::string where = "model " + model->path +
                        (batch ? ": batch " : ": length ") +
                        std::to_string(size);
    if (size < 1)
      return makeStatus(TFC_INVALID_ARGUMENT, where + " is less than 1");
    if (!batch && size > variants->lengths().back())
      return makeStatus(TFC_INVALID_ARGUMENT,
                        where +
                            " is longer than the longest it was built "
                            "for, " +
                            std::to_string(variants->lengths().back()));
    if (batch && !variants->fits(size))
      return makeStatus(TFC_INVALID_ARGUMENT,
                        where + " makes tensors of more than 2^63 bytes");
    int64_t newBatch = batch ? size : variants->batch();
    int64_t newLength = batch ? variants->length() : size;
    // The same shape again keeps the bindings: nothing changed.
    if (newBatch == variants->batch() && newLength == variants->length())
      return nullptr;
    if (!variants->setShape(newBatch, newLength))
      return makeStatus(TFC_OUT_OF_MEMORY,
                        where + ": out of memory for its padded buffers");
    // The caller's buffers have the old shapes.
    for (int32_t arg : model->inputArgs)
      model->buffers[size_t(arg)] = nullptr;
    size_t numArgs = size_t(model->manifest->num_args);
    for (int32_t i = 0; i < model->manifest->num_results; ++i)
      model->buffers[numArgs + size_t(i)] = nullptr;
    return nullptr;
  });
}

} // namespace

int32_t tfc_model_num_batches(const tfc_model *model) {
  return numBuilt(model, true);
}

int64_t tfc_model_built_batch(const tfc_model *model, int32_t index) {
  return builtAt(model, true, index);
}

int32_t tfc_model_num_lengths(const tfc_model *model) {
  return numBuilt(model, false);
}

int64_t tfc_model_built_length(const tfc_model *model, int32_t index) {
  return builtAt(model, false, index);
}

int64_t tfc_model_batch(const tfc_model *model) {
  return severalOf(model, true) ? model->variants->batch() : 0;
}

int64_t tfc_model_length(const tfc_model *model) {
  return severalOf(model, false) ? model->variants->length() : 0;
}

tfc_status tfc_model_set_batch(tfc_model *model, int64_t batch) {
  return setShape(model, true, batch);
}

tfc_status tfc_model_set_length(tfc_model *model, int64_t length) {
  return setShape(model, false, length);
}

int32_t tfc_model_input_batch_axis(const tfc_model *model, int32_t index) {
  return axisOf(model, true, index, true);
}

int32_t tfc_model_output_batch_axis(const tfc_model *model, int32_t index) {
  return axisOf(model, false, index, true);
}

int32_t tfc_model_input_length_axis(const tfc_model *model, int32_t index) {
  return axisOf(model, true, index, false);
}

int32_t tfc_model_output_length_axis(const tfc_model *model, int32_t index) {
  return axisOf(model, false, index, false);
}

/*===-- Host arrays -------------------------------------------------------===*/

tfc_status tfc_array_create(int32_t dtype, int32_t rank, const int64_t *shape,
                            tfc_array **out) {
  if (out)
    *out = nullptr;
  if (!out || rank < 0 || rank > 64 || (rank > 0 && !shape))
    return makeStatus(TFC_INVALID_ARGUMENT,
                      "tfc_array_create: invalid arguments");
  if (!tfc::isValidDType(dtype))
    return makeStatus(TFC_INVALID_ARGUMENT, "tfc_array_create: invalid dtype " +
                                                std::to_string(dtype));
  return guard([&]() -> tfc_status {
    auto array = std::make_unique<tfc_array>();
    array->dtype = dtype;
    array->shape.assign(shape, shape + rank);
    std::optional<size_t> nbytes =
        tfc::tensorBytes(array->shape, tfc::dtypeSize(DType(dtype)));
    if (!nbytes)
      return makeStatus(TFC_INVALID_ARGUMENT,
                        "tfc_array_create: invalid shape " +
                            tfc::shapeString(array->shape));
    if (!array->data.allocate(*nbytes))
      return makeStatus(TFC_OUT_OF_MEMORY,
                        "tfc_array_create: out of memory for " +
                            std::to_string(*nbytes) + " bytes");
    *out = array.release();
    return nullptr;
  });
}

tfc_status tfc_array_read_npy(const char *path, tfc_array **out) {
  if (out)
    *out = nullptr;
  if (!path || !out)
    return makeStatus(TFC_INVALID_ARGUMENT,
                      "tfc_array_read_npy: path and out must not be NULL");
  return guard([&]() -> tfc_status {
    if (!fileExists(path))
      return makeStatus(TFC_NOT_FOUND,
                        std::string(path) + ": " + std::strerror(ENOENT));
    tfc::NpyArray npy;
    std::string error;
    if (!tfc::readNpy(path, npy, error))
      return makeStatus(TFC_BAD_FORMAT, error);
    auto array = std::make_unique<tfc_array>();
    array->dtype = int32_t(npy.dtype);
    array->shape = std::move(npy.shape);
    array->data = std::move(npy.data);
    *out = array.release();
    return nullptr;
  });
}

tfc_status tfc_array_write_npy(const tfc_array *array, const char *path) {
  if (!array || !path)
    return makeStatus(TFC_INVALID_ARGUMENT,
                      "tfc_array_write_npy: array and path must not be NULL");
  return guard([&]() -> tfc_status {
    std::string error;
    if (!tfc::writeNpy(path, DType(array->dtype), array->shape,
                       array->data.data(), error))
      return makeStatus(TFC_IO_ERROR, error);
    return nullptr;
  });
}

void tfc_array_destroy(tfc_array *array) { delete array; }

int32_t tfc_array_dtype(const tfc_array *array) {
  return array ? array->dtype : -1;
}

int32_t tfc_array_rank(const tfc_array *array) {
  return array ? int32_t(array->shape.size()) : 0;
}

const int64_t *tfc_array_shape(const tfc_array *array) {
  return array ? array->shape.data() : nullptr;
}

void *tfc_array_data(tfc_array *array) {
  return array ? array->data.data() : nullptr;
}

size_t tfc_array_nbytes(const tfc_array *array) {
  return array ? array->data.size() : 0;
}

/*===-- GPU ---------------------------------------------------------------===*/

tfc_status tfc_device_describe(char *buf, size_t n) {
  if (!buf || n == 0)
    return makeStatus(TFC_INVALID_ARGUMENT,
                      "tfc_device_describe: buf must hold at least one byte");
  buf[0] = '\0';
  return guard([&]() -> tfc_status {
    std::string error;
    const tfc::cuda::Driver *driver = tfc::cuda::Driver::get(&error);
    if (!driver)
      return makeStatus(TFC_FAILED_PRECONDITION, error);
    std::snprintf(buf, n, "%s", driver->description().c_str());
    return nullptr;
  });
}

/*===-- Threads -----------------------------------------------------------===*/

int tfc_set_num_threads(int32_t num_threads) {
  if (num_threads <= 0)
    return 0;
  requestedThreads.store(num_threads);
  setenv("OMP_NUM_THREADS", std::to_string(num_threads).c_str(), 1);
  return applyThreads(RTLD_DEFAULT) ? 1 : 0;
}

} // extern "C"
