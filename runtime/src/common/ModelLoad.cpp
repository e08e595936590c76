//===- ModelLoad.cpp - Loading a model and its signature ------------------===//
//
// tfc_model_load (a private copy of the library opened, its manifest and
// variants checked, a GPU model's device side made), tfc_model_destroy and
// the accessors of the model's signature.
//
//===----------------------------------------------------------------------===//

#include "ModelImpl.h"
#include "Parallel.h"

#include "tfc/runtime/dtype.h"

#include "ElfCheck.h"
#include "cuda/Failure.h"
#include "cuda/Modules.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include <link.h>
#include <mutex>

using tfc::DType;
using namespace tfc::rt;

namespace {

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

} // namespace

namespace tfc::rt {

void destroyModel(tfc_model *model) {
  void *handle = model->handle;
  // The library's copy can stay loaded after dlclose (threads that ran it
  // hold its thread-local storage): what it packed from these weights (or
  // adopted from a file about to be unmapped) must not outlive them.
  if (model->weightsChanged)
    model->weightsChanged();
  std::unique_ptr<tfc::LibraryCopy> library = std::move(model->library);
  forgetPackedWeights(model);
  delete model;
  if (handle)
    closeLibrary(handle);
}

} // namespace tfc::rt

extern "C" {

tfc_status tfc_model_load(const char *path, tfc_model **out) {
  if (out)
    *out = nullptr;
  if (!path || !out)
    return makeStatus(TFC_INVALID_ARGUMENT,
                      "tfc_model_load: path and out must not be NULL");
  return guard([&]() -> tfc_status {
    std::string file = path;
    if (tfc_status s = checkPath(path, "model " + file))
      return s;
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
    // The manifest as compiled (abi.h, "Manifest hash"; hand-written
    // libraries may have none): one changed since would hand the code
    // buffers it does not expect.
    if (auto *hash = static_cast<const uint64_t *>(
            ownSymbol(handle, "tfc_model_manifest_hash"))) {
      uint64_t now = tfc_manifest_hash(manifest);
      if (*hash != now) {
        char text[96];
        std::snprintf(text, sizeof(text), "hash %016llx, compiled as %016llx",
                      static_cast<unsigned long long>(now),
                      static_cast<unsigned long long>(*hash));
        return fail(TFC_BAD_FORMAT,
                    "model " + file +
                        ": its manifest is not the one it was compiled with (" +
                        text +
                        "): the library was changed after tfc-compile "
                        "made it");
      }
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
      model->variantList = variants;
      model->variantCount = count;
    }
    // A tensor-parallel model joins the MPI job of its ranks (Parallel.h).
    if (auto parallelFn = reinterpret_cast<tfc_model_tensor_parallel_fn>(
            ownSymbol(handle, "tfc_model_tensor_parallel")))
      if (tfc_status s = tfc::rt::joinParallel(model.get(), file, *manifest,
                                               parallelFn())) {
        closeLibrary(handle);
        return s;
      }
    applyThreads(handle);
    model->handle = handle;
    model->library = std::move(library);
    model->libraryManifest = manifest;
    model->manifest = model->variants ? &model->variants->manifest() : manifest;
    model->run = runFn;
    model->weightsChanged = reinterpret_cast<tfc_model_weights_changed_fn>(
        ownSymbol(handle, "tfc_model_weights_changed"));
    if (auto weightFile = reinterpret_cast<tfc_model_weight_file_fn>(
            ownSymbol(handle, "tfc_model_weight_file")))
      model->weightFile = weightFile();
    model->packedFormat = reinterpret_cast<tfc_model_packed_format_fn>(
        ownSymbol(handle, "tfc_model_packed_format"));
    model->packedWeights = reinterpret_cast<tfc_model_packed_weights_fn>(
        ownSymbol(handle, "tfc_model_packed_weights"));
    model->adoptPackedWeight =
        reinterpret_cast<tfc_model_adopt_packed_weight_fn>(
            ownSymbol(handle, "tfc_model_adopt_packed_weight"));
    if (!model->packedFormat || !model->adoptPackedWeight)
      model->packedWeights = nullptr;
    if (auto alignment = reinterpret_cast<tfc_model_weight_alignment_fn>(
            ownSymbol(handle, "tfc_model_weight_alignment")))
      model->weightAlignment = alignment();
    model->buffers.assign(
        size_t(manifest->num_args) + size_t(manifest->num_results), nullptr);
    model->converted.assign(model->weightArgs.size(), false);
    if (isGpu) {
      if (tfc::cuda::GpuError e = tfc::cuda::GpuModel::create(
              file, gpuModules, gpuSlots(model.get()), model->gpu))
        return fail(e.code, e.message);
      // A tensor-parallel model's all-reduces go over NCCL.
      if (model->parallel)
        if (tfc::cuda::GpuError e =
                model->gpu->joinRanks(model->rank, model->parallel->ranks))
          return fail(e.code, e.message);
    }
    *out = model.release();
    return nullptr;
  });
}

void tfc_model_destroy(tfc_model *model) {
  if (!model)
    return;
  {
    // A model with contexts goes with the last of them.
    std::lock_guard<std::mutex> lock(model->lifetime);
    if (model->contexts > 0) {
      model->destroyRequested = true;
      return;
    }
  }
  destroyModel(model);
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

} // extern "C"
