//===- LibraryCopy.cpp - A model library's private copy, for dlopen -------===//

#include "LibraryCopy.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif

namespace tfc {

namespace {

/// Whether a library the process has loaded goes by `name`: dlopen would
/// hand that one out again rather than read the file. (A closed model's
/// library can stay loaded, e.g. while threads that ran it hold its
/// thread-local storage, under the name of a descriptor since reused.)
bool nameLoaded(const std::string &name) {
  struct Search {
    const std::string *name;
    bool found;
  } search{&name, false};
  dl_iterate_phdr(
      [](struct dl_phdr_info *info, size_t, void *data) {
        auto *s = static_cast<Search *>(data);
        if (info->dlpi_name && *s->name == info->dlpi_name) {
          s->found = true;
          return 1;
        }
        return 0;
      },
      &search);
  return search.found;
}

bool copyAll(int from, int to) {
  std::vector<char> buffer(size_t(1) << 20);
  for (;;) {
    ssize_t n = ::read(from, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return false;
    if (n == 0)
      return true;
    for (ssize_t done = 0; done < n;) {
      ssize_t w = ::write(to, buffer.data() + done, size_t(n - done));
      if (w < 0 && errno == EINTR)
        continue;
      if (w <= 0)
        return false;
      done += w;
    }
  }
}

/// An executable memfd, or -1. Kernels that know MFD_EXEC may refuse
/// executable memfds without it; older ones refuse the flag.
int executableMemfd() {
  int fd = memfd_create("tfc-model", MFD_CLOEXEC | MFD_EXEC);
  if (fd < 0 && errno == EINVAL)
    fd = memfd_create("tfc-model", MFD_CLOEXEC);
  return fd;
}

} // namespace

std::unique_ptr<LibraryCopy>
LibraryCopy::make(const std::string &path, std::string &error, bool inMemory) {
  int in = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (in < 0) {
    error = std::strerror(errno);
    return nullptr;
  }
  struct stat st;
  if (fstat(in, &st) != 0 || !S_ISREG(st.st_mode)) {
    error = "not a regular file";
    ::close(in);
    return nullptr;
  }
  std::unique_ptr<LibraryCopy> copy(new LibraryCopy());
  int fd = inMemory ? executableMemfd() : -1;
  if (fd >= 0) {
    // A descriptor number whose /proc name no loaded library has.
    std::string name = "/proc/self/fd/" + std::to_string(fd);
    while (fd >= 0 && nameLoaded(name)) {
      int next = fcntl(fd, F_DUPFD_CLOEXEC, fd + 1);
      ::close(fd);
      fd = next;
      name = "/proc/self/fd/" + std::to_string(fd);
    }
    copy->fd_ = fd;
    copy->openPath_ = name;
  }
  if (fd < 0) {
    // A temporary file, of a random name, removed when the copy goes.
    const char *dir = std::getenv("TMPDIR");
    std::string pattern =
        std::string(dir && *dir ? dir : "/tmp") + "/tfc-model-XXXXXX.so";
    do {
      std::vector<char> name(pattern.begin(), pattern.end());
      name.push_back('\0');
      fd = mkostemps(name.data(), 3, O_CLOEXEC);
      if (fd < 0) {
        error =
            std::string("cannot make a private copy: ") + std::strerror(errno);
        ::close(in);
        return nullptr;
      }
      if (copy->fd_ >= 0) {
        ::unlink(copy->openPath_.c_str());
        ::close(copy->fd_);
      }
      copy->fd_ = fd;
      copy->openPath_ = name.data();
      copy->temporary_ = true;
    } while (nameLoaded(copy->openPath_));
  }
  bool copied = copyAll(in, copy->fd_);
  int savedErrno = errno;
  ::close(in);
  if (!copied) {
    error = std::string("cannot copy it: ") + std::strerror(savedErrno);
    return nullptr;
  }
  return copy;
}

LibraryCopy::~LibraryCopy() {
  if (temporary_)
    ::unlink(openPath_.c_str());
  if (fd_ >= 0)
    ::close(fd_);
}

std::string LibraryCopy::renamed(std::string text,
                                 const std::string &original) const {
  for (size_t at = text.find(openPath_); at != std::string::npos;
       at = text.find(openPath_, at + original.size()))
    text.replace(at, openPath_.size(), original);
  return text;
}

} // namespace tfc
