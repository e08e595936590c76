//===- TensorMaps.cpp - tfc_gpu_tensor_map: TMA descriptors for kernels ---===//
//
// Generated host code asks for the device address of a CUtensorMap before a
// launch whose kernel loads tiles with cp.async.bulk.tensor; the maps are
// encoded by the driver and cached in device memory (TensorMapCache.h).
//
//===----------------------------------------------------------------------===//

#include "tfc/runtime/abi.h"
#include "tfc/runtime/api.h"

#include "CudaDriver.h"
#include "Failure.h"
#include "GpuGraphs.h"
#include "TensorMapCache.h"

#include <iterator>
#include <string>

using namespace tfc::cuda;

namespace {

/// The driver as the cache's device.
class DriverDevice final : public TensorMapDevice {
public:
  explicit DriverDevice(const Driver &driver) : driver_(driver) {}

  CUresult encode(CUtensorMap *map, const TensorMapKey &key) override {
    const cuuint64_t dims[3] = {cuuint64_t(key.dims[0]),
                                cuuint64_t(key.dims[1]),
                                cuuint64_t(key.dims[2])};
    const cuuint64_t strides[2] = {cuuint64_t(key.strides[0]),
                                   cuuint64_t(key.strides[1])};
    const cuuint32_t box[3] = {cuuint32_t(key.box[0]), cuuint32_t(key.box[1]),
                               cuuint32_t(key.box[2])};
    const cuuint32_t elementStrides[3] = {1, 1, 1};
    return driver_.api().cuTensorMapEncodeTiled(
        map, key.dataType, 3, reinterpret_cast<void *>(key.base), dims, strides,
        box, elementStrides, kTensorMapInterleaveNone, key.swizzle,
        kTensorMapL2Promotion128B, kTensorMapFloatOobFillNone);
  }
  CUresult allocate(CUdeviceptr *ptr, size_t bytes) override {
    return driver_.api().cuMemAlloc(ptr, bytes);
  }
  CUresult upload(CUdeviceptr dst, const CUtensorMap *map) override {
    return driver_.api().cuMemcpyAsync(
        dst, CUdeviceptr(reinterpret_cast<uintptr_t>(map)), sizeof(*map),
        driver_.stream());
  }
  CUresult synchronize() override {
    return driver_.api().cuStreamSynchronize(driver_.stream());
  }

private:
  const Driver &driver_;
};

/// "f16": CUtensorMapDataType in words.
std::string dataTypeName(int32_t dataType) {
  static const char *const kNames[] = {
      "u8",  "u16", "u32",  "i32",       "u64",  "i64",       "f16",
      "f32", "f64", "bf16", "f32 (ftz)", "tf32", "tf32 (ftz)"};
  if (dataType >= 0 && dataType < int32_t(std::size(kNames)))
    return kNames[dataType];
  return "dataType " + std::to_string(dataType);
}

/// "128-byte swizzle": CUtensorMapSwizzle in words.
std::string swizzleName(int32_t swizzle) {
  if (swizzle == 0)
    return "no swizzle";
  if (swizzle >= 1 && swizzle <= 3)
    return std::to_string(16 << swizzle) + "-byte swizzle";
  return "swizzle " + std::to_string(swizzle);
}

/// "a 64x1024x32 f16 tensor (strides 128, 131072 bytes; box 64x128x1;
/// 128-byte swizzle)".
std::string describe(const TensorMapKey &key) {
  return "a " + std::to_string(key.dims[0]) + "x" +
         std::to_string(key.dims[1]) + "x" + std::to_string(key.dims[2]) + " " +
         dataTypeName(key.dataType) + " tensor (strides " +
         std::to_string(key.strides[0]) + ", " +
         std::to_string(key.strides[1]) + " bytes; box " +
         std::to_string(key.box[0]) + "x" + std::to_string(key.box[1]) + "x" +
         std::to_string(key.box[2]) + "; " + swizzleName(key.swizzle) + ")";
}

void recordCacheFailure(const Driver &driver, const TensorMapKey &key,
                        const TensorMapError &error) {
  switch (error.step) {
  case TensorMapStep::Encode:
    recordFailure(&driver, error.result,
                  "cuTensorMapEncodeTiled failed for " + describe(key));
    return;
  case TensorMapStep::Allocate:
    recordFailure(&driver, error.result,
                  "tfc_gpu_tensor_map: cuMemAlloc_v2 failed (" +
                      std::to_string(error.bytes) + " bytes of tensor maps)");
    return;
  case TensorMapStep::Upload:
    recordFailure(&driver, error.result,
                  "tfc_gpu_tensor_map: cuMemcpyAsync of the tensor map "
                  "failed for " +
                      describe(key));
    return;
  case TensorMapStep::Synchronize:
    recordFailure(&driver, error.result,
                  "tfc_gpu_tensor_map: cuStreamSynchronize failed (before "
                  "reusing a tensor map's slot)");
    return;
  }
}

} // namespace

extern "C" {

TFC_API void *tfc_gpu_tensor_map(void *base, int32_t dataType, int64_t dim0,
                                 int64_t dim1, int64_t dim2, int64_t stride1,
                                 int64_t stride2, int32_t box0, int32_t box1,
                                 int32_t box2, int32_t swizzle) {
  return shielded("tfc_gpu_tensor_map", [&]() -> void * {
    // As for launches: the failed call's NULL must not reach a kernel, and
    // the launch that would use this map is skipped anyway.
    if (scopeFailed())
      return nullptr;
    // The cache reuses slots by address across runs, and its uploads come
    // from host memory: no graph holds them. The run goes kernel by kernel.
    if (Capture *capture = activeCapture()) {
      capture->abandoned = "the model uses TMA tensor maps";
      return nullptr;
    }
    const Driver *driver = activeDriver();
    if (!driver)
      return nullptr;
    if (!driver->api().cuTensorMapEncodeTiled) {
      recordFailure(kErrorNotSupported,
                    "tfc_gpu_tensor_map: this CUDA driver has no "
                    "cuTensorMapEncodeTiled (TMA needs CUDA 12 or newer)");
      return nullptr;
    }
    TensorMapKey key;
    key.base = reinterpret_cast<uintptr_t>(base);
    key.dataType = dataType;
    key.swizzle = swizzle;
    key.dims[0] = dim0;
    key.dims[1] = dim1;
    key.dims[2] = dim2;
    key.strides[0] = stride1;
    key.strides[1] = stride2;
    key.box[0] = box0;
    key.box[1] = box1;
    key.box[2] = box2;
    DriverDevice device(*driver);
    TensorMapError error;
    CUdeviceptr map = TensorMapCache::process().get(device, key, &error);
    if (!map)
      recordCacheFailure(*driver, key, error);
    return reinterpret_cast<void *>(uintptr_t(map));
  });
}

} // extern "C"
