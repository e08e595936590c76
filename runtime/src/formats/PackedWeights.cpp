//===- PackedWeights.cpp - Files of weights packed by a model -------------===//

#include "PackedWeights.h"

#include "MappedFile.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <unistd.h>

namespace tfc {
namespace {

constexpr char kMagic[8] = {'T', 'F', 'C', 'P', 'A', 'C', 'K', '1'};
constexpr size_t kHeaderBytes = 48;
constexpr uint64_t kDataAlignment = 4096;
constexpr uint64_t kEntryAlignment = 64;
constexpr uint32_t kMaxRank = 16;

uint64_t roundUp(uint64_t n, uint64_t step) {
  return (n + step - 1) / step * step;
}

/// A 64-bit hash of [data, data + size): each little-endian 64-bit word
/// (the last one zero-padded, and the size after all) XORed in, multiplied
/// by an odd constant and folded with its high half, so that every bit
/// reaches every later one. One multiply per 8 bytes: a model library of
/// a few MB hashes in well under a millisecond (FNV-1a byte by byte took
/// 6% of a MiniLM process that loads packed weights).
uint64_t hash64(const uint8_t *data, size_t size) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&](uint64_t word) {
    h = (h ^ word) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 29;
  };
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t word;
    std::memcpy(&word, data + i, 8);
    mix(word);
  }
  uint64_t tail = 0;
  if (size > i)
    std::memcpy(&tail, data + i, size - i);
  mix(tail);
  mix(uint64_t(size));
  return h;
}

/// Appends fields to a byte string.
struct Writer {
  std::string bytes;
  template <typename T> void put(T value) {
    bytes.append(reinterpret_cast<const char *>(&value), sizeof(T));
  }
  void putString(const std::string &s) {
    put(uint32_t(s.size()));
    bytes += s;
  }
};

/// Reads fields from [data, data + size); false once past the end.
struct Reader {
  const uint8_t *data;
  size_t size, at = 0;
  template <typename T> bool get(T &value) {
    if (size - at < sizeof(T))
      return false;
    std::memcpy(&value, data + at, sizeof(T));
    at += sizeof(T);
    return true;
  }
  bool getString(std::string &s) {
    uint32_t n;
    if (!get(n) || size - at < n)
      return false;
    s.assign(reinterpret_cast<const char *>(data + at), n);
    at += n;
    return true;
  }
};

} // namespace

std::string fileContentIdentity(const std::string &path) {
  const uint8_t *data;
  size_t size;
  std::string error;
  if (!mapFile(path, data, size, error))
    return "";
  char hash[17];
  std::snprintf(hash, sizeof(hash), "%016llx",
                static_cast<unsigned long long>(hash64(data, size)));
  unmapFile(data, size);
  return std::to_string(size) + " bytes, hash " + hash;
}

bool writePackedWeights(const std::string &path, const std::string &format,
                        const std::string &modelIdentity,
                        const std::string &weightsIdentity,
                        const std::vector<PackedEntry> &entries,
                        std::string &error) {
  // The table first, with each entry's data offset relative to the data
  // section; then the header, which knows the table's size.
  std::vector<uint64_t> at;
  uint64_t dataBytes = 0;
  for (const PackedEntry &e : entries) {
    at.push_back(dataBytes);
    dataBytes = roundUp(dataBytes + e.bytes, kEntryAlignment);
  }
  auto table = [&](uint64_t dataOffset) {
    Writer w;
    w.putString(format);
    w.putString(modelIdentity);
    w.putString(weightsIdentity);
    for (size_t i = 0; i < entries.size(); ++i) {
      const PackedEntry &e = entries[i];
      w.putString(e.weight);
      w.put(e.dtype);
      w.put(uint32_t(e.shape.size()));
      for (int64_t d : e.shape)
        w.put(d);
      w.put(e.offset);
      w.put(e.kind[0]);
      w.put(e.kind[1]);
      w.put(e.k);
      w.put(e.n);
      w.put(e.strides[0]);
      w.put(e.strides[1]);
      w.put(dataOffset + at[i]);
      w.put(e.bytes);
    }
    return w.bytes;
  };
  uint64_t tableBytes = table(0).size();
  uint64_t dataOffset = roundUp(kHeaderBytes + tableBytes, kDataAlignment);
  std::string body = table(dataOffset);
  Writer header;
  header.bytes.assign(kMagic, sizeof(kMagic));
  header.put(tableBytes);
  header.put(dataOffset);
  header.put(dataOffset + dataBytes);
  header.put(
      hash64(reinterpret_cast<const uint8_t *>(body.data()), body.size()));
  header.put(uint32_t(entries.size()));
  header.put(uint32_t(0));

  static const std::vector<uint8_t> zeros(kDataAlignment, 0);
  std::vector<std::pair<const void *, size_t>> chunks = {
      {header.bytes.data(), header.bytes.size()},
      {body.data(), body.size()},
      {zeros.data(), dataOffset - kHeaderBytes - tableBytes}};
  uint64_t written = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    chunks.push_back({zeros.data(), at[i] - written});
    chunks.push_back({entries[i].data, entries[i].bytes});
    written = at[i] + entries[i].bytes;
  }
  chunks.push_back({zeros.data(), dataBytes - written});

  std::string temporary = path + ".tmp." + std::to_string(::getpid());
  if (!writeFile(temporary, chunks, error)) {
    std::remove(temporary.c_str());
    error = path + ": " + error.substr(error.find(": ") + 2);
    return false;
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    error = path + ": cannot rename " + temporary +
            " to it: " + std::strerror(errno);
    std::remove(temporary.c_str());
    return false;
  }
  return true;
}

