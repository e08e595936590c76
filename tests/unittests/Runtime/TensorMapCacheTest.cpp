//===- TensorMapCacheTest.cpp - The tensor map cache on its own -----------===//
//
// runtime/src/cuda/TensorMapCache.cpp, compiled into the test, over a device
// that logs what it is asked to do: slabs, hits, LRU eviction after the
// stream drains, and the cache after each kind of failure. GpuTest.cpp tests
// tfc_gpu_tensor_map on the fake driver.
//
//===----------------------------------------------------------------------===//

#include "cuda/TensorMapCache.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <vector>

using namespace tfc::cuda;

namespace {

/// Device memory is host memory; a "map" is the key's base and dims[2].
class LogDevice : public TensorMapDevice {
public:
  CUresult encode(CUtensorMap *map, const TensorMapKey &key) override {
    log.push_back("encode " + std::to_string(key.dims[2]));
    if (failEncode)
      return kErrorInvalidValue;
    *map = {};
    map->opaque[0] = key.base;
    map->opaque[1] = uint64_t(key.dims[2]);
    return kSuccess;
  }
  CUresult allocate(CUdeviceptr *ptr, size_t bytes) override {
    log.push_back("allocate " + std::to_string(bytes));
    if (failAllocate)
      return kErrorOutOfMemory;
    slabs.emplace_back(static_cast<char *>(std::aligned_alloc(256, bytes)),
                       &std::free);
    *ptr = CUdeviceptr(reinterpret_cast<uintptr_t>(slabs.back().get()));
    return kSuccess;
  }
  CUresult upload(CUdeviceptr dst, const CUtensorMap *map) override {
    log.push_back("upload " + std::to_string(map->opaque[1]));
    if (failUpload)
      return kErrorInvalidValue;
    std::memcpy(reinterpret_cast<void *>(uintptr_t(dst)), map, sizeof(*map));
    return kSuccess;
  }
  CUresult synchronize() override {
    log.push_back("synchronize");
    return failSynchronize ? kErrorInvalidValue : kSuccess;
  }

  /// What the slot at `map` holds: the dims[2] of its key.
  static uint64_t held(CUdeviceptr map) {
    return reinterpret_cast<const CUtensorMap *>(uintptr_t(map))->opaque[1];
  }
  std::string takeLog() {
    std::string all;
    for (const std::string &entry : log)
      all += (all.empty() ? "" : "; ") + entry;
    log.clear();
    return all;
  }

