//===- Config.cpp - Typed access to a Hugging Face config.json ------------===//

#include "Config.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/Error.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace mlir;
using namespace llvm;

namespace tfc::importer {

/// `path: N bytes, more than a config file holds (16 MiB)`.
static std::string tooLarge(StringRef path, uint64_t bytes) {
  return (path + ": " + Twine(bytes) + " bytes, more than a config file " +
          "holds (" + Twine(kMaxJsonFileBytes >> 20) + " MiB)")
      .str();
}

/// The contents of the regular file `path`, at most kMaxJsonFileBytes.
static FailureOr<std::string> readSmallFile(StringRef path,
                                            std::string &error) {
  std::string name = path.str();
  auto cannotRead = [&](int err) {
    error = (path + ": cannot read: " + std::strerror(err)).str();
    return failure();
  };
  // Checked before opening, so that opening has no effect (a FIFO would
  // wait for a writer, some devices act on open), and again on what was
  // opened (the name may have been replaced in between). O_NONBLOCK: an
  // open FIFO never waits either.
  struct stat st;
  if (::stat(name.c_str(), &st) != 0)
    return cannotRead(errno);
  if (!S_ISREG(st.st_mode)) {
    error = (path + ": not a regular file").str();
    return failure();
  }
  if (uint64_t(st.st_size) > kMaxJsonFileBytes) {
    error = tooLarge(path, uint64_t(st.st_size));
    return failure();
  }
  int fd = ::open(name.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return cannotRead(errno);
  auto closeFd = llvm::make_scope_exit([&] { ::close(fd); });
  if (::fstat(fd, &st) != 0)
    return cannotRead(errno);
  if (!S_ISREG(st.st_mode)) {
    error = (path + ": not a regular file").str();
    return failure();
  }
  // Read at most one byte past the bound: a file that grew since fstat is
  // refused too, and nothing reads without end.
  std::string text;
  text.resize(size_t(kMaxJsonFileBytes) + 1);
  size_t got = 0;
  while (got < text.size()) {
    ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return cannotRead(errno);
    if (n == 0)
      break;
    got += size_t(n);
  }
  if (got > kMaxJsonFileBytes) {
    error = tooLarge(path, got);
    return failure();
  }
  text.resize(got);
  return text;
}

FailureOr<json::Value> parseJsonFile(StringRef path, std::string &error) {
  FailureOr<std::string> text = readSmallFile(path, error);
  if (failed(text))
    return failure();
  Expected<json::Value> parsed = json::parse(*text);
  if (!parsed) {
    error = (path + ": malformed JSON: " + toString(parsed.takeError())).str();
    return failure();
  }
  return std::move(*parsed);
}

FailureOr<JsonConfig> JsonConfig::load(StringRef path, std::string &error) {
  FailureOr<json::Value> parsed = parseJsonFile(path, error);
  if (failed(parsed))
    return failure();
  json::Object *object = parsed->getAsObject();
  if (!object) {
    error = (path + ": expected a JSON object at the top level").str();
    return failure();
  }
  return JsonConfig(path.str(), std::move(*object));
}

FailureOr<JsonConfig> JsonConfig::nested(StringRef field,
                                         std::string &error) const {
  const json::Object *object = root.getObject(field);
  if (!object) {
    (void)fieldError(field, root.get(field) ? "expected an object" : "missing",
                     error);
    return failure();
  }
  return JsonConfig(filePath, *object, fieldPrefix + field.str() + ".");
}

LogicalResult JsonConfig::fieldError(StringRef field, const Twine &message,
                                     std::string &error) const {
  error =
      (filePath + ": field \"" + fieldPrefix + field + "\": " + message).str();
  return failure();
}

FailureOr<int64_t> JsonConfig::positiveInt(StringRef field,
                                           std::string &error) const {
  const json::Value *v = root.get(field);
  if (!v) {
    (void)fieldError(field, "missing (expected a positive integer)", error);
    return failure();
  }
  std::optional<int64_t> i = v->getAsInteger();
  if (!i) {
    // 384.0 is accepted; 384.5 and "384" are not.
    std::optional<double> d = v->getAsNumber();
    if (d && std::isfinite(*d) && *d == std::floor(*d) && *d < 9e18)
      i = static_cast<int64_t>(*d);
  }
  if (!i || *i <= 0) {
    (void)fieldError(field, "expected a positive integer", error);
    return failure();
  }
  return *i;
}

FailureOr<double> JsonConfig::number(StringRef field, std::string &error,
                                     std::optional<double> fallback) const {
  const json::Value *v = root.get(field);
  if (!v) {
    if (fallback)
      return *fallback;
    (void)fieldError(field, "missing (expected a number)", error);
    return failure();
  }
  std::optional<double> d = v->getAsNumber();
  if (!d || !std::isfinite(*d)) {
    (void)fieldError(field, "expected a number", error);
    return failure();
  }
  return *d;
}

FailureOr<double> JsonConfig::positiveNumber(StringRef field,
                                             std::string &error,
                                             double fallback) const {
  FailureOr<double> d = number(field, error, fallback);
  if (succeeded(d) && *d <= 0) {
    (void)fieldError(field, "expected a positive number", error);
    return failure();
  }
  return d;
}

FailureOr<std::string>
JsonConfig::string(StringRef field, std::string &error,
                   std::optional<StringRef> fallback) const {
  const json::Value *v = root.get(field);
  if (!v) {
    if (fallback)
      return fallback->str();
    (void)fieldError(field, "missing (expected a string)", error);
    return failure();
  }
  std::optional<StringRef> s = v->getAsString();
  if (!s) {
    (void)fieldError(field, "expected a string", error);
    return failure();
  }
  return s->str();
}

FailureOr<bool> JsonConfig::boolean(StringRef field, std::string &error,
                                    bool fallback) const {
  const json::Value *v = root.get(field);
  if (!v)
    return fallback;
  std::optional<bool> b = v->getAsBoolean();
  if (!b) {
    (void)fieldError(field, "expected true or false", error);
    return failure();
  }
  return *b;
}

FailureOr<std::vector<std::string>>
JsonConfig::stringList(StringRef field, std::string &error) const {
  std::vector<std::string> out;
  const json::Value *v = root.get(field);
  if (!v)
    return out;
  const json::Array *array = v->getAsArray();
  if (!array) {
    (void)fieldError(field, "expected an array of strings", error);
    return failure();
  }
  for (const json::Value &e : *array) {
    std::optional<StringRef> s = e.getAsString();
    if (!s) {
      (void)fieldError(field, "expected an array of strings", error);
      return failure();
    }
    out.push_back(s->str());
  }
  return out;
}

} // namespace tfc::importer
