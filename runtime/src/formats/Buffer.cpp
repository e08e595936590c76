//===- Buffer.cpp - Owned aligned host buffers ----------------------------===//

#include "tfc/runtime/buffer.h"

#include <cstdlib>
#include <cstring>
#include <sys/mman.h>
#include <unistd.h>
#include <utility>

namespace tfc {

namespace {
constexpr size_t kHugePage = size_t(2) << 20;
} // namespace

AlignedBuffer::AlignedBuffer(AlignedBuffer &&other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

AlignedBuffer &AlignedBuffer::operator=(AlignedBuffer &&other) noexcept {
  if (this != &other) {
    reset();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

AlignedBuffer::~AlignedBuffer() { reset(); }

bool AlignedBuffer::allocate(size_t size) {
  reset();
  size_t bytes = size ? size : 1;
  size_t alignment = bytes >= kHugePage ? kHugePage : kBufferAlignment;
  // Round up so that the huge-page advice covers the whole block.
  size_t rounded = (bytes + alignment - 1) / alignment * alignment;
  if (rounded < bytes)
    return false;
  void *ptr = nullptr;
  if (posix_memalign(&ptr, alignment, rounded) != 0)
    return false;
#ifdef MADV_HUGEPAGE
  if (alignment == kHugePage)
    madvise(ptr, rounded, MADV_HUGEPAGE);
#endif
  // Touching the pages here (memset) keeps page faults out of timed runs.
  std::memset(ptr, 0, rounded);
  data_ = static_cast<uint8_t *>(ptr);
  size_ = size;
  return true;
}

void AlignedBuffer::reset() {
  std::free(data_);
  data_ = nullptr;
  size_ = 0;
}

} // namespace tfc
