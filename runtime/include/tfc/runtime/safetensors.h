//===- safetensors.h - Reading (and writing) .safetensors files --*- C++
//-*-===//
//
// A safetensors file is an 8-byte little-endian header length N, N bytes of
// JSON mapping each tensor name to {"dtype", "shape", "data_offsets": [b, e]}
// (offsets relative to the data section that follows the header), then the
// data. "__metadata__" is ignored. Every malformed file is rejected with a
// message: header length past the end of the file, bad JSON (or nesting deeper
// than 64), an unknown dtype, offsets out of range, negative, reversed or
// overlapping, a size that does not match the shape, a duplicate name. Gaps
// between tensors are allowed.
//
// Used by the runtime (binding weights) and the compiler's importer (reading
// the header); it depends on nothing but the C++ standard library and POSIX.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_RUNTIME_SAFETENSORS_H
#define TFC_RUNTIME_SAFETENSORS_H

#include "tfc/runtime/dtype.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tfc {

class MappedFile;

struct SafetensorsTensor {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  /// Points into the file image; valid while the SafetensorsFile lives.
  const uint8_t *data = nullptr;
  size_t nbytes = 0;
  /// Offset of the data from the start of the file.
  size_t fileOffset = 0;
};

class SafetensorsFile {
public:
  /// Memory-maps `path` (read-only) and parses it. Errors name the file:
  /// "w.safetensors: tensor 'x': data_offsets [0, 12] exceed the data section
  /// (8 bytes)".
  static std::unique_ptr<SafetensorsFile> open(const std::string &path,
                                               std::string &error);
  /// Tensors that other files hold at known places (a model's own ONNX file
  /// and its external data files: tfc_model_weight_file of abi.h), named
  /// `path` in messages. `maps` keep those files mapped and watched; every
  /// tensor's data points into one of them.
  static std::unique_ptr<SafetensorsFile>
  fromMappedTensors(std::string path,
                    std::vector<std::unique_ptr<MappedFile>> maps,
                    std::vector<SafetensorsTensor> tensors);
  /// Parses an image in memory; `data` must outlive the result. `name` is used
  /// in messages.
  static std::unique_ptr<SafetensorsFile>
  fromMemory(const uint8_t *data, size_t size, std::string &error,
             const std::string &name = "<memory>");

  SafetensorsFile(const SafetensorsFile &) = delete;
  SafetensorsFile &operator=(const SafetensorsFile &) = delete;
  ~SafetensorsFile();

  /// In header order (fromMappedTensors: in the given order).
  const std::vector<SafetensorsTensor> &tensors() const { return tensors_; }
  /// nullptr when absent.
  const SafetensorsTensor *find(const std::string &name) const;
  const std::string &path() const { return path_; }
  const uint8_t *image() const { return image_; }
  size_t imageSize() const { return imageSize_; }
  /// For a mapped file, drops the process's pages of it (its resident
  /// memory; the tensors read the same, from the file, where touched
  /// again); for an image in memory, nothing.
  void releasePages();
  /// For a mapped file, empty while the file is as it was mapped, else
  /// what changed ("was 12 bytes, modified ...; now 8 bytes, ..."); for an
  /// image in memory, empty.
  std::string changeSinceOpen() const;

private:
  SafetensorsFile();
  void sortNames();
  std::string path_;
  const uint8_t *image_ = nullptr;
  size_t imageSize_ = 0;
  std::unique_ptr<MappedFile> map_; // an opened file's map, image_ in it
  /// fromMappedTensors' files.
  std::vector<std::unique_ptr<MappedFile>> otherMaps_;
  std::vector<SafetensorsTensor> tensors_;
  std::vector<size_t> sortedByName_;
};

/// Parses the image `data[0, size)` into `tensors`; never reads out of range.
/// On failure returns false and sets `error` (without a file name).
bool parseSafetensors(const uint8_t *data, size_t size,
                      std::vector<SafetensorsTensor> &tensors,
                      std::string &error);

/// What writeSafetensors writes: `data` holds nbytes(shape, dtype) bytes.
struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const void *data = nullptr;
};

/// Writes the tensors in order, the data section aligned to 8 bytes as the
/// reference implementation does.
bool writeSafetensors(const std::string &path,
                      const std::vector<SafetensorsEntry> &entries,
                      std::string &error);

/// The safetensors spelling of `dtype` ("F32", "BF16", "BOOL", ...).
const char *safetensorsDTypeName(DType dtype);

} // namespace tfc

#endif // TFC_RUNTIME_SAFETENSORS_H
