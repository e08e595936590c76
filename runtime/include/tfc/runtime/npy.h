//===- npy.h - Reading and writing numpy .npy files --------------*- C++
//-*-===//
//
// Versions 1.0, 2.0 and 3.0 of the format; little-endian (or one-byte) element
// types '<f4', '<f2', '<f8', '<i8', '<i4', '<i2', '|i1', '|u1', '<u2', '<u4',
// '<u8', '|b1'; C order only. numpy has no bfloat16: bf16 data is stored as
// '<u2' (the raw bits) and read back as DType::U16; the runtime accepts a U16
// array where a model expects bf16.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_RUNTIME_NPY_H
#define TFC_RUNTIME_NPY_H

#include "tfc/runtime/buffer.h"
#include "tfc/runtime/dtype.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tfc {

struct NpyHeader {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  /// Offset of the data from the start of the file.
  size_t dataOffset = 0;
  /// Bytes of data the header announces.
  size_t nbytes = 0;
};

struct NpyArray {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  AlignedBuffer data;
};

/// Parses the header of the .npy image `data[0, size)` and checks that the file
/// holds exactly the data the header announces. Never reads outside the range.
/// On failure returns false and sets `error` (without a file name).
bool parseNpyHeader(const uint8_t *data, size_t size, NpyHeader &header,
                    std::string &error);

/// Parses a whole .npy image and copies its data into `array`.
bool parseNpy(const uint8_t *data, size_t size, NpyArray &array,
              std::string &error);

/// Reads `path`. Errors name the file: "a.npy: not a .npy file (bad magic)".
bool readNpy(const std::string &path, NpyArray &array, std::string &error);

/// Writes a version 1.0 file (2.0 when the header needs it). bf16 is written
/// as '<u2'.
bool writeNpy(const std::string &path, DType dtype,
              const std::vector<int64_t> &shape, const void *data,
              std::string &error);

/// The numpy descr for `dtype` ("<f4"), or nullptr for a type .npy can't hold.
const char *npyDescr(DType dtype);

} // namespace tfc

#endif // TFC_RUNTIME_NPY_H
