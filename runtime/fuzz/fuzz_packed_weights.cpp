//===- fuzz_packed_weights.cpp - libFuzzer entry for packed weights files -===//

#include "../src/formats/PackedWeights.h"

#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string error;
  std::unique_ptr<tfc::PackedWeightsFile> file =
      tfc::PackedWeightsFile::fromMemory(data, size, "fuzz", error);
  if (!file)
    return 0;
  // Every accepted entry's bytes must lie inside the image: touch them.
  volatile uint8_t sink = 0;
  for (const tfc::PackedEntry &e : file->entries()) {
    const auto *bytes = static_cast<const uint8_t *>(e.data);
    if (bytes < data || e.bytes > size || bytes + e.bytes > data + size)
      __builtin_trap();
    for (uint64_t i = 0; i < e.bytes; i += 61)
      sink = sink + bytes[i];
  }
  return 0;
}
