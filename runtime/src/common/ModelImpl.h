//===- ModelImpl.h - What the C API's files share ---------------*- C++ -*-===//
//
// The objects behind api.h's opaque handles (tfc_model, tfc_status,
// tfc_array) and the internal helpers the files implementing the C API
// share: Status.cpp (statuses, their messages, element types), ModelLoad.cpp
// (loading a model, its signature), Weights.cpp, WeightPages.cpp and
// PackedWeightFiles.cpp (its weights), Shapes.cpp (batch sizes and
// lengths), Run.cpp (binding and running), Arrays.cpp (host arrays) and
// Process.cpp (threads, the device).
//
//===----------------------------------------------------------------------===//

#ifndef TFC_RUNTIME_COMMON_MODELIMPL_H
#define TFC_RUNTIME_COMMON_MODELIMPL_H

#include "tfc/runtime/api.h"

#include "tfc/runtime/abi.h"
#include "tfc/runtime/buffer.h"
#include "tfc/runtime/safetensors.h"

#include "LibraryCopy.h"
#include "Variants.h"
#include "cuda/GpuModel.h"
#include "formats/PackedWeights.h"

#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <utility>
#include <vector>

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
  /// The library's manifest and variants (tfc_model_variants; none for a
  /// model of one shape): each context keeps its own ModelVariants of them.
  const tfc_manifest *libraryManifest = nullptr;
  const tfc_model_variant *variantList = nullptr;
  int32_t variantCount = 0;
  /// The model's live contexts (Context.cpp): while there are any, its
  /// weights are shared read-only (calls that rebind them are refused), and
  /// tfc_model_destroy leaves the model to the last context's destroy.
  std::mutex lifetime;
  int32_t contexts = 0;
  bool destroyRequested = false;
  tfc_model_weights_changed_fn weightsChanged = nullptr; // optional
  /// Where the weights lie in the model's own file (a model compiled from
  /// ONNX), else null: tfc_model_bind_weights then reads that file.
  const tfc_weight_file *weightFile = nullptr;
  /// The packed weights' entry points (abi.h): null for a model that packs
  /// none.
  tfc_model_packed_format_fn packedFormat = nullptr;
  tfc_model_packed_weights_fn packedWeights = nullptr;
  tfc_model_adopt_packed_weight_fn adoptPackedWeight = nullptr;
  /// The alignment each argument's data needs (abi.h,
  /// tfc_model_weight_alignment); null: its element size.
  const int32_t *weightAlignment = nullptr;
  std::vector<int32_t> inputArgs;  // argument index of each input
  std::vector<int32_t> weightArgs; // argument index of each weight
  std::vector<void *> buffers;     // arguments, then results
  std::unique_ptr<tfc::SafetensorsFile> weightsFile;
  /// Whether weightsFile's pages were dropped (releaseWeightPages, which
  /// runs of contexts may call at once).
  std::atomic<bool> weightPagesReleased{false};
  /// $TFC_KEEP_WEIGHT_PAGES when the weights were bound: none of the
  /// file's pages are dropped (releaseWeightPages, trackPackedWeights).
  bool keepWeightPages = false;
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
  /// A tensor-parallel model's split (abi.h) and this process's rank in
  /// its MPI job (Parallel.h); null and 0 for other models.
  const tfc_tensor_parallel *parallel = nullptr;
  int32_t rank = 0;
};

struct tfc_array {
  int32_t dtype = 0;
  std::vector<int64_t> shape;
  tfc::AlignedBuffer data;
};

