//===- MappedFile.cpp - A read-only memory map of a whole file ------------===//

#include "MappedFile.h"

#include <cstdio>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tfc {

namespace {

/// "12 bytes, modified 1764781200.123456789"
std::string describeStamp(int64_t size, int64_t sec, int64_t nsec) {
  char nanos[16];
  std::snprintf(nanos, sizeof(nanos), "%09lld", static_cast<long long>(nsec));
  return std::to_string(size) + " bytes, modified " + std::to_string(sec) +
         "." + nanos;
}

} // namespace

std::unique_ptr<FileWatch> FileWatch::take(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) {
    ::close(fd);
    return nullptr;
  }
  std::unique_ptr<FileWatch> watch(new FileWatch());
  watch->fd_ = fd;
  watch->size_ = st.st_size;
  watch->mtimeSec_ = st.st_mtim.tv_sec;
  watch->mtimeNsec_ = st.st_mtim.tv_nsec;
  watch->ctimeSec_ = st.st_ctim.tv_sec;
  watch->ctimeNsec_ = st.st_ctim.tv_nsec;
  return watch;
}

FileWatch::~FileWatch() {
  if (fd_ >= 0)
    ::close(fd_);
}

std::string FileWatch::change() const {
  struct stat st;
  if (fstat(fd_, &st) != 0)
    return std::string("cannot stat it: ") + std::strerror(errno);
  // A write or truncation sets both times; ctime also catches a write
  // that put the modification time back.
  if (st.st_size == size_ && st.st_mtim.tv_sec == mtimeSec_ &&
      st.st_mtim.tv_nsec == mtimeNsec_ && st.st_ctim.tv_sec == ctimeSec_ &&
      st.st_ctim.tv_nsec == ctimeNsec_)
    return "";
  return "was " + describeStamp(size_, mtimeSec_, mtimeNsec_) + "; now " +
         describeStamp(st.st_size, st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
}

bool mapFile(const std::string &path, const uint8_t *&data, size_t &size,
             std::string &error, std::unique_ptr<FileWatch> *watch) {
  data = nullptr;
  size = 0;
  // O_NONBLOCK: opening a FIFO would wait for a writer (it is refused
  // below as not a regular file); regular files ignore it.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    error = path + ": cannot open: " + std::strerror(errno);
    return false;
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    error = path + ": cannot stat: " + std::strerror(errno);
    ::close(fd);
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    error = path + ": not a regular file";
    ::close(fd);
    return false;
  }
  void *ptr = nullptr;
  if (st.st_size > 0) {
    ptr = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE,
               fd, 0);
    if (ptr == MAP_FAILED) {
      error = path + ": cannot map: " + std::strerror(errno);
      ::close(fd);
      return false;
    }
  }
  if (watch) {
    *watch = FileWatch::take(fd);
    if (!*watch) {
      error = path + ": cannot stat: " + std::strerror(errno);
      if (ptr)
        munmap(ptr, static_cast<size_t>(st.st_size));
      return false;
    }
  } else {
    ::close(fd);
  }
  if (!ptr)
    return true;
  data = static_cast<const uint8_t *>(ptr);
  size = static_cast<size_t>(st.st_size);
  return true;
}

void releaseMappedPages(const uint8_t *data, size_t size) {
  // A private, read-only map of a file holds no page of its own: the pages
  // dropped are the file's, read back from it if touched again.
  if (data && size)
    madvise(const_cast<uint8_t *>(data), size, MADV_DONTNEED);
}

void unmapFile(const uint8_t *data, size_t size) {
  if (data)
    munmap(const_cast<uint8_t *>(data), size);
}

std::unique_ptr<MappedFile> MappedFile::open(const std::string &path,
                                             std::string &error) {
  std::unique_ptr<MappedFile> map(new MappedFile());
  if (!mapFile(path, map->data_, map->size_, error, &map->watch_))
    return nullptr;
  return map;
}

MappedFile::~MappedFile() { unmapFile(data_, size_); }

void MappedFile::releasePages() const { releaseMappedPages(data_, size_); }

std::string MappedFile::change() const { return watch_->change(); }

bool writeFile(const std::string &path,
               const std::vector<std::pair<const void *, size_t>> &chunks,
               std::string &error) {
  FILE *out = std::fopen(path.c_str(), "wb");
  if (!out) {
    error = path + ": cannot open for writing: " + std::strerror(errno);
    return false;
  }
  bool ok = true;
  for (const auto &[data, size] : chunks)
    ok = ok && (size == 0 || std::fwrite(data, 1, size, out) == size);
  ok = (std::fclose(out) == 0) && ok;
  if (!ok) {
    error = path + ": write failed: " + std::strerror(errno);
    return false;
  }
  return true;
}

} // namespace tfc
