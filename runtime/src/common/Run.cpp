//===- Run.cpp - Binding a model's inputs and outputs, running it ---------===//
//
// tfc_model_bind_input and tfc_model_bind_output (and the binding all three
// tfc_model_bind_* share), tfc_model_check_input, tfc_model_invoke and
// tfc_model_time, which check and make ready the same things before they
// run the model (runPrepared).
//
//===----------------------------------------------------------------------===//

#include "ModelImpl.h"
#include "Parallel.h"

#include "tfc/runtime/dtype.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>

using namespace tfc::rt;

namespace {

/// FAILED_PRECONDITION when `file` (a SafetensorsFile or PackedWeightsFile;
/// none when null) changed since it was mapped: "model M: `what` PATH
/// changed after it was `done` (WHAT CHANGED): `advice`".
template <typename File>
tfc_status checkUnchanged(const tfc_model *model, const File *file,
                          const char *what, const char *done,
                          const char *advice) {
  if (!file)
    return nullptr;
  std::string change = file->changeSinceOpen();
  if (change.empty())
    return nullptr;
  return makeStatus(TFC_FAILED_PRECONDITION,
                    "model " + model->path + ": " + what + " " + file->path() +
                        " changed after it was " + done + " (" + change +
                        "): " + advice);
}

/// FAILED_PRECONDITION when a file the model reads its weights from in
/// place changed since it was mapped: its pages would show the new bytes
/// (or raise SIGBUS past a new end). A GPU model's weights are on the
/// device.
tfc_status checkWeightFiles(const tfc_model *model) {
  if (model->gpu)
    return nullptr;
  if (tfc_status s = checkUnchanged(model, model->weightsFile.get(),
                                    "weights file", "bound", "bind it again"))
    return s;
  return checkUnchanged(model, model->packedFile.get(), "packed weights file",
                        "loaded", "bind the weights and load it again");
}

/// FAILED_PRECONDITION naming the first unbound argument or result of
/// `buffers` (a model's or a context's, of `manifest`'s shapes).
tfc_status checkBound(const tfc_model *model, void *const *buffers,
                      const tfc_manifest *manifest) {
  auto unbound = [&](tfc_tensor_role role, size_t i, const char *advice) {
    return makeStatus(TFC_FAILED_PRECONDITION,
                      model->path + ": " + roleName(model, role, int32_t(i)) +
                          " is not bound" + advice);
  };
  for (size_t i = 0; i < model->inputArgs.size(); ++i)
    if (!buffers[model->inputArgs[i]])
      return unbound(TFC_ROLE_INPUT, i, "");
  for (size_t i = 0; i < model->weightArgs.size(); ++i)
    if (!buffers[model->weightArgs[i]])
      return unbound(TFC_ROLE_WEIGHT, i, " (bind a weights file)");
  for (int32_t i = 0; i < manifest->num_results; ++i)
    if (!buffers[size_t(manifest->num_args) + size_t(i)])
      return unbound(TFC_ROLE_OUTPUT, size_t(i), "");
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
tfc_status checkInputBounds(const tfc_model *model, void *const *buffers,
                            const tfc_manifest *manifest) {
  for (size_t i = 0; i < model->inputArgs.size(); ++i) {
    const tfc_tensor_desc &desc = manifest->args[model->inputArgs[i]];
    // Elements on the device are not read here.
    if (!desc.bounds ||
        (model->gpu && model->gpu->deviceBound(size_t(model->inputArgs[i]))))
      continue;
    const void *data = buffers[model->inputArgs[i]];
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

/// Fills every bound output of `buffers` with 0xFF bytes (NaN, -1), so
/// that an element the model does not write shows (ModelVariants::run
/// poisons its staging buffers too).
void poisonHostOutputs(void *const *buffers, const tfc_manifest *manifest) {
  size_t numArgs = size_t(manifest->num_args);
  for (int32_t i = 0; i < manifest->num_results; ++i)
    std::memset(buffers[numArgs + size_t(i)], 0xff,
                tfc_tensor_desc_nbytes(&manifest->results[i]));
}

/// Runs `body` for `call` (tfc_model_invoke, tfc_model_time) with `model`
/// held (Exclusive), once its weights files are checked, the conversions
/// not made yet made, every argument and result bound and the bounded
/// inputs checked; an error of any of these is returned instead.
template <typename Fn>
tfc_status runPrepared(tfc_model *model, const char *call, Fn &&body) {
  return onModel(model, call, false, [&]() -> tfc_status {
    if (tfc_status s =
            prepareRun(model, model->buffers.data(), model->manifest))
      return s;
    return body();
  });
}

/// One run of a CPU model on its bound buffers: a shape that runs as a
/// larger variant pads them into the variant's and cuts its outputs back.
tfc_status runOnHost(tfc_model *model) {
  return runBuffers(model, model->buffers.data(), model->variants.get());
}

} // namespace

namespace tfc::rt {

tfc_status checkArray(const tfc_model *model, int32_t index,
                      const tfc_tensor_desc &desc, int32_t dtype, int32_t rank,
                      const int64_t *shape) {
  bool dtypeOk = dtype == desc.dtype ||
                 (desc.dtype == TFC_DTYPE_BF16 && dtype == TFC_DTYPE_U16);
  bool shapeOk = rank == desc.rank &&
                 (rank == 0 || std::equal(shape, shape + rank, desc.shape));
  if (dtypeOk && shapeOk)
    return nullptr;
  return makeStatus(TFC_MISMATCH, roleName(model, TFC_ROLE_INPUT, index) +
                                      ": expected " + describe(desc) +
                                      ", got " + describe(dtype, rank, shape));
}

tfc_status checkBuffer(const char *fn, const tfc_model *model,
                       tfc_tensor_role role, int32_t index, int32_t count,
                       const void *data) {
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
  return nullptr;
}

tfc_status checkInput(const char *fn, const tfc_model *model,
                      const tfc_tensor_desc *desc, int32_t index, int32_t dtype,
                      int32_t rank, const int64_t *shape) {
  if (!model || rank < 0 || (rank > 0 && !shape))
    return makeStatus(TFC_INVALID_ARGUMENT,
                      std::string(fn) + ": invalid arguments");
  return guard([&]() -> tfc_status {
    if (!desc)
      return makeStatus(TFC_INVALID_ARGUMENT,
                        std::string(fn) + ": index " + std::to_string(index) +
                            " out of range: model " + model->path + " has " +
                            std::to_string(model->inputArgs.size()) +
                            " inputs");
    return checkArray(model, index, *desc, dtype, rank, shape);
  });
}

tfc_status prepareRun(tfc_model *model, void *const *buffers,
                      const tfc_manifest *manifest) {
  if (tfc_status s = checkWeightFiles(model))
    return s;
  if (tfc_status s = convertPendingWeights(model))
    return s;
  if (tfc_status s = checkBound(model, buffers, manifest))
    return s;
  return checkInputBounds(model, buffers, manifest);
}

tfc_status runBuffers(tfc_model *model, void **buffers,
                      tfc::ModelVariants *variants) {
  takeFailedAllocation();
  if (variants)
    variants->run(buffers);
  else
    model->run(buffers);
  // A tensor-parallel model's all-reduce that failed (Parallel.h).
  if (std::string failure = takeCollectiveFailure(); !failure.empty())
    return makeStatus(TFC_IO_ERROR, "model " + model->path + ": " + failure);
  if (size_t bytes = takeFailedAllocation())
    return makeStatus(TFC_OUT_OF_MEMORY,
                      "model " + model->path + ": out of memory for a " +
                          std::to_string(bytes) +
                          "-byte temporary: the run stopped there, its "
                          "outputs are not all written");
  return nullptr;
}

tfc_status bindArgument(tfc_model *model, tfc_tensor_role role, int32_t index,
                        const void *data) {
  const char *fn = role == TFC_ROLE_INPUT    ? "tfc_model_bind_input"
                   : role == TFC_ROLE_WEIGHT ? "tfc_model_bind_weight"
                                             : "tfc_model_bind_output";
  if (!model)
    return makeStatus(TFC_INVALID_ARGUMENT,
                      std::string(fn) + ": model must not be NULL");
  return onModel(model, fn, role == TFC_ROLE_WEIGHT, [&]() -> tfc_status {
    int32_t count = role == TFC_ROLE_INPUT    ? tfc_model_num_inputs(model)
                    : role == TFC_ROLE_WEIGHT ? tfc_model_num_weights(model)
                                              : tfc_model_num_outputs(model);
    if (tfc_status s = checkBuffer(fn, model, role, index, count, data))
      return s;
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
    if (role == TFC_ROLE_WEIGHT)
      detachWeight(model, index);
    else if (model->gpu) // replaces a device binding
      if (tfc::cuda::GpuError e = model->gpu->bindHost(slot)) {
        model->buffers[slot] = nullptr;
        return fromGpu(std::move(e));
      }
    model->buffers[slot] = const_cast<void *>(data);
    return nullptr;
  });
}

} // namespace tfc::rt

extern "C" {

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
  return checkInput("tfc_model_check_input", model,
                    tfc_model_input(model, index), index, dtype, rank, shape);
}

tfc_status tfc_model_invoke(tfc_model *model) {
  if (!model)
    return makeStatus(TFC_INVALID_ARGUMENT,
                      "tfc_model_invoke: model must not be NULL");
  return runPrepared(model, "tfc_model_invoke", [&]() -> tfc_status {
    if (model->gpu)
      return fromGpu(model->gpu->invoke(model->run, model->buffers.data()));
    if (tfc_status s = runOnHost(model))
      return s;
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
  return runPrepared(model, "tfc_model_time", [&]() -> tfc_status {
    if (model->gpu)
      return fromGpu(model->gpu->time(model->run, model->buffers.data(), warmup,
                                      runs, ms));
    // A shape that runs as a larger variant: its padding and cutting copies
    // are part of each run, and timed with it. The weights' pages are
    // dropped after the first run, outside the time of any.
    for (int32_t i = 0; i < warmup; ++i) {
      poisonHostOutputs(model->buffers.data(), model->manifest);
      if (tfc_status s = runOnHost(model))
        return s;
      releaseWeightPages(model);
    }
    for (int32_t i = 0; i < runs; ++i) {
      poisonHostOutputs(model->buffers.data(), model->manifest);
      auto start = std::chrono::steady_clock::now();
      tfc_status failed = runOnHost(model);
      std::chrono::duration<double, std::milli> elapsed =
          std::chrono::steady_clock::now() - start;
      ms[i] = elapsed.count();
      if (failed)
        return failed;
      releaseWeightPages(model);
    }
    return nullptr;
  });
}

} // extern "C"