namespace tfc::rt {

/// A status of `code` and `message`; a static OUT_OF_MEMORY one when it
/// cannot be allocated.
tfc_status makeStatus(tfc_status_code code, std::string message);

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

/// "'name'" ("'<null>'" for a null name).
std::string quote(const char *name);

/// "f32 [2, 3]"
std::string describe(int32_t dtype, int32_t rank, const int64_t *shape);
std::string describe(const tfc_tensor_desc &desc);

/// "input 0 'a'"
std::string roleName(const tfc_model *model, tfc_tensor_role role,
                     int32_t index);

/// Null when something is at `path` (stat succeeds); else NOT_FOUND (no
/// such file or directory) or IO_ERROR (a link loop, no permission, ...):
/// "<what>: <the system's reason>".
tfc_status checkPath(const char *path, const std::string &what);

/// Null for no error, else a status of its code and message.
tfc_status fromGpu(tfc::cuda::GpuError error);

/// Holds a model or a context for one call that runs it or changes its
/// bindings; a second such call while one is under way (from another
/// thread: each serves one call at a time) is refused rather than let to
/// race.
class Exclusive {
public:
  explicit Exclusive(tfc_model *model)
      : Exclusive(model->busy, model->path, "model ",
                  "a model serves one call at a time: load one model per "
                  "thread") {}
  /// Holds what `busy` flags: `what` and `path` name it in the refusal
  /// ("a context of model " PATH), which ends with `serves`, the advice.
  Exclusive(std::atomic<bool> &busy, const std::string &path, const char *what,
            const char *serves)
      : busy(busy), path(path), what(what), serves(serves),
        held(!busy.exchange(true)) {}
  ~Exclusive() {
    if (held)
      busy.store(false);
  }
  Exclusive(const Exclusive &) = delete;
  Exclusive &operator=(const Exclusive &) = delete;
  /// Null when held; else FAILED_PRECONDITION naming `call`.
  tfc_status refusal(const char *call) const {
    if (held)
      return nullptr;
    return makeStatus(TFC_FAILED_PRECONDITION,
                      std::string(call) + ": " + what + path +
                          " is in use by another call on another thread (" +
                          serves + ")");
  }

private:
  std::atomic<bool> &busy;
  const std::string &path;
  const char *what, *serves;
  bool held;
};

/// What a run checks and makes ready first (tfc_model_invoke,
/// tfc_model_time, tfc_context_invoke): the weights files unchanged, the
/// conversions not made yet made, every argument and result of `buffers`
/// (of `manifest`'s shapes) bound and the bounded inputs in their bounds.
tfc_status prepareRun(tfc_model *model, void *const *buffers,
                      const tfc_manifest *manifest);
/// INVALID_ARGUMENT from `fn` when `index` is not below `count` (of `role`'s
/// tensors) or `data` is NULL or not 64-byte aligned.
tfc_status checkBuffer(const char *fn, const tfc_model *model,
                       tfc_tensor_role role, int32_t index, int32_t count,
                       const void *data);
/// tfc_model_check_input and tfc_context_check_input: `desc` is input
/// `index`'s descriptor (null when out of range); INVALID_ARGUMENT for a
/// null model, a negative rank or a null shape of a positive rank.
tfc_status checkInput(const char *fn, const tfc_model *model,
                      const tfc_tensor_desc *desc, int32_t index, int32_t dtype,
                      int32_t rank, const int64_t *shape);
/// MISMATCH naming input `index` of `model` when an array of `dtype`,
/// `rank` and `shape` is not what `desc` takes (U16 passes for bf16).
tfc_status checkArray(const tfc_model *model, int32_t index,
                      const tfc_tensor_desc &desc, int32_t dtype, int32_t rank,
                      const int64_t *shape);
/// Runs a CPU model on `buffers`, through `variants` where it has them;
/// OUT_OF_MEMORY naming the size when a temporary could not be allocated
/// (the compiled code returned early: the outputs are not all written).
tfc_status runBuffers(tfc_model *model, void **buffers,
                      tfc::ModelVariants *variants);
/// The size of the last temporary the calling thread could not allocate for
/// compiled code, or 0; resets it (Allocator.cpp).
size_t takeFailedAllocation();
/// FAILED_PRECONDITION naming `call` while `model` has contexts, whose runs
/// read its weights: they are not rebound under them.
tfc_status refuseWhileContexts(tfc_model *model, const char *call);
/// Runs `body` for `call` with `model` held (Exclusive), its exceptions
/// turned into statuses (guard); with `bindsWeights`, refused while the
/// model has contexts (refuseWhileContexts).
template <typename Fn>
tfc_status onModel(tfc_model *model, const char *call, bool bindsWeights,
                   Fn &&body) {
  Exclusive exclusive(model);
  if (tfc_status s = exclusive.refusal(call))
    return s;
  if (bindsWeights)
    if (tfc_status s = refuseWhileContexts(model, call))
      return s;
  return guard(body);
}
/// Unloads `model` now (tfc_model_destroy, or the destroy of the last
/// context of a model destroyed before it).
void destroyModel(tfc_model *model);
/// Checks `size` as the batch size (`batch`) or length that `variants` (of
/// the model at `path`) would take, and takes it: INVALID_ARGUMENT or
/// OUT_OF_MEMORY as tfc_model_set_batch and tfc_model_set_length give.
/// `changed` says whether the shape changed (bindings of the old one are
/// then void).
tfc_status setVariantsShape(const std::string &path,
                            tfc::ModelVariants &variants, bool batch,
                            int64_t size, bool &changed);

/// tfc_model_bind_input, tfc_model_bind_weight and tfc_model_bind_output
/// (Run.cpp): binds the caller's `data` as the model's input, weight or
/// output `index`.
tfc_status bindArgument(tfc_model *model, tfc_tensor_role role, int32_t index,
                        const void *data);

/// Makes the converted copies tfc_model_bind_weights deferred (all, or
/// weight `only`'s): OUT_OF_MEMORY naming the tensor when one cannot be.
/// Their elements are converted in chunks on the threads tfc_set_num_threads
/// asked for (or one per CPU): the conversion reads the checkpoint's pages
/// and fills new ones, and the page faults of both run in parallel too.
tfc_status convertPendingWeights(tfc_model *model, int32_t only = -1);

/// After a CPU model's first run with weights from a file: the kernels have
/// packed (and quantized) their copies of the weights they multiply by,
/// the weights of another float type are converted, and the file's
/// bytes are read no more, so its pages are dropped from the process's
/// resident memory. The few read in place every run (embedding rows, norm
/// scales) come back from the file on the next run. A GPU model's weights
/// are on the device once bound. None with keepWeightPages.
void releaseWeightPages(tfc_model *model);

/// Whether $TFC_KEEP_WEIGHT_PAGES asks to keep the weights file's pages
/// (set, neither empty nor "0").
bool keepWeightPagesRequested();
/// Registers the weights of `model` that only the matmul kernels read
/// (tfc_model_weight_alignment 1) and that are bound in place in `file`'s
/// map (`pointers`, by weight index): once a kernel has packed one
/// (tfc_runtime_weight_packed, abi.h), its pages are dropped during the
/// run. Forgets the model's earlier ones first: call it before the file
/// they lie in is unmapped. None for a GPU model or keepWeightPages.
void trackPackedWeights(tfc_model *model, const tfc::SafetensorsFile &file,
                        const std::vector<const void *> &pointers);
/// Forgets `model`'s registered weights (before its weights file is
/// unmapped).
void forgetPackedWeights(const tfc_model *model);

/// Weight `index` is bound to a buffer of the caller's (Run.cpp's
/// bindArgument): the kernels drop what they derived from the weights, and
/// it is no conversion of the weights file's.
void detachWeight(tfc_model *model, int32_t index);

/// Unmaps the model's packed weights file, after its kernels drop the
/// copies they adopted from it; the weights bound to its converted bytes
/// go back to being converted on first need.
void dropPackedFile(tfc_model *model);

/// The most threads tfc_set_num_threads takes: 8 per core.
int32_t maxThreads();
/// How many threads tfc_set_num_threads asked for; 0 before it did.
int32_t requestedThreads();

/// Calls omp_set_num_threads as found from `scope` (RTLD_DEFAULT, or a model's
/// handle: a model opened RTLD_LOCAL keeps its OpenMP runtime out of the
/// global scope).
bool applyThreads(void *scope);

} // namespace tfc::rt

#endif // TFC_RUNTIME_COMMON_MODELIMPL_H
