//===- LibraryCopy.h - A model library's private copy, for dlopen ---------===//
//
// dlopen hands out one handle per file: a second model loaded from the same
// path would share the first one's globals (the kernels' packed weights,
// keyed by weight address), and a library rebuilt at a path already open
// would never be read again. So every model runs a copy of its library of
// its own, taken when it is loaded: an anonymous in-memory file (memfd), or
// where the system refuses executable memfds, a temporary file.
//
//===----------------------------------------------------------------------===//

#ifndef TFC_RUNTIME_LIBRARYCOPY_H
#define TFC_RUNTIME_LIBRARYCOPY_H

#include <memory>
#include <string>

namespace tfc {

class LibraryCopy {
public:
  /// Copies the regular file at `path` into a memfd, or with `inMemory`
  /// false (or no memfd to be had) a temporary file. On failure returns
  /// null and sets `error` to a few words (without the path).
  static std::unique_ptr<LibraryCopy>
  make(const std::string &path, std::string &error, bool inMemory = true);
  LibraryCopy(const LibraryCopy &) = delete;
  LibraryCopy &operator=(const LibraryCopy &) = delete;
  /// Closes (or removes) the copy: only after its library is closed, so
  /// that no other copy takes its name while the loader still knows it.
  ~LibraryCopy();

  /// The name to dlopen: no library the process has loaded has it.
  const std::string &openPath() const { return openPath_; }
  bool inMemory() const { return !temporary_; }
  /// `text` with openPath() replaced by `original` (dlerror's messages).
  std::string renamed(std::string text, const std::string &original) const;

private:
  LibraryCopy() = default;
  int fd_ = -1;
  std::string openPath_;
  bool temporary_ = false; // openPath_ is a file of ours, removed at the end
};

} // namespace tfc

#endif // TFC_RUNTIME_LIBRARYCOPY_H
