//===- DeviceTensors.cpp - Device tensors, device bindings, CUDA graphs ---===//
//
// tfc_device_tensor (a dense tensor in the runtime's device memory), the
// binding of an nvptx model's inputs and outputs to device memory
// (tfc_model_bind_*_tensor, tfc_model_bind_*_device), and the switch and
// counters of the model's CUDA graphs (cuda/GpuGraphs.h).
//
//===----------------------------------------------------------------------===//

#include "ModelImpl.h"

#include "cuda/DeviceCopies.h"

#include <algorithm>
#include <limits>

using namespace tfc::rt;
using tfc::cuda::CUdeviceptr;
using tfc::cuda::CUresult;
using tfc::cuda::Driver;

struct tfc_device_tensor {
  const Driver *driver = nullptr;
  int32_t dtype = 0;
  std::vector<int64_t> shape;
  size_t nbytes = 0;
  CUdeviceptr ptr = 0;
};

namespace {

/// INTERNAL (OUT_OF_MEMORY) naming `fn` and the driver call that failed
/// (`what` after it: the size of an allocation).
tfc_status driverFailure(const Driver &driver, const char *fn,
                         tfc::cuda::CallFailure failed,
                         const std::string &what = "") {
  return makeStatus(failed.result == tfc::cuda::kErrorOutOfMemory
                        ? TFC_OUT_OF_MEMORY
                        : TFC_INTERNAL,
                    std::string(fn) + ": " + failed.call + " failed" + what +
                        ": " + driver.errorText(failed.result));
}

/// Copies and waits (tfc::cuda::copyAndWait), a failure naming `fn`.
tfc_status copyAndWait(const Driver &driver, const char *fn, CUdeviceptr dst,
                       CUdeviceptr src, size_t nbytes) {
  if (tfc::cuda::CallFailure failed =
          tfc::cuda::copyAndWait(driver, dst, src, nbytes))
    return driverFailure(driver, fn, failed);
  return nullptr;
}

/// INVALID_ARGUMENT unless [offset, offset + nbytes) lies in `tensor`.
tfc_status checkRange(const char *fn, const tfc_device_tensor *tensor,
                      size_t offset, size_t nbytes) {
  if (!tensor)
    return makeStatus(TFC_INVALID_ARGUMENT,
                      std::string(fn) + ": the tensor is NULL");
  if (offset > tensor->nbytes || nbytes > tensor->nbytes - offset)
    return makeStatus(TFC_INVALID_ARGUMENT,
                      std::string(fn) + ": bytes [" + std::to_string(offset) +
                          ", " + std::to_string(offset) + " + " +
                          std::to_string(nbytes) + ") lie outside the " +
                          std::to_string(tensor->nbytes) +
                          "-byte device tensor");
  return nullptr;
}

/// INVALID_ARGUMENT unless `height` rows of `width` bytes, `pitch` apart
/// from byte `offset`, lie in `tensor` (`which`: "destination").
tfc_status checkRows(const char *fn, const char *which,
                     const tfc_device_tensor *tensor, size_t offset,
                     size_t pitch, size_t width, size_t height) {
  if (!tensor)
    return makeStatus(TFC_INVALID_ARGUMENT,
                      std::string(fn) + ": the " + which + " tensor is NULL");
  std::string rows = std::string(fn) + ": " + which + " rows of " +
                     std::to_string(width) + " bytes, pitch " +
                     std::to_string(pitch);
  if (height > 1 && width > pitch)
    return makeStatus(TFC_INVALID_ARGUMENT,
                      rows + ": the width exceeds the pitch");
  if (height == 0 || width == 0)
    return checkRange(fn, tensor, offset, 0);
  const size_t max = std::numeric_limits<size_t>::max();
  size_t rest = tensor->nbytes - std::min(offset, tensor->nbytes);
  bool fits = offset <= tensor->nbytes && width <= rest &&
              (height - 1 <= (max - width) / std::max<size_t>(pitch, 1)) &&
              (height - 1) * pitch + width <= rest;
  if (!fits)
    return makeStatus(TFC_INVALID_ARGUMENT,
                      rows + ", " + std::to_string(height) +
                          (height == 1 ? " row" : " rows") + " from byte " +
                          std::to_string(offset) + " lie outside the " +
                          std::to_string(tensor->nbytes) +
                          "-byte device tensor");
  return nullptr;
}

CUdeviceptr at(const tfc_device_tensor *tensor, size_t offset) {
  return tensor->ptr + offset;
}

/// tfc_device_tensor_copy_from_host (`toDevice`) and copy_to_host.
tfc_status hostCopy(const char *fn, const tfc_device_tensor *tensor,
                    size_t offset, void *host, size_t nbytes, bool toDevice) {
  if (tfc_status s = checkRange(fn, tensor, offset, nbytes))
    return s;
  if (!host)
    return makeStatus(TFC_INVALID_ARGUMENT,
                      std::string(fn) + ": the host buffer is NULL");
  CUdeviceptr device = at(tensor, offset);
  CUdeviceptr hostPtr = CUdeviceptr(reinterpret_cast<uintptr_t>(host));
  return guard([&] {
    return copyAndWait(*tensor->driver, fn, toDevice ? device : hostPtr,
                       toDevice ? hostPtr : device, nbytes);
  });
}

/// Runs `body` (returning a status) for `fn` on `model` held (onModel):
/// FAILED_PRECONDITION for a cpu model, "... is a cpu model: `refusal`".
template <typename Fn>
tfc_status onGpu(const char *fn, tfc_model *model, const char *refusal,
                 Fn &&body) {
  if (!model)
    return makeStatus(TFC_INVALID_ARGUMENT,
                      std::string(fn) + ": model must not be NULL");
  return onModel(model, fn, false, [&]() -> tfc_status {
    if (!model->gpu)
      return makeStatus(TFC_FAILED_PRECONDITION,
                        std::string(fn) + ": model " + model->path +
                            " is a cpu model: " + refusal);
    return body(*model->gpu);
  });
}

/// Binds input or output `index` of `model` to device memory at `ptr`
/// said to hold a `dtype` tensor of `shape`; `whose` ("the device
/// tensor's ") prefixes the type in a mismatch.
tfc_status bindDevice(const char *fn, tfc_model *model, tfc_tensor_role role,
                      int32_t index, CUdeviceptr ptr, int32_t dtype,
                      int32_t rank, const int64_t *shape, const char *whose) {
  if (rank < 0 || (rank > 0 && !shape))
    return makeStatus(TFC_INVALID_ARGUMENT,
                      std::string(fn) + ": invalid arguments");
  const char *refusal = "device buffers bind to nvptx models only";
  return onGpu(fn, model, refusal, [&](tfc::cuda::GpuModel &gpu) {
    bool input = role == TFC_ROLE_INPUT;
    int32_t count =
        input ? tfc_model_num_inputs(model) : tfc_model_num_outputs(model);
    if (tfc_status s = checkBuffer(fn, model, role, index, count,
                                   reinterpret_cast<void *>(uintptr_t(ptr))))
      return s;
    const tfc_tensor_desc &desc = input ? *tfc_model_input(model, index)
                                        : *tfc_model_output(model, index);
    bool dtypeOk = dtype == desc.dtype ||
                   (desc.dtype == TFC_DTYPE_BF16 && dtype == TFC_DTYPE_U16);
    bool shapeOk =
        rank == desc.rank && std::equal(shape, shape + rank, desc.shape);
    if (!dtypeOk || !shapeOk)
      return makeStatus(TFC_MISMATCH,
                        model->path + ": " + roleName(model, role, index) +
                            ": expected " + describe(desc) + ", got " + whose +
                            describe(dtype, rank, shape));
    size_t slot = input ? size_t(model->inputArgs[index])
                        : size_t(model->manifest->num_args) + size_t(index);
    gpu.bindDevice(slot, ptr);
    model->buffers[slot] = reinterpret_cast<void *>(uintptr_t(ptr));
    return tfc_status(nullptr);
  });
}

tfc_status bindTensor(const char *fn, tfc_model *model, tfc_tensor_role role,
                      int32_t index, const tfc_device_tensor *tensor) {
  if (!tensor)
    return makeStatus(TFC_INVALID_ARGUMENT,
                      std::string(fn) + ": the tensor is NULL");
  return bindDevice(fn, model, role, index, tensor->ptr, tensor->dtype,
                    int32_t(tensor->shape.size()), tensor->shape.data(),
                    "the device tensor's ");
}

/// What the calls on a model's CUDA graphs refuse a cpu model with.
const char *const kGraphsRefusal = "CUDA graphs are for nvptx models";

} // namespace

