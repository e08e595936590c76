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

bool mapFile(const std::string &path, const uint8_t *&data, size_t &size,
             std::string &error) {
  data = nullptr;
  size = 0;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
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
  if (st.st_size == 0) {
    ::close(fd);
    return true;
  }
  void *ptr = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ,
                   MAP_PRIVATE, fd, 0);
  int savedErrno = errno;
  ::close(fd);
  if (ptr == MAP_FAILED) {
    error = path + ": cannot map: " + std::strerror(savedErrno);
    return false;
  }
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
