//===- DeviceAllocator.cpp - The caching device memory allocator ----------===//

#include "DeviceAllocator.h"

#include "common/SizeClasses.h"

namespace tfc::cuda {
namespace {

/// Multiples of 256 B (cuMemAlloc's alignment) up to 64 KiB, of 64 KiB up to
/// 2 MiB, of 2 MiB above.
constexpr SizeClasses kClasses{256, size_t(64) << 10, size_t(64) << 10,
                               size_t(2) << 20};

} // namespace

DeviceAllocator &DeviceAllocator::get() {
  static DeviceAllocator *instance = new DeviceAllocator();
  return *instance;
}

CUdeviceptr DeviceAllocator::allocate(const Driver &driver, size_t size,
                                      CUresult *result) {
  *result = kSuccess;
  size_t cls = kClasses.of(size);
  if (cls == 0) {
    *result = kErrorOutOfMemory;
    return 0;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.alloc_calls;
  auto it = freeLists_.find(cls);
  if (it != freeLists_.end() && !it->second.empty()) {
    CUdeviceptr ptr = it->second.back();
    it->second.pop_back();
    live_[ptr] = cls;
    ++stats_.reused_allocs;
    ++stats_.live_blocks;
    stats_.live_bytes += cls;
    --stats_.cached_blocks;
    stats_.cached_bytes -= cls;
    return ptr;
  }
  CUdeviceptr ptr = 0;
  CUresult r = driver.api().cuMemAlloc(&ptr, cls);
  if (r == kErrorOutOfMemory && stats_.cached_blocks > 0 &&
      trimLocked(driver) == kSuccess)
    r = driver.api().cuMemAlloc(&ptr, cls);
  if (r != kSuccess) {
    *result = r;
    return 0;
  }
  live_[ptr] = cls;
  ++stats_.fresh_allocs;
  stats_.fresh_bytes += cls;
  ++stats_.live_blocks;
  stats_.live_bytes += cls;
  return ptr;
}

CUresult DeviceAllocator::free(const Driver &driver, CUdeviceptr ptr) {
  if (!ptr)
    return kSuccess;
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.free_calls;
  auto it = live_.find(ptr);
  if (it == live_.end()) {
    ++stats_.foreign_frees;
    return driver.api().cuMemFree(ptr);
  }
  size_t cls = it->second;
  live_.erase(it);
  --stats_.live_blocks;
  stats_.live_bytes -= cls;
  freeLists_[cls].push_back(ptr);
  ++stats_.cached_blocks;
  stats_.cached_bytes += cls;
  return kSuccess;
}

tfc_allocator_stats DeviceAllocator::stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

CUresult DeviceAllocator::trim(const Driver &driver) {
  std::lock_guard<std::mutex> lock(mutex_);
  return trimLocked(driver);
}

CUresult DeviceAllocator::trimLocked(const Driver &driver) {
  // Cached blocks may still be read by queued kernels (see the header).
  if (CUresult r = driver.api().cuStreamSynchronize(driver.stream()))
    return r;
  CUresult first = kSuccess;
  for (auto &entry : freeLists_) {
    for (CUdeviceptr ptr : entry.second) {
      CUresult r = driver.api().cuMemFree(ptr);
      if (first == kSuccess)
        first = r;
      --stats_.cached_blocks;
      stats_.cached_bytes -= entry.first;
    }
    entry.second.clear();
  }
  return first;
}

} // namespace tfc::cuda

extern "C" {

void tfc_device_allocator_get_stats(tfc_allocator_stats *stats) {
  if (stats)
    *stats = tfc::cuda::DeviceAllocator::get().stats();
}

void tfc_device_allocator_trim(void) {
  // Before the driver is opened the cache is empty: nothing to open it for.
  if (const tfc::cuda::Driver *driver = tfc::cuda::Driver::ifInitialised())
    if (driver->makeCurrent() == tfc::cuda::kSuccess)
      tfc::cuda::DeviceAllocator::get().trim(*driver);
}

} // extern "C"
