//===- Workdir.cpp - Errors, the temporary directory and output files -----===//

#include "Bench.h"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

namespace tfc::bench {

[[noreturn]] void die(const std::string &message) {
  std::fprintf(stderr, "tfc-bench: error: %s\n", message.c_str());
  std::exit(1); // the atexit handler removes the temporary directory
}

namespace {

// What a signal handler may read: set before the handlers are installed,
// or of type sig_atomic_t.
char workdirPath[4096];
volatile sig_atomic_t haveWorkdir = 0;
pid_t ownerPid = 0;
volatile sig_atomic_t compileChild = 0;

/// One entry of getdents64's answer.
struct Dirent64 {
  uint64_t ino;
  int64_t off;
  unsigned short reclen;
  unsigned char type;
  char name[1];
};

bool isDotOrDotDot(const char *name) {
  return name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0));
}

/// Removes `name` (relative to the directory `parent`, or absolute) and,
/// when it is a directory, what it holds, `depth` levels down at most.
/// System calls only, so a signal handler may call it.
bool removeAt(int parent, const char *name, int depth) {
  if (unlinkat(parent, name, 0) == 0)
    return true;
  if ((errno != EISDIR && errno != EPERM) || depth > 8)
    return false;
  int fd =
      openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return false;
  alignas(8) char buf[4096];
  // Entries removed while reading may make the directory skip others: read
  // it again until a pass removes nothing.
  for (bool removed = true; removed;) {
    removed = false;
    if (lseek(fd, 0, SEEK_SET) < 0)
      break;
    long n;
    while ((n = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0)
      for (long at = 0; at < n;) {
        auto *entry = reinterpret_cast<Dirent64 *>(buf + at);
        at += entry->reclen;
        if (!isDotOrDotDot(entry->name) && removeAt(fd, entry->name, depth + 1))
          removed = true;
      }
  }
  close(fd);
  return unlinkat(parent, name, AT_REMOVEDIR) == 0;
}

/// Kills the running tfc-compile and removes the directory (in the process
/// that created it only: not in a child between fork and exec).
void removeWorkdir() {
  if (!haveWorkdir || getpid() != ownerPid)
    return;
  if (pid_t child = compileChild; child > 0) {
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
    compileChild = 0;
  }
  removeAt(AT_FDCWD, workdirPath, 0);
  haveWorkdir = 0;
}

void onSignal(int signal) {
  int saved = errno;
  removeWorkdir();
  // SA_RESETHAND put back the default action, and the signal is blocked
  // while this runs: raised again, it ends the process once this returns,
  // as it would have without the handler (a fault faults again).
  raise(signal);
  errno = saved;
}

} // namespace

std::string makeWorkdir() {
  ownerPid = getpid();
  std::atexit(removeWorkdir);
  for (int signal : {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGPIPE, SIGALRM,
                     SIGUSR1, SIGUSR2, SIGXCPU, SIGXFSZ, SIGVTALRM, SIGSEGV,
                     SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS}) {
    struct sigaction old, action;
    // A signal the caller ignores (nohup) stays ignored.
    if (sigaction(signal, nullptr, &old) != 0 || old.sa_handler == SIG_IGN)
      continue;
    std::memset(&action, 0, sizeof action);
    action.sa_handler = onSignal;
    action.sa_flags = SA_RESETHAND;
    sigemptyset(&action.sa_mask);
    sigaction(signal, &action, nullptr);
  }
  const char *tmp = std::getenv("TMPDIR");
  bool fromEnv = tmp && *tmp;
  std::string dir = fromEnv ? tmp : "/tmp";
  while (dir.size() > 1 && dir.back() == '/')
    dir.pop_back();
  std::string pattern = dir + "/tfc-bench-XXXXXX";
  if (pattern.size() >= sizeof workdirPath)
    die("cannot create a temporary directory in " + dir +
        (fromEnv ? " (TMPDIR)" : "") + ": the name is too long");
  std::memcpy(workdirPath, pattern.c_str(), pattern.size() + 1);
  // The handlers read the name only once haveWorkdir is set.
  if (!mkdtemp(workdirPath))
    die("cannot create a temporary directory in " + dir +
        (fromEnv ? " (TMPDIR): " : ": ") + std::strerror(errno));
  haveWorkdir = 1;
  return workdirPath;
}

void setCompileChild(pid_t pid) { compileChild = pid; }

void closeOrDie(FILE *f, const std::string &path) {
  bool ok = std::fflush(f) == 0 && !std::ferror(f);
  int error = errno;
  if (std::fclose(f) != 0 && ok) {
    ok = false;
    error = errno;
  }
  if (!ok)
    die("cannot write " + path + ": " + std::strerror(error));
}

} // namespace tfc::bench
