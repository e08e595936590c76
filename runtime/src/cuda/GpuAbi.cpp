//===- GpuAbi.cpp - The mgpu* functions generated GPU host code calls -----===//
//
// MLIR's gpu-to-llvm lowering turns gpu.launch_func, gpu.alloc, gpu.memcpy
// and friends into calls of these C functions (the ABI of LLVM's
// CudaRuntimeWrappers). They return no status: failures are recorded
// (Failure.h) and reported by the tfc_model_* call that ran the model.
//
//===----------------------------------------------------------------------===//

#include "tfc/runtime/abi.h"
#include "tfc/runtime/api.h"

#include "CudaDriver.h"
#include "DeviceAllocator.h"
#include "Failure.h"
#include "GpuGraphs.h"
#include "Modules.h"

#include <climits>
#include <cstring>
#include <string>

using namespace tfc::cuda;

namespace {

CUstream asStream(void *stream) { return static_cast<CUstream>(stream); }
CUevent asEvent(void *event) { return static_cast<CUevent>(event); }
CUdeviceptr asDevice(const void *ptr) {
  return CUdeviceptr(reinterpret_cast<uintptr_t>(ptr));
}

bool fitsUnsigned(intptr_t value) {
  return value >= 0 && uintmax_t(value) <= UINT_MAX;
}

/// Calls a driver entry point: recorded when it fails.
template <typename Fn> void driverCall(const char *call, Fn &&invoke) {
  const Driver *driver = activeDriver();
  if (!driver)
    return;
  if (CUresult r = invoke(driver->api()))
    recordFailure(driver, r, std::string(call) + " failed");
}

/// The mgpu* function `fn` (shielded) that only orders: its driverCall,
/// never skipped.
template <typename Fn>
void syncCall(const char *fn, const char *call, Fn &&invoke) {
  shielded(fn, [&] { driverCall(call, invoke); });
}

/// The mgpu* function `fn` (shielded) that waits for the stream: its
/// driverCall, skipped while the run is captured into a graph (the stream
/// runs nothing then, and its one queue orders the graph's work).
template <typename Fn>
void waitCall(const char *fn, const char *call, Fn &&invoke) {
  shielded(fn, [&] {
    if (!activeCapture())
      driverCall(call, invoke);
  });
}

/// The mgpu* function `fn` (shielded) that touches `count` elements of
/// memory: its driverCall, skipped for none and once the run has failed.
template <typename Fn>
void memoryCall(const char *fn, const char *call, size_t count, Fn &&invoke) {
  shielded(fn, [&] {
    if (count != 0 && !scopeFailed())
      driverCall(call, invoke);
  });
}

} // namespace

