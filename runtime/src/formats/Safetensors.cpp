//===- Safetensors.cpp - Reading and writing .safetensors files -----------===//

#include "tfc/runtime/safetensors.h"

#include "Json.h"
#include "MappedFile.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace tfc {

namespace {

/// The reference implementation refuses headers above 100 MB as well.
constexpr uint64_t kMaxHeaderSize = 100u << 20;

struct DTypeSpelling {
  const char *name;
  DType dtype;
};

constexpr DTypeSpelling kDTypes[] = {
    {"F64", DType::F64},        {"F32", DType::F32},
    {"F16", DType::F16},        {"BF16", DType::BF16},
    {"I64", DType::I64},        {"I32", DType::I32},
    {"I16", DType::I16},        {"I8", DType::I8},
    {"U64", DType::U64},        {"U32", DType::U32},
    {"U16", DType::U16},        {"U8", DType::U8},
    {"BOOL", DType::Bool},      {"F8_E4M3", DType::F8E4M3},
    {"F8_E5M2", DType::F8E5M2},
};

bool lookupDType(const std::string &name, DType &dtype) {
  for (const DTypeSpelling &spelling : kDTypes)
    if (name == spelling.name) {
      dtype = spelling.dtype;
      return true;
    }
  return false;
}

/// Quotes a name for a message, escaping what would break the line.
std::string quote(const std::string &name) {
  std::string out = "'";
  for (unsigned char c : name.substr(0, 200)) {
    if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (name.size() > 200)
    out += "...";
  return out + "'";
}

/// The member `key` of `object` (the tensor `where`'s entry); null, with
/// `error` set, when it has none or more than one.
const json::Value *uniqueMember(const json::Value &object, const char *key,
                                const std::string &where, std::string &error) {
  const json::Value *found = nullptr;
  bool duplicate = false;
  for (const auto &member : object.members)
    if (member.first == key) {
      if (found)
        duplicate = true;
      found = &member.second;
    }
  if (found && !duplicate)
    return found;
  error = where + (found ? ": duplicate \"" : ": missing \"") + key + "\"";
  return nullptr;
}

bool readUInt(const json::Value &value, const std::string &what,
              uint64_t &result, std::string &error) {
  switch (json::asUInt64(value, result)) {
  case json::IntResult::Ok:
    return true;
  case json::IntResult::Negative:
    error = what + " is negative";
    return false;
  case json::IntResult::TooLarge:
    error = what + " is too large";
    return false;
  case json::IntResult::NotAnInteger:
    error = what + " is not an integer";
    return false;
  }
  return false;
}

bool parseTensor(const std::string &name, const json::Value &entry,
                 uint64_t dataSize, SafetensorsTensor &tensor, uint64_t &begin,
                 uint64_t &end, std::string &error) {
  std::string where = "tensor " + quote(name);
  if (name.find('\0') != std::string::npos) {
    error = where + ": name contains a NUL character";
    return false;
  }
  if (!entry.isObject()) {
    error = where + ": expected an object, got " + json::kindName(entry.kind);
    return false;
  }
  const json::Value *dtype = uniqueMember(entry, "dtype", where, error);
  if (!dtype)
    return false;
  if (!dtype->isString()) {
    error = where + ": \"dtype\" must be a string";
    return false;
  }
  if (!lookupDType(dtype->text, tensor.dtype)) {
    error = where + ": unknown dtype " + quote(dtype->text);
    return false;
  }
  const json::Value *shape = uniqueMember(entry, "shape", where, error);
  if (!shape)
    return false;
  if (!shape->isArray()) {
    error = where + ": \"shape\" must be an array";
    return false;
  }
  tensor.shape.clear();
  for (size_t i = 0; i < shape->items.size(); ++i) {
    uint64_t dim;
    if (!readUInt(shape->items[i], where + ": shape[" + std::to_string(i) + "]",
                  dim, error))
      return false;
    if (dim > uint64_t(INT64_MAX)) {
      error = where + ": shape[" + std::to_string(i) + "] is too large";
      return false;
    }
    tensor.shape.push_back(static_cast<int64_t>(dim));
  }
  const json::Value *offsets =
      uniqueMember(entry, "data_offsets", where, error);
  if (!offsets)
    return false;
  if (!offsets->isArray() || offsets->items.size() != 2) {
    error = where + ": \"data_offsets\" must be an array of two integers";
    return false;
  }
  if (!readUInt(offsets->items[0], where + ": data_offsets[0]", begin, error) ||
      !readUInt(offsets->items[1], where + ": data_offsets[1]", end, error))
    return false;
  std::string range =
      "[" + std::to_string(begin) + ", " + std::to_string(end) + "]";
  if (begin > end) {
    error = where + ": data_offsets " + range + " are reversed";
    return false;
  }
  if (end > dataSize) {
    error = where + ": data_offsets " + range + " exceed the data section (" +
            std::to_string(dataSize) + " bytes)";
    return false;
  }
  std::optional<size_t> nbytes =
      tensorBytes(tensor.shape, dtypeSize(tensor.dtype));
  if (!nbytes) {
    error = where + ": shape " + shapeString(tensor.shape) + " is too large";
    return false;
  }
  if (*nbytes != end - begin) {
    error = where + ": shape " + shapeString(tensor.shape) + " of " +
            dtype->text + " needs " + std::to_string(*nbytes) +
            " bytes, data_offsets " + range + " hold " +
            std::to_string(end - begin);
    return false;
  }
  tensor.nbytes = *nbytes;
  return true;
}

} // namespace

const char *safetensorsDTypeName(DType dtype) {
  for (const DTypeSpelling &spelling : kDTypes)
    if (spelling.dtype == dtype)
      return spelling.name;
  return "?";
}

bool parseSafetensors(const uint8_t *data, size_t size,
                      std::vector<SafetensorsTensor> &tensors,
                      std::string &error) {
  tensors.clear();
  if (size < 8) {
    error = "file too small (" + std::to_string(size) +
            " bytes) for the 8-byte header length";
    return false;
  }
  uint64_t headerSize = 0;
  for (int i = 7; i >= 0; --i)
    headerSize = (headerSize << 8) | data[i];
  if (headerSize > size - 8) {
    error = "header length " + std::to_string(headerSize) +
            " exceeds the file size (" + std::to_string(size) + " bytes)";
    return false;
  }
  if (headerSize > kMaxHeaderSize) {
    error = "header length " + std::to_string(headerSize) +
            " exceeds the limit of " + std::to_string(kMaxHeaderSize);
    return false;
  }
  if (headerSize < 2) {
    error = "header length " + std::to_string(headerSize) +
            " is too small for a JSON object";
    return false;
  }
  json::Value header;
  std::string jsonError;
  if (!json::parse(reinterpret_cast<const char *>(data + 8), headerSize, header,
                   jsonError)) {
    error = "invalid JSON header " + jsonError;
    return false;
  }
  if (!header.isObject()) {
    error = std::string("the header must be a JSON object, got ") +
            json::kindName(header.kind);
    return false;
  }
  size_t dataStart = 8 + headerSize;
  uint64_t dataSize = size - dataStart;

  struct Extent {
    uint64_t begin, end;
    size_t index;
  };
  std::vector<Extent> extents;
  bool sawMetadata = false;
  for (const auto &member : header.members) {
    if (member.first == "__metadata__") {
      if (sawMetadata) {
        error = "duplicate \"__metadata__\"";
        return false;
      }
      sawMetadata = true;
      continue;
    }
    SafetensorsTensor tensor;
    tensor.name = member.first;
    uint64_t begin = 0, end = 0;
    if (!parseTensor(member.first, member.second, dataSize, tensor, begin, end,
                     error))
      return false;
    tensor.fileOffset = dataStart + begin;
    tensor.data = data + tensor.fileOffset;
    extents.push_back({begin, end, tensors.size()});
    tensors.push_back(std::move(tensor));
  }

  std::vector<size_t> byName(tensors.size());
  for (size_t i = 0; i < byName.size(); ++i)
    byName[i] = i;
  std::sort(byName.begin(), byName.end(), [&](size_t a, size_t b) {
    return tensors[a].name < tensors[b].name;
  });
  for (size_t i = 1; i < byName.size(); ++i)
    if (tensors[byName[i]].name == tensors[byName[i - 1]].name) {
      error = "duplicate tensor name " + quote(tensors[byName[i]].name);
      return false;
    }

  std::sort(extents.begin(), extents.end(),
            [](const Extent &a, const Extent &b) {
              return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
            });
  // Empty tensors occupy nothing and may sit anywhere in range.
  const Extent *previous = nullptr;
  for (const Extent &extent : extents) {
    if (extent.begin == extent.end)
      continue;
    if (previous && extent.begin < previous->end) {
      error = "tensors " + quote(tensors[previous->index].name) + " and " +
              quote(tensors[extent.index].name) + " overlap";
      return false;
    }
    if (!previous || extent.end > previous->end)
      previous = &extent;
  }
  return true;
}

void SafetensorsFile::sortNames() {
  sortedByName_.resize(tensors_.size());
  for (size_t i = 0; i < sortedByName_.size(); ++i)
    sortedByName_[i] = i;
  std::sort(
      sortedByName_.begin(), sortedByName_.end(),
      [&](size_t a, size_t b) { return tensors_[a].name < tensors_[b].name; });
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::fromMappedTensors(
    std::string path, std::vector<std::unique_ptr<MappedFile>> maps,
    std::vector<SafetensorsTensor> tensors) {
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = std::move(path);
  file->otherMaps_ = std::move(maps);
  file->tensors_ = std::move(tensors);
  file->sortNames();
  return file;
}

std::unique_ptr<SafetensorsFile>
SafetensorsFile::fromMemory(const uint8_t *data, size_t size,
                            std::string &error, const std::string &name) {
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = name;
  file->image_ = data;
  file->imageSize_ = size;
  std::string message;
  if (!parseSafetensors(data, size, file->tensors_, message)) {
    error = name + ": " + message;
    return nullptr;
  }
  file->sortNames();
  return file;
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::open(const std::string &path,
                                                       std::string &error) {
  return openMapped(path, error, &SafetensorsFile::map_,
                    [&](const uint8_t *data, size_t size) {
                      return fromMemory(data, size, error, path);
                    });
}

void SafetensorsFile::releasePages() {
  if (map_)
    map_->releasePages();
  for (const auto &map : otherMaps_)
    map->releasePages();
}

std::string SafetensorsFile::changeSinceOpen() const {
  if (map_)
    return map_->change();
  for (const auto &map : otherMaps_)
    if (std::string change = map->change(); !change.empty())
      return change;
  return "";
}

SafetensorsFile::SafetensorsFile() = default;

SafetensorsFile::~SafetensorsFile() = default;

const SafetensorsTensor *SafetensorsFile::find(const std::string &name) const {
  auto it = std::lower_bound(sortedByName_.begin(), sortedByName_.end(), name,
                             [&](size_t index, const std::string &key) {
                               return tensors_[index].name < key;
                             });
  if (it == sortedByName_.end() || tensors_[*it].name != name)
    return nullptr;
  return &tensors_[*it];
}

namespace {

std::string jsonString(const std::string &text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

} // namespace

bool writeSafetensors(const std::string &path,
                      const std::vector<SafetensorsEntry> &entries,
                      std::string &error) {
  std::string header = "{";
  std::vector<size_t> sizes;
  uint64_t offset = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const SafetensorsEntry &entry = entries[i];
    std::optional<size_t> nbytes =
        tensorBytes(entry.shape, dtypeSize(entry.dtype));
    if (!nbytes) {
      error = path + ": tensor " + quote(entry.name) + ": invalid shape " +
              shapeString(entry.shape);
      return false;
    }
    sizes.push_back(*nbytes);
    if (i)
      header += ",";
    header += jsonString(entry.name) + ":{\"dtype\":\"" +
              safetensorsDTypeName(entry.dtype) + "\",\"shape\":[";
    for (size_t d = 0; d < entry.shape.size(); ++d)
      header += (d ? "," : "") + std::to_string(entry.shape[d]);
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + *nbytes) + "]}";
    offset += *nbytes;
  }
  header += "}";
  while ((8 + header.size()) % 8)
    header += ' ';
  uint8_t length[8];
  for (int i = 0; i < 8; ++i)
    length[i] = static_cast<uint8_t>(uint64_t(header.size()) >> (8 * i));
  std::vector<std::pair<const void *, size_t>> chunks = {
      {length, 8}, {header.data(), header.size()}};
  for (size_t i = 0; i < entries.size(); ++i)
    chunks.emplace_back(entries[i].data, sizes[i]);
  return writeFile(path, chunks, error);
}

} // namespace tfc
