//===- PackedWeights.h - Files of weights packed by a model -----*- C++ -*-===//
//
// A model's CPU matmuls pack every weight they multiply by on first use
// (abi.h, "Packed weights"). A packed weights file keeps those copies for
// the next process: a header, a table naming each copy's weight, and the
// packed bytes, each at a 64-byte aligned offset, so that a read-only map
// of the file serves them in place. Little-endian:
//
//   header  "TFCPACK1", u64 table bytes, u64 data offset, u64 file bytes,
//           u64 hash of the table (hash64 in PackedWeights.cpp),
//           u32 entries, u32 0
//   table   str format, str model identity, str weights file identity,
//           then per entry:
//           str weight name, i32 dtype, u32 rank, i64 shape[rank],
//           u64 byte offset in the weight, i32 kind[2], i64 k, n,
//           i64 strides[2], u64 data offset in the file, u64 bytes
//   data    at a multiple of 4096
//
// where str is a u32 length and its bytes.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_RUNTIME_FORMATS_PACKEDWEIGHTS_H
#define TFC_RUNTIME_FORMATS_PACKEDWEIGHTS_H

#include "MappedFile.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tfc {

/// One packed copy: of which weight, from which of its bytes, the model's
/// key for it (tfc_packed_weight), and its bytes.
struct PackedEntry {
  std::string weight;
  int32_t dtype = 0;
  std::vector<int64_t> shape;
  uint64_t offset = 0; // of the bytes packed from, in the weight
  int32_t kind[2] = {0, 0};
  int64_t k = 0, n = 0, strides[2] = {0, 0};
  const void *data = nullptr;
  uint64_t bytes = 0;
};

/// "123 bytes, hash 0123456789abcdef": a file's size and a hash of its
/// bytes; empty when it cannot be read.
std::string fileContentIdentity(const std::string &path);

/// Writes `entries` to `path` through a temporary file renamed into place.
/// On failure returns false and sets `error` to "<path>: <reason>".
bool writePackedWeights(const std::string &path, const std::string &format,
                        const std::string &modelIdentity,
                        const std::string &weightsIdentity,
                        const std::vector<PackedEntry> &entries,
                        std::string &error);

/// A packed weights file, mapped read-only; its entries' data point into
/// the map, which lives as long as this object.
class PackedWeightsFile {
public:
  /// Maps and checks `path`. Errors name the file: "p.packed: not a packed
  /// weights file", "p.packed: table damaged (checksum)".
  static std::unique_ptr<PackedWeightsFile> open(const std::string &path,
                                                 std::string &error);
  /// Parses an image in memory, which must outlive the result; `name` is
  /// used in messages.
  static std::unique_ptr<PackedWeightsFile> fromMemory(const uint8_t *data,
                                                       size_t size,
                                                       const std::string &name,
                                                       std::string &error);
  PackedWeightsFile(const PackedWeightsFile &) = delete;
  PackedWeightsFile &operator=(const PackedWeightsFile &) = delete;
  ~PackedWeightsFile();

  const std::string &path() const { return path_; }
  const std::string &format() const { return format_; }
  const std::string &modelIdentity() const { return modelIdentity_; }
  const std::string &weightsIdentity() const { return weightsIdentity_; }
  const std::vector<PackedEntry> &entries() const { return entries_; }
  size_t size() const { return size_; }
  /// Empty while a mapped file is as it was mapped; else what changed.
  std::string changeSinceOpen() const;

private:
  PackedWeightsFile() = default;
  std::string path_, format_, modelIdentity_, weightsIdentity_;
  std::vector<PackedEntry> entries_;
  const uint8_t *image_ = nullptr;
  size_t size_ = 0;
  std::unique_ptr<MappedFile> map_; // an opened file's map, image_ in it
};

} // namespace tfc

#endif // TFC_RUNTIME_FORMATS_PACKEDWEIGHTS_H
