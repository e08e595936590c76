//===- TensorMapCache.h - Tensor maps in device memory, cached --*- C++ -*-===//
//
// TMA loads (cp.async.bulk.tensor) read a CUtensorMap that the host encodes
// with cuTensorMapEncodeTiled. tfc's kernels get the map's device address,
// so each map is encoded once into a host copy and copied into a 128-byte
// slot of device memory. Models run many times on the same buffers (the
// device allocator hands them back), so maps are cached by their arguments:
// after the first run a kernel's maps cost a lookup, no driver call.
//
// Slots are carved from slabs of cuMemAlloc'd memory that the cache owns for
// the process lifetime. The cache is bounded; when full, the least recently
// used slot is reused, after the stream drains (a kernel still in flight may
// read the old map). The copy into a slot is queued on the runtime's one
// stream, so it lands before any launch queued after it.
//
// The cache talks to the device through TensorMapDevice, so that its
// bookkeeping is tested on its own (tests/unittests/Runtime).
//
//===----------------------------------------------------------------------===//

#ifndef TFC_RUNTIME_CUDA_TENSORMAPCACHE_H
#define TFC_RUNTIME_CUDA_TENSORMAPCACHE_H

#include "CudaDriver.h"

#include <cstddef>
#include <cstdint>
#include <deque>
#include <list>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace tfc::cuda {

/// The arguments of tfc_gpu_tensor_map: a tiled rank-3 view of `base`,
/// innermost dimension first.
struct TensorMapKey {
  uintptr_t base = 0;
  int32_t dataType = 0; // CUtensorMapDataType
  int32_t swizzle = 0;  // CUtensorMapSwizzle
  int64_t dims[3] = {};
  int64_t strides[2] = {}; // bytes, of dims 1 and 2
  int32_t box[3] = {};

  bool operator==(const TensorMapKey &other) const;
};

struct TensorMapKeyHash {
  size_t operator()(const TensorMapKey &key) const;
};

/// What the cache needs of the device: the CUDA driver, or a test double.
class TensorMapDevice {
public:
  virtual ~TensorMapDevice() = default;
  /// cuTensorMapEncodeTiled into host memory.
  virtual CUresult encode(CUtensorMap *map, const TensorMapKey &key) = 0;
  /// cuMemAlloc.
  virtual CUresult allocate(CUdeviceptr *ptr, size_t bytes) = 0;
  /// Queues a copy of `*map` to `dst` on the runtime's stream; `*map` stays
  /// untouched until the stream has been synchronised.
  virtual CUresult upload(CUdeviceptr dst, const CUtensorMap *map) = 0;
  /// Waits until the stream's work is done.
  virtual CUresult synchronize() = 0;
};

/// The step of TensorMapCache::get that failed.
enum class TensorMapStep { Encode, Allocate, Upload, Synchronize };

struct TensorMapError {
  TensorMapStep step = TensorMapStep::Encode;
  CUresult result = kSuccess;
  size_t bytes = 0; // of a failed allocation
};

class TensorMapCache {
public:
  static constexpr size_t kDefaultCapacity = 1024;
  static constexpr size_t kSlotBytes = sizeof(CUtensorMap); // 128
  static constexpr size_t kSlotsPerSlab = 64;               // 8 KiB slabs

  struct Stats {
    size_t entries = 0;
    size_t slots = 0; // carved so far
    size_t slabs = 0;
    uint64_t hits = 0;
    uint64_t misses = 0;
    uint64_t evictions = 0;
  };

  /// At most `capacity` (>= 1) maps, and as many slots.
  explicit TensorMapCache(size_t capacity = kDefaultCapacity);
  TensorMapCache(const TensorMapCache &) = delete;
  TensorMapCache &operator=(const TensorMapCache &) = delete;

  /// The process's cache (leaked, like the driver: its slabs stay allocated
  /// for the process lifetime).
  static TensorMapCache &process();

  /// The device address of the map for `key`: cached, or encoded, given a
  /// slot and uploaded. 0 on failure, described by `error`; the cache is
  /// unchanged then except for slots carved or freed. Thread-safe.
  CUdeviceptr get(TensorMapDevice &device, const TensorMapKey &key,
                  TensorMapError *error);
  Stats stats();

private:
  struct Slot {
    CUdeviceptr device = 0;
    /// The source of the slot's last upload, kept alive for the copy.
    CUtensorMap host = {};
  };
  struct Entry {
    TensorMapKey key;
    size_t slot;
  };

  /// A slot for a new entry: a free one, one of a new slab, or the least
  /// recently used entry's (after the stream drains). SIZE_MAX on failure.
  size_t takeSlot(TensorMapDevice &device, TensorMapError *error);

  std::mutex mutex_;
  const size_t capacity_;
  std::list<Entry> lru_; // most recently used first
  std::unordered_map<TensorMapKey, std::list<Entry>::iterator, TensorMapKeyHash>
      index_;
  std::deque<Slot> slots_; // stable addresses: uploads read `host`
  std::vector<size_t> freeSlots_;
  Stats stats_;
};

} // namespace tfc::cuda

#endif // TFC_RUNTIME_CUDA_TENSORMAPCACHE_H