std::unique_ptr<PackedWeightsFile>
PackedWeightsFile::open(const std::string &path, std::string &error) {
  return openMapped(path, error, &PackedWeightsFile::map_,
                    [&](const uint8_t *data, size_t size) {
                      return fromMemory(data, size, path, error);
                    });
}

std::string PackedWeightsFile::changeSinceOpen() const {
  return map_ ? map_->change() : std::string();
}

std::unique_ptr<PackedWeightsFile>
PackedWeightsFile::fromMemory(const uint8_t *data, size_t size,
                              const std::string &name, std::string &error) {
  std::unique_ptr<PackedWeightsFile> file(new PackedWeightsFile());
  file->path_ = name;
  file->image_ = data;
  file->size_ = size;
  auto fail = [&](const std::string &why) {
    error = name + ": " + why;
    return nullptr;
  };
  Reader header{file->image_, file->size_};
  char magic[8];
  uint64_t tableBytes, dataOffset, fileBytes, checksum;
  uint32_t count, reserved;
  if (file->size_ < kHeaderBytes ||
      std::memcmp(file->image_, kMagic, sizeof(kMagic)) != 0)
    return fail("not a packed weights file (tfc_model_save_packed_weights "
                "writes them)");
  header.get(magic);
  header.get(tableBytes);
  header.get(dataOffset);
  header.get(fileBytes);
  header.get(checksum);
  header.get(count);
  header.get(reserved);
  if (fileBytes != file->size_)
    return fail("truncated or extended: " + std::to_string(file->size_) +
                " bytes, the header says " + std::to_string(fileBytes));
  if (tableBytes > file->size_ - kHeaderBytes ||
      dataOffset < kHeaderBytes + tableBytes || dataOffset > file->size_ ||
      dataOffset % kDataAlignment != 0)
    return fail("bad header (table of " + std::to_string(tableBytes) +
                " bytes, data at " + std::to_string(dataOffset) + ")");
  const uint8_t *tableData = file->image_ + kHeaderBytes;
  if (hash64(tableData, tableBytes) != checksum)
    return fail("table damaged (its checksum differs)");

  Reader r{tableData, tableBytes};
  if (!r.getString(file->format_) || !r.getString(file->modelIdentity_) ||
      !r.getString(file->weightsIdentity_))
    return fail("truncated table");
  for (uint32_t i = 0; i < count; ++i) {
    PackedEntry e;
    uint32_t rank;
    uint64_t data;
    std::string where = "entry " + std::to_string(i);
    if (!r.getString(e.weight) || !r.get(e.dtype) || !r.get(rank))
      return fail("truncated table at " + where);
    if (rank > kMaxRank)
      return fail(where + ": rank " + std::to_string(rank));
    e.shape.resize(rank);
    for (int64_t &d : e.shape)
      if (!r.get(d))
        return fail("truncated table at " + where);
    if (!r.get(e.offset) || !r.get(e.kind[0]) || !r.get(e.kind[1]) ||
        !r.get(e.k) || !r.get(e.n) || !r.get(e.strides[0]) ||
        !r.get(e.strides[1]) || !r.get(data) || !r.get(e.bytes))
      return fail("truncated table at " + where);
    if (data < dataOffset || data % kEntryAlignment != 0 ||
        data > file->size_ || e.bytes > file->size_ - data)
      return fail(where + " ('" + e.weight + "'): " + std::to_string(e.bytes) +
                  " bytes at " + std::to_string(data) + " lie outside the " +
                  "data section");
    e.data = file->image_ + data;
    file->entries_.push_back(std::move(e));
  }
  if (r.at != tableBytes)
    return fail("table has " + std::to_string(tableBytes - r.at) +
                " bytes past its last entry");
  return file;
}

PackedWeightsFile::~PackedWeightsFile() = default;

} // namespace tfc
