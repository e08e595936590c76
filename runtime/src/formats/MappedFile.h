//===- MappedFile.h - A read-only memory map of a whole file -----*- C++
//-*-===//

#ifndef TFC_RUNTIME_FORMATS_MAPPEDFILE_H
#define TFC_RUNTIME_FORMATS_MAPPEDFILE_H

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tfc {

/// Keeps a mapped file open to tell, cheaply (one fstat), whether it was
/// written, truncated or extended since it was mapped: a map's pages show
/// such changes (or raise SIGBUS past a new end), so a run must not read
/// a file that changed under it.
class FileWatch {
public:
  /// Takes `fd` (closed here); false when it cannot be stat'ed.
  static std::unique_ptr<FileWatch> take(int fd);
  FileWatch(const FileWatch &) = delete;
  FileWatch &operator=(const FileWatch &) = delete;
  ~FileWatch();
  /// Empty while the file is as it was mapped; else what changed: "was 12
  /// bytes, modified 1764781200.123456789; now 8 bytes, modified ...".
  std::string change() const;

private:
  FileWatch() = default;
  int fd_ = -1;
  int64_t size_ = 0, mtimeSec_ = 0, mtimeNsec_ = 0, ctimeSec_ = 0,
          ctimeNsec_ = 0;
};

/// Maps `path` read-only. An empty file maps to {nullptr, 0}. On failure
/// returns false and sets `error` to "<path>: <reason>". With `watch`, the
/// file stays open in a FileWatch stored there.
bool mapFile(const std::string &path, const uint8_t *&data, size_t &size,
             std::string &error, std::unique_ptr<FileWatch> *watch = nullptr);
void unmapFile(const uint8_t *data, size_t size);
/// Drops this process's pages of a map from mapFile (its resident memory):
/// the bytes stay the same, read back from the file where touched again.
void releaseMappedPages(const uint8_t *data, size_t size);

/// A whole file mapped read-only by mapFile, with its FileWatch; unmapped
/// when destroyed.
class MappedFile {
public:
  /// Maps `path`; null, with `error` set as mapFile sets it, on failure.
  static std::unique_ptr<MappedFile> open(const std::string &path,
                                          std::string &error);
  MappedFile(const MappedFile &) = delete;
  MappedFile &operator=(const MappedFile &) = delete;
  ~MappedFile();

  const uint8_t *data() const { return data_; }
  size_t size() const { return size_; }
  /// releaseMappedPages of the map.
  void releasePages() const;
  /// Empty while the file is as it was mapped; else what changed
  /// (FileWatch::change).
  std::string change() const;

private:
  MappedFile() = default;
  const uint8_t *data_ = nullptr;
  size_t size_ = 0;
  std::unique_ptr<FileWatch> watch_;
};

/// Maps `path` and parses the map with `parse(data, size)`, which returns
/// the file object that reads it (or null, then the map is undone): that
/// object keeps the map, in its member `keep`, as long as it lives.
template <typename File, typename Parse>
std::unique_ptr<File> openMapped(const std::string &path, std::string &error,
                                 std::unique_ptr<MappedFile> File::*keep,
                                 Parse parse) {
  std::unique_ptr<MappedFile> map = MappedFile::open(path, error);
  if (!map)
    return nullptr;
  std::unique_ptr<File> file = parse(map->data(), map->size());
  if (file)
    (*file).*keep = std::move(map);
  return file;
}

/// Writes the byte ranges `chunks` one after another to `path` (created or
/// truncated). On failure returns false and sets `error` to
/// "<path>: <reason>".
bool writeFile(const std::string &path,
               const std::vector<std::pair<const void *, size_t>> &chunks,
               std::string &error);

} // namespace tfc

#endif // TFC_RUNTIME_FORMATS_MAPPEDFILE_H
