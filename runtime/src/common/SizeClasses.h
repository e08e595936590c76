//===- SizeClasses.h - Size classes of the caching allocators ---*- C++ -*-===//
//
// The host allocator (Allocator.cpp) and the device allocator
// (cuda/DeviceAllocator.cpp) keep freed blocks on free lists by size class:
// a request is rounded up to a multiple of a granule that grows with its
// size, so that blocks of nearby sizes are handed out again.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_RUNTIME_COMMON_SIZECLASSES_H
#define TFC_RUNTIME_COMMON_SIZECLASSES_H

#include <cstddef>

namespace tfc {

/// Classes of multiples of `small` bytes up to `smallLimit`, of `medium`
/// up to `large`, of `large` above.
struct SizeClasses {
  size_t small, smallLimit, medium, large;

  /// The class of a block of `size` bytes (`small` for 0); 0 on overflow.
  size_t of(size_t size) const {
    if (size == 0)
      return small;
    if (size <= smallLimit)
      return roundUp(size, small);
    if (size <= large)
      return roundUp(size, medium);
    return roundUp(size, large);
  }

  /// `value` rounded up to a multiple of `multiple`; 0 on overflow.
  static size_t roundUp(size_t value, size_t multiple) {
    size_t rounded = (value + multiple - 1) / multiple * multiple;
    return rounded < value ? 0 : rounded;
  }
};

} // namespace tfc

#endif // TFC_RUNTIME_COMMON_SIZECLASSES_H
