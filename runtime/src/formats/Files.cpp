//===- Files.cpp - Outputs that would overwrite a tool's inputs -----------===//

#include "tfc/runtime/files.h"

#include <climits>
#include <cstdlib>
#include <sys/stat.h>

namespace tfc {

namespace {

/// `path` with its directory made canonical (the file itself need not
/// exist); `path` as it is when the directory cannot be resolved.
std::string canonicalName(const std::string &path) {
  size_t slash = path.find_last_of('/');
  std::string dir = slash == std::string::npos ? "."
                    : slash == 0               ? "/"
                                               : path.substr(0, slash);
  std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  char resolved[PATH_MAX];
  if (!realpath(dir.c_str(), resolved))
    return path;
  return std::string(resolved) + "/" + name;
}

} // namespace

bool sameFile(const std::string &a, const std::string &b) {
  struct stat sa, sb;
  bool hasA = ::stat(a.c_str(), &sa) == 0, hasB = ::stat(b.c_str(), &sb) == 0;
  if (hasA && hasB)
    return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
  if (hasA != hasB)
    return false;
  return canonicalName(a) == canonicalName(b);
}

std::string checkOutputs(const std::vector<ToolFile> &inputs,
                         const std::vector<ToolFile> &outputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const ToolFile &out = outputs[i];
    for (const ToolFile &in : inputs)
      if (sameFile(out.path, in.path))
        return out.what + " " + out.path + " is the same file as " + in.what +
               " " + in.path + " (writing it would destroy that input)";
    for (size_t j = 0; j < i; ++j)
      if (sameFile(out.path, outputs[j].path))
        return out.what + " " + out.path + " is the same file as " +
               outputs[j].what + " " + outputs[j].path +
               " (one output would overwrite the other)";
  }
  return "";
}

} // namespace tfc
