//===- OnnxFile.h - Reading an ONNX model file -------------------*- C++
//-*-===//
//
// Parses a `.onnx` file with the ONNX project's protobuf classes and checks
// what the importer relies on: the IR version, the operator sets, a graph.
// It also finds where each initializer's bytes lie in the file (inline
// `raw_data`) or in its external data files, so that a compiled model binds
// its weights by mapping the file at run time instead of carrying a copy.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_LIB_IMPORTER_ONNX_ONNXFILE_H
#define TFC_LIB_IMPORTER_ONNX_ONNXFILE_H

#include "onnx/onnx_pb.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tfc::onnx_import {

/// Where an initializer is in the files.
struct TensorLocation {
  /// Where its little-endian element bytes are: `file` is "" for the model
  /// file itself, else the external data file's path relative to the model
  /// file's folder; `offset` is -1 where the elements are not stored as raw
  /// bytes (varint-encoded typed fields).
  std::string file;
  int64_t offset = -1;
  int64_t nbytes = 0;
  /// The whole TensorProto in the model file.
  int64_t protoOffset = -1, protoLength = 0;
  /// In the model file: the bytes just before `offset` (the TensorProto's
  /// name and raw_data field headers), which the runtime checks so that a
  /// file of another layout is refused rather than read.
  std::string check;
};

class OnnxFile {
public:
  /// Reads and checks `path`. On failure returns nullptr and sets `error` to
  /// one line naming the file ("m.onnx: not an ONNX model: ...").
  static std::unique_ptr<OnnxFile> open(llvm::StringRef path,
                                        std::string &error);

  const onnx::ModelProto &model() const { return model_; }
  const onnx::GraphProto &graph() const { return model_.graph(); }
  const std::string &path() const { return path_; }
  /// The version of the default ("" or "ai.onnx") operator set.
  int64_t opset() const { return opset_; }
  /// Where the initializer `name` is; nullptr for an unknown name.
  const TensorLocation *location(llvm::StringRef name) const;
  /// The span of the file from the graph's first node to the end of its
  /// last (nodes, and whatever the writer put between them), which the
  /// compiled code is made of; offset -1 for a graph without nodes.
  struct Span {
    int64_t offset = -1, nbytes = 0;
  };
  const Span &nodes() const { return nodes_; }
  /// The bytes of `range` in the model file (`file` "") or an external
  /// data file, for hashing; empty when unreadable.
  std::string readRange(llvm::StringRef file, int64_t offset,
                        int64_t nbytes) const;

  /// The highest default-domain operator set the importer knows.
  static constexpr int64_t kMaxOpset = 28;
  /// The ONNX IR versions the importer reads.
  static constexpr int64_t kMinIrVersion = 3, kMaxIrVersion = 14;

private:
  bool findRawData(llvm::StringRef bytes, std::string &error);
  bool findExternalData(std::string &error);

  std::string path_;
  std::unique_ptr<llvm::MemoryBuffer> bytes_;
  onnx::ModelProto model_;
  int64_t opset_ = 0;
  Span nodes_;
  llvm::StringMap<TensorLocation> locations_;
};

} // namespace tfc::onnx_import

#endif // TFC_LIB_IMPORTER_ONNX_ONNXFILE_H
