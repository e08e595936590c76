//===- GuardedTensor.h - Tensors with a guard region in the runtime tests -===//

#ifndef TFC_UNITTESTS_RUNTIME_GUARDEDTENSOR_H
#define TFC_UNITTESTS_RUNTIME_GUARDEDTENSOR_H

#include "Status.h"

#include <cstdint>
#include <cstring>

namespace tfc::testing {

/// The buffer of one tensor, 64-byte aligned, with a guard region after it
/// that must stay untouched.
class GuardedTensor {
public:
  static constexpr size_t kGuard = 64;

  explicit GuardedTensor(const tfc_tensor_desc *desc)
      : nbytes(tfc_tensor_desc_nbytes(desc)) {
    const int64_t size = int64_t(nbytes + kGuard);
    EXPECT_OK(tfc_array_create(TFC_DTYPE_U8, 1, &size, &array));
    std::memset(data(), 0x5a, nbytes + kGuard);
  }
  ~GuardedTensor() { tfc_array_destroy(array); }
  GuardedTensor(const GuardedTensor &) = delete;
  GuardedTensor &operator=(const GuardedTensor &) = delete;

  void *data() { return tfc_array_data(array); }
  template <typename T> T *as() { return static_cast<T *>(data()); }
  bool guardIntact() {
    const uint8_t *guard = as<uint8_t>() + nbytes;
    for (size_t i = 0; i < kGuard; ++i)
      if (guard[i] != 0x5a)
        return false;
    return true;
  }

  size_t nbytes;

private:
  tfc_array *array = nullptr;
};

} // namespace tfc::testing

#endif // TFC_UNITTESTS_RUNTIME_GUARDEDTENSOR_H
