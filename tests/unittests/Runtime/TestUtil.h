//===- TestUtil.h - Helpers for the runtime tests ----------------*- C++
//-*-===//

#ifndef TFC_UNITTESTS_RUNTIME_TESTUTIL_H
#define TFC_UNITTESTS_RUNTIME_TESTUTIL_H

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unistd.h>
#include <vector>

namespace tfc::testing {

/// A fresh directory under $TMPDIR, removed with its files at destruction.
class TempDir {
public:
  TempDir() {
    const char *base = std::getenv("TMPDIR");
    std::string pattern = std::string(base ? base : "/tmp") + "/tfcrt-XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data()))
      dir = buf.data();
  }
  ~TempDir() {
    for (const std::string &file : files)
      std::remove(file.c_str());
    if (!dir.empty())
      rmdir(dir.c_str());
  }
  std::string path(const std::string &name) {
    std::string full = dir + "/" + name;
    files.push_back(full);
    return full;
  }
  std::string write(const std::string &name, const std::string &bytes) {
    std::string full = path(name);
    FILE *out = std::fopen(full.c_str(), "wb");
    if (out) {
      std::fwrite(bytes.data(), 1, bytes.size(), out);
      std::fclose(out);
    }
    return full;
  }

private:
  std::string dir;
  std::vector<std::string> files;
};

inline std::string readFile(const std::string &path) {
  std::string bytes;
  FILE *in = std::fopen(path.c_str(), "rb");
  if (!in)
    return bytes;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), in)) > 0)
    bytes.append(buf, n);
  std::fclose(in);
  return bytes;
}

inline std::string fixture(const std::string &name) {
  return std::string(TFC_FIXTURES_DIR) + "/" + name;
}

} // namespace tfc::testing

#endif // TFC_UNITTESTS_RUNTIME_TESTUTIL_H
