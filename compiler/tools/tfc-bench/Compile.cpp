//===- Compile.cpp - tfc-bench's builds, made by tfc-compile --------------===//

#include "Bench.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace tfc::bench {

namespace {

std::string selfDir() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  if (n <= 0)
    die("cannot locate the tfc-bench executable");
  buf[n] = 0;
  std::string p(buf);
  return p.substr(0, p.rfind('/'));
}

/// Compiles `src` into `lib` with tfc-compile; dies with the first line of
/// what it printed when it fails.
void compile(const Options &o, const std::string &src, const std::string &lib,
             bool fused) {
  std::string compiler = selfDir() + "/tfc-compile";
  std::string target = "--target=" + o.target, log = lib + ".log";
  pid_t pid = fork();
  if (pid == 0) {
    std::vector<const char *> argv = {compiler.c_str(), src.c_str(), "-o",
                                      lib.c_str(), target.c_str()};
    if (!fused)
      argv.push_back("--no-fusion");
    for (const std::string &flag : o.compileFlags)
      argv.push_back(flag.c_str());
    argv.push_back(nullptr);
    int out = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out >= 0)
      dup2(out, 2);
    execv(compiler.c_str(), const_cast<char *const *>(argv.data()));
    _exit(127);
  }
  if (pid < 0)
    die(std::string("cannot run tfc-compile: ") + std::strerror(errno));
  setCompileChild(pid);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
    ;
  setCompileChild(0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
    return;
  std::string first;
  if (FILE *f = std::fopen(log.c_str(), "r")) {
    char line[512] = "";
    if (std::fgets(line, sizeof line, f))
      first = line;
    std::fclose(f);
  }
  while (!first.empty() && (first.back() == '\n' || first.back() == '\r'))
    first.pop_back();
  die("tfc-compile failed on " + src + (first.empty() ? "" : ": " + first));
}

} // namespace

std::string compileBuilds(const Options &o, const Shape &shape,
                          const KernelSpec &k) {
  std::string base = o.workdir + "/" + o.kernel + "_" + shape.name;
  FILE *f = std::fopen((base + ".mlir").c_str(), "w");
  if (!f)
    die("cannot write " + base + ".mlir: " + std::strerror(errno));
  std::fputs(k.mlir.c_str(), f);
  closeOrDie(f, base + ".mlir");
  compile(o, base + ".mlir", base + ".fused.so", true);
  if (!o.matmul())
    compile(o, base + ".mlir", base + ".unfused.so", false);
  return base;
}

} // namespace tfc::bench
