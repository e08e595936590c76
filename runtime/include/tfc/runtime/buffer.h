//===- buffer.h - An owned, 64-byte aligned host buffer ----------*- C++
//-*-===//

#ifndef TFC_RUNTIME_BUFFER_H
#define TFC_RUNTIME_BUFFER_H

#include <cstddef>
#include <cstdint>

namespace tfc {

/// The alignment the ABI promises for every argument and result buffer.
constexpr size_t kBufferAlignment = 64;

/// A heap buffer aligned to kBufferAlignment (2 MiB for large ones, so that
/// transparent huge pages can back them). Move-only.
class AlignedBuffer {
public:
  AlignedBuffer() = default;
  AlignedBuffer(const AlignedBuffer &) = delete;
  AlignedBuffer &operator=(const AlignedBuffer &) = delete;
  AlignedBuffer(AlignedBuffer &&other) noexcept;
  AlignedBuffer &operator=(AlignedBuffer &&other) noexcept;
  ~AlignedBuffer();

  /// Allocates `size` bytes (at least one) and touches every page so that the
  /// first run does not pay for page faults; the contents are zero. Returns
  /// false when out of memory.
  bool allocate(size_t size);
  void reset();

  uint8_t *data() { return data_; }
  const uint8_t *data() const { return data_; }
  size_t size() const { return size_; }

private:
  uint8_t *data_ = nullptr;
  size_t size_ = 0;
};

} // namespace tfc

#endif // TFC_RUNTIME_BUFFER_H