  std::vector<std::string> log;
  std::vector<std::unique_ptr<char, void (*)(void *)>> slabs;
  bool failEncode = false, failAllocate = false, failUpload = false,
       failSynchronize = false;
};

TensorMapKey key(int64_t id, uintptr_t base = 0x10000) {
  TensorMapKey k;
  k.base = base;
  k.dataType = 6;
  k.swizzle = 3;
  k.dims[0] = 64;
  k.dims[1] = 1024;
  k.dims[2] = id;
  k.strides[0] = 128;
  k.strides[1] = 131072;
  k.box[0] = 64;
  k.box[1] = 128;
  k.box[2] = 1;
  return k;
}

TEST(TensorMapCache, KeyComparesEveryArgument) {
  TensorMapKey a = key(1);
  EXPECT_EQ(a, key(1));
  EXPECT_EQ(TensorMapKeyHash()(a), TensorMapKeyHash()(key(1)));
  std::vector<TensorMapKey> others(9, a);
  others[0].base += 16;
  others[1].dataType = 9;
  others[2].swizzle = 2;
  others[3].dims[0] = 32;
  others[4].dims[1] = 512;
  others[5].strides[0] = 256;
  others[6].strides[1] = 65536;
  others[7].box[0] = 32;
  others[8].box[2] = 2;
  for (const TensorMapKey &other : others)
    EXPECT_FALSE(a == other);
}

TEST(TensorMapCache, HitsDoNoDeviceWork) {
  LogDevice device;
  TensorMapCache cache(8);
  TensorMapError error;
  CUdeviceptr map = cache.get(device, key(1), &error);
  ASSERT_NE(map, 0u);
  EXPECT_EQ(device.takeLog(), "encode 1; allocate 1024; upload 1");
  EXPECT_EQ(LogDevice::held(map), 1u);
  EXPECT_EQ(cache.get(device, key(1), &error), map);
  EXPECT_EQ(device.takeLog(), "");
  CUdeviceptr other = cache.get(device, key(1, 0x20000), &error);
  EXPECT_NE(other, map);
  EXPECT_EQ(device.takeLog(), "encode 1; upload 1");
  TensorMapCache::Stats stats = cache.stats();
  EXPECT_EQ(stats.entries, 2u);
  EXPECT_EQ(stats.hits, 1u);
  EXPECT_EQ(stats.misses, 2u);
  EXPECT_EQ(stats.slabs, 1u);
}

TEST(TensorMapCache, CarvesAlignedSlotsFromSlabs) {
  LogDevice device;
  TensorMapCache cache(100); // a slab of 64 slots, then one of 36
  TensorMapError error;
  std::set<CUdeviceptr> maps;
  for (int i = 0; i < 100; ++i) {
    CUdeviceptr map = cache.get(device, key(i), &error);
    ASSERT_NE(map, 0u) << i;
    EXPECT_EQ(map % 64, 0u) << i;
    maps.insert(map);
  }
  EXPECT_EQ(maps.size(), 100u);
  std::vector<std::string> allocations;
  for (const std::string &entry : device.log)
    if (entry.rfind("allocate", 0) == 0)
      allocations.push_back(entry);
  EXPECT_EQ(allocations,
            std::vector<std::string>({"allocate 8192", "allocate 4608"}));
  // The first slab's slots, in address order.
  CUdeviceptr slab = CUdeviceptr(uintptr_t(device.slabs[0].get()));
  EXPECT_EQ(cache.get(device, key(0), &error), slab);
  EXPECT_EQ(cache.get(device, key(1), &error), slab + 128);
  for (int i = 0; i < 100; ++i)
    EXPECT_EQ(LogDevice::held(cache.get(device, key(i), &error)), uint64_t(i));
  EXPECT_EQ(cache.stats().evictions, 0u);
}

TEST(TensorMapCache, EvictsTheLeastRecentlyUsedAfterSynchronising) {
  LogDevice device;
  TensorMapCache cache(2);
  TensorMapError error;
  CUdeviceptr a = cache.get(device, key(1), &error);
  CUdeviceptr b = cache.get(device, key(2), &error);
  EXPECT_EQ(cache.get(device, key(1), &error), a); // now 2 is the oldest
  device.takeLog();
  CUdeviceptr c = cache.get(device, key(3), &error);
  EXPECT_EQ(c, b);
  // The encode first (a bad map must not evict), then the stream drains
  // before the victim's slot is overwritten.
  EXPECT_EQ(device.takeLog(), "encode 3; synchronize; upload 3");
  EXPECT_EQ(LogDevice::held(c), 3u);
  EXPECT_EQ(cache.get(device, key(1), &error), a);
  EXPECT_EQ(device.takeLog(), "");
  // 2 was evicted: it comes back in the slot of 3, now the oldest.
  EXPECT_EQ(cache.get(device, key(2), &error), c);
  EXPECT_EQ(device.takeLog(), "encode 2; synchronize; upload 2");
  EXPECT_EQ(LogDevice::held(c), 2u);
  EXPECT_EQ(LogDevice::held(a), 1u);
  TensorMapCache::Stats stats = cache.stats();
  EXPECT_EQ(stats.entries, 2u);
  EXPECT_EQ(stats.slots, 2u);
  EXPECT_EQ(stats.evictions, 2u);
}

TEST(TensorMapCache, FailuresLeaveTheCacheUsable) {
  LogDevice device;
  TensorMapCache cache(2);
  TensorMapError error;

  device.failAllocate = true;
  EXPECT_EQ(cache.get(device, key(1), &error), 0u);
  EXPECT_EQ(error.step, TensorMapStep::Allocate);
  EXPECT_EQ(error.result, kErrorOutOfMemory);
  EXPECT_EQ(error.bytes, 256u);
  device.failAllocate = false;

  device.failEncode = true;
  EXPECT_EQ(cache.get(device, key(1), &error), 0u);
  EXPECT_EQ(error.step, TensorMapStep::Encode);
  EXPECT_EQ(error.result, kErrorInvalidValue);
  device.failEncode = false;

  device.failUpload = true;
  EXPECT_EQ(cache.get(device, key(1), &error), 0u);
  EXPECT_EQ(error.step, TensorMapStep::Upload);
  device.failUpload = false;
  EXPECT_EQ(cache.stats().entries, 0u);

  // The slot of the failed upload is used again.
  device.takeLog();
  CUdeviceptr a = cache.get(device, key(1), &error);
  CUdeviceptr b = cache.get(device, key(2), &error);
  EXPECT_EQ(device.takeLog(), "encode 1; upload 1; encode 2; upload 2");
  ASSERT_NE(a, 0u);
  ASSERT_NE(b, 0u);

  // A failed drain evicts nothing.
  device.failSynchronize = true;
  EXPECT_EQ(cache.get(device, key(3), &error), 0u);
  EXPECT_EQ(error.step, TensorMapStep::Synchronize);
  device.failSynchronize = false;
  device.takeLog();
  EXPECT_EQ(cache.get(device, key(1), &error), a);
  EXPECT_EQ(cache.get(device, key(2), &error), b);
  EXPECT_EQ(device.takeLog(), "");
  EXPECT_EQ(LogDevice::held(a), 1u);
  EXPECT_EQ(LogDevice::held(b), 2u);
}

} // namespace