extern "C" {

tfc_status tfc_device_tensor_create(int32_t dtype, int32_t rank,
                                    const int64_t *shape,
                                    tfc_device_tensor **out) {
  const char *fn = "tfc_device_tensor_create";
  if (!out || rank < 0 || (rank > 0 && !shape))
    return makeStatus(TFC_INVALID_ARGUMENT,
                      std::string(fn) + ": invalid arguments");
  *out = nullptr;
  return guard([&]() -> tfc_status {
    size_t element = tfc_dtype_size(dtype);
    if (element == 0)
      return makeStatus(TFC_INVALID_ARGUMENT, std::string(fn) +
                                                  ": unknown dtype " +
                                                  std::to_string(dtype));
    size_t nbytes = element;
    for (int32_t i = 0; i < rank; ++i) {
      if (shape[i] < 0 ||
          (shape[i] > 0 &&
           nbytes > std::numeric_limits<size_t>::max() / size_t(shape[i])))
        return makeStatus(TFC_INVALID_ARGUMENT,
                          std::string(fn) + ": invalid shape " +
                              describe(dtype, rank, shape));
      nbytes *= size_t(shape[i]);
    }
    std::string error;
    const Driver *driver = Driver::get(&error);
    if (!driver)
      return makeStatus(TFC_FAILED_PRECONDITION,
                        std::string(fn) + ": " + error);
    auto tensor = std::make_unique<tfc_device_tensor>();
    tensor->driver = driver;
    tensor->dtype = dtype;
    tensor->shape.assign(shape, shape + rank);
    tensor->nbytes = nbytes;
    // An empty tensor still gets an address to bind.
    if (tfc::cuda::CallFailure failed =
            tfc::cuda::allocateZeroed(*driver, nbytes, &tensor->ptr))
      return driverFailure(*driver, fn, failed,
                           " (" + std::to_string(nbytes) + " bytes for " +
                               describe(dtype, rank, shape) + ")");
    *out = tensor.release();
    return nullptr;
  });
}

void tfc_device_tensor_destroy(tfc_device_tensor *tensor) {
  if (!tensor)
    return;
  tfc::cuda::releaseAfterStream(*tensor->driver, tensor->ptr);
  delete tensor;
}

int32_t tfc_device_tensor_dtype(const tfc_device_tensor *tensor) {
  return tensor ? tensor->dtype : -1;
}

int32_t tfc_device_tensor_rank(const tfc_device_tensor *tensor) {
  return tensor ? int32_t(tensor->shape.size()) : -1;
}

const int64_t *tfc_device_tensor_shape(const tfc_device_tensor *tensor) {
  return tensor ? tensor->shape.data() : nullptr;
}

size_t tfc_device_tensor_nbytes(const tfc_device_tensor *tensor) {
  return tensor ? tensor->nbytes : 0;
}

uint64_t tfc_device_tensor_pointer(const tfc_device_tensor *tensor) {
  return tensor ? uint64_t(tensor->ptr) : 0;
}

tfc_status tfc_device_tensor_copy_from_host(tfc_device_tensor *tensor,
                                            size_t offset, const void *host,
                                            size_t nbytes) {
  return hostCopy("tfc_device_tensor_copy_from_host", tensor, offset,
                  const_cast<void *>(host), nbytes, /*toDevice=*/true);
}

tfc_status tfc_device_tensor_copy_to_host(const tfc_device_tensor *tensor,
                                          size_t offset, void *host,
                                          size_t nbytes) {
  return hostCopy("tfc_device_tensor_copy_to_host", tensor, offset, host,
                  nbytes, /*toDevice=*/false);
}

tfc_status tfc_device_tensor_copy(tfc_device_tensor *dst, size_t dst_offset,
                                  const tfc_device_tensor *src,
                                  size_t src_offset, size_t nbytes) {
  const char *fn = "tfc_device_tensor_copy";
  if (tfc_status s = checkRange(fn, dst, dst_offset, nbytes))
    return s;
  if (tfc_status s = checkRange(fn, src, src_offset, nbytes))
    return s;
  return guard([&] {
    return copyAndWait(*dst->driver, fn, at(dst, dst_offset),
                       at(src, src_offset), nbytes);
  });
}

tfc_status tfc_device_tensor_copy_2d(tfc_device_tensor *dst, size_t dst_offset,
                                     size_t dst_pitch,
                                     const tfc_device_tensor *src,
                                     size_t src_offset, size_t src_pitch,
                                     size_t width_bytes, size_t height) {
  const char *fn = "tfc_device_tensor_copy_2d";
  if (tfc_status s = checkRows(fn, "destination", dst, dst_offset, dst_pitch,
                               width_bytes, height))
    return s;
  if (tfc_status s = checkRows(fn, "source", src, src_offset, src_pitch,
                               width_bytes, height))
    return s;
  return guard([&] {
    if (tfc::cuda::CallFailure failed = tfc::cuda::copy2dAndWait(
            *dst->driver, at(dst, dst_offset), dst_pitch, at(src, src_offset),
            src_pitch, width_bytes, height))
      return driverFailure(*dst->driver, fn, failed);
    return tfc_status(nullptr);
  });
}

tfc_status tfc_model_bind_input_tensor(tfc_model *model, int32_t index,
                                       const tfc_device_tensor *tensor) {
  return bindTensor("tfc_model_bind_input_tensor", model, TFC_ROLE_INPUT, index,
                    tensor);
}

tfc_status tfc_model_bind_output_tensor(tfc_model *model, int32_t index,
                                        tfc_device_tensor *tensor) {
  return bindTensor("tfc_model_bind_output_tensor", model, TFC_ROLE_OUTPUT,
                    index, tensor);
}

tfc_status tfc_model_bind_input_device(tfc_model *model, int32_t index,
                                       uint64_t device_ptr, int32_t dtype,
                                       int32_t rank, const int64_t *shape) {
  return bindDevice("tfc_model_bind_input_device", model, TFC_ROLE_INPUT, index,
                    CUdeviceptr(device_ptr), dtype, rank, shape, "");
}

tfc_status tfc_model_bind_output_device(tfc_model *model, int32_t index,
                                        uint64_t device_ptr, int32_t dtype,
                                        int32_t rank, const int64_t *shape) {
  return bindDevice("tfc_model_bind_output_device", model, TFC_ROLE_OUTPUT,
                    index, CUdeviceptr(device_ptr), dtype, rank, shape, "");
}

tfc_status tfc_model_set_cuda_graphs(tfc_model *model, int32_t enable) {
  return onGpu("tfc_model_set_cuda_graphs", model, kGraphsRefusal,
               [&](tfc::cuda::GpuModel &gpu) {
                 gpu.graphs().setEnabled(enable != 0);
                 return tfc_status(nullptr);
               });
}

tfc_status tfc_model_get_cuda_graph_stats(tfc_model *model,
                                          tfc_cuda_graph_stats *stats) {
  if (!stats)
    return makeStatus(TFC_INVALID_ARGUMENT,
                      "tfc_model_get_cuda_graph_stats: stats is NULL");
  return onGpu("tfc_model_get_cuda_graph_stats", model, kGraphsRefusal,
               [&](tfc::cuda::GpuModel &gpu) {
                 *stats = gpu.graphs().stats();
                 return tfc_status(nullptr);
               });
}

const char *tfc_model_cuda_graphs_off_reason(tfc_model *model) {
  if (!model || !model->gpu)
    return "";
  // Not while another thread's call runs the model.
  Exclusive exclusive(model);
  if (tfc_status refused = exclusive.refusal("")) {
    tfc_status_free(refused);
    return "";
  }
  tfc::cuda::GpuModel &gpu = *model->gpu;
  gpu.offReason = gpu.graphs().reason();
  return gpu.offReason.c_str();
}

} // extern "C"
