//===- Weights.cpp - Binding a model's weights ----------------------------===//
//
// tfc_model_bind_weights (a safetensors file's tensors, or those a model
// compiled from ONNX finds in its own file; in place or copied, those of
// another float type converted), tfc_model_bind_weight and
// tfc_model_weight_data; the deferred conversions and the release of the
// weights file's pages after the first run.
//
//===----------------------------------------------------------------------===//

#include "ModelFileWeights.h"
#include "ModelImpl.h"
#include "Parallel.h"

#include "tfc/runtime/dtype.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sys/stat.h>
#include <system_error>
#include <thread>

using namespace tfc::rt;

namespace {

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

} // namespace

namespace tfc::rt {

tfc_status convertPendingWeights(tfc_model *model, int32_t only) {
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
  int32_t asked = requestedThreads();
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

void releaseWeightPages(tfc_model *model) {
  if (!model->weightsFile || model->keepWeightPages ||
      model->weightPagesReleased.exchange(true))
    return;
  model->weightsFile->releasePages();
}

void detachWeight(tfc_model *model, int32_t index) {
  // The kernels drop what they derived from the weights (dropPackedFile
  // calls weightsChanged), and this one is no conversion of the file's.
  dropPackedFile(model);
  auto &pending = model->pendingConversions;
  pending.erase(std::remove_if(pending.begin(), pending.end(),
                               [&](const auto &p) { return p.first == index; }),
                pending.end());
  model->converted[size_t(index)] = false;
  model->weightsIdentity.clear();
}

} // namespace tfc::rt

extern "C" {

tfc_status tfc_model_bind_weights(tfc_model *model,
                                  const char *safetensors_path) {
  if (!model || !safetensors_path)
    return makeStatus(
        TFC_INVALID_ARGUMENT,
        "tfc_model_bind_weights: model and path must not be NULL");
  return onModel(model, "tfc_model_bind_weights", true, [&]() -> tfc_status {
    std::string path = safetensors_path;
    if (tfc_status s = checkPath(safetensors_path, "weights file " + path))
      return s;
    std::string error;
    std::unique_ptr<tfc::SafetensorsFile> file;
    if (model->weightFile) {
      std::vector<const tfc_tensor_desc *> weights;
      for (int32_t arg : model->weightArgs)
        weights.push_back(&model->manifest->args[arg]);
      file = tfc::openModelFileWeights(path, *model->weightFile, weights,
                                       model->path, error);
    } else {
      file = tfc::SafetensorsFile::open(path, error);
    }
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
      // A tensor-parallel model's split weight: this rank's part.
      if (weightSplit(model, arg)) {
        const void *data = nullptr;
        tfc::AlignedBuffer copy;
        if (tfc_status s =
                bindWeightPart(model, arg, *tensor, path, data, copy))
          return s;
        converted.push_back(false);
        pointers.push_back(data);
        if (copy.data())
          copies.push_back(std::move(copy));
        continue;
      }
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
      // Compiled code reads weights with element-aligned accesses only,
      // so a tensor aligned to its element size is used in place, without
      // a copy; so is one at any address that only the matmul kernel reads
      // as it packs it (abi.h, tfc_model_weight_alignment). A GPU model's
      // weights are copied to the device from wherever they are.
      size_t alignment = std::max<size_t>(tfc_dtype_size(desc.dtype), 1);
      if (model->weightAlignment && model->weightAlignment[arg] > 0)
        alignment = size_t(model->weightAlignment[arg]);
      bool aligned = reinterpret_cast<uintptr_t>(tensor->data) % alignment == 0;
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
    model->keepWeightPages = keepWeightPagesRequested();
    trackPackedWeights(model, *file, pointers);
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

tfc_status tfc_model_bind_weight(tfc_model *model, int32_t index,
                                 const void *data) {
  return bindArgument(model, TFC_ROLE_WEIGHT, index, data);
}

} // extern "C"
