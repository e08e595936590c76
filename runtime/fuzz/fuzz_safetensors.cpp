//===- fuzz_safetensors.cpp - libFuzzer entry for the safetensors parser --===//

#include "tfc/runtime/safetensors.h"

#include <cstring>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::vector<tfc::SafetensorsTensor> tensors;
  std::string error;
  if (!tfc::parseSafetensors(data, size, tensors, error))
    return 0;
  // Every accepted tensor must lie inside the image: touch its bytes.
  volatile uint8_t sink = 0;
  for (const tfc::SafetensorsTensor &tensor : tensors) {
    if (tensor.data < data || tensor.nbytes > size ||
        tensor.data + tensor.nbytes > data + size)
      __builtin_trap();
    for (size_t i = 0; i < tensor.nbytes; i += 61)
      sink = sink + tensor.data[i];
  }
  return 0;
}
