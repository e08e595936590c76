//===- fuzz_npy.cpp - libFuzzer entry for the .npy parser -----------------===//

#include "tfc/runtime/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  tfc::NpyHeader header;
  std::string error;
  if (!tfc::parseNpyHeader(data, size, header, error))
    return 0;
  if (header.dataOffset > size || header.nbytes != size - header.dataOffset)
    __builtin_trap();
  tfc::NpyArray array;
  if (!tfc::parseNpy(data, size, array, error))
    __builtin_trap();
  return 0;
}
