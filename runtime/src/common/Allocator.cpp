//===- Allocator.cpp - The caching allocator behind compiled code ---------===//
//
// Compiled code allocates its temporaries through _mlir_memref_to_llvm_*.
// Fresh pages are expensive on first touch, so freed blocks are kept on free
// lists keyed by size class and handed out again: after the first run, a
// model's working memory is allocated once and reused.
//
//===----------------------------------------------------------------------===//

#include "tfc/runtime/abi.h"
#include "tfc/runtime/api.h"

#include "ModelImpl.h"
#include "SizeClasses.h"

#include <cstdlib>
#include <mutex>
#include <new>
#include <sys/mman.h>
#include <unordered_map>
#include <vector>

namespace {

constexpr size_t kMinAlignment = 64;
constexpr size_t kPage = 4096;
constexpr size_t kHugePage = size_t(2) << 20;

struct Block {
  void *ptr;
  size_t alignment;
};

struct LiveBlock {
  size_t sizeClass;
  size_t alignment;
};

struct State {
  std::mutex mutex;
  std::unordered_map<size_t, std::vector<Block>> freeLists;
  std::unordered_map<void *, LiveBlock> live;
  tfc_allocator_stats stats = {};
};

State &state() {
  // Leaked on purpose: compiled code may free after static destructors ran.
  static State *instance = new State();
  return *instance;
}

/// Small blocks round to cache lines, medium ones to pages, large ones to
/// huge pages.
constexpr tfc::SizeClasses kClasses{kMinAlignment, 64 * 1024, kPage, kHugePage};

size_t normalizeAlignment(size_t alignment) {
  size_t result = kMinAlignment;
  while (result < alignment && result != 0)
    result <<= 1;
  return result;
}

/// The size of the last temporary this thread could not allocate (0 for
/// none since takeFailedAllocation): compiled code returns at once from
/// its run on a null temporary, and the runtime fails the run naming it.
thread_local size_t failedAllocation = 0;

void *allocateBlock(size_t alignment, size_t size) {
  size_t cls = kClasses.of(size);
  alignment = normalizeAlignment(alignment);
  if (cls == 0 || alignment == 0)
    return nullptr;
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  ++s.stats.alloc_calls;
  auto it = s.freeLists.find(cls);
  if (it != s.freeLists.end()) {
    std::vector<Block> &list = it->second;
    for (size_t i = list.size(); i-- > 0;) {
      if (list[i].alignment < alignment)
        continue;
      Block block = list[i];
      list[i] = list.back();
      list.pop_back();
      s.live[block.ptr] = {cls, block.alignment};
      ++s.stats.reused_allocs;
      ++s.stats.live_blocks;
      s.stats.live_bytes += cls;
      --s.stats.cached_blocks;
      s.stats.cached_bytes -= cls;
      return block.ptr;
    }
  }
  size_t blockAlignment = alignment;
  if (cls >= kHugePage && blockAlignment < kHugePage)
    blockAlignment = kHugePage;
  void *ptr = nullptr;
  if (posix_memalign(&ptr, blockAlignment, cls) != 0)
    return nullptr;
#ifdef MADV_HUGEPAGE
  if (cls >= kHugePage)
    madvise(ptr, cls, MADV_HUGEPAGE);
#endif
  try {
    s.live[ptr] = {cls, blockAlignment};
  } catch (...) {
    std::free(ptr);
    return nullptr;
  }
  ++s.stats.fresh_allocs;
  s.stats.fresh_bytes += cls;
  ++s.stats.live_blocks;
  s.stats.live_bytes += cls;
  return ptr;
}

void *allocate(size_t alignment, size_t size) {
  void *ptr = allocateBlock(alignment, size);
  if (!ptr && size > 0)
    failedAllocation = size;
  return ptr;
}

} // namespace

size_t tfc::rt::takeFailedAllocation() {
  size_t size = failedAllocation;
  failedAllocation = 0;
  return size;
}

extern "C" {

TFC_API void *_mlir_memref_to_llvm_alloc(size_t size) {
  return allocate(kMinAlignment, size);
}

TFC_API void *_mlir_memref_to_llvm_aligned_alloc(size_t alignment,
                                                 size_t size) {
  return allocate(alignment, size);
}

TFC_API void _mlir_memref_to_llvm_free(void *ptr) {
  if (!ptr)
    return;
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  ++s.stats.free_calls;
  auto it = s.live.find(ptr);
  if (it == s.live.end()) {
    // Not ours: memory from malloc (the MLIR default) handed over by code we
    // do not control.
    ++s.stats.foreign_frees;
    std::free(ptr);
    return;
  }
  LiveBlock block = it->second;
  s.live.erase(it);
  --s.stats.live_blocks;
  s.stats.live_bytes -= block.sizeClass;
  try {
    s.freeLists[block.sizeClass].push_back({ptr, block.alignment});
  } catch (...) {
    std::free(ptr);
    return;
  }
  ++s.stats.cached_blocks;
  s.stats.cached_bytes += block.sizeClass;
}

void tfc_allocator_get_stats(tfc_allocator_stats *stats) {
  if (!stats)
    return;
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  *stats = s.stats;
}

void tfc_allocator_trim(void) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  for (auto &entry : s.freeLists)
    for (Block &block : entry.second)
      std::free(block.ptr);
  s.freeLists.clear();
  s.stats.cached_blocks = 0;
  s.stats.cached_bytes = 0;
}

} // extern "C"
