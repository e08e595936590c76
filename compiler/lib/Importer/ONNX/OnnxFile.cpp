//===- OnnxFile.cpp - Reading an ONNX model file --------------------------===//

#include "OnnxFile.h"

#include "google/protobuf/io/coded_stream.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

using namespace llvm;
using google::protobuf::io::CodedInputStream;

namespace tfc::onnx_import {

namespace {

// Field numbers of onnx.proto (ModelProto.graph, GraphProto.node and
// .initializer,
// TensorProto.float_data/name/raw_data/double_data).
constexpr uint32_t kModelGraph = 7;
constexpr uint32_t kGraphNode = 1;
constexpr uint32_t kGraphInitializer = 5;
constexpr uint32_t kTensorFloatData = 4;
constexpr uint32_t kTensorName = 8;
constexpr uint32_t kTensorRawData = 9;
constexpr uint32_t kTensorDoubleData = 10;
constexpr uint32_t kLengthDelimited = 2;

/// Skips the field whose tag was just read; false on a malformed stream.
bool skipField(CodedInputStream &in, uint32_t tag) {
  switch (tag & 7) {
  case 0: {
    uint64_t ignored;
    return in.ReadVarint64(&ignored);
  }
  case 1:
    return in.Skip(8);
  case 2: {
    uint32_t length;
    return in.ReadVarint32(&length) && in.Skip(int(length));
  }
  case 5:
    return in.Skip(4);
  default:
    return false; // groups are not used by onnx.proto
  }
}

/// Reads a length-delimited field's length and returns the position of its
/// first byte; -1 on a malformed stream.
int64_t payloadStart(CodedInputStream &in, uint32_t &length) {
  if (!in.ReadVarint32(&length))
    return -1;
  return in.CurrentPosition();
}

} // namespace

std::unique_ptr<OnnxFile> OnnxFile::open(StringRef path, std::string &error) {
  sys::fs::file_status status;
  if (std::error_code ec = sys::fs::status(path, status)) {
    error = path.str() + ": " + ec.message();
    return nullptr;
  }
  if (!sys::fs::is_regular_file(status)) {
    error = path.str() + ": not a regular file";
    return nullptr;
  }
  auto buffer = MemoryBuffer::getFile(path, /*IsText=*/false,
                                      /*RequiresNullTerminator=*/false);
  if (!buffer) {
    error = path.str() + ": " + buffer.getError().message();
    return nullptr;
  }
  StringRef bytes = (*buffer)->getBuffer();
  if (bytes.size() > size_t(INT32_MAX)) {
    error = path.str() + ": " + std::to_string(bytes.size()) +
            " bytes: an ONNX file is at most 2 GiB (larger models keep "
            "their weights in external data files)";
    return nullptr;
  }
  std::unique_ptr<OnnxFile> file(new OnnxFile());
  file->path_ = path.str();
  if (bytes.empty() ||
      !file->model_.ParseFromArray(bytes.data(), int(bytes.size()))) {
    error = path.str() + ": not an ONNX model (the file is not a valid "
                         "ModelProto: truncated, or another format)";
    return nullptr;
  }
  const onnx::ModelProto &model = file->model_;
  if (model.ir_version() < kMinIrVersion ||
      model.ir_version() > kMaxIrVersion) {
    error = path.str() + ": ir_version " + std::to_string(model.ir_version()) +
            " is not supported (tfc reads IR versions " +
            std::to_string(kMinIrVersion) + " to " +
            std::to_string(kMaxIrVersion) + ")";
    return nullptr;
  }
  for (const onnx::OperatorSetIdProto &set : model.opset_import()) {
    if (!set.domain().empty() && set.domain() != "ai.onnx")
      continue; // nodes of other domains are refused one by one
    file->opset_ = set.version();
  }
  if (file->opset_ == 0) {
    error = path.str() + ": opset_import names no default (ai.onnx) "
                         "operator set";
    return nullptr;
  }
  if (file->opset_ > kMaxOpset) {
    error = path.str() + ": opset_import: ai.onnx version " +
            std::to_string(file->opset_) + " is newer than tfc knows (" +
            std::to_string(kMaxOpset) + ")";
    return nullptr;
  }
  if (!model.has_graph()) {
    error = path.str() + ": the model has no graph";
    return nullptr;
  }
  file->bytes_ = std::move(*buffer);
  if (!file->findRawData(bytes, error) || !file->findExternalData(error))
    return nullptr;
  return file;
}

const TensorLocation *OnnxFile::location(StringRef name) const {
  auto it = locations_.find(name);
  return it == locations_.end() ? nullptr : &it->second;
}

std::string OnnxFile::readRange(StringRef file, int64_t offset,
                                int64_t nbytes) const {
  if (file.empty()) {
    StringRef all = bytes_->getBuffer();
    if (offset < 0 || uint64_t(offset + nbytes) > all.size())
      return "";
    return all.substr(size_t(offset), size_t(nbytes)).str();
  }
  SmallString<256> path(sys::path::parent_path(path_));
  sys::path::append(path, file);
  auto slice =
      MemoryBuffer::getFileSlice(path, uint64_t(nbytes), uint64_t(offset));
  return slice ? (*slice)->getBuffer().str() : "";
}

bool OnnxFile::findRawData(StringRef bytes, std::string &error) {
  CodedInputStream in(reinterpret_cast<const uint8_t *>(bytes.data()),
                      int(bytes.size()));
  in.SetRecursionLimit(8);
  auto malformed = [&] {
    error = path_ + ": not an ONNX model (a malformed field)";
    return false;
  };
  // Walks one TensorProto (the stream limited to it) of `length` bytes.
  auto walkTensor = [&](int64_t protoStart, int64_t length) -> bool {
    std::string name;
    int64_t nameStart = -1, lastFieldStart = -1;
    struct Data {
      int64_t fieldStart, start;
      uint32_t length;
    };
    std::optional<Data> data;
    while (true) {
      int64_t fieldStart = in.CurrentPosition();
      uint32_t tag = in.ReadTag();
      if (tag == 0)
        break;
      uint32_t field = tag >> 3;
      bool delimited = (tag & 7) == kLengthDelimited;
      if (field == kTensorName && delimited) {
        uint32_t length;
        if (payloadStart(in, length) < 0 || !in.ReadString(&name, int(length)))
          return malformed();
        nameStart = fieldStart;
      } else if (delimited &&
                 (field == kTensorRawData || field == kTensorFloatData ||
                  field == kTensorDoubleData)) {
        uint32_t length;
        int64_t start = payloadStart(in, length);
        if (start < 0 || !in.Skip(int(length)))
          return malformed();
        data = Data{fieldStart, start, length};
        // The name field, when it is the one just before, is checked too.
        if (nameStart != lastFieldStart || nameStart < 0)
          nameStart = -1;
      } else if (!skipField(in, tag)) {
        return malformed();
      }
      lastFieldStart = fieldStart;
    }
    if (name.empty())
      return true;
    TensorLocation location;
    location.protoOffset = protoStart;
    location.protoLength = length;
    if (data) {
      int64_t checkFrom = nameStart >= 0 ? nameStart : data->fieldStart;
      location.offset = data->start;
      location.nbytes = data->length;
      location.check =
          bytes.substr(size_t(checkFrom), size_t(data->start - checkFrom))
              .str();
    }
    locations_[name] = std::move(location);
    return true;
  };
  while (uint32_t tag = in.ReadTag()) {
    if (tag >> 3 != kModelGraph || (tag & 7) != kLengthDelimited) {
      if (!skipField(in, tag))
        return malformed();
      continue;
    }
    uint32_t length;
    if (payloadStart(in, length) < 0)
      return malformed();
    auto graphLimit = in.PushLimit(int(length));
    while (true) {
      int64_t fieldStart = in.CurrentPosition();
      uint32_t graphTag = in.ReadTag();
      if (graphTag == 0)
        break;
      if (graphTag >> 3 != kGraphInitializer ||
          (graphTag & 7) != kLengthDelimited) {
        if (!skipField(in, graphTag))
          return malformed();
        if (graphTag >> 3 == kGraphNode) {
          // The nodes' span: from the first node to the end of the last.
          if (nodes_.offset < 0)
            nodes_.offset = fieldStart;
          nodes_.nbytes = in.CurrentPosition() - nodes_.offset;
        }
        continue;
      }
      uint32_t tensorLength;
      int64_t tensorStart = payloadStart(in, tensorLength);
      if (tensorStart < 0)
        return malformed();
      auto tensorLimit = in.PushLimit(int(tensorLength));
      if (!walkTensor(tensorStart, tensorLength))
        return false;
      in.PopLimit(tensorLimit);
    }
    in.PopLimit(graphLimit);
  }
  return true;
}

bool OnnxFile::findExternalData(std::string &error) {
  StringRef folder = sys::path::parent_path(path_);
  for (const onnx::TensorProto &tensor : graph().initializer()) {
    if (tensor.data_location() != onnx::TensorProto::EXTERNAL)
      continue;
    TensorLocation location;
    if (const TensorLocation *walked = this->location(tensor.name())) {
      location.protoOffset = walked->protoOffset;
      location.protoLength = walked->protoLength;
    }
    location.offset = 0;
    location.nbytes = -1;
    std::string where = path_ + ": initializer '" + tensor.name() + "'";
    for (const onnx::StringStringEntryProto &entry : tensor.external_data()) {
      int64_t value = 0;
      if (entry.key() == "location") {
        location.file = entry.value();
      } else if (entry.key() == "offset" || entry.key() == "length") {
        if (StringRef(entry.value()).getAsInteger(10, value) || value < 0) {
          error = where + ": external_data " + entry.key() + " '" +
                  entry.value() + "' is not a byte count";
          return false;
        }
        (entry.key() == "offset" ? location.offset : location.nbytes) = value;
      }
    }
    StringRef file = location.file;
    if (file.empty() || sys::path::is_absolute(file) ||
        llvm::is_contained(
            llvm::make_range(sys::path::begin(file), sys::path::end(file)),
            "..")) {
      error = where + ": external_data location '" + location.file +
              "' must be a file name relative to the model's folder";
      return false;
    }
    SmallString<256> full(folder);
    sys::path::append(full, file);
    uint64_t size = 0;
    if (std::error_code ec = sys::fs::file_size(full, size)) {
      error = where + ": external data file " + std::string(full) + ": " +
              ec.message();
      return false;
    }
    if (location.nbytes < 0)
      location.nbytes = int64_t(size) - location.offset;
    if (location.offset > int64_t(size) || location.nbytes < 0 ||
        location.nbytes > int64_t(size) - location.offset) {
      error = where + ": external data file " + std::string(full) + " has " +
              std::to_string(size) + " bytes, short of offset " +
              std::to_string(location.offset) + " + length " +
              std::to_string(location.nbytes);
      return false;
    }
    locations_[tensor.name()] = std::move(location);
  }
  return true;
}

} // namespace tfc::onnx_import
