//===- DeviceAllocator.h - The caching device memory allocator --*- C++ -*-===//
//
// cuMemAlloc and cuMemFree are slow (cuMemFree synchronises the device), and
// generated host code allocates and frees its temporaries on every run. Freed
// blocks therefore go on free lists by size class and are handed out again:
// after the first run a model allocates nothing from the driver.
//
// Reuse needs no stream bookkeeping: all of the runtime's work, and all the
// work of generated code (mgpuStreamCreate returns the same stream), is on
// one stream, so a block freed while kernels that use it are still queued is
// only reused by work queued after them.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_RUNTIME_CUDA_DEVICEALLOCATOR_H
#define TFC_RUNTIME_CUDA_DEVICEALLOCATOR_H

#include "CudaDriver.h"

#include "tfc/runtime/api.h"

#include <mutex>
#include <unordered_map>
#include <vector>

namespace tfc::cuda {

class DeviceAllocator {
public:
  /// The process's allocator (leaked, like the driver).
  static DeviceAllocator &get();

  /// A block of at least `size` bytes (a whole size class: multiples of
  /// 256 B up to 64 KiB, of 64 KiB up to 2 MiB, of 2 MiB above), from a free
  /// list or cuMemAlloc. When the driver is out of memory, the cache is
  /// returned to it and the allocation tried once more. 0 on failure, with
  /// the driver's result in `result`.
  CUdeviceptr allocate(const Driver &driver, size_t size, CUresult *result);
  /// Puts a block back on its free list. A pointer this allocator did not
  /// make is passed to cuMemFree (and counted as foreign); its result is
  /// returned.
  CUresult free(const Driver &driver, CUdeviceptr ptr);
  tfc_allocator_stats stats();
  /// Returns every cached block to the driver (after the stream drains).
  CUresult trim(const Driver &driver);

private:
  DeviceAllocator() = default;
  CUresult trimLocked(const Driver &driver);

  std::mutex mutex_;
  std::unordered_map<size_t, std::vector<CUdeviceptr>> freeLists_;
  std::unordered_map<CUdeviceptr, size_t> live_; // block -> size class
  tfc_allocator_stats stats_ = {};
};

} // namespace tfc::cuda

#endif // TFC_RUNTIME_CUDA_DEVICEALLOCATOR_H
