//===- TensorMapCache.cpp - Tensor maps in device memory, cached ----------===//

#include "TensorMapCache.h"

#include <algorithm>
#include <cstdint>

namespace tfc::cuda {

bool TensorMapKey::operator==(const TensorMapKey &other) const {
  return base == other.base && dataType == other.dataType &&
         swizzle == other.swizzle && std::equal(dims, dims + 3, other.dims) &&
         std::equal(strides, strides + 2, other.strides) &&
         std::equal(box, box + 3, other.box);
}

size_t TensorMapKeyHash::operator()(const TensorMapKey &key) const {
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](uint64_t value) {
    h ^= value + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  };
  mix(key.base);
  mix(uint64_t(uint32_t(key.dataType)) << 32 | uint32_t(key.swizzle));
  for (int64_t dim : key.dims)
    mix(uint64_t(dim));
  for (int64_t stride : key.strides)
    mix(uint64_t(stride));
  for (int32_t box : key.box)
    mix(uint64_t(uint32_t(box)));
  return size_t(h);
}

TensorMapCache::TensorMapCache(size_t capacity)
    : capacity_(std::max<size_t>(capacity, 1)) {}

TensorMapCache &TensorMapCache::process() {
  static TensorMapCache *instance = new TensorMapCache(); // leaked: see Driver
  return *instance;
}

CUdeviceptr TensorMapCache::get(TensorMapDevice &device,
                                const TensorMapKey &key,
                                TensorMapError *error) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = index_.find(key);
  if (found != index_.end()) {
    lru_.splice(lru_.begin(), lru_, found->second);
    ++stats_.hits;
    return slots_[found->second->slot].device;
  }
  ++stats_.misses;
  // Encoded before a slot is taken: a rejected map evicts nothing.
  CUtensorMap encoded = {};
  if (CUresult r = device.encode(&encoded, key)) {
    *error = {TensorMapStep::Encode, r, 0};
    return 0;
  }
  size_t slot = takeSlot(device, error);
  if (slot == SIZE_MAX)
    return 0;
  Slot &s = slots_[slot];
  s.host = encoded;
  if (CUresult r = device.upload(s.device, &s.host)) {
    freeSlots_.push_back(slot); // never reallocates: see takeSlot
    *error = {TensorMapStep::Upload, r, 0};
    return 0;
  }
  try {
    lru_.push_front({key, slot});
    try {
      index_.emplace(key, lru_.begin());
    } catch (...) {
      lru_.pop_front();
      throw;
    }
  } catch (...) {
    freeSlots_.push_back(slot);
    throw;
  }
  return s.device;
}

size_t TensorMapCache::takeSlot(TensorMapDevice &device,
                                TensorMapError *error) {
  if (!freeSlots_.empty()) {
    size_t slot = freeSlots_.back();
    freeSlots_.pop_back();
    return slot;
  }
  if (slots_.size() < capacity_) {
    size_t count = std::min(kSlotsPerSlab, capacity_ - slots_.size());
    // Room for every slot on the free list, so that returning one to it
    // cannot throw.
    freeSlots_.reserve(slots_.size() + count);
    CUdeviceptr slab = 0;
    size_t bytes = count * kSlotBytes;
    if (CUresult r = device.allocate(&slab, bytes)) {
      *error = {TensorMapStep::Allocate, r, bytes};
      return SIZE_MAX;
    }
    ++stats_.slabs;
    size_t first = slots_.size();
    for (size_t i = 0; i < count; ++i) {
      slots_.emplace_back();
      slots_.back().device = slab + i * kSlotBytes;
    }
    // Handed out in address order.
    for (size_t i = count; i-- > 1;)
      freeSlots_.push_back(first + i);
    return first;
  }
  // Full: every slot holds an entry. Kernels queued earlier may still read
  // the victim's map, so its slot is rewritten only once they are done.
  if (CUresult r = device.synchronize()) {
    *error = {TensorMapStep::Synchronize, r, 0};
    return SIZE_MAX;
  }
  const Entry &victim = lru_.back();
  size_t slot = victim.slot;
  index_.erase(victim.key);
  lru_.pop_back();
  ++stats_.evictions;
  return slot;
}

TensorMapCache::Stats TensorMapCache::stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  Stats stats = stats_;
  stats.entries = index_.size();
  stats.slots = slots_.size();
  return stats;
}

} // namespace tfc::cuda