extern "C" {

TFC_API void *mgpuModuleLoad(void *data, size_t gpuBlobSize) {
  return shielded("mgpuModuleLoad", [&]() -> void * {
    Module *module = registerModule(data, gpuBlobSize);
    if (!module)
      recordFailure(kErrorOutOfMemory, "mgpuModuleLoad: out of host memory");
    return module;
  });
}

TFC_API void *mgpuModuleLoadJIT(void *data, int optLevel) {
  return shielded("mgpuModuleLoadJIT", [&]() -> void * {
    size_t size = data ? std::strlen(static_cast<const char *>(data)) + 1 : 0;
    Module *module = registerModule(data, size, /*isPtx=*/true, optLevel);
    if (!module)
      recordFailure(kErrorOutOfMemory, "mgpuModuleLoadJIT: out of host memory");
    return module;
  });
}

TFC_API void mgpuModuleUnload(void *module) {
  shielded("mgpuModuleUnload",
           [&] { unloadModule(static_cast<Module *>(module)); });
}

TFC_API void *mgpuModuleGetFunction(void *module, const char *name) {
  return shielded("mgpuModuleGetFunction", [&]() -> void * {
    return findKernel(static_cast<Module *>(module), name);
  });
}

TFC_API void mgpuLaunchKernel(void *function, intptr_t gridX, intptr_t gridY,
                              intptr_t gridZ, intptr_t blockX, intptr_t blockY,
                              intptr_t blockZ, int32_t smem, void *stream,
                              void **params, void **extra,
                              size_t /*paramsCount*/) {
  shielded("mgpuLaunchKernel", [&] {
    // After a failure (the lookup of this very kernel, say) launching could
    // only fault on the failed calls' results.
    if (scopeFailed())
      return;
    auto *kernel = static_cast<Kernel *>(function);
    if (!kernel) {
      recordFailure(kErrorInvalidHandle,
                    "mgpuLaunchKernel: no kernel (its lookup failed)");
      return;
    }
    std::string where = " for kernel '" + kernel->name + "'";
    if (!fitsUnsigned(gridX) || !fitsUnsigned(gridY) || !fitsUnsigned(gridZ) ||
        !fitsUnsigned(blockX) || !fitsUnsigned(blockY) ||
        !fitsUnsigned(blockZ) || smem < 0) {
      recordFailure(kErrorInvalidValue,
                    "mgpuLaunchKernel" + where +
                        ": grid, block or shared memory size out of range");
      return;
    }
    const Driver *driver = activeDriver();
    if (!driver)
      return;
    const DriverApi &api = driver->api();
    // Beyond 48 KiB of dynamic shared memory a kernel must opt in; once per
    // kernel and size.
    if (smem > kernel->maxDynamicSharedBytes.load()) {
      if (CUresult r = api.cuFuncSetAttribute(
              kernel->function, kFuncAttributeMaxDynamicSharedSizeBytes,
              smem)) {
        recordFailure(driver, r,
                      "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES, " +
                          std::to_string(smem) + ") failed" + where);
        return;
      }
      kernel->maxDynamicSharedBytes.store(smem);
    }
    if (CUresult r = api.cuLaunchKernel(
            kernel->function, unsigned(gridX), unsigned(gridY), unsigned(gridZ),
            unsigned(blockX), unsigned(blockY), unsigned(blockZ),
            unsigned(smem), asStream(stream), params, extra))
      recordFailure(driver, r, "cuLaunchKernel failed" + where);
  });
}

TFC_API void *mgpuStreamCreate(void) {
  return shielded("mgpuStreamCreate", []() -> void * {
    if (Capture *capture = activeCapture())
      return static_cast<void *>(capture->stream);
    const Driver *driver = activeDriver();
    return driver ? static_cast<void *>(driver->stream()) : nullptr;
  });
}

TFC_API void mgpuStreamDestroy(void * /*stream*/) {
  // The runtime's stream lives as long as the process.
}

TFC_API void mgpuStreamSynchronize(void *stream) {
  waitCall("mgpuStreamSynchronize", "cuStreamSynchronize",
           [&](const DriverApi &api) {
             return api.cuStreamSynchronize(asStream(stream));
           });
}

TFC_API void mgpuStreamWaitEvent(void *stream, void *event) {
  syncCall("mgpuStreamWaitEvent", "cuStreamWaitEvent",
           [&](const DriverApi &api) {
             return api.cuStreamWaitEvent(asStream(stream), asEvent(event), 0);
           });
}

TFC_API void *mgpuEventCreate(void) {
  CUevent event = nullptr;
  // Generated code uses events for ordering only: no timestamps.
  syncCall("mgpuEventCreate", "cuEventCreate", [&](const DriverApi &api) {
    return api.cuEventCreate(&event, kEventDisableTiming);
  });
  return event;
}

TFC_API void mgpuEventDestroy(void *event) {
  if (event)
    syncCall("mgpuEventDestroy", "cuEventDestroy_v2",
             [&](const DriverApi &api) {
               return api.cuEventDestroy(asEvent(event));
             });
}

TFC_API void mgpuEventSynchronize(void *event) {
  waitCall("mgpuEventSynchronize", "cuEventSynchronize",
           [&](const DriverApi &api) {
             return api.cuEventSynchronize(asEvent(event));
           });
}

TFC_API void mgpuEventRecord(void *event, void *stream) {
  syncCall("mgpuEventRecord", "cuEventRecord", [&](const DriverApi &api) {
    return api.cuEventRecord(asEvent(event), asStream(stream));
  });
}

TFC_API void *mgpuMemAlloc(uint64_t sizeBytes, void * /*stream*/,
                           bool isHostShared) {
  return shielded("mgpuMemAlloc", [&]() -> void * {
    if (isHostShared) {
      // Managed memory would migrate pages behind the runtime's back; models
      // for this runtime keep host and device buffers apart.
      recordFailure(kErrorNotSupported,
                    "mgpuMemAlloc: host-shared (managed) memory is not "
                    "supported (" +
                        std::to_string(sizeBytes) + " bytes)");
      return nullptr;
    }
    if (sizeBytes == 0)
      return nullptr;
    const Driver *driver = activeDriver();
    if (!driver)
      return nullptr;
    CUresult r = kSuccess;
    CUdeviceptr ptr =
        DeviceAllocator::get().allocate(*driver, size_t(sizeBytes), &r);
    if (!ptr)
      recordFailure(driver, r,
                    "cuMemAlloc_v2 failed (" + std::to_string(sizeBytes) +
                        " bytes)");
    return reinterpret_cast<void *>(uintptr_t(ptr));
  });
}

TFC_API void mgpuMemFree(void *ptr, void * /*stream*/) {
  shielded("mgpuMemFree", [&] {
    if (!ptr)
      return;
    // A captured graph's kernels keep using the block: it is the graph's.
    if (Capture *capture = activeCapture()) {
      capture->deferredFrees.push_back(asDevice(ptr));
      return;
    }
    const Driver *driver = activeDriver();
    if (!driver)
      return;
    if (CUresult r = DeviceAllocator::get().free(*driver, asDevice(ptr)))
      recordFailure(driver, r, "cuMemFree_v2 failed");
  });
}

TFC_API void mgpuMemcpy(void *dst, void *src, size_t sizeBytes, void *stream) {
  // A constant of the model's library (pageable host memory, which no graph
  // copies from) goes to the device once, as the captured graph's.
  if (Capture *capture = activeCapture())
    if (sizeBytes != 0 && inLoadedImage(src)) {
      shielded("mgpuMemcpy", [&] {
        if (!scopeFailed())
          copyConstant(*capture, dst, src, sizeBytes);
      });
      return;
    }
  memoryCall("mgpuMemcpy", "cuMemcpyAsync", sizeBytes,
             [&](const DriverApi &api) {
               return api.cuMemcpyAsync(asDevice(dst), asDevice(src), sizeBytes,
                                        asStream(stream));
             });
}

TFC_API void mgpuMemset32(void *dst, unsigned int value, size_t count,
                          void *stream) {
  memoryCall("mgpuMemset32", "cuMemsetD32Async", count,
             [&](const DriverApi &api) {
               return api.cuMemsetD32Async(asDevice(dst), value, count,
                                           asStream(stream));
             });
}

TFC_API void mgpuMemset16(void *dst, unsigned short value, size_t count,
                          void *stream) {
  memoryCall("mgpuMemset16", "cuMemsetD16Async", count,
             [&](const DriverApi &api) {
               return api.cuMemsetD16Async(asDevice(dst), value, count,
                                           asStream(stream));
             });
}

} // extern "C"
